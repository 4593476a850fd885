/* src/runtime/supervisor.c — one session's supervisor (supervisor.h): its
 * setup and teardown, signals, the idle TTL, the session's files.
 *
 * One event loop (kbox/loop.h) carries everything: the signalfd, the
 * control socket and its connections (supervisor_ctl.c), timers, and the
 * kernel's channels (the client is attached to the loop;
 * supervisor_kernel.c).  Executions, completions and inspections are
 * jobs, run one at a time in the order they came (supervisor_jobs.c).
 * Nothing here prints: what is worth saying goes to events.ndjson, and a
 * supervisor's own errors to supervisor.log through its stderr. */
#include "runtime/supervisor_int.h"
#include "runtime/workspace.h"
#include "runtime/ws_live.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The events sup_log folds, FOLD_EVENTS of them. */
static const char *const fold_events[FOLD_EVENTS] = {"client-refused", "shedding", "shedding-end"};

/* Write the held event I of the fold table, with its count. */
static void fold_write(sup_t *s, int i, long long now)
{
	json_t *j = s->folds[i].latest;
	s->folds[i].latest = NULL;
	if (j && s->folds[i].held > 1)
		json_object_set_new(j, "folded", json_integer((json_int_t)s->folds[i].held - 1));
	s->folds[i].held = 0;
	s->folds[i].last_ms = now;
	kr_session_log_at(s->dir_fd, s->at, fold_events[i], j, NULL);
}

void sup_log(sup_t *s, const char *event, json_t *fields)
{
	long long now = kx_now_ms();
	for (int i = 0; i < FOLD_EVENTS; i++) {
		if (strcmp(event, fold_events[i]) != 0)
			continue;
		if (!fields)
			fields = json_object();
		if (s->folds[i].last_ms && now - s->folds[i].last_ms < FOLD_MS) {
			json_decref(s->folds[i].latest); /* the latest is kept */
			s->folds[i].latest = fields;
			s->folds[i].held++;
			return;
		}
		/* this one is written, and stands for those held too */
		json_decref(s->folds[i].latest);
		s->folds[i].latest = fields;
		s->folds[i].held++;
		fold_write(s, i, now);
		return;
	}
	kr_session_log_at(s->dir_fd, s->at, event, fields, NULL);
}

void sup_log_flush(sup_t *s, bool all)
{
	long long now = kx_now_ms();
	for (int i = 0; i < FOLD_EVENTS; i++)
		if (s->folds[i].held && (all || now - s->folds[i].last_ms >= FOLD_MS))
			fold_write(s, i, now);
}

void sup_trim(void)
{
#ifdef HAVE_MALLINFO2
	struct mallinfo2 mi = mallinfo2();
	if (mi.fordblks < TRIM_FREE_MIN)
		return;
#endif
	malloc_trim(0);
}

void sup_touch(sup_t *s)
{
	s->last_activity_ms = kx_now_ms();
	s->last_activity_wall = kx_wall_s();
}

void sup_utf8_cut(char *s)
{
	size_t n = strlen(s), i = n, need;
	while (i > 0 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i == 0)
		return;
	need = ((unsigned char)s[i - 1] & 0xe0) == 0xc0   ? 2
	       : ((unsigned char)s[i - 1] & 0xf0) == 0xe0 ? 3
	       : ((unsigned char)s[i - 1] & 0xf8) == 0xf0 ? 4
	                                                  : 1;
	if (n - (i - 1) < need)
		s[i - 1] = '\0';
}

void sup_write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16];
	int fd;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
	fd = kx_open_file(AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) == (ssize_t)strlen(text))
		rename(tmp, path);
	else
		unlink(tmp);
	close(fd);
}

/* Read a small file into BUF; "" when absent. */
void sup_read_file(const char *dir, const char *name, char *buf, size_t size)
{
	char path[PATH_MAX];
	int fd;
	ssize_t n = 0;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	buf[0] = '\0';
	fd = kx_open_file(AT_FDCWD, path, O_RDONLY, 0);
	if (fd < 0)
		return;
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
}

void sup_stop(sup_t *s)
{
	s->stopping = true;
	kbox_loop_stop(s->loop);
}

/* ---- signals, the owner, the TTL ---- */

/* The process that owns this session (kbox run) ended. */
static int on_owner_gone(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	kbox_loop_remove_fd(loop, s->owner_fd);
	if (!s->stopping) {
		snprintf(s->stop_cause, sizeof s->stop_cause, "its owner (pid %ld) ended",
		         s->owner_pid);
		sup_stop(s);
	}
	return 0;
}

