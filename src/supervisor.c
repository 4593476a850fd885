/* src/supervisor.c — one session's supervisor: starts the kernel through
 * its backend, reports readiness, reaps and restarts it, stops the session
 * after an idle TTL, and answers the control socket.
 *
 * Single-threaded: one poll() over the control socket, its connections and
 * a signalfd.  Clients run code by talking to the kernel directly; they
 * hold an "exec" connection open meanwhile, which is how the supervisor
 * knows the session is busy, and on which it tells them the kernel died.
 * The library never prints: everything worth saying goes to events.ndjson. */
#include "private.h"
#include "cgroup.h"
#include <kbox/session.h>
#include <kbox/backend.h>

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 256
#define CONN_LINE_MAX 65536
#define READY_TIMEOUT_MS 60000
#define CRASH_WINDOW_MS 60000
#define CRASH_MAX 5

typedef struct {
	int fd;
	bool exec;    /* holds an execution: the session is busy */
	bool waiting; /* asked for one while another runs: granted in turn */
	const char *pending; /* "restart" or "kill": answered once the new kernel is ready */
	char *buf;
	size_t len;
} conn_t;

typedef struct {
	const char *dir;
	json_t *config;
	const char *kernel, *backend;
	long long ttl_ms;
	kbox_sandbox_opts_t sbo;
	char **env;
	char runtime_dir[4096], workspace[4096], log_path[4096], conn_path[4200], home[4096];
	kbox_kspec_t *spec;
	kbox_sandbox_t *sb;
	int ready_fd;          /* while the kernel starts: poll it (kbox_sandbox_ready_poll) */
	long long start_t0;
	int listen_fd, sig_fd, pid_fd;
	long prev_pid; /* the pid supervisor.pid held before ours */
	conn_t conns[MAX_CONNS];
	size_t n_conns;
	long long started_ms, kernel_started_ms, last_activity_ms;
	double started_wall, last_activity_wall;
	unsigned long executions;
	unsigned restarts;
	unsigned long generation;
	char notice[600];  /* for the next exec: the kernel was restarted */
	char last_cause[512];
	long long crashes[CRASH_MAX];
	bool stopping;
	char stop_cause[512];
	int stop_reply_fd; /* the connection that asked for the stop, or -1 */
	const char *state;
} sup_t;

static void sup_log(sup_t *s, const char *event, json_t *fields)
{
	kbox_session_log(s->dir, event, fields, NULL);
}

static void iso_time(double t, char *buf, size_t size)
{
	time_t sec = (time_t)t;
	struct tm tm;
	gmtime_r(&sec, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[4096], tmp[4200];
	int fd;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) == (ssize_t)strlen(text))
		rename(tmp, path);
	else
		unlink(tmp);
	close(fd);
}

/* Read a small file into BUF; "" when absent. */
static void read_file(const char *dir, const char *name, char *buf, size_t size)
{
	char path[4096];
	int fd;
	ssize_t n = 0;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	buf[0] = '\0';
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
}

/* ---- the kernel ---- */

/* Spawn a kernel and begin waiting for it to answer (the main loop goes on
 * meanwhile; kernel_check finishes).  0 or -1 with ERR. */
static int kernel_start(sup_t *s, kbox_error_t *err)
{
	char gen[32];

	s->state = "starting";
	s->start_t0 = kbox__now_ms();
	s->generation++;
	snprintf(gen, sizeof gen, "%lu\n", s->generation);
	write_file(s->dir, "generation", gen);
	snprintf(s->conn_path, sizeof s->conn_path, "%s/kernel-%lu.json", s->runtime_dir,
	         s->generation);
	s->sbo.conn_path = s->conn_path;
	s->sb = kbox_sandbox_spawn(s->backend, s->spec, &s->sbo, err);
	if (!s->sb)
		return -1;
	sup_log(s, "start",
	        json_pack("{s:s, s:s, s:I, s:I}", "backend", s->backend, "kernel", s->kernel,
	                  "pid", (json_int_t)kbox_sandbox_pid(s->sb), "generation",
	                  (json_int_t)s->generation));
	if (*kbox_sandbox_limits(s->sb))
		sup_log(s, "limits", json_pack("{s:s, s:s}", "applied", kbox_sandbox_limits(s->sb),
		                               "missing", kbox_sandbox_limits_missing(s->sb)));
	if ((s->ready_fd = kbox_sandbox_ready_begin(s->sb, READY_TIMEOUT_MS, err)) < 0) {
		kbox_sandbox_destroy(&s->sb);
		return -1;
	}
	return 0;
}

