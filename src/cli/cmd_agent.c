/* src/cli/cmd_agent.c — kbox agent: answer a question with a language model
 * that runs Python in a session.
 *
 * The loop of an agent, against any OpenAI-compatible Chat Completions
 * endpoint: send the conversation and the run_python tool; run each tool
 * call the model makes in the session's kernel (as kbox exec would, through
 * the supervisor) and send back what a model should read of its result;
 * until the model answers without calling the tool, or --max-steps.  The
 * HTTP goes through kbox-http (src/http/http_proto.h): kbox never loads
 * libcurl.  The conversation is kept with the session (agent.json), so a
 * later kbox agent -s NAME goes on with it, and with the kernel's state.
 *
 * Host files reach the model's code only through --file.  The API key is
 * read from the environment and handed to kbox-http in its environment;
 * nothing here writes it anywhere. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define CMD "agent"
#define AGENT_FILE "agent.json"
#define AGENT_LOCK "agent.lock"
#define AGENT_SCHEMA "kbox.agent/1"
#define TRACE_SCHEMA "kbox.agent-trace/1"
#define DEFAULT_BASE_URL "https://api.openai.com/v1"
#define DEFAULT_MAX_STEPS 20
#define MAX_STEPS_LIMIT 1000
#define DEFAULT_TIMEOUT_MS (5LL * 60 * 1000)
/* How long one request to the model may take (each attempt). */
#define HTTP_TIMEOUT_S 600.0
/* The most tool calls of one response that are run; the others get a
 * tool message that says they were not. */
#define MAX_CALLS 16
/* A key shorter than this is not hidden in messages: too short to tell
 * from their text. */
#define KEY_HIDE_MIN 8
/* Where a message is cut, a key's first bytes (this many or more) at its
 * end are hidden too. */
#define KEY_PREFIX_MIN 4
/* The longest error line (first_error in main.c keeps 1024 bytes). */
#define ERROR_MAX 1000

/* What the model is told first, before the tool's own description. */
static const char system_intro[] =
    "You are a data analyst. You answer the user's questions by running Python with the "
    "tool run_python, then reply with the answer in plain text (without calling the tool) "
    "once you have it. The user's files, if any, are named in their message. ";

typedef struct {
	const char *name;      /* the session */
	char *dir;             /* its directory */
	const char *model;
	char url[4096];        /* BASE_URL/chat/completions */
	const char *key;       /* NULL: none (never printed, never saved) */
	long long timeout_ms;  /* the most each tool call's code may run; 0: no limit */
	int max_steps;
	format_t format;
	bool tty;              /* standard error is a terminal */
	cli_http_t *http;
	json_t *conv;          /* {"schema", "model", "messages"} */
	json_t *steps;         /* the trace: one object per tool call */
	bool ticked;           /* "thinking…" is on standard error's last line */
	long long usage[3];    /* prompt, completion, total tokens */
	int requests;
} agent_t;

/* ---- errors, with the key never in them ---- */

static void utf8_trim(char *s);

/* TEXT (LEN bytes) into OUT (SIZE bytes, at least 16), as a message may
 * show it: every occurrence of the key (of KEY_HIDE_MIN bytes or more) as
 * "[key]", control characters as spaces when FLAT, cut at a whole UTF-8
 * character to fit.  The key is hidden before the cut, so the cut never
 * leaves a part of it; where TEXT is cut, a key's first KEY_PREFIX_MIN
 * bytes or more at OUT's end (TEXT came cut already) are "[key]" too. */
static void hide_key(const agent_t *a, const char *text, size_t len, bool flat, char *out,
                     size_t size)
{
	size_t kl = a->key ? strlen(a->key) : 0, lim = size - 1, o = 0, i = 0;
	if (kl < KEY_HIDE_MIN)
		kl = 0;
	while (i < len) {
		if (kl && len - i >= kl && memcmp(text + i, a->key, kl) == 0) {
			if (o + 5 > lim)
				break;
			memcpy(out + o, "[key]", 5);
			o += 5;
			i += kl;
		} else if (o + 1 > lim)
			break;
		else {
			unsigned char c = (unsigned char)text[i++];
			out[o++] = flat && (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
		}
	}
	out[o] = '\0';
	if (i == len || !kl)
		return;
	utf8_trim(out);
	o = strlen(out);
	for (size_t k = kl - 1; k >= KEY_PREFIX_MIN; k--) {
		if (o < k || memcmp(out + o - k, a->key, k) != 0)
			continue;
		o -= k;
		if (o + 5 > lim) {
			out[lim - 5] = '\0';
			utf8_trim(out);
			o = strlen(out);
		}
		memcpy(out + o, "[key]", 6);
		break;
	}
}

/* One error line "kbox agent: ...", of at most ERROR_MAX bytes, with the
 * key hidden (an API may echo what it was given): see hide_key. */
static void agent_error(const agent_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void agent_error(const agent_t *a, const char *fmt, ...)
{
	char small[ERROR_MAX], *msg = small, out[ERROR_MAX];
	va_list ap;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0, small[0] = '\0';
	else if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1))) {
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	if (!msg) { /* out of memory: the start of it, cut */
		msg = small;
		n = (int)strlen(small);
	}
	hide_key(a, msg, (size_t)n, false, out, sizeof out);
	if (msg != small)
		free(msg);
	cli_error(CMD, "%s", out);
}

/* ---- options ---- */

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

static int opt_max_steps(const char *cmd, const cli_option_t *opt, const char *arg)
{
	int *v = opt->value;
	char *end;
	long n;
	errno = 0;
	n = strtol(arg, &end, 10);
	if (!*arg || *end || errno || n < 1 || n > MAX_STEPS_LIMIT || *arg == '+' || *arg == ' ') {
		cli_error(cmd, "invalid --max-steps \"%s\": expected a number of steps from 1 to %d",
		          arg, MAX_STEPS_LIMIT);
		return EXIT_USAGE;
	}
	*v = (int)n;
	return EXIT_OK;
}

