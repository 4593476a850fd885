/* src/iopub_guard.h — what stands between a kernel's iopub and the client's
 * memory: the rate limit (a token bucket), the count of messages that never
 * arrived (gaps in the kernel's message numbers), and a look at an output
 * message that is dropped unread, which decodes nothing and acts on nothing.
 *
 * Internal to libkbox (kbox__ prefix).  The client's iopub handler
 * (client_int.h: iopub_decode) is the caller; tests/unit_iopub_guard.c is
 * the specification.  Nothing here touches a socket or a clock: the caller
 * says what time it is. */
#ifndef KBOX_IOPUB_GUARD_H
#define KBOX_IOPUB_GUARD_H

#include "private.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- the rate limit ---- */

/* A token bucket for iopub output: messages and bytes per second, with a
 * burst of KBOX_RATE_WINDOW_SEC seconds' worth. */
typedef struct {
	double msgs_rate, bytes_rate; /* per second; <= 0: unlimited */
	double msgs, bytes;           /* tokens */
	long long last_ms;            /* when the tokens were counted */
} kbox__bucket_t;

/* Fill B for MSGS_RATE and BYTES_RATE (0: KBOX_RATE_MSGS_PER_SEC and
 * KBOX_RATE_BYTES_PER_SEC; < 0: no limit), full at NOW_MS (kx_now_ms). */
void kbox__bucket_init(kbox__bucket_t *b, double msgs_rate, double bytes_rate, long long now_ms);

/* Take one message of SIZE bytes at NOW_MS: true when it is within the
 * limit (its tokens are then taken), false when it is over it (nothing is
 * taken).  A message larger than the whole window passes when the byte
 * tokens are not in deficit, and is charged in full. */
bool kbox__bucket_take(kbox__bucket_t *b, size_t size, long long now_ms);

/* ---- messages that never arrived ---- */

/* The kernel's message numbers seen during one execution (see
 * kbox__seq_note).  Zeroed: nothing seen yet. */
typedef struct {
	char prefix[192]; /* "SESSION_PID" of the numbering followed */
	bool set;         /* the execution's first message was seen */
	unsigned long long min, max, seen;
	unsigned long long max_ours; /* the highest number of the execution's own */
	unsigned char *bits;         /* the last KBOX__SEQ_WINDOW numbers: seen or not */
} kbox__seq_t;

#define KBOX__SEQ_WINDOW 65536      /* numbers remembered, to count each once */
#define KBOX__SEQ_JUMP (1ULL << 20) /* a larger jump is another numbering, not a loss */

/* Message ID ("SESSION_PID_N"; verified, or read unverified from a message
 * dropped and counted) came; OURS: its parent is the execution's request.
 * Counting starts with the first of ours; the span runs from the lowest
 * of ours (the shell reply can come before the iopub messages numbered
 * ahead of it) to the highest number.  A number is counted once; one
 * older than the window or too far ahead is ignored, as is an id not of
 * that form or of another prefix.  S NULL: nothing. */
void kbox__seq_note(kbox__seq_t *s, const char *id, bool ours);

/* The numbers between the first and the last seen that were never seen. */
size_t kbox__seq_lost(const kbox__seq_t *s);
/* The same up to the highest of the execution's own: for an execution
 * whose idle came, the last of its messages.  What is numbered after it
 * is another request's (a kernel_info probe's status, on its way while
 * the probe's reply came ahead of that idle on shell). */
size_t kbox__seq_lost_ours(const kbox__seq_t *s);

/* Free what S holds (it may be noted into again); accepts NULL. */
void kbox__seq_free(kbox__seq_t *s);

/* ---- a dropped message, looked at without decoding it ---- */

/* A stream message's content P (N bytes, unverified JSON): its stream (0
 * stdout, 1 stderr) in *WHICH and the UTF-8 bytes of its "text" once
 * decoded in *BYTES.  False when there is no text to count (not an object,
 * no "text" string, cut short, malformed).  Reads P once, allocates
 * nothing, and takes time in proportion to N whatever P holds. */
bool kbox__stream_text(const char *p, size_t n, int *which, size_t *bytes);

/* Is the message of the N FRAMES (raw, unverified) an output message (stream, display_data,
 * update_display_data) that may be dropped unread?  Only its header's
 * msg_type and msg_id (into MSG_ID, ID_SIZE bytes, "" if none) and its
 * parent's msg_id are decoded, each at most KBOX_MAX_HEADER_BYTES.  *OURS
 * tells whether the parent is REQ_ID (never when NULL).  For a stream
 * message of ours, *STREAM is 0 (stdout) or 1 (stderr) and *TEXT_BYTES the
 * bytes of its text (kbox__stream_text); else *STREAM is -1 and
 * *TEXT_BYTES 0. */
bool kbox__droppable_output(const kbox_frame_t *frames, size_t n, const char *req_id, bool *ours,
                            int *stream, size_t *text_bytes, char *msg_id, size_t id_size);

/* The header's msg_id of the message of the N FRAMES (raw, unverified:
 * one that could not be decoded) into MSG_ID (ID_SIZE bytes, "" if none),
 * each of header and parent decoded at most KBOX_MAX_HEADER_BYTES; true
 * when its parent's msg_id is REQ_ID (never when NULL). */
bool kbox__raw_ids(const kbox_frame_t *frames, size_t n, const char *req_id, char *msg_id,
                   size_t id_size);

#endif
