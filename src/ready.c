/* src/ready.c — the readiness wait: the kernel answers kernel_info on
 * shell AND its iopub reaches us (the slow joiner), then what iopub has
 * queued is read and stdin's handshake, if it is connected, is waited
 * for.  The steps are phases of one machine (ready_phase_t) on the
 * client's loop; kbox_client_wait_ready runs it on a private one. */
#include "client_int.h"

#include <stdlib.h>

#define IOPUB_LINK_MS 250     /* longest wait for iopub's handshake before kernel_info */
#define READY_MS 60000        /* a readiness wait given no timeout */
#define ATTEMPT_MS 1000       /* one kernel_info attempt of a readiness wait */
#define IOPUB_WAIT_MS 10      /* first wait for iopub after kernel_info (doubling)… */
#define IOPUB_WAIT_MAX_MS 200 /* …up to this */
#define FAST_CONNECT_MS 10000 /* longest a kernel is waited for at the fast connect pace */

/* Take RD off SELF with its timers and request; its callback is then the
 * caller's to call (or not). */
void ready_unlink(kbox_client_t *self, ready_t *rd)
{
	if (self->ready == rd)
		self->ready = NULL;
	client_cancel_timer(self, &rd->t_deadline);
	client_cancel_timer(self, &rd->t_phase);
	requests_cancel(self, rd);
}

/* End RD: ready (ERR NULL) or not; its callback is the last thing done. */
void ready_end(kbox_client_t *self, ready_t *rd, const kbox_error_t *err)
{
	kbox_ready_cb *cb = rd->cb;
	void *arg = rd->arg;
	ready_unlink(self, rd);
	free(rd);
	if (err) /* no kernel answered: no more connecting by path every few ms */
		channel_slow_down(self);
	cb(arg, err ? -1 : 0, err);
}

/* The time is up before the kernel was found ready: say why. */
static void ready_expire(kbox_client_t *self, ready_t *rd)
{
	kbox_error_t e = {0};
	char t[32];
	if (client_owner_says_dead(self)) {
		kbox_error_set(&e, KBOX_E_DEAD, "kernel exited before it was ready");
	} else {
		kx_fmt_ms(t, sizeof t, rd->timeout_ms);
		kbox_error_set(
		        &e, KBOX_E_TIMEOUT,
		        rd->shell_answered
		                ? "kernel answered kernel_info but no iopub message reached us within %s"
		                : "kernel did not answer kernel_info within %s",
		        t);
	}
	ready_end(self, rd, &e);
}

static void ready_on_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err);

/* Ask kernel_info (again): one attempt of up to 1 s, within the deadline. */
static void ready_ask(kbox_client_t *self, ready_t *rd)
{
	kbox_error_t e = {0};
	long long left = rd->deadline - kx_now_ms();
	if (left <= 0) {
		ready_expire(self, rd);
		return;
	}
	/* the kernel is slow to bind: the sockets still connected by path go
	 * on at the slow pace (channel_new) */
	if (!self->fast_over && kx_now_ms() - rd->begun >= FAST_CONNECT_MS)
		channel_slow_down(self);
	rd->phase = READY_ASK;
	if (!request_start(self, KBOX_CH_SHELL, "kernel_info_request", NULL,
	                   (int)(left < ATTEMPT_MS ? left : ATTEMPT_MS), rd, ready_on_reply, rd,
	                   &e))
		ready_end(self, rd, &e);
}

/* Drained (or 200 ms spent draining): wait for stdin's handshake if its
 * socket is connected, else done. */
static void ready_flushed(kbox_client_t *self, ready_t *rd)
{
	client_cancel_timer(self, &rd->t_phase);
	if (self->sock[KBOX_CH_STDIN] && self->mon[KBOX_CH_STDIN] && !self->linked[KBOX_CH_STDIN]) {
		rd->phase = READY_STDIN; /* client_on_monitor or the deadline ends it */
		return;
	}
	ready_end(self, rd, NULL);
}

/* 200 ms of flushing iopub are enough. */
static int ready_on_flush_end(kbox_loop_t *loop, void *arg)
{
	ready_t *rd = arg;
	(void)loop;
	rd->t_phase = 0;
	ready_flushed(rd->client, rd);
	return 0;
}

