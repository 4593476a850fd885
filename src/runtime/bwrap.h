/* src/runtime/bwrap.h — the bwrap sandbox: bubblewrap's command line and
 * the seccomp filter (kbox(7)).  Runtime, not installed: used by the
 * bwrap backend (backend_bwrap.c) and by kbox doctor. */
#ifndef KBOX_RUNTIME_BWRAP_H
#define KBOX_RUNTIME_BWRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <kbox/error.h>

/* bubblewrap runs the command in new user, pid, net, ipc, uts and cgroup
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
	/* With SYNC: bwrap writes the sandbox's pid ("child-pid" in JSON) to
	 * INFO_FD, and the sandbox waits, its mounts made, until a byte comes
	 * on BLOCK_FD before it runs the command (both are added to the
	 * descriptors passed) */
	bool sync;
	int info_fd, block_fd;
	/* kbox_bwrap_run: with DROP_IDS, bwrap runs as host UID/GID (the
	 * sandbox user under root) */
	bool drop_ids;
	uid_t uid;
	gid_t gid;
} kbox_bwrap_opts_t;

#define KBOX_BWRAP_TMP_BYTES (512LL << 20)
#define KBOX_BWRAP_UID 1000
#define KBOX_BWRAP_RUNTIME "/run/kbox"

/* CMD as the sandbox finds it: itself when it has a '/', else the first of
 * /usr/local/bin, /usr/bin, /bin that has it under ROOTFS (NULL: the
 * host's /).  A new string, or NULL. */
char *kbox_bwrap_resolve(const char *cmd, const char *rootfs);

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

#endif
