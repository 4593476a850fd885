/* src/loop.c — the event loop of kbox/loop.h: one poll(2) over the
 * registered descriptors and the ZMQ_FD of each ZeroMQ socket, the timers
 * between polls.
 *
 * Registrations live in two arrays.  A handler may add or remove any of
 * them, its own included, while the arrays are being walked further up the
 * stack: removing only marks an entry dead, adding only appends, and the
 * dead are swept once no dispatch is running.
 *
 * A ZeroMQ socket's ZMQ_FD is readable when the socket has commands to
 * process, not when it has a message: once anything has used the socket
 * (a send, a receive, ZMQ_EVENTS), a message may wait with the descriptor
 * quiet.  So the loop asks ZMQ_EVENTS (a poll(2) and a getpid(2) inside
 * libzmq) of a socket only when its descriptor fired, or when a call was
 * made on it since it last asked and the last call was not a receive that
 * found nothing (kbox__zuse_t, counted by the socket's owner: only libkbox
 * registers sockets).  zmq_poll asks every socket twice around each poll;
 * this asks each at most once per turn, and only those that were used. */
#include "private.h"
#include "loop.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define ITEMS_ON_STACK 16 /* poll items without a malloc */


typedef struct {
	void *socket; /* a libzmq socket, or NULL: FD */
	int fd;       /* FD, or the socket's ZMQ_FD */
	kbox_loop_fn *fn;
	void *arg;
	bool dead;
	const kbox__zuse_t *use; /* the calls made on the socket */
	bool asked;              /* ZMQ_EVENTS was asked since it was added… */
	unsigned long seen;      /* …when use->uses was this */
} poller_t;

typedef struct {
	int id;
	int ms;
	bool repeat;
	bool dead;
	long long due;      /* kx_now_ms() */
	unsigned long pass; /* the dispatch that last fired it */
	kbox_loop_fn *fn;
	void *arg;
} ltimer_t;

struct kbox_loop {
	poller_t *pollers;
	size_t n_pollers, cap_pollers;
	ltimer_t *timers;
	size_t n_timers, cap_timers;
	int last_id;
	unsigned long pass; /* dispatches so far */
	int depth;          /* dispatches in progress (a handler may call kbox_loop_once) */
	bool stopped;       /* kbox_loop_stop was called */
	bool failed;        /* a handler returned -1 */
};

kbox_loop_t *kbox_loop_new(kbox_error_t *err)
{
	kbox_loop_t *self = calloc(1, sizeof *self);
	if (!self)
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	return self;
}

void kbox_loop_destroy(kbox_loop_t **self_p)
{
	if (!self_p || !*self_p)
		return;
	free((*self_p)->pollers);
	free((*self_p)->timers);
	free(*self_p);
	*self_p = NULL;
}

/* Make room in *V (of *CAP elements of SIZE) for one more after N. */
static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	size_t want = *cap ? *cap * 2 : 8;
	void *p;
	if (n < *cap)
		return 0;
	p = realloc(*v, want * size);
	if (!p)
		return -1;
	*v = p;
	*cap = want;
	return 0;
}

/* Drop the dead entries; only when no dispatch is walking the arrays. */
static void sweep(kbox_loop_t *self)
{
	size_t j = 0;
	if (self->depth)
		return;
	for (size_t i = 0; i < self->n_pollers; i++)
		if (!self->pollers[i].dead)
			self->pollers[j++] = self->pollers[i];
	self->n_pollers = j;
	j = 0;
	for (size_t i = 0; i < self->n_timers; i++)
		if (!self->timers[i].dead)
			self->timers[j++] = self->timers[i];
	self->n_timers = j;
}

/* Register SOCKET (or FD when SOCKET is NULL), replacing its handler if it
 * has one. */
static int add_poller(kbox_loop_t *self, void *socket, const kbox__zuse_t *use, int fd,
                      kbox_loop_fn *fn, void *arg, kbox_error_t *err)
{
	poller_t *p;
	for (size_t i = 0; i < self->n_pollers; i++) {
		p = &self->pollers[i];
		if (!p->dead && (socket ? p->socket == socket : !p->socket && p->fd == fd)) {
			p->fn = fn;
			p->arg = arg;
			p->use = use;
			return 0;
		}
	}
	if (socket) {
		size_t len = sizeof fd;
		if (zmq_getsockopt(socket, ZMQ_FD, &fd, &len) < 0)
			return kbox_error_set(err, KBOX_E_SYSTEM,
			                      "loop: the socket has no descriptor: %s",
			                      zmq_strerror(zmq_errno()));
	}
	if (grow((void **)&self->pollers, &self->cap_pollers, self->n_pollers, sizeof *p) < 0)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	p = &self->pollers[self->n_pollers++];
	p->socket = socket;
	p->use = use;
	p->fd = fd;
	p->fn = fn;
	p->arg = arg;
	p->dead = false;
	p->asked = false; /* asked at the next turn */
	return 0;
}

