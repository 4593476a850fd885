/* src/cli/cmd_kernelspecs.c — kbox kernelspecs: the kernels found and where. */
#include "config.h"
#include "cli.h"

#include <string.h>

int cmd_kernelspecs(int argc, char **argv)
{
	bool as_json = false;
	cli_option_t opts[] = {
	    CLI_OPT_FLAG('j', "json", &as_json,
	                 "print them as one JSON object (default: a line each, tab-separated)"),
	    CLI_OPT_END};
	char **list;
	json_t *out;
	int status, n = cli_parse_options("kernelspecs", opts, argc, argv, &status);

	if (n < 0)
		return status;
	if ((status = cli_no_operands("kernelspecs", n, argv)) != EXIT_OK)
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
			if (!as_json)
				printf("%s\t%s\t(invalid: %s)\n", *p, tab + 1, err.msg);
			continue;
		}
		if (as_json) {
			json_t *argvj = json_array();
			for (char *const *a = kbox_kspec_argv(spec); *a; a++)
				json_array_append_new(argvj, json_string(*a));
			json_object_set_new(out, *p,
			                    json_pack("{s:s, s:s, s:s, s:o}", "resource_dir",
			                              kbox_kspec_resource_dir(spec), "display_name",
			                              kbox_kspec_display_name(spec), "language",
			                              kbox_kspec_language(spec), "argv", argvj));
		} else {
			printf("%s\t%s\t%s\n", *p, kbox_kspec_resource_dir(spec),
			       kbox_kspec_display_name(spec));
		}
		kbox_kspec_destroy(&spec);
	}
	if (as_json) {
		char *s = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
		if (s)
			printf("%s\n", s);
		free(s);
	}
	json_decref(out);
	kbox_strv_free(list);
	return EXIT_OK;
}
