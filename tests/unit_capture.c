/* tests/unit_capture.c — the capture layer against recorded ipykernel output
 * (tests/fixtures, made by tests/record_fixtures.py) and hand-built message
 * sequences: stream text as a terminal shows it, clear_output, display
 * updates, MIME bundles, image files, errors, budgets and spill files,
 * refusal to write through planted links, and the public helpers
 * kbox_strip_ansi and kbox_image_size.  Each test captures into a fresh
 * outputs directory. */
#include <kbox.h>
#include <sodium.h>
#include <kbox/capture.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "fixture.h"

static const unsigned char PNG_SIG[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

/* A 1x1 PNG (base64), for hand-built displays. */
#define PNG_1X1 \
	"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgZGIGAAAOAAfXb+R4AAAAAElFTkSuQmCC"

/* ---- cleanup: what a test allocates is released after it, even when a
 * REQUIRE returned early ---- */

#define MAX_DEFERRED 64

typedef void(cleanup_fn)(void *);

static struct {
	cleanup_fn *fn;
	void *p;
} deferred[MAX_DEFERRED];
static size_t n_deferred;

/* Call FN(P) after the current test (when P is not NULL).  Returns P. */
static void *defer(cleanup_fn *fn, void *p)
{
	if (!p)
		return NULL;
	if (n_deferred == MAX_DEFERRED) {
		printf("# too many deferred cleanups\n");
		fn(p);
		return NULL;
	}
	deferred[n_deferred].fn = fn;
	deferred[n_deferred].p = p;
	n_deferred++;
	return p;
}

/* Run the deferred cleanups, newest first. */
static void cleanup_all(void)
{
	while (n_deferred > 0) {
		n_deferred--;
		deferred[n_deferred].fn(deferred[n_deferred].p);
	}
}

static void decref_cb(void *p)
{
	json_decref(p);
}

static void result_cb(void *p)
{
	kbox_result_destroy((kbox_result_t **)&p);
}

/* Remove directory P and free the string. */
static void rmdir_cb(void *p)
{
	fixture_rm_rf(p);
	free(p);
}

/* A test runs RUN_TEST(name): the test, then its cleanups. */
#define RUN_TEST(name)         \
	do {                   \
		RUN(name);     \
		cleanup_all(); \
	} while (0)

/* ---- one capture into a fresh outputs directory ---- */

typedef struct {
	char *dir;
	kbox_capture_opts_t opts;
	kbox_capture_t *cap;
	kbox_result_t *res;
	int feed_failures;
	kbox_error_t last_err;
} run_t;

static void run_cb(void *p)
{
	run_t *r = p;

	kbox_capture_destroy(&r->cap);
	kbox_result_destroy(&r->res);
	fixture_rm_rf(r->dir);
	free(r->dir);
	free(r);
}

/* Start a capture into a new outputs dir with budgets MAX_BYTES/MAX_LINES
 * (0 → defaults) and PREFIX (may be NULL); *RP gets it, released after the
 * test.  0, or -1 with a TAP comment. */
/* The outputs quota of the next capture run_start_prefix starts (0: none);
 * it is taken by that start. */
static unsigned long long next_files_max;

static int run_start_prefix(run_t **rp, size_t max_bytes, size_t max_lines, const char *prefix)
{
	kbox_error_t err = {0};
	run_t *r = defer(run_cb, calloc(1, sizeof *r));

	*rp = r;
	if (!r)
		return -1;
	r->dir = fixture_mkdtemp("capture");
	if (!r->dir) {
		printf("# mkdtemp: %s\n", strerror(errno));
		return -1;
	}
	r->opts.outputs_dir = r->dir;
	r->opts.max_bytes = max_bytes;
	r->opts.max_lines = max_lines;
	r->opts.prefix = prefix;
	r->opts.has_files_max = next_files_max > 0;
	r->opts.files_max = next_files_max;
	next_files_max = 0;
	r->cap = kbox_capture_new(&r->opts, &err);
	if (!r->cap) {
		printf("# kbox_capture_new: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int run_start(run_t **rp, size_t max_bytes, size_t max_lines)
{
	return run_start_prefix(rp, max_bytes, max_lines, NULL);
}

/* Feed MSG (taken) to the capture; failures are counted. */
static void run_feed(run_t *r, kbox_msg_t *msg)
{
	kbox_error_t err = {0};

	if (!msg) {
		printf("# could not build a message\n");
		r->feed_failures++;
		return;
	}
	if (fixture_feed_msg(r->cap, msg, &err) != 0) {
		r->feed_failures++;
		r->last_err = err;
	}
}

/* Feed a message of TYPE whose content is the JSON text CONTENT. */
static void run_json(run_t *r, const char *type, const char *content)
{
	run_feed(r, fixture_msg_json(type, content));
}

/* Feed a stream message NAME ("stdout"/"stderr") carrying TEXT. */
static void run_stream(run_t *r, const char *name, const char *text)
{
	json_t *c = json_pack("{s:s, s:s}", "name", name, "text", text);

	run_feed(r, c ? fixture_msg_new("stream", c, NULL) : NULL);
	json_decref(c);
}

/* Feed a display_data (or update_display_data when UPDATE) showing TEXT
 * under display id ID (NULL: none). */
static void run_display(run_t *r, bool update, const char *text, const char *id)
{
	json_t *c = json_pack("{s:{s:s}, s:{}}", "data", "text/plain", text, "metadata");

	if (c && id)
		json_object_set_new(c, "transient", json_pack("{s:s}", "display_id", id));
	run_feed(r, c ? fixture_msg_new(update ? "update_display_data" : "display_data", c, NULL)
	              : NULL);
	json_decref(c);
}

/* The text/plain of display I of RES, or NULL. */
static const char *display_plain(const kbox_result_t *res, size_t i)
{
	return json_string_value(json_object_get(kbox_result_display(res, i), "text/plain"));
}

/* Feed every message of fixture NAME. */
static void run_fixture(run_t *r, const char *name)
{
	json_t *doc = fixture_load(name);
	kbox_error_t err = {0};

	if (!doc) {
		r->feed_failures++;
		return;
	}
	if (fixture_feed(r->cap, doc, &err) != 0) {
		r->feed_failures++;
		r->last_err = err;
	}
	json_decref(doc);
}

/* Finish the capture (without an execution) and return the result (owned by R). */
static kbox_result_t *run_finish(run_t *r)
{
	r->res = kbox_capture_finish(&r->cap, NULL);
	return r->res;
}

/* Capture fixture NAME with budgets MAX_BYTES/MAX_LINES; NULL on failure. */
static kbox_result_t *run_whole(run_t **rp, const char *name, size_t max_bytes, size_t max_lines)
{
	if (run_start(rp, max_bytes, max_lines) != 0)
		return NULL;
	run_fixture(*rp, name);
	return run_finish(*rp);
}

static const char *out_text(const kbox_result_t *res)
{
	return kbox_result_stream(res, KBOX_TEXT_STDOUT)->text;
}

static const char *err_text(const kbox_result_t *res)
{
	return kbox_result_stream(res, KBOX_TEXT_STDERR)->text;
}

/* Is S[0..N) well-formed UTF-8 (no overlongs, surrogates or cut sequences)? */
static bool utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		unsigned c = p[i], need, cp, min;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			need = 1, cp = c & 0x1f, min = 0x80;
		else if ((c & 0xf0) == 0xe0)
			need = 2, cp = c & 0x0f, min = 0x800;
		else if ((c & 0xf8) == 0xf0)
			need = 3, cp = c & 0x07, min = 0x10000;
		else
			return false;
		if (i + need >= n)
			return false;
		for (unsigned k = 1; k <= need; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

/* Path of NAME in DIR, in BUF. */
static const char *in_dir(char *buf, size_t size, const char *dir, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
	return buf;
}

/* Is there a notice in RES containing NEEDLE? */
static bool has_notice(const kbox_result_t *res, const char *needle)
{
	for (size_t i = 0; i < kbox_result_notice_count(res); i++)
		if (strstr(kbox_result_notice(res, i), needle))
			return true;
	return false;
}

static void print_notices(const kbox_result_t *res)
{
	for (size_t i = 0; i < kbox_result_notice_count(res); i++)
		printf("# notice: %s\n", kbox_result_notice(res, i));
}

/* The decoded bytes of MIME in the first iopub entry of fixture NAME of
 * type MSG_TYPE.  Caller frees. */
static unsigned char *fixture_image(const char *name, const char *msg_type, const char *mime,
                                    size_t *len)
{
	json_t *doc = fixture_load(name);
	json_t *entry = doc ? fixture_find(doc, msg_type) : NULL;
	json_t *data = json_object_get(json_object_get(entry, "content"), "data");
	const char *b64 = json_string_value(json_object_get(data, mime));
	unsigned char *bytes = b64 ? fixture_b64decode(b64, len) : NULL;

	json_decref(doc);
	return bytes;
}

/* ---- events ---- */

#define MAX_EVENTS 64

typedef struct {
	size_t n;
	kbox_event_type_t type[MAX_EVENTS];
	kbox_stream_t stream[MAX_EVENTS];
	char text[MAX_EVENTS][32];
	int display[MAX_EVENTS];
} events_t;

static void record_event(void *arg, const kbox_capture_t *cap, const kbox_event_t *ev)
{
	events_t *e = arg;

	(void)cap;
	if (e->n >= MAX_EVENTS)
		return;
	e->type[e->n] = ev->type;
	e->stream[e->n] = ev->stream;
	e->display[e->n] = ev->display;
	snprintf(e->text[e->n], sizeof e->text[e->n], "%.*s", (int)(ev->text ? ev->len : 0),
	         ev->text ? ev->text : "");
	e->n++;
}

/* ==== streams ==== */

TEST(stream_stdout_and_stderr_exact)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "stream_basic", 0, 0);
	const kbox_text_t *out, *err;

	REQUIRE(res);
	out = kbox_result_stream(res, KBOX_TEXT_STDOUT);
	err = kbox_result_stream(res, KBOX_TEXT_STDERR);
	CHECK_STR_EQ(out->text, "hello\n");
	CHECK_INT_EQ(out->total_bytes, 6);
	CHECK_INT_EQ(out->total_lines, 1);
	CHECK(!out->truncated);
	CHECK(out->spill_path == NULL);
	CHECK_STR_EQ(err->text, "warning: careful\n");
	CHECK_INT_EQ(err->total_bytes, 17);
	CHECK_INT_EQ(err->total_lines, 1);
	CHECK(!err->truncated);
	CHECK_INT_EQ(kbox_result_notice_count(res), 0);
	CHECK_INT_EQ(r->feed_failures, 0);
}

TEST(result_status_and_count_taken_from_messages)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "expr_result", 0, 0);

	REQUIRE(res);
	CHECK_INT_EQ(kbox_result_status(res), KBOX_EXEC_OK);
	CHECK_INT_EQ(kbox_result_count(res), 1);
	CHECK_STR_EQ(kbox_result_reason(res), "");
	CHECK(!kbox_result_has_error(res));
	REQUIRE(kbox_result_value_text(res));
	CHECK_STR_EQ(kbox_result_value_text(res)->text, "2");
	CHECK_STR_EQ(json_string_value(json_object_get(kbox_result_value(res), "text/plain")), "2");
	CHECK_STR_EQ(out_text(res), "");
	CHECK_INT_EQ(kbox_result_display_count(res), 0);
	CHECK_INT_EQ(kbox_result_image_count(res), 0);
}

TEST(interleaved_streams_kept_apart)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "interleaved", 0, 0);

	REQUIRE(res);
	CHECK_STR_EQ(out_text(res), "out1\nout2\nout3\n");
	CHECK_STR_EQ(err_text(res), "err1\nerr2\n");
	CHECK_INT_EQ(kbox_result_stream(res, KBOX_TEXT_STDOUT)->total_lines, 3);
	CHECK_INT_EQ(kbox_result_stream(res, KBOX_TEXT_STDERR)->total_lines, 2);
}

TEST(interleaved_stream_events_in_arrival_order)
{
	run_t *r = NULL;
	events_t ev = {0};
	static const char *const want[] = {"out1\n", "err1\n", "out2\n", "err2\n", "out3\n"};

	REQUIRE(run_start(&r, 0, 0) == 0);
	kbox_capture_set_event_cb(r->cap, record_event, &ev);
	run_fixture(r, "interleaved");
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(ev.n, 5);
	for (size_t i = 0; i < 5 && i < ev.n; i++) {
		CHECK_INT_EQ(ev.type[i], KBOX_EV_STREAM);
		CHECK_INT_EQ(ev.stream[i], i % 2 ? KBOX_TEXT_STDERR : KBOX_TEXT_STDOUT);
		CHECK_STR_EQ(ev.text[i], want[i]);
	}
}

