/* src/cli/session.c — what the session commands share: finding a session,
 * starting its supervisor (detached: the kbox-supervisor program), and the
 * common -s option. */
#include "config.h"
#include "cli.h"
#include "gateway/gateway_proto.h"
#include "runtime/functions.h"
#include "runtime/ws_live.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_LOCK_WAIT_MS 120000
#define READY_WAIT_MS 90000
#define STOPPING_WAIT_MS 30000 /* a stopping supervisor stops its kernel: 7.5 s at most */

/* The name cli_session_name took from KBOX_SESSION, or NULL: an error
 * about it names where it came from. */
static const char *name_from_env;

const char *cli_session_name(const char *given)
{
	const char *env = getenv("KBOX_SESSION");
	if (given)
		return given;
	if (env && *env)
		return name_from_env = env;
	return KR_SESSION_DEFAULT;
}

int cli_not_front_end(const char *cmd, const char *dir, const char *name)
{
	kr_session_config_t cfg;
	kbox_error_t err = {0};
	int status = EXIT_OK;
	kr_session_config_init(&cfg);
	if (kr_session_config_load(&cfg, dir, &err) == 0 && cfg.relay) {
		if (cfg.workspace)
			cli_error(cmd,
			          "session %s is a Jupyter front end's kernel (kbox kernel): its "
			          "workspace is %s, the directory the front end started it in: "
			          "copy files there",
			          name, cfg.workspace);
		else
			cli_error(
			        cmd,
			        "session %s is a Jupyter front end's kernel (kbox kernel), with an "
			        "empty workspace of its own: give the kernel its files from the "
			        "front end",
			        name);
		status = EXIT_USAGE;
	}
	kr_session_config_free(&cfg);
	return status;
}

bool cli_session_remote(const char *dir)
{
	kr_session_config_t cfg;
	bool remote;
	kr_session_config_init(&cfg);
	remote = kr_session_config_load(&cfg, dir, NULL) == 0 && cfg.has & KR_SC_BACKEND &&
	         kr_backend_remote(cfg.backend);
	kr_session_config_free(&cfg);
	return remote;
}

int cli_remote_status(const kbox_error_t *err)
{
	return err->code == KBOX_E_INVALID || err->code == KBOX_E_NOTFOUND ? EXIT_USAGE
	                                                                   : EXIT_UNAVAILABLE;
}

char *cli_session_dir(const char *cmd, const char *name, bool create, int *status)
{
	kbox_error_t err = {0};
	char *home = kr_state_home(&err), *dir = NULL;
	if (home)
		dir = kr_session_dir(home, name, create, &err);
	if (!dir) {
		bool bad_name = err.code == KBOX_E_INVALID && strstr(err.msg, "session name");
		/* a session that is not there: what lists those that are (a
		 * name mistyped, another KBOX_HOME), and, where a new session
		 * would do (put, exec, status: not get, logs or interrupt, which
		 * would find nothing in it), what makes one.  (kbox stop, which
		 * has nothing to do then, does not come here.) */
		bool missing = err.code == KBOX_E_NOTFOUND && !create &&
		               strncmp(err.msg, "no session \"", 12) == 0;
		bool startable = missing && (strcmp(cmd, "put") == 0 || strcmp(cmd, "exec") == 0 ||
		                             strcmp(cmd, "status") == 0);
		cli_error(cmd, "%s%s%s%s%s%s",
		          bad_name && name_from_env && name == name_from_env ? "KBOX_SESSION: "
		                                                             : "",
		          err.msg, startable ? ": kbox start -s " : "", startable ? name : "",
		          startable ? " starts it" : "",
		          startable ? " (kbox ls lists the sessions there)"
		          : missing ? ": kbox ls lists the sessions there"
		                    : "");
		*status = bad_name ? EXIT_USAGE : EXIT_UNAVAILABLE;
	}
	free(home);
	return dir;
}

static json_t *new_session_functions;
static char *new_session_functions_text; /* as session.json keeps it */

void cli_set_new_session_functions(json_t *doc)
{
	new_session_functions = doc;
	free(new_session_functions_text);
	new_session_functions_text = kr_functions_text(doc);
}

