/* src/cli/cmd_get.c — kbox get: copy a file out of the workspace.
 *
 * The kernel controls the workspace, and the host path may be in a
 * directory others can write (/tmp): the source is opened beneath the
 * workspace and must be a regular file (a FIFO, socket, device or
 * whiteout is refused before it is opened for reading); the copy goes
 * to a new file beside the destination, which is renamed over it when
 * complete, so a symbolic link at the destination is never followed
 * and a partial copy never replaces anything.  Holes stay holes. */
#include "config.h"
#include "cli.h"
#include "common/kx.h"
#include "runtime/backend.h"
#include "runtime/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The temporary file, removed by a signal that ends kbox mid-copy
 * (cli_guard_signals). */
static volatile sig_atomic_t tmp_live;
static int tmp_dirfd = -1;
static char tmp_name[64];

static void remove_tmp(void)
{
	if (tmp_live)
		unlinkat(tmp_dirfd, tmp_name, 0);
}

/* Copy bytes [FROM, TO) of IN to OUT: at the same offsets when AT (pwrite),
 * else appended (a pipe, a terminal).  Returns 0 and sets *END to where
 * it stopped (before TO when IN shrank), or -1 with errno. */
static int copy_range(int in, int out, off_t from, off_t to, bool at, off_t *end)
{
	static char buf[1 << 17];
	while (from < to) {
		size_t want = (size_t)(to - from) < sizeof buf ? (size_t)(to - from) : sizeof buf;
		ssize_t n = kx_pread_full(in, buf, want, from), off = 0;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		while (off < n) {
			ssize_t w = at ? pwrite(out, buf + off, (size_t)(n - off), from + off)
			               : write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -1;
			off += w;
		}
		from += n;
	}
	*end = from;
	return 0;
}

/* Copy the first SIZE bytes of IN (the size it had when opened: a file
 * that grows meanwhile is not followed) to the regular file OUT, empty,
 * writing only IN's data (SEEK_DATA, SEEK_HOLE) and leaving its holes as
 * holes, then set OUT's size.  0, or -1 with errno. */
static int copy_sparse(int in, int out, off_t size)
{
	off_t off = 0;
	while (off < size) {
		off_t data = lseek(in, off, SEEK_DATA), hole, end;
		if (data < 0 && errno == ENXIO)
			break; /* a hole to the end */
		if (data < 0 && errno != EINVAL && errno != EOPNOTSUPP)
			return -1;
		if (data < 0) { /* no hole information: all of it is data */
			data = off;
			hole = size;
		} else {
			if (data >= size)
				break;
			hole = lseek(in, data, SEEK_HOLE);
			if (hole < 0 || hole > size)
				hole = size;
		}
		if (copy_range(in, out, data, hole, true, &end) < 0)
			return -1;
		if (end < hole) { /* IN shrank: it ends here */
			size = end;
			break;
		}
		off = hole;
	}
	return ftruncate(out, size);
}

/* Copy the first SIZE bytes of IN to the stream OUT, holes as zeros. */
static int copy_stream(int in, int out, off_t size)
{
	off_t end;
	return copy_range(in, out, 0, size, false, &end);
}

/* Where write_host writes: the final path, its directory (open) and
 * name there, and the mode the file gets. */
typedef struct {
	char *path, *dircopy, *namecopy;
	const char *name;
	int dirfd;
	mode_t mode;
} target_t;

static void target_free(target_t *t)
{
	if (t->dirfd >= 0)
		close(t->dirfd);
	free(t->namecopy);
	free(t->dircopy);
	free(t->path);
}

/* Find T for the host path HOST, which is not "-": a directory (or a
 * path ending in '/') gets the file under SRC's last component; a
 * symbolic link, or anything but a regular file, at the final path is
 * refused; the mode is that of the file it replaces (less set-user-ID
 * and set-group-ID) or 0644 less the umask.  EXIT_OK, or an exit status
 * after one error line. */
