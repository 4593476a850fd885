/* src/runtime/supervisor.c — one session's supervisor (supervisor.h).
 *
 * One event loop (kbox/loop.h) carries everything: the signalfd, the
 * control socket and its connections, timers, and the kernel's channels
 * (the client is attached to the loop).  Each handler reacts to one event.
 * Executions, completions and inspections are jobs, run one at a time in
 * the order they came.  Nothing here prints: what is worth saying goes to
 * events.ndjson, and a supervisor's own errors to supervisor.log through
 * its stderr. */
#include "private.h"
#include "runtime/backend.h"
#include "runtime/bwrap.h"
#include "runtime/cgroup.h"
#include "runtime/ctl.h"
#include "runtime/kernel_log.h"
#include "runtime/session.h"
#include "runtime/supervisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 256
#define READY_TIMEOUT_MS 60000
#define CRASH_WINDOW_MS 60000
#define CRASH_MAX 5
#define STOP_STEP_MS 2500
#define SHUTDOWN_WAIT_MS 2000
#define REQUEST_TIMEOUT_MS 30000   /* complete, inspect, interrupt_request */
#define GRACE_MS 5000              /* after an interrupt, by default */
#define CONN_OUT_MAX (8 << 20)     /* events queued for a slow client; more are dropped */
#define OUT_TOTAL_MAX (64 << 20)   /* the same for all clients together */
#define FLUSH_MS 20
/* The supervisor's own memory, whatever a kernel sends: resident over
 * MEMORY_HIGH (checked every MEMORY_CHECK_MS), the kernel is stopped and
 * replaced; its cgroup's limit MEMORY_MAX is the backstop, over which the
 * supervisor alone is killed (the host is untouched).  A message may be
 * 64 MiB (KBOX_MAX_MESSAGE_BYTES), and decoding one takes about three
 * times that.  Before that, over MEMORY_SHED, a reader that fell behind a
 * flood of output (decoding is slower than a kernel prints) drops output
 * unread, counted as over the rate limit, until its queue is empty. */
#ifdef KBOX_SANITIZED
#define MEMORY_SCALE 8 /* a sanitizer's shadow and quarantine; no cgroup either */
#else
#define MEMORY_SCALE 1
#endif
#define MEMORY_SHED (MEMORY_SCALE * 192LL << 20) /* over it, output is dropped unread until half */
#define MEMORY_HIGH (MEMORY_SCALE * 384LL << 20)
#define MEMORY_MAX (512LL << 20)
#define MEMORY_CHECK_MS 50

typedef struct sup sup_t;
typedef struct conn conn_t;
typedef struct job job_t;

typedef enum { FMT_TEXT, FMT_TEXT_LIVE, FMT_JSON, FMT_NDJSON } fmt_t;
typedef enum { JOB_EXECUTE, JOB_COMPLETE, JOB_INSPECT } job_kind_t;

/* One request that needs the kernel to itself, queued until its turn. */
struct job {
	sup_t *s;
	job_kind_t kind;
	conn_t *conn;        /* NULL once its client went away */
	json_t *req;         /* the request (owned) */
	job_t *next;
	int wait_timer;      /* the request's limit on waiting for its turn, or 0 */
	/* an execution */
	fmt_t fmt;
	bool with_text;      /* json or ndjson: the reply has the text too */
	long long timeout_ms, grace_ms;
	char **inputs;       /* NULL-terminated; owned */
	size_t n_inputs;
	kbox_capture_t *cap;
	kbox_exec_t *x;
	unsigned long generation;
	char notice[600];    /* the kernel was restarted since the last execution */
	int outputs_fd;      /* the request's "outputs" directory, opened, or -1 */
	char *earlier_text;  /* output printed between executions, rendered */
	json_t *earlier_json;
	bool abandoned;      /* its client went away while it ran */
	bool interrupt_asked; /* a client asked for an interrupt while it ran */
};

struct conn {
	sup_t *s;
	unsigned long id;    /* unique in this supervisor's life */
	int fd;
	char *in;            /* what has come, up to a newline */
	size_t in_len, in_cap;
	char *out;           /* what could not be sent yet */
	size_t out_len;
	size_t events_dropped;
	int passed_fd;       /* the descriptor that came with its last request, or -1 */
	job_t *job;          /* its job, queued or running, or NULL */
	const char *pending; /* "restart": answered once the new kernel is ready */
};

struct sup {
	const char *dir;
	json_t *config;
	const char *kernel, *backend;
	long long ttl_ms;
	kbox_sandbox_opts_t sbo;
	unsigned long long outputs_quota; /* the most outputs/ may hold */
	kbox_sandbox_id_t id;      /* who the sandbox runs as (under root: not us) */
	char **env;
	char runtime_dir[PATH_MAX], sockets_dir[PATH_MAX], workspace[PATH_MAX];
	char log_path[PATH_MAX], home[PATH_MAX], outputs[PATH_MAX];
	char conn_path[PATH_MAX + 32], inner_path[PATH_MAX + 32];
	kbox_kspec_t *spec;
	kbox_loop_t *loop;
	/* the kernel */
	kbox_sandbox_t *sb;
	kbox_kernel_log_t *klog;   /* its output, copied to kernel.log */
	kbox_client_t *client;
	bool ready;                /* answered: jobs may run */
	bool starting;             /* started, not yet answering */
	long long start_t0;
	int ready_fd;              /* kbox start's, until the first kernel is ready */
	/* jobs */
	job_t *queue, *running;
	/* output between executions */
	kbox_capture_t *between;
	size_t between_msgs;
	/* control */
	int listen_fd, sig_fd, pid_fd;
	long prev_pid;
	conn_t *conns[MAX_CONNS];
	size_t n_conns;
	int flush_timer, ttl_timer;
	unsigned long conn_serial;
	bool replacing;            /* kernel_replace is failing what ran on the old kernel */
	size_t out_total;          /* unsent output of all connections */
	/* bookkeeping */
	long long started_ms, kernel_started_ms, last_activity_ms;
	double started_wall, last_activity_wall;
	unsigned long executions, generation;
	unsigned restarts;
	char notice[600];
	char last_cause[512];
	char kill_cause[600];      /* we killed the kernel, and why */
	bool start_failed;         /* the first kernel never answered */
	bool ephemeral;            /* kbox run's: the directory goes when it stops */
	long owner_pid;            /* kbox run's: it stops when this process ends */
	int owner_fd;
	long long crashes[CRASH_MAX];
	bool stopping;
	char stop_cause[512];
	conn_t *stop_conn;
	kbox_cgroup_t *cg;         /* the supervisor's own (memory), or NULL */
	bool shedding;             /* over MEMORY_SHED: output is dropped unread */
	bool was_shedding;         /* …and the heap is to be trimmed after */
};

/* The one supervisor of this process (for callbacks that outlive what
 * they were given). */
static sup_t *the_sup;

static void dispatch_soon(sup_t *s);
static unsigned long long dir_bytes(const char *dir);
static void kernel_check_soon(sup_t *s);
static void conn_close(sup_t *s, conn_t *c);

static void sup_log(sup_t *s, const char *event, json_t *fields)
{
	kbox_session_log(s->dir, event, fields, NULL);
}

static void touch(sup_t *s)
{
	s->last_activity_ms = kbox__now_ms();
	s->last_activity_wall = kbox__now();
}


/* Cut S (NUL-terminated, possibly cut short by snprintf) back to a whole
 * UTF-8 character, so that it stays valid JSON text. */
static void utf8_cut(char *s)
{
	size_t n = strlen(s), i = n, need;
	while (i > 0 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i == 0)
		return;
	need = ((unsigned char)s[i - 1] & 0xe0) == 0xc0   ? 2
	       : ((unsigned char)s[i - 1] & 0xf0) == 0xe0 ? 3
	       : ((unsigned char)s[i - 1] & 0xf8) == 0xf0 ? 4
	                                                  : 1;
	if (n - (i - 1) < need)
		s[i - 1] = '\0';
}

/* A cause a client gave (restart, stop) as it is shown to a model: at
 * most 200 bytes, on one line, without control characters, into BUF. */
static void client_cause(char *buf, size_t size, const char *given, const char *def)
{
	snprintf(buf, size < 201 ? size : 201, "%s", given && *given ? given : def);
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	utf8_cut(buf);
}

/* "2 s", "1.5 s", "200 ms": durations in messages. */
static const char *fmt_ms(long long ms, char *buf, size_t size)
{
	if (ms % 1000 == 0)
		snprintf(buf, size, "%lld s", ms / 1000);
	else if (ms > 1000)
		snprintf(buf, size, "%.1f s", (double)ms / 1000.0);
	else
		snprintf(buf, size, "%lld ms", ms);
	return buf;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16];
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
	char path[PATH_MAX];
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

/* ---- sending to clients ---- */

/* Send what is queued for C without blocking.  false when C is gone. */
static bool conn_flush(conn_t *c)
{
	size_t off = 0;
	while (off < c->out_len) {
		ssize_t w = send(c->fd, c->out + off, c->out_len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w < 0)
			return false;
		off += (size_t)w;
	}
	memmove(c->out, c->out + off, c->out_len - off);
	c->out_len -= off;
	c->s->out_total -= off;
	return true;
}

static int on_flush(kbox_loop_t *loop, void *arg);

/* Queue J as one line for C and send what can be sent.  An event (EVENT
 * true) beyond CONN_OUT_MAX of unsent output is dropped and counted;
 * replies always go.  Takes J. */
static void conn_send(conn_t *c, json_t *j, bool event)
{
	sup_t *s = c->s;
	char *line;
	size_t len;
	if (!j)
		return;
	line = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9));
	json_decref(j);
	if (!line)
		return;
	len = strlen(line);
	if (event && (c->out_len + len + 1 > CONN_OUT_MAX || s->out_total + len + 1 > OUT_TOTAL_MAX)) {
		c->events_dropped++;
		free(line);
		return;
	}
	if (!event && c->out_len && (c->out_len + len + 1 > CONN_OUT_MAX ||
	                             s->out_total + len + 1 > OUT_TOTAL_MAX)) {
		/* a client that does not read its replies: it is cut off (its
		 * read handler sees the end and closes it) */
		shutdown(c->fd, SHUT_RDWR);
		free(line);
		return;
	}
	{
		char *nb = realloc(c->out, c->out_len + len + 1);
		if (!nb) {
			free(line);
			return;
		}
		c->out = nb;
	}
	memcpy(c->out + c->out_len, line, len);
	c->out[c->out_len + len] = '\n';
	c->out_len += len + 1;
	s->out_total += len + 1;
	free(line);
	conn_flush(c);
	if (c->out_len && !s->flush_timer)
		s->flush_timer = kbox_loop_add_timer(s->loop, FLUSH_MS, true, on_flush, s, NULL);
}

