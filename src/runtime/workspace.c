/* src/runtime/workspace.c — a session's workspace seen from the host:
 * paths confined to it (openat2 RESOLVE_BENEATH, or a walk that refuses
 * every symbolic link), regular files read out of it, files written into
 * it beside their names and renamed over them, host files copied in, and
 * the host directories that may be one (workspace.h). */
#include "runtime/runtime.h"
#include "runtime/workspace.h"
#include "runtime/session.h"
#include "runtime/ws_live.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdio.h>
#include <signal.h>
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

int ws_open(int dirfd, const char *path, int flags, unsigned mode)
{
	return kx_openat2(dirfd, path, flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
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
	if ((fd = kx_open_path(AT_FDCWD, path, O_PATH | O_DIRECTORY, 0)) < 0)
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
		                      "directory %s does not exist in the workspace (none is "
		                      "made: make it first, with os.makedirs in the session's "
		                      "code, say)",
		                      dir);
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
		return kbox_error_set(
		        err, errno == ENOENT ? KBOX_E_NOTFOUND : KBOX_E_INVALID, "%s: %s", shown,
		        errno == ENOENT ? "no such file in the workspace" : ws_strerror(errno));
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

/* The temporary file of the ws_file being written, for ws_file_abandon. */
static volatile sig_atomic_t live_set;
static int live_dirfd = -1;
static char live_tmp[64];

void ws_file_abandon(void)
{
	if (live_set)
		unlinkat(live_dirfd, live_tmp, 0);
}

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
	if (strlen(f->tmp) < sizeof live_tmp) {
		live_set = 0;
		live_dirfd = dirfd;
		memcpy(live_tmp, f->tmp, strlen(f->tmp) + 1);
		live_set = 1;
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
	live_set = 0;
	f->tmp[0] = '\0';
	return 0;
}

void ws_file_end(ws_file_t *f)
{
	live_set = 0;
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
		if (!host) {
			kbox_error_set(
			        err, KBOX_E_INVALID,
			        "standard input (-) has no name, and %s names a directory in the "
			        "workspace: give the file's name in it (kbox put - DIR/NAME)",
			        dest);
			goto out;
		}
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
		kbox_error_set_sys(err, "copying %s", host ? host : "standard input");
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

/* ---- kbox's state directories, found by what is in them ---- */

/* How far ws_host_dir looks for state directories in a workspace: the
 * directories it reads, and how deep. */
#define STATE_WALK_DIRS 100000
#define STATE_WALK_DEPTH 128
/* The entries of a sessions directory read for a session.json. */
#define STATE_SESSIONS_SEEN 256

/* Whether the directory open at FD is a session's own: its session.json
 * beside its control socket, its connection files or its supervisor's
 * pid (kbox run's private session, or a session of a kbox before it
 * marked them). */
static bool is_session_dir(int fd)
{
	static const char *const beside[] = {"control.sock", "run", "supervisor.pid"};
	struct stat st;

	if (fstatat(fd, "session.json", &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++)
		if (fstatat(fd, beside[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
			return true;
	return false;
}

/* Whether the directory open at FD is a kbox state directory: one that
 * holds KR_STATE_MARK, a session's own (is_session_dir), or a sessions
 * directory with a session in it (NAME/session.json: a state directory
 * of a kbox before the mark). */
bool ws_is_state_dir(int fd)
{
	struct stat st;
	struct dirent *e;
	unsigned seen = 0;
	bool yes = false;
	DIR *d;
	int sfd;

	if (fstatat(fd, KR_STATE_MARK, &st, AT_SYMLINK_NOFOLLOW) == 0 || is_session_dir(fd))
		return true;
	if ((sfd = openat(fd, "sessions", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return false;
	if (!(d = fdopendir(sfd))) {
		close(sfd);
		return false;
	}
	while (!yes && seen++ < STATE_SESSIONS_SEEN && (e = readdir(d))) {
		char p[sizeof e->d_name + 16];
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "%s/session.json", e->d_name);
		yes = fstatat(dirfd(d), p, &st, AT_SYMLINK_NOFOLLOW) == 0;
	}
	closedir(d);
	return yes;
}

/* The walk of a workspace for state directories (state_walk). */
typedef struct {
	char path[PATH_MAX]; /* the directory being read */
	unsigned long dirs;  /* directories read so far */
	int found;           /* 1: PATH is a state directory; -1: too many, -2: too deep,
	            * -3: PATH may be passed, not read; -4: PATH could not be
	            * looked through (ERR says why); -5: PATH is the caller's
	            * own, closed to it (the code could open it) */
	int err;
} state_walk_t;

/* Look through the directory FD, at W->path (LEN bytes), DEPTH levels
 * down, and everything in it, for a state directory: W->found says. */
static void state_walk(state_walk_t *w, int fd, size_t len, unsigned depth)
{
	struct dirent *e;
	bool mark = false, sessions = false, session = false;
	DIR *d;
	int dfd;

	if (++w->dirs > STATE_WALK_DIRS || depth > STATE_WALK_DEPTH) {
		w->found = depth > STATE_WALK_DEPTH ? -2 : -1;
		return;
	}
	if ((dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		/* what we may not pass, a sandbox may not pass either (of our
		 * uid and groups as a user; under root, of another uid, and
		 * root passes anything): passed over.  One we may pass but not
		 * read could hide a state directory from us, not from the code
		 * (it opens names it knows): refused, whoever owns it. */
		int why = errno;
		struct stat own;
		/* ...but one of the caller's own (as an ordinary user, the
		 * sandbox's uid is the caller's): its owner, the code, can
		 * chmod it open */
		if (why == EACCES && faccessat(AT_FDCWD, w->path, X_OK, AT_EACCESS) < 0) {
			if (geteuid() != 0 && fstatat(fd, "", &own, AT_EMPTY_PATH) == 0 &&
			    own.st_uid == geteuid())
				w->found = -5;
			return;
		}
		w->found = why == EACCES ? -3 : -4;
		w->err = why;
		return;
	}
	if (!(d = fdopendir(dfd))) {
		w->found = -4;
		w->err = errno;
		close(dfd);
		return;
	}
	/* this directory first, then what is in it */
	while ((e = readdir(d))) {
		mark |= strcmp(e->d_name, KR_STATE_MARK) == 0;
		sessions |= strcmp(e->d_name, "sessions") == 0;
		session |= strcmp(e->d_name, "session.json") == 0;
	}
	if ((mark || sessions || session) && ws_is_state_dir(dirfd(d))) {
		w->found = 1;
		closedir(d);
		return;
	}
	rewinddir(d);
	while (!w->found && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		struct stat st;
		int sub;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (e->d_type != DT_DIR &&
		    (e->d_type != DT_UNKNOWN ||
		     fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		     !S_ISDIR(st.st_mode)))
			continue;
		if (len + 1 + n >= sizeof w->path) {
			w->found = -2;
			break;
		}
		w->path[len] = '/';
		memcpy(w->path + len + 1, e->d_name, n + 1);
		sub = openat(dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			/* gone meanwhile, or not a directory now: nothing to see;
			 * anything else (no descriptor left, say) fails closed */
			if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
				w->path[len] = '\0';
				continue;
			}
			w->found = -4;
			w->err = errno;
			break;
		}
		state_walk(w, sub, len + 1 + n, depth + 1);
		close(sub);
		if (!w->found)
			w->path[len] = '\0';
	}
	closedir(d);
}

static int state_below(const char *dir, char *why, size_t size);
static int state_below_at(int at, const char *name, const char *dir, char *why, size_t size);

/* Why the resolved directory DIR may not be a workspace for a kbox state
 * directory in it or around it, found by content, into WHY: 1; 0 when
 * there is none; -1 when DIR is too big to look through (WHY says). */
static int state_refuses(const char *dir, char *why, size_t size)
{
	char up[PATH_MAX];
	int fd;

	/* DIR itself and every directory above it, but / */
	snprintf(up, sizeof up, "%s", dir);
	while (strcmp(up, "/") != 0 && up[0] == '/') {
		char *slash;
		bool yes = false;
		if ((fd = open(up, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0) {
			yes = ws_is_state_dir(fd);
			close(fd);
		}
		if (yes) {
			if (strcmp(up, dir) == 0)
				snprintf(why, size, "%s is a kbox state directory", dir);
			else
				snprintf(why, size, "%s is in the kbox state directory %s", dir,
				         up);
			return 1;
		}
		slash = strrchr(up, '/');
		*(slash == up ? slash + 1 : slash) = '\0';
	}
	return state_below(dir, why, size);
}

/* Why DIR holds a state directory, or cannot be looked through for one,
 * into WHY: 1 (found) or -1; 0 when it does not. */
static int state_below(const char *dir, char *why, size_t size)
{
	return state_below_at(AT_FDCWD, dir, dir, why, size);
}

/* (state_below) of the directory NAME from the directory AT, through no
 * link at NAME's last part, DIR naming it in WHY. */
static int state_below_at(int at, const char *name, const char *dir, char *why, size_t size)
{
	state_walk_t *w;
	int fd, found;

	if (!(w = calloc(1, sizeof *w)) ||
	    (fd = openat(at, name,
	                 O_PATH | O_DIRECTORY | O_CLOEXEC | (at == AT_FDCWD ? 0 : O_NOFOLLOW))) <
	            0) {
		free(w);
		snprintf(why, size, "%s cannot be looked through for kbox state directories: %s",
		         dir, strerror(errno));
		return -1;
	}
	snprintf(w->path, sizeof w->path, "%s", dir);
	state_walk(w, fd, strlen(w->path), 0);
	close(fd);
	found = w->found;
	if (found > 0)
		snprintf(why, size, "%s holds the kbox state directory %s", dir, w->path);
	else if (found == -1)
		snprintf(why, size,
		         "%s holds more than %d directories, too many to look through for kbox "
		         "state directories: give a smaller one",
		         dir, STATE_WALK_DIRS);
	else if (found == -3)
		snprintf(why, size,
		         "%s holds %s, which kbox may not read but the code could pass through: "
		         "make it readable (chmod u+rx if it is yours), or give another directory",
		         dir, w->path);
	else if (found == -5)
		snprintf(why, size,
		         "%s holds %s, a directory of yours that kbox may not open, and the code, "
		         "running as you, could open it (chmod): make it readable (chmod u+rx %s), "
		         "or give another directory",
		         dir, w->path, w->path);
	else if (found == -4)
		snprintf(why, size,
		         "%s cannot be looked through for kbox state directories: %s: %s", dir,
		         w->path, strerror(w->err));
	else if (found < 0)
		snprintf(why, size,
		         "%s has directories deeper than %d levels, too deep to look through for "
		         "kbox state directories: give one less deep",
		         dir, STATE_WALK_DEPTH);
	free(w);
	return found < 0 ? -1 : found;
}

/* Why DIR may hold, or be in, the state directory STATE (absolute; need
 * not exist) into WHY; false when it may not.  KIND names it. */
static bool state_path_refuses(const char *dir, const char *state, const char *kind, char *why,
                               size_t size)
{
	char real[PATH_MAX];
	if (!state || state[0] != '/')
		return false;
	if (!realpath(state, real))
		snprintf(real, sizeof real, "%s", state);
	if (strcmp(dir, real) == 0)
		snprintf(why, size, "%s is %s", dir, kind);
	else if (within(dir, real))
		snprintf(why, size, "%s is in %s %s", dir, kind, real);
	else if (within(real, dir))
		snprintf(why, size, "%s holds %s %s", dir, kind, real);
	else
		return false;
	return true;
}

/* Why DIR may not hold a default state directory of the user whose home
 * is HOME (HOME/.local/state/kbox). */
static bool default_state_refuses(const char *dir, const char *home, char *why, size_t size)
{
	char state[PATH_MAX];
	if (!home || home[0] != '/' ||
	    (size_t)snprintf(state, sizeof state, "%s/.local/state/kbox", home) >= sizeof state)
		return false;
	return state_path_refuses(dir, state, "a default kbox state directory", why, size);
}

/* Why the resolved directory DIR may not be a workspace, into WHY: 1; 0
 * when it may; -1 when it cannot be told (WHY says why). */
static int dir_refused(const char *dir, char *why, size_t size)
{
	char *state, real[PATH_MAX];
	const char *xdg;
	struct passwd *pw;
	bool refused = false;

	if (strcmp(dir, "/") == 0) {
		snprintf(why, size, "/ is the root directory");
		return 1;
	}
	for (size_t i = 0; system_trees[i]; i++)
		if (strcmp(dir, system_trees[i]) == 0) {
			snprintf(why, size, "%s is a system directory", dir);
			return 1;
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
			return 1;
		}
	}
	if (home_refuses(dir, getenv("HOME"), why, size) ||
	    default_state_refuses(dir, getenv("HOME"), why, size))
		return 1;
	setpwent();
	while (!refused && (pw = getpwent()))
		refused = home_refuses(dir, pw->pw_dir, why, size) ||
		          default_state_refuses(dir, pw->pw_dir, why, size);
	endpwent();
	if (refused)
		return 1;
	for (size_t i = 0; shared_dirs[i]; i++)
		if (strcmp(dir, shared_dirs[i]) == 0) {
			snprintf(why, size, "%s is a system directory", dir);
			return 1;
		}
	/* the sessions' keys and workspaces: the current state directory and
	 * the default ones, whether they exist or not, then any other found
	 * by what is in it */
	if ((state = kr_state_home(NULL))) {
		refused = state_path_refuses(dir, state, "kbox's state directory", why, size);
		free(state);
		if (refused)
			return 1;
	}
	xdg = getenv("XDG_STATE_HOME");
	if (xdg && xdg[0] == '/' &&
	    (size_t)snprintf(real, sizeof real, "%s/kbox", xdg) < sizeof real &&
	    state_path_refuses(dir, real, "a default kbox state directory", why, size))
		return 1;
	if (state_path_refuses(dir, KR_ROOT_STATE_HOME, "a default kbox state directory", why,
	                       size))
		return 1;
	/* the record of live workspaces, and the sockets of kernels that run
	 * without a sandbox (ws_live.h) */
	kr_live_path(real);
	if (state_path_refuses(dir, real, "kbox's directory of running kernels", why, size))
		return 1;
	return state_refuses(dir, why, size);
}

int ws_holds_state(int at, const char *name, const char *dir, const char *what, kbox_error_t *err)
{
	char why[2 * PATH_MAX + 64];
	if (state_below_at(at, name, dir, why, sizeof why) == 0)
		return 0;
	return kbox_error_set(err, KBOX_E_INVALID,
	                      "%s: refused: %s, and its sandbox's code could reach the sessions' "
	                      "keys and sockets there",
	                      what, why);
}

/* Walk up from the resolved directory UP (reached from it by the name
 * BELOW; "" for none) to /: whether HIT says yes of one of them, given
 * its descriptor and the name of what is below it on the way; then UP is
 * cut to that one. */
static bool walk_up(char *up, const char *below, bool (*hit)(int fd, const char *name))
{
	char name[NAME_MAX + 1];
	snprintf(name, sizeof name, "%s", below);
	for (;;) {
		int fd = open(up, O_PATH | O_DIRECTORY | O_CLOEXEC);
		bool yes = fd >= 0 && hit(fd, name);
		char *slash;
		if (fd >= 0)
			close(fd);
		if (yes)
			return true;
		if (strcmp(up, "/") == 0)
			return false;
		slash = strrchr(up, '/');
		snprintf(name, sizeof name, "%s", slash + 1);
		*(slash == up ? slash + 1 : slash) = '\0';
	}
}

/* (walk_up) any kbox state directory (ws_is_state_dir) */
static bool is_state(int fd, const char *name)
{
	(void)name;
	return ws_is_state_dir(fd);
}

/* (walk_up) what a state directory's sessions hold: a session's own
 * directory (is_session_dir), or the sessions directory of a state
 * directory.  What else a state directory holds no sandbox has, so a
 * state directory there is no other's to reach. */
static bool holds_sessions(int fd, const char *name)
{
	return is_session_dir(fd) || (strcmp(name, "sessions") == 0 && ws_is_state_dir(fd));
}

int ws_in_state_dir(const char *path, const char *what, kbox_error_t *err)
{
	char up[PATH_MAX];
	if (!realpath(path, up))
		return kbox_error_set_sys(err, "%s %s", what, path);
	if (!walk_up(up, "", is_state))
		return 0;
	return kbox_error_set(err, KBOX_E_INVALID,
	                      "%s %s is in the kbox state directory %s, whose sessions' sandboxes "
	                      "have their workspaces there, running or not: keep it outside",
	                      what, path, up);
}

int ws_state_in_state(const char *home, kbox_error_t *err)
{
	char up[PATH_MAX], real[PATH_MAX], below[NAME_MAX + 1];
	/* the nearest that exists, resolved, then every directory above,
	 * each with the name of what is below it on the way to HOME */
	kx_realpath_nearest(home, up, real);
	if (strcmp(real, "/") == 0)
		return 0;
	if (strcmp(up, home) == 0) {
		/* HOME itself exists: start above it */
		char *slash = strrchr(real, '/');
		snprintf(below, sizeof below, "%s", slash + 1);
		*(slash == real ? slash + 1 : slash) = '\0';
	} else {
		const char *rest = home + strlen(up);
		rest += strspn(rest, "/");
		snprintf(below, sizeof below, "%.*s", (int)strcspn(rest, "/"), rest);
	}
	if (!walk_up(real, below, holds_sessions))
		return 0;
	{
		/* a session's directory, or a state directory's sessions */
		int fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
		bool session = fd >= 0 && is_session_dir(fd);
		if (fd >= 0)
			close(fd);
		if (session)
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "state directory %s is in the directory of the session "
			        "%s, whose workspace and home its sandbox has: keep state "
			        "directories apart",
			        home, real);
	}
	return kbox_error_set(err, KBOX_E_INVALID,
	                      "state directory %s is in the sessions of the kbox state directory "
	                      "%s, whose workspaces and homes sandboxes have: keep state "
	                      "directories apart",
	                      home, real);
}

bool ws_fd_within(int fd, const struct stat *dir)
{
	char link[64], path[PATH_MAX];
	ssize_t n;
	struct stat st;

	if (fstat(fd, &st) == 0 && st.st_dev == dir->st_dev && st.st_ino == dir->st_ino)
		return true;
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if ((n = readlink(link, path, sizeof path - 1)) <= 0 || path[0] != '/')
		return true; /* cannot be told: as if it were */
	path[n] = '\0';
	for (;;) {
		char *slash = strrchr(path, '/');
		*(slash == path ? slash + 1 : slash) = '\0';
		if (stat(path, &st) == 0 && st.st_dev == dir->st_dev && st.st_ino == dir->st_ino)
			return true;
		if (strcmp(path, "/") == 0)
			return false;
	}
}

int ws_host_dir(const char *path, char *out, struct stat *st_out, kbox_error_t *err)
{
	struct stat st;
	char why[2 * PATH_MAX + 64], link[64];
	ssize_t n;
	int fd, refused;

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
	if ((refused = dir_refused(out, why, sizeof why)) > 0)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: refused: %s, and the code can change everything in its "
		                      "workspace",
		                      path, why);
	if (refused < 0)
		return kbox_error_set(err, KBOX_E_INVALID, "%s: refused: %s", path, why);
	return 0;
}
