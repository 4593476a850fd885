/* src/cli/cli.h — kbox(1): the command table and what commands share. */
#ifndef KBOX_CLI_H
#define KBOX_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include <kbox/error.h>
#include <kbox/kspec.h>
#include "runtime/session.h"
#include "runtime/backend.h"
#include "runtime/ctl.h"
#include "runtime/bwrap.h"
#include "common/kx.h"

/* Exit statuses, documented in kbox(1). */
enum {
	EXIT_OK = 0,
	EXIT_CODE_ERROR = 1,  /* the code raised an error */
	EXIT_USAGE = 2,       /* bad command line or input file */
	EXIT_TIMEOUT = 3,     /* timed out; the kernel was interrupted, state kept */
	EXIT_DIED = 4,        /* the kernel died; state lost */
	EXIT_UNAVAILABLE = 5, /* no kernel: it could not be found or started */
	EXIT_BUSY = 6, /* the session ran other code until the wait ran out: the code never ran */
	EXIT_STEP_LIMIT = 7, /* kbox agent: no answer within --max-steps */
};

/* Output formats of the commands that print data. */
typedef enum { FMT_TEXT, FMT_JSON, FMT_NDJSON } format_t;

/* The schema of results, and of kbox's own failures under --format json. */
#define CLI_RESULT_SCHEMA "kbox.result/2"

/* Under --format json or ndjson (cli_opt_format sets it), a command that
 * fails prints, besides its line on standard error, one JSON object on
 * standard output: {"schema", "status": "failed" (or "busy"), "error":
 * {"kind", "message"}}, the message being the first cli_error's; unless it
 * printed JSON of its own (cli_print_json_line).  main() does it. */
void cli_set_error_format(format_t format);
void cli_print_failure(int status);
/* The "kind" of a failure with the exit status STATUS, as its JSON says:
 * "usage", "unavailable", "busy" or "failed" (static). */
const char *cli_error_kind(int status);
/* The first cli_error message, without its "kbox CMD: " ("" when none). */
const char *cli_first_error(void);
/* The last cli_error message, the same way ("" when none, or none since
 * cli_forget_last_error): for a server that reports a failure to its
 * client (kbox mcp). */
const char *cli_last_error(void);
void cli_forget_last_error(void);
/* Say that the command printed JSON of its own (not through
 * cli_print_json_line): a failure after it prints no failure object. */
void cli_json_printed(void);

typedef struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage; /* matches the man page SYNOPSIS */
	const char *summary;
	const char *example; /* one command line, shown by --help */
} cli_cmd_t;

const cli_cmd_t *cli_find(const char *name);
/* The usage of kbox and its list of commands, on F (what kbox --help prints). */
void cli_usage(FILE *f);
const cli_cmd_t *cli_commands(size_t *n);

/* "kbox CMD: MESSAGE" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse a size: digits with an optional K, M or G suffix (powers of 1024).
 * -1 when S is not one. */
long long cli_parse_size(const char *s);

/* Write LEN bytes of S to F for a terminal: control characters other than
 * \n, \t and a \r before a \n (ESC above all: escape sequences from the
 * kernel could retitle, recolour or program the terminal) are shown as
 * ^X, but NUL as \0 (as kbox_render_text shows it), C1 controls as
 * \u0080..\u009f, and invisible format characters (bidi controls
 * U+202A..U+202E and U+2066..U+2069, zero-width spaces and marks,
 * U+2028/U+2029, U+FEFF) as \u202e and the like.  A backspace is ^H, and
 * so is a carriage return ^M: in a text whose lines were quoted
 * (kx_buf_kernel) each could go back over the quote, or over a line's
 * start, and draw a line of kbox's own. */
void cli_write_safe(FILE *f, const char *s, size_t len);
/* The same for the streams' text as it comes, quoted by kx_live_t, which
 * judges what a carriage return lets draw over a line: one is kept (a
 * progress bar's). */
void cli_write_live(FILE *f, const char *s, size_t len);

/* Where the C string S stops being UTF-8, for an error: its first bad
 * byte's line and the byte's place in that line, both from 1, in BUF as
 * "line N, byte B".  BUF. */
const char *cli_utf8_where(const char *s, char *buf, size_t size);


