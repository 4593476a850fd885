/* src/engine/engine_proto.h — the protocol between the supervisor's docker
 * backend (src/runtime/backend_docker.c) and kbox-engine, the helper that
 * talks to a container engine (Docker, or Podman through its
 * Docker-compatible socket) over the Engine API with libcurl, so that
 * neither kbox nor the supervisor loads libcurl.  Included by both sides.
 *
 * kbox-engine lives in pkglibexecdir beside kbox-supervisor.  The engine
 * is the unix socket KBOX_ENGINE_SOCKET_ENV names (the supervisor sets it
 * from session.json's "engine"), else DOCKER_HOST's (unix:///PATH only:
 * the kernel's sockets must be on this machine), else
 * KE_DEFAULT_SOCKET.
 *
 *   kbox-engine ping
 *       Standard output: one line, {"engine": "docker"|"podman", "api":
 *       "1.41", "version": "20.10.24", "socket": PATH}; exit 0.
 *   kbox-engine image NAME
 *       {"id": ID, "labels": {...}} of image NAME; exit 0.
 *   kbox-engine images
 *       The images labelled kbox.recipe: {"images": [{"names": [NAME:TAG,
 *       ...], "id": ID, "created": UNIX-TIME, "size": BYTES, "recipe":
 *       "sha256:...", "packages": LIST|null, "requirements":
 *       "sha256:..."|null}, ...], "engine": "docker"|"podman"}; exit 0.
 *   kbox-engine import TAR NAME RECIPE [LABEL=VALUE...]
 *       Imports the root file system TAR (container/build.sh's) as image
 *       NAME:latest with the user kbox (1000:1000), /workspace and the
 *       label kbox.recipe=sha256:RECIPE, and the LABELs (kbox.packages,
 *       kbox.requirements only: build.sh --print-labels); an image NAME
 *       with that recipe's label already is left alone.  Prints {"image":
 *       NAME, "id": ID, "up_to_date": true|false}; exit 0.
 *   kbox-engine rmi NAME
 *       Removes image NAME (untags it, when it has other names) when it
 *       has the label kbox.recipe (else kind "usage"); the engine refuses
 *       one a container uses (kind "conflict").  Prints {"removed":
 *       NAME}; exit 0.
 *   kbox-engine orphans HOME
 *       Removes the containers labelled kbox.home=HOME whose supervisor
 *       (label kbox.supervisor, "PID:STARTTIME") is gone; prints
 *       {"removed": [NAME, ...], "kept": [NAME, ...]}; exit 0.
 *   kbox-engine run
 *       Runs one container.  Standard input: first the spec, one line,
 *         {"name": NAME, "create": BODY, "home": HOME, "session": S}
 *       (BODY: POST /containers/create's, as it is sent), then commands,
 *       one a line: "signal N" (POST /containers/ID/kill?signal=N) and
 *       "remove" (kill, remove, exit).  Its end of file, or SIGTERM (its
 *       parent-death signal), is "remove".  Standard output and error:
 *       the container's output (its logs, demultiplexed).  Descriptor
 *       KE_STATUS_FD: status lines,
 *         {"started": {"id": ID, "pid": P, "engine": E, "api": V,
 *                      "warnings": [...]}}   (P: its init's host pid)
 *         {"exit": {"code": N, "oom_killed": true|false}}
 *       then exit 0 once the container is removed.
 *
 * Every subcommand reports a failure as one line (on standard output, or
 * KE_STATUS_FD for run),
 *   {"error": {"kind": KIND, "message": TEXT}}
 * and exits 1.  KIND is one of "no-daemon" (no engine at the socket),
 * "denied" (not allowed to use it), "no-image", "conflict" (a container of
 * that name, not an orphan of ours), "usage", or "engine" (any other: the
 * engine's own message).
 */
#ifndef KBOX_ENGINE_PROTO_H
#define KBOX_ENGINE_PROTO_H

#define KE_PROGRAM "kbox-engine"
#define KE_SOCKET_ENV "KBOX_ENGINE_SOCKET"
#define KE_DEFAULT_SOCKET "/var/run/docker.sock"
#define KE_STATUS_FD 3

/* The Engine API versions spoken: the newest (Docker 20.10's), and the
 * oldest whose create body kbox's fields are in. */
#define KE_API_MAX_MAJOR 1
#define KE_API_MAX_MINOR 41
#define KE_API_MIN_MINOR 40

/* The image a docker session runs when none is given. */
#define KE_IMAGE_DEFAULT "kbox-kernel"

#endif
