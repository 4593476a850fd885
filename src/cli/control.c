/* src/cli/control.c — what kbox stop, restart and interrupt share: parse
 * -s NAME and ask the session's supervisor. */
#include "config.h"
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

int cli_control(const char *cmd, int argc, char **argv, const char *op, int timeout_ms,
                json_t **reply_p, char **name_p)
{
	static const struct option opts[] = {{"session", required_argument, NULL, 's'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	const char *name = NULL;
	int c, status = EXIT_OK;
	char *dir;
	kbox_error_t err = {0};

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': name = optarg; break;
		case 'h': cli_usage(cli_find(cmd), stdout); return -1;
		default: cli_bad_option(cmd, c, argv); return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_error(cmd, "unexpected argument \"%s\" (see kbox %s --help)", argv[optind], cmd);
		return EXIT_USAGE;
	}
	name = cli_session_name(name);
	if (!(dir = cli_running_session(cmd, name, &status)))
		return status;
	*reply_p = kbox_ctl_call(dir, op, NULL, timeout_ms, &err);
	if (!*reply_p) {
		cli_error(cmd, "session %s: %s", name, err.msg);
		status = EXIT_UNAVAILABLE;
	}
	*name_p = strdup(name);
	free(dir);
	return status;
}
