/* src/cli/cli.h — kbox(1): the command table and what commands share. */
#ifndef KBOX_CLI_H
#define KBOX_CLI_H

#include <stdio.h>
#include <kbox.h>

/* Exit statuses, documented in kbox(1). */
enum {
	EXIT_OK = 0,
	EXIT_CODE_ERROR = 1,  /* the code raised an error */
	EXIT_USAGE = 2,       /* bad command line or input file */
	EXIT_TIMEOUT = 3,     /* timed out; the kernel was interrupted, state kept */
	EXIT_DIED = 4,        /* the kernel died; state lost */
	EXIT_UNAVAILABLE = 5, /* no kernel: it could not be found or started */
};

typedef struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage; /* matches the man page SYNOPSIS */
	const char *summary;
} cli_cmd_t;

const cli_cmd_t *cli_find(const char *name);
const cli_cmd_t *cli_commands(size_t *n);

/* "kbox CMD: MESSAGE" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* After getopt_long returned C ('?' or ':', with opterr = 0 and ":" leading
 * the optstring): one line saying which option was wrong and how. */
void cli_bad_option(const char *cmd, int c, char **argv);

/* Parse a size: digits with an optional K, M or G suffix (powers of 1024).
 * -1 when S is not one. */
long long cli_parse_size(const char *s);

/* Print CMD's usage to F. */
void cli_usage(const cli_cmd_t *cmd, FILE *f);

int cmd_help(int argc, char **argv);
int cmd_kernelspecs(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_version(int argc, char **argv);

#endif
