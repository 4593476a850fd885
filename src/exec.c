/* src/exec.c — one execution, from its execute_request to its result:
 * waiting for stdin's handshake, the settling round trip after a failure,
 * the deadline and the interrupt with its grace period, the watch over a
 * silent kernel (the alive hook or the heartbeat), the reply and idle,
 * reconnecting a lost iopub, draining what is queued, and the result's
 * accessors.  Its phases are exec_phase_t, on the client's loop;
 * kbox_client_execute runs it on a private one. */
#include "client_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HB_SILENCE_MS 1000 /* silence during execute before checking the heartbeat */
#define HB_TIMEOUT_MS 600  /* wait for one echo */
#define HB_MISSES 2        /* consecutive misses that mean "dead" */
/* idle came, with no interrupt, and no reply: ipykernel sends its reply
 * before idle, so one still missing this long after it will not come (the
 * kernel could not send it: text it cannot encode; or kbox refused it) */
#define REPLY_AFTER_IDLE_S 10 /* (a number: the reason says it) */
#define REPLY_AFTER_IDLE_MS (REPLY_AFTER_IDLE_S * 1000)
#define SECONDS_TEXT(n) #n
#define SECONDS(n) SECONDS_TEXT(n)
#define IDLE_NO_REPLY_MS 500 /* after an interrupt: idle came, the reply may still */
#define REASK_MS 2000        /* after an asked interrupt's KeyboardInterrupt: no reply, again */
#define REPLY_IDLE_MS 2000   /* after the reply, iopub silence that asks whether idle comes */
#define REPLY_PROBES 2       /* kernel_info probes before that silence means iopub broke */
#define STDIN_LINK_MS 5000   /* longest wait for stdin's handshake before an execution */
#define SETTLE_MS 2000       /* the kernel_info round trip after a stop_on_error failure */
#define INTERRUPT_MS 2000    /* wait for interrupt_reply (no interrupt hook) */
#define GRACE_MS 5000        /* default grace period after an interrupt */
#define RECONNECT_MS 10000   /* readiness wait after iopub was reconnected */

/* Fill X's reason (a message for people: truncation is acceptable). */
void exec_set_reason(kbox_exec_t *x, const char *fmt, ...)
{
	va_list ap;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(x->reason, sizeof x->reason, fmt, ap);
	va_end(ap);
	client_text_cut(x->reason, sizeof x->reason, n);
}

const char *kbox_exec_status_name(kbox_exec_status_t status)
{
	switch (status) {
	case KBOX_EXEC_OK:
		return "ok";
	case KBOX_EXEC_ERROR:
		return "error";
	case KBOX_EXEC_ABORTED:
		return "aborted";
	case KBOX_EXEC_TIMEOUT:
		return "timeout";
	case KBOX_EXEC_DIED:
		return "died";
	case KBOX_EXEC_INTERRUPTED:
		return "interrupted";
	}
	return "unknown";
}

/* Collect *MSG_P into X (taking it).  0, or -1 when out of memory. */
static int exec_keep(kbox_exec_t *x, kbox_msg_t **msg_p)
{
	if (x->n_outputs == x->cap_outputs) {
		size_t cap = x->cap_outputs ? x->cap_outputs * 2 : 8;
		kbox_msg_t **v = realloc(x->outputs, cap * sizeof *v);
		if (!v)
			return -1;
		x->outputs = v;
		x->cap_outputs = cap;
	}
	x->outputs[x->n_outputs++] = *msg_p;
	*msg_p = NULL;
	return 0;
}

/* Free RUN (its request and input lines); accepts NULL. */
static void exec_run_free(exec_run_t *run)
{
	if (!run)
		return;
	kbox_msg_destroy(&run->req);
	for (size_t i = 0; run->lines && i < run->o.n_input; i++)
		free(run->lines[i]);
	free(run->lines);
	free(run);
}

/* Finish X's bookkeeping and take it off SELF (timers, heartbeat, its
 * requests and readiness wait): DONE (*DONE_P with *ARG_P) is then the
 * caller's to call, last. */
void exec_close(kbox_client_t *self, kbox_exec_t *x, kbox_exec_done_cb **done_p, void **arg_p)
{
	exec_run_t *run = x->run;
	if (x->reply && !run->o.no_stop_on_error) {
		json_t *st = json_object_get(kbox_msg_content(x->reply), "status");
		self->settle = !json_is_string(st) || strcmp(json_string_value(st), "ok") != 0;
	}
	if (x->status == KBOX_EXEC_TIMEOUT && x->reply) {
		json_t *cnt = json_object_get(kbox_msg_content(x->reply), "execution_count");
		if (json_is_integer(cnt))
			x->count = (int)json_integer_value(cnt);
	}
	x->seconds = (double)(kx_now_ms() - run->start) / 1000.0;
	client_cancel_timer(self, &run->t_deadline);
	client_cancel_timer(self, &run->t_watch);
	client_cancel_timer(self, &run->t_phase);
	client_cancel_timer(self, &run->t_hb);
	client_cancel_timer(self, &run->t_asked);
	client_cancel_timer(self, &run->t_noreply);
	if (run->hb_waiting) /* a REQ socket whose echo is still out is stuck */
		channel_close(self, KBOX_CH_HB);
	if (self->ready && self->ready->owner == run) {
		ready_t *rd = self->ready;
		ready_unlink(self, rd);
		free(rd);
	}
	requests_cancel(self, run);
	calls_cancel(run->calls);
	run->calls = NULL;
	if (self->exec == x)
		self->exec = NULL;
	self->exec_epoch++;
	*done_p = run->done;
	*arg_p = run->arg;
	exec_run_free(run);
	x->run = NULL;
}

