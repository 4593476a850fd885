/* src/mcp/cell.c — kbox mcp and long cells.  Clients cut a tool call short
 * (Claude Desktop at about 60 s) or give up on a server that says nothing
 * (Claude Code after 300 s without a message).  So, while a run_python
 * call waits, the server sends notifications/progress when the request
 * asked for them (at least every MCP_PROGRESS_EVERY_MS, with the last line
 * the code printed); and a call still running at its soft time limit is
 * answered with what the code printed so far, the code going on in the
 * kernel: wait_python then gives what it prints next and, once it ends,
 * its whole result.  Nothing the code prints is lost: the whole result
 * (and its spill files) has it all. */
#include "config.h"
#include "mcp/mcp_int.h"

#include <kbox/capture.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FRESH_MAX (16L * 1024) /* an early answer shows the end of what was printed */

/* ---- what the code printed since the last answer ---- */

/* Append the kernel's text S[0..LEN) to C's FRESH as a model reads it:
 * escape sequences stripped, a line that begins like one of kbox's own
 * quoted (kx_buf_kernel), but for the rest of a line an earlier chunk
 * began. */
static void fresh_kernel(mcp_call_t *c, const char *s, size_t len)
{
	size_t n = 0;
	char *plain = kbox_strip_ansi(s, len, &n);
	const char *p = plain ? plain : s;
	const char *nl;

	if (!plain)
		n = len;
	if (c->fresh_mid_line && n > 0) {
		size_t head = (nl = memchr(p, '\n', n)) ? (size_t)(nl - p) + 1 : n;
		kx_buf_visible(&c->fresh, p, head);
		p += head;
		n -= head;
	}
	kx_buf_kernel(&c->fresh, p, n);
	if (c->fresh.len > 0)
		c->fresh_mid_line = c->fresh.data[c->fresh.len - 1] != '\n';
	free(plain);
}

/* Keep the last FRESH_MAX bytes of C's FRESH (or so: from a line's start
 * where one is near), counting what goes. */
static void fresh_trim(mcp_call_t *c)
{
	size_t cut;
	const char *nl;

	if (c->fresh.len <= (size_t)FRESH_MAX * 2)
		return;
	cut = c->fresh.len - (size_t)FRESH_MAX;
	if ((nl = memchr(c->fresh.data + cut, '\n', c->fresh.len - cut)) &&
	    (size_t)(nl - c->fresh.data) < cut + 1024)
		cut = (size_t)(nl - c->fresh.data) + 1;
	else
		while (cut < c->fresh.len && ((unsigned char)c->fresh.data[cut] & 0xc0) == 0x80)
			cut++;
	memmove(c->fresh.data, c->fresh.data + cut, c->fresh.len - cut);
	c->fresh.len -= cut;
	c->fresh.data[c->fresh.len] = '\0';
	c->fresh_left_out += cut;
}

/* The last line with something to see of S[0..LEN) (escape sequences
 * stripped), into C's last_line: at most its size, control characters as
 * spaces. */
static void keep_last_line(mcp_call_t *c, const char *s, size_t len)
{
	size_t n = 0, end, start, k;
	char *plain = kbox_strip_ansi(s, len, &n);
	const char *p = plain ? plain : s;

	if (!plain)
		n = len;
	end = n;
	for (;;) {
		while (end > 0 && (p[end - 1] == '\n' || p[end - 1] == '\r' || p[end - 1] == ' '))
			end--;
		if (end == 0)
			break;
		for (start = end; start > 0 && p[start - 1] != '\n' && p[start - 1] != '\r';
		     start--)
			;
		k = kx_utf8_floor(p + start, end - start, sizeof c->last_line - 1);
		memcpy(c->last_line, p + start, k);
		c->last_line[k] = '\0';
		for (size_t i = 0; i < k; i++)
			if ((unsigned char)c->last_line[i] < 0x20 || c->last_line[i] == 0x7f)
				c->last_line[i] = ' ';
		break;
	}
	free(plain);
}

void mcp_call_event(mcp_t *m, mcp_call_t *c, json_t *event)
{
	const char *kind = json_string_value(json_object_get(event, "event"));
	(void)m;
	if (!kind)
		return;
	if (strcmp(kind, "stream") == 0) {
		const char *name = json_string_value(json_object_get(event, "name"));
		json_t *jt = json_object_get(event, "text");
		const char *text = json_string_value(jt);
		size_t len = json_string_length(jt);
		int stream = name && strcmp(name, "stderr") == 0 ? 2 : 1;
		if (!text || len == 0)
			return;
		if (stream != (c->fresh_stream ? c->fresh_stream : 1)) {
			if (c->fresh_mid_line)
				kx_buf_appends(&c->fresh, "\n");
			kx_buf_appends(&c->fresh, stream == 2 ? "[stderr]\n" : "[stdout]\n");
			c->fresh_mid_line = false;
		}
		c->fresh_stream = stream;
		fresh_kernel(c, text, len);
		keep_last_line(c, text, len);
		c->new_output = true;
	}
	fresh_trim(c);
}

