/* tests/unit_conn.c — connection files: new keys and endpoints, safe saving,
 * strict loading, and files written by Debian's jupyter_client.
 *
 * Every test runs in a fresh mode-0700 directory under /tmp (TMP), removed
 * afterwards.
 *
 * The fixtures tests/data/conn/jupyter-*.json were written by
 * jupyter_client 7.4.9 (Debian 12) with:
 *
 *   cd tests/data/conn && /usr/bin/python3 -c "
 *   from jupyter_client.connect import write_connection_file as w
 *   w('jupyter-tcp.json', shell_port=50101, iopub_port=50102, stdin_port=50103,
 *     control_port=50104, hb_port=50105, ip='127.0.0.1',
 *     key=b'a0436f6c-1916-498b-8eb9-e81ab9368e84', transport='tcp',
 *     signature_scheme='hmac-sha256', kernel_name='python3')
 *   w('jupyter-ipc.json', shell_port=1, iopub_port=2, stdin_port=3,
 *     control_port=4, hb_port=5, ip='/run/kbox-test/kernel-ipc',
 *     key=b'5f2b1c8e-7d04-4e4a-9c3b-2a6f0d9e1b77', transport='ipc',
 *     signature_scheme='hmac-sha256', kernel_name='')
 *   "
 *   # and, in an empty directory so that jupyter_client picks ports 1..5:
 *   /usr/bin/python3 -c "
 *   from jupyter_client.connect import write_connection_file as w
 *   w('jupyter-ipc-relative.json', ip='kernel-ipc',
 *     key=b'0f9e3d52-6a1b-4c7e-8d2f-b3a4c5d6e7f8', transport='ipc')
 *   "
 */
#define _GNU_SOURCE /* nftw */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <limits.h>
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

/* Run test NAME with TMP set to a fresh 0700 directory, removed afterwards. */
#define RUN_IN_TMP(name)                                                 \
	do {                                                             \
		snprintf(tmp, sizeof tmp, "/tmp/kbox-unit-conn-XXXXXX"); \
		if (!mkdtemp(tmp) || chmod(tmp, 0700) != 0) {            \
			printf("# mkdtemp: %s\n", strerror(errno));      \
			exit(99);                                        \
		}                                                        \
		RUN(name);                                               \
		rmtree(tmp);                                             \
	} while (0)

/* TMP/NAME in BUF. */
static const char *in_tmp(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", tmp, name);
	return buf;
}

/* The fixture tests/data/conn/NAME, found via $top_srcdir (set by `make
 * check`) or else next to this source file. */
