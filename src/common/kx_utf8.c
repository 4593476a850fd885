/* src/common/kx_utf8.c — UTF-8: check, repair, cut, count (kx.h).  Every
 * function reads text in the units of Unicode §3.9 (table 3-7): a
 * well-formed character, or a maximal ill-formed subpart. */
#include "config.h" /* _GNU_SOURCE */
#include "common/kx.h"
#include "common/kx_utf8_tables.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What the unit at P is. */
typedef enum {
	UNIT_CHAR,      /* one well-formed character */
	UNIT_ILL,       /* a maximal ill-formed subpart */
	UNIT_CUT_SHORT, /* a lead byte and continuation bytes, then the end of the text */
} unit_t;

/* The unit at P (N > 0 bytes left): its length, and in *KIND what it is:
 * a byte that starts no character and a lead byte with the continuation
 * bytes that could still have completed it are ill-formed subparts. */
static size_t next_unit(const unsigned char *p, size_t n, unit_t *kind)
{
	unsigned c = p[0], lo = 0x80, hi = 0xbf;
	size_t len, i = 1;

	*kind = UNIT_CHAR;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else {
		*kind = UNIT_ILL;
		return 1;
	}
	/* the second byte's range rules out overlong forms, surrogates and
	 * code points beyond U+10FFFF */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (i < n && p[i] >= lo && p[i] <= hi) {
		i++;
		while (i < len && i < n && (p[i] & 0xc0) == 0x80)
			i++;
	}
	if (i < len)
		*kind = i == n ? UNIT_CUT_SHORT : UNIT_ILL;
	return i;
}

size_t kx_utf8_unit(const char *s, size_t n, bool *is_char)
{
	unit_t kind;
	size_t len = next_unit((const unsigned char *)s, n, &kind);
	*is_char = kind == UNIT_CHAR;
	return len;
}

/* How many bytes at P (N of them) are whole well-formed characters,
 * up to the first unit that is not one (or the end). */
static size_t valid_run(const unsigned char *p, size_t n)
{
	size_t i = 0;
	unit_t kind;

	while (i < n) {
		size_t len;
		if (p[i] < 0x80) { /* the common case, quickly */
			i++;
			continue;
		}
		len = next_unit(p + i, n - i, &kind);
		if (kind != UNIT_CHAR)
			break;
		i += len;
	}
	return i;
}

bool kx_utf8_valid(const char *s, size_t len)
{
	return valid_run((const unsigned char *)s, len) == len;
}

bool kx_utf8_valid_str(const char *s)
{
	return s && kx_utf8_valid(s, strlen(s));
}

char *kx_utf8_repair(const char *s, size_t len, size_t *out_len)
{
	static const char replacement[3] = {'\xef', '\xbf', '\xbd'}; /* U+FFFD */
	const unsigned char *p = (const unsigned char *)s;
	size_t i, n, grow = 0, o = 0;
	unit_t kind;
	char *out;

	/* a bad subpart is 1 to 3 bytes and becomes 3: the result grows by at
	 * most 2 bytes per subpart */
	for (i = valid_run(p, len); i < len; i += valid_run(p + i, len - i)) {
		n = next_unit(p + i, len - i, &kind);
		grow += 3 - n;
		i += n;
	}
	if (grow > SIZE_MAX - 1 - len) {
		errno = ENOMEM;
		return NULL;
	}
	out = malloc(len + grow + 1);
	if (!out)
		return NULL;
	/* each run of good characters in one copy, then the bad subpart
	 * after it as U+FFFD */
	for (i = 0; i < len;) {
		n = valid_run(p + i, len - i);
		memcpy(out + o, p + i, n);
		o += n;
		i += n;
		if (i < len) {
			i += next_unit(p + i, len - i, &kind);
			memcpy(out + o, replacement, sizeof replacement);
			o += sizeof replacement;
		}
	}
	out[o] = '\0';
	if (out_len)
		*out_len = o;
	return out;
}

size_t kx_utf8_floor(const char *s, size_t len, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = max < len ? max : len, i, ulen;
	unit_t kind;

	/* the lead byte of the unit that N may fall in is at most 3 bytes
	 * back; a byte that leads nothing (ASCII, or one that starts no
	 * character) ends the search: N follows a unit of one byte */
	for (i = n; i > 0 && n - i < 3; i--) {
		unsigned c = p[i - 1];
		if ((c & 0xc0) == 0x80)
			continue;
		if (c < 0xc2 || c > 0xf4)
			return n;
		ulen = next_unit(p + i - 1, len - (i - 1), &kind);
		if (i - 1 + ulen > n || (kind == UNIT_CUT_SHORT && i - 1 + ulen == n))
			return i - 1;
		return n;
	}
	return n;
}

size_t kx_utf8_count(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t count = 0;
	unit_t kind;

	for (size_t i = 0; i < len; count++)
		i += p[i] < 0x80 ? 1 : next_unit(p + i, len - i, &kind);
	return count;
}

