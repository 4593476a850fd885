/* render.c — renderers of a kbox_result_t: text for a model, one JSON
 * object per execution, ndjson events as messages arrive.
 *
 * Only the public accessors of kbox/capture.h are used: a renderer sees
 * what any front end sees (private.h brings the shared utilities).  The
 * formats are documented in kbox-run(1), OUTPUT FORMATS; the JSON schema is
 * tests/result.schema.json. */
#include "private.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <kbox/capture.h>
#include <kbox/render.h>

/* U+00D7 MULTIPLICATION SIGN in UTF-8, as in "640×480 px". */
#define TIMES_SIGN "\xc3\x97"

/* ---- the text renderer's parts ---- */

/* End the current part with a newline unless it already ends with one. */
static void buf_end_line(kx_buf_t *b)
{
	if (b->len > 0 && b->data[b->len - 1] != '\n')
		kx_buf_append(b, "\n", 1);
}

/* Bound the marker and the note of a text of LEN bytes to it. */
static void clamp_parts(size_t len, size_t *marker_at, size_t *marker_len, size_t *note_at)
{
	if (*note_at > len)
		*note_at = len;
	if (*marker_at > *note_at)
		*marker_at = *note_at;
	if (*marker_len > *note_at - *marker_at)
		*marker_len = *note_at - *marker_at;
}

/* Append the LEN bytes at S, text of the kernel's in which kbox's own
 * lines are MARKER_LEN bytes at MARKER_AT and those from NOTE_AT on (a
 * kbox_text_t's or a kbox_output_t's): the kernel's as buf_kernel does,
 * kbox's as they are. */
static void buf_text(kx_buf_t *b, const char *s, size_t len, size_t marker_at, size_t marker_len,
                     size_t note_at)
{
	clamp_parts(len, &marker_at, &marker_len, &note_at);
	kx_buf_kernel(b, s, marker_at);
	kx_buf_visible(b, s + marker_at, marker_len);
	kx_buf_kernel(b, s + marker_at + marker_len, note_at - marker_at - marker_len);
	kx_buf_visible(b, s + note_at, len - note_at);
}

/* The stream text S (LEN bytes) as buf_text appends it, but without the
 * ANSI escape sequences the kernel's segments hold (a terminal's colours,
 * which a model reads as noise: pip's, a logger's); the JSON keeps them. */
static void buf_stream_text(kx_buf_t *b, const char *s, size_t len, size_t marker_at,
                            size_t marker_len, size_t note_at)
{
	size_t parts[2][2], n;
	char *plain;

	if (!memchr(s, 0x1b, len) && !memchr(s, 0x9b, len)) {
		buf_text(b, s, len, marker_at, marker_len, note_at);
		return;
	}
	clamp_parts(len, &marker_at, &marker_len, &note_at);
	parts[0][0] = 0;
	parts[0][1] = marker_at;
	parts[1][0] = marker_at + marker_len;
	parts[1][1] = note_at - marker_at - marker_len;
	for (int i = 0; i < 2; i++) {
		if ((plain = kbox_strip_ansi(s + parts[i][0], parts[i][1], &n))) {
			kx_buf_kernel(b, plain, n);
			free(plain);
		} else
			kx_buf_kernel(b, s + parts[i][0], parts[i][1]);
		if (i == 0)
			kx_buf_visible(b, s + marker_at, marker_len);
	}
	kx_buf_visible(b, s + note_at, len - note_at);
}

/* Append the budgeted text T as one part: nothing when it is empty, else
 * its text (buf_text) and, if it does not end with one, a newline. */
static void buf_part(kx_buf_t *b, const kbox_text_t *t)
{
	if (!t || !t->text || !t->len)
		return;
	buf_text(b, t->text, t->len, t->marker_at, t->marker_len, t->note_at);
	buf_end_line(b);
}

/* Append the LEN bytes at S, all the kernel's, as one part: nothing when
 * LEN is 0, else S (buf_kernel) and, if S does not end with one, a
 * newline. */
static void buf_kernel_part(kx_buf_t *b, const char *s, size_t len)
{
	if (!s || !len)
		return;
	kx_buf_kernel(b, s, len);
	buf_end_line(b);
}

/* ---- small helpers ---- */

/* A JSON string of LEN bytes at S (new reference): S itself when it is
 * UTF-8, else S with each ill-formed subpart replaced by U+FFFD
 * (kx_utf8_repair).  NULL S gives "". */
static json_t *string_json(const char *s, size_t len)
{
	json_t *j;
	char *repaired;
	size_t n;

	if (!s)
		return json_string("");
	j = json_stringn(s, len);
	if (j)
		return j;
	repaired = kx_utf8_repair(s, len, &n);
	j = repaired ? json_stringn(repaired, n) : NULL;
	free(repaired);
	return j;
}

