/* src/client.c — a client of one running kernel: channels, readiness, requests, execute.
 *
 * Everything that waits for the kernel is a state machine driven by an event
 * loop (kbox/loop.h): one handler per channel reads what arrives and hands
 * it to whoever waits for it (a request, the readiness wait, the execution,
 * or the iopub callback), and the loop's timers carry every deadline.  The
 * blocking functions run the same machines on a private loop.
 *
 * Callbacks run from inside the loop and may do anything with what they
 * own: destroy the client, begin the next execution, detach.  So a state
 * is taken off the client before its callback is called, and code that
 * goes on after a callout first checks a guard (was the client destroyed?)
 * and reads the client's state afresh. */
#include "private.h"
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HB_SILENCE_MS 1000 /* silence during execute before checking the heartbeat */
#define HB_TIMEOUT_MS 600  /* wait for one echo */
#define HB_MISSES 2        /* consecutive misses that mean "dead" */
#define ALIVE_SLICE_MS 100 /* how often waits consult the alive hook */
#define DRAIN_MS 200       /* longest spent draining queued messages */
#define IOPUB_LINK_MS 250  /* longest wait for iopub's handshake before kernel_info */
#define IOPUB_RCVHWM 200 /* iopub messages queued unread, at most: with the ~1 MB
                          * messages of a print flood, ~200 MB however slow the reader */
#define IDLE_NO_REPLY_MS 500 /* after an interrupt: idle came, the reply may still */
#define REPLY_IDLE_MS 2000 /* after the reply, iopub silence that ends the wait for idle */
#define READY_MS 60000     /* a readiness wait given no timeout */
#define ATTEMPT_MS 1000    /* one kernel_info attempt of a readiness wait */
#define IOPUB_WAIT_MS 10   /* first wait for iopub after kernel_info (doubling)… */
#define IOPUB_WAIT_MAX_MS 200 /* …up to this */
#define STDIN_LINK_MS 5000 /* longest wait for stdin's handshake before an execution */
#define SETTLE_MS 2000     /* the kernel_info round trip after a stop_on_error failure */
#define INTERRUPT_MS 2000  /* wait for interrupt_reply (no interrupt hook) */
#define GRACE_MS 5000      /* default grace period after an interrupt */
#define RECONNECT_MS 10000 /* readiness wait after iopub was reconnected */

/* A token bucket for iopub output. */
typedef struct {
	double msgs_rate, bytes_rate; /* per second; <= 0: unlimited */
	double msgs, bytes;           /* tokens */
	long long last_ms;
} bucket_t;

/* Set by kbox_client_destroy in every guard on the stack: code that goes on
 * after a callback checks it before it touches the client again. */
typedef struct guard {
	bool gone;
	struct guard *next;
} guard_t;

/* A request waiting for its reply (kbox_client_request_begin, or one that
 * a readiness wait or an execution makes for itself: then OWNER is it). */
typedef struct request {
	struct request *next;
	kbox_client_t *client;
	kbox_msg_t *msg; /* as sent: its msg_id and type */
	kbox_channel_t channel;
	int timeout_ms;
	int timer;
	void *owner;
	bool doomed; /* the alive hook said the process is gone: failing */
	kbox_reply_cb *cb;
	void *arg;
} request_t;

/* The readiness wait (kbox_client_ready_begin, or an execution's after
 * iopub was reconnected: then OWNER is it). */
typedef enum {
	READY_LINK,  /* waiting (briefly) for iopub's handshake */
	READY_ASK,   /* kernel_info_request sent */
	READY_IOPUB, /* shell answered; waiting for anything on iopub */
	READY_FLUSH, /* heard iopub: reading what is queued there */
	READY_STDIN, /* waiting for stdin's handshake */
} ready_phase_t;

typedef struct {
	kbox_client_t *client;
	ready_phase_t phase;
	int timeout_ms; /* as given (defaulted), for messages */
	long long deadline;
	long iopub_wait;
	bool shell_answered;
	bool iopub_heard; /* something came on iopub since the wait began */
	int t_deadline, t_phase;
	void *owner;
	kbox_ready_cb *cb;
	void *arg;
} ready_t;

/* An execution in progress: the state kbox_exec_t has until DONE. */
typedef enum {
	X_LINK,      /* waiting for stdin's handshake; not sent yet */
	X_SETTLE,    /* the kernel_info round trip after a failure; not sent yet */
	X_RUN,       /* sent: waiting for execute_reply and status idle */
	X_RECONNECT, /* both came, but output was lost: iopub reconnecting */
	X_DRAIN,     /* both came: taking output already queued */
} exec_phase_t;

typedef struct {
	kbox_client_t *client;
	exec_phase_t phase;
	kbox_exec_opts_t o; /* the caller's; code and user_expressions are in REQ */
	char **lines;       /* o.input_lines, copied */
	kbox_msg_t *req;
	const char *req_id;
	long long start, last_activity, last_iopub;
	bool got_reply, got_idle;
	bool timed_out; /* the deadline passed (not kbox_exec_interrupt) */
	int t_deadline, t_watch, t_phase, t_hb;
	bucket_t bucket;
	bool hb_waiting; /* a ping is out */
	int hb_misses;
	long long hb_sent;
	kbox_exec_done_cb *done;
	void *arg;
} exec_run_t;

/* One channel of a client, as the argument of its loop handlers. */
typedef struct {
	kbox_client_t *client;
	kbox_channel_t ch;
} chan_t;

struct kbox_client {
	kbox_conn_t *conn;
	kbox_auth_t *auth;
	char session[37];
	char username[64];
	zsock_t *sock[KBOX_CH_COUNT];
	kbox_client_hooks_t hooks;
	json_t *kernel_info;
	unsigned long dropped;
	char last_drop[KBOX_ERROR_MSG_MAX];
	/* Monitors that tell when a socket's connection has completed its
	 * handshake.  The kernel's stdin is a ROUTER: it silently drops an
	 * input_request to a peer whose handshake has not completed.  Its
	 * iopub is a PUB: it drops what it publishes before our subscription
	 * arrives, and the subscription leaves only after the handshake. */
	zsock_t *mon[KBOX_CH_COUNT];
	bool linked[KBOX_CH_COUNT];
	/* ipc: the socket files, held open (O_PATH) and connected to through
	 * /proc/self/fd, so that a kernel that replaces them (with a link to
	 * another socket of the host, say) cannot redirect us; -1 if none */
	int ipc_fd[KBOX_CH_COUNT];
	/* ipc: the sockets' directory (O_PATH), for a path by it when theirs
	 * is too long for a unix socket (kbox__unix_path); -1 if none */
	int ipc_dir_fd;
	bool must_pin;            /* the kernel has answered: never connect by path */
	bool settle; /* the last execute failed with stop_on_error: kernel may still abort */

	/* on a loop */
	kbox_loop_t *loop; /* attached to, or NULL */
	chan_t chan[KBOX_CH_COUNT];
	request_t *requests;
	ready_t *ready;
	kbox_exec_t *exec;
	unsigned long exec_epoch; /* executions ended so far */
	int t_alive;              /* the alive hook's tick while requests wait, or 0 */
	kbox_iopub_cb *iopub_cb;
	void *iopub_arg;
	bucket_t iopub_bucket; /* output between executions */
	size_t iopub_dropped, iopub_dropped_bytes;
	bool shedding;            /* kbox_client_set_shedding */
	guard_t *guards;
	bool destroying;
};

struct kbox_exec {
	kbox_exec_status_t status;
	int count;
	kbox_msg_t *reply;
	bool interrupted;
	double seconds;
	kbox_msg_t **outputs;
	size_t n_outputs, cap_outputs;
	size_t inputs_answered;
	size_t rate_dropped, rate_dropped_bytes;
	kbox_exec_drops_t drops;
	/* the kernel's message numbers seen during the execution (seq_note) */
	char seq_prefix[192];
	bool seq_set;
	unsigned long long seq_min, seq_max, seq_seen;
	unsigned char *seq_bits; /* the last SEQ_WINDOW numbers: seen or not */
	bool output_lost;
	bool went_idle;      /* the kernel said idle for it */
	char reason[KBOX_ERROR_MSG_MAX];
	kbox_errcode_t unsent; /* the execute_request could not be sent: why (0: it was) */
	exec_run_t *run;       /* while in progress */
};

static int on_channel(kbox_loop_t *loop, void *arg);
static int on_monitor(kbox_loop_t *loop, void *arg);

/* Fill X's reason (a message for people: truncation is acceptable). */
static void set_reason(kbox_exec_t *x, const char *fmt, ...) KBOX_PRINTF(2, 3);
static void set_reason(kbox_exec_t *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->reason, sizeof x->reason, fmt, ap);
	va_end(ap);
}

/* ---- rate limit ---- */

/* A full bucket for MSGS_RATE and BYTES_RATE (0: the defaults; < 0: no
 * limit). */
static void bucket_init(bucket_t *b, double msgs_rate, double bytes_rate)
{
	b->msgs_rate = msgs_rate == 0 ? KBOX_RATE_MSGS_PER_SEC : msgs_rate;
	b->bytes_rate = bytes_rate == 0 ? KBOX_RATE_BYTES_PER_SEC : bytes_rate;
	b->msgs = b->msgs_rate * KBOX_RATE_WINDOW_SEC;
	b->bytes = b->bytes_rate * KBOX_RATE_WINDOW_SEC;
	b->last_ms = kbox__now_ms();
}

/* Take one message of SIZE bytes; false when it is over the limit. */
static bool bucket_take(bucket_t *b, size_t size)
{
	long long now = kbox__now_ms();
	double dt = (double)(now - b->last_ms) / 1000.0;
	bool ok = true;
	b->last_ms = now;
	if (b->msgs_rate > 0) {
		b->msgs += dt * b->msgs_rate;
		if (b->msgs > b->msgs_rate * KBOX_RATE_WINDOW_SEC)
			b->msgs = b->msgs_rate * KBOX_RATE_WINDOW_SEC;
		ok = b->msgs >= 1;
	}
	if (b->bytes_rate > 0) {
		b->bytes += dt * b->bytes_rate;
		if (b->bytes > b->bytes_rate * KBOX_RATE_WINDOW_SEC)
			b->bytes = b->bytes_rate * KBOX_RATE_WINDOW_SEC;
		/* a message larger than the window still passes when the bucket is
		 * not in deficit; it is charged in full, so what follows waits */
		ok = ok && b->bytes > 0;
	}
	if (ok) {
		if (b->msgs_rate > 0)
			b->msgs -= 1;
		if (b->bytes_rate > 0)
			b->bytes -= (double)size;
	}
	return ok;
}

/* ---- messages that never arrived ----
 *
 * jupyter_client's Session (ipykernel's) names each message it sends
 * "SESSION_PID_N", N counting every message of the kernel's session on every
 * channel.  Seen from the first message of an execution on (its status
 * busy), the numbers the client never saw are messages lost on the way:
 * what the kernel's iopub socket dropped when its queue to a reader that
 * fell behind was full (ZeroMQ's PUB drops silently).  Kernels that name
 * messages otherwise (a uuid) are not counted. */

#define SEQ_WINDOW 65536      /* numbers remembered, to count each once */
#define SEQ_JUMP (1ULL << 20) /* a larger jump is another numbering, not a loss */

/* Message ID (verified, or read unverified from a message dropped and
 * counted) came during X's run; OURS: its parent is X's request.  A
 * number is counted once (kernel code can send the same id again), older
 * than the window or too far ahead is ignored. */
static void seq_note(kbox_exec_t *x, const char *id, bool ours)
{
	const char *us;
	char *end;
	unsigned long long n;
	size_t plen;

	if (!x || !id || !(us = strrchr(id, '_')) || us[1] < '0' || us[1] > '9')
		return;
	errno = 0;
	n = strtoull(us + 1, &end, 10);
	plen = (size_t)(us - id);
	if (*end || errno || plen == 0 || plen >= sizeof x->seq_prefix)
		return;
	if (!x->seq_set) {
		if (!ours) /* what comes before the execution's first is not counted */
			return;
		if (!x->seq_bits && !(x->seq_bits = calloc(SEQ_WINDOW / 8, 1)))
			return;
		memcpy(x->seq_prefix, id, plen);
		x->seq_prefix[plen] = '\0';
		x->seq_set = true;
		x->seq_min = x->seq_max = n;
		x->seq_seen = 1;
		x->seq_bits[n % SEQ_WINDOW / 8] |= (unsigned char)(1u << (n % 8));
		return;
	}
	if (strlen(x->seq_prefix) != plen || memcmp(x->seq_prefix, id, plen) != 0 ||
	    n < x->seq_min || n > x->seq_max + SEQ_JUMP ||
	    (n <= x->seq_max && x->seq_max - n >= SEQ_WINDOW))
		return;
	if (n > x->seq_max) {
		/* the numbers passed over leave the window unseen */
		unsigned long long k = n - x->seq_max > SEQ_WINDOW ? SEQ_WINDOW : n - x->seq_max;
		for (unsigned long long m = n; k > 0; k--, m--)
			x->seq_bits[m % SEQ_WINDOW / 8] &= (unsigned char)~(1u << (m % 8));
		x->seq_max = n;
	} else if (x->seq_bits[n % SEQ_WINDOW / 8] & (1u << (n % 8))) {
		return; /* seen already */
	}
	x->seq_bits[n % SEQ_WINDOW / 8] |= (unsigned char)(1u << (n % 8));
	x->seq_seen++;
}

