/* src/cli/cmd_exec.c — kbox exec: run code in a session's kernel.
 *
 * A thin client: one "execute" request on the session's control socket
 * (kbox-protocol(7), through kr_ctl_execute), the result (and, on a
 * terminal or with ndjson, the events as they come) back; what is here is
 * the printer.  The supervisor runs it: one at a time, with
 * the timeout, the interrupt, the kill and the new kernel when it comes to
 * that.  Leaving early (Ctrl-C, killed) closes the connection, and the
 * supervisor interrupts the code. */
#include "config.h"
#include "cli.h"
#include "runtime/ws_live.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

kr_ctl_format_t cli_exec_format(format_t f)
{
	return f == FMT_JSON           ? KR_CTL_FMT_JSON
	       : f == FMT_NDJSON       ? KR_CTL_FMT_NDJSON
	       : isatty(STDOUT_FILENO) ? KR_CTL_FMT_TEXT_LIVE
	                               : KR_CTL_FMT_TEXT;
}

/* The exit status of an execution that ended with the status WORD. */
static int exit_of(const char *word)
{
	kbox_exec_status_t st;
	if (!word)
		return EXIT_UNAVAILABLE;
	if (kr_ctl_status_parse(word, &st) < 0)
		return EXIT_DIED;
	switch (st) {
	case KBOX_EXEC_OK:
		return EXIT_OK;
	case KBOX_EXEC_ERROR:
	case KBOX_EXEC_ABORTED:
		return EXIT_CODE_ERROR;
	case KBOX_EXEC_TIMEOUT:
	case KBOX_EXEC_INTERRUPTED:
		return EXIT_TIMEOUT;
	default:
		return EXIT_DIED;
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool is_text(kr_ctl_format_t f)
{
	return f == KR_CTL_FMT_TEXT || f == KR_CTL_FMT_TEXT_LIVE;
}

/* The result of code whose kernel died with no one left to say so (its
 * supervisor went away), in FORMAT: the died line, or a JSON result (the
 * ndjson end event) with status "died", REASON and nothing captured. */
static void died_result(kr_ctl_format_t format, const char *reason, double seconds)
{
	json_t *j;
	if (is_text(format)) {
		printf("[kernel died: %s; earlier state is lost]\n", reason);
		cli_flush_stdout();
		return;
	}
	j = json_pack("{s:s, s:s, s:n, s:f, s:s, s:[], s:{s:s, s:i, s:i, s:b, s:n, s:i, s:i}, "
	              "s:{s:s, s:i, s:i, s:b, s:n, s:i, s:i}, s:n, s:[], s:[], s:n, s:[]}",
	              "schema", CLI_RESULT_SCHEMA, "status", "died", "execution_count", "seconds",
	              seconds < 0 ? 0.0 : seconds, "reason", reason, "outputs", "stdout", "text",
	              "", "total_bytes", 0, "total_lines", 0, "truncated", 0, "spill_path",
	              "dropped_messages", 0, "dropped_bytes", 0, "stderr", "text", "",
	              "total_bytes", 0, "total_lines", 0, "truncated", 0, "spill_path",
	              "dropped_messages", 0, "dropped_bytes", 0, "value", "displays", "images",
	              "error", "notices");
	if (j && format == KR_CTL_FMT_NDJSON)
		json_object_set_new(j, "event", json_string("end"));
	cli_print_json_line(j);
	cli_flush_stdout();
}

/* The printer of an execution's started line and events (ARG is its
 * request): with text-live the notice and the output printed between
 * executions first, then the stream as it comes (what the code printed
 * must not drive the terminal); with ndjson each event on its line. */
/* Whether the execution being waited for has begun (its started line
 * came): until then it waits its turn, and an interrupt would stop
 * another client's code. */
static bool exec_began;

/* The streams' text as it comes, on a terminal: quoted where a line of it
 * reads as kbox's own (kx_live_t).  One quoter when standard error shows
 * on the same terminal (one screen), else one a stream; LIVE_N of them
 * while an execution's is shown, none before. */
typedef struct {
	kx_live_t q;
	FILE *last; /* the stream it wrote last */
} live_t;
static live_t live[2];
static int live_n;

static void live_write(void *arg, int stream, const char *s, size_t len)
{
	live_t *l = arg;
	FILE *f = stream == 2 ? stderr : stdout;
	cli_write_live(f, s, len);
	fflush(f);
	l->last = f;
}

/* Whether standard error may show on standard output's terminal: when
 * it is a terminal at all (/dev/tty is the same screen as /dev/pts/N; one
 * model for both only quotes more). */
static bool one_screen(void)
{
	return isatty(STDERR_FILENO);
}

/* The quoter of STREAM's text (1 or 2), made with the first. */
static kx_live_t *live_of(int stream)
{
	if (!live_n) {
		live_n = one_screen() ? 1 : 2;
		for (int i = 0; i < live_n; i++) {
			kx_live_init(&live[i].q, live_write, &live[i]);
			live[i].last = NULL;
		}
	}
	return &live[live_n == 2 && stream == 2 ? 1 : 0].q;
}

/* The end of the streams' text: what was held is written, and kbox's own
 * lines that follow begin a line of their own. */
static void live_end(void)
{
	for (int i = 0; i < live_n; i++)
		if (kx_live_end(&live[i].q) && live[i].last) { /* (where that line is) */
			fputc('\n', live[i].last);
			fflush(live[i].last);
		}
	live_n = 0;
}

/* Text of the kernel's (LEN bytes at S) within a line of kbox's own:
 * quoted (kx_buf_kernel: a line break in it starts no line of kbox's)
 * and made safe for the terminal. */
static void print_kernel(const char *s, size_t len)
{
	kx_buf_t b = KX_BUF_INIT;
	kx_buf_kernel(&b, s, len);
	if (!b.failed)
		cli_write_safe(stdout, b.data ? b.data : "", b.len);
	kx_buf_reset(&b);
}

static void on_exec_event(void *arg, kr_ctl_msg_kind_t kind, const json_t *m)
{
	const kr_ctl_exec_t *req = arg;
	if (kind == KR_CTL_MSG_STARTED)
		exec_began = true;
	if (kind == KR_CTL_MSG_STARTED && req->format == KR_CTL_FMT_TEXT_LIVE) {
		json_t *notice = json_object_get(m, "notice");
		json_t *earlier = json_object_get(m, "earlier_output");
		/* (a notice may name what the kernel made) */
		if (json_is_string(notice)) {
			fputs("[note: ", stdout);
			print_kernel(json_string_value(notice), json_string_length(notice));
			fputs("]\n", stdout);
		}
		if (json_is_string(earlier)) { /* (a result's text: quoted already) */
			printf("[output printed between executions:]\n");
			cli_write_safe(stdout, json_string_value(earlier),
			               json_string_length(earlier));
			printf("[end of that output]\n");
		}
		cli_flush_stdout();
	} else if (kind == KR_CTL_MSG_EVENT && req->format == KR_CTL_FMT_NDJSON) {
		cli_print_json_line(json_incref(json_object_get(m, "event")));
	} else if (kind == KR_CTL_MSG_EVENT && is_text(req->format)) {
		json_t *ev = json_object_get(m, "event"), *text = json_object_get(ev, "text");
		const char *sname = json_string_value(json_object_get(ev, "name"));
		if (json_is_string(text)) {
			int stream = sname && strcmp(sname, "stderr") == 0 ? 2 : 1;
			kx_live_text(live_of(stream), stream, json_string_value(text),
			             json_string_length(text));
		}
	}
}

/* Where, in the result text T (N bytes), its last line's word on the
 * state begins, when it ends with one (the render's, kbox(1)): N when it
 * does not, or STOPS is NULL. */
static size_t stops_at(const char *t, size_t n, const char *stops)
{
	static const char *const said[] = {
	        "; a new kernel was started; earlier state is lost]\n",
	        "; earlier state is lost]\n",
	        " (state kept)]\n",
	        "; state is kept]\n",
	};
	const char *line;
	if (!stops || !n)
		return n;
	for (line = t + n - 1; line > t && line[-1] != '\n'; line--)
		;
	if (*line != '[')
		return n;
	for (size_t i = 0; i < sizeof said / sizeof *said; i++) {
		size_t k = strlen(said[i]);
		if ((size_t)(t + n - line) > k && memcmp(t + n - k, said[i], k) == 0)
			return n - k;
	}
	return n;
}

/* Print the reply M of REQ (ok or not) and fill R from it. */
static void exec_print_reply(const char *cmd, const char *name, const kr_ctl_exec_t *req,
                             const json_t *m, cli_exec_result_t *r)
{
	json_t *text = json_object_get(m, "text");
	if (kr_ctl_msg_kind(m, NULL) != KR_CTL_MSG_REPLY) {
		const char *msg = json_string_value(json_object_get(m, "error"));
		kr_ctl_err_t kind = kr_ctl_err_kind(m);
		cli_error(cmd, "session %s: %s", name, msg ? msg : "the supervisor refused");
		/* waiting for another execution ran out of time */
		r->status = kind == KR_CTL_ERR_BUSY    ? EXIT_BUSY
		            : kind == KR_CTL_ERR_USAGE ? EXIT_USAGE
		                                       : EXIT_UNAVAILABLE;
		return;
	}
	if (is_text(req->format) && json_is_string(text)) {
		const char *t = json_string_value(text);
		const char *st = json_string_value(json_object_get(m, "status"));
		bool stopped = st && (strcmp(st, "interrupted") == 0 ||
		                      strcmp(st, "timeout") == 0 || strcmp(st, "died") == 0);
		size_t n = json_string_length(text),
		       cut = stops_at(t, n, stopped ? r->stops : NULL);
		if (isatty(STDOUT_FILENO)) /* what the code printed must not drive the terminal */
			cli_write_safe(stdout, t, cut);
		else
			fwrite(t, 1, cut, stdout);
		if (cut < n)
			printf("; %s]\n", r->stops);
	} else if (!is_text(req->format))
		cli_print_json_line(json_incref(json_object_get(m, "result")));
	cli_flush_stdout();
	/* the result says to put the values in the code, for a model; a
	 * person may rather give the lines */
	if (is_text(req->format) && json_is_true(json_object_get(m, "input_refused")))
		fprintf(stderr,
		        "kbox %s: the code asked for input: besides putting the values in the "
		        "code, you may give it lines with -i LINE or --input-file FILE\n",
		        cmd);
	r->status = exit_of(json_string_value(json_object_get(m, "status")));
	r->inputs_used = (size_t)json_integer_value(json_object_get(m, "inputs_used"));
	snprintf(r->reason, sizeof r->reason, "%s",
	         json_string_value(json_object_get(m, "reason")) ?: "");
}

/* The first SIGINT or SIGTERM that came while the code ran; the actions
 * they had before. */
static volatile sig_atomic_t stop_signal;
static struct sigaction stop_old[2];
static const int stop_sigs[2] = {SIGINT, SIGTERM};

/* The first: noted, for stop_hook.  A second: what it would have done
 * (the action before, by default the end of the process). */
static void on_stop_signal(int sig)
{
	if (!stop_signal) {
		stop_signal = sig;
		return;
	}
	sigaction(sig, &stop_old[sig == SIGINT ? 0 : 1], NULL);
	raise(sig); /* delivered as this handler returns */
}

/* What stop_hook needs: the session's directory and the command. */
typedef struct {
	const char *cmd, *dir;
	bool sent;
} stop_ctx_t;

/* Take SIG as it was taken before stop_signals_on: by default, the end
 * of the process.  (An action that returns: go on.) */
static void act_as_before(int sig)
{
	sigset_t s;
	sigaction(sig, &stop_old[sig == SIGINT ? 0 : 1], NULL);
	sigemptyset(&s);
	sigaddset(&s, sig);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	raise(sig);
}

/* Before each wait for the supervisor: after a SIGINT or SIGTERM, the
 * interrupt, once (kbox interrupt's op, on a connection of its own).
 * Never ends the wait (false). */
static bool stop_hook(void *arg)
{
	stop_ctx_t *c = arg;
	kbox_error_t err = {0};
	char cause[64];
	json_t *r;
	if (!stop_signal || c->sent)
		return false;
	if (!exec_began) {
		/* still waiting its turn: the code that runs is another
		 * client's.  The process ends as the signal would have it, and
		 * the supervisor drops the request of a client gone (it never
		 * runs) */
		c->sent = true;
		act_as_before(stop_signal);
		return false;
	}
	c->sent = true;
	snprintf(cause, sizeof cause, "%s to kbox %s", stop_signal == SIGINT ? "SIGINT" : "SIGTERM",
	         c->cmd);
	if (!(r = kr_ctl_call(c->dir, KR_CTL_OP_INTERRUPT, json_pack("{s:s}", "cause", cause),
	                      10000, &err)))
		cli_error(c->cmd, "%s: cannot interrupt the code: %s",
		          stop_signal == SIGINT ? "SIGINT" : "SIGTERM", err.msg);
	json_decref(r);
	/* a supervisor that does not answer will not send the result either:
	 * the signal ends the process, as it would have */
	if (!r && err.code == KBOX_E_TIMEOUT)
		act_as_before(stop_signal);
	return false;
}

/* Have SIGINT and SIGTERM (those not ignored) interrupt the code while
 * the supervisor is waited for (stop_hook); *SAVED the mask to restore. */
static void stop_signals_on(stop_ctx_t *c, sigset_t *saved)
{
	sigset_t block, wait;
	sigemptyset(&block);
	stop_signal = 0;
	for (size_t i = 0; i < 2; i++) {
		struct sigaction sa = {0};
		sigaction(stop_sigs[i], NULL, &stop_old[i]);
		if (stop_old[i].sa_handler == SIG_IGN)
			continue;
		sa.sa_handler = on_stop_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(stop_sigs[i], &sa, NULL);
		sigaddset(&block, stop_sigs[i]);
	}
	sigprocmask(SIG_BLOCK, &block, saved);
	wait = *saved;
	for (size_t i = 0; i < 2; i++)
		sigdelset(&wait, stop_sigs[i]);
	kr_ctl_wait_signals(&wait, stop_hook, c);
}

/* The end of stop_signals_on: plain waits, the actions and mask before. */
static void stop_signals_off(const sigset_t *saved)
{
	kr_ctl_wait_signals(NULL, NULL, NULL);
	for (size_t i = 0; i < 2; i++)
		if (stop_old[i].sa_handler != SIG_IGN)
			sigaction(stop_sigs[i], &stop_old[i], NULL);
	sigprocmask(SIG_SETMASK, saved, NULL);
}

int cli_exec_on(const char *cmd, int fd, const char *dir, const char *name,
                const kr_ctl_exec_t *req, int outputs_fd, cli_exec_result_t *r)
{
	stop_ctx_t stop = {cmd, dir, false};
	sigset_t saved;
	kbox_error_t err = {0};
	json_t *m = NULL;
	double t0 = now_s();
	int dfd = -1;
	kr_ctl_exec_end_t end;

	{
		const char *stops = r->stops;
		bool may_resend = r->may_resend;
		memset(r, 0, sizeof *r);
		r->stops = stops;
		r->may_resend = may_resend;
	}
	r->status = EXIT_UNAVAILABLE;
	/* the supervisor writes into the directory this opened, not into
	 * whatever the path leads to later */
	if (req->outputs && outputs_fd >= 0)
		dfd = fcntl(outputs_fd, F_DUPFD_CLOEXEC, 3);
	else if (req->outputs)
		dfd = kx_open_path(AT_FDCWD, req->outputs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	if (req->outputs && dfd < 0) {
		cli_error(cmd, "--outputs %s: %s", req->outputs,
		          errno == ELOOP ? "it is a symbolic link" : strerror(errno));
		r->status = EXIT_USAGE;
		return r->status;
	}
	exec_began = false;
	stop_signals_on(&stop, &saved);
	end = kr_ctl_execute(fd, dir, req, dfd, on_exec_event, (void *)req, &m, &err);
	stop_signals_off(&saved);
	live_end();
	if (dfd >= 0)
		close(dfd);
	if ((end == KR_CTL_EXEC_NOT_SENT || end == KR_CTL_EXEC_LOST_BEFORE) &&
	    err.code == KBOX_E_DEAD && r->may_resend)
		r->resend = true; /* a supervisor that stopped as it was reached */
	else if (end == KR_CTL_EXEC_REPLY)
		exec_print_reply(cmd, name, req, m, r);
	else if (end == KR_CTL_EXEC_LOST_AFTER && err.code == KBOX_E_DEAD) {
		/* the code began and its kernel went with the supervisor: the
		 * result says so, as for any kernel that died */
		died_result(req->format, "the session's supervisor went away", now_s() - t0);
		r->status = EXIT_DIED;
		snprintf(r->reason, sizeof r->reason, "the session's supervisor went away");
	} else
		cli_error(cmd, "session %s: %s", name,
		          end != KR_CTL_EXEC_NOT_SENT && end != KR_CTL_EXEC_UNANSWERED &&
		                          err.code == KBOX_E_DEAD
		                  ? "the session's supervisor went away"
		                  : err.msg);
	json_decref(m);
	return r->status;
}

int cli_exec_check_size(const char *cmd, const kr_ctl_exec_t *e)
{
	kbox_error_t err = {0};
	if (kr_ctl_exec_fits(e, &err) == 0)
		return EXIT_OK;
	cli_error(cmd, "%s", err.msg);
	return err.code == KBOX_E_NOMEM ? EXIT_UNAVAILABLE : EXIT_USAGE;
}

int cli_session_connect(const char *cmd, const char *dir, const char *name, bool no_start,
                        int *status)
{
	kbox_error_t err = {0};
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd = kr_ctl_connect(dir, &err);
		if (fd >= 0)
			return fd;
		if (err.code != KBOX_E_NOTFOUND) { /* (a socket not to be trusted, say) */
			cli_error(cmd, "session %s: %s", name, err.msg);
			*status = EXIT_UNAVAILABLE;
			return -1;
		}
		if (no_start) {
			cli_error(cmd, "session %s is not running (--no-start given)", name);
			*status = EXIT_UNAVAILABLE;
			return -1;
		}
		if ((*status = cli_session_start(cmd, dir, name, NULL, 0, NULL, NULL)) != EXIT_OK)
			return -1;
	}
	cli_error(cmd, "session %s: the supervisor kept going away", name);
	*status = EXIT_UNAVAILABLE;
	return -1;
}

/* The code to run into *CODE (new): the file SRC when IS_FILE ("-":
 * standard input), else SRC itself ("-": standard input).  EXIT_OK, or
 * another exit status after one line. */
static int read_code(const char *src, bool is_file, char **code)
{
	bool is_stdin = strcmp(src, "-") == 0;
	if (!is_file && !is_stdin) {
		if (!(*code = strdup(src))) {
			cli_error("exec", "out of memory");
			return EXIT_UNAVAILABLE;
		}
	} else {
		if (is_stdin && !cli_take_stdin()) {
			cli_error("exec",
			          "standard input (-) given more than once (for the code and "
			          "--input-file)");
			return EXIT_USAGE;
		}
		if (!(*code = cli_read_code("exec", src)))
			return EXIT_USAGE;
	}
	if (!kx_utf8_valid_str(*code)) {
		char at[64];
		cli_error("exec", "%s%s is not valid UTF-8 (%s): save it as UTF-8",
		          is_stdin  ? "the code on standard input"
		          : is_file ? "the code file "
		                    : "the code",
		          is_file && !is_stdin ? src : "", cli_utf8_where(*code, at, sizeof at));
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* -o OUTPUTS: UTF-8, made absolute into OUTBUF (the supervisor writes
 * there), never in a running sandbox's workspace (its code could read and
 * rewrite what is kept there).  EXIT_OK, or the status (said). */
static int take_outputs(const char *outputs, char outbuf[PATH_MAX])
{
	kbox_error_t lerr = {0};
	int status;
	if (!kx_utf8_valid_str(outputs)) {
		cli_error("exec", "--outputs %s is not valid UTF-8", outputs);
		return EXIT_USAGE;
	}
	if ((status = cli_outputs_dir("exec", outputs, outbuf)) != EXIT_OK)
		return status;
	if (kr_live_ws_check(outbuf, "outputs directory", &lerr) < 0) {
		cli_error("exec", "--outputs %s: %s", outputs, lerr.msg);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* The -e NAME=VALUE of ENV, split in place into *NAMES and *VALUES (new
 * arrays, NULL-terminated, of ENV's own bytes): at most KR_CTL_ENV_MAX,
 * each a name the protocol takes and a UTF-8 value.  EXIT_OK, or the
 * status (said). */
static int take_env(cli_strlist_t *env, const char ***names, const char ***values)
{
	if (env->n > KR_CTL_ENV_MAX) {
		cli_error("exec", "at most %d -e NAME=VALUE", KR_CTL_ENV_MAX);
		return EXIT_USAGE;
	}
	*names = calloc(env->n + 1, sizeof **names);
	*values = calloc(env->n + 1, sizeof **values);
	if (!*names || !*values) {
		cli_error("exec", "out of memory");
		return EXIT_UNAVAILABLE;
	}
	for (size_t i = 0; i < env->n; i++) {
		char *eq = strchr(env->v[i], '=');
		const char *wrong = NULL;
		if (eq) {
			*eq = '\0'; /* the argument's own bytes: NAME, then VALUE */
			wrong = kr_ctl_env_name_wrong(env->v[i]);
		}
		if (!eq || wrong || !kx_utf8_valid_str(eq + 1)) {
			if (eq)
				*eq = '=';
			cli_error("exec", "invalid --env \"%s\": %s", env->v[i],
			          !eq     ? "no '=' (expected NAME=VALUE)"
			          : wrong ? wrong
			                  : "its VALUE is not valid UTF-8");
			return EXIT_USAGE;
		}
		(*names)[i] = env->v[i];
		(*values)[i] = eq + 1;
	}
	return EXIT_OK;
}

int cmd_exec(int argc, char **argv)
{
	const char *name = NULL, *outputs = NULL, *file = NULL;
	cli_strlist_t inputs = {0}, env = {0};
	kr_ctl_exec_t e = KR_CTL_EXEC_INIT;
	format_t format = FMT_TEXT;
	cli_exec_result_t r = {0}; /* (r.stops: NULL, kbox exec replaces nothing) */
	bool no_start = false, type_check = false;
	cli_option_t opts[] = {
	        CLI_OPT_SESSION(&name),
	        CLI_OPT_CALLBACK(
	                't', "timeout", "DURATION", cli_opt_duration, &e.timeout_ms,
	                "interrupt the code after DURATION, e.g. 30 or 2m (default: 0, no limit)"),
	        CLI_OPT_CALLBACK(
	                0, "grace", "DURATION", cli_opt_duration, &e.grace_ms,
	                "after a timeout's interrupt, wait DURATION before the kill (default: 5s)"),
	        CLI_OPT_CALLBACK(0, "format", "FMT", cli_opt_format, &format,
	                         "write the result as text, json or ndjson (default: text)"),
	        CLI_OPT_JSON('j', &format),
	        CLI_OPT_STRING(
	                'o', "outputs", "DIR", &outputs,
	                "write images and long texts into DIR (default: the session's outputs)"),
	        CLI_OPT_CALLBACK(0, "max-output", "BYTES", cli_opt_max_output, &e.max_output,
	                         "keep at most BYTES of each text, 64 to 16M (default: 16K)"),
	        CLI_OPT_CALLBACK(
	                0, "max-lines", "N", cli_opt_max_lines, &e.max_lines,
	                "keep at most about N lines of each text, at least 2 (default: 200)"),
	        CLI_OPT_LIST('i', "input", "LINE", &inputs,
	                     "answer a request for input with LINE; repeatable (default: none)"),
	        CLI_OPT_CALLBACK(0, "input-file", "FILE", cli_opt_input_file, &inputs,
	                         "answer requests for input with the lines of FILE, after any -i "
	                         "given before it (default: none)"),
	        CLI_OPT_LIST('e', "env", "NAME=VALUE", &env,
	                     "set NAME to VALUE for this execution only, restored after it; "
	                     "repeatable; a Python kernel (default: none)"),
	        CLI_OPT_FLAG(0, "type-check", &type_check,
	                     "check the code's calls of the session's host functions with mypy "
	                     "first, and run it only when it finds nothing (see "
	                     "kbox-functions(5))"),
	        CLI_OPT_FLAG(0, "no-start", &no_start,
	                     "fail when the session is not running (default: start it)"),
	        CLI_OPT_STRING('f', "file", "FILE", &file,
	                       "run the contents of FILE, - for standard input (default: CODE)"),
	        CLI_OPT_END};
	char *code = NULL, *dir = NULL, outbuf[PATH_MAX];
	json_t *functions = NULL;
	const char **env_names = NULL, **env_values = NULL;
	int fd = -1, status, n;

	e.grace_ms = KR_CTL_GRACE_DEFAULT_MS; /* always sent (kbox-protocol(7)) */
	n = cli_parse_options("exec", opts, argc, argv, &status);

	if (n < 0)
		goto out;
	/* the code: one of CODE, -f FILE, - */
	if ((file ? 1 : 0) + n != 1) {
		kbox_error_t ignored = {0};
		/* docker's and jupyter's way: the session as the first operand */
		if (!file && !name && n == 2 && kr_session_check_name(argv[0], &ignored) == 0)
			cli_error(
			        "exec",
			        "give the code once: CODE, -f FILE or -; did you mean -s %s? (kbox "
			        "exec -s %s CODE)",
			        argv[0], argv[0]);
		else
			cli_error("exec", (file || n > 0)
			                          ? "give the code once: CODE, -f FILE or -"
			                          : "no code to run: give CODE, -f FILE or - "
			                            "(see kbox exec --help)");
		status = EXIT_USAGE;
		goto out;
	}
	/* kbox exec sales, with a session "sales" and no -s: the session, not
	 * code (-s default sales evaluates the name there) */
	if (!file && !name && !getenv("KBOX_SESSION") && cli_operand_is_session(argv[0])) {
		status = cli_session_operand_hint("exec", argv[0], "CODE");
		goto out;
	}
	if ((status = read_code(file ? file : argv[0], file != NULL, &code)) != EXIT_OK)
		goto out;
	for (size_t i = 0; i < inputs.n; i++)
		if (!kx_utf8_valid_str(inputs.v[i])) {
			cli_error("exec", "--input line %zu is not valid UTF-8", i + 1);
			status = EXIT_USAGE;
			goto out;
		}
	if (outputs && (status = take_outputs(outputs, outbuf)) != EXIT_OK)
		goto out;
	e.outputs = outputs ? outbuf : NULL;
	if ((status = take_env(&env, &env_names, &env_values)) != EXIT_OK)
		goto out;
	e.env_names = env_names;
	e.env_values = env_values;
	e.n_env = env.n;
	e.code = code;
	e.format = cli_exec_format(format);
	e.inputs = inputs.v;
	e.n_inputs = inputs.n;
	e.has_inputs = inputs.n > 0;
	/* too long a request is refused here, before a session starts */
	if ((status = cli_exec_check_size("exec", &e)) != EXIT_OK)
		goto out;
	name = cli_session_name(name);
	if ((status = cli_check_session("exec", name)) != EXIT_OK)
		goto out;
	if (type_check) {
		/* the session's functions, before anything of it is made */
		if ((status = cli_functions_for("exec", NULL, name, &functions)) != EXIT_OK)
			goto out;
		if (!functions) {
			cli_error("exec",
			          "--type-check checks the calls of host functions, and the "
			          "session %s has none (see kbox-functions(5))",
			          name);
			status = EXIT_USAGE;
			goto out;
		}
	}
	if (!(dir = cli_session_dir("exec", name, !no_start, &status)))
		goto out;
	if (type_check) {
		char *report = NULL, cache[PATH_MAX + 16];
		snprintf(cache, sizeof cache, "%s/mypy-cache", dir);
		status = cli_type_check("exec", functions, code, cache, &report);
		if (status != EXIT_OK)
			goto out;
		if (report) {
			/* what mypy found, instead of a result: the code did not run */
			if (format == FMT_TEXT)
				fputs(report, stdout);
			else
				cli_error("exec", "%s", report);
			free(report);
			status = EXIT_CODE_ERROR;
			goto out;
		}
	}
	/* (a SIGINT or SIGTERM while the session starts gives the start up:
	 * cli_session_start says so, and the code is not sent) */
	/* a supervisor that stopped as the request reached it (its kernel
	 * could not be restarted, say) never began the code: it goes once
	 * more, to the next supervisor, which may start, or say why not */
	for (int tries = 0; tries < 2; tries++) {
		fd = cli_session_connect("exec", dir, name, no_start, &status);
		if (fd < 0)
			goto out;
		r.may_resend = tries == 0;
		status = cli_exec_on("exec", fd, dir, name, &e, -1, &r);
		if (!r.resend)
			break;
		close(fd);
		fd = -1;
	}
out:
	if (fd >= 0)
		close(fd);
	json_decref(functions);
	free(dir);
	free(code);
	free(env_names);
	free(env_values);
	cli_strlist_clear(&inputs);
	cli_strlist_clear(&env);
	return status;
}
