/* src/calls.c — the calls of host functions during an execution
 * (kbox/functions.h): a request of calls from the kernel (an input_request
 * with the set's marker) is read, each call's arguments are checked
 * against its function's schema, the valid calls run through their
 * callbacks (a bounded number at once, a bounded number per execution),
 * and one input_reply answers the request when every call has its
 * answer.  Each call that ends is recorded in the execution's list. */
#include "client_int.h"
#include "functions_int.h"
#include "schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most the results of one request may take in all, as JSON. */
#define REPLY_MAX (64u << 20)

typedef enum { CALL_QUEUED, CALL_RUNNING, CALL_DONE } call_state_t;

struct kbox_call {
	calls_batch_t *batch;
	const kbox__fn_t *fn;
	json_t *args;
	call_state_t state;
	long long t0;
	size_t args_bytes;
};

struct calls_batch {
	kbox_client_t *client;
	kbox_exec_t *x;
	kbox_functions_t *set;
	kbox_msg_t *req; /* the input_request: the reply's parent */
	kbox_call_t *calls;
	json_t *results; /* one per call, null until it is answered */
	size_t n, done, running, next;
	size_t reply_bytes;
	bool dispatching;
};

static size_t json_size(const json_t *v)
{
	return json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* Record call I of B, ended with STATUS (and ERROR, its text, or NULL),
 * RESULT_BYTES of result. */
static void calls_record(calls_batch_t *b, size_t i, const char *status, const char *error,
                         size_t result_bytes)
{
	kbox_call_t *c = &b->calls[i];
	double secs = c->t0 ? (double)(kx_now_ms() - c->t0) / 1000.0 : 0.0;
	json_t *rec = json_pack("{s:s, s:s, s:f, s:I, s:I}", "name", c->fn ? c->fn->name : "?",
	                        "status", status, "seconds", secs, "args_bytes",
	                        (json_int_t)c->args_bytes, "result_bytes",
	                        (json_int_t)result_bytes);
	if (!rec)
		return;
	if (error)
		json_object_set_new(rec, "error", json_string(error));
	if (!b->x->calls)
		b->x->calls = json_array();
	if (b->set->observer)
		b->set->observer(b->set->observer_arg, rec);
	if (b->x->calls && json_array_size(b->x->calls) < KBOX_CALLS_RECORDED_MAX)
		json_array_append(b->x->calls, rec);
	json_decref(rec);
}

/* Answer call I of B: RESULT (taken) is its entry of the reply. */
static void calls_answer(calls_batch_t *b, size_t i, json_t *result)
{
	json_array_set_new(b->results, i, result);
	if (b->calls[i].state == CALL_RUNNING)
		b->running--;
	b->calls[i].state = CALL_DONE;
	json_decref(b->calls[i].args);
	b->calls[i].args = NULL;
	b->done++;
}

/* Fail call I of B with KIND ("invalid", "error", "timeout", "budget")
 * and the text WHY. */
static void calls_fail(calls_batch_t *b, size_t i, const char *kind, const char *why)
{
	char text[KBOX_CALL_ERROR_MAX];
	char *fixed = NULL;
	int n = snprintf(text, sizeof text, "%s", why);
	client_text_cut(text, sizeof text, n);
	if (!kx_utf8_valid_str(text))
		fixed = kx_utf8_repair(text, strlen(text), NULL);
	calls_record(b, i, kind, fixed ? fixed : text, 0);
	calls_answer(
	        b, i,
	        json_pack("{s:b, s:s, s:s}", "ok", 0, "kind", kind, "error", fixed ? fixed : text));
	free(fixed);
}

/* Send B's reply: every call has its answer.  B is freed. */
static void calls_reply(calls_batch_t *b)
{
	kbox_client_t *self = b->client;
	json_t *v = json_pack("{s:O}", "results", b->results);
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_t *c = text ? json_pack("{s:s}", "value", text) : NULL;
	kbox_msg_t *reply = c ? kbox_client_msg(self, "input_reply", &c) : NULL;

	json_decref(v);
	free(text);
	if (reply) {
		kbox_msg_set_parent(reply, b->req);
		kbox_client_send(self, KBOX_CH_STDIN, reply, NULL);
		kbox_msg_destroy(&reply);
	}
	if (b->x->run && b->x->run->calls == b)
		b->x->run->calls = NULL;
	calls_batch_free(b);
}

/* Start B's queued calls while fewer than the cap run; reply once all
 * are answered. */
static void calls_dispatch(calls_batch_t *b)
{
	if (b->dispatching)
		return;
	b->dispatching = true;
	while (b->next < b->n && b->running < b->set->max_concurrent) {
		kbox_call_t *c = &b->calls[b->next++];
		if (c->state != CALL_QUEUED)
			continue;
		c->state = CALL_RUNNING;
		c->t0 = kx_now_ms();
		b->running++;
		c->fn->run(c->fn->arg, c);
	}
	b->dispatching = false;
	if (b->done == b->n)
		calls_reply(b);
}

/* Call I of B as the kernel sent it (C): checked, then queued, or failed
 * at once. */
static void calls_take(calls_batch_t *b, size_t i, json_t *c)
{
	kbox_exec_t *x = b->x;
	kbox_call_t *call = &b->calls[i];
	const char *name = json_string_value(json_object_get(c, "name"));
	json_t *args = json_object_get(c, "args");
	char why[KBOX_CALL_ERROR_MAX];
	int rc;

	call->batch = b;
	call->fn = name ? kbox__functions_find(b->set, name) : NULL;
	if (!call->fn) {
		/* (counted too: a flood of them is a flood of records) */
		if (x->n_calls < b->set->max_calls)
			x->n_calls++;
		snprintf(why, sizeof why, "there is no host function %.80s",
		         name ? name : "(unnamed)");
		calls_fail(b, i, "invalid", why);
		return;
	}
	if (!args)
		args = json_object();
	else
		json_incref(args);
	call->args = args;
	call->args_bytes = json_size(args);
	if (x->n_calls >= b->set->max_calls) {
		snprintf(why, sizeof why,
		         "this execution has made the %zu calls it may make: make fewer calls "
		         "(one call can do more), or go on in another execution",
		         b->set->max_calls);
		calls_fail(b, i, "budget", why);
		return;
	}
	x->n_calls++;
	if (!json_is_object(args)) {
		calls_fail(b, i, "invalid", "the arguments must be given by name (a dict)");
		return;
	}
	if (call->args_bytes > KBOX_CALL_ARGS_MAX) {
		snprintf(why, sizeof why,
		         "the arguments take %zu bytes as JSON, over the %u allowed",
		         call->args_bytes, KBOX_CALL_ARGS_MAX);
		calls_fail(b, i, "invalid", why);
		return;
	}
	rc = call->fn->params ? kbox__schema_check(call->fn->params, args, NULL, why, sizeof why)
	                      : (json_object_size(args) ? 1 : 0);
	if (rc > 0 && !call->fn->params)
		snprintf(why, sizeof why, "it takes no arguments");
	if (rc != 0) {
		/* a schema that cannot be used is the host's fault, and said so */
		calls_fail(b, i, rc > 0 ? "invalid" : "error", why);
		return;
	}
	call->state = CALL_QUEUED;
}

void calls_batch_free(calls_batch_t *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		json_decref(b->calls[i].args);
	free(b->calls);
	json_decref(b->results);
	kbox_msg_destroy(&b->req);
	free(b);
}

void calls_cancel(calls_batch_t *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		kbox_call_t *c = &b->calls[i];
		if (c->state == CALL_DONE)
			continue;
		calls_record(b, i, "cancelled", NULL, 0);
		if (c->state == CALL_RUNNING && c->fn->cancel)
			c->fn->cancel(c->fn->arg, c);
		c->state = CALL_DONE;
	}
	calls_batch_free(b);
}

