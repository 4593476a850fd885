/* tests/live_client.c — libkbox against a real Debian ipykernel, public API only.
 *
 * Most tests share one kernel to keep the run short; the tests that kill,
 * stop or misconfigure a kernel start their own, each in a fresh private
 * runtime directory. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <sodium.h>

#include "tap.h"
#include "live.h"

static kbox_kspec_t *g_spec;    /* the Debian python3 kernelspec */
static char *g_dir;             /* runtime dir of the shared kernel */
static kbox_kernel_t *g_kernel; /* the shared kernel */
static kbox_client_t *g_client; /* its client, with the kernel's hooks */

/* The killed kernel, shared by the tests about a dead kernel. */
static char *g_dead_dir;
static kbox_kernel_t *g_dead;
static kbox_client_t *g_dead_hooked; /* from kbox_kernel_start_ready: has the alive hook */
static kbox_client_t *g_dead_bare;   /* kbox_client_new on the same conn: no hooks */
static long long g_dead_kill_ms;     /* when the SIGKILL was sent */

/* Send an execute_request for CODE on shell without waiting; its msg_id is
 * copied to ID.  0 or -1. */
static int send_raw_execute(kbox_client_t *client, const char *code, char id[64])
{
	json_t *content = json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", code, "silent", 0,
	                            "store_history", 1, "user_expressions", "allow_stdin", 0,
	                            "stop_on_error", 1);
	kbox_msg_t *msg = kbox_client_msg(client, "execute_request", &content);
	kbox_error_t err = {0};
	int rc = -1;

	if (!msg)
		goto out;
	snprintf(id, 64, "%s", kbox_msg_id(msg));
	rc = kbox_client_send(client, KBOX_CH_SHELL, msg, &err);
	if (rc != 0)
		printf("# kbox_client_send: %s\n", err.msg);
out:
	kbox_msg_destroy(&msg);
	json_decref(content);
	return rc;
}

/* ipykernel 6.17 keeps aborting execute_requests for one event-loop turn
 * after it sent an error reply (stop_on_error; see ipykernel issue #609), so
 * an execute sent the instant the reply and idle arrive can come back
 * "aborted".  A shell round trip closes that window.  Tests whose subject is
 * something else call this after an error so that the next test is not hit;
 * execute_right_after_an_error_is_not_aborted tests the race itself. */
static void settle_after_error(kbox_client_t *client)
{
	kbox_msg_t *r = kbox_client_kernel_info_request(client, 10000, NULL);

	kbox_msg_destroy(&r);
}

/* The content.status of REPLY, or "". */
static const char *reply_status(const kbox_msg_t *reply)
{
	const char *s = json_string_value(json_object_get(kbox_msg_content(reply), "status"));

	return s ? s : "";
}

/* ---- execute: results, streams, display data ---- */

