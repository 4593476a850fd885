/* src/gateway/gw.c — gw.h: a Jupyter server's REST API and a kernel's
 * channels over its WebSocket. */
#include "config.h"
#include "gateway/gw.h"
#include "common/kx.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <wslay/wslay.h>

#define CONNECT_TIMEOUT_S 20
/* The most an upgrade's reply head may be. */
#define MAX_HEAD 16384
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
/* What one pump reads at most (then the caller's loop turns: its other
 * descriptors, its signals), and the most that may wait to be sent (a
 * server that sends pings and reads nothing fills it with pongs): over
 * it, the connection is over. */
#define RECV_BUDGET (1u << 20)
#define SEND_QUEUED_MAX (64u << 20)
#define SEND_QUEUED_MSGS 65536 /* (pongs: a few bytes each, ~100 held) */

const char *gw_kind_name(gw_kind_t kind)
{
	static const char *const names[] = {"none", "no-server", "denied", "not-found",
	                                    "tls",  "usage",     "server", "no-contents"};
	return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "server";
}

int gw_error(gw_error_t *err, gw_kind_t kind, const char *fmt, ...)
{
	va_list ap;
	if (!err)
		return -1;
	err->kind = kind;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	return -1;
}

struct gw {
	char *base; /* without a trailing '/' */
	char *auth; /* "Authorization: token T", or NULL */
	char *ca;   /* NULL: the system's */
	CURL *curl; /* REST calls, one at a time */
	char scheme[8], host[256];
	long port;
	char path[1024];           /* the base's path, without a trailing '/' */
	bool (*cancel)(void *arg); /* gw_set_cancel */
	void *cancel_arg;
	int (*watch)(void *arg, gw_error_t *err); /* gw_set_watch */
	void *watch_arg;
	size_t max_body; /* gw_set_max_body */
};

void gw_set_max_body(gw_t *self, size_t max)
{
	self->max_body = max ? max : GW_MAX_BODY;
}

void gw_set_watch(gw_t *self, int (*watch)(void *arg, gw_error_t *err), void *arg)
{
	self->watch = watch;
	self->watch_arg = arg;
}

void gw_set_cancel(gw_t *self, bool (*cancel)(void *arg), void *arg)
{
	self->cancel = cancel;
	self->cancel_arg = arg;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	gw_t *g = arg;
	(void)a, (void)b, (void)c, (void)d;
	return g->cancel && g->cancel(g->cancel_arg) ? 1 : 0;
}

static bool curl_ready(void)
{
	static int done;
	if (!done)
		done = curl_global_init(CURL_GLOBAL_DEFAULT) == 0 ? 1 : -1;
	return done > 0;
}

gw_t *gw_new(const char *url, const char *token, const char *ca_file, gw_error_t *err)
{
	CURLU *u = NULL;
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL, *user = NULL;
	bool bare6;
	gw_t *g = NULL;
	size_t n;

	if (!curl_ready()) {
		gw_error(err, GW_E_USAGE, "libcurl cannot start");
		return NULL;
	}
	if (!(u = curl_url()) || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
		gw_error(err, GW_E_USAGE, "the server's URL is not a URL");
		goto out;
	}
	curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
	curl_url_get(u, CURLUPART_HOST, &host, 0);
	curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
	curl_url_get(u, CURLUPART_PATH, &path, 0);
	curl_url_get(u, CURLUPART_QUERY, &query, 0);
	curl_url_get(u, CURLUPART_USER, &user, 0);
	if (!scheme || (strcmp(scheme, "http") && strcmp(scheme, "https"))) {
		gw_error(err, GW_E_USAGE, "%s: the URL must be http:// or https://", url);
		goto out;
	}
	if (query || user) {
		gw_error(err, GW_E_USAGE,
		         "the server's URL may have no query and no user (give the token with "
		         "--token-file or --token-env: a token in a URL ends up in logs)");
		goto out;
	}
	if (!host || !port || strlen(host) >= sizeof g->host ||
	    (path && strlen(path) >= sizeof g->path)) {
		gw_error(err, GW_E_USAGE, "%s: no host, or too long", url);
		goto out;
	}
	if (!(g = calloc(1, sizeof *g)) || !(g->curl = curl_easy_init()))
		goto nomem;
	g->max_body = GW_MAX_BODY;
	snprintf(g->scheme, sizeof g->scheme, "%s", scheme);
	snprintf(g->host, sizeof g->host, "%s", host);
	g->port = strtol(port, NULL, 10);
	snprintf(g->path, sizeof g->path, "%s", path ? path : "");
	n = strlen(g->path);
	while (n && g->path[n - 1] == '/')
		g->path[--n] = '\0';
	/* (an IPv6 host keeps its brackets in a URL: curl gives them) */
	bare6 = strchr(host, ':') && host[0] != '[';
	if (asprintf(&g->base, "%s://%s%s%s:%ld%s", g->scheme, bare6 ? "[" : "", host,
	             bare6 ? "]" : "", g->port, g->path) < 0) {
		g->base = NULL;
		goto nomem;
	}
	if (token && *token) {
		if (strpbrk(token, "\r\n")) {
			gw_error(err, GW_E_USAGE, "the token has a line break in it");
			goto fail;
		}
		if (asprintf(&g->auth, "Authorization: token %s", token) < 0) {
			g->auth = NULL;
			goto nomem;
		}
	}
	if (ca_file && *ca_file && !(g->ca = strdup(ca_file)))
		goto nomem;
	goto out;
nomem:
	gw_error(err, GW_E_USAGE, "out of memory");
fail:
	gw_destroy(&g);
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(query);
	curl_free(user);
	curl_url_cleanup(u);
	return g;
}

