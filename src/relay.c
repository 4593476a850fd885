/* src/relay.c — kbox/relay.h: the front end's five sockets passed on to a
 * kernel's, each message checked and signed again on the way.
 *
 * One message at a time, never more: a handler reads what waits on one
 * socket, a message at a time, each straight into libzmq's own parts
 * (no copy), and sends those same parts on, the signature's replaced.
 * A message over the bounds is read to its end and dropped.  A handler
 * passes on at most BATCH messages a turn, so that one flooding side
 * does not starve the other (the loop calls it again at once: its
 * socket was used). */
#include "private.h"
#include "loop.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BATCH 64
#define MAX_IDENTITIES 16 /* routing frames before the delimiter */
#define HB_MAX_BYTES 1024 /* a heartbeat's frames, in all */
#define IOPUB_RCVHWM 200  /* as a client's (channel.c) */
#define FRONT_LINGER_MS 1000
#define BIND_RETRY_MS 20
/* Until an iopub message of the kernel's reaches the relay (the
 * subscription took), kernel_info is asked every JOIN_PROBE_MS, for at
 * most JOIN_MAX_MS: only then does the relay take the front end's
 * requests, whose output would be lost before. */
#define JOIN_PROBE_MS 50
#define JOIN_MAX_MS 10000
/* The routing frame of the relay's own requests: their replies end here. */
#define OWN_IDENTITY "kbox-relay"

/* One channel: the front end's socket and the kernel's, and what was
 * done with them. */
typedef struct chan chan_t;
struct chan {
	kbox_relay_t *relay;
	kbox_channel_t ch;
	zsock_t *front, *kernel;
	kbox__zuse_t front_use, kernel_use;
	int kernel_fd; /* the kernel's ipc socket file, held open (O_PATH), or -1 */
};

struct kbox_relay {
	chan_t chan[KBOX_CH_COUNT];
	kbox_auth_t *auth[2]; /* by side: the front end's key, the kernel's */
	kbox_loop_t *loop;
	bool connected;    /* the kernel's side is (kbox_relay_connect) */
	bool joined;       /* its iopub reached us: the front end's side is read */
	int probe_timer;   /* asking kernel_info until then */
	long long join_t0; /* when the asking began */
	kbox_relay_cb *cb;
	void *cb_arg;
	bool shedding;
	kbox_relay_stats_t stats;
	char session[37]; /* the header's session of the relay's own requests */
};

/* ---- sockets ---- */

/* The kernel's endpoint of CH into EP: for ipc, the socket file opened
 * without following a link, as the descriptor *FD_P, and named through
 * it.  0, or -1 with ERR. */
static int kernel_endpoint(const kbox_conn_t *kernel, kbox_channel_t ch, int *fd_p, char *ep,
                           size_t size, kbox_error_t *err)
{
	const char *endpoint = kbox_conn_endpoint(kernel, ch);
	struct stat st;
	int fd, n;

	if (kbox_conn_transport(kernel) != KBOX_TRANSPORT_IPC || strncmp(endpoint, "ipc://", 6)) {
		n = snprintf(ep, size, "%s", endpoint);
		goto fits;
	}
	fd = open(endpoint + 6, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return kbox_error_set_sys(err, "the kernel's %s socket %s", kbox_channel_name(ch),
		                          endpoint + 6);
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(fd);
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "the kernel's %s socket %s is not a socket: refusing to relay",
		        kbox_channel_name(ch), endpoint + 6);
	}
	*fd_p = fd;
	n = snprintf(ep, size, "ipc:///proc/self/fd/%d", fd);
fits:
	if (n < 0 || (size_t)n >= size)
		return kbox_error_set(err, KBOX_E_INVALID, "the endpoint %s is too long", endpoint);
	return 0;
}

/* Bind CH's front socket to FRONT's endpoint, waiting up to WAIT_MS
 * while its address is in use.  0, or -1 with ERR. */
