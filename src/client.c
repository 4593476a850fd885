/* src/client.c — a client of one running kernel: channels, readiness, requests, execute. */
#include "private.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#define REPLY_IDLE_MS 2000 /* after the reply, iopub silence that ends the wait for idle */

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
	bool settle; /* the last execute failed with stop_on_error: kernel may still abort */
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
	bool output_lost;
	char reason[256];
};

/* A token bucket for iopub output. */
typedef struct {
	double msgs_rate, bytes_rate; /* per second; <= 0: unlimited */
	double msgs, bytes;           /* tokens */
	long long last_ms;
} bucket_t;

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

/* Is Z (raw, unverified) an output message that may be dropped unread?
 * Only its header's msg_type and its parent's msg_id are looked at; nothing
 * is acted on.  *OURS tells whether the parent is REQ_ID. */
static bool droppable_output(zmsg_t *z, const char *req_id, bool *ours)
{
	const size_t dlen = sizeof KBOX_DELIMITER - 1;
	zframe_t *f;
	bool found = false, out = false;

	*ours = false;
	for (f = zmsg_first(z); f; f = zmsg_next(z))
		if (zframe_size(f) == dlen && memcmp(zframe_data(f), KBOX_DELIMITER, dlen) == 0) {
			found = true;
			break;
		}
	if (found && zmsg_next(z) && (f = zmsg_next(z))) { /* skip the signature */
		json_t *h = json_loadb((const char *)zframe_data(f), zframe_size(f), 0, NULL);
		json_t *t = json_object_get(h, "msg_type");
		if (json_is_string(t)) {
			const char *s = json_string_value(t);
			out = strcmp(s, "stream") == 0 || strcmp(s, "display_data") == 0 ||
			      strcmp(s, "update_display_data") == 0;
		}
		json_decref(h);
		if (out && (f = zmsg_next(z))) {
			json_t *p = json_loadb((const char *)zframe_data(f), zframe_size(f), 0, NULL);
			json_t *id = json_object_get(p, "msg_id");
			*ours = json_is_string(id) && strcmp(json_string_value(id), req_id) == 0;
			json_decref(p);
		}
	}
	return out;
}

/* ---- sockets ---- */

/* The endpoint to connect CH to, into EP: for ipc, the socket file held
 * open without following a link (/proc/self/fd/N) once it exists; a file
 * there that is not a socket is refused.  Before the kernel has made it
 * (a client that waits for a starting kernel), the path itself.  0 or -1
 * with ERR. */
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
	if (fd < 0)
		return errno == ENOENT ? 0 : kbox__err_sys(err, "%s socket %s", kbox_channel_name(ch),
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

static zsock_t *make_socket(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err)
{
	char ep[PATH_MAX + 32];
	static const int types[KBOX_CH_COUNT] = {ZMQ_DEALER, ZMQ_SUB, ZMQ_DEALER, ZMQ_DEALER,
	                                         ZMQ_REQ};
	zsock_t *s = zsock_new(types[ch]);
	void *h;
	int zero = 0;

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
		/* never drop iopub messages at a high-water mark */
		zmq_setsockopt(h, ZMQ_RCVHWM, &zero, sizeof zero);
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

/* Stop CH's monitor, if it has one. */
static void unmonitor(kbox_client_t *self, kbox_channel_t ch)
{
	if (!self->mon[ch])
		return;
	if (self->sock[ch])
		zmq_socket_monitor(zsock_resolve(self->sock[ch]), NULL, 0);
	zsock_destroy(&self->mon[ch]);
}

/* CH's socket, connected now if it was not yet.  NULL with ERR. */
static zsock_t *sock_of(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err)
{
	if (!self->sock[ch])
		self->sock[ch] = make_socket(self, ch, err);
	return self->sock[ch];
}

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
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		self->ipc_fd[ch] = -1;
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
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		unmonitor(self, ch);
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		zsock_destroy(&self->sock[ch]);
		if (self->ipc_fd[ch] >= 0)
			close(self->ipc_fd[ch]);
	}
	kbox_auth_destroy(&self->auth);
	kbox_conn_destroy(&self->conn);
	json_decref(self->kernel_info);
	free(self);
	*self_p = NULL;
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
	z = kbox_msg_encode(msg, self->auth, err);
	if (!z)
		return -1;
	if (zmsg_send(&z, self->sock[channel]) < 0) {
		zmsg_destroy(&z);
		return kbox__err(err, KBOX_E_SYSTEM, "sending %s on %s failed: %s", kbox_msg_type(msg),
		                 kbox_channel_name(channel), zmq_strerror(zmq_errno()));
	}
	return 0;
}

