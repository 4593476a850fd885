/* kbox/capture.h — the capture layer: one execution's iopub stream turned
 * into a result an agent can read: text with budgets, images in files,
 * errors without terminal escapes, in bounded memory.
 *
 * Feed every iopub message of one execution (kbox_exec_opts_t.on_msg with
 * kbox_capture_on_msg does that), then finish with the execution's outcome.
 * Memory is bounded by the options, not by what the kernel sends: each text
 * keeps a head and a tail in memory and streams everything to a spill file
 * once it outgrows its budget. */
#ifndef KBOX_CAPTURE_H
#define KBOX_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <kbox/error.h>
#include <kbox/wire.h>
#include <kbox/client.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults, chosen so one result fits comfortably in an LLM's context. */
#define KBOX_CAPTURE_MAX_BYTES 16384 /* per text: stdout, stderr, result, error */
#define KBOX_CAPTURE_MAX_LINES 200
#define KBOX_CAPTURE_MAX_BYTES_LIMIT (16u << 20) /* the most max_bytes may be */
#define KBOX_CAPTURE_MAX_DISPLAYS 100            /* display bundles kept; more are counted */
#define KBOX_CAPTURE_MAX_IMAGE_BYTES (64u << 20) /* larger images are not written */
#define KBOX_CAPTURE_LINE_MAX 65536              /* an unterminated line is cut here */
#define KBOX_CAPTURE_MAX_FILES 1000              /* images and spill files one capture makes */
#define KBOX_CAPTURE_MAX_DEPTH 64 /* levels of a kernel's JSON value kept (kbox_json_depth_cut) */

typedef struct {
	size_t max_bytes; /* 0 → KBOX_CAPTURE_MAX_BYTES; at most KBOX_CAPTURE_MAX_BYTES_LIMIT */
	size_t max_lines; /* 0 → KBOX_CAPTURE_MAX_LINES */
	/* Directory for images and spill files (must exist).  NULL: images are
	 * listed with their size but not written, and spilled text is lost. */
	const char *outputs_dir; /* copied */
	/* With HAS_OUTPUTS_FD: that directory, already open (it is duplicated;
	 * the caller keeps OUTPUTS_FD).  Files are made in it, whatever the
	 * path OUTPUTS_DIR (which then only names them) leads to now: a
	 * directory someone else can write in cannot be swapped for a link.
	 * Without it, OUTPUTS_DIR is opened, and a symbolic link as its last
	 * component is refused. */
	bool has_outputs_fd;
	int outputs_fd;
	/* File names are PREFIX + "<execution_count>-<index>.<ext>" for images
	 * (".svg.txt" for an SVG written as text),
	 * PREFIX + "<execution_count>-<stream>.txt" for spills (stdout, stderr,
	 * value, traceback), with 0 for an unknown count.  NULL → ""; a '/' in
	 * it is refused.  Files are created without following symlinks; one in
	 * the way is refused with a notice.  Copied. */
	const char *prefix;
	/* Bounds on what is written into the outputs directory: a spill file
	 * at most SPILL_MAX bytes (0: no bound), and with HAS_FILES_MAX the
	 * spill files and images of this capture together at most FILES_MAX
	 * bytes (a session's outputs quota).  Past them a spill file stops (the
	 * marker then says it holds only the first bytes, never "complete")
	 * and an image is not written (listed with its size), each with a
	 * notice. */
	unsigned long long spill_max;
	bool has_files_max;
	unsigned long long files_max;
	/* A file of the same name already there: replaced when it is a regular
	 * file of ours (a directory only kbox writes in); with KEEP_EXISTING
	 * (someone's own directory) never, the new one named NAME-2.EXT (-3…)
	 * instead. */
	bool keep_existing;
	/* The lines the execution answers input requests with (borrowed; valid
	 * while the capture lives), as kbox_exec_opts_t's: the Kth request is
	 * shown answered with the Kth line, then with end of input. */
	const char *const *input_lines;
	size_t n_input;
} kbox_capture_opts_t;

typedef struct kbox_capture kbox_capture_t;
typedef struct kbox_result kbox_result_t;

