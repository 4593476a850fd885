/* src/runtime/supervisor_ctl.c — the supervisor's control socket
 * (supervisor_int.h): connections, their lines in and out, and the op
 * table (kbox-protocol(7)): status, execute, complete, inspect, interrupt,
 * restart, stop, session. */
#include "runtime/supervisor_int.h"
#include "engine/engine_proto.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- sending to clients ---- */

/* A connection's buffer of unsent lines bigger than this is freed once
 * it is empty. */
#define OUT_KEEP_MAX (1 << 20)

bool sup_conn_flush(conn_t *c)
{
	size_t off = 0;
	while (off < c->out_len) {
		ssize_t w = send(c->fd, c->out + off, c->out_len - off,
		                 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w < 0)
			return false;
		off += (size_t)w;
	}
	if (!off)
		return true; /* nothing sent: nothing to move */
	memmove(c->out, c->out + off, c->out_len - off);
	c->out_len -= off;
	c->s->out_total -= off;
	c->active_ms = c->out_since = kx_now_ms(); /* the client reads */
	if (!c->out_len && c->out_cap > OUT_KEEP_MAX) {
		/* a long reply went: its buffer goes too, not held for the
		 * connection's life beside the kernel's data */
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
		sup_trim();
	}
	return true;
}

/* Send what waits on each connection; the timer ends when nothing does. */
static int on_flush(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	bool pending = false;
	for (size_t i = s->n_conns; i-- > 0;) {
		conn_t *c = s->conns[i];
		if (!c->out_len)
			continue;
		if (!sup_conn_flush(c)) {
			sup_conn_close(s, c);
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

/* Cut C off, for it does not read what it is sent (WHY, for the log;
 * LINE the bytes of the line that did not fit): what waits for it is let
 * go now, nothing more is queued for it, and its read handler sees the
 * end it is shut down to and closes it (which counts as its going away). */
static void conn_cut(sup_t *s, conn_t *c, const char *why, size_t line)
{
	sup_log(s, "client-cut-off",
	        json_pack("{s:s, s:I, s:I, s:I}", "why", why, "waiting", (json_int_t)c->out_len,
	                  "line", (json_int_t)line, "all_waiting", (json_int_t)s->out_total));
	shutdown(c->fd, SHUT_RDWR);
	s->out_total -= c->out_len;
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_cap = 0;
	c->cut = true;
	sup_trim();
}

/* The connection that has read nothing of what waits for it for the
 * longest time, or NULL when nothing waits anywhere. */
static conn_t *stalest_reader(sup_t *s)
{
	conn_t *oldest = NULL;
	for (size_t i = 0; i < s->n_conns; i++) {
		conn_t *c = s->conns[i];
		if (c->out_len && (!oldest || c->out_since < oldest->out_since))
			oldest = c;
	}
	return oldest;
}

/* Make room for a reply of LEN bytes to C within KR_CTL_OUT_TOTAL_MAX:
 * the connections that read nothing for the longest time are cut off
 * until it fits (or nothing else waits: one line alone may be longer).
 * false when C itself was the one cut off. */
static bool room_for_reply(sup_t *s, conn_t *c, size_t len)
{
	conn_t *v;
	while (s->out_total + len > KR_CTL_OUT_TOTAL_MAX && (v = stalest_reader(s))) {
		conn_cut(s, v, "more waited for all clients than the supervisor holds", len);
		if (v == c)
			return false;
	}
	return true;
}

void sup_conn_send(conn_t *c, json_t *j, bool event)
{
	sup_t *s = c->s;
	char *line, *nb;
	size_t len;
	if (!j)
		return;
	if (c->cut) {
		json_decref(j);
		return;
	}
	line = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9));
	json_decref(j);
	if (!line)
		return;
	len = strlen(line) + 1; /* with its newline */
	if (event &&
	    (c->out_len + len > KR_CTL_CONN_OUT_MAX || s->out_total + len > KR_CTL_OUT_TOTAL_MAX)) {
		c->events_dropped++;
		free(line);
		return;
	}
	if (!event && c->out_len && c->out_len + len > KR_CTL_CONN_OUT_MAX) {
		/* a client that does not read its replies and asks for more */
		conn_cut(s, c, "more waited for this client than one connection holds", len);
		free(line);
		return;
	}
	if (!event && !room_for_reply(s, c, len)) {
		free(line);
		return;
	}
	if (!c->out_len)
		c->out_since = kx_now_ms();
	if (!c->out_len && len > KR_CTL_CONN_OUT_MAX) {
		/* a long line alone: it is the backlog, not a copy of it */
		free(c->out);
		c->out = line;
		c->out_cap = len;
		line = NULL;
	} else if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + len)
			cap *= 2;
		if (!(nb = realloc(c->out, cap))) {
			free(line);
			return;
		}
		c->out = nb;
		c->out_cap = cap;
	}
	if (line)
		memcpy(c->out + c->out_len, line, len - 1);
	c->out[c->out_len + len - 1] = '\n';
	c->out_len += len;
	s->out_total += len;
	free(line);
	sup_conn_flush(c);
	if (c->out_len && !s->flush_timer)
		s->flush_timer = kbox_loop_add_timer(s->loop, FLUSH_MS, true, on_flush, s, NULL);
}

