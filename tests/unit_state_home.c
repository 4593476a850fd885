/* tests/unit_state_home.c — the state directory's path (src/runtime/
 * session.c): kr_resolve_home resolves as the kernel does, one part at a
 * time, and with REFUSE refuses a link in a directory the caller can
 * write at the very step it would follow it (review 16, B16-1);
 * kr_state_home resolves once in a process and from then on nothing
 * below the state directory is reached through a link (B16-2);
 * kr_session_check_home_usable, for one to be made, makes and removes
 * nothing of that name (another kbox may be making it meanwhile).
 *
 * Run as root (make check) or as an ordinary user; each test works in a
 * fresh directory under /tmp. */
#include "runtime/runtime.h"
#include "runtime/session.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "tmpdir.h"

static char *tmp;
static char dir[PATH_MAX]; /* tmp, its links resolved */
static kbox_error_t err;

/* DIR/NAME, in BUF (PATH_MAX bytes). */
static const char *at(char *buf, const char *name)
{
	int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);
	if (n < 0 || n >= PATH_MAX)
		buf[0] = '\0'; /* (then nothing is found there) */
	return buf;
}

/* A fresh DIR for the next test, holding a/b (directories) and f (a
 * file). */
static int fresh(void)
{
	char p[PATH_MAX];
	int fd;
	if (tmp)
		test_rm_rf(tmp);
	free(tmp);
	memset(&err, 0, sizeof err);
	if (!(tmp = test_mkdtemp("state-home")) || !realpath(tmp, dir))
		return -1;
	if (mkdir(at(p, "a"), 0700) < 0 || mkdir(at(p, "a/b"), 0700) < 0)
		return -1;
	if ((fd = open(at(p, "f"), O_WRONLY | O_CREAT, 0600)) < 0)
		return -1;
	close(fd);
	return 0;
}

/* kr_resolve_home of DIR/REL, or NULL (ERR says why). */
static char *resolve(const char *rel, bool refuse)
{
	char p[PATH_MAX];
	memset(&err, 0, sizeof err);
	return kr_resolve_home(at(p, rel), refuse, &err);
}

#define CHECK_RESOLVES(rel, refuse, want_rel)                             \
	do {                                                              \
		char want_[PATH_MAX], *got_ = resolve(rel, refuse);       \
		CHECK_STR_EQ(got_ ? got_ : err.msg, at(want_, want_rel)); \
		free(got_);                                               \
	} while (0)

TEST(dots_empty_parts_and_parts_not_there_come_out_plain)
{
	REQUIRE(fresh() == 0);
	CHECK_RESOLVES("a/./b//", false, "a/b");
	CHECK_RESOLVES("a/b/../b/c", false, "a/b/c");      /* c is not there */
	CHECK_RESOLVES("a/x/y/../../b", false, "a/b");     /* below a part not there */
	CHECK_RESOLVES("a/x/../b/c/d/..", false, "a/b/c"); /* "..": the plain part goes */
	{
		char *got = kr_resolve_home("/", false, &err);
		CHECK_STR_EQ(got ? got : err.msg, "/");
		free(got);
		got = kr_resolve_home("/..//.", false, &err);
		CHECK_STR_EQ(got ? got : err.msg, "/");
		free(got);
	}
}

TEST(links_are_followed_as_the_kernel_follows_them)
{
	char p[PATH_MAX], q[PATH_MAX];
	REQUIRE(fresh() == 0);
	REQUIRE(symlink("a", at(p, "rel")) == 0);            /* relative */
	REQUIRE(symlink(at(q, "a/b"), at(p, "abs")) == 0);   /* absolute */
	REQUIRE(symlink("../../a", at(p, "a/b/up")) == 0);   /* up, then down */
	REQUIRE(symlink("rel/b/up/b", at(p, "chain")) == 0); /* through the others */
	CHECK_RESOLVES("rel/b", false, "a/b");
	CHECK_RESOLVES("abs/new", false, "a/b/new");
	CHECK_RESOLVES("a/b/up/b", false, "a/b");
	CHECK_RESOLVES("chain/..", false, "a"); /* ".." of where it led */
	CHECK_RESOLVES("chain/x/../y", false, "a/b/y");
}

