/* src/channel.c — a client's five sockets: connecting one (the ipc socket
 * files held open, so that a kernel cannot redirect us), the handshake
 * monitors of stdin and iopub, and registering them with the client's
 * loop.  Whoever needs a channel asks channel_sock; whoever finds it
 * stuck closes it, and the next use connects a new one. */
#include "client_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IOPUB_RCVHWM \
	200                   /* iopub messages queued unread, at most: with the ~1 MB
                          * messages of a print flood, ~200 MB however slow the reader */
#define RECONNECT_IVL 10      /* a refused connect is tried again after 10 ms… */
#define RECONNECT_IVL_MAX 100 /* …backing off to 100 (libzmq's: 100, no back-off) */
#define FAST_IVL 2            /* by path, while the kernel starts: every 2 ms… */
#define FAST_IVL_MAX 5        /* …backing off to 5 (see channel_new) */

/* A serial number for monitor endpoints: libzmq unbinds a stopped
 * monitor's inproc endpoint asynchronously, so a name made again at once
 * (a channel remade) could still be taken, and the new socket would have
 * no monitor. */
static atomic_ulong monitor_serial;

/* A snprintf of the endpoint of PATH into a buffer of SIZE returned N:
 * 0, or -1 with ERR when it was cut (a cut endpoint names another file). */
static int endpoint_fits(int n, size_t size, const char *path, kbox_error_t *err)
{
	if (n >= 0 && (size_t)n < size)
		return 0;
	return kbox_error_set(err, KBOX_E_INVALID,
	                      "the endpoint of %s is too long (at most %zu bytes)", path, size - 1);
}

/* The endpoint of the socket file PATH, not made yet, into EP: "ipc://PATH",
 * or, when PATH is too long for a unix socket, its name through a
 * descriptor of its directory that SELF holds.  0 or -1 with ERR. */
static int ipc_by_path(kbox_client_t *self, const char *path, char *ep, size_t size,
                       kbox_error_t *err)
{
	char dir[PATH_MAX], sun[KBOX__SUN_PATH];
	const char *slash = strrchr(path, '/');
	if (strlen(path) < sizeof sun || !slash || slash == path ||
	    (size_t)(slash - path) >= sizeof dir)
		return endpoint_fits(snprintf(ep, size, "ipc://%s", path), size, path, err);
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	if (kbox__unix_path(sun, sizeof sun, dir, slash + 1, &self->ipc_dir_fd, err) < 0)
		return -1;
	return endpoint_fits(snprintf(ep, size, "ipc://%s", sun), size, path, err);
}

/* The endpoint to connect CH to, into EP: for ipc, the socket file held
 * open without following a link (/proc/self/fd/N) once it exists; a file
 * there that is not a socket is refused.  Before the kernel has made it
 * (a client that waits for a starting kernel, whose code has not run
 * yet), the path itself (ipc_by_path), until the kernel answers (then the
 * channels connected by path are made again, pinned: see ready_pin).  After that
 * a missing socket file is an error: libzmq would follow whatever link
 * code in the sandbox put there.  0 or -1 with ERR. */
static int pin_ipc(kbox_client_t *self, kbox_channel_t ch, char *ep, size_t size, kbox_error_t *err)
{
	const char *endpoint = kbox_conn_endpoint(self->conn, ch);
	struct stat st;
	int fd;
	if (endpoint_fits(snprintf(ep, size, "%s", endpoint), size, endpoint, err) < 0)
		return -1;
	if (kbox_conn_transport(self->conn) != KBOX_TRANSPORT_IPC || strncmp(endpoint, "ipc://", 6))
		return 0;
	if (self->ipc_fd[ch] >= 0) {
		close(self->ipc_fd[ch]);
		self->ipc_fd[ch] = -1;
	}
	fd = open(endpoint + 6, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && self->must_pin)
		return kbox_error_set(err, KBOX_E_DEAD,
		                      "the kernel's %s socket %s is gone or was replaced",
		                      kbox_channel_name(ch), endpoint + 6);
	if (fd < 0)
		return errno == ENOENT ? ipc_by_path(self, endpoint + 6, ep, size, err)
		                       : kbox_error_set_sys(err, "%s socket %s",
		                                            kbox_channel_name(ch), endpoint + 6);
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(fd);
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "the %s socket %s is not a socket (%s): refusing to connect",
		                      kbox_channel_name(ch), endpoint + 6,
		                      S_ISLNK(st.st_mode) ? "a symbolic link"
		                                          : "another kind of file");
	}
	self->ipc_fd[ch] = fd; /* closed with SELF, or when CH is connected again */
	return endpoint_fits(snprintf(ep, size, "ipc:///proc/self/fd/%d", fd), size, endpoint + 6,
	                     err);
}