/* {"ok":false,"re":RE,"kind":KIND,"error":…} to C; RE may be NULL (the
 * request had no op). */
static void reply_error(conn_t *c, const char *re, const char *kind, const char *fmt, ...)
    KBOX_PRINTF(4, 5);
static void reply_error(conn_t *c, const char *re, const char *kind, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	utf8_cut(msg);
	conn_send(c, json_pack("{s:b, s:s*, s:s, s:s}", "ok", 0, "re", re, "kind", kind, "error", msg),
	          false);
}

static const char *job_kind_name(job_kind_t kind)
{
	return kind == JOB_EXECUTE ? "execute" : kind == JOB_COMPLETE ? "complete" : "inspect";
}

static const char *job_op(const job_t *j) { return job_kind_name(j->kind); }

static int on_flush(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	bool pending = false;
	for (size_t i = s->n_conns; i-- > 0;) {
		conn_t *c = s->conns[i];
		if (!c->out_len)
			continue;
		if (!conn_flush(c)) {
			conn_close(s, c);
			continue;
		}
		pending |= c->out_len > 0;
	}
	if (!pending) {
		kbox_loop_cancel_timer(loop, s->flush_timer);
		s->flush_timer = 0;
	}
	return 0;
}

/* ---- jobs ---- */

static void job_free(job_t *j)
{
	if (!j)
		return;
	if (j->wait_timer)
		kbox_loop_cancel_timer(j->s->loop, j->wait_timer);
	for (size_t i = 0; i < j->n_inputs; i++)
		free(j->inputs[i]);
	free(j->inputs);
	kbox_capture_destroy(&j->cap);
	kbox_exec_destroy(&j->x);
	if (j->outputs_fd >= 0)
		close(j->outputs_fd);
	free(j->earlier_text);
	json_decref(j->earlier_json);
	json_decref(j->req);
	free(j);
}

static void queue_remove(sup_t *s, job_t *j)
{
	for (job_t **p = &s->queue; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			j->next = NULL;
			return;
		}
}

static void queue_add(sup_t *s, job_t *j)
{
	job_t **p = &s->queue;
	while (*p)
		p = &(*p)->next;
	*p = j;
}

/* A queued job's limit on waiting for its turn ran out. */
static int on_wait_timeout(kbox_loop_t *loop, void *arg)
{
	job_t *j = arg;
	(void)loop;
	j->wait_timer = 0;
	queue_remove(j->s, j);
	if (j->conn) {
		j->conn->job = NULL;
		reply_error(j->conn, job_op(j), "busy",
		            "the session was busy running other code all the time this code could "
		            "wait (its time limit): it never ran (the session runs one execution at "
		            "a time; try again when it is done, or give a longer -t)");
	}
	job_free(j);
	return 0;
}

/* ---- output between executions ---- */

static bool is_output(const char *type)
{
	return strcmp(type, "stream") == 0 || strcmp(type, "display_data") == 0 ||
	       strcmp(type, "update_display_data") == 0 || strcmp(type, "execute_result") == 0 ||
	       strcmp(type, "error") == 0 || strcmp(type, "clear_output") == 0;
}

/* iopub output that belongs to no execution running: kept, within the
 * capture's budgets, for the next result. */
static void on_between(void *arg, const kbox_msg_t *msg)
{
	sup_t *s = arg;
	const char *from = json_string_value(
	    json_object_get(kbox_msg_parent_header(msg), "session"));
	if (!is_output(kbox_msg_type(msg)))
		return;
	/* ours: after one of our executions (a thread or timer it started), or
	 * of no request at all; not what another client of the kernel (jupyter
	 * console --existing, say) asked for */
	if (from && *from && s->client && strcmp(from, kbox_client_session(s->client)) != 0)
		return;
	if (!s->between) {
		kbox_capture_opts_t co = {0};
		char prefix[48];
		snprintf(prefix, sizeof prefix, "%lu-between-", s->generation);
		/* in memory only, within its budgets: with no one watching, a
		 * kernel printing forever must not fill the disk (what goes over
		 * is counted in the marker; images are named, not saved) */
		co.outputs_dir = NULL;
		co.prefix = prefix;
		if (!(s->between = kbox_capture_new(&co, NULL)))
			return;
	}
	s->between_msgs++;
	kbox_capture_feed(s->between, msg, NULL);
}

/* The output kept between executions, rendered for J, and forgotten. */
static void take_between(sup_t *s, job_t *j)
{
	kbox_result_t *r;
	json_t *all;
	if (!s->between)
		return;
	r = kbox_capture_finish(&s->between, NULL);
	s->between_msgs = 0;
	if (!r)
		return;
	j->earlier_text = kbox_render_text(r);
	all = kbox_render_json(r);
	if (all) {
		j->earlier_json = json_object();
		json_object_set(j->earlier_json, "stdout", json_object_get(all, "stdout"));
		json_object_set(j->earlier_json, "stderr", json_object_get(all, "stderr"));
		json_object_set(j->earlier_json, "displays", json_object_get(all, "displays"));
		json_object_set(j->earlier_json, "images", json_object_get(all, "images"));
		json_decref(all);
	}
	kbox_result_destroy(&r);
}

/* ---- executions ---- */

/* FORMAT of a request (absent: text) into *OUT.  0, or -1 when unknown. */
static int parse_fmt(json_t *format, fmt_t *out)
{
	static const char *const names[] = {"text", "text-live", "json", "ndjson"};
	const char *f = json_string_value(format);
	if (!format) {
		*out = FMT_TEXT;
		return 0;
	}
	for (int i = 0; f && i < 4; i++)
		if (strcmp(f, names[i]) == 0) {
			*out = (fmt_t)i;
			return 0;
		}
	return -1;
}

/* Each capture event, to a client that follows them. */
static void on_event(void *arg, const kbox_capture_t *cap, const kbox_event_t *ev)
{
	job_t *j = arg;
	json_t *e;
	if (!j->conn || (j->fmt == FMT_TEXT_LIVE && ev->type != KBOX_EV_STREAM))
		return;
	if ((e = kbox_render_event(cap, ev)))
		conn_send(j->conn, json_pack("{s:s, s:o}", "re", "execute", "event", e), true);
}

static int job_on_msg(void *arg, kbox_channel_t channel, const kbox_msg_t *msg)
{
	job_t *j = arg;
	return kbox_capture_on_msg(j->cap, channel, msg);
}

/* Output over the rate limit is read while the capture keeps it on disk. */
static bool job_keep_output(void *arg)
{
	job_t *j = arg;
	return j->cap && kbox_capture_can_spill(j->cap);
}

/* Would one more death the session did not ask for be one too many (see
 * kernel_replace)? */
static bool crash_limit_next(const sup_t *s)
{
	long long now = kbox__now_ms();
	int recent = 1;
	for (int i = 1; i < CRASH_MAX; i++)
		recent += s->crashes[i] && now - s->crashes[i] < CRASH_WINDOW_MS;
	return recent >= CRASH_MAX;
}

/* Does RES's error have the name NAME? */
static bool error_is(const kbox_result_t *res, const char *name)
{
	size_t n;
	const char *e = kbox_result_ename(res, &n);
	return kbox_result_has_error(res) && n == strlen(name) && memcmp(e, name, n) == 0;
}

/* Where the traceback of RES says the code was: "Cell In[3], line 2:
 * time.sleep(1)" (IPython's first frame of the cell, and its marked line)
 * into BUF, or "". */
static const char *error_place(const kbox_result_t *res, char *buf, size_t size)
{
	const kbox_text_t *t = kbox_result_traceback(res);
	const char *p = t && t->text ? t->text : "", *end = p + (t && t->text ? t->len : 0);
	const char *cell = NULL, *arrow = NULL;
	int cell_len = 0, arrow_len = 0;

	buf[0] = '\0';
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		int len = (int)((nl ? nl : end) - p);
		if (!cell && len > 8 && strncmp(p, "Cell In", 7) == 0) {
			cell = p;
			cell_len = len;
		} else if (cell && !arrow && len > 5 && strncmp(p, "---->", 5) == 0) {
			/* "----> 2     time.sleep(1)": the line's number, then its code */
			const char *q = p + 5, *e = p + len;
			while (q < e && *q == ' ')
				q++;
			while (q < e && *q >= '0' && *q <= '9')
				q++;
			while (q < e && *q == ' ')
				q++;
			arrow = q;
			arrow_len = (int)(e - q);
			break;
		}
		p = nl ? nl + 1 : end;
	}
	/* at most 80 and 120 bytes of them, in whole characters */
	if (cell_len > 80)
		for (cell_len = 80; cell_len > 0 && ((unsigned char)cell[cell_len] & 0xc0) == 0x80;)
			cell_len--;
	if (arrow_len > 120)
		for (arrow_len = 120; arrow_len > 0 && ((unsigned char)arrow[arrow_len] & 0xc0) == 0x80;)
			arrow_len--;
	if (cell && arrow && arrow_len > 0)
		snprintf(buf, size, " at %.*s: %.*s", cell_len, cell, arrow_len, arrow);
	else if (cell)
		snprintf(buf, size, " at %.*s", cell_len, cell);
	utf8_cut(buf);
	/* the kernel wrote it: no control character of its reaches the line */
	for (char *q = buf; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			*q = ' ';
	return buf;
}

/* What the reader of J's result RES needs instead of a long traceback: an
 * interrupt asked for (status interrupted), a timeout's KeyboardInterrupt,
 * input asked for that no one could give. */
static void result_explain(job_t *j, kbox_result_t *res)
{
	char place[256], line[600];
	kbox_exec_status_t st = kbox_result_status(res);

	if (error_is(res, "KeyboardInterrupt") && (st == KBOX_EXEC_ERROR || st == KBOX_EXEC_TIMEOUT) &&
	    (j->interrupt_asked || st == KBOX_EXEC_TIMEOUT)) {
		error_place(res, place, sizeof place);
		if (st == KBOX_EXEC_TIMEOUT) {
			snprintf(line, sizeof line, "KeyboardInterrupt: interrupted when it timed out%s",
			         place);
		} else {
			snprintf(line, sizeof line, "KeyboardInterrupt: interrupted by kbox interrupt%s",
			         place);
			kbox_result_set_status(res, KBOX_EXEC_INTERRUPTED, "interrupted by kbox interrupt");
		}
		kbox_result_set_error_text(res, line);
	} else if (j->interrupt_asked && st == KBOX_EXEC_OK) {
		kbox_result_add_notice(res, "kbox interrupt was sent while it ran, and the code went on "
		                            "to the end",
		                       false);
	} else if (error_is(res, "EOFError") && j->inputs && j->x &&
	           kbox_exec_inputs_answered(j->x) > j->n_inputs) {
		snprintf(line, sizeof line,
		         "EOFError: the code asked for more input than the %zu line%s given: give "
		         "more with -i LINE or --input-file FILE",
		         j->n_inputs, j->n_inputs == 1 ? "" : "s");
		kbox_result_set_error_text(res, line);
	} else if (error_is(res, "StdinNotImplementedError") && !j->inputs) {
		kbox_result_set_error_text(res,
		                           "StdinNotImplementedError: the code asked for input (input() "
		                           "or getpass()) and none was given: give each line with "
		                           "-i LINE or --input-file FILE");
	}
}

