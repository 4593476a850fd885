/* src/runtime/session.h — persistent sessions: names, the state directory, the
 * session's files, its event log, and the control socket its supervisor
 * answers.
 *
 * A session lives in HOME/sessions/NAME/ (mode 0700), where HOME is
 * $KBOX_HOME, else $XDG_STATE_HOME/kbox, else ~/.local/state/kbox:
 *
 *   session.json     the configuration given to kbox start (kernel, backend,
 *                    ttl, limits, environment): session_config.h
 *   supervisor.pid   the supervisor's pid, flock()ed while it runs
 *   control.sock     the supervisor's control socket (JSON lines: kbox-protocol(7),
 *                    runtime/protocol.h; its clients use runtime/ctl.h)
 *   run/             nothing a kernel uses: its connection file and sockets
 *                    are in its sandbox (bwrap: a tmpfs of its own), or
 *                    for none in a fresh directory outside every state
 *                    directory (ws_live.h)
 *   workspace/       the kernel's working directory; survives restarts
 *   outputs/         images and spilled output of executions
 *   events.ndjson    lifecycle and execution log, one JSON object per line
 *   kernel.log       the kernel's stdout and stderr, through the supervisor:
 *                    up to 1 MiB, then renamed kernel.log.1 (kernel_log.h)
 *   supervisor.log   the supervisor's own diagnostics
 *   cgroups          the cgroup directories the supervisor made, one a line
 *   generation       how many kernels this session has started
 *   last-stop        why the previous supervisor ended (read by the next)
 *   agent.json       kbox agent's conversation (mode 0600; kbox-agent(1))
 */
#ifndef KR_RUNTIME_SESSION_H
#define KR_RUNTIME_SESSION_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>
#include <kbox/error.h>
#include "runtime/session_config.h" /* session.json */


/* Short enough that HOME/sessions/NAME/run/<socket> fits a unix socket
 * path (107 bytes) under a usual ~/.local/state/kbox. */
#define KR_SESSION_NAME_MAX 32
#define KR_SESSION_DEFAULT "default"

/* 0 when NAME is a valid session name: 1 to 32 of [A-Za-z0-9._-], not
 * starting with '.' or '-' (so never "..", never a path).  -1 with ERR. */
int kr_session_check_name(const char *name, kbox_error_t *err);

/* The state directory ($KBOX_HOME, $XDG_STATE_HOME/kbox, else
 * ~/.local/state/kbox, or under root KR_ROOT_STATE_HOME), malloc'd, its
 * links resolved (kr_resolve_home: with REFUSE for an ordinary user's
 * KBOX_HOME); resolved once in a process, every later call giving the
 * same.  Not created.  From then on nothing below it is reached through a
 * link (kx_no_links_below).  NULL with ERR. */
char *kr_state_home(kbox_error_t *err);

/* PATH (absolute) resolved one part at a time from "/", each part looked
 * at and followed in one step: links resolved, ".", ".." and empty parts
 * gone, the parts that do not exist yet appended plain.  With REFUSE, a
 * symbolic link in a directory the caller can write (not sticky, or
 * sticky and the link its own) is refused, not followed (kbox(7), threat
 * 44).  New, or NULL with ERR. */
char *kr_resolve_home(const char *path, bool refuse, kbox_error_t *err);
#define KR_ROOT_STATE_HOME "/var/lib/kbox"

/* The file kbox writes into every state directory it makes sessions in,
 * so that one is known by its content wherever it is (ws_host_dir
 * refuses a workspace in or holding one), and what it says. */
#define KR_STATE_MARK ".kbox-state"
#define KR_STATE_MARK_TEXT                                                              \
	"This is a kbox state directory: its sessions' keys, sockets and workspaces.\n" \
	"kbox refuses it, anything in it and anything holding it as a workspace.\n"

/* Mark DIR as a kbox state directory (KR_STATE_MARK), once: a file made
 * with O_EXCL, never through a link.  A state directory of sessions and
 * a session directory of its own (kbox run's) alike.  1 when this call
 * made it, 0 when it was there, or -1 with ERR. */
int kr_state_mark(const char *dir, kbox_error_t *err);

