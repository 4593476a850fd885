/* src/runtime/ro_bind.c — read-only binds a kernel's installation needs in
 * the bwrap sandbox: found, and checked (ro_bind.h, kbox(7)). */
#include "runtime/runtime.h"
#include "runtime/ro_bind.h"
#include "runtime/bwrap.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where a bind may lead, inside (and its real path in the root). */
static const char *const allowed[] = {"/etc", "/opt", "/srv", NULL};
static const char *const allowed_src[] = {"/etc", "/opt", "/srv", "/usr", NULL};

/* The sandbox's own /etc files (bwrap.c makes them): never replaced. */
static const char *const own_etc[] = {"/etc/passwd",   "/etc/group",         "/etc/hosts",
                                      "/etc/hostname", "/etc/nsswitch.conf", NULL};

/* True when PATH is DIR or lies below it. */
static bool within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' || n == 1);
}

/* True when PATH lies strictly below one of DIRS. */
static bool below_one(const char *path, const char *const *dirs)
{
	for (size_t i = 0; dirs[i]; i++)
		if (within(path, dirs[i]) && strcmp(path, dirs[i]) != 0)
			return true;
	return false;
}

/* The next component of the path at *REST: its start (not NUL-ended), its
 * length in *N, and *REST moved past it; NULL when there is none. */
static const char *next_component(const char **rest, size_t *n)
{
	const char *p = *rest;

	while (*p == '/')
		p++;
	if (!*p)
		return NULL;
	*rest = strchrnul(p, '/');
	*n = (size_t)(*rest - p);
	return p;
}

/* PATH (absolute) without "." components, repeated or trailing slashes:
 * into OUT.  ".." takes the component before away when DOTDOT, else is
 * refused.  0 or -1. */
static int normalize(const char *path, bool dotdot, char *out, size_t size)
{
	size_t len = 0, n;
	if (path[0] != '/' || size < 2)
		return -1;
	out[0] = '\0';
	for (const char *rest = path, *p; (p = next_component(&rest, &n));) {
		if (n == 1 && p[0] == '.')
			;
		else if (n == 2 && p[0] == '.' && p[1] == '.') {
			char *slash;
			if (!dotdot)
				return -1;
			if ((slash = strrchr(out, '/')))
				*slash = '\0';
			len = strlen(out);
		} else {
			if (len + 1 + n >= size)
				return -1;
			out[len++] = '/';
			memcpy(out + len, p, n);
			len += n;
			out[len] = '\0';
		}
	}
	if (!len)
		snprintf(out, size, "/");
	return 0;
}

/* PATH's real path inside ROOT ("" for the host): every symlink followed
 * as the sandbox would, an absolute target from ROOT.  Into OUT (without
 * ROOT).  0, or -1 with errno. */
static int resolve_in(const char *root, const char *path, char *out, size_t size)
{
	char todo[PATH_MAX], cur[PATH_MAX] = "", full[PATH_MAX * 2], link[PATH_MAX];
	int hops = 0;
	if (snprintf(todo, sizeof todo, "%s", path) >= (int)sizeof todo)
		return errno = ENAMETOOLONG, -1;
	while (todo[0]) {
		size_t n;
		const char *end = todo, *p = next_component(&end, &n);
		char comp[NAME_MAX + 1];
		struct stat st;
		ssize_t ln;
		if (!p)
			break;
		if (n > NAME_MAX)
			return errno = ENAMETOOLONG, -1;
		memcpy(comp, p, n);
		comp[n] = '\0';
		memmove(todo, end, strlen(end) + 1);
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			char *slash = strrchr(cur, '/');
			if (slash)
				*slash = '\0';
			continue;
		}
		if (strlen(cur) + 1 + n >= sizeof cur)
			return errno = ENAMETOOLONG, -1;
		strcat(cur, "/");
		strcat(cur, comp);
		snprintf(full, sizeof full, "%s%s", root, cur);
		if (lstat(full, &st) < 0)
			return -1;
		if (!S_ISLNK(st.st_mode))
			continue;
		if (++hops > 40)
			return errno = ELOOP, -1;
		if ((ln = readlink(full, link, sizeof link - 1)) <= 0)
			return -1;
		link[ln] = '\0';
		/* the link's target, then what was left of the path */
		if (strlen(link) + 1 + strlen(todo) >= sizeof todo)
			return errno = ENAMETOOLONG, -1;
		memmove(todo + ln + 1, todo, strlen(todo) + 1);
		memcpy(todo, link, (size_t)ln);
		todo[ln] = '/';
		*strrchr(cur, '/') = '\0';
		if (link[0] == '/')
			cur[0] = '\0';
	}
	snprintf(out, size, "%s", cur[0] ? cur : "/");
	return 0;
}