TEST(consecutive_stream_messages_merged)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "ab");
	run_stream(r, "stdout", "c\n");
	run_stream(r, "stdout", "d");
	run_stream(r, "stdout", "e\nf");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "abc\nde\nf");
	CHECK_INT_EQ(kbox_result_stream(r->res, KBOX_TEXT_STDOUT)->total_bytes, 8);
	CHECK_INT_EQ(kbox_result_stream(r->res, KBOX_TEXT_STDOUT)->total_lines, 2);
}

TEST(carriage_return_overwrites_from_line_start)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "abc\rX");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "Xbc");
}

TEST(carriage_return_across_messages)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "first\n");
	run_stream(r, "stdout", "abc");
	run_stream(r, "stdout", "\rX");
	run_stream(r, "stdout", "\n");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "first\nXbc\n");
	CHECK_INT_EQ(kbox_result_stream(r->res, KBOX_TEXT_STDOUT)->total_bytes, 10);
}

TEST(carriage_return_newline_is_a_newline)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "a\r\nb\r");
	run_stream(r, "stdout", "\nc\n");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "a\nb\nc\n");
}

TEST(carriage_return_overwrites_multibyte_characters_whole)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "éèê\rab\n");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "abê\n");
}

TEST(progress_fixture_collapses_to_last_state)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "tqdm_progress", 0, 0);
	const kbox_text_t *out;

	REQUIRE(res);
	out = kbox_result_stream(res, KBOX_TEXT_STDOUT);
	CHECK_STR_EQ(out->text, "100%\n");
	CHECK_INT_EQ(out->total_bytes, 5);
	CHECK_INT_EQ(out->total_lines, 1);
	CHECK(!out->truncated);
	CHECK_STR_EQ(err_text(res), "");
}

TEST(backspace_moves_back_one_character)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "abc\bX\n");
	run_stream(r, "stdout", "\bY\n");       /* at the line start: stays */
	run_stream(r, "stdout", "é\bZ\n");      /* back over one whole character */
	run_stream(r, "stdout", "ab\b\b\bc\n"); /* never before the line start */
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "abX\nY\nZ\ncb\n");
}

/* ==== clear_output ==== */

TEST(clear_output_clears_streams_and_displays)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "before\n");
	run_stream(r, "stderr", "warn\n");
	run_display(r, false, "shown", NULL);
	run_json(r, "clear_output", "{\"wait\":false}");
	run_stream(r, "stdout", "after\n");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "after\n");
	CHECK_INT_EQ(kbox_result_stream(r->res, KBOX_TEXT_STDOUT)->total_bytes, 6);
	CHECK_STR_EQ(err_text(r->res), "");
	CHECK_INT_EQ(kbox_result_display_count(r->res), 0);
}

TEST(clear_output_clears_a_partial_line)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "50%");
	run_json(r, "clear_output", "{\"wait\":false}");
	run_stream(r, "stdout", "done\n");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "done\n");
}

TEST(clear_output_forgets_images_of_cleared_displays)
{
	run_t *r = NULL;
	char path[4096];
	struct stat st;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_json(r, "execute_input", "{\"code\":\"\",\"execution_count\":2}");
	run_json(r, "display_data", "{\"data\":{\"image/png\":\"" PNG_1X1 "\"},\"metadata\":{}}");
	run_json(r, "clear_output", "{\"wait\":false}");
	run_json(r, "display_data",
	         "{\"data\":{\"image/svg+xml\":\"<svg xmlns='http://www.w3.org/2000/svg'/>\"},"
	         "\"metadata\":{}}");
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(kbox_result_display_count(r->res), 1);
	REQUIRE(kbox_result_image_count(r->res) == 1);
	CHECK_STR_EQ(kbox_result_image(r->res, 0)->mime, "image/svg+xml");
	CHECK_INT_EQ(kbox_result_image(r->res, 0)->display, 0);
	/* numbering goes on, so the later image never replaces the earlier file */
	CHECK_STR_EQ(kbox_result_image(r->res, 0)->path,
	             in_dir(path, sizeof path, r->dir, "2-2.svg"));
	CHECK(stat(in_dir(path, sizeof path, r->dir, "2-1.png"), &st) == 0);
}

TEST(clear_output_wait_clears_only_when_output_follows)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "old\n");
	run_json(r, "clear_output", "{\"wait\":true}");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "old\n");

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "old\n");
	run_display(r, false, "old display", NULL);
	run_json(r, "clear_output", "{\"wait\":true}");
	run_stream(r, "stdout", "new\n");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "new\n");
	CHECK_INT_EQ(kbox_result_display_count(r->res), 0);
}

TEST(clear_output_wait_fixture_ends_with_last_output)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "clear_output_wait", 0, 0);

	REQUIRE(res);
	CHECK_STR_EQ(out_text(res), "4\n");
	CHECK_INT_EQ(kbox_result_stream(res, KBOX_TEXT_STDOUT)->total_bytes, 2);
	CHECK_INT_EQ(kbox_result_stream(res, KBOX_TEXT_STDOUT)->total_lines, 1);
}

TEST(clear_output_wait_emits_clear_before_next_output)
{
	run_t *r = NULL;
	events_t ev = {0};

	REQUIRE(run_start(&r, 0, 0) == 0);
	kbox_capture_set_event_cb(r->cap, record_event, &ev);
	run_fixture(r, "clear_output_wait");
	REQUIRE(run_finish(r));
	REQUIRE(ev.n == 10);
	for (size_t i = 0; i < 5; i++) {
		char want[8];

		snprintf(want, sizeof want, "%zu\n", i);
		CHECK_INT_EQ(ev.type[2 * i], KBOX_EV_CLEAR);
		CHECK_INT_EQ(ev.type[2 * i + 1], KBOX_EV_STREAM);
		CHECK_STR_EQ(ev.text[2 * i + 1], want);
	}
}

/* ==== displays ==== */

TEST(update_display_data_replaces_same_display_id)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "display_update", 0, 0);
	json_t *doc = defer(decref_cb, fixture_load("display_update"));
	const char *id;

	REQUIRE(res && doc);
	id = json_string_value(json_object_get(
	        json_object_get(json_object_get(fixture_find(doc, "display_data"), "content"),
	                        "transient"),
	        "display_id"));
	REQUIRE(id);
	CHECK_INT_EQ(kbox_result_display_count(res), 1);
	CHECK_STR_EQ(display_plain(res, 0), "'second'");
	CHECK_STR_EQ(kbox_result_display_id(res, 0), id);
}

TEST(update_display_data_emits_display_event_with_index)
{
	run_t *r = NULL;
	events_t ev = {0};

	REQUIRE(run_start(&r, 0, 0) == 0);
	kbox_capture_set_event_cb(r->cap, record_event, &ev);
	run_fixture(r, "display_update");
	REQUIRE(run_finish(r));
	REQUIRE(ev.n == 2);
	CHECK_INT_EQ(ev.type[0], KBOX_EV_DISPLAY);
	CHECK_INT_EQ(ev.display[0], 0);
	CHECK_INT_EQ(ev.type[1], KBOX_EV_DISPLAY);
	CHECK_INT_EQ(ev.display[1], 0);
}

TEST(update_display_data_leaves_other_displays)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_display(r, false, "a", "A");
	run_display(r, false, "plain", NULL);
	run_display(r, false, "b", "B");
	run_display(r, true, "b2", "B");
	run_display(r, true, "nobody", "C");
	REQUIRE(run_finish(r));
	/* the update of an id no display of this execution has is of an
	 * earlier one's: kept, and said to be that */
	REQUIRE(kbox_result_display_count(r->res) == 4);
	CHECK_STR_EQ(display_plain(r->res, 0), "a");
	CHECK_STR_EQ(display_plain(r->res, 1), "plain");
	CHECK_STR_EQ(display_plain(r->res, 2), "b2");
	CHECK_STR_EQ(display_plain(r->res, 3), "nobody");
	CHECK_STR_EQ(kbox_result_display_id(r->res, 0), "A");
	CHECK(kbox_result_display_id(r->res, 1) == NULL);
	CHECK_STR_EQ(kbox_result_display_id(r->res, 2), "B");
	CHECK_STR_EQ(kbox_result_display_id(r->res, 3), "C");
	CHECK(!kbox_result_display_updates_earlier(r->res, 2));
	CHECK(kbox_result_display_updates_earlier(r->res, 3));
}

TEST(display_data_of_an_id_already_shown_updates_the_earlier_output_too)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_display(r, false, "first", "X");
	run_display(r, false, "plain", NULL);
	run_display(r, false, "second", "X");
	REQUIRE(run_finish(r));
	/* as nbclient: both outputs of id X show the newest, both are kept */
	REQUIRE(kbox_result_display_count(r->res) == 3);
	CHECK_STR_EQ(display_plain(r->res, 0), "second");
	CHECK_STR_EQ(display_plain(r->res, 1), "plain");
	CHECK_STR_EQ(display_plain(r->res, 2), "second");
	CHECK_STR_EQ(kbox_result_display_id(r->res, 0), "X");
	CHECK_STR_EQ(kbox_result_display_id(r->res, 2), "X");
}

TEST(updated_image_display_lists_only_the_new_image)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_json(r, "display_data",
	         "{\"data\":{\"image/png\":\"" PNG_1X1 "\"},\"metadata\":{},"
	         "\"transient\":{\"display_id\":\"fig\"}}");
	run_json(r, "update_display_data",
	         "{\"data\":{\"image/svg+xml\":\"<svg xmlns='http://www.w3.org/2000/svg'/>\"},"
	         "\"metadata\":{},\"transient\":{\"display_id\":\"fig\"}}");
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(kbox_result_display_count(r->res), 1);
	REQUIRE(kbox_result_image_count(r->res) == 1);
	CHECK_STR_EQ(kbox_result_image(r->res, 0)->mime, "image/svg+xml");
}

TEST(displays_beyond_the_limit_are_counted_not_kept)
{
	run_t *r = NULL;
	char want[64];

	REQUIRE(run_start(&r, 0, 0) == 0);
	for (int i = 0; i < KBOX_CAPTURE_MAX_DISPLAYS + 3; i++)
		run_display(r, false, "x", NULL);
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(kbox_result_display_count(r->res), KBOX_CAPTURE_MAX_DISPLAYS);
	snprintf(want, sizeof want, "3 displays beyond the limit of %d", KBOX_CAPTURE_MAX_DISPLAYS);
	CHECK(has_notice(r->res, want));
	print_notices(r->res);
}

TEST(dataframe_bundle_keeps_html_value_text_is_plain)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "dataframe", 0, 0);
	json_t *doc = defer(decref_cb, fixture_load("dataframe"));
	json_t *sent, *value;

	REQUIRE(res && doc);
	sent = json_object_get(json_object_get(fixture_find(doc, "execute_result"), "content"),
	                       "data");
	value = kbox_result_value(res);
	REQUIRE(value);
	CHECK(json_equal(json_object_get(value, "text/html"), json_object_get(sent, "text/html")));
	CHECK_CONTAINS(json_string_value(json_object_get(value, "text/html")), "<table");
	CHECK_STR_EQ(json_string_value(json_object_get(value, "text/plain")),
	             "   a  b\n0  1  x\n1  2  y\n2  3  z");
	CHECK_STR_EQ(kbox_result_value_text(res)->text, "   a  b\n0  1  x\n1  2  y\n2  3  z");
	CHECK_INT_EQ(kbox_result_value_text(res)->total_lines, 3);
	CHECK(!kbox_result_value_text(res)->truncated);
}

TEST(oversized_mime_value_left_out_of_bundle)
{
	run_t *r = NULL;
	size_t n = 70000;
	char *html = malloc(n + 1);
	json_t *c;

	REQUIRE(html);
	memset(html, 'h', n);
	html[n] = '\0';
	c = defer(decref_cb, json_pack("{s:{s:s, s:s}, s:{}}", "data", "text/html", html,
	                               "text/plain", "small", "metadata"));
	free(html);
	REQUIRE(c);
	REQUIRE(run_start(&r, 0, 0) == 0);
	run_feed(r, fixture_msg_new("display_data", c, NULL));
	REQUIRE(run_finish(r));
	REQUIRE(kbox_result_display_count(r->res) == 1);
	CHECK_STR_EQ(display_plain(r->res, 0), "small");
	CHECK_INT_EQ(json_integer_value(json_object_get(
	                     json_object_get(kbox_result_display(r->res, 0), "text/html"),
	                     "omitted_bytes")),
	             70000);
}

/* ==== images ==== */

/* Check that IMG is a file DIR/NAME holding exactly EXPECT (LEN bytes). */
static void check_image_file(const kbox_image_t *img, const char *dir, const char *name,
                             const unsigned char *expect, size_t len)
{
	char path[4096];
	size_t got_len = 0;
	char *got;

	in_dir(path, sizeof path, dir, name);
	CHECK_STR_EQ(img->path, path);
	CHECK_INT_EQ(img->bytes, len);
	got = fixture_read_file(path, &got_len);
	CHECK(got != NULL);
	if (!got)
		return;
	CHECK_INT_EQ(got_len, len);
	CHECK(got_len == len && memcmp(got, expect, len) == 0);
	free(got);
}

