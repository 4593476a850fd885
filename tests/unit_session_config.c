/* tests/unit_session_config.c — session.json (src/runtime/session_config.c):
 * the defaults, every key read, unknown keys and wrong types refused with
 * their names, what is saved and how (round trip, mode 0600, nothing left
 * beside it), the command line over the file over the defaults, and the
 * files older kbox versions wrote.
 *
 * Each test works in a fresh private directory under /tmp, as a session's
 * directory would be. */
#include "runtime/runtime.h"
#include "runtime/session_config.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "tmpdir.h"

static char *dir;
static kbox_error_t err;

/* Write TEXT as DIR/session.json. */
static void write_config(const char *text)
{
	char path[PATH_MAX];
	FILE *f;
	snprintf(path, sizeof path, "%s/session.json", dir);
	if ((f = fopen(path, "w"))) {
		fputs(text, f);
		fclose(f);
	}
}

/* DIR/session.json as JSON (new reference), or NULL. */
static json_t *read_config(void)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/session.json", dir);
	return json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
}

/* Load DIR/session.json into CFG; the load's return. */
static int load(kr_session_config_t *cfg)
{
	memset(&err, 0, sizeof err);
	return kr_session_config_load(cfg, dir, &err);
}

/* A fresh DIR for the next test. */
static void fresh(void)
{
	test_rm_rf(dir);
	free(dir);
	dir = test_mkdtemp("session-config");
}

/* Every key, as kbox start and kbox run write them. */
static const char every_key[] =
        "{\"name\": \"s1\", \"kernel\": \"ir\", \"backend\": \"none\", \"ttl_ms\": 60000,"
        " \"memory\": 1073741824, \"cpus\": 0.5, \"pids\": 64, \"tmp_size\": 268435456,"
        " \"file_size\": 536870912, \"outputs_quota\": 2097152, \"output_rate\": 50,"
        " \"home_config\": true,"
        " \"rootfs\": \"/srv/root\", \"image\": \"kbox-kernel:v2\", \"engine\": \"unix:///run/docker.sock\","
        " \"env\": [\"A=1\", \"B=two\"], \"workspace\": \"/home/u/p\","
        " \"workspace_dev\": 2049, \"workspace_ino\": 1234567, \"ephemeral\": true,"
        " \"owner_pid\": 4242}\n";

TEST(init_gives_the_defaults_and_no_key_of_its_own)
{
	kr_session_config_t c;
	kr_session_config_init(&c);
	CHECK_INT_EQ(c.has, 0);
	CHECK_STR_EQ(c.kernel, "python3");
	CHECK_STR_EQ(c.kernel, KR_KERNEL_DEFAULT);
	CHECK_STR_EQ(c.backend, KR_BACKEND_DEFAULT);
	CHECK_STR_EQ(c.backend, "bwrap");
	CHECK_INT_EQ(c.ttl_ms, 30 * 60 * 1000);
	CHECK_INT_EQ(c.outputs_quota, 1LL << 30);
	CHECK(c.name == NULL && c.rootfs == NULL && c.workspace == NULL);
	CHECK(c.memory == 0 && c.cpus == 0 && c.pids == 0 && c.tmp_size == 0 && c.file_size == 0);
	CHECK_INT_EQ(c.output_rate, 0);
	CHECK(!c.home_config && !c.ephemeral && c.owner_pid == 0);
	CHECK(c.env == NULL && c.n_env == 0);
	kr_session_config_free(&c);
}

TEST(an_absent_file_loads_as_the_defaults)
{
	kr_session_config_t c;
	fresh();
	REQUIRE(load(&c) == 0);
	CHECK_INT_EQ(c.has, 0);
	CHECK_STR_EQ(c.kernel, KR_KERNEL_DEFAULT);
	CHECK_INT_EQ(c.ttl_ms, KR_SESSION_TTL_MS);
	kr_session_config_free(&c);
}

