/* src/cli/cmd_kernel.c — kbox kernel: the process a Jupyter front end
 * starts for a kernelspec of kbox's (kernelspec/, kbox kernelspec
 * install): a sandboxed kernel behind the front end's own connection
 * file.
 *
 * It starts a session of its own, as kbox run does (ephemeral, owned by
 * this process, never idle-stopped), whose supervisor binds the front
 * end's five sockets and relays them to the kernel in the sandbox
 * (session.json's "relay"; src/runtime/supervisor_relay.c).  Then it
 * waits, as the front end's handle on the kernel: SIGINT interrupts the
 * kernel (interrupt_mode signal), SIGTERM stops the session, and when the
 * session ends (the kernel shut down, or died) so does kbox kernel, for
 * the front end to see.  Killed (a front end kills the process group of
 * a kernel that does not shut down), its supervisor, in a process group
 * of its own, sees its owner gone and stops the session: nothing is left
 * behind.
 *
 * The workspace is the directory the front end started it in (the
 * notebook's own), unless that is one kbox run --workspace refuses (a
 * home, /, a system or state directory): then an empty one, and a line on
 * standard error says why. */
#include "config.h"
#include "cli.h"
#include "runtime/functions.h"
#include "runtime/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A connection file is a few hundred bytes: more is not one. */
#define CONN_FILE_MAX (64 << 10)
/* How long a start waits for the session of the same name that the
 * front end's previous kbox kernel left stopping (a restart). */
#define PREVIOUS_WAIT_MS 15000

typedef struct {
	const char *conn_file, *name, *kernel, *backend, *image, *workspace_mode;
	cli_functions_opts_t fo;
	kr_session_opts_t o;
	cli_strlist_t env;
} kernel_args_t;

/* kbox kernel's options, into the kernel_args_t at A. */
#define KERNEL_OPTIONS(a)                                                                                   \
	CLI_OPT_STRING('f', "connection-file", "FILE", &(a)->conn_file,                                     \
	               "the front end's connection file (required: the kernelspec's "                       \
	               "{connection_file})"),                                                               \
	        CLI_OPT_STRING(                                                                             \
	                's', "session", "NAME", &(a)->name,                                                 \
	                "the session's name (default: jupyter- and the kernel id of FILE's "                \
	                "name)"),                                                                           \
	        CLI_OPT_STRING(                                                                             \
	                'k', "kernel", "SPEC", &(a)->kernel,                                                \
	                "the kernelspec run in the sandbox (default: $KBOX_KERNEL, else " KR_KERNEL_DEFAULT \
	                ")"),                                                                               \
	        CLI_OPT_STRING(                                                                             \
	                'b', "backend", "B", &(a)->backend,                                                 \
	                "bwrap, docker (a container; the engine from DOCKER_HOST), or none, "               \
	                "unsandboxed (default: $KBOX_BACKEND, else " KR_BACKEND_DEFAULT ")"),               \
	        CLI_OPT_STRING(0, "image", "NAME", &(a)->image,                                             \
	                       "docker: the container image (default: $KBOX_IMAGE_NAME, else "              \
	                       "kbox-kernel)"),                                                             \
	        CLI_OPT_STRING(                                                                             \
	                0, "workspace", "cwd|ro|empty", &(a)->workspace_mode,                               \
	                "bind the directory the front end starts the kernel in at "                         \
	                "/workspace, writable (cwd) or read-only (ro), or give the kernel a "               \
	                "new, empty one (empty) (default: cwd)"),                                           \
	        CLI_OPT_CALLBACK(0, "memory", "SIZE", cli_opt_size, &(a)->o.memory,                         \
	                         "limit the kernel's memory (default: 2G)"),                                \
	        CLI_OPT_CALLBACK(0, "cpus", "N", cli_opt_cpus, &(a)->o.cpus,                                \
	                         "limit it to N CPUs, such as 0.5 (default: none)"),                        \
	        CLI_OPT_CALLBACK(0, "pids", "N", cli_opt_pids, &(a)->o.pids,                                \
	                         "limit its processes and threads (default: 1024)"),                        \
	        CLI_OPT_CALLBACK(0, "tmp-size", "SIZE", cli_opt_size, &(a)->o.tmp_size,                     \
	                         "size of /tmp and /dev/shm (default: 512M)"),                              \
	        CLI_OPT_CALLBACK(0, "file-size", "SIZE", cli_opt_size, &(a)->o.file_size,                   \
	                         "largest file it may write (default: 4G)"),                                \
	        CLI_OPT_FUNCTIONS(&(a)->fo, "its code"),                                                    \
	        CLI_OPT_CALLBACK('e', "env", "K=V", cli_opt_env, &(a)->env,                                 \
	                         "set K to V in its environment; repeatable (default: none)"),              \
	        CLI_OPT_CALLBACK(0, "home-config", "on|off", cli_opt_home_config,                           \
	                         &(a)->o.home_config,                                                       \
	                         "let the kernel run the startup files and configuration in its "           \
	                         "home (default: off)"),                                                    \
	        CLI_OPT_END


