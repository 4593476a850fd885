/* src/capture.c — one execution's iopub messages turned into a bounded
 * result: outputs in order, displays, images, the value, the error and
 * notices, within the outputs directory's quota.  The budgeted text of
 * streams, value and traceback is textbuf.c's (capture_int.h). */
#include "capture_int.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#define MAX_MIME_BYTES 65536 /* a non-image MIME value longer as JSON is left out */
#define MAX_ENAME 256
#define MAX_KEPT_BYTES (8 * 1024 * 1024) /* all kept non-image MIME values, as JSON */
#define MAX_TRACEBACK_RAW (1024 * 1024)  /* bytes of the raw traceback kept, as JSON */
#define FIT_SLACK (256 * 1024)           /* a reply's members besides the texts and bundles */
#define FIT_MIN 4096                     /* the least a text cut to fit a reply keeps, as JSON */
#define MAX_NOTICES 64

struct kbox_result {
	kbox_capture_t *cap; /* owns everything */
	kbox_exec_status_t status;
	int count;
	double seconds;
	char reason[1024];
	json_t *calls; /* the execution's host-function calls, or NULL */
};

/* Add a copy of TEXT to SELF's notices, at the start with FIRST, else at
 * the end.  0, or -1 when out of memory or SELF has MAX_NOTICES already. */
static int notice_add(kbox_capture_t *self, const char *text, bool first)
{
	char **v, *copy;

	if (self->n_notices >= MAX_NOTICES || !(copy = strdup(text)))
		return -1;
	if (!(v = realloc(self->notices, (self->n_notices + 1) * sizeof *v))) {
		free(copy);
		return -1;
	}
	self->notices = v;
	if (first)
		memmove(v + 1, v, self->n_notices * sizeof *v);
	v[first ? 0 : self->n_notices] = copy;
	self->n_notices++;
	return 0;
}

/* Add a printf-style notice (cut at 511 bytes) at the end of SELF's. */
void capture_notice(kbox_capture_t *self, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	notice_add(self, buf, false);
}

/* Remove the file PATH (made by create_output) by its name in DFD. */
void capture_unlink_output(int dfd, const char *path)
{
	const char *name = path ? strrchr(path, '/') : NULL;
	if (dfd >= 0 && name)
		unlinkat(dfd, name + 1, 0);
}

/* Create FILE in the capture's outputs dir without following symlinks and
 * without writing through another name of an existing file.  fd or -1. */
int capture_create_output(kbox_capture_t *self, const char *name, char **path_out)
{
	char path[PATH_MAX];
	int dfd = self->dfd, fd = -1;
	struct stat st;

	*path_out = NULL;
	if (!self->outputs_dir)
		return -1;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", self->outputs_dir, name) >= sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (dfd < 0)
		return -1;
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && self->opts.keep_existing) {
		/* someone's own directory: what is there stays; NAME-2.EXT… */
		const char *dot = strrchr(name, '.');
		size_t stem = dot ? (size_t)(dot - name) : strlen(name);
		for (int k = 2; fd < 0 && errno == EEXIST && k < 1000; k++) {
			char alt[300];
			if ((size_t)snprintf(alt, sizeof alt, "%.*s-%d%s", (int)stem, name, k,
			                     dot ? dot : "") >= sizeof alt ||
			    (size_t)snprintf(path, sizeof path, "%s/%s", self->outputs_dir, alt) >=
			            sizeof path) {
				errno = ENAMETOOLONG;
				return -1;
			}
			fd = openat(dfd, alt, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			            0600);
		}
		if (fd >= 0)
			*path_out = strdup(path);
		return fd;
	}
	if (fd < 0 && errno == EEXIST && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		/* replace a file we wrote before; refuse symlinks and shared files */
		if (S_ISLNK(st.st_mode))
			errno = ELOOP;
		else if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != geteuid())
			errno = EEXIST;
		else if (unlinkat(dfd, name, 0) == 0)
			fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			            0600);
	}
	if (fd >= 0)
		*path_out = strdup(path);
	return fd;
}

/* What a file of N bytes takes on disk: whole blocks, one at least. */
static unsigned long long file_cost(size_t n)
{
	return n ? (n + FILE_BLOCK - 1) / FILE_BLOCK * FILE_BLOCK : FILE_BLOCK;
}

/* How many bytes the outputs directory may still take: ULLONG_MAX without
 * a bound. */
unsigned long long capture_files_room(const kbox_capture_t *self)
{
	if (!self->opts.has_files_max)
		return ULLONG_MAX;
	return self->opts.files_max > self->files_bytes ? self->opts.files_max - self->files_bytes
	                                                : 0;
}

const char *capture_quota_why(const kbox_capture_t *self)
{
	/* in the session's outputs, before this execution wrote a byte: the
	 * results of earlier ones fill it, and printing less cannot help */
	if (!self->opts.keep_existing && self->files_bytes == 0)
		return "the session's outputs quota is used up by earlier results (removing files "
		       "of the session's outputs makes room: kbox prune --older-than DURATION; "
		       "kbox start --outputs-quota sets it)";
	return "this execution's outputs quota is used up (show or print less in one; kbox "
	       "start --outputs-quota sets it)";
}

/* ---- helpers ---- */

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int kbox_image_size(const void *data, size_t len, int *width, int *height)
{
	const unsigned char *p = data;
	static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

	if (len >= 24 && memcmp(p, png, 8) == 0 && memcmp(p + 12, "IHDR", 4) == 0) {
		uint32_t w = be32(p + 16), h = be32(p + 20);
		if (w == 0 || h == 0 || w > INT_MAX || h > INT_MAX)
			return -1;
		*width = (int)w;
		*height = (int)h;
		return 0;
	}
	if (len >= 4 && p[0] == 0xff && p[1] == 0xd8) {
		size_t i = 2;
		while (i + 4 <= len) {
			unsigned marker;
			size_t seglen;
			if (p[i] != 0xff)
				return -1;
			while (i < len && p[i] == 0xff)
				i++;
			if (i >= len)
				return -1;
			marker = p[i++];
			if (marker == 0xd8 || marker == 0x01 || (marker >= 0xd0 && marker <= 0xd7))
				continue; /* no length */
			if (marker == 0xd9 || i + 2 > len)
				return -1;
			seglen = (size_t)p[i] << 8 | p[i + 1];
			if (seglen < 2)
				return -1;
			/* SOFn, except DHT (c4), JPG (c8) and DAC (cc) */
			if (marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 &&
			    marker != 0xcc) {
				if (i + 7 > len)
					return -1;
				*height = (int)((unsigned)p[i + 3] << 8 | p[i + 4]);
				*width = (int)((unsigned)p[i + 5] << 8 | p[i + 6]);
				return *width > 0 && *height > 0 ? 0 : -1;
			}
			i += seglen;
		}
	}
	return -1;
}

/* ---- capture ---- */

