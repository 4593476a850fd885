/* src/private.h — internals shared between libkbox modules (kbox__ prefix). */
#ifndef KBOX_PRIVATE_H
#define KBOX_PRIVATE_H

#include "config.h"
#include <stdbool.h>
#include <stddef.h>
#include <sys/un.h> /* KBOX__SUN_PATH */
#include <czmq.h> /* zmsg_t, for the client (never in a public header) */
#include <kbox.h>

#if defined(__GNUC__)
#define KBOX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KBOX_PRINTF(a, b)
#endif

/* Fill ERR (may be NULL) with CODE and a formatted message. Always returns -1. */
int kbox__err(kbox_error_t *err, kbox_errcode_t code, const char *fmt, ...) KBOX_PRINTF(3, 4);

/* The same, appending ": strerror(errno)" (errno is read on entry). */
int kbox__err_sys(kbox_error_t *err, const char *fmt, ...) KBOX_PRINTF(2, 3);

/* Monotonic clock in milliseconds. */
long long kbox__now_ms(void);

/* Wall clock in seconds since the epoch, with microseconds. */
double kbox__now(void);

/* Format "N s" / "N ms" for messages: TIMEOUT_MS as humans read it. */
void kbox__fmt_ms(char *buf, size_t size, int ms);

/* 0 if DIR is a directory owned by us with no group/other access, else -1 with ERR. */
int kbox__check_private_dir(const char *dir, kbox_error_t *err);

/* Remove everything inside DIR (which stays), to any depth (one
 * descriptor open at a time, no path longer than a name), never following
 * a symbolic link.  0 (also when DIR does not exist), or -1 with errno. */
int kbox__empty_dir(const char *dir);

/* ---- util.c: one of each utility ---- */

/* A new NUL-terminated copy of S[0..LEN) that is well-formed UTF-8: each
 * maximal ill-formed subpart (Unicode §3.9, "substitution of maximal
 * subparts", which Python's decode(errors="replace") and so jupyter_client
 * follow) becomes U+FFFD (EF BF BD).  A subpart is a byte that starts no
 * character (80-C1, F5-FF), or a lead byte with the continuation bytes that
 * could still have completed it: "\xe2\x82A" gives one U+FFFD and "A",
 * "\xc0\xaf" (overlong) two, "\xed\xa0\x80" (a surrogate) three.  Valid
 * sequences, NUL bytes included, are copied as they are.  *OUT_LEN (may be
 * NULL) gets the length without the NUL.  Caller frees; NULL on ENOMEM. */
char *kbox__utf8_repair(const char *s, size_t len, size_t *out_len);
/* About what decoding JSON text P (N bytes) takes in memory (wire.c). */
size_t kbox__json_cost(const char *p, size_t n);

/* A growing string, like redis's sds but a struct the caller owns:
 * zero-initialise it (KBOX__BUF_INIT), append, then take the text.  The
 * capacity doubles up to KBOX__BUF_PREALLOC and then grows by that much at
 * a time.  When an append fails (out of memory, or SIZE_MAX reached) the
 * buffer is failed: that append and every later one return -1 and change
 * nothing, and take returns NULL.  DATA is NUL-terminated once anything
 * was appended. */
typedef struct {
	char *data;
	size_t len, cap;
	bool failed;
} kbox__buf_t;
#define KBOX__BUF_INIT {NULL, 0, 0, false}
#define KBOX__BUF_PREALLOC ((size_t)1 << 20)

/* Append LEN bytes at DATA (NUL bytes too).  0, or -1 (B is failed). */
int kbox__buf_append(kbox__buf_t *b, const void *data, size_t len);

/* Append the C string S.  0, or -1 (B is failed). */
int kbox__buf_appends(kbox__buf_t *b, const char *s);

/* Append printf-style text.  0, or -1 (B is failed). */
int kbox__buf_appendf(kbox__buf_t *b, const char *fmt, ...) KBOX_PRINTF(2, 3);

/* The text (new: the caller frees it; "" when nothing was appended) and its
 * length in *LEN (may be NULL); B is left empty, ready for reuse.  NULL
 * when B failed or memory ran out (B is emptied all the same). */
char *kbox__buf_take(kbox__buf_t *b, size_t *len);

/* Free B's text and make it empty again (not failed). */
void kbox__buf_reset(kbox__buf_t *b);

/* Write the time T (seconds since the epoch) to OUT as ISO-8601 UTC with
 * DIGITS (0-6, clamped) fractional digits, rounded to the nearest unit of
 * the last: "2026-11-29T09:21:39Z" (0), "…39.123Z" (3), "…39.123456Z" (6,
 * as kbox_iso8601 and Jupyter headers). */
