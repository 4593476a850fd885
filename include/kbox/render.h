/* kbox/render.h — renderers of a kbox_result_t: text for a model, one JSON
 * object per execution, and ndjson events as messages arrive.
 *
 * The formats are documented exactly in kbox-run(1) (OUTPUT FORMATS); the
 * JSON schema is tests/result.schema.json. */
#ifndef KBOX_RENDER_H
#define KBOX_RENDER_H

#include <jansson.h>
#include <kbox/capture.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The "schema" member of every JSON object and ndjson event. */
#define KBOX_RESULT_SCHEMA "kbox.result/2"

/* The text a model reads: stdout; then "[stderr]" and stderr; then
 * "Out[N]: " and the value's text/plain; one "[image saved: PATH (W×H px)]"
 * line per image ("[image saved as text: PATH (the SVG has active content:
 * WHY)]" for an SVG written as text); the error as "ENAME: EVALUE" after the stripped
 * traceback; notices and the reason for a timeout or death in brackets.
 * Never base64, never HTML.  A NUL byte in any of it is shown as the two
 * characters "\0" (what follows it is kept), so the text is a C string
 * with no NUL inside.  New: free(p); NULL when out of memory (or RESULT
 * is NULL). */
char *kbox_render_text(const kbox_result_t *result);

/* The same, leaving out stdout and stderr with KBOX_RENDER_NO_STREAMS (for
 * a terminal that showed them as they came). */
#define KBOX_RENDER_NO_STREAMS 1u
/* New: free(p), as kbox_render_text. */
char *kbox_render_text_ex(const kbox_result_t *result, unsigned flags);

/* One JSON object for the whole execution: new, json_decref(p).  Text that is
 * not UTF-8 (a budget may cut a character) has each ill-formed subpart
 * replaced by U+FFFD, here and in the events; a NUL byte is kept (dumped,
 * it is "\u0000"). */
json_t *kbox_render_json(const kbox_result_t *result);

/* One ndjson event for EV, as kbox_event_cb receives it: new,
 * json_decref(p).  CAP and EV are borrowed for the call. */
json_t *kbox_render_event(const kbox_capture_t *cap, const kbox_event_t *ev);

/* The final ndjson event: {"event":"end", …the kbox_render_json members}.
 * New: json_decref(p); NULL when out of memory. */
json_t *kbox_render_end_event(const kbox_result_t *result);

#ifdef __cplusplus
}
#endif
#endif