kbox_capture_t *kbox_capture_new(const kbox_capture_opts_t *opts, kbox_error_t *err)
{
	kbox_capture_t *self = calloc(1, sizeof *self);
	size_t mb, ml;

	if (!self) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	if (opts)
		self->opts = *opts;
	mb = self->opts.max_bytes ? self->opts.max_bytes : KBOX_CAPTURE_MAX_BYTES;
	ml = self->opts.max_lines ? self->opts.max_lines : KBOX_CAPTURE_MAX_LINES;
	if (mb < 64)
		mb = 64;
	if (mb > KBOX_CAPTURE_MAX_BYTES_LIMIT)
		mb = KBOX_CAPTURE_MAX_BYTES_LIMIT;
	self->opts.max_bytes = mb;
	self->opts.max_lines = ml;
	self->count = -1;
	self->value_count = -1;
	self->dfd = -1;
	self->json_flags = JSON_COMPACT;
	for (int s = 0; s < KBOX_TEXT_COUNT; s++)
		tbuf_init(&self->streams[s], mb, ml);
	tbuf_init(&self->value_text, mb, ml);
	tbuf_init(&self->traceback, mb, ml);
	if (self->opts.prefix &&
	    (strchr(self->opts.prefix, '/') || strlen(self->opts.prefix) > 200)) {
		kbox_error_set(
		        err, KBOX_E_INVALID,
		        "capture file prefix \"%.40s\" must not contain '/' or exceed 200 bytes",
		        self->opts.prefix);
		kbox_capture_destroy(&self);
		return NULL;
	}
	self->displays = json_array();
	self->prefix = strdup(self->opts.prefix ? self->opts.prefix : "");
	if (self->opts.outputs_dir) {
		struct stat st;
		self->dfd = self->opts.has_outputs_fd
		                    ? fcntl(self->opts.outputs_fd, F_DUPFD_CLOEXEC, 3)
		                    : open(self->opts.outputs_dir,
		                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (self->dfd < 0 || fstat(self->dfd, &st) < 0 || !S_ISDIR(st.st_mode)) {
			if (self->dfd >= 0 || errno == ELOOP)
				errno = ENOTDIR;
			kbox_error_set_sys(err, "outputs directory %s", self->opts.outputs_dir);
			kbox_capture_destroy(&self);
			return NULL;
		}
		self->outputs_dir = strdup(self->opts.outputs_dir);
	}
	self->opts.outputs_dir = self->outputs_dir;
	self->opts.prefix = self->prefix;
	if (!self->displays || !self->prefix || (self->opts.outputs_dir && !self->outputs_dir)) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		kbox_capture_destroy(&self);
	}
	return self;
}

void kbox_capture_set_reply(kbox_capture_t *self, size_t max, unsigned copies, size_t flags)
{
	self->reply_max = max;
	self->reply_copies = copies ? copies : 1;
	self->json_flags = flags;
}

void kbox_capture_set_event_cb(kbox_capture_t *self, kbox_event_cb *cb, void *arg)
{
	self->cb = cb;
	self->cb_arg = arg;
}

static void emit(kbox_capture_t *self, kbox_event_type_t type, kbox_stream_t s, const char *text,
                 size_t len, int display)
{
	kbox_event_t ev = {type, s, text, len, display, NULL};
	if (self->cb)
		self->cb(self->cb_arg, self, &ev);
}

static const char *const stream_labels[KBOX_TEXT_COUNT] = {"stdout", "stderr"};

/* ---- outputs in order ---- */

/* Commit the line each stream is writing: an output of another kind (or
 * of the other stream) comes, and text after it is a new output, where a
 * \r can no longer reach back. */
static void streams_boundary(kbox_capture_t *self)
{
	for (int s = 0; s < KBOX_TEXT_COUNT; s++)
		if (self->streams[s].line_len)
			tbuf_line_flush(self, &self->streams[s], stream_labels[s]);
}

static void out_free(out_t *o)
{
	free(o->text);
	free(o->value);
}

/* A new output of KIND at the end of the list, zeroed; NULL when the list
 * is full (unless FORCE) or memory ran out. */
static out_t *out_push(kbox_capture_t *self, kbox_output_kind_t kind, bool force)
{
	out_t *o;
	if (self->n_outs >= KBOX_CAPTURE_MAX_OUTPUTS && !force) {
		if (!self->outs_full)
			capture_notice(
			        self,
			        "more than %d outputs: later ones are not listed in order (stream "
			        "text joins its stream's last output)",
			        KBOX_CAPTURE_MAX_OUTPUTS);
		self->outs_full = true;
		return NULL;
	}
	if (self->n_outs == self->cap_outs) {
		size_t cap = self->cap_outs ? self->cap_outs * 2 : 8;
		out_t *nv = realloc(self->outs, cap * sizeof *nv);
		if (!nv) {
			self->oom = true;
			return NULL;
		}
		self->outs = nv;
		self->cap_outs = cap;
	}
	o = &self->outs[self->n_outs++];
	memset(o, 0, sizeof *o);
	o->pub.kind = kind;
	o->pub.display = -1;
	return o;
}

/* Does stream S have an output in the list? */
static bool has_stream_output(const kbox_capture_t *self, kbox_stream_t s)
{
	for (size_t i = 0; i < self->n_outs; i++)
		if (self->outs[i].pub.kind == KBOX_OUT_STREAM && self->outs[i].pub.stream == s)
			return true;
	return false;
}

/* Text of stream S comes: it joins the last output if that is S's, else
 * begins a new one. */
static void stream_output(kbox_capture_t *self, kbox_stream_t s)
{
	out_t *last = self->n_outs ? &self->outs[self->n_outs - 1] : NULL, *o;

	if (last && last->pub.kind == KBOX_OUT_STREAM && last->pub.stream == s)
		return;
	if (self->outs_full && has_stream_output(self, s))
		return;
	streams_boundary(self);
	o = out_push(self, KBOX_OUT_STREAM, false);
	if (!o && self->outs_full && !has_stream_output(self, s))
		o = out_push(self, KBOX_OUT_STREAM, true);
	if (!o)
		return;
	o->pub.stream = s;
	o->from = self->streams[s].total_bytes;
}

/* An output of KIND (display, result, error, input) comes.  The one it
 * makes, or NULL when it is not listed. */
static out_t *other_output(kbox_capture_t *self, kbox_output_kind_t kind, bool force)
{
	streams_boundary(self);
	return out_push(self, kind, force);
}

/* Remove the outputs for which DROP says so. */
static void outs_remove(kbox_capture_t *self, bool (*drop)(const out_t *o))
{
	size_t k = 0;
	for (size_t i = 0; i < self->n_outs; i++) {
		if (drop(&self->outs[i]))
			out_free(&self->outs[i]);
		else
			self->outs[k++] = self->outs[i];
	}
	self->n_outs = k;
}

static bool is_cleared(const out_t *o)
{
	return o->pub.kind == KBOX_OUT_STREAM || o->pub.kind == KBOX_OUT_DISPLAY;
}
static bool is_result(const out_t *o)
{
	return o->pub.kind == KBOX_OUT_RESULT;
}
static bool is_error(const out_t *o)
{
	return o->pub.kind == KBOX_OUT_ERROR;
}

/* The finished view of stream output O: its bytes [from, to) of the
 * stream as the stream's view shows them (the marker where the middle of
 * the stream was left out is in the first output that reaches it), and
 * the line about dropped messages in the stream's last. */
static void out_view(kbox_capture_t *self, out_t *o, bool last_of_stream, bool *marker_shown)
{
	tbuf_t *t = &self->streams[o->pub.stream];
	const char *v = t->view_text;
	size_t a = o->from, b = o->to, h = t->fin_head, m = t->fin_marker, tl = t->fin_tail;
	kx_buf_t buf = KX_BUF_INIT;

	o->pub.total_bytes = b - a;
	o->pub.truncated = tl > h && a < tl && b > h;
	if (!v)
		return;
	if (a < h)
		kx_buf_append(&buf, v + a, (b < h ? b : h) - a);
	o->pub.marker_at = buf.len;
	if (m && !*marker_shown && b > h) {
		kx_buf_append(&buf, v + h, m);
		*marker_shown = true;
	}
	o->pub.marker_len = buf.len - o->pub.marker_at;
	if (b > tl) {
		size_t x = a > tl ? a : tl;
		kx_buf_append(&buf, v + h + m + (x - tl), b - x);
	}
	o->pub.note_at = buf.len;
	if (last_of_stream && t->fin_extra)
		kx_buf_append(&buf, v + h + m + (t->total_bytes - tl), t->fin_extra);
	o->text = kx_buf_take(&buf, &o->pub.len);
	if (!o->text)
		o->pub.len = o->pub.marker_at = o->pub.marker_len = o->pub.note_at = 0;
	o->pub.text = o->text ? o->text : "";
}

