/* tests/unit_iopub_guard.c — the iopub guard (src/iopub_guard.h): the token
 * bucket of the rate limit, the count of messages that never arrived, the
 * scanner that measures a dropped stream message's text without decoding
 * it (valid, cut, escaped and hostile input), and the look at a raw
 * message that decides whether it may be dropped unread.  No clock and no
 * kernel: the bucket is told the time. */
#include "iopub_guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

/* ---- the token bucket ---- */

TEST(zero_rates_mean_the_defaults_with_a_full_window)
{
	kbox__bucket_t b;
	kbox__bucket_init(&b, 0, 0, 1000);
	CHECK(b.msgs_rate == KBOX_RATE_MSGS_PER_SEC);
	CHECK(b.bytes_rate == KBOX_RATE_BYTES_PER_SEC);
	CHECK(b.msgs == KBOX_RATE_MSGS_PER_SEC * KBOX_RATE_WINDOW_SEC);
	CHECK(b.bytes == KBOX_RATE_BYTES_PER_SEC * KBOX_RATE_WINDOW_SEC);
	CHECK_INT_EQ(b.last_ms, 1000);
}

TEST(a_full_bucket_passes_its_window_of_messages_then_refuses)
{
	kbox__bucket_t b;
	int passed = 0;
	kbox__bucket_init(&b, 10, -1, 0); /* 10 a second, a 2 s window: 20 */
	for (int i = 0; i < 25; i++)
		passed += kbox__bucket_take(&b, 100, 0);
	CHECK_INT_EQ(passed, 20);
}

TEST(tokens_come_back_at_the_rate)
{
	kbox__bucket_t b;
	kbox__bucket_init(&b, 10, -1, 0);
	for (int i = 0; i < 20; i++)
		REQUIRE(kbox__bucket_take(&b, 1, 0));
	CHECK(!kbox__bucket_take(&b, 1, 0));
	CHECK(!kbox__bucket_take(&b, 1, 50));  /* half a token */
	CHECK(kbox__bucket_take(&b, 1, 100));  /* one */
	CHECK(!kbox__bucket_take(&b, 1, 100)); /* and only one */
	CHECK(kbox__bucket_take(&b, 1, 300));  /* two more by now */
	CHECK(kbox__bucket_take(&b, 1, 300));
	CHECK(!kbox__bucket_take(&b, 1, 300));
}

TEST(tokens_never_exceed_the_window)
{
	kbox__bucket_t b;
	int passed = 0;
	kbox__bucket_init(&b, 10, -1, 0);
	for (int i = 0; i < 20; i++)
		kbox__bucket_take(&b, 1, 0);
	/* an hour of silence refills the window, not 36000 tokens */
	for (int i = 0; i < 30; i++)
		passed += kbox__bucket_take(&b, 1, 3600 * 1000);
	CHECK_INT_EQ(passed, 20);
}

TEST(a_message_larger_than_the_window_passes_once_and_is_charged_in_full)
{
	kbox__bucket_t b;
	kbox__bucket_init(&b, -1, 100, 0); /* 100 bytes a second: a 200-byte window */
	CHECK(kbox__bucket_take(&b, 1000, 0));
	CHECK(b.bytes == -800);
	CHECK(!kbox__bucket_take(&b, 1, 0));
	CHECK(!kbox__bucket_take(&b, 1, 8000)); /* 8 s pay the deficit back to 0 */
	CHECK(b.bytes == 0);
	CHECK(kbox__bucket_take(&b, 1, 8010)); /* above 0: passes */
}

TEST(a_refused_message_takes_no_tokens)
{
	kbox__bucket_t b;
	kbox__bucket_init(&b, 1, 100, 0); /* 2 messages, 200 bytes */
	CHECK(kbox__bucket_take(&b, 1, 0));
	CHECK(kbox__bucket_take(&b, 1, 0));
	CHECK(!kbox__bucket_take(&b, 1, 0)); /* no message token left */
	CHECK(b.msgs == 0);
	CHECK(b.bytes == 198);
}

TEST(negative_rates_mean_no_limit)
{
	kbox__bucket_t b;
	int passed = 0;
	kbox__bucket_init(&b, -1, -1, 0);
	for (int i = 0; i < 100000; i++)
		passed += kbox__bucket_take(&b, (size_t)1 << 30, 0);
	CHECK_INT_EQ(passed, 100000);
}