static int front_bind(chan_t *c, const kbox_conn_t *front, int wait_ms, kbox_error_t *err)
{
	const char *ep = kbox_conn_endpoint(front, c->ch);
	long long deadline = kx_now_ms() + (wait_ms > 0 ? wait_ms : 0);
	for (;;) {
		if (zsock_bind(c->front, "%s", ep) >= 0)
			return 0;
		if (zmq_errno() != EADDRINUSE || kx_now_ms() >= deadline)
			break;
		usleep(BIND_RETRY_MS * 1000);
	}
	return kbox_error_set(err, KBOX_E_SYSTEM, "cannot bind the front end's %s socket %s: %s",
	                      kbox_channel_name(c->ch), ep, zmq_strerror(zmq_errno()));
}

/* Make channel CH of SELF: its front socket bound as FRONT says, its
 * kernel socket made (connected by chan_connect).  0, or -1 with ERR. */
static int chan_open(kbox_relay_t *self, kbox_channel_t ch, const kbox_conn_t *front, int wait_ms,
                     kbox_error_t *err)
{
	static const int front_type[KBOX_CH_COUNT] = {ZMQ_ROUTER, ZMQ_PUB, ZMQ_ROUTER, ZMQ_ROUTER,
	                                              ZMQ_ROUTER};
	static const int kernel_type[KBOX_CH_COUNT] = {ZMQ_DEALER, ZMQ_SUB, ZMQ_DEALER, ZMQ_DEALER,
	                                               ZMQ_DEALER};
	chan_t *c = &self->chan[ch];
	int64_t maxmsg = KBOX_MAX_MESSAGE_BYTES;

	c->relay = self;
	c->ch = ch;
	c->kernel_fd = -1;
	c->front = zsock_new(front_type[ch]);
	c->kernel = zsock_new(kernel_type[ch]);
	if (!c->front || !c->kernel)
		return kbox_error_set_sys(err, "cannot create the relay's %s sockets",
		                          kbox_channel_name(ch));
	/* what was queued for the front end gets a moment to leave at the
	 * end (a shutdown_reply); nothing waits for the kernel */
	zsock_set_linger(c->front, FRONT_LINGER_MS);
	zsock_set_linger(c->kernel, 0);
	zsock_set_sndtimeo(c->front, 0);
	zsock_set_sndtimeo(c->kernel, 0);
	/* (the front end's connection that sends a frame over it is cut, and
	 * it connects again; the kernel's is not bounded by libzmq, which
	 * would cut it for good: the relay drops what is over
	 * KBOX_RELAY_MAX_KERNEL_BYTES, and the supervisor's memory bound
	 * holds) */
	zmq_setsockopt(zsock_resolve(c->front), ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
	if (ch == KBOX_CH_SHELL || ch == KBOX_CH_STDIN)
		/* (one identity: the kernel sends an input_request on stdin to
		 * the identity its execute_request came from on shell) */
		zmq_setsockopt(zsock_resolve(c->kernel), ZMQ_ROUTING_ID, self->session,
		               strlen(self->session));
	if (ch == KBOX_CH_IOPUB) {
		int hwm = IOPUB_RCVHWM;
		zmq_setsockopt(zsock_resolve(c->kernel), ZMQ_RCVHWM, &hwm, sizeof hwm);
		zsock_set_subscribe(c->kernel, "");
	}
	return front_bind(c, front, wait_ms, err);
}

/* Connect CH's kernel socket to KERNEL's.  0, or -1 with ERR. */
static int chan_connect(kbox_relay_t *self, kbox_channel_t ch, const kbox_conn_t *kernel,
                        kbox_error_t *err)
{
	chan_t *c = &self->chan[ch];
	char ep[PATH_MAX + 32];
	if (kernel_endpoint(kernel, ch, &c->kernel_fd, ep, sizeof ep, err) < 0)
		return -1;
	if (zsock_connect(c->kernel, "%s", ep) < 0)
		return kbox_error_set(err, KBOX_E_SYSTEM,
		                      "cannot connect the relay to the kernel's %s socket %s: %s",
		                      kbox_channel_name(ch), kbox_conn_endpoint(kernel, ch),
		                      zmq_strerror(zmq_errno()));
	return 0;
}

/* ---- one message ---- */

/* Tell the observer. */
static void say(kbox_relay_t *self, kbox_relay_event_t ev, kbox_relay_side_t from,
                kbox_channel_t ch, const char *detail)
{
	if (self->cb)
		self->cb(self->cb_arg, ev, from, ch, detail);
}

static void drop(kbox_relay_t *self, kbox_relay_side_t from, kbox_channel_t ch, const char *why)
{
	self->stats.dropped[from]++;
	say(self, KBOX_RELAY_DROPPED, from, ch, why);
}

/* Send the parts of P on SOCK, each handed over (P holds none after, sent
 * or not).  0, or -1 when the socket took none (its queue is full, or
 * nobody is there). */
static int send_parts(void *sock, kbox__parts_t *p, size_t from)
{
	int rc = 0;
	for (size_t i = from; i < p->n; i++) {
		int flags = ZMQ_DONTWAIT | (i + 1 < p->n ? ZMQ_SNDMORE : 0);
		if (zmq_msg_send(&p->parts[i], sock, flags) < 0) {
			rc = -1; /* (only the first part can fail: the rest go with it) */
			break;
		}
	}
	return rc;
}

/* The message type of header FRAME, into TYPE: a JSON object with msg_id
 * and msg_type strings.  0, or -1 with WHY. */
static int check_header(const kbox_frame_t *frame, char *type, size_t size, const char **why)
{
	json_t *h, *id, *mt;
	if (frame->size > KBOX_MAX_HEADER_BYTES) {
		*why = "over the bounds: a header over 64 KiB";
		return -1;
	}
	h = json_loadb(frame->data, frame->size, JSON_REJECT_DUPLICATES, NULL);
	id = json_object_get(h, "msg_id");
	mt = json_object_get(h, "msg_type");
	if (!json_is_object(h) || !json_is_string(id) || !json_is_string(mt)) {
		json_decref(h);
		*why = "malformed: its header is not a JSON object with msg_id and msg_type";
		return -1;
	}
	snprintf(type, size, "%s", json_string_value(mt));
	json_decref(h);
	return 0;
}

/* Whether the content FRAME of a shutdown_request asks for a restart. */
static bool asks_restart(const kbox_frame_t *frame)
{
	json_t *c = json_loadb(frame->data, frame->size, 0, NULL);
	bool restart = json_is_true(json_object_get(c, "restart"));
	json_decref(c);
	return restart;
}

/* Check the message P that came from FROM on CH, sign it again for the
 * other side and send it there.  P is released. */
static void pass_on(kbox_relay_t *self, chan_t *c, kbox_relay_side_t from, kbox__parts_t *p)
{
	kbox_relay_side_t to = from == KBOX_RELAY_FRONT ? KBOX_RELAY_KERNEL : KBOX_RELAY_FRONT;
	void *out = zsock_resolve(to == KBOX_RELAY_KERNEL ? c->kernel : c->front);
	kbox_error_t err = {0};
	const char *why = NULL;
	char type[64] = "", sig[65];
	size_t d = 0, bytes = p->bytes;

	while (d < p->n && !(p->frames[d].size == sizeof KBOX_DELIMITER - 1 &&
	                     memcmp(p->frames[d].data, KBOX_DELIMITER, p->frames[d].size) == 0))
		d++;
	if (from == KBOX_RELAY_KERNEL && d == 1 && p->frames[0].size == strlen(OWN_IDENTITY) &&
	    memcmp(p->frames[0].data, OWN_IDENTITY, p->frames[0].size) == 0) {
		kbox__parts_close(p); /* the reply to a request of the relay's own */
		return;
	}
	if (d == p->n || p->n - d < 6)
		why = "malformed: no delimiter, or fewer than five frames after it";
	else if (d > MAX_IDENTITIES)
		why = "over the bounds: more than 16 routing frames";
	else if (d == 0 && c->ch != KBOX_CH_IOPUB)
		/* (a reply to the relay's own request, or to nobody) */
		why = "malformed: no routing frame to send it back by";
	else if (kbox_auth_verify(self->auth[from], p->frames + d + 2, p->frames[d + 1].data,
	                          p->frames[d + 1].size, &err) < 0)
		why = "bad signature";
	else if (kbox_auth_remember(self->auth[from], p->frames[d + 1].data, p->frames[d + 1].size,
	                            &err) < 0)
		why = "replayed";
	else
		check_header(&p->frames[d + 2], type, sizeof type, &why);
	if (why) {
		kbox__parts_close(p);
		drop(self, from, c->ch, why);
		return;
	}
	if (from == KBOX_RELAY_FRONT && c->ch == KBOX_CH_CONTROL &&
	    strcmp(type, "shutdown_request") == 0)
		say(self, KBOX_RELAY_SHUTDOWN, from, c->ch,
		    asks_restart(&p->frames[d + 5]) ? "restart" : "");
	kbox_auth_sign(self->auth[to], p->frames + d + 2, sig);
	zmq_msg_close(&p->parts[d + 1]);
	zmq_msg_init_size(&p->parts[d + 1], strlen(sig));
	memcpy(zmq_msg_data(&p->parts[d + 1]), sig, strlen(sig));
	if (send_parts(out, p, 0) < 0) {
		kbox__parts_close(p);
		drop(self, from, c->ch, "queue full");
		return;
	}
	kbox__parts_close(p); /* (the parts sent are empty now) */
	self->stats.passed[from]++;
	self->stats.bytes[from] += bytes;
}

/* A heartbeat, FROM either side: passed on as it is, within its bound. */
static void pass_beat(kbox_relay_t *self, chan_t *c, kbox_relay_side_t from, kbox__parts_t *p)
{
	void *out = zsock_resolve(from == KBOX_RELAY_FRONT ? c->kernel : c->front);
	size_t bytes = p->bytes;
	if (p->n < 2 || bytes > HB_MAX_BYTES) { /* (a routing frame and a beat) */
		kbox__parts_close(p);
		drop(self, from, c->ch, "malformed: not a heartbeat");
		return;
	}
	if (send_parts(out, p, 0) < 0) {
		kbox__parts_close(p);
		drop(self, from, c->ch, "queue full");
		return;
	}
	kbox__parts_close(p);
	self->stats.passed[from]++;
	self->stats.bytes[from] += bytes;
}

/* Pass on up to BATCH messages waiting on C's socket of side FROM; how
 * many were read (passed on or dropped). */
static size_t relay_some(chan_t *c, kbox_relay_side_t from, size_t batch)
{
	kbox_relay_t *self = c->relay;
	zsock_t *in = from == KBOX_RELAY_FRONT ? c->front : c->kernel;
	kbox__zuse_t *use = from == KBOX_RELAY_FRONT ? &c->front_use : &c->kernel_use;
	bool hb = c->ch == KBOX_CH_HB;

	size_t k;
	for (k = 0; k < batch; k++) {
		kbox__parts_t p;
		bool over;
		use->uses++;
		if (kbox__parts_recv_bounded(&p, zsock_resolve(in), hb ? 8 : KBOX_RELAY_MAX_FRAMES,
		                             hb ? HB_MAX_BYTES
		                             : from == KBOX_RELAY_KERNEL
		                                     ? KBOX_RELAY_MAX_KERNEL_BYTES
		                                     : KBOX_MAX_MESSAGE_BYTES,
		                             &over) < 0) {
			use->drained = use->uses; /* nothing more: wait for the descriptor */
			return k;
		}
		/* (the sockets the relay writes to count as used too: a send
		 * processes their commands, and may leave a message queued
		 * behind their quiet descriptors) */
		(from == KBOX_RELAY_FRONT ? &c->kernel_use : &c->front_use)->uses++;
		if (over) {
			drop(self, from, c->ch, "over the bounds: too many frames or bytes");
			continue;
		}
		if (from == KBOX_RELAY_KERNEL && c->ch == KBOX_CH_IOPUB && self->shedding) {
			kbox__parts_close(&p);
			drop(self, from, c->ch, "shedding");
			continue;
		}
		if (hb)
			pass_beat(self, c, from, &p);
		else
			pass_on(self, c, from, &p);
	}
	return k;
}

static int on_front(kbox_loop_t *loop, void *arg)
{
	(void)loop;
	relay_some(arg, KBOX_RELAY_FRONT, BATCH);
	return 0;
}

/* Take the front end's requests from now on. */
static int join(kbox_relay_t *self)
{
	kbox_error_t err = {0};
	if (self->joined)
		return 0;
	self->joined = true;
	if (self->probe_timer)
		kbox_loop_cancel_timer(self->loop, self->probe_timer);
	self->probe_timer = 0;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		chan_t *c = &self->chan[ch];
		/* (iopub's front socket is a PUB: nothing comes from it) */
		if (ch != KBOX_CH_IOPUB &&
		    kbox__loop_add_socket(self->loop, zsock_resolve(c->front), &c->front_use,
		                          on_front, c, &err) < 0)
			return -1;
	}
	return 0;
}

