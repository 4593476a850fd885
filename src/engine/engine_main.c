/* src/engine/engine_main.c — kbox-engine: the helper that talks to a
 * container engine for the supervisor's docker backend and for kbox
 * doctor (the protocol: engine_proto.h).  The only program besides
 * kbox-http that links libcurl. */
#include "config.h"
#include "engine/engine.h"
#include "engine/engine_proto.h"
#include "common/kx.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* How long the requests that should answer at once may take, seconds:
 * a create unpacks nothing (the image's layers are there), a kill and a
 * remove stop a container. */
#define CALL_TIMEOUT 60
/* After the container has exited, how long its last output may take to
 * arrive, ms. */
#define LOG_DRAIN_MS 2000
/* After "remove", how long the container may take to go, ms. */
#define REMOVE_WAIT_MS 10000

static int status_fd = 1; /* run: KE_STATUS_FD */

/* One line of JSON to the status descriptor (stolen). */
static void say(json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (text) {
		kx_write_all(status_fd, text, strlen(text));
		kx_write_all(status_fd, "\n", 1);
	}
	free(text);
	json_decref(j);
}

static int fail(const ke_error_t *err)
{
	say(json_pack("{s:{s:s, s:s}}", "error", "kind", ke_kind_name(err->kind), "message",
	              err->msg));
	return 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: " KE_PROGRAM
	                " ping | image NAME | images | import TAR NAME RECIPE [LABEL=VALUE...] |\n"
	                "       rmi NAME | orphans HOME | remove NAME | run\n"
	                "  (the supervisor's helper: see src/engine/engine_proto.h)\n");
	return 2;
}

/* PATH with NAME percent-encoded appended. */
static void append_escaped(char *path, size_t size, const char *name)
{
	char *e = curl_easy_escape(NULL, name, 0);
	size_t n = strlen(path);
	snprintf(path + n, n < size ? size - n : 0, "%s", e ? e : "");
	curl_free(e);
}

/* ERR: image NAME is not in the engine at SOCKET. */
static void no_image(ke_error_t *err, const char *name, const char *socket)
{
	ke_error(err, KE_E_NO_IMAGE,
	         "image %s not found in the engine at %s: build it with kbox image build "
	         "(--name for another than kbox-kernel), or start the session with another: "
	         "kbox start --image",
	         name, socket);
}

static int cmd_ping(void)
{
	ke_engine_t e;
	ke_error_t err;
	if (ke_open(&e, &err) < 0)
		return fail(&err);
	say(json_pack("{s:s, s:s, s:s, s:s, s:s}", "engine", e.engine, "api", e.api, "version",
	              e.version, "min_api", e.min_api, "socket", e.socket));
	return 0;
}

/* GET /images/NAME/json on E: 1 with the image in *J (new), 0 when E
 * has no image NAME, -1 with ERR when E did not answer or refused. */
static int inspect_image(const ke_engine_t *e, const char *name, json_t **j, ke_error_t *err)
{
	char path[1024] = "/images/";
	long status = 0;

	*j = NULL;
	append_escaped(path, sizeof path, name);
	strncat(path, "/json", sizeof path - strlen(path) - 1);
	if (ke_call(e, "GET", path, NULL, CALL_TIMEOUT, &status, j, err) < 0)
		return -1;
	if (status == 200)
		return 1;
	if (status != 404) {
		char *body = json_dumps(*j, JSON_ENCODE_ANY);
		ke_reply_error(status, body, "inspect image", err);
		free(body);
	}
	json_decref(*j);
	*j = NULL;
	return status == 404 ? 0 : -1;
}

static int cmd_image(const char *name)
{
	ke_engine_t e;
	ke_error_t err;
	json_t *j, *cfg;
	int found;

	if (ke_open(&e, &err) < 0 || (found = inspect_image(&e, name, &j, &err)) < 0)
		return fail(&err);
	if (!found) {
		no_image(&err, name, e.socket);
		return fail(&err);
	}
	cfg = json_object_get(j, "Config");
	json_t *labels = json_object_get(cfg, "Labels");
	say(json_pack("{s:O?, s:O?, s:O?}", "id", json_object_get(j, "Id"), "labels",
	              json_is_object(labels) ? labels : NULL, "user",
	              json_object_get(cfg, "User")));
	json_decref(j);
	return 0;
}

typedef struct {
	kx_buf_t buf; /* the progress stream not yet a whole line */
	char id[160];
	char error[600];
} import_t;

/* POST /images/create's progress: JSON objects one a line; an error can
 * come after the 200 ({"error": ..., "errorDetail": ...}), and the last
 * status is the image's id. */
static size_t on_import(char *p, size_t size, size_t n, void *arg)
{
	import_t *im = arg;
	char *nl;
	if (kx_buf_append(&im->buf, p, size * n) < 0)
		return 0;
	while (im->buf.len && (nl = memchr(im->buf.data, '\n', im->buf.len))) {
		size_t used = (size_t)(nl - im->buf.data) + 1;
		json_t *j;
		*nl = '\0';
		if ((j = json_loads(im->buf.data, 0, NULL))) {
			const char *e = json_string_value(json_object_get(j, "error"));
			if (!e) /* (a refusal: an error body) */
				e = json_string_value(json_object_get(j, "message"));
			const char *st = json_string_value(json_object_get(j, "status"));
			if (e)
				snprintf(im->error, sizeof im->error, "%s", e);
			else if (st && strncmp(st, "sha256:", 7) == 0)
				snprintf(im->id, sizeof im->id, "%s", st);
			json_decref(j);
		}
		memmove(im->buf.data, im->buf.data + used, im->buf.len - used);
		im->buf.len -= used;
		im->buf.data[im->buf.len] = '\0';
	}
	return size * n;
}