/* iopub works: read what is queued there (for 200 ms at most), then done. */
static void ready_flush(kbox_client_t *self, ready_t *rd)
{
	rd->phase = READY_FLUSH;
	client_cancel_timer(self, &rd->t_phase);
	if (!channel_readable(self, KBOX_CH_IOPUB) ||
	    !(rd->t_phase = client_add_timer(self, DRAIN_MS, ready_on_flush_end, rd)))
		ready_flushed(self, rd);
}

/* Something came on iopub (after on_iopub has read it). */
void ready_heard(kbox_client_t *self, ready_t *rd)
{
	if (rd->phase == READY_IOPUB)
		ready_flush(self, rd);
	else if (rd->phase == READY_FLUSH && !channel_readable(self, KBOX_CH_IOPUB))
		ready_flushed(self, rd);
}

/* Shell answered but iopub stayed silent: ask again. */
static int ready_on_iopub_wait(kbox_loop_t *loop, void *arg)
{
	ready_t *rd = arg;
	(void)loop;
	rd->t_phase = 0;
	/* our subscription may have reached the kernel only after it
	 * published this request's status: ask again, soon */
	if (rd->iopub_wait < IOPUB_WAIT_MAX_MS)
		rd->iopub_wait *= 2;
	ready_ask(rd->client, rd);
	return 0;
}

static int ready_on_link_wait(kbox_loop_t *loop, void *arg);

/* True when iopub's handshake is still to come and its monitor will say
 * when it does. */
static bool ready_iopub_linking(const kbox_client_t *self)
{
	return self->sock[KBOX_CH_IOPUB] && self->mon[KBOX_CH_IOPUB] &&
	       !self->linked[KBOX_CH_IOPUB];
}

/* The kernel answered, so its socket files exist: the channels that were
 * connected by path are made again, pinned, and from now on none is
 * connected by path.  True when it did (the wait goes on: iopub's new
 * subscription, then kernel_info again), false when nothing needed it. */
static bool ready_pin(kbox_client_t *self, ready_t *rd)
{
	kbox_error_t e = {0};
	bool again = false;
	if (self->must_pin || kbox_conn_transport(self->conn) != KBOX_TRANSPORT_IPC)
		return false;
	self->must_pin = true;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		if (!self->sock[ch] || self->ipc_fd[ch] >= 0)
			continue;
		channel_close(self, (kbox_channel_t)ch);
		if (!channel_sock(self, (kbox_channel_t)ch, &e)) {
			ready_end(self, rd, &e);
			return true;
		}
		again = true;
	}
	if (!again)
		return false;
	rd->iopub_heard = false;
	if (!ready_iopub_linking(self)) { /* no handshake to wait for: ask now */
		channel_subscribe_now(self);
		ready_ask(self, rd);
		return true;
	}
	rd->phase = READY_LINK; /* client_on_monitor or this timer asks again */
	if (!(rd->t_phase = client_add_timer(self, IOPUB_LINK_MS, ready_on_link_wait, rd)))
		ready_ask(self, rd);
	return true;
}

/* The kernel_info attempt is over: answered (then listen on iopub), or
 * not (then ask again, within the deadline). */
static void ready_on_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	ready_t *rd = arg;
	kbox_client_t *self = rd->client;
	if (!reply) {
		if (err && err->code != KBOX_E_TIMEOUT)
			ready_end(self, rd, err);
		else
			ready_ask(self, rd);
		return;
	}
	rd->shell_answered = true;
	json_decref(self->kernel_info);
	self->kernel_info = json_incref(kbox_msg_content(reply));
	kbox_msg_destroy(&reply);
	if (ready_pin(self, rd))
		return;
	/* shell works; is iopub connected yet? */
	if (rd->iopub_heard) {
		ready_flush(self, rd);
		return;
	}
	rd->phase = READY_IOPUB;
	if (!(rd->t_phase = client_add_timer(self, rd->iopub_wait, ready_on_iopub_wait, rd)))
		ready_ask(self, rd);
}

/* iopub's handshake did not come within 0.25 s: ask anyway. */
static int ready_on_link_wait(kbox_loop_t *loop, void *arg)
{
	ready_t *rd = arg;
	(void)loop;
	rd->t_phase = 0;
	ready_ask(rd->client, rd);
	return 0;
}

