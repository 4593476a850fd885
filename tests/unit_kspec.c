/* tests/unit_kspec.c — kernelspecs: the search path, which spec wins,
 * kernel.json parsing, and argv/env formatting.
 *
 * Every test runs in a fresh mode-0700 directory under /tmp (TMP), removed
 * afterwards, with JUPYTER_PATH, JUPYTER_DATA_DIR, XDG_DATA_HOME and HOME
 * pointed into it, so no real user kernelspec can interfere.  Kernel names
 * start with "kboxtest" so they cannot collide with system kernelspecs.
 * The last test uses the real Debian kernelspec in /usr/share/jupyter. */
#define _GNU_SOURCE /* nftw */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <kbox.h>

#include "tap.h"

static char tmp[64]; /* this test's private directory */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rmtree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Point the Jupyter environment at empty directories inside TMP. */
static void env_isolate(void)
{
	char buf[128];
	unsetenv("JUPYTER_PATH");
	unsetenv("XDG_DATA_HOME");
	unsetenv("JUPYTER_PREFER_ENV_PATH");
	unsetenv("JUPYTER_PLATFORM_DIRS");
	snprintf(buf, sizeof buf, "%s/data", tmp);
	setenv("JUPYTER_DATA_DIR", buf, 1);
	snprintf(buf, sizeof buf, "%s/home", tmp);
	setenv("HOME", buf, 1);
}

/* Run test NAME in a fresh TMP with an isolated Jupyter environment. */
#define RUN_IN_TMP(name)                                                  \
	do {                                                              \
		snprintf(tmp, sizeof tmp, "/tmp/kbox-unit-kspec-XXXXXX"); \
		if (!mkdtemp(tmp) || chmod(tmp, 0700) != 0) {             \
			printf("# mkdtemp: %s\n", strerror(errno));       \
			exit(99);                                         \
		}                                                         \
		env_isolate();                                            \
		RUN(name);                                                \
		rmtree(tmp);                                              \
	} while (0)

/* TMP/NAME, in one of a few rotating static buffers. */
static const char *T(const char *name)
{
	static char bufs[8][256];
	static int i;
	char *b = bufs[i++ % 8];
	snprintf(b, sizeof bufs[0], "%s/%s", tmp, name);
	return b;
}

static int mkdir_p(const char *path)
{
	char buf[512];
	size_t i, n = strlen(path);
	if (n >= sizeof buf)
		return -1;
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] == '/' || buf[i] == '\0') {
			char c = buf[i];
			buf[i] = '\0';
			if (mkdir(buf, 0700) != 0 && errno != EEXIST)
				return -1;
			buf[i] = c;
		}
	}
	return 0;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* Create ROOT/kernels/NAME/kernel.json holding JSON; returns the spec dir. */
static const char *make_kernel(const char *root, const char *name, const char *json)
{
	static char dir[512];
	char file[600];
	snprintf(dir, sizeof dir, "%s/kernels/%s", root, name);
	snprintf(file, sizeof file, "%s/kernel.json", dir);
	if (mkdir_p(dir) != 0 || write_text(file, json) != 0) {
		printf("# cannot create %s\n", file);
		exit(99);
	}
	return dir;
}

/* Create the spec directory TMP/spec/NAME with kernel.json JSON, load it. */
static kbox_kspec_t *load_json(const char *name, const char *json, kbox_error_t *err)
{
	return kbox_kspec_load(make_kernel(T("spec"), name, json), err);
}

#define SIMPLE_KERNEL(display)                                                            \
	"{\"argv\": [\"/bin/true\", \"{connection_file}\"], \"display_name\": \"" display \
	"\", \"language\": \"none\"}"

static int strv_len(char **v)
{
	int n = 0;
	while (v && v[n])
		n++;
	return n;
}

