/* src/cli/cmd_exec.c — kbox exec: run code in a session's kernel.
 *
 * A thin client: one "execute" request on the session's control socket
 * (kbox-protocol(7)), the result (and, on a terminal or with ndjson, the
 * events as they come) back.  The supervisor runs it: one at a time, with
 * the timeout, the interrupt, the kill and the new kernel when it comes to
 * that.  Leaving early (Ctrl-C, killed) closes the connection, and the
 * supervisor interrupts the code. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The request for E (new reference), or NULL. */
static json_t *exec_request(const cli_exec_t *e)
{
	static const char *const fmts[] = {"text", "json", "ndjson"};
	bool live = e->format == FMT_TEXT && isatty(STDOUT_FILENO);
	json_t *req = json_pack("{s:s, s:s, s:s}", "op", "execute", "code", e->code, "format",
	                        live ? "text-live" : fmts[e->format]);
	if (!req)
		return NULL;
	if (e->timeout_ms > 0)
		json_object_set_new(req, "timeout", json_real((double)e->timeout_ms / 1000.0));
	json_object_set_new(req, "grace", json_real((double)e->grace_ms / 1000.0));
	if (e->max_bytes > 0)
		json_object_set_new(req, "max_output", json_integer(e->max_bytes));
	if (e->max_lines > 0)
		json_object_set_new(req, "max_lines", json_integer(e->max_lines));
	if (e->outputs)
		json_object_set_new(req, "outputs", json_string(e->outputs));
	if (e->no_prefix)
		json_object_set_new(req, "prefix", json_string(""));
	if (e->has_inputs) {
		json_t *in = json_array();
		for (size_t i = 0; i < e->n_inputs; i++)
			json_array_append_new(in, json_string(e->inputs[i]));
		json_object_set_new(req, "input", in);
	}
	return req;
}