TEST(load_reads_every_key)
{
	kr_session_config_t c;
	fresh();
	write_config(every_key);
	REQUIRE(load(&c) == 0);
	CHECK_INT_EQ(c.has, (1u << 21) - 1);
	CHECK_STR_EQ(c.name, "s1");
	CHECK_STR_EQ(c.kernel, "ir");
	CHECK_STR_EQ(c.backend, "none");
	CHECK_INT_EQ(c.ttl_ms, 60000);
	CHECK_INT_EQ(c.memory, 1LL << 30);
	CHECK(c.cpus == 0.5);
	CHECK_INT_EQ(c.pids, 64);
	CHECK_INT_EQ(c.tmp_size, 256LL << 20);
	CHECK_INT_EQ(c.file_size, 512LL << 20);
	CHECK_INT_EQ(c.outputs_quota, 2LL << 20);
	CHECK_INT_EQ(c.output_rate, 50);
	CHECK(c.home_config);
	CHECK_STR_EQ(c.rootfs, "/srv/root");
	CHECK_STR_EQ(c.image, "kbox-kernel:v2");
	CHECK_STR_EQ(c.engine, "unix:///run/docker.sock");
	REQUIRE(c.n_env == 2);
	CHECK_STR_EQ(c.env[0], "A=1");
	CHECK_STR_EQ(c.env[1], "B=two");
	CHECK(c.env[2] == NULL);
	CHECK_STR_EQ(c.workspace, "/home/u/p");
	CHECK_INT_EQ(c.workspace_dev, 2049);
	CHECK_INT_EQ(c.workspace_ino, 1234567);
	CHECK(c.ephemeral);
	CHECK_INT_EQ(c.owner_pid, 4242);
	kr_session_config_free(&c);
}

TEST(keys_not_stored_keep_their_defaults)
{
	kr_session_config_t c;
	fresh();
	write_config("{\"name\": \"s\", \"memory\": 2097152}");
	REQUIRE(load(&c) == 0);
	CHECK_INT_EQ(c.has, KR_SC_NAME | KR_SC_MEMORY);
	CHECK_STR_EQ(c.kernel, KR_KERNEL_DEFAULT);
	CHECK_STR_EQ(c.backend, KR_BACKEND_DEFAULT);
	CHECK_INT_EQ(c.ttl_ms, KR_SESSION_TTL_MS);
	CHECK_INT_EQ(c.memory, 2097152);
	kr_session_config_free(&c);
}

TEST(an_unknown_key_is_refused_with_its_name)
{
	kr_session_config_t c;
	fresh();
	write_config("{\"kernel\": \"python3\", \"colour\": \"red\"}");
	CHECK_INT_EQ(load(&c), -1);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, "/session.json: unknown key \"colour\"");
	/* and the configuration is the defaults again */
	CHECK_INT_EQ(c.has, 0);
	CHECK_STR_EQ(c.kernel, KR_KERNEL_DEFAULT);
	kr_session_config_free(&c);
}

TEST(every_unknown_key_is_named)
{
	kr_session_config_t c;
	fresh();
	write_config("{\"Kernel\": \"python3\", \"name\": \"s\", \"ttl\": 5}");
	CHECK_INT_EQ(load(&c), -1);
	CHECK_CONTAINS(err.msg, "unknown keys ");
	CHECK_CONTAINS(err.msg, "\"Kernel\"");
	CHECK_CONTAINS(err.msg, "\"ttl\"");
	kr_session_config_free(&c);
}

TEST(a_wrong_type_is_refused_naming_the_key_and_the_type)
{
	static const struct {
		const char *text, *says;
	} cases[] = {
	        {"{\"memory\": \"2G\"}",
	         "\"memory\" must be an integer of 0 or more, not a string"},
	        {"{\"memory\": -1}",
	         "\"memory\" must be an integer of 0 or more, not a negative integer"},
	        {"{\"kernel\": 3}", "\"kernel\" must be a string, not an integer"},
	        {"{\"cpus\": \"half\"}", "\"cpus\" must be a number of 0 or more, not a string"},
	        {"{\"home_config\": 1}", "\"home_config\" must be true or false, not an integer"},
	        {"{\"ephemeral\": null}", "\"ephemeral\" must be true or false, not null"},
	        {"{\"env\": \"A=1\"}", "\"env\" must be an array of strings, not a string"},
	        {"{\"env\": [\"A=1\", 2]}",
	         "\"env\" must be an array of strings, not an array holding an integer"},
	        {"{\"ttl_ms\": 1.5}",
	         "\"ttl_ms\" must be an integer of 0 or more, not a real number"},
	        {"{\"workspace_ino\": {}}", "\"workspace_ino\" must be an integer, not an object"},
	};
	fresh();
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		kr_session_config_t c;
		write_config(cases[i].text);
		CHECK_INT_EQ(load(&c), -1);
		CHECK_INT_EQ(err.code, KBOX_E_INVALID);
		CHECK_CONTAINS(err.msg, cases[i].says);
		kr_session_config_free(&c);
	}
}

