/* src/schema.c — a value checked against a JSON Schema (draft 7); see
 * schema.h for the keywords.  The official test suite (Debian's
 * json-schema-test-suite) runs against it: tests/unit_schema.c. */
#include "private.h"
#include "schema.h"

#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Patterns compiled once in a check, at most this many kept. */
#define RE_CACHE 16

typedef struct {
	const json_t *root; /* the document a $ref points into */
	char *why;
	size_t size;
	const char *name; /* the value's name, or NULL */
	int depth;
	bool quiet;          /* inside anyOf, oneOf, not, if, contains: no message */
	unsigned long steps; /* the work done, against KBOX__SCHEMA_STEPS */
	struct {
		const char *pattern; /* (the schema's string, borrowed) */
		regex_t re;
	} re[RE_CACHE];
	int n_re;
} ctx_t;

enum { OK = 0, INVALID = 1, BAD = -1 };

#define PATH_MAX_LEN 256

static int check(ctx_t *c, const json_t *s, const json_t *v, char *path, size_t len);

const char *kbox__schema_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_NULL:
		return "None";
	case JSON_TRUE:
	case JSON_FALSE:
		return "bool";
	case JSON_INTEGER:
		return "int";
	case JSON_REAL:
		return "float";
	case JSON_STRING:
		return "str";
	case JSON_ARRAY:
		return "list";
	default:
		return "dict";
	}
}

/* The path as a message names it. */
static const char *shown(const ctx_t *c, const char *path)
{
	return *path ? path : c->name ? c->name : "the value";
}

KBOX_PRINTF(4, 5)
static int fail(ctx_t *c, int rc, const char *path, const char *fmt, ...)
{
	va_list ap;
	size_t n;
	if (c->quiet && rc == INVALID)
		return rc;
	n = (size_t)snprintf(c->why, c->size, "%s ", shown(c, path));
	if (n >= c->size)
		return rc;
	va_start(ap, fmt);
	vsnprintf(c->why + n, c->size - n, fmt, ap);
	va_end(ap);
	return rc;
}

KBOX_PRINTF(2, 3)
static int bad(ctx_t *c, const char *fmt, ...)
{
	va_list ap;
	size_t n = (size_t)snprintf(c->why, c->size, "the schema cannot be used: ");
	if (n < c->size) {
		va_start(ap, fmt);
		vsnprintf(c->why + n, c->size - n, fmt, ap);
		va_end(ap);
	}
	return BAD;
}

/* Equality as JSON Schema has it: 1 and 1.0 are the same number. */
static bool equal(const json_t *a, const json_t *b)
{
	if (json_is_number(a) && json_is_number(b))
		return json_number_value(a) == json_number_value(b) &&
		       (!json_is_integer(a) || !json_is_integer(b) ||
		        json_integer_value(a) == json_integer_value(b));
	if (json_typeof(a) != json_typeof(b))
		return false;
	if (json_is_array(a)) {
		size_t n = json_array_size(a);
		if (n != json_array_size(b))
			return false;
		for (size_t i = 0; i < n; i++)
			if (!equal(json_array_get(a, i), json_array_get(b, i)))
				return false;
		return true;
	}
	if (json_is_object(a)) {
		const char *k;
		json_t *x;
		if (json_object_size(a) != json_object_size(b))
			return false;
		json_object_foreach((json_t *)a, k, x)
		{
			json_t *y = json_object_get(b, k);
			if (!y || !equal(x, y))
				return false;
		}
		return true;
	}
	return json_equal(a, b);
}

static bool is_type(const json_t *v, const char *t)
{
	if (strcmp(t, "integer") == 0)
		return json_is_integer(v) || (json_is_real(v) && isfinite(json_real_value(v)) &&
		                              floor(json_real_value(v)) == json_real_value(v));
	if (strcmp(t, "number") == 0)
		return json_is_number(v);
	if (strcmp(t, "string") == 0)
		return json_is_string(v);
	if (strcmp(t, "object") == 0)
		return json_is_object(v);
	if (strcmp(t, "array") == 0)
		return json_is_array(v);
	if (strcmp(t, "boolean") == 0)
		return json_is_boolean(v);
	if (strcmp(t, "null") == 0)
		return json_is_null(v);
	return false;
}

static bool known_type(const char *t)
{
	static const char *const all[] = {"integer", "number",  "string", "object",
	                                  "array",   "boolean", "null",   NULL};
	for (size_t i = 0; all[i]; i++)
		if (strcmp(t, all[i]) == 0)
			return true;
	return false;
}

/* "a string", "an integer", ... */
/* JSON type T as a model reading Python knows it, with its article:
 * "a string", "an integer", "a dict", "None". */