/* What a budgeted text looks like after the execution.  The pointers in
 * it, and in kbox_image_t and kbox_output_t below, are borrowed from the
 * result, valid while it lives. */
/* A truncated text reads: head, then one marker line
 *   "[... N bytes in M lines left out; the complete text is in PATH ...]"
 * (without the "; the complete…" part when no spill file could be written),
 * then tail.  Head and tail are whole lines and valid UTF-8.  TEXT holds
 * the bytes the kernel sent, NUL bytes included: use LEN, not strlen (it
 * is NUL-terminated as well).  The spill file holds the same raw bytes. */
typedef struct {
	const char *text;       /* what to show: all of it, or head + marker + tail */
	size_t len;             /* bytes at TEXT (a NUL byte in it counts as one) */
	size_t total_bytes;     /* of the complete text */
	size_t total_lines;     /* newline characters in it */
	bool truncated;         /* the middle was left out of TEXT */
	const char *spill_path; /* the text kept, when truncated (else NULL) */
	/* Stream messages the client dropped unread (kbox_exec_dropped): their
	 * number and the bytes of text in them.  Not in TOTAL_BYTES; TEXT then
	 * ends with a line saying so. */
	size_t dropped_messages, dropped_bytes;
	/* kbox's own lines in TEXT, all else being the kernel's: the marker
	 * line, MARKER_LEN bytes at MARKER_AT (none when MARKER_LEN is 0),
	 * and the line about dropped messages, from NOTE_AT to LEN (none when
	 * NOTE_AT is LEN).  kbox_render_text tells them apart by these. */
	size_t marker_at, marker_len, note_at;
} kbox_text_t;

typedef enum { KBOX_TEXT_STDOUT = 0, KBOX_TEXT_STDERR, KBOX_TEXT_COUNT } kbox_stream_t;

/* One image written (or, without an outputs dir, seen).  An SVG with
 * active content (a script, an event handler, a link out of the image,
 * …: what a browser could run or fetch when a user opens the file) is
 * written as text, to a file named ….svg.txt, and SAVED_AS_TEXT says why. */
typedef struct {
	const char *path;  /* NULL when not written */
	const char *mime;  /* image/png, image/jpeg, image/svg+xml */
	int width, height; /* pixels, from the PNG/JPEG header; -1 when unknown (SVG) */
	size_t bytes;      /* decoded size */
	int display;       /* index of the display it came from, -1 for execute_result */
	/* why PATH is an SVG written as text ("a <script> element"), or NULL */
	const char *saved_as_text;
} kbox_image_t;

/* The outputs of an execution in the order they came, as a notebook keeps
 * them: stream text (consecutive chunks of one stream merged), displays,
 * the execute_result, the error, and input requests with their answers. */
typedef enum {
	KBOX_OUT_STREAM,  /* STREAM, TEXT, LEN, TOTAL_BYTES, TRUNCATED */
	KBOX_OUT_DISPLAY, /* DISPLAY: its index (kbox_result_display) */
	KBOX_OUT_RESULT,  /* the execute_result (kbox_result_value) */
	KBOX_OUT_ERROR,   /* the error (kbox_result_ename…) */
	KBOX_OUT_INPUT,   /* TEXT, LEN: the prompt; VALUE, VALUE_LEN: the line given */
} kbox_output_kind_t;

typedef struct {
	kbox_output_kind_t kind;
	kbox_stream_t stream;
	/* STREAM: this output's part of the stream's text as kbox_result_stream
	 * shows it (the marker line where the middle was left out, the line
	 * about dropped messages at the end); INPUT: the prompt.  LEN bytes. */
	const char *text;
	size_t len;
	size_t total_bytes; /* STREAM: bytes the kernel sent in this output */
	bool truncated;     /* STREAM: some of them are left out of TEXT */
	int display;        /* DISPLAY: its index */
	/* INPUT: the line given (LEN bytes), or NULL when the answer was end
	 * of input (EOF) or PASSWORD hides it */
	const char *value;
	size_t value_len;
	bool password; /* INPUT: asked for a password; the line is not kept */
	/* STREAM: kbox's own lines in TEXT, as kbox_text_t's: the marker line
	 * at MARKER_AT (MARKER_LEN bytes), the line about dropped messages
	 * from NOTE_AT to LEN. */
	size_t marker_at, marker_len, note_at;
} kbox_output_t;

