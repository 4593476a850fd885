/* src/common/kx_base64.c — base64 encoding (kx.h). */
#include "config.h"
#include "common/kx.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

char *kx_base64_encode(const void *data, size_t len, size_t *out_len)
{
	static const char tab[] =
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = data;
	size_t i, groups = len / 3 + (len % 3 != 0);
	char *out, *o;

	if (groups > (SIZE_MAX - 1) / 4) {
		errno = ENOMEM;
		return NULL;
	}
	if (!(out = o = malloc(groups * 4 + 1)))
		return NULL;
	for (i = 0; i + 2 < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
		*o++ = tab[v >> 18 & 63];
		*o++ = tab[v >> 12 & 63];
		*o++ = tab[v >> 6 & 63];
		*o++ = tab[v & 63];
	}
	if (i < len) { /* one or two bytes left: padded */
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0);
		*o++ = tab[v >> 18 & 63];
		*o++ = tab[v >> 12 & 63];
		*o++ = i + 1 < len ? tab[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	if (out_len)
		*out_len = (size_t)(o - out);
	return out;
}