TEST(a_file_that_is_not_an_object_is_refused)
{
	kr_session_config_t c;
	fresh();
	write_config("[\"kernel\"]");
	CHECK_INT_EQ(load(&c), -1);
	CHECK_CONTAINS(err.msg, "/session.json: not a JSON object");
	kr_session_config_free(&c);
	write_config("{\"kernel\": \n\"a\" x");
	CHECK_INT_EQ(load(&c), -1);
	CHECK_CONTAINS(err.msg, "/session.json: line 2, column ");
	kr_session_config_free(&c);
	write_config("{\"kernel\": \"a\", \"kernel\": \"b\"}");
	CHECK_INT_EQ(load(&c), -1);
	CHECK_CONTAINS(err.msg, "duplicate");
	kr_session_config_free(&c);
}

/* DIR/session.json is refused, ERR saying DIR followed by SUFFIX, and
 * the defaults are left. */
static void refused_with(const char *suffix)
{
	kr_session_config_t c;
	char want[PATH_MAX + 256];
	snprintf(want, sizeof want, "%s%s", dir, suffix);
	CHECK_INT_EQ(load(&c), -1);
	CHECK_STR_EQ(err.msg, want);
	CHECK_INT_EQ(c.has, 0);
	kr_session_config_free(&c);
}

/* Write DIR/session.json as "{}" followed by N blanks. */
static void write_padded(size_t n)
{
	char path[PATH_MAX], *text = malloc(n + 3);
	FILE *f;
	if (!text)
		return;
	memcpy(text, "{}", 2);
	memset(text + 2, ' ', n);
	snprintf(path, sizeof path, "%s/session.json", dir);
	if ((f = fopen(path, "w"))) {
		fwrite(text, 1, n + 2, f);
		fclose(f);
	}
	free(text);
}

TEST(a_file_of_more_than_the_bound_is_refused_unread)
{
	kr_session_config_t c;
	fresh();
	write_padded(KR_SESSION_CONFIG_MAX - 2);
	CHECK_INT_EQ(load(&c), 0); /* the bound itself: read */
	kr_session_config_free(&c);
	write_padded(KR_SESSION_CONFIG_MAX - 1);
	refused_with("/session.json is more than the 1048576 bytes a session's configuration "
	             "may have: kbox did not write it");
}

TEST(load_at_reads_the_directory_held_whatever_is_at_its_path)
{
	kr_session_config_t c;
	char moved[PATH_MAX], other[PATH_MAX + 16];
	int fd;
	fresh();
	write_config("{\"kernel\": \"held\"}");
	REQUIRE((fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0);
	/* the directory renamed away, a link to another in its place */
	snprintf(moved, sizeof moved, "%s.moved", dir);
	snprintf(other, sizeof other, "%s/other", moved);
	REQUIRE(rename(dir, moved) == 0);
	REQUIRE(mkdir(other, 0700) == 0);
	REQUIRE(symlink(other, dir) == 0);
	write_config("{\"kernel\": \"linked\"}");
	memset(&err, 0, sizeof err);
	REQUIRE(kr_session_config_load_at(&c, fd, dir, &err) == 0);
	CHECK_STR_EQ(c.kernel, "held");
	kr_session_config_free(&c);
	REQUIRE(load(&c) == 0); /* (by path: the link's) */
	CHECK_STR_EQ(c.kernel, "linked");
	kr_session_config_free(&c);
	close(fd);
	unlink(dir);
	REQUIRE(rename(moved, dir) == 0);
}

TEST(an_unknown_backend_is_refused_naming_those_there_are)
{
	fresh();
	write_config("{\"backend\": \"podman\"}");
	refused_with("/session.json: \"backend\" is \"podman\", which kbox does not know "
	             "(available: bwrap, docker, gateway, none)");
}

/* Each of the N URLS as a session.json's "gateway" is refused, the URL not
 * shown (a user or a query may be a token). */
static void gateway_urls_refused(const char *const *urls, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char text[256];
		fresh();
		snprintf(text, sizeof text, "{\"backend\": \"gateway\", \"gateway\": \"%s\"}",
		         urls[i]);
		write_config(text);
		refused_with(
		        "/session.json: \"gateway\" is no URL kbox takes (http:// or https://, a "
		        "host, a port from 1 to 65535, no user, query or fragment)");
	}
}