/* End X as it stands: DONE is the last thing done. */
static void exec_end(kbox_client_t *self, kbox_exec_t *x)
{
	kbox_exec_done_cb *done;
	void *arg;
	exec_close(self, x, &done, &arg);
	done(arg, x);
}

/* End X with STATUS and REASON. */
static void exec_stop(kbox_client_t *self, kbox_exec_t *x, kbox_exec_status_t status,
                      const char *reason)
{
	x->status = status;
	exec_set_reason(x, "%s", reason);
	exec_end(self, x);
}

/* Both the reply and idle came and the output queued behind them was
 * taken: the status is the reply's. */
void exec_finish(kbox_client_t *self, kbox_exec_t *x)
{
	json_t *rc = kbox_msg_content(x->reply);
	json_t *st = json_object_get(rc, "status");
	json_t *cnt = json_object_get(rc, "execution_count");
	const char *s = json_is_string(st) ? json_string_value(st) : "";
	if (json_is_integer(cnt))
		x->count = (int)json_integer_value(cnt);
	if (x->interrupted && x->run->timed_out) {
		x->status = KBOX_EXEC_TIMEOUT;
		if (!x->reason[0]) {
			char t[32];
			kx_fmt_ms(t, sizeof t, x->run->o.timeout_ms);
			exec_set_reason(
			        x, "timed out after %s; the kernel was interrupted (state kept)",
			        t);
		}
	} else if (strcmp(s, "ok") == 0) {
		x->status = KBOX_EXEC_OK;
	} else if (strcmp(s, "aborted") == 0) {
		x->status = KBOX_EXEC_ABORTED;
		exec_set_reason(x, "the kernel aborted this execution (an earlier one failed)");
	} else {
		/* an error; or a reply that says nothing kbox can read, which
		 * the result must not pass off as the code's failure */
		x->status = KBOX_EXEC_ERROR;
		if (!x->reason[0] && x->reply && kbox__msg_content_unreadable(x->reply))
			exec_set_reason(x,
			                "kbox could not read the kernel's reply to the execution "
			                "(its JSON is nested too deeply, or is no object): whether "
			                "the code succeeded is unknown; what it printed is kept");
		else if (!x->reason[0] && strcmp(s, "error") != 0)
			exec_set_reason(x,
			                "the kernel's reply to the execution gave no status kbox "
			                "knows (ok, error or aborted): whether the code succeeded "
			                "is unknown; what it printed is kept");
	}
	exec_end(self, x);
}

/* 200 ms of draining are enough: a kernel may never stop printing. */
static int exec_on_drain_end(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	(void)loop;
	x->run->t_phase = 0;
	exec_finish(x->run->client, x);
	return 0;
}

/* Take our output already queued behind idle, for a bounded time and
 * through the rate limit (a kernel may never stop): on_iopub reads it. */
static void exec_drain(kbox_client_t *self, kbox_exec_t *x)
{
	x->run->phase = X_DRAIN;
	if (!channel_readable(self, KBOX_CH_IOPUB) ||
	    !(x->run->t_phase = client_add_timer(self, DRAIN_MS, exec_on_drain_end, x)))
		exec_finish(self, x);
}

/* The readiness wait after iopub's reconnection is over: drain. */
static void exec_on_reconnected(void *arg, int rc, const kbox_error_t *err)
{
	kbox_exec_t *x = arg;
	kbox_client_t *self = x->run->client;
	if (rc < 0) {
		if (!self->sock[KBOX_CH_IOPUB])
			self->sock[KBOX_CH_IOPUB] = zsock_new(ZMQ_SUB);
		exec_set_reason(x, "iopub could not be reconnected: %s", err->msg);
	}
	exec_drain(self, x);
}

/* The reply came, and idle too (or output was lost): no deadline or
 * heartbeat any more; drain, after reconnecting iopub if it was lost. */
static void exec_both(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	kbox_error_t e = {0};

	client_cancel_timer(self, &run->t_deadline);
	client_cancel_timer(self, &run->t_watch);
	client_cancel_timer(self, &run->t_hb);
	client_cancel_timer(self, &run->t_asked);
	client_cancel_timer(self, &run->t_noreply);
	if (run->hb_waiting) {
		channel_close(self, KBOX_CH_HB);
		run->hb_waiting = false;
	}
	if (!x->output_lost) {
		exec_drain(self, x);
		return;
	}
	/* libzmq ends a connection that sent a message over ZMQ_MAXMSGSIZE
	 * and does not reconnect it: make a new SUB and wait until it hears
	 * the kernel again (a readiness wait of the caller's, if there is one,
	 * hears it as well) */
	run->phase = X_RECONNECT;
	channel_close(self, KBOX_CH_IOPUB);
	if (channel_sock(self, KBOX_CH_IOPUB, &e) &&
	    (self->ready || ready_start(self, RECONNECT_MS, run, exec_on_reconnected, x, &e))) {
		if (self->ready->owner == run)
			return; /* exec_on_reconnected goes on */
	} else {
		if (!self->sock[KBOX_CH_IOPUB])
			self->sock[KBOX_CH_IOPUB] = zsock_new(ZMQ_SUB);
		if (e.code == KBOX_E_DEAD || e.code == KBOX_E_INVALID) {
			/* its socket file is gone, or not a socket now: the kernel is
			 * lost to us (a restart mends it) */
			x->status = KBOX_EXEC_DIED;
			exec_set_reason(x, "iopub could not be reconnected: %s", e.msg);
			exec_end(self, x);
			return;
		}
		exec_set_reason(x, "iopub could not be reconnected: %s", e.msg);
	}
	exec_drain(self, x);
}