/* The value of --format, --max-output and --max-lines for command CMD:
 * 0, or -1 with one line printed (a usage error). */
int cli_parse_format(const char *cmd, const char *arg, format_t *out);
/* Check --outputs PATH for CMD and put its absolute path in OUT (PATH_MAX
 * bytes): a writable directory, not a symbolic link itself (a directory
 * the kernel can write in must not lead elsewhere).  EXIT_OK, or
 * EXIT_USAGE with the error printed. */
int cli_outputs_dir(const char *cmd, const char *path, char *out);
int cli_parse_max_output(const char *cmd, const char *arg, long long *out);
int cli_parse_max_lines(const char *cmd, const char *arg, long long *out);

/* ---- options (src/cli/options.c) ----
 *
 * A command declares its options in a table, ended by CLI_OPT_END:
 *
 *	cli_option_t opts[] = {
 *	    CLI_OPT_SESSION(&name),
 *	    CLI_OPT_FLAG(0, "json", &as_json, "print JSON (default: text)"),
 *	    CLI_OPT_END,
 *	};
 *	int n = cli_parse_options("status", opts, argc, argv, &status);
 *	if (n < 0)
 *		return status;
 *
 * cli_parse_options reads the options from it, handles -h and --help (the
 * help is made from the same table, with the command's usage and example
 * from the command table), and says what is wrong with a command line in
 * one format. */

typedef struct cli_option cli_option_t;

/* A callback: take ARG (NULL for an option without one), the argument of
 * OPT of command CMD; OPT->value is its target.  EXIT_OK, or another exit
 * status after one line on standard error. */
typedef int (*cli_opt_cb_t)(const char *cmd, const cli_option_t *opt, const char *arg);

/* Repeated arguments, in the order given: V (owned, NULL-terminated; its
 * strings borrowed from argv), freed with cli_strlist_clear. */
typedef struct {
	const char **v;
	size_t n;
	char **owned; /* buffers some of V's strings are in (cli_opt_input_file) */
	size_t n_owned;
} cli_strlist_t;

typedef enum {
	CLI_OPT_FLAG,     /* bool *value: set */
	CLI_OPT_STRING,   /* const char **value: the argument (borrowed; the last one wins) */
	CLI_OPT_LIST,     /* cli_strlist_t *value: each argument appended */
	CLI_OPT_CALLBACK, /* cb(cmd, opt, arg), value its own */
	CLI_OPT_OPERANDS, /* no option: cb(cmd, opt, operand) for each operand, in order */
} cli_opt_type_t;

typedef enum { CLI_ARG_NONE, CLI_ARG_REQUIRED } cli_arg_t;

struct cli_option {
	const char *long_name; /* "session" for --session; "" for OPERANDS; NULL ends the table */
	char short_name;       /* 's' for -s, or 0 */
	cli_arg_t arg;
	const char *placeholder; /* the argument in the help, "NAME"; NULL without one */
	const char *help;        /* one line: what it does, and the default */
	cli_opt_type_t type;
	void *value;     /* where the value goes, as TYPE says */
	cli_opt_cb_t cb; /* CLI_OPT_CALLBACK, CLI_OPT_OPERANDS */
};

#define CLI_OPT_FLAG(s, l, var, h)                                                     \
	{                                                                              \
		.long_name = (l), .short_name = (s), .arg = CLI_ARG_NONE, .help = (h), \
		.type = CLI_OPT_FLAG, .value = (var)                                   \
	}
#define CLI_OPT_STRING(s, l, ph, var, h)                                                           \
	{                                                                                          \
		.long_name = (l), .short_name = (s), .arg = CLI_ARG_REQUIRED, .placeholder = (ph), \
		.help = (h), .type = CLI_OPT_STRING, .value = (var)                                \
	}
#define CLI_OPT_LIST(s, l, ph, var, h)                                                             \
	{                                                                                          \
		.long_name = (l), .short_name = (s), .arg = CLI_ARG_REQUIRED, .placeholder = (ph), \
		.help = (h), .type = CLI_OPT_LIST, .value = (var)                                  \
	}
