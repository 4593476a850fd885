/* src/cli/main.c — kbox(1): dispatch to one command per file.  A session's
 * supervisor is another program, kbox-supervisor (src/runtime/supervisor_main.c). */
#include "config.h"
#include "cli.h"
#include "runtime/workspace.h"

#include <kbox/capture.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits.h>
#ifdef KBOX_SANITIZED
#include <sanitizer/lsan_interface.h>
#endif

/* Sorted by name.  Each command's options are in its own file. */
static const cli_cmd_t commands[] = {
        {"agent", cmd_agent,
         "kbox agent [-s NAME] [-m MODEL] [--base-url URL] [--file HOSTPATH]... [--max-steps N] "
         "[--reset] [-t DURATION] [--format text|json] [--functions FILE] [--functions-from-mcp COMMAND]... [--functions-allow TOOL]... [--type-check] (QUESTION | -)",
         "answer a question with a language model that runs Python in a session",
         "kbox agent -s sales --file sales.csv 'Which region sold the most units?'"},
        {"complete", cmd_complete,
         "kbox complete [-s NAME] [--cursor N] [--format FMT] [--max-output BYTES] CODE | -",
         "the completions of code at a cursor", "kbox complete -s sales 'df.des'"},
        {"doctor", cmd_doctor,
         "kbox doctor [-k SPEC] [--rootfs DIR] [--format FMT] [--fix]\n"
         "       kbox doctor --backend docker [--image NAME] [--format FMT]",
         "check what isolation the sandbox gives kernels on this machine",
         "kbox doctor --format json"},
        {"exec", cmd_exec,
         "kbox exec [-s NAME] [-t DURATION] [--grace DURATION] [--format text|json|ndjson] "
         "[--outputs DIR] [--max-output BYTES] [--max-lines N] [-i LINE]... [--input-file FILE]... "
         "[-e NAME=VALUE]... [--type-check] [--no-start] "
         "(CODE | -f FILE | -)",
         "run code in a session's kernel (starting the session if needed)",
         "kbox exec -s sales -t 30 'df.describe()'"},
        {"get", cmd_get, "kbox get [-s NAME] SRC [HOSTPATH | -]",
         "copy a file out of a session's workspace", "kbox get -s sales report.csv ./report.csv"},
        {"help", cmd_help, "kbox help [COMMAND]", "show the options of a command",
         "kbox help exec"},
        {"image", cmd_image,
         "kbox image build [--name NAME] [--packages LIST] [--requirements FILE [--index-url URL]] "
         "[--mirror URL] [--rootfs DIR]\n       kbox image ls [--format FMT]\n       kbox image rm NAME...",
         "build, list and remove the kernel images of the docker backend",
         "kbox image build --packages python3-sklearn"},
        {"inspect", cmd_inspect,
         "kbox inspect [-s NAME] [--cursor N] [--detail 0|1] [--format FMT] [--max-output BYTES] "
         "CODE | -",
         "what the kernel knows about the name at a cursor (its documentation)",
         "kbox inspect -s sales --detail 1 'df.merge'"},
        {"interrupt", cmd_interrupt, "kbox interrupt [-s NAME]",
         "interrupt what a session's kernel is running", "kbox interrupt -s sales"},
        {"kernel", cmd_kernel,
         "kbox kernel --connection-file FILE [-s NAME] [-k SPEC] [-b bwrap|docker|none] "
         "[--image NAME] "
         "[--workspace cwd|ro|empty] [--memory SIZE] [--cpus N] [--pids N] [--tmp-size SIZE] "
         "[--file-size SIZE] [--functions FILE] [--functions-from-mcp COMMAND]... "
         "[--functions-allow TOOL]... [-e K=V]... [--home-config on|off]",
         "run a sandboxed kernel for a Jupyter front end (a kernelspec's command)",
         "kbox kernel --connection-file kernel-1234.json"},
        {"kernelspec", cmd_kernelspec,
         "kbox kernelspec install [--user | --prefix DIR] [--name NAME] [--display-name TEXT] "
         "[-b B] [--interrupt-mode signal|message] [-- KERNEL-OPTIONS]",
         "install a kernelspec that runs kbox kernel, for Jupyter front ends",
         "kbox kernelspec install --user -b docker"},
        {"kernelspecs", cmd_kernelspecs, "kbox kernelspecs [-s NAME] [--format FMT]",
         "list the kernelspecs found and where", "kbox kernelspecs --format json"},
        {"logs", cmd_logs, "kbox logs [-s NAME] [-f] [--format FMT]", "show a session's event log",
         "kbox logs -s sales -f"},
        {"ls", cmd_ls, "kbox ls [--format FMT]", "list sessions and their state",
         "kbox ls --format json"},
        {"mcp", cmd_mcp,
         "kbox mcp [-s NAME] [--images path|inline] [--structured none|text|full] "
         "[--soft-timeout DURATION] [--files-timeout DURATION] [-t DURATION] [--max-sessions N] [--functions FILE] [--functions-from-mcp COMMAND]... [--functions-allow TOOL]... "
         "[--type-check] [--http ADDR:PORT|unix:PATH] "
         "[--token-file FILE] [--conversation-idle DURATION]",
         "serve a Model Context Protocol client, on standard input and output or over "
         "HTTP",
         "kbox mcp --images inline"},
        {"prune", cmd_prune, "kbox prune [--dry-run] [--older-than DURATION]",
         "remove every session that is not running (and, with --older-than, old outputs)",
         "kbox prune --dry-run"},
        {"put", cmd_put, "kbox put [-s NAME] HOSTPATH|- [DEST]",
         "copy a host file (or standard input) into a session's workspace",
         "kbox put -s sales ~/data/sales.csv sales.csv"},
        {"restart", cmd_restart, "kbox restart [-s NAME]",
         "replace a session's kernel with a new one (state is lost)", "kbox restart -s sales"},
        {"rm", cmd_rm, "kbox rm [-f] [-s NAME | NAME...]",
         "remove sessions, their workspaces included", "kbox rm -f sales"},
        {"run", cmd_run,
         "kbox run [-k NAME] [--workspace DIR] [--put FILE]... [--backend bwrap|docker|none] "
         "[--image NAME] [--functions FILE] [--functions-from-mcp COMMAND]... [--functions-allow TOOL]... [-t DURATION] "
         "[-o DIR] [-i LINE]... [--input-file FILE]... "
         "[--format FMT] [--max-output BYTES] [--max-lines N] [-c CODE]... [FILE | -]...",
         "run cells in one fresh sandboxed kernel, without a session",
         "kbox run -t 60 -c 'import pandas as pd' analysis.py"},
        {"start", cmd_start,
         "kbox start [-s NAME] [-k SPEC] [--backend B] [--ttl DURATION] [--memory SIZE] [--cpus N] "
         "[--pids N] [--tmp-size SIZE] [--file-size SIZE] [--rootfs DIR] [--image NAME] [--url URL] [--token-file FILE | --token-env VAR] [--ca-file FILE] [--launch-timeout DURATION] [--functions FILE] [--functions-from-mcp COMMAND]... [--functions-allow TOOL]... [--outputs-quota SIZE] [--output-rate N] [--home-config on|off] [--reseal] [-e K=V]...",
         "start a session: a supervisor and its kernel",
         "kbox start -s sales --memory 4G --ttl 2h"},
        {"status", cmd_status, "kbox status [-s NAME] [--format FMT]", "show one session in detail",
         "kbox status -s sales --format json"},
        {"stop", cmd_stop, "kbox stop [-s NAME | --all]",
         "stop a session's kernel and supervisor (its files stay)", "kbox stop --all"},
        {"tool-schema", cmd_tool_schema,
         "kbox tool-schema [--format openai|anthropic|mcp] [--structured none|text|full] "
         "[--functions FILE] [--functions-from-mcp COMMAND]... [--functions-allow TOOL]...",
         "print the run-code tool's definition for a model's API",
         "kbox tool-schema --format anthropic"},
        {"version", cmd_version, "kbox version [--format FMT]", "print the version",
         "kbox version"},
};

