/* src/common/kx_quote.c — kbox's own lines in a text a model reads, and
 * the kernel's that look like them (kx.h: kx_buf_kernel).  In the common
 * module because every front end shows kernel text: libkbox's renderer
 * (src/render.c) and the MCP file tools (src/mcp/files.c), which kbox(1)
 * runs without libkbox. */
#include "common/kx.h"
#include "common/kx_utf8_tables.h"

#include <stdbool.h>
#include <stdio.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Append the LEN bytes at S as the text format shows them: a NUL byte
 * as the two characters "\0", everything else as it is.  So the text holds
 * no NUL, and nothing after one is lost. */
void kx_buf_visible(kx_buf_t *b, const char *s, size_t len)
{
	const char *nul;

	while (len > 0 && (nul = memchr(s, '\0', len))) {
		kx_buf_append(b, s, (size_t)(nul - s));
		kx_buf_append(b, "\\0", 2);
		len -= (size_t)(nul - s) + 1;
		s = nul + 1;
	}
	kx_buf_append(b, s, len);
}

/* ---- kbox's own lines, and the kernel's that look like them ----
 *
 * kbox's own lines in the text begin with one of these.  A line the
 * kernel made (its output, a value, a traceback, a prompt) that begins
 * with one, after any number of backslashes, is shown with one more
 * backslash first, as mboxrd quotes "From " lines: "[stderr]" printed by
 * the code reads "\[stderr]", and "\[stderr]" reads "\\[stderr]".  So no
 * line of the kernel's reads as one of kbox's, and no other line changes.
 * The tool's description (src/cli/cmd_tool_schema.c) and kbox-exec(1)
 * list the words. */
static const char *const own_prefixes[] = {
        "[stderr]",
        "[stdout]",
        "[note: ",
        "[image ",
        "[display ",
        "[input: ",
        "[timeout]",
        "[timeout: ",
        "[kernel died",
        "[aborted]",
        "[aborted: ",
        "[interrupted",
        "[... ",
        "[files saved in: ",
        "[output printed between executions",
        "[end of that output]",
        "[no output]",
        "[error: ",
        "[not found: ",
        "[no text: ",
        "[no completions: ",
        "Out[",
        "Out:",
        /* kbox's own messages, which an agent may read in the same text
         * when it merges standard error into standard output */
        "kbox: ",
        "kbox exec: ",
        "kbox run: ",
        "kbox mcp: ",
        "kbox agent: ",
        "kbox inspect: ",
        "kbox complete: ",
};

/* How many bytes at S (LEN at most) a reader does not see: an invisible
 * format character (kx_utf8_invisible: a zero-width space or joiner, a
 * bidi control, a byte order mark, a soft hyphen, a variation selector, a
 * tag), a control character but a line break or tab, or an escape
 * sequence (a terminal's colour, a title); 0 when the first character is
 * seen. */
static size_t unseen_len(const unsigned char *s, size_t len)
{
	size_t n;

	if (len == 0)
		return 0;
	if (s[0] == 0x1b) { /* ESC [ ... final; ESC ] ... BEL or ESC \; ESC X */
		if (len >= 2 && s[1] == '[') {
			for (n = 2; n < len && !(s[n] >= 0x40 && s[n] <= 0x7e); n++)
				;
			return n < len ? n + 1 : len;
		}
		if (len >= 2 && s[1] == ']') {
			for (n = 2; n < len && s[n] != 0x07 &&
			            !(s[n] == 0x1b && n + 1 < len && s[n + 1] == '\\');
			     n++)
				;
			return n >= len ? len : s[n] == 0x07 ? n + 1 : n + 2;
		}
		return len >= 2 ? 2 : 1;
	}
	if (s[0] < 0x20 || s[0] == 0x7f)
		return s[0] == '\t' || s[0] == '\n' || s[0] == '\r' || s[0] == 0x0b ||
		                       s[0] == 0x0c || (s[0] >= 0x1c && s[0] <= 0x1e)
		               ? 0
		               : 1;
	if (s[0] == 0xc2 && len >= 2 && s[1] >= 0x80 && s[1] <= 0x9f && s[1] != 0x85)
		return 2; /* a C1 control but NEL, a line break */
	return kx_utf8_invisible((const char *)s, len) ? (s[0] < 0xe0   ? 2
	                                                  : s[0] < 0xf0 ? 3
	                                                                : 4)
	                                               : 0;
}