/* ---- reading a dropped stream message's content, without decoding it ---- */

static const char *js_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static int js_hex4(const char *p, const char *e, unsigned *v)
{
	*v = 0;
	if (e - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
		             : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
		             : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
		                                    : 16u;
		if (d > 15)
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* The JSON string at P (its opening quote): past its end, with the bytes
 * of its decoded UTF-8 in *LEN and (with OUT) its first OSZ-1 bytes as
 * written in OUT; NULL when it is not one. */
static const char *js_string(const char *p, const char *e, size_t *len, char *out, size_t osz)
{
	size_t n = 0, o = 0;
	unsigned v, lo;

	if (p >= e || *p != '"')
		return NULL;
	for (p++; p < e; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"') {
			if (out && osz)
				out[o] = '\0';
			*len = n;
			return p + 1;
		}
		if (out && o + 1 < osz)
			out[o++] = (char)c;
		if (c != '\\') {
			n++;
			continue;
		}
		if (++p >= e)
			return NULL;
		if (*p != 'u') {
			n++;
			continue;
		}
		if (js_hex4(p + 1, e, &v) < 0)
			return NULL;
		p += 4;
		if (v >= 0xd800 && v < 0xdc00 && e - p > 6 && p[1] == '\\' && p[2] == 'u' &&
		    js_hex4(p + 3, e, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
			n += 4; /* a surrogate pair: one code point beyond the BMP */
			p += 6;
		} else {
			n += v < 0x80 ? 1 : v < 0x800 ? 2 : 3;
		}
	}
	return NULL;
}

/* Past the JSON value at P, or NULL. */
static const char *js_skip(const char *p, const char *e)
{
	size_t l;
	int depth = 0;

	if (p < e && *p == '"')
		return js_string(p, e, &l, NULL, 0);
	if (p < e && *p != '{' && *p != '[') {
		while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' &&
		       *p != '\t' && *p != '\r')
			p++;
		return p;
	}
	while (p < e) {
		if (*p == '"') {
			if (!(p = js_string(p, e, &l, NULL, 0)))
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
		p++;
	}
	return NULL;
}

/* A stream message's content, P (N bytes, unverified): its stream (0
 * stdout, 1 stderr) in *WHICH and the bytes of its text in *BYTES.  False
 * when it has no text to count. */
static bool js_stream_text(const char *p, size_t n, int *which, size_t *bytes)
{
	const char *e = p + n;
	char key[8], v[8];
	size_t l, vl;
	bool found = false;

	*which = 0;
	*bytes = 0;
	p = js_ws(p, e);
	if (p >= e || *p++ != '{')
		return false;
	for (;;) {
		p = js_ws(p, e);
		if (p < e && *p == '}')
			break;
		if (!(p = js_string(p, e, &l, key, sizeof key)))
			return false;
		p = js_ws(p, e);
		if (p >= e || *p != ':')
			return false;
		p = js_ws(p + 1, e);
		if (l == 4 && strcmp(key, "text") == 0 && p < e && *p == '"')
			found = (p = js_string(p, e, bytes, NULL, 0)) != NULL;
		else if (l == 4 && strcmp(key, "name") == 0 && p < e && *p == '"') {
			if ((p = js_string(p, e, &vl, v, sizeof v)) && vl == 6 && strcmp(v, "stderr") == 0)
				*which = 1;
		} else
			p = js_skip(p, e);
		if (!p)
			return false;
		p = js_ws(p, e);
		if (p < e && *p == ',') {
			p++;
			continue;
		}
		break;
	}
	return found;
}

/* Is Z (raw, unverified) an output message that may be dropped unread?
 * Only its header's msg_type and its parent's msg_id are looked at; nothing
 * is acted on.  *OURS tells whether the parent is REQ_ID (never when NULL).
 * For a stream message of ours, *STREAM is 0 (stdout) or 1 (stderr) and
 * *TEXT_BYTES the bytes of its text; else *STREAM is -1. */
static bool droppable_output(zmsg_t *z, const char *req_id, bool *ours, int *stream,
                             size_t *text_bytes, char *msg_id, size_t id_size)
{
	const size_t dlen = sizeof KBOX_DELIMITER - 1;
	zframe_t *f;
	bool found = false, out = false;

	bool is_stream = false;

	*ours = false;
	*stream = -1;
	*text_bytes = 0;
	msg_id[0] = '\0';
	for (f = zmsg_first(z); f; f = zmsg_next(z))
		if (zframe_size(f) == dlen && memcmp(zframe_data(f), KBOX_DELIMITER, dlen) == 0) {
			found = true;
			break;
		}
	/* (unverified: only a short header and parent are parsed) */
	if (found && zmsg_next(z) && (f = zmsg_next(z)) && /* skip the signature */
	    zframe_size(f) <= KBOX_MAX_HEADER_BYTES) {
		json_t *h = json_loadb((const char *)zframe_data(f), zframe_size(f), 0, NULL);
		json_t *t = json_object_get(h, "msg_type");
		json_t *mid = json_object_get(h, "msg_id");
		if (json_is_string(mid))
			snprintf(msg_id, id_size, "%s", json_string_value(mid));
		if (json_is_string(t)) {
			const char *s = json_string_value(t);
			is_stream = strcmp(s, "stream") == 0;
			out = is_stream || strcmp(s, "display_data") == 0 ||
			      strcmp(s, "update_display_data") == 0;
		}
		json_decref(h);
		if (out && (f = zmsg_next(z)) && zframe_size(f) <= KBOX_MAX_HEADER_BYTES) {
			json_t *p = json_loadb((const char *)zframe_data(f), zframe_size(f), 0, NULL);
			json_t *id = json_object_get(p, "msg_id");
			*ours = req_id && json_is_string(id) &&
			        strcmp(json_string_value(id), req_id) == 0;
			json_decref(p);
			/* metadata, then content: the text is counted, not decoded */
			if (*ours && is_stream && zmsg_next(z) && (f = zmsg_next(z)) &&
			    js_stream_text((const char *)zframe_data(f), zframe_size(f), stream,
			                   text_bytes) == false)
				*stream = -1;
		}
	}
	return out;
}

/* ---- sockets ---- */

/* The endpoint of the socket file PATH, not made yet, into EP: "ipc://PATH",
 * or, when PATH is too long for a unix socket, its name through a
 * descriptor of its directory that SELF holds.  0 or -1 with ERR. */
static int ipc_by_path(kbox_client_t *self, const char *path, char *ep, size_t size,
                       kbox_error_t *err)
{
	char dir[PATH_MAX], sun[KBOX__SUN_PATH];
	const char *slash = strrchr(path, '/');
	if (strlen(path) < sizeof sun || !slash || slash == path ||
	    (size_t)(slash - path) >= sizeof dir) {
		snprintf(ep, size, "ipc://%s", path);
		return 0;
	}
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	if (kbox__unix_path(sun, sizeof sun, dir, slash + 1, &self->ipc_dir_fd, err) < 0)
		return -1;
	snprintf(ep, size, "ipc://%s", sun);
	return 0;
}

/* The endpoint to connect CH to, into EP: for ipc, the socket file held
 * open without following a link (/proc/self/fd/N) once it exists; a file
 * there that is not a socket is refused.  Before the kernel has made it
 * (a client that waits for a starting kernel, whose code has not run
 * yet), the path itself (ipc_by_path), until the kernel answers (then the
 * channels connected by path are made again, pinned: see ready_pin).  After that
 * a missing socket file is an error: libzmq would follow whatever link
 * code in the sandbox put there.  0 or -1 with ERR. */
static int pin_ipc(kbox_client_t *self, kbox_channel_t ch, char *ep, size_t size,
                   kbox_error_t *err)
{
	const char *endpoint = kbox_conn_endpoint(self->conn, ch);
	struct stat st;
	int fd;
	snprintf(ep, size, "%s", endpoint);
	if (kbox_conn_transport(self->conn) != KBOX_TRANSPORT_IPC || strncmp(endpoint, "ipc://", 6))
		return 0;
	if (self->ipc_fd[ch] >= 0) {
		close(self->ipc_fd[ch]);
		self->ipc_fd[ch] = -1;
	}
	fd = open(endpoint + 6, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && self->must_pin)
		return kbox__err(err, KBOX_E_DEAD,
		                 "the kernel's %s socket %s is gone or was replaced",
		                 kbox_channel_name(ch), endpoint + 6);
	if (fd < 0)
		return errno == ENOENT ? ipc_by_path(self, endpoint + 6, ep, size, err)
		                       : kbox__err_sys(err, "%s socket %s", kbox_channel_name(ch),
		                                       endpoint + 6);
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(fd);
		return kbox__err(err, KBOX_E_INVALID,
		                 "the %s socket %s is not a socket (%s): refusing to connect",
		                 kbox_channel_name(ch), endpoint + 6,
		                 S_ISLNK(st.st_mode) ? "a symbolic link" : "another kind of file");
	}
	self->ipc_fd[ch] = fd;
	snprintf(ep, size, "ipc:///proc/self/fd/%d", fd);
	return 0;
}

/* A new socket for CH, connected (with its handshake monitor for stdin
 * and iopub), not yet watched by a loop.  NULL with ERR. */
static zsock_t *make_socket(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err)
{
	char ep[PATH_MAX + 32];
	static const int types[KBOX_CH_COUNT] = {ZMQ_DEALER, ZMQ_SUB, ZMQ_DEALER, ZMQ_DEALER,
	                                         ZMQ_REQ};
	zsock_t *s = zsock_new(types[ch]);
	void *h;

	if (!s) {
		kbox__err_sys(err, "cannot create the %s socket", kbox_channel_name(ch));
		return NULL;
	}
	h = zsock_resolve(s);
	/* requests we sent get 1 s to leave; subscriptions and beats need none */
	zsock_set_linger(s, (ch == KBOX_CH_SHELL || ch == KBOX_CH_CONTROL) ? 1000 : 0);
	/* a starting kernel binds its sockets a moment after we connect: try
	 * again every 10 ms, not libzmq's 100 (backing off to 100) */
	zsock_set_reconnect_ivl(s, 10);
	zsock_set_reconnect_ivl_max(s, 100);
	/* a full queue (peer gone, 1000 unanswered messages) is an error, not a hang */
	if (ch != KBOX_CH_IOPUB)
		zsock_set_sndtimeo(s, 0);
	if (ch == KBOX_CH_SHELL || ch == KBOX_CH_STDIN || ch == KBOX_CH_CONTROL)
		zmq_setsockopt(h, ZMQ_ROUTING_ID, self->session, strlen(self->session));
	if ((ch == KBOX_CH_STDIN || ch == KBOX_CH_IOPUB) && !self->mon[ch]) {
		char mon_ep[64];
		self->linked[ch] = false;
		snprintf(mon_ep, sizeof mon_ep, "inproc://kbox-%s-monitor-%p", kbox_channel_name(ch),
		         (void *)self);
		if (zmq_socket_monitor(h, mon_ep, ZMQ_EVENT_HANDSHAKE_SUCCEEDED) == 0) {
			self->mon[ch] = zsock_new(ZMQ_PAIR);
			if (self->mon[ch] && zsock_connect(self->mon[ch], "%s", mon_ep) < 0) {
				zsock_destroy(&self->mon[ch]);
				zmq_socket_monitor(h, NULL, 0);
			}
		}
	}
	if (ch == KBOX_CH_IOPUB) {
		int64_t maxmsg = KBOX_MAX_MESSAGE_BYTES;
		int hwm = IOPUB_RCVHWM;
		/* a bounded queue: when it is full libzmq stops reading (the
		 * kernel's own PUB socket queues, then drops, on its side) */
		zmq_setsockopt(h, ZMQ_RCVHWM, &hwm, sizeof hwm);
		zmq_setsockopt(h, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
		zsock_set_subscribe(s, "");
	}
	if (pin_ipc(self, ch, ep, sizeof ep, err) < 0) {
		zsock_destroy(&s);
		return NULL;
	}
	if (zsock_connect(s, "%s", ep) < 0) {
		kbox__err(err, KBOX_E_SYSTEM, "cannot connect the %s socket to %s: %s",
		          kbox_channel_name(ch), kbox_conn_endpoint(self->conn, ch),
		          zmq_strerror(zmq_errno()));
		zsock_destroy(&s);
		return NULL;
	}
	return s;
}

/* Register CH's socket and monitor with the loop SELF is attached to (if
 * any).  0 or -1 with ERR. */
static int watch(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err)
{
	if (!self->loop)
		return 0;
	if (self->sock[ch] && kbox__loop_add_socket(self->loop, zsock_resolve(self->sock[ch]),
	                                            on_channel, &self->chan[ch], err) < 0)
		return -1;
	if (self->mon[ch] && kbox__loop_add_socket(self->loop, zsock_resolve(self->mon[ch]),
	                                           on_monitor, &self->chan[ch], err) < 0)
		return -1;
	return 0;
}

/* Unregister CH's socket and monitor from the loop (they stay open). */
static void unwatch(kbox_client_t *self, kbox_channel_t ch)
{
	if (!self->loop)
		return;
	if (self->sock[ch])
		kbox__loop_remove_socket(self->loop, zsock_resolve(self->sock[ch]));
	if (self->mon[ch])
		kbox__loop_remove_socket(self->loop, zsock_resolve(self->mon[ch]));
}

/* Stop CH's monitor, if it has one. */
static void unmonitor(kbox_client_t *self, kbox_channel_t ch)
{
	if (!self->mon[ch])
		return;
	if (self->loop)
		kbox__loop_remove_socket(self->loop, zsock_resolve(self->mon[ch]));
	if (self->sock[ch])
		zmq_socket_monitor(zsock_resolve(self->sock[ch]), NULL, 0);
	zsock_destroy(&self->mon[ch]);
}

/* Close CH's socket (and its monitor): the next use connects a new one. */
static void close_channel(kbox_client_t *self, kbox_channel_t ch)
{
	unmonitor(self, ch);
	if (!self->sock[ch])
		return;
	if (self->loop)
		kbox__loop_remove_socket(self->loop, zsock_resolve(self->sock[ch]));
	zsock_destroy(&self->sock[ch]);
}

/* CH's socket, connected now (and watched by the loop) if it was not yet.
 * NULL with ERR. */
static zsock_t *sock_of(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err)
{
	if (self->sock[ch])
		return self->sock[ch];
	self->sock[ch] = make_socket(self, ch, err);
	if (self->sock[ch] && watch(self, ch, err) < 0)
		close_channel(self, ch);
	return self->sock[ch];
}

/* Is a message waiting on CH?  (Never blocks; false without a socket.) */
static bool readable(kbox_client_t *self, kbox_channel_t ch)
{
	return self->sock[ch] && (zsock_events(self->sock[ch]) & ZMQ_POLLIN);
}

/* ---- the client ---- */

kbox_client_t *kbox_client_new(const kbox_conn_t *conn, kbox_error_t *err)
{
	kbox_client_t *self;
	const unsigned char *key;
	size_t keylen;

	if (kbox_init() < 0) {
		kbox__err(err, KBOX_E_SYSTEM, "libsodium failed to initialise");
		return NULL;
	}
	self = calloc(1, sizeof *self);
	if (!self) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	self->ipc_dir_fd = -1;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		self->ipc_fd[ch] = -1;
		self->chan[ch].client = self;
		self->chan[ch].ch = ch;
	}
	bucket_init(&self->iopub_bucket, 0, 0);
	kbox_uuid(self->session);
	/* the environment's, as Python's getpass.getuser(); without one
	 * "kbox", as jupyter_client's Session falls back to a fixed name
	 * rather than ask NSS (a lookup costs a short-lived process ~0.3 ms) */
	{
		static const char *const vars[] = {"LOGNAME", "USER", "LNAME", "USERNAME"};
		const char *u = NULL;
		for (size_t i = 0; i < 4 && !u; i++)
			if ((u = getenv(vars[i])) && !*u)
				u = NULL;
		snprintf(self->username, sizeof self->username, "%s", u ? u : "kbox");
	}
	self->conn = kbox_conn_dup(conn);
	if (!self->conn) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	key = kbox_conn_key(self->conn, &keylen);
	self->auth = kbox_auth_new(kbox_conn_scheme(self->conn), key, keylen, 0, err);
	if (!self->auth)
		goto fail;
	/* shell and iopub now; control, stdin and heartbeat when first used
	 * (a short-lived client, like kbox exec, often needs none of them) */
	if (!(self->sock[KBOX_CH_SHELL] = make_socket(self, KBOX_CH_SHELL, err)) ||
	    !(self->sock[KBOX_CH_IOPUB] = make_socket(self, KBOX_CH_IOPUB, err)))
		goto fail;
	return self;
fail:
	kbox_client_destroy(&self);
	return NULL;
}

void kbox_client_destroy(kbox_client_t **self_p)
{
	kbox_client_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	*self_p = NULL;
	if (self->destroying) /* from a callback of the detach below */
		return;
	self->destroying = true;
	for (guard_t *g = self->guards; g; g = g->next)
		g->gone = true;
	kbox_client_detach(self);
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		unmonitor(self, ch);
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		zsock_destroy(&self->sock[ch]);
		if (self->ipc_fd[ch] >= 0)
			close(self->ipc_fd[ch]);
	}
	if (self->ipc_dir_fd >= 0)
		close(self->ipc_dir_fd);
	kbox_auth_destroy(&self->auth);
	kbox_conn_destroy(&self->conn);
	json_decref(self->kernel_info);
	free(self);
}