/* Watch the owner's end through a pidfd.  0, or -1 with ERR. */
static int watch_owner(sup_t *s, kbox_error_t *err)
{
	if (s->owner_pid <= 0)
		return 0;
	s->owner_fd = (int)syscall(SYS_pidfd_open, (pid_t)s->owner_pid, 0);
	if (s->owner_fd < 0)
		return kbox_error_set_sys(err, "cannot watch the session's owner (pid %ld)",
		                          s->owner_pid);
	fcntl(s->owner_fd, F_SETFD, FD_CLOEXEC);
	return kbox_loop_add_fd(s->loop, s->owner_fd, on_owner_gone, s, err);
}

static int on_signal(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	struct signalfd_siginfo si;
	while (read(s->sig_fd, &si, sizeof si) == sizeof si) {
		if (si.ssi_signo == SIGCHLD) {
			sup_kernel_check_soon(s);
			sup_endings_check(s);
		} else if (!s->stopping) {
			const char *abbrev = sigabbrev_np((int)si.ssi_signo);
			snprintf(s->stop_cause, sizeof s->stop_cause,
			         "the supervisor received SIG%s", abbrev ? abbrev : "?");
			sup_stop(s);
		}
	}
	return 0;
}

/* The idle TTL and idle control connections, checked each second (and
 * the liveness of the kernel, in case a SIGCHLD was missed). */
static int on_tick(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	if (s->sb && !s->starting && !kr_sandbox_alive(s->sb))
		sup_on_kernel_check(loop, s);
	sup_endings_check(s);
	sup_conns_idle(s);
	sup_log_flush(s, false);
	/* idle: a kernel that is ready, with nothing to do (a starting kernel
	 * is not idle, however long it takes) */
	if (s->ttl_ms > 0 && s->ready && !s->running && !s->queue && !s->stopping) {
		long long idle = kx_now_ms() - s->last_activity_ms;
		if (idle >= s->ttl_ms) {
			char t[32];
			kx_fmt_ms(t, sizeof t, s->ttl_ms);
			snprintf(s->stop_cause, sizeof s->stop_cause,
			         "the session was idle for %s (its TTL) and stopped", t);
			sup_stop(s);
		}
	}
	return 0;
}

/* ---- setup ---- */

/* Where a sandboxed kernel keeps its configuration: in its /tmp, new with
 * each kernel, not in its home (see load_config); R's profile, Renviron
 * and user library too. */
static const char *const clean_home[] = {"PYTHONNOUSERSITE=1",
                                         "IPYTHONDIR=/tmp/.ipython",
                                         "JUPYTER_CONFIG_DIR=/tmp/.jupyter",
                                         "XDG_CONFIG_HOME=/tmp/.config",
                                         "R_PROFILE_USER=/tmp/.Rprofile",
                                         "R_ENVIRON_USER=/tmp/.Renviron",
                                         "R_LIBS_USER=/tmp/.R-library"};
/* ...and a module the kernel left in its workspace (its working directory)
 * is not what starts the next one: `python3 -m ipykernel_launcher` would
 * take /workspace/ipykernel_launcher.py first (the kernel then puts the
 * working directory on its path itself, for the code's own imports); R
 * would read a .Rprofile and .Renviron there before the home's */
static const char *const safe_path[] = {"PYTHONSAFEPATH=1", "R_PROFILE_USER=/home/kbox/.Rprofile",
                                        "R_ENVIRON_USER=/home/kbox/.Renviron"};
/* ...nor what the code imports: IPython puts the working directory on the
 * module path before the first site directory, so that a pandas.py the
 * code left in the workspace would be what every later kernel imports as
 * pandas.  ipykernel is told to leave it off (ignore_cwd) and to put it
 * last, after every site directory, as its first line of code (which
 * moves it there too where ignore_cwd is unknown). */
static const char *const workspace_last[] = {
        "--IPKernelApp.ignore_cwd=True",
        "--IPKernelApp.exec_lines=__import__('sys').path[:] = "
        "[p for p in __import__('sys').path if p != ''] + ['']",
        /* IPython's input history in memory (In, Out and %history work):
         * one in a SQLite file fails when the sandbox's disk is full, and
         * its thread's error lands in whatever cell prints next */
        "--HistoryManager.hist_file=:memory:", NULL};

/* An unsandboxed kernel (none) has its workspace nowhere on its module
 * path, not even last: code of a sandbox that once held the workspace's
 * directory open (a state directory kept where a workspace was) may have
 * left a module there, and an optional dependency that is not installed
 * (pandas' numexpr, say) would be taken from it and run as the user
 * (reviews 11, 12: B11-1, B12-1).  Code that imports its own modules from
 * the workspace puts it there itself (sys.path.append(".")).  It inherits
 * its sockets' directory and its connection file (a memfd with its key)
 * as descriptors 3 and 4: once it has bound the one and written the other
 * again, they go to no process it starts (os.system, say), as its first
 * line of code. */
