/* src/cli/cmd_exec.c — kbox exec: run code in a session's kernel.
 *
 * Asks the supervisor for the kernel ("exec" on the control socket, held
 * open for the execution: the session is busy meanwhile, and a death is
 * told on it), then talks to the kernel directly. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXEC_GRANT_WAIT_MS 120000 /* the supervisor may be restarting a kernel */
#define READY_WAIT_MS 30000

typedef struct {
	int fd;
	bool died, gone, restarting;
	char cause[512];
} ctl_t;

/* Take one line from the supervisor if there is one: a death notice or
 * the end of the connection. */
static void ctl_poll(ctl_t *c, int timeout_ms)
{
	struct pollfd p = {c->fd, POLLIN, 0};
	json_t *m;
	kbox_error_t err = {0};
	if (c->gone || poll(&p, 1, timeout_ms) <= 0)
		return;
	m = kbox_ctl_recv(c->fd, 1000, &err);
	if (!m) {
		c->gone = true;
		if (!c->died)
			snprintf(c->cause, sizeof c->cause, "the session's supervisor went away");
		return;
	}
	if (json_is_string(json_object_get(m, "event")) &&
	    strcmp(json_string_value(json_object_get(m, "event")), "died") == 0) {
		const char *cause = json_string_value(json_object_get(m, "cause"));
		c->died = true;
		c->restarting = json_is_true(json_object_get(m, "restarting"));
		snprintf(c->cause, sizeof c->cause, "%s", cause ? cause : "the kernel died");
	}
	json_decref(m);
}

static int hook_alive(void *arg)
{
	ctl_t *c = arg;
	ctl_poll(c, 0);
	return c->died || c->gone ? 0 : 1;
}

/* Ask the supervisor to interrupt; its answer may come after a death notice. */
static int hook_interrupt(void *arg, kbox_error_t *err)
{
	ctl_t *c = arg;
	json_t *req = json_pack("{s:s}", "op", "interrupt");
	long long deadline = 0;
	int rc = kbox_ctl_send(c->fd, req, err);
	json_decref(req);
	for (int i = 0; rc == 0 && i < 16 && !deadline; i++) {
		json_t *m = kbox_ctl_recv(c->fd, 5000, err);
		if (!m)
			return -1;
		if (json_object_get(m, "event")) {
			const char *cause = json_string_value(json_object_get(m, "cause"));
			c->died = true;
			c->restarting = json_is_true(json_object_get(m, "restarting"));
			snprintf(c->cause, sizeof c->cause, "%s", cause ? cause : "the kernel died");
		} else {
			if (!json_is_true(json_object_get(m, "ok"))) {
				const char *e = json_string_value(json_object_get(m, "error"));
				rc = -1;
				if (err) {
					err->code = KBOX_E_INVALID;
					snprintf(err->msg, sizeof err->msg, "%s", e ? e : "interrupt refused");
				}
			}
			deadline = 1;
		}
		json_decref(m);
	}
	return rc;
}

/* "2 s", "1.5 s", "200 ms": as the library words its timeouts. */
static const char *fmt_ms(long long ms, char *buf, size_t size)
{
	if (ms % 1000 == 0)
		snprintf(buf, size, "%lld s", ms / 1000);
	else if (ms > 1000)
		snprintf(buf, size, "%.1f s", (double)ms / 1000.0);
	else
		snprintf(buf, size, "%lld ms", ms);
	return buf;
}

/* On a terminal: show stream text as it comes. */
static void on_event_tty(void *arg, const kbox_capture_t *cap, const kbox_event_t *ev)
{
	(void)arg;
	(void)cap;
	if (ev->type == KBOX_EV_STREAM && ev->text) {
		FILE *f = ev->stream == KBOX_TEXT_STDERR ? stderr : stdout;
		cli_write_safe(f, ev->text, ev->len);
		fflush(f);
	}
}

/* Connect to the supervisor and get the kernel for one execution.  Starts
 * the session unless NO_START.  The grant (new reference) or NULL with
 * *STATUS set and one line printed. */
