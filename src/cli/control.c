/* src/cli/control.c — what kbox stop, restart and interrupt share: parse
 * -s NAME and ask the session's supervisor. */
#include "config.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cli_control(const char *cmd, int argc, char **argv, kr_ctl_op_t op, int timeout_ms,
                cli_control_say_t *say)
{
	const char *name = NULL;
	cli_option_t opts[] = {CLI_OPT_SESSION(&name), CLI_OPT_END};
	int status;
	char *dir;
	json_t *reply;
	kbox_error_t err = {0};

	if (cli_parse_no_operands(cmd, opts, argc, argv, &status) < 0)
		return status;
	name = cli_session_name(name);
	if (!(dir = cli_running_session(cmd, name, &status)))
		return status;
	/* (a restart waits for the new kernel: a remote one, its launch) */
	if (op == KR_CTL_OP_RESTART)
		timeout_ms = cli_kernel_wait_ms(dir, timeout_ms);
	if ((reply = kr_ctl_call(dir, op, NULL, timeout_ms, &err))) {
		say(name, reply);
		json_decref(reply);
	} else {
		cli_error(cmd, "session %s: %s", name, err.msg);
		status = EXIT_UNAVAILABLE;
	}
	free(dir);
	return status;
}