/* The execution of J ended: its result to its client, the log, and what
 * comes next (a killed kernel's replacement, the next job). */
static void on_exec_done(void *arg, kbox_exec_t *x)
{
	job_t *j = arg;
	sup_t *s = j->s;
	kbox_result_t *res;
	kbox_exec_status_t st = kbox_exec_status(x);
	char cause[600] = "";
	bool kill = false;

	j->x = x;
	s->running = NULL;
	touch(s);
	if (kbox_exec_interrupted(x) && !j->abandoned) {
		char t[32], why[96];
		snprintf(why, sizeof why, "the execution timed out after %s",
		         fmt_ms(j->timeout_ms, t, sizeof t));
		sup_log(s, "interrupt", json_pack("{s:s}", "cause", why));
	}
	if (st == KBOX_EXEC_TIMEOUT && !kbox_exec_reply(x) && !kbox_exec_went_idle(x) &&
	    kbox_exec_interrupted(x) && s->sb && kbox_sandbox_alive(s->sb)) {
		/* the kernel ignored the interrupt: it is killed, and replaced */
		char t[32], g[32];
		if (j->abandoned)
			snprintf(cause, sizeof cause,
			         "the client of an execution went away and the code did not stop within "
			         "%s of an interrupt, so the kernel was killed",
			         fmt_ms(j->grace_ms, g, sizeof g));
		else
			snprintf(cause, sizeof cause,
			         "the execution timed out after %s and did not stop within %s of an "
			         "interrupt, so the kernel was killed",
			         fmt_ms(j->timeout_ms, t, sizeof t), fmt_ms(j->grace_ms, g, sizeof g));
		kill = true;
	} else if (st == KBOX_EXEC_DIED) {
		if (s->replacing && s->last_cause[0])
			/* we ended it (kernel_replace): the cause is ours, not the signal's */
			snprintf(cause, sizeof cause, "%s", s->last_cause);
		else if (s->sb && !kbox_sandbox_alive(s->sb))
			snprintf(cause, sizeof cause, "%s", kbox_sandbox_cause(s->sb));
		else if (s->stopping)
			snprintf(cause, sizeof cause, "%s", s->stop_cause);
		else {
			/* the process runs but the kernel is lost to us (it stopped
			 * answering): it is killed and replaced */
			snprintf(cause, sizeof cause, "%s, so the kernel was killed",
			         kbox_exec_reason(x));
			kill = !s->replacing && s->sb != NULL;
		}
	}
	res = kbox_capture_finish(&j->cap, x);
	if (res)
		result_explain(j, res);
	if (res) {
		if (kill || st == KBOX_EXEC_DIED) {
			char reason[800];
			/* no new kernel when the session stops, or is about to */
			bool restarting = !s->stopping && (kill || !crash_limit_next(s));
			snprintf(reason, sizeof reason, "%s%s", cause,
			         restarting ? "; a new kernel was started" : "");
			kbox_result_set_status(res, KBOX_EXEC_DIED, reason);
		}
		if (j->notice[0] && j->fmt != FMT_TEXT && j->fmt != FMT_TEXT_LIVE)
			kbox_result_add_notice(res, j->notice, true);
	}
	if (j->conn && !res)
		reply_error(j->conn, job_op(j), "internal", "out of memory rendering the result");
	else if (j->conn) {
		json_t *r = json_pack("{s:b, s:s, s:s, s:I}", "ok", 1, "re", "execute", "status",
		                      kbox_exec_status_name(kbox_result_status(res)), "generation",
		                      (json_int_t)j->generation);
		if (j->fmt == FMT_TEXT || j->fmt == FMT_TEXT_LIVE || j->with_text) {
			char *text = kbox_render_text_ex(res, j->fmt == FMT_TEXT_LIVE
			                                          ? KBOX_RENDER_NO_STREAMS
			                                          : 0);
			size_t need = (text ? strlen(text) : 0) + (j->earlier_text ? strlen(j->earlier_text) : 0) + 700;
			char *all = malloc(need);
			if (all) {
				size_t n = 0;
				all[0] = '\0';
				/* the notice first with "text" (a live client printed it
				 * already; with_text json has it among the notes) */
				if (j->notice[0] && j->fmt == FMT_TEXT)
					n += (size_t)snprintf(all + n, need - n, "[note: %s]\n", j->notice);
				if (j->earlier_text && j->fmt != FMT_TEXT_LIVE)
					n += (size_t)snprintf(all + n, need - n,
					                      "[output printed between executions:]\n%s"
					                      "[end of that output]\n",
					                      j->earlier_text);
				snprintf(all + n, need - n, "%s", text ? text : "");
				{
					json_t *t = json_string(all);
					if (!t) {
						/* never dropped: what is not UTF-8 becomes '?' */
						for (unsigned char *q = (unsigned char *)all; *q; q++)
							if (*q >= 0x80)
								*q = '?';
						t = json_string(all);
					}
					json_object_set_new(r, "text", t);
				}
				free(all);
			}
			free(text);
		}
		if (j->fmt == FMT_JSON || j->fmt == FMT_NDJSON) {
			json_t *o = j->fmt == FMT_JSON ? kbox_render_json(res) : kbox_render_end_event(res);
			if (o && j->earlier_json)
				json_object_set(o, "earlier_output", j->earlier_json);
			json_object_set_new(r, "result", o ? o : json_null());
		}
		json_object_set_new(r, "reason", json_string(kbox_result_reason(res)));
		json_object_set_new(r, "inputs_used",
		                    json_integer((json_int_t)kbox_exec_inputs_answered(x)));
		if (j->conn->events_dropped)
			json_object_set_new(r, "events_dropped",
			                    json_integer((json_int_t)j->conn->events_dropped));
		conn_send(j->conn, r, false);
		j->conn->job = NULL;
	}
	sup_log(s, "exec-end",
	        json_pack("{s:s, s:f, s:i, s:I}", "status",
	                  kbox_exec_status_name(res ? kbox_result_status(res) : st), "seconds",
	                  kbox_exec_seconds(x), "count", kbox_exec_count(x), "generation",
	                  (json_int_t)j->generation));
	kbox_result_destroy(&res);
	job_free(j);
	/* what a flood of output made the heap grow by goes back to the
	 * system, not kept for the session's life */
	malloc_trim(0);
	if (kill) {
		/* replaced on the next turn, not from inside the client's callback */
		snprintf(s->kill_cause, sizeof s->kill_cause, "%s", cause);
		kbox_sandbox_signal(s->sb, SIGKILL, NULL);
	}
	if (kill || (st == KBOX_EXEC_DIED && !s->replacing)) {
		/* nothing more runs on this kernel: the next job waits for the new one */
		s->ready = false;
		kernel_check_soon(s);
	}
	dispatch_soon(s);
}

/* A reply to a completion or an inspection, to its client. */
static void on_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	job_t *j = arg;
	sup_t *s = j->s;
	s->running = NULL;
	touch(s);
	if (j->conn) {
		if (reply)
			conn_send(j->conn,
			          json_pack("{s:b, s:s, s:O}", "ok", 1, "re",
			                    j->kind == JOB_COMPLETE ? "complete" : "inspect", "reply",
			                    kbox_msg_content(reply)),
			          false);
		else
			reply_error(j->conn, job_op(j), "kernel", "%s", err ? err->msg : "no reply");
		j->conn->job = NULL;
	}
	kbox_msg_destroy(&reply);
	job_free(j);
	dispatch_soon(s);
}

/* Begin job J on the kernel.  0, or -1 when it could not begin (its
 * client has been told). */
static int job_begin(sup_t *s, job_t *j)
{
	kbox_error_t err = {0};
	json_t *req = j->req;

	if (j->wait_timer) {
		kbox_loop_cancel_timer(s->loop, j->wait_timer);
		j->wait_timer = 0;
	}
	s->running = j;
	touch(s);
	if (j->kind != JOB_EXECUTE) {
		const char *code = json_string_value(json_object_get(req, "code"));
		json_t *cursor = json_object_get(req, "cursor_pos");
		json_t *content;
		json_int_t want = json_is_integer(cursor) ? json_integer_value(cursor) : -1;
		int pos = 0; /* the end of the code, in code points, at most */
		for (const char *p = code; *p; p++)
			pos += ((unsigned char)*p & 0xc0) != 0x80;
		if (want >= 0 && want < pos)
			pos = (int)want;
		content = j->kind == JOB_COMPLETE
		              ? json_pack("{s:s, s:i}", "code", code, "cursor_pos", pos)
		              : json_pack("{s:s, s:i, s:i}", "code", code, "cursor_pos", pos,
		                          "detail_level",
		                          (int)json_integer_value(json_object_get(req, "detail_level")));
		if (kbox_client_request_begin(s->client, KBOX_CH_SHELL,
		                              j->kind == JOB_COMPLETE ? "complete_request"
		                                                      : "inspect_request",
		                              &content, REQUEST_TIMEOUT_MS, on_reply, j, &err) < 0) {
			s->running = NULL;
			if (j->conn) {
				reply_error(j->conn, job_op(j), "kernel", "%s", err.msg);
				j->conn->job = NULL;
			}
			job_free(j);
			return -1;
		}
		return 0;
	}

	{
		kbox_capture_opts_t co = {0};
		kbox_exec_opts_t eo = {0};
		const char *outputs = json_string_value(json_object_get(req, "outputs"));
		char prefix[48];

		j->generation = s->generation;
		if (j->conn)
			j->conn->events_dropped = 0;
		snprintf(prefix, sizeof prefix, "%lu-", s->generation);
		co.outputs_dir = outputs ? outputs : s->outputs;
		co.has_outputs_fd = outputs && j->outputs_fd >= 0;
		co.keep_existing = outputs != NULL; /* the client's own directory */
		co.outputs_fd = j->outputs_fd;
		co.prefix = json_is_string(json_object_get(req, "prefix"))
		                ? json_string_value(json_object_get(req, "prefix"))
		                : prefix;
		co.max_bytes = (size_t)json_integer_value(json_object_get(req, "max_output"));
		co.max_lines = (size_t)json_integer_value(json_object_get(req, "max_lines"));
		/* what it may write: spill files no larger than the kernel's own
		 * files may be, and the session's outputs quota (what outputs/
		 * holds already counts; a directory of the client's own is
		 * bounded per execution) */
		co.spill_max = s->sb && s->sb->o.file_bytes > 0 ? (unsigned long long)s->sb->o.file_bytes
		                                                : 0;
		co.has_files_max = true;
		if (j->inputs) {
			co.input_lines = (const char *const *)j->inputs;
			co.n_input = j->n_inputs;
		}
		{
			unsigned long long used = outputs ? 0 : dir_bytes(s->outputs);
			co.files_max = s->outputs_quota > used ? s->outputs_quota - used : 0;
		}
		if (!(j->cap = kbox_capture_new(&co, &err)))
			goto fail;
		/* what it should know: kept for the next execution if this one
		 * does not begin */
		snprintf(j->notice, sizeof j->notice, "%s", s->notice);
		if (j->fmt == FMT_NDJSON || j->fmt == FMT_TEXT_LIVE)
			kbox_capture_set_event_cb(j->cap, on_event, j);
		eo.code = json_string_value(json_object_get(req, "code"));
		eo.timeout_ms = j->timeout_ms > INT_MAX ? INT_MAX : (int)j->timeout_ms;
		eo.interrupt_on_timeout = true;
		eo.grace_ms = j->grace_ms > INT_MAX ? INT_MAX : (int)j->grace_ms;
		eo.on_msg = job_on_msg;
		eo.keep_output = job_keep_output;
		eo.cb_arg = j;
		if (j->inputs) {
			eo.input_lines = (const char *const *)j->inputs;
			eo.n_input = j->n_inputs;
		}
		if (!(j->x = kbox_client_execute_begin(s->client, &eo, on_exec_done, j, &err)))
			goto fail;
		s->notice[0] = '\0';
		take_between(s, j);
		s->executions++;
		sup_log(s, "exec-begin",
		        json_pack("{s:I, s:I}", "generation", (json_int_t)j->generation, "code_bytes",
		                  (json_int_t)strlen(eo.code)));
		/* the client hears first that it runs, and what it should know */
		if (j->conn)
			conn_send(j->conn,
			          json_pack("{s:s, s:b, s:I, s:s?, s:s?}", "re", "execute", "started", 1,
			                    "generation", (json_int_t)j->generation, "notice",
			                    j->notice[0] ? j->notice : NULL, "earlier_output",
			                    j->earlier_text),
			          false);
		return 0;
	}
fail:
	s->running = NULL;
	if (j->conn) {
		reply_error(j->conn, job_op(j), "kernel", "%s", err.msg);
		j->conn->job = NULL;
	}
	job_free(j);
	return -1;
}