static bool starting(const sup_t *s) { return s->ready_fd >= 0; }

/* While the kernel starts: 1 still starting, 0 ready, -1 failed (ERR). */
static int kernel_check(sup_t *s, kbox_error_t *err)
{
	int rc = kbox_sandbox_ready_poll(s->sb, err);
	if (rc == 1)
		return 1;
	s->ready_fd = -1;
	if (rc < 0) {
		kbox_sandbox_destroy(&s->sb);
		return -1;
	}
	s->kernel_started_ms = kbox__now_ms();
	s->last_activity_ms = s->kernel_started_ms;
	s->last_activity_wall = kbox__now();
	s->state = "idle";
	sup_log(s, "ready",
	        json_pack("{s:I, s:I, s:I}", "pid", (json_int_t)kbox_sandbox_pid(s->sb), "generation",
	                  (json_int_t)s->generation, "ms", (json_int_t)(kbox__now_ms() - s->start_t0)));
	return 0;
}

/* Start a kernel and wait for it (the first one, before anyone is told). */
static int kernel_start_wait(sup_t *s, kbox_error_t *err)
{
	int rc;
	if (kernel_start(s, err) < 0)
		return -1;
	while ((rc = kernel_check(s, err)) == 1) {
		struct pollfd p = {s->ready_fd, POLLIN, 0};
		poll(&p, 1, 50);
	}
	return rc;
}

/* Tell the running executions their kernel is gone, and whether a new one
 * is being started. */
static void tell_execs(sup_t *s, const char *cause, bool restarting)
{
	json_t *ev = json_pack("{s:s, s:s, s:I, s:b}", "event", "died", "cause", cause,
	                       "generation", (json_int_t)s->generation, "restarting", restarting);
	for (size_t i = 0; i < s->n_conns; i++)
		if (s->conns[i].exec)
			kbox_ctl_send(s->conns[i].fd, ev, NULL);
	json_decref(ev);
}

/* The kernel is gone (or is being replaced) for CAUSE: tell the running
 * executions, remember it for the next one, and start a new kernel unless
 * it keeps dying.  0, or -1 when the session has to stop. */
static int kernel_replace(sup_t *s, const char *cause, bool requested)
{
	kbox_error_t err = {0};
	long long now = kbox__now_ms();
	int recent = 0;

	snprintf(s->last_cause, sizeof s->last_cause, "%s", cause);
	tell_execs(s, cause, true);
	if (s->sb) {
		kbox_sandbox_stop(s->sb, requested && !starting(s) && kbox_sandbox_alive(s->sb), NULL);
		kbox_sandbox_destroy(&s->sb); /* and the readiness helper of one starting */
		s->ready_fd = -1;
	}
	snprintf(s->notice, sizeof s->notice,
	         "kernel restarted: %s; earlier state (variables, imports, loaded data) is lost", cause);
	sup_log(s, "restart",
	        json_pack("{s:s, s:I, s:b}", "cause", cause, "generation", (json_int_t)s->generation,
	                  "requested", requested));
	s->restarts++;
	if (!requested) {
		memmove(s->crashes, s->crashes + 1, sizeof s->crashes - sizeof s->crashes[0]);
		s->crashes[CRASH_MAX - 1] = now;
		for (int i = 0; i < CRASH_MAX; i++)
			recent += s->crashes[i] && now - s->crashes[i] < CRASH_WINDOW_MS;
		if (recent >= CRASH_MAX) {
			snprintf(s->stop_cause, sizeof s->stop_cause,
			         "the kernel died %d times within %d s; last: %s", CRASH_MAX,
			         CRASH_WINDOW_MS / 1000, cause);
			return -1;
		}
	}
	if (kernel_start(s, &err) < 0) {
		snprintf(s->stop_cause, sizeof s->stop_cause, "the kernel could not be restarted: %s",
		         err.msg);
		return -1;
	}
	return 0;
}

/* ---- control connections ---- */