/* S as a JSON string, or null when S is NULL or (with EMPTY_NULL) "". */
static json_t *nullable_json(const char *s, bool empty_null)
{
	if (!s || (empty_null && !*s))
		return json_null();
	return string_json(s, strlen(s));
}

/* A size as a JSON integer (sizes beyond json_int_t are clamped). */
static json_t *size_json(size_t n)
{
	return json_integer(n > (size_t)LLONG_MAX ? (json_int_t)LLONG_MAX : (json_int_t)n);
}

/* A budgeted text as {"text","total_bytes","total_lines","truncated",
 * "spill_path"}; NULL T gives the empty text.  A NUL byte in it is kept
 * (JSON writes it as \u0000). */
static json_t *text_json(const kbox_text_t *t)
{
	const char *s = t && t->text ? t->text : "";

	return json_pack("{s:o, s:o, s:o, s:b, s:o, s:o, s:o}", "text",
	                 string_json(s, t && t->text ? t->len : 0), "total_bytes",
	                 size_json(t ? t->total_bytes : 0), "total_lines",
	                 size_json(t ? t->total_lines : 0), "truncated", t ? t->truncated : false,
	                 "spill_path", nullable_json(t ? t->spill_path : NULL, false),
	                 "dropped_messages", size_json(t ? t->dropped_messages : 0),
	                 "dropped_bytes", size_json(t ? t->dropped_bytes : 0));
}

/* A deep copy of the bundle J (borrowed), or {} when it is NULL. */
static json_t *bundle_json(json_t *j)
{
	return j ? json_deep_copy(j) : json_object();
}

/* Set KEY of OBJ to VALUE (stolen).  -1 when VALUE is NULL (an earlier
 * allocation failed) or the set fails. */
static int set_new(json_t *obj, const char *key, json_t *value)
{
	if (!value)
		return -1;
	return json_object_set_new(obj, key, value);
}

/* ---- text ---- */

/* The text/plain representation in BUNDLE (borrowed), joined if it is a
 * list of strings as in nbformat, in a new string ("" when there is none)
 * of *LEN bytes (NUL bytes and all); NULL when memory runs out. */
/* The MIME value KEY of BUNDLE as one string (a string, or nbformat's
 * list of lines) appended to B; false when it has none. */
static bool mime_text(kx_buf_t *b, json_t *bundle, const char *key)
{
	json_t *v = json_object_get(bundle, key), *line;
	size_t i;

	if (json_is_string(v)) {
		kx_buf_append(b, json_string_value(v), json_string_length(v));
		return true;
	}
	if (!json_is_array(v))
		return false;
	json_array_foreach(v, i, line)
	{
		if (json_is_string(line))
			kx_buf_append(b, json_string_value(line), json_string_length(line));
	}
	return true;
}

/* Is the text/plain S (LEN bytes) only an object's repr, such as
 * "<IPython.core.display.Markdown object>", saying nothing of what it
 * shows? */
static bool only_a_repr(const char *s, size_t len)
{
	static const char obj[] = " object";
	if (len < 3 || s[0] != '<' || s[len - 1] != '>' || memchr(s, '\n', len))
		return false;
	for (size_t i = 0; i + sizeof obj - 1 <= len; i++)
		if (memcmp(s + i, obj, sizeof obj - 1) == 0)
			return true;
	return false;
}

/* The text of the HTML H (LEN bytes), for a reader of text: scripts and
 * styles gone with what is in them, every other tag gone (a line break
 * for those that end a line or a cell: br, p, div, li, tr, h1-h6, a space
 * for td and th), the common entities decoded, at most two newlines in a
 * row.  New (free), its length in *OUT. */
