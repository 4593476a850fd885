/* src/runtime/protocol.c — kbox-protocol(7)'s names, requests and lines
 * (protocol.h): the one place a request is written and checked. */
#include "runtime/runtime.h"
#include "runtime/protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(KR_CTL_MAX_OUTPUT_MAX == KBOX_CAPTURE_MAX_BYTES_LIMIT,
               "max_output's limit is the capture's");
_Static_assert(KR_CTL_IN_TOTAL_MAX >= 2 * KR_CTL_REQUEST_MAX,
               "a request of the longest can arrive while another does");
_Static_assert(KR_CTL_REPLY_MAX + (8 << 20) <= KR_CTL_LINE_MAX,
               "a reply fits a client's line, with room to spare");
/* a result nests a kernel's value 5 levels deep (reply, result, outputs,
 * an output, its data), an ndjson end event or earlier_output no deeper */
_Static_assert(KBOX_CAPTURE_MAX_DEPTH + 8 <= KR_CTL_DEPTH_MAX &&
                       KR_CTL_DEPTH_MAX < JSON_PARSER_MAX_DEPTH,
               "a reply nests no deeper than its reader takes");

/* ---- names ---- */

static const char *const op_names[KR_CTL_N_OPS] = {
        [KR_CTL_OP_STATUS] = "status",       [KR_CTL_OP_EXECUTE] = "execute",
        [KR_CTL_OP_COMPLETE] = "complete",   [KR_CTL_OP_INSPECT] = "inspect",
        [KR_CTL_OP_INTERRUPT] = "interrupt", [KR_CTL_OP_RESTART] = "restart",
        [KR_CTL_OP_STOP] = "stop",           [KR_CTL_OP_SESSION] = "session",
};

static const char *const err_names[] = {
        [KR_CTL_ERR_USAGE] = "usage",     [KR_CTL_ERR_BUSY] = "busy",
        [KR_CTL_ERR_KERNEL] = "kernel",   [KR_CTL_ERR_STATE] = "state",
        [KR_CTL_ERR_STOPPED] = "stopped", [KR_CTL_ERR_INTERNAL] = "internal",
};

static const char *const status_names[] = {
        [KBOX_EXEC_OK] = "ok",           [KBOX_EXEC_ERROR] = "error",
        [KBOX_EXEC_ABORTED] = "aborted", [KBOX_EXEC_TIMEOUT] = "timeout",
        [KBOX_EXEC_DIED] = "died",       [KBOX_EXEC_INTERRUPTED] = "interrupted",
};

static const char *const format_names[] = {
        [KR_CTL_FMT_TEXT] = "text",           [KR_CTL_FMT_TEXT_LIVE] = "text-live",
        [KR_CTL_FMT_JSON] = "json",           [KR_CTL_FMT_NDJSON] = "ndjson",
        [KR_CTL_FMT_JSON_LIVE] = "json-live",
};

#define N_OF(a) (sizeof(a) / sizeof *(a))

/* The index of NAME (may be NULL) in NAMES, or -1. */
static int name_index(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; name && i < n; i++)
		if (names[i] && strcmp(names[i], name) == 0)
			return (int)i;
	return -1;
}

const char *kr_ctl_op_name(kr_ctl_op_t op)
{
	return op >= 0 && op < KR_CTL_N_OPS ? op_names[op] : NULL;
}

kr_ctl_op_t kr_ctl_op_parse(const char *name)
{
	return (kr_ctl_op_t)name_index(op_names, N_OF(op_names), name);
}

const char *kr_ctl_err_name(kr_ctl_err_t kind)
{
	return kind >= 0 && (size_t)kind < N_OF(err_names) ? err_names[kind] : NULL;
}

kr_ctl_err_t kr_ctl_err_kind(const json_t *msg)
{
	int i = name_index(err_names, N_OF(err_names),
	                   json_string_value(json_object_get(msg, "kind")));
	return i < 0 ? KR_CTL_ERR_UNKNOWN : (kr_ctl_err_t)i;
}

const char *kr_ctl_status_name(kbox_exec_status_t status)
{
	return (size_t)status < N_OF(status_names) ? status_names[status] : "unknown";
}

int kr_ctl_status_parse(const char *word, kbox_exec_status_t *out)
{
	int i = name_index(status_names, N_OF(status_names), word);
	if (i < 0)
		return -1;
	*out = (kbox_exec_status_t)i;
	return 0;
}

