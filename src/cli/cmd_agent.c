/* src/cli/cmd_agent.c — kbox agent: its options, then the agent's loop
 * (src/agent/). */
#include "config.h"
#include "cli.h"
#include "agent/agent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* --format text|json (no ndjson: the trace is one object). */
static int opt_format(const char *cmd, const cli_option_t *opt, const char *arg)
{
	format_t *f = opt->value;
	if (strcmp(arg, "text") == 0)
		*f = FMT_TEXT;
	else if (strcmp(arg, "json") == 0)
		*f = FMT_JSON;
	else {
		cli_error(cmd, "invalid --format \"%s\": expected text or json", arg);
		return EXIT_USAGE;
	}
	cli_set_error_format(*f);
	return EXIT_OK;
}

/* --max-steps N, into the int at VALUE. */
static int opt_max_steps(const char *cmd, const cli_option_t *opt, const char *arg)
{
	int *v = opt->value;
	char *end;
	long n;
	errno = 0;
	n = strtol(arg, &end, 10);
	if (!*arg || *end || errno || n < 1 || n > AGENT_MAX_STEPS_LIMIT || *arg == '+' ||
	    *arg == ' ') {
		cli_error(cmd,
		          "invalid --max-steps \"%s\": expected a number of steps from 1 to %d",
		          arg, AGENT_MAX_STEPS_LIMIT);
		return EXIT_USAGE;
	}
	*v = (int)n;
	return EXIT_OK;
}

int cmd_agent(int argc, char **argv)
{
	agent_options_t o = AGENT_OPTIONS_INIT;
	cli_functions_opts_t fo = {0};
	cli_strlist_t files = {0};
	cli_option_t opts[] = {
	        CLI_OPT_SESSION(&o.session),
	        CLI_OPT_STRING('m', "model", "MODEL", &o.model,
	                       "the model to ask (default: $KBOX_MODEL)"),
	        CLI_OPT_STRING(0, "base-url", "URL", &o.base_url,
	                       "the API's base URL; requests go to URL/chat/completions (default: "
	                       "$KBOX_BASE_URL, else " AGENT_DEFAULT_BASE_URL ")"),
	        CLI_OPT_LIST(0, "file", "HOSTPATH", &files,
	                     "copy HOSTPATH into the session's workspace first and name it to the "
	                     "model; repeatable, each with its own base name (default: none)"),
	        CLI_OPT_CALLBACK(0, "max-steps", "N", opt_max_steps, &o.max_steps,
	                         "stop when the model has called the tool in N responses without "
	                         "answering; each runs at most 16 of its tool calls (default: 20)"),
	        CLI_OPT_FLAG(0, "reset", &o.reset,
	                     "start a new conversation (default: go on with the session's)"),
	        CLI_OPT_CALLBACK(
	                't', "timeout", "DURATION", cli_opt_duration, &o.timeout_ms,
	                "interrupt each tool call's code after DURATION, as the model is told; "
	                "0: no limit (default: 5m)"),
	        CLI_OPT_CALLBACK(
	                0, "format", "FMT", opt_format, &o.format,
	                "print the answer as text, or the whole trace as json (default: text)"),
	        CLI_OPT_FUNCTIONS(&fo, "a session it starts"),
	        CLI_OPT_FLAG(0, "type-check", &o.type_check,
	                     "check the calls of the host functions in the model's code with mypy "
	                     "first, and give the model what it finds instead of running it"),
	        CLI_OPT_JSON('j', &o.format),
	        CLI_OPT_END};
	int status, n = cli_parse_options("agent", opts, argc, argv, &status);

	if (n < 0)
		goto out;
	status = EXIT_USAGE;
	if (n != 1) {
		cli_error("agent",
		          n ? "give one question (quote it), or - to read it from standard "
		              "input"
		            : "no question: give QUESTION, or - to read it from standard "
		              "input (see kbox agent --help)");
		goto out;
	}
	o.files = files.v;
	o.n_files = files.n;
	o.functions = &fo;
	status = agent_run(&o, argv[0]);
out:
	cli_functions_opts_clear(&fo);
	cli_strlist_clear(&files);
	return status;
}