static const char *type_words(const char *t)
{
	static const struct {
		const char *json, *words;
	} w[] = {{"string", "a string"},   {"integer", "an integer"}, {"number", "a number"},
	         {"boolean", "a boolean"}, {"array", "a list"},       {"object", "a dict"},
	         {"null", "None"}};
	for (size_t i = 0; i < sizeof w / sizeof *w; i++)
		if (strcmp(t, w[i].json) == 0)
			return w[i].words;
	return t;
}

static int check_type(ctx_t *c, const json_t *t, const json_t *v, const char *path)
{
	char want[160] = "";
	size_t i;
	json_t *x;
	if (json_is_string(t)) {
		if (!known_type(json_string_value(t)))
			return bad(c, "\"type\" is \"%s\", no JSON type", json_string_value(t));
		if (is_type(v, json_string_value(t)))
			return OK;
		return fail(c, INVALID, path, "must be %s, got %s",
		            type_words(json_string_value(t)), kbox__schema_type_name(v));
	}
	if (!json_is_array(t))
		return bad(c, "\"type\" is neither a string nor an array");
	json_array_foreach(t, i, x)
	{
		if (!json_is_string(x) || !known_type(json_string_value(x)))
			return bad(c, "\"type\" holds something that is no JSON type");
		if (is_type(v, json_string_value(x)))
			return OK;
		snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s",
		         i == 0                        ? ""
		         : i + 1 == json_array_size(t) ? " or "
		                                       : ", ",
		         type_words(json_string_value(x)));
	}
	return fail(c, INVALID, path, "must be %s, got %s", want, kbox__schema_type_name(v));
}

/* PATH with ".KEY" (or KEY at the root), or "[I]", into BUF. */
static size_t child_key(char *path, size_t len, const char *key)
{
	int n = snprintf(path + len, PATH_MAX_LEN - len, "%s%s", len ? "." : "", key);
	return n < 0 || (size_t)n >= PATH_MAX_LEN - len ? PATH_MAX_LEN - 1 : len + (size_t)n;
}

static size_t child_index(char *path, size_t len, size_t i)
{
	int n = snprintf(path + len, PATH_MAX_LEN - len, "[%zu]", i);
	return n < 0 || (size_t)n >= PATH_MAX_LEN - len ? PATH_MAX_LEN - 1 : len + (size_t)n;
}

/* Check V against S quietly: OK, INVALID or BAD (WHY set). */
static int quietly(ctx_t *c, const json_t *s, const json_t *v, char *path, size_t len)
{
	bool was = c->quiet;
	int rc;
	c->quiet = true;
	rc = check(c, s, v, path, len);
	c->quiet = was;
	path[len] = '\0';
	return rc;
}

