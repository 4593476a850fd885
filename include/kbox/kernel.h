/* kbox/kernel.h — a local kernel process (the `none` backend: NOT sandboxed).
 *
 * Starts a kernel from a kernelspec with a generated connection file, in its
 * own process group and session, stdin closed, SIGINT at default, a clean
 * environment (PATH, HOME, LANG, JPY_PARENT_PID) plus the spec's env and the
 * caller's extra variables.  Stopping asks with shutdown_request, then sends
 * SIGTERM, then SIGKILL, each after a bounded wait, and removes the files.
 *
 * The kernel gets PR_SET_PDEATHSIG=SIGKILL: it dies with the thread that
 * started it, so start kernels from a thread that outlives them. */
#ifndef KBOX_KERNEL_H
#define KBOX_KERNEL_H

#include <stdbool.h>
#include <sys/types.h>
#include <kbox/error.h>
#include <kbox/conn.h>
#include <kbox/kspec.h>
#include <kbox/client.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kbox_kernel kbox_kernel_t;

typedef struct {
	/* Directory for the connection file and ipc sockets.  NULL → a new
	 * private directory (0700) under $XDG_RUNTIME_DIR or /tmp, removed on
	 * destroy.  An existing directory must be 0700 and ours. */
	const char *runtime_dir;
	/* The kernel's working directory (NULL → the caller's). */
	const char *cwd;
	/* Extra "KEY=VALUE" strings, NULL-terminated (may be NULL). */
	const char *const *env;
	/* File to receive the kernel's stdout and stderr (NULL → /dev/null). */
	const char *log_path;
	kbox_transport_t transport; /* default ipc */
} kbox_kernel_opts_t;

/* Launch SPEC.  Does not wait for readiness: connect a client and call
 * kbox_client_wait_ready (the client's alive hook reports an early exit).
 * OPTS may be NULL.  NULL with ERR when the process could not be started. */
kbox_kernel_t *kbox_kernel_start(const kbox_kspec_t *spec, const kbox_kernel_opts_t *opts,
                                 kbox_error_t *err);

/* A client for this kernel whose hooks interrupt by the spec's
 * interrupt_mode and report the process's liveness.  Caller owns it; it
 * must be destroyed before the kernel. */
kbox_client_t *kbox_kernel_connect(kbox_kernel_t *self, kbox_error_t *err);

/* Start and wait until ready: the usual way.  *CLIENT_P gets the client. */
kbox_kernel_t *kbox_kernel_start_ready(const kbox_kspec_t *spec, const kbox_kernel_opts_t *opts,
                                       int timeout_ms, kbox_client_t **client_p,
                                       kbox_error_t *err);

/* Become SPEC's kernel in this process: make a connection file at
 * CONN_PATH (ipc sockets in OPTS->runtime_dir, which must exist, 0700), set
 * up stdio, working directory and environment as kbox_kernel_start does for
 * its child, and execve the kernelspec's command.  For a supervisor that
 * forks and wants the kernel to be its own child: it sets up the new
 * session and PR_SET_PDEATHSIG before running this.  Returns only on
 * failure: -1 with ERR, the connection file removed.  An exec failure
 * itself ends the process with status 127. */
int kbox_kernel_exec(const kbox_kspec_t *spec, const kbox_kernel_opts_t *opts,
                     const char *conn_path, kbox_error_t *err);

/* ---- the bwrap sandbox (kbox(7)) ----
 *
 * bubblewrap runs the command in new user, pid, net, ipc, uts and cgroup
 * namespaces as uid 1000 without capabilities, in a new session, under a
 * seccomp filter, with die-with-parent.  Its filesystem: /usr (and the
 * /bin, /lib… links or directories) read-only from ROOTFS or the host,
 * only the /etc files Python, fonts and matplotlib need plus a synthetic
 * passwd, group, hosts and nsswitch.conf, /proc and /dev of its own, a
 * size-capped /tmp, /home/kbox, /workspace and /run/kbox; the rest of /
 * read-only.  Only loopback networking. */
