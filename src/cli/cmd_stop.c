/* src/cli/cmd_stop.c — kbox stop: stop a session (or all); its files stay. */
#include "config.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* Stop the session NAME of HOME.  One that is not running, or does not
 * exist, is stopped already: EXIT_OK, saying so on standard error unless
 * QUIET_IF_STOPPED (as `docker stop` and `systemctl stop` take it). */
static int stop_one(const char *home, const char *name, bool quiet_if_stopped)
{
	kbox_error_t err = {0};
	char *dir = kr_session_dir(home, name, false, &err);
	json_t *r;
	int status = EXIT_OK;
	if (!dir && err.code == KBOX_E_NOTFOUND) {
		if (!quiet_if_stopped)
			cli_error("stop", "%s: nothing to stop", err.msg);
		return EXIT_OK;
	}
	if (!dir) {
		cli_error("stop", "%s", err.msg);
		return EXIT_UNAVAILABLE;
	}
	if (kr_session_supervisor(dir, NULL) != KR_SUPERVISOR_RUNNING) {
		free(dir);
		if (!quiet_if_stopped)
			cli_error("stop", "session %s is not running", name);
		return EXIT_OK;
	}
	if (!(r = kr_ctl_stop(dir, NULL, 90000, &err))) {
		cli_error("stop", "session %s: %s", name, err.msg);
		status = EXIT_UNAVAILABLE;
	} else
		printf("session %s stopped\n", name);
	json_decref(r);
	free(dir);
	return status;
}

int cmd_stop(int argc, char **argv)
{
	const char *name = NULL;
	bool all = false;
	cli_option_t opts[] = {CLI_OPT_SESSION(&name),
	                       CLI_OPT_FLAG('a', "all", &all,
	                                    "stop every session that is running, instead of one"),
	                       CLI_OPT_END};
	int status, nargs = cli_parse_options("stop", opts, argc, argv, &status);
	char *home;
	kbox_error_t err = {0};

	if (nargs < 0)
		return status;
	if (all && nargs > 0) {
		cli_error("stop",
		          "unexpected argument \"%s\": --all stops every session, and takes "
		          "no name (see kbox stop --help)",
		          argv[0]);
		return EXIT_USAGE;
	}
	if ((status = cli_no_operands("stop", nargs, argv)) != EXIT_OK)
		return status;
	if (all && name) {
		cli_error("stop", "give either -s NAME or --all, not both");
		return EXIT_USAGE;
	}
	if (!all && (status = cli_check_session("stop", name = cli_session_name(name))) != EXIT_OK)
		return status;
	if (!(home = kr_state_home(&err))) {
		cli_error("stop", "%s", err.msg);
		return EXIT_UNAVAILABLE;
	}
	if (all) {
		size_t n = 0;
		char **names = kr_session_list(home, &n, &err);
		if (!names) {
			cli_error("stop", "%s", err.msg);
			status = EXIT_UNAVAILABLE;
		}
		for (size_t i = 0; i < n; i++) {
			int s;
			if (!kr_session_is_dir(home, names[i])) /* a stray file: no session */
				continue;
			s = stop_one(home, names[i], true);
			if (s != EXIT_OK)
				status = s;
		}
		kr_session_list_free(names, n);
	} else
		status = stop_one(home, name, false);
	free(home);
	return status;
}
