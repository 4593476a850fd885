/* src/runtime/kernel_log.c — the kernel's log: a pipe copied to kernel.log,
 * bounded and rotated (kernel_log.h). */
#include "runtime/runtime.h"
#include "runtime/kernel_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (64 * 1024) /* read at a time: one handler call */
#define FLUSH_CHUNKS 16   /* the most a flush reads */

struct kr_kernel_log {
	char path[PATH_MAX], old[PATH_MAX + 2];
	long long max;
	long long size;    /* of the file open as OUT */
	int out;           /* kernel.log, or -1 until something comes */
	int in;            /* the pipe's read end, or -1 */
	kbox_loop_t *loop; /* where IN is watched */
	/* the last bytes this pipe brought; WRAPPED: earlier ones were dropped */
	char last[KR_KERNEL_LOG_TAIL];
	size_t last_len;
	bool wrapped;
	char buf[CHUNK];
};

kr_kernel_log_t *kr_kernel_log_new(const char *path, long long max)
{
	kr_kernel_log_t *self = calloc(1, sizeof *self);
	if (!self)
		return NULL;
	snprintf(self->path, sizeof self->path, "%s", path);
	snprintf(self->old, sizeof self->old, "%s.1", path);
	self->max = max > CHUNK ? max : CHUNK;
	self->out = self->in = -1;
	return self;
}

/* Open the log (appending to what is there) when it is not open.  0 or -1. */
static int open_log(kr_kernel_log_t *self)
{
	struct stat st;
	if (self->out >= 0)
		return 0;
	self->out = kx_open_file(AT_FDCWD, self->path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (self->out < 0)
		return -1;
	self->size = fstat(self->out, &st) == 0 ? (long long)st.st_size : 0;
	return 0;
}

/* Append DATA (LEN <= CHUNK bytes) to the log, first moving it to the old
 * one when it would go over its bound.  What cannot be written (a full
 * disk) is dropped: the kernel is never held up by its log. */
static void put(kr_kernel_log_t *self, const char *data, size_t len)
{
	/* the tail, for a message (kept even when the file cannot be) */
	if (len >= sizeof self->last) {
		memcpy(self->last, data + len - sizeof self->last, sizeof self->last);
		self->last_len = sizeof self->last;
		self->wrapped = true;
	} else {
		size_t keep = sizeof self->last - len < self->last_len ? sizeof self->last - len
		                                                       : self->last_len;
		self->wrapped |= keep < self->last_len;
		memmove(self->last, self->last + self->last_len - keep, keep);
		memcpy(self->last + keep, data, len);
		self->last_len = keep + len;
	}
	if (open_log(self) < 0)
		return;
	if (self->size > 0 && self->size + (long long)len > self->max) {
		close(self->out);
		self->out = -1;
		/* (a log larger than the bound, from before it was kept, goes) */
		if (self->size > self->max || rename(self->path, self->old) < 0)
			unlink(self->path);
		if (open_log(self) < 0)
			return;
	}
	if (kx_write_all(self->out, data, len) == 0)
		self->size += (long long)len;
	else {
		/* a short write counts too: the size is the file's */
		struct stat st;
		if (fstat(self->out, &st) == 0)
			self->size = (long long)st.st_size;
	}
}

/* Read once from the pipe and copy it.  1 when something came, 0 when
 * nothing is there now, -1 at its end (every writer has gone). */
static int pump(kr_kernel_log_t *self)
{
	ssize_t n;
	do
		n = read(self->in, self->buf, sizeof self->buf);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		put(self, self->buf, (size_t)n);
		return 1;
	}
	return n == 0 || errno != EAGAIN ? -1 : 0;
}

static void close_pipe(kr_kernel_log_t *self)
{
	if (self->in < 0)
		return;
	if (self->loop)
		kbox_loop_remove_fd(self->loop, self->in);
	close(self->in);
	self->in = -1;
	self->loop = NULL;
}

static int on_readable(kbox_loop_t *loop, void *arg)
{
	kr_kernel_log_t *self = arg;
	(void)loop;
	if (pump(self) < 0)
		close_pipe(self);
	return 0;
}