TEST(execute_1_plus_1_returns_2)
{
	kbox_exec_t *ex;

	REQUIRE(g_client);
	ex = live_run(g_client, "1+1", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	CHECK_STR_EQ(live_result(ex), "2");
	CHECK_STR_EQ(live_reply_str(ex, "status"), "ok");
	CHECK(!kbox_exec_interrupted(ex));
	CHECK_STR_EQ(kbox_exec_reason(ex), "");
	kbox_exec_destroy(&ex);
	CHECK(ex == NULL);
}

TEST(execution_count_increments_between_calls)
{
	kbox_exec_t *a, *b;
	const kbox_msg_t *res;

	REQUIRE(g_client);
	a = live_run(g_client, "1+1", LIVE_EXEC_MS);
	b = live_run(g_client, "2+2", LIVE_EXEC_MS);
	REQUIRE(a && b);
	CHECK(kbox_exec_count(a) >= 1);
	CHECK_INT_EQ(kbox_exec_count(b), kbox_exec_count(a) + 1);
	res = live_output(b, "execute_result");
	CHECK(res != NULL);
	if (res)
		CHECK_INT_EQ(json_integer_value(
		                     json_object_get(kbox_msg_content(res), "execution_count")),
		             kbox_exec_count(b));
	kbox_exec_destroy(&a);
	kbox_exec_destroy(&b);
}

TEST(print_goes_to_stdout_stream)
{
	kbox_exec_t *ex;
	char *out, *errs;

	REQUIRE(g_client);
	ex = live_run(g_client, "print(\"hello\")", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	out = live_stream(ex, "stdout");
	errs = live_stream(ex, "stderr");
	CHECK_STR_EQ(out, "hello\n");
	CHECK_STR_EQ(errs, "");
	CHECK(live_output(ex, "execute_result") == NULL);
	free(out);
	free(errs);
	kbox_exec_destroy(&ex);
}

TEST(stderr_write_goes_to_stderr_stream)
{
	kbox_exec_t *ex;
	char *out, *errs;

	REQUIRE(g_client);
	ex = live_run(g_client, "import sys\n_ = sys.stderr.write('oops\\n')", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	out = live_stream(ex, "stdout");
	errs = live_stream(ex, "stderr");
	CHECK_STR_EQ(errs, "oops\n");
	CHECK_STR_EQ(out, "");
	free(out);
	free(errs);
	kbox_exec_destroy(&ex);
}

/* The inline backend crops to a tight bounding box by default; switching
 * that off makes the PNG exactly figsize * dpi pixels. */
TEST(plot_shows_png_of_figsize_times_dpi)
{
	static const char code[] =
	        "import matplotlib\n"
	        "matplotlib.use('module://matplotlib_inline.backend_inline')\n"
	        "get_ipython().run_line_magic('config', "
	        "'InlineBackend.print_figure_kwargs = {\"bbox_inches\": None}')\n"
	        "import matplotlib.pyplot as plt\n"
	        "fig = plt.figure(figsize=(4, 3), dpi=50)\n"
	        "plt.plot([1, 2, 3], [1, 4, 9])\n"
	        "plt.show()\n";
	static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	kbox_exec_t *ex;
	const char *b64;
	unsigned char *png = NULL;
	size_t maxlen, len = 0;
	uint32_t width, height;

	REQUIRE(g_client);
	/* generous: the first matplotlib import may build the font cache */
	ex = live_run(g_client, code, 60000);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	CHECK_INT_EQ(live_output_count(ex, "display_data"), 1);
	b64 = live_data(ex, "display_data", "image/png");
	if (!b64)
		goto out;
	maxlen = strlen(b64) / 4 * 3 + 3;
	png = malloc(maxlen);
	if (!png)
		goto out;
	CHECK_INT_EQ(sodium_base642bin(png, maxlen, b64, strlen(b64), "\r\n ", &len, NULL,
	                               sodium_base64_VARIANT_ORIGINAL),
	             0);
	if (len < 24) {
		CHECK(len >= 24);
		goto out;
	}
	CHECK(memcmp(png, png_sig, sizeof png_sig) == 0);
	CHECK(memcmp(png + 12, "IHDR", 4) == 0);
	width = (uint32_t)png[16] << 24 | (uint32_t)png[17] << 16 | (uint32_t)png[18] << 8 |
	        png[19];
	height = (uint32_t)png[20] << 24 | (uint32_t)png[21] << 16 | (uint32_t)png[22] << 8 |
	         png[23];
	CHECK_INT_EQ(width, 200);
	CHECK_INT_EQ(height, 150);
out:
	CHECK(b64 != NULL);
	free(png);
	kbox_exec_destroy(&ex);
}

/* ---- errors ---- */

TEST(zero_division_is_error_with_iopub_error_message)
{
	kbox_exec_t *ex;
	const kbox_msg_t *e;
	json_t *c;

	REQUIRE(g_client);
	ex = live_run(g_client, "1/0", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_ERROR);
	CHECK_STR_EQ(live_reply_str(ex, "status"), "error");
	CHECK_STR_EQ(live_reply_str(ex, "ename"), "ZeroDivisionError");
	e = live_output(ex, "error");
	REQUIRE(e);
	c = kbox_msg_content(e);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "ename")), "ZeroDivisionError");
	CHECK_STR_EQ(json_string_value(json_object_get(c, "evalue")), "division by zero");
	CHECK(json_is_array(json_object_get(c, "traceback")));
	CHECK(json_array_size(json_object_get(c, "traceback")) > 0);
	kbox_exec_destroy(&ex);
	settle_after_error(g_client);
}

/* An execute sent as soon as the previous one failed runs normally: the
 * synchronous API never queues behind an error, so nothing may be aborted. */
#define AFTER_ERROR_ROUNDS 50

TEST(execute_right_after_an_error_is_not_aborted)
{
	int i, aborted = 0, ok = 0;

	REQUIRE(g_client);
	for (i = 0; i < AFTER_ERROR_ROUNDS; i++) {
		kbox_exec_t *bad = live_run(g_client, "1/0", LIVE_EXEC_MS);
		kbox_exec_t *good = live_run(g_client, "1+1", LIVE_EXEC_MS);

		if (bad && kbox_exec_status(bad) == KBOX_EXEC_ERROR && good) {
			aborted += kbox_exec_status(good) == KBOX_EXEC_ABORTED;
			ok += kbox_exec_status(good) == KBOX_EXEC_OK;
		}
		kbox_exec_destroy(&bad);
		kbox_exec_destroy(&good);
	}
	printf("# %d of %d executions right after an error were aborted\n", aborted,
	       AFTER_ERROR_ROUNDS);
	CHECK_INT_EQ(aborted, 0);
	CHECK_INT_EQ(ok, AFTER_ERROR_ROUNDS);
}

TEST(error_in_function_names_it_in_traceback)
{
	kbox_exec_t *ex;
	const kbox_msg_t *e;
	char *tb;

	REQUIRE(g_client);
	ex = live_run(g_client, "def boom():\n    return 1/0\nboom()", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_ERROR);
	e = live_output(ex, "error");
	REQUIRE(e);
	tb = live_traceback(kbox_msg_content(e));
	/* the frame line reads "Cell In [N], line 2, in boom()" */
	CHECK_CONTAINS(tb, ", in boom()");
	CHECK_CONTAINS(tb, "ZeroDivisionError: division by zero");
	free(tb);
	kbox_exec_destroy(&ex);
	settle_after_error(g_client);
}

