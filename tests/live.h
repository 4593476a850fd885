/* tests/live.h — helpers shared by the tests that run a real Debian ipykernel:
 * finding the kernelspec, private runtime directories, starting a kernel,
 * and reading stream text, results and errors out of a kbox_exec_t.
 *
 * Everything here is static inline so that each test program uses what it
 * needs without unused-function warnings.  Only the public API is used. */
#ifndef KBOX_TESTS_LIVE_H
#define KBOX_TESTS_LIVE_H

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <kbox.h>
#include "tmpdir.h"

/* The Debian kernelspec directory; put first on JUPYTER_PATH so that a
 * "python3" spec of some other Python cannot win. */
#define LIVE_DEBIAN_JUPYTER "/usr/share/jupyter"
/* How long a kernel may take to become ready. */
#define LIVE_READY_MS 30000
/* Default deadline for one execution in the tests. */
#define LIVE_EXEC_MS 20000

/* Monotonic clock in milliseconds. */
static inline long long live_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Case-insensitive: does HAY contain NEEDLE?  NULLs never match. */
static inline int live_icontains(const char *hay, const char *needle)
{
	size_t n;

	if (!hay || !needle)
		return 0;
	n = strlen(needle);
	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return 1;
	return n == 0;
}

#define live_mkdtemp test_mkdtemp
#define live_rm_rf test_rm_rf

/* Number of entries in DIR other than "." and "..", listing them on stdout
 * as TAP comments when SHOW; -1 if DIR cannot be read. */
static inline int live_dir_entries(const char *dir, bool show)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (show)
			printf("# left in %s: %s\n", dir, e->d_name);
		n++;
	}
	closedir(d);
	return n;
}

