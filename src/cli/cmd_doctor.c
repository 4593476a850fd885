/* src/cli/cmd_doctor.c — kbox doctor: what isolation this machine gives a
 * kernel, checked by doing it: bubblewrap, user namespaces, seccomp, the
 * bounds each sandbox gets in its user namespace, each cgroup controller
 * (and how to get them delegated), the kernel's interpreter and packages
 * in the sandbox. */
#include "config.h"
#include "cli.h"
#include "runtime/ro_bind.h"
#include "runtime/bwrap.h"
#include "runtime/cgroup.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
	json_t *checks;
	format_t format;
	bool state_bad;  /* the sandbox user cannot reach the state directory */
	bool rootfs_bad; /* ... or the --rootfs given */
} report_t;

/* One check: STATUS is "ok", "warn", "fail" or "skip" (not checked, since
 * one it depends on failed: the reason is DETAIL); MEANING says what it
 * means for isolation (may be NULL; a line each, after the first
 * indented further). */
static void check(report_t *r, const char *name, const char *status, const char *detail,
                  const char *meaning)
{
	json_array_append_new(r->checks,
	                      json_pack("{s:s, s:s, s:s, s:s}", "check", name, "status", status,
	                                "detail", detail, "meaning", meaning ? meaning : ""));
	if (r->format != FMT_TEXT)
		return;
	printf("%-5s %-16s %s\n", status, name, detail);
	for (const char *l = meaning, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		nl = strchr(l, '\n');
		printf("%*s%s%.*s\n", 23, "", l == meaning ? "-> " : "   ",
		       (int)(nl ? nl - l : (ptrdiff_t)strlen(l)), l);
	}
}

/* The first line of a small file, "" when unreadable. */
static void first_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");

	kx_first_line(f, buf, size);
	if (f)
		fclose(f);
}

/* What the sandbox's Python reports about itself and its packages. */
static const char probe_py[] =
        "import importlib\n"
        "for l in open('/proc/self/status'):\n"
        "    if l.startswith(('NoNewPrivs', 'Seccomp:', 'CapEff')): print(l.strip())\n"
        "for m in ('ipykernel', 'pandas', 'numpy', 'matplotlib', 'scipy'):\n"
        "    try: print('module', m, importlib.import_module(m).__version__)\n"
        "    except Exception as e: print('missing', m, type(e).__name__ + ': ' + str(e))\n";

/* Run the administration tool TOOLS names (the first there is) with
 * ARGV (ARGV[0] is set here), to WHAT ("create the user kbox").  0, or -1
 * with WHY. */
static int run_admin(const char *const *tools, size_t n_tools, char **argv, const char *what,
                     char *why, size_t size)
{
	const char *tool = NULL;
	pid_t pid;
	int st;

	for (size_t i = 0; i < n_tools && !tool; i++)
		if (access(tools[i], X_OK) == 0)
			tool = tools[i];
	if (!tool) {
		snprintf(why, size, "cannot %s: %s not found (install the Debian package passwd)",
		         what, strrchr(tools[0], '/') + 1);
		return -1;
	}
	argv[0] = (char *)tool;
	cli_flush_stdout();
	if ((pid = fork()) < 0) {
		snprintf(why, size, "cannot %s: fork: %s", what, strerror(errno));
		return -1;
	}
	if (pid == 0) {
		char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		int null = open("/dev/null", O_RDONLY);
		if (null >= 0)
			dup2(null, 0);
		dup2(2, 1); /* the tool's messages are diagnostics */
		execve(tool, argv, env);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			snprintf(why, size, "cannot %s: waitpid: %s", what, strerror(errno));
			return -1;
		}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(why, size, "cannot %s: %s failed (status %d)", what, tool,
		         WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		return -1;
	}
	return 0;
}

/* Create the sandbox user USER (a system account: no home, no shell, a
 * group of its own) with useradd.  0, or -1 with WHY. */
static int make_sandbox_user(const char *user, char *why, size_t size)
{
	static const char *const tools[] = {"/usr/sbin/useradd", "/sbin/useradd"};
	char what[160];
	/* a name useradd takes as a name, never as an option */
	bool ok = (user[0] >= 'a' && user[0] <= 'z') || user[0] == '_';
	for (const char *p = user; ok && *p; p++)
		ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
	if (!ok || strlen(user) > 32) {
		snprintf(why, size,
		         "cannot create the user \"%s\": a user name is 1 to 32 of a-z, "
		         "0-9, '_' and '-', starting with a letter or '_'",
		         user);
		return -1;
	}
	snprintf(what, sizeof what, "create the user %s", user);
	{
		char *argv[] = {NULL,         "--system",       "--user-group", "--no-create-home",
		                "--home-dir", "/nonexistent",   "--shell",      "/usr/sbin/nologin",
		                "--comment",  "kbox sandboxes", "--",           (char *)user,
		                NULL};
		return run_admin(tools, 2, argv, what, why, size);
	}
}

/* Give the sandbox user ID a range of KR_SESSION_UIDS_MAX subordinate uids
 * (usermod --add-subuids): the first from 100000 up, on a boundary of the
 * range's size, that no range of /etc/subuid and no account's uid is in.
 * 0, or -1 with WHY. */
