/* src/mcp/tools.c — kbox mcp's tools: what tools/list gives, and
 * tools/call: the tool found, its arguments checked against its input
 * schema, then run (run.c, files.c); and the results' content. */
#include "config.h"
#include "mcp/mcp_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- results ---- */

json_t *mcp_tool_result(json_t *content, json_t *structured, bool is_error)
{
	json_t *r = json_pack("{s:o, s:b}", "content", content, "isError", is_error);
	if (r && structured)
		json_object_set_new(r, "structuredContent", structured);
	else
		json_decref(structured);
	return r;
}

/* (Bytes that are not UTF-8 become U+FFFD, by the one repair: the
 * supervisor's text is UTF-8 already; a path named in a message may not
 * be.) */
json_t *mcp_text_item(const char *text)
{
	json_t *t = json_string(text);
	if (!t) {
		size_t n = 0;
		char *fixed = kx_utf8_repair(text, strlen(text), &n);
		t = fixed ? json_stringn(fixed, n) : NULL;
		free(fixed);
		if (!t)
			t = json_string("");
	}
	return json_pack("{s:s, s:o}", "type", "text", "text", t);
}

json_t *mcp_text_result(bool is_error, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return mcp_tool_result(json_pack("[o]", mcp_text_item(buf)), NULL, is_error);
}


/* ---- tools/list ---- */

