/* src/runtime/backend.h — where a session's kernel runs: the backend
 * interface, and a sandbox (one kernel process in one backend).
 *
 * A backend is one file (backend_none.c, backend_bwrap.c, …) that fills in
 * one kr_backend_t and is listed once, in backend.c.  Its operations:
 * start (run the kernel, given the connection file as the kernel is to see
 * it), ready (optional: more than the kernel answering on its channels),
 * interrupt, kill (signal), wait (reap without blocking, and say how the
 * kernel ended), cleanup.  Everything else (connection files, readiness,
 * talking to the kernel, restarts) is the supervisor's, the same for all.
 *
 * Backends use only libc, kernelspecs and the sandbox's own tools (bwrap,
 * seccomp, cgroups): no ZeroMQ, no libsodium.  `none` runs the kernel as a
 * plain local process and is NOT a sandbox. */
#ifndef KR_RUNTIME_BACKEND_H
#define KR_RUNTIME_BACKEND_H

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <kbox/error.h>
#include <kbox/kspec.h>
#include <jansson.h>

typedef struct {
	/* The directory of the kernel's sockets, for a backend that shows the
	 * kernel one of the host's (none: exists, 0700, ours, made fresh
	 * outside every state directory and workspace, where no sandbox
	 * reaches it); NULL for one that makes its own (bwrap: a tmpfs of the
	 * sandbox's, kr_backend_t.private_sockets). */
	const char *runtime_dir;
	const char *workspace; /* the kernel's working directory */
	bool workspace_ro;     /* bound read-only (kbox kernel --workspace ro) */
	/* The kernel's stdout and stderr: a descriptor (borrowed; the write
	 * end of the supervisor's pipe, never a host file), < 0 for /dev/null. */
	int log_fd;
	const char *const *env; /* extra "KEY=VALUE", NULL-terminated; may be NULL */
	/* Appended to the kernelspec's command line when it runs ipykernel
	 * (`-m ipykernel_launcher` or `-m ipykernel`), NULL-terminated
	 * (borrowed for the options' life); may be NULL. */
	const char *const *ipykernel_args;
	const char *name; /* the session's name, for the sandbox's cgroup; may be NULL */
	const char *home; /* bwrap: bound at /home/kbox; NULL: a tmpfs there */
	/* The kernel's connection file, CONN_TEXT, given to it otherwise than
	 * as a file of the host's (kr_backend_t.conn_inside): bwrap puts it at
	 * CONN_PATH (the KERNEL_CONN its command line names) in a tmpfs of
	 * the sandbox's own; none passes it as a descriptor (a memfd).  NULL:
	 * the kernel reads KERNEL_CONN, a file of the host's */
	const char *conn_text, *conn_path;
	const char *rootfs; /* bwrap: system files from this directory; NULL: the host's */
	/* With DROP_IDS the sandbox runs as host UID/GID (never 0), not as
	 * the supervisor: under root, the unprivileged sandbox user
	 * (kr_sandbox_identity) */
	bool drop_ids;
	uid_t uid;
	gid_t gid;
	/* bwrap: with WS_CHECK, the directory bound at /workspace must be
	 * WS_DEV:WS_INO (the one checked when it was named), else the start
	 * fails before the kernel runs */
	bool ws_check;
	dev_t ws_dev;
	ino_t ws_ino;
	/* Limits, 0 for the backend's default (none for `none`).  A backend
	 * that cannot enforce one says so in kr_backend_unenforced. */
	long long memory_bytes;
	double cpus;
	long pids;
	long long tmp_bytes;  /* size of /tmp */
	long long file_bytes; /* largest file the kernel may write (RLIMIT_FSIZE) */
	/* docker: the image (NULL: KE_IMAGE_DEFAULT), the engine's socket
	 * (NULL: DOCKER_HOST's, or the default), the state directory
	 * (KBOX_HOME) and the kernel's generation, which name and label the
	 * container */
	const char *image, *engine, *state_home;
	unsigned long generation;
	/* gateway: the Jupyter server's URL, the CA file that verifies it
	 * (NULL: the system's), how long a kernel may take to start (s; 0:
	 * KG_LAUNCH_TIMEOUT_S), the framing forced to the legacy one; and its
	 * token (NULL: none), borrowed for the start only, as CONN_TEXT */
	const char *gateway_url, *gateway_ca, *gateway_token;
	const char *gateway_dir; /* the kernel's directory there (kr_gateway_dir) */
	/* earlier remote kernels of the session's, left on that server, that
	 * the helper deletes before it starts this one: their ids, each
	 * followed by a space (NULL: none) */
	const char *gateway_sweep;
	long launch_s; /* --launch-timeout, s (0: the default) */
	bool gateway_legacy;
} kr_sandbox_opts_t;

