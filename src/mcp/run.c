/* src/mcp/run.c — kbox mcp's run_python: each call one "execute"
 * request (format json-live, with_text) on a control connection of its own
 * (src/runtime/ctl.h), so that the supervisor queues the calls and the
 * server goes on reading; its events kept for an early answer and for
 * progress (cell.c); its reply made the tool's result, with the images
 * inline under --images inline; a cancellation interrupts it. */
#include "config.h"
#include "mcp/mcp_int.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INLINE_MAX (16L * 1024 * 1024) /* --images inline: a result's images in all */
#define CANCEL_GRACE_MS 5000 /* a cancelled call's interrupt, then its connection closes */

int mcp_seconds_arg(json_t *j, long long *ms)
{
	double t = json_number_value(j);
	if (!json_is_number(j) || t < 0 || t * 1000 > (double)CLI_DURATION_MAX_MS)
		return -1;
	*ms = (long long)(t * 1000 + 0.999);
	return 0;
}

json_t *mcp_run_python(mcp_t *m, json_t *id, json_t *progress, json_t *args)
{
	json_t *jcode = json_object_get(args, "code"), *jt = json_object_get(args, "timeout"), *req;
	json_t *jsoft = json_object_get(args, "soft_timeout");
	long long soft = m->soft_ms, now = kx_now_ms();
	mcp_call_t *bg = mcp_background(m);
	kr_ctl_exec_t e = KR_CTL_EXEC_INIT;
	kbox_error_t err = {0};
	json_t *refused;
	char why[1024];
	mcp_call_t *c;
	int fd, sent;
	bool reused;

	if (!json_is_string(jcode))
		return mcp_text_result(true, "run_python: \"code\" (a string) is required");
	if (bg && bg->fd < 0)
		return mcp_text_result(
		        true, "run_python: not run: the code of an earlier call, which was "
		              "still running when that call returned, has ended, and its "
		              "result was not read: call wait_python for it first");
	if (bg)
		return mcp_text_result(
		        true,
		        "run_python: not run: the code of an earlier call is still "
		        "running (for %lld s): call wait_python to wait for its result, "
		        "or wait_python with interrupt true to stop it",
		        (now - bg->begun) / 1000);
	if (jsoft && !json_is_null(jsoft) && mcp_seconds_arg(jsoft, &soft) < 0)
		return mcp_text_result(true,
		                       "run_python: \"soft_timeout\" is a number of seconds from 0 "
		                       "to %lld (%lld days)",
		                       CLI_DURATION_MAX_MS / 1000, CLI_DURATION_MAX_MS / 86400000);
	e.code = json_string_value(jcode);
	e.format = KR_CTL_FMT_JSON_LIVE; /* what it prints as it comes: cell.c */
	e.with_text = true;
	e.grace_ms = KR_CTL_GRACE_DEFAULT_MS;
	e.timeout_ms = m->timeout_ms;
	if (jt && !json_is_null(jt) && mcp_seconds_arg(jt, &e.timeout_ms) < 0)
		return mcp_text_result(true,
		                       "run_python: \"timeout\" is a number of seconds from 0 "
		                       "to %lld (%lld days)",
		                       CLI_DURATION_MAX_MS / 1000, CLI_DURATION_MAX_MS / 86400000);
	if (kr_ctl_exec_fits(&e, &err) < 0 && err.code != KBOX_E_NOMEM)
		return mcp_text_result(true, "run_python: not run: %s", err.msg);
	req = kr_ctl_exec_to_json(&e);
	if ((fd = mcp_session_connect(m, &reused, why, sizeof why)) < 0) {
		json_decref(req);
		return mcp_text_result(true, "run_python: %s", why);
	}
	if (m->type_check && m->functions && m->sess->dir) {
		/* the calls of the host functions checked first (--type-check) */
		char cache[PATH_MAX + 16], *report = NULL;
		json_t *result = NULL;
		snprintf(cache, sizeof cache, "%s/mypy-cache", m->sess->dir);
		if (cli_type_check(MCP_CMD, m->functions, e.code, cache, &report) != EXIT_OK)
			result = mcp_text_result(true, "run_python: not run: %s", cli_last_error());
		else if (report)
			result = mcp_text_result(true, "%s", report);
		free(report);
		if (result) {
			json_decref(req);
			close(fd);
			return result;
		}
	}
	sent = req ? kr_ctl_send(fd, req, &err) : -1;
	if (sent < 0 && req && (reused || err.code == KBOX_E_DEAD)) {
		/* the kept connection ended as it was taken, or the supervisor
		 * as it was reached: a new one (to the next supervisor) */
		close(fd);
		if ((fd = mcp_session_connect(m, &reused, why, sizeof why)) < 0) {
			json_decref(req);
			return mcp_text_result(true, "run_python: %s", why);
		}
		sent = kr_ctl_send(fd, req, &err);
	}
	if (sent < 0 && req && (refused = kr_ctl_refusal(fd))) {
		/* the supervisor said why it closed the connection */
		json_t *result = mcp_run_result(m, refused, NULL, NULL);
		json_decref(refused);
		json_decref(req);
		close(fd);
		return result;
	}
	if (sent < 0 || !(c = calloc(1, sizeof *c))) {
		json_decref(req);
		close(fd);
		cli_error(MCP_CMD, "session %s: %s", m->sess->name,
		          req ? err.msg : "out of memory");
		return mcp_text_result(true, "run_python: session %s: %s", m->sess->name,
		                       req ? err.msg : "out of memory");
	}
	/* (on a kept connection or a new one, a supervisor may end before it
	 * takes the request) */
	c->resend = json_incref(req);
	json_decref(req);
	/* from now: a new session's start, just waited for, is no part of
	 * the code's time (its soft limit would have passed before the code
	 * could begin) */
	now = kx_now_ms();
	c->id = json_incref(id);
	c->fd = fd;
	c->sess = m->sess;
	c->begun = now;
	c->modern = m->req_modern;
	c->soft_deadline = soft > 0 ? now + soft : 0;
	if (progress) {
		c->progress = json_incref(progress);
		c->progress_due = now + MCP_PROGRESS_EVERY_MS;
	}
	c->next = m->calls;
	m->calls = c;
	return NULL;
}

