/* tests/unit_cgroup.c — the ledger of the cgroups the runtime makes
 * (src/runtime/cgroup.c: kr_cgroup_record and kr_cgroup_reap): each
 * cgroup's directory is listed before it is made and leaves the list once
 * removed, so what a killed process left is known exactly; a reap removes
 * what is listed, only "kbox-…" directories directly under the caller's
 * own cgroup, and never anything else.
 *
 * The ledger file lives in a fresh /tmp directory.  The cgroups are real
 * (the module finds the hierarchies in /proc/self/mountinfo and cannot be
 * pointed at a directory of ours): the tests that make one run where this
 * process may (root, or a delegated subtree) and are skipped with the
 * reason elsewhere.  Those that only read a ledger run everywhere. */
#define _GNU_SOURCE
#include "private.h"
#include "runtime/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "tmpdir.h"

static char *tmp;             /* this test's private directory */
static char ledger[PATH_MAX]; /* TMP/ledger */
static char why[1024];        /* kr_cgroup_available's reasons */
static unsigned avail;        /* and its mask */

/* Run test NAME with a fresh TMP and LEDGER; nothing recorded after it. */
#define RUN_IN_TMP(name)                                                    \
	do {                                                                \
		tmp = test_mkdtemp("unit-cgroup");                          \
		if (!tmp) {                                                 \
			printf("Bail out! mkdtemp: %s\n", strerror(errno)); \
			exit(99);                                           \
		}                                                           \
		snprintf(ledger, sizeof ledger, "%s/ledger", tmp);          \
		RUN(name);                                                  \
		kr_cgroup_record(NULL);                                     \
		test_rm_rf(tmp);                                            \
		free(tmp);                                                  \
		tmp = NULL;                                                 \
	} while (0)

/* The whole text of file PATH into BUF ("" when it cannot be read);
 * whether it exists. */
static bool slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = 0, r;
	buf[0] = '\0';
	if (fd < 0)
		return false;
	while ((size_t)n + 1 < size && (r = read(fd, buf + n, size - 1 - (size_t)n)) > 0)
		n += r;
	buf[n] = '\0';
	close(fd);
	return true;
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		printf("# writing %s: %s\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* The directories of SELF, one a line in the order the module makes them
 * (memory, pids, cpu; a hierarchy once), into BUF: what the ledger must
 * hold.  How many. */
static int dirs_of(const kr_cgroup_t *self, char *buf, size_t size)
{
	static const unsigned bits[] = {KR_CG_MEMORY, KR_CG_PIDS, KR_CG_CPU};
	size_t n = 0;
	int count = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
		char where[PATH_MAX + 32], line[PATH_MAX + 2];
		const char *dir;
		kr_cgroup_where(self, bits[i], where, sizeof where);
		if (!where[0] || !(dir = strchr(where + strlen("cgroup v"), ' ')))
			continue;
		snprintf(line, sizeof line, "%s\n", dir + 1);
		if (strstr(buf, line))
			continue;
		n += (size_t)snprintf(buf + n, size - n, "%s", line);
		count++;
	}
	return count;
}

/* The name of a cgroup of this test: "kbox-unit-PID-TAG". */
static const char *name_of(const char *tag)
{
	static char name[64];
	snprintf(name, sizeof name, "kbox-unit-%ld-%s", (long)getpid(), tag);
	return name;
}

/* Skip the test, saying why, when this process cannot make cgroups. */
#define NEED_CGROUPS()                                                                      \
	do {                                                                                \
		if (!avail)                                                                 \
			SKIP("this process cannot make cgroups (the first line says why)"); \
	} while (0)

/* ---- the ledger alone: no cgroup is made ---- */

/* Reaping a ledger that does not exist removes nothing and makes no file. */
TEST(reap_without_a_ledger_removes_nothing)
{
	CHECK_INT_EQ(kr_cgroup_reap(ledger), 0);
	CHECK(!exists(ledger));
}

/* Lines that are not a "kbox-…" directory directly under this process's
 * own cgroup are dropped from the ledger and never touched, even when
 * they name a directory called kbox-… elsewhere; a ledger left without
 * lines is removed. */
