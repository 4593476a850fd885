/* src/cli/cmd_version.c — kbox version: print the version. */
#include "config.h"
#include "cli.h"

#include <string.h>

int cmd_version(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		cli_usage(cli_find("version"), stdout);
		return EXIT_OK;
	}
	if (argc > 1) {
		cli_error("version", "unexpected argument \"%s\"", argv[1]);
		return EXIT_USAGE;
	}
	printf("kbox %s\n", PACKAGE_VERSION);
	return EXIT_OK;
}