void kbox__iso8601(double t, int digits, char out[32]);

/* Write all LEN bytes at DATA to FD, retrying after EINTR and short writes.
 * 0, or -1 with errno. */
int kbox__write_all(int fd, const void *data, size_t len);

/* The size of sockaddr_un.sun_path (108): a unix socket's path is shorter. */
#define KBOX__SUN_PATH sizeof(((struct sockaddr_un *)0)->sun_path)

/* A path to bind or connect the unix socket NAME in directory DIR by, into
 * BUF (SIZE at most KBOX__SUN_PATH): "DIR/NAME" when that fits, else
 * "/proc/self/fd/N/NAME", N a descriptor of DIR: *DIRFD_P when it is one
 * already (>= 0), else DIR opened here (O_PATH, close-on-exec) and left in
 * *DIRFD_P for the caller to close once the socket is bound or connected
 * (libzmq, which connects again by the path, needs it as long as the
 * socket lives).  Any DIR works, however long.  0, or -1 with ERR. */
int kbox__unix_path(char *buf, size_t size, const char *dir, const char *name, int *dirfd_p,
                    kbox_error_t *err);

/* ---- svg.c, for the capture: SVG images a browser could run ---- */

/* Why the SVG text S[0..LEN) could act when a user opens it in a browser,
 * as a short phrase ("a <script> element", "an event handler attribute",
 * "a link out of the image"), or NULL when a conservative check finds
 * nothing active (see svg.c for what it looks for).  Markup it cannot
 * read counts as active.  The phrase is static. */
const char *kbox__svg_active(const char *s, size_t len);

/* ---- wire.c, for the client: messages as czmq's zmsg_t ---- */

/* Serialise SELF: identities, delimiter, signature by AUTH, the four dicts
 * as compact JSON, buffers.  Caller owns the zmsg_t. NULL with ERR on failure. */
zmsg_t *kbox__msg_encode(const kbox_msg_t *self, const kbox_auth_t *auth, kbox_error_t *err);

/* kbox_msg_decode for the frames of ZMSG (left untouched; caller still owns it). */
kbox_msg_t *kbox__msg_decode_zmsg(kbox_auth_t *auth, zmsg_t *zmsg, kbox_error_t *err);

/* ---- process.c, for whatever starts a kernel (kernel.c, the runtime) ---- */

/* The PATH a kernel gets, and where commands are looked up. */
#define KBOX__SAFE_PATH "/usr/local/bin:/usr/bin:/bin"

/* The kernel's environment: PATH, HOME (HOME, or the caller's), LANG,
 * JPY_PARENT_PID, the kernelspec's env, then O->env.  NULL on ENOMEM. */
char **kbox__kernel_env(const kbox_kspec_t *spec, const kbox_kernel_opts_t *o, const char *home);

/* CMD as an absolute path: itself when it has a '/', else the first of
 * /usr/local/bin, /usr/bin, /bin that has it, looked for under ROOT (NULL:
 * the host's /).  A new string, or NULL. */
char *kbox__resolve_command(const char *cmd, const char *root);

/* A host identity a child takes before it execs: no supplementary
 * groups, then GID, then UID (which, from root, clears every capability). */
typedef struct {
	uid_t uid;
	gid_t gid;
} kbox_ids_t;

/* Take IDS in a child (only system calls: async-signal-safe) and check
 * that real, effective and saved ids all took, and that no capability is
 * left.  0, or -1 with errno. */
int kbox__take_ids(const kbox_ids_t *ids);

/* kbox_conn_save, for IDS (not NULL): the directory is that user's (the
 * sandbox user's, under root) and the file becomes theirs, 0600. */
int kbox__conn_save_for(const kbox_conn_t *self, const char *path, const kbox_ids_t *ids,
                        kbox_error_t *err);

/* After fork: new session, PR_SET_PDEATHSIG (exit 127 if PARENT is gone
 * already), default signals, stdin /dev/null, stdout and stderr on OUT_FD
 * (< 0: /dev/null), then IDS taken when not NULL (and PR_SET_PDEATHSIG set
 * again: a change of identity clears it), chdir to O->cwd, every fd from 3
 * up closed on exec but the N_KEEP in KEEP, execve.  On failure writes
 * errno to ERRFD and exits 127. */
void kbox__child_exec(const char *exe, char **argv, char **env, const kbox_kernel_opts_t *o,
                      int errfd, int out_fd, const kbox_ids_t *ids, pid_t parent,
                      const int *keep, size_t n_keep);

#endif
