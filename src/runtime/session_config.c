/* src/runtime/session_config.c — session.json: its keys in one table, the
 * strict reader, the atomic writer, and the merge of a command line. */
#include "config.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"
#include "runtime/session_config.h"
#include "runtime/ws_live.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a key's value is, and the words that say it in an error. */
typedef enum {
	T_STRING,  /* a string: const char * (jansson refuses a NUL in one) */
	T_COUNT,   /* an integer >= 0: long long */
	T_INTEGER, /* any integer (a device or inode number, as stored): long long */
	T_NUMBER,  /* a number >= 0: double */
	T_BOOL,    /* true or false: bool */
	T_STRINGS, /* an array of strings: char ** (and N_ENV) */
} value_type_t;

static const char *const type_words[] = {
        [T_STRING] = "a string",    [T_COUNT] = "an integer of 0 or more",
        [T_INTEGER] = "an integer", [T_NUMBER] = "a number of 0 or more",
        [T_BOOL] = "true or false", [T_STRINGS] = "an array of strings",
};

#define FIELD(f) offsetof(kr_session_config_t, f)

/* Every key of session.json, sorted by name (as the file is written). */
static const struct key {
	const char *name;
	unsigned bit;
	value_type_t type;
	size_t offset;
} keys[] = {
        {"backend", KR_SC_BACKEND, T_STRING, FIELD(backend)},
        {"cpus", KR_SC_CPUS, T_NUMBER, FIELD(cpus)},
        {"engine", KR_SC_ENGINE, T_STRING, FIELD(engine)},
        {"env", KR_SC_ENV, T_STRINGS, FIELD(env)},
        {"ephemeral", KR_SC_EPHEMERAL, T_BOOL, FIELD(ephemeral)},
        {"file_size", KR_SC_FILE_SIZE, T_COUNT, FIELD(file_size)},
        {"functions", KR_SC_FUNCTIONS, T_STRING, FIELD(functions)},
        {"gateway", KR_SC_GATEWAY, T_STRING, FIELD(gateway)},
        {"gateway_ca", KR_SC_GATEWAY_CA, T_STRING, FIELD(gateway_ca)},
        {"home_config", KR_SC_HOME_CONFIG, T_BOOL, FIELD(home_config)},
        {"image", KR_SC_IMAGE, T_STRING, FIELD(image)},
        {"kernel", KR_SC_KERNEL, T_STRING, FIELD(kernel)},
        {"launch_timeout", KR_SC_LAUNCH_TIMEOUT, T_COUNT, FIELD(launch_timeout)},
        {"memory", KR_SC_MEMORY, T_COUNT, FIELD(memory)},
        {"name", KR_SC_NAME, T_STRING, FIELD(name)},
        {"output_rate", KR_SC_OUTPUT_RATE, T_COUNT, FIELD(output_rate)},
        {"outputs_quota", KR_SC_OUTPUTS_QUOTA, T_COUNT, FIELD(outputs_quota)},
        {"owner_pid", KR_SC_OWNER_PID, T_COUNT, FIELD(owner_pid)},
        {"pids", KR_SC_PIDS, T_COUNT, FIELD(pids)},
        {"relay", KR_SC_RELAY, T_STRING, FIELD(relay)},
        {"rootfs", KR_SC_ROOTFS, T_STRING, FIELD(rootfs)},
        {"tmp_size", KR_SC_TMP_SIZE, T_COUNT, FIELD(tmp_size)},
        {"ttl_ms", KR_SC_TTL_MS, T_COUNT, FIELD(ttl_ms)},
        {"workspace", KR_SC_WORKSPACE, T_STRING, FIELD(workspace)},
        {"workspace_dev", KR_SC_WORKSPACE_DEV, T_INTEGER, FIELD(workspace_dev)},
        {"workspace_ino", KR_SC_WORKSPACE_INO, T_INTEGER, FIELD(workspace_ino)},
        {"workspace_ro", KR_SC_WORKSPACE_RO, T_BOOL, FIELD(workspace_ro)},
};
#define N_KEYS (sizeof keys / sizeof *keys)

/* Saved whether given or not: kbox(1) promises them. */
#define ALWAYS_SAVED (KR_SC_KERNEL | KR_SC_BACKEND)

#define AT(cfg, k, type) ((type *)(void *)((char *)(cfg) + (k)->offset))

bool kr_kspec_is_kbox(const json_t *metadata)
{
	return json_is_object(json_object_get(json_object_get(metadata, "kbox"), "runs"));
}

void kr_session_config_init(kr_session_config_t *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->kernel = KR_KERNEL_DEFAULT;
	cfg->backend = KR_BACKEND_DEFAULT;
	cfg->ttl_ms = KR_SESSION_TTL_MS;
	cfg->outputs_quota = KR_OUTPUTS_QUOTA;
}

/* Free the value of key K in CFG, when CFG owns it (K in HAS). */
static void free_value(kr_session_config_t *cfg, const struct key *k)
{
	if (!(cfg->has & k->bit))
		return;
	if (k->type == T_STRING)
		free((char *)*AT(cfg, k, const char *));
	else if (k->type == T_STRINGS) {
		char **v = *AT(cfg, k, char **);
		for (size_t i = 0; v && v[i]; i++)
			free(v[i]);
		free(v);
	}
}