/* The part of NAME (one path component) that makes it look like a secret,
 * or NULL. */
static const char *secret_name(const char *name)
{
	static const char *const parts[] = {"shadow",     "secret", "private", "passw", "token",
	                                    "credential", "keytab", "sudoers", NULL};
	static const char *const whole[] = {"ssh",      ".ssh",   "gnupg", ".gnupg",
	                                    "security", ".netrc", NULL};
	char low[NAME_MAX + 1];
	size_t n = 0;
	for (; name[n] && n < NAME_MAX; n++)
		low[n] = (char)tolower((unsigned char)name[n]);
	low[n] = '\0';
	for (size_t i = 0; parts[i]; i++)
		if (strstr(low, parts[i]))
			return parts[i];
	for (size_t i = 0; whole[i]; i++)
		if (strcmp(low, whole[i]) == 0)
			return whole[i];
	if (n > 4 && strcmp(low + n - 4, ".key") == 0)
		return ".key";
	return NULL;
}

/* The component of PATH that looks secret into WHY, or -1 when none. */
static int secret_path(const char *path, char *why, size_t size)
{
	char copy[PATH_MAX], *save = NULL;
	snprintf(copy, sizeof copy, "%s", path);
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		const char *s = secret_name(c);
		if (s) {
			snprintf(why, size, "%s", s);
			return 0;
		}
	}
	return -1;
}

/* True when every user may read ST's file (and search it, a directory). */
static bool for_all(const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return (st->st_mode & (S_IROTH | S_IXOTH)) == (S_IROTH | S_IXOTH);
	return S_ISREG(st->st_mode) && (st->st_mode & S_IROTH);
}

/* Check what directory DIRFD (taken) holds, down to DEPTH more levels:
 * only files and directories every user may read, none with a secret
 * name (symlinks are not followed: the sandbox resolves them in its own
 * view).  *COUNT counts the entries.  0, or -1 with the offending name
 * (below PATH) in ERR. */