/* Answer an input_request REQ with the next scripted line, or EOF. */
static void answer_input(kbox_client_t *self, kbox_exec_t *x, const kbox_msg_t *req, bool eof)
{
	exec_run_t *run = x->run;
	const char *value = !eof && x->inputs_answered < run->o.n_input
	                            ? run->lines[x->inputs_answered]
	                            : "\x04";
	json_t *c = json_pack("{s:s}", "value", value ? value : "");
	kbox_msg_t *reply = kbox_client_msg(self, "input_reply", &c);
	if (!reply)
		return;
	kbox_msg_set_parent(reply, req);
	if (kbox_client_send(self, KBOX_CH_STDIN, reply, NULL) == 0)
		x->inputs_answered++;
	kbox_msg_destroy(&reply);
}

static bool exec_ping(kbox_client_t *self, kbox_exec_t *x);

/* No echo to X's ping (or it could not be sent): the REQ socket is stuck,
 * make a new one; a second miss in a row means the kernel is dead, unless
 * something else came meanwhile.  True when X ended. */
static bool exec_hb_missed(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	channel_close(self, KBOX_CH_HB);
	run->hb_waiting = false;
	if (run->last_activity > run->hb_sent) {
		run->hb_misses = 0;
		return false;
	}
	if (++run->hb_misses >= HB_MISSES) {
		exec_stop(self, x, KBOX_EXEC_DIED, "the kernel stopped answering heartbeats");
		return true;
	}
	return exec_ping(self, x);
}

/* No echo within HB_TIMEOUT_MS. */
static int exec_on_hb_timeout(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	(void)loop;
	x->run->t_hb = 0;
	exec_hb_missed(x->run->client, x);
	return 0;
}

/* Ping the kernel on hb for X; exec_on_hb or the timer takes the outcome.
 * True when X ended. */
static bool exec_ping(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	zsock_t *hb = channel_sock(self, KBOX_CH_HB, NULL);
	run->hb_sent = kx_now_ms();
	ZMQ_USED(self, KBOX_CH_HB);
	if (hb && zstr_send(hb, "ping") == 0) {
		run->hb_waiting = true;
		if ((run->t_hb = client_add_timer(self, HB_TIMEOUT_MS, exec_on_hb_timeout, x)))
			return false;
	}
	return exec_hb_missed(self, x);
}

static int exec_on_watch(kbox_loop_t *loop, void *arg);

/* The probe's reply: the kernel's shell works (its iopub may not). */
static void exec_on_probe_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	(void)arg;
	(void)err;
	kbox_msg_destroy(&reply);
}

/* Ask kernel_info for X, whose reply came but idle not: true when sent. */
static bool exec_probe(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	kbox_error_t e = {0};
	request_t *r = request_start(self, KBOX_CH_SHELL, "kernel_info_request", NULL,
	                             REPLY_IDLE_MS, run, exec_on_probe_reply, x, &e);
	const char *id = r ? kbox_msg_id(r->msg) : NULL;
	if (!id || strlen(id) >= sizeof run->probe_id)
		return false;
	strcpy(run->probe_id, id);
	run->probes++;
	return true;
}

/* A message of X's probe came on iopub: iopub works, and our idle, sent
 * before it, was lost on the way (counted among those that never
 * arrived): the execution is over. */
void exec_probe_heard(kbox_client_t *self, kbox_exec_t *x)
{
	if (x->run->phase == X_RUN && x->run->got_reply && !x->run->got_idle)
		exec_both(self, x);
}

/* Wake X's watch when the next silence rule could apply. */
static void exec_watch_arm(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	long long now = kx_now_ms();
	long long next = (run->hb_waiting ? now : run->last_activity) + HB_SILENCE_MS;
	if (run->got_reply && run->last_iopub + REPLY_IDLE_MS < next)
		next = run->last_iopub + REPLY_IDLE_MS;
	run->t_watch = client_add_timer(self, next - now, exec_on_watch, x);
}

/* Silence: after the reply, 2 s without iopub means idle is not coming;
 * 1 s without anything, ask whether the kernel is alive (the alive hook,
 * or the heartbeat). */
