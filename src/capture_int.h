/* src/capture_int.h — the state of a capture (kbox/capture.h) and the calls
 * between its two files (private to libkbox).
 *
 *   capture.c  one execution's iopub messages turned into a bounded
 *              result: outputs in order, displays, images, the value,
 *              the error, notices, the outputs directory and its quota
 *   textbuf.c  budgeted text (tbuf_t): the terminal model (\r, \b, a
 *              line at a time), the head kept in memory, the tail in a
 *              ring, all of it in a spill file, and the view of head,
 *              marker line and tail
 *
 * A text buffer borrows from its capture only the outputs directory with
 * its quota (capture_files_room, capture_create_output, files_bytes,
 * files_made), the notices (capture_notice), the out-of-memory flag and,
 * for its marker line, how many messages never arrived. */
#ifndef KBOX_CAPTURE_INT_H
#define KBOX_CAPTURE_INT_H

#include "private.h"

#include <stdbool.h>
#include <stddef.h>

/* A file costs the quota at least one block, as on disk, so that empty
 * files cannot make an unbounded number of them; and one capture makes at
 * most KBOX_CAPTURE_MAX_FILES. */
#define FILE_BLOCK 4096ULL
/* Why a file was not written, or stopped, when the outputs quota has no
 * room: said to the model (what it can do) and to the person (what sets
 * the quota): capture_quota_why. */

/* ---- budgeted text: head in memory, tail in a ring, all of it in a spill file ---- */

typedef struct {
	/* the terminal line being written (\r and \b act on it) */
	char *line;
	size_t line_len, line_cap, cursor;
	/* committed text */
	size_t total_bytes, total_lines;
	char *head;
	size_t head_len, head_lines, head_max, head_max_lines;
	bool head_full;
	char *ring;
	size_t ring_max, ring_start, ring_len;
	bool ring_wrapped; /* bytes were pushed out of the ring */
	/* spill */
	int spill_fd;
	char *spill_path;
	bool spill_failed;
	size_t spill_bytes; /* written (or queued) into it */
	bool spill_cut;     /* it stopped at a bound: it holds the first SPILL_BYTES only */
	char *sbuf;
	size_t sbuf_len;
	/* the finished view: committed bytes [0, fin_head) are at the start of
	 * VIEW_TEXT, a marker line of fin_marker bytes follows, then committed
	 * bytes [fin_tail, total_bytes), then fin_extra bytes (a note) */
	kbox_text_t view;
	char *view_text;
	size_t fin_head, fin_marker, fin_tail, fin_extra;
} tbuf_t;

/* One output in order: its public view, and for stream text the bytes of
 * the stream it holds, [from, to). */
typedef struct {
	kbox_output_t pub;
	size_t from, to;
	char *text, *value; /* owned */
} out_t;

struct kbox_capture {
	kbox_capture_opts_t opts;
	char *outputs_dir;
	int dfd; /* the outputs dir, opened once: names resolve in it */
	char *prefix;
	int count;                      /* execution_count, once known */
	int value_count;                /* the execute_result's own, or -1 */
	int image_seq;                  /* images written in this execution */
	size_t files_made;              /* images and spill files created */
	unsigned long long files_bytes; /* written into the outputs directory */
	tbuf_t streams[KBOX_TEXT_COUNT];
	bool pending_clear;
	/* displays */
	json_t *displays; /* array of {"data", "display_id"} */
	size_t displays_dropped;
	size_t kept_bytes; /* of non-image MIME values kept in bundles, as JSON */
	/* value */
	json_t *value;
	tbuf_t value_text;
	bool has_value;
	/* images: array of kbox_image_t, strings owned */
	kbox_image_t *images;
	size_t n_images, cap_images;
	/* the image files written in this execution, by a hash of their
	 * bytes: the same image again is not written again */
	struct written_image {
		unsigned char hash[32];
		char *path;
	} * written;
	size_t n_written, cap_written;
	/* error */
	bool has_error;
	char *ename, *evalue; /* NUL bytes and all: the lengths say where they end */
	size_t ename_len, evalue_len;
	json_t *traceback_raw;
	size_t traceback_raw_bytes; /* as JSON */
	tbuf_t traceback;
	/* outputs in order */
	out_t *outs;
	size_t n_outs, cap_outs;
	bool outs_full;       /* KBOX_CAPTURE_MAX_OUTPUTS reached: streams merge */
	size_t never_arrived; /* messages of the execution lost before the client */
	size_t inputs_seen;
	/* notices */
	char **notices;
	size_t n_notices;
	kbox_event_cb *cb;
	void *cb_arg;
	bool oom;
	/* the reply the result goes in (kbox_capture_set_reply) */
	size_t reply_max;
	unsigned reply_copies;
	size_t json_flags;
};

/* ---- capture.c ---- */

/* Add a printf-style notice (cut at 511 bytes) at the end of SELF's. */
void capture_notice(kbox_capture_t *self, const char *fmt, ...) KBOX_PRINTF(2, 3);

/* Create NAME in SELF's outputs directory without following symlinks and
 * without writing through another name of an existing file; its path (new)
 * in *PATH_OUT.  fd, or -1 with errno. */
int capture_create_output(kbox_capture_t *self, const char *name, char **path_out);

/* Remove the file PATH (made by capture_create_output) by its name in DFD. */
void capture_unlink_output(int dfd, const char *path);

/* How many bytes the outputs directory may still take: ULLONG_MAX without
 * a bound. */
unsigned long long capture_files_room(const kbox_capture_t *self);
/* Why the outputs quota has no room, for a note: filled by earlier
 * results in the session's outputs, or by this execution. */
const char *capture_quota_why(const kbox_capture_t *self);

/* ---- textbuf.c ---- */

/* An empty T for MAX_BYTES (half for the head, half for the tail) and
 * MAX_LINES (likewise; one at least). */
void tbuf_init(tbuf_t *t, size_t max_bytes, size_t max_lines);
/* Forget T's text (a clear_output): its spill file is removed from DFD. */
void tbuf_reset_text(tbuf_t *t, int dfd);
/* Free what T holds (its spill file stays); T is then empty. */
void tbuf_free(tbuf_t *t);
/* Append N bytes of P to T's committed text (LABEL names it in notices
 * and its spill file). */
void tbuf_commit(kbox_capture_t *self, tbuf_t *t, const char *label, const char *p, size_t n);
/* Feed N bytes of stream text P through T's terminal model. */
void tbuf_feed(kbox_capture_t *self, tbuf_t *t, const char *label, const char *p, size_t n);
/* Commit the line being written (not a newline: the caller adds that). */
void tbuf_line_flush(kbox_capture_t *self, tbuf_t *t, const char *label);
/* Build T's view (T->view): all of it, or head + marker + tail; then,
 * when DROPPED_MESSAGES of DROPPED_BYTES of text were dropped, a line
 * saying so.  The spill file is closed, or removed when not needed. */
void tbuf_finish(kbox_capture_t *self, tbuf_t *t, const char *label, size_t dropped_messages,
                 size_t dropped_bytes);
/* Cut T's view (after tbuf_finish) so that it takes at most MAX bytes as
 * a JSON string dumped with the capture's flags: its head and its tail
 * kept, a marker line between them, as the budgets cut; the whole text
 * goes into a spill file first when none holds it yet.  True when it was
 * cut. */
bool tbuf_fit(kbox_capture_t *self, tbuf_t *t, const char *label, size_t max);
/* The text is final: its spill file is removed when its view is whole
 * (tbuf_finish keeps it while a reply may still cut the view). */
void tbuf_settle(kbox_capture_t *self, tbuf_t *t);

#endif