/* ---- messages that never arrived ---- */

/* Note each number of LIST (ended by -1) as "SESS_42_N", the first ours. */
static void note_all(kbox__seq_t *s, const long long *list)
{
	char id[64];
	for (int i = 0; list[i] >= 0; i++) {
		snprintf(id, sizeof id, "SESS_42_%lld", list[i]);
		kbox__seq_note(s, id, i == 0);
	}
}

TEST(numbers_skipped_between_the_first_and_the_last_are_lost)
{
	kbox__seq_t s = {0};
	note_all(&s, (const long long[]){5, 6, 9, -1});
	CHECK_INT_EQ(kbox__seq_lost(&s), 2); /* 7 and 8 */
	CHECK_INT_EQ(s.min, 5);
	CHECK_INT_EQ(s.max, 9);
	CHECK_INT_EQ(s.seen, 3);
	CHECK_STR_EQ(s.prefix, "SESS_42");
	kbox__seq_free(&s);
}

TEST(nothing_counts_before_the_executions_first_message)
{
	kbox__seq_t s = {0};
	kbox__seq_note(&s, "SESS_42_3", false); /* another's, before ours */
	CHECK(!s.set);
	kbox__seq_note(&s, "SESS_42_5", true);
	kbox__seq_note(&s, "SESS_42_4", false); /* below the first: kept, not counted */
	kbox__seq_note(&s, "SESS_42_6", false); /* not ours, but in the numbering */
	CHECK_INT_EQ(kbox__seq_lost(&s), 0);
	CHECK_INT_EQ(s.min, 5);
	CHECK_INT_EQ(s.seen, 2);
	kbox__seq_free(&s);
}

TEST(a_reply_that_comes_before_the_iopub_messages_numbered_ahead_of_it_loses_nothing)
{
	kbox__seq_t s = {0};
	/* the shell reply (8) comes first; then iopub: a stream of another
	 * execution (3), busy (4), input (5), a stream (7, 6 never came),
	 * idle (9) */
	kbox__seq_note(&s, "SESS_42_8", true);
	kbox__seq_note(&s, "SESS_42_3", false);
	CHECK_INT_EQ(s.min, 8);
	CHECK_INT_EQ(s.seen, 1);
	kbox__seq_note(&s, "SESS_42_4", true);
	CHECK_INT_EQ(s.min, 4);
	CHECK_INT_EQ(s.seen, 2);
	kbox__seq_note(&s, "SESS_42_5", true);
	kbox__seq_note(&s, "SESS_42_7", true);
	kbox__seq_note(&s, "SESS_42_4", true); /* once */
	kbox__seq_note(&s, "SESS_42_9", true);
	CHECK_INT_EQ(s.seen, 5);
	CHECK_INT_EQ(kbox__seq_lost(&s), 1); /* 6 */
	kbox__seq_free(&s);
}

/* kbox asks kernel_info of a kernel whose idle is late (its iopub thread
 * busy): the probe's reply (13) can come on shell before the idle (11),
 * and its busy (12) after it.  Up to the idle, the last of ours, nothing
 * was lost (CI, results.sh a_kernel_slow_to_send_idle_loses_nothing). */
TEST(once_the_idle_came_what_is_numbered_after_it_is_not_counted)
{
	kbox__seq_t s = {0};
	kbox__seq_note(&s, "SESS_42_7", true);   /* busy */
	kbox__seq_note(&s, "SESS_42_10", true);  /* the reply */
	kbox__seq_note(&s, "SESS_42_8", true);   /* input */
	kbox__seq_note(&s, "SESS_42_9", true);   /* a stream */
	kbox__seq_note(&s, "SESS_42_13", false); /* the probe's reply */
	kbox__seq_note(&s, "SESS_42_11", true);  /* idle */
	CHECK_INT_EQ(s.max_ours, 11);
	CHECK_INT_EQ(kbox__seq_lost_ours(&s), 0);
	CHECK_INT_EQ(kbox__seq_lost(&s), 1); /* 12: for an execution whose idle never came */
	kbox__seq_free(&s);
	/* one of ours lost before the idle is counted still, and one not ours
	 * between two of ours fills its number */
	kbox__seq_note(&s, "SESS_42_7", true);
	kbox__seq_note(&s, "SESS_42_8", false);
	kbox__seq_note(&s, "SESS_42_10", true);
	kbox__seq_note(&s, "SESS_42_14", false);
	kbox__seq_note(&s, "SESS_42_11", true);
	CHECK_INT_EQ(kbox__seq_lost_ours(&s), 1); /* 9 */
	CHECK_INT_EQ(kbox__seq_lost(&s), 3);      /* 9, 12, 13 */
	kbox__seq_free(&s);
}

