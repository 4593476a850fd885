/* src/kspec.c — kernelspec discovery and kernel.json parsing. */
#include "private.h"

#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct kbox_kspec {
	char *name;
	char *resource_dir;
	char *display_name;
	char *language;
	kbox_interrupt_mode_t interrupt_mode;
	char **argv;
	json_t *env;
	json_t *metadata;
};

/* ---- string vectors ---- */

typedef struct {
	char **v;
	size_t n, cap;
} strv_t;

static int strv_push(strv_t *sv, char *s) /* takes S */
{
	if (!s)
		return -1;
	if (sv->n + 2 > sv->cap) {
		size_t cap = sv->cap ? sv->cap * 2 : 8;
		char **v = realloc(sv->v, cap * sizeof *v);
		if (!v) {
			free(s);
			return -1;
		}
		sv->v = v;
		sv->cap = cap;
	}
	sv->v[sv->n++] = s;
	sv->v[sv->n] = NULL;
	return 0;
}

static int strv_has(const strv_t *sv, const char *s)
{
	for (size_t i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return 1;
	return 0;
}

/* Push a copy of S unless it is empty or already there. */
static int strv_push_unique(strv_t *sv, const char *s)
{
	if (!s || !*s || strv_has(sv, s))
		return 0;
	return strv_push(sv, strdup(s));
}

static char **strv_finish(strv_t *sv)
{
	if (!sv->v)
		sv->v = calloc(1, sizeof(char *));
	return sv->v;
}

void kbox_strv_free(char **strv)
{
	if (!strv)
		return;
	for (char **p = strv; *p; p++)
		free(*p);
	free(strv);
}

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 2);
	if (!s)
		return NULL;
	memcpy(s, a, la);
	s[la] = '/';
	memcpy(s + la + 1, b, lb + 1);
	return s;
}

/* ---- search path ---- */

char **kbox_kspec_search_path(void)
{
	strv_t sv = {0};
	const char *e;
	char buf[PATH_MAX];

	/* 1. $JUPYTER_PATH entries */
	e = getenv("JUPYTER_PATH");
	if (e && *e) {
		char *copy = strdup(e), *save = NULL;
		if (copy) {
			for (char *tok = strtok_r(copy, ":", &save); tok;
			     tok = strtok_r(NULL, ":", &save))
				strv_push_unique(&sv, tok);
			free(copy);
		}
	}
	/* 2. the user data dir */
	if ((e = getenv("JUPYTER_DATA_DIR")) && *e) {
		strv_push_unique(&sv, e);
	} else if ((e = getenv("XDG_DATA_HOME")) && *e) {
		snprintf(buf, sizeof buf, "%s/jupyter", e);
		strv_push_unique(&sv, buf);
	} else if ((e = getenv("HOME")) && *e) {
		snprintf(buf, sizeof buf, "%s/.local/share/jupyter", e);
		strv_push_unique(&sv, buf);
	}
	/* 3. kbox's install prefix, unless it is one of the system dirs (as
	 * jupyter_core does with sys.prefix; Debian's Python has /usr) */
	snprintf(buf, sizeof buf, "%s/share/jupyter", KBOX_PREFIX);
	if (strcmp(buf, "/usr/local/share/jupyter") != 0 && strcmp(buf, "/usr/share/jupyter") != 0)
		strv_push_unique(&sv, buf);
	/* 4. system-wide */
	strv_push_unique(&sv, "/usr/local/share/jupyter");
	strv_push_unique(&sv, "/usr/share/jupyter");
	return strv_finish(&sv);
}

/* ---- names ---- */

