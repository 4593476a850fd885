/* kbox/backend.h — where a session's kernel runs: the backend interface.
 *
 * A sandbox is one kernel process in one backend.  The session supervisor
 * only talks to this interface (spawn, wait_ready, interrupt, signal,
 * alive, stop, destroy), so new backends (bwrap, docker) plug in without
 * touching it.  `none` runs the kernel as a plain local process and is NOT
 * a sandbox.
 *
 * This side links neither libzmq nor libsodium: what needs them (writing
 * the connection file and executing the kernel, waiting for its
 * kernel_info_reply, a shutdown_request) runs in short-lived helper
 * processes of the kbox program (OPTS->kbox_exe: `kbox _kernel`,
 * `kbox _ready`, `kbox _shutdown`, `kbox _interrupt`), so a supervisor
 * stays small.  The kernel is still the caller's own child (the helper
 * that prepares it execs the kernel in place), with PR_SET_PDEATHSIG. */
#ifndef KBOX_BACKEND_H
#define KBOX_BACKEND_H

#include <stdbool.h>
#include <sys/types.h>
#include <kbox/error.h>
#include <kbox/kspec.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
	const char *kbox_exe;    /* the kbox program, for the helpers ("/proc/self/exe") */
	const char *conn_path;   /* where the connection file is to be written */
	const char *runtime_dir; /* connection file and ipc sockets (exists, 0700) */
	const char *workspace;   /* the kernel's working directory */
	const char *log_path;    /* the kernel's stdout and stderr (appended) */
	const char *const *env;  /* extra "KEY=VALUE", NULL-terminated; may be NULL */
	const char *name;        /* the session's name, for the sandbox's cgroup; may be NULL */
	const char *home;        /* bwrap: bound at /home/kbox; NULL: a tmpfs there */
	const char *rootfs;      /* bwrap: system files from this directory; NULL: the host's */
	/* Limits, 0 for the backend's default (none for `none`).  A backend
	 * that cannot enforce one says so in kbox_backend_unenforced. */
	long long memory_bytes;
	double cpus;
	long pids;
	long long tmp_bytes;     /* size of /tmp */
	long long file_bytes;    /* largest file the kernel may write (RLIMIT_FSIZE) */
} kbox_sandbox_opts_t;

/* The default backend: bwrap. */
#define KBOX_BACKEND_DEFAULT "bwrap"

/* bwrap's limits when none are given: 2 GiB of memory, 1024 processes
 * and threads, all CPUs, a 512 MiB /tmp, files up to 4 GiB. */
#define KBOX_BWRAP_MEMORY (2LL << 30)
#define KBOX_BWRAP_PIDS 1024
#define KBOX_BWRAP_FILE_BYTES (4LL << 30)

typedef struct kbox_sandbox kbox_sandbox_t;

/* The backends compiled in, NULL-terminated ("none", …). */
const char *const *kbox_backend_names(void);
/* True when NAME is one of them. */
bool kbox_backend_exists(const char *name);
/* True when NAME isolates the kernel (false for "none"). */
bool kbox_backend_sandboxed(const char *name);
/* The limits in OPTS (the backend's defaults included) that backend NAME
 * does not enforce on this machine, written to BUF: a comma-separated
 * list ("memory, cpus"), followed by the reason in parentheses when the
 * backend could enforce them elsewhere ("cpus (cpu: no cpu controller is
 * mounted)"); "" when all are. */
const char *kbox_backend_unenforced(const char *name, const kbox_sandbox_opts_t *opts,
                                    char *buf, size_t size);

/* Start SPEC's kernel in backend NAME (OPTS is copied).  Does not wait
 * for readiness.  NULL with ERR. */
kbox_sandbox_t *kbox_sandbox_spawn(const char *name, const kbox_kspec_t *spec,
                                   const kbox_sandbox_opts_t *opts, kbox_error_t *err);

/* Wait until the kernel answers kernel_info (a `kbox _ready` helper does
 * the talking).  Fails early with KBOX_E_DEAD and the cause when the
 * kernel ends meanwhile.  0 or -1 with ERR. */
int kbox_sandbox_wait_ready(kbox_sandbox_t *self, int timeout_ms, kbox_error_t *err);

/* The same without blocking, for an event loop: begin returns a file
 * descriptor to poll for input (it also turns readable when the helper
 * ends), or -1 with ERR; poll (never blocks) returns 1 while still
 * waiting, 0 once ready, -1 with ERR when the kernel ended, the time ran
 * out or the helper failed.  Poll again after SIGCHLD too. */
int kbox_sandbox_ready_begin(kbox_sandbox_t *self, int timeout_ms, kbox_error_t *err);
int kbox_sandbox_ready_poll(kbox_sandbox_t *self, kbox_error_t *err);

const char *kbox_sandbox_connection_file(const kbox_sandbox_t *self);
const char *kbox_sandbox_backend(const kbox_sandbox_t *self);
/* The kernel's pid as the host sees it. */
pid_t kbox_sandbox_pid(const kbox_sandbox_t *self);

/* Reap without blocking: true while the kernel runs.  Once it has ended,
 * kbox_sandbox_cause describes how ("exited with status 1", "killed by
 * signal 9 (SIGKILL)", "killed: out of memory (limit 1 GiB)"). */
bool kbox_sandbox_alive(kbox_sandbox_t *self);
const char *kbox_sandbox_cause(const kbox_sandbox_t *self);

/* Resident memory of the kernel in bytes (bwrap with a memory cgroup:
 * all the sandbox's), or -1 when unknown. */
long long kbox_sandbox_memory(const kbox_sandbox_t *self);

/* The limits as applied to this sandbox: a JSON-ready description such as
 * "memory 2.0 GiB (cgroup v1), pids 1024 (cgroup v1), cpus all, /tmp 512
 * MiB, files 4.0 GiB (rlimit)", and what could not be ("" when all
 * could) — for logs and kbox status.  Borrowed. */
const char *kbox_sandbox_limits(const kbox_sandbox_t *self);
const char *kbox_sandbox_limits_missing(const kbox_sandbox_t *self);

/* Interrupt as the kernelspec says: SIGINT, or an interrupt_request (sent
 * by a `kbox _interrupt` helper) when its mode is "message".  0 or -1 with ERR. */
int kbox_sandbox_interrupt(kbox_sandbox_t *self, kbox_error_t *err);
/* Send SIG to everything in the sandbox. */
int kbox_sandbox_signal(kbox_sandbox_t *self, int sig, kbox_error_t *err);

/* Stop: with GRACEFUL a shutdown_request first (a `kbox _shutdown`
 * helper, up to 3 s), then SIGTERM, then SIGKILL, 2.5 s apart; remove the
 * kernel's files. */
int kbox_sandbox_stop(kbox_sandbox_t *self, bool graceful, kbox_error_t *err);
/* Kill if still running, remove files, free.  Accepts NULL. */
void kbox_sandbox_destroy(kbox_sandbox_t **self_p);

#ifdef __cplusplus
}
#endif
#endif
