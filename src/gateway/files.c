/* src/gateway/files.c — kbox-gateway put, get and list: a gateway
 * session's files, on the Jupyter server, through its contents API
 * (jupyter_server's services/contents: GET, PUT, PATCH, DELETE of
 * /api/contents/PATH, a file's bytes as base64 in JSON), and a file got
 * from its file handler (GET /files/PATH, the bytes as they are: 128 MiB
 * in 0.24 s here, where the contents API takes 13 s and 5.6 s of
 * kbox-gateway's CPU) when that sends the size the API said.  A Kernel
 * Gateway or Enterprise Gateway has no such API: kind "no-contents".
 *
 * Bounded: a PUT carries KG_FILE_CHUNK bytes (a larger file goes in
 * parts, LargeFileManager's "chunk", to a file beside it that replaces
 * it when whole); a file got is at most KG_FILE_MAX bytes, since the API
 * sends it whole in one reply. */
#include "config.h"
#include "gateway/gateway_int.h"
#include "gateway/gateway_proto.h"
#include "common/kx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define CALL_TIMEOUT_S 30
#define PART_TIMEOUT_S 300 /* one part of KG_FILE_CHUNK bytes, or a file got */
#define PATH_MAX_BYTES 4096
#define LIST_BODY_MAX (32 << 20) /* a directory's listing */

/* The stop kbox asked for (a signal: the caller ended, say), which ends
 * the wait of a request (gw_set_cancel) and of the file being read. */
static int stop_fd = -1;

