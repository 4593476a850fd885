/* src/runtime/sandbox_uid.c — under root, a host uid for each session's
 * sandbox (session.h, kbox(7) Identity), so that one sandbox cannot read
 * another's files even where a mount would show them.
 *
 * The uids are the sandbox user's subordinate range in /etc/subuid, as
 * Docker's userns-remap takes its dockremap user's.  Each taken uid has a
 * record in KR_UID_DIR, a file named by the uid that says which session
 * directory (path, device and inode) holds it, made with O_EXCL under a
 * lock; the session keeps its uid in SESSION_DIR/sandbox.uid.  A uid goes
 * back when its session's directory goes: kbox run's at its end
 * (kr_session_uid_release), any other's when a uid is wanted and its
 * record names a directory that is no longer there, and no process runs
 * as it. */
#include "runtime/runtime.h"
#include "runtime/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The session's own record of its uid, in its directory. */
#define UID_FILE "sandbox.uid"
/* How deep kr_session_uid re-owns what a session's earlier uid made. */
#define REOWN_DEPTH 256

int kr_sandbox_range(const kr_sandbox_id_t *id, uid_t *first, uid_t *count, kbox_error_t *err)
{
	const char *path = getenv("KBOX_SUBUID_FILE");
	char line[256], uidname[32];
	FILE *f;

	if (!path || !*path)
		path = KR_SUBUID_FILE;
	snprintf(uidname, sizeof uidname, "%u", (unsigned)id->uid);
	*first = *count = 0;
	if ((f = fopen(path, "re"))) {
		while (fgets(line, sizeof line, f)) {
			char *name = line, *start = strchr(line, ':'), *n, *end;
			unsigned long long a, c;
			if (!start || !(n = strchr(start + 1, ':')))
				continue;
			*start++ = '\0';
			*n++ = '\0';
			if (strcmp(name, id->user) != 0 && strcmp(name, uidname) != 0)
				continue;
			errno = 0;
			a = strtoull(start, &end, 10);
			if (errno || end == start || *end)
				continue;
			c = strtoull(n, &end, 10);
			if (errno || end == n || (*end && *end != '\n'))
				continue;
			/* uid 0 never, and the range within 32 bits but -1 */
			if (a == 0 || c == 0 || a + c > UINT32_MAX)
				continue;
			*first = (uid_t)a;
			*count = (uid_t)(c > KR_SESSION_UIDS_MAX ? KR_SESSION_UIDS_MAX : c);
			break;
		}
		fclose(f);
	}
	if (*count) {
		/* never an account's uid: its files are not a sandbox's to read */
		struct passwd *pw;
		uid_t clash = 0;
		setpwent();
		while (!clash && (pw = getpwent()))
			if (pw->pw_uid >= *first && pw->pw_uid - *first < *count)
				clash = pw->pw_uid;
		endpwent();
		if (!clash) {
			/* nor another user's subordinate uids (their containers') */
			char other[64] = "";
			unsigned long long oa = 0, oc = 0;
			if ((f = fopen(path, "re"))) {
				while (!other[0] && fgets(line, sizeof line, f)) {
					char *c1 = strchr(line, ':');
					if (!c1 || sscanf(c1 + 1, "%llu:%llu", &oa, &oc) != 2)
						continue;
					*c1 = '\0';
					if (strcmp(line, id->user) != 0 &&
					    strcmp(line, uidname) != 0 &&
					    oa < (unsigned long long)*first + *count &&
					    *first < oa + oc)
						snprintf(other, sizeof other, "%.60s", line);
				}
				fclose(f);
			}
			if (!other[0])
				return 0;
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "the sandbox user %s's range in %s, %u-%u, overlaps %s's "
			        "(%llu-%llu): give it a range of its own",
			        id->user, path, (unsigned)*first, (unsigned)(*first + *count - 1),
			        other, oa, oa + oc - 1);
		}
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "the sandbox user %s's range in %s, %u-%u, holds uid %u of "
		                      "the password database: give it a range of its own",
		                      id->user, path, (unsigned)*first,
		                      (unsigned)(*first + *count - 1), (unsigned)clash);
	}
	return kbox_error_set(err, KBOX_E_NOTFOUND,
	                      "under root each session's sandbox runs as a uid of its own, from "
	                      "the sandbox user %s's range in %s, and it has none: add one with "
	                      "`kbox doctor --fix` (usermod --add-subuids FIRST-LAST %s)",
	                      id->user, path, id->user);
}