/* Is C a one-byte line break a reader may take for one: a newline, a
 * carriage return, a vertical tab, a form feed, or the separators of
 * files, groups and records (Python's str.splitlines breaks at each)? */
static bool line_break_byte(unsigned char c)
{
	return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e);
}

/* Characters that read as an ASCII one (Unicode TR 39's confusables, those
 * of the letters, digits and brackets kbox's own prefixes are made of):
 * Cyrillic, Greek and Armenian letters, the dotless i, brackets that read
 * as "[", sorted by code point.  The fullwidth forms U+FF01-FF5E are
 * mapped by rule. */
static const struct lookalike_entry {
	unsigned cp;
	char ascii;
} lookalikes[] = {
        {0x0131, 'i'}, {0x0391, 'A'}, {0x0392, 'B'}, {0x0395, 'E'}, {0x0396, 'Z'}, {0x0397, 'H'},
        {0x0399, 'I'}, {0x039A, 'K'}, {0x039C, 'M'}, {0x039D, 'N'}, {0x039F, 'O'}, {0x03A1, 'P'},
        {0x03A4, 'T'}, {0x03A5, 'Y'}, {0x03A7, 'X'}, {0x03B1, 'a'}, {0x03B9, 'i'}, {0x03BA, 'k'},
        {0x03BD, 'v'}, {0x03BF, 'o'}, {0x03C1, 'p'}, {0x03C5, 'u'}, {0x0405, 'S'}, {0x0406, 'I'},
        {0x0408, 'J'}, {0x0410, 'A'}, {0x0412, 'B'}, {0x0415, 'E'}, {0x041A, 'K'}, {0x041C, 'M'},
        {0x041D, 'H'}, {0x041E, 'O'}, {0x0420, 'P'}, {0x0421, 'C'}, {0x0422, 'T'}, {0x0425, 'X'},
        {0x0430, 'a'}, {0x0435, 'e'}, {0x043E, 'o'}, {0x0440, 'p'}, {0x0441, 'c'}, {0x0443, 'y'},
        {0x0445, 'x'}, {0x0455, 's'}, {0x0456, 'i'}, {0x0458, 'j'}, {0x04BB, 'h'}, {0x04CF, 'l'},
        {0x0501, 'd'}, {0x051B, 'q'}, {0x051D, 'w'}, {0x0578, 'n'}, {0x057D, 'u'}, {0x0585, 'o'},
        {0x2045, '['}, {0x27E6, '['}, {0x3010, '['}, {0xFE5D, '['},
};

/* Whether CP is a letter of a script whose letters a reader may take for
 * Latin ones, where it is not in the tables (a Cyrillic "к", a Greek "ε",
 * "ĸ", "ɩ", a small capital): Latin's extensions and IPA, Greek and
 * Coptic, Cyrillic and its extensions, Armenian, NKo, Cherokee, Canadian
 * syllabics, Runic, Tifinagh, the phonetic extensions, Lisu, Old Italic.
 * Such a letter reads as any letter of a prefix, in a line that matches
 * at least one of its letters exactly (looks_own). */
static bool latin_like(unsigned cp)
{
	return (cp >= 0x00C0 && cp <= 0x02AF && cp != 0x00D7 && cp != 0x00F7) ||
	       (cp >= 0x0370 && cp <= 0x052F) || (cp >= 0x0531 && cp <= 0x058F) ||
	       (cp >= 0x07C0 && cp <= 0x07FF) || (cp >= 0x13A0 && cp <= 0x13FF) ||
	       (cp >= 0x1400 && cp <= 0x167F) || (cp >= 0x16A0 && cp <= 0x16FF) ||
	       (cp >= 0x1C80 && cp <= 0x1C8F) || (cp >= 0x1D00 && cp <= 0x1DBF) ||
	       (cp >= 0x1E00 && cp <= 0x1FFF) || (cp >= 0x2C60 && cp <= 0x2CFF) ||
	       (cp >= 0x2D30 && cp <= 0x2D7F) || (cp >= 0x2DE0 && cp <= 0x2DFF) ||
	       (cp >= 0xA4D0 && cp <= 0xA4FF) || (cp >= 0xA640 && cp <= 0xA69F) ||
	       (cp >= 0xA720 && cp <= 0xA7FF) || (cp >= 0xAB30 && cp <= 0xAB6F) ||
	       (cp >= 0x10300 && cp <= 0x1032F);
}