TEST(a_gateway_url_with_a_token_in_it_is_refused_without_showing_it)
{
	static const char *const bad[] = {"http://127.0.0.1:1/?token=s3cret",
	                                  "http://user:s3cret@127.0.0.1:1",
	                                  "ftp://h",
	                                  "http://",
	                                  "http://h/a#b",
	                                  "http://h /x"};
	gateway_urls_refused(bad, sizeof bad / sizeof *bad);
	CHECK(kr_gateway_url_valid("http://127.0.0.1:8888"));
	CHECK(kr_gateway_url_valid("https://eg.example.org/base/path"));
}

TEST(a_gateway_urls_port_is_a_number_from_1_to_65535)
{
	static const char *const bad[] = {
	        "http://127.0.0.1:99999", "http://127.0.0.1:0",  "http://127.0.0.1:http",
	        "http://127.0.0.1:",      "http://127.0.0.1:-1", "http://127.0.0.1:000080",
	        "http://:8888",           "http://[::1",         "http://[]:1",
	        "http://[::1]x:1"};
	gateway_urls_refused(bad, sizeof bad / sizeof *bad);
	CHECK(kr_gateway_url_valid("http://127.0.0.1:65535/x"));
	CHECK(kr_gateway_url_valid("http://127.0.0.1:1"));
	CHECK(kr_gateway_url_valid("http://h:8888/a:b"));
	CHECK(kr_gateway_url_valid("http://[::1]:8888/"));
	CHECK(kr_gateway_url_valid("http://[::1]"));
}

TEST(image_references_are_those_an_engine_takes)
{
	static const char *const good[] = {
	        "kbox-kernel",
	        "kbox-kernel:v2",
	        "library/python:3.11-slim",
	        "localhost:5000/a/b:1.0",
	        "registry.example.com/a__b/c-d",
	        "a.b/c",
	        "a:1/b",
	        "127.0.0.1:65535/kbox",
	        "my-registry.io:443/x",
	        "x@sha256:0000000000000000000000000000000000000000000000000000000000000000",
	        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"};
	static const char *const bad[] = {
	        "", "Kbox-Kernel", "../../etc", "kbox-kernel:", ":latest", "x@sha256:abc", "a::b",
	        "a\nb", "-rm", "a b", "a/", "/a", "a//b", "a-", "sha256:12",
	        /* registries the grammar has no room for */
	        "../containers/x", "./x", ".a/x", "a./x", "a..b/x", "-a.b/x", "a-.b/x", "a.-b/x",
	        "1.2.3.4:99999/a", "a.b:0/x", "a.b:/x", "a.b:123456/x"};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++)
		CHECK(kr_image_ref_valid(good[i]));
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		CHECK(!kr_image_ref_valid(bad[i]));
	CHECK(!kr_image_ref_valid(NULL));
	CHECK(kr_engine_socket_valid("unix:///var/run/docker.sock"));
	CHECK(kr_engine_socket_valid("/run/podman/podman.sock"));
	CHECK(!kr_engine_socket_valid("tcp://127.0.0.1:2375"));
	CHECK(!kr_engine_socket_valid("unix://var/run/docker.sock"));
	CHECK(!kr_engine_socket_valid("/a\nb"));
}

TEST(an_image_or_engine_the_command_line_refuses_is_refused_naming_the_key)
{
	fresh();
	write_config("{\"backend\": \"docker\", \"image\": \"bad image\"}");
	refused_with("/session.json: \"image\" is \"bad image\", which is no image reference "
	             "(NAME, NAME:TAG, NAME@sha256:DIGEST or sha256:ID)");
	write_config("{\"backend\": \"docker\", \"engine\": \"tcp://x:1\"}");
	refused_with("/session.json: \"engine\" is \"tcp://x:1\", which is no unix socket's "
	             "absolute path of at most 107 bytes (unix:///PATH)");
}