/* Take DIR/start.lock within the wait.  The fd, or -1 (printed). */
static int start_lock(const char *cmd, const char *dir)
{
	char path[4096];
	long long deadline = 0;
	int fd;
	snprintf(path, sizeof path, "%s/start.lock", dir);
	fd = kx_open_file(AT_FDCWD, path, O_RDWR | O_CREAT, 0600);
	if (fd < 0) {
		cli_error(cmd, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += 20) {
		if (errno != EWOULDBLOCK || waited >= START_LOCK_WAIT_MS) {
			cli_error(cmd, "cannot lock %s: %s", path,
			          errno == EWOULDBLOCK ? "another kbox start holds it"
			                               : strerror(errno));
			close(fd);
			return -1;
		}
		(void)deadline;
		usleep(20000);
	}
	/* removed (kbox rm) while it waited: nothing to start in */
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_nlink == 0) {
		cli_error(cmd, "session directory %s was removed meanwhile (kbox rm)", dir);
		close(fd);
		return -1;
	}
	return fd;
}

/* PROG's path into PATH, tried where cli_find_program says; 0, or -1 with
 * the paths tried in TRIED. */
static int locate_program(const char *prog, char *path, size_t size, char *tried, size_t tried_size)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	size_t used = 0;

	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')))
			*slash = '\0';
	} else
		exe[0] = '\0';
	tried[0] = '\0';
	for (int i = 0; i < 3; i++) {
		if (i == 0 && exe[0])
			snprintf(path, size, "%s/%s", exe, prog);
		else if (i == 1)
			snprintf(path, size, "%s/%s", KBOX_PKGLIBEXECDIR, prog);
		else if (i == 2 && exe[0])
			snprintf(path, size, "%s/../libexec/kbox/%s", exe, prog);
		else
			continue;
		if (access(path, X_OK) == 0)
			return 0;
		used += (size_t)snprintf(tried + used, used < tried_size ? tried_size - used : 0,
		                         "%s%s", used ? ", " : "", path);
	}
	return -1;
}

int cli_find_program(const char *cmd, const char *prog, const char *what, char *path, size_t size)
{
	char tried[3 * PATH_MAX + 16];

	if (locate_program(prog, path, size, tried, sizeof tried) == 0)
		return 0;
	cli_error(cmd, "cannot find the %s %s (tried %s): is kbox installed whole?", what, prog,
	          tried);
	return -1;
}

