/* src/runtime/backend_gateway.c — backend `gateway`: the kernel on a
 * remote Jupyter Server, Kernel Gateway or Enterprise Gateway.  The server
 * is spoken to by kbox-gateway, a helper this backend runs for each kernel
 * (src/gateway/gateway_proto.h): the helper is the sandbox's process
 * (sb->pid); it starts the remote kernel, connects its channels, and binds
 * the sockets of the connection file given it in a directory of the
 * host's, as backend none's kernel does, so the supervisor talks to it as
 * to any kernel.  It deletes the remote kernel when told to, at its end
 * of file, or when the supervisor dies (its parent-death signal SIGTERM).
 *
 * Where the kernel runs, and how it is isolated, is the server's: kbox
 * enforces none of its limits. */
#include "runtime/runtime.h"
#include "runtime/backend.h"
#include "runtime/helper.h"
#include "runtime/session_config.h"
#include "gateway/gateway_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long cleanup waits for the helper to delete the remote kernel, ms. */
#define DELETE_WAIT_MS 40000

typedef struct {
	kr_helper_t h; /* the helper: its commands, its status lines */
	char id[80];
	bool started, exited, failed, deleted, by_kbox;
	char exe[PATH_MAX];
	char error[700];
	char cause[520];
} gateway_t;

/* The helper's environment: PATH, and the loader's path when the
 * supervisor has one (a build tree's libtool wrapper sets it: the helper
 * links libkbox.so).  Static: made once, before any fork. */
static char **helper_env(void)
{
	static char path[] = "PATH=" KX_SAFE_PATH, ld[PATH_MAX + 32];
	static char *env[3];
	const char *v = getenv("LD_LIBRARY_PATH");
	env[0] = path;
	env[1] = NULL;
	if (v && *v && strlen(v) < PATH_MAX) {
		snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", v);
		env[1] = ld;
	}
	return env;
}

typedef struct {
	const char *exe;
	int cmd_fd, status_fd, dir_fd, log_fd;
	pid_t parent;
	char **env;
} gateway_child_t;

static void gateway_child(void *arg, int errfd)
{
	gateway_child_t *c = arg;
	static char *argv[] = {KG_PROGRAM, "run", NULL};
	int keep[2] = {KG_STATUS_FD, KG_SOCKETS_FD}, status_fd = c->status_fd, dir_fd = c->dir_fd,
	    log_fd = c->log_fd, e;
	/* what is at 3 and 4 moves out of the way first */
	if (errfd <= KG_SOCKETS_FD && (errfd = fcntl(errfd, F_DUPFD_CLOEXEC, 5)) < 0)
		_exit(127);
	if (log_fd >= 0 && log_fd <= KG_SOCKETS_FD &&
	    (log_fd = fcntl(log_fd, F_DUPFD_CLOEXEC, 5)) < 0)
		goto fail;
	if (dir_fd == KG_STATUS_FD && (dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 5)) < 0)
		goto fail;
	if (c->cmd_fd <= KG_SOCKETS_FD)
		goto fail; /* (pipes made after the directory's descriptor: never here) */
	if ((status_fd != KG_STATUS_FD && dup2(status_fd, KG_STATUS_FD) < 0) ||
	    (dir_fd != KG_SOCKETS_FD && dup2(dir_fd, KG_SOCKETS_FD) < 0))
		goto fail;
	kx_child_t child = {.errfd = errfd,
	                    .out_fd = log_fd,
	                    .in_fd = c->cmd_fd,
	                    .parent = c->parent,
	                    .keep = keep,
	                    .n_keep = 2,
	                    .pdeath_sig = SIGTERM};
	kx_child_exec(c->exe, argv, c->env, &child);
fail:
	e = errno;
	if (write(errfd, &e, sizeof e) < 0)
		_exit(127);
	_exit(127);
}

/* The two lines kbox-gateway run reads first: the server, and the run.
 * A new string (it holds the token and the key), or NULL. */
