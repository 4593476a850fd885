/* src/functions.c — a set of host functions (kbox/functions.h): their
 * definitions checked, the Python stubs a model reads, and the code that
 * defines them in a kernel (src/functions_shim.py).  Their calls are
 * answered by src/calls.c, during an execution. */
#include "private.h"
#include "functions_int.h"
#include "schema.h"
#include "src/functions_shim.h" /* made from src/functions_shim.py */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* Python's keywords (3.11): none may name a function or a parameter
 * ("match", "case" and "type" are names the language allows). */
static const char *const py_keywords[] = {
        "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
        "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
        "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
        "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield",
};

/* The names a function would take from the kernel's code: Python's
 * builtins, kbox_functions' exceptions, IPython's own. */
static const char *const py_taken[] = {
        "ArgumentError",
        "ArithmeticError",
        "AssertionError",
        "AttributeError",
        "BaseException",
        "BaseExceptionGroup",
        "BlockingIOError",
        "BrokenPipeError",
        "BufferError",
        "BytesWarning",
        "CallBudgetExceeded",
        "ChildProcessError",
        "ConnectionAbortedError",
        "ConnectionError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "DeprecationWarning",
        "EOFError",
        "Ellipsis",
        "EncodingWarning",
        "EnvironmentError",
        "Exception",
        "ExceptionGroup",
        "FileExistsError",
        "FileNotFoundError",
        "FloatingPointError",
        "FunctionError",
        "FunctionTimeout",
        "FutureWarning",
        "GeneratorExit",
        "IOError",
        "ImportError",
        "ImportWarning",
        "In",
        "IndentationError",
        "IndexError",
        "InterruptedError",
        "IsADirectoryError",
        "KeyError",
        "KeyboardInterrupt",
        "LookupError",
        "MemoryError",
        "ModuleNotFoundError",
        "NameError",
        "NotADirectoryError",
        "NotImplemented",
        "NotImplementedError",
        "OSError",
        "Out",
        "OverflowError",
        "PendingDeprecationWarning",
        "PermissionError",
        "ProcessLookupError",
        "RecursionError",
        "ReferenceError",
        "ResourceWarning",
        "RuntimeError",
        "RuntimeWarning",
        "StopAsyncIteration",
        "StopIteration",
        "SyntaxError",
        "SyntaxWarning",
        "SystemError",
        "SystemExit",
        "TabError",
        "TimeoutError",
        "TypeError",
        "UnboundLocalError",
        "UnicodeDecodeError",
        "UnicodeEncodeError",
        "UnicodeError",
        "UnicodeTranslateError",
        "UnicodeWarning",
        "UserWarning",
        "ValueError",
        "Warning",
        "ZeroDivisionError",
        "abs",
        "aiter",
        "all",
        "anext",
        "any",
        "ascii",
        "bin",
        "bool",
        "breakpoint",
        "bytearray",
        "bytes",
        "callable",
        "chr",
        "classmethod",
        "compile",
        "complex",
        "copyright",
        "credits",
        "delattr",
        "dict",
        "dir",
        "divmod",
        "enumerate",
        "eval",
        "exec",
        "exit",
        "filter",
        "float",
        "format",
        "frozenset",
        "get_ipython",
        "getattr",
        "globals",
        "hasattr",
        "hash",
        "help",
        "hex",
        "id",
        "input",
        "int",
        "isinstance",
        "issubclass",
        "iter",
        "len",
        "license",
        "list",
        "locals",
        "map",
        "max",
        "memoryview",
        "min",
        "next",
        "object",
        "oct",
        "open",
        "ord",
        "pow",
        "print",
        "property",
        "quit",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "setattr",
        "slice",
        "sorted",
        "staticmethod",
        "str",
        "sum",
        "super",
        "tuple",
        "type",
        "vars",
        "zip",
};

bool kbox__py_name_taken(const char *s)
{
	for (size_t i = 0; i < sizeof py_taken / sizeof *py_taken; i++)
		if (strcmp(s, py_taken[i]) == 0)
			return true;
	return false;
}

