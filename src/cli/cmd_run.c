/* src/cli/cmd_run.c — kbox run: run cells, in order, in one fresh kernel, in
 * a bwrap sandbox (or a container, with --backend docker; or, with --backend
 * none, as a local process).
 *
 * The kernel is a supervisor's, as every kernel is: kbox run starts one for
 * itself on a private, ephemeral session (removed when it stops, and
 * stopped when kbox run goes away), sends it each cell as kbox exec would,
 * and stops it.  Its workspace is a new, empty directory of that session,
 * gone with it, into which the regular files named on the command line
 * (cells and --put) are copied first; a host directory is the workspace
 * only when --workspace names it, and never one whose loss would hurt
 * (ws_host_dir).  Images and long texts go to the outputs directory,
 * outside the sandbox: -o's, or a new one of this run's own in the current
 * directory (make_out_dir), named at the end when it holds any. */
#include "config.h"
#include "cli.h"
#include "runtime/functions.h"
#include "runtime/workspace.h"
#include "runtime/ws_live.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
	char *code;         /* owned */
	const char *source; /* "-c", a file name or "-" (borrowed from argv) */
} cell_t;

/* A private session directory for this run under $XDG_RUNTIME_DIR or
 * /tmp (0700), into BUF, marked as kbox state (kr_state_mark) before
 * anything is in it, so that no other session takes it, or a directory
 * holding it, as a workspace.  Under root a SANDBOXED run's is in /tmp:
 * the sandbox user must reach it, and root's runtime directory is
 * closed.  0, or -1 (printed). */
static int make_run_dir(char *buf, size_t size, bool sandboxed)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	char real[PATH_MAX];
	kbox_error_t err = {0};

	/* (a relative one is as none, as the XDG spec says: review 19,
	 * W19-2, it slipped past the check below) */
	if (!base || base[0] != '/' || (sandboxed && geteuid() == 0) ||
	    access(base, W_OK | X_OK) < 0)
		base = "/tmp";
	/* where it is, its links resolved: the directories above that one
	 * are those checked, and the ones it is made in (review 20, W20-2:
	 * a link, or /proc/self/cwd, led past the check into a directory a
	 * sandbox's uid owned); once they pass, only the user or root can
	 * change any of them */
	if (!realpath(base, real))
		snprintf(real, sizeof real, "/tmp");
	if ((size_t)snprintf(buf, size, "%s/kbox-run-XXXXXX", real) >= size) {
		cli_error("run", "XDG_RUNTIME_DIR=%s: its path is too long", base);
		buf[0] = '\0';
		return -1;
	}
	/* nobody but the user or root may change a directory above it, as
	 * for every state directory (review 18, W18-6: under root one a
	 * sandbox's uid owned, where its code could rename it away) */
	if (kr_state_parents_safe(buf, &err) < 0) {
		cli_error("run", "XDG_RUNTIME_DIR=%s: %s (or unset XDG_RUNTIME_DIR: /tmp then)",
		          base, err.msg);
		buf[0] = '\0';
		return -1;
	}
	if (!mkdtemp(buf)) {
		cli_error("run", "cannot create a session directory under %s: %s", base,
		          strerror(errno));
		buf[0] = '\0';
		return -1;
	}
	/* marked, then checked against the live workspaces (ws_live.h) */
	if (kr_state_mark(buf, &err) < 0 || kr_live_ws_refuses(buf, &err) < 0) {
		cli_error("run", "%s", err.msg);
		kx_empty_dir(buf);
		rmdir(buf);
		buf[0] = '\0';
		return -1;
	}
	return 0;
}

/* A new directory for this run's images and long texts in the current
 * directory, kbox-run-YYYYMMDD-HHMMSS (local time), or with -2, -3, ...
 * when that is taken: made by mkdir, so never one that exists, and no
 * earlier run's file is ever written over.  Where the current directory
 * cannot be written (a read-only or another user's directory: *UNWRITABLE
 * gets the errno), or with AWAY, a new one, private, in $TMPDIR or /tmp
 * instead.  Its absolute path into BUF.  EXIT_OK, or EXIT_USAGE after one
 * line. */
