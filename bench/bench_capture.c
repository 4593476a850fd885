/* bench/bench_capture.c — the capture layer on a flood, without a kernel:
 * how fast it takes stream text, how much memory it holds while doing so,
 * and what rendering a large truncated result costs.  Public API only.
 *
 * Usage: bench_capture [-t TOTAL_MIB] [-r RUNS] [-n RENDERS] [-d DIR]
 *
 * Messages are made with kbox_msg_new, once, before anything is timed, and
 * fed to kbox_capture_feed as kbox_capture_on_msg would feed them:
 *
 *   lines     stream messages of 64 KiB of text in 80-byte lines, TOTAL_MIB
 *             (default 1024) in all: the text outgrows its budget at once
 *             and everything after goes to the spill file;
 *   progress  the same amount as tqdm-style "\r" updates, one "\n" per
 *             message: the terminal model overwrites the line in place;
 *   display   one display_data whose text/plain is 10 MB.
 *
 * A capture run is kbox_capture_new (outputs in a fresh directory under
 * DIR, default $TMPDIR or /tmp), every feed, kbox_capture_finish and
 * kbox_result_destroy; the figure is the median over RUNS (default 5) of
 * the stream text processed per second (MB = 10^6 bytes).  The floor is
 * what any capture that keeps the complete text must at least do: write(2)
 * the same bytes, in the same 64 KiB pieces, to a file in the same
 * directory.  Runs are interleaved (floor, lines, progress, display in each
 * round) so that a slow phase of the machine falls on all of them.
 *
 * Memory: before each run the peak RSS is reset (echo 5 >
 * /proc/self/clear_refs) and VmHWM − VmRSS(before) is the run's growth;
 * the largest over the runs is shown, and the process's VmHWM at the end.
 *
 * Rendering: one result built from 100 MiB of stdout lines, 10 MiB of
 * stderr, a 1 MB execute_result, 100 displays (three with a PNG) and an
 * error with a 500-line ANSI-coloured traceback, rendered RENDERS times
 * (default 200) by kbox_render_text and by kbox_render_json (and
 * json_dumps of it); medians in microseconds.
 *
 * Prints a table and a last line beginning "summary:".  Exit status 0, or
 * 1 when something could not be set up or a run lost text. */
#define _GNU_SOURCE
#include <kbox.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (64 * 1024)
#define POOL 8 /* distinct messages per case, fed round-robin */
#define LINE 80
#define DISPLAY_BYTES 10000000
#define RENDER_STDOUT (100u << 20)
#define RENDER_STDERR (10u << 20)

static const char *g_dir = NULL; /* parent of the per-run directories */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of N values (sorts V). */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- memory ---- */

/* FIELD of /proc/self/status in KiB, or -1. */
static long status_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t n = strlen(field);
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, field, n) == 0 && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Reset the peak RSS to the current RSS; return the current RSS in KiB. */
static long peak_reset(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, "5", 1) != 1)
			fprintf(stderr, "bench_capture: cannot reset the peak RSS\n");
		close(fd);
	}
	return status_kib("VmRSS");
}

/* ---- scratch directories ---- */

/* A new private directory under g_dir.  Caller frees. */
static char *scratch_dir(void)
{
	char buf[4096];

	if (snprintf(buf, sizeof buf, "%s/kbox-bench-capture-XXXXXX", g_dir) >= (int)sizeof buf)
		return NULL;
	return mkdtemp(buf) ? strdup(buf) : NULL;
}

/* Remove the files in DIR and DIR itself (one level: that is all we make). */
static void scratch_remove(char **dir_p)
{
	DIR *d;
	struct dirent *e;

	if (!*dir_p)
		return;
	d = opendir(*dir_p);
	if (d) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	rmdir(*dir_p);
	free(*dir_p);
	*dir_p = NULL;
}

/* ---- messages ---- */

static kbox_msg_t *msg(const char *type, json_t *content)
{
	return kbox_msg_new(type, "bench-capture", "bench", &content);
}

/* A stream message on NAME with TEXT of N bytes. */
static kbox_msg_t *stream_msg(const char *name, const char *text, size_t n)
{
	return msg("stream", json_pack("{s:s, s:s%}", "name", name, "text", text, n));
}