/* Check the base URL (from WHERE: "--base-url" or "KBOX_BASE_URL") and make
 * the endpoint's URL of it.  EXIT_OK, or EXIT_USAGE after one line. */
static int make_url(agent_t *a, const char *base, const char *where)
{
	const char *host = NULL;
	size_t len = strlen(base);
	if (strncasecmp(base, "http://", 7) == 0)
		host = base + 7;
	else if (strncasecmp(base, "https://", 8) == 0)
		host = base + 8;
	for (const unsigned char *p = (const unsigned char *)base; host && *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			host = NULL;
	if (!host || !*host || *host == '/' || !cli_utf8(base)) {
		cli_error(CMD, "invalid %s \"%s\": expected an http:// or https:// URL, such as %s",
		          where, base, DEFAULT_BASE_URL);
		return EXIT_USAGE;
	}
	while (len && base[len - 1] == '/')
		len--;
	if ((size_t)snprintf(a->url, sizeof a->url, "%.*s/chat/completions", (int)len, base) >=
	    sizeof a->url) {
		cli_error(CMD, "invalid %s: longer than %zu bytes", where, sizeof a->url - 32);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* ---- one agent at a time on a session ---- */

/* Take SESSION_DIR/agent.lock (flock, exclusive, held until the process
 * ends): the fd, or -1 with *STATUS set after one line -- EXIT_BUSY when
 * another kbox agent holds it. */
static int agent_lock(const agent_t *a, int *status)
{
	char path[PATH_MAX + 32];
	int fd;

	snprintf(path, sizeof path, "%s/%s", a->dir, AGENT_LOCK);
	*status = EXIT_UNAVAILABLE;
	if ((fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		agent_error(a, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK) {
			agent_error(a, "session %s: another kbox agent is running on it", a->name);
			*status = EXIT_BUSY;
		} else
			agent_error(a, "cannot lock %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	*status = EXIT_OK;
	return fd;
}

/* ---- the conversation, kept in SESSION_DIR/agent.json ---- */

/* Whether J is a conversation this program wrote. */
static bool is_conversation(const json_t *j)
{
	const json_t *msgs = json_object_get(j, "messages"), *m;
	size_t i;
	if (!json_is_object(j) || !json_is_array(msgs) ||
	    !json_is_string(json_object_get(j, "schema")) ||
	    strcmp(json_string_value(json_object_get(j, "schema")), AGENT_SCHEMA) != 0)
		return false;
	json_array_foreach(msgs, i, m) if (!json_is_string(json_object_get(m, "role"))) return false;
	return true;
}

/* The system message of this run (new, or NULL): the intro, the limit
 * of -t when there is one (the tool's description says "no limit" for no
 * timeout, which -t overrides), the tool's description. */
static char *system_text(const agent_t *a)
{
	char limit[160] = "";
	size_t n;
	char *sys;
	if (a->timeout_ms > 0)
		snprintf(limit, sizeof limit, "Each call of %s is interrupted after %g seconds at "
		         "most; a \"timeout\" argument can only make that shorter. ",
		         CLI_TOOL_NAME, (double)a->timeout_ms / 1000.0);
	n = sizeof system_intro + strlen(limit) + strlen(cli_tool_description());
	if ((sys = malloc(n)))
		snprintf(sys, n, "%s%s%s", system_intro, limit, cli_tool_description());
	return sys;
}

/* Make the conversation CONV one an OpenAI server takes: an assistant
 * message without tool calls needs a content (older versions kept null). */
static void conv_repair(json_t *conv)
{
	json_t *m;
	size_t i;
	json_array_foreach(json_object_get(conv, "messages"), i, m)
	    if (strcmp(json_string_value(json_object_get(m, "role")), "assistant") == 0 &&
	        !json_array_size(json_object_get(m, "tool_calls")) &&
	        !json_is_string(json_object_get(m, "content")))
		json_object_set_new(m, "content", json_string(""));
}

/* The conversation kept in the session, or a new one (RESET, or none
 * kept): into A->conv, with this run's system message.  EXIT_OK, or
 * EXIT_UNAVAILABLE after one line. */
static int conv_load(agent_t *a, bool reset)
{
	char path[PATH_MAX + 32];
	json_error_t je;
	json_t *j = NULL;
	int fd;

	snprintf(path, sizeof path, "%s/%s", a->dir, AGENT_FILE);
	if (!reset && (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		j = json_loadfd(fd, 0, &je);
		close(fd);
		if (!is_conversation(j)) {
			agent_error(a, "%s is not a conversation of kbox agent (%s); start a new one with "
			            "--reset", path, j ? "not " AGENT_SCHEMA : je.text);
			json_decref(j);
			return EXIT_UNAVAILABLE;
		}
	} else if (!reset && errno != ENOENT) {
		agent_error(a, "cannot read %s: %s", path, strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	{
		char *sys = system_text(a);
		json_t *first = json_array_get(json_object_get(j, "messages"), 0);
		if (!j)
			j = sys ? json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "schema", AGENT_SCHEMA,
			                    "model", a->model, "messages", "role", "system", "content",
			                    sys)
			        : NULL;
		else if (sys && first &&
		         strcmp(json_string_value(json_object_get(first, "role")), "system") == 0)
			json_object_set_new(first, "content", json_string(sys)); /* ours: made anew */
		free(sys);
		if (!j || !sys) {
			agent_error(a, "out of memory");
			json_decref(j);
			return EXIT_UNAVAILABLE;
		}
	}
	conv_repair(j);
	json_object_set_new(j, "model", json_string(a->model));
	a->conv = j;
	return EXIT_OK;
}

/* Write the conversation to SESSION_DIR/agent.json (mode 0600): written
 * beside, then renamed over.  EXIT_OK, or EXIT_UNAVAILABLE after one line. */
static int conv_save(agent_t *a)
{
	char path[PATH_MAX + 32], tmp[PATH_MAX + 64];
	char *text = json_dumps(a->conv, JSON_COMPACT);
	int fd = -1, status = EXIT_UNAVAILABLE;
	size_t len;

	snprintf(path, sizeof path, "%s/%s", a->dir, AGENT_FILE);
	snprintf(tmp, sizeof tmp, "%s/.%s.%ld", a->dir, AGENT_FILE, (long)getpid());
	if (!text) {
		agent_error(a, "out of memory");
		return status;
	}
	len = strlen(text);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
	    fsync(fd) < 0 || rename(tmp, path) < 0) {
		agent_error(a, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
	} else
		status = EXIT_OK;
	if (fd >= 0)
		close(fd);
	free(text);
	return status;
}

static json_t *messages(agent_t *a)
{
	return json_object_get(a->conv, "messages");
}

/* ---- progress on standard error ---- */

static void tick(void *arg, double secs)
{
	agent_t *a = arg;
	fprintf(stderr, "\rthinking… %.0fs", secs);
	fflush(stderr);
	a->ticked = true;
}

/* Take "thinking…" away. */
static void tick_done(agent_t *a)
{
	if (a->ticked) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		a->ticked = false;
	}
}

/* TEXT on standard error, each line after PREFIX, made safe for a terminal. */
static void show_lines(const char *prefix, const char *text)
{
	const char *p = text;
	while (*p) {
		size_t n = strcspn(p, "\n");
		fputs(prefix, stderr);
		cli_write_safe(stderr, p, n);
		fputc('\n', stderr);
		p += n;
		if (*p)
			p++;
	}
	fflush(stderr);
}

/* Whether the line P (LEN bytes) is a value's label alone, "Out[N]:" (a
 * value of several lines starts on the next line). */
static bool bare_out(const char *p, size_t len)
{
	size_t i = 4;
	if (len < 7 || strncmp(p, "Out[", 4) != 0)
		return false;
	while (i < len && p[i] >= '0' && p[i] <= '9')
		i++;
	if (i == 4 || i + 1 >= len || p[i] != ']' || p[i + 1] != ':')
		return false;
	for (i += 2; i < len; i++)
		if (p[i] != ' ')
			return false;
	return true;
}

/* The one-line summary of a result's TEXT into OUT: its first non-empty
 * line (with the next one after a bare "Out[N]:"), cut, and how many more
 * there are. */
static void summary(const char *text, char *out, size_t size)
{
	const char *line[2] = {NULL, NULL};
	size_t len[2] = {0, 0}, found = 0, want = 1, more = 0, l;

	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		if (n && found < want) {
			line[found] = p;
			len[found++] = n;
			if (found == 1 && bare_out(p, n))
				want = 2;
		} else if (n)
			more++;
		p += n;
		if (*p)
			p++;
	}
	if (!found) {
		snprintf(out, size, "(no output)");
		return;
	}
	*out = '\0';
	for (size_t k = 0; k < found; k++) {
		size_t n = len[k];
		while (k == 0 && found == 2 && n && line[0][n - 1] == ' ')
			n--;
		l = strlen(out);
		if (n > 100)
			snprintf(out + l, size - l, "%s%.97s...", k ? " " : "", line[k]);
		else
			snprintf(out + l, size - l, "%s%.*s", k ? " " : "", (int)n, line[k]);
	}
	if (more) {
		l = strlen(out);
		snprintf(out + l, size - l, " (+%zu more line%s)", more, more == 1 ? "" : "s");
	}
}

/* ---- running code in the session ---- */

/* The request that runs CODE in the session, TIMEOUT_S seconds at most
 * (0: no limit): its result as JSON, with its text. */
static kbox_ctl_exec_t execute_request(const char *code, double timeout_s)
{
	kbox_ctl_exec_t e = KBOX_CTL_EXEC_INIT;
	e.code = code;
	e.format = KBOX_CTL_FMT_JSON;
	e.with_text = true;
	/* as the supervisor takes it, to the nearest millisecond; one beyond
	 * its range stays beyond it, and is refused */
	if (timeout_s > KBOX_CTL_DURATION_MAX_S)
		e.timeout_ms = (long long)(KBOX_CTL_DURATION_MAX_S + 1) * 1000;
	else if (timeout_s > 0)
		e.timeout_ms = (long long)(timeout_s * 1000.0 + 0.5);
	return e;
}

/* Run CODE in the session (TIMEOUT_S seconds at most, 0: no limit).  The
 * supervisor's reply (new reference) with "text" and "result", or one made
 * here for a supervisor that went away while the code ran; NULL with
 * *STATUS set after one line, when the session could not run it. */
static json_t *execute(agent_t *a, const char *code, double timeout_s, int *status)
{
	kbox_error_t err = {0};
	kbox_ctl_exec_t req = execute_request(code, timeout_s);
	for (int attempt = 0; attempt < 2; attempt++) {
		json_t *m = NULL;
		kbox_ctl_exec_end_t end;
		int fd = cli_session_connect(CMD, a->dir, a->name, false, status);
		if (fd < 0)
			return NULL;
		end = kbox_ctl_execute(fd, &req, -1, NULL, NULL, &m, &err);
		close(fd);
		if (end == KBOX_CTL_EXEC_REPLY)
			return m;
		if (end == KBOX_CTL_EXEC_NOT_SENT) {
			agent_error(a, "session %s: %s", a->name, err.msg);
			*status = EXIT_UNAVAILABLE;
			return NULL;
		}
		if (end == KBOX_CTL_EXEC_LOST_BEFORE) /* a supervisor that was stopping: the next one runs it */
			continue;
		return json_pack("{s:b, s:s, s:s, s:n}", "ok", 1, "status", "died", "text",
		                 "[kernel died: the session's supervisor went away; earlier state is "
		                 "lost]\n",
		                 "result");
	}
	agent_error(a, "session %s: the supervisor kept going away", a->name);
	*status = EXIT_UNAVAILABLE;
	return NULL;
}

/* Make S, valid UTF-8 but perhaps cut short by snprintf, end at a whole
 * character. */
static void utf8_trim(char *s)
{
	size_t n = strlen(s), i = n;
	while (i && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i && (unsigned char)s[i - 1] >= 0xc0) {
		unsigned char lead = (unsigned char)s[i - 1];
		size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
		if (n - (i - 1) < want)
			s[i - 1] = '\0';
	}
}

/* The text a model reads for a call that could not run: its arguments
 * were wrong.  Into OUT; false when they are right, with *CODE (borrowed
 * from ARGS_P's object, new) and *TIMEOUT_S set. */
static bool bad_call(const json_t *fn, json_t **args_p, const char **code, double *timeout_s,
                     char *out, size_t size)
{
	const char *name = json_string_value(json_object_get(fn, "name"));
	const json_t *raw = json_object_get(fn, "arguments");
	json_t *args = NULL, *t;
	const char *key;
	json_error_t je;
	static const char example[] = "{\"code\": \"print(1 + 1)\"}";

	*args_p = NULL;
	if (!name || strcmp(name, CLI_TOOL_NAME) != 0) {
		snprintf(out, size, "error: there is no tool \"%s\"; the only tool is %s, whose "
		         "arguments are a JSON object such as %s", name ? name : "(no name)",
		         CLI_TOOL_NAME, example);
		return true;
	}
	if (json_is_string(raw)) {
		args = json_loadb(json_string_value(raw), json_string_length(raw), JSON_DECODE_ANY,
		                  &je);
		if (!args) {
			snprintf(out, size, "error: the arguments are not valid JSON (%s, at character "
			         "%d); call %s again with a JSON object such as %s", je.text, je.position,
			         CLI_TOOL_NAME, example);
			return true;
		}
	} else if (raw) /* some servers give the value itself */
		args = json_incref((json_t *)raw);
	if (!json_is_object(args)) {
		static const char *const kinds[] = {"an object", "an array", "a string", "a number",
		                                    "a number", "true", "false", "null"};
		snprintf(out, size, "error: the arguments must be a JSON object, got %s; call %s "
		         "again with a JSON object such as %s",
		         args ? kinds[json_typeof(args)] : "nothing", CLI_TOOL_NAME, example);
		json_decref(args);
		return true;
	}
	json_object_foreach(args, key, t) {
		if (strcmp(key, "code") != 0 && strcmp(key, "timeout") != 0) {
			snprintf(out, size, "error: unknown argument \"%.200s\": %s takes only \"code\" "
			         "and \"timeout\", such as %s", key, CLI_TOOL_NAME, example);
			json_decref(args);
			return true;
		}
	}
	if (!json_is_string(json_object_get(args, "code"))) {
		snprintf(out, size, "error: the arguments must be a JSON object with the code as a "
		         "string \"code\", such as %s", example);
		json_decref(args);
		return true;
	}
	t = json_object_get(args, "timeout");
	if (t && !json_is_null(t) && (!json_is_number(t) || json_number_value(t) < 0)) {
		snprintf(out, size, "error: \"timeout\" must be a number of seconds, at least 0");
		json_decref(args);
		return true;
	}
	*code = json_string_value(json_object_get(args, "code"));
	*timeout_s = t && json_is_number(t) ? json_number_value(t) : 0;
	*args_p = args;
	return false;
}

/* The tool message and the trace's step of a call CALL of step STEP
 * that is not run: it is beyond the first MAX_CALLS of its response.
 * EXIT_OK, or EXIT_UNAVAILABLE after one line. */
static int not_run(agent_t *a, int step, json_t *call)
{
	static const char text[] = "error: not run: at most 16 tool calls of one response are "
	                           "run; call the tool again for the rest";
	const char *id = json_string_value(json_object_get(call, "id"));
	_Static_assert(MAX_CALLS == 16, "the text says 16");
	if (json_array_append_new(messages(a), json_pack("{s:s, s:s, s:s}", "role", "tool",
	                                                 "tool_call_id", id, "content", text)) < 0 ||
	    json_array_append_new(a->steps, json_pack("{s:i, s:s, s:n, s:s, s:s, s:[]}", "step",
	                                              step, "tool_call_id", id, "code", "status",
	                                              "rejected", "text", text, "images")) < 0) {
		agent_error(a, "out of memory");
		return EXIT_UNAVAILABLE;
	}
	return EXIT_OK;
}

/* Whether the request that runs CODE is longer than the session takes
 * (KBOX_CTL_REQUEST_MAX, the line with its newline): then the text a
 * model reads into OUT. */
static bool too_long(const char *code, double timeout_s, char *out, size_t size)
{
	kbox_ctl_exec_t e = execute_request(code, timeout_s);
	json_t *req = kbox_ctl_exec_to_json(&e);
	bool fits = !req || kbox_ctl_request_fits(req);
	json_decref(req);
	if (fits)
		return false;
	snprintf(out, size, "error: not run: the code is %zu bytes; at most %d MiB can run (as a "
	         "JSON string, in which a control character takes 6 bytes): make it shorter",
	         strlen(code), KBOX_CTL_CODE_MAX >> 20);
	return true;
}

/* Run the tool call CALL of step STEP, append its tool message to the
 * conversation and its step to the trace.  EXIT_OK (whatever the code
 * did: its errors are the model's to read), or another status after one
 * line when the session failed. */
static int tool_call(agent_t *a, int step, json_t *call)
{
	const char *id = json_string_value(json_object_get(call, "id"));
	json_t *fn = json_object_get(call, "function"), *args = NULL, *reply = NULL;
	json_t *images = json_array(), *rec;
	const char *code = NULL, *text, *st = "rejected";
	double timeout_s = 0, cap = (double)a->timeout_ms / 1000.0;
	char bad[1024], line[256], tag[32];
	int status = EXIT_OK;
	bool rejected;

	snprintf(tag, sizeof tag, "[step %d] ", step);
	rejected = bad_call(fn, &args, &code, &timeout_s, bad, sizeof bad);
	if (!rejected && cap > 0 && (timeout_s <= 0 || timeout_s > cap))
		timeout_s = cap;
	if (!rejected && too_long(code, timeout_s, bad, sizeof bad)) {
		rejected = true;
		code = NULL; /* the trace has none for a call not run */
	}
	if (rejected) {
		utf8_trim(bad);
		text = bad;
		fprintf(stderr, "%s", tag);
		show_lines("", bad);
	} else {
		json_t *result, *img;
		size_t i;
		fprintf(stderr, "%s%s:\n", tag, CLI_TOOL_NAME);
		show_lines("  | ", code);
		if (!(reply = execute(a, code, timeout_s, &status)))
			goto out;
		if (kbox_ctl_msg_kind(reply, NULL) != KBOX_CTL_MSG_REPLY) {
			const char *msg = json_string_value(json_object_get(reply, "error"));
			kbox_ctl_err_t kind = kbox_ctl_err_kind(reply);
			if (kind != KBOX_CTL_ERR_BUSY) {
				agent_error(a, "session %s: %s", a->name, msg ? msg : "the supervisor refused");
				status = kind == KBOX_CTL_ERR_USAGE ? EXIT_USAGE : EXIT_UNAVAILABLE;
				goto out;
			}
			/* other code held the kernel all that time: the model may try again */
			snprintf(bad, sizeof bad, "error: the session was busy running other code, and "
			         "this code did not run: %s", msg ? msg : "busy");
			text = bad;
			st = "busy";
		} else {
			text = json_string_value(json_object_get(reply, "text"));
			st = json_string_value(json_object_get(reply, "status"));
			if (!text || !*text)
				text = "(no output)";
			if (!st)
				st = "unknown";
		}
		result = json_object_get(reply, "result");
		json_array_foreach(json_object_get(result, "images"), i, img)
		    json_array_append(images, json_object_get(img, "path"));
		if (strcmp(st, "error") == 0 && json_is_object(json_object_get(result, "error"))) {
			const json_t *e = json_object_get(result, "error");
			snprintf(line, sizeof line, "%s: %s",
			         json_string_value(json_object_get(e, "ename")) ?: "Error",
			         json_string_value(json_object_get(e, "evalue")) ?: "");
		} else
			summary(text, line, sizeof line);
		fprintf(stderr, "%s%s, %.2fs: ", tag, st,
		        json_number_value(json_object_get(result, "seconds")));
		show_lines("", line);
	}
	json_array_append_new(messages(a), json_pack("{s:s, s:s, s:s}", "role", "tool",
	                                             "tool_call_id", id, "content", text));
	rec = json_pack("{s:i, s:s, s:s?, s:s, s:s, s:O}", "step", step, "tool_call_id", id, "code",
	                code, "status", st, "text", text, "images", images);
	json_array_append_new(a->steps, rec);
out:
	json_decref(images);
	json_decref(args);
	json_decref(reply);
	return status;
}

/* ---- talking to the model ---- */

/* TEXT made one line into OUT: control characters as spaces (nothing
 * for a terminal to obey), the key hidden, cut to fit. */
static void one_line(const agent_t *a, const char *text, char *out, size_t size)
{
	hide_key(a, text, strlen(text), true, out, size);
}

/* What the API said went wrong, from a response BODY (LEN bytes), into
 * OUT (one line, the key hidden, cut to fit): {"error": {"message"}},
 * {"error": "..."}, {"message"}, {"detail"}, else the body's first line. */
static void api_message(const agent_t *a, const char *body, size_t len, char *out, size_t size)
{
	json_t *j = json_loadb(body, len, 0, NULL), *e = json_object_get(j, "error");
	const char *m = json_string_value(json_object_get(e, "message"));
	if (!m)
		m = json_string_value(e);
	if (!m)
		m = json_string_value(json_object_get(j, "message"));
	if (!m)
		m = json_string_value(json_object_get(j, "detail"));
	if (!m) {
		while (len && (*body == ' ' || *body == '\n' || *body == '\r' || *body == '\t'))
			body++, len--;
		m = len ? body : "(an empty body)";
		len = len ? strcspn(body, "\r\n") : strlen(m);
	} else
		len = strlen(m);
	hide_key(a, m, len, true, out, size);
	json_decref(j);
}

/* Ask the model: the conversation and the tool.  The response's message
 * (new reference) and its finish_reason into FINISH ("" when none), or
 * NULL with *STATUS set after one line. */
static json_t *ask(agent_t *a, char *finish, size_t finish_size, int *status)
{
	json_t *req = json_pack("{s:s, s:O, s:[o], s:s}", "model", a->model, "messages",
	                        messages(a), "tools", cli_tool_openai(), "tool_choice", "auto");
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL, why[1024];
	json_t *reply = NULL, *resp = NULL, *msg = NULL, *usage;
	const char *err, *text;
	size_t text_len;
	int code, attempts;
	json_error_t je;

	*status = EXIT_UNAVAILABLE;
	json_decref(req);
	if (!body) {
		agent_error(a, "out of memory");
		return NULL;
	}
	a->requests++;
	reply = cli_http_post(a->http, a->url, body, HTTP_TIMEOUT_S, a->tty ? tick : NULL, a, why,
	                      sizeof why);
	free(body);
	tick_done(a);
	if (!reply) {
		agent_error(a, "%s", why);
		return NULL;
	}
	attempts = (int)json_integer_value(json_object_get(reply, "attempts"));
	snprintf(why, sizeof why, attempts > 1 ? " (after %d attempts)" : "", attempts);
	if ((err = json_string_value(json_object_get(reply, "error")))) {
		agent_error(a, "POST %s: %s%s", a->url, err, why);
		goto out;
	}
	code = (int)json_integer_value(json_object_get(reply, "status"));
	text = json_string_value(json_object_get(reply, "body"));
	text_len = json_string_length(json_object_get(reply, "body"));
	if (!text)
		text = "";
	if (code < 200 || code > 299) {
		char m[301];
		api_message(a, text, text_len, m, sizeof m);
		agent_error(a, "POST %s: HTTP %d%s: %s", a->url, code, why, m);
		goto out;
	}
	if (!(resp = json_loadb(text, text_len, 0, &je)) || !json_is_object(resp)) {
		agent_error(a, "POST %s: HTTP %d, but the response is not a JSON object%s%s", a->url,
		            code, resp ? "" : ": ", resp ? "" : je.text);
		goto out;
	}
	msg = json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "message");
	if (!json_is_object(msg)) {
		char m[301];
		if (json_object_get(resp, "error")) { /* an error, said with status 200 */
			api_message(a, text, text_len, m, sizeof m);
			agent_error(a, "POST %s: HTTP %d, but the response is an error: %s", a->url,
			            code, m);
		} else
			agent_error(a, "POST %s: HTTP %d, but the response has no choices[0].message",
			            a->url, code);
		msg = NULL;
		goto out;
	}
	one_line(a, json_string_value(json_object_get(json_array_get(json_object_get(resp, "choices"),
	                                                          0),
	                                           "finish_reason"))
	             ?: "",
	         finish, finish_size);
	if ((usage = json_object_get(resp, "usage"))) {
		a->usage[0] += json_integer_value(json_object_get(usage, "prompt_tokens"));
		a->usage[1] += json_integer_value(json_object_get(usage, "completion_tokens"));
		a->usage[2] += json_integer_value(json_object_get(usage, "total_tokens"));
	}
	json_incref(msg);
	*status = EXIT_OK;
out:
	json_decref(resp);
	json_decref(reply);
	return msg;
}

/* The assistant message to keep of the model's MSG: its role, content and
 * tool calls (each with an id: one is made when the server gave none),
 * nothing a server added (new reference). */
static json_t *assistant_message(const json_t *msg, int step)
{
	json_t *calls = json_object_get(msg, "tool_calls"), *keep = json_array(), *c;
	const json_t *content = json_object_get(msg, "content");
	json_t *out;
	size_t i;

	json_array_foreach(calls, i, c) {
		json_t *fn = json_object_get(c, "function");
		json_t *args = json_object_get(fn, "arguments");
		char id[64], *dumped = NULL;
		if (!json_is_object(fn))
			continue;
		if (!json_is_string(json_object_get(c, "id")))
			snprintf(id, sizeof id, "call_%d_%zu", step, i + 1);
		json_array_append_new(
		    keep, json_pack("{s:s, s:s, s:{s:O?, s:o}}", "id",
		                    json_is_string(json_object_get(c, "id"))
		                        ? json_string_value(json_object_get(c, "id"))
		                        : id,
		                    "type", "function", "function", "name", json_object_get(fn, "name"),
		                    "arguments",
		                    json_is_string(args) ? json_incref(args)
		                    : args && (dumped = json_dumps(args, JSON_COMPACT))
		                        ? json_string(dumped)
		                        : json_string("{}")));
		free(dumped);
	}
	out = json_pack("{s:s, s:O}", "role", "assistant", "content",
	                json_is_string(content) ? content : json_null());
	if (out && json_array_size(keep))
		json_object_set(out, "tool_calls", keep);
	json_decref(keep);
	return out;
}

/* ---- the command ---- */

/* Print the trace (--format json): STATUS_WORD, the ANSWER (may be NULL),
 * and ERROR (may be NULL, with its KIND). */
static void print_trace(agent_t *a, const char *status_word, const char *answer,
                        const char *kind, const char *error)
{
	json_t *t = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:O, s:{s:I, s:I, s:I}, s:i}", "schema",
	                      TRACE_SCHEMA, "status", status_word, "session", a->name, "model",
	                      a->model, "answer", answer, "steps", a->steps, "usage",
	                      "prompt_tokens", (json_int_t)a->usage[0], "completion_tokens",
	                      (json_int_t)a->usage[1], "total_tokens", (json_int_t)a->usage[2],
	                      "requests", a->requests);
	if (t && !answer)
		json_object_set_new(t, "answer", json_null());
	if (t && error)
		json_object_set_new(t, "error", json_pack("{s:s, s:s}", "kind", kind, "message", error));
	cli_print_json_line(t);
}

/* Read the question: OPERAND, or standard input for "-".  New, or NULL
 * after one line. */
static char *question_of(const char *operand)
{
	char *q;
	if (strcmp(operand, "-") != 0)
		q = strdup(operand);
	else if (!cli_take_stdin()) {
		cli_error(CMD, "standard input (-) given more than once");
		return NULL;
	} else if (!(q = cli_slurp(stdin))) {
		cli_error(CMD, "cannot read standard input: %s", cli_slurp_strerror(errno));
		return NULL;
	}
	if (!q) {
		cli_error(CMD, "out of memory");
		return NULL;
	}
	if (!cli_utf8(q) || !q[strspn(q, " \t\r\n")]) {
		cli_error(CMD, "%s", cli_utf8(q) ? "the question is empty"
		                                 : "the question is not valid UTF-8");
		free(q);
		return NULL;
	}
	return q;
}

int cmd_agent(int argc, char **argv)
{
	agent_t a = {.max_steps = DEFAULT_MAX_STEPS, .timeout_ms = DEFAULT_TIMEOUT_MS};
	const char *base = NULL;
	cli_strlist_t files = {0};
	bool reset = false;
	cli_option_t opts[] = {
	    CLI_OPT_SESSION(&a.name),
	    CLI_OPT_STRING('m', "model", "MODEL", &a.model, "the model to ask (default: $KBOX_MODEL)"),
	    CLI_OPT_STRING(0, "base-url", "URL", &base,
	                   "the API's base URL; requests go to URL/chat/completions (default: "
	                   "$KBOX_BASE_URL, else " DEFAULT_BASE_URL ")"),
	    CLI_OPT_LIST(0, "file", "HOSTPATH", &files,
	                 "copy HOSTPATH into the session's workspace first and name it to the "
	                 "model; repeatable, each with its own base name (default: none)"),
	    CLI_OPT_CALLBACK(0, "max-steps", "N", opt_max_steps, &a.max_steps,
	                     "stop when the model has called the tool in N responses without "
	                     "answering; each runs at most 16 of its tool calls (default: 20)"),
	    CLI_OPT_FLAG(0, "reset", &reset,
	                 "start a new conversation (default: go on with the session's)"),
	    CLI_OPT_CALLBACK('t', "timeout", "DURATION", cli_opt_duration, &a.timeout_ms,
	                     "interrupt each tool call's code after DURATION, as the model is told; "
	                     "0: no limit (default: 5m)"),
	    CLI_OPT_CALLBACK(0, "format", "FMT", opt_format, &a.format,
	                     "print the answer as text, or the whole trace as json (default: text)"),
	    CLI_OPT_JSON(0, &a.format),
	    CLI_OPT_END};
	char *question = NULL, *user = NULL, *key = NULL;
	int *in = NULL, lock = -1, status, n = cli_parse_options(CMD, opts, argc, argv, &status);
	const char *answer = NULL, *word = "failed";
	json_t *msg = NULL;
	char finish[64] = "";
	bool cut = false;
	int step = 0;

	if (n < 0)
		goto out;
	status = EXIT_USAGE;
	if (n != 1) {
		cli_error(CMD, n ? "give one question (quote it), or - to read it from standard input"
		                 : "no question: give QUESTION, or - to read it from standard input "
		                   "(see kbox agent --help)");
		goto out;
	}
	if (!(question = question_of(argv[0])))
		goto out;
	/* the files: each readable, a regular file, with a name the workspace takes */
	if (files.n && !(in = calloc(files.n, sizeof *in)))
		goto out;
	for (size_t i = 0; i < files.n; i++)
		in[i] = -1;
	for (size_t i = 0; i < files.n; i++) {
		char *copy = strdup(files.v[i]);
		int ok = copy && (in[i] = cli_ws_source(CMD, files.v[i])) >= 0 &&
		         cli_ws_check(CMD, basename(copy)) == 0;
		for (size_t j = 0; ok && j < i; j++) {
			char *other = strdup(files.v[j]);
			if (!other || strcmp(basename(other), basename(copy)) == 0) {
				if (other)
					cli_error(CMD, "two --file have the name %s", basename(copy));
				ok = 0;
			}
			free(other);
		}
		free(copy);
		if (!ok)
			goto out;
	}
	if (!a.model)
		a.model = getenv("KBOX_MODEL");
	if (!a.model || !*a.model) {
		cli_error(CMD, "no model: give --model MODEL, or set KBOX_MODEL");
		goto out;
	}
	if (!cli_utf8(a.model)) {
		cli_error(CMD, "the model's name is not valid UTF-8");
		goto out;
	}
	if (base ? make_url(&a, base, "--base-url") != EXIT_OK
	         : getenv("KBOX_BASE_URL") && *getenv("KBOX_BASE_URL")
	               ? make_url(&a, getenv("KBOX_BASE_URL"), "KBOX_BASE_URL") != EXIT_OK
	               : make_url(&a, DEFAULT_BASE_URL, "the default URL") != EXIT_OK)
		goto out;
	/* the key: ours alone from here on, not the environment's, which a
	 * session's supervisor started below would inherit and keep; the
	 * environment's strings are wiped where they are (the block that
	 * /proc/PID/environ shows), which unsetenv alone does not do */
	{
		static const char *const vars[] = {"KBOX_API_KEY", "OPENAI_API_KEY"};
		char *k = getenv(vars[0]);
		if (!k || !*k)
			k = getenv(vars[1]);
		if (k && *k && !(key = strdup(k))) {
			cli_error(CMD, "out of memory");
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		for (size_t i = 0; i < 2; i++) {
			if ((k = getenv(vars[i])))
				explicit_bzero(k, strlen(k));
			unsetenv(vars[i]);
		}
		a.key = key;
	}
	a.tty = isatty(STDERR_FILENO);

	/* the session, started now: the files go into its workspace */
	a.name = cli_session_name(a.name);
	if ((status = cli_check_session(CMD, a.name)) != EXIT_OK)
		goto out;
	if (!(a.dir = cli_session_dir(CMD, a.name, true, &status)))
		goto out;
	status = EXIT_UNAVAILABLE;
	if (!(a.http = cli_http_start(CMD, a.key)))
		goto out;
	{
		int fd = cli_session_connect(CMD, a.dir, a.name, false, &status);
		if (fd < 0)
			goto out;
		close(fd);
	}
	/* after the start: a session that could not start is not left behind
	 * with a lock in it; before the files: they are the running agent's */
	if ((lock = agent_lock(&a, &status)) < 0)
		goto out;
	for (size_t i = 0; i < files.n; i++) {
		char *copy = strdup(files.v[i]);
		status = copy ? cli_put(CMD, a.dir, in[i], files.v[i], basename(copy)) : EXIT_UNAVAILABLE;
		free(copy);
		if (status != EXIT_OK)
			goto out;
	}
	if ((status = conv_load(&a, reset)) != EXIT_OK)
		goto out;
	status = EXIT_UNAVAILABLE;
	if (!(a.steps = json_array()))
		goto out;
	/* the user's message: the question, and the files they gave */
	{
		size_t len = strlen(question) + 64, used;
		for (size_t i = 0; i < files.n; i++)
			len += strlen(files.v[i]) + 2;
		if (!(user = malloc(len)))
			goto out;
		used = (size_t)snprintf(user, len, "%s", question);
		for (size_t i = 0; i < files.n; i++) {
			char *copy = strdup(files.v[i]);
			used += (size_t)snprintf(user + used, len - used, "%s%s",
			                         i ? ", " : "\n\nFiles in /workspace: ",
			                         copy ? basename(copy) : "?");
			free(copy);
		}
		json_array_append_new(messages(&a), json_pack("{s:s, s:s}", "role", "user", "content",
		                                              user));
	}

	for (;;) {
		json_t *kept, *calls, *call;
		size_t i;

		if (!(msg = ask(&a, finish, sizeof finish, &status)))
			goto out;
		if (!(kept = assistant_message(msg, step + 1))) {
			agent_error(&a, "out of memory");
			goto out;
		}
		calls = json_object_get(kept, "tool_calls");
		if (!json_array_size(calls)) {
			const char *content = json_string_value(json_object_get(kept, "content"));
			const char *refusal = json_string_value(json_object_get(msg, "refusal"));
			char line[1024];
			if (content && *content) {
				json_array_append_new(messages(&a), kept);
				answer = content;
				if ((status = conv_save(&a)) != EXIT_OK)
					goto out;
				word = "answered";
				cut = strcmp(finish, "length") == 0 || strcmp(finish, "content_filter") == 0;
				break;
			}
			status = EXIT_UNAVAILABLE;
			if (refusal && *refusal) {
				/* kept as what the model said: the next question goes on after it */
				json_object_set_new(kept, "content", json_string(refusal));
				json_array_append_new(messages(&a), kept);
				one_line(&a, refusal, line, sizeof line);
				agent_error(&a, "the model refused: %s", line);
			} else {
				/* an assistant message needs content or tool calls: none is kept */
				json_decref(kept);
				agent_error(&a, "the model gave no answer (finish_reason: %s)",
				            *finish ? finish : "none");
			}
			if (conv_save(&a) != EXIT_OK)
				goto out;
			goto out;
		}
		json_array_append_new(messages(&a), kept);
		step++;
		if (json_is_string(json_object_get(kept, "content")) &&
		    *json_string_value(json_object_get(kept, "content"))) {
			char tag[32];
			snprintf(tag, sizeof tag, "[step %d] model: ", step);
			show_lines(tag, json_string_value(json_object_get(kept, "content")));
		}
		json_array_foreach(calls, i, call) {
			if (i < MAX_CALLS)
				status = tool_call(&a, step, call);
			else
				status = not_run(&a, step, call);
			if (status != EXIT_OK)
				goto out;
		}
		if (json_array_size(calls) > MAX_CALLS)
			fprintf(stderr, "[step %d] %zu more tool calls not run: at most %d of a response "
			        "are\n", step, json_array_size(calls) - MAX_CALLS, MAX_CALLS);
		if ((status = conv_save(&a)) != EXIT_OK)
			goto out;
		if (step >= a.max_steps) {
			agent_error(&a, "no answer after %d step%s (--max-steps %d); the conversation is "
			            "kept: kbox agent -s %s QUESTION goes on with it", step,
			            step == 1 ? "" : "s", a.max_steps, a.name);
			status = EXIT_STEP_LIMIT;
			word = "max_steps";
			goto out;
		}
		json_decref(msg);
		msg = NULL;
	}
	status = EXIT_OK;
	if (a.format == FMT_TEXT) {
		size_t len = strlen(answer);
		if (isatty(STDOUT_FILENO))
			cli_write_safe(stdout, answer, len);
		else
			fwrite(answer, 1, len, stdout);
		if (!len || answer[len - 1] != '\n')
			putchar('\n');
		fflush(stdout);
	}
	if (cut) {
		agent_error(&a, "the answer was cut off (finish_reason %s); it is printed as it came",
		            finish);
		status = EXIT_UNAVAILABLE;
		word = "failed";
	}
out:
	if (a.format == FMT_JSON && a.steps) {
		const char *kind = status == EXIT_USAGE         ? "usage"
		                   : status == EXIT_UNAVAILABLE ? "unavailable"
		                   : status == EXIT_BUSY        ? "busy"
		                                                : "failed";
		print_trace(&a, word, answer, kind,
		            status == EXIT_OK || status == EXIT_STEP_LIMIT ? NULL : cli_first_error());
	}
	json_decref(msg);
	cli_http_destroy(&a.http);
	json_decref(a.conv);
	json_decref(a.steps);
	for (size_t i = 0; in && i < files.n; i++)
		if (in[i] >= 0)
			close(in[i]);
	free(in);
	free(question);
	free(user);
	if (key) {
		explicit_bzero(key, strlen(key));
		free(key);
	}
	if (lock >= 0)
		close(lock);
	free(a.dir);
	cli_strlist_clear(&files);
	return status;
}
