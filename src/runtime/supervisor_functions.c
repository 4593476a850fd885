/* src/runtime/supervisor_functions.c — the session's host functions
 * (kbox-functions(5)), run by the supervisor: each call of the kernel's
 * code, its arguments checked by libkbox (src/calls.c), runs here as a
 * process of its own, on the supervisor's loop.
 *
 * A command gets the arguments as JSON on its standard input (a memfd,
 * so that nothing here waits on a pipe), a clean environment (PATH,
 * LANG and its entry's "env"), the functions file's directory as its
 * working directory, a session and process group of its own; its
 * standard output (at most KBOX_CALL_RESULT_MAX bytes) is the result as
 * JSON; an exit status not 0 is an error whose text is its standard
 * error (the first KR_FUNCTION_STDERR_MAX bytes).  A URL is POSTed the
 * arguments by kbox-http (one per call, one attempt), and the response
 * body is the result.  A call that outlives its timeout, or is cancelled,
 * has its process group killed. */
#include "runtime/runtime.h"
#include "runtime/supervisor_int.h"
#include "http/http_proto.h"
#include "runtime/mcp_client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* One call running on the host. */
struct fn_job {
	sup_t *s;
	kr_function_t *fn;
	kbox_call_t *call;
	pid_t pid;
	int pidfd, out_fd, err_fd;
	kx_buf_t out;
	char err[KR_FUNCTION_STDERR_MAX];
	size_t err_len;
	bool over;      /* its output passed the limit: killed */
	bool timed_out; /* its time ran out: killed */
	int timer;
	fn_job_t *next;
};

static void job_close_fds(fn_job_t *fj)
{
	int *fds[] = {&fj->pidfd, &fj->out_fd, &fj->err_fd};
	for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
		if (*fds[i] >= 0) {
			kbox_loop_remove_fd(fj->s->loop, *fds[i]);
			close(*fds[i]);
			*fds[i] = -1;
		}
}

/* Take FJ off its supervisor's list and free it (its process reaped). */
static void job_free(fn_job_t *fj)
{
	sup_t *s = fj->s;
	for (fn_job_t **p = &s->fn_jobs; *p; p = &(*p)->next)
		if (*p == fj) {
			*p = fj->next;
			break;
		}
	job_close_fds(fj);
	if (fj->timer)
		kbox_loop_cancel_timer(s->loop, fj->timer);
	kx_buf_reset(&fj->out);
	free(fj);
}

/* Kill FJ's process group and reap it. */
static int job_kill(fn_job_t *fj)
{
	int st = 0;
	if (fj->pid > 0) {
		kill(-fj->pid, SIGKILL);
		kill(fj->pid, SIGKILL);
		while (waitpid(fj->pid, &st, 0) < 0 && errno == EINTR)
			;
		fj->pid = 0;
	}
	return st;
}

/* Read what FD has now into FJ (stdout when OUT, else stderr).  False
 * when it is at its end (or failed). */
static bool job_read(fn_job_t *fj, bool out)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(out ? fj->out_fd : fj->err_fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0)
			return false;
		if (out) {
			if (fj->out.len + (size_t)n >
			    KBOX_CALL_RESULT_MAX + KBOX_HTTP_REPLY_LINE_MAX) {
				fj->over = true;
				return false;
			}
			kx_buf_append(&fj->out, buf, (size_t)n);
		} else if (fj->err_len < sizeof fj->err - 1) {
			size_t k = (size_t)n < sizeof fj->err - 1 - fj->err_len
			                   ? (size_t)n
			                   : sizeof fj->err - 1 - fj->err_len;
			memcpy(fj->err + fj->err_len, buf, k);
			fj->err_len += k;
		}
	}
}

/* The text of FJ's standard error, trimmed (in its buffer), cut where a
 * character ends. */
static const char *job_stderr(fn_job_t *fj)
{
	fj->err_len = kx_utf8_floor(fj->err, fj->err_len, fj->err_len);
	while (fj->err_len && strchr(" \t\r\n", fj->err[fj->err_len - 1]))
		fj->err_len--;
	fj->err[fj->err_len] = '\0';
	return fj->err;
}

