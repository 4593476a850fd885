/* src/svg.c — is an SVG image inert?  A conservative check, for the
 * capture layer, of what a browser could run or fetch when a user opens
 * the file: an SVG that fails it is written as text (NAME.svg.txt).
 *
 * A scanner, not an XML parser: it reads the markup (the XML declaration,
 * a DOCTYPE, comments, CDATA sections, tags and their attributes) well
 * enough to find element and attribute names and values, decodes
 * character references, and calls active whatever it does not understand.
 * It errs one way only: a harmless SVG may fail (and be saved as text);
 * one that passes has none of
 *   - a script, foreignObject, iframe, embed, object, handler, meta,
 *     form... element (any namespace prefix, any case);
 *   - an attribute whose name starts with "on" (an event handler);
 *   - a link (href, xlink:href, src, action, xml:base, ...) to anything
 *     but a fragment of the image ("#id") or a PNG, JPEG, GIF or WebP
 *     data: URL;
 *   - an animation (set, animate) of such a link or of a handler;
 *   - a javascript:, vbscript: or livescript: URL, or a url() (or CSS
 *     src()) to anything but "#id", in any attribute;
 *   - in a style sheet (a <style> element, its comments and CDATA
 *     included, or a style attribute): the same, and @import, image(),
 *     image-set(), expression(), behavior, -moz-binding, or a backslash
 *     (CSS escapes could spell any of these);
 *   - a DOCTYPE with an internal subset (entities), a DOCTYPE but SVG
 *     1.1's and 1.0's (an external DTD), any other markup declaration,
 *     a processing instruction (xml-stylesheet: XSLT), an encoding other
 *     than UTF-8, an entity reference but the five of XML in an attribute
 *     or a style sheet (in other text one could only stand for
 *     characters, shown as such);
 *   - control characters, or markup it cannot read (an unterminated tag,
 *     comment or CDATA section, an attribute without a quoted value). */
#include "private.h"

#include <stdbool.h>
#include <string.h>

typedef struct {
	const char *s;
	size_t len, i;
	kx_buf_t style; /* the text of the <style> element being read, decoded */
	bool in_style;
} scan_t;

#define NOT_WELL_FORMED "markup that is not well-formed"

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Append the byte C to OUT, lowercased (a byte beyond ASCII as 0x80). */
static void put(kx_buf_t *out, unsigned long c)
{
	char b = c < 0x80 ? lower((char)c) : '\x80';
	kx_buf_append(out, &b, 1);
}

/* Do the N bytes at A equal the lowercase LIT, in any case? */
static bool eq_ci(const char *a, size_t n, const char *lit)
{
	size_t k = strlen(lit);
	if (n != k)
		return false;
	for (size_t j = 0; j < n; j++)
		if (lower(a[j]) != lit[j])
			return false;
	return true;
}

/* Does the text at P->i start with LIT (lowercase), in any case? */
static bool at_ci(const scan_t *p, const char *lit)
{
	size_t k = strlen(lit);
	return p->len - p->i >= k && eq_ci(p->s + p->i, k, lit);
}

/* The part of the name N[0..*LEN) after its last ':' (its local name). */
static const char *local_name(const char *n, size_t *len)
{
	const char *colon = memrchr(n, ':', *len);
	if (colon) {
		*len -= (size_t)(colon + 1 - n);
		return colon + 1;
	}
	return n;
}

/* Append to OUT the N bytes of literal text at V (a CDATA section) for
 * matching, as decode does without references. */
static void literal(const char *v, size_t n, kx_buf_t *out)
{
	for (size_t j = 0; j < n; j++)
		if ((unsigned char)v[j] > 0x20)
			put(out, (unsigned char)v[j]);
}

/* Append to OUT the N bytes of markup text at V as a browser reads them,
 * for matching: character references decoded, ASCII lowercased, spaces
 * and control characters left out (a browser skips some inside a URL's
 * scheme), anything not ASCII as 0x80 (it matches nothing).  NULL, or why
 * the text is not understood. */
