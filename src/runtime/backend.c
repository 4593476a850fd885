/* src/runtime/backend.c — the list of backends and what all sandboxes share
 * (backend.h).  A backend's own code is in its file, backend_NAME.c. */
#include "runtime/runtime.h"
#include "runtime/backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern const kr_backend_t kr_backend_bwrap, kr_backend_docker, kr_backend_gateway, kr_backend_none;

/* The backends: one line each. */
static const kr_backend_t *const backends[] = {&kr_backend_bwrap, &kr_backend_docker,
                                               &kr_backend_gateway, &kr_backend_none, NULL};
static const char *const backend_names[] = {"bwrap", "docker", "gateway", "none", NULL};

int kr_sandbox_fork(kr_sandbox_t *sb, kr_sandbox_child_fn *child, void *arg, int *child_errno,
                    kbox_error_t *err)
{
	int p[2], rc = 0;
	ssize_t r;
	if (pipe2(p, O_CLOEXEC) < 0)
		return kbox_error_set_sys(err, "pipe");
	if ((sb->pid = fork()) < 0) {
		kbox_error_set_sys(err, "cannot fork the %s process",
		                   sb->backend->sandboxed ? "sandbox" : "kernel");
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (sb->pid == 0) {
		close(p[0]);
		child(arg, p[1]);
		_exit(127); /* not reached */
	}
	close(p[1]);
	/* end of file: the exec closed it; an int: the child's errno */
	do
		r = read(p[0], child_errno, sizeof *child_errno);
	while (r < 0 && errno == EINTR);
	close(p[0]);
	if (r == (ssize_t)sizeof *child_errno) {
		while (waitpid(sb->pid, NULL, 0) < 0 && errno == EINTR)
			;
		sb->pid = -1;
		rc = 1;
	}
	return rc;
}

const kr_backend_t *kr_backend_find(const char *name)
{
	for (size_t i = 0; name && backends[i]; i++)
		if (strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}

const char *const *kr_backend_names(void)
{
	return backend_names;
}

bool kr_backend_exists(const char *name)
{
	return kr_backend_find(name) != NULL;
}

bool kr_backend_sandboxed(const char *name)
{
	const kr_backend_t *b = kr_backend_find(name);
	return b && b->sandboxed;
}

bool kr_backend_remote(const char *name)
{
	const kr_backend_t *b = kr_backend_find(name);
	return b && b->remote;
}

bool kr_backend_unsandboxed_here(const char *name)
{
	const kr_backend_t *b = kr_backend_find(name);
	return b && !b->sandboxed && !b->remote;
}

const char *kr_backend_unenforced(const char *name, const kr_sandbox_opts_t *o, char *buf,
                                  size_t size)
{
	const kr_backend_t *b = kr_backend_find(name);
	kr_sandbox_opts_t l;
	unsigned gone = 0;
	char why[512] = "";
	size_t n = 0;

	if (size)
		buf[0] = '\0';
	if (!b || !o || !size)
		return buf;
	l = *o;
	if (b->defaults)
		b->defaults(&l);
	if (b->unavailable)
		gone = b->unavailable(why, sizeof why);
#define ADD(cond, what)         \
	if ((cond) && n < size) \
		n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", what);
	ADD(l.memory_bytes > 0 && (!(b->limits & KR_LIMIT_MEMORY) || (gone & KR_LIMIT_MEMORY)),
	    "memory");
	ADD(l.cpus > 0 && (!(b->limits & KR_LIMIT_CPUS) || (gone & KR_LIMIT_CPUS)), "cpus");
	ADD(l.pids > 0 && (!(b->limits & KR_LIMIT_PIDS) || (gone & KR_LIMIT_PIDS)), "pids");
#undef ADD
	if (n && why[0] && n < size)
		snprintf(buf + n, size - n, " (%s)", why);
	return buf;
}

void kr_sandbox_set_cause(kr_sandbox_t *sb, int st, bool signal_exit)
{
	int sig = 0;
	if (WIFSIGNALED(st))
		sig = WTERMSIG(st);
	else if (signal_exit && WIFEXITED(st) && WEXITSTATUS(st) > 128 &&
	         WEXITSTATUS(st) < 128 + 65)
		sig = WEXITSTATUS(st) - 128;
	if (sig) {
		const char *abbrev = sigabbrev_np(sig);
		snprintf(sb->cause, sizeof sb->cause, "the kernel was killed by signal %d (SIG%s)",
		         sig, abbrev ? abbrev : "?");
	} else if (WIFEXITED(st))
		snprintf(sb->cause, sizeof sb->cause, "the kernel exited with status %d%s",
		         WEXITSTATUS(st),
		         WEXITSTATUS(st) == 127 ? " (it could not be started)" : "");
	else
		snprintf(sb->cause, sizeof sb->cause, "the kernel ended (wait status %d)", st);
}

bool kr_sandbox_poll(kr_sandbox_t *sb, const char *what, bool signal_exit)
{
	int st;
	pid_t r;

	do
		r = waitpid(sb->pid, &st, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return true;
	sb->status = r == sb->pid ? st : -1;
	if (r != sb->pid)
		snprintf(sb->cause, sizeof sb->cause, "%s vanished (not reaped)", what);
	else
		kr_sandbox_set_cause(sb, st, signal_exit);
	return false;
}

/* Append EXTRA (NULL-terminated; may be NULL) to the new argv *ARGV when
 * it runs ipykernel: "-m ipykernel_launcher" or "-m ipykernel".  0, or -1
 * when out of memory (*ARGV is then freed and NULL). */
static int add_ipykernel_args(char ***argv, const char *const *extra)
{
	size_t n = 0, k = 0;
	bool ipykernel = false;
	char **v;

	for (; (*argv)[n]; n++)
		if (n > 0 && strcmp((*argv)[n - 1], "-m") == 0 &&
		    (strcmp((*argv)[n], "ipykernel_launcher") == 0 ||
		     strcmp((*argv)[n], "ipykernel") == 0))
			ipykernel = true;
	while (extra && extra[k])
		k++;
	if (!ipykernel || k == 0)
		return 0;
	if (!(v = realloc(*argv, (n + k + 1) * sizeof *v)))
		goto nomem;
	*argv = v;
	for (size_t i = 0; i < k; i++, n++) {
		v[n + 1] = NULL;
		if (!(v[n] = strdup(extra[i])))
			goto nomem;
	}
	v[n] = NULL;
	return 0;
nomem:
	kbox_strv_free(*argv);
	*argv = NULL;
	return -1;
}

static char *dup_or_null(const char *s, bool *failed)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*failed = true;
	return d;
}

kr_sandbox_t *kr_sandbox_start(const char *name, const kbox_kspec_t *spec,
                               const kr_sandbox_opts_t *o, const char *kernel_conn,
                               kbox_error_t *err)
{
	const kr_backend_t *b = kr_backend_find(name);
	kr_sandbox_t *self = NULL;
	char **argv = NULL;
	size_t n_env = 0;
	bool failed = false;

	if (!b) {
		kbox_error_set(err, KBOX_E_NOTFOUND, "unknown backend \"%s\"",
		               name ? name : "(null)");
		return NULL;
	}
	if (!o || (!o->runtime_dir && !b->private_sockets) || !kernel_conn) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "a sandbox needs a runtime_dir and a connection file");
		return NULL;
	}
	if (!(self = calloc(1, sizeof *self)))
		goto nomem;
	self->backend = b;
	self->pid = -1;
	self->sockets_fd = -1;
	self->o = *o;
	if (b->defaults)
		b->defaults(&self->o);
	while (o->env && o->env[n_env])
		n_env++;
	if (!(self->env = calloc(n_env + 1, sizeof *self->env)))
		goto nomem;
	for (size_t i = 0; i < n_env; i++)
		self->env[i] = dup_or_null(o->env[i], &failed);
	self->o.env = (const char *const *)self->env;
	self->o.runtime_dir = dup_or_null(o->runtime_dir, &failed);
	self->o.workspace = dup_or_null(o->workspace, &failed);
	self->o.name = dup_or_null(o->name, &failed);
	self->o.home = dup_or_null(o->home, &failed);
	self->o.rootfs = dup_or_null(o->rootfs, &failed);
	self->o.image = dup_or_null(o->image, &failed);
	self->o.engine = dup_or_null(o->engine, &failed);
	self->o.state_home = dup_or_null(o->state_home, &failed);
	self->o.gateway_url = dup_or_null(o->gateway_url, &failed);
	self->o.gateway_ca = dup_or_null(o->gateway_ca, &failed);
	self->o.gateway_dir = dup_or_null(o->gateway_dir, &failed);
	self->o.gateway_sweep = dup_or_null(o->gateway_sweep, &failed);
	self->kernel = dup_or_null(kbox_kspec_name(spec), &failed);
	if (failed)
		goto nomem;
	if (!(argv = kbox_kspec_format_argv(spec, kernel_conn, err)))
		goto fail;
	if (add_ipykernel_args(&argv, o->ipykernel_args) < 0)
		goto nomem;
	self->spec = spec;
	if (b->start(self, argv, err) < 0)
		goto fail;
	self->spec = NULL;
	/* (borrowed for the start only: it holds the key; the token) */
	self->o.conn_text = self->o.conn_path = self->o.gateway_token = NULL;
	kbox_strv_free(argv);
	return self;
nomem:
	kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
fail:
	kbox_strv_free(argv);
	if (self) {
		self->spec = NULL;
		self->o.conn_text = self->o.conn_path = self->o.gateway_token = NULL;
	}
	kr_sandbox_destroy(&self);
	return NULL;
}

