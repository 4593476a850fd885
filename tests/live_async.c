/* tests/live_async.c — the client on an event loop (kbox/loop.h, the _begin
 * functions of kbox/client.h) against a real ipykernel.
 *
 * The loop's own tests need no kernel.  The others share one kernel (with
 * the hooks kbox_kernel_start_ready gives its client: interrupt by signal,
 * the alive check); a test that leaves it busy (a sleep it abandoned) puts
 * it back with recover().  Every loop is run with a deadline, so a test
 * that fails does not hang. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

#include "tap.h"
#include "live.h"

static kbox_kspec_t *g_spec;
static char *g_dir;
static kbox_kernel_t *g_kernel;
static kbox_client_t *g_client;

/* Run LOOP until *DONE, at most MS milliseconds.  True when *DONE. */
static bool run_until(kbox_loop_t *loop, const bool *done, int ms)
{
	long long end = live_ms() + ms;
	while (!*done && live_ms() < end)
		if (kbox_loop_once(loop, (int)(end - live_ms())) < 0)
			break;
	return *done;
}

/* Run LOOP for MS milliseconds, whatever happens. */
static void run_for(kbox_loop_t *loop, int ms)
{
	bool never = false;
	run_until(loop, &never, ms);
}

/* ---- the loop alone ---- */

typedef struct {
	int calls;
	int fd;           /* to read one byte from, or -1 */
	int remove_fd;    /* to remove from inside the handler, or -1 */
	int cancel_id;    /* a timer to cancel from inside the handler, or 0 */
	int cancel_after; /* ... once this many calls were made */
	int rc;           /* what the handler returns */
	int done_at;      /* calls after which done is set, or 0 */
	bool done;
	long long first_ms;
} probe_t;

static int probe(kbox_loop_t *loop, void *arg)
{
	probe_t *p = arg;
	char c;
	if (p->calls++ == 0)
		p->first_ms = live_ms();
	if (p->done_at && p->calls == p->done_at)
		p->done = true;
	if (p->fd >= 0 && read(p->fd, &c, 1) < 0)
		return -1;
	if (p->remove_fd >= 0)
		kbox_loop_remove_fd(loop, p->remove_fd);
	if (p->cancel_id && p->calls == p->cancel_after)
		kbox_loop_cancel_timer(loop, p->cancel_id);
	return p->rc;
}

static probe_t probe_new(void)
{
	probe_t p = {0};
	p.fd = p.remove_fd = -1;
	return p;
}

TEST(loop_fd_handler_runs_once_per_readable_event)
{
	kbox_loop_t *loop = kbox_loop_new(NULL);
	probe_t p = probe_new();
	int fds[2];

	REQUIRE(loop && pipe2(fds, O_CLOEXEC) == 0);
	p.fd = fds[0];
	CHECK_INT_EQ(kbox_loop_add_fd(loop, fds[0], probe, &p, NULL), 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 50), 0); /* nothing to read yet */
	CHECK_INT_EQ(p.calls, 0);
	CHECK_INT_EQ(write(fds[1], "ab", 2), 2);
	CHECK_INT_EQ(kbox_loop_once(loop, 1000), 0);
	CHECK_INT_EQ(p.calls, 1);
	CHECK_INT_EQ(kbox_loop_once(loop, 1000), 0); /* the second byte */
	CHECK_INT_EQ(p.calls, 2);
	CHECK_INT_EQ(kbox_loop_once(loop, 50), 0);
	CHECK_INT_EQ(p.calls, 2);
	kbox_loop_destroy(&loop);
	CHECK(loop == NULL);
	close(fds[0]);
	close(fds[1]);
}

TEST(loop_one_shot_timer_fires_once_after_its_delay)
{
	kbox_loop_t *loop = kbox_loop_new(NULL);
	probe_t p = probe_new();
	long long t0 = live_ms();

	REQUIRE(loop);
	p.done_at = 1;
	CHECK(kbox_loop_add_timer(loop, 100, false, probe, &p, NULL) > 0);
	/* (bounds against a hang only: a loaded machine may run it late) */
	REQUIRE(run_until(loop, &p.done, 60000));
	run_for(loop, 200);
	CHECK_INT_EQ(p.calls, 1);
	CHECK(p.first_ms - t0 >= 100);
	kbox_loop_destroy(&loop);
}

TEST(loop_repeating_timer_fires_until_it_cancels_itself)
{
	kbox_loop_t *loop = kbox_loop_new(NULL);
	probe_t p = probe_new();

	REQUIRE(loop);
	p.cancel_id = kbox_loop_add_timer(loop, 20, true, probe, &p, NULL);
	p.cancel_after = p.done_at = 3;
	REQUIRE(p.cancel_id > 0);
	REQUIRE(run_until(loop, &p.done, 60000));
	run_for(loop, 200); /* ten periods more: none fires */
	CHECK_INT_EQ(p.calls, 3);
	kbox_loop_destroy(&loop);
}

