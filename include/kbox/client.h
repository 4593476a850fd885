/* kbox/client.h — a client of one running kernel: the five channels, readiness,
 * execute to completion, stdin, and the other shell and control requests.
 *
 * shell, control and stdin are DEALER sockets sharing one routing id (the
 * client's session id), iopub is SUB subscribed to everything with no
 * high-water mark, hb is REQ and is recreated after a missed beat.  shell
 * and iopub are connected at once; control, stdin and hb when first used
 * (a request on control, an execution that allows stdin, a heartbeat).  A client
 * is not thread-safe; use one per thread.  Every message received is
 * verified; messages that fail (bad signature, replay, malformed) are
 * dropped and counted, never acted on. */
#ifndef KBOX_CLIENT_H
#define KBOX_CLIENT_H

#include <stdbool.h>
#include <jansson.h>
#include <kbox/error.h>
#include <kbox/conn.h>
#include <kbox/wire.h>
#include <kbox/kspec.h>
#include <kbox/loop.h>
#include <kbox/functions.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kbox_client kbox_client_t;

/* Hooks an owner of the kernel process supplies (see kbox_kernel_connect). */
typedef struct {
	/* Interrupt the kernel (e.g. killpg SIGINT). 0 or -1 with ERR.  When
	 * NULL, interrupts are sent as interrupt_request on control. */
	int (*interrupt)(void *arg, kbox_error_t *err);
	/* 1 if the kernel process is alive, 0 if it is gone. NULL → heartbeat only. */
	int (*alive)(void *arg);
	void *arg;
} kbox_client_hooks_t;

/* Connect to the kernel described by CONN (copied).  Connecting does not
 * wait for the kernel; call kbox_client_wait_ready.  New:
 * kbox_client_destroy(&p); NULL with ERR. */
kbox_client_t *kbox_client_new(const kbox_conn_t *conn, kbox_error_t *err);

/* Close the sockets (linger 1 s at most), wipe the key, free SELF.  A
 * client still attached to a loop is detached first (see
 * kbox_client_detach).  May be called from one of its own callbacks.
 * Accepts NULL. */
void kbox_client_destroy(kbox_client_t **self_p);

/* HOOKS is copied; HOOKS->arg is borrowed: it must outlive SELF. */
void kbox_client_set_hooks(kbox_client_t *self, const kbox_client_hooks_t *hooks);

/* SHARED: other clients talk to the kernel too (a Jupyter server's own
 * requests and its other front ends, as with a gateway): the numbers of
 * the messages it sends them are gaps in what SELF sees, not losses, and
 * kbox_exec_drops_t.never_arrived is not counted (0). */
void kbox_client_set_shared(kbox_client_t *self, bool shared);

/* This client's protocol session id (a UUID). Borrowed: valid while SELF lives. */
const char *kbox_client_session(const kbox_client_t *self);

/* Wait until the kernel answers kernel_info on shell AND its iopub reaches us
 * (the slow-joiner problem): first wait (up to 0.25 s) until the iopub
 * connection has completed its handshake and our subscription has left, so
 * the first request's status messages usually reach us; then send
 * kernel_info_request, wait up to 1 s for the reply, then briefly (10 ms,
 * doubling up to 0.2 s on each retry) for any iopub message; repeat until
 * TIMEOUT_MS.
 * Flushes iopub afterwards, then, if the stdin socket is connected, waits
 * (within the same time) for its handshake, since the kernel drops input
 * requests to a peer it does not know yet (an execution that allows stdin
 * connects it and waits for that itself).  Fails with KBOX_E_DEAD when the alive hook says
 * the process exited, KBOX_E_TIMEOUT otherwise. */
int kbox_client_wait_ready(kbox_client_t *self, int timeout_ms, kbox_error_t *err);

/* Content of the last kernel_info_reply, or NULL before one arrived.
 * Borrowed: valid while SELF lives and until the next kernel_info_reply
 * replaces it (kbox_client_wait_ready, kbox_client_kernel_info_request). */
json_t *kbox_client_kernel_info(const kbox_client_t *self);

/* Send one ping on hb and wait up to TIMEOUT_MS for the echo. 0 when it came
 * back; -1 otherwise (the REQ socket is then recreated). */
int kbox_client_heartbeat(kbox_client_t *self, int timeout_ms);

/* ---- low level ---- */

