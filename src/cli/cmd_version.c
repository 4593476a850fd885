/* src/cli/cmd_version.c — kbox version: print the version. */
#include "config.h"
#include "cli.h"

int cmd_version(int argc, char **argv)
{
	cli_option_t opts[] = {CLI_OPT_END};
	int status, n = cli_parse_options("version", opts, argc, argv, &status);

	if (n < 0)
		return status;
	if ((status = cli_no_operands("version", n, argv)) != EXIT_OK)
		return status;
	printf("kbox %s\n", PACKAGE_VERSION);
	return EXIT_OK;
}