/* CHUNK bytes of 80-byte numbered lines, starting at line FIRST. */
static void fill_lines(char *buf, long first)
{
	size_t off = 0;

	while (off < CHUNK) {
		char line[LINE + 1];
		int k = snprintf(line, sizeof line, "line %09ld: ", first++);
		memset(line + k, 'a' + (int)(first % 26), LINE - 1 - (size_t)k);
		line[LINE - 1] = '\n';
		size_t take = CHUNK - off < LINE ? CHUNK - off : LINE;
		memcpy(buf + off, line, take);
		off += take;
	}
}

/* CHUNK bytes of "\r" progress updates ending in one "\n". */
static void fill_progress(char *buf, int seed)
{
	size_t off = 0;
	int i = 0;

	while (off < CHUNK - 1) {
		char upd[96];
		int pct = (seed * 7 + i++) % 101;
		int k = snprintf(upd, sizeof upd,
		                 "\r%3d%%|%-20.*s| %d/100 [00:%02d<00:%02d, 42.0it/s]", pct,
		                 pct / 5, "####################", pct, pct % 60, (100 - pct) % 60);
		size_t take = (size_t)k < CHUNK - 1 - off ? (size_t)k : CHUNK - 1 - off;
		memcpy(buf + off, upd, take);
		off += take;
	}
	buf[CHUNK - 1] = '\n';
}

/* An execute_input that gives the capture its execution count. */
static kbox_msg_t *input_msg(int count)
{
	return msg("execute_input",
	           json_pack("{s:s, s:i}", "code", "bench()", "execution_count", count));
}

/* The base64 of a PNG signature and IHDR chunk for W×H pixels: enough for
 * kbox_image_size, not a picture.  Caller frees. */
static char *png_b64(unsigned w, unsigned h)
{
	unsigned char png[64] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
	                         0,    0,   0,   13,  'I',  'H',  'D',  'R'};
	size_t n = sodium_base64_encoded_len(sizeof png, sodium_base64_VARIANT_ORIGINAL);
	char *out = malloc(n);

	png[16] = (unsigned char)(w >> 24), png[17] = (unsigned char)(w >> 16);
	png[18] = (unsigned char)(w >> 8), png[19] = (unsigned char)w;
	png[20] = (unsigned char)(h >> 24), png[21] = (unsigned char)(h >> 16);
	png[22] = (unsigned char)(h >> 8), png[23] = (unsigned char)h;
	png[24] = 8, png[25] = 6; /* 8-bit RGBA */
	if (out)
		sodium_bin2base64(out, n, png, sizeof png, sodium_base64_VARIANT_ORIGINAL);
	return out;
}

/* ---- one run of each case ---- */

typedef struct {
	double seconds;
	long growth_kib;
	size_t total_bytes; /* the stream's total_bytes as the result saw it */
	bool truncated;
} run_t;

/* Feed INPUT then COUNT messages from POOL round-robin to a new capture in a
 * fresh directory; time it all, through kbox_result_destroy. */
static int run_capture(kbox_msg_t *const *pool, long count, run_t *out)
{
	char *dir = scratch_dir();
	kbox_capture_opts_t opts = {0};
	kbox_error_t err = {0};
	kbox_msg_t *in = input_msg(1);
	kbox_capture_t *cap;
	kbox_result_t *r;
	long rss0;
	double t0;
	int rc = -1;

	if (!dir || !in)
		goto out;
	opts.outputs_dir = dir;
	rss0 = peak_reset();
	t0 = now();
	cap = kbox_capture_new(&opts, &err);
	if (!cap) {
		fprintf(stderr, "bench_capture: %s\n", err.msg);
		goto out;
	}
	kbox_capture_feed(cap, in, NULL);
	for (long i = 0; i < count; i++)
		if (kbox_capture_feed(cap, pool[i % POOL], &err) != 0) {
			fprintf(stderr, "bench_capture: feed: %s\n", err.msg);
			kbox_capture_destroy(&cap);
			goto out;
		}
	r = kbox_capture_finish(&cap, NULL);
	out->total_bytes = r ? kbox_result_stream(r, KBOX_TEXT_STDOUT)->total_bytes : 0;
	out->truncated = r && kbox_result_stream(r, KBOX_TEXT_STDOUT)->truncated;
	kbox_result_destroy(&r);
	out->seconds = now() - t0;
	out->growth_kib = status_kib("VmHWM") - rss0;
	rc = 0;
out:
	kbox_msg_destroy(&in);
	scratch_remove(&dir);
	return rc;
}

