/* src/mcp_http/mcp_http.c — kbox-mcp-http: kbox mcp's Streamable HTTP
 * transport (MCP, basic/transports), the only program that links
 * libmicrohttpd, so that kbox never loads it.
 *
 *   kbox-mcp-http --listen ADDR:PORT --kbox KBOX [-- MCP-OPTIONS...]
 *
 * kbox mcp --http execs it, with the bearer token in KBOX_MCP_TOKEN.  One
 * endpoint, /mcp: a POST carries one JSON-RPC message; a request is
 * answered with one JSON object (application/json), or, when it asks for
 * progress (params._meta.progressToken) and its client accepts
 * text/event-stream, with a stream of events: its progress notifications,
 * then its response, which ends the stream; a notification or a response
 * is answered with 202.  Each conversation (initialize, then the
 * Mcp-Session-Id it returns) is a `kbox mcp` of its own on standard input
 * and output, a child of this process, with its own session: the MCP
 * logic is that one's, this program only carries messages.  A request of
 * the revision without a handshake and without an Mcp-Session-Id goes to
 * one shared conversation.  DELETE ends a conversation (its session is
 * stopped and removed); GET is 405 (no stream from the server).
 *
 * Every request needs "Authorization: Bearer TOKEN" (compared in constant
 * time); a Host that is not this address, or an Origin that is not a page
 * of it, is refused (DNS rebinding); bodies are at most BODY_MAX bytes,
 * conversations at most CONV_MAX, and a message waits for its
 * conversation behind at most OUT_MAX bytes (503 past them).  SIGTERM, SIGINT or SIGHUP end every
 * conversation and the server. */
#include "config.h"
#include "common/kx.h"
#include "mcp/json_load.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG "kbox mcp"
#define BODY_MAX (4L * 1024 * 1024)      /* one message from the client */
#define LINE_MAX_OUT (64L * 1024 * 1024) /* one message from a conversation */
#define CONV_MAX 16                      /* conversations at once */
#define PENDING_MAX 64                   /* requests waiting in one conversation */
#define OUT_MAX (1L << 20)           /* written to a conversation, not read yet: more is refused */
#define OUT_KEEP 65536               /* a conversation's write buffer kept once drained */
#define CONV_IDLE_MS (3600LL * 1000) /* a conversation unused this long ends (default) */
#define STOP_WAIT_MS 60000           /* the conversations' end, when the server stops */
#define STREAMS_DRAIN_MS 2000        /* then their event streams' end */
#define CONN_TIMEOUT_S 30 /* a connection silent this long (not waiting on a cell) closes */
#define CONN_MAX 256      /* connections at once */
#define HEADER_MS 10000   /* a request's headers must have come this long after its start */
#define SSE_TOKEN_MAX 256 /* a longer progressToken gets its answer as one JSON object */
#define SSE_WAITING_MAX (1L << 20) /* progress events not yet sent: more are dropped */
#define TOKEN_ENV "KBOX_MCP_TOKEN"
#define POLL_MAX (2 + 2 * (CONV_MAX + 1) + (CONV_MAX + 1) * PENDING_MAX)
#define SID_HEADER "Mcp-Session-Id"
#define VERSION_HEADER "MCP-Protocol-Version"

static const char *const versions[] = {"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26",
                                       "2024-11-05", "2024-10-07", NULL};

typedef struct conv conv_t;

/* A connection, from its accept to its close (MHD_OPTION_NOTIFY_CONNECTION):
 * a request's headers must come within HEADER_MS of the connection's
 * start or of its previous request's end; libmicrohttpd's own timeout is
 * of silence, and one byte at a time would hold a connection for ever. */
typedef struct {
	struct MHD_Connection *conn; /* NULL: a free slot */
	int fd;
	long long since; /* when it began waiting for a request's headers */
	bool in_request; /* the handler has its request */
} link_t;

/* One POST, from its first call of the handler to its response. */
typedef struct req {
	struct MHD_Connection *conn;
	kx_buf_t body;
	bool too_big, suspended, is_init;
	bool rewritten; /* a notification whose request id became the server's */
	/* answered with a stream of events (text/event-stream): its
	 * progressToken as compact JSON; the events not yet sent, from
	 * EV_OFF; EV_DONE once its response is among them */
	bool sse, ev_done;
	char *token;
	kx_buf_t ev;
	size_t ev_off;
	conv_t *conv; /* the conversation it waits on (pending), or NULL */
	char *key;    /* its JSON-RPC id, as compact JSON */
	/* the id (and progressToken) it has toward its conversation's kbox
	 * mcp: the server's own, so that no other client's message can
	 * answer, cancel or block it (the shared conversation has many) */
	char ikey[24];
	char *reply; /* the response's body, once it came */
	size_t reply_len;
	int reply_status;
	char sid[33];     /* an initialize's: the Mcp-Session-Id of its answer */
	struct req *next; /* in conv->pending */
} req_t;

/* A conversation: a kbox mcp child on a pair of pipes. */
struct conv {
	char sid[33]; /* its Mcp-Session-Id; "" for the shared one */
	pid_t pid;
	int in_fd, out_fd; /* the child's standard input (written), output (read) */
	kx_buf_t out;      /* what waits to be written to it */
	size_t out_off;
	char *rbuf; /* what it wrote, to the last full line */
	size_t rlen, rcap;
	req_t *pending;
	size_t n_pending;
	req_t *deleting; /* the DELETE that waits for its end */
	bool closing;    /* it ends: its standard input is closed once nothing
	                  * is left to write and no request waits (a cancel
	                  * can still reach a call in flight) */
	bool ended;      /* its pipes closed, its requests answered: its slot
	                  * waits for its kbox mcp to exit (conv_reap) */
	bool reaped;     /* its kbox mcp waited for already */
	long long used;  /* when a request last came, or a line (kx_now_ms) */
};

static struct {
	char token_hash[crypto_generichash_BYTES];
	const char *kbox;
	long long idle_ms; /* a conversation unused this long ends */
	char **mcp_args;
	size_t n_mcp_args;
	char host[300]; /* this address as a Host header has it, without the port */
	unsigned port;
	bool loopback;
	bool any; /* listening on every address: 0.0.0.0 or :: */
	char unix_path[sizeof(struct sockaddr_un) - sizeof(sa_family_t)]; /* unix:PATH */
	dev_t unix_dev;              /* the socket file bound there: removed at the end only */
	ino_t unix_ino;              /* if PATH still names it */
	conv_t *convs[CONV_MAX + 1]; /* + the shared one */
	long long next_id;           /* the last request's id toward its conversation */
	struct MHD_Daemon *d;
	size_t streams; /* event streams begun and not yet ended */
	link_t links[CONN_MAX + 8];
} S;

/* The link of CONN, or NULL. */
static link_t *link_of(struct MHD_Connection *conn)
{
	for (size_t i = 0; i < sizeof S.links / sizeof *S.links; i++)
		if (S.links[i].conn == conn)
			return &S.links[i];
	return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **ctx,
                          enum MHD_ConnectionNotificationCode what)
{
	link_t *l;
	(void)cls;
	(void)ctx;
	if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
		if ((l = link_of(conn)))
			l->conn = NULL;
		return;
	}
	if ((l = link_of(NULL))) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		        conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		l->conn = conn;
		l->fd = ci ? ci->connect_fd : -1;
		l->since = kx_now_ms();
		l->in_request = false;
	}
}

/* Cut off the connections whose request's headers are late (their
 * socket shut down: libmicrohttpd closes it in its next run); the ms to
 * the next deadline into *WAIT when sooner. */