/* PH NULL: an option without an argument. */
#define CLI_OPT_CALLBACK(s, l, ph, fn, data, h)                                                  \
	{                                                                                        \
		.long_name = (l), .short_name = (s),                                             \
		.arg = (ph) ? CLI_ARG_REQUIRED : CLI_ARG_NONE, .placeholder = (ph), .help = (h), \
		.type = CLI_OPT_CALLBACK, .value = (data), .cb = (fn)                            \
	}
#define CLI_OPT_OPERANDS(fn, data)                                                     \
	{                                                                              \
		.long_name = "", .type = CLI_OPT_OPERANDS, .value = (data), .cb = (fn) \
	}
#define CLI_OPT_END               \
	{                         \
		.long_name = NULL \
	}

/* --format text|json|ndjson into the format_t VAR, and --json (with the
 * short name S, or 0), the same as --format json: the options of every
 * command that prints data.  H says what each format prints. */
#define CLI_OPT_FORMAT(var, h) CLI_OPT_CALLBACK(0, "format", "FMT", cli_opt_format, (var), (h))
#define CLI_OPT_JSON(s, var) \
	CLI_OPT_CALLBACK((s), "json", NULL, cli_opt_json, (var), "the same as --format json")

/* -s NAME: the option of every command that works on one session. */
#define CLI_OPT_SESSION(var)                          \
	CLI_OPT_STRING('s', "session", "NAME", (var), \
	               "the session (default: $KBOX_SESSION, else \"default\")")

/* Parse ARGV (ARGV[0] the command's name) against OPTS, as getopt_long
 * would: options and operands in any order, "--" ends the options, -xVALUE
 * and -xy clusters, --name VALUE and --name=VALUE, a long name abbreviated
 * to a prefix of one option only.  Each option's value goes to its target
 * as it comes, so the last of a repeated STRING wins and callbacks run in
 * command-line order.  Returns the number of operands, moved in order to
 * ARGV[0..n-1] (ARGV[n] is NULL; none when OPTS has CLI_OPT_OPERANDS), or
 * -1 when the command is done, *STATUS saying how: EXIT_OK after -h or
 * --help printed the help on standard output; EXIT_USAGE after one of
 *   kbox CMD: unknown option --x (see kbox CMD --help)
 *   kbox CMD: option --x needs an argument (see kbox CMD --help)
 *   kbox CMD: option --x takes no argument (see kbox CMD --help)
 * (the option named as given); or what a callback returned. */
int cli_parse_options(const char *cmd, const cli_option_t *opts, int argc, char **argv,
                      int *status);

/* EXIT_OK when N is 0; else EXIT_USAGE after
 * "kbox CMD: unexpected argument "X" (see kbox CMD --help)". */
int cli_no_operands(const char *cmd, int n, char **operands);

/* cli_parse_options for a command that takes no operands (cli_no_operands
 * refuses one).  0 to go on, or -1 when the command is done, *STATUS
 * saying how. */
int cli_parse_no_operands(const char *cmd, const cli_option_t *opts, int argc, char **argv,
                          int *status);

/* cli_parse_no_operands for a command whose options are --format (HELP
 * says what each format writes) and -j, --json only, into *FORMAT. */
int cli_parse_format_only(const char *cmd, const char *help, format_t *format, int argc,
                          char **argv, int *status);

/* Free the array of L; L is empty again. */
void cli_strlist_clear(cli_strlist_t *l);
/* Append ARG (borrowed) to L, keeping it NULL-terminated: EXIT_OK, or
 * EXIT_UNAVAILABLE after one line naming CMD when out of memory. */
int cli_strlist_add(const char *cmd, cli_strlist_t *l, const char *arg);

/* The longest duration: 24 days, in milliseconds (below INT_MAX). */
#define CLI_DURATION_MAX_MS (24LL * 86400000)

/* Parse a duration, as every option taking one does (kbox(1), Durations):
 * a number of seconds, which may have a fraction, with an optional unit
 * ms, s, m, h or d ("30", "1.5s", "500ms", "2m", "1h").  Nothing else: no
 * sign, space or exponent.  Milliseconds, a fraction of one rounded up,
 * from 0 to CLI_DURATION_MAX_MS; -1 when S is not one. */
long long cli_parse_duration(const char *s);
/* The same, from 0 to MAX_MS. */
long long cli_parse_duration_max(const char *s, long long max_ms);