bool kbox__py_identifier(const char *s)
{
	if (!s || !*s || strlen(s) > KBOX__FN_NAME_MAX)
		return false;
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return false;
	for (const char *p = s + 1; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	for (size_t i = 0; i < sizeof py_keywords / sizeof *py_keywords; i++)
		if (strcmp(s, py_keywords[i]) == 0)
			return false;
	return true;
}

kbox_functions_t *kbox_functions_new(kbox_error_t *err)
{
	unsigned char r[16];
	kbox_functions_t *self = calloc(1, sizeof *self);
	int n;

	if (!self) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		kbox_error_set_sys(err, "host functions: getrandom");
		free(self);
		return NULL;
	}
	n = snprintf(self->marker, sizeof self->marker, "%s", KBOX__FN_MARKER);
	for (size_t i = 0; i < sizeof r; i++)
		n += snprintf(self->marker + n, sizeof self->marker - (size_t)n, "%02x", r[i]);
	snprintf(self->marker + n, sizeof self->marker - (size_t)n, " ");
	self->max_calls = KBOX_CALLS_DEFAULT;
	self->max_concurrent = KBOX_CALLS_CONCURRENT_DEFAULT;
	return self;
}

void kbox_functions_destroy(kbox_functions_t **self_p)
{
	kbox_functions_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	for (size_t i = 0; i < self->n; i++)
		json_decref(self->fns[i].def);
	free(self->fns);
	free(self);
	*self_p = NULL;
}

/* What is wrong with PARAMS, a function's "parameters": into WHY; 0 when
 * nothing is. */
static int check_params(const json_t *params, char *why, size_t size)
{
	json_t *t = json_object_get(params, "type"), *props = json_object_get(params, "properties");
	json_t *req = json_object_get(params, "required"), *v;
	const char *k;
	size_t i;
	char sw[256];

	if (!json_is_object(params)) {
		snprintf(why, size, "\"parameters\" must be a JSON Schema object");
		return -1;
	}
	if (t && !(json_is_string(t) && strcmp(json_string_value(t), "object") == 0)) {
		snprintf(why, size, "\"parameters\" must have \"type\": \"object\"");
		return -1;
	}
	if (props && !json_is_object(props)) {
		snprintf(why, size, "\"parameters\".\"properties\" must be an object");
		return -1;
	}
	json_object_foreach(props, k, v)
	{
		if (!kbox__py_identifier(k) || k[0] == '_') {
			snprintf(
			        why, size,
			        "the parameter name \"%.64s\" is not a Python identifier (letters, "
			        "digits and _, not a keyword, not starting with _ or a digit)",
			        k);
			return -1;
		}
	}
	if (req && !json_is_array(req)) {
		snprintf(why, size, "\"parameters\".\"required\" must be an array of names");
		return -1;
	}
	json_array_foreach(req, i, v)
	{
		if (!json_is_string(v) || !json_object_get(props, json_string_value(v))) {
			snprintf(why, size,
			         "\"required\" names \"%.64s\", which is not one of \"properties\"",
			         json_is_string(v) ? json_string_value(v) : "(not a string)");
			return -1;
		}
	}
	if (kbox__schema_lint(params, sw, sizeof sw) < 0) {
		snprintf(why, size, "\"parameters\": %s", sw);
		return -1;
	}
	return 0;
}