void sup_reply_error(conn_t *c, const char *re, kr_ctl_err_t kind, const char *fmt, ...)
{
	char msg[KR_CTL_ERROR_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	sup_utf8_cut(msg);
	sup_conn_send(c,
	              json_pack("{s:b, s:s*, s:s, s:s}", "ok", 0, "re", re, "kind",
	                        kr_ctl_err_name(kind), "error", msg),
	              false);
}

void sup_answer_pending(sup_t *s, kr_ctl_err_t kind, const char *error)
{
	for (size_t i = 0; i < s->n_conns; i++) {
		conn_t *c = s->conns[i];
		const char *re = kr_ctl_op_name(c->pending);
		if (!re)
			continue;
		if (error)
			sup_reply_error(c, re, kind, "%s", error);
		else
			sup_conn_send(c,
			              json_pack("{s:b, s:s, s:I}", "ok", 1, "re", re, "generation",
			                        (json_int_t)s->generation),
			              false);
		c->pending = KR_CTL_OP_NONE;
	}
}

/* ---- the ops ---- */

/* A cause a client gave (restart, stop) as it is shown to a model: at
 * most KR_CTL_CAUSE_MAX bytes, on one line, without control characters,
 * into BUF. */
static void client_cause(char *buf, size_t size, const char *given, const char *def)
{
	snprintf(buf, size < KR_CTL_CAUSE_MAX + 1 ? size : KR_CTL_CAUSE_MAX + 1, "%s",
	         given && *given ? given : def);
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	sup_utf8_cut(buf);
}

static json_t *status_json(sup_t *s)
{
	char started[32], last[32];
	long long mem = s->sb ? kr_sandbox_memory(s->sb) : -1;
	long long now = kx_now_ms();
	bool busy = s->running != NULL;
	size_t queued = 0;
	json_t *st;
	for (job_t *j = s->queue; j; j = j->next)
		queued++;
	kx_iso8601(s->started_wall, 0, started);
	kx_iso8601(s->last_activity_wall, 0, last);
	st = json_pack(
	        "{s:b, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:f, s:f, s:s, s:f, s:I, s:I, s:I, "
	        "s:I, s:I, s:s, s:s, s:I, s:I, s:I}",
	        "ok", 1, "re", "status", "state",
	        busy       ? "busy"
	        : s->ready ? "idle"
	                   : "starting",
	        "backend", s->backend, "kernel", s->kernel, "pid", (json_int_t)getpid(),
	        "kernel_pid", (json_int_t)(s->sb ? kr_sandbox_pid(s->sb) : 0), "started", started,
	        "uptime_s", (double)(now - s->started_ms) / 1000.0, "kernel_uptime_s",
	        s->ready ? (double)(now - s->kernel_started_ms) / 1000.0 : 0.0, "last_activity",
	        last, "idle_s", busy ? 0.0 : (double)(now - s->last_activity_ms) / 1000.0,
	        "executions", (json_int_t)s->executions, "restarts", (json_int_t)s->restarts,
	        "generation", (json_int_t)s->generation, "memory_bytes", (json_int_t)mem, "ttl_ms",
	        (json_int_t)s->ttl_ms, "last_restart_cause", s->last_cause, "connection_file", "",
	        "running_execs", (json_int_t)(busy && s->running->op == KR_CTL_OP_EXECUTE),
	        "queued", (json_int_t)queued, "output_waiting", (json_int_t)s->between_msgs);
	/* who the sandbox is on the host (kbox(7), Identity) */
	if (st && kr_backend_sandboxed(s->backend))
		json_object_set_new(st, "sandbox_uid", json_integer((json_int_t)s->id.uid));
	/* a docker session's container, its image and the engine's socket */
	if (st && s->sb && s->sb->container[0]) {
		const char *e = s->sbo.engine && *s->sbo.engine ? s->sbo.engine : KE_DEFAULT_SOCKET;
		if (strncmp(e, "unix://", 7) == 0)
			e += 7;
		json_object_set_new(st, "container", json_string(s->sb->container));
		json_object_set_new(st, "image",
		                    json_string(s->sbo.image && *s->sbo.image ? s->sbo.image
		                                                              : KE_IMAGE_DEFAULT));
		json_object_set_new(st, "engine", json_string(e));
	}
	/* a gateway session's server, from its start on (while its kernel
	 * starts, too), its directory there once made, and its remote kernel */
	if (st && strcmp(s->backend, "gateway") == 0 && s->sbo.gateway_url) {
		char rdir[sizeof s->sb->remote_dir];
		json_object_set_new(st, "server", json_string(s->sbo.gateway_url));
		if (s->sb && s->sb->remote_dir[0])
			json_object_set_new(st, "remote_dir", json_string(s->sb->remote_dir));
		else if (kr_gateway_dir_recorded(s->at, rdir, sizeof rdir) == 0)
			json_object_set_new(st, "remote_dir", json_string(rdir)); /* the last one */
		if (s->sb && kr_sandbox_alive(s->sb) && s->sb->remote_id[0])
			json_object_set_new(st, "remote_kernel", json_string(s->sb->remote_id));
	}
	if (st && s->front)
		json_object_set_new(st, "relay", sup_relay_status(s));
	if (st && s->sb && *kr_sandbox_limits(s->sb)) {
		json_object_set_new(st, "limits", json_string(kr_sandbox_limits(s->sb)));
		json_object_set_new(st, "limits_missing",
		                    json_string(kr_sandbox_limits_missing(s->sb)));
	}
	return st;
}

static void op_status(sup_t *s, conn_t *c, json_t *req)
{
	(void)req;
	sup_conn_send(c, status_json(s), false);
}

/* Whether C has a job already: then OP is refused. */
static bool has_job(conn_t *c, kr_ctl_op_t op)
{
	if (c->job)
		sup_reply_error(c, kr_ctl_op_name(op), KR_CTL_ERR_USAGE,
		                "this connection already has a request running");
	return c->job != NULL;
}

/* A request of OP that could not be read: ERR says why. */
static void refuse(conn_t *c, kr_ctl_op_t op, const kbox_error_t *err)
{
	sup_reply_error(c, kr_ctl_op_name(op),
	                err->code == KBOX_E_NOMEM ? KR_CTL_ERR_INTERNAL : KR_CTL_ERR_USAGE, "%s",
	                err->msg);
}

static void op_execute(sup_t *s, conn_t *c, json_t *req)
{
	kr_ctl_exec_t e;
	kbox_error_t err = {0};
	if (has_job(c, KR_CTL_OP_EXECUTE))
		return;
	if (kr_ctl_exec_parse(req, &e, &err) < 0) {
		refuse(c, KR_CTL_OP_EXECUTE, &err);
		return;
	}
	sup_job_new(s, c, KR_CTL_OP_EXECUTE, req, &e, -1, 0);
}

/* complete or inspect (OP): a job, with the members of execute checked. */
static void op_introspect(sup_t *s, conn_t *c, json_t *req, kr_ctl_op_t op)
{
	kr_ctl_introspect_t q;
	kbox_error_t err = {0};
	if (has_job(c, op))
		return;
	if (kr_ctl_introspect_parse(req, op, &q, &err) < 0) {
		refuse(c, op, &err);
		return;
	}
	sup_job_new(s, c, op, req, &q.exec, q.cursor_pos, q.detail_level);
}

static void op_complete(sup_t *s, conn_t *c, json_t *req)
{
	op_introspect(s, c, req, KR_CTL_OP_COMPLETE);
}

static void op_inspect(sup_t *s, conn_t *c, json_t *req)
{
	op_introspect(s, c, req, KR_CTL_OP_INSPECT);
}

/* The interrupt's reply to C, with whether an execution runs. */
static void interrupt_done(sup_t *s, conn_t *c)
{
	sup_log(s, "interrupt", NULL);
	sup_conn_send(c,
	              json_pack("{s:b, s:s, s:b}", "ok", 1, "re", "interrupt", "running",
	                        s->running != NULL),
	              false);
}

/* Who asked for a message-mode interrupt: the connection, by its number
 * (one opened since must not get the reply). */
typedef struct {
	sup_t *s;
	unsigned long conn_id;
} interrupt_ask_t;

static void on_interrupt_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	interrupt_ask_t ask = *(interrupt_ask_t *)arg;
	conn_t *c = NULL;
	free(arg);
	kbox_msg_destroy(&reply);
	for (size_t i = 0; i < ask.s->n_conns; i++)
		if (ask.s->conns[i]->id == ask.conn_id)
			c = ask.s->conns[i];
	if (!c) /* it went away */
		return;
	c->asking--;
	if (err && err->code) {
		sup_reply_error(c, "interrupt", KR_CTL_ERR_KERNEL, "interrupt failed: %s",
		                err->msg);
		return;
	}
	interrupt_done(ask.s, c);
}

