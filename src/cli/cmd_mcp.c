/* src/cli/cmd_mcp.c — kbox mcp: its options, then the server (src/mcp/). */
#include "config.h"
#include "cli.h"
#include "mcp/mcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* --images path|inline, into the mcp_images_t at VALUE. */
static int images_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	mcp_images_t *v = opt->value;
	if (strcmp(arg, "path") == 0)
		*v = MCP_IMAGES_PATH;
	else if (strcmp(arg, "inline") == 0)
		*v = MCP_IMAGES_INLINE;
	else {
		cli_error(cmd, "invalid --images \"%s\": expected path or inline", arg);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* --max-sessions N: 0 to MCP_SESSIONS_MAX, into the long long at VALUE. */
static int max_sessions_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	char *end;
	long long n;
	errno = 0;
	n = strtoll(arg, &end, 10);
	if (errno || end == arg || *end || n < 0 || n > MCP_SESSIONS_MAX) {
		cli_error(cmd, "invalid --max-sessions \"%s\": expected a number from 0 to %d", arg,
		          MCP_SESSIONS_MAX);
		return EXIT_USAGE;
	}
	*(long long *)opt->value = n;
	return EXIT_OK;
}

int cmd_mcp(int argc, char **argv)
{
	mcp_options_t o = MCP_OPTIONS_INIT;
	cli_option_t opts[] = {
	        CLI_OPT_STRING(
	                's', "session", "NAME", &o.session,
	                "use the session NAME, started if need be and left running (default: "
	                "a new session for this connection, stopped and removed at its end)"),
	        CLI_OPT_CALLBACK(0, "images", "path|inline", images_cb, &o.images,
	                         "give the images code saved by path in the text only, or also as "
	                         "image content, up to 16 MiB a result (default: path)"),
	        CLI_OPT_CALLBACK(0, "structured", "none|text|full", cli_opt_structured,
	                         &o.structured,
	                         "what a run_python result carries as structured content: "
	                         "nothing, so that every client shows its model the text and "
	                         "images; the text and a summary; or the whole kbox.result/2 "
	                         "(default: none)"),
	        CLI_OPT_CALLBACK(0, "soft-timeout", "DURATION", cli_opt_duration, &o.soft_ms,
	                         "answer a run_python call still running after DURATION with "
	                         "what it printed so far, the cell going on (wait_python reads "
	                         "on) when the call gives no soft_timeout (default: 50s; 0: "
	                         "never)"),
	        CLI_OPT_CALLBACK(
	                't', "timeout", "DURATION", cli_opt_duration, &o.timeout_ms,
	                "interrupt a run_python call after DURATION when the call gives no "
	                "timeout (default: 0, no limit)"),
	        CLI_OPT_CALLBACK(0, "max-sessions", "N", max_sessions_cb, &o.max_sessions,
	                         "let new_session make at most N sessions, each a kernel of its "
	                         "own, 0 to 64 (default: 4)"),
	        CLI_OPT_END};
	int status;

	if (cli_parse_no_operands("mcp", opts, argc, argv, &status) < 0)
		return status;
	return mcp_serve(&o);
}
