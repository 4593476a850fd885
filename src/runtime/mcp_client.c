/* src/runtime/mcp_client.c — a client of an MCP server over stdio (see
 * mcp_client.h). */
#include "runtime/runtime.h"
#include "runtime/mcp_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int kr_mcp_spawn(kr_mcp_t *m, char **argv, char **env, const char *cwd, kbox_error_t *err)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, null_fd = -1;
	pid_t parent = getpid();

	memset(m, 0, sizeof *m);
	m->to = m->from = -1;
	m->next_id = 1;
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
	    (null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
		kbox_error_set_sys(err, "MCP server %s: pipe", argv[0]);
		goto fail;
	}
	if ((m->pid = fork()) < 0) {
		kbox_error_set_sys(err, "MCP server %s: fork", argv[0]);
		goto fail;
	}
	if (m->pid == 0) {
		kx_child_t c = {.cwd = cwd,
		                .errfd = -1,
		                .out_fd = out[1],
		                .err_fd = null_fd,
		                .in_fd = in[0],
		                .parent = parent};
		kx_child_exec(argv[0], argv, env, &c);
	}
	close(in[0]);
	close(out[1]);
	close(null_fd);
	m->to = in[1];
	m->from = out[0];
	fcntl(m->from, F_SETFL, O_NONBLOCK);
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	if (null_fd >= 0)
		close(null_fd);
	m->pid = 0;
	return -1;
}

int kr_mcp_send(kr_mcp_t *m, json_t *msg, kbox_error_t *err)
{
	char *line = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	int rc = 0;
	json_decref(msg);
	if (!line)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	/* the line with its newline: written in place of its NUL */
	size_t n = strlen(line);
	line[n] = '\n';
	if (m->to < 0)
		rc = kbox_error_set(err, KBOX_E_DEAD, "the MCP server closed its standard input");
	else if (kx_write_all(m->to, line, n + 1) < 0)
		rc = errno == EPIPE ? kbox_error_set(err, KBOX_E_DEAD,
		                                     "the MCP server closed its standard input")
		                    : kbox_error_set_sys(err, "the MCP server's standard input");
	free(line);
	return rc;
}

int kr_mcp_read(kr_mcp_t *m, json_t **msg, kbox_error_t *err)
{
	*msg = NULL;
	for (;;) {
		char *start = m->in.data ? m->in.data + m->off : NULL;
		size_t from = m->seen > m->off ? m->seen : m->off;
		char *nl = start ? memchr(m->in.data + from, '\n', m->in.len - from) : NULL;
		char buf[65536];
		ssize_t n;
		if (nl) {
			json_error_t je;
			size_t len = (size_t)(nl - start);
			json_t *j = NULL;
			/* (taken by moving the offset: no copy a line) */
			m->off += len + 1;
			m->seen = m->off;
			if (len == 0)
				continue;
			if (kx_json_cost(start, len) > KR_MCP_DECODE_MAX) {
				kbox_error_set(
				        err, KBOX_E_PROTOCOL,
				        "the MCP server sent a message that would take more than "
				        "%u MiB to read",
				        KR_MCP_DECODE_MAX >> 20);
				return -1;
			}
			if (!(j = json_loadb(start, len, 0, &je))) {
				kbox_error_set(err, KBOX_E_PROTOCOL,
				               "the MCP server sent a line that is not JSON: %s",
				               je.text);
				return -1;
			}
			*msg = j;
			return 1;
		}
		m->seen = m->in.len;
		/* what was read is dropped, what is left moved to the start */
		if (m->off) {
			m->seen -= m->off;
			memmove(m->in.data, m->in.data + m->off, m->in.len - m->off);
			m->in.len -= m->off;
			m->in.data[m->in.len] = '\0';
			m->off = 0;
		}
		if (m->in.len > KR_MCP_LINE_MAX) {
			kbox_error_set(err, KBOX_E_PROTOCOL,
			               "the MCP server sent a line of more than %u bytes",
			               KR_MCP_LINE_MAX);
			return -1;
		}
		n = m->from >= 0 ? read(m->from, buf, sizeof buf) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			kbox_error_set(err, KBOX_E_DEAD, "the MCP server closed its output");
			return -1;
		}
		if (kx_buf_append(&m->in, buf, (size_t)n) < 0) {
			kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
			return -1;
		}
	}
}

/* The response to request ID, waiting until DEADLINE (kx_now_ms): its
 * "result" (new), or NULL with ERR (the server's error, its end, the
 * time). */
static json_t *wait_response(kr_mcp_t *m, long long id, long long deadline, const char *what,
                             kbox_error_t *err)
{
	for (;;) {
		json_t *msg;
		int rc = kr_mcp_read(m, &msg, err);
		long long left = deadline - kx_now_ms();
		if (rc < 0)
			return NULL;
		if (rc == 1) {
			json_t *rid = json_object_get(msg, "id");
			json_t *res = json_object_get(msg, "result"),
			       *e = json_object_get(msg, "error");
			if (json_is_integer(rid) && json_integer_value(rid) == id &&
			    !json_object_get(msg, "method")) {
				if (json_is_object(res)) {
					json_incref(res);
					json_decref(msg);
					return res;
				}
				kbox_error_set(
				        err, KBOX_E_PROTOCOL, "the MCP server's %s failed: %.300s",
				        what,
				        json_is_string(json_object_get(e, "message"))
				                ? json_string_value(json_object_get(e, "message"))
				                : "no result");
				json_decref(msg);
				return NULL;
			}
			/* a notification, or a request of the server's (sampling,
			 * roots, ping): left unanswered, it is not ours to serve */
			json_decref(msg);
			continue;
		}
		if (left <= 0) {
			kbox_error_set(err, KBOX_E_TIMEOUT,
			               "the MCP server did not answer %s in time", what);
			return NULL;
		}
		struct pollfd p = {.fd = m->from, .events = POLLIN};
		if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR) {
			kbox_error_set_sys(err, "poll");
			return NULL;
		}
	}
}

