/* src/backend.c — the backend interface and the `none` backend.
 *
 * Each backend is a table of operations; kbox_sandbox_t holds the table and
 * the backend's own state.  Nothing here uses libzmq or libsodium: the
 * steps that need them run in helper processes of the kbox program (see
 * kbox/backend.h), so the supervisor that links this stays small. */
#include "private.h"
#include <kbox/backend.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#define STOP_STEP_MS 2500
#define SHUTDOWN_HELPER_MS 3000

typedef struct backend_ops backend_ops_t;

struct kbox_sandbox {
	const backend_ops_t *ops;
	kbox_interrupt_mode_t interrupt_mode;
	char *kernel, *kbox_exe, *conn_path, *runtime_dir, *workspace, *log_path;
	char **env;
	kbox_sandbox_opts_t limits;
	pid_t pid;
	bool ended;
	int status; /* wait status once ended */
	char cause[256];
	/* the `kbox _ready` helper while readiness is awaited */
	pid_t ready_pid;
	int ready_fd;
	long long ready_deadline;
	char ready_msg[512];
	size_t ready_len;
};

struct backend_ops {
	const char *name;
	bool sandboxed;
	bool memory, cpus, pids; /* the limits it enforces */
	int (*spawn)(kbox_sandbox_t *self, kbox_error_t *err);
	/* true while running; once ended, fill self->cause */
	bool (*alive)(kbox_sandbox_t *self);
	int (*signal)(kbox_sandbox_t *self, int sig, kbox_error_t *err);
	void (*cleanup)(kbox_sandbox_t *self);
};

/* ---- helpers: `kbox _CMD ARGS…` as a child, its stderr kept ---- */

typedef struct {
	pid_t pid;
	int errfd;
} helper_t;

static int helper_start(kbox_sandbox_t *self, helper_t *h, const char *const *argv,
                        kbox_error_t *err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return kbox__err_sys(err, "pipe");
	h->pid = fork();
	if (h->pid < 0) {
		close(p[0]);
		close(p[1]);
		return kbox__err_sys(err, "cannot fork a kbox helper");
	}
	if (h->pid == 0) {
		sigset_t none;
		int fd = open("/dev/null", O_RDWR);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
		}
		dup2(p[1], 2);
		execv(self->kbox_exe, (char *const *)argv);
		dprintf(2, "cannot run %s: %s", self->kbox_exe, strerror(errno));
		_exit(127);
	}
	close(p[1]);
	h->errfd = p[0];
	fcntl(h->errfd, F_SETFL, O_NONBLOCK);
	return 0;
}

/* Wait for the helper within TIMEOUT_MS, giving up early when the kernel
 * ends (if WATCH).  Its exit status, or -1 (timeout / kernel gone), with
 * its stderr in MSG. */
static int helper_wait(kbox_sandbox_t *self, helper_t *h, int timeout_ms, bool watch,
                       char *msg, size_t size)
{
	long long deadline = kbox__now_ms() + timeout_ms;
	size_t n = 0;
	int st = -1, rc = -1;
	msg[0] = '\0';
	for (;;) {
		struct pollfd p = {h->errfd, POLLIN, 0};
		pid_t r;
		if (poll(&p, 1, 50) > 0 && n + 1 < size) {
			ssize_t got = read(h->errfd, msg + n, size - n - 1);
			if (got > 0)
				n += (size_t)got;
			msg[n] = '\0';
		}
		do
			r = waitpid(h->pid, &st, WNOHANG);
		while (r < 0 && errno == EINTR);
		if (r == h->pid) {
			ssize_t got;
			while (n + 1 < size && (got = read(h->errfd, msg + n, size - n - 1)) > 0)
				n += (size_t)got;
			msg[n] = '\0';
			rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			break;
		}
		if ((watch && !kbox_sandbox_alive(self)) || kbox__now_ms() >= deadline) {
			kill(h->pid, SIGKILL);
			while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR)
				;
			break;
		}
	}
	close(h->errfd);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	return rc;
}

/* Run a helper on the connection file and wait for it. Its exit status or -1. */
static int helper_run(kbox_sandbox_t *self, const char *cmd, const char *arg, int timeout_ms,
                      bool watch, char *msg, size_t size, kbox_error_t *err)
{
	const char *argv[] = {"kbox", cmd, self->conn_path, arg, NULL};
	helper_t h = {-1, -1};
	if (helper_start(self, &h, argv, err) < 0)
		return -1;
	return helper_wait(self, &h, timeout_ms, watch, msg, size);
}

/* ---- none: a local process ---- */