static char *html_text(const char *h, size_t len, size_t *out)
{
	static const struct {
		const char *name, *text;
	} entities[] = {{"&lt;", "<"},  {"&gt;", ">"},   {"&amp;", "&"}, {"&quot;", "\""},
	                {"&#39;", "'"}, {"&nbsp;", " "}, {"&#x27;", "'"}};
	kx_buf_t b = KX_BUF_INIT;
	size_t i = 0, nl = 0;

	while (i < len) {
		if (h[i] == '<') {
			const char *end = memchr(h + i, '>', len - i);
			size_t tl = end ? (size_t)(end - (h + i)) + 1 : len - i;
			char name[8] = "";
			size_t k = 0, p = i + 1 + (i + 1 < len && h[i + 1] == '/');
			while (p < len && k < sizeof name - 1 &&
			       ((h[p] >= 'a' && h[p] <= 'z') || (h[p] >= 'A' && h[p] <= 'Z') ||
			        (h[p] >= '0' && h[p] <= '9')))
				name[k++] = (char)(h[p++] | 0x20);
			name[k] = '\0';
			if (h[i + 1] != '/' &&
			    (strcmp(name, "script") == 0 || strcmp(name, "style") == 0)) {
				/* to its closing tag, what is in it included */
				const char *close = NULL;
				for (size_t q = i + tl; q + 2 + k < len && !close; q++)
					if (h[q] == '<' && h[q + 1] == '/' &&
					    strncasecmp(h + q + 2, name, k) == 0)
						close = h + q;
				if (!close) {
					i = len;
					break;
				}
				end = memchr(close, '>', len - (size_t)(close - h));
				i = end ? (size_t)(end - h) + 1 : len;
				continue;
			}
			if (!strcmp(name, "br") || !strcmp(name, "p") || !strcmp(name, "div") ||
			    !strcmp(name, "li") || !strcmp(name, "tr") ||
			    (name[0] == 'h' && name[1] >= '1' && name[1] <= '6' && !name[2])) {
				if (nl < 2 && b.len) {
					kx_buf_appends(&b, "\n");
					nl++;
				}
			} else if (!strcmp(name, "td") || !strcmp(name, "th"))
				kx_buf_appends(&b, " ");
			i += tl;
			continue;
		}
		if (h[i] == '&') {
			size_t e;
			for (e = 0; e < sizeof entities / sizeof *entities; e++)
				if (strncmp(h + i, entities[e].name, strlen(entities[e].name)) == 0)
					break;
			if (e < sizeof entities / sizeof *entities) {
				kx_buf_appends(&b, entities[e].text);
				i += strlen(entities[e].name);
				nl = 0;
				continue;
			}
		}
		if (h[i] == '\n') {
			if (nl < 2 && b.len)
				kx_buf_appends(&b, "\n");
			nl++;
		} else {
			kx_buf_append(&b, h + i, 1);
			nl = 0;
		}
		i++;
	}
	return kx_buf_take(&b, out);
}

/* The markdown or HTML shown in place of an object's repr: at most this
 * many bytes of it (a larger one keeps the repr). */
#define RICH_TEXT_MAX 16384

/* The text of a display or value BUNDLE for a reader of text: its
 * text/plain, unless that is only an object's repr and it has markdown
 * (shown as it is) or HTML (as html_text makes it) of at most
 * RICH_TEXT_MAX bytes. */
static char *plain_text(json_t *bundle, size_t *len)
{
	kx_buf_t b = KX_BUF_INIT;
	size_t rl = 0;
	char *plain, *rich = NULL;

	mime_text(&b, bundle, "text/plain");
	plain = kx_buf_take(&b, len);
	if (!plain || (*len && !only_a_repr(plain, *len)))
		return plain;
	if (mime_text(&b, bundle, "text/markdown"))
		rich = kx_buf_take(&b, &rl);
	else if (mime_text(&b, bundle, "text/html")) {
		size_t hl;
		char *html = kx_buf_take(&b, &hl);
		rich = html && hl <= 16 * RICH_TEXT_MAX ? html_text(html, hl, &rl) : NULL;
		free(html);
	} else
		kx_buf_reset(&b);
	if (rich && rl && rl <= RICH_TEXT_MAX) {
		free(plain);
		*len = rl;
		return rich;
	}
	free(rich);
	return plain;
}

/* Does the image list of R name display I? */
static bool display_has_image(const kbox_result_t *r, size_t i)
{
	size_t k, n = kbox_result_image_count(r);
	const kbox_image_t *img;

	for (k = 0; k < n; k++) {
		img = kbox_result_image(r, k);
		if (img && img->display >= 0 && (size_t)img->display == i)
			return true;
	}
	return false;
}

/* "Out[N]:" into B (COUNT < 0: "Out:"), then a newline before a text S
 * (LEN bytes) of several lines, else a space. */
static void out_label(kx_buf_t *b, int count, const char *s, size_t len)
{
	const char *nl = memchr(s, '\n', len);
	if (count >= 0)
		kx_buf_appendf(b, "Out[%d]:", count);
	else
		kx_buf_appends(b, "Out:");
	kx_buf_appends(b, nl && nl + 1 < s + len ? "\n" : " ");
}

/* "Out[N]: " and the value's text/plain.  A value of several lines starts
 * on the line after "Out[N]:", so that tables keep their columns (as
 * IPython's display hook does).  An unknown count gives "Out:". */
