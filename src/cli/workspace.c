/* src/cli/workspace.c — workspaces: paths inside one, resolved so that
 * nothing escapes it (no absolute paths, no "..", and symlinks only when
 * they stay inside: openat2 RESOLVE_BENEATH; without openat2, no symlinks
 * at all); the host files copied into one; and the host directories that
 * may be one (kbox run --workspace). */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int cli_ws_why(const char *path, char *why, size_t size)
{
	const char *p = path;
	if (!*path) {
		snprintf(why, size, "empty workspace path");
		return -1;
	}
	if (*path == '/') {
		snprintf(why, size, "%s: an absolute path is outside the workspace (give a path "
		         "relative to it)", path);
		return -1;
	}
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			snprintf(why, size, "%s: \"..\" would leave the workspace", path);
			return -1;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	return 0;
}

int cli_ws_check(const char *cmd, const char *path)
{
	char why[PATH_MAX + 128];
	if (cli_ws_why(path, why, sizeof why) < 0) {
		cli_error(cmd, "%s", why);
		return -1;
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

int cli_ws_source(const char *cmd, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC); /* a FIFO must not block */

	if (fd < 0 || fstat(fd, &st) < 0) {
		cli_error(cmd, "cannot read %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		cli_error(cmd, "%s is not a regular file", path);
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, 0);
	return fd;
}

/* Never a workspace (kbox run --workspace): /; the system's directories
 * and everything in them; the places that many share (users, mounts,
 * temporary files) themselves, although what is in them may be one, even
 * inside a system directory (/var/tmp/x, /run/media/ada/disk); a home
 * directory and any directory that holds one; and kbox's state directory,
 * in it, or holding it. */
static const char *const system_trees[] = {"/bin",  "/boot", "/dev",  "/etc",  "/lib",
                                           "/lib32", "/lib64", "/libx32", "/opt", "/proc",
                                           "/run",  "/sbin", "/snap", "/sys",  "/usr",
                                           "/var",  NULL};
static const char *const shared_dirs[] = {"/home", "/media", "/mnt",     "/root",     "/run/media",
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
			shared |= within(dir, shared_dirs[j]) && within(shared_dirs[j], system_trees[i]);
		if (!shared) {
			snprintf(why, size, "%s is in the system directory %s", dir, system_trees[i]);
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
	if ((state = kbox_state_home(NULL))) {
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

int cli_ws_host_dir(const char *cmd, const char *path, char *out, struct stat *st_out)
{
	struct stat st;
	char why[2 * PATH_MAX + 64], link[64];
	ssize_t n;
	int fd;

	/* the directory itself first, then its name: what is checked below is
	 * where the directory open here is, whatever is renamed meanwhile, and
	 * its device and inode are what the sandbox must bind (the
	 * supervisor checks them in the sandbox before the kernel runs) */
	if ((fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		cli_error(cmd, "--workspace %s: %s", path, strerror(errno));
		return EXIT_USAGE;
	}
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	n = readlink(link, out, PATH_MAX - 1);
	if (n <= 0 || n >= PATH_MAX - 1 || out[0] != '/' || fstat(fd, &st) < 0) {
		cli_error(cmd, "--workspace %s: cannot tell where it is: %s", path,
		          n <= 0 ? strerror(errno) : "not an absolute path");
		close(fd);
		return EXIT_USAGE;
	}
	out[n] = '\0';
	close(fd);
	if (!S_ISDIR(st.st_mode)) {
		cli_error(cmd, "--workspace %s: %s", path, strerror(ENOTDIR));
		return EXIT_USAGE;
	}
	if (st_out)
		*st_out = st;
	if (dir_refused(out, why, sizeof why)) {
		cli_error(cmd, "--workspace %s: refused: %s, and the code can change everything in its "
		          "workspace", path, why);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}
