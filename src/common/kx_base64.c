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

int kx_base64_decode(const char *text, size_t len, unsigned char *out, size_t *out_len)
{
	unsigned v = 0;
	size_t bits = 0, o = 0, i, pad = 0;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		unsigned d;
		if (c == '\n' || c == '\r')
			continue; /* (MIME's lines: Python's encodebytes) */
		if (c == '=') {
			pad++;
			continue;
		}
		if (pad) /* data after the padding */
			return -1;
		if (c >= 'A' && c <= 'Z')
			d = c - 'A';
		else if (c >= 'a' && c <= 'z')
			d = c - 'a' + 26;
		else if (c >= '0' && c <= '9')
			d = c - '0' + 52;
		else if (c == '+')
			d = 62;
		else if (c == '/')
			d = 63;
		else
			return -1;
		v = (v << 6 | d) & 0xffffff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(v >> bits);
		}
	}
	/* what is left: no bits (a whole group), or 2 or 4 bits of a group
	 * of 2 or 3 characters, which must be zero, with its padding or none */
	if (bits >= 6 || (bits && (v & ((1u << bits) - 1))) || pad > 2 ||
	    (pad && pad != (bits == 4   ? 2u
	                    : bits == 2 ? 1u
	                                : 99u)))
		return -1;
	*out_len = o;
	return 0;
}
