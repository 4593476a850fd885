/* src/runtime/ws_live.c — the record of live workspaces (ws_live.h). */
#include "runtime/runtime.h"
#include "runtime/ws_live.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Where the record is, into DIR (PATH_MAX bytes): a place only this user
 * (or root) can make, the same whatever the environment says (KBOX_HOME,
 * XDG_*, HOME): under root /run/kbox; else in the user's default state
 * directory, from the password database, ~/.local/state/kbox/live; a
 * user without a home that can be written, /tmp/kbox-UID (then checked
 * to be the user's own, as tmux's socket directory is). */
void kr_live_path(char *dir)
{
	struct passwd *pw;
	if (geteuid() == 0) {
		snprintf(dir, PATH_MAX, "%s", KR_LIVE_DIR_ROOT);
		return;
	}
	if ((pw = getpwuid(geteuid())) && pw->pw_dir && pw->pw_dir[0] == '/' &&
	    strcmp(pw->pw_dir, "/") != 0 && access(pw->pw_dir, W_OK | X_OK) == 0 &&
	    (size_t)snprintf(dir, PATH_MAX, "%s/" KR_LIVE_DIR_HOME, pw->pw_dir) < PATH_MAX)
		return;
	snprintf(dir, PATH_MAX, KR_LIVE_DIR_FMT, (unsigned)geteuid());
}

/* mkdir -p DIR, mode 0700 for what is made. */
static void make_dirs(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", dir);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0700);
			*s = '/';
		}
	mkdir(p, 0700);
}

/* Open the record's directory (made when MAKE), checked to be the
 * user's and private, into DIR (PATH_MAX bytes).  The descriptor; -2 when
 * there is none and MAKE is false; -1 with ERR. */
static int live_dir(bool make, char *dir, kbox_error_t *err)
{
	struct stat st;
	int fd;

	kr_live_path(dir);
	if (make)
		make_dirs(dir);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		if (!make && errno == ENOENT)
			return -2;
		return kbox_error_set_sys(err, "cannot open %s", dir);
	}
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "%s, where kbox keeps the workspaces of running sandboxes, is not "
		               "this user's own private directory (owner uid %u, mode %04o): "
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

/* A live record, read. */
typedef struct {
	unsigned long long dev, ino;
	long pid;
	char path[PATH_MAX];
} rec_t;

/* The live records of DIR (open at DFD, closed here), into *RECS (*N of
 * them; the caller frees *RECS).  A record whose supervisor is gone is
 * removed.  0, or -1 with ERR (a record that cannot be read fails
 * closed). */
static int read_records(int dfd, const char *dir, rec_t **recs, size_t *n, kbox_error_t *err)
{
	char text[PATH_MAX + 128];
	size_t cap = 0;
	struct dirent *e;
	int rc = 0;
	DIR *d;

	*recs = NULL;
	*n = 0;
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	while (rc == 0 && (e = readdir(d))) {
		rec_t *r;
		ssize_t got;
		int fd, used = 0;
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
		if (!(r = kx_grow(*recs, &cap, *n, sizeof **recs))) {
			rc = kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
			break;
		}
		*recs = r;
		r = &(*recs)[*n];
		if (sscanf(text, "%llu %llu %ld\n%n", &r->dev, &r->ino, &r->pid, &used) != 3 ||
		    used <= 0 || !text[used]) {
			rc = kbox_error_set(err, KBOX_E_INVALID,
			                    "%s/%s, a record of a running sandbox's workspace, "
			                    "cannot be read",
			                    dir, e->d_name);
			break;
		}
		snprintf(r->path, sizeof r->path, "%s", text + used);
		r->path[strcspn(r->path, "\n")] = '\0';
		(*n)++;
	}
	closedir(d);
	return rc;
}