static int exec_on_watch(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	exec_run_t *run = x->run;
	kbox_client_t *self = run->client;
	long long now = kx_now_ms();
	(void)loop;
	run->t_watch = 0;
	/* iopub waiting unread is not silence: reading a large message can
	 * take longer than the wait itself (a slow machine, a sanitizer) */
	if (run->got_reply && now - run->last_iopub >= REPLY_IDLE_MS &&
	    channel_readable(self, KBOX_CH_IOPUB))
		run->last_iopub = now;
	if (run->got_reply && now - run->last_iopub >= REPLY_IDLE_MS) {
		/* a kernel whose iopub thread is starved (a loaded machine) is
		 * silent as well: ask kernel_info, whose status on iopub comes
		 * after our idle; only a kernel that answers and stays silent
		 * has lost iopub */
		if (run->probes < REPLY_PROBES && exec_probe(self, x)) {
			run->last_iopub = now;
			exec_watch_arm(self, x);
			return 0;
		}
		x->output_lost = true;
		exec_both(self, x);
		return 0;
	}
	if (!run->hb_waiting && now - run->last_activity >= HB_SILENCE_MS) {
		/* an owned kernel is alive while its process is: kernels that serve
		 * the heartbeat from their main loop miss beats while they compute */
		if (self->hooks.alive) {
			if (!self->hooks.alive(self->hooks.arg)) {
				exec_stop(self, x, KBOX_EXEC_DIED, "the kernel process exited");
				return 0;
			}
			run->last_activity = now;
		} else if (exec_ping(self, x)) {
			return 0;
		}
	}
	exec_watch_arm(self, x);
	return 0;
}

/* The interrupt_request was answered (or not: the reason says so). */
static void exec_on_interrupt_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	kbox_exec_t *x = arg;
	kbox_msg_destroy(&reply);
	if (err && !x->reason[0])
		exec_set_reason(x, "interrupt failed: %s", err->msg);
}

/* Interrupt the kernel for X: the hook, or interrupt_request on control
 * (its reply is waited for on the loop).  0 or -1 with ERR. */
static int exec_interrupt_now(kbox_client_t *self, kbox_exec_t *x, kbox_error_t *err)
{
	if (self->hooks.interrupt)
		return self->hooks.interrupt(self->hooks.arg, err);
	return request_start(self, KBOX_CH_CONTROL, "interrupt_request", NULL, INTERRUPT_MS, x->run,
	                     exec_on_interrupt_reply, x, err)
	               ? 0
	               : -1;
}

static int exec_on_deadline(kbox_loop_t *loop, void *arg);

static int exec_grace_ms(const exec_run_t *run)
{
	return run->o.grace_ms > 0 ? run->o.grace_ms : GRACE_MS;
}

/* The deadline has passed and the code runs (or did not say so within a
 * grace period): interrupt it; the grace period begins.  0, or -1 when no
 * timer could be set (then it ends now). */
static int exec_timed_interrupt(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	kbox_error_t ie = {0};
	x->interrupted = true;
	run->timed_out = true;
	if (exec_interrupt_now(self, x, &ie) < 0)
		exec_set_reason(x, "interrupt failed: %s", ie.msg);
	client_cancel_timer(self, &run->t_deadline);
	run->t_deadline = client_add_timer(self, exec_grace_ms(run), exec_on_deadline, x);
	return run->t_deadline ? 0 : -1;
}

/* The interrupt of kbox_exec_ask_interrupt, now: the kernel is in the
 * code (or did not say so in time).  One that cannot be made is the
 * execution's reason; the execution goes on. */
static void exec_asked_interrupt(kbox_client_t *self, kbox_exec_t *x)
{
	kbox_error_t ie = {0};
	client_cancel_timer(self, &x->run->t_asked);
	if (exec_interrupt_now(self, x, &ie) < 0)
		exec_set_reason(x, "interrupt failed: %s", ie.msg);
	else
		x->interrupted = true;
}

/* T_ASKED: execute_input did not come within a grace period of the ask;
 * or, REASK_MS after the KeyboardInterrupt of an asked interrupt, no reply
 * came (IPython's pre_execute callbacks print an interrupt and go on to
 * the code): the interrupt is made, once more in the second case. */
static int exec_on_asked(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	(void)loop;
	x->run->t_asked = 0;
	if (!x->run->got_reply && (x->run->reasked || !x->interrupted))
		exec_asked_interrupt(x->run->client, x);
	return 0;
}

/* T_NOREPLY: idle came REPLY_AFTER_IDLE_MS ago, and no reply: the
 * execution ends, an error that says why (else it would wait for ever,
 * and no interrupt could end it: the kernel is idle). */
static int exec_on_no_reply(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	exec_run_t *run = x->run;
	(void)loop;
	run->t_noreply = 0;
	if (run->phase == X_RUN && !run->got_reply)
		exec_stop(
		        run->client, x, KBOX_EXEC_ERROR,
		        "the kernel went idle, but its reply to the execution did not come "
		        "within " SECONDS(
		                REPLY_AFTER_IDLE_S) " s: the kernel could not send it (text it cannot encode, for "
		                                    "one), or kbox could not read it; the kernel itself is unchanged");
	return 0;
}

/* The deadline (or the grace period after an interrupt) is over. */
static int exec_on_deadline(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	exec_run_t *run = x->run;
	kbox_client_t *self = run->client;
	(void)loop;
	run->t_deadline = 0;
	if (run->phase == X_RUN && run->asked && !run->timed_out && x->interrupted &&
	    x->went_idle && !run->got_reply) {
		/* the interrupt asked for lost the reply: the code was interrupted */
		exec_stop(self, x, KBOX_EXEC_INTERRUPTED, run->asked_why);
		return 0;
	}
	if (run->phase == X_RUN && run->o.interrupt_on_timeout && !x->interrupted) {
		/* before execute_input the kernel is not yet in the code, and
		 * ipykernel has a moment there (pre_handler_hook, before its
		 * try) where SIGINT escapes to its event loop and the kernel
		 * exits: wait for execute_input, a grace period at most */
		if (!run->got_input && !run->deferred) {
			run->deferred = true;
			run->t_deadline = client_add_timer(self, exec_grace_ms(run),
			                                   exec_on_deadline, x);
			if (run->t_deadline)
				return 0;
		}
		if (exec_timed_interrupt(self, x) == 0)
			return 0;
	}
	x->status = KBOX_EXEC_TIMEOUT;
	if (!x->reason[0]) {
		char t[32];
		kx_fmt_ms(t, sizeof t, run->o.timeout_ms);
		exec_set_reason(
		        x,
		        !x->interrupted ? "timed out after %s"
		        : x->went_idle
		                ? "timed out after %s; the kernel was interrupted (state kept)"
		                : "timed out after %s; interrupted, but the kernel did not "
		                  "finish within the grace period",
		        t);
	}
	exec_end(self, x);
	return 0;
}

