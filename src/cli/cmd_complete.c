/* src/cli/cmd_complete.c — kbox complete: completions at a cursor, as JSON. */
#include "config.h"
#include "cli.h"

int cmd_complete(int argc, char **argv)
{
	return cli_introspect("complete", argc, argv);
}