TEST(a_number_below_the_first_is_counted_once_one_of_ours_comes_below_it)
{
	kbox__seq_t s = {0};
	kbox__seq_note(&s, "SESS_42_10", true);
	kbox__seq_note(&s, "SESS_42_7", false); /* kept */
	kbox__seq_note(&s, "SESS_42_7", false); /* once */
	CHECK_INT_EQ(kbox__seq_lost(&s), 0);
	kbox__seq_note(&s, "SESS_42_6", true);
	CHECK_INT_EQ(s.seen, 3);             /* 6, 7, 10 */
	CHECK_INT_EQ(kbox__seq_lost(&s), 2); /* 8 and 9 */
	kbox__seq_note(&s, "SESS_42_9", false);
	CHECK_INT_EQ(kbox__seq_lost(&s), 1);
	kbox__seq_free(&s);
}

TEST(a_number_below_the_first_and_older_than_the_window_is_ignored)
{
	kbox__seq_t s = {0};
	note_all(&s, (const long long[]){70000, -1});
	kbox__seq_note(&s, "SESS_42_4464", true); /* 65536 behind: out */
	CHECK_INT_EQ(s.min, 70000);
	kbox__seq_note(&s, "SESS_42_4465", true); /* 65535 behind: in */
	CHECK_INT_EQ(s.min, 4465);
	CHECK_INT_EQ(kbox__seq_lost(&s), 65534);
	kbox__seq_free(&s);
}

TEST(a_number_seen_twice_counts_once)
{
	kbox__seq_t s = {0};
	note_all(&s, (const long long[]){5, 6, 6, 7, 5, -1});
	CHECK_INT_EQ(s.seen, 3);
	CHECK_INT_EQ(kbox__seq_lost(&s), 0);
	kbox__seq_free(&s);
}

TEST(a_late_number_fills_its_gap)
{
	kbox__seq_t s = {0};
	note_all(&s, (const long long[]){5, 9, 7, -1});
	CHECK_INT_EQ(kbox__seq_lost(&s), 2); /* 6 and 8 */
	kbox__seq_free(&s);
}

TEST(ids_of_another_form_or_numbering_are_ignored)
{
	kbox__seq_t s = {0};
	kbox__seq_note(&s, "SESS_42_5", true);
	kbox__seq_note(&s, "OTHER_42_9", false);    /* another prefix */
	kbox__seq_note(&s, "SESS_4_9", false);      /* a shorter prefix */
	kbox__seq_note(&s, "2f1c0a9e-uuid", false); /* no _N */
	kbox__seq_note(&s, "SESS_42_9x", false);    /* not a number to the end */
	kbox__seq_note(&s, "SESS_42_", false);      /* no digits */
	kbox__seq_note(&s, "_9", false);            /* no prefix */
	kbox__seq_note(&s, NULL, false);
	kbox__seq_note(NULL, "SESS_42_9", true); /* no counter: nothing */
	CHECK_INT_EQ(s.max, 5);
	CHECK_INT_EQ(s.seen, 1);
	CHECK_INT_EQ(kbox__seq_lost(&s), 0);
	kbox__seq_free(&s);
}

TEST(a_uuid_numbering_is_never_counted)
{
	kbox__seq_t s = {0};
	kbox__seq_note(&s, "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", true);
	CHECK(!s.set);
	CHECK_INT_EQ(kbox__seq_lost(&s), 0);
	kbox__seq_free(&s);
}

TEST(a_jump_beyond_the_limit_is_another_numbering_not_a_loss)
{
	kbox__seq_t s = {0};
	note_all(&s, (const long long[]){5, 5 + (1LL << 20) + 1, -1});
	CHECK_INT_EQ(s.max, 5);
	CHECK_INT_EQ(kbox__seq_lost(&s), 0);
	note_all(&s, (const long long[]){5, 5 + (1LL << 20), -1}); /* at the limit: a loss */
	CHECK_INT_EQ(kbox__seq_lost(&s), (1LL << 20) - 1);
	kbox__seq_free(&s);
}

