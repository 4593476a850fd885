/* src/cli/cmd_get.c — kbox get: copy a file out of the workspace. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


int cmd_get(int argc, char **argv)
{
	const char *name = NULL, *src, *host;
	int status, n, in = -1, ws = -1, out = -1;
	char *dir = NULL, *srccopy = NULL, *hostpath = NULL;
	struct stat st;
	cli_option_t opts[] = {CLI_OPT_SESSION(&name), CLI_OPT_END};

	if ((n = cli_parse_options("get", opts, argc, argv, &status)) < 0)
		return status;
	if (n < 1 || n > 2) {
		cli_error("get", "expected SRC [HOSTPATH] (see kbox get --help)");
		return EXIT_USAGE;
	}
	src = argv[0];
	name = cli_session_name(name);
	if ((status = cli_check_session("get", name)) != EXIT_OK)
		return status;
	if (cli_ws_check("get", src) < 0)
		return EXIT_USAGE;
	if (!(dir = cli_session_dir("get", name, false, &status)))
		return status;
	{
		char wsp[4200];
		snprintf(wsp, sizeof wsp, "%s/workspace", dir);
		if ((ws = open(wsp, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
			cli_error("get", "cannot open %s: %s", wsp, strerror(errno));
			status = EXIT_UNAVAILABLE;
			goto out;
		}
	}
	in = cli_ws_open(ws, src, O_RDONLY | O_NONBLOCK, 0);
	if (in < 0) {
		cli_error("get", "%s: %s", src, cli_ws_strerror(errno));
		status = errno == ENOENT ? EXIT_USAGE : EXIT_USAGE;
		goto out;
	}
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
		cli_error("get", "%s is not a regular file in the workspace", src);
		status = EXIT_USAGE;
		goto out;
	}
	fcntl(in, F_SETFL, 0);
	srccopy = strdup(src);
	host = n == 2 ? argv[1] : basename(srccopy);
	if (strcmp(host, "-") == 0)
		out = dup(STDOUT_FILENO);
	else {
		struct stat hs;
		if (stat(host, &hs) == 0 && S_ISDIR(hs.st_mode)) {
			char *sc = strdup(src);
			if (asprintf(&hostpath, "%s/%s", host, basename(sc)) < 0)
				hostpath = NULL;
			free(sc);
			host = hostpath;
		}
		out = host ? open(host, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
	}
	if (out < 0) {
		cli_error("get", "cannot write %s: %s", host ? host : "(null)", strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	if (cli_copy_fd(in, out) < 0) {
		cli_error("get", "copying %s: %s", src, strerror(errno));
		status = EXIT_UNAVAILABLE;
	}
out:
	if (out >= 0)
		close(out);
	if (in >= 0)
		close(in);
	if (ws >= 0)
		close(ws);
	free(hostpath);
	free(srccopy);
	free(dir);
	return status;
}