/* Send X's execute_request; from now on the deadline and the watch run.
 * 0, or -1 with ERR when it could not be sent. */
static int exec_send(kbox_client_t *self, kbox_exec_t *x, kbox_error_t *err)
{
	exec_run_t *run = x->run;
	long long now = kx_now_ms();
	if ((run->o.timeout_ms > 0 &&
	     !(run->t_deadline = client_add_timer(self, run->start + run->o.timeout_ms - now,
	                                          exec_on_deadline, x))) ||
	    !(run->t_watch = client_add_timer(self, HB_SILENCE_MS, exec_on_watch, x))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	if (kbox_client_send(self, KBOX_CH_SHELL, run->req, err) < 0)
		goto fail;
	run->phase = X_RUN;
	run->last_activity = run->last_iopub = kx_now_ms();
	kbox__bucket_init(&run->bucket, run->o.max_msgs_per_sec, run->o.max_bytes_per_sec,
	                  kx_now_ms());
	return 0;
fail:
	client_cancel_timer(self, &run->t_deadline);
	client_cancel_timer(self, &run->t_watch);
	return -1;
}

/* A send after kbox_client_execute_begin returned failed: X ends DIED,
 * marked unsent (kbox_client_execute turns that into its NULL). */
static void exec_unsent(kbox_client_t *self, kbox_exec_t *x, const kbox_error_t *e)
{
	x->unsent = e->code ? e->code : KBOX_E_SYSTEM;
	exec_stop(self, x, KBOX_EXEC_DIED, e->msg);
}

/* The settling round trip is over (answered or not): send. */
static void exec_on_settled(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	kbox_exec_t *x = arg;
	kbox_client_t *self = x->run->client;
	kbox_error_t e = {0};
	(void)err;
	kbox_msg_destroy(&reply);
	if (exec_send(self, x, &e) < 0)
		exec_unsent(self, x, &e);
}

/* stdin is linked (or not after 5 s): make the settle round trip if one is
 * due, else send.  0, or -1 with ERR when the request could not be sent. */
static int exec_go(kbox_client_t *self, kbox_exec_t *x, kbox_error_t *err)
{
	/* After an error reply with stop_on_error, ipykernel goes on aborting
	 * execute_requests for one more event-loop turn (ipykernel#609); a
	 * shell round trip closes that window so this request is not aborted. */
	if (self->settle) {
		self->settle = false;
		x->run->phase = X_SETTLE;
		if (request_start(self, KBOX_CH_SHELL, "kernel_info_request", NULL, SETTLE_MS,
		                  x->run, exec_on_settled, x, NULL))
			return 0;
	}
	return exec_send(self, x, err);
}

/* The wait for stdin's handshake is over, either way. */
void exec_linked(kbox_client_t *self, kbox_exec_t *x)
{
	kbox_error_t e = {0};
	client_cancel_timer(self, &x->run->t_phase);
	if (exec_go(self, x, &e) < 0)
		exec_unsent(self, x, &e);
}

/* stdin's handshake did not come within STDIN_LINK_MS: send anyway. */
static int exec_on_link_wait(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	(void)loop;
	x->run->t_phase = 0;
	exec_linked(x->run->client, x);
	return 0;
}

/* Call X's on_msg with M on CH.  False when SELF or X is gone since (then
 * neither may be touched); *RC gets its return value. */
static bool exec_callback(kbox_client_t *self, kbox_exec_t *x, kbox_channel_t ch,
                          const kbox_msg_t *m, int *rc)
{
	unsigned long epoch = self->exec_epoch;
	guard_t g;
	*rc = 0;
	if (!x->run->o.on_msg)
		return true;
	client_guard_on(self, &g);
	*rc = x->run->o.on_msg(x->run->o.cb_arg, ch, m);
	return !client_guard_off(self, &g) && self->exec_epoch == epoch;
}

/* Is M a status message saying idle? */
static bool is_idle(const kbox_msg_t *m)
{
	return strcmp(kbox_msg_type(m), "status") == 0 &&
	       kbox__msg_content_is(m, "execution_state", "idle");
}

/* X's own iopub message *M_P (taken when collected). */
void exec_output(kbox_client_t *self, kbox_exec_t *x, kbox_msg_t **m_p)
{
	exec_run_t *run = x->run;
	bool both_came = run->phase != X_RUN; /* draining: the callback cannot stop it */
	int rc;
	if (!both_came && !run->got_input && strcmp(kbox_msg_type(*m_p), "execute_input") == 0) {
		run->got_input = true;
		if (run->deferred && !x->interrupted && !run->got_reply &&
		    exec_timed_interrupt(self, x) < 0) {
			exec_stop(self, x, KBOX_EXEC_TIMEOUT,
			          "timed out; out of memory for the grace period");
			return;
		}
		if (run->asked && !x->interrupted && !run->got_reply)
			exec_asked_interrupt(self, x);
	}
	if (!both_came && run->asked && x->interrupted && !run->reasked && !run->got_reply &&
	    strcmp(kbox_msg_type(*m_p), "error") == 0 &&
	    kbox__msg_content_is(*m_p, "ename", "KeyboardInterrupt")) {
		/* the interrupt was shown; the reply should follow it at once,
		 * unless a callback of IPython's took it and the code goes on */
		run->reasked = true;
		client_cancel_timer(self, &run->t_asked);
		run->t_asked = client_add_timer(self, REASK_MS, exec_on_asked, x);
	}
	if (!both_came && is_idle(*m_p)) {
		run->got_idle = x->went_idle = true;
		/* idle with no reply after an interrupt: the interrupt came
		 * between the code and its reply (or before the code), and
		 * ipykernel dropped the reply.  The kernel is fine; a reply in
		 * flight has a moment to come, not the whole grace period (nor,
		 * after kbox_exec_ask_interrupt, forever) */
		if (x->interrupted && !run->got_reply && (run->t_deadline || run->asked)) {
			client_cancel_timer(self, &run->t_deadline);
			run->t_deadline = client_add_timer(self, IDLE_NO_REPLY_MS, exec_on_deadline,
			                                   x);
		} else if (!run->got_reply && !run->t_noreply)
			run->t_noreply = client_add_timer(self, REPLY_AFTER_IDLE_MS,
			                                  exec_on_no_reply, x);
	}
	if (!exec_callback(self, x, KBOX_CH_IOPUB, *m_p, &rc))
		return;
	if (rc != 0 && !both_came) {
		exec_stop(self, x, KBOX_EXEC_TIMEOUT, "stopped by the caller");
		return;
	}
	if (run->o.collect && exec_keep(x, m_p) < 0 && !both_came) {
		exec_stop(self, x, KBOX_EXEC_DIED, "out of memory");
		return;
	}
	if (!both_came && run->got_reply && run->got_idle)
		exec_both(self, x);
}

/* *M_P came on shell or control (CH): activity for the execution running;
 * its execute_reply is taken (then true). */
bool exec_on_reply(kbox_client_t *self, kbox_channel_t ch, kbox_msg_t **m_p)
{
	kbox_exec_t *x = self->exec;
	const char *pid = *m_p ? kbox_msg_parent_id(*m_p) : NULL;

	if (!x || x->run->phase != X_RUN)
		return false;
	x->run->last_activity = kx_now_ms();
	if (ch != KBOX_CH_SHELL || !pid || x->reply || strcmp(pid, x->run->req_id) != 0 ||
	    strcmp(kbox_msg_type(*m_p), "execute_reply") != 0)
		return false;
	x->reply = *m_p;
	*m_p = NULL;
	x->run->got_reply = true;
	if (x->run->got_idle)
		exec_both(self, x);
	return true;
}

/* stdin: the execution's input_requests, answered from its lines. */
void exec_on_stdin(kbox_client_t *self)
{
	kbox_msg_t *m = client_read_one(self, KBOX_CH_STDIN);
	kbox_exec_t *x = self->exec;
	exec_run_t *run = x && x->run->phase == X_RUN ? x->run : NULL;
	const char *pid = m ? kbox_msg_parent_id(m) : NULL;
	int rc;

	if (run)
		run->last_activity = kx_now_ms();
	if (!run || !pid || strcmp(pid, run->req_id) != 0 ||
	    strcmp(kbox_msg_type(m), "input_request") != 0)
		goto out;
	if (calls_is_request(x, m)) {
		/* host functions' calls: not the code's input(), and not shown */
		if (!run->got_reply)
			calls_begin(self, x, &m);
		goto out;
	}
	if (!exec_callback(self, x, KBOX_CH_STDIN, m, &rc))
		goto out;
	if (rc != 0) {
		/* answer EOF so the kernel is not left blocked in input() */
		if (!run->got_reply)
			answer_input(self, x, m, true);
		kbox_msg_destroy(&m);
		exec_stop(self, x, KBOX_EXEC_TIMEOUT, "stopped by the caller");
		return;
	}
	if (!run->got_reply)
		answer_input(self, x, m, false);
out:
	kbox_msg_destroy(&m);
}

/* hb: the echo of the execution's ping. */
void exec_on_hb(kbox_client_t *self)
{
	kbox__parts_t p;
	kbox_exec_t *x = self->exec;
	if (client_recv(self, KBOX_CH_HB, &p) < 0)
		return;
	kbox__parts_close(&p);
	if (x && x->run->hb_waiting) {
		client_cancel_timer(self, &x->run->t_hb);
		x->run->hb_waiting = false;
		x->run->hb_misses = 0;
		x->run->last_activity = kx_now_ms();
	}
}

/* The execute_request for O (with stdin allowed when STDIN_ON): new, or
 * NULL with ERR. */
static kbox_msg_t *exec_request(kbox_client_t *self, const kbox_exec_opts_t *o, bool stdin_on,
                                kbox_error_t *err)
{
	kbox_msg_t *req;
	json_t *ue = o->user_expressions ? json_incref(o->user_expressions) : json_object();
	json_t *c = json_pack("{s:s, s:b, s:b, s:o, s:b, s:b}", "code", o->code, "silent",
	                      o->silent, "store_history", !o->silent && !o->no_store_history,
	                      "user_expressions", ue, "allow_stdin", stdin_on, "stop_on_error",
	                      !o->no_stop_on_error);
	if (!c) {
		kbox_error_set(err, KBOX_E_INVALID, "execute: code is not valid UTF-8");
		return NULL;
	}
	if (!(req = kbox_client_msg(self, "execute_request", &c)))
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	return req;
}

/* A new run of X for SELF, sending REQ (taken) with the caller's O (its
 * input lines copied; the code and user_expressions are in REQ): new, or
 * NULL when out of memory (REQ is then freed). */
static exec_run_t *exec_run_new(kbox_client_t *self, kbox_msg_t **req_p, const kbox_exec_opts_t *o,
                                kbox_exec_done_cb *done, void *arg)
{
	exec_run_t *run = calloc(1, sizeof *run);
	if (!run) {
		kbox_msg_destroy(req_p);
		return NULL;
	}
	run->req = *req_p;
	*req_p = NULL;
	run->o = *o;
	run->o.code = NULL;
	run->o.user_expressions = NULL;
	run->o.n_input = 0;
	if (o->input_lines && o->n_input) {
		if (!(run->lines = calloc(o->n_input, sizeof *run->lines)))
			goto nomem;
		for (; run->o.n_input < o->n_input; run->o.n_input++)
			if (o->input_lines[run->o.n_input] &&
			    !(run->lines[run->o.n_input] = strdup(o->input_lines[run->o.n_input])))
				goto nomem;
	}
	run->o.input_lines = (const char *const *)run->lines;
	run->client = self;
	run->req_id = kbox_msg_id(run->req);
	run->start = kx_now_ms();
	run->done = done;
	run->arg = arg;
	return run;
nomem:
	exec_run_free(run);
	return NULL;
}

/* Can SELF begin an execution of O now?  0, or -1 with ERR. */
static int exec_can_begin(kbox_client_t *self, const kbox_exec_opts_t *o, kbox_exec_done_cb *done,
                          kbox_error_t *err)
{
	if (!o || !o->code || !done)
		return kbox_error_set(err, KBOX_E_INVALID, "execute: no code or no callback given");
	if (!self->loop)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "execute: the client is not attached to a loop");
	if (self->exec)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "execute: an execution is already running");
	return 0;
}