static int make_sandbox_range(const kr_sandbox_id_t *id, char *why, size_t size)
{
	static const char *const tools[] = {"/usr/sbin/usermod", "/sbin/usermod"};
	unsigned long long start = 100000, n = KR_SESSION_UIDS_MAX;
	char range[64], what[160], line[256];
	bool moved = true;
	FILE *f;

	while (moved && start + n <= UINT32_MAX) {
		struct passwd *pw;
		moved = false;
		if ((f = fopen(KR_SUBUID_FILE, "re"))) {
			while (!moved && fgets(line, sizeof line, f)) {
				unsigned long long a, c;
				char *p = strchr(line, ':');
				if (p && sscanf(p + 1, "%llu:%llu", &a, &c) == 2 && a < start + n &&
				    start < a + c) {
					start = (a + c + n - 1) / n * n;
					moved = true;
				}
			}
			fclose(f);
		}
		setpwent();
		while (!moved && (pw = getpwent()))
			if (pw->pw_uid >= start && pw->pw_uid < start + n) {
				start = ((unsigned long long)pw->pw_uid + n) / n * n;
				moved = true;
			}
		endpwent();
	}
	if (start + n > UINT32_MAX) {
		snprintf(why, size, "cannot give %s a range of uids: none is free", id->user);
		return -1;
	}
	snprintf(range, sizeof range, "%llu-%llu", start, start + n - 1);
	snprintf(what, sizeof what, "give %s the uids %s", id->user, range);
	{
		char *argv[] = {NULL, "--add-subuids", range, "--", (char *)id->user, NULL};
		return run_admin(tools, 2, argv, what, why, size);
	}
}

/* The row of a state directory kbox cannot even resolve (a link refused,
 * a directory on the way it may not search): every command refuses it. */
static void home_unusable(report_t *r, const kbox_error_t *err)
{
	check(r, "state directory", "fail", err->msg,
	      "every kbox command refuses it: give KBOX_HOME a directory of your own");
	r->state_bad = true;
}

/* Who sandboxes run as: the caller, or under root the sandbox user (made
 * with FIX when missing).  Fills BO's identity.  False when there is none. */
static bool check_identity(report_t *r, kr_bwrap_opts_t *bo, bool fix)
{
	uid_t first = 0, count = 0;
	kr_sandbox_id_t id;
	kbox_error_t err = {0};
	char buf[1024], *home;
	if (geteuid() != 0) {
		snprintf(buf, sizeof buf,
		         "sandboxes run as you (uid %u); inside, uid 1000 is you, "
		         "and nothing else of the host",
		         (unsigned)geteuid());
		check(r, "identity", "ok", buf, NULL);
		/* the state directory: private, as every command wants it */
		if ((home = kr_state_home(&err))) {
			if (kr_session_check_home_usable(home, &err) < 0) {
				check(r, "state directory", "fail", err.msg,
				      "kbox refuses a state directory open to others, and cannot "
				      "make sessions in one it cannot write");
				r->state_bad = true;
			} else {
				struct stat st;
				snprintf(buf, sizeof buf, "%s: %s", home,
				         stat(home, &st) == 0
				                 ? "private to you"
				                 : "not made yet; it can be made, private to you");
				check(r, "state directory", "ok", buf, NULL);
			}
			free(home);
		} else
			home_unusable(r, &err);
		return true;
	}
	if (kr_sandbox_identity(&id, &err) < 0 && fix && err.code == KBOX_E_NOTFOUND) {
		const char *user = getenv("KBOX_SANDBOX_USER");
		if (!user || !*user)
			user = KR_SANDBOX_USER;
		if (make_sandbox_user(user, err.msg, sizeof err.msg) == 0) {
			if (r->format == FMT_TEXT)
				printf("fixed: created the system user %s for sandboxes\n", user);
			err = (kbox_error_t){0};
			kr_sandbox_identity(&id, &err);
		}
	}
	if (!id.drop) {
		check(r, "identity", "fail", err.msg,
		      "under root, kbox start refuses the bwrap backend until the sandbox user exists "
		      "(kbox doctor --fix creates it)");
		return false;
	}
	bo->drop_ids = true;
	bo->uid = id.uid;
	bo->gid = id.gid;
	/* each session's sandbox a uid of its own, from the user's range */
	if (kr_sandbox_range(&id, &first, &count, &err) < 0 && fix && err.code == KBOX_E_NOTFOUND) {
		if (make_sandbox_range(&id, err.msg, sizeof err.msg) == 0) {
			err = (kbox_error_t){0};
			if (kr_sandbox_range(&id, &first, &count, &err) == 0 &&
			    r->format == FMT_TEXT)
				printf("fixed: gave %s the uids %u-%u for sessions' sandboxes\n",
				       id.user, (unsigned)first, (unsigned)(first + count - 1));
		}
	}
	if (!count) {
		check(r, "identity", "fail", err.msg,
		      "under root, kbox start refuses the bwrap backend until the sandbox user has a "
		      "range of uids (kbox doctor --fix gives it one)");
		return false;
	}
	snprintf(buf, sizeof buf,
	         "under root, each session's sandbox runs as a uid of its own, from %u-%u (the "
	         "sandbox user %s's range), in group %s (gid %u): uid 1000 inside is that uid "
	         "outside, never root",
	         (unsigned)first, (unsigned)(first + count - 1), id.user, id.user,
	         (unsigned)id.gid);
	check(r, "identity", "ok", buf, NULL);
	/* the state directory: bwrap finds the session's directories as any
	 * session's uid, in that user's group */
	if ((home = kr_state_home(&err))) {
		if (kr_session_check_home_usable(home, &err) < 0) {
			check(r, "state directory", "fail", err.msg,
			      "kbox refuses a state directory open to others, and cannot make "
			      "sessions in one it cannot write");
			r->state_bad = true;
		} else if (kr_session_check_home_reachable(home, &id, &err) < 0) {
			check(r, "state directory", "fail", err.msg,
			      "sessions there cannot start: bwrap cannot find their directories");
			r->state_bad = true;
		} else {
			snprintf(buf, sizeof buf,
			         "%s: the sandbox user can reach it (kbox lets it pass "
			         "through, mode 0710)",
			         home);
			check(r, "state directory", "ok", buf, NULL);
		}
		free(home);
	} else
		home_unusable(r, &err);
	return true;
}