/* The structured content of --structured text: the text of ITEM (a text
 * content item, borrowed) beside the status, execution count and images
 * of RESULT (kbox.result/2, borrowed).  New reference, or NULL. */
static json_t *text_summary(json_t *item, json_t *result)
{
	json_t *images = json_array(), *img, *jcount = json_object_get(result, "execution_count");
	const char *status = json_string_value(json_object_get(result, "status"));
	size_t i;

	json_array_foreach(json_object_get(result, "images"), i, img)
	{
		json_t *w = json_object_get(img, "width"), *h = json_object_get(img, "height");
		json_t *path = json_object_get(img, "path"), *mime = json_object_get(img, "mime");
		if (!json_is_string(mime)) /* kbox.result/2 says it is one */
			continue;
		json_array_append_new(images,
		                      json_pack("{s:O, s:O, s:O, s:O}", "path",
		                                json_is_string(path) ? path : json_null(), "mime",
		                                mime, "width", json_is_integer(w) ? w : json_null(),
		                                "height", json_is_integer(h) ? h : json_null()));
	}
	return json_pack("{s:O, s:s, s:O, s:o}", "text", json_object_get(item, "text"), "status",
	                 status ? status : "error", "execution_count",
	                 json_is_integer(jcount) ? jcount : json_null(), "images", images);
}

json_t *mcp_run_result(mcp_t *m, json_t *r, const char *why, const char *note)
{
	json_t *content, *result, *images, *structured = NULL;
	const char *text, *status;
	size_t i, not_inline = 0;
	long budget = INLINE_MAX; /* what the images inline may still take */
	json_t *img;

	if (!r)
		return mcp_text_result(
		        true, "%s%s%srun_python: session %s: %s; the code's result is lost",
		        note ? "[note: " : "", note ? note : "", note ? "]\n" : "", m->sess->name,
		        why);
	if (kr_ctl_msg_kind(r, NULL) != KR_CTL_MSG_REPLY) {
		const char *msg = json_string_value(json_object_get(r, "error"));
		return mcp_text_result(true, "run_python: session %s: %s", m->sess->name,
		                       msg ? msg : "the supervisor refused the code");
	}
	text = json_string_value(json_object_get(r, "text"));
	status = json_string_value(json_object_get(r, "status"));
	result = json_object_get(r, "result");
	/* never an empty block, which a client may drop: the model would
	 * read nothing, not that nothing was printed */
	if (note) {
		char *both = NULL;
		if (asprintf(&both, "[note: %s]\n%s", note, text ? text : "") < 0)
			both = NULL;
		content = json_pack("[o]", mcp_text_item(both ? both : kx_model_text(text)));
		free(both);
	} else
		content = json_pack("[o]", mcp_text_item(kx_model_text(text)));
	if (!json_is_object(result))
		structured = NULL;
	else if (m->structured == CLI_STRUCTURED_FULL)
		structured = json_incref(result);
	else if (m->structured == CLI_STRUCTURED_TEXT)
		structured = text_summary(json_array_get(content, 0), result);
	images = json_object_get(result, "images");
	json_array_foreach(images, i, img)
	{
		const char *path = json_string_value(json_object_get(img, "path"));
		const char *mime = json_string_value(json_object_get(img, "mime"));
		char ewhy[PATH_MAX + 256];
		json_t *item;
		size_t len = 0;
		if (m->images != MCP_IMAGES_INLINE || !path || !mime ||
		    (strcmp(mime, "image/png") != 0 && strcmp(mime, "image/jpeg") != 0))
			continue;
		/* the first ones up to INLINE_MAX in all; the rest by path */
		if (not_inline) {
			not_inline++;
			continue;
		}
		if ((item = mcp_image_item(m, path, budget, &len, ewhy, sizeof ewhy))) {
			json_array_append_new(content, item);
			budget -= (long)len;
		} else if (!ewhy[0])
			not_inline++;
		else {
			/* kbox's own line, as the text's notes are */
			char line[sizeof ewhy + 64];
			snprintf(line, sizeof line,
			         "[note: an image is not given as image content: %s]", ewhy);
			json_array_append_new(content, mcp_text_item(line));
		}
	}
	if (not_inline) {
		char line[256];
		snprintf(line, sizeof line,
		         "[note: %zu image%s not given as image content: the images of "
		         "one result are at most %ld MiB in all; read each with read_image, by its "
		         "path in the text]",
		         not_inline, not_inline == 1 ? "" : "s", INLINE_MAX >> 20);
		json_array_append_new(content, mcp_text_item(line));
	}
	return mcp_tool_result(content, structured, !status || strcmp(status, "ok") != 0);
}