void gw_destroy(gw_t **self_p)
{
	gw_t *g = self_p ? *self_p : NULL;
	if (!g)
		return;
	if (g->curl)
		curl_easy_cleanup(g->curl);
	free(g->base);
	if (g->auth) {
		explicit_bzero(g->auth, strlen(g->auth));
		free(g->auth);
	}
	free(g->ca);
	free(g);
	*self_p = NULL;
}

const char *gw_url(const gw_t *self)
{
	return self->base;
}

/* libcurl's options every connection of SELF's has: TLS verified (the CA
 * file's), no redirect (the token would follow it), http(s) only. */
static void common_opts(gw_t *self, CURL *c, long timeout_s)
{
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (self->cancel) {
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, self);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	}
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	if (self->ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, self->ca);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
}

/* libcurl's failure CODE (ERRBUF its words) as an error of SELF's. */
static int curl_failed(gw_t *self, CURLcode code, const char *errbuf, gw_error_t *err)
{
	const char *why = errbuf && *errbuf ? errbuf : curl_easy_strerror(code);
	switch (code) {
	case CURLE_ABORTED_BY_CALLBACK:
		return gw_error(err, GW_E_USAGE,
		                "stopped while waiting for the Jupyter server at %s", self->base);
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
		return gw_error(err, GW_E_NO_SERVER, "cannot reach the Jupyter server at %s: %s",
		                self->base, why);
	case CURLE_SSL_CACERT_BADFILE:
		/* (the CA file itself: giving one is not the remedy) */
		return gw_error(err, GW_E_TLS,
		                "the Jupyter server at %s: TLS failed: the CA file %s cannot be "
		                "used: %s",
		                self->base, self->ca ? self->ca : "of the system", why);
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
		if (self->ca)
			return gw_error(
			        err, GW_E_TLS,
			        "the Jupyter server at %s: TLS failed: %s (with the CA file "
			        "%s)",
			        self->base, why, self->ca);
		return gw_error(err, GW_E_TLS,
		                "the Jupyter server at %s: TLS failed: %s (give its CA with "
		                "--ca-file)",
		                self->base, why);
	default:
		return gw_error(err, GW_E_SERVER, "the Jupyter server at %s: %s", self->base, why);
	}
}

typedef struct {
	kx_buf_t b;
	size_t max;
	bool over;
} body_t;

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	body_t *body = arg;
	if (body->b.len + n > body->max) {
		body->over = true;
		return 0;
	}
	return kx_buf_append(&body->b, data, n) < 0 ? 0 : n;
	(void)size;
}