TEST(numbers_older_than_the_window_are_ignored)
{
	kbox__seq_t s = {0};
	note_all(&s, (const long long[]){10, 20, 20 + 65536, -1});
	CHECK_INT_EQ(kbox__seq_lost(&s), 65547 - 3);
	kbox__seq_note(&s, "SESS_42_15", false); /* 65541 behind: out of the window */
	CHECK_INT_EQ(kbox__seq_lost(&s), 65547 - 3);
	kbox__seq_note(&s, "SESS_42_21", false); /* 65535 behind: in it */
	CHECK_INT_EQ(kbox__seq_lost(&s), 65547 - 4);
	kbox__seq_note(&s, "SESS_42_21", false); /* once */
	CHECK_INT_EQ(kbox__seq_lost(&s), 65547 - 4);
	kbox__seq_free(&s);
}

TEST(a_jump_forgets_what_the_window_saw_before_it)
{
	kbox__seq_t s = {0};
	/* 11 and 65547 share a slot of the window: after the jump, 12 (never
	 * seen) must count as seen once it comes, not as seen before */
	note_all(&s, (const long long[]){10, 11, 11 + 65536, 12, -1});
	CHECK_INT_EQ(s.seen, 4);
	CHECK_INT_EQ(kbox__seq_lost(&s), 65538 - 4);
	kbox__seq_free(&s);
}

TEST(free_forgets_everything)
{
	kbox__seq_t s = {0};
	note_all(&s, (const long long[]){5, 9, -1});
	kbox__seq_free(&s);
	CHECK(!s.set);
	CHECK(s.bits == NULL);
	CHECK_INT_EQ(kbox__seq_lost(&s), 0);
	kbox__seq_free(&s); /* twice, and NULL */
	kbox__seq_free(NULL);
}

/* ---- the scanner of a stream message's content ---- */

/* kbox__stream_text over the string S: *WHICH and *BYTES, or -1, -1. */
static void scan(const char *s, int *which, long long *bytes)
{
	size_t n;
	if (kbox__stream_text(s, strlen(s), which, &n)) {
		*bytes = (long long)n;
	} else {
		*which = -1;
		*bytes = -1;
	}
}

TEST(stdout_text_is_measured)
{
	int w;
	long long n;
	scan("{\"name\": \"stdout\", \"text\": \"hello\\n\"}", &w, &n);
	CHECK_INT_EQ(w, 0);
	CHECK_INT_EQ(n, 6);
}

TEST(stderr_is_told_apart_whatever_the_order_of_the_keys)
{
	int w;
	long long n;
	scan("{\"text\":\"ab\",\"name\":\"stderr\"}", &w, &n);
	CHECK_INT_EQ(w, 1);
	CHECK_INT_EQ(n, 2);
	scan(" \n{ \"name\" :\t\"stderr\" ,\r\"text\" : \"\" } ", &w, &n);
	CHECK_INT_EQ(w, 1);
	CHECK_INT_EQ(n, 0);
	scan("{\"name\":\"stderrX\",\"text\":\"a\"}", &w, &n); /* not stderr: stdout */
	CHECK_INT_EQ(w, 0);
}

TEST(escapes_count_the_bytes_they_decode_to)
{
	int w;
	long long n;
	/* a, \n, ", \, / (1 each), é (2), € (3), 😀 as a surrogate pair (4) */
	scan("{\"name\":\"stdout\",\"text\":\"a\\n\\\"\\\\\\/\\u00e9\\u20ac\\ud83d\\ude00\"}", &w,
	     &n);
	CHECK_INT_EQ(n, 5 + 2 + 3 + 4);
	/* raw UTF-8 counts its bytes */
	scan("{\"text\":\"\xc3\xa9\xe2\x82\xac\"}", &w, &n);
	CHECK_INT_EQ(n, 5);
	/* a lone surrogate, and a high one before another escape, as 3 bytes */
	scan("{\"text\":\"\\ud800\"}", &w, &n);
	CHECK_INT_EQ(n, 3);
	scan("{\"text\":\"\\ud83d\\u0041\"}", &w, &n);
	CHECK_INT_EQ(n, 3 + 1);
}

