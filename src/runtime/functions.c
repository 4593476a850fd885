/* src/runtime/functions.c — a functions file, read and checked
 * (functions.h, kbox-functions(5)). */
#include "runtime/runtime.h"
#include "runtime/functions.h"
#include "runtime/mcp_client.h"

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
static const char *const file_keys[] = {"functions", "mcp_servers", "max_calls", "max_concurrent",
                                        "dir"};

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
	for (size_t i = 0; i < f->n_servers; i++) {
		strv_free(f->servers[i].argv);
		strv_free(f->servers[i].env);
	}
	free(f->fns);
	free(f->servers);
	free(f->notes);
	json_decref(f->doc);
	memset(f, 0, sizeof *f);
}

/* A callback for a set only made to check definitions, never run. */
static void no_run(void *arg, kbox_call_t *call)
{
	(void)arg;
	(void)call;
}

/* The program and environment of WHAT (a function's, or an MCP
 * server's: "function get_order"), from E's "command", "timeout" and
 * "env", into *ARGV, *ENV and *TIMEOUT_MS; with RESOLVE, a relative
 * program is made absolute against DIR in E itself.  0, or -1 with ERR. */
static int runner_take(const char *what, json_t *e, const char *where, const char *dir,
                       bool resolve, char ***argv_p, char ***env_p, long long *timeout_ms,
                       kbox_error_t *err)
{
	json_t *cmd = json_object_get(e, "command"), *to = json_object_get(e, "timeout");
	json_t *env = json_object_get(e, "env"), *v;
	const char *k;
	size_t j, ne = 0;
	char **env_v;

	if (cmd) {
		const char *prog;
		struct stat st;
		if (!json_is_array(cmd) || json_array_size(cmd) == 0)
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s: %s: \"command\" must be a non-empty array of strings "
			        "(the program, then its arguments)",
			        where, what);
		json_array_foreach(cmd, j, v)
		{
			if (!json_is_string(v) || (j == 0 && !*json_string_value(v)))
				return kbox_error_set(err, KBOX_E_INVALID,
				                      "%s: %s: \"command\"[%zu] must be a %s",
				                      where, what, j,
				                      j == 0 ? "program's path" : "string");
		}
		if (resolve && json_string_value(json_array_get(cmd, 0))[0] != '/') {
			char *abs = NULL;
			if (asprintf(&abs, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/",
			             json_string_value(json_array_get(cmd, 0))) < 0)
				return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
			json_array_set_new(cmd, 0, json_string(abs));
			free(abs);
		}
		prog = json_string_value(json_array_get(cmd, 0));
		if (prog[0] != '/')
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: %s: the program %s is not an absolute path",
			                      where, what, prog);
		if (stat(prog, &st) < 0)
			return kbox_error_set_sys(err, "%s: %s: program %s", where, what, prog);
		if (!S_ISREG(st.st_mode) || access(prog, X_OK) < 0)
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: %s: program %s is not an executable file", where,
			                      what, prog);
		if (!(*argv_p = calloc(json_array_size(cmd) + 1, sizeof **argv_p)))
			return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		json_array_foreach(cmd, j, v)
		{
			if (!((*argv_p)[j] = strdup(json_string_value(v))))
				return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		}
	}
	*timeout_ms = KR_FUNCTION_TIMEOUT_S * 1000LL;
	if (to) {
		double t = json_number_value(to);
		if (!json_is_number(to) || !(t > 0) || t > KR_FUNCTION_TIMEOUT_MAX_S)
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s: %s: \"timeout\" must be a number of seconds, more "
			        "than 0 and at most %d",
			        where, what, KR_FUNCTION_TIMEOUT_MAX_S);
		*timeout_ms = (long long)(t * 1000.0 + 0.5);
		if (*timeout_ms < 1)
			*timeout_ms = 1;
	}
	if (env && !json_is_object(env))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: %s: \"env\" must be an object of strings", where, what);
	if (env && !cmd)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: %s: \"env\" is for a command, not \"http\"", where,
		                      what);
	if (!(env_v = *env_p = calloc(json_object_size(env) + 3, sizeof *env_v)) ||
	    !(env_v[ne++] = strdup("PATH=" KR_FUNCTION_PATH)) ||
	    !(env_v[ne++] = strdup("LANG=C.UTF-8")))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	json_object_foreach(env, k, v)
	{
		size_t at = ne;
		if (!env_name_ok(k) || !json_is_string(v))
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: %s: \"env\": %.64s must be a variable's name "
			                      "(letters, digits, _) with a string",
			                      where, what, k);
		/* PATH and LANG: its own, instead of kbox's */
		if (strcmp(k, "PATH") == 0 || strcmp(k, "LANG") == 0) {
			at = strcmp(k, "PATH") == 0 ? 0 : 1;
			free(env_v[at]);
		} else {
			ne++;
		}
		if (asprintf(&env_v[at], "%s=%s", k, json_string_value(v)) < 0) {
			env_v[at] = NULL;
			return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		}
	}
	return 0;
}

