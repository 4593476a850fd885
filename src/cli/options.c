/* src/cli/options.c — the options of every command, from its table: the
 * parser (what getopt_long did, with -h, --help and every complaint in one
 * place), the help generated from the same table, and the callbacks
 * commands share. */
#include "config.h"
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>


int cli_strlist_add(const char *cmd, cli_strlist_t *l, const char *arg)
{
	const char **v = realloc(l->v, (l->n + 2) * sizeof *v);
	if (!v) {
		cli_error(cmd, "out of memory");
		return EXIT_UNAVAILABLE;
	}
	v[l->n++] = arg;
	v[l->n] = NULL;
	l->v = v;
	return EXIT_OK;
}

/* --help and -h: in every table, without being in any. */
static const cli_option_t help_option = {.long_name = "help",
                                         .short_name = 'h',
                                         .arg = CLI_ARG_NONE,
                                         .help = "show this help and exit"};

static bool is_option(const cli_option_t *o)
{
	return o->type != CLI_OPT_OPERANDS;
}

/* The option --NAME (LEN bytes of it), or a prefix of only one; NULL when
 * there is none, or more than one. */
static const cli_option_t *find_long(const cli_option_t *opts, const char *name, size_t len)
{
	const cli_option_t *found = NULL;
	size_t n = 0;

	for (const cli_option_t *o = opts; o->long_name; o++) {
		if (!is_option(o) || strncmp(o->long_name, name, len) != 0)
			continue;
		if (o->long_name[len] == '\0')
			return o;
		found = o;
		n++;
	}
	if (strncmp(help_option.long_name, name, len) == 0) {
		if (help_option.long_name[len] == '\0')
			return &help_option;
		found = &help_option;
		n++;
	}
	return n == 1 ? found : NULL;
}

/* The option whose short name is C, or NULL. */
static const cli_option_t *find_short(const cli_option_t *opts, char c)
{
	if (c == help_option.short_name)
		return &help_option;
	for (const cli_option_t *o = opts; o->long_name; o++)
		if (is_option(o) && o->short_name == c)
			return o;
	return NULL;
}

/* The table's CLI_OPT_OPERANDS entry, or NULL. */
static const cli_option_t *find_operands(const cli_option_t *opts)
{
	for (const cli_option_t *o = opts; o->long_name; o++)
		if (o->type == CLI_OPT_OPERANDS)
			return o;
	return NULL;
}

typedef enum { UNKNOWN, NEEDS_ARGUMENT, TAKES_NO_ARGUMENT } bad_t;

/* Whether the option AS_GIVEN (LEN bytes: "--memory", "-k") is one of
 * kbox start's, a session's settings, which the commands that start a
 * session for their code (exec, mcp, agent) do not take. */
static bool is_start_option(const char *as_given, size_t len)
{
	static const char *const start_opts[] = {"--kernel",        "-k",
	                                         "--backend",       "-b",
	                                         "--ttl",           "--memory",
	                                         "--cpus",          "--pids",
	                                         "--tmp-size",      "--file-size",
	                                         "--rootfs",        "--image",
	                                         "--outputs-quota", "--output-rate",
	                                         "--home-config"};
	for (size_t i = 0; i < sizeof start_opts / sizeof *start_opts; i++)
		if (strlen(start_opts[i]) == len && strncmp(start_opts[i], as_given, len) == 0)
			return true;
	return false;
}

/* Options other tools (or other kbox commands) have, that a newcomer
 * gives a command without them: what to do instead. */
static const struct {
	const char *cmd, *opt, *hint;
} elsewhere[] = {
        {"run", "-s",
         "kbox run has no session: it starts a kernel of its own and stops it at the end; to "
         "run a file in a session, kbox exec -s NAME -f FILE"},
        {"run", "--session",
         "kbox run has no session: it starts a kernel of its own and stops it at the end; to "
         "run a file in a session, kbox exec -s NAME -f FILE"},
        {"run", "-f", "kbox run takes its files as they are: kbox run FILE..."},
        {"run", "--file", "kbox run takes its files as they are: kbox run FILE..."},
        {"ls", "-s", "kbox ls lists every session; kbox status -s NAME shows one"},
        {"ls", "--session", "kbox ls lists every session; kbox status -s NAME shows one"},
        {"logs", "-n", "kbox logs prints every event it keeps (kbox logs -s NAME | tail -n N)"},
        {"logs", "--lines",
         "kbox logs prints every event it keeps (kbox logs -s NAME | tail -n N)"},
        {"logs", "--tail", "kbox logs prints every event it keeps (kbox logs -s NAME | tail -n N)"},
};

