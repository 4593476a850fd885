/* kbox/wire.h — Jupyter wire messages: frames, HMAC signatures, replay protection.
 *
 * On the wire a message is
 *     [identities…] "<IDS|MSG>" signature header parent_header metadata content [buffers…]
 * The signature is the lowercase hex HMAC over the four dict frames exactly as
 * received.  Buffers are carried but not signed (as in jupyter_client). */
#ifndef KBOX_WIRE_H
#define KBOX_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <kbox/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KBOX_DELIMITER "<IDS|MSG>"
#define KBOX_PROTOCOL_VERSION "5.3"
/* Signatures remembered for replay protection, per kbox_auth_t, by default. */
#define KBOX_REPLAY_HISTORY 65536
/* A message's header and parent header may be this long, at most. */
#define KBOX_MAX_HEADER_BYTES (64 * 1024)
/* Decoding a message (its four dicts) may take about this much memory, at
 * most: a message of many tiny values is refused before it is parsed. */
#define KBOX_MAX_DECODE_BYTES (128 * 1024 * 1024)

/* One frame: borrowed bytes (valid while their owner lives). */
typedef struct {
	const void *data;
	size_t size;
} kbox_frame_t;

/* ---- kbox_auth_t: a signing key, its scheme, and the replay history ---- */

typedef struct kbox_auth kbox_auth_t;

/* Make a signer for SCHEME ("hmac-sha256"; other schemes fail with
 * KBOX_E_UNSUPPORTED) with KEY of KEYLEN bytes (copied; wiped on destroy).
 * KEYLEN 0 means "no authentication": messages go out with an empty
 * signature and any signature is accepted, as the protocol specifies.
 * Remembers the last HISTORY signatures (0 → KBOX_REPLAY_HISTORY).
 * SCHEME is copied.  New: kbox_auth_destroy(&p); NULL with ERR. */
kbox_auth_t *kbox_auth_new(const char *scheme, const void *key, size_t keylen, size_t history,
                           kbox_error_t *err);

/* Wipe the key, free SELF, set *SELF_P to NULL. Accepts NULL. */
void kbox_auth_destroy(kbox_auth_t **self_p);

/* Write the hex signature of the four dict frames PARTS to OUT (65 bytes:
 * 64 hex digits and a NUL).  With an empty key OUT becomes "". */
void kbox_auth_sign(const kbox_auth_t *self, const kbox_frame_t parts[4], char out[65]);

/* Check SIG (SIGLEN bytes, as received) against PARTS: length first, then a
 * constant-time comparison.  Returns 0 when it matches, -1 with ERR. Does
 * not touch the replay history. */
int kbox_auth_verify(const kbox_auth_t *self, const kbox_frame_t parts[4], const void *sig,
                     size_t siglen, kbox_error_t *err);

/* Record SIG as consumed.  Returns 0 if new, -1 with ERR (KBOX_E_AUTH) if
 * it was already seen.  The history is bounded: the oldest entries go first. */
int kbox_auth_remember(kbox_auth_t *self, const char *sig, size_t siglen, kbox_error_t *err);

/* Number of signatures currently remembered. */
size_t kbox_auth_history_size(const kbox_auth_t *self);

/* ---- kbox_msg_t: one message ---- */

typedef struct kbox_msg kbox_msg_t;

/* A new message of MSG_TYPE from SESSION/USERNAME: a fresh msg_id, the date
 * now (UTC, microseconds), version KBOX_PROTOCOL_VERSION.  *CONTENT_P is
 * taken, also on failure (NULL or CONTENT_P NULL → {}), and *CONTENT_P set
 * to NULL; the strings are copied.  New: kbox_msg_destroy(&p); NULL when
 * out of memory. */
kbox_msg_t *kbox_msg_new(const char *msg_type, const char *session, const char *username,
                         json_t **content_p);

/* Free SELF, set *SELF_P to NULL. Accepts NULL. */
void kbox_msg_destroy(kbox_msg_t **self_p);

/* Make PARENT's header this message's parent_header (copied: a deep copy;
 * out of memory leaves the old one). */
void kbox_msg_set_parent(kbox_msg_t *self, const kbox_msg_t *parent);

/* Append a binary buffer (copied). Returns 0, or -1 on allocation failure. */
int kbox_msg_add_buffer(kbox_msg_t *self, const void *data, size_t size);

/* Append a routing identity (copied), sent before the delimiter. */
int kbox_msg_add_identity(kbox_msg_t *self, const void *data, size_t size);

/* Borrowed views into SELF's header and dicts, valid while SELF lives (and
 * while the dict they come from is not changed through the json_t * getters
 * or kbox_msg_set_parent).  The JSON objects are never NULL; json_incref
 * one to keep it longer.  msg_type and msg_id are NULL only if the header
 * lacks them as strings (a decoded message always has them). */
const char *kbox_msg_type(const kbox_msg_t *self);
const char *kbox_msg_id(const kbox_msg_t *self);
/* parent_header.msg_id, or NULL when there is no parent. */
const char *kbox_msg_parent_id(const kbox_msg_t *self);
/* header.session, or "" (static) */
const char *kbox_msg_session(const kbox_msg_t *self);
json_t *kbox_msg_header(const kbox_msg_t *self);
json_t *kbox_msg_parent_header(const kbox_msg_t *self);
json_t *kbox_msg_metadata(const kbox_msg_t *self);
json_t *kbox_msg_content(const kbox_msg_t *self);
/* The signature as received ("" for messages built locally); borrowed. */
const char *kbox_msg_signature(const kbox_msg_t *self);

/* header.date as seconds since the epoch (UTC).  Parsing is lenient: missing
 * seconds, fraction or zone are accepted; an absent or unreadable date gives 0. */
double kbox_msg_date(const kbox_msg_t *self);

size_t kbox_msg_buffer_count(const kbox_msg_t *self);
/* Frames borrowed from SELF (valid while it lives); I must be below the count. */
kbox_frame_t kbox_msg_buffer(const kbox_msg_t *self, size_t i);
size_t kbox_msg_identity_count(const kbox_msg_t *self);
kbox_frame_t kbox_msg_identity(const kbox_msg_t *self, size_t i);

/* Parse N frames.  Scans for the delimiter, needs at least five frames after
 * it, checks the signature (an empty one is refused when AUTH has a key),
 * refuses a header or parent header over KBOX_MAX_HEADER_BYTES and dicts
 * that would take over KBOX_MAX_DECODE_BYTES to decode (KBOX_E_PROTOCOL),
 * parses the four dicts (each must be a JSON object; header needs msg_id and
 * msg_type strings; bytes that are not UTF-8 read as U+FFFD, as in
 * jupyter_client), then records the signature in AUTH's replay history
 * (a replay fails with KBOX_E_AUTH).  FRAMES are copied (borrowed for the
 * call).  New: kbox_msg_destroy(&p); NULL with ERR. */
kbox_msg_t *kbox_msg_decode(kbox_auth_t *auth, const kbox_frame_t *frames, size_t n,
                            kbox_error_t *err);

/* ---- helpers ---- */

/* Write a fresh random UUID4 string ("8-4-4-4-12", lowercase) to OUT. */
void kbox_uuid(char out[37]);

/* Write the time T (seconds since the epoch) as ISO-8601 UTC with
 * microseconds ("2026-11-29T09:21:39.123456Z") to OUT. */
void kbox_iso8601(double t, char out[32]);

/* Parse an ISO-8601 date leniently; returns seconds since the epoch or 0. */
double kbox_parse_iso8601(const char *s);

#ifdef __cplusplus
}
#endif
#endif