/* Check entry E (the Ith) of file WHERE and fill FN from it; with
 * RESOLVE (the file as written), a relative program is made absolute
 * against DIR in E itself, and an entry of an MCP server's tool (which
 * kbox writes) is refused.  0, or -1 with ERR. */
static int entry_take(kr_functions_t *f, kr_function_t *fn, json_t *e, size_t i, const char *where,
                      const char *dir, bool resolve, kbox_error_t *err)
{
	json_t *name = json_object_get(e, "name"), *cmd = json_object_get(e, "command");
	json_t *http = json_object_get(e, "http"), *mcp = json_object_get(e, "mcp"), *v;
	const char *n = json_string_value(name), *k;
	char what[96];

	if (!json_is_object(e))
		return kbox_error_set(err, KBOX_E_INVALID, "%s: functions[%zu] is not an object",
		                      where, i);
	if (!n)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: functions[%zu] has no \"name\" (a string)", where, i);
	json_object_foreach(e, k, v)
	{
		bool ok = known(entry_keys, sizeof entry_keys / sizeof *entry_keys, k) ||
		          (!resolve && (strcmp(k, "mcp") == 0 || strcmp(k, "tool") == 0));
		if (!ok)
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s: function %.64s: unknown member \"%.64s\" (it may have name, "
			        "description, parameters, returns, command or http, timeout, env)",
			        where, n, k);
	}
	fn->name = n;
	fn->mcp = -1;
	snprintf(what, sizeof what, "function %.64s", n);
	if (mcp) {
		/* a tool of an MCP server, as kbox start wrote it */
		if (!json_is_integer(mcp) || json_integer_value(mcp) < 0 ||
		    (size_t)json_integer_value(mcp) >= f->n_servers ||
		    !json_is_string(json_object_get(e, "tool")) || cmd || http)
			return kbox_error_set(err, KBOX_E_INVALID, "%s: %s: not a valid MCP tool",
			                      where, what);
		fn->mcp = (int)json_integer_value(mcp);
		fn->tool = json_string_value(json_object_get(e, "tool"));
		fn->timeout_ms = f->servers[fn->mcp].timeout_ms;
		return 0;
	}
	if (!cmd == !http)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: %s: give it either \"command\" (an array: the program "
		                      "and its arguments) or \"http\" (a URL)",
		                      where, what);
	if (http) {
		const char *u = json_string_value(http);
		if (!u || (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) ||
		    strpbrk(u, " \t\r\n"))
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: %s: \"http\" must be an http:// or https:// URL",
			                      where, what);
		fn->url = u;
	}
	return runner_take(what, e, where, dir, resolve, &fn->argv, &fn->env, &fn->timeout_ms, err);
}

/* Check the MCP server S (the Ith of "mcp_servers") into SV; RESOLVE as
 * entry_take.  0, or -1 with ERR. */
static int server_take(kr_mcp_server_t *sv, json_t *s, size_t i, const char *where, const char *dir,
                       bool resolve, kbox_error_t *err)
{
	static const char *const keys[] = {"command", "allow", "timeout", "env"};
	json_t *allow = json_object_get(s, "allow"), *v;
	const char *k;
	char what[64];
	size_t j;

	snprintf(what, sizeof what, "mcp_servers[%zu]", i);
	if (!json_is_object(s))
		return kbox_error_set(err, KBOX_E_INVALID, "%s: %s is not an object", where, what);
	json_object_foreach(s, k, v)
	{
		if (!known(keys, sizeof keys / sizeof *keys, k))
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s: %s: unknown member \"%.64s\" (it may have command, "
			        "allow, timeout, env)",
			        where, what, k);
	}
	if (!json_object_get(s, "command"))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: %s: \"command\" (the server's program and its "
		                      "arguments) is missing",
		                      where, what);
	if (allow && !json_is_array(allow))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: %s: \"allow\" must be an array of tool names", where,
		                      what);
	json_array_foreach(allow, j, v)
	{
		if (!json_is_string(v))
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: %s: \"allow\" must be an array of tool names",
			                      where, what);
	}
	return runner_take(what, s, where, dir, resolve, &sv->argv, &sv->env, &sv->timeout_ms, err);
}

