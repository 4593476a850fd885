/* src/client.c — a client of one running kernel: its life, sending and
 * receiving, the loop's handlers that give what arrives to whoever waits
 * for it, ending what is pending, and the private loop the blocking
 * functions run on.  The machines themselves are in request.c, ready.c
 * and exec.c; client_int.h says which file holds what. */
#include "client_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIVE_SLICE_MS 100 /* how often waits consult the alive hook */

/* The user name messages are sent under, into BUF: the environment's, as
 * Python's getpass.getuser(); without one "kbox", as jupyter_client's
 * Session falls back to a fixed name rather than ask NSS (a lookup costs
 * a short-lived process ~0.3 ms). */
static void default_username(char *buf, size_t size)
{
	static const char *const vars[] = {"LOGNAME", "USER", "LNAME", "USERNAME"};
	const char *u = NULL;
	for (size_t i = 0; i < 4 && !u; i++)
		if ((u = getenv(vars[i])) && !*u)
			u = NULL;
	client_text_cut(buf, size, snprintf(buf, size, "%s", u ? u : "kbox"));
}

kbox_client_t *kbox_client_new(const kbox_conn_t *conn, kbox_error_t *err)
{
	kbox_client_t *self;
	const unsigned char *key;
	size_t keylen;

	if (kbox_init() < 0) {
		kbox_error_set(err, KBOX_E_SYSTEM, "libsodium failed to initialise");
		return NULL;
	}
	self = calloc(1, sizeof *self);
	if (!self) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	self->ipc_dir_fd = -1;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		self->ipc_fd[ch] = -1;
		self->chan[ch].client = self;
		self->chan[ch].ch = ch;
	}
	kbox__bucket_init(&self->iopub_bucket, 0, 0, kx_now_ms());
	kbox_uuid(self->session);
	default_username(self->username, sizeof self->username);
	self->conn = kbox_conn_dup(conn);
	if (!self->conn) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	key = kbox_conn_key(self->conn, &keylen);
	self->auth = kbox_auth_new(kbox_conn_scheme(self->conn), key, keylen, 0, err);
	if (!self->auth)
		goto fail;
	/* shell and iopub now; control, stdin and heartbeat when first used
	 * (a short-lived client, like kbox exec, often needs none of them) */
	if (!(self->sock[KBOX_CH_SHELL] = channel_new(self, KBOX_CH_SHELL, err)) ||
	    !(self->sock[KBOX_CH_IOPUB] = channel_new(self, KBOX_CH_IOPUB, err)))
		goto fail;
	return self;
fail:
	kbox_client_destroy(&self);
	return NULL;
}

void kbox_client_destroy(kbox_client_t **self_p)
{
	kbox_client_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	*self_p = NULL;
	if (self->destroying) /* from a callback of the detach below */
		return;
	self->destroying = true;
	for (guard_t *g = self->guards; g; g = g->next)
		g->gone = true;
	kbox_client_detach(self);
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		channel_unmonitor(self, ch);
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		zsock_destroy(&self->sock[ch]);
		if (self->ipc_fd[ch] >= 0)
			close(self->ipc_fd[ch]);
	}
	if (self->ipc_dir_fd >= 0)
		close(self->ipc_dir_fd);
	kbox_auth_destroy(&self->auth);
	kbox_conn_destroy(&self->conn);
	json_decref(self->kernel_info);
	free(self);
}

void kbox_client_set_hooks(kbox_client_t *self, const kbox_client_hooks_t *hooks)
{
	if (hooks)
		self->hooks = *hooks;
	else
		memset(&self->hooks, 0, sizeof self->hooks);
}

void kbox_client_set_shared(kbox_client_t *self, bool shared)
{
	self->shared = shared;
}

const char *kbox_client_session(const kbox_client_t *self)
{
	return self->session;
}
json_t *kbox_client_kernel_info(const kbox_client_t *self)
{
	return self->kernel_info;
}
unsigned long kbox_client_dropped(const kbox_client_t *self)
{
	return self->dropped;
}
const char *kbox_client_last_drop(const kbox_client_t *self)
{
	return self->last_drop;
}