int kr_live_ws_check(const char *path, const char *what, kbox_error_t *err)
{
	char dir[PATH_MAX], p[PATH_MAX], real[PATH_MAX];
	rec_t *recs;
	size_t n;
	int dfd, rc = 0;

	if ((dfd = live_dir(false, dir, err)) == -2)
		return 0;
	if (dfd < 0 || read_records(dfd, dir, &recs, &n, err) < 0)
		return -1;
	if (n == 0) {
		free(recs);
		return 0;
	}
	/* PATH, or the nearest directory of it that exists, and every one
	 * above it up to /, however deep: none may be a live workspace */
	kx_realpath_nearest(path, p, real);
	for (;;) {
		struct stat st;
		char *slash;
		if (stat(real, &st) == 0)
			for (size_t i = 0; i < n; i++)
				if ((unsigned long long)st.st_dev == recs[i].dev &&
				    (unsigned long long)st.st_ino == recs[i].ino) {
					char shown[160];
					size_t len = strlen(path);
					/* a path that long is shortened in the middle, so
					 * that the reason fits the message */
					if (len < sizeof shown)
						snprintf(shown, sizeof shown, "%s", path);
					else
						snprintf(shown, sizeof shown, "%.70s…%s", path,
						         path + len - 70);
					rc = kbox_error_set(
					        err, KBOX_E_INVALID,
					        "%s %s is in %s, the workspace of a running sandbox "
					        "(supervisor pid %ld): its code could reach %s; keep "
					        "%s outside it",
					        what, shown, recs[i].path, recs[i].pid,
					        strcmp(what, "state directory") == 0
					                ? "the sessions' keys and sockets"
					                : "what is kept there",
					        strcmp(what, "state directory") == 0
					                ? "state directories (KBOX_HOME, XDG_RUNTIME_DIR)"
					                : "it");
					goto out;
				}
		if (strcmp(real, "/") == 0)
			break;
		slash = strrchr(real, '/');
		*(slash == real ? slash + 1 : slash) = '\0';
	}
out:
	free(recs);
	return rc;
}

int kr_live_ws_refuses(const char *home, kbox_error_t *err)
{
	return kr_live_ws_check(home, "state directory", err);
}

/* Remove what is in SDIR (open at SFD) that no supervisor holds. */
static void sockets_prune(int sfd, const char *sdir)
{
	DIR *d;
	struct dirent *e;
	int fd = dup(sfd);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;
		int held;
		/* (one being made, ".new-": locked a moment after it is made;
		 * one a minute old is a supervisor's that died in between) */
		bool made = strncmp(e->d_name, ".new-", 5) == 0;
		if (strncmp(e->d_name, "none-", 5) != 0 && !made)
			continue;
		held = openat(sfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (held < 0)
			continue;
		if (made && (fstat(held, &st) < 0 || time(NULL) - st.st_mtime < 60)) {
			close(held);
			continue;
		}
		if (flock(held, LOCK_EX | LOCK_NB) == 0 &&
		    (size_t)snprintf(path, sizeof path, "%s/%s", sdir, e->d_name) < sizeof path) {
			kx_empty_dir(path);
			unlinkat(sfd, e->d_name, AT_REMOVEDIR);
		}
		close(held);
	}
	closedir(d);
}