TEST(state_persists_between_executions)
{
	kbox_exec_t *a, *b;

	REQUIRE(g_client);
	a = live_run(g_client, "x = 41", LIVE_EXEC_MS);
	b = live_run(g_client, "x+1", LIVE_EXEC_MS);
	REQUIRE(a && b);
	CHECK_INT_EQ(kbox_exec_status(a), KBOX_EXEC_OK);
	CHECK(live_output(a, "execute_result") == NULL);
	CHECK_STR_EQ(live_result(b), "42");
	kbox_exec_destroy(&a);
	kbox_exec_destroy(&b);
}

/* ---- interrupt ---- */

/* Run a 60 s sleep with a 1 s deadline and interrupt_on_timeout on CLIENT;
 * check it is interrupted quickly and that the kernel (and the variable
 * kept = 7 set before) survives. */
static void check_timeout_interrupt(kbox_client_t *client)
{
	kbox_exec_opts_t opts = {0};
	kbox_error_t err = {0};
	kbox_exec_t *ex, *after;
	long long t0, ms;

	after = live_run(client, "kept = 7", LIVE_EXEC_MS);
	REQUIRE(after);
	CHECK_INT_EQ(kbox_exec_status(after), KBOX_EXEC_OK);
	kbox_exec_destroy(&after);

	opts.code = "import time; time.sleep(60)";
	opts.timeout_ms = 1000;
	opts.interrupt_on_timeout = true;
	opts.collect = true;
	t0 = live_ms();
	ex = kbox_client_execute(client, &opts, &err);
	ms = live_ms() - t0;
	REQUIRE(ex);
	printf("# interrupted after %lld ms (%.3f s by the library)\n", ms, kbox_exec_seconds(ex));
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_TIMEOUT);
	CHECK(kbox_exec_interrupted(ex));
	CHECK(ms >= 1000);
	CHECK(ms < 10000);
	CHECK(kbox_exec_seconds(ex) < 10.0);
	CHECK(strcmp(kbox_exec_reason(ex), "") != 0);
	kbox_exec_destroy(&ex);

	after = live_run(client, "1+1", LIVE_EXEC_MS);
	REQUIRE(after);
	CHECK_INT_EQ(kbox_exec_status(after), KBOX_EXEC_OK);
	CHECK_STR_EQ(live_result(after), "2");
	kbox_exec_destroy(&after);

	after = live_run(client, "kept + 1", LIVE_EXEC_MS);
	REQUIRE(after);
	CHECK_STR_EQ(live_result(after), "8");
	kbox_exec_destroy(&after);
}

TEST(timeout_interrupts_and_kernel_keeps_state)
{
	REQUIRE(g_client);
	check_timeout_interrupt(g_client);
}

/* ---- stdin ---- */

TEST(input_without_stdin_fails_at_once)
{
	kbox_exec_t *ex;
	const char *ename, *evalue;
	long long t0 = live_ms(), ms;

	REQUIRE(g_client);
	ex = live_run(g_client, "input('name? ')", LIVE_EXEC_MS);
	ms = live_ms() - t0;
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_ERROR);
	ename = live_reply_str(ex, "ename");
	evalue = live_reply_str(ex, "evalue");
	CHECK(live_icontains(ename, "StdinNotImplementedError") ||
	      live_icontains(evalue, "raw_input was called, but this frontend does not "
	                             "support input requests"));
	CHECK_INT_EQ(kbox_exec_inputs_answered(ex), 0);
	CHECK(ms < 5000);
	kbox_exec_destroy(&ex);
	settle_after_error(g_client);
}

TEST(scripted_input_lines_are_answered_in_order)
{
	static const char *const lines[] = {"alice", "bob"};
	kbox_exec_opts_t opts = {0};
	kbox_error_t err = {0};
	kbox_exec_t *ex;
	char *out;

	REQUIRE(g_client);
	opts.code = "a=input(); b=input(); print(a+b)";
	opts.input_lines = lines;
	opts.n_input = 2;
	opts.collect = true;
	opts.timeout_ms = LIVE_EXEC_MS;
	ex = kbox_client_execute(g_client, &opts, &err);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	out = live_stream(ex, "stdout");
	CHECK_STR_EQ(out, "alicebob\n");
	CHECK_INT_EQ(kbox_exec_inputs_answered(ex), 2);
	free(out);
	kbox_exec_destroy(&ex);
}

TEST(input_after_lines_run_out_gets_eof)
{
	static const char *const lines[] = {"alice", "bob"};
	kbox_exec_opts_t opts = {0};
	kbox_error_t err = {0};
	kbox_exec_t *ex;
	long long t0 = live_ms();

	REQUIRE(g_client);
	opts.code = "a=input(); b=input(); c=input()";
	opts.input_lines = lines;
	opts.n_input = 2;
	opts.collect = true;
	opts.timeout_ms = LIVE_EXEC_MS;
	ex = kbox_client_execute(g_client, &opts, &err);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_ERROR);
	CHECK_STR_EQ(live_reply_str(ex, "ename"), "EOFError");
	/* two lines and one EOF: every input_request was answered */
	CHECK_INT_EQ(kbox_exec_inputs_answered(ex), 3);
	CHECK(live_ms() - t0 < 5000);
	kbox_exec_destroy(&ex);
	settle_after_error(g_client);

	/* the first two lines were consumed in order */
	ex = live_run(g_client, "a + b", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_STR_EQ(live_result(ex), "'alicebob'");
	kbox_exec_destroy(&ex);
}

