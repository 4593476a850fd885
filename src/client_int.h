/* src/client_int.h — the state of a client (kbox/client.h) and the calls
 * between its files (private to libkbox).
 *
 * Everything that waits for the kernel is a state machine driven by an
 * event loop (kbox/loop.h): one handler per channel reads what arrives
 * and hands it to whoever waits for it (a request, the readiness wait,
 * the execution, or the iopub callback), and the loop's timers carry
 * every deadline.  The blocking functions run the same machines on a
 * private loop.  The files, one concern each:
 *
 *   client.c       the client's life, send and receive, the loop's
 *                  handlers (who gets what arrives), ending what is
 *                  pending, the private loop of the blocking calls
 *   channel.c      the five sockets: connecting one (ipc files pinned),
 *                  its handshake monitor, registering it with the loop
 *   request.c      a request and its reply; the shell and control
 *                  requests of the API
 *   ready.c        the readiness wait (kernel_info on shell, then iopub)
 *   exec.c         an execution, from execute_request to its result
 *   iopub_guard.c  the rate limit, the gap counter and the unread look at
 *                  dropped output (iopub_guard.h), and iopub_decode
 *
 * Callbacks run from inside the loop and may do anything with what they
 * own: destroy the client, begin the next execution, detach.  So a state
 * is taken off the client before its callback is called, and code that
 * goes on after a callout first checks a guard (was the client
 * destroyed?) and reads the client's state afresh. */
#ifndef KBOX_CLIENT_INT_H
#define KBOX_CLIENT_INT_H

#include "private.h"
#include "loop.h"
#include "iopub_guard.h"

#include <stdbool.h>
#include <stddef.h>

#define DRAIN_MS 200 /* longest spent draining queued messages (ready.c, exec.c) */

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
	long long begun; /* kx_now_ms() at ready_start */
	long iopub_wait;
	bool shell_answered;
	bool iopub_heard; /* something came on iopub since the wait began */
	int t_deadline, t_phase;
	void *owner;
	kbox_ready_cb *cb;
	void *arg;
} ready_t;

/* The request of host-function calls an execution is answering
 * (src/calls.c). */
typedef struct calls_batch calls_batch_t;

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
	bool got_input; /* its execute_input came: the code is running */
	bool deferred;  /* the deadline passed before execute_input */
	/* kbox_exec_ask_interrupt: asked (its interrupt then waits for
	 * execute_input, T_ASKED at most), and the reason the execution ends
	 * with when the interrupt loses its reply */
	bool asked, reasked;
	char asked_why[KBOX_ERROR_MSG_MAX];
	int t_deadline, t_watch, t_phase, t_hb, t_asked, t_noreply;
	kbox__bucket_t bucket;
	bool hb_waiting; /* a ping is out */
	int hb_misses;
	/* after the reply, iopub silent: kernel_info probes sent, and the
	 * last one's id (its status on iopub comes after our idle) */
	int probes;
	char probe_id[128];
	long long hb_sent;
	kbox_exec_done_cb *done;
	void *arg;
	calls_batch_t *calls; /* the calls being answered, or NULL */
} exec_run_t;

/* One channel of a client, as the argument of its loop handlers. */
typedef struct {
	kbox_client_t *client;
	kbox_channel_t ch;
} chan_t;

/* A ZeroMQ call was made on CH's socket (ZMQ_USED) or monitor
 * (ZMQ_USED_MON): see kbox__zuse_t. */
#define ZMQ_USED(self, ch) ((void)(self)->zuse[ch].uses++)
#define ZMQ_USED_MON(self, ch) ((void)(self)->zuse_mon[ch].uses++)

struct kbox_client {
	bool shared; /* kbox_client_set_shared */
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
	bool must_pin; /* the kernel has answered: never connect by path */
	bool settle;   /* the last execute failed with stop_on_error: kernel may still abort */
	/* ipc: CH's socket is connected by path at the fast reconnect pace
	 * (channel_new), which a client gets until it is over (fast_over:
	 * channel_slow_down) */
	bool fast[KBOX_CH_COUNT];
	bool fast_over;

	/* the ZeroMQ calls made on each socket and monitor, for the loop
	 * (src/loop.h: ZMQ_USED after every call on one) */
	kbox__zuse_t zuse[KBOX_CH_COUNT], zuse_mon[KBOX_CH_COUNT];

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
	kbox__bucket_t iopub_bucket; /* output between executions */
	size_t iopub_dropped, iopub_dropped_bytes;
	bool shedding; /* kbox_client_set_shedding */
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
	kbox__seq_t seq; /* the kernel's message numbers seen during the execution */
	bool output_lost;
	bool went_idle; /* the kernel said idle for it */
	char reason[KBOX_ERROR_MSG_MAX];
	kbox_errcode_t unsent; /* the execute_request could not be sent: why (0: it was) */
	exec_run_t *run;       /* while in progress */
	json_t *calls;         /* the host-function calls that ended, or NULL */
	size_t n_calls;        /* calls counted against the budget */
};

