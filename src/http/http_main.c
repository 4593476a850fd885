/* src/http/http_main.c — kbox-http: the HTTP helper of kbox agent.  It
 * POSTs JSON bodies with libcurl and answers each request with the final
 * response, retrying what may succeed later; kbox itself never loads
 * libcurl.  The protocol, the limits and the retry rules are in
 * http_proto.h. */
#include "config.h"
#include "http/http_proto.h"
#include "common/kx.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif

/* A response body being received, bounded by KBOX_HTTP_BODY_MAX. */
typedef struct {
	kx_buf_t buf;
	bool too_big;
} body_t;

/* What the headers of one response said that matters here. */
typedef struct {
	long retry_after_ms; /* -1: no (usable) Retry-After */
} headers_t;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	body_t *b = arg;
	size_t add = size * n;
	if (b->buf.len + add > (size_t)KBOX_HTTP_BODY_MAX) {
		b->too_big = true;
		return 0; /* curl stops: CURLE_WRITE_ERROR */
	}
	return kx_buf_append(&b->buf, p, add) == 0 ? add : 0;
}

/* Retry-After: delay-seconds or an HTTP-date (RFC 9110 10.2.3), capped at
 * KBOX_HTTP_RETRY_AFTER_MAX seconds. */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	headers_t *h = arg;
	size_t len = size * n;
	static const char name[] = "retry-after:";
	char value[128];
	size_t vl;
	long long secs = -1;

	if (len < sizeof name - 1 || strncasecmp(p, name, sizeof name - 1) != 0)
		return len;
	p += sizeof name - 1;
	len -= sizeof name - 1;
	while (len && (*p == ' ' || *p == '\t'))
		p++, len--;
	while (len && (p[len - 1] == '\r' || p[len - 1] == '\n' || p[len - 1] == ' '))
		len--;
	vl = len < sizeof value - 1 ? len : sizeof value - 1;
	memcpy(value, p, vl);
	value[vl] = '\0';
	if (vl && strspn(value, "0123456789") == vl)
		secs = vl > 6 ? KBOX_HTTP_RETRY_AFTER_MAX : strtoll(value, NULL, 10);
	else if (vl) {
		time_t t = curl_getdate(value, NULL);
		if (t != (time_t)-1)
			secs = t > time(NULL) ? (long long)(t - time(NULL)) : 0;
	}
	if (secs >= 0)
		h->retry_after_ms = (long)(secs > KBOX_HTTP_RETRY_AFTER_MAX
		                                   ? KBOX_HTTP_RETRY_AFTER_MAX
		                                   : secs) *
		                    1000;
	return size * n;
}

/* Sleep MS milliseconds, whatever signals come. */
static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Whether a transfer that failed with RC may succeed when tried again: the
 * connection could not be made or broke.  A timeout is final: the request
 * had all its time. */
static bool transient(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

/* Print REPLY (taken) as one line on standard output; exit when it cannot
 * be written (the client has gone). */
static void reply(json_t *j)
{
	char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!line) {
		line = strdup("{\"error\":\"kbox-http: out of memory\",\"attempts\":0}");
		if (!line)
			exit(1);
	}
	if (fputs(line, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) == EOF)
		exit(1);
	free(line);
}

static void reply_error(int attempts, const char *fmt, ...) KX_PRINTF(2, 3);
static void reply_error(int attempts, const char *fmt, ...)
{
	char msg[CURL_ERROR_SIZE + 512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	reply(json_pack("{s:s, s:i}", "error", msg, "attempts", attempts));
}

/* POST BODY to URL on CURL, with the retries of http_proto.h (at most
 * ATTEMPTS tries in all), and reply. */
static void post(CURL *curl, const char *url, const char *body, size_t body_len, double timeout,
                 int attempts)
{
	char errbuf[CURL_ERROR_SIZE];
	long backoff = KBOX_HTTP_BACKOFF_MS;
	body_t b = {KX_BUF_INIT, false};

	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)(timeout * 1000));
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
	for (int attempt = 1;; attempt++) {
		headers_t h = {-1};
		long status = 0;
		CURLcode rc;
		bool again;

		kx_buf_reset(&b.buf);
		b.too_big = false;
		errbuf[0] = '\0';
		curl_easy_setopt(curl, CURLOPT_HEADERDATA, &h);
		rc = curl_easy_perform(curl);
		if (rc == CURLE_OK)
			curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
		again = rc == CURLE_OK ? status == 429 || (status >= 500 && status <= 599)
		                       : transient(rc);
		if (again && attempt < attempts) {
			sleep_ms(h.retry_after_ms >= 0 ? h.retry_after_ms : backoff);
			backoff = backoff * 2 > KBOX_HTTP_BACKOFF_MAX_MS ? KBOX_HTTP_BACKOFF_MAX_MS
			                                                 : backoff * 2;
			continue;
		}
		if (b.buf.failed)
			reply_error(attempt, "out of memory for the response");
		else if (b.too_big || rc == CURLE_FILESIZE_EXCEEDED)
			reply_error(attempt, "the response is larger than %ld bytes",
			            KBOX_HTTP_BODY_MAX);
		else if (rc != CURLE_OK)
			reply_error(attempt, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
		else {
			size_t len;
			char *text = kx_utf8_repair(b.buf.data ? b.buf.data : "", b.buf.len, &len);
			/* the line, then the body as it is: no escaping to make it
			 * larger, nothing for the client to scan */
			if (!text)
				reply(NULL);
			else {
				reply(json_pack("{s:i, s:I, s:i}", "status", (int)status,
				                "body_bytes", (json_int_t)len, "attempts",
				                attempt));
				if (fwrite(text, 1, len, stdout) != len || fflush(stdout) == EOF)
					exit(1);
			}
			free(text);
		}
		break;
	}
	kx_buf_reset(&b.buf);
}