TEST(other_members_are_skipped_whatever_they_hold)
{
	int w;
	long long n;
	scan("{\"metadata\":{\"a\":[1,{\"b\":\"}]\\\"\"}],\"c\":true},\"x\":null,"
	     "\"t\\\"ext\":\"no\",\"name\":\"stderr\",\"n\":-1.5e3,\"text\":\"xyz\"}",
	     &w, &n);
	CHECK_INT_EQ(w, 1);
	CHECK_INT_EQ(n, 3);
}

TEST(content_without_text_to_count_is_refused)
{
	int w;
	long long n;
	const char *refused[] = {
	        "",
	        "   ",
	        "[]",
	        "\"text\"",
	        "{}",
	        "{\"name\":\"stdout\"}",
	        "{\"text\":5}",
	        "{\"text\":[\"a\"]}",
	        "{text:\"a\"}",
	        "{\"text\" \"a\"}",
	};
	for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
		scan(refused[i], &w, &n);
		if (n != -1)
			printf("# refused[%zu] = %s counted %lld\n", i, refused[i], n);
		CHECK_INT_EQ(n, -1);
	}
}

TEST(an_unknown_escape_is_measured_not_judged)
{
	int w;
	long long n;
	/* the scanner measures; only \u escapes are read (jansson would refuse \x) */
	scan("{\"text\":\"a\\x\"}", &w, &n);
	CHECK_INT_EQ(n, 2);
}

TEST(content_cut_short_is_refused_unless_the_text_was_whole)
{
	int w;
	long long n;
	const char *cut[] = {
	        "{",
	        "{\"text",
	        "{\"text\":",
	        "{\"text\":\"hel",
	        "{\"text\":\"a\\",
	        "{\"text\":\"a\\u00",
	        "{\"name\":\"stdout\",\"x\":[1,{\"a\":\"b\"}",
	        "{\"x\":\"\\\"",
	};
	for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
		scan(cut[i], &w, &n);
		if (n != -1)
			printf("# cut[%zu] = %s counted %lld\n", i, cut[i], n);
		CHECK_INT_EQ(n, -1);
	}
	/* cut after the text: what was there is counted */
	scan("{\"name\":\"stderr\",\"text\":\"abc\"", &w, &n);
	CHECK_INT_EQ(w, 1);
	CHECK_INT_EQ(n, 3);
	/* and the length given is the end, whatever follows in memory */
	CHECK(!kbox__stream_text("{\"text\":\"abc\"}", 11, &w, &(size_t){0}));
}

/* A new string of about N bytes: {"x":[ then PATTERN again and again, then
 * TAIL. */
static char *hostile(size_t n, const char *pattern, const char *tail)
{
	char *p = malloc(n + 1);
	size_t plen = strlen(pattern), tlen = strlen(tail), i = 0;
	if (!p)
		return NULL;
	memcpy(p, "{\"x\":[", 6);
	i = 6;
	while (i + plen + tlen < n) {
		memcpy(p + i, pattern, plen);
		i += plen;
	}
	memcpy(p + i, tail, tlen);
	i += tlen;
	p[i] = '\0';
	return p;
}

TEST(many_tiny_values_are_skipped_in_one_pass_without_allocating)
{
	int w = -1;
	size_t n = 0;
	/* 48 MB of "[]," (16 million empty arrays) before the text */
	char *p = hostile(48u << 20, "[],", "[]],\"text\":\"ok\"}");
	REQUIRE(p);
	CHECK(kbox__stream_text(p, strlen(p), &w, &n));
	CHECK_INT_EQ(n, 2);
	CHECK_INT_EQ(w, 0);
	free(p);
}

TEST(deep_nesting_is_skipped_without_recursion)
{
	int w = -1;
	size_t n = 0, len = 8u << 20;
	char *p = malloc(2 * len + 32);
	REQUIRE(p);
	memcpy(p, "{\"x\":", 5);
	memset(p + 5, '[', len);
	memset(p + 5 + len, ']', len);
	memcpy(p + 5 + 2 * len, ",\"text\":\"deep\"}", 16);
	CHECK(kbox__stream_text(p, strlen(p), &w, &n));
	CHECK_INT_EQ(n, 4);
	/* and cut before it closes */
	CHECK(!kbox__stream_text(p, 5 + len + len / 2, &w, &n));
	free(p);
}

