/* src/cli/cmd_restart.c — kbox restart: replace the session's kernel. */
#include "config.h"
#include "cli.h"

/* "session NAME: kernel restarted", with the new kernel's generation. */
static void say_restarted(const char *name, const json_t *reply)
{
	printf("session %s: kernel restarted (kernel %lld); earlier state is lost\n", name,
	       (long long)json_integer_value(json_object_get(reply, "generation")));
}

int cmd_restart(int argc, char **argv)
{
	return cli_control("restart", argc, argv, KR_CTL_OP_RESTART, 120000, say_restarted);
}
