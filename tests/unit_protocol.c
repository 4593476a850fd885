/* tests/unit_protocol.c — the session protocol in C (src/runtime/protocol.h)
 * against kbox-protocol(7): the names of ops, error kinds, statuses and
 * formats, both ways; what kind of line a supervisor's line is; the
 * execute and complete/inspect requests written and read back, every
 * refusal naming its member, each limit at and past its boundary; a
 * request's size against the line the supervisor takes; and the text of
 * an execution's reply, bytes that are not UTF-8 included. */
#include "runtime/protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static kbox_error_t err;

/* A member's name of 80 bytes, and its first 64. */
#define LONG_NAME_64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define LONG_NAME LONG_NAME_64 "0123456789abcdef"

/* REQ (JSON text) parsed as an execute request into *E; 0 or -1 with err. */
static int parse(const char *text, kr_ctl_exec_t *e)
{
	json_t *req = json_loads(text, 0, NULL);
	int rc;
	memset(&err, 0, sizeof err);
	if (!req) {
		printf("# bad test JSON: %s\n", text);
		return -2;
	}
	rc = kr_ctl_exec_parse(req, e, &err);
	kr_ctl_exec_clear(e); /* strings would dangle: only the result and ERR are checked */
	json_decref(req);
	return rc;
}

/* Whether TEXT, REFUSED or not, was refused with exactly WHY (in ERR),
 * saying what went otherwise. */
static int refusal_is(const char *text, bool refused, const char *why)
{
	if (!refused) {
		printf("# accepted: %s\n", text);
		return 0;
	}
	if (strcmp(err.msg, why) != 0 || err.code != KBOX_E_INVALID) {
		printf("# %s\n#   refused with \"%s\" (code %d), not \"%s\"\n", text, err.msg,
		       (int)err.code, why);
		return 0;
	}
	return 1;
}

/* Whether the execute request TEXT is refused with exactly WHY. */
static int refused_with(const char *text, const char *why)
{
	kr_ctl_exec_t e;
	return refusal_is(text, parse(text, &e) == -1, why);
}

static int accepted(const char *text)
{
	kr_ctl_exec_t e;
	int rc = parse(text, &e);
	if (rc != 0)
		printf("# refused: %s: %s\n", text, err.msg);
	return rc == 0;
}

/* The compact JSON of J (taken), NUL-terminated, malloc'd. */
static char *dump(json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
	json_decref(j);
	return s;
}

/* ---- names ---- */

TEST(every_op_has_one_name_both_ways)
{
	static const char *const names[] = {"status",    "execute", "complete", "inspect",
	                                    "interrupt", "restart", "stop",     "session"};
	CHECK_INT_EQ(KR_CTL_N_OPS, 8);
	for (int op = 0; op < KR_CTL_N_OPS; op++) {
		CHECK_STR_EQ(kr_ctl_op_name((kr_ctl_op_t)op), names[op]);
		CHECK_INT_EQ(kr_ctl_op_parse(names[op]), op);
	}
}

TEST(an_unknown_op_is_none)
{
	CHECK_INT_EQ(kr_ctl_op_parse("interupt"), KR_CTL_OP_NONE);
	CHECK_INT_EQ(kr_ctl_op_parse("Status"), KR_CTL_OP_NONE);
	CHECK_INT_EQ(kr_ctl_op_parse(""), KR_CTL_OP_NONE);
	CHECK_INT_EQ(kr_ctl_op_parse(NULL), KR_CTL_OP_NONE);
	CHECK(kr_ctl_op_name(KR_CTL_OP_NONE) == NULL);
	CHECK(kr_ctl_op_name(KR_CTL_N_OPS) == NULL);
}

TEST(a_request_without_members_is_its_op_alone)
{
	char *s = dump(kr_ctl_request_new(KR_CTL_OP_INTERRUPT));
	CHECK_STR_EQ(s, "{\"op\":\"interrupt\"}");
	free(s);
	CHECK(kr_ctl_request_new(KR_CTL_OP_NONE) == NULL);
}

TEST(status_words_map_to_exec_statuses_both_ways)
{
	static const struct {
		kbox_exec_status_t st;
		const char *word;
	} map[] = {{KBOX_EXEC_OK, "ok"},           {KBOX_EXEC_ERROR, "error"},
	           {KBOX_EXEC_ABORTED, "aborted"}, {KBOX_EXEC_TIMEOUT, "timeout"},
	           {KBOX_EXEC_DIED, "died"},       {KBOX_EXEC_INTERRUPTED, "interrupted"}};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
		kbox_exec_status_t st = (kbox_exec_status_t)-1;
		CHECK_STR_EQ(kr_ctl_status_name(map[i].st), map[i].word);
		CHECK_INT_EQ(kr_ctl_status_parse(map[i].word, &st), 0);
		CHECK_INT_EQ(st, map[i].st);
	}
}