/* kernel_info again, until the kernel's iopub reaches us (or long enough). */
static int on_probe(kbox_loop_t *loop, void *arg)
{
	kbox_relay_t *self = arg;
	(void)loop;
	if (self->joined)
		return 0;
	if (kx_now_ms() - self->join_t0 >= JOIN_MAX_MS)
		return join(self);
	kbox_relay_request(self, KBOX_CH_SHELL, "kernel_info_request", NULL, NULL);
	return 0;
}

static int on_kernel(kbox_loop_t *loop, void *arg)
{
	chan_t *c = arg;
	(void)loop;
	/* (the first message of the kernel's iopub: our subscription took) */
	if (relay_some(c, KBOX_RELAY_KERNEL, BATCH) && c->ch == KBOX_CH_IOPUB)
		return join(c->relay);
	return 0;
}

/* ---- the API ---- */

kbox_relay_t *kbox_relay_new(const kbox_conn_t *front, int bind_wait_ms, kbox_error_t *err)
{
	kbox_relay_t *self;
	size_t flen = 0;
	const unsigned char *fkey = kbox_conn_key(front, &flen);

	if (!flen) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "the front end's connection has no key: a relay would pass "
		               "unsigned messages");
		return NULL;
	}
	if (!(self = calloc(1, sizeof *self))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		self->chan[ch].kernel_fd = -1;
	kbox_uuid(self->session);
	if (!(self->auth[KBOX_RELAY_FRONT] = kbox_auth_new(kbox_conn_scheme(front), fkey, flen, 0,
	                                                   err)))
		goto fail;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		if (chan_open(self, (kbox_channel_t)ch, front, bind_wait_ms, err) < 0)
			goto fail;
	return self;
fail:
	kbox_relay_destroy(&self);
	return NULL;
}