/* The one line of a bad option, named as given (LEN bytes of AS_GIVEN):
 * EXIT_USAGE.  WHOLE, when not NULL, is the whole argument it began:
 * code that begins with '-', when it looks like code, gets the hint of
 * "--". */
/* The long option of OPTS nearest to --NAME (LEN bytes, without the
 * dashes), within two edits (one for a short name), or NULL. */
static const char *nearest_long(const cli_option_t *opts, const char *name, size_t len)
{
	char given[40];
	const char *best = NULL;
	size_t best_d = 99;
	if (!opts || len == 0 || len >= sizeof given)
		return NULL;
	memcpy(given, name, len);
	given[len] = '\0';
	for (const cli_option_t *o = opts; o->long_name; o++) {
		size_t d;
		if (!o->long_name[0])
			continue;
		if ((d = cli_distance(given, o->long_name)) < best_d) {
			best_d = d;
			best = o->long_name;
		}
	}
	return best_d <= (len <= 4 ? 1u : 2u) ? best : NULL;
}

/* The options table of the command being parsed, for bad_option's hints. */
static const cli_option_t *parsing;

static int bad_option(const char *cmd, bad_t why, const char *as_given, size_t len,
                      const char *whole)
{
	int l = (int)len;
	switch (why) {
	case UNKNOWN:
		/* code that begins with '-' (-1, -x * 2, --x: no option's name
		 * is that short) is taken for options */
		if (whole && cli_takes_code(cmd) && !strchr(whole, '\'') &&
		    (strpbrk(whole, " ()[]{}.*+/<>\"#:;,%") || isdigit((unsigned char)whole[1]) ||
		     (whole[1] == '-' && (isdigit((unsigned char)whole[2]) || strlen(whole) <= 4))))
			cli_error(cmd,
			          "unknown option %.*s (see kbox %s --help); code that begins with "
			          "'-' goes after --, as in: kbox %s -- '%s'",
			          l, as_given, cmd, cmd, whole);
		else if ((strcmp(cmd, "exec") == 0 || strcmp(cmd, "mcp") == 0 ||
		          strcmp(cmd, "agent") == 0) &&
		         is_start_option(as_given, len))
			cli_error(
			        cmd,
			        "unknown option %.*s: a session's settings are kbox start's (kbox "
			        "start -s NAME %.*s ..., then kbox %s -s NAME)",
			        l, as_given, l, as_given, cmd);
		else {
			for (size_t i = 0; i < sizeof elsewhere / sizeof *elsewhere; i++)
				if (strcmp(cmd, elsewhere[i].cmd) == 0 &&
				    strlen(elsewhere[i].opt) == len &&
				    strncmp(elsewhere[i].opt, as_given, len) == 0) {
					cli_error(cmd, "unknown option %.*s: %s", l, as_given,
					          elsewhere[i].hint);
					return EXIT_USAGE;
				}
			if (len > 2 && as_given[1] == '-' &&
			    nearest_long(parsing, as_given + 2, len - 2))
				cli_error(
				        cmd,
				        "unknown option %.*s: did you mean --%s? (see kbox %s --help)",
				        l, as_given, nearest_long(parsing, as_given + 2, len - 2),
				        cmd);
			else
				cli_error(cmd, "unknown option %.*s (see kbox %s --help)", l,
				          as_given, cmd);
		}
		break;
	case NEEDS_ARGUMENT:
		cli_error(cmd, "option %.*s needs an argument (see kbox %s --help)", l, as_given,
		          cmd);
		break;
	case TAKES_NO_ARGUMENT:
		cli_error(cmd, "option %.*s takes no argument (see kbox %s --help)", l, as_given,
		          cmd);
		break;
	}
	return EXIT_USAGE;
}

/* When AS_GIVEN ("--max", LEN bytes) begins more than one long option:
 * the line naming them, and true. */
