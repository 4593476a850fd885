/* src/util.c — small utilities shared by libkbox's modules (declared in
 * src/private.h): one of each.  Nothing here needs more than libc. */
#include "private.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- UTF-8 repair ---- */

/* The sequence at P (N > 0 bytes left): its length, with *OK set when it is
 * one well-formed character, cleared when it is a maximal ill-formed subpart
 * (Unicode §3.9, table 3-7): a byte that starts no character, or a lead byte
 * and the continuation bytes that could still have completed it. */
static size_t utf8_next(const unsigned char *p, size_t n, bool *ok)
{
	unsigned c = p[0], lo = 0x80, hi = 0xbf;
	size_t len, i = 1;

	*ok = true;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else {
		*ok = false;
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
	*ok = i == len;
	return i;
}

char *kbox__utf8_repair(const char *s, size_t len, size_t *out_len)
{
	static const char replacement[3] = {'\xef', '\xbf', '\xbd'}; /* U+FFFD */
	const unsigned char *p = (const unsigned char *)s;
	size_t i, n, grow = 0, o = 0;
	bool ok;
	char *out;

	/* a bad subpart is 1 to 3 bytes and becomes 3: the result grows by at
	 * most 2 bytes per subpart */
	for (i = 0; i < len; i += n) {
		n = utf8_next(p + i, len - i, &ok);
		if (!ok)
			grow += 3 - n;
	}
	if (grow > SIZE_MAX - 1 - len) {
		errno = ENOMEM;
		return NULL;
	}
	out = malloc(len + grow + 1);
	if (!out)
		return NULL;
	for (i = 0; i < len; i += n) {
		n = utf8_next(p + i, len - i, &ok);
		if (ok) {
			memcpy(out + o, p + i, n);
			o += n;
		} else {
			memcpy(out + o, replacement, sizeof replacement);
			o += sizeof replacement;
		}
	}
	out[o] = '\0';
	if (out_len)
		*out_len = o;
	return out;
}

/* ---- string buffer ---- */

/* Grow B so that NEED more bytes and a NUL fit: doubling up to
 * KBOX__BUF_PREALLOC, then that much more at a time (as redis's sds). */
static int buf_reserve(kbox__buf_t *b, size_t need)
{
	size_t want, cap;
	char *p;

	if (b->failed)
		return -1;
	if (need > SIZE_MAX - 1 - b->len)
		goto fail;
	want = b->len + need + 1;
	if (want <= b->cap)
		return 0;
	if (want < KBOX__BUF_PREALLOC)
		cap = want * 2 > 64 ? want * 2 : 64;
	else
		cap = want <= SIZE_MAX - KBOX__BUF_PREALLOC ? want + KBOX__BUF_PREALLOC : want;
	p = realloc(b->data, cap);
	if (!p)
		goto fail;
	p[b->len] = '\0';
	b->data = p;
	b->cap = cap;
	return 0;
fail:
	b->failed = true;
	return -1;
}

int kbox__buf_append(kbox__buf_t *b, const void *data, size_t len)
{
	if (buf_reserve(b, len) < 0)
		return -1;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int kbox__buf_appends(kbox__buf_t *b, const char *s)
{
	return kbox__buf_append(b, s, strlen(s));
}

int kbox__buf_appendf(kbox__buf_t *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (buf_reserve(b, 0) < 0)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->data[b->len] = '\0';
		b->failed = true;
		return -1;
	}
	if ((size_t)n >= b->cap - b->len) {
		/* it did not fit: make room and format again */
		if (buf_reserve(b, (size_t)n) < 0) {
			b->data[b->len] = '\0';
			return -1;
		}
		va_start(ap, fmt);
		vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
	return 0;
}

char *kbox__buf_take(kbox__buf_t *b, size_t *len)
{
	char *s = NULL;

	if (!b->failed && buf_reserve(b, 0) == 0) {
		s = b->data;
		if (len)
			*len = b->len;
		b->data = NULL;
	}
	kbox__buf_reset(b);
	return s;
}

void kbox__buf_reset(kbox__buf_t *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}

/* ---- time ---- */

void kbox__iso8601(double t, int digits, char out[32])
{
	static const long scale[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};
	char buf[96];
	struct tm tm;
	time_t secs;
	long frac;
	int n;

	if (digits < 0)
		digits = 0;
	if (digits > 6)
		digits = 6;
	secs = (time_t)floor(t);
	frac = (long)llround((t - (double)secs) * (double)scale[digits]);
	if (frac >= scale[digits]) {
		secs++;
		frac -= scale[digits];
	}
	if (frac < 0)
		frac = 0;
	memset(&tm, 0, sizeof tm);
	gmtime_r(&secs, &tm);
	n = snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d",
	             (tm.tm_year + 1900) % 10000, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	             tm.tm_min, tm.tm_sec);
	if (n < 0)
		n = 0;
	if (digits)
		snprintf(buf + n, sizeof buf - (size_t)n, ".%0*ldZ", digits, frac);
	else
		snprintf(buf + n, sizeof buf - (size_t)n, "Z");
	buf[31] = '\0'; /* at most 27 characters for years 0-9999 */
	memcpy(out, buf, 32);
}

/* ---- files ---- */

int kbox__write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* ---- unix socket paths ---- */

int kbox__unix_path(char *buf, size_t size, const char *dir, const char *name, int *dirfd_p,
                    kbox_error_t *err)
{
	int n = snprintf(buf, size, "%s/%s", dir, name);
	if (n >= 0 && (size_t)n < size)
		return 0;
	if (*dirfd_p < 0 && (*dirfd_p = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return kbox__err_sys(err, "directory %s", dir);
	n = snprintf(buf, size, "/proc/self/fd/%d/%s", *dirfd_p, name);
	if (n < 0 || (size_t)n >= size)
		return kbox__err(err, KBOX_E_INVALID, "%s: the name is too long for a unix socket",
		                 name);
	return 0;
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
			while (i < len && !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e))
				i++;
			if (i < len)
				i++;
		} else if (i < len && s[i] == ']') { /* OSC: until BEL or ESC \ */
			i++;
			while (i < len && s[i] != '\a' && !(s[i] == '\033' && i + 1 < len && s[i + 1] == '\\'))
				i++;
			if (i < len)
				i += s[i] == '\a' ? 1 : 2;
		} else if (i < len && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x2f) {
			/* nF: intermediate bytes, then a final byte (ESC ( B) */
			while (i < len && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x2f)
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