/* Run the next job if the kernel is free. */
static int on_dispatch(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	(void)loop;
	while (!s->stopping && s->ready && !s->running && s->queue) {
		job_t *j = s->queue;
		s->queue = j->next;
		j->next = NULL;
		job_begin(s, j);
	}
	return 0;
}

static void dispatch_soon(sup_t *s)
{
	kbox_loop_add_timer(s->loop, 0, false, on_dispatch, s, NULL);
}

/* ---- the kernel ---- */

static int sb_alive(void *arg)
{
	sup_t *s = arg;
	return s->sb && kbox_sandbox_alive(s->sb) ? 1 : 0;
}

static int sb_interrupt(void *arg, kbox_error_t *err)
{
	sup_t *s = arg;
	if (!s->sb)
		return kbox__err(err, KBOX_E_DEAD, "no kernel");
	return kbox_sandbox_signal(s->sb, SIGINT, err);
}

/* The bytes of the regular files in DIR (not below it: outputs are
 * written at its top), 0 when it cannot be read. */
static unsigned long long dir_bytes(const char *dir)
{
	unsigned long long sum = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
			/* what it takes: its size or its blocks, the larger, and a
			 * block at least (as the capture counts it) */
			unsigned long long used = (unsigned long long)st.st_blocks * 512;
			if (used < (unsigned long long)st.st_size)
				used = (unsigned long long)st.st_size;
			sum += used > 4096 ? used : 4096;
		}
	closedir(d);
	return sum;
}

/* Make DIR (0700, the sandbox's: ours, or under root the sandbox user's)
 * empty and private, whatever a kernel did to it. */
static int fresh_private_dir(sup_t *s, const char *dir, kbox_error_t *err)
{
	struct stat st;
	int dfd;
	bool ours;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return kbox__err_sys(err, "cannot create %s", dir);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return kbox__err_sys(err, "%s", dir);
	ours = fstat(dfd, &st) == 0 && (st.st_uid == geteuid() || st.st_uid == s->id.uid);
	if (!ours || fchmod(dfd, 0700) < 0 ||
	    (s->id.drop && fchown(dfd, s->id.uid, s->id.gid) < 0)) {
		close(dfd);
		return kbox__err(err, KBOX_E_INVALID, "%s is not a directory of ours", dir);
	}
	close(dfd);
	if (kbox__empty_dir(dir) < 0)
		return kbox__err_sys(err, "cannot empty %s", dir);
	return 0;
}

/* Write the connection files of kernel generation s->generation: the
 * host's (run/kernel-N.json) and, for a backend that shows the sockets
 * elsewhere, the kernel's (run/sandbox/kernel-N.sandbox.json, naming them
 * there).  *CONN_P gets the connection; KERNEL_CONN the file the kernel
 * is to read, as it sees it.  0 or -1 with ERR. */
static int write_conn(sup_t *s, const kbox_backend_t *b, kbox_conn_t **conn_p, char *kernel_conn,
                      size_t size, kbox_error_t *err)
{
	kbox_conn_t *conn = NULL, *inner = NULL;
	const char *ip;
	size_t dl = strlen(s->sockets_dir);
	int rc = -1;

	snprintf(s->conn_path, sizeof s->conn_path, "%s/kernel-%lu.json", s->runtime_dir,
	         s->generation);
	s->inner_path[0] = '\0';
	if (fresh_private_dir(s, s->sockets_dir, err) < 0 ||
	    !(conn = kbox_conn_new_ipc(s->sockets_dir, err)))
		goto out;
	kbox_conn_set_kernel_name(conn, kbox_kspec_name(s->spec));
	if (kbox_conn_save(conn, s->conn_path, err) < 0)
		goto out;
	snprintf(kernel_conn, size, "%s", s->conn_path);
	if (b->sockets_inside) {
		char inside_ip[PATH_MAX];
		ip = kbox_conn_ip(conn);
		if (strncmp(ip, s->sockets_dir, dl) != 0 || ip[dl] != '/') {
			kbox__err(err, KBOX_E_INVALID, "the sockets are not in %s", s->sockets_dir);
			goto out;
		}
		snprintf(inside_ip, sizeof inside_ip, "%s/%s", b->sockets_inside, ip + dl + 1);
		snprintf(s->inner_path, sizeof s->inner_path, "%s/kernel-%lu.sandbox.json",
		         s->sockets_dir, s->generation);
		if (!(inner = kbox_conn_dup(conn))) {
			kbox__err(err, KBOX_E_NOMEM, "out of memory");
			goto out;
		}
		kbox_ids_t ids = {s->id.uid, s->id.gid};
		if (kbox_conn_set_ip(inner, inside_ip, err) < 0 ||
		    kbox__conn_save_for(inner, s->inner_path, s->id.drop ? &ids : NULL, err) < 0)
			goto out;
		snprintf(kernel_conn, size, "%s/kernel-%lu.sandbox.json", b->sockets_inside,
		         s->generation);
	}
	*conn_p = conn;
	conn = NULL;
	rc = 0;
out:
	kbox_conn_destroy(&conn);
	kbox_conn_destroy(&inner);
	return rc;
}

/* Remove the current kernel's files (connection files, sockets). */
static void remove_kernel_files(sup_t *s)
{
	if (s->conn_path[0])
		unlink(s->conn_path);
	kbox__empty_dir(s->sockets_dir);
}

static void on_ready(void *arg, int rc, const kbox_error_t *err);

/* Start a kernel (generation + 1) and begin waiting for it to answer.
 * 0, or -1 with ERR (nothing left running). */
static int kernel_start(sup_t *s, kbox_error_t *err)
{
	const kbox_backend_t *b = kbox_backend_find(s->backend);
	kbox_conn_t *conn = NULL;
	char gen[32], kernel_conn[PATH_MAX + 64];
	kbox_client_hooks_t hooks = {NULL, sb_alive, s};

	if (!b)
		return kbox__err(err, KBOX_E_NOTFOUND, "unknown backend \"%s\"", s->backend);
	s->starting = true;
	s->ready = false;
	s->start_t0 = kbox__now_ms();
	s->generation++;
	snprintf(gen, sizeof gen, "%lu\n", s->generation);
	write_file(s->dir, "generation", gen);
	if ((kbox_backend_sandboxed(s->backend) && kbox_session_share(s->dir, &s->id, err) < 0) ||
	    write_conn(s, b, &conn, kernel_conn, sizeof kernel_conn, err) < 0 ||
	    (s->sbo.log_fd = kbox__kernel_log_pipe(s->klog, s->loop, err)) < 0)
		goto fail;
	s->sb = kbox_sandbox_start(s->backend, s->spec, &s->sbo, kernel_conn, err);
	close(s->sbo.log_fd); /* the kernel's now, and only the kernel's */
	s->sbo.log_fd = -1;
	if (!s->sb)
		goto fail;
	sup_log(s, "start",
	        json_pack("{s:s, s:s, s:I, s:I}", "backend", s->backend, "kernel", s->kernel, "pid",
	                  (json_int_t)kbox_sandbox_pid(s->sb), "generation",
	                  (json_int_t)s->generation));
	if (*kbox_sandbox_limits(s->sb))
		sup_log(s, "limits", json_pack("{s:s, s:s}", "applied", kbox_sandbox_limits(s->sb),
		                               "missing", kbox_sandbox_limits_missing(s->sb)));
	if (!(s->client = kbox_client_new(conn, err)))
		goto fail;
	s->shedding = false; /* a new client does not shed; the check says when to */
	if (kbox_kspec_interrupt_mode(s->spec) == KBOX_INTERRUPT_SIGNAL)
		hooks.interrupt = sb_interrupt;
	kbox_client_set_hooks(s->client, &hooks);
	kbox_client_set_iopub_cb(s->client, on_between, s);
	if (kbox_client_attach(s->client, s->loop, err) < 0 ||
	    kbox_client_ready_begin(s->client, READY_TIMEOUT_MS, on_ready, s, err) < 0)
		goto fail;
	kbox_conn_destroy(&conn);
	return 0;
fail:
	kbox_conn_destroy(&conn);
	kbox_client_destroy(&s->client);
	kbox_sandbox_destroy(&s->sb);
	kbox__kernel_log_close(s->klog);
	remove_kernel_files(s);
	s->starting = false;
	return -1;
}