static void cut_late_headers(int *wait)
{
	long long now = kx_now_ms();
	for (size_t i = 0; i < sizeof S.links / sizeof *S.links; i++) {
		link_t *l = &S.links[i];
		long long left;
		if (!l->conn || l->in_request || l->fd < 0)
			continue;
		if ((left = l->since + HEADER_MS - now) <= 0) {
			shutdown(l->fd, SHUT_RDWR);
			l->fd = -1; /* once */
		} else if (*wait < 0 || left < *wait)
			*wait = (int)left;
	}
}

static void say(const char *fmt, ...) KX_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- conversations ---- */

static conv_t *conv_find(const char *sid)
{
	for (size_t i = 0; i <= CONV_MAX; i++)
		if (S.convs[i] && !S.convs[i]->ended && strcmp(S.convs[i]->sid, sid) == 0)
			return S.convs[i];
	return NULL;
}

/* A new conversation, SHARED (no Mcp-Session-Id) or not: its kbox mcp
 * started.  NULL when there is no room or it could not start (said). */
static conv_t *conv_new(bool shared)
{
	int in[2], out[2];
	size_t slot = CONV_MAX + 1;
	conv_t *c;

	for (size_t i = shared ? CONV_MAX : 0; i < (shared ? CONV_MAX + 1 : CONV_MAX); i++)
		if (!S.convs[i]) {
			slot = i;
			break;
		}
	if (slot > CONV_MAX || !(c = calloc(1, sizeof *c)))
		return NULL;
	if (!shared) {
		unsigned char r[16];
		if (getrandom(r, sizeof r, 0) != sizeof r) {
			free(c);
			return NULL;
		}
		for (size_t i = 0; i < sizeof r; i++)
			snprintf(c->sid + 2 * i, 3, "%02x", r[i]);
	}
	if (pipe2(in, O_CLOEXEC) < 0) {
		free(c);
		return NULL;
	}
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		free(c);
		return NULL;
	}
	if ((c->pid = fork()) == 0) {
		char **argv = calloc(S.n_mcp_args + 3, sizeof *argv);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (!argv || dup2(in[0], STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0)
			_exit(127);
		argv[0] = "kbox";
		argv[1] = "mcp";
		for (size_t i = 0; i < S.n_mcp_args; i++)
			argv[2 + i] = S.mcp_args[i];
		execv(S.kbox, argv);
		say("cannot run %s: %s", S.kbox, strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	if (c->pid < 0) {
		close(in[1]);
		close(out[0]);
		free(c);
		return NULL;
	}
	c->in_fd = in[1];
	c->out_fd = out[0];
	c->used = kx_now_ms();
	fcntl(c->in_fd, F_SETFL, O_NONBLOCK);
	fcntl(c->out_fd, F_SETFL, O_NONBLOCK);
	S.convs[slot] = c;
	return c;
}

/* Queue LEN bytes at LINE and a newline for C's kbox mcp. */
static int conv_write(conv_t *c, const char *line, size_t len)
{
	if (kx_buf_append(&c->out, line, len) < 0 || kx_buf_append(&c->out, "\n", 1) < 0)
		return -1;
	return 0;
}

/* Add the message LINE[0..LEN) to R's stream as an event (its response
 * too when DONE), and let R's connection send it. */
static void sse_push(req_t *r, const char *line, size_t len, bool done)
{
	/* a client that does not read its stream: the progress it has not
	 * read yet is enough (its response is always added) */
	if (!done && r->ev.len - r->ev_off + len > (size_t)SSE_WAITING_MAX)
		return;
	if (!r->ev_done &&
	    (kx_buf_append(&r->ev, "event: message\ndata: ", 21) < 0 ||
	     kx_buf_append(&r->ev, line, len) < 0 || kx_buf_append(&r->ev, "\n\n", 2) < 0))
		done = true; /* (out of memory: the stream ends short) */
	r->ev_done |= done;
	if (r->suspended) {
		r->suspended = false;
		MHD_resume_connection(r->conn);
	}
}

/* R's response: STATUS and BODY (taken; NULL: none). */
static void req_answer(req_t *r, int status, char *body, size_t len)
{
	if (r->sse) { /* the stream's last event (its 200 went) */
		sse_push(r, body ? body : "", body ? len : 0, true);
		free(body);
		return;
	}
	r->reply_status = status;
	r->reply = body ? body : strdup("");
	r->reply_len = body ? len : 0;
	if (r->suspended) {
		r->suspended = false;
		MHD_resume_connection(r->conn);
	}
}

/* A JSON-RPC error response for the request KEY, as a body (new). */
static char *rpc_error(const char *key, int code, const char *msg, size_t *len)
{
	json_t *id = key ? json_loads(key, JSON_DECODE_ANY, NULL) : NULL;
	json_t *j = json_pack("{s:s, s:o, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
	                      id ? id : json_null(), "error", "code", code, "message", msg);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	*len = s ? strlen(s) : 0;
	return s;
}

/* Take R out of its conversation's pending list. */
static void req_unlink(req_t *r)
{
	conv_t *c = r->conv;
	if (!c)
		return;
	if (c->deleting == r)
		c->deleting = NULL;
	for (req_t **p = &c->pending; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			c->n_pending--;
			break;
		}
	r->conv = NULL;
}

/* If C has ended and its kbox mcp has exited: the child reaped, never
 * waited for (the loop must not block on a child that still runs a
 * cell), the DELETE that waited for its end answered, its slot freed.
 * Whether C is gone. */
static bool conv_reap(conv_t *c)
{
	if (!c->ended)
		return false;
	if (!c->reaped && waitpid(c->pid, NULL, WNOHANG) == 0)
		return false;
	c->reaped = true; /* (ended, or none to wait for) */
	if (c->deleting) {
		c->deleting->conv = NULL;
		req_answer(c->deleting, MHD_HTTP_OK, NULL, 0);
	}
	for (size_t i = 0; i <= CONV_MAX; i++)
		if (S.convs[i] == c)
			S.convs[i] = NULL;
	free(c->out.data);
	free(c->rbuf);
	free(c);
	return true;
}

/* C's kbox mcp has ended (or must): its requests get an error, its pipes
 * close; its slot goes once the child is reaped (conv_reap, now or from
 * the loop at its SIGCHLD).  C may be freed. */
static void conv_end(conv_t *c, const char *why)
{
	while (c->pending) {
		req_t *r = c->pending;
		size_t len;
		char *body = rpc_error(r->key, -32603, why, &len);
		req_unlink(r);
		req_answer(r, MHD_HTTP_OK, body, len);
	}
	if (c->in_fd >= 0)
		close(c->in_fd);
	if (c->out_fd >= 0)
		close(c->out_fd);
	c->in_fd = c->out_fd = -1;
	c->ended = c->closing = true;
	conv_reap(c);
}

/* C closing, nothing left to write to it and no request waiting: its
 * kbox mcp's standard input closes (it ends at the end of its input). */
static void conv_settle(conv_t *c)
{
	if (c->closing && !c->pending && c->in_fd >= 0 && c->out_off >= c->out.len) {
		close(c->in_fd);
		c->in_fd = -1;
	}
}

/* J (a message of a conversation) with the member NAME of OBJ (in J) set
 * to the compact JSON CLIENT (a client's id or progressToken): one line
 * as kbox mcp writes it (new; NULL when out of memory). */
static char *with_client_value(json_t *j, json_t *obj, const char *name, const char *client)
{
	/* (a string id may hold a NUL: its JSON has it as \u0000) */
	json_t *v = json_loads(client, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	if (!v || json_object_set_new(obj, name, v) < 0)
		return NULL;
	return json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9));
}

/* One line LINE[0..LEN) from C's kbox mcp: the response to a pending
 * request goes to it, and a progress notification to the request whose
 * token it has, when that one is answered with a stream, each with the
 * client's own id or token in place of the server's (post); anything
 * else is dropped. */
static void conv_line(conv_t *c, char *line, size_t len)
{
	/* (a result may hold a NUL: kbox mcp writes it \u0000) */
	json_t *j = json_loadb(line, len, JSON_ALLOW_NUL, NULL), *id, *method, *params;
	char *key;
	if (!j) { /* (kbox mcp writes JSON only: said, for the one who runs it) */
		say("a conversation wrote a line that is not JSON (%zu bytes): not passed on", len);
		return;
	}
	method = json_object_get(j, "method");
	params = json_object_get(j, "params");
	if (json_is_string(method) &&
	    strcmp(json_string_value(method), "notifications/progress") == 0 &&
	    (key = json_dumps(json_object_get(params, "progressToken"),
	                      JSON_COMPACT | JSON_ENCODE_ANY))) {
		for (req_t *r = c->pending; r; r = r->next)
			if (r->sse && strcmp(r->ikey, key) == 0) {
				char *ev = with_client_value(j, params, "progressToken", r->token);
				if (ev)
					sse_push(r, ev, strlen(ev), false);
				free(ev);
				break;
			}
		free(key);
	}
	id = json_object_get(j, "id");
	if (id && (json_object_get(j, "result") || json_object_get(j, "error")) &&
	    (key = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY))) {
		for (req_t *r = c->pending; r; r = r->next)
			if (strcmp(r->ikey, key) == 0) {
				char *body = with_client_value(j, j, "id", r->key);
				req_unlink(r);
				req_answer(r, body ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR,
				           body, body ? strlen(body) : 0);
				conv_settle(c);
				break;
			}
		free(key);
	}
	json_decref(j);
}

