/* src/runtime/backend_none.c — backend `none`: the kernel as a plain local
 * process, in a process group and session of its own.  NOT a sandbox: for
 * development and tests only (kbox says so when it is used). */
#include "runtime/runtime.h"
#include "runtime/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The kernel's descriptor of the directory of its sockets: its connection
 * file names them /proc/self/fd/3/…, a path short enough for a unix socket
 * however long the host's is. */
#define SOCKETS_FD 3
#define SOCKETS_INSIDE "/proc/self/fd/3"
/* and of its connection file, a memfd (no file of the host's holds its
 * key: a process that holds the session's directory open, another
 * sandbox's code say, finds none): -f /proc/self/fd/4, which ipykernel
 * writes again once its sockets are bound */
#define CONN_FD 4
#define CONN_INSIDE "/proc/self/fd/4"

typedef struct {
	const char *exe;
	int log_fd, dir_fd, conn_fd;
	char **argv, **env;
	const char *cwd;
	pid_t parent;
} none_child_t;

static void none_child(void *arg, int errfd)
{
	none_child_t *c = arg;
	int keep[2] = {SOCKETS_FD, CONN_FD}, log_fd = c->log_fd, dir_fd = c->dir_fd, e;
	/* what is at SOCKETS_FD and CONN_FD moves out of the way first */
	if ((errfd == SOCKETS_FD || errfd == CONN_FD) &&
	    (errfd = fcntl(errfd, F_DUPFD_CLOEXEC, CONN_FD + 1)) < 0)
		_exit(127);
	if (log_fd == SOCKETS_FD || log_fd == CONN_FD)
		log_fd = fcntl(log_fd, F_DUPFD_CLOEXEC, CONN_FD + 1);
	if (dir_fd == CONN_FD)
		dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, CONN_FD + 1);
	if ((log_fd < 0 && c->log_fd >= 0) || dir_fd < 0 ||
	    (c->conn_fd >= 0 && c->conn_fd != CONN_FD && dup2(c->conn_fd, CONN_FD) < 0) ||
	    (dir_fd != SOCKETS_FD && dup2(dir_fd, SOCKETS_FD) < 0)) {
		e = errno;
		if (write(errfd, &e, sizeof e) < 0)
			_exit(127);
		_exit(127);
	}
	kx_child_t child = {.cwd = c->cwd,
	                    .errfd = errfd,
	                    .out_fd = log_fd,
	                    .parent = c->parent,
	                    .keep = keep,
	                    .n_keep = c->conn_fd >= 0 ? 2 : 1};
	kx_child_exec(c->exe, c->argv, c->env, &child);
}

static int none_start(kr_sandbox_t *sb, char **argv, kbox_error_t *err)
{
	char **env = NULL, *exe = NULL;
	int child_errno, rc = -1, f, dir_fd = -1, conn_fd = -1;
	none_child_t c;

	if (!(exe = kx_resolve_command(argv[0], NULL))) {
		kbox_error_set(err, KBOX_E_NOTFOUND, "kernel %s: command %s not found in %s",
		               sb->kernel, argv[0], KX_SAFE_PATH);
		goto out;
	}
	if (!(env = kbox_kernel_env(sb->spec, sb->o.env, NULL))) {
		kbox_error_set(err, KBOX_E_NOMEM,
		               "out of memory building the kernel's environment");
		goto out;
	}
	dir_fd = open(sb->o.runtime_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0) {
		kbox_error_set_sys(err, "kernel %s: directory %s", sb->kernel, sb->o.runtime_dir);
		goto out;
	}
	/* the connection file, 0600 as jupyter_client's writer wants it */
	if (sb->o.conn_text) {
		size_t len = strlen(sb->o.conn_text);
		conn_fd = memfd_create("kbox-connection", MFD_CLOEXEC);
		if (conn_fd < 0 || fchmod(conn_fd, 0600) < 0 ||
		    write(conn_fd, sb->o.conn_text, len) != (ssize_t)len) {
			kbox_error_set_sys(err, "kernel %s: cannot pass its connection file",
			                   sb->kernel);
			goto out;
		}
	}
	c = (none_child_t){exe,  sb->o.log_fd, dir_fd,          conn_fd,
	                   argv, env,          sb->o.workspace, getpid()};
	if ((f = kr_sandbox_fork(sb, none_child, &c, &child_errno, err)) < 0)
		goto out;
	if (f > 0) {
		errno = child_errno;
		kbox_error_set_sys(err, "kernel %s: cannot run %s in %s", sb->kernel, exe,
		                   sb->o.workspace ? sb->o.workspace : "/");
		goto out;
	}
	sb->sockets_fd = dir_fd; /* the host's way to them too */
	dir_fd = -1;
	rc = 0;
out:
	if (dir_fd >= 0)
		close(dir_fd);
	if (conn_fd >= 0)
		close(conn_fd);
	kbox_strv_free(env);
	free(exe);
	return rc;
}

static bool none_wait(kr_sandbox_t *sb)
{
	if (kr_sandbox_poll(sb, "the kernel process", false))
		return true;
	/* what the kernel started in its process group goes with it (the
	 * group outlives its leader; its id is not reused while it exists) */
	killpg(sb->pid, SIGKILL);
	return false;
}

static int none_signal(kr_sandbox_t *sb, int sig, kbox_error_t *err)
{
	if (killpg(sb->pid, sig) < 0 && kill(sb->pid, sig) < 0)
		return kbox_error_set_sys(err, "cannot signal the kernel (pid %ld)", (long)sb->pid);
	return 0;
}

const kr_backend_t kr_backend_none = {
        .name = "none",
        .sandboxed = false,
        .limits = 0,
        .sockets_inside = SOCKETS_INSIDE,
        .conn_inside = CONN_INSIDE,
        .conn_fd = true,
        .start = none_start,
        .signal = none_signal,
        .wait = none_wait,
};