void mcp_call_clear(mcp_call_t *c)
{
	kx_buf_reset(&c->fresh);
	json_decref(c->reply);
	c->reply = NULL;
	free(c->lost);
	c->lost = NULL;
	free(c->notice);
	c->notice = NULL;
}

/* The answer to a call whose code still runs, after HEAD (kbox's own
 * line, without its brackets): what C printed since the last answer, as
 * text, and the summary of --structured text or full (status running).
 * C's FRESH is emptied. */
static json_t *running_result(mcp_t *m, mcp_call_t *c, const char *head)
{
	kx_buf_t b = KX_BUF_INIT;
	char *text;
	json_t *content, *structured = NULL;

	kx_buf_appendf(&b, "[note: %s]\n", head);
	/* the started line's notice, in the first answer that can: a model
	 * that reads only that learns it is a new session (the whole result
	 * says it again) */
	if (c->notice && !c->notice_said) {
		kx_buf_appends(&b, "[note: ");
		kx_buf_kernel(&b, c->notice, strlen(c->notice));
		kx_buf_appends(&b, "]\n");
		c->notice_said = true;
	}
	if (c->fresh_left_out)
		kx_buf_appendf(&b,
		               "[... %zu bytes printed before these are left out here: the code's "
		               "whole result has them]\n",
		               c->fresh_left_out);
	kx_buf_append(&b, c->fresh.data ? c->fresh.data : "", c->fresh.len);
	if (c->fresh_mid_line)
		kx_buf_appends(&b, "\n");
	text = kx_buf_take(&b, NULL);
	content = json_pack("[o]", mcp_text_item(text ? text : "[note: out of memory]"));
	if (m->structured != CLI_STRUCTURED_NONE)
		structured = json_pack("{s:O, s:s, s:n, s:[]}", "text",
		                       json_object_get(json_array_get(content, 0), "text"),
		                       "status", "running", "execution_count", "images");
	free(text);
	kx_buf_reset(&c->fresh);
	c->fresh_left_out = 0;
	c->fresh_stream = 0;
	c->fresh_mid_line = false;
	return mcp_tool_result(content, structured, false);
}

mcp_call_t *mcp_background(mcp_t *m)
{
	for (mcp_call_t *c = m->calls; c; c = c->next)
		if (c->background && c->sess == m->sess)
			return c;
	return NULL;
}

/* The session I of M: the main one first, then new_session's (NULL past
 * the last). */
static mcp_sess_t *nth_session(const mcp_t *m, size_t i)
{
	return i == 0 ? (mcp_sess_t *)&m->main : i <= m->n_handles ? m->handles[i - 1] : NULL;
}

bool mcp_waiting(const mcp_t *m)
{
	mcp_sess_t *s;
	for (size_t i = 0; (s = nth_session(m, i)); i++)
		if (s->wait.id)
			return true;
	return false;
}

/* Answer the waiting wait_python with RESULT (taken). */
static void answer_wait(mcp_t *m, json_t *result)
{
	mcp_send_result(m, m->sess->wait.id, result, m->sess->wait.modern);
	json_decref(m->sess->wait.id);
	json_decref(m->sess->wait.progress);
	memset(&m->sess->wait, 0, sizeof m->sess->wait);
}

/* The whole result of C, which ended, for wait_python; C is dropped. */
static json_t *ended_result(mcp_t *m, mcp_call_t *c)
{
	json_t *r = mcp_run_result(m, c->reply, c->lost ? c->lost : "its connection ended",
	                           "the code has ended: its whole result follows, from its start");
	mcp_call_drop(m, c);
	return r;
}

void mcp_call_ended(mcp_t *m, mcp_call_t *c, json_t *reply, const char *why)
{
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	c->reply = json_incref(reply);
	if (!reply)
		c->lost = strdup(why ? why : "its connection ended");
	if (m->sess->wait.id)
		answer_wait(m, ended_result(m, c));
}

