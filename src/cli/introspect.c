/* src/cli/introspect.c — kbox complete and kbox inspect: ask a running
 * session's kernel about code at a cursor; print the reply as JSON. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

int cli_introspect(const char *cmd, int argc, char **argv)
{
	static const struct option opts[] = {{"session", required_argument, NULL, 's'},
	                                     {"cursor", required_argument, NULL, 'c'},
	                                     {"detail", required_argument, NULL, 'd'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	const char *name = NULL, *code;
	long cursor = -1, detail = 0;
	int c, status = EXIT_OK;
	bool inspect = strcmp(cmd, "inspect") == 0;
	char *dir = NULL, *stdin_code = NULL;
	json_t *reply = NULL, *args = NULL;
	kbox_error_t err = {0};

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:c:h", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 's': name = optarg; break;
		case 'c':
			errno = 0;
			cursor = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || cursor < 0 || cursor > 1 << 26) {
				cli_error(cmd, "invalid --cursor \"%s\": expected a character offset from 0",
				          optarg);
				return EXIT_USAGE;
			}
			break;
		case 'd':
			if (!inspect || (strcmp(optarg, "0") != 0 && strcmp(optarg, "1") != 0)) {
				cli_error(cmd, inspect ? "invalid --detail \"%s\": expected 0 or 1"
				                       : "unknown option --detail (see kbox complete --help)",
				          optarg);
				return EXIT_USAGE;
			}
			detail = optarg[0] - '0';
			break;
		case 'h': cli_usage(cli_find(cmd), stdout); return EXIT_OK;
		default: cli_bad_option(cmd, c, argv); return EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		cli_error(cmd, "expected the CODE (or - for standard input; see kbox %s --help)", cmd);
		return EXIT_USAGE;
	}
	code = argv[optind];
	if (strcmp(code, "-") == 0) {
		if (!(stdin_code = cli_slurp(stdin))) {
			cli_error(cmd, "cannot read standard input: %s", strerror(errno));
			return EXIT_USAGE;
		}
		code = stdin_code;
	}
	{ /* the cursor counts code points */
		long n = 0;
		for (const unsigned char *p = (const unsigned char *)code; *p; p++)
			n += (*p & 0xC0) != 0x80;
		if (cursor > n) {
			cli_error(cmd, "--cursor %ld is beyond the end of the code (%ld characters)",
			          cursor, n);
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
		char *s = json_dumps(content, JSON_COMPACT | JSON_SORT_KEYS);
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