const char *kr_ctl_format_name(kr_ctl_format_t format)
{
	return (size_t)format < N_OF(format_names) ? format_names[format] : NULL;
}

/* ---- requests and lines ---- */

json_t *kr_ctl_request_new(kr_ctl_op_t op)
{
	const char *name = kr_ctl_op_name(op);
	return name ? json_pack("{s:s}", "op", name) : NULL;
}

bool kr_ctl_request_fits(const json_t *req)
{
	size_t n = req ? json_dumpb(req, NULL, 0, JSON_COMPACT | JSON_REAL_PRECISION(9)) : 0;
	return req && n + 1 <= (size_t)KR_CTL_REQUEST_MAX;
}

/* The name of the member whose duplicate JSON_REJECT_DUPLICATES found in
 * BUF, as the client wrote it (escapes kept), at most DUP_NAME_MAX bytes
 * of it, into OUT: the string token that ends just before offset END. */
#define DUP_NAME_MAX 64
static void dup_name(const char *buf, size_t end, char *out, size_t size)
{
	size_t close, open;
	out[0] = '\0';
	if (end == 0 || end > 0x7fffffff)
		return;
	close = end - 1; /* the closing quote */
	if (buf[close] != '"')
		return;
	for (open = close; open-- > 0;) {
		size_t bs = 0;
		if (buf[open] != '"')
			continue;
		while (bs < open && buf[open - 1 - bs] == '\\')
			bs++;
		if (bs % 2 == 0)
			break;
	}
	if (open == (size_t)-1)
		return;
	size_t len = close - open - 1, keep = kx_utf8_floor(buf + open + 1, len, DUP_NAME_MAX);
	snprintf(out, size, "\"%.*s%s\"", (int)keep, buf + open + 1, keep < len ? "..." : "");
}

json_t *kr_ctl_request_load(const char *buf, size_t len, kbox_error_t *err)
{
	json_error_t je;
	json_t *req = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	char name[DUP_NAME_MAX + 8];
	if (req && json_is_object(req))
		return req;
	if (req) {
		json_decref(req);
		kbox_error_set(err, KBOX_E_INVALID, "not a JSON object");
		return NULL;
	}
	if (json_error_code(&je) != json_error_duplicate_key) {
		kbox_error_set(err, KBOX_E_INVALID, "not valid JSON: %s", je.text);
		return NULL;
	}
	dup_name(buf, je.position >= 0 ? (size_t)je.position : 0, name, sizeof name);
	kbox_error_set(err, KBOX_E_INVALID, "duplicate member %s: a member may be given once",
	               name[0] ? name : "(unknown)");
	return NULL;
}

kr_ctl_msg_kind_t kr_ctl_msg_kind(const json_t *msg, kr_ctl_op_t *re_p)
{
	json_t *ok = json_object_get(msg, "ok");
	if (re_p)
		*re_p = kr_ctl_op_parse(json_string_value(json_object_get(msg, "re")));
	if (!json_is_object(msg))
		return KR_CTL_MSG_INVALID;
	if (ok)
		return json_is_true(ok)    ? KR_CTL_MSG_REPLY
		       : json_is_false(ok) ? KR_CTL_MSG_ERROR
		                           : KR_CTL_MSG_INVALID;
	if (json_is_true(json_object_get(msg, "started")))
		return KR_CTL_MSG_STARTED;
	if (json_is_object(json_object_get(msg, "event")))
		return KR_CTL_MSG_EVENT;
	return KR_CTL_MSG_INVALID;
}

/* ---- execute ---- */

/* Set KEY of O to V (taken), remembering a failure in *OK. */
static void put(json_t *o, const char *key, json_t *v, bool *ok)
{
	if (json_object_set_new(o, key, v) < 0)
		*ok = false;
}