/* At the end: where each stream output ends, and what it shows. */
static void outs_finish(kbox_capture_t *self)
{
	for (int s = 0; s < KBOX_TEXT_COUNT; s++) {
		out_t *prev = NULL;
		bool marker_shown = false;
		if (self->streams[s].view.dropped_messages && !has_stream_output(self, s)) {
			/* all of it dropped: the line saying so is its output */
			out_t *o = out_push(self, KBOX_OUT_STREAM, true);
			if (o)
				o->pub.stream = (kbox_stream_t)s;
		}
		for (size_t i = 0; i < self->n_outs; i++) {
			out_t *o = &self->outs[i];
			if (o->pub.kind != KBOX_OUT_STREAM || o->pub.stream != (kbox_stream_t)s)
				continue;
			if (prev)
				prev->to = o->from;
			prev = o;
		}
		if (prev)
			prev->to = self->streams[s].total_bytes;
		for (size_t i = 0; i < self->n_outs; i++) {
			out_t *o = &self->outs[i];
			if (o->pub.kind == KBOX_OUT_STREAM && o->pub.stream == (kbox_stream_t)s)
				out_view(self, o, o == prev, &marker_shown);
		}
	}
}

/* Images of display INDEX (-1: of the value; -2: of every display) leave
 * the result; their files stay on disk. */
static void drop_images_of(kbox_capture_t *self, int index)
{
	size_t o = 0;
	for (size_t i = 0; i < self->n_images; i++) {
		int d = self->images[i].display;
		if ((index == -2 && d >= 0) || d == index) {
			free((char *)self->images[i].path);
			free((char *)self->images[i].mime);
		} else {
			self->images[o++] = self->images[i];
		}
	}
	self->n_images = o;
}

static void clear_now(kbox_capture_t *self)
{
	for (int s = 0; s < KBOX_TEXT_COUNT; s++)
		tbuf_reset_text(&self->streams[s], self->dfd);
	json_array_clear(self->displays);
	drop_images_of(self, -2);
	outs_remove(self, is_cleared);
	self->pending_clear = false;
	emit(self, KBOX_EV_CLEAR, 0, NULL, 0, -1);
}

/* Output is about to arrive: a pending clear_output(wait=True) happens now. */
static void before_output(kbox_capture_t *self)
{
	if (self->pending_clear)
		clear_now(self);
}

static void take_count(kbox_capture_t *self, json_t *content)
{
	json_t *n = json_object_get(content, "execution_count");
	if (json_is_integer(n) && self->count < 0)
		self->count = (int)json_integer_value(n);
}

static const struct {
	const char *mime, *ext;
	bool base64;
} image_kinds[] = {
        {"image/png", "png", true}, {"image/jpeg", "jpg", true}, {"image/svg+xml", "svg", false}};

/* Write image SELF->image_seq (MIME, OUTLEN bytes at BYTES) as NAME in the
 * outputs directory, within the quota and the count of files: its path
 * (new), or NULL with a notice saying why not (none without an outputs
 * directory). */
static char *image_write(kbox_capture_t *self, const char *name, const char *mime,
                         const unsigned char *bytes, size_t outlen)
{
	char *path = NULL;
	int fd;

	if (outlen > KBOX_CAPTURE_MAX_IMAGE_BYTES) {
		capture_notice(self,
		               "image %d (%s, %zu bytes) is larger than %u bytes: not written",
		               self->image_seq, mime, outlen, KBOX_CAPTURE_MAX_IMAGE_BYTES);
		return NULL;
	}
	if (!self->outputs_dir)
		return NULL;
	if (file_cost(outlen) > capture_files_room(self)) {
		capture_notice(self, "image %d (%s, %zu bytes) not written: %s", self->image_seq,
		               mime, outlen, capture_quota_why(self));
		return NULL;
	}
	if (self->files_made >= KBOX_CAPTURE_MAX_FILES) {
		capture_notice(
		        self,
		        "image %d (%s, %zu bytes) not written: this execution made %d files already",
		        self->image_seq, mime, outlen, KBOX_CAPTURE_MAX_FILES);
		return NULL;
	}
	/* what it takes on disk: whole blocks, one at least */
	self->files_bytes += file_cost(outlen);
	fd = capture_create_output(self, name, &path);
	if (fd < 0) {
		capture_notice(self, "image %d not written to %s/%s: %s", self->image_seq,
		               self->outputs_dir, name,
		               errno == ELOOP ? "it is a symbolic link" : strerror(errno));
		return NULL;
	}
	self->files_made++;
	if (kx_write_all(fd, bytes, outlen) < 0) {
		capture_notice(self, "image %d: writing %s failed: %s", self->image_seq, path,
		               strerror(errno));
		capture_unlink_output(self->dfd, path);
		free(path);
		path = NULL;
	}
	close(fd);
	return path;
}

/* IMG's reference object for the bundle: path, bytes, and what is known. */
static json_t *image_ref(const kbox_image_t *img)
{
	json_t *ref = json_pack("{s:s?, s:I}", "path", img->path, "bytes", (json_int_t)img->bytes);
	if (img->saved_as_text)
		json_object_set_new(ref, "saved_as_text", json_string(img->saved_as_text));
	if (img->width > 0) {
		json_object_set_new(ref, "width", json_integer(img->width));
		json_object_set_new(ref, "height", json_integer(img->height));
	}
	return ref;
}

/* Add IMG (its strings taken) to SELF's images.  0, or -1 when out of
 * memory (IMG's strings are then still the caller's). */
static int images_add(kbox_capture_t *self, const kbox_image_t *img)
{
	kbox_image_t *nv = kx_grow(self->images, &self->cap_images, self->n_images, sizeof *nv);

	if (!nv)
		return -1;
	self->images = nv;
	self->images[self->n_images++] = *img;
	return 0;
}