/* Read what C's kbox mcp wrote; at its end, the conversation ends. */
static void conv_read(conv_t *c)
{
	for (;;) {
		ssize_t n;
		char *nl;
		if (c->rcap - c->rlen < 65536) {
			size_t ncap = c->rcap ? c->rcap * 2 : 131072;
			char *nb = ncap <= (size_t)LINE_MAX_OUT + 131072 ? realloc(c->rbuf, ncap)
			                                                 : NULL;
			if (!nb) {
				conv_end(c, "a message of the conversation's server was too long");
				return;
			}
			c->rbuf = nb;
			c->rcap = ncap;
		}
		n = read(c->out_fd, c->rbuf + c->rlen, c->rcap - c->rlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			conv_end(c, "the conversation's server ended");
			return;
		}
		c->rlen += (size_t)n;
		c->used = kx_now_ms();
		while ((nl = memchr(c->rbuf, '\n', c->rlen))) {
			size_t l = (size_t)(nl - c->rbuf);
			conv_line(c, c->rbuf, l);
			memmove(c->rbuf, nl + 1, c->rlen - l - 1);
			c->rlen -= l + 1;
		}
	}
}

/* Write what waits for C's kbox mcp, as much as it takes now; once
 * nothing is left and C is closing with no request waiting, close its
 * standard input.  Its input closed already: what waits is dropped.  C
 * may end (a write refused: its requests answered). */
static void conv_flush(conv_t *c)
{
	if (c->in_fd < 0)
		c->out_off = c->out.len;
	while (c->out_off < c->out.len) {
		ssize_t n = write(c->in_fd, c->out.data + c->out_off, c->out.len - c->out_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (errno != EAGAIN)
				conv_end(c, "the conversation's server ended");
			return;
		}
		c->out_off += (size_t)n;
		/* (what was written goes once it is as much as what waits:
		 * the buffer never outgrows twice what waits) */
		if (c->out_off >= c->out.len - c->out_off) {
			memmove(c->out.data, c->out.data + c->out_off, c->out.len - c->out_off);
			c->out.len -= c->out_off;
			c->out_off = 0;
		}
	}
	if (c->out.cap > OUT_KEEP)
		kx_buf_reset(&c->out); /* (a flood's room is given back) */
	c->out.len = c->out_off = 0;
	conv_settle(c);
}

/* The request KEY (compact JSON) is cancelled in C
 * (notifications/cancelled: the cell is interrupted, the session stays):
 * its client went away.  C may end meanwhile (its requests answered). */
static void conv_cancel(conv_t *c, const char *key)
{
	json_t *id = json_loads(key, JSON_DECODE_ANY, NULL);
	json_t *n = id ? json_pack("{s:s, s:s, s:{s:o, s:s}}", "jsonrpc", "2.0", "method",
	                           "notifications/cancelled", "params", "requestId", id, "reason",
	                           "the HTTP client went away")
	               : NULL;
	char *line = n ? json_dumps(n, JSON_COMPACT) : NULL;
	json_decref(n);
	if (line && conv_write(c, line, strlen(line)) == 0)
		conv_flush(c);
	free(line);
}

/* The client of R went away while R waited (suspended): R is cancelled,
 * and answered for MHD to close. */
static void req_gone(req_t *r)
{
	conv_t *c = r->conv;
	size_t len;
	char *body;
	req_unlink(r);
	conv_cancel(c, r->ikey); /* (may end C) */
	body = rpc_error(r->key, -32800, "the HTTP client went away", &len);
	req_answer(r, MHD_HTTP_OK, body, len);
}

/* ---- HTTP ---- */

/* Queue STATUS with BODY (taken, may be NULL) as TYPE (NULL: none), and
 * the Mcp-Session-Id SID (NULL: none). */
static enum MHD_Result respond(struct MHD_Connection *conn, int status, char *body, size_t len,
                               const char *type, const char *sid)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body ? body : (char *)"",
	                                                            body ? MHD_RESPMEM_MUST_FREE
	                                                                 : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	if (type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (sid && *sid)
		MHD_add_response_header(resp, SID_HEADER, sid);
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "POST, DELETE");
	ret = MHD_queue_response(conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* An HTTP error STATUS whose body is the JSON-RPC error CODE saying WHY. */
static enum MHD_Result refuse_as(struct MHD_Connection *conn, int status, int code, const char *why)
{
	size_t len;
	char *body = rpc_error(NULL, code, why, &len);
	return respond(conn, status, body, len, "application/json", NULL);
}

/* The same, an Invalid Request (-32600). */
static enum MHD_Result refuse(struct MHD_Connection *conn, int status, const char *why)
{
	return refuse_as(conn, status, -32600, why);
}

/* Whether the Authorization header is "Bearer" and the token; *GIVEN
 * says whether it gave a bearer token at all. */
static bool authorized(struct MHD_Connection *conn, bool *given)
{
	const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	unsigned char h[crypto_generichash_BYTES];
	*given = a && strncasecmp(a, "Bearer ", 7) == 0;
	if (!*given)
		return false;
	a += 7;
	while (*a == ' ')
		a++;
	/* hashes of equal length, compared in constant time */
	crypto_generichash(h, sizeof h, (const unsigned char *)a, strlen(a), NULL, 0);
	return sodium_memcmp(h, S.token_hash, sizeof h) == 0;
}

/* Whether HOST (a Host header) names this server: its address, or on
 * loopback localhost too, with its port or none. */
static bool host_is_ours(const char *host)
{
	char want[400];
	if (!host)
		return false;
	/* a unix socket: no page of any site reaches it (DNS rebinding
	 * cannot), and its file's mode says who may connect */
	if (S.unix_path[0])
		return true;
	/* listening on every address (0.0.0.0, ::), any name of the machine
	 * may reach it: the token guards it, and an Origin must be the page
	 * of the Host the request names (origin_is_ours) */
	if (S.any)
		return true;
	for (int i = 0; i < 2; i++) {
		const char *name = i == 0 ? S.host : S.loopback ? "localhost" : NULL;
		size_t n;
		if (!name)
			continue;
		n = strlen(name);
		if (strncasecmp(host, name, n) != 0)
			continue;
		snprintf(want, sizeof want, ":%u", S.port);
		if (host[n] == '\0' || strcmp(host + n, want) == 0)
			return true;
	}
	return false;
}

/* How many headers named NAME (in any case) the request of CONN has. */
typedef struct {
	const char *name;
	unsigned n;
} header_count_t;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
	header_count_t *c = cls;
	(void)kind;
	(void)value;
	c->n += key && strcasecmp(key, c->name) == 0;
	return MHD_YES;
}

