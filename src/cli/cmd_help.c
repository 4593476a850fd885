/* src/cli/cmd_help.c — kbox help [COMMAND]: the help of a command, and
 * where its manual page is. */
#include "config.h"
#include "cli.h"

int cmd_help(int argc, char **argv)
{
	cli_option_t opts[] = {CLI_OPT_END};
	const cli_cmd_t *cmd;
	int status, n = cli_parse_options("help", opts, argc, argv, &status);

	if (n < 0)
		return status;
	if (n > 1) {
		cli_error("help", "too many arguments");
		return EXIT_USAGE;
	}
	if (n == 0) {
		cli_usage(stdout); /* it names kbox(1) */
		return EXIT_OK;
	}
	if (!(cmd = cli_find(argv[0]))) {
		const char *near = cli_nearest_command(argv[0]);
		if (near)
			cli_error("help", "no command \"%s\": did you mean \"kbox help %s\"?",
			          argv[0], near);
		else
			cli_error("help", "no command \"%s\" (see kbox --help)", argv[0]);
		return EXIT_USAGE;
	}
	/* what kbox CMD --help prints: its usage, options, example and page,
	 * from its own table */
	{
		char *help_argv[] = {(char *)cmd->name, "--help", NULL};
		cmd->fn(2, help_argv);
	}
	return EXIT_OK;
}