void kr_session_config_free(kr_session_config_t *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < N_KEYS; i++)
		free_value(cfg, &keys[i]);
	kr_session_config_init(cfg);
}

/* The key named NAME, or NULL. */
static const struct key *find_key(const char *name)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

/* What J is, for an error: "a string", "null", … */
static const char *json_kind(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER: /* ("of 0 or more, not an integer" read as no reason) */
		return json_integer_value(j) < 0 ? "a negative integer" : "an integer";
	case JSON_REAL:
		return json_real_value(j) < 0 ? "a negative number" : "a real number";
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	case JSON_NULL:
		break;
	}
	return "null";
}

/* Whether V has the type of K (a count or number also its sign). */
static bool type_ok(const struct key *k, const json_t *v)
{
	size_t i;
	json_t *e;
	switch (k->type) {
	case T_STRING:
		return json_is_string(v);
	case T_COUNT:
		return json_is_integer(v) && json_integer_value(v) >= 0;
	case T_INTEGER:
		return json_is_integer(v);
	case T_NUMBER:
		return json_is_number(v) && json_number_value(v) >= 0;
	case T_BOOL:
		return json_is_boolean(v);
	case T_STRINGS:
		if (!json_is_array(v))
			return false;
		json_array_foreach(v, i, e) if (!json_is_string(e)) return false;
		return true;
	}
	return false;
}

/* Set key K of CFG (which does not own it yet) from V, of its type.
 * 0, or -1 when out of memory. */
static int take_value(kr_session_config_t *cfg, const struct key *k, const json_t *v)
{
	size_t i;
	json_t *e;
	char **strv;

	switch (k->type) {
	case T_STRING:
		if (!(*AT(cfg, k, const char *) = strdup(json_string_value(v))))
			return -1;
		break;
	case T_COUNT:
	case T_INTEGER:
		*AT(cfg, k, long long) = json_integer_value(v);
		break;
	case T_NUMBER:
		*AT(cfg, k, double) = json_number_value(v);
		break;
	case T_BOOL:
		*AT(cfg, k, bool) = json_is_true(v);
		break;
	case T_STRINGS:
		if (!(strv = calloc(json_array_size(v) + 1, sizeof *strv)))
			return -1;
		*AT(cfg, k, char **) = strv;
		cfg->has |= k->bit; /* owned from here: freed with what it holds */
		json_array_foreach(v, i, e)
		{
			if (!(strv[i] = strdup(json_string_value(e))))
				return -1;
			cfg->n_env = i + 1;
		}
		break;
	}
	cfg->has |= k->bit;
	return 0;
}

/* A string of the file as a message shows it: escaped (kx_name_escape),
 * so that no value can break the message's line or pose as another
 * line (review 20, W20-1), and cut to its first 200 bytes.  In OUT. */
#define SHOWN_IN 200
static const char *shown(const char *s, char out[KX_NAME_ESCAPED_MAX(SHOWN_IN) + 4])
{
	size_t n = strlen(s), cut = n > SHOWN_IN ? kx_utf8_floor(s, n, SHOWN_IN) : n;
	size_t len = kx_name_escape(s, cut, out, KX_NAME_ESCAPED_MAX(SHOWN_IN));
	if (cut < n)
		memcpy(out + len, "\xe2\x80\xa6", 4); /* … */
	return out;
}

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* A path component of a name: lower-case letters and digits, joined by
 * one '.', one or two '_', or any number of '-'. */
static bool path_component(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t run = 0;
		while (i < n && lower_alnum(s[i]))
			i++, run++;
		if (!run)
			return false;
		if (i == n)
			return true;
		if (s[i] == '.')
			i++;
		else if (s[i] == '_')
			i += i + 1 < n && s[i + 1] == '_' ? 2 : 1;
		else if (s[i] == '-')
			while (i < n && s[i] == '-')
				i++;
		else
			return false;
		if (i == n)
			return false; /* (a separator at the end) */
	}
	return n > 0;
}

/* A registry's host, as the reference grammar has it: labels of letters,
 * digits and '-' (neither first nor last) separated by single dots, then
 * maybe :PORT (1 to 65535). */
static bool domain(const char *s, size_t n)
{
	size_t i = 0, label = 0;
	long port = 0;
	for (; i < n && s[i] != ':'; i++) {
		char c = s[i];
		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		           (c >= '0' && c <= '9') || (c == '-' && label > 0)) {
			label++;
		} else {
			return false;
		}
	}
	if (label == 0 || s[i - 1] == '-')
		return false;
	if (i < n) {
		if (++i == n || n - i > 5)
			return false;
		for (; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return false;
			port = port * 10 + (s[i] - '0');
		}
		if (port < 1 || port > 65535)
			return false;
	}
	return true;
}

