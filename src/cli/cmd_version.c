/* src/cli/cmd_version.c — kbox version: print the version. */
#include "config.h"
#include "cli.h"

int cmd_version(int argc, char **argv)
{
	format_t format = FMT_TEXT;
	cli_option_t opts[] = {
	        CLI_OPT_FORMAT(&format, "text: \"kbox VERSION\" (the default); json and ndjson: "
	                                "{\"name\": \"kbox\", \"version\": VERSION} on one line"),
	        CLI_OPT_JSON('j', &format), CLI_OPT_END};
	int status;

	if (cli_parse_no_operands("version", opts, argc, argv, &status) < 0)
		return status;
	if (format == FMT_TEXT)
		printf("kbox %s\n", PACKAGE_VERSION);
	else
		cli_print_json_line(
		        json_pack("{s:s, s:s}", "name", "kbox", "version", PACKAGE_VERSION));
	return EXIT_OK;
}
