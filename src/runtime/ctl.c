/* src/runtime/ctl.c — the client side of the control socket (ctl.h):
 * the socket, its lines, one request, and an execution's exchange. */
#include "runtime/runtime.h"
#include "runtime/ctl.h"
#include "runtime/session.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

/* The path of DIR/control.sock into SA (kx_unix_path: *DFD_P, when it
 * ends >= 0, is the caller's to close).  0, or -1 with ERR and errno. */
static int sock_path(struct sockaddr_un *sa, const char *dir, int *dfd_p, kbox_error_t *err)
{
	if (kx_unix_path(sa->sun_path, sizeof sa->sun_path, dir, "control.sock", dfd_p) == 0)
		return 0;
	if (*dfd_p >= 0) /* DIR is open: the name is what is too long */
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "control.sock: the name is too long for a unix socket");
	return kbox_error_set_sys(err, "directory %s", dir);
}

/* SO_PEERPIDFD (Linux 6.5): a pidfd of the process that connected, where
 * the C library's headers are older than the kernel; the value is
 * asm-generic's, which these architectures use. */
#if !defined(SO_PEERPIDFD) &&                                                                    \
        (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__arm__) || \
         defined(__riscv) || defined(__s390x__) || defined(__loongarch__))
#define SO_PEERPIDFD 77
#endif

/* Whether the process PIDFD, PID in our pid namespace (the peer's
 * credentials give both), is in our user namespace: /proc/PID/ns/user
 * against ours, trusted only when the pidfd says the process still runs
 * after the look (so that PID was not taken by another meanwhile).
 * KR_CTL_PEER_OURS; KR_CTL_PEER_GONE when it has exited; else (one in a
 * pid namespace we cannot see: PID 0) KR_CTL_PEER_FOREIGN. */
static kr_ctl_peer_t pidfd_in_our_userns(int pidfd, pid_t pid)
{
	static struct stat self; /* (ours does not change) */
	char path[64];
	struct stat peer;

	if (pid <= 0)
		return KR_CTL_PEER_FOREIGN;
	if (!self.st_ino && stat("/proc/self/ns/user", &self) < 0) {
		self.st_ino = 0;
		return KR_CTL_PEER_FOREIGN;
	}
	snprintf(path, sizeof path, "/proc/%ld/ns/user", (long)pid);
	if (stat(path, &peer) < 0)
		return errno == ENOENT || errno == ESRCH ? KR_CTL_PEER_GONE : KR_CTL_PEER_FOREIGN;
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0 && errno == ESRCH)
		return KR_CTL_PEER_GONE;
	return peer.st_dev == self.st_dev && peer.st_ino == self.st_ino ? KR_CTL_PEER_OURS
	                                                                : KR_CTL_PEER_FOREIGN;
}

kr_ctl_peer_t kr_ctl_peer(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof cr;
	int pidfd = -1;
	kr_ctl_peer_t verdict;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.uid != geteuid())
		return KR_CTL_PEER_FOREIGN;
#ifdef SO_PEERPIDFD
	len = sizeof pidfd;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
		pidfd = -1;
#endif
	if (pidfd < 0 && cr.pid > 0) {
		pidfd = (int)syscall(SYS_pidfd_open, cr.pid, 0);
		if (pidfd < 0 && errno == ESRCH)
			return KR_CTL_PEER_GONE;
	}
	if (pidfd < 0)
		return KR_CTL_PEER_FOREIGN;
	verdict = pidfd_in_our_userns(pidfd, cr.pid);
	close(pidfd);
	return verdict;
}

