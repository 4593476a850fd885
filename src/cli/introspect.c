/* src/cli/introspect.c — kbox complete and kbox inspect: ask a running
 * session's kernel about code at a cursor; print the reply as plain text
 * within a budget, or as JSON. */
#include "config.h"
#include "cli.h"

#include <kbox/capture.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX_OUTPUT 16384
/* How long kbox complete and inspect wait for the reply: the kernel's own
 * 30 s (KR_CTL_KERNEL_REPLY_MS), and as long again for a turn. */
#define INTROSPECT_WAIT_MS (2 * KR_CTL_KERNEL_REPLY_MS)

/* Write TEXT (LEN bytes) on standard output, ending with a newline, within
 * MAX bytes: a longer text is cut at the last line that fits (or at a
 * character), and a line says what was left out.  Control characters are
 * shown as ^X on a terminal, as kbox exec shows them. */
static void print_budgeted(const char *text, size_t len, long long max)
{
	size_t keep = len;
	bool tty = isatty(STDOUT_FILENO);

	if ((long long)len > max) {
		const char *nl;
		keep = (size_t)max;
		while (keep > 0 && ((unsigned char)text[keep] & 0xC0) == 0x80)
			keep--; /* not in the middle of a character */
		for (nl = text + keep; nl > text && nl[-1] != '\n'; nl--)
			;
		if (nl > text)
			keep = (size_t)(nl - text);
	}
	if (tty)
		cli_write_safe(stdout, text, keep);
	else
		fwrite(text, 1, keep, stdout);
	if (keep > 0 && text[keep - 1] != '\n')
		putchar('\n');
	if (keep < len) {
		size_t lines = 0;
		for (size_t i = keep; i < len; i++)
			lines += text[i] == '\n';
		lines += text[len - 1] != '\n';
		printf("[... %zu bytes in %zu line%s left out (--max-output %lld); a larger "
		       "--max-output, or --format json, shows all ...]\n",
		       len - keep, lines, lines == 1 ? "" : "s", max);
	}
}

/* The reply CONTENT of CMD as text, within MAX bytes: inspect's text/plain
 * without escape sequences, complete's matches one a line; a line in
 * brackets when there is nothing, or the kernel failed. */
static void print_text(bool inspect, json_t *content, long long max)
{
	const char *st = json_string_value(json_object_get(content, "status"));
	char *text = NULL;
	size_t len = 0;

	if (!st || strcmp(st, "ok") != 0) {
		/* the kernel's words, escaped: on kbox's one line, never a line
		 * of their own (kx_name_escape: "\n", not a line break) */
		json_t *jen = json_object_get(content, "ename");
		json_t *jev = json_object_get(content, "evalue");
		size_t nen = json_is_string(jen) ? json_string_length(jen) : 0;
		size_t nev = json_is_string(jev) ? json_string_length(jev) : 0;
		char *en = malloc(KX_NAME_ESCAPED_MAX(nen)), *ev = malloc(KX_NAME_ESCAPED_MAX(nev));
		if (en && ev) {
			kx_name_escape(nen ? json_string_value(jen) : "", nen, en,
			               KX_NAME_ESCAPED_MAX(nen));
			kx_name_escape(nev ? json_string_value(jev) : "", nev, ev,
			               KX_NAME_ESCAPED_MAX(nev));
			printf("[error: the kernel could not answer%s%s%s%s]\n", *en ? ": " : "",
			       en, *ev ? ": " : "", ev);
		}
		free(en);
		free(ev);
		return;
	}
	if (inspect) {
		json_t *plain = json_object_get(json_object_get(content, "data"), "text/plain");
		if (!json_is_true(json_object_get(content, "found"))) {
			puts("[not found: the kernel knows nothing about the name at the cursor]");
			return;
		}
		if (!json_is_string(plain)) {
			puts("[no text: what the kernel knows has no text/plain (see --format json)]");
			return;
		}
		if (!(text = kbox_strip_ansi(json_string_value(plain), json_string_length(plain),
		                             &len)))
			return;
	} else {
		json_t *m;
		size_t i, cap = 1;
		json_array_foreach(json_object_get(content, "matches"), i, m)
		        cap += json_string_length(m) + 1;
		if (!(text = malloc(cap)))
			return;
		json_array_foreach(json_object_get(content, "matches"), i, m)
		{
			if (!json_is_string(m))
				continue;
			memcpy(text + len, json_string_value(m), json_string_length(m));
			len += json_string_length(m);
			text[len++] = '\n';
		}
		text[len] = '\0';
	}
	if (len) {
		/* the kernel's text: a line of it that reads as one of kbox's
		 * own gets one more backslash (kx_buf_kernel), as in kbox exec */
		kx_buf_t b = KX_BUF_INIT;
		char *quoted;
		size_t qlen = 0;
		kx_buf_kernel(&b, text, len);
		if ((quoted = kx_buf_take(&b, &qlen)))
			print_budgeted(quoted, qlen, max);
		free(quoted);
	} else if (!inspect)
		puts("[no completions: the kernel knows nothing that completes the code at the cursor]");
	free(text);
}

/* --cursor N: a character offset, into the long at VALUE. */
static int cursor_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	char *end;
	long v;
	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 0 || v > 1 << 26) {
		cli_error(cmd, "invalid --cursor \"%s\": expected a character offset from 0", arg);
		return EXIT_USAGE;
	}
	*(long *)opt->value = v;
	return EXIT_OK;
}