static const char *decode(const char *v, size_t n, kx_buf_t *out)
{
	static const struct {
		const char *name;
		char c;
	} named[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
	size_t j = 0;

	while (j < n) {
		char c = v[j];
		const char *semi;
		unsigned long cp;
		size_t k = j + 1, end;
		if (c != '&') {
			if ((unsigned char)c > 0x20)
				put(out, (unsigned char)c);
			j++;
			continue;
		}
		semi = memchr(v + j, ';', n - j);
		if (!semi || semi - (v + j) > 16)
			return NOT_WELL_FORMED;
		end = (size_t)(semi - v);
		if (k < end && v[k] == '#') {
			bool hex = ++k < end && (v[k] == 'x' || v[k] == 'X');
			k += hex;
			if (k == end)
				return NOT_WELL_FORMED;
			for (cp = 0; k < end; k++) {
				char d = lower(v[k]);
				unsigned digit = d >= '0' && d <= '9' ? (unsigned)(d - '0')
				                 : hex && d >= 'a' && d <= 'f'
				                         ? (unsigned)(d - 'a' + 10)
				                         : 99;
				if (digit > (hex ? 15u : 9u) || cp > 0x10ffff)
					return NOT_WELL_FORMED;
				cp = cp * (hex ? 16 : 10) + digit;
			}
			if (cp > 0x10ffff)
				return NOT_WELL_FORMED;
			if (cp > 0x20)
				put(out, cp);
		} else {
			size_t m;
			for (m = 0; m < sizeof named / sizeof named[0]; m++)
				if (end - k == strlen(named[m].name) &&
				    memcmp(v + k, named[m].name, end - k) == 0)
					break;
			if (m == sizeof named / sizeof named[0])
				return "an entity reference";
			kx_buf_append(out, &named[m].c, 1);
		}
		j = end + 1;
	}
	return NULL;
}

/* Does the decoded text D (N bytes) hold NEEDLE? */
static bool has(const char *d, size_t n, const char *needle)
{
	return memmem(d, n, needle, strlen(needle)) != NULL;
}

/* Does each FN( in the decoded text D (N bytes) name a fragment, "#…"? */
static bool fragments_only(const char *d, size_t n, const char *fn)
{
	size_t off = 0, m = strlen(fn);
	const char *u;

	while ((u = memmem(d + off, n - off, fn, m))) {
		size_t k = (size_t)(u - d) + m;
		if (k < n && (d[k] == '"' || d[k] == '\''))
			k++;
		if (k >= n || d[k] != '#')
			return false;
		off = k;
	}
	return true;
}

/* What is active in the decoded attribute value or style text D (N
 * bytes): a script URL, or a url() (or CSS src()) to anything but a
 * fragment; NULL. */
static const char *url_check(const char *d, size_t n)
{
	if (has(d, n, "javascript:") || has(d, n, "vbscript:") || has(d, n, "livescript:"))
		return "a javascript: URL";
	if (!fragments_only(d, n, "url(") || !fragments_only(d, n, "src("))
		return "a url() out of the image";
	return NULL;
}

/* What is active in the decoded style sheet D (N bytes), or NULL. */
static const char *css_check(const char *d, size_t n)
{
	if (memchr(d, '\\', n))
		return "an escape in a style sheet";
	if (has(d, n, "@import"))
		return "an @import in a style sheet";
	if (has(d, n, "image-set(") || has(d, n, "image("))
		return "an image() or image-set() in a style sheet";
	if (has(d, n, "expression(") || has(d, n, "behavior:") || has(d, n, "-moz-binding"))
		return "a script in a style sheet";
	return url_check(d, n);
}

/* Is the attribute (local name N, LEN bytes) one that takes a URL? */
static bool is_url_attr(const char *n, size_t len)
{
	static const char *const names[] = {
	        "href",       "src",      "srcset",  "action",  "formaction", "data",    "poster",
	        "background", "codebase", "archive", "lowsrc",  "dynsrc",     "ping",    "manifest",
	        "longdesc",   "cite",     "usemap",  "profile", "icon",       "classid", "base"};
	for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
		if (eq_ci(n, len, names[k]))
			return true;
	return false;
}

/* Is the decoded URL D (N bytes) inside the image: empty, a fragment, or a
 * raster data: URL? */
static bool url_inside(const char *d, size_t n)
{
	static const char *const raster[] = {"data:image/png", "data:image/jpeg", "data:image/jpg",
	                                     "data:image/gif", "data:image/webp"};
	if (n == 0 || d[0] == '#')
		return true;
	for (size_t k = 0; k < sizeof raster / sizeof raster[0]; k++) {
		size_t m = strlen(raster[k]);
		if (n > m && memcmp(d, raster[k], m) == 0 && (d[m] == ';' || d[m] == ','))
			return true;
	}
	return false;
}

/* What is active in the element named N (LEN bytes, its local name), or NULL. */
static const char *element_check(const char *n, size_t len)
{
	static const struct {
		const char *name, *why;
	} active[] = {{"script", "a <script> element"},
	              {"foreignobject", "a <foreignObject> element"},
	              {"iframe", "an <iframe> element"},
	              {"frame", "a <frame> element"},
	              {"frameset", "a <frameset> element"},
	              {"embed", "an <embed> element"},
	              {"object", "an <object> element"},
	              {"applet", "an <applet> element"},
	              {"handler", "a <handler> element"},
	              {"listener", "a <listener> element"},
	              {"meta", "a <meta> element"},
	              {"link", "a <link> element"},
	              {"base", "a <base> element"},
	              {"form", "a <form> element"},
	              {"input", "an <input> element"},
	              {"button", "a <button> element"},
	              {"textarea", "a <textarea> element"},
	              {"select", "a <select> element"},
	              {"portal", "a <portal> element"},
	              {"audio", "an <audio> element"},
	              {"video", "a <video> element"}};
	for (size_t k = 0; k < sizeof active / sizeof active[0]; k++)
		if (eq_ci(n, len, active[k].name))
			return active[k].why;
	return NULL;
}

/* What is active in the attribute NAME (NLEN bytes) = the raw value V
 * (VLEN bytes), or NULL. */
static const char *attr_check(const char *name, size_t nlen, const char *v, size_t vlen)
{
	kx_buf_t d = KX_BUF_INIT;
	const char *local = local_name(name, &nlen), *why;

	if (nlen >= 2 && lower(local[0]) == 'o' && lower(local[1]) == 'n')
		return "an event handler attribute";
	if ((why = decode(v, vlen, &d)) || d.failed)
		goto out;
	if (is_url_attr(local, nlen)) {
		if (url_inside(d.data, d.len))
			goto out; /* a data: URL is base64 or text: nothing more to find */
		why = memmem(d.data, d.len, "script:", 7) ? "a javascript: URL"
		                                          : "a link out of the image";
		goto out;
	}
	if (eq_ci(local, nlen, "attributename") && d.len) {
		size_t tlen = d.len;
		const char *target = local_name(d.data, &tlen);
		if (is_url_attr(target, tlen) ||
		    (tlen >= 2 && target[0] == 'o' && target[1] == 'n')) {
			why = "an animation of a link or an event handler";
			goto out;
		}
	}
	why = eq_ci(local, nlen, "style") ? css_check(d.data ? d.data : "", d.len)
	                                  : url_check(d.data ? d.data : "", d.len);
out:
	if (!why && d.failed)
		why = "not enough memory to read it";
	kx_buf_reset(&d);
	return why;
}

/* The end of the <style> element being read: its text checked. */
static const char *style_end(scan_t *p)
{
	const char *why = p->style.failed
	                          ? "not enough memory to read it"
	                          : css_check(p->style.data ? p->style.data : "", p->style.len);
	kx_buf_reset(&p->style);
	p->in_style = false;
	return why;
}

/* Skip P past the next LIT (after P->i + FROM); false when there is none. */
static bool skip_past(scan_t *p, size_t from, const char *lit)
{
	const char *e = memmem(p->s + p->i + from, p->len - p->i - from, lit, strlen(lit));
	if (!e)
		return false;
	if (p->in_style) /* a comment or CDATA in a style sheet: read it too */
		literal(p->s + p->i + from, (size_t)(e - (p->s + p->i + from)), &p->style);
	p->i = (size_t)(e - p->s) + strlen(lit);
	return true;
}

/* The XML declaration at P: only UTF-8 (or ASCII) is understood. */
static const char *xml_decl(scan_t *p)
{
	const char *end = memmem(p->s + p->i, p->len - p->i, "?>", 2), *e;
	size_t k;
	if (!end)
		return NOT_WELL_FORMED;
	e = memmem(p->s + p->i, (size_t)(end - (p->s + p->i)), "encoding", 8);
	if (e) {
		k = (size_t)(e - p->s) + 8;
		while (k < (size_t)(end - p->s) && (is_space(p->s[k]) || p->s[k] == '='))
			k++;
		if (k < (size_t)(end - p->s) && (p->s[k] == '"' || p->s[k] == '\'')) {
			const char *q = memchr(p->s + k + 1, p->s[k], (size_t)(end - p->s) - k - 1);
			size_t n = q ? (size_t)(q - (p->s + k + 1)) : 0;
			if (!q ||
			    !(eq_ci(p->s + k + 1, n, "utf-8") || eq_ci(p->s + k + 1, n, "utf8") ||
			      eq_ci(p->s + k + 1, n, "us-ascii") ||
			      eq_ci(p->s + k + 1, n, "ascii")))
				return "an encoding other than UTF-8";
		}
	}
	p->i = (size_t)(end - p->s) + 2;
	return NULL;
}

/* The two DOCTYPEs an inert SVG may have: SVG 1.1's and SVG 1.0's, their
 * public and system identifiers (a browser fetches neither, but a DTD
 * elsewhere could declare entities or default attributes). */
static const char *const w3c_dtds[][2] = {
        {"-//W3C//DTD SVG 1.1//EN", "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd"},
        {"-//W3C//DTD SVG 1.0//EN", "http://www.w3.org/TR/2001/REC-SVG-20010904/DTD/svg10.dtd"},
};

/* Is the text at S[*K..END) (after optional white space) the quoted
 * literal LIT, in either quotes?  Then *K is past it. */
static bool literal_is(const char *s, size_t *k, size_t end, const char *lit)
{
	size_t j = *k, n = strlen(lit);
	while (j < end && is_space(s[j]))
		j++;
	if (j + n + 2 > end || (s[j] != '"' && s[j] != '\'') || s[j + n + 1] != s[j] ||
	    memcmp(s + j + 1, lit, n) != 0)
		return false;
	*k = j + n + 2;
	return true;
}

/* Is S[K..END), the inside of a DOCTYPE after "<!DOCTYPE", exactly
 * "svg PUBLIC" and the identifiers of SVG 1.1 or SVG 1.0, white space
 * around each? */
static bool w3c_doctype(const char *s, size_t k, size_t end)
{
	while (k < end && is_space(s[k]))
		k++;
	if (end - k < 10 || memcmp(s + k, "svg", 3) != 0 || !is_space(s[k + 3]))
		return false;
	for (k += 3; k < end && is_space(s[k]); k++)
		;
	if (end - k < 6 || memcmp(s + k, "PUBLIC", 6) != 0)
		return false;
	k += 6;
	for (size_t d = 0; d < sizeof w3c_dtds / sizeof w3c_dtds[0]; d++) {
		size_t j = k;
		if (literal_is(s, &j, end, w3c_dtds[d][0]) && j < end && is_space(s[j]) &&
		    literal_is(s, &j, end, w3c_dtds[d][1])) {
			while (j < end && is_space(s[j]))
				j++;
			return j == end;
		}
	}
	return false;
}

/* A DOCTYPE at P: skipped when it is SVG 1.1's or SVG 1.0's, without an
 * internal subset (declarations); any other names a DTD that could
 * declare entities or be fetched. */
static const char *doctype(scan_t *p)
{
	char quote = 0;
	for (size_t k = p->i + 9; k < p->len; k++) {
		char c = p->s[k];
		if (quote) {
			quote = c == quote ? 0 : quote;
		} else if (c == '"' || c == '\'') {
			quote = c;
		} else if (c == '[') {
			return "a DOCTYPE with declarations";
		} else if (c == '>') {
			if (!w3c_doctype(p->s, p->i + 9, k))
				return "a DOCTYPE other than SVG 1.1's or 1.0's";
			p->i = k + 1;
			return NULL;
		}
	}
	return NOT_WELL_FORMED;
}

/* A tag at P ("<" and a name, or "</"): its names and attributes checked. */
static const char *tag(scan_t *p)
{
	const char *s = p->s, *why;
	size_t j = p->i + 1, k, len;
	bool end_tag = j < p->len && s[j] == '/', style;

	j += end_tag;
	for (k = j; j < p->len && !is_space(s[j]) && s[j] != '/' && s[j] != '>'; j++)
		;
	if (j == k)
		return NOT_WELL_FORMED;
	len = j - k;
	{
		const char *local = local_name(s + k, &len);
		if ((why = element_check(local, len)))
			return why;
		style = eq_ci(local, len, "style");
	}
	if (end_tag) {
		const char *gt = memchr(s + j, '>', p->len - j);
		if (!gt)
			return NOT_WELL_FORMED;
		p->i = (size_t)(gt - s) + 1;
		return style && p->in_style ? style_end(p) : NULL;
	}
	for (;;) {
		size_t nk, vk;
		const char *q;
		while (j < p->len && is_space(s[j]))
			j++;
		if (j >= p->len)
			return NOT_WELL_FORMED;
		if (s[j] == '>') {
			j++;
			break;
		}
		if (s[j] == '/') {
			if (j + 1 >= p->len || s[j + 1] != '>')
				return NOT_WELL_FORMED;
			j += 2;
			style = false; /* <style/>: nothing in it */
			break;
		}
		for (nk = j;
		     j < p->len && !is_space(s[j]) && s[j] != '=' && s[j] != '>' && s[j] != '/';
		     j++)
			;
		if (j == nk)
			return NOT_WELL_FORMED;
		len = j - nk;
		while (j < p->len && is_space(s[j]))
			j++;
		if (j >= p->len || s[j] != '=')
			return NOT_WELL_FORMED;
		for (j++; j < p->len && is_space(s[j]); j++)
			;
		if (j >= p->len || (s[j] != '"' && s[j] != '\''))
			return NOT_WELL_FORMED;
		vk = j + 1;
		if (!(q = memchr(s + vk, s[j], p->len - vk)))
			return NOT_WELL_FORMED;
		if ((why = attr_check(s + nk, len, s + vk, (size_t)(q - (s + vk)))))
			return why;
		j = (size_t)(q - s) + 1;
	}
	p->i = j;
	if (style && !p->in_style)
		p->in_style = true;
	return NULL;
}

const char *kbox__svg_active(const char *s, size_t len)
{
	scan_t p = {s, len, 0, KX_BUF_INIT, false};
	const char *why = NULL;

	for (size_t k = 0; k < len; k++)
		if ((unsigned char)s[k] < 0x20 && !is_space(s[k]))
			return "control characters";
	if (len >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0)
		p.i = 3; /* a byte order mark */
	if (at_ci(&p, "<?xml") && p.i + 5 < len && is_space(s[p.i + 5]))
		why = xml_decl(&p);
	while (!why && p.i < len) {
		const char *lt;
		if (s[p.i] != '<') {
			/* text: only a style sheet's matters */
			lt = memchr(s + p.i, '<', len - p.i);
			size_t n = lt ? (size_t)(lt - (s + p.i)) : len - p.i;
			if (p.in_style)
				why = decode(s + p.i, n, &p.style);
			p.i += n;
		} else if (at_ci(&p, "<!--")) {
			if (!skip_past(&p, 4, "-->"))
				why = NOT_WELL_FORMED;
		} else if (at_ci(&p, "<![cdata[")) {
			if (!skip_past(&p, 9, "]]>"))
				why = NOT_WELL_FORMED;
		} else if (at_ci(&p, "<!doctype") && p.i + 9 < len && is_space(s[p.i + 9])) {
			why = doctype(&p);
		} else if (at_ci(&p, "<!")) {
			why = "a markup declaration";
		} else if (at_ci(&p, "<?")) {
			why = "a processing instruction";
		} else {
			why = tag(&p);
		}
	}
	if (!why && p.in_style)
		why = style_end(&p);
	kx_buf_reset(&p.style);
	return why;
}
