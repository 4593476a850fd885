/* src/runtime/mcp_client.h — a client of an MCP server over stdio, for the
 * host functions that are another server's tools (kbox-functions(5),
 * "mcp_servers"): kbox start lists the tools (kr_mcp_list_tools), the
 * supervisor calls them (src/runtime/supervisor_functions.c).
 *
 * The server is a process of its own (its own session and process group,
 * the environment it is given, standard error to /dev/null), spoken to in
 * JSON-RPC 2.0, one message a line (MCP's stdio transport). */
#ifndef KR_RUNTIME_MCP_CLIENT_H
#define KR_RUNTIME_MCP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>
#include <kbox/error.h>
#include "common/kx.h"

/* The protocol revision asked for; a server may answer with another it
 * speaks (2024-11-05 and later all have tools/list and tools/call). */
#define KR_MCP_PROTOCOL "2025-06-18"
/* The longest line a server may send (a tool's result among them). */
#define KR_MCP_LINE_MAX (32u << 20)
/* The most memory decoding one of its messages may take (kx_json_cost). */
#define KR_MCP_DECODE_MAX (128u << 20)
/* Pages of tools/list read at most. */
#define KR_MCP_PAGES_MAX 100

typedef struct {
	pid_t pid;
	int to;      /* its standard input, or -1 */
	int from;    /* its standard output, or -1 */
	kx_buf_t in; /* what came: lines read up to OFF, then what is not yet one */
	size_t off;
	size_t seen; /* IN holds no newline from OFF up to here */
	long long next_id;
} kr_mcp_t;

/* Start the server ARGV (ARGV[0] an absolute path) with ENV, in CWD.
 * 0, or -1 with ERR. */
int kr_mcp_spawn(kr_mcp_t *m, char **argv, char **env, const char *cwd, kbox_error_t *err);

/* Send MSG (taken) as one line.  With NONBLOCK, what cannot be written
 * now is an error (EAGAIN): the caller keeps it.  0, or -1 with ERR. */
int kr_mcp_send(kr_mcp_t *m, json_t *msg, kbox_error_t *err);

/* The next whole message that has come, without waiting: 1 and *MSG
 * (new), 0 when none is whole yet, -1 at the end of its output or on an
 * error (ERR says which: a line over KR_MCP_LINE_MAX, not JSON). */
int kr_mcp_read(kr_mcp_t *m, json_t **msg, kbox_error_t *err);

/* Start the server, initialize it and list its tools (every page), then
 * stop it: the tools (new: an array of MCP Tool objects), or NULL with
 * ERR.  Within TIMEOUT_MS in all. */
json_t *kr_mcp_list_tools(char **argv, char **env, const char *cwd, int timeout_ms,
                          kbox_error_t *err);

/* The text of a tool result's content blocks of type text, joined by
 * newlines (new), or NULL when out of memory. */
char *kr_mcp_result_text(const json_t *result);

/* Close the pipes, end the server (SIGTERM, then SIGKILL after a moment)
 * and reap it.  Accepts one never started. */
void kr_mcp_close(kr_mcp_t *m);

#endif
