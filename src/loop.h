/* src/loop.h — what libkbox's modules add to kbox/loop.h: ZeroMQ sockets in
 * the same poll as the loop's descriptors and timers.  Never in a public
 * header (a public header does not drag in libzmq's types). */
#ifndef KBOX_SRC_LOOP_H
#define KBOX_SRC_LOOP_H

#include <kbox/error.h>
#include <kbox/loop.h>

/* The ZeroMQ calls made on a socket, which its owner counts: USES goes
 * up with every call (a send, a receive, ZMQ_EVENTS, a connect, a
 * monitor's start or stop); DRAINED is set to USES by a receive that
 * found nothing (libzmq processed the socket's commands, as ZMQ_EVENTS
 * would).  A socket's ZMQ_FD announces a waiting message reliably only
 * until the next call: the loop asks ZMQ_EVENTS of a socket whose
 * descriptor fired, or that was used (and not drained) since it asked. */
typedef struct {
	unsigned long uses;
	unsigned long drained;
} kbox__zuse_t;

/* Call FN(loop, ARG) each time ZMQ_SOCKET (a libzmq socket handle, as
 * zsock_resolve gives; borrowed, and it must outlive its registration) may
 * have a message to read; USE counts the calls made on it (see above;
 * borrowed too).  One handler per socket: a second registration replaces
 * the first.  ZeroMQ wakes a handler that finds nothing after all, so a
 * handler reads without blocking (ZMQ_DONTWAIT, or ZMQ_EVENTS first).  0,
 * or -1 with ERR. */
int kbox__loop_add_socket(kbox_loop_t *self, void *zmq_socket, const kbox__zuse_t *use,
                          kbox_loop_fn *fn, void *arg, kbox_error_t *err);

/* Forget ZMQ_SOCKET; call it before closing the socket.  Safe from inside
 * any handler, the socket's own included; an unknown socket is ignored. */
void kbox__loop_remove_socket(kbox_loop_t *self, void *zmq_socket);

#endif
