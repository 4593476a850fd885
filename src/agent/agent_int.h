/* src/agent/agent_int.h — what the files of kbox agent share (agent_
 * prefix).
 *
 * The loop, against any OpenAI-compatible Chat Completions endpoint: send
 * the conversation and the run_python tool; run each tool call the model
 * makes in the session's kernel (as kbox exec would, through the
 * supervisor: src/runtime/ctl.h) and send back what a model should read
 * of its result; until the model answers without calling the tool, or
 * --max-steps.
 *
 *   agent.c         the command's course: setup (the question, the files,
 *                   the session, the lock), one step after another, the
 *                   answer or the trace
 *   chat.c          the model: its URL and key, one request and its
 *                   response, errors with the key hidden
 *   tool.c          the tool calls: checked, run in the session, shown
 *   conversation.c  the conversation, kept in SESSION_DIR/agent.json
 *   http.c          the client of kbox-http, which makes the HTTP requests
 *                   (src/http/http_proto.h): kbox never loads libcurl */
#ifndef KBOX_AGENT_INT_H
#define KBOX_AGENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>
#include "agent/agent.h"

/* The command's name, in diagnostics ("kbox agent: ..."). */
#define AGENT_CMD "agent"

/* The most tool calls of one response that are run; the others get a
 * tool message that says they were not. */
#define AGENT_MAX_CALLS 16

typedef struct agent_http agent_http_t;

/* One run of kbox agent. */
typedef struct {
	const char *name; /* the session */
	char *dir;        /* its directory */
	const char *model;
	char url[4096];       /* BASE_URL/chat/completions */
	char *key;            /* NULL: none (never printed, never saved; wiped at the end) */
	long long timeout_ms; /* the most each tool call's code may run; 0: no limit */
	int max_steps;
	format_t format;
	bool tty; /* standard error is a terminal */
	agent_http_t *http;
	json_t *conv;       /* {"schema", "model", "messages"} */
	json_t *steps;      /* the trace: one object per tool call */
	bool ticked;        /* "thinking…" is on standard error's last line */
	long long usage[3]; /* prompt, completion, total tokens */
	int requests;
	json_t *functions;    /* the host functions (kbox-functions(5)), or NULL */
	char *functions_text; /* what run_python's description says of them */
	bool type_check;      /* --type-check: their calls checked with mypy first */
} agent_t;

/* ---- chat.c: the model ---- */

/* Check the base URL BASE (from WHERE: "--base-url" or "KBOX_BASE_URL")
 * and make A->url of it.  EXIT_OK, or EXIT_USAGE after one line. */
int agent_set_url(agent_t *a, const char *base, const char *where);
/* Take the API key out of the environment ($KBOX_API_KEY, else
 * $OPENAI_API_KEY) into A->key (new, or NULL for none), wiping both
 * variables where they are: a session's supervisor started later would
 * inherit and keep them.  EXIT_OK, or EXIT_UNAVAILABLE after one line. */
int agent_take_key(agent_t *a);
/* Ask the model: the conversation and the tool.  The response's message
 * (new reference) and its finish_reason into FINISH ("" when none), or
 * NULL with *STATUS set after one line. */
json_t *agent_ask(agent_t *a, char *finish, size_t finish_size, int *status);
/* One error line "kbox agent: ...", of at most 1000 bytes, with the key
 * hidden (an API may echo what it was given). */
void agent_error(const agent_t *a, const char *fmt, ...) KX_PRINTF(2, 3);
/* TEXT made one line into OUT: control characters as spaces (nothing for
 * a terminal to obey), the key hidden, cut to fit at a whole character. */
void agent_one_line(const agent_t *a, const char *text, char *out, size_t size);

/* ---- tool.c: the tool calls ---- */

/* Run the tool call CALL of step STEP, append its tool message to the
 * conversation and its step to the trace.  EXIT_OK (whatever the code
 * did: its errors are the model's to read), or another status after one
 * line when the session failed. */
int agent_tool_call(agent_t *a, int step, json_t *call);
/* The tool message and the trace's step of a call CALL of step STEP that
 * is not run: it is beyond the first AGENT_MAX_CALLS of its response.
 * EXIT_OK, or EXIT_UNAVAILABLE after one line. */
int agent_not_run(agent_t *a, int step, json_t *call);
/* TEXT on standard error, each line after PREFIX, made safe for a
 * terminal. */
void agent_show_lines(const char *prefix, const char *text);

/* ---- conversation.c ---- */

/* The conversation kept in the session, or a new one (RESET, or none
 * kept): into A->conv, with this run's system message.  EXIT_OK, or
 * EXIT_UNAVAILABLE after one line. */
int agent_conv_load(agent_t *a, bool reset);
/* Write the conversation to SESSION_DIR/agent.json (mode 0600), whole or
 * not at all, durably.  EXIT_OK, or EXIT_UNAVAILABLE after one line. */
int agent_conv_save(agent_t *a);
/* The conversation's messages (borrowed). */
json_t *agent_messages(agent_t *a);
/* The assistant message to keep of the model's MSG: its role, content and
 * tool calls (each with an id: one is made when the server gave none, from
 * STEP), nothing a server added (new reference, or NULL). */
json_t *agent_assistant_message(const json_t *msg, int step);

/* ---- http.c: kbox-http, the HTTP helper ---- */

/* Called while a request waits, about once a second: SECS waited so far. */
typedef void (*agent_http_tick_t)(void *arg, double secs);

/* Start the helper program (src/http/http_proto.h), with KEY (may be NULL:
 * no Authorization header) in its environment only.  NULL after one line
 * printed. */
agent_http_t *agent_http_start(const char *key);
/* POST BODY (JSON text) to URL through H, each attempt taking at most
 * TIMEOUT_S seconds; TICK (may be NULL) is called with ARG while it waits.
 * The helper's reply (new reference): {"status", "body", "attempts"} or
 * {"error", "attempts"}; NULL with WHY filled when the helper failed. */
json_t *agent_http_post(agent_http_t *h, const char *url, const char *body, double timeout_s,
                        agent_http_tick_t tick, void *arg, char *why, size_t why_size);
/* End the helper and free H; sets *HP to NULL.  Accepts NULL. */
void agent_http_destroy(agent_http_t **hp);

#endif