static const char *fixture(char *buf, size_t size, const char *name)
{
	const char *top = getenv("top_srcdir");
	if (top && *top) {
		snprintf(buf, size, "%s/tests/data/conn/%s", top, name);
	} else {
		const char *file = __FILE__;
		const char *slash = strrchr(file, '/');
		int dirlen = slash ? (int)(slash - file) : 1;
		snprintf(buf, size, "%.*s/data/conn/%s", dirlen, slash ? file : ".", name);
	}
	return buf;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* The whole content of PATH (static buffer), or NULL. */
static const char *read_text(const char *path)
{
	static char buf[8192];
	size_t n;
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Write TMP/conn.json: a valid connection file except for the fields given.
 * Each argument is the raw JSON value of that field, or NULL to omit it. */
static const char *write_conn(const char *shell_port, const char *key, const char *transport,
                              const char *scheme)
{
	static char path[128];
	char text[1024];
	char shell[64] = "", k[128] = "", t[64] = "", s[64] = "";

	if (shell_port)
		snprintf(shell, sizeof shell, "\"shell_port\": %s,\n", shell_port);
	if (key)
		snprintf(k, sizeof k, "\"key\": %s,\n", key);
	if (transport)
		snprintf(t, sizeof t, "\"transport\": %s,\n", transport);
	if (scheme)
		snprintf(s, sizeof s, "\"signature_scheme\": %s,\n", scheme);
	snprintf(text, sizeof text,
	         "{\n%s\"iopub_port\": 40002,\n\"stdin_port\": 40003,\n"
	         "\"control_port\": 40004,\n\"hb_port\": 40005,\n\"ip\": \"127.0.0.1\",\n"
	         "%s%s%s\"kernel_name\": \"python3\"\n}\n",
	         shell, k, t, s);
	in_tmp(path, sizeof path, "conn.json");
	if (write_text(path, text) != 0) {
		printf("# cannot write %s\n", path);
		exit(99);
	}
	return path;
}

#define VALID_PORT "40001"
#define VALID_KEY "\"0123456789abcdef\""
#define VALID_TRANSPORT "\"tcp\""
#define VALID_SCHEME "\"hmac-sha256\""

static int is_hex_key(const unsigned char *key, size_t len)
{
	size_t i;
	if (len != 2 * KBOX_KEY_BYTES)
		return 0;
	for (i = 0; i < len; i++)
		if (!strchr("0123456789abcdefABCDEF", key[i]) || key[i] == '\0')
			return 0;
	return 1;
}

static int ports_distinct(const kbox_conn_t *c)
{
	int i, j;
	for (i = 0; i < KBOX_CH_COUNT; i++)
		for (j = i + 1; j < KBOX_CH_COUNT; j++)
			if (kbox_conn_port(c, (kbox_channel_t)i) ==
			    kbox_conn_port(c, (kbox_channel_t)j))
				return 0;
	return 1;
}

/* ---- channels ---- */

TEST(channel_names_are_jupyter_names)
{
	CHECK_STR_EQ(kbox_channel_name(KBOX_CH_SHELL), "shell");
	CHECK_STR_EQ(kbox_channel_name(KBOX_CH_IOPUB), "iopub");
	CHECK_STR_EQ(kbox_channel_name(KBOX_CH_STDIN), "stdin");
	CHECK_STR_EQ(kbox_channel_name(KBOX_CH_CONTROL), "control");
	CHECK_STR_EQ(kbox_channel_name(KBOX_CH_HB), "hb");
}

/* ---- kbox_conn_new_ipc ---- */

TEST(new_ipc_key_is_64_hex_chars)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_ipc(tmp, &err);
	const unsigned char *key;
	size_t len = 0;

	REQUIRE(c != NULL);
	key = kbox_conn_key(c, &len);
	CHECK_INT_EQ(len, 64);
	CHECK(is_hex_key(key, len));
	kbox_conn_destroy(&c);
}

TEST(new_ipc_two_connections_get_different_keys)
{
	kbox_conn_t *a = kbox_conn_new_ipc(tmp, NULL);
	kbox_conn_t *b = kbox_conn_new_ipc(tmp, NULL);
	size_t alen = 0, blen = 0;
	const unsigned char *akey, *bkey;

	REQUIRE(a != NULL && b != NULL);
	akey = kbox_conn_key(a, &alen);
	bkey = kbox_conn_key(b, &blen);
	REQUIRE(alen == blen);
	CHECK(memcmp(akey, bkey, alen) != 0);
	kbox_conn_destroy(&a);
	kbox_conn_destroy(&b);
}

TEST(new_ipc_transport_is_ipc)
{
	kbox_conn_t *c = kbox_conn_new_ipc(tmp, NULL);
	REQUIRE(c != NULL);
	CHECK_INT_EQ(kbox_conn_transport(c), KBOX_TRANSPORT_IPC);
	CHECK_STR_EQ(kbox_conn_scheme(c), "hmac-sha256");
	kbox_conn_destroy(&c);
}

/* "DIR/kernel-" + 8 lowercase hex digits + "-ipc", DIR absolute. */
static int is_tagged_prefix(const char *ip, const char *dir)
{
	char real[PATH_MAX];
	size_t n;
	if (!realpath(dir, real))
		return 0;
	n = strlen(real);
	if (strncmp(ip, real, n) != 0 || strncmp(ip + n, "/kernel-", 8) != 0)
		return 0;
	for (int i = 0; i < 8; i++) {
		char c = ip[n + 8 + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return strcmp(ip + n + 16, "-ipc") == 0;
}

TEST(new_ipc_endpoints_are_dir_kernel_tag_ipc_port)
{
	kbox_conn_t *c = kbox_conn_new_ipc(tmp, NULL);
	char want[PATH_MAX + 32];
	int ch;

	REQUIRE(c != NULL);
	CHECK(is_tagged_prefix(kbox_conn_ip(c), tmp));
	for (ch = 0; ch < KBOX_CH_COUNT; ch++) {
		int port = kbox_conn_port(c, (kbox_channel_t)ch);
		CHECK_INT_EQ(port, ch + 1);
		snprintf(want, sizeof want, "ipc://%s-%d", kbox_conn_ip(c), port);
		CHECK_STR_EQ(kbox_conn_endpoint(c, (kbox_channel_t)ch), want);
	}
	CHECK(ports_distinct(c));
	kbox_conn_destroy(&c);
}

TEST(two_ipc_connections_in_one_dir_never_share_sockets)
{
	kbox_conn_t *a = kbox_conn_new_ipc(tmp, NULL), *b = kbox_conn_new_ipc(tmp, NULL);
	REQUIRE(a != NULL && b != NULL);
	CHECK(strcmp(kbox_conn_ip(a), kbox_conn_ip(b)) != 0);
	for (int i = 0; i < KBOX_CH_COUNT; i++)
		for (int j = 0; j < KBOX_CH_COUNT; j++)
			CHECK(strcmp(kbox_conn_endpoint(a, (kbox_channel_t)i),
			             kbox_conn_endpoint(b, (kbox_channel_t)j)) != 0);
	kbox_conn_destroy(&a);
	kbox_conn_destroy(&b);
}

TEST(new_ipc_with_relative_dir_gives_absolute_paths)
{
	char old[PATH_MAX];
	kbox_conn_t *c;
	REQUIRE(getcwd(old, sizeof old) != NULL);
	REQUIRE(chdir(tmp) == 0);
	c = kbox_conn_new_ipc(".", NULL);
	CHECK(chdir(old) == 0);
	REQUIRE(c != NULL);
	CHECK(kbox_conn_ip(c)[0] == '/');
	CHECK(is_tagged_prefix(kbox_conn_ip(c), tmp));
	kbox_conn_destroy(&c);
}

TEST(new_ipc_fails_when_dir_is_missing)
{
	kbox_error_t err = {0};
	char dir[128];
	kbox_conn_t *c = kbox_conn_new_ipc(in_tmp(dir, sizeof dir, "no-such-dir"), &err);
	CHECK(c == NULL);
	CHECK(err.code != KBOX_OK);
	CHECK_CONTAINS(err.msg, dir);
	kbox_conn_destroy(&c);
}

/* ---- kbox_conn_new_tcp ---- */

TEST(new_tcp_uses_loopback_ip)
{
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	REQUIRE(c != NULL);
	CHECK_INT_EQ(kbox_conn_transport(c), KBOX_TRANSPORT_TCP);
	CHECK_STR_EQ(kbox_conn_ip(c), "127.0.0.1");
	kbox_conn_destroy(&c);
}

TEST(new_tcp_has_five_distinct_ports_in_range)
{
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	int ch;

	REQUIRE(c != NULL);
	for (ch = 0; ch < KBOX_CH_COUNT; ch++) {
		int port = kbox_conn_port(c, (kbox_channel_t)ch);
		CHECK(port >= 1 && port <= 65535);
	}
	CHECK(ports_distinct(c));
	kbox_conn_destroy(&c);
}

TEST(new_tcp_endpoints_are_tcp_loopback_port)
{
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char want[64];
	int ch;

	REQUIRE(c != NULL);
	for (ch = 0; ch < KBOX_CH_COUNT; ch++) {
		snprintf(want, sizeof want, "tcp://127.0.0.1:%d",
		         kbox_conn_port(c, (kbox_channel_t)ch));
		CHECK_STR_EQ(kbox_conn_endpoint(c, (kbox_channel_t)ch), want);
	}
	kbox_conn_destroy(&c);
}

TEST(new_tcp_key_is_64_hex_chars)
{
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	const unsigned char *key;
	size_t len = 0;

	REQUIRE(c != NULL);
	key = kbox_conn_key(c, &len);
	CHECK(is_hex_key(key, len));
	kbox_conn_destroy(&c);
}

/* ---- kbox_conn_save ---- */

TEST(save_creates_file_with_mode_0600)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char path[128];
	struct stat st;

	REQUIRE(c != NULL);
	in_tmp(path, sizeof path, "kernel.json");
	CHECK_INT_EQ(kbox_conn_save(c, path, &err), 0);
	REQUIRE(stat(path, &st) == 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0600);
	CHECK(S_ISREG(st.st_mode));
	kbox_conn_destroy(&c);
}

TEST(save_writes_fields_jupyter_reads)
{
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char path[128];
	json_t *j;
	size_t keylen = 0;
	const unsigned char *key;

	REQUIRE(c != NULL);
	kbox_conn_set_kernel_name(c, "python3");
	REQUIRE(kbox_conn_save(c, in_tmp(path, sizeof path, "kernel.json"), NULL) == 0);
	j = json_load_file(path, 0, NULL);
	REQUIRE(j != NULL);
	key = kbox_conn_key(c, &keylen);
	CHECK_STR_EQ(json_string_value(json_object_get(j, "transport")), "tcp");
	CHECK_STR_EQ(json_string_value(json_object_get(j, "ip")), "127.0.0.1");
	CHECK_STR_EQ(json_string_value(json_object_get(j, "signature_scheme")), "hmac-sha256");
	CHECK_STR_EQ(json_string_value(json_object_get(j, "kernel_name")), "python3");
	CHECK_INT_EQ(json_string_length(json_object_get(j, "key")), keylen);
	CHECK(json_string_value(json_object_get(j, "key")) &&
	      memcmp(json_string_value(json_object_get(j, "key")), key, keylen) == 0);
	CHECK_INT_EQ(json_integer_value(json_object_get(j, "shell_port")),
	             kbox_conn_port(c, KBOX_CH_SHELL));
	CHECK_INT_EQ(json_integer_value(json_object_get(j, "iopub_port")),
	             kbox_conn_port(c, KBOX_CH_IOPUB));
	CHECK_INT_EQ(json_integer_value(json_object_get(j, "stdin_port")),
	             kbox_conn_port(c, KBOX_CH_STDIN));
	CHECK_INT_EQ(json_integer_value(json_object_get(j, "control_port")),
	             kbox_conn_port(c, KBOX_CH_CONTROL));
	CHECK_INT_EQ(json_integer_value(json_object_get(j, "hb_port")),
	             kbox_conn_port(c, KBOX_CH_HB));
	json_decref(j);
	kbox_conn_destroy(&c);
}

TEST(save_refuses_existing_file)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char path[128];

	REQUIRE(c != NULL);
	REQUIRE(write_text(in_tmp(path, sizeof path, "kernel.json"), "old\n") == 0);
	CHECK_INT_EQ(kbox_conn_save(c, path, &err), -1);
	CHECK(err.code != KBOX_OK);
	CHECK_CONTAINS(err.msg, path);
	CHECK_STR_EQ(read_text(path), "old\n");
	kbox_conn_destroy(&c);
}

TEST(save_refuses_planted_symlink)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char path[128], target[128];
	struct stat st;

	REQUIRE(c != NULL);
	in_tmp(target, sizeof target, "victim");
	REQUIRE(write_text(target, "precious\n") == 0);
	REQUIRE(chmod(target, 0644) == 0);
	REQUIRE(symlink(target, in_tmp(path, sizeof path, "kernel.json")) == 0);
	CHECK_INT_EQ(kbox_conn_save(c, path, &err), -1);
	CHECK(err.code != KBOX_OK);
	CHECK_STR_EQ(read_text(target), "precious\n");
	REQUIRE(stat(target, &st) == 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0644);
	REQUIRE(lstat(path, &st) == 0);
	CHECK(S_ISLNK(st.st_mode));
	kbox_conn_destroy(&c);
}