TEST(an_unknown_status_word_is_refused)
{
	kbox_exec_status_t st = KBOX_EXEC_OK;
	CHECK_INT_EQ(kr_ctl_status_parse("dead", &st), -1);
	CHECK_INT_EQ(kr_ctl_status_parse(NULL, &st), -1);
	CHECK_INT_EQ(st, KBOX_EXEC_OK);
	CHECK_STR_EQ(kr_ctl_status_name((kbox_exec_status_t)99), "unknown");
}

TEST(error_kinds_have_their_names)
{
	static const char *const names[] = {"usage", "busy",    "kernel",
	                                    "state", "stopped", "internal"};
	for (int k = 0; k < 6; k++) {
		char line[96];
		json_t *m;
		CHECK_STR_EQ(kr_ctl_err_name((kr_ctl_err_t)k), names[k]);
		snprintf(line, sizeof line, "{\"ok\":false,\"kind\":\"%s\",\"error\":\"x\"}",
		         names[k]);
		m = json_loads(line, 0, NULL);
		CHECK_INT_EQ(kr_ctl_err_kind(m), k);
		json_decref(m);
	}
	CHECK(kr_ctl_err_name(KR_CTL_ERR_UNKNOWN) == NULL);
	CHECK_INT_EQ(kr_ctl_err_kind(NULL), KR_CTL_ERR_UNKNOWN);
}

TEST(formats_have_their_names)
{
	CHECK_STR_EQ(kr_ctl_format_name(KR_CTL_FMT_TEXT), "text");
	CHECK_STR_EQ(kr_ctl_format_name(KR_CTL_FMT_TEXT_LIVE), "text-live");
	CHECK_STR_EQ(kr_ctl_format_name(KR_CTL_FMT_JSON_LIVE), "json-live");
	CHECK_STR_EQ(kr_ctl_format_name(KR_CTL_FMT_JSON), "json");
	CHECK_STR_EQ(kr_ctl_format_name(KR_CTL_FMT_NDJSON), "ndjson");
	CHECK(kr_ctl_format_name((kr_ctl_format_t)5) == NULL);
}

/* ---- the kind of a line ---- */

/* The kind of the line TEXT, and its re in *RE. */
static kr_ctl_msg_kind_t kind_of(const char *text, kr_ctl_op_t *re)
{
	json_t *m = json_loads(text, 0, NULL);
	kr_ctl_msg_kind_t k = kr_ctl_msg_kind(m, re);
	json_decref(m);
	return k;
}

TEST(each_line_of_an_execution_has_its_kind)
{
	kr_ctl_op_t re = KR_CTL_OP_NONE;
	CHECK_INT_EQ(kind_of("{\"re\":\"execute\",\"started\":true,\"generation\":1}", &re),
	             KR_CTL_MSG_STARTED);
	CHECK_INT_EQ(re, KR_CTL_OP_EXECUTE);
	CHECK_INT_EQ(kind_of("{\"re\":\"execute\",\"event\":{\"event\":\"stream\"}}", &re),
	             KR_CTL_MSG_EVENT);
	CHECK_INT_EQ(kind_of("{\"ok\":true,\"re\":\"execute\",\"status\":\"ok\"}", &re),
	             KR_CTL_MSG_REPLY);
	CHECK_INT_EQ(re, KR_CTL_OP_EXECUTE);
	CHECK_INT_EQ(
	        kind_of("{\"ok\":false,\"re\":\"execute\",\"kind\":\"busy\",\"error\":\"x\"}", &re),
	        KR_CTL_MSG_ERROR);
}

