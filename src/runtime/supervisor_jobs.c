/* src/runtime/supervisor_jobs.c — the supervisor's jobs
 * (supervisor_int.h): executions, completions and inspections, queued and
 * run one at a time in the order they came; their results and replies;
 * and the output the kernel prints between executions. */
#include "runtime/supervisor_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* D clamped to what an int of milliseconds holds. */
static int ms_int(long long d)
{
	return d > INT_MAX ? INT_MAX : (int)d;
}

/* ---- the queue ---- */

static const char *job_op(const job_t *j)
{
	return kr_ctl_op_name(j->op);
}

static void job_free(job_t *j)
{
	if (!j)
		return;
	if (j->wait_timer)
		kbox_loop_cancel_timer(j->s->loop, j->wait_timer);
	kr_ctl_exec_clear(&j->e);
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
		sup_reply_error(
		        j->conn, job_op(j), KR_CTL_ERR_BUSY,
		        "the session was busy running other code all the time this code could "
		        "wait (its time limit): it never ran (the session runs one execution at "
		        "a time; try again when it is done, or give a longer -t)");
	}
	job_free(j);
	return 0;
}

void sup_job_orphan(sup_t *s, job_t *j)
{
	j->conn = NULL;
	if (j == s->running && j->op == KR_CTL_OP_EXECUTE && j->x && !s->stopping) {
		/* its client went away (killed, Ctrl-C): its code must not run
		 * on unseen, holding up every later execution */
		j->abandoned = true;
		if (kbox_exec_interrupt(j->x, ms_int(j->e.grace_ms),
		                        "interrupted: its client went away", NULL) == 0)
			sup_log(s, "interrupt",
			        json_pack("{s:s}", "cause",
			                  "the client of an execution went away"));
	} else if (j != s->running) {
		queue_remove(s, j);
		job_free(j);
	}
}

void sup_jobs_stop(sup_t *s)
{
	while (s->queue) {
		job_t *j = s->queue;
		s->queue = j->next;
		if (j->conn) {
			sup_reply_error(j->conn, job_op(j), KR_CTL_ERR_STOPPED,
			                "the session stopped: %s", s->stop_cause);
			j->conn->job = NULL;
		}
		job_free(j);
	}
}

/* ---- output between executions ---- */

static bool is_output(const char *type)
{
	return strcmp(type, "stream") == 0 || strcmp(type, "display_data") == 0 ||
	       strcmp(type, "update_display_data") == 0 || strcmp(type, "execute_result") == 0 ||
	       strcmp(type, "error") == 0 || strcmp(type, "clear_output") == 0;
}

/* Kept, within the capture's budgets, for the next result. */
void sup_on_between(void *arg, const kbox_msg_t *msg)
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
		/* in the started line and in the next result's text and JSON */
		kbox_capture_set_reply(s->between, KR_CTL_EARLIER_MAX, 2, KR_CTL_JSON_FLAGS);
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

/* ---- an execution's events and result ---- */

/* The bytes of V as a line of the protocol writes it, its newline aside
 * (0 when jansson cannot dump it). */
static size_t json_size(const json_t *v)
{
	return json_dumpb(v, NULL, 0, KR_CTL_JSON_FLAGS | JSON_ENCODE_ANY);
}

/* How many times each text of J's result is in its reply: the text, the
 * result's outputs and its stdout (stderr, value…), or both. */
static unsigned reply_copies(const job_t *j)
{
	if (j->e.format == KR_CTL_FMT_TEXT || j->e.format == KR_CTL_FMT_TEXT_LIVE)
		return 1;
	return j->e.with_text ? 3 : 2;
}

/* What J's reply may give its result, as JSON: KR_CTL_REPLY_MAX less the
 * output printed before it (in the text, and in the JSON as
 * earlier_output) and the notice. */
static size_t reply_room(const job_t *j)
{
	size_t used = 4096 + kbox_json_string_size(j->notice, strlen(j->notice), KR_CTL_JSON_FLAGS);
	if (j->earlier_text)
		used += kbox_json_string_size(j->earlier_text, strlen(j->earlier_text),
		                              KR_CTL_JSON_FLAGS);
	if (j->earlier_json)
		used += json_size(j->earlier_json);
	return used < KR_CTL_REPLY_MAX / 2 ? KR_CTL_REPLY_MAX - used : KR_CTL_REPLY_MAX / 2;
}

