/* src/mcp/mcp_int.h — what the files of kbox mcp share (mcp_ prefix).
 *
 * The server is a thin client of the session's supervisor, as kbox exec
 * is: each run_python call is one "execute" request (format json-live,
 * with_text) on a control connection of its own (src/runtime/ctl.h), so
 * that the supervisor queues the calls and the server goes on reading.
 * Standard input and those connections are read together with poll(2): a
 * ping or a cancellation is answered while code runs.
 *
 *   server.c   the protocol: JSON-RPC 2.0 lines in and out, initialize,
 *              the loop over standard input and the calls in flight
 *   session.c  the session: made, started, connected to, stopped
 *   tools.c    tools/list and tools/call: the tools, their arguments,
 *              their results
 *   run.c      run_python: the calls in flight, their replies, cancelling
 *   cell.c     long cells: what they print kept for early answers at the
 *              soft time limit, wait_python, progress notifications
 *   files.c    list_files, read_file, write_file, read_image: the files of
 *              the workspace (src/runtime/workspace.h) and of the outputs */
#ifndef KBOX_MCP_INT_H
#define KBOX_MCP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "cli/cli.h"
#include "gateway/gateway_proto.h"
#include "mcp/mcp.h"

/* The command's name, in diagnostics ("kbox mcp: ..."). */
#define MCP_CMD "mcp"

/* While a call waits, a notifications/progress at least this often when
 * its request asked for them (a client's idle timeout is reset by each:
 * Claude Code's is 300 s), and at most once a second. */
#define MCP_PROGRESS_EVERY_MS 5000
#define MCP_PROGRESS_MIN_MS 1000

/* JSON-RPC 2.0 error codes. */
enum {
	MCP_RPC_PARSE_ERROR = -32700,
	MCP_RPC_INVALID_REQUEST = -32600,
	MCP_RPC_METHOD_NOT_FOUND = -32601,
	MCP_RPC_INVALID_PARAMS = -32602,
	MCP_RPC_INTERNAL_ERROR = -32603,
};

/* One run_python call in flight: its own control connection.  A call
 * still running at its soft time limit is answered with what it printed
 * so far and goes on in the background (cell.c): wait_python reads on. */
typedef struct mcp_call {
	struct mcp_sess *sess;     /* its session */
	json_t *id;                /* the request's id (owned); NULL once answered early */
	json_t *progress;          /* the request's progressToken (owned), or NULL */
	int fd;                    /* its control connection; -1 once it ended */
	bool started;              /* the supervisor began it (its "started" line came) */
	json_t *resend;            /* its request (owned), until it began: sent once more, */
	                           /* on a new connection, if this one ends before it began */
	char *notice;              /* that line's notice (a new session, a new kernel), or NULL */
	bool notice_said;          /* an early answer said it already */
	bool cancelled;            /* notifications/cancelled came: no response */
	long long cancel_deadline; /* then the connection closes (ms, kx_now_ms) */
	long long begun;           /* when the request came (ms) */
	long long soft_deadline;   /* when it is answered early; 0: never */
	long long progress_due;    /* the next progress notification; 0: none */
	long long progress_last;   /* when the last one went */
	long long progress_n;      /* how many went: the next one's "progress" */
	bool background;           /* answered early: the cell runs on */
	bool modern;               /* its request was of the 2026-07-28 revision */
	json_t *reply;             /* background: its reply, once it came (owned) */
	char *lost;                /* background: why it ended without one */
	kx_buf_t fresh;            /* printed since the last answer, as a model reads it */
	size_t fresh_left_out;     /* bytes of that left out to keep its end */
	int fresh_stream;          /* the stream FRESH ends in: 0 none yet, 1 stdout, 2 stderr */
	bool fresh_mid_line;       /* FRESH's kernel text ends inside a line */
	bool new_output;           /* output came since the last progress notification */
	char last_line[160];       /* the last line it printed, for progress messages */
	struct mcp_call *next;
} mcp_call_t;

/* A wait_python call that waits for the background cell. */
typedef struct {
	json_t *id;       /* NULL: none waits */
	json_t *progress; /* its progressToken, or NULL */
	bool modern;      /* of the 2026-07-28 revision */
	bool interrupted; /* it interrupted the code first */
	long long begun, deadline, progress_due, progress_last, progress_n;
} mcp_wait_t;

/* A session the tools work in: the connection's own or the one -s names
 * (the main one), or one new_session made, whose name is its handle. */
typedef struct mcp_sess {
	char name[KR_SESSION_NAME_MAX + 1];
	char *dir;       /* its directory, once made */
	bool own;        /* made by this server: stopped and removed at its end */
	bool running;    /* its supervisor was started or found */
	bool refused;    /* its socket refused a connection: the next start waits
	                  * for a supervisor that stops (it holds its lock) */
	mcp_wait_t wait; /* a wait_python for its code answered early */
	bool has_kept;   /* kept_fd is a control connection its last call ended */
	int kept_fd;     /* on cleanly, for the next (mcp_session_keep) */
} mcp_sess_t;

