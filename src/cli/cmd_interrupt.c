/* src/cli/cmd_interrupt.c — kbox interrupt: interrupt what the kernel runs. */
#include "config.h"
#include "cli.h"

/* "session NAME: kernel interrupted", and whether it was running code. */
static void say_interrupted(const char *name, const json_t *reply)
{
	printf("session %s: kernel interrupted%s\n", name,
	       json_is_false(json_object_get(reply, "running")) ? " (it was running no code)" : "");
}

int cmd_interrupt(int argc, char **argv)
{
	return cli_control("interrupt", argc, argv, KR_CTL_OP_INTERRUPT, 10000, say_interrupted);
}