static json_t *get_kernel(const char *dir, const char *name, bool no_start, long long timeout_ms,
                          ctl_t *c, int *status)
{
	kbox_error_t err = {0};
	for (int attempt = 0; attempt < 3; attempt++) {
		json_t *req, *grant;
		c->fd = kbox_ctl_connect(dir, &err);
		if (c->fd < 0) {
			if (no_start || err.code != KBOX_E_NOTFOUND) {
				cli_error("exec", "session %s is not running%s%s", name,
				          no_start ? " (--no-start given)" : ": ", no_start ? "" : err.msg);
				*status = EXIT_UNAVAILABLE;
				return NULL;
			}
			if ((*status = cli_session_start("exec", dir, name, NULL, NULL)) != EXIT_OK)
				return NULL;
			continue;
		}
		req = json_pack("{s:s}", "op", "exec");
		if (kbox_ctl_send(c->fd, req, &err) < 0 ||
		    !(grant = kbox_ctl_recv(c->fd, timeout_ms > 0 ? (int)timeout_ms : -1, &err))) {
			/* a supervisor that was stopping: try again, starting a new one */
			json_decref(req);
			close(c->fd);
			c->fd = -1;
			if (err.code == KBOX_E_TIMEOUT) {
				cli_error("exec", "session %s: timed out waiting for another execution to end "
				          "(the session runs one at a time)", name);
				*status = EXIT_TIMEOUT;
				return NULL;
			}
			if (no_start) {
				cli_error("exec", "session %s: %s", name, err.msg);
				*status = EXIT_UNAVAILABLE;
				return NULL;
			}
			usleep(100000);
			continue;
		}
		json_decref(req);
		if (!json_is_true(json_object_get(grant, "ok"))) {
			const char *m = json_string_value(json_object_get(grant, "error"));
			cli_error("exec", "session %s: %s", name, m ? m : "the supervisor refused");
			json_decref(grant);
			*status = EXIT_UNAVAILABLE;
			return NULL;
		}
		return grant;
	}
	cli_error("exec", "session %s: the supervisor kept going away", name);
	*status = EXIT_UNAVAILABLE;
	return NULL;
}