json_t *mcp_tools_list(cli_structured_t structured, bool images_inline, const char *more)
{
	json_t *path = json_pack("{s:s, s:s}", "type", "string", "description",
	                         "A path relative to the workspace (the kernel's working "
	                         "directory), or under /workspace, where a sandboxed kernel "
	                         "sees it; no \"..\".");
	json_t *tools = json_pack(
	        "[o, {s:s, s:s, s:s, s:{s:s, s:{s:O}, s:b}, s:{s:b}}, "
	        "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:i, s:s}, "
	        "s:{s:s, s:i, s:I, s:s}}, s:[s], s:b}, s:{s:b}}, "
	        "{s:s, s:s, s:s, s:{s:s, s:{s:O, s:{s:s, s:s}}, s:[s, s], s:b}, s:{s:b, s:b}}, "
	        "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:s}}, s:[s], s:b}, s:{s:b}}]",
	        cli_mcp_run_tool(structured, images_inline, more), "name", "list_files", "title",
	        "List files", "description",
	        "List a directory of the workspace that run_python's code works in (the workspace "
	        "root without a path): one entry a line, directories ending in /, files with their "
	        "size; in names, a backslash, control characters and bytes not UTF-8 are escaped "
	        "(\\\\, \\n, \\t, \\r, \\xNN), and a name beginning with [ is shown after a "
	        "backslash (\\[), never as the listing's own [... N more entries] line.",
	        "inputSchema", "type", "object", "properties", "path", path, "additionalProperties",
	        0, "annotations", "readOnlyHint", 1, "name", "read_file", "title", "Read a file",
	        "description",
	        "Read a text file (UTF-8) of the workspace, or the whole text of an output "
	        "run_python cut short (the path its marker gives), a part at a time (1 MiB, or "
	        "length bytes): when the file goes on, a last line says the offset to read on "
	        "from. For a binary file, use run_python.",
	        "inputSchema", "type", "object", "properties", "path", "type", "string",
	        "description",
	        "A path relative to the workspace or under /workspace (no \"..\"), or the path "
	        "of an output a "
	        "result gave.",
	        "offset", "type", "integer", "minimum", 0, "description",
	        "The byte to start at: 0 (the default), or the offset the last part's last line "
	        "gave.",
	        "length", "type", "integer", "minimum", 1, "maximum", (json_int_t)(1L << 20),
	        "description",
	        "The most bytes to return (default and at most 1048576); a part ends at a line "
	        "where it can.",
	        "required", "path", "additionalProperties", 0, "annotations", "readOnlyHint", 1,
	        "name", "write_file", "title", "Write a file", "description",
	        "Save text as a file of the workspace, creating it or replacing it whole; its "
	        "directory must exist; at most 16 MiB. run_python's code can then read it.",
	        "inputSchema", "type", "object", "properties", "path", path, "content", "type",
	        "string", "description", "The file's new contents, as text.", "required", "path",
	        "content", "additionalProperties", 0, "annotations", "readOnlyHint", 0,
	        "destructiveHint", 1, "name", "read_image", "title", "Read an image", "description",
	        "Show an image file (PNG, JPEG, GIF or WebP, at most 5 MiB): a path in the workspace, "
	        "or the path of an image that run_python saved, as its result gave it.",
	        "inputSchema", "type", "object", "properties", "path", "type", "string",
	        "description",
	        "A path relative to the workspace or under /workspace, or an image's path from a "
	        "result.",
	        "required", "path", "additionalProperties", 0, "annotations", "readOnlyHint", 1);
	json_decref(path);
	if (tools)
		json_array_insert_new(
		        tools, 1,
		        json_pack(
		                "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:i, s:I, s:s}, s:{s:s, s:s}}, "
		                "s:b}, s:{s:b, s:b}}",
		                "name", "wait_python", "title", "Wait for Python", "description",
		                "Wait for the code of an earlier run_python call that was still "
		                "running at its soft time limit (its result said so): returns what "
		                "the code printed since the last call and that it still runs, or, "
		                "once it has ended, its whole result, saying which. With interrupt "
		                "true, interrupt the code first (its state is kept).",
		                "inputSchema", "type", "object", "properties", "timeout", "type",
		                "number", "minimum", 0, "maximum",
		                (json_int_t)(CLI_DURATION_MAX_MS / 1000), "description",
		                "Seconds to wait for the code to end before returning what it "
		                "printed meanwhile (default: the soft time limit, 50 s unless the "
		                "server was started otherwise).",
		                "interrupt", "type", "boolean", "description",
		                "Interrupt the code (as a KeyboardInterrupt; its state is kept), "
		                "then return its whole result.",
		                "additionalProperties", 0, "annotations", "readOnlyHint", 0,
		                "destructiveHint", 0));
	if (tools) {
		/* every tool on a session takes its handle (wait_python too) */
		size_t i;
		json_t *tool;
		json_array_foreach(tools, i, tool)
		{
			json_t *props = json_object_get(json_object_get(tool, "inputSchema"),
			                                "properties");
			if (!json_object_get(props, "session"))
				json_object_set_new(props, "session", cli_mcp_session_arg());
		}
		json_array_append_new(
		        tools,
		        json_pack(
		                "{s:s, s:s, s:s, s:{s:s, s:{}, s:b}, s:{s:b, s:b}}", "name",
		                "new_session", "title", "New session", "description",
		                "Start a new, empty Python session (a kernel and a workspace of its "
		                "own) for a conversation, and return its handle: give it as "
		                "\"session\" to run_python, wait_python and the file tools to work "
		                "in that session. Without \"session\", the tools work in this "
		                "connection's own session.",
		                "inputSchema", "type", "object", "properties",
		                "additionalProperties", 0, "annotations", "readOnlyHint", 0,
		                "destructiveHint", 0));
	}
	return tools ? json_pack("{s:o}", "tools", tools) : NULL;
}


/* ---- tools/call ---- */

/* The tools and the arguments each takes (its inputSchema's properties:
 * no others, "additionalProperties" false). */
static const struct {
	const char *name;
	const char *args[5];
	/* the tool on files (the session runs), or NULL: run_python or
	 * wait_python, which answer later */
	json_t *(*fn)(mcp_t *m, json_t *args);
} tool_args[] = {
        {"run_python", {"code", "timeout", "soft_timeout", "session", NULL}, NULL},
        {"wait_python", {"timeout", "interrupt", "session", NULL}, NULL},
        {"list_files", {"path", "session", NULL}, mcp_list_files},
        {"read_file", {"path", "offset", "length", "session", NULL}, mcp_read_file},
        {"write_file", {"path", "content", "session", NULL}, mcp_write_file},
        {"read_image", {"path", "session", NULL}, mcp_read_image},
        {"new_session", {NULL}, NULL},
};

/* Why ARGS (an object) are not arguments of the tool T (an index of
 * tool_args), into WHY: an argument it does not take, or a string with a
 * NUL (but for write_file's content, written as it is).  0 when they may
 * be, -1 when not. */