bool calls_is_request(const kbox_exec_t *x, const kbox_msg_t *m)
{
	const kbox_functions_t *set = x->run ? x->run->o.functions : NULL;
	const char *p = json_string_value(json_object_get(kbox_msg_content(m), "prompt"));
	return set && p && strncmp(p, set->marker, strlen(set->marker)) == 0;
}

/* Refuse the request REQ whole: WHY, as its reply's error. */
static void calls_refuse(kbox_client_t *self, const kbox_msg_t *req, const char *why)
{
	json_t *v = json_pack("{s:s}", "error", why);
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_t *c = text ? json_pack("{s:s}", "value", text) : NULL;
	kbox_msg_t *reply = c ? kbox_client_msg(self, "input_reply", &c) : NULL;
	json_decref(v);
	free(text);
	if (reply) {
		kbox_msg_set_parent(reply, req);
		kbox_client_send(self, KBOX_CH_STDIN, reply, NULL);
		kbox_msg_destroy(&reply);
	}
}

void calls_begin(kbox_client_t *self, kbox_exec_t *x, kbox_msg_t **req_p)
{
	kbox_functions_t *set = x->run->o.functions;
	const char *p = json_string_value(json_object_get(kbox_msg_content(*req_p), "prompt"));
	size_t len = strlen(p) - strlen(set->marker);
	json_t *doc = NULL, *calls;
	calls_batch_t *b = NULL;
	char why[256];

	if (x->run->calls) {
		/* the kernel waits for one answer at a time: a second request
		 * means the first is given up (an interrupt) */
		calls_cancel(x->run->calls);
		x->run->calls = NULL;
	}
	if (len > KBOX_CALL_REQUEST_MAX) {
		snprintf(why, sizeof why,
		         "the request of calls takes %zu bytes, over the %u allowed", len,
		         KBOX_CALL_REQUEST_MAX);
		goto refuse;
	}
	if (kx_json_cost(p + strlen(set->marker), len) > KBOX_CALL_DECODE_MAX) {
		snprintf(why, sizeof why,
		         "the request of calls would take more than %u MiB to read: send fewer or "
		         "smaller arguments",
		         KBOX_CALL_DECODE_MAX >> 20);
		goto refuse;
	}
	doc = json_loadb(p + strlen(set->marker), len, JSON_REJECT_DUPLICATES, NULL);
	calls = json_object_get(doc, "calls");
	if (!json_is_array(calls) || json_array_size(calls) == 0) {
		snprintf(why, sizeof why, "the request of calls is not valid");
		goto refuse;
	}
	if (json_array_size(calls) > KBOX_CALL_BATCH_MAX) {
		snprintf(why, sizeof why,
		         "%zu calls at once, over the %d allowed: gather fewer at a time",
		         json_array_size(calls), KBOX_CALL_BATCH_MAX);
		goto refuse;
	}
	if (!(b = calloc(1, sizeof *b)) ||
	    !(b->calls = calloc(json_array_size(calls), sizeof *b->calls)) ||
	    !(b->results = json_array())) {
		snprintf(why, sizeof why, "out of memory");
		goto refuse;
	}
	b->client = self;
	b->x = x;
	b->set = set;
	b->n = json_array_size(calls);
	b->req = *req_p;
	*req_p = NULL;
	for (size_t i = 0; i < b->n; i++)
		json_array_append_new(b->results, json_null());
	x->run->calls = b;
	b->dispatching = true; /* no reply before every call is taken */
	for (size_t i = 0; i < b->n; i++)
		calls_take(b, i, json_array_get(calls, i));
	json_decref(doc);
	b->dispatching = false;
	calls_dispatch(b);
	return;
refuse:
	json_decref(doc);
	if (b) {
		b->req = NULL;
		calls_batch_free(b);
	}
	calls_refuse(self, *req_p, why);
}

