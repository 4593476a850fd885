/* tests/fixture.h — recorded ipykernel output (tests/fixtures/<name>.json,
 * made by tests/record_fixtures.py) turned back into kbox_msg_t messages and
 * fed through a kbox_capture_t, so the capture layer and the renderers are
 * tested without a kernel.
 *
 * A fixture is {"scenario", "code", "iopub": [entry…], "reply": {…}} where
 * each entry is {"msg_type", "header": {"msg_type"}, "metadata", "content"}
 * in arrival order.  Everything here is static inline so each test program
 * uses what it needs; only the public API is used. */
#ifndef KBOX_TESTS_FIXTURE_H
#define KBOX_TESTS_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kbox.h>
#include <kbox/capture.h>
#include "tmpdir.h"

/* The parent every fixture message claims (the execute_request). */
#define FIXTURE_PARENT_ID "fixture-execute-request"

/* Write the path of fixture NAME to BUF: $top_srcdir/tests/fixtures/NAME.json
 * when top_srcdir is set (make check), else next to this header.  0 or -1. */
static inline int fixture_path(const char *name, char *buf, size_t size)
{
	const char *top = getenv("top_srcdir");
	const char *here = __FILE__;
	const char *slash = strrchr(here, '/');
	int n;

	if (top && *top)
		n = snprintf(buf, size, "%s/tests/fixtures/%s.json", top, name);
	else if (slash)
		n = snprintf(buf, size, "%.*s/fixtures/%s.json", (int)(slash - here), here, name);
	else
		n = snprintf(buf, size, "fixtures/%s.json", name);
	return n >= 0 && (size_t)n < size ? 0 : -1;
}