/* ---- aborted requests ---- */

/* Two raw execute_requests back to back: ipykernel answers the one that
 * raised with status error and aborts the one queued behind it. */
TEST(request_queued_behind_error_is_aborted)
{
	char id1[64], id2[64];
	const char *st1 = NULL, *st2 = NULL;
	char s1[16] = "", s2[16] = "";
	long long t0;

	REQUIRE(g_client);
	REQUIRE(send_raw_execute(g_client, "import time; time.sleep(0.3); 1/0", id1) == 0);
	REQUIRE(send_raw_execute(g_client, "aborted_ran = True", id2) == 0);
	t0 = live_ms();
	while ((!st1 || !st2) && live_ms() - t0 < 10000) {
		kbox_error_t err = {0};
		kbox_msg_t *m = kbox_client_recv(g_client, KBOX_CH_SHELL, 1000, &err);
		const char *parent;

		if (!m)
			continue;
		parent = kbox_msg_parent_id(m);
		if (!parent || strcmp(kbox_msg_type(m), "execute_reply") != 0) {
			kbox_msg_destroy(&m);
			continue;
		}
		if (!strcmp(parent, id1)) {
			snprintf(s1, sizeof s1, "%s", reply_status(m));
			st1 = s1;
		} else if (!strcmp(parent, id2)) {
			snprintf(s2, sizeof s2, "%s", reply_status(m));
			st2 = s2;
		}
		kbox_msg_destroy(&m);
	}
	CHECK_STR_EQ(st1, "error");
	CHECK_STR_EQ(st2, "aborted");
	settle_after_error(g_client);
}

/* The synchronous API sees the same abort as KBOX_EXEC_ABORTED, with no
 * execution count, and the kernel then works normally. */
TEST(execute_queued_behind_error_reports_aborted)
{
	char id[64];
	kbox_exec_t *ex;

	REQUIRE(g_client);
	REQUIRE(send_raw_execute(g_client, "import time; time.sleep(0.3); 1/0", id) == 0);
	ex = live_run(g_client, "aborted_ran = True", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_ABORTED);
	CHECK_INT_EQ(kbox_exec_count(ex), -1);
	CHECK_STR_EQ(live_reply_str(ex, "status"), "aborted");
	kbox_exec_destroy(&ex);
	settle_after_error(g_client);

	ex = live_run(g_client, "'aborted_ran' in dir()", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	CHECK_STR_EQ(live_result(ex), "False");
	kbox_exec_destroy(&ex);
}

/* ---- completion, inspection, is_complete ---- */

TEST(complete_import_o_offers_os)
{
	kbox_error_t err = {0};
	kbox_msg_t *r;
	json_t *c, *matches, *m;
	size_t i;
	int found = 0;

	REQUIRE(g_client);
	r = kbox_client_complete(g_client, "import o", -1, 10000, &err);
	if (!r)
		printf("# %s\n", err.msg);
	REQUIRE(r);
	CHECK_STR_EQ(kbox_msg_type(r), "complete_reply");
	c = kbox_msg_content(r);
	CHECK_STR_EQ(reply_status(r), "ok");
	matches = json_object_get(c, "matches");
	json_array_foreach(matches, i, m)
	{
		if (json_string_value(m) && !strcmp(json_string_value(m), "os"))
			found = 1;
	}
	CHECK(found);
	CHECK_INT_EQ(json_integer_value(json_object_get(c, "cursor_start")), 7);
	CHECK_INT_EQ(json_integer_value(json_object_get(c, "cursor_end")), 8);
	kbox_msg_destroy(&r);
}

TEST(inspect_len_is_found)
{
	kbox_error_t err = {0};
	kbox_msg_t *r;
	json_t *c;

	REQUIRE(g_client);
	r = kbox_client_inspect(g_client, "len", 3, 0, 10000, &err);
	if (!r)
		printf("# %s\n", err.msg);
	REQUIRE(r);
	CHECK_STR_EQ(kbox_msg_type(r), "inspect_reply");
	c = kbox_msg_content(r);
	CHECK_STR_EQ(reply_status(r), "ok");
	CHECK(json_is_true(json_object_get(c, "found")));
	CHECK_CONTAINS(json_string_value(json_object_get(json_object_get(c, "data"), "text/plain")),
	               "len");
	kbox_msg_destroy(&r);
}

/* is_complete CODE: check status and, when EXPECT_INDENT is not NULL, indent. */
static void check_is_complete(const char *code, const char *expect_status,
                              const char *expect_indent)
{
	kbox_error_t err = {0};
	kbox_msg_t *r;
	json_t *c;

	REQUIRE(g_client);
	r = kbox_client_is_complete(g_client, code, 10000, &err);
	if (!r)
		printf("# %s\n", err.msg);
	REQUIRE(r);
	CHECK_STR_EQ(kbox_msg_type(r), "is_complete_reply");
	c = kbox_msg_content(r);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "status")), expect_status);
	if (expect_indent)
		CHECK_STR_EQ(json_string_value(json_object_get(c, "indent")), expect_indent);
	else
		CHECK(json_object_get(c, "indent") == NULL);
	kbox_msg_destroy(&r);
}