/* Sign and send MSG (borrowed for the call; the caller still owns it) on
 * CHANNEL (shell, control or stdin). */
int kbox_client_send(kbox_client_t *self, kbox_channel_t channel, const kbox_msg_t *msg,
                     kbox_error_t *err);

/* Receive the next valid message on CHANNEL within TIMEOUT_MS (-1 = forever,
 * 0 = poll).  Invalid messages are dropped and counted.  NULL with ERR
 * (KBOX_E_TIMEOUT when nothing valid came).  New: kbox_msg_destroy(&p). */
kbox_msg_t *kbox_client_recv(kbox_client_t *self, kbox_channel_t channel, int timeout_ms,
                             kbox_error_t *err);

/* A new message from this client's session (kbox_msg_new): *CONTENT_P is
 * taken, also on failure.  New: kbox_msg_destroy(&p). */
kbox_msg_t *kbox_client_msg(kbox_client_t *self, const char *msg_type, json_t **content_p);

/* Default wait for a reply when a request is given a timeout of 0 or less:
 * no request waits forever. */
#define KBOX_REQUEST_TIMEOUT_MS 30000

/* Send a request of MSG_TYPE on CHANNEL (shell or control) and wait up to
 * TIMEOUT_MS (<= 0: KBOX_REQUEST_TIMEOUT_MS) for the reply whose parent is
 * it; other replies are discarded.  Fails early with KBOX_E_DEAD when the
 * alive hook reports the process gone.
 * *CONTENT_P is taken, also on failure.  The reply is new:
 * kbox_msg_destroy(&p); NULL with ERR.  KBOX_E_TIMEOUT names the
 * request: "kernel did not answer complete_request within 10 s". */
kbox_msg_t *kbox_client_request(kbox_client_t *self, kbox_channel_t channel, const char *msg_type,
                                json_t **content_p, int timeout_ms, kbox_error_t *err);

/* Messages dropped because they failed verification, and why the last one
 * was ("" before any).  The reason is borrowed: a buffer in SELF, valid
 * while SELF lives, overwritten by the next drop. */
unsigned long kbox_client_dropped(const kbox_client_t *self);
const char *kbox_client_last_drop(const kbox_client_t *self);

/* ---- on an event loop ----
 *
 * The functions above and below that wait (wait_ready, request, execute…)
 * run a private loop until they are done.  A program that must do other
 * things meanwhile (a supervisor answering its own clients) attaches the
 * client to its own loop instead and uses the _begin functions: each sends
 * its request and returns at once; the loop's handlers (one per channel)
 * read the replies and call the callback given, exactly once, from inside
 * the loop (or from kbox_client_fail_pending and kbox_client_detach, before
 * they return), never from the _begin function itself.  A callback may do
 * anything with what it owns: begin the next request or execution, detach,
 * destroy the client.  While attached, the waiting functions fail with
 * KBOX_E_INVALID (kbox_client_heartbeat and kbox_client_recv read the
 * sockets directly: not from a loop the client is attached to either).
 *
 * Nothing here blocks: deadlines, retries, the grace period after an
 * interrupt, the heartbeat and the wait for a socket's handshake are the
 * loop's timers and handlers.  What does run inside a handler are the
 * hooks (kbox_client_hooks_t), which must return at once. */

/* Register SELF's channels with LOOP (one loop at a time).  From then on
 * every message is read by LOOP's handlers: replies go to the request that
 * is waiting for them, an execution's output to that execution, and other
 * iopub messages to the iopub callback.  0 or -1 with ERR. */
int kbox_client_attach(kbox_client_t *self, kbox_loop_t *loop, kbox_error_t *err);

/* Unregister SELF from its loop.  Pending requests, the readiness wait and
 * the execution end at once (their callbacks run before this returns, with
 * KBOX_E_INVALID "detached", the execution with status KBOX_EXEC_DIED and
 * the reason "detached"), SELF already detached when they run.  Accepts a
 * client that is not attached. */
void kbox_client_detach(kbox_client_t *self);

/* Called for each verified iopub message that belongs to no execution of
 * this client in progress: output a kernel prints between executions (a
 * background thread, a timer), or after an execution has ended.  MSG is
 * borrowed for the call.  Such output passes the same rate limit as an
 * execution's (KBOX_RATE_*): what is over it is dropped and counted
 * (kbox_client_iopub_dropped).  CB NULL: such messages are discarded. */
