/* src/cli/cmd_mcp.c — kbox mcp: a Model Context Protocol server on standard
 * input and output (the stdio transport: JSON-RPC 2.0, one message a
 * line), whose tools run Python in a session's kernel and read and write
 * the files of its workspace.
 *
 * A thin client of the session's supervisor, as kbox exec is: each
 * run_python call is one "execute" request (format json, with_text) on a
 * control connection of its own, so that the supervisor queues the calls
 * and the server goes on reading.  Standard input and those connections
 * are read together with poll(2): a ping or a cancellation is answered
 * while code runs.  A cancellation interrupts the code ("interrupt" on
 * its connection) and, as the protocol says, gets no response.
 *
 * The session is the connection's own (mcp-PID-RANDOM, started at the
 * first tools/call, stopped and removed when standard input closes or on
 * SIGTERM), or with -s NAME a persistent one, started if need be and left
 * running.  Diagnostics go to standard error: standard output is the
 * protocol's. */
#include "config.h"
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CMD "mcp"

/* Revisions of the protocol this server speaks, the latest first: those
 * of the TypeScript SDK 1.32.2 (SUPPORTED_PROTOCOL_VERSIONS). */
static const char *const protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                "2024-11-05", "2024-10-07", NULL};

/* JSON-RPC 2.0 error codes. */
enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL_ERROR = -32603,
};

#define LINE_MAX_BYTES (64L * 1024 * 1024)  /* one message from the client */
#define READ_FILE_MAX (1L * 1024 * 1024)    /* read_file: the most it returns */
#define IMAGE_MAX (5L * 1024 * 1024)        /* an image returned as data */
#define INLINE_MAX (16L * 1024 * 1024)      /* --images inline: a result's images in all */
#define WRITE_FILE_MAX (16L * 1024 * 1024)  /* write_file: the most it writes */
#define LIST_MAX 1000                       /* list_files: entries shown */
#define CANCEL_GRACE_MS 5000                /* a cancelled call's interrupt, then its connection closes */
#define STOP_WAIT_MS 90000

typedef enum { IMAGES_PATH, IMAGES_INLINE } images_t;

/* One run_python call in flight: its own control connection. */
typedef struct call {
	json_t *id;                /* the request's id (owned) */
	int fd;                    /* its control connection */
	bool started;              /* the supervisor began it (its "started" line came) */
	bool cancelled;            /* notifications/cancelled came: no response */
	long long cancel_deadline; /* then the connection closes (ms, monotonic) */
	struct call *next;
} call_t;

typedef struct {
	const char *name;   /* the session */
	char *dir;          /* its directory, once made */
	bool own;           /* the connection's own: stopped and removed at the end */
	bool running;       /* its supervisor was started or found */
	images_t images;
	long long timeout_ms; /* a call's default: 0, none */
	bool initialized;   /* initialize was answered */
	call_t *calls;
	char *in;           /* standard input not yet split into lines */
	size_t in_len, in_cap;
	bool in_skip;       /* dropping the rest of a line that was too long */
	bool in_eof;
} mcp_t;

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- writing messages ---- */

/* Write MSG (taken) as one line on standard output. */
static void send_msg(json_t *msg)
{
	char *line = msg ? json_dumps(msg, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
	size_t len, off = 0;
	json_decref(msg);
	if (!line) {
		cli_error(CMD, "out of memory writing a response");
		return;
	}
	len = strlen(line);
	line[len] = '\n'; /* json_dumps' NUL: the line's end */
	while (off < len + 1) {
		ssize_t n = write(STDOUT_FILENO, line + off, len + 1 - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cli_error(CMD, "cannot write standard output: %s", strerror(errno));
			break;
		}
		off += (size_t)n;
	}
	free(line);
}

/* The response to ID (borrowed; NULL: null) with RESULT (taken). */
static void send_result(json_t *id, json_t *result)
{
	if (!result) {
		cli_error(CMD, "out of memory");
		return;
	}
	send_msg(json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(),
	                   "result", result));
}

