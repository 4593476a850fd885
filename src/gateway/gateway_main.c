/* src/gateway/gateway_main.c — kbox-gateway: a session's kernel on a
 * remote Jupyter server (gateway_proto.h).  `run` starts the kernel over
 * REST, connects its channels over the WebSocket, and binds the sockets
 * of the connection file the supervisor gave it, as a kernel would: the
 * supervisor talks to it as to any kernel of its own, and each message is
 * passed on, checked and signed again with the supervisor's key (the
 * remote kernel's key is the server's, and never comes here).
 *
 * Bounded: a message of the server's over MAX_MSG closes the connection
 * (then opened again); what the supervisor sends waits in libzmq's queues
 * while the connection is down, and is not read while the WebSocket's
 * own queue holds more than SEND_QUEUE_MAX; the server is not read while
 * IOPUB_HWM of its iopub messages wait for the supervisor (none is
 * dropped for want of room). */
#include "config.h"
#include "gateway/gateway_proto.h"
#include "gateway/gateway_int.h"
#include "gateway/gw.h"
#include "common/kx.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <kbox/conn.h>
#include <kbox/error.h>
#include <kbox/client.h>
#include <kbox/wire.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_MSG ((uint64_t)KBOX_MAX_MESSAGE_BYTES) /* a server's message (the client's bound) */
#define LEGACY_COST_MAX (256u << 20) /* what decoding a legacy text message may take */
#define MAX_LOCAL (64L << 20)        /* one of the supervisor's */
#define SEND_QUEUE_MAX (16UL << 20)  /* queued for the server before reading more */
/* iopub messages that wait for the supervisor before the server is read no
 * more (of MAX_MSG at most each: the bound in bytes) */
#define IOPUB_HWM 64
#define MAX_FRAMES 1024
#define ROUTES 1024 /* requests whose replies are routed */
#define BATCH 64
#define KEEPALIVE_MS 10000     /* iopub traffic against the server's culling */
#define RECONNECT_MAX_MS 60000 /* the channels down this long: the kernel is lost */
#define STABLE_MS 2000         /* channels that stayed this long were stable */
#define SERVER_GONE_MS 15000   /* the server silent this long: gone, and the kernel */
#define CALL_TIMEOUT_S 30
#define LINE_MAX_BYTES (4 << 20)

static const char *const ch_names[KBOX_CH_COUNT] = {"shell", "iopub", "stdin", "control", "hb"};

/* A request of the supervisor's: whose it is, to route its replies. */
typedef struct {
	char msg_id[80];
	uint8_t ident[256];
	size_t ident_len;
	bool used;
} route_t;

typedef struct {
	gw_t *gw;
	gw_ws_t *ws;
	char kid[80], session[37];
	kbox_auth_t *auth;
	void *zctx, *sock[KBOX_CH_COUNT];
	int status_fd, sig_fd;
	route_t routes[ROUTES];
	size_t next_route;
	uint8_t last_ident[KBOX_CH_COUNT][256];
	size_t last_ident_len[KBOX_CH_COUNT];
	char own[8][40]; /* msg_ids of the keep-alive's requests */
	size_t next_own;
	long long last_traffic;
	int pending;
	bool stopping, lost, gone; /* (gone: the server answers nothing) */
	char cause[512];
	unsigned long dropped, dropped_told; /* messages of the server's not passed on */
	char in[4096];
	size_t in_len;
	/* when the channels last connected, and the series of drops soon
	 * after (reconnect) */
	long long connected_at, unstable_since, backoff;
	bool in_call;      /* a REST call waits: commands that call are put off */
	bool posting;      /* the POST that starts the kernel waits */
	long long stop_at; /* when a stop was first seen while it started */
	/* the heartbeat's thread: it owns sock[KBOX_CH_HB] once started */
	pthread_t hb_thread;
	bool hb_started;
	atomic_bool hb_stop;
} run_t;

static void wait_commands(run_t *r, int ms);

/* ---- status lines ---- */

void kg_say(int fd, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (text) {
		kx_write_all(fd, text, strlen(text));
		kx_write_all(fd, "\n", 1);
	}
	free(text);
	json_decref(j);
}

/* TEXT as a JSON string, its invalid UTF-8 (a server's words) repaired:
 * else jansson refuses it, and the line would not be said. */
json_t *kg_jtext(const char *text)
{
	size_t n = 0;
	char *fixed = kx_utf8_repair(text, strlen(text), &n);
	json_t *j = fixed ? json_stringn(fixed, n) : json_string("(out of memory)");
	free(fixed);
	return j;
}

int kg_say_error(int fd, const gw_error_t *err)
{
	kg_say(fd, json_pack("{s:{s:s, s:o}}", "error", "kind", gw_kind_name(err->kind), "message",
	                     kg_jtext(err->msg)));
	return 1;
}

/* ---- the first line: the server ---- */

/* A line of standard input (at most LINE_MAX_BYTES), parsed: NULL at its
 * end or when it is no JSON object. */