TEST(strings_of_the_file_in_a_message_are_escaped_and_cut)
{
	/* (review 20, W20-1: a value's newline began a line of its own in
	 * kbox's output, where it could pose as one of kbox's) */
	kr_session_config_t c;
	char *text;
	fresh();
	write_config("{\"backend\": \"x\\n[note: forged]\"}");
	refused_with("/session.json: \"backend\" is \"x\\n[note: forged]\", which kbox does not "
	             "know (available: bwrap, docker, gateway, none)");
	write_config("{\"env\": [\"X\\n[stderr]\\u001b[31m\"]}");
	refused_with("/session.json: \"env\" holds \"X\\n[stderr]\\x1b[31m\", which is not "
	             "NAME=VALUE");
	write_config("{\"a\\r\\nb\": 1}");
	refused_with("/session.json: unknown key \"a\\r\\nb\"");
	/* a long one: its first 200 bytes, and "…" */
	REQUIRE((text = malloc(300)) != NULL);
	snprintf(text, 300, "{\"backend\": \"%0250d\"}", 0);
	write_config(text);
	free(text);
	CHECK_INT_EQ(load(&c), -1);
	CHECK_CONTAINS(err.msg, "\"backend\" is \"0000");
	CHECK_CONTAINS(err.msg, "0000\xe2\x80\xa6\", which kbox does not know");
	CHECK(strstr(err.msg, "\"backend\" is \"") &&
	      strstr(err.msg, "\xe2\x80\xa6") - strstr(err.msg, "\"backend\" is \"") == 200 + 14);
	kr_session_config_free(&c);
}

TEST(values_the_command_line_refuses_are_refused_naming_the_key)
{
	static const struct {
		const char *text, *said;
	} bad[] = {
	        {"{\"memory\": 1}", "\"memory\" is 1, out of the range the command line takes "
	                            "(1048576 to 9223372036854775807; 0 for the default)"},
	        {"{\"tmp_size\": 5}", "\"tmp_size\" is 5, out of the range"},
	        {"{\"pids\": 4194305}", "\"pids\" is 4194305, out of the range the command line "
	                                "takes (1 to 4194304; 0 for the default)"},
	        {"{\"ttl_ms\": 99999999999999999}", "\"ttl_ms\" is 99999999999999999, out of"},
	        {"{\"cpus\": 2048}", "\"cpus\" is 2048, out of the range the command line takes "
	                             "(0.01 to 1024; 0 for the default)"},
	        {"{\"cpus\": 0.001}", "\"cpus\" is 0.001, out of the range"},
	        {"{\"memory\": -5}", "\"memory\" must be an integer of 0 or more, not a negative "
	                             "integer"},
	        {"{\"cpus\": -0.5}",
	         "\"cpus\" must be a number of 0 or more, not a negative number"},
	        {"{\"env\": [\"X\"]}", "\"env\" holds \"X\", which is not NAME=VALUE"},
	        {"{\"env\": [\"=x\"]}", "\"env\" holds \"=x\", which is not NAME=VALUE"},
	};
	kr_session_config_t c;
	fresh();
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		write_config(bad[i].text);
		CHECK_INT_EQ(load(&c), -1);
		CHECK_CONTAINS(err.msg, "/session.json: ");
		CHECK_CONTAINS(err.msg, bad[i].said);
		kr_session_config_free(&c);
	}
	/* 0 is the default of each, as kbox always wrote it */
	write_config("{\"memory\": 0, \"pids\": 0, \"tmp_size\": 0, \"cpus\": 0, \"ttl_ms\": 0}");
	CHECK_INT_EQ(load(&c), 0);
	kr_session_config_free(&c);
}

TEST(reseal_of_no_file_is_refused_and_writes_none)
{
	kr_session_config_t c;
	char want[PATH_MAX + 200], path[PATH_MAX + 16];
	fresh();
	memset(&err, 0, sizeof err);
	CHECK_INT_EQ(kr_session_config_reseal(dir, &c, &err), -1);
	snprintf(want, sizeof want,
	         "%s/session.json is not there: nothing to seal; remove the session (kbox rm -s "
	         "%s) and make it again",
	         dir, strrchr(dir, '/') + 1);
	CHECK_STR_EQ(err.msg, want);
	snprintf(path, sizeof path, "%s/session.json", dir);
	CHECK(access(path, F_OK) < 0);
	kr_session_config_free(&c);
}

