/* src/agent/chat.c — kbox agent and the model: the endpoint's URL, the
 * API key (read from the environment, handed to kbox-http in its
 * environment, never written anywhere), one Chat Completions request
 * through kbox-http and what its response says, and the error lines,
 * with the key never in them. */
#include "config.h"
#include "agent/agent_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* How long one request to the model may take (each attempt). */
#define HTTP_TIMEOUT_S 600.0
/* A key shorter than this is not hidden in messages: too short to tell
 * from their text. */
#define KEY_HIDE_MIN 8
/* Where a message is cut, a key's first bytes (this many or more) at its
 * end are hidden too. */
#define KEY_PREFIX_MIN 4
/* The longest error line (first_error in main.c keeps 1024 bytes). */
#define ERROR_MAX 1000

/* ---- errors, with the key never in them ---- */

/* Make S, valid UTF-8 but perhaps cut short, end at a whole character. */
static void trim(char *s)
{
	size_t n = strlen(s);
	s[kx_utf8_floor(s, n, n)] = '\0';
}

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
	trim(out);
	o = strlen(out);
	for (size_t k = kl - 1; k >= KEY_PREFIX_MIN; k--) {
		if (o < k || memcmp(out + o - k, a->key, k) != 0)
			continue;
		o -= k;
		if (o + 5 > lim) {
			out[lim - 5] = '\0';
			trim(out);
			o = strlen(out);
		}
		memcpy(out + o, "[key]", 6);
		break;
	}
}

/* See agent_int.h; the key is hidden as hide_key says. */
void agent_error(const agent_t *a, const char *fmt, ...)
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
	cli_error(AGENT_CMD, "%s", out);
}

/* ---- the endpoint and the key ---- */

/* Whether HOST (after the scheme, to its end) begins with an authority
 * curl will take: [user@]NAME or [user@][IPv6], then :PORT (1 to 65535)
 * or nothing, up to '/', '?', '#' or the end.  WHY gets what is wrong. */
static bool authority_ok(const char *host, const char **why)
{
	size_t n = strcspn(host, "/?#");
	const char *at = memchr(host, '@', n), *p = at ? at + 1 : host, *end = host + n;
	*why = NULL;
	if (p == end)
		*why = "no host";
	else if (*p == '[') {
		const char *close = memchr(p, ']', (size_t)(end - p));
		char in[64];
		struct in6_addr a6;
		if (!close || (size_t)(close - p - 1) >= sizeof in) {
			*why = "an IPv6 address without its ']'";
			return false;
		}
		snprintf(in, sizeof in, "%.*s", (int)(close - p - 1), p + 1);
		if (inet_pton(AF_INET6, in, &a6) != 1)
			*why = "not an IPv6 address in '[...]'";
		p = close + 1;
	} else {
		while (p < end &&
		       (isalnum((unsigned char)*p) || *p == '.' || *p == '-' || *p == '_'))
			p++;
		if (p == (at ? at + 1 : host))
			*why = "no host";
	}
	if (!*why && p < end) {
		char *stop;
		long port;
		if (*p != ':') {
			*why = "a host name with characters no host name has";
			return false;
		}
		if (p + 1 == end) /* an empty port: the scheme's */
			return true;
		errno = 0;
		port = strtol(p + 1, &stop, 10);
		if (stop != end || errno || port < 1 || port > 65535 ||
		    !isdigit((unsigned char)p[1]))
			*why = "a port that is no number from 1 to 65535";
	}
	return !*why;
}