/* The front end's connection file PATH as compact JSON text (new), or
 * NULL after one line.  Its members are checked by the supervisor, with
 * the library's reader of connection files (kbox_conn_from_json). */
static char *read_conn_file(const char *path)
{
	json_error_t jerr;
	json_t *j;
	char *text;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0) {
		cli_error("kernel", "--connection-file %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > CONN_FILE_MAX) {
		cli_error("kernel", "--connection-file %s: not a connection file (%s)", path,
		          !S_ISREG(st.st_mode) ? "not a regular file" : "over 64 KiB");
		close(fd);
		return NULL;
	}
	j = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
	close(fd);
	if (!json_is_object(j)) {
		cli_error("kernel", "--connection-file %s: not a connection file: %s", path,
		          j ? "not a JSON object" : jerr.text);
		json_decref(j);
		return NULL;
	}
	{
		/* what every connection file has (the supervisor reads the rest
		 * as the library does: a bad one then fails the start) */
		static const char *const ports[] = {"shell_port", "iopub_port", "stdin_port",
		                                    "control_port", "hb_port"};
		const char *tr = json_string_value(json_object_get(j, "transport"));
		const char *key = json_string_value(json_object_get(j, "key"));
		const char *missing = NULL;
		if (!json_is_string(json_object_get(j, "ip")))
			missing = "ip (a string)";
		else if (!tr || (strcmp(tr, "tcp") != 0 && strcmp(tr, "ipc") != 0))
			missing = "transport (tcp or ipc)";
		else if (!key || !*key)
			missing = "key (a string, not empty: kbox relays only signed messages)";
		for (size_t i = 0; !missing && i < sizeof ports / sizeof *ports; i++) {
			json_t *v = json_object_get(j, ports[i]);
			if (!json_is_integer(v) || json_integer_value(v) < 1 ||
			    json_integer_value(v) > 65535)
				missing = ports[i];
		}
		if (!missing && json_object_get(j, "signature_scheme") &&
		    !json_is_string(json_object_get(j, "signature_scheme")))
			missing = "signature_scheme (a string)";
		if (!missing && json_is_string(json_object_get(j, "signature_scheme")) &&
		    strcmp(json_string_value(json_object_get(j, "signature_scheme")),
		           "hmac-sha256") != 0)
			missing = "signature_scheme (kbox signs with hmac-sha256)";
		for (size_t i = 0; !missing && strcmp(tr, "tcp") == 0 && i < 5; i++)
			for (size_t k = i + 1; k < 5; k++)
				if (json_integer_value(json_object_get(j, ports[i])) ==
				    json_integer_value(json_object_get(j, ports[k])))
					missing = "set of ports (two channels have one port)";
		if (missing) {
			cli_error("kernel",
			          "--connection-file %s: not a connection file: no valid %s%s",
			          path, missing,
			          strstr(missing, "_port") ? " (a port, 1 to 65535)" : "");
			json_decref(j);
			return NULL;
		}
	}
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!text)
		cli_error("kernel", "out of memory");
	return text;
}