/* Decode and write one image; returns its reference object for the bundle. */
static json_t *save_image(kbox_capture_t *self, const char *mime, const char *ext, bool b64,
                          json_t *v, int display)
{
	const char *s;
	size_t len, outlen = 0;
	unsigned char *bytes = NULL;
	kbox_image_t img = {NULL, NULL, -1, -1, 0, display, NULL};
	unsigned char hash[32];
	char name[256];
	json_t *ref;

	if (json_is_array(v)) /* some kernels split long strings into lines */
		return NULL;
	if (!json_is_string(v))
		return NULL;
	s = json_string_value(v);
	len = json_string_length(v);
	if (b64) {
		size_t cap = len / 4 * 3 + 3;
		bytes = malloc(cap);
		if (!bytes || sodium_base642bin(bytes, cap, s, len, "\n\r ", &outlen, NULL,
		                                sodium_base64_VARIANT_ORIGINAL) != 0) {
			free(bytes);
			capture_notice(self, "a %s output is not valid base64: left out", mime);
			return json_pack("{s:n, s:s}", "path", "error", "invalid base64");
		}
	} else {
		bytes = (unsigned char *)s;
		outlen = len;
	}
	img.bytes = outlen;
	img.mime = strdup(mime);
	if (strcmp(ext, "svg") != 0 && kbox_image_size(bytes, outlen, &img.width, &img.height) < 0)
		img.width = img.height = -1;
	/* an SVG a browser could run something of is written as text, so that
	 * opening the file shows it and runs nothing */
	if (strcmp(ext, "svg") == 0 && outlen <= KBOX_CAPTURE_MAX_IMAGE_BYTES && self->outputs_dir)
		img.saved_as_text = kbox__svg_active((const char *)bytes, outlen);
	/* the same bytes written before in this execution (a figure that is
	 * the value and then shown by the inline backend): that file */
	crypto_generichash(hash, sizeof hash, bytes, outlen, NULL, 0);
	for (size_t i = 0; i < self->n_written && !img.path; i++)
		if (memcmp(self->written[i].hash, hash, sizeof hash) == 0 &&
		    !(img.path = strdup(self->written[i].path)))
			self->oom = true;
	if (!img.path) {
		self->image_seq++;
		snprintf(name, sizeof name, "%s%d-%d.%s%s", self->prefix,
		         self->count < 0 ? 0 : self->count, self->image_seq, ext,
		         img.saved_as_text ? ".txt" : "");
		img.path = image_write(self, name, mime, bytes, outlen);
		if (img.path) {
			struct written_image *w = kx_grow(self->written, &self->cap_written,
			                                  self->n_written, sizeof *w);
			if (w && (w[self->n_written].path = strdup(img.path))) {
				self->written = w;
				memcpy(w[self->n_written++].hash, hash, sizeof hash);
			} else if (w)
				self->written = w;
		}
	}
	if (!img.path)
		img.saved_as_text = NULL; /* nothing was saved, as text or otherwise */
	if (b64)
		free(bytes);
	ref = image_ref(&img);
	if (images_add(self, &img) < 0) {
		free((char *)img.path);
		free((char *)img.mime);
		self->oom = true;
	}
	return ref;
}

/* The bytes V takes as JSON in the reply (0 when jansson cannot dump it). */
static size_t json_size(const kbox_capture_t *self, json_t *v)
{
	return json_dumpb(v, NULL, 0, self->json_flags | JSON_ENCODE_ANY);
}

/* The value V of a text type (text/plain, text/html, ...) as the string
 * the protocol says it is (new reference; NULL: out of memory): a list of
 * strings joined, as nbformat joins a text's lines, anything else as its
 * JSON.  So nothing the kernel sends as text reads as kbox's own marker
 * of a value left out, {"omitted_bytes": N}, nor as nothing at all. */
static json_t *as_text(const kbox_capture_t *self, json_t *v)
{
	kx_buf_t b = KX_BUF_INIT;
	json_t *item, *t;
	size_t i;
	bool lines = json_is_array(v);
	char *dump, *joined;
	size_t n;

	json_array_foreach(v, i, item)
	{
		if (!json_is_string(item)) {
			lines = false;
			break;
		}
		kx_buf_append(&b, json_string_value(item), json_string_length(item));
	}
	if (lines) {
		joined = kx_buf_take(&b, &n);
		t = joined ? json_stringn(joined, n) : NULL;
		free(joined);
		return t;
	}
	kx_buf_reset(&b);
	dump = json_dumps(v, (self->json_flags & ~JSON_ENSURE_ASCII) | JSON_ENCODE_ANY);
	t = json_string(dump ? dump : "(a value kbox could not write as JSON)");
	free(dump);
	return t;
}

/* A copy of DATA with images written to files (replaced by references),
 * texts made strings (as_text) and oversized values left out. */
static json_t *process_bundle(kbox_capture_t *self, json_t *data, int display)
{
	json_t *out = json_object(), *v;
	const char *mime;

	if (!out || !json_is_object(data))
		return out;
	json_object_foreach(data, mime, v)
	{
		bool image = false;
		json_t *text = NULL;
		if (strncmp(mime, "text/", 5) == 0 && !json_is_string(v)) {
			if (!(text = as_text(self, v))) {
				self->oom = true;
				continue;
			}
			v = text;
		}
		for (size_t k = 0; k < sizeof image_kinds / sizeof image_kinds[0]; k++) {
			if (strcmp(mime, image_kinds[k].mime) == 0) {
				json_t *ref = save_image(self, mime, image_kinds[k].ext,
				                         image_kinds[k].base64, v, display);
				if (ref)
					json_object_set_new(out, mime, ref);
				image = true;
				break;
			}
		}
		if (image)
			continue;
		if (strncmp(mime, "image/", 6) == 0) {
			/* an image type we do not write (gif, webp, …): never keep base64 */
			json_object_set_new(
			        out, mime,
			        json_pack(
			                "{s:n, s:I, s:s}", "path", "bytes",
			                (json_int_t)(json_is_string(v) ? json_string_length(v) : 0),
			                "error", "unsupported image type"));
			continue;
		}
		{
			/* as JSON, escapes and all; nested at most
			 * KBOX_CAPTURE_MAX_DEPTH levels (a reply nests it
			 * deeper, and no reader takes unbounded depth) */
			size_t sz = json_size(self, v);
			json_t *kept = sz <= MAX_MIME_BYTES
			                       ? kbox_json_depth_cut(v, KBOX_CAPTURE_MAX_DEPTH)
			                       : NULL;
			if (kept && kept != v)
				sz = json_size(self, kept);
			if (!kept || sz > MAX_MIME_BYTES ||
			    self->kept_bytes + sz > MAX_KEPT_BYTES) {
				/* a string's own size, what a reader knows it by */
				json_object_set_new(
				        out, mime,
				        json_pack("{s:I}", "omitted_bytes",
				                  (json_int_t)(json_is_string(v)
				                                       ? json_string_length(v)
				                                       : sz)));
				json_decref(kept);
			} else {
				self->kept_bytes += sz;
				json_object_set_new(out, mime, kept);
			}
		}
		json_decref(text);
	}
	return out;
}

/* How many earlier outputs of its display_id a display_data updates. */
#define SAME_ID_UPDATES 16

static void on_display(kbox_capture_t *self, json_t *c, bool update)
{
	json_t *data = json_object_get(c, "data");
	json_t *did = json_object_get(json_object_get(c, "transient"), "display_id");
	const char *id = json_is_string(did) ? json_string_value(did) : NULL;
	size_t i;
	json_t *d;

	if (update) {
		bool found = false;
		if (!id)
			return;
		json_array_foreach(self->displays, i, d)
		{
			json_t *x = json_object_get(d, "display_id");
			if (json_is_string(x) && strcmp(json_string_value(x), id) == 0) {
				found = true;
				drop_images_of(self, (int)i);
				json_object_set_new(d, "data", process_bundle(self, data, (int)i));
				emit(self, KBOX_EV_DISPLAY, 0, NULL, 0, (int)i);
			}
		}
		if (found)
			return;
		/* not of this execution: of an earlier one, which this result
		 * cannot change, so it says which and with what (a display of
		 * its own, marked; later updates of the id update it) */
		if (json_array_size(self->displays) < KBOX_CAPTURE_MAX_DISPLAYS) {
			before_output(self);
			i = json_array_size(self->displays);
			d = json_pack("{s:o, s:s, s:b}", "data", process_bundle(self, data, (int)i),
			              "display_id", id, "updates_earlier", 1);
			if (d && json_array_append_new(self->displays, d) == 0) {
				out_t *o = other_output(self, KBOX_OUT_DISPLAY, false);
				if (o)
					o->pub.display = (int)i;
				emit(self, KBOX_EV_DISPLAY, 0, NULL, 0, (int)i);
			}
		} else
			self->displays_dropped++;
		return;
	}
	before_output(self);
	/* a display of an id an earlier output has updates that output too
	 * (as nbclient does: the new one is kept as well); the last
	 * SAME_ID_UPDATES of them, so that a kernel repeating one id does
	 * not make each display cost all the earlier ones again */
	if (id) {
		size_t n = json_array_size(self->displays), updated = 0;
		for (i = n; i-- > 0 && updated < SAME_ID_UPDATES;) {
			json_t *x;
			d = json_array_get(self->displays, i);
			x = json_object_get(d, "display_id");
			if (json_is_string(x) && strcmp(json_string_value(x), id) == 0) {
				updated++;
				drop_images_of(self, (int)i);
				json_object_set_new(d, "data", process_bundle(self, data, (int)i));
				emit(self, KBOX_EV_DISPLAY, 0, NULL, 0, (int)i);
			}
		}
	}
	if (json_array_size(self->displays) >= KBOX_CAPTURE_MAX_DISPLAYS) {
		self->displays_dropped++;
		return;
	}
	i = json_array_size(self->displays);
	d = json_pack("{s:o, s:s?}", "data", process_bundle(self, data, (int)i), "display_id", id);
	if (d && json_array_append_new(self->displays, d) == 0) {
		out_t *o = other_output(self, KBOX_OUT_DISPLAY, false);
		if (o)
			o->pub.display = (int)i;
		emit(self, KBOX_EV_DISPLAY, 0, NULL, 0, (int)i);
	}
}