bool kr_image_ref_valid(const char *ref)
{
	size_t n = ref ? strlen(ref) : 0, name_len, tag_at = 0;
	const char *at, *slash, *p, *end;
	if (n == 0 || n > 255)
		return false;
	/* an image id */
	if (strncmp(ref, "sha256:", 7) == 0)
		return n == 7 + 64 && is_hex(ref + 7, 64);
	/* NAME[:TAG][@sha256:DIGEST] (the distribution reference grammar) */
	if ((at = strchr(ref, '@'))) {
		if (strncmp(at, "@sha256:", 8) != 0 || strlen(at + 8) != 64 || !is_hex(at + 8, 64))
			return false;
		n = (size_t)(at - ref);
	}
	slash = NULL;
	for (p = ref; p < ref + n; p++)
		if (*p == '/')
			slash = p;
	for (p = slash ? slash : ref; p < ref + n; p++)
		if (*p == ':')
			tag_at = (size_t)(p - ref);
	name_len = tag_at ? tag_at : n;
	if (tag_at) {
		size_t tl = n - tag_at - 1;
		const char *t = ref + tag_at + 1;
		if (tl == 0 || tl > 128 || !(isalnum((unsigned char)t[0]) || t[0] == '_'))
			return false;
		for (size_t i = 0; i < tl; i++)
			if (!(isalnum((unsigned char)t[i]) || t[i] == '_' || t[i] == '.' ||
			      t[i] == '-'))
				return false;
	}
	/* the first component is a registry when others follow and it has a
	 * '.' or a ':', or is localhost */
	p = ref;
	end = ref + name_len;
	const char *first_end = memchr(p, '/', (size_t)(end - p));
	if (first_end) {
		size_t fl = (size_t)(first_end - p);
		if ((memchr(p, '.', fl) || memchr(p, ':', fl) ||
		     (fl == 9 && !strncmp(p, "localhost", 9))) &&
		    domain(p, fl))
			p = first_end + 1;
	}
	while (p < end) {
		const char *q = memchr(p, '/', (size_t)(end - p));
		size_t cl = q ? (size_t)(q - p) : (size_t)(end - p);
		if (!path_component(p, cl))
			return false;
		if (!q)
			break;
		p = q + 1;
		if (p == end)
			return false;
	}
	return true;
}

/* Whether the LEN bytes at PORT are a port: digits, from 1 to 65535. */
static bool port_valid(const char *port, size_t len)
{
	long v = 0;
	if (!len || len > 5)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (port[i] < '0' || port[i] > '9')
			return false;
		v = v * 10 + (port[i] - '0');
	}
	return v >= 1 && v <= 65535;
}

bool kr_gateway_url_valid(const char *url)
{
	const char *rest = strncmp(url, "http://", 7) == 0    ? url + 7
	                   : strncmp(url, "https://", 8) == 0 ? url + 8
	                                                      : NULL;
	const char *end, *colon;
	if (!rest || !*rest || *rest == '/' || strlen(url) > 1024 || strpbrk(url, "?#@"))
		return false;
	for (const char *p = url; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	/* the authority: HOST, [IPV6] or either with :PORT (review 23, P2:
	 * port 99999 was taken, and the start failed later) */
	end = rest + strcspn(rest, "/");
	if (*rest == '[') {
		const char *close = memchr(rest, ']', (size_t)(end - rest));
		if (!close || close == rest + 1)
			return false;
		colon = close + 1 < end ? close + 1 : NULL;
		if (colon && *colon != ':')
			return false;
	} else
		colon = memchr(rest, ':', (size_t)(end - rest));
	if (colon == rest)
		return false;
	return !colon || port_valid(colon + 1, (size_t)(end - colon - 1));
}

bool kr_engine_socket_valid(const char *value)
{
	const char *p = value;
	if (!p)
		return false;
	if (strncmp(p, "unix://", 7) == 0)
		p += 7;
	if (p[0] != '/' || strlen(p) > 107)
		return false;
	for (; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			return false;
	return true;
}

/* Values the command line refuses are refused in the file too, naming
 * the key (newcomer 11, F4: a memory of 1 byte failed the start with a
 * broken pipe, a /tmp of 5 bytes started): 0 is the default for each.
 * 0, or -1 with ERR. */
static int check_values(const kr_session_config_t *cfg, const char *path, kbox_error_t *err)
{
	static const struct {
		unsigned bit;
		const char *name;
		size_t at;
		long long least, most;
	} ranges[] = {
	        {KR_SC_MEMORY, "memory", offsetof(kr_session_config_t, memory), 1 << 20, 0},
	        {KR_SC_TMP_SIZE, "tmp_size", offsetof(kr_session_config_t, tmp_size), 1 << 20, 0},
	        {KR_SC_FILE_SIZE, "file_size", offsetof(kr_session_config_t, file_size), 1 << 20,
	         0},
	        {KR_SC_PIDS, "pids", offsetof(kr_session_config_t, pids), 1, 4194304},
	        {KR_SC_TTL_MS, "ttl_ms", offsetof(kr_session_config_t, ttl_ms), 0,
	         KR_SESSION_TTL_MAX_MS},
	        {KR_SC_LAUNCH_TIMEOUT, "launch_timeout",
	         offsetof(kr_session_config_t, launch_timeout), 1, 3600},
	};
	for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
		long long v = *(const long long *)((const char *)cfg + ranges[i].at);
		if (!(cfg->has & ranges[i].bit) || v == 0)
			continue;
		if (v < ranges[i].least || (ranges[i].most && v > ranges[i].most))
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s: \"%s\" is %lld, out of the range the command line "
			        "takes (%lld to %lld; 0 for the default)",
			        path, ranges[i].name, v, ranges[i].least,
			        ranges[i].most ? ranges[i].most : LLONG_MAX);
	}
	if ((cfg->has & KR_SC_CPUS) && (cfg->cpus > 1024 || (cfg->cpus > 0 && cfg->cpus < 0.01)))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: \"cpus\" is %g, out of the range the command line "
		                      "takes (0.01 to 1024; 0 for the default)",
		                      path, cfg->cpus);
	if ((cfg->has & KR_SC_IMAGE) && !kr_image_ref_valid(cfg->image)) {
		char v[KX_NAME_ESCAPED_MAX(SHOWN_IN) + 4];
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: \"image\" is \"%s\", which is no image reference (NAME, "
		                      "NAME:TAG, NAME@sha256:DIGEST or sha256:ID)",
		                      path, shown(cfg->image, v));
	}
	/* (its value not shown: a user or a query in it may be a token) */
	if ((cfg->has & KR_SC_GATEWAY) && !kr_gateway_url_valid(cfg->gateway))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: \"gateway\" is no URL kbox takes (http:// or https://, "
		                      "a host, a port from 1 to 65535, no user, query or "
		                      "fragment)",
		                      path);
	if ((cfg->has & KR_SC_ENGINE) && !kr_engine_socket_valid(cfg->engine)) {
		char v[KX_NAME_ESCAPED_MAX(SHOWN_IN) + 4];
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "%s: \"engine\" is \"%s\", which is no unix socket's absolute "
		        "path of at most 107 bytes (unix:///PATH)",
		        path, shown(cfg->engine, v));
	}
	for (size_t i = 0; i < cfg->n_env; i++) {
		const char *eq = strchr(cfg->env[i], '=');
		char v[KX_NAME_ESCAPED_MAX(SHOWN_IN) + 4];
		if (!eq || eq == cfg->env[i])
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "%s: \"env\" holds \"%s\", which is not NAME=VALUE",
			                      path, shown(cfg->env[i], v));
	}
	return 0;
}

