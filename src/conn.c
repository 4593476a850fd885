/* src/conn.c — Jupyter connection files. */
#include "private.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sodium.h>
#include <jansson.h>

struct kbox_conn {
	kbox_transport_t transport;
	char *ip; /* 127.0.0.1, or the ipc path prefix */
	int ports[KBOX_CH_COUNT];
	unsigned char *key; /* sodium_malloc'ed; not NUL-terminated */
	size_t keylen;
	char *scheme;
	char *kernel_name;
	char *endpoints[KBOX_CH_COUNT];
};

static const char *const channel_names[KBOX_CH_COUNT] = {"shell", "iopub", "stdin", "control",
                                                         "hb"};

const char *kbox_channel_name(kbox_channel_t channel)
{
	return (unsigned)channel < KBOX_CH_COUNT ? channel_names[channel] : "?";
}

static kbox_conn_t *conn_alloc(void)
{
	kbox_conn_t *self = calloc(1, sizeof *self);
	if (!self)
		return NULL;
	self->scheme = strdup("hmac-sha256");
	self->kernel_name = strdup("");
	if (!self->scheme || !self->kernel_name)
		kbox_conn_destroy(&self);
	return self;
}

static int conn_set_key(kbox_conn_t *self, const void *key, size_t len)
{
	if (self->key)
		sodium_free(self->key);
	self->key = sodium_malloc(len ? len : 1);
	if (!self->key)
		return -1;
	memcpy(self->key, key, len);
	self->keylen = len;
	return 0;
}

/* Build the five endpoint strings from transport, ip and ports. */
static int conn_make_endpoints(kbox_conn_t *self, kbox_error_t *err)
{
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		char buf[PATH_MAX + 32];
		int n;
		if (self->transport == KBOX_TRANSPORT_IPC)
			n = snprintf(buf, sizeof buf, "ipc://%s-%d", self->ip, self->ports[ch]);
		else
			n = snprintf(buf, sizeof buf, "tcp://%s:%d", self->ip, self->ports[ch]);
		if (n < 0 || (size_t)n >= sizeof buf)
			return kbox_error_set(err, KBOX_E_INVALID, "endpoint for %s is too long",
			                      channel_names[ch]);
		free(self->endpoints[ch]);
		self->endpoints[ch] = strdup(buf);
		if (!self->endpoints[ch])
			return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	return 0;
}

/* A fresh 256-bit key as 64 lowercase hex characters (what Jupyter writes). */
static int conn_new_key(kbox_conn_t *self)
{
	unsigned char raw[KBOX_KEY_BYTES];
	char hex[2 * KBOX_KEY_BYTES + 1];
	int rc;
	randombytes_buf(raw, sizeof raw);
	sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
	rc = conn_set_key(self, hex, 2 * KBOX_KEY_BYTES);
	sodium_memzero(raw, sizeof raw);
	sodium_memzero(hex, sizeof hex);
	return rc;
}

kbox_conn_t *kbox_conn_new_ipc(const char *dir, kbox_error_t *err)
{
	kbox_conn_t *self;
	struct stat st;
	char prefix[PATH_MAX], real[PATH_MAX], tag[9];
	unsigned char rnd[4];
	int port = 1;

	if (kbox_init() < 0) {
		kbox_error_set(err, KBOX_E_SYSTEM, "libsodium failed to initialise");
		return NULL;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || !realpath(dir, real)) {
		kbox_error_set_sys(err, "ipc directory %s", dir);
		return NULL;
	}
	/* absolute (the kernel may run in another directory) and tagged (two
	 * kernels in one directory must not share sockets: the files appear
	 * only when the kernel binds) */
	randombytes_buf(rnd, sizeof rnd);
	sodium_bin2hex(tag, sizeof tag, rnd, sizeof rnd);
	if ((size_t)snprintf(prefix, sizeof prefix, "%s/kernel-%s-ipc", real, tag) >=
	    sizeof prefix - 16) {
		kbox_error_set(err, KBOX_E_INVALID, "ipc directory path %s is too long", dir);
		return NULL;
	}
	self = conn_alloc();
	if (!self || !(self->ip = strdup(prefix)) || conn_new_key(self) < 0) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		kbox_conn_destroy(&self);
		return NULL;
	}
	self->transport = KBOX_TRANSPORT_IPC;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		char path[PATH_MAX + 16];
		for (;; port++) {
			snprintf(path, sizeof path, "%s-%d", prefix, port);
			if (lstat(path, &st) < 0) {
				if (errno == ENOENT)
					break;
				kbox_error_set_sys(err, "ipc socket %s", path);
				kbox_conn_destroy(&self);
				return NULL;
			}
		}
		self->ports[ch] = port++;
	}
	if (conn_make_endpoints(self, err) < 0)
		kbox_conn_destroy(&self);
	return self;
}