TEST(png_written_with_exact_size)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "plot_one", 0, 0);
	const kbox_image_t *img;
	size_t len = 0;
	unsigned char *png = defer(free,
	                           fixture_image("plot_one", "display_data", "image/png", &len));
	char path[4096];
	char *file;
	size_t flen = 0;

	REQUIRE(res && png);
	REQUIRE(kbox_result_image_count(res) == 1);
	img = kbox_result_image(res, 0);
	CHECK_STR_EQ(img->mime, "image/png");
	CHECK_INT_EQ(img->width, 200);
	CHECK_INT_EQ(img->height, 150);
	CHECK_INT_EQ(img->display, 0);
	check_image_file(img, r->dir, "1-1.png", png, len);
	file = fixture_read_file(in_dir(path, sizeof path, r->dir, "1-1.png"), &flen);
	CHECK(file && flen >= 8 && memcmp(file, PNG_SIG, 8) == 0);
	free(file);
	CHECK_INT_EQ(kbox_result_notice_count(res), 0);
	CHECK_INT_EQ(r->feed_failures, 0);
}

TEST(display_bundle_references_image_file)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "plot_one", 0, 0);
	json_t *bundle, *ref;
	char path[4096];

	REQUIRE(res);
	REQUIRE(kbox_result_display_count(res) == 1);
	bundle = kbox_result_display(res, 0);
	CHECK_STR_EQ(json_string_value(json_object_get(bundle, "text/plain")),
	             "<Figure size 200x150 with 1 Axes>");
	ref = json_object_get(bundle, "image/png");
	REQUIRE(json_is_object(ref));
	CHECK_STR_EQ(json_string_value(json_object_get(ref, "path")),
	             in_dir(path, sizeof path, r->dir, "1-1.png"));
	CHECK_INT_EQ(json_integer_value(json_object_get(ref, "width")), 200);
	CHECK_INT_EQ(json_integer_value(json_object_get(ref, "height")), 150);
	CHECK_INT_EQ(json_integer_value(json_object_get(ref, "bytes")),
	             kbox_result_image(res, 0)->bytes);
}

TEST(two_figures_two_files)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "plot_two", 0, 0);
	const kbox_image_t *a, *b;
	char path[4096];
	struct stat st;

	REQUIRE(res);
	REQUIRE(kbox_result_image_count(res) == 2);
	CHECK_INT_EQ(kbox_result_display_count(res), 2);
	a = kbox_result_image(res, 0);
	b = kbox_result_image(res, 1);
	CHECK_STR_EQ(a->path, in_dir(path, sizeof path, r->dir, "1-1.png"));
	CHECK_INT_EQ(a->width, 200);
	CHECK_INT_EQ(a->height, 150);
	CHECK_INT_EQ(a->display, 0);
	CHECK(stat(path, &st) == 0 && (size_t)st.st_size == a->bytes);
	CHECK_STR_EQ(b->path, in_dir(path, sizeof path, r->dir, "1-2.png"));
	CHECK_INT_EQ(b->width, 150);
	CHECK_INT_EQ(b->height, 100);
	CHECK_INT_EQ(b->display, 1);
	CHECK(stat(path, &st) == 0 && (size_t)st.st_size == b->bytes);
}

TEST(svg_written_with_unknown_size)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "svg_display", 0, 0);
	json_t *doc = defer(decref_cb, fixture_load("svg_display"));
	const char *svg;
	const kbox_image_t *img;

	REQUIRE(res && doc);
	svg = json_string_value(json_object_get(
	        json_object_get(json_object_get(fixture_find(doc, "display_data"), "content"),
	                        "data"),
	        "image/svg+xml"));
	REQUIRE(svg);
	REQUIRE(kbox_result_image_count(res) == 1);
	img = kbox_result_image(res, 0);
	CHECK_STR_EQ(img->mime, "image/svg+xml");
	CHECK_INT_EQ(img->width, -1);
	CHECK_INT_EQ(img->height, -1);
	check_image_file(img, r->dir, "1-1.svg", (const unsigned char *)svg, strlen(svg));
}

/* ==== SVG with active content: written as text, and said so ==== */

/* Feed a display_data of the SVG text SVG (and a text/plain). */
static void run_svg(run_t *r, const char *svg)
{
	json_t *c = json_pack("{s:{s:s, s:s}, s:{}}", "data", "image/svg+xml", svg, "text/plain",
	                      "<IPython.core.display.SVG object>", "metadata");

	run_feed(r, c ? fixture_msg_new("display_data", c, NULL) : NULL);
	json_decref(c);
}

TEST(svg_with_a_script_is_written_as_text_and_says_why)
{
	static const char svg[] = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" "
	                          "height=\"10\"><script>alert(1)</script></svg>";
	run_t *r = NULL;
	const kbox_image_t *img;
	json_t *ref;
	char path[4096];
	struct stat st;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_svg(r, svg);
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(r->feed_failures, 0);
	REQUIRE(kbox_result_image_count(r->res) == 1);
	img = kbox_result_image(r->res, 0);
	CHECK_STR_EQ(img->mime, "image/svg+xml");
	CHECK_STR_EQ(img->saved_as_text, "a <script> element");
	/* the file holds the SVG as sent, under a name a browser shows as text */
	check_image_file(img, r->dir, "0-1.svg.txt", (const unsigned char *)svg, strlen(svg));
	CHECK(stat(in_dir(path, sizeof path, r->dir, "0-1.svg"), &st) != 0 && errno == ENOENT);
	ref = json_object_get(kbox_result_display(r->res, 0), "image/svg+xml");
	CHECK_STR_EQ(json_string_value(json_object_get(ref, "path")), img->path);
	CHECK_STR_EQ(json_string_value(json_object_get(ref, "saved_as_text")),
	             "a <script> element");
	CHECK_INT_EQ(kbox_result_notice_count(r->res), 0);
}

/* What a matplotlib SVG holds (an XML declaration, a DOCTYPE without
 * declarations, RDF metadata, a style sheet, fragment links and url(#…),
 * an embedded PNG) is inert: it stays NAME.svg. */
TEST(svg_without_active_content_is_written_as_svg)
{
	static const char svg[] =
	        "<?xml version=\"1.0\" encoding=\"utf-8\" standalone=\"no\"?>\n"
	        "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\"\n"
	        "  \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n"
	        "<svg xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"460.8pt\" "
	        "xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\">\n"
	        " <metadata><rdf:RDF xmlns:dc=\"http://purl.org/dc/elements/1.1/\" "
	        "xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\"><dc:type "
	        "rdf:resource=\"http://purl.org/dc/dcmitype/StillImage\"/></rdf:RDF></metadata>\n"
	        " <defs><style type=\"text/css\">*{stroke-linejoin: round; stroke-linecap: "
	        "butt}</style><path id=\"m1\" d=\"M 0 0 L 0 3.5\"/></defs>\n"
	        " <!-- a <script> in a comment is no script -->\n"
	        " <g clip-path=\"url(#p1)\" style=\"fill: #ffffff\"><use xlink:href=\"#m1\" x=\"1\"/>"
	        "<image xlink:href=\"data:image/png;base64,\niVBORw0KGgo=\" width=\"4\"/>"
	        "<text>1 &lt; 2 &amp;&#x20;url</text></g>\n"
	        "</svg>\n";
	run_t *r = NULL;
	const kbox_image_t *img;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_svg(r, svg);
	REQUIRE(run_finish(r));
	REQUIRE(kbox_result_image_count(r->res) == 1);
	img = kbox_result_image(r->res, 0);
	CHECK(img->saved_as_text == NULL);
	check_image_file(img, r->dir, "0-1.svg", (const unsigned char *)svg, strlen(svg));
	CHECK(json_object_get(json_object_get(kbox_result_display(r->res, 0), "image/svg+xml"),
	                      "saved_as_text") == NULL);
}

/* The DOCTYPEs of SVG 1.1 and SVG 1.0, in either quotes, with any white
 * space between their parts, are inert. */
TEST(svg_with_the_w3c_doctype_of_svg_1_1_or_1_0_is_written_as_svg)
{
	static const char *const svgs[] = {
	        "<!DOCTYPE svg PUBLIC '-//W3C//DTD SVG 1.1//EN'\n\t"
	        "'http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd' ><svg "
	        "xmlns='http://www.w3.org/2000/svg'/>",
	        "<!DOCTYPE  svg  PUBLIC \"-//W3C//DTD SVG 1.0//EN\" "
	        "\"http://www.w3.org/TR/2001/REC-SVG-20010904/DTD/svg10.dtd\"><svg "
	        "xmlns='http://www.w3.org/2000/svg'/>",
	};

	for (size_t i = 0; i < sizeof svgs / sizeof svgs[0]; i++) {
		run_t *r = NULL;
		REQUIRE(run_start(&r, 0, 0) == 0);
		run_svg(r, svgs[i]);
		REQUIRE(run_finish(r));
		REQUIRE(kbox_result_image_count(r->res) == 1);
		CHECK(kbox_result_image(r->res, 0)->saved_as_text == NULL);
	}
}

/* Each kind of active content, named; each SVG is written as text. */
TEST(svg_active_content_of_each_kind_is_named)
{
	static const struct {
		const char *body, *why;
	} cases[] = {
	        {"<script>alert(1)</script>", "a <script> element"},
	        {"<svg:SCRIPT xmlns:svg='http://www.w3.org/2000/svg'>a()</svg:SCRIPT>",
	         "a <script> element"},
	        {"<foreignObject><p xmlns='http://www.w3.org/1999/xhtml'>x</p></foreignObject>",
	         "a <foreignObject> element"},
	        {"<h:iframe xmlns:h='http://www.w3.org/1999/xhtml' srcdoc='x'/>",
	         "an <iframe> element"},
	        {"<embed src='#a'/>", "an <embed> element"},
	        {"<h:meta xmlns:h='http://www.w3.org/1999/xhtml' http-equiv='refresh' content='0'/>",
	         "a <meta> element"},
	        {"<rect width='5' height='5' onclick='alert(1)'/>", "an event handler attribute"},
	        {"<rect x:ONLOAD = 'alert(1)'/>", "an event handler attribute"},
	        {"<a href='javascript:alert(1)'><text>x</text></a>", "a javascript: URL"},
	        {"<a xlink:href='&#106;ava&#x09;script:alert(1)'><text>x</text></a>",
	         "a javascript: URL"},
	        {"<image href='http://evil.example/t.png'/>", "a link out of the image"},
	        {"<image href='file:///etc/passwd'/>", "a link out of the image"},
	        {"<use href='other.svg#a'/>", "a link out of the image"},
	        {"<image href='data:image/svg+xml;base64,PHN2Zz4='/>", "a link out of the image"},
	        {"<a><set attributeName='href' to='#b'/><text>x</text></a>",
	         "an animation of a link or an event handler"},
	        {"<animate attributeName='xlink:HREF' values='#a;#b'/>",
	         "an animation of a link or an event handler"},
	        {"<rect fill='url(http://evil.example/g.svg#g)'/>", "a url() out of the image"},
	        {"<rect style='fill: url( \"//evil.example/x\")'/>", "a url() out of the image"},
	        {"<style>@import 'http://evil.example/x.css';</style>",
	         "an @import in a style sheet"},
	        {"<style><![CDATA[ rect { fill: url(http://e/x) } ]]></style>",
	         "a url() out of the image"},
	        {"<style><![CDATA[ a & b; @import url(#a) ]]></style>",
	         "an @import in a style sheet"},
	        {"<style>rect { fill: u\\72l(http://e/x) }</style>", "an escape in a style sheet"},
	        {"<g xml:base='http://evil.example/'><use href='#a'/></g>",
	         "a link out of the image"},
	        {"<style>rect { fill: u&#114;l(http://e/x) }</style>", "a url() out of the image"},
	        {"<style>rect { background: image-set('x.png' 1x) }</style>",
	         "an image() or image-set() in a style sheet"},
	        {"<rect style='-moz-binding: none'/>", "a script in a style sheet"},
	        {"<rect title='&nbsp;'/>", "an entity reference"},
	        {"<rect onclick=alert(1)/>", "markup that is not well-formed"},
	        {"<rect width='5'", "markup that is not well-formed"},
	        {"<!-- <script>", "markup that is not well-formed"},
	        {"<!ENTITY x 'y'>", "a markup declaration"},
	        {"<?xml-stylesheet href='x.xsl' type='text/xsl'?>", "a processing instruction"},
	        {"<text>a\x0b</text>", "control characters"},
	};
	char svg[512];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		run_t *r = NULL;
		const kbox_image_t *img;

		snprintf(svg, sizeof svg,
		         "<svg xmlns='http://www.w3.org/2000/svg' "
		         "xmlns:xlink='http://www.w3.org/1999/xlink'>%s</svg>",
		         cases[i].body);
		REQUIRE(run_start(&r, 0, 0) == 0);
		run_svg(r, svg);
		REQUIRE(run_finish(r));
		REQUIRE(kbox_result_image_count(r->res) == 1);
		img = kbox_result_image(r->res, 0);
		if (!img->saved_as_text || strcmp(img->saved_as_text, cases[i].why) != 0)
			printf("# case %zu: %s\n", i, cases[i].body);
		CHECK_STR_EQ(img->saved_as_text, cases[i].why);
		CHECK(img->path && strlen(img->path) > 12 &&
		      strcmp(img->path + strlen(img->path) - 12, "/0-1.svg.txt") == 0);
	}
}