static bool ambiguous(const char *cmd, const cli_option_t *opts, const char *as_given, size_t len)
{
	char names[512] = "";
	size_t n = 0, used = 0;
	for (const cli_option_t *o = opts; o->long_name; o++)
		if (is_option(o) && strncmp(o->long_name, as_given + 2, len - 2) == 0 &&
		    used < sizeof names)
			used += (size_t)snprintf(names + used, sizeof names - used, "%s--%s",
			                         n++ ? ", " : "", o->long_name);
	if (strncmp(help_option.long_name, as_given + 2, len - 2) == 0 && used < sizeof names)
		used += (size_t)snprintf(names + used, sizeof names - used, "%s--%s",
		                         n++ ? ", " : "", help_option.long_name);
	if (n < 2)
		return false;
	cli_error(cmd, "ambiguous option %.*s (%s)", (int)len, as_given, names);
	return true;
}

/* Give O its value ARG (NULL without an argument).  An exit status. */
static int take(const char *cmd, const cli_option_t *o, const char *arg)
{
	switch (o->type) {
	case CLI_OPT_FLAG:
		*(bool *)o->value = true;
		return EXIT_OK;
	case CLI_OPT_STRING:
		*(const char **)o->value = arg;
		return EXIT_OK;
	case CLI_OPT_LIST:
		return cli_strlist_add(cmd, o->value, arg);
	case CLI_OPT_CALLBACK:
	case CLI_OPT_OPERANDS:
		return o->cb(cmd, o, arg);
	}
	return EXIT_OK;
}

/* "-s, --session NAME" for O into BUF. */
static const char *option_label(const cli_option_t *o, char *buf, size_t size)
{
	char s[8] = "    ";
	if (o->short_name)
		snprintf(s, sizeof s, "-%c, ", o->short_name);
	snprintf(buf, size, "%s--%s%s%s", s, o->long_name, o->placeholder ? " " : "",
	         o->placeholder ? o->placeholder : "");
	return buf;
}

#define HELP_LABEL_MAX 28 /* a longer label has its line of help below it */

static int label_width(const cli_option_t *o)
{
	char label[128];
	return (int)strlen(option_label(o, label, sizeof label));
}

/* One option's line(s) of help, the help in a column WIDTH from the label. */
static void help_row(FILE *f, const cli_option_t *o, int width)
{
	char label[128];
	option_label(o, label, sizeof label);
	if ((int)strlen(label) > width)
		fprintf(f, "  %s\n  %-*s  %s\n", label, width, "", o->help);
	else
		fprintf(f, "  %-*s  %s\n", width, label, o->help);
}

/* The help of CMD: its usage, each option of OPTS and -h with its line, and
 * its example. */
static void print_help(const cli_cmd_t *cmd, const cli_option_t *opts, FILE *f)
{
	int width = label_width(&help_option);

	for (const cli_option_t *o = opts; o && o->long_name; o++)
		if (is_option(o) && label_width(o) <= HELP_LABEL_MAX && label_width(o) > width)
			width = label_width(o);
	fprintf(f, "usage: %s\n\noptions:\n", cmd->usage);
	for (const cli_option_t *o = opts; o && o->long_name; o++)
		if (is_option(o))
			help_row(f, o, width);
	help_row(f, &help_option, width);
	if (cmd->example)
		fprintf(f, "\nexample:\n  %s\n", cmd->example);
	fprintf(f, "\nfull reference: man kbox-%s (in a source tree: man ./man/kbox-%s.1)\n",
	        cmd->name, cmd->name);
}

/* -h or --help: print the help; the command is done (with EXIT_OK). */
static int help(const char *cmd, const cli_option_t *opts)
{
	const cli_cmd_t *c = cli_find(cmd);
	if (c)
		print_help(c, opts, stdout);
	return -1;
}

/* The format the command line asks for, taken before anything is parsed,
 * so that an error before it (kbox ls --bogus --format json) is JSON
 * too: --format json or ndjson, --json, -j (the command's own options of
 * those names), up to "--". */
static void error_format_first(const cli_option_t *opts, int argc, char **argv)
{
	const cli_option_t *f = find_long(opts, "format", 6), *j = find_long(opts, "json", 4);
	if (f && strcmp(f->long_name, "format") != 0)
		f = NULL;
	if (j && strcmp(j->long_name, "json") != 0)
		j = NULL;
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *a = argv[i], *v = NULL;
		if (f && strncmp(a, "--format", 8) == 0 && (a[8] == '=' || a[8] == '\0'))
			v = a[8] == '=' ? a + 9 : i + 1 < argc ? argv[i + 1] : NULL;
		else if (j && (strcmp(a, "--json") == 0 ||
		               (j->short_name == 'j' && strcmp(a, "-j") == 0)))
			v = "json";
		if (v && strcmp(v, "json") == 0)
			cli_set_error_format(FMT_JSON);
		else if (v && strcmp(v, "ndjson") == 0)
			cli_set_error_format(FMT_NDJSON);
	}
}

