/* src/runtime/supervisor_int.h — the supervisor's own state and the calls
 * between its files (private to kbox-supervisor).
 *
 * One event loop (kbox/loop.h) carries everything; each handler reacts
 * to one event.  The files, by concern (as redis splits server.c and
 * networking.c):
 *
 *   supervisor.c         setup and teardown, signals, the idle TTL, the
 *                        session's files
 *   supervisor_ctl.c     the control socket: connections, their lines,
 *                        the op table, status, interrupt, restart, stop
 *   supervisor_jobs.c    executions, completions and inspections: the
 *                        queue, one job at a time, results and replies,
 *                        output between executions
 *   supervisor_kernel.c  the kernel's life: start, readiness, end,
 *                        replacement, and the supervisor's memory bound
 *
 * The protocol itself (ops, limits, requests, lines) is
 * runtime/protocol.h. */
#ifndef KR_RUNTIME_SUPERVISOR_INT_H
#define KR_RUNTIME_SUPERVISOR_INT_H

#include "runtime/runtime.h"
#include "runtime/backend.h"
#include "runtime/bwrap.h"
#include "runtime/cgroup.h"
#include "runtime/functions.h"
#include "runtime/ctl.h"
#include "runtime/kernel_log.h"
#include "runtime/protocol.h"
#include "runtime/session.h"
#include "runtime/supervisor.h"

#include <limits.h>
#include <stdbool.h>

#define READY_TIMEOUT_MS 60000
#define CRASH_WINDOW_MS 60000
#define CRASH_MAX 5
#define STOP_STEP_MS 2500
#define SHUTDOWN_WAIT_MS 2000
#define FLUSH_MS 20
/* The supervisor's own memory, whatever a kernel sends: resident over
 * MEMORY_HIGH (checked every MEMORY_CHECK_MS; what waits for slow clients
 * on the control socket, at most KR_CTL_OUT_TOTAL_MAX, is not counted),
 * the kernel is stopped and replaced; its cgroup's limit MEMORY_MAX is the backstop, over which the
 * supervisor alone is killed (the host is untouched).  A message may be
 * 64 MiB (KBOX_MAX_MESSAGE_BYTES), and decoding one takes about three
 * times that.  Before that, over MEMORY_SHED, a reader that fell behind a
 * flood of output (decoding is slower than a kernel prints) drops output
 * unread, counted as over the rate limit, until its queue is empty. */
#ifdef KBOX_SANITIZED
#define MEMORY_SCALE 8 /* a sanitizer's shadow and quarantine; no cgroup either */
#else
#define MEMORY_SCALE 1
#endif
#define MEMORY_SHED (MEMORY_SCALE * 192LL << 20) /* over it, output is dropped unread until half */
#define MEMORY_HIGH (MEMORY_SCALE * 384LL << 20)
#define MEMORY_MAX (512LL << 20)
#define MEMORY_CHECK_MS 50
/* The names (and short types) of what the code defined, kept for the
 * notice of a kernel's death: at most this many bytes of them. */
#define VARS_MAX 320
/* The events that the kernel or a sandbox can repeat without end (a
 * flood that sheds and stops shedding, refused peers) are logged at most
 * once a FOLD_MS each; see sup_log.  (A client cut off is one of the
 * user's own, and each is logged.) */
#define FOLD_MS 60000
#define FOLD_EVENTS 3
/* The heap is trimmed after an execution only when this much of it is
 * free: below it, malloc_trim's madvise calls (six on a quiet heap) cost
 * more than the memory they give back. */
#define TRIM_FREE_MIN (1 << 20)

typedef struct sup sup_t;
typedef struct sup_ending sup_ending_t;
typedef struct conn conn_t;
typedef struct job job_t;
typedef struct fn_job fn_job_t;
typedef struct sup_mcp sup_mcp_t;