static void on_error(kbox_capture_t *self, json_t *c)
{
	json_t *en = json_object_get(c, "ename"), *ev = json_object_get(c, "evalue");
	json_t *tb = json_object_get(c, "traceback"), *line;
	size_t i;

	before_output(self);
	free(self->ename);
	free(self->evalue);
	/* both by their lengths: a NUL byte in them is kept, and what follows */
	{
		kx_buf_t b = KX_BUF_INIT;
		const char *e = json_is_string(en) ? json_string_value(en) : "Error";
		size_t n = json_is_string(en) ? json_string_length(en) : 5;
		kx_buf_append(&b, e, n > MAX_ENAME ? kx_utf8_floor(e, n, MAX_ENAME) : n);
		self->ename = kx_buf_take(&b, &self->ename_len);
	}
	/* the value is budgeted like any text: cut at a UTF-8 boundary */
	{
		kx_buf_t b = KX_BUF_INIT;
		const char *v = json_is_string(ev) ? json_string_value(ev) : "";
		size_t n = json_is_string(ev) ? json_string_length(ev) : 0;
		if (n > self->opts.max_bytes) {
			size_t k = kx_utf8_floor(v, n, self->opts.max_bytes);
			kx_buf_append(&b, v, k);
			kx_buf_appendf(&b, " [... %zu bytes]", n - k);
		} else {
			kx_buf_append(&b, v, n);
		}
		self->evalue = kx_buf_take(&b, &self->evalue_len);
	}
	if (!self->ename || !self->evalue) {
		self->oom = true;
		self->ename_len = self->ename ? self->ename_len : 0;
		self->evalue_len = self->evalue ? self->evalue_len : 0;
	}
	json_decref(self->traceback_raw);
	/* the raw traceback, as sent, up to MAX_TRACEBACK_RAW bytes of lines */
	self->traceback_raw = json_array();
	{
		size_t total = 0, left_out = 0;
		json_array_foreach(tb, i, line)
		{
			size_t n = json_is_string(line) ? json_size(self, line) : 0;
			if (!json_is_string(line))
				continue;
			if (total + n > MAX_TRACEBACK_RAW) {
				left_out++;
				continue;
			}
			total += n;
			json_array_append(self->traceback_raw, line);
		}
		self->traceback_raw_bytes = total;
		if (left_out) {
			char note[64];
			snprintf(note, sizeof note, "[... %zu more lines left out]", left_out);
			json_array_append_new(self->traceback_raw, json_string(note));
		}
	}
	tbuf_free(&self->traceback);
	tbuf_init(&self->traceback, self->opts.max_bytes, self->opts.max_lines);
	json_array_foreach(tb, i, line)
	{
		size_t n;
		char *plain;
		if (!json_is_string(line))
			continue;
		plain = kbox_strip_ansi(json_string_value(line), json_string_length(line), &n);
		if (!plain)
			continue;
		tbuf_commit(self, &self->traceback, "traceback", plain, n);
		if (n == 0 || plain[n - 1] != '\n')
			tbuf_commit(self, &self->traceback, "traceback", "\n", 1);
		free(plain);
	}
	self->has_error = true;
	outs_remove(self, is_error);
	other_output(self, KBOX_OUT_ERROR, true);
	emit(self, KBOX_EV_ERROR, 0, NULL, 0, -1);
}

int kbox_capture_feed(kbox_capture_t *self, const kbox_msg_t *msg, kbox_error_t *err)
{
	const char *type = kbox_msg_type(msg);
	json_t *c;
	size_t notices_before = self->n_notices;

	if (!type)
		return 0;
	/* (a status, two of every execution's messages, says nothing here:
	 * its content is not parsed for it) */
	c = strcmp(type, "status") != 0 ? kbox_msg_content(msg) : NULL;
	if (strcmp(type, "stream") == 0) {
		json_t *name = json_object_get(c, "name"), *text = json_object_get(c, "text");
		kbox_stream_t s = json_is_string(name) &&
		                                  strcmp(json_string_value(name), "stderr") == 0
		                          ? KBOX_TEXT_STDERR
		                          : KBOX_TEXT_STDOUT;
		if (!json_is_string(text))
			return 0;
		before_output(self);
		stream_output(self, s);
		tbuf_feed(self, &self->streams[s], stream_labels[s], json_string_value(text),
		          json_string_length(text));
		emit(self, KBOX_EV_STREAM, s, json_string_value(text), json_string_length(text),
		     -1);
	} else if (strcmp(type, "execute_input") == 0) {
		take_count(self, c);
	} else if (strcmp(type, "execute_result") == 0) {
		json_t *data = json_object_get(c, "data"), *tp;
		json_t *vc = json_object_get(c, "execution_count");
		take_count(self, c);
		/* the count the message carries, as nbformat keeps it */
		self->value_count = json_is_integer(vc) && json_integer_value(vc) >= 0 &&
		                                    json_integer_value(vc) <= INT_MAX
		                            ? (int)json_integer_value(vc)
		                            : -1;
		before_output(self);
		json_decref(self->value);
		drop_images_of(self, -1);
		self->value = process_bundle(self, data, -1);
		tbuf_free(&self->value_text);
		tbuf_init(&self->value_text, self->opts.max_bytes, self->opts.max_lines);
		tp = json_object_get(data, "text/plain");
		if (json_is_string(tp)) {
			tbuf_commit(self, &self->value_text, "value", json_string_value(tp),
			            json_string_length(tp));
		} else if (json_is_array(tp)) { /* nbformat style: a list of lines */
			size_t k;
			json_t *part;
			json_array_foreach(tp, k, part) if (json_is_string(part))
			        tbuf_commit(self, &self->value_text, "value",
			                    json_string_value(part), json_string_length(part));
		}
		self->has_value = true;
		outs_remove(self, is_result);
		other_output(self, KBOX_OUT_RESULT, true);
		emit(self, KBOX_EV_RESULT, 0, NULL, 0, -1);
	} else if (strcmp(type, "display_data") == 0) {
		on_display(self, c, false);
	} else if (strcmp(type, "update_display_data") == 0) {
		on_display(self, c, true);
	} else if (strcmp(type, "clear_output") == 0) {
		json_t *w = json_object_get(c, "wait");
		if (json_is_true(w))
			self->pending_clear = true;
		else
			clear_now(self);
	} else if (strcmp(type, "error") == 0) {
		on_error(self, c);
	}
	if (self->oom)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory capturing output");
	if (self->n_notices > notices_before)
		return kbox_error_set(err, KBOX_E_SYSTEM, "%s", self->notices[self->n_notices - 1]);
	return 0;
}

