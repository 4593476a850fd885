/* src/runtime/workspace.h — a session's workspace seen from the host:
 * paths confined to it, files read out of it and written into it, and the
 * host directories that may be one (kbox run --workspace).
 *
 * The kernel changes its workspace at will, so nothing the host does there
 * may be led elsewhere: a path is relative, without "..", and resolved
 * beneath the workspace (openat2 RESOLVE_BENEATH: a symbolic link only
 * when it stays inside; without openat2, no symbolic link at all); a file
 * is read only when it is a regular file, opened O_PATH first (no device
 * opens, no FIFO waits); a file is written beside its name and renamed
 * over it, so a link planted at the name is replaced, never followed.
 * kbox put, kbox get, kbox run, kbox agent --file and kbox mcp's file
 * tools all go through here.
 *
 * Errors are a kbox_error_t whose message names the path as the user gave
 * it: KBOX_E_INVALID (or KBOX_E_NOTFOUND) for a path that the workspace
 * refuses or does not have, KBOX_E_SYSTEM (KBOX_E_NOMEM) when the host
 * failed.  ws_open, which wraps a system call, says errno instead. */
#ifndef KR_RUNTIME_WORKSPACE_H
#define KR_RUNTIME_WORKSPACE_H

#include <stdbool.h>
#include <sys/stat.h>
#include <kbox/error.h>

/* ---- paths ---- */

/* 0 when PATH may name something in a workspace: not empty, relative, no
 * ".." component; else -1 with ERR (KBOX_E_INVALID) saying why, such as
 * "/x: an absolute path is outside the workspace (give a path relative to
 * it)". */
int ws_check_path(const char *path, kbox_error_t *err);

/* openat(DIRFD, PATH, FLAGS, MODE) confined beneath DIRFD, as this header
 * says.  The descriptor (close-on-exec), or -1 with errno: EXDEV for a
 * link that leads out, ELOOP for a link refused. */
int ws_open(int dirfd, const char *path, int flags, unsigned mode);

/* What an errno of ws_open means, for a message (static). */
const char *ws_strerror(int e);

/* What a file that is not a regular file is: "a directory", "a FIFO",
 * "a socket", "a symbolic link", "a whiteout", "a device" or "a special
 * file" (static). */
const char *ws_file_kind(const struct stat *st);

/* Open SESSION_DIR/SUB ("workspace", or "outputs"), O_PATH.  The
 * descriptor, or -1 with ERR ("cannot open DIR: why", KBOX_E_SYSTEM). */
int ws_open_session(const char *session_dir, const char *sub, kbox_error_t *err);

/* Open the directory that the file PATH is in, beneath WS, O_PATH (WS
 * itself when PATH has no '/'); *NAME points at PATH's last component.
 * The descriptor, or -1 with ERR: "directory DIR does not exist in the
 * workspace" (KBOX_E_NOTFOUND), "DIR is not a directory in the workspace"
 * or why it was refused (KBOX_E_INVALID). */
int ws_open_parent(int ws, const char *path, const char **name, kbox_error_t *err);

/* ---- reading ---- */

/* Open PATH beneath DIRFD for reading, when it is a regular file (*ST its
 * status): opened O_PATH, checked, then reopened through /proc/self/fd
 * (the same inode; without /proc, by PATH again, and compared).  The
 * descriptor (blocking, close-on-exec), or -1 with ERR naming SHOWN (NULL:
 * PATH): "SHOWN: why" (KBOX_E_NOTFOUND when there is none), "SHOWN is a
 * FIFO, not a regular file (refused)", "SHOWN changed while it was opened
 * (refused)". */
int ws_open_regular(int dirfd, const char *path, const char *shown, struct stat *st,
                    kbox_error_t *err);

/* ---- writing ---- */

/* A file being written into a workspace: a temporary file beside its name,
 * renamed over the name when complete.  WS_FILE_INIT before
 * ws_file_begin; ws_file_end after, whatever happened. */
typedef struct {
	int dirfd;    /* the directory it goes in (owned) */
	int fd;       /* the temporary file, open for writing (owned) */
	char *name;   /* its name in DIRFD (owned) */
	char *shown;  /* the path for messages (owned) */
	char tmp[64]; /* the temporary file's name; "" once renamed */
} ws_file_t;
#define WS_FILE_INIT                   \
	{                              \
		-1, -1, NULL, NULL, "" \
	}

/* Begin writing the file NAME (no '/') in the workspace's directory DIRFD
 * (taken: closed by ws_file_end, also on failure), SHOWN its path in
 * messages: refused when a directory is at NAME ("SHOWN is a directory in
 * the workspace", KBOX_E_INVALID); else a new file ".kbox-TAG-<random>"
 * (kx_temp_open) in DIRFD, mode 0644, given to DIRFD's owner when we are
 * root and it is not (the sandbox user's workspace).  F->fd is then the
 * file to write.  0, or -1 with ERR. */