const cli_cmd_t *cli_commands(size_t *n)
{
	*n = sizeof commands / sizeof commands[0];
	return commands;
}

const cli_cmd_t *cli_find(const char *name)
{
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/* The edit distance of A and B, two letters swapped counting as one edit
 * (optimal string alignment: "stauts" is one from "status", two from
 * "start"); at most 32 bytes each, longer: a lot. */
size_t cli_distance(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b), d[33][33];
	if (na > 32 || nb > 32)
		return 99;
	for (size_t i = 0; i <= na; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= nb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= na; i++)
		for (size_t j = 1; j <= nb; j++) {
			size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[na][nb];
}

/* The command someone who typed NAME most likely meant: another tool's
 * word for one of ours (docker ps, jupyter's list), else the nearest name
 * within two edits (one for a short name).  NULL when none is near. */
const char *cli_nearest_command(const char *name)
{
	static const struct {
		const char *said, *meant;
	} others[] = {{"ps", "ls"},        {"list", "ls"},      {"remove", "rm"},
	              {"delete", "rm"},    {"kill", "stop"},    {"shutdown", "stop"},
	              {"execute", "exec"}, {"cp", "get"},       {"upload", "put"},
	              {"download", "get"}, {"system", "prune"}, {"log", "logs"}};
	const char *best = NULL;
	size_t best_d = 99, n = sizeof commands / sizeof commands[0];

	for (size_t i = 0; i < sizeof others / sizeof *others; i++)
		if (strcmp(name, others[i].said) == 0)
			return others[i].meant;
	for (size_t i = 0; i < n; i++) {
		size_t d = cli_distance(name, commands[i].name);
		if (d < best_d) {
			best_d = d;
			best = commands[i].name;
		}
	}
	/* two edits only of a word that begins as the command does ("exce",
	 * not "bogus" for logs) */
	return best_d <= 1 || (best_d == 2 && strlen(name) > 3 && best[0] == name[0]) ? best : NULL;
}

static format_t error_format = FMT_TEXT;
static char first_error[1024], last_error[1024];
static bool printed_json;

void cli_set_error_format(format_t format)
{
	error_format = format;
}

/* A path this long or longer is shortened in a message to a person. */
#define PATH_SHOWN_MAX 72

/* MSG with each long absolute path that the message names again later
 * shortened in the middle where it comes first ("/home/ada/…/sessions/x"),
 * so that the reason stands out; the later one, in the fix (a chmod, a
 * command to run), stays whole, to be copied.  In place. */
static void shorten_paths(char *msg)
{
	char *p = msg;
	while ((p = strchr(p, '/'))) {
		size_t n = strcspn(p, " ,;:()'\"\n");
		char *later;
		if ((p == msg || p[-1] == ' ' || p[-1] == '(' || p[-1] == '"') &&
		    n >= PATH_SHOWN_MAX) {
			char save = p[n];
			p[n] = '\0'; /* the path alone, looked for in what follows it */
			later = save ? strstr(p + n + 1, p) : NULL;
			p[n] = save;
			if (later) {
				/* keep 28 bytes of the start and 36 of the end */
				static const char dots[] = "\xe2\x80\xa6"; /* U+2026 */
				size_t cut = n - 28 - 36;
				memcpy(p + 28, dots, 3);
				memmove(p + 31, p + 28 + cut, strlen(p + 28 + cut) + 1);
				n = 28 + 3 + 36;
			}
		}
		p += n ? n : 1;
	}
}

/* cli_guard_signals's. */
static void (*guard_cleanup)(void);
static const int fatal_signals[CLI_FATAL_SIGNALS] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM};