/* The bounds each sandbox gets in its own user namespace, checked by
 * setting them on one: RLIMIT_NPROC 3 on the sandbox's first process
 * (bwrap's init), under which its shell can fork once (a third process)
 * only if Linux counts processes in the sandbox's user namespace, not all
 * of the sandbox user's (bwrap outside, and this command or the rest
 * besides); then the inotify limits.  True when RLIMIT_NPROC bounds each
 * session alone. */
static bool check_bounds(report_t *r, const kr_bwrap_opts_t *bo)
{
	char *fork_once[] = {"/bin/sh", "-c", "/bin/true && echo forked", NULL};
	char *nothing[] = {"/bin/true", NULL};
	kr_bwrap_opts_t o = *bo;
	kbox_error_t err = {0};
	char out[512], buf[1024], lim[64];
	bool per_session;
	int rc;

	o.nproc = 3;
	rc = kr_bwrap_run(&o, fork_once, out, sizeof out, &err);
	per_session = rc == 0 && strcmp(out, "forked") == 0;
	if (per_session) {
		snprintf(buf, sizeof buf,
		         "counted in each sandbox's own user namespace: where it "
		         "stands in for the pids cgroup, it bounds one session, not "
		         "all the processes of the %s",
		         geteuid() == 0 ? "sandbox user" : "user");
		check(r, "rlimit nproc", "ok", buf, NULL);
	} else {
		snprintf(buf, sizeof buf,
		         "counts all the processes of the %s here (under RLIMIT_NPROC 3 "
		         "the sandbox could not fork: %.200s)",
		         geteuid() == 0 ? "sandbox user" : "user", rc < 0 ? err.msg : out);
		check(r, "rlimit nproc", "warn", buf,
		      "where it stands in for the pids cgroup, one session's processes and threads "
		      "exhaust it for every other session and, as an ordinary user, for your own "
		      "programs (Linux 5.14 and later count it per user namespace)");
	}
	o.nproc = 0;
	o.inotify = true;
	err = (kbox_error_t){0};
	first_line("/proc/sys/fs/inotify/max_user_instances", lim, sizeof lim);
	if ((rc = kr_bwrap_run(&o, nothing, out, sizeof out, &err)) == 0) {
		/* what those instances count against too: the user's own limit
		 * (a session's own uid's, under root) */
		char room[256] = "";
		long max = lim[0] ? strtol(lim, NULL, 10) : -1;
		if (max >= 0 && geteuid() == 0)
			snprintf(room, sizeof room,
			         "; each session's own uid has the %ld of "
			         "fs.inotify.max_user_instances to itself",
			         max);
		else if (max >= 0)
			snprintf(
			        room, sizeof room,
			        "; the user's %ld (fs.inotify.max_user_instances) are room for %ld "
			        "sessions at that bound, shared with your own programs",
			        max, max / KR_BWRAP_INOTIFY_INSTANCES);
		snprintf(buf, sizeof buf,
		         "each session may hold %d inotify instances and %d watches "
		         "(the limits of its own user namespace)%s",
		         KR_BWRAP_INOTIFY_INSTANCES, KR_BWRAP_INOTIFY_WATCHES, room);
		check(r, "inotify", "ok", buf, NULL);
	} else {
		snprintf(buf, sizeof buf, "not bounded per session: %.300s",
		         rc < 0   ? err.msg
		         : out[0] ? out
		                  : "the sandbox failed");
		snprintf(out, sizeof out,
		         "one session can use all the inotify instances of the %s "
		         "(fs.inotify.max_user_instances, %s), for every other session%s",
		         geteuid() == 0 ? "sandbox user" : "user", lim[0] ? lim : "unknown",
		         geteuid() == 0 ? "" : " and your own programs");
		check(r, "inotify", "warn", buf, out);
	}
	return per_session;
}

/* Append to BUF (SIZE bytes, *N used) what FMT says. */
static void append(char *buf, size_t size, size_t *n, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, size_t *n, const char *fmt, ...)
{
	va_list ap;
	if (*n >= size)
		return;
	va_start(ap, fmt);
	*n += (size_t)vsnprintf(buf + *n, size - *n, fmt, ap);
	va_end(ap);
}

/* Where cgroups cannot be used (UNUSABLE, a mask of KR_CG_*), how to
 * get them: warned, whatever the identity, since without them what one
 * session uses is taken from what all the sandbox user's processes share. */
