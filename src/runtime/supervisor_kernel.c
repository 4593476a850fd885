/* src/runtime/supervisor_kernel.c — the kernel's life under the
 * supervisor (supervisor_int.h): its files and sockets, its start through
 * the backend, its readiness, its end and replacement, and the
 * supervisor's own memory bound, which a kernel's output could break. */
#include "runtime/supervisor_int.h"
#include "gateway/gateway_proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

/* While the kernel has not bound all its sockets, how often they are
 * looked for besides inotify's word (which should come first). */
#define BIND_CHECK_MS 100

static void on_ready(void *arg, int rc, const kbox_error_t *err);

static int sb_alive(void *arg)
{
	sup_t *s = arg;
	return s->sb && kr_sandbox_alive(s->sb) ? 1 : 0;
}

static int sb_interrupt(void *arg, kbox_error_t *err)
{
	sup_t *s = arg;
	if (!s->sb)
		return kbox_error_set(err, KBOX_E_DEAD, "no kernel");
	return kr_sandbox_signal(s->sb, SIGINT, err);
}

/* The bytes of the regular files in DIR (not below it: outputs are
 * written at its top), 0 when it cannot be read. */
unsigned long long sup_dir_bytes(const char *dir)
{
	unsigned long long sum = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode)) {
			/* what it takes: its size or its blocks, the larger, and a
			 * block at least (as the capture counts it) */
			unsigned long long used = (unsigned long long)st.st_blocks * 512;
			if (used < (unsigned long long)st.st_size)
				used = (unsigned long long)st.st_size;
			sum += used > 4096 ? used : 4096;
		}
	closedir(d);
	return sum;
}

/* The inotify instance of S, made on first use: 0, or -1 (then nothing
 * is watched). */
static int inotify_ready(sup_t *s)
{
	if (s->ino_fd < 0)
		s->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	return s->ino_fd < 0 ? -1 : 0;
}

void sup_inotify_read(sup_t *s)
{
	union {
		struct inotify_event e;
		char buf[4096];
	} u;
	ssize_t n;
	if (s->ino_fd < 0)
		return;
	while ((n = read(s->ino_fd, u.buf, sizeof u.buf)) > 0)
		for (ssize_t off = 0; off + (ssize_t)sizeof u.e <= n;) {
			const struct inotify_event *e = (const void *)(u.buf + off);
			if (e->mask & IN_Q_OVERFLOW)
				s->outputs_changed = true; /* something was lost: count again */
			else if (e->wd == s->outputs_wd && e->wd >= 0) {
				s->outputs_changed = true;
				/* outputs/ went: watch it anew */
				if (e->mask & (IN_IGNORED | IN_MOVE_SELF)) {
					if (!(e->mask & IN_IGNORED))
						inotify_rm_watch(s->ino_fd, e->wd);
					s->outputs_wd = -1;
				}
			}
			off += (ssize_t)(sizeof *e + e->len);
		}
}

unsigned long long sup_outputs_used(sup_t *s)
{
	if (s->outputs_wd < 0 && inotify_ready(s) == 0) {
		s->outputs_wd = inotify_add_watch(s->ino_fd, s->outputs,
		                                  IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB |
		                                          IN_MOVED_FROM | IN_MOVED_TO |
		                                          IN_DELETE_SELF | IN_MOVE_SELF |
		                                          IN_ONLYDIR | IN_DONT_FOLLOW);
		s->outputs_changed = true;
	}
	sup_inotify_read(s);
	if (s->outputs_wd < 0 || s->outputs_changed) {
		s->outputs_used = sup_dir_bytes(s->outputs);
		s->outputs_changed = false;
	}
	return s->outputs_used;
}

/* Make DIR (0700, the sandbox's: ours, or under root the sandbox user's)
 * empty and private, whatever a kernel did to it. */
static int fresh_private_dir(sup_t *s, const char *dir, kbox_error_t *err)
{
	struct stat st;
	int dfd;
	bool ours;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return kbox_error_set_sys(err, "cannot create %s", dir);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return kbox_error_set_sys(err, "%s", dir);
	ours = fstat(dfd, &st) == 0 && (st.st_uid == geteuid() || st.st_uid == s->id.uid);
	if (!ours || fchmod(dfd, 0700) < 0 ||
	    (s->id.drop && fchown(dfd, s->id.uid, s->id.gid) < 0)) {
		close(dfd);
		return kbox_error_set(err, KBOX_E_INVALID, "%s is not a directory of ours", dir);
	}
	close(dfd);
	if (kx_empty_dir(dir) < 0)
		return kbox_error_set_sys(err, "cannot empty %s", dir);
	return 0;
}

/* The connection of kernel generation s->generation: its text, naming
 * the sockets as the kernel sees them (b->sockets_inside), to *TEXT_P
 * (kbox_conn_json_free), for the backend to give the kernel otherwise
 * than as a file of the host's (b->conn_inside: bwrap puts it in a tmpfs
 * of the sandbox's, none passes a memfd), so that no file of the host's
 * holds the key at any time: a process elsewhere that holds one of the
 * session's directories open (code of another sandbox, say, that had it
 * in its workspace once) finds none.  KERNEL_CONN gets the file the
 * kernel is to read, as it sees it; *CONN_P the connection, its sockets
 * named as the host reaches them once the sandbox is made (host_sockets).
 * 0 or -1 with ERR. */