/* --detail 0|1, into the long at VALUE. */
static int detail_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	if (strcmp(arg, "0") != 0 && strcmp(arg, "1") != 0) {
		cli_error(cmd, "invalid --detail \"%s\": expected 0 or 1", arg);
		return EXIT_USAGE;
	}
	*(long *)opt->value = arg[0] - '0';
	return EXIT_OK;
}

int cli_introspect(const char *cmd, int argc, char **argv)
{
	const char *name = NULL, *code;
	long cursor = -1, detail = 0;
	long long max_output = DEFAULT_MAX_OUTPUT;
	format_t format = FMT_TEXT;
	bool inspect = strcmp(cmd, "inspect") == 0;
	cli_option_t opts[] = {
	        CLI_OPT_SESSION(&name),
	        CLI_OPT_CALLBACK('c', "cursor", "N", cursor_cb, &cursor,
	                         "the cursor is after the first N characters (default: the end)"),
	        CLI_OPT_FORMAT(&format,
	                       inspect ? "text: what the kernel knows, as plain text (the "
	                                 "default); json and ndjson: its reply on one line"
	                               : "text: the matches, one a line (the default); json "
	                                 "and ndjson: the kernel's reply on one line"),
	        CLI_OPT_JSON('j', &format),
	        CLI_OPT_CALLBACK(
	                0, "max-output", "BYTES", cli_opt_max_output, &max_output,
	                "print at most BYTES of text, and say what was left out (default: 16K)"),
	        CLI_OPT_CALLBACK(0, "detail", "0|1", detail_cb, &detail,
	                         "1 asks for more, such as the source code (default: 0)"),
	        CLI_OPT_END};
	int status, n;
	char *dir = NULL, *stdin_code = NULL;
	json_t *reply = NULL;
	kr_ctl_introspect_t q = {.exec = KR_CTL_EXEC_INIT};
	kbox_error_t err = {0};

	if (!inspect) /* --detail is inspect's */
		opts[5] = (cli_option_t)CLI_OPT_END;
	if ((n = cli_parse_options(cmd, opts, argc, argv, &status)) < 0)
		return status;
	if (n > 1) { /* (the cursor is an option, -c N, not an operand) */
		cli_error(cmd,
		          "one operand, the CODE: \"%s\" is one too many (the cursor's offset "
		          "goes in -c N; see kbox %s --help)",
		          argv[1], cmd);
		return EXIT_USAGE;
	}
	if (n != 1) {
		cli_error(cmd, "expected the CODE (or - for standard input; see kbox %s --help)",
		          cmd);
		return EXIT_USAGE;
	}
	code = argv[0];
	/* kbox inspect sales, with a session "sales" and no -s: the session */
	if (!name && !getenv("KBOX_SESSION") && cli_operand_is_session(code))
		return cli_session_operand_hint(cmd, code, "CODE");
	if (strcmp(code, "-") == 0) {
		size_t len;
		if (!(stdin_code = cli_slurp(stdin))) {
			cli_error(cmd, "cannot read standard input: %s", cli_slurp_strerror(errno));
			return EXIT_USAGE;
		}
		/* echo's newline is not code: the cursor goes before it */
		if ((len = strlen(stdin_code)) && stdin_code[len - 1] == '\n')
			stdin_code[--len] = '\0';
		code = stdin_code;
	}
	if (!kx_utf8_valid_str(code)) {
		cli_error(cmd, "the code is not valid UTF-8");
		status = EXIT_USAGE;
		goto out;
	}
	{ /* the cursor counts code points */
		long chars = 0;
		for (const unsigned char *p = (const unsigned char *)code; *p; p++)
			chars += (*p & 0xC0) != 0x80;
		if (cursor > chars) {
			cli_error(cmd,
			          "--cursor %ld is beyond the end of the code (%ld characters)",
			          cursor, chars);
			status = EXIT_USAGE;
			goto out;
		}
	}
	name = cli_session_name(name);
	if (!(dir = cli_running_session(cmd, name, &status)))
		goto out;
	/* the supervisor asks its kernel (kbox-protocol(7)) */
	q.op = inspect ? KR_CTL_OP_INSPECT : KR_CTL_OP_COMPLETE;
	q.exec.code = code;
	q.cursor_pos = cursor;
	q.detail_level = (int)detail;
	reply = kr_ctl_call(dir, q.op, kr_ctl_introspect_to_json(&q), INTROSPECT_WAIT_MS, &err);
	if (!reply && err.code == KBOX_E_TIMEOUT) {
		/* the supervisor answers (kr_ctl_call asks it): the session is
		 * busy with other code, or its kernel slow to start */
		cli_error(cmd,
		          "session %s: no reply within %d s: the session was busy (other code "
		          "ran, or its kernel started) all that time",
		          name, INTROSPECT_WAIT_MS / 1000);
		status = EXIT_TIMEOUT;
		goto out;
	} else if (!reply) {
		cli_error(cmd, "session %s: %s", name, err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	{
		json_t *content = json_object_get(reply, "reply");
		if (format == FMT_TEXT) {
			print_text(inspect, content, max_output);
		} else {
			char *s = json_dumps(content, JSON_COMPACT | JSON_SORT_KEYS |
			                                      JSON_REAL_PRECISION(9));
			if (s)
				puts(s);
			cli_json_printed();
			free(s);
		}
		if (!json_is_string(json_object_get(content, "status")) ||
		    strcmp(json_string_value(json_object_get(content, "status")), "ok") != 0)
			status = EXIT_CODE_ERROR;
	}
out:
	json_decref(reply);
	free(dir);
	free(stdin_code);
	return status;
}