int cmd_exec(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"session", required_argument, NULL, 's'}, {"timeout", required_argument, NULL, 't'},
	    {"format", required_argument, NULL, 'F'},  {"outputs", required_argument, NULL, 'o'},
	    {"max-output", required_argument, NULL, 'M'}, {"max-lines", required_argument, NULL, 'L'},
	    {"input", required_argument, NULL, 'i'},   {"file", required_argument, NULL, 'f'},
	    {"grace", required_argument, NULL, 'g'},   {"no-start", no_argument, NULL, 'N'},
	    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
	const char *name = NULL, *outputs = NULL, *file = NULL;
	const char **inputs = NULL;
	size_t n_inputs = 0;
	long long timeout_ms = 0, grace_ms = 5000, max_bytes = 0, max_lines = 0;
	format_t format = FMT_TEXT;
	bool no_start = false, killed = false, quick = false;
	char *code = NULL, *dir = NULL, outbuf[4200], prefix[48];
	int c, status = EXIT_OK;
	ctl_t ctl = {-1, false, false, false, ""};
	json_t *grant = NULL;
	kbox_error_t err = {0};
	kbox_conn_t *conn = NULL;
	kbox_client_t *client = NULL;
	kbox_exec_t *x = NULL;
	kbox_result_t *res = NULL;
	kbox_capture_t *cap = NULL;

	if (!(inputs = calloc((size_t)argc + 1, sizeof *inputs))) {
		cli_error("exec", "out of memory");
		return EXIT_UNAVAILABLE;
	}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:t:o:i:f:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': name = optarg; break;
		case 'o': outputs = optarg; break;
		case 'i': inputs[n_inputs++] = optarg; break;
		case 'f': file = optarg; break;
		case 'N': no_start = true; break;
		case 't':
		case 'g': {
			long long v = kbox_parse_duration(optarg);
			if (v < 0 || v > INT_MAX) {
				cli_error("exec", "invalid --%s \"%s\": expected seconds or a duration such as "
				          "30, 0.5, 2m", c == 't' ? "timeout" : "grace", optarg);
				status = EXIT_USAGE;
				goto out;
			}
			*(c == 't' ? &timeout_ms : &grace_ms) = v;
			break;
		}
		case 'F':
			if (cli_parse_format("exec", optarg, &format) < 0) {
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'M':
			if (cli_parse_max_output("exec", optarg, &max_bytes) < 0) {
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'L':
			if (cli_parse_max_lines("exec", optarg, &max_lines) < 0) {
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'h':
			cli_usage(cli_find("exec"), stdout);
			goto out;
		default:
			cli_bad_option("exec", c, argv);
			status = EXIT_USAGE;
			goto out;
		}
	}
	/* the code: one of CODE, -f FILE, - */
	if ((file ? 1 : 0) + (argc - optind) != 1) {
		cli_error("exec", (file || optind < argc) ? "give the code once: CODE, -f FILE or -"
		                                          : "no code to run: give CODE, -f FILE or - "
		                                            "(see kbox exec --help)");
		status = EXIT_USAGE;
		goto out;
	}
	if (file || strcmp(argv[optind], "-") == 0) {
		bool is_stdin = !file || strcmp(file, "-") == 0;
		FILE *f = is_stdin ? stdin : fopen(file, "r");
		if (!f || !(code = cli_slurp(f))) {
			cli_error("exec", "cannot read %s: %s", is_stdin ? "standard input" : file,
			          strerror(errno));
			if (f && !is_stdin)
				fclose(f);
			status = EXIT_USAGE;
			goto out;
		}
		if (!is_stdin)
			fclose(f);
	} else if (!(code = strdup(argv[optind]))) {
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
		for (size_t i = 0; i < n_inputs; i++) {
			if (!(probe = json_string(inputs[i]))) {
				cli_error("exec", "--input line %zu is not valid UTF-8", i + 1);
				status = EXIT_USAGE;
				goto out;
			}
			json_decref(probe);
		}
	}
	if (outputs && access(outputs, W_OK | X_OK) < 0) {
		cli_error("exec", "--outputs %s: %s", outputs, strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	name = cli_session_name(name);
	if ((status = cli_check_session("exec", name)) != EXIT_OK)
		goto out;
	if (!(dir = cli_session_dir("exec", name, !no_start, &status)))
		goto out;
	if (!(grant = get_kernel(dir, name, no_start, timeout_ms, &ctl, &status)))
		goto out;

	/* the kernel was restarted since the last execution: in text, the first
	 * line (before any output streamed to a terminal), so a model cannot
	 * miss it; in JSON the first notice */
	if (format == FMT_TEXT && json_is_string(json_object_get(grant, "notice"))) {
		printf("[note: %s]\n", json_string_value(json_object_get(grant, "notice")));
		fflush(stdout);
	}

	/* the kernel, directly */
	if (!(conn = kbox_conn_load(json_string_value(json_object_get(grant, "connection_file")),
	                            &err)) ||
	    !(client = kbox_client_new(conn, &err))) {
		cli_error("exec", "session %s: %s", name, err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	{
		kbox_client_hooks_t hooks = {hook_interrupt, hook_alive, &ctl};
		kbox_client_set_hooks(client, &hooks);
	}
	if (kbox_client_wait_ready(client, READY_WAIT_MS, &err) < 0) {
		cli_error("exec", "session %s: %s%s%s", name, err.msg, ctl.cause[0] ? ": " : "",
		          ctl.cause);
		status = ctl.died ? EXIT_DIED : EXIT_UNAVAILABLE;
		goto out;
	}

	{
		kbox_capture_opts_t co = {0};
		kbox_exec_opts_t eo = {0};
		long long gen = json_integer_value(json_object_get(grant, "generation"));
		snprintf(outbuf, sizeof outbuf, "%s/outputs", dir);
		snprintf(prefix, sizeof prefix, "%lld-", gen);
		co.outputs_dir = outputs ? outputs : outbuf;
		co.prefix = prefix;
		co.max_bytes = (size_t)max_bytes;
		co.max_lines = (size_t)max_lines;
		if (!(cap = kbox_capture_new(&co, &err))) {
			cli_error("exec", "%s", err.msg);
			status = EXIT_USAGE;
			goto out;
		}
		if (format == FMT_NDJSON)
			kbox_capture_set_event_cb(cap, cli_on_event_ndjson, NULL);
		else if (format == FMT_TEXT && isatty(STDOUT_FILENO))
			kbox_capture_set_event_cb(cap, on_event_tty, NULL);
		kbox_session_log(dir, "exec-begin",
		                 json_pack("{s:s, s:I, s:I, s:I}", "id", kbox_client_session(client),
		                           "pid", (json_int_t)getpid(), "generation", (json_int_t)gen,
		                           "code_bytes", (json_int_t)strlen(code)),
		                 NULL);
		eo.code = code;
		eo.timeout_ms = (int)timeout_ms;
		eo.interrupt_on_timeout = true;
		eo.grace_ms = grace_ms > 0 ? (int)grace_ms : 1;
		eo.on_msg = kbox_capture_on_msg;
		eo.cb_arg = cap;
		if (n_inputs) {
			eo.input_lines = inputs;
			eo.n_input = n_inputs;
		}
		x = kbox_client_execute(client, &eo, &err);
		if (!x) {
			cli_error("exec", "session %s: %s", name, err.msg);
			status = EXIT_DIED;
			goto out;
		}
		/* a death: the supervisor says why (its notice may trail the client's
		 * own detection by a moment) */
		if (kbox_exec_status(x) == KBOX_EXEC_DIED && !ctl.died && !ctl.gone)
			ctl_poll(&ctl, 2000);
		/* the kernel ignored the interrupt: kill it; the supervisor restarts it */
		if (kbox_exec_status(x) == KBOX_EXEC_TIMEOUT && !kbox_exec_reply(x) && !ctl.died &&
		    !ctl.gone) {
			char t[32], g[32], cause[400];
			json_t *req, *m;
			snprintf(cause, sizeof cause,
			         "the execution timed out after %s and did not stop within %s of an "
			         "interrupt, so the kernel was killed",
			         fmt_ms(timeout_ms, t, sizeof t), fmt_ms(grace_ms, g, sizeof g));
			req = json_pack("{s:s, s:s}", "op", "kill", "cause", cause);
			kbox_ctl_send(ctl.fd, req, NULL);
			json_decref(req);
			while ((m = kbox_ctl_recv(ctl.fd, EXEC_GRANT_WAIT_MS, NULL))) {
				bool done = json_object_get(m, "re") || json_object_get(m, "error");
				json_decref(m);
				if (done)
					break;
			}
			ctl.died = true;
			ctl.restarting = true;
			killed = true;
			snprintf(ctl.cause, sizeof ctl.cause, "%s", cause);
		}
		res = kbox_capture_finish(&cap, x);
		if (!res) {
			cli_error("exec", "out of memory");
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		if ((ctl.died || ctl.gone) && (kbox_exec_status(x) == KBOX_EXEC_DIED || killed)) {
			char reason[700];
			snprintf(reason, sizeof reason, "%s%s", ctl.cause,
			         ctl.died && ctl.restarting ? "; a new kernel was started" : "");
			kbox_result_set_status(res, KBOX_EXEC_DIED, reason);
		}
		if (format != FMT_TEXT && json_is_string(json_object_get(grant, "notice")))
			kbox_result_add_notice(res, json_string_value(json_object_get(grant, "notice")),
			                       true);
		if (format == FMT_TEXT) {
			bool tty = isatty(STDOUT_FILENO);
			char *text = kbox_render_text_ex(res, tty ? KBOX_RENDER_NO_STREAMS : 0);
			if (text && tty) /* what the code printed must not drive the terminal */
				cli_write_safe(stdout, text, strlen(text));
			else if (text)
				fputs(text, stdout);
			free(text);
		} else
			cli_print_json_line(format == FMT_JSON ? kbox_render_json(res)
			                                   : kbox_render_end_event(res));
		fflush(stdout);
		switch (kbox_result_status(res)) {
		case KBOX_EXEC_OK: status = EXIT_OK; break;
		case KBOX_EXEC_ERROR:
		case KBOX_EXEC_ABORTED: status = EXIT_CODE_ERROR; break;
		case KBOX_EXEC_TIMEOUT: status = EXIT_TIMEOUT; break;
		case KBOX_EXEC_DIED: status = EXIT_DIED; break;
		}
		kbox_session_log(dir, "exec-end",
		                 json_pack("{s:s, s:s, s:f, s:i, s:I}", "id", kbox_client_session(client),
		                           "status", kbox_exec_status_name(kbox_result_status(res)),
		                           "seconds", kbox_result_seconds(res), "count",
		                           kbox_result_count(res), "generation", (json_int_t)gen),
		                 NULL);
#ifndef KBOX_SANITIZED
		/* Over, with its reply: nothing of ours is queued, the result is
		 * written.  Exit without taking the ZeroMQ context, its threads and
		 * the guarded key pages down one by one (~1 ms of each call); the
		 * kernel reclaims them.  (Sanitizer builds tear down, for the leak
		 * check.) */
		quick = kbox_exec_reply(x) && ctl.fd >= 0 && !ctl.died && !ctl.gone && !killed;
#endif
	}
out:
	if (quick) {
		/* our execution is over: without this the supervisor interrupts */
		json_t *done = json_pack("{s:s}", "op", "done");
		kbox_ctl_send(ctl.fd, done, NULL);
		fflush(NULL);
		_exit(status);
	}
	kbox_result_destroy(&res);
	kbox_capture_destroy(&cap);
	kbox_exec_destroy(&x);
	kbox_client_destroy(&client);
	kbox_conn_destroy(&conn);
	if (ctl.fd >= 0) {
		/* our execution is over: without this the supervisor interrupts */
		json_t *done = json_pack("{s:s}", "op", "done");
		kbox_ctl_send(ctl.fd, done, NULL);
		json_decref(done);
		close(ctl.fd);
	}
	json_decref(grant);
	free(dir);
	free(code);
	free(inputs);
	return status;
}