void kbox_client_set_hooks(kbox_client_t *self, const kbox_client_hooks_t *hooks)
{
	if (hooks)
		self->hooks = *hooks;
	else
		memset(&self->hooks, 0, sizeof self->hooks);
}

const char *kbox_client_session(const kbox_client_t *self) { return self->session; }
json_t *kbox_client_kernel_info(const kbox_client_t *self) { return self->kernel_info; }
unsigned long kbox_client_dropped(const kbox_client_t *self) { return self->dropped; }
const char *kbox_client_last_drop(const kbox_client_t *self) { return self->last_drop; }

/* True when the owner says the process is gone. */
static bool owner_says_dead(const kbox_client_t *self)
{
	return self->hooks.alive && !self->hooks.alive(self->hooks.arg);
}

/* ---- send / receive ---- */

kbox_msg_t *kbox_client_msg(kbox_client_t *self, const char *msg_type, json_t **content_p)
{
	return kbox_msg_new(msg_type, self->session, self->username, content_p);
}

int kbox_client_send(kbox_client_t *self, kbox_channel_t channel, const kbox_msg_t *msg,
                     kbox_error_t *err)
{
	zmsg_t *z;
	if (channel != KBOX_CH_SHELL && channel != KBOX_CH_CONTROL && channel != KBOX_CH_STDIN)
		return kbox__err(err, KBOX_E_INVALID, "cannot send on the %s channel",
		                 kbox_channel_name(channel));
	if (!sock_of(self, channel, err))
		return -1;
	z = kbox__msg_encode(msg, self->auth, err);
	if (!z)
		return -1;
	if (zmsg_send(&z, self->sock[channel]) < 0) {
		zmsg_destroy(&z);
		return kbox__err(err, KBOX_E_SYSTEM, "sending %s on %s failed: %s", kbox_msg_type(msg),
		                 kbox_channel_name(channel), zmq_strerror(zmq_errno()));
	}
	return 0;
}

/* Read one message from CH without waiting.  Returns the decoded message,
 * or NULL when there was none or it was invalid (dropped and counted). */
static kbox_msg_t *read_one(kbox_client_t *self, kbox_channel_t ch)
{
	kbox_error_t e = {0};
	zmsg_t *z = readable(self, ch) ? zmsg_recv(self->sock[ch]) : NULL;
	kbox_msg_t *msg;

	if (!z)
		return NULL;
	msg = kbox__msg_decode_zmsg(self->auth, z, &e);
	zmsg_destroy(&z);
	if (!msg) {
		self->dropped++;
		snprintf(self->last_drop, sizeof self->last_drop, "%s on %s: dropped", e.msg,
		         kbox_channel_name(ch));
	} else if (self->exec && self->exec->run && self->exec->run->phase >= X_RUN) {
		kbox_exec_t *x = self->exec;
		const char *pid = kbox_msg_parent_id(msg);
		seq_note(x, kbox_msg_id(msg), pid && strcmp(pid, x->run->req_id) == 0);
	}
	return msg;
}

/* Wait up to TIMEOUT_MS (-1 forever) for input on the channels in MASK
 * (bit 1<<ch).  Returns a mask of the readable ones, 0 on timeout, -1 on error. */
