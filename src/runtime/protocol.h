/* src/runtime/protocol.h — kbox-protocol(7) in C: the control protocol of a
 * session's supervisor, included by both sides (the supervisor,
 * src/runtime/supervisor*.c, and every client: src/runtime/ctl.c and the
 * front ends through it), as src/http/http_proto.h is for kbox-http.
 *
 * The program, installed in $(pkglibexecdir), and its command line (kbox
 * start runs it, detached, in a session of its own):
 *
 *     kbox-supervisor SESSION_DIR READY_FD
 *     kbox-supervisor --version      (kbox doctor: does it run here?)
 *
 * READY_FD is a socket on which it reports once, {"ok":true,"pid":…,
 * "kernel_pid":…} or {"ok":false,"error":…}; stdout and stderr are the
 * session's supervisor.log.
 *
 * The protocol: SESSION_DIR/control.sock, a unix stream socket; JSON text
 * in UTF-8, one object a line in each direction.  A request is
 * {"op": OP, …}; the supervisor answers each with one reply,
 * {"ok":true,"re":OP,…} or {"ok":false,"re":OP,"kind":KIND,"error":MSG};
 * before an execution's reply come one "started" line and event lines
 * ({"re":"execute","started":true,…}, {"re":"execute","event":{…}}).
 * kr_ctl_msg_kind tells them apart.  The members of each request and
 * reply, and what each limit below means, are in kbox-protocol(7). */
#ifndef KR_RUNTIME_PROTOCOL_H
#define KR_RUNTIME_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <kbox/error.h>
#include <kbox/client.h> /* kbox_exec_status_t (the type only: no call into libkbox) */

/* The revision of the protocol kbox-protocol(7) describes. */
#define KR_CTL_PROTOCOL_VERSION 1

#define KR_SUPERVISOR_PROGRAM "kbox-supervisor"

/* ---- limits ---- */

/* The longest request line the supervisor reads, its newline included. */
#define KR_CTL_REQUEST_MAX (16 << 20)
/* The code of an execution travels in its request line, as a JSON string
 * (a control character takes 6 bytes there): never more than this.  It is
 * the one limit of code every front end states and checks before it
 * starts a session (kr_ctl_exec_fits); what they read as code stops one
 * byte past it. */
#define KR_CTL_CODE_MAX KR_CTL_REQUEST_MAX
/* What the partial request lines of all connections together may hold
 * (the sizes of their buffers over KR_CTL_IN_SMALL; a buffer up to it is
 * not counted, so that a short request always gets in): one connection
 * may send a line of up to KR_CTL_REQUEST_MAX slowly, four at once may;
 * past it the connection whose partial line is the largest (the oldest of
 * those) gets the "busy" error and is closed, and that is logged. */
#define KR_CTL_IN_TOTAL_MAX (64 << 20)
#define KR_CTL_IN_SMALL (64 << 10)
/* The longest line of the supervisor a client reads (a result, within its
 * budgets, or an event). */
#define KR_CTL_LINE_MAX (64 << 20)
/* How the lines of the protocol are written: jansson's dump flags. */
#define KR_CTL_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))
/* The longest reply the supervisor writes, its newline included, well
 * under KR_CTL_LINE_MAX: an execution's result is cut to fit it, whatever
 * its budgets and whatever the kernel printed (a control character takes
 * 6 bytes in JSON, and a text may be in a reply three times), before it
 * is built: its texts lose their middles, with a marker and a notice as
 * the budgets cut them.  A reply to complete or inspect over it is an
 * error. */
#define KR_CTL_REPLY_MAX (48 << 20)
/* What the output printed between executions may take of a reply. */
#define KR_CTL_EARLIER_MAX (KR_CTL_REPLY_MAX / 8)
/* The deepest a line of the supervisor nests: a JSON value of the
 * kernel's in it (a MIME value, the content of a complete or inspect
 * reply) keeps KBOX_CAPTURE_MAX_DEPTH levels, deeper ones replaced by a
 * marker (kbox_json_depth_cut), so that every reader (jansson reads
 * JSON_PARSER_MAX_DEPTH, 2048) takes every line. */
#define KR_CTL_DEPTH_MAX 128
/* The connections a supervisor holds at a time; a new one beyond them
 * closes the idlest that waits for no answer. */
#define KR_CTL_CONNS_MAX 256
/* A connection that waits for no answer and has no lines waiting to be
 * sent, on which nothing came or went for this long, is closed. */
