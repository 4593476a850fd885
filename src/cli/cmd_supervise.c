/* src/cli/cmd_supervise.c — kbox _supervise DIR FD: the supervisor, as
 * kbox start re-executes it (not for people: no man page). */
#include "config.h"
#include "cli.h"

#include <stdlib.h>

int cmd_supervise(int argc, char **argv)
{
	if (argc != 3) {
		cli_error("_supervise", "usage: kbox _supervise SESSION_DIR READY_FD (internal)");
		return EXIT_USAGE;
	}
	return kbox_supervisor_run(argv[1], atoi(argv[2])) == 0 ? EXIT_OK : EXIT_UNAVAILABLE;
}