static void text_value(kx_buf_t *b, const kbox_result_t *r)
{
	const kbox_text_t *t = kbox_result_value_text(r);
	const char *s = t && t->text ? t->text : NULL;
	size_t len = s ? t->len : 0;
	int count = kbox_result_value_count(r);

	if (!kbox_result_value(r) || !len)
		return;
	/* an object's repr only: its markdown or HTML says what it shows */
	if (only_a_repr(s, len)) {
		size_t pl = 0;
		char *p = plain_text(kbox_result_value(r), &pl);
		if (p && pl && !only_a_repr(p, pl)) {
			out_label(b, count, p, pl);
			buf_kernel_part(b, p, pl);
			free(p);
			return;
		}
		free(p);
	}
	out_label(b, count, s, len);
	buf_part(b, t);
}

/* "[image not saved: MIME, BYTES bytes]" into B.  MIME is the kernel's
 * word (any "image/..." key of its display data): escaped as a name
 * (kx_name_escape), so that it cannot pose as more lines. */
static void not_saved(kx_buf_t *b, const char *mime, long long bytes)
{
	size_t len = strlen(mime), size = KX_NAME_ESCAPED_MAX(len);
	char *shown = malloc(size);
	if (shown)
		kx_name_escape(mime, len, shown, size);
	kx_buf_appendf(b, "[image not saved: %s, %lld bytes]\n", shown ? shown : "image", bytes);
	free(shown);
}

/* Whether an image before the I-th of R has PATH: the same image shown
 * twice (a figure as the last expression, and again by the inline
 * backend) is one file, said once. */
static bool image_said(const kbox_result_t *r, size_t i, const char *path)
{
	for (size_t j = 0; path && j < i; j++) {
		const kbox_image_t *e = kbox_result_image(r, j);
		if (e && e->path && strcmp(e->path, path) == 0)
			return true;
	}
	return false;
}

/* One line per image of display DISPLAY (-1: of the value): saved with
 * its path and size, saved as text (an SVG with active content) and why,
 * or not saved. */
static void text_images(kx_buf_t *b, const kbox_result_t *r, int display)
{
	size_t i, n = kbox_result_image_count(r);
	const kbox_image_t *img;

	for (i = 0; i < n; i++) {
		img = kbox_result_image(r, i);
		if (!img || img->display != display || image_said(r, i, img->path))
			continue;
		if (!img->path)
			not_saved(b, img->mime ? img->mime : "image", (long long)img->bytes);
		else if (img->saved_as_text)
			kx_buf_appendf(
			        b, "[image saved as text: %s (the SVG has active content: %s)]\n",
			        img->path, img->saved_as_text);
		else if (img->width >= 0 && img->height >= 0)
			kx_buf_appendf(b, "[image saved: %s (%d" TIMES_SIGN "%d px)]\n", img->path,
			               img->width, img->height);
		else
			kx_buf_appendf(b, "[image saved: %s]\n", img->path);
	}
}

/* Display I: its images, or its text/plain (the displays' texts share one
 * budget, *SHOWN bytes of it used; *NOT_SHOWN counts those past it), or a
 * line saying how large it was when the capture left it out as too large. */
static void text_display(kx_buf_t *b, const kbox_result_t *r, size_t i, size_t *shown_p,
                         size_t *not_shown)
{
	json_t *bundle, *omitted, *v;
	const char *key;
	char *s;
	size_t len = 0, shown = *shown_p;

	bundle = kbox_result_display(r, i);
	if (!bundle)
		return;
	{
		/* image types the capture does not write are named, never dumped */
		json_object_foreach(bundle, key,
		                    v) if (strncmp(key, "image/", 6) == 0 && json_is_object(v) &&
		                           json_is_string(json_object_get(v, "error")) &&
		                           strcmp(json_string_value(json_object_get(v, "error")),
		                                  "unsupported image type") == 0)
		        not_saved(b, key,
		                  (long long)json_integer_value(json_object_get(v, "bytes")));
		if (display_has_image(r, i)) {
			text_images(b, r, (int)i);
			return;
		}
		/* an update of a display of an earlier execution: which */
		if (kbox_result_display_updates_earlier(r, i)) {
			const char *id = kbox_result_display_id(r, i);
			size_t il = id ? strlen(id) : 0, cut = il > 64 ? 64 : il;
			size_t size = KX_NAME_ESCAPED_MAX(cut);
			char *named = malloc(size);
			/* the kernel's id: escaped, and its first 64 bytes at most */
			while (cut < il && cut > 0 && ((unsigned char)id[cut] & 0xc0) == 0x80)
				cut--;
			if (named)
				kx_name_escape(id ? id : "", cut, named, size);
			/* in quotes, its own quotes after a backslash: nothing of it
			 * closes the quote or the bracket early */
			kx_buf_append(b, "[display \"", 10);
			for (const char *p = named ? named : "?"; *p; p++) {
				if (*p == '"')
					kx_buf_append(b, "\\", 1);
				kx_buf_append(b, p, 1);
			}
			kx_buf_appendf(b, "%s\" of an earlier execution, updated to:]\n",
			               cut < il ? "\xe2\x80\xa6" : "");
			free(named);
		}
		/* the displays' texts share one budget */
		if (shown >= KBOX_CAPTURE_MAX_BYTES) {
			(*not_shown)++;
			return;
		}
		omitted = json_object_get(json_object_get(bundle, "text/plain"), "omitted_bytes");
		if (json_is_integer(omitted)) {
			kx_buf_appendf(b,
			               "[display not shown: text/plain of %" JSON_INTEGER_FORMAT
			               " bytes]\n",
			               json_integer_value(omitted));
			return;
		}
		s = plain_text(bundle, &len);
		if (s)
			*shown_p += len;
		buf_kernel_part(b, s, s ? len : 0);
		free(s);
	}
}

