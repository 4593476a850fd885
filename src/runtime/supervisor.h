/* src/runtime/supervisor.h — one session's supervisor (kbox-supervisor).
 *
 * The supervisor owns the session's kernel: it starts it through its
 * backend, holds its connection (shell, iopub subscribed once and for the
 * kernel's whole life, control, stdin, heartbeat) on one event loop, runs
 * executions one at a time with the capture layer (budgets, spill files,
 * images under outputs/), the timeout and its escalation (interrupt →
 * grace → kill → a new kernel, with the cause), keeps output printed
 * between executions for the next result, restarts a kernel that died,
 * stops the session after its idle TTL, and answers the control socket:
 * the protocol every front end speaks, documented in kbox-protocol(7). */
#ifndef KR_RUNTIME_SUPERVISOR_H
#define KR_RUNTIME_SUPERVISOR_H

/* The program (KR_SUPERVISOR_PROGRAM), its command line and its
 * protocol: runtime/protocol.h. */
#include "runtime/protocol.h"

/* Run the supervisor of the session in DIR (its session.json says what to
 * start) until it stops.  READY_FD (or -1, a socket) gets one line when the
 * kernel is ready or could not start: {"ok":true,"pid":…,"kernel_pid":…}
 * or {"ok":false,"error":…}, then is closed.  FLAGS: 0, or
 * KR_SUP_NEW_NOTICE (the program's "--new"): the session is new, made by
 * a call that runs code in it (kbox exec, mcp, agent), and the first
 * execution's result says so ("[note: new session NAME: nothing is
 * defined yet]").  Returns 0 after a clean stop, 1 when the session could
 * not start.
 *
 * The program's command line: SESSION_DIR READY_FD [--new], or
 * --version. */
#define KR_SUP_NEW_NOTICE 1u
int kr_supervisor_run(const char *dir, int ready_fd, unsigned flags);

#endif
