/* src/common/kx_json.c — what JSON text costs to parse, without parsing it. */
#include "config.h"
#include "common/kx.h"

#include <stdbool.h>
#include <string.h>

size_t kx_json_cost(const char *p, size_t n)
{
	size_t cost = n, containers = 0, items = 0;
	bool in_str = false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			continue;
		}
		switch (c) {
		case '"':
			in_str = true;
			break;
		case '[':
		case '{':
			containers++;
			items++;
			break;
		case ',':
		case ':':
			items++;
			break;
		default:
			break;
		}
	}
	return cost + containers * 200 + items * 64;
}

/* The value of the 4 hex digits at P, or -1. */
static long hex4(const char *p)
{
	long v = 0;
	for (int i = 0; i < 4; i++) {
		int c = p[i], d = c >= '0' && c <= '9'   ? c - '0'
		                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
		                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
		                                         : -1;
		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	return v;
}

size_t kx_json_lone_surrogates(char *t, size_t len)
{
	bool in_string = false;
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		long v, w;
		if (t[i] == '"') {
			in_string = !in_string;
			continue;
		}
		if (!in_string || t[i] != '\\' || i + 1 >= len)
			continue;
		if (t[i + 1] != 'u' || i + 6 > len || (v = hex4(t + i + 2)) < 0xd800 ||
		    v > 0xdfff) {
			i++; /* (an escape that is not a surrogate's: \\, \", \u0041) */
			continue;
		}
		if (v <= 0xdbff && i + 12 <= len && t[i + 6] == '\\' && t[i + 7] == 'u' &&
		    (w = hex4(t + i + 8)) >= 0xdc00 && w <= 0xdfff) {
			i += 11; /* a pair */
			continue;
		}
		memcpy(t + i, "\\ufffd", 6);
		n++;
		i += 5;
	}
	return n;
}