/* After a write that found the server's standard input closed (ERR says
 * so): a server that closed it ends, or closes its output, in a moment
 * (until DEADLINE, at most INPUT_CLOSED_WAIT_MS); its output's end is
 * then the error, the same whichever of the two the server closed first
 * (one that exits at once races the first request). */
#define INPUT_CLOSED_WAIT_MS 2000
static void input_closed(kr_mcp_t *m, long long deadline, kbox_error_t *err)
{
	long long end = kx_now_ms() + INPUT_CLOSED_WAIT_MS;
	if (end > deadline)
		end = deadline;
	for (;;) {
		kbox_error_t out = {0};
		json_t *msg;
		long long left;
		int rc = kr_mcp_read(m, &msg, &out);
		if (rc < 0) {
			if (out.code == KBOX_E_DEAD)
				*err = out;
			return;
		}
		if (rc == 1) { /* (what it said before: no answer to us now) */
			json_decref(msg);
			continue;
		}
		if ((left = end - kx_now_ms()) <= 0)
			return;
		struct pollfd p = {.fd = m->from, .events = POLLIN};
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return;
	}
}

/* Send request METHOD with PARAMS (taken) and wait for its result. */
static json_t *request(kr_mcp_t *m, const char *method, json_t *params, long long deadline,
                       kbox_error_t *err)
{
	long long id = m->next_id++;
	json_t *msg = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", (json_int_t)id,
	                        "method", method, "params", params ? params : json_object());
	if (kr_mcp_send(m, msg, err) < 0) {
		if (err->code == KBOX_E_DEAD)
			input_closed(m, deadline, err);
		return NULL;
	}
	return wait_response(m, id, deadline, method, err);
}

json_t *kr_mcp_list_tools(char **argv, char **env, const char *cwd, int timeout_ms,
                          kbox_error_t *err)
{
	long long deadline = kx_now_ms() + timeout_ms;
	json_t *tools = json_array(), *res;
	json_t *cursor = NULL;
	kr_mcp_t m;

	if (!tools || kr_mcp_spawn(&m, argv, env, cwd, err) < 0) {
		json_decref(tools);
		return NULL;
	}
	res = request(&m, "initialize",
	              json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", KR_MCP_PROTOCOL,
	                        "capabilities", "clientInfo", "name", "kbox", "version",
	                        PACKAGE_VERSION),
	              deadline, err);
	if (!res)
		goto fail;
	json_decref(res);
	if (kr_mcp_send(&m,
	                json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
	                          "notifications/initialized"),
	                err) < 0) {
		if (err->code == KBOX_E_DEAD)
			input_closed(&m, deadline, err);
		goto fail;
	}
	for (int page = 0; page < KR_MCP_PAGES_MAX; page++) {
		json_t *list, *next;
		res = request(&m, "tools/list",
		              cursor ? json_pack("{s:O}", "cursor", cursor) : json_object(),
		              deadline, err);
		json_decref(cursor);
		cursor = NULL;
		if (!res)
			goto fail;
		list = json_object_get(res, "tools");
		if (!json_is_array(list)) {
			json_decref(res);
			kbox_error_set(err, KBOX_E_PROTOCOL,
			               "the MCP server's tools/list has no list of tools");
			goto fail;
		}
		json_array_extend(tools, list);
		next = json_object_get(res, "nextCursor");
		if (json_is_string(next) && json_string_length(next) > 0)
			cursor = json_incref(next);
		json_decref(res);
		if (!cursor)
			break;
	}
	json_decref(cursor);
	kr_mcp_close(&m);
	return tools;
fail:
	kr_mcp_close(&m);
	json_decref(tools);
	return NULL;
}

char *kr_mcp_result_text(const json_t *result)
{
	kx_buf_t b = KX_BUF_INIT;
	json_t *content = json_object_get(result, "content"), *c;
	size_t i, n = 0;
	json_array_foreach(content, i, c)
	{
		const char *t = json_string_value(json_object_get(c, "text"));
		if (!t || !json_is_string(json_object_get(c, "type")) ||
		    strcmp(json_string_value(json_object_get(c, "type")), "text") != 0)
			continue;
		if (n++)
			kx_buf_appends(&b, "\n");
		kx_buf_appends(&b, t);
	}
	if (!n)
		kx_buf_appends(&b, "");
	return kx_buf_take(&b, NULL);
}

void kr_mcp_close(kr_mcp_t *m)
{
	if (m->to >= 0)
		close(m->to);
	if (m->from >= 0)
		close(m->from);
	m->to = m->from = -1;
	if (m->pid > 0) {
		int st;
		/* its input ended: a server exits; one that does not is ended */
		for (int i = 0; i < 20; i++) {
			pid_t r = waitpid(m->pid, &st, WNOHANG);
			if (r == m->pid || (r < 0 && errno != EINTR))
				goto reaped;
			if (i == 0)
				kill(-m->pid, SIGTERM);
			usleep(10000);
		}
		kill(-m->pid, SIGKILL);
		while (waitpid(m->pid, &st, 0) < 0 && errno == EINTR)
			;
reaped:
		m->pid = 0;
	}
	kx_buf_reset(&m->in);
	m->off = m->seen = 0;
}