/* The environment a supervisor is started with (new, as kx_argv_take;
 * NULL when out of memory), made by kbox, never the caller's inherited
 * whole, so that no secret of the caller's (OPENAI_API_KEY, a token)
 * lives in it for the session's life: PATH=KX_SAFE_PATH, KBOX_HOME=
 * STATE_HOME (the state directory the caller resolved), and of the
 * caller's only what the supervisor reads, when set: HOME, USER and
 * LOGNAME (whose the session is), KBOX_SANDBOX_USER and KBOX_SUBUID_FILE
 * (who its sandbox is under root), where kernelspecs
 * are (JUPYTER_PATH, JUPYTER_DATA_DIR, XDG_DATA_HOME), LD_LIBRARY_PATH
 * (where its library is), and a sanitizer build's settings
 * (ASAN_OPTIONS, LSAN_OPTIONS, UBSAN_OPTIONS).  kbox(7) lists them.
 * Free it with kbox_strv_free. */
char **kr_supervisor_env(const char *state_home);

/* The host identity sandboxes run as.  Under root, an unprivileged
 * account: $KBOX_SANDBOX_USER, default KR_SANDBOX_USER (created by
 * kbox doctor --fix), so that nothing in a sandbox is root outside it.
 * Otherwise the caller's own (DROP false). */
#define KR_SANDBOX_USER "kbox"
typedef struct {
	bool drop; /* true under root: sandboxes run as UID/GID */
	uid_t uid;
	gid_t gid;
	char user[64]; /* the account's name */
} kr_sandbox_id_t;

/* Fill ID.  Under root, the account must exist and be neither uid 0 nor
 * gid 0.  0, or -1 with ERR (saying how to make it). */
int kr_sandbox_identity(kr_sandbox_id_t *id, kbox_error_t *err);

/* Under root each session's sandbox runs as a host uid of its own
 * (sandbox_uid.c), from the sandbox user's range in KR_SUBUID_FILE
 * ($KBOX_SUBUID_FILE names another; at most KR_SESSION_UIDS_MAX of it
 * used), recorded in KR_UID_DIR; its group stays the sandbox user's. */
#define KR_SUBUID_FILE "/etc/subuid"
#define KR_UID_DIR KR_ROOT_STATE_HOME "/uids"
#define KR_SESSION_UIDS_MAX 65536

/* The sandbox user ID's range: *FIRST and *COUNT.  None, or one that holds
 * a uid of the password database, is an error saying how to fix it.  0,
 * or -1 with ERR. */
int kr_sandbox_range(const kr_sandbox_id_t *id, uid_t *first, uid_t *count, kbox_error_t *err);

/* Under root (ID->drop), make ID->uid the session DIR's own: the one it
 * has, else the first free one of the range, recorded; what an earlier uid
 * of the session made in its workspace and home becomes the
 * new one's.  Nothing without DROP.  With HOLD, *HOLD gets a descriptor
 * that holds the uid while it is open, whatever becomes of DIR: no other
 * session takes it meanwhile (the supervisor keeps it for its life).
 * 0, or -1 with ERR. */
int kr_session_uid(const char *dir, kr_sandbox_id_t *id, int *hold, kbox_error_t *err);

/* The session DIR is going: give its uid back. */
void kr_session_uid_release(const char *dir);

/* 0 when ID can search every directory on the way to PATH (bwrap finds
 * its bind sources as the sandbox user), -1 with ERR naming the first
 * that it cannot.  Always 0 without DROP.  ID's uid (uid_t)-1 stands for
 * any session's: only its group and others' bits count. */
int kr_sandbox_reachable(const kr_sandbox_id_t *id, const char *path, kbox_error_t *err);

/* Give the session directory DIR, held open as DIR_FD (O_PATH will do),
 * to sandbox user ID (under root): DIR and the state directory above it
 * 0710 root:GID (the sandbox user may pass, not list), workspace and home
 * 0700 UID:GID.  Without DROP, only those two, back to 0700.  Workspace
 * and home are made and changed from DIR_FD, never by path.  Done at each
 * kernel's start: a kernel may have changed their modes.  0 or -1 with
 * ERR. */
int kr_session_share(int dir_fd, const char *dir, const kr_sandbox_id_t *id, kbox_error_t *err);

/* Whether only this user or root can change every directory above the
 * state directory HOME (those that exist): owned by one of them, and
 * writable by no one else unless sticky (/tmp), as sshd's StrictModes
 * asks of a home.  0, or -1 with ERR saying which and who. */
int kr_state_parents_safe(const char *home, kbox_error_t *err);

/* HOME/sessions/NAME, malloc'd.  With CREATE the directories are made (0700)
 * and checked to be private; without, the session must exist
 * (KBOX_E_NOTFOUND otherwise).  Also refuses a path too long for the unix
 * sockets the session needs.  NULL with ERR. */
/* The state directory HOME, when it exists, is private: the user's, mode
 * 0700 (under root 0710 too, as kr_session_share makes it).  0, or -1
 * with ERR saying the chmod that fixes it. */
