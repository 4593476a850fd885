/* src/mcp/files.c — kbox mcp's tools on files: list_files, read_file,
 * write_file and read_image, in the session's workspace (the kernel's
 * working directory) and, for reading, in its outputs (the paths that
 * results gave).  Every path is confined by src/runtime/workspace.h, as
 * kbox put's and kbox get's are. */
#include "config.h"
#include "mcp/mcp_int.h"
#include "runtime/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_FILE_MAX (1L * 1024 * 1024)   /* read_file: the most it returns */
#define IMAGE_MAX (5L * 1024 * 1024)       /* an image returned as data */
#define WRITE_FILE_MAX (16L * 1024 * 1024) /* write_file: the most it writes */
#define LIST_MAX 1000                      /* list_files: entries shown */

/* ---- paths ---- */

/* What can be opened beneath: the workspace or the session's outputs (an
 * absolute path that the results gave). */
typedef struct {
	int dirfd;       /* the directory it is beneath */
	const char *rel; /* the path under it */
} tool_path_t;

/* Resolve PATH for a tool: relative, the workspace's; absolute, only in
 * the session's outputs directory (with OUTPUTS_OK).  0 with *P (its
 * dirfd to close), or -1 with WHY. */
static int tool_path(mcp_t *m, const char *path, bool outputs_ok, tool_path_t *p, char *why,
                     size_t size)
{
	const char *rel = path;
	size_t dl = strlen(m->dir);
	bool in_outputs = outputs_ok && path[0] == '/' && strncmp(path, m->dir, dl) == 0 &&
	                  strncmp(path + dl, "/outputs/", 9) == 0;
	kbox_error_t err = {0};

	p->dirfd = -1;
	if (in_outputs)
		rel = path + dl + 9;
	if (ws_check_path(rel, &err) < 0) {
		if (path[0] == '/' && outputs_ok && !in_outputs)
			snprintf(why, size,
			         "%s: an absolute path is outside the workspace (give a path "
			         "relative to it, or a path in the session's outputs that a result "
			         "gave)",
			         path);
		else
			snprintf(why, size, "%s", err.msg);
		return -1;
	}
	if ((p->dirfd = ws_open_session(m->dir, in_outputs ? "outputs" : "workspace", &err)) < 0) {
		snprintf(why, size, "%s", err.msg);
		return -1;
	}
	p->rel = rel;
	return 0;
}

/* ---- reading ---- */

/* Read the regular file PATH (as tool_path resolves it) whole, when it
 * holds at most MAX bytes: malloc'd, *LEN its size, NUL-terminated
 * (ws_open_regular: no device opens, no FIFO waits).  NULL with WHY. */