TEST(a_reply_is_known_by_ok_whatever_else_it_has)
{
	kr_ctl_op_t re;
	/* an interrupt's reply on an execution's connection */
	CHECK_INT_EQ(kind_of("{\"ok\":true,\"re\":\"interrupt\",\"running\":true}", &re),
	             KR_CTL_MSG_REPLY);
	CHECK_INT_EQ(re, KR_CTL_OP_INTERRUPT);
	/* "started" and "event" do not make a reply something else */
	CHECK_INT_EQ(kind_of("{\"ok\":true,\"re\":\"execute\",\"started\":true}", NULL),
	             KR_CTL_MSG_REPLY);
	/* an error about a line that had no op; the ready line */
	CHECK_INT_EQ(
	        kind_of("{\"ok\":false,\"kind\":\"usage\",\"error\":\"not a JSON object\"}", &re),
	        KR_CTL_MSG_ERROR);
	CHECK_INT_EQ(re, KR_CTL_OP_NONE);
	CHECK_INT_EQ(kind_of("{\"ok\":true,\"pid\":1,\"kernel_pid\":2}", &re), KR_CTL_MSG_REPLY);
	CHECK_INT_EQ(re, KR_CTL_OP_NONE);
}

TEST(a_line_of_no_kind_is_invalid)
{
	kr_ctl_op_t re;
	CHECK_INT_EQ(kind_of("{\"ok\":1,\"re\":\"status\"}", NULL), KR_CTL_MSG_INVALID);
	CHECK_INT_EQ(kind_of("{\"re\":\"execute\",\"started\":false}", NULL), KR_CTL_MSG_INVALID);
	CHECK_INT_EQ(kind_of("{\"re\":\"execute\",\"event\":\"stream\"}", NULL),
	             KR_CTL_MSG_INVALID);
	CHECK_INT_EQ(kind_of("{\"re\":\"nope\"}", &re), KR_CTL_MSG_INVALID);
	CHECK_INT_EQ(re, KR_CTL_OP_NONE);
	CHECK_INT_EQ(kind_of("[1]", NULL), KR_CTL_MSG_INVALID);
	CHECK_INT_EQ(kr_ctl_msg_kind(NULL, &re), KR_CTL_MSG_INVALID);
}

/* ---- execute ---- */

TEST(an_execute_request_at_its_defaults_is_code_and_format)
{
	kr_ctl_exec_t e = KR_CTL_EXEC_INIT;
	char *s;
	e.code = "1+1";
	s = dump(kr_ctl_exec_to_json(&e));
	CHECK_STR_EQ(s, "{\"op\":\"execute\",\"code\":\"1+1\",\"format\":\"text\"}");
	free(s);
	e.code = NULL;
	CHECK(kr_ctl_exec_to_json(&e) == NULL);
}

TEST(an_execute_request_with_every_member_is_read_back_as_written)
{
	const char *lines[] = {"Ada", "", "x y"};
	const char *names[] = {"HOME", "_X9"}, *values[] = {"/x", "é\n\"q\""};
	kr_ctl_exec_t e = KR_CTL_EXEC_INIT, back;
	json_t *req;
	e.code = "n = input()\nprint(n)";
	e.format = KR_CTL_FMT_NDJSON;
	e.with_text = true;
	e.timeout_ms = 2500;
	e.grace_ms = 0;
	e.wait_ms = 750;
	e.inputs = lines;
	e.n_inputs = 3;
	e.has_inputs = true;
	e.max_output = 20000;
	e.max_lines = 40;
	e.outputs = "/tmp/out";
	e.prefix = "";
	e.env_names = names;
	e.env_values = values;
	e.n_env = 2;
	req = kr_ctl_exec_to_json(&e);
	REQUIRE(req);
	CHECK_INT_EQ(kr_ctl_exec_parse(req, &back, &err), 0);
	CHECK_STR_EQ(back.code, e.code);
	CHECK_INT_EQ(back.format, KR_CTL_FMT_NDJSON);
	CHECK(back.with_text);
	CHECK_INT_EQ(back.timeout_ms, 2500);
	CHECK_INT_EQ(back.grace_ms, 0);
	CHECK_INT_EQ(back.wait_ms, 750);
	CHECK(back.has_inputs);
	REQUIRE(back.n_inputs == 3);
	for (size_t i = 0; i < 3; i++)
		CHECK_STR_EQ(back.inputs[i], lines[i]);
	CHECK(back.inputs[3] == NULL);
	CHECK_INT_EQ(back.max_output, 20000);
	CHECK_INT_EQ(back.max_lines, 40);
	CHECK_STR_EQ(back.outputs, "/tmp/out");
	CHECK_STR_EQ(back.prefix, "");
	REQUIRE(back.n_env == 2);
	for (size_t i = 0; i < 2; i++) {
		size_t k = strcmp(back.env_names[i], "HOME") == 0 ? 0 : 1;
		CHECK_STR_EQ(back.env_names[i], names[k]);
		CHECK_STR_EQ(back.env_values[i], values[k]);
	}
	kr_ctl_exec_clear(&back);
	CHECK(back.inputs == NULL && back.code == NULL);
	json_decref(req);
}

