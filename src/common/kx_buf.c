/* src/common/kx_buf.c — a growing string (kx.h). */
#include "config.h" /* _GNU_SOURCE */
#include "common/kx.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Grow B so that NEED more bytes and a NUL fit: doubling up to
 * KX_BUF_PREALLOC, then that much more at a time (as redis's sds). */
static int buf_reserve(kx_buf_t *b, size_t need)
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
	if (want < KX_BUF_PREALLOC)
		cap = want * 2 > 64 ? want * 2 : 64;
	else
		cap = want <= SIZE_MAX - KX_BUF_PREALLOC ? want + KX_BUF_PREALLOC : want;
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

int kx_buf_append(kx_buf_t *b, const void *data, size_t len)
{
	if (buf_reserve(b, len) < 0)
		return -1;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int kx_buf_appends(kx_buf_t *b, const char *s)
{
	return kx_buf_append(b, s, strlen(s));
}

int kx_buf_appendf(kx_buf_t *b, const char *fmt, ...)
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

char *kx_buf_take(kx_buf_t *b, size_t *len)
{
	char *s = NULL;

	if (!b->failed && buf_reserve(b, 0) == 0) {
		s = b->data;
		if (len)
			*len = b->len;
		b->data = NULL;
	}
	kx_buf_reset(b);
	return s;
}

void kx_buf_reset(kx_buf_t *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}

void *kx_grow(void *v, size_t *cap, size_t n, size_t size)
{
	size_t want;
	void *nv;

	if (n < *cap)
		return v;
	want = *cap ? *cap * 2 : 4;
	if (want > SIZE_MAX / size || !(nv = realloc(v, want * size)))
		return NULL;
	*cap = want;
	return nv;
}