kbox_exec_t *kbox_client_execute_begin(kbox_client_t *self, const kbox_exec_opts_t *o,
                                       kbox_exec_done_cb *done, void *arg, kbox_error_t *err)
{
	kbox_exec_t *x = NULL;
	exec_run_t *run = NULL;
	kbox_msg_t *req;
	bool stdin_on;

	if (exec_can_begin(self, o, done, err) < 0)
		return NULL;
	stdin_on = o->allow_stdin || o->input_lines != NULL;
	if (!(req = exec_request(self, o, stdin_on, err)))
		return NULL;
	if (!(x = calloc(1, sizeof *x)) || !(run = exec_run_new(self, &req, o, done, arg)))
		goto nomem;
	x->count = -1;
	x->run = run;
	/* host functions' calls come on stdin, whether input() may or not */
	stdin_on = stdin_on || (o->functions && kbox_functions_count(o->functions) > 0);
	if (stdin_on && !channel_sock(self, KBOX_CH_STDIN, err))
		goto fail;
	if (stdin_on && self->mon[KBOX_CH_STDIN] && !self->linked[KBOX_CH_STDIN]) {
		/* the kernel drops input requests to a peer it does not know yet */
		run->phase = X_LINK;
		if (!(run->t_phase = client_add_timer(self, STDIN_LINK_MS, exec_on_link_wait, x)))
			goto nomem;
	} else if (exec_go(self, x, err) < 0) {
		goto fail;
	}
	self->exec = x;
	return x;
nomem:
	kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
fail:
	if (run) {
		client_cancel_timer(self, &run->t_phase);
		requests_cancel(self, run);
	}
	exec_run_free(run);
	if (x)
		x->run = NULL;
	kbox_exec_destroy(&x);
	kbox_msg_destroy(&req);
	return NULL;
}