static void on_fatal_signal(int sig)
{
	if (guard_cleanup)
		guard_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

void cli_guard_signals(cli_signal_guard_t *g, void (*cleanup)(void))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	guard_cleanup = cleanup;
	for (size_t i = 0; i < CLI_FATAL_SIGNALS; i++) {
		sa.sa_handler = on_fatal_signal;
		sigaction(fatal_signals[i], NULL, &g->old[i]);
		if (g->old[i].sa_handler != SIG_IGN)
			sigaction(fatal_signals[i], &sa, NULL);
	}
	sa.sa_handler = SIG_IGN;
	sigaction(SIGXFSZ, &sa, &g->old[CLI_FATAL_SIGNALS]);
}

void cli_unguard_signals(const cli_signal_guard_t *g)
{
	for (size_t i = 0; i < CLI_FATAL_SIGNALS; i++)
		sigaction(fatal_signals[i], &g->old[i], NULL);
	sigaction(SIGXFSZ, &g->old[CLI_FATAL_SIGNALS], NULL);
	guard_cleanup = NULL;
}

void cli_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	char small[1024], *msg = small;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		small[0] = '\0';
	else if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1))) {
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	if (!msg)
		msg = small;
	/* what the message quotes (a path, an API's words) may hold control
	 * or bidi characters: shown, not obeyed (a message of several lines,
	 * such as a kernel's last lines, keeps its newlines) */
	shorten_paths(msg);
	fprintf(stderr, "kbox%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	cli_write_safe(stderr, msg, strlen(msg));
	fputc('\n', stderr);
	if (msg != small)
		free(msg);
	/* a warning is no failure: what -j's failure object (and a server's
	 * error) says is the error that follows it */
	if (strncmp(fmt, "warning: ", 9) == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
	if (!first_error[0])
		memcpy(first_error, last_error, sizeof first_error);
}

const char *cli_first_error(void)
{
	return first_error;
}

const char *cli_last_error(void)
{
	return last_error;
}

void cli_forget_last_error(void)
{
	last_error[0] = '\0';
}

void cli_json_printed(void)
{
	printed_json = true;
}

const char *cli_error_kind(int status)
{
	return status == EXIT_USAGE         ? "usage"
	       : status == EXIT_UNAVAILABLE ? "unavailable"
	       : status == EXIT_BUSY        ? "busy"
	                                    : "failed";
}

void cli_print_failure(int status)
{
	const char *kind;
	json_t *msg;

	if (status == EXIT_OK || error_format == FMT_TEXT || printed_json || !first_error[0])
		return;
	kind = cli_error_kind(status);
	/* the message as UTF-8, whatever bytes a path in it had */
	msg = json_string(first_error);
	if (!msg) {
		for (char *p = first_error; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		msg = json_string(first_error);
	}
	cli_print_json_line(json_pack("{s:s, s:s, s:{s:s, s:o}}", "schema", CLI_RESULT_SCHEMA,
	                              "status", status == EXIT_BUSY ? "busy" : "failed", "error",
	                              "kind", kind, "message", msg ? msg : json_string("")));
}

long long cli_parse_size(const char *s)
{
	unsigned long long v = 0, frac = 0, scale = 1;
	const char *p = s;
	int shift = 0;

	if (!s || !*s)
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > (1ULL << 40))
			return -1;
	}
	if (p == s)
		return -1;
	if (*p == '.') { /* 1.5G: a fraction, up to 6 digits, of a unit */
		const char *f = ++p;
		for (; *p >= '0' && *p <= '9'; p++)
			if (p - f < 6) {
				frac = frac * 10 + (unsigned)(*p - '0');
				scale *= 10;
			}
		if (p == f)
			return -1;
	}
	switch (*p) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		p++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		p++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		p++;
		break;
	case 't':
	case 'T':
		shift = 40;
		p++;
		break;
	default:
		return -1;
	}
	if (*p == 'i' && shift) /* KiB, MiB */
		p++;
	if ((*p == 'b' || *p == 'B') && shift)
		p++;
	if (*p || (scale > 1 && !shift) || (shift == 40 && v > (1ULL << 20)))
		return -1;
	return (long long)((v << shift) + (frac << shift) / scale);
}