int kr_session_check_home(const char *home, kbox_error_t *err);

/* kr_session_check_home, and sessions can be made in HOME: it can be
 * written, or, when it does not exist yet, made (its nearest directory
 * that exists can be written).  0, or -1 with ERR saying why and what to
 * do ("state directory H cannot be written: Read-only file system; give
 * KBOX_HOME a directory that can be"). */
int kr_session_check_home_usable(const char *home, kbox_error_t *err);

/* Whether every sandbox of the account ID (any uid of its range, in its
 * group) can reach HOME: what is above it (kbox opens HOME itself to
 * them), or its nearest ancestor that exists, can be searched by them.
 * Nothing to check when ID drops no privilege (not root).  0, or -1 with
 * ERR saying which directory stops them and the chmod that lets them
 * pass (kr_sandbox_reachable). */
int kr_session_check_home_reachable(const char *home, const kr_sandbox_id_t *id, kbox_error_t *err);

char *kr_session_dir(const char *home, const char *name, bool create, kbox_error_t *err);

/* A state directory that kr_session_dir made in this process for a
 * session that then failed to start (and was taken back): removed, when
 * nothing but its mark and an empty sessions directory is in it, so that
 * a failed first start leaves nothing behind.  Else nothing. */
void kr_session_home_forget(void);

/* A session started in the state directory this process made: it stays,
 * whatever comes of that session (kr_session_home_forget does nothing
 * after). */
void kr_session_home_keep(void);

/* Names of the sessions under HOME (sorted, malloc'd array of malloc'd
 * strings, *N_P of them): every entry of HOME/sessions with a valid
 * session name, whatever its kind (kbox ls shows one that is no session
 * "invalid").  An absent HOME is an empty list. */
char **kr_session_list(const char *home, size_t *n_p, kbox_error_t *err);
void kr_session_list_free(char **names, size_t n);
/* Whether HOME/sessions/NAME is a directory (a link is not followed): an
 * entry of kr_session_list that is not is no session, with nothing in it
 * to stop. */
bool kr_session_is_dir(const char *home, const char *name);

/* events.ndjson up to 1 MiB, events.ndjson.1 the same: 2 MiB together. */
#define KR_EVENTS_LOG_MAX (1LL << 20)

/* Append one event to DIR/events.ndjson: FIELDS (stolen; may be NULL) plus
 * "time" (ISO 8601 UTC) and "event".  One write(2) per line, O_APPEND, so
 * concurrent writers do not interleave.  When the line would take the
 * file past KR_EVENTS_LOG_MAX, the file is first renamed
 * DIR/events.ndjson.1 (replacing the one before) and a new one begun: a
 * line is never split between the two.  0 or -1 with ERR. */
int kr_session_log(const char *dir, const char *event, json_t *fields, kbox_error_t *err);
/* The same in the directory open at DFD (an O_PATH descriptor will do),
 * named DIR in errors: the supervisor holds its session's. */
int kr_session_log_at(int dfd, const char *dir, const char *event, json_t *fields,
                      kbox_error_t *err);

/* The state of the session's supervisor. */
typedef enum {
	KR_SUPERVISOR_NONE = 0, /* never started, or stopped cleanly */
	KR_SUPERVISOR_RUNNING,
	KR_SUPERVISOR_DEAD, /* it ended without stopping (killed, crashed) */
} kr_supervisor_state_t;

/* Whether the supervisor of DIR runs (it holds a lock on supervisor.pid);
 * *PID_P (may be NULL) gets its pid, or the last one when dead. */
kr_supervisor_state_t kr_session_supervisor(const char *dir, pid_t *pid_p);

/* Whether a kbox start of DIR is under way (it holds DIR/start.lock). */
bool kr_session_starting(const char *dir);

/* Remove the session directory DIR and everything in it, to any depth,
 * never following a symbolic link, there or at its sessions directory
 * (kbox rm, kbox prune, kbox mcp's sessions of one connection once
 * stopped), and only a directory that holds a file kbox makes in every
 * session (session.json, supervisor.pid or events.ndjson).  Refused while
 * its supervisor runs (EBUSY) or a kbox start holds its start.lock, unless
 * STARTING says the caller is that start (its first start failed; then
 * the directory it just made goes, whatever it holds).  0, or -1 with
 * ERR. */
int kr_session_remove(const char *dir, kbox_error_t *err);
int kr_session_remove_ex(const char *dir, bool starting, kbox_error_t *err);

/* The control socket its supervisor answers: runtime/ctl.h. */

#endif