TEST(is_complete_open_for_loop_is_incomplete_with_indent)
{
	check_is_complete("for i in range(3):", "incomplete", "    ");
}

TEST(is_complete_expression_is_complete)
{
	check_is_complete("1+1", "complete", NULL);
}

TEST(is_complete_dangling_operator_is_invalid)
{
	check_is_complete("1+", "invalid", NULL);
}

/* ---- kernel_info, history, comm_info ---- */

TEST(kernel_info_reports_protocol_5_and_python)
{
	kbox_error_t err = {0};
	json_t *info;
	kbox_msg_t *r;
	const char *pv;

	REQUIRE(g_client);
	info = kbox_client_kernel_info(g_client);
	REQUIRE(info);
	pv = json_string_value(json_object_get(info, "protocol_version"));
	CHECK(pv && !strncmp(pv, "5.", 2));
	CHECK_STR_EQ(
	        json_string_value(json_object_get(json_object_get(info, "language_info"), "name")),
	        "python");

	r = kbox_client_kernel_info_request(g_client, 10000, &err);
	REQUIRE(r);
	CHECK_STR_EQ(kbox_msg_type(r), "kernel_info_reply");
	CHECK_STR_EQ(reply_status(r), "ok");
	CHECK_STR_EQ(json_string_value(json_object_get(kbox_msg_content(r), "implementation")),
	             "ipython");
	kbox_msg_destroy(&r);
}

TEST(history_tail_returns_latest_entry)
{
	kbox_error_t err = {0};
	kbox_exec_t *ex;
	json_t *args, *hist, *last;
	kbox_msg_t *r;

	REQUIRE(g_client);
	ex = live_run(g_client, "hist_marker = 12345", LIVE_EXEC_MS);
	REQUIRE(ex);
	kbox_exec_destroy(&ex);
	args = json_pack("{s:s, s:i, s:b, s:b}", "hist_access_type", "tail", "n", 5, "output", 0,
	                 "raw", 1);
	r = kbox_client_history(g_client, args, 10000, &err);
	json_decref(args);
	if (!r)
		printf("# %s\n", err.msg);
	REQUIRE(r);
	CHECK_STR_EQ(kbox_msg_type(r), "history_reply");
	CHECK_STR_EQ(reply_status(r), "ok");
	hist = json_object_get(kbox_msg_content(r), "history");
	CHECK(json_array_size(hist) > 0);
	/* entries are [session, line_number, input] */
	last = json_array_get(hist, json_array_size(hist) - 1);
	CHECK_INT_EQ(json_array_size(last), 3);
	CHECK_STR_EQ(json_string_value(json_array_get(last, 2)), "hist_marker = 12345");
	kbox_msg_destroy(&r);
}

TEST(comm_info_is_ok)
{
	kbox_error_t err = {0};
	kbox_msg_t *r;

	REQUIRE(g_client);
	r = kbox_client_comm_info(g_client, NULL, 10000, &err);
	if (!r)
		printf("# %s\n", err.msg);
	REQUIRE(r);
	CHECK_STR_EQ(kbox_msg_type(r), "comm_info_reply");
	CHECK_STR_EQ(reply_status(r), "ok");
	CHECK(json_is_object(json_object_get(kbox_msg_content(r), "comms")));
	kbox_msg_destroy(&r);
}

/* ---- two clients on one kernel ---- */

struct job {
	kbox_client_t *client;
	const char *code;
	kbox_exec_t *ex;
};

static void *job_run(void *arg)
{
	struct job *j = arg;

	j->ex = live_run(j->client, j->code, LIVE_EXEC_MS);
	return NULL;
}

