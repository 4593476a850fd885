/* src/cli/cmd_logs.c — kbox logs: the session's event log, readable. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* S on standard output, its control and bidi characters shown, not
 * obeyed (cli_write_safe). */
static void put_safe(const char *s)
{
	cli_write_safe(stdout, s, strlen(s));
}

/* "TIME EVENT key=value …" for one event line; in FORMAT ndjson the line
 * as logged; in json, the same as an element of an array (the NTH, from
 * 0), or, when the line is not JSON (torn by a crash), as a string. */
static void print_event(const char *line, format_t format, size_t nth)
{
	json_t *j;
	const char *key;
	json_t *v;
	size_t len = strcspn(line, "\n");
	if (format != FMT_TEXT) {
		if (format == FMT_JSON)
			fputs(nth ? ",\n" : "[\n", stdout);
		j = format == FMT_JSON ? json_loadb(line, len, JSON_ALLOW_NUL, NULL) : NULL;
		if (format == FMT_JSON && !j) { /* null when not even UTF-8 */
			json_t *str = json_stringn(line, len);
			char *s = str ? json_dumps(str, JSON_ENCODE_ANY) : NULL;
			fputs(s ? s : "null", stdout);
			free(s);
			json_decref(str);
		} else {
			fwrite(line, 1, len, stdout);
		}
		json_decref(j);
		if (format == FMT_NDJSON)
			putchar('\n');
		return;
	}
	/* a string may hold "\u0000": read it, and show what follows it too */
	if (!(j = json_loads(line, JSON_ALLOW_NUL, NULL)) || !json_is_object(j)) {
		/* a line that is not JSON (torn by a crash), shown, not obeyed */
		cli_write_safe(stdout, line, strlen(line));
		json_decref(j);
		return;
	}
	{
		/* every part shown, none obeyed: the time and the name too */
		const char *t = json_string_value(json_object_get(j, "time"));
		const char *ev = json_string_value(json_object_get(j, "event"));
		bool more = json_object_size(j) > 2;
		put_safe(t ? t : "?");
		putchar(' ');
		put_safe(ev ? ev : "?");
		for (size_t n = strlen(ev ? ev : "?"); more && n < 11; n++)
			putchar(' ');
	}
	json_object_foreach(j, key, v)
	{
		if (strcmp(key, "time") == 0 || strcmp(key, "event") == 0)
			continue;
		putchar(' ');
		put_safe(key);
		putchar('=');
		if (json_is_string(v)) {
			const char *s = json_string_value(v);
			size_t n = json_string_length(v);
			bool quote = !n || strpbrk(s, " \"=") || memchr(s, '\0', n);
			if (quote)
				putchar('"');
			cli_write_safe(stdout, s, n); /* a NUL as \0 */
			if (quote)
				putchar('"');
		} else {
			char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY |
			                                JSON_REAL_PRECISION(6));
			put_safe(s ? s : "?");
			free(s);
		}
	}
	putchar('\n');
	json_decref(j);
}

/* Has the reader of our standard output gone (a pipe whose other end is
 * closed, as when `kbox logs -f | head` has had its lines)?  Waiting for
 * events writes nothing, so no EPIPE would ever say so. */
/* Whether the session directory DIR, AT_START when kbox logs began, has
 * gone (removed, or another made under its name): said, as NAME's. */
static bool session_gone(const char *dir, const struct stat *at_start, const char *name)
{
	struct stat now;
	if (stat(dir, &now) == 0 && now.st_dev == at_start->st_dev &&
	    now.st_ino == at_start->st_ino)
		return false;
	cli_error("logs", "session %s was removed: no more events come", name);
	return true;
}