/* A Python name for the MCP tool TOOL (its own when it is one: letters,
 * digits, "_"; "-" and "." become "_"), into BUF; false when none. */
static bool tool_name(const char *tool, char *buf, size_t size)
{
	size_t n = strlen(tool);
	if (n == 0 || n >= size)
		return false;
	for (size_t i = 0; i <= n; i++)
		buf[i] = tool[i] == '-' || tool[i] == '.' ? '_' : tool[i];
	return true; /* (kbox_functions_add says whether it is a name) */
}

/* The tools of server SV (the Ith), listed, as entries appended to FNS:
 * those marked readOnlyHint, and those ALLOW names; the others and those
 * kbox cannot take are said in NOTES.  0, or -1 with ERR. */
static int server_tools(const kr_mcp_server_t *sv, json_t *s, size_t i, json_t *fns,
                        const char *dir, kx_buf_t *notes, const char *where, kbox_error_t *err)
{
	json_t *allow = json_object_get(s, "allow"), *tools, *t, *a;
	kx_buf_t left = KX_BUF_INIT, bad = KX_BUF_INIT, clash = KX_BUF_INIT;
	size_t j, k, taken = 0, n_left = 0, n_bad = 0, n_clash = 0;
	kbox_error_t e = {0};
	long long list_ms = json_object_get(s, "timeout") ? sv->timeout_ms : KR_MCP_LIST_MS;

	tools = kr_mcp_list_tools(sv->argv, sv->env, dir,
	                          list_ms > KR_MCP_LIST_MS ? KR_MCP_LIST_MS : (int)list_ms, &e);
	if (!tools)
		return kbox_error_set(err, KBOX_E_INVALID, "%s: MCP server %s: %s", where,
		                      sv->argv[0], e.msg);
	/* each tool "allow" names is one the server has */
	json_array_foreach(allow, k, a)
	{
		bool found = false;
		json_array_foreach(tools, j, t)
		        found |= json_is_string(json_object_get(t, "name")) &&
		                 strcmp(json_string_value(json_object_get(t, "name")),
		                        json_string_value(a)) == 0;
		if (!found) {
			json_decref(tools);
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: MCP server %s has no tool \"%.64s\" (\"allow\", "
			                      "--functions-allow)",
			                      where, sv->argv[0], json_string_value(a));
		}
	}
	json_array_foreach(tools, j, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		bool ro = json_is_true(
		             json_object_get(json_object_get(t, "annotations"), "readOnlyHint")),
		     allowed = false;
		char py[128];
		json_t *entry, *schema = json_object_get(t, "inputSchema");
		json_t *out = json_object_get(t, "outputSchema");
		kbox_functions_t *check;
		if (!name)
			continue;
		json_array_foreach(allow, k, a) allowed |= strcmp(json_string_value(a), name) == 0;
		if (!ro && !allowed) {
			kx_buf_appendf(&left, "%s%s", n_left++ ? ", " : "", name);
			continue;
		}
		entry = tool_name(name, py, sizeof py)
		                ? json_pack("{s:s, s:O?, s:O?, s:I, s:s}", "name", py,
		                            "description", json_object_get(t, "description"),
		                            "parameters", schema, "mcp", (json_int_t)i, "tool",
		                            name)
		                : NULL;
		if (entry && out)
			json_object_set(entry, "returns", out);
		/* a name another function has already is left out */
		if (entry) {
			json_t *f;
			bool taken_name = false;
			json_array_foreach(fns, k, f)
			        taken_name |= strcmp(json_string_value(json_object_get(f, "name")),
			                             py) == 0;
			if (taken_name) {
				kx_buf_appendf(&clash, "%s%s%s%s", n_clash++ ? ", " : "", name,
				               strcmp(name, py) ? " as " : "",
				               strcmp(name, py) ? py : "");
				json_decref(entry);
				continue;
			}
		}
		/* (what kbox cannot take, a schema it cannot read, is left out) */
		check = kbox_functions_new(NULL);
		if (!entry || !check ||
		    kbox_functions_add(check, entry, no_run, NULL, NULL, NULL) < 0) {
			kx_buf_appendf(&bad, "%s%s", n_bad++ ? ", " : "", name);
			json_decref(entry);
		} else {
			json_array_append_new(fns, entry);
			taken++;
		}
		kbox_functions_destroy(&check);
	}
	json_decref(tools);
	if (n_left)
		kx_buf_appendf(
		        notes,
		        "MCP server %s: %zu tool%s left out, not marked read-only (\"allow\" or "
		        "--functions-allow takes one by name): %s\n",
		        sv->argv[0], n_left, n_left == 1 ? "" : "s", left.data);
	if (n_bad)
		kx_buf_appendf(
		        notes,
		        "MCP server %s: %zu tool%s left out, whose name or schema kbox cannot "
		        "take: %s\n",
		        sv->argv[0], n_bad, n_bad == 1 ? "" : "s", bad.data);
	if (n_clash)
		kx_buf_appendf(notes,
		               "MCP server %s: %zu tool%s left out, whose Python name another "
		               "function has: %s\n",
		               sv->argv[0], n_clash, n_clash == 1 ? "" : "s", clash.data);
	if (!taken)
		kx_buf_appendf(notes, "MCP server %s: no tool taken\n", sv->argv[0]);
	kx_buf_reset(&left);
	kx_buf_reset(&bad);
	kx_buf_reset(&clash);
	return 0;
}

