/* src/http/http_proto.h — the protocol between kbox agent and kbox-http, the
 * helper program that makes its HTTP requests (so that kbox itself never
 * links or loads libcurl).  Included by both sides: src/agent/http.c and
 * src/http/http_main.c.
 *
 * kbox-http lives in pkglibexecdir, as kbox-supervisor does, and is found
 * the same way.  Its argv is its name alone.  Its standard input and
 * output are one end of a stream socket (or pipes) to its one client; its
 * standard error is the client's.
 *
 * Its other client is the session supervisor, for the host functions of
 * kbox-functions(5) that POST their arguments to a URL: one kbox-http per
 * call, with "attempts": 1 (a POST is not to be repeated), no API key.
 *
 * The API key is in its environment only, KBOX_HTTP_KEY_ENV: never in its
 * argv, a request line or a reply.  When that variable is set and not
 * empty, each request carries "Authorization: Bearer KEY"; otherwise no
 * Authorization header at all (a local server that wants none).
 *
 * Requests: one JSON object per line on standard input, UTF-8:
 *
 *   {"url": "https://api.openai.com/v1/chat/completions",
 *    "body": "{\"model\": ...}",           the request body, JSON text as a string
 *    "timeout": 600,                      seconds each attempt may take in all
 *    "attempts": 1}                       optional: at most this many attempts
 *                                         (1 to KBOX_HTTP_MAX_ATTEMPTS, the default)
 *
 * POSTed with "Content-Type: application/json".  Only http and https, no
 * redirects (a 3xx is a response like any other), a connect timeout of
 * KBOX_HTTP_CONNECT_TIMEOUT, one connection kept alive across requests.
 *
 * Retries: a 429, a 5xx, and a failure to connect, send or receive are
 * tried again, up to KBOX_HTTP_MAX_ATTEMPTS attempts in all, after
 * KBOX_HTTP_BACKOFF_MS, then twice as long each time (at most
 * KBOX_HTTP_BACKOFF_MAX_MS); a Retry-After header (seconds, or an
 * HTTP-date) sets the wait instead, capped at KBOX_HTTP_RETRY_AFTER_MAX
 * seconds.  Any other response (2xx, 3xx, other 4xx) is final at once.
 *
 * Replies: one JSON object per line on standard output, one per request,
 * in order:
 *
 *   {"status": 200, "body_bytes": N, "attempts": 1}
 *       the last response: its HTTP status and its body, after ATTEMPTS
 *       attempts.  The body follows the line as it is, N bytes of UTF-8
 *       (invalid UTF-8 replaced with U+FFFD), with no newline after it:
 *       not escaped into a JSON string, which would make a body of
 *       control characters six times as long for the client to read;
 *   {"error": "MESSAGE", "attempts": 5}
 *       no response: MESSAGE says why (curl's words, with the host), or
 *       the body was larger than KBOX_HTTP_BODY_MAX bytes.
 *
 * A request line that is not such an object gets an error reply too.
 * kbox-http exits 0 at the end of its input, and dies with its parent.
 */
#ifndef KBOX_HTTP_PROTO_H
#define KBOX_HTTP_PROTO_H

#define KBOX_HTTP_PROGRAM "kbox-http"
#define KBOX_HTTP_KEY_ENV "KBOX_HTTP_API_KEY"

#define KBOX_HTTP_MAX_ATTEMPTS 5
#define KBOX_HTTP_BACKOFF_MS 500
#define KBOX_HTTP_BACKOFF_MAX_MS 8000
#define KBOX_HTTP_RETRY_AFTER_MAX 60
#define KBOX_HTTP_CONNECT_TIMEOUT 30
/* The largest response body kept; a longer one is an error. */
#define KBOX_HTTP_BODY_MAX (64L << 20)
/* The longest reply line (the body is not in it); a request line has no
 * limit but the client's memory. */
#define KBOX_HTTP_REPLY_LINE_MAX 65536

#endif