static bool reader_gone(void)
{
	struct pollfd p = {STDOUT_FILENO, 0, 0};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

/* Are A and B the same file? */
static bool same_file(FILE *a, FILE *b)
{
	struct stat sa, sb;
	return fstat(fileno(a), &sa) == 0 && fstat(fileno(b), &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Has the log F was opened as been rotated: does NAME in the session's
 * directory DFD now name another file?  (The supervisor makes the new
 * one right after the rename.) */
static bool rotated(FILE *f, int dfd, const char *name)
{
	struct stat sf, sp;
	return fstat(fileno(f), &sf) == 0 && fstatat(dfd, name, &sp, 0) == 0 &&
	       (sp.st_dev != sf.st_dev || sp.st_ino != sf.st_ino);
}

/* The longest line kbox logs reads whole: longer than any event the
 * supervisor writes (its whole log is rotated at KR_EVENTS_LOG_MAX), so
 * a longer one is not kbox's (code that reached the state directory wrote
 * it) and is left out, read past without being kept. */
#define LINE_MAX_BYTES ((size_t)KR_EVENTS_LOG_MAX)

/* Read one line of F into *LINE (of *CAP bytes, grown as needed up to
 * LINE_MAX_BYTES + 1), NUL-terminated; *NL says it ended with a newline
 * (kept), *LONG that it was longer than LINE_MAX_BYTES (then only its
 * start is kept).  The bytes read, kept or not; -1 at the end of F or when
 * out of memory. */
static ssize_t read_line(FILE *f, char **line, size_t *cap, bool *nl, bool *lng)
{
	size_t len = 0, total = 0;
	int c;
	*nl = *lng = false;
	if (!*line && !(*line = malloc(*cap = 4096)))
		return -1;
	while ((c = getc_unlocked(f)) != EOF) {
		total++;
		if (len + 1 >= *cap && !*lng) {
			size_t ncap = *cap * 2 > LINE_MAX_BYTES + 1 ? LINE_MAX_BYTES + 1 : *cap * 2;
			char *n = ncap > *cap ? realloc(*line, ncap) : NULL;
			if (n)
				*line = n, *cap = ncap;
			else if (ncap > *cap)
				return -1;
			else
				*lng = true;
		}
		if (!*lng)
			(*line)[len++] = (char)c;
		if (c == '\n') {
			*nl = true;
			break;
		}
	}
	(*line)[len] = '\0';
	return total ? (ssize_t)total : -1;
}

/* NAME in the directory DFD, open for reading, or NULL with errno. */
static FILE *open_in(int dfd, const char *name)
{
	int fd = dfd < 0 ? -1 : kx_open_file(dfd, name, O_RDONLY, 0);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
	if (fd >= 0 && !f)
		close(fd);
	if (dfd < 0)
		errno = ENOENT;
	return f;
}

int cmd_logs(int argc, char **argv)
{
	const char *name = NULL;
	bool follow = false;
	format_t format = FMT_TEXT;
	cli_option_t opts[] = {
	        CLI_OPT_SESSION(&name),
	        CLI_OPT_FLAG('f', "follow", &follow,
	                     "after the last event, wait for more (default: stop there)"),
	        CLI_OPT_FORMAT(&format, "text: readable lines (the default); json: one JSON array "
	                                "of the events; ndjson: each event as logged, one a line"),
	        CLI_OPT_JSON('j', &format), CLI_OPT_END};
	int status, nargs = cli_parse_options("logs", opts, argc, argv, &status);
	char *dir, path[4200], sdir[4200], *line = NULL;
	size_t cap = 0, events = 0, long_lines = 0;
	bool nl, lng;
	struct stat at_start;
	FILE *f, *g;
	int dfd;

	if (nargs < 0)
		return status;
	if ((status = cli_no_operands("logs", nargs, argv)) != EXIT_OK)
		return status;
	if (follow && format == FMT_JSON) {
		cli_error("logs",
		          "-f cannot be used with --format json (an array that never ends); "
		          "use --format ndjson");
		return EXIT_USAGE;
	}
	name = cli_session_name(name);
	if ((status = cli_check_session("logs", name)) != EXIT_OK)
		return status;
	if (!(dir = cli_session_dir("logs", name, false, &status)))
		return status;
	snprintf(path, sizeof path, "%s/events.ndjson", dir);
	/* followed: the session's directory, by what it is (one removed, and
	 * one of the same name made, is another session): its logs are read
	 * through a descriptor of it, never by a path another could take */
	dfd = kx_open_path(AT_FDCWD, dir, O_PATH | O_DIRECTORY, 0);
	if (dfd < 0 || fstat(dfd, &at_start) < 0)
		memset(&at_start, 0, sizeof at_start);
	snprintf(sdir, sizeof sdir, "%s", dir);
	free(dir);
	f = open_in(dfd, "events.ndjson");
	if (!f && !(errno == ENOENT && follow)) {
		if (errno == ENOENT) { /* no events yet */
			if (format == FMT_JSON)
				puts("[]");
			return EXIT_OK;
		}
		cli_error("logs", "cannot read %s: %s", path, strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	/* the events before the log was last rotated, unless that is the
	 * file just opened (it was rotated in between: read on from it) */
	if ((g = open_in(dfd, "events.ndjson.1")) && !(f && same_file(g, f))) {
		while (read_line(g, &line, &cap, &nl, &lng) > 0 && nl) {
			if (lng)
				long_lines++;
			else
				print_event(line, format, events++);
		}
	}
	if (g)
		fclose(g);
	for (;;) {
		ssize_t n;
		if (!f &&
		    !(f = open_in(dfd,
		                  "events.ndjson"))) { /* no log yet: wait for it, or the reader */
			if (reader_gone() || session_gone(sdir, &at_start, name))
				break;
			usleep(200000);
			continue;
		}
		n = read_line(f, &line, &cap, &nl, &lng);
		if (n > 0 && nl) {
			if (lng)
				long_lines++;
			else
				print_event(line, format, events++);
			continue;
		}
		if (n > 0) { /* a line still being written: read it again whole */
			fseek(f, -n, SEEK_CUR);
		} else if (rotated(f, dfd, "events.ndjson")) {
			/* read to its end: the events after it are in the new log */
			fclose(f);
			f = NULL;
			continue;
		}
		if (!follow)
			break;
		cli_flush_stdout();
		if (ferror(stdout) || reader_gone() || session_gone(sdir, &at_start, name))
			break;
		clearerr(f);
		usleep(200000);
	}
	if (format == FMT_JSON)
		puts(events ? "\n]" : "[]");
	if (long_lines)
		cli_error("logs",
		          "warning: %zu line%s longer than %zu bytes left out: kbox writes none "
		          "(something else wrote %s)",
		          long_lines, long_lines == 1 ? "" : "s", LINE_MAX_BYTES,
		          long_lines == 1 ? "it" : "them");
	free(line);
	if (f)
		fclose(f);
	if (dfd >= 0)
		close(dfd);
	return EXIT_OK;
}
