/* src/mcp/json_load.c — mcp_json_loadb (json_load.h). */
#include "config.h"
#include "mcp/json_load.h"
#include "common/kx.h"

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

json_t *mcp_json_loadb(const char *buf, size_t len, size_t flags, json_error_t *err)
{
	json_error_t first, again;
	char *fixed = NULL;
	const char *text = buf;
	json_t *j = json_loadb(buf, len, flags, &first);
	/* a lone surrogate, which JSON's grammar allows and jansson does not
	 * take, is U+FFFD, as kbox makes of every string it cannot hold */
	if (!j && len && (fixed = malloc(len))) {
		memcpy(fixed, buf, len);
		if (kx_json_lone_surrogates(fixed, len) > 0) {
			text = fixed;
			if (!(j = json_loadb(text, len, flags, &again)))
				first = again;
		}
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