/* The error response to ID (borrowed; NULL: null). */
static void send_error(json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void send_error(json_t *id, int code, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	json_t *m;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (!(m = json_string(msg))) /* a name in it that is not UTF-8 */
		m = json_string("invalid request");
	send_msg(json_pack("{s:s, s:O?, s:{s:i, s:o}}", "jsonrpc", "2.0", "id",
	                   id ? id : json_null(), "error", "code", code, "message", m));
}

/* A tool's result: CONTENT (taken: an array of content), and
 * STRUCTURED (taken, may be NULL). */
static json_t *tool_result(json_t *content, json_t *structured, bool is_error)
{
	json_t *r = json_pack("{s:o, s:b}", "content", content, "isError", is_error);
	if (r && structured)
		json_object_set_new(r, "structuredContent", structured);
	else
		json_decref(structured);
	return r;
}

/* A text content item, its text repaired to UTF-8 if need be. */
static json_t *text_item(const char *text)
{
	json_t *t = json_string(text);
	if (!t) {
		char *copy = strdup(text);
		for (char *p = copy; p && *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		t = json_string(copy ? copy : "");
		free(copy);
	}
	return json_pack("{s:s, s:o}", "type", "text", "text", t);
}

/* A tool's result that is one text, an error or not. */
static json_t *text_result(bool is_error, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static json_t *text_result(bool is_error, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return tool_result(json_pack("[o]", text_item(buf)), NULL, is_error);
}

/* Whether J is a string that holds a NUL character (\u0000), which the
 * C strings it would be used as would cut short. */
static bool has_nul(const json_t *j)
{
	return json_is_string(j) && memchr(json_string_value(j), '\0', json_string_length(j));
}

/* ---- the session ---- */

/* The session's directory, made if need be, and its supervisor started
 * unless it runs.  0, or -1 with WHY filled (also on standard error). */
static int ensure_session(mcp_t *m, char *why, size_t size)
{
	int status;
	cli_forget_last_error();
	if (!m->dir && !(m->dir = cli_session_dir(CMD, m->name, true, &status))) {
		snprintf(why, size, "session %s: its directory could not be made: %s", m->name,
		         *cli_last_error() ? cli_last_error() : "see kbox's standard error");
		return -1;
	}
	if (kbox_session_supervisor(m->dir, NULL) == KBOX_SUPERVISOR_RUNNING) {
		m->running = true;
		return 0;
	}
	if (cli_session_start(CMD, m->dir, m->name, NULL, NULL) != EXIT_OK) {
		snprintf(why, size, "session %s could not be started: %s (see also %s/supervisor.log)",
		         m->name, *cli_last_error() ? cli_last_error() : "see kbox's standard error",
		         m->dir);
		return -1;
	}
	m->running = true;
	return 0;
}

/* A connection to the session's supervisor, starting the session when
 * none runs (it may have stopped since: its idle time limit).  The
 * socket, or -1 with WHY. */
static int connect_session(mcp_t *m, char *why, size_t size)
{
	kbox_error_t err = {0};
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd;
		if (ensure_session(m, why, size) < 0)
			return -1;
		if ((fd = kbox_ctl_connect(m->dir, &err)) >= 0)
			return fd;
		if (err.code != KBOX_E_NOTFOUND)
			break;
		m->running = false;
	}
	snprintf(why, size, "session %s: %s", m->name, err.msg);
	cli_error(CMD, "%s", why);
	return -1;
}

/* Stop the connection's own session and remove its directory. */
static void end_session(mcp_t *m)
{
	kbox_error_t err = {0};
	json_t *r;
	if (!m->own || !m->dir)
		return;
	if (kbox_session_supervisor(m->dir, NULL) == KBOX_SUPERVISOR_RUNNING) {
		if (!(r = kbox_ctl_call(m->dir, KBOX_CTL_OP_STOP, NULL, STOP_WAIT_MS, &err)) &&
		    err.code != KBOX_E_NOTFOUND)
			cli_error(CMD, "session %s: %s", m->name, err.msg);
		json_decref(r);
		/* the supervisor lets go of its lock as it exits */
		for (int waited = 0; waited < STOP_WAIT_MS &&
		                     kbox_session_supervisor(m->dir, NULL) == KBOX_SUPERVISOR_RUNNING;
		     waited += 20)
			usleep(20000);
	}
	if (kbox_session_remove(m->dir, &err) < 0)
		cli_error(CMD, "%s", err.msg);
}

/* ---- files of the workspace ---- */

/* What can be opened beneath: the workspace (WS) or the session's
 * outputs (an absolute path that the results gave). */
typedef struct {
	int dirfd;       /* the directory it is beneath */
	const char *rel; /* the path under it */
} ws_path_t;

/* Resolve PATH for a tool: relative, the workspace's; absolute, only in
 * the session's outputs directory (with OUTPUTS_OK).  0 with *P (its
 * dirfd to close), or -1 with WHY. */
static int ws_path(mcp_t *m, const char *path, bool outputs_ok, ws_path_t *p, char *why,
                   size_t size)
{
	char base[PATH_MAX + 16];
	const char *rel = path;
	size_t dl = strlen(m->dir);
	bool in_outputs = outputs_ok && path[0] == '/' && strncmp(path, m->dir, dl) == 0 &&
	                  strncmp(path + dl, "/outputs/", 9) == 0;

	p->dirfd = -1;
	if (in_outputs) {
		rel = path + dl + 9;
		snprintf(base, sizeof base, "%s/outputs", m->dir);
	} else
		snprintf(base, sizeof base, "%s/workspace", m->dir);
	if (cli_ws_why(rel, why, size) < 0) {
		if (path[0] == '/' && outputs_ok && !in_outputs)
			snprintf(why, size, "%s: an absolute path is outside the workspace (give a path "
			         "relative to it, or a path in the session's outputs that a result "
			         "gave)", path);
		return -1;
	}
	if ((p->dirfd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		snprintf(why, size, "cannot open %s: %s", base, strerror(errno));
		return -1;
	}
	p->rel = rel;
	return 0;
}

/* What a file that is not a regular file is. */
static const char *file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISLNK(mode))
		return "a symbolic link";
	return "a device or special file";
}

/* Read the regular file PATH (as ws_path resolves it) whole, when it holds
 * at most MAX bytes: malloc'd, *LEN its size, NUL-terminated.  It is
 * opened O_PATH (no device opens, no FIFO blocks), checked, and reopened
 * through /proc/self/fd (the same file).  NULL with WHY. */
static char *read_ws_file(mcp_t *m, const char *path, bool outputs_ok, long max, size_t *len,
                          char *why, size_t size)
{
	ws_path_t p;
	struct stat st, again;
	char proc[64], *buf = NULL;
	int pfd = -1, fd = -1;
	size_t got = 0;

	if (ws_path(m, path, outputs_ok, &p, why, size) < 0)
		goto out;
	if ((pfd = cli_ws_open(p.dirfd, p.rel, O_PATH, 0)) < 0 || fstat(pfd, &st) < 0) {
		snprintf(why, size, "%s: %s", path,
		         errno == ENOENT ? "no such file" : cli_ws_strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, size, "%s is %s, not a regular file", path, file_kind(st.st_mode));
		goto out;
	}
	if (st.st_size > max) {
		snprintf(why, size, "%s is %lld bytes, more than the %ld bytes this tool returns", path,
		         (long long)st.st_size, max);
		goto out;
	}
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
	if ((fd = open(proc, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)) < 0 ||
	    fstat(fd, &again) < 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino) {
		snprintf(why, size, "%s: %s", path, fd < 0 ? strerror(errno) : "it changed (refused)");
		goto out;
	}
	if (!(buf = malloc((size_t)max + 2))) {
		snprintf(why, size, "out of memory");
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf + got, (size_t)max + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(why, size, "%s: %s", path, strerror(errno));
			free(buf);
			buf = NULL;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > (size_t)max) { /* it grew */
			snprintf(why, size, "%s is more than the %ld bytes this tool returns", path, max);
			free(buf);
			buf = NULL;
			goto out;
		}
	}
	buf[got] = '\0';
	*len = got;
out:
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);
	if (p.dirfd >= 0)
		close(p.dirfd);
	return buf;
}