static int poll_channels(kbox_client_t *self, unsigned mask, long timeout_ms)
{
	zmq_pollitem_t items[KBOX_CH_COUNT];
	int chs[KBOX_CH_COUNT], n = 0, rc, out = 0;

	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		if ((mask & (1u << ch)) && self->sock[ch]) { /* nothing comes on one not connected */
			items[n].socket = zsock_resolve(self->sock[ch]);
			items[n].fd = 0;
			items[n].events = ZMQ_POLLIN;
			items[n].revents = 0;
			chs[n++] = ch;
		}
	rc = zmq_poll(items, n, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -1;
	for (int i = 0; i < n; i++)
		if (items[i].revents & ZMQ_POLLIN)
			out |= 1 << chs[i];
	return out;
}

/* Milliseconds left until DEADLINE (a kbox__now_ms value; 0 = none → -1). */
static long remaining(long long deadline)
{
	long long left;
	if (!deadline)
		return -1;
	left = deadline - kbox__now_ms();
	return left > 0 ? (long)left : 0;
}

kbox_msg_t *kbox_client_recv(kbox_client_t *self, kbox_channel_t channel, int timeout_ms,
                             kbox_error_t *err)
{
	long long deadline = timeout_ms > 0 ? kbox__now_ms() + timeout_ms : 0;
	char t[32];

	if ((unsigned)channel >= KBOX_CH_HB) {
		kbox__err(err, KBOX_E_INVALID, "cannot receive messages on the %s channel",
		          kbox_channel_name(channel));
		return NULL;
	}
	for (;;) {
		long wait = timeout_ms == 0 ? 0 : timeout_ms < 0 ? -1 : remaining(deadline);
		int r = poll_channels(self, 1u << channel, wait);
		if (r < 0) {
			kbox__err(err, KBOX_E_SYSTEM, "poll on %s failed: %s", kbox_channel_name(channel),
			          zmq_strerror(zmq_errno()));
			return NULL;
		}
		if (r) {
			kbox_msg_t *msg = read_one(self, channel);
			if (msg)
				return msg;
			continue;
		}
		if (timeout_ms >= 0 && (timeout_ms == 0 || remaining(deadline) == 0))
			break;
	}
	kbox__fmt_ms(t, sizeof t, timeout_ms);
	kbox__err(err, KBOX_E_TIMEOUT, "no message on %s within %s", kbox_channel_name(channel), t);
	return NULL;
}

/* ---- heartbeat ---- */

int kbox_client_heartbeat(kbox_client_t *self, int timeout_ms)
{
	zsock_t *hb = sock_of(self, KBOX_CH_HB, NULL);
	if (!hb)
		return -1;
	if (zstr_send(hb, "ping") == 0 && poll_channels(self, 1u << KBOX_CH_HB, timeout_ms) > 0) {
		zmsg_t *z = zmsg_recv(hb);
		if (z) {
			zmsg_destroy(&z);
			return 0;
		}
	}
	/* A REQ socket that missed its reply is stuck: make a new one. */
	close_channel(self, KBOX_CH_HB); /* the next beat connects a new one */
	return -1;
}

/* ---- callbacks and the client's lifetime ---- */

/* Before code that goes on after a callback: kbox_client_destroy sets
 * G->gone, after which the client must not be touched. */
static void guard_on(kbox_client_t *self, guard_t *g)
{
	g->gone = false;
	g->next = self->guards;
	self->guards = g;
}

/* After it: true when SELF is gone (then nothing of it may be touched). */
static bool guard_off(kbox_client_t *self, guard_t *g)
{
	if (g->gone)
		return true;
	self->guards = g->next;
	return false;
}

/* A one-shot timer of the loop SELF is attached to: its id, or 0 when it
 * could not be made (out of memory). */
static int add_timer(kbox_client_t *self, long long ms, kbox_loop_fn *fn, void *arg)
{
	int id = kbox_loop_add_timer(self->loop, ms < 0 ? 0 : ms > INT_MAX ? INT_MAX : (int)ms,
	                             false, fn, arg, NULL);
	return id > 0 ? id : 0;
}

/* Cancel the timer *ID (0: none) and forget it. */
static void cancel_timer(kbox_client_t *self, int *id)
{
	if (*id > 0 && self->loop)
		kbox_loop_cancel_timer(self->loop, *id);
	*id = 0;
}

/* Let the iopub socket process its handshake, which sends our subscription. */
static void subscribe_now(kbox_client_t *self)
{
	int events;
	size_t len = sizeof events;
	if (self->sock[KBOX_CH_IOPUB])
		zmq_getsockopt(zsock_resolve(self->sock[KBOX_CH_IOPUB]), ZMQ_EVENTS, &events, &len);
}

static void alive_tick_arm(kbox_client_t *self);

/* ---- requests on a loop ---- */

/* Free R (sent or not); accepts NULL. */
static void request_free(request_t *r)
{
	if (!r)
		return;
	kbox_msg_destroy(&r->msg);
	free(r);
}

/* Take R off SELF's list and cancel its timer; its callback is then the
 * caller's to call (or not). */
static void request_unlink(kbox_client_t *self, request_t *r)
{
	for (request_t **p = &self->requests; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	r->next = NULL;
	cancel_timer(self, &r->timer);
}

/* End R with REPLY (passed on) or ERR: its callback is the last thing done. */
static void request_end(kbox_client_t *self, request_t *r, kbox_msg_t *reply,
                        const kbox_error_t *err)
{
	kbox_reply_cb *cb = r->cb;
	void *arg = r->arg;
	request_unlink(self, r);
	request_free(r);
	cb(arg, reply, err);
}

/* Forget the requests OWNER made, without their callbacks. */
static void requests_cancel(kbox_client_t *self, const void *owner)
{
	request_t *r = self->requests;
	while (r) {
		request_t *next = r->next;
		if (r->owner == owner) {
			request_unlink(self, r);
			request_free(r);
		}
		r = next;
	}
}

/* No reply within the request's time: it fails with KBOX_E_TIMEOUT. */
static int on_request_timeout(kbox_loop_t *loop, void *arg)
{
	request_t *r = arg;
	kbox_error_t e = {0};
	char t[32];
	(void)loop;
	r->timer = 0; /* spent */
	kbox__fmt_ms(t, sizeof t, r->timeout_ms);
	kbox__err(&e, KBOX_E_TIMEOUT, "kernel did not answer %s within %s", kbox_msg_type(r->msg), t);
	request_end(r->client, r, NULL, &e);
	return 0;
}

/* Send a request of MSG_TYPE on CHANNEL; its reply (or the failure to get
 * one within TIMEOUT_MS, <= 0: KBOX_REQUEST_TIMEOUT_MS) goes to CB(ARG)
 * from the loop.  Takes *CONTENT_P.  OWNER: see request_t.  NULL with ERR
 * when it could not be sent (CB is then not called). */
static request_t *request_start(kbox_client_t *self, kbox_channel_t channel,
                                const char *msg_type, json_t **content_p, int timeout_ms,
                                void *owner, kbox_reply_cb *cb, void *arg, kbox_error_t *err)
{
	kbox_msg_t *msg = kbox_client_msg(self, msg_type, content_p);
	request_t *r = NULL, **tail;

	if (!msg) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	if (channel != KBOX_CH_SHELL && channel != KBOX_CH_CONTROL) {
		kbox__err(err, KBOX_E_INVALID, "requests go on shell or control, not %s",
		          kbox_channel_name(channel));
		goto fail;
	}
	if (!self->loop) {
		kbox__err(err, KBOX_E_INVALID, "%s: the client is not attached to a loop", msg_type);
		goto fail;
	}
	if (!(r = calloc(1, sizeof *r))) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	r->client = self;
	r->msg = msg;
	msg = NULL;
	r->channel = channel;
	r->timeout_ms = timeout_ms > 0 ? timeout_ms : KBOX_REQUEST_TIMEOUT_MS;
	r->owner = owner;
	r->cb = cb;
	r->arg = arg;
	if (!(r->timer = add_timer(self, r->timeout_ms, on_request_timeout, r))) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	if (kbox_client_send(self, channel, r->msg, err) < 0)
		goto fail;
	for (tail = &self->requests; *tail; tail = &(*tail)->next)
		;
	*tail = r;
	alive_tick_arm(self);
	return r;
fail:
	if (r)
		cancel_timer(self, &r->timer);
	request_free(r);
	kbox_msg_destroy(&msg);
	return NULL;
}

/* ---- readiness on a loop ---- */

/* Take RD off SELF with its timers and request; its callback is then the
 * caller's to call (or not). */
static void ready_unlink(kbox_client_t *self, ready_t *rd)
{
	if (self->ready == rd)
		self->ready = NULL;
	cancel_timer(self, &rd->t_deadline);
	cancel_timer(self, &rd->t_phase);
	requests_cancel(self, rd);
}

/* End RD: ready (ERR NULL) or not; its callback is the last thing done. */
static void ready_end(kbox_client_t *self, ready_t *rd, const kbox_error_t *err)
{
	kbox_ready_cb *cb = rd->cb;
	void *arg = rd->arg;
	ready_unlink(self, rd);
	free(rd);
	cb(arg, err ? -1 : 0, err);
}

/* The time is up before the kernel was found ready: say why. */
static void ready_expire(kbox_client_t *self, ready_t *rd)
{
	kbox_error_t e = {0};
	char t[32];
	if (owner_says_dead(self)) {
		kbox__err(&e, KBOX_E_DEAD, "kernel exited before it was ready");
	} else {
		kbox__fmt_ms(t, sizeof t, rd->timeout_ms);
		kbox__err(&e, KBOX_E_TIMEOUT,
		          rd->shell_answered
		              ? "kernel answered kernel_info but no iopub message reached us within %s"
		              : "kernel did not answer kernel_info within %s",
		          t);
	}
	ready_end(self, rd, &e);
}

static void ready_on_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err);

/* Ask kernel_info (again): one attempt of up to 1 s, within the deadline. */
static void ready_ask(kbox_client_t *self, ready_t *rd)
{
	kbox_error_t e = {0};
	long long left = rd->deadline - kbox__now_ms();
	if (left <= 0) {
		ready_expire(self, rd);
		return;
	}
	rd->phase = READY_ASK;
	if (!request_start(self, KBOX_CH_SHELL, "kernel_info_request", NULL,
	                   (int)(left < ATTEMPT_MS ? left : ATTEMPT_MS), rd, ready_on_reply, rd, &e))
		ready_end(self, rd, &e);
}

/* Drained (or 200 ms spent draining): wait for stdin's handshake if its
 * socket is connected, else done. */
static void ready_flushed(kbox_client_t *self, ready_t *rd)
{
	cancel_timer(self, &rd->t_phase);
	if (self->sock[KBOX_CH_STDIN] && self->mon[KBOX_CH_STDIN] && !self->linked[KBOX_CH_STDIN]) {
		rd->phase = READY_STDIN; /* on_monitor or the deadline ends it */
		return;
	}
	ready_end(self, rd, NULL);
}

/* 200 ms of flushing iopub are enough. */
static int ready_on_flush_end(kbox_loop_t *loop, void *arg)
{
	ready_t *rd = arg;
	(void)loop;
	rd->t_phase = 0;
	ready_flushed(rd->client, rd);
	return 0;
}

/* iopub works: read what is queued there (for 200 ms at most), then done. */
static void ready_flush(kbox_client_t *self, ready_t *rd)
{
	rd->phase = READY_FLUSH;
	cancel_timer(self, &rd->t_phase);
	if (!readable(self, KBOX_CH_IOPUB) ||
	    !(rd->t_phase = add_timer(self, DRAIN_MS, ready_on_flush_end, rd)))
		ready_flushed(self, rd);
}

/* Something came on iopub (after on_iopub has read it). */
static void ready_heard(kbox_client_t *self, ready_t *rd)
{
	if (rd->phase == READY_IOPUB)
		ready_flush(self, rd);
	else if (rd->phase == READY_FLUSH && !readable(self, KBOX_CH_IOPUB))
		ready_flushed(self, rd);
}

/* Shell answered but iopub stayed silent: ask again. */
static int ready_on_iopub_wait(kbox_loop_t *loop, void *arg)
{
	ready_t *rd = arg;
	(void)loop;
	rd->t_phase = 0;
	/* our subscription may have reached the kernel only after it
	 * published this request's status: ask again, soon */
	if (rd->iopub_wait < IOPUB_WAIT_MAX_MS)
		rd->iopub_wait *= 2;
	ready_ask(rd->client, rd);
	return 0;
}

static int ready_on_link_wait(kbox_loop_t *loop, void *arg);

/* The kernel answered, so its socket files exist: the channels that were
 * connected by path are made again, pinned, and from now on none is
 * connected by path.  True when it did (the wait goes on: iopub's new
 * subscription, then kernel_info again), false when nothing needed it. */
static bool ready_pin(kbox_client_t *self, ready_t *rd)
{
	kbox_error_t e = {0};
	bool again = false;
	if (self->must_pin || kbox_conn_transport(self->conn) != KBOX_TRANSPORT_IPC)
		return false;
	self->must_pin = true;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		if (!self->sock[ch] || self->ipc_fd[ch] >= 0)
			continue;
		close_channel(self, (kbox_channel_t)ch);
		if (!sock_of(self, (kbox_channel_t)ch, &e)) {
			ready_end(self, rd, &e);
			return true;
		}
		again = true;
	}
	if (!again)
		return false;
	rd->iopub_heard = false;
	rd->phase = READY_LINK; /* on_monitor or this timer asks again */
	if (!(rd->t_phase = add_timer(self, IOPUB_LINK_MS, ready_on_link_wait, rd)))
		ready_ask(self, rd);
	return true;
}

/* The kernel_info attempt is over: answered (then listen on iopub), or
 * not (then ask again, within the deadline). */
static void ready_on_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	ready_t *rd = arg;
	kbox_client_t *self = rd->client;
	if (!reply) {
		if (err && err->code != KBOX_E_TIMEOUT)
			ready_end(self, rd, err);
		else
			ready_ask(self, rd);
		return;
	}
	rd->shell_answered = true;
	json_decref(self->kernel_info);
	self->kernel_info = json_incref(kbox_msg_content(reply));
	kbox_msg_destroy(&reply);
	if (ready_pin(self, rd))
		return;
	/* shell works; is iopub connected yet? */
	if (rd->iopub_heard) {
		ready_flush(self, rd);
		return;
	}
	rd->phase = READY_IOPUB;
	if (!(rd->t_phase = add_timer(self, rd->iopub_wait, ready_on_iopub_wait, rd)))
		ready_ask(self, rd);
}

/* iopub's handshake did not come within 0.25 s: ask anyway. */
static int ready_on_link_wait(kbox_loop_t *loop, void *arg)
{
	ready_t *rd = arg;
	(void)loop;
	rd->t_phase = 0;
	ready_ask(rd->client, rd);
	return 0;
}

/* The readiness wait's TIMEOUT_MS are over. */
static int ready_on_deadline(kbox_loop_t *loop, void *arg)
{
	ready_t *rd = arg;
	(void)loop;
	rd->t_deadline = 0;
	/* past the kernel_info round trip the kernel is ready: what is left
	 * (the flush, stdin's handshake) only gets the time there is */
	if (rd->phase == READY_FLUSH || rd->phase == READY_STDIN)
		ready_end(rd->client, rd, NULL);
	else
		ready_expire(rd->client, rd);
	return 0;
}

/* Begin a readiness wait (see kbox_client_ready_begin) for OWNER (NULL:
 * the caller).  NULL with ERR when it could not begin. */