static unsigned headers_named(struct MHD_Connection *conn, const char *name)
{
	header_count_t c = {name, 0};
	MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &c);
	return c.n;
}

/* Whether ORIGIN (an Origin header; NULL: none, a client that is no
 * browser) is a page of this server. */
static bool origin_is_ours(const char *origin, const char *host)
{
	const char *colon;
	if (!origin)
		return true;
	/* (a browser's page never talks to a unix socket) */
	if (strncmp(origin, "http://", 7) != 0 || S.unix_path[0])
		return false;
	if (S.any)
		return host && strcasecmp(origin + 7, host) == 0;
	/* a page of another port is another origin: the port is said */
	colon = strrchr(origin + 7, ':');
	if (!colon || strchr(colon, ']'))
		return false;
	return host_is_ours(origin + 7);
}

/* Whether ACCEPT (may be NULL: anything) takes JSON. */
static bool accepts_json(const char *accept)
{
	return !accept || strstr(accept, "application/json") || strstr(accept, "*/*");
}

/* R's stream, as libmicrohttpd asks for it: what waits, or its end, or
 * nothing yet (R's connection is suspended until sse_push). */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	req_t *r = cls;
	size_t n = r->ev.len - r->ev_off;
	(void)pos;
	if (n) {
		if (n > max)
			n = max;
		memcpy(buf, r->ev.data + r->ev_off, n);
		r->ev_off += n;
		if (r->ev_off == r->ev.len)
			r->ev.len = r->ev_off = 0;
		return (ssize_t)n;
	}
	if (r->ev_done)
		return MHD_CONTENT_READER_END_OF_STREAM;
	r->suspended = true;
	MHD_suspend_connection(r->conn);
	return 0;
}

/* Answer R (a request that waits for its response in its conversation)
 * with a stream of events. */