static void conn_close(sup_t *s, size_t i)
{
	if (s->conns[i].exec) {
		s->last_activity_ms = kbox__now_ms();
		s->last_activity_wall = kbox__now();
		/* its client went away without saying "done" (killed, Ctrl-C):
		 * its code must not run on unseen, blocking every later exec */
		if (!s->stopping && s->sb && kbox_sandbox_alive(s->sb) &&
		    kbox_sandbox_interrupt(s->sb, NULL) == 0)
			sup_log(s, "interrupt", json_pack("{s:s}", "cause",
			                                  "the client of an execution went away"));
	}
	if (s->conns[i].fd == s->stop_reply_fd)
		s->stop_reply_fd = -1;
	close(s->conns[i].fd);
	free(s->conns[i].buf);
	s->conns[i] = s->conns[--s->n_conns];
}

static void reply(int fd, json_t *j)
{
	if (j)
		kbox_ctl_send(fd, j, NULL);
	json_decref(j);
}

static void reply_error(int fd, const char *fmt, ...) KBOX_PRINTF(2, 3);
static void reply_error(int fd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	reply(fd, json_pack("{s:b, s:s}", "ok", 0, "error", msg));
}

static bool exec_busy(const sup_t *s)
{
	for (size_t i = 0; i < s->n_conns; i++)
		if (s->conns[i].exec)
			return true;
	return false;
}

/* Give C the kernel for one execution. */
static void grant_exec(sup_t *s, conn_t *c)
{
	c->waiting = false;
	c->exec = true;
	s->executions++;
	s->last_activity_ms = kbox__now_ms();
	s->last_activity_wall = kbox__now();
	reply(c->fd, json_pack("{s:b, s:s, s:I, s:s?}", "ok", 1, "connection_file",
	                       kbox_sandbox_connection_file(s->sb), "generation",
	                       (json_int_t)s->generation, "notice",
	                       s->notice[0] ? s->notice : NULL));
	s->notice[0] = '\0';
}

/* Answer the restart and kill requests waiting for the new kernel. */
static void answer_pending(sup_t *s, const char *error)
{
	for (size_t i = 0; i < s->n_conns; i++) {
		conn_t *c = &s->conns[i];
		if (!c->pending)
			continue;
		if (error)
			reply_error(c->fd, "%s", error);
		else
			reply(c->fd, json_pack("{s:b, s:s, s:I}", "ok", 1, "re", c->pending, "generation",
			                       (json_int_t)s->generation));
		c->pending = NULL;
	}
}

static json_t *status_json(sup_t *s)
{
	char started[32], last[32];
	long long mem = s->sb ? kbox_sandbox_memory(s->sb) : -1;
	long long now = kbox__now_ms();
	json_t *st;
	iso_time(s->started_wall, started, sizeof started);
	iso_time(s->last_activity_wall, last, sizeof last);
	st = json_pack("{s:b, s:s, s:s, s:s, s:I, s:I, s:s, s:f, s:f, s:s, s:f, s:I, s:I, s:I, "
	                 "s:I, s:I, s:s, s:s, s:I}",
	                 "ok", 1, "state", exec_busy(s) ? "busy" : s->state, "backend", s->backend,
	                 "kernel", s->kernel, "pid", (json_int_t)getpid(), "kernel_pid",
	                 (json_int_t)(s->sb ? kbox_sandbox_pid(s->sb) : 0), "started", started,
	                 "uptime_s", (double)(now - s->started_ms) / 1000.0, "kernel_uptime_s",
	                 (double)(now - s->kernel_started_ms) / 1000.0, "last_activity", last,
	                 "idle_s", exec_busy(s) ? 0.0 : (double)(now - s->last_activity_ms) / 1000.0,
	                 "executions", (json_int_t)s->executions, "restarts",
	                 (json_int_t)s->restarts, "generation", (json_int_t)s->generation,
	                 "memory_bytes", (json_int_t)mem, "ttl_ms", (json_int_t)s->ttl_ms,
	                 "last_restart_cause", s->last_cause, "connection_file",
	                 s->sb ? kbox_sandbox_connection_file(s->sb) : "", "running_execs",
	                 (json_int_t)0);
	if (st && s->sb && *kbox_sandbox_limits(s->sb)) {
		json_object_set_new(st, "limits", json_string(kbox_sandbox_limits(s->sb)));
		json_object_set_new(st, "limits_missing",
		                    json_string(kbox_sandbox_limits_missing(s->sb)));
	}
	return st;
}