/* True when the owner says the process is gone. */
bool client_owner_says_dead(const kbox_client_t *self)
{
	return self->hooks.alive && !self->hooks.alive(self->hooks.arg);
}

kbox_msg_t *kbox_client_msg(kbox_client_t *self, const char *msg_type, json_t **content_p)
{
	return kbox_msg_new(msg_type, self->session, self->username, content_p);
}

int kbox_client_send(kbox_client_t *self, kbox_channel_t channel, const kbox_msg_t *msg,
                     kbox_error_t *err)
{
	zmsg_t *z;
	if (channel != KBOX_CH_SHELL && channel != KBOX_CH_CONTROL && channel != KBOX_CH_STDIN)
		return kbox_error_set(err, KBOX_E_INVALID, "cannot send on the %s channel",
		                      kbox_channel_name(channel));
	if (!channel_sock(self, channel, err))
		return -1;
	z = kbox__msg_encode(msg, self->auth, err);
	if (!z)
		return -1;
	ZMQ_USED(self, channel);
	if (zmsg_send(&z, self->sock[channel]) < 0) {
		zmsg_destroy(&z);
		return kbox_error_set(err, KBOX_E_SYSTEM, "sending %s on %s failed: %s",
		                      kbox_msg_type(msg), kbox_channel_name(channel),
		                      zmq_strerror(zmq_errno()));
	}
	return 0;
}

/* BUF (SIZE bytes) holds what a snprintf that returned N wrote (client_int.h). */
void client_text_cut(char *buf, size_t size, int n)
{
	static const char mark[] = "...";
	size_t keep;
	if (n < 0 || (size_t)n < size || size < sizeof mark)
		return;
	keep = kx_utf8_floor(buf, size - 1, size - sizeof mark);
	memcpy(buf + keep, mark, sizeof mark);
}

/* SELF's last_drop: "WHY on CH: dropped", WHY cut at a character when the
 * whole does not fit (what was dropped, and where, is what must show). */
static void note_drop(kbox_client_t *self, const char *why, kbox_channel_t ch)
{
	char tail[32];
	int t = snprintf(tail, sizeof tail, " on %s: dropped", kbox_channel_name(ch));
	size_t keep;
	if (t < 0 || (size_t)t >= sizeof tail) /* no channel name is that long */
		t = 0;
	tail[t] = '\0';
	keep = kx_utf8_floor(why, strlen(why), sizeof self->last_drop - 1 - (size_t)t);
	memcpy(self->last_drop, why, keep);
	memcpy(self->last_drop + keep, tail, (size_t)t + 1);
}

/* Decode P (closed here), which came on CH: the message (new), or NULL
 * when it is invalid (dropped and counted).  What comes during an
 * execution has its number noted (kbox__seq_note). */
kbox_msg_t *client_decode(kbox_client_t *self, kbox__parts_t *p, kbox_channel_t ch)
{
	kbox_error_t e = {0};
	kbox_msg_t *msg = kbox__msg_decode_parts(self->auth, p, &e);
	kbox_exec_t *x = self->exec;

	if (!msg && x && x->run && x->run->phase >= X_RUN) {
		/* it came: not among those that never arrived, but counted as
		 * undecodable when it is the execution's */
		char id[256];
		bool ours = kbox__raw_ids(p->frames, p->n, x->run->req_id, id, sizeof id);
		kbox__seq_note(self->shared ? NULL : &x->seq, id, ours);
		if (ours)
			x->drops.undecodable++;
	}
	kbox__parts_close(p);
	if (!msg) {
		self->dropped++;
		note_drop(self, e.msg, ch);
	} else if (x && x->run && x->run->phase >= X_RUN) {
		const char *pid = kbox_msg_parent_id(msg);
		kbox__seq_note(self->shared ? NULL : &x->seq, kbox_msg_id(msg),
		               pid && strcmp(pid, x->run->req_id) == 0);
	}
	return msg;
}