static size_t code_points(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* An escape \C of ECMA-262 that stands for one character: it, or 0
 * (none: a class escape, a back-reference, \b, \u..., which POSIX does
 * not have; or NUL). */
static char escaped_char(char c)
{
	switch (c) {
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 't':
		return '\t';
	case 'f':
		return '\f';
	case 'v':
		return '\v';
	default:
		/* punctuation stands for itself */
		return (c >= 0x21 && c <= 0x7e &&
		        !((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
		          (c >= 'a' && c <= 'z')))
		               ? c
		               : 0;
	}
}

/* The class escapes, outside brackets and inside them (NULL: none). */
static const struct {
	char c;
	const char *out, *in;
} class_esc[] = {{'d', "[0-9]", "0-9"},
                 {'w', "[A-Za-z0-9_]", "A-Za-z0-9_"},
                 {'s', "[[:space:]]", "[:space:]"},
                 {'D', "[^0-9]", NULL},
                 {'W', "[^A-Za-z0-9_]", NULL},
                 {'S', "[^[:space:]]", NULL}};

/* Append N bytes of S to OUT (SIZE bytes, *LEN used): false when no room. */
static bool put(char *out, size_t size, size_t *len, const char *s, size_t n)
{
	if (*len + n + 1 > size)
		return false;
	memcpy(out + *len, s, n);
	*len += n;
	return true;
}

/* The bracket expression at *P (its "["): as POSIX has it, onto OUT; *P
 * is left at its "]".  ECMA's escapes in it become what they stand for,
 * "]" is put first and "-" last, where POSIX reads them as themselves.
 * False when it cannot be said so. */
static bool bracket(const char **pp, char *out, size_t size, size_t *len)
{
	const char *p = *pp + 1;
	char body[512];
	size_t n = 0;
	bool neg = false, close = false, dash = false, caret = false;

	if (*p == '^')
		neg = true, p++;
	for (; *p && !(*p == ']'); p++) {
		char c = *p, e;
		if (c == '[' && p[1] == ':') { /* a POSIX class, as it is */
			const char *end = strstr(p, ":]");
			if (!end || !put(body, sizeof body, &n, p, (size_t)(end + 2 - p)))
				return false;
			p = end + 1;
			continue;
		}
		if (c == '\\') {
			size_t i;
			if (!p[1])
				return false;
			for (i = 0;
			     i < sizeof class_esc / sizeof *class_esc && class_esc[i].c != p[1];
			     i++)
				;
			if (i < sizeof class_esc / sizeof *class_esc) {
				if (!class_esc[i].in || !put(body, sizeof body, &n, class_esc[i].in,
				                             strlen(class_esc[i].in)))
					return false;
				p++;
				continue;
			}
			if (!(e = escaped_char(p[1])))
				return false;
			c = e;
			p++;
		} else if (c == '-' && n > 0 && p[1] != ']') {
			/* a range: its end, escaped or not */
			char hi = p[1];
			if (hi == '\\' && !(hi = escaped_char(p[2])))
				return false;
			if (hi == ']' || hi == '-' || hi == '^' || hi == '[')
				return false;
			if (!put(body, sizeof body, &n, "-", 1) ||
			    !put(body, sizeof body, &n, &hi, 1))
				return false;
			p += p[1] == '\\' ? 2 : 1;
			continue;
		}
		/* ]  -  ^ go where POSIX takes them as themselves */
		if (c == ']')
			close = true;
		else if (c == '-')
			dash = true;
		else if (c == '^')
			caret = true;
		else if (!put(body, sizeof body, &n, &c, 1))
			return false;
	}
	if (*p != ']')
		return false;
	*pp = p;
	if (!n && !dash && !close && caret && !neg) /* [\^]: a ^ alone */
		return put(out, size, len, "\\^", 2);
	return put(out, size, len, "[", 1) && (!neg || put(out, size, len, "^", 1)) &&
	       (!close || put(out, size, len, "]", 1)) && put(out, size, len, body, n) &&
	       (!caret || put(out, size, len, "^", 1)) && (!dash || put(out, size, len, "-", 1)) &&
	       put(out, size, len, "]", 1) && (n || close || caret || dash || !neg);
}

/* PATTERN, an ECMA-262 regular expression (JSON Schema's dialect), as a
 * POSIX extended one into OUT (SIZE bytes): the class escapes \d \w \s
 * (and \D \W \S outside brackets) become the classes they stand for, the
 * escapes of one character (\n, \., \/, \-, ...) that character, and a
 * bracket expression is written as POSIX reads it.  False when it cannot
 * be said so exactly: what POSIX does not have (\b, \u, back-references,
 * lookaround, which regcomp refuses besides), or no room. */
static bool ecma_to_ere(const char *pattern, char *out, size_t size)
{
	size_t n = 0;
	for (const char *p = pattern; *p; p++) {
		if (*p == '[') {
			if (!bracket(&p, out, size, &n))
				return false;
		} else if (*p == '\\') {
			size_t i;
			char e;
			for (i = 0;
			     i < sizeof class_esc / sizeof *class_esc && class_esc[i].c != p[1];
			     i++)
				;
			if (i < sizeof class_esc / sizeof *class_esc) {
				if (!put(out, size, &n, class_esc[i].out, strlen(class_esc[i].out)))
					return false;
			} else if (!(e = escaped_char(p[1]))) {
				return false;
			} else if (e == '\n' || e == '\r' || e == '\t' || e == '\f' || e == '\v' ||
			           e == '/' || e == '-' || e == '"' || e == '\'' || e == ',' ||
			           e == ':' || e == '=' || e == '!' || e == '<' || e == '>' ||
			           e == '#' || e == '%' || e == '&' || e == '@' || e == '`' ||
			           e == '~' || e == ';' || e == '_') {
				/* what is no operator in POSIX: the character */
				if (!put(out, size, &n, &e, 1))
					return false;
			} else if (!put(out, size, &n, p, 2)) { /* \. \* \( ...: as it is */
				return false;
			}
			p++;
		} else if (!put(out, size, &n, p, 1)) {
			return false;
		}
	}
	out[n] = '\0';
	return true;
}

static int matches(ctx_t *c, const char *pattern, const char *text)
{
	regex_t re, *rp = &re;
	char ere[1024];
	int rc;
	c->steps += 100 + strlen(text) / 8;
	for (int i = 0; i < c->n_re; i++)
		if (c->re[i].pattern == pattern)
			return regexec(&c->re[i].re, text, 0, NULL, 0) == 0 ? 1 : 0;
	if (!ecma_to_ere(pattern, ere, sizeof ere) ||
	    regcomp(&re, ere, REG_EXTENDED | REG_NOSUB) != 0)
		return bad(c, "the pattern \"%s\" is no regular expression kbox can use", pattern);
	if (c->n_re < RE_CACHE) {
		c->re[c->n_re].pattern = pattern;
		c->re[c->n_re].re = re;
		rp = &c->re[c->n_re++].re;
		return regexec(rp, text, 0, NULL, 0) == 0 ? 1 : 0;
	}
	rc = regexec(&re, text, 0, NULL, 0) == 0 ? 1 : 0;
	regfree(&re);
	return rc;
}

/* A non-negative integer keyword of S, or -1 when absent. */
static int count_kw(ctx_t *c, const json_t *s, const char *kw, long long *out)
{
	json_t *x = json_object_get(s, kw);
	*out = -1;
	if (!x)
		return OK;
	if (!is_type(x, "integer") || json_number_value(x) < 0)
		return bad(c, "\"%s\" is not a non-negative integer", kw);
	/* (a bound past any length a value can have: no cast overflows) */
	*out = json_number_value(x) > 1e15 ? (long long)1e15 : (long long)json_number_value(x);
	return OK;
}

static int check_number(ctx_t *c, const json_t *s, const json_t *v, const char *path)
{
	double x = json_number_value(v), m;
	static const char *const kw[] = {"minimum", "maximum", "exclusiveMinimum",
	                                 "exclusiveMaximum", NULL};
	static const char *const says[] = {">=", "<=", ">", "<"};
	for (size_t i = 0; kw[i]; i++) {
		json_t *b = json_object_get(s, kw[i]);
		bool broken;
		if (!b)
			continue;
		if (!json_is_number(b))
			return bad(c, "\"%s\" is not a number", kw[i]);
		m = json_number_value(b);
		broken = i == 0 ? x < m : i == 1 ? x > m : i == 2 ? x <= m : x >= m;
		if (broken)
			return fail(c, INVALID, path, "must be %s %.17g, got %.17g", says[i], m, x);
	}
	json_t *mo = json_object_get(s, "multipleOf");
	if (mo) {
		double q;
		if (!json_is_number(mo) || json_number_value(mo) <= 0)
			return bad(c, "\"multipleOf\" is not a number above 0");
		m = json_number_value(mo);
		q = x / m;
		if (!isfinite(q) || fabs(q - nearbyint(q)) > 1e-9 * fmax(1, fabs(q)))
			return fail(c, INVALID, path, "must be a multiple of %.17g, got %.17g", m,
			            x);
	}
	return OK;
}

static int check_string(ctx_t *c, const json_t *s, const json_t *v, const char *path)
{
	long long lo, hi;
	size_t n = code_points(json_string_value(v));
	json_t *p = json_object_get(s, "pattern");
	if (count_kw(c, s, "minLength", &lo) < 0 || count_kw(c, s, "maxLength", &hi) < 0)
		return BAD;
	if (lo >= 0 && (long long)n < lo)
		return fail(c, INVALID, path, "must be at least %lld characters long, got %zu", lo,
		            n);
	if (hi >= 0 && (long long)n > hi)
		return fail(c, INVALID, path, "must be at most %lld characters long, got %zu", hi,
		            n);
	if (p) {
		int m;
		if (!json_is_string(p))
			return bad(c, "\"pattern\" is not a string");
		if ((m = matches(c, json_string_value(p), json_string_value(v))) < 0)
			return BAD;
		if (!m)
			return fail(c, INVALID, path, "must match the pattern %s",
			            json_string_value(p));
	}
	return OK;
}

static int check_array(ctx_t *c, const json_t *s, const json_t *v, char *path, size_t len)
{
	long long lo, hi;
	size_t n = json_array_size(v), i, from = 0;
	json_t *items = json_object_get(s, "items"), *x, *u = json_object_get(s, "uniqueItems");
	json_t *contains = json_object_get(s, "contains");
	int rc;
	if (count_kw(c, s, "minItems", &lo) < 0 || count_kw(c, s, "maxItems", &hi) < 0)
		return BAD;
	if (lo >= 0 && (long long)n < lo)
		return fail(c, INVALID, path, "must have at least %lld items, got %zu", lo, n);
	if (hi >= 0 && (long long)n > hi)
		return fail(c, INVALID, path, "must have at most %lld items, got %zu", hi, n);
	if (u && json_is_true(u))
		for (i = 0; i < n; i++)
			for (size_t j = i + 1; j < n; j++) {
				if (++c->steps > KBOX__SCHEMA_STEPS)
					return fail(
					        c, INVALID, path,
					        "is too costly to check for unique items (%zu of them)",
					        n);
				if (equal(json_array_get(v, i), json_array_get(v, j)))
					return fail(
					        c, INVALID, path,
					        "must have unique items: [%zu] and [%zu] are equal",
					        i, j);
			}
	if (json_is_array(items)) {
		json_t *more = json_object_get(s, "additionalItems");
		from = json_array_size(items);
		for (i = 0; i < n && i < from; i++)
			if ((rc = check(c, json_array_get(items, i), json_array_get(v, i), path,
			                child_index(path, len, i))) != OK)
				return rc;
		path[len] = '\0';
		if (more)
			for (i = from; i < n; i++)
				if ((rc = check(c, more, json_array_get(v, i), path,
				                child_index(path, len, i))) != OK)
					return rc;
	} else if (items) {
		json_array_foreach(
		        v, i, x) if ((rc = check(c, items, x, path, child_index(path, len, i))) !=
		                     OK) return rc;
	}
	path[len] = '\0';
	if (contains) {
		bool found = false;
		json_array_foreach(v, i, x)
		{
			if ((rc = quietly(c, contains, x, path, child_index(path, len, i))) == BAD)
				return BAD;
			if (rc == OK) {
				found = true;
				break;
			}
		}
		if (!found)
			return fail(c, INVALID, path,
			            "must contain an item that the schema of "
			            "\"contains\" allows");
	}
	return OK;
}

static int check_object(ctx_t *c, const json_t *s, const json_t *v, char *path, size_t len)
{
	json_t *props = json_object_get(s, "properties"),
	       *pp = json_object_get(s, "patternProperties");
	json_t *more = json_object_get(s, "additionalProperties"),
	       *req = json_object_get(s, "required");
	json_t *names = json_object_get(s, "propertyNames"),
	       *deps = json_object_get(s, "dependencies");
	const char *k;
	json_t *x;
	size_t i;
	long long lo, hi;
	int rc;

	if (count_kw(c, s, "minProperties", &lo) < 0 || count_kw(c, s, "maxProperties", &hi) < 0)
		return BAD;
	if ((props && !json_is_object(props)) || (pp && !json_is_object(pp)) ||
	    (req && !json_is_array(req)) || (deps && !json_is_object(deps)))
		return bad(c, "\"properties\", \"patternProperties\", \"required\" or "
		              "\"dependencies\" has the wrong type");
	json_array_foreach(req, i, x)
	{
		if (!json_is_string(x))
			return bad(c, "\"required\" holds something that is not a string");
		if (!json_object_get(v, json_string_value(x))) {
			char where[PATH_MAX_LEN];
			memcpy(where, path, len + 1);
			child_key(where, len, json_string_value(x));
			return fail(c, INVALID, where, "is missing (it is required)");
		}
	}
	if (lo >= 0 && (long long)json_object_size(v) < lo)
		return fail(c, INVALID, path, "must have at least %lld properties, got %zu", lo,
		            json_object_size(v));
	if (hi >= 0 && (long long)json_object_size(v) > hi)
		return fail(c, INVALID, path, "must have at most %lld properties, got %zu", hi,
		            json_object_size(v));
	json_object_foreach((json_t *)v, k, x)
	{
		bool covered = false;
		json_t *sub = json_object_get(props, k), *ps;
		const char *pat;
		size_t at = child_key(path, len, k);
		if (names) {
			json_t *key = json_string(k);
			rc = quietly(c, names, key, path, at);
			json_decref(key);
			if (rc != OK)
				return rc == BAD ? BAD
				                 : fail(c, INVALID, path,
				                        "is not a name \"propertyNames\" "
				                        "allows");
		}
		if (sub) {
			covered = true;
			if ((rc = check(c, sub, x, path, at)) != OK)
				return rc;
		}
		json_object_foreach(pp, pat, ps)
		{
			int m = matches(c, pat, k);
			if (m < 0)
				return BAD;
			if (m) {
				covered = true;
				if ((rc = check(c, ps, x, path, at)) != OK)
					return rc;
			}
		}
		if (!covered && more) {
			if (json_is_false(more)) {
				char allowed[200] = "";
				const char *pk;
				json_t *pv;
				json_object_foreach(props, pk, pv) snprintf(
				        allowed + strlen(allowed), sizeof allowed - strlen(allowed),
				        "%s%s", allowed[0] ? ", " : "", pk);
				path[at] = '\0';
				return fail(c, INVALID, path, "is not expected%s%s%s",
				            allowed[0] ? " (expected: " : "", allowed,
				            allowed[0] ? ")" : "");
			}
			if ((rc = check(c, more, x, path, at)) != OK)
				return rc;
		}
		path[len] = '\0';
	}
	json_object_foreach(deps, k, x)
	{
		if (!json_object_get(v, k))
			continue;
		if (json_is_array(x)) {
			json_t *d;
			json_array_foreach(x, i, d) if (!json_is_string(d)) return bad(
			        c, "\"dependencies\" holds a list with something not a string");
			else if (!json_object_get(v, json_string_value(d))) return fail(
			        c, INVALID, path, "must have %s, since it has %s",
			        json_string_value(d), k);
		} else if ((rc = check(c, x, v, path, len)) != OK)
			return rc;
	}
	return OK;
}

/* A JSON pointer REF ("#", "#/a/b") into the root: the schema, or NULL. */
static const json_t *resolve(const ctx_t *c, const char *ref)
{
	const json_t *at = c->root;
	char part[256];
	if (ref[0] != '#')
		return NULL;
	ref++;
	while (*ref == '/') {
		size_t n = 0;
		ref++;
		while (*ref && *ref != '/' && n + 1 < sizeof part) {
			unsigned hex;
			if (ref[0] == '~' && (ref[1] == '0' || ref[1] == '1')) {
				part[n++] = ref[1] == '0' ? '~' : '/';
				ref += 2;
			} else if (ref[0] == '%' && isxdigit((unsigned char)ref[1]) &&
			           isxdigit((unsigned char)ref[2]) &&
			           sscanf(ref + 1, "%2x", &hex) == 1) {
				/* (a URI fragment: percent-encoded) */
				part[n++] = (char)hex;
				ref += 3;
			} else
				part[n++] = *ref++;
		}
		part[n] = '\0';
		if (json_is_object(at))
			at = json_object_get(at, part);
		else if (json_is_array(at)) {
			char *end;
			unsigned long i = strtoul(part, &end, 10);
			at = *part && !*end ? json_array_get(at, i) : NULL;
		} else
			at = NULL;
		if (!at)
			return NULL;
	}
	return *ref ? NULL : at;
}

static int check_combinators(ctx_t *c, const json_t *s, const json_t *v, char *path, size_t len)
{
	json_t *all = json_object_get(s, "allOf"), *any = json_object_get(s, "anyOf");
	json_t *one = json_object_get(s, "oneOf"), *not = json_object_get(s, "not");
	json_t *cond = json_object_get(s, "if"), *x;
	size_t i, good = 0;
	int rc;
	if ((all && !json_is_array(all)) || (any && !json_is_array(any)) ||
	    (one && !json_is_array(one)))
		return bad(c, "\"allOf\", \"anyOf\" or \"oneOf\" is not an array");
	json_array_foreach(all, i, x) if ((rc = check(c, x, v, path, len)) != OK) return rc;
	if (any) {
		json_array_foreach(any, i, x)
		{
			if ((rc = quietly(c, x, v, path, len)) == BAD)
				return BAD;
			if (rc == OK)
				break;
		}
		if (i == json_array_size(any))
			return fail(c, INVALID, path,
			            "matches none of the %zu alternatives \"anyOf\" "
			            "gives",
			            i);
	}
	if (one) {
		json_array_foreach(one, i, x)
		{
			if ((rc = quietly(c, x, v, path, len)) == BAD)
				return BAD;
			good += rc == OK;
		}
		if (good != 1)
			return fail(
			        c, INVALID, path,
			        "must match exactly one of the %zu alternatives \"oneOf\" gives, "
			        "matches %zu",
			        json_array_size(one), good);
	}
	if (not ) {
		if ((rc = quietly(c, not, v, path, len)) == BAD)
			return BAD;
		if (rc == OK)
			return fail(c, INVALID, path, "must not match the schema \"not\" gives");
	}
	if (cond) {
		json_t *then = json_object_get(s, "then"), *otherwise = json_object_get(s, "else");
		if ((rc = quietly(c, cond, v, path, len)) == BAD)
			return BAD;
		if (rc == OK && then)
			return check(c, then, v, path, len);
		if (rc != OK && otherwise)
			return check(c, otherwise, v, path, len);
	}
	return OK;
}

static int check(ctx_t *c, const json_t *s, const json_t *v, char *path, size_t len)
{
	json_t *x;
	int rc;

	if (json_is_true(s))
		return OK;
	if (json_is_false(s))
		return fail(c, INVALID, path, "is not allowed here");
	if (!json_is_object(s))
		return bad(c, "a schema is neither an object nor a boolean");
	if (++c->depth > KBOX__SCHEMA_DEPTH) {
		c->depth--;
		return fail(c, INVALID, path, "is nested deeper than %d levels",
		            KBOX__SCHEMA_DEPTH);
	}
	if (++c->steps > KBOX__SCHEMA_STEPS) {
		c->depth--;
		return fail(c, INVALID, path,
		            "is too costly to check (past %d steps of the schema)",
		            KBOX__SCHEMA_STEPS);
	}
	/* (draft 7: beside $ref, every other keyword is ignored) */
	if ((x = json_object_get(s, "$ref"))) {
		const json_t *to = json_is_string(x) ? resolve(c, json_string_value(x)) : NULL;
		rc = to ? check(c, to, v, path, len)
		        : bad(c, "\"$ref\": %s is no place in this schema kbox can follow",
		              json_is_string(x) ? json_string_value(x) : "(not a string)");
		c->depth--;
		return rc;
	}
	rc = OK;
	if ((x = json_object_get(s, "type")))
		rc = check_type(c, x, v, path);
	if (rc == OK && (x = json_object_get(s, "enum"))) {
		size_t i;
		json_t *e;
		bool found = false;
		if (!json_is_array(x))
			rc = bad(c, "\"enum\" is not an array");
		else {
			json_array_foreach(x, i, e) if (equal(e, v)) found = true;
			if (!found) {
				char *list = json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY);
				char *got = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
				rc = fail(c, INVALID, path, "must be one of %.160s, got %.60s",
				          list ? list : "the enum", got ? got : "another value");
				free(list);
				free(got);
			}
		}
	}
	if (rc == OK && (x = json_object_get(s, "const")) && !equal(x, v)) {
		char *want = json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY);
		rc = fail(c, INVALID, path, "must be %.160s", want ? want : "the constant");
		free(want);
	}
	if (rc == OK && json_is_number(v))
		rc = check_number(c, s, v, path);
	else if (rc == OK && json_is_string(v))
		rc = check_string(c, s, v, path);
	else if (rc == OK && json_is_array(v))
		rc = check_array(c, s, v, path, len);
	else if (rc == OK && json_is_object(v))
		rc = check_object(c, s, v, path, len);
	path[len] = '\0';
	if (rc == OK)
		rc = check_combinators(c, s, v, path, len);
	path[len] = '\0';
	c->depth--;
	return rc;
}