json_t *kr_ctl_exec_to_json(const kr_ctl_exec_t *e)
{
	const char *format = kr_ctl_format_name(e->format);
	json_t *req = format && e->code ? json_pack("{s:s, s:s, s:s}", "op", "execute", "code",
	                                            e->code, "format", format)
	                                : NULL;
	bool ok = req != NULL;
	if (!ok)
		return NULL;
	if (e->with_text)
		put(req, "with_text", json_true(), &ok);
	if (e->timeout_ms > 0)
		put(req, "timeout", json_real((double)e->timeout_ms / 1000.0), &ok);
	if (e->grace_ms >= 0)
		put(req, "grace", json_real((double)e->grace_ms / 1000.0), &ok);
	if (e->wait_ms >= 0)
		put(req, "wait", json_real((double)e->wait_ms / 1000.0), &ok);
	if (e->max_output > 0)
		put(req, "max_output", json_integer(e->max_output), &ok);
	if (e->max_lines > 0)
		put(req, "max_lines", json_integer(e->max_lines), &ok);
	if (e->outputs)
		put(req, "outputs", json_string(e->outputs), &ok);
	if (e->prefix)
		put(req, "prefix", json_string(e->prefix), &ok);
	if (e->n_env) {
		json_t *env = json_object();
		for (size_t i = 0; env && i < e->n_env; i++)
			if (json_object_set_new(env, e->env_names[i],
			                        json_string(e->env_values[i])) < 0)
				ok = false;
		put(req, "env", env, &ok);
	}
	if (e->has_inputs) {
		json_t *in = json_array();
		for (size_t i = 0; in && i < e->n_inputs; i++)
			if (json_array_append_new(in, json_string(e->inputs[i])) < 0)
				ok = false;
		put(req, "input", in, &ok);
	}
	if (!ok)
		json_decref(req);
	return ok ? req : NULL;
}

int kr_ctl_exec_fits(const kr_ctl_exec_t *e, kbox_error_t *err)
{
	kr_ctl_exec_t alone = *e;
	json_t *req = kr_ctl_exec_to_json(e), *code_req = NULL;
	bool fits = req && kr_ctl_request_fits(req), code_fits = false;
	size_t len = e->code ? strlen(e->code) : 0;

	json_decref(req);
	if (fits)
		return 0;
	if (!req)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	alone.inputs = NULL;
	alone.n_inputs = 0;
	alone.has_inputs = false;
	code_req = kr_ctl_exec_to_json(&alone);
	code_fits = code_req && kr_ctl_request_fits(code_req);
	json_decref(code_req);
	if (code_fits)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "the code is %zu bytes, with %zu input lines; at most %d MiB "
		                      "can run (as a JSON string, in which a control character "
		                      "takes 6 bytes): make them shorter",
		                      len, e->n_inputs, KR_CTL_CODE_MAX >> 20);
	{
		/* the exact room: the request's bytes besides the code's are
		 * its own (the options, the field names) */
		size_t as_json = 0, other = 0;
		json_t *s = e->code ? json_string(e->code) : NULL;
		alone.code = "";
		code_req = kr_ctl_exec_to_json(&alone);
		if (s)
			as_json = json_dumpb(s, NULL, 0, JSON_ENCODE_ANY) - 2;
		if (code_req)
			other = json_dumpb(code_req, NULL, 0,
			                   JSON_COMPACT | JSON_REAL_PRECISION(9)) +
			        1;
		json_decref(s);
		json_decref(code_req);
		if (as_json == len)
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "the code is %zu bytes; at most %zu can run (%d MiB, "
			        "less %zu bytes of the request's own): make it shorter",
			        len, (size_t)KR_CTL_CODE_MAX - other, KR_CTL_CODE_MAX >> 20, other);
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "the code is %zu bytes (%zu as the JSON string sent, its "
		                      "escapes counted); at most %zu can run (%d MiB, less %zu "
		                      "bytes of the request's own): make it shorter",
		                      len, as_json, (size_t)KR_CTL_CODE_MAX - other,
		                      KR_CTL_CODE_MAX >> 20, other);
	}
}

/* The duration member NAME of REQ, seconds as a number, into *MS (DEF when
 * absent), to the nearest millisecond.  0, or -1 when it is not a number
 * from 0 to KR_CTL_DURATION_MAX_S. */
static int parse_ms(const json_t *req, const char *name, long long def, long long *ms)
{
	json_t *v = json_object_get(req, name);
	double d;
	if (!v) {
		*ms = def;
		return 0;
	}
	if (!json_is_number(v) || (d = json_number_value(v)) < 0 || d > KR_CTL_DURATION_MAX_S)
		return -1;
	*ms = (long long)(d * 1000.0 + 0.5);
	return 0;
}

/* Refuse the request being read into OUT: ERR gets WHY; OUT is cleared.
 * Always -1. */
static int refuse(kr_ctl_exec_t *out, kbox_error_t *err, kbox_errcode_t code, const char *why)
{
	kr_ctl_exec_clear(out);
	return kbox_error_set(err, code, "%s", why);
}