json_t *kg_read_line_json(void)
{
	kx_buf_t b = KX_BUF_INIT;
	char c;
	json_t *j = NULL;
	ssize_t n;
	while ((n = read(0, &c, 1)) == 1 || (n < 0 && errno == EINTR)) {
		if (n < 0)
			continue;
		if (c == '\n')
			break;
		if (b.len >= LINE_MAX_BYTES || kx_buf_append(&b, &c, 1) < 0) {
			kx_buf_reset(&b);
			return NULL;
		}
	}
	if (b.len)
		j = json_loadb(b.data, b.len, 0, NULL);
	if (b.data)
		explicit_bzero(b.data, b.len);
	kx_buf_reset(&b);
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

gw_t *kg_server_from_stdin(gw_error_t *err)
{
	json_t *j = kg_read_line_json();
	const char *url = json_string_value(json_object_get(j, "url"));
	json_t *tok = json_object_get(j, "token");
	gw_t *g = NULL;
	if (!url)
		gw_error(err, GW_E_USAGE, "standard input: no server line ({\"url\": ...})");
	else
		g = gw_new(url, json_string_value(tok),
		           json_string_value(json_object_get(j, "ca_file")), err);
	if (json_string_value(tok))
		explicit_bzero((char *)json_string_value(tok), json_string_length(tok));
	json_decref(j);
	return g;
}

/* ---- spec, specs, delete ---- */

/* That G's URL has no Jupyter API under it, in ERR as KIND.  -1. */
static int no_api(gw_t *g, gw_kind_t kind, gw_error_t *err)
{
	return gw_error(err, kind,
	                "there is no Jupyter API at %s (HTTP 404 on /api/kernelspecs): check "
	                "the URL's path",
	                gw_url(g));
}

bool kg_no_api(gw_t *g, gw_kind_t kind, gw_error_t *err)
{
	json_t *out = NULL;
	gw_error_t ignored = {0};
	long code = gw_call(g, "GET", "/api/kernelspecs", NULL, CALL_TIMEOUT_S, &out, &ignored);
	json_decref(out);
	return code == 404 && no_api(g, kind, err) < 0;
}

static int cmd_specs(const char *name)
{
	gw_error_t err = {0};
	json_t *out = NULL;
	char path[512];
	long code;
	gw_t *g = kg_server_from_stdin(&err);
	int rc = 1;

	if (!g)
		return kg_say_error(1, &err);
	if (name && (!*name || strpbrk(name, "/?#%") || strlen(name) > 200)) {
		gw_error(&err, GW_E_USAGE, "\"%s\" is not a kernelspec's name", name);
		goto out;
	}
	snprintf(path, sizeof path, "/api/kernelspecs%s%s", name ? "/" : "", name ? name : "");
	code = gw_call(g, "GET", path, NULL, CALL_TIMEOUT_S, &out, &err);
	if (code < 0)
		goto out;
	if (code != 200) {
		char what[300];
		snprintf(what, sizeof what, name ? "kernelspec %s" : "kernelspecs%s",
		         name ? name : "");
		gw_reply_error(g, &err, what, code, out);
		if (code == 404 && !name)
			no_api(g, GW_E_NOT_FOUND, &err);
		else if (code == 404) {
			/* what it has, said with it; or that it has no API at all
			 * (a wrong path: review 23, P5) */
			char have[600] = "";
			size_t n = 0;
			json_t *all = NULL, *v;
			const char *k;
			long all_code = gw_call(g, "GET", "/api/kernelspecs", NULL, CALL_TIMEOUT_S,
			                        &all, &err);
			if (all_code == 200)
				json_object_foreach(json_object_get(all, "kernelspecs"), k, v)
				{
					if (n + strlen(k) + 8 < sizeof have)
						n += (size_t)snprintf(have + n, sizeof have - n,
						                      "%s%s", n ? ", " : "", k);
				}
			json_decref(all);
			if (all_code == 404)
				no_api(g, GW_E_NOT_FOUND, &err);
			else
				gw_error(
				        &err, GW_E_NOT_FOUND,
				        "the Jupyter server at %s has no kernelspec %s (it has: %s)",
				        gw_url(g), name, n ? have : "none");
		}
		goto out;
	}
	if (name && !json_is_object(json_object_get(out, "spec"))) {
		gw_error(&err, GW_E_SERVER, "kernelspec %s: the server's reply has no spec", name);
		goto out;
	}
	if (!name && !json_is_object(json_object_get(out, "kernelspecs"))) {
		gw_error(&err, GW_E_SERVER, "kernelspecs: the server's reply has none");
		goto out;
	}
	if (name)
		kg_say(1,
		       json_pack("{s:s, s:O}", "name", name, "spec", json_object_get(out, "spec")));
	else {
		json_t *specs = json_object(), *v;
		const char *k;
		json_object_foreach(json_object_get(out, "kernelspecs"), k, v) json_object_set_new(
		        specs, k, json_pack("{s:O*}", "spec", json_object_get(v, "spec")));
		kg_say(1, json_pack("{s:O*, s:o}", "default", json_object_get(out, "default"),
		                    "kernelspecs", specs));
	}
	rc = 0;
out:
	if (rc)
		kg_say_error(1, &err);
	json_decref(out);
	gw_destroy(&g);
	return rc;
}

bool kg_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (!n || n >= 80)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= 'A' && *p <= 'Z') || *p == '-' || *p == '_'))
			return false;
	return true;
}

/* DELETE the kernel ID: 0 (gone, or never there), or -1 with ERR.  A
 * server error is tried again, DELETE_TRIES times in all, DELETE_PAUSE_MS
 * apart: jupyter_server 1.23 fails a DELETE that comes while it restarts
 * the kernel (its km.ready not yet done). */
#define DELETE_TRIES 5
#define DELETE_PAUSE_MS 500
static int delete_kernel(gw_t *g, const char *id, gw_error_t *err)
{
	char path[128];
	json_t *out = NULL;
	long code;
	snprintf(path, sizeof path, "/api/kernels/%s", id);
	for (int i = 0; i < DELETE_TRIES; i++) {
		json_decref(out);
		out = NULL;
		code = gw_call(g, "DELETE", path, NULL, CALL_TIMEOUT_S, &out, err);
		if (code < 500)
			break;
		poll(NULL, 0, DELETE_PAUSE_MS);
	}
	if (code >= 0 && code != 204 && code != 200 && code != 404) {
		char what[160];
		snprintf(what, sizeof what, "deleting kernel %s", id);
		gw_reply_error(g, err, what, code, out);
		code = -1;
	}
	json_decref(out);
	return code < 0 ? -1 : 0;
}

/* The session's earlier kernels that are left on the server (a helper
 * that could not delete its own): IDS, deleted before this run's kernel
 * starts, each said ("swept").  The first the server does not answer
 * ends it: the others would wait as long. */