static int write_conn(sup_t *s, const kr_backend_t *b, kbox_conn_t **conn_p, char *kernel_conn,
                      size_t size, char **text_p, kbox_error_t *err)
{
	kbox_conn_t *conn = NULL;
	char inside_ip[PATH_MAX], run[PATH_MAX + 16];

	/* (its names, from the session's run held open: a link swapped in
	 * for the session's directory names no other) */
	snprintf(run, sizeof run, "%s/run", s->at);
	if (!b->conn_inside || !b->sockets_inside)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "backend %s cannot give the kernel its connection file",
		                      b->name);
	if ((!b->private_sockets && fresh_private_dir(s, s->sockets_dir, err) < 0) ||
	    !(conn = kbox_conn_new_ipc(run, err))) /* (a key, and names) */
		return -1;
	kbox_conn_set_kernel_name(conn, kbox_kspec_name(s->spec));
	snprintf(inside_ip, sizeof inside_ip, "%s%s", b->sockets_inside,
	         strrchr(kbox_conn_ip(conn), '/'));
	if (kbox_conn_set_ip(conn, inside_ip, err) < 0) {
		kbox_conn_destroy(&conn);
		return -1;
	}
	if (!(*text_p = kbox_conn_json(conn))) {
		kbox_conn_destroy(&conn);
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	if (b->conn_fd)
		snprintf(kernel_conn, size, "%s", b->conn_inside);
	else
		snprintf(kernel_conn, size, "%s/kernel-%lu.json", b->conn_inside, s->generation);
	*conn_p = conn;
	return 0;
}

/* Name CONN's sockets as the supervisor reaches them, through the
 * sandbox's descriptor of their directory (s->sockets_view).  A sandbox
 * that ended before it was made has none: run/, where nothing binds (the
 * readiness wait then says how it ended).  0 or -1 with ERR. */
static int host_sockets(sup_t *s, kbox_conn_t *conn, kbox_error_t *err)
{
	char ip[PATH_MAX];
	int fd = kr_sandbox_sockets_fd(s->sb);
	if (fd >= 0)
		snprintf(s->sockets_view, sizeof s->sockets_view, "/proc/self/fd/%d", fd);
	else
		s->sockets_view[0] = '\0';
	snprintf(ip, sizeof ip, "%s%s", fd >= 0 ? s->sockets_view : s->runtime_dir,
	         strrchr(kbox_conn_ip(conn), '/'));
	return kbox_conn_set_ip(conn, ip, err);
}

/* Has the kernel bound the sockets of S->bind_conn that a readiness wait
 * uses (do the files of their ipc endpoints exist)?  Only then is a
 * connection to them accepted at once, instead of at libzmq's next
 * reconnection attempt.  Not the heartbeat's: a kernel binds it last, in
 * a thread of its own (ipykernel: tens of ms after the others), before it
 * can answer anything, and the client connects it only when it beats. */
static bool sockets_bound(const sup_t *s)
{
	struct stat st;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		if (ch == KBOX_CH_HB)
			continue;
		const char *ep = kbox_conn_endpoint(s->bind_conn, (kbox_channel_t)ch);
		if (ep && strncmp(ep, "ipc://", 6) == 0 && lstat(ep + 6, &st) < 0)
			return false;
	}
	return true;
}

/* Stop waiting for the kernel's sockets. */
static void bind_wait_end(sup_t *s)
{
	if (s->bind_timer)
		kbox_loop_cancel_timer(s->loop, s->bind_timer);
	s->bind_timer = 0;
	if (s->ino_fd >= 0)
		kbox_loop_remove_fd(s->loop, s->ino_fd);
	if (s->sockets_wd >= 0)
		inotify_rm_watch(s->ino_fd, s->sockets_wd);
	s->sockets_wd = -1;
	kbox_conn_destroy(&s->bind_conn);
}

/* Connect a client to the kernel of CONN (borrowed) and begin its
 * readiness wait, for what is left of READY_TIMEOUT_MS.  0, or -1 with
 * ERR (no client then). */
static int client_begin(sup_t *s, const kbox_conn_t *conn, kbox_error_t *err)
{
	kbox_client_hooks_t hooks = {NULL, sb_alive, s};
	long long left = sup_ready_timeout(s) - (kx_now_ms() - s->start_t0);
	if (!(s->client = kbox_client_new(conn, err)))
		return -1;
	if (s->front) { /* (the relay connects to it once it answers) */
		kbox_conn_destroy(&s->kernel_conn);
		if (!(s->kernel_conn = kbox_conn_dup(conn))) {
			kbox_client_destroy(&s->client);
			return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		}
	}
	if (kbox_kspec_interrupt_mode(s->spec) == KBOX_INTERRUPT_SIGNAL)
		hooks.interrupt = sb_interrupt;
	kbox_client_set_hooks(s->client, &hooks);
	/* (a remote kernel's server talks to it too, and so may others) */
	kbox_client_set_shared(s->client, kr_backend_remote(s->backend));
	kbox_client_set_iopub_cb(s->client, sup_on_between, s);
	if (kbox_client_attach(s->client, s->loop, err) < 0 ||
	    kbox_client_ready_begin(s->client, left > 0 ? (int)left : 1, on_ready, s, err) < 0) {
		kbox_client_destroy(&s->client);
		return -1;
	}
	return 0;
}