static void op_interrupt(sup_t *s, conn_t *c, json_t *req)
{
	kbox_error_t err = {0};
	json_t *content;
	interrupt_ask_t *ask;
	if (!s->ready) {
		sup_reply_error(c, "interrupt", KR_CTL_ERR_STATE,
		                "the kernel is starting: nothing to interrupt");
		return;
	}
	if (s->running && s->running->op == KR_CTL_OP_EXECUTE) {
		s->running->interrupt_asked = true;
		client_cause(s->running->interrupt_by, sizeof s->running->interrupt_by,
		             json_string_value(json_object_get(req, "cause")), "kbox interrupt");
	}
	if (s->relay_on) {
		if (sup_relay_interrupt(s, &err) < 0)
			sup_reply_error(c, "interrupt", KR_CTL_ERR_KERNEL, "interrupt failed: %s",
			                err.msg);
		else
			interrupt_done(s, c);
		return;
	}
	if (s->running && s->running->op == KR_CTL_OP_EXECUTE && s->running->x) {
		/* (the client makes it once the kernel is in the code, and
		 * ends the execution should the interrupt lose its reply) */
		char why[KR_CTL_CAUSE_MAX + 32];
		snprintf(why, sizeof why, "interrupted by %s", s->running->interrupt_by);
		if (kbox_exec_ask_interrupt(s->running->x, why, &err) < 0)
			sup_reply_error(c, "interrupt", KR_CTL_ERR_KERNEL, "interrupt failed: %s",
			                err.msg);
		else
			interrupt_done(s, c);
		return;
	}
	if (kbox_kspec_interrupt_mode(s->spec) == KBOX_INTERRUPT_SIGNAL) {
		if (kr_sandbox_signal(s->sb, SIGINT, &err) < 0)
			sup_reply_error(c, "interrupt", KR_CTL_ERR_KERNEL, "interrupt failed: %s",
			                err.msg);
		else
			interrupt_done(s, c);
		return;
	}
	if (!(ask = malloc(sizeof *ask))) {
		sup_reply_error(c, "interrupt", KR_CTL_ERR_INTERNAL, "out of memory");
		return;
	}
	ask->s = s;
	ask->conn_id = c->id;
	content = json_object();
	if (kbox_client_request_begin(s->client, KBOX_CH_CONTROL, "interrupt_request", &content,
	                              KR_CTL_KERNEL_REPLY_MS, on_interrupt_reply, ask, &err) < 0) {
		free(ask);
		sup_reply_error(c, "interrupt", KR_CTL_ERR_KERNEL, "interrupt failed: %s", err.msg);
	} else
		c->asking++;
}

