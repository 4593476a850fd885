/* src/cli/engine.c — running kbox-engine, the docker backend's helper
 * (src/engine/engine_proto.h), for the commands that ask a container
 * engine something: kbox doctor --backend docker and kbox image. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The most of kbox-engine's answer read: one line of JSON. */
#define ANSWER_MAX (4L << 20)

int cli_engine_call(const char *cmd, char *const *args, json_t **out, char *why, size_t size)
{
	char exe[PATH_MAX], chunk[8192];
	char *argv[8] = {"kbox-engine"};
	size_t k = 1;
	kx_buf_t buf = {0};
	int p[2], st;
	pid_t pid;
	ssize_t r;
	bool cut = false;

	*out = NULL;
	if (cli_find_program(cmd, "kbox-engine", "the docker backend's helper", exe, sizeof exe) <
	    0) {
		snprintf(why, size, "kbox-engine is not installed beside kbox");
		return -1;
	}
	for (; args[k - 1] && k < 7; k++)
		argv[k] = args[k - 1];
	argv[k] = NULL;
	if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		snprintf(why, size, "cannot run kbox-engine: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);
		dup2(p[1], 1);
		if (devnull >= 0)
			dup2(devnull, 2);
		execv(exe, argv);
		_exit(127);
	}
	close(p[1]);
	while ((r = read(p[0], chunk, sizeof chunk)) > 0 || (r < 0 && errno == EINTR)) {
		if (r <= 0)
			continue;
		if (buf.len + (size_t)r > ANSWER_MAX || kx_buf_append(&buf, chunk, (size_t)r) < 0)
			cut = true; /* (read on: the helper must not block on a full pipe) */
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (cut) {
		snprintf(why, size, "kbox-engine's answer was larger than %ld bytes", ANSWER_MAX);
		kx_buf_reset(&buf);
		return -1;
	}
	if (!buf.data || !(*out = json_loadb(buf.data, buf.len, JSON_DISABLE_EOF_CHECK, NULL))) {
		snprintf(why, size, "kbox-engine said nothing it should (exit status %d)",
		         WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		kx_buf_reset(&buf);
		return -1;
	}
	kx_buf_reset(&buf);
	const char *m = json_string_value(
	        json_object_get(json_object_get(*out, "error"), "message"));
	if (m) {
		snprintf(why, size, "%s", m);
		return -1;
	}
	return 0;
}