/* Bind port 0 on 127.0.0.1 and read back the port the system chose.  The
 * sockets stay open until all five are chosen so no port is handed out twice. */
kbox_conn_t *kbox_conn_new_tcp(kbox_error_t *err)
{
	kbox_conn_t *self;
	int fds[KBOX_CH_COUNT];
	int ch;

	for (ch = 0; ch < KBOX_CH_COUNT; ch++)
		fds[ch] = -1;
	if (kbox_init() < 0) {
		kbox_error_set(err, KBOX_E_SYSTEM, "libsodium failed to initialise");
		return NULL;
	}
	self = conn_alloc();
	if (!self || !(self->ip = strdup("127.0.0.1")) || conn_new_key(self) < 0) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	self->transport = KBOX_TRANSPORT_TCP;
	for (ch = 0; ch < KBOX_CH_COUNT; ch++) {
		struct sockaddr_in sa;
		socklen_t len = sizeof sa;
		memset(&sa, 0, sizeof sa);
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fds[ch] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fds[ch] < 0 || bind(fds[ch], (struct sockaddr *)&sa, sizeof sa) < 0 ||
		    getsockname(fds[ch], (struct sockaddr *)&sa, &len) < 0) {
			kbox_error_set_sys(err, "choosing a free tcp port on 127.0.0.1");
			goto fail;
		}
		self->ports[ch] = ntohs(sa.sin_port);
	}
	for (ch = 0; ch < KBOX_CH_COUNT; ch++)
		close(fds[ch]);
	if (conn_make_endpoints(self, err) < 0)
		kbox_conn_destroy(&self);
	return self;
fail:
	for (ch = 0; ch < KBOX_CH_COUNT; ch++)
		if (fds[ch] >= 0)
			close(fds[ch]);
	kbox_conn_destroy(&self);
	return NULL;
}

static const char *const port_fields[KBOX_CH_COUNT] = {"shell_port", "iopub_port", "stdin_port",
                                                       "control_port", "hb_port"};

/* The connection file ROOT's transport (default tcp) into SELF.  0, or -1
 * with ERR set; so for every conn_read_* below. */
static int conn_read_transport(kbox_conn_t *self, json_t *root, const char *source,
                               kbox_error_t *err)
{
	json_t *v = json_object_get(root, "transport");
	const char *s = v ? json_string_value(v) : "tcp";

	if (!s) {
		kbox_error_set(err, KBOX_E_INVALID, "connection file %s: transport is not a string",
		               source);
		return -1;
	}
	if (strcmp(s, "tcp") == 0)
		self->transport = KBOX_TRANSPORT_TCP;
	else if (strcmp(s, "ipc") == 0)
		self->transport = KBOX_TRANSPORT_IPC;
	else {
		kbox_error_set(err, KBOX_E_INVALID,
		               "connection file %s: transport \"%s\" is not tcp or ipc", source, s);
		return -1;
	}
	return 0;
}

/* ROOT's ip (for tcp, 127.0.0.1 when it is missing). */
static int conn_read_ip(kbox_conn_t *self, json_t *root, const char *source, kbox_error_t *err)
{
	json_t *v = json_object_get(root, "ip");
	const char *s;

	if (!v)
		s = self->transport == KBOX_TRANSPORT_TCP ? "127.0.0.1" : NULL;
	else
		s = json_string_value(v);
	if (!s || !*s) {
		kbox_error_set(err, KBOX_E_INVALID, "connection file %s: ip is missing or empty",
		               source);
		return -1;
	}
	if (!(self->ip = strdup(s))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return -1;
	}
	return 0;
}