typedef void(kbox_iopub_cb)(void *arg, const kbox_msg_t *msg);
void kbox_client_set_iopub_cb(kbox_client_t *self, kbox_iopub_cb *cb, void *arg);
/* Messages (and their bytes) the iopub callback did not get because of the
 * rate limit, since the client was made. */
size_t kbox_client_iopub_dropped(const kbox_client_t *self, size_t *bytes);

/* While ON, output messages (stream, display_data, update_display_data)
 * are dropped unread and counted as over the rate limit, whatever the
 * limit: for a reader that falls behind a flood and must empty its queue
 * (ZeroMQ's, of messages received and not yet read) before its memory
 * runs out.  Off when the client is made. */
void kbox_client_set_shedding(kbox_client_t *self, bool on);

/* Called once when a _begin operation ends.  RC is 0 on success, -1 with
 * ERR (borrowed for the call) on failure. */
typedef void(kbox_ready_cb)(void *arg, int rc, const kbox_error_t *err);

/* kbox_client_wait_ready on the attached loop: CB(ARG, 0, NULL) once the
 * kernel answers on shell and iopub, CB(ARG, -1, ERR) when it cannot
 * (KBOX_E_DEAD when the alive hook says the process ended, KBOX_E_TIMEOUT
 * after TIMEOUT_MS).  0, or -1 with ERR when it could not begin (not
 * attached, already waiting). */
int kbox_client_ready_begin(kbox_client_t *self, int timeout_ms, kbox_ready_cb *cb, void *arg,
                            kbox_error_t *err);

/* Called once with the reply to a request (ownership passes to the
 * callback: destroy it), or with REPLY NULL and ERR on timeout, death of
 * the kernel or detach.  ERR is borrowed for the call. */
typedef void(kbox_reply_cb)(void *arg, kbox_msg_t *reply, const kbox_error_t *err);

/* kbox_client_request on the attached loop: the reply is the message on
 * CHANNEL whose parent is this request.  *CONTENT_P is taken (also on
 * failure) and set to NULL; MSG_TYPE is copied.  0, or -1 with ERR when it could not be sent (CB is then not
 * called). */
int kbox_client_request_begin(kbox_client_t *self, kbox_channel_t channel, const char *msg_type,
                              json_t **content_p, int timeout_ms, kbox_reply_cb *cb, void *arg,
                              kbox_error_t *err);

/* End every pending request, readiness wait and execution of SELF now, as
 * if the kernel had died: requests and the readiness wait get KBOX_E_DEAD
 * with REASON (NULL: "the kernel died"), an execution ends with
 * KBOX_EXEC_DIED and REASON, copied (for an owner that knows the process is gone
 * before the channels tell).  Callbacks run before this returns; what they
 * begin is not ended.  SELF stays attached. */
void kbox_client_fail_pending(kbox_client_t *self, const char *reason);

/* ---- requests ----
 *
 * Each sends its request (the strings given are copied into it) and
 * returns the reply: new, kbox_msg_destroy(&p); NULL with ERR, as
 * kbox_client_request. */

kbox_msg_t *kbox_client_kernel_info_request(kbox_client_t *self, int timeout_ms, kbox_error_t *err);
/* CURSOR_POS counts Unicode code points; -1 means the end of CODE. */
kbox_msg_t *kbox_client_complete(kbox_client_t *self, const char *code, int cursor_pos,
                                 int timeout_ms, kbox_error_t *err);
kbox_msg_t *kbox_client_inspect(kbox_client_t *self, const char *code, int cursor_pos,
                                int detail_level, int timeout_ms, kbox_error_t *err);
kbox_msg_t *kbox_client_is_complete(kbox_client_t *self, const char *code, int timeout_ms,
                                    kbox_error_t *err);
/* ARGS (copied: a deep copy; NULL → the default below) is the
 * history_request content, e.g.
 * {"hist_access_type":"tail","n":10,"output":false,"raw":true}. */
kbox_msg_t *kbox_client_history(kbox_client_t *self, json_t *args, int timeout_ms,
                                kbox_error_t *err);
/* TARGET_NAME may be NULL for all comms. */
kbox_msg_t *kbox_client_comm_info(kbox_client_t *self, const char *target_name, int timeout_ms,
                                  kbox_error_t *err);
/* shutdown_request{restart} on control. */
kbox_msg_t *kbox_client_shutdown(kbox_client_t *self, bool restart, int timeout_ms,
                                 kbox_error_t *err);