/* The key from the environment as an Authorization header (new), or NULL
 * without one; the environment's copy is wiped, so that /proc/PID/environ
 * no longer shows it. */
static char *take_key(void)
{
	char *key = getenv(KBOX_HTTP_KEY_ENV), *header = NULL;
	size_t n;
	if (!key || !*key)
		return NULL;
	n = strlen(key) + sizeof "Authorization: Bearer ";
	if ((header = malloc(n)))
		snprintf(header, n, "Authorization: Bearer %s", key);
	explicit_bzero(key, strlen(key));
	unsetenv(KBOX_HTTP_KEY_ENV);
	return header;
}

int main(int argc, char **argv)
{
	char *line = NULL, *auth;
	size_t cap = 0;
	ssize_t n;
	CURL *curl;
	struct curl_slist *headers = NULL;

	(void)argv;
	/* before anything is opened: no socket may become its stdout */
	if (kx_std_fds_open() < 0) {
		fprintf(stderr, "%s: cannot open /dev/null: %s\n", KBOX_HTTP_PROGRAM,
		        strerror(errno));
		return 1;
	}
#ifdef HAVE_SYS_PRCTL_H
	/* it dies with kbox agent; its memory (the key) is not another
	 * process's to read */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	prctl(PR_SET_DUMPABLE, 0);
#endif
	signal(SIGPIPE, SIG_IGN);
	if (argc != 1) {
		fprintf(stderr, "%s: takes no arguments; it is run by kbox agent (http_proto.h)\n",
		        KBOX_HTTP_PROGRAM);
		return 2;
	}
	auth = take_key();
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(curl = curl_easy_init())) {
		fprintf(stderr, "%s: libcurl could not be initialised\n", KBOX_HTTP_PROGRAM);
		return 1;
	}
	headers = curl_slist_append(headers, "Content-Type: application/json");
	headers = curl_slist_append(headers, "Accept: application/json");
	headers = curl_slist_append(headers, "Expect:"); /* no 100-continue round trip */
	if (auth)
		headers = curl_slist_append(headers, auth);
	if (!headers) {
		fprintf(stderr, "%s: out of memory\n", KBOX_HTTP_PROGRAM);
		return 1;
	}
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, (long)KBOX_HTTP_CONNECT_TIMEOUT);
	curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, PACKAGE_NAME "/" PACKAGE_VERSION);
	curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)KBOX_HTTP_BODY_MAX);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);

	while ((n = getline(&line, &cap, stdin)) > 0) {
		json_error_t je;
		json_t *req = json_loadb(line, (size_t)n, 0, &je);
		const char *url = json_string_value(json_object_get(req, "url"));
		json_t *body = json_object_get(req, "body");
		json_t *timeout = json_object_get(req, "timeout");
		json_t *attempts = json_object_get(req, "attempts");

		if (!req)
			reply_error(0, "%s: the request is not JSON: %s", KBOX_HTTP_PROGRAM,
			            je.text);
		else if (!url || !json_is_string(body) || !json_is_number(timeout) ||
		         json_number_value(timeout) <= 0 ||
		         (attempts &&
		          (!json_is_integer(attempts) || json_integer_value(attempts) < 1 ||
		           json_integer_value(attempts) > KBOX_HTTP_MAX_ATTEMPTS)))
			reply_error(0,
			            "%s: a request is {\"url\": STRING, \"body\": STRING, "
			            "\"timeout\": SECONDS, \"attempts\": 1 to %d (optional)}",
			            KBOX_HTTP_PROGRAM, KBOX_HTTP_MAX_ATTEMPTS);
		else
			post(curl, url, json_string_value(body), json_string_length(body),
			     json_number_value(timeout),
			     attempts ? (int)json_integer_value(attempts) : KBOX_HTTP_MAX_ATTEMPTS);
		json_decref(req);
	}
	free(line);
	curl_slist_free_all(headers);
	curl_easy_cleanup(curl);
	curl_global_cleanup();
	if (auth) {
		explicit_bzero(auth, strlen(auth));
		free(auth);
	}
	return 0;
}
