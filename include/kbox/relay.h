/* kbox/relay.h — a relay between a Jupyter front end and a kernel: the
 * front end's five sockets, bound as its connection file gives them, each
 * passed on to the kernel's (kbox kernel, kbox-kernel(1)).
 *
 * Every message of shell, control and stdin, both ways, and of iopub from
 * the kernel, is checked on the way: its frames (at most
 * KBOX_RELAY_MAX_FRAMES; KBOX_MAX_MESSAGE_BYTES in all from the front
 * end, KBOX_RELAY_MAX_KERNEL_BYTES from the kernel), its signature
 * with the key of the side it came from and that side's replay history,
 * its header (a JSON object with msg_id and msg_type strings, at most
 * KBOX_MAX_HEADER_BYTES); then it is signed again with the key of the
 * side it goes to, its other frames passed on as they came (identities,
 * the four dicts, buffers).  What fails a check is dropped and counted.
 * So the kernel never learns the front end's key, and nothing that either
 * side did not sign passes.  The heartbeat is passed on to the kernel's
 * and back: it is answered while the kernel answers it.
 *
 * The routing is that of a ROUTER-DEALER broker: the front end's
 * identities travel with each request as routing frames, and the kernel
 * sends them back with its reply; the kernel-side shell and stdin sockets
 * share one identity, so that an input_request reaches the front end
 * whose execute_request asked for it.
 *
 * Bounded: a message over the bounds is read and dropped, never held; a
 * side that does not read loses messages at libzmq's queue limits
 * (counted) rather than holding them without end; while shedding
 * (kbox_relay_set_shedding), the kernel's iopub messages are dropped
 * unread.  Single-threaded, on a kbox_loop_t. */
#ifndef KBOX_RELAY_H
#define KBOX_RELAY_H

#include <stdbool.h>
#include <jansson.h>
#include <kbox/conn.h>
#include <kbox/error.h>
#include <kbox/loop.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most frames a message may have (identities, delimiter, signature,
 * the four dicts and buffers). */
#define KBOX_RELAY_MAX_FRAMES 1024
/* The most bytes a message of the kernel's may have (a front end's:
 * KBOX_MAX_MESSAGE_BYTES): a cell may print 100 MB, as with any kernel. */
#define KBOX_RELAY_MAX_KERNEL_BYTES (256L * 1024 * 1024)
/* How long kbox_relay_new waits for a port of the front end that is
 * still in use (the process a front end restarts may still hold it). */
#define KBOX_RELAY_BIND_WAIT_MS 10000

typedef struct kbox_relay kbox_relay_t;

/* Where a message came from. */
typedef enum { KBOX_RELAY_FRONT = 0, KBOX_RELAY_KERNEL = 1 } kbox_relay_side_t;

/* What the relay tells its observer. */
typedef enum {
	/* a message was dropped: DETAIL says why ("bad signature",
	 * "replayed", "malformed: …", "over the bounds: …", "queue full",
	 * "shedding") */
	KBOX_RELAY_DROPPED,
	/* the front end asked the kernel to shut down (shutdown_request on
	 * control, passed on); DETAIL is "restart" or "" */
	KBOX_RELAY_SHUTDOWN,
} kbox_relay_event_t;

/* Called for each event; CH is the channel, FROM the side the message
 * came from.  Must return at once; it may not destroy the relay. */
typedef void(kbox_relay_cb)(void *arg, kbox_relay_event_t event, kbox_relay_side_t from,
                            kbox_channel_t ch, const char *detail);

/* Counts, by the side messages came from. */
typedef struct {
	unsigned long long passed[2];  /* messages passed on */
	unsigned long long bytes[2];   /* their bytes */
	unsigned long long dropped[2]; /* refused or lost */
} kbox_relay_stats_t;

/* Bind FRONT's five sockets (its transport, address and ports: tcp, or
 * ipc), waiting up to BIND_WAIT_MS for an address in use.  Its key must
 * use a scheme kbox_auth_new takes, and may not be empty.  What the front
 * end sends waits in the sockets' queues until the relay is attached and
 * has joined (below).  FRONT is borrowed for the call.  New:
 * kbox_relay_destroy(&p); NULL with ERR. */
kbox_relay_t *kbox_relay_new(const kbox_conn_t *front, int bind_wait_ms, kbox_error_t *err);

/* Connect to KERNEL's sockets, bound already (an ipc socket file is
 * opened first, without following a link, and connected through that
 * descriptor), with KERNEL's key.  Once.  KERNEL is borrowed for the
 * call.  0, or -1 with ERR. */
int kbox_relay_connect(kbox_relay_t *self, const kbox_conn_t *kernel, kbox_error_t *err);

/* Observe SELF's events with CB(ARG, …) (NULL: none). */
void kbox_relay_set_cb(kbox_relay_t *self, kbox_relay_cb *cb, void *arg);

/* Relay from LOOP's handlers (after kbox_relay_connect): first from the
 * kernel only, asking it kernel_info (a request of the relay's own) until
 * a message of its iopub arrives, so that the relay's subscription has
 * taken and no output of the front end's first requests is lost; then
 * (it has joined) the front end's requests too.  0, or -1 with ERR. */
int kbox_relay_attach(kbox_relay_t *self, kbox_loop_t *loop, kbox_error_t *err);
/* Stop relaying from the loop (what waits stays queued).  Accepts a relay
 * that is not attached. */
void kbox_relay_detach(kbox_relay_t *self);

/* Pass on what waits on every socket now, both ways, without waiting
 * (a kernel that ended: its last replies). */
void kbox_relay_drain(kbox_relay_t *self);

/* While SHED, the kernel's iopub messages are dropped unread (counted). */
void kbox_relay_set_shedding(kbox_relay_t *self, bool shed);

/* Send the kernel a request of the relay's own on CH (control or shell):
 * MSG_TYPE with CONTENT (taken; NULL: {}), signed with its key.  Its
 * reply goes nowhere.  0, or -1 with ERR. */
int kbox_relay_request(kbox_relay_t *self, kbox_channel_t ch, const char *msg_type, json_t *content,
                       kbox_error_t *err);

/* SELF's counts into *OUT. */
void kbox_relay_stats(const kbox_relay_t *self, kbox_relay_stats_t *out);

/* Close the sockets: what is queued for the front end gets up to a second
 * to leave.  Sets *SELF_P to NULL.  Accepts NULL. */
void kbox_relay_destroy(kbox_relay_t **self_p);

#ifdef __cplusplus
}
#endif

#endif