static int check_tree(int dirfd, const char *path, int depth, size_t *count, kbox_error_t *err)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *e;
	int rc = 0;
	if (!d) {
		close(dirfd);
		return kbox_error_set_sys(err, "cannot read %s", path);
	}
	while (rc == 0 && (e = readdir(d))) {
		char sub[PATH_MAX], why[32];
		struct stat st;
		const char *s;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
		if (++*count > KR_RO_BIND_ENTRIES)
			rc = kbox_error_set(err, KBOX_E_INVALID,
			                    "it holds more than %d entries to check",
			                    KR_RO_BIND_ENTRIES);
		else if ((s = secret_name(e->d_name)) && snprintf(why, sizeof why, "%s", s) > 0)
			rc = kbox_error_set(err, KBOX_E_INVALID,
			                    "it holds %s, whose name looks secret (%s)", sub, why);
		else if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			rc = kbox_error_set_sys(err, "cannot check %s", sub);
		else if (S_ISLNK(st.st_mode))
			continue;
		else if (!for_all(&st))
			rc = kbox_error_set(err, KBOX_E_INVALID,
			                    "it holds %s, which not every user may read", sub);
		else if (S_ISDIR(st.st_mode)) {
			int fd;
			if (depth <= 0)
				rc = kbox_error_set(err, KBOX_E_INVALID,
				                    "it is deeper than %d levels",
				                    KR_RO_BIND_DEPTH);
			else if ((fd = openat(dirfd, e->d_name,
			                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
				rc = kbox_error_set_sys(err, "cannot read %s", sub);
			else
				rc = check_tree(fd, sub, depth - 1, count, err);
		}
	}
	closedir(d);
	return rc;
}

/* True when PATH lies in one of DIRS, or holds one. */
static bool near(const char *path, const char *dir)
{
	return dir && dir[0] == '/' && strcmp(dir, "/") != 0 &&
	       (within(path, dir) || within(dir, path));
}

/* The home directory (of /etc/passwd, or $HOME) that PATH lies in or
 * holds, into WHY; -1 when none. */
static int home_near(const char *path, char *why, size_t size)
{
	const char *home = getenv("HOME");
	struct passwd *pw;
	int rc = -1;
	if (home && near(path, home)) {
		snprintf(why, size, "%s", home);
		return 0;
	}
	setpwent();
	while (rc < 0 && (pw = getpwent()))
		if (pw->pw_dir && strcmp(pw->pw_dir, "/nonexistent") != 0 &&
		    near(path, pw->pw_dir)) {
			snprintf(why, size, "%s (%s's home)", pw->pw_dir, pw->pw_name);
			rc = 0;
		}
	endpwent();
	return rc;
}

int kr_ro_bind_check(const char *root, const char *path, const char *const *deny, char *dest,
                     char *src, size_t size, kbox_error_t *err)
{
	char real[PATH_MAX], host[PATH_MAX * 2], why[PATH_MAX + 64];
	struct stat st;
	size_t count = 0;

	if (!root)
		root = "";
	if (normalize(path, false, dest, size) < 0)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "cannot bind %s: not an absolute path without "
		                      "\"..\"",
		                      path);
	if (kr_bwrap_shows(dest))
		return 0;
	if (!below_one(dest, allowed))
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "cannot bind %s: only what lies below /etc, /opt or /srv may be bound",
		        dest);
	for (size_t i = 0; own_etc[i]; i++)
		if (within(own_etc[i], dest))
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "cannot bind %s: the sandbox has its own %s", dest,
			                      own_etc[i]);
	/* refused by name, before anything is said of the file */
	if (secret_path(dest, why, sizeof why) == 0)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "cannot bind %s: its name looks secret (%s)", dest, why);
	if (resolve_in(root, dest, real, sizeof real) < 0)
		return kbox_error_set_sys(err, "cannot bind %s", dest);
	if (!below_one(real, allowed_src))
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "cannot bind %s: it leads to %s, not below /etc, /opt, /srv or /usr", dest,
		        real);
	if (secret_path(real, why, sizeof why) == 0)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "cannot bind %s: it leads to %s, whose name "
		                      "looks secret (%s)",
		                      dest, real, why);
	snprintf(host, sizeof host, "%s%s", root, real);
	for (size_t i = 0; deny && deny[i]; i++)
		if (near(host, deny[i]) || near(dest, deny[i]))
			return kbox_error_set(err, KBOX_E_INVALID,
			                      "cannot bind %s: it is, holds or lies in "
			                      "kbox's own %s",
			                      dest, deny[i]);
	if (home_near(real, why, sizeof why) == 0 || home_near(dest, why, sizeof why) == 0)
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "cannot bind %s: it is, holds or lies in the home directory %s", dest, why);
	if (lstat(host, &st) < 0)
		return kbox_error_set_sys(err, "cannot bind %s", dest);
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "cannot bind %s: only a regular file or a directory may be bound", dest);
	if (!for_all(&st))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "cannot bind %s: not every user may read it (mode %04o)",
		                      dest, (unsigned)(st.st_mode & 0777));
	/* and reach it: every directory above it, up to ROOT, searchable by
	 * all (root's check must not pass what the sandbox user could not
	 * see; where ROOT itself is, is the operator's choice) */
	{
		char up[PATH_MAX * 2];
		struct stat ust;
		size_t top = strlen(root);
		snprintf(up, sizeof up, "%s", host);
		for (char *slash = strrchr(up, '/'); slash && slash > up + top;
		     slash = strrchr(up, '/')) {
			*slash = '\0';
			if (stat(up, &ust) < 0 || !(ust.st_mode & S_IXOTH))
				return kbox_error_set(
				        err, KBOX_E_INVALID,
				        "cannot bind %s: not every user may reach it (%s is mode %04o)",
				        dest, up, (unsigned)(ust.st_mode & 0777));
		}
	}
	if (S_ISDIR(st.st_mode)) {
		kbox_error_t terr = {0};
		int fd = open(host, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return kbox_error_set_sys(err, "cannot bind %s", dest);
		if (check_tree(fd, host, KR_RO_BIND_DEPTH - 1, &count, &terr) < 0)
			return kbox_error_set(err, KBOX_E_INVALID, "cannot bind %s: %s", dest,
			                      terr.msg);
	}
	if (snprintf(src, size, "%s", host) >= (int)size)
		return kbox_error_set(err, KBOX_E_INVALID, "cannot bind %s: its path is too long",
		                      dest);
	return 1;
}

