/* src/runtime/ws_live.h — the host directories that running sandboxes
 * have as their workspaces (kbox run --workspace), kept where every kbox
 * of the user finds them whatever its KBOX_HOME, so that no state
 * directory is made or used in one.
 *
 * A sandbox can read and write everything in its workspace.  ws_host_dir
 * refuses a workspace that holds a state directory when the run begins;
 * this covers one made there afterwards (KBOX_HOME=W/st kbox exec while
 * kbox run --workspace W goes on), whose keys and sockets the sandbox
 * would otherwise reach.
 *
 * The record is a directory only the user (or root) can make, found the
 * same way whatever the environment says: under root KR_LIVE_DIR_ROOT;
 * else KR_LIVE_DIR_HOME in the home directory of the password database
 * (in the default state directory, which no workspace may be in or
 * hold); without a home that can be written, KR_LIVE_DIR_FMT (its uid in
 * it; /tmp is never a workspace, and this one must be the user's, mode
 * 0700, as tmux's socket directory is).  In it a supervisor keeps one
 * file per host workspace it binds, locked (flock) for as long as it
 * lives: "DEV INO\nPATH\n".  A file whose lock can be taken belongs to a
 * supervisor that is gone: it is removed by the next to see it.
 *
 * The order closes the race: the supervisor records its workspace, then
 * looks through it for state directories (ws_host_dir); a state
 * directory is made, then checked against the record (kr_session_dir).
 * One of the two always sees the other. */
#ifndef KR_RUNTIME_WS_LIVE_H
#define KR_RUNTIME_WS_LIVE_H

#include <stdbool.h>
#include <sys/stat.h>
#include <kbox/error.h>

#define KR_LIVE_DIR_ROOT "/run/kbox"
#define KR_LIVE_DIR_HOME ".local/state/kbox/live"
#define KR_LIVE_DIR_FMT "/tmp/kbox-%u"

/* Record the host directory PATH (device and inode in ST) as a live
 * workspace of this process.  The descriptor that holds the record
 * (close-on-exec; closing it, or the process ending, releases it), its
 * path in FILE (PATH_MAX bytes, to unlink when done), or -1 with ERR. */
int kr_live_ws_hold(const char *path, const struct stat *st, char *file, kbox_error_t *err);

/* Drop the record held on *FD at FILE (kr_live_ws_hold); *FD is -1 after.
 * Accepts -1. */
void kr_live_ws_release(int *fd, const char *file);

/* 0 when the state directory HOME (absolute; need not exist yet) lies in
 * no live workspace; else -1 with ERR (KBOX_E_INVALID): "state directory
 * HOME is in W, the workspace of a running sandbox (pid P): its code could
 * reach the sessions' keys and sockets; keep state directories
 * (KBOX_HOME, XDG_RUNTIME_DIR) outside it".  A record that cannot be read fails closed. */
int kr_live_ws_refuses(const char *home, kbox_error_t *err);

/* The same for any directory PATH kbox keeps something in for the caller
 * (an outputs directory), WHAT naming it in ERR ("outputs directory"). */
int kr_live_ws_check(const char *path, const char *what, kbox_error_t *err);

/* The record's directory (made or not), into DIR (PATH_MAX bytes):
 * ws_host_dir refuses a workspace in it or holding it. */
void kr_live_path(char *dir);

/* A fresh directory for the sockets of a kernel that runs without a
 * sandbox (backend none), where no sandbox reaches them: in the record's
 * directory, KR_LIVE_SOCKETS/none-XXXXXX (a name no record has), mode
 * 0700, never below a state directory or a workspace.  Its path into DIR
 * (PATH_MAX bytes), and a descriptor that holds it (a lock, close-on-
 * exec) for as long as it is open: one that is no longer held belongs to
 * a supervisor that is gone, and the next to make one removes it.  The
 * descriptor, or -1 with ERR. */
#define KR_LIVE_SOCKETS ".sockets"
int kr_live_sockets_make(char *dir, kbox_error_t *err);

/* Remove the directory DIR that *FD holds (kr_live_sockets_make) and
 * what is in it; *FD is -1 after.  Accepts -1. */
void kr_live_sockets_release(int *fd, const char *dir);


