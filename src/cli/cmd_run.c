/* src/cli/cmd_run.c — kbox run: run cells, in order, in one fresh kernel, in
 * a bwrap sandbox whose /workspace is the working directory (or, with
 * --backend none, as a local process). */
#include "config.h"
#include "cli.h"
#include "../private.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>

typedef struct {
	char *code;   /* owned */
	char *source; /* "-c", a file name or "-" (borrowed from argv) */
} cell_t;

/* The kernel: a local process, or a sandbox and the runtime directory
 * made for it (removed at the end). */
typedef struct {
	kbox_kernel_t *k;
	kbox_sandbox_t *sb;
	char dir[PATH_MAX];
	char conn[PATH_MAX + 32];
} run_kernel_t;

static int sb_alive(void *arg) { return kbox_sandbox_alive(arg) ? 1 : 0; }

static int sb_interrupt(void *arg, kbox_error_t *err) { return kbox_sandbox_interrupt(arg, err); }

/* Start SPEC's kernel in a bwrap sandbox with the backend's default limits
 * and CWD as /workspace, and connect *CLIENT once it answers.  0 or -1
 * with ERR. */
static int start_sandboxed(run_kernel_t *rk, const kbox_kspec_t *spec, const char *cwd,
                           kbox_client_t **client, kbox_error_t *err)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	kbox_sandbox_opts_t so = {0};
	kbox_conn_t *conn = NULL;
	long long deadline = 0;
	struct timespec ts;
	kbox_client_hooks_t hooks;

	if (!base || !*base || access(base, W_OK | X_OK) < 0)
		base = "/tmp";
	snprintf(rk->dir, sizeof rk->dir, "%s/kbox-run-XXXXXX", base);
	if (!mkdtemp(rk->dir)) {
		rk->dir[0] = '\0';
		return kbox__err_sys(err, "cannot create a runtime directory under %s", base);
	}
	snprintf(rk->conn, sizeof rk->conn, "%s/kernel-1.json", rk->dir);
	so.kbox_exe = "/proc/self/exe";
	so.conn_path = rk->conn;
	so.runtime_dir = rk->dir;
	so.workspace = cwd;
	so.name = "run";
	if (!(rk->sb = kbox_sandbox_spawn("bwrap", spec, &so, err)))
		return -1;
	/* the helper writes the connection file, then becomes bwrap */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	deadline = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + 60000;
	while (!(conn = kbox_conn_load(rk->conn, err))) {
		if (!kbox_sandbox_alive(rk->sb))
			return kbox__err(err, KBOX_E_DEAD, "%s before it was ready",
			                 kbox_sandbox_cause(rk->sb));
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if ((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 > deadline)
			return -1;
		usleep(5000);
	}
	*client = kbox_client_new(conn, err);
	kbox_conn_destroy(&conn);
	if (!*client)
		return -1;
	hooks.interrupt = sb_interrupt;
	hooks.alive = sb_alive;
	hooks.arg = rk->sb;
	kbox_client_set_hooks(*client, &hooks);
	if (kbox_client_wait_ready(*client, 60000, err) < 0) {
		if (!kbox_sandbox_alive(rk->sb))
			return kbox__err(err, KBOX_E_DEAD, "%s before it was ready",
			                 kbox_sandbox_cause(rk->sb));
		return -1;
	}
	return 0;
}

/* Stop the kernel (a shutdown_request through CLIENT when given) and
 * remove what it left. */
static void stop_kernel(run_kernel_t *rk, kbox_client_t *client)
{
	kbox_error_t err = {0};
	if (rk->k && kbox_kernel_stop(rk->k, client, &err) < 0)
		cli_error("run", "%s", err.msg);
	if (rk->sb) {
		if (client && kbox_sandbox_alive(rk->sb)) {
			kbox_msg_t *reply = kbox_client_shutdown(client, false, 2000, NULL);
			kbox_msg_destroy(&reply);
		}
		kbox_sandbox_stop(rk->sb, false, NULL);
	}
}