/* ---- the embedder's side ---- */

const char *kbox_call_name(const kbox_call_t *call)
{
	return call->fn->name;
}

const json_t *kbox_call_args(const kbox_call_t *call)
{
	return call->args;
}

/* CALL has its answer: the batch goes on. */
static void call_ended(kbox_call_t *call)
{
	calls_batch_t *b = call->batch;
	if (!b->dispatching)
		calls_dispatch(b);
}

void kbox_call_return(kbox_call_t *call, json_t *value)
{
	calls_batch_t *b = call->batch;
	size_t i = (size_t)(call - b->calls), n;
	char why[KBOX_CALL_ERROR_MAX];

	if (call->state != CALL_RUNNING) {
		json_decref(value);
		return;
	}
	if (!value)
		value = json_null();
	n = json_size(value);
	if (n > KBOX_CALL_RESULT_MAX) {
		snprintf(why, sizeof why, "its result takes %zu bytes as JSON, over the %u allowed",
		         n, KBOX_CALL_RESULT_MAX);
		calls_fail(b, i, "error", why);
	} else if (b->reply_bytes + n > REPLY_MAX) {
		snprintf(why, sizeof why,
		         "the results of the calls made together take over %u bytes: gather fewer "
		         "at a time",
		         REPLY_MAX);
		calls_fail(b, i, "error", why);
	} else if (call->fn->returns && kbox__schema_check(call->fn->returns, value, "the result",
	                                                   why, sizeof why) != 0) {
		char text[KBOX_CALL_ERROR_MAX + 64];
		snprintf(text, sizeof text,
		         "the host function's result is not what it promises: %s", why);
		calls_fail(b, i, "error", text);
	} else {
		b->reply_bytes += n;
		calls_record(b, i, "ok", NULL, n);
		calls_answer(b, i, json_pack("{s:b, s:O}", "ok", 1, "value", value));
	}
	json_decref(value);
	call_ended(call);
}

void kbox_call_fail(kbox_call_t *call, bool timeout, const char *fmt, ...)
{
	calls_batch_t *b = call->batch;
	char text[KBOX_CALL_ERROR_MAX];
	va_list ap;

	if (call->state != CALL_RUNNING)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	calls_fail(b, (size_t)(call - b->calls), timeout ? "timeout" : "error", text);
	call_ended(call);
}

const json_t *kbox_exec_calls(const kbox_exec_t *self)
{
	return self->calls;
}
