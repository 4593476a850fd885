/* src/common/kx_file.c — writing files: all of a buffer, a temporary file
 * nobody can guess, a file replaced at once (kx.h).  The one policy for
 * an atomic write in the product. */
#include "config.h" /* _GNU_SOURCE */
#include "common/kx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

void kx_close(int *fd)
{
	int e = errno;

	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	errno = e;
}

void kx_close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		kx_close(&fds[i]);
}

void kx_first_line(FILE *f, char *buf, size_t size)
{
	if (!f || !fgets(buf, (int)size, f))
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

int kx_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

ssize_t kx_pread_full(int fd, void *buf, size_t len, off_t offset)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, offset + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int kx_temp_open(int dirfd, const char *prefix, mode_t mode, char *name, size_t size)
{
	for (int attempt = 0; attempt < 16; attempt++) {
		unsigned long long r;
		int fd;
		if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
			return -1;
		if (snprintf(name, size, "%s%016llx", prefix, r) >= (int)size) {
			errno = ENAMETOOLONG;
			return -1;
		}
		/* O_EXCL: nothing that is there is opened, truncated, followed
		 * (O_NOFOLLOW says so twice) or waited on (a FIFO) */
		fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		            mode);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

/* The temporary file's prefix for the final name BASE, into BUF: ".BASE."
 * (BASE cut to leave room for 16 hex digits in a name). */
static void temp_prefix(char *buf, size_t size, const char *base)
{
	snprintf(buf, size, ".%.*s.", NAME_MAX - 2 - 16, base);
}

int kx_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                    unsigned flags)
{
	const char *slash = strrchr(name, '/'), *base = slash ? slash + 1 : name;
	char prefix[NAME_MAX + 1], tmp[NAME_MAX + 1];
	int dfd = dirfd, fd = -1, e;
	bool made = false;

	if (!*base) {
		errno = EISDIR;
		return -1;
	}
	if (slash) { /* the directory NAME names, relative to DIRFD */
		char *dir = strndup(name, slash == name ? 1 : (size_t)(slash - name));
		if (!dir)
			return -1;
		dfd = kx_open_path(dirfd, dir, O_PATH | O_DIRECTORY, 0);
		free(dir);
		if (dfd < 0)
			return -1;
	}
	temp_prefix(prefix, sizeof prefix, base);
	if ((fd = kx_temp_open(dfd, prefix, 0600, tmp, sizeof tmp)) < 0)
		goto fail;
	made = true;
	if (kx_write_all(fd, data, len) < 0 || fchmod(fd, mode) < 0 ||
	    ((flags & KX_DURABLE) && fsync(fd) < 0))
		goto fail;
	e = close(fd);
	fd = -1;
	if (e < 0 || renameat(dfd, tmp, dfd, base) < 0)
		goto fail;
	made = false;
	if (flags & KX_DURABLE) {
		/* the rename itself is in the directory: sync it too */
		int d = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d < 0 || fsync(d) < 0) {
			e = errno;
			if (d >= 0)
				close(d);
			errno = e;
			goto fail;
		}
		close(d);
	}
	if (dfd != dirfd)
		close(dfd);
	return 0;
fail:
	e = errno;
	if (fd >= 0)
		close(fd);
	if (made)
		unlinkat(dfd, tmp, 0);
	if (dfd != dirfd && dfd >= 0)
		close(dfd);
	errno = e;
	return -1;
}

int kx_open_walk(int dirfd, const char *path, int flags, mode_t mode)
{
	char *copy = strdup(path), *save = NULL, *part, *next;
	int fd = path[0] == '/'      ? open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)
	         : dirfd == AT_FDCWD ? open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)
	                             : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (!copy || fd < 0) {
		int e = copy ? errno : ENOMEM;
		free(copy);
		if (fd >= 0)
			close(fd);
		errno = e;
		return -1;
	}
	part = strtok_r(copy, "/", &save);
	if (!part) { /* "/" itself */
		free(copy);
		close(fd);
		return open(path, flags | O_CLOEXEC, mode);
	}
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

int kx_openat2(int dirfd, const char *path, int flags, mode_t mode, unsigned long long resolve)
{
	struct open_how how = {0};
	long fd;
	how.flags = (unsigned long long)(flags | O_CLOEXEC);
	how.mode = (flags & O_CREAT) ? mode : 0;
	how.resolve = resolve;
	fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	if (fd >= 0 || errno != ENOSYS)
		return (int)fd;
	return kx_open_walk(dirfd, path, flags, mode);
}

int kx_open_no_links(int dirfd, const char *path, int flags, mode_t mode)
{
	return kx_openat2(dirfd, path, flags, mode, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

/* The directory (absolute, its links resolved) below which no path is
 * followed through a link (kx_no_links_below); its length, without a
 * trailing '/'. */
static char *guard;
static size_t guard_len;

int kx_no_links_below(const char *dir)
{
	char *copy = NULL;
	if (dir && !(copy = strdup(dir)))
		return -1;
	free(guard);
	guard = copy;
	guard_len = copy ? strlen(copy) : 0;
	while (guard_len > 0 && guard[guard_len - 1] == '/')
		guard_len--;
	return 0;
}

/* Is PATH (absolute: whatever directory it is looked up from) at or below
 * the kx_no_links_below directory? */
static bool guarded(const char *path)
{
	return guard && path[0] == '/' && strncmp(path, guard, guard_len) == 0 &&
	       (path[guard_len] == '/' || path[guard_len] == '\0');
}

int kx_open_path(int dirfd, const char *path, int flags, mode_t mode)
{
	if (guarded(path))
		return kx_open_no_links(dirfd, path, flags, mode);
	return openat(dirfd, path, flags | O_CLOEXEC, mode);
}

DIR *kx_opendir(const char *path)
{
	int fd = kx_open_path(AT_FDCWD, path, O_RDONLY | O_DIRECTORY, 0), e;
	DIR *d;
	if (fd < 0)
		return NULL;
	if (!(d = fdopendir(fd))) {
		e = errno;
		close(fd);
		errno = e;
	}
	return d;
}

int kx_open_file_st(int dirfd, const char *name, int flags, mode_t mode, struct stat *st)
{
	int fd = kx_open_path(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK, mode);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		int e = S_ISREG(st->st_mode) ? errno : ENXIO;
		close(fd);
		errno = e;
		return -1;
	}
	/* (O_NONBLOCK stays: a regular file's reads and writes do not heed
	 * it, and taking it off would cost two more system calls) */
	return fd;
}

int kx_open_file(int dirfd, const char *name, int flags, mode_t mode)
{
	struct stat st;
	return kx_open_file_st(dirfd, name, flags, mode, &st);
}