/* Room for the sessions new_session makes (--max-sessions, at most). */
#define MCP_HANDLES_MAX MCP_SESSIONS_MAX

/* The last file of a remote session's that read_file read whole, kept
 * for its next pages (the contents API sends a file whole) while the
 * server says it is unchanged, until its last page is read (files.c). */
typedef struct {
	bool set;
	char *dir, *rel; /* its session's directory, its path there */
	char rdir[300];  /* the session's directory on the server */
	char stamp[KG_STAMP_MAX];
	int fd; /* a memfd of its bytes */
	long long size;
} mcp_remote_copy_t;

/* The server's state: one client, its sessions. */
typedef struct mcp {
	/* How a message (taken) goes to the client: NULL, a line on standard
	 * output (the stdio transport); else where the response to the
	 * request ABOUT (its id; NULL: none) goes. */
	void (*out)(struct mcp *m, json_t *msg, const json_t *about);
	mcp_sess_t main;                      /* without a handle */
	mcp_sess_t *handles[MCP_HANDLES_MAX]; /* new_session's */
	size_t n_handles;
	size_t max_handles; /* --max-sessions */
	mcp_sess_t *sess;   /* the session of the request, or the call, being handled */
	mcp_images_t images;
	mcp_remote_copy_t copy;
	cli_structured_t structured; /* what run_python's results carry as structuredContent */
	char *functions_text;        /* what run_python's description says of the host functions */
	json_t *functions;           /* the host functions (kbox-functions(5)), or NULL */
	bool type_check;             /* --type-check: their calls checked with mypy first */
	long long timeout_ms;        /* a call's default: 0, none */
	long long soft_ms;           /* a call's soft time limit by default: 0, none */
	bool initialized;            /* initialize was answered */
	bool req_modern;             /* the request being handled is of the 2026-07-28 revision */
	mcp_call_t *calls;
	char *in; /* standard input not yet split into lines */
	size_t in_len, in_cap;
	size_t in_scan; /* the bytes at the head of in looked through: no newline */
	bool in_skip;   /* dropping the rest of a line that was too long */
	bool in_eof;
	bool failed; /* standard input could not be read, or poll failed */
} mcp_t;

/* ---- server.c: writing messages ---- */

/* The response to ID (borrowed; NULL: null) with RESULT (taken; NULL: out
 * of memory, said on standard error); to a request of the 2026-07-28
 * revision when MODERN (its "resultType" and the server's identity in its
 * "_meta" added). */
void mcp_send_result(mcp_t *m, json_t *id, json_t *result, bool modern);
/* The error response to ID (borrowed; NULL: null), CODE an MCP_RPC_*. */
void mcp_send_error(mcp_t *m, json_t *id, int code, const char *fmt, ...) KX_PRINTF(4, 5);
/* Whether J is a string that holds a NUL character (\u0000), which the C
 * strings it would be used as would cut short. */
bool mcp_has_nul(const json_t *j);

/* ---- session.c ---- */

/* Name the main session of M: GIVEN (checked), or one of the
 * connection's own, mcp-PID-RANDOM.  EXIT_OK, or EXIT_USAGE after one
 * line. */
int mcp_session_name(mcp_t *m, const char *given);
/* The session whose handle is the string J (NULL: the main one), into
 * M->sess: 0, or -1 with WHY (no such handle of this server's). */
int mcp_session_select(mcp_t *m, json_t *j, char *why, size_t size);
/* new_session: a session of its own for a conversation, made and
 * started; the result says its handle. */
json_t *mcp_new_session(mcp_t *m);
/* The session's directory, made if need be, and its supervisor started
 * unless it runs.  0, or -1 with WHY filled (also on standard error). */
int mcp_session_ensure(mcp_t *m, char *why, size_t size);
/* A connection to the session's supervisor, starting the session when
 * none runs (it may have stopped since: its idle time limit).  The
 * socket, or -1 with WHY. */
int mcp_session_connect(mcp_t *m, bool *reused, char *why, size_t size);
/* Keep FD, the control connection of a call of S whose reply was read
 * whole, for S's next call (mcp_session_connect takes it): one connection
 * and its checks (kr_ctl_connect) a call fewer.  One is kept at most: FD
 * is closed when one is kept already. */
void mcp_session_keep(mcp_sess_t *s, int fd);
/* Stop the sessions this server made and remove their directories;
 * nothing for a session named with -s. */
void mcp_session_end(mcp_t *m);
/* Stop S if this server made it and remove its directory; forget its
 * directory and its wait. */
void mcp_session_end_one(mcp_t *m, mcp_sess_t *s);

/* ---- tools.c ---- */

/* The tools, as tools/list gives them, run_python's outputSchema that of
 * STRUCTURED (new reference). */
json_t *mcp_tools_list(cli_structured_t structured, bool images_inline, const char *more);
/* tools/call for request ID with PARAMS (borrowed): the response is sent,
 * now or, for run_python, when its reply comes. */