static int valid_name(const char *name)
{
	size_t n = 0;
	if (!name || !*name)
		return 0;
	for (const char *p = name; *p; p++, n++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
			return 0;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	return n <= 255;
}

/* Find, in KERNELS_DIR, an entry whose name equals NAME ignoring case.
 * Returns a new path to its directory, or NULL. */
static char *find_in(const char *kernels_dir, const char *name)
{
	DIR *d = opendir(kernels_dir);
	struct dirent *de;
	char *found = NULL;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		char *dir, *file;
		struct stat st;
		if (strcasecmp(de->d_name, name) != 0)
			continue;
		dir = join(kernels_dir, de->d_name);
		file = dir ? join(dir, "kernel.json") : NULL;
		if (file && stat(file, &st) == 0 && S_ISREG(st.st_mode)) {
			free(file);
			found = dir;
			break;
		}
		free(file);
		free(dir);
	}
	closedir(d);
	return found;
}

kbox_kspec_t *kbox_kspec_find(const char *name, kbox_error_t *err)
{
	char **path;
	kbox_kspec_t *spec = NULL;
	char where[KBOX_ERROR_MSG_MAX] = "";
	size_t wl = 0;

	if (!valid_name(name)) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "kernelspec name \"%s\" is invalid (letters, digits, '.', '_', '-')",
		               name ? name : "");
		return NULL;
	}
	path = kbox_kspec_search_path();
	if (!path) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	for (char **p = path; *p; p++) {
		char *kdir = join(*p, "kernels");
		char *dir = kdir ? find_in(kdir, name) : NULL;
		if (kdir && wl + strlen(kdir) + 3 < sizeof where)
			wl += (size_t)snprintf(where + wl, sizeof where - wl, "%s%s",
			                       wl ? ", " : "", kdir);
		free(kdir);
		if (dir) {
			spec = kbox_kspec_load(dir, err);
			free(dir);
			goto out;
		}
	}
	kbox_error_set(err, KBOX_E_NOTFOUND, "no kernelspec named \"%s\" (searched %s)", name,
	               where);
out:
	kbox_strv_free(path);
	return spec;
}

static int dup_field(json_t *root, const char *key, const char *dflt, char **out)
{
	json_t *v = json_object_get(root, key);
	const char *s = json_is_string(v) ? json_string_value(v) : dflt;
	*out = strdup(s);
	return *out ? 0 : -1;
}

/* A kernelspec from its kernel.json, ROOT (borrowed): named NAME (made
 * lower-case), its resources in RESOURCE_DIR ("" for none), WHAT naming it
 * in errors.  NULL with ERR. */
static kbox_kspec_t *from_json(json_t *root, const char *name, const char *resource_dir,
                               const char *what, kbox_error_t *err)
{
	json_t *argv, *v;
	kbox_kspec_t *self = NULL;
	strv_t av = {0};

	if (!json_is_object(root)) {
		kbox_error_set(err, KBOX_E_INVALID, "kernelspec %s: not a JSON object", what);
		return NULL;
	}
	argv = json_object_get(root, "argv");
	if (!json_is_array(argv) || json_array_size(argv) == 0) {
		kbox_error_set(err, KBOX_E_INVALID, "kernelspec %s: argv is missing or empty",
		               what);
		return NULL;
	}
	for (size_t i = 0; i < json_array_size(argv); i++) {
		v = json_array_get(argv, i);
		if (!json_is_string(v)) {
			kbox_error_set(err, KBOX_E_INVALID,
			               "kernelspec %s: argv[%zu] is not a string", what, i);
			goto out;
		}
		if (strv_push(&av, strdup(json_string_value(v))) < 0)
			goto nomem;
	}
	self = calloc(1, sizeof *self);
	if (!self)
		goto nomem;
	self->argv = av.v;
	av.v = NULL;
	self->resource_dir = strdup(resource_dir);
	self->name = strdup(name);
	for (char *p = self->name; p && *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (!self->resource_dir || !self->name ||
	    dup_field(root, "display_name", name, &self->display_name) ||
	    dup_field(root, "language", "", &self->language))
		goto nomem;
	v = json_object_get(root, "interrupt_mode");
	if (v && json_is_string(v) && strcmp(json_string_value(v), "message") == 0)
		self->interrupt_mode = KBOX_INTERRUPT_MESSAGE;
	else if (v && (!json_is_string(v) || strcmp(json_string_value(v), "signal") != 0)) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "kernelspec %s: interrupt_mode must be \"signal\" or \"message\"",
		               what);
		kbox_kspec_destroy(&self);
		goto out;
	}
	v = json_object_get(root, "env");
	if (v && !json_is_object(v)) {
		kbox_error_set(err, KBOX_E_INVALID, "kernelspec %s: env is not an object", what);
		kbox_kspec_destroy(&self);
		goto out;
	}
	self->env = v ? json_incref(v) : json_object();
	v = json_object_get(root, "metadata");
	self->metadata = json_is_object(v) ? json_incref(v) : json_object();
	goto out;