/* What the result keeps of an input request's prompt or answer (LEN
 * bytes at S): at most INPUT_SHOWN_MAX bytes of it, cut at a character's
 * start and then ended with an ellipsis; new, NULL when out of memory,
 * its length in *SHOWN.
 * The kernel gets the whole answer all the same. */
#define INPUT_SHOWN_MAX 1024
static char *input_shown(const char *s, size_t len, size_t *shown)
{
	kx_buf_t b = KX_BUF_INIT;
	size_t keep = kx_utf8_floor(s, len, INPUT_SHOWN_MAX);
	char *t;
	kx_buf_append(&b, s, keep);
	if (keep < len)
		kx_buf_appends(&b, "\xe2\x80\xa6");
	t = kx_buf_take(&b, shown);
	if (!t)
		*shown = 0;
	return t;
}

void kbox_capture_input(kbox_capture_t *self, const kbox_msg_t *msg)
{
	json_t *c = kbox_msg_content(msg), *prompt = json_object_get(c, "prompt");
	size_t k = self->inputs_seen++;
	const char *line = k < self->opts.n_input && self->opts.input_lines
	                           ? self->opts.input_lines[k]
	                           : NULL;
	out_t *o;
	kbox_event_t ev = {KBOX_EV_INPUT, 0, NULL, 0, -1, NULL};

	before_output(self);
	if (!(o = other_output(self, KBOX_OUT_INPUT, false)))
		return;
	o->pub.password = json_is_true(json_object_get(c, "password"));
	o->text = json_is_string(prompt) ? input_shown(json_string_value(prompt),
	                                               json_string_length(prompt), &o->pub.len)
	                                 : NULL;
	o->pub.text = o->text ? o->text : "";
	if (!o->text)
		o->pub.len = 0;
	if (line && !o->pub.password) {
		o->value = input_shown(line, strlen(line), &o->pub.value_len);
		o->pub.value = o->value;
	}
	if (line && o->pub.password)
		o->pub.value_len = strlen(line); /* answered, not shown */
	ev.output = &o->pub;
	if (self->cb)
		self->cb(self->cb_arg, self, &ev);
}

bool kbox_capture_can_spill(const kbox_capture_t *self)
{
	unsigned long long room = capture_files_room(self);
	if (self->dfd < 0 || self->oom || room == 0)
		return false;
	/* a spill file open and not cut keeps what comes; else one must be
	 * made, and that takes a file and a block of room (tbuf_spill_open):
	 * with less, nothing more can be kept, whatever bytes are left */
	for (int s = 0; s < KBOX_TEXT_COUNT; s++) {
		const tbuf_t *t = &self->streams[s];
		if (t->spill_failed)
			return false;
		if (t->spill_fd >= 0 && !t->spill_cut)
			return true;
	}
	return room > FILE_BLOCK && self->files_made < KBOX_CAPTURE_MAX_FILES;
}

int kbox_capture_on_msg(void *arg, kbox_channel_t channel, const kbox_msg_t *msg)
{
	if (channel == KBOX_CH_IOPUB)
		kbox_capture_feed(arg, msg, NULL);
	else if (channel == KBOX_CH_STDIN && kbox_msg_type(msg) &&
	         strcmp(kbox_msg_type(msg), "input_request") == 0)
		kbox_capture_input(arg, msg);
	return 0;
}

json_t *kbox_capture_display(const kbox_capture_t *cap, int index)
{
	json_t *d = index >= 0 ? json_array_get(cap->displays, (size_t)index) : NULL;
	return d ? json_object_get(d, "data") : NULL;
}

const char *kbox_capture_display_id(const kbox_capture_t *cap, int index)
{
	json_t *d = index >= 0 ? json_array_get(cap->displays, (size_t)index) : NULL;
	json_t *id = json_object_get(d, "display_id");
	return json_is_string(id) ? json_string_value(id) : NULL;
}

json_t *kbox_capture_value(const kbox_capture_t *cap)
{
	return cap->has_value ? cap->value : NULL;
}

const char *kbox_capture_ename(const kbox_capture_t *cap, size_t *len)
{
	*len = cap->has_error && cap->ename ? cap->ename_len : 0;
	return cap->has_error ? cap->ename : NULL;
}

const char *kbox_capture_evalue(const kbox_capture_t *cap, size_t *len)
{
	*len = cap->has_error && cap->evalue ? cap->evalue_len : 0;
	return cap->has_error ? cap->evalue : NULL;
}

void kbox_capture_destroy(kbox_capture_t **self_p)
{
	kbox_capture_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	for (int s = 0; s < KBOX_TEXT_COUNT; s++)
		tbuf_free(&self->streams[s]);
	tbuf_free(&self->value_text);
	tbuf_free(&self->traceback);
	json_decref(self->displays);
	json_decref(self->value);
	json_decref(self->traceback_raw);
	for (size_t i = 0; i < self->n_images; i++) {
		free((char *)self->images[i].path);
		free((char *)self->images[i].mime);
	}
	free(self->images);
	for (size_t i = 0; i < self->n_written; i++)
		free(self->written[i].path);
	free(self->written);
	for (size_t i = 0; i < self->n_notices; i++)
		free(self->notices[i]);
	free(self->notices);
	for (size_t i = 0; i < self->n_outs; i++)
		out_free(&self->outs[i]);
	free(self->outs);
	free(self->ename);
	free(self->evalue);
	if (self->dfd >= 0)
		close(self->dfd);
	free(self->outputs_dir);
	free(self->prefix);
	free(self);
	*self_p = NULL;
}

/* What the texts of SELF may take each, as JSON, in a reply of
 * SELF->reply_max bytes: what the rest leaves, shared so that the texts
 * that fit their share are kept whole and the others get equal parts.
 * SIZE holds the N texts' sizes; SIZE_MAX when all of them fit. */
static size_t fit_share(const kbox_capture_t *self, const size_t *size, size_t n)
{
	unsigned copies = self->reply_copies;
	size_t other = FIT_SLACK + self->traceback_raw_bytes, left, sorted[8], k;

	/* the bundles kept (each in the outputs and the displays, its text in
	 * the text), the prompts and the lines given, the notices */
	other += self->kept_bytes * copies;
	for (size_t i = 0; i < self->n_outs; i++) {
		const kbox_output_t *o = &self->outs[i].pub;
		other += 256;
		if (o->kind == KBOX_OUT_INPUT)
			other += copies *
			         (kbox_json_string_size(o->text, o->len, self->json_flags) +
			          (o->value ? kbox_json_string_size(o->value, o->value_len,
			                                            self->json_flags)
			                    : 0));
	}
	for (size_t i = 0; i < self->n_notices; i++)
		other += copies * kbox_json_string_size(self->notices[i], strlen(self->notices[i]),
		                                        self->json_flags);
	other += self->n_images * 1024 * copies;
	left = self->reply_max > other ? (self->reply_max - other) / copies : 0;
	/* the smallest first: each kept whole while the rest can still have
	 * as much each */
	memcpy(sorted, size, n * sizeof *size);
	for (size_t i = 1; i < n; i++)
		for (k = i; k > 0 && sorted[k - 1] > sorted[k]; k--) {
			size_t x = sorted[k];
			sorted[k] = sorted[k - 1];
			sorted[k - 1] = x;
		}
	for (k = 0; k < n; k++) {
		if (sorted[k] > left / (n - k))
			return left / (n - k) > FIT_MIN ? left / (n - k) : FIT_MIN;
		left -= sorted[k];
	}
	return SIZE_MAX;
}

