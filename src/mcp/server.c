/* src/mcp/server.c — kbox mcp's protocol: a Model Context Protocol server
 * on standard input and output (the stdio transport: JSON-RPC 2.0, one
 * message a line), whose tools run Python in a session's kernel and read
 * and write the files of its workspace (tools.c).
 *
 * Standard input and the connections of the run_python calls in flight
 * (run.c) are read together with poll(2): a ping or a cancellation is
 * answered while code runs.  A cancellation interrupts the code and, as
 * the protocol says, gets no response.
 *
 * The session is the connection's own (mcp-PID-RANDOM, started at the
 * first tools/call, stopped and removed when standard input closes or on
 * SIGTERM), or with -s NAME a persistent one, started if need be and left
 * running (session.c).  Diagnostics go to standard error: standard output
 * is the protocol's. */
#include "config.h"
#include "mcp/mcp_int.h"
#include "mcp/json_load.h"
#include "runtime/backend.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Revisions of the protocol this server speaks, the latest first: those
 * of the TypeScript SDK 1.32.2 (SUPPORTED_PROTOCOL_VERSIONS). */
static const char *const protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                "2024-11-05", "2024-10-07", NULL};

/* The revision without a handshake (modern: every request says its version
 * and the client's capabilities in its _meta, server/discover tells what
 * the server speaks), which this server speaks beside those. */
#define MODERN_VERSION "2026-07-28"
#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER "io.modelcontextprotocol/serverInfo"
#define RPC_UNSUPPORTED_VERSION (-32022) /* UnsupportedProtocolVersionError */
#define LIST_TTL_MS 3600000              /* tools/list and server/discover: fresh for an hour */

/* What the model is told of the server, at initialize and server/discover. */
static const char instructions[] =
        "run_python runs Python in one persistent sandboxed kernel: state persists between "
        "calls. The file tools work in the same workspace.";


#define LINE_MAX_BYTES (64L * 1024 * 1024) /* one message from the client */
#define POLL_MAX 258                       /* standard input and the calls read at once */

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

/* ---- writing messages ---- */

/* Send MSG (taken), about the request ABOUT (NULL: none), by M's
 * transport: on standard output, one line, unless M says otherwise. */
static void send_msg(mcp_t *m, json_t *msg, const json_t *about)
{
	char *line;
	size_t len, off = 0;

	if (m->out) {
		m->out(m, msg, about);
		return;
	}
	line = msg ? json_dumps(msg, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
	json_decref(msg);
	if (!line) {
		cli_error(MCP_CMD, "out of memory writing a response");
		return;
	}
	len = strlen(line);
	line[len] = '\n'; /* json_dumps' NUL: the line's end */
	while (off < len + 1) {
		ssize_t n = write(STDOUT_FILENO, line + off, len + 1 - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cli_error(MCP_CMD, "cannot write standard output: %s", strerror(errno));
			break;
		}
		off += (size_t)n;
	}
	free(line);
}

void mcp_send_result(mcp_t *m, json_t *id, json_t *result, bool modern)
{
	if (!result) {
		cli_error(MCP_CMD, "out of memory");
		return;
	}
	if (modern) {
		json_t *meta = json_object_get(result, "_meta");
		json_object_set_new(result, "resultType", json_string("complete"));
		if (!json_is_object(meta)) {
			meta = json_object();
			json_object_set_new(result, "_meta", meta);
		}
		json_object_set_new(
		        meta, META_SERVER,
		        json_pack("{s:s, s:s}", "name", "kbox", "version", PACKAGE_VERSION));
	}
	send_msg(m,
	         json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(),
	                   "result", result),
	         id);
}

void mcp_send_error(mcp_t *m, json_t *id, int code, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	json_t *jmsg;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (!(jmsg = json_string(msg))) /* a name in it that is not UTF-8 */
		jmsg = json_string("invalid request");
	send_msg(m,
	         json_pack("{s:s, s:O?, s:{s:i, s:o}}", "jsonrpc", "2.0", "id",
	                   id ? id : json_null(), "error", "code", code, "message", jmsg),
	         id);
}