/* One request that needs the kernel to itself, queued until its turn. */
struct job {
	sup_t *s;
	kr_ctl_op_t op;       /* KR_CTL_OP_EXECUTE, _COMPLETE or _INSPECT */
	conn_t *conn;         /* NULL once its client went away */
	json_t *req;          /* the request (owned): E's strings are in it */
	kr_ctl_exec_t e;      /* the request, parsed (its members of execute) */
	long long cursor_pos; /* complete, inspect: < 0 the end */
	int detail_level;     /* inspect */
	job_t *next;
	int wait_timer; /* the request's limit on waiting for its turn, or 0 */
	/* an execution */
	kbox_capture_t *cap;
	kbox_exec_t *x;
	unsigned long generation;
	bool vars_asked;    /* it carries the user_expression vars_define */
	char notice[1024];  /* the kernel was restarted since the last execution */
	int outputs_fd;     /* the request's "outputs" directory, opened, or -1 */
	char *earlier_text; /* output printed between executions, rendered */
	json_t *earlier_json;
	bool abandoned;           /* its client went away while it ran */
	bool grace_none;          /* asked for a grace of 0 (taken as 1 ms): said as 0 */
	bool interrupt_asked;     /* a client asked for an interrupt while it ran */
	unsigned long sb_notices; /* the sandbox's notice_seq when it began */
	char interrupt_by[KR_CTL_CAUSE_MAX + 1]; /* who: its "cause", or "kbox interrupt" */
	bool input_refused;                      /* the code asked for input and none was given */
	long oom_before; /* the sandbox's OOM kills when it began, -1 unknown */
	/* its own variables ("env"): set by a silent execution before it,
	 * restored by another after it */
	int env_phase; /* 0 none; 1 setting them; 2 set, the code runs; 3 restoring */
};

struct conn {
	sup_t *s;
	unsigned long id; /* unique in this supervisor's life */
	int fd;
	char *in; /* what has come, up to a newline */
	size_t in_len, in_cap;
	char *out; /* what could not be sent yet */
	size_t out_len;
	size_t out_cap; /* out's size: it grows by doubling, so that a slow
	                   reader costs no copy of the backlog per reply */
	size_t events_dropped;
	int passed_fd;       /* the descriptor that came with its last request, or -1 */
	job_t *job;          /* its job, queued or running, or NULL */
	kr_ctl_op_t pending; /* restart: answered once the new kernel is ready; else NONE */
	unsigned asking;     /* its interrupts waiting for the kernel's reply */
	long long active_ms; /* when something last came from it or went to it */
	long long out_since; /* while out waits: when it last read some of it */
	bool cut;            /* cut off (it did not read): closed when its handler runs */
};