int kr_live_sockets_make(char *dir, kbox_error_t *err)
{
	char base[PATH_MAX], sdir[PATH_MAX], tmp[PATH_MAX];
	struct stat st;
	int dfd, sfd = -1, fd = -1;

	if ((dfd = live_dir(true, base, err)) < 0)
		return -1;
	if ((size_t)snprintf(sdir, sizeof sdir, "%s/" KR_LIVE_SOCKETS, base) >= sizeof sdir) {
		kbox_error_set(err, KBOX_E_INVALID, "%s: path too long", base);
		goto out;
	}
	if ((mkdirat(dfd, KR_LIVE_SOCKETS, 0700) < 0 && errno != EEXIST) ||
	    (sfd = openat(dfd, KR_LIVE_SOCKETS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
	            0 ||
	    fstat(sfd, &st) < 0) {
		kbox_error_set_sys(err, "cannot make %s", sdir);
		goto out;
	}
	/* (in the record's private directory: made by the user, who may
	 * have made it open) */
	if (st.st_uid != geteuid() || ((st.st_mode & 077) && fchmod(sfd, 0700) < 0)) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "%s is not this user's own directory (owner uid %u, mode %04o): "
		               "remove it",
		               sdir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
		goto out;
	}
	sockets_prune(sfd, sdir);
	/* locked before it has its name: no prune sees it unheld */
	if ((size_t)snprintf(tmp, sizeof tmp, "%s/.new-XXXXXX", sdir) >= sizeof tmp ||
	    !mkdtemp(tmp)) {
		kbox_error_set_sys(err, "cannot make a directory in %s", sdir);
		goto out;
	}
	if ((size_t)snprintf(dir, PATH_MAX, "%s/none-%s", sdir, strrchr(tmp, '-') + 1) >=
	    PATH_MAX) {
		kbox_error_set(err, KBOX_E_INVALID, "%s: path too long", sdir);
		rmdir(tmp);
		goto out;
	}
	if ((fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    flock(fd, LOCK_EX | LOCK_NB) < 0 || rename(tmp, dir) < 0) {
		kbox_error_set_sys(err, "cannot make %s", dir);
		if (fd >= 0)
			close(fd);
		fd = -1;
		rmdir(tmp);
	}
out:
	if (sfd >= 0)
		close(sfd);
	close(dfd);
	return fd;
}

void kr_live_sockets_release(int *fd, const char *dir)
{
	if (*fd < 0)
		return;
	if (dir && dir[0]) {
		kx_empty_dir(dir);
		rmdir(dir);
	}
	close(*fd);
	*fd = -1;
}

/* Read the key at NAME of DFD into KEY: a regular file of the user's, mode
 * 0600, KR_LIVE_KEY_LEN bytes.  0; -2 when there is none; -1 with ERR. */
static int key_read(int dfd, const char *name, unsigned char *key, const char *path,
                    kbox_error_t *err)
{
	struct stat st;
	ssize_t got;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return -2;
	if (fd < 0)
		return kbox_error_set_sys(err, "cannot read %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) || st.st_size != KR_LIVE_KEY_LEN) {
		close(fd);
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s, the key of this user's kbox seals, is not a private "
		                      "file of %d bytes of this user's: remove it (every session "
		                      "then needs kbox start --reseal)",
		                      path, KR_LIVE_KEY_LEN);
	}
	got = kx_pread_full(fd, key, KR_LIVE_KEY_LEN, 0);
	close(fd);
	if (got != KR_LIVE_KEY_LEN)
		return kbox_error_set_sys(err, "cannot read %s", path);
	return 0;
}

int kr_live_key(unsigned char *key, bool make, char *path, kbox_error_t *err)
{
	char dir[PATH_MAX], tmp[64];
	int dfd, fd, rc;
	bool written;

	dfd = live_dir(make, dir, err);
	if ((size_t)snprintf(path, PATH_MAX, "%s/%s", dir, KR_LIVE_KEY) >= PATH_MAX)
		path[0] = '\0'; /* (the record's directory fits, so does this) */
	if (dfd < 0)
		return dfd;
	if ((rc = key_read(dfd, KR_LIVE_KEY, key, path, err)) != -2 || !make)
		goto out;
	/* a new one: whole in a file of its own, then linked at its name; a
	 * maker that finds the name taken reads the one made meanwhile */
	if (getrandom(key, KR_LIVE_KEY_LEN, 0) != KR_LIVE_KEY_LEN ||
	    (fd = kx_temp_open(dfd, ".key-", 0600, tmp, sizeof tmp)) < 0) {
		rc = kbox_error_set_sys(err, "cannot make %s", path);
		goto out;
	}
	written = kx_write_all(fd, key, KR_LIVE_KEY_LEN) == 0 && fsync(fd) == 0;
	if (close(fd) < 0)
		written = false;
	if (!written || (linkat(dfd, tmp, dfd, KR_LIVE_KEY, 0) < 0 && errno != EEXIST)) {
		rc = kbox_error_set_sys(err, "cannot make %s", path);
		unlinkat(dfd, tmp, 0);
		goto out;
	}
	unlinkat(dfd, tmp, 0);
	rc = key_read(dfd, KR_LIVE_KEY, key, path, err);
	if (rc == -2)
		rc = kbox_error_set_sys(err, "cannot make %s", path);
out:
	close(dfd);
	return rc;
}

/* ---- the record of the last seals ---- */

/* The name of DIR's record: the SHA-256 of DIR in hex, into NAME
 * (KX_SHA256_LEN * 2 + 1 bytes). */
static void seal_name(const char *dir, char *name)
{
	unsigned char h[KX_SHA256_LEN];
	kx_sha256_t c;

	kx_sha256_init(&c);
	kx_sha256_update(&c, dir, strlen(dir));
	kx_sha256_final(&c, h);
	for (int i = 0; i < KX_SHA256_LEN; i++)
		snprintf(name + 2 * i, 3, "%02x", h[i]);
}

int kr_live_seals_open(bool make, bool exclusive, kbox_error_t *err)
{
	char dir[PATH_MAX];
	struct stat st;
	int dfd, fd;

	if ((dfd = live_dir(make, dir, err)) < 0)
		return dfd;
	if (make && mkdirat(dfd, KR_LIVE_SEALS, 0700) < 0 && errno != EEXIST) {
		kbox_error_set_sys(err, "cannot make %s/%s", dir, KR_LIVE_SEALS);
		close(dfd);
		return -1;
	}
	fd = openat(dfd, KR_LIVE_SEALS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0 && errno == ENOENT && !make)
		return -2;
	if (fd < 0)
		return kbox_error_set_sys(err, "cannot open %s/%s", dir, KR_LIVE_SEALS);
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s/%s, where kbox keeps the last seal of each session, is "
		                      "not this user's own private directory: remove it (every "
		                      "session then needs kbox start --reseal)",
		                      dir, KR_LIVE_SEALS);
	}
	/* one saver at a time, and no reader between a file and its record */
	if (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0) {
		close(fd);
		return kbox_error_set_sys(err, "cannot lock %s/%s", dir, KR_LIVE_SEALS);
	}
	return fd;
}