int kbox__schema_check(const json_t *schema, const json_t *value, const char *name, char *why,
                       size_t size)
{
	char path[PATH_MAX_LEN] = "";
	ctx_t c = {schema, why, size, name, 0, false, 0, {{0}}, 0};
	int rc;
	if (size)
		why[0] = '\0';
	rc = check(&c, schema, value, path, 0);
	for (int i = 0; i < c.n_re; i++)
		regfree(&c.re[i].re);
	return rc;
}

/* ---- a schema, checked itself ---- */

/* Is X a non-negative integer? */
static bool count_ok(const json_t *x)
{
	return is_type(x, "integer") && json_number_value(x) >= 0;
}

static int lint(ctx_t *c, const json_t *s, const char *where);

/* Each schema in the object or array X (keyword KW of WHERE). */
static int lint_each(ctx_t *c, const json_t *x, const char *kw, bool array, const char *where)
{
	char at[PATH_MAX_LEN];
	const char *k;
	json_t *e;
	size_t i;
	int rc;
	if (array ? !json_is_array(x) || json_array_size(x) == 0 : !json_is_object(x))
		return bad(c, "\"%s\"%s%s must be %s of schemas", kw, *where ? " in " : "", where,
		           array ? "a non-empty array" : "an object");
	if (array) {
		json_array_foreach(x, i, e)
		{
			snprintf(at, sizeof at, "%s/%s/%zu", where, kw, i);
			if ((rc = lint(c, e, at)) != OK)
				return rc;
		}
		return OK;
	}
	json_object_foreach((json_t *)x, k, e)
	{
		snprintf(at, sizeof at, "%s/%s/%s", where, kw, k);
		if (strcmp(kw, "patternProperties") == 0 && matches(c, k, "") < 0)
			return BAD;
		if ((rc = lint(c, e, at)) != OK)
			return rc;
	}
	return OK;
}