TEST(loop_cancelled_timer_never_fires)
{
	kbox_loop_t *loop = kbox_loop_new(NULL);
	probe_t p = probe_new(), q = probe_new();
	int id;

	REQUIRE(loop);
	id = kbox_loop_add_timer(loop, 30, false, probe, &p, NULL);
	CHECK(kbox_loop_add_timer(loop, 10, false, probe, &q, NULL) > id);
	kbox_loop_cancel_timer(loop, id);
	kbox_loop_cancel_timer(loop, 12345); /* unknown: ignored */
	q.done_at = 1;
	REQUIRE(run_until(loop, &q.done, 60000));
	run_for(loop, 150); /* past the cancelled one's 30 ms */
	CHECK_INT_EQ(p.calls, 0);
	CHECK_INT_EQ(q.calls, 1);
	kbox_loop_destroy(&loop);
}

/* Two descriptors ready in one poll: the first handler removes itself and
 * the second, which is then not called, now or later. */
TEST(loop_fd_removed_from_inside_a_handler_is_not_called)
{
	kbox_loop_t *loop = kbox_loop_new(NULL);
	probe_t a = probe_new(), b = probe_new();
	int pa[2], pb[2];

	REQUIRE(loop && pipe2(pa, O_CLOEXEC) == 0 && pipe2(pb, O_CLOEXEC) == 0);
	a.remove_fd = pb[0];
	CHECK_INT_EQ(kbox_loop_add_fd(loop, pa[0], probe, &a, NULL), 0);
	CHECK_INT_EQ(kbox_loop_add_fd(loop, pb[0], probe, &b, NULL), 0);
	CHECK_INT_EQ(write(pa[1], "x", 1), 1);
	CHECK_INT_EQ(write(pb[1], "x", 1), 1);
	CHECK_INT_EQ(kbox_loop_once(loop, 1000), 0);
	CHECK_INT_EQ(a.calls, 1);
	CHECK_INT_EQ(b.calls, 0);
	kbox_loop_remove_fd(loop, pa[0]);
	run_for(loop, 100);
	CHECK_INT_EQ(a.calls, 1); /* still readable, but forgotten */
	CHECK_INT_EQ(b.calls, 0);
	kbox_loop_destroy(&loop);
	close(pa[0]);
	close(pa[1]);
	close(pb[0]);
	close(pb[1]);
}

static int stop_loop(kbox_loop_t *loop, void *arg)
{
	(void)arg;
	kbox_loop_stop(loop);
	return 0;
}