/* The kernel's sockets are there (or it died): connect to it now. */
static void ready_wait_begin(sup_t *s)
{
	kbox_error_t err = {0};
	kbox_conn_t *conn = s->bind_conn;
	s->bind_conn = NULL;
	bind_wait_end(s);
	if (client_begin(s, conn, &err) < 0)
		on_ready(s, -1, &err);
	kbox_conn_destroy(&conn);
}

static bool bind_watch(sup_t *s);

/* inotify saw something (a loop handler), or the check's timer: begin
 * the readiness wait once every socket is bound, or the sandbox ended. */
static int on_bind_check(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	bool alive;
	(void)loop;
	sup_inotify_read(s);
	/* the sandbox is looked at too: one that ended is reported by the
	 * readiness wait, and the docker backend takes the container's
	 * directory of sockets once the container has started: the view
	 * names another directory from then on, watched anew (what was
	 * bound before, sockets_bound sees) */
	alive = s->bind_conn && kr_sandbox_alive(s->sb);
	if (alive && s->sockets_wd >= 0) {
		int old = s->sockets_wd;
		if (bind_watch(s) && s->sockets_wd != old)
			inotify_rm_watch(s->ino_fd, old);
		else if (s->sockets_wd < 0)
			s->sockets_wd = old;
	}
	if (s->bind_conn && (!alive || sockets_bound(s))) {
		ready_wait_begin(s);
	} else if (s->bind_conn && kx_now_ms() - s->start_t0 >= sup_ready_timeout(s)) {
		/* a kernel that binds nothing (stuck, or starved of CPU) is
		 * given up as one that never answers (newcomer 12, F1: this
		 * wait had no end, and the front end gave up after 90 s saying
		 * that the supervisor did not answer) */
		kbox_error_t err = {0};
		char t[32];
		kbox_error_set(
		        &err, KBOX_E_TIMEOUT,
		        "kernel bound none of its sockets within %s (stuck, or starved of CPU)",
		        kx_fmt_ms(t, sizeof t, sup_ready_timeout(s)));
		bind_wait_end(s);
		on_ready(s, -1, &err);
	}
	return 0;
}

/* Watch the directory of the kernel's sockets for its binds (as soon as
 * the sandbox is made: the kernel has hardly begun; what it bound before
 * the watch, the check's timer sees).  false when it cannot be watched. */
static bool bind_watch(sup_t *s)
{
	if (!s->sockets_view[0] || inotify_ready(s) < 0)
		return false;
	s->sockets_wd = inotify_add_watch(s->ino_fd, s->sockets_view,
	                                  IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
	return s->sockets_wd >= 0;
}

/* Wait for the kernel to bind its sockets (CONN, taken), then connect
 * to it and begin the readiness wait; at once when the sockets directory
 * is not watched.  libzmq would connect by path before the kernel binds
 * and try again on its back-off (10 ms growing to 100), so the kernel's
 * answer would wait for that.  0, or -1 with ERR. */
static int bind_wait_begin(sup_t *s, kbox_conn_t **conn_p, kbox_error_t *err)
{
	if (s->sockets_wd < 0) {
		int rc = client_begin(s, *conn_p, err);
		kbox_conn_destroy(conn_p);
		return rc;
	}
	s->bind_conn = *conn_p;
	*conn_p = NULL;
	if (kbox_loop_add_fd(s->loop, s->ino_fd, on_bind_check, s, err) < 0 ||
	    (s->bind_timer = kbox_loop_add_timer(s->loop, BIND_CHECK_MS, true, on_bind_check, s,
	                                         err)) < 0) {
		s->bind_timer = 0;
		bind_wait_end(s);
		return -1;
	}
	return 0;
}

/* Remove the current kernel's sockets (bwrap's go with its tmpfs). */
static void remove_kernel_files(sup_t *s)
{
	if (s->sockets_dir[0])
		kx_empty_dir(s->sockets_dir);
	s->sockets_view[0] = '\0';
}

/* The gateway's remote kernels of this session, recorded from when each
 * answers until the server deleted it: one a helper could not delete
 * (the server did not answer it, or it was killed, with the supervisor
 * or alone) is deleted at the session's next kernel start, by that
 * kernel's helper.  The record: [{"url": URL, "id": ID}, ...], at most
 * REMOTE_RECORD_MAX (the oldest is forgotten past it); an older kbox's is
 * one such object. */
#define REMOTE_RECORD "gateway-kernel"
#define REMOTE_RECORD_MAX 32
/* (a URL: at most 1024 bytes, kr_gateway_url_valid; twice that escaped) */
#define REMOTE_RECORD_BYTES (REMOTE_RECORD_MAX * (2 * 1024 + 128))

/* A helper that deletes a replaced remote kernel while the next one
 * starts (the session's loop never waits on a server for it), until it
 * ends or ENDING_WAIT_MS pass (then it is killed, and the kernel stays
 * recorded). */
#define ENDING_WAIT_MS 45000
struct sup_ending {
	kr_sandbox_t *sb;
	long long deadline;
	bool killed;
	sup_ending_t *next;
};

/* A new array (NULL only when out of memory). */
static json_t *record_load(sup_t *s)
{
	char *text = malloc(REMOTE_RECORD_BYTES);
	json_t *j = NULL;
	if (text) {
		sup_read_file(s->at, REMOTE_RECORD, text, REMOTE_RECORD_BYTES);
		j = text[0] ? json_loads(text, 0, NULL) : NULL;
		free(text);
	}
	if (json_is_object(j)) {
		json_t *a = json_array();
		json_array_append_new(a, j);
		return a;
	}
	if (!json_is_array(j)) {
		json_decref(j);
		j = json_array();
	}
	return j;
}

static void record_save(sup_t *s, json_t *a)
{
	char path[PATH_MAX + 32], *text;
	snprintf(path, sizeof path, "%s/" REMOTE_RECORD, s->at);
	if (json_array_size(a) == 0)
		unlink(path);
	else if ((text = json_dumps(a, JSON_COMPACT))) {
		sup_write_file(s->at, REMOTE_RECORD, text);
		free(text);
	}
}

/* The server deleted the kernel ID: it is no longer recorded. */
static void record_drop(sup_t *s, const char *url, const char *id)
{
	json_t *a = record_load(s), *e;
	size_t i;
	if (!a)
		return;
	json_array_foreach(a, i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "id")) ?: "", id) == 0) {
			json_array_remove(a, i);
			break;
		}
	}
	record_save(s, a);
	json_decref(a);
	sup_log(s, "remote-deleted", json_pack("{s:s, s:s}", "id", id, "url", url));
}