int kbox_relay_connect(kbox_relay_t *self, const kbox_conn_t *kernel, kbox_error_t *err)
{
	size_t klen = 0;
	const unsigned char *kkey = kbox_conn_key(kernel, &klen);
	if (self->connected)
		return kbox_error_set(err, KBOX_E_INVALID, "relay: already connected to a kernel");
	if (!(self->auth[KBOX_RELAY_KERNEL] = kbox_auth_new(kbox_conn_scheme(kernel), kkey, klen, 0,
	                                                    err)))
		return -1;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		if (chan_connect(self, (kbox_channel_t)ch, kernel, err) < 0)
			return -1;
	self->connected = true;
	return 0;
}

void kbox_relay_set_cb(kbox_relay_t *self, kbox_relay_cb *cb, void *arg)
{
	self->cb = cb;
	self->cb_arg = arg;
}

int kbox_relay_attach(kbox_relay_t *self, kbox_loop_t *loop, kbox_error_t *err)
{
	if (self->loop)
		return kbox_error_set(err, KBOX_E_INVALID, "relay: already attached");
	if (!self->connected)
		return kbox_error_set(err, KBOX_E_INVALID, "relay: not connected to a kernel");
	self->loop = loop;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		chan_t *c = &self->chan[ch];
		if (kbox__loop_add_socket(loop, zsock_resolve(c->kernel), &c->kernel_use, on_kernel,
		                          c, err) < 0) {
			kbox_relay_detach(self);
			return -1;
		}
	}
	/* the front end's side once the kernel's iopub is heard (join) */
	self->join_t0 = kx_now_ms();
	if (kbox_relay_request(self, KBOX_CH_SHELL, "kernel_info_request", NULL, err) < 0 ||
	    (self->probe_timer = kbox_loop_add_timer(loop, JOIN_PROBE_MS, true, on_probe, self,
	                                             err)) < 0) {
		self->probe_timer = 0;
		kbox_relay_detach(self);
		return -1;
	}
	return 0;
}