/* The default backend: bwrap. */
#define KR_BACKEND_DEFAULT "bwrap"

/* bwrap's limits when none are given: 2 GiB of memory, 1024 processes
 * and threads, all CPUs, a 512 MiB /tmp, files up to 4 GiB. */
#define KR_BWRAP_MEMORY (2LL << 30)
#define KR_BWRAP_PIDS 1024
#define KR_BWRAP_FILE_BYTES (4LL << 30)

typedef struct kr_sandbox kr_sandbox_t;

/* Fill in the limits a sandbox has when none are given (bwrap's, and
 * docker's): KR_BWRAP_MEMORY, KR_BWRAP_PIDS, a 512 MiB /tmp,
 * KR_BWRAP_FILE_BYTES. */
void kr_sandbox_default_limits(kr_sandbox_opts_t *o);

/* The limits a backend can enforce (where the machine allows). */
enum { KR_LIMIT_MEMORY = 1u << 0, KR_LIMIT_CPUS = 1u << 1, KR_LIMIT_PIDS = 1u << 2 };

/* One backend: what it is, and its operations on a sandbox. */
typedef struct kr_backend {
	const char *name;
	bool sandboxed;
	bool remote;     /* the kernel runs elsewhere (gateway: on a Jupyter server) */
	unsigned limits; /* KR_LIMIT_* it enforces */
	/* Where the kernel sees the directory of its sockets (bwrap:
	 * "/run/kernel"; none: "/proc/self/fd/3", a descriptor it inherits):
	 * short enough for a unix socket's path, however long the host's is. */
	const char *sockets_inside;
	/* The backend makes that directory itself, where no path of the
	 * host's leads (bwrap: a tmpfs in the sandbox): kr_sandbox_opts_t's
	 * runtime_dir is not used.  Either way the host reaches it through
	 * kr_sandbox_sockets_fd. */
	bool private_sockets;
	/* Where the backend puts the kernel's connection file in the sandbox
	 * itself, from kr_sandbox_opts_t's conn_text (bwrap: "/run/kernel",
	 * the tmpfs of its sockets), so that it is never a file of the
	 * host's. */
	const char *conn_inside;
	/* CONN_INSIDE is the file itself (a descriptor the kernel inherits,
	 * /proc/self/fd/N: none), not the directory it is put in. */
	bool conn_fd;
	/* Fill in the backend's default limits (may be NULL). */
	void (*defaults)(kr_sandbox_opts_t *o);
	/* The limits that cannot be enforced here, for kr_backend_unenforced
	 * (may be NULL: all can).  A mask of KR_LIMIT_*, the reason in WHY. */
	unsigned (*unavailable)(char *why, size_t size);
	/* Start SB's kernel: ARGV is the kernelspec's command, its connection
	 * file named as the kernel sees it.  0 or -1 with ERR. */
	int (*start)(kr_sandbox_t *sb, char **argv, kbox_error_t *err);
	/* Optional: 1 while the sandbox is not yet ready for the kernel to be
	 * talked to, 0 when it is, -1 with ERR when it will never be.  NULL:
	 * ready when the kernel answers. */
	int (*ready)(kr_sandbox_t *sb, kbox_error_t *err);
	/* Send SIG to the kernel (SIGINT: an interrupt), or end the sandbox
	 * (SIGKILL).  0 or -1 with ERR. */
	int (*signal)(kr_sandbox_t *sb, int sig, kbox_error_t *err);
	/* Reap without blocking: true while the kernel runs; once it has
	 * ended, fill sb->cause. */
	bool (*wait)(kr_sandbox_t *sb);
	/* Remove what the sandbox left (cgroups, its directory); also after a
	 * start that failed half-way (PRIV may be NULL). */
	void (*cleanup)(kr_sandbox_t *sb);
	/* The kernel's pid as the host sees it (NULL: the pid start recorded). */
	pid_t (*kernel_pid)(kr_sandbox_t *sb);
	/* Memory of the sandbox in bytes, -1 when unknown (NULL: the kernel
	 * process's resident set). */
	long long (*memory)(kr_sandbox_t *sb);
	/* How many processes the OOM killer has killed in the sandbox so far,
	 * -1 when unknown (NULL: unknown). */
	long (*oom_kills)(kr_sandbox_t *sb);
} kr_backend_t;