/* Interrupt: the interrupt hook when set, else interrupt_request on control
 * (waiting up to TIMEOUT_MS for interrupt_reply). 0 or -1 with ERR. */
int kbox_client_interrupt(kbox_client_t *self, int timeout_ms, kbox_error_t *err);

/* ---- execute ---- */

typedef enum {
	KBOX_EXEC_OK = 0,      /* execute_reply status ok */
	KBOX_EXEC_ERROR,       /* the code raised: reply status error */
	KBOX_EXEC_ABORTED,     /* the kernel aborted it (queued behind an error) */
	KBOX_EXEC_TIMEOUT,     /* the deadline passed (interrupted if asked to) */
	KBOX_EXEC_DIED,        /* the kernel died or stopped answering */
	KBOX_EXEC_INTERRUPTED, /* a front end interrupted it (kbox_exec_ask_interrupt) */
} kbox_exec_status_t;

/* "ok", "error", "aborted", "timeout", "died", "interrupted": static
 * (borrowed). */
const char *kbox_exec_status_name(kbox_exec_status_t status);

/* Called for each iopub message whose parent is this request, as it
 * arrives, and for each stdin input_request.  MSG is borrowed for the call.
 * Return 0 to go on, non-zero to stop waiting (the result is then TIMEOUT
 * without interrupting). */
typedef int(kbox_exec_cb)(void *arg, kbox_channel_t channel, const kbox_msg_t *msg);

typedef struct {
	const char *code;         /* copied into the request */
	bool silent;              /* default false */
	bool no_store_history;    /* default: store history (forced off when silent) */
	bool no_stop_on_error;    /* default: stop_on_error true */
	json_t *user_expressions; /* borrowed for the call: the request holds its
	                           * own reference (json_incref, not a copy);
	                           * NULL → {} */
	/* Stdin.  By default allow_stdin is false and input() fails at once with
	 * the kernel's "raw_input was called, but this frontend does not support
	 * input requests" error.  With INPUT_LINES (N_INPUT of them, possibly 0)
	 * allow_stdin is true and each input_request is answered with the next
	 * line, then with EOF ("\x04") once they run out. */
	const char *const *input_lines;
	size_t n_input;
	bool allow_stdin;
	/* Wait at most TIMEOUT_MS (0 or less → forever). */
	int timeout_ms;
	/* On timeout, interrupt the kernel and wait up to GRACE_MS (default
	 * 5000) for the interrupted execution to finish. */
	bool interrupt_on_timeout;
	int grace_ms;
	/* Keep every iopub message of the execution in the result. */
	bool collect;
	/* Rate limit on iopub output (stream, display_data and
	 * update_display_data messages): at most MAX_MSGS_PER_SEC messages and
	 * MAX_BYTES_PER_SEC bytes per second, averaged over a 2 s window
	 * (0 → the defaults below; negative → no limit).  Output over the limit
	 * is dropped unverified (only its header is read, to see its type) and
 * counted, so a
	 * flood cannot starve the client of its own control of the kernel. */
	double max_msgs_per_sec;
	double max_bytes_per_sec;
	/* Called before output over the rate limit is dropped: while it says
	 * true (the receiver keeps what it is given on disk, in bounded memory:
	 * kbox_capture_can_spill), the execution's own output is read instead.
	 * Memory pressure (kbox_client_set_shedding) drops it all the same. */
	bool (*keep_output)(void *arg);
	kbox_exec_cb *on_msg;
	void *cb_arg;
	/* Host functions the code may call (kbox/functions.h): borrowed, it
	 * must outlive the execution.  Their code must have run in the kernel
	 * (kbox_functions_kernel_code).  NULL: none. */
	kbox_functions_t *functions;
} kbox_exec_opts_t;

#define KBOX_RATE_MSGS_PER_SEC 1000.0
#define KBOX_RATE_BYTES_PER_SEC (16.0 * 1024 * 1024)
#define KBOX_RATE_WINDOW_SEC 2.0
/* iopub messages larger than this are refused by the socket, so one huge
 * display cannot exhaust memory.  libzmq then ends the connection for good;
 * the execution reports its output lost (kbox_exec_output_lost) and the
 * client reconnects iopub before it returns. */
#define KBOX_MAX_MESSAGE_BYTES (64L * 1024 * 1024)

typedef struct kbox_exec kbox_exec_t;

