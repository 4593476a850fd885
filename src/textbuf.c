/* src/textbuf.c — budgeted text, as a stream, a value or a traceback is
 * kept (capture_int.h: tbuf_t): the terminal model (\r returns to the
 * start of the line, \b steps back a character, a line is written at a
 * time), the head kept in memory, the tail in a ring, all of it in a
 * spill file in the outputs directory (through a block buffer, within the
 * capture's quota), and the view: all of it, or head, marker line and
 * tail. */
#include "capture_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPILL_BUF 65536 /* spill writes are gathered into blocks this big */

/* An empty T for MAX_BYTES and MAX_LINES (capture_int.h). */
void tbuf_init(tbuf_t *t, size_t max_bytes, size_t max_lines)
{
	memset(t, 0, sizeof *t);
	t->head_max = max_bytes / 2;
	t->head_max_lines = max_lines / 2 ? max_lines / 2 : 1;
	t->ring_max = max_bytes - t->head_max;
	t->spill_fd = -1;
}

/* Forget T's text, its spill file removed from DFD (capture_int.h). */
void tbuf_reset_text(tbuf_t *t, int dfd)
{
	t->total_bytes = t->total_lines = 0;
	t->head_len = t->head_lines = 0;
	t->head_full = false;
	t->ring_start = t->ring_len = 0;
	t->ring_wrapped = false;
	t->line_len = t->cursor = 0;
	t->sbuf_len = 0;
	/* the cleared text is gone: a later spill starts afresh with the new head */
	if (t->spill_fd >= 0) {
		close(t->spill_fd);
		t->spill_fd = -1;
	}
	if (t->spill_path) {
		capture_unlink_output(dfd, t->spill_path);
		free(t->spill_path);
		t->spill_path = NULL;
	}
	t->spill_failed = false;
	t->spill_bytes = 0;
	t->spill_cut = false;
}

/* Free what T holds; T is then empty (capture_int.h). */
void tbuf_free(tbuf_t *t)
{
	if (t->spill_fd >= 0)
		close(t->spill_fd);
	free(t->line);
	free(t->head);
	free(t->ring);
	free(t->spill_path);
	free(t->view_text);
	free(t->sbuf);
	memset(t, 0, sizeof *t);
	t->spill_fd = -1;
}

/* Write what T's block buffer gathered to its spill file; a failure is
 * noted once and ends the spilling. */
static void spill_flush(kbox_capture_t *self, tbuf_t *t)
{
	if (t->spill_fd >= 0 && t->sbuf_len && !t->spill_failed &&
	    kx_write_all(t->spill_fd, t->sbuf, t->sbuf_len) < 0) {
		capture_notice(self, "writing %s failed: %s", t->spill_path, strerror(errno));
		t->spill_failed = true;
	}
	t->sbuf_len = 0;
}

/* N bytes for a notice: "1 GiB", "512 MiB", "1000 bytes". */
/* How many of N bytes may still go into T's spill file (counted as
 * written); when fewer, the file is cut there for good, with a notice. */
static size_t spill_room(kbox_capture_t *self, tbuf_t *t, size_t n, const char *label)
{
	unsigned long long room = capture_files_room(self), own = ULLONG_MAX;
	char lim[32];
	if (self->opts.spill_max)
		own = self->opts.spill_max > t->spill_bytes ? self->opts.spill_max - t->spill_bytes
		                                            : 0;
	if (n <= room && n <= own) {
		t->spill_bytes += n;
		self->files_bytes += n;
		return n;
	}
	t->spill_cut = true;
	if (own < room) {
		kx_fmt_bytes(lim, sizeof lim, (long long)self->opts.spill_max);
		room = own;
		capture_notice(
		        self,
		        "the %s spill file stopped at %s (the largest file the session may write)",
		        label, lim);
	} else {
		capture_notice(self, "the %s spill file stopped at %llu bytes: %s", label,
		               (unsigned long long)t->spill_bytes + room, capture_quota_why(self));
	}
	t->spill_bytes += (size_t)room;
	self->files_bytes += room;
	return (size_t)room;
}