int kr_sandbox_ready(kr_sandbox_t *self, kbox_error_t *err)
{
	return self->backend->ready ? self->backend->ready(self, err) : 0;
}

const char *kr_sandbox_backend(const kr_sandbox_t *self)
{
	return self->backend->name;
}

int kr_sandbox_sockets_fd(const kr_sandbox_t *self)
{
	return self ? self->sockets_fd : -1;
}

pid_t kr_sandbox_pid(kr_sandbox_t *self)
{
	if (self->backend->kernel_pid && !self->ended && self->pid > 0) {
		pid_t k = self->backend->kernel_pid(self);
		return k > 0 ? k : self->pid;
	}
	return self->pid;
}

bool kr_sandbox_alive(kr_sandbox_t *self)
{
	if (self->ended || self->pid <= 0)
		return false;
	if (self->backend->wait(self))
		return true;
	self->ended = true;
	return false;
}

const char *kr_sandbox_cause(const kr_sandbox_t *self)
{
	return self->ended ? self->cause : "";
}

bool kr_sandbox_never_ran(const kr_sandbox_t *self)
{
	return self->ended && self->never_ran;
}

long kr_sandbox_oom_kills(kr_sandbox_t *self)
{
	if (!self || self->ended || self->pid <= 0 || !self->backend->oom_kills)
		return -1;
	return self->backend->oom_kills(self);
}

