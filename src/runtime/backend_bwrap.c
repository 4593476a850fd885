/* src/runtime/backend_bwrap.c — backend `bwrap`, the default: the kernel in
 * a bubblewrap sandbox (bwrap.c builds its command line and seccomp
 * filter), in cgroups of its own (memory, pids, CPU) where the machine
 * allows, with rlimits otherwise.
 *
 * Everything is prepared in the supervisor before fork; the child only
 * joins the cgroup, takes its rlimits and execs bwrap (open, write,
 * setrlimit, execve: safe in the child of a threaded process).  bwrap's
 * init (pid 1 inside) runs the kernel (pid 2). */
#include "runtime/runtime.h"
#include "runtime/backend.h"
#include "runtime/bwrap.h"
#include "runtime/cgroup.h"
#include "runtime/ro_bind.h"
#include "runtime/session.h"
#include "runtime/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
	kr_cgroup_t *cg;
	pid_t kernel_pid; /* the kernel, found under bwrap's init */
	/* the workspace and the home (home_dev 0: none) as they were, not a
	 * link, just before bwrap was asked to bind them by their paths */
	dev_t ws_dev, home_dev;
	ino_t ws_ino, home_ino;
} bwrap_t;

/* PATH, which bwrap is to bind as the session's WHAT, is a directory now,
 * reached through no symbolic link (the path was recorded with its links
 * resolved: one there now was put in since, maybe in place of the
 * session's directory, to have bwrap bind another): its identity into
 * *DEV and *INO, which take_root finds again in the sandbox.  0, or -1
 * with ERR. */
static int bind_source(const char *path, const char *what, dev_t *dev, ino_t *ino,
                       kbox_error_t *err)
{
	struct stat st;
	int fd = kx_open_no_links(AT_FDCWD, path, O_PATH | O_DIRECTORY, 0), e = errno;
	if (fd < 0 && (e == ELOOP || e == ENOTDIR))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "the session's %s %s is not a directory reached through no "
		                      "symbolic link (%s): refusing it",
		                      what, path,
		                      e == ELOOP ? "a symbolic link is in its path"
		                                 : "it, or a part of it, is another file");
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		errno = e;
		return kbox_error_set_sys(err, "the session's %s %s", what, path);
	}
	close(fd);
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

/* Whether the sandbox PID has at its WHERE (under its root) the directory
 * DEV:INO. */