static void op_restart(sup_t *s, conn_t *c, json_t *req)
{
	char cause[512];
	client_cause(cause, sizeof cause, json_string_value(json_object_get(req, "cause")),
	             "restarted on request (kbox restart)");
	sup_touch(s);
	if (sup_kernel_replace(s, cause, true) < 0) {
		sup_reply_error(c, "restart", KR_CTL_ERR_KERNEL, "%s", s->stop_cause);
		sup_stop(s);
		return;
	}
	/* told once the new kernel is ready; the next execution gets the notice */
	c->pending = KR_CTL_OP_RESTART;
}

static void op_stop(sup_t *s, conn_t *c, json_t *req)
{
	client_cause(s->stop_cause, sizeof s->stop_cause,
	             json_string_value(json_object_get(req, "cause")),
	             "stopped on request (kbox stop)");
	s->stop_conn = c;
	sup_stop(s);
}

/* session {"dir": D, "dev": N, "ino": N}: the client names the session
 * directory it means, before its request: its path, and the identity of
 * the directory it found there (kbox's clients send both; others may send
 * D alone).  Nothing is said when both are this supervisor's; else the
 * client reached another session's supervisor than it meant (its
 * control.sock replaced by a link to, or the socket of, another session,
 * or this session's directory renamed away and another made under its
 * name, by code that could reach the state directory: kbox(7), threat
 * 44), and the connection ends with an error, what it sent after unread. */