TEST(save_refuses_dangling_symlink)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char path[128], target[128];

	REQUIRE(c != NULL);
	in_tmp(target, sizeof target, "would-be-created");
	REQUIRE(symlink(target, in_tmp(path, sizeof path, "kernel.json")) == 0);
	CHECK_INT_EQ(kbox_conn_save(c, path, &err), -1);
	CHECK(!exists(target));
	kbox_conn_destroy(&c);
}

TEST(save_refuses_group_accessible_dir)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char dir[128], path[192];

	REQUIRE(c != NULL);
	in_tmp(dir, sizeof dir, "open");
	REQUIRE(mkdir(dir, 0755) == 0);
	REQUIRE(chmod(dir, 0755) == 0);
	snprintf(path, sizeof path, "%s/kernel.json", dir);
	CHECK_INT_EQ(kbox_conn_save(c, path, &err), -1);
	CHECK(err.code != KBOX_OK);
	CHECK_CONTAINS(err.msg, dir);
	CHECK(!exists(path));
	kbox_conn_destroy(&c);
}

/* ---- kbox_conn_save_owned ---- */

/* The user the tests give files to: an ordinary one (nobody's ids) under
 * root, ourselves otherwise (giving a file away takes root). */
static uid_t owned_uid(void)
{
	return geteuid() == 0 ? 65534 : geteuid();
}
static gid_t owned_gid(void)
{
	return geteuid() == 0 ? 65534 : getegid();
}