static int make_out_dir(char *buf, size_t size, bool away, int *unwritable)
{
	char cwd[PATH_MAX], stamp[32];
	const char *tmp = getenv("TMPDIR");
	time_t now = time(NULL);
	struct tm tm;
	int e;

	strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime_r(&now, &tm));
	if (away) {
		e = 0;
		snprintf(cwd, sizeof cwd, ".");
		goto elsewhere;
	}
	if (!getcwd(cwd, sizeof cwd)) {
		e = errno;
		snprintf(cwd, sizeof cwd, "(unknown)");
		goto elsewhere;
	}
	for (int i = 1; i <= 1000; i++) {
		int n = i == 1 ? snprintf(buf, size, "%s/kbox-run-%s", cwd, stamp)
		               : snprintf(buf, size, "%s/kbox-run-%s-%d", cwd, stamp, i);
		if (n < 0 || (size_t)n >= size) {
			errno = ENAMETOOLONG;
			break;
		}
		if (mkdir(buf, 0777) == 0)
			return EXIT_OK;
		if (errno != EEXIST)
			break;
	}
	e = errno;
	if (e != EACCES && e != EPERM && e != EROFS)
		goto fail;
	*unwritable = e;
elsewhere:
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	if ((size_t)snprintf(buf, size, "%s/kbox-run-%s-XXXXXX", tmp, stamp) < size && mkdtemp(buf))
		return EXIT_OK;
	if (away) {
		cli_error("run",
		          "cannot create a directory for images and long texts in %s: %s (give "
		          "--outputs DIR)",
		          tmp, strerror(errno));
		buf[0] = '\0';
		return EXIT_USAGE;
	}
fail:
	cli_error("run",
	          "cannot create a directory for images and long texts in the current "
	          "directory %s: %s (give --outputs DIR)",
	          cwd, strerror(e));
	buf[0] = '\0';
	return EXIT_USAGE;
}

/* The run's own outputs directory while it may be empty, for on_signal. */
static char out_dir_live[PATH_MAX];

/* A signal that ends kbox run (^C, kill) takes the outputs directory with
 * it when it is still empty (rmdir removes nothing else), then does what
 * it would have done. */
static void on_signal(int sig)
{
	if (out_dir_live[0])
		rmdir(out_dir_live);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Have SIGHUP, SIGINT and SIGTERM (those not ignored) go through on_signal
 * while DIR is the outputs directory. */
static void guard_out_dir(const char *dir)
{
	static const int sigs[] = {SIGHUP, SIGINT, SIGTERM};
	snprintf(out_dir_live, sizeof out_dir_live, "%s", dir);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction sa = {0}, old;
		sigaction(sigs[i], NULL, &old);
		if (old.sa_handler == SIG_IGN)
			continue;
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
}

/* The end of the run's own outputs directory DIR: removed when it is
 * empty; else its name is given, after the results (on standard output
 * in text, where the results name their files; on standard error beside
 * JSON). */
static void end_out_dir(const char *dir, format_t format)
{
	if (rmdir(dir) == 0 || (errno != ENOTEMPTY && errno != EEXIST))
		return;
	if (format == FMT_TEXT) {
		printf("[files saved in: %s/]\n", dir);
		cli_flush_stdout();
	} else
		cli_error("run", "files saved in %s/", dir);
}

/* The cells, in command-line order: -c CODE and FILE operands. */
typedef struct {
	cell_t *v; /* room for one per argument */
	size_t n;
	bool used_stdin;
} cells_t;

/* -c CODE: a cell. */
static int code_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	cells_t *cells = opt->value;
	cells->v[cells->n].source = "-c";
	if (!(cells->v[cells->n++].code = strdup(arg))) {
		cli_error(cmd, "out of memory");
		return EXIT_UNAVAILABLE;
	}
	return EXIT_OK;
}

/* FILE or -: a cell read from it now. */
static int file_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	cells_t *cells = opt->value;
	bool is_stdin = strcmp(arg, "-") == 0;

	if (is_stdin && (cells->used_stdin || !cli_take_stdin())) {
		cli_error(cmd, "standard input (-) given more than once");
		return EXIT_USAGE;
	}
	cells->used_stdin |= is_stdin;
	cells->v[cells->n].source = arg;
	if (!(cells->v[cells->n].code = cli_read_code(cmd, arg)))
		return EXIT_USAGE;
	cells->n++;
	return EXIT_OK;
}

/* A host file to copy into the private workspace. */
typedef struct {
	const char *path; /* as given (borrowed from argv) */
	const char *name; /* its name in the workspace: the last component of PATH */
	int fd;           /* open for reading, or -1 */
	dev_t dev;
	ino_t ino;
} copy_t;

/* Add PATH to the N copies at V, unless the same file is there already:
 * the --put files (PUT; an error when not a regular file) and the regular
 * files among the cells (others, such as a pipe from <(...), are cells
 * only).  EXIT_OK, or EXIT_USAGE after one line. */