/* The session's name for connection file PATH: "jupyter-" and the first
 * twelve letters and digits of the kernel's id in the file's name
 * (jupyter_client names it kernel-ID.json), into BUF. */
static void name_from_file(const char *path, char *buf, size_t size)
{
	const char *base = strrchr(path, '/');
	size_t n = 0;
	char id[16];
	base = base ? base + 1 : path;
	if (strncmp(base, "kernel-", 7) == 0)
		base += 7;
	for (const char *p = base; *p && *p != '.' && n < 12; p++)
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9'))
			id[n++] = *p;
	id[n] = '\0';
	if (n)
		snprintf(buf, size, "jupyter-%s", id);
	else
		snprintf(buf, size, "jupyter-%ld", (long)getpid());
}

/* The workspace: the current directory (read-only with "ro"), unless
 * MODE is "empty" or kbox run --workspace would refuse it (said on
 * standard error: the kernel starts in an empty one then).  REAL and ST
 * get the directory taken.  EXIT_OK, or EXIT_USAGE after one line. */
static int choose_workspace(kernel_args_t *a, char *real, struct stat *st)
{
	kbox_error_t err = {0};
	char cwd[PATH_MAX];
	const char *mode = a->workspace_mode ? a->workspace_mode : "cwd";

	if (strcmp(mode, "cwd") != 0 && strcmp(mode, "ro") != 0 && strcmp(mode, "empty") != 0) {
		cli_error("kernel", "invalid --workspace \"%s\": expected cwd, ro or empty", mode);
		return EXIT_USAGE;
	}
	if (strcmp(mode, "empty") == 0)
		return EXIT_OK;
	if (!getcwd(cwd, sizeof cwd)) {
		cli_error("kernel",
		          "warning: the current directory cannot be read (%s): the kernel starts "
		          "in an empty workspace",
		          strerror(errno));
		return EXIT_OK;
	}
	if (ws_host_dir(cwd, real, st, &err) < 0) {
		cli_error("kernel",
		          "warning: the current directory cannot be the workspace: %s; the kernel "
		          "starts in an empty workspace",
		          err.msg);
		return EXIT_OK;
	}
	a->o.workspace = real;
	a->o.workspace_st = st;
	a->o.workspace_ro = strcmp(mode, "ro") == 0;
	{
		/* under root the code is a uid of the session's own, in the
		 * sandbox user's group: it writes where that group or anyone
		 * may (as kbox run --workspace says) */
		kr_sandbox_id_t sid;
		kbox_error_t ignored = {0};
		const char *b = a->backend ? a->backend : KR_BACKEND_DEFAULT;
		if (!a->o.workspace_ro && kr_backend_sandboxed(b) &&
		    kr_sandbox_identity(&sid, &ignored) == 0 && sid.drop &&
		    !(st->st_gid == sid.gid && (st->st_mode & S_IWGRP)) && !(st->st_mode & S_IWOTH))
			cli_error(
			        "kernel",
			        "warning: the workspace %s: the code runs as a uid of its own in the "
			        "sandbox group (gid %u), which cannot write it: the code can read its "
			        "files (chgrp and chmod g+rwx it to let the code write)",
			        real, (unsigned)sid.gid);
	}
	return EXIT_OK;
}

/* Whether the directory that holds PATH (links followed: what PATH
 * names) is the directory of WS_ST or lies below it.  One that cannot be
 * opened counts as inside: nothing is taken on trust. */