/* ---- finding them ---- */

typedef struct {
	char **v; /* pairs: src, dest */
	size_t n; /* strings */
	bool failed;
} binds_t;

/* Add SRC at DEST unless DEST is there already. */
static void add_bind(binds_t *b, const char *src, const char *dest)
{
	char **v;
	for (size_t i = 1; i < b->n; i += 2)
		if (strcmp(b->v[i], dest) == 0)
			return;
	if (b->failed || !(v = realloc(b->v, (b->n + 3) * sizeof *v))) {
		b->failed = true;
		return;
	}
	b->v = v;
	v[b->n] = strdup(src);
	v[b->n + 1] = strdup(dest);
	v[b->n + 2] = NULL;
	if (!v[b->n] || !v[b->n + 1])
		b->failed = true;
	b->n += 2;
}

/* The symlinks in DIR (inside ROOT) and, with DEPTH > 1, in its
 * subdirectories: each target outside what the sandbox shows that passes
 * the check, into B.  *SEEN counts the entries. */
static void scan(const char *root, const char *dir, int depth, const char *const *deny, binds_t *b,
                 size_t *seen)
{
	char host[PATH_MAX * 2];
	DIR *d;
	struct dirent *e;
	snprintf(host, sizeof host, "%s%s", root, dir);
	if (!(d = opendir(host)))
		return;
	while ((e = readdir(d)) && *seen < KR_RO_BIND_ENTRIES && b->n < 2 * KR_RO_BIND_MAX) {
		char sub[PATH_MAX], link[PATH_MAX], joined[PATH_MAX * 2], target[PATH_MAX],
		        dest[PATH_MAX], src[PATH_MAX * 2];
		struct stat st;
		ssize_t n;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		++*seen;
		if (snprintf(sub, sizeof sub, "%s/%s", strcmp(dir, "/") ? dir : "", e->d_name) >=
		            (int)sizeof sub ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth > 1)
			scan(root, sub, depth - 1, deny, b, seen);
		if (!S_ISLNK(st.st_mode) ||
		    (n = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1)) <= 0)
			continue;
		link[n] = '\0';
		snprintf(joined, sizeof joined, "%s%s%s", link[0] == '/' ? "" : dir,
		         link[0] == '/' ? "" : "/", link);
		if (normalize(joined, true, target, sizeof target) == 0 &&
		    kr_ro_bind_check(root, target, deny, dest, src, sizeof src, NULL) == 1)
			add_bind(b, src, dest);
	}
	closedir(d);
}