static void handle_request(sup_t *s, size_t i, json_t *req)
{
	conn_t *c = &s->conns[i];
	const char *op = json_string_value(json_object_get(req, "op"));
	kbox_error_t err = {0};

	if (!op) {
		reply_error(c->fd, "request without \"op\"");
		return;
	}
	if (strcmp(op, "status") == 0) {
		json_t *st = status_json(s);
		size_t running = 0;
		for (size_t k = 0; k < s->n_conns; k++)
			running += s->conns[k].exec;
		json_object_set_new(st, "running_execs", json_integer((json_int_t)running));
		reply(c->fd, st);
	} else if (strcmp(op, "exec") == 0) {
		if (c->exec || c->waiting) {
			reply_error(c->fd, "this connection already holds an execution");
			return;
		}
		/* one execution at a time: a second one would wait in the
		 * kernel's queue where its client cannot see or time it */
		if (exec_busy(s) || starting(s))
			c->waiting = true;
		else
			grant_exec(s, c);
	} else if (strcmp(op, "done") == 0) {
		if (c->exec) {
			c->exec = false;
			s->last_activity_ms = kbox__now_ms();
			s->last_activity_wall = kbox__now();
		}
	} else if (strcmp(op, "interrupt") == 0) {
		if (starting(s))
			reply_error(c->fd, "the kernel is starting: nothing to interrupt");
		else if (kbox_sandbox_interrupt(s->sb, &err) < 0)
			reply_error(c->fd, "interrupt failed: %s", err.msg);
		else {
			sup_log(s, "interrupt", NULL);
			reply(c->fd, json_pack("{s:b, s:s}", "ok", 1, "re", "interrupt"));
		}
	} else if (strcmp(op, "restart") == 0 || strcmp(op, "kill") == 0) {
		const char *why = json_string_value(json_object_get(req, "cause"));
		char cause[512];
		bool kill = strcmp(op, "kill") == 0;
		snprintf(cause, sizeof cause, "%s",
		         why ? why : kill ? "killed on request" : "restarted on request (kbox restart)");
		if (kill && s->sb)
			kbox_sandbox_signal(s->sb, SIGKILL, NULL);
		/* this connection's own execution is over: it asked */
		c->exec = false;
		if (kernel_replace(s, cause, true) < 0) {
			reply_error(c->fd, "%s", s->stop_cause);
			s->stopping = true;
			return;
		}
		/* the caller is told once the new kernel is ready; the next
		 * execution gets the notice */
		c->pending = kill ? "kill" : "restart";
	} else if (strcmp(op, "stop") == 0) {
		const char *why = json_string_value(json_object_get(req, "cause"));
		snprintf(s->stop_cause, sizeof s->stop_cause, "%s",
		         why ? why : "stopped on request (kbox stop)");
		s->stopping = true;
		s->stop_reply_fd = c->fd;
	} else
		reply_error(c->fd, "unknown op \"%s\"", op);
}

/* Read what CONN sent; handle complete lines.  false when it closed. */
static bool conn_read(sup_t *s, size_t i)
{
	conn_t *c = &s->conns[i];
	for (;;) {
		char *nl;
		ssize_t n;
		if (!c->buf && !(c->buf = malloc(CONN_LINE_MAX)))
			return false;
		n = recv(c->fd, c->buf + c->len, CONN_LINE_MAX - c->len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0)
			return false;
		c->len += (size_t)n;
		while ((nl = memchr(c->buf, '\n', c->len))) {
			size_t line = (size_t)(nl - c->buf);
			json_t *req = json_loadb(c->buf, line, 0, NULL);
			memmove(c->buf, nl + 1, c->len - line - 1);
			c->len -= line + 1;
			if (!json_is_object(req))
				reply_error(c->fd, "not a JSON object");
			else
				handle_request(s, i, req);
			json_decref(req);
			if (s->stopping && s->stop_reply_fd != c->fd)
				return true;
		}
		if (c->len == CONN_LINE_MAX)
			return false;
	}
}

static int listen_control(sup_t *s, kbox_error_t *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/control.sock", s->dir);
	unlink(sa.sun_path); /* stale: we hold the supervisor lock */
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->listen_fd < 0)
		return kbox__err_sys(err, "socket");
	if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return kbox__err_sys(err, "cannot bind %s", sa.sun_path);
	if (chmod(sa.sun_path, 0600) < 0 || listen(s->listen_fd, 64) < 0)
		return kbox__err_sys(err, "cannot listen on %s", sa.sun_path);
	return 0;
}

