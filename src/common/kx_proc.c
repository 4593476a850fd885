/* src/common/kx_proc.c — starting a child process (kx.h): a command looked
 * up in a safe PATH, an identity taken, and the child's side of fork, for
 * whatever starts a kernel (libkbox's local kernels, the runtime's
 * sandboxes and its probes); and a program's own standard descriptors. */
#include "config.h" /* _GNU_SOURCE, HAVE_PRCTL, HAVE_CLOSE_RANGE */
#include "common/kx.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif

int kx_std_fds_open(void)
{
	int closed = 0;
	for (int fd = 0; fd <= 2; fd++) {
		int got;
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		closed |= 1 << fd;
		/* the lowest free descriptor: FD itself (not close-on-exec: a
		 * standard descriptor, for children too) */
		got = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
		if (got < 0)
			return -1;
		if (got != fd) { /* cannot be: every lower one is open */
			close(got);
			errno = EBADF;
			return -1;
		}
	}
	return closed;
}

char *kx_resolve_command(const char *cmd, const char *root)
{
	char buf[PATH_MAX], in_root[PATH_MAX * 2];
	const char *p = KX_SAFE_PATH;
	struct stat st;
	if (strchr(cmd, '/'))
		return strdup(cmd);
	while (*p) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, cmd);
		if (!root && access(buf, X_OK) == 0)
			return strdup(buf);
		/* in another root, a link there may point anywhere in it: that it
		 * exists is what can be checked from here */
		snprintf(in_root, sizeof in_root, "%s%s", root ? root : "", buf);
		if (root && lstat(in_root, &st) == 0 && !S_ISDIR(st.st_mode))
			return strdup(buf);
		p += len + (colon ? 1 : 0);
	}
	return NULL;
}

/* ---- the child ---- */

int kx_take_ids(const kx_ids_t *ids)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	if (ids->uid == 0 || ids->gid == 0) {
		errno = EPERM;
		return -1;
	}
	/* groups and gid first: they need the capabilities the uid change drops */
	if (setgroups(0, NULL) < 0 || setresgid(ids->gid, ids->gid, ids->gid) < 0 ||
	    setresuid(ids->uid, ids->uid, ids->uid) < 0)
		return -1;
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return -1;
	if (ru != ids->uid || eu != ids->uid || su != ids->uid || rg != ids->gid ||
	    eg != ids->gid || sg != ids->gid || getgroups(0, NULL) != 0) {
		errno = EPERM;
		return -1;
	}
	/* and no way back */
	if (setuid(0) == 0) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

void kx_child_exec(const char *exe, char **argv, char **env, const kx_child_t *c)
{
	sigset_t none;
	int fd, e, out_fd = c->out_fd, in_fd = c->in_fd, err_fd = c->err_fd;
	pid_t parent = c->parent;

	setsid();
#if defined(HAVE_PRCTL) && defined(PR_SET_PDEATHSIG)
	prctl(PR_SET_PDEATHSIG, c->pdeath_sig > 0 ? c->pdeath_sig : SIGKILL);
	if (getppid() != parent) /* the parent died before prctl took effect */
		_exit(127);
#endif
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	/* OUT_FD out of the way of 0 to 2 first (a dup2 onto itself would
	 * leave it close-on-exec) */
	if (out_fd >= 0 && out_fd <= 2)
		out_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
	if (in_fd > 0 && in_fd <= 2)
		in_fd = fcntl(in_fd, F_DUPFD_CLOEXEC, 3);
	fd = in_fd > 0 ? in_fd : open("/dev/null", O_RDONLY);
	if (fd >= 0 && fd != 0) {
		dup2(fd, 0);
		close(fd);
	}
	if (err_fd > 0 && err_fd <= 2)
		err_fd = fcntl(err_fd, F_DUPFD_CLOEXEC, 3);
	fd = out_fd >= 0 ? out_fd : open("/dev/null", O_WRONLY);
	if (fd >= 0) {
		dup2(fd, 1);
		if (err_fd <= 0)
			dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	if (err_fd > 0) {
		dup2(err_fd, 2);
		close(err_fd);
	}
	if (c->ids) {
		if (kx_take_ids(c->ids) < 0)
			goto fail;
#if defined(HAVE_PRCTL) && defined(PR_SET_PDEATHSIG)
		prctl(PR_SET_PDEATHSIG, c->pdeath_sig > 0 ? c->pdeath_sig : SIGKILL);
		if (getppid() != parent)
			_exit(127);
#endif
	}
	if (c->cwd && chdir(c->cwd) < 0)
		goto fail;
		/* nothing of the host but 0-2 crosses exec (ERRFD is already close-on-exec) */
#ifdef HAVE_CLOSE_RANGE
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
#endif
	{
		long max = sysconf(_SC_OPEN_MAX);
		if (max < 0 || max > 65536)
			max = 65536;
		for (int i = 3; i < max; i++)
			fcntl(i, F_SETFD, FD_CLOEXEC);
	}
	for (size_t i = 0; i < c->n_keep; i++)
		fcntl(c->keep[i], F_SETFD, 0);
	execve(exe, argv, env);
fail:
	e = errno;
	if (write(c->errfd, &e, sizeof e) < 0)
		_exit(127);
	_exit(127);
}

void kx_kill_wait(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

long long kx_proc_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start;
	char state;
	ssize_t n;
	int fd;
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if (pid <= 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* after the command's name, which may hold spaces and parentheses:
	 * state is field 3, start time 22 */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 1,
	           " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
	           "%*d %*d %llu",
	           &state, &start) != 2 ||
	    state == 'Z' || state == 'X') /* (ended, not reaped yet) */
		return -1;
	return (long long)start;
}

/* (kx.h): beside our own
 * program (pkglibexecdir), or, run from a build tree by libtool (.libs/),
 * beside that.  0 or -1. */
int kx_helper_path(const char *program, char *path, size_t size)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	if (!(slash = strrchr(exe, '/')))
		return -1;
	*slash = '\0';
	if ((size_t)snprintf(path, size, "%s/%s", exe, program) < size && access(path, X_OK) == 0)
		return 0;
	if ((slash = strrchr(exe, '/')) && strcmp(slash, "/.libs") == 0) {
		*slash = '\0';
		if ((size_t)snprintf(path, size, "%s/%s", exe, program) < size &&
		    access(path, X_OK) == 0)
			return 0;
	}
	return -1;
}