/* ROOT's five ports, each an integer 1-65535. */
static int conn_read_ports(kbox_conn_t *self, json_t *root, const char *source, kbox_error_t *err)
{
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		json_t *v = json_object_get(root, port_fields[ch]);
		json_int_t port;

		if (!v) {
			kbox_error_set(err, KBOX_E_INVALID, "connection file %s: %s is missing",
			               source, port_fields[ch]);
			return -1;
		}
		if (!json_is_integer(v)) {
			kbox_error_set(err, KBOX_E_INVALID,
			               "connection file %s: %s is not an integer", source,
			               port_fields[ch]);
			return -1;
		}
		port = json_integer_value(v);
		if (port < 1 || port > 65535) {
			kbox_error_set(err, KBOX_E_INVALID,
			               "connection file %s: %s %" JSON_INTEGER_FORMAT
			               " is out of range 1-65535",
			               source, port_fields[ch], port);
			return -1;
		}
		self->ports[ch] = (int)port;
	}
	return 0;
}

/* ROOT's signature scheme (hmac-sha256, the default, only) and its key,
 * which must not be empty. */
static int conn_read_key(kbox_conn_t *self, json_t *root, const char *source, kbox_error_t *err)
{
	json_t *v = json_object_get(root, "signature_scheme");
	const char *s = v ? json_string_value(v) : "hmac-sha256";

	if (!s) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "connection file %s: signature_scheme is not a string", source);
		return -1;
	}
	if (strcmp(s, "hmac-sha256") != 0) {
		kbox_error_set(
		        err, KBOX_E_UNSUPPORTED,
		        "connection file %s: signature scheme \"%s\" is not supported (only hmac-sha256)",
		        source, s);
		return -1;
	}
	v = json_object_get(root, "key");
	if (!v || !json_is_string(v)) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "connection file %s: key is missing or not a string", source);
		return -1;
	}
	if (json_string_length(v) == 0) {
		kbox_error_set(
		        err, KBOX_E_INVALID,
		        "connection file %s: key is empty (messages would be unauthenticated)",
		        source);
		return -1;
	}
	if (conn_set_key(self, json_string_value(v), json_string_length(v)) < 0) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return -1;
	}
	return 0;
}

kbox_conn_t *kbox_conn_from_json(const void *json_obj, const char *source, kbox_error_t *err)
{
	json_t *root = (json_t *)json_obj;
	kbox_conn_t *self = NULL;
	json_t *v;

	if (kbox_init() < 0) {
		kbox_error_set(err, KBOX_E_SYSTEM, "libsodium failed to initialise");
		return NULL;
	}
	if (!json_is_object(root)) {
		kbox_error_set(err, KBOX_E_INVALID, "connection file %s: not a JSON object",
		               source);
		return NULL;
	}
	self = conn_alloc();
	if (!self) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	if (conn_read_transport(self, root, source, err) < 0 ||
	    conn_read_ip(self, root, source, err) < 0 ||
	    conn_read_ports(self, root, source, err) < 0 ||
	    conn_read_key(self, root, source, err) < 0)
		goto fail;
	v = json_object_get(root, "kernel_name");
	if (json_is_string(v))
		kbox_conn_set_kernel_name(self, json_string_value(v));
	if (conn_make_endpoints(self, err) < 0)
		goto fail;
	return self;
fail:
	kbox_conn_destroy(&self);
	return NULL;
}

#define CONN_FILE_MAX 65536

/* Wipe LEN bytes read into BUF, and free it unless it is SMALL (the stack). */
static void wipe_buf(char *buf, char *small, size_t len)
{
	if (buf == small)
		sodium_memzero(small, len);
	else
		sodium_free(buf); /* wipes it all */
}