int cli_parse_options(const char *cmd, const cli_option_t *opts, int argc, char **argv, int *status)
{
	const cli_option_t *operands = find_operands(opts), *o;
	bool options_end = false;
	int n = 0;

	*status = EXIT_OK;
	parsing = opts;
	error_format_first(opts, argc, argv);
	for (int i = 1; i < argc && *status == EXIT_OK; i++) {
		char *a = argv[i];
		if (options_end || a[0] != '-' || a[1] == '\0') { /* an operand; "-" too */
			if (operands)
				*status = take(cmd, operands, a);
			else
				argv[n++] = a;
		} else if (strcmp(a, "--") == 0) {
			options_end = true;
		} else if (a[1] == '-') { /* --name, --name=VALUE, --name VALUE */
			const char *eq = strchr(a, '=');
			size_t len = eq ? (size_t)(eq - a) : strlen(a);
			if (!(o = find_long(opts, a + 2, len - 2)))
				*status = ambiguous(cmd, opts, a, len)
				                  ? EXIT_USAGE
				                  : bad_option(cmd, UNKNOWN, a, len, a);
			else if (o == &help_option && !eq)
				return help(cmd, opts);
			else if (o->arg == CLI_ARG_NONE && eq)
				*status = bad_option(cmd, TAKES_NO_ARGUMENT, a, len, NULL);
			else if (o->arg == CLI_ARG_NONE)
				*status = take(cmd, o, NULL);
			else if (eq)
				*status = take(cmd, o, eq + 1);
			else if (i + 1 < argc)
				*status = take(cmd, o, argv[++i]);
			else
				*status = bad_option(cmd, NEEDS_ARGUMENT, a, len, NULL);
		} else { /* -x, -xy, -xVALUE, -x VALUE */
			for (const char *p = a + 1; *p && *status == EXIT_OK; p++) {
				char as_given[3] = {'-', *p, '\0'};
				if (!(o = find_short(opts, *p)))
					*status = bad_option(cmd, UNKNOWN, as_given, 2,
					                     p == a + 1 ? a : NULL);
				else if (o == &help_option)
					return help(cmd, opts);
				else if (o->arg == CLI_ARG_NONE)
					*status = take(cmd, o, NULL);
				else {
					if (p[1])
						*status = take(cmd, o, p + 1);
					else if (i + 1 < argc)
						*status = take(cmd, o, argv[++i]);
					else
						*status = bad_option(cmd, NEEDS_ARGUMENT, as_given,
						                     2, NULL);
					break;
				}
			}
		}
	}
	if (*status != EXIT_OK)
		return -1;
	argv[n] = NULL;
	return n;
}

bool cli_takes_code(const char *cmd)
{
	static const char *const code[] = {"exec", "run", "inspect", "complete", NULL};
	for (size_t i = 0; cmd && code[i]; i++)
		if (strcmp(cmd, code[i]) == 0)
			return true;
	return false;
}

bool cli_takes_session(const char *cmd)
{
	static const char *const s[] = {"exec",     "start",     "status", "stop", "logs",
	                                "restart",  "interrupt", "get",    "put",  "inspect",
	                                "complete", "mcp",       "agent",  NULL};
	for (size_t i = 0; cmd && s[i]; i++)
		if (strcmp(cmd, s[i]) == 0)
			return true;
	return false;
}

bool cli_operand_is_session(const char *operand)
{
	kbox_error_t ignored = {0};
	char *home;
	bool is;

	if (!operand || kr_session_check_name(operand, &ignored) < 0 ||
	    !(home = kr_state_home(&ignored)))
		return false;
	is = kr_session_is_dir(home, operand);
	free(home);
	return is;
}

int cli_session_operand_hint(const char *cmd, const char *operand, const char *rest)
{
	cli_error(cmd, "\"%s\" is a session: did you mean kbox %s -s %s %s?", operand, cmd, operand,
	          rest);
	return EXIT_USAGE;
}

