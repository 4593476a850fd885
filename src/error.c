/* src/error.c — filling kbox_error_t, and small shared helpers. */
#include "private.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *kbox_strerror(kbox_errcode_t code)
{
	switch (code) {
	case KBOX_OK: return "success";
	case KBOX_E_SYSTEM: return "system error";
	case KBOX_E_INVALID: return "invalid input";
	case KBOX_E_PROTOCOL: return "protocol error";
	case KBOX_E_AUTH: return "authentication failure";
	case KBOX_E_TIMEOUT: return "timed out";
	case KBOX_E_DEAD: return "kernel died";
	case KBOX_E_NOTFOUND: return "not found";
	case KBOX_E_UNSUPPORTED: return "unsupported";
	case KBOX_E_NOMEM: return "out of memory";
	}
	return "unknown error";
}

int kbox__err(kbox_error_t *err, kbox_errcode_t code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int kbox__err_sys(kbox_error_t *err, const char *fmt, ...)
{
	int saved = errno;
	if (err) {
		va_list ap;
		size_t len;
		err->code = saved == ENOMEM ? KBOX_E_NOMEM : KBOX_E_SYSTEM;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		len = strlen(err->msg);
		if (len < sizeof err->msg)
			snprintf(err->msg + len, sizeof err->msg - len, ": %s", strerror(saved));
	}
	errno = saved;
	return -1;
}

long long kbox__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double kbox__now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)(ts.tv_nsec / 1000) / 1e6;
}

void kbox__fmt_ms(char *buf, size_t size, int ms)
{
	if (ms % 1000 == 0)
		snprintf(buf, size, "%d s", ms / 1000);
	else if (ms > 1000)
		snprintf(buf, size, "%.1f s", ms / 1000.0);
	else
		snprintf(buf, size, "%d ms", ms);
}

int kbox__check_private_dir(const char *dir, kbox_error_t *err)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return kbox__err_sys(err, "directory %s", dir);
	if (!S_ISDIR(st.st_mode))
		return kbox__err(err, KBOX_E_INVALID, "%s is not a directory", dir);
	if (st.st_uid != geteuid())
		return kbox__err(err, KBOX_E_INVALID, "directory %s is not owned by uid %u", dir,
		                 (unsigned)geteuid());
	if ((st.st_mode & 0700) != 0700)
		return kbox__err(err, KBOX_E_INVALID, "directory %s is not rwx for its owner (mode %03o)",
		                 dir, (unsigned)(st.st_mode & 0777));
	/* 0710: under root the sandbox user's group passes through to the
	 * directories of its own (kbox_session_share) */
	if (st.st_mode & 067)
		return kbox__err(err, KBOX_E_INVALID,
		                 "directory %s is accessible to others (mode %03o, need 0700)", dir,
		                 (unsigned)(st.st_mode & 0777));
	return 0;
}

/* Remove everything in the directory open as DFD (which stays), without
 * following a symbolic link anywhere; nested too deep is left.  0, or -1
 * when something could not be removed. */
static int empty_dir_fd(int dfd, int depth)
{
	DIR *d;
	struct dirent *e;
	int rc = 0, fd = dup(dfd);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dfd, e->d_name, 0) == 0)
			continue;
		if (errno == EISDIR || errno == EPERM) {
			int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0 || depth > 64 || empty_dir_fd(sub, depth + 1) < 0)
				rc = -1;
			if (sub >= 0)
				close(sub);
			if (unlinkat(dfd, e->d_name, AT_REMOVEDIR) < 0)
				rc = -1;
		} else if (errno != ENOENT)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int kbox__empty_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc;
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	rc = empty_dir_fd(fd, 0);
	close(fd);
	return rc;
}