/* A new socket for CH, connected (with its handshake monitor for stdin
 * and iopub), not yet watched by a loop.  NULL with ERR. */
zsock_t *channel_new(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err)
{
	char ep[PATH_MAX + 32];
	static const int types[KBOX_CH_COUNT] = {ZMQ_DEALER, ZMQ_SUB, ZMQ_DEALER, ZMQ_DEALER,
	                                         ZMQ_REQ};
	zsock_t *s = zsock_new(types[ch]);
	ZMQ_USED(self, ch);
	ZMQ_USED_MON(self, ch);
	bool by_path;
	void *h;

	if (!s) {
		kbox_error_set_sys(err, "cannot create the %s socket", kbox_channel_name(ch));
		return NULL;
	}
	h = zsock_resolve(s);
	/* requests we sent get 1 s to leave; subscriptions and beats need none */
	zsock_set_linger(s, (ch == KBOX_CH_SHELL || ch == KBOX_CH_CONTROL) ? 1000 : 0);
	/* a full queue (peer gone, 1000 unanswered messages) is an error, not a hang */
	if (ch != KBOX_CH_IOPUB)
		zsock_set_sndtimeo(s, 0);
	if (ch == KBOX_CH_SHELL || ch == KBOX_CH_STDIN || ch == KBOX_CH_CONTROL)
		zmq_setsockopt(h, ZMQ_ROUTING_ID, self->session, strlen(self->session));
	if ((ch == KBOX_CH_STDIN || ch == KBOX_CH_IOPUB) && !self->mon[ch]) {
		char mon_ep[64];
		int n = snprintf(mon_ep, sizeof mon_ep, "inproc://kbox-%s-monitor-%p-%lu",
		                 kbox_channel_name(ch), (void *)self,
		                 atomic_fetch_add(&monitor_serial, 1));
		self->linked[ch] = false;
		/* (a cut name could be another client's: then no monitor, as when
		 * one cannot be made) */
		if (n > 0 && (size_t)n < sizeof mon_ep &&
		    zmq_socket_monitor(h, mon_ep, ZMQ_EVENT_HANDSHAKE_SUCCEEDED) == 0) {
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
	if (ch == KBOX_CH_STDIN) {
		/* a request of host-function calls is bounded too */
		int64_t maxmsg = KBOX_MAX_MESSAGE_BYTES;
		zmq_setsockopt(h, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
	}
	if (pin_ipc(self, ch, ep, sizeof ep, err) < 0) {
		zsock_destroy(&s);
		return NULL;
	}
	/* A starting kernel binds its sockets 0.3-1 s or more after we
	 * connect, and libzmq tries a refused connect again at its reconnect
	 * interval: the kernel is heard up to one interval after its bind.
	 * So a socket connected by path (its file not there yet: the kernel
	 * has not bound it) tries every 2 ms backing off to 5, for a bounded
	 * time: the readiness wait makes it again, pinned, when the kernel
	 * answers, and at the slow pace when the kernel takes longer than
	 * FAST_CONNECT_MS or the wait fails (ready.c).  Any other socket
	 * (pinned, tcp) tries every 10 ms backing off to 100. */
	by_path = kbox_conn_transport(self->conn) == KBOX_TRANSPORT_IPC && self->ipc_fd[ch] < 0 &&
	          !self->fast_over;
	self->fast[ch] = by_path;
	zsock_set_reconnect_ivl(s, by_path ? FAST_IVL : RECONNECT_IVL);
	zsock_set_reconnect_ivl_max(s, by_path ? FAST_IVL_MAX : RECONNECT_IVL_MAX);
	if (zsock_connect(s, "%s", ep) < 0) {
		kbox_error_set(err, KBOX_E_SYSTEM, "cannot connect the %s socket to %s: %s",
		               kbox_channel_name(ch), kbox_conn_endpoint(self->conn, ch),
		               zmq_strerror(zmq_errno()));
		zsock_destroy(&s);
		return NULL;
	}
	return s;
}

/* Register CH's socket and monitor with the loop SELF is attached to (if
 * any).  0 or -1 with ERR. */
int channel_watch(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err)
{
	if (!self->loop)
		return 0;
	if (self->sock[ch] &&
	    kbox__loop_add_socket(self->loop, zsock_resolve(self->sock[ch]), &self->zuse[ch],
	                          client_on_channel, &self->chan[ch], err) < 0)
		return -1;
	if (self->mon[ch] &&
	    kbox__loop_add_socket(self->loop, zsock_resolve(self->mon[ch]), &self->zuse_mon[ch],
	                          client_on_monitor, &self->chan[ch], err) < 0)
		return -1;
	return 0;
}

/* Unregister CH's socket and monitor from the loop (they stay open). */
void channel_unwatch(kbox_client_t *self, kbox_channel_t ch)
{
	if (!self->loop)
		return;
	if (self->sock[ch])
		kbox__loop_remove_socket(self->loop, zsock_resolve(self->sock[ch]));
	if (self->mon[ch])
		kbox__loop_remove_socket(self->loop, zsock_resolve(self->mon[ch]));
}

/* Stop CH's monitor, if it has one. */
void channel_unmonitor(kbox_client_t *self, kbox_channel_t ch)
{
	if (!self->mon[ch])
		return;
	ZMQ_USED(self, ch);
	ZMQ_USED_MON(self, ch);
	if (self->loop)
		kbox__loop_remove_socket(self->loop, zsock_resolve(self->mon[ch]));
	if (self->sock[ch])
		zmq_socket_monitor(zsock_resolve(self->sock[ch]), NULL, 0);
	zsock_destroy(&self->mon[ch]);
}

/* Close CH's socket (and its monitor): the next use connects a new one. */
void channel_close(kbox_client_t *self, kbox_channel_t ch)
{
	channel_unmonitor(self, ch);
	if (!self->sock[ch])
		return;
	ZMQ_USED(self, ch);
	if (self->loop)
		kbox__loop_remove_socket(self->loop, zsock_resolve(self->sock[ch]));
	zsock_destroy(&self->sock[ch]);
}

/* CH's socket, connected now (and watched by the loop) if it was not yet.
 * NULL with ERR. */
zsock_t *channel_sock(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err)
{
	if (self->sock[ch])
		return self->sock[ch];
	self->sock[ch] = channel_new(self, ch, err);
	if (self->sock[ch] && channel_watch(self, ch, err) < 0)
		channel_close(self, ch);
	return self->sock[ch];
}

/* Is a request of SELF's waiting for its reply on CH? */
static bool channel_busy(const kbox_client_t *self, kbox_channel_t ch)
{
	for (const request_t *r = self->requests; r; r = r->next)
		if (r->channel == ch)
			return true;
	return false;
}

/* The fast pace of connecting by path is over (see channel_new): the
 * sockets still trying at it, but for one a request waits on, are made
 * again at the slow pace.  One that cannot be made is left closed: the
 * next use connects one, or says why it cannot. */
void channel_slow_down(kbox_client_t *self)
{
	kbox_error_t e = {0};
	if (self->fast_over)
		return;
	self->fast_over = true;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		if (!self->sock[ch] || !self->fast[ch] || channel_busy(self, (kbox_channel_t)ch))
			continue;
		channel_close(self, (kbox_channel_t)ch);
		channel_sock(self, (kbox_channel_t)ch, &e);
	}
}

/* Is a message waiting on CH?  (Never blocks; false without a socket.) */
bool channel_readable(kbox_client_t *self, kbox_channel_t ch)
{
	ZMQ_USED(self, ch);
	return self->sock[ch] && (zsock_events(self->sock[ch]) & ZMQ_POLLIN);
}

/* Let the iopub socket process its handshake, which sends our subscription. */
void channel_subscribe_now(kbox_client_t *self)
{
	int events;
	size_t len = sizeof events;
	ZMQ_USED(self, KBOX_CH_IOPUB);
	if (self->sock[KBOX_CH_IOPUB])
		zmq_getsockopt(zsock_resolve(self->sock[KBOX_CH_IOPUB]), ZMQ_EVENTS, &events, &len);
}

/* Read CH's monitor: true when it says CH's handshake completed (the
 * monitor is then stopped and CH marked linked). */
bool channel_linked_now(kbox_client_t *self, kbox_channel_t ch)
{
	unsigned char ev[16];
	uint16_t id = 0;
	void *h;
	int n;

	ZMQ_USED_MON(self, ch);
	if (!self->mon[ch] || !(zsock_events(self->mon[ch]) & ZMQ_POLLIN))
		return false;
	h = zsock_resolve(self->mon[ch]);
	if ((n = zmq_recv(h, ev, sizeof ev, ZMQ_DONTWAIT)) < 0)
		return false;
	while (zsock_rcvmore(self->mon[ch])) { /* the endpoint */
		char rest[256];
		if (zmq_recv(h, rest, sizeof rest, ZMQ_DONTWAIT) < 0)
			break;
	}
	if (n >= 2)
		memcpy(&id, ev, 2);
	if (id != ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
		return false;
	channel_unmonitor(self, ch);
	self->linked[ch] = true;
	return true;
}