/* Parse SECONDS ("2", "0.5"); -1 when invalid. */
static long parse_timeout_ms(const char *s)
{
	char *end;
	double v;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0) || v > 86400.0 * 365)
		return -1;
	return (long)ceil(v * 1000);
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
	run_kernel_t rk = {0};
	const char **inputs = NULL;
	size_t n_inputs = 0, n_cells = 0, used_inputs = 0;
	cell_t *cells = NULL;
	long timeout_ms = 0;
	int c, status = EXIT_OK;
	kbox_kspec_t *spec = NULL;
	kbox_client_t *client = NULL;
	kbox_error_t err = {0};
	char cwdbuf[PATH_MAX];
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
			timeout_ms = parse_timeout_ms(optarg);
			if (timeout_ms < 0) {
				cli_error("run", "invalid --timeout \"%s\": expected seconds (e.g. 30 or 0.5)",
				          optarg);
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

	spec = kbox_kspec_find(kernel, &err);
	if (!spec) {
		cli_error("run", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	if (strcmp(backend, "none") == 0) {
		kbox_kernel_opts_t ko = {0};
		fprintf(stderr, "kbox: warning: backend none: the kernel runs unsandboxed\n");
		ko.cwd = cwd;
		if (!(rk.k = kbox_kernel_start_ready(spec, &ko, 60000, &client, &err))) {
			cli_error("run", "%s", err.msg);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
	} else {
		json_t *config = json_pack("{s:s}", "backend", backend);
		status = cli_check_backend("run", config);
		json_decref(config);
		if (status != EXIT_OK)
			goto out;
		if (start_sandboxed(&rk, spec, cwd, &client, &err) < 0) {
			cli_error("run", "%s", err.msg);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
	}
	for (size_t i = 0; i < n_cells && status == EXIT_OK; i++) {
		kbox_capture_opts_t co = {0};
		kbox_capture_t *cap;
		kbox_result_t *res;
		kbox_exec_opts_t eo = {0};
		kbox_exec_t *x;

		co.outputs_dir = outputs;
		co.max_bytes = (size_t)max_bytes;
		co.max_lines = (size_t)max_lines;
		cap = kbox_capture_new(&co, &err);
		if (!cap) {
			cli_error("run", "%s", err.msg);
			status = EXIT_USAGE;
			break;
		}
		if (format == FMT_NDJSON)
			kbox_capture_set_event_cb(cap, cli_on_event_ndjson, NULL);
		eo.code = cells[i].code;
		eo.timeout_ms = (int)(timeout_ms > INT_MAX ? INT_MAX : timeout_ms);
		eo.interrupt_on_timeout = true;
		eo.on_msg = kbox_capture_on_msg;
		eo.cb_arg = cap;
		if (n_inputs) { /* the lines answer input() across cells */
			eo.input_lines = inputs + used_inputs;
			eo.n_input = n_inputs - used_inputs;
		}
		x = kbox_client_execute(client, &eo, &err);
		if (!x) {
			cli_error("run", "%s", err.msg);
			kbox_capture_destroy(&cap);
			status = EXIT_DIED;
			break;
		}
		res = kbox_capture_finish(&cap, x);
		if (!res) {
			cli_error("run", "out of memory");
			kbox_capture_destroy(&cap);
		} else if (format == FMT_TEXT) {
			char *text = kbox_render_text(res);
			if (text && isatty(STDOUT_FILENO)) /* nothing from the kernel drives the terminal */
				cli_write_safe(stdout, text, strlen(text));
			else if (text)
				fputs(text, stdout);
			free(text);
			fflush(stdout);
		} else {
			cli_print_json_line(format == FMT_JSON ? kbox_render_json(res)
			                                   : kbox_render_end_event(res));
		}
		kbox_result_destroy(&res);
		used_inputs += kbox_exec_inputs_answered(x);
		if (used_inputs > n_inputs)
			used_inputs = n_inputs;
		switch (kbox_exec_status(x)) {
		case KBOX_EXEC_OK: break;
		case KBOX_EXEC_ERROR: status = EXIT_CODE_ERROR; break;
		case KBOX_EXEC_ABORTED:
			cli_error("run", "cell %zu (%s): %s", i + 1, cells[i].source, kbox_exec_reason(x));
			status = EXIT_CODE_ERROR;
			break;
		case KBOX_EXEC_TIMEOUT:
			cli_error("run", "cell %zu (%s): %s", i + 1, cells[i].source, kbox_exec_reason(x));
			status = EXIT_TIMEOUT;
			break;
		case KBOX_EXEC_DIED:
			cli_error("run", "cell %zu (%s): %s; its state is lost", i + 1, cells[i].source,
			          kbox_exec_reason(x));
			status = EXIT_DIED;
			break;
		}
		kbox_exec_destroy(&x);
	}
	fflush(stdout);
	stop_kernel(&rk, status == EXIT_DIED ? NULL : client);
out:
	kbox_client_destroy(&client);
	kbox_kernel_destroy(&rk.k);
	kbox_sandbox_destroy(&rk.sb);
	if (rk.dir[0]) {
		char sb[PATH_MAX + 16];
		snprintf(sb, sizeof sb, "%s/sandbox", rk.dir);
		rmdir(sb);
		rmdir(rk.dir);
	}
	kbox_kspec_destroy(&spec);
	for (size_t i = 0; cells && i < n_cells; i++)
		free(cells[i].code);
	free(cells);
	free(inputs);
	return status;
}