/* ---- calls.c ---- */

/* M, an input_request of X's, is a request of host-function calls. */
bool calls_is_request(const kbox_exec_t *x, const kbox_msg_t *m);
/* Answer the request of calls *REQ_P (taken) of X: now, or once every
 * call has its answer. */
void calls_begin(kbox_client_t *self, kbox_exec_t *x, kbox_msg_t **req_p);
/* The execution ends with B unanswered: its calls are cancelled and
 * recorded, B is freed.  Accepts NULL. */
void calls_cancel(calls_batch_t *b);
void calls_batch_free(calls_batch_t *b);

/* ---- client.c ---- */

/* Before code that goes on after a callback: kbox_client_destroy sets
 * G->gone, after which the client must not be touched. */
void client_guard_on(kbox_client_t *self, guard_t *g);
/* After it: true when SELF is gone (then nothing of it may be touched). */
bool client_guard_off(kbox_client_t *self, guard_t *g);

/* A one-shot timer of the loop SELF is attached to, in MS (clamped to
 * 0..INT_MAX): its id, or 0 when it could not be made (out of memory). */
int client_add_timer(kbox_client_t *self, long long ms, kbox_loop_fn *fn, void *arg);
/* Cancel the timer *ID (0: none) and forget it. */
void client_cancel_timer(kbox_client_t *self, int *id);

/* True when the owner's alive hook says the process is gone. */
bool client_owner_says_dead(const kbox_client_t *self);
/* Start the alive tick, when there is an alive hook and none runs. */
void client_alive_tick_arm(kbox_client_t *self);

/* BUF (SIZE bytes) holds what a snprintf that returned N wrote: when that
 * was cut (N >= SIZE), it now ends at a character boundary with "...",
 * so that the cut shows and the text stays UTF-8.  For messages for
 * people, where a cut is acceptable but must not break the text. */
void client_text_cut(char *buf, size_t size, int n);

/* Read one message from CH without waiting: the decoded message (new), or
 * NULL when there was none or it was invalid (dropped and counted). */
kbox_msg_t *client_read_one(kbox_client_t *self, kbox_channel_t ch);
/* Decode P (closed here), which came on CH: the message (new), or NULL
 * when it is invalid (dropped and counted).  What comes during an
 * execution has its number noted (kbox__seq_note). */
kbox_msg_t *client_decode(kbox_client_t *self, kbox__parts_t *p, kbox_channel_t ch);
/* Receive into P the message waiting on CH (kbox__parts_recv): 0, or -1
 * when there is none. */
int client_recv(kbox_client_t *self, kbox_channel_t ch, kbox__parts_t *p);

/* The loop's handlers of a channel's socket and of its handshake monitor
 * (ARG is its chan_t). */
int client_on_channel(kbox_loop_t *loop, void *arg);
int client_on_monitor(kbox_loop_t *loop, void *arg);

/* What a blocking function waits for, filled by its callback. */
typedef struct {
	kbox_loop_t *loop;
	bool done;
	int rc;
	kbox_error_t err;
	kbox_msg_t *reply;
} waiter_t;

/* Attach SELF to a private loop for one blocking call named WHAT: 0, or -1
 * with ERR (a client on a loop of its own must use the _begin functions). */
int client_wait_begin(kbox_client_t *self, waiter_t *w, const char *what, kbox_error_t *err);
/* Run the private loop until W is done when BEGUN (a poll that fails
 * ends what is pending), then detach SELF and free the loop. */
void client_wait_end(kbox_client_t *self, waiter_t *w, bool begun);

/* ---- channel.c ---- */

/* A new socket for CH, connected (with its handshake monitor for stdin
 * and iopub), not yet watched by a loop.  New; NULL with ERR. */
zsock_t *channel_new(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err);
/* CH's socket, connected now (and watched by the loop) if it was not yet.
 * Borrowed; NULL with ERR. */
zsock_t *channel_sock(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err);
/* Register CH's socket and monitor with the loop SELF is attached to (if
 * any).  0 or -1 with ERR. */
int channel_watch(kbox_client_t *self, kbox_channel_t ch, kbox_error_t *err);
/* Unregister CH's socket and monitor from the loop (they stay open). */
void channel_unwatch(kbox_client_t *self, kbox_channel_t ch);
/* Stop CH's monitor, if it has one. */
void channel_unmonitor(kbox_client_t *self, kbox_channel_t ch);
/* Close CH's socket (and its monitor): the next use connects a new one. */
void channel_close(kbox_client_t *self, kbox_channel_t ch);
/* Is a message waiting on CH?  (Never blocks; false without a socket.) */
bool channel_readable(kbox_client_t *self, kbox_channel_t ch);
/* Let the iopub socket process its handshake, which sends our subscription. */
void channel_subscribe_now(kbox_client_t *self);
/* Read CH's monitor: true when it says CH's handshake completed (the
 * monitor is then stopped and CH marked linked). */