/* Read one message from CH, which poll said is readable.  Returns the
 * decoded message, or NULL when it was invalid (dropped and counted). */
static kbox_msg_t *read_one(kbox_client_t *self, kbox_channel_t ch)
{
	kbox_error_t e = {0};
	zmsg_t *z = self->sock[ch] ? zmsg_recv(self->sock[ch]) : NULL;
	kbox_msg_t *msg;

	if (!z)
		return NULL;
	msg = kbox_msg_decode_zmsg(self->auth, z, &e);
	zmsg_destroy(&z);
	if (!msg) {
		self->dropped++;
		snprintf(self->last_drop, sizeof self->last_drop, "%s on %s: dropped", e.msg,
		         kbox_channel_name(ch));
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
	zsock_destroy(&self->sock[KBOX_CH_HB]); /* the next beat connects a new one */
	return -1;
}

/* Wait up to TIMEOUT_MS for our stdin socket's handshake with the kernel.
 * true once it is known to be done (or cannot be known). */
/* Wait up to TIMEOUT_MS until CH's connection has completed its
 * handshake.  True when it has (or CH has no monitor: nothing to wait
 * for). */
static bool wait_linked(kbox_client_t *self, kbox_channel_t ch, long timeout_ms)
{
	long long deadline = kbox__now_ms() + timeout_ms;
	if (self->linked[ch] || !self->mon[ch])
		return true;
	for (;;) {
		zmq_pollitem_t it = {zsock_resolve(self->mon[ch]), 0, ZMQ_POLLIN, 0};
		long left = remaining(deadline);
		if (zmq_poll(&it, 1, left) > 0) {
			zframe_t *ev = zframe_recv(self->mon[ch]);
			zframe_t *ep = zsock_rcvmore(self->mon[ch]) ? zframe_recv(self->mon[ch]) : NULL;
			uint16_t id = 0;
			if (ev && zframe_size(ev) >= 2)
				memcpy(&id, zframe_data(ev), 2);
			zframe_destroy(&ev);
			zframe_destroy(&ep);
			if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
				unmonitor(self, ch);
				self->linked[ch] = true;
				return true;
			}
			continue;
		}
		if (left == 0)
			return false;
	}
}

/* ---- readiness ---- */

/* Drain whatever is queued on CH without waiting. */
static void flush_channel(kbox_client_t *self, kbox_channel_t ch)
{
	long long end = kbox__now_ms() + DRAIN_MS;
	while (kbox__now_ms() < end && poll_channels(self, 1u << ch, 0) > 0) {
		kbox_msg_t *m = read_one(self, ch);
		kbox_msg_destroy(&m);
	}
}