/* The floor: write(2) COUNT chunks from TEXTS round-robin to a new file. */
static int run_floor(char *const *texts, long count, run_t *out)
{
	char *dir = scratch_dir(), path[4096];
	long rss0;
	double t0;
	int fd, rc = -1;

	if (!dir || snprintf(path, sizeof path, "%s/floor.txt", dir) >= (int)sizeof path)
		goto out;
	rss0 = peak_reset();
	t0 = now();
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		goto out;
	for (long i = 0; i < count; i++) {
		const char *p = texts[i % POOL];
		size_t left = CHUNK;
		while (left) {
			ssize_t w = write(fd, p, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				close(fd);
				goto out;
			}
			p += w;
			left -= (size_t)w;
		}
	}
	if (close(fd) != 0)
		goto out;
	out->seconds = now() - t0;
	out->growth_kib = status_kib("VmHWM") - rss0;
	out->total_bytes = (size_t)count * CHUNK;
	rc = 0;
out:
	scratch_remove(&dir);
	return rc;
}

/* ---- rendering ---- */

/* The large truncated result rendering is timed on. */
static kbox_result_t *big_result(const char *dir)
{
	kbox_capture_opts_t opts = {0};
	kbox_capture_t *cap;
	kbox_msg_t *m;
	char *buf = malloc(CHUNK), *value = NULL, *png = png_b64(640, 480);
	json_t *tb;

	opts.outputs_dir = dir;
	cap = kbox_capture_new(&opts, NULL);
	if (!cap || !buf || !png)
		goto fail;
	m = input_msg(7);
	kbox_capture_feed(cap, m, NULL);
	kbox_msg_destroy(&m);
	for (long i = 0; i < (long)(RENDER_STDOUT / CHUNK); i++) {
		fill_lines(buf, i * (CHUNK / LINE));
		m = stream_msg("stdout", buf, CHUNK);
		kbox_capture_feed(cap, m, NULL);
		kbox_msg_destroy(&m);
		if (i < (long)(RENDER_STDERR / CHUNK)) {
			m = stream_msg("stderr", buf, CHUNK);
			kbox_capture_feed(cap, m, NULL);
			kbox_msg_destroy(&m);
		}
	}
	for (int i = 0; i < 100; i++) {
		char text[64];
		snprintf(text, sizeof text, "<Figure %d with 1 Axes>", i);
		m = msg("display_data",
		        i % 33 == 0 ? json_pack("{s:{s:s, s:s}, s:{}}", "data", "text/plain", text,
		                                "image/png", png, "metadata")
		                    : json_pack("{s:{s:s, s:s}, s:{}}", "data", "text/plain", text,
		                                "text/html", "<b>html</b>", "metadata"));
		kbox_capture_feed(cap, m, NULL);
		kbox_msg_destroy(&m);
	}
	value = malloc(1000001);
	if (!value)
		goto fail;
	for (size_t i = 0; i < 1000000; i++)
		value[i] = i % 100 == 99 ? '\n' : (char)('0' + i % 10);
	value[1000000] = '\0';
	m = msg("execute_result", json_pack("{s:i, s:{s:s}, s:{}}", "execution_count", 7, "data",
	                                    "text/plain", value, "metadata"));
	kbox_capture_feed(cap, m, NULL);
	kbox_msg_destroy(&m);
	tb = json_array();
	for (int i = 0; i < 500; i++)
		json_array_append_new(tb,
		                      json_sprintf("\x1b[0;32mFile \x1b[0m/srv/app/mod%d.py:%d, in "
		                                   "\x1b[0;36mf%d\x1b[0m\n    return f%d(x)",
		                                   i, i * 3, i, i + 1));
	json_array_append_new(tb, json_string("\x1b[0;31mRecursionError\x1b[0m: maximum recursion "
	                                      "depth exceeded"));
	m = msg("error", json_pack("{s:s, s:s, s:o}", "ename", "RecursionError", "evalue",
	                           "maximum recursion depth exceeded", "traceback", tb));
	kbox_capture_feed(cap, m, NULL);
	kbox_msg_destroy(&m);
	free(buf);
	free(value);
	free(png);
	return kbox_capture_finish(&cap, NULL);
fail:
	kbox_capture_destroy(&cap);
	free(buf);
	free(value);
	free(png);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_capture [-t TOTAL_MIB] [-r RUNS] [-n RENDERS] [-d DIR]\n");
}