TEST(each_format_is_read_back_as_written)
{
	for (int f = KR_CTL_FMT_TEXT; f <= KR_CTL_FMT_NDJSON; f++) {
		kr_ctl_exec_t e = KR_CTL_EXEC_INIT, back;
		json_t *req;
		e.code = "1";
		e.format = (kr_ctl_format_t)f;
		req = kr_ctl_exec_to_json(&e);
		CHECK_INT_EQ(kr_ctl_exec_parse(req, &back, &err), 0);
		CHECK_INT_EQ(back.format, f);
		json_decref(req);
	}
}

TEST(absent_members_get_their_defaults)
{
	json_t *req = json_loads("{\"op\":\"execute\",\"code\":\"1\"}", 0, NULL);
	kr_ctl_exec_t e;
	REQUIRE(kr_ctl_exec_parse(req, &e, &err) == 0);
	CHECK_INT_EQ(e.format, KR_CTL_FMT_TEXT);
	CHECK(!e.with_text);
	CHECK_INT_EQ(e.timeout_ms, 0);
	CHECK_INT_EQ(e.grace_ms, KR_CTL_GRACE_DEFAULT_MS);
	CHECK_INT_EQ(e.wait_ms, -1);
	CHECK(!e.has_inputs && e.inputs == NULL && e.n_inputs == 0);
	CHECK_INT_EQ(e.max_output, 0);
	CHECK_INT_EQ(e.max_lines, 0);
	CHECK(e.outputs == NULL && e.prefix == NULL);
	kr_ctl_exec_clear(&e);
	json_decref(req);
}

TEST(an_empty_input_array_is_given_and_empty)
{
	json_t *req = json_loads("{\"code\":\"input()\",\"input\":[]}", 0, NULL);
	kr_ctl_exec_t e;
	char *s;
	REQUIRE(kr_ctl_exec_parse(req, &e, &err) == 0);
	CHECK(e.has_inputs);
	CHECK_INT_EQ(e.n_inputs, 0);
	e.format = KR_CTL_FMT_JSON;
	s = dump(kr_ctl_exec_to_json(&e));
	CHECK_STR_EQ(s,
	             "{\"op\":\"execute\",\"code\":\"input()\",\"format\":\"json\",\"grace\":5.0,"
	             "\"input\":[]}");
	free(s);
	kr_ctl_exec_clear(&e);
	json_decref(req);
}

TEST(members_of_other_ops_are_ignored)
{
	CHECK(accepted("{\"op\":\"execute\",\"code\":\"1\",\"cause\":7,\"cursor_pos\":\"x\"}"));
}