/* OUT from DOC (taken), of file WHERE; RESOLVE as entry_take: then the
 * tools of its MCP servers are listed and become entries of DOC. */
static int parse(kr_functions_t *out, json_t *doc, const char *where, bool resolve,
                 kbox_error_t *err)
{
	json_t *fns = json_object_get(doc, "functions"), *v;
	json_t *servers = json_object_get(doc, "mcp_servers");
	json_t *mc = json_object_get(doc, "max_calls"),
	       *mx = json_object_get(doc, "max_concurrent");
	kx_buf_t notes = KX_BUF_INIT;
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
			        "mcp_servers, max_calls, max_concurrent)",
			        where, k);
	}
	if (!fns && servers && json_is_object(doc))
		json_object_set_new(doc, "functions", fns = json_array());
	if (!json_is_array(fns))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: \"functions\" must be an array of functions", where);
	if (servers && (!json_is_array(servers) || json_array_size(servers) > KR_MCP_SERVERS_MAX))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: \"mcp_servers\" must be an array of at most %d servers",
		                      where, KR_MCP_SERVERS_MAX);
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
	if (servers && !(out->servers = calloc(json_array_size(servers) + 1, sizeof *out->servers)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	json_array_foreach(servers, i, v)
	{
		out->n_servers = i + 1;
		if (server_take(&out->servers[i], v, i, where, out->dir, resolve, err) < 0)
			return -1;
	}
	/* the servers' tools, listed once, as kbox start reads the file */
	for (i = 0; resolve && i < out->n_servers; i++)
		if (server_tools(&out->servers[i], json_array_get(servers, i), i, fns, out->dir,
		                 &notes, where, err) < 0) {
			kx_buf_reset(&notes);
			return -1;
		}
	out->notes = kx_buf_take(&notes, NULL);
	if (json_array_size(fns) > KBOX_FUNCTIONS_MAX)
		return kbox_error_set(err, KBOX_E_INVALID, "%s: more than %d functions", where,
		                      KBOX_FUNCTIONS_MAX);
	if (!(out->fns = calloc(json_array_size(fns) + 1, sizeof *out->fns)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	if (!(check = kbox_functions_new(err)))
		return -1;
	json_array_foreach(fns, i, v)
	{
		kbox_error_t e = {0};
		out->n = i + 1;
		if (entry_take(out, &out->fns[i], v, i, where, out->dir,
		               resolve && !json_object_get(v, "mcp"), err) < 0)
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

int kr_functions_read(kr_functions_t *out, const char *path, const json_t *more_servers,
                      kbox_error_t *err)
{
	char real[PATH_MAX], *slash, where[PATH_MAX + 32];
	json_error_t je;
	json_t *doc, *servers;
	struct stat st;
	int fd;

	memset(out, 0, sizeof *out);
	if (!path) {
		/* the servers of the command line alone, run from here */
		if (!getcwd(real, sizeof real))
			return kbox_error_set_sys(err, "the current directory");
		doc = json_pack("{s:[], s:s}", "functions", "dir", real);
		snprintf(where, sizeof where, "--functions-from-mcp");
		goto servers;
	}
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
	snprintf(where, sizeof where, "functions file %s", path);
	if (json_is_object(doc) && json_object_get(doc, "dir")) {
		json_decref(doc);
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: unknown member \"dir\" (it may have functions, "
		                      "mcp_servers, max_calls, max_concurrent)",
		                      where);
	}
	if (json_is_object(doc))
		json_object_set_new(doc, "dir", json_string(real));
servers:
	if (!doc)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	if (more_servers && json_array_size(more_servers) && json_is_object(doc)) {
		if (!(servers = json_object_get(doc, "mcp_servers")))
			json_object_set_new(doc, "mcp_servers", servers = json_array());
		if (json_is_array(servers))
			json_array_extend(servers, (json_t *)more_servers);
	}
	return parse(out, doc, where, true, err);
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

/* Whether P is DIR or below it, as strings. */
static bool below(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/' || n == 1);
}

/* Whether the absolute PATH reaches into DIR: as it is written, or as
 * any part of it resolves (a link on the way, which the kernel could
 * change if it leads into DIR, is followed each time the path is used). */
static bool path_under(const char *path, const char *dir)
{
	char rd[PATH_MAX], buf[PATH_MAX], r[PATH_MAX];
	size_t n = strlen(path);
	if (!realpath(dir, rd))
		snprintf(rd, sizeof rd, "%s", dir);
	if (below(path, dir) || below(path, rd))
		return true;
	if (n >= sizeof buf)
		return false;
	memcpy(buf, path, n + 1);
	for (size_t k = 1; k <= n; k++) {
		if (buf[k] != '/' && buf[k] != '\0')
			continue;
		char c = buf[k];
		buf[k] = '\0';
		bool in = realpath(buf, r) && below(r, rd);
		buf[k] = c;
		if (in)
			return true;
	}
	return false;
}

int kr_functions_check_workspace(const json_t *doc, const char *workspace, kbox_error_t *err)
{
	const char *dir = json_string_value(json_object_get(doc, "dir"));
	const char *lists[] = {"functions", "mcp_servers"};
	json_t *e;
	size_t i;

	if (!doc || !workspace)
		return 0;
	if (dir && path_under(dir, workspace))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "the functions file's directory %s is in the session's "
		                      "workspace, which the kernel can write: keep it and its "
		                      "programs elsewhere",
		                      dir);
	for (size_t l = 0; l < 2; l++)
		json_array_foreach(json_object_get(doc, lists[l]), i, e)
		{
			json_t *cmd = json_object_get(e, "command"), *a;
			const char *prog = json_string_value(json_array_get(cmd, 0));
			size_t j;
			/* the program, and each argument that names a file (a
			 * script the program runs), relative ones from the
			 * commands' working directory */
			json_array_foreach(cmd, j, a)
			{
				char abs[PATH_MAX * 2];
				const char *arg = json_string_value(a);
				if (!arg || !*arg)
					continue;
				snprintf(abs, sizeof abs, "%s%s%s",
				         arg[0] == '/' ? ""
				         : dir         ? dir
				                       : "",
				         arg[0] == '/' ? "" : "/", arg);
				if (path_under(abs, workspace))
					return kbox_error_set(
					        err, KBOX_E_INVALID,
					        "%s %s: %s %s is in the session's workspace, which the "
					        "kernel can write",
					        l ? "MCP server" : "function",
					        l ? prog
					          : json_string_value(json_object_get(e, "name")),
					        j ? "its argument" : "its program", arg);
			}
		}
	return 0;
}

char *kr_functions_text(const json_t *doc)
{
	/* (no JSON_SORT_KEYS: the order of "properties" is the order of the
	 * parameters; no JSON_REAL_PRECISION: every digit) */
	return doc ? json_dumps(doc, JSON_COMPACT) : NULL;
}

json_t *kr_functions_doc(const char *text)
{
	return text ? json_loads(text, JSON_REJECT_DUPLICATES, NULL) : NULL;
}
