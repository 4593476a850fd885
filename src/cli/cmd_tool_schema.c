/* src/cli/cmd_tool_schema.c — kbox tool-schema: the definition of the
 * run-code tool that an agent gives a language model, in the format of
 * OpenAI's Chat Completions tools, Anthropic's Messages tools or an MCP
 * server's tools/list.  The same tool, three envelopes: a name, a
 * description written for a model, and a JSON Schema of its arguments
 * (code, and an optional timeout in seconds). */
#include "config.h"
#include "cli.h"
#include "runtime/functions.h"

#include <limits.h>
#include <stdio.h>
#include <wordexp.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

/* cli_result_schema_json: tests/result.schema.json, made a C string by make */
#include "src/cli/result_schema.h"

typedef enum { TOOL_OPENAI, TOOL_ANTHROPIC, TOOL_MCP } tool_format_t;

#define TOOL_NAME CLI_TOOL_NAME

/* What the description says of images: by path only, or (kbox mcp
 * --images inline) shown too. */
#define IMAGES_BY_PATH ", never as image data"
#define IMAGES_INLINE ", and shown to you as images too"

/* What the model reads: how to use the tool well. */
static const char tool_description[] =
        "Run Python code in a persistent, sandboxed Jupyter kernel and get back what it printed, "
        "its last expression's value, errors with their traceback, and the paths of any charts. "
        "State persists between calls: variables, imports and loaded data from earlier calls are "
        "still there, so build on them instead of repeating work. "
        "pandas, numpy, matplotlib and scipy are installed; there is no network access, so "
        "nothing can be downloaded or installed. "
        "Files are in the working directory /workspace (files given to the session are put there). "
        "Charts shown with matplotlib (plt.show(), or a figure as the last expression) are saved "
        "as PNG files and reported by path and size" IMAGES_BY_PATH ". "
        "Print what you want to see, and no more: long outputs are cut to their head and tail "
        "(the whole text is kept outside the sandbox, where your code cannot read it), so "
        "print summaries, slices or df.head() rather than whole tables. "
        "input() is not available: put the values in the code. "
        "Lines that kbox itself writes begin with '[' and one of the words stderr, stdout, note, "
        "image, display, input, timeout, kernel died, aborted, interrupted, files saved in, "
        "output printed, end of that output, no output, error or '...', or with \"Out[\", "
        "\"Out:\" or \"kbox\" and a command and a colon; "
        "a line of the "
        "program's output that would look like one (in any case or spelling) is shown with a "
        "backslash before it. "
        "Never compute numbers in your head: compute them with code and report what the code "
        "printed.";

const char *cli_tool_description(void)
{
	return tool_description;
}

/* The JSON Schema of the arguments (new reference). */
static json_t *parameters(void)
{
	return json_pack(
	        "{s:s, s:{s:{s:s, s:s}, s:{s:s, s:i, s:I, s:s}}, s:[s], s:b}", "type", "object",
	        "properties", "code", "type", "string", "description",
	        "The Python code to run, as a notebook cell: statements, and optionally an "
	        "expression last, whose value is shown.",
	        "timeout", "type", "number", "minimum", 0, "maximum",
	        (json_int_t)(CLI_DURATION_MAX_MS / 1000), "description",
	        "Seconds the code may run before it is interrupted (its state is kept), at most 24 "
	        "days; 0 or absent: no limit.",
	        "required", "code", "additionalProperties", 0);
}

/* The JSON Schema of the structured content of --structured text (new
 * reference): the text a model reads, the status, the execution count and
 * the images by path and size (src/mcp/run.c makes it). */
