/* src/cli/cmd_inspect.c — kbox inspect: what the kernel knows of the name at a
 * cursor (docstring, signature), as JSON. */
#include "config.h"
#include "cli.h"

int cmd_inspect(int argc, char **argv)
{
	return cli_introspect("inspect", argc, argv);
}