/* Each capture event, to a client that follows them. */
static void on_event(void *arg, const kbox_capture_t *cap, const kbox_event_t *ev)
{
	job_t *j = arg;
	json_t *e;
	if (!j->conn ||
	    ((j->e.format == KR_CTL_FMT_TEXT_LIVE || j->e.format == KR_CTL_FMT_JSON_LIVE) &&
	     ev->type != KBOX_EV_STREAM))
		return;
	if (!(e = json_pack("{s:s, s:o*}", "re", "execute", "event", kbox_render_event(cap, ev))))
		return;
	if (!json_object_get(e, "event") || json_size(e) >= KR_CTL_CONN_OUT_MAX) {
		/* one stream message of control characters can be 6 times its
		 * size as JSON: over what a connection queues, counted unsent */
		j->conn->events_dropped++;
		json_decref(e);
		return;
	}
	sup_conn_send(j->conn, e, true);
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

/* Does RES's error have the name NAME? */
static bool error_is(const kbox_result_t *res, const char *name)
{
	size_t n;
	const char *e = kbox_result_ename(res, &n);
	return kbox_result_has_error(res) && n == strlen(name) && memcmp(e, name, n) == 0;
}

/* At most MAX bytes of P's LEN, in whole characters. */
static int utf8_prefix(const char *p, int len, int max)
{
	if (len > max)
		for (len = max; len > 0 && ((unsigned char)p[len] & 0xc0) == 0x80;)
			len--;
	return len;
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
	cell_len = utf8_prefix(cell, cell_len, 80);
	arrow_len = utf8_prefix(arrow, arrow_len, 120);
	if (cell && arrow && arrow_len > 0)
		snprintf(buf, size, " at %.*s: %.*s", cell_len, cell, arrow_len, arrow);
	else if (cell)
		snprintf(buf, size, " at %.*s", cell_len, cell);
	sup_utf8_cut(buf);
	/* the kernel wrote it: no control character of its reaches the line */
	for (char *q = buf; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			*q = ' ';
	return buf;
}

/* What the reader of J's result RES needs instead of a long traceback: an
 * interrupt asked for (status interrupted), a timeout's KeyboardInterrupt,
 * input asked for that no one could give. */
/* Whether CODE asks to install packages (%pip, !pip, %conda, pip
 * install, python -m pip on a line of its own). */
static bool asks_to_install(const char *code)
{
	static const char *const starts[] = {"%pip",
	                                     "!pip",
	                                     "%conda",
	                                     "!conda",
	                                     "pip install",
	                                     "!python -m pip",
	                                     "!python3 -m pip",
	                                     "%mamba",
	                                     "!mamba",
	                                     NULL};
	for (const char *l = code; l && *l;) {
		while (*l == ' ' || *l == '\t')
			l++;
		for (size_t i = 0; starts[i]; i++)
			if (strncmp(l, starts[i], strlen(starts[i])) == 0)
				return true;
		l = strchr(l, '\n');
		if (l)
			l++;
	}
	return false;
}

static void result_explain(job_t *j, kbox_result_t *res)
{
	/* the model would try again and again: the one line it can act on */
	if (j->e.code && asks_to_install(j->e.code))
		kbox_result_add_notice(
		        res,
		        "packages cannot be installed here: the sandbox has no network "
		        "and its system files are read-only; use the packages that are "
		        "installed (help(\"modules\") lists them)",
		        true);

	char place[256], line[600];
	kbox_exec_status_t st = kbox_result_status(res);

	if (error_is(res, "KeyboardInterrupt") &&
	    (st == KBOX_EXEC_ERROR || st == KBOX_EXEC_TIMEOUT) &&
	    (j->interrupt_asked || st == KBOX_EXEC_TIMEOUT)) {
		error_place(res, place, sizeof place);
		if (st == KBOX_EXEC_TIMEOUT) {
			snprintf(line, sizeof line,
			         "KeyboardInterrupt: interrupted when it timed out%s", place);
		} else {
			char why[KR_CTL_CAUSE_MAX + 32];
			snprintf(line, sizeof line, "KeyboardInterrupt: interrupted by %s%s",
			         j->interrupt_by, place);
			snprintf(why, sizeof why, "interrupted by %s", j->interrupt_by);
			kbox_result_set_status(res, KBOX_EXEC_INTERRUPTED, why);
		}
		kbox_result_set_error_text(res, line);
	} else if (j->interrupt_asked && st == KBOX_EXEC_ERROR && !kbox_result_has_error(res)) {
		/* kbox sent the interrupt, and the kernel's traceback machinery
		 * failed to say so (IPython's "Unexpected exception formatting
		 * exception": an error reply, no error output): it is said */
		char why[KR_CTL_CAUSE_MAX + 32];
		snprintf(why, sizeof why, "interrupted by %s", j->interrupt_by);
		kbox_result_set_status(res, KBOX_EXEC_INTERRUPTED, why);
	} else if (j->interrupt_asked && st == KBOX_EXEC_OK) {
		char note[KR_CTL_CAUSE_MAX + 80];
		snprintf(note, sizeof note,
		         "%s was sent while it ran, and the code went on to the end",
		         j->interrupt_by);
		kbox_result_add_notice(res, note, false);
	} else if (error_is(res, "EOFError") && j->e.has_inputs && j->x &&
	           kbox_exec_inputs_answered(j->x) > j->e.n_inputs) {
		snprintf(line, sizeof line,
		         "EOFError: the code asked for more input than the %zu line%s given: give "
		         "more with -i LINE or --input-file FILE",
		         j->e.n_inputs, j->e.n_inputs == 1 ? "" : "s");
		kbox_result_set_error_text(res, line);
	} else if (error_is(res, "StdinNotImplementedError") && !j->e.has_inputs) {
		/* what a model can do; how a person gives lines is the client's
		 * to say (input_refused) */
		kbox_result_set_error_text(res, "StdinNotImplementedError: input() is not "
		                                "available here: put the values in the code");
		j->input_refused = true;
	} else if (error_is(res, "MemoryError")) {
		/* Python's MemoryError says nothing (a limit on the address space,
		 * with no cgroup to kill the kernel): what ran out, and what sets it */
		size_t n;
		char lim[32];
		kbox_result_evalue(res, &n);
		if (n == 0) {
			error_place(res, place, sizeof place);
			if (j->s->sbo.memory_bytes > 0)
				snprintf(
				        line, sizeof line,
				        "MemoryError: out of memory: the kernel may use %s (kbox start "
				        "--memory sets it)%s",
				        kx_fmt_bytes(lim, sizeof lim, j->s->sbo.memory_bytes),
				        place);
			else
				snprintf(line, sizeof line, "MemoryError: out of memory%s", place);
			kbox_result_set_error_text(res, line);
		}
	}
}

/* Processes the OOM killer killed in the sandbox while J ran, the kernel
 * alive (a child of the code's, which the kernel outlived): the result
 * says so, as nothing else would (the child's exit status, if the code
 * looks). */
static void oom_explain(job_t *j, kbox_result_t *res)
{
	long now = j->oom_before >= 0 && j->s->sb ? kr_sandbox_oom_kills(j->s->sb) : -1;
	char lim[32], note[300];
	if (now <= j->oom_before)
		return;
	kx_fmt_bytes(lim, sizeof lim, j->s->sb->o.memory_bytes);
	snprintf(note, sizeof note,
	         "out of memory: %ld process%s the code started %s killed for going over the "
	         "session's memory limit (%s); the kernel and its state are kept",
	         now - j->oom_before, now - j->oom_before == 1 ? "" : "es",
	         now - j->oom_before == 1 ? "was" : "were", lim);
	kbox_result_add_notice(res, note, false);
	kr_sandbox_oom_told(j->s->sb, now);
}

/* Why the execution X of J ended as it did, when the kernel is to blame,
 * into CAUSE ("" when it is not); true when the kernel is to be killed
 * (it ignored a timeout's interrupt, or is lost to us). */
static bool exec_cause(job_t *j, kbox_exec_t *x, char *cause, size_t size)
{
	sup_t *s = j->s;
	kbox_exec_status_t st = kbox_exec_status(x);
	char t[32], g[32];

	cause[0] = '\0';
	if (st == KBOX_EXEC_TIMEOUT && !kbox_exec_reply(x) && !kbox_exec_went_idle(x) &&
	    kbox_exec_interrupted(x) && s->sb && kr_sandbox_alive(s->sb)) {
		/* the kernel ignored the interrupt: it is killed, and replaced */
		if (j->abandoned && j->interrupt_asked && j->interrupt_by[0])
			snprintf(cause, size,
			         "the code did not stop after the interrupt by %s, and its client "
			         "went away; nor within %s of another interrupt, so the kernel was "
			         "killed",
			         j->interrupt_by,
			         kx_fmt_ms(g, sizeof g, j->grace_none ? 0 : j->e.grace_ms));
		else if (j->abandoned)
			snprintf(
			        cause, size,
			        "the client of an execution went away and the code did not stop within "
			        "%s of an interrupt, so the kernel was killed",
			        kx_fmt_ms(g, sizeof g, j->grace_none ? 0 : j->e.grace_ms));
		else
			snprintf(
			        cause, size,
			        "the execution timed out after %s and did not stop within %s of an "
			        "interrupt, so the kernel was killed",
			        kx_fmt_ms(t, sizeof t, j->e.timeout_ms),
			        kx_fmt_ms(g, sizeof g, j->grace_none ? 0 : j->e.grace_ms));
		return true;
	}
	if (st != KBOX_EXEC_DIED)
		return false;
	if (s->replacing && s->last_cause[0])
		/* we ended it (kernel_replace): the cause is ours, not the signal's */
		snprintf(cause, size, "%s", s->last_cause);
	else if (s->sb && !kr_sandbox_alive(s->sb))
		snprintf(cause, size, "%s", kr_sandbox_cause(s->sb));
	else if (s->stopping)
		snprintf(cause, size, "%s", s->stop_cause);
	else {
		/* the process runs but the kernel is lost to us (it stopped
		 * answering): it is killed and replaced */
		snprintf(cause, size, "%s, so the kernel was killed", kbox_exec_reason(x));
		return !s->replacing && s->sb != NULL;
	}
	return false;
}

/* The reply to J's execution X, whose result is RES (new), and its size
 * as JSON in *SIZE; NULL when out of memory, or when it is larger than
 * KR_CTL_REPLY_MAX. */
static json_t *exec_reply(job_t *j, kbox_exec_t *x, kbox_result_t *res, size_t *size)
{
	kr_ctl_format_t fmt = j->e.format;
	json_t *r = json_pack("{s:b, s:s, s:s, s:I}", "ok", 1, "re", "execute", "status",
	                      kr_ctl_status_name(kbox_result_status(res)), "generation",
	                      (json_int_t)j->generation);
	*size = 0;
	if (!r)
		return NULL;
	if (fmt == KR_CTL_FMT_TEXT || fmt == KR_CTL_FMT_TEXT_LIVE || j->e.with_text) {
		/* a live client that did not get every piece of the streams as
		 * they came gets them all here, after a note that says why */
		size_t dropped = fmt == KR_CTL_FMT_TEXT_LIVE && j->conn ? j->conn->events_dropped
		                                                        : 0;
		bool streams = fmt != KR_CTL_FMT_TEXT_LIVE || dropped;
		char *text = kbox_render_text_ex(res, streams ? 0 : KBOX_RENDER_NO_STREAMS),
		     note[256];
		snprintf(note, sizeof note,
		         "%zu %s of the output could not be shown as %s came (too large, or "
		         "printed faster than it was read): the whole output follows",
		         dropped, dropped == 1 ? "piece" : "pieces", dropped == 1 ? "it" : "they");
		/* the notice is the text's first line, what a model reads first
		 * (a live client printed it already, from the started event) */
		json_object_set_new(r, "text",
		                    kr_ctl_reply_text(dropped                   ? note
		                                      : j->notice[0] && streams ? j->notice
		                                                                : NULL,
		                                      streams && !dropped ? j->earlier_text : NULL,
		                                      text));
		free(text);
	}
	/* the JSON's notices hold it too, first */
	if (j->notice[0] && fmt != KR_CTL_FMT_TEXT && fmt != KR_CTL_FMT_TEXT_LIVE)
		kbox_result_add_notice(res, j->notice, true);
	if (fmt == KR_CTL_FMT_JSON || fmt == KR_CTL_FMT_NDJSON || fmt == KR_CTL_FMT_JSON_LIVE) {
		json_t *o = fmt != KR_CTL_FMT_NDJSON ? kbox_render_json(res)
		                                     : kbox_render_end_event(res);
		if (o && j->earlier_json)
			json_object_set(o, "earlier_output", j->earlier_json);
		json_object_set_new(r, "result", o ? o : json_null());
	}
	json_object_set_new(r, "reason", json_string(kbox_result_reason(res)));
	json_object_set_new(r, "inputs_used",
	                    json_integer((json_int_t)kbox_exec_inputs_answered(x)));
	if (j->input_refused)
		json_object_set_new(r, "input_refused", json_true());
	if (j->conn->events_dropped)
		json_object_set_new(r, "events_dropped",
		                    json_integer((json_int_t)j->conn->events_dropped));
	/* the capture cut the result to fit; what it could not foresee
	 * (a client's huge input lines) is an error, never a line its reader
	 * refuses */
	if ((*size = json_size(r)) + 1 > KR_CTL_REPLY_MAX) {
		json_decref(r);
		return NULL;
	}
	return r;
}

/* ---- what the code defined, for the notice of a kernel's death ---- */

/* What the code defined, for the notice of the kernel's death: the
 * user's names, but hidden, private and modules, with their type's name,
 * and the shape of a DataFrame, Series or ndarray of pandas, numpy or
 * polars (read only from those, where it costs nothing: no other
 * object's attribute code runs, not the code's own class of that name,
 * nor pyspark.pandas's, whose shape runs a job), as many of the first 60 as fit
 * in 290 characters, whole, then how many more there are (within
 * VARS_MAX).  VARS_SOURCE's f computes it.
 *
 * The namespace holds an _iN (and, with the output cache, an _N) for
 * every execution so far: a walk of all its names after each cell cost
 * the kernel 0.3-2 ms per execution once it had run 6000 (measured with
 * jupyter_client's execute_interactive, hook against no hook), where
 * the user has a few dozen names.  So f's names() keeps the user's
 * names between calls, with the namespace's length and its last two
 * keys, and looks only at the keys after the last one (a dict keeps the
 * order of insertion; reversed() walks it from the end).  It trusts
 * that only when the last key is where it was (the same key object,
 * the same key before it) and the length grew by exactly the keys
 * after it, that is when no key was removed; else, and on every 64th
 * call, it walks them all.  Names it kept are looked up again each time
 * (removed, hidden since, now a module).  So code that removes names
 * costs a whole walk, and only code that removes the last name with
 * others and defines it again, with as many new names between, can
 * keep a new name out of the list, for at most 63 executions.  Names
 * that are no str (globals()[1] = 2) are no one's variables and are
 * left out.
 *
 * Once per kernel, one execute_request's user_expression (vars_define,
 * evaluated after code that ended well) defines, out of the user's
 * namespace, the function that computes it and a post_run_cell hook that
 * calls it after each cell of this client's session (no other front
 * end's) and writes the result as a payload of the execute_reply
 * (source "kbox_vars", text); the expression's own value is the first
 * list.  Every later execution carries no user_expression: one costs
 * ipykernel its display formatter, 0.3-0.45 ms of the kernel's CPU per
 * execute("1+1") here, where the hook costs ~15 us.  A reply without the
 * payload (code removed the hook) makes the next execution define them
 * again.  The hook keeps its function, so code that deletes or replaces
 * builtins._kbox_vars changes nothing; and it says nothing of its own
 * errors, nor of an interrupt that comes as it runs, after the cell
 * (IPython would print a traceback into the cell's output).  Its text is
 * made UTF-8 that ipykernel can send ('?' for a lone surrogate): a
 * type's name is what the code made it, and a reply with text ipykernel
 * cannot encode is never sent, so every execution after would wait for
 * its reply for ever (hostile review of 2026-12-07). */
/* (a Python string's text: lines joined by \n, no double quote) */
#define VARS_SOURCE                                                                           \
	"import builtins\\n"                                                                  \
	"ip = get_ipython()\\n"                                                               \
	"skip = ('In', 'Out', 'exit', 'quit', 'get_ipython')\\n"                              \
	"st = {'ns': None, 'c': [], 'n': 0, 'k': None, 'p': None, 'i': 0}\\n"                 \
	"def names(ns):\\n"                                                                   \
	"    n = len(ns)\\n"                                                                  \
	"    st['i'] += 1\\n"                                                                 \
	"    mark = st['k'] if st['ns'] is ns and st['i'] % 64 else st\\n"                    \
	"    it = reversed(ns)\\n"                                                            \
	"    new = []\\n"                                                                     \
	"    found = False\\n"                                                                \
	"    for k in it:\\n"                                                                 \
	"        if k is mark:\\n"                                                            \
	"            found = True\\n"                                                         \
	"            break\\n"                                                                \
	"        new.append(k)\\n"                                                            \
	"    if found and next(it, st) is st['p'] and n == st['n'] + len(new):\\n"            \
	"        fresh = set(new)\\n"                                                         \
	"        c = [k for k in st['c'] if k in ns and k not in fresh]\\n"                   \
	"        new.reverse()\\n"                                                            \
	"    else:\\n"                                                                        \
	"        c = []\\n"                                                                   \
	"        new = list(ns)\\n"                                                           \
	"    c += [k for k in new if type(k) is str and k[:1] != '_' and k not in skip]\\n"   \
	"    it = reversed(ns)\\n"                                                            \
	"    st.update(ns=ns, c=c, n=n, k=next(it, st), p=next(it, st))\\n"                   \
	"    return c\\n"                                                                     \
	"def f():\\n"                                                                         \
	"    ns, hid = ip.user_ns, ip.user_ns_hidden\\n"                                      \
	"    vs = [(k, ns.get(k, st)) for k in names(ns) if k not in hid]\\n"                 \
	"    vs = [(k, v) for k, v in vs if v is not st and type(v).__name__ != 'module']\\n" \
	"    es = [k + ': ' + type(v).__name__ + (' ' + 'x'.join(map(str, v.shape)) if"       \
	" type(v).__name__ in ('DataFrame', 'Series', 'ndarray') and (lambda m:"              \
	" isinstance(m, str) and m.split('.')[0] in ('pandas', 'numpy',"                      \
	" 'polars'))(type(v).__module__) else '') for k, v in vs[:60]]\\n"                    \
	"    k = sum(1 for t in __import__('itertools').accumulate(len(e) + 2 for e in es)"   \
	" if t <= 290)\\n"                                                                    \
	"    return ', '.join(es[:k] + (['and %d more' % (len(vs) - k)] if k < len(vs) else"  \
	" []))\\n"                                                                            \
	"def hook(*a):\\n"                                                                    \
	"    try:\\n"                                                                         \
	"        if ip.parent_header.get('header', {}).get('session') == sid:\\n"             \
	"            t = f().encode('utf-8', 'replace').decode('utf-8')\\n"                   \
	"            ip.payload_manager.write_payload({'source': 'kbox_vars', 'text': t})\\n" \
	"    except BaseException:\\n"                                                        \
	"        pass\\n"                                                                     \
	"cbs = ip.events.callbacks['post_run_cell']\\n"                                       \
	"old = builtins.__dict__.get('_kbox_vars_hook')\\n"                                   \
	"cbs[:] = [c for c in cbs if c is not old]\\n"                                        \
	"builtins._kbox_vars = f\\n"                                                          \
	"builtins._kbox_vars_hook = hook\\n"                                                  \
	"cbs.append(hook)\\n"
#define VARS_PAYLOAD "kbox_vars"

/* vars_define's text, around the session id (a UUID, 36 characters) */
#define VARS_DEFINE_HEAD                                    \
	"__import__('builtins').exec(\"" VARS_SOURCE "\", " \
	"{'get_ipython': get_ipython, 'sid': '"
#define VARS_DEFINE_TAIL "'}) or __import__('builtins')._kbox_vars()"
#define VARS_DEFINE_MAX (sizeof VARS_DEFINE_HEAD + 36 + sizeof VARS_DEFINE_TAIL)

/* The user_expression that defines the function and the hook in S's
 * current kernel for its client's session, into OUT (SIZE bytes, at
 * least VARS_DEFINE_MAX); NULL when it does not fit. */
static const char *vars_define(const sup_t *s, char *out, size_t size)
{
	/* (VARS_SOURCE holds a '%': it is no format) */
	int n = snprintf(out, size, "%s%s%s", VARS_DEFINE_HEAD, kbox_client_session(s->client),
	                 VARS_DEFINE_TAIL);
	return n > 0 && (size_t)n < size ? out : NULL;
}

/* Whether the N bytes at T read as the list vars_define makes: entries
 * "NAME: TYPE" (identifiers), TYPE perhaps followed by " " and a shape
 * (numbers joined by 'x'), joined by ", ", the last perhaps "and K more".
 * Kernel code can replace the function that makes it (review 20, N20-2:
 * it wrote a sentence of its own into kbox's note): what has another
 * shape is not shown. */
static bool vars_shaped(const char *t, size_t n)
{
	const char *p = t, *end = t + n;
#define IDENT(q)                                                                        \
	((*(q) >= 'a' && *(q) <= 'z') || (*(q) >= 'A' && *(q) <= 'Z') || *(q) == '_' || \
	 (*(q) >= '0' && *(q) <= '9'))
#define DIGIT(q) (*(q) >= '0' && *(q) <= '9')
	while (p < end) {
		if (end - p > 4 && memcmp(p, "and ", 4) == 0) { /* the last: "and K more" */
			const char *q = p + 4;
			while (q < end && DIGIT(q))
				q++;
			return q > p + 4 && end - q == 5 && memcmp(q, " more", 5) == 0;
		}
		if (DIGIT(p) || !IDENT(p)) /* NAME */
			return false;
		while (p < end && IDENT(p))
			p++;
		if (end - p < 3 || memcmp(p, ": ", 2) != 0 || DIGIT(p + 2) || !IDENT(p + 2))
			return false;
		for (p += 2; p < end && IDENT(p);) /* TYPE */
			p++;
		if (p < end && *p == ' ' && (p + 1 == end || p[1] == ','))
			p++; /* (the empty shape of a 0-d ndarray) */
		else if (p < end && *p == ' ' && p + 1 < end && DIGIT(p + 1)) { /* a shape */
			for (p++; p < end && DIGIT(p);) {
				while (p < end && DIGIT(p))
					p++;
				if (p + 1 < end && *p == 'x' && DIGIT(p + 1))
					p++;
			}
		}
		if (p == end)
			return true;
		if (end - p < 3 || memcmp(p, ", ", 2) != 0)
			return false;
		p += 2;
	}
#undef IDENT
#undef DIGIT
	return true; /* (nothing defined) */
}

/* Whether the N bytes at T are a list of what code defined that kbox
 * may show: within VARS_MAX, and shaped as vars_shaped says.  The
 * kernel's words, in kbox's own note: only the shape of a summary of
 * names and types (ASCII identifiers, ": ", ", ", a shape), so that
 * nothing in it breaks a line, closes the note or reads as a sentence of
 * kbox's; a list that holds a name of other letters is not shown. */
static bool vars_showable(const char *t, size_t n)
{
	return n <= VARS_MAX && !memchr(t, '\0', n) && vars_shaped(t, n);
}

/* Keep what the reply of X, an execution in kernel GENERATION, says the
 * code defined, and whether the hook that says it is there in that
 * kernel.  ASKED: X carried vars_define, whose value is the repr of the
 * list (kept only when it holds no escape); else the list is the text
 * of the reply's payload from the hook. */
static void vars_take(sup_t *s, kbox_exec_t *x, unsigned long generation, bool asked)
{
	const kbox_msg_t *reply = kbox_exec_reply(x);
	json_t *c = reply ? kbox_msg_content(reply) : NULL, *pl, *item;
	const char *st, *t = NULL;
	size_t n = 0, i;

	if (asked) {
		json_t *e = json_object_get(json_object_get(c, "user_expressions"), "kbox_vars");
		st = json_string_value(json_object_get(e, "status"));
		t = json_string_value(json_object_get(json_object_get(e, "data"), "text/plain"));
		n = t ? strlen(t) : 0;
		/* (not evaluated, after code that failed: nothing is known) */
		if (st && strcmp(st, "ok") == 0)
			s->vars_fn_generation = generation;
		else if (st)
			s->vars_fn_generation = 0;
		if (!st || strcmp(st, "ok") != 0 || n < 2 || (t[0] != '\'' && t[0] != '"') ||
		    t[n - 1] != t[0] || memchr(t + 1, '\\', n - 2) || memchr(t + 1, t[0], n - 2) ||
		    !vars_showable(t + 1, n - 2))
			return;
		t++, n -= 2;
	} else {
		/* the hook's payload (the last of its source, should code add one) */
		pl = json_object_get(c, "payload");
		json_array_foreach(pl, i, item)
		{
			const char *src = json_string_value(json_object_get(item, "source"));
			json_t *text = json_object_get(item, "text");
			if (src && strcmp(src, VARS_PAYLOAD) == 0 && json_is_string(text)) {
				t = json_string_value(text);
				n = json_string_length(text);
			}
		}
		if (!t) {
			/* the hook is gone (or was never made in this kernel):
			 * the next execution makes it again */
			s->vars_fn_generation = 0;
			return;
		}
		if (!vars_showable(t, n))
			return;
	}
	memcpy(s->vars, t, n);
	s->vars[n] = '\0';
}

/* ---- an execution's own variables ("env") ---- */

/* How long the silent executions that set and restore them may take. */
#define ENV_EXEC_MS 30000

/* The Python that sets J's variables, keeping what they were (SET), or
 * puts back what they were: run in a namespace of its own (exec with a
 * fresh dict), so that nothing of it is left among the user's names; the
 * values kept hang on the os module.  Malloc'd, or NULL. */
static char *env_code(const job_t *j, bool set)
{
	static const char restore[] =
	        "__import__('builtins').exec(\"import os\\n"
	        "for k, v in getattr(os, '_kbox_env_saved', {}).items():\\n"
	        "    os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)\\n"
	        "os._kbox_env_saved = {}\", {})\n";
	json_t *vars;
	char *lit, *code = NULL;

	if (!set)
		return strdup(restore);
	if (!(vars = json_object()))
		return NULL;
	for (size_t i = 0; i < j->e.n_env; i++)
		json_object_set_new(vars, j->e.env_names[i], json_string(j->e.env_values[i]));
	/* a JSON object of strings is a Python dict literal (the escapes
	 * jansson writes, \uXXXX among them, are Python's too) */
	/* UTF-8 as it is (Python's source is UTF-8); what JSON escapes,
	 * Python reads the same */
	lit = json_dumps(vars, JSON_COMPACT);
	json_decref(vars);
	if (lit &&
	    asprintf(&code,
	             "__import__('builtins').exec(\"import os\\n"
	             "s = os._kbox_env_saved = {k: os.environ.get(k) for k in N}\\n"
	             "try:\\n    os.environ.update(N)\\nexcept BaseException:\\n"
	             "    [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v) "
	             "for k, v in s.items()]\\n    os._kbox_env_saved = {}\\n    raise\", "
	             "{\"N\": %s})\n",
	             lit) < 0)
		code = NULL;
	free(lit);
	return code;
}

/* How long J's silent executions may take, in ms. */
static int env_ms(const job_t *j)
{
	return j->e.timeout_ms > 0 && j->e.timeout_ms < ENV_EXEC_MS ? ms_int(j->e.timeout_ms)
	                                                            : ENV_EXEC_MS;
}

static void on_env_set(void *arg, kbox_exec_t *x);
static void on_env_restored(void *arg, kbox_exec_t *x);

/* Begin the silent execution that sets (SET) or restores J's variables.
 * 0, or -1 with ERR. */
static int env_begin(sup_t *s, job_t *j, bool set, kbox_error_t *err)
{
	kbox_exec_opts_t eo = {0};
	char *code = env_code(j, set);
	kbox_exec_t *x;

	if (!code)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	eo.code = code;
	eo.silent = true;
	/* within the execution's own time limit, when it has a shorter one */
	eo.timeout_ms = env_ms(j);
	eo.interrupt_on_timeout = true;
	eo.grace_ms = ms_int(j->e.grace_ms);
	x = kbox_client_execute_begin(s->client, &eo, set ? on_env_set : on_env_restored, j, err);
	free(code);
	if (!x)
		return -1;
	j->env_phase = set ? 1 : 3;
	return 0;
}

/* A silent execution of J's ended in X, not ok: the kernel died, or it
 * did not answer: what comes next is as for a death (a new kernel).  A
 * kernel still running it after the interrupt (code of the user's that
 * took over what the execution calls, and ignores interrupts) is killed,
 * else nothing would ever run on it again.  True when it was killed. */
static bool env_failed(sup_t *s, const job_t *j, kbox_exec_t *x)
{
	kbox_exec_status_t st = kbox_exec_status(x);
	bool kill = false;

	if (st != KBOX_EXEC_DIED && st != KBOX_EXEC_TIMEOUT)
		return false;
	if (st == KBOX_EXEC_TIMEOUT && s->sb && kr_sandbox_alive(s->sb) && !s->replacing) {
		char t[32];
		snprintf(s->kill_cause, sizeof s->kill_cause,
		         "setting or restoring an execution's variables (\"env\") did not end "
		         "within %s, nor stop at an interrupt, so the kernel was killed",
		         kx_fmt_ms(t, sizeof t, env_ms(j)));
		kr_sandbox_signal(s->sb, SIGKILL, NULL);
		kill = true;
	}
	s->ready = false;
	sup_kernel_check_soon(s);
	return kill;
}

static int job_begin_code(sup_t *s, job_t *j);
static int job_refuse_as(sup_t *s, job_t *j, kr_ctl_err_t kind, const kbox_error_t *err);

/* J's variables are set (or could not be): its code runs, or its client
 * hears why not. */
static void on_env_set(void *arg, kbox_exec_t *x)
{
	job_t *j = arg;
	sup_t *s = j->s;
	kbox_error_t err = {0};

	if (kbox_exec_status(x) != KBOX_EXEC_OK) {
		kbox_error_set(&err, KBOX_E_INVALID,
		               "the execution's variables (\"env\") could not be set: %s%s",
		               kbox_exec_reason(x) && *kbox_exec_reason(x)
		                       ? kbox_exec_reason(x)
		                       : kbox_exec_status_name(kbox_exec_status(x)),
		               env_failed(s, j, x)
		                       ? "; the kernel ignored the interrupt, so it was "
		                         "killed and a new one is started"
		                       : "");
		kbox_exec_destroy(&x);
		job_refuse_as(s, j, KR_CTL_ERR_KERNEL, &err);
		sup_dispatch_soon(s);
		return;
	}
	kbox_exec_destroy(&x);
	j->env_phase = 2;
	if (!j->conn) {
		/* its client went away meanwhile: its code does not run, and its
		 * variables go back at once */
		if (env_begin(s, j, false, &err) < 0) {
			s->running = NULL;
			job_free(j);
			sup_dispatch_soon(s);
		}
		return;
	}
	if (job_begin_code(s, j) < 0)
		sup_dispatch_soon(s);
}

/* J's variables are what they were before it: the next job may run. */
static void on_env_restored(void *arg, kbox_exec_t *x)
{
	job_t *j = arg;
	sup_t *s = j->s;

	if (kbox_exec_status(x) != KBOX_EXEC_OK) {
		sup_log(s, "env-not-restored",
		        json_pack("{s:s}", "status", kbox_exec_status_name(kbox_exec_status(x))));
		env_failed(s, j, x);
	}
	kbox_exec_destroy(&x);
	s->running = NULL;
	job_free(j);
	sup_dispatch_soon(s);
}

/* The execution of J ended: its result to its client, the log, and what
 * comes next (a killed kernel's replacement, the next job). */
static void on_exec_done(void *arg, kbox_exec_t *x)
{
	job_t *j = arg;
	sup_t *s = j->s;
	kbox_result_t *res;
	kbox_exec_status_t st = kbox_exec_status(x);
	char cause[600];
	bool kill, exiting;

	j->x = x;
	s->running = NULL;
	sup_touch(s);
	/* (an execution that raised: the hook said what its code defined
	 * before it did) */
	if (st == KBOX_EXEC_OK || st == KBOX_EXEC_ERROR)
		vars_take(s, x, j->generation, j->vars_asked);
	if (kbox_exec_interrupted(x) && !j->abandoned) {
		char t[32], why[96];
		snprintf(why, sizeof why, "the execution timed out after %s",
		         kx_fmt_ms(t, sizeof t, j->e.timeout_ms));
		sup_log(s, "interrupt", json_pack("{s:s}", "cause", why));
	}
	kill = exec_cause(j, x, cause, sizeof cause);
	/* exit(): the kernel is replaced now, not 0.1 s later when it ends
	 * by itself, so that nothing more runs on it meanwhile (the next
	 * execution waits for the new one; its result says so, and this one's
	 * a notice of the capture's).  A front end's kernel is the front
	 * end's to end (sup_kernel_replace) */
	exiting = !kill && (st == KBOX_EXEC_OK || st == KBOX_EXEC_ERROR) && !s->front &&
	          kbox_exec_asked_exit(x);
	if (j->cap)
		kbox_capture_set_reply(j->cap, reply_room(j), reply_copies(j), KR_CTL_JSON_FLAGS);
	if ((res = kbox_capture_finish(&j->cap, x))) {
		result_explain(j, res);
		/* what the backend said meanwhile (a gateway's channels that
		 * dropped and came back): read first, then said */
		if (s->sb && kr_sandbox_alive(s->sb) && s->sb->notice_seq != j->sb_notices) {
			kbox_result_add_notice(res, s->sb->notice, false);
			sup_log(s, "backend-notice", json_pack("{s:s}", "notice", s->sb->notice));
		}
		if (!kill && st != KBOX_EXEC_DIED)
			oom_explain(j, res);
		if (kill || st == KBOX_EXEC_DIED) {
			char reason[800];
			/* no new kernel when the session stops, or is about to (a
			 * gateway's server that is gone starts none) */
			bool restarting = !s->stopping && (kill || !sup_crash_limit_next(s)) &&
			                  !(s->sb && s->sb->remote_gone);
			snprintf(reason, sizeof reason, "%s%s", cause,
			         restarting ? "; a new kernel was started" : "");
			kbox_result_set_status(res, KBOX_EXEC_DIED, reason);
		}
	}
	if (j->conn && !res)
		sup_reply_error(j->conn, job_op(j), KR_CTL_ERR_INTERNAL,
		                "out of memory rendering the result");
	else if (j->conn) {
		size_t size;
		json_t *reply = exec_reply(j, x, res, &size);
		if (reply)
			sup_conn_send(j->conn, reply, false);
		else if (size)
			sup_reply_error(j->conn, job_op(j), KR_CTL_ERR_INTERNAL,
			                "the result is %zu bytes as JSON, more than a reply may be "
			                "(%d bytes): it was not sent",
			                size, KR_CTL_REPLY_MAX);
		else
			sup_reply_error(j->conn, job_op(j), KR_CTL_ERR_INTERNAL,
			                "out of memory rendering the result");
		j->conn->job = NULL;
	}
	sup_log(s, "exec-end",
	        json_pack("{s:s, s:f, s:i, s:I}", "status",
	                  kr_ctl_status_name(res ? kbox_result_status(res) : st), "seconds",
	                  kbox_exec_seconds(x), "count", kbox_exec_count(x), "generation",
	                  (json_int_t)j->generation));
	kbox_result_destroy(&res);
	/* its variables back as they were, before anything else runs on
	 * this kernel (not on one that is gone or going) */
	if (j->env_phase == 2 && !kill && !exiting && st != KBOX_EXEC_DIED && !s->stopping) {
		kbox_error_t err = {0};
		s->running = j;
		if (env_begin(s, j, false, &err) == 0) {
			sup_trim();
			return;
		}
		s->running = NULL;
		sup_log(s, "env-not-restored", json_pack("{s:s}", "error", err.msg));
	}
	job_free(j);
	/* what a flood of output made the heap grow by goes back to the
	 * system, not kept for the session's life */
	sup_trim();
	if (kill || exiting) {
		/* replaced on the next turn, not from inside the client's callback */
		snprintf(s->kill_cause, sizeof s->kill_cause, "%s",
		         kill ? cause : "the code called exit()");
		kr_sandbox_signal(s->sb, SIGKILL, NULL);
	}
	if (kill || exiting || (st == KBOX_EXEC_DIED && !s->replacing)) {
		/* nothing more runs on this kernel: the next job waits for the new one */
		s->ready = false;
		sup_kernel_check_soon(s);
	}
	sup_dispatch_soon(s);
}

/* A reply to a completion or an inspection, to its client. */
static void on_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	job_t *j = arg;
	sup_t *s = j->s;
	s->running = NULL;
	sup_touch(s);
	if (j->conn) {
		/* the kernel's content, nested no deeper than a reader takes, in
		 * a line no longer than a reply may be */
		json_t *r = reply ? json_pack("{s:b, s:s, s:o*}", "ok", 1, "re", job_op(j), "reply",
		                              kbox_json_depth_cut(kbox_msg_content(reply),
		                                                  KBOX_CAPTURE_MAX_DEPTH))
		                  : NULL;
		size_t size = json_object_get(r, "reply") ? json_size(r) : 0;
		if (size && size + 1 <= KR_CTL_REPLY_MAX)
			sup_conn_send(j->conn, r, false);
		else if (size) {
			json_decref(r);
			sup_reply_error(
			        j->conn, job_op(j), KR_CTL_ERR_KERNEL,
			        "the kernel's reply is %zu bytes as JSON, more than a reply "
			        "may be (%d bytes)",
			        size, KR_CTL_REPLY_MAX);
		} else if (reply) {
			json_decref(r);
			sup_reply_error(j->conn, job_op(j), KR_CTL_ERR_INTERNAL, "out of memory");
		} else
			sup_reply_error(j->conn, job_op(j), KR_CTL_ERR_KERNEL, "%s",
			                err ? err->msg : "no reply");
		j->conn->job = NULL;
	}
	kbox_msg_destroy(&reply);
	job_free(j);
	sup_dispatch_soon(s);
}

/* ---- beginning a job ---- */

/* J could not begin, for ERR: its client is told (an error of KIND), and
 * it is gone.  Always -1. */
static int job_refuse_as(sup_t *s, job_t *j, kr_ctl_err_t kind, const kbox_error_t *err)
{
	s->running = NULL;
	if (j->conn) {
		sup_reply_error(j->conn, job_op(j), kind, "%s", err->msg);
		j->conn->job = NULL;
	}
	job_free(j);
	return -1;
}

static int job_refuse(sup_t *s, job_t *j, const kbox_error_t *err)
{
	return job_refuse_as(s, j, KR_CTL_ERR_KERNEL, err);
}

/* Begin the completion or inspection J: its request to the kernel, the
 * cursor within the code.  0, or -1 (job_refuse). */
static int job_begin_request(sup_t *s, job_t *j)
{
	kbox_error_t err = {0};
	const char *code = j->e.code;
	json_t *content;
	int pos = 0; /* the end of the code, in code points, at most */
	for (const char *p = code; *p; p++)
		pos += ((unsigned char)*p & 0xc0) != 0x80;
	if (j->cursor_pos >= 0 && j->cursor_pos < pos)
		pos = (int)j->cursor_pos;
	content = j->op == KR_CTL_OP_COMPLETE
	                  ? json_pack("{s:s, s:i}", "code", code, "cursor_pos", pos)
	                  : json_pack("{s:s, s:i, s:i}", "code", code, "cursor_pos", pos,
	                              "detail_level", j->detail_level);
	if (kbox_client_request_begin(s->client, KBOX_CH_SHELL,
	                              j->op == KR_CTL_OP_COMPLETE ? "complete_request"
	                                                          : "inspect_request",
	                              &content, KR_CTL_KERNEL_REPLY_MS, on_reply, j, &err) < 0)
		return job_refuse(s, j, &err);
	return 0;
}

/* The capture of J's output: its budgets, where its files go and how
 * much they may take, the answers to its requests for input.  NULL with
 * ERR. */
static kbox_capture_t *job_capture(sup_t *s, job_t *j, kbox_error_t *err)
{
	kbox_capture_opts_t co = {0};
	kbox_capture_t *cap;
	const char *outputs = j->e.outputs;
	char prefix[48];
	unsigned long long used = outputs ? 0 : sup_outputs_used(s);

	snprintf(prefix, sizeof prefix, "%lu-", s->generation);
	/* the session's own outputs, opened in its directory held open (its
	 * path, swapped for a link, would lead into another session's) */
	if (!outputs && j->outputs_fd < 0)
		j->outputs_fd = openat(s->dir_fd, "outputs",
		                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	co.outputs_dir = outputs ? outputs : s->outputs;
	co.has_outputs_fd = j->outputs_fd >= 0;
	co.keep_existing = outputs != NULL; /* the client's own directory */
	co.outputs_fd = j->outputs_fd;
	co.prefix = j->e.prefix ? j->e.prefix : prefix;
	co.max_bytes = (size_t)j->e.max_output;
	co.max_lines = (size_t)j->e.max_lines;
	/* what it may write: spill files no larger than the kernel's own
	 * files may be, and the session's outputs quota (what outputs/ holds
	 * already counts; a directory of the client's own is bounded per
	 * execution) */
	co.spill_max = s->sb && s->sb->o.file_bytes > 0 ? (unsigned long long)s->sb->o.file_bytes
	                                                : 0;
	co.has_files_max = true;
	co.files_max = s->outputs_quota > used ? s->outputs_quota - used : 0;
	if (j->e.has_inputs) {
		co.input_lines = j->e.inputs;
		co.n_input = j->e.n_inputs;
	}
	cap = kbox_capture_new(&co, err);
	/* the MIME values kept are counted as the reply writes them */
	if (cap)
		kbox_capture_set_reply(cap, KR_CTL_REPLY_MAX, reply_copies(j), KR_CTL_JSON_FLAGS);
	return cap;
}

static int job_begin_vars(sup_t *s, job_t *j);

/* The host functions are defined in this kernel (or could not be): J
 * goes on, or its client hears why not. */
static void on_functions_defined(void *arg, kbox_exec_t *x)
{
	job_t *j = arg;
	sup_t *s = j->s;
	kbox_error_t err = {0};
	const kbox_msg_t *m = NULL;

	if (kbox_exec_status(x) == KBOX_EXEC_OK) {
		kbox_exec_destroy(&x);
		s->fns_generation = s->generation;
		if (!j->conn) {
			s->running = NULL;
			job_free(j);
			sup_dispatch_soon(s);
			return;
		}
		if (job_begin_vars(s, j) < 0)
			sup_dispatch_soon(s);
		return;
	}
	for (size_t i = 0; i < kbox_exec_output_count(x) && !m; i++)
		if (strcmp(kbox_msg_type(kbox_exec_output(x, i)), "error") == 0)
			m = kbox_exec_output(x, i);
	kbox_error_set(&err, KBOX_E_INVALID,
	               "the host functions could not be defined in the kernel: %s%s%s",
	               m ? json_string_value(json_object_get(kbox_msg_content(m), "ename"))
	                 : kbox_exec_status_name(kbox_exec_status(x)),
	               m ? ": " : (kbox_exec_reason(x)[0] ? ": " : ""),
	               m ? json_string_value(json_object_get(kbox_msg_content(m), "evalue"))
	                 : kbox_exec_reason(x));
	kbox_exec_destroy(&x);
	job_refuse_as(s, j, KR_CTL_ERR_KERNEL, &err);
	sup_dispatch_soon(s);
}

/* Begin the execution J: the session's host functions defined first in
 * a kernel that has not had them yet (a silent execution), then
 * job_begin_vars.  0, or -1 (job_refuse). */
static int job_begin_execute(sup_t *s, job_t *j)
{
	kbox_exec_opts_t eo = {0};
	kbox_error_t err = {0};
	char *code;

	if (!s->fns || s->fns_generation == s->generation)
		return job_begin_vars(s, j);
	if (!(code = kbox_functions_kernel_code(s->fns))) {
		kbox_error_set(&err, KBOX_E_NOMEM, "out of memory");
		return job_refuse(s, j, &err);
	}
	eo.code = code;
	eo.silent = true;
	eo.collect = true;
	eo.timeout_ms = ENV_EXEC_MS;
	eo.interrupt_on_timeout = true;
	if (!kbox_client_execute_begin(s->client, &eo, on_functions_defined, j, &err)) {
		free(code);
		return job_refuse(s, j, &err);
	}
	free(code);
	return 0;
}

/* Begin the execution J: its variables first when it has some (then
 * job_begin_code once they are set), else its code.  0, or -1
 * (job_refuse). */
static int job_begin_vars(sup_t *s, job_t *j)
{
	kbox_error_t err = {0};
	const char *lang = s->spec ? kbox_kspec_language(s->spec) : NULL;

	if (!j->e.n_env)
		return job_begin_code(s, j);
	if (!lang || strcmp(lang, "python") != 0) {
		kbox_error_set(
		        &err, KBOX_E_INVALID,
		        "\"env\" (kbox exec -e) needs a Python kernel: the kernel %s is %s; a session's own variables (kbox start -e) work with any",
		        s->kernel, lang ? lang : "of no language it names");
		return job_refuse_as(s, j, KR_CTL_ERR_USAGE, &err);
	}
	if (env_begin(s, j, true, &err) < 0)
		return job_refuse(s, j, &err);
	return 0;
}

/* Begin the code of execution J: its capture, then the kernel's client
 * takes it on, and its client hears that it runs.  0, or -1
 * (job_refuse). */
static int job_begin_code(sup_t *s, job_t *j)
{
	kbox_error_t err = {0};
	kbox_exec_opts_t eo = {0};
	char vars_buf[VARS_DEFINE_MAX];
	const char *vars_src;

	j->generation = s->generation;
	j->vars_asked = false;
	if (j->conn)
		j->conn->events_dropped = 0;
	if (!(j->cap = job_capture(s, j, &err)))
		return job_refuse(s, j, &err);
	/* what it should know: kept for the next execution if this one does
	 * not begin */
	snprintf(j->notice, sizeof j->notice, "%s", s->notice);
	if (j->e.format == KR_CTL_FMT_NDJSON || j->e.format == KR_CTL_FMT_TEXT_LIVE ||
	    j->e.format == KR_CTL_FMT_JSON_LIVE)
		kbox_capture_set_event_cb(j->cap, on_event, j);
	eo.code = j->e.code;
	eo.timeout_ms = ms_int(j->e.timeout_ms);
	eo.interrupt_on_timeout = true;
	eo.grace_ms = ms_int(j->e.grace_ms);
	eo.on_msg = job_on_msg;
	eo.keep_output = job_keep_output;
	eo.max_msgs_per_sec = s->output_rate;
	eo.cb_arg = j;
	eo.functions = s->fns;
	if (j->e.has_inputs) {
		eo.input_lines = j->e.inputs;
		eo.n_input = j->e.n_inputs;
	}
	/* what the code defined, named should the kernel die (Python) */
	if (s->spec && kbox_kspec_language(s->spec) &&
	    strcmp(kbox_kspec_language(s->spec), "python") == 0 &&
	    s->vars_fn_generation != s->generation &&
	    (vars_src = vars_define(s, vars_buf, sizeof vars_buf))) {
		eo.user_expressions = json_pack("{s:s}", "kbox_vars", vars_src);
		j->vars_asked = true;
	}
	j->x = kbox_client_execute_begin(s->client, &eo, on_exec_done, j, &err);
	json_decref(eo.user_expressions);
	if (!j->x)
		return job_refuse(s, j, &err);
	s->notice[0] = '\0';
	j->oom_before = s->sb ? kr_sandbox_oom_kills(s->sb) : -1;
	j->sb_notices = s->sb ? s->sb->notice_seq : 0;
	take_between(s, j);
	s->executions++;
	sup_log(s, "exec-begin",
	        json_pack("{s:I, s:I}", "generation", (json_int_t)j->generation, "code_bytes",
	                  (json_int_t)strlen(eo.code)));
	/* the client hears first that it runs, and what it should know */
	if (j->conn)
		sup_conn_send(j->conn,
		              json_pack("{s:s, s:b, s:I, s:s?, s:s?}", "re", "execute", "started",
		                        1, "generation", (json_int_t)j->generation, "notice",
		                        j->notice[0] ? j->notice : NULL, "earlier_output",
		                        j->earlier_text),
		              false);
	return 0;
}

/* Begin job J on the kernel.  0, or -1 when it could not begin (its
 * client has been told). */
static int job_begin(sup_t *s, job_t *j)
{
	if (j->wait_timer) {
		kbox_loop_cancel_timer(s->loop, j->wait_timer);
		j->wait_timer = 0;
	}
	s->running = j;
	sup_touch(s);
	return j->op == KR_CTL_OP_EXECUTE ? job_begin_execute(s, j) : job_begin_request(s, j);
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

void sup_dispatch_soon(sup_t *s)
{
	kbox_loop_add_timer(s->loop, 0, false, on_dispatch, s, NULL);
}

/* ---- a new job ---- */

/* Take J's outputs directory: the descriptor C passed with the request,
 * held from now on (swapping the path for a link changes nothing).  A
 * request never makes the supervisor open a host directory by its name:
 * a path without a descriptor is refused, so that a client cannot have
 * it write where the client itself may not (kbox-protocol(7), threat
 * 44).  0, or -1 after an error reply. */
static int job_outputs(conn_t *c, job_t *j)
{
	const char *outputs = j->e.outputs;
	struct stat st;
	j->outputs_fd = c->passed_fd;
	c->passed_fd = -1;
	if (j->outputs_fd < 0) {
		sup_reply_error(c, job_op(j), KR_CTL_ERR_USAGE,
		                "\"outputs\" %s: pass the directory open, as SCM_RIGHTS with the "
		                "request (the supervisor opens no directory a request names)",
		                outputs);
		return -1;
	}
	errno = 0;
	if (fstat(j->outputs_fd, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    faccessat(j->outputs_fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
		sup_reply_error(c, job_op(j), KR_CTL_ERR_USAGE, "\"outputs\" %s: %s", outputs,
		                errno ? strerror(errno) : "not a directory");
		return -1;
	}
	return 0;
}

int sup_job_new(sup_t *s, conn_t *c, kr_ctl_op_t op, json_t *req, kr_ctl_exec_t *e,
                long long cursor_pos, int detail_level)
{
	job_t *j = calloc(1, sizeof *j);
	long long wait_ms;

	if (!j) {
		kr_ctl_exec_clear(e);
		sup_reply_error(c, kr_ctl_op_name(op), KR_CTL_ERR_INTERNAL, "out of memory");
		return -1;
	}
	j->oom_before = -1;
	j->s = s;
	j->op = op;
	j->outputs_fd = -1;
	j->conn = c;
	j->req = json_incref(req);
	j->e = *e; /* its inputs are the job's now */
	memset(e, 0, sizeof *e);
	j->cursor_pos = cursor_pos;
	j->detail_level = detail_level;
	if (j->e.outputs && job_outputs(c, j) < 0) {
		job_free(j);
		return -1;
	}
	if (j->e.grace_ms == 0) {
		j->e.grace_ms = 1;
		j->grace_none = true;
	}
	/* how long it may wait for its turn: "wait", else its own time limit
	 * (the session runs one thing at a time) */
	wait_ms = j->e.wait_ms >= 0 ? j->e.wait_ms : j->e.timeout_ms;
	if ((s->running || s->queue || !s->ready) && wait_ms > 0)
		j->wait_timer = kbox_loop_add_timer(s->loop, ms_int(wait_ms), false,
		                                    on_wait_timeout, j, NULL);
	c->job = j;
	sup_touch(s);
	if (!s->stopping && s->ready && !s->running && !s->queue) {
		/* the kernel is free: the request leaves now, not one turn of
		 * the loop later */
		job_begin(s, j);
		return 0;
	}
	queue_add(s, j);
	sup_dispatch_soon(s);
	return 0;
}
