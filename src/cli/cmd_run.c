/* src/cli/cmd_run.c — kbox run: run cells, in order, in one fresh kernel, in
 * a bwrap sandbox whose /workspace is the working directory (or, with
 * --backend none, as a local process).
 *
 * The kernel is a supervisor's, as every kernel is: kbox run starts one for
 * itself on a private, ephemeral session (removed when it stops, and
 * stopped when kbox run goes away), sends it each cell as kbox exec would,
 * and stops it. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
	char *code;   /* owned */
	const char *source; /* "-c", a file name or "-" (borrowed from argv) */
} cell_t;

/* A private session directory for this run under $XDG_RUNTIME_DIR or
 * /tmp (0700), into BUF.  Under root, /tmp: the sandbox user must reach
 * it, and root's runtime directory is closed.  0, or -1 (printed). */
static int make_run_dir(char *buf, size_t size)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	if (!base || !*base || geteuid() == 0 || access(base, W_OK | X_OK) < 0)
		base = "/tmp";
	snprintf(buf, size, "%s/kbox-run-XXXXXX", base);
	if (!mkdtemp(buf)) {
		cli_error("run", "cannot create a session directory under %s: %s", base,
		          strerror(errno));
		buf[0] = '\0';
		return -1;
	}
	return 0;
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
	FILE *f;

	if (is_stdin && cells->used_stdin) {
		cli_error(cmd, "standard input (-) given more than once");
		return EXIT_USAGE;
	}
	cells->used_stdin |= is_stdin;
	f = is_stdin ? stdin : fopen(arg, "r");
	cells->v[cells->n].source = arg;
	if (!f || !(cells->v[cells->n].code = cli_slurp(f))) {
		cli_error(cmd, "cannot read %s: %s", is_stdin ? "standard input" : arg, strerror(errno));
		if (f && !is_stdin)
			fclose(f);
		return EXIT_USAGE;
	}
	if (!is_stdin)
		fclose(f);
	cells->n++;
	return EXIT_OK;
}