const char *cli_supervisor_check(char *detail, size_t size)
{
	static const char cannot[] = "no session can start: kbox start, exec, run, mcp and "
	                             "agent fail (is kbox installed whole?)";
	char prog[PATH_MAX + 64], tried[3 * PATH_MAX + 16], out[1024];
	int pfd[2], st = 0;
	size_t len = 0;
	ssize_t got;
	pid_t pid;

	if (locate_program(KR_SUPERVISOR_PROGRAM, prog, sizeof prog, tried, sizeof tried) < 0) {
		kx_msgf(detail, size, "%s not found (tried %s)", KR_SUPERVISOR_PROGRAM, tried);
		return cannot;
	}
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		kx_msgf(detail, size, "%s: pipe: %s", prog, strerror(errno));
		return cannot;
	}
	fflush(NULL);
	if ((pid = fork()) < 0) {
		kx_msgf(detail, size, "%s: fork: %s", prog, strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return cannot;
	}
	if (pid == 0) {
		/* stdin /dev/null; stdout and stderr into the pipe */
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(pfd[1], 1) < 0 || dup2(pfd[1], 2) < 0)
			_exit(127);
		execl(prog, KR_SUPERVISOR_PROGRAM, "--version", (char *)NULL);
		dprintf(2, "cannot run it: %s\n", strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	while ((got = read(pfd[0], out + len, sizeof out - 1 - len)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			break;
		if ((len += (size_t)got) == sizeof out - 1) { /* enough: drain the rest */
			char sink[512];
			while (read(pfd[0], sink, sizeof sink) > 0)
				;
			break;
		}
	}
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	out[len] = '\0';
	out[strcspn(out, "\n")] = '\0';
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
	    strncmp(out, KR_SUPERVISOR_PROGRAM " ", sizeof KR_SUPERVISOR_PROGRAM) == 0) {
		kx_msgf(detail, size, "%s (%s)", out, prog);
		return NULL;
	}
	if (WIFEXITED(st))
		kx_msgf(detail, size, "%s --version exited with status %d: %s", prog,
		        WEXITSTATUS(st), out[0] ? out : "(nothing printed)");
	else
		kx_msgf(detail, size, "%s --version was killed by signal %d: %s", prog,
		        WIFSIGNALED(st) ? WTERMSIG(st) : 0, out[0] ? out : "(nothing printed)");
	return cannot;
}

/* FD moved to a descriptor above 4 (close-on-exec), so that the supervisor's
 * stdio, 3 and 4 can be set up without overwriting it; -1 if FD is. */
static int fd_above(int fd)
{
	int moved;
	if (fd < 0 || fd > 4)
		return fd;
	moved = fcntl(fd, F_DUPFD_CLOEXEC, 5);
	close(fd);
	return moved;
}

/* The environment of a supervisor (kr_supervisor_env: an allow-list, never
 * the caller's whole), new; NULL after one line naming CMD. */
static char **supervisor_env(const char *cmd)
{
	kbox_error_t err = {0};
	char *home = kr_state_home(&err), **env = NULL;
	if (!home)
		cli_error(cmd, "%s", err.msg);
	else if (!(env = kr_supervisor_env(home)))
		cli_error(cmd, "out of memory");
	free(home);
	return env;
}

/* The middle process of spawn_supervisor: tell the starter the pid of the
 * supervisor, its child (SOCK: the pid, then wait for the starter to have
 * a pidfd of it: a child not yet waited for keeps its pid, so that pidfd
 * is of the supervisor, never of a process that took the pid after it). */
static void tell_supervisor_pid(int sock, int other_end, pid_t pid)
{
	char ack;
	close(other_end); /* (its end comes when the starter closes it) */
	if (write(sock, &pid, sizeof pid) == (ssize_t)sizeof pid)
		while (read(sock, &ack, 1) < 0 && errno == EINTR)
			;
}

/* Fork twice; the grandchild, in its own session, becomes the supervisor,
 * with the environment supervisor_env makes (told, with NEW_NOTICE, that
 * its session is new to the call that runs code in it).  Returns the read
 * end of the readiness pipe, or -1 (printed); the supervisor's pid into
 * *SUP_PID and a pidfd of it into *PIDFD (-1 when none could be had). */
static int spawn_supervisor(const char *cmd, const char *dir, bool new_notice, pid_t *sup_pid,
                            int *pidfd)
{
	int pfd[2] = {-1, -1}, tell[2] = {-1, -1}, st;
	pid_t mid, pid = -1;
	char logpath[4096], prog[PATH_MAX + 64], **env;

	if (cli_find_program(cmd, KR_SUPERVISOR_PROGRAM, "supervisor program", prog, sizeof prog) <
	    0)
		return -1;
	if (!(env = supervisor_env(cmd)))
		return -1;
	snprintf(logpath, sizeof logpath, "%s/supervisor.log", dir);
	/* a socket, not a pipe: kr_ctl_recv reads it */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pfd) < 0 ||
	    (pfd[1] = fd_above(pfd[1])) < 0) {
		cli_error(cmd, "socketpair: %s", strerror(errno));
		if (pfd[0] >= 0)
			close(pfd[0]);
		kbox_strv_free(env);
		return -1;
	}
	*pidfd = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, tell) < 0)
		tell[0] = tell[1] = -1; /* (then no pidfd: start_abandoned says so) */
	fflush(NULL);
	mid = fork();
	if (mid < 0) {
		cli_error(cmd, "fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		if (tell[0] >= 0) {
			close(tell[0]);
			close(tell[1]);
		}
		kbox_strv_free(env);
		return -1;
	}
	if (mid == 0) {
		int fd;
		setsid();
		pid = fork();
		if (pid != 0) {
			if (pid > 0 && tell[1] >= 0)
				tell_supervisor_pid(tell[1], tell[0], pid);
			_exit(pid < 0 ? 1 : 0);
		}
		/* the supervisor: no terminal, stdio to its log, ready pipe on 3 */
		signal(SIGHUP, SIG_IGN);
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0 && fd != 0) {
			dup2(fd, 0);
			close(fd);
		}
		/* (a log that cannot be opened, a FIFO put there, say: not the
		 * caller's output, which would then stay open for as long as the
		 * supervisor lives) */
		fd = kx_open_file(AT_FDCWD, logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd < 0)
			fd = open("/dev/null", O_WRONLY);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		/* 3: the ready socket (moved above 4, so not overwritten) */
		if (dup2(pfd[1], 3) < 0)
			_exit(127);
			/* a daemon keeps nothing of its starter but 0-3: an inherited pipe
		 * would hold the starter's reader open for the session's life */
#ifdef HAVE_CLOSE_RANGE
		if (close_range(4, ~0U, 0) < 0)