/* Read one message from CH without waiting: the decoded message (new), or
 * NULL when there was none or it was invalid (dropped and counted). */
kbox_msg_t *client_read_one(kbox_client_t *self, kbox_channel_t ch)
{
	kbox__parts_t p;
	return client_recv(self, ch, &p) == 0 ? client_decode(self, &p, ch) : NULL;
}

/* Receive into P the message waiting on CH (client_int.h).  No ZMQ_EVENTS
 * first: a receive that finds a message makes no system call, one that
 * finds none asks libzmq as ZMQ_EVENTS would. */
int client_recv(kbox_client_t *self, kbox_channel_t ch, kbox__parts_t *p)
{
	int rc;
	if (!self->sock[ch])
		return -1;
	ZMQ_USED(self, ch);
	rc = kbox__parts_recv(p, zsock_resolve(self->sock[ch]));
	if (rc < 0 && errno == EAGAIN) /* as good as asking ZMQ_EVENTS */
		self->zuse[ch].drained = self->zuse[ch].uses;
	return rc;
}

/* Wait up to TIMEOUT_MS (-1 forever) for input on the channels in MASK
 * (bit 1<<ch).  Returns a mask of the readable ones, 0 on timeout, -1 on error. */
static int poll_channels(kbox_client_t *self, unsigned mask, long timeout_ms)
{
	zmq_pollitem_t items[KBOX_CH_COUNT];
	int chs[KBOX_CH_COUNT], n = 0, rc, out = 0;

	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		if ((mask & (1u << ch)) &&
		    self->sock[ch]) { /* nothing comes on one not connected */
			items[n].socket = zsock_resolve(self->sock[ch]);
			items[n].fd = 0;
			items[n].events = ZMQ_POLLIN;
			items[n].revents = 0;
			chs[n++] = ch;
			ZMQ_USED(self, ch);
		}
	rc = zmq_poll(items, n, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -1;
	for (int i = 0; i < n; i++)
		if (items[i].revents & ZMQ_POLLIN)
			out |= 1 << chs[i];
	return out;
}

/* Milliseconds left until DEADLINE (a kx_now_ms value; 0 = none → -1). */
static long remaining(long long deadline)
{
	long long left;
	if (!deadline)
		return -1;
	left = deadline - kx_now_ms();
	return left > 0 ? (long)left : 0;
}

kbox_msg_t *kbox_client_recv(kbox_client_t *self, kbox_channel_t channel, int timeout_ms,
                             kbox_error_t *err)
{
	long long deadline = timeout_ms > 0 ? kx_now_ms() + timeout_ms : 0;
	char t[32];

	if ((unsigned)channel >= KBOX_CH_HB) {
		kbox_error_set(err, KBOX_E_INVALID, "cannot receive messages on the %s channel",
		               kbox_channel_name(channel));
		return NULL;
	}
	for (;;) {
		long wait = timeout_ms == 0 ? 0 : timeout_ms < 0 ? -1 : remaining(deadline);
		int r = poll_channels(self, 1u << channel, wait);
		if (r < 0) {
			kbox_error_set(err, KBOX_E_SYSTEM, "poll on %s failed: %s",
			               kbox_channel_name(channel), zmq_strerror(zmq_errno()));
			return NULL;
		}
		if (r) {
			kbox_msg_t *msg = client_read_one(self, channel);
			if (msg)
				return msg;
			continue;
		}
		if (timeout_ms >= 0 && (timeout_ms == 0 || remaining(deadline) == 0))
			break;
	}
	kx_fmt_ms(t, sizeof t, timeout_ms);
	kbox_error_set(err, KBOX_E_TIMEOUT, "no message on %s within %s",
	               kbox_channel_name(channel), t);
	return NULL;
}

int kbox_client_heartbeat(kbox_client_t *self, int timeout_ms)
{
	zsock_t *hb = channel_sock(self, KBOX_CH_HB, NULL);
	if (!hb)
		return -1;
	ZMQ_USED(self, KBOX_CH_HB);
	if (zstr_send(hb, "ping") == 0 && poll_channels(self, 1u << KBOX_CH_HB, timeout_ms) > 0) {
		kbox__parts_t p;
		ZMQ_USED(self, KBOX_CH_HB);
		if (kbox__parts_recv(&p, zsock_resolve(hb)) == 0) {
			kbox__parts_close(&p);
			return 0;
		}
	}
	/* A REQ socket that missed its reply is stuck: make a new one. */
	channel_close(self, KBOX_CH_HB); /* the next beat connects a new one */
	return -1;
}

/* Before code that goes on after a callback: kbox_client_destroy sets
 * G->gone, after which the client must not be touched. */
void client_guard_on(kbox_client_t *self, guard_t *g)
{
	g->gone = false;
	g->next = self->guards;
	self->guards = g;
}

/* After it: true when SELF is gone (then nothing of it may be touched). */
bool client_guard_off(kbox_client_t *self, guard_t *g)
{
	if (g->gone)
		return true;
	self->guards = g->next;
	return false;
}

/* A one-shot timer of the loop SELF is attached to: its id, or 0 when it
 * could not be made (out of memory). */
int client_add_timer(kbox_client_t *self, long long ms, kbox_loop_fn *fn, void *arg)
{
	int id = kbox_loop_add_timer(self->loop,
	                             ms < 0         ? 0
	                             : ms > INT_MAX ? INT_MAX
	                                            : (int)ms,
	                             false, fn, arg, NULL);
	return id > 0 ? id : 0;
}

/* Cancel the timer *ID (0: none) and forget it. */
void client_cancel_timer(kbox_client_t *self, int *id)
{
	if (*id > 0 && self->loop)
		kbox_loop_cancel_timer(self->loop, *id);
	*id = 0;
}

/* iopub: the execution's own messages to it, the others (through the rate
 * limit) to the iopub callback; a readiness wait hears it too. */
static void on_iopub(kbox_client_t *self)
{
	kbox_exec_t *x = self->exec;
	exec_run_t *run = x && x->run->phase >= X_RUN ? x->run : NULL;
	kbox__parts_t p;
	kbox_msg_t *m;
	const char *pid;
	guard_t g;

	if (client_recv(self, KBOX_CH_IOPUB, &p) < 0)
		return;
	if (self->ready)
		self->ready->iopub_heard = true;
	if (run)
		run->last_activity = run->last_iopub = kx_now_ms();
	m = iopub_decode(self, &p, run ? &run->bucket : &self->iopub_bucket, x,
	                 run ? run->req_id : NULL);
	pid = m ? kbox_msg_parent_id(m) : NULL;
	if (run) /* silence counts from when this one was taken in */
		run->last_iopub = kx_now_ms();
	client_guard_on(self, &g);
	if (run && pid && strcmp(pid, run->req_id) == 0 && kbox__msg_content_unreadable(m))
		x->drops.undecodable++; /* it came, and holds nothing kbox can read */
	else if (run && pid && strcmp(pid, run->req_id) == 0)
		exec_output(self, x, &m);
	else if (run && pid && run->probe_id[0] && strcmp(pid, run->probe_id) == 0)
		exec_probe_heard(self, x);
	else if (m && self->iopub_cb)
		self->iopub_cb(self->iopub_arg, m);
	kbox_msg_destroy(&m);
	if (g.gone)
		return;
	/* what reading it moved on (the state is read afresh: callbacks ran) */
	x = self->exec;
	if (x && x->run->phase == X_DRAIN && !channel_readable(self, KBOX_CH_IOPUB)) {
		exec_finish(self, x);
		if (g.gone)
			return;
	}
	client_guard_off(self, &g);
	if (self->ready)
		ready_heard(self, self->ready);
}

/* shell and control: the execute_reply to the execution, other replies to
 * the request they answer. */
static void on_reply(kbox_client_t *self, kbox_channel_t ch)
{
	kbox_msg_t *m = client_read_one(self, ch);
	if (exec_on_reply(self, ch, &m) || request_on_reply(self, ch, &m))
		return;
	kbox_msg_destroy(&m); /* a reply nobody waits for (any more) */
}

/* The loop's handler of a channel's socket (ARG is its chan_t). */
int client_on_channel(kbox_loop_t *loop, void *arg)
{
	chan_t *c = arg;
	(void)loop;
	switch (c->ch) {
	case KBOX_CH_IOPUB:
		on_iopub(c->client);
		break;
	case KBOX_CH_STDIN:
		exec_on_stdin(c->client);
		break;
	case KBOX_CH_HB:
		exec_on_hb(c->client);
		break;
	default:
		on_reply(c->client, c->ch);
		break;
	}
	return 0;
}

/* A socket monitor's event: the handshake of iopub (then ask kernel_info)
 * or of stdin (then the execution may send, the readiness wait is over). */
int client_on_monitor(kbox_loop_t *loop, void *arg)
{
	chan_t *c = arg;
	kbox_client_t *self = c->client;
	kbox_channel_t ch = c->ch;
	guard_t g;

	(void)loop;
	if (!channel_linked_now(self, ch))
		return 0;
	if (ch == KBOX_CH_IOPUB) {
		channel_subscribe_now(self);
		ready_linked(self, ch);
		return 0;
	}
	client_guard_on(self, &g);
	if (self->exec && self->exec->run->phase == X_LINK) {
		exec_linked(self, self->exec);
		if (g.gone)
			return 0;
	}
	client_guard_off(self, &g);
	ready_linked(self, ch);
	return 0;
}

/* The alive hook, every 100 ms while requests or a readiness wait are
 * pending: when it says the process is gone, they fail at once. */
static int on_alive_tick(kbox_loop_t *loop, void *arg)
{
	kbox_client_t *self = arg;
	kbox_error_t e = {0};
	guard_t g;
	(void)loop;
	self->t_alive = 0;
	if (!self->requests && !self->ready)
		return 0;
	if (!client_owner_says_dead(self)) {
		self->t_alive = client_add_timer(self, ALIVE_SLICE_MS, on_alive_tick, self);
		return 0;
	}
	for (request_t *r = self->requests; r; r = r->next)
		r->doomed = true; /* those made by the callbacks below get their own tick */
	client_guard_on(self, &g);
	if (self->ready) {
		kbox_error_set(&e, KBOX_E_DEAD, "kernel exited before it was ready");
		ready_end(self, self->ready, &e);
		if (g.gone)
			return 0;
	}
	for (;;) {
		request_t *r = self->requests;
		while (r && !r->doomed)
			r = r->next;
		if (!r)
			break;
		kbox_error_set(&e, KBOX_E_DEAD, "kernel died before it answered %s",
		               kbox_msg_type(r->msg));
		request_end(self, r, NULL, &e);
		if (g.gone)
			return 0;
	}
	client_guard_off(self, &g);
	return 0;
}

/* Start the alive tick, when there is an alive hook and none runs. */
void client_alive_tick_arm(kbox_client_t *self)
{
	if (self->hooks.alive && self->loop && !self->t_alive)
		self->t_alive = client_add_timer(self, 0, on_alive_tick, self);
}

/* End everything pending on SELF at once: the execution with status DIED
 * and REASON, the readiness wait and the requests with CODE and REASON.
 * DETACHING: SELF leaves its loop first.  The callbacks run last, after
 * SELF is no longer touched (one may destroy it). */
static void end_all(kbox_client_t *self, kbox_errcode_t code, const char *reason, bool detaching)
{
	kbox_exec_t *x = self->exec;
	kbox_exec_done_cb *done = NULL;
	void *done_arg = NULL;
	ready_t *rd;
	request_t *reqs;
	kbox_error_t e = {0};

	kbox_error_set(&e, code, "%s", reason);
	if (x) {
		x->status = KBOX_EXEC_DIED;
		exec_set_reason(x, "%s", reason);
		exec_close(self, x, &done, &done_arg); /* with its own requests and wait */
	}
	if ((rd = self->ready))
		ready_unlink(self, rd);
	reqs = self->requests;
	self->requests = NULL;
	for (request_t *r = reqs; r; r = r->next)
		client_cancel_timer(self, &r->timer);
	if (detaching) {
		client_cancel_timer(self, &self->t_alive);
		for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
			channel_unwatch(self, ch);
		self->loop = NULL;
	}
	if (x)
		done(done_arg, x);
	if (rd) {
		kbox_ready_cb *cb = rd->cb;
		void *arg = rd->arg;
		free(rd);
		cb(arg, -1, &e);
	}
	while (reqs) {
		request_t *r = reqs;
		kbox_reply_cb *cb = r->cb;
		void *arg = r->arg;
		reqs = r->next;
		request_free(r);
		cb(arg, NULL, &e);
	}
}

int kbox_client_attach(kbox_client_t *self, kbox_loop_t *loop, kbox_error_t *err)
{
	if (!loop)
		return kbox_error_set(err, KBOX_E_INVALID, "attach: no loop given");
	if (self->loop == loop)
		return 0;
	if (self->loop)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "attach: the client is attached to another loop");
	self->loop = loop;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		if (channel_watch(self, ch, err) < 0) {
			for (int c = 0; c < KBOX_CH_COUNT; c++)
				channel_unwatch(self, c);
			self->loop = NULL;
			return -1;
		}
	return 0;
}