TEST(two_clients_each_get_only_their_own_output)
{
	kbox_error_t err = {0};
	kbox_client_t *other;
	struct job a = {0}, b = {0};
	pthread_t ta, tb;
	char *out_a = NULL, *out_b = NULL;

	REQUIRE(g_client);
	other = kbox_client_new(kbox_kernel_conn(g_kernel), &err);
	REQUIRE(other);
	if (kbox_client_wait_ready(other, 10000, &err) != 0) {
		printf("# second client: %s\n", err.msg);
		CHECK(0);
		goto out;
	}
	CHECK(strcmp(kbox_client_session(other), kbox_client_session(g_client)) != 0);
	a.client = g_client;
	a.code = "import time\nfor i in range(3):\n    print('A%d' % i, flush=True)\n"
	         "    time.sleep(0.1)\n'resA'";
	b.client = other;
	b.code = "import time\nfor i in range(3):\n    print('B%d' % i, flush=True)\n"
	         "    time.sleep(0.1)\n'resB'";
	REQUIRE(pthread_create(&ta, NULL, job_run, &a) == 0);
	if (pthread_create(&tb, NULL, job_run, &b) != 0) {
		pthread_join(ta, NULL);
		CHECK(0);
		goto out;
	}
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	if (!a.ex || !b.ex) {
		CHECK(a.ex && b.ex);
		goto out;
	}
	CHECK_INT_EQ(kbox_exec_status(a.ex), KBOX_EXEC_OK);
	CHECK_INT_EQ(kbox_exec_status(b.ex), KBOX_EXEC_OK);
	out_a = live_stream(a.ex, "stdout");
	out_b = live_stream(b.ex, "stdout");
	CHECK_STR_EQ(out_a, "A0\nA1\nA2\n");
	CHECK_STR_EQ(out_b, "B0\nB1\nB2\n");
	CHECK_STR_EQ(live_result(a.ex), "'resA'");
	CHECK_STR_EQ(live_result(b.ex), "'resB'");
	CHECK_INT_EQ(live_output_count(a.ex, "execute_result"), 1);
	CHECK_INT_EQ(live_output_count(b.ex, "execute_result"), 1);
	CHECK(kbox_exec_count(a.ex) != kbox_exec_count(b.ex));
out:
	free(out_a);
	free(out_b);
	kbox_exec_destroy(&a.ex);
	kbox_exec_destroy(&b.ex);
	kbox_client_destroy(&other);
}

/* ---- heartbeat and a killed kernel ---- */

TEST(heartbeat_answers_on_live_kernel)
{
	kbox_error_t err = {0};
	kbox_client_t *bare;

	REQUIRE(g_client);
	CHECK_INT_EQ(kbox_client_heartbeat(g_client, 2000), 0);
	bare = kbox_client_new(kbox_kernel_conn(g_kernel), &err);
	REQUIRE(bare);
	CHECK_INT_EQ(kbox_client_heartbeat(bare, 2000), 0);
	kbox_client_destroy(&bare);
	CHECK(bare == NULL);
}

/* A client without hooks notices a SIGKILLed kernel through the heartbeat
 * alone, within 2 s of the kill. */
TEST(heartbeat_detects_killed_kernel_within_2s)
{
	kbox_error_t err = {0};
	pid_t pid;
	long long detected;
	int rc;

	REQUIRE(g_spec);
	g_dead_dir = live_mkdtemp("live-dead");
	REQUIRE(g_dead_dir);
	g_dead = live_start(g_spec, g_dead_dir, &g_dead_hooked, &err);
	if (!g_dead)
		printf("# start: %s\n", err.msg);
	REQUIRE(g_dead);
	g_dead_bare = kbox_client_new(kbox_kernel_conn(g_dead), &err);
	REQUIRE(g_dead_bare);
	REQUIRE(kbox_client_heartbeat(g_dead_bare, 2000) == 0);
	pid = kbox_kernel_pid(g_dead);
	REQUIRE(pid > 0);
	REQUIRE(kill(pid, SIGKILL) == 0);
	g_dead_kill_ms = live_ms();
	do
		rc = kbox_client_heartbeat(g_dead_bare, 250);
	while (rc == 0 && live_ms() - g_dead_kill_ms < 5000);
	detected = live_ms() - g_dead_kill_ms;
	printf("# heartbeat failed %lld ms after SIGKILL\n", detected);
	CHECK_INT_EQ(rc, -1);
	CHECK(detected < 2000);
}

TEST(execute_on_killed_kernel_without_hooks_returns_died)
{
	kbox_exec_t *ex;
	long long t0, ms;

	REQUIRE(g_dead_bare);
	t0 = live_ms();
	ex = live_run(g_dead_bare, "1+1", LIVE_EXEC_MS);
	ms = live_ms() - t0;
	REQUIRE(ex);
	printf("# DIED after %lld ms: %s\n", ms, kbox_exec_reason(ex));
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_DIED);
	CHECK(kbox_exec_reply(ex) == NULL);
	CHECK(strcmp(kbox_exec_reason(ex), "") != 0);
	CHECK(ms < 3500);
	kbox_exec_destroy(&ex);
}

TEST(execute_on_killed_kernel_with_alive_hook_returns_died_sooner)
{
	kbox_exec_t *ex;
	long long t0, ms;

	REQUIRE(g_dead_hooked);
	t0 = live_ms();
	ex = live_run(g_dead_hooked, "1+1", LIVE_EXEC_MS);
	ms = live_ms() - t0;
	REQUIRE(ex);
	printf("# DIED after %lld ms: %s\n", ms, kbox_exec_reason(ex));
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_DIED);
	CHECK(ms < 1500);
	CHECK(!kbox_kernel_is_alive(g_dead));
	CHECK(WIFSIGNALED(kbox_kernel_exit_status(g_dead)) &&
	      WTERMSIG(kbox_kernel_exit_status(g_dead)) == SIGKILL);
	kbox_exec_destroy(&ex);
}

static void dead_cleanup(void)
{
	kbox_client_destroy(&g_dead_bare);
	kbox_client_destroy(&g_dead_hooked);
	kbox_kernel_destroy(&g_dead);
	live_rm_rf(g_dead_dir);
	free(g_dead_dir);
	g_dead_dir = NULL;
}