/* Callbacks for options; VALUE is a long long * (milliseconds; bytes;
 * lines) or a format_t *.  Every output format is chosen through
 * cli_opt_format: cli_opt_json (--json, no argument) is cli_opt_format
 * with "json".  cli_opt_duration is every duration option's
 * (-t DURATION, --grace DURATION, --ttl DURATION), with one message:
 *   kbox CMD: invalid --OPT "X": expected a duration from 0 to 24d, such as ... */
int cli_opt_duration(const char *cmd, const cli_option_t *opt, const char *arg);
/* The same, from 0 to MAX_MS (whole days), EXAMPLES in its message. */
int cli_opt_duration_max(const char *cmd, const cli_option_t *opt, const char *arg,
                         long long max_ms, const char *examples);
/* The same, from MIN_MS to MAX_MS, RANGE saying so ("1s to 1h"). */
int cli_opt_duration_within(const char *cmd, const cli_option_t *opt, const char *arg,
                            long long min_ms, long long max_ms, const char *range,
                            const char *examples);
int cli_opt_format(const char *cmd, const cli_option_t *opt, const char *arg);
int cli_opt_json(const char *cmd, const cli_option_t *opt, const char *arg);
int cli_opt_max_output(const char *cmd, const cli_option_t *opt, const char *arg);
int cli_opt_max_lines(const char *cmd, const cli_option_t *opt, const char *arg);
/* kbox start's settings of a session (src/cli/cmd_start.c), kbox kernel's
 * too: --env K=V (a cli_strlist_t), --memory, --tmp-size and --file-size
 * (at least 1M, a long long), --cpus (a double), --pids and --output-rate
 * (a long long), --home-config on|off (an int). */
int cli_opt_env(const char *cmd, const cli_option_t *opt, const char *arg);
int cli_opt_size(const char *cmd, const cli_option_t *opt, const char *arg);
int cli_opt_cpus(const char *cmd, const cli_option_t *opt, const char *arg);
int cli_opt_pids(const char *cmd, const cli_option_t *opt, const char *arg);
int cli_opt_output_rate(const char *cmd, const cli_option_t *opt, const char *arg);
int cli_opt_home_config(const char *cmd, const cli_option_t *opt, const char *arg);
/* --input-file FILE: each line of FILE (without its newline) appended to
 * the cli_strlist_t VALUE, as -i LINE would. */
int cli_opt_input_file(const char *cmd, const cli_option_t *opt, const char *arg);
/* Standard input is read once, by the first "-" (code, a cell, an input
 * file): true for that one, false for any later (whose caller says
 * "standard input (-) given more than once"). */
bool cli_take_stdin(void);

/* Print one JSON value (taken) compactly on its own line, flushed. */
/* fflush(stdout), its failure's errno kept for main's report ("cannot
 * write standard output: WHY"). */
void cli_flush_stdout(void);
void cli_print_json_line(json_t *j);

/* Format seconds as "2h03m", "4m10s", "12.3s" into BUF. */
const char *cli_fmt_secs(double s, char *buf, size_t size);

/* ---- sessions (src/cli/session.c) ---- */

/* Refuse the request of E when it is longer than a supervisor takes
 * (kr_ctl_exec_fits): EXIT_OK, or EXIT_USAGE after one line naming CMD
 * that says the limit (EXIT_UNAVAILABLE when out of memory).  Called
 * before a session is started or reached (src/cli/cmd_exec.c). */
int cli_exec_check_size(const char *cmd, const kr_ctl_exec_t *e);

/* GIVEN, else $KBOX_SESSION, else "default". */
const char *cli_session_name(const char *given);
/* --type-check (src/cli/type_check.c): CODE's calls of the host functions
 * of DOC checked with mypy against their stubs, its cache in the
 * directory CACHE (made when missing).  EXIT_OK with *REPORT NULL when
 * mypy found nothing (or cannot read the code: the kernel will say what is
 * wrong with it); EXIT_OK with *REPORT (new), what a model reads: that
 * the code was not run, and each error with its line; else an exit status
 * after one line naming CMD (no functions, no mypy). */
int cli_type_check(const char *cmd, const json_t *doc, const char *code, const char *cache,
                   char **report);
