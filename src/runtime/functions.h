/* src/runtime/functions.h — a functions file (kbox-functions(5)): the
 * host functions a session's kernel code may call, read and checked.
 *
 * kbox start reads the file (kr_functions_read): every entry is checked
 * (its schemas by libkbox's kbox_functions_add, its command or URL, its
 * timeout and environment), each command's program is made an absolute
 * path (relative ones are to the file's directory) and the file's
 * directory is kept as "dir", the commands' working directory.  What it
 * read is stored whole in session.json ("functions"), which a sandbox
 * cannot write: the supervisor builds its functions from that
 * (kr_functions_parse), never from the file again. */
#ifndef KR_RUNTIME_FUNCTIONS_H
#define KR_RUNTIME_FUNCTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <kbox/error.h>
#include <kbox/functions.h>

/* The most bytes a functions file may have. */
#define KR_FUNCTIONS_FILE_MAX (512 * 1024)
/* A call's time limit: by default, and at most (seconds). */
#define KR_FUNCTION_TIMEOUT_S 30
#define KR_FUNCTION_TIMEOUT_MAX_S 3600
/* The most calls an execution may make, and run at once, as a file may set. */
#define KR_FUNCTION_CALLS_MAX 100000
#define KR_FUNCTION_CONCURRENT_MAX 64
/* The bytes of a command's standard error kept: its error's text. */
#define KR_FUNCTION_STDERR_MAX KBOX_CALL_ERROR_MAX
/* MCP servers a file may name, and how long listing one's tools may take. */
#define KR_MCP_SERVERS_MAX 16
#define KR_MCP_LIST_MS 30000
/* The PATH a command gets. */
#define KR_FUNCTION_PATH "/usr/local/bin:/usr/bin:/bin"

/* One function, as the supervisor runs it. */
typedef struct {
	const char *name; /* in the document */
	char **argv;      /* a command: argv[0] absolute; NULL-terminated (owned) */
	const char *url;  /* or an http URL (in the document) */
	int mcp;          /* or a tool of the MCP server of this index (else -1)... */
	const char *tool; /* ...named so (in the document) */
	long long timeout_ms;
	char **env; /* the command's environment: PATH, LANG and its "env" (owned) */
	void *ctx;  /* the caller's */
} kr_function_t;

/* An MCP server whose tools are functions ("mcp_servers"). */
typedef struct {
	char **argv;          /* argv[0] absolute (owned) */
	char **env;           /* PATH, LANG and its "env" (owned) */
	long long timeout_ms; /* each call's */
	void *ctx;            /* the caller's */
} kr_mcp_server_t;

/* A functions file, as read. */
typedef struct {
	/* {"dir", "functions": [...], "mcp_servers": [...], "max_calls",
	 * "max_concurrent"}, the servers' tools among the functions */
	json_t *doc;
	const char *dir;
	kr_function_t *fns;
	size_t n;
	kr_mcp_server_t *servers;
	size_t n_servers;
	size_t max_calls, max_concurrent;
	char *notes; /* kr_functions_read: the tools left out, lines to show; or NULL */
} kr_functions_t;

/* Read and check the functions file PATH (NULL: none, the current
 * directory as its directory) into OUT, with the MCP servers of
 * MORE_SERVERS (an array of "mcp_servers" entries; NULL: none) besides
 * its own: each server is started and its tools listed, and those taken
 * become functions (an entry with "mcp" and "tool").  Its "doc" is what
 * session.json keeps.  0, or -1 with ERR naming the file and what is
 * wrong.  Either way, kr_functions_free OUT after. */
int kr_functions_read(kr_functions_t *out, const char *path, const json_t *more_servers,
                      kbox_error_t *err);

/* OUT from DOC, a document kr_functions_read made (a reference is
 * taken).  0, or -1 with ERR.  Either way, kr_functions_free OUT after. */
int kr_functions_parse(kr_functions_t *out, json_t *doc, kbox_error_t *err);

/* The libkbox set of F's functions: each calls RUN(fn's kr_function_t,
 * call) and CANCEL alike (kbox/functions.h), with F's limits.  New, or
 * NULL with ERR. */
kbox_functions_t *kr_functions_set(kr_functions_t *f, kbox_function_cb *run,
                                   kbox_call_cancel_cb *cancel, kbox_error_t *err);

/* The Python stubs of the functions of DOC (kbox_functions_stubs), for a
 * model to read.  New (free), or NULL when DOC has none or memory ran
 * out. */
char *kr_functions_stubs(const json_t *doc);

/* DOC (a functions file as read) as session.json keeps it: JSON text,
 * its members in their order (a function's parameters are in the order of
 * its "properties") and its numbers whole.  New, or NULL. */
char *kr_functions_text(const json_t *doc);
/* The document of TEXT (kr_functions_text's): new, or NULL when it is
 * not JSON. */
json_t *kr_functions_doc(const char *text);

/* Whether DOC (a functions file as read) keeps what the host runs out of
 * WORKSPACE, which the kernel can write: its directory, and each
 * command's and server's program.  0, or -1 with ERR saying which is in
 * it. */
int kr_functions_check_workspace(const json_t *doc, const char *workspace, kbox_error_t *err);

void kr_functions_free(kr_functions_t *f);

#endif