void kbox_relay_detach(kbox_relay_t *self)
{
	if (!self || !self->loop)
		return;
	if (self->probe_timer)
		kbox_loop_cancel_timer(self->loop, self->probe_timer);
	self->probe_timer = 0;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		if (self->chan[ch].front)
			kbox__loop_remove_socket(self->loop, zsock_resolve(self->chan[ch].front));
		if (self->chan[ch].kernel)
			kbox__loop_remove_socket(self->loop, zsock_resolve(self->chan[ch].kernel));
	}
	self->loop = NULL;
}

void kbox_relay_drain(kbox_relay_t *self)
{
	if (!self->connected)
		return;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		chan_t *c = &self->chan[ch];
		/* (BATCH at a time until a socket has nothing: bounded by what
		 * its queue held) */
		for (int round = 0; round < 1000; round++) {
			unsigned long before = c->kernel_use.drained;
			relay_some(c, KBOX_RELAY_KERNEL, BATCH);
			if (c->kernel_use.drained != before)
				break;
		}
		if (ch == KBOX_CH_IOPUB || !self->joined)
			continue;
		for (int round = 0; round < 1000; round++) {
			unsigned long before = c->front_use.drained;
			relay_some(c, KBOX_RELAY_FRONT, BATCH);
			if (c->front_use.drained != before)
				break;
		}
	}
}