/* A letter of a prefix, as looks_own compares it: in lower case, and of
 * the letters a reader cannot tell apart in many fonts, one: "0" as "o";
 * "I", "i", "1" and "|" as "l". */
static char read_as(char c)
{
	c = (char)tolower((unsigned char)c);
	return c == '0' ? 'o' : c == 'i' || c == '1' || c == '|' ? 'l' : c;
}

/* In what looks_own sees: a letter that reads as any letter (latin_like),
 * and a character that reads as nothing of a prefix. */
#define SEEN_ANY_LETTER '\x01'
#define SEEN_OTHER '\x02'

/* How many bytes at S (LEN at most) a character takes that reads as an
 * ASCII one, put in *ASCII; 0 for any other. */
/* bsearch's order of the tables below, by code point (their first
 * member, an unsigned). */
static int by_cp(const void *key, const void *entry)
{
	unsigned a = *(const unsigned *)key, b = *(const unsigned *)entry;
	return a < b ? -1 : a > b;
}

static size_t lookalike(const unsigned char *s, size_t len, char *ascii)
{
	size_t n = 0;
	unsigned cp = kx_utf8_multibyte((const char *)s, len, &n);
	const struct lookalike_entry *e;

	if (!cp)
		return 0;
	if (cp >= 0xff01 && cp <= 0xff5e) { /* fullwidth ASCII */
		*ascii = (char)(cp - 0xff01 + 0x21);
		return n;
	}
	if (!(e = bsearch(&cp, lookalikes, sizeof lookalikes / sizeof lookalikes[0],
	                  sizeof lookalikes[0], by_cp)))
		return 0;
	*ascii = e->ascii;
	return n;
}

/* What the character at S (LEN bytes at most) reads as, in lower-case
 * ASCII, into OUT (4 bytes, NUL-terminated): an ASCII letter itself in
 * lower case ('0' as 'o': "0ut[" reads as "Out["), a look-alike of the
 * table above, or what kx_fold says (NFKD without marks: fullwidth and
 * mathematical letters, the ellipsis as "...", small capitals, Cherokee
 * and Lisu look-alikes, other brackets and colons).  Its length in bytes,
 * or 0 when it reads as nothing ASCII. */
static size_t fold_char(const unsigned char *s, size_t len, char *out)
{
	size_t n = 0;
	unsigned cp;
	char a;
	const struct kx_fold_entry *e;

	if (s[0] < 0x80) {
		out[0] = s[0] == '0' ? 'o' : (char)tolower(s[0]);
		out[1] = '\0';
		return 1;
	}
	if ((n = lookalike(s, len, &a))) {
		out[0] = (char)tolower((unsigned char)a);
		out[1] = '\0';
		return n;
	}
	if (!(cp = kx_utf8_multibyte((const char *)s, len, &n)) ||
	    !(e = bsearch(&cp, kx_fold, sizeof kx_fold / sizeof kx_fold[0], sizeof kx_fold[0],
	                  by_cp)))
		return 0;
	memcpy(out, e->ascii, sizeof e->ascii);
	return n;
}

/* How many bytes at S (LEN at most) a combining mark takes, one that a
 * reader sees on the character before it rather than as one of its own
 * (kx_utf8_mark_len: Unicode's Mn and Me); 0 for any other character. */
static size_t combining_len(const unsigned char *s, size_t len)
{
	return kx_utf8_mark_len((const char *)s, len);
}

/* Is B at the start of a line: empty, or after a line break a reader may
 * take for one (line_break_byte's, U+0085, U+2028, U+2029)? */