int kbox_functions_add(kbox_functions_t *self, const json_t *def, kbox_function_cb *run,
                       kbox_call_cancel_cb *cancel, void *arg, kbox_error_t *err)
{
	json_t *name = json_object_get(def, "name"), *desc = json_object_get(def, "description");
	json_t *params = json_object_get(def, "parameters"), *ret = json_object_get(def, "returns");
	const char *n = json_string_value(name);
	char why[512];
	kbox__fn_t *f;

	if (!self || !run)
		return kbox_error_set(err, KBOX_E_INVALID, "host function: no set or no callback");
	if (!json_is_object(def))
		return kbox_error_set(err, KBOX_E_INVALID, "a host function must be a JSON object");
	if (!n)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "a host function needs a \"name\" (a string)");
	if (!kbox__py_identifier(n) || n[0] == '_')
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "host function \"%.64s\": its name is not a Python identifier (letters, "
		        "digits and _, at most %d, not a keyword, not starting with _ or a digit)",
		        n, KBOX__FN_NAME_MAX);
	if (kbox__py_name_taken(n))
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "host function \"%s\": the kernel's code has a %s of that name, "
		        "which the function would hide: give it another name",
		        n, n[0] >= 'A' && n[0] <= 'Z' ? "class" : "builtin");
	for (size_t i = 0; i < self->n; i++)
		if (strcmp(self->fns[i].name, n) == 0)
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "host function \"%s\" is defined twice", n);
	if (self->n >= KBOX_FUNCTIONS_MAX)
		return kbox_error_set(err, KBOX_E_INVALID, "more than %d host functions",
		                      KBOX_FUNCTIONS_MAX);
	if (desc && !json_is_string(desc))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "host function %s: \"description\" must be a string", n);
	if (params && check_params(params, why, sizeof why) < 0)
		return kbox_error_set(err, KBOX_E_INVALID, "host function %s: %s", n, why);
	if (ret && !json_is_object(ret) && !json_is_boolean(ret))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "host function %s: \"returns\" must be a JSON Schema", n);
	if (ret && kbox__schema_lint(ret, why, sizeof why) < 0)
		return kbox_error_set(err, KBOX_E_INVALID, "host function %s: \"returns\": %s", n,
		                      why);
	if (self->n == self->cap) {
		size_t cap = self->cap ? self->cap * 2 : 8;
		kbox__fn_t *v = realloc(self->fns, cap * sizeof *v);
		if (!v)
			return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		self->fns = v;
		self->cap = cap;
	}
	f = &self->fns[self->n];
	memset(f, 0, sizeof *f);
	f->def = json_pack("{s:s}", "name", n);
	if (!f->def || (desc && json_object_set(f->def, "description", desc) < 0) ||
	    (params && json_object_set(f->def, "parameters", params) < 0) ||
	    (ret && json_object_set(f->def, "returns", ret) < 0)) {
		json_decref(f->def);
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	f->name = json_string_value(json_object_get(f->def, "name"));
	f->params = json_object_get(f->def, "parameters");
	f->returns = json_object_get(f->def, "returns");
	f->run = run;
	f->cancel = cancel;
	f->arg = arg;
	self->n++;
	return 0;
}

size_t kbox_functions_count(const kbox_functions_t *self)
{
	return self ? self->n : 0;
}

const json_t *kbox_functions_def(const kbox_functions_t *self, size_t i)
{
	return self && i < self->n ? self->fns[i].def : NULL;
}

void kbox_functions_set_limits(kbox_functions_t *self, size_t max_calls, size_t max_concurrent)
{
	self->max_calls = max_calls ? max_calls : KBOX_CALLS_DEFAULT;
	self->max_concurrent = max_concurrent ? max_concurrent : KBOX_CALLS_CONCURRENT_DEFAULT;
}

void kbox_functions_limits(const kbox_functions_t *self, size_t *max_calls, size_t *max_concurrent)
{
	if (max_calls)
		*max_calls = self->max_calls;
	if (max_concurrent)
		*max_concurrent = self->max_concurrent;
}

void kbox_functions_set_observer(kbox_functions_t *self, kbox_call_observer_cb *observer, void *arg)
{
	self->observer = observer;
	self->observer_arg = arg;
}

const kbox__fn_t *kbox__functions_find(const kbox_functions_t *self, const char *name)
{
	for (size_t i = 0; name && i < self->n; i++)
		if (strcmp(self->fns[i].name, name) == 0)
			return &self->fns[i];
	return NULL;
}

/* ---- Python, written from JSON ---- */

static void py_literal(kx_buf_t *b, const json_t *v);

/* OPEN, the items of the array A as Python literals, ", " between, "]". */
static void py_items(kx_buf_t *b, const char *open, const json_t *a)
{
	size_t i;
	json_t *e;
	kx_buf_appends(b, open);
	json_array_foreach(a, i, e)
	{
		if (i)
			kx_buf_appends(b, ", ");
		py_literal(b, e);
	}
	kx_buf_appends(b, "]");
}

/* V as a Python literal, onto B (JSON's strings and numbers are Python's
 * too; true, false and null are not). */