static int find_target(const char *src, const char *host, target_t *t)
{
	size_t hl = strlen(host);
	const char *parent;
	struct stat st;

	if (host[hl - 1] == '/' || (lstat(host, &st) == 0 && S_ISDIR(st.st_mode))) {
		char *sc = strdup(src);
		if (!sc || asprintf(&t->path, "%s%s%s", host, host[hl - 1] == '/' ? "" : "/",
		                    basename(sc)) < 0)
			t->path = NULL;
		free(sc);
	} else
		t->path = strdup(host);
	if (!t->path || !(t->dircopy = strdup(t->path)) || !(t->namecopy = strdup(t->path))) {
		cli_error("get", "out of memory");
		return EXIT_UNAVAILABLE;
	}
	t->name = basename(t->namecopy);
	parent = dirname(t->dircopy);
	if ((t->dirfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		/* the directory as the user named it: "out/" of "out/", "a/b" of "a/b/x" */
		const char *d = host[hl - 1] == '/' ? host : parent;
		if (errno == ENOENT)
			cli_error("get", "directory %s does not exist", d);
		else if (errno == ENOTDIR)
			cli_error("get", "%s is not a directory", d);
		else
			cli_error("get", "cannot write %s: %s", t->path, strerror(errno));
		return EXIT_USAGE;
	}
	if (fstatat(t->dirfd, t->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode)) {
			cli_error("get",
			          "%s is a symbolic link (refused; a link is not written "
			          "through or replaced)",
			          t->path);
			return EXIT_USAGE;
		}
		if (S_ISDIR(st.st_mode)) {
			cli_error("get", "cannot write %s: %s", t->path, strerror(EISDIR));
			return EXIT_USAGE;
		}
		if (!S_ISREG(st.st_mode)) {
			cli_error("get", "%s is %s, not a regular file (refused)", t->path,
			          ws_file_kind(&st));
			return EXIT_USAGE;
		}
		t->mode = st.st_mode & 0777;
	} else if (errno == ENOENT) {
		mode_t mask = umask(0);
		umask(mask);
		t->mode = 0644 & ~mask;
	} else {
		cli_error("get", "cannot write %s: %s", t->path, strerror(errno));
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Write IN (SIZE bytes; SRC names it) to the host path HOST (see
 * find_target): the copy is made in a temporary file beside it and
 * renamed over it.  An exit status, after one error line when it is not
 * EXIT_OK. */
static int write_host(int in, off_t size, const char *src, const char *host)
{
	target_t t = {.dirfd = -1};
	int status, out = -1, n;
	cli_signal_guard_t guard;
	bool guarded = false;

	if ((status = find_target(src, host, &t)) != EXIT_OK)
		goto out;
	status = EXIT_USAGE;
	tmp_dirfd = t.dirfd;
	cli_guard_signals(&guard, remove_tmp);
	guarded = true;
	if ((out = kx_temp_open(t.dirfd, ".kbox-get-", 0600, tmp_name, sizeof tmp_name)) < 0) {
		cli_error("get", "cannot write %s: cannot create a file beside it: %s", t.path,
		          strerror(errno));
		goto out;
	}
	tmp_live = 1;
	status = EXIT_UNAVAILABLE;
	if (copy_sparse(in, out, size) < 0 || fchmod(out, t.mode) < 0 || fsync(out) < 0) {
		cli_error("get", "copying %s to %s: %s", src, t.path, strerror(errno));
		goto out;
	}
	n = close(out);
	out = -1;
	if (n < 0) {
		cli_error("get", "copying %s to %s: %s", src, t.path, strerror(errno));
		goto out;
	}
	/* the final name is replaced, never followed */
	status = EXIT_USAGE;
	if (renameat(t.dirfd, tmp_name, t.dirfd, t.name) < 0) {
		cli_error("get", "cannot write %s: %s", t.path, strerror(errno));
		goto out;
	}
	tmp_live = 0;
	status = EXIT_OK;
out:
	if (out >= 0)
		close(out);
	if (tmp_live) {
		unlinkat(t.dirfd, tmp_name, 0);
		tmp_live = 0;
	}
	if (guarded)
		cli_unguard_signals(&guard);
	target_free(&t);
	return status;
}

int cmd_get(int argc, char **argv)
{
	const char *name = NULL, *src, *host;
	int status, n, in = -1, ws = -1;
	bool hint;
	char *dir = NULL, *srccopy = NULL;
	struct stat st;
	kbox_error_t err = {0};
	cli_option_t opts[] = {CLI_OPT_SESSION(&name), CLI_OPT_END};

	if ((n = cli_parse_options("get", opts, argc, argv, &status)) < 0)
		return status;
	if (n < 1 || n > 2) {
		cli_error("get", "expected SRC [HOSTPATH] (see kbox get --help)");
		return EXIT_USAGE;
	}
	src = argv[0];
	/* the session first (kbox get sales out.png), when that is what it
	 * must mean: no session of the default name, or no such file in it */
	hint = !name && n == 2 && cli_operand_is_session(src);
	name = cli_session_name(name);
	if (hint && !cli_operand_is_session(name))
		return cli_session_operand_hint("get", src, argv[1]);
	if ((status = cli_check_session("get", name)) != EXIT_OK)
		return status;
	if (ws_check_path(src, &err) < 0) {
		struct stat hst;
		/* an [image saved: PATH] line's path, say: already the host's */
		if (src[0] == '/' && stat(src, &hst) == 0 && S_ISREG(hst.st_mode))
			cli_error(
			        "get",
			        "%s: an absolute path is outside the workspace; it is a file on "
			        "the host already (an image or text kbox saved, say): cp copies it",
			        src);
		else
			cli_error("get", "%s", err.msg);
		return EXIT_USAGE;
	}
	if (n == 2 && !*argv[1]) {
		cli_error("get", "empty host path");
		return EXIT_USAGE;
	}
	if (!(dir = cli_session_dir("get", name, false, &status)))
		return status;
	if ((status = cli_not_front_end("get", dir, name)) != EXIT_OK)
		goto out;
	if (cli_session_remote(dir)) {
		/* from the kernel's directory on its Jupyter server, into a
		 * file of memory first (so that no partial copy lands) */
		long long got = 0;
		if ((in = memfd_create("kbox-get", MFD_CLOEXEC)) < 0) {
			cli_error("get", "cannot hold %s: %s", src, strerror(errno));
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		if (kr_gateway_get(dir, src, in, 0, &got, NULL, &err) < 0) {
			if (hint && err.code == KBOX_E_NOTFOUND)
				cli_session_operand_hint("get", src, argv[1]);
			else
				cli_error("get", "%s", err.msg);
			status = cli_remote_status(&err);
			goto out;
		}
		st.st_size = (off_t)got;
	} else if ((ws = ws_open_session(dir, "workspace", &err)) < 0) {
		cli_error("get", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	/* a regular file, opened beneath the workspace */
	if (in < 0 && (in = ws_open_regular(ws, src, NULL, &st, &err)) < 0) {
		if (hint && err.code == KBOX_E_NOTFOUND)
			cli_session_operand_hint("get", src, argv[1]);
		else
			cli_error("get", "%s", err.msg);
		status = EXIT_USAGE;
		goto out;
	}
	if (!(srccopy = strdup(src))) {
		cli_error("get", "out of memory");
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	host = n == 2 ? argv[1] : basename(srccopy);
	if (strcmp(host, "-") != 0)
		status = write_host(in, st.st_size, src, host);
	else if (copy_stream(in, STDOUT_FILENO, st.st_size) < 0 && errno != EPIPE) {
		/* a reader that has gone (| head) took what it wanted: no error */
		cli_error("get", "copying %s: %s", src, strerror(errno));
		status = EXIT_UNAVAILABLE;
	}
out:
	if (in >= 0)
		close(in);
	if (ws >= 0)
		close(ws);
	free(srccopy);
	free(dir);
	return status;
}