/* DATA[0..LEN) in base64 (malloc'd), or NULL. */
static char *base64(const unsigned char *data, size_t len)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
	size_t i;
	if (!out)
		return NULL;
	for (i = 0; i + 2 < len; i += 3) {
		unsigned v = (unsigned)data[i] << 16 | (unsigned)data[i + 1] << 8 | data[i + 2];
		*o++ = tab[v >> 18 & 63], *o++ = tab[v >> 12 & 63];
		*o++ = tab[v >> 6 & 63], *o++ = tab[v & 63];
	}
	if (i < len) {
		unsigned v = (unsigned)data[i] << 16 | (i + 1 < len ? (unsigned)data[i + 1] << 8 : 0);
		*o++ = tab[v >> 18 & 63], *o++ = tab[v >> 12 & 63];
		*o++ = i + 1 < len ? tab[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

/* The image type of DATA by its first bytes, or NULL. */
static const char *image_mime(const unsigned char *d, size_t n)
{
	if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
		return "image/png";
	if (n >= 3 && memcmp(d, "\xff\xd8\xff", 3) == 0)
		return "image/jpeg";
	if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
		return "image/gif";
	if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
		return "image/webp";
	return NULL;
}

/* PATH's image as MCP image content (new reference), or NULL with WHY;
 * when it is more than BUDGET bytes, NULL with WHY empty.  *LEN: its size. */
static json_t *image_item(mcp_t *m, const char *path, long budget, size_t *len_p, char *why,
                          size_t size)
{
	size_t len = 0;
	char *data = read_ws_file(m, path, true, IMAGE_MAX, &len, why, size), *b64;
	const char *mime;
	json_t *item = NULL;
	if (!data)
		return NULL;
	*len_p = len;
	if (len > (size_t)budget)
		why[0] = '\0';
	else if (!(mime = image_mime((unsigned char *)data, len)))
		snprintf(why, size, "%s is not a PNG, JPEG, GIF or WebP image", path);
	else if (!(b64 = base64((unsigned char *)data, len)))
		snprintf(why, size, "out of memory");
	else {
		item = json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", mime);
		free(b64);
	}
	free(data);
	return item;
}

/* The length of the UTF-8 sequence at S (N bytes left): 1 to 4, or 0 when
 * it is not valid (a stray byte, an overlong form, a surrogate). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
	           : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return len;
}

/* NAME, a file name, as list_files shows it, into OUT (SIZE >= 4 *
 * NAME_MAX + 1): so that no name can look like other entries or hide in
 * the client's display, a backslash is \\, a newline, tab or carriage
 * return \n, \t, \r, and any other control character (C0, DEL, C1) and
 * any byte that is not UTF-8 \xNN (each byte). */
static void escape_name(const char *name, char *out, size_t size)
{
	const unsigned char *s = (const unsigned char *)name;
	size_t n = strlen(name), o = 0;
	while (n && o + 5 < size) {
		size_t len = utf8_len(s, n);
		bool c1 = len == 2 && s[0] == 0xc2 && s[1] < 0xa0;
		if (len == 1 && *s >= 0x20 && *s != 0x7f && *s != '\\')
			out[o++] = (char)*s;
		else if (len > 1 && !c1) {
			memcpy(out + o, s, len);
			o += len;
		} else if (*s == '\\' || *s == '\n' || *s == '\t' || *s == '\r') {
			out[o++] = '\\';
			out[o++] = *s == '\\' ? '\\' : *s == '\n' ? 'n' : *s == '\t' ? 't' : 'r';
		} else {
			len = c1 ? 2 : 1; /* a C1 control: both its bytes */
			for (size_t i = 0; i < len; i++)
				o += (size_t)snprintf(out + o, size - o, "\\x%02x", s[i]);
		}
		s += len ? len : 1;
		n -= len ? len : 1;
	}
	out[o] = '\0';
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* list_files {path?}: the entries of a directory of the workspace, one a
 * line: NAME (a directory NAME/), its size for a file. */
static json_t *tool_list_files(mcp_t *m, json_t *args)
{
	json_t *jp = json_object_get(args, "path");
	const char *path = json_is_string(jp) ? json_string_value(jp) : ".";
	char why[PATH_MAX + 256];
	ws_path_t p = {.dirfd = -1};
	int fd = -1;
	DIR *d = NULL;
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	json_t *res = NULL;
	char *text = NULL;
	size_t tlen = 0;
	FILE *f;

	if (jp && !json_is_string(jp))
		return text_result(true, "list_files: \"path\" must be a string");
	if (!*path || strcmp(path, ".") == 0 || strcmp(path, "./") == 0)
		path = ".";
	if (ws_path(m, path, false, &p, why, sizeof why) < 0)
		return text_result(true, "list_files: %s", why);
	fd = cli_ws_open(p.dirfd, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || !(d = fdopendir(fd))) {
		res = text_result(true, "list_files: %s: %s", path,
		                  errno == ENOENT    ? "no such directory"
		                  : errno == ENOTDIR ? "not a directory"
		                                     : cli_ws_strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	while ((e = readdir(d))) {
		struct stat st;
		char line[4 * NAME_MAX + 64], name[4 * NAME_MAX + 8], sz[32];
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
			if (!nn)
				break;
			names = nn;
		}
		escape_name(e->d_name, name, sizeof name);
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			snprintf(line, sizeof line, "%s", name);
		else if (S_ISDIR(st.st_mode))
			snprintf(line, sizeof line, "%s/", name);
		else if (S_ISREG(st.st_mode))
			snprintf(line, sizeof line, "%s\t%s", name,
			         cli_fmt_bytes((long long)st.st_size, sz, sizeof sz));
		else if (S_ISLNK(st.st_mode))
			snprintf(line, sizeof line, "%s@", name);
		else
			snprintf(line, sizeof line, "%s\t(%s)", name, file_kind(st.st_mode));
		if (!(names[n] = strdup(line)))
			break;
		n++;
	}
	qsort(names, n, sizeof *names, cmp_names);
	if (!(f = open_memstream(&text, &tlen)))
		goto out;
	if (n == 0)
		fprintf(f, "%s is empty\n", path);
	for (size_t i = 0; i < n && i < LIST_MAX; i++)
		fprintf(f, "%s\n", names[i]);
	if (n > LIST_MAX)
		fprintf(f, "[... %zu more entries not shown]\n", n - LIST_MAX);
	fclose(f);
	res = tool_result(json_pack("[o]", text_item(text)), NULL, false);
out:
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(text);
	if (p.dirfd >= 0)
		close(p.dirfd);
	return res;
}

/* read_file {path}: a text file of the workspace, whole. */
static json_t *tool_read_file(mcp_t *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	char why[PATH_MAX + 256], *data;
	size_t len = 0;
	json_t *res, *text;

	if (!path)
		return text_result(true, "read_file: \"path\" (a string) is required");
	if (!(data = read_ws_file(m, path, true, READ_FILE_MAX, &len, why, sizeof why)))
		return text_result(true, "read_file: %s", why);
	if (memchr(data, '\0', len) || !(text = json_stringn(data, len)))
		res = text_result(true, "read_file: %s is not a text file (it is binary, or not "
		                  "UTF-8): read it with code (run_python)", path);
	else
		res = tool_result(json_pack("[{s:s, s:o}]", "type", "text", "text", text), NULL, false);
	free(data);
	return res;
}

/* write_file {path, content}: save text as a file of the workspace (made,
 * or replaced whole): written beside it, then renamed over it, so that
 * nothing at that name is followed or opened. */
static json_t *tool_write_file(mcp_t *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	json_t *jc = json_object_get(args, "content");
	const char *content = json_string_value(jc), *target, *slash;
	size_t clen = json_string_length(jc), off = 0;
	char why[PATH_MAX + 256], tmp[64] = "";
	ws_path_t p = {.dirfd = -1};
	int parent = -1, out = -1;
	json_t *res = NULL;
	kbox_session_config_t config;
	long long file_size = 0;
	struct stat st;

	if (!path || !content)
		return text_result(true, "write_file: \"path\" and \"content\" (strings) are required");
	if (kbox_session_config_load(&config, m->dir, NULL) == 0)
		file_size = config.file_size;
	kbox_session_config_free(&config);
	if (clen > (size_t)WRITE_FILE_MAX || (file_size > 0 && (long long)clen > file_size))
		return text_result(true, "write_file: the content is %zu bytes, more than %s%lld "
		                   "bytes: write a larger file with code (run_python)", clen,
		                   file_size > 0 && file_size < WRITE_FILE_MAX
		                       ? "the session's file-size limit (kbox start --file-size), "
		                       : "the most this tool writes, ",
		                   file_size > 0 && file_size < WRITE_FILE_MAX ? file_size
		                                                               : (long long)WRITE_FILE_MAX);
	if (ws_path(m, path, false, &p, why, sizeof why) < 0)
		return text_result(true, "write_file: %s", why);
	if (path[strlen(path) - 1] == '/') {
		res = text_result(true, "write_file: %s names a directory, not a file", path);
		goto out;
	}
	if ((slash = strrchr(path, '/'))) {
		char *pdir = strndup(path, (size_t)(slash - path));
		parent = pdir ? cli_ws_open(p.dirfd, pdir, O_PATH | O_DIRECTORY, 0) : -1;
		if (parent < 0)
			res = text_result(true, "write_file: directory %s: %s", pdir ? pdir : path,
			                  errno == ENOENT ? "does not exist in the workspace"
			                                  : cli_ws_strerror(errno));
		free(pdir);
		if (parent < 0)
			goto out;
		target = slash + 1;
	} else {
		parent = dup(p.dirfd);
		target = path;
	}
	if (fstatat(parent, target, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		res = text_result(true, "write_file: %s is a directory in the workspace", path);
		goto out;
	}
	out = cli_ws_create_temp(parent, "mcp", tmp, sizeof tmp);
	if (out < 0) {
		res = text_result(true, "write_file: cannot make a file in the workspace: %s",
		                  strerror(errno));
		tmp[0] = '\0';
		goto out;
	}
	/* under root the workspace is the sandbox user's: so is the file */
	if (geteuid() == 0 && fstat(parent, &st) == 0 && st.st_uid != 0 &&
	    fchown(out, st.st_uid, st.st_gid) < 0) {
		res = text_result(true, "write_file: cannot give the file to uid %u: %s",
		                  (unsigned)st.st_uid, strerror(errno));
		goto out;
	}
	while (off < clen) {
		ssize_t n = write(out, content + off, clen - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			res = text_result(true, "write_file: %s: %s", path, strerror(errno));
			goto out;
		}
		off += (size_t)n;
	}
	if (renameat(parent, tmp, parent, target) < 0) {
		res = text_result(true, "write_file: %s: %s", path, strerror(errno));
		goto out;
	}
	tmp[0] = '\0';
	res = text_result(false, "wrote %zu bytes to %s", clen, path);
out:
	if (tmp[0] && parent >= 0)
		unlinkat(parent, tmp, 0);
	if (out >= 0)
		close(out);
	if (parent >= 0)
		close(parent);
	if (p.dirfd >= 0)
		close(p.dirfd);
	return res;
}

/* read_image {path}: an image of the workspace or of the session's
 * outputs, as image content. */
static json_t *tool_read_image(mcp_t *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	char why[PATH_MAX + 256];
	json_t *item;
	size_t len;
	if (!path)
		return text_result(true, "read_image: \"path\" (a string) is required");
	if (!(item = image_item(m, path, IMAGE_MAX, &len, why, sizeof why)))
		return text_result(true, "read_image: %s", why);
	return tool_result(json_pack("[o]", item), NULL, false);
}

/* ---- run_python ---- */

/* Begin run_python with ARGS for request ID: its execute request sent on
 * a connection of its own, the call added to M's.  The result comes
 * later (finish_call).  NULL, or a result to send now (an error). */
static json_t *tool_run_python(mcp_t *m, json_t *id, json_t *args)
{
	json_t *jcode = json_object_get(args, "code"), *jt = json_object_get(args, "timeout"), *req;
	kbox_ctl_exec_t e = KBOX_CTL_EXEC_INIT;
	kbox_error_t err = {0};
	char why[1024];
	call_t *c;
	int fd;

	if (!json_is_string(jcode))
		return text_result(true, "run_python: \"code\" (a string) is required");
	e.code = json_string_value(jcode);
	e.format = KBOX_CTL_FMT_JSON;
	e.with_text = true;
	e.grace_ms = KBOX_CTL_GRACE_DEFAULT_MS;
	e.timeout_ms = m->timeout_ms;
	if (jt && !json_is_null(jt)) {
		double t = json_number_value(jt);
		if (!json_is_number(jt) || t < 0 || t * 1000 > (double)CLI_DURATION_MAX_MS)
			return text_result(true, "run_python: \"timeout\" is a number of seconds from 0 "
			                         "to %lld (%lld days)",
			                   CLI_DURATION_MAX_MS / 1000, CLI_DURATION_MAX_MS / 86400000);
		e.timeout_ms = (long long)(t * 1000 + 0.999);
	}
	req = kbox_ctl_exec_to_json(&e);
	if (req && !kbox_ctl_request_fits(req)) {
		json_decref(req);
		return text_result(true, "run_python: not run: the code is %zu bytes; at most %d MiB "
		                         "can run (as a JSON string, in which a control character "
		                         "takes 6 bytes): make it shorter",
		                   json_string_length(jcode), KBOX_CTL_CODE_MAX >> 20);
	}
	if ((fd = connect_session(m, why, sizeof why)) < 0) {
		json_decref(req);
		return text_result(true, "run_python: %s", why);
	}
	if (!req || kbox_ctl_send(fd, req, &err) < 0 || !(c = calloc(1, sizeof *c))) {
		json_decref(req);
		close(fd);
		cli_error(CMD, "session %s: %s", m->name, req ? err.msg : "out of memory");
		return text_result(true, "run_python: session %s: %s", m->name,
		                   req ? err.msg : "out of memory");
	}
	json_decref(req);
	c->id = json_incref(id);
	c->fd = fd;
	c->next = m->calls;
	m->calls = c;
	return NULL;
}

/* The tools/call result of run_python from the supervisor's reply R
 * (borrowed; NULL when the connection ended with WHY). */
static json_t *run_result(mcp_t *m, json_t *r, const char *why)
{
	json_t *content, *result, *images;
	const char *text, *status;
	size_t i, not_inline = 0;
	long budget = INLINE_MAX; /* what the images inline may still take */
	json_t *img;

	if (!r)
		return text_result(true, "run_python: session %s: %s; the code's result is lost",
		                   m->name, why);
	if (kbox_ctl_msg_kind(r, NULL) != KBOX_CTL_MSG_REPLY) {
		const char *msg = json_string_value(json_object_get(r, "error"));
		return text_result(true, "run_python: session %s: %s", m->name,
		                   msg ? msg : "the supervisor refused the code");
	}
	text = json_string_value(json_object_get(r, "text"));
	status = json_string_value(json_object_get(r, "status"));
	result = json_object_get(r, "result");
	content = json_pack("[o]", text_item(text ? text : ""));
	images = json_object_get(result, "images");
	json_array_foreach(images, i, img) {
		const char *path = json_string_value(json_object_get(img, "path"));
		const char *mime = json_string_value(json_object_get(img, "mime"));
		char ewhy[PATH_MAX + 256];
		json_t *item;
		size_t len = 0;
		if (m->images != IMAGES_INLINE || !path || !mime ||
		    (strcmp(mime, "image/png") != 0 && strcmp(mime, "image/jpeg") != 0))
			continue;
		/* the first ones up to INLINE_MAX in all; the rest by path */
		if (not_inline) {
			not_inline++;
			continue;
		}
		if ((item = image_item(m, path, budget, &len, ewhy, sizeof ewhy))) {
			json_array_append_new(content, item);
			budget -= (long)len;
		} else if (!ewhy[0])
			not_inline++;
		else
			json_array_append_new(content, text_item(ewhy));
	}
	if (not_inline) {
		char note[256];
		snprintf(note, sizeof note, "[%zu image%s not given as image content: the images of "
		         "one result are at most %ld MiB in all; read each with read_image, by its "
		         "path in the text]", not_inline, not_inline == 1 ? "" : "s",
		         INLINE_MAX >> 20);
		json_array_append_new(content, text_item(note));
	}
	return tool_result(content, json_is_object(result) ? json_incref(result) : NULL,
	                   !status || strcmp(status, "ok") != 0);
}

/* Remove C from M's calls and free it. */
static void drop_call(mcp_t *m, call_t *c)
{
	for (call_t **pp = &m->calls; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	close(c->fd);
	json_decref(c->id);
	free(c);
}

/* A line from C's connection, or its end: the reply ends the call. */
static void call_readable(mcp_t *m, call_t *c)
{
	kbox_error_t err = {0};
	json_t *r = kbox_ctl_recv(c->fd, -1, &err);
	kbox_ctl_op_t re;
	kbox_ctl_msg_kind_t kind = kbox_ctl_msg_kind(r, &re);

	/* the started line, events, and the reply to our own interrupt
	 * (cancel_call) come before the execution's reply */
	if (kind == KBOX_CTL_MSG_STARTED)
		c->started = true;
	if (kind == KBOX_CTL_MSG_STARTED || kind == KBOX_CTL_MSG_EVENT ||
	    (r && re == KBOX_CTL_OP_INTERRUPT)) {
		json_decref(r);
		return;
	}
	if (!c->cancelled)
		send_result(c->id, run_result(m, r, err.code == KBOX_E_DEAD
		                                        ? "the session's supervisor went away"
		                                        : err.msg));
	json_decref(r);
	drop_call(m, c);
}

/* notifications/cancelled for request ID: a call that runs is
 * interrupted (its reply then dropped), one that waits for its turn
 * leaves the queue (its connection closed).  Unknown ids are ignored. */
static void cancel_call(mcp_t *m, json_t *id)
{
	kbox_error_t err = {0};
	json_t *req;
	for (call_t *c = m->calls; c; c = c->next) {
		if (c->cancelled || !json_equal(c->id, id))
			continue;
		c->cancelled = true;
		if (!c->started) {
			drop_call(m, c);
			return;
		}
		req = kbox_ctl_request_new(KBOX_CTL_OP_INTERRUPT);
		if (!req || kbox_ctl_send(c->fd, req, &err) < 0) {
			json_decref(req);
			drop_call(m, c); /* the supervisor interrupts it as it sees us go */
			return;
		}
		json_decref(req);
		c->cancel_deadline = now_ms() + CANCEL_GRACE_MS;
		return;
	}
}

/* ---- the protocol ---- */

/* The tools, as tools/list gives them (new reference). */
static json_t *tools_list(void)
{
	json_t *path = json_pack("{s:s, s:s}", "type", "string", "description",
	                         "A path relative to the workspace (the kernel's working "
	                         "directory, /workspace); no \"..\", not absolute.");
	json_t *tools = json_pack(
	    "[o, {s:s, s:s, s:s, s:{s:s, s:{s:O}, s:b}, s:{s:b}}, "
	    "{s:s, s:s, s:s, s:{s:s, s:{s:O}, s:[s], s:b}, s:{s:b}}, "
	    "{s:s, s:s, s:s, s:{s:s, s:{s:O, s:{s:s, s:s}}, s:[s, s], s:b}, s:{s:b, s:b}}, "
	    "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:s}}, s:[s], s:b}, s:{s:b}}]",
	    cli_mcp_run_tool(),
	    "name", "list_files", "title", "List files", "description",
	    "List a directory of the workspace that run_python's code works in (the workspace "
	    "root without a path): one entry a line, directories ending in /, files with their "
	    "size; in names, a backslash, control characters and bytes not UTF-8 are escaped "
	    "(\\\\, \\n, \\t, \\r, \\xNN).",
	    "inputSchema", "type", "object", "properties", "path", path, "additionalProperties", 0,
	    "annotations", "readOnlyHint", 1,
	    "name", "read_file", "title", "Read a file", "description",
	    "Read a text file of the workspace (UTF-8, at most 1 MiB) whole, or the whole text of "
	    "an output run_python cut short (the path its marker gives). For a binary or larger "
	    "file, use run_python.",
	    "inputSchema", "type", "object", "properties", "path", path, "required", "path",
	    "additionalProperties", 0, "annotations", "readOnlyHint", 1,
	    "name", "write_file", "title", "Write a file", "description",
	    "Save text as a file of the workspace, creating it or replacing it whole; its "
	    "directory must exist; at most 16 MiB. run_python's code can then read it.",
	    "inputSchema", "type", "object", "properties", "path", path, "content", "type",
	    "string", "description", "The file's new contents, as text.", "required", "path",
	    "content", "additionalProperties", 0, "annotations", "readOnlyHint", 0,
	    "destructiveHint", 1,
	    "name", "read_image", "title", "Read an image", "description",
	    "Show an image file (PNG, JPEG, GIF or WebP, at most 5 MiB): a path in the workspace, "
	    "or the path of an image that run_python saved, as its result gave it.",
	    "inputSchema", "type", "object", "properties", "path", "type", "string",
	    "description", "A path relative to the workspace, or an image's path from a result.",
	    "required", "path", "additionalProperties", 0, "annotations", "readOnlyHint", 1);
	json_decref(path);
	return tools ? json_pack("{s:o}", "tools", tools) : NULL;
}

/* initialize: the version the client asked for when it is one of ours,
 * else the latest. */
static void do_initialize(mcp_t *m, json_t *id, json_t *params)
{
	json_t *jwant = json_object_get(params, "protocolVersion");
	const char *want = json_string_value(jwant);
	const char *version = protocol_versions[0];
	if (m->initialized) {
		send_error(id, RPC_INVALID_REQUEST, "initialize: the connection is initialized "
		                                    "already");
		return;
	}
	if (!want) {
		send_error(id, RPC_INVALID_PARAMS, "initialize: \"protocolVersion\" (a string) is "
		                                   "required");
		return;
	}
	for (size_t i = 0; protocol_versions[i] && !has_nul(jwant); i++)
		if (strcmp(want, protocol_versions[i]) == 0)
			version = protocol_versions[i];
	m->initialized = true;
	send_result(id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
	                          version, "capabilities", "tools", "listChanged", 0, "serverInfo",
	                          "name", "kbox", "title", "kbox", "version", PACKAGE_VERSION,
	                          "instructions",
	                          "run_python runs Python in one persistent sandboxed kernel: "
	                          "state persists between calls. The file tools work in the "
	                          "same workspace."));
}

/* The tools and the arguments each takes (its inputSchema's properties:
 * no others, "additionalProperties" false). */
static const struct {
	const char *name;
	const char *args[3];
} tool_args[] = {{"run_python", {"code", "timeout", NULL}}, {"list_files", {"path", NULL}},
                 {"read_file", {"path", NULL}},             {"write_file", {"path", "content", NULL}},
                 {"read_image", {"path", NULL}}};

/* Why ARGS (an object) are not arguments of the tool T (an index of
 * tool_args), into WHY: an argument it does not take, or a string with a
 * NUL (but for write_file's content, written as it is).  0 when they may
 * be, -1 when not. */
static int check_args(size_t t, json_t *args, char *why, size_t size)
{
	const char *key;
	json_t *v;
	char unknown[512] = "", takes[64] = "";
	size_t n_unknown = 0, l;

	json_object_foreach(args, key, v) {
		bool known = false;
		for (size_t i = 0; tool_args[t].args[i]; i++)
			known |= strcmp(key, tool_args[t].args[i]) == 0;
		if (known && has_nul(v) && strcmp(key, "content") != 0) {
			snprintf(why, size, "%s: \"%s\" holds a NUL character (\\u0000), which no %s "
			         "may hold", tool_args[t].name, key,
			         strcmp(key, "code") == 0 ? "code" : "path");
			return -1;
		}
		if (!known) {
			l = strlen(unknown);
			snprintf(unknown + l, sizeof unknown - l, "%s\"%s\"", n_unknown++ ? ", " : "", key);
		}
	}
	if (!n_unknown)
		return 0;
	for (size_t i = 0; tool_args[t].args[i]; i++) {
		l = strlen(takes);
		snprintf(takes + l, sizeof takes - l, "%s%s", i ? ", " : "", tool_args[t].args[i]);
	}
	snprintf(why, size, "%s: unknown argument%s %s (it takes %s)", tool_args[t].name,
	         n_unknown > 1 ? "s" : "", unknown, takes);
	return -1;
}

/* tools/call. */
static void do_call(mcp_t *m, json_t *id, json_t *params)
{
	json_t *jname = json_object_get(params, "name");
	const char *name = json_string_value(jname);
	json_t *args = json_object_get(params, "arguments"), *res;
	json_t *empty = json_object();
	char why[1024];
	size_t t = 0;

	if (!name) {
		send_error(id, RPC_INVALID_PARAMS, "tools/call: \"name\" (a string) is required");
		goto out;
	}
	if (has_nul(jname)) {
		send_error(id, RPC_INVALID_PARAMS, "tools/call: \"name\" holds a NUL character");
		goto out;
	}
	if (args && !json_is_object(args)) {
		send_error(id, RPC_INVALID_PARAMS, "tools/call: \"arguments\" must be an object");
		goto out;
	}
	if (!args)
		args = empty;
	while (t < sizeof tool_args / sizeof tool_args[0] && strcmp(name, tool_args[t].name) != 0)
		t++;
	if (t == sizeof tool_args / sizeof tool_args[0]) {
		send_error(id, RPC_INVALID_PARAMS, "Unknown tool: %s", name);
		goto out;
	}
	if (check_args(t, args, why, sizeof why) < 0) {
		send_result(id, text_result(true, "%s", why));
		goto out;
	}
	if (strcmp(name, "run_python") == 0) {
		if ((res = tool_run_python(m, id, args)))
			send_result(id, res);
		goto out;
	}
	if (ensure_session(m, why, sizeof why) < 0) {
		send_result(id, text_result(true, "%s: %s", name, why));
		goto out;
	}
	if (strcmp(name, "list_files") == 0)
		res = tool_list_files(m, args);
	else if (strcmp(name, "read_file") == 0)
		res = tool_read_file(m, args);
	else if (strcmp(name, "write_file") == 0)
		res = tool_write_file(m, args);
	else
		res = tool_read_image(m, args);
	send_result(id, res);
out:
	json_decref(empty);
}

/* One message from the client: LINE[0..LEN). */
static void handle_line(mcp_t *m, const char *line, size_t len)
{
	json_error_t je;
	json_t *msg, *id, *method_j, *params;
	const char *method;
	bool has_id;

	if (len == 0 || (len == 1 && line[0] == '\r'))
		return; /* a blank line: nothing */
	if (!(msg = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je))) {
		send_error(NULL, RPC_PARSE_ERROR, "Parse error: %s", je.text);
		return;
	}
	if (json_is_array(msg)) {
		/* batches were taken by 2025-03-26 only, and removed since */
		send_error(NULL, RPC_INVALID_REQUEST,
		           "Invalid Request: batches are not supported (MCP since 2025-06-18)");
		goto out;
	}
	if (!json_is_object(msg)) {
		send_error(NULL, RPC_INVALID_REQUEST, "Invalid Request: not a JSON object");
		goto out;
	}
	id = json_object_get(msg, "id");
	has_id = id != NULL;
	if (id && !json_is_string(id) && !json_is_integer(id)) {
		send_error(NULL, RPC_INVALID_REQUEST,
		           "Invalid Request: \"id\" must be a string or an integer");
		goto out;
	}
	if (!json_is_string(json_object_get(msg, "jsonrpc")) ||
	    has_nul(json_object_get(msg, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0) {
		send_error(id, RPC_INVALID_REQUEST, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
		goto out;
	}
	method_j = json_object_get(msg, "method");
	if (!method_j && has_id &&
	    (json_object_get(msg, "result") || json_object_get(msg, "error")))
		goto out; /* a response: this server sends no requests it waits for */
	if (!json_is_string(method_j)) {
		if (has_id)
			send_error(id, RPC_INVALID_REQUEST,
			           "Invalid Request: \"method\" (a string) is required");
		goto out;
	}
	if (has_nul(method_j)) {
		if (has_id)
			send_error(id, RPC_INVALID_REQUEST,
			           "Invalid Request: \"method\" holds a NUL character");
		goto out;
	}
	method = json_string_value(method_j);
	params = json_object_get(msg, "params");
	if (params && !json_is_object(params) && !json_is_array(params)) {
		if (has_id)
			send_error(id, RPC_INVALID_REQUEST,
			           "Invalid Request: \"params\" must be an object or an array");
		goto out;
	}
	if (!has_id) { /* a notification: never answered */
		if (strcmp(method, "notifications/cancelled") == 0 && json_is_object(params) &&
		    json_object_get(params, "requestId"))
			cancel_call(m, json_object_get(params, "requestId"));
		goto out;
	}
	if (params && !json_is_object(params)) {
		send_error(id, RPC_INVALID_PARAMS, "%s: \"params\" must be an object", method);
		goto out;
	}
	if (strcmp(method, "ping") == 0)
		send_result(id, json_object());
	else if (strcmp(method, "initialize") == 0)
		do_initialize(m, id, params);
	else if (!m->initialized)
		send_error(id, RPC_INVALID_REQUEST,
		           "Invalid Request: the server is not initialized (send initialize first)");
	else if (strcmp(method, "tools/list") == 0)
		send_result(id, tools_list());
	else if (strcmp(method, "tools/call") == 0)
		do_call(m, id, params);
	else
		send_error(id, RPC_METHOD_NOT_FOUND, "Method not found: %s", method);
out:
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
			cli_error(CMD, "out of memory reading standard input");
			m->in_eof = true;
			return;
		}
		m->in = nb;
		m->in_cap = ncap;
	}
	n = read(STDIN_FILENO, m->in + m->in_len, m->in_cap - m->in_len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		if (n < 0)
			cli_error(CMD, "cannot read standard input: %s", strerror(errno));
		m->in_eof = true;
		if (m->in_len && !m->in_skip)
			handle_line(m, m->in, m->in_len);
		m->in_len = 0;
		return;
	}
	m->in_len += (size_t)n;
	start = m->in;
	while ((nl = memchr(start, '\n', m->in_len - (size_t)(start - m->in)))) {
		if (!m->in_skip)
			handle_line(m, start, (size_t)(nl - start));
		m->in_skip = false;
		start = nl + 1;
	}
	m->in_len -= (size_t)(start - m->in);
	memmove(m->in, start, m->in_len);
	if (m->in_len > (size_t)LINE_MAX_BYTES) {
		if (!m->in_skip)
			send_error(NULL, RPC_PARSE_ERROR, "Parse error: a message longer than %ld bytes",
			           LINE_MAX_BYTES);
		m->in_skip = true;
		m->in_len = 0;
	}
}

/* Serve until standard input ends and the calls in flight are done, or a
 * signal says stop. */
static void serve(mcp_t *m)
{
	while (!stop_signal && (!m->in_eof || m->calls)) {
		struct pollfd fds[258];
		call_t *owner[258];
		size_t nfds = 0;
		long long next = -1, now = now_ms();
		int r;

		/* at the end of standard input, the calls running finish first:
		 * their responses can still be read (a client that wants it over
		 * sooner sends SIGTERM) */
		fds[nfds].fd = m->in_eof ? -1 : STDIN_FILENO;
		fds[nfds].events = POLLIN;
		owner[nfds++] = NULL;
		for (call_t *c = m->calls; c && nfds < 258; c = c->next) {
			if (c->cancelled && now >= c->cancel_deadline) {
				drop_call(m, c); /* interrupted and not done: its connection goes */
				goto again;
			}
			if (c->cancelled && (next < 0 || c->cancel_deadline - now < next))
				next = c->cancel_deadline - now;
			fds[nfds].fd = c->fd;
			fds[nfds].events = POLLIN;
			owner[nfds++] = c;
		}
		r = poll(fds, nfds, next < 0 ? -1 : (int)next);
		if (r < 0 && errno != EINTR) {
			cli_error(CMD, "poll: %s", strerror(errno));
			break;
		}
		if (r <= 0)
			continue;
		/* calls first: STDIN may cancel (free) some */
		for (size_t i = 1; i < nfds; i++)
			if (fds[i].revents)
				call_readable(m, owner[i]);
		if (fds[0].revents)
			read_stdin(m);
	again:;
	}
}

static int images_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	images_t *v = opt->value;
	if (strcmp(arg, "path") == 0)
		*v = IMAGES_PATH;
	else if (strcmp(arg, "inline") == 0)
		*v = IMAGES_INLINE;
	else {
		cli_error(cmd, "invalid --images \"%s\": expected path or inline", arg);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int cmd_mcp(int argc, char **argv)
{
	mcp_t m = {.images = IMAGES_PATH};
	const char *name = NULL;
	char own_name[KBOX_SESSION_NAME_MAX + 1];
	cli_option_t opts[] = {
	    CLI_OPT_STRING('s', "session", "NAME", &name,
	                   "use the session NAME, started if need be and left running (default: "
	                   "a new session for this connection, stopped and removed at its end)"),
	    CLI_OPT_CALLBACK(0, "images", "path|inline", images_cb, &m.images,
	                     "give the images code saved by path in the text only, or also as "
	                     "image content, up to 16 MiB a result (default: path)"),
	    CLI_OPT_CALLBACK('t', "timeout", "DURATION", cli_opt_duration, &m.timeout_ms,
	                     "interrupt a run_python call after DURATION when the call gives no "
	                     "timeout (default: 0, no limit)"),
	    CLI_OPT_END};
	int status, n = cli_parse_options(CMD, opts, argc, argv, &status);
	struct sigaction sa;

	if (n < 0)
		return status;
	if ((status = cli_no_operands(CMD, n, argv)) != EXIT_OK)
		return status;
	if (name) {
		if ((status = cli_check_session(CMD, name)) != EXIT_OK)
			return status;
		m.name = name;
	} else {
		unsigned r = 0;
		if (getrandom(&r, sizeof r, 0) != sizeof r)
			r = (unsigned)now_ms() ^ (unsigned)getpid() << 8;
		snprintf(own_name, sizeof own_name, "mcp-%ld-%08x", (long)getpid(), r);
		m.name = own_name;
		m.own = true;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal; /* no SA_RESTART: poll returns */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	serve(&m);
	while (m.calls)
		drop_call(&m, m.calls);
	end_session(&m);
	free(m.dir);
	free(m.in);
	return EXIT_OK;
}