#define KBOX_CAPTURE_MAX_OUTPUTS 1000 /* outputs listed in order; then merged by stream */

/* Events, in arrival order, for streaming front ends (ndjson). */
typedef enum {
	KBOX_EV_STREAM,  /* name, text as the kernel sent it (\r and all) */
	KBOX_EV_DISPLAY, /* a display was added or updated: its index */
	KBOX_EV_CLEAR,   /* clear_output took effect */
	KBOX_EV_RESULT,  /* execute_result */
	KBOX_EV_ERROR,   /* error */
	KBOX_EV_INPUT,   /* an input request answered: its kbox_output_t in OUTPUT */
} kbox_event_type_t;

typedef struct {
	kbox_event_type_t type;
	kbox_stream_t stream; /* KBOX_EV_STREAM */
	const char *text;     /* KBOX_EV_STREAM: the text; NULL otherwise */
	size_t len;
	int display;                 /* KBOX_EV_DISPLAY: the display's index */
	const kbox_output_t *output; /* KBOX_EV_INPUT; NULL otherwise */
} kbox_event_t;

/* CAP, EV and what EV points to are borrowed for the call. */
typedef void(kbox_event_cb)(void *arg, const kbox_capture_t *cap, const kbox_event_t *ev);

/* Bytes this capture has written into the outputs directory so far. */
unsigned long long kbox_capture_files_bytes(const kbox_capture_t *self);

/* The reply SELF's result is to be sent in: at most MAX bytes (0: no
 * bound) as JSON dumped with jansson's FLAGS (JSON_COMPACT and friends),
 * in which each of its texts (a stream, the value's text, the traceback,
 * the error's value, a display's value) appears COPIES times (at least
 * 1).  The MIME values kept are counted as FLAGS dump them from then on;
 * kbox_capture_finish cuts the texts whose JSON does not fit what the
 * rest leaves (the smaller ones are kept whole, the larger share the
 * rest): head, the marker line, tail, as the budgets cut them, with the
 * whole text in a spill file when there is an outputs directory, and a
 * notice naming each text cut.  Call it again to change it before
 * finishing. */
void kbox_capture_set_reply(kbox_capture_t *self, size_t max, unsigned copies, size_t flags);

/* A new capture.  OPTS may be NULL; it is copied (its strings too, except
 * INPUT_LINES, borrowed as said there).  New: kbox_capture_destroy(&p), or
 * kbox_capture_finish; NULL with ERR on failure. */
kbox_capture_t *kbox_capture_new(const kbox_capture_opts_t *opts, kbox_error_t *err);

/* Call CB for each event as messages are fed.  ARG is borrowed: it must
 * stay valid while SELF is fed. */
void kbox_capture_set_event_cb(kbox_capture_t *self, kbox_event_cb *cb, void *arg);

/* While capturing, for event renderers (kbox_render_event): display INDEX's
 * bundle (NULL for an index out of range) and its display_id (NULL when it
 * has none), the execute_result bundle (NULL before one came), and the
 * error's name and value (NULL before one came; *LEN their bytes, NUL
 * bytes and all).
 * Borrowed from CAP: valid until the next kbox_capture_feed (or
 * kbox_capture_input) and never after CAP is destroyed. */
json_t *kbox_capture_display(const kbox_capture_t *cap, int index);
const char *kbox_capture_display_id(const kbox_capture_t *cap, int index);
json_t *kbox_capture_value(const kbox_capture_t *cap);
const char *kbox_capture_ename(const kbox_capture_t *cap, size_t *len);
const char *kbox_capture_evalue(const kbox_capture_t *cap, size_t *len);

