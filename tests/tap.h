/* tests/tap.h — a tiny TAP harness: one TEST per behaviour, checks that
 * record a failure and go on, a plan printed at the end.
 *
 *   TEST(signature_matches_python_vector) { CHECK_STR_EQ(a, b); }
 *   int main(void) { RUN(signature_matches_python_vector); return tap_done(); }
 */
#ifndef KBOX_TESTS_TAP_H
#define KBOX_TESTS_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n;      /* tests run */
static int tap_failed; /* tests failed */
static int tap_cur_failed;
static const char *tap_skip_reason;

#define TEST(name) static void name(void)

#define RUN(name)                                                                  \
	do {                                                                       \
		tap_cur_failed = 0;                                                \
		tap_skip_reason = NULL;                                            \
		fflush(stdout);                                                    \
		name();                                                            \
		tap_n++;                                                           \
		if (tap_skip_reason)                                               \
			printf("ok %d - %s # SKIP %s\n", tap_n, #name, tap_skip_reason); \
		else if (tap_cur_failed) {                                         \
			tap_failed++;                                              \
			printf("not ok %d - %s\n", tap_n, #name);                  \
		} else                                                             \
			printf("ok %d - %s\n", tap_n, #name);                      \
		fflush(stdout);                                                    \
	} while (0)

/* Mark the current test skipped with REASON and return from it. */
#define SKIP(reason)                                                               \
	do {                                                                       \
		tap_skip_reason = (reason);                                        \
		return;                                                            \
	} while (0)

#define CHECK(cond)                                                                \
	do {                                                                       \
		if (!(cond)) {                                                     \
			printf("# %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			tap_cur_failed = 1;                                        \
		}                                                                  \
	} while (0)

/* CHECK, then return from the test when it failed (later checks depend on it). */
#define REQUIRE(cond)                                                              \
	do {                                                                       \
		if (!(cond)) {                                                     \
			printf("# %s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
			tap_cur_failed = 1;                                        \
			return;                                                    \
		}                                                                  \
	} while (0)

#define CHECK_INT_EQ(a, b)                                                         \
	do {                                                                       \
		long long tap_a = (long long)(a), tap_b = (long long)(b);          \
		if (tap_a != tap_b) {                                              \
			printf("# %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, \
			       #a, #b, tap_a, tap_b);                              \
			tap_cur_failed = 1;                                        \
		}                                                                  \
	} while (0)

#define CHECK_STR_EQ(a, b)                                                         \
	do {                                                                       \
		const char *tap_a = (a), *tap_b = (b);                             \
		if (!tap_a || !tap_b || strcmp(tap_a, tap_b) != 0) {               \
			printf("# %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, \
			       __LINE__, #a, #b, tap_a ? tap_a : "(null)",         \
			       tap_b ? tap_b : "(null)");                          \
			tap_cur_failed = 1;                                        \
		}                                                                  \
	} while (0)

/* CHECK that haystack A contains needle B. */
#define CHECK_CONTAINS(a, b)                                                       \
	do {                                                                       \
		const char *tap_a = (a), *tap_b = (b);                             \
		if (!tap_a || !tap_b || !strstr(tap_a, tap_b)) {                   \
			printf("# %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, \
			       __LINE__, tap_a ? tap_a : "(null)", tap_b ? tap_b : "(null)"); \
			tap_cur_failed = 1;                                        \
		}                                                                  \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
