/* tests/unit_tap.c — the test selection of tests/tap.h (KBOX_TEST_RUN and
 * KBOX_TEST_SLOW), the syntax the shell tests share: numbers, ranges,
 * globs on the name, '!' to exclude; and its bound on a stuck test
 * (KBOX_TEST_STALL). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(stuck_forever)
{
	pause();
}

/* A test still running after KBOX_TEST_STALL seconds: the program says
 * "Bail out!" with its name and exits 99 (a hard error).  Run in a child
 * whose stdout is a pipe. */
TEST(a_stuck_test_bails_out_with_its_name)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	fflush(stdout);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		setenv("KBOX_TEST_STALL", "1", 1);
		unsetenv("KBOX_TEST_RUN");
		tap_run(stuck_forever, "stuck_forever", 0);
		_exit(0);
	}
	close(fds[1]);
	char out[256];
	size_t len = 0;
	ssize_t r;
	while (len < sizeof out - 1 && (r = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = '\0';
	close(fds[0]);
	int status = 0;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_INT_EQ(WEXITSTATUS(status), 99);
	CHECK_STR_EQ(out, "Bail out! test stuck_forever is still running after "
	                  "KBOX_TEST_STALL seconds: it is stuck\n");
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
	RUN(a_stuck_test_bails_out_with_its_name);
	return tap_done();
}