/* Before the document: an internal DTD subset (entities), a DTD but SVG
 * 1.1's and 1.0's (an external one, which could declare entities or be
 * fetched), and an encoding other than UTF-8, are not read. */
TEST(svg_with_a_dtd_subset_or_another_encoding_is_written_as_text)
{
	static const struct {
		const char *svg, *why;
	} cases[] = {
	        {"<!DOCTYPE svg [<!ENTITY x '&#60;script&#62;'>]><svg "
	         "xmlns='http://www.w3.org/2000/svg'>&x;</svg>",
	         "a DOCTYPE with declarations"},
	        {"<!DOCTYPE svg PUBLIC '-//W3C//DTD SVG 1.1//EN' "
	         "'http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd' [<!ENTITY x 'y'>]><svg "
	         "xmlns='http://www.w3.org/2000/svg'/>",
	         "a DOCTYPE with declarations"},
	        {"<!DOCTYPE svg SYSTEM 'http://evil.example/x.dtd'><svg "
	         "xmlns='http://www.w3.org/2000/svg'/>",
	         "a DOCTYPE other than SVG 1.1's or 1.0's"},
	        {"<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" "
	         "\"http://evil.example/svg11.dtd\"><svg xmlns='http://www.w3.org/2000/svg'/>",
	         "a DOCTYPE other than SVG 1.1's or 1.0's"},
	        {"<!DOCTYPE svg PUBLIC \"-//Evil//DTD X//EN\" "
	         "\"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\"><svg "
	         "xmlns='http://www.w3.org/2000/svg'/>",
	         "a DOCTYPE other than SVG 1.1's or 1.0's"},
	        {"<!DOCTYPE svg SYSTEM \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\"><svg "
	         "xmlns='http://www.w3.org/2000/svg'/>",
	         "a DOCTYPE other than SVG 1.1's or 1.0's"},
	        {"<!DOCTYPE html PUBLIC \"-//W3C//DTD SVG 1.1//EN\" "
	         "\"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\"><svg "
	         "xmlns='http://www.w3.org/2000/svg'/>",
	         "a DOCTYPE other than SVG 1.1's or 1.0's"},
	        {"<!DOCTYPE svg><svg xmlns='http://www.w3.org/2000/svg'/>",
	         "a DOCTYPE other than SVG 1.1's or 1.0's"},
	        {"<?xml version='1.0' encoding='UTF-16'?><svg xmlns='http://www.w3.org/2000/svg'/>",
	         "an encoding other than UTF-8"},
	        {" <?xml version='1.0'?><svg xmlns='http://www.w3.org/2000/svg'/>",
	         "a processing instruction"},
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		run_t *r = NULL;
		REQUIRE(run_start(&r, 0, 0) == 0);
		run_svg(r, cases[i].svg);
		REQUIRE(run_finish(r));
		REQUIRE(kbox_result_image_count(r->res) == 1);
		CHECK_STR_EQ(kbox_result_image(r->res, 0)->saved_as_text, cases[i].why);
	}
}

TEST(svg_with_a_script_not_written_without_outputs_dir_is_not_called_text)
{
	kbox_capture_opts_t o = {0};
	kbox_capture_t *cap = kbox_capture_new(&o, NULL);
	kbox_result_t *res;
	json_t *c = json_pack("{s:{s:s}, s:{}}", "data", "image/svg+xml",
	                      "<svg xmlns='http://www.w3.org/2000/svg'><script>a()</script></svg>",
	                      "metadata");
	kbox_msg_t *m = c ? fixture_msg_new("display_data", c, NULL) : NULL;

	json_decref(c);
	REQUIRE(cap && m);
	fixture_feed_msg(cap, m, NULL);
	res = defer(result_cb, kbox_capture_finish(&cap, NULL));
	REQUIRE(res && kbox_result_image_count(res) == 1);
	CHECK(kbox_result_image(res, 0)->path == NULL);
	CHECK(kbox_result_image(res, 0)->saved_as_text == NULL);
}

TEST(jpeg_written_with_size_from_header)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "jpeg_display", 0, 0);
	size_t len = 0;
	unsigned char *jpg = defer(
	        free, fixture_image("jpeg_display", "display_data", "image/jpeg", &len));
	const kbox_image_t *img;

	REQUIRE(res && jpg);
	REQUIRE(kbox_result_image_count(res) == 1);
	img = kbox_result_image(res, 0);
	CHECK_STR_EQ(img->mime, "image/jpeg");
	CHECK_INT_EQ(img->width, 24);
	CHECK_INT_EQ(img->height, 16);
	check_image_file(img, r->dir, "1-1.jpg", jpg, len);
}

TEST(image_in_execute_result_written)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "image_result", 0, 0);
	size_t len = 0;
	unsigned char *png = defer(
	        free, fixture_image("image_result", "execute_result", "image/png", &len));
	const kbox_image_t *img;
	json_t *ref;
	char path[4096];

	REQUIRE(res && png);
	REQUIRE(kbox_result_image_count(res) == 1);
	img = kbox_result_image(res, 0);
	CHECK_INT_EQ(img->display, -1);
	CHECK_INT_EQ(img->width, 40);
	CHECK_INT_EQ(img->height, 30);
	check_image_file(img, r->dir, "1-1.png", png, len);
	REQUIRE(kbox_result_value(res));
	ref = json_object_get(kbox_result_value(res), "image/png");
	CHECK_STR_EQ(json_string_value(json_object_get(ref, "path")),
	             in_dir(path, sizeof path, r->dir, "1-1.png"));
	CHECK_STR_EQ(kbox_result_value_text(res)->text,
	             "<PIL.Image.Image image mode=RGB size=40x30>");
	CHECK_INT_EQ(kbox_result_display_count(res), 0);
}

TEST(prefix_names_image_and_spill_files)
{
	run_t *r = NULL;
	char path[4096];

	REQUIRE(run_start_prefix(&r, 1000, 20, "s7-") == 0);
	run_fixture(r, "plot_one");
	run_fixture(r, "large_print");
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(r->feed_failures, 0);
	REQUIRE(kbox_result_image_count(r->res) == 1);
	CHECK_STR_EQ(kbox_result_image(r->res, 0)->path,
	             in_dir(path, sizeof path, r->dir, "s7-1-1.png"));
	CHECK_STR_EQ(kbox_result_stream(r->res, KBOX_TEXT_STDOUT)->spill_path,
	             in_dir(path, sizeof path, r->dir, "s7-1-stdout.txt"));
}

TEST(without_outputs_dir_images_are_listed_not_written)
{
	kbox_result_t *res = defer(result_cb, fixture_capture("plot_two", NULL, NULL));
	const kbox_image_t *img;

	REQUIRE(res);
	REQUIRE(kbox_result_image_count(res) == 2);
	img = kbox_result_image(res, 0);
	CHECK(img->path == NULL);
	CHECK_INT_EQ(img->width, 200);
	CHECK_INT_EQ(img->height, 150);
	CHECK(img->bytes > 8);
	CHECK(kbox_result_image(res, 1)->path == NULL);
	CHECK_INT_EQ(kbox_result_image(res, 1)->width, 150);
}

TEST(invalid_base64_image_is_noticed_not_written)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_json(r, "display_data",
	         "{\"data\":{\"image/png\":\"***not base64***\"},\"metadata\":{}}");
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(kbox_result_image_count(r->res), 0);
	CHECK(has_notice(r->res, "not valid base64"));
	CHECK_INT_EQ(fixture_dir_entries(r->dir), 0);
}

/* ==== planted links ==== */

/* Make DIR2 with a file "victim" holding "original\n"; its path in BUF. */
static char *make_victim(char *buf, size_t size)
{
	char *dir = fixture_mkdtemp("victim");
	FILE *f;

	if (!dir)
		return NULL;
	in_dir(buf, size, dir, "victim");
	f = fopen(buf, "w");
	if (f) {
		fputs("original\n", f);
		fclose(f);
	}
	return dir;
}

static bool victim_intact(const char *path)
{
	size_t len = 0;
	char *s = fixture_read_file(path, &len);
	bool ok = s && len == 9 && memcmp(s, "original\n", 9) == 0;

	free(s);
	return ok;
}

TEST(symlink_at_image_path_is_not_followed)
{
	run_t *r = NULL;
	char victim[4096], lpath[4096];
	char *vdir = defer(rmdir_cb, make_victim(victim, sizeof victim));
	struct stat st;

	REQUIRE(vdir);
	REQUIRE(run_start(&r, 0, 0) == 0);
	in_dir(lpath, sizeof lpath, r->dir, "1-1.png");
	REQUIRE(symlink(victim, lpath) == 0);
	run_fixture(r, "plot_one");
	REQUIRE(run_finish(r));
	CHECK(victim_intact(victim));
	CHECK(lstat(lpath, &st) == 0 && S_ISLNK(st.st_mode));
	REQUIRE(kbox_result_image_count(r->res) == 1);
	CHECK(kbox_result_image(r->res, 0)->path == NULL);
	CHECK_INT_EQ(kbox_result_image(r->res, 0)->width, 200);
	CHECK(has_notice(r->res, "1-1.png"));
	CHECK(has_notice(r->res, "symbolic link"));
	CHECK_INT_EQ(r->feed_failures, 1);
	print_notices(r->res);
}

TEST(dangling_symlink_at_image_path_is_not_followed)
{
	run_t *r = NULL;
	char target[4096], lpath[4096];
	char *vdir = defer(rmdir_cb, fixture_mkdtemp("victim"));
	struct stat st;

	REQUIRE(vdir);
	in_dir(target, sizeof target, vdir, "created.png");
	REQUIRE(run_start(&r, 0, 0) == 0);
	in_dir(lpath, sizeof lpath, r->dir, "1-1.png");
	REQUIRE(symlink(target, lpath) == 0);
	run_fixture(r, "plot_one");
	REQUIRE(run_finish(r));
	CHECK(lstat(target, &st) != 0 && errno == ENOENT);
	REQUIRE(kbox_result_image_count(r->res) == 1);
	CHECK(kbox_result_image(r->res, 0)->path == NULL);
	CHECK(has_notice(r->res, "symbolic link"));
}

TEST(hard_link_at_image_path_is_not_written_through)
{
	run_t *r = NULL;
	char victim[4096], lpath[4096];
	char *vdir = defer(rmdir_cb, make_victim(victim, sizeof victim));

	REQUIRE(vdir);
	REQUIRE(run_start(&r, 0, 0) == 0);
	in_dir(lpath, sizeof lpath, r->dir, "1-1.png");
	REQUIRE(link(victim, lpath) == 0);
	run_fixture(r, "plot_one");
	REQUIRE(run_finish(r));
	CHECK(victim_intact(victim));
	REQUIRE(kbox_result_image_count(r->res) == 1);
	CHECK(kbox_result_image(r->res, 0)->path == NULL);
	CHECK(has_notice(r->res, "1-1.png"));
}

TEST(symlink_at_spill_path_is_not_followed)
{
	run_t *r = NULL;
	char victim[4096], lpath[4096];
	char *vdir = defer(rmdir_cb, make_victim(victim, sizeof victim));
	const kbox_text_t *out;

	REQUIRE(vdir);
	REQUIRE(run_start(&r, 1000, 20) == 0);
	in_dir(lpath, sizeof lpath, r->dir, "1-stdout.txt");
	REQUIRE(symlink(victim, lpath) == 0);
	run_fixture(r, "large_print");
	REQUIRE(run_finish(r));
	CHECK(victim_intact(victim));
	out = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	CHECK(out->truncated);
	CHECK(out->spill_path == NULL);
	CHECK_INT_EQ(out->total_bytes, 48893);
	CHECK(has_notice(r->res, "1-stdout.txt"));
	CHECK_CONTAINS(out->text, "[... 48722 bytes in 4980 lines left out ...]\n");
}

/* ==== errors ==== */