/* What the helper of SB said of the earlier kernels it was to delete,
 * and of its own: the record follows. */
static void remote_taken(sup_t *s, kr_sandbox_t *sb)
{
	char *p, *sp, *colon;
	for (p = sb->swept; (sp = strchr(p, ' ')); p = sp + 1) {
		*sp = '\0';
		record_drop(s, sb->o.gateway_url, p);
	}
	sb->swept[0] = '\0';
	if (sb->sweep_failed[0] && (colon = strstr(sb->sweep_failed, ": "))) {
		*colon = '\0';
		sup_log(s, "remote-orphan",
		        json_pack("{s:s, s:s, s:s}", "id", sb->sweep_failed, "url",
		                  sb->o.gateway_url, "error", colon + 2));
	}
	sb->sweep_failed[0] = '\0';
	if (sb->remote_id[0] && sb->remote_deleted) {
		record_drop(s, sb->o.gateway_url, sb->remote_id);
		sb->remote_id[0] = '\0';
	}
}

/* The current remote kernel answers: recorded. */
static void remote_record(sup_t *s)
{
	json_t *a;
	/* (its status lines read: "started" names it) */
	if (!s->sb || !kr_sandbox_alive(s->sb) || !s->sb->remote_id[0])
		return;
	remote_taken(s, s->sb);
	if (!(a = record_load(s)))
		return;
	json_array_append_new(
	        a, json_pack("{s:s, s:s}", "url", s->sbo.gateway_url, "id", s->sb->remote_id));
	while (json_array_size(a) > REMOTE_RECORD_MAX)
		json_array_remove(a, 0);
	record_save(s, a);
	json_decref(a);
}

static bool ending_has(const sup_t *s, const char *id)
{
	for (const sup_ending_t *e = s->endings; e; e = e->next)
		if (strcmp(e->sb->remote_id, id) == 0)
			return true;
	return false;
}

/* The kernels the record names, but the helpers of this supervisor's
 * that still delete theirs: those on this server into IDS (each followed
 * by a space) for the next helper to delete.  One on another server (the
 * session's --url changed since) is forgotten, and the log says where it
 * is: the token kbox has is this server's, not to be sent to another
 * (nor is the supervisor to wait on a server it no longer uses). */
static void remote_sweep(sup_t *s, char *ids, size_t size)
{
	json_t *a = record_load(s), *e;
	size_t i, used = 0;
	bool changed = false;
	ids[0] = '\0';
	if (!a)
		return;
	json_array_foreach(a, i, e)
	{
		const char *url = json_string_value(json_object_get(e, "url"));
		const char *id = json_string_value(json_object_get(e, "id"));
		if (!url || !id || !*id || strlen(id) >= sizeof s->sb->remote_id ||
		    strchr(id, ' ')) {
			json_array_remove(a, i--);
			changed = true;
		} else if (ending_has(s, id))
			;
		else if (strcmp(url, s->sbo.gateway_url) == 0) {
			if (used + strlen(id) + 2 <= size)
				used += (size_t)snprintf(ids + used, size - used, "%s ", id);
		} else {
			sup_log(s, "remote-orphan",
			        json_pack("{s:s, s:s, s:s}", "id", id, "url", url, "error",
			                  "left on a server the session no longer uses (its URL "
			                  "changed): kbox has no token of that server's; delete "
			                  "the kernel there"));
			json_array_remove(a, i--);
			changed = true;
		}
	}
	if (changed)
		record_save(s, a);
	json_decref(a);
}