/* ---- kernels that never come up ---- */

TEST(kernel_that_exits_at_once_is_dead_not_timed_out)
{
	kbox_error_t err = {0};
	kbox_kspec_t *spec = NULL;
	kbox_kernel_t *k = NULL;
	kbox_client_t *c = NULL;
	kbox_kernel_opts_t opts = {0};
	char *dir = live_mkdtemp("live-exit");
	char *run = live_mkdtemp("live-exit-run");
	long long t0, ms;
	int rc, st;

	if (!dir || !run) {
		CHECK(dir && run);
		goto out;
	}
	spec = live_make_kspec(dir, "exit3",
	                       "{\"argv\": [\"/bin/sh\", \"-c\", \"exit 3\"],"
	                       " \"display_name\": \"exits at once\", \"language\": \"sh\"}\n",
	                       &err);
	if (!spec) {
		printf("# kspec: %s\n", err.msg);
		CHECK(spec);
		goto out;
	}
	opts.runtime_dir = run;
	k = kbox_kernel_start(spec, &opts, &err);
	if (!k) {
		printf("# start: %s\n", err.msg);
		CHECK(k);
		goto out;
	}
	c = kbox_kernel_connect(k, &err);
	if (!c) {
		CHECK(c);
		goto out;
	}
	t0 = live_ms();
	rc = kbox_client_wait_ready(c, 20000, &err);
	ms = live_ms() - t0;
	printf("# wait_ready gave up after %lld ms: %s\n", ms, err.msg);
	CHECK_INT_EQ(rc, -1);
	CHECK_INT_EQ(err.code, KBOX_E_DEAD);
	CHECK(live_icontains(err.msg, "exit"));
	CHECK(ms < 3000);
	st = kbox_kernel_exit_status(k);
	CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 3);
out:
	kbox_client_destroy(&c);
	kbox_kernel_destroy(&k);
	kbox_kspec_destroy(&spec);
	live_rm_rf(dir);
	live_rm_rf(run);
	free(dir);
	free(run);
}

TEST(missing_kernelspec_is_notfound)
{
	kbox_error_t err = {0};
	kbox_kspec_t *spec = kbox_kspec_find("kbox-no-such-kernel", &err);

	CHECK(spec == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_NOTFOUND);
	CHECK_CONTAINS(err.msg, "kbox-no-such-kernel");
	kbox_kspec_destroy(&spec);
}

/* ---- shutdown ---- */

/* A kernel of the test's own, in a new directory named after NAME (*DIR,
 * the caller's to remove and free), connected (*C): NULL, said, when it
 * did not start. */
static kbox_kernel_t *own_kernel(const char *name, char **dir, kbox_client_t **c)
{
	kbox_error_t err = {0};
	kbox_kernel_t *k;
	*dir = live_mkdtemp(name);
	CHECK(*dir);
	if (!*dir)
		return NULL;
	if (!(k = live_start(g_spec, *dir, c, &err))) {
		printf("# start: %s\n", err.msg);
		CHECK(k);
	}
	return k;
}

TEST(stop_leaves_no_process_and_no_files)
{
	kbox_error_t err = {0};
	kbox_kernel_t *k;
	kbox_client_t *c = NULL;
	char *dir = NULL;
	pid_t pid;
	long long t0, ms;
	int rc;

	REQUIRE(g_spec);
	if (!(k = own_kernel("live-stop", &dir, &c)))
		goto out;
	pid = kbox_kernel_pid(k);
	CHECK(live_dir_entries(dir, false) > 0); /* the connection file and sockets */
	t0 = live_ms();
	rc = kbox_kernel_stop(k, c, &err);
	ms = live_ms() - t0;
	printf("# stopped in %lld ms\n", ms);
	if (rc != 0)
		printf("# stop: %s\n", err.msg);
	CHECK_INT_EQ(rc, 0);
	errno = 0;
	CHECK(kill(pid, 0) == -1 && errno == ESRCH);
	CHECK_INT_EQ(live_dir_entries(dir, true), 0);
	CHECK(!kbox_kernel_is_alive(k));
	/* it answered the shutdown_request: no need for SIGTERM's 2.5 s */
	CHECK(ms < 2500);
out:
	kbox_client_destroy(&c);
	kbox_kernel_destroy(&k);
	live_rm_rf(dir);
	free(dir);
}

/* exit() asks the front end to end the kernel (IPython's ask_exit
 * payload); exit(keep_kernel=True) does not; a kernel of its own, as it
 * exits. */
TEST(exit_asks_the_front_end_to_end_the_kernel)
{
	kbox_kernel_t *k;
	kbox_client_t *c = NULL;
	kbox_exec_t *ex;
	char *dir = NULL;
	static const struct {
		const char *code;
		bool asked;
	} cases[] = {{"1", false}, {"exit(keep_kernel=True)", false}, {"quit()", true}};

	REQUIRE(g_spec);
	if (!(k = own_kernel("live-exit-asked", &dir, &c)))
		goto out;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ex = live_run(c, cases[i].code, LIVE_EXEC_MS);
		CHECK(ex);
		if (!ex)
			break;
		printf("# %s\n", cases[i].code);
		CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
		CHECK_INT_EQ(kbox_exec_asked_exit(ex), cases[i].asked);
		kbox_exec_destroy(&ex);
	}
	kbox_kernel_stop(k, c, NULL);