/* Append to the spill file through a block buffer. */
static void spill_write(kbox_capture_t *self, tbuf_t *t, const char *p, size_t n, const char *label)
{
	if (t->spill_fd < 0 || t->spill_failed || t->spill_cut)
		return;
	n = spill_room(self, t, n, label);
	if (n == 0)
		return;
	if (!t->sbuf && !(t->sbuf = malloc(SPILL_BUF))) {
		self->oom = true;
		return;
	}
	if (t->sbuf_len + n > SPILL_BUF)
		spill_flush(self, t);
	if (n >= SPILL_BUF) {
		if (kx_write_all(t->spill_fd, p, n) < 0) {
			capture_notice(self, "writing %s failed: %s", t->spill_path,
			               strerror(errno));
			t->spill_failed = true;
		}
		return;
	}
	memcpy(t->sbuf + t->sbuf_len, p, n);
	t->sbuf_len += n;
}

/* Open T's spill file (once), within the capture's quota and count of
 * files, and write the head into it: the file then holds the whole text,
 * as far as the quota goes.  A failure is noted and ends the spilling. */
static void tbuf_spill_open(kbox_capture_t *self, tbuf_t *t, const char *label)
{
	char name[256];
	if (t->spill_fd >= 0 || t->spill_failed)
		return;
	if (self->dfd >= 0 && capture_files_room(self) <= FILE_BLOCK) { /* not a byte of text */
		t->spill_failed = true;
		capture_notice(self, "the complete %s was not saved: %s", label,
		               capture_quota_why(self));
		return;
	}
	if (self->dfd >= 0 && self->files_made >= KBOX_CAPTURE_MAX_FILES) {
		t->spill_failed = true;
		capture_notice(
		        self, "the complete %s was not saved: this execution made %d files already",
		        label, KBOX_CAPTURE_MAX_FILES);
		return;
	}
	snprintf(name, sizeof name, "%s%d-%s.txt", self->prefix, self->count < 0 ? 0 : self->count,
	         label);
	t->spill_fd = capture_create_output(self, name, &t->spill_path);
	if (t->spill_fd >= 0) {
		self->files_made++;
		self->files_bytes += FILE_BLOCK; /* its first block, whatever it holds */
	}
	if (t->spill_fd < 0) {
		t->spill_failed = true;
		if (self->outputs_dir)
			capture_notice(self, "the complete %s could not be saved to %s/%s: %s",
			               label, self->outputs_dir, name, strerror(errno));
		return;
	}
	{
		size_t n = spill_room(self, t, t->head_len, label);
		if (n && kx_write_all(t->spill_fd, t->head, n) < 0) {
			capture_notice(self, "writing %s failed: %s", t->spill_path,
			               strerror(errno));
			t->spill_failed = true;
		}
	}
}

/* Take what fits of P[0..N) into T's head: whole lines while they fit,
 * then of the next what fits up to a character boundary (the head is then
 * full), never more lines than its budget.  0 with the bytes taken in
 * *TAKEN, or -1 when out of memory. */
static int head_take(kbox_capture_t *self, tbuf_t *t, const char *p, size_t n, size_t *taken)
{
	size_t take = 0;
	while (take < n && !t->head_full) {
		const char *nl = memchr(p + take, '\n', n - take);
		size_t len = nl ? (size_t)(nl - (p + take)) + 1 : n - take;
		if (t->head_len + len > t->head_max) {
			len = kx_utf8_floor(p + take, n - take, t->head_max - t->head_len);
			t->head_full = true;
		}
		if (len) {
			if (!t->head && !(t->head = malloc(t->head_max + 1))) {
				self->oom = true;
				return -1;
			}
			memcpy(t->head + t->head_len, p + take, len);
			t->head_len += len;
			take += len;
			if (nl && take == (size_t)(nl - p) + 1)
				t->head_lines++;
		}
		if (t->head_lines >= t->head_max_lines)
			t->head_full = true;
		if (!nl)
			break;
	}
	*taken = take;
	return 0;
}