/* The end of an ending helper: the record follows what it said. */
static void ending_free(sup_t *s, sup_ending_t *e)
{
	kr_sandbox_stop(e->sb, STOP_STEP_MS); /* (it ended: its cleanup only) */
	remote_taken(s, e->sb);
	if (e->sb->remote_id[0]) { /* (kept in the record) */
		char why[400];
		if (e->killed)
			snprintf(why, sizeof why,
			         "its helper did not end within %d s of the kernel's replacement, "
			         "and was killed",
			         ENDING_WAIT_MS / 1000);
		else
			snprintf(why, sizeof why,
			         "its helper could not delete it (the server did not answer, or "
			         "refused; kernel.log says why): it stays recorded, and the "
			         "session's next kernel start deletes it");
		sup_log(s, "remote-orphan",
		        json_pack("{s:s, s:s, s:s}", "id", e->sb->remote_id, "url",
		                  e->sb->o.gateway_url, "error", why));
	}
	kr_sandbox_destroy(&e->sb);
	free(e);
}

/* Hand the current remote kernel's end to its helper (it deletes the
 * kernel), to be waited for by sup_endings_check: true, or false when it
 * is to be ended here. */
static bool ending_begin(sup_t *s)
{
	sup_ending_t *e;
	if (!kr_sandbox_alive(s->sb) || !(e = calloc(1, sizeof *e)))
		return false;
	kr_sandbox_signal(s->sb, SIGTERM, NULL); /* "remove" */
	e->sb = s->sb;
	e->deadline = kx_now_ms() + ENDING_WAIT_MS;
	e->next = s->endings;
	s->endings = e;
	s->sb = NULL;
	return true;
}

void sup_endings_check(sup_t *s)
{
	sup_ending_t **p = &s->endings;
	while (*p) {
		sup_ending_t *e = *p;
		if (!kr_sandbox_alive(e->sb)) {
			*p = e->next;
			ending_free(s, e);
			continue;
		}
		if (!e->killed && kx_now_ms() >= e->deadline) {
			kill(e->sb->pid, SIGKILL);
			e->killed = true;
		}
		p = &e->next;
	}
}

void sup_endings_finish(sup_t *s)
{
	while (s->endings) {
		sup_ending_t *e = s->endings;
		long long left = e->deadline - kx_now_ms();
		/* (the session stops: what is left of their time is waited) */
		if (!kr_sandbox_wait_end(e->sb, left > 0 ? (int)left : 0))
			kill(e->sb->pid, SIGKILL);
		s->endings = e->next;
		ending_free(s, e);
	}
}

long long sup_ready_timeout(const sup_t *s)
{
	/* (a local kernel has the launch timeout to answer, when given; a
	 * remote one has it to be launched by its server, and more) */
	if (strcmp(s->backend, "gateway") != 0)
		return s->sbo.launch_s > 0 ? 1000LL * s->sbo.launch_s : READY_TIMEOUT_MS;
	return READY_TIMEOUT_MS +
	       1000LL * (s->sbo.launch_s > 0 ? s->sbo.launch_s : KG_LAUNCH_TIMEOUT_S);
	return READY_TIMEOUT_MS;
}

/* Start a kernel (generation + 1) and begin waiting for it to answer.
 * 0, or -1 with ERR (nothing left running). */
int sup_kernel_start(sup_t *s, kbox_error_t *err)
{
	const kr_backend_t *b = kr_backend_find(s->backend);
	kbox_conn_t *conn = NULL;
	char gen[32], kernel_conn[PATH_MAX + 64], *conn_text = NULL;
	char sweep[REMOTE_RECORD_MAX * 81];

	if (!b)
		return kbox_error_set(err, KBOX_E_NOTFOUND, "unknown backend \"%s\"", s->backend);
	s->starting = true;
	s->ready = false;
	s->start_t0 = kx_now_ms();
	s->generation++;
	snprintf(gen, sizeof gen, "%lu\n", s->generation);
	sup_write_file(s->at, "generation", gen);
	if ((kr_backend_sandboxed(s->backend) &&
	     kr_session_share(s->dir_fd, s->dir, &s->id, err) < 0) ||
	    write_conn(s, b, &conn, kernel_conn, sizeof kernel_conn, &conn_text, err) < 0 ||
	    (s->sbo.log_fd = kr_kernel_log_pipe(s->klog, s->loop, err)) < 0)
		goto fail;
	s->sbo.conn_text = conn_text;
	s->sbo.conn_path = conn_text ? kernel_conn : NULL;
	s->sbo.generation = s->generation;
	if (strcmp(s->backend, "gateway") == 0) {
		remote_sweep(s, sweep, sizeof sweep);
		s->sbo.gateway_sweep = sweep;
	}
	s->sbo.gateway_token = s->gateway_token;
	s->sb = kr_sandbox_start(s->backend, s->spec, &s->sbo, kernel_conn, err);
	s->sbo.gateway_token = s->sbo.gateway_sweep = NULL;
	s->sbo.conn_text = s->sbo.conn_path = NULL;
	kbox_conn_json_free(&conn_text);
	close(s->sbo.log_fd); /* the kernel's now, and only the kernel's */
	s->sbo.log_fd = -1;
	if (!s->sb || host_sockets(s, conn, err) < 0)
		goto fail;
	bind_watch(s);
	sup_log(s, "start",
	        /* (the process the backend started: bubblewrap's, or the
	         * container's helper, whether or not the kernel under it is
	         * found yet; and docker's container) */
	        json_pack("{s:s, s:s, s:I, s:I, s:s*}", "backend", s->backend, "kernel", s->kernel,
	                  "pid", (json_int_t)s->sb->pid, "generation", (json_int_t)s->generation,
	                  "container", s->sb->container[0] ? s->sb->container : NULL));
	if (*kr_sandbox_limits(s->sb))
		sup_log(s, "limits",
		        json_pack("{s:s, s:s}", "applied", kr_sandbox_limits(s->sb), "missing",
		                  kr_sandbox_limits_missing(s->sb)));
	s->shedding = false; /* a new client does not shed; the check says when to */
	if (bind_wait_begin(s, &conn, err) < 0)
		goto fail;
	return 0;
fail:
	kbox_conn_json_free(&conn_text);
	bind_wait_end(s);
	kbox_conn_destroy(&conn);
	kbox_client_destroy(&s->client);
	kr_sandbox_destroy(&s->sb);
	kr_kernel_log_close(s->klog);
	remove_kernel_files(s);
	s->starting = false;
	return -1;
}