/* An input request: what the code asked, and what it was given. */
static void text_input(kx_buf_t *b, const kbox_output_t *o)
{
	kx_buf_appends(b, "[input: the code asked \"");
	kx_buf_kernel(b, o->text, o->len);
	if (o->password)
		kx_buf_appends(b, o->value_len ? "\" and was given a password (not shown)]\n"
		                               : "\" for a password and was given end of input]\n");
	else if (o->value) {
		kx_buf_appends(b, "\" and was given \"");
		kx_buf_kernel(b, o->value, o->value_len);
		kx_buf_appends(b, "\"]\n");
	} else
		kx_buf_appends(b, "\" and was given end of input: no input line was left]\n");
}

/* Does the last non-empty line of TB (LEN bytes) name the error ENAME (N
 * bytes), as in "ENAME: …", "ENAME" or "module.ENAME: …"? */
static bool names_error(const char *tb, size_t len, const char *ename, size_t n)
{
	const char *end, *line, *p;

	while (len > 0 && (tb[len - 1] == '\n' || tb[len - 1] == ' ' || tb[len - 1] == '\r'))
		len--;
	if (len == 0 || n == 0)
		return false;
	end = tb + len;
	for (line = end; line > tb && line[-1] != '\n'; line--)
		;
	for (p = line; p + n <= end; p++) {
		if (memcmp(p, ename, n) != 0)
			continue;
		if ((p == line || p[-1] == '.') && (p + n == end || p[n] == ':'))
			return true;
	}
	return false;
}

/* Is S (N bytes, no newline) one of the lines of TB (LEN bytes)? */
static bool has_line(const char *tb, size_t len, const char *s, size_t n)
{
	const char *p = tb, *end = tb + len;
	while (n && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = (size_t)((nl ? nl : end) - p);
		if (l == n && memcmp(p, s, n) == 0)
			return true;
		p = nl ? nl + 1 : end;
	}
	return false;
}

/* Is a line of TB (LEN bytes) "ENAME: FIRST" (N and FN bytes), ENAME
 * perhaps after a module's name and a dot: where the traceback gave the
 * first line of a value of many lines, the rest after it. */
static bool has_error_line(const char *tb, size_t len, const char *ename, size_t n,
                           const char *first, size_t fn)
{
	const char *p = tb, *end = tb + len;
	size_t want = n + 2 + fn;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = (size_t)((nl ? nl : end) - p);
		const char *at = p + l - (l >= want ? want : 0);
		if (l >= want && (at == p || at[-1] == '.') && memcmp(at, ename, n) == 0 &&
		    memcmp(at + n, ": ", 2) == 0 && memcmp(at + n + 2, first, fn) == 0)
			return true;
		p = nl ? nl + 1 : end;
	}
	return false;
}

/* The stripped traceback, then "ENAME: EVALUE" unless its last line
 * already names the error (IPython's does), or one of its lines does with
 * the value's first line (a value of many lines), or is the value
 * (IRkernel's traceback begins with it). */
static void text_error(kx_buf_t *b, const kbox_result_t *r)
{
	const kbox_text_t *t = kbox_result_traceback(r);
	const char *tb = t && t->text ? t->text : "";
	size_t tb_len = t && t->text ? t->len : 0, ename_len, evalue_len;
	const char *ename = kbox_result_ename(r, &ename_len);
	const char *evalue = kbox_result_evalue(r, &evalue_len), *nl;

	if (!kbox_result_has_error(r))
		return;
	if (!ename_len)
		ename = "Error", ename_len = 5;
	buf_part(b, t);
	if (names_error(tb, tb_len, ename, ename_len))
		return;
	nl = evalue_len ? memchr(evalue, '\n', evalue_len) : NULL;
	if (evalue_len && has_line(tb, tb_len, evalue, nl ? (size_t)(nl - evalue) : evalue_len))
		return;
	if (nl && has_error_line(tb, tb_len, ename, ename_len, evalue, (size_t)(nl - evalue)))
		return;
	kx_buf_kernel(b, ename, ename_len);
	if (evalue_len) {
		/* the first line only: a long value is in the JSON output */
		nl = memchr(evalue, '\n', evalue_len);
		kx_buf_appends(b, ": ");
		kx_buf_kernel(b, evalue, nl ? (size_t)(nl - evalue) : evalue_len);
	}
	buf_end_line(b);
}