/* --backend bwrap|none, into the const char * at VALUE. */
static int backend_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	if (strcmp(arg, "bwrap") != 0 && strcmp(arg, "none") != 0) {
		cli_error(cmd, "unknown backend \"%s\" (kbox run has: bwrap, none)", arg);
		return EXIT_USAGE;
	}
	*(const char **)opt->value = arg;
	return EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
	const char *kernel = getenv("KBOX_KERNEL"), *cwd = NULL, *outputs = NULL;
	const char *backend = KBOX_BACKEND_DEFAULT;
	char rundir[PATH_MAX] = "", outbuf[PATH_MAX];
	int fd = -1;
	cli_strlist_t inputs = {0};
	size_t used_inputs = 0;
	cells_t cells = {0};
	long long timeout_ms = 0;
	int status = EXIT_OK;
	kbox_kspec_t *spec = NULL;
	kbox_error_t err = {0};
	char cwdbuf[PATH_MAX], cwdreal[PATH_MAX];
	format_t format = FMT_TEXT;
	long long max_bytes = 0, max_lines = 0;
	cli_option_t opts[] = {
	    CLI_OPT_STRING('k', "kernel", "NAME", &kernel,
	                   "the kernelspec (default: $KBOX_KERNEL, else python3)"),
	    CLI_OPT_STRING('C', "cwd", "DIR", &cwd,
	                   "the kernel's working directory (default: the current one)"),
	    CLI_OPT_CALLBACK(0, "backend", "bwrap|none", backend_cb, &backend,
	                     "bwrap, a sandbox, or none, unsandboxed (default: bwrap)"),
	    CLI_OPT_CALLBACK('t', "timeout", "SECONDS", cli_opt_timeout, &timeout_ms,
	                     "interrupt a cell after SECONDS, e.g. 30 or 2m (default: 0, no limit)"),
	    CLI_OPT_STRING('o', "outputs", "DIR", &outputs,
	                   "write images and long texts into DIR (default: the working directory)"),
	    CLI_OPT_LIST('i', "input", "LINE", &inputs,
	                 "answer input requests with LINE, in all cells; repeatable (default: none)"),
	    CLI_OPT_CALLBACK(0, "format", "FMT", cli_opt_format, &format,
	                     "write each result as text, json or ndjson (default: text)"),
	    CLI_OPT_CALLBACK(0, "max-output", "BYTES", cli_opt_max_output, &max_bytes,
	                     "keep at most BYTES of each text, 64 to 16M (default: 16K)"),
	    CLI_OPT_CALLBACK(0, "max-lines", "N", cli_opt_max_lines, &max_lines,
	                     "keep at most about N lines of each text, at least 2 (default: 200)"),
	    CLI_OPT_CALLBACK('c', "code", "CODE", code_cb, &cells,
	                     "run CODE as a cell, in order with the FILEs; repeatable"),
	    CLI_OPT_OPERANDS(file_cb, &cells),
	    CLI_OPT_END};

	if (!kernel || !*kernel)
		kernel = "python3";
	if (!(cells.v = calloc((size_t)argc + 1, sizeof *cells.v))) {
		cli_error("run", "out of memory");
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	if (cli_parse_options("run", opts, argc, argv, &status) < 0)
		goto out;
	if (cells.n == 0) {
		cli_error("run", "no code to run: give -c CODE, a FILE or - (see kbox run --help)");
		status = EXIT_USAGE;
		goto out;
	}
	for (size_t i = 0; i < cells.n; i++)
		if (!cli_utf8(cells.v[i].code)) {
			cli_error("run", "cell %zu (%s) is not valid UTF-8", i + 1, cells.v[i].source);
			status = EXIT_USAGE;
			goto out;
		}
	for (size_t i = 0; i < inputs.n; i++)
		if (!cli_utf8(inputs.v[i])) {
			cli_error("run", "--input line %zu is not valid UTF-8", i + 1);
			status = EXIT_USAGE;
			goto out;
		}
	if ((cwd && !cli_utf8(cwd)) || (outputs && !cli_utf8(outputs))) {
		cli_error("run", "%s %s is not valid UTF-8", cwd && !cli_utf8(cwd) ? "--cwd" : "--outputs",
		          cwd && !cli_utf8(cwd) ? cwd : outputs);
		status = EXIT_USAGE;
		goto out;
	}
	if (!cwd) {
		if (!getcwd(cwdbuf, sizeof cwdbuf)) {
			cli_error("run", "cannot read the current directory: %s", strerror(errno));
			status = EXIT_USAGE;
			goto out;
		}
		cwd = cwdbuf;
	} else if (access(cwd, X_OK) < 0) {
		cli_error("run", "--cwd %s: %s", cwd, strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	if (!realpath(cwd, cwdreal)) {
		cli_error("run", "--cwd %s: %s", cwd, strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	cwd = cwdreal;
	/* the supervisor writes there: it gets the absolute path (by default
	 * the working directory's, whatever links led to it) */
	if ((status = cli_outputs_dir("run", outputs ? outputs : cwd, outbuf)) != EXIT_OK)
		goto out;

	spec = kbox_kspec_find(kernel, &err);
	if (!spec) {
		cli_error("run", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	{
		/* a private session: the working directory as its workspace,
		 * never idle-stopped, stopped with us, removed when it stops */
		json_t *config = json_pack("{s:s, s:s, s:s, s:s, s:I, s:b, s:I}", "name", "run",
		                           "kernel", kernel, "backend", backend, "workspace", cwd,
		                           "ttl_ms", (json_int_t)0, "ephemeral", 1, "owner_pid",
		                           (json_int_t)getpid());
		kbox_error_t cerr = {0};
		status = cli_check_backend("run", config);
		if (status == EXIT_OK && !kbox_backend_sandboxed(backend))
			fprintf(stderr, "kbox: warning: backend %s: the kernel runs unsandboxed\n", backend);
		if (status == EXIT_OK && make_run_dir(rundir, sizeof rundir) < 0)
			status = EXIT_UNAVAILABLE;
		if (status == EXIT_OK)
			status = cli_session_start("run", rundir, "run", config, NULL);
		json_decref(config);
		if (status != EXIT_OK)
			goto out;
		if ((fd = kbox_ctl_connect(rundir, &cerr)) < 0) {
			cli_error("run", "%s", cerr.msg);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
	}
	for (size_t i = 0; i < cells.n && status == EXIT_OK; i++) {
		cli_exec_t e = {0};
		cli_exec_result_t r = {0};

		e.code = cells.v[i].code;
		e.timeout_ms = timeout_ms;
		e.grace_ms = 5000;
		e.max_bytes = max_bytes;
		e.max_lines = max_lines;
		e.outputs = outbuf;
		e.format = format;
		e.no_prefix = true;
		if (inputs.n) { /* the lines answer input() across cells */
			e.has_inputs = true;
			e.inputs = inputs.v + used_inputs;
			e.n_inputs = inputs.n - used_inputs;
		}
		status = cli_exec_on("run", fd, "run", &e, &r);
		used_inputs += r.inputs_used;
		if (used_inputs > inputs.n)
			used_inputs = inputs.n;
		if (status == EXIT_TIMEOUT || (status == EXIT_CODE_ERROR && r.reason[0]))
			cli_error("run", "cell %zu (%s): %s", i + 1, cells.v[i].source, r.reason);
		else if (status == EXIT_DIED)
			cli_error("run", "cell %zu (%s): %s; its state is lost", i + 1, cells.v[i].source,
			          r.reason);
	}
	fflush(stdout);
out:
	if (fd >= 0)
		close(fd);
	if (rundir[0]) {
		/* the session ends with its kernel; its supervisor removes it */
		kbox_error_t serr = {0};
		json_t *r = kbox_ctl_call(rundir, "stop", NULL, 30000, &serr);
		json_decref(r);
		rmdir(rundir); /* when the supervisor never started */
		/* nothing of the run is left when kbox run returns: wait (a
		 * moment) for the supervisor to have removed its directory */
		for (int i = 0; i < 500 && access(rundir, F_OK) == 0; i++)
			usleep(10000);
	}
	kbox_kspec_destroy(&spec);
	for (size_t i = 0; i < cells.n; i++)
		free(cells.v[i].code);
	free(cells.v);
	cli_strlist_clear(&inputs);
	return status;
}