/* End the current kernel (gracefully when GRACEFUL and it answers) and
 * forget it. */
static void kernel_end(sup_t *s, bool graceful)
{
	if (s->client) {
		kbox_client_detach(s->client);
		if (graceful && s->ready && s->sb && kbox_sandbox_alive(s->sb)) {
			kbox_msg_t *r = kbox_client_shutdown(s->client, false, SHUTDOWN_WAIT_MS, NULL);
			if (r)
				kbox_sandbox_wait_end(s->sb, STOP_STEP_MS);
			kbox_msg_destroy(&r);
		}
		kbox_client_destroy(&s->client);
	}
	if (s->sb) {
		kbox_sandbox_stop(s->sb, STOP_STEP_MS);
		kbox_sandbox_destroy(&s->sb);
	}
	kbox__kernel_log_close(s->klog); /* its last words */
	remove_kernel_files(s);
	s->ready = s->starting = false;
}

/* Answer the restart requests waiting for the new kernel. */
static void answer_pending(sup_t *s, const char *kind, const char *error)
{
	for (size_t i = 0; i < s->n_conns; i++) {
		conn_t *c = s->conns[i];
		if (!c->pending)
			continue;
		if (error)
			reply_error(c, c->pending, kind, "%s", error);
		else
			conn_send(c,
			          json_pack("{s:b, s:s, s:I}", "ok", 1, "re", c->pending, "generation",
			                    (json_int_t)s->generation),
			          false);
		c->pending = NULL;
	}
}

static void report_ready(sup_t *s, json_t *j)
{
	if (s->ready_fd >= 0) {
		kbox_ctl_send(s->ready_fd, j, NULL);
		close(s->ready_fd);
		s->ready_fd = -1;
	}
	json_decref(j);
}

/* Why the kernel could not start: ERR's message, or the cause when the
 * kernel ended, pointing at its log; then the last lines the kernel wrote
 * (its stderr: R's, Python's traceback), START_TAIL_LINES of them.  The
 * length of what comes before those lines. */
#define START_TAIL_LINES 10
static size_t start_failure(sup_t *s, const kbox_error_t *err, char *buf, size_t size)
{
	kbox_error_t perr = {0};
	kbox_bwrap_opts_t bo = {0};
	char tail[1600];
	size_t n;
	bo.rootfs = s->sbo.rootfs;
	kbox__kernel_log_flush(s->klog); /* what it said is in the log */
	/* the kernel never ran because bwrap cannot make a sandbox here (no
	 * user namespaces, say): bwrap's own words, from a probe */
	if (s->sb && !kbox_sandbox_alive(s->sb) && strcmp(s->backend, "bwrap") == 0 &&
	    kbox_bwrap_probe(&bo, &perr) < 0) {
		snprintf(buf, size, "backend bwrap: %s (see kbox doctor)", perr.msg);
		utf8_cut(buf);
		return strlen(buf);
	}
	if (s->sb && !kbox_sandbox_alive(s->sb) && s->ephemeral)
		/* kbox run's session and its log go when it stops: no path */
		snprintf(buf, size, "%s before it was ready", kbox_sandbox_cause(s->sb));
	else if (s->sb && !kbox_sandbox_alive(s->sb))
		snprintf(buf, size, "%s before it was ready (see %s)", kbox_sandbox_cause(s->sb),
		         s->log_path);
	else
		snprintf(buf, size, "%s", err && err->msg[0] ? err->msg : "the kernel did not start");
	kbox__kernel_log_tail(s->klog, START_TAIL_LINES, tail, sizeof tail);
	n = strlen(buf);
	if (tail[0])
		snprintf(buf + n, size - n, "; its last lines:\n%s", tail);
	utf8_cut(buf);
	return n < strlen(buf) ? n : strlen(buf);
}

static void on_ready(void *arg, int rc, const kbox_error_t *err)
{
	sup_t *s = arg;
	s->starting = false;
	if (s->replacing) /* this kernel is being replaced anyway */
		return;
	if (rc < 0) {
		char why[2400], full[2500];
		const char *what = s->ready_fd >= 0 ? "start" : "be restarted";
		int head = (int)start_failure(s, err, why, sizeof why);
		kernel_end(s, false);
		/* the kernel's last lines go to who waits for it, not into the
		 * session's stop cause */
		snprintf(full, sizeof full, "the kernel could not %s: %s", what, why);
		utf8_cut(full);
		snprintf(s->stop_cause, sizeof s->stop_cause, "the kernel could not %s: %.*s", what,
		         head, why);
		utf8_cut(s->stop_cause);
		if (s->ready_fd >= 0) {
			s->start_failed = true;
			report_ready(s, json_pack("{s:b, s:s}", "ok", 0, "error", why));
		}
		answer_pending(s, "kernel", full);
		s->stopping = true;
		kbox_loop_stop(s->loop);
		return;
	}
	s->ready = true;
	s->kernel_started_ms = kbox__now_ms();
	malloc_trim(0); /* what the kernel before this one left in the heap */
	touch(s);
	sup_log(s, "ready",
	        json_pack("{s:I, s:I, s:I}", "pid", (json_int_t)kbox_sandbox_pid(s->sb), "generation",
	                  (json_int_t)s->generation, "ms",
	                  (json_int_t)(kbox__now_ms() - s->start_t0)));
	report_ready(s, json_pack("{s:b, s:I, s:I}", "ok", 1, "pid", (json_int_t)getpid(),
	                          "kernel_pid", (json_int_t)kbox_sandbox_pid(s->sb)));
	answer_pending(s, NULL, NULL);
	dispatch_soon(s);
}

/* The kernel is gone, or is being replaced, for CAUSE: end what ran on it,
 * remember why for the next execution, and start a new one unless it
 * keeps dying.  0, or -1 when the session has to stop (stop_cause set). */