TEST(error_fields_exact_traceback_stripped)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "error_in_function", 0, 0);
	json_t *doc = defer(decref_cb, fixture_load("error_in_function"));
	const kbox_text_t *tb;

	REQUIRE(res && doc);
	CHECK(kbox_result_has_error(res));
	CHECK_STR_EQ(kbox_result_ename(res, NULL), "ZeroDivisionError");
	CHECK_STR_EQ(kbox_result_evalue(res, NULL), "division by zero");
	tb = kbox_result_traceback(res);
	REQUIRE(tb && tb->text);
	CHECK(strchr(tb->text, '\033') == NULL);
	CHECK_CONTAINS(tb->text, "divide(a, b)");
	CHECK_CONTAINS(tb->text, "----> 2     return a / b\n");
	CHECK_CONTAINS(tb->text, "Traceback (most recent call last)");
	CHECK(strncmp(tb->text, "-----", 5) == 0);
	CHECK(strlen(tb->text) >= 36 && strcmp(tb->text + strlen(tb->text) - 36,
	                                       "ZeroDivisionError: division by zero\n") == 0);
	CHECK(!tb->truncated);
	CHECK_INT_EQ(tb->total_bytes, strlen(tb->text));
	CHECK(json_equal(kbox_result_traceback_raw(res),
	                 json_object_get(json_object_get(fixture_find(doc, "error"), "content"),
	                                 "traceback")));
}

TEST(error_sets_status_error_without_execution)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "error_in_function", 0, 0);

	REQUIRE(res);
	CHECK_INT_EQ(kbox_result_status(res), KBOX_EXEC_ERROR);
	CHECK_INT_EQ(kbox_result_count(res), 1);
	CHECK(kbox_result_value(res) == NULL);
	CHECK(kbox_result_value_text(res) == NULL);
}

TEST(no_error_means_no_traceback)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "stream_basic", 0, 0);

	REQUIRE(res);
	CHECK(!kbox_result_has_error(res));
	CHECK(kbox_result_traceback(res) == NULL);
	CHECK_STR_EQ(kbox_result_ename(res, NULL), "");
}

/* ==== budgets ==== */

/* The stdout of the large_print fixture, as the program printed it. */
static char *large_print_text(size_t *len)
{
	size_t cap = 60000, n = 0;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	for (int i = 1; i <= 5000; i++)
		n += (size_t)snprintf(s + n, cap - n, "line %d\n", i);
	*len = n;
	return s;
}

TEST(budget_keeps_head_and_tail_with_marker)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "large_print", 1000, 20);
	const kbox_text_t *out;
	char want[8192];
	size_t n = 0;

	REQUIRE(res);
	out = kbox_result_stream(res, KBOX_TEXT_STDOUT);
	CHECK(out->truncated);
	CHECK_INT_EQ(out->total_bytes, 48893);
	CHECK_INT_EQ(out->total_lines, 5000);
	for (int i = 1; i <= 10; i++)
		n += (size_t)snprintf(want + n, sizeof want - n, "line %d\n", i);
	n += (size_t)snprintf(want + n, sizeof want - n,
	                      "[... 48722 bytes in 4980 lines left out; the complete text is in "
	                      "%s/1-stdout.txt ...]\n",
	                      r->dir);
	for (int i = 4991; i <= 5000; i++)
		n += (size_t)snprintf(want + n, sizeof want - n, "line %d\n", i);
	CHECK_STR_EQ(out->text, want);
}

TEST(budget_spill_file_holds_complete_text)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "large_print", 1000, 20);
	const kbox_text_t *out;
	size_t want_len = 0, got_len = 0;
	char *want = defer(free, large_print_text(&want_len));
	char *raw = defer(free, fixture_stream_raw("large_print", "stdout"));
	char *got = NULL, path[4096];

	REQUIRE(res && want && raw);
	CHECK_STR_EQ(raw, want); /* the fixture is what the program printed */
	out = kbox_result_stream(res, KBOX_TEXT_STDOUT);
	CHECK_STR_EQ(out->spill_path, in_dir(path, sizeof path, r->dir, "1-stdout.txt"));
	if (out->spill_path)
		got = fixture_read_file(out->spill_path, &got_len);
	REQUIRE(got);
	CHECK_INT_EQ(got_len, want_len);
	CHECK(got_len == want_len && memcmp(got, want, want_len) == 0);
	CHECK_INT_EQ(out->total_bytes, want_len);
	free(got);
}

TEST(line_budget_alone_truncates)
{
	run_t *r = NULL;
	const kbox_text_t *out;
	char want[1024];
	size_t n = 0;

	REQUIRE(run_start(&r, 0, 20) == 0);
	run_json(r, "execute_input", "{\"code\":\"\",\"execution_count\":5}");
	for (int i = 1; i <= 25; i++) {
		char line[16];

		snprintf(line, sizeof line, "%d\n", i);
		run_stream(r, "stdout", line);
	}
	REQUIRE(run_finish(r));
	out = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	CHECK(out->truncated);
	CHECK_INT_EQ(out->total_lines, 25);
	for (int i = 1; i <= 10; i++)
		n += (size_t)snprintf(want + n, sizeof want - n, "%d\n", i);
	n += (size_t)snprintf(want + n, sizeof want - n,
	                      "[... 15 bytes in 5 lines left out; the complete text is in "
	                      "%s/5-stdout.txt ...]\n",
	                      r->dir);
	for (int i = 16; i <= 25; i++)
		n += (size_t)snprintf(want + n, sizeof want - n, "%d\n", i);
	CHECK_STR_EQ(out->text, want);
}

TEST(text_within_budget_leaves_no_spill_file)
{
	run_t *r = NULL;
	const kbox_text_t *out;

	REQUIRE(run_start(&r, 0, 20) == 0);
	for (int i = 0; i < 20; i++)
		run_stream(r, "stdout", "twenty lines fit\n");
	REQUIRE(run_finish(r));
	out = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	CHECK(!out->truncated);
	CHECK(out->spill_path == NULL);
	CHECK_INT_EQ(out->total_lines, 20);
	CHECK_INT_EQ(strlen(out->text), 20 * 17);
	CHECK_INT_EQ(fixture_dir_entries(r->dir), 0);
}

TEST(budget_without_outputs_dir_has_no_spill_path)
{
	kbox_capture_opts_t opts = {0};
	kbox_result_t *res;
	const kbox_text_t *out;

	opts.max_bytes = 1000;
	opts.max_lines = 20;
	res = defer(result_cb, fixture_capture("large_print", &opts, NULL));
	REQUIRE(res);
	out = kbox_result_stream(res, KBOX_TEXT_STDOUT);
	CHECK(out->truncated);
	CHECK(out->spill_path == NULL);
	CHECK_INT_EQ(out->total_bytes, 48893);
	CHECK_CONTAINS(out->text, "line 1\n");
	CHECK_CONTAINS(out->text, "\n[... 48722 bytes in 4980 lines left out ...]\nline 4991\n");
}

TEST(spill_after_clear_output_holds_complete_text)
{
	run_t *r = NULL;
	size_t want_len = 0, got_len = 0;
	char *want = defer(free, large_print_text(&want_len)), *got = NULL;
	const kbox_text_t *out;
	json_t *c;

	REQUIRE(want);
	REQUIRE(run_start(&r, 1000, 20) == 0);
	run_fixture(r, "large_print"); /* opens the spill file */
	run_json(r, "clear_output", "{\"wait\":false}");
	c = json_pack("{s:s, s:s}", "name", "stdout", "text", want);
	run_feed(r, c ? fixture_msg_new("stream", c, NULL) : NULL);
	json_decref(c);
	REQUIRE(run_finish(r));
	out = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	CHECK(out->truncated);
	CHECK_INT_EQ(out->total_bytes, want_len);
	REQUIRE(out->spill_path);
	got = fixture_read_file(out->spill_path, &got_len);
	REQUIRE(got);
	CHECK_INT_EQ(got_len, want_len);
	CHECK(got_len == want_len && memcmp(got, want, want_len) == 0);
	free(got);
}

TEST(truncated_text_cut_inside_head_is_valid_utf8)
{
	run_t *r = NULL;
	const kbox_text_t *out;
	char line[64];

	/* 64 bytes → 32 for the head: 30 bytes fit, then a line of 3-byte characters */
	REQUIRE(run_start(&r, 64, 0) == 0);
	memset(line, 'a', 29);
	line[29] = '\n';
	line[30] = '\0';
	run_stream(r, "stdout", line);
	run_stream(r, "stdout", "日本語日本語日本語日本語日本語日本語\n");
	for (int i = 0; i < 20; i++)
		run_stream(r, "stdout", "more text to push the tail\n");
	REQUIRE(run_finish(r));
	out = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	CHECK(out->truncated);
	CHECK(utf8_valid(out->text, strlen(out->text)));
}

TEST(truncated_long_line_tail_is_valid_utf8)
{
	run_t *r = NULL;
	const kbox_text_t *out;
	size_t n = 10000 * 3;
	char *s = defer(free, malloc(n + 1));

	REQUIRE(s);
	for (size_t i = 0; i < n; i += 3)
		memcpy(s + i, "日", 3);
	s[n] = '\0';
	REQUIRE(run_start(&r, 64, 0) == 0);
	run_stream(r, "stdout", s);
	REQUIRE(run_finish(r));
	out = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	CHECK(out->truncated);
	CHECK_INT_EQ(out->total_bytes, 30000);
	CHECK(utf8_valid(out->text, strlen(out->text)));
}

TEST(long_unterminated_line_counted_in_full)
{
	run_t *r = NULL;
	const kbox_text_t *out;
	char chunk[1001];
	size_t got_len = 0;
	char *got;

	memset(chunk, 'x', 1000);
	chunk[1000] = '\0';
	REQUIRE(run_start(&r, 0, 0) == 0);
	for (int i = 0; i < 100; i++)
		run_stream(r, "stdout", chunk);
	REQUIRE(run_finish(r));
	out = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	CHECK(out->truncated);
	CHECK_INT_EQ(out->total_bytes, 100000);
	CHECK_INT_EQ(out->total_lines, 0);
	REQUIRE(out->spill_path);
	got = fixture_read_file(out->spill_path, &got_len);
	CHECK_INT_EQ(got_len, 100000);
	CHECK(got && got[0] == 'x' && got[99999] == 'x');
	free(got);
}

TEST(value_text_budgeted_with_spill)
{
	run_t *r = NULL;
	size_t want_len = 0, got_len = 0;
	char *want = defer(free, large_print_text(&want_len)), *got = NULL;
	const kbox_text_t *v;
	json_t *c;
	char path[4096];

	REQUIRE(want);
	REQUIRE(run_start(&r, 1000, 20) == 0);
	c = json_pack("{s:i, s:{s:s}, s:{}}", "execution_count", 3, "data", "text/plain", want,
	              "metadata");
	run_feed(r, c ? fixture_msg_new("execute_result", c, NULL) : NULL);
	json_decref(c);
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(kbox_result_count(r->res), 3);
	v = kbox_result_value_text(r->res);
	REQUIRE(v);
	CHECK(v->truncated);
	CHECK_INT_EQ(v->total_bytes, want_len);
	CHECK_INT_EQ(v->total_lines, 5000);
	CHECK(strncmp(v->text, "line 1\nline 2\n", 14) == 0);
	CHECK_CONTAINS(v->text, "line 5000\n");
	CHECK_STR_EQ(v->spill_path, in_dir(path, sizeof path, r->dir, "3-value.txt"));
	if (v->spill_path)
		got = fixture_read_file(v->spill_path, &got_len);
	CHECK(got && got_len == want_len && memcmp(got, want, want_len) == 0);
	free(got);
}

/* ==== text content ==== */

TEST(unicode_text_intact)
{
	run_t *r = NULL;
	kbox_result_t *res = run_whole(&r, "unicode", 0, 0);
	const char *want = "héllo wörld 🎉 日本語 中文 한국어\n";

	REQUIRE(res);
	CHECK_STR_EQ(out_text(res), want);
	CHECK_INT_EQ(kbox_result_stream(res, KBOX_TEXT_STDOUT)->total_bytes, strlen(want));
}

TEST(replacement_character_intact)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "bad \xef\xbf\xbd byte\n");
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "bad \xef\xbf\xbd byte\n");
}

TEST(invalid_utf8_stream_text_is_kept_by_length)
{
	run_t *r = NULL;
	static const char bad[] = "ab\xff\xfe\xc3\rZ\n\x80";
	json_t *c;

	REQUIRE(run_start(&r, 0, 0) == 0);
	/* jansson's decoder never produces this; a misbehaving caller might */
	c = json_pack("{s:s, s:o}", "name", "stdout", "text",
	              json_stringn_nocheck(bad, sizeof bad - 1));
	run_feed(r, c ? fixture_msg_new("stream", c, NULL) : NULL);
	json_decref(c);
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(r->feed_failures, 0);
	CHECK_INT_EQ(kbox_result_stream(r->res, KBOX_TEXT_STDOUT)->total_lines, 1);
	CHECK(kbox_result_stream(r->res, KBOX_TEXT_STDOUT)->text != NULL);
}

/* ==== NUL bytes: kept by length, nothing after one lost ==== */