static char *read_whole(mcp_t *m, const char *path, bool outputs_ok, long max, size_t *len,
                        char *why, size_t size)
{
	tool_path_t p;
	struct stat st;
	kbox_error_t err = {0};
	char *buf = NULL;
	int fd = -1;
	size_t got = 0;

	if (tool_path(m, path, outputs_ok, &p, why, size) < 0)
		goto out;
	if ((fd = ws_open_regular(p.dirfd, p.rel, path, &st, &err)) < 0) {
		if (err.code == KBOX_E_NOTFOUND)
			snprintf(why, size, "%s: no such file", path);
		else
			snprintf(why, size, "%s", err.msg);
		goto out;
	}
	if (st.st_size > max) {
		snprintf(why, size, "%s is %lld bytes, more than the %ld bytes this tool returns",
		         path, (long long)st.st_size, max);
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
		if (n < 0 || got + (size_t)n > (size_t)max) { /* an error, or it grew */
			if (n < 0)
				snprintf(why, size, "%s: %s", path, strerror(errno));
			else
				snprintf(why, size,
				         "%s is more than the %ld bytes this tool returns", path,
				         max);
			free(buf);
			buf = NULL;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	*len = got;
out:
	if (fd >= 0)
		close(fd);
	if (p.dirfd >= 0)
		close(p.dirfd);
	return buf;
}

/* ---- images ---- */

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

/* PATH's image as MCP image content: mcp_int.h. */
json_t *mcp_image_item(mcp_t *m, const char *path, long budget, size_t *len_p, char *why,
                       size_t size)
{
	size_t len = 0;
	char *data = read_whole(m, path, true, IMAGE_MAX, &len, why, size), *b64;
	const char *mime;
	json_t *item = NULL;
	if (!data)
		return NULL;
	*len_p = len;
	if (len > (size_t)budget)
		why[0] = '\0';
	else if (!(mime = image_mime((unsigned char *)data, len)))
		snprintf(why, size, "%s is not a PNG, JPEG, GIF or WebP image", path);
	else if (!(b64 = kx_base64_encode(data, len, NULL)))
		snprintf(why, size, "out of memory");
	else {
		item = json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", mime);
		free(b64);
	}
	free(data);
	return item;
}

/* read_image {path}: an image of the workspace or of the session's
 * outputs, as image content. */
json_t *mcp_read_image(mcp_t *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	char why[PATH_MAX + 256];
	json_t *item;
	size_t len;
	if (!path)
		return mcp_text_result(true, "read_image: \"path\" (a string) is required");
	if (!(item = mcp_image_item(m, path, IMAGE_MAX, &len, why, sizeof why)))
		return mcp_text_result(true, "read_image: %s", why);
	return mcp_tool_result(json_pack("[o]", item), NULL, false);
}

/* ---- listing ---- */

/* The length of the UTF-8 sequence at S (N bytes left): 1 to 4, or 0 when
 * it is not valid (a stray byte, an overlong form, a surrogate). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80                    ? 1
	             : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
	             : s[0] >= 0xe0 && s[0] <= 0xef ? 3
	             : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
	                                            : 0;
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

/* The line of list_files for the entry NAME of the directory DIRFD (new,
 * or NULL): NAME escaped, then "/" for a directory, "@" for a symbolic
 * link, its size for a file, what it is for anything else. */
static char *entry_line(int dirfd, const char *name)
{
	char line[4 * NAME_MAX + 64], shown[4 * NAME_MAX + 8], sz[32];
	struct stat st;

	escape_name(name, shown, sizeof shown);
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		snprintf(line, sizeof line, "%s", shown);
	else if (S_ISDIR(st.st_mode))
		snprintf(line, sizeof line, "%s/", shown);
	else if (S_ISREG(st.st_mode))
		snprintf(line, sizeof line, "%s\t%s", shown,
		         kx_fmt_bytes(sz, sizeof sz, (long long)st.st_size));
	else if (S_ISLNK(st.st_mode))
		snprintf(line, sizeof line, "%s@", shown);
	else
		snprintf(line, sizeof line, "%s\t(%s)", shown, ws_file_kind(&st));
	return strdup(line);
}

/* The text of list_files for PATH, whose N entry lines are LINES (sorted
 * here): at most LIST_MAX of them.  New, or NULL. */
static char *listing(const char *path, char **lines, size_t n)
{
	kx_buf_t b = KX_BUF_INIT;
	if (n)
		qsort(lines, n, sizeof *lines, cmp_names);
	if (n == 0)
		kx_buf_appendf(&b, "%s is empty\n", path);
	for (size_t i = 0; i < n && i < LIST_MAX; i++)
		kx_buf_appendf(&b, "%s\n", lines[i]);
	if (n > LIST_MAX)
		kx_buf_appendf(&b, "[... %zu more entries not shown]\n", n - LIST_MAX);
	return kx_buf_take(&b, NULL);
}

/* list_files {path?}: the entries of a directory of the workspace, one a
 * line: NAME (a directory NAME/), its size for a file. */
json_t *mcp_list_files(mcp_t *m, json_t *args)
{
	json_t *jp = json_object_get(args, "path"), *res = NULL;
	const char *path = json_is_string(jp) ? json_string_value(jp) : ".";
	char why[PATH_MAX + 256], **lines = NULL, *text = NULL;
	tool_path_t p = {.dirfd = -1};
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d = NULL;
	int fd;

	if (jp && !json_is_string(jp))
		return mcp_text_result(true, "list_files: \"path\" must be a string");
	if (!*path || strcmp(path, ".") == 0 || strcmp(path, "./") == 0)
		path = ".";
	if (tool_path(m, path, false, &p, why, sizeof why) < 0)
		return mcp_text_result(true, "list_files: %s", why);
	fd = ws_open(p.dirfd, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || !(d = fdopendir(fd))) {
		res = mcp_text_result(true, "list_files: %s: %s", path,
		                      errno == ENOENT    ? "no such directory"
		                      : errno == ENOTDIR ? "not a directory"
		                                         : ws_strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == cap) {
			char **nn = realloc(lines, (cap = cap ? cap * 2 : 64) * sizeof *lines);
			if (!nn)
				break;
			lines = nn;
		}
		if (!(lines[n] = entry_line(dirfd(d), e->d_name)))
			break;
		n++;
	}
	if ((text = listing(path, lines, n)))
		res = mcp_tool_result(json_pack("[o]", mcp_text_item(text)), NULL, false);
out:
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
	free(text);
	close(p.dirfd);
	return res;
}

/* read_file {path}: a text file of the workspace, whole. */
json_t *mcp_read_file(mcp_t *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	char why[PATH_MAX + 256], *data;
	size_t len = 0;
	json_t *res, *text;

	if (!path)
		return mcp_text_result(true, "read_file: \"path\" (a string) is required");
	if (!(data = read_whole(m, path, true, READ_FILE_MAX, &len, why, sizeof why)))
		return mcp_text_result(true, "read_file: %s", why);
	if (memchr(data, '\0', len) || !(text = json_stringn(data, len)))
		res = mcp_text_result(true,
		                      "read_file: %s is not a text file (it is binary, or not "
		                      "UTF-8): read it with code (run_python)",
		                      path);
	else
		res = mcp_tool_result(json_pack("[{s:s, s:o}]", "type", "text", "text", text), NULL,
		                      false);
	free(data);
	return res;
}

/* ---- writing ---- */

/* Why CLEN bytes of content are more than write_file writes in the
 * session of M (its file-size limit, or WRITE_FILE_MAX), into WHY; false
 * when they are not. */
static bool too_large(mcp_t *m, size_t clen, char *why, size_t size)
{
	kr_session_config_t config;
	long long file_size = 0;
	bool session_limit;

	if (kr_session_config_load(&config, m->dir, NULL) == 0)
		file_size = config.file_size;
	kr_session_config_free(&config);
	if (clen <= (size_t)WRITE_FILE_MAX && (file_size <= 0 || (long long)clen <= file_size))
		return false;
	session_limit = file_size > 0 && file_size < WRITE_FILE_MAX;
	snprintf(why, size,
	         "the content is %zu bytes, more than %s%lld bytes: write a larger file "
	         "with code (run_python)",
	         clen,
	         session_limit ? "the session's file-size limit (kbox start --file-size), "
	                       : "the most this tool writes, ",
	         session_limit ? file_size : (long long)WRITE_FILE_MAX);
	return true;
}

/* write_file {path, content}: save text as a file of the workspace (made,
 * or replaced whole): written beside it, then renamed over it, so that
 * nothing at that name is followed or opened. */
json_t *mcp_write_file(mcp_t *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	json_t *jc = json_object_get(args, "content");
	const char *content = json_string_value(jc), *name;
	size_t clen = json_string_length(jc);
	char why[PATH_MAX + 256];
	tool_path_t p = {.dirfd = -1};
	ws_file_t f = WS_FILE_INIT;
	kbox_error_t err = {0};
	int parent;
	json_t *res = NULL;

	if (!path || !content)
		return mcp_text_result(true, "write_file: \"path\" and \"content\" (strings) are "
		                             "required");
	if (too_large(m, clen, why, sizeof why))
		return mcp_text_result(true, "write_file: %s", why);
	if (tool_path(m, path, false, &p, why, sizeof why) < 0)
		return mcp_text_result(true, "write_file: %s", why);
	if (path[strlen(path) - 1] == '/')
		res = mcp_text_result(true, "write_file: %s names a directory, not a file", path);
	else if ((parent = ws_open_parent(p.dirfd, path, &name, &err)) < 0 ||
	         ws_file_begin(&f, parent, name, path, "mcp", &err) < 0)
		res = mcp_text_result(true, "write_file: %s", err.msg);
	else if (kx_write_all(f.fd, content, clen) < 0)
		res = mcp_text_result(true, "write_file: %s: %s", path, strerror(errno));
	else if (ws_file_commit(&f, &err) < 0)
		res = mcp_text_result(true, "write_file: %s", err.msg);
	else
		res = mcp_text_result(false, "wrote %zu bytes to %s", clen, path);
	ws_file_end(&f);
	close(p.dirfd);
	return res;
}
