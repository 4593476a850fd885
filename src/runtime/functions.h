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
/* The PATH a command gets. */
#define KR_FUNCTION_PATH "/usr/local/bin:/usr/bin:/bin"

/* One function, as the supervisor runs it. */
typedef struct {
	const char *name; /* in the document */
	char **argv;      /* a command: argv[0] absolute; NULL-terminated (owned) */
	const char *url;  /* or an http URL (in the document) */
	long long timeout_ms;
	char **env; /* the command's environment: PATH, LANG and its "env" (owned) */
	void *ctx;  /* the caller's */
} kr_function_t;

/* A functions file, as read. */
typedef struct {
	json_t *doc; /* {"dir", "functions": [...], "max_calls", "max_concurrent"} */
	const char *dir;
	kr_function_t *fns;
	size_t n;
	size_t max_calls, max_concurrent;
} kr_functions_t;

/* Read and check the functions file PATH into OUT (its "doc" is what
 * session.json keeps).  0, or -1 with ERR naming the file and what is
 * wrong.  Either way, kr_functions_free OUT after. */
int kr_functions_read(kr_functions_t *out, const char *path, kbox_error_t *err);

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

void kr_functions_free(kr_functions_t *f);

#endif
