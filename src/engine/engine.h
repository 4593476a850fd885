/* src/engine/engine.h — a client of a container engine's Engine API (Docker
 * 1.40 and up, Podman's Docker-compatible service) over its unix socket,
 * with libcurl: kbox-engine's, and nobody else's (engine_proto.h).
 * Prefix ke_.  The parts that need no engine (the socket's path, the API
 * version to speak, error bodies, the log stream's frames) are pure, for
 * the unit tests. */
#ifndef KBOX_ENGINE_H
#define KBOX_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum {
	KE_E_NONE = 0,
	KE_E_NO_DAEMON, /* nothing answers at the socket */
	KE_E_DENIED,    /* not allowed to use it */
	KE_E_NO_IMAGE,
	KE_E_CONFLICT,
	KE_E_USAGE,
	KE_E_ENGINE, /* any other: the engine's own message */
} ke_kind_t;

typedef struct {
	ke_kind_t kind;
	char msg[1024];
} ke_error_t;

/* "no-daemon", "denied", ... (engine_proto.h) */
const char *ke_kind_name(ke_kind_t kind);
/* Set ERR; returns -1. */
int ke_error(ke_error_t *err, ke_kind_t kind, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* An engine, once pinged. */
typedef struct {
	char socket[108]; /* the unix socket's path */
	char api[16];     /* the version spoken, "1.41" */
	char engine[16];  /* "docker" or "podman" */
	char version[64]; /* the engine's own */
	char min_api[16]; /* the oldest it takes, when it said ("" when not) */
} ke_engine_t;

/* The socket's path from VALUE (KBOX_ENGINE_SOCKET's or DOCKER_HOST's:
 * "unix:///PATH" or "/PATH"; NULL or "": the default) into OUT.  0, or -1
 * with ERR (another scheme: the kernel's sockets must be on this
 * machine; a path too long for a unix socket). */
int ke_socket_path(const char *value, char *out, size_t size, ke_error_t *err);

/* The API version to speak to an engine that says SERVER (its
 * Api-Version), into OUT: the older of SERVER and 1.41.  0, or -1 with ERR
 * when SERVER is not a version or older than 1.40. */
int ke_pick_api(const char *server, char *out, size_t size, ke_error_t *err);

/* The oldest API version named in a 400's message ("... Minimum supported
 * API version is 1.44 ..."), into OUT; 0, or -1 when it names none. */
int ke_min_api_in(const char *message, char *out, size_t size);

/* The error of a reply with HTTP status STATUS and body BODY (JSON or
 * not; may be NULL): its "message" (Docker's, and Podman's beside its
 * "cause" and "response"), else the status.  WHAT says what was asked
 * ("create container kbox-x"). Returns -1. */
int ke_reply_error(long status, const char *body, const char *what, ke_error_t *err);

/* The frames of a multiplexed log stream (8-byte headers: stream, 0, 0, 0,
 * size big-endian; then the payload), fed in pieces of any size. */
typedef struct {
	unsigned char head[8];
	size_t have_head;   /* bytes of the header so far */
	unsigned long left; /* payload bytes of the current frame still to come */
	int stream;         /* its stream: 1 stdout, 2 stderr (0 stdin) */
} ke_demux_t;
/* Feed P[0..N): OUT(ARG, STREAM, BYTES, LEN) for each piece of payload.
 * 0, or -1 when OUT returned nonzero. */
int ke_demux(ke_demux_t *d, const char *p, size_t n,
             int (*out)(void *arg, int stream, const char *bytes, size_t len), void *arg);

/* Find the engine (ke_socket_path of KBOX_ENGINE_SOCKET, else
 * DOCKER_HOST), ping it and agree on a version.  0, or -1 with ERR. */
int ke_open(ke_engine_t *e, ke_error_t *err);

/* A request to E: METHOD PATH (below /vAPI; PATH with its query), BODY a
 * JSON text or NULL (an empty body).  The status in *STATUS and the body,
 * when it is JSON, in *REPLY (NULL: not wanted).  TIMEOUT_S 0: none.  0
 * when the engine answered (whatever the status), -1 with ERR when not. */
int ke_call(const ke_engine_t *e, const char *method, const char *path, const char *body,
            long timeout_s, long *status, json_t **reply, ke_error_t *err);

/* A libcurl easy handle for METHOD PATH to E, set up as ke_call's (the
 * caller adds its write function and runs it); NULL when out of memory. */
void *ke_easy(const ke_engine_t *e, const char *method, const char *path, const char *body);

/* The error of a failed transfer (a CURLcode) on E's socket: no daemon,
 * not allowed, or libcurl's words.  Returns -1. */
int ke_transfer_error(const ke_engine_t *e, void *easy, int code, const char *what,
                      ke_error_t *err);

#endif