/* Index of S in V, or -1. */
static int strv_index(char **v, const char *s)
{
	for (int i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return i;
	return -1;
}

/* ---- kbox_kspec_search_path ---- */

TEST(search_path_starts_with_jupyter_path_entries_in_order)
{
	char env[300];
	char **p;
	snprintf(env, sizeof env, "%s:%s", T("b"), T("a"));
	setenv("JUPYTER_PATH", env, 1);
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	REQUIRE(strv_len(p) >= 2);
	CHECK_STR_EQ(p[0], T("b"));
	CHECK_STR_EQ(p[1], T("a"));
	kbox_strv_free(p);
}

TEST(search_path_user_dir_follows_jupyter_path)
{
	char env[300];
	char **p;
	snprintf(env, sizeof env, "%s:%s", T("a"), T("b"));
	setenv("JUPYTER_PATH", env, 1);
	setenv("JUPYTER_DATA_DIR", T("user"), 1);
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	REQUIRE(strv_len(p) >= 3);
	CHECK_STR_EQ(p[2], T("user"));
	kbox_strv_free(p);
}

TEST(search_path_user_dir_first_without_jupyter_path)
{
	char **p;
	setenv("JUPYTER_DATA_DIR", T("user"), 1);
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	CHECK_STR_EQ(p[0], T("user"));
	kbox_strv_free(p);
}

TEST(search_path_user_dir_falls_back_to_xdg_data_home)
{
	char **p;
	unsetenv("JUPYTER_DATA_DIR");
	setenv("XDG_DATA_HOME", T("xdg"), 1);
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	CHECK_STR_EQ(p[0], T("xdg/jupyter"));
	CHECK_INT_EQ(strv_index(p, T("home/.local/share/jupyter")), -1);
	kbox_strv_free(p);
}

TEST(search_path_user_dir_falls_back_to_home)
{
	char **p;
	unsetenv("JUPYTER_DATA_DIR");
	unsetenv("XDG_DATA_HOME");
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	CHECK_STR_EQ(p[0], T("home/.local/share/jupyter"));
	kbox_strv_free(p);
}

TEST(search_path_empty_jupyter_data_dir_counts_as_unset)
{
	char **p;
	setenv("JUPYTER_DATA_DIR", "", 1);
	setenv("XDG_DATA_HOME", T("xdg"), 1);
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	CHECK_STR_EQ(p[0], T("xdg/jupyter"));
	kbox_strv_free(p);
}

TEST(search_path_ends_with_usr_local_then_usr)
{
	char env[300];
	char **p;
	int n;
	snprintf(env, sizeof env, "%s", T("a"));
	setenv("JUPYTER_PATH", env, 1);
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	n = strv_len(p);
	REQUIRE(n >= 4);
	CHECK_STR_EQ(p[n - 2], "/usr/local/share/jupyter");
	CHECK_STR_EQ(p[n - 1], "/usr/share/jupyter");
	kbox_strv_free(p);
}

TEST(search_path_puts_prefixes_between_user_dir_and_system_dirs)
{
	char prefix_dir[512];
	char **p;
	int i;
	snprintf(prefix_dir, sizeof prefix_dir, "%s/share/jupyter", KBOX_PREFIX);
	if (strcmp(prefix_dir, "/usr/share/jupyter") == 0 ||
	    strcmp(prefix_dir, "/usr/local/share/jupyter") == 0)
		SKIP("the install prefix is a system dir");
	setenv("JUPYTER_PATH", T("a"), 1);
	setenv("JUPYTER_DATA_DIR", T("user"), 1);
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	i = strv_index(p, prefix_dir);
	CHECK(i >= 0);
	CHECK(i > strv_index(p, T("user")));
	CHECK(i <= strv_index(p, "/usr/local/share/jupyter"));
	kbox_strv_free(p);
}

TEST(search_path_drops_duplicates)
{
	char env[600];
	char **p;
	int i, j, n;
	snprintf(env, sizeof env, "%s:%s:%s:%s", T("a"), T("b"), T("a"), T("user"));
	setenv("JUPYTER_PATH", env, 1);
	setenv("JUPYTER_DATA_DIR", T("user"), 1);
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	n = strv_len(p);
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			CHECK(strcmp(p[i], p[j]) != 0);
	CHECK_STR_EQ(p[0], T("a"));
	CHECK_STR_EQ(p[1], T("b"));
	CHECK_STR_EQ(p[2], T("user"));
	kbox_strv_free(p);
}

/* A system dir named in $JUPYTER_PATH keeps JUPYTER_PATH's priority (the
 * first occurrence wins, as in jupyter_core, where it is searched first). */
TEST(search_path_keeps_system_dir_named_in_jupyter_path_first)
{
	char env[300];
	char **p;
	snprintf(env, sizeof env, "/usr/share/jupyter:%s", T("a"));
	setenv("JUPYTER_PATH", env, 1);
	setenv("JUPYTER_DATA_DIR", T("user"), 1);
	p = kbox_kspec_search_path();
	REQUIRE(p != NULL);
	CHECK_STR_EQ(p[0], "/usr/share/jupyter");
	CHECK_STR_EQ(p[1], T("a"));
	CHECK_STR_EQ(p[2], T("user"));
	CHECK_INT_EQ(strv_index(p, "/usr/share/jupyter"), 0);
	kbox_strv_free(p);
}

/* ---- kbox_kspec_find ---- */

TEST(find_prefers_jupyter_path_over_user_dir)
{
	kbox_error_t err = {0};
	kbox_kspec_t *k;
	char want[512];
	setenv("JUPYTER_PATH", T("jp"), 1);
	setenv("JUPYTER_DATA_DIR", T("user"), 1);
	make_kernel(T("user"), "kboxtest", SIMPLE_KERNEL("from user dir"));
	snprintf(want, sizeof want, "%s",
	         make_kernel(T("jp"), "kboxtest", SIMPLE_KERNEL("from JUPYTER_PATH")));
	k = kbox_kspec_find("kboxtest", &err);
	if (!k)
		printf("# %s\n", err.msg);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(kbox_kspec_display_name(k), "from JUPYTER_PATH");
	CHECK_STR_EQ(kbox_kspec_resource_dir(k), want);
	kbox_kspec_destroy(&k);
}

TEST(find_prefers_earlier_jupyter_path_entry)
{
	char env[300];
	kbox_kspec_t *k;
	snprintf(env, sizeof env, "%s:%s", T("first"), T("second"));
	setenv("JUPYTER_PATH", env, 1);
	make_kernel(T("second"), "kboxtest", SIMPLE_KERNEL("second"));
	make_kernel(T("first"), "kboxtest", SIMPLE_KERNEL("first"));
	k = kbox_kspec_find("kboxtest", NULL);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(kbox_kspec_display_name(k), "first");
	kbox_kspec_destroy(&k);
}

TEST(find_uses_user_dir)
{
	kbox_kspec_t *k;
	setenv("JUPYTER_DATA_DIR", T("user"), 1);
	make_kernel(T("user"), "kboxtest-user", SIMPLE_KERNEL("user"));
	k = kbox_kspec_find("kboxtest-user", NULL);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(kbox_kspec_display_name(k), "user");
	kbox_kspec_destroy(&k);
}

TEST(find_ignores_case_of_name)
{
	kbox_error_t err = {0};
	kbox_kspec_t *k;
	char want[512];
	setenv("JUPYTER_PATH", T("jp"), 1);
	snprintf(want, sizeof want, "%s",
	         make_kernel(T("jp"), "kboxtestmykernel", SIMPLE_KERNEL("mine")));
	k = kbox_kspec_find("KboxTestMyKernel", &err);
	if (!k)
		printf("# %s\n", err.msg);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(kbox_kspec_name(k), "kboxtestmykernel");
	CHECK_STR_EQ(kbox_kspec_resource_dir(k), want);
	kbox_kspec_destroy(&k);
}

TEST(find_skips_dir_without_kernel_json)
{
	char dir[512];
	kbox_kspec_t *k;
	char env[300];
	snprintf(env, sizeof env, "%s:%s", T("empty"), T("full"));
	setenv("JUPYTER_PATH", env, 1);
	snprintf(dir, sizeof dir, "%s/kernels/kboxtest", T("empty"));
	REQUIRE(mkdir_p(dir) == 0);
	make_kernel(T("full"), "kboxtest", SIMPLE_KERNEL("full"));
	k = kbox_kspec_find("kboxtest", NULL);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(kbox_kspec_display_name(k), "full");
	kbox_kspec_destroy(&k);
}

/* Expect kbox_kspec_find(NAME) to be refused as invalid. */
static void check_invalid_name(const char *name)
{
	kbox_error_t err = {0};
	kbox_kspec_t *k;
	setenv("JUPYTER_PATH", T("jp"), 1);
	make_kernel(T("jp"), "x", SIMPLE_KERNEL("x"));
	k = kbox_kspec_find(name, &err);
	CHECK(k == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	kbox_kspec_destroy(&k);
}

TEST(find_rejects_dotdot_name)
{
	check_invalid_name("../x");
}

TEST(find_rejects_name_with_slash)
{
	check_invalid_name("a/b");
}

TEST(find_rejects_empty_name)
{
	check_invalid_name("");
}

TEST(find_missing_kernel_is_notfound_naming_it)
{
	kbox_error_t err = {0};
	kbox_kspec_t *k;
	setenv("JUPYTER_PATH", T("jp"), 1);
	k = kbox_kspec_find("kboxtest-nosuch", &err);
	CHECK(k == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_NOTFOUND);
	CHECK_CONTAINS(err.msg, "kboxtest-nosuch");
	kbox_kspec_destroy(&k);
}

/* ---- kbox_kspec_load: kernel.json ---- */

TEST(load_reads_argv)
{
	kbox_kspec_t *k = load_json(
	        "kboxtest", "{\"argv\": [\"/usr/bin/env\", \"-f\", \"{connection_file}\"]}", NULL);
	char *const *argv;
	REQUIRE(k != NULL);
	argv = kbox_kspec_argv(k);
	REQUIRE(argv != NULL);
	CHECK_STR_EQ(argv[0], "/usr/bin/env");
	CHECK_STR_EQ(argv[1], "-f");
	CHECK_STR_EQ(argv[2], "{connection_file}");
	CHECK(argv[2] && argv[3] == NULL);
	kbox_kspec_destroy(&k);
}

TEST(load_reads_display_name_and_language)
{
	kbox_kspec_t *k = load_json("kboxtest", SIMPLE_KERNEL("Test Kernel"), NULL);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(kbox_kspec_display_name(k), "Test Kernel");
	CHECK_STR_EQ(kbox_kspec_language(k), "none");
	kbox_kspec_destroy(&k);
}

TEST(load_names_spec_after_its_directory)
{
	kbox_kspec_t *k = load_json("kboxtest-named", SIMPLE_KERNEL("x"), NULL);
	char want[512];
	REQUIRE(k != NULL);
	snprintf(want, sizeof want, "%s/kernels/kboxtest-named", T("spec"));
	CHECK_STR_EQ(kbox_kspec_name(k), "kboxtest-named");
	CHECK_STR_EQ(kbox_kspec_resource_dir(k), want);
	kbox_kspec_destroy(&k);
}

TEST(load_interrupt_mode_defaults_to_signal)
{
	kbox_kspec_t *k = load_json("kboxtest", SIMPLE_KERNEL("x"), NULL);
	REQUIRE(k != NULL);
	CHECK_INT_EQ(kbox_kspec_interrupt_mode(k), KBOX_INTERRUPT_SIGNAL);
	kbox_kspec_destroy(&k);
}

TEST(load_interrupt_mode_signal)
{
	kbox_kspec_t *k = load_json("kboxtest",
	                            "{\"argv\": [\"k\"], \"interrupt_mode\": \"signal\"}", NULL);
	REQUIRE(k != NULL);
	CHECK_INT_EQ(kbox_kspec_interrupt_mode(k), KBOX_INTERRUPT_SIGNAL);
	kbox_kspec_destroy(&k);
}

TEST(load_interrupt_mode_message)
{
	kbox_kspec_t *k = load_json("kboxtest",
	                            "{\"argv\": [\"k\"], \"interrupt_mode\": \"message\"}", NULL);
	REQUIRE(k != NULL);
	CHECK_INT_EQ(kbox_kspec_interrupt_mode(k), KBOX_INTERRUPT_MESSAGE);
	kbox_kspec_destroy(&k);
}

TEST(load_rejects_unknown_interrupt_mode)
{
	kbox_error_t err = {0};
	kbox_kspec_t *k = load_json("kboxtest",
	                            "{\"argv\": [\"k\"], \"interrupt_mode\": \"telepathy\"}", &err);
	CHECK(k == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, "interrupt_mode");
	kbox_kspec_destroy(&k);
}

TEST(load_reads_env)
{
	kbox_kspec_t *k = load_json(
	        "kboxtest", "{\"argv\": [\"k\"], \"env\": {\"A\": \"1\", \"B\": \"two\"}}", NULL);
	json_t *env;
	REQUIRE(k != NULL);
	env = kbox_kspec_env(k);
	REQUIRE(json_is_object(env));
	CHECK_INT_EQ(json_object_size(env), 2);
	CHECK_STR_EQ(json_string_value(json_object_get(env, "A")), "1");
	CHECK_STR_EQ(json_string_value(json_object_get(env, "B")), "two");
	kbox_kspec_destroy(&k);
}

TEST(load_reads_metadata)
{
	kbox_kspec_t *k = load_json("kboxtest",
	                            "{\"argv\": [\"k\"], "
	                            "\"metadata\": {\"debugger\": true, \"n\": 3}}",
	                            NULL);
	json_t *md;
	REQUIRE(k != NULL);
	md = kbox_kspec_metadata(k);
	REQUIRE(json_is_object(md));
	CHECK(json_is_true(json_object_get(md, "debugger")));
	CHECK_INT_EQ(json_integer_value(json_object_get(md, "n")), 3);
	kbox_kspec_destroy(&k);
}

TEST(load_env_and_metadata_default_to_empty_objects)
{
	kbox_kspec_t *k = load_json("kboxtest", "{\"argv\": [\"k\"]}", NULL);
	REQUIRE(k != NULL);
	CHECK(json_is_object(kbox_kspec_env(k)));
	CHECK_INT_EQ(json_object_size(kbox_kspec_env(k)), 0);
	CHECK(json_is_object(kbox_kspec_metadata(k)));
	CHECK_INT_EQ(json_object_size(kbox_kspec_metadata(k)), 0);
	kbox_kspec_destroy(&k);
}

TEST(load_rejects_malformed_json_naming_file)
{
	kbox_error_t err = {0};
	kbox_kspec_t *k = load_json("kboxtest", "{\"argv\": [\"k\",", &err);
	char file[600];
	snprintf(file, sizeof file, "%s/kernels/kboxtest/kernel.json", T("spec"));
	CHECK(k == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, file);
	kbox_kspec_destroy(&k);
}

/* Expect loading kernel.json JSON to fail as invalid, naming argv. */
static void check_bad_argv(const char *json)
{
	kbox_error_t err = {0};
	kbox_kspec_t *k = load_json("kboxtest", json, &err);
	CHECK(k == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, "argv");
	kbox_kspec_destroy(&k);
}

TEST(load_rejects_missing_argv)
{
	check_bad_argv("{\"display_name\": \"x\"}");
}

TEST(load_rejects_empty_argv)
{
	check_bad_argv("{\"argv\": []}");
}

TEST(load_rejects_argv_with_non_string)
{
	check_bad_argv("{\"argv\": [\"python\", 3]}");
}

TEST(load_rejects_argv_that_is_a_string)
{
	check_bad_argv("{\"argv\": \"python -m ipykernel\"}");
}

TEST(load_missing_kernel_json_fails_naming_it)
{
	kbox_error_t err = {0};
	kbox_kspec_t *k;
	REQUIRE(mkdir_p(T("spec/kboxtest")) == 0);
	k = kbox_kspec_load(T("spec/kboxtest"), &err);
	CHECK(k == NULL);
	CHECK(err.code != KBOX_OK);
	CHECK_CONTAINS(err.msg, "kernel.json");
	kbox_kspec_destroy(&k);
}

/* ---- kbox_kspec_format_argv ---- */

/* Load a spec with argv ARGV_JSON (a JSON array) and format it with
 * connection file CF.  The caller frees the result. */
static char **format(const char *argv_json, const char *cf, kbox_kspec_t **k)
{
	char json[512];
	snprintf(json, sizeof json, "{\"argv\": %s}", argv_json);
	*k = load_json("kboxtest", json, NULL);
	return *k ? kbox_kspec_format_argv(*k, cf, NULL) : NULL;
}

TEST(format_argv_substitutes_connection_file)
{
	kbox_kspec_t *k = NULL;
	char **a = format("[\"k\", \"-f\", \"{connection_file}\"]", T("conn.json"), &k);
	REQUIRE(a != NULL);
	CHECK_INT_EQ(strv_len(a), 3);
	CHECK_STR_EQ(a[0], "k");
	CHECK_STR_EQ(a[1], "-f");
	CHECK_STR_EQ(a[2], T("conn.json"));
	kbox_strv_free(a);
	kbox_kspec_destroy(&k);
}

TEST(format_argv_substitutes_inside_longer_argument)
{
	kbox_kspec_t *k = NULL;
	char **a = format("[\"k\", \"--f={connection_file}\"]", T("conn.json"), &k);
	char want[300];
	REQUIRE(a != NULL);
	snprintf(want, sizeof want, "--f=%s", T("conn.json"));
	CHECK_STR_EQ(a[1], want);
	kbox_strv_free(a);
	kbox_kspec_destroy(&k);
}

TEST(format_argv_substitutes_resource_dir)
{
	kbox_kspec_t *k = NULL;
	char **a = format("[\"{resource_dir}/run.sh\", \"{resource_dir}\"]", T("conn.json"), &k);
	char want[600];
	REQUIRE(a != NULL);
	snprintf(want, sizeof want, "%s/kernels/kboxtest/run.sh", T("spec"));
	CHECK_STR_EQ(a[0], want);
	CHECK_STR_EQ(a[1], kbox_kspec_resource_dir(k));
	kbox_strv_free(a);
	kbox_kspec_destroy(&k);
}

TEST(format_argv_substitutes_prefix_with_system_python_prefix)
{
	kbox_kspec_t *k = NULL;
	char **a = format("[\"{prefix}/bin/python3\"]", T("conn.json"), &k);
	REQUIRE(a != NULL);
	CHECK_STR_EQ(a[0], "/usr/bin/python3");
	kbox_strv_free(a);
	kbox_kspec_destroy(&k);
}

TEST(format_argv_substitutes_every_occurrence)
{
	kbox_kspec_t *k = NULL;
	char **a = format("[\"{connection_file}:{connection_file}\"]", "/c.json", &k);
	REQUIRE(a != NULL);
	CHECK_STR_EQ(a[0], "/c.json:/c.json");
	kbox_strv_free(a);
	kbox_kspec_destroy(&k);
}

TEST(format_argv_leaves_unknown_names_alone)
{
	kbox_kspec_t *k = NULL;
	char **a = format("[\"{unknown}\", \"x{kernel_id}y\", \"{\", \"{}\", \"a{b\"]", "/c.json",
	                  &k);
	REQUIRE(a != NULL);
	REQUIRE(strv_len(a) == 5);
	CHECK_STR_EQ(a[0], "{unknown}");
	CHECK_STR_EQ(a[1], "x{kernel_id}y");
	CHECK_STR_EQ(a[2], "{");
	CHECK_STR_EQ(a[3], "{}");
	CHECK_STR_EQ(a[4], "a{b");
	kbox_strv_free(a);
	kbox_kspec_destroy(&k);
}

TEST(format_argv_leaves_spec_argv_unchanged)
{
	kbox_kspec_t *k = NULL;
	char **a = format("[\"{connection_file}\"]", "/c.json", &k);
	REQUIRE(a != NULL);
	CHECK_STR_EQ(kbox_kspec_argv(k)[0], "{connection_file}");
	kbox_strv_free(a);
	kbox_kspec_destroy(&k);
}

/* ---- kbox_kernel_env ---- */

/* The environment a kernel starts with: the four of kbox's own in order,
 * then the spec's, then the caller's; a later key replaces an earlier
 * one in place. */
TEST(kernel_env_is_kboxs_then_the_specs_then_the_callers)
{
	kbox_kspec_t *k = load_json(
	        "kboxtest", "{\"argv\": [\"k\"], \"env\": {\"A\": \"spec\", \"LANG\": \"C\"}}",
	        NULL);
	const char *extra[] = {"A=caller", "B=2", NULL};
	char **e, pid[48];
	REQUIRE(k != NULL);
	e = kbox_kernel_env(k, extra, "/home/kbox");
	REQUIRE(e != NULL);
	snprintf(pid, sizeof pid, "JPY_PARENT_PID=%ld", (long)getpid());
	REQUIRE(strv_len(e) == 6);
	CHECK_STR_EQ(e[0], "PATH=/usr/local/bin:/usr/bin:/bin");
	CHECK_STR_EQ(e[1], "HOME=/home/kbox");
	CHECK_STR_EQ(e[2], "LANG=C");
	CHECK_STR_EQ(e[3], pid);
	CHECK_STR_EQ(e[4], "A=caller");
	CHECK_STR_EQ(e[5], "B=2");
	kbox_strv_free(e);
	kbox_kspec_destroy(&k);
}

TEST(kernel_env_home_is_the_callers_home_without_one_given)
{
	kbox_kspec_t *k = load_json("kboxtest", "{\"argv\": [\"k\"]}", NULL);
	char **e;
	REQUIRE(k != NULL);
	setenv("HOME", "/tmp/a home", 1);
	e = kbox_kernel_env(k, NULL, NULL);
	REQUIRE(e != NULL);
	CHECK_INT_EQ(strv_len(e), 4);
	CHECK_STR_EQ(e[1], "HOME=/tmp/a home");
	kbox_strv_free(e);
	unsetenv("HOME");
	e = kbox_kernel_env(k, NULL, NULL);
	REQUIRE(e != NULL);
	CHECK_STR_EQ(e[1], "HOME=/");
	kbox_strv_free(e);
	kbox_kspec_destroy(&k);
}

/* ---- kbox_kspec_format_env ---- */

TEST(format_env_gives_key_equals_value)
{
	kbox_kspec_t *k = load_json("kboxtest",
	                            "{\"argv\": [\"k\"], \"env\": {\"PLAIN\": \"v 1\"}}", NULL);
	char **e;
	REQUIRE(k != NULL);
	e = kbox_kspec_format_env(k);
	REQUIRE(e != NULL);
	CHECK_INT_EQ(strv_len(e), 1);
	CHECK_STR_EQ(e[0], "PLAIN=v 1");
	kbox_strv_free(e);
	kbox_kspec_destroy(&k);
}

TEST(format_env_replaces_set_variable)
{
	kbox_kspec_t *k = load_json(
	        "kboxtest", "{\"argv\": [\"k\"], \"env\": {\"P\": \"/opt/x:${KBOX_TEST_SET}\"}}",
	        NULL);
	char **e;
	REQUIRE(k != NULL);
	setenv("KBOX_TEST_SET", "/usr/bin", 1);
	e = kbox_kspec_format_env(k);
	REQUIRE(e != NULL);
	CHECK_INT_EQ(strv_len(e), 1);
	CHECK_STR_EQ(e[0], "P=/opt/x:/usr/bin");
	unsetenv("KBOX_TEST_SET");
	kbox_strv_free(e);
	kbox_kspec_destroy(&k);
}

TEST(format_env_replaces_unset_variable_with_empty)
{
	kbox_kspec_t *k = load_json(
	        "kboxtest",
	        "{\"argv\": [\"k\"], "
	        "\"env\": {\"A\": \"[${KBOX_TEST_UNSET}]\", \"B\": \"${KBOX_TEST_SET}\"}}",
	        NULL);
	char **e;
	REQUIRE(k != NULL);
	unsetenv("KBOX_TEST_UNSET");
	setenv("KBOX_TEST_SET", "yes", 1);
	e = kbox_kspec_format_env(k);
	REQUIRE(e != NULL);
	CHECK_INT_EQ(strv_len(e), 2);
	CHECK(strv_index(e, "A=[]") >= 0);
	CHECK(strv_index(e, "B=yes") >= 0);
	unsetenv("KBOX_TEST_SET");
	kbox_strv_free(e);
	kbox_kspec_destroy(&k);
}

TEST(format_env_of_spec_without_env_is_empty)
{
	kbox_kspec_t *k = load_json("kboxtest", "{\"argv\": [\"k\"]}", NULL);
	char **e;
	REQUIRE(k != NULL);
	e = kbox_kspec_format_env(k);
	REQUIRE(e != NULL);
	CHECK_INT_EQ(strv_len(e), 0);
	kbox_strv_free(e);
	kbox_kspec_destroy(&k);
}

/* ---- kbox_kspec_list ---- */

TEST(list_includes_test_kernels_with_winning_dir)
{
	char env[300], want_a[600], want_b[600];
	char **l;
	snprintf(env, sizeof env, "%s:%s", T("jp1"), T("jp2"));
	setenv("JUPYTER_PATH", env, 1);
	setenv("JUPYTER_DATA_DIR", T("user"), 1);
	make_kernel(T("user"), "kboxtest-a", SIMPLE_KERNEL("a in user"));
	make_kernel(T("jp2"), "kboxtest-a", SIMPLE_KERNEL("a in jp2"));
	snprintf(want_a, sizeof want_a, "kboxtest-a\t%s",
	         make_kernel(T("jp1"), "kboxtest-a", SIMPLE_KERNEL("a in jp1")));
	snprintf(want_b, sizeof want_b, "kboxtest-b\t%s",
	         make_kernel(T("user"), "kboxtest-b", SIMPLE_KERNEL("b in user")));
	l = kbox_kspec_list();
	REQUIRE(l != NULL);
	CHECK(strv_index(l, want_a) >= 0);
	CHECK(strv_index(l, want_b) >= 0);
	for (int i = 0; l[i]; i++)
		if (strncmp(l[i], "kboxtest-a\t", 11) == 0)
			CHECK_STR_EQ(l[i], want_a);
	kbox_strv_free(l);
}

TEST(list_is_sorted_by_name)
{
	char **l;
	setenv("JUPYTER_PATH", T("jp"), 1);
	make_kernel(T("jp"), "kboxtest-c", SIMPLE_KERNEL("c"));
	make_kernel(T("jp"), "kboxtest-a", SIMPLE_KERNEL("a"));
	make_kernel(T("jp"), "kboxtest-b", SIMPLE_KERNEL("b"));
	l = kbox_kspec_list();
	REQUIRE(l != NULL);
	CHECK(strv_len(l) >= 3);
	for (int i = 0; l[i] && l[i + 1]; i++)
		CHECK(strcmp(l[i], l[i + 1]) < 0);
	kbox_strv_free(l);
}

TEST(list_skips_dir_without_kernel_json)
{
	char dir[512];
	char **l;
	setenv("JUPYTER_PATH", T("jp"), 1);
	snprintf(dir, sizeof dir, "%s/kernels/kboxtest-empty", T("jp"));
	REQUIRE(mkdir_p(dir) == 0);
	l = kbox_kspec_list();
	REQUIRE(l != NULL);
	for (int i = 0; l[i]; i++)
		CHECK(strncmp(l[i], "kboxtest-empty", 14) != 0);
	kbox_strv_free(l);
}

/* ---- the real Debian kernelspec ---- */

TEST(debian_python3_kernelspec_is_found)
{
	kbox_error_t err = {0};
	kbox_kspec_t *k;
	struct stat st;

	if (stat("/usr/share/jupyter/kernels/python3/kernel.json", &st) != 0)
		SKIP("no /usr/share/jupyter/kernels/python3 (apt-get install python3-ipykernel)");
	k = kbox_kspec_find("python3", &err);
	if (!k)
		printf("# %s\n", err.msg);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(kbox_kspec_name(k), "python3");
	CHECK_STR_EQ(kbox_kspec_argv(k)[0], "/usr/bin/python3");
	CHECK_STR_EQ(kbox_kspec_language(k), "python");
	CHECK_INT_EQ(kbox_kspec_interrupt_mode(k), KBOX_INTERRUPT_SIGNAL);
	if (stat("/usr/local/share/jupyter/kernels/python3", &st) != 0)
		CHECK_STR_EQ(kbox_kspec_resource_dir(k), "/usr/share/jupyter/kernels/python3");
	kbox_kspec_destroy(&k);
}

int main(void)
{
	RUN_IN_TMP(search_path_starts_with_jupyter_path_entries_in_order);
	RUN_IN_TMP(search_path_user_dir_follows_jupyter_path);
	RUN_IN_TMP(search_path_user_dir_first_without_jupyter_path);
	RUN_IN_TMP(search_path_user_dir_falls_back_to_xdg_data_home);
	RUN_IN_TMP(search_path_user_dir_falls_back_to_home);
	RUN_IN_TMP(search_path_empty_jupyter_data_dir_counts_as_unset);
	RUN_IN_TMP(search_path_ends_with_usr_local_then_usr);
	RUN_IN_TMP(search_path_puts_prefixes_between_user_dir_and_system_dirs);
	RUN_IN_TMP(search_path_drops_duplicates);
	RUN_IN_TMP(search_path_keeps_system_dir_named_in_jupyter_path_first);

	RUN_IN_TMP(find_prefers_jupyter_path_over_user_dir);
	RUN_IN_TMP(find_prefers_earlier_jupyter_path_entry);
	RUN_IN_TMP(find_uses_user_dir);
	RUN_IN_TMP(find_ignores_case_of_name);
	RUN_IN_TMP(find_skips_dir_without_kernel_json);
	RUN_IN_TMP(find_rejects_dotdot_name);
	RUN_IN_TMP(find_rejects_name_with_slash);
	RUN_IN_TMP(find_rejects_empty_name);
	RUN_IN_TMP(find_missing_kernel_is_notfound_naming_it);

	RUN_IN_TMP(load_reads_argv);
	RUN_IN_TMP(load_reads_display_name_and_language);
	RUN_IN_TMP(load_names_spec_after_its_directory);
	RUN_IN_TMP(load_interrupt_mode_defaults_to_signal);
	RUN_IN_TMP(load_interrupt_mode_signal);
	RUN_IN_TMP(load_interrupt_mode_message);
	RUN_IN_TMP(load_rejects_unknown_interrupt_mode);
	RUN_IN_TMP(load_reads_env);
	RUN_IN_TMP(load_reads_metadata);
	RUN_IN_TMP(load_env_and_metadata_default_to_empty_objects);
	RUN_IN_TMP(load_rejects_malformed_json_naming_file);
	RUN_IN_TMP(load_rejects_missing_argv);
	RUN_IN_TMP(load_rejects_empty_argv);
	RUN_IN_TMP(load_rejects_argv_with_non_string);
	RUN_IN_TMP(load_rejects_argv_that_is_a_string);
	RUN_IN_TMP(load_missing_kernel_json_fails_naming_it);

	RUN_IN_TMP(format_argv_substitutes_connection_file);
	RUN_IN_TMP(format_argv_substitutes_inside_longer_argument);
	RUN_IN_TMP(format_argv_substitutes_resource_dir);
	RUN_IN_TMP(format_argv_substitutes_prefix_with_system_python_prefix);
	RUN_IN_TMP(format_argv_substitutes_every_occurrence);
	RUN_IN_TMP(format_argv_leaves_unknown_names_alone);
	RUN_IN_TMP(format_argv_leaves_spec_argv_unchanged);

	RUN_IN_TMP(format_env_gives_key_equals_value);
	RUN_IN_TMP(format_env_replaces_set_variable);
	RUN_IN_TMP(format_env_replaces_unset_variable_with_empty);
	RUN_IN_TMP(format_env_of_spec_without_env_is_empty);
	RUN_IN_TMP(kernel_env_is_kboxs_then_the_specs_then_the_callers);
	RUN_IN_TMP(kernel_env_home_is_the_callers_home_without_one_given);

	RUN_IN_TMP(list_includes_test_kernels_with_winning_dir);
	RUN_IN_TMP(list_is_sorted_by_name);
	RUN_IN_TMP(list_skips_dir_without_kernel_json);

	/* the real kernelspec: the default environment with an empty user dir */
	RUN_IN_TMP(debian_python3_kernelspec_is_found);
	return tap_done();
}