static void op_session(sup_t *s, conn_t *c, json_t *req)
{
	const char *dir = json_string_value(json_object_get(req, "dir"));
	json_t *dev = json_object_get(req, "dev"), *ino = json_object_get(req, "ino");
	struct stat st;
	bool same;
	if (!dir || (dev && !json_is_integer(dev)) || (ino && !json_is_integer(ino)) ||
	    !dev != !ino) {
		sup_reply_error(c, "session", KR_CTL_ERR_USAGE,
		                "\"dir\" must be a string, and \"dev\" and \"ino\" integers, "
		                "both or neither");
		goto cut;
	}
	/* (and this supervisor's directory is still where it was started,
	 * itself, not a link to it: one renamed away answers for nothing, by
	 * whatever way a client reached it) */
	same = strcmp(dir, s->dir) == 0 &&
	       (!dev || (json_integer_value(dev) == (json_int_t)s->dir_dev &&
	                 json_integer_value(ino) == (json_int_t)s->dir_ino)) &&
	       lstat(s->dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == s->dir_dev &&
	       st.st_ino == s->dir_ino;
	if (same)
		return;
	if (strcmp(dir, s->dir) == 0)
		sup_reply_error(c, "session", KR_CTL_ERR_STATE,
		                "the supervisor that answered is that of the session that was in "
		                "%s, not of the directory there now: it was moved away and "
		                "another put in its place (kbox(7), threat 44); nothing was run",
		                s->dir);
	else
		sup_reply_error(c, "session", KR_CTL_ERR_STATE,
		                "the supervisor that answered is that of the session in %s, not "
		                "of %s: something put its socket in the place of that session's "
		                "(kbox(7), threat 44); nothing was run",
		                s->dir, dir);
cut:
	sup_conn_flush(c);
	c->cut = true;
}

/* The ops, by the protocol's enum (protocol.h): a handler each. */
static void (*const ops[KR_CTL_N_OPS])(sup_t *s, conn_t *c, json_t *req) = {
        [KR_CTL_OP_STATUS] = op_status,       [KR_CTL_OP_EXECUTE] = op_execute,
        [KR_CTL_OP_COMPLETE] = op_complete,   [KR_CTL_OP_INSPECT] = op_inspect,
        [KR_CTL_OP_INTERRUPT] = op_interrupt, [KR_CTL_OP_RESTART] = op_restart,
        [KR_CTL_OP_STOP] = op_stop,           [KR_CTL_OP_SESSION] = op_session,
};

/* Hand C's request REQ (an object) to the handler of its op. */
static void handle_request(sup_t *s, conn_t *c, json_t *req)
{
	const char *name = json_string_value(json_object_get(req, "op"));
	kr_ctl_op_t op = kr_ctl_op_parse(name);

	if (!name)
		sup_reply_error(c, NULL, KR_CTL_ERR_USAGE, "request without \"op\"");
	else if (op == KR_CTL_OP_NONE)
		sup_reply_error(c, name, KR_CTL_ERR_USAGE, "unknown op \"%s\"", name);
	else if (s->front && (op == KR_CTL_OP_EXECUTE || op == KR_CTL_OP_COMPLETE ||
	                      op == KR_CTL_OP_INSPECT || op == KR_CTL_OP_RESTART))
		/* (the front end owns the kernel: it runs the code, and
		 * restarts the kernel by starting kbox kernel again) */
		sup_reply_error(c, name, KR_CTL_ERR_USAGE,
		                "this session is a Jupyter front end's kernel (kbox kernel): %s "
		                "it from the front end",
		                op == KR_CTL_OP_RESTART ? "restart" : "run code in");
	else
		ops[op](s, c, req);
}

/* ---- connections ---- */

/* What an input buffer of CAP bytes counts in sup_t's in_total. */
static size_t in_charge(size_t cap)
{
	return cap > (size_t)KR_CTL_IN_SMALL ? cap : 0;
}

void sup_conn_close(sup_t *s, conn_t *c)
{
	size_t i;
	for (i = 0; i < s->n_conns && s->conns[i] != c; i++)
		;
	if (i == s->n_conns)
		return;
	s->conns[i] = s->conns[--s->n_conns];
	if (c->job)
		sup_job_orphan(s, c->job);
	if (c == s->stop_conn)
		s->stop_conn = NULL;
	kbox_loop_remove_fd(s->loop, c->fd);
	close(c->fd);
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	s->out_total -= c->out_len;
	s->in_total -= in_charge(c->in_cap);
	free(c->in);
	free(c->out);
	free(c);
}

/* Read what C sent into its buffer, and the descriptors that came with
 * it (an "outputs" directory: the last one is kept for the next request).
 * What recvmsg returned. */
static ssize_t conn_read(conn_t *c)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = {c->in + c->in_len, c->in_cap - c->in_len};
	struct msghdr mh = {0};
	ssize_t n;
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
	return n;
}

