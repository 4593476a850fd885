/* src/common/kx_dir.c — directories (kx.h): whether one is private, emptying
 * one to any depth, and the path to a unix socket in one of any length. */
#include "config.h" /* _GNU_SOURCE */
#include "common/kx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kx_private_dir(const char *dir, char *why, size_t size)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		kx_msgf(why, size, "%s is not a directory", dir);
		return 1;
	}
	if (st.st_uid != geteuid() && st.st_uid == 0) {
		/* running kbox as root is no advice to give */
		kx_msgf(why, size,
		        "directory %s is root's, not yours (uid %u): use a directory of your own",
		        dir, (unsigned)geteuid());
		return 1;
	}
	if (st.st_uid != geteuid()) {
		kx_msgf(why, size,
		        "directory %s is uid %u's, not yours (uid %u): run kbox as its owner, or "
		        "use a directory of your own",
		        dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return 1;
	}
	if ((st.st_mode & 0700) != 0700) {
		char word[KX_SHELL_WORD_MAX(PATH_MAX)];
		kx_msgf(why, size,
		        "directory %s is not rwx for its owner (mode %04o, need 0700): chmod 700 %s",
		        dir, (unsigned)(st.st_mode & 0777), kx_shell_word(dir, word, sizeof word));
		return 1;
	}
	/* 0710: under root the sandbox user's group passes through to the
	 * directories of its own (the runtime's session_share), and root is
	 * told so (an ordinary user's state directory is refused 0710 by the
	 * runtime: "need 0700" is what it reads) */
	if (st.st_mode & 067) {
		char word[KX_SHELL_WORD_MAX(PATH_MAX)];
		kx_msgf(why, size,
		        "directory %s is accessible to others (mode %04o, need 0700%s): chmod 700 %s",
		        dir, (unsigned)(st.st_mode & 07777), geteuid() == 0 ? " or 0710" : "",
		        kx_shell_word(dir, word, sizeof word));
		return 1;
	}
	return 0;
}

/* Where a directory is, to know it again. */
typedef struct {
	dev_t dev;
	ino_t ino;
} dir_id_t;

/* NAME in the directory DFD, opened as a directory without following a
 * link.  One made unreadable (a kernel's chmod 0) is ours: made 0700
 * first, through a descriptor of it (O_PATH), not its name.  -1 with
 * errno. */