/* The error's value cut to MAX bytes as JSON, as on_error cuts it. */
static bool evalue_fit(kbox_capture_t *self, size_t max)
{
	size_t n = self->evalue_len, i = 0, used = 64, cost, len;
	kx_buf_t b = KX_BUF_INIT;
	char *v;

	if (!self->evalue || kbox_json_string_size(self->evalue, n, self->json_flags) <= max)
		return false;
	while (i < n) {
		len = kbox__json_unit(self->evalue + i, n - i, self->json_flags, &cost);
		if (used + cost > max)
			break;
		used += cost;
		i += len;
	}
	kx_buf_append(&b, self->evalue, i);
	kx_buf_appendf(&b, " [... %zu bytes]", n - i);
	if (!(v = kx_buf_take(&b, &len))) {
		self->oom = true;
		return false;
	}
	free(self->evalue);
	self->evalue = v;
	self->evalue_len = len;
	return true;
}

/* Cut what does not fit the reply (kbox_capture_set_reply), and say so. */
static void capture_fit(kbox_capture_t *self)
{
	static const char *const labels[] = {"stdout", "stderr", "value", "traceback",
	                                     "error value"};
	tbuf_t *t[4] = {&self->streams[0], &self->streams[1],
	                self->has_value ? &self->value_text : NULL,
	                self->has_error ? &self->traceback : NULL};
	size_t size[5] = {0}, share;
	char lim[32], copies[48] = "";

	if (!self->reply_max)
		return;
	for (int i = 0; i < 4; i++)
		if (t[i] && t[i]->view_text)
			size[i] = kbox_json_string_size(t[i]->view_text, t[i]->view.len,
			                                self->json_flags);
	if (self->has_error && self->evalue)
		size[4] = kbox_json_string_size(self->evalue, self->evalue_len, self->json_flags);
	share = fit_share(self, size, 5);
	kx_fmt_bytes(lim, sizeof lim, (long long)self->reply_max);
	if (self->reply_copies > 1)
		snprintf(copies, sizeof copies, "it is shown %u times and ", self->reply_copies);
	for (int i = 0; i < 5; i++) {
		bool cut = size[i] > share && (i < 4 ? tbuf_fit(self, t[i], labels[i], share)
		                                     : evalue_fit(self, share));
		if (cut)
			capture_notice(
			        self,
			        "the %s was cut to fit one reply (at most %s of JSON, where "
			        "%sa control character takes 6 bytes): its middle is left out",
			        labels[i], lim, copies);
	}
	for (int i = 0; i < 4; i++)
		if (t[i])
			tbuf_settle(self, t[i]);
}

/* Whether the execution of SELF, ending with STATUS, was interrupted: its
 * deadline passed (the kernel interrupted), or it ended in a
 * KeyboardInterrupt (kbox interrupt, a front end's). */
static bool capture_interrupted(const kbox_capture_t *self, kbox_exec_status_t status)
{
	static const char ki[] = "KeyboardInterrupt";
	return status == KBOX_EXEC_TIMEOUT || status == KBOX_EXEC_INTERRUPTED ||
	       (self->has_error && self->ename && self->ename_len == sizeof ki - 1 &&
	        memcmp(self->ename, ki, sizeof ki - 1) == 0);
}

/* What the reply of EXEC asks of its front end in its payloads, which
 * are no messages of iopub:
 * - the pages: what IPython hands a pager (obj?, obj??, %pinfo,
 *   %psource, %quickref: its "page" payloads), which a front end with no
 *   pager would lose; each is kept as a display of its bundle, after the
 *   cell's outputs, as IPython itself shows pages with
 *   InteractiveShell.display_page, but with the terminal's escape
 *   sequences of its text/plain left out (IPython colours its help for a
 *   terminal's pager).  A pending clear_output has been dropped first: a
 *   page is no output of the cell's, and clears nothing.
 * - exit() or quit() (kbox_exec_asked_exit): ipykernel exits, and kbox's
 *   supervisor replaces it at once (supervisor_jobs.c, on_exec_done).  A
 *   notice says it now, in the result of the code that asked: its next
 *   code runs without what it defined.  exit(keep_kernel=True) ends
 *   nothing, and says nothing. */
static void take_payloads(kbox_capture_t *self, const kbox_exec_t *exec)
{
	const kbox_msg_t *reply = kbox_exec_reply(exec);
	json_t *payload = reply ? json_object_get(kbox_msg_content(reply), "payload") : NULL;
	json_t *item;
	size_t i;

	if (kbox_exec_asked_exit(exec))
		capture_notice(self, "exit() ends the kernel: a new one is started, without what "
		                     "the code defined");
	json_array_foreach(payload, i, item)
	{
		json_t *src = json_object_get(item, "source"),
		       *data = json_object_get(item, "data");
		json_t *c, *copy, *tp;
		if (!json_is_string(src) || strcmp(json_string_value(src), "page") != 0 ||
		    !json_is_object(data))
			continue;
		copy = json_copy(data);
		tp = json_object_get(data, "text/plain");
		if (copy && json_is_string(tp)) {
			size_t n;
			char *plain = kbox_strip_ansi(json_string_value(tp), json_string_length(tp),
			                              &n);
			json_t *t = plain ? json_stringn(plain, n) : NULL;
			free(plain);
			if (!t || json_object_set_new(copy, "text/plain", t) < 0) {
				json_decref(copy);
				copy = NULL;
			}
		}
		if (!copy || !(c = json_pack("{s:o}", "data", copy))) {
			self->oom = true;
			return;
		}
		on_display(self, c, false);
		json_decref(c);
	}
}

