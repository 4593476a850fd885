/* src/cli/cmd_kernelspecs.c — kbox kernelspecs: the kernels found and where;
 * with -s of a gateway session, those its Jupyter server offers. */
#include "config.h"
#include "cli.h"
#include "runtime/backend.h"
#include "runtime/session_config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One kernelspec NAME, as FORMAT says, into OUT (json) or printed: WHERE
 * is its directory here, or its address on a server. */
static void put_one(format_t format, json_t *out, const char *name, const char *where,
                    const char *display, const char *language, json_t *argvj, bool remote)
{
	json_t *one;
	if (format == FMT_TEXT) {
		/* (a server's words: no tab or line break of its own in a
		 * line, and what a terminal would take for a control, C0 or
		 * C1, or what is invisible, escaped as everywhere) */
		const char *f[3] = {name, where, display};
		for (int i = 0; i < 3; i++) {
			char *copy = strdup(f[i]);
			for (char *c = copy; c && *c; c++)
				if (*c == '\t' || *c == '\n' || *c == '\r' || *c == '\b')
					*c = ' ';
			if (copy)
				cli_write_safe(stdout, copy, strlen(copy));
			free(copy);
			putchar(i < 2 ? '\t' : '\n');
		}
		json_decref(argvj);
		return;
	}
	one = json_pack("{s:s, s:s, s:s, s:o}", remote ? "server" : "resource_dir", where,
	                "display_name", display, "language", language, "argv", argvj);
	if (format == FMT_NDJSON) {
		json_t *line = json_pack("{s:s}", "name", name);
		json_object_update(line, one);
		json_decref(one);
		cli_print_json_line(line);
	} else
		json_object_set_new(out, name, one);
}

static void local_specs(format_t format, json_t *out)
{
	char **list = kbox_kspec_list();
	for (char **p = list; p && *p; p++) {
		char *tab = strchr(*p, '\t');
		kbox_error_t err = {0};
		kbox_kspec_t *spec;
		json_t *argvj;
		if (!tab)
			continue;
		*tab = '\0';
		spec = kbox_kspec_load(tab + 1, &err);
		if (!spec) {
			if (format == FMT_TEXT)
				printf("%s\t%s\t(invalid: %s)\n", *p, tab + 1, err.msg);
			continue;
		}
		argvj = json_array();
		for (char *const *a = kbox_kspec_argv(spec); *a; a++)
			json_array_append_new(argvj, json_string(*a));
		put_one(format, out, *p, kbox_kspec_resource_dir(spec),
		        kbox_kspec_display_name(spec), kbox_kspec_language(spec), argvj, false);
		kbox_kspec_destroy(&spec);
	}
	kbox_strv_free(list);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Those of the Jupyter server of the gateway session in DIR (CFG its
 * configuration), asked with its token. */
static int remote_specs(const char *name, const char *dir, const kr_session_config_t *cfg,
                        format_t format, json_t *out)
{
	kbox_error_t err = {0};
	json_t *all = NULL, *specs, *v;
	char *token = NULL;
	const char *k, **names;
	size_t n = 0;
	int dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC), rc = -1;

	if (dir_fd < 0)
		kbox_error_set_sys(&err, "%s", dir);
	else if (kr_gateway_token_read(dir_fd, &token, &err) == 0 &&
	         kr_gateway_specs(cfg->gateway, token, cfg->gateway_ca, &all, &err) == 0)
		rc = 0;
	if (dir_fd >= 0)
		close(dir_fd);
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (rc < 0) {
		cli_error("kernelspecs", "session %s: %s", name, err.msg);
		return EXIT_UNAVAILABLE;
	}
	/* (by name, as the local ones) */
	specs = json_object_get(all, "kernelspecs");
	if (!(names = calloc(json_object_size(specs) + 1, sizeof *names))) {
		json_decref(all);
		cli_error("kernelspecs", "out of memory");
		return EXIT_UNAVAILABLE;
	}
	json_object_foreach(specs, k, v) names[n++] = k;
	qsort(names, n, sizeof *names, by_name);
	for (size_t j = 0; j < n; j++) {
		json_t *spec = json_object_get(json_object_get(specs, names[j]), "spec");
		json_t *argvj = json_array(), *a;
		const char *display = json_string_value(json_object_get(spec, "display_name"));
		const char *language = json_string_value(json_object_get(spec, "language"));
		char where[1200];
		size_t i;
		json_array_foreach(json_object_get(spec, "argv"), i, a)
		{
			if (json_is_string(a))
				json_array_append(argvj, a);
		}
		k = names[j];
		snprintf(where, sizeof where, "%s/api/kernelspecs/%s", cfg->gateway, k);
		put_one(format, out, k, where, display ? display : k, language ? language : "",
		        argvj, true);
	}
	free(names);
	json_decref(all);
	return EXIT_OK;
}

int cmd_kernelspecs(int argc, char **argv)
{
	format_t format = FMT_TEXT;
	const char *name = NULL;
	cli_option_t opts[] = {
	        CLI_OPT_STRING('s', "session", "NAME", &name,
	                       "list the kernelspecs where this session's kernel runs (a "
	                       "gateway session: its Jupyter server's); no default"),
	        CLI_OPT_FORMAT(&format, "text: a line each, tab-separated (the default); json: "
	                                "one JSON object by name; ndjson: an object each, one "
	                                "a line"),
	        CLI_OPT_JSON('j', &format), CLI_OPT_END};
	kr_session_config_t cfg;
	kbox_error_t err = {0};
	char *dir = NULL;
	json_t *out;
	int status = EXIT_OK;

	if (cli_parse_no_operands("kernelspecs", opts, argc, argv, &status) < 0)
		return status;
	kr_session_config_init(&cfg);
	out = json_object();
	if (name) { /* the kernelspecs where that session's kernel runs */
		if ((status = cli_check_session("kernelspecs", name)) != EXIT_OK ||
		    !(dir = cli_session_dir("kernelspecs", name, false, &status)))
			goto out;
		if (kr_session_config_load(&cfg, dir, &err) < 0) {
			cli_error("kernelspecs", "session %s: %s", name, err.msg);
			status = EXIT_USAGE;
			goto out;
		}
	}
	if (name && kr_backend_remote(cfg.backend) && cfg.gateway)
		status = remote_specs(name, dir, &cfg, format, out);
	else
		local_specs(format, out);
	if (status == EXIT_OK && format == FMT_JSON) {
		char *s = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
		if (s)
			printf("%s\n", s);
		cli_json_printed();
		free(s);
	}
out:
	json_decref(out);
	kr_session_config_free(&cfg);
	free(dir);
	return status;
}