TEST(nul_in_stream_text_is_kept_by_length)
{
	run_t *r = NULL;
	const kbox_text_t *out, *err;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_json(r, "stream", "{\"name\":\"stdout\",\"text\":\"A\\u0000B\\n\"}");
	run_json(r, "stream", "{\"name\":\"stderr\",\"text\":\"\\u0000e\\u0000\"}");
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(r->feed_failures, 0);
	out = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	err = kbox_result_stream(r->res, KBOX_TEXT_STDERR);
	CHECK_INT_EQ(out->len, 4);
	CHECK(out->len == 4 && memcmp(out->text, "A\0B\n", 5) == 0);
	CHECK_INT_EQ(out->total_bytes, 4);
	CHECK_INT_EQ(out->total_lines, 1);
	CHECK(!out->truncated);
	CHECK_INT_EQ(err->len, 3);
	CHECK(err->len == 3 && memcmp(err->text, "\0e\0", 4) == 0);
	CHECK_INT_EQ(err->total_bytes, 3);
}

TEST(nul_in_value_text_is_kept_by_length)
{
	run_t *r = NULL;
	const kbox_text_t *v;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_json(r, "execute_result",
	         "{\"execution_count\":1,\"data\":{\"text/plain\":\"r\\u0000s\"},\"metadata\":{}}");
	REQUIRE(run_finish(r));
	v = kbox_result_value_text(r->res);
	REQUIRE(v != NULL);
	CHECK_INT_EQ(v->len, 3);
	CHECK(v->len == 3 && memcmp(v->text, "r\0s", 4) == 0);
	CHECK_INT_EQ(v->total_bytes, 3);
}

TEST(nul_in_error_name_value_and_traceback_is_kept_by_length)
{
	run_t *r = NULL;
	const kbox_text_t *tb;
	const char *en, *ev;
	size_t en_len = 0, ev_len = 0;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_json(r, "error",
	         "{\"ename\":\"E\\u0000F\",\"evalue\":\"x\\u0000y\","
	         "\"traceback\":[\"\\u001b[31mE\\u0000F\\u001b[0m: x\\u0000y\"]}");
	REQUIRE(run_finish(r));
	en = kbox_result_ename(r->res, &en_len);
	ev = kbox_result_evalue(r->res, &ev_len);
	CHECK_INT_EQ(en_len, 3);
	CHECK(en_len == 3 && memcmp(en, "E\0F", 4) == 0);
	CHECK_INT_EQ(ev_len, 3);
	CHECK(ev_len == 3 && memcmp(ev, "x\0y", 4) == 0);
	tb = kbox_result_traceback(r->res);
	REQUIRE(tb != NULL);
	CHECK_INT_EQ(tb->len, 9);
	CHECK(tb->len == 9 && memcmp(tb->text, "E\0F: x\0y\n", 10) == 0);
	CHECK_INT_EQ(tb->total_bytes, 9);
}

TEST(long_error_value_with_nul_is_cut_by_length)
{
	run_t *r = NULL;
	char content[512];
	const char *ev;
	size_t ev_len = 0, n = 0;

	REQUIRE(run_start(&r, 64, 0) == 0);
	n += (size_t)snprintf(content + n, sizeof content - n,
	                      "{\"ename\":\"E\",\"traceback\":[],\"evalue\":\"");
	for (int i = 0; i < 40; i++) /* 120 bytes: over the budget of 64 */
		n += (size_t)snprintf(content + n, sizeof content - n, "a\\u0000b");
	snprintf(content + n, sizeof content - n, "\"}");
	run_json(r, "error", content);
	REQUIRE(run_finish(r));
	ev = kbox_result_evalue(r->res, &ev_len);
	CHECK_INT_EQ(ev_len, 64 + strlen(" [... 56 bytes]"));
	CHECK(ev_len > 64 && memcmp(ev, "a\0ba\0b", 6) == 0 &&
	      strcmp(ev + 64, " [... 56 bytes]") == 0);
}

TEST(spill_file_holds_the_nul_bytes_as_sent)
{
	run_t *r = NULL;
	const kbox_text_t *out;
	char *content = malloc(64 + 200 * 10), *want = malloc(200 * 4), *got = NULL;
	size_t n = 0, got_len = 0;

	REQUIRE(content && want);
	defer(free, content);
	defer(free, want);
	REQUIRE(run_start(&r, 100, 0) == 0);
	n += (size_t)sprintf(content, "{\"name\":\"stdout\",\"text\":\"");
	for (int i = 0; i < 200; i++) {
		n += (size_t)sprintf(content + n, "a\\u0000b\\n");
		memcpy(want + 4 * i, "a\0b\n", 4);
	}
	sprintf(content + n, "\"}");
	run_json(r, "stream", content);
	REQUIRE(run_finish(r));
	out = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	CHECK(out->truncated);
	CHECK_INT_EQ(out->total_bytes, 800);
	CHECK_INT_EQ(out->total_lines, 200);
	REQUIRE(out->spill_path != NULL);
	got = fixture_read_file(out->spill_path, &got_len);
	REQUIRE(got != NULL);
	CHECK_INT_EQ(got_len, 800);
	CHECK(got_len == 800 && memcmp(got, want, 800) == 0);
	free(got);
	/* head and tail are whole lines of the raw text, NUL bytes and all */
	CHECK(out->len > strlen(out->text));
	CHECK(memcmp(out->text, "a\0b\n", 4) == 0);
	CHECK(out->len >= 4 && memcmp(out->text + out->len - 4, "a\0b\n", 4) == 0);
	/* a head of 50 bytes (12 lines and "a\0"), the marker, a tail of 12 lines */
	CHECK(out->len > 50 && strncmp(out->text + 50,
	                               "\n[... 702 bytes in 176 lines left out; "
	                               "the complete text is in ",
	                               63) == 0);
	/* strlen stops at the tail's first NUL, after its "a" */
	CHECK_INT_EQ(out->len, 50 + (strlen(out->text + 50) - 1) + 48);
}

TEST(status_execute_input_and_unknown_messages_change_nothing)
{
	run_t *r = NULL;

	REQUIRE(run_start(&r, 0, 0) == 0);
	run_json(r, "status", "{\"execution_state\":\"busy\"}");
	run_json(r, "execute_input", "{\"code\":\"x\",\"execution_count\":9}");
	run_json(r, "comm_msg", "{\"comm_id\":\"c\",\"data\":{}}");
	run_json(r, "stream", "{\"name\":\"stdout\"}"); /* no text */
	run_json(r, "status", "{\"execution_state\":\"idle\"}");
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(kbox_result_count(r->res), 9);
	CHECK_STR_EQ(out_text(r->res), "");
	CHECK_STR_EQ(err_text(r->res), "");
	CHECK_INT_EQ(kbox_result_display_count(r->res), 0);
	CHECK(kbox_result_value(r->res) == NULL);
	CHECK(!kbox_result_has_error(r->res));
	CHECK_INT_EQ(kbox_result_notice_count(r->res), 0);
	CHECK_INT_EQ(r->feed_failures, 0);
}

TEST(on_msg_feeds_iopub_only)
{
	run_t *r = NULL;
	kbox_msg_t *m;

	REQUIRE(run_start(&r, 0, 0) == 0);
	m = fixture_msg_json("stream", "{\"name\":\"stdout\",\"text\":\"iopub\\n\"}");
	REQUIRE(m);
	CHECK_INT_EQ(kbox_capture_on_msg(r->cap, KBOX_CH_IOPUB, m), 0);
	CHECK_INT_EQ(kbox_capture_on_msg(r->cap, KBOX_CH_SHELL, m), 0);
	kbox_msg_destroy(&m);
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(out_text(r->res), "iopub\n");
}

/* A quota with less room than a spill file takes (a block) keeps no text
 * on disk, so a client's rate limit applies; with room for one, it does
 * until the file is cut at the quota. */
TEST(can_spill_only_while_text_can_still_be_kept_on_disk)
{
	run_t *r;
	char line[200];

	next_files_max = 4096;
	REQUIRE(run_start(&r, 100, 0) == 0);
	CHECK(!kbox_capture_can_spill(r->cap));
	next_files_max = 4097;
	REQUIRE(run_start(&r, 100, 0) == 0);
	CHECK(kbox_capture_can_spill(r->cap));
	next_files_max = 3 * 4096;
	REQUIRE(run_start(&r, 100, 0) == 0);
	CHECK(kbox_capture_can_spill(r->cap));
	memset(line, 'x', sizeof line - 2);
	line[sizeof line - 2] = '\n';
	line[sizeof line - 1] = '\0';
	for (int i = 0; i < 40; i++) /* 7960 bytes: the file open, not yet cut */
		run_stream(r, "stdout", line);
	CHECK(kbox_capture_can_spill(r->cap));
	for (int i = 0; i < 20; i++) /* past the quota: the file is cut */
		run_stream(r, "stdout", line);
	CHECK(!kbox_capture_can_spill(r->cap));
}

TEST(capture_new_refuses_missing_outputs_dir)
{
	kbox_capture_opts_t opts = {0};
	kbox_error_t err = {0};
	kbox_capture_t *cap;

	opts.outputs_dir = "/nonexistent/kbox-outputs";
	cap = kbox_capture_new(&opts, &err);
	CHECK(cap == NULL);
	CHECK(err.code != KBOX_OK);
	CHECK_CONTAINS(err.msg, "/nonexistent/kbox-outputs");
	kbox_capture_destroy(&cap);
}

TEST(destroy_and_finish_accept_null)
{
	kbox_capture_t *cap = NULL;
	kbox_result_t *res = NULL;

	kbox_capture_destroy(NULL);
	kbox_capture_destroy(&cap);
	kbox_result_destroy(NULL);
	kbox_result_destroy(&res);
	CHECK(kbox_capture_finish(&cap, NULL) == NULL);
	CHECK(cap == NULL && res == NULL);
}

/* ==== kbox_strip_ansi ==== */

/* Strip S (LEN bytes) and compare with WANT (WANT_LEN bytes). */
static void check_strip(const char *s, size_t len, const char *want, size_t want_len)
{
	size_t out_len = (size_t)-1;
	char *out = kbox_strip_ansi(s, len, &out_len);

	CHECK(out != NULL);
	if (!out)
		return;
	CHECK_INT_EQ(out_len, want_len);
	CHECK(out_len == want_len && memcmp(out, want, want_len) == 0);
	CHECK(out[out_len] == '\0');
	if (out_len != want_len || memcmp(out, want, want_len) != 0)
		printf("# got \"%.*s\"\n", (int)out_len, out);
	free(out);
}

#define STRIP(s, want) check_strip(s, sizeof(s) - 1, want, sizeof(want) - 1)

TEST(strip_ansi_removes_csi)
{
	STRIP("\033[0;31mred\033[0m plain", "red plain");
	STRIP("\033[38;5;241;43m1\033[39;49m", "1");
	STRIP("a\033[2Kb\033[1Ac", "abc");
	STRIP("\033[?25lhidden cursor\033[?25h", "hidden cursor");
}

TEST(strip_ansi_removes_osc)
{
	STRIP("\033]0;title\atext", "text");
	STRIP("\033]8;;http://example.invalid/\033\\link\033]8;;\033\\", "link");
}

TEST(strip_ansi_removes_two_byte_sequences)
{
	STRIP("a\0337b\0338c", "abc");
	STRIP("x\033My\033=z", "xyz");
}

TEST(strip_ansi_removes_charset_designation)
{
	/* tput sgr0 emits ESC ( B ESC [ m */
	STRIP("\033(B\033[mtext", "text");
	STRIP("\033)0line", "line");
}

TEST(strip_ansi_drops_a_cut_sequence_at_the_end)
{
	STRIP("abc\033[31", "abc");
	STRIP("abc\033", "abc");
	STRIP("abc\033]0;never ends", "abc");
}

TEST(strip_ansi_keeps_other_bytes)
{
	STRIP("tab\there\r\n\xff\xfe é 日本", "tab\there\r\n\xff\xfe é 日本");
	check_strip("a\0b", 3, "a\0b", 3);
	check_strip("", 0, "", 0);
}

TEST(strip_ansi_stripped_fixture_traceback_has_no_escape)
{
	json_t *doc = defer(decref_cb, fixture_load("error_in_function"));
	json_t *tb, *line;
	size_t i;

	REQUIRE(doc);
	tb = json_object_get(json_object_get(fixture_find(doc, "error"), "content"), "traceback");
	REQUIRE(json_array_size(tb) == 5);
	json_array_foreach(tb, i, line)
	{
		size_t n = 0;
		char *out = kbox_strip_ansi(json_string_value(line), json_string_length(line), &n);

		CHECK(out && memchr(out, '\033', n) == NULL);
		if (i == 4)
			CHECK_STR_EQ(out, "ZeroDivisionError: division by zero");
		free(out);
	}
}

/* ==== kbox_image_size ==== */

