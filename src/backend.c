/* src/backend.c — the backend interface and the `none` backend.
 *
 * Each backend is a table of operations; kbox_sandbox_t holds the table and
 * the backend's own state.  Nothing here uses libzmq or libsodium: the
 * steps that need them run in helper processes of the kbox program (see
 * kbox/backend.h), so the supervisor that links this stays small. */
#include "private.h"
#include "cgroup.h"
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
	char *name, *home, *rootfs;
	char **env;
	kbox_sandbox_opts_t limits; /* with the backend's defaults */
	pid_t pid;        /* our child: the kernel (none) or bwrap */
	pid_t kernel_pid; /* bwrap: the kernel, found under bwrap's init */
	kbox_cgroup_t *cg;
	char limits_text[256], missing[768];
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
	bool memory, cpus, pids; /* the limits it enforces (where the machine allows) */
	void (*defaults)(kbox_sandbox_opts_t *o);
	int (*spawn)(kbox_sandbox_t *self, kbox_error_t *err);
	/* true while running; once ended, fill self->cause */
	bool (*alive)(kbox_sandbox_t *self);
	int (*signal)(kbox_sandbox_t *self, int sig, kbox_error_t *err);
	void (*cleanup)(kbox_sandbox_t *self);
	pid_t (*kernel_pid)(kbox_sandbox_t *self); /* NULL: self->pid */
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

/* ---- the kernel's process ---- */

/* In the child after fork: a session of its own, killed with its parent
 * (PARENT, the supervisor), default signal dispositions, nothing blocked. */