static void check_delegation(report_t *r, unsigned unusable, bool nproc_per_session)
{
	char meaning[4096], detail[256], user[64];
	size_t n = 0;
	int v1 = 0, v2 = 0;
	struct passwd *pw = getpwuid(geteuid());

	snprintf(user, sizeof user, "%s", pw ? pw->pw_name : "USER");
	for (unsigned bit = 1; bit <= KR_CG_CPU; bit <<= 1)
		if (unusable & bit) {
			int v = kr_cgroup_version(bit);
			v1 |= v == 1;
			v2 |= v == 2;
		}
#define SAY(...) append(meaning, sizeof meaning, &n, __VA_ARGS__)
	SAY("without cgroups each session is bounded process by process, not as a whole: its "
	    "processes together may take more memory than --memory, and all the CPUs, from what "
	    "every other session and %s need",
	    geteuid() == 0 ? "the host" : "your own programs");
	if (nproc_per_session)
		SAY("\nRLIMIT_NPROC, which stands in for the pids cgroup, bounds each session alone "
		    "(see rlimit nproc); all sessions' processes together still count against the "
		    "process limit kbox runs with (ulimit -u)");
	else
		SAY("\nRLIMIT_NPROC, which stands in for the pids cgroup, is shared by all the "
		    "processes of the %s: one session's threads exhaust it for every other "
		    "session%s",
		    geteuid() == 0 ? "sandbox user" : "user",
		    geteuid() == 0 ? "" : " and for your own shell");
	if (geteuid() == 0) {
		snprintf(detail, sizeof detail,
		         "root cannot make cgroups here (the cgroup file system "
		         "is read-only or absent)");
		SAY("\nto get cgroup limits, run kbox where root may write /sys/fs/cgroup (a container "
		    "needs a writable cgroup file system of its own)");
	} else {
		snprintf(detail, sizeof detail,
		         "no cgroup is delegated to you (uid %u): the limits of "
		         "sessions fall back to rlimits",
		         (unsigned)geteuid());
		SAY("\nto get cgroup limits, start kbox inside a cgroup of your own (kbox makes each "
		    "session's cgroups in the one it runs in):");
		if (v2 || !v1) {
			SAY("\n  systemd: systemd-run --user --scope -p Delegate=yes kbox start ..., or a "
			    "user service with Delegate=yes; run kbox doctor the same way to see the "
			    "limits it then gets");
			SAY("\n  cgroup v2: an administrator gives you a cgroup DIR (chown %s DIR "
			    "DIR/cgroup.procs DIR/cgroup.subtree_control DIR/cgroup.threads) with memory, "
			    "pids and cpu in DIR/cgroup.controllers, and you move your shell into it "
			    "(echo $$ > DIR/cgroup.procs)",
			    user);
		}
		if (v1)
			SAY("\n  cgroup v1 (this machine): an administrator makes you one in each "
			    "hierarchy (for c in memory pids cpu; do mkdir /sys/fs/cgroup/$c/kbox-%s && "
			    "chown -R %s /sys/fs/cgroup/$c/kbox-%s; done), and you move your shell into "
			    "them (for c in memory pids cpu; do echo $$ > "
			    "/sys/fs/cgroup/$c/kbox-%s/cgroup.procs; done)",
			    user, user, user, user);
	}
#undef SAY
	check(r, "delegation", "warn", detail, meaning);
}

/* Check for bubblewrap and say its version.  Its path (new), or NULL when
 * there is none. */
static char *check_bwrap(report_t *r)
{
	char *bwrap = kr_bwrap_path(), buf[4096], line[256] = "";
	FILE *p;

	if (!bwrap) {
		check(r, "bubblewrap", "fail",
		      "bwrap not found in /usr/local/bin, /usr/bin or /bin",
		      "no sandbox: kbox start fails unless --backend none (unsandboxed) is chosen; "
		      "install the Debian package bubblewrap");
		return NULL;
	}
	snprintf(buf, sizeof buf, "%s --version 2>&1", bwrap);
	kx_first_line(p = popen(buf, "re"), line, sizeof line);
	if (p)
		pclose(p);
	snprintf(buf, sizeof buf, "%s (%s)", line[0] ? line : "bubblewrap", bwrap);
	check(r, "bubblewrap", "ok", buf, NULL);
	return bwrap;
}

/* Check that an unprivileged user may make user namespaces (the sysctls
 * that forbid it). */
static void check_userns(report_t *r)
{
	char line[256], clone[64], buf[512];

	first_line("/proc/sys/user/max_user_namespaces", line, sizeof line);
	if (line[0] && atol(line) == 0) {
		check(r, "user namespaces", "fail", "user.max_user_namespaces is 0",
		      "bwrap cannot make a sandbox (sysctl user.max_user_namespaces=15000 allows it)");
		return;
	}
	first_line("/proc/sys/kernel/unprivileged_userns_clone", clone, sizeof clone);
	/* under root too: bwrap runs as the unprivileged sandbox user */
	if (clone[0] == '0') {
		check(r, "user namespaces", "fail", "kernel.unprivileged_userns_clone is 0",
		      "bwrap cannot make a sandbox as an unprivileged user (sysctl "
		      "kernel.unprivileged_userns_clone=1 allows it)");
		return;
	}
	snprintf(buf, sizeof buf, "enabled (user.max_user_namespaces %s)",
	         line[0] ? line : "unknown");
	check(r, "user namespaces", "ok", buf, NULL);
}

/* Check that the kernel has seccomp (a Seccomp line in /proc/self/status). */
static void check_seccomp(report_t *r)
{
	FILE *f = fopen("/proc/self/status", "re");
	char buf[4096];
	bool has = false;

	while (f && fgets(buf, sizeof buf, f))
		if (strncmp(buf, "Seccomp:", 8) == 0)
			has = true;
	if (f)
		fclose(f);
	if (has)
		check(r, "seccomp", "ok",
		      "the kernel filters system calls (Seccomp in /proc/self/status)", NULL);
	else
		check(r, "seccomp", "fail", "this kernel has no seccomp",
		      "bwrap cannot load the filter: no sandbox");
}

/* Make a sandbox with BO when there is bwrap (BWRAP) and a sandbox user
 * (IDS_OK), and check its bounds when it was made.  True when it was;
 * *NPROC_OK says whether RLIMIT_NPROC bounds each sandbox alone. */
/* The --rootfs ROOTFS (resolved): under root, bwrap finds it as the
 * sandbox user, as it finds the state directory, so the same diagnosis
 * and chmod when it cannot.  False then (R->rootfs_bad). */