static bool at_line_start(const kx_buf_t *b)
{
	const unsigned char *e = (const unsigned char *)b->data + b->len;

	if (b->len == 0 || line_break_byte(e[-1]))
		return true;
	if (b->len >= 2 && e[-2] == 0xc2 && e[-1] == 0x85)
		return true;
	return b->len >= 3 && e[-3] == 0xe2 && e[-2] == 0x80 && (e[-1] == 0xa8 || e[-1] == 0xa9);
}

/* Where the line that starts at S (before END) ends: after its line
 * break (at_line_start's), or at END. */
static const char *line_end(const char *s, const char *end)
{
	const unsigned char *p = (const unsigned char *)s, *e = (const unsigned char *)end;

	for (; p < e; p++) {
		if (line_break_byte(*p))
			return (const char *)p + 1;
		if (*p == 0xc2 && p + 1 < e && p[1] == 0x85)
			return (const char *)p + 2;
		if (*p == 0xe2 && p + 2 < e && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9))
			return (const char *)p + 3;
	}
	return end;
}

/* Does the LEN bytes at S (LEN > 0) end in a line break (line_end's)? */
static bool ends_in_break(const char *s, size_t len)
{
	const unsigned char *e = (const unsigned char *)s + len;

	return line_break_byte(e[-1]) || (len >= 2 && e[-2] == 0xc2 && e[-1] == 0x85) ||
	       (len >= 3 && e[-3] == 0xe2 && e[-2] == 0x80 && (e[-1] == 0xa8 || e[-1] == 0xa9));
}

/* Does the line starting at S (LEN bytes at most; it ends at its line
 * break, line_end's, and nothing after that is looked at, so that the
 * lines of a text cost their length in all) begin, after any
 * backslashes, blank characters (kx_utf8_blank) and characters a reader
 * does not see (unseen_len), with one of kbox's own prefixes, as a reader
 * sees it?  Characters that read as ASCII ones read so (fold_char: a
 * fullwidth "[", a Cyrillic "е", a mathematical "k"), in any case, "0"
 * as "o" and "I", "i", "1", "|" as one letter (read_as); a letter of a
 * Latin-like script that is in no table as any letter
 * (latin_like); characters a reader does not see and combining marks
 * anywhere in it are passed over.  Blanks, of any width and however many,
 * read as one space, and a space may be where a prefix has none (a hair
 * space in "[std err]") or none where it has one, but after "...".
 *
 * *MORE (when not NULL) is set when the answer is no only because the
 * text ends too soon: it has no line break, and what more may come could
 * make it one of kbox's own ("[not", "kbox exec", nothing but blanks). */