int kbox_client_wait_ready(kbox_client_t *self, int timeout_ms, kbox_error_t *err)
{
	long long deadline = kbox__now_ms() + (timeout_ms > 0 ? timeout_ms : 60000);
	bool shell_answered = false;
	long iopub_wait = 10; /* ms; doubles up to 200 while iopub stays silent */
	char t[32];

	/* Ask only once our subscription is on its way: wait (briefly) for
	 * iopub's handshake, then let the socket process it, which sends the
	 * subscription.  Then this request's status messages reach us and
	 * one round trip is usually enough; if not, the loop asks again. */
	long link_wait = remaining(deadline) < IOPUB_LINK_MS ? remaining(deadline) : IOPUB_LINK_MS;
	if (self->sock[KBOX_CH_IOPUB] && wait_linked(self, KBOX_CH_IOPUB, link_wait)) {
		int events;
		size_t len = sizeof events;
		zmq_getsockopt(zsock_resolve(self->sock[KBOX_CH_IOPUB]), ZMQ_EVENTS, &events, &len);
	}
	while (remaining(deadline) > 0) {
		kbox_msg_t *req = kbox_client_msg(self, "kernel_info_request", NULL);
		long long attempt_end = kbox__now_ms() + 1000;
		kbox_msg_t *reply = NULL;

		if (!req)
			return kbox__err(err, KBOX_E_NOMEM, "out of memory");
		if (kbox_client_send(self, KBOX_CH_SHELL, req, err) < 0) {
			kbox_msg_destroy(&req);
			return -1;
		}
		if (attempt_end > deadline)
			attempt_end = deadline;
		/* wait for the reply on shell, checking on the process */
		while (!reply && remaining(attempt_end) > 0) {
			long slice = remaining(attempt_end);
			if (owner_says_dead(self)) {
				kbox_msg_destroy(&req);
				return kbox__err(err, KBOX_E_DEAD, "kernel exited before it was ready");
			}
			if (slice > ALIVE_SLICE_MS)
				slice = ALIVE_SLICE_MS;
			if (poll_channels(self, 1u << KBOX_CH_SHELL, slice) > 0) {
				kbox_msg_t *m = read_one(self, KBOX_CH_SHELL);
				const char *pid = m ? kbox_msg_parent_id(m) : NULL;
				if (m && pid && strcmp(pid, kbox_msg_id(req)) == 0 &&
				    strcmp(kbox_msg_type(m), "kernel_info_reply") == 0)
					reply = m;
				else
					kbox_msg_destroy(&m);
			}
		}
		kbox_msg_destroy(&req);
		if (!reply)
			continue;
		shell_answered = true;
		json_decref(self->kernel_info);
		self->kernel_info = json_incref(kbox_msg_content(reply));
		kbox_msg_destroy(&reply);
		/* shell works; is iopub connected yet? */
		if (poll_channels(self, 1u << KBOX_CH_IOPUB, iopub_wait) > 0) {
			flush_channel(self, KBOX_CH_IOPUB);
			/* and stdin, so that input requests reach us */
			wait_linked(self, KBOX_CH_STDIN, remaining(deadline));
			return 0;
		}
		/* our subscription may have reached the kernel only after it
		 * published this request's status: ask again, soon */
		if (iopub_wait < 200)
			iopub_wait *= 2;
	}
	if (owner_says_dead(self))
		return kbox__err(err, KBOX_E_DEAD, "kernel exited before it was ready");
	kbox__fmt_ms(t, sizeof t, timeout_ms > 0 ? timeout_ms : 60000);
	return kbox__err(err, KBOX_E_TIMEOUT,
	                 shell_answered
	                     ? "kernel answered kernel_info but no iopub message reached us within %s"
	                     : "kernel did not answer kernel_info within %s",
	                 t);
}

/* ---- requests ---- */

kbox_msg_t *kbox_client_request(kbox_client_t *self, kbox_channel_t channel,
                                const char *msg_type, json_t **content_p, int timeout_ms,
                                kbox_error_t *err)
{
	kbox_msg_t *req = kbox_client_msg(self, msg_type, content_p);
	kbox_msg_t *reply = NULL;
	long long deadline;
	char t[32];

	if (!req) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	if (channel != KBOX_CH_SHELL && channel != KBOX_CH_CONTROL) {
		kbox__err(err, KBOX_E_INVALID, "requests go on shell or control, not %s",
		          kbox_channel_name(channel));
		goto out;
	}
	if (timeout_ms <= 0)
		timeout_ms = KBOX_REQUEST_TIMEOUT_MS;
	if (kbox_client_send(self, channel, req, err) < 0)
		goto out;
	deadline = kbox__now_ms() + timeout_ms;
	for (;;) {
		long slice = remaining(deadline);
		if (slice == 0)
			break;
		if (owner_says_dead(self)) {
			kbox__err(err, KBOX_E_DEAD, "kernel died before it answered %s", msg_type);
			goto out;
		}
		if (slice > ALIVE_SLICE_MS)
			slice = ALIVE_SLICE_MS;
		if (poll_channels(self, 1u << channel, slice) > 0) {
			kbox_msg_t *m = read_one(self, channel);
			const char *pid = m ? kbox_msg_parent_id(m) : NULL;
			if (m && pid && strcmp(pid, kbox_msg_id(req)) == 0) {
				reply = m;
				goto out;
			}
			kbox_msg_destroy(&m); /* another request's reply */
		}
	}
	kbox__fmt_ms(t, sizeof t, timeout_ms);
	kbox__err(err, KBOX_E_TIMEOUT, "kernel did not answer %s within %s", msg_type, t);
out:
	kbox_msg_destroy(&req);
	return reply;
}

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

/* ---- execute ---- */

