/* src/cli/cmd_put.c — kbox put: copy a host file into the workspace. */
#include "config.h"
#include "cli.h"
#include "common/kx.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


int cli_copy_fd(int in, int out)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof buf), off = 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return (int)n;
		while (off < n) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -1;
			off += w;
		}
	}
}

/* Why the directory DIR of the workspace, where the file was to go, could
 * not be opened (errno E): one line. */
static void dir_error(const char *cmd, const char *dir, int e)
{
	if (e == ENOENT)
		cli_error(cmd, "directory %s does not exist in the workspace", dir);
	else if (e == ENOTDIR)
		cli_error(cmd, "%s is not a directory in the workspace", dir);
	else
		cli_error(cmd, "%s: %s", dir, cli_ws_strerror(e));
}

int cmd_put(int argc, char **argv)
{
	const char *name = NULL, *host, *dest;
	int status, n, in = -1;
	char *dir = NULL, *hostcopy = NULL;
	cli_option_t opts[] = {CLI_OPT_SESSION(&name), CLI_OPT_END};

	if ((n = cli_parse_options("put", opts, argc, argv, &status)) < 0)
		return status;
	if (n < 1 || n > 2) {
		cli_error("put", "expected HOSTPATH [DEST] (see kbox put --help)");
		return EXIT_USAGE;
	}
	host = argv[0];
	name = cli_session_name(name);
	if ((status = cli_check_session("put", name)) != EXIT_OK)
		return status;
	if ((in = cli_ws_source("put", host)) < 0) {
		status = EXIT_USAGE;
		goto out;
	}
	hostcopy = strdup(host);
	dest = n == 2 ? argv[1] : basename(hostcopy);
	if (cli_ws_check("put", dest) < 0) {
		status = EXIT_USAGE;
		goto out;
	}
	if (!(dir = cli_session_dir("put", name, false, &status)))
		goto out;
	status = cli_put("put", dir, in, host, dest);
out:
	if (in >= 0)
		close(in);
	free(hostcopy);
	free(dir);
	return status;
}

int cli_put(const char *cmd, const char *dir, int in, const char *host, const char *dest)
{
	int status = EXIT_OK, ws = -1, parent = -1, out = -1;
	char *target = NULL, tmp[64] = "";

	{
		char wsp[4200];
		snprintf(wsp, sizeof wsp, "%s/workspace", dir);
		if ((ws = open(wsp, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
			cli_error(cmd, "cannot open %s: %s", wsp, strerror(errno));
			status = EXIT_UNAVAILABLE;
			goto out;
		}
	}
	/* DEST naming a directory (or ending in '/'): put the file in it */
	{
		int d = cli_ws_open(ws, dest, O_PATH | O_DIRECTORY, 0);
		size_t dl = strlen(dest);
		if (d >= 0 || dest[dl - 1] == '/') {
			char *hc2 = strdup(host);
			if (d < 0) {
				dir_error(cmd, dest, errno);
				free(hc2);
				status = EXIT_USAGE;
				goto out;
			}
			parent = d;
			target = strdup(basename(hc2));
			free(hc2);
		} else {
			char *slash = strrchr(dest, '/');
			if (slash) {
				char *pdir = strndup(dest, (size_t)(slash - dest));
				parent = cli_ws_open(ws, pdir, O_PATH | O_DIRECTORY, 0);
				if (parent < 0)
					dir_error(cmd, pdir, errno);
				free(pdir);
				if (parent < 0) {
					status = EXIT_USAGE;
					goto out;
				}
				target = strdup(slash + 1);
			} else {
				parent = dup(ws);
				target = strdup(dest);
			}
		}
	}
	/* write beside, then rename over: the final name is never followed */
	out = kx_temp_open(parent, ".kbox-put-", 0644, tmp, sizeof tmp);
	if (out < 0) {
		cli_error(cmd, "cannot create a file in the workspace: %s", strerror(errno));
		tmp[0] = '\0';
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	{
		/* under root the workspace is the sandbox user's: so is the file
		 * (its directory's owner) */
		struct stat ds;
		if (geteuid() == 0 && fstat(parent, &ds) == 0 && ds.st_uid != 0 &&
		    fchown(out, ds.st_uid, ds.st_gid) < 0) {
			cli_error(cmd, "cannot give the file to uid %u: %s", (unsigned)ds.st_uid,
			          strerror(errno));
			status = EXIT_UNAVAILABLE;
			goto out;
		}
	}
	if (cli_copy_fd(in, out) < 0 || fsync(out) < 0) {
		cli_error(cmd, "copying %s: %s", host, strerror(errno));
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	{
		struct stat ts;
		if (fstatat(parent, target, &ts, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(ts.st_mode)) {
			cli_error(cmd, "%s is a directory in the workspace", dest);
			status = EXIT_USAGE;
			goto out;
		}
	}
	if (renameat(parent, tmp, parent, target) < 0) {
		cli_error(cmd, "cannot write %s in the workspace: %s", dest, strerror(errno));
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	tmp[0] = '\0';
out:
	if (tmp[0] && parent >= 0)
		unlinkat(parent, tmp, 0);
	if (out >= 0)
		close(out);
	if (ws >= 0)
		close(ws);
	if (parent >= 0)
		close(parent);
	free(target);
	return status;
}
