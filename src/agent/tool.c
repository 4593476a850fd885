/* src/agent/tool.c — kbox agent's tool calls: the model's arguments
 * checked (what is wrong goes back to the model as the tool's result),
 * the code run in the session's kernel through its supervisor
 * (src/runtime/ctl.h), as kbox exec would, and each step shown on
 * standard error. */
#include "config.h"
#include "agent/agent_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- showing the steps ---- */

void agent_show_lines(const char *prefix, const char *text)
{
	const char *p = text;
	while (*p) {
		size_t n = strcspn(p, "\n");
		fputs(prefix, stderr);
		cli_write_safe(stderr, p, n);
		fputc('\n', stderr);
		p += n;
		if (*p)
			p++;
	}
	fflush(stderr);
}

/* Whether the line P (LEN bytes) is a value's label alone, "Out[N]:" (a
 * value of several lines starts on the next line). */
static bool bare_out(const char *p, size_t len)
{
	size_t i = 4;
	if (len < 7 || strncmp(p, "Out[", 4) != 0)
		return false;
	while (i < len && p[i] >= '0' && p[i] <= '9')
		i++;
	if (i == 4 || i + 1 >= len || p[i] != ']' || p[i + 1] != ':')
		return false;
	for (i += 2; i < len; i++)
		if (p[i] != ' ')
			return false;
	return true;
}

/* The note that opens the first result of a session the agent made: the
 * person heard it on standard error already. */
#define NEW_SESSION_NOTE "[note: new session "

/* The one-line summary of a result's TEXT into OUT: its first non-empty
 * line (with the next one after a bare "Out[N]:"), cut, and how many more
 * there are; the new session's note is left out. */
static void summary(const char *text, char *out, size_t size)
{
	const char *line[2] = {NULL, NULL};
	size_t len[2] = {0, 0}, found = 0, want = 1, more = 0, l;

	if (strncmp(text, NEW_SESSION_NOTE, strlen(NEW_SESSION_NOTE)) == 0)
		text += strcspn(text, "\n");
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		if (n && found < want) {
			line[found] = p;
			len[found++] = n;
			if (found == 1 && bare_out(p, n))
				want = 2;
		} else if (n)
			more++;
		p += n;
		if (*p)
			p++;
	}
	if (!found) {
		snprintf(out, size, "[no output]");
		return;
	}
	*out = '\0';
	for (size_t k = 0; k < found; k++) {
		size_t n = len[k];
		while (k == 0 && found == 2 && n && line[0][n - 1] == ' ')
			n--;
		l = strlen(out);
		if (n > 100)
			snprintf(out + l, size - l, "%s%.97s...", k ? " " : "", line[k]);
		else
			snprintf(out + l, size - l, "%s%.*s", k ? " " : "", (int)n, line[k]);
	}
	if (more) {
		l = strlen(out);
		snprintf(out + l, size - l, " (+%zu more line%s)", more, more == 1 ? "" : "s");
	}
}

/* ---- running code in the session ---- */

/* The request that runs CODE in the session, TIMEOUT_S seconds at most
 * (0: no limit): its result as JSON, with its text. */
static kr_ctl_exec_t execute_request(const char *code, double timeout_s)
{
	kr_ctl_exec_t e = KR_CTL_EXEC_INIT;
	e.code = code;
	e.format = KR_CTL_FMT_JSON;
	e.with_text = true;
	/* as the supervisor takes it, to the nearest millisecond; one beyond
	 * its range stays beyond it, and is refused */
	if (timeout_s > KR_CTL_DURATION_MAX_S)
		e.timeout_ms = (long long)(KR_CTL_DURATION_MAX_S + 1) * 1000;
	else if (timeout_s > 0)
		e.timeout_ms = (long long)(timeout_s * 1000.0 + 0.5);
	return e;
}

/* Run CODE in the session (TIMEOUT_S seconds at most, 0: no limit).  The
 * supervisor's reply (new reference) with "text" and "result"; NULL with
 * *STATUS set after one line when the session could not run it, or NULL
 * with *STATUS left EXIT_OK when the supervisor went away while the code
 * ran. */
static json_t *execute(agent_t *a, const char *code, double timeout_s, int *status)
{
	kbox_error_t err = {0};
	kr_ctl_exec_t req = execute_request(code, timeout_s);
	for (int attempt = 0; attempt < 2; attempt++) {
		json_t *m = NULL;
		kr_ctl_exec_end_t end;
		int fd = cli_session_connect(AGENT_CMD, a->dir, a->name, false, status);
		if (fd < 0)
			return NULL;
		end = kr_ctl_execute(fd, a->dir, &req, -1, NULL, NULL, &m, &err);
		close(fd);
		if (end == KR_CTL_EXEC_REPLY)
			return m;
		if (end == KR_CTL_EXEC_NOT_SENT || end == KR_CTL_EXEC_UNANSWERED) {
			agent_error(a, "session %s: %s", a->name, err.msg);
			*status = EXIT_UNAVAILABLE;
			return NULL;
		}
		if (end ==
		    KR_CTL_EXEC_LOST_BEFORE) /* a supervisor that was stopping: the next one runs it */
			continue;
		return NULL; /* it began, and went with the supervisor: *STATUS is EXIT_OK */
	}
	agent_error(a, "session %s: the supervisor kept going away", a->name);
	*status = EXIT_UNAVAILABLE;
	return NULL;
}