TEST(reap_drops_lines_that_are_not_our_cgroups_and_touches_nothing)
{
	char decoy[PATH_MAX], text[3 * PATH_MAX];
	snprintf(decoy, sizeof decoy, "%s/kbox-decoy", tmp);
	REQUIRE(mkdir(decoy, 0755) == 0);
	snprintf(text, sizeof text, "%s\n/\nrelative/kbox-x\n%s/not-kbox\n\n", decoy, tmp);
	put(ledger, text);
	CHECK_INT_EQ(kr_cgroup_reap(ledger), 0);
	CHECK(exists(decoy));
	CHECK(!exists(ledger));
}

/* With no ledger set, making and removing cgroups writes nothing. */
TEST(no_record_means_no_ledger_file)
{
	kr_cgroup_t *cg;
	NEED_CGROUPS();
	kr_cgroup_record(NULL);
	cg = kr_cgroup_new(name_of("none"), avail, 0, 0, 0, why, sizeof why);
	REQUIRE(cg != NULL);
	kr_cgroup_destroy(&cg);
	CHECK(cg == NULL);
	CHECK(!exists(ledger));
}

/* ---- with real cgroups ---- */

/* Each directory is in the ledger while the cgroup lives, one a line, and
 * leaves it when the cgroup is destroyed: then the ledger is gone. */
TEST(ledger_lists_a_cgroup_while_it_lives)
{
	char want[4 * PATH_MAX], got[4 * PATH_MAX];
	kr_cgroup_t *cg;
	NEED_CGROUPS();
	kr_cgroup_record(ledger);
	cg = kr_cgroup_new(name_of("live"), avail, 0, 0, 0, why, sizeof why);
	REQUIRE(cg != NULL);
	CHECK_INT_EQ(kr_cgroup_enforced(cg), avail);
	CHECK(dirs_of(cg, want, sizeof want) >= 1);
	CHECK(slurp(ledger, got, sizeof got));
	CHECK_STR_EQ(got, want);
	for (char *line = want, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		CHECK(exists(line));
	}
	kr_cgroup_destroy(&cg);
	CHECK(!exists(ledger));
	for (char *line = want; *line; line += strlen(line) + 1)
		CHECK(!exists(line));
}

/* Two cgroups: destroying one takes only its lines out. */
TEST(destroying_one_cgroup_leaves_the_others_lines)
{
	char a[4 * PATH_MAX], b[4 * PATH_MAX], got[8 * PATH_MAX];
	kr_cgroup_t *ca, *cb;
	NEED_CGROUPS();
	kr_cgroup_record(ledger);
	ca = kr_cgroup_new(name_of("a"), avail, 0, 0, 0, why, sizeof why);
	cb = kr_cgroup_new(name_of("b"), avail, 0, 0, 0, why, sizeof why);
	REQUIRE(ca != NULL && cb != NULL);
	dirs_of(ca, a, sizeof a);
	dirs_of(cb, b, sizeof b);
	kr_cgroup_destroy(&ca);
	CHECK(slurp(ledger, got, sizeof got));
	CHECK_STR_EQ(got, b);
	kr_cgroup_destroy(&cb);
	CHECK(!exists(ledger));
}

/* What a process killed with SIGKILL left is in its ledger, and a reap
 * removes exactly that: the directories go, and so does the ledger. */