/* "[note: …]" per notice, then a final line for a timeout, death or abort. */
static void text_status(kx_buf_t *b, const kbox_result_t *r)
{
	const char *reason = kbox_result_reason(r);
	bool has = reason && *reason;
	size_t i, n = kbox_result_notice_count(r);

	/* a notice or a reason may quote the kernel: a line break in it
	 * cannot start a line of kbox's */
	for (i = 0; i < n; i++) {
		const char *note = kbox_result_notice(r, i);
		kx_buf_appends(b, "[note: ");
		kx_buf_kernel(b, note ? note : "", note ? strlen(note) : 0);
		kx_buf_appends(b, "]\n");
	}
	switch (kbox_result_status(r)) {
	case KBOX_EXEC_TIMEOUT:
		kx_buf_appendf(b, "[timeout%s%s]\n", has ? ": " : "", has ? reason : "");
		break;
	case KBOX_EXEC_DIED:
		kx_buf_appendf(b, "[kernel died%s%s; earlier state is lost]\n", has ? ": " : "",
		               has ? reason : "");
		break;
	case KBOX_EXEC_ABORTED:
		kx_buf_appendf(b, "[aborted%s%s]\n", has ? ": " : "", has ? reason : "");
		break;
	case KBOX_EXEC_INTERRUPTED:
		kx_buf_appendf(b, "[%s; state is kept]\n", has ? reason : "interrupted");
		break;
	default:
		break;
	}
}

char *kbox_render_text(const kbox_result_t *result)
{
	return kbox_render_text_ex(result, 0);
}

char *kbox_render_text_ex(const kbox_result_t *result, unsigned flags)
{
	kx_buf_t b = KX_BUF_INIT;
	size_t i, n, shown = 0, not_shown = 0;
	bool after_stderr = false; /* stdout that comes later is labelled too */
	const kbox_output_t *o;

	if (!result)
		return NULL;
	/* the outputs in the order they came */
	n = kbox_result_output_count(result);
	for (i = 0; i < n; i++) {
		if (!(o = kbox_result_output(result, i)))
			continue;
		switch (o->kind) {
		case KBOX_OUT_STREAM:
			if ((flags & KBOX_RENDER_NO_STREAMS) || !o->len)
				break;
			if (o->stream == KBOX_TEXT_STDERR) {
				kx_buf_appends(&b, "[stderr]\n");
				after_stderr = true;
			} else if (after_stderr)
				kx_buf_appends(&b, "[stdout]\n");
			buf_stream_text(&b, o->text, o->len, o->marker_at, o->marker_len,
			                o->note_at);
			buf_end_line(&b);
			break;
		case KBOX_OUT_DISPLAY:
			if (o->display >= 0)
				text_display(&b, result, (size_t)o->display, &shown, &not_shown);
			break;
		case KBOX_OUT_RESULT:
			text_value(&b, result);
			text_images(&b, result, -1);
			break;
		case KBOX_OUT_ERROR:
			text_error(&b, result);
			break;
		case KBOX_OUT_INPUT:
			text_input(&b, o);
			break;
		}
	}
	if (not_shown)
		kx_buf_appendf(&b, "[... %zu more displays not shown]\n", not_shown);
	text_status(&b, result);
	return kx_buf_take(&b, NULL);
}

/* ---- json ---- */

static json_t *value_json(const kbox_result_t *r)
{
	json_t *value = kbox_result_value(r);

	if (!value)
		return json_null();
	return json_pack("{s:o, s:o}", "data", bundle_json(value), "text",
	                 text_json(kbox_result_value_text(r)));
}