static bool bound_is(pid_t pid, const char *where, dev_t dev, ino_t ino)
{
	char path[96];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%ld/root%s", (long)pid, where);
	return stat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

void kr_sandbox_default_limits(kr_sandbox_opts_t *o)
{
	if (o->memory_bytes <= 0)
		o->memory_bytes = KR_BWRAP_MEMORY;
	if (o->pids <= 0)
		o->pids = KR_BWRAP_PIDS;
	if (o->tmp_bytes <= 0)
		o->tmp_bytes = KR_BWRAP_TMP_BYTES;
	if (o->file_bytes <= 0)
		o->file_bytes = KR_BWRAP_FILE_BYTES;
}

static unsigned bwrap_unavailable(char *why, size_t size)
{
	unsigned avail = kr_cgroup_available(why, size), gone = 0;
	if (!(avail & KR_CG_MEMORY))
		gone |= KR_LIMIT_MEMORY;
	if (!(avail & KR_CG_CPU))
		gone |= KR_LIMIT_CPUS;
	if (!(avail & KR_CG_PIDS))
		gone |= KR_LIMIT_PIDS;
	return gone;
}

/* Set rlimit RES to N (soft and hard) when N > 0.  0 or -1. */
static int set_rlimit(int res, long long n)
{
	struct rlimit r = {(rlim_t)n, (rlim_t)n};
	return n > 0 ? setrlimit(res, &r) : 0;
}

/* Make the sandbox's cgroup and describe the limits in sb->limits and
 * sb->missing.  The cgroup controllers it got. */
static unsigned make_cgroup(kr_sandbox_t *sb, bwrap_t *w)
{
	static unsigned serial;
	const kr_sandbox_opts_t *l = &sb->o;
	unsigned want = KR_CG_MEMORY | KR_CG_PIDS | (l->cpus > 0 ? KR_CG_CPU : 0), got;
	char cgname[128], why[512], mem[32], tmp[32], fsz[32], cpu[48];

	snprintf(cgname, sizeof cgname, "kbox-%s-%ld-%u", l->name ? l->name : "sandbox",
	         (long)getpid(), ++serial);
	w->cg = kr_cgroup_new(cgname, want, l->memory_bytes, l->cpus, l->pids, why, sizeof why);
	got = kr_cgroup_enforced(w->cg);
	kx_fmt_bytes(mem, sizeof mem, l->memory_bytes);
	kx_fmt_bytes(tmp, sizeof tmp, l->tmp_bytes);
	kx_fmt_bytes(fsz, sizeof fsz, l->file_bytes);
	if (l->cpus > 0)
		snprintf(cpu, sizeof cpu, "%.4g (%s)", l->cpus,
		         got & KR_CG_CPU ? "cgroup" : "not enforced");
	else
		snprintf(cpu, sizeof cpu, "all");
	snprintf(sb->limits, sizeof sb->limits,
	         "memory %s (%s), pids %ld (%s), cpus %s, /tmp %s (tmpfs), files up to %s (rlimit)",
	         mem, got & KR_CG_MEMORY ? "cgroup" : "RLIMIT_DATA", l->pids,
	         got & KR_CG_PIDS ? "cgroup" : "RLIMIT_NPROC", cpu, tmp, fsz);
	sb->missing[0] = '\0';
	if ((got & want) != want)
		snprintf(sb->missing, sizeof sb->missing, "cgroup limits not applied: %s", why);
	return got;
}

typedef struct {
	kr_sandbox_t *sb;
	bwrap_t *w;
	char **bargv, **env;
	int *fds;
	size_t n_fds;
	long long rl_data;
	pid_t parent;
} bwrap_child_t;

/* The child: the rlimits that stand in for a missing memory controller,
 * then bwrap (which changes into /workspace: no cwd), as the sandbox user
 * when there is one (under root: bwrap then runs as for any unprivileged
 * user, and maps the sandbox's uid 1000 to that user, never to root).
 * The sandbox joins its cgroup and gets its RLIMIT_NPROC from outside,
 * while bwrap makes its mounts (settle). */
static void bwrap_child(void *arg, int errfd)
{
	bwrap_child_t *c = arg;
	if (set_rlimit(RLIMIT_FSIZE, c->sb->o.file_bytes) < 0 ||
	    set_rlimit(RLIMIT_DATA, c->rl_data) < 0) {
		int e = errno;
		if (write(errfd, &e, sizeof e) < 0)
			_exit(126);
		_exit(126);
	}
	kx_ids_t ids = {c->sb->o.uid, c->sb->o.gid};
	kx_child_t child = {.errfd = errfd,
	                    .out_fd = c->sb->o.log_fd,
	                    .ids = c->sb->o.drop_ids ? &ids : NULL,
	                    .parent = c->parent,
	                    .keep = c->fds,
	                    .n_keep = c->n_fds};
	kx_child_exec(c->bargv[0], c->bargv, c->env, &child);
}

/* Whether the sandbox PID has its root: bwrap's last pivot_root is made
 * once every mount is, and only then does its root hold
 * KR_BWRAP_KERNEL_DIR (before its first, its root is the host's, which
 * may have a directory of that name; between the two, a tmpfs of bwrap's
 * own that holds only the old root and the new).  Its root in *ROOT and
 * that tmpfs in *DIR. */
static bool root_made(pid_t pid, struct stat *root, struct stat *dir)
{
	char path[64];
	struct stat host;
	snprintf(path, sizeof path, "/proc/%ld/root", (long)pid);
	if (stat("/proc/self/root", &host) < 0 || stat(path, root) < 0 ||
	    (root->st_dev == host.st_dev && root->st_ino == host.st_ino))
		return false;
	snprintf(path, sizeof path, "/proc/%ld/root" KR_BWRAP_KERNEL_DIR, (long)pid);
	return lstat(path, dir) == 0 && S_ISDIR(dir->st_mode) && dir->st_dev != root->st_dev;
}

/* Once bwrap has made the sandbox PID's mounts (it waits on its block
 * pipe before it runs anything of the kernel's): take the tmpfs of the
 * kernel's sockets (sb->sockets_fd), and check that /workspace is the
 * directory that was checked, not one swapped in under its name since.
 * Its mounts come after bwrap's info: wait for them (10 s, then the start
 * fails; a sandbox that ends first is not an error here, its start's
 * failure is its own).
 * 0, or -1 with ERR. */
static int take_root(kr_sandbox_t *sb, pid_t pid, kbox_error_t *err)
{
	bwrap_t *w = sb->priv;
	struct stat root, dir, st;
	char path[64];
	bool made = false;
	int fd;

	for (int tries = 0; tries < 10000 && !made && kill(pid, 0) == 0; tries++) {
		struct timespec ms = {0, 1000000};
		if (!(made = root_made(pid, &root, &dir)))
			nanosleep(&ms, NULL);
	}
	if (!made && kill(pid, 0) == 0)
		return kbox_error_set(err, KBOX_E_TIMEOUT,
		                      "bwrap did not make the sandbox's mounts within 10 s");
	if (!made)
		return 0;
	snprintf(path, sizeof path, "/proc/%ld/root" KR_BWRAP_KERNEL_DIR, (long)pid);
	fd = kx_open_path(AT_FDCWD, path, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != dir.st_dev || st.st_ino != dir.st_ino) {
		if (fd >= 0)
			close(fd);
		return kbox_error_set_sys(err, "cannot open the sandbox's %s", KR_BWRAP_KERNEL_DIR);
	}
	sb->sockets_fd = fd;
	/* bwrap binds by path: what it bound must be what was looked at, not
	 * a link (or another directory) swapped in under the name meanwhile,
	 * which would give the sandbox a directory of the host's */
	if (!bound_is(pid, "/workspace", sb->o.ws_check ? sb->o.ws_dev : w->ws_dev,
	              sb->o.ws_check ? sb->o.ws_ino : w->ws_ino))
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "the workspace %s is no longer the directory that was checked (it was "
		        "replaced under its name): refusing it",
		        sb->o.workspace);
	if (sb->o.home && !bound_is(pid, "/home/kbox", w->home_dev, w->home_ino))
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "the session's home %s is no longer the directory that was checked (it was "
		        "replaced under its name): refusing it",
		        sb->o.home);
	return 0;
}