typedef struct {
	const char *rootfs;      /* system files from this directory; NULL: the host's */
	const char *workspace;   /* bound read-write at /workspace (the cwd); may be NULL */
	const char *runtime_dir; /* bound read-write at /run/kbox (the sockets); may be NULL */
	const char *home;        /* bound read-write at /home/kbox; NULL: a tmpfs there */
	long long tmp_bytes;     /* size of /tmp (and of a tmpfs home); 0: KBOX_BWRAP_TMP_BYTES */
	/* rlimits set just before bwrap starts (0: left as they are) */
	long long rlimit_fsize, rlimit_data;
	long rlimit_nproc;
} kbox_bwrap_opts_t;

#define KBOX_BWRAP_TMP_BYTES (512LL << 20)
#define KBOX_BWRAP_UID 1000
#define KBOX_BWRAP_RUNTIME "/run/kbox"

/* The bwrap program, or NULL when none is installed.  A new string. */
char *kbox_bwrap_path(void);

/* The argv (NULL-terminated, kbox_strv_free) that runs CMD in the
 * sandbox B describes.  It passes file descriptors to bwrap (the seccomp
 * program, the synthetic /etc files): they are in *FDS (N_FDS of them,
 * free the array), to be kept open across exec and closed after.  NULL
 * with ERR. */
char **kbox_bwrap_argv(const kbox_bwrap_opts_t *b, char *const *cmd, int **fds, size_t *n_fds,
                       kbox_error_t *err);

/* Run CMD in the sandbox B describes, without a time limit (for short
 * commands), its stdout and stderr (the first SIZE - 1 bytes) in OUT.
 * Its exit status (128 + N when killed by signal N), or -1 with ERR when
 * it could not be run. */
int kbox_bwrap_run(const kbox_bwrap_opts_t *b, char *const *cmd, char *out, size_t size,
                   kbox_error_t *err);

/* Run /usr/bin/true in the sandbox B describes: 0 when bwrap can make it
 * on this machine, else -1 with ERR saying why (bwrap's own message). */
int kbox_bwrap_probe(const kbox_bwrap_opts_t *b, kbox_error_t *err);

/* kbox_kernel_exec inside the sandbox.  The sandbox's own directory, B's
 * runtime_dir (default: OPTS->runtime_dir/sandbox, made 0700), is emptied
 * and bound at /run/kbox: the kernel's sockets and its connection file
 * (NAME.sandbox.json, naming them under /run/kbox) are there.  The
 * connection file for the host, at CONN_PATH (outside that directory, out
 * of the sandbox's reach), names them as the host sees them.  B's
 * workspace defaults to OPTS->cwd.  The process becomes bwrap (its pid is
 * the sandbox's).  Returns only on failure: -1 with ERR. */
int kbox_kernel_exec_bwrap(const kbox_kspec_t *spec, const kbox_kernel_opts_t *opts,
                           const kbox_bwrap_opts_t *b, const char *conn_path, kbox_error_t *err);

pid_t kbox_kernel_pid(const kbox_kernel_t *self);
const kbox_conn_t *kbox_kernel_conn(const kbox_kernel_t *self);
const char *kbox_kernel_connection_file(const kbox_kernel_t *self);
const char *kbox_kernel_runtime_dir(const kbox_kernel_t *self);

/* Reap without blocking; true while the process runs. */
bool kbox_kernel_is_alive(kbox_kernel_t *self);
/* After exit: the wait status (as from waitpid), or -1 while running. */
int kbox_kernel_exit_status(const kbox_kernel_t *self);

/* Send SIG to the kernel's process group. 0 or -1 with ERR. */
int kbox_kernel_signal(kbox_kernel_t *self, int sig, kbox_error_t *err);

/* Stop the kernel: shutdown_request via CLIENT (may be NULL), wait up to
 * 2.5 s, SIGTERM the group, wait 2.5 s, SIGKILL.  Then remove the
 * connection file and ipc sockets.  0 or -1 with ERR. */
int kbox_kernel_stop(kbox_kernel_t *self, kbox_client_t *client, kbox_error_t *err);

/* Stop (SIGKILL if still running), remove files, free. Accepts NULL. */
void kbox_kernel_destroy(kbox_kernel_t **self_p);

#ifdef __cplusplus
}
#endif
#endif