const char *kg_path_refused(const char *path)
{
	size_t n = strlen(path);
	const char *p = path;
	if (n == 0)
		return "the path is empty";
	if (n > PATH_MAX_BYTES)
		return "the path is too long";
	if (path[0] == '/')
		return "the path is absolute";
	if (path[n - 1] == '/')
		return "the path ends in '/'";
	for (const char *c = path; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return "a name with a control character cannot go through the Jupyter "
			       "server's API";
		if (*c == '\\')
			return "a name with a backslash cannot go through the Jupyter server's API "
			       "(a server on Windows takes it for '/')";
	}
	while (*p) { /* each component: not empty, ".", or ".." */
		size_t len = strcspn(p, "/");
		if (len == 0 || (len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.'))
			return "an empty, \".\" or \"..\" component is refused";
		p += len + (p[len] == '/');
	}
	return NULL;
}

bool kg_path_valid(const char *path)
{
	return !kg_path_refused(path);
}

/* "/api/contents/" and PATH percent-encoded but its '/', then QUERY
 * (NULL: none), in OUT.  0, or -1 when it does not fit. */
static int api_path(const char *path, const char *query, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = (size_t)snprintf(out, size, "/api/contents/");
	for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
		bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		             (*c >= '0' && *c <= '9') || strchr("-._~/", *c);
		if (o + 4 >= size)
			return -1;
		if (plain)
			out[o++] = (char)*c;
		else {
			out[o++] = '%';
			out[o++] = hex[*c >> 4];
			out[o++] = hex[*c & 15];
		}
	}
	out[o] = '\0';
	if (query && (size_t)snprintf(out + o, size - o, "?%s", query) >= size - o)
		return -1;
	return 0;
}

/* An error for a reply that is not what WHAT wanted: the server's words. */
static int reply_error(const gw_t *g, gw_error_t *err, const char *what, const char *path,
                       long code, const json_t *out)
{
	char said[PATH_MAX_BYTES + 64];
	snprintf(said, sizeof said, "%s %s", what, path);
	gw_reply_error(g, err, said, code, out);
	/* (the path or the request: a hidden name, a directory where a file
	 * goes, a name taken) */
	if (code == 400 || code == 409)
		err->kind = GW_E_USAGE;
	return -1;
}

int kg_contents_probe(gw_t *g, gw_error_t *err)
{
	json_t *out = NULL;
	long code = gw_call(g, "GET", "/api/contents?content=0", NULL, CALL_TIMEOUT_S, &out, err);
	int rc = 0;
	/* (a wrong path in the URL has no API at all: said so) */
	if ((code == 404 || code == 405) && kg_no_api(g, GW_E_NO_CONTENTS, err))
		rc = -1;
	else if (code == 404 || code == 405)
		rc = gw_error(err, GW_E_NO_CONTENTS,
		              "the Jupyter server at %s has no contents API (/api/contents): it "
		              "is a Kernel Gateway or an Enterprise Gateway, whose kernels keep "
		              "their files themselves: write and read files from the code, or "
		              "give the kernels a volume (Enterprise Gateway: KERNEL_WORKING_DIR "
		              "with EG_MIRROR_WORKING_DIRS)",
		              gw_url(g));
	else if (code >= 0 && code != 200)
		rc = reply_error(g, err, "reading", "/", code, out);
	else if (code < 0)
		rc = -1;
	json_decref(out);
	return rc;
}

/* The model of PATH, without its content, in *MODEL (new).  0; -1 with
 * ERR (kind "not-found" when there is none). */
static int stat_path(gw_t *g, const char *path, json_t **model, gw_error_t *err)
{
	char api[3 * PATH_MAX_BYTES + 64];
	long code;
	*model = NULL;
	if (api_path(path, "content=0", api, sizeof api) < 0)
		return gw_error(err, GW_E_USAGE, "%s: the path is too long", path);
	code = gw_call(g, "GET", api, NULL, CALL_TIMEOUT_S, model, err);
	if (code < 0)
		return -1;
	if (code == 404) {
		json_decref(*model);
		*model = NULL;
		return gw_error(err, GW_E_NOT_FOUND, "%s: no such file or directory on the server",
		                path);
	}
	if (code != 200 || !json_is_object(*model)) {
		reply_error(g, err, "reading", path, code, *model);
		json_decref(*model);
		*model = NULL;
		return -1;
	}
	return 0;
}

/* PUT BODY to PATH (SHOWN names it); 0, or -1 with ERR. */
static int put_model(gw_t *g, const char *path, const char *shown, json_t *body, long timeout_s,
                     gw_error_t *err)
{
	char api[3 * PATH_MAX_BYTES + 64];
	json_t *out = NULL;
	long code;
	if (api_path(path, NULL, api, sizeof api) < 0)
		return gw_error(err, GW_E_USAGE, "%s: the path is too long", path);
	code = gw_call(g, "PUT", api, body, timeout_s, &out, err);
	if (code >= 0 && code != 200 && code != 201)
		reply_error(g, err, "writing", shown, code, out);
	json_decref(out);
	return code == 200 || code == 201 ? 0 : -1;
}

/* DELETE PATH (a file not there is no error); 0, or -1 with ERR. */
static int delete_path(gw_t *g, const char *path, gw_error_t *err)
{
	char api[3 * PATH_MAX_BYTES + 64];
	json_t *out = NULL;
	long code;
	if (api_path(path, NULL, api, sizeof api) < 0)
		return gw_error(err, GW_E_USAGE, "%s: the path is too long", path);
	code = gw_call(g, "DELETE", api, NULL, CALL_TIMEOUT_S, &out, err);
	if (code >= 0 && code != 204 && code != 200 && code != 404)
		reply_error(g, err, "removing", path, code, out);
	json_decref(out);
	return code == 204 || code == 200 || code == 404 ? 0 : -1;
}

int kg_make_dirs(gw_t *g, const char *path, gw_error_t *err)
{
	char prefix[PATH_MAX_BYTES + 1];
	json_t *body = json_pack("{s:s}", "type", "directory");
	size_t n = strlen(path);
	int rc = 0;
	if (!body || n > PATH_MAX_BYTES) {
		json_decref(body);
		return gw_error(err, GW_E_USAGE, "%s: the path is too long", path);
	}
	/* each prefix that ends a component, shortest first (a PUT of a
	 * directory there already is no error) */
	for (size_t i = 1; i <= n && rc == 0; i++)
		if (i == n || path[i] == '/') {
			memcpy(prefix, path, i);
			prefix[i] = '\0';
			rc = put_model(g, prefix, prefix, body, CALL_TIMEOUT_S, err);
		}
	json_decref(body);
	return rc;
}

/* Read up to SIZE bytes of FD into BUF (fewer only at its end).  The
 * count, or -1 with errno (ECANCELED: a stop). */
static ssize_t read_full(int fd, char *buf, size_t size)
{
	size_t got = 0;
	while (got < size) {
		struct pollfd p[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
		ssize_t n;
		if (poll(p, stop_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			return -1;
		if (p[1].revents) {
			errno = ECANCELED;
			return -1;
		}
		n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* PUT the LEN bytes of DATA to PATH (SHOWN names it) as a file, as part
 * CHUNK (0: whole). */
static int put_bytes(gw_t *g, const char *path, const char *shown, const char *data, size_t len,
                     int chunk, gw_error_t *err)
{
	char *b64 = kx_base64_encode(data, len, NULL);
	json_t *body = b64 ? json_pack("{s:s, s:s, s:s}", "type", "file", "format", "base64",
	                               "content", b64)
	                   : NULL;
	int rc;
	free(b64);
	if (!body)
		return gw_error(err, GW_E_USAGE, "out of memory");
	if (chunk)
		json_object_set_new(body, "chunk", json_integer(chunk));
	rc = put_model(g, path, shown, body, PART_TIMEOUT_S, err);
	json_decref(body);
	return rc;
}

/* The descriptor of the argument FD, or -1. */
static int arg_fd(const char *text)
{
	char *end;
	long fd;
	errno = 0;
	fd = strtol(text, &end, 10);
	if (errno || *end || end == text || fd < 0 || fd > 65535 || fcntl((int)fd, F_GETFD) < 0)
		return -1;
	return (int)fd;
}

/* ---- the session's paths ---- */


static bool stop_asked(void *arg)
{
	struct pollfd p = {stop_fd, POLLIN, 0};
	(void)arg;
	return stop_fd >= 0 && poll(&p, 1, 0) > 0;
}

/* Take SIGTERM, SIGINT and SIGHUP as a stop of G's requests. */
static void take_stops(gw_t *g)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	stop_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	gw_set_cancel(g, stop_asked, NULL);
}

/* A path of the session: DIR (its directory on the server) and REL in
 * it, as the user gave it; FULL, the API path: DIR/REL without REL's
 * empty and "." components; SLASH, whether REL ended in '/'. */
typedef struct {
	const char *dir, *rel;
	char full[PATH_MAX_BYTES + 1];
	bool slash;
} spath_t;

/* Fill P of DIR and REL.  0, or -1 with ERR (kind "usage"). */
static int spath(spath_t *p, const char *dir, const char *rel, gw_error_t *err)
{
	size_t o = strlen(dir), n = strlen(rel);
	const char *why;
	p->dir = dir;
	p->rel = rel;
	p->slash = n && rel[n - 1] == '/';
	if (!kg_path_valid(dir) || o >= sizeof p->full)
		return gw_error(err, GW_E_USAGE, "\"%s\" is not a directory kbox-gateway takes",
		                dir);
	memcpy(p->full, dir, o);
	for (const char *c = rel; *c;) {
		size_t len = strcspn(c, "/");
		if (len == 2 && c[0] == '.' && c[1] == '.')
			return gw_error(err, GW_E_USAGE, "%s: a path with \"..\" is refused", rel);
		if (len && !(len == 1 && c[0] == '.')) {
			if (o + 1 + len >= sizeof p->full)
				return gw_error(err, GW_E_USAGE, "%s: the path is too long", rel);
			p->full[o++] = '/';
			memcpy(p->full + o, c, len);
			o += len;
		}
		c += len + (c[len] == '/');
	}
	p->full[o] = '\0';
	if (rel[0] == '/')
		return gw_error(err, GW_E_USAGE, "%s: the path is absolute", rel);
	if ((why = kg_path_refused(p->full)))
		return gw_error(err, GW_E_USAGE, "%s: %s", rel, why);
	return 0;
}

/* The type of the API path PATH ("file", "directory", "notebook") in
 * TYPE (16 bytes), "" when there is none, its size in *SIZE (-1: not
 * said).  0, or -1 with ERR. */
/* PATH's type ("" when there is none), size (-1: unknown) and, when
 * STAMP (KG_STAMP_MAX) is given, "SIZE@LAST_MODIFIED" ("" when the server
 * says no time), which changes when the file does. */
static int type_stamp(gw_t *g, const char *path, char *type, long long *size, char *stamp,
                      gw_error_t *err)
{
	json_t *model = NULL;
	const char *t;
	type[0] = '\0';
	*size = -1;
	if (stamp)
		stamp[0] = '\0';
	if (stat_path(g, path, &model, err) < 0) {
		if (err->kind != GW_E_NOT_FOUND)
			return -1;
		*err = (gw_error_t){0};
		return 0;
	}
	t = json_string_value(json_object_get(model, "type"));
	snprintf(type, 16, "%s", t ? t : "file");
	if (json_is_integer(json_object_get(model, "size")))
		*size = (long long)json_integer_value(json_object_get(model, "size"));
	if (stamp && (t = json_string_value(json_object_get(model, "last_modified"))) &&
	    strlen(t) < KG_STAMP_MAX - 24 && !strpbrk(t, " \t\n"))
		snprintf(stamp, KG_STAMP_MAX, "%lld@%s", *size, t);
	json_decref(model);
	return 0;
}

static int type_of(gw_t *g, const char *path, char *type, long long *size, gw_error_t *err)
{
	return type_stamp(g, path, type, size, NULL, err);
}

/* PATH's directory, "" for the root, in OUT (PATH_MAX_BYTES + 1). */
static void parent_of(const char *path, char *out)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	memcpy(out, path, n);
	out[n] = '\0';
}

/* FD's bytes (the first HAVE of them in BUF, which holds KG_FILE_CHUNK +
 * 1) to a new file beside PATH, in parts when over KG_FILE_CHUNK, which
 * then replaces PATH (EXISTS: there is one): so a symbolic link at PATH is
 * replaced, not written through, and the file there is whole or as it
 * was.  SHOWN names PATH in errors. */
static int write_new(gw_t *g, const char *path, const char *shown, bool exists, int fd, char *buf,
                     size_t have, unsigned long long *total, gw_error_t *err)
{
	char part[PATH_MAX_BYTES + 32];
	unsigned char rnd[4];
	json_t *model = NULL, *body = NULL;
	int chunk = 1, rc = -1;
	bool made = false;
	ssize_t n;

	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
		return gw_error(err, GW_E_USAGE, "no random bytes: %s", strerror(errno));
	snprintf(part, sizeof part, "%s.kbox-part-%02x%02x%02x%02x", path, rnd[0], rnd[1], rnd[2],
	         rnd[3]);
	/* BUF holds KG_FILE_CHUNK + 1 bytes read (fewer: the file's end), so
	 * that the last part is known as such (-1) */
	*total = 0;
	for (;;) {
		size_t len = have > (size_t)KG_FILE_CHUNK ? (size_t)KG_FILE_CHUNK : have;
		bool last = have <= (size_t)KG_FILE_CHUNK;
		/* (a file of one part goes whole: any contents manager takes it;
		 * a request cut short may have made the file: it is removed) */
		made = true;
		if (put_bytes(g, part, shown, buf, len, last ? (chunk == 1 ? 0 : -1) : chunk, err) <
		    0)
			goto out;
		*total += len;
		chunk++;
		if (last)
			break;
		memmove(buf, buf + len, have - len);
		have -= len;
		if ((n = read_full(fd, buf + have, (size_t)KG_FILE_CHUNK + 1 - have)) < 0) {
			gw_error(err, GW_E_USAGE, "reading the file: %s", strerror(errno));
			goto out;
		}
		have += (size_t)n;
	}
	/* the whole of it there? (a contents manager that does not take
	 * parts keeps the last one) */
	if (stat_path(g, part, &model, err) < 0)
		goto out;
	if (!json_is_integer(json_object_get(model, "size")) ||
	    (unsigned long long)json_integer_value(json_object_get(model, "size")) != *total) {
		gw_error(err, GW_E_SERVER,
		         "writing %s: the server kept %lld of its %llu bytes: its contents manager "
		         "does not take a file in parts (jupyter_server's LargeFileManager does); "
		         "a file of at most %ld MiB goes whole",
		         shown, (long long)json_integer_value(json_object_get(model, "size")),
		         *total, KG_FILE_CHUNK >> 20);
		goto out;
	}
	json_decref(model);
	model = NULL;
	/* PATCH does not replace: the old file goes first (the new one is
	 * whole beside it meanwhile) */
	if (exists && delete_path(g, path, err) < 0)
		goto out;
	{
		char api[3 * PATH_MAX_BYTES + 64];
		json_t *out = NULL;
		long code;
		body = json_pack("{s:s}", "path", path);
		if (api_path(part, NULL, api, sizeof api) < 0 || !body) {
			gw_error(err, GW_E_USAGE, "%s: the path is too long", path);
			goto out;
		}
		code = gw_call(g, "PATCH", api, body, CALL_TIMEOUT_S, &out, err);
		if (code >= 0 && code != 200)
			reply_error(g, err, "renaming the new file to", shown, code, out);
		json_decref(out);
		if (code != 200 && exists) {
			/* the old file is gone: the new one stays, whole, and is
			 * said, by the name kbox get takes (SHOWN's, and the
			 * part's suffix) */
			size_t len = strlen(err->msg);
			snprintf(err->msg + len, sizeof err->msg - len,
			         " (the file is there as %.200s%s)", shown, part + strlen(path));
			made = false;
		}
		if (code != 200)
			goto out;
	}
	made = false;
	rc = 0;
out:
	if (made) { /* (even after a stop) */
		gw_error_t e2 = {0};
		gw_set_cancel(g, NULL, NULL);
		delete_path(g, part, &e2);
	}
	json_decref(model);
	json_decref(body);
	return rc;
}

/* P's path in the session's directory DIR, as kbox get takes it. */
static const char *in_dir(const spath_t *p, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(p->full, dir, n) == 0 && p->full[n] == '/' ? p->full + n + 1 : p->full;
}

/* The start of a command on REL in the session's directory DIR: the
 * server (its line on standard input), the stops watched, the path
 * checked into P.  The server, or NULL with ERR. */
static gw_t *cmd_begin(spath_t *p, const char *dir, const char *rel, gw_error_t *err)
{
	gw_t *g = kg_server_from_stdin(err);
	if (!g)
		return NULL;
	take_stops(g);
	if (spath(p, dir, rel, err) < 0)
		gw_destroy(&g);
	return g;
}

/* The end of a command that did (RC 0) or did not do what it was asked:
 * its error line, if any, says a stop that cut it short. */
static int cmd_end(gw_t **g, int rc, gw_error_t *err)
{
	if (rc && stop_asked(NULL))
		gw_error(err, GW_E_USAGE, "stopped");
	if (rc)
		kg_say_error(1, err);
	gw_destroy(g);
	return rc;
}

int kg_cmd_put(const char *dir, const char *rel, const char *fdarg, const char *name)
{
	gw_error_t err = {0};
	char parent[PATH_MAX_BYTES + 1], type[16], ptype[16], *buf = NULL;
	unsigned long long total = 0;
	long long size;
	spath_t p;
	int fd, rc = 1;
	ssize_t n;
	gw_t *g = cmd_begin(&p, dir, rel, &err);

	if (!g)
		goto out;
	if (*name && (strchr(name, '/') || !kg_path_valid(name))) {
		gw_error(&err, GW_E_USAGE, "\"%s\" is not a file's name", name);
		goto out;
	}
	if ((fd = arg_fd(fdarg)) < 0) {
		gw_error(&err, GW_E_USAGE, "\"%s\" is not an open descriptor", fdarg);
		goto out;
	}
	/* the session's directory is made; none in it (as in a workspace) */
	if (kg_contents_probe(g, &err) < 0 || kg_make_dirs(g, dir, &err) < 0)
		goto out;
	/* the directory it goes in must be one (asked first: the server
	 * fails a path through a file with a 500) */
	parent_of(p.full, parent);
	if (!p.slash && strcmp(parent, dir) != 0) {
		if (type_of(g, parent, ptype, &size, &err) < 0)
			goto out;
		if (strcmp(ptype, "directory") != 0) {
			gw_error(&err, GW_E_USAGE,
			         *ptype ? "%s: %s is not a directory"
			                : "%s: its directory does not exist (none is made: make it "
			                  "in the code)",
			         rel, parent + strlen(dir) + 1);
			goto out;
		}
	}
	if (type_of(g, p.full, type, &size, &err) < 0)
		goto out;
	if (strcmp(type, "directory") == 0) {
		/* a directory: the file goes in it, under NAME */
		size_t len = strlen(p.full);
		if (!*name) {
			gw_error(&err, GW_E_USAGE, "%s is a directory: give the file's name in it",
			         rel);
			goto out;
		}
		if (len + 1 + strlen(name) >= sizeof p.full) {
			gw_error(&err, GW_E_USAGE, "%s: the path is too long", rel);
			goto out;
		}
		snprintf(p.full + len, sizeof p.full - len, "/%s", name);
		if (type_of(g, p.full, type, &size, &err) < 0)
			goto out;
		if (strcmp(type, "directory") == 0) {
			gw_error(&err, GW_E_USAGE, "%s%s%s is a directory", rel, p.slash ? "" : "/",
			         name);
			goto out;
		}
	} else if (p.slash) {
		gw_error(&err, GW_E_USAGE,
		         *type ? "%s is not a directory"
		               : "directory %s does not exist (none is made: make it in the code)",
		         rel);
		goto out;
	}
	/* a part and a byte: is there more? */
	if (!(buf = malloc((size_t)KG_FILE_CHUNK + 1))) {
		gw_error(&err, GW_E_USAGE, "out of memory");
		goto out;
	}
	if ((n = read_full(fd, buf, (size_t)KG_FILE_CHUNK + 1)) < 0) {
		gw_error(&err, GW_E_USAGE, "reading the file: %s", strerror(errno));
		goto out;
	}
	if (!*type && n <= KG_FILE_CHUNK) { /* new and small: in one request */
		if (put_bytes(g, p.full, rel, buf, (size_t)n, 0, &err) < 0)
			goto out;
		total = (unsigned long long)n;
	} else if (write_new(g, p.full, in_dir(&p, dir), *type != '\0', fd, buf, (size_t)n, &total,
	                     &err) < 0)
		goto out;
	kg_say(1, json_pack("{s:{s:o, s:I}}", "put", "path", kg_jtext(p.full), "size",
	                    (json_int_t)total));
	rc = 0;
out:
	free(buf);
	return cmd_end(&g, rc, &err);
}

/* PATH, SIZE bytes by the contents API, from the server's file handler
 * (GET /files/PATH: jupyter_server's, which sends the file's bytes as
 * they are, neither base64 nor JSON) to FD: 1 when the bytes there are
 * those SIZE bytes; 0, FD empty again, when the server has no such
 * handler or its reply is not those SIZE bytes whole (longer, cut short
 * as the file shrank, announced as of another length: the contents API
 * is asked then, and says what is wrong); -1 with ERR, FD empty again,
 * when the server cannot be reached or FD not written (SHOWN names
 * PATH).  Only a file: for a notebook the handler of a server whose
 * contents are not on its disk sends its model rewritten, not its
 * bytes. */
static int get_raw(gw_t *g, const char *path, const char *shown, int fd, long long size,
                   gw_error_t *err)
{
	char api[3 * PATH_MAX_BYTES + 64];
	long long got = 0;
	bool other = false;
	struct stat st;
	long code;
	/* (FD is made empty again: a regular file, kbox's memfd) */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != 0)
		return 0;
	if (api_path(path, NULL, api, sizeof api) < 0)
		return 0;
	/* "/api/contents/" to "/files/" */
	memmove(api + 7, api + 14, strlen(api + 14) + 1);
	memcpy(api, "/files/", 7);
	code = gw_get_to_fd(g, api, PART_TIMEOUT_S, fd, size, shown, &got, &other, err);
	if (code == 200 && !other && got == size)
		return 1;
	/* (what came is not the file: FD empty again, and on a failure too) */
	if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		if (code < 0)
			return -1;
		return gw_error(err, GW_E_USAGE, "writing %s here: %s", shown, strerror(errno));
	}
	return code < 0 ? -1 : 0;
}

int kg_cmd_get(const char *dir, const char *rel, const char *fdarg, const char *maxarg,
               const char *since)
{
	long long max = KG_FILE_MAX;
	gw_error_t err = {0};
	char api[3 * PATH_MAX_BYTES + 64], type[16], stamp[KG_STAMP_MAX];
	json_t *out = NULL;
	const char *content;
	unsigned char *data = NULL;
	long long size;
	size_t len = 0;
	spath_t p;
	long code;
	int fd, rc = 1;
	gw_t *g = cmd_begin(&p, dir, rel, &err);

	if (!g)
		goto out;
	if ((fd = arg_fd(fdarg)) < 0) {
		gw_error(&err, GW_E_USAGE, "\"%s\" is not an open descriptor", fdarg);
		goto out;
	}
	if (*maxarg && ((max = strtoll(maxarg, NULL, 10)) <= 0 || max > KG_FILE_MAX))
		max = KG_FILE_MAX;
	if (kg_contents_probe(g, &err) < 0 || type_stamp(g, p.full, type, &size, stamp, &err) < 0)
		goto out;
	if (!*type) {
		gw_error(&err, GW_E_NOT_FOUND, "%s: no such file", rel);
		goto out;
	}
	if (strcmp(type, "directory") == 0) {
		gw_error(&err, GW_E_USAGE, "%s is a directory, not a file", rel);
		goto out;
	}
	if (size > max && max < KG_FILE_MAX) {
		gw_error(&err, GW_E_USAGE,
		         "%s is %lld bytes, more than the %lld bytes this tool returns", rel, size,
		         max);
		goto out;
	}
	if (size > KG_FILE_MAX) {
		gw_error(&err, GW_E_USAGE,
		         "%s is %lld bytes: a file of over %ld MiB is not taken through the "
		         "server's contents API, which sends it whole in one reply (split it in "
		         "the code)",
		         rel, size, KG_FILE_MAX >> 20);
		goto out;
	}
	if (*stamp && strcmp(stamp, since) == 0) { /* the copy the caller has is it */
		kg_say(1, json_pack("{s:{s:o, s:I, s:s, s:b}}", "got", "path", kg_jtext(p.full),
		                    "size", (json_int_t)size, "stamp", stamp, "unchanged", 1));
		rc = 0;
		goto out;
	}
	/* a file's bytes as they are, from the server's file handler, when it
	 * has one and sends the size the contents API said */
	if (strcmp(type, "file") == 0 && size >= 0) {
		int r = get_raw(g, p.full, rel, fd, size, &err);
		if (r < 0)
			goto out;
		if (r == 1) {
			kg_say(1, json_pack("{s:{s:o, s:I, s:s}}", "got", "path", kg_jtext(p.full),
			                    "size", (json_int_t)size, "stamp", stamp));
			rc = 0;
			goto out;
		}
	}
	/* base64 as Python's encodebytes writes it, 76 characters and a
	 * line break (two characters in JSON) for each 57 bytes, and the
	 * model's other members */
	gw_set_max_body(g, (size_t)KG_FILE_MAX / 57 * 78 + (1 << 20));
	if (api_path(p.full, "type=file&format=base64&content=1", api, sizeof api) < 0) {
		gw_error(&err, GW_E_USAGE, "%s: the path is too long", rel);
		goto out;
	}
	code = gw_call(g, "GET", api, NULL, PART_TIMEOUT_S, &out, &err);
	if (code < 0)
		goto out;
	if (code != 200) {
		reply_error(g, &err, "reading", rel, code, out);
		goto out;
	}
	content = json_string_value(json_object_get(out, "content"));
	if (!content) {
		gw_error(&err, GW_E_SERVER, "reading %s: the server's reply has no content", rel);
		goto out;
	}
	len = json_string_length(json_object_get(out, "content"));
	if (!(data = malloc(len / 4 * 3 + 3))) {
		gw_error(&err, GW_E_USAGE, "out of memory");
		goto out;
	}
	if (kx_base64_decode(content, len, data, &len) < 0) {
		gw_error(&err, GW_E_SERVER, "reading %s: the server's content is not base64", rel);
		goto out;
	}
	if (len > (size_t)max) {
		gw_error(&err, GW_E_SERVER, "reading %s: the server sent over %lld bytes", rel,
		         max);
		goto out;
	}
	if (kx_write_all(fd, data, len) < 0) {
		gw_error(&err, GW_E_USAGE, "writing %s here: %s", rel, strerror(errno));
		goto out;
	}
	/* (a stamp only when the bytes are the size it says) */
	kg_say(1, json_pack("{s:{s:o, s:I, s:s}}", "got", "path", kg_jtext(p.full), "size",
	                    (json_int_t)len, "stamp", (long long)len == size ? stamp : ""));
	rc = 0;
out:
	free(data);
	json_decref(out);
	return cmd_end(&g, rc, &err);
}

int kg_cmd_list(const char *dir, const char *rel)
{
	gw_error_t err = {0};
	char api[3 * PATH_MAX_BYTES + 64];
	json_t *out = NULL, *entries = NULL, *v;
	const char *type;
	spath_t p;
	long code;
	size_t i;
	int rc = 1;
	gw_t *g = cmd_begin(&p, dir, rel, &err);

	if (!g || kg_contents_probe(g, &err) < 0)
		goto out;
	gw_set_max_body(g, LIST_BODY_MAX);
	if (api_path(p.full, "type=directory&content=1", api, sizeof api) < 0) {
		gw_error(&err, GW_E_USAGE, "%s: the path is too long", rel);
		goto out;
	}
	code = gw_call(g, "GET", api, NULL, CALL_TIMEOUT_S, &out, &err);
	if (code < 0)
		goto out;
	if (code == 404) {
		gw_error(&err, GW_E_NOT_FOUND, "%s: no such directory", rel);
		goto out;
	}
	if (code == 400 && (type = json_string_value(json_object_get(out, "message"))) &&
	    strstr(type, "not a directory")) {
		gw_error(&err, GW_E_USAGE, "%s: not a directory", rel);
		goto out;
	}
	if (code != 200 || !json_is_array(json_object_get(out, "content"))) {
		reply_error(g, &err, "listing", rel, code, out);
		goto out;
	}
	entries = json_array();
	json_array_foreach(json_object_get(out, "content"), i, v)
	{
		const char *name = json_string_value(json_object_get(v, "name"));
		json_t *size = json_object_get(v, "size");
		type = json_string_value(json_object_get(v, "type"));
		if (!name || !type)
			continue;
		json_array_append_new(
		        entries, json_pack("{s:o, s:s, s:O}", "name", kg_jtext(name), "type", type,
		                           "size", json_is_integer(size) ? size : json_null()));
	}
	kg_say(1,
	       json_pack("{s:{s:o, s:o}}", "list", "path", kg_jtext(p.full), "entries", entries));
	rc = 0;
out:
	json_decref(out);
	return cmd_end(&g, rc, &err);
}