static bool looks_own(const char *s, size_t len, bool *more)
{
	char seen[48];  /* the line's first characters, as they read */
	bool latin[48]; /* SEEN[K] is a Latin letter: ASCII, fullwidth, mathematical */
	size_t i = 0, n, k = 0;
	char f[4];
	bool open, out, unasked; /* the line has no break; it was read to its end */

	if (!more)
		more = &unasked;
	*more = false;
	/* (a run of U+2028, which unseen_len passes over, is as many lines:
	 * each one looking past its end would be quadratic) */
	len = (size_t)(line_end(s, s + len) - s);
	open = len == 0 || !ends_in_break(s, len);
	while (i < len) {
		if (s[i] == '\\')
			i++;
		else if ((n = unseen_len((const unsigned char *)s + i, len - i)) ||
		         (n = kx_utf8_blank(s + i, len - i)))
			i += n;
		else
			break;
	}
	if (i >= len && open) {
		*more = true; /* nothing seen yet */
		return false;
	}
	while (i < len && k + 5 <= sizeof seen && !line_break_byte((unsigned char)s[i])) {
		unsigned cp = 0;
		size_t cn = 0;
		if ((unsigned char)s[i] >= 0x80)
			cp = kx_utf8_multibyte(s + i, len - i, &cn);
		if ((n = unseen_len((const unsigned char *)s + i, len - i)) ||
		    (n = combining_len((const unsigned char *)s + i, len - i))) {
			i += n;
			continue;
		}
		if ((n = kx_utf8_blank(s + i, len - i))) {
			if (k > 0 && seen[k - 1] != ' ')
				latin[k] = false, seen[k++] = ' ';
			i += n;
			continue;
		}
		if ((n = fold_char((const unsigned char *)s + i, len - i, f)))
			;
		else if (cp && latin_like(cp)) {
			f[0] = SEEN_ANY_LETTER, f[1] = '\0', n = cn;
		} else {
			f[0] = SEEN_OTHER, f[1] = '\0', n = cn ? cn : 1;
		}
		for (size_t j = 0; f[j] && k < sizeof seen; j++) {
			latin[k] = !cp || (cp >= 0xFF21 && cp <= 0xFF5A) ||
			           (cp >= 0x1D400 && cp <= 0x1D7FF);
			seen[k++] = f[j] == SEEN_ANY_LETTER ? f[j] : read_as(f[j]);
		}
		i += n;
	}
	out = i >= len && open;
	for (i = 0; i < sizeof own_prefixes / sizeof own_prefixes[0]; i++) {
		const char *p = own_prefixes[i];
		/* (in P, in SEEN; letters matched, by a Latin one, by one that
		 * reads as that letter) */
		size_t a = 0, b = 0, exact = 0, letters = 0, other = 0, alike = 0;
		n = strlen(p);
		while (a < n) {
			char want = read_as(p[a]);
			if (want == ' ' && b < k && seen[b] == ' ')
				a++, b++;
			else if (want == ' ' && a > 0 && p[a - 1] == '.')
				break; /* "[... " is "[... ", not "[...]" */
			else if (want == ' ' && b < k &&
			         (isalnum((unsigned char)seen[b]) || seen[b] == SEEN_ANY_LETTER))
				break; /* "[image " is not "[images" */
			else if (want == ' ')
				a++;
			else if (b < k && seen[b] == ' ')
				b++;
			else if (b < k && (seen[b] == want || (seen[b] == SEEN_ANY_LETTER &&
			                                       isalpha((unsigned char)want)))) {
				letters += isalpha((unsigned char)want) != 0;
				exact += seen[b] == want && latin[b] &&
				         isalpha((unsigned char)want);
				alike += seen[b] == want && isalpha((unsigned char)want);
				a++, b++;
			} else if (b < k && seen[b] == SEEN_OTHER && !other) {
				other++; /* one character of any kind in place of one */
				a++, b++;
			} else
				break;
		}
		/* (what was seen is all a beginning of P) */
		*more |= a < n && b >= k && out;
		/* letters of other scripts stand for any letter, and their look-
		 * alikes for the letters they look like, only beside a Latin one
		 * of the prefix: "[ключ: значение]" and "[λάθος: x]" are
		 * Russian and Greek; and one character of any other kind (a
		 * symbol, a letter of a script no table knows) stands for one of
		 * the prefix's, beside two Latin ones ("kbჿx exec: "); a word
		 * whose every letter reads as the prefix's through the tables is
		 * the prefix's too ("[ԁіѕрӏау ", all Cyrillic) */
		if (a == n && (other ? exact >= 2 : exact > 0 || letters == 0 || alike == letters))
			return true;
	}
	/* "kbox", a word or two, then ":" ("kbox-exec: ", "kbox_mcp: "):
	 * read as kbox's own messages too */
	if (k > 4 && strncmp(seen, "kbox", 4) == 0)
		for (i = 4; i < k && i < 24; i++) {
			unsigned char c = (unsigned char)seen[i];
			if (c == ':' || c == ';')
				return true;
			if (!isalnum(c) && c != ' ' && c != '-' && c != '_' && c != '.' &&
			    c != '(' && c != ')' && c != (unsigned char)SEEN_ANY_LETTER)
				break;
			*more |= i + 1 == k && i + 1 < 24 && out;
		}
	return false;
}

/* Append the LEN bytes at S, text the kernel made, as kx_buf_visible does,
 * with a backslash before each line of it that begins where a line of B
 * begins and looks like one of kbox's own. */