/* (cli_set_new_session_functions's) */
json_t *cli_new_session_functions(void);
/* What a session gets when no --backend or --image is given: when IS_NEW
 * (a new session, or kbox run), *BACKEND, when NULL, $KBOX_BACKEND's
 * (when set and not empty), then *IMAGE, when NULL and the backend is
 * docker, $KBOX_IMAGE_NAME's; a stored session keeps its own.  A backend
 * that does not exist, given or from the environment, or an image that
 * is no image reference, from the environment: EXIT_USAGE after one line;
 * else EXIT_OK. */
int cli_session_defaults(const char *cmd, bool is_new, const char **backend, const char **image);
/* EXIT_OK, or EXIT_USAGE with one line printed when NAME is not valid. */
int cli_check_session(const char *cmd, const char *name);
/* Can CONFIG's backend run here?  For bwrap: installed, and able to make
 * its sandbox (a probe).  With WARN (a session's first start: once a
 * session) warns, in one line, about limits it cannot enforce.  EXIT_OK,
 * or EXIT_UNAVAILABLE after one error line. */
int cli_check_backend(const char *cmd, const kr_session_config_t *config, bool warn);
/* EXIT_OK, or EXIT_USAGE after one line naming CMD when the session NAME
 * in DIR is a Jupyter front end's kernel (kbox kernel): its workspace is
 * the front end's directory, not the session's. */
int cli_not_front_end(const char *cmd, const char *dir, const char *name);
/* Whether the session in DIR runs its kernel on a Jupyter server
 * (backend gateway): its files are the server's. */
bool cli_session_remote(const char *dir);
/* The exit status of a failed file call of a gateway session's (ERR):
 * EXIT_USAGE for what the user can change (no such file, no contents
 * API), else EXIT_UNAVAILABLE. */
int cli_remote_status(const kbox_error_t *err);
/* Remove a new session's directory DIR, if it holds only the empty
 * directories (and lock) a session starts with and the session.json this
 * start saved: a start that failed before a supervisor ran leaves nothing
 * behind.  Never removes anything else (a supervisor's log stays). */
void cli_session_forget(const char *dir);
/* The session's directory (malloc'd), created with CREATE.  NULL with one
 * line printed and *STATUS set. */
char *cli_session_dir(const char *cmd, const char *name, bool create, int *status);
/* The directory of a session whose supervisor runs, or NULL (printed, *STATUS set). */
char *cli_running_session(const char *cmd, const char *name, int *status);
/* Start the supervisor of DIR unless one runs (under a lock, so concurrent
 * starts make one).  CONFIG (borrowed; NULL keeps session.json) is saved
 * first.  Without CONFIG, a new session's owner is OWNER when it is not 0:
 * the session stops when that process ends (kbox mcp's own).  *STARTED
 * (may be NULL) tells whether this call started it; without it, a new
 * session is told of on standard error (a caller with it tells of it
 * itself, or not).  An exit status: EXIT_TIMEOUT after one line when a
 * SIGINT or SIGTERM (whose action was the default) came while the
 * supervisor started: the start is given up, the supervisor stopped, a
 * new session removed.  *SUP_PID (may be NULL) is the pid of the
 * supervisor this call started (the one it spawned, not what a pid file
 * says), or 0. */
int cli_session_start(const char *cmd, const char *dir, const char *name,
                      const kr_session_config_t *config, pid_t owner, bool *started,
                      pid_t *sup_pid);
/* Connect to the supervisor of the session in DIR (NAME for messages),
 * starting the session unless NO_START (src/cli/cmd_exec.c).  The
 * connection, or -1 with one line printed and *STATUS set. */
int cli_session_connect(const char *cmd, const char *dir, const char *name, bool no_start,
                        int *status);
/* Stop the session in DIR (NAME for messages), when it runs, within
 * WAIT_MS, and remove it: a session a front end made for itself and is
 * done with.  0, or -1 after one line. */
int cli_session_discard(const char *cmd, const char *dir, const char *name, int wait_ms);
/* A program of kbox's, PROG (WHAT it is, for the message): beside this
 * program in a build tree, where it was installed (pkglibexecdir), or in
 * ../libexec/kbox/ relative to this program (a moved prefix), into PATH.
 * 0, or -1 after "kbox CMD: cannot find the WHAT PROG (tried ...): is
 * kbox installed whole?". */