static enum MHD_Result sse_begin(req_t *r)
{
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
	                                                              sse_read, r, NULL);
	enum MHD_Result ret;
	if (!resp)
		return MHD_NO;
	S.streams++; /* (completed takes it back, whatever becomes of it) */
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	ret = MHD_queue_response(r->conn, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* R's headers: what it sends (JSON, at most BODY_MAX), takes (JSON) and
 * speaks (a revision of the protocol kbox mcp knows).  False, or true
 * with R refused (*RET). */
static bool headers_refused(req_t *r, enum MHD_Result *ret)
{
	struct MHD_Connection *conn = r->conn;
	const char *ver = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, VERSION_HEADER);
	const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	                                               MHD_HTTP_HEADER_CONTENT_TYPE);
	bool known = !ver;

	if (r->too_big)
		*ret = refuse(conn, 413, "Content Too Large: a message longer than 4 MiB");
	else if (!type || strncasecmp(type, "application/json", 16) != 0)
		*ret = refuse(conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
		              "Unsupported Media Type: Content-Type must be application/json");
	else if (!accepts_json(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept")))
		*ret = refuse(conn, MHD_HTTP_NOT_ACCEPTABLE,
		              "Not Acceptable: the client must accept application/json");
	else {
		for (size_t i = 0; ver && versions[i]; i++)
			known |= strcmp(ver, versions[i]) == 0;
		if (known)
			return false;
		char why[400];
		bool shown = strlen(ver) <= 64;
		size_t n;
		for (const char *c = ver; shown && *c; c++)
			shown = *c >= 0x20 && *c < 0x7f; /* (echoed only when it is text) */
		n = (size_t)snprintf(why, sizeof why,
		                     "Bad Request: unsupported MCP-Protocol-Version%s%s (this "
		                     "server speaks",
		                     shown ? " " : "", shown ? ver : "");
		for (size_t i = 0; versions[i] && n < sizeof why; i++)
			n += (size_t)snprintf(why + n, sizeof why - n, "%s%s", i ? ", " : " ",
			                      versions[i]);
		if (n < sizeof why)
			snprintf(why + n, sizeof why - n, ")");
		*ret = refuse(conn, MHD_HTTP_BAD_REQUEST, why);
	}
	return true;
}

/* R's body as one JSON-RPC message, whose id, if any, is a string or an
 * integer (new reference), or NULL with R refused (*RET). */
static json_t *body_message(req_t *r, enum MHD_Result *ret)
{
	/* (a NUL in a string is taken, as kbox mcp takes it on stdio) */
	json_t *msg = mcp_json_loadb(r->body.data ? r->body.data : "", r->body.len,
	                             JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	json_t *id = json_object_get(msg, "id");
	if (!msg || !json_is_object(msg)) {
		bool batch = json_is_array(msg), parsed = msg != NULL;
		json_decref(msg);
		if (!parsed)
			*ret = refuse_as(r->conn, MHD_HTTP_BAD_REQUEST, -32700,
			                 "Parse error: the body is not JSON");
		else
			*ret = refuse(
			        r->conn, MHD_HTTP_BAD_REQUEST,
			        batch ? "Invalid Request: batches are not supported (MCP since "
			                "2025-06-18): send one message a POST"
			              : "Invalid Request: the body must be one JSON-RPC message, "
			                "an object");
		return NULL;
	}
	if (id && !json_is_string(id) && !json_is_integer(id)) {
		/* the conversation could not say which request its error
		 * answers: refused here */
		json_decref(msg);
		*ret = refuse(r->conn, MHD_HTTP_BAD_REQUEST,
		              "Invalid Request: \"id\" must be a string or an integer");
		return NULL;
	}
	return msg;
}

/* Progress wanted (META's progressToken, of a request), and a stream taken
 * (Accept): R's answer is a stream, R->token the token (none past
 * SSE_TOKEN_MAX: each event would repeat it).  True, or false with R
 * refused (*RET). */
static bool take_stream(req_t *r, const json_t *id, const json_t *meta, enum MHD_Result *ret)
{
	json_t *token = json_object_get(meta, "progressToken");
	const char *accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Accept");
	if (id && (json_is_string(token) || json_is_integer(token)) && accept &&
	    strstr(accept, "text/event-stream") &&
	    !(r->token = json_dumps(token, JSON_COMPACT | JSON_ENCODE_ANY))) {
		*ret = refuse(r->conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return false;
	}
	if (r->token && strlen(r->token) > SSE_TOKEN_MAX) {
		free(r->token);
		r->token = NULL;
	}
	return true;
}

/* The conversation R is for: its Mcp-Session-Id's, a new one for an
 * initialize, the shared one for a request of the revision without a
 * handshake (MODERN, or server/discover); one that is ending, or has not
 * read what came before, refuses it.  NULL with R refused (*RET). */
static conv_t *conversation_of(req_t *r, const json_t *method, bool modern, enum MHD_Result *ret)
{
	struct MHD_Connection *conn = r->conn;
	const char *sid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, SID_HEADER);
	conv_t *c;

	if (sid) {
		if (!(c = conv_find(sid)) || !*sid) {
			*ret = refuse(
			        conn, MHD_HTTP_NOT_FOUND,
			        "Not Found: no such conversation (MCP session: it ended, or was "
			        "never made): "
			        "initialize again");
			return NULL;
		}
	} else if (r->is_init) {
		if (!(c = conv_new(false))) {
			char why[256], idle[32];
			snprintf(
			        why, sizeof why,
			        "Service Unavailable: this server keeps at most %d conversations "
			        "(MCP sessions) at once: end one (DELETE) first; one unused for %s "
			        "ends on its own",
			        CONV_MAX, kx_fmt_ms(idle, sizeof idle, S.idle_ms));
			*ret = refuse(conn, MHD_HTTP_SERVICE_UNAVAILABLE, why);
			return NULL;
		}
	} else if (modern || (json_is_string(method) &&
	                      strcmp(json_string_value(method), "server/discover") == 0)) {
		if (!(c = conv_find("")) && !(c = conv_new(true))) {
			*ret = refuse(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
			              "Service Unavailable: the server could not start");
			return NULL;
		}
	} else {
		*ret = refuse(conn, MHD_HTTP_BAD_REQUEST,
		              "Bad Request: the Mcp-Session-Id header is required (initialize "
		              "first)");
		return NULL;
	}
	if (r->is_init)
		memcpy(r->sid, c->sid, sizeof r->sid);
	if (c->closing) {
		*ret = refuse(conn, MHD_HTTP_NOT_FOUND, "Not Found: the conversation is ending");
		return NULL;
	}
	/* messages come faster than the conversation reads them (a flood
	 * of notifications, answered 202 at once): what waits is bounded */
	if (c->out.len - c->out_off >= (size_t)OUT_MAX) {
		*ret = refuse(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
		              "Service Unavailable: the conversation has not yet read the 1 MiB of "
		              "messages before this one: send it again later");
		return NULL;
	}
	return c;
}

/* R, a request of id ID, waits in C for its response: its id (and META's
 * progressToken) in MSG become the server's, as kbox mcp sees them.  True,
 * or false with R refused (*RET). */
static bool take_request(req_t *r, conv_t *c, json_t *msg, const json_t *id, json_t *meta,
                         enum MHD_Result *ret)
{
	if (c->n_pending >= PENDING_MAX ||
	    !(r->key = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY))) {
		*ret = refuse(r->conn, MHD_HTTP_SERVICE_UNAVAILABLE,
		              "Service Unavailable: too many requests in flight");
		return false;
	}
	/* a conversation of one client: its ids are its own (and a cancel
	 * names one); the shared one's clients each have theirs */
	for (req_t *p = c->pending; p && c->sid[0]; p = p->next)
		if (strcmp(p->key, r->key) == 0) {
			*ret = refuse(r->conn, MHD_HTTP_BAD_REQUEST,
			              "Bad Request: a request of that id is in flight");
			return false;
		}
	snprintf(r->ikey, sizeof r->ikey, "%lld", ++S.next_id);
	if (json_object_set_new(msg, "id", json_integer(S.next_id)) < 0 ||
	    (json_is_object(meta) &&
	     (json_is_string(json_object_get(meta, "progressToken")) ||
	      json_is_integer(json_object_get(meta, "progressToken"))) &&
	     json_object_set_new(meta, "progressToken", json_integer(S.next_id)) < 0)) {
		*ret = refuse(r->conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return false;
	}
	r->conv = c;
	r->next = c->pending;
	c->pending = r;
	c->n_pending++;
	return true;
}

/* A cancel (MSG) names a request by the client's id: the server's is put
 * in its place, in a conversation of one client; in the shared one it
 * could be any client's (a client there cancels by closing its
 * connection), so it is not carried, nor one that names no request in
 * flight.  The request it cancels when it is to be carried
 * (R->rewritten), else NULL. */
static req_t *take_cancel(req_t *r, conv_t *c, json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	char *want = json_dumps(json_object_get(params, "requestId"),
	                        JSON_COMPACT | JSON_ENCODE_ANY);
	req_t *p = c->pending;
	while (p && !(want && c->sid[0] && strcmp(p->key, want) == 0))
		p = p->next;
	free(want);
	if (!p ||
	    json_object_set_new(params, "requestId", json_integer(strtoll(p->ikey, NULL, 10))) < 0)
		return NULL;
	r->rewritten = true;
	return p;
}

/* R, whose cancel its client sent (notifications/cancelled), is answered
 * now: kbox mcp sends no response for a cancelled call (MCP), and its
 * POST would wait, holding a slot of its conversation, until its client
 * closed it.  An error, -32800 as LSP's RequestCancelled, which a client
 * that cancelled ignores. */
static void req_cancelled(req_t *r)
{
	size_t len;
	char *body = rpc_error(r->key, -32800,
	                       "Request cancelled (notifications/cancelled): no result follows",
	                       &len);
	req_unlink(r);
	req_answer(r, body ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR, body, len);
}

/* Write R's message (MSG, or its body as it came) to C, as one line.  0,
 * or -1 (out of memory). */
static int forward(req_t *r, conv_t *c, const json_t *msg)
{
	if (r->key || r->rewritten) {
		char *line = json_dumps(msg, JSON_COMPACT);
		int rc = line ? conv_write(c, line, strlen(line)) : -1;
		free(line);
		return rc;
	}
	/* one line for the conversation, which reads a message a line: a
	 * line break in JSON is white space between tokens (one in a string
	 * is escaped, or the body did not parse), so a space in its place
	 * changes nothing of the message, and nothing can follow it */
	for (size_t k = 0; k < r->body.len; k++)
		if (r->body.data[k] == '\n' || r->body.data[k] == '\r')
			r->body.data[k] = ' ';
	return conv_write(c, r->body.data, r->body.len);
}

/* The POST of R, complete: checked, and its message carried to its
 * conversation; the answer now (a refusal, 202), or later (the request's
 * response, or a stream of its events). */
static enum MHD_Result post(req_t *r)
{
	enum MHD_Result ret = MHD_NO;
	json_t *msg, *id, *method, *meta;
	req_t *cancelled = NULL;
	char csid[33];
	conv_t *c;

	if (headers_refused(r, &ret) || !(msg = body_message(r, &ret)))
		return ret;
	id = json_object_get(msg, "id");
	method = json_object_get(msg, "method");
	meta = json_object_get(json_object_get(msg, "params"), "_meta");
	r->is_init = json_is_string(method) && strcmp(json_string_value(method), "initialize") == 0;
	if (!take_stream(r, id, meta, &ret) ||
	    !(c = conversation_of(
	              r, method,
	              json_is_object(meta) &&
	                      json_object_get(meta, "io.modelcontextprotocol/protocolVersion"),
	              &ret)))
		goto out;
	memcpy(csid, c->sid, sizeof csid);
	if (id && !json_is_string(method)) {
		/* a response: kbox mcp sends no request it waits for, so none
		 * is carried (its id could be another request's); anything else
		 * with an id is no message: refused here, for no request waits
		 * for its error */
		if (!method && (json_object_get(msg, "result") || json_object_get(msg, "error")))
			ret = respond(r->conn, MHD_HTTP_ACCEPTED, NULL, 0, NULL, csid);
		else
			ret = refuse(r->conn, MHD_HTTP_BAD_REQUEST,
			             "Invalid Request: \"method\" (a string) is required");
		goto out;
	}
	if (id && !take_request(r, c, msg, id, meta, &ret))
		goto out;
	if (!id && json_is_string(method) &&
	    strcmp(json_string_value(method), "notifications/cancelled") == 0 &&
	    !(cancelled = take_cancel(r, c, msg))) {
		ret = respond(r->conn, MHD_HTTP_ACCEPTED, NULL, 0, NULL, csid);
		goto out;
	}
	c->used = kx_now_ms();
	if (forward(r, c, msg) < 0) {
		req_unlink(r);
		ret = refuse(r->conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		goto out;
	}
	if (cancelled)
		req_cancelled(cancelled);
	conv_flush(c); /* (which may end C) */
	if (!r->key)   /* a notification or a response: accepted */
		ret = respond(r->conn, MHD_HTTP_ACCEPTED, NULL, 0, NULL, csid);
	else if (r->reply) /* (cannot be yet: the child answers later) */
		ret = MHD_YES;
	else if (r->token && !r->is_init && r->conv) {
		r->sse = true;
		ret = sse_begin(r);
	} else {
		r->suspended = true;
		MHD_suspend_connection(r->conn);
		ret = MHD_YES;
	}
out:
	json_decref(msg);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **state)
{
	req_t *r = *state;
	bool given;
	(void)cls;
	(void)version;

	if (!r) {
		link_t *l = link_of(conn);
		if (l)
			l->in_request = true;
		if (!(r = calloc(1, sizeof *r)))
			return MHD_NO;
		r->conn = conn;
		*state = r;
		/* the headers are whole: a request that is not let in is
		 * answered before its body is read (none is kept) */
		if (strcmp(url, "/mcp") != 0)
			return refuse(conn, MHD_HTTP_NOT_FOUND, "Not Found: the endpoint is /mcp");
		/* (one of each, or the check would judge one and a later
		 * reader another) */
		if (headers_named(conn, "Host") > 1 || headers_named(conn, "Origin") > 1 ||
		    headers_named(conn, "Authorization") > 1)
			return refuse(conn, MHD_HTTP_BAD_REQUEST,
			              "Bad Request: more than one Host, Origin or Authorization "
			              "header");
		if (!host_is_ours(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host")))
			return refuse(conn, MHD_HTTP_FORBIDDEN,
			              "Forbidden: the Host is not this server");
		if (!origin_is_ours(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin"),
		                    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host")))
			return refuse(conn, MHD_HTTP_FORBIDDEN,
			              "Forbidden: the Origin is not this server");
		if (!authorized(conn, &given))
			return refuse(
			        conn, MHD_HTTP_UNAUTHORIZED,
			        given ? "Unauthorized: the bearer token is not this server's "
			                "(the token kbox mcp --http printed, or KBOX_MCP_TOKEN, "
			                "or --token-file's)"
			              : "Unauthorized: give Authorization: Bearer TOKEN (the "
			                "token kbox mcp --http printed, or KBOX_MCP_TOKEN, or "
			                "--token-file's)");
		if (strcmp(method, "POST") != 0 && strcmp(method, "DELETE") != 0)
			return refuse(
			        conn, MHD_HTTP_METHOD_NOT_ALLOWED,
			        "Method Not Allowed: POST a message, or DELETE a conversation");
		return MHD_YES;
	}
	if (*upload_size) {
		if (!r->too_big && r->body.len + *upload_size <= (size_t)BODY_MAX)
			r->too_big = kx_buf_append(&r->body, upload, *upload_size) < 0;
		else
			r->too_big = true;
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->reply) { /* resumed: the response came */
		char *body = r->reply;
		r->reply = NULL;
		return respond(conn, r->reply_status, body, r->reply_len,
		               r->reply_len ? "application/json" : NULL,
		               r->is_init ? r->sid : NULL);
	}
	if (strcmp(method, "POST") == 0)
		return post(r);
	if (strcmp(method, "DELETE") == 0) {
		const char *sid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, SID_HEADER);
		conv_t *c = sid && *sid ? conv_find(sid) : NULL;
		if (!sid)
			return refuse(conn, MHD_HTTP_BAD_REQUEST,
			              "Bad Request: the Mcp-Session-Id header is required (the "
			              "conversation to end)");
		if (!c)
			return refuse(conn, MHD_HTTP_NOT_FOUND,
			              "Not Found: no such conversation (MCP session)");
		if (c->deleting)
			return refuse(conn, MHD_HTTP_NOT_FOUND,
			              "Not Found: the conversation is ending");
		/* its kbox mcp stops and removes its session at the end of its
		 * input; the answer waits for that */
		c->closing = true;
		c->deleting = r;
		r->conv = c;
		r->suspended = true;
		MHD_suspend_connection(conn);
		conv_flush(c);
		return MHD_YES;
	}
	return MHD_NO; /* (refused on its first call) */
}

/* At the end: the event streams, each given its last event (the
 * server's stop), are sent to their end (the chunked body's last chunk:
 * a client reads a whole response, not a cut one), for STREAMS_DRAIN_MS
 * at most (a client that does not read is not waited for longer). */
static void drain_streams(void)
{
	long long until = kx_now_ms() + STREAMS_DRAIN_MS;
	const union MHD_DaemonInfo *ep = MHD_get_daemon_info(S.d, MHD_DAEMON_INFO_EPOLL_FD);
	MHD_run(S.d);
	while (S.streams && ep && kx_now_ms() < until) {
		struct pollfd p = {.fd = ep->epoll_fd, .events = POLLIN};
		MHD_UNSIGNED_LONG_LONG to = 0;
		long long left = until - kx_now_ms();
		int wait = MHD_get_timeout(S.d, &to) == MHD_YES && (long long)to < left ? (int)to
		                                                                        : (int)left;
		if (poll(&p, 1, wait > 0 ? wait : 0) < 0 && errno != EINTR)
			break;
		MHD_run(S.d);
	}
}

/* A request's end, whatever it was: its state goes. */
static void completed(void *cls, struct MHD_Connection *conn, void **state,
                      enum MHD_RequestTerminationCode why)
{
	req_t *r = *state;
	link_t *l = link_of(conn);
	(void)cls;
	(void)why;
	if (l) { /* the next request's headers are waited for from now */
		l->in_request = false;
		l->since = kx_now_ms();
	}
	if (!r)
		return;
	if (r->sse && S.streams)
		S.streams--;
	/* its connection ended with R still waiting (a stream its client
	 * left while events were on their way, a connection cut off): the
	 * cell is interrupted as for a client gone while it waited */
	if (r->conv && r->key) {
		conv_t *c = r->conv;
		req_unlink(r); /* (first: C's end, if it comes, does not answer R) */
		conv_cancel(c, r->ikey);
	}
	req_unlink(r);
	free(r->body.data);
	free(r->key);
	free(r->reply);
	free(r->token);
	free(r->ev.data);
	free(r);
	*state = NULL;
}

/* ---- the server ---- */

/* Listen on the unix socket S.unix_path, made mode 0600 (the owner
 * only).  A socket file no one listens on (a server that ended without
 * removing it) is replaced; anything else there is refused.  The
 * listening descriptor, or -1 (said). */
static int listen_unix(void)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;
	mode_t old;

	memcpy(un.sun_path, S.unix_path, strlen(S.unix_path));
	if (lstat(S.unix_path, &st) == 0) {
		int probe;
		bool live = true;
		if (!S_ISSOCK(st.st_mode)) {
			say("cannot listen on unix:%s: something other than a socket is there",
			    S.unix_path);
			return -1;
		}
		if ((probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) {
			live = connect(probe, (struct sockaddr *)&un, sizeof un) == 0 ||
			       errno != ECONNREFUSED;
			close(probe);
		}
		if (live) {
			say("cannot listen on unix:%s: a server listens there already",
			    S.unix_path);
			return -1;
		}
		unlink(S.unix_path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		say("cannot listen on unix:%s: %s", S.unix_path, strerror(errno));
		return -1;
	}
	/* 0600 by the umask at the bind, and by a chmod before the listen
	 * (a default ACL of the directory would give more): no connection
	 * can come before the listen */
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&un, sizeof un) < 0 || lstat(S.unix_path, &st) < 0 ||
	    chmod(S.unix_path, 0600) < 0 || listen(fd, 64) < 0) {
		say("cannot listen on unix:%s: %s", S.unix_path, strerror(errno));
		umask(old);
		close(fd);
		return -1;
	}
	umask(old);
	S.unix_dev = st.st_dev;
	S.unix_ino = st.st_ino;
	return fd;
}

/* The server stops: wait for every conversation's kbox mcp, told to end
 * (its input closed, SIGTERM), for STOP_WAIT_MS at most; one still there
 * then is killed, so that the server's end is bounded (its session, whose
 * owner it was, stops by itself then: kbox-mcp(1)).  Each is reaped. */
static void stop_conversations(void)
{
	long long end = kx_now_ms() + STOP_WAIT_MS;
	for (;;) {
		bool left = false;
		for (size_t k = 0; k <= CONV_MAX; k++) {
			conv_t *c = S.convs[k];
			if (!c || c->reaped)
				continue;
			if (waitpid(c->pid, NULL, WNOHANG) != 0)
				c->reaped = true; /* (ended, or none to wait for) */
			else
				left = true;
		}
		if (!left)
			return;
		if (kx_now_ms() >= end)
			break;
		/* what they still write is read meanwhile (a child blocked on a
		 * full pipe would never end; answers go to their requests) */
		{
			struct pollfd fds[CONV_MAX + 1];
			conv_t *owner[CONV_MAX + 1];
			nfds_t n = 0;
			for (size_t k = 0; k <= CONV_MAX; k++)
				if (S.convs[k] && S.convs[k]->out_fd >= 0) {
					fds[n] = (struct pollfd){S.convs[k]->out_fd, POLLIN, 0};
					owner[n++] = S.convs[k];
				}
			if (poll(fds, n, 20) > 0)
				for (nfds_t k = 0; k < n; k++) {
					bool alive = false;
					for (size_t q = 0; q <= CONV_MAX; q++)
						alive |= S.convs[q] == owner[k];
					if (alive && fds[k].revents)
						conv_read(owner[k]);
				}
		}
	}
	for (size_t k = 0; k <= CONV_MAX; k++) {
		conv_t *c = S.convs[k];
		if (!c || c->reaped)
			continue;
		say("a conversation's kbox mcp (pid %ld) did not end within %d s of SIGTERM: "
		    "killed (its session stops by itself)",
		    (long)c->pid, STOP_WAIT_MS / 1000);
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		c->reaped = true;
	}
}

/* Remove the socket file at S.unix_path, if it is still the one bound
 * (a server started there since has its own). */
static void unlink_unix(void)
{
	struct stat st;
	if (S.unix_path[0] && S.unix_ino && lstat(S.unix_path, &st) == 0 &&
	    st.st_dev == S.unix_dev && st.st_ino == S.unix_ino)
		unlink(S.unix_path);
}

/* Parse ADDR:PORT (an IPv4 address, or [IPv6]) into SA; its host as a
 * Host header has it into S.host.  Or unix:PATH, into S.unix_path.  0,
 * or -1 (said). */
static int parse_listen(const char *spec, struct sockaddr_storage *sa, socklen_t *len)
{
	char host[300];
	const char *colon = strrchr(spec, ':');
	char *end;
	unsigned long port;

	if (strncmp(spec, "unix:", 5) == 0) {
		if (!spec[5]) {
			say("invalid --http \"%s\": unix:PATH needs a PATH", spec);
			return -1;
		}
		if (strlen(spec + 5) >= sizeof S.unix_path) {
			say("invalid --http \"%s\": unix:PATH, PATH at most %zu bytes", spec,
			    sizeof S.unix_path - 1);
			return -1;
		}
		snprintf(S.unix_path, sizeof S.unix_path, "%s", spec + 5);
		snprintf(S.host, sizeof S.host, "localhost");
		*len = 0;
		return 0;
	}

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof host) {
		say("invalid --http \"%s\": expected ADDR:PORT, such as 127.0.0.1:8808, or "
		    "unix:PATH",
		    spec);
		return -1;
	}
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || port > 65535) {
		say("invalid --http \"%s\": the port must be a number from 0 to 65535", spec);
		return -1;
	}
	memset(sa, 0, sizeof *sa);
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)sa;
		char in[300];
		snprintf(in, sizeof in, "%.*s", (int)strlen(host) - 2, host + 1);
		if (inet_pton(AF_INET6, in, &s6->sin6_addr) != 1) {
			say("invalid --http \"%s\": %s is not an IPv6 address", spec, in);
			return -1;
		}
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof *s6;
		S.loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
		S.any = IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)sa;
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) {
			say("invalid --http \"%s\": %s is not an IPv4 address (or [an IPv6 one])",
			    spec, host);
			return -1;
		}
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof *s4;
		S.loopback = (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
		S.any = s4->sin_addr.s_addr == htonl(INADDR_ANY);
	}
	snprintf(S.host, sizeof S.host, "%s", host);
	S.port = (unsigned)port;
	return 0;
}