long gw_call(gw_t *self, const char *method, const char *path, json_t *body, long timeout_s,
             json_t **out, gw_error_t *err)
{
	struct curl_slist *h = NULL;
	char url[16384], errbuf[CURL_ERROR_SIZE] = "", *text = NULL;
	body_t reply = {.max = self->max_body};
	long code = -1;
	CURLcode rc;
	CURL *c = self->curl;

	*out = NULL;
	if ((size_t)snprintf(url, sizeof url, "%s%s", self->base, path) >= sizeof url)
		return gw_error(err, GW_E_USAGE, "%s %s: the URL is too long", method, path);
	curl_easy_reset(c);
	common_opts(self, c, timeout_s);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
	if (self->auth)
		h = curl_slist_append(h, self->auth);
	if (body) {
		if (!(text = json_dumps(body, JSON_COMPACT))) {
			gw_error(err, GW_E_USAGE, "out of memory");
			goto out;
		}
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
	} else if (strcmp(method, "POST") == 0)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	else if (strcmp(method, "GET") == 0)
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	rc = curl_easy_perform(c);
	if (reply.over) {
		gw_error(err, GW_E_SERVER, "the Jupyter server at %s: %s %s: a reply over %zu MiB",
		         self->base, method, path, self->max_body >> 20);
		goto out;
	}
	if (rc != CURLE_OK) {
		curl_failed(self, rc, errbuf, err);
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 300 && code < 400) {
		/* (said as the server's message: gw_reply_error shows it) */
		char *to = NULL, said[1200];
		curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &to);
		snprintf(said, sizeof said,
		         "a redirect to %.1000s, which kbox does not follow (the token would go "
		         "with it): give that URL with --url",
		         to ? to : "another URL");
		*out = json_pack("{s:s}", "message", said);
	} else if (reply.b.len && kx_json_cost(reply.b.data, reply.b.len) <= 16 * self->max_body) {
		/* (Python's json, jupyter_server's, writes a file name that is
		 * not UTF-8 with lone surrogates, "\udcff": os.fsdecode's
		 * surrogateescape, which jansson refuses, and with them the
		 * whole reply) */
		kx_json_lone_surrogates(reply.b.data, reply.b.len);
		*out = json_loadb(reply.b.data, reply.b.len, 0, NULL);
	}
out:
	/* (the token is in H's strings) */
	for (struct curl_slist *p = h; p; p = p->next)
		explicit_bzero(p->data, strlen(p->data));
	curl_slist_free_all(h);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	free(text);
	kx_buf_reset(&reply.b);
	return code;
}

typedef struct {
	CURL *c;
	int fd;
	long long want, got;
	bool begun, other;
	int wrote_errno;
} to_fd_t;

static size_t on_body_to_fd(char *data, size_t size, size_t n, void *arg)
{
	to_fd_t *t = arg;
	if (!t->begun) { /* a 200 that says it is WANT bytes, if it says */
		long code = 0;
		curl_off_t length = -1;
		t->begun = true;
		curl_easy_getinfo(t->c, CURLINFO_RESPONSE_CODE, &code);
		curl_easy_getinfo(t->c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
		t->other = code != 200 || (length >= 0 && length != t->want);
	}
	if (t->other || (long long)n > t->want - t->got) {
		t->other = true;
		return 0;
	}
	if (kx_write_all(t->fd, data, n) < 0) {
		t->wrote_errno = errno ? errno : EIO;
		return 0;
	}
	t->got += (long long)n;
	return n;
	(void)size;
}

long gw_get_to_fd(gw_t *self, const char *path, long timeout_s, int fd, long long want,
                  const char *shown, long long *got, bool *other, gw_error_t *err)
{
	struct curl_slist *h = NULL;
	char url[16384], errbuf[CURL_ERROR_SIZE] = "";
	to_fd_t t = {.c = self->curl, .fd = fd, .want = want};
	long code = 0;
	CURLcode rc;
	CURL *c = self->curl;

	*got = 0;
	*other = false;
	if ((size_t)snprintf(url, sizeof url, "%s%s", self->base, path) >= sizeof url)
		return gw_error(err, GW_E_USAGE, "GET %s: the URL is too long", path);
	curl_easy_reset(c);
	common_opts(self, c, timeout_s);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body_to_fd);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
	if (self->auth)
		h = curl_slist_append(h, self->auth);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	*got = t.got;
	if (t.wrote_errno) {
		code = gw_error(err, GW_E_USAGE, "writing %s here: %s", shown,
		                strerror(t.wrote_errno));
	} else if (rc != CURLE_OK && code > 0 && rc != CURLE_ABORTED_BY_CALLBACK &&
	           rc != CURLE_OPERATION_TIMEDOUT) {
		/* the server answered, but not with the body whole: stopped
		 * here, or cut short there (a file that shrank as it was sent) */
		t.other = true;
	} else if (rc != CURLE_OK)
		code = curl_failed(self, rc, errbuf, err);
	*other = t.other;
	/* (the token is in H's strings) */
	for (struct curl_slist *p = h; p; p = p->next)
		explicit_bzero(p->data, strlen(p->data));
	curl_slist_free_all(h);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	return code;
}