static int none_spawn(kbox_sandbox_t *self, kbox_error_t *err)
{
	size_t n_env = 0;
	const char **argv;
	pid_t parent = getpid();

	while (self->env && self->env[n_env])
		n_env++;
	if (!(argv = calloc(n_env + 8, sizeof *argv)))
		return kbox__err(err, KBOX_E_NOMEM, "out of memory");
	argv[0] = "kbox";
	argv[1] = "_kernel";
	argv[2] = self->kernel;
	argv[3] = self->conn_path;
	argv[4] = self->runtime_dir;
	argv[5] = self->workspace ? self->workspace : "/";
	argv[6] = self->log_path ? self->log_path : "/dev/null";
	for (size_t i = 0; i < n_env; i++)
		argv[7 + i] = self->env[i];
	self->pid = fork();
	if (self->pid < 0) {
		free(argv);
		return kbox__err_sys(err, "cannot fork the kernel process");
	}
	if (self->pid == 0) {
		sigset_t none;
		setsid();
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(self->kbox_exe, (char *const *)argv);
		dprintf(2, "kbox: cannot run %s _kernel: %s\n", self->kbox_exe, strerror(errno));
		_exit(127);
	}
	free(argv);
	return 0;
}

static bool none_alive(kbox_sandbox_t *self)
{
	int st;
	pid_t r;
	do
		r = waitpid(self->pid, &st, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return true;
	/* what the kernel started in its process group goes with it (the
	 * group outlives its leader; its id is not reused while it exists) */
	killpg(self->pid, SIGKILL);
	self->status = r == self->pid ? st : -1;
	if (r != self->pid)
		snprintf(self->cause, sizeof self->cause, "the kernel process vanished (not reaped)");
	else if (WIFEXITED(st))
		snprintf(self->cause, sizeof self->cause, "the kernel exited with status %d%s",
		         WEXITSTATUS(st), WEXITSTATUS(st) == 127 ? " (it could not be started)" : "");
	else if (WIFSIGNALED(st)) {
		const char *abbrev = sigabbrev_np(WTERMSIG(st));
		snprintf(self->cause, sizeof self->cause, "the kernel was killed by signal %d (SIG%s)",
		         WTERMSIG(st), abbrev ? abbrev : "?");
	} else
		snprintf(self->cause, sizeof self->cause, "the kernel ended (wait status %d)", st);
	return false;
}

static int none_signal(kbox_sandbox_t *self, int sig, kbox_error_t *err)
{
	if (!kbox_sandbox_alive(self))
		return kbox__err(err, KBOX_E_DEAD, "the kernel is not running");
	if (killpg(self->pid, sig) < 0 && kill(self->pid, sig) < 0)
		return kbox__err_sys(err, "cannot signal the kernel (pid %ld)", (long)self->pid);
	return 0;
}

/* The connection file and the ipc sockets beside it. */
static void none_cleanup(kbox_sandbox_t *self)
{
	DIR *d;
	struct dirent *e;
	size_t len;
	unlink(self->conn_path);
	/* sockets are named kernel-TAG-ipc-N: one kernel per runtime dir */
	if (!(d = opendir(self->runtime_dir)))
		return;
	while ((e = readdir(d))) {
		len = strlen(e->d_name);
		if (strncmp(e->d_name, "kernel-", 7) == 0 && len > 6 && strstr(e->d_name, "-ipc-"))
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

static const backend_ops_t none_ops = {
    "none", false, false, false, false, none_spawn, none_alive, none_signal, none_cleanup,
};

static const backend_ops_t *const backends[] = {&none_ops, NULL};
static const char *const backend_names[] = {"none", NULL};

static const backend_ops_t *find(const char *name)
{
	for (size_t i = 0; name && backends[i]; i++)
		if (strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}

const char *const *kbox_backend_names(void) { return backend_names; }

bool kbox_backend_exists(const char *name) { return find(name) != NULL; }

bool kbox_backend_sandboxed(const char *name)
{
	const backend_ops_t *ops = find(name);
	return ops && ops->sandboxed;
}

const char *kbox_backend_unenforced(const char *name, const kbox_sandbox_opts_t *o, char *buf,
                                    size_t size)
{
	const backend_ops_t *ops = find(name);
	size_t n = 0;
	if (size)
		buf[0] = '\0';
	if (!ops || !o || !size)
		return buf;
#define ADD(cond, what)                                                                        \
	if ((cond) && n < size)                                                                    \
		n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", what);
	ADD(o->memory_bytes > 0 && !ops->memory, "memory");
	ADD(o->cpus > 0 && !ops->cpus, "cpus");
	ADD(o->pids > 0 && !ops->pids, "pids");
#undef ADD
	return buf;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

kbox_sandbox_t *kbox_sandbox_spawn(const char *name, const kbox_kspec_t *spec,
                                   const kbox_sandbox_opts_t *o, kbox_error_t *err)
{
	const backend_ops_t *ops = find(name);
	kbox_sandbox_t *self;
	size_t n_env = 0;

	if (!ops) {
		kbox__err(err, KBOX_E_NOTFOUND, "unknown backend \"%s\"", name ? name : "(null)");
		return NULL;
	}
	if (!o || !o->kbox_exe || !o->conn_path || !o->runtime_dir) {
		kbox__err(err, KBOX_E_INVALID, "a sandbox needs kbox_exe, conn_path and runtime_dir");
		return NULL;
	}
	if (!(self = calloc(1, sizeof *self)))
		goto nomem;
	self->ops = ops;
	self->pid = -1;
	self->ready_pid = -1;
	self->ready_fd = -1;
	self->interrupt_mode = kbox_kspec_interrupt_mode(spec);
	self->limits = *o;
	while (o->env && o->env[n_env])
		n_env++;
	if (!(self->kernel = strdup(kbox_kspec_name(spec))) ||
	    !(self->kbox_exe = strdup(o->kbox_exe)) || !(self->conn_path = strdup(o->conn_path)) ||
	    !(self->runtime_dir = strdup(o->runtime_dir)) ||
	    (o->workspace && !(self->workspace = strdup(o->workspace))) ||
	    (o->log_path && !(self->log_path = strdup(o->log_path))) ||
	    !(self->env = calloc(n_env + 1, sizeof *self->env)))
		goto nomem;
	for (size_t i = 0; i < n_env; i++)
		if (!(self->env[i] = dup_or_null(o->env[i])))
			goto nomem;
	if (ops->spawn(self, err) < 0) {
		kbox_sandbox_destroy(&self);
		return NULL;
	}
	return self;
nomem:
	kbox_sandbox_destroy(&self);
	kbox__err(err, KBOX_E_NOMEM, "out of memory");
	return NULL;
}

int kbox_sandbox_ready_begin(kbox_sandbox_t *self, int timeout_ms, kbox_error_t *err)
{
	char t[16];
	const char *argv[] = {"kbox", "_ready", self->conn_path, t, NULL};
	helper_t h = {-1, -1};
	if (self->ready_pid > 0)
		return kbox__err(err, KBOX_E_INVALID, "already waiting for the kernel to be ready");
	snprintf(t, sizeof t, "%d", timeout_ms);
	if (helper_start(self, &h, argv, err) < 0)
		return -1;
	self->ready_pid = h.pid;
	self->ready_fd = h.errfd;
	self->ready_deadline = kbox__now_ms() + timeout_ms + 5000;
	self->ready_len = 0;
	self->ready_msg[0] = '\0';
	return self->ready_fd;
}

/* Kill and reap the readiness helper. */
static void ready_end(kbox_sandbox_t *self)
{
	int st;
	if (self->ready_pid > 0) {
		kill(self->ready_pid, SIGKILL);
		while (waitpid(self->ready_pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	if (self->ready_fd >= 0)
		close(self->ready_fd);
	self->ready_pid = -1;
	self->ready_fd = -1;
}

int kbox_sandbox_ready_poll(kbox_sandbox_t *self, kbox_error_t *err)
{
	int st, code;
	pid_t r;
	ssize_t got;
	char *m = self->ready_msg;

	if (self->ready_pid <= 0)
		return kbox__err(err, KBOX_E_INVALID, "not waiting for the kernel to be ready");
	while (self->ready_len + 1 < sizeof self->ready_msg &&
	       (got = read(self->ready_fd, m + self->ready_len,
	                   sizeof self->ready_msg - self->ready_len - 1)) > 0)
		self->ready_len += (size_t)got;
	m[self->ready_len] = '\0';
	do
		r = waitpid(self->ready_pid, &st, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == self->ready_pid) {
		self->ready_pid = -1; /* reaped */
		code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		ready_end(self);
		while (self->ready_len > 0 && (m[self->ready_len - 1] == '\n' || m[self->ready_len - 1] == ' '))
			m[--self->ready_len] = '\0';
		if (code == 0)
			return 0;
		if (!kbox_sandbox_alive(self))
			goto dead;
		return kbox__err(err, KBOX_E_TIMEOUT, "%s", m[0] ? m : "the kernel did not become ready");
	}
	if (!kbox_sandbox_alive(self)) {
		ready_end(self);
		goto dead;
	}
	if (kbox__now_ms() >= self->ready_deadline) {
		ready_end(self);
		return kbox__err(err, KBOX_E_TIMEOUT, "the kernel did not become ready");
	}
	return 1;
dead:
	return kbox__err(err, KBOX_E_DEAD, "%s before it was ready%s%s%s", self->cause,
	                 self->log_path ? " (see " : "", self->log_path ? self->log_path : "",
	                 self->log_path ? ")" : "");
}

int kbox_sandbox_wait_ready(kbox_sandbox_t *self, int timeout_ms, kbox_error_t *err)
{
	int rc, fd = kbox_sandbox_ready_begin(self, timeout_ms, err);
	if (fd < 0)
		return -1;
	while ((rc = kbox_sandbox_ready_poll(self, err)) == 1) {
		struct pollfd p = {fd, POLLIN, 0};
		poll(&p, 1, 50);
	}
	return rc;
}

const char *kbox_sandbox_connection_file(const kbox_sandbox_t *self) { return self->conn_path; }

const char *kbox_sandbox_backend(const kbox_sandbox_t *self) { return self->ops->name; }

pid_t kbox_sandbox_pid(const kbox_sandbox_t *self) { return self->pid; }

bool kbox_sandbox_alive(kbox_sandbox_t *self)
{
	if (self->ended || self->pid <= 0)
		return false;
	if (self->ops->alive(self))
		return true;
	self->ended = true;
	return false;
}

const char *kbox_sandbox_cause(const kbox_sandbox_t *self)
{
	return self->ended ? self->cause : "";
}

long long kbox_sandbox_memory(const kbox_sandbox_t *self)
{
	char path[64], line[256];
	long long kb = -1;
	FILE *f;
	if (self->ended || self->pid <= 0)
		return -1;
	snprintf(path, sizeof path, "/proc/%ld/status", (long)self->pid);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

int kbox_sandbox_interrupt(kbox_sandbox_t *self, kbox_error_t *err)
{
	char msg[512];
	if (self->interrupt_mode == KBOX_INTERRUPT_SIGNAL)
		return self->ops->signal(self, SIGINT, err);
	if (helper_run(self, "_interrupt", "5000", 8000, true, msg, sizeof msg, err) != 0)
		return kbox__err(err, KBOX_E_TIMEOUT, "interrupt_request failed: %s",
		                 msg[0] ? msg : "no reply");
	return 0;
}

int kbox_sandbox_signal(kbox_sandbox_t *self, int sig, kbox_error_t *err)
{
	return self->ops->signal(self, sig, err);
}

/* Wait up to MS for the kernel to end. */
static bool wait_end(kbox_sandbox_t *self, int ms)
{
	long long deadline = kbox__now_ms() + ms;
	while (kbox_sandbox_alive(self)) {
		if (kbox__now_ms() >= deadline)
			return false;
		usleep(20000);
	}
	return true;
}

int kbox_sandbox_stop(kbox_sandbox_t *self, bool graceful, kbox_error_t *err)
{
	char msg[512];
	(void)err;
	if (graceful && kbox_sandbox_alive(self) &&
	    helper_run(self, "_shutdown", "2000", SHUTDOWN_HELPER_MS, true, msg, sizeof msg,
	               NULL) == 0)
		wait_end(self, STOP_STEP_MS);
	if (kbox_sandbox_alive(self)) {
		self->ops->signal(self, SIGTERM, NULL);
		if (!wait_end(self, STOP_STEP_MS)) {
			self->ops->signal(self, SIGKILL, NULL);
			wait_end(self, STOP_STEP_MS);
		}
	}
	self->ops->cleanup(self);
	return 0;
}

void kbox_sandbox_destroy(kbox_sandbox_t **self_p)
{
	kbox_sandbox_t *self;
	if (!self_p || !(self = *self_p))
		return;
	ready_end(self);
	if (self->pid > 0 && kbox_sandbox_alive(self)) {
		self->ops->signal(self, SIGKILL, NULL);
		wait_end(self, STOP_STEP_MS);
	}
	if (self->pid > 0 && self->conn_path && self->runtime_dir)
		self->ops->cleanup(self);
	for (size_t i = 0; self->env && self->env[i]; i++)
		free(self->env[i]);
	free(self->env);
	free(self->kernel);
	free(self->kbox_exe);
	free(self->conn_path);
	free(self->runtime_dir);
	free(self->workspace);
	free(self->log_path);
	free(self);
	*self_p = NULL;
}