/* ---- the calls ---- */

/* The text a model reads for a call that could not run: its arguments
 * were wrong.  Into OUT; false when they are right, with *CODE (borrowed
 * from ARGS_P's object, new) and *TIMEOUT_S set. */
static bool bad_call(const json_t *fn, json_t **args_p, const char **code, double *timeout_s,
                     char *out, size_t size)
{
	const char *name = json_string_value(json_object_get(fn, "name"));
	const json_t *raw = json_object_get(fn, "arguments");
	json_t *args = NULL, *t;
	const char *key;
	json_error_t je;
	static const char example[] = "{\"code\": \"print(1 + 1)\"}";

	*args_p = NULL;
	if (!name || strcmp(name, CLI_TOOL_NAME) != 0) {
		snprintf(out, size,
		         "error: there is no tool \"%s\"; the only tool is %s, whose "
		         "arguments are a JSON object such as %s",
		         name ? name : "(no name)", CLI_TOOL_NAME, example);
		return true;
	}
	if (json_is_string(raw)) {
		args = json_loadb(json_string_value(raw), json_string_length(raw), JSON_DECODE_ANY,
		                  &je);
		if (!args) {
			snprintf(out, size,
			         "error: the arguments are not valid JSON (%s, at character "
			         "%d); call %s again with a JSON object such as %s",
			         je.text, je.position, CLI_TOOL_NAME, example);
			return true;
		}
	} else if (raw) /* some servers give the value itself */
		args = json_incref((json_t *)raw);
	if (!json_is_object(args)) {
		static const char *const kinds[] = {"an object", "an array", "a string", "a number",
		                                    "a number",  "true",     "false",    "null"};
		snprintf(out, size,
		         "error: the arguments must be a JSON object, got %s; call %s "
		         "again with a JSON object such as %s",
		         args ? kinds[json_typeof(args)] : "nothing", CLI_TOOL_NAME, example);
		json_decref(args);
		return true;
	}
	json_object_foreach(args, key, t)
	{
		if (strcmp(key, "code") != 0 && strcmp(key, "timeout") != 0) {
			snprintf(out, size,
			         "error: unknown argument \"%.200s\": %s takes only \"code\" "
			         "and \"timeout\", such as %s",
			         key, CLI_TOOL_NAME, example);
			json_decref(args);
			return true;
		}
	}
	if (!json_is_string(json_object_get(args, "code"))) {
		snprintf(out, size,
		         "error: the arguments must be a JSON object with the code as a "
		         "string \"code\", such as %s",
		         example);
		json_decref(args);
		return true;
	}
	t = json_object_get(args, "timeout");
	if (t && !json_is_null(t) && (!json_is_number(t) || json_number_value(t) < 0)) {
		snprintf(out, size, "error: \"timeout\" must be a number of seconds, at least 0");
		json_decref(args);
		return true;
	}
	*code = json_string_value(json_object_get(args, "code"));
	*timeout_s = t && json_is_number(t) ? json_number_value(t) : 0;
	*args_p = args;
	return false;
}

int agent_not_run(agent_t *a, int step, json_t *call)
{
	static const char text[] = "error: not run: at most 16 tool calls of one response are "
	                           "run; call the tool again for the rest";
	const char *id = json_string_value(json_object_get(call, "id"));
	_Static_assert(AGENT_MAX_CALLS == 16, "the text says 16");
	if (json_array_append_new(agent_messages(a),
	                          json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id", id,
	                                    "content", text)) < 0 ||
	    json_array_append_new(a->steps, json_pack("{s:i, s:s, s:n, s:s, s:s, s:[]}", "step",
	                                              step, "tool_call_id", id, "code", "status",
	                                              "rejected", "text", text, "images")) < 0) {
		agent_error(a, "out of memory");
		return EXIT_UNAVAILABLE;
	}
	return EXIT_OK;
}

/* Whether the request that runs CODE is longer than the session takes
 * (KR_CTL_REQUEST_MAX, the line with its newline): then the text a
 * model reads into OUT. */
static bool too_long(const char *code, double timeout_s, char *out, size_t size)
{
	kr_ctl_exec_t e = execute_request(code, timeout_s);
	kbox_error_t err = {0};
	if (kr_ctl_exec_fits(&e, &err) == 0 || err.code == KBOX_E_NOMEM)
		return false;
	snprintf(out, size, "error: not run: %s", err.msg);
	return true;
}

