/* src/runtime/ctl.h — the client side of the control socket
 * (kbox-protocol(7), protocol.h): connect, send, receive, one request and
 * its reply, and an execution with its started line and events.  Every
 * front end (kbox exec, run, agent, mcp, the control commands) talks to a
 * supervisor through these; the supervisor uses listen and send. */
#ifndef KR_RUNTIME_CTL_H
#define KR_RUNTIME_CTL_H

#include <stdbool.h>
#include <signal.h>
#include <jansson.h>
#include <kbox/error.h>
#include "runtime/protocol.h"

/* Connect to DIR/control.sock (DIR of any length: see kx_unix_path), and
 * check who listens there (kr_ctl_peer): a supervisor of this user in
 * this user namespace, never code in a sandbox that reached the state
 * directory and put a socket of its own there, which would read the
 * code sent and take the outputs directory passed open.  The socket, or
 * -1 with ERR (KBOX_E_NOTFOUND when no supervisor listens;
 * KBOX_E_INVALID when another process does). */
int kr_ctl_connect(const char *dir, kbox_error_t *err);

/* Who is at the other end of the unix socket FD. */
typedef enum {
	KR_CTL_PEER_FOREIGN, /* another uid, or another user namespace (a sandbox's) */
	KR_CTL_PEER_OURS,    /* our effective uid, in our own user namespace */
	KR_CTL_PEER_GONE,    /* of our uid, and exited since (nothing to serve) */
} kr_ctl_peer_t;

/* May the peer of FD (the process that connected, for the supervisor; the
 * one that listened, for a client) be talked to: a process of our
 * effective uid (SO_PEERCRED) in our own user namespace, not code in a
 * sandbox, which under an ordinary user runs as the same uid in a
 * namespace of its own (kbox-protocol(7), threat 44)?  The peer is found
 * by SO_PEERPIDFD where the kernel has it, else by a pidfd of the pid
 * SO_PEERCRED gives (a process that exits at once may leave its pid to
 * another before the look). */
kr_ctl_peer_t kr_ctl_peer(int fd);

/* For the supervisor: listen on DIR/control.sock (mode 0600, non-blocking;
 * a file left there is removed first: the caller holds the supervisor
 * lock).  The socket, or -1 with ERR. */
int kr_ctl_listen(const char *dir, kbox_error_t *err);

/* Send MSG (borrowed) as one line.  0 or -1 with ERR (KBOX_E_DEAD: the
 * supervisor closed the connection, or ended before it took it). */
int kr_ctl_send(int fd, const json_t *msg, kbox_error_t *err);
/* The same, passing descriptor PASS_FD (SCM_RIGHTS) with the line's first
 * byte; -1: none. */
int kr_ctl_send_fd(int fd, const json_t *msg, int pass_fd, kbox_error_t *err);

/* After a send on FD failed: the line the supervisor wrote before it
 * closed the connection, such as the "busy" error of too many
 * connections (new; the error to report instead of the send's), or NULL
 * when none came. */
json_t *kr_ctl_refusal(int fd);

/* Read one line, of at most KR_CTL_LINE_MAX bytes, within TIMEOUT_MS
 * (-1: forever) and parse it: an object (new).  NULL with ERR:
 * KBOX_E_TIMEOUT, KBOX_E_DEAD at end of file, KBOX_E_PROTOCOL for a line
 * that is not a JSON object. */
json_t *kr_ctl_recv(int fd, int timeout_ms, kbox_error_t *err);

/* kr_ctl_recv, for a supervisor that may stop answering: while nothing
 * comes on FD for KR_CTL_PROBE_AFTER_MS, ask DIR's supervisor for its
 * status on a connection of its own; one that does not answer that
 * within KR_CTL_PROBE_MS ends the wait, NULL with ERR KBOX_E_DEAD (its
 * pid, and what to do).  DIR NULL: kr_ctl_recv. */
json_t *kr_ctl_recv_live(int fd, const char *dir, int timeout_ms, kbox_error_t *err);