static ready_t *ready_start(kbox_client_t *self, int timeout_ms, void *owner, kbox_ready_cb *cb,
                            void *arg, kbox_error_t *err)
{
	ready_t *rd;
	if (!self->loop) {
		kbox__err(err, KBOX_E_INVALID, "wait_ready: the client is not attached to a loop");
		return NULL;
	}
	if (self->ready) {
		kbox__err(err, KBOX_E_INVALID, "wait_ready: already waiting for the kernel");
		return NULL;
	}
	if (!(rd = calloc(1, sizeof *rd))) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	rd->client = self;
	rd->timeout_ms = timeout_ms > 0 ? timeout_ms : READY_MS;
	rd->deadline = kbox__now_ms() + rd->timeout_ms;
	rd->iopub_wait = IOPUB_WAIT_MS;
	rd->owner = owner;
	rd->cb = cb;
	rd->arg = arg;
	if (!(rd->t_deadline = add_timer(self, rd->timeout_ms, ready_on_deadline, rd)))
		goto nomem;
	/* Ask only once our subscription is on its way: wait (briefly) for
	 * iopub's handshake, then let the socket process it, which sends the
	 * subscription.  Then this request's status messages reach us and
	 * one round trip is usually enough; if not, ask again. */
	if (self->sock[KBOX_CH_IOPUB] && self->mon[KBOX_CH_IOPUB] && !self->linked[KBOX_CH_IOPUB]) {
		rd->phase = READY_LINK; /* on_monitor or this timer asks */
		rd->t_phase = add_timer(self, rd->timeout_ms < IOPUB_LINK_MS ? rd->timeout_ms
		                                                               : IOPUB_LINK_MS,
		                        ready_on_link_wait, rd);
		if (!rd->t_phase)
			goto nomem;
	} else {
		subscribe_now(self);
		rd->phase = READY_ASK;
		if (!request_start(self, KBOX_CH_SHELL, "kernel_info_request", NULL,
		                   rd->timeout_ms < ATTEMPT_MS ? rd->timeout_ms : ATTEMPT_MS, rd,
		                   ready_on_reply, rd, err))
			goto fail;
	}
	self->ready = rd;
	alive_tick_arm(self);
	return rd;
nomem:
	kbox__err(err, KBOX_E_NOMEM, "out of memory");
fail:
	ready_unlink(self, rd);
	free(rd);
	return NULL;
}

/* ---- execute ---- */

const char *kbox_exec_status_name(kbox_exec_status_t status)
{
	switch (status) {
	case KBOX_EXEC_OK: return "ok";
	case KBOX_EXEC_ERROR: return "error";
	case KBOX_EXEC_ABORTED: return "aborted";
	case KBOX_EXEC_TIMEOUT: return "timeout";
	case KBOX_EXEC_DIED: return "died";
	case KBOX_EXEC_INTERRUPTED: return "interrupted";
	}
	return "unknown";
}

/* Collect *MSG_P into X (taking it).  0, or -1 when out of memory. */
static int exec_keep(kbox_exec_t *x, kbox_msg_t **msg_p)
{
	if (x->n_outputs == x->cap_outputs) {
		size_t cap = x->cap_outputs ? x->cap_outputs * 2 : 8;
		kbox_msg_t **v = realloc(x->outputs, cap * sizeof *v);
		if (!v)
			return -1;
		x->outputs = v;
		x->cap_outputs = cap;
	}
	x->outputs[x->n_outputs++] = *msg_p;
	*msg_p = NULL;
	return 0;
}

/* Free RUN (its request and input lines); accepts NULL. */
static void exec_run_free(exec_run_t *run)
{
	if (!run)
		return;
	kbox_msg_destroy(&run->req);
	for (size_t i = 0; run->lines && i < run->o.n_input; i++)
		free(run->lines[i]);
	free(run->lines);
	free(run);
}

/* Finish X's bookkeeping and take it off SELF (timers, heartbeat, its
 * requests and readiness wait): DONE (*DONE_P with *ARG_P) is then the
 * caller's to call, last. */
static void exec_close(kbox_client_t *self, kbox_exec_t *x, kbox_exec_done_cb **done_p,
                       void **arg_p)
{
	exec_run_t *run = x->run;
	if (x->reply && !run->o.no_stop_on_error) {
		json_t *st = json_object_get(kbox_msg_content(x->reply), "status");
		self->settle = !json_is_string(st) || strcmp(json_string_value(st), "ok") != 0;
	}
	if (x->status == KBOX_EXEC_TIMEOUT && x->reply) {
		json_t *cnt = json_object_get(kbox_msg_content(x->reply), "execution_count");
		if (json_is_integer(cnt))
			x->count = (int)json_integer_value(cnt);
	}
	x->seconds = (double)(kbox__now_ms() - run->start) / 1000.0;
	cancel_timer(self, &run->t_deadline);
	cancel_timer(self, &run->t_watch);
	cancel_timer(self, &run->t_phase);
	cancel_timer(self, &run->t_hb);
	if (run->hb_waiting) /* a REQ socket whose echo is still out is stuck */
		close_channel(self, KBOX_CH_HB);
	if (self->ready && self->ready->owner == run) {
		ready_t *rd = self->ready;
		ready_unlink(self, rd);
		free(rd);
	}
	requests_cancel(self, run);
	if (self->exec == x)
		self->exec = NULL;
	self->exec_epoch++;
	*done_p = run->done;
	*arg_p = run->arg;
	exec_run_free(run);
	x->run = NULL;
}

/* End X as it stands: DONE is the last thing done. */
static void exec_end(kbox_client_t *self, kbox_exec_t *x)
{
	kbox_exec_done_cb *done;
	void *arg;
	exec_close(self, x, &done, &arg);
	done(arg, x);
}

/* End X with STATUS and REASON. */
static void exec_stop(kbox_client_t *self, kbox_exec_t *x, kbox_exec_status_t status,
                      const char *reason)
{
	x->status = status;
	set_reason(x, "%s", reason);
	exec_end(self, x);
}

/* Both the reply and idle came and the output queued behind them was
 * taken: the status is the reply's. */
static void exec_finish(kbox_client_t *self, kbox_exec_t *x)
{
	json_t *rc = kbox_msg_content(x->reply);
	json_t *st = json_object_get(rc, "status");
	json_t *cnt = json_object_get(rc, "execution_count");
	const char *s = json_is_string(st) ? json_string_value(st) : "";
	if (json_is_integer(cnt))
		x->count = (int)json_integer_value(cnt);
	if (x->interrupted && x->run->timed_out) {
		x->status = KBOX_EXEC_TIMEOUT;
		if (!x->reason[0]) {
			char t[32];
			kbox__fmt_ms(t, sizeof t, x->run->o.timeout_ms);
			set_reason(x, "timed out after %s; the kernel was interrupted (state kept)", t);
		}
	} else if (strcmp(s, "ok") == 0) {
		x->status = KBOX_EXEC_OK;
	} else if (strcmp(s, "aborted") == 0) {
		x->status = KBOX_EXEC_ABORTED;
		set_reason(x, "the kernel aborted this execution (an earlier one failed)");
	} else {
		x->status = KBOX_EXEC_ERROR;
	}
	exec_end(self, x);
}

/* 200 ms of draining are enough: a kernel may never stop printing. */
static int exec_on_drain_end(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	(void)loop;
	x->run->t_phase = 0;
	exec_finish(x->run->client, x);
	return 0;
}

/* Take our output already queued behind idle, for a bounded time and
 * through the rate limit (a kernel may never stop): on_iopub reads it. */
static void exec_drain(kbox_client_t *self, kbox_exec_t *x)
{
	x->run->phase = X_DRAIN;
	if (!readable(self, KBOX_CH_IOPUB) ||
	    !(x->run->t_phase = add_timer(self, DRAIN_MS, exec_on_drain_end, x)))
		exec_finish(self, x);
}

/* The readiness wait after iopub's reconnection is over: drain. */
static void exec_on_reconnected(void *arg, int rc, const kbox_error_t *err)
{
	kbox_exec_t *x = arg;
	kbox_client_t *self = x->run->client;
	if (rc < 0) {
		if (!self->sock[KBOX_CH_IOPUB])
			self->sock[KBOX_CH_IOPUB] = zsock_new(ZMQ_SUB);
		set_reason(x, "iopub could not be reconnected: %s", err->msg);
	}
	exec_drain(self, x);
}

/* The reply came, and idle too (or output was lost): no deadline or
 * heartbeat any more; drain, after reconnecting iopub if it was lost. */
static void exec_both(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	kbox_error_t e = {0};

	cancel_timer(self, &run->t_deadline);
	cancel_timer(self, &run->t_watch);
	cancel_timer(self, &run->t_hb);
	if (run->hb_waiting) {
		close_channel(self, KBOX_CH_HB);
		run->hb_waiting = false;
	}
	if (!x->output_lost) {
		exec_drain(self, x);
		return;
	}
	/* libzmq ends a connection that sent a message over ZMQ_MAXMSGSIZE
	 * and does not reconnect it: make a new SUB and wait until it hears
	 * the kernel again (a readiness wait of the caller's, if there is one,
	 * hears it as well) */
	run->phase = X_RECONNECT;
	close_channel(self, KBOX_CH_IOPUB);
	if (sock_of(self, KBOX_CH_IOPUB, &e) &&
	    (self->ready || ready_start(self, RECONNECT_MS, run, exec_on_reconnected, x, &e))) {
		if (self->ready->owner == run)
			return; /* exec_on_reconnected goes on */
	} else {
		if (!self->sock[KBOX_CH_IOPUB])
			self->sock[KBOX_CH_IOPUB] = zsock_new(ZMQ_SUB);
		if (e.code == KBOX_E_DEAD || e.code == KBOX_E_INVALID) {
			/* its socket file is gone, or not a socket now: the kernel is
			 * lost to us (a restart mends it) */
			char why[KBOX_ERROR_MSG_MAX];
			snprintf(why, sizeof why, "iopub could not be reconnected: %s", e.msg);
			exec_stop(self, x, KBOX_EXEC_DIED, why);
			return;
		}
		set_reason(x, "iopub could not be reconnected: %s", e.msg);
	}
	exec_drain(self, x);
}

/* Answer an input_request REQ with the next scripted line, or EOF. */
static void answer_input(kbox_client_t *self, kbox_exec_t *x, const kbox_msg_t *req, bool eof)
{
	exec_run_t *run = x->run;
	const char *value = !eof && x->inputs_answered < run->o.n_input
	                        ? run->lines[x->inputs_answered]
	                        : "\x04";
	json_t *c = json_pack("{s:s}", "value", value ? value : "");
	kbox_msg_t *reply = kbox_client_msg(self, "input_reply", &c);
	if (!reply)
		return;
	kbox_msg_set_parent(reply, req);
	if (kbox_client_send(self, KBOX_CH_STDIN, reply, NULL) == 0)
		x->inputs_answered++;
	kbox_msg_destroy(&reply);
}

static bool exec_ping(kbox_client_t *self, kbox_exec_t *x);

/* No echo to X's ping (or it could not be sent): the REQ socket is stuck,
 * make a new one; a second miss in a row means the kernel is dead, unless
 * something else came meanwhile.  True when X ended. */
static bool exec_hb_missed(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	close_channel(self, KBOX_CH_HB);
	run->hb_waiting = false;
	if (run->last_activity > run->hb_sent) {
		run->hb_misses = 0;
		return false;
	}
	if (++run->hb_misses >= HB_MISSES) {
		exec_stop(self, x, KBOX_EXEC_DIED, "the kernel stopped answering heartbeats");
		return true;
	}
	return exec_ping(self, x);
}

/* No echo within HB_TIMEOUT_MS. */
static int exec_on_hb_timeout(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	(void)loop;
	x->run->t_hb = 0;
	exec_hb_missed(x->run->client, x);
	return 0;
}

/* Ping the kernel on hb for X; on_hb or the timer takes the outcome.
 * True when X ended. */
static bool exec_ping(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	zsock_t *hb = sock_of(self, KBOX_CH_HB, NULL);
	run->hb_sent = kbox__now_ms();
	if (hb && zstr_send(hb, "ping") == 0) {
		run->hb_waiting = true;
		if ((run->t_hb = add_timer(self, HB_TIMEOUT_MS, exec_on_hb_timeout, x)))
			return false;
	}
	return exec_hb_missed(self, x);
}

static int exec_on_watch(kbox_loop_t *loop, void *arg);

/* Wake X's watch when the next silence rule could apply. */
static void exec_watch_arm(kbox_client_t *self, kbox_exec_t *x)
{
	exec_run_t *run = x->run;
	long long now = kbox__now_ms();
	long long next = (run->hb_waiting ? now : run->last_activity) + HB_SILENCE_MS;
	if (run->got_reply && run->last_iopub + REPLY_IDLE_MS < next)
		next = run->last_iopub + REPLY_IDLE_MS;
	run->t_watch = add_timer(self, next - now, exec_on_watch, x);
}

/* Silence: after the reply, 2 s without iopub means idle is not coming;
 * 1 s without anything, ask whether the kernel is alive (the alive hook,
 * or the heartbeat). */
