/* src/runtime/workspace.c — a session's workspace seen from the host:
 * paths confined to it (openat2 RESOLVE_BENEATH, or a walk that refuses
 * every symbolic link), regular files read out of it, files written into
 * it beside their names and renamed over them, host files copied in, and
 * the host directories that may be one (workspace.h). */
#include "runtime/runtime.h"
#include "runtime/workspace.h"
#include "runtime/session.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- paths ---- */

int ws_check_path(const char *path, kbox_error_t *err)
{
	const char *p = path;
	if (!*path)
		return kbox_error_set(err, KBOX_E_INVALID, "empty workspace path");
	if (*path == '/')
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: an absolute path is outside the workspace (give a path "
		                      "relative to it)",
		                      path);
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: \"..\" would leave the workspace", path);
		p += n;
		while (*p == '/')
			p++;
	}
	return 0;
}

/* Walk PATH from DIRFD one component at a time refusing every symlink. */
static int open_nofollow_walk(int dirfd, const char *path, int flags, unsigned mode)
{
	char *copy = strdup(path), *save = NULL, *part, *next;
	int fd = dup(dirfd);
	if (!copy || fd < 0) {
		free(copy);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	part = strtok_r(copy, "/", &save);
	while (part) {
		int nfd;
		next = strtok_r(NULL, "/", &save);
		if (next)
			nfd = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		else
			nfd = openat(fd, part, flags | O_NOFOLLOW | O_CLOEXEC, mode);
		close(fd);
		if (nfd < 0) {
			free(copy);
			return -1;
		}
		fd = nfd;
		part = next;
	}
	free(copy);
	return fd;
}

int ws_open(int dirfd, const char *path, int flags, unsigned mode)
{
	struct open_how how = {0};
	long fd;
	how.flags = (unsigned long long)(flags | O_CLOEXEC);
	how.mode = (flags & O_CREAT) ? mode : 0;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	if (fd < 0 && errno == ENOSYS)
		return open_nofollow_walk(dirfd, path, flags, mode);
	return (int)fd;
}

const char *ws_strerror(int e)
{
	switch (e) {
	case EXDEV:
		return "it leads outside the workspace (through a symlink)";
	case ELOOP:
		return "a symlink is in the way (refused)";
	default:
		return strerror(e);
	}
}

const char *ws_file_kind(const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return "a directory";
	if (S_ISFIFO(st->st_mode))
		return "a FIFO";
	if (S_ISSOCK(st->st_mode))
		return "a socket";
	if (S_ISLNK(st->st_mode))
		return "a symbolic link";
	if (S_ISCHR(st->st_mode) && st->st_rdev == 0)
		return "a whiteout";
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		return "a device";
	return "a special file";
}

int ws_open_session(const char *session_dir, const char *sub, kbox_error_t *err)
{
	char path[PATH_MAX];
	int fd;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", session_dir, sub) >= sizeof path) {
		errno = ENAMETOOLONG;
		return kbox_error_set_sys(err, "cannot open %s/%s", session_dir, sub);
	}
	if ((fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return kbox_error_set_sys(err, "cannot open %s", path);
	return fd;
}

/* Open the directory DIR beneath WS, O_PATH: the descriptor, or -1 with
 * ERR as ws_open_parent says. */
static int open_dir(int ws, const char *dir, kbox_error_t *err)
{
	int fd = ws_open(ws, dir, O_PATH | O_DIRECTORY, 0);
	if (fd >= 0)
		return fd;
	if (errno == ENOENT)
		return kbox_error_set(err, KBOX_E_NOTFOUND,
		                      "directory %s does not exist in the workspace", dir);
	if (errno == ENOTDIR)
		return kbox_error_set(err, KBOX_E_INVALID, "%s is not a directory in the workspace",
		                      dir);
	return kbox_error_set(err, KBOX_E_INVALID, "%s: %s", dir, ws_strerror(errno));
}

int ws_open_parent(int ws, const char *path, const char **name, kbox_error_t *err)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int fd;

	*name = slash ? slash + 1 : path;
	if (!slash) {
		if ((fd = fcntl(ws, F_DUPFD_CLOEXEC, 0)) < 0)
			return kbox_error_set_sys(err, "%s", path);
		return fd;
	}
	if (!(dir = strndup(path, (size_t)(slash - path))))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	fd = open_dir(ws, dir, err);
	free(dir);
	return fd;
}

/* ---- reading ---- */

int ws_open_regular(int dirfd, const char *path, const char *shown, struct stat *st,
                    kbox_error_t *err)
{
	int path_fd, fd = -1;
	struct stat again;
	char proc[64];

	if (!shown)
		shown = path;
	if ((path_fd = ws_open(dirfd, path, O_PATH, 0)) < 0)
		return kbox_error_set(err, errno == ENOENT ? KBOX_E_NOTFOUND : KBOX_E_INVALID,
		                      "%s: %s", shown, ws_strerror(errno));
	if (fstat(path_fd, st) < 0) {
		kbox_error_set(err, KBOX_E_SYSTEM, "%s: %s", shown, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st->st_mode)) {
		if (S_ISLNK(st->st_mode)) /* the walk without openat2 */
			kbox_error_set(err, KBOX_E_INVALID, "%s: %s", shown, ws_strerror(ELOOP));
		else
			kbox_error_set(err, KBOX_E_INVALID,
			               "%s is %s, not a regular file (refused)", shown,
			               ws_file_kind(st));
		goto out;
	}
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", path_fd);
	fd = open(proc, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		fd = ws_open(dirfd, path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0);
	if (fd < 0) {
		kbox_error_set(err, KBOX_E_INVALID, "%s: %s", shown, ws_strerror(errno));
		goto out;
	}
	if (fstat(fd, &again) < 0 || again.st_dev != st->st_dev || again.st_ino != st->st_ino) {
		kbox_error_set(err, KBOX_E_INVALID, "%s changed while it was opened (refused)",
		               shown);
		close(fd);
		fd = -1;
		goto out;
	}
	fcntl(fd, F_SETFL, 0);
out:
	close(path_fd);
	return fd;
}

/* ---- writing ---- */

int ws_file_begin(ws_file_t *f, int dirfd, const char *name, const char *shown, const char *tag,
                  kbox_error_t *err)
{
	char prefix[32];
	struct stat st;

	f->dirfd = dirfd;
	if (!(f->name = strdup(name)) || !(f->shown = strdup(shown)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		return kbox_error_set(err, KBOX_E_INVALID, "%s is a directory in the workspace",
		                      shown);
	snprintf(prefix, sizeof prefix, ".kbox-%s-", tag);
	if ((f->fd = kx_temp_open(dirfd, prefix, 0644, f->tmp, sizeof f->tmp)) < 0) {
		f->tmp[0] = '\0';
		return kbox_error_set_sys(err, "cannot create a file in the workspace");
	}
	/* under root the workspace is the sandbox user's: so is the file (its
	 * directory's owner) */
	if (geteuid() == 0 && fstat(dirfd, &st) == 0 && st.st_uid != 0 &&
	    fchown(f->fd, st.st_uid, st.st_gid) < 0)
		return kbox_error_set_sys(err, "cannot give the file to uid %u",
		                          (unsigned)st.st_uid);
	return 0;
}

int ws_file_commit(ws_file_t *f, kbox_error_t *err)
{
	if (renameat(f->dirfd, f->tmp, f->dirfd, f->name) < 0)
		return kbox_error_set_sys(err, "cannot write %s in the workspace", f->shown);
	f->tmp[0] = '\0';
	return 0;
}

void ws_file_end(ws_file_t *f)
{
	if (f->tmp[0] && f->dirfd >= 0)
		unlinkat(f->dirfd, f->tmp, 0);
	if (f->fd >= 0)
		close(f->fd);
	if (f->dirfd >= 0)
		close(f->dirfd);
	free(f->name);
	free(f->shown);
	*f = (ws_file_t)WS_FILE_INIT;
}

/* ---- host files ---- */

int ws_source_open(const char *path, kbox_error_t *err)
{
	struct stat st;
	int fd = open(path,
	              O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC); /* a FIFO must not block */

	if (fd < 0 || fstat(fd, &st) < 0) {
		kbox_error_set_sys(err, "cannot read %s", path);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return kbox_error_set(err, KBOX_E_INVALID, "%s is not a regular file", path);
	}
	fcntl(fd, F_SETFL, 0);
	return fd;
}

int ws_copy_fd(int in, int out)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return (int)n;
		if (kx_write_all(out, buf, (size_t)n) < 0)
			return -1;
	}
}

int ws_put(const char *session_dir, int in, const char *host, const char *dest, kbox_error_t *err)
{
	ws_file_t f = WS_FILE_INIT;
	const char *name;
	char *hostcopy = NULL;
	int ws, parent = -1, rc = -1;

	if ((ws = ws_open_session(session_dir, "workspace", err)) < 0)
		return -1;
	/* DEST naming a directory (or ending in '/'): the file goes in it */
	if (dest[strlen(dest) - 1] == '/' ||
	    (parent = ws_open(ws, dest, O_PATH | O_DIRECTORY, 0)) >= 0) {
		if (parent < 0 && (parent = open_dir(ws, dest, err)) < 0)
			goto out;
		if (!(hostcopy = strdup(host))) {
			close(parent);
			kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
			goto out;
		}
		name = basename(hostcopy);
	} else if ((parent = ws_open_parent(ws, dest, &name, err)) < 0)
		goto out;
	if (ws_file_begin(&f, parent, name, dest, "put", err) < 0)
		goto out;
	if (ws_copy_fd(in, f.fd) < 0 || fsync(f.fd) < 0) {
		kbox_error_set_sys(err, "copying %s", host);
		goto out;
	}
	rc = ws_file_commit(&f, err);
out:
	ws_file_end(&f);
	free(hostcopy);
	close(ws);
	return rc;
}

/* ---- host directories as workspaces ---- */

/* Never a workspace (kbox run --workspace): /; the system's directories
 * and everything in them; the places that many share (users, mounts,
 * temporary files) themselves, although what is in them may be one, even
 * inside a system directory (/var/tmp/x, /run/media/ada/disk); a home
 * directory and any directory that holds one; and kbox's state directory,
 * in it, or holding it. */
static const char *const system_trees[] = {"/bin",   "/boot",   "/dev", "/etc",  "/lib", "/lib32",
                                           "/lib64", "/libx32", "/opt", "/proc", "/run", "/sbin",
                                           "/snap",  "/sys",    "/usr", "/var",  NULL};
static const char *const shared_dirs[] = {"/home", "/media", "/mnt",     "/root", "/run/media",
                                          "/srv",  "/tmp",   "/var/tmp", NULL};

/* Whether PATH is DIR or inside it (both absolute and resolved). */
static bool within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (strcmp(dir, "/") == 0)
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Why DIR (resolved) may not hold home directory HOME (as the passwd
 * entry or $HOME gives it; resolved here when it exists), into WHY; false
 * when it may. */
static bool home_refuses(const char *dir, const char *home, char *why, size_t size)
{
	char real[PATH_MAX];
	if (!home || home[0] != '/')
		return false;
	if (!realpath(home, real))
		snprintf(real, sizeof real, "%s", home);
	if (strcmp(dir, real) == 0)
		snprintf(why, size, "%s is a home directory", dir);
	else if (within(real, dir))
		snprintf(why, size, "%s holds the home directory %s", dir, real);
	else
		return false;
	return true;
}

/* Why the resolved directory DIR may not be a workspace, into WHY; false
 * when it may. */
static bool dir_refused(const char *dir, char *why, size_t size)
{
	char *state, real[PATH_MAX];
	struct passwd *pw;
	bool refused = false;

	if (strcmp(dir, "/") == 0) {
		snprintf(why, size, "/ is the root directory");
		return true;
	}
	for (size_t i = 0; system_trees[i]; i++)
		if (strcmp(dir, system_trees[i]) == 0) {
			snprintf(why, size, "%s is a system directory", dir);
			return true;
		}
	for (size_t i = 0; system_trees[i]; i++) {
		bool shared = false;
		if (!within(dir, system_trees[i]))
			continue;
		for (size_t j = 0; shared_dirs[j]; j++)
			shared |= within(dir, shared_dirs[j]) &&
			          within(shared_dirs[j], system_trees[i]);
		if (!shared) {
			snprintf(why, size, "%s is in the system directory %s", dir,
			         system_trees[i]);
			return true;
		}
	}
	if (home_refuses(dir, getenv("HOME"), why, size))
		return true;
	setpwent();
	while (!refused && (pw = getpwent()))
		refused = home_refuses(dir, pw->pw_dir, why, size);
	endpwent();
	if (refused)
		return true;
	for (size_t i = 0; shared_dirs[i]; i++)
		if (strcmp(dir, shared_dirs[i]) == 0) {
			snprintf(why, size, "%s is a system directory", dir);
			return true;
		}
	/* the sessions' keys and workspaces */
	if ((state = kr_state_home(NULL))) {
		if (!realpath(state, real))
			snprintf(real, sizeof real, "%s", state);
		free(state);
		if (strcmp(dir, real) == 0)
			snprintf(why, size, "%s is kbox's state directory", dir);
		else if (within(dir, real))
			snprintf(why, size, "%s is in kbox's state directory %s", dir, real);
		else if (within(real, dir))
			snprintf(why, size, "%s holds kbox's state directory %s", dir, real);
		else
			return false;
		return true;
	}
	return false;
}

int ws_host_dir(const char *path, char *out, struct stat *st_out, kbox_error_t *err)
{
	struct stat st;
	char why[2 * PATH_MAX + 64], link[64];
	ssize_t n;
	int fd;

	/* the directory itself first, then its name: what is checked below is
	 * where the directory open here is, whatever is renamed meanwhile, and
	 * its device and inode are what the sandbox must bind (the
	 * supervisor checks them in the sandbox before the kernel runs) */
	if ((fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return kbox_error_set(err, KBOX_E_INVALID, "%s: %s", path, strerror(errno));
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	n = readlink(link, out, PATH_MAX - 1);
	if (n <= 0 || n >= PATH_MAX - 1 || out[0] != '/' || fstat(fd, &st) < 0) {
		kbox_error_set(err, KBOX_E_INVALID, "%s: cannot tell where it is: %s", path,
		               n <= 0 ? strerror(errno) : "not an absolute path");
		close(fd);
		return -1;
	}
	out[n] = '\0';
	close(fd);
	if (!S_ISDIR(st.st_mode))
		return kbox_error_set(err, KBOX_E_INVALID, "%s: %s", path, strerror(ENOTDIR));
	if (st_out)
		*st_out = st;
	if (dir_refused(out, why, sizeof why))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: refused: %s, and the code can change everything in its "
		                      "workspace",
		                      path, why);
	return 0;
}