static int exit_of(const char *status)
{
	if (!status)
		return EXIT_UNAVAILABLE;
	if (strcmp(status, "ok") == 0)
		return EXIT_OK;
	if (strcmp(status, "error") == 0 || strcmp(status, "aborted") == 0)
		return EXIT_CODE_ERROR;
	if (strcmp(status, "timeout") == 0 || strcmp(status, "interrupted") == 0)
		return EXIT_TIMEOUT;
	return EXIT_DIED;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The result of code whose kernel died with no one left to say so (its
 * supervisor went away): the died line, or a JSON result (the ndjson end
 * event) with status "died", REASON and nothing captured. */
static void died_result(const cli_exec_t *e, const char *reason, double seconds)
{
	json_t *j;
	if (e->format == FMT_TEXT) {
		printf("[kernel died: %s; earlier state is lost]\n", reason);
		fflush(stdout);
		return;
	}
	j = json_pack("{s:s, s:s, s:n, s:f, s:s, s:[], s:{s:s, s:i, s:i, s:b, s:n, s:i, s:i}, "
	              "s:{s:s, s:i, s:i, s:b, s:n, s:i, s:i}, s:n, s:[], s:[], s:n, s:[]}",
	              "schema", CLI_RESULT_SCHEMA, "status", "died", "execution_count", "seconds",
	              seconds < 0 ? 0.0 : seconds, "reason", reason, "outputs", "stdout", "text", "",
	              "total_bytes", 0, "total_lines", 0, "truncated", 0, "spill_path",
	              "dropped_messages", 0, "dropped_bytes", 0, "stderr", "text", "", "total_bytes",
	              0, "total_lines", 0, "truncated", 0, "spill_path", "dropped_messages", 0,
	              "dropped_bytes", 0, "value", "displays", "images", "error", "notices");
	if (j && e->format == FMT_NDJSON)
		json_object_set_new(j, "event", json_string("end"));
	cli_print_json_line(j);
	fflush(stdout);
}

int cli_exec_on(const char *cmd, int fd, const char *name, const cli_exec_t *e,
                cli_exec_result_t *r)
{
	kbox_error_t err = {0};
	json_t *req = exec_request(e), *m = NULL;
	bool tty = isatty(STDOUT_FILENO), started = false;
	double t0 = now_s();
	int sent;

	bool quiet = r->quiet_if_lost;
	memset(r, 0, sizeof *r);
	r->quiet_if_lost = quiet;
	r->status = EXIT_UNAVAILABLE;
	if (!req) {
		cli_error(cmd, "out of memory");
		return r->status;
	}
	if (e->outputs) {
		/* the supervisor writes into the directory this opened, not into
		 * whatever the path leads to later */
		int dfd = open(e->outputs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0) {
			cli_error(cmd, "--outputs %s: %s", e->outputs,
			          errno == ELOOP ? "it is a symbolic link" : strerror(errno));
			json_decref(req);
			r->status = EXIT_USAGE;
			return r->status;
		}
		sent = kbox_ctl_send_fd(fd, req, dfd, &err);
		close(dfd);
	} else
		sent = kbox_ctl_send(fd, req, &err);
	if (sent < 0) {
		cli_error(cmd, "session %s: %s", name, err.msg);
		json_decref(req);
		return r->status;
	}
	json_decref(req);
	/* "started", events, then the reply; no time limit of our own: the
	 * supervisor enforces the code's, and tells when it cannot start */
	while ((m = kbox_ctl_recv(fd, -1, &err))) {
		json_t *ev = json_object_get(m, "event");
		if (json_is_true(json_object_get(m, "started"))) {
			started = true;
			const char *notice = json_string_value(json_object_get(m, "notice"));
			const char *earlier = json_string_value(json_object_get(m, "earlier_output"));
			/* live text: the notice and what came between executions
			 * first, then the stream as it comes */
			if (e->format == FMT_TEXT && tty) {
				if (notice)
					printf("[note: %s]\n", notice);
				if (earlier) {
					printf("[output printed between executions:]\n");
					cli_write_safe(stdout, earlier,
					               json_string_length(json_object_get(m, "earlier_output")));
					printf("[end of that output]\n");
				}
				fflush(stdout);
			}
		} else if (ev) {
			if (e->format == FMT_NDJSON)
				cli_print_json_line(json_incref(ev));
			else if (e->format == FMT_TEXT) {
				const char *text = json_string_value(json_object_get(ev, "text"));
				size_t tlen = json_string_length(json_object_get(ev, "text"));
				const char *sname = json_string_value(json_object_get(ev, "name"));
				FILE *f = sname && strcmp(sname, "stderr") == 0 ? stderr : stdout;
				if (text) {
					cli_write_safe(f, text, tlen);
					fflush(f);
				}
			}
		} else
			break;
		json_decref(m);
	}
	if (!m) {
		/* a supervisor that was stopping took the request and left: the
		 * code never began, the caller may start a new one and retry */
		if (!started && r->quiet_if_lost) {
			r->lost = true;
			return r->status;
		}
		if (started && err.code == KBOX_E_DEAD) {
			/* the code began and its kernel went with the supervisor:
			 * the result says so, as for any kernel that died */
			died_result(e, "the session's supervisor went away", now_s() - t0);
			r->status = EXIT_DIED;
			snprintf(r->reason, sizeof r->reason, "the session's supervisor went away");
			return r->status;
		}
		cli_error(cmd, "session %s: %s", name,
		          err.code == KBOX_E_DEAD ? "the session's supervisor went away" : err.msg);
		return r->status;
	}
	if (!json_is_true(json_object_get(m, "ok"))) {
		const char *msg = json_string_value(json_object_get(m, "error"));
		const char *kind = json_string_value(json_object_get(m, "kind"));
		cli_error(cmd, "session %s: %s", name, msg ? msg : "the supervisor refused");
		/* waiting for another execution ran out of time */
		r->status = kind && strcmp(kind, "busy") == 0 ? EXIT_BUSY
		            : kind && strcmp(kind, "usage") == 0 ? EXIT_USAGE
		                                                  : EXIT_UNAVAILABLE;
		json_decref(m);
		return r->status;
	}
	if (e->format == FMT_TEXT) {
		const char *text = json_string_value(json_object_get(m, "text"));
		size_t tlen = json_string_length(json_object_get(m, "text"));
		if (text && tty) /* what the code printed must not drive the terminal */
			cli_write_safe(stdout, text, tlen);
		else if (text)
			fwrite(text, 1, tlen, stdout);
	} else
		cli_print_json_line(json_incref(json_object_get(m, "result")));
	fflush(stdout);
	r->status = exit_of(json_string_value(json_object_get(m, "status")));
	r->inputs_used = (size_t)json_integer_value(json_object_get(m, "inputs_used"));
	snprintf(r->reason, sizeof r->reason, "%s",
	         json_string_value(json_object_get(m, "reason")) ?: "");
	json_decref(m);
	return r->status;
}

bool cli_ctl_request_fits(const json_t *req)
{
	return req && json_dumpb(req, NULL, 0, JSON_COMPACT | JSON_REAL_PRECISION(9)) + 1 <=
	                  (size_t)KBOX_CTL_REQUEST_MAX;
}

int cli_session_connect(const char *cmd, const char *dir, const char *name, bool no_start,
                        int *status)
{
	kbox_error_t err = {0};
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd = kbox_ctl_connect(dir, &err);
		if (fd >= 0)
			return fd;
		if (no_start || err.code != KBOX_E_NOTFOUND) {
			cli_error(cmd, "session %s is not running%s%s", name,
			          no_start ? " (--no-start given)" : ": ", no_start ? "" : err.msg);
			*status = EXIT_UNAVAILABLE;
			return -1;
		}
		if ((*status = cli_session_start(cmd, dir, name, NULL, NULL)) != EXIT_OK)
			return -1;
	}
	cli_error(cmd, "session %s: the supervisor kept going away", name);
	*status = EXIT_UNAVAILABLE;
	return -1;
}