out:
	kbox_client_destroy(&c);
	kbox_kernel_destroy(&k);
	live_rm_rf(dir);
	free(dir);
}

/* ---- interrupt_mode "message" ---- */

TEST(message_mode_interrupt_interrupts_on_timeout)
{
	kbox_error_t err = {0};
	json_error_t jerr;
	json_t *kj = NULL;
	char *text = NULL, *specdir = NULL, *run = NULL;
	kbox_kspec_t *spec = NULL;
	kbox_kernel_t *k = NULL;
	kbox_client_t *c = NULL;
	char path[4096];

	REQUIRE(g_spec);
	snprintf(path, sizeof path, "%s/kernel.json", kbox_kspec_resource_dir(g_spec));
	kj = json_load_file(path, 0, &jerr);
	specdir = live_mkdtemp("live-msgmode");
	run = live_mkdtemp("live-msgmode-run");
	if (!kj || !specdir || !run) {
		CHECK(kj && specdir && run);
		goto out;
	}
	json_object_set_new(kj, "interrupt_mode", json_string("message"));
	text = json_dumps(kj, JSON_INDENT(1));
	spec = text ? live_make_kspec(specdir, "python3-msg", text, &err) : NULL;
	if (!spec) {
		printf("# kspec: %s\n", err.msg);
		CHECK(spec);
		goto out;
	}
	CHECK_INT_EQ(kbox_kspec_interrupt_mode(spec), KBOX_INTERRUPT_MESSAGE);
	k = live_start(spec, run, &c, &err);
	if (!k) {
		printf("# start: %s\n", err.msg);
		CHECK(k);
		goto out;
	}
	check_timeout_interrupt(c);
	kbox_kernel_stop(k, c, NULL);
out:
	kbox_client_destroy(&c);
	kbox_kernel_destroy(&k);
	kbox_kspec_destroy(&spec);
	free(text);
	json_decref(kj);
	live_rm_rf(specdir);
	live_rm_rf(run);
	free(specdir);
	free(run);
}

int main(void)
{
	kbox_error_t err = {0};

	if (kbox_init() != 0) {
		printf("Bail out! kbox_init failed\n");
		return 1;
	}
	g_spec = live_python3();
	if (!g_spec) {
		printf("1..0 # SKIP no Debian python3 kernelspec with ipykernel\n");
		return 0;
	}
	g_dir = live_mkdtemp("live");
	if (g_dir)
		g_kernel = live_start(g_spec, g_dir, &g_client, &err);
	if (!g_kernel)
		printf("# shared kernel did not start: %s\n", err.msg);

	RUN(execute_1_plus_1_returns_2);
	RUN(execution_count_increments_between_calls);
	RUN(print_goes_to_stdout_stream);
	RUN(stderr_write_goes_to_stderr_stream);
	RUN(plot_shows_png_of_figsize_times_dpi);
	RUN(zero_division_is_error_with_iopub_error_message);
	RUN(execute_right_after_an_error_is_not_aborted);
	RUN(error_in_function_names_it_in_traceback);
	RUN(state_persists_between_executions);
	RUN(timeout_interrupts_and_kernel_keeps_state);
	RUN(input_without_stdin_fails_at_once);
	RUN(scripted_input_lines_are_answered_in_order);
	RUN(input_after_lines_run_out_gets_eof);
	RUN(request_queued_behind_error_is_aborted);
	RUN(execute_queued_behind_error_reports_aborted);
	RUN(complete_import_o_offers_os);
	RUN(inspect_len_is_found);
	RUN(is_complete_open_for_loop_is_incomplete_with_indent);
	RUN(is_complete_expression_is_complete);
	RUN(is_complete_dangling_operator_is_invalid);
	RUN(kernel_info_reports_protocol_5_and_python);
	RUN(history_tail_returns_latest_entry);
	RUN(comm_info_is_ok);
	RUN(two_clients_each_get_only_their_own_output);
	RUN(heartbeat_answers_on_live_kernel);
	RUN(heartbeat_detects_killed_kernel_within_2s);
	RUN(execute_on_killed_kernel_without_hooks_returns_died);
	RUN(execute_on_killed_kernel_with_alive_hook_returns_died_sooner);
	dead_cleanup();
	RUN(kernel_that_exits_at_once_is_dead_not_timed_out);
	RUN(missing_kernelspec_is_notfound);
	RUN(stop_leaves_no_process_and_no_files);
	RUN(exit_asks_the_front_end_to_end_the_kernel);
	RUN(message_mode_interrupt_interrupts_on_timeout);

	if (g_kernel)
		kbox_kernel_stop(g_kernel, g_client, NULL);
	kbox_client_destroy(&g_client);
	kbox_kernel_destroy(&g_kernel);
	kbox_kspec_destroy(&g_spec);
	live_rm_rf(g_dir);
	free(g_dir);
	return tap_done();
}