static void remove_poller(kbox_loop_t *self, void *socket, int fd)
{
	for (size_t i = 0; i < self->n_pollers; i++) {
		poller_t *p = &self->pollers[i];
		if (!p->dead && (socket ? p->socket == socket : !p->socket && p->fd == fd))
			p->dead = true;
	}
	sweep(self);
}

int kbox_loop_add_fd(kbox_loop_t *self, int fd, kbox_loop_fn *fn, void *arg, kbox_error_t *err)
{
	if (fd < 0 || !fn)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "loop: no descriptor or no handler given");
	return add_poller(self, NULL, NULL, fd, fn, arg, err);
}

void kbox_loop_remove_fd(kbox_loop_t *self, int fd)
{
	if (fd >= 0)
		remove_poller(self, NULL, fd);
}

int kbox__loop_add_socket(kbox_loop_t *self, void *zmq_socket, const kbox__zuse_t *use,
                          kbox_loop_fn *fn, void *arg, kbox_error_t *err)
{
	if (!zmq_socket || !use || !fn)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "loop: no socket, use count or handler given");
	return add_poller(self, zmq_socket, use, -1, fn, arg, err);
}

void kbox__loop_remove_socket(kbox_loop_t *self, void *zmq_socket)
{
	if (zmq_socket)
		remove_poller(self, zmq_socket, -1);
}

int kbox_loop_add_timer(kbox_loop_t *self, int ms, bool repeat, kbox_loop_fn *fn, void *arg,
                        kbox_error_t *err)
{
	ltimer_t *t;
	if (!fn)
		return kbox_error_set(err, KBOX_E_INVALID, "loop: no timer handler given");
	if (grow((void **)&self->timers, &self->cap_timers, self->n_timers, sizeof *t) < 0)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	self->last_id = self->last_id == INT_MAX ? 1 : self->last_id + 1;
	t = &self->timers[self->n_timers++];
	t->id = self->last_id;
	t->ms = ms > 0 ? ms : 0;
	t->repeat = repeat;
	t->dead = false;
	t->due = kx_now_ms() + t->ms;
	t->pass = self->pass; /* not fired in the dispatch that is running */
	t->fn = fn;
	t->arg = arg;
	return t->id;
}

void kbox_loop_cancel_timer(kbox_loop_t *self, int id)
{
	for (size_t i = 0; i < self->n_timers; i++)
		if (!self->timers[i].dead && self->timers[i].id == id) {
			self->timers[i].dead = true;
			break;
		}
	sweep(self);
}

void kbox_loop_stop(kbox_loop_t *self)
{
	self->stopped = true;
}

/* Call the handlers of the descriptors and sockets found ready: READY[k]
 * for the poller WHICH[k]. */
static void fire_pollers(kbox_loop_t *self, const bool *ready, const size_t *which, size_t n)
{
	for (size_t k = 0; k < n && !self->stopped && !self->failed; k++) {
		poller_t *p;
		if (!ready[k])
			continue;
		p = &self->pollers[which[k]];
		if (p->dead) /* removed by an earlier handler */
			continue;
		if (p->fn(self, p->arg) < 0)
			self->failed = true;
	}
}

/* Call the handlers of the timers that are due, the earliest first, each
 * at most once (a timer added meanwhile waits for the next dispatch). */
static void fire_timers(kbox_loop_t *self)
{
	long long now = kx_now_ms();
	while (!self->stopped && !self->failed) {
		ltimer_t *t = NULL;
		kbox_loop_fn *fn;
		void *arg;
		for (size_t i = 0; i < self->n_timers; i++) {
			ltimer_t *c = &self->timers[i];
			if (!c->dead && c->pass != self->pass && c->due <= now &&
			    (!t || c->due < t->due))
				t = c;
		}
		if (!t)
			break;
		t->pass = self->pass;
		if (t->repeat) {
			t->due += t->ms;
			if (t->due <= now)
				t->due = now + t->ms;
		} else {
			t->dead = true;
		}
		fn = t->fn;
		arg = t->arg;
		if (fn(self, arg) < 0)
			self->failed = true;
	}
}

/* Whether the socket of P has a message to read (ZMQ_EVENTS), noting
 * when it was asked.  Interrupted, it is asked again at the next turn
 * (*AGAIN is set).  -1 when libzmq cannot say (errno set). */