/* Push P[0..N) into T's ring, the oldest bytes giving way. */
static void ring_push(kbox_capture_t *self, tbuf_t *t, const char *p, size_t n)
{
	if (!t->ring_max)
		return;
	if (!t->ring && !(t->ring = malloc(t->ring_max))) {
		self->oom = true;
		return;
	}
	if (n >= t->ring_max) {
		if (n > t->ring_max || t->ring_len)
			t->ring_wrapped = true;
		memcpy(t->ring, p + n - t->ring_max, t->ring_max);
		t->ring_start = 0;
		t->ring_len = t->ring_max;
		return;
	}
	for (size_t i = 0; i < n;) {
		size_t end = (t->ring_start + t->ring_len) % t->ring_max;
		size_t room = t->ring_max - end, chunk = n - i < room ? n - i : room;
		if (t->ring_len == t->ring_max) {
			/* full: overwrite the oldest */
			end = t->ring_start;
			room = t->ring_max - end;
			chunk = n - i < room ? n - i : room;
			memcpy(t->ring + end, p + i, chunk);
			t->ring_start = (t->ring_start + chunk) % t->ring_max;
			t->ring_wrapped = true;
		} else {
			size_t free_ = t->ring_max - t->ring_len;
			if (chunk > free_)
				chunk = free_;
			memcpy(t->ring + end, p + i, chunk);
			t->ring_len += chunk;
		}
		i += chunk;
	}
}

/* Append committed text: the head while it has room, then the ring and
 * (from then on) the spill file. */
void tbuf_commit(kbox_capture_t *self, tbuf_t *t, const char *label, const char *p, size_t n)
{
	if (!n)
		return;
	t->total_bytes += n;
	for (size_t i = 0; i < n; i++)
		if (p[i] == '\n')
			t->total_lines++;
	if (!t->head_full) {
		size_t take;
		if (head_take(self, t, p, n, &take) < 0)
			return;
		p += take;
		n -= take;
		if (!n)
			return;
		t->head_full = true;
	}
	tbuf_spill_open(self, t, label);
	spill_write(self, t, p, n, label);
	ring_push(self, t, p, n);
}

/* Room for NEED bytes in T's line buffer (doubling).  0, or -1 when out
 * of memory. */
static int line_reserve(tbuf_t *t, size_t need)
{
	if (need <= t->line_cap)
		return 0;
	{
		size_t cap = t->line_cap ? t->line_cap : 256;
		char *l;
		while (cap < need)
			cap *= 2;
		l = realloc(t->line, cap);
		if (!l)
			return -1;
		t->line = l;
		t->line_cap = cap;
	}
	return 0;
}

/* Commit the line being written (not a newline: the caller adds that). */
void tbuf_line_flush(kbox_capture_t *self, tbuf_t *t, const char *label)
{
	tbuf_commit(self, t, label, t->line, t->line_len);
	t->line_len = t->cursor = 0;
}

/* Number of code points in P[0..N). */
static size_t cp_count(const char *p, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)p[i] & 0xc0) != 0x80;
	return c;
}

/* Write RUN (no \n, \r, \b in it) at the cursor, overwriting as a terminal does. */
static void line_write(kbox_capture_t *self, tbuf_t *t, const char *label, const char *p, size_t n)
{
	if (t->cursor == 0 && t->line_len && n >= t->line_len &&
	    cp_count(p, n) >= cp_count(t->line, t->line_len)) {
		/* after \r, a run that covers the whole line replaces it (a
		 * progress bar redrawn): no need to overwrite it code point by
		 * code point */
		t->line_len = 0;
	}
	if (t->cursor == t->line_len) {
		if (line_reserve(t, t->line_len + n) < 0) {
			self->oom = true;
			return;
		}
		memcpy(t->line + t->line_len, p, n);
		t->line_len += n;
		t->cursor = t->line_len;
	} else {
		/* overwrite: the run's code points replace as many of the line's,
		 * in one move whatever their widths */
		size_t m = cp_count(p, n), e = t->cursor, new_len;
		for (size_t k = 0; k < m && e < t->line_len; k++) {
			e++;
			while (e < t->line_len && ((unsigned char)t->line[e] & 0xc0) == 0x80)
				e++;
		}
		new_len = t->cursor + n + (t->line_len - e);
		if (line_reserve(t, new_len) < 0) {
			self->oom = true;
			return;
		}
		memmove(t->line + t->cursor + n, t->line + e, t->line_len - e);
		memcpy(t->line + t->cursor, p, n);
		t->line_len = new_len;
		t->cursor += n;
	}
	if (t->line_len >= KBOX_CAPTURE_LINE_MAX)
		tbuf_line_flush(self, t, label);
}