const char *kr_ctl_env_name_wrong(const char *name)
{
	if (!*name)
		return "a NAME may not be empty";
	if (*name >= '0' && *name <= '9')
		return "a NAME may not begin with a digit";
	for (const char *p = name; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
		      (*p >= '0' && *p <= '9')))
			return "a NAME is letters, digits and '_'";
	return NULL;
}

/* "env" of REQ into OUT: an object of at most KR_CTL_ENV_MAX strings
 * without NUL, named as variables.  0, or -1 with WHY. */
static int parse_env(const json_t *env, kr_ctl_exec_t *out, char *why, size_t size)
{
	const char *key;
	json_t *v;
	size_t n = json_object_size(env), i = 0;

	if (!json_is_object(env) || n > KR_CTL_ENV_MAX) {
		snprintf(why, size, "\"env\" is an object of at most %d strings", KR_CTL_ENV_MAX);
		return -1;
	}
	if (!n)
		return 0;
	out->env_names = calloc(n, sizeof *out->env_names);
	out->env_values = calloc(n, sizeof *out->env_values);
	if (!out->env_names || !out->env_values) {
		snprintf(why, size, "out of memory");
		return -1;
	}
	json_object_foreach((json_t *)env, key, v)
	{
		const char *wrong = kr_ctl_env_name_wrong(key);
		if (wrong) {
			snprintf(why, size, "\"env\": \"%.64s\": %s", key, wrong);
			return -1;
		}
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			snprintf(why, size, "\"env\": \"%.64s\" is a string without NUL", key);
			return -1;
		}
		out->env_names[i] = key;
		out->env_values[i++] = json_string_value(v);
	}
	out->n_env = i;
	return 0;
}

int kr_ctl_exec_parse(const json_t *req, kr_ctl_exec_t *out, kbox_error_t *err)
{
	json_t *code = json_object_get(req, "code"), *in = json_object_get(req, "input");
	json_t *format = json_object_get(req, "format"), *wt = json_object_get(req, "with_text");
	json_t *mo = json_object_get(req, "max_output"), *ml = json_object_get(req, "max_lines");
	json_t *outputs = json_object_get(req, "outputs"), *prefix = json_object_get(req, "prefix");
	json_t *env = json_object_get(req, "env");
	char why[192];
	int f = 0;

	*out = (kr_ctl_exec_t)KR_CTL_EXEC_INIT;
	if (!json_is_string(code))
		return refuse(out, err, KBOX_E_INVALID, "\"code\" (a string) is required");
	if (in && !json_is_array(in))
		return refuse(out, err, KBOX_E_INVALID, "\"input\" must be an array of strings");
	if (format &&
	    (f = name_index(format_names, N_OF(format_names), json_string_value(format))) < 0)
		return refuse(out, err, KBOX_E_INVALID,
		              "\"format\" is one of text, text-live, json, ndjson, json-live");
	if (wt && !json_is_boolean(wt))
		return refuse(out, err, KBOX_E_INVALID, "\"with_text\" is true or false");
	if (parse_ms(req, "timeout", 0, &out->timeout_ms) < 0 ||
	    parse_ms(req, "grace", KR_CTL_GRACE_DEFAULT_MS, &out->grace_ms) < 0 ||
	    parse_ms(req, "wait", -1, &out->wait_ms) < 0)
		return refuse(out, err, KBOX_E_INVALID,
		              "\"timeout\", \"grace\" and \"wait\" are seconds (a number >= 0)");
	if (mo && (!json_is_integer(mo) || json_integer_value(mo) < KR_CTL_MAX_OUTPUT_MIN ||
	           json_integer_value(mo) > KR_CTL_MAX_OUTPUT_MAX)) {
		snprintf(why, sizeof why,
		         "\"max_output\" is a number of bytes from %d to %d (%d MiB)",
		         KR_CTL_MAX_OUTPUT_MIN, KR_CTL_MAX_OUTPUT_MAX, KR_CTL_MAX_OUTPUT_MAX >> 20);
		return refuse(out, err, KBOX_E_INVALID, why);
	}
	if (ml && (!json_is_integer(ml) || json_integer_value(ml) < KR_CTL_MAX_LINES_MIN)) {
		snprintf(why, sizeof why, "\"max_lines\" is a number of lines, at least %d",
		         KR_CTL_MAX_LINES_MIN);
		return refuse(out, err, KBOX_E_INVALID, why);
	}
	if (outputs && (!json_is_string(outputs) || json_string_value(outputs)[0] != '/'))
		return refuse(out, err, KBOX_E_INVALID, "\"outputs\" is an absolute directory");
	if (prefix && (!json_is_string(prefix) || strchr(json_string_value(prefix), '/') ||
	               strlen(json_string_value(prefix)) > KR_CTL_PREFIX_MAX)) {
		snprintf(why, sizeof why,
		         "\"prefix\" is a string of at most %d characters without '/'",
		         KR_CTL_PREFIX_MAX);
		return refuse(out, err, KBOX_E_INVALID, why);
	}
	if (env && parse_env(env, out, why, sizeof why) < 0)
		return refuse(out, err,
		              strcmp(why, "out of memory") ? KBOX_E_INVALID : KBOX_E_NOMEM, why);
	if (in) {
		size_t n = json_array_size(in);
		if (!(out->inputs = calloc(n + 1, sizeof *out->inputs)))
			return refuse(out, err, KBOX_E_NOMEM, "out of memory");
		for (size_t i = 0; i < n; i++)
			if (!(out->inputs[i] = json_string_value(json_array_get(in, i))))
				return refuse(out, err, KBOX_E_INVALID,
				              "\"input\" must be an array of strings");
		out->n_inputs = n;
		out->has_inputs = true;
	}
	out->code = json_string_value(code);
	out->format = (kr_ctl_format_t)f;
	out->with_text = json_is_true(wt);
	out->max_output = mo ? (long long)json_integer_value(mo) : 0;
	out->max_lines = ml ? (long long)json_integer_value(ml) : 0;
	out->outputs = json_string_value(outputs);
	out->prefix = json_string_value(prefix);
	return 0;
}