#define MAX_CELL_BYTES ((size_t)KR_CTL_CODE_MAX)

/* Whether CODE, read from a file, is a Jupyter notebook: a JSON object
 * with "cells" and "nbformat" (newcomer 12, F6: kbox run ran its JSON as
 * Python, "NameError: name 'null' is not defined"). */
static bool is_notebook(const char *code)
{
	json_t *j;
	bool yes;
	code += strspn(code, " \t\r\n");
	if (*code != '{')
		return false;
	j = json_loads(code, 0, NULL);
	yes = json_is_object(j) && json_is_array(json_object_get(j, "cells")) &&
	      json_is_integer(json_object_get(j, "nbformat"));
	json_decref(j);
	return yes;
}

char *cli_read_code(const char *cmd, const char *path)
{
	bool is_stdin = strcmp(path, "-") == 0;
	FILE *f = is_stdin ? stdin : fopen(path, "r");
	char *code = f ? cli_slurp(f) : NULL;
	int e = errno;
	if (!code && e == ENOENT && strpbrk(path, " ()=;'\"\n"))
		/* no file of that name, and a name that reads as code */
		cli_error(cmd, "cannot read %s: %s: code given as text goes %s", path, strerror(e),
		          strcmp(cmd, "run") == 0 ? "after -c (kbox run -c 'CODE')"
		                                  : "as the operand (kbox exec 'CODE')");
	else if (!code)
		cli_error(cmd, "cannot read %s: %s", is_stdin ? "standard input" : path,
		          cli_slurp_strerror(e));
	if (f && !is_stdin)
		fclose(f);
	if (code && is_notebook(code)) {
		cli_error(
		        cmd,
		        "%s is a Jupyter notebook: kbox %s runs code, not the JSON of a notebook; "
		        "make a script of it first (jupyter nbconvert --to script %s)",
		        is_stdin ? "standard input" : path, cmd, is_stdin ? "NOTEBOOK" : path);
		free(code);
		return NULL;
	}
	return code;
}