/* TMP/NAME made a directory of owned_uid()'s with MODE, in DIR. */
static int owned_dir(char *dir, size_t size, const char *name, mode_t mode)
{
	in_tmp(dir, size, name);
	if (mkdir(dir, 0700) < 0 || chmod(dir, mode) < 0)
		return -1;
	return geteuid() == 0 ? chown(dir, owned_uid(), owned_gid()) : 0;
}

TEST(save_owned_gives_the_file_to_that_user_mode_0600)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char dir[128], path[192];
	struct stat st;

	REQUIRE(c != NULL);
	REQUIRE(owned_dir(dir, sizeof dir, "sandbox", 0700) == 0);
	snprintf(path, sizeof path, "%s/kernel.json", dir);
	CHECK_INT_EQ(kbox_conn_save_owned(c, path, owned_uid(), owned_gid(), &err), 0);
	REQUIRE(stat(path, &st) == 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0600);
	CHECK_INT_EQ(st.st_uid, owned_uid());
	CHECK_INT_EQ(st.st_gid, owned_gid());
	kbox_conn_destroy(&c);
}

TEST(save_owned_refuses_a_directory_of_another_user)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char dir[128], path[192], uid[32];

	REQUIRE(c != NULL);
	REQUIRE(owned_dir(dir, sizeof dir, "theirs", 0700) == 0);
	snprintf(path, sizeof path, "%s/kernel.json", dir);
	snprintf(uid, sizeof uid, "uid %u", (unsigned)owned_uid() + 1);
	CHECK_INT_EQ(kbox_conn_save_owned(c, path, owned_uid() + 1, owned_gid(), &err), -1);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, dir);
	CHECK_CONTAINS(err.msg, uid);
	CHECK(!exists(path));
	kbox_conn_destroy(&c);
}

TEST(save_owned_refuses_a_directory_open_to_others)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	char dir[128], path[192];

	REQUIRE(c != NULL);
	REQUIRE(owned_dir(dir, sizeof dir, "open", 0755) == 0);
	snprintf(path, sizeof path, "%s/kernel.json", dir);
	CHECK_INT_EQ(kbox_conn_save_owned(c, path, owned_uid(), owned_gid(), &err), -1);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, dir);
	CHECK(!exists(path));
	kbox_conn_destroy(&c);
}

/* Check that A and B hold the same connection. */
static void check_same_conn(const kbox_conn_t *a, const kbox_conn_t *b)
{
	size_t alen = 0, blen = 0;
	const unsigned char *akey = kbox_conn_key(a, &alen);
	const unsigned char *bkey = kbox_conn_key(b, &blen);
	int ch;

	CHECK_INT_EQ(kbox_conn_transport(b), kbox_conn_transport(a));
	CHECK_STR_EQ(kbox_conn_ip(b), kbox_conn_ip(a));
	for (ch = 0; ch < KBOX_CH_COUNT; ch++) {
		CHECK_INT_EQ(kbox_conn_port(b, (kbox_channel_t)ch),
		             kbox_conn_port(a, (kbox_channel_t)ch));
		CHECK_STR_EQ(kbox_conn_endpoint(b, (kbox_channel_t)ch),
		             kbox_conn_endpoint(a, (kbox_channel_t)ch));
	}
	CHECK_INT_EQ(blen, alen);
	CHECK(alen == blen && memcmp(akey, bkey, alen) == 0);
	CHECK_STR_EQ(kbox_conn_scheme(b), kbox_conn_scheme(a));
	CHECK_STR_EQ(kbox_conn_kernel_name(b), kbox_conn_kernel_name(a));
}