void kbox_client_detach(kbox_client_t *self)
{
	if (self && self->loop)
		end_all(self, KBOX_E_INVALID, "detached", true);
}

void kbox_client_fail_pending(kbox_client_t *self, const char *reason)
{
	end_all(self, KBOX_E_DEAD, reason ? reason : "the kernel died", false);
}

void kbox_client_set_shedding(kbox_client_t *self, bool on)
{
	if (self)
		self->shedding = on;
}

void kbox_client_set_iopub_cb(kbox_client_t *self, kbox_iopub_cb *cb, void *arg)
{
	self->iopub_cb = cb;
	self->iopub_arg = arg;
}

size_t kbox_client_iopub_dropped(const kbox_client_t *self, size_t *bytes)
{
	if (bytes)
		*bytes = self->iopub_dropped_bytes;
	return self->iopub_dropped;
}

/* Attach SELF to a private loop for one waiting call named WHAT: 0, or -1
 * with ERR (a client on a loop of its own must use the _begin functions). */
int client_wait_begin(kbox_client_t *self, waiter_t *w, const char *what, kbox_error_t *err)
{
	if (self->loop)
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "%s: the client is attached to an event loop (use the _begin functions)",
		        what);
	if (!(w->loop = kbox_loop_new(err)))
		return -1;
	if (kbox_client_attach(self, w->loop, err) < 0) {
		kbox_loop_destroy(&w->loop);
		return -1;
	}
	return 0;
}

/* Run the private loop until W is done when BEGUN (a poll that fails
 * ends what is pending), then detach SELF and free the loop. */
void client_wait_end(kbox_client_t *self, waiter_t *w, bool begun)
{
	/* only W's callback stops the loop */
	if (begun && !w->done && kbox_loop_run(w->loop) < 0 && !w->done) {
		char why[128];
		client_text_cut(why, sizeof why,
		                snprintf(why, sizeof why, "poll failed: %s", zmq_strerror(errno)));
		kbox_client_fail_pending(self, why); /* calls back: done */
	}
	kbox_client_detach(self); /* ends anything left, should there be */
	kbox_loop_destroy(&w->loop);
}