TEST(loop_run_ends_0_on_stop_and_minus_1_on_a_failing_handler)
{
	kbox_loop_t *loop = kbox_loop_new(NULL);
	probe_t fail = probe_new();

	REQUIRE(loop);
	CHECK(kbox_loop_add_timer(loop, 20, false, stop_loop, NULL, NULL) > 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	fail.rc = -1;
	CHECK(kbox_loop_add_timer(loop, 20, false, probe, &fail, NULL) > 0);
	CHECK_INT_EQ(kbox_loop_run(loop), -1);
	CHECK_INT_EQ(fail.calls, 1);
	CHECK_INT_EQ(kbox_loop_run(loop), 0); /* nothing left: returns at once */
	kbox_loop_destroy(&loop);
}

/* ---- executions on a loop ---- */

typedef struct rec {
	int done_calls;
	bool done;
	kbox_exec_t *x;
	int iopub_msgs, stdin_msgs;
	char out[4096];             /* stdout stream text seen by on_msg */
	kbox_client_t *then_client; /* begin THEN_CODE from DONE, into NEXT */
	const char *then_code;
	struct rec *next;
} rec_t;

static int rec_on_msg(void *arg, kbox_channel_t ch, const kbox_msg_t *m)
{
	rec_t *r = arg;
	json_t *c = kbox_msg_content(m);
	if (ch == KBOX_CH_STDIN) {
		r->stdin_msgs++;
		return 0;
	}
	r->iopub_msgs++;
	if (strcmp(kbox_msg_type(m), "stream") == 0 &&
	    strcmp(json_string_value(json_object_get(c, "name")), "stdout") == 0) {
		size_t n = strlen(r->out);
		snprintf(r->out + n, sizeof r->out - n, "%s",
		         json_string_value(json_object_get(c, "text")));
	}
	return 0;
}

static kbox_exec_t *rec_begin(kbox_client_t *c, rec_t *r, const char *code, int timeout_ms);

static void rec_done(void *arg, kbox_exec_t *x)
{
	rec_t *r = arg;
	r->done_calls++;
	r->done = true;
	r->x = x;
	if (r->then_code)
		rec_begin(r->then_client, r->next, r->then_code, LIVE_EXEC_MS);
}

/* Begin CODE on C (attached) into R, collecting. */
static kbox_exec_t *rec_begin(kbox_client_t *c, rec_t *r, const char *code, int timeout_ms)
{
	kbox_exec_opts_t o = {0};
	kbox_error_t err = {0};
	kbox_exec_t *x;
	o.code = code;
	o.collect = true;
	o.timeout_ms = timeout_ms;
	o.on_msg = rec_on_msg;
	o.cb_arg = r;
	x = kbox_client_execute_begin(c, &o, rec_done, r, &err);
	if (!x)
		printf("# execute_begin %s: %s\n", code, err.msg);
	return x;
}

/* A loop with the shared client attached.  NULL (and a TAP comment) on
 * failure. */
static kbox_loop_t *attached(kbox_client_t *c)
{
	kbox_error_t err = {0};
	kbox_loop_t *loop = kbox_loop_new(&err);
	if (loop && kbox_client_attach(c, loop, &err) < 0)
		kbox_loop_destroy(&loop);
	if (!loop)
		printf("# attach: %s\n", err.msg);
	return loop;
}

static void detached(kbox_client_t *c, kbox_loop_t **loop_p)
{
	kbox_client_detach(c);
	kbox_loop_destroy(loop_p);
}

/* Put the shared kernel back after a test abandoned a sleep: interrupt it,
 * wait until shell answers (after the interrupted reply), check it works.
 * The interrupted execution failed with stop_on_error, so ipykernel may
 * abort the next one (ipykernel#609): an aborted try is tried again, and
 * the client's settling round trip makes the second one run. */
static bool recover(void)
{
	kbox_exec_t *ex = NULL;
	kbox_msg_t *r;
	bool ok = false;
	kbox_client_interrupt(g_client, 2000, NULL);
	r = kbox_client_kernel_info_request(g_client, 10000, NULL);
	kbox_msg_destroy(&r);
	for (int i = 0; i < 3 && !ok; i++) {
		kbox_exec_destroy(&ex);
		ex = live_run(g_client, "1+1", LIVE_EXEC_MS);
		ok = ex && kbox_exec_status(ex) == KBOX_EXEC_OK;
		if (!ok)
			printf("# recover: %s\n", ex ? kbox_exec_reason(ex) : "no result");
	}
	kbox_exec_destroy(&ex);
	return ok;
}

TEST(execute_begin_delivers_output_to_on_msg_and_done_exactly_once)
{
	kbox_loop_t *loop;
	rec_t r = {0};
	kbox_exec_t *x;

	REQUIRE(g_client && (loop = attached(g_client)));
	x = rec_begin(g_client, &r, "print('hi')\n6*7", LIVE_EXEC_MS);
	CHECK(x != NULL);
	CHECK_INT_EQ(r.done_calls, 0); /* never from the _begin function */
	CHECK(run_until(loop, &r.done, LIVE_EXEC_MS + 5000));
	run_for(loop, 300); /* and not again */
	CHECK_INT_EQ(r.done_calls, 1);
	CHECK(r.x == x);
	if (r.x) {
		CHECK_INT_EQ(kbox_exec_status(r.x), KBOX_EXEC_OK);
		CHECK(kbox_exec_count(r.x) >= 1);
		CHECK_STR_EQ(live_result(r.x), "42");
		CHECK_INT_EQ(kbox_exec_output_count(r.x), r.iopub_msgs);
		CHECK_STR_EQ(kbox_exec_reason(r.x), "");
	}
	CHECK_STR_EQ(r.out, "hi\n");
	kbox_exec_destroy(&r.x);
	detached(g_client, &loop);
}

TEST(two_executions_back_to_back_on_one_loop)
{
	kbox_loop_t *loop;
	rec_t a = {0}, b = {0};

	REQUIRE(g_client && (loop = attached(g_client)));
	/* the second begins from inside the first's DONE */
	a.then_client = g_client;
	a.then_code = "print('second')\n'b'";
	a.next = &b;
	CHECK(rec_begin(g_client, &a, "print('first')\n'a'", LIVE_EXEC_MS) != NULL);
	CHECK(run_until(loop, &b.done, 2 * LIVE_EXEC_MS));
	CHECK_INT_EQ(a.done_calls, 1);
	CHECK_INT_EQ(b.done_calls, 1);
	if (a.x && b.x) {
		CHECK_INT_EQ(kbox_exec_status(a.x), KBOX_EXEC_OK);
		CHECK_INT_EQ(kbox_exec_status(b.x), KBOX_EXEC_OK);
		CHECK_STR_EQ(live_result(a.x), "'a'");
		CHECK_STR_EQ(live_result(b.x), "'b'");
		CHECK_INT_EQ(kbox_exec_count(b.x), kbox_exec_count(a.x) + 1);
	}
	CHECK_STR_EQ(a.out, "first\n");
	CHECK_STR_EQ(b.out, "second\n");
	kbox_exec_destroy(&a.x);
	kbox_exec_destroy(&b.x);
	detached(g_client, &loop);
}

typedef struct {
	int calls;
	bool done;
	kbox_msg_t *reply;
	kbox_error_t err;
} reply_rec_t;

static void on_reply_rec(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	reply_rec_t *r = arg;
	r->calls++;
	r->done = true;
	r->reply = reply;
	if (err)
		r->err = *err;
}

/* Two requests in flight at once: each callback gets the reply to its own. */
TEST(request_begin_routes_each_reply_to_its_request)
{
	kbox_loop_t *loop;
	reply_rec_t info = {0}, comp = {0};
	json_t *content = json_pack("{s:s, s:i}", "code", "import o", "cursor_pos", 8);
	json_t *matches;
	bool os = false;

	REQUIRE(g_client && (loop = attached(g_client)));
	CHECK_INT_EQ(kbox_client_request_begin(g_client, KBOX_CH_SHELL, "kernel_info_request", NULL,
	                                       10000, on_reply_rec, &info, NULL),
	             0);
	CHECK_INT_EQ(kbox_client_request_begin(g_client, KBOX_CH_SHELL, "complete_request",
	                                       &content, 10000, on_reply_rec, &comp, NULL),
	             0);
	CHECK(content == NULL);
	CHECK(run_until(loop, &comp.done, 15000));
	CHECK(run_until(loop, &info.done, 15000));
	CHECK_INT_EQ(info.calls, 1);
	CHECK_INT_EQ(comp.calls, 1);
	REQUIRE(info.reply && comp.reply);
	CHECK_STR_EQ(kbox_msg_type(info.reply), "kernel_info_reply");
	CHECK_STR_EQ(kbox_msg_type(comp.reply), "complete_reply");
	matches = json_object_get(kbox_msg_content(comp.reply), "matches");
	for (size_t i = 0; i < json_array_size(matches); i++)
		os |= strcmp(json_string_value(json_array_get(matches, i)), "os") == 0;
	CHECK(os);
	kbox_msg_destroy(&info.reply);
	kbox_msg_destroy(&comp.reply);
	detached(g_client, &loop);
}

typedef struct {
	int msgs;
	size_t streams;
	char text[1024]; /* stream text */
	char parent[64]; /* parent msg_id of the last stream */
} between_t;

static void on_between(void *arg, const kbox_msg_t *m)
{
	between_t *b = arg;
	json_t *c = kbox_msg_content(m);
	b->msgs++;
	if (strcmp(kbox_msg_type(m), "stream") == 0) {
		size_t n = strlen(b->text);
		b->streams++;
		snprintf(b->text + n, sizeof b->text - n, "%s",
		         json_string_value(json_object_get(c, "text")));
		snprintf(b->parent, sizeof b->parent, "%s",
		         kbox_msg_parent_id(m) ? kbox_msg_parent_id(m) : "");
	}
}

/* Output a timer thread prints after its execution ended goes to the iopub
 * callback; the execution's own output does not. */
TEST(iopub_callback_gets_output_printed_between_executions_only)
{
	kbox_loop_t *loop;
	rec_t r = {0};
	between_t b = {0};
	const kbox_msg_t *input;

	REQUIRE(g_client && (loop = attached(g_client)));
	kbox_client_set_iopub_cb(g_client, on_between, &b);
	CHECK(rec_begin(g_client, &r,
	                "import threading\n"
	                "print('own')\n"
	                "threading.Timer(0.3, lambda: print('late', flush=True)).start()",
	                LIVE_EXEC_MS) != NULL);
	CHECK(run_until(loop, &r.done, LIVE_EXEC_MS + 5000));
	CHECK_STR_EQ(r.out, "own\n");
	CHECK_STR_EQ(b.text, ""); /* nothing of the execution's own */
	run_for(loop, 1500);
	CHECK_STR_EQ(b.text, "late\n");
	CHECK_STR_EQ(r.out, "own\n");
	/* the kernel still parents it to the execution that started the thread */
	input = r.x ? live_output(r.x, "execute_input") : NULL;
	CHECK(input != NULL);
	if (input)
		CHECK_STR_EQ(b.parent, kbox_msg_parent_id(input));
	CHECK_INT_EQ(kbox_client_iopub_dropped(g_client, NULL), 0);
	kbox_client_set_iopub_cb(g_client, NULL, NULL);
	kbox_exec_destroy(&r.x);
	detached(g_client, &loop);
}

/* Output between executions passes the same rate limit as an execution's
 * (KBOX_RATE_MSGS_PER_SEC, a 2 s burst): a flood of 10000 one-character
 * messages, sent by the kernel's IOPub thread after its execution ended,
 * reaches the callback in part; the rest is dropped and counted (or, when
 * the kernel itself cannot send that fast, lost before kbox reads it). */
TEST(iopub_callback_output_over_the_rate_limit_is_dropped_and_counted)
{
	static const char code[] =
	        "import threading\n"
	        "k = get_ipython().kernel\n"
	        "p = k.get_parent('shell')\n"
	        "def _flood(n=10000):\n"
	        "    for i in range(n):\n"
	        "        k.session.send(k.iopub_thread.socket, 'stream',\n"
	        "                       {'name': 'stdout', 'text': 'x'}, parent=p,\n"
	        "                       ident=b'stream.stdout')\n"
	        "threading.Timer(0.3, lambda: k.iopub_thread.schedule(_flood)).start()\n";
	kbox_loop_t *loop;
	rec_t r = {0};
	between_t b = {0};
	size_t dropped0, bytes0, dropped, bytes, got;

	REQUIRE(g_client && (loop = attached(g_client)));
	dropped0 = kbox_client_iopub_dropped(g_client, &bytes0);
	kbox_client_set_iopub_cb(g_client, on_between, &b);
	CHECK(rec_begin(g_client, &r, code, LIVE_EXEC_MS) != NULL);
	CHECK(run_until(loop, &r.done, LIVE_EXEC_MS + 5000));
	run_for(loop, 4000);
	dropped = kbox_client_iopub_dropped(g_client, &bytes) - dropped0;
	bytes -= bytes0;
	got = b.streams;
	printf("# of 10000: %zu reached the callback, %zu dropped (%zu bytes)\n", got, dropped,
	       bytes);
	CHECK(got >= 1000);
	/* dropped and counted, with their bytes; or, on a machine so loaded
	 * that the kernel sent slower than the limit (and lost the rest at its
	 * own queue), never all 10000 through unthrottled */
	CHECK(dropped > 0 ? bytes > dropped : got < 10000);
	CHECK(got + dropped <= 10000);
	CHECK_INT_EQ(r.x ? kbox_exec_rate_dropped(r.x, NULL) : 1, 0); /* not the execution's */
	kbox_client_set_iopub_cb(g_client, NULL, NULL);
	kbox_exec_destroy(&r.x);
	detached(g_client, &loop);
}

typedef struct {
	int calls;
	bool done;
	int rc;
	kbox_error_t err;
} ready_rec_t;

static void on_ready_rec(void *arg, int rc, const kbox_error_t *err)
{
	ready_rec_t *r = arg;
	r->calls++;
	r->done = true;
	r->rc = rc;
	if (err)
		r->err = *err;
}

TEST(ready_begin_on_a_freshly_started_kernel)
{
	char *dir = live_mkdtemp("async-ready");
	kbox_kernel_opts_t ko = {0};
	kbox_kernel_t *k = NULL;
	kbox_client_t *c = NULL;
	kbox_loop_t *loop = NULL;
	kbox_error_t err = {0};
	ready_rec_t rr = {0};
	const char *pv;
	long long t0;

	REQUIRE(g_spec && dir);
	ko.runtime_dir = dir;
	k = kbox_kernel_start(g_spec, &ko, &err);
	if (k)
		c = kbox_kernel_connect(k, &err);
	if (c)
		loop = attached(c);
	if (!loop) {
		printf("# %s\n", err.msg);
		CHECK(loop != NULL);
		goto out;
	}
	t0 = live_ms();
	CHECK_INT_EQ(kbox_client_ready_begin(c, LIVE_READY_MS, on_ready_rec, &rr, &err), 0);
	CHECK_INT_EQ(kbox_client_ready_begin(c, LIVE_READY_MS, on_ready_rec, &rr, &err), -1);
	CHECK_CONTAINS(err.msg, "already waiting");
	CHECK(run_until(loop, &rr.done, LIVE_READY_MS + 5000));
	printf("# ready after %lld ms\n", live_ms() - t0);
	CHECK_INT_EQ(rr.calls, 1);
	CHECK_INT_EQ(rr.rc, 0);
	pv = json_string_value(json_object_get(kbox_client_kernel_info(c), "protocol_version"));
	CHECK(pv && pv[0] == '5');
out:
	if (c)
		kbox_client_detach(c);
	kbox_loop_destroy(&loop);
	if (k)
		kbox_kernel_stop(k, c, NULL);
	kbox_client_destroy(&c);
	kbox_kernel_destroy(&k);
	live_rm_rf(dir);
	free(dir);
}

typedef struct {
	kbox_client_t *client;
	kbox_exec_t **x_p;
	const char *what;
	const char *file; /* ask_when's */
	bool asked;
	int rc;
	kbox_error_t err;
} act_t;

static int act_fail_pending(kbox_loop_t *loop, void *arg)
{
	act_t *a = arg;
	(void)loop;
	kbox_client_fail_pending(a->client, a->what);
	return 0;
}

static int act_interrupt(kbox_loop_t *loop, void *arg)
{
	act_t *a = arg;
	(void)loop;
	a->rc = kbox_exec_interrupt(*a->x_p, 5000, a->what, &a->err);
	return 0;
}

static int act_detach(kbox_loop_t *loop, void *arg)
{
	act_t *a = arg;
	(void)loop;
	kbox_client_detach(a->client);
	return 0;
}

TEST(fail_pending_ends_a_running_sleep_as_died_with_the_reason)
{
	kbox_loop_t *loop;
	rec_t r = {0};
	reply_rec_t q = {0};
	act_t a = {0};
	long long t0 = live_ms();

	REQUIRE(g_client && (loop = attached(g_client)));
	CHECK(rec_begin(g_client, &r, "import time; time.sleep(30)", LIVE_EXEC_MS) != NULL);
	/* queued behind the sleep: pending too */
	CHECK_INT_EQ(kbox_client_request_begin(g_client, KBOX_CH_SHELL, "kernel_info_request", NULL,
	                                       10000, on_reply_rec, &q, NULL),
	             0);
	a.client = g_client;
	a.what = "the test says the kernel died";
	CHECK(kbox_loop_add_timer(loop, 300, false, act_fail_pending, &a, NULL) > 0);
	CHECK(run_until(loop, &r.done, 5000));
	CHECK(live_ms() - t0 < 2000);
	CHECK_INT_EQ(r.done_calls, 1);
	if (r.x) {
		CHECK_STR_EQ(kbox_exec_status_name(kbox_exec_status(r.x)), "died");
		CHECK_STR_EQ(kbox_exec_reason(r.x), "the test says the kernel died");
		CHECK(kbox_exec_reply(r.x) == NULL);
	}
	CHECK_INT_EQ(q.calls, 1);
	CHECK(q.reply == NULL);
	CHECK_INT_EQ(q.err.code, KBOX_E_DEAD);
	CHECK_STR_EQ(q.err.msg, "the test says the kernel died");
	kbox_exec_destroy(&r.x);
	detached(g_client, &loop);
	CHECK(recover());
}

TEST(exec_interrupt_ends_a_sleep_with_keyboardinterrupt_at_once)
{
	kbox_loop_t *loop;
	rec_t r = {0};
	act_t a = {0};
	kbox_exec_t *x;
	long long t0 = live_ms(), ms;

	REQUIRE(g_client && (loop = attached(g_client)));
	x = rec_begin(g_client, &r, "import time; time.sleep(30)", LIVE_EXEC_MS);
	CHECK(x != NULL);
	a.x_p = &x;
	a.what = "interrupted: its client went away";
	a.rc = 1;
	CHECK(kbox_loop_add_timer(loop, 500, false, act_interrupt, &a, NULL) > 0);
	CHECK(run_until(loop, &r.done, 10000));
	ms = live_ms() - t0;
	printf("# ended %lld ms after it began\n", ms);
	CHECK_INT_EQ(a.rc, 0);
	CHECK(ms < 3000);
	CHECK_INT_EQ(r.done_calls, 1);
	if (r.x) {
		CHECK_STR_EQ(kbox_exec_status_name(kbox_exec_status(r.x)), "error");
		CHECK_STR_EQ(live_reply_str(r.x, "ename"), "KeyboardInterrupt");
		CHECK(kbox_exec_interrupted(r.x));
		CHECK_STR_EQ(kbox_exec_reason(r.x), "interrupted: its client went away");
	}
	/* X has ended: interrupting it again is refused */
	CHECK_INT_EQ(kbox_exec_interrupt(x, 0, "again", &a.err), -1);
	CHECK_INT_EQ(a.err.code, KBOX_E_INVALID);
	kbox_exec_destroy(&r.x);
	detached(g_client, &loop);
	CHECK(recover());
}

/* Asked right after the request went, before the kernel is in the code
 * (no execute_input yet: its SIGINT would be ignored, or would end the
 * kernel), the interrupt waits for execute_input and stops the code.
 * (Short sleeps: a SIGINT that lands as the code enters a blocking call
 * runs Python's handler only when that call returns, kbox-interrupt(1).) */
TEST(ask_interrupt_before_the_code_runs_stops_the_code)
{
	kbox_loop_t *loop;
	rec_t r = {0};
	kbox_error_t err = {0};
	kbox_exec_t *x;

	REQUIRE(g_client && (loop = attached(g_client)));
	x = rec_begin(g_client, &r, "import time\nwhile True: time.sleep(0.05)", 0);
	REQUIRE(x != NULL);
	CHECK_INT_EQ(kbox_exec_ask_interrupt(x, "interrupted by the test", &err), 0);
	CHECK(run_until(loop, &r.done, 40000));
	CHECK_INT_EQ(r.done_calls, 1);
	/* (or, the SIGINT in ipykernel's own steps around the code, the
	 * reply lost: interrupted, with the reason) */
	if (r.x && kbox_exec_status(r.x) == KBOX_EXEC_INTERRUPTED) {
		CHECK_STR_EQ(kbox_exec_reason(r.x), "interrupted by the test");
		CHECK(kbox_exec_reply(r.x) == NULL);
	} else if (r.x) {
		CHECK_STR_EQ(kbox_exec_status_name(kbox_exec_status(r.x)), "error");
		CHECK_STR_EQ(live_reply_str(r.x, "ename"), "KeyboardInterrupt");
		CHECK_STR_EQ(kbox_exec_reason(r.x), "");
	}
	if (r.x)
		CHECK(kbox_exec_interrupted(r.x));
	kbox_exec_destroy(&r.x);
	detached(g_client, &loop);
	CHECK(recover());
}

/* Ask the interrupt (the reason A->what) once A->file exists: a timer
 * that repeats. */
static int ask_when(kbox_loop_t *loop, void *arg)
{
	act_t *a = arg;
	(void)loop;
	if (a->asked || access(a->file, F_OK) < 0)
		return 0;
	a->asked = true;
	a->rc = kbox_exec_ask_interrupt(*a->x_p, a->what, &a->err);
	return 0;
}

/* An interrupt that lands after the code, before its reply (here in the
 * flush of sys.stdout that ipykernel makes between the two), ipykernel
 * takes in its event loop ("KeyboardInterrupt caught in kernel"): idle
 * comes, the reply never.  The execution ends as interrupted, and the
 * kernel goes on. */
TEST(ask_interrupt_that_loses_the_reply_ends_as_interrupted)
{
	kbox_loop_t *loop;
	rec_t r = {0};
	act_t a = {0};
	kbox_exec_t *x = NULL, *ex;
	char arm[1024], in[1024], code[8192];

	REQUIRE(g_client && g_dir && (loop = attached(g_client)));
	snprintf(arm, sizeof arm, "%s/arm", g_dir);
	snprintf(in, sizeof in, "%s/in_flush", g_dir);
	snprintf(
	        code, sizeof code,
	        "import os, sys, time\n"
	        "class _SlowFlush:\n"
	        "    def __init__(s, o): s.o = o\n"
	        "    def flush(s):\n"
	        "        if os.path.exists(%1$s'%2$s'):\n"
	        "            os.remove(%1$s'%2$s'); open(%1$s'%3$s', 'w').close(); time.sleep(60)\n"
	        "        s.o.flush()\n"
	        "    def __getattr__(s, n): return getattr(s.o, n)\n"
	        "sys.stdout = _SlowFlush(sys.stdout)\n",
	        "r", arm, in);
	detached(g_client, &loop);
	ex = live_run(g_client, code, LIVE_EXEC_MS);
	REQUIRE(ex && kbox_exec_status(ex) == KBOX_EXEC_OK);
	kbox_exec_destroy(&ex);
	REQUIRE(close(open(arm, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == 0);
	REQUIRE((loop = attached(g_client)));
	x = rec_begin(g_client, &r, "pass", 0);
	REQUIRE(x != NULL);
	a.x_p = &x;
	a.what = "interrupted by the test";
	a.file = in;
	a.rc = 1;
	CHECK(kbox_loop_add_timer(loop, 20, true, ask_when, &a, NULL) > 0);
	CHECK(run_until(loop, &r.done, 40000));
	CHECK(a.asked);
	CHECK_INT_EQ(a.rc, 0);
	CHECK_INT_EQ(r.done_calls, 1);
	if (r.x) {
		CHECK_STR_EQ(kbox_exec_status_name(kbox_exec_status(r.x)), "interrupted");
		CHECK_STR_EQ(kbox_exec_reason(r.x), "interrupted by the test");
		CHECK(kbox_exec_interrupted(r.x));
		CHECK(kbox_exec_reply(r.x) == NULL);
	}
	kbox_exec_destroy(&r.x);
	detached(g_client, &loop);
	ex = live_run(g_client, "sys.stdout = sys.stdout.o; print(6 * 7)", LIVE_EXEC_MS);
	CHECK(ex && kbox_exec_status(ex) == KBOX_EXEC_OK);
	kbox_exec_destroy(&ex);
	unlink(in);
	CHECK(recover());
}

/* The deadline, the interrupt and the grace period are the loop's timers:
 * another timer keeps firing meanwhile. */
TEST(execute_timeout_interrupts_on_the_loop_without_blocking_it)
{
	kbox_loop_t *loop;
	kbox_exec_opts_t o = {0};
	rec_t r = {0};
	probe_t tick = probe_new();
	long long t0 = live_ms(), ms;

	REQUIRE(g_client && (loop = attached(g_client)));
	o.code = "import time; time.sleep(30)";
	o.timeout_ms = 500;
	o.interrupt_on_timeout = true;
	o.on_msg = rec_on_msg;
	o.cb_arg = &r;
	CHECK(kbox_client_execute_begin(g_client, &o, rec_done, &r, NULL) != NULL);
	CHECK(kbox_loop_add_timer(loop, 50, true, probe, &tick, NULL) > 0);
	CHECK(run_until(loop, &r.done, 10000));
	ms = live_ms() - t0;
	printf("# timed out after %lld ms; the 50 ms timer fired %d times\n", ms, tick.calls);
	CHECK(ms >= 500);
	CHECK(ms < 5000);
	CHECK(tick.calls >= (int)(ms / 50) - 3);
	CHECK_INT_EQ(r.done_calls, 1);
	if (r.x) {
		CHECK_STR_EQ(kbox_exec_status_name(kbox_exec_status(r.x)), "timeout");
		CHECK(kbox_exec_interrupted(r.x));
		CHECK_STR_EQ(kbox_exec_reason(r.x),
		             "timed out after 500 ms; the kernel was interrupted (state kept)");
		CHECK(kbox_exec_count(r.x) >= 1);
	}
	kbox_exec_destroy(&r.x);
	detached(g_client, &loop);
	CHECK(recover());
}

TEST(detach_ends_a_pending_execution_and_request)
{
	kbox_loop_t *loop;
	rec_t r = {0};
	reply_rec_t q = {0};
	act_t a = {0};
	kbox_error_t err = {0};

	REQUIRE(g_client && (loop = attached(g_client)));
	CHECK(rec_begin(g_client, &r, "import time; time.sleep(30)", LIVE_EXEC_MS) != NULL);
	CHECK_INT_EQ(kbox_client_request_begin(g_client, KBOX_CH_SHELL, "kernel_info_request", NULL,
	                                       10000, on_reply_rec, &q, NULL),
	             0);
	a.client = g_client;
	CHECK(kbox_loop_add_timer(loop, 300, false, act_detach, &a, NULL) > 0);
	CHECK(run_until(loop, &r.done, 5000));
	CHECK_INT_EQ(r.done_calls, 1);
	if (r.x) {
		CHECK_STR_EQ(kbox_exec_status_name(kbox_exec_status(r.x)), "died");
		CHECK_STR_EQ(kbox_exec_reason(r.x), "detached");
	}
	CHECK_INT_EQ(q.calls, 1);
	CHECK_INT_EQ(q.err.code, KBOX_E_INVALID);
	CHECK_STR_EQ(q.err.msg, "detached");
	/* detached: the _begin functions refuse, the waiting ones work again */
	CHECK(kbox_client_execute_begin(g_client, &(kbox_exec_opts_t){.code = "1"}, rec_done, &r,
	                                &err) == NULL);
	CHECK_CONTAINS(err.msg, "not attached");
	kbox_exec_destroy(&r.x);
	kbox_loop_destroy(&loop);
	CHECK(recover());
}

TEST(waiting_functions_refuse_while_attached)
{
	kbox_loop_t *loop;
	kbox_error_t err = {0};
	kbox_exec_t *x;
	rec_t r = {0};

	REQUIRE(g_client && (loop = attached(g_client)));
	x = live_run(g_client, "1", LIVE_EXEC_MS);
	CHECK(x == NULL);
	CHECK_INT_EQ(kbox_client_wait_ready(g_client, 1000, &err), -1);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, "attached to an event loop");
	/* and one execution at a time */
	CHECK(rec_begin(g_client, &r, "1", LIVE_EXEC_MS) != NULL);
	CHECK(kbox_client_execute_begin(g_client, &(kbox_exec_opts_t){.code = "2"}, rec_done, &r,
	                                &err) == NULL);
	CHECK_CONTAINS(err.msg, "already running");
	CHECK(run_until(loop, &r.done, LIVE_EXEC_MS));
	CHECK_INT_EQ(r.done_calls, 1);
	kbox_exec_destroy(&r.x);
	detached(g_client, &loop);
}

typedef struct {
	kbox_client_t *client;
	bool done;
	kbox_exec_status_t status;
} owner_t;

static void destroy_all(void *arg, kbox_exec_t *x)
{
	owner_t *o = arg;
	o->status = kbox_exec_status(x);
	kbox_exec_destroy(&x);
	kbox_client_destroy(&o->client);
	o->done = true;
}

/* A second client of the shared kernel whose DONE destroys the execution
 * and the client itself; the loop goes on. */
TEST(done_callback_may_destroy_the_client)
{
	kbox_loop_t *loop = kbox_loop_new(NULL);
	owner_t o = {0};
	probe_t tick = probe_new();

	REQUIRE(g_kernel && loop);
	o.client = kbox_client_new(kbox_kernel_conn(g_kernel), NULL);
	REQUIRE(o.client);
	REQUIRE(kbox_client_wait_ready(o.client, LIVE_READY_MS, NULL) == 0);
	REQUIRE(kbox_client_attach(o.client, loop, NULL) == 0);
	CHECK(kbox_client_execute_begin(o.client, &(kbox_exec_opts_t){.code = "print(1)"},
	                                destroy_all, &o, NULL) != NULL);
	CHECK(kbox_loop_add_timer(loop, 50, true, probe, &tick, NULL) > 0);
	CHECK(run_until(loop, &o.done, LIVE_EXEC_MS));
	run_for(loop, 200);
	CHECK(o.client == NULL);
	CHECK_INT_EQ(o.status, KBOX_EXEC_OK);
	CHECK(tick.calls > 0);
	kbox_client_destroy(&o.client);
	kbox_loop_destroy(&loop);
}

int main(void)
{
	kbox_error_t err = {0};

	if (kbox_init() != 0) {
		printf("Bail out! kbox_init failed\n");
		return 1;
	}
	RUN(loop_fd_handler_runs_once_per_readable_event);
	RUN(loop_one_shot_timer_fires_once_after_its_delay);
	RUN(loop_repeating_timer_fires_until_it_cancels_itself);
	RUN(loop_cancelled_timer_never_fires);
	RUN(loop_fd_removed_from_inside_a_handler_is_not_called);
	RUN(loop_run_ends_0_on_stop_and_minus_1_on_a_failing_handler);

	g_spec = live_python3();
	if (!g_spec) {
		printf("# SKIP the kernel tests: no Debian python3 kernelspec with ipykernel\n");
		return tap_done();
	}
	g_dir = live_mkdtemp("async");
	if (g_dir)
		g_kernel = live_start(g_spec, g_dir, &g_client, &err);
	if (!g_kernel)
		printf("# shared kernel did not start: %s\n", err.msg);

	RUN(execute_begin_delivers_output_to_on_msg_and_done_exactly_once);
	RUN(two_executions_back_to_back_on_one_loop);
	RUN(request_begin_routes_each_reply_to_its_request);
	RUN(iopub_callback_gets_output_printed_between_executions_only);
	RUN(iopub_callback_output_over_the_rate_limit_is_dropped_and_counted);
	RUN(ready_begin_on_a_freshly_started_kernel);
	RUN(fail_pending_ends_a_running_sleep_as_died_with_the_reason);
	RUN(exec_interrupt_ends_a_sleep_with_keyboardinterrupt_at_once);
	RUN(ask_interrupt_before_the_code_runs_stops_the_code);
	RUN(ask_interrupt_that_loses_the_reply_ends_as_interrupted);
	RUN(execute_timeout_interrupts_on_the_loop_without_blocking_it);
	RUN(detach_ends_a_pending_execution_and_request);
	RUN(waiting_functions_refuse_while_attached);
	RUN(done_callback_may_destroy_the_client);

	if (g_kernel)
		kbox_kernel_stop(g_kernel, g_client, NULL);
	kbox_client_destroy(&g_client);
	kbox_kernel_destroy(&g_kernel);
	kbox_kspec_destroy(&g_spec);
	live_rm_rf(g_dir);
	free(g_dir);
	return tap_done();
}