static void child_setup(pid_t parent)
{
	sigset_t none;
	setsid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The cause of death from wait status ST into self->cause; bwrap reports
 * a command killed by signal N as exit status 128 + N (SIGNAL_EXIT). */
static void set_cause(kbox_sandbox_t *self, int st, bool signal_exit)
{
	int sig = 0;
	if (WIFSIGNALED(st))
		sig = WTERMSIG(st);
	else if (signal_exit && WIFEXITED(st) && WEXITSTATUS(st) > 128 && WEXITSTATUS(st) < 128 + 65)
		sig = WEXITSTATUS(st) - 128;
	if (sig) {
		const char *abbrev = sigabbrev_np(sig);
		snprintf(self->cause, sizeof self->cause, "the kernel was killed by signal %d (SIG%s)",
		         sig, abbrev ? abbrev : "?");
	} else if (WIFEXITED(st))
		snprintf(self->cause, sizeof self->cause, "the kernel exited with status %d%s",
		         WEXITSTATUS(st), WEXITSTATUS(st) == 127 ? " (it could not be started)" : "");
	else
		snprintf(self->cause, sizeof self->cause, "the kernel ended (wait status %d)", st);
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
		child_setup(parent);
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
	else
		set_cause(self, st, false);
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
    "none",    false,      false,        false,        false, NULL,
    none_spawn, none_alive, none_signal, none_cleanup, NULL,
};

/* ---- bwrap: bubblewrap, cgroups, seccomp ----
 *
 * Our child is `kbox _kernel --bwrap …`, which joins the sandbox's cgroup
 * (we made it), takes its rlimits, writes the connection files and
 * becomes bwrap; bwrap's init (pid 1 inside) runs the kernel (pid 2). */

static void bwrap_defaults(kbox_sandbox_opts_t *o)
{
	if (o->memory_bytes <= 0)
		o->memory_bytes = KBOX_BWRAP_MEMORY;
	if (o->pids <= 0)
		o->pids = KBOX_BWRAP_PIDS;
	if (o->tmp_bytes <= 0)
		o->tmp_bytes = KBOX_BWRAP_TMP_BYTES;
	if (o->file_bytes <= 0)
		o->file_bytes = KBOX_BWRAP_FILE_BYTES;
}

/* "2 GiB", "512 MiB", "1.5 GiB" */
static void fmt_size(char *buf, size_t size, long long n)
{
	if (n >= 1LL << 30 && n % (1LL << 30) == 0)
		snprintf(buf, size, "%lld GiB", n >> 30);
	else if (n >= 1LL << 30)
		snprintf(buf, size, "%.1f GiB", (double)n / (1LL << 30));
	else if (n >= 1LL << 20 && n % (1LL << 20) == 0)
		snprintf(buf, size, "%lld MiB", n >> 20);
	else if (n >= 1LL << 20)
		snprintf(buf, size, "%.1f MiB", (double)n / (1LL << 20));
	else
		snprintf(buf, size, "%lld bytes", n);
}

static int bwrap_spawn(kbox_sandbox_t *self, kbox_error_t *err)
{
	static unsigned serial;
	const kbox_sandbox_opts_t *l = &self->limits;
	unsigned want = KBOX_CG_MEMORY | KBOX_CG_PIDS | (l->cpus > 0 ? KBOX_CG_CPU : 0), got;
	char cgname[128], why[512], mem[32], tmp[32], fsz[32], tmpn[32], cpu[48];
	char fsizen[32], datan[32], nprocn[32];
	size_t n_env = 0, i = 0;
	const char **av;
	pid_t parent = getpid();

	snprintf(cgname, sizeof cgname, "kbox-%s-%ld-%u", self->name ? self->name : "sandbox",
	         (long)parent, ++serial);
	self->cg = kbox__cgroup_new(cgname, want, l->memory_bytes, l->cpus, l->pids, why, sizeof why);
	got = kbox__cgroup_enforced(self->cg);
	fmt_size(mem, sizeof mem, l->memory_bytes);
	fmt_size(tmp, sizeof tmp, l->tmp_bytes);
	fmt_size(fsz, sizeof fsz, l->file_bytes);
	if (l->cpus > 0)
		snprintf(cpu, sizeof cpu, "%.4g (%s)", l->cpus,
		         got & KBOX_CG_CPU ? "cgroup" : "not enforced");
	else
		snprintf(cpu, sizeof cpu, "all");
	snprintf(self->limits_text, sizeof self->limits_text,
	         "memory %s (%s), pids %ld (%s), cpus %s, /tmp %s (tmpfs), files up to %s (rlimit)",
	         mem, got & KBOX_CG_MEMORY ? "cgroup" : "RLIMIT_DATA", l->pids,
	         got & KBOX_CG_PIDS ? "cgroup" : "RLIMIT_NPROC", cpu, tmp, fsz);
	self->missing[0] = '\0';
	if ((got & want) != want)
		snprintf(self->missing, sizeof self->missing, "cgroup limits not applied: %s", why);

	while (self->env && self->env[n_env])
		n_env++;
	if (!(av = calloc(n_env + 32, sizeof *av)))
		return kbox__err(err, KBOX_E_NOMEM, "out of memory");
	snprintf(tmpn, sizeof tmpn, "%lld", l->tmp_bytes);
	snprintf(fsizen, sizeof fsizen, "%lld", l->file_bytes);
	snprintf(datan, sizeof datan, "%lld", l->memory_bytes);
	snprintf(nprocn, sizeof nprocn, "%ld", l->pids);
	av[i++] = "kbox";
	av[i++] = "_kernel";
	av[i++] = "--bwrap";
	if (self->rootfs) {
		av[i++] = "--rootfs";
		av[i++] = self->rootfs;
	}
	if (self->home) {
		av[i++] = "--home";
		av[i++] = self->home;
	}
	av[i++] = "--tmp-size";
	av[i++] = tmpn;
	/* rlimits: applied by the helper just before it becomes bwrap */
	av[i++] = "--rlimit-fsize";
	av[i++] = fsizen;
	if (!(got & KBOX_CG_MEMORY)) {
		/* the heap and private writable mappings: allocation beyond fails
		 * (MemoryError) rather than the process being killed; address
		 * space (RLIMIT_AS) would count every thread's reserved arenas and
		 * stacks, and stop Python starting */
		av[i++] = "--rlimit-data";
		av[i++] = datan;
	}
	if (!(got & KBOX_CG_PIDS)) {
		av[i++] = "--rlimit-nproc";
		av[i++] = nprocn;
	}
	av[i++] = self->kernel;
	av[i++] = self->conn_path;
	av[i++] = self->runtime_dir;
	av[i++] = self->workspace ? self->workspace : "/";
	av[i++] = self->log_path ? self->log_path : "/dev/null";
	for (size_t k = 0; k < n_env; k++)
		av[i++] = self->env[k];
	self->pid = fork();
	if (self->pid < 0) {
		free(av);
		return kbox__err_sys(err, "cannot fork the sandbox process");
	}
	if (self->pid == 0) {
		child_setup(parent);
		if (self->cg && kbox__cgroup_enter(self->cg) < 0) {
			dprintf(2, "kbox: cannot enter the sandbox's cgroup: %s\n", strerror(errno));
			_exit(126);
		}
		execv(self->kbox_exe, (char *const *)av);
		dprintf(2, "kbox: cannot run %s _kernel: %s\n", self->kbox_exe, strerror(errno));
		_exit(127);
	}
	free(av);
	return 0;
}

/* A child of PARENT (the first found), or -1: a scan of /proc, for the
 * kernel's pid under bwrap. */
static pid_t child_of(pid_t parent)
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
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
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

static pid_t bwrap_kernel_pid(kbox_sandbox_t *self)
{
	pid_t init;
	if (self->kernel_pid > 0 && kill(self->kernel_pid, 0) == 0)
		return self->kernel_pid;
	self->kernel_pid = -1;
	if (self->pid > 0 && (init = child_of(self->pid)) > 0)
		self->kernel_pid = child_of(init);
	return self->kernel_pid;
}

static bool bwrap_alive(kbox_sandbox_t *self)
{
	int st;
	pid_t r;
	long oom;
	do
		r = waitpid(self->pid, &st, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return true;
	self->status = r == self->pid ? st : -1;
	if (r != self->pid)
		snprintf(self->cause, sizeof self->cause, "the sandbox process vanished (not reaped)");
	else
		set_cause(self, st, true);
	if ((oom = kbox__cgroup_oom_kills(self->cg)) > 0) {
		char lim[32];
		fmt_size(lim, sizeof lim, kbox__cgroup_memory_limit(self->cg));
		snprintf(self->cause, sizeof self->cause, "the kernel was killed: out of memory (limit %s)",
		         lim);
	}
	return false;
}

static int bwrap_signal(kbox_sandbox_t *self, int sig, kbox_error_t *err)
{
	pid_t k;
	if (!kbox_sandbox_alive(self))
		return kbox__err(err, KBOX_E_DEAD, "the kernel is not running");
	if (sig == SIGKILL) {
		/* bwrap's init dies with it (die-with-parent), and with pid 1 the
		 * whole pid namespace */
		kill(self->pid, SIGKILL);
		return 0;
	}
	if ((k = bwrap_kernel_pid(self)) <= 0)
		return kbox__err(err, KBOX_E_DEAD, "the kernel's process was not found in the sandbox");
	if (kill(k, sig) < 0)
		return kbox__err_sys(err, "cannot signal the kernel (pid %ld)", (long)k);
	return 0;
}

/* The connection file, and all the sandbox's own directory holds (its
 * sockets, its connection file, whatever its code put there). */
static void bwrap_cleanup(kbox_sandbox_t *self)
{
	char path[4200];
	unlink(self->conn_path);
	snprintf(path, sizeof path, "%s/sandbox", self->runtime_dir);
	kbox__empty_dir(path);
	kbox__cgroup_destroy(&self->cg);
}

static const backend_ops_t bwrap_ops = {
    "bwrap",     true,        true,         true,          true, bwrap_defaults,
    bwrap_spawn, bwrap_alive, bwrap_signal, bwrap_cleanup, bwrap_kernel_pid,
};

static const backend_ops_t *const backends[] = {&bwrap_ops, &none_ops, NULL};
static const char *const backend_names[] = {"bwrap", "none", NULL};

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
	kbox_sandbox_opts_t l = *o;
	unsigned avail = ~0u;
	char why[512] = "";
	if (ops->defaults)
		ops->defaults(&l);
	if (ops == &bwrap_ops)
		avail = kbox__cgroup_available(why, sizeof why);
#define ADD(cond, what)                                                                        \
	if ((cond) && n < size)                                                                    \
		n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", what);
	ADD(l.memory_bytes > 0 && (!ops->memory || !(avail & KBOX_CG_MEMORY)), "memory");
	ADD(l.cpus > 0 && (!ops->cpus || !(avail & KBOX_CG_CPU)), "cpus");
	ADD(l.pids > 0 && (!ops->pids || !(avail & KBOX_CG_PIDS)), "pids");
#undef ADD
	if (n && why[0] && n < size)
		snprintf(buf + n, size - n, " (%s)", why);
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
	if (ops->defaults)
		ops->defaults(&self->limits);
	self->kernel_pid = -1;
	while (o->env && o->env[n_env])
		n_env++;
	if (!(self->kernel = strdup(kbox_kspec_name(spec))) ||
	    !(self->kbox_exe = strdup(o->kbox_exe)) || !(self->conn_path = strdup(o->conn_path)) ||
	    !(self->runtime_dir = strdup(o->runtime_dir)) ||
	    (o->workspace && !(self->workspace = strdup(o->workspace))) ||
	    (o->log_path && !(self->log_path = strdup(o->log_path))) ||
	    (o->name && !(self->name = strdup(o->name))) ||
	    (o->home && !(self->home = strdup(o->home))) ||
	    (o->rootfs && !(self->rootfs = strdup(o->rootfs))) ||
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

pid_t kbox_sandbox_pid(const kbox_sandbox_t *self)
{
	kbox_sandbox_t *s = (kbox_sandbox_t *)self; /* the lookup caches */
	if (self->ops->kernel_pid && !self->ended && self->pid > 0) {
		pid_t k = self->ops->kernel_pid(s);
		return k > 0 ? k : self->pid;
	}
	return self->pid;
}

const char *kbox_sandbox_limits(const kbox_sandbox_t *self) { return self->limits_text; }

const char *kbox_sandbox_limits_missing(const kbox_sandbox_t *self) { return self->missing; }

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
	long long kb = -1, cg;
	FILE *f;
	if (self->ended || self->pid <= 0)
		return -1;
	if ((cg = kbox__cgroup_memory(self->cg)) >= 0)
		return cg;
	snprintf(path, sizeof path, "/proc/%ld/status", (long)kbox_sandbox_pid(self));
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
	free(self->name);
	free(self->home);
	free(self->rootfs);
	kbox__cgroup_destroy(&self->cg);
	free(self);
	*self_p = NULL;
}