static char *make_spec(const kr_sandbox_t *sb)
{
	json_t *server = json_pack("{s:s, s:s?, s:s?}", "url", sb->o.gateway_url, "token",
	                           sb->o.gateway_token, "ca_file", sb->o.gateway_ca);
	json_t *env = json_object(), *conn = json_loads(sb->o.conn_text, 0, NULL), *run;
	char *a = NULL, *b = NULL, *text = NULL;

	/* the session's environment: what Enterprise Gateway passes to the
	 * kernel (KERNEL_USERNAME, KERNEL_NAMESPACE, ...); Jupyter Server
	 * ignores it */
	for (size_t i = 0; sb->o.env && sb->o.env[i]; i++) {
		const char *eq = strchr(sb->o.env[i], '=');
		if (eq) {
			char name[256];
			snprintf(name, sizeof name, "%.*s", (int)(eq - sb->o.env[i]), sb->o.env[i]);
			json_object_set_new(env, name, json_string(eq + 1));
		}
	}
	/* what Enterprise Gateway wants of every client (as jupyter_server's
	 * GatewayClient sends it), unless the session says otherwise */
	if (!json_object_get(env, "KERNEL_USERNAME")) {
		struct passwd *pw = getpwuid(geteuid());
		if (pw && pw->pw_name)
			json_object_set_new(env, "KERNEL_USERNAME", json_string(pw->pw_name));
	}
	if (!json_object_get(env, "KERNEL_LAUNCH_TIMEOUT")) {
		char t[32];
		snprintf(t, sizeof t, "%ld",
		         sb->o.launch_s > 0 ? sb->o.launch_s : KG_LAUNCH_TIMEOUT_S);
		json_object_set_new(env, "KERNEL_LAUNCH_TIMEOUT", json_string(t));
	}
	run = json_pack("{s:s, s:o, s:I, s:b, s:s?, s:o}", "kernel", sb->kernel, "env", env,
	                "launch_timeout",
	                (json_int_t)(sb->o.launch_s > 0 ? sb->o.launch_s : KG_LAUNCH_TIMEOUT_S),
	                "legacy", sb->o.gateway_legacy, "dir", sb->o.gateway_dir, "connection",
	                conn);
	if (run && sb->o.gateway_sweep && *sb->o.gateway_sweep) {
		json_t *ids = json_array();
		const char *p = sb->o.gateway_sweep, *sp;
		while ((sp = strchr(p, ' '))) {
			json_array_append_new(ids, json_stringn(p, (size_t)(sp - p)));
			p = sp + 1;
		}
		json_object_set_new(run, "sweep", ids);
	}
	if (server && run && (a = json_dumps(server, JSON_COMPACT)) &&
	    (b = json_dumps(run, JSON_COMPACT)) && asprintf(&text, "%s\n%s\n", a, b) < 0)
		text = NULL;
	if (a)
		explicit_bzero(a, strlen(a));
	if (b)
		explicit_bzero(b, strlen(b));
	free(a);
	free(b);
	json_decref(server);
	json_decref(run);
	return text;
}