TEST(save_then_load_gives_every_key_back)
{
	kr_session_config_t c, d;
	json_t *want = json_loads(every_key, 0, NULL), *got;
	fresh();
	write_config(every_key);
	REQUIRE(load(&c) == 0);
	REQUIRE(kr_session_config_save(&c, dir, &err) == 0);
	got = read_config();
	CHECK(got && want && json_equal(got, want));
	REQUIRE(load(&d) == 0);
	CHECK_INT_EQ(d.has, c.has);
	CHECK_STR_EQ(d.name, c.name);
	CHECK_STR_EQ(d.kernel, c.kernel);
	CHECK(d.cpus == c.cpus);
	CHECK_INT_EQ(d.workspace_ino, c.workspace_ino);
	REQUIRE(d.n_env == 2);
	CHECK_STR_EQ(d.env[1], "B=two");
	json_decref(want);
	json_decref(got);
	kr_session_config_free(&c);
	kr_session_config_free(&d);
}

TEST(save_writes_the_sessions_own_keys_and_always_kernel_and_backend)
{
	kr_session_config_t c;
	kr_session_opts_t o = KR_SESSION_OPTS_INIT;
	json_t *got, *want = json_pack("{s:s, s:s, s:s}", "name", "s", "kernel", "python3",
	                               "backend", "bwrap");
	fresh();
	o.name = "s";
	kr_session_config_init(&c);
	REQUIRE(kr_session_config_merge(&c, &o, &err) == 0);
	REQUIRE(kr_session_config_save(&c, dir, &err) == 0);
	got = read_config();
	CHECK(got && json_equal(got, want));
	json_decref(got);
	json_decref(want);
	kr_session_config_free(&c);
}

TEST(save_makes_a_file_of_mode_0600_and_leaves_nothing_beside_it)
{
	kr_session_config_t c;
	char path[PATH_MAX];
	struct stat st;
	DIR *d;
	struct dirent *e;
	int others = 0;
	mode_t old = umask(0);
	fresh();
	kr_session_config_init(&c);
	CHECK(kr_session_config_save(&c, dir, &err) == 0);
	/* saved again over the first: replaced whole, still private */
	CHECK(kr_session_config_save(&c, dir, &err) == 0);
	umask(old);
	snprintf(path, sizeof path, "%s/session.json", dir);
	REQUIRE(lstat(path, &st) == 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_INT_EQ(st.st_mode & 07777, 0600);
	REQUIRE((d = opendir(dir)));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    strcmp(e->d_name, "session.json"))
			others++;
	closedir(d);
	CHECK_INT_EQ(others, 0);
	kr_session_config_free(&c);
}

TEST(save_into_a_directory_that_is_gone_fails_and_says_where)
{
	kr_session_config_t c;
	char gone[PATH_MAX];
	fresh();
	snprintf(gone, sizeof gone, "%s/gone", dir);
	kr_session_config_init(&c);
	CHECK_INT_EQ(kr_session_config_save(&c, gone, &err), -1);
	CHECK_CONTAINS(err.msg, gone);
	kr_session_config_free(&c);
}

TEST(the_command_line_wins_over_the_file_which_wins_over_the_defaults)
{
	kr_session_config_t c;
	kr_session_opts_t o = KR_SESSION_OPTS_INIT;
	const char *env[] = {"C=3"};
	fresh();
	write_config("{\"name\": \"s\", \"kernel\": \"k-file\", \"memory\": 1048576, \"pids\": 100,"
	             " \"env\": [\"A=1\", \"B=2\"], \"home_config\": true}");
	REQUIRE(load(&c) == 0);
	o.kernel = "k-line";
	o.memory = 2097152;
	o.home_config = 0;
	o.env = env;
	o.n_env = 1;
	REQUIRE(kr_session_config_merge(&c, &o, &err) == 0);
	CHECK_STR_EQ(c.kernel, "k-line");          /* command line */
	CHECK_INT_EQ(c.memory, 2097152);           /* command line */
	CHECK(!c.home_config);                     /* command line, false over true */
	CHECK_INT_EQ(c.pids, 100);                 /* file */
	CHECK_STR_EQ(c.name, "s");                 /* file */
	CHECK_STR_EQ(c.backend, "bwrap");          /* default */
	CHECK_INT_EQ(c.ttl_ms, KR_SESSION_TTL_MS); /* default */
	REQUIRE(c.n_env == 1);                     /* the command line's replaces the file's */
	CHECK_STR_EQ(c.env[0], "C=3");
	CHECK(c.env[1] == NULL);
	CHECK((c.has & KR_SC_KERNEL) && (c.has & KR_SC_PIDS) && !(c.has & KR_SC_TTL_MS));
	kr_session_config_free(&c);
}