nomem:
	kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	kbox_kspec_destroy(&self);
out:
	for (size_t i = 0; av.v && i < av.n; i++)
		free(av.v[i]);
	free(av.v);
	return self;
}

kbox_kspec_t *kbox_kspec_load(const char *dir, kbox_error_t *err)
{
	char *file = join(dir, "kernel.json");
	char real[PATH_MAX];
	json_error_t jerr;
	json_t *root = NULL;
	kbox_kspec_t *self = NULL;
	const char *rdir, *base;

	if (!file) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	root = json_load_file(file, 0, &jerr);
	if (!root) {
		if (access(file, R_OK) < 0)
			kbox_error_set_sys(err, "kernelspec %s", file);
		else
			kbox_error_set(err, KBOX_E_INVALID,
			               "kernelspec %s: invalid JSON at line %d: %s", file,
			               jerr.line, jerr.text);
		goto out;
	}
	rdir = realpath(dir, real) ? real : dir;
	base = strrchr(rdir, '/');
	base = base ? base + 1 : rdir;
	self = from_json(root, base, rdir, file, err);
out:
	json_decref(root);
	free(file);
	return self;
}

kbox_kspec_t *kbox_kspec_from_json(const char *name, const json_t *spec, kbox_error_t *err)
{
	if (!valid_name(name)) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "kernelspec name \"%s\" is invalid (letters, digits, '.', '_', '-')",
		               name ? name : "");
		return NULL;
	}
	return from_json((json_t *)spec, name, "", name, err);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **kbox_kspec_list(void)
{
	char **path = kbox_kspec_search_path();
	strv_t names = {0}, out = {0};

	for (char **p = path; p && *p; p++) {
		char *kdir = join(*p, "kernels");
		DIR *d = kdir ? opendir(kdir) : NULL;
		struct dirent *de;
		while (d && (de = readdir(d))) {
			char lower[256], *dir, *file, *line;
			struct stat st;
			size_t i;
			if (!valid_name(de->d_name) || strlen(de->d_name) >= sizeof lower)
				continue;
			for (i = 0; de->d_name[i]; i++)
				lower[i] = (char)tolower((unsigned char)de->d_name[i]);
			lower[i] = '\0';
			if (strv_has(&names, lower))
				continue;
			dir = join(kdir, de->d_name);
			file = dir ? join(dir, "kernel.json") : NULL;
			if (file && stat(file, &st) == 0 && S_ISREG(st.st_mode)) {
				size_t n = strlen(lower) + strlen(dir) + 2;
				line = malloc(n);
				if (line) {
					snprintf(line, n, "%s\t%s", lower, dir);
					strv_push(&out, line);
					strv_push_unique(&names, lower);
				}
			}
			free(file);
			free(dir);
		}
		if (d)
			closedir(d);
		free(kdir);
	}
	kbox_strv_free(path);
	for (size_t i = 0; i < names.n; i++)
		free(names.v[i]);
	free(names.v);
	if (out.n)
		qsort(out.v, out.n, sizeof *out.v, cmp_str);
	return strv_finish(&out);
}

void kbox_kspec_destroy(kbox_kspec_t **self_p)
{
	kbox_kspec_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	free(self->name);
	free(self->resource_dir);
	free(self->display_name);
	free(self->language);
	kbox_strv_free(self->argv);
	json_decref(self->env);
	json_decref(self->metadata);
	free(self);
	*self_p = NULL;
}

