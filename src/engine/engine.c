/* src/engine/engine.c — a client of a container engine's Engine API over
 * its unix socket (engine.h).  Sources: moby's api/docs/v1.41.yaml (the
 * /_ping Api-Version header, ErrorResponse's "message", the log stream's
 * 8-byte frame headers) and its api/server/middleware/version.go (the 400
 * that names the minimum version); Podman's compat handlers (its
 * Libpod-Api-Version header on every reply). */
#include "config.h"
#include "engine/engine.h"
#include "engine/engine_proto.h"
#include "common/kx.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

const char *ke_kind_name(ke_kind_t kind)
{
	switch (kind) {
	case KE_E_NO_DAEMON:
		return "no-daemon";
	case KE_E_DENIED:
		return "denied";
	case KE_E_NO_IMAGE:
		return "no-image";
	case KE_E_CONFLICT:
		return "conflict";
	case KE_E_USAGE:
		return "usage";
	case KE_E_NONE:
		return "none";
	case KE_E_ENGINE:
		break;
	}
	return "engine";
}

int ke_error(ke_error_t *err, ke_kind_t kind, const char *fmt, ...)
{
	va_list ap;
	if (!err)
		return -1;
	err->kind = kind;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	return -1;
}

int ke_socket_path(const char *value, char *out, size_t size, ke_error_t *err)
{
	const char *p = value;
	if (!p || !*p)
		p = KE_DEFAULT_SOCKET;
	else if (strncmp(p, "unix://", 7) == 0)
		p += 7;
	else if (p[0] != '/')
		return ke_error(err, KE_E_USAGE,
		                "engine \"%s\": kbox needs the engine on this machine, over its "
		                "unix socket (unix:///PATH): the kernel's sockets are files here",
		                value);
	if (p[0] != '/' || strlen(p) >= size || strlen(p) >= 108)
		return ke_error(err, KE_E_USAGE,
		                "engine \"%s\": not an absolute path of at most 107 bytes", value);
	snprintf(out, size, "%s", p);
	return 0;
}

/* "1.41" into *MAJOR, *MINOR; 0 or -1. */
static int parse_version(const char *s, int *major, int *minor)
{
	char *end;
	long a, b;
	if (!s || !*s)
		return -1;
	errno = 0;
	a = strtol(s, &end, 10);
	if (end == s || *end != '.' || errno)
		return -1;
	s = end + 1;
	b = strtol(s, &end, 10);
	if (end == s || *end || errno || a < 0 || b < 0 || a > 1000 || b > 1000)
		return -1;
	*major = (int)a;
	*minor = (int)b;
	return 0;
}

int ke_pick_api(const char *server, char *out, size_t size, ke_error_t *err)
{
	int major, minor;
	if (parse_version(server, &major, &minor) < 0)
		return ke_error(err, KE_E_ENGINE,
		                "the engine's API version \"%s\" is not a version",
		                server ? server : "");
	if (major > KE_API_MAX_MAJOR || (major == KE_API_MAX_MAJOR && minor > KE_API_MAX_MINOR)) {
		major = KE_API_MAX_MAJOR;
		minor = KE_API_MAX_MINOR;
	}
	if (major < KE_API_MAX_MAJOR || minor < KE_API_MIN_MINOR)
		return ke_error(
		        err, KE_E_ENGINE,
		        "the engine speaks API %s; kbox needs %d.%d or newer (Docker 19.03, "
		        "Podman 2)",
		        server, KE_API_MAX_MAJOR, KE_API_MIN_MINOR);
	snprintf(out, size, "%d.%d", major, minor);
	return 0;
}

int ke_min_api_in(const char *message, char *out, size_t size)
{
	static const char key[] = "Minimum supported API version is ";
	const char *p = message ? strstr(message, key) : NULL;
	char v[16];
	size_t n = 0;
	int major, minor;
	if (!p)
		return -1;
	p += sizeof key - 1;
	while (n < sizeof v - 1 && (p[n] == '.' || (p[n] >= '0' && p[n] <= '9')))
		n++;
	memcpy(v, p, n);
	v[n] = '\0';
	if (n && v[n - 1] == '.')
		v[n - 1] = '\0';
	if (parse_version(v, &major, &minor) < 0)
		return -1;
	snprintf(out, size, "%d.%d", major, minor);
	return 0;
}

int ke_reply_error(long status, const char *body, const char *what, ke_error_t *err)
{
	json_t *j = body ? json_loads(body, JSON_DECODE_ANY, NULL) : NULL;
	const char *m = json_string_value(json_object_get(j, "message"));
	char text[768];
	ke_kind_t kind = KE_E_ENGINE;
	size_t n;

	if (m && *m)
		snprintf(text, sizeof text, "%s", m);
	else if (body && *body && !j) {
		/* (not JSON: the first line, as it is) */
		n = strcspn(body, "\r\n");
		snprintf(text, sizeof text, "%.*s", (int)(n < 400 ? n : 400), body);
	} else
		snprintf(text, sizeof text, "HTTP status %ld", status);
	if (status == 409)
		kind = KE_E_CONFLICT;
	else if (status == 404 &&
	         (strcasestr(text, "no such image") || strcasestr(text, "image not known") ||
	          strcasestr(text, "pull access denied")))
		kind = KE_E_NO_IMAGE;
	json_decref(j);
	return ke_error(err, kind, "%s: %s", what, text);
}