kbox_conn_t *kbox_conn_load(const char *path, kbox_error_t *err)
{
	json_error_t jerr;
	json_t *root;
	kbox_conn_t *self;
	/* read into our own buffer so the key can be wiped afterwards (on the
	 * stack for a usual, ~300-byte file: a guarded allocation costs a
	 * short-lived process more than the rest of the parse) */
	char small[4096], *buf = small;
	size_t len = 0, size = sizeof small;
	int fd;

	if (kbox_init() < 0) {
		kbox_error_set(err, KBOX_E_SYSTEM, "libsodium failed to initialise");
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		kbox_error_set_sys(err, "connection file %s", path);
		goto fail;
	}
	for (;;) {
		ssize_t r;
		if (len == size && buf == small) { /* a big one: the limit at once */
			if (!(buf = sodium_malloc(CONN_FILE_MAX))) {
				kbox_error_set(err, KBOX_E_NOMEM, "out of memory reading %s", path);
				goto fail;
			}
			memcpy(buf, small, len);
			size = CONN_FILE_MAX;
		}
		r = read(fd, buf + len, size - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			kbox_error_set_sys(err, "connection file %s", path);
			goto fail;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len == CONN_FILE_MAX) {
			kbox_error_set(err, KBOX_E_INVALID,
			               "connection file %s: larger than %d bytes", path,
			               CONN_FILE_MAX - 1);
			goto fail;
		}
	}
	close(fd);
	fd = -1;
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	wipe_buf(buf, small, len);
	buf = small;
	len = 0;
	if (!root) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "connection file %s: invalid JSON at line %d: %s", path, jerr.line,
		               jerr.text);
		return NULL;
	}
	self = kbox_conn_from_json(root, path, err);
	/* the key string is in ROOT: wipe it before freeing */
	{
		json_t *k = json_object_get(root, "key");
		if (json_is_string(k) && json_string_length(k))
			sodium_memzero((void *)json_string_value(k), json_string_length(k));
	}
	json_decref(root);
	return self;
fail:
	if (fd >= 0)
		close(fd);
	wipe_buf(buf, small, len);
	return NULL;
}

static int conn_save(const kbox_conn_t *self, const char *path, const kx_ids_t *ids,
                     kbox_error_t *err);

/* Only in a private directory of ours; the key never stays in freed memory. */
int kbox_conn_save(const kbox_conn_t *self, const char *path, kbox_error_t *err)
{
	return conn_save(self, path, NULL, err);
}

int kbox_conn_save_owned(const kbox_conn_t *self, const char *path, uid_t uid, gid_t gid,
                         kbox_error_t *err)
{
	kx_ids_t ids = {uid, gid};
	return conn_save(self, path, &ids, err);
}

/* Write SELF to PATH, in a private directory of ours (IDS NULL) or of
 * IDS's user, the file then theirs. */
static int conn_save(const kbox_conn_t *self, const char *path, const kx_ids_t *ids,
                     kbox_error_t *err)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	char *text = NULL;
	int fd = -1, rc = -1;

	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else if ((size_t)(slash - path) >= sizeof dir)
		return kbox_error_set(err, KBOX_E_INVALID, "connection file path %s is too long",
		                      path);
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	if (ids) {
		/* a directory of that user's (a sandbox's sockets): it must be
		 * theirs and closed to others */
		struct stat st;
		if (lstat(dir, &st) < 0)
			return kbox_error_set_sys(err, "directory %s", dir);
		if (!S_ISDIR(st.st_mode) || st.st_uid != ids->uid || (st.st_mode & 077))
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "directory %s is not owned by uid %u with mode 0700",
			                      dir, (unsigned)ids->uid);
	} else if (kbox_check_private_dir(dir, err) < 0)
		return -1;

	if (!(text = kbox_conn_json(self))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory writing %s", path);
		goto out;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		kbox_error_set_sys(err, "connection file %s: cannot create", path);
		goto out;
	}
	if (fchmod(fd, 0600) < 0) {
		kbox_error_set_sys(err, "connection file %s: chmod", path);
		goto out_unlink;
	}
	if (ids && fchown(fd, ids->uid, ids->gid) < 0) {
		kbox_error_set_sys(err, "connection file %s: chown to uid %u", path,
		                   (unsigned)ids->uid);
		goto out_unlink;
	}
	if (kx_write_all(fd, text, strlen(text)) < 0) {
		kbox_error_set_sys(err, "connection file %s: write", path);
		goto out_unlink;
	}
	if (close(fd) < 0) {
		fd = -1;
		kbox_error_set_sys(err, "connection file %s: close", path);
		goto out_unlink;
	}
	fd = -1;
	rc = 0;
	goto out;
out_unlink:
	unlink(path);
out:
	if (fd >= 0)
		close(fd);
	kbox_conn_json_free(&text);
	return rc;
}