void mcp_send_notification(mcp_t *m, const char *method, json_t *params, const json_t *about)
{
	if (!params) {
		cli_error(MCP_CMD, "out of memory");
		return;
	}
	send_msg(m,
	         json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params),
	         about);
}

bool mcp_has_nul(const json_t *j)
{
	return json_is_string(j) && memchr(json_string_value(j), '\0', json_string_length(j));
}

/* ---- reading messages ---- */

/* initialize: the version the client asked for when it is one of ours,
 * else the latest. */
static void do_initialize(mcp_t *m, json_t *id, json_t *params)
{
	json_t *jwant = json_object_get(params, "protocolVersion");
	const char *want = json_string_value(jwant);
	const char *version = protocol_versions[0];
	if (m->initialized) {
		mcp_send_error(m, id, MCP_RPC_INVALID_REQUEST,
		               "initialize: the connection is initialized "
		               "already");
		return;
	}
	if (!want) {
		mcp_send_error(m, id, MCP_RPC_INVALID_PARAMS,
		               "initialize: \"protocolVersion\" (a string) is "
		               "required");
		return;
	}
	for (size_t i = 0; protocol_versions[i] && !mcp_has_nul(jwant); i++)
		if (strcmp(want, protocol_versions[i]) == 0)
			version = protocol_versions[i];
	m->initialized = true;
	mcp_send_result(m, id,
	                json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
	                          version, "capabilities", "tools", "listChanged", 0, "serverInfo",
	                          "name", "kbox", "title", "kbox", "version", PACKAGE_VERSION,
	                          "instructions", instructions),
	                false);
}

/* The method of MSG (an object) when it is a request or a notification
 * this server takes: "jsonrpc" "2.0", an "id" that is a string or an
 * integer, a "method" string, "params" an object or an array.  NULL when
 * it is not (the error response sent, to a request) or is a response. */
