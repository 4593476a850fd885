/* kbox/loop.h — an event loop: file descriptors, timers, and (inside
 * libkbox) a client's ZeroMQ sockets, in one poll, with a handler each.
 *
 * A program that owns a kernel for a long time (kbox's session supervisor)
 * runs one loop over everything it waits for: its own sockets and signals
 * (kbox_loop_add_fd), its timers, and the channels of the kernel's client
 * (kbox_client_attach).  Handlers are short: each reacts to one event.
 * The blocking functions of kbox/client.h run a private loop of their own.
 *
 * Single-threaded: a loop and everything attached to it belong to the
 * thread that runs it. */
#ifndef KBOX_LOOP_H
#define KBOX_LOOP_H

#include <stdbool.h>
#include <kbox/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kbox_loop kbox_loop_t;

/* A handler.  Return 0 to go on, -1 to end kbox_loop_run (which then
 * returns -1). */
typedef int(kbox_loop_fn)(kbox_loop_t *loop, void *arg);

/* A new loop with nothing in it.  New: kbox_loop_destroy(&p); NULL with ERR. */
kbox_loop_t *kbox_loop_new(kbox_error_t *err);

/* Free SELF; what is registered is forgotten (file descriptors are not
 * closed).  Not from inside one of its handlers; detach clients first
 * (kbox_client_detach).  Sets *SELF_P to NULL.  Accepts NULL. */
void kbox_loop_destroy(kbox_loop_t **self_p);

/* Call FN(loop, ARG) each time FD is readable (or has hung up).  One
 * handler per descriptor: a second registration of FD replaces the first.
 * ARG is borrowed: it must stay valid while FD is registered.
 * 0, or -1 with ERR. */
int kbox_loop_add_fd(kbox_loop_t *self, int fd, kbox_loop_fn *fn, void *arg, kbox_error_t *err);

/* Forget FD (safe from inside any handler, FD's own included). */
void kbox_loop_remove_fd(kbox_loop_t *self, int fd);

/* Call FN(loop, ARG) once after MS milliseconds (a negative MS counts as
 * 0), or every MS milliseconds with REPEAT.  A timer runs at the earliest
 * in the dispatch after the one that added it; timers due together run
 * earliest first.  ARG is borrowed: it must stay valid until the timer
 * has run (one-shot) or is cancelled.  Returns the timer's id (> 0), or -1 with ERR. */
int kbox_loop_add_timer(kbox_loop_t *self, int ms, bool repeat, kbox_loop_fn *fn, void *arg,
                        kbox_error_t *err);

/* Cancel timer ID (safe from inside any handler; an unknown or spent id is
 * ignored). */
void kbox_loop_cancel_timer(kbox_loop_t *self, int id);

/* Dispatch events until a handler returns -1 or kbox_loop_stop is called
 * (also before: a stop asked for while the loop was not running ends the
 * next run at once).  0 after kbox_loop_stop, and at once when nothing is
 * registered (nothing could ever happen); -1 after a handler's -1 or a
 * failed poll.  A signal interrupting the poll is not a failure. */
int kbox_loop_run(kbox_loop_t *self);

/* Wait at most TIMEOUT_MS (-1: until something happens; at once when
 * nothing is registered) and dispatch what is ready, timers due included.
 * 1 when a handler returned -1 or the loop was stopped (the stop is then
 * spent), 0 otherwise, -1 when the poll failed. */
int kbox_loop_once(kbox_loop_t *self, int timeout_ms);

/* Make kbox_loop_run return 0 after the current handler. */
void kbox_loop_stop(kbox_loop_t *self);

#ifdef __cplusplus
}
#endif
#endif