char *kbox_conn_json(const kbox_conn_t *self)
{
	json_t *root;
	char *text;
	if (!self)
		return NULL;
	root = json_pack("{s:s, s:s, s:s#, s:s, s:s, s:i, s:i, s:i, s:i, s:i}", "transport",
	                 self->transport == KBOX_TRANSPORT_IPC ? "ipc" : "tcp", "ip", self->ip,
	                 "key", (const char *)self->key, (int)self->keylen, "signature_scheme",
	                 self->scheme, "kernel_name", self->kernel_name, "shell_port",
	                 self->ports[KBOX_CH_SHELL], "iopub_port", self->ports[KBOX_CH_IOPUB],
	                 "stdin_port", self->ports[KBOX_CH_STDIN], "control_port",
	                 self->ports[KBOX_CH_CONTROL], "hb_port", self->ports[KBOX_CH_HB]);
	text = root ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
	if (root) {
		json_t *k = json_object_get(root, "key");
		if (json_is_string(k))
			sodium_memzero((void *)json_string_value(k), json_string_length(k));
		json_decref(root);
	}
	return text;
}

void kbox_conn_json_free(char **text)
{
	if (!text || !*text)
		return;
	sodium_memzero(*text, strlen(*text));
	free(*text);
	*text = NULL;
}

const char *kbox_conn_endpoint(const kbox_conn_t *self, kbox_channel_t channel)
{
	return (unsigned)channel < KBOX_CH_COUNT ? self->endpoints[channel] : NULL;
}

kbox_transport_t kbox_conn_transport(const kbox_conn_t *self)
{
	return self->transport;
}
const char *kbox_conn_ip(const kbox_conn_t *self)
{
	return self->ip;
}
int kbox_conn_port(const kbox_conn_t *self, kbox_channel_t channel)
{
	return (unsigned)channel < KBOX_CH_COUNT ? self->ports[channel] : -1;
}
const char *kbox_conn_scheme(const kbox_conn_t *self)
{
	return self->scheme;
}
const unsigned char *kbox_conn_key(const kbox_conn_t *self, size_t *len)
{
	if (len)
		*len = self->keylen;
	return self->key;
}
const char *kbox_conn_kernel_name(const kbox_conn_t *self)
{
	return self->kernel_name;
}

void kbox_conn_set_kernel_name(kbox_conn_t *self, const char *name)
{
	char *copy = strdup(name ? name : "");
	if (copy) {
		free(self->kernel_name);
		self->kernel_name = copy;
	}
}

kbox_conn_t *kbox_conn_dup(const kbox_conn_t *self)
{
	kbox_conn_t *copy = conn_alloc();
	if (!copy)
		return NULL;
	copy->transport = self->transport;
	memcpy(copy->ports, self->ports, sizeof copy->ports);
	copy->ip = strdup(self->ip);
	free(copy->scheme);
	copy->scheme = strdup(self->scheme);
	kbox_conn_set_kernel_name(copy, self->kernel_name);
	if (!copy->ip || !copy->scheme || conn_set_key(copy, self->key, self->keylen) < 0 ||
	    conn_make_endpoints(copy, NULL) < 0)
		kbox_conn_destroy(&copy);
	return copy;
}

int kbox_conn_set_ip(kbox_conn_t *self, const char *ip, kbox_error_t *err)
{
	char *old = self->ip;
	if (!ip || !*ip)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "the ip of a connection cannot be empty");
	if (!(self->ip = strdup(ip))) {
		self->ip = old;
		return kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	}
	if (conn_make_endpoints(self, err) < 0) {
		free(self->ip);
		self->ip = old;
		conn_make_endpoints(self, NULL);
		return -1;
	}
	free(old);
	return 0;
}

void kbox_conn_remove_ipc_files(const kbox_conn_t *self)
{
	if (self->transport != KBOX_TRANSPORT_IPC)
		return;
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++) {
		char path[PATH_MAX + 16];
		snprintf(path, sizeof path, "%s-%d", self->ip, self->ports[ch]);
		unlink(path);
	}
}

void kbox_conn_destroy(kbox_conn_t **self_p)
{
	kbox_conn_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	if (self->key)
		sodium_free(self->key);
	free(self->ip);
	free(self->scheme);
	free(self->kernel_name);
	for (int ch = 0; ch < KBOX_CH_COUNT; ch++)
		free(self->endpoints[ch]);
	free(self);
	*self_p = NULL;
}