static size_t read_file(char *p, size_t size, size_t n, void *arg)
{
	return fread(p, 1, size * n, arg);
}

/* Is L "KEY=VALUE" with KEY one of the labels import takes beside the
 * recipe, and VALUE printable, without blanks or quotes? */
static bool import_label_ok(const char *l)
{
	static const char *const keys[] = {"kbox.packages=", "kbox.requirements=", NULL};
	const char *v = NULL;
	for (size_t i = 0; keys[i] && !v; i++)
		if (strncmp(l, keys[i], strlen(keys[i])) == 0)
			v = l + strlen(keys[i]);
	if (!v || strlen(v) > 2048)
		return false;
	for (; *v; v++)
		if (*v <= ' ' || *v > '~' || *v == '"' || *v == '\'' || *v == '\\')
			return false;
	return true;
}

/* import TAR NAME RECIPE [LABEL...]: the root file system TAR as image
 * NAME:latest, labelled kbox.recipe=sha256:RECIPE and LABELs, unless NAME
 * is that already. */
static int cmd_import(const char *tar, const char *name, const char *recipe, char **labels)
{
	static const char *const changes[] = {"USER 1000:1000",
	                                      "WORKDIR /workspace",
	                                      "ENV LANG=C.UTF-8",
	                                      "ENV MPLCONFIGDIR=/tmp/matplotlib",
	                                      "LABEL kbox.built-by=" PACKAGE_NAME
	                                      "-" PACKAGE_VERSION,
	                                      NULL};
	ke_engine_t e;
	ke_error_t err;
	import_t im = {0};
	char path[16384], label[128], *have = NULL;
	int found;
	long status = 0;
	json_t *j = NULL;
	FILE *f = NULL;
	CURL *c = NULL;
	CURLcode rc;
	int ret = 1;

	if (strlen(recipe) != 64 || strspn(recipe, "0123456789abcdef") != 64) {
		ke_error(&err, KE_E_USAGE, "import: the recipe \"%s\" is no SHA-256", recipe);
		return fail(&err);
	}
	snprintf(label, sizeof label, "sha256:%s", recipe);
	for (size_t i = 0; labels[i]; i++)
		if (!import_label_ok(labels[i])) {
			ke_error(&err, KE_E_USAGE, "import: \"%s\" is not a label import takes",
			         labels[i]);
			return fail(&err);
		}
	/* built already? */
	if (ke_open(&e, &err) < 0 || (found = inspect_image(&e, name, &j, &err)) < 0)
		return fail(&err);
	if (found) {
		const char *l = json_string_value(json_object_get(
		        json_object_get(json_object_get(j, "Config"), "Labels"), "kbox.recipe"));
		if (l && strcmp(l, label) == 0) {
			say(json_pack("{s:s, s:O?, s:b}", "image", name, "id",
			              json_object_get(j, "Id"), "up_to_date", 1));
			json_decref(j);
			return 0;
		}
		have = l ? strdup(l) : NULL;
	}
	json_decref(j);
	j = NULL;
	if (!(f = fopen(tar, "rb"))) {
		ke_error(&err, KE_E_USAGE, "import: %s: %s", tar, strerror(errno));
		goto out_fail;
	}
	snprintf(path, sizeof path, "/images/create?fromSrc=-&repo=");
	append_escaped(path, sizeof path, name);
	strncat(path, "&tag=latest&message=", sizeof path - strlen(path) - 1);
	append_escaped(path, sizeof path, label);
	for (size_t i = 0; changes[i]; i++) {
		strncat(path, "&changes=", sizeof path - strlen(path) - 1);
		append_escaped(path, sizeof path, changes[i]);
	}
	{
		char l[160];
		snprintf(l, sizeof l, "LABEL kbox.recipe=%s", label);
		strncat(path, "&changes=", sizeof path - strlen(path) - 1);
		append_escaped(path, sizeof path, l);
		for (size_t i = 0; labels[i]; i++) {
			char more[2100];
			snprintf(more, sizeof more, "LABEL %s", labels[i]);
			strncat(path, "&changes=", sizeof path - strlen(path) - 1);
			append_escaped(path, sizeof path, more);
		}
		if (strlen(path) >= sizeof path - 1) {
			ke_error(&err, KE_E_USAGE, "import: the labels are too long");
			goto out_fail;
		}
	}
	if (!(c = ke_easy(&e, "POST", path, NULL))) {
		ke_error(&err, KE_E_ENGINE, "out of memory");
		goto out_fail;
	}
	/* the body is the tarball, streamed (some hundred MB) */
	fseeko(f, 0, SEEK_END);
	curl_off_t size = (curl_off_t)ftello(f);
	rewind(f);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, size);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, read_file);
	curl_easy_setopt(c, CURLOPT_READDATA, f);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	struct curl_slist *tar_type = curl_slist_append(NULL, "Content-Type: application/x-tar");
	if (!tar_type) {
		ke_error(&err, KE_E_ENGINE, "out of memory");
		goto out_fail;
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, tar_type);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_import);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &im);
	fprintf(stderr, KE_PROGRAM ": importing %s as %s (%s%s)\n", tar, name,
	        have ? "replacing " : "new", have ? have : "");
	rc = curl_easy_perform(c);
	curl_slist_free_all(tar_type);
	if (rc != CURLE_OK) {
		ke_transfer_error(&e, c, rc, "import the image", &err);
		goto out_fail;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200 || im.error[0] || !im.id[0]) {
		ke_error(&err, KE_E_ENGINE, "import the image: %s",
		         im.error[0]     ? im.error
		         : status != 200 ? "the engine refused it"
		                         : "no image id came back");
		goto out_fail;
	}
	/* (Podman's import takes no tag: name it afterwards, which Docker
	 * takes as well) */
	snprintf(path, sizeof path, "/images/%s/tag?repo=", im.id);
	append_escaped(path, sizeof path, name);
	strncat(path, "&tag=latest", sizeof path - strlen(path) - 1);
	if (ke_call(&e, "POST", path, NULL, CALL_TIMEOUT, &status, NULL, &err) < 0)
		goto out_fail;
	if (status != 201 && status != 200) {
		ke_reply_error(status, NULL, "tag the image", &err);
		goto out_fail;
	}
	say(json_pack("{s:s, s:s, s:b}", "image", name, "id", im.id, "up_to_date", 0));
	ret = 0;
	goto out;
