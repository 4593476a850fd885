/* src/common/kx_json.c — what JSON text costs to parse, without parsing it. */
#include "config.h"
#include "common/kx.h"

#include <stdbool.h>

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