/* ---- the loop ---- */

/* What one turn of the loop polls: libmicrohttpd's epoll set, the
 * signals, and for each conversation its output, its input while some
 * waits to be written, and the connections of the requests that wait in
 * it (a client that goes away while its request waits: the request is
 * cancelled, the cell interrupted).  WHAT[i] says whose FDS[i] is. */
typedef struct {
	struct pollfd fds[POLL_MAX];
	struct {
		conv_t *conv; /* NULL: the epoll set or the signals */
		req_t *req;   /* a waiting request's connection, or NULL */
	} what[POLL_MAX];
	size_t n;
} watch_t;

static void watch(watch_t *w, int fd, short events, conv_t *c, req_t *r)
{
	if (w->n == POLL_MAX)
		return;
	w->fds[w->n] = (struct pollfd){.fd = fd, .events = events};
	w->what[w->n].conv = c;
	w->what[w->n].req = r;
	w->n++;
}

static void watch_all(watch_t *w, int sfd)
{
	const union MHD_DaemonInfo *ep = MHD_get_daemon_info(S.d, MHD_DAEMON_INFO_EPOLL_FD);
	w->n = 0;
	watch(w, ep ? ep->epoll_fd : -1, POLLIN, NULL, NULL);
	watch(w, sfd, POLLIN, NULL, NULL);
	for (size_t k = 0; k <= CONV_MAX; k++) {
		conv_t *c = S.convs[k];
		if (!c || c->ended)
			continue;
		watch(w, c->out_fd, POLLIN, c, NULL);
		if (c->in_fd >= 0 && c->out_off < c->out.len)
			watch(w, c->in_fd, POLLOUT, c, NULL);
		for (req_t *r = c->pending; r; r = r->next) {
			const union MHD_ConnectionInfo *ci;
			if (r->suspended && (ci = MHD_get_connection_info(
			                             r->conn, MHD_CONNECTION_INFO_CONNECTION_FD)))
				watch(w, ci->connect_fd, POLLRDHUP, c, r);
		}
	}
}