static json_t *text_schema(void)
{
	return json_pack(
	        "{s:s, s:s, s:{s:{s:s, s:s}, s:{s:[s, s, s, s, s, s, s]}, s:{s:[s, s], s:i}, "
	        "s:{s:s, s:{s:s, s:{s:{s:[s, s]}, s:{s:s}, s:{s:[s, s]}, s:{s:[s, s]}}, "
	        "s:[s, s, s, s], s:b}}}, s:[s, s, s, s], s:b}",
	        "type", "object", "description",
	        "What the model reads: the result's text (kbox-run(1), the text format), its "
	        "status (running: the call was answered while its code still runs), its "
	        "execution count and its images by path and size (kbox-mcp(1), --structured "
	        "text).",
	        "properties", "text", "type", "string", "description",
	        "The result as text: what the code printed, its value, its error, its images' "
	        "paths.",
	        "status", "enum", "ok", "error", "aborted", "timeout", "died", "interrupted",
	        "running", "execution_count", "type", "integer", "null", "minimum", 0, "images",
	        "type", "array", "items", "type", "object", "properties", "path", "type", "string",
	        "null", "mime", "type", "string", "width", "type", "integer", "null", "height",
	        "type", "integer", "null", "required", "path", "mime", "width", "height",
	        "additionalProperties", 0, "required", "text", "status", "execution_count",
	        "images", "additionalProperties", 0);
}

/* The JSON Schema of --structured full's content (new reference, or
 * NULL): the result (kbox.result/2), an object with the properties and
 * required members of "result_members" of tests/result.schema.json, no
 * others, and all its definitions ("#/$defs/..." resolve the same); or,
 * for a call answered before its code ended, the summary of --structured
 * text with the status "running".  Without "$schema" and "$id" (MCP's
 * dialect is 2020-12 unless a schema says otherwise, and validators of
 * other drafts refuse a "$schema" they do not know). */
static json_t *output_schema(void)
{
	json_t *whole = json_loads(cli_result_schema_json, 0, NULL), *out = NULL;
	json_t *defs = json_object_get(whole, "$defs");
	json_t *members = json_object_get(defs, "result_members");
	json_t *props = json_object_get(members, "properties");
	json_t *required = json_object_get(members, "required");
	if (props && required)
		out = json_pack("{s:s, s:s, s:[{s:O, s:O, s:b}, o], s:O}", "type", "object",
		                "description",
		                "The result of the execution: schema kbox.result/2 (kbox-run(1), "
		                "OUTPUT FORMATS); or, for a call answered while its code still "
		                "runs, the summary with the status running.",
		                "anyOf", "properties", props, "required", required,
		                "additionalProperties", 0, text_schema(), "$defs", defs);
	json_decref(whole);
	return out;
}