struct sup {
	const char *dir;
	/* DIR, opened at the start through no symbolic link (its lock and
	 * socket are in it), and its identity, as op_session knows it */
	int dir_fd;
	/* DIR for the files made in it: "/proc/self/fd/DIR_FD" (AT_BUF) once
	 * DIR_FD is open, DIR before */
	const char *at;
	char at_buf[32];
	dev_t dir_dev;
	ino_t dir_ino;
	json_t *config;
	const char *kernel, *backend;
	long long ttl_ms;
	kr_sandbox_opts_t sbo;
	unsigned long long outputs_quota; /* the most outputs/ may hold */
	double output_rate; /* output messages a second past what can be kept: 0, the default */
	kr_sandbox_id_t id; /* who the sandbox runs as (under root: not us) */
	int uid_hold;       /* under root: holds id.uid's record while we live (kr_session_uid) */
	int live_ws;        /* the workspace: holds its record while we live (ws_live.h) */
	char live_ws_file[PATH_MAX];
	int live_home; /* the sandbox's home: the same */
	char live_home_file[PATH_MAX];
	char **env;
	char runtime_dir[PATH_MAX], workspace[PATH_MAX];
	char log_path[PATH_MAX], home[PATH_MAX], outputs[PATH_MAX];
	/* the kernel's sockets: for a backend that shows the kernel a host
	 * directory (none), SOCKETS_DIR, made fresh outside every state
	 * directory and held by SOCKETS_LOCK (kr_live_sockets_make), else
	 * ""; as the supervisor names them, SOCKETS_VIEW: /proc/self/fd/N of
	 * the sandbox's kr_sandbox_sockets_fd */
	char sockets_dir[PATH_MAX], sockets_view[64];
	int sockets_lock;
	/* an unsandboxed kernel's R start-up files, "R_PROFILE_USER=HOME/..." */
	char none_rprofile[PATH_MAX + 32], none_renviron[PATH_MAX + 32];
	kbox_kspec_t *spec;
	char *gateway_token;   /* backend gateway: the server's token (NULL: none) */
	char gateway_dir[300]; /* backend gateway: the kernel's directory there */
	kbox_loop_t *loop;
	/* the kernel */
	kr_sandbox_t *sb;
	kr_kernel_log_t *klog; /* its output, copied to kernel.log */
	kbox_client_t *client;
	bool ready;    /* answered: jobs may run */
	bool starting; /* started, not yet answering */
	long long start_t0;
	int ready_fd; /* kbox start's, until the first kernel is ready */
	/* jobs */
	job_t *queue, *running;
	/* output between executions */
	kbox_capture_t *between;
	size_t between_msgs;
	/* control */
	int listen_fd, sig_fd, pid_fd;
	bool pid_locked; /* its lock is ours: a failed start removes supervisor.pid */
	long prev_pid;
	conn_t *conns[KR_CTL_CONNS_MAX];
	size_t n_conns;
	int flush_timer, ttl_timer;
	unsigned long conn_serial;
	bool new_notice; /* KR_SUP_NEW_NOTICE */
	/* what the code had defined, as the kernel said after its last
	 * execution that ended well (a Python kernel's user_expressions):
	 * named in the notice of its death */
	char vars[VARS_MAX + 1];
	/* the kernel in which the function that says it was defined (the
	 * generation; 0: none yet) */
	unsigned long vars_fn_generation;
	/* of each event of sup_log's fold table: when a line of it was last
	 * written, how many came since that are not written yet, and the
	 * latest of those (its members; NULL when none waits) */
	struct {
		long long last_ms;
		unsigned long long held;
		json_t *latest;
	} folds[FOLD_EVENTS];
	bool replacing;   /* kernel_replace is failing what ran on the old kernel */
	size_t out_total; /* unsent output of all connections: the control
	                     backlog, kept out of the kernel's memory checks */
	size_t in_total;  /* the input buffers of all connections over
	                     KR_CTL_IN_SMALL (their partial request lines):
	                     at most KR_CTL_IN_TOTAL_MAX */
	/* bookkeeping */
	long long started_ms, kernel_started_ms, last_activity_ms;
	double started_wall, last_activity_wall;
	unsigned long executions, generation;
	unsigned restarts;
	char notice[1024];
	char last_cause[512];
	/* an ephemeral session's (kbox run's) sandbox name: its name and this
	 * supervisor's pid, so that two runs' containers never share a name */
	char sandbox_name[96];
	/* where it keeps, for the next supervisor, why it stopped and the
	 * cgroups it made: where no sandbox reaches (kr_live_session_path) */
	char kept[PATH_MAX];
	char kill_cause[600]; /* we killed the kernel, and why */
	bool start_failed;    /* the first kernel never answered */
	bool ephemeral;       /* kbox run's: the directory goes when it stops */
	long owner_pid;       /* kbox run's: it stops when this process ends */
	int owner_fd;
	long long crashes[CRASH_MAX];
	bool stopping;
	char stop_cause[512];
	conn_t *stop_conn;
	kr_cgroup_t *cg;   /* the supervisor's own (memory), or NULL */
	bool shedding;     /* over MEMORY_SHED: output is dropped unread */
	bool was_shedding; /* …and the heap is to be trimmed after */
	/* inotify: what changed in outputs/ (its bytes are counted again
	 * only then) and the kernel's sockets appearing */
	int ino_fd;                 /* or -1: outputs/ is counted each time */
	int outputs_wd, sockets_wd; /* or -1 */
	bool outputs_changed;
	unsigned long long outputs_used; /* what outputs/ held when last counted */
	kbox_conn_t *bind_conn; /* waiting for the kernel to bind its sockets: its connection */
	int bind_timer;
	/* gateway: the helpers of replaced remote kernels, deleting them
	 * while the next one starts (supervisor_kernel.c) */
	sup_ending_t *endings;
	/* host functions (kbox-functions(5)): the file as session.json keeps
	 * it, libkbox's set of them (NULL: none), the kernel they were last
	 * defined in (a generation; 0: none yet), their calls running */
	kr_functions_t fn_file;
	kbox_functions_t *fns;
	unsigned long fns_generation;
	fn_job_t *fn_jobs;
	sup_mcp_t *fn_mcp; /* one for each of fn_file's MCP servers */
	/* kbox kernel (supervisor_relay.c): the front end's connection
	 * (NULL: not a front end's kernel), the kernel's, the relay once the
	 * kernel answered, and whether the front end asked it to shut down */
	kbox_conn_t *front, *kernel_conn;
	kbox_relay_t *relay; /* bound at the start; relaying once RELAY_ON */
	bool relay_on, relay_shutdown, relay_restart;
};

