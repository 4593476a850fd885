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
	 * destroy.  An existing directory must be 0700 and ours, and short
	 * enough for the kernel's socket paths (about 80 characters: a unix
	 * socket's path has at most 107 bytes). */
	const char *runtime_dir;
	/* The kernel's working directory (NULL → the caller's). */
	const char *cwd;
	/* Extra "KEY=VALUE" strings, NULL-terminated (may be NULL). */
	const char *const *env;
	/* File to receive the kernel's stdout and stderr (NULL → /dev/null). */
	const char *log_path;
	kbox_transport_t transport; /* default ipc */
} kbox_kernel_opts_t;

/* The environment a kernel of SPEC starts with, as kbox_kernel_start
 * gives it: PATH=/usr/local/bin:/usr/bin:/bin, HOME=HOME_DIR (NULL: the
 * caller's $HOME, or "/"), LANG=C.UTF-8, JPY_PARENT_PID (the caller's
 * pid), then the kernelspec's env, then EXTRA ("KEY=VALUE" strings,
 * NULL-terminated; may be NULL); a later KEY replaces an earlier one.  For
 * a caller that starts the kernel by other means (in a sandbox).  New:
 * kbox_strv_free; NULL on ENOMEM. */
char **kbox_kernel_env(const kbox_kspec_t *spec, const char *const *extra, const char *home_dir);

/* Launch SPEC.  Does not wait for readiness: connect a client and call
 * kbox_client_wait_ready (the client's alive hook reports an early exit).
 * SPEC and OPTS (may be NULL) are borrowed for the call: what is needed
 * is copied, SPEC may be destroyed afterwards.  New:
 * kbox_kernel_destroy(&p); NULL with ERR when the process could not be
 * started. */
kbox_kernel_t *kbox_kernel_start(const kbox_kspec_t *spec, const kbox_kernel_opts_t *opts,
                                 kbox_error_t *err);

/* A client for this kernel whose hooks interrupt by the spec's
 * interrupt_mode and report the process's liveness.  New:
 * kbox_client_destroy(&p); its hooks borrow SELF, so it must be destroyed
 * before the kernel. */
kbox_client_t *kbox_kernel_connect(kbox_kernel_t *self, kbox_error_t *err);

/* Start and wait until ready: the usual way.  Returns a new kernel
 * (kbox_kernel_destroy) and stores a new client in *CLIENT_P
 * (kbox_client_destroy, before the kernel).  NULL with ERR; *CLIENT_P is
 * then left as it was. */
kbox_kernel_t *kbox_kernel_start_ready(const kbox_kspec_t *spec, const kbox_kernel_opts_t *opts,
                                       int timeout_ms, kbox_client_t **client_p, kbox_error_t *err);


/* Borrowed views, valid while SELF lives: its connection, the path of its
 * connection file, its runtime directory. */
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
 * connection file and ipc sockets.  CLIENT is borrowed for the call.  0 or
 * -1 with ERR. */
int kbox_kernel_stop(kbox_kernel_t *self, kbox_client_t *client, kbox_error_t *err);

/* Stop (SIGKILL if still running), remove files, free. Accepts NULL. */
void kbox_kernel_destroy(kbox_kernel_t **self_p);

#ifdef __cplusplus
}
#endif
#endif
