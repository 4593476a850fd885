/* src/agent/agent.c — kbox agent: answer a question with a language model
 * that runs Python in a session.  The run's course: setup (the question,
 * the files, the model and its key, the session, the lock, the
 * conversation), one step after another (a response of the model and the
 * tool calls it makes), then the answer or the trace (agent_int.h says
 * which file does what).
 *
 * Host files reach the model's code only through --file.  The API key is
 * read from the environment and handed to kbox-http in its environment;
 * nothing here writes it anywhere. */
#include "config.h"
#include "agent/agent_int.h"
#include "runtime/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define AGENT_LOCK "agent.lock"
#define TRACE_SCHEMA "kbox.agent-trace/1"

/* One run: the agent, and what its setup holds. */
typedef struct {
	agent_t a;
	const agent_options_t *o;
	char *question;
	int *in;            /* the --file descriptors, -1 once closed */
	int lock;           /* SESSION_DIR/agent.lock, held */
	int step;           /* the responses that called the tool */
	char finish[64];    /* the last response's finish_reason */
	const char *answer; /* borrowed from the conversation */
	const char *word;   /* the trace's status: "answered", "max_steps", "failed" */
	bool cut;           /* the answer was cut off */
	bool made;          /* the session is new, made by this run */
} run_t;

/* ---- setup ---- */

/* Read the question: OPERAND, or standard input for "-".  New, or NULL
 * after one line. */
static char *question_of(const char *operand)
{
	char *q;
	if (strcmp(operand, "-") != 0)
		q = strdup(operand);
	else if (!cli_take_stdin()) {
		cli_error(AGENT_CMD, "standard input (-) given more than once");
		return NULL;
	} else if (!(q = cli_slurp(stdin))) {
		cli_error(AGENT_CMD, "cannot read standard input: %s", cli_slurp_strerror(errno));
		return NULL;
	}
	if (!q) {
		cli_error(AGENT_CMD, "out of memory");
		return NULL;
	}
	if (!kx_utf8_valid(q, strlen(q)) || !q[strspn(q, " \t\r\n")]) {
		cli_error(AGENT_CMD, "%s",
		          kx_utf8_valid(q, strlen(q)) ? "the question is empty"
		                                      : "the question is not valid UTF-8");
		free(q);
		return NULL;
	}
	return q;
}

/* The base name of PATH (new), or NULL. */
static char *base_of(const char *path)
{
	char *copy = strdup(path), *base = copy ? strdup(basename(copy)) : NULL;
	free(copy);
	return base;
}

/* Open each --file: readable, a regular file, with a name the workspace
 * takes, no two with the same name.  EXIT_OK, or EXIT_USAGE after one
 * line. */
