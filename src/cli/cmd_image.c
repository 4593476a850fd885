/* src/cli/cmd_image.c — kbox image: the kernel images of the docker
 * backend (and root file systems for bwrap's --rootfs).
 *
 *   kbox image build  the image of a recipe (Debian bookworm, the base
 *                     packages, the user's --packages and --requirements),
 *                     offline from Debian's mirror: container/image.sh,
 *                     installed in pkgdatadir, does it (with build.sh and
 *                     kbox-engine import); with --rootfs, a tree instead
 *   kbox image ls     the images kbox built (label kbox.recipe)
 *   kbox image rm     remove such images
 *
 * The engine is spoken to by kbox-engine (cli_engine_call), as for
 * sessions: kbox itself never loads libcurl. */
#include "config.h"
#include "cli.h"
#include "runtime/session_config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KBOX_PKGDATADIR
#define KBOX_PKGDATADIR "/usr/local/share/kbox"
#endif

typedef struct {
	const char *name, *packages, *requirements, *index_url, *mirror, *rootfs;
	format_t format;
} image_opts_t;

/* container/image.sh: beside kbox in a build tree, else where make
 * install put it.  0 with its path in PATH, or -1 (said). */
static int find_image_script(char *path, size_t size)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	char tried[3 * PATH_MAX];
	size_t used = 0;

	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')))
			*slash = '\0';
	} else {
		exe[0] = '\0';
	}
	for (int i = 0; i < 3; i++) {
		if (i == 0 && exe[0])
			snprintf(path, size, "%s/container/image.sh", exe);
		else if (i == 1)
			snprintf(path, size, "%s/container/image.sh", KBOX_PKGDATADIR);
		else if (i == 2 && exe[0])
			snprintf(path, size, "%s/../share/kbox/container/image.sh", exe);
		else
			continue;
		if (access(path, R_OK) == 0)
			return 0;
		used += (size_t)snprintf(tried + used,
		                         used < sizeof tried ? sizeof tried - used : 0, "%s%s",
		                         used ? ", " : "", path);
	}
	cli_error("image build",
	          "cannot find the image builder container/image.sh (tried %s): is kbox "
	          "installed whole?",
	          tried);
	return -1;
}

/* --rootfs DIR, before a build that takes minutes: DIR is a directory or
 * nothing yet, in a directory that exists (image.sh says the rest: a link,
 * a directory that holds something).  EXIT_OK, or EXIT_USAGE after one
 * line. */
