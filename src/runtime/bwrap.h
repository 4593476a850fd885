/* src/runtime/bwrap.h — the bwrap sandbox: bubblewrap's command line and
 * the seccomp filter (kbox(7)).  Runtime, not installed: used by the
 * bwrap backend (backend_bwrap.c) and by kbox doctor. */
#ifndef KR_RUNTIME_BWRAP_H
#define KR_RUNTIME_BWRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <kbox/error.h>

/* bubblewrap runs the command in new user, pid, net, ipc, uts and cgroup
 * namespaces as uid 1000 without capabilities, in a new session, under a
 * seccomp filter, with die-with-parent.  Its filesystem: /usr (and the
 * /bin, /lib… links or directories) read-only from ROOTFS or the host,
 * only the /etc files Python, fonts and matplotlib need plus a synthetic
 * passwd, group, hosts and nsswitch.conf, the read-only binds RO_BINDS
 * asks for (checked before: ro_bind.h), /proc and /dev of its own, a
 * size-capped /tmp, /home/kbox, /workspace and /run/kernel (a tmpfs of
 * its own, for the kernel's connection file and sockets); the rest of /
 * read-only.  Only loopback networking. */
typedef struct {
	const char *rootfs;    /* system files from this directory; NULL: the host's */
	const char *workspace; /* bound read-write at /workspace (the cwd); may be NULL */
	bool workspace_ro;     /* …read-only */
	/* the kernel's connection file: CONN_TEXT put at CONN_PATH (in
	 * KR_BWRAP_KERNEL_DIR), mode 0600, in a tmpfs of the sandbox's own
	 * where its sockets are bound too: neither is a file of the host's,
	 * which a process elsewhere holding a directory open could reach;
	 * NULL: none */
	const char *conn_text, *conn_path;
	const char *home;    /* bound read-write at /home/kbox; NULL: a tmpfs there */
	long long tmp_bytes; /* size of /tmp (and of a tmpfs home); 0: KR_BWRAP_TMP_BYTES */
	/* bound read-only: pairs of host path, path inside, NULL-terminated;
	 * may be NULL (kr_ro_bind_find makes them) */
	char *const *ro_binds;
	/* With SYNC: bwrap writes the sandbox's pid ("child-pid" in JSON) to
	 * INFO_FD, and the sandbox waits, its mounts made, until a byte comes
	 * on BLOCK_FD before it runs the command (both are added to the
	 * descriptors passed) */
	bool sync;
	int info_fd, block_fd;
	/* kr_bwrap_run: with DROP_IDS, bwrap runs as host UID/GID (the
	 * sandbox user under root) */
	bool drop_ids;
	uid_t uid;
	gid_t gid;
	/* kr_bwrap_run: the per-session bounds the bwrap backend sets,
	 * set the same way before CMD runs (kr_bwrap_bound): RLIMIT_NPROC
	 * when NPROC > 0, the inotify limits with INOTIFY */
	long nproc;
	bool inotify;
} kr_bwrap_opts_t;

#define KR_BWRAP_TMP_BYTES (512LL << 20)
#define KR_BWRAP_UID 1000
/* the tmpfs of the kernel's connection file and sockets */
#define KR_BWRAP_KERNEL_DIR "/run/kernel"

/* What one sandbox may hold of the inotify instances and watches that
 * all the processes of its user share (fs.inotify.max_user_instances,
 * 128 by default, and max_user_watches): a quarter of the default
 * instances, enough for any kernel (ipykernel and matplotlib use none). */
#define KR_BWRAP_INOTIFY_INSTANCES 32
#define KR_BWRAP_INOTIFY_WATCHES 8192

/* kbox's seccomp filter (what Docker's default profile refuses, and kbox's
 * own: bwrap.c) as a BPF program in a sealed memfd at offset 0, or -1 with
 * ERR.  bwrap applies it; the docker backend passes it to kbox-seccomp. */
int kr_seccomp_program(kbox_error_t *err);

/* CMD as the sandbox finds it: itself when it has a '/', else the first of
 * /usr/local/bin, /usr/bin, /bin that has it under ROOTFS (NULL: the
 * host's /).  A new string, or NULL. */
char *kr_bwrap_resolve(const char *cmd, const char *rootfs);