TEST(save_load_round_trip_tcp)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_tcp(NULL), *back;
	char path[128];

	REQUIRE(c != NULL);
	kbox_conn_set_kernel_name(c, "python3");
	REQUIRE(kbox_conn_save(c, in_tmp(path, sizeof path, "kernel.json"), &err) == 0);
	back = kbox_conn_load(path, &err);
	REQUIRE(back != NULL);
	check_same_conn(c, back);
	CHECK_STR_EQ(kbox_conn_kernel_name(back), "python3");
	kbox_conn_destroy(&back);
	kbox_conn_destroy(&c);
}

TEST(save_load_round_trip_ipc)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_ipc(tmp, NULL), *back;
	char path[128];

	REQUIRE(c != NULL);
	kbox_conn_set_kernel_name(c, "ir");
	REQUIRE(kbox_conn_save(c, in_tmp(path, sizeof path, "kernel.json"), &err) == 0);
	back = kbox_conn_load(path, &err);
	REQUIRE(back != NULL);
	check_same_conn(c, back);
	CHECK_INT_EQ(kbox_conn_transport(back), KBOX_TRANSPORT_IPC);
	kbox_conn_destroy(&back);
	kbox_conn_destroy(&c);
}

/* The whole of the file PATH, new (NULL: unreadable). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = calloc(1, 65536);
	size_t n = f && buf ? fread(buf, 1, 65535, f) : 0;
	if (f)
		fclose(f);
	if (!n) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* kbox_conn_json: the text kbox_conn_save writes (the same connection
 * read back), and kbox_conn_json_free wipes and frees it. */
TEST(json_text_is_the_saved_files)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_new_ipc(tmp, NULL), *back;
	char path[128], *text, *saved;
	json_t *j;

	REQUIRE(c != NULL);
	text = kbox_conn_json(c);
	REQUIRE(text != NULL);
	REQUIRE(kbox_conn_save(c, in_tmp(path, sizeof path, "json.json"), &err) == 0);
	saved = slurp(path);
	CHECK_STR_EQ(text, saved);
	j = json_loads(text, 0, NULL);
	REQUIRE(j != NULL);
	back = kbox_conn_from_json(j, "text", &err);
	REQUIRE(back != NULL);
	check_same_conn(c, back);
	json_decref(j);
	kbox_conn_json_free(&text);
	CHECK(text == NULL);
	kbox_conn_json_free(&text); /* twice is harmless */
	free(saved);
	kbox_conn_destroy(&back);
	kbox_conn_destroy(&c);
}

/* ---- kbox_conn_load ---- */

TEST(load_accepts_valid_file)
{
	kbox_error_t err = {0};
	const char *path = write_conn(VALID_PORT, VALID_KEY, VALID_TRANSPORT, VALID_SCHEME);
	kbox_conn_t *c = kbox_conn_load(path, &err);
	size_t len = 0;
	const unsigned char *key;

	if (!c)
		printf("# %s\n", err.msg);
	REQUIRE(c != NULL);
	key = kbox_conn_key(c, &len);
	CHECK_INT_EQ(len, 16);
	CHECK(memcmp(key, "0123456789abcdef", 16) == 0);
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_SHELL), 40001);
	CHECK_STR_EQ(kbox_conn_endpoint(c, KBOX_CH_SHELL), "tcp://127.0.0.1:40001");
	kbox_conn_destroy(&c);
}

TEST(load_rejects_malformed_json_naming_file)
{
	kbox_error_t err = {0};
	char path[128];
	kbox_conn_t *c;

	REQUIRE(write_text(in_tmp(path, sizeof path, "bad.json"), "{\"shell_port\": 1,") == 0);
	c = kbox_conn_load(path, &err);
	CHECK(c == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, path);
	kbox_conn_destroy(&c);
}

TEST(load_rejects_missing_key)
{
	kbox_error_t err = {0};
	const char *path = write_conn(VALID_PORT, NULL, VALID_TRANSPORT, VALID_SCHEME);
	kbox_conn_t *c = kbox_conn_load(path, &err);
	CHECK(c == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, path);
	CHECK_CONTAINS(err.msg, "key");
	kbox_conn_destroy(&c);
}

TEST(load_rejects_empty_key)
{
	kbox_error_t err = {0};
	const char *path = write_conn(VALID_PORT, "\"\"", VALID_TRANSPORT, VALID_SCHEME);
	kbox_conn_t *c = kbox_conn_load(path, &err);
	CHECK(c == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, path);
	CHECK_CONTAINS(err.msg, "key");
	kbox_conn_destroy(&c);
}

TEST(load_rejects_unknown_transport)
{
	kbox_error_t err = {0};
	const char *path = write_conn(VALID_PORT, VALID_KEY, "\"udp\"", VALID_SCHEME);
	kbox_conn_t *c = kbox_conn_load(path, &err);
	CHECK(c == NULL);
	CHECK(err.code == KBOX_E_INVALID || err.code == KBOX_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "udp");
	kbox_conn_destroy(&c);
}

