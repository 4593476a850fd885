/* src/gateway/gw.h — a client of a Jupyter server's kernel API: REST with
 * libcurl, and a kernel's channels over a WebSocket (the upgrade over
 * libcurl's connection, so that TLS, proxies and the CA file are
 * libcurl's; the frames wslay's).  kbox-gateway's, and nobody else's
 * (gateway_proto.h).  Prefix gw_. */
#ifndef KBOX_GW_H
#define KBOX_GW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
	GW_E_NONE = 0,
	GW_E_NO_SERVER, /* nothing answers at the URL */
	GW_E_DENIED,    /* the token was refused (401, 403) */
	GW_E_NOT_FOUND, /* no such kernelspec or kernel (404) */
	GW_E_TLS,       /* the certificate could not be verified */
	GW_E_USAGE,
	GW_E_SERVER,      /* any other: the server's own message */
	GW_E_NO_CONTENTS, /* the server has no contents API (/api/contents) */
} gw_kind_t;

typedef struct {
	gw_kind_t kind;
	char msg[1024];
} gw_error_t;

const char *gw_kind_name(gw_kind_t kind);
int gw_error(gw_error_t *err, gw_kind_t kind, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* A server: its base URL (http or https, no query, no user), its token
 * (NULL: none), the CA file that verifies it (NULL: the system's). */
typedef struct gw gw_t;

/* The most a REST reply's body may be. */
#define GW_MAX_BODY (8 << 20)

gw_t *gw_new(const char *url, const char *token, const char *ca_file, gw_error_t *err);
/* CANCEL(ARG), asked while a call or a connection waits (a few times a
 * second): true ends it, as kind "usage" ("stopped while waiting"). */
void gw_set_cancel(gw_t *self, bool (*cancel)(void *arg), void *arg);

/* While gw_ws_connect waits for the server to open the channels, WATCH
 * (with ARG) is called every GW_WATCH_MS: -1 with ERR ends the wait with
 * that error (the kernel died as it started, say), 0 goes on.  NULL:
 * none. */
#define GW_WATCH_MS 2000
void gw_set_watch(gw_t *self, int (*watch)(void *arg, gw_error_t *err), void *arg);
/* The most a reply's body may be from now on (0: GW_MAX_BODY). */
void gw_set_max_body(gw_t *self, size_t max);
void gw_destroy(gw_t **self_p);
const char *gw_url(const gw_t *self);

/* METHOD PATH (below the base URL) with the JSON BODY (NULL: none),
 * waiting at most TIMEOUT_S for the whole reply.  The reply's body, when
 * it is JSON, in *OUT (new; NULL when there is none).  The HTTP status,
 * or -1 with ERR when there was no reply (the kind says why). */
long gw_call(gw_t *self, const char *method, const char *path, json_t *body, long timeout_s,
             json_t **out, gw_error_t *err);

/* GET PATH (below the base URL) with its body written to FD as it comes,
 * waiting at most TIMEOUT_S for the whole reply: only a 200's body, and
 * at most WANT bytes.  The HTTP status, with *GOT the bytes written, and
 * *OTHER when the body was not WANT bytes whole: not a 200, of another
 * Content-Length, longer (the transfer is ended there) or cut short by
 * the server; -1 with ERR when there was no reply (or it outlasted
 * TIMEOUT_S, or the cancel hook ended it), or FD could not be written
 * (kind "usage": "writing SHOWN here: " and the errno's words). */
long gw_get_to_fd(gw_t *self, const char *path, long timeout_s, int fd, long long want,
                  const char *shown, long long *got, bool *other, gw_error_t *err);

/* An error for a reply of SELF's of status CODE with body BODY (the
 * server's "message", else its "reason", else the status), for WHAT
 * ("starting kernel python3"); a 401 or 403 says the token was refused,
 * or, when SELF has none, that the server wants one.  -1. */
int gw_reply_error(const gw_t *self, gw_error_t *err, const char *what, long code,
                   const json_t *body);

/* ---- the channels ---- */

typedef struct gw_ws gw_ws_t;

/* A message of the channels as it came: its opcode (1 text, 2 binary). */
typedef void gw_ws_msg_fn(void *arg, int opcode, const uint8_t *data, size_t len);

/* The kernel channels' WebSocket framing. */
#define GW_PROTO_V1 "v1.kernel.websocket.jupyter.org"

/* Connect to SELF's /api/kernels/ID/channels?session_id=SESSION, offering
 * GW_PROTO_V1 (unless LEGACY), within TIMEOUT_S; messages go to FN(ARG);
 * the largest taken is MAX_MSG bytes (a larger one closes the
 * connection).  NULL with ERR. */
gw_ws_t *gw_ws_connect(gw_t *self, const char *id, const char *session, bool legacy, long timeout_s,
                       uint64_t max_msg, gw_ws_msg_fn *fn, void *arg, gw_error_t *err);
void gw_ws_destroy(gw_ws_t **self_p);
/* The framing the server chose: true for GW_PROTO_V1. */
bool gw_ws_v1(const gw_ws_t *self);
/* The socket, to poll: readable, and writable while gw_ws_want_write. */
int gw_ws_fd(const gw_ws_t *self);
bool gw_ws_want_write(const gw_ws_t *self);
/* Read what has come (messages to the callback) and send what is queued.
 * 0, or -1 once the connection is over (closed, or failed: WHY says). */
int gw_ws_pump(gw_ws_t *self, char *why, size_t size);
/* True when what was read may not be all that waits (a pump reads 1 MiB
 * at most): pump again without waiting for the socket. */
bool gw_ws_more(const gw_ws_t *self);
/* Queue a message (copied).  0, or -1 when the connection is over. */
int gw_ws_send(gw_ws_t *self, int opcode, const void *data, size_t len);
/* Bytes queued and not yet sent. */
size_t gw_ws_queued(const gw_ws_t *self);
/* Queue a close frame. */
void gw_ws_close(gw_ws_t *self);

/* ---- the framings (pure: unit-tested) ---- */

/* One message as parts: the channel, then header, parent_header,
 * metadata, content (JSON texts), then the buffers. */
typedef struct {
	const uint8_t *data;
	size_t len;
} gw_part_t;

#define GW_MAX_PARTS 1024

/* Split a v1 message into its channel and parts (pointing into DATA);
 * the number of parts after the channel (>= 4), or -1 when malformed. */
int gw_v1_split(const uint8_t *data, size_t len, gw_part_t *channel, gw_part_t *parts,
                size_t max_parts);
/* A v1 message of CHANNEL and the N parts: new (malloc'd), its length in
 * *LEN; NULL when out of memory. */
uint8_t *gw_v1_join(const char *channel, const gw_part_t *parts, size_t n, size_t *len);
/* Split a legacy binary message: its JSON (*JSON) and buffers; the
 * number of buffers, or -1 when malformed. */
int gw_legacy_split(const uint8_t *data, size_t len, gw_part_t *json, gw_part_t *bufs,
                    size_t max_bufs);
/* A legacy binary message of the JSON text and the N buffers. */
uint8_t *gw_legacy_join(const gw_part_t *json, const gw_part_t *bufs, size_t n, size_t *len);

#endif
