/* src/mcp/session.c — kbox mcp's session: the connection's own
 * (mcp-PID-RANDOM, started at the first tools/call that needs it, stopped
 * and removed at the end) or the one -s names (started if need be, left
 * running); made, started and connected to through kbox(1)'s session
 * helpers and the control socket's client (src/runtime/ctl.h). */
#include "config.h"
#include "mcp/mcp_int.h"

#include <stdio.h>
#include <sys/random.h>
#include <unistd.h>

#define STOP_WAIT_MS 90000 /* the own session's supervisor stops within this */

int mcp_session_name(mcp_t *m, const char *given, char *own)
{
	unsigned r = 0;
	int status;
	if (given) {
		if ((status = cli_check_session(MCP_CMD, given)) != EXIT_OK)
			return status;
		m->name = given;
		return EXIT_OK;
	}
	if (getrandom(&r, sizeof r, 0) != sizeof r)
		r = (unsigned)kx_now_ms() ^ (unsigned)getpid() << 8;
	snprintf(own, KR_SESSION_NAME_MAX + 1, "mcp-%ld-%08x", (long)getpid(), r);
	m->name = own;
	m->own = true;
	return EXIT_OK;
}

int mcp_session_ensure(mcp_t *m, char *why, size_t size)
{
	int status;
	cli_forget_last_error();
	if (!m->dir && !(m->dir = cli_session_dir(MCP_CMD, m->name, true, &status))) {
		snprintf(why, size, "session %s: its directory could not be made: %s", m->name,
		         *cli_last_error() ? cli_last_error() : "see kbox's standard error");
		return -1;
	}
	if (kr_session_supervisor(m->dir, NULL) == KR_SUPERVISOR_RUNNING) {
		m->running = true;
		return 0;
	}
	if (cli_session_start(MCP_CMD, m->dir, m->name, NULL, m->own ? getpid() : 0, NULL) !=
	    EXIT_OK) {
		snprintf(
		        why, size,
		        "session %s could not be started: %s (see also %s/supervisor.log)", m->name,
		        *cli_last_error() ? cli_last_error() : "see kbox's standard error", m->dir);
		return -1;
	}
	m->running = true;
	return 0;
}

int mcp_session_connect(mcp_t *m, char *why, size_t size)
{
	kbox_error_t err = {0};
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd;
		if (mcp_session_ensure(m, why, size) < 0)
			return -1;
		if ((fd = kr_ctl_connect(m->dir, &err)) >= 0)
			return fd;
		if (err.code != KBOX_E_NOTFOUND)
			break;
		m->running = false;
	}
	snprintf(why, size, "session %s: %s", m->name, err.msg);
	cli_error(MCP_CMD, "%s", why);
	return -1;
}

void mcp_session_end(mcp_t *m)
{
	if (m->own && m->dir)
		cli_session_discard(MCP_CMD, m->dir, m->name, STOP_WAIT_MS);
}