/* Drop the binds that lie inside another (decided first, then compacted). */
static void drop_nested(binds_t *b)
{
	size_t pairs = b->n / 2, k = 0;
	bool *inside = calloc(pairs ? pairs : 1, sizeof *inside);
	if (!inside) {
		b->failed = true;
		return;
	}
	for (size_t i = 0; i < pairs; i++)
		for (size_t j = 0; j < pairs && !inside[i]; j++)
			inside[i] = j != i && within(b->v[2 * i + 1], b->v[2 * j + 1]);
	for (size_t i = 0; i < pairs; i++) {
		if (inside[i]) {
			free(b->v[2 * i]);
			free(b->v[2 * i + 1]);
		} else {
			b->v[k++] = b->v[2 * i];
			b->v[k++] = b->v[2 * i + 1];
		}
	}
	free(inside);
	b->n = k;
	if (b->v)
		b->v[k] = NULL;
}

char **kr_ro_bind_find(const char *root, const kbox_kspec_t *spec, const char *exe,
                       const char *const *deny, kbox_error_t *err)
{
	json_t *kbox = json_object_get(kbox_kspec_metadata(spec), "kbox");
	json_t *list = json_object_get(kbox, "ro_bind"), *v;
	binds_t b = {0};
	char real[PATH_MAX], dir[PATH_MAX], tree[PATH_MAX * 2], *slash;
	size_t i, seen = 0;

	if (!root)
		root = "";
	if (list && (!json_is_array(list) || json_array_size(list) > KR_RO_BIND_MAX)) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "kernelspec %s: metadata.kbox.ro_bind is not a list of "
		               "at most %d paths",
		               kbox_kspec_name(spec), KR_RO_BIND_MAX);
		return NULL;
	}
	json_array_foreach(list, i, v)
	{
		char dest[PATH_MAX], src[PATH_MAX * 2];
		kbox_error_t cerr = {0};
		int rc;
		if (!json_is_string(v)) {
			kbox_error_set(err, KBOX_E_INVALID,
			               "kernelspec %s: metadata.kbox.ro_bind[%zu] is not "
			               "a string",
			               kbox_kspec_name(spec), i);
			goto fail;
		}
		if ((rc = kr_ro_bind_check(root, json_string_value(v), deny, dest, src, sizeof src,
		                           &cerr)) < 0) {
			kbox_error_set(err, cerr.code, "kernelspec %s: metadata.kbox.ro_bind: %s",
			               kbox_kspec_name(spec), cerr.msg);
			goto fail;
		}
		if (rc == 1)
			add_bind(&b, src, dest);
	}
	/* the install tree: EXE's directory, and PREFIX/lib/NAME */
	if (exe && exe[0] == '/' && resolve_in(root, exe, real, sizeof real) == 0 &&
	    (slash = strrchr(real, '/')) && slash != real) {
		/* (not a directory all programs share: its links are theirs) */
		static const char *const shared[] = {
		        "/bin",           "/sbin",           "/usr/bin", "/usr/sbin",
		        "/usr/local/bin", "/usr/local/sbin", NULL};
		const char *name = slash + 1;
		bool own = true;
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - real), real);
		for (size_t k = 0; shared[k]; k++)
			own &= strcmp(dir, shared[k]) != 0;
		if (own)
			scan(root, dir, 1, deny, &b, &seen);
		if ((slash = strrchr(dir, '/')) && strcmp(slash, "/bin") == 0) {
			*slash = '\0';
			for (int k = 0; k < 2; k++) {
				if (snprintf(tree, sizeof tree, "%s/%s/%s", dir,
				             k ? "lib64" : "lib", name) < PATH_MAX)
					scan(root, tree, 2, deny, &b, &seen);
			}
		}
	}
	if (!b.failed)
		drop_nested(&b);
	if (b.failed) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto fail;
	}
	if (!b.v && !(b.v = calloc(1, sizeof *b.v))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	return b.v;
fail:
	kbox_strv_free(b.v);
	return NULL;
}