TEST(load_rejects_unknown_signature_scheme)
{
	kbox_error_t err = {0};
	const char *path = write_conn(VALID_PORT, VALID_KEY, VALID_TRANSPORT, "\"hmac-md5\"");
	kbox_conn_t *c = kbox_conn_load(path, &err);
	CHECK(c == NULL);
	CHECK(err.code == KBOX_E_UNSUPPORTED || err.code == KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, "hmac-md5");
	kbox_conn_destroy(&c);
}

/* Load a file whose shell_port is PORT_JSON; expect a refusal naming the field. */
static void check_bad_port(const char *port_json)
{
	kbox_error_t err = {0};
	const char *path = write_conn(port_json, VALID_KEY, VALID_TRANSPORT, VALID_SCHEME);
	kbox_conn_t *c = kbox_conn_load(path, &err);
	CHECK(c == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, path);
	CHECK_CONTAINS(err.msg, "shell_port");
	kbox_conn_destroy(&c);
}

TEST(load_rejects_port_above_65535)
{
	check_bad_port("70000");
}

TEST(load_rejects_negative_port)
{
	check_bad_port("-1");
}

TEST(load_rejects_port_given_as_string)
{
	check_bad_port("\"abc\"");
}

TEST(load_rejects_missing_port_field)
{
	kbox_error_t err = {0};
	const char *path = write_conn(NULL, VALID_KEY, VALID_TRANSPORT, VALID_SCHEME);
	kbox_conn_t *c = kbox_conn_load(path, &err);
	CHECK(c == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, "shell_port");
	kbox_conn_destroy(&c);
}

/* A valid file padded with BYTES of JSON whitespace before the closing
 * brace (so its size is BYTES plus ~200). */
static const char *write_padded(size_t bytes)
{
	static char path[128];
	const char *head = "{\"shell_port\": 40001, \"iopub_port\": 40002, \"stdin_port\": 40003, "
	                   "\"control_port\": 40004, \"hb_port\": 40005, \"ip\": \"127.0.0.1\", "
	                   "\"key\": \"0123456789abcdef\", \"transport\": \"tcp\", "
	                   "\"signature_scheme\": \"hmac-sha256\"";
	FILE *f = fopen(in_tmp(path, sizeof path, "padded.json"), "w");
	if (!f)
		exit(99);
	fputs(head, f);
	for (size_t i = 0; i < bytes; i++)
		fputc(i % 64 == 63 ? '\n' : ' ', f);
	fputs("}\n", f);
	if (fclose(f) != 0)
		exit(99);
	return path;
}

/* Larger than the first read buffer (4 KiB), up to the limit: loads. */
TEST(load_accepts_large_files_up_to_the_limit)
{
	static const size_t pads[] = {3800, 4096, 9000, 65535 - 300};
	for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++) {
		kbox_error_t err = {0};
		kbox_conn_t *c = kbox_conn_load(write_padded(pads[i]), &err);
		size_t len = 0;
		if (!c)
			printf("# pad %zu: %s\n", pads[i], err.msg);
		CHECK(c != NULL);
		if (c) {
			CHECK(memcmp(kbox_conn_key(c, &len), "0123456789abcdef", 16) == 0);
			CHECK_INT_EQ(len, 16);
			CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_HB), 40005);
		}
		kbox_conn_destroy(&c);
	}
}

TEST(load_rejects_a_file_of_64_kib_or_more)
{
	kbox_error_t err = {0};
	const char *path = write_padded(65536);
	char want[256];
	kbox_conn_t *c = kbox_conn_load(path, &err);
	CHECK(c == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	snprintf(want, sizeof want, "connection file %s: larger than 65535 bytes", path);
	CHECK_STR_EQ(err.msg, want);
	kbox_conn_destroy(&c);
}

TEST(load_nonexistent_file_names_path)
{
	kbox_error_t err = {0};
	char path[128];
	kbox_conn_t *c = kbox_conn_load(in_tmp(path, sizeof path, "missing.json"), &err);
	CHECK(c == NULL);
	CHECK(err.code == KBOX_E_NOTFOUND || err.code == KBOX_E_SYSTEM);
	CHECK_CONTAINS(err.msg, path);
	kbox_conn_destroy(&c);
}

TEST(load_reads_jupyter_client_tcp_file)
{
	kbox_error_t err = {0};
	char path[512];
	kbox_conn_t *c = kbox_conn_load(fixture(path, sizeof path, "jupyter-tcp.json"), &err);
	const char *want_key = "a0436f6c-1916-498b-8eb9-e81ab9368e84";
	const unsigned char *key;
	size_t len = 0;

	if (!c)
		printf("# %s\n", err.msg);
	REQUIRE(c != NULL);
	CHECK_INT_EQ(kbox_conn_transport(c), KBOX_TRANSPORT_TCP);
	CHECK_STR_EQ(kbox_conn_ip(c), "127.0.0.1");
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_SHELL), 50101);
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_IOPUB), 50102);
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_STDIN), 50103);
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_CONTROL), 50104);
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_HB), 50105);
	CHECK_STR_EQ(kbox_conn_endpoint(c, KBOX_CH_SHELL), "tcp://127.0.0.1:50101");
	CHECK_STR_EQ(kbox_conn_endpoint(c, KBOX_CH_HB), "tcp://127.0.0.1:50105");
	key = kbox_conn_key(c, &len);
	CHECK_INT_EQ(len, strlen(want_key));
	CHECK(len == strlen(want_key) && memcmp(key, want_key, len) == 0);
	CHECK_STR_EQ(kbox_conn_scheme(c), "hmac-sha256");
	CHECK_STR_EQ(kbox_conn_kernel_name(c), "python3");
	kbox_conn_destroy(&c);
}