static void sweep(run_t *r, json_t *ids)
{
	size_t i;
	json_t *v;
	json_array_foreach(ids, i, v)
	{
		const char *id = json_string_value(v);
		gw_error_t err = {0};
		if (r->stopping)
			break;
		if (!id || !kg_id_valid(id))
			continue;
		if (delete_kernel(r->gw, id, &err) == 0)
			kg_say(r->status_fd, json_pack("{s:{s:s}}", "swept", "id", id));
		else if (!r->stopping)
			kg_say(r->status_fd, json_pack("{s:{s:s, s:o}}", "swept", "id", id, "error",
			                               kg_jtext(err.msg)));
		if (err.kind == GW_E_NO_SERVER)
			break;
	}
}

/* ---- run: routing ---- */

static void route_add(run_t *r, const char *msg_id, const void *ident, size_t len)
{
	route_t *rt = &r->routes[r->next_route++ % ROUTES];
	if (len > sizeof rt->ident || strlen(msg_id) >= sizeof rt->msg_id)
		return;
	snprintf(rt->msg_id, sizeof rt->msg_id, "%s", msg_id);
	memcpy(rt->ident, ident, len);
	rt->ident_len = len;
	rt->used = true;
}

static route_t *route_find(run_t *r, const char *msg_id)
{
	if (!msg_id || !*msg_id)
		return NULL;
	for (size_t i = 0; i < ROUTES; i++)
		if (r->routes[i].used && strcmp(r->routes[i].msg_id, msg_id) == 0)
			return &r->routes[i];
	return NULL;
}

static bool is_own(const run_t *r, const char *msg_id)
{
	for (size_t i = 0; msg_id && i < sizeof r->own / sizeof *r->own; i++)
		if (r->own[i][0] && strcmp(r->own[i], msg_id) == 0)
			return true;
	return false;
}

/* The header's msg_id and msg_type (a JSON object's, at most
 * KBOX_MAX_HEADER_BYTES), into ID and TYPE.  false when it is none. */
static bool header_ids(const uint8_t *data, size_t len, char *id, size_t id_size, char *type,
                       size_t type_size)
{
	json_t *h;
	const char *i, *t;
	id[0] = type[0] = '\0';
	if (len > KBOX_MAX_HEADER_BYTES || !(h = json_loadb((const char *)data, len, 0, NULL)))
		return false;
	i = json_string_value(json_object_get(h, "msg_id"));
	t = json_string_value(json_object_get(h, "msg_type"));
	if (i)
		snprintf(id, id_size, "%s", i);
	if (t)
		snprintf(type, type_size, "%s", t);
	json_decref(h);
	return i && t;
}

/* ---- run: from the server to the supervisor ---- */

static int ch_of(const uint8_t *name, size_t len)
{
	for (int c = 0; c < KBOX_CH_COUNT; c++)
		if (strlen(ch_names[c]) == len && memcmp(ch_names[c], name, len) == 0)
			return c;
	return -1;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t a = strlen(s), b = strlen(tail);
	return a >= b && strcmp(s + a - b, tail) == 0;
}

/* Messages of the server's were dropped since it was last said: a
 * notice says so, before any message that follows them reaches the
 * supervisor (which reads the notices when an execution ends), so that
 * the result of the execution they came in says it. */
static void tell_drops(run_t *r)
{
	if (r->dropped == r->dropped_told || r->stopping)
		return;
	kg_say(r->status_fd,
	       json_pack("{s:s}", "notice",
	                 "the Jupyter server sent messages that were not passed on (not a "
	                 "kernel's message, or over its bounds); output may be missing"));
	r->dropped_told = r->dropped;
}

/* Send the message of the N parts (header, parent, metadata, content,
 * buffers) on CH to the supervisor, signed. */