/* True when the sandbox shows PATH (absolute, normalized) whatever it is
 * asked to bind: under /usr, /bin, /sbin, /lib*, or one of the /etc
 * files and directories it binds itself (etc_files in bwrap.c,
 * /etc/python3*). */
bool kr_bwrap_shows(const char *path);

/* The bwrap program, or NULL when none is installed.  A new string. */
char *kr_bwrap_path(void);

/* The argv (NULL-terminated, kbox_strv_free) that runs CMD in the
 * sandbox B describes.  It passes file descriptors to bwrap (the seccomp
 * program, the synthetic /etc files): they are in *FDS (N_FDS of them,
 * free the array), to be kept open across exec and closed after.  NULL
 * with ERR. */
char **kr_bwrap_argv(const kr_bwrap_opts_t *b, char *const *cmd, int **fds, size_t *n_fds,
                     kbox_error_t *err);

/* The sandbox's first process, as bwrap says it on its --info-fd
 * INFO_FD (read for up to 10 s): its pid; 0 when bwrap ended before it
 * said anything (its failure is then its own to report); -1 with ERR. */
pid_t kr_bwrap_info_pid(int info_fd, kbox_error_t *err);

/* The pipes of a sandbox started with SYNC: kbox reads bwrap's info
 * from INFO[0] (kr_bwrap_info_pid) and lets the sandbox go on with a byte
 * on BLOCK[1]; INFO[1] and BLOCK[0] are bwrap's.  Starts as {{-1, -1},
 * {-1, -1}}. */
typedef struct {
	int info[2], block[2];
} kr_bwrap_sync_t;

/* Make S's pipes and set B's SYNC, INFO_FD and BLOCK_FD to bwrap's ends.
 * 0, or -1 with ERR. */
int kr_bwrap_sync_open(kr_bwrap_sync_t *s, kr_bwrap_opts_t *b, kbox_error_t *err);

/* kr_bwrap_argv took bwrap's ends among its FDS: S forgets them. */
void kr_bwrap_sync_passed(kr_bwrap_sync_t *s);

/* Let the sandbox go on.  0, or -1 with ERR. */
int kr_bwrap_sync_go(kr_bwrap_sync_t *s, kbox_error_t *err);

/* Close what S still holds. */
void kr_bwrap_sync_close(kr_bwrap_sync_t *s);

/* Set the bounds that Linux keeps per user namespace on the sandbox
 * whose first process PID waits (SYNC) before its command runs:
 *
 * - RLIMIT_NPROC (soft and hard) of that process to NPROC, when > 0.  Set
 *   now, after bwrap has made the sandbox's user namespace, it bounds that
 *   session alone: Linux (5.14 and later) counts RLIMIT_NPROC in each user
 *   namespace against the limit of the process that forks, and above it
 *   only against the limit of the namespace's creator (here the caller's
 *   own).  Set before bwrap, it would be that creator's limit too, and
 *   bound all the user's processes together.
 * - With INOTIFY, the inotify instances and watches of the namespace:
 *   /proc/sys/user/max_inotify_instances and max_inotify_watches there
 *   (KR_BWRAP_INOTIFY_*), which Linux charges for every process in the
 *   namespace and in those below it.
 *
 * A child of the caller (one thread, as setns(2) requires) joins the
 * sandbox's user namespace, where it has every capability (as its owner,
 * the user who ran bwrap, or root), and sets both from there.  0; -1 with
 * ERR when RLIMIT_NPROC could not be set; 1 with ERR when only the
 * inotify limits could not. */
int kr_bwrap_bound(pid_t pid, long nproc, bool inotify, kbox_error_t *err);

/* Run CMD in the sandbox B describes, without a time limit (for short
 * commands), its stdout and stderr (the first SIZE - 1 bytes) in OUT.
 * Its exit status (128 + N when killed by signal N), or -1 with ERR when
 * it could not be run (or B's bounds could not be set: it is killed). */
int kr_bwrap_run(const kr_bwrap_opts_t *b, char *const *cmd, char *out, size_t size,
                 kbox_error_t *err);

/* Run /usr/bin/true in the sandbox B describes: 0 when bwrap can make it
 * on this machine, else -1 with ERR saying why (bwrap's own message). */
int kr_bwrap_probe(const kr_bwrap_opts_t *b, kbox_error_t *err);

#endif