const char *cli_slurp_strerror(int e)
{
	return e == EILSEQ  ? "it holds a NUL byte (code is text)"
	       : e == EFBIG ? "longer than 16 MiB (16777216 bytes), the most kbox sends the "
	                      "kernel at once"
	                    : strerror(e);
}

_Static_assert(KR_CTL_CODE_MAX == 16777216, "cli_slurp_strerror says 16 MiB");

char *cli_slurp(FILE *f)
{
	size_t cap = 4096, n = 0;
	char *buf;
	struct stat st;
	/* a directory reads as an error (EISDIR), said as such */
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		return NULL;
	}
	buf = malloc(cap);
	while (buf) {
		size_t r;
		if (n + 1 >= cap) {
			/* room for one byte beyond the limit (which tells a file of
			 * exactly KR_CTL_CODE_MAX bytes from a longer one) and the NUL */
			size_t ncap = cap * 2 < (size_t)MAX_CELL_BYTES + 2
			                      ? cap * 2
			                      : (size_t)MAX_CELL_BYTES + 2;
			char *nb;
			if (n > (size_t)MAX_CELL_BYTES) {
				free(buf);
				errno = EFBIG;
				return NULL;
			}
			nb = realloc(buf, ncap);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap = ncap;
		}
		errno = 0;
		r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
		/* (at its end, not read again: a terminal's ^D ends it once, and
		 * glibc's fread of a large count reads past an end it saw) */
		if (r == 0 || feof(f)) {
			if (ferror(f)) {
				int e = errno ? errno : EIO;
				free(buf);
				errno = e;
				return NULL;
			}
			buf[n] = '\0';
			if (memchr(buf, '\0', n)) { /* code is text: it would be cut there */
				free(buf);
				errno = EILSEQ;
				return NULL;
			}
			return buf;
		}
	}
	return NULL;
}

int cli_parse_format(const char *cmd, const char *arg, format_t *out)
{
	if (strcmp(arg, "text") == 0)
		*out = FMT_TEXT;
	else if (strcmp(arg, "json") == 0)
		*out = FMT_JSON;
	else if (strcmp(arg, "ndjson") == 0)
		*out = FMT_NDJSON;
	else {
		cli_error(cmd, "invalid --format \"%s\": expected text, json or ndjson", arg);
		return -1;
	}
	return 0;
}

int cli_outputs_dir(const char *cmd, const char *path, char *out)
{
	struct stat st;
	const char *why = NULL;
	if (lstat(path, &st) < 0)
		why = strerror(errno);
	else if (S_ISLNK(st.st_mode))
		why = "it is a symbolic link";
	else if (!S_ISDIR(st.st_mode))
		why = strerror(ENOTDIR);
	else if (access(path, W_OK | X_OK) < 0 || !realpath(path, out))
		why = strerror(errno);
	if (why) {
		cli_error(cmd, "--outputs %s: %s", path, why);
		return EXIT_USAGE;
	}
	{
		/* never where a sandbox will have it, whether it runs now or
		 * not: a session's workspace (ws_live.h says of those that run) */
		kbox_error_t err = {0};
		if (ws_in_state_dir(out, "outputs directory", &err) < 0) {
			cli_error(cmd, "--outputs %s: %s", path, err.msg);
			return EXIT_USAGE;
		}
	}
	return EXIT_OK;
}