int kr_live_dir_id(int fd, kr_dir_id_t *id)
{
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_BTIME, &sx) < 0)
		return -1;
	id->dev = ((unsigned long long)sx.stx_dev_major << 32) | sx.stx_dev_minor;
	id->ino = sx.stx_ino;
	id->birth_sec = (sx.stx_mask & STATX_BTIME) ? sx.stx_btime.tv_sec : 0;
	id->birth_nsec = (sx.stx_mask & STATX_BTIME) ? sx.stx_btime.tv_nsec : 0;
	return 0;
}

int kr_live_seal_put(int fd, const char *dir, const kr_dir_id_t *id, const char *seal,
                     kbox_error_t *err)
{
	char name[2 * KX_SHA256_LEN + 1], *text;
	int n, rc;

	seal_name(dir, name);
	if ((n = asprintf(&text, "%s\n%s\n%llu %llu %lld.%09u\n", seal, dir, id->dev, id->ino,
	                  id->birth_sec, id->birth_nsec)) < 0)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	rc = kx_write_atomic(fd, name, text, (size_t)n, 0600, 0);
	free(text);
	if (rc < 0)
		return kbox_error_set_sys(err, "cannot record the seal of %s/session.json", dir);
	return 0;
}

int kr_live_seal_get(int fd, const char *dir, const kr_dir_id_t *id, char *seal, size_t size,
                     kbox_error_t *err)
{
	char name[2 * KX_SHA256_LEN + 1], text[PATH_MAX + 256];
	kr_dir_id_t was;
	struct stat st;
	ssize_t got;
	char *nl, *line;
	int rfd, end = 0;

	seal_name(dir, name);
	if ((rfd = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
		return errno == ENOENT ? -2
		                       : kbox_error_set_sys(err,
		                                            "cannot read the record of the "
		                                            "seal of %s/session.json",
		                                            dir);
	if (fstat(rfd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(rfd);
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "the record of the seal of %s/session.json is not a file of "
		                      "this user's",
		                      dir);
	}
	got = kx_pread_full(rfd, text, sizeof text - 1, 0);
	close(rfd);
	if (got < 0)
		return kbox_error_set_sys(
		        err, "cannot read the record of the seal of %s/session.json", dir);
	text[got] = '\0';
	/* (one kbox did not write, or of a directory made again since at
	 * that path: as none) */
	if (!(nl = strchr(text, '\n')) || (size_t)(nl - text) >= size ||
	    !(line = strchr(nl + 1, '\n')))
		return -2;
	if (line[1] == '\0')
		return -4; /* (an older kbox's: no directory's identity) */
	if (sscanf(line + 1, "%llu %llu %lld.%u\n%n", &was.dev, &was.ino, &was.birth_sec,
	           &was.birth_nsec, &end) != 4 ||
	    line[1 + end] != '\0')
		return -2;
	if (was.dev != id->dev || was.ino != id->ino || was.birth_sec != id->birth_sec ||
	    was.birth_nsec != id->birth_nsec)
		return -3;
	memcpy(seal, text, (size_t)(nl - text));
	seal[nl - text] = '\0';
	return 0;
}

/* ---- what a session's supervisor keeps where no sandbox reaches ---- */

int kr_live_session_path(const char *dir, const char *file, bool make, char *path, size_t size,
                         kbox_error_t *err)
{
	char live[PATH_MAX], name[2 * KX_SHA256_LEN + 1];
	struct stat st;
	int dfd, fd;

	if ((dfd = live_dir(make, live, err)) < 0)
		return dfd;
	seal_name(dir, name);
	if (make && mkdirat(dfd, KR_LIVE_SESSIONS, 0700) < 0 && errno != EEXIST) {
		close(dfd);
		return kbox_error_set_sys(err, "cannot make %s/%s", live, KR_LIVE_SESSIONS);
	}
	fd = openat(dfd, KR_LIVE_SESSIONS, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0 && errno == ENOENT && !make)
		return -2;
	if (fd < 0)
		return kbox_error_set_sys(err, "cannot open %s/%s", live, KR_LIVE_SESSIONS);
	if (make && mkdirat(fd, name, 0700) < 0 && errno != EEXIST) {
		close(fd);
		return kbox_error_set_sys(err, "cannot make %s/%s/%s", live, KR_LIVE_SESSIONS,
		                          name);
	}
	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		close(fd);
		if (errno == ENOENT && !make)
			return -2;
		return kbox_error_set_sys(err, "cannot look at %s/%s/%s", live, KR_LIVE_SESSIONS,
		                          name);
	}
	close(fd);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s/%s/%s, where kbox keeps what a session's supervisor "
		                      "left, is not this user's own private directory: remove it",
		                      live, KR_LIVE_SESSIONS, name);
	if ((size_t)snprintf(path, size, "%s/%s/%s%s%s", live, KR_LIVE_SESSIONS, name,
	                     file[0] ? "/" : "", file) >= size)
		return kbox_error_set(err, KBOX_E_INVALID, "%s: path too long", live);
	return 0;
}