void mcp_calls_eof(mcp_t *m)
{
	mcp_call_t *c;
	for (size_t i = 0; (m->sess = nth_session(m, i)); i++)
		if ((c = mcp_background(m)) && !m->sess->wait.id)
			mcp_call_drop(m,
			              c); /* its connection closed: the supervisor interrupts it */
	m->sess = &m->main;
}

json_t *mcp_wait_python(mcp_t *m, json_t *id, json_t *progress, json_t *args)
{
	json_t *jt = json_object_get(args, "timeout"), *ji = json_object_get(args, "interrupt");
	mcp_call_t *c = mcp_background(m);
	long long now = kx_now_ms(), wait_ms = m->soft_ms > 0 ? m->soft_ms : MCP_SOFT_DEFAULT_MS;

	if (jt && !json_is_null(jt) && mcp_seconds_arg(jt, &wait_ms) < 0)
		return mcp_text_result(
		        true,
		        "wait_python: \"timeout\" is a number of seconds from 0 to %lld "
		        "(%lld days)",
		        CLI_DURATION_MAX_MS / 1000, CLI_DURATION_MAX_MS / 86400000);
	if (ji && !json_is_boolean(ji) && !json_is_null(ji))
		return mcp_text_result(true, "wait_python: \"interrupt\" is true or false");
	if (!c)
		return mcp_text_result(
		        true, "wait_python: no code is running: every run_python call so far "
		              "returned its whole result");
	if (m->sess->wait.id)
		return mcp_text_result(true, "wait_python: another wait_python call is waiting "
		                             "already: wait for its answer");
	if (c->fd < 0)
		return ended_result(m, c);
	if (json_is_true(ji) && !c->started) {
		/* waiting for its turn: an interrupt would stop another's code;
		 * its connection closes, and it leaves the queue */
		mcp_call_ended(m, c, NULL,
		               "it was waiting for its turn and never ran: it gave it up");
		return ended_result(m, c);
	}
	if (json_is_true(ji) && mcp_call_interrupt(c, "wait_python (interrupt: true)") < 0) {
		/* the supervisor interrupts it as it sees the connection go */
		mcp_call_ended(m, c, NULL, "it was interrupted (its connection closed)");
		return ended_result(m, c);
	}
	/* an interrupt need not end the code (it may catch KeyboardInterrupt,
	 * or its reply may never come): the wait keeps its time limit */
	if (wait_ms == 0)
		return running_result(
		        m, c,
		        json_is_true(ji)
		                ? "interrupted, and still running: what it printed since the "
		                  "last call follows; call wait_python with a timeout to wait "
		                  "for its end"
		                : "still running: what it printed since the last call follows; "
		                  "call wait_python with a timeout to wait for more and for its "
		                  "result, or with interrupt true to stop it");
	m->sess->wait.id = json_incref(id);
	m->sess->wait.progress = progress ? json_incref(progress) : NULL;
	m->sess->wait.modern = m->req_modern;
	m->sess->wait.begun = now;
	m->sess->wait.deadline = now + wait_ms;
	m->sess->wait.interrupted = json_is_true(ji);
	m->sess->wait.progress_due = progress ? now + MCP_PROGRESS_EVERY_MS : 0;
	return NULL;
}

/* ---- timers ---- */

/* Send a progress notification for TOKEN of the request ABOUT, the Nth
 * (*N, then one more), its message what C last printed, BEGUN when its
 * wait began. */
static void send_progress(mcp_t *m, json_t *token, const json_t *about, long long *n,
                          long long begun, const mcp_call_t *c)
{
	char msg[sizeof c->last_line + 64];
	long long secs = (kx_now_ms() - begun) / 1000;
	json_t *jmsg;

	if (c && c->last_line[0])
		snprintf(msg, sizeof msg, "running for %lld s: %s", secs, c->last_line);
	else
		snprintf(msg, sizeof msg, "running for %lld s", secs);
	(*n)++;
	if (!(jmsg = json_string(msg))) /* cut inside a character: no message then */
		jmsg = json_string("running");
	mcp_send_notification(m, "notifications/progress",
	                      json_pack("{s:O, s:I, s:o}", "progressToken", token, "progress",
	                                (json_int_t)*n, "message", jmsg),
	                      about);
}

/* Is a progress notification due at NOW, the next at *DUE, the last at
 * *LAST, output having come when NEW_OUTPUT?  Then the times move on. */
static bool progress_due(long long now, long long *due, long long *last, bool new_output)
{
	if (!*due)
		return false;
	if (now < *due && !(new_output && now - *last >= MCP_PROGRESS_MIN_MS))
		return false;
	*last = now;
	*due = now + MCP_PROGRESS_EVERY_MS;
	return true;
}