TEST(a_text_of_escapes_is_measured_in_one_pass)
{
	int w = -1;
	size_t n = 0, k = 4u << 20; /* 4 Mi "\u20ac": 24 MiB of escapes, 12 MiB of text */
	char *p = malloc(6 * k + 64), *q;
	REQUIRE(p);
	q = p + sprintf(p, "{\"name\":\"stderr\",\"text\":\"");
	for (size_t i = 0; i < k; i++, q += 6)
		memcpy(q, "\\u20ac", 6);
	strcpy(q, "\"}");
	CHECK(kbox__stream_text(p, strlen(p), &w, &n));
	CHECK_INT_EQ(w, 1);
	CHECK_INT_EQ(n, 3 * k);
	free(p);
}

/* ---- the look at a raw message ---- */

/* kbox__droppable_output of the frames of Z. */
static bool droppable_frames(zmsg_t *z, const char *req_id, bool *ours, int *stream, size_t *bytes,
                             char *id, size_t id_size)
{
	kbox_frame_t f[16];
	size_t n = 0;
	for (zframe_t *fr = zmsg_first(z); fr && n < 16; fr = zmsg_next(z), n++) {
		f[n].data = zframe_data(fr);
		f[n].size = zframe_size(fr);
	}
	return kbox__droppable_output(f, n, req_id, ours, stream, bytes, id, id_size);
}

/* A raw message: an identity, the delimiter, a signature, then HEADER,
 * PARENT, "{}" and CONTENT. */
static zmsg_t *raw(const char *header, const char *parent, const char *content)
{
	zmsg_t *z = zmsg_new();
	zmsg_addstr(z, "some-identity");
	zmsg_addstr(z, KBOX_DELIMITER);
	zmsg_addstr(z, "not-checked");
	zmsg_addstr(z, header);
	zmsg_addstr(z, parent);
	zmsg_addstr(z, "{}");
	zmsg_addstr(z, content);
	return z;
}

TEST(our_stream_message_is_droppable_with_its_text_measured)
{
	zmsg_t *z = raw("{\"msg_type\":\"stream\",\"msg_id\":\"SESS_42_7\"}",
	                "{\"msg_id\":\"req-1\"}", "{\"name\":\"stderr\",\"text\":\"xyz\"}");
	bool ours = false;
	int stream = -2;
	size_t bytes = 99;
	char id[256];
	CHECK(droppable_frames(z, "req-1", &ours, &stream, &bytes, id, sizeof id));
	CHECK(ours);
	CHECK_INT_EQ(stream, 1);
	CHECK_INT_EQ(bytes, 3);
	CHECK_STR_EQ(id, "SESS_42_7");
	zmsg_destroy(&z);
}

TEST(anothers_output_is_droppable_but_not_ours_and_not_measured)
{
	zmsg_t *z = raw("{\"msg_type\":\"stream\",\"msg_id\":\"SESS_42_8\"}",
	                "{\"msg_id\":\"req-0\"}", "{\"name\":\"stdout\",\"text\":\"xyz\"}");
	bool ours = true;
	int stream = -2;
	size_t bytes = 99;
	char id[256];
	CHECK(droppable_frames(z, "req-1", &ours, &stream, &bytes, id, sizeof id));
	CHECK(!ours);
	CHECK_INT_EQ(stream, -1);
	CHECK_INT_EQ(bytes, 0);
	CHECK(droppable_frames(z, NULL, &ours, &stream, &bytes, id, sizeof id));
	CHECK(!ours);
	zmsg_destroy(&z);
}

TEST(display_data_is_droppable_other_messages_are_not)
{
	const char *types[] = {
	        "display_data", "update_display_data", "status",      "execute_result",
	        "error",        "execute_input",       "clear_output"};
	const bool droppable[] = {true, true, false, false, false, false, false};
	for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
		char h[128];
		bool ours;
		int stream;
		size_t bytes;
		char id[256];
		zmsg_t *z;
		snprintf(h, sizeof h, "{\"msg_type\":\"%s\",\"msg_id\":\"S_1_1\"}", types[i]);
		z = raw(h, "{\"msg_id\":\"req-1\"}", "{}");
		if (droppable_frames(z, "req-1", &ours, &stream, &bytes, id, sizeof id) !=
		    droppable[i]) {
			printf("# %s\n", types[i]);
			CHECK(0);
		}
		CHECK_INT_EQ(stream, -1);
		zmsg_destroy(&z);
	}
}

