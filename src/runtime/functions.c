/* src/runtime/functions.c — a functions file, read and checked
 * (functions.h, kbox-functions(5)). */
#include "runtime/runtime.h"
#include "runtime/functions.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The members an entry may have. */
static const char *const entry_keys[] = {"name",    "description", "parameters", "returns",
                                         "command", "http",        "timeout",    "env"};
static const char *const file_keys[] = {"functions", "max_calls", "max_concurrent", "dir"};

static bool known(const char *const *keys, size_t n, const char *k)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(keys[i], k) == 0)
			return true;
	return false;
}

/* A name an environment variable may have. */
static bool env_name_ok(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void kr_functions_free(kr_functions_t *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++) {
		strv_free(f->fns[i].argv);
		strv_free(f->fns[i].env);
	}
	free(f->fns);
	json_decref(f->doc);
	memset(f, 0, sizeof *f);
}

/* A callback for a set only made to check definitions, never run. */
static void no_run(void *arg, kbox_call_t *call)
{
	(void)arg;
	(void)call;
}

/* Check entry E (the Ith) of file WHERE and fill FN from it; with
 * RESOLVE, a relative program is made absolute against DIR in E itself.
 * 0, or -1 with ERR. */
static int entry_take(kr_function_t *fn, json_t *e, size_t i, const char *where, const char *dir,
                      bool resolve, kbox_error_t *err)
{
	json_t *name = json_object_get(e, "name"), *cmd = json_object_get(e, "command");
	json_t *http = json_object_get(e, "http"), *to = json_object_get(e, "timeout");
	json_t *env = json_object_get(e, "env"), *v;
	const char *n = json_string_value(name), *k;
	size_t j, ne = 0;

	if (!json_is_object(e))
		return kbox_error_set(err, KBOX_E_INVALID, "%s: functions[%zu] is not an object",
		                      where, i);
	if (!n)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: functions[%zu] has no \"name\" (a string)", where, i);
	json_object_foreach(e, k, v)
	{
		if (!known(entry_keys, sizeof entry_keys / sizeof *entry_keys, k))
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s: function %.64s: unknown member \"%.64s\" (it may have name, "
			        "description, parameters, returns, command or http, timeout, env)",
			        where, n, k);
	}
	fn->name = n;
	if (!cmd == !http)
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "%s: function %.64s: give it either \"command\" (an array: the "
		        "program and its arguments) or \"http\" (a URL)",
		        where, n);
	if (cmd) {
		if (!json_is_array(cmd) || json_array_size(cmd) == 0)
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s: function %s: \"command\" must be a non-empty array "
			        "of strings (the program, then its arguments)",
			        where, n);
		json_array_foreach(cmd, j, v)
		{
			if (!json_is_string(v) || (j == 0 && !*json_string_value(v)))
				return kbox_error_set(
				        err, KBOX_E_INVALID,
				        "%s: function %s: \"command\"[%zu] must be a %s", where, n,
				        j, j == 0 ? "program's path" : "string");
		}
		if (resolve && json_string_value(json_array_get(cmd, 0))[0] != '/') {
			char *abs = NULL;
			if (asprintf(&abs, "%s/%s", dir,
			             json_string_value(json_array_get(cmd, 0))) < 0)
				return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
			json_array_set_new(cmd, 0, json_string(abs));
			free(abs);
		}
		{
			const char *prog = json_string_value(json_array_get(cmd, 0));
			struct stat st;
			if (prog[0] != '/')
				return kbox_error_set(err, KBOX_E_INVALID,
				                      "%s: function %s: the program %s is not an "
				                      "absolute path",
				                      where, n, prog);
			if (stat(prog, &st) < 0)
				return kbox_error_set_sys(err, "%s: function %s: program %s", where,
				                          n, prog);
			if (!S_ISREG(st.st_mode) || access(prog, X_OK) < 0)
				return kbox_error_set(err, KBOX_E_INVALID,
				                      "%s: function %s: program %s is not an "
				                      "executable file",
				                      where, n, prog);
		}
		if (!(fn->argv = calloc(json_array_size(cmd) + 1, sizeof *fn->argv)))
			return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		json_array_foreach(cmd, j,
		                   v) if (!(fn
		                                    ->argv[j] = strdup(json_string_value(
		                                    v)))) return kbox_error_set(err, KBOX_E_NOMEM,
		                                                                "out of memory");
	} else {
		const char *u = json_string_value(http);
		if (!u || (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) ||
		    strpbrk(u, " \t\r\n"))
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: function %s: \"http\" must be an http:// or "
			                      "https:// URL",
			                      where, n);
		fn->url = u;
	}
	fn->timeout_ms = KR_FUNCTION_TIMEOUT_S * 1000LL;
	if (to) {
		double t = json_number_value(to);
		if (!json_is_number(to) || !(t > 0) || t > KR_FUNCTION_TIMEOUT_MAX_S)
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: function %s: \"timeout\" must be a number of "
			                      "seconds, more than 0 and at most %d",
			                      where, n, KR_FUNCTION_TIMEOUT_MAX_S);
		fn->timeout_ms = (long long)(t * 1000.0 + 0.5);
		if (fn->timeout_ms < 1)
			fn->timeout_ms = 1;
	}
	if (env && !json_is_object(env))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: function %s: \"env\" must be an object of strings",
		                      where, n);
	if (env && http)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: function %s: \"env\" is for a command, not \"http\"",
		                      where, n);
	if (!(fn->env = calloc(json_object_size(env) + 3, sizeof *fn->env)) ||
	    !(fn->env[ne++] = strdup("PATH=" KR_FUNCTION_PATH)) ||
	    !(fn->env[ne++] = strdup("LANG=C.UTF-8")))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	json_object_foreach(env, k, v)
	{
		if (!env_name_ok(k) || !json_is_string(v))
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s: function %s: \"env\": %.64s must be a variable's "
			        "name (letters, digits, _) with a string",
			        where, n, k);
		if (strcmp(k, "PATH") == 0 || strcmp(k, "LANG") == 0) {
			/* its own, instead of kbox's */
			size_t at = strcmp(k, "PATH") == 0 ? 0 : 1;
			free(fn->env[at]);
			fn->env[at] = NULL;
			if (asprintf(&fn->env[at], "%s=%s", k, json_string_value(v)) < 0) {
				fn->env[at] = NULL;
				return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
			}
			continue;
		}
		if (asprintf(&fn->env[ne], "%s=%s", k, json_string_value(v)) < 0) {
			fn->env[ne] = NULL;
			return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		}
		ne++;
	}
	return 0;
}