/* Hold the sandbox while bwrap makes its mounts: wait for bwrap's info on
 * SYNC's info pipe, move the sandbox's first process (the one that runs
 * the command, and whose children its kernel will be) into the cgroup,
 * set the bounds that Linux keeps per user namespace on it (RLIMIT_NPROC
 * when it stands in for the pids cgroup, and the inotify limits), take
 * its root once its mounts are made (take_root), and let it go on through
 * SYNC's block pipe.  Joining a cgroup v1 waits for an RCU grace period
 * (~5-12 ms): done here, it overlaps the mounts bwrap makes meanwhile,
 * instead of delaying bwrap's start.  Inotify limits that cannot be set
 * are said in sb->limits and sb->missing; anything else that fails is -1
 * with ERR (the sandbox is killed).  A bwrap that ends before it says
 * anything is not an error here: the start's failure is its own. */
static int settle(kr_sandbox_t *sb, bwrap_t *w, long nproc, kr_bwrap_sync_t *sync,
                  kbox_error_t *err)
{
	kbox_error_t ierr = {0};
	pid_t pid = kr_bwrap_info_pid(sync->info[0], err);
	size_t n;
	int bound;
	if (pid == 0)
		return 0; /* it ended first */
	if (pid < 0)
		goto kill;
	if (w->cg && kr_cgroup_add(w->cg, pid) < 0) {
		kbox_error_set_sys(err, "cannot move the sandbox (pid %ld) into its cgroup",
		                   (long)pid);
		goto kill;
	}
	if ((bound = kr_bwrap_bound(pid, nproc, true, &ierr)) < 0) {
		if (err)
			*err = ierr;
		goto kill;
	}
	n = strlen(sb->limits);
	if (bound == 0)
		snprintf(sb->limits + n, sizeof sb->limits - n,
		         ", inotify %d instances and %d watches (user namespace)",
		         KR_BWRAP_INOTIFY_INSTANCES, KR_BWRAP_INOTIFY_WATCHES);
	else {
		size_t m = strlen(sb->missing);
		snprintf(sb->limits + n, sizeof sb->limits - n, ", inotify not bounded");
		snprintf(sb->missing + m, sizeof sb->missing - m, "%sinotify limits not set: %s",
		         m ? "; " : "", ierr.msg);
	}
	if (take_root(sb, pid, err) < 0 || kr_bwrap_sync_go(sync, err) < 0)
		goto kill;
	return 0;
kill:
	kx_kill_wait(sb->pid);
	sb->pid = -1;
	return -1;
}