static int check_args(size_t t, json_t *args, char *why, size_t size)
{
	const char *key;
	json_t *v;
	char unknown[512] = "", takes[64] = "";
	size_t n_unknown = 0, l;

	json_object_foreach(args, key, v)
	{
		bool known = false;
		for (size_t i = 0; tool_args[t].args[i]; i++)
			known |= strcmp(key, tool_args[t].args[i]) == 0;
		if (known && mcp_has_nul(v) && strcmp(key, "content") != 0) {
			snprintf(why, size,
			         "%s: \"%s\" holds a NUL character (\\u0000), which no %s "
			         "may hold",
			         tool_args[t].name, key,
			         strcmp(key, "code") == 0      ? "code"
			         : strcmp(key, "session") == 0 ? "session handle"
			                                       : "path");
			return -1;
		}
		if (!known) {
			l = strlen(unknown);
			snprintf(unknown + l, sizeof unknown - l, "%s\"%s\"",
			         n_unknown++ ? ", " : "", key);
		}
	}
	if (!n_unknown)
		return 0;
	for (size_t i = 0; tool_args[t].args[i]; i++) {
		l = strlen(takes);
		snprintf(takes + l, sizeof takes - l, "%s%s", i ? ", " : "", tool_args[t].args[i]);
	}
	if (takes[0])
		snprintf(why, size, "%s: unknown argument%s %s (it takes %s)", tool_args[t].name,
		         n_unknown > 1 ? "s" : "", unknown, takes);
	else
		snprintf(why, size, "%s: unknown argument%s %s (it takes none)", tool_args[t].name,
		         n_unknown > 1 ? "s" : "", unknown);
	return -1;
}

void mcp_tools_call(mcp_t *m, json_t *id, json_t *params)
{
	json_t *jname = json_object_get(params, "name");
	const char *name = json_string_value(jname);
	json_t *args = json_object_get(params, "arguments"), *res;
	json_t *empty = json_object();
	char why[1024];
	size_t t = 0;

	if (!name) {
		mcp_send_error(m, id, MCP_RPC_INVALID_PARAMS,
		               "tools/call: \"name\" (a string) is required");
		goto out;
	}
	if (mcp_has_nul(jname)) {
		mcp_send_error(m, id, MCP_RPC_INVALID_PARAMS,
		               "tools/call: \"name\" holds a NUL character");
		goto out;
	}
	if (args && !json_is_object(args)) {
		mcp_send_error(m, id, MCP_RPC_INVALID_PARAMS,
		               "tools/call: \"arguments\" must be an object");
		goto out;
	}
	if (!args)
		args = empty;
	while (t < sizeof tool_args / sizeof tool_args[0] && strcmp(name, tool_args[t].name) != 0)
		t++;
	if (t == sizeof tool_args / sizeof tool_args[0]) {
		mcp_send_error(m, id, MCP_RPC_INVALID_PARAMS, "Unknown tool: %s", name);
		goto out;
	}
	if (check_args(t, args, why, sizeof why) < 0) {
		mcp_send_result(m, id, mcp_text_result(true, "%s", why), m->req_modern);
		goto out;
	}
	if (strcmp(name, "new_session") == 0) {
		mcp_send_result(m, id, mcp_new_session(m), m->req_modern);
		goto out;
	}
	if (mcp_session_select(m, json_object_get(args, "session"), why, sizeof why) < 0) {
		mcp_send_result(m, id, mcp_text_result(true, "%s: %s", name, why), m->req_modern);
		goto out;
	}
	if (!tool_args[t].fn) {
		/* the request's progressToken: notifications/progress while it
		 * waits */
		json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
		if (!json_is_string(token) && !json_is_integer(token))
			token = NULL;
		res = t == 0 ? mcp_run_python(m, id, token, args)
		             : mcp_wait_python(m, id, token, args);
		if (res)
			mcp_send_result(m, id, res, m->req_modern);
		goto out;
	}
	if (mcp_session_ensure(m, why, sizeof why) < 0) {
		mcp_send_result(m, id, mcp_text_result(true, "%s: %s", name, why), m->req_modern);
		goto out;
	}
	mcp_send_result(m, id, tool_args[t].fn(m, args), m->req_modern);
out:
	json_decref(empty);
}
