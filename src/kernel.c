/* src/kernel.c — a local kernel process: the `none` backend (not sandboxed). */
#include "private.h"

#include <errno.h>
#include <fcntl.h>
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

#define STOP_WAIT_MS 2500 /* each of: after shutdown_request, after SIGTERM */

struct kbox_kernel {
	char *name;
	kbox_interrupt_mode_t interrupt_mode;
	kbox_conn_t *conn;
	char *runtime_dir;
	bool own_dir;
	char *conn_file;
	char *log_path;
	pid_t pid;
	bool exited;
	int status;
};

/* ---- lifecycle ---- */

static char *make_runtime_dir(kbox_error_t *err)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	char tmpl[PATH_MAX];
	struct stat st;

	if (!base || !*base || stat(base, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    access(base, W_OK) < 0)
		base = "/tmp";
	snprintf(tmpl, sizeof tmpl, "%s/kbox-XXXXXX", base);
	if (!mkdtemp(tmpl)) {
		kbox_error_set_sys(err, "cannot create a runtime directory under %s", base);
		return NULL;
	}
	return strdup(tmpl);
}

/* SELF's runtime directory (O's, or a new one), its connection and the
 * connection file the kernel is given.  0, or -1 with ERR set. */
static int kernel_prepare_conn(kbox_kernel_t *self, const kbox_kernel_opts_t *o, kbox_error_t *err)
{
	char uuid[37], path[PATH_MAX];

	if (o && o->runtime_dir) {
		if (kbox_check_private_dir(o->runtime_dir, err) < 0)
			return -1;
		self->runtime_dir = strdup(o->runtime_dir);
	} else {
		if (!(self->runtime_dir = make_runtime_dir(err)))
			return -1;
		self->own_dir = true;
	}
	self->conn = (o && o->transport == KBOX_TRANSPORT_TCP)
	                     ? kbox_conn_new_tcp(err)
	                     : kbox_conn_new_ipc(self->runtime_dir, err);
	if (!self->conn)
		return -1;
	/* the kernel binds its sockets by these paths, hb's the longest
	 * (the supervisor's kernels get short ones: backend_none.c) */
	if (kbox_conn_transport(self->conn) == KBOX_TRANSPORT_IPC &&
	    strlen(kbox_conn_endpoint(self->conn, KBOX_CH_HB)) - 6 >= KBOX__SUN_PATH) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "runtime directory %s is too long for the kernel's unix sockets",
		               self->runtime_dir);
		return -1;
	}
	kbox_conn_set_kernel_name(self->conn, self->name);
	kbox_uuid(uuid);
	snprintf(path, sizeof path, "%s/kernel-%s.json", self->runtime_dir, uuid);
	if (kbox_conn_save(self->conn, path, err) < 0)
		return -1;
	self->conn_file = strdup(path);
	return 0;
}

/* Fork and exec EXE (ARGV, ENV) as SELF's kernel, its output appended to
 * SELF's log; an exec that fails is reported through a pipe, so that it
 * is ERR here.  0, or -1 with ERR set. */
static int kernel_spawn(kbox_kernel_t *self, const kbox_kernel_opts_t *o, const char *exe,
                        char **argv, char **env, kbox_error_t *err)
{
	int pipefd[2] = {-1, -1}, log_fd = -1, child_errno, rc = -1;
	pid_t pid, parent = getpid();
	ssize_t r;

	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		kbox_error_set_sys(err, "pipe");
		return -1;
	}
	/* the kernel's output: appended to the log named (not through a
	 * link), else nowhere */
	if (self->log_path)
		log_fd = open(self->log_path,
		              O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	pid = fork();
	if (pid < 0) {
		kbox_error_set_sys(err, "cannot fork the kernel process");
		goto out;
	}
	if (pid == 0) {
		kx_child_t c = {.cwd = o ? o->cwd : NULL,
		                .errfd = pipefd[1],
		                .out_fd = log_fd,
		                .parent = parent};
		close(pipefd[0]);
		kx_child_exec(exe, argv, env, &c);
	}
	self->pid = pid;
	kx_close(&pipefd[1]);
	do
		r = read(pipefd[0], &child_errno, sizeof child_errno);
	while (r < 0 && errno == EINTR);
	if (r == (ssize_t)sizeof child_errno) {
		errno = child_errno;
		kbox_error_set_sys(err, "kernel %s: cannot run %s%s%s", self->name, exe,
		                   o && o->cwd ? " in " : "", o && o->cwd ? o->cwd : "");
		waitpid(pid, NULL, 0);
		self->pid = -1;
		goto out;
	}
	rc = 0;
out:
	kx_close_all(pipefd, 2);
	kx_close(&log_fd);
	return rc;
}

