/* src/cli/main.c — kbox(1): dispatch to one command per file. */
#include "config.h"
#include "cli.h"

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>

/* Sorted by name. */
static const cli_cmd_t commands[] = {
    {"help", cmd_help, "kbox help [COMMAND]", "show the manual of a command"},
    {"kernelspecs", cmd_kernelspecs, "kbox kernelspecs [--json]",
     "list the kernelspecs found and where"},
    {"run", cmd_run,
     "kbox run [-k NAME] [-C DIR] [-t SECONDS] [-o DIR] [-i LINE]... [-c CODE]... [FILE | -]...",
     "run cells in one fresh local kernel"},
    {"version", cmd_version, "kbox version", "print the version"},
};

const cli_cmd_t *cli_commands(size_t *n)
{
	*n = sizeof commands / sizeof commands[0];
	return commands;
}

const cli_cmd_t *cli_find(const char *name)
{
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

void cli_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "kbox%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void cli_bad_option(const char *cmd, int c, char **argv)
{
	char shortopt[3] = {'-', (char)optopt, '\0'};
	const char *opt = optopt ? shortopt : argv[optind - 1];
	if (c == ':')
		cli_error(cmd, "option %s needs an argument (see kbox %s --help)", opt, cmd);
	else
		cli_error(cmd, "unknown option %s (see kbox %s --help)", opt, cmd);
}

void cli_usage(const cli_cmd_t *cmd, FILE *f)
{
	fprintf(f, "usage: %s\n", cmd->usage);
}

static void main_usage(FILE *f)
{
	size_t n;
	const cli_cmd_t *c = cli_commands(&n);
	fprintf(f, "usage: kbox [--help] [--version] COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-12s %s\n", c[i].name, c[i].summary);
	fprintf(f, "\nSee kbox(1), or kbox help COMMAND.\n");
}

int main(int argc, char **argv)
{
	const cli_cmd_t *cmd;

	signal(SIGPIPE, SIG_IGN);
	if (kbox_init() < 0) {
		cli_error(NULL, "cannot initialise libsodium");
		return EXIT_UNAVAILABLE;
	}
	if (argc < 2) {
		main_usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		main_usage(stdout);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(1, argv + 1);
	cmd = cli_find(argv[1]);
	if (!cmd) {
		cli_error(NULL, "unknown command \"%s\" (see kbox --help)", argv[1]);
		return EXIT_USAGE;
	}
	return cmd->fn(argc - 1, argv + 1);
}
