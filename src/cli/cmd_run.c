/* src/cli/cmd_run.c — kbox run: run cells, in order, in one fresh local kernel. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

typedef struct {
	char *code;   /* owned */
	char *source; /* "-c", a file name or "-" (borrowed from argv) */
} cell_t;

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
	    {"max-lines", required_argument, NULL, 'L'},
	    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
	const cli_cmd_t *self = cli_find("run");
	const char *kernel = getenv("KBOX_KERNEL"), *cwd = NULL, *outputs = NULL;
	const char **inputs = NULL;
	size_t n_inputs = 0, n_cells = 0, used_inputs = 0;
	cell_t *cells = NULL;
	long timeout_ms = 0;
	int c, status = EXIT_OK;
	kbox_kspec_t *spec = NULL;
	kbox_kernel_t *k = NULL;
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
	fprintf(stderr, "kbox: warning: backend none: the kernel runs unsandboxed\n");
	{
		kbox_kernel_opts_t ko = {0};
		ko.cwd = cwd;
		k = kbox_kernel_start_ready(spec, &ko, 60000, &client, &err);
	}
	if (!k) {
		cli_error("run", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
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
	if (kbox_kernel_stop(k, status == EXIT_DIED ? NULL : client, &err) < 0)
		cli_error("run", "%s", err.msg);
out:
	kbox_client_destroy(&client);
	kbox_kernel_destroy(&k);
	kbox_kspec_destroy(&spec);
	for (size_t i = 0; cells && i < n_cells; i++)
		free(cells[i].code);
	free(cells);
	free(inputs);
	return status;
}