static int from_json(kr_session_config_t *cfg, json_t *j, const char *path, kbox_error_t *err)
{
	const char *name;
	json_t *v;
	kx_buf_t unknown = {0};
	size_t n_unknown = 0;
	int rc = -1;

	json_object_foreach(j, name, v)
	{
		const struct key *k = find_key(name);
		if (!k) {
			char shown_name[KX_NAME_ESCAPED_MAX(SHOWN_IN) + 4];
			kx_buf_appendf(&unknown, "%s\"%s\"", n_unknown++ ? ", " : "",
			               shown(name, shown_name));
			continue;
		}
		if (!type_ok(k, v)) {
			/* an array of strings: say what is not one */
			size_t i;
			json_t *e, *bad = NULL;
			if (k->type == T_STRINGS && json_is_array(v))
				json_array_foreach(v, i, e) if (!bad && !json_is_string(e)) bad = e;
			kbox_error_set(err, KBOX_E_INVALID, "%s: \"%s\" must be %s, not %s%s", path,
			               name, type_words[k->type], bad ? "an array holding " : "",
			               json_kind(bad ? bad : v));
			goto out;
		}
		/* a stored quota of 0 is the default, as it always was */
		if (k->bit == KR_SC_OUTPUTS_QUOTA && json_integer_value(v) == 0)
			continue;
		if (take_value(cfg, k, v) < 0) {
			kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
			goto out;
		}
	}
	if (n_unknown) {
		kbox_error_set(err, KBOX_E_INVALID, "%s: unknown key%s %s", path,
		               n_unknown > 1 ? "s" : "",
		               unknown.failed ? "(out of memory)" : unknown.data);
		goto out;
	}
	if (check_values(cfg, path, err) < 0)
		goto out;
	/* a backend the command line would refuse is refused here too, by
	 * its name (newcomer 11, F3: it was sealed, then its start warned of
	 * an unsandboxed kernel and failed) */
	if ((cfg->has & KR_SC_BACKEND) && !kr_backend_find(cfg->backend)) {
		char said[KX_NAME_ESCAPED_MAX(SHOWN_IN) + 4];
		kx_buf_t known = {0};
		for (const char *const *b = kr_backend_names(); *b; b++)
			kx_buf_appendf(&known, "%s%s", known.len ? ", " : "", *b);
		kbox_error_set(err, KBOX_E_INVALID,
		               "%s: \"backend\" is \"%s\", which kbox does "
		               "not know (available: %s)",
		               path, shown(cfg->backend, said),
		               known.failed || !known.data ? "?" : known.data);
		kx_buf_reset(&known);
		goto out;
	}
	rc = 0;
out:
	kx_buf_reset(&unknown);
	return rc;
}