/* The readiness wait's TIMEOUT_MS are over. */
static int ready_on_deadline(kbox_loop_t *loop, void *arg)
{
	ready_t *rd = arg;
	(void)loop;
	rd->t_deadline = 0;
	/* past the kernel_info round trip the kernel is ready: what is left
	 * (the flush, stdin's handshake) only gets the time there is */
	if (rd->phase == READY_FLUSH || rd->phase == READY_STDIN)
		ready_end(rd->client, rd, NULL);
	else
		ready_expire(rd->client, rd);
	return 0;
}

/* CH's handshake completed: a wait for iopub's asks kernel_info now, a
 * wait for stdin's is over. */
void ready_linked(kbox_client_t *self, kbox_channel_t ch)
{
	ready_t *rd = self->ready;
	if (!rd)
		return;
	if (ch == KBOX_CH_IOPUB && rd->phase == READY_LINK) {
		client_cancel_timer(self, &rd->t_phase);
		ready_ask(self, rd);
	} else if (ch == KBOX_CH_STDIN && rd->phase == READY_STDIN) {
		ready_end(self, rd, NULL);
	}
}

/* Begin a readiness wait for OWNER (client_int.h). */
ready_t *ready_start(kbox_client_t *self, int timeout_ms, void *owner, kbox_ready_cb *cb, void *arg,
                     kbox_error_t *err)
{
	ready_t *rd;
	if (!self->loop) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "wait_ready: the client is not attached to a loop");
		return NULL;
	}
	if (self->ready) {
		kbox_error_set(err, KBOX_E_INVALID, "wait_ready: already waiting for the kernel");
		return NULL;
	}
	if (!(rd = calloc(1, sizeof *rd))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	rd->client = self;
	rd->timeout_ms = timeout_ms > 0 ? timeout_ms : READY_MS;
	rd->begun = kx_now_ms();
	rd->deadline = rd->begun + rd->timeout_ms;
	rd->iopub_wait = IOPUB_WAIT_MS;
	rd->owner = owner;
	rd->cb = cb;
	rd->arg = arg;
	if (!(rd->t_deadline = client_add_timer(self, rd->timeout_ms, ready_on_deadline, rd)))
		goto nomem;
	/* Ask only once our subscription is on its way: wait (briefly) for
	 * iopub's handshake, then let the socket process it, which sends the
	 * subscription.  Then this request's status messages reach us and
	 * one round trip is usually enough; if not, ask again. */
	if (ready_iopub_linking(self)) {
		rd->phase = READY_LINK; /* client_on_monitor or this timer asks */
		rd->t_phase = client_add_timer(
		        self, rd->timeout_ms < IOPUB_LINK_MS ? rd->timeout_ms : IOPUB_LINK_MS,
		        ready_on_link_wait, rd);
		if (!rd->t_phase)
			goto nomem;
	} else {
		channel_subscribe_now(self);
		rd->phase = READY_ASK;
		if (!request_start(self, KBOX_CH_SHELL, "kernel_info_request", NULL,
		                   rd->timeout_ms < ATTEMPT_MS ? rd->timeout_ms : ATTEMPT_MS, rd,
		                   ready_on_reply, rd, err))
			goto fail;
	}
	self->ready = rd;
	client_alive_tick_arm(self);
	return rd;
nomem:
	kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
fail:
	ready_unlink(self, rd);
	free(rd);
	return NULL;
}

int kbox_client_ready_begin(kbox_client_t *self, int timeout_ms, kbox_ready_cb *cb, void *arg,
                            kbox_error_t *err)
{
	if (!cb)
		return kbox_error_set(err, KBOX_E_INVALID, "wait_ready: no callback given");
	return ready_start(self, timeout_ms, NULL, cb, arg, err) ? 0 : -1;
}

/* kbox_client_wait_ready's callback: record the outcome, stop the loop. */
static void wait_ready_cb(void *arg, int rc, const kbox_error_t *err)
{
	waiter_t *w = arg;
	w->done = true;
	w->rc = rc;
	if (err)
		w->err = *err;
	kbox_loop_stop(w->loop);
}

int kbox_client_wait_ready(kbox_client_t *self, int timeout_ms, kbox_error_t *err)
{
	waiter_t w = {0};
	bool begun;
	if (client_wait_begin(self, &w, "wait_ready", err) < 0)
		return -1;
	begun = kbox_client_ready_begin(self, timeout_ms, wait_ready_cb, &w, err) == 0;
	client_wait_end(self, &w, begun);
	if (begun && w.rc < 0 && err)
		*err = w.err;
	return begun ? w.rc : -1;
}
