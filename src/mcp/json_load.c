/* src/mcp/json_load.c — mcp_json_loadb (json_load.h). */
#include "config.h"
#include "mcp/json_load.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define EXACT_MAX 9007199254740992.0 /* 2^53 */

/* V as an integer (new reference) when it is a whole real within +-2^53,
 * else NULL. */
static json_t *whole(const json_t *v)
{
	double d = json_real_value(v); /* (0 for what is not a real) */
	if (!json_is_real(v) || d < -EXACT_MAX || d > EXACT_MAX || d != (double)(json_int_t)d)
		return NULL;
	return json_integer((json_int_t)d);
}

/* The whole reals in J, within +-2^53, made integers again, at any depth
 * (json_loadb bounds the depth).  -1 when out of memory. */
static int whole_reals_to_integers(json_t *j)
{
	const char *key;
	json_t *v, *w;
	size_t i;
	void *tmp;
	json_object_foreach_safe(j, tmp, key, v)
	{
		if ((w = whole(v)) ? json_object_set_new(j, key, w) < 0
		                   : whole_reals_to_integers(v) < 0)
			return -1;
	}
	json_array_foreach(j, i, v)
	{
		if ((w = whole(v)) ? json_array_set_new(j, i, w) < 0
		                   : whole_reals_to_integers(v) < 0)
			return -1;
	}
	return 0;
}

/* The value of the 4 hex digits at P, or -1. */
static long hex4(const char *p)
{
	long v = 0;
	for (int k = 0; k < 4; k++) {
		char c = p[k];
		int d = c >= '0' && c <= '9'   ? c - '0'
		        : c >= 'a' && c <= 'f' ? c - 'a' + 10
		        : c >= 'A' && c <= 'F' ? c - 'A' + 10
		                               : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* A copy of BUF[0..LEN) in which each \uXXXX escape of a lone surrogate
 * in a string (a high one not followed by a low one's escape, or a low
 * one alone) is \uFFFD, of the same length; NULL when there is none (or
 * no memory). */
static char *lone_surrogates_replaced(const char *buf, size_t len)
{
	char *out = NULL;
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		long u, v;
		if (buf[i] == '"') {
			in_str = !in_str;
			continue;
		}
		if (!in_str || buf[i] != '\\')
			continue;
		if (i + 6 > len || buf[i + 1] != 'u' || (u = hex4(buf + i + 2)) < 0) {
			i++; /* (an escape of one character) */
			continue;
		}
		if (u >= 0xD800 && u <= 0xDBFF && i + 12 <= len && buf[i + 6] == '\\' &&
		    buf[i + 7] == 'u' && (v = hex4(buf + i + 8)) >= 0xDC00 && v <= 0xDFFF) {
			i += 11; /* a pair: one character */
			continue;
		}
		if (u >= 0xD800 && u <= 0xDFFF) {
			if (!out) {
				if (!(out = malloc(len)))
					return NULL;
				memcpy(out, buf, len);
			}
			memcpy(out + i, "\\uFFFD", 6);
		}
		i += 5;
	}
	return out;
}

json_t *mcp_json_loadb(const char *buf, size_t len, size_t flags, json_error_t *err)
{
	json_error_t first, again;
	char *fixed = NULL;
	const char *text = buf;
	json_t *j = json_loadb(buf, len, flags, &first);
	/* a lone surrogate, which JSON's grammar allows and jansson does not
	 * take, is U+FFFD, as kbox makes of every string it cannot hold */
	if (!j && (fixed = lone_surrogates_replaced(buf, len))) {
		text = fixed;
		if (!(j = json_loadb(text, len, flags, &again)))
			first = again;
	}
	if (!j && json_error_code(&first) == json_error_numeric_overflow &&
	    (j = json_loadb(text, len, flags | JSON_DECODE_INT_AS_REAL, &again)) &&
	    whole_reals_to_integers(j) < 0) {
		json_decref(j);
		j = NULL;
	}
	if (!j && err)
		*err = first;
	free(fixed);
	return j;
}