/* ---- the seal ----
 *
 * Run by an ordinary user, every sandbox runs as that user: code in one
 * that could reach a state directory (a directory it held open, later
 * used as one) could rewrite a session's session.json, and with it how
 * its next supervisor starts the kernel (--backend none, a workspace of
 * the whole home).  So kbox seals what it writes: "seal" is the
 * HMAC-SHA-256, under the user's key (kr_live_key, where no sandbox
 * reaches), of the session's directory (its path: another session's file,
 * of this state directory or another, does not match) and of the file as
 * written without the seal; a file whose seal does not match is refused.  Under root each
 * sandbox runs as a uid of its own that cannot write the state
 * directory: nothing is sealed, and a seal is ignored. */

#define SEAL_KEY "seal"
#define SEAL_HEX (2 * KX_SHA256_LEN)
#define DUMP_FLAGS (JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9))

static bool sealing(void)
{
	return geteuid() != 0;
}

/* The last component of DIR: the session's name. */
static const char *session_name(const char *dir)
{
	const char *s = strrchr(dir, '/');
	return s && s[1] ? s + 1 : dir;
}

/* The seal of J (no "seal" in it) as DIR's session.json, in hex into HEX
 * (SEAL_HEX + 1 bytes), under the user's key, made first when there is
 * none and MAKE.  0; -2 when there is no key and MAKE is false; -1 with
 * ERR. */