int ke_demux(ke_demux_t *d, const char *p, size_t n,
             int (*out)(void *arg, int stream, const char *bytes, size_t len), void *arg)
{
	while (n > 0) {
		if (d->left == 0) {
			size_t take = sizeof d->head - d->have_head;
			if (take > n)
				take = n;
			memcpy(d->head + d->have_head, p, take);
			d->have_head += take;
			p += take;
			n -= take;
			if (d->have_head < sizeof d->head)
				return 0;
			d->have_head = 0;
			d->stream = d->head[0];
			d->left = (unsigned long)d->head[4] << 24 |
			          (unsigned long)d->head[5] << 16 | (unsigned long)d->head[6] << 8 |
			          (unsigned long)d->head[7];
			continue;
		}
		size_t take = n < d->left ? n : d->left;
		if (out(arg, d->stream, p, take) != 0)
			return -1;
		d->left -= take;
		p += take;
		n -= take;
	}
	return 0;
}

/* ---- requests ---- */

typedef struct {
	kx_buf_t buf;
	bool too_big;
} body_t;

/* The most of a reply kept (an inspect is some KiB; a list of images,
 * more). */
#define REPLY_MAX (16u << 20)

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	body_t *b = arg;
	size_t add = size * n;
	if (b->buf.len + add > REPLY_MAX) {
		b->too_big = true;
		return 0;
	}
	return kx_buf_append(&b->buf, p, add) == 0 ? add : 0;
}

/* The request headers of a body: JSON (Docker refuses another type).
 * Made once, for the process's life (handles borrow it). */
static struct curl_slist *json_headers(void)
{
	static struct curl_slist *h;
	if (!h)
		h = curl_slist_append(NULL, "Content-Type: application/json");
	return h;
}

void *ke_easy(const ke_engine_t *e, const char *method, const char *path, const char *body)
{
	char url[4096];
	CURL *c = curl_easy_init();
	if (!c || !json_headers()) {
		curl_easy_cleanup(c);
		return NULL;
	}
	if (e->api[0])
		snprintf(url, sizeof url, "http://localhost/v%s%s", e->api, path);
	else
		snprintf(url, sizeof url, "http://localhost%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, e->socket);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, PACKAGE_NAME "/" PACKAGE_VERSION);
	if (strcmp(method, "GET") != 0) {
		/* (an empty body said as such: else libcurl reads standard
		 * input for it) */
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
		                 (curl_off_t)(body ? strlen(body) : 0));
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, json_headers());
		if (strcmp(method, "POST") != 0)
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	return c;
}

int ke_transfer_error(const ke_engine_t *e, void *easy, int code, const char *what, ke_error_t *err)
{
	long oserr = 0;
	curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &oserr);
	struct stat st;
	if (code == CURLE_COULDNT_CONNECT &&
	    (oserr == ENOENT || oserr == ECONNREFUSED || oserr == ENOTDIR || oserr == ENOTSOCK) &&
	    stat(e->socket, &st) == 0 && !S_ISSOCK(st.st_mode))
		return ke_error(err, KE_E_NO_DAEMON,
		                "%s is not a socket (a %s): name the engine's socket with "
		                "DOCKER_HOST=unix:///PATH when the session starts",
		                e->socket, S_ISDIR(st.st_mode) ? "directory" : "file");
	if (code == CURLE_COULDNT_CONNECT &&
	    (oserr == ENOENT || oserr == ECONNREFUSED || oserr == ENOTDIR || oserr == ENOTSOCK))
		return ke_error(
		        err, KE_E_NO_DAEMON,
		        "no container engine at %s (%s): start dockerd (or podman system "
		        "service), or name its socket with DOCKER_HOST=unix:///PATH when the "
		        "session starts",
		        e->socket, strerror((int)oserr));
	if (code == CURLE_COULDNT_CONNECT && (oserr == EACCES || oserr == EPERM))
		return ke_error(err, KE_E_DENIED,
		                "not allowed to use the container engine at %s (%s): its socket is "
		                "root's and the group docker's; membership is root-equivalent",
		                e->socket, strerror((int)oserr));
	return ke_error(err, KE_E_ENGINE, "%s: the engine at %s: %s", what, e->socket,
	                curl_easy_strerror((CURLcode)code));
}