/* Answer FJ's call from BODY (LEN bytes), the result as JSON text. */
static void answer_json(fn_job_t *fj, const char *body, size_t len, const char *what)
{
	json_error_t je;
	json_t *v;
	while (len && strchr(" \t\r\n", body[len - 1]))
		len--;
	if (len == 0) {
		kbox_call_fail(fj->call, false,
		               "%s gave no result: it must give its result as JSON (null for none)",
		               what);
		return;
	}
	if (kx_json_cost(body, len) > KBOX_CALL_DECODE_MAX) {
		kbox_call_fail(fj->call, false,
		               "%s gave a result that would take more than %u MiB to read", what,
		               KBOX_CALL_DECODE_MAX >> 20);
		return;
	}
	if (!(v = json_loadb(body, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je))) {
		kbox_call_fail(fj->call, false, "%s gave a result that is not JSON: %s", what,
		               je.text);
		return;
	}
	kbox_call_return(fj->call, v);
}

/* A kbox-http reply in FJ's output: its result, or its error. */
static void answer_http(fn_job_t *fj)
{
	const char *text = fj->out.data ? fj->out.data : "";
	const char *nl = memchr(text, '\n', fj->out.len);
	json_t *line = nl ? json_loadb(text, (size_t)(nl - text), 0, NULL) : NULL;
	json_t *status = json_object_get(line, "status");
	const char *error = json_string_value(json_object_get(line, "error"));
	size_t body_len = nl ? fj->out.len - (size_t)(nl + 1 - text) : 0;

	if (error)
		kbox_call_fail(fj->call, false, "the request to its URL failed: %s", error);
	else if (!json_is_integer(status))
		kbox_call_fail(fj->call, false, "the request to its URL failed: %s gave no reply",
		               KBOX_HTTP_PROGRAM);
	else if (json_integer_value(status) < 200 || json_integer_value(status) > 299)
		kbox_call_fail(fj->call, false, "its URL answered HTTP %d: %.*s",
		               (int)json_integer_value(status),
		               (int)(body_len < 1024 ? body_len : 1024), nl + 1);
	else
		answer_json(fj, nl + 1, body_len, "its URL");
	json_decref(line);
}