/* Feed stream text through the terminal model. */
void tbuf_feed(kbox_capture_t *self, tbuf_t *t, const char *label, const char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t run = i;
		while (run < n && p[run] != '\n' && p[run] != '\r' && p[run] != '\b')
			run++;
		if (run > i) {
			/* fast path: a whole line appended at the end */
			if (t->line_len == 0 && run < n && p[run] == '\n') {
				tbuf_commit(self, t, label, p + i, run - i + 1);
				i = run + 1;
				continue;
			}
			/* in pieces, so one huge run never sizes the line buffer */
			for (size_t j = i; j < run;) {
				size_t k = run - j > 4096 ? j + 4096 : run;
				while (k < run && ((unsigned char)p[k] & 0xc0) == 0x80)
					k++;
				line_write(self, t, label, p + j, k - j);
				j = k;
			}
		}
		if (run == n)
			break;
		switch (p[run]) {
		case '\n':
			tbuf_line_flush(self, t, label);
			tbuf_commit(self, t, label, "\n", 1);
			break;
		case '\r':
			if (run + 1 < n && p[run + 1] == '\n')
				break; /* \r\n: the \n ends the line */
			t->cursor = 0;
			break;
		case '\b':
			while (t->cursor > 0) {
				t->cursor--;
				if (((unsigned char)t->line[t->cursor] & 0xc0) != 0x80)
					break;
			}
			break;
		}
		i = run + 1;
	}
}

/* T's ring in order, new (NULL when empty, or out of memory: then OOM). */
static char *ring_linear(const tbuf_t *t, bool *oom)
{
	char *tail;
	*oom = false;
	if (!t->ring_len)
		return NULL;
	if (!(tail = malloc(t->ring_len))) {
		*oom = true;
		return NULL;
	}
	for (size_t i = 0; i < t->ring_len; i++)
		tail[i] = t->ring[(t->ring_start + i) % t->ring_max];
	return tail;
}

/* Where T's view starts in its linearised ring TAIL (LEN bytes) when
 * OMITTED bytes come before it: the tail keeps only whole lines once
 * something before it was dropped, at most the line budget left after the
 * head, and never starts inside a UTF-8 character. */
static size_t tail_start(const tbuf_t *t, const char *tail, size_t len, size_t omitted)
{
	const char *start;
	size_t nl = 0, k = len;
	bool cut = omitted > 0 || t->ring_wrapped;

	/* count back lines from the end (a final line without \n counts) */
	if (k && tail[k - 1] == '\n')
		k--;
	while (k > 0) {
		if (tail[k - 1] == '\n' && ++nl >= t->head_max_lines)
			break;
		k--;
	}
	start = tail + k;
	if (k == 0 && cut) {
		/* the first line may be cut: drop it */
		const char *nlp = memchr(tail, '\n', len);
		if (nlp && (size_t)(nlp - tail) + 1 < len)
			start = nlp + 1;
	}
	while (cut && start < tail + len && ((unsigned char)*start & 0xc0) == 0x80)
		start++;
	return (size_t)(start - tail);
}

/* Append to VIEW the marker line that stands for T's OMITTED_BYTES in
 * OMITTED_LINES (a newline first if HEAD, HEAD_LEN bytes, ended without
 * one): where
 * the text kept is, and what it lacks. */
static void marker_line(kbox_capture_t *self, tbuf_t *t, kx_buf_t *view, const char *head,
                        size_t head_len, size_t omitted_bytes, size_t omitted_lines,
                        size_t dropped_messages)
{
	const char *nl = head_len && head[head_len - 1] != '\n' ? "\n" : "";
	bool saved = t->spill_path && !t->spill_failed;
	char lines[48];

	/* "in 2 lines", "in 1 line", and less than a line's: "in part of one line" */
	if (omitted_lines == 0)
		snprintf(lines, sizeof lines, "part of one line");
	else
		snprintf(lines, sizeof lines, "%zu line%s", omitted_lines,
		         omitted_lines == 1 ? "" : "s");

	if (saved && !t->spill_cut && self->never_arrived)
		kx_buf_appendf(
		        view,
		        "%s[... %zu bytes in %s left out; the text kept is in %s, "
		        "but %zu messages of the kernel never arrived (see the notes) ...]\n",
		        nl, omitted_bytes, lines, t->spill_path, self->never_arrived);
	else if (saved && !t->spill_cut && dropped_messages)
		kx_buf_appendf(view,
		               "%s[... %zu bytes in %s left out; the text kept is in %s, "
		               "without the messages that were dropped ...]\n",
		               nl, omitted_bytes, lines, t->spill_path);
	else if (saved && t->spill_cut)
		kx_buf_appendf(view,
		               "%s[... %zu bytes in %s left out; only the first %zu "
		               "bytes of the text are in %s ...]\n",
		               nl, omitted_bytes, lines, t->spill_bytes, t->spill_path);
	else
		kx_buf_appendf(view, "%s[... %zu bytes in %s left out%s%s ...]\n", nl,
		               omitted_bytes, lines, saved ? "; the complete text is in " : "",
		               saved ? t->spill_path : "");
}