static bool check_rootfs(report_t *r, const char *rootfs, bool ids_ok)
{
	kr_sandbox_id_t id = {0};
	kbox_error_t err = {0};
	char buf[PATH_MAX + 128];
	struct stat st;

	/* what kbox start asks of it: a directory with a usr directory */
	snprintf(buf, sizeof buf, "%s/usr", rootfs);
	if (stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode) || stat(buf, &st) < 0 ||
	    !S_ISDIR(st.st_mode)) {
		snprintf(buf, sizeof buf, "%s is %s", rootfs,
		         stat(rootfs, &st) == 0 && !S_ISDIR(st.st_mode)
		                 ? "not a directory"
		                 : "a directory without usr: no root filesystem");
		check(r, "rootfs", "fail", buf,
		      "give kbox start --rootfs a root filesystem (one mmdebstrap made, say); "
		      "the sandbox below is judged on the host's files");
		r->rootfs_bad = true;
		return false;
	}
	/* any session's uid: the group's and others' bits */
	if (ids_ok && kr_sandbox_identity(&id, &err) == 0 && (id.uid = (uid_t)-1) &&
	    kr_sandbox_reachable(&id, rootfs, &err) < 0) {
		check(r, "rootfs", "fail", err.msg,
		      "sessions with this --rootfs cannot start: bwrap cannot find it");
		r->rootfs_bad = true;
		return false;
	}
	snprintf(buf, sizeof buf, "%s%s", rootfs, id.drop ? ": the sandbox user can reach it" : "");
	check(r, "rootfs", "ok", buf, NULL);
	return true;
}

static bool check_sandbox(report_t *r, kr_bwrap_opts_t *bo, const char *bwrap, bool ids_ok,
                          bool *nproc_ok)
{
	kbox_error_t err = {0};
	bool made = false;

	*nproc_ok = false;
	if (!bwrap)
		check(r, "sandbox", "skip", "not made: no bwrap", NULL);
	else if (!ids_ok)
		check(r, "sandbox", "skip", "not made: no sandbox user", NULL);
	else if (kr_bwrap_probe(bo, &err) == 0) {
		made = true;
		check(r, "sandbox", "ok",
		      "bwrap made one: new user, pid, net, ipc, uts and cgroup namespaces, uid "
		      "1000 without capabilities, seccomp filter, read-only system files",
		      NULL);
	} else
		check(r, "sandbox", "fail", err.msg, "kernels cannot be isolated here");
	if (made)
		*nproc_ok = check_bounds(r, bo);
	else {
		check(r, "rlimit nproc", "skip", "not checked: no sandbox", NULL);
		check(r, "inotify", "skip", "not checked: no sandbox", NULL);
	}
	return made;
}

#define CG_ALL (KR_CG_MEMORY | KR_CG_PIDS | KR_CG_CPU)

/* Check each cgroup controller by making a cgroup with limits and removing
 * it again; say how to get those not usable delegated.  The controllers
 * that enforce limits (KR_CG_* bits). */
static unsigned check_cgroups(report_t *r, bool nproc_ok)
{
	char why[1024], name[64], where[PATH_MAX + 32], buf[4096];
	kr_cgroup_t *cg;
	unsigned enforced;
	const struct {
		unsigned bit;
		const char *label, *without;
	} ctl[] = {
	        {KR_CG_MEMORY, "cgroup memory",
	         "--memory falls back to RLIMIT_DATA (allocations fail with MemoryError; "
	         "memory the kernel maps from files or shares is not counted; it bounds each "
	         "process, not the session)"},
	        {KR_CG_PIDS, "cgroup pids",
	         nproc_ok ? "--pids falls back to RLIMIT_NPROC in the sandbox's user namespace, "
	                    "which bounds each session alone (see rlimit nproc)"
	                  : "--pids falls back to RLIMIT_NPROC, which counts all the processes of "
	                    "the user sandboxes run as (every session's, and an ordinary user's "
	                    "own)"},
	        {KR_CG_CPU, "cgroup cpu", "--cpus cannot be enforced"},
	};

	snprintf(name, sizeof name, "kbox-doctor-%ld", (long)getpid());
	cg = kr_cgroup_new(name, CG_ALL, 64LL << 20, 0.5, 64, why, sizeof why);
	enforced = kr_cgroup_enforced(cg);
	for (size_t i = 0; i < sizeof ctl / sizeof *ctl; i++) {
		if (enforced & ctl[i].bit) {
			kr_cgroup_where(cg, ctl[i].bit, where, sizeof where);
			kx_msgf(buf, sizeof buf, "limits can be set (%s, removed again)", where);
			check(r, ctl[i].label, "ok", buf, NULL);
		} else {
			const char *mine = strstr(why, kr_cgroup_name(ctl[i].bit));
			snprintf(buf, sizeof buf, "not usable: %s", mine ? mine : why);
			if (strchr(buf, ';'))
				*strchr(buf, ';') = '\0';
			check(r, ctl[i].label, "warn", buf, ctl[i].without);
		}
	}
	kr_cgroup_destroy(&cg);
	if ((enforced & CG_ALL) != CG_ALL)
		check_delegation(r, ~enforced & CG_ALL, nproc_ok);
	return enforced;
}

/* Check a kernel of another language than Python: its program EXE runs
 * (--version) in the sandbox with what its installation needs bound; the
 * checks of the sandbox itself are Python's.  True when it ran. */
static bool check_other_kernel(report_t *r, kr_bwrap_opts_t *bo, const kbox_kspec_t *spec,
                               char *exe, const char *rootfs)
{
	const char *const deny[] = {NULL};
	kbox_error_t err = {0};
	char **binds = kr_ro_bind_find(rootfs, spec, exe, deny, &err);
	char *cmd[] = {exe, "--version", NULL}, out[4096], buf[4096];
	int rc = -1;
	bool ran = false;

	if (binds) {
		bo->ro_binds = binds;
		rc = kr_bwrap_run(bo, cmd, out, sizeof out, &err);
		bo->ro_binds = NULL;
	}
	if (rc != 0) {
		snprintf(buf, sizeof buf, "%s failed in the sandbox (%s %d): %.300s", exe,
		         binds ? "status" : "binds", rc, rc < 0 ? err.msg : out);
		check(r, "interpreter", "fail", buf, "the kernel cannot start");
	} else {
		char *nl = strchr(out, '\n');
		if (nl)
			*nl = '\0';
		snprintf(buf, sizeof buf, "%s runs in the sandbox: %.200s", exe, out);
		check(r, "interpreter", "ok", buf, NULL);
		ran = true;
	}
	snprintf(buf, sizeof buf,
	         "not checked: the kernel's language is %s (kbox checks Python's packages)",
	         kbox_kspec_language(spec) ? kbox_kspec_language(spec) : "non-Python");
	check(r, "packages", "skip", buf, NULL);
	kbox_strv_free(binds);
	return ran;
}