/* ---- supervisor_relay.c ---- */

/* The front end's connection from session.json's "relay" TEXT (NULL:
 * none).  0, or -1 with ERR. */
int sup_relay_load(sup_t *s, const char *text, kbox_error_t *err);
/* The kernel answers: relay the front end's sockets to it, in place of
 * the supervisor's client (nothing for a session that is no front end's).
 * 0, or -1 with ERR. */
int sup_relay_begin(sup_t *s, kbox_error_t *err);
/* Pass on what the kernel left and close the relay. */
void sup_relay_end(sup_t *s);
/* sup_relay_end, and forget the connections. */
void sup_relay_free(sup_t *s);
/* Interrupt the kernel of a front end: a signal, or an interrupt_request
 * of the relay's own.  0, or -1 with ERR. */
int sup_relay_interrupt(sup_t *s, kbox_error_t *err);
/* The relay's counts for status (new), NULL for a session that is no
 * front end's. */
json_t *sup_relay_status(sup_t *s);

/* ---- supervisor_functions.c ---- */

/* The session's host functions from DOC (session.json's "functions"; NULL:
 * none), for a kernel whose workspace is WS (NULL: the session's own).
 * 0, or -1 with ERR. */
int sup_functions_load(sup_t *s, const char *text, const char *ws, kbox_error_t *err);
/* Stop their calls and forget them. */
void sup_functions_free(sup_t *s);

/* ---- supervisor.c ---- */

/* Give what the heap holds free back to the system, when that is at
 * least TRIM_FREE_MIN. */
void sup_trim(void);
/* Append EVENT with FIELDS (taken, may be NULL) to the session's log.
 * An event that can repeat without end (client-refused, shedding,
 * shedding-end) is written at most once a FOLD_MS: one that
 * comes sooner after the last line of its name is held, and the next
 * line of that name, written when one comes after FOLD_MS or by
 * sup_log_flush, is the latest held, with "folded", how many earlier ones
 * since the line before it stands for too (so each line of such an
 * event counts 1 + folded). */
void sup_log(sup_t *s, const char *event, json_t *fields);
/* Write the held events of sup_log whose FOLD_MS has passed, or, with
 * ALL, every held event (before the session's stop). */
void sup_log_flush(sup_t *s, bool all);
/* Now is the session's last activity (its idle TTL counts from it). */
void sup_touch(sup_t *s);
/* Cut S (NUL-terminated, possibly cut short by snprintf) back to a whole
 * UTF-8 character, so that it stays valid JSON text. */
void sup_utf8_cut(char *s);
/* Write TEXT as the file NAME of DIR (beside, then renamed over it);
 * errors are ignored. */
void sup_write_file(const char *dir, const char *name, const char *text);
/* Read the small file DIR/NAME into BUF; "" when absent. */
void sup_read_file(const char *dir, const char *name, char *buf, size_t size);
/* Stop the session, for the cause already in S->stop_cause: the loop
 * ends. */
void sup_stop(sup_t *s);

/* ---- supervisor_ctl.c ---- */

/* Accept the connections waiting on the control socket (a loop handler;
 * ARG is the sup_t). */
int sup_on_accept(kbox_loop_t *loop, void *arg);
/* Queue J (taken) as one line for C and send what can be sent, within
 * kbox-protocol(7)'s bounds (Slow clients): an event (EVENT true) that
 * would bring C's unsent lines over KR_CTL_CONN_OUT_MAX, or all of them
 * over KR_CTL_OUT_TOTAL_MAX, is dropped and counted; a reply is queued,
 * except to a connection whose unsent lines it would bring over
 * KR_CTL_CONN_OUT_MAX, which is cut off instead; to keep all within
 * KR_CTL_OUT_TOTAL_MAX, the connections that read nothing for the
 * longest time are cut off first. */
