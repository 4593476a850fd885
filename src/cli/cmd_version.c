/* src/cli/cmd_version.c — kbox version: print the version. */
#include "config.h"
#include "cli.h"

int cmd_version(int argc, char **argv)
{
	format_t format = FMT_TEXT;
	static const char help[] = "text: \"kbox VERSION\" (the default); json and ndjson: "
	                           "{\"name\": \"kbox\", \"version\": VERSION} on one line";
	int status;

	if (cli_parse_format_only("version", help, &format, argc, argv, &status) < 0)
		return status;
	if (format == FMT_TEXT)
		printf("kbox %s\n", PACKAGE_VERSION);
	else
		cli_print_json_line(
		        json_pack("{s:s, s:s}", "name", "kbox", "version", PACKAGE_VERSION));
	return EXIT_OK;
}
