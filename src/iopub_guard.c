/* src/iopub_guard.c — what stands between a kernel's iopub and the
 * client's memory (iopub_guard.h): the token bucket, the count of
 * messages that never arrived, the look at a dropped message that decodes
 * nothing, and the iopub handler's reading through them. */
#include "client_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the rate limit ---- */

/* A full bucket for MSGS_RATE and BYTES_RATE at NOW_MS (iopub_guard.h). */
void kbox__bucket_init(kbox__bucket_t *b, double msgs_rate, double bytes_rate, long long now_ms)
{
	b->msgs_rate = msgs_rate == 0 ? KBOX_RATE_MSGS_PER_SEC : msgs_rate;
	b->bytes_rate = bytes_rate == 0 ? KBOX_RATE_BYTES_PER_SEC : bytes_rate;
	b->msgs = b->msgs_rate * KBOX_RATE_WINDOW_SEC;
	b->bytes = b->bytes_rate * KBOX_RATE_WINDOW_SEC;
	b->last_ms = now_ms;
}

/* Take one message of SIZE bytes at NOW_MS; false when it is over the limit. */
bool kbox__bucket_take(kbox__bucket_t *b, size_t size, long long now_ms)
{
	double dt = (double)(now_ms - b->last_ms) / 1000.0;
	bool ok = true;
	b->last_ms = now_ms;
	if (b->msgs_rate > 0) {
		b->msgs += dt * b->msgs_rate;
		if (b->msgs > b->msgs_rate * KBOX_RATE_WINDOW_SEC)
			b->msgs = b->msgs_rate * KBOX_RATE_WINDOW_SEC;
		ok = b->msgs >= 1;
	}
	if (b->bytes_rate > 0) {
		b->bytes += dt * b->bytes_rate;
		if (b->bytes > b->bytes_rate * KBOX_RATE_WINDOW_SEC)
			b->bytes = b->bytes_rate * KBOX_RATE_WINDOW_SEC;
		/* a message larger than the window still passes when the bucket is
		 * not in deficit; it is charged in full, so what follows waits */
		ok = ok && b->bytes > 0;
	}
	if (ok) {
		if (b->msgs_rate > 0)
			b->msgs -= 1;
		if (b->bytes_rate > 0)
			b->bytes -= (double)size;
	}
	return ok;
}

/* ---- messages that never arrived ----
 *
 * jupyter_client's Session (ipykernel's) names each message it sends
 * "SESSION_PID_N", N counting every message of the kernel's session on every
 * channel.  Seen from the first message of an execution on (its status
 * busy), the numbers the client never saw are messages lost on the way:
 * what the kernel's iopub socket dropped when its queue to a reader that
 * fell behind was full (ZeroMQ's PUB drops silently).  Kernels that name
 * messages otherwise (a uuid) are not counted. */

/* Note message ID in S (iopub_guard.h); OURS: its parent is the
 * execution's request.  A number is counted once (kernel code can send
 * the same id again), older than the window or too far ahead is ignored.
 * The span runs from the lowest of ours to the highest number: the
 * reply on shell can come before the iopub messages numbered ahead of it,
 * so a number below the first of ours is kept, and counted once one of
 * ours comes below it. */
void kbox__seq_note(kbox__seq_t *s, const char *id, bool ours)
{
	const char *us;
	char *end;
	unsigned long long n;
	size_t plen;

	if (!s || !id || !(us = strrchr(id, '_')) || us[1] < '0' || us[1] > '9')
		return;
	errno = 0;
	n = strtoull(us + 1, &end, 10);
	plen = (size_t)(us - id);
	if (*end || errno || plen == 0 || plen >= sizeof s->prefix)
		return;
	if (!s->set) {
		if (!ours) /* what comes before the execution's first is not counted */
			return;
		if (!s->bits && !(s->bits = calloc(KBOX__SEQ_WINDOW / 8, 1)))
			return;
		memcpy(s->prefix, id, plen);
		s->prefix[plen] = '\0';
		s->set = true;
		s->min = s->max = s->max_ours = n;
		s->seen = 1;
		s->bits[n % KBOX__SEQ_WINDOW / 8] |= (unsigned char)(1u << (n % 8));
		return;
	}
	if (strlen(s->prefix) != plen || memcmp(s->prefix, id, plen) != 0 ||
	    n > s->max + KBOX__SEQ_JUMP || (n <= s->max && s->max - n >= KBOX__SEQ_WINDOW))
		return;
	if (ours && n > s->max_ours)
		s->max_ours = n;
	if (n < s->min) {
		/* the shell reply can come before the iopub messages sent ahead
		 * of it: one of ours below the first starts the span there, and
		 * what was kept below it (not ours) is counted then */
		if (s->bits[n % KBOX__SEQ_WINDOW / 8] & (1u << (n % 8)))
			return;
		s->bits[n % KBOX__SEQ_WINDOW / 8] |= (unsigned char)(1u << (n % 8));
		if (!ours)
			return;
		for (unsigned long long m = n; m < s->min; m++)
			if (s->bits[m % KBOX__SEQ_WINDOW / 8] & (1u << (m % 8)))
				s->seen++;
		s->min = n;
		return;
	}
	if (n > s->max) {
		/* the numbers passed over leave the window unseen */
		unsigned long long k = n - s->max;
		if (k > KBOX__SEQ_WINDOW)
			k = KBOX__SEQ_WINDOW;
		for (unsigned long long m = n; k > 0; k--, m--)
			s->bits[m % KBOX__SEQ_WINDOW / 8] &= (unsigned char)~(1u << (m % 8));
		s->max = n;
	} else if (s->bits[n % KBOX__SEQ_WINDOW / 8] & (1u << (n % 8))) {
		return; /* seen already */
	}
	s->bits[n % KBOX__SEQ_WINDOW / 8] |= (unsigned char)(1u << (n % 8));
	s->seen++;
}