TEST(a_message_that_cannot_be_looked_at_is_not_droppable)
{
	bool ours;
	int stream;
	size_t bytes;
	char id[256], *big = malloc(KBOX_MAX_HEADER_BYTES + 64);
	zmsg_t *z;
	REQUIRE(big);
	/* no delimiter */
	z = zmsg_new();
	zmsg_addstr(z, "{\"msg_type\":\"stream\"}");
	CHECK(!droppable_frames(z, "req-1", &ours, &stream, &bytes, id, sizeof id));
	zmsg_destroy(&z);
	/* a header that is not JSON, or too large to decode */
	z = raw("{\"msg_type\":\"stream\"", "{}", "{}");
	CHECK(!droppable_frames(z, "req-1", &ours, &stream, &bytes, id, sizeof id));
	zmsg_destroy(&z);
	snprintf(big, KBOX_MAX_HEADER_BYTES + 64, "{\"msg_type\":\"stream\",\"pad\":\"%0*d\"}",
	         KBOX_MAX_HEADER_BYTES, 0);
	z = raw(big, "{}", "{}");
	CHECK(!droppable_frames(z, "req-1", &ours, &stream, &bytes, id, sizeof id));
	zmsg_destroy(&z);
	free(big);
}

TEST(a_msg_id_too_long_to_keep_is_none)
{
	char h[512], id[64];
	bool ours;
	int stream;
	size_t bytes;
	zmsg_t *z;
	snprintf(h, sizeof h, "{\"msg_type\":\"stream\",\"msg_id\":\"%070d_7\"}", 0);
	z = raw(h, "{\"msg_id\":\"req-1\"}", "{\"text\":\"a\"}");
	CHECK(droppable_frames(z, "req-1", &ours, &stream, &bytes, id, sizeof id));
	CHECK_STR_EQ(id, "");
	CHECK_INT_EQ(bytes, 1);
	zmsg_destroy(&z);
}

int main(void)
{
	RUN(zero_rates_mean_the_defaults_with_a_full_window);
	RUN(a_full_bucket_passes_its_window_of_messages_then_refuses);
	RUN(tokens_come_back_at_the_rate);
	RUN(tokens_never_exceed_the_window);
	RUN(a_message_larger_than_the_window_passes_once_and_is_charged_in_full);
	RUN(a_refused_message_takes_no_tokens);
	RUN(negative_rates_mean_no_limit);

	RUN(numbers_skipped_between_the_first_and_the_last_are_lost);
	RUN(nothing_counts_before_the_executions_first_message);
	RUN(a_reply_that_comes_before_the_iopub_messages_numbered_ahead_of_it_loses_nothing);
	RUN(once_the_idle_came_what_is_numbered_after_it_is_not_counted);
	RUN(a_number_below_the_first_is_counted_once_one_of_ours_comes_below_it);
	RUN(a_number_below_the_first_and_older_than_the_window_is_ignored);
	RUN(a_number_seen_twice_counts_once);
	RUN(a_late_number_fills_its_gap);
	RUN(ids_of_another_form_or_numbering_are_ignored);
	RUN(a_uuid_numbering_is_never_counted);
	RUN(a_jump_beyond_the_limit_is_another_numbering_not_a_loss);
	RUN(numbers_older_than_the_window_are_ignored);
	RUN(a_jump_forgets_what_the_window_saw_before_it);
	RUN(free_forgets_everything);

	RUN(stdout_text_is_measured);
	RUN(stderr_is_told_apart_whatever_the_order_of_the_keys);
	RUN(escapes_count_the_bytes_they_decode_to);
	RUN(other_members_are_skipped_whatever_they_hold);
	RUN(content_without_text_to_count_is_refused);
	RUN(an_unknown_escape_is_measured_not_judged);
	RUN(content_cut_short_is_refused_unless_the_text_was_whole);
	RUN(many_tiny_values_are_skipped_in_one_pass_without_allocating);
	RUN(deep_nesting_is_skipped_without_recursion);
	RUN(a_text_of_escapes_is_measured_in_one_pass);

	RUN(our_stream_message_is_droppable_with_its_text_measured);
	RUN(anothers_output_is_droppable_but_not_ours_and_not_measured);
	RUN(display_data_is_droppable_other_messages_are_not);
	RUN(a_message_that_cannot_be_looked_at_is_not_droppable);
	RUN(a_msg_id_too_long_to_keep_is_none);
	return tap_done();
}