/* Take one iopub message of the execution (borrowed for the call: what
 * is kept is copied).  Unknown types are
 * ignored.  Returns 0, or -1 with ERR when the message gave a new notice (a
 * file not written, invalid base64; the capture goes on and the notice is
 * in the result) or memory ran out.  In result bundles an image becomes
 * {"path", "bytes", "width", "height"} (and "saved_as_text" for an SVG
 * written as text; other image types: {"path": null, "bytes", "error"})
 * and a non-image value over 64 KiB, or beyond 8 MiB of such values in one
 * capture, becomes {"omitted_bytes": N}. */
int kbox_capture_feed(kbox_capture_t *self, const kbox_msg_t *msg, kbox_error_t *err);

/* An input request of the execution (a stdin input_request, borrowed):
 * listed in the outputs with its prompt and the answer the lines of the
 * options give it.  MSG is borrowed for the call. */
void kbox_capture_input(kbox_capture_t *self, const kbox_msg_t *msg);

/* Can SELF still write text it is given into its outputs directory (there
 * is one, and a spill file open with room left in its quota, or room for
 * a new one: a file and a block of 4096 bytes)?  While it can, a client need not
 * drop the execution's output to bound its memory (kbox_exec_opts_t's
 * keep_output). */
bool kbox_capture_can_spill(const kbox_capture_t *self);

/* A kbox_exec_cb that feeds ARG (a kbox_capture_t *) and goes on: iopub
 * messages to kbox_capture_feed, input requests to kbox_capture_input. */
int kbox_capture_on_msg(void *arg, kbox_channel_t channel, const kbox_msg_t *msg);

/* Finish: flush pending text, take status, count, time and reason from EXEC
 * (borrowed; NULL for a capture without an execution; a status "ok" with
 * an error captured is KBOX_EXEC_ERROR), and return the
 * result: new, kbox_result_destroy(&p).  *SELF_P is taken and set to
 * NULL, except when out of memory: NULL is then returned and *SELF_P is
 * left as it was, still the caller's to destroy.  NULL too when *SELF_P
 * is NULL. */
kbox_result_t *kbox_capture_finish(kbox_capture_t **self_p, const kbox_exec_t *exec);

/* Free SELF (and close spill files). Accepts NULL. */
void kbox_capture_destroy(kbox_capture_t **self_p);

/* ---- the result ----
 *
 * Every pointer the getters below return is borrowed from the result,
 * valid while it lives (the "" of an absent text is static); none is
 * freed by the caller.  json_incref a bundle to keep it longer. */

/* Free SELF, set *SELF_P to NULL.  Accepts NULL. */
void kbox_result_destroy(kbox_result_t **self_p);

kbox_exec_status_t kbox_result_status(const kbox_result_t *self);
int kbox_result_count(const kbox_result_t *self); /* execution_count, or -1 */
/* The execution_count the value's execute_result carried (as nbformat
 * keeps it), else kbox_result_count. */
int kbox_result_value_count(const kbox_result_t *self);
double kbox_result_seconds(const kbox_result_t *self);
/* Why it did not end normally (timeout, died), or "".  Borrowed: a buffer
 * in SELF, overwritten by kbox_result_set_status. */
const char *kbox_result_reason(const kbox_result_t *self);
/* The execution's host-function calls (kbox_exec_calls), or NULL when it
 * made none.  Borrowed: valid while SELF lives. */
const json_t *kbox_result_calls(const kbox_result_t *self);

/* NULL for a bad STREAM. */
const kbox_text_t *kbox_result_stream(const kbox_result_t *self, kbox_stream_t stream);

/* execute_result: its MIME bundle (data with images replaced by
 * {"path":…} references) or NULL, and its text/plain budgeted (NULL when
 * there is no execute_result). */
json_t *kbox_result_value(const kbox_result_t *self);
const kbox_text_t *kbox_result_value_text(const kbox_result_t *self);

/* The outputs in order (see kbox_output_t): COUNT of them; the Ith, or
 * NULL past the end. */
size_t kbox_result_output_count(const kbox_result_t *self);
const kbox_output_t *kbox_result_output(const kbox_result_t *self, size_t i);