static int exec_on_watch(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	exec_run_t *run = x->run;
	kbox_client_t *self = run->client;
	long long now = kbox__now_ms();
	(void)loop;
	run->t_watch = 0;
	/* iopub waiting unread is not silence: reading a large message can
	 * take longer than the wait itself (a slow machine, a sanitizer) */
	if (run->got_reply && now - run->last_iopub >= REPLY_IDLE_MS &&
	    readable(self, KBOX_CH_IOPUB))
		run->last_iopub = now;
	if (run->got_reply && now - run->last_iopub >= REPLY_IDLE_MS) {
		x->output_lost = true;
		exec_both(self, x);
		return 0;
	}
	if (!run->hb_waiting && now - run->last_activity >= HB_SILENCE_MS) {
		/* an owned kernel is alive while its process is: kernels that serve
		 * the heartbeat from their main loop miss beats while they compute */
		if (self->hooks.alive) {
			if (!self->hooks.alive(self->hooks.arg)) {
				exec_stop(self, x, KBOX_EXEC_DIED, "the kernel process exited");
				return 0;
			}
			run->last_activity = now;
		} else if (exec_ping(self, x)) {
			return 0;
		}
	}
	exec_watch_arm(self, x);
	return 0;
}

/* The interrupt_request was answered (or not: the reason says so). */
static void exec_on_interrupt_reply(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	kbox_exec_t *x = arg;
	kbox_msg_destroy(&reply);
	if (err && !x->reason[0])
		set_reason(x, "interrupt failed: %s", err->msg);
}

/* Interrupt the kernel for X: the hook, or interrupt_request on control
 * (its reply is waited for on the loop).  0 or -1 with ERR. */
static int exec_interrupt_now(kbox_client_t *self, kbox_exec_t *x, kbox_error_t *err)
{
	if (self->hooks.interrupt)
		return self->hooks.interrupt(self->hooks.arg, err);
	return request_start(self, KBOX_CH_CONTROL, "interrupt_request", NULL, INTERRUPT_MS, x->run,
	                     exec_on_interrupt_reply, x, err)
	           ? 0
	           : -1;
}

/* The deadline (or the grace period after an interrupt) is over. */
static int exec_on_deadline(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	exec_run_t *run = x->run;
	kbox_client_t *self = run->client;
	(void)loop;
	run->t_deadline = 0;
	if (run->phase == X_RUN && run->o.interrupt_on_timeout && !x->interrupted) {
		kbox_error_t ie = {0};
		x->interrupted = true;
		run->timed_out = true;
		if (exec_interrupt_now(self, x, &ie) < 0)
			set_reason(x, "interrupt failed: %s", ie.msg);
		run->t_deadline = add_timer(self, run->o.grace_ms > 0 ? run->o.grace_ms : GRACE_MS,
		                            exec_on_deadline, x);
		if (run->t_deadline)
			return 0;
	}
	x->status = KBOX_EXEC_TIMEOUT;
	if (!x->reason[0]) {
		char t[32];
		kbox__fmt_ms(t, sizeof t, run->o.timeout_ms);
		set_reason(x,
		           !x->interrupted ? "timed out after %s"
		           : x->went_idle  ? "timed out after %s; the kernel was interrupted (state kept)"
		                           : "timed out after %s; interrupted, but the kernel did not "
		                             "finish within the grace period",
		           t);
	}
	exec_end(self, x);
	return 0;
}

/* Send X's execute_request; from now on the deadline and the watch run.
 * 0, or -1 with ERR when it could not be sent. */
static int exec_send(kbox_client_t *self, kbox_exec_t *x, kbox_error_t *err)
{
	exec_run_t *run = x->run;
	long long now = kbox__now_ms();
	if ((run->o.timeout_ms > 0 &&
	     !(run->t_deadline = add_timer(self, run->start + run->o.timeout_ms - now,
	                                   exec_on_deadline, x))) ||
	    !(run->t_watch = add_timer(self, HB_SILENCE_MS, exec_on_watch, x))) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	if (kbox_client_send(self, KBOX_CH_SHELL, run->req, err) < 0)
		goto fail;
	run->phase = X_RUN;
	run->last_activity = run->last_iopub = kbox__now_ms();
	bucket_init(&run->bucket, run->o.max_msgs_per_sec, run->o.max_bytes_per_sec);
	return 0;
fail:
	cancel_timer(self, &run->t_deadline);
	cancel_timer(self, &run->t_watch);
	return -1;
}

/* A send after kbox_client_execute_begin returned failed: X ends DIED,
 * marked unsent (kbox_client_execute turns that into its NULL). */
static void exec_unsent(kbox_client_t *self, kbox_exec_t *x, const kbox_error_t *e)
{
	x->unsent = e->code ? e->code : KBOX_E_SYSTEM;
	exec_stop(self, x, KBOX_EXEC_DIED, e->msg);
}

/* The settling round trip is over (answered or not): send. */
static void exec_on_settled(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	kbox_exec_t *x = arg;
	kbox_client_t *self = x->run->client;
	kbox_error_t e = {0};
	(void)err;
	kbox_msg_destroy(&reply);
	if (exec_send(self, x, &e) < 0)
		exec_unsent(self, x, &e);
}

/* stdin is linked (or not after 5 s): make the settle round trip if one is
 * due, else send.  0, or -1 with ERR when the request could not be sent. */
static int exec_go(kbox_client_t *self, kbox_exec_t *x, kbox_error_t *err)
{
	/* After an error reply with stop_on_error, ipykernel goes on aborting
	 * execute_requests for one more event-loop turn (ipykernel#609); a
	 * shell round trip closes that window so this request is not aborted. */
	if (self->settle) {
		self->settle = false;
		x->run->phase = X_SETTLE;
		if (request_start(self, KBOX_CH_SHELL, "kernel_info_request", NULL, SETTLE_MS, x->run,
		                  exec_on_settled, x, NULL))
			return 0;
	}
	return exec_send(self, x, err);
}

/* The wait for stdin's handshake is over, either way. */
static void exec_linked(kbox_client_t *self, kbox_exec_t *x)
{
	kbox_error_t e = {0};
	cancel_timer(self, &x->run->t_phase);
	if (exec_go(self, x, &e) < 0)
		exec_unsent(self, x, &e);
}

/* stdin's handshake did not come within STDIN_LINK_MS: send anyway. */
static int exec_on_link_wait(kbox_loop_t *loop, void *arg)
{
	kbox_exec_t *x = arg;
	(void)loop;
	x->run->t_phase = 0;
	exec_linked(x->run->client, x);
	return 0;
}

/* Call X's on_msg with M on CH.  False when SELF or X is gone since (then
 * neither may be touched); *RC gets its return value. */
static bool exec_callback(kbox_client_t *self, kbox_exec_t *x, kbox_channel_t ch,
                          const kbox_msg_t *m, int *rc)
{
	unsigned long epoch = self->exec_epoch;
	guard_t g;
	*rc = 0;
	if (!x->run->o.on_msg)
		return true;
	guard_on(self, &g);
	*rc = x->run->o.on_msg(x->run->o.cb_arg, ch, m);
	return !guard_off(self, &g) && self->exec_epoch == epoch;
}

/* Is M a status message saying idle? */
static bool is_idle(const kbox_msg_t *m)
{
	json_t *st;
	return strcmp(kbox_msg_type(m), "status") == 0 &&
	       (st = json_object_get(kbox_msg_content(m), "execution_state")) &&
	       json_is_string(st) && strcmp(json_string_value(st), "idle") == 0;
}

/* X's own iopub message *M_P (taken when collected). */
static void exec_output(kbox_client_t *self, kbox_exec_t *x, kbox_msg_t **m_p)
{
	exec_run_t *run = x->run;
	bool both_came = run->phase != X_RUN; /* draining: the callback cannot stop it */
	int rc;
	if (!both_came && is_idle(*m_p)) {
		run->got_idle = x->went_idle = true;
		/* idle with no reply after an interrupt: the interrupt came
		 * between the code and its reply (or before the code), and
		 * ipykernel dropped the reply.  The kernel is fine; a reply in
		 * flight has a moment to come, not the whole grace period */
		if (x->interrupted && !run->got_reply && run->t_deadline) {
			cancel_timer(self, &run->t_deadline);
			run->t_deadline = add_timer(self, IDLE_NO_REPLY_MS, exec_on_deadline, x);
		}
	}
	if (!exec_callback(self, x, KBOX_CH_IOPUB, *m_p, &rc))
		return;
	if (rc != 0 && !both_came) {
		exec_stop(self, x, KBOX_EXEC_TIMEOUT, "stopped by the caller");
		return;
	}
	if (run->o.collect && exec_keep(x, m_p) < 0 && !both_came) {
		exec_stop(self, x, KBOX_EXEC_DIED, "out of memory");
		return;
	}
	if (!both_came && run->got_reply && run->got_idle)
		exec_both(self, x);
}

/* Read one iopub message, Z (taken); output over the limit of B is dropped
 * unverified and counted: against X when it is its own (REQ_ID), against
 * the iopub callback otherwise.  NULL when dropped or invalid. */
static kbox_msg_t *iopub_decode(kbox_client_t *self, zmsg_t **z_p, bucket_t *b, kbox_exec_t *x,
                                const char *req_id)
{
	kbox_error_t e = {0};
	size_t size = zmsg_content_size(*z_p);
	kbox_msg_t *msg;
	bool ours = false, over;
	int stream;
	size_t text_bytes;
	char id[256];

	over = self->shedding || !bucket_take(b, size);
	if (over && droppable_output(*z_p, req_id, &ours, &stream, &text_bytes, id, sizeof id) &&
	    /* the execution's own output is read all the same while its
	     * receiver keeps it on disk: it is memory that needs the limit */
	    !(ours && !self->shedding && x->run && x->run->o.keep_output &&
	      x->run->o.keep_output(x->run->o.cb_arg))) {
		if (x && x->run)
			seq_note(x, id, ours);
		if (ours) {
			x->rate_dropped++;
			x->rate_dropped_bytes += size;
			if (stream >= 0) {
				x->drops.stream_messages[stream]++;
				x->drops.stream_bytes[stream] += text_bytes;
			}
		} else {
			self->iopub_dropped++;
			self->iopub_dropped_bytes += size;
		}
		zmsg_destroy(z_p);
		return NULL;
	}
	msg = kbox__msg_decode_zmsg(self->auth, *z_p, &e);
	zmsg_destroy(z_p);
	if (!msg) {
		self->dropped++;
		snprintf(self->last_drop, sizeof self->last_drop, "%s on iopub: dropped", e.msg);
	} else if (x && x->run && x->run->phase >= X_RUN) {
		const char *pid = kbox_msg_parent_id(msg);
		seq_note(x, kbox_msg_id(msg), req_id && pid && strcmp(pid, req_id) == 0);
	}
	return msg;
}

/* ---- the loop's handlers ---- */

/* iopub: the execution's own messages to it, the others (through the rate
 * limit) to the iopub callback; a readiness wait hears it too. */
static void on_iopub(kbox_client_t *self)
{
	kbox_exec_t *x = self->exec;
	exec_run_t *run = x && x->run->phase >= X_RUN ? x->run : NULL;
	zmsg_t *z;
	kbox_msg_t *m;
	const char *pid;
	guard_t g;

	if (!readable(self, KBOX_CH_IOPUB) || !(z = zmsg_recv(self->sock[KBOX_CH_IOPUB])))
		return;
	if (self->ready)
		self->ready->iopub_heard = true;
	if (run)
		run->last_activity = run->last_iopub = kbox__now_ms();
	m = iopub_decode(self, &z, run ? &run->bucket : &self->iopub_bucket, x,
	                 run ? run->req_id : NULL);
	pid = m ? kbox_msg_parent_id(m) : NULL;
	if (run) /* silence counts from when this one was taken in */
		run->last_iopub = kbox__now_ms();
	guard_on(self, &g);
	if (run && pid && strcmp(pid, run->req_id) == 0)
		exec_output(self, x, &m);
	else if (m && self->iopub_cb)
		self->iopub_cb(self->iopub_arg, m);
	kbox_msg_destroy(&m);
	if (g.gone)
		return;
	/* what reading it moved on (the state is read afresh: callbacks ran) */
	x = self->exec;
	if (x && x->run->phase == X_DRAIN && !readable(self, KBOX_CH_IOPUB)) {
		exec_finish(self, x);
		if (g.gone)
			return;
	}
	guard_off(self, &g);
	if (self->ready)
		ready_heard(self, self->ready);
}

/* shell and control: the execute_reply to the execution, other replies to
 * the request they answer. */
