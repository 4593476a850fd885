/* src/cli/cmd_help.c — kbox help [COMMAND]: show a manual page. */
#include "config.h"
#include "cli.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int cmd_help(int argc, char **argv)
{
	const cli_cmd_t *cmd = NULL;
	char page[64];
	pid_t pid;
	int st;

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		cli_usage(cli_find("help"), stdout);
		return EXIT_OK;
	}
	if (argc > 2) {
		cli_error("help", "too many arguments");
		return EXIT_USAGE;
	}
	if (argc == 2) {
		cmd = cli_find(argv[1]);
		if (!cmd) {
			cli_error("help", "no command \"%s\" (see kbox --help)", argv[1]);
			return EXIT_USAGE;
		}
		snprintf(page, sizeof page, "kbox-%s", cmd->name);
	} else {
		snprintf(page, sizeof page, "kbox");
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execlp("man", "man", page, (char *)NULL);
		_exit(127);
	}
	if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return EXIT_OK;
	/* no man(1) or no installed page: the usage is the next best thing */
	if (cmd)
		cli_usage(cmd, stdout);
	else
		execl("/proc/self/exe", "kbox", "--help", (char *)NULL);
	return EXIT_OK;
}
