/* src/request.c — a request on shell or control and its reply, on the
 * client's loop (each request its own timer; the replies come through
 * client.c's handler), and the requests of the API besides execute:
 * kernel_info, complete, inspect, is_complete, history, comm_info,
 * shutdown, interrupt. */
#include "client_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Free R (sent or not); accepts NULL. */
void request_free(request_t *r)
{
	if (!r)
		return;
	kbox_msg_destroy(&r->msg);
	free(r);
}

/* Take R off SELF's list and cancel its timer; its callback is then the
 * caller's to call (or not). */
static void request_unlink(kbox_client_t *self, request_t *r)
{
	for (request_t **p = &self->requests; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	r->next = NULL;
	client_cancel_timer(self, &r->timer);
}

/* End R with REPLY (passed on) or ERR: its callback is the last thing done. */
void request_end(kbox_client_t *self, request_t *r, kbox_msg_t *reply, const kbox_error_t *err)
{
	kbox_reply_cb *cb = r->cb;
	void *arg = r->arg;
	request_unlink(self, r);
	request_free(r);
	cb(arg, reply, err);
}

/* Forget the requests OWNER made, without their callbacks. */
void requests_cancel(kbox_client_t *self, const void *owner)
{
	request_t *r = self->requests;
	while (r) {
		request_t *next = r->next;
		if (r->owner == owner) {
			request_unlink(self, r);
			request_free(r);
		}
		r = next;
	}
}

/* No reply within the request's time: it fails with KBOX_E_TIMEOUT. */
static int on_request_timeout(kbox_loop_t *loop, void *arg)
{
	request_t *r = arg;
	kbox_error_t e = {0};
	char t[32];
	(void)loop;
	r->timer = 0; /* spent */
	kx_fmt_ms(t, sizeof t, r->timeout_ms);
	kbox_error_set(&e, KBOX_E_TIMEOUT, "kernel did not answer %s within %s",
	               kbox_msg_type(r->msg), t);
	request_end(r->client, r, NULL, &e);
	return 0;
}

/* Send a request on CHANNEL (client_int.h); its reply or its failure goes
 * to CB(ARG) from the loop. */
request_t *request_start(kbox_client_t *self, kbox_channel_t channel, const char *msg_type,
                         json_t **content_p, int timeout_ms, void *owner, kbox_reply_cb *cb,
                         void *arg, kbox_error_t *err)
{
	kbox_msg_t *msg = kbox_client_msg(self, msg_type, content_p);
	request_t *r = NULL, **tail;

	if (!msg) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	if (channel != KBOX_CH_SHELL && channel != KBOX_CH_CONTROL) {
		kbox_error_set(err, KBOX_E_INVALID, "requests go on shell or control, not %s",
		               kbox_channel_name(channel));
		goto fail;
	}
	if (!self->loop) {
		kbox_error_set(err, KBOX_E_INVALID, "%s: the client is not attached to a loop",
		               msg_type);
		goto fail;
	}
	if (!(r = calloc(1, sizeof *r))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	r->client = self;
	r->msg = msg;
	msg = NULL;
	r->channel = channel;
	r->timeout_ms = timeout_ms > 0 ? timeout_ms : KBOX_REQUEST_TIMEOUT_MS;
	r->owner = owner;
	r->cb = cb;
	r->arg = arg;
	if (!(r->timer = client_add_timer(self, r->timeout_ms, on_request_timeout, r))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	if (kbox_client_send(self, channel, r->msg, err) < 0)
		goto fail;
	for (tail = &self->requests; *tail; tail = &(*tail)->next)
		;
	*tail = r;
	client_alive_tick_arm(self);
	return r;
fail:
	if (r)
		client_cancel_timer(self, &r->timer);
	request_free(r);
	kbox_msg_destroy(&msg);
	return NULL;
}

/* *M_P came on CH: when it answers a request, that request ends with it. */
bool request_on_reply(kbox_client_t *self, kbox_channel_t ch, kbox_msg_t **m_p)
{
	const char *pid = *m_p ? kbox_msg_parent_id(*m_p) : NULL;
	if (!pid)
		return false;
	for (request_t *r = self->requests; r; r = r->next)
		if (r->channel == ch && strcmp(kbox_msg_id(r->msg), pid) == 0) {
			kbox_msg_t *m = *m_p;
			*m_p = NULL;
			request_end(self, r, m, NULL);
			return true;
		}
	return false;
}

int kbox_client_request_begin(kbox_client_t *self, kbox_channel_t channel, const char *msg_type,
                              json_t **content_p, int timeout_ms, kbox_reply_cb *cb, void *arg,
                              kbox_error_t *err)
{
	if (!cb || !msg_type) {
		if (content_p) {
			json_decref(*content_p);
			*content_p = NULL;
		}
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "request: no message type or no callback given");
	}
	return request_start(self, channel, msg_type, content_p, timeout_ms, NULL, cb, arg, err)
	               ? 0
	               : -1;
}

/* kbox_client_request's callback: record the reply, stop the loop. */
static void wait_reply_cb(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	waiter_t *w = arg;
	w->done = true;
	w->reply = reply;
	if (err)
		w->err = *err;
	kbox_loop_stop(w->loop);
}

kbox_msg_t *kbox_client_request(kbox_client_t *self, kbox_channel_t channel, const char *msg_type,
                                json_t **content_p, int timeout_ms, kbox_error_t *err)
{
	waiter_t w = {0};
	bool begun;
	if (client_wait_begin(self, &w, msg_type, err) < 0) {
		if (content_p) {
			json_decref(*content_p);
			*content_p = NULL;
		}
		return NULL;
	}
	begun = kbox_client_request_begin(self, channel, msg_type, content_p, timeout_ms,
	                                  wait_reply_cb, &w, err) == 0;
	client_wait_end(self, &w, begun);
	if (begun && !w.reply && err)
		*err = w.err;
	return w.reply;
}

kbox_msg_t *kbox_client_kernel_info_request(kbox_client_t *self, int timeout_ms, kbox_error_t *err)
{
	kbox_msg_t *reply = kbox_client_request(self, KBOX_CH_SHELL, "kernel_info_request", NULL,
	                                        timeout_ms, err);
	if (reply) {
		json_decref(self->kernel_info);
		self->kernel_info = json_incref(kbox_msg_content(reply));
	}
	return reply;
}

/* Number of code points in S (UTF-8). */
static int codepoints(const char *s)
{
	size_t n = kx_utf8_count(s, strlen(s));
	return n > INT_MAX ? INT_MAX : (int)n;
}

kbox_msg_t *kbox_client_complete(kbox_client_t *self, const char *code, int cursor_pos,
                                 int timeout_ms, kbox_error_t *err)
{
	json_t *c = json_pack("{s:s, s:i}", "code", code, "cursor_pos",
	                      cursor_pos < 0 ? codepoints(code) : cursor_pos);
	if (!c) {
		kbox_error_set(err, KBOX_E_INVALID, "complete: code is not valid UTF-8");
		return NULL;
	}
	return kbox_client_request(self, KBOX_CH_SHELL, "complete_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_inspect(kbox_client_t *self, const char *code, int cursor_pos,
                                int detail_level, int timeout_ms, kbox_error_t *err)
{
	json_t *c = json_pack("{s:s, s:i, s:i}", "code", code, "cursor_pos",
	                      cursor_pos < 0 ? codepoints(code) : cursor_pos, "detail_level",
	                      detail_level);
	if (!c) {
		kbox_error_set(err, KBOX_E_INVALID, "inspect: code is not valid UTF-8");
		return NULL;
	}
	return kbox_client_request(self, KBOX_CH_SHELL, "inspect_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_is_complete(kbox_client_t *self, const char *code, int timeout_ms,
                                    kbox_error_t *err)
{
	json_t *c = json_pack("{s:s}", "code", code);
	if (!c) {
		kbox_error_set(err, KBOX_E_INVALID, "is_complete: code is not valid UTF-8");
		return NULL;
	}
	return kbox_client_request(self, KBOX_CH_SHELL, "is_complete_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_history(kbox_client_t *self, json_t *args, int timeout_ms,
                                kbox_error_t *err)
{
	json_t *c = args ? json_deep_copy(args)
	                 : json_pack("{s:s, s:i, s:b, s:b}", "hist_access_type", "tail", "n", 10,
	                             "output", 0, "raw", 1);
	return kbox_client_request(self, KBOX_CH_SHELL, "history_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_comm_info(kbox_client_t *self, const char *target_name, int timeout_ms,
                                  kbox_error_t *err)
{
	json_t *c = target_name ? json_pack("{s:s}", "target_name", target_name) : json_object();
	return kbox_client_request(self, KBOX_CH_SHELL, "comm_info_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_shutdown(kbox_client_t *self, bool restart, int timeout_ms,
                                 kbox_error_t *err)
{
	json_t *c = json_pack("{s:b}", "restart", restart);
	return kbox_client_request(self, KBOX_CH_CONTROL, "shutdown_request", &c, timeout_ms, err);
}

int kbox_client_interrupt(kbox_client_t *self, int timeout_ms, kbox_error_t *err)
{
	kbox_msg_t *reply;
	if (self->hooks.interrupt)
		return self->hooks.interrupt(self->hooks.arg, err);
	reply = kbox_client_request(self, KBOX_CH_CONTROL, "interrupt_request", NULL, timeout_ms,
	                            err);
	if (!reply)
		return -1;
	kbox_msg_destroy(&reply);
	return 0;
}
