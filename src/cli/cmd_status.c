/* src/cli/cmd_status.c — kbox status: one session in detail. */
#include "config.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* INFO (cli_session_info's object) as text: a line a field, in a fixed
 * order, durations and sizes as a person reads them. */
static void print_text(json_t *info)
{
	const char *key;
	json_t *v;
	char buf[64];

	for (size_t i = 0; cli_session_keys[i]; i++) {
		key = cli_session_keys[i];
		if (!(v = json_object_get(info, key)))
			continue;
		if (strcmp(key, "memory_bytes") == 0)
			printf("%-18s %s\n", "memory:",
			       kx_fmt_bytes(buf, sizeof buf, (long long)json_integer_value(v)));
		else if (strcmp(key, "ttl_ms") == 0) {
			long long t = (long long)json_integer_value(v);
			printf("%-18s %s\n", "ttl:",
			       t ? cli_fmt_secs((double)t / 1000, buf, sizeof buf) : "never");
		} else if (strstr(key, "_s") && json_is_number(v)) {
			char label[40];
			snprintf(label, sizeof label, "%.*s:", (int)(strlen(key) - 2), key);
			printf("%-18s %s\n", label,
			       cli_fmt_secs(json_number_value(v), buf, sizeof buf));
		} else if (json_is_string(v)) {
			char label[40];
			snprintf(label, sizeof label, "%s:", key);
			if (*json_string_value(v))
				printf("%-18s %s\n", label, json_string_value(v));
		} else if (json_is_integer(v)) {
			char label[40];
			snprintf(label, sizeof label, "%s:", key);
			printf("%-18s %lld\n", label, (long long)json_integer_value(v));
		}
	}
}

int cmd_status(int argc, char **argv)
{
	const char *name = NULL;
	format_t format = FMT_TEXT;
	cli_option_t opts[] = {
	        CLI_OPT_SESSION(&name),
	        CLI_OPT_FORMAT(&format,
	                       "text: a line a field (the default); json: one JSON object; "
	                       "ndjson: that object on one line"),
	        CLI_OPT_JSON('j', &format), CLI_OPT_END};
	int status;
	char *dir = NULL, *home = NULL;
	json_t *info = NULL;
	kbox_error_t err = {0};

	if (cli_parse_no_operands("status", opts, argc, argv, &status) < 0)
		return status;
	name = cli_session_name(name);
	if ((status = cli_check_session("status", name)) != EXIT_OK)
		return status;
	if (!(dir = cli_session_dir("status", name, false, &status)))
		return status;
	if (!(home = kr_state_home(&err))) {
		cli_error("status", "%s", err.msg);
		free(dir);
		return EXIT_UNAVAILABLE;
	}
	info = cli_session_info(home, name);
	{
		const char *st = json_string_value(json_object_get(info, "state"));
		if (!st || strcmp(st, "stopped") == 0 || strcmp(st, "dead") == 0 ||
		    strcmp(st, "unresponsive") == 0 || strcmp(st, "stopping") == 0 ||
		    strcmp(st, "invalid") == 0)
			status = EXIT_UNAVAILABLE;
	}
	if (format != FMT_TEXT) {
		char *s = json_dumps(info, (format == FMT_JSON ? JSON_INDENT(2) : JSON_COMPACT) |
		                                   JSON_REAL_PRECISION(9));
		if (s)
			puts(s);
		cli_json_printed();
		free(s);
	} else
		print_text(info);
	json_decref(info);
	free(home);
	free(dir);
	return status;
}