static void on_reply(kbox_client_t *self, kbox_channel_t ch)
{
	kbox_msg_t *m = read_one(self, ch);
	kbox_exec_t *x = self->exec;
	const char *pid = m ? kbox_msg_parent_id(m) : NULL;
	request_t *r;

	if (x && x->run->phase == X_RUN)
		x->run->last_activity = kbox__now_ms();
	if (!pid) {
		kbox_msg_destroy(&m);
		return;
	}
	if (ch == KBOX_CH_SHELL && x && x->run->phase == X_RUN && !x->reply &&
	    strcmp(pid, x->run->req_id) == 0 && strcmp(kbox_msg_type(m), "execute_reply") == 0) {
		x->reply = m;
		x->run->got_reply = true;
		if (x->run->got_idle)
			exec_both(self, x);
		return;
	}
	for (r = self->requests; r; r = r->next)
		if (r->channel == ch && strcmp(kbox_msg_id(r->msg), pid) == 0) {
			request_end(self, r, m, NULL);
			return;
		}
	kbox_msg_destroy(&m); /* a reply nobody waits for (any more) */
}

/* stdin: the execution's input_requests, answered from its lines. */
static void on_stdin(kbox_client_t *self)
{
	kbox_msg_t *m = read_one(self, KBOX_CH_STDIN);
	kbox_exec_t *x = self->exec;
	exec_run_t *run = x && x->run->phase == X_RUN ? x->run : NULL;
	const char *pid = m ? kbox_msg_parent_id(m) : NULL;
	int rc;

	if (run)
		run->last_activity = kbox__now_ms();
	if (!run || !pid || strcmp(pid, run->req_id) != 0 ||
	    strcmp(kbox_msg_type(m), "input_request") != 0)
		goto out;
	if (!exec_callback(self, x, KBOX_CH_STDIN, m, &rc))
		goto out;
	if (rc != 0) {
		/* answer EOF so the kernel is not left blocked in input() */
		if (!run->got_reply)
			answer_input(self, x, m, true);
		kbox_msg_destroy(&m);
		exec_stop(self, x, KBOX_EXEC_TIMEOUT, "stopped by the caller");
		return;
	}
	if (!run->got_reply)
		answer_input(self, x, m, false);
out:
	kbox_msg_destroy(&m);
}

/* hb: the echo of the execution's ping. */
static void on_hb(kbox_client_t *self)
{
	zmsg_t *z = readable(self, KBOX_CH_HB) ? zmsg_recv(self->sock[KBOX_CH_HB]) : NULL;
	kbox_exec_t *x = self->exec;
	if (!z)
		return;
	zmsg_destroy(&z);
	if (x && x->run->hb_waiting) {
		cancel_timer(self, &x->run->t_hb);
		x->run->hb_waiting = false;
		x->run->hb_misses = 0;
		x->run->last_activity = kbox__now_ms();
	}
}

/* The loop's handler of a channel's socket (ARG is its chan_t). */
static int on_channel(kbox_loop_t *loop, void *arg)
{
	chan_t *c = arg;
	(void)loop;
	switch (c->ch) {
	case KBOX_CH_IOPUB: on_iopub(c->client); break;
	case KBOX_CH_STDIN: on_stdin(c->client); break;
	case KBOX_CH_HB: on_hb(c->client); break;
	default: on_reply(c->client, c->ch); break;
	}
	return 0;
}

/* A socket monitor's event: the handshake of iopub (then ask kernel_info)
 * or of stdin (then the execution may send, the readiness wait is over). */