/* Where kbox's own lines are in T's view (head, marker, tail, note). */
static void view_own_lines(tbuf_t *t)
{
	size_t len = t->view.len;

	t->view.marker_at = t->fin_head <= len ? t->fin_head : len;
	t->view.marker_len = t->fin_marker <= len - t->view.marker_at ? t->fin_marker : 0;
	t->view.note_at = t->fin_extra <= len ? len - t->fin_extra : len;
}

/* Build T's view (capture_int.h). */
void tbuf_finish(kbox_capture_t *self, tbuf_t *t, const char *label, size_t dropped_messages,
                 size_t dropped_bytes)
{
	size_t tail_len, tail_lines = 0, omitted_bytes, omitted_lines, skip, before;
	kx_buf_t view = KX_BUF_INIT;
	const char *tail_src;
	char *tail;
	bool oom;

	tbuf_line_flush(self, t, label);
	spill_flush(self, t);
	tail = ring_linear(t, &oom); /* after the flush: the last line is in it */
	if (oom) {
		self->oom = true;
		return;
	}
	tail_len = t->ring_len;
	omitted_bytes = t->total_bytes - t->head_len - tail_len;
	skip = tail_len ? tail_start(t, tail, tail_len, omitted_bytes) : 0;
	omitted_bytes += skip;
	tail_len -= skip;
	tail_src = tail ? tail + skip : NULL;
	for (size_t i = 0; i < tail_len; i++)
		if (tail_src[i] == '\n')
			tail_lines++;
	omitted_lines = t->total_lines - t->head_lines - tail_lines;
	t->view.total_bytes = t->total_bytes;
	t->view.total_lines = t->total_lines;
	t->view.truncated = omitted_bytes > 0;
	t->view.dropped_messages = dropped_messages;
	t->view.dropped_bytes = dropped_bytes;
	kx_buf_append(&view, t->head, t->head_len);
	t->fin_head = t->head_len;
	t->fin_tail = t->total_bytes - tail_len;
	if (t->view.truncated) {
		marker_line(self, t, &view, t->head, t->head_len, omitted_bytes, omitted_lines,
		            dropped_messages);
		t->view.spill_path = t->spill_failed ? NULL : t->spill_path;
	} else {
		/* nothing was left out: the spill file is not needed, unless the
		 * reply may cut the view yet (tbuf_settle) */
		if (!self->reply_max)
			tbuf_settle(self, t);
		t->view.spill_path = NULL;
	}
	t->fin_marker = view.len - t->head_len;
	kx_buf_append(&view, tail_src, tail_len);
	before = view.len;
	if (dropped_messages)
		kx_buf_appendf(&view,
		               "%s[... %zu %s messages (%zu bytes of text) were dropped, not "
		               "shown or saved: the kernel printed faster than kbox could keep "
		               "it ...]\n",
		               view.len && view.data[view.len - 1] != '\n' ? "\n" : "",
		               dropped_messages, label, dropped_bytes);
	t->fin_extra = view.len - before;
	t->view_text = kx_buf_take(&view, &t->view.len);
	if (t->spill_fd >= 0) {
		close(t->spill_fd);
		t->spill_fd = -1;
	}
	if (!t->view_text) {
		self->oom = true;
		t->view.len = 0;
	}
	t->view.text = t->view_text ? t->view_text : "";
	view_own_lines(t);
	free(tail);
}

/* Remove T's spill file when its view is whole (capture_int.h). */
void tbuf_settle(kbox_capture_t *self, tbuf_t *t)
{
	if (t->view.truncated || !t->spill_path)
		return;
	capture_unlink_output(self->dfd, t->spill_path);
	free(t->spill_path);
	t->spill_path = NULL;
}

/* The first bytes of P[0..N), whole characters, that take at most BUDGET
 * bytes inside a JSON string dumped with FLAGS; their size in *USED. */
static size_t json_prefix(const char *p, size_t n, size_t budget, size_t flags, size_t *used)
{
	size_t i = 0, u = 0, cost, len;
	while (i < n) {
		len = kbox__json_unit(p + i, n - i, flags, &cost);
		if (u + cost > budget)
			break;
		u += cost;
		i += len;
	}
	*used = u;
	return i;
}