static void accept_all(sup_t *s)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		{ /* only our own uid may talk to us (the dir is 0700 too) */
			struct ucred cr;
			socklen_t len = sizeof cr;
			if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
			    cr.uid != geteuid()) {
				close(fd);
				continue;
			}
		}
		if (s->n_conns == MAX_CONNS) {
			reply_error(fd, "too many control connections (%d)", MAX_CONNS);
			close(fd);
			continue;
		}
		s->conns[s->n_conns++] = (conn_t){.fd = fd};
	}
}

/* ---- setup ---- */

static int load_config(sup_t *s, kbox_error_t *err)
{
	json_t *env;
	size_t i, n;
	if (!(s->config = kbox_session_config_load(s->dir, err)))
		return -1;
	s->kernel = json_string_value(json_object_get(s->config, "kernel"));
	s->backend = json_string_value(json_object_get(s->config, "backend"));
	if (!s->kernel)
		s->kernel = "python3";
	if (!s->backend)
		s->backend = KBOX_BACKEND_DEFAULT;
	s->ttl_ms = json_is_integer(json_object_get(s->config, "ttl_ms"))
	                ? (long long)json_integer_value(json_object_get(s->config, "ttl_ms"))
	                : KBOX_SESSION_TTL_MS;
	s->sbo.memory_bytes = (long long)json_integer_value(json_object_get(s->config, "memory"));
	s->sbo.cpus = json_number_value(json_object_get(s->config, "cpus"));
	s->sbo.pids = (long)json_integer_value(json_object_get(s->config, "pids"));
	s->sbo.tmp_bytes = (long long)json_integer_value(json_object_get(s->config, "tmp_size"));
	s->sbo.file_bytes = (long long)json_integer_value(json_object_get(s->config, "file_size"));
	s->sbo.rootfs = json_string_value(json_object_get(s->config, "rootfs"));
	s->sbo.name = json_string_value(json_object_get(s->config, "name"));
	env = json_object_get(s->config, "env");
	n = json_is_array(env) ? json_array_size(env) : 0;
	if (!(s->env = calloc(n + 1, sizeof *s->env)))
		return kbox__err(err, KBOX_E_NOMEM, "out of memory");
	for (i = 0; i < n; i++)
		s->env[i] = (char *)json_string_value(json_array_get(env, i));
	s->env[n] = NULL;
	s->sbo.env = (const char *const *)s->env;
	snprintf(s->runtime_dir, sizeof s->runtime_dir, "%s/run", s->dir);
	snprintf(s->workspace, sizeof s->workspace, "%s/workspace", s->dir);
	snprintf(s->log_path, sizeof s->log_path, "%s/kernel.log", s->dir);
	snprintf(s->home, sizeof s->home, "%s/home", s->dir);
	/* the sandbox's /home/kbox: IPython's history, matplotlib's font
	 * cache; kept across kernel restarts, like the workspace */
	if (mkdir(s->home, 0700) < 0 && errno != EEXIST)
		return kbox__err_sys(err, "cannot create %s", s->home);
	s->sbo.home = s->home;
	s->sbo.runtime_dir = s->runtime_dir;
	s->sbo.workspace = s->workspace;
	s->sbo.log_path = s->log_path;
	if (!(s->spec = kbox_kspec_find(s->kernel, err)))
		return -1;
	return 0;
}

/* Take the supervisor lock and write our pid. */
static int lock_pid(sup_t *s, kbox_error_t *err)
{
	char path[4096], buf[32];
	int n;
	snprintf(path, sizeof path, "%s/supervisor.pid", s->dir);
	s->pid_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->pid_fd < 0)
		return kbox__err_sys(err, "cannot open %s", path);
	/* kbox_session_supervisor() probes with a brief LOCK_SH: a supervisor
	 * holds its lock for good, a probe for microseconds */
	for (int i = 0; flock(s->pid_fd, LOCK_EX | LOCK_NB) < 0; i++) {
		if (errno != EWOULDBLOCK || i == 50)
			return kbox__err(err, KBOX_E_INVALID,
			                 "another supervisor runs this session (%s locked)", path);
		usleep(10000);
	}
	/* who held it before us (and is gone): its leftovers are ours to remove */
	n = (int)pread(s->pid_fd, buf, sizeof buf - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	s->prev_pid = strtol(buf, NULL, 10);
	n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(s->pid_fd, 0) < 0 || pwrite(s->pid_fd, buf, (size_t)n, 0) != n)
		return kbox__err_sys(err, "cannot write %s", path);
	return 0;
}