/* Whether CP is in one of the N sorted ranges R. */
static bool in_ranges(unsigned cp, const kx_range_t *r, size_t n)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cp < r[mid].lo)
			hi = mid;
		else if (cp > r[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

unsigned kx_utf8_multibyte(const char *s, size_t n, size_t *len)
{
	const unsigned char *p = (const unsigned char *)s;
	bool is_char;
	unsigned c;
	size_t u;

	if (n < 2 || p[0] < 0xc2 || p[0] > 0xf4 ||
	    (u = kx_utf8_unit((const char *)p, n, &is_char)) < 2 || !is_char)
		return 0;
	c = p[0] & (u == 2 ? 0x1fu : u == 3 ? 0x0fu : 0x07u);
	for (size_t i = 1; i < u; i++)
		c = c << 6 | (p[i] & 0x3fu);
	*len = u;
	return c;
}

size_t kx_utf8_mark_len(const char *s, size_t n)
{
	size_t len = 0;
	unsigned c = kx_utf8_multibyte(s, n, &len);
	/* (the Hangul vowels and final consonants join the syllable before
	 * them: a terminal gives them no width of their own) */
	return c && (in_ranges(c, kx_marks, sizeof kx_marks / sizeof kx_marks[0]) ||
	             (c >= 0x1160 && c <= 0x11ff) || (c >= 0xd7b0 && c <= 0xd7ff))
	               ? len
	               : 0;
}

unsigned kx_utf8_invisible(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned c;
	size_t len;

	if (n < 2 || p[0] < 0xc2 || p[0] > 0xf4)
		return 0;
	len = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	if (n < len)
		return 0;
	c = p[0] & (len == 2 ? 0x1fu : len == 3 ? 0x0fu : 0x07u);
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3fu);
	}
	if (c == 0xad ||                      /* soft hyphen */
	    c == 0x34f ||                     /* combining grapheme joiner */
	    c == 0x61c ||                     /* Arabic letter mark */
	    c == 0x115f || c == 0x1160 ||     /* Hangul fillers */
	    c == 0x17b4 || c == 0x17b5 ||     /* Khmer inherent vowels */
	    (c >= 0x180b && c <= 0x180f) ||   /* Mongolian selectors, vowel separator */
	    (c >= 0x200b && c <= 0x200f) ||   /* zero-width space, joiners, LRM, RLM */
	    (c >= 0x2028 && c <= 0x202e) ||   /* separators, embeddings, overrides */
	    (c >= 0x2060 && c <= 0x206f) ||   /* word joiner, invisible operators, isolates */
	    c == 0x3164 || c == 0xffa0 ||     /* Hangul fillers */
	    (c >= 0xfe00 && c <= 0xfe0f) ||   /* variation selectors */
	    c == 0xfeff ||                    /* zero-width no-break space (BOM) */
	    (c >= 0xfff9 && c <= 0xfffb) ||   /* interlinear annotation */
	    (c >= 0x1bca0 && c <= 0x1bca3) || /* shorthand format controls */
	    (c >= 0x1d173 && c <= 0x1d17a) || /* musical format controls */
	    (c >= 0xe0000 && c <= 0xe0fff) || /* tags, variation selectors supplement */
	    in_ranges(c, kx_formats, sizeof kx_formats / sizeof kx_formats[0]) ||
	    in_ranges(c, kx_unassigned, sizeof kx_unassigned / sizeof kx_unassigned[0]))
		return c;
	return 0;
}

size_t kx_utf8_blank(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned c;

	if (n >= 1 && (p[0] == ' ' || p[0] == '\t'))
		return 1;
	if (n >= 2 && p[0] == 0xc2 && p[1] == 0xa0)
		return 2;
	if (n < 3 || (p[0] & 0xf0) != 0xe0 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
		return 0;
	c = (p[0] & 0x0fu) << 12 | (p[1] & 0x3fu) << 6 | (p[2] & 0x3fu);
	return c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x202f || c == 0x205f ||
	                       c == 0x2800 || c == 0x3000
	               ? 3
	               : 0;
}

size_t kx_name_escape(const char *name, size_t len, char *out, size_t size)
{
	const unsigned char *p = (const unsigned char *)name;
	size_t o = 0, i = 0;

	if (!size)
		return 0;
	while (i < len) {
		char piece[32];
		size_t pn = 0, u;
		bool is_char;
		unsigned cf;

		u = kx_utf8_unit(name + i, len - i, &is_char);
		cf = is_char && u > 1 ? kx_utf8_invisible(name + i, u) : 0;
		if (!is_char || (u == 1 && (p[i] < 0x20 || p[i] == 0x7f)) ||
		    (u == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0)) {
			/* a control character (C0, DEL, C1), or bytes that are
			 * not UTF-8: \n, \t, \r by name, the rest byte by byte */
			if (u == 1 && (p[i] == '\n' || p[i] == '\t' || p[i] == '\r'))
				pn = (size_t)snprintf(piece, sizeof piece, "\\%c",
				                      p[i] == '\n'   ? 'n'
				                      : p[i] == '\t' ? 't'
				                                     : 'r');
			else
				for (size_t k = 0; k < u; k++)
					pn += (size_t)snprintf(piece + pn, sizeof piece - pn,
					                       "\\x%02x", p[i + k]);
		} else if (cf)
			pn = (size_t)snprintf(piece, sizeof piece,
			                      cf > 0xffff ? "\\U%08x" : "\\u%04x", cf);
		else if (p[i] == '\\')
			pn = (size_t)snprintf(piece, sizeof piece, "\\\\");
		else {
			memcpy(piece, name + i, u);
			pn = u;
		}
		if (o + pn >= size)
			break; /* never half an escape */
		memcpy(out + o, piece, pn);
		o += pn;
		i += u;
	}
	out[o] = '\0';
	return o;
}