static json_t *displays_json(const kbox_result_t *r)
{
	json_t *a = json_array();
	size_t i, n = kbox_result_display_count(r);

	for (i = 0; a && i < n; i++) {
		json_t *d = json_pack("{s:o, s:o}", "data", bundle_json(kbox_result_display(r, i)),
		                      "display_id",
		                      nullable_json(kbox_result_display_id(r, i), false));
		if (d && kbox_result_display_updates_earlier(r, i))
			json_object_set_new(d, "updates_earlier", json_true());
		if (json_array_append_new(a, d) != 0) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

static json_t *images_json(const kbox_result_t *r)
{
	json_t *a = json_array();
	size_t i, n = kbox_result_image_count(r);
	const kbox_image_t *img;

	for (i = 0; a && i < n; i++) {
		img = kbox_result_image(r, i);
		if (!img)
			continue;
		if (json_array_append_new(
		            a,
		            json_pack("{s:o, s:s, s:o, s:o, s:o, s:o, s:o}", "path",
		                      nullable_json(img->path, false), "mime",
		                      img->mime ? img->mime : "", "width",
		                      img->width >= 0 ? json_integer(img->width) : json_null(),
		                      "height",
		                      img->height >= 0 ? json_integer(img->height) : json_null(),
		                      "bytes", size_json(img->bytes), "display",
		                      img->display >= 0 ? json_integer(img->display) : json_null(),
		                      "saved_as_text", nullable_json(img->saved_as_text, false))) !=
		    0)
			json_decref(a), a = NULL;
	}
	return a;
}

static json_t *error_json(const kbox_result_t *r)
{
	size_t ename_len, evalue_len;
	const char *ename = kbox_result_ename(r, &ename_len);
	const char *evalue = kbox_result_evalue(r, &evalue_len);
	json_t *raw = kbox_result_traceback_raw(r);

	if (!kbox_result_has_error(r))
		return json_null();
	return json_pack("{s:o, s:o, s:o, s:o}", "ename", string_json(ename, ename_len), "evalue",
	                 string_json(evalue, evalue_len), "traceback",
	                 text_json(kbox_result_traceback(r)), "traceback_raw",
	                 raw ? json_deep_copy(raw) : json_array());
}

/* One output of the ordered list. */
static json_t *output_json(const kbox_result_t *r, const kbox_output_t *o)
{
	int count;
	switch (o->kind) {
	case KBOX_OUT_STREAM:
		return json_pack("{s:s, s:s, s:o, s:o, s:b}", "kind", "stream", "name",
		                 o->stream == KBOX_TEXT_STDERR ? "stderr" : "stdout", "text",
		                 string_json(o->text, o->len), "total_bytes",
		                 size_json(o->total_bytes), "truncated", o->truncated);
	case KBOX_OUT_DISPLAY: {
		json_t *d = json_pack(
		        "{s:s, s:i, s:o, s:o}", "kind", "display_data", "display", o->display,
		        "data", bundle_json(kbox_result_display(r, (size_t)o->display)),
		        "display_id",
		        nullable_json(kbox_result_display_id(r, (size_t)o->display), false));
		if (d && kbox_result_display_updates_earlier(r, (size_t)o->display))
			json_object_set_new(d, "updates_earlier", json_true());
		return d;
	}
	case KBOX_OUT_RESULT:
		count = kbox_result_value_count(r);
		return json_pack("{s:s, s:o, s:o}", "kind", "execute_result", "execution_count",
		                 count >= 0 ? json_integer(count) : json_null(), "data",
		                 bundle_json(kbox_result_value(r)));
	case KBOX_OUT_ERROR: {
		size_t ename_len, evalue_len;
		const char *ename = kbox_result_ename(r, &ename_len);
		const char *evalue = kbox_result_evalue(r, &evalue_len);
		return json_pack("{s:s, s:o, s:o}", "kind", "error", "ename",
		                 string_json(ename, ename_len), "evalue",
		                 string_json(evalue, evalue_len));
	}
	case KBOX_OUT_INPUT:
		return json_pack("{s:s, s:o, s:o, s:b}", "kind", "input", "prompt",
		                 string_json(o->text, o->len), "value",
		                 o->value ? string_json(o->value, o->value_len) : json_null(),
		                 "password", o->password);
	}
	return NULL;
}

static json_t *outputs_json(const kbox_result_t *r)
{
	json_t *a = json_array();
	size_t i, n = kbox_result_output_count(r);
	const kbox_output_t *o;

	for (i = 0; a && i < n; i++)
		if ((o = kbox_result_output(r, i)) &&
		    json_array_append_new(a, output_json(r, o)) != 0)
			json_decref(a), a = NULL;
	return a;
}

static json_t *notices_json(const kbox_result_t *r)
{
	json_t *a = json_array();
	size_t i, n = kbox_result_notice_count(r);

	for (i = 0; a && i < n; i++)
		if (json_array_append_new(
		            a,
		            nullable_json(kbox_result_notice(r, i) ? kbox_result_notice(r, i) : "",
		                          false)) != 0)
			json_decref(a), a = NULL;
	return a;
}

json_t *kbox_render_json(const kbox_result_t *result)
{
	json_t *o;
	int count;
	double secs;

	if (!result)
		return NULL;
	o = json_object();
	if (!o)
		return NULL;
	count = kbox_result_count(result);
	/* Milliseconds are enough, and keep the number short when dumped
	 * with JSON_REAL_PRECISION. */
	secs = round(kbox_result_seconds(result) * 1000.0) / 1000.0;
	if (!isfinite(secs) || secs < 0)
		secs = 0;
	if (set_new(o, "schema", json_string(KBOX_RESULT_SCHEMA)) ||
	    set_new(o, "status", json_string(kbox_exec_status_name(kbox_result_status(result)))) ||
	    set_new(o, "execution_count", count >= 0 ? json_integer(count) : json_null()) ||
	    set_new(o, "seconds", json_real(secs)) ||
	    set_new(o, "reason", nullable_json(kbox_result_reason(result), true)) ||
	    set_new(o, "outputs", outputs_json(result)) ||
	    set_new(o, "stdout", text_json(kbox_result_stream(result, KBOX_TEXT_STDOUT))) ||
	    set_new(o, "stderr", text_json(kbox_result_stream(result, KBOX_TEXT_STDERR))) ||
	    set_new(o, "value", value_json(result)) ||
	    set_new(o, "displays", displays_json(result)) ||
	    set_new(o, "images", images_json(result)) || set_new(o, "error", error_json(result)) ||
	    set_new(o, "notices", notices_json(result)) ||
	    (kbox_result_calls(result) &&
	     set_new(o, "calls", json_deep_copy(kbox_result_calls(result))))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- ndjson ---- */

/* A new event object {"schema":…,"event":NAME}. */
static json_t *event_new(const char *name)
{
	return json_pack("{s:s, s:s}", "schema", KBOX_RESULT_SCHEMA, "event", name);
}

json_t *kbox_render_event(const kbox_capture_t *cap, const kbox_event_t *ev)
{
	json_t *o = NULL, *bundle;
	int rc = 0;

	if (!ev)
		return NULL;
	switch (ev->type) {
	case KBOX_EV_STREAM:
		o = event_new("stream");
		if (o)
			rc = set_new(o, "name",
			             json_string(ev->stream == KBOX_TEXT_STDERR ? "stderr"
			                                                        : "stdout")) ||
			     set_new(o, "text", string_json(ev->text, ev->text ? ev->len : 0));
		break;
	case KBOX_EV_DISPLAY:
		o = event_new("display");
		bundle = cap ? kbox_capture_display(cap, ev->display) : NULL;
		if (o) {
			const char *id = cap ? kbox_capture_display_id(cap, ev->display) : NULL;
			rc = set_new(o, "index", json_integer(ev->display)) ||
			     set_new(o, "data", bundle_json(bundle)) ||
			     set_new(o, "display_id", id ? json_string(id) : json_null());
		}
		break;
	case KBOX_EV_CLEAR:
		o = event_new("clear");
		break;
	case KBOX_EV_RESULT:
		o = event_new("result");
		if (o && cap && kbox_capture_value(cap))
			rc = set_new(o, "data", bundle_json(kbox_capture_value(cap)));
		break;
	case KBOX_EV_ERROR: {
		/* what it is, as it comes (the traceback is the end's) */
		size_t nn = 0, nv = 0;
		const char *en = cap ? kbox_capture_ename(cap, &nn) : NULL;
		const char *ev_ = cap ? kbox_capture_evalue(cap, &nv) : NULL;
		o = event_new("error");
		if (o)
			rc = set_new(o, "ename", string_json(en ? en : "", nn)) ||
			     set_new(o, "evalue", string_json(ev_ ? ev_ : "", nv));
		break;
	}
	case KBOX_EV_INPUT:
		o = event_new("input");
		if (o && ev->output)
			rc = set_new(o, "prompt", string_json(ev->output->text, ev->output->len)) ||
			     set_new(o, "value",
			             ev->output->value
			                     ? string_json(ev->output->value, ev->output->value_len)
			                     : json_null()) ||
			     set_new(o, "password", json_boolean(ev->output->password));
		break;
	}
	if (rc != 0) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

json_t *kbox_render_end_event(const kbox_result_t *result)
{
	json_t *all = kbox_render_json(result), *o = NULL, *v;
	const char *key;

	if (!all)
		return NULL;
	o = event_new("end");
	if (!o)
		goto out;
	json_object_foreach(all, key, v)
	{
		if (strcmp(key, "schema") == 0)
			continue;
		if (json_object_set(o, key, v) != 0) {
			json_decref(o);
			o = NULL;
			goto out;
		}
	}
out:
	json_decref(all);
	return o;
}