int kr_ctl_connect(const char *dir, kbox_error_t *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd = -1, dfd, e;
	/* the socket in the directory as opened here, whose identity the
	 * session line gives: the supervisor of another directory (one
	 * renamed away, say, whose socket was put here) refuses it; reached
	 * through no link below the state directory (kx_open_path), as it
	 * was resolved: a link swapped in there since leads to another */
	if ((dfd = kx_open_path(AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0)) < 0 ||
	    fstat(dfd, &st) < 0) {
		e = errno;
		if (e == ENOTDIR || e == ELOOP) /* (a link there, in place of it) */
			kbox_error_set(
			        err, KBOX_E_INVALID,
			        "session directory %s: it, or a directory above it, is not a "
			        "directory (a symbolic link, say): something else put it "
			        "there; nothing was sent",
			        dir);
		else
			kbox_error_set_sys(err, "directory %s", dir);
		if (e == ENOENT && err)
			err->code = KBOX_E_NOTFOUND;
		goto out;
	}
	snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/control.sock", dfd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		kbox_error_set_sys(err, "socket");
		goto out;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		e = errno;
		kx_close(&fd);
		if (e == ENOENT || e == ECONNREFUSED)
			kbox_error_set(err, KBOX_E_NOTFOUND,
			               "no supervisor answers on %s/control.sock", dir);
		else
			kbox_error_set_sys(err, "cannot connect to %s/control.sock", dir);
		goto out;
	}
	switch (kr_ctl_peer(fd)) {
	case KR_CTL_PEER_OURS: {
		/* say which session is meant, ahead of the request: another
		 * session's supervisor (its socket, or a link to it, put here)
		 * answers that with an error and reads nothing after it */
		json_t *hello = json_pack("{s:s, s:s, s:I, s:I}", "op",
		                          kr_ctl_op_name(KR_CTL_OP_SESSION), "dir", dir, "dev",
		                          (json_int_t)st.st_dev, "ino", (json_int_t)st.st_ino);
		if (!hello) {
			kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
			kx_close(&fd);
		} else /* (a supervisor that closed at once, too many connections,
		        * say: the caller's request fails the same way and reads
		        * why, kr_ctl_refusal, as it would without this line) */
			(void)kr_ctl_send(fd, hello, NULL);
		json_decref(hello);
		break;
	}
	case KR_CTL_PEER_GONE: /* a supervisor that has just ended */
		kx_close(&fd);
		kbox_error_set(err, KBOX_E_NOTFOUND, "no supervisor answers on %s/control.sock",
		               dir);
		break;
	case KR_CTL_PEER_FOREIGN:
		kx_close(&fd);
		kbox_error_set(err, KBOX_E_INVALID,
		               "%s/control.sock is not a supervisor's of this user: the process "
		               "listening there is another user's, or in another user namespace "
		               "(code in a sandbox that can reach this state directory); nothing "
		               "was sent to it. Stop using this state directory (kbox(7), threat "
		               "44)",
		               dir);
		break;
	}
out:
	kx_close(&dfd);
	return fd;
}

int kr_ctl_listen(const char *dir, kbox_error_t *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char path[PATH_MAX];
	int fd = -1, dfd = -1;
	snprintf(path, sizeof path, "%s/control.sock", dir);
	unlink(path); /* stale: the caller holds the supervisor lock */
	if (sock_path(&sa, dir, &dfd, err) < 0)
		goto out;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		kbox_error_set_sys(err, "socket");
		goto out;
	}
	/* made 0600 as it is bound, not chmod'ed after by its path: a link
	 * renamed over it in between would have its target chmod'ed (review
	 * 18, W18-5) */
	{
		mode_t old = umask(0177);
		int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa), e = errno;
		umask(old);
		errno = e;
		if (rc < 0) {
			kbox_error_set_sys(err, "cannot bind %s", path);
			kx_close(&fd);
			goto out;
		}
	}
	if (listen(fd, 64) < 0)
		kbox_error_set_sys(err, "cannot listen on %s", path);
	else
		goto out;
	kx_close(&fd);
out:
	kx_close(&dfd);
	return fd;
}

int kr_ctl_send(int fd, const json_t *msg, kbox_error_t *err)
{
	return kr_ctl_send_fd(fd, msg, -1, err);
}

int kr_ctl_send_fd(int fd, const json_t *msg, int pass_fd, kbox_error_t *err)
{
	char *line = json_dumps(msg, JSON_COMPACT | JSON_REAL_PRECISION(9));
	size_t len, off = 0;
	int rc = 0;
	if (!line)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	len = strlen(line);
	line[len++] = '\n';
	while (off < len) {
		ssize_t w;
		if (pass_fd >= 0 && off == 0) {
			union {
				struct cmsghdr h;
				char buf[CMSG_SPACE(sizeof(int))];
			} u;
			struct iovec iov = {line, len};
			struct msghdr mh = {0};
			struct cmsghdr *c;
			memset(&u, 0, sizeof u);
			mh.msg_iov = &iov;
			mh.msg_iovlen = 1;
			mh.msg_control = u.buf;
			mh.msg_controllen = sizeof u.buf;
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
			w = sendmsg(fd, &mh, MSG_NOSIGNAL);
		} else
			w = send(fd, line + off, len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			bool closed = errno == EPIPE || errno == ECONNRESET;
			rc = kbox_error_set_sys(err, "control socket: send");
			/* the supervisor closed it (or its listening socket, with
			 * the connection still waiting to be taken): gone */
			if (closed && err)
				err->code = KBOX_E_DEAD;
			break;
		}
		off += (size_t)w;
	}
	free(line);
	return rc;
}