int gw_reply_error(const gw_t *self, gw_error_t *err, const char *what, long code,
                   const json_t *body)
{
	const char *m = json_string_value(json_object_get(body, "message"));
	const char *r = json_string_value(json_object_get(body, "reason"));
	char said[600];
	gw_kind_t kind = code == 401 || code == 403 ? GW_E_DENIED
	                 : code == 404              ? GW_E_NOT_FOUND
	                                            : GW_E_SERVER;
	/* (jupyter_server says an unknown kernelspec with a 500 and the
	 * traceback of NoSuchKernel) */
	if (m && strstr(m, "No such kernel"))
		kind = GW_E_NOT_FOUND;
	/* (and a file it may not write with a 403, as a refused token:
	 * perm_to_403's "Permission denied: PATH") */
	if (code == 403 && m && strncmp(m, "Permission denied", 17) == 0)
		kind = GW_E_SERVER;
	if (m && *m)
		kx_fmt_middle(said, sizeof said, m, 500);
	else if (r && *r)
		kx_fmt_middle(said, sizeof said, r, 500);
	else
		said[0] = '\0';
	/* (no token sent: none was refused; review 23, P4) */
	if (kind == GW_E_DENIED && !self->auth)
		return gw_error(err, kind,
		                "%s: the Jupyter server requires a token and none was given "
		                "(--token-file, --token-env or KBOX_GATEWAY_TOKEN; HTTP %ld%s%s)",
		                what, code, *said ? ": " : "", said);
	if (kind == GW_E_DENIED)
		return gw_error(err, kind,
		                "%s: the Jupyter server refused the token (HTTP %ld%s%s): give its "
		                "token with kbox start --token-file or --token-env",
		                what, code, *said ? ": " : "", said);
	return gw_error(err, kind, "%s: HTTP %ld%s%s", what, code, *said ? ": " : "", said);
}

/* ---- the channels ---- */

struct gw_ws {
	CURL *curl;
	curl_socket_t fd;
	wslay_event_context_ptr ctx;
	bool v1, over;
	uint64_t max_msg; /* the largest message taken */
	/* bytes read in this pump, against RECV_BUDGET; more may wait */
	size_t got;
	bool more;
	char why[256];
	/* what came after the upgrade's reply head, read before the socket */
	uint8_t *pre;
	size_t pre_len, pre_off;
	gw_ws_msg_fn *fn;
	void *arg;
};

/* Wait until FD is readable (WRITE: writable), at most until DEADLINE
 * (kx_now_ms).  0, or -1 with errno: ETIMEDOUT when the time is over,
 * ECANCELED when G's cancel said so. */
static int wait_fd(gw_t *g, int fd, bool write, long long deadline)
{
	struct pollfd p = {fd, write ? POLLOUT : POLLIN, 0};
	long long left;
	while ((left = deadline - kx_now_ms()) > 0) {
		int r = poll(&p, 1, (int)(left > 200 ? 200 : left));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (g->cancel && g->cancel(g->cancel_arg)) {
			errno = ECANCELED;
			return -1;
		}
	}
	errno = ETIMEDOUT;
	return -1;
}

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	gw_ws_t *w = user;
	size_t got = 0;
	CURLcode rc;
	(void)flags;
	if (w->got >= RECV_BUDGET) {
		w->more = true;
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (w->pre_off < w->pre_len) {
		got = w->pre_len - w->pre_off < len ? w->pre_len - w->pre_off : len;
		memcpy(buf, w->pre + w->pre_off, got);
		w->pre_off += got;
		w->got += got;
		return (ssize_t)got;
	}
	if (len > RECV_BUDGET - w->got)
		len = RECV_BUDGET - w->got;
	rc = curl_easy_recv(w->curl, buf, len, &got);
	/* acknowledge at once what came (tcp(7): the flag does not stay):
	 * Jupyter Server's WebSocket does not turn Nagle's algorithm off, so
	 * its next small message waits for our ACK, which Linux would delay
	 * by up to 40 ms */
	setsockopt(w->fd, IPPROTO_TCP, TCP_QUICKACK, &(int){1}, sizeof(int));
	if (rc == CURLE_AGAIN) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (rc != CURLE_OK || got == 0) {
		snprintf(w->why, sizeof w->why, "%s",
		         rc != CURLE_OK ? curl_easy_strerror(rc)
		                        : "the server closed the connection");
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	w->got += got;
	return (ssize_t)got;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
	gw_ws_t *w = user;
	size_t sent = 0;
	CURLcode rc;
	(void)flags;
	rc = curl_easy_send(w->curl, data, len, &sent);
	if (rc == CURLE_AGAIN) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (rc != CURLE_OK) {
		snprintf(w->why, sizeof w->why, "%s", curl_easy_strerror(rc));
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return (ssize_t)sent;
}

static int ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
	(void)ctx;
	(void)user;
	return getrandom(buf, len, 0) == (ssize_t)len ? 0 : -1;
}

static void ws_on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a,
                      void *user)
{
	gw_ws_t *w = user;
	(void)ctx;
	if (a->opcode == WSLAY_TEXT_FRAME || a->opcode == WSLAY_BINARY_FRAME)
		w->fn(w->arg, a->opcode, a->msg, a->msg_length);
	else if (a->opcode == WSLAY_CONNECTION_CLOSE && !w->why[0])
		snprintf(w->why, sizeof w->why, "the server closed the channels (code %u)",
		         (unsigned)a->status_code);
}