static int gateway_start(kr_sandbox_t *sb, char **argv, kbox_error_t *err)
{
	int cmd[2] = {-1, -1}, status[2] = {-1, -1}, dir_fd = -1, child_errno, f, rc = -1;
	char *spec = NULL;
	gateway_t *g;
	(void)argv; /* (the kernel's command line is the server's) */

	if (!(g = calloc(1, sizeof *g)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	kr_helper_init(&g->h);
	sb->priv = g;
	if (!sb->o.gateway_url || !*sb->o.gateway_url) {
		kbox_error_set(
		        err, KBOX_E_INVALID,
		        "backend gateway: no server (kbox start --url, or KBOX_GATEWAY_URL)");
		goto out;
	}
	if (kx_helper_path(KG_PROGRAM, g->exe, sizeof g->exe) < 0) {
		kbox_error_set(err, KBOX_E_NOTFOUND,
		               "backend gateway: its helper " KG_PROGRAM
		               " was not found beside kbox-supervisor (is kbox installed whole?)");
		goto out;
	}
	dir_fd = open(sb->o.runtime_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0) {
		kbox_error_set_sys(err, "backend gateway: directory %s", sb->o.runtime_dir);
		goto out;
	}
	if (!(spec = make_spec(sb))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto out;
	}
	if (pipe2(cmd, O_CLOEXEC) < 0 || pipe2(status, O_CLOEXEC) < 0) {
		kbox_error_set_sys(err, "backend gateway: pipe");
		goto out;
	}
	gateway_child_t c = {g->exe,       cmd[0],   status[1],   dir_fd,
	                     sb->o.log_fd, getpid(), helper_env()};
	if ((f = kr_sandbox_fork(sb, gateway_child, &c, &child_errno, err)) < 0)
		goto out;
	if (f > 0) {
		errno = child_errno;
		kbox_error_set_sys(err, "backend gateway: cannot run %s", g->exe);
		goto out;
	}
	kx_close(&cmd[0]);
	kx_close(&status[1]);
	g->h.cmd_fd = cmd[1];
	g->h.status_fd = status[0];
	cmd[1] = status[0] = -1;
	fcntl(g->h.status_fd, F_SETFL, fcntl(g->h.status_fd, F_GETFL) | O_NONBLOCK);
	/* the two lines, in one write: a pipe takes 64 KiB before it blocks */
	if (kx_write_all(g->h.cmd_fd, spec, strlen(spec)) < 0) {
		kbox_error_set_sys(err, "backend gateway: cannot give " KG_PROGRAM " its spec");
		goto out;
	}
	sb->sockets_fd = dir_fd; /* the host's way to the sockets */
	dir_fd = -1;
	snprintf(sb->limits, sizeof sb->limits, "the Jupyter server's (%s)", sb->o.gateway_url);
	rc = 0;
out:
	kx_close_all(cmd, 2);
	kx_close_all(status, 2);
	kx_close(&dir_fd);
	if (spec) {
		explicit_bzero(spec, strlen(spec));
		free(spec);
	}
	return rc;
}

/* Act on one status line of the helper's. */
static void status_line(kr_sandbox_t *sb, gateway_t *g, const char *line)
{
	json_t *j = json_loads(line, 0, NULL), *v;
	const char *m;
	if ((v = json_object_get(j, "started"))) {
		m = json_string_value(json_object_get(v, "id"));
		snprintf(g->id, sizeof g->id, "%s", m ? m : "");
		snprintf(sb->remote_id, sizeof sb->remote_id, "%s", g->id);
		m = json_string_value(json_object_get(v, "dir"));
		snprintf(sb->remote_dir, sizeof sb->remote_dir, "%s", m ? m : "");
		g->started = true;
	} else if ((v = json_object_get(j, "swept"))) {
		/* an earlier kernel of the session's (o.gateway_sweep) */
		const char *id = json_string_value(json_object_get(v, "id"));
		size_t used = strlen(sb->swept);
		m = json_string_value(json_object_get(v, "error"));
		if (id && !m && used + strlen(id) + 2 <= sizeof sb->swept)
			snprintf(sb->swept + used, sizeof sb->swept - used, "%s ", id);
		else if (id && m)
			snprintf(sb->sweep_failed, sizeof sb->sweep_failed, "%.79s: %.300s", id, m);
	} else if ((v = json_object_get(j, "exit"))) {
		g->exited = true;
		g->deleted = json_is_true(json_object_get(v, "deleted"));
		sb->remote_deleted = g->deleted;
		sb->remote_gone = json_is_true(json_object_get(v, "server_gone"));
		m = json_string_value(json_object_get(v, "cause"));
		snprintf(g->cause, sizeof g->cause, "%s", m ? m : "");
	} else if ((v = json_object_get(j, "error"))) {
		m = json_string_value(json_object_get(v, "message"));
		g->failed = true;
		snprintf(g->error, sizeof g->error, "%s", m ? m : "the Jupyter server failed");
	} else if ((m = json_string_value(json_object_get(j, "notice")))) {
		snprintf(sb->notice, sizeof sb->notice, "%s", m);
		sb->notice_seq++;
	}
	json_decref(j);
}

static void on_status_line(void *arg, const char *text)
{
	kr_sandbox_t *sb = arg;
	status_line(sb, sb->priv, text);
}

static void read_status(kr_sandbox_t *sb, gateway_t *g)
{
	kr_helper_read(&g->h, on_status_line, sb);
}

static bool gateway_wait(kr_sandbox_t *sb)
{
	gateway_t *g = sb->priv;
	read_status(sb, g);
	if (kr_sandbox_poll(sb, "the gateway's helper " KG_PROGRAM, false))
		return true;
	read_status(sb, g);
	if (g->failed && !g->started) {
		snprintf(sb->cause, sizeof sb->cause, "the remote kernel could not start: %.200s",
		         g->error);
		sb->never_ran = true;
	} else if (g->failed)
		snprintf(sb->cause, sizeof sb->cause, "the remote kernel failed: %.210s", g->error);
	else if (g->exited && g->by_kbox)
		snprintf(sb->cause, sizeof sb->cause, "the remote kernel was deleted by kbox");
	else if (g->exited)
		snprintf(sb->cause, sizeof sb->cause, "%.250s", g->cause);
	else {
		char how[sizeof sb->cause];
		kr_sandbox_set_cause(sb, sb->status, false);
		snprintf(how, sizeof how, "%s", sb->cause);
		snprintf(sb->cause, sizeof sb->cause,
		         KG_PROGRAM " ended before its remote kernel (%.200s)",
		         how + strlen("the kernel "));
	}
	return false;
}

static int gateway_signal(kr_sandbox_t *sb, int sig, kbox_error_t *err)
{
	gateway_t *g = sb->priv;
	if (sig == SIGINT)
		kr_helper_send(&g->h, "interrupt\n");
	else if (sig == SIGKILL || sig == SIGTERM) {
		g->by_kbox = true;
		kr_helper_send(&g->h, "remove\n");
	} else
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "backend gateway: the remote kernel takes no signal %d", sig);
	if (g->h.cmd_fd < 0)
		return kbox_error_set(err, KBOX_E_DEAD, "the gateway's helper is gone");
	return 0;
}

static void gateway_cleanup(kr_sandbox_t *sb)
{
	gateway_t *g = sb->priv;
	if (!g)
		return;
	/* the helper deletes the remote kernel at its end of file; give it
	 * the time that takes */
	kr_helper_end(&g->h, sb, "the gateway's helper", DELETE_WAIT_MS);
	read_status(sb, g);
	kr_helper_close(&g->h);
	free(g);
	sb->priv = NULL;
}

/* The kernel's memory is the server's to know. */
static long long gateway_memory(kr_sandbox_t *sb)
{
	(void)sb;
	return -1;
}

static unsigned gateway_unavailable(char *why, size_t size)
{
	snprintf(why, size, "the Jupyter server's to set");
	return KR_LIMIT_MEMORY | KR_LIMIT_CPUS | KR_LIMIT_PIDS;
}

const kr_backend_t kr_backend_gateway = {
        .name = "gateway",
        .sandboxed = false,
        .remote = true,
        .limits = 0,
        .sockets_inside = KG_SOCKETS_INSIDE,
        .conn_inside = "/proc/self/fd/5", /* (not read: the helper gets the text) */
        .conn_fd = true,
        .unavailable = gateway_unavailable,
        .start = gateway_start,
        .signal = gateway_signal,
        .wait = gateway_wait,
        .cleanup = gateway_cleanup,
        .memory = gateway_memory,
};

/* How long the helper may take to answer a call about kernels, ms (one
 * on files takes as long as it takes: the helper bounds each request). */
#define CALL_WAIT_MS 60000
#define CALL_MAX (40 << 20) /* (a listing: kbox-gateway's own bound is 32 MiB) */

/* A call of kbox-gateway: WHAT ARG [ARG2 [FD [NAME [SINCE]]]], and FD
 * given it. */
typedef struct {
	const char *what, *arg, *arg2, *name, *since;
	int fd;       /* a descriptor it gets (its number an argument), or -1 */
	long wait_ms; /* how long it may take (0: as long as it takes) */
	bool bare;    /* its error without "backend gateway: " (a file's) */
} call_t;

/* Run kbox-gateway as C says with the server line of URL, TOKEN, CA on
 * its standard input, and parse its one line of output into *REPLY (new;
 * the caller frees it).  0; or -1 with ERR (its {"error": ...}:
 * KBOX_E_NOTFOUND for "not-found", KBOX_E_INVALID for "usage" and
 * "no-contents", else KBOX_E_SYSTEM). */
static int call_helper(const call_t *c, const char *url, const char *token, const char *ca,
                       json_t **reply, kbox_error_t *err)
{
	char exe[PATH_MAX], fdarg[16], **env = helper_env();
	char *argv[8] = {KG_PROGRAM, (char *)c->what, (char *)c->arg};
	size_t ac = 3;
	int in[2] = {-1, -1}, out[2] = {-1, -1}, st = 0, rc = -1;
	json_t *server = NULL, *e;
	kx_buf_t b = KX_BUF_INIT;
	char *line = NULL, chunk[4096];
	long long deadline = c->wait_ms ? kx_now_ms() + c->wait_ms : 0;
	pid_t pid = -1;

	*reply = NULL;
	snprintf(fdarg, sizeof fdarg, "%d", c->fd);
	if (c->arg2)
		argv[ac++] = (char *)c->arg2;
	if (c->fd >= 0)
		argv[ac++] = fdarg;
	if (c->name)
		argv[ac++] = (char *)c->name;
	if (c->name && c->since)
		argv[ac++] = (char *)c->since;
	if (!url || !*url)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "backend gateway: no server (kbox start --url, or "
		                      "KBOX_GATEWAY_URL)");
	if (kx_helper_path(KG_PROGRAM, exe, sizeof exe) < 0)
		return kbox_error_set(err, KBOX_E_NOTFOUND,
		                      "backend gateway: its helper " KG_PROGRAM
		                      " was not found beside kbox-supervisor (is kbox installed "
		                      "whole?)");
	server = json_pack("{s:s, s:s?, s:s?}", "url", url, "token", token, "ca_file", ca);
	if (!server || !(line = json_dumps(server, JSON_COMPACT)) || pipe2(in, O_CLOEXEC) < 0 ||
	    pipe2(out, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		kbox_error_set_sys(err, "backend gateway: cannot run " KG_PROGRAM);
		goto out;
	}
	if (pid == 0) {
		kx_child_t child = {.errfd = -1,
		                    .out_fd = out[1],
		                    .in_fd = in[0],
		                    .parent = getppid(),
		                    .keep = &c->fd,
		                    .n_keep = c->fd >= 0,
		                    /* (a file's: it removes what it left) */
		                    .pdeath_sig = c->bare ? SIGTERM : 0};
		kx_child_exec(exe, argv, env, &child);
		_exit(127);
	}
	kx_close(&in[0]);
	kx_close(&out[1]);
	if (kx_write_all(in[1], line, strlen(line)) < 0 || kx_write_all(in[1], "\n", 1) < 0) {
		kbox_error_set_sys(err, "backend gateway: cannot talk to " KG_PROGRAM);
		goto out;
	}
	kx_close(&in[1]);
	for (;;) {
		struct pollfd p = {out[0], POLLIN, 0};
		long long left = deadline ? deadline - kx_now_ms() : -1;
		ssize_t n;
		if (deadline && left <= 0) {
			char took[32];
			kbox_error_set(err, KBOX_E_TIMEOUT,
			               "backend gateway: the Jupyter server at %s did not answer "
			               "within %s",
			               url, kx_fmt_ms(took, sizeof took, c->wait_ms));
			goto out;
		}
		if (poll(&p, 1, left < 0 ? -1 : (int)left) < 0 && errno != EINTR)
			break;
		if (!p.revents)
			continue;
		if ((n = read(out[0], chunk, sizeof chunk)) > 0) {
			if (b.len + (size_t)n > CALL_MAX || kx_buf_append(&b, chunk, (size_t)n) < 0)
				break;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			break;
	}
	*reply = b.len ? json_loadb(b.data, b.len, 0, NULL) : NULL;
	if ((e = json_object_get(*reply, "error"))) {
		const char *m = json_string_value(json_object_get(e, "message"));
		const char *kind = json_string_value(json_object_get(e, "kind"));
		kbox_error_set(
		        err,
		        kind && strcmp(kind, "not-found") == 0 ? KBOX_E_NOTFOUND
		        : kind && (strcmp(kind, "usage") == 0 || strcmp(kind, "no-contents") == 0)
		                ? KBOX_E_INVALID
		                : KBOX_E_SYSTEM,
		        "%s%s",
		        c->bare ? "" : "backend gateway: ", m ? m : "the Jupyter server failed");
		/* (the server's words: no line breaks or escapes of a terminal's
		 * in a line of kbox's, or in a tool's result) */
		for (char *q = err ? err->msg : NULL; q && *q; q++)
			if ((unsigned char)*q < 0x20 || *q == 0x7f)
				*q = ' ';
	} else if (!json_is_object(*reply))
		kbox_error_set(err, KBOX_E_SYSTEM,
		               "backend gateway: " KG_PROGRAM " %s said nothing", c->what);
	else
		rc = 0;
out:
	if (pid > 0) {
		/* (a file's call is asked first: it removes the part it left) */
		long long end = kx_now_ms() + (c->bare ? 5000 : 0);
		pid_t w;
		kill(pid, c->bare ? SIGTERM : SIGKILL);
		while ((w = waitpid(pid, &st, WNOHANG)) == 0 && kx_now_ms() < end)
			usleep(10000);
		if (w == 0)
			kx_kill_wait(pid);
	}
	kx_close_all(in, 2);
	kx_close_all(out, 2);
	if (line) {
		explicit_bzero(line, strlen(line));
		free(line);
	}
	json_decref(server);
	kx_buf_reset(&b);
	return rc;
}

kbox_kspec_t *kr_gateway_spec(const char *url, const char *token, const char *ca, const char *name,
                              kbox_error_t *err)
{
	json_t *reply = NULL;
	kbox_kspec_t *spec = NULL;
	call_t c = {.what = "spec", .arg = name, .fd = -1, .wait_ms = CALL_WAIT_MS};
	if (call_helper(&c, url, token, ca, &reply, err) == 0) {
		if (!json_is_object(json_object_get(reply, "spec")))
			kbox_error_set(err, KBOX_E_SYSTEM,
			               "backend gateway: " KG_PROGRAM
			               " said nothing of kernelspec %s",
			               name);
		else
			spec = kbox_kspec_from_json(name, json_object_get(reply, "spec"), err);
	}
	json_decref(reply);
	return spec;
}

int kr_gateway_specs(const char *url, const char *token, const char *ca, json_t **specs,
                     kbox_error_t *err)
{
	call_t c = {.what = "specs", .fd = -1, .wait_ms = CALL_WAIT_MS};
	*specs = NULL;
	if (call_helper(&c, url, token, ca, specs, err) < 0)
		return -1;
	if (!json_is_object(json_object_get(*specs, "kernelspecs"))) {
		json_decref(*specs);
		*specs = NULL;
		return kbox_error_set(err, KBOX_E_SYSTEM,
		                      "backend gateway: " KG_PROGRAM
		                      " said nothing of kernelspecs");
	}
	return 0;
}

/* ---- the session's directory on the server, and its files ---- */

/* Whether TEXT is a directory kr_gateway_dir names: "kbox/" and one
 * component of letters, digits, '.', '_' and '-'. */
static bool dir_valid(const char *text)
{
	if (strncmp(text, "kbox/", 5) != 0 || !text[5] || strlen(text) > 280)
		return false;
	for (const char *c = text + 5; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
			return false;
	return text[5] != '.';
}

/* The directory recorded in the session's KR_GATEWAY_DIR_FILE (DIR_FD its
 * directory) in OUT: 0, or -1 when there is none (or it is not one). */
static int dir_read(int dir_fd, char *out, size_t size)
{
	char buf[300];
	int fd = kx_open_file(dir_fd, KR_GATEWAY_DIR_FILE, O_RDONLY, 0);
	ssize_t n;
	if (fd < 0)
		return -1;
	n = kx_pread_full(fd, buf, sizeof buf - 1, 0);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (!dir_valid(buf) || strlen(buf) >= size)
		return -1;
	snprintf(out, size, "%s", buf);
	return 0;
}

int kr_gateway_dir_recorded(const char *session_dir, char *out, size_t size)
{
	int dir_fd = open(session_dir, O_PATH | O_DIRECTORY | O_CLOEXEC), rc;
	if (dir_fd < 0)
		return -1;
	rc = dir_read(dir_fd, out, size);
	close(dir_fd);
	return rc;
}

int kr_gateway_dir(const char *session_dir, char *out, size_t size)
{
	char *copy = strdup(session_dir), name[201], text[300], tmp[64];
	unsigned char rnd[4];
	int dir_fd = -1, fd = -1, rc = -1;
	size_t k = 0;

	if (!copy)
		return -1;
	if ((dir_fd = open(session_dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		goto out;
	if (dir_read(dir_fd, out, size) == 0) {
		rc = 0;
		goto out;
	}
	/* a new one: the session's name (what a file name takes of it) and 32
	 * random bits, so that sessions of one name (of two machines, of two
	 * users, or one made anew after kbox rm) have directories apart */
	for (const char *c = basename(copy); *c && k < sizeof name - 1; c++) {
		bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		             (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || (*c == '.' && k);
		name[k++] = plain ? *c : '_';
	}
	name[k] = '\0';
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
		goto out;
	snprintf(text, sizeof text, "kbox/%s-%02x%02x%02x%02x\n", k ? name : "session", rnd[0],
	         rnd[1], rnd[2], rnd[3]);
	/* recorded once: the first to link its file wins, the others read it */
	if ((fd = kx_temp_open(dir_fd, ".gateway-dir-", 0600, tmp, sizeof tmp)) < 0)
		goto out;
	if (kx_write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0) {
		unlinkat(dir_fd, tmp, 0);
		goto out;
	}
	if (linkat(dir_fd, tmp, dir_fd, KR_GATEWAY_DIR_FILE, 0) < 0 && errno != EEXIST) {
		unlinkat(dir_fd, tmp, 0);
		goto out;
	}
	unlinkat(dir_fd, tmp, 0);
	rc = dir_read(dir_fd, out, size);
out:
	if (fd >= 0)
		close(fd);
	if (dir_fd >= 0)
		close(dir_fd);
	free(copy);
	return rc;
}

int kr_gateway_token_read(int dir_fd, char **token, kbox_error_t *err)
{
	char buf[4097];
	ssize_t n;
	int fd = kx_open_file(dir_fd, KR_GATEWAY_TOKEN_FILE, O_RDONLY, 0);
	*token = NULL;
	if (fd < 0)
		return errno == ENOENT
		               ? 0
		               : kbox_error_set_sys(err, "the session's " KR_GATEWAY_TOKEN_FILE);
	n = kx_pread_full(fd, buf, sizeof buf, 0);
	close(fd);
	if (n < 0 || n == (ssize_t)sizeof buf)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "the session's " KR_GATEWAY_TOKEN_FILE
		                      " is unreadable or over 4096 bytes");
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = '\0';
	if (n && !(*token = strdup(buf))) {
		explicit_bzero(buf, sizeof buf);
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	explicit_bzero(buf, sizeof buf);
	return 0;
}

/* How long a call on files may take, ms (0: as long as it takes). */
static long files_wait_ms;

void kr_gateway_files_wait(long ms)
{
	files_wait_ms = ms;
}

/* kbox-gateway WHAT on PATH (of the session's directory there) for the
 * session in SESSION_DIR, with FD (or -1): its reply in *REPLY. */
static int files_call_since(const char *session_dir, const char *what, const char *path, int fd,
                            const char *name, const char *since, json_t **reply, kbox_error_t *err)
{
	kr_session_config_t cfg;
	char dir[300], *token = NULL;
	int dir_fd = -1, rc = -1;
	call_t c = {.what = what,
	            .arg = dir,
	            .arg2 = path,
	            .fd = fd,
	            .name = name,
	            .since = since,
	            .wait_ms = files_wait_ms,
	            .bare = true};

	*reply = NULL;
	kr_session_config_init(&cfg);
	if (kr_session_config_load(&cfg, session_dir, err) < 0)
		goto out;
	if (!kr_backend_remote(cfg.backend)) {
		kbox_error_set(err, KBOX_E_INVALID, "the session's backend is %s, not gateway",
		               cfg.backend);
		goto out;
	}
	if ((dir_fd = open(session_dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		kbox_error_set_sys(err, "%s", session_dir);
		goto out;
	}
	if (kr_gateway_token_read(dir_fd, &token, err) < 0)
		goto out;
	if (kr_gateway_dir(session_dir, dir, sizeof dir) < 0) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto out;
	}
	rc = call_helper(&c, cfg.gateway, token, cfg.gateway_ca, reply, err);
	if (rc < 0 && err && err->code == KBOX_E_NOTFOUND)
		kbox_error_set(err, KBOX_E_NOTFOUND,
		               "%s: no such %s in the session's directory %s on the Jupyter "
		               "server at %s",
		               path, strcmp(what, "list") == 0 ? "directory" : "file", dir,
		               cfg.gateway);
out:
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (dir_fd >= 0)
		close(dir_fd);
	kr_session_config_free(&cfg);
	return rc;
}

static int files_call(const char *session_dir, const char *what, const char *path, int fd,
                      const char *name, json_t **reply, kbox_error_t *err)
{
	return files_call_since(session_dir, what, path, fd, name, NULL, reply, err);
}

int kr_gateway_put(const char *session_dir, int fd, const char *path, const char *name,
                   kbox_error_t *err)
{
	json_t *reply = NULL;
	int rc = files_call(session_dir, "put", path, fd, name, &reply, err);
	json_decref(reply);
	return rc;
}

int kr_gateway_get(const char *session_dir, const char *path, int fd, long long max,
                   long long *size, char *stamp, kbox_error_t *err)
{
	json_t *reply = NULL, *got;
	const char *said;
	char m[32];
	int rc;
	snprintf(m, sizeof m, "%lld", max > 0 ? max : 0);
	rc = files_call_since(session_dir, "get", path, fd, max > 0 || (stamp && *stamp) ? m : NULL,
	                      stamp && *stamp ? stamp : NULL, &reply, err);
	if (rc == 0) {
		got = json_object_get(reply, "got");
		*size = (long long)json_integer_value(json_object_get(got, "size"));
		said = json_string_value(json_object_get(got, "stamp"));
		if (json_is_true(json_object_get(got, "unchanged")))
			rc = 1;
		else if (stamp)
			snprintf(stamp, KG_STAMP_MAX, "%s",
			         said && strlen(said) < KG_STAMP_MAX ? said : "");
	}
	json_decref(reply);
	return rc;
}

int kr_gateway_list(const char *session_dir, const char *path, json_t **list, kbox_error_t *err)
{
	json_t *reply = NULL;
	int rc = files_call(session_dir, "list", path, -1, NULL, &reply, err);
	*list = NULL;
	if (rc == 0) {
		*list = json_object_get(json_object_get(reply, "list"), "entries");
		if (!json_is_array(*list)) {
			*list = NULL;
			rc = kbox_error_set(err, KBOX_E_SYSTEM,
			                    "backend gateway: " KG_PROGRAM " list said nothing");
		} else
			json_incref(*list);
	}
	json_decref(reply);
	return rc;
}