#define KR_CTL_IDLE_MS 60000
/* Unsent lines: more than this on one connection, or on all together, and
 * event lines are dropped (and counted); a reply over them cuts off the
 * connection that does not read (kbox-protocol(7), Slow clients).  An
 * event longer than KR_CTL_CONN_OUT_MAX as JSON is dropped (and counted)
 * before it is written. */
#define KR_CTL_CONN_OUT_MAX (8 << 20)
#define KR_CTL_OUT_TOTAL_MAX (64 << 20)
/* An error's message, in bytes (a buffer of one more). */
#define KR_CTL_ERROR_MAX 1023
/* The cause a client gives a restart or a stop, in bytes. */
#define KR_CTL_CAUSE_MAX 200
/* timeout, grace and wait: seconds from 0 to 366 days; over
 * KR_CTL_DURATION_CLAMP_MS (INT_MAX ms, about 24.8 days) counts as that. */
#define KR_CTL_DURATION_MAX_S (366.0 * 86400)
#define KR_CTL_DURATION_CLAMP_MS 2147483647LL
/* grace when the request gives none. */
#define KR_CTL_GRACE_DEFAULT_MS 5000
/* A client that waits for a line with nothing coming for
 * KR_CTL_PROBE_AFTER_MS asks the supervisor for its status on a connection
 * of its own, and gives up on one that does not answer that within
 * KR_CTL_PROBE_MS: it is stopped (SIGSTOP) or stuck.  A supervisor answers
 * status at once, whatever runs (kbox-protocol(7), status). */
#define KR_CTL_PROBE_AFTER_MS 10000
#define KR_CTL_PROBE_MS 20000
/* What complete, inspect and a message-mode interrupt wait for the kernel. */
#define KR_CTL_KERNEL_REPLY_MS 30000
/* max_output: bytes kept of each text, from 64 to 16 MiB (the capture's
 * KBOX_CAPTURE_MAX_BYTES_LIMIT); max_lines: at least 2. */
#define KR_CTL_MAX_OUTPUT_MIN 64
#define KR_CTL_MAX_OUTPUT_MAX (16 << 20)
#define KR_CTL_MAX_LINES_MIN 2
/* prefix: at most this many bytes, without '/'. */
#define KR_CTL_PREFIX_MAX 32

/* ---- ops ---- */

typedef enum {
	KR_CTL_OP_NONE = -1, /* no op, or one this protocol does not have */
	KR_CTL_OP_STATUS,
	KR_CTL_OP_EXECUTE,
	KR_CTL_OP_COMPLETE,
	KR_CTL_OP_INSPECT,
	KR_CTL_OP_INTERRUPT,
	KR_CTL_OP_RESTART,
	KR_CTL_OP_STOP,
	KR_CTL_OP_SESSION, /* {"dir": D}: "this connection is for the session in D" */
	KR_CTL_N_OPS
} kr_ctl_op_t;

/* The name of OP as it travels ("execute"); static, NULL for none. */
const char *kr_ctl_op_name(kr_ctl_op_t op);
/* The op named NAME (may be NULL), or KR_CTL_OP_NONE. */
kr_ctl_op_t kr_ctl_op_parse(const char *name);
/* {"op": OP} (new), the whole request of status, interrupt, restart and
 * stop; NULL when out of memory. */
json_t *kr_ctl_request_new(kr_ctl_op_t op);
/* Whether REQ (borrowed) fits in the line a supervisor takes:
 * KR_CTL_REQUEST_MAX bytes with its newline. */
bool kr_ctl_request_fits(const json_t *req);

/* The request in the line BUF of LEN bytes (its newline left out): a new
 * JSON object, or NULL with ERR (KBOX_E_INVALID, or KBOX_E_NOMEM) saying
 * why as the "usage" error says it: "not valid JSON: WHY", "not a JSON
 * object", or "duplicate member \"KEY\": a member may be given once" (at
 * any depth; KEY as the line spells it, cut to 64 bytes): which of two
 * members counts is never guessed. */
json_t *kr_ctl_request_load(const char *buf, size_t len, kbox_error_t *err);

/* ---- lines of the supervisor ---- */