static int kernel_replace(sup_t *s, const char *cause, bool requested)
{
	kbox_error_t err = {0};
	long long now = kbox__now_ms();
	int recent = 0;

	snprintf(s->last_cause, sizeof s->last_cause, "%s", cause);
	utf8_cut(s->last_cause);
	s->replacing = true;
	if (s->client)
		kbox_client_fail_pending(s->client, cause); /* the running job's callback runs */
	kernel_end(s, false);
	s->replacing = false;
	snprintf(s->notice, sizeof s->notice,
	         "kernel restarted: %s; earlier state (variables, imports, loaded data) is lost", cause);
	utf8_cut(s->notice);
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

/* Has the kernel ended?  Then replace it (or stop the session). */
static int on_kernel_check(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	char cause[512];
	if (s->stopping || !s->sb || kbox_sandbox_alive(s->sb))
		return 0;
	if (s->starting) {
		/* the client's ready wait reports it (the alive hook) */
		return 0;
	}
	/* killed by us (an execution that would not stop) or died */
	bool requested = s->kill_cause[0] != '\0';
	snprintf(cause, sizeof cause, "%s", requested ? s->kill_cause : kbox_sandbox_cause(s->sb));
	s->kill_cause[0] = '\0';
	if (kernel_replace(s, cause, requested) < 0) {
		answer_pending(s, "kernel", s->stop_cause);
		s->stopping = true;
		kbox_loop_stop(loop);
	}
	return 0;
}

static void kernel_check_soon(sup_t *s)
{
	kbox_loop_add_timer(s->loop, 0, false, on_kernel_check, s, NULL);
}

/* ---- control requests ---- */

static json_t *status_json(sup_t *s)
{
	char started[32], last[32];
	long long mem = s->sb ? kbox_sandbox_memory(s->sb) : -1;
	long long now = kbox__now_ms();
	bool busy = s->running != NULL;
	size_t queued = 0;
	json_t *st;
	for (job_t *j = s->queue; j; j = j->next)
		queued++;
	kbox__iso8601(s->started_wall, 0, started);
	kbox__iso8601(s->last_activity_wall, 0, last);
	st = json_pack("{s:b, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:f, s:f, s:s, s:f, s:I, s:I, s:I, "
	               "s:I, s:I, s:s, s:s, s:I, s:I, s:I}",
	               "ok", 1, "re", "status", "state", busy ? "busy" : s->ready ? "idle" : "starting", "backend",
	               s->backend, "kernel", s->kernel, "pid", (json_int_t)getpid(), "kernel_pid",
	               (json_int_t)(s->sb ? kbox_sandbox_pid(s->sb) : 0), "started", started,
	               "uptime_s", (double)(now - s->started_ms) / 1000.0, "kernel_uptime_s",
	               s->ready ? (double)(now - s->kernel_started_ms) / 1000.0 : 0.0,
	               "last_activity", last, "idle_s",
	               busy ? 0.0 : (double)(now - s->last_activity_ms) / 1000.0, "executions",
	               (json_int_t)s->executions, "restarts", (json_int_t)s->restarts, "generation",
	               (json_int_t)s->generation, "memory_bytes", (json_int_t)mem, "ttl_ms",
	               (json_int_t)s->ttl_ms, "last_restart_cause", s->last_cause,
	               "connection_file", s->sb ? s->conn_path : "", "running_execs",
	               (json_int_t)(busy && s->running->kind == JOB_EXECUTE), "queued",
	               (json_int_t)queued, "output_waiting", (json_int_t)s->between_msgs);
	if (st && s->sb && *kbox_sandbox_limits(s->sb)) {
		json_object_set_new(st, "limits", json_string(kbox_sandbox_limits(s->sb)));
		json_object_set_new(st, "limits_missing",
		                    json_string(kbox_sandbox_limits_missing(s->sb)));
	}
	return st;
}

/* The value of duration field NAME of REQ in milliseconds: seconds as a
 * number.  DEF when absent; -1 when not a non-negative number. */
static long long req_ms(json_t *req, const char *name, long long def)
{
	json_t *v = json_object_get(req, name);
	double d;
	if (!v)
		return def;
	if (!json_is_number(v) || (d = json_number_value(v)) < 0 || d > 366.0 * 86400)
		return -1;
	return (long long)(d * 1000.0 + 0.5);
}

/* A new job of KIND for C's request REQ (borrowed), queued.  0, or -1
 * after an error reply. */
static int job_new(sup_t *s, conn_t *c, job_kind_t kind, json_t *req)
{
	job_t *j;
	json_t *code = json_object_get(req, "code"), *in = json_object_get(req, "input");
	long long wait_ms;

	if (c->job) {
		reply_error(c, job_kind_name(kind), "usage", "this connection already has a request running");
		return -1;
	}
	if (!json_is_string(code)) {
		reply_error(c, job_kind_name(kind), "usage", "\"code\" (a string) is required");
		return -1;
	}
	if (in && !json_is_array(in)) {
		reply_error(c, job_kind_name(kind), "usage", "\"input\" must be an array of strings");
		return -1;
	}
	if (!(j = calloc(1, sizeof *j))) {
		reply_error(c, job_kind_name(kind), "internal", "out of memory");
		return -1;
	}
	j->s = s;
	j->kind = kind;
	j->outputs_fd = -1;
	j->conn = c;
	j->req = json_incref(req);
	j->timeout_ms = req_ms(req, "timeout", 0);
	j->grace_ms = req_ms(req, "grace", GRACE_MS);
	wait_ms = req_ms(req, "wait", j->timeout_ms);
	{
		const char *why = NULL;
		json_t *mo = json_object_get(req, "max_output"), *ml = json_object_get(req, "max_lines");
		json_t *outputs = json_object_get(req, "outputs"), *prefix = json_object_get(req, "prefix");
		json_t *wt = json_object_get(req, "with_text");
		if (parse_fmt(json_object_get(req, "format"), &j->fmt) < 0)
			why = "\"format\" is one of text, text-live, json, ndjson";
		else if (wt && !json_is_boolean(wt))
			why = "\"with_text\" is true or false";
		else if (j->timeout_ms < 0 || j->grace_ms < 0 || wait_ms < 0)
			why = "\"timeout\", \"grace\" and \"wait\" are seconds (a number >= 0)";
		else if (mo && (!json_is_integer(mo) || json_integer_value(mo) < 64 ||
		                json_integer_value(mo) > KBOX_CAPTURE_MAX_BYTES_LIMIT))
			why = "\"max_output\" is a number of bytes from 64 to 16777216 (16 MiB)";
		else if (ml && (!json_is_integer(ml) || json_integer_value(ml) < 2))
			why = "\"max_lines\" is a number of lines, at least 2";
		else if (outputs && (!json_is_string(outputs) || json_string_value(outputs)[0] != '/'))
			why = "\"outputs\" is an absolute directory";
		else if (prefix && (!json_is_string(prefix) || strchr(json_string_value(prefix), '/') ||
		                    strlen(json_string_value(prefix)) > 32))
			why = "\"prefix\" is a string of at most 32 characters without '/'";
		j->with_text = json_is_true(wt);
		if (why) {
			reply_error(c, job_kind_name(kind), "usage", "%s", why);
			job_free(j);
			return -1;
		}
		if (outputs) {
			struct stat st;
			/* the directory the client opened and passed, else the path
			 * opened here without following a link at its end: either way
			 * held from now on, so that swapping the path for a link
			 * (kernel code that can write its parent) changes nothing */
			j->outputs_fd = c->passed_fd;
			c->passed_fd = -1;
			if (j->outputs_fd < 0)
				j->outputs_fd = open(json_string_value(outputs),
				                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			errno = 0;
			if (j->outputs_fd < 0 || fstat(j->outputs_fd, &st) < 0 || !S_ISDIR(st.st_mode) ||
			    faccessat(j->outputs_fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
				reply_error(c, job_kind_name(kind), "usage", "\"outputs\" %s: %s",
				            json_string_value(outputs),
				            errno == ELOOP ? "a symbolic link"
				            : errno        ? strerror(errno)
				                           : "not a directory");
				job_free(j);
				return -1;
			}
		}
	}
	if (j->grace_ms == 0)
		j->grace_ms = 1;
	if (in) {
		size_t n = json_array_size(in);
		if (!(j->inputs = calloc(n + 1, sizeof *j->inputs))) {
			reply_error(c, job_kind_name(kind), "internal", "out of memory");
			job_free(j);
			return -1;
		}
		for (size_t i = 0; i < n; i++) {
			const char *line = json_string_value(json_array_get(in, i));
			if (!line || !(j->inputs[i] = strdup(line))) {
				reply_error(c, job_kind_name(kind), "usage", "\"input\" must be an array of strings");
				j->n_inputs = i;
				job_free(j);
				return -1;
			}
			j->n_inputs = i + 1;
		}
	}
	/* how long it may wait for its turn: "wait", else its own time limit
	 * (the session runs one thing at a time) */
	if ((s->running || s->queue || !s->ready) && wait_ms > 0)
		j->wait_timer = kbox_loop_add_timer(s->loop, wait_ms > INT_MAX ? INT_MAX : (int)wait_ms,
		                                    false, on_wait_timeout, j, NULL);
	c->job = j;
	queue_add(s, j);
	touch(s);
	dispatch_soon(s);
	return 0;
}

static void on_interrupt_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err);

static void handle_interrupt(sup_t *s, conn_t *c)
{
	kbox_error_t err = {0};
	if (!s->ready) {
		reply_error(c, "interrupt", "state", "the kernel is starting: nothing to interrupt");
		return;
	}
	if (s->running && s->running->kind == JOB_EXECUTE)
		s->running->interrupt_asked = true;
	if (kbox_kspec_interrupt_mode(s->spec) == KBOX_INTERRUPT_SIGNAL) {
		if (kbox_sandbox_signal(s->sb, SIGINT, &err) < 0) {
			reply_error(c, "interrupt", "kernel", "interrupt failed: %s", err.msg);
			return;
		}
		sup_log(s, "interrupt", NULL);
		conn_send(c, json_pack("{s:b, s:s, s:b}", "ok", 1, "re", "interrupt", "running",
		                       s->running != NULL),
		          false);
		return;
	}
	{
		json_t *content = json_object();
		unsigned long *id = malloc(sizeof *id);
		if (!id) {
			reply_error(c, "interrupt", "internal", "out of memory");
			return;
		}
		*id = c->id;
		if (kbox_client_request_begin(s->client, KBOX_CH_CONTROL, "interrupt_request", &content,
		                              REQUEST_TIMEOUT_MS, on_interrupt_reply, id, &err) < 0) {
			free(id);
			reply_error(c, "interrupt", "kernel", "interrupt failed: %s", err.msg);
		}
	}
}

static void on_interrupt_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	unsigned long id = *(unsigned long *)arg;
	sup_t *s = the_sup;
	conn_t *c = NULL;
	free(arg);
	kbox_msg_destroy(&reply);
	for (size_t i = 0; s && i < s->n_conns; i++)
		if (s->conns[i]->id == id)
			c = s->conns[i];
	if (!c) /* it went away */
		return;
	if (err && err->code) {
		reply_error(c, "interrupt", "kernel", "interrupt failed: %s", err->msg);
		return;
	}
	sup_log(s, "interrupt", NULL);
	conn_send(c, json_pack("{s:b, s:s, s:b}", "ok", 1, "re", "interrupt", "running",
	                       s->running != NULL),
	          false);
}

static void handle_request(sup_t *s, conn_t *c, json_t *req)
{
	const char *op = json_string_value(json_object_get(req, "op"));

	if (!op) {
		reply_error(c, NULL, "usage", "request without \"op\"");
		return;
	}
	if (strcmp(op, "status") == 0)
		conn_send(c, status_json(s), false);
	else if (strcmp(op, "execute") == 0)
		job_new(s, c, JOB_EXECUTE, req);
	else if (strcmp(op, "complete") == 0)
		job_new(s, c, JOB_COMPLETE, req);
	else if (strcmp(op, "inspect") == 0)
		job_new(s, c, JOB_INSPECT, req);
	else if (strcmp(op, "interrupt") == 0)
		handle_interrupt(s, c);
	else if (strcmp(op, "restart") == 0) {
		const char *why = json_string_value(json_object_get(req, "cause"));
		char cause[512];
		client_cause(cause, sizeof cause, why, "restarted on request (kbox restart)");
		touch(s);
		if (kernel_replace(s, cause, true) < 0) {
			reply_error(c, "restart", "kernel", "%s", s->stop_cause);
			s->stopping = true;
			kbox_loop_stop(s->loop);
			return;
		}
		/* told once the new kernel is ready; the next execution gets the notice */
		c->pending = "restart";
	} else if (strcmp(op, "stop") == 0) {
		const char *why = json_string_value(json_object_get(req, "cause"));
		client_cause(s->stop_cause, sizeof s->stop_cause, why, "stopped on request (kbox stop)");
		s->stopping = true;
		s->stop_conn = c;
		kbox_loop_stop(s->loop);
	} else
		reply_error(c, op, "usage", "unknown op \"%s\"", op);
}

static void conn_close(sup_t *s, conn_t *c)
{
	size_t i;
	for (i = 0; i < s->n_conns && s->conns[i] != c; i++)
		;
	if (i == s->n_conns)
		return;
	s->conns[i] = s->conns[--s->n_conns];
	if (c->job) {
		job_t *j = c->job;
		j->conn = NULL;
		if (j == s->running && j->kind == JOB_EXECUTE && j->x && !s->stopping) {
			/* its client went away (killed, Ctrl-C): its code must not
			 * run on unseen, holding up every later execution */
			j->abandoned = true;
			if (kbox_exec_interrupt(j->x, j->grace_ms > INT_MAX ? INT_MAX : (int)j->grace_ms,
			                        "interrupted: its client went away", NULL) == 0)
				sup_log(s, "interrupt", json_pack("{s:s}", "cause",
				                                  "the client of an execution went away"));
		} else if (j != s->running) {
			queue_remove(s, j);
			job_free(j);
		}
	}
	if (c == s->stop_conn)
		s->stop_conn = NULL;
	kbox_loop_remove_fd(s->loop, c->fd);
	close(c->fd);
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	s->out_total -= c->out_len;
	free(c->in);
	free(c->out);
	free(c);
}

/* Read what a connection sent; handle complete lines. */
static int on_conn(kbox_loop_t *loop, void *arg)
{
	conn_t *c = arg;
	sup_t *s = c->s;
	(void)loop;
	for (;;) {
		char *nl;
		ssize_t n;
		if (c->in_len == c->in_cap) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 4096;
			char *nb;
			if (cap > KBOX_CTL_REQUEST_MAX) {
				reply_error(c, NULL, "usage", "request longer than %d bytes", KBOX_CTL_REQUEST_MAX);
				conn_flush(c);
				conn_close(s, c);
				return 0;
			}
			if (!(nb = realloc(c->in, cap))) {
				conn_close(s, c);
				return 0;
			}
			c->in = nb;
			c->in_cap = cap;
		}
		{
			/* a descriptor may come with a request (an "outputs"
			 * directory): the last one is kept for the next request */
			union {
				struct cmsghdr h;
				char buf[CMSG_SPACE(4 * sizeof(int))];
			} u;
			struct iovec iov = {c->in + c->in_len, c->in_cap - c->in_len};
			struct msghdr mh = {0};
			mh.msg_iov = &iov;
			mh.msg_iovlen = 1;
			mh.msg_control = u.buf;
			mh.msg_controllen = sizeof u.buf;
			n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
			for (struct cmsghdr *ch = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; ch;
			     ch = CMSG_NXTHDR(&mh, ch)) {
				if (ch->cmsg_level != SOL_SOCKET || ch->cmsg_type != SCM_RIGHTS)
					continue;
				for (size_t k = 0; k < (ch->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
					int pfd;
					memcpy(&pfd, CMSG_DATA(ch) + k * sizeof(int), sizeof pfd);
					if (c->passed_fd >= 0)
						close(c->passed_fd);
					c->passed_fd = pfd;
				}
			}
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			conn_close(s, c);
			return 0;
		}
		c->in_len += (size_t)n;
		while (!s->stopping && (nl = memchr(c->in, '\n', c->in_len))) {
			size_t line = (size_t)(nl - c->in);
			json_error_t jerr;
			json_t *req = json_loadb(c->in, line, 0, &jerr);
			memmove(c->in, nl + 1, c->in_len - line - 1);
			c->in_len -= line + 1;
			if (!req)
				reply_error(c, NULL, "usage", "not valid JSON: %s", jerr.text);
			else if (!json_is_object(req))
				reply_error(c, NULL, "usage", "not a JSON object");
			else
				handle_request(s, c, req);
			json_decref(req);
		}
		if (s->stopping)
			return 0;
	}
}

static int on_accept(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		conn_t *c;
		if (fd < 0)
			return 0;
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
			json_t *e = json_pack("{s:b, s:s, s:s}", "ok", 0, "kind", "busy", "error",
			                      "too many control connections");
			kbox_ctl_send(fd, e, NULL);
			json_decref(e);
			close(fd);
			continue;
		}
		if (!(c = calloc(1, sizeof *c))) {
			close(fd);
			continue;
		}
		c->s = s;
		c->id = ++s->conn_serial;
		c->fd = fd;
		c->passed_fd = -1;
		s->conns[s->n_conns++] = c;
		if (kbox_loop_add_fd(loop, fd, on_conn, c, NULL) < 0)
			conn_close(s, c);
	}
}