/* A PNG signature and IHDR chunk for W×H. */
static void png_header(unsigned char out[33], unsigned w, unsigned h)
{
	static const unsigned char ihdr_len[4] = {0, 0, 0, 13};

	memcpy(out, PNG_SIG, 8);
	memcpy(out + 8, ihdr_len, 4);
	memcpy(out + 12, "IHDR", 4);
	for (int k = 0; k < 4; k++) {
		out[16 + k] = (unsigned char)(w >> (24 - 8 * k));
		out[20 + k] = (unsigned char)(h >> (24 - 8 * k));
	}
	out[24] = 8; /* bit depth */
	out[25] = 2; /* RGB */
	out[26] = out[27] = out[28] = 0;
	memset(out + 29, 0, 4); /* CRC (not checked) */
}


/* ==== review findings: budgets and bounds on hostile content ==== */

/* Build a display_data content whose DATA is the JSON object TEXT. */
static void run_display_data(run_t *r, const char *type, json_t *data)
{
	json_t *c = json_pack("{s:o, s:{}}", "data", data, "metadata");
	run_feed(r, c ? fixture_msg_new(type, c, NULL) : NULL);
	json_decref(c);
}

TEST(non_string_and_list_mime_values_count_against_the_bundle_budget)
{
	run_t *r;
	json_t *big = json_array(), *d;
	char *line = malloc(60001);
	REQUIRE(run_start(&r, 0, 0) == 0);
	REQUIRE(line != NULL);
	memset(line, 'x', 60000);
	line[60000] = '\0';
	for (int i = 0; i < 100; i++)
		json_array_append_new(big, json_string(line));
	free(line);
	/* text/plain as a 6 MB list of lines, and a 6 MB application/json */
	run_display_data(r, "display_data", json_pack("{s:O}", "text/plain", big));
	run_display_data(r, "display_data", json_pack("{s:{s:O}}", "application/json", "k", big));
	json_decref(big);
	REQUIRE(run_finish(r));
	REQUIRE(kbox_result_display_count(r->res) == 2);
	d = kbox_result_display(r->res, 0);
	CHECK(json_is_integer(json_object_get(json_object_get(d, "text/plain"), "omitted_bytes")));
	d = kbox_result_display(r->res, 1);
	CHECK(json_is_integer(
	        json_object_get(json_object_get(d, "application/json"), "omitted_bytes")));
}

TEST(kept_mime_values_stop_at_8_mib_per_capture)
{
	run_t *r;
	char *v = malloc(60001);
	size_t kept = 0, omitted = 0;
	REQUIRE(run_start(&r, 0, 0) == 0);
	REQUIRE(v != NULL);
	memset(v, 'h', 60000);
	v[60000] = '\0';
	for (int i = 0; i < 100; i++) /* 100 displays of 60 KB html: 6 MB, under the cap */
		run_display_data(r, "display_data",
		                 json_pack("{s:s, s:s}", "text/html", v, "text/plain", "t"));
	free(v);
	REQUIRE(run_finish(r));
	for (size_t i = 0; i < kbox_result_display_count(r->res); i++) {
		json_t *h = json_object_get(kbox_result_display(r->res, i), "text/html");
		if (json_is_string(h))
			kept += json_string_length(h);
		else
			omitted++;
	}
	CHECK(kept <= 8 * 1024 * 1024);
	CHECK_INT_EQ(kept + omitted * 60000, 100 * 60000); /* every one accounted for */
}

TEST(unsupported_image_type_is_a_reference_not_base64)
{
	run_t *r;
	json_t *g;
	char *text;
	REQUIRE(run_start(&r, 0, 0) == 0);
	run_display_data(r, "display_data",
	                 json_pack("{s:s, s:s}", "image/gif", "R0lGODlhAQABAAAAACw=", "text/plain",
	                           "<gif>"));
	REQUIRE(run_finish(r));
	g = json_object_get(kbox_result_display(r->res, 0), "image/gif");
	REQUIRE(json_is_object(g));
	CHECK(json_is_null(json_object_get(g, "path")));
	CHECK_STR_EQ(json_string_value(json_object_get(g, "error")), "unsupported image type");
	text = kbox_render_text(r->res);
	CHECK_STR_EQ(text, "[image not saved: image/gif, 20 bytes]\n<gif>\n");
	free(text);
}

/* A small valid PNG of W×H as base64 (header only; enough for the size). */
static char *png_b64(unsigned w, unsigned h)
{
	unsigned char png[33];
	char *b = malloc(64);
	png_header(png, w, h);
	if (b)
		sodium_bin2base64(b, 64, png, sizeof png, sodium_base64_VARIANT_ORIGINAL);
	return b;
}

TEST(only_the_last_execute_result_image_stays)
{
	run_t *r;
	REQUIRE(run_start(&r, 0, 0) == 0);
	for (int i = 1; i <= 3; i++) {
		char *b = png_b64(4 + i, 3); /* three images, not one thrice */
		json_t *c = b ? json_pack("{s:i, s:{s:s, s:s}, s:{}}", "execution_count", 3, "data",
		                          "image/png", b, "text/plain", "<Figure>", "metadata")
		              : NULL;
		run_feed(r, c ? fixture_msg_new("execute_result", c, NULL) : NULL);
		json_decref(c);
		free(b);
	}
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(kbox_result_image_count(r->res), 1);
	CHECK_CONTAINS(kbox_result_image(r->res, 0)->path, "3-3.png");
	CHECK_INT_EQ(kbox_result_image(r->res, 0)->width, 7);
}

/* The same image twice in one execution (a figure that is the value, then
 * the inline backend's display of it) is one file: both refer to it, and
 * the text says it once. */
TEST(the_same_image_twice_is_one_file_said_once)
{
	run_t *r;
	char *b = png_b64(4, 3), *text;
	json_t *c;
	kbox_result_t *res;
	REQUIRE(run_start(&r, 0, 0) == 0);
	REQUIRE(b != NULL);
	c = json_pack("{s:i, s:{s:s, s:s}, s:{}}", "execution_count", 2, "data", "image/png", b,
	              "text/plain", "<Figure>", "metadata");
	run_feed(r, c ? fixture_msg_new("execute_result", c, NULL) : NULL);
	json_decref(c);
	c = json_pack("{s:{s:s, s:s}, s:{}}", "data", "image/png", b, "text/plain", "<Figure>",
	              "metadata");
	run_feed(r, c ? fixture_msg_new("display_data", c, NULL) : NULL);
	json_decref(c);
	free(b);
	REQUIRE((res = run_finish(r)));
	REQUIRE(kbox_result_image_count(res) == 2);
	CHECK_STR_EQ(kbox_result_image(res, 0)->path, kbox_result_image(res, 1)->path);
	CHECK_CONTAINS(kbox_result_image(res, 0)->path, "2-1.png");
	text = kbox_render_text(res);
	REQUIRE(text != NULL);
	CHECK(strstr(text, "[image saved: ") &&
	      !strstr(strstr(text, "[image saved: ") + 1, "[image saved: "));
	free(text);
}

TEST(multi_line_error_value_shows_only_its_first_line_in_text)
{
	run_t *r;
	json_t *c;
	char *text, *ev = malloc(5 * 5000 + 1);
	REQUIRE(run_start(&r, 0, 20) == 0);
	REQUIRE(ev != NULL);
	ev[0] = '\0';
	for (int i = 0; i < 5000; i++)
		strcat(ev + (size_t)i * 5, "line\n");
	c = json_pack("{s:s, s:s, s:[s]}", "ename", "ValueError", "evalue", ev, "traceback",
	              "ValueError: line");
	free(ev);
	run_feed(r, c ? fixture_msg_new("error", c, NULL) : NULL);
	json_decref(c);
	REQUIRE(run_finish(r));
	text = kbox_render_text(r->res);
	REQUIRE(text != NULL);
	{
		size_t lines = 0;
		for (const char *p = text; *p; p++)
			lines += *p == '\n';
		CHECK(lines <= 25);
	}
	free(text);
}

