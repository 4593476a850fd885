/* bench/bench_iopub_scan.c — why a dropped stream message's text is measured
 * by the iopub guard's own scanner (kbox__stream_text, src/iopub_guard.c)
 * and not by jansson: the time and the heap each takes on
 *
 *   stream   a 16 MiB stream message's content, {"name":"stdout","text":…}
 *            (80-byte lines, each "\n" escaped): what a print flood sends;
 *   hostile  48 MB of content where 16 Mi empty arrays come before the
 *            text, {"x":[[],[],…],"text":"ok"}: what a kernel that wants to
 *            hurt its reader sends (jansson allocates every one).
 *
 * The content is read when the message is already over the rate limit,
 * so that nothing of it is kept: the question is only its text's length.
 * jansson is json_loadb (JSON_ALLOW_NUL, as wire.c decodes), then the
 * "text" member's length; its heap is counted through json_set_alloc_funcs
 * (the peak of the bytes it held at once).  The scanner allocates nothing.
 * Times are CPU time (CLOCK_THREAD_CPUTIME_ID, so that a machine shared
 * with other work inflates them less), the median of RUNS (default 5; 3
 * for jansson on hostile input, which takes seconds).
 *
 * Not built by make; after make (libkbox-core is a convenience library):
 *
 *   gcc -O2 -Iinclude -Isrc -o bench/bench_iopub_scan bench/bench_iopub_scan.c \
 *       .libs/libkbox-core.a .libs/libkx.a \
 *       $(pkg-config --libs libczmq libzmq libsodium jansson) -lm
 *   ./bench/bench_iopub_scan [RUNS]
 */
#include "iopub_guard.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t heap_now, heap_peak;

/* jansson's allocator, counting: each block carries its size before it. */
static void *counting_malloc(size_t n)
{
	size_t *p = malloc(n + sizeof(size_t) * 2);
	if (!p)
		return NULL;
	p[0] = n;
	heap_now += n;
	if (heap_now > heap_peak)
		heap_peak = heap_now;
	return p + 2;
}

static void counting_free(void *q)
{
	size_t *p = q;
	if (!p)
		return;
	p -= 2;
	heap_now -= p[0];
	free(p);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The content of a stream message whose text is about TEXT_BYTES. */
static char *make_stream(size_t text_bytes, size_t *len)
{
	char *p = malloc(text_bytes + text_bytes / 40 + 64), *q = p;
	size_t line = 0;
	if (!p)
		return NULL;
	q += sprintf(q, "{\"name\":\"stdout\",\"text\":\"");
	while ((size_t)(q - p) < text_bytes) {
		int n = sprintf(
		        q, "line %08zu: the quick brown fox jumps over the lazy dog, again%-6s",
		        line++, "");
		q += n;
		memcpy(q, "\\n", 2); /* the line's "\n", as JSON writes it */
		q += 2;
	}
	q += sprintf(q, "\"}");
	*len = (size_t)(q - p);
	return p;
}

/* TOTAL bytes of {"x":[[],[],…],"text":"ok"}. */
static char *make_hostile(size_t total, size_t *len)
{
	static const char head[] = "{\"x\":[", tail[] = "[]],\"text\":\"ok\"}";
	char *p = malloc(total + 1), *q = p;
	if (!p)
		return NULL;
	memcpy(q, head, sizeof head - 1);
	q += sizeof head - 1;
	while ((size_t)(q - p) + 3 + sizeof tail - 1 <= total) {
		memcpy(q, "[],", 3);
		q += 3;
	}
	memcpy(q, tail, sizeof tail);
	q += sizeof tail - 1;
	*len = (size_t)(q - p);
	return p;
}

/* The text's length by the scanner (SIZE_MAX when refused). */
static size_t by_scanner(const char *p, size_t n)
{
	int which;
	size_t bytes;
	return kbox__stream_text(p, n, &which, &bytes) ? bytes : (size_t)-1;
}

/* The text's length by jansson (SIZE_MAX when refused). */
static size_t by_jansson(const char *p, size_t n)
{
	json_error_t e;
	json_t *c = json_loadb(p, n, JSON_ALLOW_NUL, &e);
	json_t *t = json_object_get(c, "text");
	size_t bytes = json_is_string(t) ? json_string_length(t) : (size_t)-1;
	json_decref(c);
	return bytes;
}

/* Median seconds of RUNS calls of FN on P, N; its answer in *BYTES and the
 * largest heap jansson held in *PEAK. */
static double timed(size_t (*fn)(const char *, size_t), const char *p, size_t n, int runs,
                    size_t *bytes, size_t *peak)
{
	double t[16];
	*peak = 0;
	for (int i = 0; i < runs; i++) {
		double t0;
		heap_now = heap_peak = 0;
		t0 = now_s();
		*bytes = fn(p, n);
		t[i] = now_s() - t0;
		if (heap_peak > *peak)
			*peak = heap_peak;
	}
	qsort(t, (size_t)runs, sizeof *t, cmp_double);
	return t[runs / 2];
}

static void report(const char *name, const char *p, size_t n, int runs, int jansson_runs)
{
	size_t b1, b2, h1, h2;
	double s = timed(by_scanner, p, n, runs, &b1, &h1);
	double j = timed(by_jansson, p, n, jansson_runs, &b2, &h2);
	printf("%-8s %6.1f MiB  scanner %8.2f ms CPU  heap %6.1f MiB  text %zu\n", name,
	       (double)n / 1048576, s * 1e3, (double)h1 / 1048576, b1);
	printf("%-8s %6s      jansson %8.2f ms CPU  heap %6.1f MiB  text %zu  (%.0fx the time)\n",
	       "", "", j * 1e3, (double)h2 / 1048576, b2, j / s);
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	size_t n;
	char *p;

	if (runs < 1 || runs > 15)
		runs = 5;
	json_set_alloc_funcs(counting_malloc, counting_free);
	if (!(p = make_stream(16u << 20, &n)))
		return 1;
	report("stream", p, n, runs, runs);
	free(p);
	if (!(p = make_hostile(48000000, &n)))
		return 1;
	report("hostile", p, n, runs, runs < 3 ? runs : 3);
	free(p);
	return 0;
}