static const char *method_of(mcp_t *m, json_t *msg)
{
	json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method");
	json_t *jsonrpc = json_object_get(msg, "jsonrpc"), *params = json_object_get(msg, "params");
	const char *why = NULL;

	if (id && !json_is_string(id) && !json_is_integer(id)) {
		mcp_send_error(m, NULL, MCP_RPC_INVALID_REQUEST,
		               "Invalid Request: \"id\" must be a string or an integer");
		return NULL;
	}
	if (!json_is_string(jsonrpc) || mcp_has_nul(jsonrpc) ||
	    strcmp(json_string_value(jsonrpc), "2.0") != 0) {
		mcp_send_error(m, id, MCP_RPC_INVALID_REQUEST,
		               "Invalid Request: \"jsonrpc\" must be \"2.0\"");
		return NULL;
	}
	if (!method && id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
		return NULL; /* a response: this server sends no requests it waits for */
	if (!json_is_string(method))
		why = "\"method\" (a string) is required";
	else if (mcp_has_nul(method))
		why = "\"method\" holds a NUL character";
	else if (params && !json_is_object(params) && !json_is_array(params))
		why = "\"params\" must be an object or an array";
	if (why) {
		if (id) /* a notification is never answered */
			mcp_send_error(m, id, MCP_RPC_INVALID_REQUEST, "Invalid Request: %s", why);
		return NULL;
	}
	return json_string_value(method);
}

/* The request METHOD with ID (NULL: a notification) and PARAMS (may be
 * NULL), checked by method_of: answered, or for a notification done. */
/* Every revision this server speaks, the modern one first (new). */
static json_t *all_versions(void)
{
	json_t *v = json_pack("[s]", MODERN_VERSION);
	for (size_t i = 0; protocol_versions[i]; i++)
		json_array_append_new(v, json_string(protocol_versions[i]));
	return v;
}

/* A request of the revision without a handshake: its _meta META (an
 * object, or NULL) says the version, JVER, and the client's capabilities.
 * Answered, or the error sent. */
static void dispatch_modern(mcp_t *m, json_t *id, const char *method, json_t *params, json_t *meta,
                            json_t *jver)
{
	const char *ver = json_string_value(jver);
	json_t *r;

	if (!ver || mcp_has_nul(jver)) {
		mcp_send_error(m, id, MCP_RPC_INVALID_PARAMS,
		               "Invalid params: _meta \"%s\" (a string) is required", META_VERSION);
		return;
	}
	if (strcmp(ver, MODERN_VERSION) != 0) {
		send_msg(m,
		         json_pack("{s:s, s:O, s:{s:i, s:s, s:{s:o, s:O}}}", "jsonrpc", "2.0", "id",
		                   id, "error", "code", RPC_UNSUPPORTED_VERSION, "message",
		                   "Unsupported protocol version", "data", "supported",
		                   all_versions(), "requested", jver),
		         id);
		return;
	}
	if (!json_is_object(json_object_get(meta, META_CAPABILITIES))) {
		mcp_send_error(m, id, MCP_RPC_INVALID_PARAMS,
		               "Invalid params: _meta \"%s\" (an object) is required",
		               META_CAPABILITIES);
		return;
	}
	m->req_modern = true;
	if (strcmp(method, "server/discover") == 0)
		mcp_send_result(m, id,
		                json_pack("{s:o, s:{s:{}}, s:s, s:i, s:s}", "supportedVersions",
		                          all_versions(), "capabilities", "tools", "instructions",
		                          instructions, "ttlMs", LIST_TTL_MS, "cacheScope",
		                          "private"),
		                true);
	else if (strcmp(method, "tools/list") == 0) {
		if ((r = mcp_tools_list(m->structured, m->images == MCP_IMAGES_INLINE,
		                        m->functions_text))) {
			/* the same for every request of this server: cacheable */
			json_object_set_new(r, "ttlMs", json_integer(LIST_TTL_MS));
			json_object_set_new(r, "cacheScope", json_string("private"));
		}
		mcp_send_result(m, id, r, true);
	} else if (strcmp(method, "tools/call") == 0)
		mcp_tools_call(m, id, params);
	else /* ping and initialize are not of this revision */
		mcp_send_error(m, id, MCP_RPC_METHOD_NOT_FOUND, "Method not found: %s", method);
	m->req_modern = false;
}

/* The request METHOD with ID (NULL: a notification) and PARAMS (may be
 * NULL), checked by method_of: answered, or for a notification done.  A
 * request whose _meta names a protocol version, and server/discover, are
 * of the revision without a handshake (dispatch_modern); the others need
 * initialize first. */
static void dispatch(mcp_t *m, json_t *id, const char *method, json_t *params)
{
	json_t *meta = json_object_get(params, "_meta");
	json_t *jver = json_is_object(meta) ? json_object_get(meta, META_VERSION) : NULL;

	if (!id) { /* a notification: never answered */
		if (strcmp(method, "notifications/cancelled") == 0 && json_is_object(params) &&
		    json_object_get(params, "requestId"))
			mcp_call_cancel(m, json_object_get(params, "requestId"));
		return;
	}
	if (params && !json_is_object(params))
		mcp_send_error(m, id, MCP_RPC_INVALID_PARAMS, "%s: \"params\" must be an object",
		               method);
	else if (jver || strcmp(method, "server/discover") == 0)
		dispatch_modern(m, id, method, params, json_is_object(meta) ? meta : NULL, jver);
	else if (strcmp(method, "ping") == 0)
		mcp_send_result(m, id, json_object(), false);
	else if (strcmp(method, "initialize") == 0)
		do_initialize(m, id, params);
	else if (!m->initialized)
		mcp_send_error(m, id, MCP_RPC_INVALID_REQUEST,
		               "Invalid Request: the server is not initialized (send initialize "
		               "first, or give the protocol version in each request's _meta, as "
		               "revision " MODERN_VERSION " does)");
	else if (strcmp(method, "tools/list") == 0)
		mcp_send_result(m, id,
		                mcp_tools_list(m->structured, m->images == MCP_IMAGES_INLINE,
		                               m->functions_text),
		                false);
	else if (strcmp(method, "tools/call") == 0)
		mcp_tools_call(m, id, params);
	else
		mcp_send_error(m, id, MCP_RPC_METHOD_NOT_FOUND, "Method not found: %s", method);
}

/* One message from the client: LINE[0..LEN). */
static void handle_line(mcp_t *m, const char *line, size_t len)
{
	json_error_t je;
	json_t *msg;
	const char *method;

	if (len == 0 || (len == 1 && line[0] == '\r'))
		return; /* a blank line: nothing */
	if (!(msg = mcp_json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je))) {
		mcp_send_error(m, NULL, MCP_RPC_PARSE_ERROR, "Parse error: %s", je.text);
		return;
	}
	if (json_is_array(msg))
		/* batches were taken by 2025-03-26 only, and removed since */
		mcp_send_error(m, NULL, MCP_RPC_INVALID_REQUEST,
		               "Invalid Request: batches are not supported (MCP since 2025-06-18)");
	else if (!json_is_object(msg))
		mcp_send_error(m, NULL, MCP_RPC_INVALID_REQUEST,
		               "Invalid Request: not a JSON object");
	else if ((method = method_of(m, msg)))
		dispatch(m, json_object_get(msg, "id"), method, json_object_get(msg, "params"));
	json_decref(msg);
}