int main(int argc, char **argv)
{
	long total_mib = 1024, runs = 5, renders = 200, count;
	kbox_msg_t *lines[POOL] = {0}, *progress[POOL] = {0}, *display[POOL] = {0};
	char *texts[POOL] = {0}, *big = NULL, *rdir = NULL, *s;
	double *t_floor = NULL, *t_lines = NULL, *t_prog = NULL, *t_disp = NULL;
	double *t_text = NULL, *t_json = NULL, *t_dumps = NULL;
	long g_floor = 0, g_lines = 0, g_prog = 0, g_disp = 0;
	size_t text_len = 0, dumps_len = 0;
	kbox_result_t *res = NULL;
	int opt, rc = 1, lost = 0;

	while ((opt = getopt(argc, argv, "t:r:n:d:h")) != -1) {
		char *end = NULL;
		long v = 0;
		if (opt == 't' || opt == 'r' || opt == 'n') {
			v = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || v < 1 || v > 1000000) {
				usage();
				return 2;
			}
		}
		switch (opt) {
		case 't':
			total_mib = v;
			break;
		case 'r':
			runs = v;
			break;
		case 'n':
			renders = v;
			break;
		case 'd':
			g_dir = optarg;
			break;
		default:
			usage();
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind != argc) {
		usage();
		return 2;
	}
	if (!g_dir)
		g_dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	if (kbox_init() != 0) {
		fprintf(stderr, "bench_capture: kbox_init failed\n");
		return 1;
	}
	count = total_mib * (1024 * 1024 / CHUNK);

	/* the messages, made once */
	for (int i = 0; i < POOL; i++) {
		texts[i] = malloc(CHUNK);
		if (!texts[i])
			goto out;
		fill_progress(texts[i], i);
		progress[i] = stream_msg("stdout", texts[i], CHUNK);
		fill_lines(texts[i], (long)i * (CHUNK / LINE));
		lines[i] = stream_msg("stdout", texts[i], CHUNK);
		if (!lines[i] || !progress[i])
			goto out;
	}
	big = malloc(DISPLAY_BYTES + 1);
	if (!big)
		goto out;
	for (size_t i = 0; i < DISPLAY_BYTES; i++)
		big[i] = i % LINE == LINE - 1 ? '\n' : 'd';
	big[DISPLAY_BYTES] = '\0';
	/* one run feeds one display: display[0] */
	display[0] = msg("display_data",
	                 json_pack("{s:{s:s}, s:{}}", "data", "text/plain", big, "metadata"));
	if (!display[0])
		goto out;
	free(big);
	big = NULL;

	t_floor = calloc((size_t)runs, sizeof(double));
	t_lines = calloc((size_t)runs, sizeof(double));
	t_prog = calloc((size_t)runs, sizeof(double));
	t_disp = calloc((size_t)runs, sizeof(double));
	t_text = calloc((size_t)renders, sizeof(double));
	t_json = calloc((size_t)renders, sizeof(double));
	t_dumps = calloc((size_t)renders, sizeof(double));
	if (!t_floor || !t_lines || !t_prog || !t_disp || !t_text || !t_json || !t_dumps)
		goto out;

	for (long r = 0; r < runs; r++) {
		run_t f = {0}, l = {0}, p = {0}, d = {0};
		if (run_floor(texts, count, &f) != 0 || run_capture(lines, count, &l) != 0 ||
		    run_capture(progress, count, &p) != 0 || run_capture(display, 1, &d) != 0) {
			fprintf(stderr, "bench_capture: a run failed in %s\n", g_dir);
			goto out;
		}
		if (l.total_bytes != (size_t)count * CHUNK || !l.truncated) {
			fprintf(stderr, "bench_capture: lines: the result saw %zu of %zu bytes\n",
			        l.total_bytes, (size_t)count * CHUNK);
			lost = 1;
		}
		t_floor[r] = f.seconds, t_lines[r] = l.seconds, t_prog[r] = p.seconds,
		t_disp[r] = d.seconds;
		g_floor = f.growth_kib > g_floor ? f.growth_kib : g_floor;
		g_lines = l.growth_kib > g_lines ? l.growth_kib : g_lines;
		g_prog = p.growth_kib > g_prog ? p.growth_kib : g_prog;
		g_disp = d.growth_kib > g_disp ? d.growth_kib : g_disp;
	}

	rdir = scratch_dir();
	res = rdir ? big_result(rdir) : NULL;
	if (!res) {
		fprintf(stderr, "bench_capture: building the result to render failed\n");
		goto out;
	}
	for (long i = 0; i < renders; i++) {
		double t0 = now();
		s = kbox_render_text(res);
		t_text[i] = now() - t0;
		text_len = s ? strlen(s) : 0;
		free(s);
		t0 = now();
		json_t *j = kbox_render_json(res);
		t_json[i] = now() - t0;
		s = json_dumps(j, JSON_COMPACT);
		t_dumps[i] = now() - t0;
		dumps_len = s ? strlen(s) : 0;
		free(s);
		json_decref(j);
	}

	{
		double bytes = (double)count * CHUNK;
		double mf = median(t_floor, (int)runs), ml = median(t_lines, (int)runs);
		double mp = median(t_prog, (int)runs), md = median(t_disp, (int)runs);
		double rt = median(t_text, (int)renders) * 1e6,
		       rj = median(t_json, (int)renders) * 1e6;
		double rd = median(t_dumps, (int)renders) * 1e6;

		printf("bench_capture: %ld MiB of stream text per run in 64 KiB messages, median of %ld "
		       "runs, outputs in %s\n",
		       total_mib, runs, g_dir);
		printf("%-34s %10s %9s %10s %14s\n", "case", "MB/s", "seconds", "vs floor",
		       "peak RSS +MiB");
		printf("%-34s %10.0f %9.3f %10s %14.1f\n", "floor: write(2) the same bytes",
		       bytes / mf / 1e6, mf, "1.00x", g_floor / 1024.0);
		printf("%-34s %10.0f %9.3f %9.2fx %14.1f\n", "capture: lines (spilled)",
		       bytes / ml / 1e6, ml, ml / mf, g_lines / 1024.0);
		printf("%-34s %10.0f %9.3f %9.2fx %14.1f\n", "capture: \\r progress updates",
		       bytes / mp / 1e6, mp, mp / mf, g_prog / 1024.0);
		printf("%-34s %10.0f %9.6f %10s %14.1f\n", "capture: one 10 MB text/plain display",
		       DISPLAY_BYTES / md / 1e6, md, "-", g_disp / 1024.0);
		printf("render of a truncated result (100 MiB stdout, 10 MiB stderr, 1 MB value, 100 "
		       "displays, 500-line traceback), median of %ld:\n",
		       renders);
		printf("  kbox_render_text  %8.1f us  (%zu bytes of text)\n", rt, text_len);
		printf("  kbox_render_json  %8.1f us  (+ json_dumps: %.1f us, %zu bytes)\n", rj, rd,
		       dumps_len);
		printf("process peak RSS (VmHWM) at the end: %.1f MiB\n",
		       status_kib("VmHWM") / 1024.0);
		printf("summary: capture takes stream text at %.0f MB/s (lines) and %.0f MB/s (\\r "
		       "progress), %.2fx / %.2fx the time of the write(2) floor (%.0f MB/s); peak RSS "
		       "+%.1f MiB for %ld MiB; rendering a large truncated result: text %.0f us, json "
		       "%.0f us%s\n",
		       bytes / ml / 1e6, bytes / mp / 1e6, ml / mf, mp / mf, bytes / mf / 1e6,
		       (g_lines > g_prog ? g_lines : g_prog) / 1024.0, total_mib, rt, rj,
		       lost ? "  [TEXT LOST: see stderr]" : "");
	}
	rc = lost ? 1 : 0;
out:
	kbox_result_destroy(&res);
	scratch_remove(&rdir);
	for (int i = 0; i < POOL; i++) {
		kbox_msg_destroy(&lines[i]);
		kbox_msg_destroy(&progress[i]);
		kbox_msg_destroy(&display[i]);
		free(texts[i]);
	}
	free(big);
	free(t_floor);
	free(t_lines);
	free(t_prog);
	free(t_disp);
	free(t_text);
	free(t_json);
	free(t_dumps);
	return rc;
}