int cli_no_operands(const char *cmd, int n, char **operands)
{
	kbox_error_t ignored = {0};
	if (n == 0)
		return EXIT_OK;
	/* docker's and jupyter's way: the session as an operand */
	if (strcmp(cmd, "ls") == 0 && kr_session_check_name(operands[0], &ignored) == 0)
		cli_error(cmd,
		          "unexpected argument \"%s\": kbox ls lists every session; kbox status -s "
		          "%s shows one",
		          operands[0], operands[0]);
	else if (cli_takes_session(cmd) && kr_session_check_name(operands[0], &ignored) == 0)
		cli_error(cmd,
		          "unexpected argument \"%s\": did you mean -s %s? (see kbox %s --help)",
		          operands[0], operands[0], cmd);
	else
		cli_error(cmd, "unexpected argument \"%s\" (see kbox %s --help)", operands[0], cmd);
	return EXIT_USAGE;
}

void cli_strlist_clear(cli_strlist_t *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
	for (size_t i = 0; i < l->n_owned; i++)
		free(l->owned[i]);
	free(l->owned);
	l->owned = NULL;
	l->n_owned = 0;
}

long long cli_parse_duration(const char *s)
{
	return cli_parse_duration_max(s, CLI_DURATION_MAX_MS);
}

long long cli_parse_duration_max(const char *s, long long max_ms)
{
	static const struct {
		const char *unit;
		long long ms;
	} units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
	const char *p = s;
	long long total = 0;
	int terms = 0;

	/* terms NUMBER UNIT, as kbox prints durations ("1h30m", "4m10s"), or
	 * one NUMBER alone, for seconds */
	do {
		long long whole = 0, frac = 0, scale = 1, unit_ms = 0, ms;
		size_t digits = 0, i;

		for (; *p >= '0' && *p <= '9'; p++, digits++)
			if ((whole = whole * 10 + (*p - '0')) > max_ms)
				return -1;
		if (*p == '.')
			for (p++; *p >= '0' && *p <= '9'; p++, digits++)
				if (scale < 1000000000LL) { /* finer than a nanosecond is noise */
					frac = frac * 10 + (*p - '0');
					scale *= 10;
				}
		if (digits == 0)
			return -1;
		for (i = 0; i < sizeof units / sizeof units[0]; i++) {
			size_t n = strlen(units[i].unit);
			if (strncmp(p, units[i].unit, n) == 0 && !(p[n] >= 'a' && p[n] <= 'z')) {
				unit_ms = units[i].ms;
				p += n;
				break;
			}
		}
		if (!unit_ms) {
			if (*p || terms) /* a bare number only alone */
				return -1;
			unit_ms = 1000;
		}
		if (whole > max_ms / unit_ms)
			return -1;
		/* a fraction of a millisecond is one: 0.0001 is not "no limit" */
		ms = whole * unit_ms + (frac * unit_ms + scale - 1) / scale;
		if ((total += ms) > max_ms)
			return -1;
		terms++;
	} while (*p);
	return total;
}

/* A number then a unit spelt out ("5min", "2 hours", "30sec"): the
 * duration as kbox spells it, in HINT (SIZE bytes), else "". */
static void duration_hint(const char *arg, char *hint, size_t size)
{
	static const struct {
		const char *word, *unit;
	} words[] = {{"minutes", "m"}, {"minute", "m"}, {"mins", "m"}, {"min", "m"},
	             {"seconds", "s"}, {"second", "s"}, {"secs", "s"}, {"sec", "s"},
	             {"hours", "h"},   {"hour", "h"},   {"hrs", "h"},  {"hr", "h"},
	             {"days", "d"},    {"day", "d"}};
	size_t n = strspn(arg, "0123456789.");
	const char *w = arg + n;
	hint[0] = '\0';
	while (*w == ' ')
		w++;
	if (!n || n > 12)
		return;
	for (size_t i = 0; i < sizeof words / sizeof *words; i++)
		if (strcmp(w, words[i].word) == 0) {
			snprintf(hint, size, " (did you mean %.*s%s?)", (int)n, arg, words[i].unit);
			return;
		}
}

int cli_opt_duration_within(const char *cmd, const cli_option_t *opt, const char *arg,
                            long long min_ms, long long max_ms, const char *range,
                            const char *examples)
{
	long long v = cli_parse_duration_max(arg, max_ms);
	if (v < min_ms) {
		char hint[64];
		duration_hint(arg, hint, sizeof hint);
		cli_error(cmd, "invalid --%s \"%s\": expected a duration from %s, such as %s%s",
		          opt->long_name, arg, range, examples, hint);
		return EXIT_USAGE;
	}
	*(long long *)opt->value = v;
	return EXIT_OK;
}