/* The numbers in S's span never seen. */
size_t kbox__seq_lost(const kbox__seq_t *s)
{
	unsigned long long span = s->set ? s->max - s->min + 1 : 0;
	return span > s->seen ? (size_t)(span - s->seen) : 0;
}

/* The numbers in S's span up to the highest of ours never seen: those
 * above it that were seen are taken from the count (the window holds
 * them when they are fewer than it; else the whole span is counted). */
size_t kbox__seq_lost_ours(const kbox__seq_t *s)
{
	unsigned long long above = 0, span;
	if (!s->set || s->max_ours >= s->max || s->max - s->max_ours >= KBOX__SEQ_WINDOW)
		return kbox__seq_lost(s);
	for (unsigned long long m = s->max_ours + 1; m <= s->max; m++)
		above += (s->bits[m % KBOX__SEQ_WINDOW / 8] >> (m % 8)) & 1u;
	span = s->max_ours - s->min + 1;
	return span > s->seen - above ? (size_t)(span - (s->seen - above)) : 0;
}

/* Free S's window and forget what it saw; accepts NULL. */
void kbox__seq_free(kbox__seq_t *s)
{
	if (!s)
		return;
	free(s->bits);
	memset(s, 0, sizeof *s);
}

/* ---- reading a dropped stream message's content, without decoding it ----
 *
 * A hand-written scanner beside jansson, kept because jansson cannot do
 * what is needed here.  The content is unverified (the message is being
 * dropped over the rate limit, before its signature is checked, so that a
 * flood costs no HMAC or decoding) and only its text's length is wanted.
 * jansson has no streaming or skipping parser: json_loadb builds the
 * whole tree, a node for every value and a copy of every string, before
 * one member can be read, and has no bound on what that allocates.  The
 * scanner reads the bytes once, allocates nothing, recurses nowhere, and
 * its time is linear in the input whatever it holds.
 *
 * Measured (bench/bench_iopub_scan.c, CPU time, median of 5, 2-core
 * machine under load, 2026-12-02):
 *
 *   content                              scanner        jansson json_loadb
 *   16 MiB stream message (80 B lines)   14 ms, 0 heap  436 ms, 48 MiB heap
 *   48 MB of [[],[],...] before "text"   31 ms, 0 heap  4.7 s, 1.7 GiB heap
 *                                                       (2.6 GB peak RSS)
 *
 * The second is what a hostile kernel sends to hurt its reader: 16 Mi
 * empty arrays, ~110 bytes of jansson's heap apiece.  wire.c refuses such
 * a message before decoding it (kx_json_cost), but a dropped message is
 * never decoded, and must not cost the reader more than its bytes. */

