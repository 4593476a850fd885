/* src/gateway/gateway_proto.h — the protocol between the supervisor's
 * gateway backend (src/runtime/backend_gateway.c) and kbox-gateway, the
 * helper that runs a session's kernel on a remote Jupyter Server, Kernel
 * Gateway or Enterprise Gateway: the server's REST API with libcurl, the
 * kernel's channels over its WebSocket (wslay's framing over libcurl's
 * connection), so that neither kbox nor the supervisor loads libcurl.
 * Included by both sides.
 *
 * kbox-gateway lives in pkglibexecdir beside kbox-supervisor.  Each
 * subcommand reads one line from standard input first, the server,
 *     {"url": URL, "token": TOKEN|null, "ca_file": PATH|null}
 * (a pipe: the token is never in an argument, a variable or a log).
 *
 *   kbox-gateway spec NAME
 *       Standard output: one line, {"name": NAME, "spec": KERNEL.JSON}
 *       (GET /api/kernelspecs/NAME's "spec"); exit 0.
 *   kbox-gateway specs
 *       {"default": NAME, "kernelspecs": {NAME: {"spec": ...}, ...}}
 *       (GET /api/kernelspecs); exit 0.
 *   kbox-gateway delete ID
 *       DELETE /api/kernels/ID (a kernel not there is no error):
 *       {"deleted": ID}; exit 0.
 *   kbox-gateway run
 *       Runs one remote kernel.  After the server line, a second line,
 *         {"kernel": NAME, "env": {K: V, ...}, "launch_timeout": S,
 *          "connection": CONNECTION-FILE}
 *       then commands, one a line: "interrupt" (POST
 *       /api/kernels/ID/interrupt) and "remove" (DELETE the kernel,
 *       exit).  Its end of file, or SIGTERM (its parent-death signal),
 *       is "remove".  It starts the kernel (POST /api/kernels), connects
 *       its channels, then binds the sockets CONNECTION-FILE names (its
 *       key: the supervisor's, not the remote kernel's) and passes each
 *       message on, signed again; the heartbeat it answers itself.
 *       Descriptor KG_SOCKETS_FD: the directory of those sockets (they
 *       are named /proc/self/fd/KG_SOCKETS_FD/NAME).  Descriptor
 *       KG_STATUS_FD: status lines,
 *         {"started": {"id": ID, "protocol": "v1"|"legacy"}}
 *         {"notice": TEXT}        (the channels dropped and came back)
 *         {"exit": {"cause": TEXT, "deleted": true|false}}
 *       then exit 0.
 *
 * Every subcommand reports a failure as one line (on standard output, or
 * KG_STATUS_FD for run),
 *   {"error": {"kind": KIND, "message": TEXT}}
 * and exits 1.  KIND is one of "no-server" (nothing answers at the URL),
 * "denied" (the token was refused), "not-found" (no such kernelspec or
 * kernel), "tls" (the server's certificate could not be verified),
 * "usage", or "server" (any other: the server's own message).
 */
#ifndef KBOX_GATEWAY_PROTO_H
#define KBOX_GATEWAY_PROTO_H

#define KG_PROGRAM "kbox-gateway"
#define KG_STATUS_FD 3
#define KG_SOCKETS_FD 4
#define KG_SOCKETS_INSIDE "/proc/self/fd/4"

/* How long a kernel may take to start when nothing says (Enterprise
 * Gateway's own default is 30 s; a pod's image pull takes longer), s. */
#define KG_LAUNCH_TIMEOUT_S 120

#endif