TEST(load_reads_jupyter_client_ipc_file)
{
	kbox_error_t err = {0};
	char path[512];
	kbox_conn_t *c = kbox_conn_load(fixture(path, sizeof path, "jupyter-ipc.json"), &err);
	const char *want_key = "5f2b1c8e-7d04-4e4a-9c3b-2a6f0d9e1b77";
	const unsigned char *key;
	size_t len = 0;

	if (!c)
		printf("# %s\n", err.msg);
	REQUIRE(c != NULL);
	CHECK_INT_EQ(kbox_conn_transport(c), KBOX_TRANSPORT_IPC);
	CHECK_STR_EQ(kbox_conn_ip(c), "/run/kbox-test/kernel-ipc");
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_SHELL), 1);
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_IOPUB), 2);
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_STDIN), 3);
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_CONTROL), 4);
	CHECK_INT_EQ(kbox_conn_port(c, KBOX_CH_HB), 5);
	CHECK_STR_EQ(kbox_conn_endpoint(c, KBOX_CH_SHELL), "ipc:///run/kbox-test/kernel-ipc-1");
	CHECK_STR_EQ(kbox_conn_endpoint(c, KBOX_CH_CONTROL), "ipc:///run/kbox-test/kernel-ipc-4");
	CHECK_STR_EQ(kbox_conn_endpoint(c, KBOX_CH_HB), "ipc:///run/kbox-test/kernel-ipc-5");
	key = kbox_conn_key(c, &len);
	CHECK(len == strlen(want_key) && memcmp(key, want_key, len) == 0);
	CHECK_STR_EQ(kbox_conn_kernel_name(c), "");
	kbox_conn_destroy(&c);
}

TEST(load_reads_jupyter_client_ipc_file_with_relative_ip)
{
	kbox_error_t err = {0};
	char path[512];
	kbox_conn_t *c = kbox_conn_load(fixture(path, sizeof path, "jupyter-ipc-relative.json"),
	                                &err);
	int ch;

	if (!c)
		printf("# %s\n", err.msg);
	REQUIRE(c != NULL);
	CHECK_INT_EQ(kbox_conn_transport(c), KBOX_TRANSPORT_IPC);
	CHECK_STR_EQ(kbox_conn_ip(c), "kernel-ipc");
	for (ch = 0; ch < KBOX_CH_COUNT; ch++)
		CHECK_INT_EQ(kbox_conn_port(c, (kbox_channel_t)ch), ch + 1);
	CHECK_STR_EQ(kbox_conn_scheme(c), "hmac-sha256");
	kbox_conn_destroy(&c);
}