int ws_file_begin(ws_file_t *f, int dirfd, const char *name, const char *shown, const char *tag,
                  kbox_error_t *err);

/* Complete F, written (and fsync'ed if need be) through F->fd: rename it
 * over its name ("cannot write SHOWN in the workspace: why").  0, or -1
 * with ERR. */
int ws_file_commit(ws_file_t *f, kbox_error_t *err);
/* For a signal handler (async-signal-safe): remove the temporary file of
 * the ws_file being written, if any (it is never committed then). */
void ws_file_abandon(void);

/* Remove F's temporary file unless it was committed, close and free what
 * F holds; F is WS_FILE_INIT again.  Accepts one never begun. */
void ws_file_end(ws_file_t *f);

/* ---- host files ---- */

/* Open the host file PATH, to be copied into a workspace, for reading:
 * a regular file (the open never waits on a FIFO).  The descriptor, or -1
 * with ERR: "cannot read PATH: why" or "PATH is not a regular file". */
int ws_source_open(const char *path, kbox_error_t *err);

/* Copy what is left of IN to OUT.  0 at IN's end, or -1 with errno. */
int ws_copy_fd(int in, int out);

/* Copy the host file open on IN (HOST its name; NULL: standard input,
 * which has none) into the workspace of the session in SESSION_DIR as
 * DEST (ws_check_path'ed by the caller): into the directory DEST when it
 * is one or ends in '/' (the file keeps HOST's base name; refused for
 * standard input), else as the file DEST; written and fsync'ed beside, then
 * renamed over (kbox put, kbox agent --file).  IN is not closed.  0, or -1
 * with ERR: KBOX_E_INVALID or KBOX_E_NOTFOUND when DEST is refused,
 * KBOX_E_SYSTEM when the copy failed. */
int ws_put(const char *session_dir, int in, const char *host, const char *dest, kbox_error_t *err);

/* Check PATH, a host directory to bind read-write as the kernel's
 * workspace (kbox run --workspace), and put it resolved (links and ".."
 * followed) into OUT (PATH_MAX bytes).  Refused: /; a system directory
 * (/etc, /usr, /var, ...) or anything in one, but for the places for
 * anyone's files in them (/var/tmp/x); /home, /tmp, /mnt and their like
 * themselves; a home directory ($HOME, or any in the password database) or
 * a directory that holds one; a kbox state directory, anything in it or
 * holding one: the current one, the default ones whatever KBOX_HOME is,
 * any other found by content (KR_STATE_MARK, a sessions/NAME/session.json;
 * one too big to look through is refused too).  The directory is opened first and its own location
 * checked; *ST (may be NULL) gets its device and inode, which the sandbox
 * must bind.  0, or -1 with ERR (KBOX_E_INVALID): "PATH: why", or "PATH:
 * refused: why, and the code can change everything in its workspace". */
int ws_host_dir(const char *path, char *out, struct stat *st, kbox_error_t *err);

/* Whether the directory open at FD is the directory of device and inode
 * DIR (a workspace's, ws_host_dir's *ST) or lies inside it, however it
 * was reached (links, bind mounts: by device and inode, from / down). */
bool ws_fd_within(int fd, const struct stat *dir);

/* Whether the directory open at FD is a kbox state directory, found by
 * what is in it: KR_STATE_MARK, a session's own (its session.json beside
 * its control.sock, run or supervisor.pid), or a sessions directory with
 * a session in it. */
bool ws_is_state_dir(int fd);

/* 0 when nothing in the directory NAME of the directory AT (a session's
 * own workspace or home, which its sandbox has; not through a link there),
 * whose path is DIR, is a kbox state directory, and it could be looked
 * through; else -1 with ERR (KBOX_E_INVALID) saying why, WHAT naming
 * DIR. */
int ws_holds_state(int at, const char *name, const char *dir, const char *what, kbox_error_t *err);

/* 0 when the directory PATH (an outputs directory, WHAT) is in no kbox
 * state directory (ws_is_state_dir, of it or of any directory above it):
 * a session's workspace is, and its sandbox has it whenever it runs.
 * Else -1 with ERR. */
int ws_in_state_dir(const char *path, const char *what, kbox_error_t *err);

/* 0 when the state directory HOME (absolute; need not exist) lies in no
 * session's directory, nor in the sessions directory of a state directory
 * (ws_is_state_dir) above it: a session's workspace and home are there,
 * and the sandbox that has them would have every session of a state
 * directory made there.  (Elsewhere in a state directory no sandbox
 * reaches.)  Else -1 with ERR (KBOX_E_INVALID). */
int ws_state_in_state(const char *home, kbox_error_t *err);

#endif