static int add_copy(copy_t *v, size_t *n, const char *path, bool put)
{
	struct stat st;
	copy_t c = {.path = path, .fd = -1};
	kbox_error_t err = {0};
	const char *slash = strrchr(path, '/');

	c.name = slash ? slash + 1 : path;
	if (!put && (stat(path, &st) < 0 || !S_ISREG(st.st_mode)))
		return EXIT_OK;
	if ((c.fd = ws_source_open(path, &err)) < 0 || fstat(c.fd, &st) < 0) {
		if (c.fd >= 0)
			close(c.fd);
		else
			cli_error("run", "%s", err.msg);
		return EXIT_USAGE;
	}
	c.dev = st.st_dev;
	c.ino = st.st_ino;
	for (size_t i = 0; i < *n; i++) {
		if (strcmp(v[i].name, c.name) != 0)
			continue;
		close(c.fd);
		if (v[i].dev == c.dev && v[i].ino == c.ino)
			return EXIT_OK;
		cli_error("run", "%s and %s would both be %s in the workspace", v[i].path, path,
		          c.name);
		return EXIT_USAGE;
	}
	v[(*n)++] = c;
	return EXIT_OK;
}

/* Make the private workspace RUNDIR/workspace (0700) and copy the N files
 * at V into it, closing their descriptors.  EXIT_OK, or EXIT_UNAVAILABLE
 * after one line. */
