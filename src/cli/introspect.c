/* src/cli/introspect.c — kbox complete and kbox inspect: ask a running
 * session's kernel about code at a cursor; print the reply as JSON. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	bool inspect = strcmp(cmd, "inspect") == 0;
	cli_option_t opts[] = {
	    CLI_OPT_SESSION(&name),
	    CLI_OPT_CALLBACK('c', "cursor", "N", cursor_cb, &cursor,
	                     "the cursor is after the first N characters (default: the end)"),
	    CLI_OPT_CALLBACK(0, "detail", "0|1", detail_cb, &detail,
	                     "1 asks for more, such as the source code (default: 0)"),
	    CLI_OPT_END};
	int status, n;
	char *dir = NULL, *stdin_code = NULL;
	json_t *reply = NULL, *args = NULL;
	kbox_error_t err = {0};

	if (!inspect) /* --detail is inspect's */
		opts[2] = (cli_option_t)CLI_OPT_END;
	if ((n = cli_parse_options(cmd, opts, argc, argv, &status)) < 0)
		return status;
	if (n != 1) {
		cli_error(cmd, "expected the CODE (or - for standard input; see kbox %s --help)", cmd);
		return EXIT_USAGE;
	}
	code = argv[0];
	if (strcmp(code, "-") == 0) {
		if (!(stdin_code = cli_slurp(stdin))) {
			cli_error(cmd, "cannot read standard input: %s", cli_slurp_strerror(errno));
			return EXIT_USAGE;
		}
		code = stdin_code;
	}
	if (!cli_utf8(code)) {
		cli_error(cmd, "the code is not valid UTF-8");
		status = EXIT_USAGE;
		goto out;
	}
	{ /* the cursor counts code points */
		long chars = 0;
		for (const unsigned char *p = (const unsigned char *)code; *p; p++)
			chars += (*p & 0xC0) != 0x80;
		if (cursor > chars) {
			cli_error(cmd, "--cursor %ld is beyond the end of the code (%ld characters)",
			          cursor, chars);
			status = EXIT_USAGE;
			goto out;
		}
	}
	name = cli_session_name(name);
	if (!(dir = cli_running_session(cmd, name, &status)))
		goto out;
	/* the supervisor asks its kernel (kbox-protocol(7)) */
	args = inspect ? json_pack("{s:s, s:I, s:I}", "code", code, "cursor_pos", (json_int_t)cursor,
	                           "detail_level", (json_int_t)detail)
	               : json_pack("{s:s, s:I}", "code", code, "cursor_pos", (json_int_t)cursor);
	reply = kbox_ctl_call(dir, cmd, args, 60000, &err);
	args = NULL; /* taken */
	if (!reply) {
		cli_error(cmd, "session %s: %s", name, err.msg);
		status = err.code == KBOX_E_TIMEOUT ? EXIT_TIMEOUT : EXIT_UNAVAILABLE;
		goto out;
	}
	{
		json_t *content = json_object_get(reply, "reply");
		char *s = json_dumps(content, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
		if (s)
			puts(s);
		free(s);
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