/* End the current kernel (gracefully when GRACEFUL and it answers) and
 * forget it. */
void sup_kernel_end(sup_t *s, bool graceful)
{
	bind_wait_end(s);
	sup_relay_end(s);
	if (s->client) {
		kbox_client_detach(s->client);
		/* (a remote kernel's graceful end is its server's, at the
		 * DELETE: a shutdown_request of ours would have the server
		 * restart it meanwhile) */
		if (graceful && s->ready && s->sb && kr_sandbox_alive(s->sb) &&
		    strcmp(s->backend, "gateway") != 0) {
			kbox_msg_t *r = kbox_client_shutdown(s->client, false, SHUTDOWN_WAIT_MS,
			                                     NULL);
			if (r)
				kr_sandbox_wait_end(s->sb, STOP_STEP_MS);
			kbox_msg_destroy(&r);
		}
		kbox_client_destroy(&s->client);
	}
	/* a remote kernel replaced is deleted by its helper meanwhile (a
	 * server that does not answer must not hold the session up) */
	if (s->sb && !(s->replacing && kr_backend_find(s->backend)->remote && ending_begin(s))) {
		kr_sandbox_stop(s->sb, STOP_STEP_MS);
		remote_taken(s, s->sb);
		kr_sandbox_destroy(&s->sb);
	}
	kr_kernel_log_close(s->klog); /* its last words */
	remove_kernel_files(s);
	s->ready = s->starting = false;
}

void sup_report_ready(sup_t *s, json_t *j)
{
	if (s->ready_fd >= 0) {
		kr_ctl_send(s->ready_fd, j, NULL);
		close(s->ready_fd);
		s->ready_fd = -1;
	}
	json_decref(j);
}

/* Why the kernel could not start: ERR's message, or the cause when the
 * kernel ended, pointing at its log; then the last lines the kernel wrote
 * (its stderr: R's, Python's traceback), START_TAIL_LINES of them.  The
 * length of what comes before those lines. */
#define START_TAIL_LINES 10
static size_t start_failure(sup_t *s, const kbox_error_t *err, char *buf, size_t size)
{
	kbox_error_t perr = {0};
	kr_bwrap_opts_t bo = {0};
	char tail[1600];
	size_t n;
	bo.rootfs = s->sbo.rootfs;
	kr_kernel_log_flush(s->klog); /* what it said is in the log */
	/* the kernel never ran because bwrap cannot make a sandbox here (no
	 * user namespaces, say): bwrap's own words, from a probe */
	if (s->sb && !kr_sandbox_alive(s->sb) && strcmp(s->backend, "bwrap") == 0 &&
	    kr_bwrap_probe(&bo, &perr) < 0) {
		snprintf(buf, size, "backend bwrap: %s (see kbox doctor)", perr.msg);
		sup_utf8_cut(buf);
		return strlen(buf);
	}
	if (s->sb && !kr_sandbox_alive(s->sb) && kr_sandbox_never_ran(s->sb))
		snprintf(buf, size, "%s", kr_sandbox_cause(s->sb));
	else if (s->sb && !kr_sandbox_alive(s->sb) && s->ephemeral)
		/* kbox run's session and its log go when it stops: no path */
		snprintf(buf, size, "%s before it was ready", kr_sandbox_cause(s->sb));
	else if (s->sb && !kr_sandbox_alive(s->sb))
		kx_msgf(buf, size, "%s before it was ready (see %s)", kr_sandbox_cause(s->sb),
		        s->log_path);
	else
		snprintf(buf, size, "%s",
		         err && err->msg[0] ? err->msg : "the kernel did not start");
	kr_kernel_log_tail(s->klog, START_TAIL_LINES, tail, sizeof tail);
	n = strlen(buf);
	if (tail[0])
		snprintf(buf + n, size - n, "; its last lines:\n%s", tail);
	sup_utf8_cut(buf);
	return n < strlen(buf) ? n : strlen(buf);
}