/* The conversations unused for S.idle_ms (an hour, or kbox mcp
 * --conversation-idle) end: their kbox mcp stops and removes its session
 * at the end of its input.  *WAIT is cut to when the next one would. */
static void end_idle_conversations(int *wait)
{
	for (size_t k = 0; k <= CONV_MAX; k++) {
		conv_t *c = S.convs[k];
		long long now = kx_now_ms();
		if (!c || c->closing || c->pending || c->deleting)
			continue;
		if (now - c->used >= S.idle_ms) {
			/* (said, so that an operator can tell it from a client's
			 * mistake; the id's head names it) */
			say("the conversation %.8s… ended: no request came for %.1f s "
			    "(--conversation-idle)",
			    c->sid, (double)S.idle_ms / 1000.0);
			c->closing = true;
			conv_flush(c);
		} else if (*wait < 0 || c->used + S.idle_ms - now < *wait)
			*wait = (int)(c->used + S.idle_ms - now);
	}
}

/* Whether C is still a conversation of the server (a handler before may
 * have ended it), and R, when not NULL, still waits in it. */
static bool still_there(const conv_t *c, const req_t *r)
{
	bool alive = false, waiting = r == NULL;
	for (size_t q = 0; q <= CONV_MAX; q++)
		alive |= S.convs[q] == c;
	for (const req_t *p = alive && r ? c->pending : NULL; p; p = p->next)
		waiting |= p == r;
	return alive && waiting;
}