TEST(each_refusal_names_its_member)
{
	CHECK(refused_with("{}", "\"code\" (a string) is required"));
	CHECK(refused_with("{\"code\":1}", "\"code\" (a string) is required"));
	CHECK(refused_with("{\"code\":null}", "\"code\" (a string) is required"));
	CHECK(refused_with("{\"code\":\"1\",\"input\":\"Ada\"}",
	                   "\"input\" must be an array of strings"));
	CHECK(refused_with("{\"code\":\"1\",\"input\":[\"Ada\",2]}",
	                   "\"input\" must be an array of strings"));
	CHECK(refused_with("{\"code\":\"1\",\"format\":\"html\"}",
	                   "\"format\" is one of text, text-live, json, ndjson, json-live"));
	CHECK(refused_with("{\"code\":\"1\",\"format\":null}",
	                   "\"format\" is one of text, text-live, json, ndjson, json-live"));
	CHECK(refused_with("{\"code\":\"1\",\"with_text\":1}", "\"with_text\" is true or false"));
	CHECK(refused_with("{\"code\":\"1\",\"timeout\":\"1\"}",
	                   "\"timeout\", \"grace\" and \"wait\" are seconds (a number >= 0)"));
	CHECK(refused_with("{\"code\":\"1\",\"grace\":-1}",
	                   "\"timeout\", \"grace\" and \"wait\" are seconds (a number >= 0)"));
	CHECK(refused_with("{\"code\":\"1\",\"wait\":true}",
	                   "\"timeout\", \"grace\" and \"wait\" are seconds (a number >= 0)"));
	CHECK(refused_with("{\"code\":\"1\",\"max_output\":2.5}",
	                   "\"max_output\" is a number of bytes from 64 to 16777216 (16 MiB)"));
	CHECK(refused_with("{\"code\":\"1\",\"max_lines\":\"9\"}",
	                   "\"max_lines\" is a number of lines, at least 2"));
	CHECK(refused_with("{\"code\":\"1\",\"outputs\":\"rel/dir\"}",
	                   "\"outputs\" is an absolute directory"));
	CHECK(refused_with("{\"code\":\"1\",\"outputs\":5}",
	                   "\"outputs\" is an absolute directory"));
	CHECK(refused_with("{\"code\":\"1\",\"prefix\":\"a/b\"}",
	                   "\"prefix\" is a string of at most 32 characters without '/'"));
	CHECK(refused_with("{\"code\":\"1\",\"prefix\":3}",
	                   "\"prefix\" is a string of at most 32 characters without '/'"));
	CHECK(refused_with("{\"code\":\"1\",\"env\":[]}",
	                   "\"env\" is an object of at most 256 strings"));
	CHECK(refused_with("{\"code\":\"1\",\"env\":{\"9A\":\"1\"}}",
	                   "\"env\": \"9A\": a NAME may not begin with a digit"));
	CHECK(refused_with("{\"code\":\"1\",\"env\":{\"A.B\":\"1\"}}",
	                   "\"env\": \"A.B\": a NAME is letters, digits and '_'"));
	CHECK(refused_with("{\"code\":\"1\",\"env\":{\"\":\"1\"}}",
	                   "\"env\": \"\": a NAME may not be empty"));
	CHECK(refused_with("{\"code\":\"1\",\"env\":{\"A\":null}}",
	                   "\"env\": \"A\" is a string without NUL"));
}

TEST(members_are_checked_in_the_order_of_the_man_page)
{
	/* code, input (an array), format, with_text, the durations,
	 * max_output, max_lines, outputs, prefix, the elements of input: a
	 * request with several wrong members is refused for the first */
	CHECK(refused_with("{\"input\":1,\"format\":\"x\"}", "\"code\" (a string) is required"));
	CHECK(refused_with("{\"code\":\"1\",\"input\":1,\"format\":\"x\"}",
	                   "\"input\" must be an array of strings"));
	CHECK(refused_with("{\"code\":\"1\",\"with_text\":0,\"format\":\"x\"}",
	                   "\"format\" is one of text, text-live, json, ndjson, json-live"));
	CHECK(refused_with("{\"code\":\"1\",\"timeout\":-1,\"with_text\":0}",
	                   "\"with_text\" is true or false"));
	CHECK(refused_with("{\"code\":\"1\",\"max_output\":1,\"wait\":-1}",
	                   "\"timeout\", \"grace\" and \"wait\" are seconds (a number >= 0)"));
	CHECK(refused_with("{\"code\":\"1\",\"max_lines\":1,\"max_output\":1}",
	                   "\"max_output\" is a number of bytes from 64 to 16777216 (16 MiB)"));
	CHECK(refused_with("{\"code\":\"1\",\"outputs\":\"x\",\"max_lines\":1}",
	                   "\"max_lines\" is a number of lines, at least 2"));
	CHECK(refused_with("{\"code\":\"1\",\"prefix\":\"/\",\"outputs\":\"x\"}",
	                   "\"outputs\" is an absolute directory"));
	CHECK(refused_with("{\"code\":\"1\",\"input\":[1],\"prefix\":\"/\"}",
	                   "\"prefix\" is a string of at most 32 characters without '/'"));
}

TEST(max_output_is_64_to_16_mib)
{
	char req[128];
	const char *why = "\"max_output\" is a number of bytes from 64 to 16777216 (16 MiB)";
	CHECK(accepted("{\"code\":\"1\",\"max_output\":64}"));
	CHECK(refused_with("{\"code\":\"1\",\"max_output\":63}", why));
	snprintf(req, sizeof req, "{\"code\":\"1\",\"max_output\":%d}", KR_CTL_MAX_OUTPUT_MAX);
	CHECK(accepted(req));
	snprintf(req, sizeof req, "{\"code\":\"1\",\"max_output\":%d}", KR_CTL_MAX_OUTPUT_MAX + 1);
	CHECK(refused_with(req, why));
	CHECK_INT_EQ(KR_CTL_MAX_OUTPUT_MAX, 16777216);
}