/* Run OPTS->code to completion: send execute_request, keep only iopub
 * messages whose parent is this request, finish when both status idle and
 * execute_reply have arrived (in either order; output already queued behind
 * idle is still taken; after the reply, 2 s of iopub silence sends a
 * kernel_info_request, whose status on iopub comes after idle: when it
 * comes, idle was lost on the way and the wait ends; when the kernel answers
 * two such requests and iopub stays silent 2 s after each, iopub is taken
 * to be broken and is reconnected; output still arriving after both is taken for at
 * most 200 ms), or on timeout, or when the kernel dies (the alive
 * hook for a kernel we own; two missed heartbeats after 1 s of silence for
 * one we do not).  A callback that returns non-zero
 * on an input_request gets it answered with EOF before the wait stops.
 * After an execution that failed with stop_on_error, the next execute first
 * makes a kernel_info round trip: ipykernel goes on aborting requests for
 * one more turn of its event loop (ipykernel#609), and this closes that gap.
 * OPTS is borrowed for the call.  Returns a new result:
 * kbox_exec_destroy(&p); NULL with ERR only when the request could not be
 * sent. */
kbox_exec_t *kbox_client_execute(kbox_client_t *self, const kbox_exec_opts_t *opts,
                                 kbox_error_t *err);

/* Called once when an execution begun with kbox_client_execute_begin has
 * ended; X (with the same accessors as a finished kbox_client_execute's)
 * is taken by the callback (new to it from then on): kbox_exec_destroy it. */
typedef void(kbox_exec_done_cb)(void *arg, kbox_exec_t *x);

/* kbox_client_execute on the attached loop: send the execute_request and
 * return at once; OPTS->on_msg sees the messages as the loop reads them,
 * timeouts (with the interrupt and grace period) are the loop's timers,
 * and DONE(ARG, X) is called once at the end.  OPTS is copied (CODE and
 * the input lines too; user_expressions is referenced).  One execution at
 * a time per client.  NULL with ERR when it could not be sent (not
 * attached, one already running, bad code); DONE is then not called.
 * When the request has to wait first (for stdin's handshake, or the
 * settling kernel_info round trip after a failure), it is sent from the
 * loop; should that send fail, DONE gets X with KBOX_EXEC_DIED and the
 * send's error as its reason.  The result is borrowed by the caller until
 * DONE runs (to interrupt it, say), when it passes to DONE; destroying it
 * before forgets the execution (DONE is then never called). */
kbox_exec_t *kbox_client_execute_begin(kbox_client_t *self, const kbox_exec_opts_t *opts,
                                       kbox_exec_done_cb *done, void *arg, kbox_error_t *err);

/* Interrupt the execution X now, as its timeout would (through the
 * client's interrupt hook or an interrupt_request), and give it GRACE_MS
 * (negative: 5000; 0: none) to end before it ends as KBOX_EXEC_TIMEOUT
 * with the reason WHY ("interrupted: its client went away").  When its
 * reply comes within the grace period, it ends with the reply's status
 * (KBOX_EXEC_ERROR with KeyboardInterrupt, typically) and the reason WHY;
 * kbox_exec_interrupted is then true.  An execution whose request is not
 * sent yet ends as KBOX_EXEC_TIMEOUT with WHY, without an interrupt; one
 * whose reply came already is left to end.  DONE runs from the loop, never
 * from here.  WHY is copied.  0, or -1 with ERR when the interrupt could not be made (the
 * execution then goes on as before). */
int kbox_exec_interrupt(kbox_exec_t *x, int grace_ms, const char *why, kbox_error_t *err);

/* Interrupt the execution X as a person at a front end would, with no
 * deadline: through the client's interrupt hook or an interrupt_request,
 * once the kernel is in the code (its execute_input came, or 5000 ms
 * passed without it: before it, ipykernel can take a SIGINT in its event
 * loop and exit).  X goes on to its reply, which says what the interrupt
 * did (KBOX_EXEC_ERROR with KeyboardInterrupt, typically; a kernel that
 * ignores it goes on running), and kbox_exec_interrupted is then true.
 * An interrupt that came between the code and its reply, which ipykernel
 * answers with idle and no reply, ends X a moment after that idle as
 * KBOX_EXEC_INTERRUPTED with the reason WHY (copied); one that an IPython
 * callback before the code takes (an "error" KeyboardInterrupt on iopub,
 * then the code goes on) is made once more when no reply follows within
 * 2000 ms.  An execution whose request is not sent yet ends as
 * kbox_exec_interrupt with no grace period would end it; one whose reply
 * came is left as it is; one interrupted already is interrupted again (a
 * second press of the button).  0, or -1 with ERR when
 * the interrupt could not be made (the execution then goes on as
 * before). */