int cli_parse_max_output(const char *cmd, const char *arg, long long *out)
{
	if ((*out = cli_parse_size(arg)) < 64 || *out > KBOX_CAPTURE_MAX_BYTES_LIMIT) {
		cli_error(cmd,
		          "invalid --max-output \"%s\": expected a size from 64 bytes to 16M "
		          "(e.g. 20000, 16K, 1M)",
		          arg);
		return -1;
	}
	return 0;
}

int cli_parse_max_lines(const char *cmd, const char *arg, long long *out)
{
	bool digits = *arg && strspn(arg, "0123456789") == strlen(arg);
	/* a text holds no more lines than --max-output's most bytes: a larger
	 * number (past what fits in 64 bits too) is that many */
	*out = digits ? cli_parse_size(arg) : -1;
	if (digits && (*out < 0 || *out > (long long)KBOX_CAPTURE_MAX_BYTES_LIMIT) &&
	    strspn(arg, "0") < strlen(arg))
		*out = (long long)KBOX_CAPTURE_MAX_BYTES_LIMIT;
	if (*out < 2) {
		cli_error(cmd,
		          "invalid --max-lines \"%s\": expected a whole number of at least 2 "
		          "(e.g. 200)",
		          arg);
		return -1;
	}
	return 0;
}

/* Why a write to standard output failed (cli_flush_stdout; 0: none did). */
static int stdout_errno;

void cli_flush_stdout(void)
{
	if (fflush(stdout) != 0 && !stdout_errno)
		stdout_errno = errno; /* for main's report */
}

void cli_print_json_line(json_t *j)
{
	char *line = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(9))
	               : NULL;
	if (line) {
		printf("%s\n", line);
		cli_flush_stdout();
		printed_json = true;
	}
	free(line);
	json_decref(j);
}

/* The invisible format character (bidi controls and their like) that the
 * UTF-8 at P (before END) starts with: its code point, or 0 for none.
 * Joiners (U+200C, U+200D), which emoji and scripts need, are not. */
static unsigned invisible(const unsigned char *p, const unsigned char *end)
{
	unsigned c = kx_utf8_invisible((const char *)p, (size_t)(end - p));
	return c == 0x200c || c == 0x200d ? 0 : c;
}

const char *cli_utf8_where(const char *s, char *buf, size_t size)
{
	size_t len = strlen(s), i = 0, line = 1, start = 0;
	while (i < len) {
		bool ok;
		size_t n = kx_utf8_unit(s + i, len - i, &ok);
		if (!ok)
			break;
		if (s[i] == '\n')
			line++, start = i + 1;
		i += n;
	}
	/* (both counted from 1, the byte within its line, as an editor's
	 * column of bytes) */
	snprintf(buf, size, "line %zu, byte %zu", line, i - start + 1);
	return buf;
}

/* cli_write_safe and cli_write_live: a carriage return kept when LIVE,
 * else only before a newline. */
static void write_safe(FILE *f, const char *s, size_t len, bool live)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len, *run = p;
	for (; p < end; p++) {
		bool cr_kept = live || (p + 1 < end && p[1] == '\n');
		bool c0 = (*p < 0x20 && *p != '\n' && *p != '\t' && !(*p == '\r' && cr_kept)) ||
		          *p == 0x7f;
		/* C1 controls in UTF-8: C2 80..C2 9F (a terminal may take C2 9B for CSI) */
		bool c1 = *p == 0xc2 && p + 1 < end && p[1] >= 0x80 && p[1] <= 0x9f;
		unsigned cf = c0 || c1 ? 0 : invisible(p, end);
		if (!c0 && !c1 && !cf)
			continue;
		fwrite(run, 1, (size_t)(p - run), f);
		if (c0 && *p == 0)
			fputs("\\0", f);
		else if (c0)
			fprintf(f, "^%c", *p == 0x7f ? '?' : *p + '@');
		else if (c1)
			fprintf(f, "\\u%04x", p[1]), p++;
		else
			fprintf(f, "\\u%04x", cf), p += cf < 0x800 ? 1 : cf < 0x10000 ? 2 : 3;
		run = p + 1;
	}
	fwrite(run, 1, (size_t)(end - run), f);
}

void cli_write_safe(FILE *f, const char *s, size_t len)
{
	write_safe(f, s, len, false);
}

void cli_write_live(FILE *f, const char *s, size_t len)
{
	write_safe(f, s, len, true);
}