/* A sandbox, as its backend sees it.  The common part is filled by
 * kr_sandbox_start; a backend keeps its own state behind PRIV. */
struct kr_sandbox {
	const kr_backend_t *backend;
	kr_sandbox_opts_t o;      /* with the backend's defaults; strings owned */
	char **env;               /* o.env, owned */
	char *kernel;             /* the kernelspec's name */
	const kbox_kspec_t *spec; /* borrowed during start only */
	pid_t pid;                /* our child: the kernel, or what runs it */
	bool ended;
	bool never_ran;      /* it ended before the kernel could run (cause says why) */
	bool cleaned;        /* cleanup has run */
	int status;          /* wait status once ended */
	long oom_told;       /* OOM kills a notice named (of a child's): kr_sandbox_oom_told */
	char cause[256];     /* how it ended */
	char limits[256];    /* the limits as applied, "" when none */
	char container[256]; /* docker: the container's name; "" for the others */
	char missing[768];   /* what could not be applied, "" */
	/* The directory of the kernel's sockets as the host reaches it: an
	 * O_PATH descriptor (close-on-exec) that start sets, named
	 * /proc/self/fd/N (bwrap: its tmpfs, through the sandbox's root);
	 * -1 when the sandbox ended before it was made */
	int sockets_fd;
	/* What the backend has to say of the kernel's connection (gateway:
	 * its channels dropped and came back), the latest, and how many it
	 * said so far: a change while an execution ran goes in its result */
	char notice[512];
	unsigned long notice_seq;
	/* gateway: the remote kernel's id once started ("" before), and
	 * whether the server deleted it */
	char remote_id[80];
	bool remote_deleted;
	bool remote_gone; /* the server answered nothing: no kernel starts there now */
	/* gateway: the kernel's directory on the server ("" when the server
	 * has no files: a Kernel or Enterprise Gateway) */
	char remote_dir[300];
	/* gateway: the earlier kernels of o.gateway_sweep the helper deleted
	 * (ids, each followed by a space), and the last it could not, with
	 * why; for the supervisor to take (it empties them) */
	char swept[1024];
	char sweep_failed[400];
	void *priv;
};

/* What a backend's child runs after fork: set up (only async-signal-safe
 * calls) and exec, or write its errno to ERRFD (close-on-exec) and _exit.
 * Does not return. */
typedef void(kr_sandbox_child_fn)(void *arg, int errfd);

/* Fork sb->pid to run CHILD(ARG) and wait until it has exec'd.  0; 1 when
 * the child failed before its exec (its errno in *CHILD_ERRNO; it is
 * reaped and sb->pid is -1); -1 with ERR when there could be no child. */
int kr_sandbox_fork(kr_sandbox_t *sb, kr_sandbox_child_fn *child, void *arg, int *child_errno,
                    kbox_error_t *err);

/* The backends compiled in, NULL-terminated ("bwrap", "none", …). */
const char *const *kr_backend_names(void);
/* Backend NAME, or NULL. */
const kr_backend_t *kr_backend_find(const char *name);
/* True when NAME is one of them. */
bool kr_backend_exists(const char *name);
/* True when NAME isolates the kernel (false for "none"). */
bool kr_backend_sandboxed(const char *name);
/* True when NAME runs the kernel here, unsandboxed ("none"; not a remote
 * backend's, which the server isolates): kbox warns of it. */