void sup_conn_send(conn_t *c, json_t *j, bool event);
/* Send what is queued for C without blocking.  false when C is gone. */
bool sup_conn_flush(conn_t *c);
/* {"ok":false,"re":RE,"kind":KIND,"error":…} to C; RE may be NULL (the
 * request had no op). */
void sup_reply_error(conn_t *c, const char *re, kr_ctl_err_t kind, const char *fmt, ...)
        KX_PRINTF(4, 5);
/* Close the connections that wait for no answer, have no lines waiting
 * to be sent, and on which nothing came or went for KR_CTL_IDLE_MS (run
 * each second). */
void sup_conns_idle(sup_t *s);
/* Close C and forget it; its job is left to run unseen or dropped. */
void sup_conn_close(sup_t *s, conn_t *c);
/* Answer the restart requests waiting for the new kernel: with its
 * generation, or with the error ERROR (NULL: none) of KIND. */
void sup_answer_pending(sup_t *s, kr_ctl_err_t kind, const char *error);

/* ---- supervisor_jobs.c ---- */

/* Queue a job of OP (execute, complete or inspect) for C's request REQ
 * (borrowed), read into *E (whose inputs it takes) and, for complete and
 * inspect, CURSOR_POS and DETAIL_LEVEL; its outputs directory is opened
 * now.  0, or -1 after an error reply. */
int sup_job_new(sup_t *s, conn_t *c, kr_ctl_op_t op, json_t *req, kr_ctl_exec_t *e,
                long long cursor_pos, int detail_level);
/* The client of J went away: a running execution is interrupted (it must
 * not run on unseen), a job that waits leaves the queue. */
void sup_job_orphan(sup_t *s, job_t *j);
/* The session stops: every job that waits is told so and dropped. */
void sup_jobs_stop(sup_t *s);
/* iopub output that belongs to no execution running (a client callback;
 * ARG is the sup_t). */
void sup_on_between(void *arg, const kbox_msg_t *msg);
/* Run the next job on a later turn of the loop, if the kernel is free. */
void sup_dispatch_soon(sup_t *s);

/* ---- supervisor_kernel.c ---- */

/* Start a kernel (generation + 1) and begin waiting for it to answer.
 * 0, or -1 with ERR (nothing left running). */
int sup_kernel_start(sup_t *s, kbox_error_t *err);
/* How long a kernel may take to answer: READY_TIMEOUT_MS, and a remote
 * one its launch time too (supervisor_kernel.c). */
long long sup_ready_timeout(const sup_t *s);
/* End the current kernel (gracefully when GRACEFUL and it answers) and
 * forget it. */
void sup_kernel_end(sup_t *s, bool graceful);
/* The helpers of replaced remote kernels: those that ended are done
 * with (the record follows what they said), those past their time
 * killed; at the stop, each waited for what is left of its time. */
void sup_endings_check(sup_t *s);
void sup_endings_finish(sup_t *s);
/* The kernel is gone, or is being replaced, for CAUSE: end what ran on it,
 * remember why for the next execution, and start a new one unless it
 * keeps dying.  0, or -1 when the session has to stop (stop_cause set). */
int sup_kernel_replace(sup_t *s, const char *cause, bool requested);
/* Has the kernel ended?  Then replace it (or stop the session).  A loop
 * handler; ARG is the sup_t. */
int sup_on_kernel_check(kbox_loop_t *loop, void *arg);
/* The same, on a later turn of the loop. */
void sup_kernel_check_soon(sup_t *s);
/* Would one more death the session did not ask for be one too many (see
 * sup_kernel_replace)? */
bool sup_crash_limit_next(const sup_t *s);
/* Send J (taken) on kbox start's ready socket, if it is still open, and
 * close it. */
void sup_report_ready(sup_t *s, json_t *j);
/* The bytes of the regular files in DIR (not below it), 0 when it cannot
 * be read. */
unsigned long long sup_dir_bytes(const char *dir);
/* What outputs/ holds (sup_dir_bytes), counted again only when inotify
 * saw a change there since the last count (or cannot watch it). */
unsigned long long sup_outputs_used(sup_t *s);
/* Read the inotify events that wait: note a change in outputs/. */
void sup_inotify_read(sup_t *s);
/* The supervisor's memory bound: a cgroup of its own and the check of
 * MEMORY_HIGH. */
void sup_memory_bound(sup_t *s);

#endif