int agent_set_url(agent_t *a, const char *base, const char *where)
{
	const char *why;
	const char *host = NULL;
	size_t len = strlen(base);
	if (strncasecmp(base, "http://", 7) == 0)
		host = base + 7;
	else if (strncasecmp(base, "https://", 8) == 0)
		host = base + 8;
	for (const unsigned char *p = (const unsigned char *)base; host && *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			host = NULL;
	if (!host || !*host || *host == '/' || !kx_utf8_valid(base, strlen(base))) {
		cli_error(AGENT_CMD,
		          "invalid %s \"%s\": expected an http:// or https:// URL, such as %s",
		          where, base, AGENT_DEFAULT_BASE_URL);
		return EXIT_USAGE;
	}
	if (!authority_ok(host, &why)) {
		cli_error(AGENT_CMD, "invalid %s \"%s\": %s (expected a URL such as %s)", where,
		          base, why, AGENT_DEFAULT_BASE_URL);
		return EXIT_USAGE;
	}
	while (len && base[len - 1] == '/')
		len--;
	if ((size_t)snprintf(a->url, sizeof a->url, "%.*s/chat/completions", (int)len, base) >=
	    sizeof a->url) {
		cli_error(AGENT_CMD, "invalid %s: longer than %zu bytes", where,
		          sizeof a->url - 32);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int agent_take_key(agent_t *a)
{
	static const char *const vars[] = {"KBOX_API_KEY", "OPENAI_API_KEY"};
	char *k = getenv(vars[0]);

	/* ours alone from here on, not the environment's; its strings are
	 * wiped where they are (the block that /proc/PID/environ shows),
	 * which unsetenv alone does not do */
	if (!k || !*k)
		k = getenv(vars[1]);
	if (k && *k && !(a->key = strdup(k))) {
		cli_error(AGENT_CMD, "out of memory");
		return EXIT_UNAVAILABLE;
	}
	for (size_t i = 0; i < 2; i++) {
		if ((k = getenv(vars[i])))
			explicit_bzero(k, strlen(k));
		unsetenv(vars[i]);
	}
	return EXIT_OK;
}

/* ---- one request ---- */

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

void agent_one_line(const agent_t *a, const char *text, char *out, size_t size)
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

/* Send the conversation and the tool to the model through kbox-http: the
 * helper's reply (new) with a 2xx "status" and the "body", or NULL after
 * one line. */
static json_t *post(agent_t *a)
{
	json_t *req = json_pack("{s:s, s:O, s:[o], s:s}", "model", a->model, "messages",
	                        agent_messages(a), "tools", cli_tool_openai(a->functions_text),
	                        "tool_choice", "auto");
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL, why[1024], m[301];
	const char *err, *text;
	json_t *reply;
	int code, attempts;

	json_decref(req);
	if (!body) {
		agent_error(a, "out of memory");
		return NULL;
	}
	a->requests++;
	reply = agent_http_post(a->http, a->url, body, HTTP_TIMEOUT_S, a->tty ? tick : NULL, a, why,
	                        sizeof why);
	free(body);
	tick_done(a);
	if (!reply) {
		agent_error(a, "%s", why);
		return NULL;
	}
	attempts = (int)json_integer_value(json_object_get(reply, "attempts"));
	snprintf(why, sizeof why, attempts > 1 ? " (after %d attempts)" : "", attempts);
	code = (int)json_integer_value(json_object_get(reply, "status"));
	text = json_string_value(json_object_get(reply, "body"));
	if ((err = json_string_value(json_object_get(reply, "error"))))
		agent_error(a, "POST %s: %s%s", a->url, err, why);
	else if (code < 200 || code > 299) {
		api_message(a, text ? text : "", json_string_length(json_object_get(reply, "body")),
		            m, sizeof m);
		agent_error(a, "POST %s: HTTP %d%s: %s", a->url, code, why, m);
	} else
		return reply;
	json_decref(reply);
	return NULL;
}

json_t *agent_ask(agent_t *a, char *finish, size_t finish_size, int *status)
{
	json_t *reply, *resp = NULL, *choice, *msg = NULL, *usage;
	const char *text;
	size_t text_len;
	json_error_t je;
	char m[301];
	int code;

	*status = EXIT_UNAVAILABLE;
	if (!(reply = post(a)))
		return NULL;
	code = (int)json_integer_value(json_object_get(reply, "status"));
	text = json_string_value(json_object_get(reply, "body"));
	text_len = json_string_length(json_object_get(reply, "body"));
	if (!text)
		text = "";
	if (!(resp = json_loadb(text, text_len, 0, &je)) || !json_is_object(resp)) {
		agent_error(a, "POST %s: HTTP %d, but the response is not a JSON object%s%s",
		            a->url, code, resp ? "" : ": ", resp ? "" : je.text);
		goto out;
	}
	choice = json_array_get(json_object_get(resp, "choices"), 0);
	msg = json_object_get(choice, "message");
	if (!json_is_object(msg)) {
		if (json_object_get(resp, "error")) { /* an error, said with status 200 */
			api_message(a, text, text_len, m, sizeof m);
			agent_error(a, "POST %s: HTTP %d, but the response is an error: %s", a->url,
			            code, m);
		} else
			agent_error(a,
			            "POST %s: HTTP %d, but the response has no choices[0].message",
			            a->url, code);
		msg = NULL;
		goto out;
	}
	agent_one_line(a, json_string_value(json_object_get(choice, "finish_reason")) ?: "", finish,
	               finish_size);
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