int kbox_exec_interrupt(kbox_exec_t *x, int grace_ms, const char *why, kbox_error_t *err)
{
	exec_run_t *run = x ? x->run : NULL;
	kbox_client_t *self = run ? run->client : NULL;

	if (!run)
		return kbox_error_set(err, KBOX_E_INVALID, "interrupt: the execution has ended");
	if (run->got_reply)
		return 0; /* it is ending anyway */
	if (grace_ms < 0)
		grace_ms = GRACE_MS;
	if (run->phase == X_RUN && exec_interrupt_now(self, x, err) < 0)
		return -1;
	if (run->phase != X_RUN) {
		/* not sent yet: nothing to interrupt, it just ends */
		client_cancel_timer(self, &run->t_phase);
		requests_cancel(self, run);
		grace_ms = 0;
	} else {
		x->interrupted = true;
	}
	exec_set_reason(x, "%s", why ? why : "interrupted");
	client_cancel_timer(self, &run->t_deadline);
	if (!(run->t_deadline = client_add_timer(self, grace_ms, exec_on_deadline, x)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	return 0;
}

int kbox_exec_ask_interrupt(kbox_exec_t *x, const char *why, kbox_error_t *err)
{
	exec_run_t *run = x ? x->run : NULL;
	kbox_client_t *self = run ? run->client : NULL;

	if (!run)
		return kbox_error_set(err, KBOX_E_INVALID, "interrupt: the execution has ended");
	if (run->phase != X_RUN)
		return kbox_exec_interrupt(x, 0, why, err); /* never sent: it ends */
	if (run->got_reply || (run->asked && !x->interrupted))
		return 0; /* it is ending, or its interrupt waits for execute_input */
	if (!run->asked)
		snprintf(run->asked_why, sizeof run->asked_why, "%s", why ? why : "interrupted");
	if (run->got_input || x->interrupted) { /* (again: as a person would) */
		kbox_error_t ie = {0};
		if (exec_interrupt_now(self, x, &ie) < 0)
			return kbox_error_set(err, ie.code, "%s", ie.msg);
		run->asked = x->interrupted = true;
		return 0;
	}
	/* before execute_input the kernel is not in the code yet, and
	 * ipykernel has a moment there (pre_handler_hook, before its try)
	 * where SIGINT escapes to its event loop: wait for it, a grace period
	 * at most */
	if (!(run->t_asked = client_add_timer(self, GRACE_MS, exec_on_asked, x)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	run->asked = true;
	return 0;
}

/* kbox_client_execute's callback: the execution is done, stop the loop. */
static void wait_exec_cb(void *arg, kbox_exec_t *x)
{
	waiter_t *w = arg;
	(void)x;
	w->done = true;
	kbox_loop_stop(w->loop);
}

kbox_exec_t *kbox_client_execute(kbox_client_t *self, const kbox_exec_opts_t *o, kbox_error_t *err)
{
	waiter_t w = {0};
	kbox_exec_t *x;
	if (!o || !o->code) {
		kbox_error_set(err, KBOX_E_INVALID, "execute: no code given");
		return NULL;
	}
	if (client_wait_begin(self, &w, "execute", err) < 0)
		return NULL;
	x = kbox_client_execute_begin(self, o, wait_exec_cb, &w, err);
	client_wait_end(self, &w, x != NULL);
	if (x && x->unsent) { /* as before it was begun: NULL with ERR */
		kbox_error_set(err, x->unsent, "%s", x->reason);
		kbox_exec_destroy(&x);
	}
	return x;
}

void kbox_exec_destroy(kbox_exec_t **self_p)
{
	kbox_exec_t *x;
	if (!self_p || !*self_p)
		return;
	x = *self_p;
	if (x->run) { /* given up before DONE (which is then not called) */
		kbox_exec_done_cb *done;
		void *arg;
		exec_close(x->run->client, x, &done, &arg);
	}
	kbox_msg_destroy(&x->reply);
	json_decref(x->calls);
	for (size_t i = 0; i < x->n_outputs; i++)
		kbox_msg_destroy(&x->outputs[i]);
	free(x->outputs);
	kbox__seq_free(&x->seq);
	free(x);
	*self_p = NULL;
}

kbox_exec_status_t kbox_exec_status(const kbox_exec_t *self)
{
	return self->status;
}
int kbox_exec_count(const kbox_exec_t *self)
{
	return self->count;
}
const kbox_msg_t *kbox_exec_reply(const kbox_exec_t *self)
{
	return self->reply;
}
bool kbox_exec_asked_exit(const kbox_exec_t *self)
{
	json_t *item;
	size_t i;
	json_array_foreach(self->reply ? json_object_get(kbox_msg_content(self->reply), "payload")
	                               : NULL,
	                   i, item)
	{
		json_t *src = json_object_get(item, "source");
		if (json_is_string(src) && strcmp(json_string_value(src), "ask_exit") == 0 &&
		    !json_is_true(json_object_get(item, "keepkernel")))
			return true;
	}
	return false;
}
bool kbox_exec_interrupted(const kbox_exec_t *self)
{
	return self->interrupted;
}
double kbox_exec_seconds(const kbox_exec_t *self)
{
	return self->seconds;
}
size_t kbox_exec_output_count(const kbox_exec_t *self)
{
	return self->n_outputs;
}
const kbox_msg_t *kbox_exec_output(const kbox_exec_t *self, size_t i)
{
	return i < self->n_outputs ? self->outputs[i] : NULL;
}
size_t kbox_exec_inputs_answered(const kbox_exec_t *self)
{
	return self->inputs_answered;
}
size_t kbox_exec_rate_dropped(const kbox_exec_t *self, size_t *bytes)
{
	if (bytes)
		*bytes = self->rate_dropped_bytes;
	return self->rate_dropped;
}
void kbox_exec_dropped(const kbox_exec_t *self, kbox_exec_drops_t *out)
{
	*out = self->drops;
	/* (once its idle came, what is numbered after it is not its own) */
	out->never_arrived = self->went_idle ? kbox__seq_lost_ours(&self->seq)
	                                     : kbox__seq_lost(&self->seq);
}
bool kbox_exec_output_lost(const kbox_exec_t *self)
{
	return self->output_lost;
}
bool kbox_exec_went_idle(const kbox_exec_t *self)
{
	return self->went_idle;
}
const char *kbox_exec_reason(const kbox_exec_t *self)
{
	return self->reason;
}