/* While a front end waits on kr_ctl_recv with signals blocked (SIGINT,
 * say, to interrupt the code rather than die), the wait lets them in
 * (ppoll with MASK, the mask to wait with), and HOOK(ARG) runs before
 * each wait: after a signal came, it acts on what the handler noted.
 * When it returns true, the wait ends: NULL with ERR KBOX_E_SYSTEM
 * (KR_CTL_WAIT_ENDED).  MASK NULL: plain waits again.  Process-wide, not
 * thread-safe. */
void kr_ctl_wait_signals(const sigset_t *mask, bool (*hook)(void *arg), void *arg);
#define KR_CTL_WAIT_ENDED "the wait was ended by a signal"

/* Connect, send {"op": OP, …ARGS (taken, may be NULL)}, read the reply,
 * close.  The reply (new), or NULL with ERR; a reply {"ok": false,
 * "error": MSG} becomes NULL with MSG (KBOX_E_INVALID), and so does the
 * refusal of a supervisor that closed the connection (kr_ctl_refusal).
 * The wait is kr_ctl_recv_live's: a supervisor that stops answering ends
 * it early, KBOX_E_DEAD. */
json_t *kr_ctl_call(const char *dir, kr_ctl_op_t op, json_t *args, int timeout_ms,
                    kbox_error_t *err);

/* How long kr_ctl_stop waits, after the answer, for the supervisor's
 * process to end. */
#define KR_CTL_STOP_EXIT_MS 10000

/* kr_ctl_call of KR_CTL_OP_STOP to the supervisor of the session DIR,
 * with ARGS (taken; NULL for none), that returns once its process has
 * ended too (a pidfd of it, taken before it is asked, polled for at most
 * KR_CTL_STOP_EXIT_MS after its answer), as docker stop returns once the
 * container has exited: a process still there after "stopped" would
 * surprise a script.  The reply, or NULL with ERR. */
json_t *kr_ctl_stop(const char *dir, json_t *args, int timeout_ms, kbox_error_t *err);

/* ---- an execution ---- */

/* Called with the started line (KIND KR_CTL_MSG_STARTED) and each event
 * line (KR_CTL_MSG_EVENT) of an execution, MSG borrowed for the call. */
typedef void (*kr_ctl_event_cb_t)(void *arg, kr_ctl_msg_kind_t kind, const json_t *msg);

/* How an execution's exchange ended. */
typedef enum {
	KR_CTL_EXEC_REPLY,       /* the reply came (ok or not): *REPLY_P */
	KR_CTL_EXEC_NOT_SENT,    /* the request could not be sent (ERR; KBOX_E_DEAD:
	                            * no supervisor took it, and the next may run it) */
	KR_CTL_EXEC_LOST_BEFORE, /* no reply and no started line (ERR): the code never
	                            * began; a supervisor that was stopping took it, and
	                            * the next one may run it */
	KR_CTL_EXEC_LOST_AFTER,  /* no reply after the started line (ERR): the code
	                            * began, and its kernel went with the supervisor */
	KR_CTL_EXEC_UNANSWERED,  /* the supervisor stopped answering (ERR,
	                            * kr_ctl_recv_live): stopped or stuck */
} kr_ctl_exec_end_t;

/* Send the execute request REQ on FD (connected), with the descriptor
 * OUTPUTS_FD (-1: none; kbox-protocol(7), outputs) and read its lines
 * until the reply, without a time limit of its own (the supervisor
 * enforces the code's) but that of a supervisor that stops answering
 * (kr_ctl_recv_live, DIR the session's): the started line and events go to ON_EVENT (may
 * be NULL) with ARG; a reply to another op on the same connection (an
 * interrupt's) is skipped.  *REPLY_P gets the reply (new) with
 * KR_CTL_EXEC_REPLY, else NULL; ERR says why for the others
 * (KBOX_E_DEAD when the supervisor went away).  A supervisor's refusal
 * that made the send fail (kr_ctl_refusal) is a reply too. */
kr_ctl_exec_end_t kr_ctl_execute(int fd, const char *dir, const kr_ctl_exec_t *req, int outputs_fd,
                                 kr_ctl_event_cb_t on_event, void *arg, json_t **reply_p,
                                 kbox_error_t *err);

#endif