const char *kbox_exec_status_name(kbox_exec_status_t status)
{
	switch (status) {
	case KBOX_EXEC_OK: return "ok";
	case KBOX_EXEC_ERROR: return "error";
	case KBOX_EXEC_ABORTED: return "aborted";
	case KBOX_EXEC_TIMEOUT: return "timeout";
	case KBOX_EXEC_DIED: return "died";
	}
	return "unknown";
}

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

/* Read one iopub message, dropping output over the rate limit unread. */
static kbox_msg_t *read_iopub_limited(kbox_client_t *self, bucket_t *b, kbox_exec_t *x,
                                      const char *req_id)
{
	kbox_error_t e = {0};
	zmsg_t *z = zmsg_recv(self->sock[KBOX_CH_IOPUB]);
	kbox_msg_t *msg;
	size_t size;
	bool ours;

	if (!z)
		return NULL;
	size = zmsg_content_size(z);
	if (!bucket_take(b, size) && droppable_output(z, req_id, &ours)) {
		/* only this execution's output is counted as dropped from it */
		if (ours) {
			x->rate_dropped++;
			x->rate_dropped_bytes += size;
		}
		zmsg_destroy(&z);
		return NULL;
	}
	msg = kbox_msg_decode_zmsg(self->auth, z, &e);
	zmsg_destroy(&z);
	if (!msg) {
		self->dropped++;
		snprintf(self->last_drop, sizeof self->last_drop, "%s on iopub: dropped", e.msg);
	}
	return msg;
}

