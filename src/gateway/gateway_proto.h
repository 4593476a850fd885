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
 *   kbox-gateway run
 *       Runs one remote kernel.  After the server line, a second line,
 *         {"kernel": NAME, "env": {K: V, ...}, "launch_timeout": S,
 *          "legacy": BOOL, "dir": PATH|null, "connection": CONNECTION-FILE,
 *          "sweep": [ID, ...] (optional)}
 *       then commands, one a line: "interrupt" (POST
 *       /api/kernels/ID/interrupt) and "remove" (DELETE the kernel,
 *       exit).  Its end of file, or SIGTERM (its parent-death signal),
 *       is "remove".  First it deletes the kernels SWEEP names (the
 *       session's earlier ones, left on the server), each said in a
 *       status line; the first the server does not answer ends that.
 *       When DIR is given and the server has a contents
 *       API, it makes that directory (and its parents) and the kernel's
 *       working directory is DIR.  It starts the kernel (POST /api/kernels), connects
 *       its channels, then binds the sockets CONNECTION-FILE names (its
 *       key: the supervisor's, not the remote kernel's) and passes each
 *       message on, signed again; the heartbeat it answers itself.
 *       Descriptor KG_SOCKETS_FD: the directory of those sockets (they
 *       are named /proc/self/fd/KG_SOCKETS_FD/NAME).  Descriptor
 *       KG_STATUS_FD: status lines,
 *         {"started": {"id": ID, "protocol": "v1"|"legacy",
 *                      "session": UUID, "dir": PATH|null}}
 *         {"swept": {"id": ID}}   (or {"swept": {"id": ID, "error": TEXT}})
 *         {"notice": TEXT}        (the channels dropped and came back)
 *         {"exit": {"cause": TEXT, "deleted": true|false,
 *                   "server_gone": true|false}}
 *       then exit 0.
 *
 *   kbox-gateway put PATH FD
 *       Writes what descriptor FD holds (to its end) to the file PATH of
 *       the server's contents API (/api/contents/PATH: relative to the
 *       server's root), its directories made first: in one PUT up to
 *       KG_FILE_CHUNK bytes, else in parts to a file beside it
 *       (PATH.kbox-part-XXXXXXXX) that then replaces PATH.
 *       {"put": {"path": PATH, "size": N}}; exit 0.
 *   kbox-gateway get PATH FD [MAX [SINCE]]
 *       Writes the file PATH (at most MAX bytes, 0 or none: KG_FILE_MAX;
 *       the API gives a file whole, in one reply) to descriptor FD: from
 *       the server's file handler (/files/PATH) when FD is an empty
 *       regular file and the reply is the size the API said, else from
 *       the contents API.
 *       {"got": {"path": PATH, "size": N, "stamp": STAMP}}; exit 0.
 *       STAMP is "SIZE@LAST_MODIFIED" ("" when the server gives no time);
 *       when it equals SINCE nothing is written and the line has
 *       "unchanged": true (a copy the caller kept is the file still).
 *       A STAMP has fewer than KG_STAMP_MAX bytes.
 *   kbox-gateway list PATH
 *       {"list": {"path": PATH, "entries": [{"name": NAME, "type":
 *       "file"|"directory"|"notebook", "size": N|null}, ...]}}; exit 0.
 *   (PATH: "" or "." is the root.)
 *
 * Every subcommand reports a failure as one line (on standard output, or
 * KG_STATUS_FD for run),
 *   {"error": {"kind": KIND, "message": TEXT}}
 * and exits 1.  KIND is one of "no-server" (nothing answers at the URL),
 * "denied" (the token was refused), "not-found" (no such kernelspec or
 * kernel), "tls" (the server's certificate could not be verified),
 * "usage", "no-contents" (the server has no contents API: a Kernel
 * Gateway or Enterprise Gateway), or "server" (any other: the server's
 * own message).
 */
#ifndef KBOX_GATEWAY_PROTO_H
#define KBOX_GATEWAY_PROTO_H

#define KG_STAMP_MAX 96 /* (get's STAMP, with its NUL) */
#define KG_PROGRAM "kbox-gateway"
#define KG_STATUS_FD 3
#define KG_SOCKETS_FD 4
#define KG_SOCKETS_INSIDE "/proc/self/fd/4"

/* How long a kernel may take to start when nothing says (Enterprise
 * Gateway's own default is 30 s; a pod's image pull takes longer), s. */
#define KG_LAUNCH_TIMEOUT_S 120

/* A file's bytes in one PUT of the contents API, and the largest file
 * `get` takes (the API sends it whole, as base64 in one JSON reply). */
#define KG_FILE_CHUNK (8L << 20)
#define KG_FILE_MAX (128L << 20)

#endif