void kr_sandbox_oom_told(kr_sandbox_t *self, long n)
{
	if (self && n > self->oom_told)
		self->oom_told = n;
}

long long kr_sandbox_memory(kr_sandbox_t *self)
{
	char path[64], line[256];
	long long kb = -1, m;
	FILE *f;
	if (self->ended || self->pid <= 0)
		return -1;
	if (self->backend->memory && (m = self->backend->memory(self)) >= 0)
		return m;
	if (self->backend->remote) /* (not the helper's: the kernel's is the server's) */
		return -1;
	snprintf(path, sizeof path, "/proc/%ld/status", (long)kr_sandbox_pid(self));
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

const char *kr_sandbox_limits(const kr_sandbox_t *self)
{
	return self->limits;
}

const char *kr_sandbox_limits_missing(const kr_sandbox_t *self)
{
	return self->missing;
}

int kr_sandbox_signal(kr_sandbox_t *self, int sig, kbox_error_t *err)
{
	if (!kr_sandbox_alive(self))
		return kbox_error_set(err, KBOX_E_DEAD, "the kernel is not running");
	return self->backend->signal(self, sig, err);
}

bool kr_sandbox_wait_end(kr_sandbox_t *self, int ms)
{
	long long deadline = kx_now_ms() + ms;
	while (kr_sandbox_alive(self)) {
		if (kx_now_ms() >= deadline)
			return false;
		usleep(5000);
	}
	return true;
}

void kr_sandbox_stop(kr_sandbox_t *self, int step_ms)
{
	if (kr_sandbox_alive(self)) {
		kr_sandbox_signal(self, SIGTERM, NULL);
		if (!kr_sandbox_wait_end(self, step_ms)) {
			kr_sandbox_signal(self, SIGKILL, NULL);
			kr_sandbox_wait_end(self, step_ms);
		}
	}
	if (!self->cleaned && self->backend->cleanup)
		self->backend->cleanup(self);
	self->cleaned = true;
}

void kr_sandbox_destroy(kr_sandbox_t **self_p)
{
	kr_sandbox_t *self;
	if (!self_p || !(self = *self_p))
		return;
	if (self->pid > 0 && kr_sandbox_alive(self)) {
		self->backend->signal(self, SIGKILL, NULL);
		kr_sandbox_wait_end(self, 2500);
	}
	/* also after a start that failed half-way */
	if (!self->cleaned && self->backend->cleanup)
		self->backend->cleanup(self);
	for (size_t i = 0; self->env && self->env[i]; i++)
		free(self->env[i]);
	free(self->env);
	if (self->sockets_fd >= 0)
		close(self->sockets_fd);
	free((char *)self->o.runtime_dir);
	free((char *)self->o.workspace);
	free((char *)self->o.name);
	free((char *)self->o.home);
	free((char *)self->o.rootfs);
	free((char *)self->o.image);
	free((char *)self->o.engine);
	free((char *)self->o.state_home);
	free((char *)self->o.gateway_url);
	free((char *)self->o.gateway_ca);
	free((char *)self->o.gateway_dir);
	free((char *)self->o.gateway_sweep);
	free(self->kernel);
	free(self);
	*self_p = NULL;
}

pid_t kr_proc_child_of(pid_t parent)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = -1;
	if (!d)
		return -1;
	while (found < 0 && (e = readdir(d))) {
		char path[64], buf[512], *rp;
		long ppid;
		int fd;
		ssize_t n;
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		if ((size_t)snprintf(path, sizeof path, "/proc/%s/stat", e->d_name) >= sizeof path)
			continue; /* too long for a pid */
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* "PID (COMM) STATE PPID …": COMM may hold anything, even ')' */
		if ((rp = strrchr(buf, ')')) && sscanf(rp + 1, " %*c %ld", &ppid) == 1 &&
		    ppid == (long)parent)
			found = (pid_t)atol(e->d_name);
	}
	closedir(d);
	return found;
}