/* The read-only binds the kernel EXE needs (kr_ro_bind_find): what its
 * installation needs of /etc (or /opt, /srv), never kbox's own
 * directories.  NULL with ERR. */
static char **find_binds(kr_sandbox_t *sb, const kr_bwrap_opts_t *b, const char *exe,
                         kbox_error_t *err)
{
	kbox_error_t ignored = {0};
	char *state = kr_state_home(&ignored), **binds;
	const char *deny[] = {KR_ROOT_STATE_HOME, NULL, NULL, NULL, NULL, NULL};
	const char *own[] = {state, b->workspace, b->home};
	size_t nd = 1;
	for (size_t i = 0; i < sizeof own / sizeof *own; i++)
		if (own[i])
			deny[nd++] = own[i];
	binds = kr_ro_bind_find(b->rootfs, sb->spec, exe, deny, err);
	free(state);
	return binds;
}

static int bwrap_start(kr_sandbox_t *sb, char **argv, kbox_error_t *err)
{
	bwrap_t *w = calloc(1, sizeof *w);
	kr_bwrap_opts_t b = {0};
	char **env = NULL, **bargv = NULL, *exe = NULL, **binds = NULL;
	kr_bwrap_sync_t sync = {{-1, -1}, {-1, -1}};
	int *fds = NULL, child_errno, rc = -1, f;
	long long rl_data = 0;
	long rl_nproc = 0;
	size_t n_fds = 0;
	unsigned got;
	bwrap_child_t c;

	if (!w)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	sb->priv = w;
	w->kernel_pid = -1;
	got = make_cgroup(sb, w);
	/* without a memory cgroup: the heap and private writable mappings
	 * (allocation beyond fails with MemoryError rather than the process
	 * being killed; address space, RLIMIT_AS, would count every thread's
	 * reserved arenas and stacks, and stop Python starting) */
	if (!(got & KR_CG_MEMORY))
		rl_data = sb->o.memory_bytes;
	if (!(got & KR_CG_PIDS))
		rl_nproc = sb->o.pids;

	if (bind_source(sb->o.workspace, "workspace", &w->ws_dev, &w->ws_ino, err) < 0 ||
	    (sb->o.home && bind_source(sb->o.home, "home", &w->home_dev, &w->home_ino, err) < 0))
		goto out;
	b.rootfs = sb->o.rootfs;
	b.workspace = sb->o.workspace;
	b.workspace_ro = sb->o.workspace_ro;
	b.conn_text = sb->o.conn_text;
	b.conn_path = sb->o.conn_path;
	b.home = sb->o.home;
	b.tmp_bytes = sb->o.tmp_bytes;
	if (!(exe = kx_resolve_command(argv[0], b.rootfs))) {
		kbox_error_set(err, KBOX_E_NOTFOUND, "kernel %s: command %s not found in %s%s",
		               sb->kernel, argv[0], KX_SAFE_PATH,
		               b.rootfs ? " of the root filesystem" : "");
		goto out;
	}
	free(argv[0]);
	argv[0] = exe;
	exe = NULL;
	if (!(binds = find_binds(sb, &b, argv[0], err)))
		goto out;
	b.ro_binds = binds;
	if (!(env = kbox_kernel_env(sb->spec, sb->o.env, "/home/kbox"))) {
		kbox_error_set(err, KBOX_E_NOMEM,
		               "out of memory building the kernel's environment");
		goto out;
	}
	/* ipykernel polls its JPY_PARENT_PID parent and exits once its own
	 * parent is pid 1, which bwrap's init is; 1 itself means "no parent
	 * to poll" (and no console banner) */
	for (size_t i = 0; env[i]; i++)
		if (strncmp(env[i], "JPY_PARENT_PID=", 15) == 0) {
			char *one = strdup("JPY_PARENT_PID=1");
			if (!one) {
				kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
				goto out;
			}
			free(env[i]);
			env[i] = one;
		}
	if (kr_bwrap_sync_open(&sync, &b, err) < 0 ||
	    !(bargv = kr_bwrap_argv(&b, argv, &fds, &n_fds, err)))
		goto out;
	kr_bwrap_sync_passed(&sync);
	c = (bwrap_child_t){sb, w, bargv, env, fds, n_fds, rl_data, getpid()};
	if ((f = kr_sandbox_fork(sb, bwrap_child, &c, &child_errno, err)) < 0)
		goto out;
	if (f > 0) {
		errno = child_errno;
		kbox_error_set_sys(err, "cannot run %s (the sandbox's rlimits or exec)", bargv[0]);
		goto out;
	}
	/* what only bwrap needed (its ends of the pipes among them: the info
	 * pipe must see its end when bwrap ends) */
	kx_close_all(fds, n_fds);
	n_fds = 0;
	if (settle(sb, w, rl_nproc, &sync, err) < 0)
		goto out;
	rc = 0;
out:
	kr_bwrap_sync_close(&sync);
	kx_close_all(fds, n_fds);
	free(fds);
	kbox_strv_free(env);
	kbox_strv_free(bargv);
	kbox_strv_free(binds);
	free(exe);
	return rc;
}