/* What the model reads of the supervisor's REPLY (borrowed; NULL: the
 * supervisor went away while the code ran) to its code: the reply's text
 * (borrowed), *ST its status; a refusal because the session was busy
 * running other code is for the model too, into BUF.
 * NULL, *STATUS set, after one line for any other refusal. */
static const char *reply_text(agent_t *a, const json_t *reply, const char **st, char *buf,
                              size_t size, int *status)
{
	const char *text, *msg = json_string_value(json_object_get(reply, "error"));
	kr_ctl_err_t kind;

	if (!reply) {
		*st = "died";
		return "[kernel died: the session's supervisor went away; earlier state is lost]\n";
	}
	if (kr_ctl_msg_kind(reply, NULL) == KR_CTL_MSG_REPLY) {
		text = json_string_value(json_object_get(reply, "text"));
		*st = json_string_value(json_object_get(reply, "status"));
		if (!*st)
			*st = "unknown";
		return kx_model_text(text);
	}
	if ((kind = kr_ctl_err_kind(reply)) != KR_CTL_ERR_BUSY) {
		agent_error(a, "session %s: %s", a->name, msg ? msg : "the supervisor refused");
		*status = kind == KR_CTL_ERR_USAGE ? EXIT_USAGE : EXIT_UNAVAILABLE;
		return NULL;
	}
	/* other code held the kernel all that time: the model may try again */
	snprintf(buf, size,
	         "error: the session was busy running other code, and this code did "
	         "not run: %s",
	         msg ? msg : "busy");
	*st = "busy";
	return buf;
}

/* The step's line on standard error after TAG: the status ST, the
 * seconds, and the error's name and value, else a summary of TEXT. */
static void show_result(const char *tag, const char *st, const char *text, const json_t *result)
{
	const json_t *e = json_object_get(result, "error");
	char line[256];

	if (strcmp(st, "error") == 0 && json_is_object(e))
		snprintf(line, sizeof line, "%s: %s",
		         json_string_value(json_object_get(e, "ename")) ?: "Error",
		         json_string_value(json_object_get(e, "evalue")) ?: "");
	else
		summary(text, line, sizeof line);
	fprintf(stderr, "%s%s, %.2fs: ", tag, st,
	        json_number_value(json_object_get(result, "seconds")));
	agent_show_lines("", line);
}

int agent_tool_call(agent_t *a, int step, json_t *call)
{
	const char *id = json_string_value(json_object_get(call, "id"));
	json_t *fn = json_object_get(call, "function"), *args = NULL, *reply = NULL;
	json_t *images = json_array(), *result, *img;
	const char *code = NULL, *text, *st = "rejected";
	double timeout_s = 0, cap = (double)a->timeout_ms / 1000.0;
	char bad[1024], tag[32], *report = NULL;
	int status = EXIT_OK;
	bool rejected;
	size_t i;

	snprintf(tag, sizeof tag, "[step %d] ", step);
	rejected = bad_call(fn, &args, &code, &timeout_s, bad, sizeof bad);
	if (!rejected && cap > 0 && (timeout_s <= 0 || timeout_s > cap))
		timeout_s = cap;
	if (!rejected && too_long(code, timeout_s, bad, sizeof bad)) {
		rejected = true;
		code = NULL; /* the trace has none for a call not run */
	}
	if (!rejected && a->type_check) {
		/* the calls of the host functions checked first (--type-check) */
		char cache[PATH_MAX + 16];
		snprintf(cache, sizeof cache, "%s/mypy-cache", a->dir);
		if ((status = cli_type_check(AGENT_CMD, a->functions, code, cache, &report)) !=
		    EXIT_OK)
			goto out;
		rejected = report != NULL;
	}
	if (rejected && report) {
		text = report;
		fprintf(stderr, "%s", tag);
		agent_show_lines("", report);
	} else if (rejected) {
		bad[kx_utf8_floor(bad, strlen(bad), strlen(bad))] = '\0'; /* snprintf may cut */
		text = bad;
		fprintf(stderr, "%s", tag);
		agent_show_lines("", bad);
	} else {
		fprintf(stderr, "%s%s:\n", tag, CLI_TOOL_NAME);
		agent_show_lines("  | ", code);
		reply = execute(a, code, timeout_s, &status);
		if (status != EXIT_OK ||
		    !(text = reply_text(a, reply, &st, bad, sizeof bad, &status)))
			goto out;
		result = json_object_get(reply, "result");
		json_array_foreach(json_object_get(result, "images"), i, img)
		        json_array_append(images, json_object_get(img, "path"));
		show_result(tag, st, text, result);
	}
	json_array_append_new(agent_messages(a), json_pack("{s:s, s:s, s:s}", "role", "tool",
	                                                   "tool_call_id", id, "content", text));
	json_array_append_new(a->steps, json_pack("{s:i, s:s, s:s?, s:s, s:s, s:O}", "step", step,
	                                          "tool_call_id", id, "code", code, "status", st,
	                                          "text", text, "images", images));
out:
	free(report);
	json_decref(images);
	json_decref(args);
	json_decref(reply);
	return status;
}