static int open_files(run_t *r)
{
	const agent_options_t *o = r->o;
	kbox_error_t err = {0};

	if (o->n_files && !(r->in = calloc(o->n_files, sizeof *r->in)))
		return EXIT_USAGE;
	for (size_t i = 0; i < o->n_files; i++)
		r->in[i] = -1;
	for (size_t i = 0; i < o->n_files; i++) {
		char *name = base_of(o->files[i]);
		int ok = name && (r->in[i] = ws_source_open(o->files[i], &err)) >= 0 &&
		         ws_check_path(name, &err) == 0;
		if (!ok && name)
			cli_error(AGENT_CMD, "%s", err.msg);
		for (size_t j = 0; ok && j < i; j++) {
			char *other = base_of(o->files[j]);
			if (!other || strcmp(other, name) == 0) {
				if (other)
					cli_error(AGENT_CMD, "two --file have the name %s", name);
				ok = 0;
			}
			free(other);
		}
		free(name);
		if (!ok)
			return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* The model and the endpoint: -m or $KBOX_MODEL, --base-url or
 * $KBOX_BASE_URL or the default.  EXIT_OK, or EXIT_USAGE after one line. */
static int choose_model(run_t *r)
{
	agent_t *a = &r->a;
	const char *env = getenv("KBOX_BASE_URL");

	a->model = r->o->model ? r->o->model : getenv("KBOX_MODEL");
	if (!a->model || !*a->model) {
		cli_error(AGENT_CMD, "no model: give --model MODEL, or set KBOX_MODEL");
		return EXIT_USAGE;
	}
	if (!kx_utf8_valid(a->model, strlen(a->model))) {
		cli_error(AGENT_CMD, "the model's name is not valid UTF-8");
		return EXIT_USAGE;
	}
	if (r->o->base_url)
		return agent_set_url(a, r->o->base_url, "--base-url");
	if (env && *env)
		return agent_set_url(a, env, "KBOX_BASE_URL");
	return agent_set_url(a, AGENT_DEFAULT_BASE_URL, "the default URL");
}

/* Take SESSION_DIR/agent.lock (flock, exclusive, held until the process
 * ends): the fd, or -1 with *STATUS set after one line -- EXIT_BUSY when
 * another kbox agent holds it. */
static int take_lock(const agent_t *a, int *status)
{
	char path[PATH_MAX + 32];
	int fd;

	snprintf(path, sizeof path, "%s/%s", a->dir, AGENT_LOCK);
	*status = EXIT_UNAVAILABLE;
	if ((fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		agent_error(a, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK) {
			agent_error(a, "session %s: another kbox agent is running on it", a->name);
			*status = EXIT_BUSY;
		} else
			agent_error(a, "cannot lock %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	*status = EXIT_OK;
	return fd;
}

/* The session, started now (the files go into its workspace), the HTTP
 * helper, and the lock: one agent at a time on a session.  An exit
 * status, after one line when not EXIT_OK. */
static int open_session(run_t *r)
{
	agent_t *a = &r->a;
	int status;
	bool started = false;

	a->name = cli_session_name(r->o->session);
	if ((status = cli_check_session(AGENT_CMD, a->name)) != EXIT_OK)
		return status;
	r->made = !cli_operand_is_session(a->name);
	if (!(a->dir = cli_session_dir(AGENT_CMD, a->name, true, &status)))
		return status;
	if (!(a->http = agent_http_start(a->key)))
		return EXIT_UNAVAILABLE;
	/* (a new session is told of once it is kept: finish) */
	if (kr_session_supervisor(a->dir, NULL) != KR_SUPERVISOR_RUNNING &&
	    (status = cli_session_start(AGENT_CMD, a->dir, a->name, NULL, 0, &started, NULL)) !=
	            EXIT_OK)
		return status;
	/* after the start: a session that could not start is not left behind
	 * with a lock in it; before the files: they are the running agent's */
	if ((r->lock = take_lock(a, &status)) < 0)
		return status;
	return EXIT_OK;
}

/* Copy the --file files into the workspace, and append the user's
 * message: the question, and the files' names.  An exit status, after one
 * line when not EXIT_OK. */
static int user_message(run_t *r)
{
	const agent_options_t *o = r->o;
	kx_buf_t user = KX_BUF_INIT;
	char *text;
	int status = EXIT_OK;

	kx_buf_appends(&user, r->question);
	for (size_t i = 0; i < o->n_files && status == EXIT_OK; i++) {
		char *name = base_of(o->files[i]);
		status = name ? cli_put(AGENT_CMD, r->a.dir, r->in[i], o->files[i], name)
		              : EXIT_UNAVAILABLE;
		kx_buf_appendf(&user, "%s%s",
		               i ? ", " : "\n\nFiles in /workspace: ", name ? name : "?");
		free(name);
	}
	if (status != EXIT_OK) {
		kx_buf_reset(&user);
		return status;
	}
	if ((status = agent_conv_load(&r->a, o->reset)) != EXIT_OK) {
		kx_buf_reset(&user);
		return status;
	}
	if (!(text = kx_buf_take(&user, NULL)) || !(r->a.steps = json_array())) {
		free(text);
		return EXIT_UNAVAILABLE;
	}
	json_array_append_new(agent_messages(&r->a),
	                      json_pack("{s:s, s:s}", "role", "user", "content", text));
	free(text);
	return EXIT_OK;
}

/* Everything before the first step.  An exit status, after one line when
 * not EXIT_OK. */
static int setup(run_t *r, const char *operand)
{
	int status;

	if (!(r->question = question_of(operand)))
		return EXIT_USAGE;
	/* (a usage error of the command line first: newcomer 11, F12) */
	if ((status = cli_check_session(AGENT_CMD, cli_session_name(r->o->session))) != EXIT_OK)
		return status;
	if ((status = open_files(r)) != EXIT_OK || (status = choose_model(r)) != EXIT_OK)
		return status;
	if ((status = agent_take_key(&r->a)) != EXIT_OK)
		return status;
	/* the hosted default wants a key: without one, nothing is sent */
	if (!r->a.key && !r->o->base_url &&
	    !(getenv("KBOX_BASE_URL") && *getenv("KBOX_BASE_URL"))) {
		cli_error(
		        AGENT_CMD,
		        "no API key for %s: set KBOX_API_KEY or OPENAI_API_KEY, or give --base-url "
		        "(or KBOX_BASE_URL) for a server that needs none",
		        AGENT_DEFAULT_BASE_URL);
		return EXIT_USAGE;
	}
	r->a.tty = isatty(STDERR_FILENO);
	/* the host functions: of --functions FILE, for the session it starts,
	 * or the session's own; the model reads their stubs */
	if ((status = cli_functions_for(AGENT_CMD, r->o->functions, cli_session_name(r->o->session),
	                                &r->a.functions)) != EXIT_OK)
		return status;
	if (cli_functions_given(r->o->functions))
		cli_set_new_session_functions(r->a.functions);
	r->a.functions_text = cli_functions_description(r->a.functions);
	r->a.type_check = r->o->type_check;
	if (r->a.type_check && !r->a.functions) {
		cli_error(AGENT_CMD,
		          "--type-check checks the calls of host functions, and there are "
		          "none (see kbox-functions(5))");
		return EXIT_USAGE;
	}
	if ((status = open_session(r)) != EXIT_OK)
		return status;
	return user_message(r);
}

/* ---- the steps ---- */

/* The model's response MSG, kept as KEPT (taken), called no tool: its
 * answer, kept in the conversation, ends the run; a refusal or nothing is
 * a failure (the refusal is kept: the next question goes on after it).
 * EXIT_OK, or another status after one line. */
static int answered(run_t *r, const json_t *msg, json_t *kept)
{
	agent_t *a = &r->a;
	const char *content = json_string_value(json_object_get(kept, "content"));
	const char *refusal = json_string_value(json_object_get(msg, "refusal"));
	char line[1024];
	int status;

	if (content && *content) {
		json_array_append_new(agent_messages(a), kept);
		r->answer = content;
		if ((status = agent_conv_save(a)) != EXIT_OK)
			return status;
		r->word = "answered";
		r->cut = strcmp(r->finish, "length") == 0 ||
		         strcmp(r->finish, "content_filter") == 0;
		return EXIT_OK;
	}
	if (refusal && *refusal) {
		json_object_set_new(kept, "content", json_string(refusal));
		json_array_append_new(agent_messages(a), kept);
		agent_one_line(a, refusal, line, sizeof line);
		agent_error(a, "the model refused: %s", line);
	} else {
		/* an assistant message needs content or tool calls: none is kept */
		json_decref(kept);
		agent_error(a, "the model gave no answer (finish_reason: %s)",
		            *r->finish ? r->finish : "none");
	}
	agent_conv_save(a);
	return EXIT_UNAVAILABLE;
}

/* One step: a response of the model, and the tool calls it makes (at
 * most AGENT_MAX_CALLS), run and kept; *DONE when it answered instead.
 * EXIT_OK, or another status after one line: EXIT_STEP_LIMIT after
 * --max-steps responses that called the tool. */
static int step(run_t *r, bool *done)
{
	agent_t *a = &r->a;
	json_t *msg, *kept, *calls, *call, *content;
	int status;
	size_t i;

	if (!(msg = agent_ask(a, r->finish, sizeof r->finish, &status)))
		return status;
	if (!(kept = agent_assistant_message(msg, r->step + 1))) {
		agent_error(a, "out of memory");
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	calls = json_object_get(kept, "tool_calls");
	if (!json_array_size(calls)) {
		*done = true;
		status = answered(r, msg, kept);
		goto out;
	}
	json_array_append_new(agent_messages(a), kept);
	r->step++;
	content = json_object_get(kept, "content");
	if (json_is_string(content) && *json_string_value(content)) {
		char tag[32];
		snprintf(tag, sizeof tag, "[step %d] model: ", r->step);
		agent_show_lines(tag, json_string_value(content));
	}
	json_array_foreach(calls, i, call)
	{
		status = i < AGENT_MAX_CALLS ? agent_tool_call(a, r->step, call)
		                             : agent_not_run(a, r->step, call);
		if (status != EXIT_OK)
			goto out;
	}
	if (json_array_size(calls) > AGENT_MAX_CALLS)
		fprintf(stderr,
		        "[step %d] %zu more tool calls not run: at most %d of a response "
		        "are\n",
		        r->step, json_array_size(calls) - AGENT_MAX_CALLS, AGENT_MAX_CALLS);
	if ((status = agent_conv_save(a)) != EXIT_OK)
		goto out;
	if (r->step >= a->max_steps) {
		agent_error(a,
		            "no answer after %d step%s (--max-steps %d); the conversation is "
		            "kept: kbox agent -s %s QUESTION goes on with it",
		            r->step, r->step == 1 ? "" : "s", a->max_steps, a->name);
		r->word = "max_steps";
		status = EXIT_STEP_LIMIT;
	}
out:
	json_decref(msg);
	return status;
}

/* ---- the end ---- */

/* Print the trace (--format json): STATUS_WORD, the ANSWER (may be NULL),
 * and ERROR (may be NULL, with its KIND). */
static void print_trace(agent_t *a, const char *status_word, const char *answer, const char *kind,
                        const char *error)
{
	json_t *t = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:O, s:{s:I, s:I, s:I}, s:i}", "schema",
	                      TRACE_SCHEMA, "status", status_word, "session", a->name, "model",
	                      a->model, "answer", answer, "steps", a->steps, "usage",
	                      "prompt_tokens", (json_int_t)a->usage[0], "completion_tokens",
	                      (json_int_t)a->usage[1], "total_tokens", (json_int_t)a->usage[2],
	                      "requests", a->requests);
	if (t && !answer)
		json_object_set_new(t, "answer", json_null());
	if (t && error)
		json_object_set_new(t, "error",
		                    json_pack("{s:s, s:s}", "kind", kind, "message", error));
	cli_print_json_line(t);
}

/* Print the answer (as text; --format json: in the trace), or the trace,
 * after a run that came to STATUS; free what R holds.  The exit status. */
static int finish(run_t *r, int status)
{
	agent_t *a = &r->a;
	cli_set_new_session_functions(NULL);
	json_decref(a->functions);
	a->functions = NULL;
	free(a->functions_text);
	a->functions_text = NULL;
	/* a session this run made, and ran no code in (the model could not
	 * be reached, say): not left behind */
	bool discard = status != EXIT_OK && r->made && a->dir && access(a->dir, F_OK) == 0 &&
	               json_array_size(a->steps) == 0;

	if (status == EXIT_OK && a->format == FMT_TEXT) {
		size_t len = strlen(r->answer);
		if (isatty(STDOUT_FILENO))
			cli_write_safe(stdout, r->answer, len);
		else
			fwrite(r->answer, 1, len, stdout);
		if (!len || r->answer[len - 1] != '\n')
			putchar('\n');
		fflush(stdout);
	}
	if (status == EXIT_OK && r->cut) {
		agent_error(a,
		            "the answer was cut off (finish_reason %s); it is printed as it came",
		            r->finish);
		status = EXIT_UNAVAILABLE;
		r->word = "failed";
	}
	if (a->format == FMT_JSON && a->steps)
		print_trace(a, r->word, r->answer, cli_error_kind(status),
		            status == EXIT_OK || status == EXIT_STEP_LIMIT ? NULL
		                                                           : cli_first_error());
	/* (while the key is there to hide) */
	if (!discard && r->made && a->dir && access(a->dir, F_OK) == 0)
		agent_error(a, "session %s is new: it stays (kbox ls lists the sessions)", a->name);
	agent_http_destroy(&a->http);
	json_decref(a->conv);
	json_decref(a->steps);
	for (size_t i = 0; r->in && i < r->o->n_files; i++)
		if (r->in[i] >= 0)
			close(r->in[i]);
	free(r->in);
	free(r->question);
	if (a->key) {
		explicit_bzero(a->key, strlen(a->key));
		free(a->key);
	}
	if (r->lock >= 0)
		close(r->lock);
	if (discard)
		cli_session_discard(AGENT_CMD, a->dir, a->name, 90000);
	free(a->dir);
	return status;
}

int agent_run(const agent_options_t *o, const char *question)
{
	run_t r = {.o = o, .lock = -1, .word = "failed"};
	bool done = false;
	int status;

	r.a.timeout_ms = o->timeout_ms;
	r.a.max_steps = o->max_steps;
	r.a.format = o->format;
	status = setup(&r, question);
	while (status == EXIT_OK && !done)
		status = step(&r, &done);
	return finish(&r, status);
}