/* kr_ctl_wait_signals's. */
static struct {
	bool on;
	sigset_t mask;
	bool (*hook)(void *arg);
	void *arg;
} waits;

void kr_ctl_wait_signals(const sigset_t *mask, bool (*hook)(void *arg), void *arg)
{
	waits.on = mask != NULL;
	if (mask)
		waits.mask = *mask;
	waits.hook = mask ? hook : NULL;
	waits.arg = mask ? arg : NULL;
}

/* Wait until FD is readable or DEADLINE (kx_now_ms; 0: none) passes,
 * letting in the signals of kr_ctl_wait_signals.  1 readable, 0 the
 * deadline passed, -1 with ERR. */
static int wait_readable(int fd, long long deadline, kbox_error_t *err)
{
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		struct timespec ts;
		int wait = -1;
		if (deadline) {
			long long left = deadline - kx_now_ms();
			wait = left > 0 ? (int)(left < INT_MAX ? left : INT_MAX) : 0;
		}
		ts.tv_sec = wait / 1000;
		ts.tv_nsec = (long)(wait % 1000) * 1000000L;
		if (waits.hook && waits.hook(waits.arg))
			return kbox_error_set(err, KBOX_E_SYSTEM, KR_CTL_WAIT_ENDED);
		if (ppoll(&p, 1, wait < 0 ? NULL : &ts, waits.on ? &waits.mask : NULL) < 0) {
			if (errno == EINTR)
				continue;
			return kbox_error_set_sys(err, "control socket: poll");
		}
		if (p.revents)
			return 1;
		if (deadline && kx_now_ms() >= deadline)
			return 0;
	}
}

/* One line of FD, as kr_ctl_recv reads it. */
static json_t *recv_line(int fd, int timeout_ms, kbox_error_t *err)
{
	char *buf = NULL;
	size_t len = 0;
	long long deadline = timeout_ms < 0 ? 0 : kx_now_ms() + timeout_ms;
	json_error_t je;
	json_t *j;

	if (deadline == 0 && timeout_ms == 0) /* (the clock at 0: never) */
		deadline = 1;
	for (;;) {
		char peek[4096], *nl;
		ssize_t n;
		int r = wait_readable(fd, deadline, err);
		if (r < 0)
			goto fail;
		if (r == 0) {
			kbox_error_set(err, KBOX_E_TIMEOUT,
			               "the supervisor did not answer within %d ms", timeout_ms);
			goto fail;
		}
		n = recv(fd, peek, sizeof peek, MSG_PEEK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != ECONNRESET) {
			kbox_error_set_sys(err, "control socket: recv");
			goto fail;
		}
		if (n <= 0) { /* ECONNRESET: it closed with our request unread */
			kbox_error_set(err, KBOX_E_DEAD,
			               "the supervisor closed the control connection");
			goto fail;
		}
		nl = memchr(peek, '\n', (size_t)n);
		if (nl)
			n = nl - peek + 1;
		if (len + (size_t)n > KR_CTL_LINE_MAX) {
			kbox_error_set(err, KBOX_E_PROTOCOL,
			               "control socket: line longer than %d bytes",
			               KR_CTL_LINE_MAX);
			goto fail;
		}
		{
			char *nb = realloc(buf, len + (size_t)n + 1);
			if (!nb) {
				kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
				goto fail;
			}
			buf = nb;
		}
		n = recv(fd, buf + len, (size_t)n, 0);
		if (n <= 0) {
			kbox_error_set(err, KBOX_E_DEAD,
			               "the supervisor closed the control connection");
			goto fail;
		}
		len += (size_t)n;
		if (buf[len - 1] == '\n')
			break;
	}
	buf[len - 1] = '\0';
	/* output may hold NUL characters: they are text like any other */
	j = json_loadb(buf, len - 1, JSON_ALLOW_NUL, &je);
	if (!j || !json_is_object(j)) {
		json_decref(j);
		kbox_error_set(err, KBOX_E_PROTOCOL, "control socket: not a JSON object: %s",
		               je.text);
		goto fail;
	}
	free(buf);
	return j;
fail:
	free(buf);
	return NULL;
}