bool kr_backend_unsandboxed_here(const char *name);
/* True when NAME runs the kernel elsewhere (gateway). */
bool kr_backend_remote(const char *name);
/* The limits in OPTS (the backend's defaults included) that backend NAME
 * does not enforce on this machine, written to BUF: a comma-separated
 * list ("memory, cpus"), followed by the reason in parentheses when the
 * backend could enforce them elsewhere; "" when all are. */
const char *kr_backend_unenforced(const char *name, const kr_sandbox_opts_t *opts, char *buf,
                                  size_t size);

/* Start SPEC's kernel in backend NAME (OPTS is copied), its command line
 * naming KERNEL_CONN, the connection file as the kernel is to see it.  The
 * kernel is our child (or runs under one), in a session of its own, killed
 * if we die.  Does not wait for readiness.  NULL with ERR. */
kr_sandbox_t *kr_sandbox_start(const char *name, const kbox_kspec_t *spec,
                               const kr_sandbox_opts_t *opts, const char *kernel_conn,
                               kbox_error_t *err);

/* The backend's own readiness (see kr_backend_t.ready): 1, 0 or -1. */
int kr_sandbox_ready(kr_sandbox_t *self, kbox_error_t *err);

const char *kr_sandbox_backend(const kr_sandbox_t *self);
/* The kernel's pid as the host sees it. */
pid_t kr_sandbox_pid(kr_sandbox_t *self);
/* The directory of the kernel's sockets, as the host reaches it (an
 * O_PATH descriptor, borrowed: kr_sandbox_t.sockets_fd), or -1. */
int kr_sandbox_sockets_fd(const kr_sandbox_t *self);

/* Reap without blocking: true while the kernel runs.  Once it has ended,
 * kr_sandbox_cause describes how ("the kernel exited with status 1",
 * "the kernel was killed by signal 9 (SIGKILL)", "the kernel was killed:
 * out of memory (limit 1 GiB)"). */
bool kr_sandbox_alive(kr_sandbox_t *self);
const char *kr_sandbox_cause(const kr_sandbox_t *self);
/* True once it has ended without the kernel ever running (a container
 * that could not be made, say): the cause is why. */
bool kr_sandbox_never_ran(const kr_sandbox_t *self);

/* Resident memory of the kernel in bytes (bwrap with a memory cgroup: all
 * the sandbox's), or -1 when unknown. */
long long kr_sandbox_memory(kr_sandbox_t *self);
/* The OOM killer's kills in SELF so far (its memory cgroup's count), -1
 * when unknown or the sandbox has ended. */
long kr_sandbox_oom_kills(kr_sandbox_t *self);
/* The first N of SELF's OOM kills were of processes the kernel outlived
 * (a notice said so): the kernel's own death is blamed on memory only
 * when there is a kill besides them. */
void kr_sandbox_oom_told(kr_sandbox_t *self, long n);

/* The limits as applied ("memory 2 GiB (cgroup), pids 1024 (cgroup),
 * …"), and what could not be ("" when all could).  Borrowed. */
const char *kr_sandbox_limits(const kr_sandbox_t *self);
const char *kr_sandbox_limits_missing(const kr_sandbox_t *self);

/* Send SIG to the kernel (SIGKILL ends the whole sandbox).  0 or -1 with
 * ERR (KBOX_E_DEAD when it is not running). */
int kr_sandbox_signal(kr_sandbox_t *self, int sig, kbox_error_t *err);

/* Wait up to MS for the kernel to end (polling): true once it has. */
bool kr_sandbox_wait_end(kr_sandbox_t *self, int ms);

/* SIGTERM, then SIGKILL, STEP_MS apart, unless it has ended; then remove
 * what the sandbox left.  (A graceful shutdown_request is the
 * supervisor's, before this.) */
void kr_sandbox_stop(kr_sandbox_t *self, int step_ms);