const char *cli_fmt_secs(double s, char *buf, size_t size)
{
	long t = (long)s;
	if (s < 0)
		snprintf(buf, size, "-");
	else if (s < 60)
		snprintf(buf, size, "%.1fs", s);
	else if (t < 3600)
		snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else
		snprintf(buf, size, "%ldd%02ldh", t / 86400, t / 3600 % 24);
	return buf;
}

void cli_usage(FILE *f)
{
	size_t n;
	const cli_cmd_t *c = cli_commands(&n);
	fprintf(f, "usage: kbox [--help] [--version] COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-12s %s\n", c[i].name, c[i].summary);
	fprintf(f, "\nSee kbox(1), or kbox help COMMAND.\n");
}

#ifdef KBOX_SANITIZED
/* A sanitizer build's (configure --enable-sanitizers) LeakSanitizer asks
 * this as the process exits: non-zero skips its check.  With
 * KBOX_LEAK_CHECK=long-lived in the environment (tests/lib.sh sets it),
 * only the commands that live on, kbox mcp and kbox agent, are checked:
 * a one-shot command's memory goes with it, and its check costs about
 * 50 ms a process, a third of the shell suites under the sanitizers.  The
 * supervisors are another program, always checked. */
static bool leak_check = true;

int __lsan_is_turned_off(void)
{
	return !leak_check;
}

static void choose_leak_check(const char *command)
{
	const char *v = getenv("KBOX_LEAK_CHECK");
	if (v && strcmp(v, "long-lived") == 0 && strcmp(command, "mcp") != 0 &&
	    strcmp(command, "agent") != 0)
		leak_check = false;
}
#else
static void choose_leak_check(const char *command)
{
	(void)command;
}
#endif

int main(int argc, char **argv)
{
	const cli_cmd_t *cmd = NULL;
	int status, closed;

	/* before anything is opened: no socket may become standard output */
	if ((closed = kx_std_fds_open()) < 0) {
		cli_error(NULL, "cannot open /dev/null: %s", strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	if (closed & (1 << STDOUT_FILENO)) /* why a write fails, for the report */
		stdout_errno = EBADF;
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		cli_usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		cli_usage(stdout);
		status = EXIT_OK;
		goto written;
	}
	if (strcmp(argv[1], "--version") == 0) {
		status = cmd_version(argc - 1, argv + 1);
		goto written;
	}
	cmd = cli_find(argv[1]);
	if (!cmd) {
		const char *near = cli_nearest_command(argv[1]);
		if (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "-V") == 0)
			cli_error(NULL, "unknown option %s: kbox --version prints the version",
			          argv[1]);
		else if (argv[1][0] == '-' && argv[1][1] == '-' &&
		         (cli_distance(argv[1], "--version") <= 2 ||
		          cli_distance(argv[1], "--help") <= 2))
			cli_error(NULL, "unknown option %s: did you mean %s? (see kbox --help)",
			          argv[1],
			          cli_distance(argv[1], "--version") <= 2 ? "--version" : "--help");
		else if (argv[1][0] == '-')
			cli_error(NULL, "unknown option %s (see kbox --help)", argv[1]);
		else if (near)
			cli_error(
			        NULL,
			        "unknown command \"%s\": did you mean \"kbox %s\"? (see kbox --help)",
			        argv[1], near);
		else
			cli_error(NULL, "unknown command \"%s\" (see kbox --help)", argv[1]);
		return EXIT_USAGE;
	}
	choose_leak_check(cmd->name);
	status = cmd->fn(argc - 1, argv + 1);
	cli_print_failure(status);
written:
	/* what it printed must have been written: a full disk or a closed
	 * pipe is not a success (kbox --help and --version too) */
	errno = 0;
	if (fflush(stdout) != 0 || ferror(stdout)) {
		int e = errno ? errno : stdout_errno;
		struct pollfd p = {STDOUT_FILENO, 0, 0};
		/* a reader that has gone (| head) took what it wanted: no error */
		if (e != EPIPE && !(poll(&p, 1, 0) > 0 && (p.revents & POLLERR))) {
			cli_error(cmd ? cmd->name : NULL, "cannot write standard output: %s",
			          e ? strerror(e) : "a write failed");
			if (status == EXIT_OK || status == EXIT_CODE_ERROR)
				status = EXIT_UNAVAILABLE;
		}
	}
	return status;
}