/* Whether J is the answer of a supervisor older than the session line
 * (kr_ctl_connect) to it: an unknown op, which it answers and reads on
 * after, as a supervisor kbox started before an upgrade does. */
static bool predates_session_op(const json_t *j)
{
	const char *why = json_string_value(json_object_get(j, "error"));
	return json_is_false(json_object_get(j, "ok")) &&
	       kr_ctl_op_parse(json_string_value(json_object_get(j, "re"))) == KR_CTL_OP_SESSION &&
	       kr_ctl_err_kind(j) == KR_CTL_ERR_USAGE && why &&
	       strncmp(why, "unknown op ", 11) == 0;
}

json_t *kr_ctl_recv(int fd, int timeout_ms, kbox_error_t *err)
{
	long long end = timeout_ms < 0 ? 0 : kx_now_ms() + timeout_ms;
	for (;;) {
		long long left = timeout_ms < 0 ? -1 : end - kx_now_ms();
		json_t *j = recv_line(fd, left < 0 && timeout_ms >= 0 ? 0 : (int)left, err);
		if (!j || !predates_session_op(j))
			return j;
		json_decref(j);
	}
}

json_t *kr_ctl_refusal(int fd)
{
	/* it is there already: it was written before the close */
	return kr_ctl_recv(fd, 0, NULL);
}

/* Whether the supervisor of DIR answers a status request within
 * KR_CTL_PROBE_MS: false only when it is there (its socket takes the
 * connection) and says nothing; a refusal is an answer, and a socket gone
 * is a supervisor that stops or went away, which the waiting connection
 * will hear of itself. */
static bool supervisor_answers(const char *dir)
{
	json_t *req = json_pack("{s:s}", "op", kr_ctl_op_name(KR_CTL_OP_STATUS)), *r = NULL;
	kbox_error_t err = {0};
	int fd = req ? kr_ctl_connect(dir, &err) : -1;
	if (fd >= 0) {
		if (kr_ctl_send(fd, req, &err) < 0)
			r = kr_ctl_refusal(fd);
		else
			r = kr_ctl_recv(fd, KR_CTL_PROBE_MS, &err);
		close(fd);
	}
	json_decref(req);
	json_decref(r);
	return r || err.code != KBOX_E_TIMEOUT;
}

/* The error of a supervisor that does not answer: WHAT ("a status
 * request": supervisor_answers; "": the request itself) within MS, with
 * what to do; CODE its kind. */
static void unanswered(const char *dir, const char *what, int ms, kbox_errcode_t code,
                       kbox_error_t *err)
{
	pid_t pid = 0;
	char who[48] = "", when[32];
	if (kr_session_supervisor(dir, &pid) == KR_SUPERVISOR_RUNNING && pid > 0)
		snprintf(who, sizeof who, " (pid %ld)", (long)pid);
	if (ms % 1000)
		snprintf(when, sizeof when, "%d ms", ms);
	else
		snprintf(when, sizeof when, "%d s", ms / 1000);
	kbox_error_set(err, code,
	               "the supervisor%s did not answer%s%s within %s: it is stopped or stuck "
	               "(kill -CONT resumes a stopped one; kill -KILL ends it and its kernel, "
	               "and the session's files stay)",
	               who, *what ? " " : "", what, when);
}

/* kr_ctl_recv_live; *QUIET set when the supervisor did not answer. */
static json_t *recv_live(int fd, const char *dir, int timeout_ms, kbox_error_t *err, bool *quiet)
{
	long long deadline = timeout_ms < 0 ? 0 : kx_now_ms() + timeout_ms;
	for (;;) {
		long long now = kx_now_ms(), slice = now + KR_CTL_PROBE_AFTER_MS;
		int r;
		if (!dir || (deadline && deadline <= slice)) { /* no room for a probe */
			json_t *j = kr_ctl_recv(
			        fd, deadline ? (int)(deadline > now ? deadline - now : 0) : -1,
			        err);
			/* (one that does not answer in time: what to do, as below) */
			if (!j && dir && err->code == KBOX_E_TIMEOUT)
				unanswered(dir, "", timeout_ms, KBOX_E_TIMEOUT, err);
			return j;
		}
		if ((r = wait_readable(fd, slice, err)) < 0)
			return NULL;
		if (r > 0) {
			now = kx_now_ms();
			return kr_ctl_recv(
			        fd, deadline ? (int)(deadline > now ? deadline - now : 0) : -1,
			        err);
		}
		if (!supervisor_answers(dir)) {
			unanswered(dir, "a status request", KR_CTL_PROBE_MS, KBOX_E_DEAD, err);
			*quiet = true;
			return NULL;
		}
	}
}