/* Send all of DATA over W's connection before DEADLINE.  0 or -1. */
static int send_all(gw_t *g, gw_ws_t *w, const char *data, size_t len, long long deadline)
{
	size_t off = 0, n;
	while (off < len) {
		CURLcode rc = curl_easy_send(w->curl, data + off, len - off, &n);
		if (rc == CURLE_AGAIN) {
			if (wait_fd(g, w->fd, true, deadline) < 0)
				return -1;
			continue;
		}
		if (rc != CURLE_OK)
			return -1;
		off += n;
	}
	return 0;
}

/* The value of header NAME in the reply head HEAD (lines after the
 * status line), into OUT; false when it has none. */
static bool head_value(const char *head, const char *name, char *out, size_t size)
{
	size_t nl = strlen(name);
	for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2, *end = strstr(line, "\r\n");
		if (!end || end == line)
			return false;
		if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			const char *v = line + nl + 1;
			size_t len;
			while (*v == ' ' || *v == '\t')
				v++;
			len = (size_t)(end - v);
			while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
				len--;
			if (len >= size)
				len = size - 1;
			memcpy(out, v, len);
			out[len] = '\0';
			return true;
		}
	}
	return false;
}

/* base64(SHA-1(KEY GUID)), RFC 6455's Sec-WebSocket-Accept, into OUT. */
static bool accept_value(const char *key, char *out, size_t size)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char in[128];
	size_t len;
	char *b64;
	int n = snprintf(in, sizeof in, "%s" WS_GUID, key);
	if (n < 0 || (size_t)n >= sizeof in ||
	    !EVP_Digest(in, (size_t)n, md, &mdlen, EVP_sha1(), NULL) ||
	    !(b64 = kx_base64_encode(md, mdlen, &len)))
		return false;
	snprintf(out, size, "%s", b64);
	free(b64);
	return len < size;
}

