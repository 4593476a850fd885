/* src/engine/seccomp_main.c — kbox-seccomp: install kbox's seccomp filter,
 * then run a program under it.  The docker backend binds it read-only into
 * each container (as Docker binds its docker-init) and the container's
 * entrypoint runs the kernel through it, so that the kernel in a container
 * has the filter a bubblewrap sandbox has (src/runtime/bwrap.c), on top of
 * the engine's own profile: seccomp filters stack, and the strictest
 * answer wins.
 *
 *     KBOX_SECCOMP=HEX kbox-seccomp PROGRAM [ARG...]
 *
 * HEX is the filter as the supervisor made it (libseccomp's export: an
 * array of struct sock_filter in this machine's byte order), two hex digits
 * a byte.  The variable is dropped before PROGRAM runs.  Without a filter
 * that installs, PROGRAM never runs: exit 127, one line on standard error.
 *
 * It runs inside containers of images kbox did not build (their C library
 * may be another, or none), so it is linked statically and uses nothing
 * of the C library's but system calls, getenv, execvp and stdio. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VAR "KBOX_SECCOMP"

static int fail(const char *what, const char *why)
{
	fprintf(stderr, "kbox-seccomp: %s: %s\n", what, why);
	return 127;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int main(int argc, char **argv)
{
	static struct sock_filter insns[BPF_MAXINSNS];
	unsigned char *bytes = (unsigned char *)insns;
	const char *hex = getenv(VAR);
	size_t len, n;

	if (argc < 2)
		return fail("usage", "KBOX_SECCOMP=HEX kbox-seccomp PROGRAM [ARG...]");
	if (!hex || !*hex)
		return fail(VAR, "not set: no filter to install");
	len = strlen(hex);
	if (len % (2 * sizeof *insns) || len / 2 > sizeof insns)
		return fail(VAR, "not a filter (a whole number of instructions, at most 4096)");
	for (n = 0; n < len / 2; n++) {
		int hi = hex_digit(hex[2 * n]), lo = hex_digit(hex[2 * n + 1]);
		if (hi < 0 || lo < 0)
			return fail(VAR, "not a filter (two lowercase hex digits a byte)");
		bytes[n] = (unsigned char)(hi << 4 | lo);
	}
	if (unsetenv(VAR) < 0)
		return fail(VAR, strerror(errno));

	struct sock_fprog prog = {.len = (unsigned short)(n / sizeof *insns), .filter = insns};
	/* the engine set no_new_privs already (no-new-privileges); without
	 * it, an unprivileged process cannot install a filter */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail("no_new_privs", strerror(errno));
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return fail("installing the filter", strerror(errno));
	execvp(argv[1], argv + 1);
	return fail(argv[1], strerror(errno));
}
