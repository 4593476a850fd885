/* kbox/conn.h — Jupyter connection files: the five endpoints and the signing key of one kernel. */
#ifndef KBOX_CONN_H
#define KBOX_CONN_H

#include <stddef.h>
#include <sys/types.h>
#include <kbox/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	KBOX_CH_SHELL = 0,
	KBOX_CH_IOPUB,
	KBOX_CH_STDIN,
	KBOX_CH_CONTROL,
	KBOX_CH_HB,
	KBOX_CH_COUNT
} kbox_channel_t;

typedef enum { KBOX_TRANSPORT_IPC = 0, KBOX_TRANSPORT_TCP } kbox_transport_t;

/* Size of the random key written by kbox_conn_new_*: 256 bits, as 64 hex characters. */
#define KBOX_KEY_BYTES 32

typedef struct kbox_conn kbox_conn_t;

/* The channel's name: "shell", "iopub", "stdin", "control", "hb" ("?"
 * for another value).  Static (borrowed). */
const char *kbox_channel_name(kbox_channel_t channel);

/* A new connection for a local kernel over ipc: a fresh 256-bit key,
 * socket paths "DIR/kernel-TAG-ipc-N" with DIR made absolute, TAG 8 random
 * hex digits (so kernels sharing DIR never share sockets) and N counting
 * from 1, skipping files that exist.  DIR must exist.  New:
 * kbox_conn_destroy(&p); NULL with ERR on failure. */
kbox_conn_t *kbox_conn_new_ipc(const char *dir, kbox_error_t *err);

/* A new connection over tcp on 127.0.0.1 with five free ports.  New:
 * kbox_conn_destroy(&p); NULL with ERR. */
kbox_conn_t *kbox_conn_new_tcp(kbox_error_t *err);

/* Read a connection file.  Refuses malformed JSON, a missing or empty key,
 * an unknown transport or signature scheme, a port out of range; ERR names
 * the file and the field.  New: kbox_conn_destroy(&p); NULL with ERR. */
kbox_conn_t *kbox_conn_load(const char *path, kbox_error_t *err);

/* Parse a connection from a JSON object (a json_t *, borrowed for the call:
 * what is needed is copied).  SOURCE names it in errors.  New:
 * kbox_conn_destroy(&p); NULL with ERR. */
kbox_conn_t *kbox_conn_from_json(const void *json_obj, const char *source, kbox_error_t *err);

/* Write SELF to PATH with mode 0600, O_CREAT|O_EXCL|O_NOFOLLOW (an existing
 * file or a planted symlink is refused).  The directory holding PATH must be
 * owned by us and not accessible to group or others (0700).  0 or -1 with ERR. */
int kbox_conn_save(const kbox_conn_t *self, const char *path, kbox_error_t *err);

/* kbox_conn_save for a kernel that runs as another user (a sandbox's): the
 * directory holding PATH must be owned by UID and not accessible to group
 * or others (0700), and the file becomes UID:GID's, mode 0600.  Changing
 * a file's owner takes privilege (root, or CAP_CHOWN), unless UID and GID
 * are the caller's own.  0 or -1 with ERR (the file is not left behind). */
int kbox_conn_save_owned(const kbox_conn_t *self, const char *path, uid_t uid, gid_t gid,
                         kbox_error_t *err);

/* The connection file's text of SELF (what kbox_conn_save writes), for a
 * kernel that is given it otherwise than by a file of ours (bwrap: in a
 * tmpfs of the sandbox's own).  New, holding the key: free it with
 * kbox_conn_json_free, which wipes it.  NULL when out of memory. */
char *kbox_conn_json(const kbox_conn_t *self);
/* Wipe and free *TEXT (from kbox_conn_json), and set it to NULL. */
void kbox_conn_json_free(char **text);

/* The ZeroMQ endpoint of CHANNEL, e.g. "ipc:///run/k/kernel-ipc-3" or
 * "tcp://127.0.0.1:50123", or NULL for a bad CHANNEL.  Borrowed: valid
 * while SELF lives and until kbox_conn_set_ip. */
const char *kbox_conn_endpoint(const kbox_conn_t *self, kbox_channel_t channel);

/* Borrowed views, valid while SELF lives; the ip until kbox_conn_set_ip,
 * the kernel name until kbox_conn_set_kernel_name. */
kbox_transport_t kbox_conn_transport(const kbox_conn_t *self);
const char *kbox_conn_ip(const kbox_conn_t *self);
int kbox_conn_port(const kbox_conn_t *self, kbox_channel_t channel);
const char *kbox_conn_scheme(const kbox_conn_t *self);
/* The key bytes (not NUL-terminated) and their length via *LEN (may be
 * NULL).  Borrowed: valid while SELF lives (wiped by kbox_conn_destroy). */
const unsigned char *kbox_conn_key(const kbox_conn_t *self, size_t *len);
/* kernel_name, or "" */
const char *kbox_conn_kernel_name(const kbox_conn_t *self);
/* NAME is copied (NULL → ""); out of memory keeps the old name. */
void kbox_conn_set_kernel_name(kbox_conn_t *self, const char *name);

/* A deep copy.  New: kbox_conn_destroy(&p); NULL when out of memory. */
kbox_conn_t *kbox_conn_dup(const kbox_conn_t *self);

/* Replace the ip (for ipc, the socket path prefix) and the endpoints made
 * from it: a sandboxed kernel sees the runtime directory under another
 * path than its clients do.  IP is copied.  Pointers borrowed from
 * kbox_conn_ip and kbox_conn_endpoint before are then invalid.  0, or -1
 * with ERR (empty or too long). */
int kbox_conn_set_ip(kbox_conn_t *self, const char *ip, kbox_error_t *err);

/* For ipc: unlink the five socket files (missing ones are fine). */
void kbox_conn_remove_ipc_files(const kbox_conn_t *self);

/* Wipe the key and free SELF; sets *SELF_P to NULL. Accepts NULL. */
void kbox_conn_destroy(kbox_conn_t **self_p);

#ifdef __cplusplus
}
#endif
#endif