kbox_result_t *kbox_capture_finish(kbox_capture_t **self_p, const kbox_exec_t *exec)
{
	kbox_capture_t *self = self_p ? *self_p : NULL;
	kbox_result_t *r;

	if (!self)
		return NULL;
	r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	*self_p = NULL;
	r->cap = self;
	if (self->pending_clear)
		self->pending_clear = false; /* a clear with nothing after it clears nothing */
	if (exec)
		take_payloads(self, exec);
	{
		kbox_exec_drops_t drops = {{0, 0}, {0, 0}, 0, 0};
		if (exec)
			kbox_exec_dropped(exec, &drops);
		self->never_arrived = drops.never_arrived;
		for (int s = 0; s < KBOX_TEXT_COUNT; s++)
			tbuf_finish(self, &self->streams[s], stream_labels[s],
			            drops.stream_messages[s], drops.stream_bytes[s]);
	}
	tbuf_finish(self, &self->value_text, "value", 0, 0);
	tbuf_finish(self, &self->traceback, "traceback", 0, 0);
	capture_fit(self);
	outs_finish(self);
	if (self->displays_dropped)
		capture_notice(self, "%zu displays beyond the limit of %d were not kept",
		               self->displays_dropped, KBOX_CAPTURE_MAX_DISPLAYS);
	if (self->oom)
		capture_notice(self, "out of memory while capturing: some output is missing");
	r->count = self->count;
	if (exec) {
		r->status = kbox_exec_status(exec);
		/* an error the kernel sent is an error, whatever its reply says */
		if (r->status == KBOX_EXEC_OK && self->has_error)
			r->status = KBOX_EXEC_ERROR;
		if (kbox_exec_count(exec) >= 0)
			r->count = kbox_exec_count(exec);
		r->seconds = kbox_exec_seconds(exec);
		snprintf(r->reason, sizeof r->reason, "%s", kbox_exec_reason(exec));
		/* an error with nothing of the kernel's to show for it (its
		 * reply never came, or could not be read): the reason is what
		 * there is to read */
		if (r->status == KBOX_EXEC_ERROR && !self->has_error && r->reason[0])
			capture_notice(self, "%s", r->reason);
		if (kbox_exec_calls(exec))
			r->calls = json_deep_copy(kbox_exec_calls(exec));
		{
			kbox_exec_drops_t d;
			size_t bytes, n = kbox_exec_rate_dropped(exec, &bytes);
			kbox_exec_dropped(exec, &d);
			n -= d.stream_messages[0] + d.stream_messages[1];
			if (d.stream_messages[0] || d.stream_messages[1])
				capture_notice(
				        self,
				        "%zu stdout messages (%zu bytes of text) and %zu stderr messages (%zu "
				        "bytes) were dropped: the kernel printed faster than kbox reads%s",
				        d.stream_messages[0], d.stream_bytes[0],
				        d.stream_messages[1], d.stream_bytes[1],
				        self->dfd < 0
				                ? ", and there was no outputs directory to keep it in"
				        : capture_files_room(self) == 0
				                ? ", and the outputs quota was used up"
				                : " (over the rate limit, or while kbox's memory was short)");
			(void)bytes;
			/* an interrupt can land between the kernel's numbering of a
			 * message and its send (IPython's displayhook): a gap then
			 * is no flood */
			if (d.never_arrived && capture_interrupted(self, r->status))
				capture_notice(
				        self,
				        "%zu message%s the kernel numbered during this execution "
				        "never reached kbox (the interrupt may have stopped it "
				        "before it sent %s, or its output queue overflowed): some "
				        "output may be missing",
				        d.never_arrived, d.never_arrived == 1 ? "" : "s",
				        d.never_arrived == 1 ? "it" : "them");
			else if (d.never_arrived)
				capture_notice(
				        self,
				        "%zu message%s the kernel sent during this execution never reached "
				        "kbox (most likely its output queue overflowed while it flooded "
				        "output faster than kbox reads): some output may be missing",
				        d.never_arrived, d.never_arrived == 1 ? "" : "s");
			if (d.undecodable)
				capture_notice(
				        self,
				        "%zu messages the kernel sent during this execution could "
				        "not be decoded (not valid JSON or UTF-8, or badly signed) "
				        "and are left out: some output may be missing",
				        d.undecodable);
			if (n)
				capture_notice(
				        self,
				        "%zu display messages were dropped: the kernel sent output "
				        "faster than kbox reads",
				        n);
		}
		if (kbox_exec_output_lost(exec))
			capture_notice(
			        self,
			        "output was lost: iopub broke during this execution (most likely "
			        "a message over %ld bytes, the most kbox takes) and was reconnected; "
			        "what the kernel sent meanwhile (output, an error) is missing",
			        (long)KBOX_MAX_MESSAGE_BYTES);
	} else {
		r->status = self->has_error ? KBOX_EXEC_ERROR : KBOX_EXEC_OK;
	}
	return r;
}

/* ---- result ---- */

void kbox_result_destroy(kbox_result_t **self_p)
{
	if (!self_p || !*self_p)
		return;
	kbox_capture_destroy(&(*self_p)->cap);
	json_decref((*self_p)->calls);
	free(*self_p);
	*self_p = NULL;
}

const json_t *kbox_result_calls(const kbox_result_t *self)
{
	return self->calls;
}

kbox_exec_status_t kbox_result_status(const kbox_result_t *self)
{
	return self->status;
}
int kbox_result_count(const kbox_result_t *self)
{
	return self->count;
}
int kbox_result_value_count(const kbox_result_t *self)
{
	return self->cap->value_count >= 0 ? self->cap->value_count : self->count;
}
double kbox_result_seconds(const kbox_result_t *self)
{
	return self->seconds;
}
const char *kbox_result_reason(const kbox_result_t *self)
{
	return self->reason;
}

void kbox_result_set_status(kbox_result_t *self, kbox_exec_status_t status, const char *reason)
{
	self->status = status;
	if (reason)
		snprintf(self->reason, sizeof self->reason, "%s", reason);
}

int kbox_result_add_notice(kbox_result_t *self, const char *text, bool first)
{
	return notice_add(self->cap, text, first);
}

const kbox_text_t *kbox_result_stream(const kbox_result_t *self, kbox_stream_t stream)
{
	return (unsigned)stream < KBOX_TEXT_COUNT ? &self->cap->streams[stream].view : NULL;
}

json_t *kbox_result_value(const kbox_result_t *self)
{
	return self->cap->has_value ? self->cap->value : NULL;
}

size_t kbox_result_output_count(const kbox_result_t *self)
{
	return self->cap->n_outs;
}

const kbox_output_t *kbox_result_output(const kbox_result_t *self, size_t i)
{
	return i < self->cap->n_outs ? &self->cap->outs[i].pub : NULL;
}

int kbox_result_set_error_text(kbox_result_t *self, const char *line)
{
	tbuf_t *t = &self->cap->traceback;
	size_t n = strlen(line);
	char *text = malloc(n + 2);
	if (!text)
		return -1;
	memcpy(text, line, n);
	text[n++] = '\n';
	text[n] = '\0';
	free(t->view_text);
	t->view_text = text;
	t->view.text = text;
	t->view.len = n;
	t->view.truncated = true;
	t->view.marker_at = t->view.marker_len = 0;
	t->view.note_at = n;
	return 0;
}

const kbox_text_t *kbox_result_value_text(const kbox_result_t *self)
{
	return self->cap->has_value ? &self->cap->value_text.view : NULL;
}

size_t kbox_result_display_count(const kbox_result_t *self)
{
	return json_array_size(self->cap->displays);
}

json_t *kbox_result_display(const kbox_result_t *self, size_t i)
{
	return json_object_get(json_array_get(self->cap->displays, i), "data");
}

bool kbox_result_display_updates_earlier(const kbox_result_t *self, size_t i)
{
	return json_is_true(
	        json_object_get(json_array_get(self->cap->displays, i), "updates_earlier"));
}

const char *kbox_result_display_id(const kbox_result_t *self, size_t i)
{
	json_t *id = json_object_get(json_array_get(self->cap->displays, i), "display_id");
	return json_is_string(id) ? json_string_value(id) : NULL;
}

size_t kbox_result_image_count(const kbox_result_t *self)
{
	return self->cap->n_images;
}

const kbox_image_t *kbox_result_image(const kbox_result_t *self, size_t i)
{
	return i < self->cap->n_images ? &self->cap->images[i] : NULL;
}

unsigned long long kbox_capture_files_bytes(const kbox_capture_t *self)
{
	return self->files_bytes;
}

bool kbox_result_has_error(const kbox_result_t *self)
{
	return self->cap->has_error;
}
const char *kbox_result_ename(const kbox_result_t *self, size_t *len)
{
	if (len)
		*len = self->cap->ename ? self->cap->ename_len : 0;
	return self->cap->ename ? self->cap->ename : "";
}
const char *kbox_result_evalue(const kbox_result_t *self, size_t *len)
{
	if (len)
		*len = self->cap->evalue ? self->cap->evalue_len : 0;
	return self->cap->evalue ? self->cap->evalue : "";
}
const kbox_text_t *kbox_result_traceback(const kbox_result_t *self)
{
	return self->cap->has_error ? &self->cap->traceback.view : NULL;
}
json_t *kbox_result_traceback_raw(const kbox_result_t *self)
{
	return self->cap->traceback_raw;
}

size_t kbox_result_notice_count(const kbox_result_t *self)
{
	return self->cap->n_notices;
}
const char *kbox_result_notice(const kbox_result_t *self, size_t i)
{
	return i < self->cap->n_notices ? self->cap->notices[i] : NULL;
}