static const char *const none_args[] = {"--IPKernelApp.ignore_cwd=True",
                                        "--IPKernelApp.exec_lines=__import__('sys').path[:] = "
                                        "[p for p in __import__('sys').path if p != '']; "
                                        "__import__('os').set_inheritable(3, False); "
                                        "__import__('os').set_inheritable(4, False)",
                                        NULL};

/* Record the session's own directory NAME (its workspace or home, made
 * already), whose path is PATH, as live into *FD and FILE, then look
 * through it for a state directory (WHAT names it).  Both from the
 * session's directory held open: the directory it records and looks
 * through is its own whatever is at its path.  0, or -1 with ERR. */
static int own_live(sup_t *s, int *fd, char *file, const char *name, const char *path,
                    const char *what, kbox_error_t *err)
{
	struct stat st;
	if (fstatat(s->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
		return kbox_error_set(err, KBOX_E_INVALID, "%s %s is not a directory", what, path);
	if ((*fd = kr_live_ws_hold(path, &st, file, err)) < 0)
		return -1;
	return ws_holds_state(s->dir_fd, name, path, what, err);
}

/* The kernel's environment (s->env, s->sbo.env): the safe path and, for
 * a sandboxed kernel, a home whose leftovers do not run; the session's
 * own --env of CFG last.  0, or -1 with ERR. */
static int make_env(sup_t *s, const kr_session_config_t *cfg, kbox_error_t *err)
{
	size_t i, k;
	if (!(s->env = calloc(cfg->n_env + sizeof clean_home / sizeof *clean_home +
	                              sizeof safe_path / sizeof *safe_path + 1,
	                      sizeof *s->env)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	/* an unsandboxed kernel's start-up files are the user's own, never
	 * what is in the workspace (R reads a .Rprofile and .Renviron in its
	 * working directory before the home's) */
	{
		const char *h = getenv("HOME");
		if (!h || h[0] != '/')
			h = "/nonexistent";
		snprintf(s->none_rprofile, sizeof s->none_rprofile, "R_PROFILE_USER=%s/.Rprofile",
		         h);
		snprintf(s->none_renviron, sizeof s->none_renviron, "R_ENVIRON_USER=%s/.Renviron",
		         h);
	}
	/* a sandboxed kernel's home outlives it: what code left there (IPython
	 * startup files and configuration, a .pth in the user site) does not
	 * run in the next kernel, unless asked (--home-config on); the
	 * session's own --env comes after, and wins */
	k = 0;
	for (i = 0; kr_backend_sandboxed(s->backend) && i < sizeof safe_path / sizeof *safe_path;
	     i++)
		s->env[k++] = (char *)safe_path[i];
	/* (a remote kernel's environment is its server's: only the
	 * session's own --env is asked for, as the start's "env") */
	if (!kr_backend_sandboxed(s->backend) && !kr_backend_remote(s->backend)) {
		s->env[k++] = (char *)safe_path[0]; /* PYTHONSAFEPATH */
		s->env[k++] = s->none_rprofile;
		s->env[k++] = s->none_renviron;
	}
	if (kr_backend_sandboxed(s->backend) && !cfg->home_config)
		for (i = 0; i < sizeof clean_home / sizeof *clean_home; i++)
			s->env[k++] = (char *)clean_home[i];
	for (i = 0; i < cfg->n_env; i++)
		s->env[k++] = cfg->env[i];
	s->env[k] = NULL;
	s->sbo.env = (const char *const *)s->env;
	s->sbo.ipykernel_args = kr_backend_sandboxed(s->backend) ? workspace_last : none_args;
	return 0;
}

/* The directory NAME in the session's directory (held open), made if
 * it is not there, and a directory, not a link put there to have this
 * supervisor work in (and empty) another.  0, or -1 with ERR. */
static int own_subdir(sup_t *s, const char *name, kbox_error_t *err)
{
	struct stat st;
	if (mkdirat(s->dir_fd, name, 0700) < 0 && errno != EEXIST)
		return kbox_error_set_sys(err, "cannot create %s/%s", s->dir, name);
	if (fstatat(s->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return kbox_error_set_sys(err, "%s/%s", s->dir, name);
	if (!S_ISDIR(st.st_mode))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s/%s is not a directory (%s): something else put it "
		                      "there; refusing it",
		                      s->dir, name,
		                      S_ISLNK(st.st_mode) ? "a symbolic link" : "another file");
	return 0;
}

/* The session's paths (its run, workspace, outputs, home, kernel log;
 * the workspace CFG names, kbox run's host directory, or its own), its
 * home and run made.  0, or -1 with ERR. */
static int make_paths(sup_t *s, const kr_session_config_t *cfg, kbox_error_t *err)
{
	const char *ws;
	snprintf(s->runtime_dir, sizeof s->runtime_dir, "%s/run", s->dir);
	/* kbox run --workspace names a host directory */
	ws = cfg->workspace;
	if (ws && (cfg->has & KR_SC_WORKSPACE_INO)) {
		s->sbo.ws_check = true;
		s->sbo.ws_dev = (dev_t)cfg->workspace_dev;
		s->sbo.ws_ino = (ino_t)cfg->workspace_ino;
	}
	if (ws)
		snprintf(s->workspace, sizeof s->workspace, "%s", ws);
	else
		snprintf(s->workspace, sizeof s->workspace, "%s/workspace", s->dir);
	snprintf(s->outputs, sizeof s->outputs, "%s/outputs", s->dir);
	snprintf(s->log_path, sizeof s->log_path, "%s/kernel.log", s->dir);
	snprintf(s->home, sizeof s->home, "%s/home", s->dir);
	/* the sandbox's /home/kbox: IPython's history, matplotlib's font
	 * cache; kept across kernel restarts, like the workspace */
	if (own_subdir(s, "home", err) < 0 || own_subdir(s, "run", err) < 0)
		return -1;
	s->sbo.home = s->home;
	s->sbo.workspace = s->workspace;
	s->sbo.workspace_ro = cfg->workspace_ro;
	s->sbo.log_fd = -1;
	{ /* (written, rotated and removed in the session directory held
	   * open, never by its path: one swapped for a link leads elsewhere) */
		char at[PATH_MAX + 16];
		snprintf(at, sizeof at, "%s/kernel.log", s->at);
		if (!(s->klog = kr_kernel_log_new(at, KR_KERNEL_LOG_MAX)))
			return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	return 0;
}

/* The backend, the kernelspec, where the kernel's sockets go, and under
 * root who the sandbox runs as (the directories it reaches, WS among
 * them, shared with it).  0, or -1 with ERR. */
static int take_backend(sup_t *s, const char *ws, kbox_error_t *err)
{
	const kr_backend_t *b;
	if (!(b = kr_backend_find(s->backend)))
		return kbox_error_set(err, KBOX_E_NOTFOUND, "unknown backend \"%s\"", s->backend);
	/* sockets in a host directory: one no sandbox reaches, never in the
	 * session's (a sandbox that once held it open would subscribe to what
	 * the kernel publishes) */
	if (!b->private_sockets) {
		if ((s->sockets_lock = kr_live_sockets_make(s->sockets_dir, err)) < 0)
			return -1;
		s->sbo.runtime_dir = s->sockets_dir;
	}
	/* a remote kernel's kernelspec is its server's */
	if (strcmp(s->backend, "gateway") == 0
	            ? !(s->spec = kr_gateway_spec(s->sbo.gateway_url, s->gateway_token,
	                                          s->sbo.gateway_ca, s->kernel, err))
	            : !(s->spec = kbox_kspec_find(s->kernel, err)))
		return -1;
	/* (kbox kernelspec install writes them: one would start a kbox
	 * kernel in the sandbox, which has no kbox and no front end) */
	if (kr_kspec_is_kbox(kbox_kspec_metadata(s->spec)))
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "kernelspec %s is one of kbox's own (it runs kbox kernel, for "
		        "Jupyter front ends): give the kernelspec it runs, such as " KR_KERNEL_DEFAULT,
		        s->kernel);
	/* under root a sandbox is an unprivileged user's, never root's: its
	 * directories are that user's (an unsandboxed kernel stays ours) */
	if (kr_backend_sandboxed(s->backend)) {
		if (kr_sandbox_identity(&s->id, err) < 0 ||
		    kr_session_uid(s->dir, &s->id, &s->uid_hold, err) < 0 ||
		    kr_session_share(s->dir_fd, s->dir, &s->id, err) < 0)
			return -1;
		if (ws && kr_sandbox_reachable(&s->id, ws, err) < 0)
			return -1;
		/* bwrap finds the root file system as the sandbox too */
		if (s->sbo.rootfs && kr_sandbox_reachable(&s->id, s->sbo.rootfs, err) < 0)
			return -1;
		s->sbo.drop_ids = s->id.drop;
		s->sbo.uid = s->id.uid;
		s->sbo.gid = s->id.gid;
	} else {
		s->id.uid = geteuid();
		s->id.gid = getegid();
	}
	return 0;
}

/* What the sandbox has read-write (its home, and its workspace: the
 * session's own, or WS, kbox run's) recorded as live, then looked through
 * for state directories.  0, or -1 with ERR. */
static int record_live(sup_t *s, const char *ws, kbox_error_t *err)
{
	/* what the sandbox has read-write is recorded as live first, then
	 * looked through for state directories: one made there before is
	 * found now (since kbox run looked, for a host workspace), one made
	 * after is refused (ws_live.h), and so is an outputs directory there */
	if (kr_backend_sandboxed(s->backend) &&
	    (own_live(s, &s->live_home, s->live_home_file, "home", s->home, "the session's home",
	              err) < 0 ||
	     (!ws && own_live(s, &s->live_ws, s->live_ws_file, "workspace", s->workspace,
	                      "the session's workspace", err) < 0)))
		return -1;
	if (ws && s->sbo.ws_check) {
		char real[PATH_MAX];
		struct stat st;
		if ((s->live_ws = kr_live_ws_hold(
		             ws, &(struct stat){.st_dev = s->sbo.ws_dev, .st_ino = s->sbo.ws_ino},
		             s->live_ws_file, err)) < 0 ||
		    ws_host_dir(ws, real, &st, err) < 0)
			return -1;
		/* (one swapped in under its name since kbox run checked it is
		 * refused where the sandbox binds it, by device and inode) */
	}
	return 0;
}

static int load_config(sup_t *s, kbox_error_t *err)
{
	/* one supervisor a process (the_sup): its configuration, whose
	 * strings the fields below borrow, lives as long as the process;
	 * s->config is its JSON, for what reads the session's name */
	static kr_session_config_t cfg;
	if (kr_session_config_load_at(&cfg, s->dir_fd, s->dir, err) < 0)
		return -1;
	if (!(s->config = kr_session_config_to_json(&cfg)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	s->kernel = cfg.kernel;
	s->backend = cfg.backend;
	s->ttl_ms = cfg.ttl_ms;
	s->sbo.memory_bytes = cfg.memory;
	s->sbo.cpus = cfg.cpus;
	s->sbo.pids = (long)cfg.pids;
	s->sbo.tmp_bytes = cfg.tmp_size;
	s->sbo.file_bytes = cfg.file_size;
	s->outputs_quota = (unsigned long long)cfg.outputs_quota;
	s->output_rate = (double)cfg.output_rate;
	s->sbo.rootfs = cfg.rootfs;
	s->sbo.image = cfg.image;
	s->sbo.engine = cfg.engine;
	s->sbo.gateway_url = cfg.gateway;
	s->sbo.gateway_ca = cfg.gateway_ca;
	s->sbo.launch_s = (long)cfg.launch_timeout;
	if (strcmp(cfg.backend, "gateway") == 0) {
		if (kr_gateway_token_read(s->dir_fd, &s->gateway_token, err) < 0)
			return -1;
		if (kr_gateway_dir(s->dir, s->gateway_dir, sizeof s->gateway_dir) < 0)
			return kbox_error_set(err, KBOX_E_INVALID, "%s: too long a name", s->dir);
		s->sbo.gateway_dir = s->gateway_dir;
	}
	s->sbo.state_home = getenv("KBOX_HOME");
	s->sbo.name = cfg.name;
	s->ephemeral = cfg.ephemeral;
	if (cfg.ephemeral) {
		snprintf(s->sandbox_name, sizeof s->sandbox_name, "%.64s-%ld",
		         cfg.name ? cfg.name : "run", (long)getpid());
		s->sbo.name = s->sandbox_name;
	}
	s->owner_pid = (long)cfg.owner_pid;
	if (kr_live_session_path(s->dir, "", true, s->kept, sizeof s->kept, err) < 0 ||
	    make_env(s, &cfg, err) < 0 || make_paths(s, &cfg, err) < 0 ||
	    take_backend(s, cfg.workspace, err) < 0 || record_live(s, cfg.workspace, err) < 0 ||
	    sup_functions_load(s, cfg.functions, cfg.workspace, err) < 0 ||
	    sup_relay_load(s, cfg.relay, err) < 0)
		return -1;
	return 0;
}

/* Open the session's directory (the path kbox gives is one with its
 * links resolved: a link in it now was put in since, maybe in place of the
 * session's directory, for this supervisor to take another's), take the
 * supervisor lock in it and write our pid. */
static int lock_pid(sup_t *s, kbox_error_t *err)
{
	char path[PATH_MAX], buf[32];
	struct stat st;
	int n;
	if ((s->dir_fd = kx_open_no_links(AT_FDCWD, s->dir, O_PATH | O_DIRECTORY, 0)) < 0 ||
	    fstat(s->dir_fd, &st) < 0)
		return kbox_error_set_sys(err, "the session directory %s%s", s->dir,
		                          errno == ELOOP ? " (a symbolic link is in its path)"
		                                         : "");
	s->dir_dev = st.st_dev;
	s->dir_ino = st.st_ino;
	snprintf(s->at_buf, sizeof s->at_buf, "/proc/self/fd/%d", s->dir_fd);
	s->at = s->at_buf;
	snprintf(path, sizeof path, "%s/supervisor.pid", s->dir);
	s->pid_fd = kx_open_file(s->dir_fd, "supervisor.pid", O_RDWR | O_CREAT, 0600);
	if (s->pid_fd < 0)
		return kbox_error_set_sys(err, "cannot open %s", path);
	/* kr_session_supervisor() probes with a brief LOCK_SH: a supervisor
	 * holds its lock for good, a probe for microseconds */
	for (int i = 0; flock(s->pid_fd, LOCK_EX | LOCK_NB) < 0; i++) {
		if (errno != EWOULDBLOCK || i == 50)
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "another supervisor runs this session (%s locked)",
			                      path);
		usleep(10000);
	}
	s->pid_locked = true;
	/* who held it before us (and is gone): its leftovers are ours to remove */
	n = (int)pread(s->pid_fd, buf, sizeof buf - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	s->prev_pid = strtol(buf, NULL, 10);
	n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(s->pid_fd, 0) < 0 || pwrite(s->pid_fd, buf, (size_t)n, 0) != n)
		return kbox_error_set_sys(err, "cannot write %s", path);
	return 0;
}

/* Remove what a supervisor that died left in run/ (we hold the lock: no
 * kernel of this session runs): connection files, and run/sandbox,
 * where an earlier kbox bound the kernel's sockets. */
static void clean_runtime_dir(sup_t *s)
{
	/* (reached from the session's directory held open, following no
	 * link: one put at run, or at run/sandbox, leads nowhere) */
	int run = openat(s->dir_fd, "run", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), sb;
	int rd = run >= 0 ? fcntl(run, F_DUPFD_CLOEXEC, 0) : -1;
	DIR *d = rd >= 0 ? fdopendir(rd) : NULL;
	struct dirent *e;
	if (!d && rd >= 0)
		close(rd);
	if (d) {
		while ((e = readdir(d)))
			if (strncmp(e->d_name, "kernel-", 7) == 0)
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	if (run >= 0 &&
	    (sb = openat(run, "sandbox", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		kx_empty_dirfd(sb);
		close(sb);
		unlinkat(run, "sandbox", AT_REMOVEDIR);
	}
	kx_close(&run);
}

static int listen_control(sup_t *s, kbox_error_t *err)
{
	s->listen_fd = kr_ctl_listen(s->at, err); /* we hold the supervisor lock */
	return s->listen_fd < 0 ? -1 : 0;
}

static void shutdown_session(sup_t *s)
{
	char path[PATH_MAX];
	/* no new clients while stopping: they see no supervisor and wait for
	 * the lock to go (kbox start) instead of talking to one that leaves */
	/* (removed in the directory held open, as everything of the session
	 * the supervisor removes: by its path, one swapped for a link would
	 * lead to another session's) */
	snprintf(path, sizeof path, "%s/control.sock", s->at);
	if (s->listen_fd >= 0) {
		kbox_loop_remove_fd(s->loop, s->listen_fd);
		unlink(path);
		close(s->listen_fd);
		s->listen_fd = -1;
	}
	/* what runs or waits ends with the session */
	if (s->client)
		kbox_client_fail_pending(s->client, s->stop_cause);
	sup_jobs_stop(s);
	sup_answer_pending(s, KR_CTL_ERR_STOPPED, s->stop_cause);
	sup_kernel_end(s, true);
	sup_endings_finish(s);
	/* the sandbox is gone: its workspace is no longer live, before the
	 * stop is answered (kbox run returns on that answer) */
	kr_live_ws_release(&s->live_ws, s->live_ws_file);
	kr_live_ws_release(&s->live_home, s->live_home_file);
	kr_live_sockets_release(&s->sockets_lock, s->sockets_dir);
	kbox_capture_destroy(&s->between);
	if (s->kept[0]) /* (made before its kernel started) */
		sup_write_file(s->kept, KR_LIVE_LAST_STOP, s->stop_cause);
	sup_log_flush(s, true); /* what was held is counted before the end */
	sup_log(s, "stop",
	        json_pack("{s:s, s:I}", "cause", s->stop_cause, "executions",
	                  (json_int_t)s->executions));
	snprintf(path, sizeof path, "%s/supervisor.pid", s->at);
	unlink(path); /* a clean stop: kbox ls shows "stopped", not "dead" */
	if (s->stop_conn)
		sup_conn_send(s->stop_conn, json_pack("{s:b, s:s}", "ok", 1, "re", "stop"), false);
	/* the last replies go out before the connections close */
	for (size_t i = 0; i < s->n_conns; i++) {
		conn_t *c = s->conns[i];
		long long deadline = kx_now_ms() + 1000;
		while (c->out_len && kx_now_ms() < deadline && sup_conn_flush(c))
			usleep(1000);
	}
}

/* What the previous supervisor of the session left: the notice and the
 * cause for the first execution (why it ended, or that it died, or its
 * memory limit killed it), its runtime files, and its cgroups. */
static void take_over(sup_t *s)
{
	char prev[512], gen[32];

	/* what happened to the previous incarnation, for the first exec: its
	 * last stop as it wrote it where no sandbox reaches (in the session's
	 * directory, code there made it kbox's own note of another session's
	 * results: review 18, W18-3) */
	sup_read_file(s->at, "generation", gen, sizeof gen);
	s->generation = strtoul(gen, NULL, 10);
	sup_read_file(s->kept, KR_LIVE_LAST_STOP, prev, sizeof prev);
	if (s->generation > 0) {
		kx_msgf(s->notice, sizeof s->notice,
		        "kernel restarted: the session's previous kernel ended (%s); earlier state "
		        "(variables, imports, loaded data) is lost; files in the workspace are kept",
		        prev[0] ? prev : "its supervisor died");
		snprintf(s->last_cause, sizeof s->last_cause, "%s",
		         prev[0] ? prev : "supervisor died");
	} else if (s->new_notice) {
		/* made by the call that runs code in it: a name mistyped is a
		 * new, empty session, which the result says */
		const char *name = json_string_value(json_object_get(s->config, "name"));
		kx_msgf(s->notice, sizeof s->notice,
		        "new session %s: nothing was defined before this call", name ? name : "");
	}
	{
		char path[PATH_MAX + 16];
		snprintf(path, sizeof path, "%s/" KR_LIVE_LAST_STOP, s->kept);
		unlink(path);
	}
	clean_runtime_dir(s);
	if (s->prev_pid > 0 && s->prev_pid != getpid()) {
		/* was this session's previous supervisor killed by its own
		 * memory limit? */
		const char *name = json_string_value(json_object_get(s->config, "name"));
		char cg[160];
		snprintf(cg, sizeof cg, "kbox-%s-%ld-supervisor", name ? name : "sandbox",
		         s->prev_pid);
		if (!prev[0] && kr_cgroup_oom_kills_named(cg) > 0) {
			char max[32];
			kx_fmt_bytes(max, sizeof max, MEMORY_MAX);
			snprintf(
			        s->notice, sizeof s->notice,
			        "kernel restarted: the session's previous supervisor was killed for "
			        "holding more than %s of its kernel's output; earlier state (variables, "
			        "imports, loaded data) is lost; files in the workspace are kept",
			        max);
			snprintf(s->last_cause, sizeof s->last_cause,
			         "its supervisor went over its memory limit (%s)", max);
		}
	}
	{
		/* the cgroups a previous supervisor of this session left (killed,
		 * it could not remove them; it is gone: we hold the lock), by the
		 * paths it recorded, never by name; then ours, recorded alike;
		 * where no sandbox reaches (review 18, B18-2: a ledger code put in
		 * the session's directory had another session's cgroups killed) */
		char path[PATH_MAX + 16];
		snprintf(path, sizeof path, "%s/" KR_LIVE_CGROUPS, s->kept);
		kr_cgroup_reap(path);
		kr_cgroup_record(path);
	}
}

int kr_supervisor_run(const char *dir, int ready_fd, unsigned flags)
{
	sup_t s = {0};
	kbox_error_t err = {0};
	sigset_t mask;
	int status = 0;

	s.dir = s.at = dir;
	s.listen_fd = s.sig_fd = s.pid_fd = s.dir_fd = s.owner_fd = s.ino_fd = s.uid_hold =
	        s.live_ws = -1;
	s.live_home = s.sockets_lock = -1;
	s.outputs_wd = s.sockets_wd = -1;
	s.ready_fd = ready_fd;
	s.new_notice = flags & KR_SUP_NEW_NOTICE;
	s.started_ms = kx_now_ms();
	s.started_wall = kx_wall_s();
	s.last_activity_wall = s.started_wall;
	s.last_activity_ms = s.started_ms;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* large blocks (messages, their text) straight from and back to the
	 * system, not kept in the heap: the memory bound reads resident
	 * memory, which then follows what is held */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	s.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	if (s.sig_fd < 0 || !(s.loop = kbox_loop_new(&err)) || lock_pid(&s, &err) < 0 ||
	    load_config(&s, &err) < 0 || listen_control(&s, &err) < 0 ||
	    kbox_loop_add_fd(s.loop, s.sig_fd, on_signal, &s, &err) < 0 ||
	    kbox_loop_add_fd(s.loop, s.listen_fd, sup_on_accept, &s, &err) < 0 ||
	    watch_owner(&s, &err) < 0 ||
	    kbox_loop_add_timer(s.loop, 1000, true, on_tick, &s, &err) < 0) {
		if (!err.msg[0])
			kbox_error_set_sys(&err, "signalfd");
		sup_log(&s, "error", json_pack("{s:s}", "error", err.msg));
		sup_report_ready(&s, json_pack("{s:b, s:s}", "ok", 0, "error", err.msg));
		if (s.pid_locked) {
			/* a start that failed (a gateway's server not reached, say)
			 * leaves the session stopped, with the cause, not "dead" */
			if (s.kept[0]) {
				kx_msgf(s.stop_cause, sizeof s.stop_cause, "it could not start: %s",
				        err.msg);
				sup_write_file(s.kept, KR_LIVE_LAST_STOP, s.stop_cause);
			}
			unlinkat(s.dir_fd, "supervisor.pid", 0);
		}
		status = 1;
		goto out;
	}
	take_over(&s);
	if (sup_kernel_start(&s, &err) < 0) {
		kx_msgf(s.stop_cause, sizeof s.stop_cause, "the kernel could not start: %s",
		        err.msg);
		sup_report_ready(&s, json_pack("{s:b, s:s}", "ok", 0, "error", err.msg));
		shutdown_session(&s);
		status = 1;
		goto out;
	}
	sup_memory_bound(&s);
	kbox_loop_run(s.loop);
	if (!s.stopping)
		snprintf(s.stop_cause, sizeof s.stop_cause, "the supervisor's event loop failed");
	status = s.start_failed ? 1 : 0;
	shutdown_session(&s);
out:
	while (s.n_conns)
		sup_conn_close(&s, s.conns[s.n_conns - 1]);
	if (s.listen_fd >= 0)
		close(s.listen_fd);
	if (s.sig_fd >= 0)
		close(s.sig_fd);
	if (s.pid_fd >= 0)
		close(s.pid_fd);
	if (s.owner_fd >= 0)
		close(s.owner_fd);
	if (s.ino_fd >= 0)
		close(s.ino_fd);
	kr_kernel_log_destroy(&s.klog);
	sup_log_flush(&s, true); /* (a stop that did not go through shutdown_session) */
	s.at = dir;
	kx_close(&s.dir_fd);
	if (s.ephemeral && s.config) {
		/* kbox run's session: nothing of it stays, its private
		 * workspace included (one given with --workspace is the
		 * caller's directory, elsewhere; its own cgroup, removed below,
		 * needs no record after it) */
		kr_cgroup_record(NULL);
		kr_session_uid_release(dir);
		kr_live_session_forget(dir); /* (review 18, W18-4: one a run, forever) */
		kx_empty_dir(dir);
		rmdir(dir);
	}
	if (s.cg) {
		/* out of its own cgroup first, or it could not be removed */
		kr_cgroup_leave(s.cg);
		kr_cgroup_destroy(&s.cg);
	}
	kx_close(&s.uid_hold); /* the sandbox has gone: its uid may go too */
	kr_live_ws_release(&s.live_ws, s.live_ws_file);
	kr_live_ws_release(&s.live_home, s.live_home_file);
	kr_live_sockets_release(&s.sockets_lock, s.sockets_dir);
	sup_functions_free(&s);
	sup_relay_free(&s);
	kbox_loop_destroy(&s.loop);
	kbox_kspec_destroy(&s.spec);
	if (s.gateway_token) {
		explicit_bzero(s.gateway_token, strlen(s.gateway_token));
		free(s.gateway_token);
	}
	free(s.env);
	json_decref(s.config);
	return status;
}