/* What probe_py says of the sandbox it ran in. */
typedef struct {
	bool seccomp, nnp, nocap, ipykernel;
	char missing[512]; /* "; "-separated, "" when nothing is */
	char mods[1024];   /* the modules found, ", "-separated */
} probe_t;

/* Read probe_py's output OUT (cut in pieces) into P. */
static void parse_probe(char *out, probe_t *p)
{
	char *save = NULL;

	memset(p, 0, sizeof *p);
	for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "Seccomp:", 8) == 0 && atoi(l + 8) == 2)
			p->seccomp = true;
		else if (strncmp(l, "NoNewPrivs:", 11) == 0 && atoi(l + 11) == 1)
			p->nnp = true;
		else if (strncmp(l, "CapEff:", 7) == 0 && strtoull(l + 7, NULL, 16) == 0)
			p->nocap = true;
		else if (strncmp(l, "module ", 7) == 0) {
			snprintf(p->mods + strlen(p->mods), sizeof p->mods - strlen(p->mods),
			         "%s%s", p->mods[0] ? ", " : "", l + 7);
			if (strncmp(l + 7, "ipykernel ", 10) == 0)
				p->ipykernel = true;
		} else if (strncmp(l, "missing ", 8) == 0)
			snprintf(p->missing + strlen(p->missing),
			         sizeof p->missing - strlen(p->missing), "%s%s",
			         p->missing[0] ? "; " : "", l + 8);
	}
}

/* Check a Python kernel: its interpreter EXE runs probe_py in the sandbox,
 * which says how confined it is and which packages it finds.  True when
 * ipykernel is there; *SANDBOX_OK becomes false when the sandbox is weaker
 * than it should be. */
static bool check_python_kernel(report_t *r, kr_bwrap_opts_t *bo, char *exe, bool *sandbox_ok)
{
	char *cmd[] = {exe, "-c", (char *)probe_py, NULL};
	char out[4096], buf[4096];
	kbox_error_t err = {0};
	int rc = kr_bwrap_run(bo, cmd, out, sizeof out, &err);
	probe_t p;
	bool confined;

	if (rc != 0) {
		snprintf(buf, sizeof buf, "%s failed in the sandbox (status %d): %.300s", exe, rc,
		         rc < 0 ? err.msg : out);
		check(r, "interpreter", "fail", buf, "the kernel cannot start");
		check(r, "packages", "skip", "not checked: the interpreter failed", NULL);
		return false;
	}
	parse_probe(out, &p);
	confined = p.seccomp && p.nnp && p.nocap;
	snprintf(buf, sizeof buf,
	         "%s runs in the sandbox: seccomp filter %s, no_new_privs %s, capabilities %s", exe,
	         p.seccomp ? "on" : "OFF", p.nnp ? "set" : "NOT SET", p.nocap ? "none" : "SOME");
	check(r, "interpreter", confined ? "ok" : "fail", buf,
	      confined ? NULL : "the sandbox is weaker than it should be");
	if (!confined)
		*sandbox_ok = false;
	check(r, "packages",
	      !p.ipykernel   ? "fail"
	      : p.missing[0] ? "warn"
	                     : "ok",
	      p.mods[0] ? p.mods : "none found",
	      !p.ipykernel   ? "no ipykernel: the kernel cannot start (apt-get install "
	                       "python3-ipykernel)"
	      : p.missing[0] ? p.missing
	                     : NULL);
	return p.ipykernel;
}

/* Check the kernel KERNEL: its spec, its interpreter (found in ROOTFS, or
 * the host's when NULL), and, when the sandbox was made (*SANDBOX_OK), the
 * interpreter and its packages in it.  True when the kernel can run. */
static bool check_kernel(report_t *r, kr_bwrap_opts_t *bo, const char *kernel, const char *rootfs,
                         bool *sandbox_ok)
{
	kbox_error_t err = {0};
	kbox_kspec_t *spec = kbox_kspec_find(kernel, &err);
	const char *argv0, *language;
	char *exe = NULL, buf[4096];
	bool ok = false;

	if (!spec) {
		check(r, "kernelspec", "fail", err.msg, "no kernel to run");
		check(r, "interpreter", "skip", "not checked: no kernelspec", NULL);
		check(r, "packages", "skip", "not checked: no kernelspec", NULL);
		return false;
	}
	argv0 = kbox_kspec_argv(spec)[0];
	language = kbox_kspec_language(spec);
	snprintf(buf, sizeof buf, "%s: %s", kernel, kbox_kspec_resource_dir(spec));
	check(r, "kernelspec", "ok", buf, NULL);
	if (!(exe = kr_bwrap_resolve(argv0, rootfs))) {
		snprintf(buf, sizeof buf, "%s not found in /usr/local/bin, /usr/bin or /bin%s",
		         argv0, rootfs ? " of the root filesystem" : "");
		check(r, "interpreter", "fail", buf, "the kernel cannot start");
		check(r, "packages", "skip", "not checked: no interpreter", NULL);
	} else if (!*sandbox_ok) {
		snprintf(buf, sizeof buf, "%s found; not run: no sandbox", exe);
		check(r, "interpreter", "skip", buf, NULL);
		check(r, "packages", "skip", "not checked: no sandbox", NULL);
	} else if (strcmp(language ? language : "", "python") != 0)
		ok = check_other_kernel(r, bo, spec, exe, rootfs);
	else
		ok = check_python_kernel(r, bo, exe, sandbox_ok);
	free(exe);
	kbox_kspec_destroy(&spec);
	return ok;
}

