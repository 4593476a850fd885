/* tests/tap.h — a tiny TAP harness: one TEST per behaviour, checks that
 * record a failure and go on, a plan printed at the end.
 *
 *   TEST(signature_matches_python_vector) { CHECK_STR_EQ(a, b); }
 *   int main(void) { RUN(signature_matches_python_vector); return tap_done(); }
 *
 * Which tests run (the environment, as the shell tests' tests/lib.sh):
 *
 * KBOX_TEST_RUN  a comma-separated list of items; an item is a test number
 *                N, a range N-M, or a shell glob matched against the test's
 *                name (fnmatch); an item that starts with '!' excludes.  A
 *                test runs when it matches a positive item (or there is
 *                none) and no '!' item: "3,7-9", "*utf8*,!*slow*".  Unset
 *                or empty: every test.  (tests/lib.sh reads it the same
 *                way for the shell tests: keep the two alike.)
 * KBOX_TEST_SLOW unset, "" or "0": a test run with RUN_SLOW is skipped
 *                (make check); "only": only those run (make check-slow);
 *                anything else: they run with the rest.
 *
 * A test not run is reported "ok N - NAME # SKIP <why>": the numbers never
 * change with the selection.
 *
 * KBOX_TEST_STALL seconds (600 by default, as tests/lib.sh's hang guard)
 *                bound one test: a test still running then is stuck, and the
 *                program says "Bail out!" with its name and exits 99 (a hard
 *                error), so that a hang does not hang the suite.  No test
 *                here takes near that: it judges no test's speed. */
#ifndef KBOX_TESTS_TAP_H
#define KBOX_TESTS_TAP_H

#include <ctype.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int tap_n;      /* tests run */
static int tap_failed; /* tests failed */
static int tap_cur_failed;
static const char *tap_skip_reason;

#define TEST(name) static void name(void)

/* Run test NAME (a TEST) and report it, unless the selection skips it. */
#define RUN(name) tap_run(name, #name, 0)
/* The same for a test too slow for make check: make check-slow runs it. */
#define RUN_SLOW(name) tap_run(name, #name, 1)

/* If ITEM (LEN bytes, no '!') is "N" or "N-M", its bounds in *LO and *HI. */
static inline int tap_item_range(const char *item, size_t len, long *lo, long *hi)
{
	char buf[64], *end;
	if (len == 0 || len >= sizeof buf || !isdigit((unsigned char)item[0]))
		return 0;
	memcpy(buf, item, len);
	buf[len] = '\0';
	*lo = *hi = strtol(buf, &end, 10);
	if (*end == '-' && isdigit((unsigned char)end[1]))
		*hi = strtol(end + 1, &end, 10);
	return *end == '\0';
}

/* Does ITEM (LEN bytes of KBOX_TEST_RUN, without its '!') pick test N
 * named NAME? */
static inline int tap_item_matches(const char *item, size_t len, int n, const char *name)
{
	char pattern[256];
	long lo, hi;
	if (tap_item_range(item, len, &lo, &hi))
		return n >= lo && n <= hi;
	if (len >= sizeof pattern)
		return 0;
	memcpy(pattern, item, len);
	pattern[len] = '\0';
	return fnmatch(pattern, name, 0) == 0;
}

/* Does the selection SEL (KBOX_TEST_RUN's syntax; NULL or "": all) run
 * test N named NAME? */
static inline int tap_selects(const char *sel, int n, const char *name)
{
	int positive = 0, picked = 0;
	for (const char *p = sel; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len > 0 && *p == '!') {
			if (tap_item_matches(p + 1, len - 1, n, name))
				return 0;
		} else if (len > 0) {
			positive = 1;
			picked = picked || tap_item_matches(p, len, n, name);
		}
		p = comma ? comma + 1 : NULL;
	}
	return !positive || picked;
}

/* Why test N named NAME (SLOW: run with RUN_SLOW) is not run this time, or
 * NULL when it is. */