kbox_kernel_t *kbox_kernel_start(const kbox_kspec_t *spec, const kbox_kernel_opts_t *o,
                                 kbox_error_t *err)
{
	kbox_kernel_t *self = calloc(1, sizeof *self);
	char **argv = NULL, **env = NULL, *exe = NULL;

	if (!self || kbox_init() < 0) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		free(self);
		return NULL;
	}
	self->pid = -1;
	self->status = -1;
	self->name = strdup(kbox_kspec_name(spec));
	self->interrupt_mode = kbox_kspec_interrupt_mode(spec);
	if (o && o->log_path)
		self->log_path = strdup(o->log_path);
	if (kernel_prepare_conn(self, o, err) < 0)
		goto fail;
	argv = kbox_kspec_format_argv(spec, self->conn_file, err);
	if (!argv)
		goto fail;
	exe = kx_resolve_command(argv[0], NULL);
	if (!exe) {
		kbox_error_set(err, KBOX_E_NOTFOUND, "kernel %s: command %s not found in %s",
		               self->name, argv[0], KX_SAFE_PATH);
		goto fail;
	}
	env = kbox_kernel_env(spec, o ? o->env : NULL, NULL);
	if (!env) {
		kbox_error_set(err, KBOX_E_NOMEM,
		               "out of memory building the kernel's environment");
		goto fail;
	}
	if (kernel_spawn(self, o, exe, argv, env, err) < 0)
		goto fail;
	goto out;
fail:
	kbox_kernel_destroy(&self);
out:
	kbox_strv_free(argv);
	kbox_strv_free(env);
	free(exe);
	return self;
}

bool kbox_kernel_is_alive(kbox_kernel_t *self)
{
	int st;
	pid_t r;
	if (self->pid <= 0 || self->exited)
		return false;
	do
		r = waitpid(self->pid, &st, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == self->pid || (r < 0 && errno == ECHILD)) {
		self->exited = true;
		self->status = r == self->pid ? st : -1;
		return false;
	}
	return true;
}

int kbox_kernel_exit_status(const kbox_kernel_t *self)
{
	return self->exited ? self->status : -1;
}

int kbox_kernel_signal(kbox_kernel_t *self, int sig, kbox_error_t *err)
{
	if (!kbox_kernel_is_alive(self))
		return kbox_error_set(err, KBOX_E_DEAD, "kernel %s is not running", self->name);
	if (killpg(self->pid, sig) < 0)
		return kbox_error_set_sys(err, "cannot signal kernel %s (pid %ld)", self->name,
		                          (long)self->pid);
	return 0;
}

static int hook_interrupt(void *arg, kbox_error_t *err)
{
	return kbox_kernel_signal(arg, SIGINT, err);
}

static int hook_alive(void *arg)
{
	return kbox_kernel_is_alive(arg) ? 1 : 0;
}

kbox_client_t *kbox_kernel_connect(kbox_kernel_t *self, kbox_error_t *err)
{
	kbox_client_t *c = kbox_client_new(self->conn, err);
	kbox_client_hooks_t hooks = {self->interrupt_mode == KBOX_INTERRUPT_SIGNAL ? hook_interrupt
	                                                                           : NULL,
	                             hook_alive, self};
	if (c)
		kbox_client_set_hooks(c, &hooks);
	return c;
}

