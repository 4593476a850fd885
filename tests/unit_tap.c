/* tests/unit_tap.c — the test selection of tests/tap.h (KBOX_TEST_RUN and
 * KBOX_TEST_SLOW), the syntax the shell tests share: numbers, ranges,
 * globs on the name, '!' to exclude. */
#include <stdio.h>
#include <stdlib.h>

#include "tap.h"

/* Which of tests 1..6 named by NAMES the selection SEL runs, as a string
 * of their numbers ("135"). */
static const char *picked(const char *sel)
{
	static const char *const names[] = {"a_one",  "b_two",  "c_three",
	                                    "b_four", "e_five", "f_six"};
	static char out[8];
	size_t n = 0;
	for (int i = 0; i < 6; i++)
		if (tap_selects(sel, i + 1, names[i]))
			out[n++] = (char)('1' + i);
	out[n] = '\0';
	return out;
}

TEST(no_selection_runs_every_test)
{
	CHECK_STR_EQ(picked(NULL), "123456");
	CHECK_STR_EQ(picked(""), "123456");
	CHECK_STR_EQ(picked(",,"), "123456");
}

TEST(a_number_picks_that_test)
{
	CHECK_STR_EQ(picked("3"), "3");
	CHECK_STR_EQ(picked("3,5"), "35");
	CHECK_STR_EQ(picked("9"), "");
}

TEST(a_range_picks_its_ends_and_between)
{
	CHECK_STR_EQ(picked("2-4"), "234");
	CHECK_STR_EQ(picked("5-5"), "5");
	CHECK_STR_EQ(picked("4-2"), "");
	CHECK_STR_EQ(picked("1-2,6"), "126");
}

TEST(a_glob_picks_the_names_it_matches)
{
	CHECK_STR_EQ(picked("b_*"), "24");
	CHECK_STR_EQ(picked("*e"), "135");
	CHECK_STR_EQ(picked("c_three"), "3");
	CHECK_STR_EQ(picked("?_[st]*"), "236");
	CHECK_STR_EQ(picked("c_thre"), "");
}

TEST(bang_excludes_and_wins_over_a_positive_item)
{
	CHECK_STR_EQ(picked("!3"), "12456");
	CHECK_STR_EQ(picked("!b_*"), "1356");
	CHECK_STR_EQ(picked("2-5,!3-4"), "25");
	CHECK_STR_EQ(picked("b_*,!4"), "2");
	CHECK_STR_EQ(picked("3,!3"), "");
}

TEST(empty_items_are_ignored)
{
	CHECK_STR_EQ(picked("3,,5,"), "35");
	CHECK_STR_EQ(picked(",!2"), "13456");
}

/* What tap_why_skipped says, with KBOX_TEST_SLOW set to MODE (NULL: unset)
 * and no KBOX_TEST_RUN; "run" when the test runs. */
static const char *slow_mode(const char *mode, int slow)
{
	const char *why;
	const char *saved = getenv("KBOX_TEST_RUN");
	char *copy = saved ? strdup(saved) : NULL;
	unsetenv("KBOX_TEST_RUN");
	if (mode)
		setenv("KBOX_TEST_SLOW", mode, 1);
	else
		unsetenv("KBOX_TEST_SLOW");
	why = tap_why_skipped(1, "a_test", slow);
	unsetenv("KBOX_TEST_SLOW");
	if (copy)
		setenv("KBOX_TEST_RUN", copy, 1);
	free(copy);
	return why ? why : "run";
}

TEST(slow_tests_run_only_when_kbox_test_slow_says_so)
{
	CHECK_STR_EQ(slow_mode(NULL, 1), "slow: make check-slow");
	CHECK_STR_EQ(slow_mode("", 1), "slow: make check-slow");
	CHECK_STR_EQ(slow_mode("0", 1), "slow: make check-slow");
	CHECK_STR_EQ(slow_mode("1", 1), "run");
	CHECK_STR_EQ(slow_mode("only", 1), "run");
	CHECK_STR_EQ(slow_mode(NULL, 0), "run");
	CHECK_STR_EQ(slow_mode("1", 0), "run");
	CHECK_STR_EQ(slow_mode("only", 0), "not slow: make check runs it");
}

int main(void)
{
	RUN(no_selection_runs_every_test);
	RUN(a_number_picks_that_test);
	RUN(a_range_picks_its_ends_and_between);
	RUN(a_glob_picks_the_names_it_matches);
	RUN(bang_excludes_and_wins_over_a_positive_item);
	RUN(empty_items_are_ignored);
	RUN(slow_tests_run_only_when_kbox_test_slow_says_so);
	return tap_done();
}