int cli_opt_duration_max(const char *cmd, const cli_option_t *opt, const char *arg,
                         long long max_ms, const char *examples)
{
	char range[32];
	snprintf(range, sizeof range, "0 to %lldd", max_ms / 86400000);
	return cli_opt_duration_within(cmd, opt, arg, 0, max_ms, range, examples);
}

int cli_opt_duration(const char *cmd, const cli_option_t *opt, const char *arg)
{
	return cli_opt_duration_max(cmd, opt, arg, CLI_DURATION_MAX_MS,
	                            "30, 1.5s, 500ms, 2m or 1h");
}

int cli_opt_format(const char *cmd, const cli_option_t *opt, const char *arg)
{
	if (cli_parse_format(cmd, arg, opt->value) < 0)
		return EXIT_USAGE;
	cli_set_error_format(*(format_t *)opt->value);
	return EXIT_OK;
}

bool cli_take_stdin(void)
{
	static bool taken;
	bool first = !taken;
	taken = true;
	return first;
}

int cli_opt_input_file(const char *cmd, const cli_option_t *opt, const char *arg)
{
	cli_strlist_t *l = opt->value;
	bool is_stdin = strcmp(arg, "-") == 0;
	FILE *f;
	char *text, **owned;
	size_t lines = 0;
	int e;

	if (is_stdin && !cli_take_stdin()) {
		cli_error(cmd, "standard input (-) given more than once");
		return EXIT_USAGE;
	}
	f = is_stdin ? stdin : fopen(arg, "r");
	text = f ? cli_slurp(f) : NULL;
	e = errno;

	if (f && !is_stdin)
		fclose(f);
	if (!text) {
		cli_error(cmd, "--input-file %s: %s", arg, f ? cli_slurp_strerror(e) : strerror(e));
		return EXIT_USAGE;
	}
	if (!kx_utf8_valid_str(text)) {
		cli_error(cmd, "--input-file %s: not valid UTF-8", arg);
		free(text);
		return EXIT_USAGE;
	}
	owned = realloc(l->owned, (l->n_owned + 1) * sizeof *owned);
	if (!owned) {
		free(text);
		cli_error(cmd, "out of memory");
		return EXIT_UNAVAILABLE;
	}
	l->owned = owned;
	l->owned[l->n_owned++] = text;
	for (char *p = text; *p; p++)
		lines += *p == '\n';
	{
		const char **v = realloc(l->v, (l->n + lines + 2) * sizeof *v);
		if (!v) {
			cli_error(cmd, "out of memory");
			return EXIT_UNAVAILABLE;
		}
		l->v = v;
	}
	/* each line, without its newline; a last line without one counts */
	for (char *p = text; *p;) {
		char *nl = strchr(p, '\n');
		l->v[l->n++] = p;
		if (!nl)
			break;
		*nl = '\0';
		p = nl + 1;
	}
	l->v[l->n] = NULL;
	return EXIT_OK;
}

int cli_opt_json(const char *cmd, const cli_option_t *opt, const char *arg)
{
	(void)arg;
	return cli_opt_format(cmd, opt, "json");
}

int cli_opt_max_output(const char *cmd, const cli_option_t *opt, const char *arg)
{
	return cli_parse_max_output(cmd, arg, opt->value) < 0 ? EXIT_USAGE : EXIT_OK;
}

int cli_opt_max_lines(const char *cmd, const cli_option_t *opt, const char *arg)
{
	return cli_parse_max_lines(cmd, arg, opt->value) < 0 ? EXIT_USAGE : EXIT_OK;
}

int cli_parse_no_operands(const char *cmd, const cli_option_t *opts, int argc, char **argv,
                          int *status)
{
	int n = cli_parse_options(cmd, opts, argc, argv, status);

	if (n < 0)
		return -1;
	return (*status = cli_no_operands(cmd, n, argv)) == EXIT_OK ? 0 : -1;
}

int cli_parse_format_only(const char *cmd, const char *help, format_t *format, int argc,
                          char **argv, int *status)
{
	cli_option_t opts[] = {CLI_OPT_FORMAT(format, help), CLI_OPT_JSON('j', format),
	                       CLI_OPT_END};

	return cli_parse_no_operands(cmd, opts, argc, argv, status);
}