/* Remove what a supervisor that died left in run/ (we hold the lock: no
 * kernel of this session runs). */
static void clean_runtime_dir(sup_t *s)
{
	DIR *d = opendir(s->runtime_dir);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "kernel-", 7) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static void report_ready(int *fd_p, json_t *j)
{
	if (*fd_p >= 0) {
		kbox_ctl_send(*fd_p, j, NULL);
		close(*fd_p);
		*fd_p = -1;
	}
	json_decref(j);
}

static void shutdown_session(sup_t *s)
{
	char path[4096];
	kbox_error_t err = {0};
	/* no new clients while stopping: they see no supervisor and wait for
	 * the lock to go (kbox start) instead of talking to one that leaves */
	snprintf(path, sizeof path, "%s/control.sock", s->dir);
	if (s->listen_fd >= 0) {
		unlink(path);
		close(s->listen_fd);
		s->listen_fd = -1;
	}
	tell_execs(s, s->stop_cause, false);
	if (s->sb) {
		kbox_sandbox_stop(s->sb, true, &err);
		kbox_sandbox_destroy(&s->sb);
	}
	write_file(s->dir, "last-stop", s->stop_cause);
	sup_log(s, "stop", json_pack("{s:s, s:I}", "cause", s->stop_cause, "executions",
	                             (json_int_t)s->executions));
	snprintf(path, sizeof path, "%s/supervisor.pid", s->dir);
	unlink(path); /* a clean stop: kbox ls shows "stopped", not "dead" */
	if (s->stop_reply_fd >= 0)
		reply(s->stop_reply_fd, json_pack("{s:b, s:s}", "ok", 1, "re", "stop"));
}

