/* src/cli/cmd_kernelspecs.c — kbox kernelspecs: the kernels found and where. */
#include "config.h"
#include "cli.h"

#include <string.h>

int cmd_kernelspecs(int argc, char **argv)
{
	format_t format = FMT_TEXT;
	static const char help[] = "text: a line each, tab-separated (the default); json: one "
	                           "JSON object by name; ndjson: an object each, one a line";
	char **list;
	json_t *out;
	int status;

	if (cli_parse_format_only("kernelspecs", help, &format, argc, argv, &status) < 0)
		return status;
	list = kbox_kspec_list();
	out = json_object();
	for (char **p = list; p && *p; p++) {
		char *tab = strchr(*p, '\t');
		kbox_error_t err = {0};
		kbox_kspec_t *spec;
		if (!tab)
			continue;
		*tab = '\0';
		spec = kbox_kspec_load(tab + 1, &err);
		if (!spec) {
			if (format == FMT_TEXT)
				printf("%s\t%s\t(invalid: %s)\n", *p, tab + 1, err.msg);
			continue;
		}
		if (format != FMT_TEXT) {
			json_t *argvj = json_array(), *one;
			for (char *const *a = kbox_kspec_argv(spec); *a; a++)
				json_array_append_new(argvj, json_string(*a));
			one = json_pack("{s:s, s:s, s:s, s:o}", "resource_dir",
			                kbox_kspec_resource_dir(spec), "display_name",
			                kbox_kspec_display_name(spec), "language",
			                kbox_kspec_language(spec), "argv", argvj);
			if (format == FMT_NDJSON) {
				json_t *line = json_pack("{s:s}", "name", *p);
				json_object_update(line, one);
				json_decref(one);
				cli_print_json_line(line);
			} else {
				json_object_set_new(out, *p, one);
			}
		} else {
			printf("%s\t%s\t%s\n", *p, kbox_kspec_resource_dir(spec),
			       kbox_kspec_display_name(spec));
		}
		kbox_kspec_destroy(&spec);
	}
	if (format == FMT_JSON) {
		char *s = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
		if (s)
			printf("%s\n", s);
		cli_json_printed();
		free(s);
	}
	json_decref(out);
	kbox_strv_free(list);
	return EXIT_OK;
}
