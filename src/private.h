/* src/private.h — internals shared between libkbox modules (kbox__ prefix). */
#ifndef KBOX_PRIVATE_H
#define KBOX_PRIVATE_H

#include "config.h"
#include <stdbool.h>
#include <stddef.h>
#include <sys/un.h> /* KBOX__SUN_PATH */
#include <czmq.h>   /* zmsg_t, for the client (never in a public header) */
#include <kbox.h>
#include "common/kx.h" /* the common module: clock, UTF-8, buffers, files */

#define KBOX_PRINTF(a, b) KX_PRINTF(a, b)

/* ---- util.c and wire.c ---- */

/* The unit of UTF-8 at S (N > 0 bytes left) as kbox_json_string_size
 * counts it: its length, and in *COST the bytes it takes in JSON dumped
 * with FLAGS (util.c). */
size_t kbox__json_unit(const char *s, size_t n, size_t flags, size_t *cost);

/* The size of sockaddr_un.sun_path (108): a unix socket's path is shorter. */
#define KBOX__SUN_PATH sizeof(((struct sockaddr_un *)0)->sun_path)

/* kx_unix_path, with ERR: "NAME: the name is too long for a unix socket",
 * or "directory DIR: why" when DIR cannot be opened.  0, or -1. */
int kbox__unix_path(char *buf, size_t size, const char *dir, const char *name, int *dirfd_p,
                    kbox_error_t *err);

/* ---- svg.c, for the capture: SVG images a browser could run ---- */

/* Why the SVG text S[0..LEN) could act when a user opens it in a browser,
 * as a short phrase ("a <script> element", "an event handler attribute",
 * "a link out of the image"), or NULL when a conservative check finds
 * nothing active (see svg.c for what it looks for).  Markup it cannot
 * read counts as active.  The phrase is static. */
const char *kbox__svg_active(const char *s, size_t len);

/* ---- wire.c, for the client: messages as czmq's zmsg_t ---- */

/* Serialise SELF: identities, delimiter, signature by AUTH, the four dicts
 * as compact JSON, buffers.  Caller owns the zmsg_t. NULL with ERR on failure. */
zmsg_t *kbox__msg_encode(const kbox_msg_t *self, const kbox_auth_t *auth, kbox_error_t *err);

/* kbox_msg_decode for the frames of ZMSG (left untouched; caller still owns
 * it), except that metadata and content are kept as their verified text
 * and parsed on first use (kbox_msg_metadata, kbox_msg_content): most
 * messages a client reads never need them.  Text there that is not a
 * JSON object (which only a sender holding the key can have signed)
 * reads as an empty object instead of refusing the message. */
kbox_msg_t *kbox__msg_decode_zmsg(kbox_auth_t *auth, zmsg_t *zmsg, kbox_error_t *err);

/* Is member KEY of SELF's content the string VALUE?  Read off the text
 * when the content is still flat text (flat_object: what jansson would
 * read there), without parsing it; else from kbox_msg_content. */
bool kbox__msg_content_is(const kbox_msg_t *self, const char *key, const char *value);

/* ---- wire.c: a message as it is received, in libzmq's own parts ---- */

#define KBOX__PARTS_INLINE 16 /* parts held without an allocation */

/* The parts of one multipart message, received straight into zmq_msg_t
 * (no copy, no allocation of its own for up to KBOX__PARTS_INLINE), and
 * a view of each (FRAMES[i], borrowed from the parts). */
typedef struct {
	zmq_msg_t inline_parts[KBOX__PARTS_INLINE], *parts;
	kbox_frame_t inline_frames[KBOX__PARTS_INLINE], *frames;
	size_t n, cap;
	size_t bytes; /* of all the parts */
} kbox__parts_t;

/* Receive into SELF (uninitialised) the message waiting on the libzmq
 * socket SOCK, without waiting.  0, or -1 when there is none (EAGAIN,
 * EINTR) or it cannot be read; SELF then holds nothing.  After 0, SELF
 * is released with kbox__parts_close. */
int kbox__parts_recv(kbox__parts_t *self, void *sock);

/* kbox__parts_recv within bounds: a message of more than MAX_FRAMES
 * parts or MAX_BYTES bytes (or one that memory cannot hold) is read to
 * its end, part by part, and let go; then SELF holds nothing, *OVER is
 * set, and the return is 0. */
int kbox__parts_recv_bounded(kbox__parts_t *self, void *sock, size_t max_frames, size_t max_bytes,
                             bool *over);

/* Release the parts of SELF. */
void kbox__parts_close(kbox__parts_t *self);

/* kbox__msg_decode_zmsg for the parts of P (left untouched). */
kbox_msg_t *kbox__msg_decode_parts(kbox_auth_t *auth, const kbox__parts_t *p, kbox_error_t *err);

/* Was the content of SELF, signed but left as text by a lazy decode,
 * not a JSON object (a lone surrogate, bad UTF-8), so that it reads as
 * {}?  Parses it if it was not yet. */
bool kbox__msg_content_unreadable(const kbox_msg_t *self);

#endif