static void on_ready(void *arg, int rc, const kbox_error_t *err)
{
	sup_t *s = arg;
	s->starting = false;
	if (s->replacing) /* this kernel is being replaced anyway */
		return;
	if (rc < 0) {
		char why[2400], full[2500];
		const char *what = s->ready_fd >= 0 ? "start" : "be restarted";
		int head = (int)start_failure(s, err, why, sizeof why);
		sup_kernel_end(s, false);
		/* the kernel's last lines go to who waits for it, not into the
		 * session's stop cause */
		snprintf(full, sizeof full, "the kernel could not %s: %s", what, why);
		sup_utf8_cut(full);
		snprintf(s->stop_cause, sizeof s->stop_cause, "the kernel could not %s: %.*s", what,
		         head, why);
		sup_utf8_cut(s->stop_cause);
		if (s->ready_fd >= 0) {
			s->start_failed = true;
			sup_report_ready(s, json_pack("{s:b, s:s}", "ok", 0, "error", why));
		}
		sup_answer_pending(s, KR_CTL_ERR_KERNEL, full);
		sup_stop(s);
		return;
	}
	if (s->front) {
		kbox_error_t rerr = {0};
		if (sup_relay_begin(s, &rerr) < 0) {
			kx_msgf(s->stop_cause, sizeof s->stop_cause,
			        "the relay could not start: %s", rerr.msg);
			sup_utf8_cut(s->stop_cause);
			s->start_failed = true;
			sup_report_ready(s,
			                 json_pack("{s:b, s:s}", "ok", 0, "error", s->stop_cause));
			sup_stop(s);
			return;
		}
	}
	s->ready = true;
	s->kernel_started_ms = kx_now_ms();
	remote_record(s);
	malloc_trim(0); /* what the kernel before this one left in the heap */
	sup_touch(s);
	sup_log(s, "ready",
	        json_pack("{s:I, s:I, s:I}", "pid", (json_int_t)kr_sandbox_pid(s->sb), "generation",
	                  (json_int_t)s->generation, "ms",
	                  (json_int_t)(kx_now_ms() - s->start_t0)));
	sup_report_ready(s, json_pack("{s:b, s:I, s:I}", "ok", 1, "pid", (json_int_t)getpid(),
	                              "kernel_pid", (json_int_t)kr_sandbox_pid(s->sb)));
	sup_answer_pending(s, KR_CTL_ERR_UNKNOWN, NULL);
	sup_dispatch_soon(s);
}

/* Would one more death the session did not ask for be one too many (see
 * sup_kernel_replace)? */
bool sup_crash_limit_next(const sup_t *s)
{
	long long now = kx_now_ms();
	int recent = 1;
	for (int i = 1; i < CRASH_MAX; i++)
		recent += s->crashes[i] && now - s->crashes[i] < CRASH_WINDOW_MS;
	return recent >= CRASH_MAX;
}

/* The kernel is gone, or is being replaced, for CAUSE: end what ran on it,
 * remember why for the next execution, and start a new one unless it
 * keeps dying.  0, or -1 when the session has to stop (stop_cause set). */
int sup_kernel_replace(sup_t *s, const char *cause, bool requested)
{
	kbox_error_t err = {0};
	long long now = kx_now_ms();
	int recent = 0;

	snprintf(s->last_cause, sizeof s->last_cause, "%s", cause);
	sup_utf8_cut(s->last_cause);
	if (s->front) {
		/* a front end's kernel is not replaced here: the session ends,
		 * and the front end, seeing kbox kernel end, starts another */
		sup_kernel_end(s, false);
		if (s->relay_shutdown)
			snprintf(s->stop_cause, sizeof s->stop_cause,
			         "the kernel shut down at the front end's request%s",
			         s->relay_restart ? " (to restart)" : "");
		else
			kx_msgf(s->stop_cause, sizeof s->stop_cause, "the kernel ended: %s", cause);
		sup_utf8_cut(s->stop_cause);
		return -1;
	}
	s->replacing = true;
	if (s->client)
		kbox_client_fail_pending(s->client, cause); /* the running job's callback runs */
	sup_kernel_end(s, false);
	s->replacing = false;
	/* what is lost, named when the kernel said it (kbox_vars) */
	snprintf(s->notice, sizeof s->notice,
	         "kernel restarted: %s; earlier state (variables, imports, loaded data) is "
	         "lost%s%s",
	         cause, s->vars[0] ? "; it had defined: " : "", s->vars);
	s->vars[0] = '\0';
	sup_utf8_cut(s->notice);
	sup_log(s, "restart",
	        json_pack("{s:s, s:I, s:b}", "cause", cause, "generation",
	                  (json_int_t)s->generation, "requested", requested));
	s->restarts++;
	if (!requested) {
		memmove(s->crashes, s->crashes + 1, sizeof s->crashes - sizeof s->crashes[0]);
		s->crashes[CRASH_MAX - 1] = now;
		for (int i = 0; i < CRASH_MAX; i++)
			recent += s->crashes[i] && now - s->crashes[i] < CRASH_WINDOW_MS;
		if (recent >= CRASH_MAX) {
			kx_msgf(s->stop_cause, sizeof s->stop_cause,
			        "the kernel died %d times within %d s; last: %s", CRASH_MAX,
			        CRASH_WINDOW_MS / 1000, cause);
			return -1;
		}
	}
	if (sup_kernel_start(s, &err) < 0) {
		kx_msgf(s->stop_cause, sizeof s->stop_cause,
		        "the kernel could not be restarted: %s", err.msg);
		return -1;
	}
	return 0;
}