bool channel_linked_now(kbox_client_t *self, kbox_channel_t ch);
/* The fast pace of connecting by path is over: the sockets still at it
 * (but for those a request waits on) are made again at the slow pace. */
void channel_slow_down(kbox_client_t *self);

/* ---- request.c ---- */

/* Send a request of MSG_TYPE on CHANNEL; its reply (or the failure to get
 * one within TIMEOUT_MS, <= 0: KBOX_REQUEST_TIMEOUT_MS) goes to CB(ARG)
 * from the loop.  Takes *CONTENT_P.  OWNER: see request_t.  Borrowed (SELF
 * owns it until it ends); NULL with ERR when it could not be sent (CB is
 * then not called). */
request_t *request_start(kbox_client_t *self, kbox_channel_t channel, const char *msg_type,
                         json_t **content_p, int timeout_ms, void *owner, kbox_reply_cb *cb,
                         void *arg, kbox_error_t *err);
/* End R with REPLY (passed on) or ERR: its callback is the last thing done. */
void request_end(kbox_client_t *self, request_t *r, kbox_msg_t *reply, const kbox_error_t *err);
/* Free R (sent or not); accepts NULL. */
void request_free(request_t *r);
/* Forget the requests OWNER made, without their callbacks. */
void requests_cancel(kbox_client_t *self, const void *owner);
/* *M_P came on CH: when it answers a request, that request ends with it
 * (taken) and the result is true. */
bool request_on_reply(kbox_client_t *self, kbox_channel_t ch, kbox_msg_t **m_p);

/* ---- ready.c ---- */

/* Begin a readiness wait (see kbox_client_ready_begin) for OWNER (NULL:
 * the caller).  Borrowed (SELF owns it until it ends); NULL with ERR when
 * it could not begin. */
ready_t *ready_start(kbox_client_t *self, int timeout_ms, void *owner, kbox_ready_cb *cb, void *arg,
                     kbox_error_t *err);
/* End RD: ready (ERR NULL) or not; its callback is the last thing done. */
void ready_end(kbox_client_t *self, ready_t *rd, const kbox_error_t *err);
/* Take RD off SELF with its timers and request; its callback is then the
 * caller's to call (or not), RD the caller's to free. */
void ready_unlink(kbox_client_t *self, ready_t *rd);
/* Something came on iopub (after the iopub handler has read it). */
void ready_heard(kbox_client_t *self, ready_t *rd);
/* CH's handshake completed: the wait that waited for it goes on. */
void ready_linked(kbox_client_t *self, kbox_channel_t ch);

/* ---- exec.c ---- */

/* Finish X's bookkeeping and take it off SELF (timers, heartbeat, its
 * requests and readiness wait): DONE (*DONE_P with *ARG_P) is then the
 * caller's to call, last. */
void exec_close(kbox_client_t *self, kbox_exec_t *x, kbox_exec_done_cb **done_p, void **arg_p);
/* Both the reply and idle came and the output queued behind them was
 * taken: the status is the reply's.  DONE is the last thing done. */
void exec_finish(kbox_client_t *self, kbox_exec_t *x);
/* X's own iopub message *M_P (taken when collected). */
void exec_output(kbox_client_t *self, kbox_exec_t *x, kbox_msg_t **m_p);
/* A message whose parent is the probe of X (exec.c) came on iopub. */
void exec_probe_heard(kbox_client_t *self, kbox_exec_t *x);
/* *M_P came on shell or control (CH): activity for the execution running;
 * when it is its execute_reply it is taken and the result is true. */
bool exec_on_reply(kbox_client_t *self, kbox_channel_t ch, kbox_msg_t **m_p);
/* The handlers of stdin (input_requests, answered from the execution's
 * lines) and of hb (the echo of the execution's ping). */
void exec_on_stdin(kbox_client_t *self);
void exec_on_hb(kbox_client_t *self);
/* The wait for stdin's handshake is over, either way: X goes on. */
void exec_linked(kbox_client_t *self, kbox_exec_t *x);
/* Fill X's reason, a message for people (cut as client_text_cut says). */
void exec_set_reason(kbox_exec_t *x, const char *fmt, ...) KBOX_PRINTF(2, 3);

/* ---- iopub_guard.c ---- */

/* Read one iopub message, P (closed here); output over the limit of B is
 * dropped unverified and counted: against X when it is its own (REQ_ID),
 * against the iopub callback otherwise.  New, or NULL when dropped or
 * invalid. */
kbox_msg_t *iopub_decode(kbox_client_t *self, kbox__parts_t *p, kbox__bucket_t *b, kbox_exec_t *x,
                         const char *req_id);

#endif