static int open_subdir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), p, r;
	char proc[64];
	if (fd >= 0 || errno != EACCES)
		return fd;
	if ((p = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", p);
	r = chmod(proc, 0700);
	close(p);
	if (r < 0) {
		errno = EACCES;
		return -1;
	}
	return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Remove the entries of the directory DFD that are not directories, and
 * the empty directories.  0 when it is empty now; 1 with *SUB open on a
 * directory in it that is not empty; -1 with errno. */
static int empty_level(int dfd, int *sub)
{
	struct dirent *e;
	bool chmodded = false;
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0), rc = 0;
	DIR *d;
	if (fd < 0)
		return -1;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -1;
	}
	rewinddir(d); /* the offset is shared with DFD */
	while (rc == 0 && (e = readdir(d))) {
		const char *name = e->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
			continue;
		/* a directory the kernel made read-only is ours: writable again */
		if (errno == EACCES && !chmodded) {
			chmodded = true;
			if (fchmod(dfd, 0700) == 0 &&
			    (unlinkat(dfd, name, 0) == 0 || errno == ENOENT))
				continue;
		}
		if (errno != EISDIR && errno != EPERM)
			rc = -1;
		else if (unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
			continue;
		else if (errno != ENOTEMPTY && errno != EEXIST)
			rc = -1;
		else
			rc = (*sub = open_subdir(dfd, name)) < 0 ? -1 : 1;
	}
	if (rc < 0) {
		int en = errno;
		closedir(d);
		errno = en;
	} else
		closedir(d);
	return rc;
}

/* Remove everything in the directory open as TOP (which stays), to any
 * depth, never following a symbolic link.  One directory is open at a
 * time: the walk goes down into a directory that is not empty, and back
 * up through "..", checked to be the directory it came from; so neither
 * PATH_MAX nor the limit on descriptors bounds the depth, and memory goes
 * as the depth (what was made, on a disk).  0, or -1 with errno at the
 * first thing that cannot be removed. */
int kx_empty_dirfd(int top)
{
	dir_id_t *up = NULL;
	size_t depth = 0, cap = 0;
	int cur = fcntl(top, F_DUPFD_CLOEXEC, 0), rc = -1, sub = -1, r, en;
	struct stat st;
	if (cur < 0)
		return -1;
	while ((r = empty_level(cur, &sub)) >= 0) {
		if (r == 1) {
			/* down into SUB, remembering where CUR is */
			if (depth == cap) {
				dir_id_t *more = realloc(up, (cap ? cap * 2 : 64) * sizeof *up);
				if (!more)
					goto out;
				up = more;
				cap = cap ? cap * 2 : 64;
			}
			if (fstat(cur, &st) < 0)
				goto out;
			up[depth++] = (dir_id_t){st.st_dev, st.st_ino};
			close(cur);
			cur = sub;
			sub = -1;
			continue;
		}
		if (depth == 0) {
			rc = 0; /* TOP is empty */
			break;
		}
		/* CUR is empty: back up, where its parent removes it */
		sub = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 || fstat(sub, &st) < 0)
			goto out;
		if (st.st_dev != up[depth - 1].dev || st.st_ino != up[depth - 1].ino) {
			errno = ESTALE; /* moved meanwhile: not followed */
			goto out;
		}
		depth--;
		close(cur);
		cur = sub;
		sub = -1;
	}
out:
	en = errno;
	if (sub >= 0)
		close(sub);
	close(cur);
	free(up);
	errno = en;
	return rc;
}

int kx_empty_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc;
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	rc = kx_empty_dirfd(fd);
	close(fd);
	return rc;
}

/* kx_walk of FD at DEPTH: true when a directory was left out at the
 * depth bound. */
static bool walk(int fd, unsigned depth, unsigned max_depth,
                 void (*visit)(int, const char *, const struct stat *, void *), void *arg)
{
	struct dirent *e;
	DIR *d;
	bool deeper = false;
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd < 0)
		return false;
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return false;
	}
	while ((e = readdir(d))) {
		struct stat st;
		int sub;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		visit(dirfd(d), e->d_name, &st, arg);
		if (!S_ISDIR(st.st_mode))
			continue;
		if (depth >= max_depth)
			deeper = true;
		else if ((sub = openat(dirfd(d), e->d_name,
		                       O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
			deeper |= walk(sub, depth + 1, max_depth, visit, arg);
			close(sub);
		}
	}
	closedir(d);
	return deeper;
}

bool kx_walk(int fd, unsigned max_depth,
             void (*visit)(int dirfd, const char *name, const struct stat *st, void *arg),
             void *arg)
{
	return walk(fd, 0, max_depth, visit, arg);
}

int kx_unix_path(char *buf, size_t size, const char *dir, const char *name, int *dirfd_p)
{
	int n = snprintf(buf, size, "%s/%s", dir, name);
	if (n >= 0 && (size_t)n < size)
		return 0;
	if (*dirfd_p < 0 && (*dirfd_p = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	n = snprintf(buf, size, "/proc/self/fd/%d/%s", *dirfd_p, name);
	if (n < 0 || (size_t)n >= size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

void kx_realpath_nearest(const char *path, char *near, char *real)
{
	snprintf(near, PATH_MAX, "%s", path);
	while (!realpath(near, real)) {
		char *slash = strrchr(near, '/');
		if (!slash || slash == near) {
			snprintf(real, PATH_MAX, "/");
			return;
		}
		*slash = '\0';
	}
}