static void py_literal(kx_buf_t *b, const json_t *v)
{
	const char *k;
	json_t *e;
	size_t i;
	char *s;

	switch (json_typeof(v)) {
	case JSON_TRUE:
		kx_buf_appends(b, "True");
		return;
	case JSON_FALSE:
		kx_buf_appends(b, "False");
		return;
	case JSON_NULL:
		kx_buf_appends(b, "None");
		return;
	case JSON_ARRAY:
		py_items(b, "[", v);
		return;
	case JSON_OBJECT:
		kx_buf_appends(b, "{");
		i = 0;
		json_object_foreach((json_t *)v, k, e)
		{
			json_t *key = json_string(k);
			if (i++)
				kx_buf_appends(b, ", ");
			py_literal(b, key);
			json_decref(key);
			kx_buf_appends(b, ": ");
			py_literal(b, e);
		}
		kx_buf_appends(b, "}");
		return;
	default:
		/* ASCII with \uXXXX escapes: Python reads them the same */
		if ((s = json_dumps(v, JSON_ENCODE_ANY | JSON_ENSURE_ASCII))) {
			kx_buf_appends(b, s);
			free(s);
		}
		return;
	}
}

static void py_hint(kx_buf_t *b, const json_t *s, int depth);

/* The hints of the alternatives in A (an array of schemas), joined. */
static void py_union(kx_buf_t *b, const json_t *a, int depth)
{
	size_t i;
	json_t *e;
	json_array_foreach(a, i, e)
	{
		if (i)
			kx_buf_appends(b, " | ");
		py_hint(b, e, depth + 1);
	}
}

/* The Python type hint of schema S, onto B. */
static void py_hint(kx_buf_t *b, const json_t *s, int depth)
{
	static const struct {
		const char *json, *py;
	} names[] = {{"string", "str"},   {"integer", "int"}, {"number", "float"},
	             {"boolean", "bool"}, {"array", "list"},  {"object", "dict"},
	             {"null", "None"}};
	json_t *t = json_object_get(s, "type"), *en = json_object_get(s, "enum");
	json_t *any = json_object_get(s, "anyOf");

	if (!any)
		any = json_object_get(s, "oneOf");
	if (depth > 8 || !json_is_object(s)) {
		kx_buf_appends(b, "Any");
		return;
	}
	if (json_object_get(s, "const")) {
		kx_buf_appends(b, "Literal[");
		py_literal(b, json_object_get(s, "const"));
		kx_buf_appends(b, "]");
		return;
	}
	if (json_is_array(en) && json_array_size(en) > 0) {
		py_items(b, "Literal[", en);
		return;
	}
	if (json_is_array(any) && json_array_size(any) > 0) {
		py_union(b, any, depth);
		return;
	}
	if (json_is_array(t) && json_array_size(t) > 0) {
		size_t i;
		json_t *e;
		json_array_foreach(t, i, e)
		{
			json_t *one = json_pack("{s:O}", "type", e);
			if (i)
				kx_buf_appends(b, " | ");
			if (json_is_string(e) && strcmp(json_string_value(e), "array") == 0 &&
			    json_object_get(s, "items"))
				json_object_set(one, "items", json_object_get(s, "items"));
			py_hint(b, one, depth + 1);
			json_decref(one);
		}
		return;
	}
	for (size_t i = 0; json_is_string(t) && i < sizeof names / sizeof *names; i++) {
		if (strcmp(json_string_value(t), names[i].json) != 0)
			continue;
		kx_buf_appends(b, names[i].py);
		if (strcmp(names[i].json, "array") == 0 &&
		    json_is_object(json_object_get(s, "items"))) {
			kx_buf_appends(b, "[");
			py_hint(b, json_object_get(s, "items"), depth + 1);
			kx_buf_appends(b, "]");
		} else if (strcmp(names[i].json, "object") == 0) {
			kx_buf_appends(b, "[str, Any]");
		}
		return;
	}
	kx_buf_appends(b, "Any");
}

/* TEXT as the inside of a Python """docstring""", each line after the
 * first indented by INDENT. */
static void py_doc(kx_buf_t *b, const char *text, const char *indent)
{
	for (const char *p = text; *p; p++) {
		if (*p == '\\')
			kx_buf_appends(b, "\\\\");
		else if (*p == '"' && (p[1] == '"' || p == text || p[-1] == '"' || !p[1]))
			kx_buf_appends(b, "\\\"");
		else if (*p == '\n') {
			kx_buf_appends(b, "\n");
			if (p[1] && p[1] != '\n')
				kx_buf_appends(b, indent);
		} else if ((unsigned char)*p < 0x20 && *p != '\t')
			kx_buf_appendf(b, "\\x%02x", (unsigned char)*p);
		else
			kx_buf_append(b, p, 1);
	}
}