/* Check schema S (at WHERE, a JSON pointer for messages): each keyword
 * kbox reads has the type draft 7 gives it, a pattern compiles, a $ref
 * leads somewhere. */
static int lint(ctx_t *c, const json_t *s, const char *where)
{
	static const char *const schemas[] = {"additionalProperties",
	                                      "additionalItems",
	                                      "contains",
	                                      "propertyNames",
	                                      "not",
	                                      "if",
	                                      "then",
	                                      "else"};
	static const char *const maps[] = {"properties", "patternProperties", "definitions",
	                                   "$defs"};
	static const char *const lists[] = {"allOf", "anyOf", "oneOf"};
	static const char *const numbers[] = {"minimum", "maximum", "exclusiveMinimum",
	                                      "exclusiveMaximum", "multipleOf"};
	static const char *const counts[] = {"minLength", "maxLength",     "minItems",
	                                     "maxItems",  "minProperties", "maxProperties"};
	const char *in = *where ? " in " : "";
	char at[PATH_MAX_LEN];
	json_t *x, *e;
	size_t i;
	int rc = OK;

	if (json_is_boolean(s))
		return OK;
	if (!json_is_object(s))
		return bad(c, "%s%sa schema is neither an object nor a boolean", where,
		           *where ? ": " : "");
	if (++c->depth > KBOX__SCHEMA_DEPTH) {
		c->depth--;
		return bad(c, "schemas are nested deeper than %d levels", KBOX__SCHEMA_DEPTH);
	}
	if ((x = json_object_get(s, "$ref")) &&
	    !(json_is_string(x) && resolve(c, json_string_value(x))))
		rc = bad(c, "\"$ref\"%s%s: %s is no place in this schema kbox can follow", in,
		         where, json_is_string(x) ? json_string_value(x) : "(not a string)");
	if (rc == OK && (x = json_object_get(s, "type"))) {
		bool ok = json_is_string(x) ? known_type(json_string_value(x))
		                            : json_is_array(x) && json_array_size(x) > 0;
		json_array_foreach(x, i, e)
		        ok = ok && json_is_string(e) && known_type(json_string_value(e));
		if (!ok)
			rc = json_is_string(x)
			             ? bad(c, "\"type\"%s%s is \"%s\", no JSON type", in, where,
			                   json_string_value(x))
			             : bad(c, "\"type\"%s%s must be a JSON type or a list of them",
			                   in, where);
	}
	for (i = 0; rc == OK && i < sizeof schemas / sizeof *schemas; i++)
		if ((x = json_object_get(s, schemas[i]))) {
			snprintf(at, sizeof at, "%s/%s", where, schemas[i]);
			rc = lint(c, x, at);
		}
	for (i = 0; rc == OK && i < sizeof maps / sizeof *maps; i++)
		if ((x = json_object_get(s, maps[i])))
			rc = lint_each(c, x, maps[i], false, where);
	for (i = 0; rc == OK && i < sizeof lists / sizeof *lists; i++)
		if ((x = json_object_get(s, lists[i])))
			rc = lint_each(c, x, lists[i], true, where);
	if (rc == OK && (x = json_object_get(s, "items"))) {
		snprintf(at, sizeof at, "%s/items", where);
		rc = json_is_array(x) ? lint_each(c, x, "items", true, where) : lint(c, x, at);
	}
	for (i = 0; rc == OK && i < sizeof numbers / sizeof *numbers; i++)
		if ((x = json_object_get(s, numbers[i])) &&
		    (!json_is_number(x) ||
		     (strcmp(numbers[i], "multipleOf") == 0 && !(json_number_value(x) > 0))))
			rc = bad(c, "\"%s\"%s%s must be a %snumber", numbers[i], in, where,
			         strcmp(numbers[i], "multipleOf") == 0 ? "positive " : "");
	for (i = 0; rc == OK && i < sizeof counts / sizeof *counts; i++)
		if ((x = json_object_get(s, counts[i])) && !count_ok(x))
			rc = bad(c, "\"%s\"%s%s must be a non-negative integer", counts[i], in,
			         where);
	if (rc == OK && (x = json_object_get(s, "required"))) {
		bool ok = json_is_array(x);
		json_array_foreach(x, i, e) ok = ok && json_is_string(e);
		if (!ok)
			rc = bad(c, "\"required\"%s%s must be an array of names", in, where);
	}
	if (rc == OK && (x = json_object_get(s, "enum")) && !json_is_array(x))
		rc = bad(c, "\"enum\"%s%s must be an array", in, where);
	if (rc == OK && (x = json_object_get(s, "uniqueItems")) && !json_is_boolean(x))
		rc = bad(c, "\"uniqueItems\"%s%s must be true or false", in, where);
	if (rc == OK && (x = json_object_get(s, "pattern")))
		rc = json_is_string(x) ? (matches(c, json_string_value(x), "") < 0 ? BAD : OK)
		                       : bad(c, "\"pattern\"%s%s must be a string", in, where);
	if (rc == OK && (x = json_object_get(s, "dependencies"))) {
		const char *k;
		if (!json_is_object(x))
			rc = bad(c, "\"dependencies\"%s%s must be an object", in, where);
		json_object_foreach(x, k, e)
		{
			if (rc != OK)
				break;
			snprintf(at, sizeof at, "%s/dependencies/%s", where, k);
			if (json_is_array(e)) {
				size_t j;
				json_t *n;
				json_array_foreach(e, j, n) if (!json_is_string(n)) rc = bad(
				        c, "\"dependencies\"%s%s must list names", in, where);
			} else {
				rc = lint(c, e, at);
			}
		}
	}
	c->depth--;
	return rc;
}

int kbox__schema_lint(const json_t *schema, char *why, size_t size)
{
	ctx_t c = {schema, why, size, NULL, 0, false, 0, {{0}}, 0};
	int rc;
	if (size)
		why[0] = '\0';
	rc = lint(&c, schema, "") == OK ? 0 : -1;
	for (int i = 0; i < c.n_re; i++)
		regfree(&c.re[i].re);
	return rc;
}