/* The process that owns this session (kbox run) ended. */
static int on_owner_gone(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	kbox_loop_remove_fd(loop, s->owner_fd);
	if (!s->stopping) {
		snprintf(s->stop_cause, sizeof s->stop_cause, "its owner (pid %ld) ended", s->owner_pid);
		s->stopping = true;
		kbox_loop_stop(loop);
	}
	return 0;
}

/* Watch the owner's end through a pidfd.  0, or -1 with ERR. */
static int watch_owner(sup_t *s, kbox_error_t *err)
{
	if (s->owner_pid <= 0)
		return 0;
	s->owner_fd = (int)syscall(SYS_pidfd_open, (pid_t)s->owner_pid, 0);
	if (s->owner_fd < 0)
		return kbox__err_sys(err, "cannot watch the session's owner (pid %ld)", s->owner_pid);
	fcntl(s->owner_fd, F_SETFD, FD_CLOEXEC);
	return kbox_loop_add_fd(s->loop, s->owner_fd, on_owner_gone, s, err);
}

static int on_signal(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	struct signalfd_siginfo si;
	while (read(s->sig_fd, &si, sizeof si) == sizeof si) {
		if (si.ssi_signo == SIGCHLD)
			kernel_check_soon(s);
		else if (!s->stopping) {
			const char *abbrev = sigabbrev_np((int)si.ssi_signo);
			snprintf(s->stop_cause, sizeof s->stop_cause, "the supervisor received SIG%s",
			         abbrev ? abbrev : "?");
			s->stopping = true;
			kbox_loop_stop(loop);
		}
	}
	return 0;
}

/* The idle TTL, checked each second (and the liveness of the kernel,
 * in case a SIGCHLD was missed). */
static int on_tick(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	if (s->sb && !s->starting && !kbox_sandbox_alive(s->sb))
		on_kernel_check(loop, s);
	/* idle: a kernel that is ready, with nothing to do (a starting kernel
	 * is not idle, however long it takes) */
	if (s->ttl_ms > 0 && s->ready && !s->running && !s->queue && !s->stopping) {
		long long idle = kbox__now_ms() - s->last_activity_ms;
		if (idle >= s->ttl_ms) {
			char t[32];
			kbox__fmt_ms(t, sizeof t, (int)(s->ttl_ms > 2000000000 ? 2000000000 : s->ttl_ms));
			snprintf(s->stop_cause, sizeof s->stop_cause,
			         "the session was idle for %s (its TTL) and stopped", t);
			s->stopping = true;
			kbox_loop_stop(loop);
		}
	}
	return 0;
}

/* ---- the supervisor's memory ---- */

/* This process's resident memory in bytes, -1 when unknown. */
static long long self_rss(void)
{
	static int fd = -2;
	char buf[128];
	long long size, resident;
	ssize_t n;
	if (fd == -2)
		fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (n = pread(fd, buf, sizeof buf - 1, 0)) <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%lld %lld", &size, &resident) != 2)
		return -1;
	return resident * sysconf(_SC_PAGESIZE);
}

/* Over MEMORY_HIGH: what the kernel sent is what grew (libzmq takes in a
 * message of many frames whole before anyone sees it), so the kernel is
 * stopped and replaced, and its connection's buffers go with it. */
static int on_memory_check(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	long long rss = self_rss();
	char cause[256], have[32], bound[32];
	if (rss >= 0 && rss < MEMORY_HIGH && s->client) {
		bool shed = s->shedding ? rss >= MEMORY_SHED / 2 : rss >= MEMORY_SHED;
		if (shed != s->shedding) {
			s->shedding = shed;
			kbox_client_set_shedding(s->client, shed);
			sup_log(s, shed ? "shedding" : "shedding-end",
			        json_pack("{s:I}", "rss", (json_int_t)rss));
		}
		if (!shed && s->was_shedding) {
			s->was_shedding = false;
			malloc_trim(0);
		}
		s->was_shedding |= shed;
	}
	if (rss < MEMORY_HIGH || !s->sb || s->stopping)
		return 0;
	kbox_fmt_size(have, sizeof have, rss);
	kbox_fmt_size(bound, sizeof bound, MEMORY_HIGH);
	snprintf(cause, sizeof cause,
	         "it sent more than its supervisor may hold (%s in memory, over the bound of %s), "
	         "so the kernel was killed",
	         have, bound);
	sup_log(s, "memory", json_pack("{s:I, s:I}", "rss", (json_int_t)rss, "bound",
	                               (json_int_t)MEMORY_HIGH));
	kbox_sandbox_signal(s->sb, SIGKILL, NULL);
	if (kernel_replace(s, cause, false) < 0) {
		answer_pending(s, "kernel", s->stop_cause);
		s->stopping = true;
		kbox_loop_stop(loop);
	}
	malloc_trim(0);
	return 0;
}

/* The supervisor's memory bound: a cgroup of its own with MEMORY_MAX when
 * one can be made (moving in costs a few ms, so this runs while the
 * first kernel starts), and the check of MEMORY_HIGH.  Sanitizer builds,
 * whose memory is several times larger, have no cgroup, and bounds
 * MEMORY_SCALE times higher. */
static void memory_bound(sup_t *s)
{
	const char *name = json_string_value(json_object_get(s->config, "name"));
	char cg[160], why[512] = "no cgroup in a sanitizer build", high[32], max[32];
	snprintf(cg, sizeof cg, "kbox-%s-%ld-supervisor", name ? name : "sandbox", (long)getpid());
	if (MEMORY_SCALE == 1)
		s->cg = kbox__cgroup_new(cg, KBOX_CG_MEMORY, MEMORY_MAX, 0, 0, why, sizeof why);
	if (s->cg && kbox__cgroup_enter(s->cg) < 0) {
		snprintf(why, sizeof why, "cannot move into its cgroup: %s", strerror(errno));
		kbox__cgroup_leave(s->cg);
		kbox__cgroup_destroy(&s->cg);
	}
	kbox_fmt_size(high, sizeof high, MEMORY_HIGH);
	kbox_fmt_size(max, sizeof max, MEMORY_MAX);
	sup_log(s, "supervisor-memory",
	        json_pack("{s:s, s:s?, s:s?}", "kernel_stopped_over", high, "killed_over",
	                  s->cg ? max : NULL, "no_cgroup", s->cg ? NULL : why));
	kbox_loop_add_timer(s->loop, MEMORY_CHECK_MS, true, on_memory_check, s, NULL);
}

/* ---- setup ---- */

/* Where a sandboxed kernel keeps its configuration: in its /tmp, new with
 * each kernel, not in its home (see load_config); R's profile, Renviron
 * and user library too. */
static const char *const clean_home[] = {
    "PYTHONNOUSERSITE=1",           "IPYTHONDIR=/tmp/.ipython",
    "JUPYTER_CONFIG_DIR=/tmp/.jupyter", "XDG_CONFIG_HOME=/tmp/.config",
    "R_PROFILE_USER=/tmp/.Rprofile",  "R_ENVIRON_USER=/tmp/.Renviron",
    "R_LIBS_USER=/tmp/.R-library"};
/* ...and a module the kernel left in its workspace (its working directory)
 * is not what starts the next one: `python3 -m ipykernel_launcher` would
 * take /workspace/ipykernel_launcher.py first (the kernel then puts the
 * working directory on its path itself, for the code's own imports); R
 * would read a .Rprofile and .Renviron there before the home's */
static const char *const safe_path[] = {"PYTHONSAFEPATH=1", "R_PROFILE_USER=/home/kbox/.Rprofile",
                                        "R_ENVIRON_USER=/home/kbox/.Renviron"};