/* FJ's process ended with wait status ST: answer its call. */
static void job_finish(fn_job_t *fj, int st)
{
	char t[32];
	if (fj->timed_out)
		kbox_call_fail(fj->call, true, "no answer within %s (its timeout): it was stopped",
		               kx_fmt_ms(t, sizeof t, fj->fn->timeout_ms));
	else if (fj->over)
		kbox_call_fail(
		        fj->call, false,
		        "its output passed %u bytes, the most a result may be: it was stopped",
		        KBOX_CALL_RESULT_MAX);
	else if (WIFSIGNALED(st))
		kbox_call_fail(fj->call, false, "%s%sit was killed by signal %d (%s)",
		               job_stderr(fj), fj->err_len ? "; " : "", WTERMSIG(st),
		               sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
	else if (fj->fn->url && WEXITSTATUS(st) == 0)
		answer_http(fj);
	else if (WEXITSTATUS(st) != 0)
		kbox_call_fail(fj->call, false, "%s", *job_stderr(fj) ? job_stderr(fj) : "");
	else
		answer_json(fj, fj->out.data ? fj->out.data : "", fj->out.len, "it");
	job_free(fj);
}

/* An exit status without stderr says so (kbox_call_fail's text is
 * otherwise the function's own). */
static void job_finish_status(fn_job_t *fj, int st)
{
	if (!fj->timed_out && !fj->over && WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
	    !*job_stderr(fj)) {
		kbox_call_fail(fj->call, false,
		               WEXITSTATUS(st) == 127
		                       ? "its program could not be run (exit status 127)"
		                       : "it failed with exit status %d, saying nothing",
		               WEXITSTATUS(st));
		job_free(fj);
		return;
	}
	job_finish(fj, st);
}

static int on_exit_fd(kbox_loop_t *loop, void *arg)
{
	fn_job_t *fj = arg;
	int st = 0;
	(void)loop;
	if (waitpid(fj->pid, &st, WNOHANG) <= 0)
		return 0;
	fj->pid = 0;
	/* what it wrote before it ended */
	if (fj->out_fd >= 0)
		job_read(fj, true);
	if (fj->err_fd >= 0)
		job_read(fj, false);
	job_finish_status(fj, st);
	return 0;
}

static int on_out(kbox_loop_t *loop, void *arg)
{
	fn_job_t *fj = arg;
	(void)loop;
	if (!job_read(fj, true)) {
		kbox_loop_remove_fd(fj->s->loop, fj->out_fd);
		close(fj->out_fd);
		fj->out_fd = -1;
		if (fj->over)
			job_finish(fj, job_kill(fj));
	}
	return 0;
}

static int on_err(kbox_loop_t *loop, void *arg)
{
	fn_job_t *fj = arg;
	(void)loop;
	if (!job_read(fj, false)) {
		kbox_loop_remove_fd(fj->s->loop, fj->err_fd);
		close(fj->err_fd);
		fj->err_fd = -1;
	}
	return 0;
}

static int on_timeout(kbox_loop_t *loop, void *arg)
{
	fn_job_t *fj = arg;
	(void)loop;
	fj->timer = 0;
	fj->timed_out = true;
	job_finish(fj, job_kill(fj));
	return 0;
}

/* A memfd holding TEXT, at its start: the child's stdin.  -1 on failure. */
static int stdin_fd(const char *text, size_t len)
{
	int fd = memfd_create("kbox-call", MFD_CLOEXEC);
	size_t off = 0;
	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Start FN's process for CALL: 0, or -1 with WHY. */
static int job_start(sup_t *s, kr_function_t *fn, kbox_call_t *call, char *why, size_t size)
{
	fn_job_t *fj = calloc(1, sizeof *fj);
	char *args = json_dumps(kbox_call_args(call), JSON_COMPACT);
	char *input = NULL, helper[PATH_MAX];
	static char hname[] = KBOX_HTTP_PROGRAM, hpath[] = "PATH=" KR_FUNCTION_PATH,
	            hlang[] = "LANG=C.UTF-8";
	char *hargv[] = {hname, NULL}, *henv[] = {hpath, hlang, NULL};
	int out[2] = {-1, -1}, err[2] = {-1, -1}, in = -1;
	pid_t parent = getpid();
	int rc = -1;

	if (!fj || !args) {
		snprintf(why, size, "out of memory");
		goto out;
	}
	fj->s = s;
	fj->fn = fn;
	fj->call = call;
	fj->pidfd = fj->out_fd = fj->err_fd = -1;
	if (fn->url) {
		json_t *req = json_pack("{s:s, s:s, s:f, s:i}", "url", fn->url, "body", args,
		                        "timeout", (double)fn->timeout_ms / 1000.0, "attempts", 1);
		char *line = req ? json_dumps(req, JSON_COMPACT) : NULL;
		json_decref(req);
		if (!line || asprintf(&input, "%s\n", line) < 0)
			input = NULL;
		free(line);
		if (kx_helper_path(KBOX_HTTP_PROGRAM, helper, sizeof helper) < 0) {
			snprintf(why, size,
			         "the HTTP helper %s is not installed beside kbox-supervisor",
			         KBOX_HTTP_PROGRAM);
			goto out;
		}
	} else {
		input = strdup(args);
	}
	if (!input) {
		snprintf(why, size, "out of memory");
		goto out;
	}
	if ((in = stdin_fd(input, strlen(input))) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
	    pipe2(err, O_CLOEXEC) < 0) {
		snprintf(why, size, "the host could not run it: %s", strerror(errno));
		goto out;
	}
	fj->pid = fork();
	if (fj->pid < 0) {
		snprintf(why, size, "the host could not run it: fork: %s", strerror(errno));
		goto out;
	}
	if (fj->pid == 0) {
		kx_child_t c = {.cwd = fn->url ? "/" : s->fn_file.dir,
		                .errfd = -1,
		                .out_fd = out[1],
		                .err_fd = err[1],
		                .in_fd = in,
		                .parent = parent};
		if (fn->url)
			kx_child_exec(helper, hargv, henv, &c);
		kx_child_exec(fn->argv[0], fn->argv, fn->env, &c);
	}
	close(out[1]);
	close(err[1]);
	out[1] = err[1] = -1;
	fj->out_fd = out[0];
	fj->err_fd = err[0];
	out[0] = err[0] = -1;
	fcntl(fj->out_fd, F_SETFL, O_NONBLOCK);
	fcntl(fj->err_fd, F_SETFL, O_NONBLOCK);
	fj->pidfd = (int)syscall(SYS_pidfd_open, fj->pid, 0);
	fj->next = s->fn_jobs;
	s->fn_jobs = fj;
	if (fj->pidfd < 0 || kbox_loop_add_fd(s->loop, fj->pidfd, on_exit_fd, fj, NULL) < 0 ||
	    kbox_loop_add_fd(s->loop, fj->out_fd, on_out, fj, NULL) < 0 ||
	    kbox_loop_add_fd(s->loop, fj->err_fd, on_err, fj, NULL) < 0 ||
	    (fj->timer = kbox_loop_add_timer(s->loop, (int)fn->timeout_ms, false, on_timeout, fj,
	                                     NULL)) < 0) {
		fj->timer = 0;
		snprintf(why, size, "the host could not watch it");
		job_kill(fj);
		job_free(fj);
		fj = NULL;
		goto out;
	}
	fj = NULL;
	rc = 0;
out:
	free(fj);
	free(args);
	free(input);
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	if (in >= 0)
		close(in);
	return rc;
}

/* ---- tools of MCP servers ---- */

/* What may wait to be written to a server that does not read: past it,
 * the server is taken to be stuck, and is stopped. */
#define MCP_OUT_MAX (8u << 20)
/* Messages read from a server in one turn of the loop, at most. */
#define MCP_READ_TURN 64

/* A call of a tool, in flight. */
typedef struct mcp_call {
	sup_mcp_t *srv;
	kbox_call_t *call;
	kr_function_t *fn;
	long long id;
	int timer;
	json_t *args; /* until the server is initialized (then sent), or NULL */
	struct mcp_call *next;
} mcp_call_t;

/* One MCP server, started at its first call. */
struct sup_mcp {
	sup_t *s;
	kr_mcp_server_t *sv;
	kr_mcp_t m; /* m.pid 0: not running */
	bool ready; /* its initialize answered */
	long long init_id;
	kx_buf_t out; /* lines not yet written to it */
	int flush_timer;
	int stop_timer;     /* a stop asked for, done on the next turn */
	char stop_why[160]; /* ...and why */
	mcp_call_t *calls;
};

static void mcp_stop(sup_mcp_t *srv, const char *why);

static int on_mcp_stop(kbox_loop_t *loop, void *arg)
{
	sup_mcp_t *srv = arg;
	(void)loop;
	srv->stop_timer = 0;
	mcp_stop(srv, srv->stop_why);
	return 0;
}

/* Stop SRV for WHY on the next turn of the loop, not from inside what
 * called (its calls are answered then). */
static void mcp_stop_soon(sup_mcp_t *srv, const char *why)
{
	if (srv->stop_timer)
		return;
	snprintf(srv->stop_why, sizeof srv->stop_why, "%s", why);
	if ((srv->stop_timer = kbox_loop_add_timer(srv->s->loop, 0, false, on_mcp_stop, srv,
	                                           NULL)) < 0)
		srv->stop_timer = 0;
}

/* Write what SRV's output holds, as far as its pipe takes it now. */
static void mcp_flush(sup_mcp_t *srv)
{
	size_t done = 0;
	while (done < srv->out.len && srv->m.to >= 0) {
		ssize_t n = write(srv->m.to, srv->out.data + done, srv->out.len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			mcp_stop_soon(srv, "it closed its input");
			break;
		}
		done += (size_t)n;
	}
	memmove(srv->out.data, srv->out.data + done, srv->out.len - done);
	srv->out.len -= done;
}

static int on_mcp_flush(kbox_loop_t *loop, void *arg)
{
	sup_mcp_t *srv = arg;
	(void)loop;
	mcp_flush(srv);
	if (!srv->out.len && srv->flush_timer) {
		kbox_loop_cancel_timer(srv->s->loop, srv->flush_timer);
		srv->flush_timer = 0;
	}
	return 0;
}

/* Send MSG (taken) to SRV: written now, or as soon as its pipe takes it.
 * -1 when it is not taken: the server reads nothing, and is being
 * stopped. */
static int mcp_send(sup_mcp_t *srv, json_t *msg)
{
	char *line = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	if (!line)
		return -1;
	if (srv->m.pid <= 0 || srv->out.len + strlen(line) + 1 > MCP_OUT_MAX) {
		free(line);
		mcp_stop_soon(srv, "it stopped reading what kbox sends it");
		return -1;
	}
	kx_buf_appends(&srv->out, line);
	kx_buf_appends(&srv->out, "\n");
	free(line);
	mcp_flush(srv);
	if (srv->out.len && !srv->flush_timer &&
	    (srv->flush_timer = kbox_loop_add_timer(srv->s->loop, 10, true, on_mcp_flush, srv,
	                                            NULL)) < 0)
		srv->flush_timer = 0;
	return 0;
}

/* Take C off SRV's list (when it is on it) and free it. */
static void mcp_call_free(sup_mcp_t *srv, mcp_call_t *c)
{
	for (mcp_call_t **p = &srv->calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	if (c->timer)
		kbox_loop_cancel_timer(srv->s->loop, c->timer);
	json_decref(c->args);
	free(c);
}

/* Send C's tools/call (it stays on the list, waiting for its answer). */
static void mcp_call_send(sup_mcp_t *srv, mcp_call_t *c)
{
	json_t *args = c->args ? c->args : json_object();
	c->args = NULL;
	mcp_send(srv, json_pack("{s:s, s:I, s:s, s:{s:s, s:o}}", "jsonrpc", "2.0", "id",
	                        (json_int_t)c->id, "method", "tools/call", "params", "name",
	                        c->fn->tool, "arguments", args));
}

/* SRV ended (or is ended): every call in flight fails with WHY (none is
 * answered when WHY is NULL); the next call starts it again. */
static void mcp_stop(sup_mcp_t *srv, const char *why)
{
	mcp_call_t *calls = srv->calls;
	int st = 0;
	pid_t pid = srv->m.pid;

	if (srv->m.from >= 0)
		kbox_loop_remove_fd(srv->s->loop, srv->m.from);
	if (srv->flush_timer) {
		kbox_loop_cancel_timer(srv->s->loop, srv->flush_timer);
		srv->flush_timer = 0;
	}
	if (srv->stop_timer) {
		kbox_loop_cancel_timer(srv->s->loop, srv->stop_timer);
		srv->stop_timer = 0;
	}
	if (pid > 0) {
		/* what it was doing is given up: its group ends now */
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
	}
	kr_mcp_close(&srv->m);
	(void)st;
	kx_buf_reset(&srv->out);
	srv->ready = false;
	/* the list, taken whole first: answering a call may start another,
	 * on a new server, which is not this one's to fail */
	srv->calls = NULL;
	while (calls) {
		mcp_call_t *c = calls;
		kbox_call_t *call = c->call;
		calls = c->next;
		if (c->timer)
			kbox_loop_cancel_timer(srv->s->loop, c->timer);
		json_decref(c->args);
		free(c);
		if (why)
			kbox_call_fail(call, false, "its MCP server %s ended: %s", srv->sv->argv[0],
			               why);
	}
}

/* The response MSG to call C (off the list now): its answer. */
static void mcp_answer(kbox_call_t *call, json_t *msg)
{
	json_t *res = json_object_get(msg, "result"), *e = json_object_get(msg, "error");
	json_t *sc = json_object_get(res, "structuredContent");
	char *text = NULL;

	if (!json_is_object(res)) {
		kbox_call_fail(call, false, "%.2000s",
		               json_is_string(json_object_get(e, "message"))
		                       ? json_string_value(json_object_get(e, "message"))
		                       : "its MCP server answered with no result");
		return;
	}
	if (json_is_true(json_object_get(res, "isError"))) {
		text = kr_mcp_result_text(res);
		kbox_call_fail(call, false, "%s", text && *text ? text : "the tool failed");
	} else if (sc) {
		kbox_call_return(call, json_incref(sc));
	} else {
		text = kr_mcp_result_text(res);
		kbox_call_return(call, text ? json_string(text) : json_null());
	}
	free(text);
}

/* SRV's initialize was answered: its calls go out. */
static void mcp_ready(sup_mcp_t *srv)
{
	srv->ready = true;
	mcp_send(srv,
	         json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "notifications/initialized"));
	for (mcp_call_t *c = srv->calls; c; c = c->next)
		if (c->args)
			mcp_call_send(srv, c);
}

static int on_mcp_readable(kbox_loop_t *loop, void *arg)
{
	sup_mcp_t *srv = arg;
	kbox_error_t err = {0};
	(void)loop;
	/* a few at a time: a server that floods keeps the loop no longer */
	for (int turn = 0; turn < MCP_READ_TURN; turn++) {
		json_t *msg, *id;
		int rc = kr_mcp_read(&srv->m, &msg, &err);
		if (rc == 0)
			return 0;
		if (rc < 0) {
			mcp_stop(srv, err.msg);
			return 0;
		}
		id = json_object_get(msg, "id");
		if (json_is_integer(id) && !json_object_get(msg, "method")) {
			long long v = json_integer_value(id);
			if (!srv->ready && v == srv->init_id) {
				if (!json_is_object(json_object_get(msg, "result"))) {
					json_decref(msg);
					mcp_stop(srv, "its initialize failed");
					return 0;
				}
				mcp_ready(srv);
			} else {
				for (mcp_call_t *c = srv->calls; c; c = c->next)
					if (c->id == v) {
						kbox_call_t *call = c->call;
						mcp_call_free(srv, c);
						mcp_answer(call, msg);
						break;
					}
			}
		}
		/* (its notifications and requests are not ours to serve) */
		json_decref(msg);
	}
	return 0;
}

/* Start SRV: 0, or -1 with WHY. */
static int mcp_start(sup_mcp_t *srv, char *why, size_t size)
{
	kbox_error_t err = {0};
	if (kr_mcp_spawn(&srv->m, srv->sv->argv, srv->sv->env, srv->s->fn_file.dir, &err) < 0) {
		snprintf(why, size, "%s", err.msg);
		return -1;
	}
	fcntl(srv->m.to, F_SETFL, O_NONBLOCK);
	if (kbox_loop_add_fd(srv->s->loop, srv->m.from, on_mcp_readable, srv, &err) < 0) {
		kr_mcp_close(&srv->m);
		snprintf(why, size, "%s", err.msg);
		return -1;
	}
	srv->init_id = srv->m.next_id++;
	mcp_send(srv, json_pack("{s:s, s:I, s:s, s:{s:s, s:{}, s:{s:s, s:s}}}", "jsonrpc", "2.0",
	                        "id", (json_int_t)srv->init_id, "method", "initialize", "params",
	                        "protocolVersion", KR_MCP_PROTOCOL, "capabilities", "clientInfo",
	                        "name", "kbox", "version", kbox_version()));
	return 0;
}

/* A call past its timeout: it fails, and its server, which did not
 * answer it, is stopped (its other calls fail; the next call starts it
 * again), so that a stuck server is never kept. */
static int on_mcp_timeout(kbox_loop_t *loop, void *arg)
{
	mcp_call_t *c = arg;
	sup_mcp_t *srv = c->srv;
	kbox_call_t *call = c->call;
	long long ms = c->fn->timeout_ms;
	char t[32];
	(void)loop;
	c->timer = 0;
	mcp_call_free(srv, c);
	mcp_stop_soon(srv, "another call to it outlived its timeout, and it was restarted");
	kbox_call_fail(call, true, "no answer within %s (its timeout)", kx_fmt_ms(t, sizeof t, ms));
	return 0;
}

/* Call FN, a tool, for CALL: 0, or -1 with WHY. */
static int mcp_call_start(sup_t *s, kr_function_t *fn, kbox_call_t *call, char *why, size_t size)
{
	sup_mcp_t *srv = &s->fn_mcp[fn->mcp];
	mcp_call_t *c;
	if (srv->stop_timer) /* one being stopped: the new one starts fresh */
		mcp_stop(srv, srv->stop_why);
	if (srv->m.pid <= 0 && mcp_start(srv, why, size) < 0)
		return -1;
	if (!(c = calloc(1, sizeof *c))) {
		snprintf(why, size, "out of memory");
		return -1;
	}
	c->srv = srv;
	c->call = call;
	c->fn = fn;
	c->id = srv->m.next_id++;
	c->args = json_deep_copy(kbox_call_args(call));
	c->next = srv->calls;
	srv->calls = c;
	if ((c->timer = kbox_loop_add_timer(s->loop, (int)fn->timeout_ms, false, on_mcp_timeout, c,
	                                    NULL)) < 0)
		c->timer = 0;
	if (srv->ready)
		mcp_call_send(srv, c);
	return 0;
}

/* CALL, if it is one of a tool in flight, is given up: its server hears
 * it.  True when it was one. */
static bool mcp_call_cancel(sup_t *s, kbox_call_t *call)
{
	for (size_t i = 0; i < s->fn_file.n_servers; i++) {
		sup_mcp_t *srv = &s->fn_mcp[i];
		for (mcp_call_t *c = srv->calls; c; c = c->next)
			if (c->call == call) {
				long long id = c->id;
				bool sent = srv->ready && !c->args;
				mcp_call_free(srv, c);
				if (sent)
					mcp_send(srv, json_pack("{s:s, s:s, s:{s:I, s:s}}",
					                        "jsonrpc", "2.0", "method",
					                        "notifications/cancelled", "params",
					                        "requestId", (json_int_t)id,
					                        "reason", "the execution ended"));
				return true;
			}
	}
	return false;
}

/* libkbox's callbacks (kbox/functions.h): ARG is the kr_function_t. */
static void fn_run(void *arg, kbox_call_t *call)
{
	kr_function_t *fn = arg;
	char why[KBOX_ERROR_MSG_MAX + 64];
	if (fn->mcp >= 0 ? mcp_call_start(fn->ctx, fn, call, why, sizeof why) < 0
	                 : job_start(fn->ctx, fn, call, why, sizeof why) < 0)
		kbox_call_fail(call, false, "%s", why);
}

static void fn_cancel(void *arg, kbox_call_t *call)
{
	kr_function_t *fn = arg;
	sup_t *s = fn->ctx;
	if (mcp_call_cancel(s, call))
		return;
	for (fn_job_t *fj = s->fn_jobs; fj; fj = fj->next)
		if (fj->call == call) {
			job_kill(fj);
			job_free(fj);
			return;
		}
}

static void fn_observe(void *arg, const json_t *rec)
{
	sup_log(arg, "call", json_deep_copy(rec));
}

static int functions_load(sup_t *s, json_t *doc, const char *workspace, const char *lang,
                          kbox_error_t *err);

int sup_functions_load(sup_t *s, const char *text, const char *ws, kbox_error_t *err)
{
	const char *lang = s->spec ? kbox_kspec_language(s->spec) : NULL;
	const char *workspace = ws ? ws : s->workspace;
	json_t *doc;
	int rc;

	if (!text)
		return 0;
	if (!(doc = kr_functions_doc(text)))
		return kbox_error_set(err, KBOX_E_INVALID, "session.json's functions: not JSON");
	rc = functions_load(s, doc, workspace, lang, err);
	json_decref(doc);
	return rc;
}

/* sup_functions_load of DOC (a reference is taken by fn_file). */
static int functions_load(sup_t *s, json_t *doc, const char *workspace, const char *lang,
                          kbox_error_t *err)
{
	if (!lang || strcmp(lang, "python") != 0)
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "host functions need a Python kernel (ipykernel): the kernel %s "
		        "is %s",
		        s->kernel, lang ? lang : "of no language it names");
	if (kr_functions_parse(&s->fn_file, doc, err) < 0)
		return -1;
	/* what the kernel can write must not be what the host runs */
	if (kr_functions_check_workspace(doc, workspace, err) < 0)
		return -1;
	for (size_t i = 0; i < s->fn_file.n; i++)
		s->fn_file.fns[i].ctx = s;
	if (s->fn_file.n_servers && !(s->fn_mcp = calloc(s->fn_file.n_servers, sizeof *s->fn_mcp)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	for (size_t i = 0; i < s->fn_file.n_servers; i++) {
		s->fn_mcp[i].s = s;
		s->fn_mcp[i].sv = &s->fn_file.servers[i];
		s->fn_mcp[i].m.to = s->fn_mcp[i].m.from = -1;
	}
	if (!(s->fns = kr_functions_set(&s->fn_file, fn_run, fn_cancel, err)))
		return -1;
	kbox_functions_set_observer(s->fns, fn_observe, s);
	return 0;
}

void sup_functions_free(sup_t *s)
{
	while (s->fn_jobs) {
		job_kill(s->fn_jobs);
		job_free(s->fn_jobs);
	}
	for (size_t i = 0; s->fn_mcp && i < s->fn_file.n_servers; i++)
		mcp_stop(&s->fn_mcp[i], NULL);
	free(s->fn_mcp);
	s->fn_mcp = NULL;
	kbox_functions_destroy(&s->fns);
	kr_functions_free(&s->fn_file);
}