static inline const char *tap_why_skipped(int n, const char *name, int slow)
{
	const char *mode = getenv("KBOX_TEST_SLOW");
	int slow_on = mode && *mode && strcmp(mode, "0") != 0;
	int slow_only = mode && strcmp(mode, "only") == 0;
	if (!tap_selects(getenv("KBOX_TEST_RUN"), n, name))
		return "not selected by KBOX_TEST_RUN";
	if (slow && !slow_on)
		return "slow: make check-slow";
	if (!slow && slow_only)
		return "not slow: make check runs it";
	return NULL;
}

static const char *tap_running; /* the test under way, for tap_stuck */

static inline void tap_say(const char *s)
{
	if (write(STDOUT_FILENO, s, strlen(s)) < 0)
		return;
}

/* SIGALRM: the test under way outlived KBOX_TEST_STALL. */
static inline void tap_stuck(int sig)
{
	(void)sig;
	tap_say("Bail out! test ");
	tap_say(tap_running ? tap_running : "?");
	tap_say(" is still running after KBOX_TEST_STALL seconds: it is stuck\n");
	_exit(99);
}

static inline unsigned tap_stall_s(void)
{
	const char *v = getenv("KBOX_TEST_STALL");
	long s = v && *v ? strtol(v, NULL, 10) : 600;
	return s > 0 && s < 86400 ? (unsigned)s : 600;
}

static inline void tap_run(void (*fn)(void), const char *name, int slow)
{
	tap_cur_failed = 0;
	tap_skip_reason = tap_why_skipped(tap_n + 1, name, slow);
	fflush(stdout);
	if (!tap_skip_reason) {
		tap_running = name;
		signal(SIGALRM, tap_stuck);
		alarm(tap_stall_s());
		fn();
		alarm(0);
		tap_running = NULL;
	}
	tap_n++;
	if (tap_skip_reason)
		printf("ok %d - %s # SKIP %s\n", tap_n, name, tap_skip_reason);
	else if (tap_cur_failed) {
		tap_failed++;
		printf("not ok %d - %s\n", tap_n, name);
	} else
		printf("ok %d - %s\n", tap_n, name);
	fflush(stdout);
}

/* Mark the current test skipped with REASON and return from it. */
#define SKIP(reason)                        \
	do {                                \
		tap_skip_reason = (reason); \
		return;                     \
	} while (0)

#define CHECK(cond)                                                                       \
	do {                                                                              \
		if (!(cond)) {                                                            \
			printf("# %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			tap_cur_failed = 1;                                               \
		}                                                                         \
	} while (0)

/* CHECK, then return from the test when it failed (later checks depend on it). */
#define REQUIRE(cond)                                                                       \
	do {                                                                                \
		if (!(cond)) {                                                              \
			printf("# %s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
			tap_cur_failed = 1;                                                 \
			return;                                                             \
		}                                                                           \
	} while (0)

#define CHECK_INT_EQ(a, b)                                                                         \
	do {                                                                                       \
		long long tap_a = (long long)(a), tap_b = (long long)(b);                          \
		if (tap_a != tap_b) {                                                              \
			printf("# %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, \
			       #b, tap_a, tap_b);                                                  \
			tap_cur_failed = 1;                                                        \
		}                                                                                  \
	} while (0)

#define CHECK_STR_EQ(a, b)                                                                         \
	do {                                                                                       \
		const char *tap_a = (a), *tap_b = (b);                                             \
		if (!tap_a || !tap_b || strcmp(tap_a, tap_b) != 0) {                               \
			printf("# %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, \
			       #a, #b, tap_a ? tap_a : "(null)", tap_b ? tap_b : "(null)");        \
			tap_cur_failed = 1;                                                        \
		}                                                                                  \
	} while (0)

/* CHECK that haystack A contains needle B. */
#define CHECK_CONTAINS(a, b)                                                                    \
	do {                                                                                    \
		const char *tap_a = (a), *tap_b = (b);                                          \
		if (!tap_a || !tap_b || !strstr(tap_a, tap_b)) {                                \
			printf("# %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
			       tap_a ? tap_a : "(null)", tap_b ? tap_b : "(null)");             \
			tap_cur_failed = 1;                                                     \
		}                                                                               \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