#endif
			for (int i = 4; i < 65536; i++)
				close(i);
		signal(SIGHUP, SIG_DFL);
		if (chdir("/") < 0)
			_exit(127);
		/* its argv: kbox-supervisor(8)'s, in runtime/supervisor.h */
		{
			/* nothing of what its starter blocked */
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
		}
		execve(prog,
		       (char *[]){KR_SUPERVISOR_PROGRAM, (char *)dir, "3",
		                  new_notice ? "--new" : NULL, NULL},
		       env);
		fprintf(stderr, "kbox: cannot run %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	kbox_strv_free(env);
	if (tell[0] >= 0) {
		close(tell[1]);
		ssize_t got;
		while ((got = read(tell[0], &pid, sizeof pid)) < 0 && errno == EINTR)
			;
		if (got == (ssize_t)sizeof pid && pid > 0 &&
		    (*pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) >= 0)
			*sup_pid = pid;
		close(tell[0]); /* (the middle process may go now) */
	}
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	return pfd[0];
}

/* The first start of the session in DIR failed: nothing of it is kept
 * (kbox-start(1)), once the supervisor that said why is gone.  What the
 * failure said, MSG, loses its pointer to the kernel's log, which goes
 * too (the log's last lines are in it already). */
static void forget_failed(const char *dir, char *msg)
{
	kbox_error_t ignored = {0};
	char see[PATH_MAX + 32], *at;

	for (int i = 0; i < 100 && kr_session_supervisor(dir, NULL) == KR_SUPERVISOR_RUNNING; i++)
		usleep(50000);
	if (kr_session_remove_ex(dir, true, &ignored) < 0)
		return;
	snprintf(see, sizeof see, " (see %s/kernel.log)", dir);
	if (msg && (at = strstr(msg, see)))
		memmove(at, at + strlen(see), strlen(at + strlen(see)) + 1);
}

/* How long a start of a session of configuration CFG waits for its
 * supervisor's report: READY_WAIT_MS, the 60 s its supervisor gives a
 * kernel to answer and 30 s more; a launch timeout given in place of
 * those 60 s; and a gateway session's launch timeout more, as its
 * supervisor waits that much more for the remote kernel (it gave up after
 * 90 s on a launch the supervisor still waited for, and that then ran:
 * review 23, P6). */
static int ready_wait_ms(const kr_session_config_t *cfg)
{
	long long launch = cfg->launch_timeout > 0 ? cfg->launch_timeout : 0;
	if (!cfg->backend || strcmp(cfg->backend, "gateway") != 0)
		return launch ? (int)(launch * 1000) + READY_WAIT_MS - 60000 : READY_WAIT_MS;
	return READY_WAIT_MS + (int)((launch ? launch : KG_LAUNCH_TIMEOUT_S) * 1000);
}

int cli_kernel_wait_ms(const char *dir, int base_ms)
{
	kr_session_config_t cfg;
	int ms = base_ms;
	kr_session_config_init(&cfg);
	if (kr_session_config_load(&cfg, dir, NULL) == 0)
		ms = ready_wait_ms(&cfg) > base_ms ? ready_wait_ms(&cfg) : base_ms;
	kr_session_config_free(&cfg);
	return ms;
}

/* A SIGINT or SIGTERM while a supervisor starts (start_wait). */
static volatile sig_atomic_t start_signal;

static void on_start_signal(int sig)
{
	if (!start_signal)
		start_signal = sig;
}

static bool start_hook(void *arg)
{
	(void)arg;
	return start_signal != 0;
}

/* Read the readiness line of RFD within WAIT_MS, as kr_ctl_recv: a
 * SIGINT or SIGTERM whose action is the default (a front end with its
 * own, kbox mcp's, is left to it) ends the wait instead of the process
 * (*SIG says which; ERR KR_CTL_WAIT_ENDED). */
static json_t *start_wait(int rfd, int wait_ms, int *sig, kbox_error_t *err)
{
	static const int sigs[2] = {SIGINT, SIGTERM};
	struct sigaction old[2], sa;
	sigset_t block, saved, wait;
	bool caught[2] = {false, false};
	json_t *ready;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_start_signal;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&block);
	start_signal = 0;
	for (size_t i = 0; i < 2; i++) {
		sigaction(sigs[i], NULL, &old[i]);
		if (old[i].sa_handler != SIG_DFL)
			continue;
		sigaction(sigs[i], &sa, NULL);
		sigaddset(&block, sigs[i]);
		caught[i] = true;
	}
	sigprocmask(SIG_BLOCK, &block, &saved);
	wait = saved;
	for (size_t i = 0; i < 2; i++)
		if (caught[i])
			sigdelset(&wait, sigs[i]);
	if (caught[0] || caught[1])
		kr_ctl_wait_signals(&wait, start_hook, NULL);
	ready = kr_ctl_recv(rfd, wait_ms, err);
	if (caught[0] || caught[1])
		kr_ctl_wait_signals(NULL, NULL, NULL);
	for (size_t i = 0; i < 2; i++)
		if (caught[i])
			sigaction(sigs[i], &old[i], NULL);
	sigprocmask(SIG_SETMASK, &saved, NULL);
	*sig = start_signal;
	return ready;
}