static void to_local(run_t *r, int ch, const gw_part_t *parts, size_t n)
{
	char id[80], type[80], pid[80], ptype[80], sig[65], topic[200];
	kbox_frame_t f[4];
	void *s = r->sock[ch];
	route_t *rt = NULL;
	const uint8_t *ident = NULL;
	size_t ident_len = 0;

	if (!header_ids(parts[0].data, parts[0].len, id, sizeof id, type, sizeof type)) {
		r->dropped++;
		return;
	}
	header_ids(parts[1].data, parts[1].len, pid, sizeof pid, ptype, sizeof ptype);
	if (is_own(r, pid))
		return; /* the keep-alive's */
	tell_drops(r);
	if (ch == KBOX_CH_IOPUB && strcmp(type, "status") == 0 && parts[3].len < 4096) {
		/* the server's word that it restarted the kernel (it died), or
		 * gave up on it */
		json_t *c = json_loadb((const char *)parts[3].data, parts[3].len, 0, NULL);
		const char *st = json_string_value(json_object_get(c, "execution_state"));
		if (st && (strcmp(st, "restarting") == 0 || strcmp(st, "dead") == 0) && !r->lost) {
			r->lost = true;
			snprintf(
			        r->cause, sizeof r->cause, "%s",
			        strcmp(st, "dead") == 0
			                ? "the remote kernel died, and the Jupyter server could not "
			                  "restart it"
			                : "the remote kernel died (the Jupyter server restarted it, "
			                  "without its state)");
		}
		json_decref(c);
	}
	for (int i = 0; i < 4; i++)
		f[i] = (kbox_frame_t){parts[i].data, parts[i].len};
	kbox_auth_sign(r->auth, f, sig);
	if (ch != KBOX_CH_IOPUB) {
		if ((rt = route_find(r, pid))) {
			ident = rt->ident;
			ident_len = rt->ident_len;
		} else if (r->last_ident_len[ch]) {
			ident = r->last_ident[ch];
			ident_len = r->last_ident_len[ch];
		} else {
			r->dropped++;
			return;
		}
		if (zmq_send(s, ident, ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
			r->dropped++;
			return;
		}
	} else {
		snprintf(topic, sizeof topic, "kernel.%s.%s", r->kid, type);
		/* no room (the supervisor reads slower than the server sends:
		 * IOPUB_HWM messages wait): nothing more is read of the server
		 * until there is, rather than a message dropped unsaid */
		while (zmq_send(s, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
			if (r->stopping) /* (what comes while it stops goes unsaid) */
				return;
			if (errno != EAGAIN) {
				r->dropped++;
				return;
			}
			wait_commands(r, 5);
		}
	}
	zmq_send(s, KBOX_DELIMITER, strlen(KBOX_DELIMITER), ZMQ_SNDMORE | ZMQ_DONTWAIT);
	zmq_send(s, sig, 64, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	for (size_t i = 0; i < n; i++)
		zmq_send(s, parts[i].data, parts[i].len,
		         i + 1 < n ? ZMQ_SNDMORE | ZMQ_DONTWAIT : ZMQ_DONTWAIT);
	if ((ch == KBOX_CH_SHELL || ch == KBOX_CH_CONTROL) && ends_with(type, "_reply")) {
		if (rt)
			rt->used = false;
		if (r->pending > 0)
			r->pending--;
	}
}

/* A legacy text message: its JSON's dicts as parts. */
static void legacy_to_local(run_t *r, const uint8_t *data, size_t len, const gw_part_t *bufs,
                            size_t nbufs)
{
	static const char *const keys[4] = {"header", "parent_header", "metadata", "content"};
	gw_part_t parts[GW_MAX_PARTS];
	char *texts[4] = {NULL};
	const char *chan;
	json_t *j = NULL;
	int ch;

	if (kx_json_cost((const char *)data, len) > LEGACY_COST_MAX ||
	    !(j = json_loadb((const char *)data, len, 0, NULL)) ||
	    !(chan = json_string_value(json_object_get(j, "channel"))) ||
	    (ch = ch_of((const uint8_t *)chan, strlen(chan))) < 0 || ch == KBOX_CH_HB)
		goto drop;
	for (int i = 0; i < 4; i++) {
		json_t *v = json_object_get(j, keys[i]);
		if (!json_is_object(v) || !(texts[i] = json_dumps(v, JSON_COMPACT)))
			goto drop;
		parts[i] = (gw_part_t){(const uint8_t *)texts[i], strlen(texts[i])};
	}
	for (size_t i = 0; i < nbufs && i + 4 < GW_MAX_PARTS; i++)
		parts[4 + i] = bufs[i];
	to_local(r, ch, parts, 4 + nbufs);
	goto out;
drop:
	r->dropped++;
out:
	for (int i = 0; i < 4; i++)
		free(texts[i]);
	json_decref(j);
}

static void on_ws_msg(void *arg, int opcode, const uint8_t *data, size_t len)
{
	run_t *r = arg;
	gw_part_t chan, parts[GW_MAX_PARTS], json;
	int n, ch;

	r->last_traffic = kx_now_ms();
	if (gw_ws_v1(r->ws)) {
		if (opcode != 2 || (n = gw_v1_split(data, len, &chan, parts, GW_MAX_PARTS)) < 4 ||
		    (ch = ch_of(chan.data, chan.len)) < 0 || ch == KBOX_CH_HB) {
			r->dropped++;
			return;
		}
		to_local(r, ch, parts, (size_t)n);
	} else if (opcode == 1)
		legacy_to_local(r, data, len, NULL, 0);
	else if ((n = gw_legacy_split(data, len, &json, parts, GW_MAX_PARTS - 4)) >= 0)
		legacy_to_local(r, json.data, json.len, parts, (size_t)n);
	else
		r->dropped++;
}

/* ---- run: from the supervisor to the server ---- */

/* Send the message of the N parts (header, parent, metadata, content,
 * buffers) on CH to the server, in its framing. */
static int to_server(run_t *r, int ch, const gw_part_t *parts, size_t n)
{
	uint8_t *out = NULL;
	size_t len = 0;
	int rc = -1;

	if (gw_ws_v1(r->ws)) {
		out = gw_v1_join(ch_names[ch], parts, n, &len);
		rc = out ? gw_ws_send(r->ws, 2, out, len) : -1;
	} else {
		static const char *const keys[4] = {"header", "parent_header", "metadata",
		                                    "content"};
		json_t *j = json_pack("{s:s, s:[]}", "channel", ch_names[ch], "buffers");
		char *text = NULL;
		for (int i = 0; i < 4; i++) {
			json_t *v = json_loadb((const char *)parts[i].data, parts[i].len, 0, NULL);
			if (!json_is_object(v)) {
				json_decref(v);
				goto legacy_out;
			}
			json_object_set_new(j, keys[i], v);
		}
		if (!(text = json_dumps(j, JSON_COMPACT)))
			goto legacy_out;
		if (n == 4)
			rc = gw_ws_send(r->ws, 1, text, strlen(text));
		else {
			gw_part_t jp = {(const uint8_t *)text, strlen(text)};
			out = gw_legacy_join(&jp, parts + 4, n - 4, &len);
			rc = out ? gw_ws_send(r->ws, 2, out, len) : -1;
		}
legacy_out:
		free(text);
		json_decref(j);
	}
	free(out);
	return rc;
}

/* Read one message of the supervisor's on CH and pass it on.  1 when one
 * was read, 0 when none waited. */
static int from_local(run_t *r, int ch)
{
	zmq_msg_t m[MAX_FRAMES + 1];
	gw_part_t parts[MAX_FRAMES];
	size_t n = 0, total = 0, d;
	int more = 1, got = 0;
	char id[80], type[80];
	kbox_frame_t f[4];
	kbox_error_t err = {0};

	while (more) {
		zmq_msg_t *msg = &m[n < MAX_FRAMES ? n : MAX_FRAMES];
		zmq_msg_init(msg);
		if (zmq_msg_recv(msg, r->sock[ch], n ? 0 : ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(msg);
			break;
		}
		got = 1;
		more = zmq_msg_more(msg);
		total += zmq_msg_size(msg);
		if (n < MAX_FRAMES)
			n++;
		else
			zmq_msg_close(msg); /* (counted below: too many) */
	}
	if (!got)
		return 0;
	for (d = 0; d < n; d++)
		if (zmq_msg_size(&m[d]) == strlen(KBOX_DELIMITER) &&
		    memcmp(zmq_msg_data(&m[d]), KBOX_DELIMITER, strlen(KBOX_DELIMITER)) == 0)
			break;
	if (n == MAX_FRAMES || total > (size_t)MAX_LOCAL || d + 6 > n)
		goto drop;
	for (int i = 0; i < 4; i++)
		f[i] = (kbox_frame_t){zmq_msg_data(&m[d + 2 + i]), zmq_msg_size(&m[d + 2 + i])};
	if (kbox_auth_verify(r->auth, f, zmq_msg_data(&m[d + 1]), zmq_msg_size(&m[d + 1]), &err) <
	            0 ||
	    !header_ids(zmq_msg_data(&m[d + 2]), zmq_msg_size(&m[d + 2]), id, sizeof id, type,
	                sizeof type))
		goto drop;
	if (d >= 1 && zmq_msg_size(&m[0]) <= sizeof r->last_ident[ch]) {
		route_add(r, id, zmq_msg_data(&m[0]), zmq_msg_size(&m[0]));
		memcpy(r->last_ident[ch], zmq_msg_data(&m[0]), zmq_msg_size(&m[0]));
		r->last_ident_len[ch] = zmq_msg_size(&m[0]);
		/* (the supervisor's stdin answers come on their own socket,
		 * of the same identity) */
		if (ch == KBOX_CH_SHELL) {
			memcpy(r->last_ident[KBOX_CH_STDIN], zmq_msg_data(&m[0]),
			       zmq_msg_size(&m[0]));
			r->last_ident_len[KBOX_CH_STDIN] = zmq_msg_size(&m[0]);
		}
	}
	for (size_t i = d + 2; i < n; i++)
		parts[i - d - 2] = (gw_part_t){zmq_msg_data(&m[i]), zmq_msg_size(&m[i])};
	/* (a request awaits its reply; a comm message or an input reply
	 * awaits nothing) */
	if (to_server(r, ch, parts, n - d - 2) == 0 && ch != KBOX_CH_STDIN &&
	    ends_with(type, "_request"))
		r->pending++;
	r->last_traffic = kx_now_ms();
	goto out;
drop:
	r->dropped++;
out:
	for (size_t i = 0; i < n; i++)
		zmq_msg_close(&m[i]);
	return 1;
}

/* The heartbeat, in a thread of its own (as ipykernel's): each beat sent
 * back as it came, whatever the main loop is doing (a REST call, a
 * reconnection), so that the supervisor does not take a slow server for a
 * dead kernel; the kernel's own end is the helper's to say. */
static void *hb_main(void *arg)
{
	run_t *r = arg;
	void *sock = r->sock[KBOX_CH_HB];
	while (!atomic_load(&r->hb_stop)) {
		zmq_pollitem_t p = {sock, 0, ZMQ_POLLIN, 0};
		if (zmq_poll(&p, 1, 200) <= 0)
			continue;
		for (int more = 1; more;) {
			zmq_msg_t m;
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, sock, 0) < 0) {
				zmq_msg_close(&m);
				break;
			}
			more = zmq_msg_more(&m);
			if (zmq_msg_send(&m, sock, more ? ZMQ_SNDMORE : 0) < 0)
				zmq_msg_close(&m);
		}
	}
	return NULL;
}

/* A kernel_info_request of our own: iopub traffic, which the server
 * counts as the kernel's activity (its culling counts nothing else). */
static void keep_alive(run_t *r)
{
	json_t *content = json_object();
	kbox_msg_t *m = kbox_msg_new("kernel_info_request", r->session, "kbox", &content);
	char *h = m ? json_dumps(kbox_msg_header(m), JSON_COMPACT) : NULL;
	if (h) {
		gw_part_t parts[4] = {{(const uint8_t *)h, strlen(h)},
		                      {(const uint8_t *)"{}", 2},
		                      {(const uint8_t *)"{}", 2},
		                      {(const uint8_t *)"{}", 2}};
		snprintf(r->own[r->next_own++ % 8], sizeof r->own[0], "%s", kbox_msg_id(m));
		to_server(r, KBOX_CH_SHELL, parts, 4);
	}
	free(h);
	kbox_msg_destroy(&m);
	r->last_traffic = kx_now_ms();
}

/* ---- run ---- */

/* Commands on standard input: "interrupt", "remove"; its end is
 * "remove". */
static void read_commands(run_t *r)
{
	ssize_t n = read(0, r->in + r->in_len, sizeof r->in - 1 - r->in_len);
	char *nl;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		r->stopping = true;
		return;
	}
	r->in_len += (size_t)n;
	r->in[r->in_len] = '\0';
	while ((nl = memchr(r->in, '\n', r->in_len))) {
		size_t used = (size_t)(nl - r->in) + 1;
		*nl = '\0';
		if (strcmp(r->in, "remove") == 0)
			r->stopping = true;
		else if (strcmp(r->in, "interrupt") == 0 && !r->in_call) {
			gw_error_t err = {0};
			json_t *out = NULL;
			char path[128];
			long code;
			snprintf(path, sizeof path, "/api/kernels/%s/interrupt", r->kid);
			code = gw_call(r->gw, "POST", path, NULL, CALL_TIMEOUT_S, &out, &err);
			if (code >= 0 && code != 204 && code != 200)
				gw_reply_error(r->gw, &err, "interrupting the kernel", code, out);
			if (err.msg[0])
				fprintf(stderr, "kbox-gateway: %s\n", err.msg);
			json_decref(out);
		}
		memmove(r->in, r->in + used, r->in_len - used);
		r->in_len -= used;
	}
	if (r->in_len == sizeof r->in - 1)
		r->in_len = 0;
}

/* Bind the sockets CONN names, as the kernel's.  0, or -1 with ERR. */
static int bind_all(run_t *r, const kbox_conn_t *conn, gw_error_t *err)
{
	static const int types[KBOX_CH_COUNT] = {ZMQ_ROUTER, ZMQ_XPUB, ZMQ_ROUTER, ZMQ_ROUTER,
	                                         ZMQ_REP};
	size_t keylen;
	const unsigned char *key = kbox_conn_key(conn, &keylen);
	kbox_error_t kerr = {0};
	int linger = 0, hwm = 1000;

	if (!(r->auth = kbox_auth_new(kbox_conn_scheme(conn), key, keylen, KBOX_REPLAY_HISTORY,
	                              &kerr)))
		return gw_error(err, GW_E_USAGE, "the connection file: %s", kerr.msg);
	if (!(r->zctx = zmq_ctx_new()))
		return gw_error(err, GW_E_USAGE, "zmq: %s", zmq_strerror(errno));
	for (int c = 0; c < KBOX_CH_COUNT; c++) {
		const char *ep = kbox_conn_endpoint(conn, (kbox_channel_t)c);
		if (!(r->sock[c] = zmq_socket(r->zctx, types[c])))
			return gw_error(err, GW_E_USAGE, "zmq: %s", zmq_strerror(errno));
		zmq_setsockopt(r->sock[c], ZMQ_LINGER, &linger, sizeof linger);
		if (c == KBOX_CH_IOPUB) {
			/* a full queue is said (EAGAIN), not dropped: send_local waits */
			int nodrop = 1, iopub_hwm = IOPUB_HWM;
			zmq_setsockopt(r->sock[c], ZMQ_XPUB_NODROP, &nodrop, sizeof nodrop);
			zmq_setsockopt(r->sock[c], ZMQ_SNDHWM, &iopub_hwm, sizeof iopub_hwm);
		} else
			zmq_setsockopt(r->sock[c], ZMQ_SNDHWM, &hwm, sizeof hwm);
		if (zmq_bind(r->sock[c], ep) < 0)
			return gw_error(err, GW_E_USAGE, "cannot bind %s: %s", ep,
			                zmq_strerror(errno));
	}
	return 0;
}

/* Wait up to MS for a stop (a signal) or a command, and take it. */
static void wait_commands(run_t *r, int ms)
{
	struct pollfd p[2] = {{0, POLLIN, 0}, {r->sig_fd, POLLIN, 0}};
	if (poll(p, 2, ms) > 0) {
		if (p[1].revents)
			r->stopping = true;
		if (p[0].revents)
			read_commands(r);
	}
}

/* Is the kernel still the server's?  1 yes, 0 no (404), -1 when the
 * server does not answer. */
static int kernel_there(run_t *r, gw_error_t *err)
{
	char path[128];
	json_t *out = NULL;
	long code;
	snprintf(path, sizeof path, "/api/kernels/%s", r->kid);
	code = gw_call(r->gw, "GET", path, NULL, 10, &out, err);
	json_decref(out);
	return code == 200 ? 1 : code == 404 ? 0 : -1;
}

/* While the server opens the channels (gw_set_watch): a kernel that
 * died as it started, and that the server removed after its restarts
 * failed (jupyter_server), ends the wait at once. */
static int still_there(void *arg, gw_error_t *err)
{
	run_t *r = arg;
	gw_error_t ignored = {0};
	if (kernel_there(r, &ignored) != 0)
		return 0;
	gw_error(err, GW_E_SERVER,
	         "the kernel %s died on the Jupyter server as it started, and the server "
	         "removed it (the server's log says why)",
	         r->kid);
	return -1;
}

/* The channels dropped: connect them again (the same session: the server
 * replays what it kept for it), with back-off, for RECONNECT_MAX_MS.
 * 0, or -1 with r->cause set (or stopping). */
static int reconnect(run_t *r, const char *why, bool legacy)
{
	long long t0 = kx_now_ms(), wait = 100, silent_since = 0;
	gw_error_t err = {0};
	gw_ws_destroy(&r->ws);
	/* channels that drop again within STABLE_MS of their connection are
	 * one series of drops: its back-off grows, and it counts against
	 * RECONNECT_MAX_MS from its first (a server that accepts and closes
	 * at once is not tried without end) */
	if (r->connected_at && t0 - r->connected_at < STABLE_MS) {
		t0 = r->unstable_since ? r->unstable_since : r->connected_at;
		r->backoff = r->backoff ? (r->backoff * 2 > 5000 ? 5000 : r->backoff * 2) : 100;
		wait = r->backoff;
		if (kx_now_ms() - t0 > RECONNECT_MAX_MS) {
			snprintf(r->cause, sizeof r->cause,
			         "the kernel's channels kept dropping (%.200s) for %d s", why,
			         RECONNECT_MAX_MS / 1000);
			return -1;
		}
		wait_commands(r, (int)wait);
	} else
		r->backoff = 0;
	r->unstable_since = t0;
	while (!r->stopping) {
		int there = kernel_there(r, &err);
		/* a server that answers nothing: gone (stopped, or its machine),
		 * and its kernels with it, once SERVER_GONE_MS passed */
		if (there < 0 && err.kind == GW_E_NO_SERVER) {
			if (!silent_since)
				silent_since = kx_now_ms();
			else if (kx_now_ms() - silent_since > SERVER_GONE_MS) {
				snprintf(
				        r->cause, sizeof r->cause,
				        "the Jupyter server is gone (no answer for %d s: %.300s); the "
				        "remote kernel is lost with it",
				        SERVER_GONE_MS / 1000, err.msg);
				r->gone = true;
				return -1;
			}
		} else
			silent_since = 0;
		if (there == 0) {
			snprintf(
			        r->cause, sizeof r->cause,
			        "the Jupyter server no longer has the remote kernel %s (culled, or "
			        "the server restarted); its state is lost",
			        r->kid);
			return -1;
		}
		if (there > 0 &&
		    (r->ws = gw_ws_connect(r->gw, r->kid, r->session, legacy, CALL_TIMEOUT_S,
		                           MAX_MSG, on_ws_msg, r, &err))) {
			char text[600];
			snprintf(
			        text, sizeof text,
			        "the kernel's channels dropped (%.200s) and were connected again after "
			        "%lld ms: output sent meanwhile may be missing",
			        why, kx_now_ms() - t0);
			kg_say(r->status_fd, json_pack("{s:o}", "notice", kg_jtext(text)));
			r->connected_at = kx_now_ms();
			return 0;
		}
		if (kx_now_ms() - t0 > RECONNECT_MAX_MS) {
			snprintf(
			        r->cause, sizeof r->cause,
			        "the kernel's channels dropped (%.150s) and could not be connected again "
			        "within %d s: %.200s",
			        why, RECONNECT_MAX_MS / 1000, err.msg);
			return -1;
		}
		wait_commands(r, (int)wait);
		wait = wait * 2 > 5000 ? 5000 : wait * 2;
	}
	return -1;
}

/* gw_set_cancel's: a stop asked (SIGTERM, "remove", the end of standard
 * input) while the kernel starts ends the wait; the POST that starts it,
 * POST_GRACE_MS after the stop, so that the kernel it made is known, and
 * deleted, rather than left on the server (the supervisor waits 40 s). */
#define POST_GRACE_MS 25000
static bool cancelled(void *arg)
{
	run_t *r = arg;
	if (!r->stopping) {
		r->in_call = true;
		wait_commands(r, 0);
		r->in_call = false;
	}
	if (r->stopping && !r->stop_at) {
		r->stop_at = kx_now_ms();
		if (r->posting) /* (to the kernel's log) */
			fprintf(stderr,
			        KG_PROGRAM
			        ": stopped while the server starts the kernel: its "
			        "answer is awaited %d s more, to delete the kernel it made\n",
			        POST_GRACE_MS / 1000);
	}
	if (r->posting)
		return r->stopping && kx_now_ms() - r->stop_at > POST_GRACE_MS;
	return r->stopping;
}

static int cmd_run(void)
{
	gw_error_t err = {0};
	kbox_error_t kerr = {0};
	json_t *spec = NULL, *body = NULL, *out = NULL, *env;
	kbox_conn_t *conn = NULL;
	const char *kernel, *dir;
	char *conn_text = NULL;
	long code, launch;
	bool deleted = false, legacy;
	sigset_t mask;
	run_t *r = calloc(1, sizeof *r);
	int rc = 1;

	if (!r)
		return 1;
	r->status_fd = KG_STATUS_FD;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	r->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (!(r->gw = kg_server_from_stdin(&err)))
		goto fail;
	if (!(spec = kg_read_line_json())) {
		gw_error(&err, GW_E_USAGE, "standard input: no run line");
		goto fail;
	}
	kernel = json_string_value(json_object_get(spec, "kernel"));
	env = json_object_get(spec, "env");
	launch = (long)json_integer_value(json_object_get(spec, "launch_timeout"));
	legacy = json_is_true(json_object_get(spec, "legacy"));
	if (launch <= 0)
		launch = KG_LAUNCH_TIMEOUT_S;
	if (!kernel || !(conn_text = json_dumps(json_object_get(spec, "connection"), 0)) ||
	    !(conn = kbox_conn_from_json(json_object_get(spec, "connection"), "the run line",
	                                 &kerr))) {
		gw_error(&err, GW_E_USAGE, "the run line: %s",
		         kerr.msg[0] ? kerr.msg : "no kernel, or no connection");
		goto fail;
	}
	gw_set_cancel(r->gw, cancelled, r);
	sweep(r, json_object_get(spec, "sweep"));
	/* its directory, where the server has files (a contents API): made
	 * first, the kernel's working directory (a relative API path) */
	dir = json_string_value(json_object_get(spec, "dir"));
	if (dir && (!kg_path_valid(dir) || kg_contents_probe(r->gw, &err) < 0 ||
	            kg_make_dirs(r->gw, dir, &err) < 0)) {
		if (err.kind != GW_E_NO_CONTENTS && kg_path_valid(dir) && !r->stopping) {
			char said[1200];
			snprintf(
			        said, sizeof said,
			        "the kernel's directory %s could not be made on the server, so the "
			        "kernel starts in the server's own: %s",
			        dir, err.msg);
			kg_say(r->status_fd, json_pack("{s:o}", "notice", kg_jtext(said)));
		}
		dir = NULL;
		err = (gw_error_t){0};
	}
	if (r->stopping) { /* no kernel is started for nothing */
		gw_error(&err, GW_E_USAGE, "stopped while the kernel started");
		goto fail;
	}
	/* the kernel (the POST waits while it starts: a pod's launch) */
	body = json_pack("{s:s}", "name", kernel);
	if (dir)
		json_object_set_new(body, "path", json_string(dir));
	if (json_is_object(env) && json_object_size(env))
		json_object_set(body, "env", env);
	r->posting = true;
	code = gw_call(r->gw, "POST", "/api/kernels", body, launch + 30, &out, &err);
	r->posting = false;
	if (code < 0)
		goto fail;
	if (code != 201 && code != 200) {
		char what[300];
		snprintf(what, sizeof what, "starting kernel %s", kernel);
		gw_reply_error(r->gw, &err, what, code, out);
		goto fail;
	}
	if (!json_string_value(json_object_get(out, "id")) ||
	    !kg_id_valid(json_string_value(json_object_get(out, "id")))) {
		gw_error(&err, GW_E_SERVER, "starting kernel %s: the server's reply has no id",
		         kernel);
		goto fail;
	}
	snprintf(r->kid, sizeof r->kid, "%s", json_string_value(json_object_get(out, "id")));
	if (r->stopping) { /* asked while it started: it goes at once */
		gw_error(&err, GW_E_USAGE, "stopped while the kernel started");
		goto fail_delete;
	}
	kbox_uuid(r->session);
	gw_set_watch(r->gw, still_there, r);
	if (!(r->ws = gw_ws_connect(r->gw, r->kid, r->session, legacy, launch, MAX_MSG, on_ws_msg,
	                            r, &err)) ||
	    bind_all(r, conn, &err) < 0)
		goto fail_delete;
	/* (from here on, the loop watches for a stop; the DELETE at the
	 * end must not be cut short by one) */
	gw_set_cancel(r->gw, NULL, NULL);
	if (pthread_create(&r->hb_thread, NULL, hb_main, r) != 0) {
		gw_error(&err, GW_E_USAGE, "cannot start the heartbeat's thread");
		goto fail_delete;
	}
	r->hb_started = true;
	r->connected_at = kx_now_ms();
	kg_say(r->status_fd,
	       json_pack("{s:{s:s, s:s, s:s, s:s?}}", "started", "id", r->kid, "protocol",
	                 gw_ws_v1(r->ws) ? "v1" : "legacy", "session", r->session, "dir", dir));
	r->last_traffic = kx_now_ms();

	/* pass messages on until asked to stop, or the kernel is lost */
	while (!r->stopping && !r->lost) {
		zmq_pollitem_t p[6];
		char why[300];
		bool room = gw_ws_queued(r->ws) < SEND_QUEUE_MAX;
		int n = 0, timeout;
		static const int from[] = {KBOX_CH_SHELL, KBOX_CH_STDIN, KBOX_CH_CONTROL};
		for (int c = 0; c < 3; c++)
			p[n++] = (zmq_pollitem_t){r->sock[from[c]], 0, room ? ZMQ_POLLIN : 0, 0};
		p[n++] = (zmq_pollitem_t){
		        NULL, gw_ws_fd(r->ws),
		        (short)(ZMQ_POLLIN | (gw_ws_want_write(r->ws) ? ZMQ_POLLOUT : 0)), 0};
		p[n++] = (zmq_pollitem_t){NULL, 0, ZMQ_POLLIN, 0};
		p[n++] = (zmq_pollitem_t){NULL, r->sig_fd, ZMQ_POLLIN, 0};
		timeout = (int)(r->last_traffic + KEEPALIVE_MS - kx_now_ms());
		/* (what a pump left unread waits in the helper, not the socket) */
		if (gw_ws_more(r->ws))
			timeout = 0;
		if (zmq_poll(p, n, timeout < 0 ? 0 : timeout) < 0 && errno != EINTR)
			break;
		if (p[n - 1].revents) {
			r->stopping = true;
			break;
		}
		if (p[n - 2].revents)
			read_commands(r);
		/* the supervisor's, a batch a socket a turn */
		for (int i = 0; i < n - 3; i++)
			if (p[i].revents & ZMQ_POLLIN)
				for (int k = 0; k < BATCH; k++)
					if (!from_local(r, from[i]))
						break;
		tell_drops(r);
		if (gw_ws_pump(r->ws, why, sizeof why) < 0 && !r->stopping) {
			if (reconnect(r, why, legacy) < 0) {
				r->lost = true;
				break;
			}
		}
		/* KEEPALIVE_MS of silence: is the kernel still the server's?
		 * (one it culled or shut down leaves the channels open, and
		 * answers nothing); then, when no answer is awaited, some
		 * iopub traffic for its culling's clock */
		if (kx_now_ms() - r->last_traffic >= KEEPALIVE_MS) {
			gw_error_t gerr = {0};
			if (kernel_there(r, &gerr) == 0) {
				snprintf(
				        r->cause, sizeof r->cause,
				        "the Jupyter server no longer has the remote kernel %s (culled, "
				        "or shut down by another client); its state is lost",
				        r->kid);
				r->lost = true;
				break;
			}
			if (!r->pending)
				keep_alive(r);
			else
				r->last_traffic = kx_now_ms();
		}
	}
	if (r->ws) {
		char why[64];
		gw_ws_close(r->ws);
		gw_ws_pump(r->ws, why, sizeof why);
	}
	gw_ws_destroy(&r->ws);
	/* the remote kernel goes with its session, whatever ended it */
	deleted = delete_kernel(r->gw, r->kid, &err) == 0;
	if (!deleted)
		fprintf(stderr, "kbox-gateway: %s\n", err.msg);
	kg_say(r->status_fd,
	       json_pack("{s:{s:o, s:b, s:b}}", "exit", "cause",
	                 kg_jtext(r->cause[0] ? r->cause : "the remote kernel was deleted"),
	                 "deleted", deleted, "server_gone", r->gone));
	rc = 0;
	goto out;
fail_delete:
	gw_set_cancel(r->gw, NULL, NULL);
	if (r->kid[0]) {
		gw_error_t ignored = {0};
		delete_kernel(r->gw, r->kid, &ignored);
	}
fail:
	kg_say_error(r->status_fd, &err);
out:
	if (r->hb_started) {
		atomic_store(&r->hb_stop, true);
		pthread_join(r->hb_thread, NULL);
	}
	for (int c = 0; c < KBOX_CH_COUNT; c++)
		if (r->sock[c])
			zmq_close(r->sock[c]);
	if (r->zctx)
		zmq_ctx_term(r->zctx);
	kbox_auth_destroy(&r->auth);
	gw_ws_destroy(&r->ws);
	gw_destroy(&r->gw);
	if (conn_text) {
		explicit_bzero(conn_text, strlen(conn_text));
		free(conn_text);
	}
	kbox_conn_destroy(&conn);
	json_decref(spec);
	json_decref(body);
	json_decref(out);
	free(r);
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: " KG_PROGRAM " spec NAME | specs | run | put DIR PATH FD [NAME] "
	                "| get DIR PATH FD [MAX [SINCE]] | list DIR PATH\n"
	                "(kbox's helper for the gateway backend: see gateway_proto.h)\n");
}

int main(int argc, char **argv)
{
	if (kx_std_fds_open() < 0)
		return 127;
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf(KG_PROGRAM " " PACKAGE_VERSION "\n");
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "spec") == 0)
		return cmd_specs(argv[2]);
	if (argc == 2 && strcmp(argv[1], "specs") == 0)
		return cmd_specs(NULL);
	if (argc == 2 && strcmp(argv[1], "run") == 0)
		return cmd_run();
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "put") == 0)
		return kg_cmd_put(argv[2], argv[3], argv[4], argc == 6 ? argv[5] : "");
	if (argc >= 5 && argc <= 7 && strcmp(argv[1], "get") == 0)
		return kg_cmd_get(argv[2], argv[3], argv[4], argc >= 6 ? argv[5] : "",
		                  argc == 7 ? argv[6] : "");
	if (argc == 4 && strcmp(argv[1], "list") == 0)
		return kg_cmd_list(argv[2], argv[3]);
	usage();
	return 2;
}