TEST(long_prefix_is_refused)
{
	char prefix[260];
	kbox_capture_opts_t o = {0};
	kbox_error_t err = {0};
	kbox_capture_t *cap;
	memset(prefix, 'p', 251);
	prefix[251] = '\0';
	o.prefix = prefix;
	cap = kbox_capture_new(&o, &err);
	CHECK(cap == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	kbox_capture_destroy(&cap);
}

TEST(long_error_name_is_cut_on_a_character_boundary)
{
	run_t *r;
	char en[1 + 2 * 200 + 1];
	json_t *c;
	const char *got;
	REQUIRE(run_start(&r, 0, 0) == 0);
	en[0] = 'a';
	for (int i = 0; i < 200; i++)
		memcpy(en + 1 + 2 * i, "\xc3\x89", 2);
	en[sizeof en - 1] = '\0';
	c = json_pack("{s:s, s:s, s:[]}", "ename", en, "evalue", "v", "traceback");
	run_feed(r, c ? fixture_msg_new("error", c, NULL) : NULL);
	json_decref(c);
	REQUIRE(run_finish(r));
	got = kbox_result_ename(r->res, NULL);
	CHECK(strlen(got) <= 256);
	{
		json_t *j = json_string(got); /* valid UTF-8: jansson accepts it */
		CHECK(j != NULL);
		json_decref(j);
	}
}

TEST(overwrite_after_carriage_return_mixes_character_widths)
{
	run_t *r;
	REQUIRE(run_start(&r, 0, 0) == 0);
	run_stream(r, "stdout", "\xc3\x89\xc3\x89\xc3\x89\rab\n"); /* ÉÉÉ, \r, ab */
	run_stream(r, "stdout", "abc\r\xe4\xb8\xad\n");            /* abc, \r, 中 */
	REQUIRE(run_finish(r));
	CHECK_STR_EQ(kbox_result_stream(r->res, KBOX_TEXT_STDOUT)->text, "ab\xc3\x89\n\xe4\xb8\xad"
	                                                                 "bc\n");
}

TEST(image_size_png_header)
{
	unsigned char png[33];
	int w = 0, h = 0;

	png_header(png, 640, 480);
	CHECK_INT_EQ(kbox_image_size(png, sizeof png, &w, &h), 0);
	CHECK_INT_EQ(w, 640);
	CHECK_INT_EQ(h, 480);
	png_header(png, 70000, 1);
	CHECK_INT_EQ(kbox_image_size(png, 24, &w, &h), 0); /* IHDR's size fields suffice */
	CHECK_INT_EQ(w, 70000);
	CHECK_INT_EQ(h, 1);
}

TEST(image_size_jpeg_sof0_after_app0)
{
	static const unsigned char jpg[] = {
	        0xff, 0xd8, /* SOI */
	        0xff, 0xe0, 0x00, 0x10, 'J',  'F',  'I',  'F',  0,    1,
	        1,    0,    0,    1,    0,    1,    0,    0, /* APP0 */
	        0xff, 0xdb, 0x00, 0x04, 0x00, 0x00,          /* DQT (truncated table) */
	        0xff, 0xc0, 0x00, 0x11, 0x08, 0x01, 0x2c, 0x02, 0x80, 0x03, /* SOF0 300×640 */
	        1,    0x22, 0,    2,    0x11, 1,    3,    0x11, 1,
	};
	int w = 0, h = 0;

	CHECK_INT_EQ(kbox_image_size(jpg, sizeof jpg, &w, &h), 0);
	CHECK_INT_EQ(w, 640);
	CHECK_INT_EQ(h, 300);
}

TEST(image_size_jpeg_progressive_after_dht)
{
	static const unsigned char jpg[] = {
	        0xff, 0xd8, 0xff, 0xc4, 0x00, 0x03, 0x00, /* DHT: not a frame header */
	        0xff, 0xff, 0xc2, 0x00, 0x0b, 0x08, 0x00,
	        0x10, 0x00, 0x18, 0x01, 1,    0x11, 0, /* SOF2 */
	};
	int w = 0, h = 0;

	CHECK_INT_EQ(kbox_image_size(jpg, sizeof jpg, &w, &h), 0);
	CHECK_INT_EQ(w, 24);
	CHECK_INT_EQ(h, 16);
}

TEST(image_size_garbage_is_minus_one)
{
	static const unsigned char jpg_no_sof[] = {0xff, 0xd8, 0xff, 0xe0, 0x00,
	                                           0x04, 0,    0,    0xff, 0xd9};
	static const unsigned char jpg_cut[] = {0xff, 0xd8, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x01};
	static const unsigned char jpg_bad_len[] = {0xff, 0xd8, 0xff, 0xe0, 0x00, 0x00, 0, 0};
	unsigned char png[33];
	int w = 7, h = 7;

	CHECK_INT_EQ(kbox_image_size("hello, world, not an image", 26, &w, &h), -1);
	CHECK_INT_EQ(kbox_image_size("", 0, &w, &h), -1);
	CHECK_INT_EQ(kbox_image_size(PNG_SIG, 8, &w, &h), -1);
	png_header(png, 640, 480);
	CHECK_INT_EQ(kbox_image_size(png, 23, &w, &h), -1);
	png_header(png, 0, 480);
	CHECK_INT_EQ(kbox_image_size(png, sizeof png, &w, &h), -1);
	png_header(png, 0x80000000u, 1);
	CHECK_INT_EQ(kbox_image_size(png, sizeof png, &w, &h), -1);
	CHECK_INT_EQ(kbox_image_size(jpg_no_sof, sizeof jpg_no_sof, &w, &h), -1);
	CHECK_INT_EQ(kbox_image_size(jpg_cut, sizeof jpg_cut, &w, &h), -1);
	CHECK_INT_EQ(kbox_image_size(jpg_bad_len, sizeof jpg_bad_len, &w, &h), -1);
	CHECK_INT_EQ(w, 7);
	CHECK_INT_EQ(h, 7);
}

TEST(image_size_of_recorded_images)
{
	size_t len = 0;
	unsigned char *img = defer(free,
	                           fixture_image("plot_two", "display_data", "image/png", &len));
	int w = 0, h = 0;

	REQUIRE(img);
	CHECK_INT_EQ(kbox_image_size(img, len, &w, &h), 0);
	CHECK_INT_EQ(w, 200);
	CHECK_INT_EQ(h, 150);
	img = defer(free, fixture_image("jpeg_display", "display_data", "image/jpeg", &len));
	REQUIRE(img);
	CHECK_INT_EQ(kbox_image_size(img, len, &w, &h), 0);
	CHECK_INT_EQ(w, 24);
	CHECK_INT_EQ(h, 16);
}

/* kbox_json_string_size counts what jansson writes: escapes, quotes, and
 * with JSON_ENSURE_ASCII and JSON_ESCAPE_SLASH what they add. */
TEST(json_string_size_is_what_jansson_dumps)
{
	static const char *const texts[] = {
	        "",          "plain",      "\x01\x02\x1f\x7f",
	        "a\"b\\c/d", "\b\f\n\r\t", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	        "x\0y"};
	static const size_t flags[] = {JSON_COMPACT, JSON_COMPACT | JSON_ENSURE_ASCII,
	                               JSON_COMPACT | JSON_ESCAPE_SLASH};
	for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
		for (size_t f = 0; f < 3; f++) {
			size_t len = i == 6 ? 3 : strlen(texts[i]);
			json_t *j = json_stringn(texts[i], len);
			REQUIRE(j);
			CHECK_INT_EQ(kbox_json_string_size(texts[i], len, flags[f]),
			             json_dumpb(j, NULL, 0, flags[f] | JSON_ENCODE_ANY));
			json_decref(j);
		}
	/* an ill-formed byte is one U+FFFD at most */
	CHECK_INT_EQ(kbox_json_string_size("a\xff", 2, JSON_COMPACT), 6);
}

/* A value nested deeper than the limit keeps the limit's levels, the
 * rest a marker; a shallow one is itself. */
TEST(json_depth_cut_keeps_max_levels_and_marks_the_rest)
{
	json_t *v = json_array(), *cut, *x;
	int levels = 1;

	for (int i = 0; i < 99; i++)
		v = json_pack("[o]", v);
	defer(decref_cb, v);
	cut = defer(decref_cb, kbox_json_depth_cut(v, 64));
	REQUIRE(cut && cut != v);
	for (x = cut; json_is_array(x); x = json_array_get(x, 0))
		levels++;
	CHECK_INT_EQ(levels, 64);
	CHECK_STR_EQ(json_string_value(json_object_get(x, "omitted")),
	             "nested deeper than 64 levels");
	x = json_array_get(v, 0);
	CHECK(kbox_json_depth_cut(x, 99) == x);
	json_decref(x);
}

/* A MIME value counts as JSON: 20000 control bytes take 120002. */
TEST(mime_value_of_control_bytes_counts_its_escapes)
{
	run_t *r = NULL;
	size_t n = 20000;
	char *html = calloc(1, n + 1);
	json_t *c;

	REQUIRE(html);
	memset(html, 1, n);
	c = defer(decref_cb, json_pack("{s:{s:s}, s:{}}", "data", "text/html", html, "metadata"));
	free(html);
	REQUIRE(c);
	REQUIRE(run_start(&r, 0, 0) == 0);
	run_feed(r, fixture_msg_new("display_data", c, NULL));
	REQUIRE(run_finish(r));
	CHECK_INT_EQ(json_integer_value(json_object_get(
	                     json_object_get(kbox_result_display(r->res, 0), "text/html"),
	                     "omitted_bytes")),
	             20000);
}

/* A text that JSON makes too large for the reply is cut to fit, head and
 * tail kept, with the marker, the spill file holding all of it, and a
 * notice. */
TEST(text_too_large_for_the_reply_is_cut_to_fit_and_says_so)
{
	run_t *r = NULL;
	size_t n = 1 << 20, share;
	char *text = calloc(1, n + 1);
	const kbox_text_t *t;
	const kbox_output_t *o;
	struct stat st;

	REQUIRE(text);
	memset(text, 1, n);
	REQUIRE(run_start(&r, 2 << 20, 1000) == 0);
	kbox_capture_set_reply(r->cap, 3 << 20, 3, JSON_COMPACT);
	run_stream(r, "stdout", text);
	run_stream(r, "stderr", "small\n");
	free(text);
	REQUIRE(run_finish(r));
	t = kbox_result_stream(r->res, KBOX_TEXT_STDOUT);
	share = kbox_json_string_size(t->text, t->len, JSON_COMPACT);
	CHECK(t->truncated);
	CHECK_INT_EQ(t->total_bytes, n);
	CHECK(share * 3 <= 3 << 20);
	CHECK(share > 800000);
	CHECK(t->text[0] == 1 && t->text[t->len - 1] == 1);
	CHECK(strstr(t->text, " bytes in part of one line left out; the complete text is in ") !=
	      NULL);
	REQUIRE(t->spill_path);
	CHECK(stat(t->spill_path, &st) == 0 && (size_t)st.st_size == n);
	o = kbox_result_output(r->res, 0);
	CHECK(o && o->truncated && o->len == t->len);
	CHECK(!kbox_result_stream(r->res, KBOX_TEXT_STDERR)->truncated);
	CHECK_INT_EQ(kbox_result_notice_count(r->res), 1);
	CHECK(strncmp(kbox_result_notice(r->res, 0),
	              "the stdout was cut to fit one reply (at most 3 MiB of JSON, where it is "
	              "shown 3 times and a control character takes 6 bytes)",
	              120) == 0);
}

int main(void)
{
	if (kbox_init() != 0) {
		printf("Bail out! kbox_init failed\n");
		return 1;
	}
	RUN_TEST(stream_stdout_and_stderr_exact);
	RUN_TEST(result_status_and_count_taken_from_messages);
	RUN_TEST(interleaved_streams_kept_apart);
	RUN_TEST(interleaved_stream_events_in_arrival_order);
	RUN_TEST(consecutive_stream_messages_merged);
	RUN_TEST(carriage_return_overwrites_from_line_start);
	RUN_TEST(carriage_return_across_messages);
	RUN_TEST(carriage_return_newline_is_a_newline);
	RUN_TEST(carriage_return_overwrites_multibyte_characters_whole);
	RUN_TEST(progress_fixture_collapses_to_last_state);
	RUN_TEST(backspace_moves_back_one_character);
	RUN_TEST(clear_output_clears_streams_and_displays);
	RUN_TEST(clear_output_clears_a_partial_line);
	RUN_TEST(clear_output_forgets_images_of_cleared_displays);
	RUN_TEST(clear_output_wait_clears_only_when_output_follows);
	RUN_TEST(clear_output_wait_fixture_ends_with_last_output);
	RUN_TEST(clear_output_wait_emits_clear_before_next_output);
	RUN_TEST(update_display_data_replaces_same_display_id);
	RUN_TEST(display_data_of_an_id_already_shown_updates_the_earlier_output_too);
	RUN_TEST(update_display_data_emits_display_event_with_index);
	RUN_TEST(update_display_data_leaves_other_displays);
	RUN_TEST(updated_image_display_lists_only_the_new_image);
	RUN_TEST(displays_beyond_the_limit_are_counted_not_kept);
	RUN_TEST(dataframe_bundle_keeps_html_value_text_is_plain);
	RUN_TEST(oversized_mime_value_left_out_of_bundle);
	RUN_TEST(png_written_with_exact_size);
	RUN_TEST(display_bundle_references_image_file);
	RUN_TEST(two_figures_two_files);
	RUN_TEST(svg_written_with_unknown_size);
	RUN_TEST(svg_with_a_script_is_written_as_text_and_says_why);
	RUN_TEST(svg_without_active_content_is_written_as_svg);
	RUN_TEST(svg_with_the_w3c_doctype_of_svg_1_1_or_1_0_is_written_as_svg);
	RUN_TEST(svg_active_content_of_each_kind_is_named);
	RUN_TEST(svg_with_a_dtd_subset_or_another_encoding_is_written_as_text);
	RUN_TEST(svg_with_a_script_not_written_without_outputs_dir_is_not_called_text);
	RUN_TEST(jpeg_written_with_size_from_header);
	RUN_TEST(image_in_execute_result_written);
	RUN_TEST(prefix_names_image_and_spill_files);
	RUN_TEST(without_outputs_dir_images_are_listed_not_written);
	RUN_TEST(invalid_base64_image_is_noticed_not_written);
	RUN_TEST(symlink_at_image_path_is_not_followed);
	RUN_TEST(dangling_symlink_at_image_path_is_not_followed);
	RUN_TEST(hard_link_at_image_path_is_not_written_through);
	RUN_TEST(symlink_at_spill_path_is_not_followed);
	RUN_TEST(error_fields_exact_traceback_stripped);
	RUN_TEST(error_sets_status_error_without_execution);
	RUN_TEST(no_error_means_no_traceback);
	RUN_TEST(budget_keeps_head_and_tail_with_marker);
	RUN_TEST(budget_spill_file_holds_complete_text);
	RUN_TEST(line_budget_alone_truncates);
	RUN_TEST(text_within_budget_leaves_no_spill_file);
	RUN_TEST(budget_without_outputs_dir_has_no_spill_path);
	RUN_TEST(spill_after_clear_output_holds_complete_text);
	RUN_TEST(truncated_text_cut_inside_head_is_valid_utf8);
	RUN_TEST(truncated_long_line_tail_is_valid_utf8);
	RUN_TEST(long_unterminated_line_counted_in_full);
	RUN_TEST(value_text_budgeted_with_spill);
	RUN_TEST(unicode_text_intact);
	RUN_TEST(replacement_character_intact);
	RUN_TEST(invalid_utf8_stream_text_is_kept_by_length);
	RUN_TEST(nul_in_stream_text_is_kept_by_length);
	RUN_TEST(nul_in_value_text_is_kept_by_length);
	RUN_TEST(nul_in_error_name_value_and_traceback_is_kept_by_length);
	RUN_TEST(long_error_value_with_nul_is_cut_by_length);
	RUN_TEST(spill_file_holds_the_nul_bytes_as_sent);
	RUN_TEST(status_execute_input_and_unknown_messages_change_nothing);
	RUN_TEST(on_msg_feeds_iopub_only);
	RUN_TEST(can_spill_only_while_text_can_still_be_kept_on_disk);
	RUN_TEST(capture_new_refuses_missing_outputs_dir);
	RUN_TEST(destroy_and_finish_accept_null);
	RUN_TEST(strip_ansi_removes_csi);
	RUN_TEST(strip_ansi_removes_osc);
	RUN_TEST(strip_ansi_removes_two_byte_sequences);
	RUN_TEST(strip_ansi_removes_charset_designation);
	RUN_TEST(strip_ansi_drops_a_cut_sequence_at_the_end);
	RUN_TEST(strip_ansi_keeps_other_bytes);
	RUN_TEST(strip_ansi_stripped_fixture_traceback_has_no_escape);
	RUN_TEST(image_size_png_header);
	RUN_TEST(image_size_jpeg_sof0_after_app0);
	RUN_TEST(image_size_jpeg_progressive_after_dht);
	RUN_TEST(image_size_garbage_is_minus_one);
	RUN_TEST(image_size_of_recorded_images);
	RUN_TEST(non_string_and_list_mime_values_count_against_the_bundle_budget);
	RUN_TEST(kept_mime_values_stop_at_8_mib_per_capture);
	RUN_TEST(unsupported_image_type_is_a_reference_not_base64);
	RUN_TEST(only_the_last_execute_result_image_stays);
	RUN_TEST(the_same_image_twice_is_one_file_said_once);
	RUN_TEST(multi_line_error_value_shows_only_its_first_line_in_text);
	RUN_TEST(long_prefix_is_refused);
	RUN_TEST(long_error_name_is_cut_on_a_character_boundary);
	RUN_TEST(overwrite_after_carriage_return_mixes_character_widths);
	RUN_TEST(json_string_size_is_what_jansson_dumps);
	RUN_TEST(json_depth_cut_keeps_max_levels_and_marks_the_rest);
	RUN_TEST(mime_value_of_control_bytes_counts_its_escapes);
	RUN_TEST(text_too_large_for_the_reply_is_cut_to_fit_and_says_so);
	return tap_done();
}