/* The earlier of NEXT (-1: none) and AT - NOW (AT 0: none). */
static long long sooner(long long next, long long at, long long now)
{
	long long d;
	if (!at)
		return next;
	d = at > now ? at - now : 0;
	return next < 0 || d < next ? d : next;
}

/* MS, how long a call has run, into BUF as its notes say it: seconds to a
 * tenth under 10 s (a soft limit of 0.5 s is not "0 s"), whole above. */
static void running_for(char *buf, size_t size, long long ms)
{
	if (ms < 10000)
		snprintf(buf, size, "%.1f s", (double)ms / 1000.0);
	else
		snprintf(buf, size, "%lld s", ms / 1000);
}

/* What is due now of the wait_python of M->sess, whose code answered
 * early is BG: its end, or a progress notification.  NEXT as sooner
 * takes it, updated. */
static long long wait_due(mcp_t *m, mcp_call_t *bg, long long now, long long next)
{
	mcp_wait_t *w = &m->sess->wait;
	char head[256];

	if (!w->id || !bg)
		return next;
	if (w->deadline && now >= w->deadline) {
		char took[32];
		running_for(took, sizeof took, now - bg->begun);
		if (w->interrupted)
			snprintf(head, sizeof head,
			         "still running after %s, though interrupted (the code may catch "
			         "KeyboardInterrupt): what it printed since the last call follows; "
			         "call wait_python again to wait for its end",
			         took);
		else
			snprintf(head, sizeof head,
			         "still running after %s: what it printed since the last call "
			         "follows; call wait_python again to wait for more and for its "
			         "result, or with interrupt true to stop it",
			         took);
		answer_wait(m, running_result(m, bg, head));
		return next;
	}
	if (w->progress && progress_due(now, &w->progress_due, &w->progress_last, bg->new_output)) {
		send_progress(m, w->progress, w->id, &w->progress_n, w->begun, bg);
		bg->new_output = false;
	}
	next = sooner(next, w->deadline, now);
	if (w->progress && bg->new_output)
		next = sooner(next, w->progress_last + MCP_PROGRESS_MIN_MS, now);
	return sooner(next, w->progress_due, now);
}

long long mcp_calls_due(mcp_t *m)
{
	long long now = kx_now_ms(), next = -1;
	mcp_call_t *bg;
	char head[256];

again:
	for (mcp_call_t *c = m->calls; c; c = c->next) {
		if (c->cancelled && now >= c->cancel_deadline) {
			mcp_call_drop(m, c); /* interrupted and not done: its connection goes */
			goto again;
		}
		if (c->cancelled || c->background)
			continue;
		m->sess = c->sess;
		bg = mcp_background(m); /* one a session at most */
		if (c->soft_deadline && now >= c->soft_deadline && !bg) {
			/* answered early: the code goes on, wait_python reads on
			 * (a soft limit under 10 s is said to a tenth: "0 s" would
			 * read as no time at all) */
			char took[32];
			running_for(took, sizeof took, now - c->begun);
			snprintf(head, sizeof head,
			         c->started ? "still running after %s, its soft time limit: what "
			                      "it printed so far follows; call wait_python to wait "
			                      "for more and for its result, or wait_python with "
			                      "interrupt true to stop it"
			                    : "not begun after %s, its soft time limit: it waits "
			                      "for its turn (the session runs other code, or its "
			                      "kernel still starts); call wait_python to wait for "
			                      "its result, or wait_python with interrupt true to "
			                      "give up its turn",
			         took);
			mcp_send_result(m, c->id, running_result(m, c, head), c->modern);
			json_decref(c->id);
			c->id = NULL;
			json_decref(c->progress);
			c->progress = NULL;
			c->progress_due = 0;
			c->background = true;
			continue;
		}
		if (c->progress &&
		    progress_due(now, &c->progress_due, &c->progress_last, c->new_output)) {
			send_progress(m, c->progress, c->id, &c->progress_n, c->begun, c);
			c->new_output = false;
		}
		next = sooner(next, c->soft_deadline && !bg ? c->soft_deadline : 0, now);
		next = sooner(next, c->progress_due, now);
		if (c->progress && c->new_output)
			next = sooner(next, c->progress_last + MCP_PROGRESS_MIN_MS, now);
	}
	for (mcp_call_t *c = m->calls; c; c = c->next)
		if (c->cancelled)
			next = sooner(next, c->cancel_deadline, now);
	for (size_t i = 0; (m->sess = nth_session(m, i)); i++)
		next = wait_due(m, mcp_background(m), now, next);
	m->sess = &m->main;
	return next;
}