void kbox_relay_set_shedding(kbox_relay_t *self, bool shed)
{
	self->shedding = shed;
}

int kbox_relay_request(kbox_relay_t *self, kbox_channel_t ch, const char *msg_type, json_t *content,
                       kbox_error_t *err)
{
	kbox_msg_t *m;
	zmsg_t *z;
	int rc;
	if (ch != KBOX_CH_SHELL && ch != KBOX_CH_CONTROL) {
		json_decref(content);
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "relay: requests go on shell or control");
	}
	if (!self->connected) {
		json_decref(content);
		return kbox_error_set(err, KBOX_E_INVALID, "relay: not connected to a kernel");
	}
	if (!(m = kbox_msg_new(msg_type, self->session, "kbox", &content)) ||
	    kbox_msg_add_identity(m, OWN_IDENTITY, strlen(OWN_IDENTITY)) < 0) {
		kbox_msg_destroy(&m);
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	z = kbox__msg_encode(m, self->auth[KBOX_RELAY_KERNEL], err);
	kbox_msg_destroy(&m);
	if (!z)
		return -1;
	self->chan[ch].kernel_use.uses++;
	rc = zmsg_send(&z, self->chan[ch].kernel);
	zmsg_destroy(&z);
	if (rc < 0)
		return kbox_error_set(err, KBOX_E_SYSTEM, "relay: cannot send %s to the kernel: %s",
		                      msg_type, zmq_strerror(zmq_errno()));
	return 0;
}

void kbox_relay_stats(const kbox_relay_t *self, kbox_relay_stats_t *out)
{
	*out = self->stats;
}

void kbox_relay_destroy(kbox_relay_t **self_p)
{
	kbox_relay_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	kbox_relay_detach(self);
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		zsock_destroy(&self->chan[ch].front);
		zsock_destroy(&self->chan[ch].kernel);
		if (self->chan[ch].kernel_fd >= 0)
			close(self->chan[ch].kernel_fd);
	}
	kbox_auth_destroy(&self->auth[0]);
	kbox_auth_destroy(&self->auth[1]);
	free(self);
	*self_p = NULL;
}