out_fail:
	ret = fail(&err);
out:
	if (f)
		fclose(f);
	curl_easy_cleanup(c);
	kx_buf_reset(&im.buf);
	free(have);
	return ret;
}

/* Is the supervisor a container's label kbox.supervisor names ("PID:START",
 * its start time in clock ticks since boot) still running? */
static bool supervisor_alive(const char *label)
{
	long long pid, start;
	char extra;
	if (!label || sscanf(label, "%lld:%lld%c", &pid, &start, &extra) != 2 || pid <= 0)
		return false;
	return kx_proc_start_time((pid_t)pid) == start;
}

/* Remove container NAME (its inspect: C) when it is an orphan of HOME's:
 * labelled so, its supervisor gone.  1 removed, 0 not ours or alive, -1
 * with ERR. */
static int remove_orphan(const ke_engine_t *e, json_t *labels, const char *id, const char *home,
                         ke_error_t *err)
{
	char path[512];
	long status = 0;
	const char *h = json_string_value(json_object_get(labels, "kbox.home"));
	if (!h || strcmp(h, home) != 0 ||
	    supervisor_alive(json_string_value(json_object_get(labels, "kbox.supervisor"))))
		return 0;
	snprintf(path, sizeof path, "/containers/%s?force=1&v=1", id);
	if (ke_call(e, "DELETE", path, NULL, CALL_TIMEOUT, &status, NULL, err) < 0)
		return -1;
	if (status != 204 && status != 404)
		return ke_reply_error(status, NULL, "remove container", err);
	return 1;
}

static int cmd_orphans(const char *home)
{
	ke_engine_t e;
	ke_error_t err;
	char path[4096] = "/containers/json?all=1&filters=", filt[2048];
	long status = 0;
	json_t *list = NULL, *removed = json_array(), *kept = json_array(), *c;
	size_t i;
	int rc = 1;

	if (ke_open(&e, &err) < 0)
		goto out_fail;
	json_t *f = json_pack("{s:[s+]}", "label", "kbox.home=", home);
	char *ft = json_dumps(f, JSON_COMPACT);
	json_decref(f);
	snprintf(filt, sizeof filt, "%s", ft ? ft : "{}");
	free(ft);
	append_escaped(path, sizeof path, filt);
	if (ke_call(&e, "GET", path, NULL, CALL_TIMEOUT, &status, &list, &err) < 0)
		goto out_fail;
	if (status != 200 || !json_is_array(list)) {
		char *body = json_dumps(list, JSON_ENCODE_ANY);
		ke_reply_error(status, body, "list containers", &err);
		free(body);
		goto out_fail;
	}
	json_array_foreach(list, i, c)
	{
		const char *id = json_string_value(json_object_get(c, "Id"));
		json_t *names = json_object_get(c, "Names");
		const char *name = json_string_value(json_array_get(names, 0));
		int r;
		if (!id)
			continue;
		name = name ? name + (name[0] == '/') : id;
		r = remove_orphan(&e, json_object_get(c, "Labels"), id, home, &err);
		if (r < 0)
			goto out_fail;
		json_array_append_new(r ? removed : kept, json_string(name));
	}
	say(json_pack("{s:O, s:O}", "removed", removed, "kept", kept));
	rc = 0;
	goto out;
out_fail:
	rc = fail(&err);
out:
	json_decref(list);
	json_decref(removed);
	json_decref(kept);
	return rc;
}

/* ---- run ---- */

typedef struct {
	ke_engine_t e;
	char id[128];
	CURLM *multi;
	CURL *wait, *logs; /* logs: the attachment to its output */
	kx_buf_t wait_body;
	bool wait_headers, wait_done, logs_headers, logs_done;
	CURLcode wait_rc;
	ke_demux_t demux;
	unsigned long long dropped; /* output bytes the log pipe had no room for */
	CURL *kills[4];             /* kill requests in flight */
	long logs_status;           /* the attachment's HTTP status */
	kx_buf_t logs_error;        /* its body, when that is an error */
	bool removing;
	kx_buf_t in; /* standard input not yet a whole line */
	bool in_eof;
} run_t;

static int term_pipe[2] = {-1, -1};

static void on_term(int sig)
{
	int e = errno;
	(void)sig;
	if (write(term_pipe[1], "", 1) < 0) {
		/* (full: one is enough) */
	}
	errno = e;
}

static size_t on_wait_body(char *p, size_t size, size_t n, void *arg)
{
	run_t *r = arg;
	size_t add = size * n;
	if (r->wait_body.len + add > 65536)
		return 0;
	return kx_buf_append(&r->wait_body, p, add) == 0 ? add : 0;
}