int kr_kernel_log_pipe(kr_kernel_log_t *self, kbox_loop_t *loop, kbox_error_t *err)
{
	int p[2];
	kr_kernel_log_close(self);
	if (pipe2(p, O_CLOEXEC) < 0)
		return kbox_error_set_sys(err, "cannot make the kernel's output pipe");
	/* only the reading end: the kernel's writes block as usual */
	if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
		kbox_error_set_sys(err, "cannot make the kernel's output pipe non-blocking");
		goto fail;
	}
	if (kbox_loop_add_fd(loop, p[0], on_readable, self, err) < 0)
		goto fail;
	self->in = p[0];
	self->loop = loop;
	self->last_len = 0; /* a new kernel */
	self->wrapped = false;
	return p[1];
fail:
	close(p[0]);
	close(p[1]);
	return -1;
}

void kr_kernel_log_flush(kr_kernel_log_t *self)
{
	int r = 1;
	for (int i = 0; self && self->in >= 0 && r > 0 && i < FLUSH_CHUNKS; i++)
		if ((r = pump(self)) < 0)
			close_pipe(self);
}

void kr_kernel_log_close(kr_kernel_log_t *self)
{
	if (!self)
		return;
	kr_kernel_log_flush(self);
	close_pipe(self);
}

void kr_kernel_log_tail(const kr_kernel_log_t *self, int lines, char *buf, size_t size)
{
	char raw[KR_KERNEL_LOG_TAIL + 1], *text, *start, *at[64];
	size_t n = 0, used = 0, cut[64];
	bool more[64];
	int found = 0;

	if (size)
		buf[0] = '\0';
	if (!self || !size)
		return;
	/* escape sequences (ESC [ ... final byte) go, other control
	 * characters but newlines become spaces */
	for (size_t i = 0; i < self->last_len; i++) {
		unsigned char c = (unsigned char)self->last[i];
		if (c == 0x1b) {
			if (i + 1 < self->last_len && self->last[i + 1] == '[')
				for (i += 2;
				     i < self->last_len && ((unsigned char)self->last[i] < 0x40 ||
				                            (unsigned char)self->last[i] > 0x7e);
				     i++)
					;
			continue;
		}
		raw[n++] = c == '\r' ? '\n' : (c < 0x20 && c != '\n') || c == 0x7f ? ' ' : (char)c;
	}
	raw[n] = '\0';
	start = raw;
	if (self->wrapped) { /* its first line is cut */
		if (!(start = strchr(raw, '\n')))
			return;
		start++;
	}
	if (!(text = kx_utf8_repair(start, strlen(start), NULL)))
		return;
	/* from the end back: the last LINES lines that are not blank, as many
	 * as fit in BUF (each: two spaces, at most 200 bytes, "...", a newline) */
	n = strlen(text);
	for (char *end = text + n, *p; end > text && found < lines && found < 64; end = p - 1) {
		size_t len, keep;
		for (p = end; p > text && p[-1] != '\n'; p--)
			;
		len = (size_t)(end - p);
		if (len > 0 && strspn(p, " ") < len) {
			keep = kx_utf8_floor(p, len, 200); /* whole characters */
			if (used + keep + 6 >= size)
				break;
			used += keep + 6;
			at[found] = p;
			cut[found] = keep;
			more[found++] = keep < len;
		}
		if (p == text)
			break;
	}
	used = 0;
	while (found > 0) {
		found--;
		used += (size_t)snprintf(buf + used, size - used, "%s  %.*s%s", used ? "\n" : "",
		                         (int)cut[found], at[found], more[found] ? "..." : "");
	}
	free(text);
}

void kr_kernel_log_destroy(kr_kernel_log_t **self_p)
{
	kr_kernel_log_t *self;
	if (!self_p || !(self = *self_p))
		return;
	close_pipe(self);
	if (self->out >= 0)
		close(self->out);
	free(self);
	*self_p = NULL;
}