/* Whether the hint of schema S says None already (or Any). */
static bool hint_has_none(const json_t *s)
{
	kx_buf_t b = KX_BUF_INIT;
	bool has;
	py_hint(&b, s, 0);
	has = !b.data || strstr(b.data, "None") || strcmp(b.data, "Any") == 0;
	kx_buf_reset(&b);
	return has;
}

/* One function's stub onto B. */
static void stub_one(kx_buf_t *b, const kbox__fn_t *f)
{
	json_t *props = json_object_get(f->params, "properties");
	json_t *req = json_object_get(f->params, "required");
	const char *desc = json_string_value(json_object_get(f->def, "description"));
	bool first = true, any_doc = false;
	const char *k;
	json_t *v;

	kx_buf_appendf(b, "async def %s(", f->name);
	for (int optional = 0; optional < 2; optional++) {
		json_object_foreach(props, k, v)
		{
			bool is_req = false;
			size_t i;
			json_t *r;
			json_array_foreach(req, i, r)
			        is_req |= strcmp(json_string_value(r), k) == 0;
			if (is_req == (optional != 0))
				continue;
			kx_buf_appendf(b, "%s%s: ", first ? "" : ", ", k);
			first = false;
			py_hint(b, v, 0);
			/* no default but None, which means "not given" */
			if (optional && !json_object_get(v, "default") && !hint_has_none(v))
				kx_buf_appends(b, " | None");
			if (optional) {
				kx_buf_appends(b, " = ");
				py_literal(b, json_object_get(v, "default")
				                      ? json_object_get(v, "default")
				                      : json_null());
			}
			if (json_is_string(json_object_get(v, "description")))
				any_doc = true;
		}
	}
	kx_buf_appends(b, ") -> ");
	if (f->returns)
		py_hint(b, f->returns, 0);
	else
		kx_buf_appends(b, "Any");
	if (!(desc && *desc) && !any_doc) {
		kx_buf_appends(b, ":\n    ...\n");
		return;
	}
	kx_buf_appends(b, ":\n    \"\"\"");
	if (desc && *desc)
		py_doc(b, desc, "    ");
	if (any_doc) {
		kx_buf_appends(b, desc && *desc ? "\n\n    Args:\n" : "Args:\n");
		json_object_foreach(props, k, v)
		{
			const char *d = json_string_value(json_object_get(v, "description"));
			if (!d)
				continue;
			kx_buf_appendf(b, "        %s: ", k);
			py_doc(b, d, "            ");
			kx_buf_appends(b, "\n");
		}
		kx_buf_appends(b, "    ");
	}
	kx_buf_appends(b, "\"\"\"\n");
}

char *kbox_functions_stubs(const kbox_functions_t *self)
{
	kx_buf_t b = {0};
	if (kx_buf_appends(&b, "from typing import Any, Literal\n") < 0)
		return NULL;
	for (size_t i = 0; self && i < self->n; i++) {
		kx_buf_appends(&b, "\n\n");
		stub_one(&b, &self->fns[i]);
	}
	return kx_buf_take(&b, NULL);
}

char *kbox_functions_kernel_code(const kbox_functions_t *self)
{
	json_t *defs = json_array(), *spec;
	char *text, *spec64 = NULL, *shim64 = NULL, *code = NULL;

	for (size_t i = 0; defs && self && i < self->n; i++)
		json_array_append(defs, self->fns[i].def);
	spec = json_pack("{s:s, s:o, s:I}", "marker", self ? self->marker : "", "functions", defs,
	                 "request_max", (json_int_t)KBOX_CALL_REQUEST_MAX);
	text = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
	json_decref(spec);
	if (text)
		spec64 = kx_base64_encode(text, strlen(text), NULL);
	shim64 = kx_base64_encode(kbox__functions_shim, strlen(kbox__functions_shim), NULL);
	if (spec64 && shim64 &&
	    asprintf(&code,
	             "__import__('builtins').exec(compile(__import__('base64').b64decode('%s')"
	             ".decode(), '<kbox functions>', 'exec'), {'__name__': 'kbox_functions', "
	             "'_SPEC': '%s'})\n",
	             shim64, spec64) < 0)
		code = NULL;
	free(text);
	free(spec64);
	free(shim64);
	return code;
}