/* Displays still shown at the end (after clear_output and updates), each
 * a MIME bundle with images replaced by references. */
size_t kbox_result_display_count(const kbox_result_t *self);
json_t *kbox_result_display(const kbox_result_t *self, size_t i);
/* NULL past the end. */
const char *kbox_result_display_id(const kbox_result_t *self, size_t i); /* or NULL */
/* Whether display I is an update_display_data of a display of an earlier
 * execution (its display_id none of this execution's had). */
bool kbox_result_display_updates_earlier(const kbox_result_t *self, size_t i);

size_t kbox_result_image_count(const kbox_result_t *self);
const kbox_image_t *kbox_result_image(const kbox_result_t *self, size_t i);

/* The error, when the code raised: name, value, the traceback with ANSI
 * escapes stripped and budgeted, and the traceback array as sent.  Name
 * and value may hold NUL bytes (NUL-terminated all the same): their
 * lengths are in *LEN (may be NULL).  Without an error: "" (static) for
 * name and value, NULL for the traceback.  The traceback's text is
 * replaced by kbox_result_set_error_text. */
bool kbox_result_has_error(const kbox_result_t *self);
const char *kbox_result_ename(const kbox_result_t *self, size_t *len);
const char *kbox_result_evalue(const kbox_result_t *self, size_t *len);
const kbox_text_t *kbox_result_traceback(const kbox_result_t *self);
json_t *kbox_result_traceback_raw(const kbox_result_t *self);

/* Things the reader should know ("2 displays beyond the limit of 100 were
 * not kept", "image 3 could not be written: …"). */
size_t kbox_result_notice_count(const kbox_result_t *self);
const char *kbox_result_notice(const kbox_result_t *self, size_t i);

/* REASON and TEXT are copied (REASON cut at 1023 bytes).
 * For front ends that know more than the kernel told (a session whose
 * kernel was restarted, an execution ended by killing the kernel): set the
 * status and reason (REASON may be NULL to keep it), and add a notice, at
 * the start of the list with FIRST.  0, or -1 when out of memory or over 64
 * notices. */
void kbox_result_set_status(kbox_result_t *self, kbox_exec_status_t status, const char *reason);
int kbox_result_add_notice(kbox_result_t *self, const char *text, bool first);
/* Show the error's traceback as the one line LINE (a front end that knows
 * better what the reader needs: an interrupt, a request for input no one
 * can answer); the raw traceback stays.  LINE is copied.  0, or -1 when
 * out of memory. */
int kbox_result_set_error_text(kbox_result_t *self, const char *line);

/* ---- helpers, public because front ends need them too ---- */

/* Remove ANSI escape sequences (CSI, OSC, two-byte) from S into a new
 * string: new, free(p); its length in *OUT_LEN. */
char *kbox_strip_ansi(const char *s, size_t len, size_t *out_len);

/* The bytes the LEN bytes at S take as a JSON string, its quotes
 * included, once made valid UTF-8 (kx_utf8_repair: an ill-formed subpart
 * counted as U+FFFD per byte, an upper bound) and dumped by jansson with
 * FLAGS: a control character takes 6 ("\u0001"), or 2 for \b \f \n \r
 * \t; '"' and '\\' 2; '/' 2 with JSON_ESCAPE_SLASH; with
 * JSON_ENSURE_ASCII a character past U+007F 6, past U+FFFF 12. */
size_t kbox_json_string_size(const char *s, size_t len, size_t flags);

/* V (borrowed; may be NULL) with each value nested more than MAX_DEPTH
 * levels deep (a scalar is 0 levels, [] 1, [[]] 2; MAX_DEPTH at least 1)
 * replaced by {"omitted": "nested deeper than MAX_DEPTH levels"}: a new
 * reference, V itself when nothing had to be; NULL when V is NULL or
 * memory ran out. */
json_t *kbox_json_depth_cut(json_t *v, size_t max_depth);

/* Read the pixel size of a PNG or JPEG image.  0, or -1 if not recognised. */
int kbox_image_size(const void *data, size_t len, int *width, int *height);

#ifdef __cplusplus
}
#endif
#endif