static int on_monitor(kbox_loop_t *loop, void *arg)
{
	chan_t *c = arg;
	kbox_client_t *self = c->client;
	kbox_channel_t ch = c->ch;
	unsigned char ev[16];
	uint16_t id = 0;
	guard_t g;
	void *h;
	int n;

	(void)loop;
	if (!self->mon[ch] || !(zsock_events(self->mon[ch]) & ZMQ_POLLIN))
		return 0;
	h = zsock_resolve(self->mon[ch]);
	if ((n = zmq_recv(h, ev, sizeof ev, ZMQ_DONTWAIT)) < 0)
		return 0;
	while (zsock_rcvmore(self->mon[ch])) { /* the endpoint */
		char rest[256];
		if (zmq_recv(h, rest, sizeof rest, ZMQ_DONTWAIT) < 0)
			break;
	}
	if (n >= 2)
		memcpy(&id, ev, 2);
	if (id != ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
		return 0;
	unmonitor(self, ch);
	self->linked[ch] = true;
	if (ch == KBOX_CH_IOPUB) {
		subscribe_now(self);
		if (self->ready && self->ready->phase == READY_LINK) {
			cancel_timer(self, &self->ready->t_phase);
			ready_ask(self, self->ready);
		}
		return 0;
	}
	guard_on(self, &g);
	if (self->exec && self->exec->run->phase == X_LINK) {
		exec_linked(self, self->exec);
		if (g.gone)
			return 0;
	}
	guard_off(self, &g);
	if (self->ready && self->ready->phase == READY_STDIN)
		ready_end(self, self->ready, NULL);
	return 0;
}

/* ---- ending what is pending ---- */

/* The alive hook, every 100 ms while requests or a readiness wait are
 * pending: when it says the process is gone, they fail at once. */
static int on_alive_tick(kbox_loop_t *loop, void *arg)
{
	kbox_client_t *self = arg;
	kbox_error_t e = {0};
	guard_t g;
	(void)loop;
	self->t_alive = 0;
	if (!self->requests && !self->ready)
		return 0;
	if (!owner_says_dead(self)) {
		self->t_alive = add_timer(self, ALIVE_SLICE_MS, on_alive_tick, self);
		return 0;
	}
	for (request_t *r = self->requests; r; r = r->next)
		r->doomed = true; /* those made by the callbacks below get their own tick */
	guard_on(self, &g);
	if (self->ready) {
		kbox__err(&e, KBOX_E_DEAD, "kernel exited before it was ready");
		ready_end(self, self->ready, &e);
		if (g.gone)
			return 0;
	}
	for (;;) {
		request_t *r = self->requests;
		while (r && !r->doomed)
			r = r->next;
		if (!r)
			break;
		kbox__err(&e, KBOX_E_DEAD, "kernel died before it answered %s", kbox_msg_type(r->msg));
		request_end(self, r, NULL, &e);
		if (g.gone)
			return 0;
	}
	guard_off(self, &g);
	return 0;
}

/* Start the alive tick, when there is an alive hook and none runs. */
static void alive_tick_arm(kbox_client_t *self)
{
	if (self->hooks.alive && self->loop && !self->t_alive)
		self->t_alive = add_timer(self, 0, on_alive_tick, self);
}

/* End everything pending on SELF at once: the execution with status DIED
 * and REASON, the readiness wait and the requests with CODE and REASON.
 * DETACHING: SELF leaves its loop first.  The callbacks run last, after
 * SELF is no longer touched (one may destroy it). */
static void end_all(kbox_client_t *self, kbox_errcode_t code, const char *reason,
                    bool detaching)
{
	kbox_exec_t *x = self->exec;
	kbox_exec_done_cb *done = NULL;
	void *done_arg = NULL;
	ready_t *rd;
	request_t *reqs;
	kbox_error_t e = {0};

	kbox__err(&e, code, "%s", reason);
	if (x) {
		x->status = KBOX_EXEC_DIED;
		set_reason(x, "%s", reason);
		exec_close(self, x, &done, &done_arg); /* with its own requests and wait */
	}
	if ((rd = self->ready))
		ready_unlink(self, rd);
	reqs = self->requests;
	self->requests = NULL;
	for (request_t *r = reqs; r; r = r->next)
		cancel_timer(self, &r->timer);
	if (detaching) {
		cancel_timer(self, &self->t_alive);
		for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
			unwatch(self, ch);
		self->loop = NULL;
	}
	if (x)
		done(done_arg, x);
	if (rd) {
		kbox_ready_cb *cb = rd->cb;
		void *arg = rd->arg;
		free(rd);
		cb(arg, -1, &e);
	}
	while (reqs) {
		request_t *r = reqs;
		kbox_reply_cb *cb = r->cb;
		void *arg = r->arg;
		reqs = r->next;
		request_free(r);
		cb(arg, NULL, &e);
	}
}

/* ---- on an event loop: the public functions ---- */

int kbox_client_attach(kbox_client_t *self, kbox_loop_t *loop, kbox_error_t *err)
{
	if (!loop)
		return kbox__err(err, KBOX_E_INVALID, "attach: no loop given");
	if (self->loop == loop)
		return 0;
	if (self->loop)
		return kbox__err(err, KBOX_E_INVALID, "attach: the client is attached to another loop");
	self->loop = loop;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		if (watch(self, ch, err) < 0) {
			for (int c = 0; c < KBOX_CH_COUNT; c++)
				unwatch(self, c);
			self->loop = NULL;
			return -1;
		}
	return 0;
}

void kbox_client_detach(kbox_client_t *self)
{
	if (self && self->loop)
		end_all(self, KBOX_E_INVALID, "detached", true);
}

void kbox_client_fail_pending(kbox_client_t *self, const char *reason)
{
	end_all(self, KBOX_E_DEAD, reason ? reason : "the kernel died", false);
}

void kbox_client_set_shedding(kbox_client_t *self, bool on)
{
	if (self)
		self->shedding = on;
}

void kbox_client_set_iopub_cb(kbox_client_t *self, kbox_iopub_cb *cb, void *arg)
{
	self->iopub_cb = cb;
	self->iopub_arg = arg;
}

size_t kbox_client_iopub_dropped(const kbox_client_t *self, size_t *bytes)
{
	if (bytes)
		*bytes = self->iopub_dropped_bytes;
	return self->iopub_dropped;
}

int kbox_client_ready_begin(kbox_client_t *self, int timeout_ms, kbox_ready_cb *cb, void *arg,
                            kbox_error_t *err)
{
	if (!cb)
		return kbox__err(err, KBOX_E_INVALID, "wait_ready: no callback given");
	return ready_start(self, timeout_ms, NULL, cb, arg, err) ? 0 : -1;
}

int kbox_client_request_begin(kbox_client_t *self, kbox_channel_t channel, const char *msg_type,
                              json_t **content_p, int timeout_ms, kbox_reply_cb *cb, void *arg,
                              kbox_error_t *err)
{
	if (!cb || !msg_type) {
		if (content_p) {
			json_decref(*content_p);
			*content_p = NULL;
		}
		return kbox__err(err, KBOX_E_INVALID, "request: no message type or no callback given");
	}
	return request_start(self, channel, msg_type, content_p, timeout_ms, NULL, cb, arg, err)
	           ? 0
	           : -1;
}

kbox_exec_t *kbox_client_execute_begin(kbox_client_t *self, const kbox_exec_opts_t *o,
                                       kbox_exec_done_cb *done, void *arg, kbox_error_t *err)
{
	kbox_exec_t *x = NULL;
	exec_run_t *run = NULL;
	kbox_msg_t *req = NULL;
	bool stdin_on;
	json_t *c;

	if (!o || !o->code || !done) {
		kbox__err(err, KBOX_E_INVALID, "execute: no code or no callback given");
		return NULL;
	}
	if (!self->loop) {
		kbox__err(err, KBOX_E_INVALID, "execute: the client is not attached to a loop");
		return NULL;
	}
	if (self->exec) {
		kbox__err(err, KBOX_E_INVALID, "execute: an execution is already running");
		return NULL;
	}
	stdin_on = o->allow_stdin || o->input_lines != NULL;
	c = json_pack("{s:s, s:b, s:b, s:o, s:b, s:b}", "code", o->code, "silent", o->silent,
	              "store_history", !o->silent && !o->no_store_history, "user_expressions",
	              o->user_expressions ? json_incref(o->user_expressions) : json_object(),
	              "allow_stdin", stdin_on, "stop_on_error", !o->no_stop_on_error);
	if (!c) {
		kbox__err(err, KBOX_E_INVALID, "execute: code is not valid UTF-8");
		return NULL;
	}
	req = kbox_client_msg(self, "execute_request", &c);
	x = calloc(1, sizeof *x);
	run = calloc(1, sizeof *run);
	if (!req || !x || !run)
		goto nomem;
	run->o = *o;
	run->o.code = NULL;
	run->o.user_expressions = NULL;
	run->o.n_input = 0;
	if (o->input_lines && o->n_input) {
		if (!(run->lines = calloc(o->n_input, sizeof *run->lines)))
			goto nomem;
		for (; run->o.n_input < o->n_input; run->o.n_input++)
			if (o->input_lines[run->o.n_input] &&
			    !(run->lines[run->o.n_input] = strdup(o->input_lines[run->o.n_input])))
				goto nomem;
	}
	run->o.input_lines = (const char *const *)run->lines;
	run->client = self;
	run->req = req;
	req = NULL;
	run->req_id = kbox_msg_id(run->req);
	run->start = kbox__now_ms();
	run->done = done;
	run->arg = arg;
	x->count = -1;
	x->run = run;
	if (stdin_on && !sock_of(self, KBOX_CH_STDIN, err))
		goto fail;
	if (stdin_on && self->mon[KBOX_CH_STDIN] && !self->linked[KBOX_CH_STDIN]) {
		/* the kernel drops input requests to a peer it does not know yet */
		run->phase = X_LINK;
		if (!(run->t_phase = add_timer(self, STDIN_LINK_MS, exec_on_link_wait, x)))
			goto nomem;
	} else if (exec_go(self, x, err) < 0) {
		goto fail;
	}
	self->exec = x;
	return x;
nomem:
	kbox__err(err, KBOX_E_NOMEM, "out of memory");
fail:
	if (run) {
		cancel_timer(self, &run->t_phase);
		requests_cancel(self, run);
	}
	exec_run_free(run);
	if (x)
		x->run = NULL;
	kbox_exec_destroy(&x);
	kbox_msg_destroy(&req);
	return NULL;
}

int kbox_exec_interrupt(kbox_exec_t *x, int grace_ms, const char *why, kbox_error_t *err)
{
	exec_run_t *run = x ? x->run : NULL;
	kbox_client_t *self = run ? run->client : NULL;

	if (!run)
		return kbox__err(err, KBOX_E_INVALID, "interrupt: the execution has ended");
	if (run->got_reply)
		return 0; /* it is ending anyway */
	if (grace_ms < 0)
		grace_ms = GRACE_MS;
	if (run->phase == X_RUN && exec_interrupt_now(self, x, err) < 0)
		return -1;
	if (run->phase != X_RUN) {
		/* not sent yet: nothing to interrupt, it just ends */
		cancel_timer(self, &run->t_phase);
		requests_cancel(self, run);
		grace_ms = 0;
	} else {
		x->interrupted = true;
	}
	set_reason(x, "%s", why ? why : "interrupted");
	cancel_timer(self, &run->t_deadline);
	if (!(run->t_deadline = add_timer(self, grace_ms, exec_on_deadline, x)))
		return kbox__err(err, KBOX_E_NOMEM, "out of memory");
	return 0;
}

/* ---- waiting: the same machines on a private loop ---- */

/* What a waiting function waits for, filled by its callback. */
typedef struct {
	kbox_loop_t *loop;
	bool done;
	int rc;
	kbox_error_t err;
	kbox_msg_t *reply;
} waiter_t;

/* Attach SELF to a private loop for one waiting call named WHAT: 0, or -1
 * with ERR (a client on a loop of its own must use the _begin functions). */
static int wait_begin(kbox_client_t *self, waiter_t *w, const char *what, kbox_error_t *err)
{
	if (self->loop)
		return kbox__err(err, KBOX_E_INVALID,
		                 "%s: the client is attached to an event loop (use the _begin functions)",
		                 what);
	if (!(w->loop = kbox_loop_new(err)))
		return -1;
	if (kbox_client_attach(self, w->loop, err) < 0) {
		kbox_loop_destroy(&w->loop);
		return -1;
	}
	return 0;
}

/* Run the private loop until W is done when BEGUN (a poll that fails
 * ends what is pending), then detach SELF and free the loop. */
static void wait_end(kbox_client_t *self, waiter_t *w, bool begun)
{
	/* only W's callback stops the loop */
	if (begun && !w->done && kbox_loop_run(w->loop) < 0 && !w->done) {
		char why[128];
		snprintf(why, sizeof why, "poll failed: %s", zmq_strerror(errno));
		kbox_client_fail_pending(self, why); /* calls back: done */
	}
	kbox_client_detach(self); /* ends anything left, should there be */
	kbox_loop_destroy(&w->loop);
}

/* The callbacks of the waiting functions: record, and stop the loop. */
static void wait_ready_cb(void *arg, int rc, const kbox_error_t *err)
{
	waiter_t *w = arg;
	w->done = true;
	w->rc = rc;
	if (err)
		w->err = *err;
	kbox_loop_stop(w->loop);
}

static void wait_reply_cb(void *arg, kbox_msg_t *reply, const kbox_error_t *err)
{
	waiter_t *w = arg;
	w->done = true;
	w->reply = reply;
	if (err)
		w->err = *err;
	kbox_loop_stop(w->loop);
}

static void wait_exec_cb(void *arg, kbox_exec_t *x)
{
	waiter_t *w = arg;
	(void)x;
	w->done = true;
	kbox_loop_stop(w->loop);
}

int kbox_client_wait_ready(kbox_client_t *self, int timeout_ms, kbox_error_t *err)
{
	waiter_t w = {0};
	bool begun;
	if (wait_begin(self, &w, "wait_ready", err) < 0)
		return -1;
	begun = kbox_client_ready_begin(self, timeout_ms, wait_ready_cb, &w, err) == 0;
	wait_end(self, &w, begun);
	if (begun && w.rc < 0 && err)
		*err = w.err;
	return begun ? w.rc : -1;
}

kbox_msg_t *kbox_client_request(kbox_client_t *self, kbox_channel_t channel,
                                const char *msg_type, json_t **content_p, int timeout_ms,
                                kbox_error_t *err)
{
	waiter_t w = {0};
	bool begun;
	if (wait_begin(self, &w, msg_type, err) < 0) {
		if (content_p) {
			json_decref(*content_p);
			*content_p = NULL;
		}
		return NULL;
	}
	begun = kbox_client_request_begin(self, channel, msg_type, content_p, timeout_ms,
	                                  wait_reply_cb, &w, err) == 0;
	wait_end(self, &w, begun);
	if (begun && !w.reply && err)
		*err = w.err;
	return w.reply;
}

kbox_exec_t *kbox_client_execute(kbox_client_t *self, const kbox_exec_opts_t *o,
                                 kbox_error_t *err)
{
	waiter_t w = {0};
	kbox_exec_t *x;
	if (!o || !o->code) {
		kbox__err(err, KBOX_E_INVALID, "execute: no code given");
		return NULL;
	}
	if (wait_begin(self, &w, "execute", err) < 0)
		return NULL;
	x = kbox_client_execute_begin(self, o, wait_exec_cb, &w, err);
	wait_end(self, &w, x != NULL);
	if (x && x->unsent) { /* as before it was begun: NULL with ERR */
		kbox__err(err, x->unsent, "%s", x->reason);
		kbox_exec_destroy(&x);
	}
	return x;
}

/* ---- requests ---- */

kbox_msg_t *kbox_client_kernel_info_request(kbox_client_t *self, int timeout_ms,
                                            kbox_error_t *err)
{
	kbox_msg_t *reply =
	    kbox_client_request(self, KBOX_CH_SHELL, "kernel_info_request", NULL, timeout_ms, err);
	if (reply) {
		json_decref(self->kernel_info);
		self->kernel_info = json_incref(kbox_msg_content(reply));
	}
	return reply;
}

/* Number of code points in S (UTF-8). */
static int codepoints(const char *s)
{
	int n = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

kbox_msg_t *kbox_client_complete(kbox_client_t *self, const char *code, int cursor_pos,
                                 int timeout_ms, kbox_error_t *err)
{
	json_t *c = json_pack("{s:s, s:i}", "code", code,
	                      "cursor_pos", cursor_pos < 0 ? codepoints(code) : cursor_pos);
	if (!c) {
		kbox__err(err, KBOX_E_INVALID, "complete: code is not valid UTF-8");
		return NULL;
	}
	return kbox_client_request(self, KBOX_CH_SHELL, "complete_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_inspect(kbox_client_t *self, const char *code, int cursor_pos,
                                int detail_level, int timeout_ms, kbox_error_t *err)
{
	json_t *c = json_pack("{s:s, s:i, s:i}", "code", code, "cursor_pos",
	                      cursor_pos < 0 ? codepoints(code) : cursor_pos, "detail_level",
	                      detail_level);
	if (!c) {
		kbox__err(err, KBOX_E_INVALID, "inspect: code is not valid UTF-8");
		return NULL;
	}
	return kbox_client_request(self, KBOX_CH_SHELL, "inspect_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_is_complete(kbox_client_t *self, const char *code, int timeout_ms,
                                    kbox_error_t *err)
{
	json_t *c = json_pack("{s:s}", "code", code);
	if (!c) {
		kbox__err(err, KBOX_E_INVALID, "is_complete: code is not valid UTF-8");
		return NULL;
	}
	return kbox_client_request(self, KBOX_CH_SHELL, "is_complete_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_history(kbox_client_t *self, json_t *args, int timeout_ms,
                                kbox_error_t *err)
{
	json_t *c = args ? json_deep_copy(args) : json_pack("{s:s, s:i, s:b, s:b}",
	                                                    "hist_access_type", "tail", "n", 10,
	                                                    "output", 0, "raw", 1);
	return kbox_client_request(self, KBOX_CH_SHELL, "history_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_comm_info(kbox_client_t *self, const char *target_name, int timeout_ms,
                                  kbox_error_t *err)
{
	json_t *c = target_name ? json_pack("{s:s}", "target_name", target_name) : json_object();
	return kbox_client_request(self, KBOX_CH_SHELL, "comm_info_request", &c, timeout_ms, err);
}

kbox_msg_t *kbox_client_shutdown(kbox_client_t *self, bool restart, int timeout_ms,
                                 kbox_error_t *err)
{
	json_t *c = json_pack("{s:b}", "restart", restart);
	return kbox_client_request(self, KBOX_CH_CONTROL, "shutdown_request", &c, timeout_ms, err);
}

int kbox_client_interrupt(kbox_client_t *self, int timeout_ms, kbox_error_t *err)
{
	kbox_msg_t *reply;
	if (self->hooks.interrupt)
		return self->hooks.interrupt(self->hooks.arg, err);
	reply = kbox_client_request(self, KBOX_CH_CONTROL, "interrupt_request", NULL, timeout_ms, err);
	if (!reply)
		return -1;
	kbox_msg_destroy(&reply);
	return 0;
}

/* ---- results ---- */

void kbox_exec_destroy(kbox_exec_t **self_p)
{
	kbox_exec_t *x;
	if (!self_p || !*self_p)
		return;
	x = *self_p;
	if (x->run) { /* given up before DONE (which is then not called) */
		kbox_exec_done_cb *done;
		void *arg;
		exec_close(x->run->client, x, &done, &arg);
	}
	kbox_msg_destroy(&x->reply);
	for (size_t i = 0; i < x->n_outputs; i++)
		kbox_msg_destroy(&x->outputs[i]);
	free(x->outputs);
	free(x->seq_bits);
	free(x);
	*self_p = NULL;
}

kbox_exec_status_t kbox_exec_status(const kbox_exec_t *self) { return self->status; }
int kbox_exec_count(const kbox_exec_t *self) { return self->count; }
const kbox_msg_t *kbox_exec_reply(const kbox_exec_t *self) { return self->reply; }
bool kbox_exec_interrupted(const kbox_exec_t *self) { return self->interrupted; }
double kbox_exec_seconds(const kbox_exec_t *self) { return self->seconds; }
size_t kbox_exec_output_count(const kbox_exec_t *self) { return self->n_outputs; }
const kbox_msg_t *kbox_exec_output(const kbox_exec_t *self, size_t i)
{
	return i < self->n_outputs ? self->outputs[i] : NULL;
}
size_t kbox_exec_inputs_answered(const kbox_exec_t *self) { return self->inputs_answered; }
size_t kbox_exec_rate_dropped(const kbox_exec_t *self, size_t *bytes)
{
	if (bytes)
		*bytes = self->rate_dropped_bytes;
	return self->rate_dropped;
}
void kbox_exec_dropped(const kbox_exec_t *self, kbox_exec_drops_t *out)
{
	unsigned long long span = self->seq_set ? self->seq_max - self->seq_min + 1 : 0;
	*out = self->drops;
	out->never_arrived = span > self->seq_seen ? (size_t)(span - self->seq_seen) : 0;
}
bool kbox_exec_output_lost(const kbox_exec_t *self) { return self->output_lost; }
bool kbox_exec_went_idle(const kbox_exec_t *self) { return self->went_idle; }
const char *kbox_exec_reason(const kbox_exec_t *self) { return self->reason; }