/* Kill if still running, remove what it left, free.  Accepts NULL. */
void kr_sandbox_destroy(kr_sandbox_t **self_p);

/* For backends: set sb->cause from the wait status ST (SIGNAL_EXIT: an
 * exit status 128 + N means killed by signal N, as bwrap reports it). */
void kr_sandbox_set_cause(kr_sandbox_t *sb, int st, bool signal_exit);

/* For backends: reap sb->pid if it has ended, without waiting.  True while
 * it runs; else false, with sb->status (-1 when it vanished unreaped, the
 * cause then "WHAT vanished (not reaped)") and sb->cause set as
 * kr_sandbox_set_cause does with SIGNAL_EXIT. */
bool kr_sandbox_poll(kr_sandbox_t *sb, const char *what, bool signal_exit);

/* Backend gateway: kernelspec NAME as the Jupyter server at URL (its
 * TOKEN and CA file may be NULL) lists it, asked through its helper.  New;
 * NULL with ERR (KBOX_E_NOTFOUND: the server has no such kernelspec). */
kbox_kspec_t *kr_gateway_spec(const char *url, const char *token, const char *ca, const char *name,
                              kbox_error_t *err);

/* Backend gateway: the kernelspecs of the Jupyter server at URL, in
 * *SPECS (new): {"default": NAME|null, "kernelspecs": {NAME: {"spec":
 * {...}}}}.  0, or -1 with ERR. */
int kr_gateway_specs(const char *url, const char *token, const char *ca, json_t **specs,
                     kbox_error_t *err);

/* Backend gateway: the directory on the server of the session whose
 * directory is SESSION_DIR, in OUT: the one recorded in its
 * KR_GATEWAY_DIR_FILE; else a new one, "kbox/NAME-XXXXXXXX" (32 random
 * bits, so that two machines', two users', or a removed and a new
 * session's of one name differ), recorded there.  0, or -1. */
int kr_gateway_dir(const char *session_dir, char *out, size_t size);
/* The same, but only the one recorded: none is made.  0, or -1 when
 * there is none. */
int kr_gateway_dir_recorded(const char *session_dir, char *out, size_t size);

/* Backend gateway: the token in the session's KR_GATEWAY_TOKEN_FILE
 * (DIR_FD the session's directory) in *TOKEN (new; NULL: no token).  0,
 * or -1 with ERR. */
int kr_gateway_token_read(int dir_fd, char **token, kbox_error_t *err);

/* Backend gateway: the files of the session in SESSION_DIR, through its
 * server's contents API (kbox-gateway put, get, list: gateway_proto.h).
 * PATH is relative to the session's directory there ("." for it).  Put:
 * what FD holds, to its end (PATH a directory, or ending in '/': into
 * it, under NAME (NULL: refused); no directory is made but the
 * session's); get: the file, of at most MAX bytes (0: KG_FILE_MAX), to FD
 * (its size in *SIZE), and when STAMP is given (KG_STAMP_MAX bytes,
 * gateway_proto.h), what says its version in it; a STAMP given that is the file's
 * still: nothing written, and 1; list: the entries in *LIST (new:
 * [{name, type, size}]).  0, or -1 with ERR: KBOX_E_NOTFOUND when there
 * is no such file; KBOX_E_INVALID when the server has no contents API,
 * or refuses the path. */
int kr_gateway_put(const char *session_dir, int fd, const char *path, const char *name,
                   kbox_error_t *err);
int kr_gateway_get(const char *session_dir, const char *path, int fd, long long max,
                   long long *size, char *stamp, kbox_error_t *err);
int kr_gateway_list(const char *session_dir, const char *path, json_t **list, kbox_error_t *err);
/* How long each of those may take from now on, ms (0, the default: as long
 * as it takes; the helper bounds each request it makes). */
void kr_gateway_files_wait(long ms);

/* For backends: a child of PARENT (the first found), or -1: a scan of
 * /proc (the kernel under bwrap's init, or a container's). */
pid_t kr_proc_child_of(pid_t parent);

#endif
