/* src/agent/agent.h — kbox agent, the loop of an agent that answers a
 * question with a language model running Python in a session, as a front
 * end of kbox(1): src/cli/cmd_agent.c parses the command line and calls
 * agent_run.  What it does is in kbox-agent(1); how it is built, in
 * src/agent/agent_int.h. */
#ifndef KBOX_AGENT_H
#define KBOX_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include "cli/cli.h" /* format_t, the exit statuses */

#define AGENT_DEFAULT_BASE_URL "https://api.openai.com/v1"
#define AGENT_DEFAULT_MAX_STEPS 20
#define AGENT_MAX_STEPS_LIMIT 1000
#define AGENT_DEFAULT_TIMEOUT_MS (5LL * 60 * 1000)

/* The options of kbox agent; strings borrowed. */
typedef struct {
	const char *session;      /* -s NAME, or NULL: $KBOX_SESSION, else "default" */
	const char *model;        /* -m MODEL, or NULL: $KBOX_MODEL */
	const char *base_url;     /* --base-url, or NULL: $KBOX_BASE_URL, else the default */
	const char *const *files; /* --file HOSTPATH..., N_FILES of them */
	size_t n_files;
	int max_steps;                         /* --max-steps, 1 to AGENT_MAX_STEPS_LIMIT */
	bool reset;                            /* --reset: a new conversation */
	long long timeout_ms;                  /* -t: each tool call's code at most; 0: no limit */
	format_t format;                       /* FMT_TEXT (the answer) or FMT_JSON (the trace) */
	const cli_functions_opts_t *functions; /* --functions..., or NULL */
	bool type_check;                       /* --type-check */
} agent_options_t;
#define AGENT_OPTIONS_INIT                                                                    \
	{                                                                                     \
		.max_steps = AGENT_DEFAULT_MAX_STEPS, .timeout_ms = AGENT_DEFAULT_TIMEOUT_MS, \
		.format = FMT_TEXT                                                            \
	}

/* Answer QUESTION (the operand: the question, or "-" to read it from
 * standard input) as O says: the answer on standard output (or the trace,
 * under --format json), the steps on standard error.  An exit status of
 * kbox(1), after one line on standard error when not EXIT_OK. */
int agent_run(const agent_options_t *o, const char *question);

#endif