void mcp_call_drop(mcp_t *m, mcp_call_t *c)
{
	for (mcp_call_t **pp = &m->calls; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (c->fd >= 0)
		close(c->fd);
	json_decref(c->id);
	json_decref(c->progress);
	json_decref(c->resend);
	mcp_call_clear(c);
	free(c);
}

/* The connection C's request went on ended before the supervisor began
 * it (it stopped, and its end had not come yet when a kept connection
 * was taken or a new one made; or it closed a kept one as idle): the
 * request, once, on a new connection.  Whether it was sent. */
static bool resend(mcp_t *m, mcp_call_t *c)
{
	kbox_error_t err = {0};
	json_t *req = c->resend;
	char why[1024];
	bool reused;
	int fd;

	c->resend = NULL;
	close(c->fd);
	c->fd = -1;
	fd = mcp_session_connect(m, &reused, why, sizeof why);
	if (fd >= 0 && kr_ctl_send(fd, req, &err) < 0) {
		close(fd);
		fd = -1;
	}
	json_decref(req);
	c->fd = fd;
	return fd >= 0;
}

void mcp_call_readable(mcp_t *m, mcp_call_t *c)
{
	m->sess = c->sess;
	kbox_error_t err = {0};
	json_t *r = kr_ctl_recv(c->fd, -1, &err);
	kr_ctl_op_t re;
	kr_ctl_msg_kind_t kind = kr_ctl_msg_kind(r, &re);
	const char *why = err.code == KBOX_E_DEAD ? "the session's supervisor went away" : err.msg;

	if (!r && err.code == KBOX_E_DEAD && c->resend && !c->started && !c->cancelled &&
	    resend(m, c))
		return;
	/* the started line, events, and the reply to our own interrupt
	 * (mcp_call_cancel) come before the execution's reply */
	if (kind == KR_CTL_MSG_STARTED) {
		json_decref(c->resend); /* (taken: never sent again) */
		c->resend = NULL;
		const char *notice = json_string_value(json_object_get(r, "notice"));
		c->started = true;
		if (notice && !c->notice)
			c->notice = strdup(notice);
	}
	if (kind == KR_CTL_MSG_EVENT)
		mcp_call_event(m, c, json_object_get(r, "event"));
	if (kind == KR_CTL_MSG_STARTED || kind == KR_CTL_MSG_EVENT ||
	    (r && re == KR_CTL_OP_INTERRUPT)) {
		json_decref(r);
		return;
	}
	if (c->background)
		mcp_call_ended(m, c, r, why); /* kept, or a wait_python's answer */
	else {
		if (!c->cancelled)
			mcp_send_result(m, c->id, mcp_run_result(m, r, why, NULL), c->modern);
		if (!c->cancelled && kind == KR_CTL_MSG_REPLY && re == KR_CTL_OP_EXECUTE) {
			mcp_session_keep(c->sess, c->fd); /* for its next call */
			c->fd = -1;
		}
		mcp_call_drop(m, c);
	}
	json_decref(r);
}

int mcp_call_interrupt(mcp_call_t *c, const char *cause)
{
	kbox_error_t err = {0};
	json_t *req = kr_ctl_request_new(KR_CTL_OP_INTERRUPT);
	int r = req && c->fd >= 0 && json_object_set_new(req, "cause", json_string(cause)) == 0
	                ? kr_ctl_send(c->fd, req, &err)
	                : -1;
	json_decref(req);
	return r < 0 ? -1 : 0;
}

void mcp_call_cancel(mcp_t *m, json_t *id)
{
	for (size_t i = 0; i <= m->n_handles; i++) {
		mcp_sess_t *s = i == 0 ? &m->main : m->handles[i - 1];
		if (s->wait.id && json_equal(s->wait.id, id)) {
			/* a wait_python: it stops waiting; the code goes on */
			json_decref(s->wait.id);
			json_decref(s->wait.progress);
			memset(&s->wait, 0, sizeof s->wait);
			return;
		}
	}
	for (mcp_call_t *c = m->calls; c; c = c->next) {
		if (c->cancelled || !c->id || !json_equal(c->id, id))
			continue;
		c->cancelled = true;
		if (!c->started || mcp_call_interrupt(c, "the client's cancellation "
		                                         "(notifications/cancelled)") < 0) {
			/* waiting for its turn, it leaves the queue; or the
			 * supervisor interrupts it as it sees us go */
			mcp_call_drop(m, c);
			return;
		}
		c->cancel_deadline = kx_now_ms() + CANCEL_GRACE_MS;
		return;
	}
}