json_t *kr_ctl_recv_live(int fd, const char *dir, int timeout_ms, kbox_error_t *err)
{
	bool quiet = false;
	return recv_live(fd, dir, timeout_ms, err, &quiet);
}

json_t *kr_ctl_call(const char *dir, kr_ctl_op_t op, json_t *args, int timeout_ms,
                    kbox_error_t *err)
{
	json_t *req = args ? args : json_object(), *reply = NULL;
	const char *name = kr_ctl_op_name(op);
	int fd = -1;

	if (!name) {
		kbox_error_set(err, KBOX_E_INVALID, "no such op");
		goto out;
	}
	if (!req || json_object_set_new(req, "op", json_string(name)) < 0) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto out;
	}
	if ((fd = kr_ctl_connect(dir, err)) < 0)
		goto out;
	if (kr_ctl_send(fd, req, err) < 0)
		reply = kr_ctl_refusal(fd);
	else
		reply = kr_ctl_recv_live(fd, dir, timeout_ms, err);
	if (!reply)
		goto out;
	if (kr_ctl_msg_kind(reply, NULL) != KR_CTL_MSG_REPLY) {
		const char *m = json_string_value(json_object_get(reply, "error"));
		kbox_error_set(err, KBOX_E_INVALID, "%s",
		               m ? m : "the supervisor refused the request");
		json_decref(reply);
		reply = NULL;
	}
out:
	if (fd >= 0)
		close(fd);
	json_decref(req);
	return reply;
}

json_t *kr_ctl_stop(const char *dir, json_t *args, int timeout_ms, kbox_error_t *err)
{
	pid_t pid = 0;
	int pfd = -1;
	json_t *r;

	/* (its process, held before it is asked: its pid names no other then) */
	if (kr_session_supervisor(dir, &pid) == KR_SUPERVISOR_RUNNING && pid > 0)
		pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	r = kr_ctl_call(dir, KR_CTL_OP_STOP, args, timeout_ms, err);
	if (r && pfd >= 0) {
		struct pollfd p = {pfd, POLLIN, 0};
		long long end = kx_now_ms() + KR_CTL_STOP_EXIT_MS;
		int left;
		while ((left = (int)(end - kx_now_ms())) > 0 && poll(&p, 1, left) < 0 &&
		       errno == EINTR)
			;
	}
	if (pfd >= 0)
		close(pfd);
	return r;
}

kr_ctl_exec_end_t kr_ctl_execute(int fd, const char *dir, const kr_ctl_exec_t *req, int outputs_fd,
                                 kr_ctl_event_cb_t on_event, void *arg, json_t **reply_p,
                                 kbox_error_t *err)
{
	json_t *line = kr_ctl_exec_to_json(req), *m;
	bool started = false, quiet = false;
	int sent;

	*reply_p = NULL;
	if (!line) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return KR_CTL_EXEC_NOT_SENT;
	}
	sent = kr_ctl_send_fd(fd, line, outputs_fd, err);
	json_decref(line);
	if (sent < 0 && (*reply_p = kr_ctl_refusal(fd)))
		return KR_CTL_EXEC_REPLY;
	if (sent < 0)
		return KR_CTL_EXEC_NOT_SENT;
	while ((m = recv_live(fd, dir, -1, err, &quiet))) {
		kr_ctl_op_t re;
		kr_ctl_msg_kind_t kind = kr_ctl_msg_kind(m, &re);
		if (kind == KR_CTL_MSG_STARTED || kind == KR_CTL_MSG_EVENT) {
			started |= kind == KR_CTL_MSG_STARTED;
			if (on_event)
				on_event(arg, kind, m);
		} else if (re == KR_CTL_OP_EXECUTE || re == KR_CTL_OP_NONE ||
		           re == KR_CTL_OP_SESSION) {
			*reply_p = m; /* a reply, an error, or a line that is neither */
			return KR_CTL_EXEC_REPLY;
		}
		json_decref(m);
	}
	if (quiet)
		return KR_CTL_EXEC_UNANSWERED;
	return started ? KR_CTL_EXEC_LOST_AFTER : KR_CTL_EXEC_LOST_BEFORE;
}