int kbox_exec_ask_interrupt(kbox_exec_t *x, const char *why, kbox_error_t *err);

/* Free SELF (see kbox_client_execute_begin for one in progress); sets
 * *SELF_P to NULL.  Accepts NULL. */
void kbox_exec_destroy(kbox_exec_t **self_p);
kbox_exec_status_t kbox_exec_status(const kbox_exec_t *self);
/* execution_count from the reply, or -1 (aborted replies carry none). */
int kbox_exec_count(const kbox_exec_t *self);
/* The execute_reply, or NULL when none came.  Borrowed: valid while SELF
 * lives. */
const kbox_msg_t *kbox_exec_reply(const kbox_exec_t *self);
/* Whether the code asked its front end to end the kernel: exit() or
 * quit() in IPython, an "ask_exit" payload in the reply whose keepkernel
 * is not true.  ipykernel then stops its own event loop 0.1 s after the
 * reply and exits with status 0.  False without a reply. */
bool kbox_exec_asked_exit(const kbox_exec_t *self);
/* True when the library interrupted the kernel for this execution. */
bool kbox_exec_interrupted(const kbox_exec_t *self);
/* Wall-clock seconds from send to completion. */
double kbox_exec_seconds(const kbox_exec_t *self);
/* The collected iopub messages (with opts.collect), in arrival order; the
 * Ith, or NULL past the end.  Borrowed: valid while SELF lives. */
size_t kbox_exec_output_count(const kbox_exec_t *self);
const kbox_msg_t *kbox_exec_output(const kbox_exec_t *self, size_t i);
/* The calls of host functions that ended during the execution, in the
 * order they ended (at most KBOX_CALLS_RECORDED_MAX): an array of
 * {"name", "status" ("ok", "error", "invalid", "timeout", "budget",
 * "cancelled"), "seconds", "args_bytes", "result_bytes", and "error", the
 * text the kernel got, when not ok}; NULL when none was made.  Borrowed:
 * valid while SELF lives. */
const json_t *kbox_exec_calls(const kbox_exec_t *self);
/* Number of input_requests answered, EOF answers included (the requests
 * of host-function calls are not counted). */
size_t kbox_exec_inputs_answered(const kbox_exec_t *self);
/* This execution's output messages dropped over the rate limit, and their
 * bytes (other executions' output dropped meanwhile is not counted). */
size_t kbox_exec_rate_dropped(const kbox_exec_t *self, size_t *bytes);
/* Of those, the stream messages of stdout ([0]) and stderr ([1]) and the
 * bytes of text in them (read from the unverified content without
 * decoding it). */
typedef struct {
	size_t stream_messages[2];
	size_t stream_bytes[2];
	/* Messages the kernel sent during the execution that never reached the
	 * client (of any type: its iopub socket drops silently when the queue
	 * to a reader that fell behind is full), by the numbers in
	 * jupyter_client's message ids ("SESSION_PID_N"); 0 for a kernel
	 * whose ids are not numbered. */
	size_t never_arrived;
	/* Messages of the execution (their parent is its request) that came
	 * but could not be decoded (not valid JSON, a lone surrogate, a bad
	 * signature): left out, and not counted in NEVER_ARRIVED. */
	size_t undecodable;
} kbox_exec_drops_t;
void kbox_exec_dropped(const kbox_exec_t *self, kbox_exec_drops_t *out);
/* True when the reply came but iopub's idle never did (output was lost,
 * e.g. a message over KBOX_MAX_MESSAGE_BYTES). */
bool kbox_exec_output_lost(const kbox_exec_t *self);
/* True when the kernel said idle for this execution: it is not running
 * the code, reply or not (an interrupt can make ipykernel drop the reply
 * of a request it was finishing or starting). */
bool kbox_exec_went_idle(const kbox_exec_t *self);
/* Why the execution did not finish normally ("timed out after 2 s"), or "".
 * Borrowed: a buffer in SELF, valid while SELF lives. */
const char *kbox_exec_reason(const kbox_exec_t *self);

#ifdef __cplusplus
}
#endif
#endif