TEST(reap_removes_what_a_killed_process_left)
{
	char got[4 * PATH_MAX], keep_dirs[4 * PATH_MAX], killed[64];
	kr_cgroup_t *keep;
	pid_t pid;
	int status, n = 0;
	NEED_CGROUPS();
	/* a cgroup of ours not in the ledger: the reap must leave it */
	keep = kr_cgroup_new(name_of("keep"), avail, 0, 0, 0, why, sizeof why);
	REQUIRE(keep != NULL);
	dirs_of(keep, keep_dirs, sizeof keep_dirs);
	snprintf(killed, sizeof killed, "%s", name_of("killed")); /* this pid's, not the child's */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		kr_cgroup_t *cg;
		kr_cgroup_record(ledger);
		cg = kr_cgroup_new(killed, avail, 0, 0, 0, why, sizeof why);
		(void)cg;
		raise(SIGKILL);
		_exit(1);
	}
	REQUIRE(pid > 0);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK(slurp(ledger, got, sizeof got));
	for (char *line = got, *nl; (nl = strchr(line, '\n')); line = nl + 1, n++) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%.*s", (int)(nl - line), line);
		CHECK(exists(dir));
		CHECK(strstr(dir, killed) != NULL);
	}
	CHECK(n >= 1);
	CHECK_INT_EQ(kr_cgroup_reap(ledger), n);
	for (char *line = got, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		CHECK(!exists(line));
	}
	CHECK(!exists(ledger));
	for (char *line = keep_dirs, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		CHECK(exists(line));
	}
	kr_cgroup_destroy(&keep);
}

/* A listed kbox cgroup that is already gone counts as removed and leaves
 * the ledger; the lines of others stay out of it too. */
TEST(reap_counts_a_listed_cgroup_already_gone)
{
	char dirs[4 * PATH_MAX], text[8 * PATH_MAX];
	kr_cgroup_t *cg;
	int n;
	NEED_CGROUPS();
	cg = kr_cgroup_new(name_of("gone"), avail, 0, 0, 0, why, sizeof why);
	REQUIRE(cg != NULL);
	n = dirs_of(cg, dirs, sizeof dirs);
	kr_cgroup_destroy(&cg);
	snprintf(text, sizeof text, "%s/etc\n", dirs);
	put(ledger, text);
	CHECK_INT_EQ(kr_cgroup_reap(ledger), n);
	CHECK(!exists(ledger));
}

/* A cgroup that cannot be recorded is not made: NULL, the reason names
 * the ledger, and no directory of that name appears. */
TEST(cgroup_that_cannot_be_recorded_is_not_made)
{
	char bad[PATH_MAX + 32], w[2048] = "", dirs[4 * PATH_MAX], probe[64];
	kr_cgroup_t *cg;
	NEED_CGROUPS();
	/* where a cgroup of that name would go: a probe's directories, renamed */
	snprintf(probe, sizeof probe, "%s", name_of("probe"));
	cg = kr_cgroup_new(probe, avail, 0, 0, 0, w, sizeof w);
	REQUIRE(cg != NULL);
	dirs_of(cg, dirs, sizeof dirs);
	kr_cgroup_destroy(&cg);
	snprintf(bad, sizeof bad, "%s/no-such-dir/ledger", tmp);
	kr_cgroup_record(bad);
	cg = kr_cgroup_new(name_of("unrecorded"), avail, 0, 0, 0, w, sizeof w);
	CHECK(cg == NULL);
	CHECK_CONTAINS(w, "cannot record");
	CHECK_CONTAINS(w, bad);
	kr_cgroup_destroy(&cg);
	for (char *line = dirs, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%.*s%s", (int)(nl - line - strlen(probe)), line,
		         name_of("unrecorded"));
		CHECK(!exists(dir));
	}
	CHECK(!exists(bad));
}

int main(void)
{
	avail = kr_cgroup_available(why, sizeof why);
	printf("# cgroups: %s\n", avail ? "this process can make them" : why);
	RUN_IN_TMP(reap_without_a_ledger_removes_nothing);
	RUN_IN_TMP(reap_drops_lines_that_are_not_our_cgroups_and_touches_nothing);
	RUN_IN_TMP(no_record_means_no_ledger_file);
	RUN_IN_TMP(ledger_lists_a_cgroup_while_it_lives);
	RUN_IN_TMP(destroying_one_cgroup_leaves_the_others_lines);
	RUN_IN_TMP(reap_removes_what_a_killed_process_left);
	RUN_IN_TMP(reap_counts_a_listed_cgroup_already_gone);
	RUN_IN_TMP(cgroup_that_cannot_be_recorded_is_not_made);
	return tap_done();
}