/* Read what standard input has and handle each complete line; at its end,
 * a last line without a newline too. */
static void read_stdin(mcp_t *m)
{
	char *nl, *start;
	ssize_t n;
	if (m->in_cap - m->in_len < 65536) {
		size_t ncap = m->in_cap ? m->in_cap * 2 : 131072;
		char *nb = realloc(m->in, ncap);
		if (!nb) {
			cli_error(MCP_CMD, "out of memory reading standard input");
			m->in_eof = m->failed = true;
			return;
		}
		m->in = nb;
		m->in_cap = ncap;
	}
	n = read(STDIN_FILENO, m->in + m->in_len, m->in_cap - m->in_len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		if (n < 0) {
			cli_error(MCP_CMD, "cannot read standard input: %s", strerror(errno));
			m->failed = true;
		}
		m->in_eof = true;
		if (m->in_len && !m->in_skip)
			handle_line(m, m->in, m->in_len);
		m->in_len = m->in_scan = 0;
		return;
	}
	m->in_len += (size_t)n;
	start = m->in;
	/* (a long line comes in many reads: only what came since the last
	 * is looked through, not the whole line again each time) */
	while ((nl = memchr(m->in + m->in_scan, '\n', m->in_len - m->in_scan))) {
		if (!m->in_skip)
			handle_line(m, start, (size_t)(nl - start));
		m->in_skip = false;
		start = nl + 1;
		m->in_scan = (size_t)(start - m->in);
	}
	m->in_len -= (size_t)(start - m->in);
	memmove(m->in, start, m->in_len);
	m->in_scan = m->in_len;
	if (m->in_len > (size_t)LINE_MAX_BYTES) {
		if (!m->in_skip)
			mcp_send_error(m, NULL, MCP_RPC_PARSE_ERROR,
			               "Parse error: a message longer than %ld bytes",
			               LINE_MAX_BYTES);
		m->in_skip = true;
		m->in_len = m->in_scan = 0;
	}
}

/* Serve until standard input ends and the calls in flight are done, or a
 * signal says stop. */
static void serve(mcp_t *m)
{
	bool eof_seen = false;

	while (!stop_signal && (!m->in_eof || m->calls || mcp_waiting(m))) {
		struct pollfd fds[POLL_MAX];
		mcp_call_t *owner[POLL_MAX];
		size_t nfds = 0;
		long long next;
		int r;

		if (m->in_eof && !eof_seen) {
			/* no one is left to read a cell in the background */
			eof_seen = true;
			mcp_calls_eof(m);
			continue;
		}
		next = mcp_calls_due(m);
		/* at the end of standard input, the calls running finish first:
		 * their responses can still be read (a client that wants it over
		 * sooner sends SIGTERM) */
		fds[nfds].fd = m->in_eof ? -1 : STDIN_FILENO;
		fds[nfds].events = POLLIN;
		owner[nfds++] = NULL;
		for (mcp_call_t *c = m->calls; c && nfds < POLL_MAX; c = c->next) {
			if (c->fd < 0) /* ended, its result kept for wait_python */
				continue;
			fds[nfds].fd = c->fd;
			fds[nfds].events = POLLIN;
			owner[nfds++] = c;
		}
		r = poll(fds, nfds, next < 0 ? -1 : next > INT_MAX ? INT_MAX : (int)next);
		if (r < 0 && errno != EINTR) {
			cli_error(MCP_CMD, "poll: %s", strerror(errno));
			m->failed = true;
			break;
		}
		if (r <= 0)
			continue;
		/* calls first: STDIN may cancel (free) some */
		for (size_t i = 1; i < nfds; i++)
			if (fds[i].revents)
				mcp_call_readable(m, owner[i]); /* in its session */
		if (fds[0].revents)
			read_stdin(m);
	}
}

