/* src/util.c — small utilities of libkbox's own (declared in src/private.h
 * and kbox/capture.h) that speak kbox_error_t or libkbox's API; the ones
 * that need only libc are the common module's (src/common/kx.h). */
#include "private.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- unix socket paths ---- */

int kbox__unix_path(char *buf, size_t size, const char *dir, const char *name, int *dirfd_p,
                    kbox_error_t *err)
{
	int opened = *dirfd_p >= 0;
	if (kx_unix_path(buf, size, dir, name, dirfd_p) == 0)
		return 0;
	if (opened || *dirfd_p >= 0) /* DIR is open: NAME is what is too long */
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: the name is too long for a unix socket", name);
	return kbox_error_set_sys(err, "directory %s", dir);
}

/* kbox_strip_ansi (kbox/capture.h): here, in the base that kbox(1) links
 * too, so that its inspect and complete strip as the capture does. */
char *kbox_strip_ansi(const char *s, size_t len, size_t *out_len)
{
	char *out = malloc(len + 1);
	size_t i = 0, o = 0;
	if (!out)
		return NULL;
	while (i < len) {
		if (s[i] != '\033') {
			out[o++] = s[i++];
			continue;
		}
		i++;
		if (i < len && s[i] == '[') { /* CSI: parameters, then a final byte 0x40-0x7e */
			i++;
			while (i < len &&
			       !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e))
				i++;
			if (i < len)
				i++;
		} else if (i < len && s[i] == ']') { /* OSC: until BEL or ESC \ */
			i++;
			while (i < len && s[i] != '\a' &&
			       !(s[i] == '\033' && i + 1 < len && s[i + 1] == '\\'))
				i++;
			if (i < len)
				i += s[i] == '\a' ? 1 : 2;
		} else if (i < len && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x2f) {
			/* nF: intermediate bytes, then a final byte (ESC ( B) */
			while (i < len && (unsigned char)s[i] >= 0x20 &&
			       (unsigned char)s[i] <= 0x2f)
				i++;
			if (i < len)
				i++;
		} else if (i < len) {
			i++; /* a two-byte sequence */
		}
	}
	out[o] = '\0';
	if (out_len)
		*out_len = o;
	return out;
}

/* ---- the size of JSON text, and its depth ---- */

size_t kbox__json_unit(const char *s, size_t n, size_t flags, size_t *cost)
{
	unsigned char c = (unsigned char)s[0];
	bool is_char;
	size_t len;

	if (c < 0x80) {
		if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' ||
		    c == '\t' || (c == '/' && (flags & JSON_ESCAPE_SLASH)))
			*cost = 2;
		else
			*cost = c < 0x20 ? 6 : 1;
		return 1;
	}
	len = kx_utf8_unit(s, n, &is_char);
	if (!is_char) /* one U+FFFD for the subpart: at most one a byte */
		*cost = (flags & JSON_ENSURE_ASCII ? 6 : 3) * len;
	else if (flags & JSON_ENSURE_ASCII)
		*cost = len == 4 ? 12 : 6; /* \uXXXX, or a surrogate pair */
	else
		*cost = len;
	return len;
}

size_t kbox_json_string_size(const char *s, size_t len, size_t flags)
{
	size_t size = 2, i = 0, cost;
	while (i < len) {
		if ((unsigned char)s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' &&
		    (unsigned char)s[i] < 0x7f && s[i] != '/') {
			size++, i++; /* the common case, quickly */
			continue;
		}
		i += kbox__json_unit(s + i, len - i, flags, &cost);
		size += cost;
	}
	return size;
}

/* Is V nested at most MAX levels deep? */
static bool depth_within(json_t *v, size_t max)
{
	const char *key;
	json_t *x;
	size_t i;

	if (!json_is_object(v) && !json_is_array(v))
		return true;
	if (max == 0)
		return false;
	if (json_is_object(v)) {
		json_object_foreach(v, key, x) if (!depth_within(x, max - 1)) return false;
	} else {
		json_array_foreach(v, i, x) if (!depth_within(x, max - 1)) return false;
	}
	return true;
}

/* V with what is deeper than MAX levels replaced (kbox_json_depth_cut),
 * MARKER standing for it: a new reference, or NULL. */
static json_t *depth_cut(json_t *v, size_t max, json_t *marker)
{
	json_t *copy, *x;
	const char *key;
	size_t i;

	if (depth_within(v, max))
		return json_incref(v);
	if (max <= 1)
		return json_incref(marker);
	copy = json_is_object(v) ? json_object() : json_array();
	if (!copy)
		return NULL;
	if (json_is_object(v)) {
		json_object_foreach(
		        v, key,
		        x) if (json_object_set_new(copy, key,
		                                   depth_cut(x, max - 1, marker))) goto fail;
	} else {
		json_array_foreach(v, i,
		                   x) if (json_array_append_new(copy, depth_cut(x, max - 1,
		                                                                marker))) goto fail;
	}
	return copy;
fail:
	json_decref(copy);
	return NULL;
}

json_t *kbox_json_depth_cut(json_t *v, size_t max_depth)
{
	char why[64];
	json_t *marker, *out;

	if (!v)
		return NULL;
	if (max_depth < 1)
		max_depth = 1;
	if (depth_within(v, max_depth))
		return json_incref(v);
	snprintf(why, sizeof why, "nested deeper than %zu levels", max_depth);
	if (!(marker = json_pack("{s:s}", "omitted", why)))
		return NULL;
	out = depth_cut(v, max_depth, marker);
	json_decref(marker);
	return out;
}