gw_ws_t *gw_ws_connect(gw_t *self, const char *id, const char *session, bool legacy, long timeout_s,
                       uint64_t max_msg, gw_ws_msg_fn *fn, void *arg, gw_error_t *err)
{
	struct wslay_event_callbacks cb = {ws_recv, ws_send, ws_genmask, NULL,
	                                   NULL,    NULL,    ws_on_msg};
	char url[2048], errbuf[CURL_ERROR_SIZE] = "", key[32], want[64], got[128], status[16] = "";
	unsigned char nonce[16];
	char *key64 = NULL, *head = NULL;
	long long deadline = kx_now_ms() + timeout_s * 1000;
	kx_buf_t req = KX_BUF_INIT;
	size_t used = 0, n;
	gw_ws_t *w;
	CURLcode rc;

	if (!(w = calloc(1, sizeof *w)) || !(w->curl = curl_easy_init()) ||
	    !(head = malloc(MAX_HEAD + 1))) {
		gw_error(err, GW_E_USAGE, "out of memory");
		goto fail;
	}
	w->fn = fn;
	w->arg = arg;
	snprintf(url, sizeof url, "%s/api/kernels/%s/channels?session_id=%s", self->base, id,
	         session);
	common_opts(self, w->curl, timeout_s);
	curl_easy_setopt(w->curl, CURLOPT_TIMEOUT, 0L);
	curl_easy_setopt(w->curl, CURLOPT_URL, url);
	curl_easy_setopt(w->curl, CURLOPT_CONNECT_ONLY, 1L);
	/* (the upgrade is HTTP/1.1's: an https server would offer h2) */
	curl_easy_setopt(w->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(w->curl, CURLOPT_ERRORBUFFER, errbuf);
	if ((rc = curl_easy_perform(w->curl)) != CURLE_OK) {
		curl_failed(self, rc, errbuf, err);
		goto fail;
	}
	if (curl_easy_getinfo(w->curl, CURLINFO_ACTIVESOCKET, &w->fd) != CURLE_OK ||
	    w->fd == CURL_SOCKET_BAD) {
		gw_error(err, GW_E_SERVER, "the Jupyter server at %s: no socket", self->base);
		goto fail;
	}
	/* the upgrade (RFC 6455, 4.1) */
	if (getrandom(nonce, sizeof nonce, 0) != sizeof nonce ||
	    !(key64 = kx_base64_encode(nonce, sizeof nonce, &n)) || n >= sizeof key) {
		gw_error(err, GW_E_USAGE, "no random numbers");
		goto fail;
	}
	snprintf(key, sizeof key, "%s", key64);
	kx_buf_appendf(&req,
	               "GET %s/api/kernels/%s/channels?session_id=%s HTTP/1.1\r\n"
	               "Host: %s%s%s:%ld\r\n"
	               "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n",
	               self->path, id, session,
	               strchr(self->host, ':') && self->host[0] != '[' ? "[" : "", self->host,
	               strchr(self->host, ':') && self->host[0] != '[' ? "]" : "", self->port, key);
	if (!legacy)
		kx_buf_appends(&req, "Sec-WebSocket-Protocol: " GW_PROTO_V1 "\r\n");
	if (self->auth)
		kx_buf_appendf(&req, "%s\r\n", self->auth);
	kx_buf_appends(&req, "\r\n");
	if (req.failed || send_all(self, w, req.data, req.len, deadline) < 0) {
		if (!req.failed && errno == ECANCELED)
			gw_error(err, GW_E_USAGE,
			         "stopped while waiting for the Jupyter server to "
			         "open the kernel's channels");
		else
			gw_error(
			        err, GW_E_NO_SERVER,
			        "cannot reach the Jupyter server at %s: the upgrade could not be sent",
			        self->base);
		goto fail;
	}
	/* its reply's head */
	for (;;) {
		char *end;
		rc = curl_easy_recv(w->curl, head + used, MAX_HEAD - used, &n);
		if (rc == CURLE_AGAIN) {
			long long slice = self->watch ? kx_now_ms() + GW_WATCH_MS : deadline;
			if (wait_fd(self, w->fd, false, slice < deadline ? slice : deadline) < 0) {
				if (errno == ETIMEDOUT && slice < deadline) {
					if (self->watch(self->watch_arg, err) < 0)
						goto fail;
					continue;
				}
				if (errno == ECANCELED)
					gw_error(err, GW_E_USAGE,
					         "stopped while waiting for the Jupyter "
					         "server to open the kernel's channels");
				else
					gw_error(
					        err, GW_E_NO_SERVER,
					        "the Jupyter server at %s did not open the kernel's "
					        "channels within %ld s",
					        self->base, timeout_s);
				goto fail;
			}
			continue;
		}
		if (rc != CURLE_OK || n == 0) {
			gw_error(
			        err, GW_E_NO_SERVER,
			        "the Jupyter server at %s closed the connection before opening the "
			        "kernel's channels",
			        self->base);
			goto fail;
		}
		used += n;
		head[used] = '\0';
		if ((end = strstr(head, "\r\n\r\n"))) {
			size_t hl = (size_t)(end - head) + 4;
			if (used > hl) {
				if (!(w->pre = malloc(used - hl)))
					goto nomem;
				memcpy(w->pre, head + hl, used - hl);
				w->pre_len = used - hl;
			}
			end[2] = '\0';
			break;
		}
		if (used == MAX_HEAD) {
			gw_error(err, GW_E_SERVER,
			         "the Jupyter server at %s: a reply head over %d bytes", self->base,
			         MAX_HEAD);
			goto fail;
		}
	}
	if (sscanf(head, "HTTP/1.%*c %15s", status) != 1 || strcmp(status, "101") != 0) {
		long code = strtol(status, NULL, 10);
		char what[256];
		snprintf(what, sizeof what, "the kernel's channels at %s", self->base);
		if (code == 401 || code == 403 || code == 404)
			gw_reply_error(self, err, what, code, NULL);
		else
			gw_error(err, GW_E_SERVER, "%s: HTTP %s instead of a WebSocket", what,
			         status);
		goto fail;
	}
	if (!head_value(head, "Upgrade", got, sizeof got) || strcasecmp(got, "websocket") != 0 ||
	    !head_value(head, "Connection", got, sizeof got) || !strcasestr(got, "upgrade")) {
		gw_error(err, GW_E_SERVER,
		         "the Jupyter server at %s: its 101 reply lacks \"Upgrade: websocket\" or "
		         "\"Connection: Upgrade\"",
		         self->base);
		goto fail;
	}
	if (!accept_value(key, want, sizeof want) ||
	    !head_value(head, "Sec-WebSocket-Accept", got, sizeof got) || strcmp(want, got)) {
		gw_error(err, GW_E_SERVER,
		         "the Jupyter server at %s: the WebSocket upgrade's Sec-WebSocket-Accept "
		         "is wrong",
		         self->base);
		goto fail;
	}
	w->v1 = head_value(head, "Sec-WebSocket-Protocol", got, sizeof got) &&
	        strcmp(got, GW_PROTO_V1) == 0;
	if ((legacy || !w->v1) && head_value(head, "Sec-WebSocket-Protocol", got, sizeof got)) {
		gw_error(err, GW_E_SERVER,
		         "the Jupyter server at %s chose a subprotocol it was not offered",
		         self->base);
		goto fail;
	}
	if (wslay_event_context_client_init(&w->ctx, &cb, w) != 0)
		goto nomem;
	wslay_event_config_set_max_recv_msg_length(w->ctx, max_msg);
	w->max_msg = max_msg;
	goto out;
nomem:
	gw_error(err, GW_E_USAGE, "out of memory");
fail:
	gw_ws_destroy(&w);
out:
	if (req.data)
		explicit_bzero(req.data, req.len);
	kx_buf_reset(&req);
	free(key64);
	free(head);
	return w;
}

void gw_ws_destroy(gw_ws_t **self_p)
{
	gw_ws_t *w = self_p ? *self_p : NULL;
	if (!w)
		return;
	if (w->ctx)
		wslay_event_context_free(w->ctx);
	if (w->curl)
		curl_easy_cleanup(w->curl);
	free(w->pre);
	free(w);
	*self_p = NULL;
}

bool gw_ws_v1(const gw_ws_t *self)
{
	return self->v1;
}

int gw_ws_fd(const gw_ws_t *self)
{
	return (int)self->fd;
}

bool gw_ws_want_write(const gw_ws_t *self)
{
	return !self->over && wslay_event_want_write(self->ctx);
}

bool gw_ws_more(const gw_ws_t *self)
{
	return !self->over && (self->more || self->pre_off < self->pre_len);
}

int gw_ws_pump(gw_ws_t *self, char *why, size_t size)
{
	self->got = 0;
	self->more = false;
	if (!self->over) {
		/* (what came with the head first: poll would not say it is there) */
		if ((wslay_event_want_read(self->ctx) && wslay_event_recv(self->ctx) != 0) ||
		    (wslay_event_want_write(self->ctx) && wslay_event_send(self->ctx) != 0))
			self->over = true;
		if (!wslay_event_want_read(self->ctx) && !wslay_event_want_write(self->ctx))
			self->over = true;
		if (!self->over &&
		    (wslay_event_get_queued_msg_length(self->ctx) > SEND_QUEUED_MAX ||
		     wslay_event_get_queued_msg_count(self->ctx) > SEND_QUEUED_MSGS)) {
			if (wslay_event_get_queued_msg_length(self->ctx) > SEND_QUEUED_MAX)
				snprintf(self->why, sizeof self->why,
				         "the server does not read what is sent to it (over %u MiB "
				         "waits)",
				         SEND_QUEUED_MAX >> 20);
			else
				snprintf(self->why, sizeof self->why,
				         "the server does not read what is sent to it (over %d "
				         "messages wait)",
				         SEND_QUEUED_MSGS);
			self->over = true;
		}
	}
	if (self->over && !self->why[0]) {
		/* (what the close says, ours or the server's) */
		uint16_t sent = wslay_event_get_close_sent(self->ctx)
		                        ? wslay_event_get_status_code_sent(self->ctx)
		                        : 0;
		uint16_t got = wslay_event_get_close_received(self->ctx)
		                       ? wslay_event_get_status_code_received(self->ctx)
		                       : 0;
		if (sent == WSLAY_CODE_MESSAGE_TOO_BIG)
			snprintf(self->why, sizeof self->why,
			         "the server sent a message over %llu MiB, the most one may have "
			         "(closed with 1009)",
			         (unsigned long long)(self->max_msg >> 20));
		else if (sent == WSLAY_CODE_PROTOCOL_ERROR ||
		         sent == WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA)
			snprintf(self->why, sizeof self->why,
			         "the server broke the WebSocket protocol (closed with %u)", sent);
		else if (got && got != WSLAY_CODE_NO_STATUS_RCVD)
			snprintf(self->why, sizeof self->why,
			         "the server closed the connection (code %u)", got);
	}
	if (self->over) {
		snprintf(why, size, "%s", self->why[0] ? self->why : "the connection ended");
		return -1;
	}
	return 0;
}

int gw_ws_send(gw_ws_t *self, int opcode, const void *data, size_t len)
{
	struct wslay_event_msg m = {(uint8_t)opcode, data, len};
	if (self->over || wslay_event_queue_msg(self->ctx, &m) != 0)
		return -1;
	return 0;
}

size_t gw_ws_queued(const gw_ws_t *self)
{
	return wslay_event_get_queued_msg_length(self->ctx);
}

void gw_ws_close(gw_ws_t *self)
{
	if (!self->over)
		wslay_event_queue_close(self->ctx, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0);
}

/* ---- the framings ---- */

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

int gw_v1_split(const uint8_t *data, size_t len, gw_part_t *channel, gw_part_t *parts,
                size_t max_parts)
{
	uint64_t count, prev, off;
	if (len < 8)
		return -1;
	count = get_le64(data);
	/* the channel's two offsets, and four parts at least */
	if (count < 6 || count - 2 > max_parts || count > (len - 8) / 8)
		return -1;
	prev = get_le64(data + 8);
	if (prev != 8 * (count + 1) || prev > len)
		return -1;
	for (uint64_t i = 1; i < count; i++) {
		off = get_le64(data + 8 + 8 * i);
		if (off < prev || off > len)
			return -1;
		gw_part_t p = {data + prev, (size_t)(off - prev)};
		if (i == 1)
			*channel = p;
		else
			parts[i - 2] = p;
		prev = off;
	}
	if (prev != len)
		return -1;
	return (int)(count - 2);
}

uint8_t *gw_v1_join(const char *channel, const gw_part_t *parts, size_t n, size_t *len)
{
	size_t count = n + 2, head = 8 * (count + 1), total = head + strlen(channel), off;
	uint8_t *out, *p;
	for (size_t i = 0; i < n; i++)
		total += parts[i].len;
	if (!(out = malloc(total ? total : 1)))
		return NULL;
	put_le64(out, count);
	put_le64(out + 8, head);
	off = head + strlen(channel);
	put_le64(out + 16, off);
	for (size_t i = 0; i < n; i++) {
		off += parts[i].len;
		put_le64(out + 24 + 8 * i, off);
	}
	p = out + head;
	memcpy(p, channel, strlen(channel));
	p += strlen(channel);
	for (size_t i = 0; i < n; i++) {
		if (parts[i].len)
			memcpy(p, parts[i].data, parts[i].len);
		p += parts[i].len;
	}
	*len = total;
	return out;
}

int gw_legacy_split(const uint8_t *data, size_t len, gw_part_t *json, gw_part_t *bufs,
                    size_t max_bufs)
{
	uint32_t nbufs, prev, off;
	if (len < 8)
		return -1;
	nbufs = get_be32(data);
	if (nbufs < 1 || nbufs - 1 > max_bufs || nbufs > (len - 4) / 4)
		return -1;
	prev = get_be32(data + 4);
	if (prev != 4 * (nbufs + 1) || prev > len)
		return -1;
	for (uint32_t i = 0; i < nbufs; i++) {
		off = i + 1 < nbufs ? get_be32(data + 8 + 4 * i) : (uint32_t)len;
		if (off < prev || off > len)
			return -1;
		gw_part_t p = {data + prev, off - prev};
		if (i == 0)
			*json = p;
		else
			bufs[i - 1] = p;
		prev = off;
	}
	return (int)(nbufs - 1);
}

uint8_t *gw_legacy_join(const gw_part_t *json, const gw_part_t *bufs, size_t n, size_t *len)
{
	size_t nbufs = n + 1, head = 4 * (nbufs + 1), total = head + json->len, off;
	uint8_t *out, *p;
	for (size_t i = 0; i < n; i++)
		total += bufs[i].len;
	if (total > UINT32_MAX || !(out = malloc(total)))
		return NULL;
	put_be32(out, (uint32_t)nbufs);
	off = head;
	put_be32(out + 4, (uint32_t)off);
	off += json->len;
	for (size_t i = 0; i + 1 < nbufs; i++) {
		put_be32(out + 8 + 4 * i, (uint32_t)off);
		off += bufs[i].len;
	}
	p = out + head;
	memcpy(p, json->data, json->len);
	p += json->len;
	for (size_t i = 0; i < n; i++) {
		memcpy(p, bufs[i].data, bufs[i].len);
		p += bufs[i].len;
	}
	*len = total;
	return out;
}