static pid_t bwrap_kernel_pid(kr_sandbox_t *sb)
{
	bwrap_t *w = sb->priv;
	pid_t init;
	if (w->kernel_pid > 0 && kill(w->kernel_pid, 0) == 0)
		return w->kernel_pid;
	w->kernel_pid = -1;
	if (sb->pid > 0 && (init = kr_proc_child_of(sb->pid)) > 0)
		w->kernel_pid = kr_proc_child_of(init);
	return w->kernel_pid;
}

static bool bwrap_wait(kr_sandbox_t *sb)
{
	bwrap_t *w = sb->priv;

	if (kr_sandbox_poll(sb, "the sandbox process", true))
		return true;
	/* (only a kill besides those of children a notice named) */
	if (kr_cgroup_oom_kills(w->cg) > sb->oom_told) {
		char lim[32];
		kx_fmt_bytes(lim, sizeof lim, kr_cgroup_memory_limit(w->cg));
		snprintf(sb->cause, sizeof sb->cause,
		         "the kernel was killed: out of memory (limit %s)", lim);
	}
	return false;
}

static int bwrap_signal(kr_sandbox_t *sb, int sig, kbox_error_t *err)
{
	pid_t k;
	if (sig == SIGKILL) {
		/* bwrap's init dies with it (die-with-parent), and with pid 1 the
		 * whole pid namespace */
		kill(sb->pid, SIGKILL);
		return 0;
	}
	if ((k = bwrap_kernel_pid(sb)) <= 0)
		return kbox_error_set(err, KBOX_E_DEAD,
		                      "the kernel's process was not found in the sandbox");
	if (kill(k, sig) < 0)
		return kbox_error_set_sys(err, "cannot signal the kernel (pid %ld)", (long)k);
	return 0;
}

static void bwrap_cleanup(kr_sandbox_t *sb)
{
	bwrap_t *w = sb->priv;
	if (!w)
		return;
	kr_cgroup_destroy(&w->cg);
	free(w);
	sb->priv = NULL;
}

static long long bwrap_memory(kr_sandbox_t *sb)
{
	bwrap_t *w = sb->priv;
	return w ? kr_cgroup_memory(w->cg) : -1;
}

static long bwrap_oom_kills(kr_sandbox_t *sb)
{
	bwrap_t *w = sb->priv;
	return w && w->cg ? kr_cgroup_oom_kills(w->cg) : -1;
}

const kr_backend_t kr_backend_bwrap = {
        .name = "bwrap",
        .sandboxed = true,
        .limits = KR_LIMIT_MEMORY | KR_LIMIT_CPUS | KR_LIMIT_PIDS,
        .sockets_inside = KR_BWRAP_KERNEL_DIR,
        .private_sockets = true,
        .conn_inside = KR_BWRAP_KERNEL_DIR,
        .defaults = kr_sandbox_default_limits,
        .unavailable = bwrap_unavailable,
        .start = bwrap_start,
        .signal = bwrap_signal,
        .wait = bwrap_wait,
        .cleanup = bwrap_cleanup,
        .kernel_pid = bwrap_kernel_pid,
        .memory = bwrap_memory,
        .oom_kills = bwrap_oom_kills,
};
