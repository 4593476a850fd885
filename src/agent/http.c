/* src/agent/http.c — kbox agent's side of kbox-http, its HTTP helper:
 * start it with the API key in its environment, send it requests and read
 * its replies, one JSON line each way (src/http/http_proto.h).  kbox never
 * loads libcurl itself. */
#include "config.h"
#include "agent/agent_int.h"
#include "common/kx.h"
#include "http/http_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 1000

struct agent_http {
	pid_t pid;
	int fd;    /* our end of the socket that is the helper's stdin and stdout */
	char *buf; /* bytes read past the last reply */
	size_t len;
	size_t cap;     /* BUF's size */
	size_t scanned; /* the first SCANNED bytes of BUF hold no newline */
};

/* The environment variables that carry a key into kbox; the helper gets
 * the one key it needs under its own name, and none of these. */
static const char *const key_vars[] = {"KBOX_API_KEY", "OPENAI_API_KEY", NULL};

agent_http_t *agent_http_start(const char *key)
{
	char prog[PATH_MAX + 64];
	int sv[2];
	agent_http_t *h;

	if (cli_find_program(AGENT_CMD, KBOX_HTTP_PROGRAM, "HTTP helper program", prog,
	                     sizeof prog) < 0)
		return NULL;
	if (!(h = calloc(1, sizeof *h))) {
		cli_error(AGENT_CMD, "out of memory");
		return NULL;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		cli_error(AGENT_CMD, "socketpair: %s", strerror(errno));
		free(h);
		return NULL;
	}
	fflush(NULL);
	h->pid = fork();
	if (h->pid < 0) {
		cli_error(AGENT_CMD, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		free(h);
		return NULL;
	}
	if (h->pid == 0) {
		sigset_t none;
		/* its stdin and stdout: the socket; stderr: ours */
		if (dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0)
			_exit(127);
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (size_t i = 0; key_vars[i]; i++)
			unsetenv(key_vars[i]);
		/* the key: in its environment, never in its argv */
		if (key && *key ? setenv(KBOX_HTTP_KEY_ENV, key, 1) < 0
		                : unsetenv(KBOX_HTTP_KEY_ENV) < 0)
			_exit(127);
		execl(prog, KBOX_HTTP_PROGRAM, (char *)NULL);
		fprintf(stderr, "kbox %s: cannot run %s: %s\n", AGENT_CMD, prog, strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	h->fd = sv[0];
	return h;
}

/* Seconds since T0_MS (kx_now_ms), for TICK. */
static double elapsed_s(long long t0_ms)
{
	return (double)(kx_now_ms() - t0_ms) / 1000.0;
}

/* Write LEN bytes of S to FD.  0, or -1 with errno. */
static int write_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t w = send(fd, s, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		s += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Read once more from the helper into H's buffer (grown twice as large
 * when it is nearly full, so that a long reply costs its length), calling
 * TICK each second meanwhile.  0, or -1 with WHY. */
static int read_more(agent_http_t *h, agent_http_tick_t tick, void *arg, long long t0, char *why,
                     size_t why_size)
{
	for (;;) {
		struct pollfd p = {h->fd, POLLIN, 0};
		ssize_t n;
		int r = poll(&p, 1, tick ? TICK_MS : -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(why, why_size, "poll: %s", strerror(errno));
			return -1;
		}
		if (r == 0) {
			tick(arg, elapsed_s(t0));
			continue;
		}
		if (h->cap - h->len < 65536) {
			size_t want = h->cap ? 2 * h->cap : 65536;
			char *nb;
			if (want < h->len + 65536)
				want = h->len + 65536;
			if (!(nb = realloc(h->buf, want))) {
				snprintf(why, why_size, "out of memory");
				return -1;
			}
			h->buf = nb;
			h->cap = want;
		}
		n = read(h->fd, h->buf + h->len, h->cap - h->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(why, why_size, "the HTTP helper %s went away%s%s",
			         KBOX_HTTP_PROGRAM, n < 0 ? ": " : "",
			         n < 0 ? strerror(errno) : "");
			return -1;
		}
		h->len += (size_t)n;
		if (tick && elapsed_s(t0) >= 1)
			tick(arg, elapsed_s(t0));
		return 0;
	}
}

/* Take the first USED bytes out of H's buffer. */
static void consume(agent_http_t *h, size_t used)
{
	memmove(h->buf, h->buf + used, h->len - used);
	h->len -= used;
	h->scanned = 0;
}

json_t *agent_http_post(agent_http_t *h, const char *url, const char *body, double timeout_s,
                        agent_http_tick_t tick, void *arg, char *why, size_t why_size)
{
	json_t *req = json_pack("{s:s, s:s, s:f}", "url", url, "body", body, "timeout", timeout_s);
	char *line = req ? json_dumps(req, JSON_COMPACT) : NULL, *nl;
	long long t0 = kx_now_ms();
	json_t *reply = NULL, *bytes, *text;
	json_error_t je;
	size_t used;
	json_int_t n;
	int sent;

	json_decref(req);
	if (!line) {
		snprintf(why, why_size, "out of memory");
		return NULL;
	}
	sent = write_all(h->fd, line, strlen(line)) == 0 && write_all(h->fd, "\n", 1) == 0;
	free(line);
	if (!sent) {
		snprintf(why, why_size, "the HTTP helper %s went away: %s", KBOX_HTTP_PROGRAM,
		         strerror(errno));
		return NULL;
	}
	/* the reply's line: only the bytes not looked at yet are searched */
	while (!(nl = h->len > h->scanned ? memchr(h->buf + h->scanned, '\n', h->len - h->scanned)
	                                  : NULL)) {
		h->scanned = h->len;
		if (h->len >= (size_t)KBOX_HTTP_REPLY_LINE_MAX) {
			snprintf(why, why_size,
			         "the HTTP helper %s sent a line longer than %ld bytes",
			         KBOX_HTTP_PROGRAM, (long)KBOX_HTTP_REPLY_LINE_MAX);
			return NULL;
		}
		if (read_more(h, tick, arg, t0, why, why_size) < 0)
			return NULL;
	}
	used = (size_t)(nl - h->buf) + 1;
	reply = json_loadb(h->buf, used - 1, 0, &je);
	consume(h, used);
	bytes = json_object_get(reply, "body_bytes");
	n = json_integer_value(bytes);
	if (!json_is_object(reply) ||
	    (bytes && (!json_is_integer(bytes) || n < 0 || n > KBOX_HTTP_BODY_MAX))) {
		snprintf(why, why_size,
		         "the HTTP helper %s answered something else than its "
		         "protocol's JSON: %s",
		         KBOX_HTTP_PROGRAM,
		         !reply  ? je.text
		         : bytes ? "a bad body_bytes"
		                 : "not an object");
		json_decref(reply);
		return NULL;
	}
	if (!bytes)
		return reply;
	/* the body: BODY_BYTES bytes as they are, after the line */
	while (h->len < (size_t)n)
		if (read_more(h, tick, arg, t0, why, why_size) < 0) {
			json_decref(reply);
			return NULL;
		}
	if (!(text = json_stringn(h->buf, (size_t)n)) ||
	    json_object_set_new(reply, "body", text) < 0) {
		snprintf(why, why_size,
		         "the HTTP helper %s sent a body that is not UTF-8, or out of "
		         "memory",
		         KBOX_HTTP_PROGRAM);
		json_decref(reply);
		return NULL;
	}
	consume(h, (size_t)n);
	json_object_del(reply, "body_bytes");
	return reply;
}

void agent_http_destroy(agent_http_t **hp)
{
	agent_http_t *h = hp ? *hp : NULL;
	int st;
	if (!h)
		return;
	close(h->fd);
	kill(h->pid, SIGTERM); /* it may be in a request, or waiting to retry one */
	while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR)
		;
	free(h->buf);
	free(h);
	*hp = NULL;
}
