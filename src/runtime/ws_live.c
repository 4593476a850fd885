/* src/runtime/ws_live.c — the record of live workspaces (ws_live.h). */
#include "runtime/runtime.h"
#include "runtime/ws_live.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Directories above a state directory compared with the record. */
#define UP_MAX 256

/* Open the record's directory (made when MAKE), checked to be the
 * user's and private, into DIR (PATH_MAX bytes).  The descriptor; -2 when
 * there is none and MAKE is false; -1 with ERR. */
static int live_dir(bool make, char *dir, kbox_error_t *err)
{
	struct stat st;
	int fd;

	snprintf(dir, PATH_MAX, KR_LIVE_DIR_FMT, (unsigned)geteuid());
	if (make && mkdir(dir, 0700) < 0 && errno != EEXIST)
		return kbox_error_set_sys(err, "cannot create %s", dir);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		if (!make && errno == ENOENT)
			return -2;
		return kbox_error_set_sys(err, "cannot open %s", dir);
	}
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "%s, where kbox keeps the workspaces of running sandboxes, is not "
		               "this user's own private directory (owner uid %u, mode %03o): "
		               "remove it",
		               dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
		close(fd);
		return -1;
	}
	return fd;
}

int kr_live_ws_hold(const char *path, const struct stat *st, char *file, kbox_error_t *err)
{
	char dir[PATH_MAX], tmp[64], name[64], *text = NULL;
	int dfd, fd = -1, n;

	if ((dfd = live_dir(true, dir, err)) < 0)
		return -1;
	if ((fd = kx_temp_open(dfd, ".new-", 0600, tmp, sizeof tmp)) < 0) {
		kbox_error_set_sys(err, "cannot create a file in %s", dir);
		goto fail;
	}
	/* locked before it has its name: no one sees it unlocked */
	n = asprintf(&text, "%llu %llu %ld\n%s\n", (unsigned long long)st->st_dev,
	             (unsigned long long)st->st_ino, (long)getpid(), path);
	snprintf(name, sizeof name, "ws-%s", tmp + 5);
	if (n < 0) {
		text = NULL;
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto fail_tmp;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 || kx_write_all(fd, text, (size_t)n) < 0 ||
	    renameat(dfd, tmp, dfd, name) < 0) {
		kbox_error_set_sys(err, "cannot record the workspace %s in %s", path, dir);
		goto fail_tmp;
	}
	if ((size_t)snprintf(file, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
		file[0] = '\0'; /* (cannot be: DIR is short) */
	free(text);
	close(dfd);
	return fd;
fail_tmp:
	unlinkat(dfd, tmp, 0);
fail:
	free(text);
	if (fd >= 0)
		close(fd);
	close(dfd);
	return -1;
}

void kr_live_ws_release(int *fd, const char *file)
{
	if (*fd < 0)
		return;
	if (file && file[0])
		unlink(file);
	close(*fd);
	*fd = -1;
}

/* The device and inode of HOME's directories, from the nearest that
 * exists up to /, into UP (UP_MAX); how many. */
static size_t ancestors(const char *home, struct stat *up)
{
	char p[PATH_MAX], real[PATH_MAX];
	size_t n = 0;

	snprintf(p, sizeof p, "%s", home);
	while (!realpath(p, real)) {
		char *slash = strrchr(p, '/');
		if (!slash || slash == p) {
			snprintf(real, sizeof real, "/");
			break;
		}
		*slash = '\0';
	}
	for (;;) {
		char *slash;
		if (n < UP_MAX && stat(real, &up[n]) == 0)
			n++;
		if (strcmp(real, "/") == 0)
			break;
		slash = strrchr(real, '/');
		*(slash == real ? slash + 1 : slash) = '\0';
	}
	return n;
}

int kr_live_ws_refuses(const char *home, kbox_error_t *err)
{
	char dir[PATH_MAX], text[PATH_MAX + 128];
	struct stat *up;
	struct dirent *e;
	size_t n_up;
	int dfd, rc = 0;
	DIR *d;

	if ((dfd = live_dir(false, dir, err)) == -2)
		return 0;
	if (dfd < 0)
		return -1;
	if (!(up = calloc(UP_MAX, sizeof *up)) || !(d = fdopendir(dfd))) {
		free(up);
		close(dfd);
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	n_up = ancestors(home, up);
	while (rc == 0 && (e = readdir(d))) {
		unsigned long long dev, ino;
		long pid;
		int fd, used;
		ssize_t got;
		char *path;
		if (e->d_name[0] == '.')
			continue;
		if ((fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
			if (errno == ENOENT)
				continue; /* released meanwhile */
			rc = kbox_error_set_sys(err, "cannot read %s/%s", dir, e->d_name);
			break;
		}
		if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
			/* its supervisor is gone */
			unlinkat(dirfd(d), e->d_name, 0);
			close(fd);
			continue;
		}
		got = read(fd, text, sizeof text - 1);
		close(fd);
		text[got > 0 ? got : 0] = '\0';
		if (sscanf(text, "%llu %llu %ld\n%n", &dev, &ino, &pid, &used) != 3 ||
		    !(path = text + used) || !*path) {
			rc = kbox_error_set(err, KBOX_E_INVALID,
			                    "%s/%s, a record of a running sandbox's workspace, "
			                    "cannot be read",
			                    dir, e->d_name);
			break;
		}
		path[strcspn(path, "\n")] = '\0';
		for (size_t i = 0; i < n_up; i++)
			if ((unsigned long long)up[i].st_dev == dev &&
			    (unsigned long long)up[i].st_ino == ino) {
				rc = kbox_error_set(
				        err, KBOX_E_INVALID,
				        "state directory %s is in %s, the workspace of a running "
				        "sandbox (supervisor pid %ld): its code could reach the "
				        "sessions' keys and sockets; keep state directories (KBOX_HOME, "
				        "XDG_RUNTIME_DIR) outside it",
				        home, path, pid);
				break;
			}
	}
	closedir(d);
	free(up);
	return rc;
}