const char *kbox_kspec_name(const kbox_kspec_t *self)
{
	return self->name;
}
const char *kbox_kspec_resource_dir(const kbox_kspec_t *self)
{
	return self->resource_dir;
}
const char *kbox_kspec_display_name(const kbox_kspec_t *self)
{
	return self->display_name;
}
const char *kbox_kspec_language(const kbox_kspec_t *self)
{
	return self->language;
}
kbox_interrupt_mode_t kbox_kspec_interrupt_mode(const kbox_kspec_t *self)
{
	return self->interrupt_mode;
}
char *const *kbox_kspec_argv(const kbox_kspec_t *self)
{
	return self->argv;
}
json_t *kbox_kspec_env(const kbox_kspec_t *self)
{
	return self->env;
}
json_t *kbox_kspec_metadata(const kbox_kspec_t *self)
{
	return self->metadata;
}

/* Replace "{name}" in ARG, where name is [A-Za-z0-9_]+, by LOOKUP(name);
 * NULL from LOOKUP leaves the text as it is.  DOLLAR: match "${name}". */
static char *substitute(const char *arg, int dollar, const char *(*lookup)(const char *, void *),
                        void *ctx)
{
	kx_buf_t b = KX_BUF_INIT;
	const char *p = arg;

	while (*p) {
		const char *open = dollar ? strstr(p, "${") : strchr(p, '{');
		const char *nstart, *q;
		char name[128];
		const char *val;
		if (!open) {
			kx_buf_appends(&b, p);
			break;
		}
		nstart = open + (dollar ? 2 : 1);
		for (q = nstart; *q && (isalnum((unsigned char)*q) || *q == '_'); q++)
			;
		if (*q != '}' || q == nstart || (size_t)(q - nstart) >= sizeof name) {
			kx_buf_append(&b, p, (size_t)(nstart - p));
			p = nstart;
			continue;
		}
		memcpy(name, nstart, (size_t)(q - nstart));
		name[q - nstart] = '\0';
		val = lookup(name, ctx);
		kx_buf_append(&b, p, (size_t)(open - p));
		if (val)
			kx_buf_appends(&b, val);
		else
			kx_buf_append(&b, open, (size_t)(q + 1 - open));
		p = q + 1;
	}
	return kx_buf_take(&b, NULL);
}

struct argv_ctx {
	const char *connection_file;
	const char *resource_dir;
};

static const char *argv_lookup(const char *name, void *arg)
{
	struct argv_ctx *c = arg;
	if (strcmp(name, "connection_file") == 0)
		return c->connection_file;
	if (strcmp(name, "resource_dir") == 0)
		return c->resource_dir;
	if (strcmp(name, "prefix") == 0)
		return "/usr";
	return NULL;
}

char **kbox_kspec_format_argv(const kbox_kspec_t *self, const char *connection_file,
                              kbox_error_t *err)
{
	char real[PATH_MAX];
	struct argv_ctx c = {connection_file, self->resource_dir};
	strv_t sv = {0};

	if (connection_file && realpath(connection_file, real))
		c.connection_file = real;
	for (char **a = self->argv; *a; a++)
		if (strv_push(&sv, substitute(*a, 0, argv_lookup, &c)) < 0) {
			kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
			kbox_strv_free(sv.v);
			return NULL;
		}
	return strv_finish(&sv);
}

static const char *env_lookup(const char *name, void *arg)
{
	const char *v = getenv(name);
	(void)arg;
	return v ? v : "";
}

char **kbox_kspec_format_env(const kbox_kspec_t *self)
{
	strv_t sv = {0};
	const char *key;
	json_t *v;

	json_object_foreach(self->env, key, v)
	{
		char *val, *kv;
		size_t n;
		if (!json_is_string(v))
			continue;
		val = substitute(json_string_value(v), 1, env_lookup, NULL);
		if (!val)
			continue;
		n = strlen(key) + strlen(val) + 2;
		kv = malloc(n);
		if (kv)
			snprintf(kv, n, "%s=%s", key, val);
		free(val);
		strv_push(&sv, kv);
	}
	return strv_finish(&sv);
}