/* Has the kernel ended?  Then replace it (or stop the session). */
int sup_on_kernel_check(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	char cause[512];
	(void)loop;
	if (s->stopping || !s->sb || kr_sandbox_alive(s->sb))
		return 0;
	if (s->starting) {
		/* the client's ready wait reports it (the alive hook), begun
		 * now if it waited for the sockets */
		if (s->bind_conn)
			ready_wait_begin(s);
		return 0;
	}
	/* killed by us (an execution that would not stop) or died */
	bool requested = s->kill_cause[0] != '\0';
	kx_msgf(cause, sizeof cause, "%s", requested ? s->kill_cause : kr_sandbox_cause(s->sb));
	s->kill_cause[0] = '\0';
	if (sup_kernel_replace(s, cause, requested) < 0) {
		sup_answer_pending(s, KR_CTL_ERR_KERNEL, s->stop_cause);
		sup_stop(s);
	}
	return 0;
}

void sup_kernel_check_soon(sup_t *s)
{
	kbox_loop_add_timer(s->loop, 0, false, sup_on_kernel_check, s, NULL);
}

/* This process's resident memory in bytes, -1 when unknown. */
static long long self_rss(void)
{
	static int fd = -2;
	char buf[128];
	long long size, resident;
	ssize_t n;
	if (fd == -2)
		fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (n = pread(fd, buf, sizeof buf - 1, 0)) <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%lld %lld", &size, &resident) != 2)
		return -1;
	return resident * sysconf(_SC_PAGESIZE);
}

/* Over MEMORY_HIGH: what the kernel sent is what grew (libzmq takes in a
 * message of many frames whole before anyone sees it), so the kernel is
 * stopped and replaced, and its connection's buffers go with it.  Both
 * bounds judge the kernel's data alone: what waits for slow clients on
 * the control socket (its own bound, KR_CTL_OUT_TOTAL_MAX; see
 * sup_conn_send) is not counted. */
static int on_memory_check(kbox_loop_t *loop, void *arg)
{
	sup_t *s = arg;
	(void)loop;
	long long all = self_rss(), backlog = (long long)s->out_total;
	long long rss = all < 0 ? all : all > backlog ? all - backlog : 0;
	char cause[256], have[32], bound[32];
	if (rss >= 0 && rss < MEMORY_HIGH && (s->client || s->relay)) {
		bool shed = s->shedding ? rss >= MEMORY_SHED / 2 : rss >= MEMORY_SHED;
		if (shed != s->shedding) {
			s->shedding = shed;
			if (s->client)
				kbox_client_set_shedding(s->client, shed);
			if (s->relay)
				kbox_relay_set_shedding(s->relay, shed);
			sup_log(s, shed ? "shedding" : "shedding-end",
			        json_pack("{s:I, s:I}", "rss", (json_int_t)all, "ctl_backlog",
			                  (json_int_t)backlog));
		}
		if (!shed && s->was_shedding) {
			s->was_shedding = false;
			malloc_trim(0);
		}
		s->was_shedding |= shed;
	}
	if (rss < MEMORY_HIGH || !s->sb || s->stopping)
		return 0;
	kx_fmt_bytes(have, sizeof have, rss);
	kx_fmt_bytes(bound, sizeof bound, MEMORY_HIGH);
	snprintf(cause, sizeof cause,
	         "it sent more than its supervisor may hold (%s in memory, over the bound of %s), "
	         "so the kernel was killed",
	         have, bound);
	sup_log(s, "memory",
	        json_pack("{s:I, s:I, s:I}", "rss", (json_int_t)all, "ctl_backlog",
	                  (json_int_t)backlog, "bound", (json_int_t)MEMORY_HIGH));
	kr_sandbox_signal(s->sb, SIGKILL, NULL);
	if (sup_kernel_replace(s, cause, false) < 0) {
		sup_answer_pending(s, KR_CTL_ERR_KERNEL, s->stop_cause);
		sup_stop(s);
	}
	malloc_trim(0);
	return 0;
}

/* The supervisor's memory bound: a cgroup of its own with MEMORY_MAX when
 * one can be made (moving in costs a few ms, so this runs while the
 * first kernel starts), and the check of MEMORY_HIGH.  Sanitizer builds,
 * whose memory is several times larger, have no cgroup, and bounds
 * MEMORY_SCALE times higher. */
void sup_memory_bound(sup_t *s)
{
	const char *name = json_string_value(json_object_get(s->config, "name"));
	char cg[160], why[512] = "no cgroup in a sanitizer build", high[32], max[32];
	snprintf(cg, sizeof cg, "kbox-%s-%ld-supervisor", name ? name : "sandbox", (long)getpid());
	if (MEMORY_SCALE == 1)
		s->cg = kr_cgroup_new(cg, KR_CG_MEMORY, MEMORY_MAX, 0, 0, why, sizeof why);
	if (s->cg && kr_cgroup_enter(s->cg) < 0) {
		snprintf(why, sizeof why, "cannot move into its cgroup: %s", strerror(errno));
		kr_cgroup_leave(s->cg);
		kr_cgroup_destroy(&s->cg);
	}
	kx_fmt_bytes(high, sizeof high, MEMORY_HIGH);
	kx_fmt_bytes(max, sizeof max, MEMORY_MAX);
	sup_log(s, "supervisor-memory",
	        json_pack("{s:s, s:s?, s:s?}", "kernel_stopped_over", high, "killed_over",
	                  s->cg ? max : NULL, "no_cgroup", s->cg ? NULL : why));
	kbox_loop_add_timer(s->loop, MEMORY_CHECK_MS, true, on_memory_check, s, NULL);
}
