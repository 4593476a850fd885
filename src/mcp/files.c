/* src/mcp/files.c — kbox mcp's tools on files: list_files, read_file,
 * write_file and read_image, in the session's workspace (the kernel's
 * working directory) and, for reading, in its outputs (the paths that
 * results gave).  Every path is confined by src/runtime/workspace.h, as
 * kbox put's and kbox get's are. */
#include "config.h"
#include "mcp/mcp_int.h"
#include "runtime/backend.h"
#include "runtime/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_FILE_MAX (1L * 1024 * 1024)   /* read_file: the most it returns */
#define IMAGE_MAX (5L * 1024 * 1024)       /* an image returned as data */
#define WRITE_FILE_MAX (16L * 1024 * 1024) /* write_file: the most it writes */

/* ---- paths ---- */

/* What can be opened beneath: the workspace or the session's outputs (an
 * absolute path that the results gave). */
typedef struct {
	int dirfd;       /* the directory it is beneath (-1 when remote) */
	const char *rel; /* the path under it */
	bool remote;     /* in the kernel's directory on its Jupyter server */
} tool_path_t;

/* Resolve PATH for a tool: relative, or under /workspace (where the code
 * sees it), the workspace's; absolute, only in the session's outputs
 * directory (with OUTPUTS_OK).  0 with *P (its
 * dirfd to close), or -1 with WHY. */
static int tool_path(mcp_t *m, const char *path, bool outputs_ok, tool_path_t *p, char *why,
                     size_t size)
{
	const char *rel = path;
	size_t dl = strlen(m->sess->dir);
	bool in_outputs = outputs_ok && path[0] == '/' && strncmp(path, m->sess->dir, dl) == 0 &&
	                  strncmp(path + dl, "/outputs/", 9) == 0;
	kbox_error_t err = {0};

	p->dirfd = -1;
	if (in_outputs)
		rel = path + dl + 9;
	/* the workspace as the code sees it, which a model may well give */
	else if (strcmp(path, "/workspace") == 0 || strcmp(path, "/workspace/") == 0)
		rel = ".";
	else if (strncmp(path, "/workspace/", 11) == 0)
		rel = path + 11;
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
	p->rel = rel;
	p->remote = false;
	if (!in_outputs) {
		/* a remote kernel's files are its server's, reached through
		 * its contents API (an image or a spill file a result gave is
		 * in the outputs, here) */
		kr_session_config_t cfg;
		kr_session_config_init(&cfg);
		p->remote = kr_session_config_load(&cfg, m->sess->dir, NULL) == 0 &&
		            kr_backend_remote(cfg.backend);
		kr_session_config_free(&cfg);
		if (p->remote)
			return 0;
	}
	if ((p->dirfd = ws_open_session(m->sess->dir, in_outputs ? "outputs" : "workspace", &err)) <
	    0) {
		snprintf(why, size, "%s", err.msg);
		return -1;
	}
	p->rel = rel;
	return 0;
}

/* ---- reading ---- */

/* Open the regular file P for reading, as ws_open_regular does (PATH as
 * the tool was given it), with its status in *ST: of a remote session, a
 * copy in memory of the server's, when it holds at most MAX bytes (0:
 * KG_FILE_MAX, since the contents API sends a file whole).  -1 with ERR. */
/* What a read of a remote file does with the copy kept (m->copy): none;
 * keep its own (a read_file's first page); or reuse the one kept, and
 * keep its own when it is fetched anew (a read_file's later pages). */
typedef enum { COPY_NONE, COPY_KEEP, COPY_REUSE } copy_use_t;

void mcp_remote_copy_drop(mcp_t *m)
{
	mcp_remote_copy_t *c = &m->copy;
	if (!c->set)
		return;
	free(c->dir);
	free(c->rel);
	close(c->fd);
	memset(c, 0, sizeof *c);
}