void kr_ctl_exec_clear(kr_ctl_exec_t *e)
{
	if (!e)
		return;
	free(e->env_names);
	free(e->env_values);
	free(e->inputs);
	*e = (kr_ctl_exec_t)KR_CTL_EXEC_INIT;
}

/* ---- complete and inspect ---- */

json_t *kr_ctl_introspect_to_json(const kr_ctl_introspect_t *q)
{
	const char *op = kr_ctl_op_name(q->op);
	if (!q->exec.code || (q->op != KR_CTL_OP_COMPLETE && q->op != KR_CTL_OP_INSPECT))
		return NULL;
	if (q->op == KR_CTL_OP_COMPLETE)
		return json_pack("{s:s, s:s, s:I}", "op", op, "code", q->exec.code, "cursor_pos",
		                 (json_int_t)q->cursor_pos);
	return json_pack("{s:s, s:s, s:I, s:i}", "op", op, "code", q->exec.code, "cursor_pos",
	                 (json_int_t)q->cursor_pos, "detail_level", q->detail_level);
}

int kr_ctl_introspect_parse(const json_t *req, kr_ctl_op_t op, kr_ctl_introspect_t *out,
                            kbox_error_t *err)
{
	json_t *cursor = json_object_get(req, "cursor_pos");
	json_t *detail = json_object_get(req, "detail_level");
	memset(out, 0, sizeof *out);
	out->op = op;
	if (kr_ctl_exec_parse(req, &out->exec, err) < 0)
		return -1;
	out->cursor_pos = json_is_integer(cursor) && json_integer_value(cursor) >= 0
	                          ? (long long)json_integer_value(cursor)
	                          : -1;
	out->detail_level = json_is_integer(detail) ? (int)json_integer_value(detail) : 0;
	return 0;
}

void kr_ctl_introspect_clear(kr_ctl_introspect_t *q)
{
	if (q)
		kr_ctl_exec_clear(&q->exec);
}

/* ---- the reply of an execution ---- */

json_t *kr_ctl_reply_text(const char *notice, const char *earlier, const char *text)
{
	kx_buf_t b = KX_BUF_INIT;
	char *all, *ok;
	size_t len;
	json_t *t;

	/* (a notice may name what the kernel made: a line break in it starts
	 * no line of kbox's) */
	if (notice) {
		kx_buf_appends(&b, "[note: ");
		kx_buf_kernel(&b, notice, strlen(notice));
		kx_buf_appends(&b, "]\n");
	}
	if (earlier)
		kx_buf_appendf(&b, "[output printed between executions:]\n%s[end of that output]\n",
		               earlier);
	kx_buf_appends(&b, text ? text : "");
	if (!(all = kx_buf_take(&b, &len)))
		return NULL;
	ok = kx_utf8_repair(all, len, &len); /* U+FFFD, as everywhere else */
	free(all);
	t = ok ? json_stringn(ok, len) : NULL;
	free(ok);
	return t;
}