int cli_find_program(const char *cmd, const char *prog, const char *what, char *path, size_t size);
/* Run kbox-engine ARGS... (found as cli_find_program finds it, for CMD)
 * and parse its one line of output into *OUT (new; the caller frees it,
 * also after a failure, when it is set).  0, or -1 with WHY: the helper's
 * {"error": ...} (its message; *OUT holds it, with its kind), or why it
 * said nothing (src/cli/engine.c). */
int cli_engine_call(const char *cmd, char *const *args, json_t **out, char *why, size_t size);
/* IMAGE as --image of CMD: a reference docker takes.  EXIT_OK, or
 * EXIT_USAGE after one line (src/cli/session.c). */
int cli_check_image(const char *cmd, const char *image);
/* The docker backend's settings for CMD (kbox start, kbox run): --image
 * only with it, a name docker takes; the engine from DOCKER_HOST when it
 * is set (kept in session.json, so that a restart finds the same engine),
 * a unix socket of this machine's (the kernel's sockets are files here).
 * The configuration merged (CONFIG) gets the engine.  EXIT_OK, or
 * EXIT_USAGE after one line (src/cli/session.c). */
int cli_check_docker(const char *cmd, kr_session_opts_t *o, kr_session_config_t *config);
/* kbox doctor's supervisor check: run the supervisor program a session
 * would get (cli_find_program) as "kbox-supervisor --version", which loads
 * libkbox.so as a session's does.  NULL when it runs, with DETAIL its
 * version and path; else what that means for kbox (a static string), with
 * DETAIL why: not found (the paths tried), or its status and the first
 * line it printed (e.g. the loader's "error while loading shared
 * libraries: libkbox.so.0: ..."). */
const char *cli_supervisor_check(char *detail, size_t size);
/* kbox complete / kbox inspect (src/cli/introspect.c). */
int cli_introspect(const char *cmd, int argc, char **argv);
/* What a control command says of session NAME's REPLY (borrowed). */
typedef void cli_control_say_t(const char *name, const json_t *reply);
/* kbox restart / interrupt: parse -s, send OP, and have SAY tell of the
 * reply (src/cli/control.c).  An exit status (EXIT_OK after --help). */
int cli_control(const char *cmd, int argc, char **argv, kr_ctl_op_t op, int timeout_ms,
                cli_control_say_t *say);

/* How long to wait for a new kernel of the session in DIR: BASE_MS, or
 * as long as its start waits (its launch timeout and 30 s; a gateway
 * session's, and 90 s), when that is longer. */
int cli_kernel_wait_ms(const char *dir, int base_ms);
/* One session as JSON (src/cli/cmd_ls.c). */
json_t *cli_session_info(const char *home, const char *name);
/* Copy the host file open on IN (HOST its name) into the workspace of the
 * session in DIR as DEST (checked with ws_check_path already), as
 * ws_put does (src/runtime/workspace.h), for kbox put and kbox agent
 * --file (src/cli/cmd_put.c).  IN is not closed.  An exit status, after
 * one line when not EXIT_OK: EXIT_USAGE when DEST is refused. */
int cli_put(const char *cmd, const char *dir, int in, const char *host, const char *dest);

/* ---- running code through a supervisor (src/cli/cmd_exec.c) ---- */

/* The format of an execute request for the output format F: text is
 * text-live when standard output is a terminal (the stream is shown as it
 * comes). */
kr_ctl_format_t cli_exec_format(format_t f);

/* The edit distance of A and B (two letters swapped count as one); at
 * most 32 bytes each, longer: 99. */
size_t cli_distance(const char *a, const char *b);
/* The command someone who typed NAME most likely meant (another tool's
 * word for one of ours, else the nearest within two edits), or NULL. */
const char *cli_nearest_command(const char *name);

/* ---- signals that would end kbox while it holds a temporary file ---- */