TEST(max_lines_is_at_least_2)
{
	CHECK(accepted("{\"code\":\"1\",\"max_lines\":2}"));
	CHECK(refused_with("{\"code\":\"1\",\"max_lines\":1}",
	                   "\"max_lines\" is a number of lines, at least 2"));
	CHECK(accepted("{\"code\":\"1\",\"max_lines\":9007199254740992}"));
}

TEST(prefix_is_at_most_32_bytes)
{
	CHECK(accepted("{\"code\":\"1\",\"prefix\":\"abcdefghijklmnopqrstuvwxyz012345\"}"));
	CHECK(refused_with("{\"code\":\"1\",\"prefix\":\"abcdefghijklmnopqrstuvwxyz0123456\"}",
	                   "\"prefix\" is a string of at most 32 characters without '/'"));
	CHECK(accepted("{\"code\":\"1\",\"prefix\":\"\"}"));
}

TEST(durations_are_0_to_366_days_to_the_nearest_millisecond)
{
	kr_ctl_exec_t e;
	json_t *req;
	const char *why = "\"timeout\", \"grace\" and \"wait\" are seconds (a number >= 0)";
	CHECK(accepted("{\"code\":\"1\",\"timeout\":0,\"grace\":0,\"wait\":0}"));
	CHECK(accepted("{\"code\":\"1\",\"timeout\":31622400}")); /* 366 days */
	CHECK(refused_with("{\"code\":\"1\",\"timeout\":31622400.001}", why));
	CHECK(accepted("{\"code\":\"1\",\"wait\":31622400}"));
	CHECK(refused_with("{\"code\":\"1\",\"wait\":31622401}", why));
	CHECK(refused_with("{\"code\":\"1\",\"grace\":-0.001}", why));
	req = json_loads("{\"code\":\"1\",\"timeout\":0.0004,\"grace\":0.0005,\"wait\":1.2345}", 0,
	                 NULL);
	REQUIRE(kr_ctl_exec_parse(req, &e, &err) == 0);
	CHECK_INT_EQ(e.timeout_ms, 0);
	CHECK_INT_EQ(e.grace_ms, 1);
	CHECK_INT_EQ(e.wait_ms, 1235);
	kr_ctl_exec_clear(&e);
	json_decref(req);
}

TEST(a_refused_request_leaves_nothing_behind)
{
	json_t *req = json_loads("{\"code\":\"1\",\"input\":[\"a\",null]}", 0, NULL);
	kr_ctl_exec_t e;
	CHECK_INT_EQ(kr_ctl_exec_parse(req, &e, &err), -1);
	CHECK(e.code == NULL && e.inputs == NULL && !e.has_inputs);
	json_decref(req);
}

/* ---- complete and inspect ---- */

TEST(a_completion_is_written_as_kbox_complete_sends_it)
{
	kr_ctl_introspect_t q = {.op = KR_CTL_OP_COMPLETE, .exec = KR_CTL_EXEC_INIT};
	char *s;
	q.exec.code = "pri";
	q.cursor_pos = -1;
	s = dump(kr_ctl_introspect_to_json(&q));
	CHECK_STR_EQ(s, "{\"op\":\"complete\",\"code\":\"pri\",\"cursor_pos\":-1}");
	free(s);
	q.op = KR_CTL_OP_INSPECT;
	q.cursor_pos = 2;
	q.detail_level = 1;
	s = dump(kr_ctl_introspect_to_json(&q));
	CHECK_STR_EQ(s,
	             "{\"op\":\"inspect\",\"code\":\"pri\",\"cursor_pos\":2,\"detail_level\":1}");
	free(s);
	q.op = KR_CTL_OP_EXECUTE;
	CHECK(kr_ctl_introspect_to_json(&q) == NULL);
}

TEST(an_inspection_is_read_back_as_written)
{
	kr_ctl_introspect_t q = {.op = KR_CTL_OP_INSPECT, .exec = KR_CTL_EXEC_INIT}, back;
	json_t *req;
	q.exec.code = "len";
	q.cursor_pos = 3;
	q.detail_level = 1;
	req = kr_ctl_introspect_to_json(&q);
	REQUIRE(kr_ctl_introspect_parse(req, KR_CTL_OP_INSPECT, &back, &err) == 0);
	CHECK_INT_EQ(back.op, KR_CTL_OP_INSPECT);
	CHECK_STR_EQ(back.exec.code, "len");
	CHECK_INT_EQ(back.cursor_pos, 3);
	CHECK_INT_EQ(back.detail_level, 1);
	kr_ctl_introspect_clear(&back);
	json_decref(req);
}

