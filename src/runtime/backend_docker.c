/* src/runtime/backend_docker.c — backend `docker`: the kernel as a
 * container's command, one container a kernel, through a container
 * engine's API (Docker, or Podman's Docker-compatible service).  The
 * engine is spoken to by kbox-engine, a helper this backend runs for each
 * container (src/engine/engine_proto.h): the helper is the sandbox's
 * process (sb->pid), creates and starts the container, passes its output
 * to the kernel's log, says how it ended, and removes it; it removes it
 * too when the supervisor dies (its end of file, or its parent-death
 * signal SIGTERM).
 *
 * The container: no network (NetworkMode none), a read-only root, every
 * capability dropped, no new privileges, kbox-seccomp as its init (not
 * the engine's: every process of the container is under kbox's filter;
 * it passes SIGINT on to the kernel), memory (swap
 * included), pids and cpus limits in its cgroup, /tmp and the home a
 * tmpfs, ulimits said (else Podman asks for 1048576 open files and
 * processes), a bounded json-file log, the kernel's sockets in a tmpfs
 * of its own at /run/kernel (1 MiB, 1777 as /tmp), which the
 * supervisor reaches through /proc/PID/root as it reaches bwrap's
 * (take_sockets).  Binds: the workspace at /workspace, the home at
 * /home/kbox, kbox-seccomp read-only.  It runs as the sandbox user
 * (under root: the unprivileged one; else the caller), so that it can
 * write what it binds.
 *
 * The connection file is never a file of the host's: its text goes in
 * the container's environment, and the entrypoint writes it into the
 * container's own /tmp before the kernel runs (and drops it from the
 * environment the kernel sees). */
#include "runtime/runtime.h"
#include "runtime/backend.h"
#include "runtime/bwrap.h"
#include "engine/engine_proto.h"
#include "runtime/cgroup.h"
#include "runtime/helper.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define SOCKETS_INSIDE "/run/kernel"
#define SOCKETS_BYTES (1 << 20)
#define CONN_INSIDE "/tmp/.kbox"
#define HOME_INSIDE "/home/kbox"
#define WORKSPACE_INSIDE "/workspace"
/* kbox's seccomp filter's loader (src/engine/seccomp_main.c), bound
 * read-only into the container, and the variable it reads the filter from */
#define FILTER_PROGRAM "kbox-seccomp"
#define FILTER_INSIDE "/run/kbox-seccomp"
#define FILTER_VAR "KBOX_SECCOMP"
/* How long cleanup waits for the helper to remove a container, ms. */
#define REMOVE_WAIT_MS 15000

/* Runs as the entrypoint under kbox-seccomp (so under kbox's filter from
 * its first system call), $0 the connection file, $@ the kernel's argv:
 * the connection file from the environment into the container's /tmp,
 * matplotlib's font cache (the image's, built once) where it may write,
 * then the kernel, without the key in its environment. */
static const char entry_script[] =
        "umask 077; mkdir -p " CONN_INSIDE " /tmp/matplotlib || exit 127; "
        "if [ -d /usr/share/kbox/mpl ]; then cp /usr/share/kbox/mpl/* /tmp/matplotlib/ "
        "2>/dev/null; fi; "
        "printf %s \"$KBOX_CONNECTION\" >\"$0\" || exit 127; unset KBOX_CONNECTION; "
        "exec \"$@\"";

typedef struct {
	kr_helper_t h; /* the helper: its commands, its status lines */
	char id[72];
	pid_t init_pid; /* the container's init as the host sees it; 0: not yet */
	pid_t kernel;
	bool started, exited, oom_killed, by_kbox, failed, removed;
	bool podman;        /* the engine is Podman (it reports no OOM kill on cgroup v1) */
	bool conflict;      /* the name was another's container: never removed by name here */
	bool sockets_taken; /* take_sockets has run */
	char exe[PATH_MAX]; /* kbox-engine */
	char name[256];     /* the container's */
	char engine_env[PATH_MAX + 32]; /* KBOX_ENGINE_SOCKET=..., or "" */
	long long code;
	char error[600];
	bool ws_checked;
	char filter_exe[PATH_MAX]; /* kbox-seccomp */
	char *filter_hex;          /* kbox's filter for it, as FILTER_VAR says it */
} docker_t;

/* The container's name: kbox-HASH-SESSION-GENERATION, HASH naming the
 * state directory (two kbox homes may hold sessions of one name). */
