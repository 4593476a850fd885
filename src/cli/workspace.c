/* src/cli/workspace.c — paths inside a session's workspace, resolved so
 * that nothing escapes it: no absolute paths, no "..", and symlinks only
 * when they stay inside (openat2 RESOLVE_BENEATH; without openat2, no
 * symlinks at all). */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* "..": any component; absolute; empty. */
int cli_ws_check(const char *cmd, const char *path)
{
	const char *p = path;
	if (!*path) {
		cli_error(cmd, "empty workspace path");
		return -1;
	}
	if (*path == '/') {
		cli_error(cmd, "%s: an absolute path is outside the workspace (give a path relative "
		          "to it)", path);
		return -1;
	}
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			cli_error(cmd, "%s: \"..\" would leave the workspace", path);
			return -1;
		}
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

int cli_ws_open(int dirfd, const char *path, int flags, unsigned mode)
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

/* Explain an errno from cli_ws_open. */
const char *cli_ws_strerror(int e)
{
	switch (e) {
	case EXDEV: return "it leads outside the workspace (through a symlink)";
	case ELOOP: return "a symlink is in the way (refused)";
	default: return strerror(e);
	}
}