/* Where the last bytes of P[0..N), whole characters, that take at most
 * BUDGET bytes inside a JSON string dumped with FLAGS begin. */
static size_t json_suffix(const char *p, size_t n, size_t budget, size_t flags)
{
	size_t i = 0, left = kbox_json_string_size(p, n, flags) - 2, cost;
	while (i < n && left > budget) {
		i += kbox__json_unit(p + i, n - i, flags, &cost);
		left -= cost;
	}
	return i;
}

/* Newline characters in P[0..N). */
static size_t count_lines(const char *p, size_t n)
{
	size_t k = 0;
	for (const char *e = p + n; p < e && (p = memchr(p, '\n', (size_t)(e - p))); p++)
		k++;
	return k;
}

/* T's whole view (not truncated) into its spill file: the head, then the
 * rest, within the quota; the file is closed. */
static void spill_view(kbox_capture_t *self, tbuf_t *t, const char *label)
{
	tbuf_spill_open(self, t, label);
	if (t->spill_fd < 0)
		return;
	spill_write(self, t, t->view_text + t->head_len, t->total_bytes - t->head_len, label);
	spill_flush(self, t);
	close(t->spill_fd);
	t->spill_fd = -1;
}

/* What a marker line may take as JSON, its spill path aside. */
#define MARKER_JSON 512

/* Cut T's view to MAX bytes as JSON (capture_int.h). */
bool tbuf_fit(kbox_capture_t *self, tbuf_t *t, const char *label, size_t max)
{
	const char *v = t->view_text;
	size_t flags = self->json_flags, tail_at, tail_len, extra_at, reserve, room, used;
	size_t h, skip, kept_tail, omitted_bytes, lines;
	kx_buf_t view = KX_BUF_INIT;
	char *text;

	if (!v || kbox_json_string_size(v, t->view.len, flags) <= max)
		return false;
	tail_at = t->fin_head + t->fin_marker;
	tail_len = t->total_bytes - t->fin_tail;
	extra_at = tail_at + tail_len;
	if (!t->view.truncated && !t->spill_path)
		spill_view(self, t, label);
	reserve = kbox_json_string_size(v + extra_at, t->fin_extra, flags) + MARKER_JSON +
	          (t->spill_path
	                   ? kbox_json_string_size(t->spill_path, strlen(t->spill_path), flags)
	                   : 0);
	room = max > reserve ? max - reserve : 0;
	/* half for the head, the rest for the tail (of what follows the new
	 * head, when the view was whole) */
	h = json_prefix(v, t->fin_head, room / 2, flags, &used);
	if (!t->view.truncated) {
		tail_at = h;
		tail_len = t->total_bytes - h;
	}
	skip = json_suffix(v + tail_at, tail_len, room - used, flags);
	if (skip > 0 && skip < tail_len && v[tail_at + skip - 1] != '\n') {
		/* the tail begins with a whole line when it has one */
		const char *nl = memchr(v + tail_at + skip, '\n', tail_len - skip);
		if (nl && (size_t)(nl - (v + tail_at)) + 1 < tail_len)
			skip = (size_t)(nl - (v + tail_at)) + 1;
	}
	kept_tail = tail_len - skip;
	omitted_bytes = t->total_bytes - h - kept_tail;
	lines = count_lines(v, h) + count_lines(v + tail_at + skip, kept_tail);
	kx_buf_append(&view, v, h);
	marker_line(self, t, &view, v, h, omitted_bytes, t->total_lines - lines,
	            t->view.dropped_messages);
	t->fin_marker = view.len - h;
	kx_buf_append(&view, v + tail_at + skip, kept_tail);
	kx_buf_append(&view, v + extra_at, t->fin_extra);
	if (!(text = kx_buf_take(&view, &t->view.len))) {
		self->oom = true;
		t->view.len = t->fin_head + t->fin_marker + tail_len + t->fin_extra;
		return false;
	}
	free(t->view_text);
	t->view_text = text;
	t->view.text = text;
	t->fin_head = h;
	t->fin_tail = t->total_bytes - kept_tail;
	t->view.truncated = true;
	t->view.spill_path = t->spill_failed ? NULL : t->spill_path;
	view_own_lines(t);
	return true;
}
