/* src/runtime/backend_none.c — backend `none`: the kernel as a plain local
 * process, in a process group and session of its own.  NOT a sandbox: for
 * development and tests only (kbox says so when it is used). */
#include "private.h"
#include "runtime/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int none_start(kbox_sandbox_t *sb, char **argv, kbox_error_t *err)
{
	kbox_kernel_opts_t ko = {0};
	char **env = NULL, *exe = NULL;
	int p[2] = {-1, -1}, child_errno, rc = -1;
	pid_t parent = getpid();
	ssize_t r;

	ko.cwd = sb->o.workspace;
	ko.env = sb->o.env;
	if (!(exe = kbox__resolve_command(argv[0], NULL))) {
		kbox__err(err, KBOX_E_NOTFOUND, "kernel %s: command %s not found in %s", sb->kernel,
		          argv[0], KBOX__SAFE_PATH);
		goto out;
	}
	if (!(env = kbox__kernel_env(sb->spec, &ko, NULL))) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory building the kernel's environment");
		goto out;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		kbox__err_sys(err, "pipe");
		goto out;
	}
	if ((sb->pid = fork()) < 0) {
		kbox__err_sys(err, "cannot fork the kernel process");
		goto out;
	}
	if (sb->pid == 0) {
		close(p[0]);
		kbox_sandbox_child_limits();
		kbox__child_exec(exe, argv, env, &ko, p[1], sb->o.log_path, parent, NULL, 0);
	}
	close(p[1]);
	p[1] = -1;
	do
		r = read(p[0], &child_errno, sizeof child_errno);
	while (r < 0 && errno == EINTR);
	if (r == (ssize_t)sizeof child_errno) {
		errno = child_errno;
		kbox__err_sys(err, "kernel %s: cannot run %s in %s", sb->kernel, exe,
		              sb->o.workspace ? sb->o.workspace : "/");
		while (waitpid(sb->pid, NULL, 0) < 0 && errno == EINTR)
			;
		sb->pid = -1;
		goto out;
	}
	rc = 0;
out:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	kbox_strv_free(env);
	free(exe);
	return rc;
}

static bool none_wait(kbox_sandbox_t *sb)
{
	int st;
	pid_t r;
	do
		r = waitpid(sb->pid, &st, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return true;
	/* what the kernel started in its process group goes with it (the
	 * group outlives its leader; its id is not reused while it exists) */
	killpg(sb->pid, SIGKILL);
	sb->status = r == sb->pid ? st : -1;
	if (r != sb->pid)
		snprintf(sb->cause, sizeof sb->cause, "the kernel process vanished (not reaped)");
	else
		kbox_sandbox_set_cause(sb, st, false);
	return false;
}

static int none_signal(kbox_sandbox_t *sb, int sig, kbox_error_t *err)
{
	if (killpg(sb->pid, sig) < 0 && kill(sb->pid, sig) < 0)
		return kbox__err_sys(err, "cannot signal the kernel (pid %ld)", (long)sb->pid);
	return 0;
}

const kbox_backend_t kbox_backend_none = {
    .name = "none",
    .sandboxed = false,
    .limits = 0,
    .sockets_inside = NULL,
    .start = none_start,
    .signal = none_signal,
    .wait = none_wait,
};
