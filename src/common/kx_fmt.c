/* src/common/kx_fmt.c — durations and byte sizes as text (kx.h): one
 * spelling of each in the whole product; messages cut where they must be. */
#include "config.h" /* _GNU_SOURCE */
#include "common/kx.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *kx_fmt_ms(char *buf, size_t size, long long ms)
{
	if (ms % 1000 == 0)
		snprintf(buf, size, "%lld s", ms / 1000);
	else if (ms > 1000)
		snprintf(buf, size, "%.1f s", (double)ms / 1000.0);
	else
		snprintf(buf, size, "%lld ms", ms);
	return buf;
}

const char *kx_fmt_bytes(char *buf, size_t size, long long n)
{
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;

	if (n < 0) {
		snprintf(buf, size, "-");
		return buf;
	}
	while (u < 4 && n >= 1LL << (10 * (u + 1)))
		u++;
	if (n == 1) {
		snprintf(buf, size, "1 byte");
		return buf;
	}
	if (u == 0 || n % (1LL << (10 * u)) == 0) {
		snprintf(buf, size, "%lld %s", n >> (10 * u), units[u]);
		return buf;
	}
	/* 1 GiB less a few bytes is "1.0 GiB", not "1024.0 MiB" */
	if (u < 4 && (double)n / (double)(1LL << (10 * u)) >= 1023.95)
		u++;
	snprintf(buf, size, "%.1f %s", (double)n / (double)(1LL << (10 * u)), units[u]);
	return buf;
}

bool kx_vmsgf(char *buf, size_t size, const char *fmt, va_list ap)
{
	static const char mark[] = "...";
	int n;
	size_t keep;

	if (size == 0)
		return false;
	n = vsnprintf(buf, size, fmt, ap);
	if (n < 0) {
		buf[0] = '\0';
		return false;
	}
	if ((size_t)n < size)
		return true;
	/* cut: room for the mark, at a character boundary */
	if (size <= sizeof mark) {
		buf[kx_utf8_floor(buf, size - 1, size - 1)] = '\0';
		return false;
	}
	keep = kx_utf8_floor(buf, size - 1, size - sizeof mark);
	memcpy(buf + keep, mark, sizeof mark);
	return false;
}

bool kx_msgf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	bool whole;

	va_start(ap, fmt);
	whole = kx_vmsgf(buf, size, fmt, ap);
	va_end(ap);
	return whole;
}

const char *kx_model_text(const char *text)
{
	if (!text || !*text)
		return "[no output]";
	if (text[strspn(text, " \t\r\n\v\f")])
		return text;
	return "[no output] (only blank space was printed)";
}

const char *kx_fmt_middle(char *buf, size_t size, const char *s, size_t max)
{
	static const char mark[] = "…";
	size_t len = strlen(s), head, tail;

	if (size == 0)
		return buf;
	if (max + 1 > size)
		max = size - 1;
	if (len <= max || max < 2 * sizeof mark) {
		kx_msgf(buf, size, "%s", s);
		return buf;
	}
	/* (its halves around the mark, each cut at a character boundary) */
	head = kx_utf8_floor(s, len, (max - (sizeof mark - 1)) / 2);
	tail = len - (max - (sizeof mark - 1) - head);
	while (tail < len && ((unsigned char)s[tail] & 0xC0) == 0x80)
		tail++;
	memcpy(buf, s, head);
	memcpy(buf + head, mark, sizeof mark - 1);
	memcpy(buf + head + sizeof mark - 1, s + tail, len - tail + 1);
	return buf;
}