void kr_live_session_forget(const char *dir)
{
	static const char *const files[] = {KR_LIVE_LAST_STOP, KR_LIVE_CGROUPS};
	char path[PATH_MAX], file[PATH_MAX + 32];
	kbox_error_t ignored = {0};

	kr_live_seal_drop(dir);
	if (kr_live_session_path(dir, "", false, path, sizeof path, &ignored) < 0)
		return;
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(file, sizeof file, "%s/%s", path, files[i]);
		unlink(file);
	}
	rmdir(path);
}

bool kr_live_seal_known(const char *dir)
{
	char name[2 * KX_SHA256_LEN + 1];
	kbox_error_t ignored = {0};
	struct stat st;
	bool known;
	int fd;

	if (geteuid() == 0 || (fd = kr_live_seals_open(false, false, &ignored)) < 0)
		return false;
	seal_name(dir, name);
	known = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
	close(fd);
	return known;
}

void kr_live_seal_drop(const char *dir)
{
	char name[2 * KX_SHA256_LEN + 1];
	kbox_error_t ignored = {0};
	int fd;

	if (geteuid() == 0 || (fd = kr_live_seals_open(false, true, &ignored)) < 0)
		return;
	seal_name(dir, name);
	unlinkat(fd, name, 0);
	close(fd);
}
