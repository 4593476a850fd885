/* src/process.c — what starting a kernel process needs, whatever starts it
 * (kernel.c's local kernels, the runtime's sandboxes): the kernel's
 * environment, a command looked up in a safe PATH, and the child's side of
 * fork (declared in private.h).  Only libc: kbox(1) links it too. */
#include "private.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <grp.h>
#include <unistd.h>
#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif

#define SAFE_PATH KBOX__SAFE_PATH

/* ---- environment ---- */

/* Set KV ("KEY=VALUE", copied) in ENV (NULL-terminated, *N entries), replacing
 * an entry with the same key. */
static int env_set(char ***env, size_t *n, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
	char *copy = strdup(kv), **v;
	if (!copy || !eq)
		return free(copy), eq ? -1 : 0;
	for (size_t i = 0; i < *n; i++)
		if (strncmp((*env)[i], kv, klen + 1) == 0) {
			free((*env)[i]);
			(*env)[i] = copy;
			return 0;
		}
	v = realloc(*env, (*n + 2) * sizeof *v);
	if (!v) {
		free(copy);
		return -1;
	}
	v[(*n)++] = copy;
	v[*n] = NULL;
	*env = v;
	return 0;
}

char **kbox__kernel_env(const kbox_kspec_t *spec, const kbox_kernel_opts_t *o, const char *home)
{
	char **env = calloc(1, sizeof *env), **spec_env;
	size_t n = 0;
	char buf[PATH_MAX + 16];

	if (!home)
		home = getenv("HOME");
	int rc = 0;

	if (!env)
		return NULL;
	rc |= env_set(&env, &n, "PATH=" SAFE_PATH);
	snprintf(buf, sizeof buf, "HOME=%s", home && *home ? home : "/");
	rc |= env_set(&env, &n, buf);
	rc |= env_set(&env, &n, "LANG=C.UTF-8");
	snprintf(buf, sizeof buf, "JPY_PARENT_PID=%ld", (long)getpid());
	rc |= env_set(&env, &n, buf);
	spec_env = kbox_kspec_format_env(spec);
	for (char **p = spec_env; p && *p; p++)
		rc |= env_set(&env, &n, *p);
	kbox_strv_free(spec_env);
	for (const char *const *p = o ? o->env : NULL; p && *p; p++)
		rc |= env_set(&env, &n, *p);
	if (rc) {
		kbox_strv_free(env);
		return NULL;
	}
	return env;
}

char *kbox__resolve_command(const char *cmd, const char *root)
{
	char buf[PATH_MAX], in_root[PATH_MAX * 2];
	const char *p = SAFE_PATH;
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

int kbox__take_ids(const kbox_ids_t *ids)
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

void kbox__child_exec(const char *exe, char **argv, char **env, const kbox_kernel_opts_t *o,
                      int errfd, int out_fd, const kbox_ids_t *ids, pid_t parent,
                      const int *keep, size_t n_keep)
{
	sigset_t none;
	int fd, e;

	setsid();
#if defined(HAVE_PRCTL) && defined(PR_SET_PDEATHSIG)
	prctl(PR_SET_PDEATHSIG, SIGKILL);
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
	fd = open("/dev/null", O_RDONLY);
	if (fd >= 0 && fd != 0) {
		dup2(fd, 0);
		close(fd);
	}
	fd = out_fd >= 0 ? out_fd : open("/dev/null", O_WRONLY);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	if (ids) {
		if (kbox__take_ids(ids) < 0)
			goto fail;
#if defined(HAVE_PRCTL) && defined(PR_SET_PDEATHSIG)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
#endif
	}
	if (o && o->cwd && chdir(o->cwd) < 0)
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
	for (size_t i = 0; i < n_keep; i++)
		fcntl(keep[i], F_SETFD, 0);
	execve(exe, argv, env);
fail:
	e = errno;
	if (write(errfd, &e, sizeof e) < 0)
		_exit(127);
	_exit(127);
}