TEST(a_cursor_that_is_not_a_position_is_the_end)
{
	static const char *const reqs[] = {"{\"code\":\"x\"}", "{\"code\":\"x\",\"cursor_pos\":-5}",
	                                   "{\"code\":\"x\",\"cursor_pos\":1.5}",
	                                   "{\"code\":\"x\",\"cursor_pos\":\"1\"}"};
	for (size_t i = 0; i < 4; i++) {
		json_t *req = json_loads(reqs[i], 0, NULL);
		kr_ctl_introspect_t q;
		CHECK_INT_EQ(kr_ctl_introspect_parse(req, KR_CTL_OP_COMPLETE, &q, &err), 0);
		CHECK_INT_EQ(q.cursor_pos, -1);
		CHECK_INT_EQ(q.detail_level, 0);
		kr_ctl_introspect_clear(&q);
		json_decref(req);
	}
}

TEST(a_completion_checks_the_members_of_execute)
{
	json_t *req = json_loads("{\"code\":\"x\",\"max_lines\":1}", 0, NULL);
	kr_ctl_introspect_t q;
	CHECK_INT_EQ(kr_ctl_introspect_parse(req, KR_CTL_OP_COMPLETE, &q, &err), -1);
	CHECK_STR_EQ(err.msg, "\"max_lines\" is a number of lines, at least 2");
	json_decref(req);
	req = json_loads("{\"cursor_pos\":0}", 0, NULL);
	CHECK_INT_EQ(kr_ctl_introspect_parse(req, KR_CTL_OP_INSPECT, &q, &err), -1);
	CHECK_STR_EQ(err.msg, "\"code\" (a string) is required");
	json_decref(req);
}

/* ---- the size of a request ---- */

/* An execute request whose line, with its newline, is LEN bytes. */
static json_t *request_of_line(size_t len)
{
	static const char frame[] = "{\"op\":\"execute\",\"code\":\"\",\"format\":\"text\"}\n";
	size_t n = len - (sizeof frame - 1);
	char *code = malloc(n + 1);
	kr_ctl_exec_t e = KR_CTL_EXEC_INIT;
	json_t *req;
	memset(code, 'x', n);
	code[n] = '\0';
	e.code = code;
	req = kr_ctl_exec_to_json(&e);
	free(code);
	return req;
}

TEST(a_request_fits_in_16_mib_with_its_newline)
{
	json_t *at = request_of_line(KR_CTL_REQUEST_MAX),
	       *past = request_of_line(KR_CTL_REQUEST_MAX + 1);
	CHECK_INT_EQ(KR_CTL_REQUEST_MAX, 16777216);
	CHECK(kr_ctl_request_fits(at));
	CHECK(!kr_ctl_request_fits(past));
	CHECK(!kr_ctl_request_fits(NULL));
	json_decref(at);
	json_decref(past);
}

/* ---- a request line ---- */

/* The request line TEXT loaded: 1 when refused with exactly WHY. */
static int line_refused_with(const char *text, const char *why)
{
	json_t *req;
	memset(&err, 0, sizeof err);
	req = kr_ctl_request_load(text, strlen(text), &err);
	json_decref(req);
	return refusal_is(text, !req, why);
}

TEST(a_request_line_is_one_json_object)
{
	const char *line = "{\"op\":\"status\",\"x\":{\"a\":1,\"b\":[1,1]}}";
	json_t *req = kr_ctl_request_load(line, strlen(line), &err);
	REQUIRE(req);
	CHECK_STR_EQ(json_string_value(json_object_get(req, "op")), "status");
	json_decref(req);
	CHECK(line_refused_with("[1]", "not a JSON object"));
	CHECK(line_refused_with("", "not valid JSON: '[' or '{' expected near end of file"));
	CHECK(line_refused_with("{\"op\":", "not valid JSON: unexpected token near end of file"));
}