int cli_opt_structured(const char *cmd, const cli_option_t *opt, const char *arg)
{
	cli_structured_t *v = opt->value;
	if (strcmp(arg, "none") == 0)
		*v = CLI_STRUCTURED_NONE;
	else if (strcmp(arg, "text") == 0)
		*v = CLI_STRUCTURED_TEXT;
	else if (strcmp(arg, "full") == 0)
		*v = CLI_STRUCTURED_FULL;
	else {
		cli_error(cmd, "invalid --structured \"%s\": expected none, text or full", arg);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* What MCP's run_python adds to the description: kbox mcp answers a long
 * call early (src/mcp/cell.c). */
static const char mcp_description_more[] =
        " A call still running at its soft time limit (soft_timeout) returns what the code "
        "printed so far and says so: the code goes on running, and wait_python gives what it "
        "prints next and, once it ends, its whole result.";

json_t *cli_mcp_session_arg(void)
{
	return json_pack("{s:s, s:s}", "type", "string", "description",
	                 "The handle of a session new_session returned, to work in it; absent: "
	                 "this connection's own session.");
}

char *cli_functions_description(const json_t *doc)
{
	char *stubs = kr_functions_stubs(doc), *text = NULL;
	if (stubs &&
	    asprintf(
	            &text,
	            " Your code can also call these Python functions, already defined (and in "
	            "the module kbox_functions): they run outside the sandbox. Call them plainly, "
	            "as `x = f(...)`; in a statement with await they return awaitables, and "
	            "`await asyncio.gather(f(a), f(b))` runs several at once. A failed call raises "
	            "kbox_functions.FunctionError (ArgumentError when an argument breaks its "
	            "rules) whose message says what to fix.\n\n```python\n%s```",
	            stubs) < 0)
		text = NULL;
	free(stubs);
	return text;
}

bool cli_functions_given(const cli_functions_opts_t *fo)
{
	return fo && (fo->file || fo->from_mcp.n);
}

void cli_functions_opts_clear(cli_functions_opts_t *fo)
{
	cli_strlist_clear(&fo->from_mcp);
	cli_strlist_clear(&fo->allow);
}

/* NAME found on PATH, as a shell finds a command, into BUF: 0, or -1. */
static int find_on_path(const char *name, char *buf, size_t size)
{
	const char *path = getenv("PATH");
	while (path && *path) {
		size_t n = strcspn(path, ":");
		struct stat st;
		if ((size_t)snprintf(buf, size, "%.*s/%s", (int)n, n ? path : ".", name) < size &&
		    stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) {
			char real[PATH_MAX];
			if (buf[0] == '/')
				return 0;
			if (!realpath(buf, real) || strlen(real) >= size)
				return -1;
			memcpy(buf, real, strlen(real) + 1);
			return 0;
		}
		path += n + (path[n] == ':');
	}
	return -1;
}

/* The "mcp_servers" entries of --functions-from-mcp and
 * --functions-allow (new), or NULL after one line. */
static json_t *servers_of(const char *cmd, const cli_functions_opts_t *fo)
{
	json_t *servers = json_array(), *allow = json_array();
	for (size_t i = 0; servers && allow && i < fo->allow.n; i++)
		json_array_append_new(allow, json_string(fo->allow.v[i]));
	for (size_t i = 0; servers && i < fo->from_mcp.n; i++) {
		wordexp_t we;
		json_t *argv = json_array();
		char prog[PATH_MAX];
		int rc = wordexp(fo->from_mcp.v[i], &we, WRDE_NOCMD | WRDE_UNDEF);
		if (rc != 0 || we.we_wordc == 0) {
			cli_error(cmd, "--functions-from-mcp \"%s\": not a command line%s",
			          fo->from_mcp.v[i],
			          rc == WRDE_CMDSUB   ? " ($(...) and `...` are not run)"
			          : rc == WRDE_BADVAL ? " (a variable in it is not set)"
			                              : "");
			if (rc == 0)
				wordfree(&we);
			json_decref(argv);
			json_decref(servers);
			json_decref(allow);
			return NULL;
		}
		/* a name is found on PATH, as a shell finds it; a path is
		 * taken from here */
		if (!strchr(we.we_wordv[0], '/') &&
		    find_on_path(we.we_wordv[0], prog, sizeof prog) < 0) {
			cli_error(cmd, "--functions-from-mcp \"%s\": %s is not on PATH",
			          fo->from_mcp.v[i], we.we_wordv[0]);
			wordfree(&we);
			json_decref(argv);
			json_decref(servers);
			json_decref(allow);
			return NULL;
		}
		if (!strchr(we.we_wordv[0], '/'))
			json_array_append_new(argv, json_string(prog));
		else if (realpath(we.we_wordv[0], prog))
			json_array_append_new(argv, json_string(prog));
		else
			json_array_append_new(argv, json_string(we.we_wordv[0]));
		for (size_t k = 1; k < we.we_wordc; k++)
			json_array_append_new(argv, json_string(we.we_wordv[k]));
		wordfree(&we);
		json_array_append_new(servers,
		                      json_pack("{s:o, s:O}", "command", argv, "allow", allow));
	}
	json_decref(allow);
	if (!servers)
		cli_error(cmd, "out of memory");
	return servers;
}

int cli_functions_for(const char *cmd, const cli_functions_opts_t *fo, const char *name,
                      json_t **doc)
{
	kbox_error_t err = {0};
	*doc = NULL;
	if (fo && fo->allow.n && !fo->from_mcp.n) {
		cli_error(cmd, "--functions-allow is for the tools of --functions-from-mcp (a "
		               "functions file's server takes \"allow\")");
		return EXIT_USAGE;
	}
	if (cli_functions_given(fo) && name && kr_session_check_name(name, &err) == 0) {
		/* a session that exists keeps its own */
		char *home = kr_state_home(&err);
		char *dir = home ? kr_session_dir(home, name, false, &err) : NULL;
		char path[PATH_MAX + 16];
		bool exists = dir && snprintf(path, sizeof path, "%s/session.json", dir) > 0 &&
		              access(path, F_OK) == 0;
		free(dir);
		free(home);
		if (exists) {
			cli_error(cmd,
			          "warning: session %s exists: it keeps its own host functions; "
			          "--functions and --functions-from-mcp are for a new session",
			          name);
			fo = NULL;
		}
	}
	if (cli_functions_given(fo)) {
		kr_functions_t f;
		json_t *servers = servers_of(cmd, fo);
		int rc;
		if (!servers)
			return EXIT_USAGE;
		rc = kr_functions_read(&f, fo->file, servers, &err);
		json_decref(servers);
		if (rc < 0) {
			cli_error(cmd, "%s", err.msg);
			kr_functions_free(&f);
			return EXIT_USAGE;
		}
		/* the tools left out, each server's in a line */
		for (char *line = f.notes, *nl; line && *line; line = nl + 1) {
			if (!(nl = strchr(line, '\n')))
				break;
			*nl = '\0';
			cli_error(cmd, "note: %s", line);
		}
		*doc = json_incref(f.doc);
		kr_functions_free(&f);
	} else if (name && kr_session_check_name(name, &err) == 0) {
		/* an existing session's own (it is not started, nor made, here) */
		char *home = kr_state_home(&err);
		char *dir = home ? kr_session_dir(home, name, false, &err) : NULL;
		kr_session_config_t cfg;
		kr_session_config_init(&cfg);
		if (dir && kr_session_config_load(&cfg, dir, &err) == 0 && cfg.functions)
			*doc = kr_functions_doc(cfg.functions);
		kr_session_config_free(&cfg);
		free(dir);
		free(home);
	}
	return EXIT_OK;
}

json_t *cli_mcp_run_tool(cli_structured_t mode, bool images_inline, const char *more)
{
	json_t *params = parameters(), *tool;
	json_t *out = NULL;
	char *description = NULL;
	const char *by_path = strstr(tool_description, IMAGES_BY_PATH);


	if (images_inline && by_path) { /* (it is there: the description is spelt so) */
		if (asprintf(&description, "%.*s%s%s%s%s", (int)(by_path - tool_description),
		             tool_description, IMAGES_INLINE, by_path + strlen(IMAGES_BY_PATH),
		             mcp_description_more, more ? more : "") < 0)
			description = NULL;
	} else if (asprintf(&description, "%s%s%s", tool_description, mcp_description_more,
	                    more ? more : "") < 0) {
		description = NULL;
	}
	if (!description) {
		json_decref(params);
		return NULL;
	}
	json_object_set_new(
	        json_object_get(params, "properties"), "soft_timeout",
	        json_pack("{s:s, s:i, s:I, s:s}", "type", "number", "minimum", 0, "maximum",
	                  (json_int_t)(CLI_DURATION_MAX_MS / 1000), "description",
	                  "Seconds after which the call returns what the code printed so far "
	                  "while the code goes on (wait_python reads on); 0: wait for the end; "
	                  "absent: the server's default (50 s unless it was started otherwise)."));
	json_object_set_new(json_object_get(params, "properties"), "session",
	                    cli_mcp_session_arg());
	tool = json_pack("{s:s, s:s, s:s, s:o}", "name", TOOL_NAME, "title", "Run Python",
	                 "description", description, "inputSchema", params);
	free(description);
	if (!tool || mode == CLI_STRUCTURED_NONE)
		return tool;
	out = mode == CLI_STRUCTURED_TEXT ? text_schema() : output_schema();
	if (!out || json_object_set_new(tool, "outputSchema", out) < 0) {
		json_decref(tool);
		return NULL;
	}
	return tool;
}

/* The description, with MORE after it: new, or NULL. */
static char *description_with(const char *more)
{
	char *d = NULL;
	if (asprintf(&d, "%s%s", tool_description, more ? more : "") < 0)
		return NULL;
	return d;
}

json_t *cli_tool_openai(const char *more)
{
	char *d = description_with(more);
	json_t *t = d ? json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function", "function",
	                          "name", TOOL_NAME, "description", d, "parameters", parameters())
	              : NULL;
	free(d);
	return t;
}

static int format_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	tool_format_t *f = opt->value;
	if (strcmp(arg, "openai") == 0)
		*f = TOOL_OPENAI;
	else if (strcmp(arg, "anthropic") == 0)
		*f = TOOL_ANTHROPIC;
	else if (strcmp(arg, "mcp") == 0)
		*f = TOOL_MCP;
	else {
		cli_error(cmd, "invalid --format \"%s\": expected openai, anthropic or mcp", arg);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int cmd_tool_schema(int argc, char **argv)
{
	tool_format_t format = TOOL_OPENAI;
	cli_structured_t structured = CLI_STRUCTURED_NONE;
	cli_functions_opts_t fo = {0};
	json_t *doc = NULL;
	char *more = NULL, *d;
	cli_option_t opts[] = {
	        CLI_OPT_CALLBACK(0, "format", "openai|anthropic|mcp", format_cb, &format,
	                         "the envelope: OpenAI's (Chat Completions tools), Anthropic's "
	                         "(Messages tools) or MCP's (tools/list) (default: openai)"),
	        CLI_OPT_CALLBACK(0, "structured", "none|text|full", cli_opt_structured, &structured,
	                         "with --format mcp: the outputSchema of kbox mcp --structured "
	                         "MODE (default: none, no outputSchema)"),
	        CLI_OPT_FUNCTIONS(&fo, "the description the Python stubs of"), CLI_OPT_END};
	int status, n;
	json_t *tool = NULL;

	/* what it prints is JSON in every format: so are its errors, whatever
	 * the order of the options */
	cli_set_error_format(FMT_JSON);
	n = cli_parse_options("tool-schema", opts, argc, argv, &status);

	if (n < 0)
		return status;
	if ((status = cli_no_operands("tool-schema", n, argv)) != EXIT_OK)
		return status;
	if (structured != CLI_STRUCTURED_NONE && format != TOOL_MCP) {
		cli_error("tool-schema", "--structured is for --format mcp only: only an MCP tool "
		                         "has an outputSchema");
		return EXIT_USAGE;
	}
	status = cli_functions_for("tool-schema", &fo, NULL, &doc);
	cli_functions_opts_clear(&fo);
	if (status != EXIT_OK)
		return status;
	more = cli_functions_description(doc);
	json_decref(doc);
	switch (format) {
	case TOOL_OPENAI:
		tool = cli_tool_openai(more);
		break;
	case TOOL_ANTHROPIC:
		d = description_with(more);
		tool = d ? json_pack("{s:s, s:s, s:o}", "name", TOOL_NAME, "description", d,
		                     "input_schema", parameters())
		         : NULL;
		free(d);
		break;
	case TOOL_MCP:
		tool = cli_mcp_run_tool(structured, false, more);
		break;
	}
	free(more);
	if (!tool) {
		cli_error("tool-schema", "out of memory");
		return EXIT_UNAVAILABLE;
	}
	cli_print_json_line(tool);
	return EXIT_OK;
}