typedef enum {
	KR_CTL_MSG_INVALID, /* not a line of this protocol */
	KR_CTL_MSG_STARTED, /* an execution began: {"re":"execute","started":true,…} */
	KR_CTL_MSG_EVENT,   /* one of its events: {"re":"execute","event":{…}} */
	KR_CTL_MSG_REPLY,   /* a request succeeded: {"ok":true,…} */
	KR_CTL_MSG_ERROR,   /* a request failed: {"ok":false,"kind",…,"error",…} */
} kr_ctl_msg_kind_t;

/* What kind of line MSG (borrowed; may be NULL) is, by its ok member, else
 * its started or event member; *RE_P (may be NULL) gets the op of its re
 * member, KR_CTL_OP_NONE when it has none (an error about a line that
 * had no op, the ready line) or an unknown one. */
kr_ctl_msg_kind_t kr_ctl_msg_kind(const json_t *msg, kr_ctl_op_t *re_p);

/* The kinds of error a reply has (its kind member). */
typedef enum {
	KR_CTL_ERR_USAGE,  /* the request is wrong */
	KR_CTL_ERR_BUSY,   /* it waited for its turn longer than it allowed; too many connections */
	KR_CTL_ERR_KERNEL, /* the kernel could not do it */
	KR_CTL_ERR_STATE,  /* not now (the kernel is starting) */
	KR_CTL_ERR_STOPPED,  /* the session stopped while it waited */
	KR_CTL_ERR_INTERNAL, /* the supervisor ran out of memory */
	KR_CTL_ERR_UNKNOWN,  /* none of these, or no kind at all */
} kr_ctl_err_t;

/* The name of KIND ("usage"); static, NULL for KR_CTL_ERR_UNKNOWN. */
const char *kr_ctl_err_name(kr_ctl_err_t kind);
/* The kind of the error line MSG (borrowed), KR_CTL_ERR_UNKNOWN when it
 * has none that this protocol knows. */
kr_ctl_err_t kr_ctl_err_kind(const json_t *msg);

/* The status word of an execution's reply ("ok", "error", "aborted",
 * "timeout", "died", "interrupted") for STATUS; static, never NULL
 * ("unknown" for a value out of range, as kbox_exec_status_name). */
const char *kr_ctl_status_name(kbox_exec_status_t status);
/* The status named WORD (may be NULL) into *OUT.  0, or -1 when it names
 * none. */
int kr_ctl_status_parse(const char *word, kbox_exec_status_t *out);

/* ---- execute ---- */

/* The format of an execution's events and result. */
typedef enum {
	KR_CTL_FMT_TEXT,      /* "text": no events; the result as text */
	KR_CTL_FMT_TEXT_LIVE, /* "text-live": stream events, then the rest as text */
	KR_CTL_FMT_JSON,      /* "json": no events; the result object */
	KR_CTL_FMT_NDJSON,    /* "ndjson": every event, then the end event */
	KR_CTL_FMT_JSON_LIVE, /* "json-live": stream events, then the result object */
} kr_ctl_format_t;

/* "text", "text-live", "json", "ndjson", "json-live"; static, NULL out of
 * range. */
const char *kr_ctl_format_name(kr_ctl_format_t format);

/* An execute request.  Initialised with KR_CTL_EXEC_INIT it has every
 * member at its default: set the code and what differs.  What parse fills
 * is borrowed from the request it read (keep that alive), but for the
 * arrays INPUTS, ENV_NAMES and ENV_VALUES, which kr_ctl_exec_clear frees. */
typedef struct {
	const char *code;       /* required */
	kr_ctl_format_t format; /* default: text */
	bool with_text;         /* json or ndjson: the reply has the text too */
	long long timeout_ms;   /* 0: no limit */
	long long grace_ms;     /* after the interrupt of a timeout or of a client that
	                              * went away; 0 counts as 1 ms; < 0: not sent
	                              * (KR_CTL_GRACE_DEFAULT_MS) */
	long long wait_ms;      /* for its turn; 0: no limit; < 0: not sent (its timeout) */
	const char **inputs;    /* N_INPUTS answers to requests for input */
	size_t n_inputs;
	bool has_inputs;      /* send them (an empty array too): EOF after the last */
	long long max_output; /* bytes of each text; 0: the default */
	long long max_lines;  /* lines of each text; 0: the default */
	const char *outputs;  /* an absolute directory; NULL: the session's */
	const char *prefix;   /* of the files written; NULL: the generation's */
	/* Variables set for this execution only, restored after it (as E2B's
	 * run_code(envs=...)): N_ENV names and values, borrowed (from the
	 * request parsed, or the caller's); a Python kernel only. */
	const char **env_names, **env_values;
	size_t n_env;
} kr_ctl_exec_t;

