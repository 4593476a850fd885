/* src/mcp/session.c — kbox mcp's sessions: the main one, the connection's
 * own (mcp-PID-RANDOM, started at the first tools/call that needs it,
 * stopped and removed at the end) or the one -s names (started if need
 * be, left running); and those new_session makes for conversations,
 * named by an unguessable handle (mcp-RANDOM), which the tools' "session"
 * argument selects, stopped and removed at the end too.  Made, started
 * and connected to through kbox(1)'s session helpers and the control
 * socket's client (src/runtime/ctl.h).  The sessions this server made
 * have it as their owner: they stop when it goes, however it goes. */
#include "config.h"
#include "mcp/mcp_int.h"

#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define STOP_WAIT_MS 90000 /* the own session's supervisor stops within this */

int mcp_session_name(mcp_t *m, const char *given)
{
	unsigned r = 0;
	int status;
	m->sess = &m->main;
	if (given) {
		if ((status = cli_check_session(MCP_CMD, given)) != EXIT_OK)
			return status;
		snprintf(m->main.name, sizeof m->main.name, "%s", given);
		return EXIT_OK;
	}
	if (getrandom(&r, sizeof r, 0) != sizeof r)
		r = (unsigned)kx_now_ms() ^ (unsigned)getpid() << 8;
	snprintf(m->main.name, sizeof m->main.name, "mcp-%ld-%08x", (long)getpid(), r);
	m->main.own = true;
	return EXIT_OK;
}

int mcp_session_select(mcp_t *m, json_t *j, char *why, size_t size)
{
	const char *h = json_string_value(j);
	m->sess = &m->main;
	if (!j || json_is_null(j))
		return 0;
	for (size_t i = 0; h && i < m->n_handles; i++)
		if (strcmp(m->handles[i]->name, h) == 0 && !mcp_has_nul(j)) {
			m->sess = m->handles[i];
			return 0;
		}
	if (!h)
		snprintf(why, size, "\"session\" is a handle that new_session returned (a string)");
	else
		snprintf(why, size,
		         "no session \"%.64s\" of this server's: a session is a handle that "
		         "new_session returned here (or leave \"session\" out for the "
		         "connection's own)",
		         h);
	return -1;
}

json_t *mcp_new_session(mcp_t *m)
{
	unsigned char r[12];
	char why[1024];
	mcp_sess_t *s;

	if (m->max_handles == 0)
		return mcp_text_result(true,
		                       "new_session: this server makes no new sessions (kbox mcp "
		                       "--max-sessions 0): leave \"session\" out to work in the "
		                       "connection's own");
	if (m->n_handles >= m->max_handles || m->n_handles >= MCP_HANDLES_MAX)
		return mcp_text_result(
		        true,
		        "new_session: this server keeps at most %zu session%s of new_session's at "
		        "once (each a kernel of its own; kbox mcp --max-sessions), and has made "
		        "%s: use %s, or the connection's own (leave \"session\" out)",
		        m->max_handles, m->max_handles == 1 ? "" : "s",
		        m->max_handles == 1 ? "it" : "them",
		        m->max_handles == 1 ? "that one" : "one of those");
	if (getrandom(r, sizeof r, 0) != sizeof r || !(s = calloc(1, sizeof *s)))
		return mcp_text_result(true, "new_session: no random bytes or memory for a handle");
	snprintf(s->name, sizeof s->name, "mcp-");
	for (size_t i = 0; i < sizeof r; i++)
		snprintf(s->name + 4 + 2 * i, 3, "%02x", r[i]);
	s->own = true;
	m->handles[m->n_handles++] = s;
	m->sess = s;
	if (mcp_session_ensure(m, why, sizeof why) < 0) {
		mcp_session_end_one(m, s);
		m->handles[--m->n_handles] = NULL;
		free(s);
		m->sess = &m->main;
		return mcp_text_result(true, "new_session: %s", why);
	}
	return mcp_text_result(false,
	                       "session %s started: give \"session\": \"%s\" to run_python, "
	                       "wait_python and the file tools to work in it; its kernel's state "
	                       "persists between calls, and nothing is defined in it yet",
	                       s->name, s->name);
}