#define CLI_FATAL_SIGNALS 4 /* SIGHUP, SIGINT, SIGQUIT, SIGTERM */
typedef struct {
	struct sigaction old[CLI_FATAL_SIGNALS + 1]; /* + SIGXFSZ */
} cli_signal_guard_t;
/* Until cli_unguard_signals: a signal that would end kbox runs CLEANUP
 * (async-signal-safe: an unlinkat) and then ends it as it would have (an
 * ignored one stays ignored); SIGXFSZ is ignored, so that a file-size
 * limit is an error (EFBIG), not a death.  G keeps what was there. */
void cli_guard_signals(cli_signal_guard_t *g, void (*cleanup)(void));
void cli_unguard_signals(const cli_signal_guard_t *g);

/* What an execution came to. */
typedef struct {
	int status;         /* an exit status (EXIT_*) */
	size_t inputs_used; /* input lines the code read */
	char reason[512];   /* for timeout and death: why, from the result */
	/* in, NULL or set before the call (kbox run's): what the text's last
	 * line says of the state after an interrupt, timeout or death is
	 * replaced by "; STOPS]", as a run goes no further */
	const char *stops;
	/* in: a request no supervisor took (it ended as the connection was
	 * made) is not an error but RESENT, set true, with nothing printed:
	 * the caller sends it again, on a new connection (kbox exec's) */
	bool may_resend;
	bool resend; /* out */
} cli_exec_result_t;

/* Run REQ (kbox exec's, kbox run's) on the session whose supervisor FD is
 * connected to (NAME for messages): REQ->outputs is opened here (or
 * OUTPUTS_FD, when not -1, is that directory held open) and passed with
 * the request; the started line's notice and earlier output and the
 * events are printed as they come (text-live, ndjson), then the result as
 * REQ->format says; R is filled.  Waiting for a turn, timeouts, deaths:
 * all the supervisor's.  A SIGINT or SIGTERM while it waits interrupts
 * the code (the interrupt op, on the session in DIR) and the result is
 * printed as it comes; a second one ends the process as the signal
 * would have.  CMD names the command for messages.  Returns
 * R->status; R->stops and R->may_resend are read, not cleared. */
int cli_exec_on(const char *cmd, int fd, const char *dir, const char *name,
                const kr_ctl_exec_t *req, int outputs_fd, cli_exec_result_t *r);

/* ---- the run-code tool (src/cli/cmd_tool_schema.c) ---- */

#define CLI_TOOL_NAME "run_python"
/* What a model reads about the tool: how to use it well (static). */
const char *cli_tool_description(void);
/* The tool as an element of OpenAI's Chat Completions "tools" (new
 * reference), or NULL when out of memory; MORE (or NULL) is added to its
 * description (cli_functions_description). */
json_t *cli_tool_openai(const char *more);
/* What run_python's description says of the host functions of DOC (a
 * functions file as read): how to call them, and their Python stubs.
 * New (free), or NULL when DOC has none. */
char *cli_functions_description(const json_t *doc);
/* The options that give host functions (kbox-functions(5)). */
typedef struct {
	const char *file;       /* --functions FILE, or NULL */
	cli_strlist_t from_mcp; /* --functions-from-mcp COMMAND... */
	cli_strlist_t allow;    /* --functions-allow TOOL... */
} cli_functions_opts_t;
#define CLI_OPT_FUNCTIONS(fo, whose)                                                            \
	CLI_OPT_STRING(0, "functions", "FILE", &(fo)->file,                                     \
	               "give " whose " the host functions of FILE, a functions file (see "      \
	               "kbox-functions(5))"),                                                   \
	        CLI_OPT_LIST(0, "functions-from-mcp", "COMMAND", &(fo)->from_mcp,               \
	                     "give " whose " the read-only tools of the MCP server COMMAND (a " \
	                     "command line, split as a shell does) as host functions; "         \
	                     "repeatable"),                                                     \
	        CLI_OPT_LIST(0, "functions-allow", "TOOL", &(fo)->allow,                        \
	                     "with --functions-from-mcp, take its tool TOOL too, though not "   \
	                     "marked read-only; repeatable")
/* Whether FO gives any host function. */
bool cli_functions_given(const cli_functions_opts_t *fo);
void cli_functions_opts_clear(cli_functions_opts_t *fo);
/* The host functions a command uses: those FO gives (read, each MCP
 * server's tools listed: into *DOC, new: json_decref; what was left out
 * said on standard error), else those of the existing session NAME (when
 * not NULL), else none.  EXIT_OK, or EXIT_USAGE after one line naming
 * CMD when they cannot be used. */