int ke_call(const ke_engine_t *e, const char *method, const char *path, const char *body,
            long timeout_s, long *status, json_t **reply, ke_error_t *err)
{
	body_t b = {0};
	CURL *c = ke_easy(e, method, path, body);
	CURLcode rc;
	char what[512];
	int ret = 0;

	if (reply)
		*reply = NULL;
	if (!c)
		return ke_error(err, KE_E_ENGINE, "out of memory");
	snprintf(what, sizeof what, "%s %s", method, path);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK) {
		if (b.too_big)
			ret = ke_error(err, KE_E_ENGINE, "%s: a reply of more than %u bytes", what,
			               REPLY_MAX);
		else
			ret = ke_transfer_error(e, c, rc, what, err);
	} else {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
		if (reply && b.buf.len) {
			char *text = kx_buf_take(&b.buf, NULL);
			*reply = json_loads(text, JSON_DECODE_ANY, NULL);
			/* (not JSON: kept as a string, for the error) */
			if (!*reply)
				*reply = json_string(text);
			free(text);
		}
	}
	kx_buf_reset(&b.buf);
	curl_easy_cleanup(c);
	return ret;
}

/* ---- ping ---- */

typedef struct {
	char api[16], engine[16];
} ping_headers_t;

static size_t on_ping_header(char *p, size_t size, size_t n, void *arg)
{
	ping_headers_t *h = arg;
	size_t len = size * n, v;
	static const char api[] = "api-version:", libpod[] = "libpod-api-version:";
	const char *val = NULL;
	char *dst = NULL;
	size_t dsize = 0;
	if (len > sizeof libpod - 1 && strncasecmp(p, libpod, sizeof libpod - 1) == 0) {
		snprintf(h->engine, sizeof h->engine, "podman");
		return len;
	}
	if (len > sizeof api - 1 && strncasecmp(p, api, sizeof api - 1) == 0) {
		val = p + sizeof api - 1;
		dst = h->api;
		dsize = sizeof h->api;
	}
	if (!dst)
		return len;
	while (val < p + len && (*val == ' ' || *val == '\t'))
		val++;
	v = (size_t)(p + len - val);
	while (v && (val[v - 1] == '\r' || val[v - 1] == '\n' || val[v - 1] == ' '))
		v--;
	snprintf(dst, dsize, "%.*s", (int)(v < dsize ? v : dsize - 1), val);
	return len;
}

int ke_open(ke_engine_t *e, ke_error_t *err)
{
	const char *v = getenv(KE_SOCKET_ENV);
	ping_headers_t h = {"", "docker"};
	body_t b = {0};
	long status = 0;
	json_t *j = NULL;
	CURL *c;
	CURLcode rc;
	int ret = -1;

	memset(e, 0, sizeof *e);
	if (ke_socket_path(v && *v ? v : getenv("DOCKER_HOST"), e->socket, sizeof e->socket, err) <
	    0)
		return -1;
	if (!(c = ke_easy(e, "GET", "/_ping", NULL)))
		return ke_error(err, KE_E_ENGINE, "out of memory");
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_ping_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	if ((rc = curl_easy_perform(c)) != CURLE_OK) {
		ke_transfer_error(e, c, rc, "GET /_ping", err);
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200) {
		kx_buf_appends(&b.buf, "");
		ke_reply_error(status, b.buf.data, "GET /_ping", err);
		goto out;
	}
	if (!h.api[0]) {
		ke_error(err, KE_E_ENGINE,
		         "%s answers, but not as a container engine (no Api-Version header)",
		         e->socket);
		goto out;
	}
	if (ke_pick_api(h.api, e->api, sizeof e->api, err) < 0)
		goto out;
	snprintf(e->engine, sizeof e->engine, "%s", h.engine);
	/* the engine's own version, and the oldest API it takes */
	if (ke_call(e, "GET", "/version", NULL, 30, &status, &j, err) < 0)
		goto out;
	if (status == 200) {
		snprintf(e->version, sizeof e->version, "%s",
		         json_string_value(json_object_get(j, "Version"))
		                 ? json_string_value(json_object_get(j, "Version"))
		                 : "");
		snprintf(e->min_api, sizeof e->min_api, "%s",
		         json_string_value(json_object_get(j, "MinAPIVersion"))
		                 ? json_string_value(json_object_get(j, "MinAPIVersion"))
		                 : "");
	} else if (status == 400) {
		/* (newer than us: it names its oldest) */
		const char *m = json_string_value(json_object_get(j, "message"));
		char min[16];
		if (ke_min_api_in(m, min, sizeof min) < 0) {
			ke_reply_error(status, m, "GET /version", err);
			goto out;
		}
		snprintf(e->api, sizeof e->api, "%s", min);
		snprintf(e->min_api, sizeof e->min_api, "%s", min);
	}
	ret = 0;
out:
	json_decref(j);
	kx_buf_reset(&b.buf);
	curl_easy_cleanup(c);
	return ret;
}