static int check_rootfs(const char *dir)
{
	char parent[PATH_MAX], *slash;
	struct stat st;

	if (lstat(dir, &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) {
		cli_error("image build", "--rootfs %s: not a directory", dir);
		return EXIT_USAGE;
	}
	if (strlen(dir) >= sizeof parent) {
		cli_error("image build", "--rootfs: the path is too long");
		return EXIT_USAGE;
	}
	strcpy(parent, dir);
	while ((slash = strrchr(parent, '/')) && slash > parent && !slash[1])
		*slash = '\0'; /* (a trailing slash) */
	slash = strrchr(parent, '/');
	if (!slash)
		strcpy(parent, ".");
	else
		slash[slash == parent] = '\0';
	if (stat(parent, &st) < 0) {
		cli_error("image build", "--rootfs %s: %s: %s", dir, parent, strerror(errno));
		return EXIT_USAGE;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_error("image build", "--rootfs %s: %s is not a directory", dir, parent);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* kbox image build: exec container/image.sh, its output and exit status
 * ours.  Returns only when it could not be run. */
static int image_build(const image_opts_t *o)
{
	/* (KBOX_IMAGE_NAME is the default; --rootfs makes no image) */
	const char *env = getenv("KBOX_IMAGE_NAME");
	const char *name = o->name ? o->name : env && *env && !o->rootfs ? env : NULL;
	char script[PATH_MAX], helper[PATH_MAX];
	const char *argv[24];
	size_t n = 0;

	if (o->format != FMT_TEXT) {
		cli_error("image build", "--format is for kbox image ls");
		return EXIT_USAGE;
	}
	if (name && !kr_image_ref_valid(name)) {
		char shown[256];
		kx_name_escape(name, strnlen(name, 200), shown, sizeof shown);
		cli_error(
		        "image build",
		        "invalid --name \"%s\": not an image name (NAME or NAME:TAG, NAME in lower "
		        "case)",
		        shown);
		return EXIT_USAGE;
	}
	if (name && (strchr(name, '@') || strncmp(name, "sha256:", 7) == 0)) {
		cli_error("image build",
		          "invalid --name \"%s\": a digest or an id names no new image", name);
		return EXIT_USAGE;
	}
	if ((o->mirror && !*o->mirror) || (o->rootfs && !*o->rootfs) ||
	    (o->requirements && !*o->requirements) || (o->index_url && !*o->index_url) ||
	    (o->packages && !o->packages[strspn(o->packages, ", \t\n")])) {
		cli_error("image build", "an empty --packages, --mirror, --rootfs, --requirements "
		                         "or --index-url names nothing");
		return EXIT_USAGE;
	}
	if (o->rootfs && check_rootfs(o->rootfs) != EXIT_OK)
		return EXIT_USAGE;
	if (o->index_url && !o->requirements) {
		cli_error("image build", "--index-url is for --requirements");
		return EXIT_USAGE;
	}
	if (o->rootfs && name) {
		cli_error("image build",
		          "--name names an image of the engine: with --rootfs there is none");
		return EXIT_USAGE;
	}
	if (find_image_script(script, sizeof script) < 0)
		return EXIT_UNAVAILABLE;
	if (o->rootfs)
		snprintf(helper, sizeof helper, "-");
	else if (cli_find_program("image", "kbox-engine", "the docker backend's helper", helper,
	                          sizeof helper) < 0)
		return EXIT_UNAVAILABLE;
	argv[n++] = "sh";
	argv[n++] = script;
	argv[n++] = helper;
	if (name) {
		argv[n++] = "--name";
		argv[n++] = name;
	}
	if (o->rootfs) {
		argv[n++] = "--rootfs";
		argv[n++] = o->rootfs;
	}
	if (o->packages) {
		argv[n++] = "--packages";
		argv[n++] = o->packages;
	}
	if (o->requirements) {
		argv[n++] = "--requirements";
		argv[n++] = o->requirements;
	}
	if (o->index_url) {
		argv[n++] = "--index-url";
		argv[n++] = o->index_url;
	}
	if (o->mirror) {
		argv[n++] = "--mirror";
		argv[n++] = o->mirror;
	}
	argv[n] = NULL;
	fflush(stdout);
	if (setenv("KBOX_IMAGE_ME", "kbox image build", 1) < 0) {
		cli_error("image build", "out of memory");
		return EXIT_UNAVAILABLE;
	}
	execv("/bin/sh", (char *const *)argv);
	cli_error("image build", "cannot run /bin/sh %s: %s", script, strerror(errno));
	return EXIT_UNAVAILABLE;
}

/* The exit status of a failure kbox-engine reported in J (may be NULL). */
static int engine_status(json_t *j)
{
	const char *kind = json_string_value(json_object_get(json_object_get(j, "error"), "kind"));
	return kind && strcmp(kind, "usage") == 0 ? EXIT_USAGE : EXIT_UNAVAILABLE;
}

/* What an image adds to the base recipe, for the text table: "-", or its
 * packages and "pip requirements HASH". */
static void added_text(json_t *img, char *out, size_t size)
{
	const char *p = json_string_value(json_object_get(img, "packages"));
	const char *r = json_string_value(json_object_get(img, "requirements"));
	if (r && strncmp(r, "sha256:", 7) == 0)
		r += 7;
	snprintf(out, size, "%s%s%s%.12s", p && *p ? p : "", p && *p && r ? "; " : "",
	         r ? "pip requirements " : "", r ? r : "");
	if (!out[0])
		snprintf(out, size, "-");
}

/* kbox image ls. */
static int image_ls(const image_opts_t *o)
{
	char *const args[] = {"images", NULL};
	char why[1200];
	json_t *j = NULL, *imgs, *img;
	size_t i;
	int status = EXIT_OK, w = 24;

	if (o->name || o->packages || o->requirements || o->index_url || o->mirror || o->rootfs) {
		cli_error("image ls", "it takes no option but --format");
		return EXIT_USAGE;
	}
	if (cli_engine_call("image", args, &j, why, sizeof why) < 0) {
		cli_error("image ls", "%s", why);
		status = engine_status(j);
		json_decref(j);
		return status;
	}
	imgs = json_object_get(j, "images");
	/* the creation time as kbox prints times: ISO 8601, UTC */
	json_array_foreach(imgs, i, img)
	{
		json_t *c = json_object_get(img, "created");
		char when[32];
		if (json_is_integer(c)) {
			kx_iso8601((double)json_integer_value(c), 0, when);
			json_object_set_new(img, "created", json_string(when));
		}
	}
	if (o->format != FMT_TEXT) {
		cli_print_json_line(json_pack("{s:O, s:O?}", "images", imgs, "engine",
		                              json_object_get(j, "engine")));
		json_decref(j);
		return EXIT_OK;
	}
	if (!json_array_size(imgs)) {
		printf("no images built by kbox in the engine (kbox image build makes one)\n");
		json_decref(j);
		return EXIT_OK;
	}
	/* the names' column as wide as the longest (24 at least) */
	json_array_foreach(imgs, i, img)
	{
		json_t *nm;
		size_t k;
		json_array_foreach(json_object_get(img, "names"), k, nm)
		{
			size_t len = strlen(json_string_value(nm) ? json_string_value(nm) : "");
			if (len > (size_t)w && len <= 200)
				w = (int)len;
		}
	}
	printf("%-*s  %-12s  %-20s  %9s  %-12s  %s\n", w, "NAME", "ID", "CREATED", "SIZE", "RECIPE",
	       "ADDED");
	json_array_foreach(imgs, i, img)
	{
		json_t *names = json_object_get(img, "names");
		const char *id = json_string_value(json_object_get(img, "id"));
		const char *recipe = json_string_value(json_object_get(img, "recipe"));
		const char *created = json_string_value(json_object_get(img, "created"));
		char size[32], added[512];
		size_t k, n = json_array_size(names);
		if (id && strncmp(id, "sha256:", 7) == 0)
			id += 7;
		if (recipe && strncmp(recipe, "sha256:", 7) == 0)
			recipe += 7;
		kx_fmt_bytes(size, sizeof size, json_integer_value(json_object_get(img, "size")));
		added_text(img, added, sizeof added);
		/* one line a name; an image without one is "<none>" */
		for (k = 0; k < (n ? n : 1); k++)
			printf("%-*s  %-12.12s  %-20s  %9s  %-12.12s  %s\n", w,
			       n ? json_string_value(json_array_get(names, k)) : "<none>",
			       id ? id : "?", created ? created : "?", size, recipe ? recipe : "?",
			       added);
	}
	json_decref(j);
	return status;
}

/* kbox image rm NAME...: each in turn; the first failure's status. */
static int image_rm(const image_opts_t *o, int n, char **names)
{
	int status = EXIT_OK;

	if (o->name || o->packages || o->requirements || o->index_url || o->mirror || o->rootfs ||
	    o->format != FMT_TEXT) {
		cli_error("image rm", "it takes no option, only the names of images");
		return EXIT_USAGE;
	}
	if (n == 0) {
		cli_error("image rm", "which images? (kbox image rm NAME...)");
		return EXIT_USAGE;
	}
	for (int i = 0; i < n; i++)
		if (!kr_image_ref_valid(names[i])) {
			char shown[256];
			kx_name_escape(names[i], strnlen(names[i], 200), shown, sizeof shown);
			cli_error("image rm",
			          "invalid image \"%s\": not an image reference (NAME, NAME:TAG, "
			          "NAME@sha256:DIGEST or sha256:ID; NAME in lower case)",
			          shown);
			return EXIT_USAGE;
		}
	for (int i = 0; i < n; i++) {
		char *const args[] = {"rmi", names[i], NULL};
		char why[1200];
		json_t *j = NULL;
		if (cli_engine_call("image", args, &j, why, sizeof why) < 0) {
			cli_error("image rm", "%s", why);
			if (status == EXIT_OK)
				status = engine_status(j);
		} else {
			printf("removed image %s\n", names[i]);
		}
		json_decref(j);
	}
	return status;
}

int cmd_image(int argc, char **argv)
{
	image_opts_t o = {0};
	cli_option_t opts[] = {
	        CLI_OPT_STRING(0, "name", "NAME", &o.name,
	                       "build: the image's name (default: $KBOX_IMAGE_NAME, else "
	                       "kbox-kernel)"),
	        CLI_OPT_STRING(0, "packages", "LIST", &o.packages,
	                       "build: more Debian packages, separated by commas or spaces"),
	        CLI_OPT_STRING(0, "requirements", "FILE", &o.requirements,
	                       "build: a pip requirements file, installed from a package index"),
	        CLI_OPT_STRING(0, "index-url", "URL", &o.index_url,
	                       "build: the package index of --requirements (default: "
	                       "$PIP_INDEX_URL, else pip's)"),
	        CLI_OPT_STRING(0, "mirror", "URL", &o.mirror,
	                       "build: the Debian mirror (default: mmdebstrap's)"),
	        CLI_OPT_STRING(0, "rootfs", "DIR", &o.rootfs,
	                       "build: unpack the tree into DIR, a new directory, for kbox start "
	                       "--rootfs, instead of importing it into the engine"),
	        CLI_OPT_FORMAT(&o.format, "ls: text (a table); json and ndjson: one JSON object "
	                                  "on one line"),
	        CLI_OPT_JSON('j', &o.format),
	        CLI_OPT_END};
	/* (errors in the options name the subcommand, when it comes first) */
	const char *cmd = argc < 2                        ? "image"
	                  : strcmp(argv[1], "build") == 0 ? "image build"
	                  : strcmp(argv[1], "ls") == 0 || strcmp(argv[1], "list") == 0 ? "image ls"
	                  : strcmp(argv[1], "rm") == 0 || strcmp(argv[1], "remove") == 0
	                          ? "image rm"
	                          : "image";
	int status, n = cli_parse_options(cmd, opts, argc, argv, &status);

	if (n < 0)
		return status;
	if (n == 0) {
		cli_error("image",
		          "a subcommand is needed: build, ls or rm (see kbox image --help)");
		return EXIT_USAGE;
	}
	if (strcmp(argv[0], "build") == 0) {
		if ((status = cli_no_operands("image", n - 1, argv + 1)) != EXIT_OK)
			return status;
		return image_build(&o);
	}
	if (strcmp(argv[0], "ls") == 0 || strcmp(argv[0], "list") == 0) {
		if ((status = cli_no_operands("image", n - 1, argv + 1)) != EXIT_OK)
			return status;
		return image_ls(&o);
	}
	if (strcmp(argv[0], "rm") == 0 || strcmp(argv[0], "remove") == 0)
		return image_rm(&o, n - 1, argv + 1);
	cli_error("image",
	          "unknown subcommand \"%s\": kbox image build, kbox image ls or kbox image rm",
	          argv[0]);
	return EXIT_USAGE;
}