int cli_functions_for(const char *cmd, const cli_functions_opts_t *fo, const char *name,
                      json_t **doc);
/* The host functions of the sessions this process starts for its code
 * (kbox mcp, kbox agent --functions): DOC is borrowed, NULL for none. */
void cli_set_new_session_functions(json_t *doc);

/* Read all of F, at most KR_CTL_CODE_MAX bytes (16 MiB: no request may
 * hold more).  NULL with errno: EFBIG when F holds more, EILSEQ when it
 * holds a NUL byte. */
char *cli_slurp(FILE *f);
/* What cli_slurp's errno E means: EILSEQ is a NUL byte in the code, EFBIG
 * more than KR_CTL_CODE_MAX bytes (the text says the limit). */
const char *cli_slurp_strerror(int e);
/* The code in PATH ("-": standard input, which the caller has taken with
 * cli_take_stdin) as by cli_slurp (new), or NULL after one line naming CMD,
 * the file and why. */
char *cli_read_code(const char *cmd, const char *path);

int cmd_agent(int argc, char **argv);
int cmd_complete(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_interrupt(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_put(int argc, char **argv);
int cmd_restart(int argc, char **argv);
int cmd_start(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_stop(int argc, char **argv);
/* Whether the command CMD takes code as its operand (exec, run, inspect,
 * complete); whether it takes a session as -s NAME. */
bool cli_takes_code(const char *cmd);
bool cli_takes_session(const char *cmd);

/* Is OPERAND the name of a session of the state directory?  (For "did you
 * mean -s OPERAND?") */
bool cli_operand_is_session(const char *operand);

/* Say that OPERAND, given as CMD's first operand, is a session's name:
 * "did you mean -s OPERAND?", with the command as it would read (REST,
 * the operands after it).  EXIT_USAGE. */
int cli_session_operand_hint(const char *cmd, const char *operand, const char *rest);
/* The members of a session's status in the order kbox status and ls give
 * them (NULL-terminated). */
extern const char *const cli_session_keys[];
int cmd_rm(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_kernel(int argc, char **argv);
int cmd_kernelspec(int argc, char **argv);
/* Check kbox kernel's options ARGV (ARGV[0] is "kernel"; no
 * --connection-file, -s, -b: BACKEND is the kernelspec's, NULL when not
 * given) as kbox kernel would read them; *KERNEL gets -k's
 * value (NULL when not given).  EXIT_OK, or an exit status after one
 * line (src/cli/cmd_kernel.c: kbox kernelspec install's check). */
int cli_kernel_check_options(int argc, char **argv, const char *backend, const char **kernel);
int cmd_kernelspecs(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_tool_schema(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
/* What an MCP tool result of run_python carries as "structuredContent"
 * (kbox-mcp(1), --structured): nothing, so that every client shows its
 * model the content (the text and the images); the text beside a small
 * summary; or the whole result, kbox.result/2. */
typedef enum {
	CLI_STRUCTURED_NONE,
	CLI_STRUCTURED_TEXT,
	CLI_STRUCTURED_FULL,
} cli_structured_t;
/* --structured none|text|full, into the cli_structured_t at OPT->value. */
int cli_opt_structured(const char *cmd, const cli_option_t *opt, const char *arg);
/* The run_python tool as MCP's tools/list gives it: name, title,
 * description, inputSchema and, unless MODE is CLI_STRUCTURED_NONE, the
 * outputSchema of MODE's structured content (src/cli/cmd_tool_schema.c);
 * with IMAGES_INLINE, a description that says charts are shown as images
 * too (kbox mcp --images inline); MORE (or NULL) added to the description
 * (cli_functions_description).  New reference, or NULL when out of
 * memory. */
json_t *cli_mcp_run_tool(cli_structured_t mode, bool images_inline, const char *more);
/* The JSON Schema of kbox mcp's "session" argument, a handle new_session
 * returned (new reference). */
json_t *cli_mcp_session_arg(void);
int cmd_doctor(int argc, char **argv);
int cmd_image(int argc, char **argv);

#endif