static bool path_within(const char *path, const struct stat *ws_st)
{
	char dir[PATH_MAX], *real = realpath(path, NULL), *slash;
	int fd;
	bool in;
	snprintf(dir, sizeof dir, "%s", real ? real : path);
	free(real);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if ((fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return true;
	in = ws_fd_within(fd, ws_st);
	close(fd);
	return in;
}

/* The workspace chosen (A->o.workspace) may not hold the front end's
 * connection file, nor, for ipc, its sockets: the kernel would read the
 * front end's key there, or reach its sockets past the relay.  Then the
 * kernel starts in an empty workspace, as for a refused one, and
 * standard error says why. */
static void keep_key_out(kernel_args_t *a, const char *relay_text)
{
	json_t *j;
	const char *ip, *tr;
	bool in;
	if (!a->o.workspace)
		return;
	in = path_within(a->conn_file, a->o.workspace_st);
	j = json_loads(relay_text, 0, NULL);
	tr = json_string_value(json_object_get(j, "transport"));
	ip = json_string_value(json_object_get(j, "ip"));
	if (!in && tr && strcmp(tr, "ipc") == 0 && ip)
		in = path_within(ip, a->o.workspace_st);
	json_decref(j);
	if (in) {
		cli_error("kernel",
		          "warning: the current directory %s holds the front end's connection file "
		          "or sockets, which the kernel must not reach: it starts in an empty "
		          "workspace",
		          a->o.workspace);
		a->o.workspace = NULL;
		a->o.workspace_st = NULL;
		a->o.workspace_ro = -1;
	}
}

/* Wait (a while) for the supervisor of session NAME that the front end's
 * previous kbox kernel left, which stops since its owner went (a
 * restart), to be gone, process and all: an ephemeral session's
 * supervisor removes its directory as it ends, which must not be the new
 * session's.  Before the new session's directory is made.  EXIT_OK, or
 * EXIT_UNAVAILABLE after one line when it still runs. */
static int wait_previous(const char *name)
{
	kbox_error_t err = {0};
	char *home = kr_state_home(&err),
	     *dir = home ? kr_session_dir(home, name, false, &err) : NULL;
	long long deadline = kx_now_ms() + PREVIOUS_WAIT_MS;
	pid_t pid = 0;
	int status = EXIT_OK, pfd = -1;

	free(home);
	if (!dir)
		return EXIT_OK; /* none (or none that kbox start would not refuse too) */
	while (kr_session_supervisor(dir, &pid) == KR_SUPERVISOR_RUNNING) {
		if (pfd < 0 && pid > 0)
			pfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (kx_now_ms() >= deadline)
			break;
		usleep(20000);
	}
	if (kr_session_supervisor(dir, &pid) == KR_SUPERVISOR_RUNNING) {
		cli_error("kernel",
		          "session %s is running (supervisor pid %ld): give another name with -s, "
		          "or stop it (kbox stop -s %s)",
		          name, (long)pid, name);
		status = EXIT_UNAVAILABLE;
	} else if (pfd >= 0) {
		/* unlocked: its process ends, removing the directory */
		struct pollfd p = {.fd = pfd, .events = POLLIN};
		long long left = deadline - kx_now_ms();
		if (poll(&p, 1, left > 0 ? (int)left : 0) == 0) {
			cli_error("kernel",
			          "session %s: its previous supervisor (pid %ld) does not end",
			          name, (long)pid);
			status = EXIT_UNAVAILABLE;
		}
	}
	if (pfd >= 0)
		close(pfd);
	free(dir);
	return status;
}

/* The front end's pid from JPY_PARENT_PID (jupyter_client sets it, unless
 * the kernel is to outlive it: ipykernel ends with that process), or 0. */
static pid_t front_end_pid(void)
{
	const char *e = getenv("JPY_PARENT_PID");
	char *end;
	long v;
	if (!e || !*e)
		return 0;
	errno = 0;
	v = strtol(e, &end, 10);
	return errno || *end || v <= 1 || v > INT_MAX ? 0 : (pid_t)v;
}

/* Stop the session of DIR for CAUSE (waiting for the answer). */
static void stop_session(const char *dir, const char *cause)
{
	kbox_error_t err = {0};
	json_decref(kr_ctl_stop(dir, json_pack("{s:s}", "cause", cause), 30000, &err));
}

/* Wait for the session's end as the front end's handle on the kernel:
 * SIGINT interrupts it, SIGTERM, SIGHUP and SIGQUIT stop the session, and
 * so does the end of the front end (JPY_PARENT_PID), as ipykernel's; the
 * end of the supervisor SUP is ours.  EXIT_OK, or EXIT_UNAVAILABLE when
 * it cannot be watched. */
static int serve(const char *dir, pid_t sup)
{
	sigset_t mask;
	struct pollfd fds[3];
	pid_t front = front_end_pid();
	int sfd, pfd, ffd = -1, n = 2;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	pfd = (int)syscall(SYS_pidfd_open, sup, 0);
	if (sfd < 0 || pfd < 0) {
		cli_error("kernel", "cannot watch the session's supervisor (pid %ld): %s",
		          (long)sup, strerror(errno));
		if (sfd >= 0)
			close(sfd);
		if (pfd >= 0)
			close(pfd);
		return EXIT_UNAVAILABLE;
	}
	fds[0] = (struct pollfd){.fd = pfd, .events = POLLIN};
	fds[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
	if (front > 0 && (ffd = (int)syscall(SYS_pidfd_open, front, 0)) >= 0)
		fds[n++] = (struct pollfd){.fd = ffd, .events = POLLIN};
	else if (front > 0) /* (gone already) */
		stop_session(dir, "its front end (JPY_PARENT_PID) had ended");
	for (;;) {
		struct signalfd_siginfo si;
		kbox_error_t err = {0};
		if (poll(fds, (nfds_t)n, -1) < 0 && errno != EINTR)
			break;
		if (fds[0].revents)
			break; /* the session ended */
		if (n == 3 && fds[2].revents) {
			char cause[96];
			snprintf(cause, sizeof cause, "its front end (pid %ld) ended", (long)front);
			n = 2; /* (once) */
			stop_session(dir, cause);
		}
		while (read(sfd, &si, sizeof si) == sizeof si) {
			if (si.ssi_signo == SIGINT) {
				json_t *r = kr_ctl_call(dir, KR_CTL_OP_INTERRUPT, NULL,
				                        KR_CTL_KERNEL_REPLY_MS, &err);
				if (!r || kr_ctl_msg_kind(r, NULL) != KR_CTL_MSG_REPLY)
					cli_error("kernel", "interrupt: %s",
					          r ? json_string_value(json_object_get(r, "error"))
					            : err.msg);
				json_decref(r);
			} else {
				char cause[64];
				const char *abbrev = sigabbrev_np((int)si.ssi_signo);
				snprintf(cause, sizeof cause, "kbox kernel received SIG%s",
				         abbrev ? abbrev : "?");
				stop_session(dir, cause);
			}
		}
	}
	close(sfd);
	close(pfd);
	if (ffd >= 0)
		close(ffd);
	return EXIT_OK;
}

int cli_kernel_check_options(int argc, char **argv, const char *backend, const char **kernel)
{
	kernel_args_t a = {.o = KR_SESSION_OPTS_INIT};
	cli_option_t opts[] = {KERNEL_OPTIONS(&a)};
	int status = EXIT_OK;

	if (cli_parse_no_operands("kernel", opts, argc, argv, &status) < 0)
		goto out;
	if (a.conn_file) {
		cli_error("kernelspec",
		          "--connection-file is the front end's to give: leave it out");
		status = EXIT_USAGE;
		goto out;
	}
	if (a.name) {
		cli_error("kernelspec",
		          "-s names one session: each kernel a front end starts gets a session of "
		          "its own (jupyter-ID); leave it out");
		status = EXIT_USAGE;
		goto out;
	}
	if (a.backend) {
		cli_error("kernelspec",
		          "give the backend as kbox kernelspec install's -b, before --");
		status = EXIT_USAGE;
		goto out;
	}
	if (a.image && (!backend || strcmp(backend, "docker") != 0)) {
		cli_error("kernelspec", "--image is for the backend docker: give -b docker too");
		status = EXIT_USAGE;
		goto out;
	}
	if (a.workspace_mode && strcmp(a.workspace_mode, "cwd") != 0 &&
	    strcmp(a.workspace_mode, "ro") != 0 && strcmp(a.workspace_mode, "empty") != 0) {
		cli_error("kernel", "invalid --workspace \"%s\": expected cwd, ro or empty",
		          a.workspace_mode);
		status = EXIT_USAGE;
		goto out;
	}
	*kernel = a.kernel;
out:
	cli_strlist_clear(&a.env);
	cli_functions_opts_clear(&a.fo);
	return status;
}

int cmd_kernel(int argc, char **argv)
{
	kernel_args_t a = {.o = KR_SESSION_OPTS_INIT, .kernel = getenv("KBOX_KERNEL")};
	kr_session_config_t config;
	kbox_error_t err = {0};
	char name[64], *dir = NULL, *relay = NULL, *functions_text = NULL, real[PATH_MAX];
	json_t *functions = NULL;
	struct stat st;
	bool started = false;
	pid_t sup = 0;
	int status;
	cli_option_t opts[] = {KERNEL_OPTIONS(&a)};

	kr_session_config_init(&config);
	if (cli_parse_no_operands("kernel", opts, argc, argv, &status) < 0)
		goto out;
	if (!a.conn_file) {
		cli_error("kernel", "no connection file: give --connection-file FILE (a Jupyter "
		                    "front end does, from the kernelspec's {connection_file})");
		status = EXIT_USAGE;
		goto out;
	}
	if (!a.kernel || !*a.kernel)
		a.kernel = KR_KERNEL_DEFAULT;
	if (a.name)
		snprintf(name, sizeof name, "%s", a.name);
	else
		name_from_file(a.conn_file, name, sizeof name);
	if ((status = cli_check_session("kernel", name)) != EXIT_OK ||
	    (status = cli_session_defaults("kernel", true, &a.backend, &a.image)) != EXIT_OK ||
	    (status = choose_workspace(&a, real, &st)) != EXIT_OK ||
	    (status = cli_functions_for("kernel", &a.fo, NULL, &functions)) != EXIT_OK)
		goto out;
	if (!(relay = read_conn_file(a.conn_file))) {
		status = EXIT_USAGE;
		goto out;
	}
	keep_key_out(&a, relay);
	if (functions && !(a.o.functions = functions_text = kr_functions_text(functions))) {
		cli_error("kernel", "out of memory");
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	a.o.name = name;
	a.o.kernel = a.kernel;
	a.o.backend = a.backend ? a.backend : KR_BACKEND_DEFAULT;
	a.o.image = a.image;
	a.o.ttl_ms = 0;
	a.o.ephemeral = 1;
	a.o.owner_pid = getpid();
	a.o.relay = relay;
	a.o.env = a.env.v;
	a.o.n_env = a.env.n;
	if (kr_session_config_merge(&config, &a.o, &err) < 0) {
		cli_error("kernel", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	if ((status = cli_check_docker("kernel", &a.o, &config)) != EXIT_OK ||
	    (status = cli_check_backend("kernel", &config, false)) != EXIT_OK)
		goto out;
	if (kr_backend_unsandboxed_here(config.backend))
		cli_error("kernel", "warning: backend %s: the kernel runs unsandboxed",
		          config.backend);
	if (functions && a.o.workspace &&
	    kr_functions_check_workspace(functions, a.o.workspace, &err) < 0) {
		cli_error("kernel", "the workspace %s: %s", a.o.workspace, err.msg);
		status = EXIT_USAGE;
		goto out;
	}
	if ((status = wait_previous(name)) != EXIT_OK ||
	    !(dir = cli_session_dir("kernel", name, true, &status)))
		goto out;
	status = cli_session_start("kernel", dir, name, &config, 0, &started, &sup);
	if (status != EXIT_OK)
		goto out;
	if (!started || sup <= 0) {
		cli_error("kernel", "session %s was started by another kbox meanwhile", name);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	status = serve(dir, sup);
out:
	kr_session_config_free(&config);
	cli_strlist_clear(&a.env);
	cli_functions_opts_clear(&a.fo);
	json_decref(functions);
	free(functions_text);
	free(relay);
	free(dir);
	return status;
}