int mcp_session_ensure(mcp_t *m, char *why, size_t size)
{
	char json[PATH_MAX + 16];
	bool started = false, is_new;
	int status;
	cli_forget_last_error();
	if (!m->sess->dir &&
	    !(m->sess->dir = cli_session_dir(MCP_CMD, m->sess->name, true, &status))) {
		snprintf(why, size, "session %s: its directory could not be made: %s",
		         m->sess->name,
		         *cli_last_error() ? cli_last_error() : "see kbox's standard error");
		return -1;
	}
	if (!m->sess->refused &&
	    kr_session_supervisor(m->sess->dir, NULL) == KR_SUPERVISOR_RUNNING) {
		m->sess->running = true;
		return 0;
	}
	m->sess->refused = false;
	snprintf(json, sizeof json, "%s/session.json", m->sess->dir);
	is_new = access(json, F_OK) != 0;
	if (cli_session_start(MCP_CMD, m->sess->dir, m->sess->name, NULL,
	                      m->sess->own ? getpid() : 0, &started, NULL) != EXIT_OK) {
		/* a new session that failed leaves nothing (cli_session_forget),
		 * its log neither: the next call makes it anew */
		bool gone = access(m->sess->dir, F_OK) < 0;
		char log[PATH_MAX + 64] = "";
		if (!gone)
			snprintf(log, sizeof log, " (see also %s/supervisor.log)", m->sess->dir);
		snprintf(why, size, "session %s could not be started: %s%s", m->sess->name,
		         *cli_last_error() ? cli_last_error() : "see kbox's standard error", log);
		if (gone) {
			free(m->sess->dir);
			m->sess->dir = NULL;
		}
		return -1;
	}
	/* the person hears of it: a session of this server's own is gone
	 * when the server ends, another stays */
	if (started && is_new)
		cli_error(MCP_CMD, "session %s is new: started it%s", m->sess->name,
		          m->sess->own ? " for this connection (removed when it ends)"
		                       : " (kbox ls lists the sessions)");
	m->sess->running = true;
	return 0;
}

int mcp_session_connect(mcp_t *m, bool *reused, char *why, size_t size)
{
	kbox_error_t err = {0};
	*reused = false;
	if (m->sess->has_kept) {
		/* the connection of its last call, unless something is waiting
		 * on it: a line, or its end (the supervisor gone, or it closed an
		 * idle connection) */
		struct pollfd p = {m->sess->kept_fd, POLLIN, 0};
		int fd = m->sess->kept_fd;
		m->sess->has_kept = false;
		if (poll(&p, 1, 0) == 0) {
			*reused = true;
			return fd;
		}
		close(fd);
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd;
		if (mcp_session_ensure(m, why, size) < 0)
			return -1;
		if ((fd = kr_ctl_connect(m->sess->dir, &err)) >= 0)
			return fd;
		if (err.code != KBOX_E_NOTFOUND)
			break;
		m->sess->running = false;
		m->sess->refused = true; /* (its socket gone: it stops, or has) */
	}
	snprintf(why, size, "session %s: %s", m->sess->name, err.msg);
	cli_error(MCP_CMD, "%s", why);
	return -1;
}

void mcp_session_keep(mcp_sess_t *s, int fd)
{
	if (s->has_kept) {
		close(fd);
		return;
	}
	s->kept_fd = fd;
	s->has_kept = true;
}

void mcp_session_end_one(mcp_t *m, mcp_sess_t *s)
{
	(void)m;
	if (s->has_kept)
		close(s->kept_fd);
	s->has_kept = false;
	if (s->own && s->dir)
		cli_session_discard(MCP_CMD, s->dir, s->name, STOP_WAIT_MS);
	free(s->dir);
	s->dir = NULL;
	json_decref(s->wait.id);
	json_decref(s->wait.progress);
	memset(&s->wait, 0, sizeof s->wait);
}

void mcp_session_end(mcp_t *m)
{
	mcp_session_end_one(m, &m->main);
	for (size_t i = 0; i < m->n_handles; i++) {
		mcp_session_end_one(m, m->handles[i]);
		free(m->handles[i]);
		m->handles[i] = NULL;
	}
	m->n_handles = 0;
}