static size_t on_wait_header(char *p, size_t size, size_t n, void *arg)
{
	run_t *r = arg;
	size_t len = size * n;
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n'))
		r->wait_headers = true; /* the end of the headers: the wait is on */
	return len;
}

/* The container's output to ours (the kernel's log), never blocking: what
 * the log's pipe has no room for is dropped, and counted in a line of the
 * log once there is room again.  So a flood of output never keeps the
 * helper from its commands (a stop, a removal). */
static int on_log_frame(void *arg, int stream, const char *bytes, size_t len)
{
	run_t *r = arg;
	int fd = stream == 2 ? 2 : 1;
	if (r->dropped) {
		char note[160];
		int n = snprintf(note, sizeof note,
		                 "\n[" KE_PROGRAM ": %llu bytes of the container's output dropped: "
		                 "its log was not read fast enough]\n",
		                 r->dropped);
		if (write(fd, note, (size_t)n) != n) {
			r->dropped += len;
			return 0;
		}
		r->dropped = 0;
	}
	while (len > 0) {
		ssize_t w = write(fd, bytes, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r->dropped += len;
			break;
		}
		bytes += w;
		len -= (size_t)w;
	}
	return 0;
}

static size_t on_logs_header(char *p, size_t size, size_t n, void *arg)
{
	run_t *r = arg;
	size_t len = size * n;
	long code;
	if (len > 9 && strncmp(p, "HTTP/", 5) == 0 && sscanf(p + 9, "%ld", &code) == 1 &&
	    code != 100)
		r->logs_status = code;
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n'))
		r->logs_headers = true; /* attached: what it writes from now on comes here */
	return len;
}

static size_t on_logs(char *p, size_t size, size_t n, void *arg)
{
	run_t *r = arg;
	if (r->logs_status >= 300) { /* (an error, not the stream) */
		if (r->logs_error.len < 65536)
			kx_buf_append(&r->logs_error, p, size * n);
		return size * n;
	}
	ke_demux(&r->demux, p, size * n, on_log_frame, r);
	return size * n;
}

/* Run the transfers until nothing is left to do now, noting which ended. */
static void run_multi(run_t *r)
{
	int running, left;
	CURLMsg *m;
	curl_multi_perform(r->multi, &running);
	while ((m = curl_multi_info_read(r->multi, &left))) {
		/* (M is the handle's own memory: read before the handle goes) */
		CURL *done = m->easy_handle;
		CURLcode result = m->data.result;
		if (m->msg != CURLMSG_DONE)
			continue;
		if (done == r->wait) {
			r->wait_done = true;
			r->wait_rc = result;
		} else if (done == r->logs)
			r->logs_done = true;
		else
			for (size_t i = 0; i < sizeof r->kills / sizeof *r->kills; i++)
				if (done == r->kills[i]) {
					curl_multi_remove_handle(r->multi, done);
					curl_easy_cleanup(done);
					r->kills[i] = NULL;
					break;
				}
	}
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* POST /containers/ID/kill?signal=SIG, among the transfers (its answer
 * is not waited for: the engine may answer a SIGKILL only once the
 * container's output is read to its end, which the loop goes on doing);
 * a container that is not running is no error. */
static void kill_container(run_t *r, const char *sig)
{
	char path[256];
	size_t i;
	CURL *c;
	if (!r->multi)
		return;
	for (i = 0; i < sizeof r->kills / sizeof *r->kills && r->kills[i]; i++)
		;
	if (i == sizeof r->kills / sizeof *r->kills)
		return; /* (four in flight: this one is one too many) */
	snprintf(path, sizeof path, "/containers/%s/kill?signal=%s", r->id, sig);
	if (!(c = ke_easy(&r->e, "POST", path, NULL)))
		return;
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)CALL_TIMEOUT);
	r->kills[i] = c;
	curl_multi_add_handle(r->multi, c);
}

/* How long a removal is tried for, ms, while the engine does not answer. */
#define REMOVE_TRY_MS 30000

/* DELETE /containers/ID?force=1, tried again while the engine does not
 * answer (restarting, say), for REMOVE_TRY_MS.  0 once it is gone, or -1
 * with ERR. */
static int remove_id(const ke_engine_t *e, const char *id, ke_error_t *err)
{
	char path[512] = "/containers/";
	long long t0 = kx_now_ms();
	long status = 0;
	append_escaped(path, sizeof path, id);
	strncat(path, "?force=1&v=1", sizeof path - strlen(path) - 1);
	for (;;) {
		if (ke_call(e, "DELETE", path, NULL, CALL_TIMEOUT, &status, NULL, err) == 0) {
			if (status == 204 || status == 404)
				return 0;
			if (status != 409 && status < 500)
				return ke_reply_error(status, NULL, "remove the container", err);
		}
		if (kx_now_ms() - t0 > REMOVE_TRY_MS)
			return -1;
		usleep(200000);
	}
}

static int remove_container(run_t *r, ke_error_t *err)
{
	return remove_id(&r->e, r->id, err);
}