static int fill_workspace(const char *rundir, copy_t *v, size_t n)
{
	char ws[PATH_MAX];
	int wfd;
	kr_sandbox_id_t id;
	kbox_error_t ignored = {0};

	/* under root the files are the sandbox user's, as the workspace is
	 * (the supervisor gives it; without that user it refuses to start) */
	if (kr_sandbox_identity(&id, &ignored) < 0)
		id.drop = false;
	wfd = -1;
	if ((size_t)snprintf(ws, sizeof ws, "%s/workspace", rundir) >= sizeof ws)
		errno = ENAMETOOLONG;
	else if (mkdir(ws, 0700) == 0)
		wfd = open(ws, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wfd < 0) {
		cli_error("run", "cannot create the workspace %s: %s", ws, strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	for (size_t i = 0; i < n; i++) {
		int out = openat(wfd, v[i].name,
		                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (out < 0 || (id.drop && fchown(out, id.uid, id.gid) < 0) ||
		    ws_copy_fd(v[i].fd, out) < 0) {
			cli_error("run", "cannot copy %s into the workspace: %s", v[i].path,
			          strerror(errno));
			if (out >= 0)
				close(out);
			close(wfd);
			return EXIT_UNAVAILABLE;
		}
		close(out);
		close(v[i].fd);
		v[i].fd = -1;
	}
	close(wfd);
	return EXIT_OK;
}

/* Whether the directory DFD holds nothing but what make_run_dir and a
 * start no supervisor took over leave: its mark, and session.json. */
static bool holds_only_start(int dfd)
{
	struct dirent *e;
	bool only = true;
	int lfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;

	if (!d) {
		if (lfd >= 0)
			close(lfd);
		return false;
	}
	while (only && (e = readdir(d)))
		only = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		       strcmp(e->d_name, KR_STATE_MARK) == 0 ||
		       strcmp(e->d_name, "session.json") == 0;
	closedir(d);
	return only;
}

/* Remove what kbox run made in RUNDIR when no supervisor took it over:
 * the N files it copied into the workspace, the workspace, what a
 * session's start leaves (cli_session_forget), and the mark of a state
 * directory (kr_state_mark) once nothing else is left. */
static void forget_run_dir(const char *rundir, const copy_t *v, size_t n)
{
	char ws[PATH_MAX];
	int wfd, dfd;

	if (snprintf(ws, sizeof ws, "%s/workspace", rundir) < (int)sizeof ws &&
	    (wfd = open(ws, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		for (size_t i = 0; i < n; i++)
			unlinkat(wfd, v[i].name, 0);
		close(wfd);
	}
	cli_session_forget(rundir);
	kr_live_session_forget(rundir); /* (its supervisor's job, when one ran) */
	/* (through the directory, reached through no link) */
	if ((dfd = kx_open_path(AT_FDCWD, rundir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0)) >= 0) {
		if (holds_only_start(dfd)) {
			unlinkat(dfd, "session.json", 0);
			if (unlinkat(dfd, KR_STATE_MARK, 0) == 0)
				rmdir(rundir);
		}
		close(dfd);
	}
}

/* --backend bwrap|docker|none, into the const char * at VALUE. */
static int backend_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	if (strcmp(arg, "bwrap") != 0 && strcmp(arg, "docker") != 0 && strcmp(arg, "none") != 0) {
		cli_error(cmd, "unknown backend \"%s\" (available: bwrap, docker, none)", arg);
		return EXIT_USAGE;
	}
	*(const char **)opt->value = arg;
	return EXIT_OK;
}

/* A run: its options, its files, and where it stands. */
typedef struct {
	const char *kernel, *workspace, *outputs, *backend, *image;
	cli_functions_opts_t fo;
	json_t *functions; /* the host functions, as read, or NULL */
	cli_strlist_t inputs, puts;
	cells_t cells;
	copy_t *copies; /* the files to copy into the new workspace */
	size_t n_copies;
	long long timeout_ms, max_bytes, max_lines;
	format_t format;
	char rundir[PATH_MAX];  /* the private session's directory, "" until made */
	char outbuf[PATH_MAX];  /* the outputs directory, absolute */
	char own_out[PATH_MAX]; /* the outputs directory kbox run made, or "" */
	int out_fd;             /* the outputs directory, held open for the run */
	char wsreal[PATH_MAX];  /* --workspace, resolved */
	struct stat wsst;       /* --workspace as checked */
	kr_sandbox_id_t sid;
	bool read_only; /* --workspace the sandbox user cannot write */
} run_t;

/* Refuse a cell, an input line, --workspace or --outputs that is not
 * UTF-8 (what the session protocol carries).  EXIT_OK, or EXIT_USAGE after
 * one line. */
static int check_utf8(const run_t *run)
{
	bool ws_bad = run->workspace && !kx_utf8_valid_str(run->workspace);

	for (size_t i = 0; i < run->cells.n; i++)
		if (!kx_utf8_valid_str(run->cells.v[i].code)) {
			char at[64];
			cli_error("run", "cell %zu (%s) is not valid UTF-8 (%s): save it as UTF-8",
			          i + 1, run->cells.v[i].source,
			          cli_utf8_where(run->cells.v[i].code, at, sizeof at));
			return EXIT_USAGE;
		}
	for (size_t i = 0; i < run->inputs.n; i++)
		if (!kx_utf8_valid_str(run->inputs.v[i])) {
			cli_error("run", "--input line %zu is not valid UTF-8", i + 1);
			return EXIT_USAGE;
		}
	if (ws_bad || (run->outputs && !kx_utf8_valid_str(run->outputs))) {
		cli_error("run", "%s %s is not valid UTF-8", ws_bad ? "--workspace" : "--outputs",
		          ws_bad ? run->workspace : run->outputs);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Refuse a cell whose request would be longer than the session takes,
 * with every input line (the first cell's; later cells get fewer), before
 * the session starts.  EXIT_OK, or EXIT_USAGE after one line. */
static int check_sizes(const run_t *run)
{
	int status = EXIT_OK;
	for (size_t i = 0; i < run->cells.n && status == EXIT_OK; i++) {
		kr_ctl_exec_t e = KR_CTL_EXEC_INIT;
		char cmd[64];
		e.code = run->cells.v[i].code;
		e.has_inputs = run->inputs.n > 0;
		e.inputs = run->inputs.v;
		e.n_inputs = run->inputs.n;
		snprintf(cmd, sizeof cmd, "run: cell %zu", i + 1);
		status = cli_exec_check_size(cmd, &e);
	}
	return status;
}

/* Check and resolve --workspace (the sandbox binds what the check saw),
 * and find whether the code, under root the sandbox user, may write there
 * (the directory is not changed for it).  EXIT_OK, or EXIT_USAGE after one
 * line. */
static int take_host_workspace(run_t *run)
{
	kbox_error_t err = {0}, ignored = {0};
	struct stat st;

	if (run->puts.n) {
		cli_error("run",
		          "--put copies into a new workspace; with --workspace %s, copy %s there "
		          "instead",
		          run->workspace, run->puts.v[0]);
		return EXIT_USAGE;
	}
	if (!run->workspace[0]) {
		cli_error("run", "--workspace is empty: name a directory");
		return EXIT_USAGE;
	}
	if (ws_host_dir(run->workspace, run->wsreal, &run->wsst, &err) < 0) {
		cli_error("run", "--workspace %s", err.msg);
		return EXIT_USAGE;
	}
	/* under root the code is a uid of the session's own, in the sandbox
	 * user's group: it writes where that group or anyone may */
	run->read_only = kr_backend_sandboxed(run->backend) &&
	                 kr_sandbox_identity(&run->sid, &ignored) == 0 && run->sid.drop &&
	                 stat(run->wsreal, &st) == 0 &&
	                 !(st.st_gid == run->sid.gid && (st.st_mode & S_IWGRP)) &&
	                 !(st.st_mode & S_IWOTH);
	return EXIT_OK;
}

/* List what goes into the new workspace: the --put files, then the cells
 * read from regular files.  EXIT_OK, or EXIT_USAGE after one line. */
static int list_copies(run_t *run)
{
	int status = EXIT_OK;

	for (size_t i = 0; i < run->puts.n && status == EXIT_OK; i++)
		status = add_copy(run->copies, &run->n_copies, run->puts.v[i], true);
	for (size_t i = 0; i < run->cells.n && status == EXIT_OK; i++)
		if (strcmp(run->cells.v[i].source, "-c") != 0 &&
		    strcmp(run->cells.v[i].source, "-") != 0)
			status = add_copy(run->copies, &run->n_copies, run->cells.v[i].source,
			                  false);
	return status;
}

/* Whether the current directory is the workspace DIR or in it. */
static bool cwd_in(const struct stat *dir)
{
	int fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	bool in = fd < 0 || ws_fd_within(fd, dir);
	if (fd >= 0)
		close(fd);
	return in;
}

/* The outputs directory, absolute, for the supervisor writes there: -o's,
 * or by default a new one in the current directory (whatever links led to
 * it); with --workspace, outside it, where the code cannot read or change
 * what is kept for the caller: a current directory in the workspace (or
 * in any running sandbox's, ws_live.h) has the new one made in $TMPDIR or
 * /tmp instead (and says so), and -o in it is refused.  Held open for the whole run: each cell's files go into the
 * directory checked here, whatever is renamed meanwhile.  EXIT_OK, or an
 * exit status after one line. */
static int choose_outputs(run_t *run)
{
	const char *given = run->outputs ? run->outputs : NULL, *why = NULL;
	kbox_error_t lerr = {0};
	char cwd[PATH_MAX], whybuf[128];
	int status, unwritable = 0;

	/* why not in the current directory: the workspace's code could
	 * change what is kept there, and so could that of another sandbox
	 * whose workspace it is in (a session's own, say: ws_live.h), or of
	 * one whose session keeps its workspace in that state directory */
	if (given)
		;
	else if (!getcwd(cwd, sizeof cwd))
		why = errno == ENOENT ? "the current directory was removed"
		                      : "the current directory cannot be named";
	else if (run->workspace && cwd_in(&run->wsst))
		why = "the current directory is in the workspace, which the code can change";
	else if (kr_live_ws_check(".", "the current directory", &lerr) < 0)
		why = "the current directory is in a sandbox's workspace, which the code can change";
	else if (ws_in_state_dir(".", "the current directory", &lerr) < 0)
		why = "the current directory is in a kbox state directory, where sessions keep "
		      "the workspaces sandboxes can change";

	if (given)
		status = cli_outputs_dir("run", run->outputs, run->outbuf);
	else if ((status = make_out_dir(run->own_out, sizeof run->own_out, why != NULL,
	                                &unwritable)) == EXIT_OK) {
		snprintf(run->outbuf, sizeof run->outbuf, "%s", run->own_out);
	}
	if (status != EXIT_OK)
		return status;
	if ((run->out_fd = open(run->outbuf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
	    0) {
		cli_error("run", "--outputs %s: %s", given ? given : run->outbuf,
		          errno == ELOOP ? "it is a symbolic link" : strerror(errno));
		return EXIT_USAGE;
	}
	if (run->workspace && ws_fd_within(run->out_fd, &run->wsst)) {
		if (given)
			cli_error(
			        "run",
			        "--outputs %s: refused: it is in the workspace %s, where the code "
			        "could read and change the images and texts kept for you; give a "
			        "directory outside it",
			        given, run->wsreal);
		else
			cli_error("run",
			          "cannot keep images and long texts outside the workspace %s: %s "
			          "is in it (give --outputs DIR)",
			          run->wsreal, run->outbuf);
		return EXIT_USAGE;
	}
	/* nor in another sandbox's (ws_live.h) */
	{
		kbox_error_t err = {0};
		if (kr_live_ws_check(run->outbuf, "outputs directory", &err) < 0) {
			cli_error("run", "%s (give --outputs DIR)", err.msg);
			return EXIT_USAGE;
		}
	}
	if (!given && unwritable) {
		snprintf(whybuf, sizeof whybuf, "the current directory cannot be written (%s)",
		         strerror(unwritable));
		why = whybuf;
	}
	if (why)
		cli_error("run",
		          "%s: images and long texts go to %s instead (removed at the end if none "
		          "is saved)",
		          why, run->outbuf);
	return EXIT_OK;
}

/* Warn of what the code may do: run unsandboxed, or change the files of
 * the host directory --workspace. */
static void warn_of_run(const run_t *run)
{
	if (!kr_backend_sandboxed(run->backend))
		fprintf(stderr, "kbox: warning: backend %s: the kernel runs unsandboxed\n",
		        run->backend);
	if (run->workspace && run->read_only) {
		struct group *gr = getgrgid(run->sid.gid);
		char group[64];
		snprintf(group, sizeof group, "%s", gr ? gr->gr_name : run->sid.user);
		cli_error("run",
		          "warning: --workspace %s: the code runs as a uid of its own in the "
		          "sandbox group %s (gid %u), which cannot write %s: the code can read its "
		          "files, and change those that group may (chgrp %s %s && chmod g+rwx %s "
		          "to let it write)",
		          run->workspace, group, (unsigned)run->sid.gid, run->wsreal, group,
		          run->wsreal, run->wsreal);
	} else if (run->workspace)
		cli_error(
		        "run",
		        "warning: --workspace %s: the code can change and delete every file in %s",
		        run->workspace, run->wsreal);
}

/* Start the run's private session: never idle-stopped, stopped with us,
 * removed when it stops, and with it its workspace unless that is the
 * caller's directory (given with its identity as checked, which the
 * sandbox must bind).  EXIT_OK, or an exit status after one line. */
static int start_run_session(run_t *run)
{
	kr_session_opts_t o = KR_SESSION_OPTS_INIT;
	kr_session_config_t config;
	kbox_error_t err = {0};
	int status;

	o.name = "run";
	o.kernel = run->kernel;
	o.backend = run->backend;
	o.ttl_ms = 0;
	o.ephemeral = 1;
	o.owner_pid = getpid();
	o.image = run->image;
	o.workspace = run->workspace ? run->wsreal : NULL;
	o.workspace_st = run->workspace ? &run->wsst : NULL;
	char *functions_text = NULL;
	if (run->functions && !(o.functions = functions_text = kr_functions_text(run->functions))) {
		cli_error("run", "out of memory");
		return EXIT_UNAVAILABLE;
	}
	if (run->functions && run->workspace &&
	    kr_functions_check_workspace(run->functions, run->wsreal, &err) < 0) {
		cli_error("run", "--workspace %s: %s", run->workspace, err.msg);
		free(functions_text);
		return EXIT_USAGE;
	}
	kr_session_config_init(&config);
	if (kr_session_config_merge(&config, &o, &err) < 0) {
		cli_error("run", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
	} else if ((status = cli_check_docker("run", &o, &config)) == EXIT_OK) {
		status = cli_check_backend("run", &config, true);
	}
	if (status == EXIT_OK)
		warn_of_run(run);
	if (status == EXIT_OK &&
	    make_run_dir(run->rundir, sizeof run->rundir, kr_backend_sandboxed(run->backend)) < 0)
		status = EXIT_UNAVAILABLE;
	if (status == EXIT_OK && !run->workspace)
		status = fill_workspace(run->rundir, run->copies, run->n_copies);
	if (status == EXIT_OK)
		status = cli_session_start("run", run->rundir, "run", &config, 0, NULL, NULL);
	kr_session_config_free(&config);
	free(functions_text);
	return status;
}

/* REASON (a result's, changed) without what it says of the kernel after
 * it, which a run does not use. */
static const char *run_reason(char *reason)
{
	static const char *const tails[] = {" (state kept)", "; a new kernel was started"};
	size_t n = strlen(reason);
	for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
		size_t k = strlen(tails[i]);
		if (n > k && strcmp(reason + n - k, tails[i]) == 0)
			reason[n - k] = '\0';
	}
	return reason;
}

/* Run the cells in order, as kbox exec would, until one fails, each on a
 * control connection of its own (*FD, when open, serves the first; it is
 * closed, -1, on return); the --input lines answer input() across cells.
 * The exit status of the last cell run. */
static int run_cells(const run_t *run, int *fd)
{
	size_t used_inputs = 0;
	int status = EXIT_OK;
	kbox_error_t err = {0};

	for (size_t i = 0; i < run->cells.n && status == EXIT_OK; i++) {
		kr_ctl_exec_t e = KR_CTL_EXEC_INIT;
		cli_exec_result_t r = {0};
		const char *source = run->cells.v[i].source;

		e.code = run->cells.v[i].code;
		e.timeout_ms = run->timeout_ms;
		e.grace_ms = KR_CTL_GRACE_DEFAULT_MS;
		e.max_output = run->max_bytes;
		e.max_lines = run->max_lines;
		e.outputs = run->outbuf;
		e.format = cli_exec_format(run->format);
		e.prefix = ""; /* files named N-I.png, not GENERATION-N-I.png */
		if (run->inputs.n) {
			e.has_inputs = true;
			e.inputs = run->inputs.v + used_inputs;
			e.n_inputs = run->inputs.n - used_inputs;
		}
		if (*fd < 0 && (*fd = kr_ctl_connect(run->rundir, &err)) < 0) {
			cli_error("run", "%s", err.msg);
			status = EXIT_UNAVAILABLE;
			break;
		}
		{
			size_t later = run->cells.n - i - 1;
			char stops[96] = "kbox run stops here";
			if (later == 1)
				snprintf(stops, sizeof stops,
				         "kbox run stops here: the cell after it is not run");
			else if (later)
				snprintf(stops, sizeof stops,
				         "kbox run stops here: the %zu cells after it are not run",
				         later);
			r.stops = stops;
			status = cli_exec_on("run", *fd, run->rundir, "run", &e, run->out_fd, &r);
			/* a cell that raised: its traceback says why, and this line
			 * that the cells after it were not run (a model reading the
			 * text could not tell) */
			if (status == EXIT_CODE_ERROR && later && run->format == FMT_TEXT)
				printf("[error: %s]\n", stops);
		}
		/* a connection a cell: the supervisor closes one that waits for
		 * nothing a minute (kbox-protocol(7)), as this one would while
		 * a slow reader of standard output holds us */
		kx_close(fd);
		used_inputs += r.inputs_used;
		if (used_inputs > run->inputs.n)
			used_inputs = run->inputs.n;
		if (status == EXIT_TIMEOUT || status == EXIT_DIED ||
		    (status == EXIT_CODE_ERROR && r.reason[0]))
			cli_error("run", "cell %zu (%s): %s", i + 1, source, run_reason(r.reason));
	}
	cli_flush_stdout();
	return status;
}

/* Stop the run's session, if it was made: it ends with its kernel and its
 * supervisor removes it; what no supervisor took over is removed here.
 * Nothing of the run is left when this returns: it waits (a moment) for
 * the supervisor to have removed the directory. */
static void stop_run_session(const run_t *run)
{
	kbox_error_t err = {0};

	if (!run->rundir[0])
		return;
	json_decref(kr_ctl_stop(run->rundir, NULL, 30000, &err));
	if (kr_session_supervisor(run->rundir, NULL) == KR_SUPERVISOR_NONE)
		forget_run_dir(run->rundir, run->copies, run->n_copies); /* none, or gone */
	for (int i = 0; i < 500 && access(run->rundir, F_OK) == 0; i++)
		usleep(10000);
}

/* Free what RUN holds and close the files it had to copy. */
static void run_clear(run_t *run)
{
	json_decref(run->functions);
	cli_functions_opts_clear(&run->fo);
	for (size_t i = 0; i < run->cells.n; i++)
		free(run->cells.v[i].code);
	free(run->cells.v);
	for (size_t i = 0; i < run->n_copies; i++)
		if (run->copies[i].fd >= 0)
			close(run->copies[i].fd);
	free(run->copies);
	cli_strlist_clear(&run->inputs);
	cli_strlist_clear(&run->puts);
}

/* Check what the run needs before its session starts: the cells, the
 * workspace and what goes into it, the outputs directory, the kernelspec.
 * EXIT_OK, or an exit status after one line. */
static int prepare_run(run_t *run)
{
	kbox_error_t err = {0};
	kbox_kspec_t *spec;
	int status;

	if (run->cells.n == 0) {
		cli_error("run", "no code to run: give -c CODE, a FILE or - (see kbox run --help)");
		return EXIT_USAGE;
	}
	if ((status = check_utf8(run)) != EXIT_OK || (status = check_sizes(run)) != EXIT_OK)
		return status;
	status = run->workspace ? take_host_workspace(run) : list_copies(run);
	if (status != EXIT_OK || (status = choose_outputs(run)) != EXIT_OK)
		return status;
	if (!(spec = kbox_kspec_find(run->kernel, &err))) {
		cli_error("run", "%s", err.msg);
		return EXIT_UNAVAILABLE;
	}
	kbox_kspec_destroy(&spec);
	return EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
	run_t run = {.kernel = getenv("KBOX_KERNEL"), .out_fd = -1};
	int fd = -1, status = EXIT_OK;
	kbox_error_t err = {0};
	cli_option_t opts[] = {
	        CLI_OPT_STRING('k', "kernel", "NAME", &run.kernel,
	                       "the kernelspec (default: $KBOX_KERNEL, else " KR_KERNEL_DEFAULT
	                       ")"),
	        CLI_OPT_STRING(
	                0, "workspace", "DIR", &run.workspace,
	                "bind the host directory DIR, writable by the code, as the workspace "
	                "(default: a new, empty one)"),
	        CLI_OPT_LIST(0, "put", "FILE", &run.puts,
	                     "copy FILE into the new workspace first; repeatable (default: none)"),
	        CLI_OPT_CALLBACK(
	                0, "backend", "bwrap|docker|none", backend_cb, &run.backend,
	                "bwrap, a sandbox; docker, a container (the engine from DOCKER_HOST); or "
	                "none, unsandboxed (default: $KBOX_BACKEND, else " KR_BACKEND_DEFAULT ")"),
	        CLI_OPT_STRING(0, "image", "NAME", &run.image,
	                       "docker: the container image (default: $KBOX_IMAGE_NAME, else "
	                       "kbox-kernel)"),
	        CLI_OPT_FUNCTIONS(&run.fo, "the cells"),
	        CLI_OPT_CALLBACK(
	                't', "timeout", "DURATION", cli_opt_duration, &run.timeout_ms,
	                "interrupt a cell after DURATION, e.g. 30 or 2m (default: 0, no limit)"),
	        CLI_OPT_STRING(
	                'o', "outputs", "DIR", &run.outputs,
	                "write images and long texts into DIR (default: a new kbox-run-TIME here)"),
	        CLI_OPT_LIST(
	                'i', "input", "LINE", &run.inputs,
	                "answer input requests with LINE, in all cells; repeatable (default: none)"),
	        CLI_OPT_CALLBACK(0, "input-file", "FILE", cli_opt_input_file, &run.inputs,
	                         "answer input requests with the lines of FILE, after any -i given "
	                         "before it (default: none)"),
	        CLI_OPT_CALLBACK(0, "format", "FMT", cli_opt_format, &run.format,
	                         "write each result as text, json or ndjson (default: text)"),
	        CLI_OPT_JSON('j', &run.format),
	        CLI_OPT_CALLBACK(0, "max-output", "BYTES", cli_opt_max_output, &run.max_bytes,
	                         "keep at most BYTES of each text, 64 to 16M (default: 16K)"),
	        CLI_OPT_CALLBACK(
	                0, "max-lines", "N", cli_opt_max_lines, &run.max_lines,
	                "keep at most about N lines of each text, at least 2 (default: 200)"),
	        CLI_OPT_CALLBACK('c', "code", "CODE", code_cb, &run.cells,
	                         "run CODE as a cell, in order with the FILEs; repeatable"),
	        CLI_OPT_OPERANDS(file_cb, &run.cells),
	        CLI_OPT_END};

	if (!run.kernel || !*run.kernel)
		run.kernel = KR_KERNEL_DEFAULT;
	if (!(run.cells.v = calloc((size_t)argc + 1, sizeof *run.cells.v)) ||
	    !(run.copies = calloc((size_t)argc + 1, sizeof *run.copies))) {
		cli_error("run", "out of memory");
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	if (cli_parse_options("run", opts, argc, argv, &status) < 0 ||
	    (status = cli_session_defaults("run", true, &run.backend, &run.image)) != EXIT_OK)
		goto out;
	if (!run.backend)
		run.backend = KR_BACKEND_DEFAULT;
	if (kr_backend_remote(run.backend)) {
		cli_error("run",
		          "backend %s (from KBOX_BACKEND) is not for kbox run, whose kernel is "
		          "this machine's: start a session on the server (kbox start --backend "
		          "%s), then kbox exec",
		          run.backend, run.backend);
		status = EXIT_USAGE;
		goto out;
	}
	if ((status = cli_functions_for("run", &run.fo, NULL, &run.functions)) != EXIT_OK)
		goto out;
	if ((status = prepare_run(&run)) != EXIT_OK ||
	    (status = start_run_session(&run)) != EXIT_OK)
		goto out;
	/* (after the start: a signal while the session starts gives the
	 * start up, and says so, as kbox exec's does; the end below removes
	 * the outputs directory, empty then) */
	if (run.own_out[0])
		guard_out_dir(run.own_out);
	if ((fd = kr_ctl_connect(run.rundir, &err)) < 0) {
		cli_error("run", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	status = run_cells(&run, &fd);
out:
	if (fd >= 0)
		close(fd);
	stop_run_session(&run);
	kx_close(&run.out_fd);
	if (run.own_out[0])
		end_out_dir(run.own_out, run.format);
	run_clear(&run);
	return status;
}
