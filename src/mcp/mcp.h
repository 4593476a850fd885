/* src/mcp/mcp.h — kbox mcp, a Model Context Protocol server on standard
 * input and output, as a front end of kbox(1): src/cli/cmd_mcp.c parses
 * the command line and calls mcp_serve.  What the server says and does is
 * in kbox-mcp(1); how it is built, in src/mcp/mcp_int.h. */
#ifndef KBOX_MCP_H
#define KBOX_MCP_H

#include "cli/cli.h"

/* How the images that code saved reach the client (--images). */
typedef enum {
	MCP_IMAGES_PATH,   /* by path, in the result's text */
	MCP_IMAGES_INLINE, /* also as image content, up to 16 MiB a result */
} mcp_images_t;

/* A run_python call still running after this long is answered with what
 * it printed so far (--soft-timeout's default): below the time limits of
 * clients (Claude Desktop ends a call at about 60 s). */
#define MCP_SOFT_DEFAULT_MS 50000LL
/* A file tool's call on a gateway session's server ends after this long
 * (--files-timeout's default), for the same reason. */
#define MCP_FILES_DEFAULT_MS 50000LL

/* The options of kbox mcp. */
typedef struct {
	const char *session; /* -s NAME (borrowed), or NULL: a session of the connection's own */
	mcp_images_t images; /* --images */
	cli_structured_t structured; /* --structured */
	long long timeout_ms;   /* -t: a run_python call's time limit when it gives none; 0: none */
	long long soft_ms;      /* --soft-timeout: when a call is answered early; 0: never */
	long long files_ms;     /* --files-timeout: a gateway file call's bound; 0: the helper's */
	long long max_sessions; /* --max-sessions: new_session's at once, 0..MCP_SESSIONS_MAX */
	const cli_functions_opts_t *functions; /* --functions..., or NULL */
	bool type_check;                       /* --type-check */
} mcp_options_t;
/* new_session's sessions at once: by default, and the most -- each is a
 * kernel of its own, some 100 MiB or more */
#define MCP_SESSIONS_DEFAULT 4
#define MCP_SESSIONS_MAX 64
#define MCP_OPTIONS_INIT                                                            \
	{                                                                           \
		NULL, MCP_IMAGES_PATH, CLI_STRUCTURED_NONE, 0, MCP_SOFT_DEFAULT_MS, \
		        MCP_FILES_DEFAULT_MS, MCP_SESSIONS_DEFAULT, NULL, false     \
	}

/* A state directory no session can be made in (kr_session_check_home_usable),
 * or, under root, that the sandboxes of the sessions kbox mcp makes cannot
 * reach, said once before anything is served rather than as the error of
 * every call (SESSION: -s NAME, or NULL).  EXIT_OK, or EXIT_UNAVAILABLE
 * after one line. */
int mcp_check_home(const char *session);

/* Serve one client on standard input and output until standard input ends
 * and the calls in flight are done, or SIGTERM, SIGINT or SIGHUP; then stop
 * and remove the connection's own session.  Diagnostics go to standard
 * error.  An exit status of kbox(1): EXIT_OK; EXIT_USAGE after one line
 * when O->session is not a valid name; EXIT_UNAVAILABLE, after one line and
 * the same end, when standard input could not be read. */
int mcp_serve(const mcp_options_t *o);

#endif