/* The start of the session in DIR was given up (SIG came): its
 * supervisor (SUP_PID, PIDFD: the one this start made), once it has its
 * pid file or has had 10 s to, is told to stop (SIGTERM), and a session it
 * was the first start of is removed once it is gone.  Says so, as CMD. */
static void start_abandoned(const char *cmd, const char *dir, const char *name, bool first, int sig,
                            pid_t sup_pid, int pidfd)
{
	pid_t pid = 0;
	bool stopped = false;
	/* the supervisor this start made, through its pidfd, once its pid
	 * file names it (it then takes a SIGTERM as a stop), or once it has
	 * had 10 s to: never a process a pid file put in its place names
	 * (review 17, N17-3) */
	for (int i = 0; i <= 200 && !stopped && pidfd >= 0; i++) {
		if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
			break; /* it has ended */
		if (i == 200 ||
		    (kr_session_supervisor(dir, &pid) == KR_SUPERVISOR_RUNNING && pid == sup_pid))
			stopped = syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0) == 0;
		else
			usleep(50000);
	}
	if (stopped && first)
		forget_failed(dir, NULL);
	if (strcmp(cmd, "run") == 0) /* (its session is no one's to see) */
		cli_error(cmd, "%s while its kernel started: the run was given up%s",
		          sig == SIGINT ? "SIGINT" : "SIGTERM",
		          stopped ? "" : " (its supervisor could not be found to stop it)");
	else
		cli_error(cmd, "%s while session %s started: the start was given up (%s)",
		          sig == SIGINT ? "SIGINT" : "SIGTERM", name,
		          !stopped ? "its supervisor could not be found to stop it"
		          : first && access(dir, F_OK) < 0 ? "the new session is removed"
		                                           : "the session is stopped");
}

/* A new session of the backend gateway that kbox exec, mcp or agent
 * starts (KBOX_BACKEND=gateway): its server from KBOX_GATEWAY_URL, its
 * token from KBOX_GATEWAY_TOKEN (kept in DIR's KR_GATEWAY_TOKEN_FILE, as
 * kbox start keeps it), into O.  EXIT_OK, or an exit status after one
 * line. */