TEST(merge_of_nothing_changes_nothing)
{
	kr_session_config_t c;
	kr_session_opts_t o = KR_SESSION_OPTS_INIT;
	fresh();
	write_config(every_key);
	REQUIRE(load(&c) == 0);
	CHECK(kr_session_opts_empty(&o));
	REQUIRE(kr_session_config_merge(&c, &o, &err) == 0);
	CHECK_INT_EQ(c.has, (1u << 21) - 1);
	CHECK_STR_EQ(c.kernel, "ir");
	CHECK_INT_EQ(c.n_env, 2);
	o.ttl_ms = 0;
	CHECK(!kr_session_opts_empty(&o));
	kr_session_config_free(&c);
}

TEST(merge_of_a_string_the_config_holds_itself_keeps_it)
{
	kr_session_config_t c;
	kr_session_opts_t o = KR_SESSION_OPTS_INIT;
	fresh();
	write_config("{\"kernel\": \"mine\"}");
	REQUIRE(load(&c) == 0);
	o.kernel = c.kernel;
	o.backend = c.backend; /* the default: a static string */
	REQUIRE(kr_session_config_merge(&c, &o, &err) == 0);
	CHECK_STR_EQ(c.kernel, "mine");
	CHECK_STR_EQ(c.backend, KR_BACKEND_DEFAULT);
	CHECK(c.has & KR_SC_BACKEND);
	kr_session_config_free(&c);
}

TEST(a_workspace_given_stores_its_identity)
{
	kr_session_config_t c;
	kr_session_opts_t o = KR_SESSION_OPTS_INIT;
	struct stat st;
	json_t *got;
	fresh();
	REQUIRE(stat(dir, &st) == 0);
	o.workspace = dir;
	o.workspace_st = &st;
	o.ephemeral = 1;
	o.owner_pid = 77;
	o.ttl_ms = 0;
	kr_session_config_init(&c);
	REQUIRE(kr_session_config_merge(&c, &o, &err) == 0);
	REQUIRE(kr_session_config_save(&c, dir, &err) == 0);
	got = read_config();
	CHECK_STR_EQ(json_string_value(json_object_get(got, "workspace")), dir);
	CHECK_INT_EQ(json_integer_value(json_object_get(got, "workspace_dev")), st.st_dev);
	CHECK_INT_EQ(json_integer_value(json_object_get(got, "workspace_ino")), st.st_ino);
	CHECK(json_is_true(json_object_get(got, "ephemeral")));
	CHECK_INT_EQ(json_integer_value(json_object_get(got, "owner_pid")), 77);
	CHECK(json_is_integer(json_object_get(got, "ttl_ms")));
	CHECK_INT_EQ(json_integer_value(json_object_get(got, "ttl_ms")), 0);
	json_decref(got);
	kr_session_config_free(&c);
}

TEST(a_workspace_given_without_its_identity_drops_the_files)
{
	kr_session_config_t c;
	kr_session_opts_t o = KR_SESSION_OPTS_INIT;
	fresh();
	write_config("{\"workspace\": \"/a\", \"workspace_dev\": 1, \"workspace_ino\": 2}");
	REQUIRE(load(&c) == 0);
	o.workspace = "/b";
	REQUIRE(kr_session_config_merge(&c, &o, &err) == 0);
	CHECK_STR_EQ(c.workspace, "/b");
	CHECK(!(c.has & (KR_SC_WORKSPACE_DEV | KR_SC_WORKSPACE_INO)));
	kr_session_config_free(&c);
}

/* The files kbox start, kbox exec and kbox run wrote before this module,
 * byte for byte as json_dumps(JSON_INDENT(2) | JSON_SORT_KEYS) made them:
 * a session left in a state directory must still start. */
