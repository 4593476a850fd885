/* tests/unit_bwrap.c — the bwrap command line (src/runtime/bwrap.c): the
 * descriptors it passes bwrap (its options, the seccomp program, the
 * kernel's connection file and the synthetic /etc files) are memfds,
 * close-on-exec (kx_child_exec keeps them for bwrap only) and sealed, so
 * that what bwrap reads cannot change; and the kernel's connection file
 * and sockets go in a tmpfs of the sandbox's own, /run/kernel, with no
 * directory of the host's bound for them. */
#include "runtime/runtime.h"
#include "runtime/bwrap.h"
#include "runtime/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"

static const char conn_text[] = "{\"key\": \"k\", \"ip\": \"/run/kernel/kernel-x-ipc\"}";
static char **argv;
static int *fds;
static size_t n_fds;
static char opts[65536]; /* the options bwrap reads (--args), NULs made '\n' */

/* Whether OPTS has the consecutive words W (a NULL-terminated list). */
static int has_words(const char *const *w)
{
	char want[1024] = "\n";
	for (size_t i = 0; w[i]; i++) {
		strcat(want, w[i]);
		strcat(want, "\n");
	}
	return strstr(opts, want) != NULL;
}

TEST(every_descriptor_passed_to_bwrap_is_a_sealed_close_on_exec_memfd)
{
	REQUIRE(n_fds >= 3);
	for (size_t i = 0; i < n_fds; i++) {
		char link[64], target[256];
		ssize_t n;
		snprintf(link, sizeof link, "/proc/self/fd/%d", fds[i]);
		n = readlink(link, target, sizeof target - 1);
		REQUIRE(n > 0);
		target[n] = '\0';
		CHECK_CONTAINS(target, "/memfd:kbox-");
		CHECK_INT_EQ(fcntl(fds[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
		CHECK_INT_EQ(fcntl(fds[i], F_GET_SEALS),
		             F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
		CHECK_INT_EQ(write(fds[i], "x", 1), -1);
	}
}

TEST(the_connection_file_and_sockets_are_in_a_tmpfs_of_the_sandboxs_own)
{
	CHECK_INT_EQ(has_words((const char *const[]){"--size", "1048576", "--perms", "0700",
	                                             "--tmpfs", KR_BWRAP_KERNEL_DIR, NULL}),
	             1);
	CHECK_CONTAINS(opts, "\n" KR_BWRAP_KERNEL_DIR "/kernel-1.json\n");
	CHECK_INT_EQ(strstr(opts, "/run/kbox") == NULL, 1);
	CHECK_INT_EQ(strstr(opts, "/state/") == NULL, 1);
}

TEST(the_connection_file_is_passed_as_written)
{
	char buf[sizeof conn_text + 16];
	const char *p = strstr(opts, "\n--file\n");
	int fd;
	ssize_t n;
	REQUIRE(p);
	fd = atoi(p + 8);
	REQUIRE(fd > 2);
	n = pread(fd, buf, sizeof buf - 1, 0);
	REQUIRE(n >= 0);
	buf[n] = '\0';
	CHECK_STR_EQ(buf, conn_text);
}

/* What bwrap binds (the workspace, the home) is first opened through no
 * link in any part of its path (backend_bwrap.c's bind_source): review
 * 15's B15-1 put a link at the session's directory, a part above the
 * workspace, which a look at the last part alone followed. */
TEST(a_bind_source_is_reached_through_no_link_in_any_part)
{
	char top[] = "/tmp/kbox-unit-nolinks-XXXXXX", p[256], q[256];
	struct stat a, b;
	int fd;
	REQUIRE(mkdtemp(top) != NULL);
	snprintf(p, sizeof p, "%s/real", top);
	REQUIRE(mkdir(p, 0700) == 0);
	snprintf(p, sizeof p, "%s/real/workspace", top);
	REQUIRE(mkdir(p, 0700) == 0);
	snprintf(q, sizeof q, "%s/link", top);
	REQUIRE(symlink("real", q) == 0);

	fd = kx_open_no_links(AT_FDCWD, p, O_PATH | O_DIRECTORY, 0);
	CHECK_INT_EQ(fd >= 0, 1);
	CHECK_INT_EQ(fstat(fd, &a) == 0 && stat(p, &b) == 0 && a.st_ino == b.st_ino, 1);
	CHECK_INT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);
	snprintf(q, sizeof q, "%s/link/workspace", top); /* a link above */
	errno = 0;
	CHECK_INT_EQ(kx_open_no_links(AT_FDCWD, q, O_PATH | O_DIRECTORY, 0), -1);
	CHECK_INT_EQ(errno, ELOOP);
	snprintf(q, sizeof q, "%s/link", top); /* the last part a link */
	errno = 0;
	CHECK_INT_EQ(kx_open_no_links(AT_FDCWD, q, O_PATH | O_DIRECTORY, 0), -1);
	CHECK_INT_EQ(errno, ELOOP);
	snprintf(q, sizeof q, "%s/real/none", top);
	errno = 0;
	CHECK_INT_EQ(kx_open_no_links(AT_FDCWD, q, O_PATH | O_DIRECTORY, 0), -1);
	CHECK_INT_EQ(errno, ENOENT);

	snprintf(q, sizeof q, "%s/link", top);
	unlink(q);
	rmdir(p);
	snprintf(p, sizeof p, "%s/real", top);
	rmdir(p);
	rmdir(top);
}

int main(void)
{
	kr_bwrap_opts_t b = {0};
	char *cmd[] = {"/bin/true", NULL};
	kbox_error_t err = {0};
	char *bwrap = kr_bwrap_path();
	ssize_t n;
	int args;

	RUN(a_bind_source_is_reached_through_no_link_in_any_part);
	if (!bwrap) {
		printf("# SKIP the command line: no bwrap installed\n");
		return tap_done();
		return 0;
	}
	free(bwrap);
	b.workspace = "/tmp/kbox-unit-workspace";
	b.home = "/tmp/kbox-unit-home";
	b.conn_text = conn_text;
	b.conn_path = KR_BWRAP_KERNEL_DIR "/kernel-1.json";
	if (!(argv = kr_bwrap_argv(&b, cmd, &fds, &n_fds, &err)) || !argv[1] || !argv[2] ||
	    strcmp(argv[1], "--args") != 0) {
		printf("Bail out! kr_bwrap_argv: %s\n", err.msg);
		return 1;
	}
	args = atoi(argv[2]);
	n = pread(args, opts + 1, sizeof opts - 2, 0);
	if (n <= 0) {
		printf("Bail out! cannot read bwrap's options from %d\n", args);
		return 1;
	}
	opts[0] = '\n';
	for (ssize_t i = 1; i <= n; i++)
		if (!opts[i])
			opts[i] = '\n';
	RUN(every_descriptor_passed_to_bwrap_is_a_sealed_close_on_exec_memfd);
	RUN(the_connection_file_and_sockets_are_in_a_tmpfs_of_the_sandboxs_own);
	RUN(the_connection_file_is_passed_as_written);
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
	free(fds);
	kbox_strv_free(argv);
	return tap_done();
}