static int load_config(sup_t *s, kbox_error_t *err)
{
	json_t *env;
	const char *ws;
	size_t i, n, k;
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
	s->outputs_quota = json_integer_value(json_object_get(s->config, "outputs_quota")) > 0
	                       ? (unsigned long long)json_integer_value(
	                             json_object_get(s->config, "outputs_quota"))
	                       : KBOX_OUTPUTS_QUOTA;
	s->sbo.rootfs = json_string_value(json_object_get(s->config, "rootfs"));
	s->sbo.name = json_string_value(json_object_get(s->config, "name"));
	s->ephemeral = json_is_true(json_object_get(s->config, "ephemeral"));
	s->owner_pid = (long)json_integer_value(json_object_get(s->config, "owner_pid"));
	env = json_object_get(s->config, "env");
	n = json_is_array(env) ? json_array_size(env) : 0;
	if (!(s->env = calloc(n + sizeof clean_home / sizeof *clean_home +
	                          sizeof safe_path / sizeof *safe_path + 1,
	                      sizeof *s->env)))
		return kbox__err(err, KBOX_E_NOMEM, "out of memory");
	/* a sandboxed kernel's home outlives it: what code left there (IPython
	 * startup files and configuration, a .pth in the user site) does not
	 * run in the next kernel, unless asked (--home-config on); the
	 * session's own --env comes after, and wins */
	k = 0;
	for (i = 0; kbox_backend_sandboxed(s->backend) && i < sizeof safe_path / sizeof *safe_path;
	     i++)
		s->env[k++] = (char *)safe_path[i];
	if (kbox_backend_sandboxed(s->backend) &&
	    !json_is_true(json_object_get(s->config, "home_config")))
		for (i = 0; i < sizeof clean_home / sizeof *clean_home; i++)
			s->env[k++] = (char *)clean_home[i];
	for (i = 0; i < n; i++)
		s->env[k++] = (char *)json_string_value(json_array_get(env, i));
	s->env[k] = NULL;
	s->sbo.env = (const char *const *)s->env;
	snprintf(s->runtime_dir, sizeof s->runtime_dir, "%s/run", s->dir);
	snprintf(s->sockets_dir, sizeof s->sockets_dir, "%s/run/sandbox", s->dir);
	/* kbox run --workspace names a host directory */
	ws = json_string_value(json_object_get(s->config, "workspace"));
	if (ws && json_is_integer(json_object_get(s->config, "workspace_ino"))) {
		s->sbo.ws_check = true;
		s->sbo.ws_dev = (dev_t)json_integer_value(json_object_get(s->config, "workspace_dev"));
		s->sbo.ws_ino = (ino_t)json_integer_value(json_object_get(s->config, "workspace_ino"));
	}
	if (ws)
		snprintf(s->workspace, sizeof s->workspace, "%s", ws);
	else
		snprintf(s->workspace, sizeof s->workspace, "%s/workspace", s->dir);
	snprintf(s->outputs, sizeof s->outputs, "%s/outputs", s->dir);
	snprintf(s->log_path, sizeof s->log_path, "%s/kernel.log", s->dir);
	snprintf(s->home, sizeof s->home, "%s/home", s->dir);
	/* the sandbox's /home/kbox: IPython's history, matplotlib's font
	 * cache; kept across kernel restarts, like the workspace */
	if (mkdir(s->home, 0700) < 0 && errno != EEXIST)
		return kbox__err_sys(err, "cannot create %s", s->home);
	if (mkdir(s->runtime_dir, 0700) < 0 && errno != EEXIST)
		return kbox__err_sys(err, "cannot create %s", s->runtime_dir);
	s->sbo.home = s->home;
	s->sbo.runtime_dir = s->sockets_dir;
	s->sbo.workspace = s->workspace;
	s->sbo.log_fd = -1;
	if (!(s->klog = kbox__kernel_log_new(s->log_path, KBOX_KERNEL_LOG_MAX)))
		return kbox__err(err, KBOX_E_NOMEM, "out of memory");
	if (!kbox_backend_exists(s->backend))
		return kbox__err(err, KBOX_E_NOTFOUND, "unknown backend \"%s\"", s->backend);
	if (!(s->spec = kbox_kspec_find(s->kernel, err)))
		return -1;
	/* under root a sandbox is an unprivileged user's, never root's: its
	 * directories are that user's (an unsandboxed kernel stays ours) */
	if (kbox_backend_sandboxed(s->backend)) {
		if (kbox_sandbox_identity(&s->id, err) < 0 || kbox_session_share(s->dir, &s->id, err) < 0)
			return -1;
		if (ws && kbox_sandbox_reachable(&s->id, ws, err) < 0)
			return -1;
		s->sbo.drop_ids = s->id.drop;
		s->sbo.uid = s->id.uid;
		s->sbo.gid = s->id.gid;
	} else {
		s->id.uid = geteuid();
		s->id.gid = getegid();
	}
	return 0;
}

/* Take the supervisor lock and write our pid. */
static int lock_pid(sup_t *s, kbox_error_t *err)
{
	char path[PATH_MAX], buf[32];
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
	kbox__empty_dir(s->sockets_dir);
}

static int listen_control(sup_t *s, kbox_error_t *err)
{
	s->listen_fd = kbox_ctl_listen(s->dir, err); /* we hold the supervisor lock */
	return s->listen_fd < 0 ? -1 : 0;
}

static void shutdown_session(sup_t *s)
{
	char path[PATH_MAX];
	/* no new clients while stopping: they see no supervisor and wait for
	 * the lock to go (kbox start) instead of talking to one that leaves */
	snprintf(path, sizeof path, "%s/control.sock", s->dir);
	if (s->listen_fd >= 0) {
		kbox_loop_remove_fd(s->loop, s->listen_fd);
		unlink(path);
		close(s->listen_fd);
		s->listen_fd = -1;
	}
	/* what runs or waits ends with the session */
	if (s->client)
		kbox_client_fail_pending(s->client, s->stop_cause);
	while (s->queue) {
		job_t *j = s->queue;
		s->queue = j->next;
		if (j->conn) {
			reply_error(j->conn, job_op(j), "stopped", "the session stopped: %s", s->stop_cause);
			j->conn->job = NULL;
		}
		job_free(j);
	}
	answer_pending(s, "stopped", s->stop_cause);
	kernel_end(s, true);
	kbox_capture_destroy(&s->between);
	write_file(s->dir, "last-stop", s->stop_cause);
	sup_log(s, "stop", json_pack("{s:s, s:I}", "cause", s->stop_cause, "executions",
	                             (json_int_t)s->executions));
	snprintf(path, sizeof path, "%s/supervisor.pid", s->dir);
	unlink(path); /* a clean stop: kbox ls shows "stopped", not "dead" */
	if (s->stop_conn)
		conn_send(s->stop_conn, json_pack("{s:b, s:s}", "ok", 1, "re", "stop"), false);
	/* the last replies go out before the connections close */
	for (size_t i = 0; i < s->n_conns; i++) {
		conn_t *c = s->conns[i];
		long long deadline = kbox__now_ms() + 1000;
		while (c->out_len && kbox__now_ms() < deadline && conn_flush(c))
			usleep(1000);
	}
}

int kbox_supervisor_run(const char *dir, int ready_fd)
{
	sup_t s = {0};
	kbox_error_t err = {0};
	sigset_t mask;
	char prev[512], gen[32];
	int status = 0;

	the_sup = &s;
	s.dir = dir;
	s.listen_fd = s.sig_fd = s.pid_fd = s.owner_fd = -1;
	s.ready_fd = ready_fd;
	s.started_ms = kbox__now_ms();
	s.started_wall = kbox__now();
	s.last_activity_wall = s.started_wall;
	s.last_activity_ms = s.started_ms;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* large blocks (messages, their text) straight from and back to the
	 * system, not kept in the heap: the memory bound reads resident
	 * memory, which then follows what is held */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	s.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	if (s.sig_fd < 0 || !(s.loop = kbox_loop_new(&err)) || lock_pid(&s, &err) < 0 ||
	    load_config(&s, &err) < 0 || listen_control(&s, &err) < 0 ||
	    kbox_loop_add_fd(s.loop, s.sig_fd, on_signal, &s, &err) < 0 ||
	    kbox_loop_add_fd(s.loop, s.listen_fd, on_accept, &s, &err) < 0 ||
	    watch_owner(&s, &err) < 0 ||
	    kbox_loop_add_timer(s.loop, 1000, true, on_tick, &s, &err) < 0) {
		if (!err.msg[0])
			kbox__err_sys(&err, "signalfd");
		sup_log(&s, "error", json_pack("{s:s}", "error", err.msg));
		report_ready(&s, json_pack("{s:b, s:s}", "ok", 0, "error", err.msg));
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
		char path[PATH_MAX + 16];
		snprintf(path, sizeof path, "%s/last-stop", dir);
		unlink(path);
	}
	clean_runtime_dir(&s);
	if (s.prev_pid > 0 && s.prev_pid != getpid()) {
		/* was this session's previous supervisor killed by its own
		 * memory limit? */
		const char *name = json_string_value(json_object_get(s.config, "name"));
		char cg[160];
		snprintf(cg, sizeof cg, "kbox-%s-%ld-supervisor", name ? name : "sandbox", s.prev_pid);
		if (!prev[0] && kbox__cgroup_oom_kills_named(cg) > 0) {
			char max[32];
			kbox_fmt_size(max, sizeof max, MEMORY_MAX);
			snprintf(s.notice, sizeof s.notice,
			         "kernel restarted: the session's previous supervisor was killed for "
			         "holding more than %s of its kernel's output; earlier state (variables, "
			         "imports, loaded data) is lost; files in the workspace are kept",
			         max);
			snprintf(s.last_cause, sizeof s.last_cause,
			         "its supervisor went over its memory limit (%s)", max);
		}
	}
	{
		/* the cgroups a previous supervisor of this session left (killed,
		 * it could not remove them; it is gone: we hold the lock), by the
		 * paths it recorded, never by name; then ours, recorded alike */
		char path[PATH_MAX + 16];
		snprintf(path, sizeof path, "%s/cgroups", dir);
		kbox__cgroup_reap(path);
		kbox__cgroup_record(path);
	}
	if (kernel_start(&s, &err) < 0) {
		snprintf(s.stop_cause, sizeof s.stop_cause, "the kernel could not start: %s", err.msg);
		report_ready(&s, json_pack("{s:b, s:s}", "ok", 0, "error", err.msg));
		shutdown_session(&s);
		status = 1;
		goto out;
	}
	memory_bound(&s);
	kbox_loop_run(s.loop);
	if (!s.stopping)
		snprintf(s.stop_cause, sizeof s.stop_cause, "the supervisor's event loop failed");
	status = s.start_failed ? 1 : 0;
	shutdown_session(&s);
out:
	while (s.n_conns)
		conn_close(&s, s.conns[s.n_conns - 1]);
	if (s.listen_fd >= 0)
		close(s.listen_fd);
	if (s.sig_fd >= 0)
		close(s.sig_fd);
	if (s.pid_fd >= 0)
		close(s.pid_fd);
	if (s.owner_fd >= 0)
		close(s.owner_fd);
	kbox__kernel_log_destroy(&s.klog);
	if (s.ephemeral && s.config) {
		/* kbox run's session: nothing of it stays, its private
		 * workspace included (one given with --workspace is the
		 * caller's directory, elsewhere; its own cgroup, removed below,
		 * needs no record after it) */
		kbox__cgroup_record(NULL);
		kbox__empty_dir(dir);
		rmdir(dir);
	}
	if (s.cg) {
		/* out of its own cgroup first, or it could not be removed */
		kbox__cgroup_leave(s.cg);
		kbox__cgroup_destroy(&s.cg);
	}
	kbox_loop_destroy(&s.loop);
	the_sup = NULL;
	kbox_kspec_destroy(&s.spec);
	free(s.env);
	json_decref(s.config);
	return status;
}
