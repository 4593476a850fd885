/* src/agent/conversation.c — kbox agent's conversation: the messages sent
 * to the model, kept with the session in SESSION_DIR/agent.json (schema
 * kbox.agent/1, mode 0600), so that a later kbox agent -s NAME goes on
 * with it, and with the kernel's state; this run's system message; the
 * assistant messages kept of the model's responses. */
#include "config.h"
#include "agent/agent_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AGENT_FILE "agent.json"
#define AGENT_SCHEMA "kbox.agent/1"

/* What the model is told first, before the tool's own description. */
static const char system_intro[] =
        "You are a data analyst. You answer the user's questions by running Python with the "
        "tool run_python, then reply with the answer in plain text (without calling the tool) "
        "once you have it. The user's files, if any, are named in their message. ";

/* Whether J is a conversation this program wrote. */
static bool is_conversation(const json_t *j)
{
	const json_t *msgs = json_object_get(j, "messages"), *m;
	size_t i;
	if (!json_is_object(j) || !json_is_array(msgs) ||
	    !json_is_string(json_object_get(j, "schema")) ||
	    strcmp(json_string_value(json_object_get(j, "schema")), AGENT_SCHEMA) != 0)
		return false;
	json_array_foreach(msgs, i,
	                   m) if (!json_is_string(json_object_get(m, "role"))) return false;
	return true;
}

/* The system message of this run (new, or NULL): the intro, the limit
 * of -t when there is one (the tool's description says "no limit" for no
 * timeout, which -t overrides), the tool's description. */
static char *system_text(const agent_t *a)
{
	char limit[160] = "";
	size_t n;
	char *sys;
	if (a->timeout_ms > 0)
		snprintf(limit, sizeof limit,
		         "Each call of %s is interrupted after %g seconds at "
		         "most; a \"timeout\" argument can only make that shorter. ",
		         CLI_TOOL_NAME, (double)a->timeout_ms / 1000.0);
	n = sizeof system_intro + strlen(limit) + strlen(cli_tool_description());
	if ((sys = malloc(n)))
		snprintf(sys, n, "%s%s%s", system_intro, limit, cli_tool_description());
	return sys;
}

/* Make the conversation CONV one an OpenAI server takes: an assistant
 * message without tool calls needs a content (older versions kept null). */
static void conv_repair(json_t *conv)
{
	json_t *m;
	size_t i;
	json_array_foreach(
	        json_object_get(conv, "messages"), i,
	        m) if (strcmp(json_string_value(json_object_get(m, "role")), "assistant") == 0 &&
	               !json_array_size(json_object_get(m, "tool_calls")) &&
	               !json_is_string(json_object_get(m, "content")))
	        json_object_set_new(m, "content", json_string(""));
}

int agent_conv_load(agent_t *a, bool reset)
{
	char path[PATH_MAX + 32];
	json_error_t je;
	json_t *j = NULL;
	int fd;

	snprintf(path, sizeof path, "%s/%s", a->dir, AGENT_FILE);
	if (!reset && (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		j = json_loadfd(fd, 0, &je);
		close(fd);
		if (!is_conversation(j)) {
			agent_error(
			        a,
			        "%s is not a conversation of kbox agent (%s); start a new one with "
			        "--reset",
			        path, j ? "not " AGENT_SCHEMA : je.text);
			json_decref(j);
			return EXIT_UNAVAILABLE;
		}
	} else if (!reset && errno != ENOENT) {
		agent_error(a, "cannot read %s: %s", path, strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	{
		char *sys = system_text(a);
		json_t *first = json_array_get(json_object_get(j, "messages"), 0);
		if (!j)
			j = sys ? json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "schema", AGENT_SCHEMA,
			                    "model", a->model, "messages", "role", "system",
			                    "content", sys)
			        : NULL;
		else if (sys && first &&
		         strcmp(json_string_value(json_object_get(first, "role")), "system") == 0)
			json_object_set_new(first, "content",
			                    json_string(sys)); /* ours: made anew */
		free(sys);
		if (!j || !sys) {
			agent_error(a, "out of memory");
			json_decref(j);
			return EXIT_UNAVAILABLE;
		}
	}
	conv_repair(j);
	json_object_set_new(j, "model", json_string(a->model));
	a->conv = j;
	return EXIT_OK;
}

int agent_conv_save(agent_t *a)
{
	char path[PATH_MAX + 32];
	char *text = json_dumps(a->conv, JSON_COMPACT), *line = NULL;
	size_t len;
	int status = EXIT_UNAVAILABLE;

	snprintf(path, sizeof path, "%s/%s", a->dir, AGENT_FILE);
	if (!text || asprintf(&line, "%s\n", text) < 0) {
		line = NULL;
		agent_error(a, "out of memory");
	} else if (len = strlen(line),
	           kx_write_atomic(AT_FDCWD, path, line, len, 0600, KX_DURABLE) < 0)
		agent_error(a, "cannot write %s: %s", path, strerror(errno));
	else
		status = EXIT_OK;
	free(line);
	free(text);
	return status;
}

json_t *agent_messages(agent_t *a)
{
	return json_object_get(a->conv, "messages");
}

json_t *agent_assistant_message(const json_t *msg, int step)
{
	json_t *calls = json_object_get(msg, "tool_calls"), *keep = json_array(), *c;
	const json_t *content = json_object_get(msg, "content");
	json_t *out;
	size_t i;

	json_array_foreach(calls, i, c)
	{
		json_t *fn = json_object_get(c, "function");
		json_t *args = json_object_get(fn, "arguments");
		char id[64], *dumped = NULL;
		if (!json_is_object(fn))
			continue;
		if (!json_is_string(json_object_get(c, "id")))
			snprintf(id, sizeof id, "call_%d_%zu", step, i + 1);
		json_array_append_new(
		        keep, json_pack("{s:s, s:s, s:{s:O?, s:o}}", "id",
		                        json_is_string(json_object_get(c, "id"))
		                                ? json_string_value(json_object_get(c, "id"))
		                                : id,
		                        "type", "function", "function", "name",
		                        json_object_get(fn, "name"), "arguments",
		                        json_is_string(args) ? json_incref(args)
		                        : args && (dumped = json_dumps(args, JSON_COMPACT))
		                                ? json_string(dumped)
		                                : json_string("{}")));
		free(dumped);
	}
	out = json_pack("{s:s, s:O}", "role", "assistant", "content",
	                json_is_string(content) ? content : json_null());
	if (out && json_array_size(keep))
		json_object_set(out, "tool_calls", keep);
	json_decref(keep);
	return out;
}