TEST(from_json_names_source_in_errors)
{
	kbox_error_t err = {0};
	json_t *j = json_pack("{s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:s, s:s}", "shell_port", 1,
	                      "iopub_port", 2, "stdin_port", 3, "control_port", 4, "hb_port", 5,
	                      "ip", "127.0.0.1", "key", "", "transport", "tcp", "signature_scheme",
	                      "hmac-sha256");
	kbox_conn_t *c;

	REQUIRE(j != NULL);
	c = kbox_conn_from_json(j, "the-source", &err);
	CHECK(c == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_CONTAINS(err.msg, "the-source");
	CHECK_CONTAINS(err.msg, "key");
	kbox_conn_destroy(&c);
	json_decref(j);
}

/* ---- the rest ---- */

TEST(remove_ipc_files_unlinks_socket_files)
{
	kbox_conn_t *c = kbox_conn_new_ipc(tmp, NULL);
	char path[192];
	int ch;

	REQUIRE(c != NULL);
	for (ch = 0; ch < KBOX_CH_COUNT; ch++) {
		snprintf(path, sizeof path, "%s-%d", kbox_conn_ip(c),
		         kbox_conn_port(c, (kbox_channel_t)ch));
		REQUIRE(write_text(path, "") == 0);
	}
	kbox_conn_remove_ipc_files(c);
	for (ch = 0; ch < KBOX_CH_COUNT; ch++) {
		snprintf(path, sizeof path, "%s-%d", kbox_conn_ip(c),
		         kbox_conn_port(c, (kbox_channel_t)ch));
		CHECK(!exists(path));
	}
	kbox_conn_destroy(&c);
}

TEST(remove_ipc_files_tolerates_missing_files)
{
	kbox_conn_t *c = kbox_conn_new_ipc(tmp, NULL);
	char path[192], other[128];

	REQUIRE(c != NULL);
	/* only the hb socket exists; an unrelated file must survive */
	snprintf(path, sizeof path, "%s-%d", kbox_conn_ip(c), kbox_conn_port(c, KBOX_CH_HB));
	REQUIRE(write_text(path, "") == 0);
	REQUIRE(write_text(in_tmp(other, sizeof other, "other"), "") == 0);
	kbox_conn_remove_ipc_files(c);
	CHECK(!exists(path));
	CHECK(exists(other));
	kbox_conn_destroy(&c);
}

TEST(dup_is_deep_copy)
{
	kbox_conn_t *c = kbox_conn_new_ipc(tmp, NULL), *copy, *ref;
	char path[128];
	size_t len = 0, clen = 0;

	REQUIRE(c != NULL);
	kbox_conn_set_kernel_name(c, "python3");
	/* keep a reference copy on disk, then free the original */
	REQUIRE(kbox_conn_save(c, in_tmp(path, sizeof path, "ref.json"), NULL) == 0);
	copy = kbox_conn_dup(c);
	REQUIRE(copy != NULL);
	CHECK(copy != c);
	CHECK(kbox_conn_key(copy, &len) != kbox_conn_key(c, &clen));
	CHECK(kbox_conn_ip(copy) != kbox_conn_ip(c));
	kbox_conn_set_kernel_name(copy, "other");
	CHECK_STR_EQ(kbox_conn_kernel_name(c), "python3");
	kbox_conn_set_kernel_name(copy, "python3");
	kbox_conn_destroy(&c);
	ref = kbox_conn_load(path, NULL);
	REQUIRE(ref != NULL);
	check_same_conn(ref, copy);
	kbox_conn_destroy(&ref);
	kbox_conn_destroy(&copy);
}

TEST(destroy_sets_pointer_to_null_and_accepts_null)
{
	kbox_conn_t *c = kbox_conn_new_tcp(NULL);
	REQUIRE(c != NULL);
	kbox_conn_destroy(&c);
	CHECK(c == NULL);
	kbox_conn_destroy(&c);
	kbox_conn_destroy(NULL);
}

int main(void)
{
	RUN(channel_names_are_jupyter_names);

	RUN_IN_TMP(new_ipc_key_is_64_hex_chars);
	RUN_IN_TMP(new_ipc_two_connections_get_different_keys);
	RUN_IN_TMP(new_ipc_transport_is_ipc);
	RUN_IN_TMP(new_ipc_endpoints_are_dir_kernel_tag_ipc_port);
	RUN_IN_TMP(two_ipc_connections_in_one_dir_never_share_sockets);
	RUN_IN_TMP(new_ipc_with_relative_dir_gives_absolute_paths);
	RUN_IN_TMP(new_ipc_fails_when_dir_is_missing);

	RUN_IN_TMP(new_tcp_uses_loopback_ip);
	RUN_IN_TMP(new_tcp_has_five_distinct_ports_in_range);
	RUN_IN_TMP(new_tcp_endpoints_are_tcp_loopback_port);
	RUN_IN_TMP(new_tcp_key_is_64_hex_chars);

	RUN_IN_TMP(save_creates_file_with_mode_0600);
	RUN_IN_TMP(save_writes_fields_jupyter_reads);
	RUN_IN_TMP(save_refuses_existing_file);
	RUN_IN_TMP(save_refuses_planted_symlink);
	RUN_IN_TMP(save_refuses_dangling_symlink);
	RUN_IN_TMP(save_refuses_group_accessible_dir);
	RUN_IN_TMP(save_owned_gives_the_file_to_that_user_mode_0600);
	RUN_IN_TMP(save_owned_refuses_a_directory_of_another_user);
	RUN_IN_TMP(save_owned_refuses_a_directory_open_to_others);
	RUN_IN_TMP(save_load_round_trip_tcp);
	RUN_IN_TMP(save_load_round_trip_ipc);
	RUN_IN_TMP(json_text_is_the_saved_files);

	RUN_IN_TMP(load_accepts_valid_file);
	RUN_IN_TMP(load_rejects_malformed_json_naming_file);
	RUN_IN_TMP(load_rejects_missing_key);
	RUN_IN_TMP(load_rejects_empty_key);
	RUN_IN_TMP(load_rejects_unknown_transport);
	RUN_IN_TMP(load_rejects_unknown_signature_scheme);
	RUN_IN_TMP(load_rejects_port_above_65535);
	RUN_IN_TMP(load_rejects_negative_port);
	RUN_IN_TMP(load_rejects_port_given_as_string);
	RUN_IN_TMP(load_rejects_missing_port_field);
	RUN_IN_TMP(load_accepts_large_files_up_to_the_limit);
	RUN_IN_TMP(load_rejects_a_file_of_64_kib_or_more);
	RUN_IN_TMP(load_nonexistent_file_names_path);
	RUN_IN_TMP(load_reads_jupyter_client_tcp_file);
	RUN_IN_TMP(load_reads_jupyter_client_ipc_file);
	RUN_IN_TMP(load_reads_jupyter_client_ipc_file_with_relative_ip);
	RUN_IN_TMP(from_json_names_source_in_errors);

	RUN_IN_TMP(remove_ipc_files_unlinks_socket_files);
	RUN_IN_TMP(remove_ipc_files_tolerates_missing_files);
	RUN_IN_TMP(dup_is_deep_copy);
	RUN_IN_TMP(destroy_sets_pointer_to_null_and_accepts_null);
	return tap_done();
}