/* The key of this user's seals (session_config.c), KR_LIVE_KEY_LEN random
 * bytes in KR_LIVE_KEY of the record's directory, where no sandbox
 * reaches: read into KEY, made first when there is none and MAKE (made
 * whole before it is linked at its name, so a reader never sees part of
 * it, and two makers agree on one).  Its path into PATH (PATH_MAX bytes).
 * 0; -2 when there is none and MAKE is false; -1 with ERR (also for a key
 * that is not a private file of the user's of the right size). */
#define KR_LIVE_KEY ".session-key"
#define KR_LIVE_KEY_LEN 32
int kr_live_key(unsigned char *key, bool make, char *path, kbox_error_t *err);

/* The record of the seal kbox last put on each session.json (review 17,
 * B17-3): a seal covers the file and its session's directory, so an older
 * sealed file of the same session, kept by code that could read it and
 * put back later, would pass the seal alone.  In the record's directory,
 * KR_LIVE_SEALS/<the SHA-256 of the session's directory in hex> holds
 * "SEAL\nDIR\nDEV INO BIRTH\n" (the directory's identity,
 * kr_live_dir_id: one made again at the same path has no record, review
 * 18's W18-4); a file whose seal is not the one recorded is refused.
 *
 * kr_live_seals_open: the records' directory (made when MAKE), locked
 * (flock: EXCLUSIVE for a save, shared for a check, so that no check sees
 * a file saved and its record not yet) until closed.  The descriptor; -2
 * when there is none and MAKE is false; -1 with ERR. */
#define KR_LIVE_SEALS ".seals"
int kr_live_seals_open(bool make, bool exclusive, kbox_error_t *err);

/* A directory's identity: its device and inode, and when it was made
 * (a file system may give a new directory the inode of one just removed;
 * 0 where it does not say). */
typedef struct {
	unsigned long long dev, ino;
	long long birth_sec;
	unsigned birth_nsec;
} kr_dir_id_t;

/* The identity of the directory FD into ID.  0, or -1 with errno. */
int kr_live_dir_id(int fd, kr_dir_id_t *id);

/* Record SEAL as the last of DIR's session.json, DIR being the directory
 * ID, in FD (kr_live_seals_open, exclusive).  0, or -1 with ERR. */
int kr_live_seal_put(int fd, const char *dir, const kr_dir_id_t *id, const char *seal,
                     kbox_error_t *err);

/* The seal recorded for DIR's session.json, DIR being the directory ID,
 * into SEAL (SIZE bytes).  0; -2 when there is none; -3 when there is one
 * of another directory that was at that path; -4 when there is one an
 * older kbox wrote (no directory's identity); -1 with ERR. */
int kr_live_seal_get(int fd, const char *dir, const kr_dir_id_t *id, char *seal, size_t size,
                     kbox_error_t *err);

/* Whether kbox recorded a seal of a session.json at DIR (of whichever
 * directory was there): a session of its own, to remove.  Run by an
 * ordinary user only (false under root). */
bool kr_live_seal_known(const char *dir);

/* Forget the record of DIR's session.json (its session is removed); run by
 * an ordinary user only, quietly. */
void kr_live_seal_drop(const char *dir);

/* What a session's supervisor keeps for the next one where no sandbox
 * reaches (review 18, B18-2, W18-3: in the session's directory, code that
 * reached it wrote a ledger that had the next supervisor kill another
 * session's cgroups, and a last stop shown as kbox's own note): the
 * directory KR_LIVE_SESSIONS/<the SHA-256 of the session directory's path
 * in hex> of the record's directory, 0700.
 *
 * kr_live_session_path: the path of FILE in it ("" for the directory)
 * into PATH (SIZE bytes), the directory made when MAKE.  0; -2 when there
 * is none and MAKE is false; -1 with ERR. */
#define KR_LIVE_SESSIONS ".sessions"
#define KR_LIVE_LAST_STOP "last-stop" /* why the session's supervisor stopped */
#define KR_LIVE_CGROUPS "cgroups"     /* the cgroups its supervisors made */
int kr_live_session_path(const char *dir, const char *file, bool make, char *path, size_t size,
                         kbox_error_t *err);

/* Forget what kbox keeps for the session DIR (it is removed): the record
 * of its seal, and its directory of KR_LIVE_SESSIONS.  Quietly. */
void kr_live_session_forget(const char *dir);
#endif