/* The supervisor program every session runs: whether it runs here
 * (cli_supervisor_check).  True when it does. */
static bool check_supervisor(report_t *r)
{
	char detail[2048];
	const char *why = cli_supervisor_check(detail, sizeof detail);

	check(r, "supervisor", why ? "fail" : "ok", detail, why);
	return !why;
}

/* Print what the checks add up to: a sentence, or one JSON object with the
 * checks in it.  ENFORCED: the cgroup controllers that set limits. */
static void print_verdict(const report_t *r, const char *kernel, bool isolates, bool kernel_ok,
                          unsigned enforced)
{
	if (r->format != FMT_TEXT) {
		json_t *o = json_pack("{s:s, s:b, s:s, s:b, s:o}", "backend", KR_BACKEND_DEFAULT,
		                      "isolates", isolates, "kernel", kernel, "kernel_runs",
		                      isolates && kernel_ok, "checks", json_incref(r->checks));
		json_t *lim = json_array();
		for (unsigned bit = 1; bit <= KR_CG_CPU; bit <<= 1)
			if (enforced & bit)
				json_array_append_new(lim, json_string(kr_cgroup_name(bit)));
		json_object_set_new(o, "cgroup_limits", lim);
		cli_print_json_line(o);
	} else if (isolates && r->rootfs_bad)
		printf("\nthe default backend (bwrap) isolates kernels here, but no session with this "
		       "--rootfs can start (see above)\n");
	else if (isolates && r->state_bad)
		printf("\nthe default backend (bwrap) isolates kernels here, but no session in the state "
		       "directory can start (see above)\n");
	else if (isolates && !kernel_ok)
		printf("\nthe default backend (bwrap) isolates kernels here, but the kernel %s cannot run "
		       "in it (see above)\n",
		       kernel);
	else if (isolates)
		printf("\nthe default backend (bwrap) isolates kernels here%s\n",
		       (enforced & CG_ALL) == CG_ALL
		               ? ", with cgroup limits for memory, pids and cpu"
		               : "; some limits fall back to rlimits or are not enforced (see above)");
	else
		printf("\nthe default backend (bwrap) CANNOT isolate kernels here (see above); kbox "
		       "start will refuse it, and --backend none runs kernels unsandboxed\n");
}

/* kbox doctor --backend docker: the engine (reachable, its version and
 * API), the image, and the containers of sessions whose supervisor is
 * gone (removed, and said).  The exit status. */
static int doctor_docker(report_t *r, const char *image)
{
	char detail[1024], *args[4] = {NULL};
	kbox_error_t err = {0};
	char *home = kr_state_home(&err); /* (the supervisors' KBOX_HOME: the label) */
	bool engine_ok = false, image_ok = false, image_ours = false;
	json_t *j = NULL;

	args[0] = "ping";
	if (cli_engine_call("doctor", args, &j, detail, sizeof detail) == 0) {
		snprintf(detail, sizeof detail, "%s %s (API %s) at %s",
		         json_string_value(json_object_get(j, "engine")),
		         json_string_value(json_object_get(j, "version")),
		         json_string_value(json_object_get(j, "api")),
		         json_string_value(json_object_get(j, "socket")));
		engine_ok = true;
		check(r, "engine", "ok", detail, NULL);
	} else
		check(r, "engine", "fail", detail, "no kernel can start with --backend docker");
	json_decref(j);
	j = NULL;
	if (!engine_ok)
		check(r, "image", "skip", "not checked: no engine", NULL);
	else {
		args[0] = "image";
		args[1] = (char *)image;
		if (cli_engine_call("doctor", args, &j, detail, sizeof detail) == 0) {
			const char *recipe = json_string_value(
			        json_object_get(json_object_get(j, "labels"), "kbox.recipe"));
			snprintf(detail, sizeof detail, "%s: %.19s%s%s", image,
			         json_string_value(json_object_get(j, "id")),
			         recipe ? ", recipe " : " (not built by kbox image build)",
			         recipe ? recipe : "");
			image_ok = true;
			image_ours = recipe != NULL;
			/* (an image of the user's own: whether it has /bin/sh, a
			 * Python with ipykernel and no /run/kernel of its own, only
			 * a start tells) */
			check(r, "image", recipe ? "ok" : "warn", detail,
			      recipe ? NULL
			             : "kbox cannot tell whether it runs a kernel (it needs /bin/sh and "
			               "the kernelspec's command): a kbox start with it tells");
		} else
			check(r, "image", "fail", detail,
			      "sessions with this image cannot start: build it with kbox image build");
		json_decref(j);
		j = NULL;
	}
	if (!engine_ok || !home)
		check(r, "orphans", "skip",
		      !engine_ok ? "not checked: no engine" : "not checked: no state directory",
		      NULL);
	else {
		args[0] = "orphans";
		args[1] = (char *)home;
		if (cli_engine_call("doctor", args, &j, detail, sizeof detail) == 0) {
			json_t *gone = json_object_get(j, "removed");
			if (json_array_size(gone)) {
				size_t i, n = 0;
				json_t *v;
				n += (size_t)snprintf(
				        detail, sizeof detail,
				        "removed %zu left by supervisors that are gone:",
				        json_array_size(gone));
				json_array_foreach(gone, i, v)
				{
					if (n < sizeof detail)
						n += (size_t)snprintf(detail + n, sizeof detail - n,
						                      " %s", json_string_value(v));
				}
			} else
				snprintf(detail, sizeof detail, "none");
			check(r, "orphans", "ok", detail, NULL);
		} else
			check(r, "orphans", "warn", detail,
			      "containers of dead sessions may be left");
		json_decref(j);
	}
	if (r->format != FMT_TEXT)
		cli_print_json_line(json_pack("{s:s, s:b, s:s, s:o}", "backend", "docker",
		                              "kernel_runs", engine_ok && image_ok, "image", image,
		                              "checks", json_incref(r->checks)));
	else if (engine_ok && image_ok && !image_ours)
		printf("\nthe backend docker reaches the engine and the image %s, which kbox did not "
		       "build (see above)\n",
		       image);
	else if (engine_ok && image_ok)
		printf("\nthe backend docker can run kernels here, in containers of the image %s\n",
		       image);
	else
		printf("\nthe backend docker CANNOT run kernels here (see above)\n");
	free(home);
	return engine_ok && image_ok ? EXIT_OK : EXIT_UNAVAILABLE;
}

