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
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
	char *code;   /* owned */
	char *source; /* "-c", a file name or "-" (borrowed from argv) */
} cell_t;

/* A private session directory for this run under $XDG_RUNTIME_DIR or
 * /tmp (0700), into BUF.  0, or -1 (printed). */
static int make_run_dir(char *buf, size_t size)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	if (!base || !*base || access(base, W_OK | X_OK) < 0)
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

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"kernel", required_argument, NULL, 'k'}, {"cwd", required_argument, NULL, 'C'},
	    {"timeout", required_argument, NULL, 't'}, {"outputs", required_argument, NULL, 'o'},
	    {"input", required_argument, NULL, 'i'},  {"code", required_argument, NULL, 'c'},
	    {"format", required_argument, NULL, 'F'}, {"max-output", required_argument, NULL, 'M'},
	    {"max-lines", required_argument, NULL, 'L'}, {"backend", required_argument, NULL, 'b'},
	    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
	const cli_cmd_t *self = cli_find("run");
	const char *kernel = getenv("KBOX_KERNEL"), *cwd = NULL, *outputs = NULL;
	const char *backend = KBOX_BACKEND_DEFAULT;
	char rundir[PATH_MAX] = "", outbuf[PATH_MAX];
	int fd = -1;
	const char **inputs = NULL;
	size_t n_inputs = 0, n_cells = 0, used_inputs = 0;
	cell_t *cells = NULL;
	long long timeout_ms = 0;
	int c, status = EXIT_OK;
	kbox_kspec_t *spec = NULL;
	kbox_error_t err = {0};
	char cwdbuf[PATH_MAX], cwdreal[PATH_MAX];
	bool used_stdin = false;
	format_t format = FMT_TEXT;
	long long max_bytes = 0, max_lines = 0;

	if (!kernel || !*kernel)
		kernel = "python3";
	inputs = calloc((size_t)argc + 1, sizeof *inputs);
	cells = calloc((size_t)argc + 1, sizeof *cells);
	if (!inputs || !cells) {
		cli_error("run", "out of memory");
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "-:k:C:t:o:i:c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'k': kernel = optarg; break;
		case 'C': cwd = optarg; break;
		case 'b':
			if (strcmp(optarg, "bwrap") != 0 && strcmp(optarg, "none") != 0) {
				cli_error("run", "unknown backend \"%s\" (kbox run has: bwrap, none)", optarg);
				status = EXIT_USAGE;
				goto out;
			}
			backend = optarg;
			break;
		case 'o': outputs = optarg; break;
		case 'i': inputs[n_inputs++] = optarg; break;
		case 'F':
			if (cli_parse_format("run", optarg, &format) < 0) {
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'M':
			if (cli_parse_max_output("run", optarg, &max_bytes) < 0) {
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'L':
			if (cli_parse_max_lines("run", optarg, &max_lines) < 0) {
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 't':
			timeout_ms = kbox_parse_duration(optarg);
			if (timeout_ms < 0 || timeout_ms > INT_MAX) {
				cli_error("run", "invalid --timeout \"%s\": expected seconds or a duration such "
				          "as 30, 0.5, 2m", optarg);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'c':
			cells[n_cells].source = "-c";
			if (!(cells[n_cells++].code = strdup(optarg))) {
				cli_error("run", "out of memory");
				status = EXIT_UNAVAILABLE;
				goto out;
			}
			break;
		case 1: {
			FILE *f;
			bool is_stdin = strcmp(optarg, "-") == 0;
			if (is_stdin && used_stdin) {
				cli_error("run", "standard input (-) given more than once");
				status = EXIT_USAGE;
				goto out;
			}
			used_stdin |= is_stdin;
			f = is_stdin ? stdin : fopen(optarg, "r");
			cells[n_cells].source = optarg;
			if (!f || !(cells[n_cells].code = cli_slurp(f))) {
				cli_error("run", "cannot read %s: %s", is_stdin ? "standard input" : optarg,
				          strerror(errno));
				if (f && !is_stdin)
					fclose(f);
				status = EXIT_USAGE;
				goto out;
			}
			if (!is_stdin)
				fclose(f);
			n_cells++;
			break;
		}
		case 'h': cli_usage(self, stdout); goto out;
		default:
			cli_bad_option("run", c, argv);
			status = EXIT_USAGE;
			goto out;
		}
	}
	if (n_cells == 0) {
		cli_error("run", "no code to run: give -c CODE, a FILE or - (see kbox run --help)");
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
	if (!outputs)
		outputs = cwd;
	else if (access(outputs, W_OK | X_OK) < 0) {
		cli_error("run", "--outputs %s: %s", outputs, strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	/* the supervisor writes there: it gets the absolute path */
	if (!realpath(outputs, outbuf)) {
		cli_error("run", "--outputs %s: %s", outputs, strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	if (!realpath(cwd, cwdreal)) {
		cli_error("run", "--cwd %s: %s", cwd, strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	cwd = cwdreal;

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
	for (size_t i = 0; i < n_cells && status == EXIT_OK; i++) {
		cli_exec_t e = {0};
		cli_exec_result_t r;

		e.code = cells[i].code;
		e.timeout_ms = timeout_ms;
		e.grace_ms = 5000;
		e.max_bytes = max_bytes;
		e.max_lines = max_lines;
		e.outputs = outbuf;
		e.format = format;
		e.no_prefix = true;
		if (n_inputs) { /* the lines answer input() across cells */
			e.has_inputs = true;
			e.inputs = inputs + used_inputs;
			e.n_inputs = n_inputs - used_inputs;
		}
		status = cli_exec_on("run", fd, "run", &e, &r);
		used_inputs += r.inputs_used;
		if (used_inputs > n_inputs)
			used_inputs = n_inputs;
		if (status == EXIT_TIMEOUT || (status == EXIT_CODE_ERROR && r.reason[0]))
			cli_error("run", "cell %zu (%s): %s", i + 1, cells[i].source, r.reason);
		else if (status == EXIT_DIED)
			cli_error("run", "cell %zu (%s): %s; its state is lost", i + 1, cells[i].source,
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
	}
	kbox_kspec_destroy(&spec);
	for (size_t i = 0; cells && i < n_cells; i++)
		free(cells[i].code);
	free(cells);
	free(inputs);
	return status;
}
