/* src/cli/cmd_mcp.c — kbox mcp: its options, then the server (src/mcp/). */
#include "config.h"
#include "cli.h"
#include "mcp/mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* --conversation-idle DURATION: more than 0, into the long long at VALUE. */
static int idle_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	long long v = cli_parse_duration_max(arg, CLI_DURATION_MAX_MS);
	if (v <= 0) {
		cli_error(cmd,
		          "invalid --conversation-idle \"%s\": expected a duration more than 0 "
		          "and at most %lldd, such as 90s, 10m or 1h",
		          arg, CLI_DURATION_MAX_MS / 86400000);
		return EXIT_USAGE;
	}
	*(long long *)opt->value = v;
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

#define MCP_HTTP_PROGRAM "kbox-mcp-http"
#define MCP_TOKEN_ENV "KBOX_MCP_TOKEN"
#define MCP_TOKEN_MIN 16

/* The bearer token of --http: --token-file's first line, else
 * $KBOX_MCP_TOKEN, else a new one, printed; into BUF.  EXIT_OK, or an
 * exit status after one line. */
static int http_token(const char *file, char *buf, size_t size)
{
	const char *env = getenv(MCP_TOKEN_ENV);
	if (file) {
		struct stat st;
		/* a regular file (no wait on a FIFO, no device read) */
		int fd = kx_open_file(AT_FDCWD, file, O_RDONLY, 0);
		ssize_t got;
		size_t n;
		if (fd < 0) {
			cli_error("mcp", "--token-file %s: %s", file,
			          errno == ENXIO || errno == EISDIR ? "not a regular file"
			          : errno == ELOOP
			                  ? "a symbolic link (refused: give the file itself)"
			                  : strerror(errno));
			return EXIT_USAGE;
		}
		if (fstat(fd, &st) == 0 && (st.st_mode & 077)) {
			close(fd);
			cli_error("mcp",
			          "--token-file %s: others may read it (mode %04o): chmod 600 %s",
			          file, (unsigned)(st.st_mode & 0777), file);
			return EXIT_USAGE;
		}
		got = kx_pread_full(fd, buf, size - 1, 0);
		close(fd);
		buf[got > 0 ? got : 0] = '\0';
		n = strcspn(buf, "\r\n");
		if (n == size - 1) {
			cli_error("mcp",
			          "--token-file %s: its first line is longer than %zu characters",
			          file, size - 2);
			return EXIT_USAGE;
		}
		buf[n] = '\0';
	} else if (env && *env) {
		snprintf(buf, size, "%s", env);
	} else {
		/* none: the server makes one, and prints it once it listens
		 * (not for an address it cannot take) */
		buf[0] = '\0';
		return EXIT_OK;
	}
	/* (a client sends "Bearer TOKEN": spaces at its ends are never sent) */
	if (buf[0] && (strchr(" \t", buf[0]) || strchr(" \t", buf[strlen(buf) - 1]))) {
		cli_error("mcp", "the token %s%s has a space or tab at its start or end",
		          file ? "of --token-file " : "in ", file ? file : MCP_TOKEN_ENV);
		return EXIT_USAGE;
	}
	if (strlen(buf) < MCP_TOKEN_MIN) {
		/* (and how to make one: newcomer 11, F14; a file only its
		 * owner may read, as the check above wants: newcomer 12, F5) */
		if (file)
			cli_error(
			        "mcp",
			        "the token of --token-file %s is shorter than %d characters (make "
			        "one with: (umask 077; head -c 24 /dev/urandom | base64 >%s))",
			        file, MCP_TOKEN_MIN, file);
		else
			cli_error(
			        "mcp",
			        "the token in %s is shorter than %d characters (make one with: head "
			        "-c 24 /dev/urandom | base64)",
			        MCP_TOKEN_ENV, MCP_TOKEN_MIN);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* kbox mcp --http ADDR:PORT: exec kbox-mcp-http, which serves each
 * conversation with a kbox mcp on standard input and output of its own,
 * with the options O gave.  Returns only on failure. */
static int serve_http(const char *listen_at, const char *token_file, long long idle_ms,
                      const mcp_options_t *o)
{
	char prog[PATH_MAX + 64], self[PATH_MAX], token[256], soft[32], files[32], tmo[32],
	        maxs[32], idle[32];
	const char *argv[64];
	size_t n = 0;
	ssize_t len;
	int status;

	if ((status = http_token(token_file, token, sizeof token)) != EXIT_OK)
		return status;
	if ((status = mcp_check_home(o->session)) != EXIT_OK)
		return status;
	if (cli_find_program("mcp", MCP_HTTP_PROGRAM, "HTTP server program", prog, sizeof prog) < 0)
		return EXIT_UNAVAILABLE;
	if ((len = readlink("/proc/self/exe", self, sizeof self - 1)) <= 0) {
		cli_error("mcp", "cannot tell where kbox is: %s", strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	self[len] = '\0';
	snprintf(soft, sizeof soft, "%lldms", o->soft_ms);
	snprintf(files, sizeof files, "%lldms", o->files_ms);
	snprintf(tmo, sizeof tmo, "%lldms", o->timeout_ms);
	snprintf(maxs, sizeof maxs, "%lld", o->max_sessions);
	argv[n++] = MCP_HTTP_PROGRAM;
	argv[n++] = "--listen";
	argv[n++] = listen_at;
	argv[n++] = "--kbox";
	argv[n++] = self;
	snprintf(idle, sizeof idle, "%lld", idle_ms);
	argv[n++] = "--idle-ms";
	argv[n++] = idle;
	argv[n++] = "--";
	argv[n++] = "--images";
	argv[n++] = o->images == MCP_IMAGES_INLINE ? "inline" : "path";
	argv[n++] = "--structured";
	argv[n++] = o->structured == CLI_STRUCTURED_FULL   ? "full"
	            : o->structured == CLI_STRUCTURED_TEXT ? "text"
	                                                   : "none";
	argv[n++] = "--soft-timeout";
	argv[n++] = soft;
	argv[n++] = "--files-timeout";
	argv[n++] = files;
	argv[n++] = "--timeout";
	argv[n++] = tmo;
	argv[n++] = "--max-sessions";
	argv[n++] = maxs;
	if (o->functions && o->functions->file) {
		argv[n++] = "--functions";
		argv[n++] = o->functions->file;
	}
	for (size_t i = 0; o->functions && i < o->functions->from_mcp.n && n + 6 < 64; i++) {
		argv[n++] = "--functions-from-mcp";
		argv[n++] = o->functions->from_mcp.v[i];
	}
	if (o->type_check)
		argv[n++] = "--type-check";
	for (size_t i = 0; o->functions && i < o->functions->allow.n && n + 6 < 64; i++) {
		argv[n++] = "--functions-allow";
		argv[n++] = o->functions->allow.v[i];
	}
	if (o->session) {
		argv[n++] = "--session";
		argv[n++] = o->session;
		/* (said: every client then reaches every other's variables) */
		fprintf(stderr,
		        "kbox mcp: every conversation uses the session %s (-s): its kernel, "
		        "and what each client defines there, is every client's\n",
		        o->session);
	}
	argv[n] = NULL;
	if (token[0] ? setenv(MCP_TOKEN_ENV, token, 1) < 0 : unsetenv(MCP_TOKEN_ENV) < 0) {
		cli_error("mcp", "setenv: %s", strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	explicit_bzero(token, sizeof token);
	fflush(NULL);
	execv(prog, (char *const *)argv);
	cli_error("mcp", "cannot run %s: %s", prog, strerror(errno));
	return EXIT_UNAVAILABLE;
}

int cmd_mcp(int argc, char **argv)
{
	const char *http = NULL, *token_file = NULL;
	long long idle_ms = -1;
	mcp_options_t o = MCP_OPTIONS_INIT;
	cli_functions_opts_t fo = {0};
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
	        CLI_OPT_CALLBACK(0, "files-timeout", "DURATION", cli_opt_duration, &o.files_ms,
	                         "end a file tool's call that waits on the Jupyter server of a "
	                         "gateway session for longer than DURATION (default: 50s; 0: "
	                         "only the bound of each request to the server)"),
	        CLI_OPT_CALLBACK(
	                't', "timeout", "DURATION", cli_opt_duration, &o.timeout_ms,
	                "interrupt a run_python call after DURATION when the call gives no "
	                "timeout (default: 0, no limit)"),
	        CLI_OPT_CALLBACK(0, "max-sessions", "N", max_sessions_cb, &o.max_sessions,
	                         "let the new_session tool (another, empty session for the "
	                         "model, by its handle) make at most N sessions, each a kernel "
	                         "of its own, 0 to 64 (default: 4)"),
	        CLI_OPT_FUNCTIONS(&fo, "the sessions it starts"),
	        CLI_OPT_FLAG(0, "type-check", &o.type_check,
	                     "check the calls of the host functions in run_python's code with "
	                     "mypy first, and answer with what it finds instead of running it"),
	        CLI_OPT_STRING(0, "http", "ADDR:PORT|unix:PATH", &http,
	                       "serve Streamable HTTP at http://ADDR:PORT/mcp (ADDR an IP "
	                       "address, such as 127.0.0.1; not a name), or on the unix "
	                       "socket PATH (mode 0600), instead of standard input and output, "
	                       "a session for each conversation (with -s, every one uses that "
	                       "one) (default: stdio)"),
	        CLI_OPT_STRING(0, "token-file", "FILE", &token_file,
	                       "with --http, the bearer token clients must give: FILE's first "
	                       "line (default: $KBOX_MCP_TOKEN, else a new one, printed)"),
	        CLI_OPT_CALLBACK(0, "conversation-idle", "DURATION", idle_cb, &idle_ms,
	                         "with --http, end a conversation no request has come to for "
	                         "DURATION, and its session with it (default: 1h)"),
	        CLI_OPT_END};
	int status;

	o.functions = &fo;
	if (cli_parse_no_operands("mcp", opts, argc, argv, &status) < 0)
		goto out;
	if (token_file && !http) {
		cli_error("mcp", "--token-file is for --http");
		status = EXIT_USAGE;
		goto out;
	}
	if (idle_ms >= 0 && !http) {
		cli_error("mcp", "--conversation-idle is for --http");
		status = EXIT_USAGE;
		goto out;
	}
	if (http)
		status = serve_http(http, token_file, idle_ms < 0 ? 3600LL * 1000 : idle_ms, &o);
	else
		status = mcp_serve(&o);
out:
	cli_functions_opts_clear(&fo);
	return status;
}