/* Make room for C's input buffer to grow to CAP bytes within
 * KR_CTL_IN_TOTAL_MAX: close the connections whose partial request lines
 * are the largest (the oldest of equals), each told why and logged, until
 * it fits.  False when C itself was closed. */
static bool in_room(sup_t *s, conn_t *c, size_t cap)
{
	while (s->in_total - in_charge(c->in_cap) + in_charge(cap) > (size_t)KR_CTL_IN_TOTAL_MAX) {
		conn_t *big = c;
		size_t big_cap = cap; /* C as it would be */
		for (size_t i = 0; i < s->n_conns; i++) {
			conn_t *o = s->conns[i];
			if (o != c &&
			    (o->in_cap > big_cap || (o->in_cap == big_cap && o->id < big->id))) {
				big = o;
				big_cap = o->in_cap;
			}
		}
		sup_log(s, "partial-request-cut-off",
		        json_pack("{s:s, s:I, s:I}", "why",
		                  "the partial requests of all clients passed what the "
		                  "supervisor holds",
		                  "partial", (json_int_t)big->in_len, "all_partial",
		                  (json_int_t)s->in_total));
		sup_reply_error(big, NULL, KR_CTL_ERR_BUSY,
		                "the partial requests of all connections passed %d bytes: this "
		                "one, the largest (%zu bytes so far), was closed",
		                KR_CTL_IN_TOTAL_MAX, big->in_len);
		sup_conn_flush(big);
		sup_conn_close(s, big);
		if (big == c)
			return false;
	}
	return true;
}

/* Handle the complete lines in C's buffer, until the session stops. */
static void conn_lines(sup_t *s, conn_t *c)
{
	char *nl;
	while (!s->stopping && !c->cut && (nl = memchr(c->in, '\n', c->in_len))) {
		size_t line = (size_t)(nl - c->in);
		kbox_error_t err = {0};
		json_t *req = kr_ctl_request_load(c->in, line, &err);
		memmove(c->in, nl + 1, c->in_len - line - 1);
		c->in_len -= line + 1;
		if (!req)
			sup_reply_error(c, NULL, KR_CTL_ERR_USAGE, "%s", err.msg);
		else
			handle_request(s, c, req);
		json_decref(req);
	}
}