int cmd_doctor(int argc, char **argv)
{
	report_t r = {NULL, FMT_TEXT, false, false};
	bool fix = false;
	const char *kernel = KR_KERNEL_DEFAULT, *rootfs_arg = NULL, *backend = NULL, *image = NULL;
	cli_option_t opts[] = {
	        CLI_OPT_STRING('b', "backend", "B", &backend,
	                       "the backend to check: bwrap or docker (default: docker when "
	                       "$KBOX_BACKEND says so, else bwrap)"),
	        CLI_OPT_STRING(0, "image", "NAME", &image,
	                       "docker: the image to look for (default: $KBOX_IMAGE_NAME, else "
	                       "kbox-kernel)"),
	        CLI_OPT_STRING('k', "kernel", "SPEC", &kernel,
	                       "the kernelspec to check (default: " KR_KERNEL_DEFAULT ")"),
	        CLI_OPT_STRING(0, "rootfs", "DIR", &rootfs_arg,
	                       "take the sandbox's system files from DIR (default: the host's)"),
	        CLI_OPT_FORMAT(&r.format,
	                       "text: a line a check (the default); json and ndjson: one "
	                       "JSON object on one line"),
	        CLI_OPT_JSON('j', &r.format),
	        CLI_OPT_FLAG(
	                0, "fix", &fix,
	                "under root, create the sandbox user (KBOX_SANDBOX_USER, default kbox) "
	                "when it is missing"),
	        CLI_OPT_END};
	char *rootfs = NULL, *bwrap;
	kr_bwrap_opts_t bo = {0};
	bool isolates, sandbox_ok, kernel_ok, ids_ok, nproc_ok;
	unsigned enforced;
	int status;

	if (cli_parse_no_operands("doctor", opts, argc, argv, &status) < 0)
		return status;
	if (rootfs_arg && !(rootfs = realpath(rootfs_arg, NULL))) {
		cli_error("doctor", "invalid --rootfs \"%s\": %s", rootfs_arg, strerror(errno));
		return EXIT_USAGE;
	}
	r.checks = json_array();
	/* (the backend new sessions get; doctor checks bwrap for none) */
	if (!backend && getenv("KBOX_BACKEND") && strcmp(getenv("KBOX_BACKEND"), "docker") == 0)
		backend = "docker";
	if (backend && strcmp(backend, "docker") == 0) {
		if (!image && getenv("KBOX_IMAGE_NAME") && *getenv("KBOX_IMAGE_NAME"))
			image = getenv("KBOX_IMAGE_NAME");
		if (rootfs || kernel != (const char *)KR_KERNEL_DEFAULT || fix) {
			cli_error("doctor",
			          "--rootfs, --kernel and --fix are for the backend bwrap");
			status = EXIT_USAGE;
		} else if (image && (status = cli_check_image("doctor", image)) != EXIT_OK) {
			/* (said) */
		} else
			status = doctor_docker(&r, image ? image : "kbox-kernel");
		json_decref(r.checks);
		free(rootfs);
		return status;
	}
	if ((backend && strcmp(backend, "bwrap") != 0) || image) {
		cli_error("doctor",
		          backend && strcmp(backend, "bwrap") != 0
		                  ? "invalid --backend \"%s\": doctor checks bwrap or docker"
		                  : "--image is for --backend docker%s",
		          backend && strcmp(backend, "bwrap") != 0 ? backend : "");
		json_decref(r.checks);
		free(rootfs);
		return EXIT_USAGE;
	}
	bo.rootfs = rootfs;

	bwrap = check_bwrap(&r);
	check_userns(&r);
	check_seccomp(&r);
	ids_ok = check_identity(&r, &bo, fix);
	/* a --rootfs the sandbox cannot reach: the sandbox is judged without
	 * it (on the host's files), and no kernel can run from it */
	if (rootfs && !check_rootfs(&r, rootfs, ids_ok))
		bo.rootfs = NULL;
	sandbox_ok = check_sandbox(&r, &bo, bwrap, ids_ok, &nproc_ok);
	enforced = check_cgroups(&r, nproc_ok);
	if (r.rootfs_bad) {
		check(&r, "kernelspec", "skip", "not checked: no kernel can start from --rootfs",
		      NULL);
		kernel_ok = false;
	} else
		kernel_ok = check_kernel(&r, &bo, kernel, rootfs, &sandbox_ok);
	kernel_ok = check_supervisor(&r) && kernel_ok;

	isolates = bwrap && sandbox_ok;
	if (r.state_bad) /* isolates, but no session of this state directory starts */
		kernel_ok = false;
	print_verdict(&r, kernel, isolates, kernel_ok, enforced);
	if (!isolates || !kernel_ok)
		status = EXIT_UNAVAILABLE;
	json_decref(r.checks);
	free(rootfs);
	free(bwrap);
	return status;
}