/* Write TEXT to DIR/NAME (created or truncated).  0 or -1. */
static inline int live_write_file(const char *dir, const char *name, const char *text)
{
	char path[4096];
	FILE *f;
	int rc = 0;

	if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
		return -1;
	f = fopen(path, "w");
	if (!f)
		return -1;
	if (fputs(text, f) == EOF)
		rc = -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

/* Make DIR/NAME (mode 0700) holding a kernel.json with TEXT and load it as
 * a kernelspec.  NULL with ERR on failure. */
static inline kbox_kspec_t *live_make_kspec(const char *dir, const char *name, const char *text,
                                            kbox_error_t *err)
{
	char path[4096];

	if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
		return NULL;
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return NULL;
	if (live_write_file(path, "kernel.json", text) != 0)
		return NULL;
	return kbox_kspec_load(path, err);
}

/* The Debian "python3" kernelspec, found through kbox_kspec_find with
 * /usr/share/jupyter first on JUPYTER_PATH.  NULL (with a TAP comment) when
 * it is not installed or runs something other than /usr/bin/python3. */
static inline kbox_kspec_t *live_python3(void)
{
	kbox_error_t err = {0};
	kbox_kspec_t *spec;
	char *const *argv;

	setenv("JUPYTER_PATH", LIVE_DEBIAN_JUPYTER, 1);
	spec = kbox_kspec_find("python3", &err);
	if (!spec) {
		printf("# kbox_kspec_find(python3): %s\n", err.msg);
		return NULL;
	}
	argv = kbox_kspec_argv(spec);
	if (!argv || !argv[0] || strcmp(argv[0], "/usr/bin/python3") != 0) {
		printf("# python3 kernelspec in %s runs %s, not /usr/bin/python3\n",
		       kbox_kspec_resource_dir(spec), argv && argv[0] ? argv[0] : "(nothing)");
		kbox_kspec_destroy(&spec);
	}
	return spec;
}

/* Start SPEC in RUNDIR (an existing 0700 directory) and wait until ready.
 * *CLIENT_P gets a client with the kernel's hooks.  NULL with ERR. */
static inline kbox_kernel_t *live_start(const kbox_kspec_t *spec, const char *rundir,
                                        kbox_client_t **client_p, kbox_error_t *err)
{
	kbox_kernel_opts_t opts = {0};

	opts.runtime_dir = rundir;
	opts.log_path = getenv("LIVE_KERNEL_LOG"); /* for debugging; NULL → /dev/null */
	return kbox_kernel_start_ready(spec, &opts, LIVE_READY_MS, client_p, err);
}

/* Execute CODE on CLIENT with collect=true and a deadline of TIMEOUT_MS.
 * Prints the error as a TAP comment when the request could not be sent. */
static inline kbox_exec_t *live_run(kbox_client_t *client, const char *code, int timeout_ms)
{
	kbox_exec_opts_t opts = {0};
	kbox_error_t err = {0};
	kbox_exec_t *ex;

	opts.code = code;
	opts.collect = true;
	opts.timeout_ms = timeout_ms;
	ex = kbox_client_execute(client, &opts, &err);
	if (!ex)
		printf("# execute %s: %s\n", code, err.msg);
	return ex;
}

/* The first collected output of MSG_TYPE, or NULL.  Borrowed. */
static inline const kbox_msg_t *live_output(const kbox_exec_t *ex, const char *msg_type)
{
	size_t i;

	for (i = 0; i < kbox_exec_output_count(ex); i++) {
		const kbox_msg_t *m = kbox_exec_output(ex, i);
		if (!strcmp(kbox_msg_type(m), msg_type))
			return m;
	}
	return NULL;
}

/* Number of collected outputs of MSG_TYPE. */
static inline size_t live_output_count(const kbox_exec_t *ex, const char *msg_type)
{
	size_t i, n = 0;

	for (i = 0; i < kbox_exec_output_count(ex); i++)
		if (!strcmp(kbox_msg_type(kbox_exec_output(ex, i)), msg_type))
			n++;
	return n;
}

/* content.data[MIME] of the first output of MSG_TYPE ("execute_result",
 * "display_data"), or NULL.  Borrowed. */
static inline const char *live_data(const kbox_exec_t *ex, const char *msg_type, const char *mime)
{
	const kbox_msg_t *m = live_output(ex, msg_type);

	if (!m)
		return NULL;
	return json_string_value(
	        json_object_get(json_object_get(kbox_msg_content(m), "data"), mime));
}

/* The execute_result's text/plain, or NULL.  Borrowed. */
static inline const char *live_result(const kbox_exec_t *ex)
{
	return live_data(ex, "execute_result", "text/plain");
}

/* All stream text of stream NAME ("stdout", "stderr") in arrival order,
 * concatenated.  Caller frees.  Never NULL except on allocation failure. */
static inline char *live_stream(const kbox_exec_t *ex, const char *name)
{
	size_t i, len = 0;
	char *out = calloc(1, 1);

	for (i = 0; out && i < kbox_exec_output_count(ex); i++) {
		const kbox_msg_t *m = kbox_exec_output(ex, i);
		json_t *c = kbox_msg_content(m);
		const char *stream = json_string_value(json_object_get(c, "name"));
		const char *text;
		size_t n;
		char *grown;

		if (strcmp(kbox_msg_type(m), "stream") != 0 || !stream || strcmp(stream, name) != 0)
			continue;
		text = json_string_value(json_object_get(c, "text"));
		if (!text)
			continue;
		n = strlen(text);
		grown = realloc(out, len + n + 1);
		if (!grown) {
			free(out);
			return NULL;
		}
		out = grown;
		memcpy(out + len, text, n + 1);
		len += n;
	}
	return out;
}

/* CONTENT's "traceback" lines joined with newlines and with ANSI colour
 * escapes removed.  Caller frees.  "" when there is none. */
static inline char *live_traceback(json_t *content)
{
	json_t *tb = json_object_get(content, "traceback");
	size_t i, len = 0, cap = 1;
	char *out;

	for (i = 0; i < json_array_size(tb); i++)
		cap += json_string_length(json_array_get(tb, i)) + 1;
	out = malloc(cap);
	if (!out)
		return NULL;
	for (i = 0; i < json_array_size(tb); i++) {
		const char *s = json_string_value(json_array_get(tb, i));
		for (; s && *s; s++) {
			if (s[0] == '\x1b' && s[1] == '[') {
				s += 2;
				while (*s && !((*s >= '@' && *s <= '~')))
					s++;
				if (!*s)
					break;
				continue;
			}
			out[len++] = *s;
		}
		out[len++] = '\n';
	}
	out[len] = '\0';
	return out;
}

/* A string member of the execute_reply's content, or NULL.  Borrowed. */
static inline const char *live_reply_str(const kbox_exec_t *ex, const char *key)
{
	const kbox_msg_t *r = kbox_exec_reply(ex);

	if (!r)
		return NULL;
	return json_string_value(json_object_get(kbox_msg_content(r), key));
}

#endif