static int socket_ready(kbox_loop_t *self, poller_t *p, bool *again)
{
	int events = 0;
	size_t len = sizeof events;
	p->asked = true;
	p->seen = p->use->uses; /* (asking is not counted: it is what a use makes up for) */
	if (zmq_getsockopt(p->socket, ZMQ_EVENTS, &events, &len) == 0)
		return (events & ZMQ_POLLIN) != 0;
	if (errno != EINTR)
		return -1;
	p->asked = false;
	*again = true;
	return 0;
}

/* One poll and the dispatch of what it found: 1 when stopped or a handler
 * failed, 0 otherwise, -1 when the poll failed. */
static int dispatch(kbox_loop_t *self, int timeout_ms)
{
	struct pollfd stack_fds[ITEMS_ON_STACK], *fds = stack_fds;
	size_t stack_which[ITEMS_ON_STACK], *which = stack_which;
	bool stack_ready[ITEMS_ON_STACK], *ready = stack_ready;
	long long now, wait = timeout_ms < 0 ? -1 : timeout_ms;
	size_t n = 0;
	bool now_ready = false; /* a socket has a message: do not wait */
	int rc = 0, r;

	if (self->stopped || self->failed)
		return 1;
	now = kx_now_ms();
	for (size_t i = 0; i < self->n_timers; i++) {
		const ltimer_t *t = &self->timers[i];
		long long left = t->due > now ? t->due - now : 0;
		if (!t->dead && (wait < 0 || left < wait))
			wait = left;
	}
	if (self->n_pollers > ITEMS_ON_STACK) {
		fds = malloc(self->n_pollers * sizeof *fds);
		which = malloc(self->n_pollers * sizeof *which);
		ready = malloc(self->n_pollers * sizeof *ready);
		if (!fds || !which || !ready) {
			errno = ENOMEM;
			rc = -1;
			goto out;
		}
	}
	for (size_t i = 0; i < self->n_pollers; i++) {
		poller_t *p = &self->pollers[i];
		if (p->dead)
			continue;
		fds[n].fd = p->fd;
		fds[n].events = POLLIN;
		fds[n].revents = 0;
		ready[n] = false;
		/* a socket used since it was last asked may hold a message
		 * that its descriptor will never announce */
		if (p->socket &&
		    (!p->asked || (p->use->uses != p->seen && p->use->uses != p->use->drained))) {
			if ((r = socket_ready(self, p, &now_ready)) < 0) {
				rc = -1;
				goto out;
			}
			ready[n] = r;
			now_ready |= r;
		}
		which[n++] = i;
	}
	if (n == 0 && wait < 0)
		goto out; /* nothing is registered: nothing can happen */
	if (now_ready)
		wait = 0;
	if (wait > INT_MAX)
		wait = INT_MAX;
	r = poll(n ? fds : NULL, n, (int)wait);
	if (r < 0 && errno != EINTR) {
		rc = -1;
		goto out;
	}
	for (size_t k = 0; r > 0 && k < n; k++) {
		poller_t *p = &self->pollers[which[k]];
		int got;
		if (!fds[k].revents || ready[k])
			continue;
		if (!p->socket) { /* readable, hung up or failed: its handler sees which */
			ready[k] = (fds[k].revents & ~(POLLOUT | POLLPRI)) != 0;
			continue;
		}
		if ((got = socket_ready(self, p, &now_ready)) < 0) {
			rc = -1;
			goto out;
		}
		ready[k] = got;
	}
	self->pass++;
	self->depth++;
	fire_pollers(self, ready, which, n);
	fire_timers(self);
	self->depth--;
	sweep(self);
	rc = self->stopped || self->failed ? 1 : 0;
out:
	if (fds != stack_fds)
		free(fds);
	if (which != stack_which)
		free(which);
	if (ready != stack_ready)
		free(ready);
	return rc;
}

int kbox_loop_once(kbox_loop_t *self, int timeout_ms)
{
	int rc = dispatch(self, timeout_ms);
	if (rc == 1)
		self->stopped = self->failed = false;
	return rc;
}

int kbox_loop_run(kbox_loop_t *self)
{
	for (;;) {
		int rc;
		if (!self->stopped && !self->failed && self->n_pollers == 0 && self->n_timers == 0)
			return 0; /* nothing left to wait for */
		rc = dispatch(self, -1);
		if (rc < 0)
			return -1;
		if (rc == 1) {
			bool failed = self->failed;
			self->stopped = self->failed = false;
			return failed ? -1 : 0;
		}
	}
}