/* OUT from DOC (taken), of file WHERE; RESOLVE as entry_take. */
static int parse(kr_functions_t *out, json_t *doc, const char *where, bool resolve,
                 kbox_error_t *err)
{
	json_t *fns = json_object_get(doc, "functions"), *v;
	json_t *mc = json_object_get(doc, "max_calls"),
	       *mx = json_object_get(doc, "max_concurrent");
	const char *k;
	kbox_functions_t *check = NULL;
	size_t i;
	int rc = -1;

	memset(out, 0, sizeof *out);
	out->doc = doc;
	if (!json_is_object(doc))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: not a JSON object {\"functions\": [...]}", where);
	json_object_foreach(doc, k, v)
	{
		if (!known(file_keys, sizeof file_keys / sizeof *file_keys, k))
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s: unknown member \"%.64s\" (it may have functions, "
			        "max_calls, max_concurrent)",
			        where, k);
	}
	if (!json_is_array(fns))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: \"functions\" must be an array of functions", where);
	if (json_array_size(fns) > KBOX_FUNCTIONS_MAX)
		return kbox_error_set(err, KBOX_E_INVALID, "%s: more than %d functions", where,
		                      KBOX_FUNCTIONS_MAX);
	out->max_calls = KBOX_CALLS_DEFAULT;
	out->max_concurrent = KBOX_CALLS_CONCURRENT_DEFAULT;
	if (mc && (!json_is_integer(mc) || json_integer_value(mc) < 1 ||
	           json_integer_value(mc) > KR_FUNCTION_CALLS_MAX))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: \"max_calls\" must be an integer from 1 to %d", where,
		                      KR_FUNCTION_CALLS_MAX);
	if (mx && (!json_is_integer(mx) || json_integer_value(mx) < 1 ||
	           json_integer_value(mx) > KR_FUNCTION_CONCURRENT_MAX))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: \"max_concurrent\" must be an integer from 1 to %d",
		                      where, KR_FUNCTION_CONCURRENT_MAX);
	if (mc)
		out->max_calls = (size_t)json_integer_value(mc);
	if (mx)
		out->max_concurrent = (size_t)json_integer_value(mx);
	out->dir = json_string_value(json_object_get(doc, "dir"));
	if (!out->dir || out->dir[0] != '/')
		return kbox_error_set(err, KBOX_E_INVALID, "%s: no directory recorded", where);
	if (!(out->fns = calloc(json_array_size(fns) + 1, sizeof *out->fns)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	if (!(check = kbox_functions_new(err)))
		return -1;
	json_array_foreach(fns, i, v)
	{
		kbox_error_t e = {0};
		out->n = i + 1;
		if (entry_take(&out->fns[i], v, i, where, out->dir, resolve, err) < 0)
			goto out;
		if (kbox_functions_add(check, v, no_run, NULL, NULL, &e) < 0) {
			kbox_error_set(err, KBOX_E_INVALID, "%s: %s", where, e.msg);
			goto out;
		}
	}
	rc = 0;
out:
	kbox_functions_destroy(&check);
	return rc;
}

int kr_functions_read(kr_functions_t *out, const char *path, kbox_error_t *err)
{
	char real[PATH_MAX], *slash;
	json_error_t je;
	json_t *doc;
	struct stat st;
	int fd;

	memset(out, 0, sizeof *out);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return kbox_error_set_sys(err, "functions file %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > KR_FUNCTIONS_FILE_MAX) {
		close(fd);
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "functions file %s: not a regular file of at most %d bytes",
		                      path, KR_FUNCTIONS_FILE_MAX);
	}
	doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	close(fd);
	if (!doc)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "functions file %s: not valid JSON: %s (line %d, column %d)",
		                      path, je.text, je.line, je.column);
	if (!realpath(path, real)) {
		json_decref(doc);
		return kbox_error_set_sys(err, "functions file %s", path);
	}
	if ((slash = strrchr(real, '/')))
		*(slash == real ? slash + 1 : slash) = '\0';
	if (json_is_object(doc) && json_object_get(doc, "dir")) {
		json_decref(doc);
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "functions file %s: unknown member \"dir\" (it may have "
		                      "functions, max_calls, max_concurrent)",
		                      path);
	}
	if (json_is_object(doc))
		json_object_set_new(doc, "dir", json_string(real));
	{
		char where[PATH_MAX + 32];
		snprintf(where, sizeof where, "functions file %s", path);
		return parse(out, doc, where, true, err);
	}
}

