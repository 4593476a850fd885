/* src/cli/cmd_kernelspecs.c — kbox kernelspecs: the kernels found and where. */
#include "config.h"
#include "cli.h"

#include <getopt.h>
#include <string.h>

int cmd_kernelspecs(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	bool as_json = false;
	char **list;
	json_t *out;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j': as_json = true; break;
		case 'h': cli_usage(cli_find("kernelspecs"), stdout); return EXIT_OK;
		default: cli_bad_option("kernelspecs", c, argv); return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_error("kernelspecs", "unexpected argument \"%s\"", argv[optind]);
		return EXIT_USAGE;
	}
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
		char *s = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS);
		if (s)
			printf("%s\n", s);
		free(s);
	}
	json_decref(out);
	kbox_strv_free(list);
	return EXIT_OK;
}