/* Load fixture NAME (new reference), or NULL with a TAP comment saying why. */
static inline json_t *fixture_load(const char *name)
{
	char path[4096];
	json_error_t jerr;
	json_t *doc;

	if (fixture_path(name, path, sizeof path) != 0) {
		printf("# fixture %s: path too long\n", name);
		return NULL;
	}
	doc = json_load_file(path, 0, &jerr);
	if (!doc) {
		printf("# fixture %s: %s: %s (line %d)\n", name, path, jerr.text, jerr.line);
		return NULL;
	}
	if (!json_is_array(json_object_get(doc, "iopub"))) {
		printf("# fixture %s: %s has no \"iopub\" array\n", name, path);
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* A message of MSG_TYPE with CONTENT and METADATA (both borrowed, copied;
 * either may be NULL), its parent the fixture's execute_request.  Caller
 * owns the result; NULL on failure. */
static inline kbox_msg_t *fixture_msg_new(const char *msg_type, json_t *content, json_t *metadata)
{
	json_t *copy = content ? json_deep_copy(content) : json_object();
	kbox_msg_t *msg;

	if (!copy)
		return NULL;
	msg = kbox_msg_new(msg_type, "fixture", "fixture", &copy);
	json_decref(copy); /* NULL after a successful kbox_msg_new */
	if (!msg)
		return NULL;
	if (json_is_object(metadata))
		json_object_update(kbox_msg_metadata(msg), metadata);
	json_object_set_new(kbox_msg_parent_header(msg), "msg_id", json_string(FIXTURE_PARENT_ID));
	json_object_set_new(kbox_msg_parent_header(msg), "msg_type",
	                    json_string("execute_request"));
	return msg;
}

/* A message of MSG_TYPE whose content is the JSON text CONTENT, for
 * hand-built sequences: fixture_msg_json("stream",
 * "{\"name\":\"stdout\",\"text\":\"hi\\n\"}").  NULL on bad JSON.  Read as
 * the wire reads a message: "\u0000" is a NUL byte in the string. */
static inline kbox_msg_t *fixture_msg_json(const char *msg_type, const char *content)
{
	json_error_t jerr;
	json_t *c = json_loads(content, JSON_ALLOW_NUL, &jerr);
	kbox_msg_t *msg;

	if (!c) {
		printf("# fixture_msg_json(%s): %s\n", msg_type, jerr.text);
		return NULL;
	}
	msg = fixture_msg_new(msg_type, c, NULL);
	json_decref(c);
	return msg;
}

/* The message for one recorded iopub ENTRY (borrowed).  Caller owns it. */
static inline kbox_msg_t *fixture_entry_msg(json_t *entry)
{
	json_t *header = json_object_get(entry, "header");
	const char *type = json_string_value(json_object_get(header, "msg_type"));

	if (!type)
		type = json_string_value(json_object_get(entry, "msg_type"));
	if (!type)
		return NULL;
	return fixture_msg_new(type, json_object_get(entry, "content"),
	                       json_object_get(entry, "metadata"));
}

/* Feed one hand-built message to CAP and free it.  Returns what
 * kbox_capture_feed returned, or -2 when MSG is NULL. */
static inline int fixture_feed_msg(kbox_capture_t *cap, kbox_msg_t *msg, kbox_error_t *err)
{
	int rc;

	if (!msg)
		return -2;
	rc = kbox_capture_feed(cap, msg, err);
	kbox_msg_destroy(&msg);
	return rc;
}

/* Feed every iopub entry of FIXTURE (borrowed) to CAP in order.  Goes on
 * after a failed feed; returns 0 when all succeeded, -1 otherwise (ERR holds
 * the last failure). */
static inline int fixture_feed(kbox_capture_t *cap, json_t *fixture, kbox_error_t *err)
{
	json_t *iopub = json_object_get(fixture, "iopub");
	json_t *entry;
	size_t i;
	int rc = 0;

	json_array_foreach(iopub, i, entry)
	{
		if (fixture_feed_msg(cap, fixture_entry_msg(entry), err) != 0)
			rc = -1;
	}
	return rc;
}

/* Run fixture NAME through a new capture with OPTS (may be NULL) and finish
 * it without an execution.  *FEED_RC (may be NULL) gets fixture_feed's
 * return.  Caller owns the result; NULL (with a TAP comment) on failure. */
static inline kbox_result_t *fixture_capture(const char *name, const kbox_capture_opts_t *opts,
                                             int *feed_rc)
{
	kbox_error_t err = {0};
	kbox_capture_t *cap = NULL;
	kbox_result_t *res = NULL;
	json_t *doc = fixture_load(name);
	int rc;

	if (!doc)
		goto out;
	cap = kbox_capture_new(opts, &err);
	if (!cap) {
		printf("# kbox_capture_new: %s\n", err.msg);
		goto out;
	}
	rc = fixture_feed(cap, doc, &err);
	if (rc != 0)
		printf("# fixture %s: feed failed: %s\n", name, err.msg);
	if (feed_rc)
		*feed_rc = rc;
	res = kbox_capture_finish(&cap, NULL);
out:
	kbox_capture_destroy(&cap);
	json_decref(doc);
	return res;
}

/* The concatenated "text" of every STREAM_NAME ("stdout"/"stderr") stream
 * entry of fixture NAME, as the kernel sent it.  Caller frees; NULL on failure. */
static inline char *fixture_stream_raw(const char *name, const char *stream_name)
{
	json_t *doc = fixture_load(name);
	json_t *entry;
	size_t i, len = 0;
	char *out = NULL;

	if (!doc)
		return NULL;
	out = calloc(1, 1);
	json_array_foreach(json_object_get(doc, "iopub"), i, entry)
	{
		json_t *c = json_object_get(entry, "content");
		const char *text = json_string_value(json_object_get(c, "text"));
		size_t n;
		char *grown;

		if (!out)
			break;
		const char *type = json_string_value(json_object_get(entry, "msg_type"));
		const char *sname = json_string_value(json_object_get(c, "name"));

		if (!type || strcmp(type, "stream") || !sname || strcmp(sname, stream_name) ||
		    !text)
			continue;
		n = json_string_length(json_object_get(c, "text"));
		grown = realloc(out, len + n + 1);
		if (!grown) {
			free(out);
			out = NULL;
			break;
		}
		out = grown;
		memcpy(out + len, text, n);
		len += n;
		out[len] = '\0';
	}
	json_decref(doc);
	return out;
}

/* The first iopub entry of fixture DOC (borrowed) with MSG_TYPE, or NULL. */
static inline json_t *fixture_find(json_t *doc, const char *msg_type)
{
	json_t *entry;
	size_t i;

	json_array_foreach(json_object_get(doc, "iopub"), i, entry)
	{
		const char *t = json_string_value(json_object_get(entry, "msg_type"));
		if (t && !strcmp(t, msg_type))
			return entry;
	}
	return NULL;
}

/* ---- base64 (for comparing written images with what the kernel sent) ---- */

static inline int fixture_b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Decode base64 S (whitespace ignored, as in the kernel's line-wrapped
 * output) into a new buffer; *LEN gets its size.  NULL on bad input. */
static inline unsigned char *fixture_b64decode(const char *s, size_t *len)
{
	size_t n = strlen(s), o = 0;
	unsigned char *out = malloc(n / 4 * 3 + 3);
	unsigned acc = 0;
	int bits = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n && s[i] != '='; i++) {
		int v;

		if (s[i] == '\n' || s[i] == '\r' || s[i] == ' ')
			continue;
		v = fixture_b64val((unsigned char)s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	*len = o;
	return out;
}

/* ---- files ---- */

#define fixture_mkdtemp test_mkdtemp
#define fixture_rm_rf test_rm_rf

/* Read the whole file PATH (no symlink followed) into a new NUL-terminated
 * buffer; *LEN gets its size.  NULL on failure. */
static inline char *fixture_read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (fd < 0)
		return NULL;
	for (;;) {
		ssize_t r;

		if (cap - n < 4096) {
			char *grown = realloc(buf, cap * 2 + 4097);
			if (!grown) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = grown;
			cap = cap * 2 + 4096;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			buf = NULL;
			break;
		}
		if (r == 0) {
			buf[n] = '\0';
			break;
		}
		n += (size_t)r;
	}
	close(fd);
	if (buf && len)
		*len = n;
	return buf;
}

/* Number of entries in DIR other than "." and "..", or -1. */
static inline int fixture_dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

#endif