/* Act on the whole lines of standard input so far. */
static void commands(run_t *r)
{
	char buf[4096], *nl;
	ssize_t n = read(0, buf, sizeof buf);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		r->in_eof = true;
		return;
	}
	if (n > 0)
		kx_buf_append(&r->in, buf, (size_t)n);
	while (r->in.len && (nl = memchr(r->in.data, '\n', r->in.len))) {
		int sig;
		size_t used = (size_t)(nl - r->in.data) + 1;
		*nl = '\0';
		if (sscanf(r->in.data, "signal %d", &sig) == 1 && sig > 0 && sig < 65) {
			char s[16];
			snprintf(s, sizeof s, "%d", sig);
			kill_container(r, s);
		} else if (strcmp(r->in.data, "remove") == 0)
			r->removing = true;
		memmove(r->in.data, r->in.data + used, r->in.len - used);
		r->in.len -= used;
		r->in.data[r->in.len] = '\0';
	}
}

/* Create container NAME from BODY; on a name in use by an orphan of
 * HOME's, remove it and try once more.  0, or -1 with ERR. */
static int create(run_t *r, const char *name, const char *body, const char *home, json_t **warnings,
                  ke_error_t *err)
{
	char path[512] = "/containers/create?name=", what[300];
	long status = 0;
	json_t *j = NULL;
	append_escaped(path, sizeof path, name);
	snprintf(what, sizeof what, "create container %s", name);
	for (int attempt = 0; attempt < 2; attempt++) {
		json_decref(j);
		if (ke_call(&r->e, "POST", path, body, CALL_TIMEOUT, &status, &j, err) < 0)
			return -1;
		if (status == 201)
			break;
		if (status == 409 && attempt == 0) {
			char ip[512] = "/containers/";
			json_t *c = NULL;
			long st = 0;
			append_escaped(ip, sizeof ip, name);
			strncat(ip, "/json", sizeof ip - strlen(ip) - 1);
			if (ke_call(&r->e, "GET", ip, NULL, CALL_TIMEOUT, &st, &c, err) == 0 &&
			    st == 200) {
				json_t *labels = json_object_get(json_object_get(c, "Config"),
				                                 "Labels");
				const char *id = json_string_value(json_object_get(c, "Id"));
				int rm = id ? remove_orphan(&r->e, labels, id, home, err) : 0;
				json_decref(c);
				if (rm < 0) {
					json_decref(j);
					return -1;
				}
				if (rm > 0)
					continue;
			} else
				json_decref(c);
		}
		char *text = json_is_string(j) ? strdup(json_string_value(j))
		                               : json_dumps(j, JSON_ENCODE_ANY);
		ke_reply_error(status, text, what, err);
		free(text);
		if (err->kind == KE_E_NO_IMAGE) {
			json_t *b = json_loads(body, 0, NULL);
			const char *image = json_string_value(json_object_get(b, "Image"));
			no_image(err, image ? image : "?", r->e.socket);
			json_decref(b);
		}
		json_decref(j);
		return -1;
	}
	snprintf(r->id, sizeof r->id, "%s",
	         json_string_value(json_object_get(j, "Id"))
	                 ? json_string_value(json_object_get(j, "Id"))
	                 : "");
	*warnings = json_incref(json_object_get(j, "Warnings"));
	json_decref(j);
	if (!r->id[0])
		return ke_error(err, KE_E_ENGINE, "%s: the engine gave no Id", what);
	return 0;
}

/* Wait for something to do (transfers, standard input, SIGTERM) for at
 * most MS. */
static void wait_some(run_t *r, int ms)
{
	struct curl_waitfd extra[2] = {{.fd = term_pipe[0], .events = CURL_WAIT_POLLIN},
	                               {.fd = 0, .events = CURL_WAIT_POLLIN}};
	int n = 0;
	curl_multi_poll(r->multi, extra, r->in_eof ? 1 : 2, ms, &n);
	if (extra[0].revents) {
		char drain[16];
		if (read(term_pipe[0], drain, sizeof drain) > 0)
			r->removing = true;
	}
	if (!r->in_eof && extra[1].revents)
		commands(r);
	if (r->in_eof)
		r->removing = true;
}

/* The hard limit NAME ("Max processes") of process PID, from
 * /proc/PID/limits (readable by all); -1 when unknown or unlimited. */
static long long hard_limit(pid_t pid, const char *name)
{
	char path[64], line[256];
	long long soft, hard = -1;
	size_t n = strlen(name);
	FILE *f;
	snprintf(path, sizeof path, "/proc/%ld/limits", (long)pid);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, name, n) == 0 && line[n] == ' ') {
			if (sscanf(line + n, " %lld %lld", &soft, &hard) != 2)
				hard = -1;
			break;
		}
	fclose(f);
	return hard;
}

/* Podman starts a container's processes (conmon, the OCI runtime) itself,
 * with its own limits: raising nproc or nofile above those fails the
 * start where root lacks CAP_SYS_RESOURCE ("error setting rlimit"), and
 * its compatible API takes no -1 for "its own".  So SPEC's nproc and
 * nofile are held to the engine's own hard limits (the socket's peer,
 * whose /proc/PID/limits all may read), and *BODY is made again.  0, or
 * -1 when out of memory. */
static int podman_ulimits(const ke_engine_t *e, json_t *spec, char **body)
{
	json_t *u = json_object_get(json_object_get(json_object_get(spec, "create"), "HostConfig"),
	                            "Ulimits"),
	       *l;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ucred cred = {0};
	socklen_t len = sizeof cred;
	long long nproc = -1, nofile = -1;
	size_t i;
	char *b;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", e->socket);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) {
		nproc = hard_limit(cred.pid, "Max processes");
		nofile = hard_limit(cred.pid, "Max open files");
	}
	if (fd >= 0)
		close(fd);
	json_array_foreach(u, i, l)
	{
		const char *n = json_string_value(json_object_get(l, "Name"));
		long long most = !n                     ? -1
		                 : !strcmp(n, "nproc")  ? nproc
		                 : !strcmp(n, "nofile") ? nofile
		                                        : -1;
		long long soft = json_integer_value(json_object_get(l, "Soft"));
		long long hard = json_integer_value(json_object_get(l, "Hard"));
		if (most < 0)
			continue;
		if (hard < 0 || hard > most)
			json_object_set_new(l, "Hard", json_integer(most));
		if (soft < 0 || soft > most)
			json_object_set_new(l, "Soft", json_integer(most));
	}
	if (!(b = json_dumps(json_object_get(spec, "create"), JSON_COMPACT)))
		return -1;
	free(*body);
	*body = b;
	return 0;
}