void kx_buf_kernel(kx_buf_t *b, const char *s, size_t len)
{
	const char *end = s + len, *p;

	while (s < end) {
		if (at_line_start(b) && looks_own(s, (size_t)(end - s), NULL))
			kx_buf_append(b, "\\", 1);
		p = line_end(s, end);
		kx_buf_visible(b, s, (size_t)(p - s));
		s = p;
	}
}

/* (kx.h) */
const char *kx_shell_word(const char *s, char *out, size_t size)
{
	size_t n = 0;
	bool plain = *s != '\0';

	for (const unsigned char *p = (const unsigned char *)s; *p && plain; p++)
		plain = *p >= 0x80 || isalnum(*p) || strchr("_./,:@%+=-", *p);
	if (plain || size < 3) {
		snprintf(out, size, "%s", s);
		return out;
	}
	out[n++] = '\'';
	for (const char *p = s; *p; p++) {
		const char *piece = *p == '\'' ? "'\\''" : NULL;
		size_t len = piece ? 4 : 1;
		if (n + len + 2 > size)
			break;
		memcpy(out + n, piece ? piece : p, len);
		n += len;
	}
	out[n++] = '\'';
	out[n] = '\0';
	return out;
}

/* ---- kernel text on a terminal, as it comes (kx.h: kx_live_t) ---- */

/* Bytes of a segment's beginning held at most before it is told */
#define LIVE_HOLD_MAX 512

/* How many bytes at the end of the LEN at S begin a UTF-8 character that
 * does not end there (0: none): a piece of stream text ends between two
 * characters, but the next piece may hold the rest of one. */
static size_t cut_char(const char *s, size_t len)
{
	const unsigned char *e = (const unsigned char *)s + len;

	for (size_t k = 1; k <= 3 && k <= len; k++) {
		unsigned char c = e[-(ptrdiff_t)k];
		size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
		if (c >= 0x80 && c < 0xc0)
			continue; /* a continuation byte: its lead is further back */
		return want > k ? k : 0;
	}
	return 0;
}

/* The most columns the character at S (LEN bytes left) can take on a
 * terminal as cli_write_safe shows it, and its length in *N: a tab 8, a
 * control character 2 ("^X", "\0"), a C1 control 6 ("\u0085"), an
 * invisible or unassigned one its escape ("\u200b" 6, "\ue0041" 7,
 * "\u10ffff" 8), any other 2 (a wide one; Unicode 14's, which terminals
 * know), printable ASCII 1.  (Coupled to cli_write_safe: what it writes
 * is what is counted.) */
static size_t char_cols_max(const char *s, size_t len, size_t *n)
{
	unsigned char c = (unsigned char)s[0];
	unsigned cp;

	*n = 1;
	if (c < 0x80)
		return c == '\t' ? 8 : c < 0x20 || c == 0x7f ? 2 : 1;
	if (c == 0xc2 && len >= 2 && (unsigned char)s[1] >= 0x80 && (unsigned char)s[1] <= 0x9f) {
		*n = 2;
		return 6;
	}
	if (!(cp = kx_utf8_multibyte(s, len, n))) {
		*n = 1;
		return 2; /* a byte that is not UTF-8: a replacement character */
	}
	if (kx_utf8_invisible(s, len))
		return cp < 0x10000 ? 6 : cp < 0x100000 ? 7 : 8;
	return 2;
}

/* How many columns, from where it begins, the LEN bytes at S surely write
 * over: its first characters that are printable ASCII. */
static size_t cols_covered(const char *s, size_t len)
{
	size_t n = 0;

	while (n < len && (unsigned char)s[n] >= 0x20 && (unsigned char)s[n] < 0x7f)
		n++;
	return n;
}

/* Q's screen after the LEN bytes at S were written (their most). */
static void live_advance(kx_live_t *q, const char *s, size_t len)
{
	for (size_t i = 0, n; i < len; i += n) {
		unsigned char c = (unsigned char)s[i];
		n = 1;
		if (c == '\n')
			q->col_max = q->line_max = 0;
		else if (c == '\r')
			q->col_max = 0;
		else if ((q->col_max += char_cols_max(s + i, len - i, &n)) > q->line_max)
			q->line_max = q->col_max;
	}
}