/* Past the whitespace at P (up to E). */
static const char *js_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* The four hex digits at P (up to E) into *V: 0, or -1 when they are not. */
static int js_hex4(const char *p, const char *e, unsigned *v)
{
	*v = 0;
	if (e - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
		             : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
		             : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
		                                    : 16u;
		if (d > 15)
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* The JSON string at P (its opening quote): past its end, with the bytes
 * of its decoded UTF-8 in *LEN and (with OUT) its first OSZ-1 bytes as
 * written in OUT; NULL when it is not one. */
static const char *js_string(const char *p, const char *e, size_t *len, char *out, size_t osz)
{
	size_t n = 0, o = 0;
	unsigned v, lo;

	if (p >= e || *p != '"')
		return NULL;
	for (p++; p < e; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"') {
			if (out && osz)
				out[o] = '\0';
			*len = n;
			return p + 1;
		}
		if (out && o + 1 < osz)
			out[o++] = (char)c;
		if (c != '\\') {
			n++;
			continue;
		}
		if (++p >= e)
			return NULL;
		if (*p != 'u') {
			n++;
			continue;
		}
		if (js_hex4(p + 1, e, &v) < 0)
			return NULL;
		p += 4;
		if (v >= 0xd800 && v < 0xdc00 && e - p > 6 && p[1] == '\\' && p[2] == 'u' &&
		    js_hex4(p + 3, e, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
			n += 4; /* a surrogate pair: one code point beyond the BMP */
			p += 6;
		} else {
			n += v < 0x80 ? 1 : v < 0x800 ? 2 : 3;
		}
	}
	return NULL;
}

/* Past the JSON value at P (up to E), or NULL when it is cut short.  A
 * container is skipped by counting brackets outside strings, without
 * checking what is inside; a scalar runs to the next delimiter. */
static const char *js_skip(const char *p, const char *e)
{
	size_t l;
	int depth = 0;

	if (p < e && *p == '"')
		return js_string(p, e, &l, NULL, 0);
	if (p < e && *p != '{' && *p != '[') {
		while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' &&
		       *p != '\t' && *p != '\r')
			p++;
		return p;
	}
	while (p < e) {
		if (*p == '"') {
			if (!(p = js_string(p, e, &l, NULL, 0)))
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
		p++;
	}
	return NULL;
}

/* A stream message's content, P (N bytes, unverified): its stream (0
 * stdout, 1 stderr) in *WHICH and the bytes of its text in *BYTES.  False
 * when it has no text to count. */
bool kbox__stream_text(const char *p, size_t n, int *which, size_t *bytes)
{
	const char *e = p + n;
	char key[8], v[8];
	size_t l, vl;
	bool found = false;

	*which = 0;
	*bytes = 0;
	p = js_ws(p, e);
	if (p >= e || *p++ != '{')
		return false;
	for (;;) {
		p = js_ws(p, e);
		if (p < e && *p == '}')
			break;
		if (!(p = js_string(p, e, &l, key, sizeof key)))
			return false;
		p = js_ws(p, e);
		if (p >= e || *p != ':')
			return false;
		p = js_ws(p + 1, e);
		if (l == 4 && strcmp(key, "text") == 0 && p < e && *p == '"')
			found = (p = js_string(p, e, bytes, NULL, 0)) != NULL;
		else if (l == 4 && strcmp(key, "name") == 0 && p < e && *p == '"') {
			if ((p = js_string(p, e, &vl, v, sizeof v)) && vl == 6 &&
			    strcmp(v, "stderr") == 0)
				*which = 1;
		} else
			p = js_skip(p, e);
		if (!p)
			return false;
		p = js_ws(p, e);
		if (p < e && *p == ',') {
			p++;
			continue;
		}
		break;
	}
	return found;
}

/* Is the message of the N FRAMES (raw, unverified) an output message that
 * may be dropped unread?  Only its header's msg_type and its parent's
 * msg_id are looked at; nothing is acted on.  *OURS tells whether the
 * parent is REQ_ID (never when NULL).  For a stream message of ours,
 * *STREAM is 0 (stdout) or 1 (stderr) and *TEXT_BYTES the bytes of its
 * text; else *STREAM is -1. */
bool kbox__droppable_output(const kbox_frame_t *frames, size_t n, const char *req_id, bool *ours,
                            int *stream, size_t *text_bytes, char *msg_id, size_t id_size)
{
	const size_t dlen = sizeof KBOX_DELIMITER - 1;
	const kbox_frame_t *f;
	size_t d;
	bool out = false;

	bool is_stream = false;

	*ours = false;
	*stream = -1;
	*text_bytes = 0;
	msg_id[0] = '\0';
	for (d = 0; d < n; d++)
		if (frames[d].size == dlen && memcmp(frames[d].data, KBOX_DELIMITER, dlen) == 0)
			break;
	/* (unverified: only a short header and parent are parsed; the
	 * signature, frames[d + 1], is skipped) */
	if (d + 2 < n && (f = &frames[d + 2])->size <= KBOX_MAX_HEADER_BYTES) {
		json_t *h = json_loadb((const char *)f->data, f->size, 0, NULL);
		json_t *t = json_object_get(h, "msg_type");
		json_t *mid = json_object_get(h, "msg_id");
		/* a cut id would be another number: none, then */
		if (json_is_string(mid) &&
		    (size_t)snprintf(msg_id, id_size, "%s", json_string_value(mid)) >= id_size)
			msg_id[0] = '\0';
		if (json_is_string(t)) {
			const char *s = json_string_value(t);
			is_stream = strcmp(s, "stream") == 0;
			out = is_stream || strcmp(s, "display_data") == 0 ||
			      strcmp(s, "update_display_data") == 0;
		}
		json_decref(h);
		if (out && d + 3 < n && (f = &frames[d + 3])->size <= KBOX_MAX_HEADER_BYTES) {
			json_t *p = json_loadb((const char *)f->data, f->size, 0, NULL);
			json_t *id = json_object_get(p, "msg_id");
			*ours = req_id && json_is_string(id) &&
			        strcmp(json_string_value(id), req_id) == 0;
			json_decref(p);
			/* metadata, then content: the text is counted, not decoded */
			if (*ours && is_stream && d + 5 < n &&
			    kbox__stream_text((const char *)frames[d + 5].data, frames[d + 5].size,
			                      stream, text_bytes) == false)
				*stream = -1;
		}
	}
	return out;
}

/* The ids of a message that could not be decoded (iopub_guard.h). */
bool kbox__raw_ids(const kbox_frame_t *frames, size_t n, const char *req_id, char *msg_id,
                   size_t id_size)
{
	const size_t dlen = sizeof KBOX_DELIMITER - 1;
	const kbox_frame_t *f;
	bool ours = false;
	size_t d;

	msg_id[0] = '\0';
	for (d = 0; d < n; d++)
		if (frames[d].size == dlen && memcmp(frames[d].data, KBOX_DELIMITER, dlen) == 0)
			break;
	if (d + 2 < n && (f = &frames[d + 2])->size <= KBOX_MAX_HEADER_BYTES) {
		json_t *h = json_loadb((const char *)f->data, f->size, 0, NULL);
		json_t *mid = json_object_get(h, "msg_id");
		if (json_is_string(mid) &&
		    (size_t)snprintf(msg_id, id_size, "%s", json_string_value(mid)) >= id_size)
			msg_id[0] = '\0';
		json_decref(h);
	}
	if (req_id && d + 3 < n && (f = &frames[d + 3])->size <= KBOX_MAX_HEADER_BYTES) {
		json_t *p = json_loadb((const char *)f->data, f->size, 0, NULL);
		json_t *id = json_object_get(p, "msg_id");
		ours = json_is_string(id) && strcmp(json_string_value(id), req_id) == 0;
		json_decref(p);
	}
	return ours;
}

/* ---- the iopub handler's reading ---- */

/* Count *Z_P (SIZE bytes), dropped unread: against X when OURS (with the
 * text of a STREAM, TEXT_BYTES), against the iopub callback otherwise. */
static void iopub_count_drop(kbox_client_t *self, kbox_exec_t *x, bool ours, size_t size,
                             int stream, size_t text_bytes)
{
	if (ours) {
		x->rate_dropped++;
		x->rate_dropped_bytes += size;
		if (stream >= 0) {
			x->drops.stream_messages[stream]++;
			x->drops.stream_bytes[stream] += text_bytes;
		}
	} else {
		self->iopub_dropped++;
		self->iopub_dropped_bytes += size;
	}
}

/* Read one iopub message, P (closed here), through the limit of B
 * (client_int.h). */
kbox_msg_t *iopub_decode(kbox_client_t *self, kbox__parts_t *p, kbox__bucket_t *b, kbox_exec_t *x,
                         const char *req_id)
{
	size_t size = p->bytes;
	bool ours = false, over;
	int stream;
	size_t text_bytes;
	char id[256];

	over = self->shedding || !kbox__bucket_take(b, size, kx_now_ms());
	if (over &&
	    kbox__droppable_output(p->frames, p->n, req_id, &ours, &stream, &text_bytes, id,
	                           sizeof id) &&
	    /* the execution's own output is read all the same while its
	     * receiver keeps it on disk: it is memory that needs the limit */
	    !(ours && !self->shedding && x->run && x->run->o.keep_output &&
	      x->run->o.keep_output(x->run->o.cb_arg))) {
		if (x && x->run)
			kbox__seq_note(self->shared ? NULL : &x->seq, id, ours);
		iopub_count_drop(self, x, ours, size, stream, text_bytes);
		kbox__parts_close(p);
		return NULL;
	}
	return client_decode(self, p, KBOX_CH_IOPUB);
}
