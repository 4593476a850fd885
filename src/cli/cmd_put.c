/* src/cli/cmd_put.c — kbox put: copy a host file into the workspace
 * (the copy itself is the runtime's: src/runtime/workspace.c). */
#include "config.h"
#include "cli.h"
#include "runtime/backend.h"
#include "runtime/workspace.h"

#include <libgen.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_put(const char *cmd, const char *dir, int in, const char *host, const char *dest)
{
	kbox_error_t err = {0};
	cli_signal_guard_t guard;
	int rc;
	/* a signal that ends kbox mid-copy leaves no temporary file in the
	 * workspace, where the code would see it; DEST is as it was */
	cli_guard_signals(&guard, ws_file_abandon);
	rc = ws_put(dir, in, host, dest, &err);
	cli_unguard_signals(&guard);
	if (rc == 0)
		return EXIT_OK;
	cli_error(cmd, "%s", err.msg);
	return err.code == KBOX_E_INVALID || err.code == KBOX_E_NOTFOUND ? EXIT_USAGE
	                                                                 : EXIT_UNAVAILABLE;
}

int cmd_put(int argc, char **argv)
{
	const char *name = NULL, *host, *dest;
	int status, n, in = -1;
	bool in_is_stdin = false;
	char *dir = NULL, *hostcopy = NULL;
	kbox_error_t err = {0};
	cli_option_t opts[] = {CLI_OPT_SESSION(&name), CLI_OPT_END};

	if ((n = cli_parse_options("put", opts, argc, argv, &status)) < 0)
		return status;
	if (n < 1 || n > 2) {
		cli_error("put", "expected HOSTPATH|- [DEST] (see kbox put --help)");
		return EXIT_USAGE;
	}
	host = argv[0];
	/* docker cp's and jupyter's way, the session first: kbox put sales data.csv */
	if (!name && n == 2 && access(host, F_OK) < 0 && errno == ENOENT &&
	    cli_operand_is_session(host))
		return cli_session_operand_hint("put", host, argv[1]);
	name = cli_session_name(name);
	if ((status = cli_check_session("put", name)) != EXIT_OK)
		return status;
	status = EXIT_USAGE;
	if (strcmp(host, "-") == 0) {
		/* standard input, as docker cp takes it: DEST names it */
		if (n != 2) {
			cli_error("put",
			          "standard input (-) has no name: give DEST (kbox put - DEST)");
			goto out;
		}
		if (isatty(STDIN_FILENO)) {
			cli_error("put",
			          "standard input (-) is a terminal: pipe the file in, or give "
			          "its path");
			goto out;
		}
		host = "standard input";
		in_is_stdin = true;
		in = dup(STDIN_FILENO);
	} else if ((in = ws_source_open(host, &err)) < 0) {
		cli_error("put", "%s", err.msg);
		goto out;
	}
	hostcopy = strdup(host);
	dest = n == 2 ? argv[1] : basename(hostcopy);
	if (ws_check_path(dest, &err) < 0) {
		cli_error("put", "%s", err.msg);
		goto out;
	}
	if (!(dir = cli_session_dir("put", name, false, &status)) ||
	    (status = cli_not_front_end("put", dir, name)) != EXIT_OK)
		goto out;
	if (cli_session_remote(dir)) {
		/* the kernel's directory on its Jupyter server */
		if (kr_gateway_put(dir, in, dest, in_is_stdin ? NULL : basename(hostcopy), &err) ==
		    0)
			status = EXIT_OK;
		else {
			cli_error("put", "%s", err.msg);
			status = cli_remote_status(&err);
		}
		goto out;
	}
	status = cli_put("put", dir, in, in_is_stdin ? NULL : host, dest);
out:
	if (in >= 0)
		close(in);
	free(hostcopy);
	free(dir);
	return status;
}