int mcp_check_home(const char *session)
{
	kbox_error_t err = {0}, no_id = {0};
	char *home = kr_state_home(&err);
	const char *backend = getenv("KBOX_BACKEND");
	kr_sandbox_id_t id;
	/* and, under root, one its sandboxes cannot reach: the sessions it
	 * makes (bwrap, unless KBOX_BACKEND says otherwise) would not start
	 * (kbox doctor says the same) */
	bool bwrap = !session && (!backend || !*backend || strcmp(backend, "bwrap") == 0);
	if (!home || kr_session_check_home_usable(home, &err) < 0 ||
	    (bwrap && kr_sandbox_identity(&id, &no_id) == 0 &&
	     kr_session_check_home_reachable(home, &id, &err) < 0)) {
		cli_error(MCP_CMD, "%s", err.msg);
		free(home);
		return EXIT_UNAVAILABLE;
	}
	free(home);
	return EXIT_OK;
}

int mcp_serve(const mcp_options_t *o)
{
	mcp_t m = {.images = o->images,
	           .structured = o->structured,
	           .timeout_ms = o->timeout_ms,
	           .soft_ms = o->soft_ms,
	           .max_handles = (size_t)o->max_sessions};
	struct sigaction sa;
	int status;

	json_t *functions = NULL;

	if ((status = mcp_session_name(&m, o->session)) != EXIT_OK)
		return status;
	/* a file tool's call on a gateway session's server ends in time: the
	 * server answers nothing else meanwhile */
	kr_gateway_files_wait((long)o->files_ms);
	/* the host functions: of --functions FILE, for the sessions it
	 * starts, or of the session -s names; the model reads their stubs */
	if ((status = cli_functions_for(MCP_CMD, o->functions, o->session, &functions)) != EXIT_OK)
		return status;
	if (cli_functions_given(o->functions))
		cli_set_new_session_functions(functions);
	m.functions_text = cli_functions_description(functions);
	m.functions = functions;
	m.type_check = o->type_check;
	if (m.type_check && !functions) {
		cli_error(MCP_CMD, "--type-check checks the calls of host functions, and there are "
		                   "none (see kbox-functions(5))");
		return EXIT_USAGE;
	}
	if ((status = mcp_check_home(o->session)) != EXIT_OK)
		return status;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal; /* no SA_RESTART: poll returns */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* a person at a terminal, not a client: what it is waiting for */
	if (isatty(STDIN_FILENO))
		fprintf(stderr,
		        "kbox " MCP_CMD ": speaking MCP (JSON-RPC, a message a line) on standard "
		        "input and output, for an MCP client to run (kbox-mcp(1) "
		        "says how to set one up); end it with Ctrl-D\n");
	serve(&m);
	/* stopped by a signal: each call still owed an answer gets one, an
	 * error, so that a client that reads on is not left waiting */
	for (mcp_call_t *c = m.calls; stop_signal && c; c = c->next)
		if (c->id && !c->cancelled)
			mcp_send_error(&m, c->id, MCP_RPC_INTERNAL_ERROR,
			               "kbox mcp is stopping (SIG%s): the call ended unfinished",
			               sigabbrev_np(stop_signal));
	while (m.calls)
		mcp_call_drop(&m, m.calls);
	mcp_session_end(&m);
	mcp_remote_copy_drop(&m);
	cli_set_new_session_functions(NULL);
	json_decref(functions);
	free(m.functions_text);
	free(m.in);
	return m.failed ? EXIT_UNAVAILABLE : EXIT_OK;
}