static int gateway_from_env(const char *cmd, const char *dir, kr_session_opts_t *o)
{
	const char *url = getenv("KBOX_GATEWAY_URL"), *token = getenv("KBOX_GATEWAY_TOKEN");
	char path[PATH_MAX + 32];
	if (!o->backend || strcmp(o->backend, "gateway") != 0)
		return EXIT_OK;
	if (!url || !*url) {
		cli_error(cmd,
		          "backend gateway (from KBOX_BACKEND): no server: set KBOX_GATEWAY_URL "
		          "(and KBOX_GATEWAY_TOKEN), or start the session with kbox start --url");
		return EXIT_USAGE;
	}
	if (!kr_gateway_url_valid(url)) {
		cli_error(cmd,
		          "KBOX_GATEWAY_URL is not a Jupyter server's URL: http:// or https:// "
		          "HOST[:PORT][/PATH], PORT from 1 to 65535, with no user, query or "
		          "fragment");
		return EXIT_USAGE;
	}
	o->gateway = url;
	snprintf(path, sizeof path, "%s/" KR_GATEWAY_TOKEN_FILE, dir);
	if (token && *token && kx_write_atomic(AT_FDCWD, path, token, strlen(token), 0600, 0) < 0) {
		cli_error(cmd, "cannot keep the token in %s: %s", path, strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	return EXIT_OK;
}


int cli_session_start(const char *cmd, const char *dir, const char *name,
                      const kr_session_config_t *config, pid_t owner, bool *started,
                      pid_t *sup_pid_p)
{
	int sig = 0;
	kbox_error_t err = {0};
	int lock, rfd, sup_fd = -1, status = EXIT_OK, wait_ms = READY_WAIT_MS;
	pid_t pid, sup_pid = -1;
	json_t *ready = NULL;
	char path[PATH_MAX + 32];
	bool first;

	if (started)
		*started = false;
	if (sup_pid_p)
		*sup_pid_p = 0;
	if ((lock = start_lock(cmd, dir)) < 0)
		return EXIT_UNAVAILABLE;
	/* never started before (kbox run's own session goes by itself) */
	snprintf(path, sizeof path, "%s/session.json", dir);
	first = access(path, F_OK) < 0 && !(config && config->ephemeral);
	/* someone else started it meanwhile; or it is stopping (its control
	 * socket is gone but it still holds its lock): wait for it to go */
	for (int waited = 0; kr_session_supervisor(dir, &pid) == KR_SUPERVISOR_RUNNING;
	     waited += 50) {
		int fd = kr_ctl_connect(dir, &err);
		if (fd >= 0) {
			close(fd);
			goto out;
		}
		if (waited >= STOPPING_WAIT_MS) {
			cli_error(cmd,
			          "session %s: its supervisor (pid %ld) neither answers nor exits",
			          name, (long)pid);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		usleep(50000);
	}
	if (config) {
		wait_ms = ready_wait_ms(config);
		if (kr_session_config_save(config, dir, &err) < 0) {
			cli_error(cmd, "%s", err.msg);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
	} else {
		/* started by kbox exec: the stored configuration, or the
		 * defaults, which a new session saves (with its name) */
		kr_session_config_t have;
		kr_session_opts_t named = KR_SESSION_OPTS_INIT;
		bool is_new = false;
		named.name = name;
		named.functions = new_session_functions_text;
		if (owner > 0)
			named.owner_pid = owner;
		if (kr_session_config_load(&have, dir, &err) < 0) {
			cli_error(cmd, "%s", err.msg);
			kr_session_config_free(&have);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		if ((is_new = !(have.has & KR_SC_BACKEND)) &&
		    ((status = cli_session_defaults(cmd, true, &named.backend, &named.image)) !=
		             EXIT_OK ||
		     (status = gateway_from_env(cmd, dir, &named)) != EXIT_OK)) {
			kr_session_config_free(&have);
			close(lock);
			cli_session_forget(dir);
			return status;
		}
		if (is_new && kr_session_config_merge(&have, &named, &err) < 0) {
			cli_error(cmd, "%s", err.msg);
			kr_session_config_free(&have);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		/* (a docker session's engine: DOCKER_HOST's, as kbox start's) */
		if ((status = cli_check_docker(cmd, &named, &have)) != EXIT_OK ||
		    (status = cli_check_backend(cmd, &have, is_new)) != EXIT_OK) {
			kr_session_config_free(&have);
			close(lock);
			if (is_new) /* nothing of it is left behind */
				cli_session_forget(dir);
			return status;
		}
		if (is_new && kr_session_config_save(&have, dir, &err) < 0) {
			cli_error(cmd, "%s", err.msg);
			kr_session_config_free(&have);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		if (kr_backend_unsandboxed_here(have.backend))
			fprintf(stderr, "kbox: warning: backend %s: the kernel runs unsandboxed\n",
			        have.backend);
		wait_ms = ready_wait_ms(&have);
		kr_session_config_free(&have);
	}
	if ((rfd = spawn_supervisor(cmd, dir, first && !config, &sup_pid, &sup_fd)) < 0) {
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	ready = start_wait(rfd, wait_ms, &sig, &err);
	close(rfd);
	if (!ready && sig && err.code == KBOX_E_SYSTEM && strcmp(err.msg, KR_CTL_WAIT_ENDED) == 0) {
		close(lock);
		lock = -1;
		start_abandoned(cmd, dir, name, first, sig, sup_pid, sup_fd);
		status = EXIT_TIMEOUT;
	} else if (!ready) {
		cli_error(
		        cmd,
		        "session %s: the supervisor did not report ready (%s); see %s/supervisor.log",
		        name, err.msg, dir);
		status = EXIT_UNAVAILABLE;
	} else if (!json_is_true(json_object_get(ready, "ok"))) {
		const char *m = json_string_value(json_object_get(ready, "error"));
		char *said = strdup(m ? m : "the supervisor failed");
		if (first && said)
			forget_failed(dir, said);
		cli_error(cmd, "session %s: %s", name, said ? said : "the supervisor failed");
		free(said);
		status = EXIT_UNAVAILABLE;
	} else {
		/* a new session that kbox exec, mcp or agent made for the code
		 * they run: its first result, and the person, hear that it is new
		 * (a mistyped name makes one), once it has started */
		if (first && !config && !started)
			cli_error(cmd, "session %s is new: started it (kbox ls lists the sessions)",
			          name);
		if (started)
			*started = true;
		if (sup_pid_p)
			*sup_pid_p = sup_pid;
		kr_session_home_keep(); /* a session runs there: it stays */
	}
	json_decref(ready);
out:
	if (sup_fd >= 0)
		close(sup_fd);
	if (lock >= 0)
		close(lock);
	return status;
}

/* Parse "-s NAME" / "--session NAME" style options is each command's job;
 * this is the check of the value. */
void cli_session_forget(const char *dir)
{
	static const char *const subs[] = {"run", "workspace", "outputs", "start.lock", NULL};
	struct dirent *e;
	bool only_config = true;
	int dfd, lfd;
	DIR *d;

	/* (through the directory, reached through no link below the state
	 * directory: nothing of another's goes) */
	if ((dfd = kx_open_path(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0)) < 0) {
		kr_session_home_forget(); /* (gone already: discarded) */
		return;
	}
	for (size_t i = 0; subs[i]; i++)
		if (unlinkat(dfd, subs[i], AT_REMOVEDIR) < 0 && errno == ENOTDIR)
			unlinkat(dfd, subs[i], 0);
	/* the configuration this start saved goes too, but only when nothing
	 * else is there (no supervisor ran: no log to read) */
	if ((lfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0)) >= 0 && (d = fdopendir(lfd))) {
		while (only_config && (e = readdir(d)))
			only_config = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
			              strcmp(e->d_name, "session.json") == 0;
		closedir(d);
		if (only_config && unlinkat(dfd, "session.json", 0) == 0)
			kr_live_session_forget(dir);
	} else if (lfd >= 0)
		close(lfd);
	close(dfd);
	rmdir(dir);               /* only when empty: nothing else is ever removed */
	kr_session_home_forget(); /* and the state directory, if this made it */
}

json_t *cli_new_session_functions(void)
{
	return new_session_functions;
}

int cli_session_defaults(const char *cmd, bool is_new, const char **backend, const char **image)
{
	const char *env = getenv("KBOX_BACKEND"), *from = "";
	char list[128] = "";

	if (is_new && !*backend && env && *env) {
		*backend = env;
		from = " (from KBOX_BACKEND)";
	}
	if (*backend && !kr_backend_exists(*backend)) {
		for (const char *const *b = kr_backend_names(); *b; b++)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
			         list[0] ? ", " : "", *b);
		cli_error(cmd, "unknown backend \"%s\"%s (available: %s)", *backend, from, list);
		return EXIT_USAGE;
	}
	env = getenv("KBOX_IMAGE_NAME");
	if (is_new && !*image && *backend && strcmp(*backend, "docker") == 0 && env && *env) {
		if (!kr_image_ref_valid(env)) {
			cli_error(cmd,
			          "KBOX_IMAGE_NAME is \"%s\", which is no image reference (NAME, "
			          "NAME:TAG or NAME@sha256:DIGEST)",
			          env);
			return EXIT_USAGE;
		}
		*image = env;
	}
	return EXIT_OK;
}

int cli_check_backend(const char *cmd, const kr_session_config_t *config, bool warn)
{
	const char *b = config->backend;
	kr_sandbox_opts_t so = {0};
	char buf[1024];

	if (strcmp(b, "bwrap") == 0) {
		char *exe = kr_bwrap_path();
		if (!exe) {
			cli_error(cmd,
			          "backend bwrap: bubblewrap is not installed (apt-get install "
			          "bubblewrap, see kbox doctor), or choose --backend none to run "
			          "the kernel unsandboxed");
			return EXIT_UNAVAILABLE;
		}
		free(exe);
		/* whether it can make its sandbox here, the supervisor finds out
		 * (and says why not) when it starts the kernel */
	}
	so.memory_bytes = config->memory;
	so.cpus = config->cpus;
	so.pids = (long)config->pids;
	if (!*kr_backend_unenforced(b, &so, buf, sizeof buf) || !warn)
		return EXIT_OK;
	if (kr_backend_sandboxed(b)) {
		/* one short line, once a session: the reasons are kbox doctor's
		 * (and kbox status's limits_missing) */
		char *why = strstr(buf, " (");
		if (why)
			*why = '\0';
		cli_error(cmd,
		          "warning: no cgroups here for %s: bounded per process, cpus not at all "
		          "(kbox doctor says how to get them)",
		          buf);
	} else
		cli_error(cmd,
		          "warning: backend %s does not enforce these limits here: %s (they are "
		          "stored for backends that do)",
		          b, buf);
	return EXIT_OK;
}

int cli_check_session(const char *cmd, const char *name)
{
	kbox_error_t err = {0};
	if (kr_session_check_name(name, &err) < 0) {
		cli_error(cmd, "%s%s",
		          name_from_env && name == name_from_env ? "KBOX_SESSION: " : "", err.msg);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

char *cli_running_session(const char *cmd, const char *name, int *status)
{
	char *dir;
	if ((*status = cli_check_session(cmd, name)) != EXIT_OK)
		return NULL;
	if (!(dir = cli_session_dir(cmd, name, false, status)))
		return NULL;
	if (kr_session_supervisor(dir, NULL) != KR_SUPERVISOR_RUNNING) {
		if (strcmp(cmd, "interrupt") == 0) /* starting it is no help */
			cli_error(cmd, "session %s is not running: it runs no code to interrupt",
			          name);
		else
			cli_error(cmd, "session %s is not running (start it with kbox start -s %s)",
			          name, name);
		*status = EXIT_UNAVAILABLE;
		free(dir);
		return NULL;
	}
	return dir;
}

int cli_session_discard(const char *cmd, const char *dir, const char *name, int wait_ms)
{
	kbox_error_t err = {0};
	json_t *r;

	if (kr_session_supervisor(dir, NULL) == KR_SUPERVISOR_RUNNING) {
		/* (and its process gone, which lets go of its lock) */
		if (!(r = kr_ctl_stop(dir, NULL, wait_ms, &err)) && err.code != KBOX_E_NOTFOUND)
			cli_error(cmd, "session %s: %s", name, err.msg);
		json_decref(r);
		/* (a stop that got no answer: the lock, as it lets go of it) */
		for (int waited = 0;
		     waited < wait_ms && kr_session_supervisor(dir, NULL) == KR_SUPERVISOR_RUNNING;
		     waited += 20)
			usleep(20000);
	}
	if (kr_session_remove(dir, &err) < 0) {
		cli_error(cmd, "session %s: %s", name, err.msg);
		return -1;
	}
	return 0;
}

int cli_check_image(const char *cmd, const char *image)
{
	char shown[KX_NAME_ESCAPED_MAX(200) + 4];

	if (kr_image_ref_valid(image))
		return EXIT_OK;
	kx_name_escape(image, strnlen(image, 200), shown, sizeof shown);
	cli_error(cmd,
	          "invalid --image \"%s\": not an image reference (NAME, NAME:TAG, "
	          "NAME@sha256:DIGEST or sha256:ID; NAME in lower case)",
	          shown);
	return EXIT_USAGE;
}

int cli_check_docker(const char *cmd, kr_session_opts_t *o, kr_session_config_t *config)
{
	const char *host = getenv("DOCKER_HOST");
	kbox_error_t err = {0};
	bool docker = strcmp(config->backend, "docker") == 0;
	char shown[KX_NAME_ESCAPED_MAX(200) + 4];

	if (o->image && !docker) {
		cli_error(cmd, "--image is for --backend docker (this session's backend is %s)",
		          config->backend);
		return EXIT_USAGE;
	}
	if (o->rootfs && docker) {
		cli_error(cmd, "--rootfs is for the backend bwrap: with --backend docker the "
		               "system files are the image's (--image)");
		return EXIT_USAGE;
	}
	if (o->image && cli_check_image(cmd, o->image) != EXIT_OK)
		return EXIT_USAGE;
	if (!docker || !host || !*host)
		return EXIT_OK;
	if (!kr_engine_socket_valid(host)) {
		kx_name_escape(host, strnlen(host, 200), shown, sizeof shown);
		cli_error(
		        cmd,
		        "DOCKER_HOST=%s: kbox needs the engine on this machine, by its unix socket's "
		        "absolute path (unix:///PATH, at most 107 bytes): the kernel's sockets are "
		        "files here",
		        shown);
		return EXIT_USAGE;
	}
	kr_session_opts_t e = KR_SESSION_OPTS_INIT;
	e.engine = host;
	if (kr_session_config_merge(config, &e, &err) < 0) {
		cli_error(cmd, "%s", err.msg);
		return EXIT_UNAVAILABLE;
	}
	return EXIT_OK;
}