TEST(a_loop_of_links_and_a_file_on_the_way_are_refused)
{
	char p[PATH_MAX];
	char *got;
	REQUIRE(fresh() == 0);
	REQUIRE(symlink("loop", at(p, "loop")) == 0);
	got = resolve("loop/x", false);
	CHECK(got == NULL);
	CHECK_CONTAINS(err.msg, "cannot follow loop");
	CHECK_CONTAINS(err.msg, strerror(ELOOP));
	free(got);
	got = resolve("f/x", false);
	CHECK(got == NULL);
	REQUIRE(snprintf(p, sizeof p, ": %s/f is not a directory", dir) < (int)sizeof p);
	CHECK_CONTAINS(err.msg, p);
	free(got);
}

TEST(with_refuse_a_link_in_a_directory_the_caller_can_write_is_refused_where_it_is)
{
	char p[PATH_MAX], want[PATH_MAX * 2];
	char *got;
	REQUIRE(fresh() == 0);
	REQUIRE(symlink("a", at(p, "l")) == 0);
	/* (the advice names KBOX_HOME alone when the path came from it) */
	REQUIRE(setenv("KBOX_HOME", at(p, "l/b/new"), 1) == 0);
	got = resolve("l/b/new", true);
	unsetenv("KBOX_HOME");
	CHECK(got == NULL);
	REQUIRE(snprintf(
	                want, sizeof want,
	                "state directory %s/l/b/new: %s/l is a symbolic link in a directory you can "
	                "write, where code of a sandbox could have put it to have kbox use another "
	                "state directory (kbox(7), threat 44); give KBOX_HOME the directory it leads "
	                "to: %s/a/b/new",
	                dir, dir, dir) < (int)sizeof want);
	CHECK_STR_EQ(err.msg, want);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	free(got);
	/* a link reached through another (the name where it is, resolved) */
	REQUIRE(symlink("b", at(p, "a/lb")) == 0);
	got = resolve("a/lb", true);
	CHECK(got == NULL);
	REQUIRE(snprintf(want, sizeof want, ": %s/a/lb is a symbolic link", dir) <
	        (int)sizeof want);
	CHECK_CONTAINS(err.msg, want);
	free(got);
	CHECK_RESOLVES("a/b/c", true, "a/b/c"); /* no link: as without */
}

TEST(with_refuse_a_link_of_another_in_a_sticky_directory_is_followed)
{
	char p[PATH_MAX];
	REQUIRE(fresh() == 0);
	/* /tmp's case: anyone writes there, but only the link's owner could
	 * have put it there (or root) */
	REQUIRE(chmod(dir, 01777) == 0);
	REQUIRE(symlink("a", at(p, "theirs")) == 0);
	if (geteuid() != 0) {
		/* (an ordinary user cannot give a link away: the own case only) */
		char *got = resolve("theirs", true);
		CHECK(got == NULL);
		CHECK_CONTAINS(err.msg, "is a symbolic link in a directory you can write");
		free(got);
		return;
	}
	REQUIRE(lchown(p, 65534, 65534) == 0);
	CHECK_RESOLVES("theirs/b", true, "a/b");
	REQUIRE(lchown(p, 0, 0) == 0); /* root's own: root could have put it */
	{
		char *got = resolve("theirs/b", true);
		CHECK(got == NULL);
		free(got);
	}
}