static void container_name(const kr_sandbox_t *sb, char *name, size_t size)
{
	unsigned char h[KX_SHA256_LEN];
	kx_sha256_t c;
	const char *home = sb->o.state_home ? sb->o.state_home : "";
	char hex[13];
	kx_sha256_init(&c);
	kx_sha256_update(&c, home, strlen(home));
	kx_sha256_final(&c, h);
	for (int i = 0; i < 6; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	snprintf(name, size, "kbox-%s-%s-%lu", hex, sb->o.name ? sb->o.name : "kernel",
	         sb->o.generation);
}

/* An rlimit for the container: ours (an unlimited one as -1). */
static json_t *ulimit(const char *name, int res, long long want)
{
	struct rlimit r = {RLIM_INFINITY, RLIM_INFINITY};
	long long soft, hard;
	if (want > 0)
		soft = hard = want;
	else {
		getrlimit(res, &r);
		soft = r.rlim_cur == RLIM_INFINITY ? -1 : (long long)r.rlim_cur;
		hard = r.rlim_max == RLIM_INFINITY ? -1 : (long long)r.rlim_max;
	}
	return json_pack("{s:s, s:I, s:I}", "Name", name, "Soft", (json_int_t)soft, "Hard",
	                 (json_int_t)hard);
}

static json_t *bind(const char *source, const char *target, bool read_only)
{
	return json_pack("{s:s, s:s, s:s, s:b, s:{s:s}}", "Type", "bind", "Source", source,
	                 "Target", target, "ReadOnly", read_only, "BindOptions", "Propagation",
	                 "rprivate");
}

/* kbox's seccomp filter as FILTER_VAR=HEX, two hex digits a byte of the
 * program (kbox-seccomp's input): a new string, or NULL with ERR. */
static char *filter_hex(kbox_error_t *err)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char prog[4096 * 8];
	size_t len = 0;
	ssize_t got = 1;
	char *text, *p;
	int fd = kr_seccomp_program(err);

	if (fd < 0)
		return NULL;
	while (len < sizeof prog && (got = read(fd, prog + len, sizeof prog - len)) != 0) {
		if (got < 0 && errno != EINTR)
			break;
		if (got > 0)
			len += (size_t)got;
	}
	close(fd);
	if (got != 0 || len == 0 || len % 8) {
		kbox_error_set(err, KBOX_E_SYSTEM,
		               "seccomp: cannot read the filter back (%zu bytes)", len);
		return NULL;
	}
	if (!(text = malloc(sizeof FILTER_VAR + 2 * len + 1))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	p = text + sprintf(text, FILTER_VAR "=");
	for (size_t i = 0; i < len; i++) {
		*p++ = digits[prog[i] >> 4];
		*p++ = digits[prog[i] & 15];
	}
	*p = '\0';
	return text;
}

/* The spec line for kbox-engine run: POST /containers/create's body with
 * the rest.  NULL with ERR. */
static char *make_spec(kr_sandbox_t *sb, char **argv, char **env, kbox_error_t *err)
{
	const kr_sandbox_opts_t *o = &sb->o;
	const docker_t *d = sb->priv;
	char name[256], user[64], tmpfs[128], gen[32], sup[64];
	json_t *spec = NULL, *cmd = json_array(), *jenv = json_array(), *mounts = json_array(),
	       *tmp = json_object(), *host, *create;
	char *text = NULL;

	container_name(sb, name, sizeof name);
	/* as an ordinary user, the supervisor's own uid and group: it reaches
	 * the container's /run/kernel through /proc/PID/root, which Linux
	 * opens only to a caller of the same uid and gid.  Under `sg docker`
	 * that group owns the engine; the code cannot leave a set-group-ID
	 * file of it (kbox's filter refuses those modes). */
	gid_t gid = getegid();
	snprintf(user, sizeof user, "%u:%u", (unsigned)(o->drop_ids ? o->uid : geteuid()),
	         (unsigned)(o->drop_ids ? o->gid : gid));
	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	for (size_t i = 0; env[i]; i++)
		json_array_append_new(jenv, json_string(env[i]));
	if (sb->o.conn_text)
		json_array_append_new(jenv, json_pack("s+", "KBOX_CONNECTION=", sb->o.conn_text));
	json_array_append_new(jenv, json_string(d->filter_hex));
	json_array_append_new(mounts, bind(d->filter_exe, FILTER_INSIDE, true));
	if (o->workspace)
		json_array_append_new(mounts,
		                      bind(o->workspace, WORKSPACE_INSIDE, o->workspace_ro));
	if (o->home)
		json_array_append_new(mounts, bind(o->home, HOME_INSIDE, false));
	/* /tmp may hold programs, as bwrap's does (Docker's is noexec
	 * unless told) */
	snprintf(tmpfs, sizeof tmpfs, "rw,exec,nosuid,nodev,size=%lld,mode=1777", o->tmp_bytes);
	json_object_set_new(tmp, "/tmp", json_string(tmpfs));
	if (!o->home) {
		snprintf(tmpfs, sizeof tmpfs, "rw,nosuid,nodev,size=%lld,mode=1777", o->tmp_bytes);
		json_object_set_new(tmp, HOME_INSIDE, json_string(tmpfs));
	}
	/* the kernel's sockets: a tmpfs of its own (1 MiB, as bwrap's), which
	 * the supervisor reaches through the container's root (take_sockets);
	 * 1777, as /tmp: Podman takes no uid= for a tmpfs, and the sandbox
	 * user is the container's only one */
	snprintf(tmpfs, sizeof tmpfs, "rw,noexec,nosuid,nodev,size=%d,mode=1777", SOCKETS_BYTES);
	json_object_set_new(tmp, SOCKETS_INSIDE, json_string(tmpfs));
	host = json_pack("{s:s, s:b, s:b, s:I, s:I, s:I, s:[s], s:[s], s:s, s:I, s:o, s:o, "
	                 "s:[o, o, o], s:{s:s}, s:{s:s}}",
	                 "NetworkMode", "none", "Init", 0, "ReadonlyRootfs", 1, "Memory",
	                 (json_int_t)o->memory_bytes, "MemorySwap", (json_int_t)o->memory_bytes,
	                 "PidsLimit", (json_int_t)o->pids, "CapDrop", "ALL", "SecurityOpt",
	                 "no-new-privileges", "IpcMode", "private", "ShmSize",
	                 (json_int_t)o->tmp_bytes, "Tmpfs", tmp, "Mounts", mounts, "Ulimits",
	                 ulimit("nofile", RLIMIT_NOFILE, 0), ulimit("nproc", RLIMIT_NPROC, 0),
	                 ulimit("fsize", RLIMIT_FSIZE, o->file_bytes), "LogConfig", "Type", "none",
	                 "RestartPolicy", "Name", "no");
	tmp = mounts = NULL;
	if (host && o->cpus > 0)
		json_object_set_new(host, "NanoCpus", json_integer((json_int_t)(o->cpus * 1e9)));
	snprintf(gen, sizeof gen, "%lu", o->generation);
	snprintf(sup, sizeof sup, "%ld:%lld", (long)getpid(), kx_proc_start_time(getpid()));
	create = json_pack(
	        "{s:s, s:s, s:s, s:s, s:[s, s, s, s, s], s:o, s:o, "
	        "s:{s:s, s:s, s:s, s:s}, s:b, s:b, s:o}",
	        "Image", o->image ? o->image : KE_IMAGE_DEFAULT, "User", user, "WorkingDir",
	        WORKSPACE_INSIDE, "Hostname", "kbox", "Entrypoint", FILTER_INSIDE, "/bin/sh", "-c",
	        entry_script, sb->o.conn_path ? sb->o.conn_path : CONN_INSIDE "/kernel.json", "Cmd",
	        cmd, "Env", jenv, "Labels", "kbox.home", o->state_home ? o->state_home : "",
	        "kbox.session", o->name ? o->name : "", "kbox.generation", gen, "kbox.supervisor",
	        sup, "Tty", 0, "OpenStdin", 0, "HostConfig", host);
	cmd = jenv = NULL;
	if (create)
		spec = json_pack("{s:s, s:s, s:s, s:o}", "name", name, "home",
		                 o->state_home ? o->state_home : "", "session",
		                 o->name ? o->name : "", "create", create);
	if (!spec || !(text = json_dumps(spec, JSON_COMPACT)))
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory building the container's spec");
	json_decref(spec);
	json_decref(cmd);
	json_decref(jenv);
	json_decref(mounts);
	json_decref(tmp);
	return text;
}

typedef struct {
	const char *exe;
	int cmd_fd, status_fd, log_fd;
	char **env;
	pid_t parent;
} docker_child_t;

static void docker_child(void *arg, int errfd)
{
	docker_child_t *c = arg;
	static char *argv[] = {KE_PROGRAM, "run", NULL};
	int keep[1] = {KE_STATUS_FD}, status_fd = c->status_fd, log_fd = c->log_fd, e;
	/* what is at KE_STATUS_FD moves out of the way first */
	if (errfd == KE_STATUS_FD && (errfd = fcntl(errfd, F_DUPFD_CLOEXEC, 4)) < 0)
		_exit(127);
	if (log_fd == KE_STATUS_FD && (log_fd = fcntl(log_fd, F_DUPFD_CLOEXEC, 4)) < 0)
		goto fail;
	if (c->cmd_fd == KE_STATUS_FD)
		goto fail; /* (a pipe's read end made before: never 3 here) */
	if (status_fd != KE_STATUS_FD && dup2(status_fd, KE_STATUS_FD) < 0)
		goto fail;
	kx_child_t child = {.errfd = errfd,
	                    .out_fd = log_fd,
	                    .in_fd = c->cmd_fd,
	                    .parent = c->parent,
	                    .keep = keep,
	                    .n_keep = 1,
	                    .pdeath_sig = SIGTERM};
	kx_child_exec(c->exe, argv, c->env, &child);
fail:
	e = errno;
	if (write(errfd, &e, sizeof e) < 0)
		_exit(127);
	_exit(127);
}

/* How long the sweep of orphans may take, ms. */
#define ORPHANS_WAIT_MS 30000

/* Remove the containers of this state directory whose supervisor is gone
 * (killed with its helper, say, or before a reboot): kbox-engine orphans,
 * once a supervisor, before its first container.  Best effort: what it
 * cannot do, the next supervisor tries again. */
/* Run kbox-engine EXE with ARGV and ENV to its end, for at most MS (then
 * killed).  True when it exited 0. */
static bool run_helper(const char *exe, char **argv, char **env, int ms)
{
	long long deadline;
	int st = 0;
	pid_t pid, r;
	if ((pid = fork()) < 0)
		return false;
	if (pid == 0) {
		kx_child_t child = {.errfd = -1, .out_fd = -1, .parent = getppid()};
		kx_child_exec(exe, argv, env, &child);
		_exit(127);
	}
	deadline = kx_now_ms() + ms;
	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && kx_now_ms() < deadline)
		usleep(5000);
	if (r == 0) {
		kx_kill_wait(pid);
		return false;
	}
	return r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void sweep_orphans(const char *exe, const kr_sandbox_t *sb, char **henv)
{
	static bool swept;
	char *argv[] = {KE_PROGRAM, "orphans", (char *)sb->o.state_home, NULL};
	if (swept || !sb->o.state_home || !*sb->o.state_home)
		return;
	swept = true;
	run_helper(exe, argv, henv, ORPHANS_WAIT_MS);
}

/* The sockets' directory until the container's is taken (take_sockets):
 * an empty directory, removed, which no path leads to and in which
 * nothing can be made (a name looked up in it is "not found", as a socket
 * not bound yet is).  Its descriptor, or -1. */
static int placeholder_dir(void)
{
	char dir[] = "/tmp/kbox-sockets.XXXXXX";
	int fd;
	if (!mkdtemp(dir))
		return -1;
	fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	rmdir(dir);
	return fd;
}

/* Once the container has started: its tmpfs of the kernel's sockets, in
 * place of the placeholder sb->sockets_fd (the path the supervisor
 * connects by, /proc/self/fd/N/NAME, finds them from then on).  Taken
 * before the kernel can have run any code it was sent.  0; 1 when the
 * container's init has ended already (its exit says why: an image
 * without /bin/sh, say); or -1 with D->error. */
static int take_sockets(kr_sandbox_t *sb, docker_t *d)
{
	char path[64];
	struct stat st;
	struct statfs fs;
	int fd;

	snprintf(path, sizeof path, "/proc/%ld/root" SOCKETS_INSIDE, (long)d->init_pid);
	fd = kx_open_path(AT_FDCWD, path, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
	if (fd < 0 && errno == ENOENT) {
		/* (an init that ended, reaped or not, has no root) */
		char root[48];
		int rfd;
		snprintf(root, sizeof root, "/proc/%ld/root", (long)d->init_pid);
		if ((rfd = open(root, O_PATH | O_CLOEXEC)) < 0 &&
		    (errno == ENOENT || errno == ESRCH))
			return 1;
		if (rfd >= 0)
			close(rfd);
		errno = ENOENT;
	}
	if (fd >= 0 && fstat(fd, &st) == 0 && fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
	    (st.st_mode & 07777) != 01777) {
		/* (the engine gives the tmpfs the mode of a directory the
		 * image has there: a committed container's, say) */
		snprintf(d->error, sizeof d->error,
		         "the container's " SOCKETS_INSIDE
		         " has the mode %04o, not 1777: the image "
		         "has a " SOCKETS_INSIDE " of its own, whose mode the engine gave kbox's "
		         "tmpfs; use an image without it",
		         (unsigned)(st.st_mode & 07777));
		close(fd);
		return -1;
	}
	if (fd < 0 || fstat(fd, &st) < 0 || fstatfs(fd, &fs) < 0 || fs.f_type != TMPFS_MAGIC ||
	    (st.st_mode & 07777) != 01777 || dup3(fd, sb->sockets_fd, O_CLOEXEC) < 0) {
		snprintf(d->error, sizeof d->error,
		         "cannot take the container's " SOCKETS_INSIDE
		         " (its tmpfs, mode 1777): %s",
		         fd < 0 ? strerror(errno) : "not the tmpfs kbox asked for");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int docker_start(kr_sandbox_t *sb, char **argv, kbox_error_t *err)
{
	static const char *const extra[] = {"HOME=" HOME_INSIDE, "JPY_PARENT_PID=1",
	                                    "MPLCONFIGDIR=/tmp/matplotlib",
	                                    "PYDEVD_DISABLE_FILE_VALIDATION=1", NULL};
	char exe[PATH_MAX], *spec = NULL, **env = NULL, **kenv = NULL, engine[PATH_MAX + 32];
	int cmd[2] = {-1, -1}, status[2] = {-1, -1}, child_errno, f, rc = -1;
	size_t n = 0, k = 0;
	docker_t *d;

	if (!(d = calloc(1, sizeof *d)))
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	kr_helper_init(&d->h);
	d->code = -1;
	sb->priv = d;
	if ((sb->sockets_fd = placeholder_dir()) < 0) {
		kbox_error_set_sys(err, "backend docker: cannot make a directory in /tmp");
		goto out;
	}
	const char *missing = kx_helper_path(KE_PROGRAM, exe, sizeof exe) < 0 ? KE_PROGRAM
	                      : kx_helper_path(FILTER_PROGRAM, d->filter_exe,
	                                       sizeof d->filter_exe) < 0
	                              ? FILTER_PROGRAM
	                              : NULL;
	if (missing) {
		kbox_error_set(err, KBOX_E_NOTFOUND,
		               "backend docker: its helper %s was not found beside kbox-supervisor "
		               "(is kbox installed whole?)",
		               missing);
		goto out;
	}
	if (!(d->filter_hex = filter_hex(err)))
		goto out;
	/* the kernel's environment: kbox's, the session's, then the
	 * container's own (a later key wins) */
	while (sb->o.env && sb->o.env[n])
		n++;
	if (!(env = calloc(n + sizeof extra / sizeof *extra, sizeof *env)))
		goto nomem;
	for (size_t i = 0; i < n; i++)
		env[k++] = (char *)sb->o.env[i];
	for (size_t i = 0; extra[i]; i++)
		env[k++] = (char *)extra[i];
	if (!(kenv = kbox_kernel_env(sb->spec, (const char *const *)env, HOME_INSIDE)))
		goto nomem;
	if (!(spec = make_spec(sb, argv, kenv, err)))
		goto out;
	if (pipe2(cmd, O_CLOEXEC) < 0 || pipe2(status, O_CLOEXEC) < 0) {
		kbox_error_set_sys(err, "backend docker: pipe");
		goto out;
	}
	char *henv[3] = {NULL, NULL, NULL};
	if (sb->o.engine && *sb->o.engine) {
		snprintf(engine, sizeof engine, KE_SOCKET_ENV "=%s", sb->o.engine);
		snprintf(d->engine_env, sizeof d->engine_env, "%s", engine);
		henv[0] = engine;
	}
	sweep_orphans(exe, sb, henv);
	snprintf(d->exe, sizeof d->exe, "%s", exe);
	container_name(sb, d->name, sizeof d->name);
	snprintf(sb->container, sizeof sb->container, "%s", d->name);
	docker_child_t c = {exe, cmd[0], status[1], sb->o.log_fd, henv, getpid()};
	if ((f = kr_sandbox_fork(sb, docker_child, &c, &child_errno, err)) < 0)
		goto out;
	if (f > 0) {
		errno = child_errno;
		kbox_error_set_sys(err, "backend docker: cannot run %s", exe);
		goto out;
	}
	close(cmd[0]);
	close(status[1]);
	cmd[0] = status[1] = -1;
	d->h.cmd_fd = cmd[1];
	d->h.status_fd = status[0];
	cmd[1] = status[0] = -1;
	fcntl(d->h.status_fd, F_SETFL, fcntl(d->h.status_fd, F_GETFL) | O_NONBLOCK);
	/* the spec, in one write: a pipe takes 64 KiB before it blocks, and
	 * the helper reads it at once */
	if (kx_write_all(d->h.cmd_fd, spec, strlen(spec)) < 0 ||
	    kx_write_all(d->h.cmd_fd, "\n", 1) < 0) {
		kbox_error_set_sys(err, "backend docker: cannot give " KE_PROGRAM " its spec");
		goto out;
	}
	{
		char mem[32], tmp[32], fsz[32], cpu[32];
		kx_fmt_bytes(mem, sizeof mem, sb->o.memory_bytes);
		kx_fmt_bytes(tmp, sizeof tmp, sb->o.tmp_bytes);
		kx_fmt_bytes(fsz, sizeof fsz, sb->o.file_bytes);
		if (sb->o.cpus > 0)
			snprintf(cpu, sizeof cpu, "%.4g (cgroup)", sb->o.cpus);
		else
			snprintf(cpu, sizeof cpu, "all");
		snprintf(sb->limits, sizeof sb->limits,
		         "memory %s (cgroup), pids %ld (cgroup), cpus %s, /tmp %s (tmpfs), files "
		         "up to %s (rlimit), inotify not bounded (no user namespace)",
		         mem, sb->o.pids, cpu, tmp, fsz);
	}
	rc = 0;
	goto out;
nomem:
	kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
out:
	for (int i = 0; i < 2; i++) {
		if (cmd[i] >= 0)
			close(cmd[i]);
		if (status[i] >= 0)
			close(status[i]);
	}
	if (spec) {
		/* (it holds the key) */
		explicit_bzero(spec, strlen(spec));
		free(spec);
	}
	kbox_strv_free(kenv);
	free(env);
	return rc;
}

/* Act on one status line of the helper's. */
static void status_line(kr_sandbox_t *sb, docker_t *d, const char *line)
{
	json_t *j = json_loads(line, 0, NULL), *v;
	if ((v = json_object_get(j, "started"))) {
		const char *id = json_string_value(json_object_get(v, "id"));
		json_t *w;
		size_t i, n = strlen(sb->missing);
		snprintf(d->id, sizeof d->id, "%s", id ? id : "");
		d->init_pid = (pid_t)json_integer_value(json_object_get(v, "pid"));
		d->started = true;
		d->podman = json_string_value(json_object_get(v, "engine")) &&
		            strcmp(json_string_value(json_object_get(v, "engine")), "podman") == 0;
		json_array_foreach(json_object_get(v, "warnings"), i, w)
		{
			if (json_string_value(w) && n < sizeof sb->missing)
				n += (size_t)snprintf(sb->missing + n, sizeof sb->missing - n,
				                      "%s%s", n ? "; " : "", json_string_value(w));
		}
	} else if ((v = json_object_get(j, "exit"))) {
		d->exited = true;
		d->removed = json_is_true(json_object_get(v, "removed"));
		d->code = json_integer_value(json_object_get(v, "code"));
		d->oom_killed = json_is_true(json_object_get(v, "oom_killed"));
	} else if ((v = json_object_get(j, "error"))) {
		const char *m = json_string_value(json_object_get(v, "message"));
		const char *kind = json_string_value(json_object_get(v, "kind"));
		d->failed = true;
		d->conflict = kind && strcmp(kind, "conflict") == 0;
		snprintf(d->error, sizeof d->error, "%s", m ? m : "the engine failed");
	}
	json_decref(j);
}

static void on_status_line(void *arg, const char *text)
{
	kr_sandbox_t *sb = arg;
	status_line(sb, sb->priv, text);
}

/* Read what the helper has said so far. */
static void read_status(kr_sandbox_t *sb, docker_t *d)
{
	kr_helper_read(&d->h, on_status_line, sb);
}

/* Whether the container's /workspace is the directory that was checked
 * (kbox run --workspace: one swapped in under its name since is refused,
 * by device and inode, as bwrap refuses it). */
static bool workspace_is_checked(const kr_sandbox_t *sb, const docker_t *d)
{
	char path[96];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%ld/root" WORKSPACE_INSIDE, (long)d->init_pid);
	return stat(path, &st) == 0 && st.st_dev == sb->o.ws_dev && st.st_ino == sb->o.ws_ino;
}

static void send_command(docker_t *d, const char *cmd)
{
	kr_helper_send(&d->h, cmd);
}

static bool docker_wait(kr_sandbox_t *sb)
{
	docker_t *d = sb->priv;
	bool running;

	read_status(sb, d);
	if (d->started && !d->sockets_taken && !d->failed) {
		d->sockets_taken = true;
		if (take_sockets(sb, d) < 0) {
			d->failed = true;
			send_command(d, "remove\n");
		}
		/* (1: it ended; its exit is reported as it comes) */
	}
	if (d->started && !d->ws_checked && sb->o.ws_check) {
		d->ws_checked = true;
		if (!workspace_is_checked(sb, d)) {
			snprintf(d->error, sizeof d->error,
			         "the container's /workspace is not the directory that was checked "
			         "(replaced since): refused");
			d->failed = true;
			send_command(d, "remove\n");
		}
	}
	running = kr_sandbox_poll(sb, "the engine's helper " KE_PROGRAM, false);
	if (running)
		return true;
	read_status(sb, d);
	if (d->failed && !d->started) {
		snprintf(sb->cause, sizeof sb->cause, "the container could not start: %.220s",
		         d->error);
		sb->never_ran = true;
	} else if (d->failed)
		snprintf(sb->cause, sizeof sb->cause, "the container failed: %.220s", d->error);
	else if (d->exited && d->code == 137 && d->oom_killed && !d->by_kbox && !sb->oom_told) {
		char lim[32];
		kx_fmt_bytes(lim, sizeof lim, sb->o.memory_bytes);
		snprintf(sb->cause, sizeof sb->cause,
		         "the kernel was killed: out of memory (limit %s)", lim);
	} else if (d->exited && d->code == 137 && d->oom_killed && !d->by_kbox) {
		/* the engine's word is "an OOM kill in the container", once a
		 * child's was named, that one's too */
		char lim[32];
		kx_fmt_bytes(lim, sizeof lim, sb->o.memory_bytes);
		snprintf(sb->cause, sizeof sb->cause,
		         "the kernel was killed by signal 9 (SIGKILL), not by kbox: perhaps out of "
		         "memory (limit %s; the engine cannot tell it from the earlier kill of a "
		         "process the code started)",
		         lim);
	} else if (d->exited && d->code == 137 && d->podman && !d->by_kbox) {
		char lim[32];
		kx_fmt_bytes(lim, sizeof lim, sb->o.memory_bytes);
		snprintf(
		        sb->cause, sizeof sb->cause,
		        "the kernel was killed by signal 9 (SIGKILL), not by kbox: most likely out "
		        "of memory (limit %s; Podman reports no OOM kill on cgroup v1)",
		        lim);
	} else if (d->exited && d->code >= 0)
		kr_sandbox_set_cause(sb, (int)(d->code & 0xff) << 8, true);
	else if (d->exited)
		snprintf(sb->cause, sizeof sb->cause,
		         "the container ended; the engine did not say how");
	else {
		char how[sizeof sb->cause];
		kr_sandbox_set_cause(sb, sb->status, false);
		snprintf(how, sizeof how, "%s", sb->cause);
		snprintf(sb->cause, sizeof sb->cause,
		         KE_PROGRAM " ended before its container (%.200s)",
		         how + strlen("the kernel "));
	}
	return false;
}

static int docker_signal(kr_sandbox_t *sb, int sig, kbox_error_t *err)
{
	docker_t *d = sb->priv;
	char line[32];
	if (sig == SIGKILL) {
		d->by_kbox = true;
		send_command(d, "remove\n");
	} else {
		snprintf(line, sizeof line, "signal %d\n", sig);
		send_command(d, line);
	}
	if (d->h.cmd_fd < 0)
		return kbox_error_set(err, KBOX_E_DEAD, "the container's helper is gone");
	return 0;
}

static void docker_cleanup(kr_sandbox_t *sb)
{
	docker_t *d = sb->priv;
	if (!d)
		return;
	/* the helper removes the container on its end of file; give it the
	 * time that takes */
	kr_helper_end(&d->h, sb, "the engine's helper", REMOVE_WAIT_MS);
	read_status(sb, d);
	/* a helper that did not say the container is gone (killed, or the
	 * engine did not answer it): another, once */
	if (!d->removed && !d->conflict && d->name[0] && d->exe[0]) {
		char *argv[] = {KE_PROGRAM, "remove", d->name, NULL};
		char *env[] = {d->engine_env[0] ? d->engine_env : NULL, NULL};
		run_helper(d->exe, argv, env, REMOVE_WAIT_MS);
	}
	kr_helper_close(&d->h);
	free(d->filter_hex);
	free(d);
	sb->priv = NULL;
}

static pid_t docker_kernel_pid(kr_sandbox_t *sb)
{
	docker_t *d = sb->priv;
	if (!d)
		return -1;
	read_status(sb, d);
	if (d->kernel > 0 && kill(d->kernel, 0) == 0)
		return d->kernel;
	d->kernel = d->init_pid > 0 ? kr_proc_child_of(d->init_pid) : -1;
	return d->kernel;
}

/* The directory of the container's memory cgroup (the engine made it;
 * cgroup v2's with *V2), as its init's /proc/PID/cgroup names it, into
 * DIR; false when there is none (yet). */
static bool memory_cgroup(const docker_t *d, char *dir, size_t size, bool *v2)
{
	char path[64], line[1024];
	FILE *f;
	if (!d || d->init_pid <= 0)
		return false;
	snprintf(path, sizeof path, "/proc/%ld/cgroup", (long)d->init_pid);
	if (!(f = fopen(path, "re")))
		return false;
	dir[0] = '\0';
	while (fgets(line, sizeof line, f)) {
		char *c = strchr(line, ':'), *p;
		if (!c || !(p = strchr(c + 1, ':')))
			continue;
		p[strcspn(p, "\n")] = '\0';
		if (strncmp(c + 1, "memory:", 7) == 0) {
			snprintf(dir, size, "/sys/fs/cgroup/memory%s", p + 1);
			*v2 = false;
			break;
		}
		if (strncmp(c, "::", 2) == 0) {
			snprintf(dir, size, "/sys/fs/cgroup%s", p + 1);
			*v2 = true;
		}
	}
	fclose(f);
	return dir[0] != '\0';
}

/* The container's memory: its memory cgroup's usage (v1 or v2). */
static long long docker_memory(kr_sandbox_t *sb)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	long long bytes = -1;
	bool v2;
	FILE *f;
	if (!memory_cgroup(sb->priv, dir, sizeof dir, &v2))
		return -1;
	snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
	if ((f = fopen(path, "re"))) {
		if (fscanf(f, "%lld", &bytes) != 1)
			bytes = -1;
		fclose(f);
	}
	return bytes;
}

/* The OOM killer's kills in the container's cgroup: Docker's oom event,
 * read where both engines leave it (Podman sends none on cgroup v1). */
static long docker_oom_kills(kr_sandbox_t *sb)
{
	char dir[PATH_MAX];
	bool v2;
	return memory_cgroup(sb->priv, dir, sizeof dir, &v2) ? kr_cgroup_oom_kills_in(dir, v2) : -1;
}

const kr_backend_t kr_backend_docker = {
        .name = "docker",
        .sandboxed = true,
        .limits = KR_LIMIT_MEMORY | KR_LIMIT_CPUS | KR_LIMIT_PIDS,
        .sockets_inside = SOCKETS_INSIDE,
        .private_sockets = true,
        .conn_inside = CONN_INSIDE,
        .defaults = kr_sandbox_default_limits, /* (bwrap's) */
        .start = docker_start,
        .signal = docker_signal,
        .wait = docker_wait,
        .cleanup = docker_cleanup,
        .kernel_pid = docker_kernel_pid,
        .memory = docker_memory,
        .oom_kills = docker_oom_kills,
};