int cmd_exec(int argc, char **argv)
{
	const char *name = NULL, *outputs = NULL, *file = NULL;
	cli_strlist_t inputs = {0};
	cli_exec_t e = {.grace_ms = 5000};
	cli_exec_result_t r;
	bool no_start = false;
	cli_option_t opts[] = {
	    CLI_OPT_SESSION(&name),
	    CLI_OPT_CALLBACK('t', "timeout", "DURATION", cli_opt_duration, &e.timeout_ms,
	                     "interrupt the code after DURATION, e.g. 30 or 2m (default: 0, no limit)"),
	    CLI_OPT_CALLBACK(0, "grace", "DURATION", cli_opt_duration, &e.grace_ms,
	                     "after a timeout's interrupt, wait DURATION before the kill (default: 5s)"),
	    CLI_OPT_CALLBACK(0, "format", "FMT", cli_opt_format, &e.format,
	                     "write the result as text, json or ndjson (default: text)"),
	    CLI_OPT_JSON('j', &e.format),
	    CLI_OPT_STRING('o', "outputs", "DIR", &outputs,
	                   "write images and long texts into DIR (default: the session's outputs)"),
	    CLI_OPT_CALLBACK(0, "max-output", "BYTES", cli_opt_max_output, &e.max_bytes,
	                     "keep at most BYTES of each text, 64 to 16M (default: 16K)"),
	    CLI_OPT_CALLBACK(0, "max-lines", "N", cli_opt_max_lines, &e.max_lines,
	                     "keep at most about N lines of each text, at least 2 (default: 200)"),
	    CLI_OPT_LIST('i', "input", "LINE", &inputs,
	                 "answer a request for input with LINE; repeatable (default: none)"),
	    CLI_OPT_CALLBACK(0, "input-file", "FILE", cli_opt_input_file, &inputs,
	                     "answer requests for input with the lines of FILE, after any -i "
	                     "given before it (default: none)"),
	    CLI_OPT_FLAG(0, "no-start", &no_start,
	                 "fail when the session is not running (default: start it)"),
	    CLI_OPT_STRING('f', "file", "FILE", &file,
	                   "run the contents of FILE, - for standard input (default: CODE)"),
	    CLI_OPT_END};
	char *code = NULL, *dir = NULL, outbuf[PATH_MAX];
	int fd = -1, status, n = cli_parse_options("exec", opts, argc, argv, &status);

	if (n < 0)
		goto out;
	/* the code: one of CODE, -f FILE, - */
	if ((file ? 1 : 0) + n != 1) {
		cli_error("exec", (file || n > 0) ? "give the code once: CODE, -f FILE or -"
		                                          : "no code to run: give CODE, -f FILE or - "
		                                            "(see kbox exec --help)");
		status = EXIT_USAGE;
		goto out;
	}
	if (file || strcmp(argv[0], "-") == 0) {
		bool is_stdin = !file || strcmp(file, "-") == 0;
		FILE *f;
		if (is_stdin && !cli_take_stdin()) {
			cli_error("exec", "standard input (-) given more than once (for the code and "
			                  "--input-file)");
			status = EXIT_USAGE;
			goto out;
		}
		f = is_stdin ? stdin : fopen(file, "r");
		if (!f || !(code = cli_slurp(f))) {
			cli_error("exec", "cannot read %s: %s", is_stdin ? "standard input" : file,
			          cli_slurp_strerror(errno));
			if (f && !is_stdin)
				fclose(f);
			status = EXIT_USAGE;
			goto out;
		}
		if (!is_stdin)
			fclose(f);
	} else if (!(code = strdup(argv[0]))) {
		cli_error("exec", "out of memory");
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	{
		json_t *probe = json_string(code); /* NULL unless valid UTF-8 */
		if (!probe) {
			cli_error("exec", "the code is not valid UTF-8");
			status = EXIT_USAGE;
			goto out;
		}
		json_decref(probe);
		for (size_t i = 0; i < inputs.n; i++) {
			if (!(probe = json_string(inputs.v[i]))) {
				cli_error("exec", "--input line %zu is not valid UTF-8", i + 1);
				status = EXIT_USAGE;
				goto out;
			}
			json_decref(probe);
		}
	}
	if (outputs && !cli_utf8(outputs)) {
		cli_error("exec", "--outputs %s is not valid UTF-8", outputs);
		status = EXIT_USAGE;
		goto out;
	}
	if (outputs) {
		/* the supervisor writes there: it gets the absolute path */
		if ((status = cli_outputs_dir("exec", outputs, outbuf)) != EXIT_OK)
			goto out;
		e.outputs = outbuf;
	}
	name = cli_session_name(name);
	if ((status = cli_check_session("exec", name)) != EXIT_OK)
		goto out;
	if (!(dir = cli_session_dir("exec", name, !no_start, &status)))
		goto out;
	if ((fd = cli_session_connect("exec", dir, name, no_start, &status)) < 0)
		goto out;
	e.code = code;
	e.inputs = inputs.v;
	e.n_inputs = inputs.n;
	e.has_inputs = inputs.n > 0;
	status = cli_exec_on("exec", fd, name, &e, &r);
out:
	if (fd >= 0)
		close(fd);
	free(dir);
	free(code);
	cli_strlist_clear(&inputs);
	return status;
}