TEST(files_older_kbox_versions_wrote_still_load)
{
	static const char *const old[] = {
	        /* kbox exec's new session */
	        "{\n  \"backend\": \"bwrap\",\n  \"kernel\": \"python3\",\n  \"name\": \"default\"\n}\n",
	        /* kbox start with every option */
	        "{\n  \"backend\": \"bwrap\",\n  \"cpus\": 0.5,\n  \"env\": [\n    \"A=1\"\n  ],\n"
	        "  \"file_size\": 4294967296,\n  \"home_config\": false,\n  \"kernel\": \"python3\",\n"
	        "  \"memory\": 536870912,\n  \"name\": \"w\",\n  \"outputs_quota\": 1048576,\n"
	        "  \"pids\": 64,\n  \"rootfs\": \"/srv/r\",\n  \"tmp_size\": 1048576,\n"
	        "  \"ttl_ms\": 0\n}\n",
	        /* kbox run --workspace */
	        "{\n  \"backend\": \"none\",\n  \"ephemeral\": true,\n  \"kernel\": \"python3\",\n"
	        "  \"name\": \"run\",\n  \"owner_pid\": 1234,\n  \"ttl_ms\": 0,\n"
	        "  \"workspace\": \"/tmp/p\",\n  \"workspace_dev\": 64768,\n"
	        "  \"workspace_ino\": 9123\n}\n",
	        /* an early kbox run (the working directory as its workspace) */
	        "{\n  \"backend\": \"none\",\n  \"ephemeral\": true,\n  \"kernel\": \"python3\",\n"
	        "  \"name\": \"run\",\n  \"owner_pid\": 1234,\n  \"ttl_ms\": 0,\n"
	        "  \"workspace\": \"/tmp/p\"\n}\n",
	};
	fresh();
	for (size_t i = 0; i < sizeof old / sizeof *old; i++) {
		kr_session_config_t c;
		int rc;
		write_config(old[i]);
		if ((rc = load(&c)) < 0)
			printf("# file %zu: %s\n", i, err.msg);
		CHECK_INT_EQ(rc, 0);
		kr_session_config_free(&c);
	}
}

TEST(a_stored_quota_of_0_is_the_default)
{
	kr_session_config_t c;
	fresh();
	write_config("{\"outputs_quota\": 0}");
	REQUIRE(load(&c) == 0);
	CHECK_INT_EQ(c.outputs_quota, KR_OUTPUTS_QUOTA);
	CHECK(!(c.has & KR_SC_OUTPUTS_QUOTA));
	kr_session_config_free(&c);
}

int main(void)
{
	RUN(init_gives_the_defaults_and_no_key_of_its_own);
	RUN(an_absent_file_loads_as_the_defaults);
	RUN(load_reads_every_key);
	RUN(keys_not_stored_keep_their_defaults);
	RUN(an_unknown_key_is_refused_with_its_name);
	RUN(every_unknown_key_is_named);
	RUN(a_wrong_type_is_refused_naming_the_key_and_the_type);
	RUN(a_file_that_is_not_an_object_is_refused);
	RUN(a_file_of_more_than_the_bound_is_refused_unread);
	RUN(load_at_reads_the_directory_held_whatever_is_at_its_path);
	RUN(an_unknown_backend_is_refused_naming_those_there_are);
	RUN(a_gateway_url_with_a_token_in_it_is_refused_without_showing_it);
	RUN(a_gateway_urls_port_is_a_number_from_1_to_65535);
	RUN(image_references_are_those_an_engine_takes);
	RUN(an_image_or_engine_the_command_line_refuses_is_refused_naming_the_key);
	RUN(strings_of_the_file_in_a_message_are_escaped_and_cut);
	RUN(values_the_command_line_refuses_are_refused_naming_the_key);
	RUN(reseal_of_no_file_is_refused_and_writes_none);
	RUN(save_then_load_gives_every_key_back);
	RUN(save_writes_the_sessions_own_keys_and_always_kernel_and_backend);
	RUN(save_makes_a_file_of_mode_0600_and_leaves_nothing_beside_it);
	RUN(save_into_a_directory_that_is_gone_fails_and_says_where);
	RUN(the_command_line_wins_over_the_file_which_wins_over_the_defaults);
	RUN(merge_of_nothing_changes_nothing);
	RUN(merge_of_a_string_the_config_holds_itself_keeps_it);
	RUN(a_workspace_given_stores_its_identity);
	RUN(a_workspace_given_without_its_identity_drops_the_files);
	RUN(files_older_kbox_versions_wrote_still_load);
	RUN(a_stored_quota_of_0_is_the_default);
	test_rm_rf(dir);
	free(dir);
	return tap_done();
}