static int seal_of(const json_t *j, const char *dir, bool make, char *hex, kbox_error_t *err)
{
	static const char what[] = "kbox session.json 2"; /* with its NUL */
	unsigned char key[KR_LIVE_KEY_LEN], mac[KX_SHA256_LEN];
	char key_path[PATH_MAX], *text;
	kx_hmac_sha256_t m;
	int rc;

	if ((rc = kr_live_key(key, make, key_path, err)) < 0)
		return rc;
	if (!(text = json_dumps(j, DUMP_FLAGS))) {
		explicit_bzero(key, sizeof key);
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	kx_hmac_sha256_init(&m, key, KR_LIVE_KEY_LEN);
	explicit_bzero(key, sizeof key);
	kx_hmac_sha256_update(&m, what, sizeof what);
	kx_hmac_sha256_update(&m, dir, strlen(dir) + 1);
	kx_hmac_sha256_update(&m, text, strlen(text));
	kx_hmac_sha256_final(&m, mac);
	free(text);
	for (int i = 0; i < KX_SHA256_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	return 0;
}

/* What to do about PATH, DIR's session.json, whose seal is not right
 * (WHY), into ERR. */
static int unsealed(const char *path, const char *dir, const char *why, kbox_error_t *err)
{
	const char *name = session_name(dir);
	return kbox_error_set(err, KBOX_E_INVALID,
	                      "%s is not as kbox wrote it: %s; read it, then seal it as it is "
	                      "(kbox start --reseal -s %s) or remove the session (kbox rm -s "
	                      "%s)",
	                      path, why, name, name);
}

/* Check the seal SEAL (NULL: none) of J, read from DIR's session.json at
 * PATH, without its seal, against the record of the last seal in SEALS
 * (kr_live_seals_open; -2: none).  0, or -1 with ERR. */
static int seal_check(const json_t *j, const char *seal, const char *dir, const kr_dir_id_t *id,
                      const char *path, int seals, kbox_error_t *err)
{
	char want[SEAL_HEX + 1], last[SEAL_HEX + 1];
	int rc;

	if (!seal)
		return unsealed(path, dir,
		                "it has no seal (written by an older kbox, or by something else)",
		                err);
	if ((rc = seal_of(j, dir, false, want, err)) == -1)
		return -1;
	if (rc == -2)
		return unsealed(path, dir, "its seal cannot be checked: this user's key is gone",
		                err);
	if (strlen(seal) != SEAL_HEX || !kx_equal_ct(seal, want, SEAL_HEX))
		return unsealed(path, dir,
		                "its seal does not match (it was changed, copied from another "
		                "session, moved with its state directory, or sealed with another "
		                "key)",
		                err);
	/* the seal is right; is it the last one kbox made for DIR (review 17,
	 * B17-3: an older sealed file put back would pass the seal alone) */
	if (seals == -2 || (rc = kr_live_seal_get(seals, dir, id, last, sizeof last, err)) == -2)
		return unsealed(path, dir,
		                "kbox has no record of sealing it (sealed by a kbox older than "
		                "that record, or the record was removed)",
		                err);
	if (rc == -3)
		return unsealed(path, dir,
		                "kbox has no record of sealing it in this directory (the session's "
		                "directory was made again at its path since)",
		                err);
	if (rc == -4)
		return unsealed(path, dir,
		                "kbox has no record of sealing it (sealed by a kbox older than "
		                "that record, or the record was removed)",
		                err);
	if (rc < 0)
		return -1;
	if (strlen(last) != SEAL_HEX || !kx_equal_ct(seal, last, SEAL_HEX))
		return unsealed(path, dir,
		                "it is not the file kbox sealed last for this session (an older "
		                "one, put back since)",
		                err);
	return 0;
}

/* Seal J, DIR's session.json as it will be written (a "seal" member),
 * the seal in hex also into HEX (SEAL_HEX + 1 bytes).  0, or -1 with
 * ERR. */
static int seal_put(json_t *j, const char *dir, char *hex, kbox_error_t *err)
{
	if (seal_of(j, dir, true, hex, err) < 0)
		return -1;
	if (json_object_set_new(j, SEAL_KEY, json_string(hex)) < 0)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	return 0;
}

/* The identity of the session directory DIR (AT: held open, or
 * AT_FDCWD: reached by path, through no link below the state directory)
 * into ID.  0, or -1 with ERR. */
static int dir_identity(int at, const char *dir, kr_dir_id_t *id, kbox_error_t *err)
{
	int fd = at;
	if (at == AT_FDCWD && (fd = kx_open_path(AT_FDCWD, dir, O_PATH | O_DIRECTORY, 0)) < 0)
		return kbox_error_set_sys(err, "the session directory %s", dir);
	if (kr_live_dir_id(fd, id) < 0) {
		int e = errno;
		if (fd != at)
			close(fd);
		errno = e;
		return kbox_error_set_sys(err, "the session directory %s", dir);
	}
	if (fd != at)
		close(fd);
	return 0;
}

/* Read DIR's session.json, from the directory AT, into J: 0; 1 when
 * there is none; -1 with ERR.  At most KR_SESSION_CONFIG_MAX bytes, read
 * whole in a few reads (review 18, W18-2: a file padded with gigabytes
 * of blanks, read byte by byte, held the seals' lock for hours). */
static int read_json(int at, const char *path, json_t **j, kbox_error_t *err)
{
	json_error_t je;
	char *buf;
	ssize_t got;
	int fd = kx_open_file(at, at == AT_FDCWD ? path : "session.json", O_RDONLY, 0);

	*j = NULL;
	if (fd < 0 && errno == ENOENT)
		return 1;
	if (fd < 0)
		return kbox_error_set_sys(err, "cannot read %s", path);
	if (!(buf = malloc(KR_SESSION_CONFIG_MAX + 1))) {
		close(fd);
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	got = kx_pread_full(fd, buf, KR_SESSION_CONFIG_MAX + 1, 0);
	close(fd);
	if (got < 0)
		kbox_error_set_sys(err, "cannot read %s", path);
	else if (got > KR_SESSION_CONFIG_MAX)
		kbox_error_set(err, KBOX_E_INVALID,
		               "%s is more than the %d bytes a session's configuration may have: "
		               "kbox did not write it",
		               path, KR_SESSION_CONFIG_MAX);
	else if (!(*j = json_loadb(buf, (size_t)got, JSON_REJECT_DUPLICATES, &je)))
		kbox_error_set(err, KBOX_E_INVALID, "%s: line %d, column %d: %s", path, je.line,
		               je.column, je.text);
	free(buf);
	return *j ? 0 : -1;
}

/* kr_session_config_load of DIR (held open as AT, or AT_FDCWD), checking
 * the seal when CHECK_SEAL. */
static int load(kr_session_config_t *cfg, int at, const char *dir, bool check_seal,
                kbox_error_t *err)
{
	char path[PATH_MAX + 16];
	kr_dir_id_t id;
	json_t *j = NULL;
	int seals = -2, rc = -1;

	kr_session_config_init(cfg);
	if (snprintf(path, sizeof path, "%s/session.json", dir) >= (int)sizeof path)
		return kbox_error_set(err, KBOX_E_INVALID, "%s/session.json: path too long", dir);
	/* the records of the seals, locked before the file is read: a save
	 * holds them while it writes the file and its record */
	check_seal = check_seal && sealing();
	if (check_seal && (dir_identity(at, dir, &id, err) < 0 ||
	                   (seals = kr_live_seals_open(false, false, err)) == -1))
		return -1;
	if ((rc = read_json(at, path, &j, err)) == 1) {
		/* none: a new session's defaults, but not where kbox sealed one
		 * (review 18, W18-1: code that reached the state directory
		 * removed it to have the session start on the defaults) */
		/* nor where the directory at this path is not the one kbox
		 * sealed one in (review 19, W19-1: the session's directory renamed
		 * away, an empty one made in its place), nor under a record of an
		 * older kbox, which kept no directory's identity */
		char last[SEAL_HEX + 1];
		rc = 0;
		if (seals >= 0 &&
		    (rc = kr_live_seal_get(seals, dir, &id, last, sizeof last, err)) != -1 &&
		    rc != -2) {
			const char *name = session_name(dir);
			rc = kbox_error_set(
			        err, KBOX_E_INVALID,
			        "%s was removed since kbox sealed it%s (kbox removes it only "
			        "with its session): the session's configuration is gone; "
			        "remove the session (kbox rm -s %s; kbox get -s %s copies its "
			        "workspace's files out first) and make it again",
			        path, rc == -3 ? ", or its directory was made again" : "", name,
			        name);
		} else if (rc == -2)
			rc = 0; /* (no record: a new session) */
		goto out;
	}
	if (rc < 0)
		goto out;
	rc = -1;
	if (!json_is_object(j))
		kbox_error_set(err, KBOX_E_INVALID, "%s: not a JSON object", path);
	else {
		/* the seal is no key of the configuration's: taken out first */
		json_t *s = json_object_get(j, SEAL_KEY);
		char *seal = json_is_string(s) ? strdup(json_string_value(s)) : NULL;
		if (s && !json_is_string(s))
			kbox_error_set(err, KBOX_E_INVALID, "%s: \"%s\" must be %s, not %s", path,
			               SEAL_KEY, type_words[T_STRING], json_kind(s));
		else if (s && !seal)
			kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		else {
			/* the seal first: what a file kbox did not write holds
			 * reaches no message of kbox's (review 20, W20-1) */
			json_object_del(j, SEAL_KEY);
			rc = check_seal ? seal_check(j, seal, dir, &id, path, seals, err) : 0;
			if (rc == 0)
				rc = from_json(cfg, j, path, err);
		}
		free(seal);
	}
	json_decref(j);
out:
	if (seals >= 0)
		close(seals);
	if (rc < 0)
		kr_session_config_free(cfg);
	return rc;
}

int kr_session_config_load(kr_session_config_t *cfg, const char *dir, kbox_error_t *err)
{
	return load(cfg, AT_FDCWD, dir, true, err);
}

int kr_session_config_load_at(kr_session_config_t *cfg, int dir_fd, const char *dir,
                              kbox_error_t *err)
{
	return load(cfg, dir_fd, dir, true, err);
}

int kr_session_config_reseal(const char *dir, kr_session_config_t *cfg, kbox_error_t *err)
{
	char path[PATH_MAX + 16];
	int rc, fd;

	/* none is nothing to seal (newcomer 11, F1: the defaults were
	 * printed as sealed, and nothing written) */
	kr_session_config_init(cfg);
	if (snprintf(path, sizeof path, "%s/session.json", dir) >= (int)sizeof path)
		return kbox_error_set(err, KBOX_E_INVALID, "%s/session.json: path too long", dir);
	if ((fd = kx_open_file(AT_FDCWD, path, O_RDONLY, 0)) < 0 && errno == ENOENT)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s is not there: nothing to seal; remove the session (kbox "
		                      "rm -s %s) and make it again",
		                      path, session_name(dir));
	if (fd >= 0)
		close(fd);
	rc = load(cfg, AT_FDCWD, dir, false, err);
	if (rc == 0 && cfg->has)
		rc = kr_session_config_save(cfg, dir, err);
	return rc;
}

json_t *kr_session_config_to_json(const kr_session_config_t *cfg)
{
	json_t *j = json_object(), *v = NULL;

	for (size_t i = 0; j && i < N_KEYS; i++) {
		const struct key *k = &keys[i];
		if (!(cfg->has & k->bit) && !(k->bit & ALWAYS_SAVED))
			continue;
		switch (k->type) {
		case T_STRING:
			v = json_string(*AT(cfg, k, const char *));
			break;
		case T_COUNT:
		case T_INTEGER:
			v = json_integer(*AT(cfg, k, long long));
			break;
		case T_NUMBER:
			v = json_real(*AT(cfg, k, double));
			break;
		case T_BOOL:
			v = json_boolean(*AT(cfg, k, bool));
			break;
		case T_STRINGS:
			if ((v = json_array()))
				for (size_t e = 0; e < cfg->n_env; e++)
					if (json_array_append_new(v, json_string(cfg->env[e])) < 0)
						break;
			if (v && json_array_size(v) != cfg->n_env) {
				json_decref(v);
				v = NULL;
			}
			break;
		}
		if (!v || json_object_set_new(j, k->name, v) < 0) {
			json_decref(j);
			j = NULL;
		}
	}
	return j;
}

int kr_session_config_save(const kr_session_config_t *cfg, const char *dir, kbox_error_t *err)
{
	char path[PATH_MAX + 16];
	json_t *j = kr_session_config_to_json(cfg);
	char *text = NULL, hex[SEAL_HEX + 1];
	int seals = -1, rc = -1;
	kr_dir_id_t id;
	size_t len;

	if (!j)
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	/* sealed, and the seal recorded as DIR's last, with the records
	 * locked from before the file is written until its record is */
	if (sealing() &&
	    ((seals = kr_live_seals_open(true, true, err)) < 0 || seal_put(j, dir, hex, err) < 0)) {
		json_decref(j);
		goto out;
	}
	text = json_dumps(j, DUMP_FLAGS);
	json_decref(j);
	if (!text) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto out;
	}
	if (snprintf(path, sizeof path, "%s/session.json", dir) >= (int)sizeof path) {
		kbox_error_set(err, KBOX_E_INVALID, "%s/session.json: path too long", dir);
		goto out;
	}
	/* json_dumps leaves room for one more byte: the final newline */
	len = strlen(text);
	text[len++] = '\n';
	/* whole or not at all, and through no link below the state directory
	 * (kx_write_atomic) */
	if (kx_write_atomic(AT_FDCWD, path, text, len, 0600, KX_DURABLE) < 0) {
		kbox_error_set_sys(err, "cannot write %s", path);
		goto out;
	}
	if (seals >= 0 && (dir_identity(AT_FDCWD, dir, &id, err) < 0 ||
	                   kr_live_seal_put(seals, dir, &id, hex, err) < 0))
		goto out;
	rc = 0;
out:
	if (seals >= 0)
		close(seals);
	free(text);
	return rc;
}

/* Make key K of CFG the string S (copied), the session's own. */
static int merge_string(kr_session_config_t *cfg, unsigned bit, const char *s)
{
	const struct key *k = NULL;
	char *copy;
	for (size_t i = 0; i < N_KEYS && !k; i++)
		if (keys[i].bit == bit)
			k = &keys[i];
	if (!(copy = strdup(s))) /* before the free: S may be CFG's own */
		return -1;
	free_value(cfg, k);
	*AT(cfg, k, const char *) = copy;
	cfg->has |= bit;
	return 0;
}

/* Make the number at FIELD of CFG V, when V >= 0 (given). */
#define MERGE_NUMBER(cfg, bit, field, v)     \
	do {                                 \
		if ((v) >= 0) {              \
			(cfg)->field = (v);  \
			(cfg)->has |= (bit); \
		}                            \
	} while (0)

int kr_session_config_merge(kr_session_config_t *cfg, const kr_session_opts_t *o, kbox_error_t *err)
{
	const struct {
		unsigned bit;
		const char *s;
	} strings[] = {{KR_SC_NAME, o->name},
	               {KR_SC_KERNEL, o->kernel},
	               {KR_SC_BACKEND, o->backend},
	               {KR_SC_ROOTFS, o->rootfs},
	               {KR_SC_IMAGE, o->image},
	               {KR_SC_ENGINE, o->engine},
	               {KR_SC_WORKSPACE, o->workspace},
	               {KR_SC_GATEWAY, o->gateway},
	               {KR_SC_GATEWAY_CA, o->gateway_ca}};

	for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
		if (strings[i].s && merge_string(cfg, strings[i].bit, strings[i].s) < 0)
			goto nomem;
	MERGE_NUMBER(cfg, KR_SC_TTL_MS, ttl_ms, o->ttl_ms);
	MERGE_NUMBER(cfg, KR_SC_MEMORY, memory, o->memory);
	MERGE_NUMBER(cfg, KR_SC_CPUS, cpus, o->cpus);
	MERGE_NUMBER(cfg, KR_SC_PIDS, pids, o->pids);
	MERGE_NUMBER(cfg, KR_SC_TMP_SIZE, tmp_size, o->tmp_size);
	MERGE_NUMBER(cfg, KR_SC_FILE_SIZE, file_size, o->file_size);
	MERGE_NUMBER(cfg, KR_SC_OUTPUTS_QUOTA, outputs_quota, o->outputs_quota);
	MERGE_NUMBER(cfg, KR_SC_OUTPUT_RATE, output_rate, o->output_rate);
	MERGE_NUMBER(cfg, KR_SC_OWNER_PID, owner_pid, o->owner_pid);
	MERGE_NUMBER(cfg, KR_SC_LAUNCH_TIMEOUT, launch_timeout, o->launch_timeout);
	MERGE_NUMBER(cfg, KR_SC_HOME_CONFIG, home_config, o->home_config);
	MERGE_NUMBER(cfg, KR_SC_EPHEMERAL, ephemeral, o->ephemeral);
	MERGE_NUMBER(cfg, KR_SC_WORKSPACE_RO, workspace_ro, o->workspace_ro);
	/* a workspace given comes with its identity, or with none: never
	 * with the one the file had for another */
	if (o->workspace && o->workspace_st) {
		cfg->workspace_dev = (long long)o->workspace_st->st_dev;
		cfg->workspace_ino = (long long)o->workspace_st->st_ino;
		cfg->has |= KR_SC_WORKSPACE_DEV | KR_SC_WORKSPACE_INO;
	} else if (o->workspace) {
		cfg->workspace_dev = cfg->workspace_ino = 0;
		cfg->has &= ~(unsigned)(KR_SC_WORKSPACE_DEV | KR_SC_WORKSPACE_INO);
	}
	if (o->functions && merge_string(cfg, KR_SC_FUNCTIONS, o->functions) < 0)
		goto nomem;
	if (o->relay && merge_string(cfg, KR_SC_RELAY, o->relay) < 0)
		goto nomem;
	if (o->n_env) {
		char **v = calloc(o->n_env + 1, sizeof *v);
		for (size_t i = 0; v && i < o->n_env; i++)
			if (!(v[i] = strdup(o->env[i]))) {
				while (i > 0)
					free(v[--i]);
				free(v);
				v = NULL;
			}
		if (!v)
			goto nomem;
		free_value(cfg, find_key("env"));
		cfg->env = v;
		cfg->n_env = o->n_env;
		cfg->has |= KR_SC_ENV;
	}
	return 0;
nomem:
	return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
}

bool kr_session_opts_empty(const kr_session_opts_t *o)
{
	return !o->name && !o->kernel && !o->backend && !o->rootfs && !o->workspace && !o->image &&
	       !o->engine && o->ttl_ms < 0 && o->memory < 0 && o->pids < 0 && o->tmp_size < 0 &&
	       o->file_size < 0 && o->outputs_quota < 0 && o->output_rate < 0 && o->owner_pid < 0 &&
	       o->cpus < 0 && o->home_config < 0 && o->ephemeral < 0 && o->workspace_ro < 0 &&
	       !o->n_env && !o->functions && !o->relay && !o->gateway && !o->gateway_ca &&
	       o->launch_timeout < 0;
}
