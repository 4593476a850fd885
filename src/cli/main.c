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
     "kbox run [-k NAME] [-C DIR] [-t SECONDS] [-o DIR] [-i LINE]... [--format FMT] "
     "[--max-output BYTES] [--max-lines N] [-c CODE]... [FILE | -]...",
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

long long cli_parse_size(const char *s)
{
	unsigned long long v = 0;
	const char *p = s;
	int shift = 0;

	if (!s || !*s)
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > (1ULL << 40))
			return -1;
	}
	if (p == s)
		return -1;
	switch (*p) {
	case '\0': break;
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	default: return -1;
	}
	if (*p == 'i' && shift) /* KiB, MiB */
		p++;
	if ((*p == 'b' || *p == 'B') && shift)
		p++;
	if (*p)
		return -1;
	return (long long)(v << shift);
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