/* The uid in the session record open at DFD (UID_FILE), or (uid_t)-1. */
static uid_t session_record(int dfd)
{
	char buf[32], *end;
	unsigned long v;
	ssize_t n;
	int fd = openat(dfd, UID_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return (uid_t)-1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return (uid_t)-1;
	buf[n] = '\0';
	errno = 0;
	v = strtoul(buf, &end, 10);
	if (errno || end == buf || (*end && *end != '\n') || v == 0 || v >= UINT32_MAX)
		return (uid_t)-1;
	return (uid_t)v;
}

/* The record of UID in the directory UFD: the device and inode of the
 * session directory it names, and its path into PATH (SIZE bytes).
 * False when there is none, or it is not one. */
static bool record_read(int ufd, uid_t uid, unsigned long long *dev, unsigned long long *ino,
                        char *path, size_t size)
{
	char name[32], buf[PATH_MAX + 64], *p;
	ssize_t n;
	int fd;

	snprintf(name, sizeof name, "%u", (unsigned)uid);
	if ((fd = openat(ufd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	if (buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	if (sscanf(buf, "%llu:%llu", dev, ino) != 2 || !(p = strchr(buf, ' ')))
		return false;
	snprintf(path, size, "%s", p + 1);
	return true;
}

/* Whether the record of UID in the directory UFD names a session that is
 * still there and still holds UID (a record of a directory that went, or
 * was made anew, is stale). */
static bool record_live(int ufd, uid_t uid)
{
	char path[PATH_MAX];
	unsigned long long dev, ino;
	struct stat st;
	int dfd;
	bool live;

	if (!record_read(ufd, uid, &dev, &ino, path, sizeof path) ||
	    (dfd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return false;
	live = fstat(dfd, &st) == 0 && (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino && session_record(dfd) == uid;
	close(dfd);
	return live;
}

/* Whether a process runs as UID (any of its real, effective, saved and
 * file-system uids), as /proc shows them: a session whose directory no
 * longer resolves from here (renamed while its sandbox runs, or in
 * another mount namespace) still holds its uid while its sandbox runs. */
static bool uid_in_use(uid_t uid)
{
	struct dirent *e;
	bool yes = false;
	DIR *d = opendir("/proc");

	if (!d)
		return true; /* cannot tell: never hand out a uid that may run */
	while (!yes && (e = readdir(d))) {
		char path[64], line[256];
		unsigned long r, eu, su, fu;
		FILE *f;
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%.20s/status", e->d_name);
		if (!(f = fopen(path, "re")))
			continue; /* gone meanwhile */
		while (fgets(line, sizeof line, f)) {
			if (strncmp(line, "State:\tZ", 8) == 0)
				break; /* a zombie runs nothing (and no init may reap it) */
			if (sscanf(line, "Uid: %lu %lu %lu %lu", &r, &eu, &su, &fu) == 4) {
				yes = r == uid || eu == uid || su == uid || fu == uid;
				break;
			}
		}
		fclose(f);
	}
	closedir(d);
	return yes;
}

/* Whether the record of UID in UFD names the directory ST is (its device
 * and inode): the session's own, not one whose sandbox.uid was copied. */
static bool record_is(int ufd, uid_t uid, const struct stat *st)
{
	char path[PATH_MAX];
	unsigned long long dev, ino;
	return record_read(ufd, uid, &dev, &ino, path, sizeof path) &&
	       dev == (unsigned long long)st->st_dev && ino == (unsigned long long)st->st_ino;
}

/* Whether a supervisor holds the record of UID in UFD (a shared lock on
 * it, kr_session_uid's HOLD): its session lives, wherever its directory
 * now is (another mount namespace, renamed, replaced by a copy), between
 * its kernels too, when no process runs as the uid. */
static bool record_held(int ufd, uid_t uid)
{
	char name[32];
	bool held;
	int fd;

	snprintf(name, sizeof name, "%u", (unsigned)uid);
	if ((fd = openat(ufd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return false;
	held = flock(fd, LOCK_EX | LOCK_NB) < 0;
	close(fd);
	return held;
}

/* Take UID for the session DIR (open at DFD, ST): its record made with
 * O_EXCL, or a stale one replaced, never while a process runs as it
 * (uid_in_use).  0; 1 when another session holds it; -1 with ERR. */
static int take_uid(int ufd, uid_t uid, const char *dir, const struct stat *st, kbox_error_t *err)
{
	char name[32], line[PATH_MAX + 64];
	int fd, n;

	snprintf(name, sizeof name, "%u", (unsigned)uid);
	n = snprintf(line, sizeof line, "%llu:%llu %s\n", (unsigned long long)st->st_dev,
	             (unsigned long long)st->st_ino, dir);
	if (n < 0 || (size_t)n >= sizeof line)
		return kbox_error_set(err, KBOX_E_INVALID, "path too long: %s", dir);
	for (int tries = 0; tries < 2; tries++) {
		fd = openat(ufd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != EEXIST)
			return kbox_error_set_sys(err, "cannot record uid %s in %s", name,
			                          KR_UID_DIR);
		if (tries || record_live(ufd, uid) || record_held(ufd, uid) || uid_in_use(uid))
			return 1;
		unlinkat(ufd, name, 0); /* its session went: the uid is free */
	}
	if (fd < 0)
		return 1;
	if (uid_in_use(uid)) { /* its record lost, its sandbox not gone */
		close(fd);
		unlinkat(ufd, name, 0);
		return 1;
	}
	if (write(fd, line, (size_t)n) != n || fsync(fd) < 0) {
		kbox_error_set_sys(err, "cannot record uid %s in %s", name, KR_UID_DIR);
		close(fd);
		unlinkat(ufd, name, 0);
		return -1;
	}
	close(fd);
	return 0;
}

/* Whose entries are given to whom: REOWN's argument. */
typedef struct {
	uid_t from, to;
	gid_t gid;
} reown_t;

/* kx_walk's visit for reown. */
static void reown_one(int dirfd, const char *name, const struct stat *st, void *arg)
{
	const reown_t *r = arg;
	if (st->st_uid == r->from)
		fchownat(dirfd, name, r->to, r->gid, AT_SYMLINK_NOFOLLOW);
}

/* Give every entry of the directory FD (and below, REOWN_DEPTH levels)
 * owned by FROM to TO (group GID), never following a link. */
static void reown(int fd, uid_t from, uid_t to, gid_t gid)
{
	reown_t r = {from, to, gid};
	kx_walk(fd, REOWN_DEPTH, reown_one, &r);
}

/* The session's own directories, now UID's: what an earlier uid of the
 * session (OLD; the shared sandbox user's, for a session made before
 * sessions had uids of their own) made in them is given to UID. */
static void reown_session(int dfd, uid_t old, uid_t uid, gid_t gid)
{
	static const char *const own[] = {"workspace", "home"};
	for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
		int fd = openat(dfd, own[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && st.st_uid == old)
			fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
		reown(fd, old, uid, gid);
		close(fd);
	}
}

/* Open (making it) the directory of records, and take its lock. */
static int open_records(int *lock, kbox_error_t *err)
{
	int ufd;
	if (mkdir(KR_ROOT_STATE_HOME, 0700) < 0 && errno != EEXIST)
		return kbox_error_set_sys(err, "cannot create %s", KR_ROOT_STATE_HOME);
	if (mkdir(KR_UID_DIR, 0700) < 0 && errno != EEXIST)
		return kbox_error_set_sys(err, "cannot create %s", KR_UID_DIR);
	if ((ufd = open(KR_UID_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return kbox_error_set_sys(err, "cannot open %s", KR_UID_DIR);
	if (kx_private_dir(KR_UID_DIR, err->msg, sizeof err->msg) != 0) {
		close(ufd);
		err->code = KBOX_E_INVALID;
		return -1;
	}
	*lock = openat(ufd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (*lock < 0 || flock(*lock, LOCK_EX) < 0) {
		kbox_error_set_sys(err, "cannot lock %s/.lock", KR_UID_DIR);
		if (*lock >= 0)
			close(*lock);
		close(ufd);
		return -1;
	}
	return ufd;
}

int kr_session_uid(const char *dir, kr_sandbox_id_t *id, int *hold, kbox_error_t *err)
{
	uid_t first, count, had, uid = (uid_t)-1;
	struct stat st;
	char text[32];
	int dfd, ufd = -1, lock = -1, rc = -1;

	if (!id->drop)
		return 0;
	if (kr_sandbox_range(id, &first, &count, err) < 0)
		return -1;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return kbox_error_set_sys(err, "session directory %s", dir);
	if (fstat(dfd, &st) < 0) {
		kbox_error_set_sys(err, "session directory %s", dir);
		goto out;
	}
	if ((ufd = open_records(&lock, err)) < 0)
		goto out;
	had = session_record(dfd);
	/* its own, still recorded as its own (or the record lost: taken again) */
	if (had != (uid_t)-1 && had >= first && had - first < count) {
		if (record_live(ufd, had)) {
			/* another session's (its sandbox.uid copied here): not ours */
			if (record_is(ufd, had, &st))
				uid = had;
		} else {
			int r = take_uid(ufd, had, dir, &st, err);
			if (r < 0)
				goto out;
			if (r == 0)
				uid = had;
		}
	}
	/* else the first free one */
	for (uid_t i = 0; uid == (uid_t)-1 && i < count; i++) {
		int r = take_uid(ufd, first + i, dir, &st, err);
		if (r < 0)
			goto out;
		if (r == 0)
			uid = first + i;
	}
	if (uid == (uid_t)-1) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "all %u sandbox uids (%u-%u, the sandbox user %s's range) are taken "
		               "by sessions: remove some (kbox stop, then their directories)",
		               (unsigned)count, (unsigned)first, (unsigned)(first + count - 1),
		               id->user);
		goto out;
	}
	if (uid != had) {
		snprintf(text, sizeof text, "%u\n", (unsigned)uid);
		if (kx_write_atomic(dfd, UID_FILE, text, strlen(text), 0600, KX_DURABLE) < 0) {
			char name[32];
			kbox_error_set_sys(err, "cannot write %s/%s", dir, UID_FILE);
			snprintf(name, sizeof name, "%u", (unsigned)uid);
			unlinkat(ufd, name, 0);
			goto out;
		}
		/* what the session's earlier uid made becomes the new one's */
		reown_session(dfd, had == (uid_t)-1 ? id->uid : had, uid, id->gid);
	}
	if (hold) {
		/* held while the caller lives: the uid is the session's between
		 * its kernels, when none runs as it (record_held) */
		char name[32];
		snprintf(name, sizeof name, "%u", (unsigned)uid);
		if ((*hold = openat(ufd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
		    flock(*hold, LOCK_SH | LOCK_NB) < 0) {
			kbox_error_set_sys(err, "cannot hold uid %s's record in %s", name,
			                   KR_UID_DIR);
			kx_close(hold);
			goto out;
		}
	}
	id->uid = uid;
	rc = 0;
out:
	if (lock >= 0)
		close(lock);
	if (ufd >= 0)
		close(ufd);
	close(dfd);
	return rc;
}

void kr_session_uid_release(const char *dir)
{
	kbox_error_t ignored = {0};
	struct stat st;
	char name[32];
	int dfd, ufd, lock;
	uid_t uid;

	if (geteuid() != 0 ||
	    (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	uid = session_record(dfd);
	if (uid != (uid_t)-1 && fstat(dfd, &st) == 0 &&
	    (ufd = open_records(&lock, &ignored)) >= 0) {
		snprintf(name, sizeof name, "%u", (unsigned)uid);
		/* only a record of this directory: never another session's */
		if (record_live(ufd, uid))
			unlinkat(ufd, name, 0);
		close(lock);
		close(ufd);
	}
	unlinkat(dfd, UID_FILE, 0);
	close(dfd);
}
