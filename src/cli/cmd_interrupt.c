/* src/cli/cmd_interrupt.c — kbox interrupt: interrupt what the kernel runs. */
#include "config.h"
#include "cli.h"

#include <stdlib.h>

int cmd_interrupt(int argc, char **argv)
{
	json_t *r = NULL;
	char *name = NULL;
	int status = cli_control("interrupt", argc, argv, KR_CTL_OP_INTERRUPT, 10000, &r, &name);
	if (status < 0)
		return EXIT_OK;
	if (status == EXIT_OK)
		printf("session %s: kernel interrupted%s\n", name,
		       json_is_false(json_object_get(r, "running")) ? " (it was running no code)"
		                                                    : "");
	json_decref(r);
	free(name);
	return status;
}