/* Answer an input_request REQ with the next scripted line, or EOF. */
static void answer_input(kbox_client_t *self, const kbox_exec_opts_t *o, kbox_exec_t *x,
                         const kbox_msg_t *req)
{
	const char *value = x->inputs_answered < o->n_input ? o->input_lines[x->inputs_answered]
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

/* Is the kernel still there?  Consults the owner, then the heartbeat. */
static bool kernel_gone(kbox_client_t *self)
{
	/* an owned kernel is alive while its process is: kernels that serve the
	 * heartbeat from their main loop miss beats while they compute */
	if (self->hooks.alive)
		return !self->hooks.alive(self->hooks.arg);
	for (int i = 0; i < HB_MISSES; i++)
		if (kbox_client_heartbeat(self, HB_TIMEOUT_MS) == 0)
			return false;
	return true;
}

kbox_exec_t *kbox_client_execute(kbox_client_t *self, const kbox_exec_opts_t *o,
                                 kbox_error_t *err)
{
	kbox_exec_t *x;
	kbox_msg_t *req;
	json_t *c;
	bool got_reply = false, got_idle = false, stdin_on;
	long long start = kbox__now_ms(), deadline, last_activity, last_iopub;
	const char *req_id;
	unsigned mask;
	bucket_t bucket;

	if (!o || !o->code) {
		kbox__err(err, KBOX_E_INVALID, "execute: no code given");
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
	if (!req || !x) {
		kbox_msg_destroy(&req);
		free(x);
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	x->count = -1;
	if (stdin_on && !sock_of(self, KBOX_CH_STDIN, err)) {
		kbox_msg_destroy(&req);
		free(x);
		return NULL;
	}
	if (stdin_on)
		wait_linked(self, KBOX_CH_STDIN, 5000);
	/* After an error reply with stop_on_error, ipykernel goes on aborting
	 * execute_requests for one more event-loop turn (ipykernel#609); a shell
	 * round trip closes that window so this request is not aborted. */
	if (self->settle) {
		kbox_msg_t *r = kbox_client_request(self, KBOX_CH_SHELL, "kernel_info_request",
		                                    NULL, 2000, NULL);
		kbox_msg_destroy(&r);
		self->settle = false;
	}
	if (kbox_client_send(self, KBOX_CH_SHELL, req, err) < 0) {
		kbox_msg_destroy(&req);
		free(x);
		return NULL;
	}
	req_id = kbox_msg_id(req);
	deadline = o->timeout_ms > 0 ? start + o->timeout_ms : 0;
	last_activity = last_iopub = kbox__now_ms();
	bucket_init(&bucket, o->max_msgs_per_sec, o->max_bytes_per_sec);
	mask = (1u << KBOX_CH_SHELL) | (1u << KBOX_CH_IOPUB) | (stdin_on ? 1u << KBOX_CH_STDIN : 0);

	while (!(got_reply && got_idle)) {
		long wait = HB_SILENCE_MS;
		long left = remaining(deadline);
		int r;

		if (deadline && left == 0) {
			if (o->interrupt_on_timeout && !x->interrupted) {
				kbox_error_t ie = {0};
				x->interrupted = true;
				if (kbox_client_interrupt(self, 2000, &ie) < 0)
					snprintf(x->reason, sizeof x->reason, "interrupt failed: %s", ie.msg);
				deadline = kbox__now_ms() + (o->grace_ms > 0 ? o->grace_ms : 5000);
				continue;
			}
			x->status = KBOX_EXEC_TIMEOUT;
			if (!x->reason[0]) {
				char t[32];
				kbox__fmt_ms(t, sizeof t, o->timeout_ms);
				snprintf(x->reason, sizeof x->reason,
				         x->interrupted ? "timed out after %s; interrupted, but the kernel "
				                          "did not finish within the grace period"
				                        : "timed out after %s",
				         t);
			}
			goto done;
		}
		if (deadline && left < wait)
			wait = left;
		r = poll_channels(self, mask, wait);
		if (r < 0) {
			x->status = KBOX_EXEC_DIED;
			snprintf(x->reason, sizeof x->reason, "poll failed: %s", zmq_strerror(zmq_errno()));
			goto done;
		}
		if (r == 0) {
			/* the reply came but idle never does: do not wait forever */
			if (got_reply && kbox__now_ms() - last_iopub >= REPLY_IDLE_MS) {
				x->output_lost = true;
				break;
			}
			if (kbox__now_ms() - last_activity >= HB_SILENCE_MS) {
				if (kernel_gone(self)) {
					x->status = KBOX_EXEC_DIED;
					snprintf(x->reason, sizeof x->reason,
					         owner_says_dead(self) ? "the kernel process exited"
					                               : "the kernel stopped answering heartbeats");
					goto done;
				}
				last_activity = kbox__now_ms();
			}
			continue;
		}
		last_activity = kbox__now_ms();
		if (r & (1 << KBOX_CH_IOPUB)) {
			kbox_msg_t *m = read_iopub_limited(self, &bucket, x, req_id);
			last_iopub = last_activity;
			const char *pid = m ? kbox_msg_parent_id(m) : NULL;
			if (m && pid && strcmp(pid, req_id) == 0) {
				json_t *st;
				if (strcmp(kbox_msg_type(m), "status") == 0 &&
				    (st = json_object_get(kbox_msg_content(m), "execution_state")) &&
				    json_is_string(st) && strcmp(json_string_value(st), "idle") == 0)
					got_idle = true;
				if (o->on_msg && o->on_msg(o->cb_arg, KBOX_CH_IOPUB, m) != 0) {
					x->status = KBOX_EXEC_TIMEOUT;
					snprintf(x->reason, sizeof x->reason, "stopped by the caller");
					kbox_msg_destroy(&m);
					goto done;
				}
				if (o->collect && exec_keep(x, &m) < 0) {
					kbox_msg_destroy(&m);
					x->status = KBOX_EXEC_DIED;
					snprintf(x->reason, sizeof x->reason, "out of memory");
					goto done;
				}
			}
			kbox_msg_destroy(&m);
		}
		if (r & (1 << KBOX_CH_SHELL)) {
			kbox_msg_t *m = read_one(self, KBOX_CH_SHELL);
			const char *pid = m ? kbox_msg_parent_id(m) : NULL;
			if (m && pid && strcmp(pid, req_id) == 0 &&
			    strcmp(kbox_msg_type(m), "execute_reply") == 0 && !x->reply) {
				x->reply = m;
				m = NULL;
				got_reply = true;
			}
			kbox_msg_destroy(&m);
		}
		if (r & (1 << KBOX_CH_STDIN)) {
			kbox_msg_t *m = read_one(self, KBOX_CH_STDIN);
			const char *pid = m ? kbox_msg_parent_id(m) : NULL;
			if (m && pid && strcmp(pid, req_id) == 0 &&
			    strcmp(kbox_msg_type(m), "input_request") == 0) {
				if (o->on_msg && o->on_msg(o->cb_arg, KBOX_CH_STDIN, m) != 0) {
					/* answer EOF so the kernel is not left blocked in input() */
					kbox_exec_opts_t eof = {0};
					if (!got_reply)
						answer_input(self, &eof, x, m);
					x->status = KBOX_EXEC_TIMEOUT;
					snprintf(x->reason, sizeof x->reason, "stopped by the caller");
					kbox_msg_destroy(&m);
					goto done;
				}
				if (!got_reply)
					answer_input(self, o, x, m);
			}
			kbox_msg_destroy(&m);
		}
	}

	if (x->output_lost) {
		/* libzmq ends a connection that sent a message over ZMQ_MAXMSGSIZE
		 * and does not reconnect it: make a new SUB and wait until it
		 * hears the kernel again */
		kbox_error_t re = {0};
		unmonitor(self, KBOX_CH_IOPUB);
		zsock_destroy(&self->sock[KBOX_CH_IOPUB]);
		self->sock[KBOX_CH_IOPUB] = make_socket(self, KBOX_CH_IOPUB, &re);
		if (!self->sock[KBOX_CH_IOPUB] || kbox_client_wait_ready(self, 10000, &re) < 0) {
			if (!self->sock[KBOX_CH_IOPUB])
				self->sock[KBOX_CH_IOPUB] = zsock_new(ZMQ_SUB);
			snprintf(x->reason, sizeof x->reason, "iopub could not be reconnected: %s",
			         re.msg);
		}
	}
	/* both arrived: take our output already queued behind idle, for a
	 * bounded time and through the rate limit (a kernel may never stop) */
	for (long long drain_end = kbox__now_ms() + DRAIN_MS;
	     kbox__now_ms() < drain_end && poll_channels(self, 1u << KBOX_CH_IOPUB, 0) > 0;) {
		kbox_msg_t *m = read_iopub_limited(self, &bucket, x, req_id);
		const char *pid = m ? kbox_msg_parent_id(m) : NULL;
		if (m && pid && strcmp(pid, req_id) == 0) {
			if (o->on_msg)
				o->on_msg(o->cb_arg, KBOX_CH_IOPUB, m);
			if (o->collect)
				exec_keep(x, &m);
		}
		kbox_msg_destroy(&m);
	}
	{
		json_t *rc = kbox_msg_content(x->reply);
		json_t *st = json_object_get(rc, "status");
		json_t *cnt = json_object_get(rc, "execution_count");
		const char *s = json_is_string(st) ? json_string_value(st) : "";
		if (json_is_integer(cnt))
			x->count = (int)json_integer_value(cnt);
		if (x->interrupted) {
			x->status = KBOX_EXEC_TIMEOUT;
			if (!x->reason[0]) {
				char t[32];
				kbox__fmt_ms(t, sizeof t, o->timeout_ms);
				snprintf(x->reason, sizeof x->reason,
				         "timed out after %s; the kernel was interrupted (state kept)", t);
			}
		} else if (strcmp(s, "ok") == 0)
			x->status = KBOX_EXEC_OK;
		else if (strcmp(s, "aborted") == 0) {
			x->status = KBOX_EXEC_ABORTED;
			snprintf(x->reason, sizeof x->reason,
			         "the kernel aborted this execution (an earlier one failed)");
		} else
			x->status = KBOX_EXEC_ERROR;
	}
done:
	if (x->reply && !o->no_stop_on_error) {
		json_t *st = json_object_get(kbox_msg_content(x->reply), "status");
		self->settle = !json_is_string(st) || strcmp(json_string_value(st), "ok") != 0;
	}
	if (x->status == KBOX_EXEC_TIMEOUT && x->reply) {
		json_t *cnt = json_object_get(kbox_msg_content(x->reply), "execution_count");
		if (json_is_integer(cnt))
			x->count = (int)json_integer_value(cnt);
	}
	x->seconds = (double)(kbox__now_ms() - start) / 1000.0;
	kbox_msg_destroy(&req);
	return x;
}

void kbox_exec_destroy(kbox_exec_t **self_p)
{
	kbox_exec_t *x;
	if (!self_p || !*self_p)
		return;
	x = *self_p;
	kbox_msg_destroy(&x->reply);
	for (size_t i = 0; i < x->n_outputs; i++)
		kbox_msg_destroy(&x->outputs[i]);
	free(x->outputs);
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
bool kbox_exec_output_lost(const kbox_exec_t *self) { return self->output_lost; }
const char *kbox_exec_reason(const kbox_exec_t *self) { return self->reason; }