/* The variables of one execution: at most this many, each NAME a shell
 * variable's ([A-Za-z_][A-Za-z0-9_]*), each value without a NUL. */
#define KR_CTL_ENV_MAX 256

#define KR_CTL_EXEC_INIT                      \
	{                                     \
		.grace_ms = -1, .wait_ms = -1 \
	}

/* The request E as JSON, "op" first (new), or NULL when out of memory.
 * Durations are sent as seconds; members at their defaults are left
 * out. */
json_t *kr_ctl_exec_to_json(const kr_ctl_exec_t *e);

/* Whether the request of E fits in the line a supervisor takes
 * (KR_CTL_REQUEST_MAX with its newline): 0, or -1 with ERR, KBOX_E_INVALID
 * "the code is N bytes; at most M can run (16 MiB, less B bytes of the
 * request's own): make it shorter", M exact, its size as a JSON string
 * said when that is more (when the code fits alone, "... with N input
 * lines ..."), or KBOX_E_NOMEM.  Front ends call it before they start or
 * reach a session: too long a request is the caller's error. */
int kr_ctl_exec_fits(const kr_ctl_exec_t *e, kbox_error_t *err);

/* Read the execute request REQ (borrowed) into *OUT, checking its members
 * in the order kbox-protocol(7) gives: code, input (an array), format,
 * with_text, the durations, max_output, max_lines, outputs, prefix, the
 * elements of input.  A duration absent gets its default (grace
 * KR_CTL_GRACE_DEFAULT_MS, wait -1); durations are rounded to the
 * nearest millisecond.  0, or -1 with ERR (KBOX_E_INVALID, the message
 * the supervisor's "usage" error carries, naming the member) and *OUT
 * cleared.  Members of other ops are ignored.  "env", an object of
 * strings, comes after prefix. */
int kr_ctl_exec_parse(const json_t *req, kr_ctl_exec_t *out, kbox_error_t *err);

/* Why NAME is not a variable's name ("a NAME may not begin with a
 * digit", ...), or NULL when it is one. */
const char *kr_ctl_env_name_wrong(const char *name);

/* Free what kr_ctl_exec_parse allocated in E (the array INPUTS) and
 * reset it to KR_CTL_EXEC_INIT.  Accepts NULL. */
void kr_ctl_exec_clear(kr_ctl_exec_t *e);

/* ---- complete and inspect ---- */

/* A complete or an inspect request.  Its members of execute are checked
 * as execute checks them (EXEC.code is its code). */
typedef struct {
	kr_ctl_op_t op; /* KR_CTL_OP_COMPLETE or KR_CTL_OP_INSPECT */
	kr_ctl_exec_t exec;
	long long cursor_pos; /* in code points from 0; < 0: the end of the code */
	int detail_level;     /* inspect: 0 or 1 */
} kr_ctl_introspect_t;

/* Q as JSON: op, code, cursor_pos and, for inspect, detail_level (new), or
 * NULL when out of memory. */
json_t *kr_ctl_introspect_to_json(const kr_ctl_introspect_t *q);

/* Read the request REQ (borrowed) of OP (complete or inspect) into *OUT:
 * the members of execute as kr_ctl_exec_parse reads them, then
 * cursor_pos (absent, not an integer or negative: -1, the end) and
 * detail_level (not an integer: 0).  0, or -1 with ERR as
 * kr_ctl_exec_parse. */
int kr_ctl_introspect_parse(const json_t *req, kr_ctl_op_t op, kr_ctl_introspect_t *out,
                            kbox_error_t *err);

/* Free what parse allocated in Q; accepts NULL. */
void kr_ctl_introspect_clear(kr_ctl_introspect_t *q);

/* ---- the reply of an execution ---- */

/* The text member of an execution's reply (new JSON string): "[note:
 * NOTICE]\n" when NOTICE (may be NULL) is given; "[output printed between
 * executions:]\n", EARLIER and "[end of that output]\n" when EARLIER (may
 * be NULL) is; then TEXT (may be NULL).  What is not UTF-8 becomes U+FFFD
 * (kx_utf8_repair), so nothing is dropped.  NULL when out of memory. */
json_t *kr_ctl_reply_text(const char *notice, const char *earlier, const char *text);

#endif