static void live_write(kx_live_t *q, int stream, const char *s, size_t len)
{
	q->write(q->arg, stream, s, len);
	live_advance(q, s, len);
}

/* Tell what Q holds, a segment's beginning: write it, after a backslash
 * when it reads as kbox's own, or may yet and what shows beside it on
 * the screen may make it one.  HOW: LIVE_MAY_WAIT, more of the segment
 * may come (it is told only when it can be); LIVE_ENDS, the segment ends
 * here or with its line break; LIVE_CONTINUED, something else is written
 * right after it on the same line (the other stream). */
enum { LIVE_MAY_WAIT, LIVE_ENDS, LIVE_CONTINUED };

static void live_tell(kx_live_t *q, int how)
{
	const char *s = q->held.data;
	size_t n = q->held.len, body = n;
	bool broken = n > 0 && ends_in_break(s, n), more = false, own, alone;

	if (n == 0)
		return;
	if (how == LIVE_MAY_WAIT && !broken && cut_char(s, n) > 0 && n < LIVE_HOLD_MAX)
		return; /* the rest of a character is to come */
	/* (judged without its break: what the screen shows after it, on the
	 * same line, may continue it) */
	if (broken)
		body -= line_break_byte((unsigned char)s[n - 1]) ? 1
		        : (unsigned char)s[n - 1] == 0x85        ? 2
		                                                 : 3;
	own = looks_own(s, body, &more);
	if (how == LIVE_MAY_WAIT && !broken && !own && more && n < LIVE_HOLD_MAX)
		return; /* what comes next decides */
	/* it begins a line, or after a carriage return, and surely covers
	 * what the line showed before: on the screen it is alone */
	alone = q->col_max == 0 && cols_covered(s, body) >= q->line_max;
	/* a beginning of a line of kbox's ("[not", "kbox", blanks) is quoted
	 * when what the screen shows beside it may make one: the rest of an
	 * earlier line a carriage return went back over ("[not" over
	 * "    e: forged]"), or the other stream's text after it; nothing,
	 * which draws nothing, is not */
	if (own || (more && body > 0 && (how == LIVE_CONTINUED || n >= LIVE_HOLD_MAX || !alone)))
		live_write(q, q->held_stream, "\\", 1);
	live_write(q, q->held_stream, s, n);
	q->mid = !broken;
	q->held.len = 0;
}

void kx_live_init(kx_live_t *q, kx_live_write_fn *write, void *arg)
{
	memset(q, 0, sizeof *q);
	q->write = write;
	q->arg = arg;
}

void kx_live_text(kx_live_t *q, int stream, const char *s, size_t len)
{
	const char *end = s + len, *p;

	/* the other stream's segment, held, is continued by this text */
	if (q->held.len && q->held_stream != stream)
		live_tell(q, LIVE_CONTINUED);
	while (s < end) {
		p = line_end(s, end); /* (a carriage return is a break) */
		if (q->mid) {
			live_write(q, stream, s, (size_t)(p - s));
			q->mid = !ends_in_break(s, (size_t)(p - s));
		} else {
			/* a tab goes over columns without writing them: on a line
			 * that showed something before, what it leaves shows
			 * beside what came before it */
			const char *tab = q->line_max > 0 || q->col_max > 0
			                          ? memchr(s, '\t', (size_t)(p - s))
			                          : NULL;
			if (tab)
				p = tab + 1;
			q->held_stream = stream;
			kx_buf_append(&q->held, s, (size_t)(p - s));
			if (q->held.failed) { /* out of memory: written as it is */
				live_write(q, stream, s, (size_t)(p - s));
				kx_buf_reset(&q->held);
				q->mid = !ends_in_break(s, (size_t)(p - s));
			} else
				live_tell(q, tab ? LIVE_CONTINUED : LIVE_MAY_WAIT);
		}
		s = p;
	}
}

bool kx_live_end(kx_live_t *q)
{
	live_tell(q, LIVE_ENDS);
	kx_buf_reset(&q->held);
	return q->mid || q->line_max > 0;
}