/* The most of a spec line (the create body: the kernel's environment
 * with it). */
#define SPEC_MAX (16u << 20)

/* Add to R's transfers one held open, METHOD PATH, whose body goes to
 * WRITE and whose headers' end sets *HEADERS_DONE (through HEADER). */
static CURL *held(run_t *r, const char *method, const char *path,
                  size_t (*write)(char *, size_t, size_t, void *),
                  size_t (*header)(char *, size_t, size_t, void *))
{
	CURL *c = ke_easy(&r->e, method, path, NULL);
	if (!c)
		return NULL;
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_multi_add_handle(r->multi, c);
	return c;
}

static int cmd_run(void)
{
	run_t r = {0};
	ke_error_t err = {0};
	kx_buf_t line = KX_BUF_INIT;
	char path[512];
	json_t *spec = NULL, *warnings = NULL, *info = NULL;
	const char *name, *home;
	char *body = NULL, c;
	long status = 0, code = -1;
	bool oom = false, killed_on_remove = false, gone = false;
	long long t_exit = -1, t_remove = -1;
	int rc = 1;

	status_fd = KE_STATUS_FD;
	if (fcntl(status_fd, F_GETFD) < 0) {
		fprintf(stderr, KE_PROGRAM " run: descriptor %d (status) is not open\n",
		        KE_STATUS_FD);
		return 2;
	}
	/* the spec: standard input's first line */
	for (;;) {
		ssize_t k = read(0, &c, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || c == '\n' || line.len >= SPEC_MAX || kx_buf_append(&line, &c, 1) < 0)
			break;
	}
	if (!line.data || !(spec = json_loads(line.data, 0, NULL)) ||
	    !(name = json_string_value(json_object_get(spec, "name"))) ||
	    !(home = json_string_value(json_object_get(spec, "home"))) ||
	    !json_is_object(json_object_get(spec, "create")) ||
	    !(body = json_dumps(json_object_get(spec, "create"), JSON_COMPACT))) {
		ke_error(&err, KE_E_USAGE,
		         "run: the first line of input is not a spec of at most %u bytes",
		         SPEC_MAX);
		goto out_fail;
	}
	if (pipe2(term_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		ke_error(&err, KE_E_ENGINE, "pipe: %s", strerror(errno));
		goto out_fail;
	}
	signal(SIGTERM, on_term);
	signal(SIGHUP, on_term);
	signal(SIGINT, on_term);
	fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	/* (the log's pipe: 1 and 2 share it) */
	fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
	fcntl(2, F_SETFL, fcntl(2, F_GETFL) | O_NONBLOCK);
	if (ke_open(&r.e, &err) < 0)
		goto out_fail;
	if (strcmp(r.e.engine, "podman") == 0 && podman_ulimits(&r.e, spec, &body) < 0)
		goto nomem;
	if (create(&r, name, body, home, &warnings, &err) < 0)
		goto out_fail;
	if (!(r.multi = curl_multi_init()))
		goto nomem;
	/* the wait and the attachment to its output before the start, as
	 * docker run does: an exit, or output, between the start and them
	 * would otherwise be missed */
	snprintf(path, sizeof path, "/containers/%s/wait?condition=next-exit", r.id);
	if (!(r.wait = held(&r, "POST", path, on_wait_body, on_wait_header)))
		goto nomem;
	snprintf(path, sizeof path, "/containers/%s/attach?stream=1&stdout=1&stderr=1", r.id);
	if (!(r.logs = held(&r, "POST", path, on_logs, on_logs_header)))
		goto nomem;
	for (long long t0 = kx_now_ms();
	     !(r.wait_headers && r.logs_headers) && !r.wait_done && !r.logs_done && !r.removing;) {
		run_multi(&r);
		if ((r.wait_headers && r.logs_headers) || r.wait_done || r.logs_done)
			break;
		if (kx_now_ms() - t0 > CALL_TIMEOUT * 1000LL) {
			ke_error(&err, KE_E_ENGINE, "the engine did not take the wait for %s",
			         r.id);
			goto out_remove;
		}
		wait_some(&r, 1000);
	}
	if (r.removing)
		goto out_remove;
	if (r.logs_status >= 300) {
		/* (the engine refused to attach: Podman prepares the container
		 * for it, and says here why it cannot) */
		run_multi(&r);
		for (long long t0 = kx_now_ms(); !r.logs_done && kx_now_ms() - t0 < 5000;) {
			wait_some(&r, 100);
			run_multi(&r);
		}
		kx_buf_appends(&r.logs_error, "");
		ke_reply_error(r.logs_status, r.logs_error.data, "attach to the container", &err);
		goto out_remove;
	}
	if (r.wait_done || r.logs_done) {
		ke_transfer_error(&r.e, r.wait_done ? r.wait : r.logs, r.wait_rc,
		                  "wait for the container", &err);
		goto out_remove;
	}
	snprintf(path, sizeof path, "/containers/%s/start", r.id);
	json_t *sr = NULL;
	if (ke_call(&r.e, "POST", path, NULL, CALL_TIMEOUT, &status, &sr, &err) < 0)
		goto out_remove;
	if (status != 204 && status != 304) {
		char *text = json_dumps(sr, JSON_ENCODE_ANY);
		ke_reply_error(status, text, "start the container", &err);
		free(text);
		json_decref(sr);
		goto out_remove;
	}
	json_decref(sr);
	snprintf(path, sizeof path, "/containers/%s/json", r.id);
	if (ke_call(&r.e, "GET", path, NULL, CALL_TIMEOUT, &status, &info, &err) < 0)
		goto out_remove;
	say(json_pack("{s:{s:s, s:I, s:s, s:s, s:O?}}", "started", "id", r.id, "pid",
	              json_integer_value(json_object_get(json_object_get(info, "State"), "Pid")),
	              "engine", r.e.engine, "api", r.e.api, "warnings", warnings));
	json_decref(info);
	info = NULL;
	/* until it ends (or is to go): commands first, then its output */
	for (;;) {
		if (r.removing && !killed_on_remove) {
			kill_container(&r, "SIGKILL");
			killed_on_remove = true;
			t_remove = kx_now_ms();
		}
		run_multi(&r);
		if (r.wait_done && t_exit < 0)
			t_exit = kx_now_ms();
		if (t_exit >= 0 && (r.logs_done || kx_now_ms() - t_exit > LOG_DRAIN_MS))
			break;
		if (t_remove >= 0 && kx_now_ms() - t_remove > REMOVE_WAIT_MS)
			break;
		wait_some(&r, 1000);
	}
	/* (its output no more: the engine need not wait for us to read it) */
	curl_multi_remove_handle(r.multi, r.logs);
	curl_easy_cleanup(r.logs);
	r.logs = NULL;
	/* how it ended: the wait's answer; else (the engine went away) the
	 * container as it is now */
	if (r.wait_done && r.wait_rc == CURLE_OK) {
		json_t *w = json_loads(r.wait_body.data ? r.wait_body.data : "", 0, NULL);
		json_t *sc = json_object_get(w, "StatusCode");
		if (json_is_integer(sc))
			code = (long)json_integer_value(sc);
		json_decref(w);
	}
	snprintf(path, sizeof path, "/containers/%s/json", r.id);
	if (ke_call(&r.e, "GET", path, NULL, CALL_TIMEOUT, &status, &info, &err) == 0 &&
	    status == 200) {
		json_t *st = json_object_get(info, "State");
		oom = json_is_true(json_object_get(st, "OOMKilled"));
		if (code < 0 && json_is_integer(json_object_get(st, "ExitCode")) &&
		    !json_is_true(json_object_get(st, "Running")))
			code = (long)json_integer_value(json_object_get(st, "ExitCode"));
	}
	if (remove_container(&r, &err) < 0) {
		ke_error(&err, err.kind, "the container %s could not be removed: %s", r.id,
		         err.msg);
		rc = fail(&err);
		goto out;
	}
	gone = true;
	say(json_pack("{s:{s:I, s:b, s:b}}", "exit", "code", (json_int_t)code, "oom_killed", oom,
	              "removed", gone));
	rc = 0;
	goto out;
nomem:
	ke_error(&err, KE_E_ENGINE, "out of memory");
out_remove:
	rc = fail(&err);
	if (r.id[0]) {
		ke_error_t rerr;
		if (remove_container(&r, &rerr) < 0)
			fprintf(stderr, KE_PROGRAM ": the container %s could not be removed: %s\n",
			        r.id, rerr.msg);
	}
	goto out;
out_fail:
	rc = fail(&err);
out:
	if (r.multi) {
		if (r.wait)
			curl_multi_remove_handle(r.multi, r.wait);
		if (r.logs)
			curl_multi_remove_handle(r.multi, r.logs);
		for (size_t i = 0; i < sizeof r.kills / sizeof *r.kills; i++)
			if (r.kills[i]) {
				curl_multi_remove_handle(r.multi, r.kills[i]);
				curl_easy_cleanup(r.kills[i]);
			}
		curl_multi_cleanup(r.multi);
	}
	curl_easy_cleanup(r.wait);
	curl_easy_cleanup(r.logs);
	kx_buf_reset(&r.wait_body);
	kx_buf_reset(&r.logs_error);
	kx_buf_reset(&r.in);
	kx_buf_reset(&line);
	json_decref(info);
	json_decref(warnings);
	json_decref(spec);
	free(body);
	return rc;
}

/* Image label KEY of LABELS, NULL when absent or empty (the build labels
 * "kbox.packages=" an image without extra packages). */
static json_t *label(json_t *labels, const char *key)
{
	json_t *v = json_object_get(labels, key);
	return json_string_length(v) ? v : NULL;
}

/* images: the images labelled kbox.recipe. */
static int cmd_images(void)
{
	ke_engine_t e;
	ke_error_t err;
	long status = 0;
	json_t *j = NULL, *out, *v;
	size_t i;
	char path[256] = "/images/json?filters=";

	if (ke_open(&e, &err) < 0)
		return fail(&err);
	append_escaped(path, sizeof path, "{\"label\":[\"kbox.recipe\"]}");
	if (ke_call(&e, "GET", path, NULL, CALL_TIMEOUT, &status, &j, &err) < 0)
		return fail(&err);
	if (status != 200 || !json_is_array(j)) {
		char *body = json_dumps(j, JSON_ENCODE_ANY);
		ke_reply_error(status, body, "list the images", &err);
		free(body);
		json_decref(j);
		return fail(&err);
	}
	out = json_array();
	json_array_foreach(j, i, v)
	{
		json_t *labels = json_object_get(v, "Labels");
		json_t *tags = json_object_get(v, "RepoTags");
		json_t *names = json_array();
		size_t k;
		json_t *t;
		/* (untagged: "<none>:<none>", Docker's way; Podman gives none) */
		json_array_foreach(tags, k, t)
		{
			const char *n = json_string_value(t);
			if (!n || strcmp(n, "<none>:<none>") == 0)
				continue;
			/* as Docker names them: Podman says docker.io/library/NAME
			 * (or localhost/NAME) for the same image */
			if (strncmp(n, "docker.io/library/", 18) == 0)
				n += 18;
			else if (strncmp(n, "localhost/", 10) == 0)
				n += 10;
			json_array_append_new(names, json_string(n));
		}
		json_array_append_new(out, json_pack("{s:o, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}",
		                                     "names", names, "id", json_object_get(v, "Id"),
		                                     "created", json_object_get(v, "Created"),
		                                     "size", json_object_get(v, "Size"), "recipe",
		                                     label(labels, "kbox.recipe"), "packages",
		                                     label(labels, "kbox.packages"), "requirements",
		                                     label(labels, "kbox.requirements")));
	}
	json_decref(j);
	say(json_pack("{s:o, s:s}", "images", out, "engine", e.engine));
	return 0;
}

/* rmi NAME: image NAME removed (untagged, when it has other names), when
 * kbox built it (it has the label kbox.recipe); one a container uses is
 * refused by the engine. */
static int cmd_rmi(const char *name)
{
	ke_engine_t e;
	ke_error_t err;
	long status = 0;
	json_t *j = NULL;
	char path[1024] = "/images/";
	bool ours;
	int found;

	if (ke_open(&e, &err) < 0 || (found = inspect_image(&e, name, &j, &err)) < 0)
		return fail(&err);
	if (!found) {
		ke_error(&err, KE_E_NO_IMAGE, "image %s not found in the engine at %s", name,
		         e.socket);
		return fail(&err);
	}
	ours = json_is_string(json_object_get(
	        json_object_get(json_object_get(j, "Config"), "Labels"), "kbox.recipe"));
	json_decref(j);
	j = NULL;
	if (!ours) {
		ke_error(&err, KE_E_USAGE,
		         "image %s was not built by kbox (it has no label kbox.recipe): remove it "
		         "with the engine's own tools",
		         name);
		return fail(&err);
	}
	snprintf(path, sizeof path, "/images/");
	append_escaped(path, sizeof path, name);
	if (ke_call(&e, "DELETE", path, NULL, CALL_TIMEOUT, &status, &j, &err) < 0)
		return fail(&err);
	if (status != 200) {
		char *body = json_dumps(j, JSON_ENCODE_ANY);
		/* (Docker's "container ID is using", Podman's "image used by ID") */
		const char *c = body ? strstr(body, "container ") : NULL;
		if (c)
			c += strlen("container ");
		if ((!c || strspn(c, "0123456789abcdef") < 12) && body &&
		    (c = strstr(body, "used by ")))
			c += strlen("used by ");
		ke_reply_error(status, body, "remove the image", &err);
		/* (the engine's own words say to force it, which kbox does not:
		 * name the container, whose session can be stopped) */
		if (status == 409 && c && strspn(c, "0123456789abcdef") >= 12)
			ke_error(&err, KE_E_CONFLICT,
			         "image %s is in use by the container %.12s: stop the session that "
			         "runs it first (kbox ls lists the sessions)",
			         name, c);
		else if (status == 409)
			err.kind = KE_E_CONFLICT;
		free(body);
		json_decref(j);
		return fail(&err);
	}
	json_decref(j);
	say(json_pack("{s:s}", "removed", name));
	return 0;
}

/* remove NAME: the container NAME, gone (the supervisor's way when its
 * helper had to be killed). */
static int cmd_remove(const char *name)
{
	ke_engine_t e;
	ke_error_t err;
	if (ke_open(&e, &err) < 0 || remove_id(&e, name, &err) < 0)
		return fail(&err);
	say(json_pack("{s:s}", "removed", name));
	return 0;
}

int main(int argc, char **argv)
{
	int rc;
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		return usage();
	if (curl_global_init(CURL_GLOBAL_NOTHING) != CURLE_OK) {
		fprintf(stderr, KE_PROGRAM ": libcurl cannot start\n");
		return 1;
	}
	if (strcmp(argv[1], "ping") == 0 && argc == 2)
		rc = cmd_ping();
	else if (strcmp(argv[1], "image") == 0 && argc == 3)
		rc = cmd_image(argv[2]);
	else if (strcmp(argv[1], "orphans") == 0 && argc == 3)
		rc = cmd_orphans(argv[2]);
	else if (strcmp(argv[1], "import") == 0 && argc >= 5)
		rc = cmd_import(argv[2], argv[3], argv[4], argv + 5);
	else if (strcmp(argv[1], "images") == 0 && argc == 2)
		rc = cmd_images();
	else if (strcmp(argv[1], "rmi") == 0 && argc == 3)
		rc = cmd_rmi(argv[2]);
	else if (strcmp(argv[1], "remove") == 0 && argc == 3)
		rc = cmd_remove(argv[2]);
	else if (strcmp(argv[1], "run") == 0 && argc == 2)
		rc = cmd_run();
	else
		rc = usage();
	curl_global_cleanup();
	return rc;
}
