/* src/cli/cmd_restart.c — kbox restart: replace the session's kernel. */
#include "config.h"
#include "cli.h"

#include <stdlib.h>

int cmd_restart(int argc, char **argv)
{
	json_t *r = NULL;
	char *name = NULL;
	int status = cli_control("restart", argc, argv, KR_CTL_OP_RESTART, 120000, &r, &name);
	if (status < 0)
		return EXIT_OK;
	if (status == EXIT_OK)
		printf("session %s: kernel restarted (kernel %lld); earlier state is lost\n", name,
		       (long long)json_integer_value(json_object_get(r, "generation")));
	json_decref(r);
	free(name);
	return status;
}
