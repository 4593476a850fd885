/* src/cli/cmd_rm.c — kbox rm: remove sessions, their workspaces included;
 * kbox prune: remove every session that is not running, and old outputs
 * of the running ones (as docker rm and docker system prune). */
#include "config.h"
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* kx_walk's visit for session_bytes: add what the entry takes on disk. */
static void add_bytes(int dirfd, const char *name, const struct stat *st, void *arg)
{
	(void)dirfd;
	(void)name;
	*(long long *)arg += (long long)st->st_blocks * 512;
}

/* How deep session_bytes counts (kx_walk holds a descriptor a level). */
#define COUNT_DEPTH 256

/* The bytes the session directory DIR holds, COUNT_DEPTH levels down
 * (never through a link); *DEEPER is set when it held directories deeper
 * than that, not counted. */
static long long session_bytes(const char *dir, bool *deeper)
{
	long long n = 0;
	int fd = kx_open_path(AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
	if (fd >= 0) {
		if (kx_walk(fd, COUNT_DEPTH, add_bytes, &n))
			*deeper = true;
		close(fd);
	}
	return n;
}

/* The session directory DIR's last activity: the newest change to its
 * own files (the event log, session.json, its pid file). */
static time_t session_last(const char *dir)
{
	static const char *const own[] = {"events.ndjson", "session.json", "supervisor.pid", NULL};
	time_t last = 0;
	struct stat st;
	int fd = kx_open_path(AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
	for (size_t i = 0; fd >= 0 && own[i]; i++)
		if (fstatat(fd, own[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mtime > last)
			last = st.st_mtime;
	if (fd >= 0)
		close(fd);
	return last;
}

/* Remove the session NAME of HOME (stopping it first with FORCE).
 * DRY_RUN says what would go instead.  *BYTES gets what it held; *DEEPER
 * is set when that count left out what lay too deep. */
static int rm_one(const char *cmd, const char *home, const char *name, bool force, bool dry_run,
                  long long *bytes, bool *deeper)
{
	bool mine = false;
	kbox_error_t err = {0};
	char *dir = kr_session_dir(home, name, false, &err), size[32];
	int status = EXIT_OK;

	*bytes = 0;
	if (!dir) { /* the name was checked: the session or the state directory is not there */
		cli_error(cmd, "%s", err.msg);
		return EXIT_UNAVAILABLE;
	}
	if (kr_session_starting(dir)) {
		cli_error(cmd, "session %s is being started: remove it once that start has ended",
		          name);
		free(dir);
		return EXIT_UNAVAILABLE;
	}
	if (kr_session_supervisor(dir, NULL) == KR_SUPERVISOR_RUNNING) {
		json_t *r;
		if (!force) {
			cli_error(
			        cmd,
			        "session %s is running: stop it first (kbox stop -s %s), or remove "
			        "it running with kbox rm -f %s",
			        name, name, name);
			free(dir);
			return EXIT_UNAVAILABLE;
		}
		if (!dry_run) {
			if (!(r = kr_ctl_stop(dir,
			                      json_pack("{s:s}", "cause",
			                                "stopped on request (kbox rm -f)"),
			                      90000, &err))) {
				cli_error(cmd, "session %s: cannot stop it: %s", name, err.msg);
				free(dir);
				return EXIT_UNAVAILABLE;
			}
			json_decref(r);
		}
	}
	*bytes = session_bytes(dir, &mine);
	*deeper |= mine;
	kx_fmt_bytes(size, sizeof size, *bytes);
	if (dry_run)
		printf("would remove session %s (%s%s)\n", name, mine ? "at least " : "", size);
	else if (kr_session_remove(dir, &err) < 0) {
		cli_error(cmd, "session %s: %s", name, err.msg);
		status = EXIT_UNAVAILABLE;
	} else
		printf("removed session %s (%s%s)\n", name, mine ? "at least " : "", size);
	cli_flush_stdout(); /* in order with the errors about the next ones */
	free(dir);
	return status;
}

int cmd_rm(int argc, char **argv)
{
	const char *name = NULL;
	bool force = false;
	cli_option_t opts[] = {
	        CLI_OPT_STRING('s', "session", "NAME", &name,
	                       "a session to remove (no default: name it, or give NAME operands)"),
	        CLI_OPT_FLAG('f', "force", &force,
	                     "stop a session that is running, then remove it (default: refuse)"),
	        CLI_OPT_END};
	int status, nargs = cli_parse_options("rm", opts, argc, argv, &status);
	kbox_error_t err = {0};
	long long bytes;
	bool deeper = false;
	char *home;

	if (nargs < 0)
		return status;
	if (name && nargs) {
		cli_error("rm", "give the sessions either as -s NAME or as operands, not both");
		return EXIT_USAGE;
	}
	/* it removes a workspace: never the default session unnamed */
	if (!name && !nargs) {
		cli_error("rm", "name the sessions to remove: kbox rm NAME... (or -s NAME)");
		return EXIT_USAGE;
	}
	if (!nargs && (status = cli_check_session("rm", name)) != EXIT_OK)
		return status;
	for (int i = 0; i < nargs; i++)
		if ((status = cli_check_session("rm", argv[i])) != EXIT_OK)
			return status;
	if (!(home = kr_state_home(&err))) {
		cli_error("rm", "%s", err.msg);
		return EXIT_UNAVAILABLE;
	}
	if (!nargs)
		status = rm_one("rm", home, name, force, false, &bytes, &deeper);
	for (int i = 0; i < nargs; i++) {
		int s = EXIT_OK;
		bool again = false;
		for (int k = 0; k < i && !again; k++) /* a name given twice goes once */
			again = strcmp(argv[k], argv[i]) == 0;
		if (!again)
			s = rm_one("rm", home, argv[i], force, false, &bytes, &deeper);
		if (s != EXIT_OK && status == EXIT_OK)
			status = s;
	}
	free(home);
	return status;
}

/* The files of the outputs directory of the running session DIR last
 * changed before CUTOFF: removed (or, DRY_RUN, counted).  *FILES and the
 * bytes returned say how many and how much. */
static long long prune_outputs(const char *dir, time_t cutoff, bool dry_run, long long *files)
{
	char path[PATH_MAX];
	long long bytes = 0;
	struct dirent *e;
	DIR *d;
	int fd;

	*files = 0;
	if ((size_t)snprintf(path, sizeof path, "%s/outputs", dir) >= sizeof path ||
	    (fd = kx_open_path(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0)) < 0)
		return 0;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return 0;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_mtime >= cutoff)
			continue;
		if (!dry_run && unlinkat(dirfd(d), e->d_name, 0) < 0)
			continue;
		bytes += (long long)st.st_blocks * 512;
		(*files)++;
	}
	closedir(d);
	return bytes;
}

/* How old --older-than may be: ten years (a session's timers' 24 days
 * bound no age). */
#define PRUNE_AGE_MAX_MS (3650LL * 86400000)

/* --older-than DURATION, up to PRUNE_AGE_MAX_MS, into the long long at VALUE. */
static int older_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	return cli_opt_duration_max(cmd, opt, arg, PRUNE_AGE_MAX_MS, "12h, 7d or 30d");
}

int cmd_prune(int argc, char **argv)
{
	long long older_ms = -1;
	bool dry_run = false;
	cli_option_t opts[] = {
	        CLI_OPT_FLAG('n', "dry-run", &dry_run, "say what would be removed, remove nothing"),
	        CLI_OPT_CALLBACK(0, "older-than", "DURATION", older_cb, &older_ms,
	                         "only what was last active longer ago than DURATION; and then, "
	                         "of running sessions, the outputs older than it too"),
	        CLI_OPT_END};
	int status, nargs = cli_parse_options("prune", opts, argc, argv, &status);
	kbox_error_t err = {0};
	char *home, **names, size[32];
	long long total = 0;
	bool deeper = false;
	size_t n = 0;
	time_t cutoff;

	if (nargs < 0)
		return status;
	if ((status = cli_no_operands("prune", nargs, argv)) != EXIT_OK)
		return status;
	if (!(home = kr_state_home(&err)) || !(names = kr_session_list(home, &n, &err))) {
		cli_error("prune", "%s", err.msg);
		free(home);
		return EXIT_UNAVAILABLE;
	}
	cutoff = time(NULL) - (older_ms > 0 ? (time_t)(older_ms / 1000) : 0);
	for (size_t i = 0; i < n; i++) {
		char *dir;
		long long bytes, files;
		/* what is not a session is left alone, and said (kbox ls lists
		 * it as invalid) */
		if (!kr_session_is_dir(home, names[i])) {
			fprintf(stderr, "kbox prune: skipped %s: not a session (not a directory)\n",
			        names[i]);
			continue;
		}
		if (!(dir = kr_session_dir(home, names[i], false, &err))) {
			fprintf(stderr, "kbox prune: skipped %s: %s\n", names[i], err.msg);
			continue;
		}
		if (kr_session_supervisor(dir, NULL) == KR_SUPERVISOR_RUNNING ||
		    kr_session_starting(dir)) {
			/* running or being started: only its old outputs, when asked */
			if (older_ms >= 0 &&
			    ((bytes = prune_outputs(dir, cutoff, dry_run, &files)) || files)) {
				kx_fmt_bytes(size, sizeof size, bytes);
				printf("%s %lld file%s of session %s's outputs (%s)\n",
				       dry_run ? "would remove" : "removed", files,
				       files == 1 ? "" : "s", names[i], size);
				total += bytes;
			}
		} else {
			if (older_ms <= 0 || session_last(dir) < cutoff) {
				int s = rm_one("prune", home, names[i], false, dry_run, &bytes,
				               &deeper);
				if (s == EXIT_OK)
					total += bytes;
				else if (status == EXIT_OK)
					status = s;
			}
		}
		free(dir);
	}
	kr_session_list_free(names, n);
	free(home);
	kx_fmt_bytes(size, sizeof size, total);
	printf("%s %s%s\n", dry_run ? "would reclaim" : "reclaimed", deeper ? "at least " : "",
	       size);
	return status;
}