void mcp_tools_call(mcp_t *m, json_t *id, json_t *params);
/* A tool's result: CONTENT (taken: an array of content) and STRUCTURED
 * (taken, may be NULL).  New reference. */
json_t *mcp_tool_result(json_t *content, json_t *structured, bool is_error);
/* A text content item, its text made UTF-8 if need be.  New reference. */
json_t *mcp_text_item(const char *text);
/* A tool's result that is one text, an error or not.  New reference. */
json_t *mcp_text_result(bool is_error, const char *fmt, ...) KX_PRINTF(2, 3);

/* ---- run.c: run_python ---- */

/* Begin run_python with ARGS for request ID (PROGRESS its progressToken,
 * or NULL): its execute request sent on a connection of its own, the call
 * added to M's.  The result comes later (mcp_call_readable).  NULL, or a
 * result to send now (an error). */
json_t *mcp_run_python(mcp_t *m, json_t *id, json_t *progress, json_t *args);
/* A line from C's connection, or its end: an event, or the reply that
 * ends the call. */
void mcp_call_readable(mcp_t *m, mcp_call_t *c);
/* The tools/call result of run_python from the supervisor's reply R
 * (borrowed; NULL when the connection ended with WHY), its text after the
 * line NOTE (NULL: none). */
json_t *mcp_run_result(mcp_t *m, json_t *r, const char *why, const char *note);
/* notifications/cancelled for request ID: a call that runs is
 * interrupted (its reply then dropped), one that waits for its turn
 * leaves the queue (its connection closed), a wait_python stops waiting.
 * Unknown ids are ignored. */
void mcp_call_cancel(mcp_t *m, json_t *id);
/* Send C an interrupt request on its connection, CAUSE what the result
 * says interrupted it ("interrupted by CAUSE"): 0, or -1 (it could not be
 * sent). */
int mcp_call_interrupt(mcp_call_t *c, const char *cause);
/* Remove C from M's calls, close its connection and free it. */
void mcp_call_drop(mcp_t *m, mcp_call_t *c);

/* A number of seconds from 0 to CLI_DURATION_MAX_MS, as milliseconds
 * rounded up into *MS: 0, or -1 when J is not one. */
int mcp_seconds_arg(json_t *j, long long *ms);

/* ---- cell.c: long cells ---- */

/* EVENT (borrowed), an event of C's execution: what it printed is kept
 * for the next answer, its last line for progress messages. */
void mcp_call_event(mcp_t *m, mcp_call_t *c, json_t *event);
/* C, answered early, ended: REPLY (borrowed; NULL when the connection
 * ended with WHY).  The waiting wait_python gets its whole result, or it
 * is kept for the next. */
void mcp_call_ended(mcp_t *m, mcp_call_t *c, json_t *reply, const char *why);
/* The call of M->sess answered early whose result was not read yet, or
 * NULL. */
mcp_call_t *mcp_background(mcp_t *m);
/* Whether a wait_python waits, in any session. */
bool mcp_waiting(const mcp_t *m);
/* Do what is due now: soft time limits, progress notifications, a
 * wait_python's end, a cancelled call's end.  Milliseconds until the next
 * is due, or -1: nothing is. */
long long mcp_calls_due(mcp_t *m);
/* wait_python with ARGS for request ID (PROGRESS its progressToken, or
 * NULL): NULL while it waits, or the result to send now. */
json_t *mcp_wait_python(mcp_t *m, json_t *id, json_t *progress, json_t *args);
/* Standard input ended: a cell in the background that no wait_python
 * waits for is interrupted and dropped (no one is left to read it). */
void mcp_calls_eof(mcp_t *m);
/* Free what C holds for answers (its reply, its output kept). */
void mcp_call_clear(mcp_call_t *c);

/* ---- server.c: notifications ---- */

/* The notification METHOD with PARAMS (taken), about the request ABOUT
 * (its id, borrowed; NULL: none): a transport sends it where that
 * request's response goes. */
void mcp_send_notification(mcp_t *m, const char *method, json_t *params, const json_t *about);

/* ---- files.c ---- */

/* The tools on files: list_files {path?}, read_file {path, offset?, length?},
 * write_file {path, content}, read_image {path}.  The session runs; ARGS
 * were checked against the tool's arguments.  The result (new). */
json_t *mcp_list_files(mcp_t *m, json_t *args);
json_t *mcp_read_file(mcp_t *m, json_t *args);
json_t *mcp_write_file(mcp_t *m, json_t *args);
json_t *mcp_read_image(mcp_t *m, json_t *args);
/* The image at PATH (the workspace's, or the outputs' that a result gave)
 * as image content (new reference), or NULL with WHY; when it is more than
 * BUDGET bytes, NULL with WHY empty.  *LEN_P: its size. */
json_t *mcp_image_item(mcp_t *m, const char *path, long budget, size_t *len_p, char *why,
                       size_t size);
/* Forget M's copy of a remote file. */
void mcp_remote_copy_drop(mcp_t *m);

#endif