static int open_regular(mcp_t *m, const tool_path_t *p, const char *path, long max, copy_use_t use,
                        struct stat *st, kbox_error_t *err)
{
	mcp_remote_copy_t *c = &m->copy;
	char stamp[KG_STAMP_MAX] = "", rdir[300] = "";
	long long size = 0;
	int fd, rc;
	if (!p->remote)
		return ws_open_regular(p->dirfd, p->rel, path, st, err);
	/* (the copy kept of it, for the next pages of a read_file: when the
	 * server says it is the file still, the same session's directory
	 * there and the same path, it is not fetched again) */
	kr_gateway_dir_recorded(m->sess->dir, rdir, sizeof rdir);
	if (use == COPY_REUSE && c->set && *rdir && strcmp(c->dir, m->sess->dir) == 0 &&
	    strcmp(c->rdir, rdir) == 0 && strcmp(c->rel, p->rel) == 0)
		snprintf(stamp, sizeof stamp, "%s", c->stamp);
	if ((fd = memfd_create("kbox-mcp", MFD_CLOEXEC)) < 0)
		return kbox_error_set_sys(err, "%s", path);
	if ((rc = kr_gateway_get(m->sess->dir, p->rel, fd, max, &size, stamp, err)) < 0) {
		if (err->code == KBOX_E_INVALID && strstr(err->msg, "is a directory"))
			kbox_error_set(err, KBOX_E_INVALID, "%s is a directory, not a file", path);
		close(fd);
		return -1;
	}
	if (rc == 1) { /* unchanged */
		close(fd);
		if ((fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0)) < 0)
			return kbox_error_set_sys(err, "%s", path);
		size = c->size;
	} else if (use != COPY_NONE) {
		mcp_remote_copy_drop(m);
		if (*stamp && *rdir && (c->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0) {
			c->dir = strdup(m->sess->dir);
			c->rel = strdup(p->rel);
			c->set = true;
			if (!c->dir || !c->rel)
				mcp_remote_copy_drop(m);
			else {
				snprintf(c->rdir, sizeof c->rdir, "%s", rdir);
				snprintf(c->stamp, sizeof c->stamp, "%s", stamp);
				c->size = size;
			}
		}
	}
	memset(st, 0, sizeof *st);
	st->st_mode = S_IFREG | 0600;
	st->st_size = (off_t)size;
	return fd;
}

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
	ssize_t n;

	if (tool_path(m, path, outputs_ok, &p, why, size) < 0)
		goto out;
	if ((fd = open_regular(m, &p, path, max, COPY_NONE, &st, &err)) < 0) {
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
	n = kx_pread_full(fd, buf, (size_t)max + 1, 0);
	if (n < 0 || n > max) { /* an error, or it grew */
		if (n < 0)
			snprintf(why, size, "%s: %s", path, strerror(errno));
		else
			snprintf(why, size, "%s is more than the %ld bytes this tool returns", path,
			         max);
		free(buf);
		buf = NULL;
		goto out;
	}
	got = (size_t)n;
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

/* ---- listing ----
 *
 * The kernel makes the workspace's entries, as many and as long as it
 * likes: a listing holds at most LIST_MAX names at a time (the first by
 * name, in a heap), reads at most LIST_EXAMINE entries of a directory,
 * stats and escapes only the names it shows, and its text is at most
 * LIST_TEXT_MAX bytes.  So it takes bounded memory and time, and the
 * server answers the next message (a ping, a cancellation) soon after. */

#define LIST_MAX 1000             /* entries shown */
#define LIST_EXAMINE 100000       /* entries of a directory read */
#define LIST_TEXT_MAX (256 << 10) /* the text of the entries shown */

/* The LIST_MAX names that come first (strcmp) of those offered: a heap
 * whose top is the last of them. */
typedef struct {
	char *v[LIST_MAX];
	size_t n;
} top_names_t;

static void heap_swap(top_names_t *h, size_t a, size_t b)
{
	char *t = h->v[a];
	h->v[a] = h->v[b];
	h->v[b] = t;
}

/* Offer NAME to H: kept (copied) when it is among the first LIST_MAX.  -1
 * when out of memory. */
static int top_names_offer(top_names_t *h, const char *name)
{
	size_t i;
	char *copy;
	if (h->n == LIST_MAX && strcmp(name, h->v[0]) >= 0)
		return 0;
	if (!(copy = strdup(name)))
		return -1;
	if (h->n < LIST_MAX) { /* up from the bottom */
		i = h->n++;
		h->v[i] = copy;
		while (i && strcmp(h->v[(i - 1) / 2], h->v[i]) < 0) {
			heap_swap(h, i, (i - 1) / 2);
			i = (i - 1) / 2;
		}
		return 0;
	}
	free(h->v[0]); /* the last one goes: down from the top */
	h->v[0] = copy;
	for (i = 0;;) {
		size_t l = 2 * i + 1, r = l + 1, big = i;
		if (l < h->n && strcmp(h->v[l], h->v[big]) > 0)
			big = l;
		if (r < h->n && strcmp(h->v[r], h->v[big]) > 0)
			big = r;
		if (big == i)
			break;
		heap_swap(h, i, big);
		i = big;
	}
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append to B the line of list_files for the entry NAME of the directory
 * DIRFD: NAME escaped (kx_name_escape), after a backslash when it begins,
 * after any blank characters (kx_utf8_blank), with "[" or a fullwidth one
 * (so that no name reads as the listing's own "[... N more" line: a
 * backslash of the name itself is "\\"), then "/" for a directory, "@"
 * for a symbolic link, its size for a file, what it is for anything
 * else. */
static void entry_name(kx_buf_t *b, const char *name, char *shown, size_t size)
{
	size_t len = strlen(name), i = 0, n;
	while ((n = kx_utf8_blank(name + i, len - i)))
		i += n;
	if (name[i] == '[' || strncmp(name + i, "\xef\xbc\xbb", 3) == 0)
		kx_buf_append(b, "\\", 1);
	kx_name_escape(name, len, shown, size);
}

static void entry_line(kx_buf_t *b, int dirfd, const char *name)
{
	char shown[KX_NAME_ESCAPED_MAX(NAME_MAX)], sz[32];
	struct stat st;

	entry_name(b, name, shown, sizeof shown);
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		kx_buf_appendf(b, "%s\n", shown);
	else if (S_ISDIR(st.st_mode))
		kx_buf_appendf(b, "%s/\n", shown);
	else if (S_ISREG(st.st_mode))
		kx_buf_appendf(b, "%s\t%s\n", shown,
		               kx_fmt_bytes(sz, sizeof sz, (long long)st.st_size));
	else if (S_ISLNK(st.st_mode))
		kx_buf_appendf(b, "%s@\n", shown);
	else
		kx_buf_appendf(b, "%s\t(%s)\n", shown, ws_file_kind(&st));
}

/* The text of list_files for PATH, the directory D: the first LIST_MAX
 * names (strcmp order) of the first LIST_EXAMINE entries read, as much of
 * them as LIST_TEXT_MAX holds, then what was left out.  New, or NULL when
 * out of memory. */
static char *listing(const char *path, DIR *d)
{
	top_names_t top; /* 8 KB of pointers */
	kx_buf_t b = KX_BUF_INIT;
	size_t seen = 0, shown = 0;
	bool more = false, failed = false;
	struct dirent *e;

	top.n = 0;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (seen == LIST_EXAMINE) { /* one more: say so, read no further */
			more = true;
			break;
		}
		seen++;
		if (top_names_offer(&top, e->d_name) < 0) {
			failed = true;
			break;
		}
	}
	qsort(top.v, top.n, sizeof *top.v, cmp_names);
	if (seen == 0)
		kx_buf_appendf(&b, "%s is empty\n", path);
	for (size_t i = 0; i < top.n && !failed; i++) {
		size_t len = b.len;
		entry_line(&b, dirfd(d), top.v[i]);
		if (b.len > LIST_TEXT_MAX) { /* that line is one too many */
			b.len = len;
			b.data[len] = '\0';
			break;
		}
		shown++;
	}
	if (shown < seen && more)
		kx_buf_appendf(&b,
		               "[... %zu more entries not shown, and more not examined: "
		               "list_files reads at most %d entries of a directory]\n",
		               seen - shown, LIST_EXAMINE);
	else if (shown < seen)
		kx_buf_appendf(&b, "[... %zu more entries not shown]\n", seen - shown);
	for (size_t i = 0; i < top.n; i++)
		free(top.v[i]);
	if (failed) {
		kx_buf_reset(&b);
		return NULL;
	}
	return kx_buf_take(&b, NULL);
}

static int cmp_entries(const void *a, const void *b)
{
	return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
	              json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

/* The text of list_files for PATH of a remote session: its server's
 * ENTRIES ([{name, type, size}]; the server's listing is bounded in
 * bytes), as listing's. */
static char *remote_listing(const char *path, json_t *entries)
{
	size_t n = json_array_size(entries), shown = 0, k = 0;
	json_t **v = calloc(n ? n : 1, sizeof *v), *e;
	kx_buf_t b = KX_BUF_INIT;
	size_t i;

	if (!v)
		return NULL;
	json_array_foreach(entries, i, e) if (json_string_value(json_object_get(e, "name")))
	        v[k++] = e;
	qsort(v, k, sizeof *v, cmp_entries);
	if (k == 0)
		kx_buf_appendf(&b, "%s is empty\n", path);
	for (i = 0; i < k && i < LIST_MAX; i++) {
		char shown_name[KX_NAME_ESCAPED_MAX(NAME_MAX)], sz[32];
		const char *name = json_string_value(json_object_get(v[i], "name"));
		const char *type = json_string_value(json_object_get(v[i], "type"));
		json_t *size = json_object_get(v[i], "size");
		size_t len = b.len;
		if (strlen(name) > NAME_MAX)
			continue;
		entry_name(&b, name, shown_name, sizeof shown_name);
		if (type && strcmp(type, "directory") == 0)
			kx_buf_appendf(&b, "%s/\n", shown_name);
		else if (json_is_integer(size))
			kx_buf_appendf(
			        &b, "%s\t%s\n", shown_name,
			        kx_fmt_bytes(sz, sizeof sz, (long long)json_integer_value(size)));
		else
			kx_buf_appendf(&b, "%s\n", shown_name);
		if (b.len > LIST_TEXT_MAX) {
			b.len = len;
			b.data[len] = '\0';
			break;
		}
		shown++;
	}
	if (shown < k)
		kx_buf_appendf(&b, "[... %zu more entries not shown]\n", k - shown);
	free(v);
	return kx_buf_take(&b, NULL);
}

/* list_files {path?}: the entries of a directory of the workspace, one a
 * line: NAME (a directory NAME/), its size for a file. */
json_t *mcp_list_files(mcp_t *m, json_t *args)
{
	json_t *jp = json_object_get(args, "path"), *res = NULL;
	const char *path = json_is_string(jp) ? json_string_value(jp) : ".";
	char why[PATH_MAX + 256], *text = NULL;
	tool_path_t p = {.dirfd = -1};
	DIR *d = NULL;
	int fd;

	if (jp && !json_is_string(jp))
		return mcp_text_result(true, "list_files: \"path\" must be a string");
	if (!*path || strcmp(path, ".") == 0 || strcmp(path, "./") == 0)
		path = ".";
	if (tool_path(m, path, false, &p, why, sizeof why) < 0)
		return mcp_text_result(true, "list_files: %s", why);
	if (p.remote) {
		json_t *entries = NULL;
		kbox_error_t err = {0};
		if (kr_gateway_list(m->sess->dir, p.rel, &entries, &err) < 0)
			return err.code == KBOX_E_INVALID && strstr(err.msg, ": not a directory")
			               ? mcp_text_result(true, "list_files: %s: not a directory",
			                                 path)
			               : mcp_text_result(true, "list_files: %s", err.msg);
		text = remote_listing(path, entries);
		json_decref(entries);
		if (!text)
			return mcp_text_result(true, "list_files: %s: out of memory", path);
		res = mcp_tool_result(json_pack("[o]", mcp_text_item(text)), NULL, false);
		free(text);
		return res;
	}
	fd = ws_open(p.dirfd, p.rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || !(d = fdopendir(fd))) {
		res = mcp_text_result(true, "list_files: %s: %s", path,
		                      errno == ENOENT    ? "no such directory"
		                      : errno == ENOTDIR ? "not a directory"
		                                         : ws_strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	if ((text = listing(path, d)))
		res = mcp_tool_result(json_pack("[o]", mcp_text_item(text)), NULL, false);
	else
		res = mcp_text_result(true, "list_files: %s: out of memory", path);
out:
	if (d)
		closedir(d);
	free(text);
	close(p.dirfd);
	return res;
}

/* The part of the file open at FD that read_file returns from OFFSET: at
 * most MAX bytes (1 to READ_FILE_MAX), read into BUF (MAX + 4 bytes), cut
 * before the character or, when one ends in its second half, the line
 * that would cross the bound.  Its length, *MORE whether the file goes on
 * after it; -1 (errno) when it cannot be read. */
static ssize_t read_part(int fd, long long offset, size_t max, char *buf, bool *more)
{
	ssize_t n = kx_pread_full(fd, buf, max + 4, (off_t)offset);
	size_t got, cut;

	if (n < 0)
		return -1;
	got = (size_t)n;
	*more = got > max;
	if (!*more)
		return (ssize_t)got;
	/* buf[cut] begins the character the next part begins with: 3 bytes
	 * back at most (a character is 4 at most; more continuation bytes in
	 * a row are no UTF-8, which the part's check then says); a part of
	 * fewer bytes than its first character is that character whole */
	cut = max;
	while (cut > 0 && cut + 3 > max && ((unsigned char)buf[cut] & 0xc0) == 0x80)
		cut--;
	if (cut == 0) {
		for (cut = 1; cut < got && cut < 4 && ((unsigned char)buf[cut] & 0xc0) == 0x80;
		     cut++)
			;
		*more = got > cut; /* MAX + 4 bytes hold what follows, if anything */
		return (ssize_t)cut;
	}
	for (size_t i = cut; i > cut / 2; i--)
		if (buf[i - 1] == '\n')
			return (ssize_t)i;
	return (ssize_t)cut;
}

/* Whether OFFSET, where the file open at FD has a continuation byte, is
 * inside a character that begins at most 3 bytes before it (else the byte
 * is no UTF-8 at all). */
static bool inside_char(int fd, long long offset)
{
	unsigned char b[3];
	size_t k = offset < 3 ? (size_t)offset : 3;
	ssize_t n = kx_pread_full(fd, b, k, (off_t)(offset - (long long)k));

	for (ssize_t i = n - 1; i >= 0; i--) {
		size_t need = b[i] >= 0xf0 ? 4 : b[i] >= 0xe0 ? 3 : b[i] >= 0xc0 ? 2 : 0;
		if ((b[i] & 0xc0) != 0x80) /* the lead byte: is OFFSET within its length? */
			return need > (size_t)(n - i);
	}
	return false;
}

/* read_file {path, offset?, length?}: a text file of the workspace, or an
 * output of the session's, from OFFSET (a byte; 0 by default): LENGTH
 * bytes at most (READ_FILE_MAX by default, and at most), and, when the
 * file goes on, a second text that says where the next part begins. */
json_t *mcp_read_file(mcp_t *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	json_t *joff = json_object_get(args, "offset"), *res = NULL, *text;
	json_t *jlen = json_object_get(args, "length");
	size_t max = (size_t)READ_FILE_MAX;
	char why[PATH_MAX + 256], *buf = NULL, *quoted;
	kx_buf_t qb = KX_BUF_INIT;
	long long offset = 0;
	kbox_error_t err = {0};
	tool_path_t p = {.dirfd = -1};
	struct stat st;
	ssize_t len;
	bool more;
	int fd = -1;

	if (!path)
		return mcp_text_result(true, "read_file: \"path\" (a string) is required");
	if (joff && (!json_is_integer(joff) || json_integer_value(joff) < 0))
		return mcp_text_result(true, "read_file: \"offset\" must be a whole number of "
		                             "bytes, 0 or more");
	if (joff)
		offset = (long long)json_integer_value(joff);
	if (jlen && (!json_is_integer(jlen) || json_integer_value(jlen) < 1 ||
	             json_integer_value(jlen) > READ_FILE_MAX))
		return mcp_text_result(
		        true,
		        "read_file: \"length\" must be a whole number of bytes from 1 "
		        "to %ld (1 MiB)",
		        READ_FILE_MAX);
	if (jlen)
		max = (size_t)json_integer_value(jlen);
	if (tool_path(m, path, true, &p, why, sizeof why) < 0)
		return mcp_text_result(true, "read_file: %s", why);
	if ((fd = open_regular(m, &p, path, 0, offset > 0 ? COPY_REUSE : COPY_KEEP, &st, &err)) <
	    0) {
		res = err.code == KBOX_E_NOTFOUND
		              ? mcp_text_result(true, "read_file: %s: no such file", path)
		              : mcp_text_result(true, "read_file: %s", err.msg);
		goto out;
	}
	if (offset > 0 && offset == (long long)st.st_size) {
		res = mcp_text_result(false, "[offset %lld is the end of %s: nothing more to read]",
		                      offset, path);
		goto out;
	}
	if (offset > 0 && offset > (long long)st.st_size) {
		res = mcp_text_result(true,
		                      "read_file: offset %lld is past the end of %s (%lld bytes)",
		                      offset, path, (long long)st.st_size);
		goto out;
	}
	if (!(buf = malloc(max + 4))) {
		res = mcp_text_result(true, "read_file: %s: out of memory", path);
		goto out;
	}
	if ((len = read_part(fd, offset, max, buf, &more)) < 0) {
		res = mcp_text_result(true, "read_file: %s: %s", path, strerror(errno));
		goto out;
	}
	if (len > 0 && ((unsigned char)buf[0] & 0xc0) == 0x80 && inside_char(fd, offset)) {
		res = mcp_text_result(true,
		                      "read_file: offset %lld is inside a character of %s: give an "
		                      "offset a result gave, or 0",
		                      offset, path);
		goto out;
	}
	if (memchr(buf, '\0', (size_t)len) || !kx_utf8_valid(buf, (size_t)len)) {
		res = mcp_text_result(true,
		                      "read_file: %s is not a text file (it is binary, or not "
		                      "UTF-8): %s",
		                      path,
		                      path[0] == '/'
		                              ? "an image is shown by read_image (the code cannot "
		                                "read the session's outputs)"
		                              : "read it with code (run_python), or an image "
		                                "with read_image");
		goto out;
	}
	/* the model reads it as it reads the kernel's text in a result: a
	 * line that begins like one of kbox's own is quoted (an output file
	 * holds what the kernel printed) */
	kx_buf_kernel(&qb, buf, (size_t)len);
	if (!(quoted = kx_buf_take(&qb, NULL)) || !(text = json_string(quoted))) {
		free(quoted);
		res = mcp_text_result(true, "read_file: %s: out of memory", path);
		goto out;
	}
	free(quoted);
	if (more) {
		char note[128];
		long long next = offset + (long long)len;
		snprintf(note, sizeof note, "[... %lld more bytes: read_file with offset %lld]",
		         (long long)st.st_size > next ? (long long)st.st_size - next : 0LL, next);
		res = mcp_tool_result(json_pack("[{s:s, s:o}, o]", "type", "text", "text", text,
		                                mcp_text_item(note)),
		                      NULL, false);
	} else {
		res = mcp_tool_result(json_pack("[{s:s, s:o}]", "type", "text", "text", text), NULL,
		                      false);
		mcp_remote_copy_drop(m); /* (its last page is read) */
	}
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	close(p.dirfd);
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

	if (kr_session_config_load(&config, m->sess->dir, NULL) == 0)
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

/* write_file's answer: N bytes written to PATH, shown escaped as
 * list_files shows a name (a control character would reach the client's
 * terminal). */
static json_t *wrote(size_t n, const char *path)
{
	size_t len = strlen(path);
	char *shown = malloc(KX_NAME_ESCAPED_MAX(len));
	json_t *res;
	if (!shown) /* (written: said without the name) */
		return mcp_text_result(false, "wrote %zu byte%s", n, n == 1 ? "" : "s");
	kx_name_escape(path, len, shown, KX_NAME_ESCAPED_MAX(len));
	res = mcp_text_result(false, "wrote %zu byte%s to %s", n, n == 1 ? "" : "s", shown);
	free(shown);
	return res;
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
	else if (p.remote) {
		/* to the server, from a file of memory */
		int fd = memfd_create("kbox-mcp", MFD_CLOEXEC);
		if (fd < 0 || kx_write_all(fd, content, clen) < 0 || lseek(fd, 0, SEEK_SET) < 0)
			res = mcp_text_result(true, "write_file: %s: %s", path, strerror(errno));
		else if (kr_gateway_put(m->sess->dir, fd, p.rel, NULL, &err) < 0)
			res = mcp_text_result(true, "write_file: %s", err.msg);
		else
			res = wrote(clen, path);
		if (fd >= 0)
			close(fd);
	} else if ((parent = ws_open_parent(p.dirfd, p.rel, &name, &err)) < 0 ||
	           ws_file_begin(&f, parent, name, path, "mcp", &err) < 0)
		res = mcp_text_result(true, "write_file: %s", err.msg);
	else if (kx_write_all(f.fd, content, clen) < 0)
		res = mcp_text_result(true, "write_file: %s: %s", path, strerror(errno));
	else if (ws_file_commit(&f, &err) < 0)
		res = mcp_text_result(true, "write_file: %s", err.msg);
	else
		res = wrote(clen, path);
	ws_file_end(&f);
	close(p.dirfd);
	return res;
}