TEST(a_member_given_twice_is_refused_by_its_name)
{
	CHECK(line_refused_with("{\"op\":\"status\",\"op\":\"execute\",\"code\":\"print(1)\"}",
	                        "duplicate member \"op\": a member may be given once"));
	CHECK(line_refused_with(
	        "{\"op\":\"execute\",\"code\":\"print(1)\", \"code\" :\"print(2)\"}",
	        "duplicate member \"code\": a member may be given once"));
	/* at any depth, the name as the line spells it */
	CHECK(line_refused_with("{\"op\":\"execute\",\"x\":{\"k\\u0041\\\"\":1,\"kA\\\"\":2}}",
	                        "duplicate member \"kA\\\"\": a member may be given once"));
	/* a long name is cut */
	CHECK(line_refused_with("{\"op\":\"status\",\"" LONG_NAME "\":1,\"" LONG_NAME "\":2}",
	                        "duplicate member \"" LONG_NAME_64
	                        "...\": a member may be given once"));
	/* the same name in two objects is not a duplicate */
	const char *two = "{\"a\":{\"op\":1},\"op\":\"status\"}";
	json_t *req = kr_ctl_request_load(two, strlen(two), &err);
	CHECK(req != NULL);
	json_decref(req);
}

/* ---- the text of a reply ---- */

TEST(a_reply_text_has_the_notice_and_the_earlier_output_first)
{
	json_t *t = kr_ctl_reply_text("kernel restarted: x", "tick\n", "Out[1]: 2\n");
	CHECK_STR_EQ(json_string_value(t), "[note: kernel restarted: x]\n"
	                                   "[output printed between executions:]\ntick\n"
	                                   "[end of that output]\nOut[1]: 2\n");
	json_decref(t);
	t = kr_ctl_reply_text(NULL, NULL, NULL);
	CHECK_STR_EQ(json_string_value(t), "");
	json_decref(t);
}

/* a notice may name what the kernel made: a line break in it starts no
 * line of kbox's */
TEST(a_reply_texts_notice_starts_no_line_of_kboxs)
{
	json_t *t = kr_ctl_reply_text("a\n[note: forged]", NULL, "t\n");
	CHECK_STR_EQ(json_string_value(t), "[note: a\n\\[note: forged]]\nt\n");
	json_decref(t);
}

TEST(a_reply_text_with_bytes_not_utf8_carries_u_fffd)
{
	/* a byte that starts no character, a cut 3-byte sequence, an overlong "/" */
	json_t *t = kr_ctl_reply_text("n\xff", "e\xe2\x82", "ok \xc0\xaf é\n");
	REQUIRE(t);
	CHECK_STR_EQ(json_string_value(t), "[note: n\xef\xbf\xbd]\n"
	                                   "[output printed between executions:]\n"
	                                   "e\xef\xbf\xbd[end of that output]\n"
	                                   "ok \xef\xbf\xbd\xef\xbf\xbd é\n");
	CHECK(!strchr(json_string_value(t), '?'));
	json_decref(t);
}

int main(void)
{
	RUN(every_op_has_one_name_both_ways);
	RUN(an_unknown_op_is_none);
	RUN(a_request_without_members_is_its_op_alone);
	RUN(status_words_map_to_exec_statuses_both_ways);
	RUN(an_unknown_status_word_is_refused);
	RUN(error_kinds_have_their_names);
	RUN(formats_have_their_names);
	RUN(each_line_of_an_execution_has_its_kind);
	RUN(a_reply_is_known_by_ok_whatever_else_it_has);
	RUN(a_line_of_no_kind_is_invalid);
	RUN(an_execute_request_at_its_defaults_is_code_and_format);
	RUN(an_execute_request_with_every_member_is_read_back_as_written);
	RUN(each_format_is_read_back_as_written);
	RUN(absent_members_get_their_defaults);
	RUN(an_empty_input_array_is_given_and_empty);
	RUN(members_of_other_ops_are_ignored);
	RUN(each_refusal_names_its_member);
	RUN(members_are_checked_in_the_order_of_the_man_page);
	RUN(max_output_is_64_to_16_mib);
	RUN(max_lines_is_at_least_2);
	RUN(prefix_is_at_most_32_bytes);
	RUN(durations_are_0_to_366_days_to_the_nearest_millisecond);
	RUN(a_refused_request_leaves_nothing_behind);
	RUN(a_completion_is_written_as_kbox_complete_sends_it);
	RUN(an_inspection_is_read_back_as_written);
	RUN(a_cursor_that_is_not_a_position_is_the_end);
	RUN(a_completion_checks_the_members_of_execute);
	RUN(a_request_fits_in_16_mib_with_its_newline);
	RUN(a_request_line_is_one_json_object);
	RUN(a_member_given_twice_is_refused_by_its_name);
	RUN(a_reply_text_has_the_notice_and_the_earlier_output_first);
	RUN(a_reply_text_with_bytes_not_utf8_carries_u_fffd);
	RUN(a_reply_texts_notice_starts_no_line_of_kboxs);
	return tap_done();
}