/* What the poll of W found, for the conversations and their requests. */
static void dispatch(const watch_t *w)
{
	for (size_t k = 2; k < w->n; k++) {
		conv_t *c = w->what[k].conv;
		req_t *r = w->what[k].req;
		short got = w->fds[k].revents;
		if (!got || !still_there(c, r))
			continue;
		if (r) {
			if (got & (POLLRDHUP | POLLHUP | POLLERR))
				req_gone(r);
		} else if (w->fds[k].events & POLLOUT)
			conv_flush(c);
		else
			conv_read(c);
	}
}

/* Serve until a signal (SFD, a signalfd) says stop. */
static void serve(int sfd)
{
	static watch_t w;
	bool stopping = false;

	while (!stopping) {
		MHD_UNSIGNED_LONG_LONG to = 0;
		/* at least once a second: libmicrohttpd 0.9.75 takes its
		 * listening socket back into its epoll set (after it had as
		 * many connections as it may) only in a run, and its timeout
		 * does not say when */
		int wait = MHD_get_timeout(S.d, &to) == MHD_YES && to < 1000 ? (int)to : 1000;

		watch_all(&w, sfd);
		cut_late_headers(&wait);
		end_idle_conversations(&wait);
		if (poll(w.fds, w.n, wait) < 0 && errno != EINTR)
			break;
		if (w.fds[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) == sizeof si)
				stopping |= si.ssi_signo != SIGCHLD;
		}
		/* the conversations that ended and whose kbox mcp has exited */
		for (size_t k = 0; k <= CONV_MAX; k++)
			if (S.convs[k])
				conv_reap(S.convs[k]);
		dispatch(&w);
		MHD_run(S.d);
	}
}

/* The end: every conversation ends (its kbox mcp stops and removes its
 * session at the end of its input), what waits is answered, the event
 * streams end, then the daemon. */
static void stop_all(void)
{
	for (size_t k = 0; k <= CONV_MAX; k++)
		if (S.convs[k] && S.convs[k]->in_fd >= 0) {
			close(S.convs[k]->in_fd);
			S.convs[k]->in_fd = -1;
		}
	for (size_t k = 0; k <= CONV_MAX; k++)
		if (S.convs[k] && !S.convs[k]->reaped)
			kill(S.convs[k]->pid, SIGTERM);
	stop_conversations();
	for (size_t k = 0; k <= CONV_MAX; k++)
		if (S.convs[k])
			conv_end(S.convs[k], "the server is stopping");
	drain_streams();
	MHD_stop_daemon(S.d);
	unlink_unix();
}

/* ---- start ---- */

/* The options kbox mcp --http gives (--listen ADDR, --kbox PATH,
 * --idle-ms N, then -- and its own arguments for each conversation's
 * kbox mcp): *LISTEN_AT, and S's.  0, or the exit status. */
static int parse_args(int argc, char **argv, const char **listen_at)
{
	int i;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc)
			*listen_at = argv[++i];
		else if (strcmp(argv[i], "--kbox") == 0 && i + 1 < argc)
			S.kbox = argv[++i];
		else if (strcmp(argv[i], "--idle-ms") == 0 && i + 1 < argc) {
			char *end;
			S.idle_ms = strtoll(argv[++i], &end, 10);
			if (*end || S.idle_ms < 1) {
				say("kbox-mcp-http: --idle-ms %s: a number of milliseconds, 1 or more",
				    argv[i]);
				return 2;
			}
		} else if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else {
			say("kbox-mcp-http: unexpected argument \"%s\" (it is started by kbox mcp "
			    "--http)",
			    argv[i]);
			return 2;
		}
	}
	S.mcp_args = argv + i;
	S.n_mcp_args = (size_t)(argc - i);
	if (!S.idle_ms)
		S.idle_ms = CONV_IDLE_MS;
	return 0;
}

/* The bearer token: TOKEN (the environment's, wiped), or a new one into
 * MADE (printed once the address is taken); only its hash is kept.  0,
 * or the exit status. */
static int take_token(const char *token, char made[49])
{
	if (!token) {
		unsigned char r[24];
		if (getrandom(r, sizeof r, 0) != sizeof r) {
			say("no random bytes for a token: %s", strerror(errno));
			return 5;
		}
		for (size_t k = 0; k < sizeof r; k++)
			snprintf(made + 2 * k, 3, "%02x", r[k]);
		token = made;
	}
	if (sodium_init() < 0)
		return 5;
	crypto_generichash((unsigned char *)S.token_hash, sizeof S.token_hash,
	                   (const unsigned char *)token, strlen(token), NULL, 0);
	if (token != made)
		sodium_memzero((char *)token, strlen(token));
	unsetenv(TOKEN_ENV); /* the conversations' kbox mcp need it not */
	return 0;
}

/* libmicrohttpd's daemon on LFD (a unix socket listened on), or bound to
 * SA.  0, or -1. */
static int start_daemon(int lfd, struct sockaddr_storage *sa)
{
	struct MHD_OptionItem where[2] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
	where[0] = (struct MHD_OptionItem){lfd >= 0 ? MHD_OPTION_LISTEN_SOCKET
	                                            : MHD_OPTION_SOCK_ADDR,
	                                   lfd >= 0 ? lfd : 0, lfd >= 0 ? NULL : (void *)sa};
	S.d = MHD_start_daemon(
	        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, handler, NULL,
	        MHD_OPTION_ARRAY, where, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
	        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL, MHD_OPTION_CONNECTION_LIMIT,
	        (unsigned)CONN_MAX, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
	        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024), MHD_OPTION_END);
	if (!S.d)
		return -1;
	if (S.port == 0 && !S.unix_path[0]) {
		const union MHD_DaemonInfo *di = MHD_get_daemon_info(S.d,
		                                                     MHD_DAEMON_INFO_BIND_PORT);
		S.port = di ? di->port : 0;
	}
	return 0;
}

/* On standard error: the token made (MADE, wiped), where the server
 * listens, and a warning when others can reach it. */
static void say_listening(char made[49])
{
	if (made[0]) {
		fprintf(stderr, PROG ": token: %s\n", made);
		sodium_memzero(made, 49);
	}
	if (S.unix_path[0])
		fprintf(stderr, PROG ": listening on unix:%s (http://localhost/mcp)\n",
		        S.unix_path);
	else
		fprintf(stderr, PROG ": listening on http://%s:%u/mcp\n", S.host, S.port);
	if (!S.unix_path[0] && !S.loopback)
		fprintf(stderr,
		        PROG ": warning: %s is reachable from other machines, over plain HTTP: the "
		             "bearer token and every call can be read on the way; listen on "
		             "127.0.0.1 (or a unix socket) and put a TLS proxy in front\n",
		        S.any ? "every address of this machine" : "this address");
	fflush(stderr);
}

int main(int argc, char **argv)
{
	static char made_token[49];
	const char *listen_at = NULL, *token = getenv(TOKEN_ENV);
	struct sockaddr_storage sa;
	socklen_t salen = 0;
	sigset_t mask;
	int sfd, lfd = -1, rc;

	if ((rc = parse_args(argc, argv, &listen_at)) != 0)
		return rc;
	if (!listen_at || !S.kbox || (token && strlen(token) < 16)) {
		say("kbox-mcp-http is started by kbox mcp --http (it needs --listen, --kbox and, "
		    "when %s is set, a token of 16 characters or more in it)",
		    TOKEN_ENV);
		return 2;
	}
	if ((rc = take_token(token, made_token)) != 0)
		return rc;
	if (parse_listen(listen_at, &sa, &salen) < 0)
		return 2;
	if (S.unix_path[0] && (lfd = listen_unix()) < 0)
		return 5;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* (SIGCHLD too: a conversation's kbox mcp that exits wakes the loop,
	 * which reaps it) */
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || start_daemon(lfd, &sa) < 0) {
		say("cannot listen on %s: %s", listen_at, strerror(errno));
		unlink_unix();
		return 5;
	}
	say_listening(made_token);
	serve(sfd);
	stop_all();
	return 0;
}