int kbox_supervisor_run(const char *dir, int ready_fd, const char *kbox_exe)
{
	sup_t s = {0};
	kbox_error_t err = {0};
	sigset_t mask;
	char prev[512], gen[32];
	int status = 0;

	s.dir = dir;
	s.listen_fd = s.sig_fd = s.pid_fd = s.stop_reply_fd = s.ready_fd = -1;
	s.state = "starting";
	s.started_ms = kbox__now_ms();
	s.started_wall = kbox__now();
	s.last_activity_wall = s.started_wall;
	s.sbo.kbox_exe = kbox_exe;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	s.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	if (s.sig_fd < 0 || lock_pid(&s, &err) < 0 || load_config(&s, &err) < 0 ||
	    listen_control(&s, &err) < 0) {
		if (!err.msg[0])
			kbox__err_sys(&err, "signalfd");
		sup_log(&s, "error", json_pack("{s:s}", "error", err.msg));
		report_ready(&ready_fd, json_pack("{s:b, s:s}", "ok", 0, "error", err.msg));
		status = 1;
		goto out;
	}
	/* what happened to the previous incarnation, for the first exec */
	read_file(dir, "generation", gen, sizeof gen);
	s.generation = strtoul(gen, NULL, 10);
	read_file(dir, "last-stop", prev, sizeof prev);
	if (s.generation > 0) {
		snprintf(s.notice, sizeof s.notice,
		         "kernel restarted: the session's previous kernel ended (%s); earlier state "
		         "(variables, imports, loaded data) is lost; files in the workspace are kept",
		         prev[0] ? prev : "its supervisor died");
		snprintf(s.last_cause, sizeof s.last_cause, "%s", prev[0] ? prev : "supervisor died");
	}
	{
		char path[4200];
		snprintf(path, sizeof path, "%s/last-stop", dir);
		unlink(path);
	}
	clean_runtime_dir(&s);
	if (s.prev_pid > 0 && s.prev_pid != getpid()) {
		/* the cgroups of the sandboxes of this session's previous
		 * supervisor, if it was killed (it is gone: we hold the lock) */
		const char *name = json_string_value(json_object_get(s.config, "name"));
		char prefix[128];
		snprintf(prefix, sizeof prefix, "kbox-%s-%ld-", name ? name : "sandbox", s.prev_pid);
		kbox__cgroup_reap(prefix);
	}
	if (kernel_start_wait(&s, &err) < 0) {
		snprintf(s.stop_cause, sizeof s.stop_cause, "the kernel could not start: %s", err.msg);
		report_ready(&ready_fd, json_pack("{s:b, s:s}", "ok", 0, "error", err.msg));
		shutdown_session(&s);
		status = 1;
		goto out;
	}
	report_ready(&ready_fd, json_pack("{s:b, s:I, s:I}", "ok", 1, "pid", (json_int_t)getpid(),
	                                  "kernel_pid", (json_int_t)kbox_sandbox_pid(s.sb)));

	while (!s.stopping) {
		struct pollfd p[MAX_CONNS + 2];
		size_t np = 0;
		int timeout = 1000;

		if (s.sb && !starting(&s) && !kbox_sandbox_alive(s.sb)) {
			char cause[300];
			snprintf(cause, sizeof cause, "%s", kbox_sandbox_cause(s.sb));
			if (kernel_replace(&s, cause, false) < 0) {
				s.stopping = true;
				break;
			}
			continue;
		}
		if (s.ttl_ms > 0 && !exec_busy(&s)) {
			long long idle = kbox__now_ms() - s.last_activity_ms;
			if (idle >= s.ttl_ms) {
				char t[32];
				kbox__fmt_ms(t, sizeof t, (int)(s.ttl_ms > 2000000000 ? 2000000000 : s.ttl_ms));
				snprintf(s.stop_cause, sizeof s.stop_cause,
				         "the session was idle for %s (its TTL) and stopped", t);
				s.stopping = true;
				break;
			}
			if (s.ttl_ms - idle < timeout)
				timeout = (int)(s.ttl_ms - idle);
		}
		p[np++] = (struct pollfd){s.sig_fd, POLLIN, 0};
		p[np++] = (struct pollfd){s.listen_fd, POLLIN, 0};
		p[np++] = (struct pollfd){s.ready_fd, POLLIN, 0}; /* -1 (ignored) unless starting */
		for (size_t i = 0; i < s.n_conns; i++)
			p[np++] = (struct pollfd){s.conns[i].fd, POLLIN, 0};
		if (poll(p, np, timeout) < 0 && errno != EINTR)
			break;
		if (starting(&s)) {
			kbox_error_t rerr = {0};
			int rc = kernel_check(&s, &rerr);
			if (rc < 0) {
				snprintf(s.stop_cause, sizeof s.stop_cause,
				         "the kernel could not be restarted: %s", rerr.msg);
				answer_pending(&s, s.stop_cause);
				s.stopping = true;
				break;
			}
			if (rc == 0)
				answer_pending(&s, NULL);
		}
		if (p[0].revents) {
			struct signalfd_siginfo si;
			while (read(s.sig_fd, &si, sizeof si) == sizeof si) {
				if (si.ssi_signo != SIGCHLD && !s.stopping) {
					const char *abbrev = sigabbrev_np((int)si.ssi_signo);
					snprintf(s.stop_cause, sizeof s.stop_cause,
					         "the supervisor received SIG%s", abbrev ? abbrev : "?");
					s.stopping = true;
				}
			}
		}
		if (p[1].revents)
			accept_all(&s);
		/* connections: walk backwards, conn_close moves the last one in */
		for (size_t k = np; k-- > 3;) {
			size_t i = k - 3;
			if (s.stopping)
				break;
			if (i < s.n_conns && p[k].revents && !conn_read(&s, i))
				conn_close(&s, i);
		}
		for (size_t i = 0; !s.stopping && !exec_busy(&s) && !starting(&s) && i < s.n_conns; i++)
			if (s.conns[i].waiting)
				grant_exec(&s, &s.conns[i]);
	}
	shutdown_session(&s);
out:
	for (size_t i = s.n_conns; i-- > 0;)
		conn_close(&s, i);
	if (s.listen_fd >= 0)
		close(s.listen_fd);
	if (s.sig_fd >= 0)
		close(s.sig_fd);
	if (s.pid_fd >= 0)
		close(s.pid_fd);
	kbox_kspec_destroy(&s.spec);
	free(s.env);
	json_decref(s.config);
	return status;
}