int kr_functions_parse(kr_functions_t *out, json_t *doc, kbox_error_t *err)
{
	return parse(out, json_incref(doc), "session.json's functions", false, err);
}

kbox_functions_t *kr_functions_set(kr_functions_t *f, kbox_function_cb *run,
                                   kbox_call_cancel_cb *cancel, kbox_error_t *err)
{
	kbox_functions_t *set = kbox_functions_new(err);
	json_t *fns = json_object_get(f->doc, "functions");
	for (size_t i = 0; set && i < f->n; i++)
		if (kbox_functions_add(set, json_array_get(fns, i), run, cancel, &f->fns[i], err) <
		    0)
			kbox_functions_destroy(&set);
	if (set)
		kbox_functions_set_limits(set, f->max_calls, f->max_concurrent);
	return set;
}

char *kr_functions_stubs(const json_t *doc)
{
	json_t *fns = json_object_get(doc, "functions"), *v;
	kbox_functions_t *set = kbox_functions_new(NULL);
	char *stubs = NULL;
	size_t i;

	json_array_foreach(fns, i,
	                   v) if (set && kbox_functions_add(set, v, no_run, NULL, NULL, NULL) < 0)
	        kbox_functions_destroy(&set);
	if (set && kbox_functions_count(set) > 0)
		stubs = kbox_functions_stubs(set);
	kbox_functions_destroy(&set);
	return stubs;
}