/* Describe how the kernel ended into BUF ("exited with status 3"). */
static void describe_exit(const kbox_kernel_t *self, char *buf, size_t size)
{
	if (!self->exited || self->status < 0)
		snprintf(buf, size, "exited");
	else if (WIFEXITED(self->status))
		snprintf(buf, size, "exited with status %d", WEXITSTATUS(self->status));
	else if (WIFSIGNALED(self->status))
		snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(self->status),
		         strsignal(WTERMSIG(self->status)));
	else
		snprintf(buf, size, "exited");
}

kbox_kernel_t *kbox_kernel_start_ready(const kbox_kspec_t *spec, const kbox_kernel_opts_t *o,
                                       int timeout_ms, kbox_client_t **client_p, kbox_error_t *err)
{
	kbox_kernel_t *k = kbox_kernel_start(spec, o, err);
	kbox_client_t *c = NULL;
	kbox_error_t e = {0};

	if (!k)
		return NULL;
	c = kbox_kernel_connect(k, err);
	if (!c)
		goto fail;
	if (kbox_client_wait_ready(c, timeout_ms, &e) < 0) {
		if (!kbox_kernel_is_alive(k)) {
			char how[128];
			describe_exit(k, how, sizeof how);
			kbox_error_set(err, KBOX_E_DEAD, "kernel %s %s before it was ready%s%s%s",
			               k->name, how, k->log_path ? " (its output is in " : "",
			               k->log_path ? k->log_path : "", k->log_path ? ")" : "");
		} else {
			kbox_error_set(err, e.code, "kernel %s: %s", k->name, e.msg);
		}
		goto fail;
	}
	*client_p = c;
	return k;
fail:
	kbox_client_destroy(&c);
	kbox_kernel_destroy(&k);
	return NULL;
}

pid_t kbox_kernel_pid(const kbox_kernel_t *self)
{
	return self->pid;
}
const kbox_conn_t *kbox_kernel_conn(const kbox_kernel_t *self)
{
	return self->conn;
}
const char *kbox_kernel_connection_file(const kbox_kernel_t *self)
{
	return self->conn_file;
}
const char *kbox_kernel_runtime_dir(const kbox_kernel_t *self)
{
	return self->runtime_dir;
}

/* Wait up to MS for the process to exit. true if it did. */
static bool wait_exit(kbox_kernel_t *self, int ms)
{
	long long deadline = kx_now_ms() + ms;
	while (kbox_kernel_is_alive(self)) {
		if (kx_now_ms() >= deadline)
			return false;
		usleep(10000);
	}
	return true;
}

static void remove_files(kbox_kernel_t *self)
{
	if (self->conn)
		kbox_conn_remove_ipc_files(self->conn);
	if (self->conn_file) {
		unlink(self->conn_file);
		free(self->conn_file);
		self->conn_file = NULL;
	}
	if (self->own_dir && self->runtime_dir)
		rmdir(self->runtime_dir);
}

int kbox_kernel_stop(kbox_kernel_t *self, kbox_client_t *client, kbox_error_t *err)
{
	int rc = 0;
	if (kbox_kernel_is_alive(self)) {
		if (client) {
			kbox_msg_t *reply = kbox_client_shutdown(client, false, STOP_WAIT_MS, NULL);
			kbox_msg_destroy(&reply);
		}
		if (!client || !wait_exit(self, STOP_WAIT_MS)) {
			killpg(self->pid, SIGTERM);
			if (!wait_exit(self, STOP_WAIT_MS)) {
				killpg(self->pid, SIGKILL);
				if (!wait_exit(self, STOP_WAIT_MS))
					rc = kbox_error_set(
					        err, KBOX_E_SYSTEM,
					        "kernel %s (pid %ld) did not die after SIGKILL",
					        self->name, (long)self->pid);
			}
		}
	}
	remove_files(self);
	return rc;
}

void kbox_kernel_destroy(kbox_kernel_t **self_p)
{
	kbox_kernel_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	if (self->pid > 0 && kbox_kernel_is_alive(self)) {
		killpg(self->pid, SIGKILL);
		wait_exit(self, STOP_WAIT_MS);
	}
	remove_files(self);
	kbox_conn_destroy(&self->conn);
	free(self->name);
	free(self->runtime_dir);
	free(self->log_path);
	free(self);
	*self_p = NULL;
}