TEST(state_home_resolves_once_and_then_reaches_nothing_below_through_a_link)
{
	char p[PATH_MAX], q[PATH_MAX], *home, *again;
	int fd;
	REQUIRE(fresh() == 0);
	REQUIRE(mkdir(at(p, "other"), 0700) == 0);
	REQUIRE(mkdir(at(p, "a/b/sessions"), 0700) == 0);
	REQUIRE(mkdir(at(p, "other/sessions"), 0700) == 0);
	REQUIRE(setenv("KBOX_HOME", at(p, "a/./b"), 1) == 0);
	home = kr_state_home(&err);
	CHECK_STR_EQ(home ? home : err.msg, at(q, "a/b"));
	/* b swapped for a link to another state directory, as code that can
	 * write a could: the next call says the same, and nothing below b is
	 * reached through the link */
	REQUIRE(rename(at(p, "a/b"), at(q, "a/b.real")) == 0);
	REQUIRE(symlink(at(q, "other"), at(p, "a/b")) == 0);
	again = kr_state_home(&err);
	CHECK_STR_EQ(again ? again : err.msg, at(q, "a/b"));
	errno = 0;
	fd = kx_open_path(AT_FDCWD, at(p, "a/b/sessions"), O_PATH | O_DIRECTORY, 0);
	CHECK_INT_EQ(fd, -1);
	CHECK_INT_EQ(errno, ELOOP);
	if (fd >= 0)
		close(fd);
	free(home);
	free(again);
	/* another KBOX_HOME is resolved afresh */
	REQUIRE(setenv("KBOX_HOME", at(p, "other"), 1) == 0);
	home = kr_state_home(&err);
	CHECK_STR_EQ(home ? home : err.msg, at(q, "other"));
	free(home);
	unsetenv("KBOX_HOME");
	kx_no_links_below(NULL);
}

/* One kbox checks that a state directory can be made while another makes
 * it: the check once made the directory itself and removed it, so the
 * other found it there, then saw it go (CI: "cannot create
 * HOME/.kbox-state: No such file or directory").  The check makes a
 * directory of its own name beside it, and nothing of the name HOME. */
TEST(a_check_that_home_can_be_made_makes_and_removes_nothing_of_its_name)
{
	char p[PATH_MAX], buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int fd, made = 0, of_home = 0;
	ssize_t n;
	REQUIRE(fresh() == 0);
	REQUIRE((fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) >= 0);
	REQUIRE(inotify_add_watch(fd, at(p, "a"), IN_CREATE | IN_DELETE) >= 0);
	memset(&err, 0, sizeof err);
	CHECK_INT_EQ(kr_session_check_home_usable(at(p, "a/home"), &err), 0);
	CHECK_STR_EQ(err.msg, "");
	while ((n = read(fd, buf, sizeof buf)) > 0)
		for (char *q = buf; q < buf + n;) {
			const struct inotify_event *e = (const struct inotify_event *)q;
			if (e->len && strcmp(e->name, "home") == 0)
				of_home++;
			else if (e->len && strncmp(e->name, ".kbox-probe.", 12) == 0)
				made++;
			q += sizeof *e + e->len;
		}
	close(fd);
	CHECK_INT_EQ(of_home, 0);
	CHECK_INT_EQ(made, 2); /* its own, made and removed */
	CHECK_INT_EQ(access(at(p, "a/home"), F_OK), -1);
}

int main(void)
{
	RUN(dots_empty_parts_and_parts_not_there_come_out_plain);
	RUN(links_are_followed_as_the_kernel_follows_them);
	RUN(a_loop_of_links_and_a_file_on_the_way_are_refused);
	RUN(with_refuse_a_link_in_a_directory_the_caller_can_write_is_refused_where_it_is);
	RUN(with_refuse_a_link_of_another_in_a_sticky_directory_is_followed);
	RUN(state_home_resolves_once_and_then_reaches_nothing_below_through_a_link);
	RUN(a_check_that_home_can_be_made_makes_and_removes_nothing_of_its_name);
	if (tmp)
		test_rm_rf(tmp);
	free(tmp);
	return tap_done();
}