/* Read what a connection sent; handle complete lines. */
static int on_conn(kbox_loop_t *loop, void *arg)
{
	conn_t *c = arg;
	sup_t *s = c->s;
	(void)loop;
	for (;;) {
		ssize_t n;
		if (c->cut) { /* what it sent since goes unread */
			sup_conn_close(s, c);
			return 0;
		}
		if (c->in_len == c->in_cap) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 4096;
			char *nb;
			if (cap > KR_CTL_REQUEST_MAX) {
				sup_reply_error(c, NULL, KR_CTL_ERR_USAGE,
				                "request longer than %d bytes", KR_CTL_REQUEST_MAX);
				sup_conn_flush(c);
				sup_conn_close(s, c);
				return 0;
			}
			if (!in_room(s, c, cap))
				return 0;
			if (!(nb = realloc(c->in, cap))) {
				sup_conn_close(s, c);
				return 0;
			}
			s->in_total += in_charge(cap) - in_charge(c->in_cap);
			c->in = nb;
			c->in_cap = cap;
		}
		n = conn_read(c);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			sup_conn_close(s, c);
			return 0;
		}
		c->in_len += (size_t)n;
		c->active_ms = kx_now_ms();
		conn_lines(s, c);
		if (s->stopping)
			return 0;
		if (c->in_len == 0 && c->in_cap > 4096) { /* a long line's room goes */
			s->in_total -= in_charge(c->in_cap);
			free(c->in);
			c->in = NULL;
			c->in_cap = 0;
		}
	}
}

/* Whether C waits for an answer: its job, a restart's new kernel, an
 * interrupt's reply, or the stop it asked for. */
static bool conn_waits(const sup_t *s, const conn_t *c)
{
	return c->job || c->pending != KR_CTL_OP_NONE || c->asking || c == s->stop_conn;
}

/* Whether C has something to read (or its end), for its handler. */
static bool conn_readable(const conn_t *c)
{
	struct pollfd p = {c->fd, POLLIN, 0};
	return poll(&p, 1, 0) != 0;
}

void sup_conns_idle(sup_t *s)
{
	long long now = kx_now_ms();
	for (size_t i = s->n_conns; i-- > 0;) {
		conn_t *c = s->conns[i];
		/* (lines waiting for a slow reader are kept: they are
		 * bounded, and cut off when the bounds need it) */
		if (!conn_waits(s, c) && !c->out_len && now - c->active_ms >= KR_CTL_IDLE_MS &&
		    !conn_readable(c))
			sup_conn_close(s, c);
	}
}

/* The connection to close for a new one when there are
 * KR_CTL_CONNS_MAX: one cut off already, else of those that wait for no
 * answer the one on which nothing came or went for the longest time.
 * NULL when every one waits for an answer. */
static conn_t *conn_to_close(sup_t *s)
{
	conn_t *idlest = NULL;
	for (size_t i = 0; i < s->n_conns; i++) {
		conn_t *c = s->conns[i];
		if (c->cut)
			return c;
		if (!conn_waits(s, c) && (!idlest || c->active_ms < idlest->active_ms))
			idlest = c;
	}
	return idlest;
}

int sup_on_accept(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		conn_t *c;
		if (fd < 0)
			return 0;
		/* only our own uid, and not from a sandbox (the dir is 0700 too) */
		kr_ctl_peer_t peer = kr_ctl_peer(fd);
		if (peer == KR_CTL_PEER_GONE) { /* it gave up before we got to it */
			close(fd);
			continue;
		}
		if (peer != KR_CTL_PEER_OURS) {
			/* folded (sup_log): a refused peer may try forever */
			sup_log(s, "client-refused",
			        json_pack("{s:s}", "why",
			                  "another user, or another user namespace (a sandbox)"));
			close(fd);
			continue;
		}
		if (s->n_conns == KR_CTL_CONNS_MAX && (c = conn_to_close(s)))
			sup_conn_close(s, c);
		if (s->n_conns == KR_CTL_CONNS_MAX) {
			json_t *e = json_pack("{s:b, s:s, s:s}", "ok", 0, "kind",
			                      kr_ctl_err_name(KR_CTL_ERR_BUSY), "error",
			                      "too many control connections");
			kr_ctl_send(fd, e, NULL);
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
		c->pending = KR_CTL_OP_NONE;
		c->active_ms = kx_now_ms();
		s->conns[s->n_conns++] = c;
		if (kbox_loop_add_fd(loop, fd, on_conn, c, NULL) < 0)
			sup_conn_close(s, c);
	}
}
