/* src/runtime/session.c — session names, the state directory, session files, the
 * event log (the control socket's client side is ctl.c). */
#include "runtime/runtime.h"
#include "runtime/session.h"
#include "runtime/ws_live.h"
#include "runtime/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The longest session directory: what kbox makes inside it (run/sandbox/
 * kernel-N.sandbox.json, outputs/…) is named in PATH_MAX bytes.  Its
 * sockets have no limit of their own (kx_unix_path). */
#define SESSION_DIR_MAX (PATH_MAX - 512)

int kr_session_check_name(const char *name, kbox_error_t *err)
{
	size_t n;
	if (!name || !*name)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "invalid session name \"\": it is empty");
	n = strlen(name);
	if (n > KR_SESSION_NAME_MAX)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "invalid session name \"%.20s…\": longer than %d characters",
		                      name, KR_SESSION_NAME_MAX);
	if (name[0] == '.' || name[0] == '-')
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "invalid session name \"%s\": it may not start with '%c'",
		                      name, name[0]);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return kbox_error_set(
			        err, KBOX_E_INVALID,
			        "invalid session name \"%s\": only letters, digits, '.', '_' and "
			        "'-' are allowed",
			        name);
	}
	return 0;
}

/* Whether a symbolic link LINK (what lstat says of it) in the directory
 * PARENT (a descriptor) could have been put there by the caller: PARENT
 * is writable to it, and not sticky, or sticky and LINK is its own. */
static bool link_ours_to_put(int parent, const struct stat *link)
{
	char p[64];
	struct stat up;
	snprintf(p, sizeof p, "/proc/self/fd/%d", parent);
	return access(p, W_OK) == 0 &&
	       (fstat(parent, &up) < 0 || !(up.st_mode & S_ISVTX) || link->st_uid == geteuid());
}

/* The path of the directory FD as the kernel knows it, in BUF (PATH_MAX
 * bytes); "" for "/".  0, or -1. */
static int fd_path(int fd, char *buf)
{
	char p[64];
	ssize_t n;
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	if ((n = readlink(p, buf, PATH_MAX - 1)) <= 0 || buf[0] != '/')
		return -1;
	buf[n] = '\0';
	if (n == 1)
		buf[0] = '\0';
	return 0;
}

/* The advice for a state directory that will not do: "give KBOX_HOME
 * WHAT", and, when OR_ELSE, what else would do, said for where its path
 * came from (KBOX_HOME, XDG_STATE_HOME, HOME or root's default: the
 * order kr_state_home reads them in).  BUF, for a message. */
static const char *home_fix(char *buf, size_t size, const char *what, bool or_else)
{
	const char *v = getenv("KBOX_HOME");
	if (v && *v)
		snprintf(buf, size, "give KBOX_HOME %s%s", what,
		         or_else ? ", or leave it unset for the default" : "");
	else if ((v = getenv("XDG_STATE_HOME")) && *v == '/')
		snprintf(buf, size, "its path comes from XDG_STATE_HOME=%s: give KBOX_HOME %s%s", v,
		         what, or_else ? ", or XDG_STATE_HOME another directory" : "");
	else if (geteuid() != 0 && (v = getenv("HOME")) && *v == '/')
		snprintf(buf, size, "its path comes from HOME=%s: give KBOX_HOME %s%s", v, what,
		         or_else ? ", or HOME your home directory" : "");
	else
		snprintf(buf, size, "give KBOX_HOME %s", what);
	return buf;
}

/* (session.h) Each part is opened O_NOFOLLOW from the descriptor of the
 * part above and, a link, read with readlinkat of what was opened, as the
 * kernel resolves a path.  REFUSE is for an ordinary user's KBOX_HOME: a
 * link in a directory the user can write is refused, since code of a
 * sandbox that holds that directory open (once in its workspace) could
 * have put it there, in place of the state directory or a directory
 * above it, to have kbox act on another state directory of the user's
 * (review 15, B15-2); a look before the resolution could be raced, a
 * rename exchanging the two between them (review 16, B16-1).  Links in
 * directories only root can change (/home -> /usr/home) are followed.
 * New, or NULL with ERR. */
/* the longest a state directory's path is shown in a message */
#define SHOWN_MAX 160

char *kr_resolve_home(const char *path, bool refuse, kbox_error_t *err)
{
	char todo[2 * PATH_MAX], next[2 * PATH_MAX], tail[PATH_MAX] = "", at[PATH_MAX];
	char target[PATH_MAX], *out = NULL, shown[SHOWN_MAX + 1];
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), links = 0;
	const char *p;

	/* (a long path shown by its ends: what went wrong is said whole) */
	kx_fmt_middle(shown, sizeof shown, path, SHOWN_MAX);
	if (fd < 0 || strlen(path) >= PATH_MAX) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "state directory %s: its path is %zu bytes long, more than the %d "
		               "a path may have",
		               shown, strlen(path), PATH_MAX - 1);
		goto out;
	}
	strcpy(todo, path);
	p = todo;
	while (*p) {
		const char *end;
		size_t n;
		struct stat st;
		int nfd;
		while (*p == '/')
			p++;
		end = strchrnul(p, '/');
		n = (size_t)(end - p);
		if (n == 0 || (n == 1 && p[0] == '.')) {
			p = end;
			continue;
		}
		if (n > NAME_MAX) {
			kbox_error_set(err, KBOX_E_INVALID,
			               "state directory %s: a part of it is %zu bytes long, more "
			               "than the %d a file name may have",
			               shown, n, NAME_MAX);
			goto out;
		}
		if (strlen(tail) + n + 2 > sizeof tail) {
			kbox_error_set(err, KBOX_E_INVALID,
			               "state directory %s: its path is more than the %d bytes a "
			               "path may have",
			               shown, PATH_MAX - 1);
			goto out;
		}
		memcpy(at, p, n);
		at[n] = '\0';
		p = end;
		if (tail[0]) { /* below a part that is not there: plain text */
			if (strcmp(at, "..") == 0)
				*strrchr(tail, '/') = '\0';
			else
				strcat(strcat(tail, "/"), at);
			continue;
		}
		nfd = openat(fd, at, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && (errno == ENOENT || errno == ENAMETOOLONG)) { /* not there */
			strcat(strcat(tail, "/"), at);
			continue;
		}
		if (nfd < 0 && errno == EACCES) { /* the directory above: not to be searched */
			char where[PATH_MAX], fix[KBOX_ERROR_MSG_MAX];
			struct stat up;
			if (fd_path(fd, where) < 0 || fstat(fd, &up) < 0)
				snprintf(where, sizeof where, "?"), up.st_mode = 0, up.st_uid = 0;
			kbox_error_set(
			        err, KBOX_E_INVALID,
			        "state directory %s: you may not pass through %s (mode %04o, "
			        "owner uid %u): %s",
			        shown, where[0] ? where : "/", (unsigned)(up.st_mode & 07777),
			        (unsigned)up.st_uid,
			        home_fix(fix, sizeof fix,
			                 "a directory of your own (KBOX_HOME=$(mktemp -d))", true));
			goto out;
		}
		if (nfd < 0 || fstat(nfd, &st) < 0) {
			kbox_error_set_sys(err, "state directory %s: cannot look at its part %s",
			                   shown, at);
			if (nfd >= 0)
				close(nfd);
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			ssize_t len;
			if (refuse && link_ours_to_put(fd, &st)) {
				/* (the advice: where it leads, spelt as kbox would) */
				char where[PATH_MAX], fix[KBOX_ERROR_MSG_MAX], to[PATH_MAX + 64];
				char *real = kr_resolve_home(path, false, NULL);
				if (fd_path(fd, where) < 0)
					snprintf(where, sizeof where, "?");
				snprintf(to, sizeof to, "the directory it leads to: %s",
				         real ? real : "?");
				kbox_error_set(
				        err, KBOX_E_INVALID,
				        "state directory %s: %s/%s is a symbolic link in a "
				        "directory you can write, where code of a sandbox could "
				        "have put it to have kbox use another state directory "
				        "(kbox(7), threat 44); %s",
				        shown, where, at, home_fix(fix, sizeof fix, to, false));
				free(real);
				close(nfd);
				goto out;
			}
			len = readlinkat(nfd, "", target, sizeof target - 1);
			close(nfd);
			if (len <= 0 || ++links > 40 || (size_t)len + strlen(p) + 2 > sizeof next) {
				errno = len <= 0 ? errno : ELOOP;
				kbox_error_set_sys(err, "state directory %s: cannot follow %s",
				                   shown, at);
				goto out;
			}
			target[len] = '\0';
			snprintf(next, sizeof next, "%s/%s", target, p);
			strcpy(todo, next);
			p = todo;
			if (target[0] == '/') {
				close(fd);
				if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
					kbox_error_set_sys(err, "cannot open /");
					goto out;
				}
			}
			continue;
		}
		close(fd);
		fd = nfd;
		if (!S_ISDIR(st.st_mode) && *p) {
			char where[PATH_MAX];
			if (fd_path(fd, where) < 0)
				snprintf(where, sizeof where, "%s", at);
			kbox_error_set(err, KBOX_E_INVALID,
			               "state directory %s: %s is not a directory", shown, where);
			goto out;
		}
	}
	if (fd_path(fd, at) < 0) {
		kbox_error_set(err, KBOX_E_INVALID, "state directory %s: cannot tell where it is",
		               shown);
		goto out;
	}
	if (strlen(at) + strlen(tail) + 1 > PATH_MAX ||
	    asprintf(&out, "%s%s", at[0] || tail[0] ? at : "/", tail) < 0) {
		out = NULL;
		kbox_error_set(err, KBOX_E_INVALID,
		               "state directory %s: its path is more than the %d bytes a path may "
		               "have",
		               shown, PATH_MAX - 1);
	}
out:
	if (fd >= 0)
		close(fd);
	return out;
}

/* The last KBOX_HOME (or default) kr_state_home resolved, made absolute,
 * and what it resolved to. */
static char *last_given, *last_home;

char *kr_state_home(kbox_error_t *err)
{
	const char *v = getenv("KBOX_HOME");
	/* links on the way are refused unless it is the default below the
	 * home the password database names (no workspace is there): a
	 * KBOX_HOME, an XDG_STATE_HOME or a HOME can name any directory */
	bool own_home = false;
	char *path = NULL;
	int n;

	if (v && *v)
		n = asprintf(&path, "%s", v);
	else if ((v = getenv("XDG_STATE_HOME")) && *v == '/')
		n = asprintf(&path, "%s/kbox", v);
	else if (geteuid() == 0) /* root's home is closed to the sandbox user */
		n = asprintf(&path, "%s", KR_ROOT_STATE_HOME);
	else if ((v = getenv("HOME")) && *v == '/') {
		struct passwd *pw = getpwuid(getuid());
		own_home = pw && pw->pw_dir && strcmp(pw->pw_dir, v) == 0;
		n = asprintf(&path, "%s/.local/state/kbox", v);
	} else {
		kbox_error_set(
		        err, KBOX_E_INVALID,
		        "no state directory: set KBOX_HOME (neither XDG_STATE_HOME nor HOME is an "
		        "absolute path)");
		return NULL;
	}
	if (n < 0) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	if (path[0] != '/') { /* make a relative KBOX_HOME absolute: sockets need it */
		char cwd[4096], *abs = NULL;
		if (!getcwd(cwd, sizeof cwd) || asprintf(&abs, "%s/%s", cwd, path) < 0) {
			kbox_error_set_sys(err, "cannot make KBOX_HOME=%s absolute", path);
			free(path);
			return NULL;
		}
		free(path);
		path = abs;
	}
	/* (resolved once in a process: every later call answers the same, as
	 * the first, whatever was swapped in since) */
	if (last_given && strcmp(last_given, path) == 0) {
		free(path);
		if (!(path = strdup(last_home)))
			kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return path;
	}
	{ /* one spelling of it (KBOX_HOME=/tmp/x/, /tmp/./x, a link in it):
	   * the sockets are found, and the workspace check compares, by it */
		char *canon = kr_resolve_home(path, !own_home && geteuid() != 0, err);
		if (!canon) {
			free(path);
			return NULL;
		}
		free(last_given);
		free(last_home);
		last_given = path;
		path = canon;
		last_home = strdup(canon);
	}
	/* and from now on nothing below it is reached through a link: one
	 * there now was put in since (kx_no_links_below) */
	if (!last_home || kx_no_links_below(path) < 0) {
		free(last_given);
		last_given = NULL;
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		free(path);
		return NULL;
	}
	return path;
}

/* mkdir -p with mode 0700 for the parts we create.  Under root the
 * sandboxes must pass through those above PATH (bwrap finds the session's
 * directories as a sandbox's uid): each of them made here is 0710, root's,
 * in the sandbox user's group, as kr_session_share makes the state
 * directory itself. */
static int mkdirs(const char *path, kbox_error_t *err)
{
	/* (the sandbox user, looked up in the password database once) */
	static kr_sandbox_id_t id;
	static int pass = -1;
	kbox_error_t ignored = {0};
	char buf[4096];
	size_t n = strlen(path);
	int fd;
	if (pass < 0)
		pass = geteuid() == 0 && kr_sandbox_identity(&id, &ignored) == 0 && id.drop;
	if (n >= sizeof buf || path[0] != '/')
		return kbox_error_set(err, KBOX_E_INVALID, "path too long: %s", path);
	if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return kbox_error_set_sys(err, "cannot open /");
	memcpy(buf, path, n + 1);
	/* part by part from "/", through the descriptor of the part above,
	 * following no link (PATH has its links resolved: one now was put in
	 * since), so that nothing is made, nor opened to the sandboxes,
	 * anywhere else */
	for (char *p = buf + 1, *part = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char save = *p, proc[64];
			bool made;
			int nfd;
			*p = '\0';
			if (!*part) { /* (an empty part: "//", or a trailing '/') */
				*p = save, part = p + 1;
				if (!save) {
					close(fd);
					return 0;
				}
				continue;
			}
			made = mkdirat(fd, part, 0700) == 0;
			if (!made && errno != EEXIST) {
				kbox_error_set_sys(err, "cannot create directory %s", buf);
				break;
			}
			if ((nfd = openat(fd, part,
			                  O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
				if (errno == ENOTDIR) /* (a file there, or a link) */
					kbox_error_set(err, KBOX_E_INVALID, "%s is not a directory",
					               buf);
				else
					kbox_error_set_sys(err, "cannot create directory %s", buf);
				break;
			}
			close(fd);
			fd = nfd;
			snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
			if (made && save && pass &&
			    (fchownat(fd, "", 0, id.gid, AT_EMPTY_PATH) < 0 ||
			     chmod(proc, 0710) < 0)) {
				kbox_error_set_sys(err, "cannot open %s to the sandboxes", buf);
				break;
			}
			*p = save, part = p + 1;
			if (!save) {
				close(fd);
				return 0;
			}
		}
	}
	close(fd);
	return -1;
}

int kr_state_mark(const char *home, kbox_error_t *err)
{
	char path[4096];
	int fd;
	ssize_t n = (ssize_t)strlen(KR_STATE_MARK_TEXT);

	if ((size_t)snprintf(path, sizeof path, "%s/%s", home, KR_STATE_MARK) >= sizeof path)
		return kbox_error_set(err, KBOX_E_INVALID, "path too long: %s", home);
	if ((fd = kx_open_path(AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600)) <
	    0) {
		if (errno == EEXIST)
			return 0;
		return kbox_error_set_sys(err, "cannot create %s", path);
	}
	if (write(fd, KR_STATE_MARK_TEXT, (size_t)n) != n) {
		kbox_error_set_sys(err, "cannot write %s", path);
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return 1;
}

/* ERR says why the state directory HOME is refused, and the chmod that
 * fixes it.  That advice stands only for a directory kbox made (it holds
 * KR_STATE_MARK, or is the default one, KBOX_HOME unset): changing one
 * kbox did not make (KBOX_HOME=/tmp) could harm what else uses it, so
 * then ERR advises a private directory of its own instead.  -1. */
/* Whether DIR is on a file system of the kernel's own, where no directory
 * can be made (proc, sysfs, cgroups, devpts, debugfs...). */
static bool no_room(const char *dir)
{
	struct statfs fs;
	if (statfs(dir, &fs) < 0)
		return false;
	switch ((unsigned long)fs.f_type) {
	case PROC_SUPER_MAGIC:
	case SYSFS_MAGIC:
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
	case DEVPTS_SUPER_MAGIC:
	case DEBUGFS_MAGIC:
	case SECURITYFS_MAGIC:
		return true;
	default:
		return false;
	}
}

static int home_advice(const char *home, kbox_error_t *err)
{
	const char *given = getenv("KBOX_HOME");
	char mark[4096], *chmod_at;
	struct stat st;

	snprintf(mark, sizeof mark, "%s/%s", home, KR_STATE_MARK);
	if (!given || !*given || lstat(mark, &st) == 0 ||
	    !(chmod_at = strstr(err->msg, ": chmod ")))
		return -1;
	*chmod_at = '\0';
	if (stat(home, &st) == 0 &&
	    ((st.st_mode & S_IWOTH) || access(home, W_OK) < 0 || no_room(home)))
		/* anyone may make a name in it (/tmp, say): one of theirs could
		 * be there first, so a new directory of a name no one knows; and
		 * one we cannot write, or a file system of the kernel's own
		 * (/proc, /sys), has no room for a directory of ours */
		snprintf(chmod_at, sizeof err->msg - (size_t)(chmod_at - err->msg),
		         "; kbox did not make it, and changing it could harm what else uses it: "
		         "give KBOX_HOME a private directory of its own (KBOX_HOME=$(mktemp -d), "
		         "or leave KBOX_HOME unset for the default)");
	else {
		char in[PATH_MAX + 8], word[KX_SHELL_WORD_MAX(PATH_MAX + 8)];
		snprintf(in, sizeof in, "%s/kbox", strcmp(home, "/") == 0 ? "" : home);
		kx_shell_word(in, word, sizeof word);
		snprintf(chmod_at, sizeof err->msg - (size_t)(chmod_at - err->msg),
		         "; kbox did not make it, and changing it could harm what else uses it: "
		         "give KBOX_HOME a private directory of its own (mkdir -m 700 %s, then "
		         "KBOX_HOME=%s)",
		         word, word);
	}
	return -1;
}

/* Whether DIR (resolved) is a home directory: $HOME's, or one of the
 * password database's. */
static bool is_a_home(const char *dir)
{
	char real[PATH_MAX];
	const char *h = getenv("HOME");
	struct passwd *pw;
	bool found = false;
	if (h && h[0] == '/' && realpath(h, real) && strcmp(real, dir) == 0)
		return true;
	setpwent();
	while (!found && (pw = getpwent()))
		found = pw->pw_dir && pw->pw_dir[0] == '/' && strcmp(pw->pw_dir, "/") != 0 &&
		        realpath(pw->pw_dir, real) && strcmp(real, dir) == 0;
	endpwent();
	return found;
}

/* Under root, a state directory HOME that kbox did not make (no
 * KR_STATE_MARK), that the sandboxes cannot reach as it is, and that is
 * a home directory (KBOX_HOME=/root, say), is refused, not opened to
 * them: kr_session_share would make it 0710 in their group, and a home
 * is best kept closed.  0, or -1 with ERR. */
static int home_closed(const char *home, kbox_error_t *err)
{
	kr_sandbox_id_t id;
	kbox_error_t ignored = {0};
	char mark[4096], real[PATH_MAX];
	struct stat st;

	snprintf(mark, sizeof mark, "%s/%s", home, KR_STATE_MARK);
	if (geteuid() != 0 || lstat(mark, &st) == 0 || stat(home, &st) < 0 ||
	    !realpath(home, real) || !is_a_home(real) || kr_sandbox_identity(&id, &ignored) < 0 ||
	    !id.drop)
		return 0;
	id.uid = (uid_t)-1; /* any session's: only the group's and others' bits count */
	if (kr_sandbox_reachable(&id, home, &ignored) == 0)
		return 0;
	{
		/* (as kr_state_home reads them: XDG_STATE_HOME only when
		 * absolute; root's default is no variable's, when HOME or a
		 * user's home is it: the advice is KBOX_HOME alone) */
		const char *v = getenv("KBOX_HOME"), *x = getenv("XDG_STATE_HOME");
		bool given = v && *v, xdg = !given && x && *x == '/';
		char fix[KBOX_ERROR_MSG_MAX];
		if (given || xdg)
			snprintf(
			        fix, sizeof fix,
			        "%s%s%sgive KBOX_HOME a directory of its own outside it, or leave %s "
			        "unset for the default, " KR_ROOT_STATE_HOME,
			        xdg ? "its path comes from XDG_STATE_HOME=" : "", xdg ? x : "",
			        xdg ? ": " : "", xdg ? "XDG_STATE_HOME" : "KBOX_HOME");
		else
			snprintf(fix, sizeof fix,
			         "give KBOX_HOME a directory of its own outside it");
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "the state directory %s is a home directory, best kept closed: "
		        "kbox would open it to the sandboxes (mode 0710, group %s); %s",
		        home, id.user, fix);
	}
}

/* (session.h) Whoever but the user or root could change a directory
 * above the state directory would replace it (rename it, put another in
 * its place) between kbox's look and its use: under root a sandbox's uid
 * owning a directory above it (a workspace's, later given as KBOX_HOME's
 * parent) would have root start a kernel from a session.json of its
 * own. */
int kr_state_parents_safe(const char *home, kbox_error_t *err)
{
	char p[PATH_MAX];
	struct stat st;
	char *slash;

	if (home[0] != '/' || (size_t)snprintf(p, sizeof p, "%s", home) >= sizeof p)
		return 0; /* (refused elsewhere) */
	while ((slash = strrchr(p, '/'))) {
		const char *who;
		slash[slash == p ? 1 : 0] = '\0';
		if (stat(p, &st) < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				goto next;
			return kbox_error_set_sys(err, "state directory %s: cannot look at %s",
			                          home, p);
		}
		if (st.st_uid != 0 && st.st_uid != geteuid())
			who = "its owner, another user";
		else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
			who = st.st_mode & S_IWOTH ? "everyone" : "its group";
		else
			goto next;
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "state directory %s: %s above it can be changed by %s (owner "
		                      "uid %u, mode %04o), who could put another state directory "
		                      "in its place; use a directory whose every parent only you "
		                      "or root can change",
		                      home, p, who, (unsigned)st.st_uid,
		                      (unsigned)(st.st_mode & 07777));
next:
		if (strcmp(p, "/") == 0)
			break;
	}
	return 0;
}

/* The state directory HOME, when it exists, is private: the user's, mode
 * 0700; under root 0710 too, as kr_session_share makes it for the
 * sandbox user's group, but no other user has a reason to open it to
 * a group.  One that does not exist holds no session.  0, or -1 with ERR
 * saying the chmod that fixes it. */
/* Whether HOME's sessions directory, when there is one, is a directory of
 * this user's, not a link (one that code of a sandbox put there would
 * have kbox list, start and remove "sessions" wherever it points).  0, or
 * -1 with ERR. */
static int sessions_dir_own(const char *home, kbox_error_t *err)
{
	char p[PATH_MAX];
	struct stat st;
	if ((size_t)snprintf(p, sizeof p, "%s/sessions", home) >= sizeof p || lstat(p, &st) < 0)
		return 0; /* (too long: refused elsewhere; none yet) */
	if (S_ISDIR(st.st_mode) && st.st_uid == geteuid())
		return 0;
	return kbox_error_set(err, KBOX_E_INVALID,
	                      "%s is not a directory of this user's (%s, owner uid %u): kbox "
	                      "makes it a directory of its own; something else put it there",
	                      p, S_ISLNK(st.st_mode) ? "a symbolic link" : "not a directory",
	                      (unsigned)st.st_uid);
}

/* Whether the state directory HOME, when there is something there, is a
 * directory (newcomer 12, F7: a file there was said to be no directory
 * without saying it was the state directory, nor where its path came
 * from).  0, or -1 with ERR. */
static int home_a_dir(const char *home, kbox_error_t *err)
{
	char fix[KBOX_ERROR_MSG_MAX];
	struct stat st;
	if (stat(home, &st) < 0 || S_ISDIR(st.st_mode))
		return 0;
	return kbox_error_set(
	        err, KBOX_E_INVALID, "state directory %s is not a directory; %s", home,
	        home_fix(fix, sizeof fix, "a directory (KBOX_HOME=$(mktemp -d))", true));
}

/* kr_session_check_home but for where HOME is (in no live workspace, in
 * no other state directory): what it is, and what is above it. */
static int check_home_itself(const char *home, kbox_error_t *err)
{
	struct stat st;
	if (kr_state_parents_safe(home, err) < 0 || sessions_dir_own(home, err) < 0 ||
	    home_a_dir(home, err) < 0)
		return -1;
	if (stat(home, &st) < 0)
		return errno == ENOENT ? 0 : kbox_error_set_sys(err, "state directory %s", home);
	if (kbox_check_private_dir(home, err) < 0)
		return home_advice(home, err);
	if (geteuid() != 0 && (st.st_mode & 070)) {
		char word[KX_SHELL_WORD_MAX(PATH_MAX)];
		kbox_error_set(
		        err, KBOX_E_INVALID,
		        "directory %s is accessible to others (mode %04o, need 0700): chmod 700 %s",
		        home, (unsigned)(st.st_mode & 07777),
		        kx_shell_word(home, word, sizeof word));
		return home_advice(home, err);
	}
	return 0;
}

int kr_session_check_home(const char *home, kbox_error_t *err)
{
	if (kr_live_ws_refuses(home, err) < 0 || ws_state_in_state(home, err) < 0)
		return -1;
	return check_home_itself(home, err);
}

int kr_session_check_home_usable(const char *home, kbox_error_t *err)
{
	const char *can = "a directory that can be (KBOX_HOME=$(mktemp -d))";
	char near[PATH_MAX], fix[KBOX_ERROR_MSG_MAX];
	struct stat st;

	if (kr_session_check_home(home, err) < 0)
		return -1;
	snprintf(near, sizeof near, "%s", home);
	while (stat(near, &st) < 0) {
		char *slash = strrchr(near, '/');
		if (errno != ENOENT || !slash)
			return kbox_error_set_sys(err, "state directory %s", near);
		*(slash == near ? slash + 1 : slash) = '\0';
	}
	if (access(near, W_OK | X_OK) == 0 && strcmp(near, home) != 0) {
		/* access() passes root everywhere, and says nothing of a file
		 * system where nothing can be made (/proc, /sys): make a
		 * directory there, and take it back; one of a name of its own,
		 * not the next one down, which another kbox may be making (or
		 * have made, and be using) meanwhile */
		char next[PATH_MAX], probe[PATH_MAX];
		size_t n = strlen(near);
		const char *rest = home + n + (n > 1);
		int len = snprintf(next, sizeof next, "%s%s%.*s", near, n > 1 ? "/" : "",
		                   (int)strcspn(rest, "/"), rest);
		int plen = snprintf(probe, sizeof probe, "%s%s.kbox-probe.XXXXXX", near,
		                    n > 1 ? "/" : "");
		if (len < 0 || (size_t)len >= sizeof next || plen < 0 ||
		    (size_t)plen >= sizeof probe)
			return kbox_error_set(err, KBOX_E_INVALID, "path too long: %s", home);
		if (mkdtemp(probe)) {
			rmdir(probe);
			return 0;
		}
		int e = errno;
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "state directory %s cannot be made: cannot create directory "
		                      "%s: %s; %s",
		                      home, next, strerror(e),
		                      home_fix(fix, sizeof fix, can, true));
	}
	if (access(near, W_OK | X_OK) == 0)
		return 0;
	if (strcmp(near, home) == 0) {
		int e = errno;
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "state directory %s cannot be written: %s; %s", home,
		                      strerror(e), home_fix(fix, sizeof fix, can, true));
	}
	{
		int e = errno;
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "state directory %s cannot be made: %s cannot be written: %s; %s", home,
		        near, strerror(e), home_fix(fix, sizeof fix, can, true));
	}
}

/* The state directory this process made (kr_session_dir), until a
 * session is made in it: kr_session_home_forget takes it back. */
static char made_home[PATH_MAX];

void kr_session_home_forget(void)
{
	struct dirent *e;
	bool only_mark = true;
	int dfd, lfd;
	DIR *d;

	if (!made_home[0])
		return;
	/* (through the directory, reached through no link: kx_open_path) */
	if ((dfd = kx_open_path(AT_FDCWD, made_home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0)) < 0)
		return;
	if (unlinkat(dfd, "sessions", AT_REMOVEDIR) < 0 && errno != ENOENT) {
		close(dfd);
		return; /* a session is there (another kbox's, since) */
	}
	if ((lfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0)) < 0 || !(d = fdopendir(lfd))) {
		if (lfd >= 0)
			close(lfd);
		close(dfd);
		return;
	}
	while (only_mark && (e = readdir(d)))
		only_mark = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		            strcmp(e->d_name, KR_STATE_MARK) == 0;
	closedir(d);
	if (only_mark) {
		unlinkat(dfd, KR_STATE_MARK, 0);
		rmdir(made_home);
	}
	close(dfd);
	made_home[0] = '\0';
}

void kr_session_home_keep(void)
{
	made_home[0] = '\0';
}

/* Whether the state directory HOME holds KR_STATE_MARK (a file). */
static bool home_marked(const char *home)
{
	char mark[PATH_MAX];
	struct stat st;
	return (size_t)snprintf(mark, sizeof mark, "%s/%s", home, KR_STATE_MARK) < sizeof mark &&
	       lstat(mark, &st) == 0 && S_ISREG(st.st_mode);
}

/* The parts of the session directory DIR, made if they are not there:
 * run and outputs private, the workspace a directory (the kernel's, under
 * root the sandbox user's: kr_session_share; its mode the kernel's to
 * change: the session directory above keeps others out, and the next
 * kernel's start makes it 0700 again).  0, or -1 with ERR. */
static int make_parts(const char *dir, kbox_error_t *err)
{
	static const char *const subs[] = {"run", "workspace", "outputs"};
	char sub[PATH_MAX];
	struct stat st;
	int dfd = kx_open_path(AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0), rc = -1;
	if (dfd < 0)
		return kbox_error_set_sys(err, "cannot open %s", dir);
	for (size_t i = 0; i < 3; i++) {
		if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, subs[i]) >= sizeof sub) {
			kbox_error_set(err, KBOX_E_INVALID, "path too long: %s/%s", dir, subs[i]);
			goto out;
		}
		if (mkdirat(dfd, subs[i], 0700) < 0 && errno != EEXIST) {
			kbox_error_set_sys(err, "cannot create directory %s", sub);
			goto out;
		}
		if (i == 1) {
			if (fstatat(dfd, subs[i], &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    !S_ISDIR(st.st_mode)) {
				kbox_error_set(err, KBOX_E_INVALID, "%s is not a directory", sub);
				goto out;
			}
		} else if (kbox_check_private_dir(sub, err) < 0)
			goto out;
	}
	rc = 0;
out:
	close(dfd);
	return rc;
}

/* The session directory DIR is a symbolic link: refused, into ERR. */
static void link_refused(const char *dir, kbox_error_t *err)
{
	char word[KX_SHELL_WORD_MAX(PATH_MAX)];
	kbox_error_set(err, KBOX_E_INVALID,
	               "session directory %s is a symbolic link, not a directory kbox made: "
	               "something else put it there; remove the link (rm %s: what it leads to "
	               "stays)",
	               dir, kx_shell_word(dir, word, sizeof word));
}

char *kr_session_dir(const char *home, const char *name, bool create, kbox_error_t *err)
{
	char *dir = NULL;
	struct stat st;
	bool made = false;
	int marked;

	if (kr_session_check_name(name, err) < 0)
		return NULL;
	if (asprintf(&dir, "%s/sessions/%s", home, name) < 0) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	if (strlen(dir) > SESSION_DIR_MAX) {
		kbox_error_set(
		        err, KBOX_E_INVALID,
		        "session directory %.64s… is too long (%zu characters; at most %d): set "
		        "KBOX_HOME to a shorter path",
		        dir, strlen(dir), SESSION_DIR_MAX);
		goto fail;
	}
	/* (a link there: refused, made or not, as every command refuses it) */
	if (create && lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)) {
		link_refused(dir, err);
		goto fail;
	}
	/* a session that is there, in a state directory kbox marked (the
	 * usual case of kbox exec, which makes one when it is not): the state
	 * directory is checked as for any command, nothing above the session
	 * is made again, and its parts are */
	if (create && lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && home_marked(home)) {
		if (kr_session_check_home(home, err) < 0 || kbox_check_private_dir(dir, err) < 0 ||
		    make_parts(dir, err) < 0)
			goto fail;
		return dir;
	}
	if (!create) {
		if (kr_session_check_home(home, err) < 0)
			goto fail;
		if (lstat(dir, &st) < 0) {
			if (errno == ENOENT)
				kbox_error_set(err, KBOX_E_NOTFOUND, "no session \"%s\" (in %s)",
				               name, home);
			else
				kbox_error_set_sys(err, "session directory %s", dir);
			goto fail;
		}
		if (S_ISLNK(st.st_mode)) {
			link_refused(dir, err);
			goto fail;
		}
		if (kbox_check_private_dir(dir, err) < 0)
			goto fail;
		return dir;
	}
	/* the state dir must not be open to others: check it before making
	 * anything inside it */
	/* and it is in no live workspace: checked again once it is marked,
	 * the order that ws_live.h says closes the race with a sandbox's
	 * start */
	/* nor in another one's sessions: checked before anything is made,
	 * so that a refusal leaves nothing there (a directory made in that
	 * sessions directory would read as a session) */
	if (kr_live_ws_refuses(home, err) < 0 || ws_state_in_state(home, err) < 0)
		goto fail;
	if (stat(home, &st) < 0 && errno == ENOENT && strlen(home) < sizeof made_home)
		made = true; /* by this call, if the next one makes it */
	/* (one that cannot be made says where, and what to do instead) */
	if ((made && kr_session_check_home_usable(home, err) < 0) || home_a_dir(home, err) < 0 ||
	    mkdirs(home, err) < 0)
		goto fail;
	if (made)
		snprintf(made_home, sizeof made_home, "%s", home);
	if (!made && home_closed(home, err) < 0)
		goto fail;
	/* (where it is was checked above; a mark this call makes is followed
	 * by the second look at the live workspaces: one that was there
	 * already, a sandbox that looks through its workspace finds) */
	if (check_home_itself(home, err) < 0 || (marked = kr_state_mark(home, err)) < 0 ||
	    (marked && kr_live_ws_refuses(home, err) < 0) || mkdirs(dir, err) < 0 ||
	    kbox_check_private_dir(dir, err) < 0) {
		kr_session_home_forget();
		goto fail;
	}
	if (make_parts(dir, err) < 0)
		goto fail;
	return dir;
fail:
	free(dir);
	return NULL;
}

char **kr_supervisor_env(const char *state_home)
{
	static const char *const kept[] = {"HOME",
	                                   "USER",
	                                   "LOGNAME",
	                                   "KBOX_SANDBOX_USER",
	                                   "KBOX_SUBUID_FILE",
	                                   "JUPYTER_PATH",
	                                   "JUPYTER_DATA_DIR",
	                                   "XDG_DATA_HOME",
	                                   "LD_LIBRARY_PATH",
	                                   "ASAN_OPTIONS",
	                                   "LSAN_OPTIONS",
	                                   "UBSAN_OPTIONS",
	                                   NULL};
	kx_argv_t env = KX_ARGV_INIT;
	const char *v;

	kx_argv_add(&env, "PATH=" KX_SAFE_PATH, NULL);
	kx_argv_addf(&env, "KBOX_HOME=%s", state_home);
	for (size_t i = 0; kept[i]; i++)
		if ((v = getenv(kept[i])))
			kx_argv_addf(&env, "%s=%s", kept[i], v);
	return kx_argv_take(&env);
}

int kr_sandbox_identity(kr_sandbox_id_t *id, kbox_error_t *err)
{
	const char *name = getenv("KBOX_SANDBOX_USER");
	struct passwd pw, *found = NULL;
	char buf[4096];
	int e;

	memset(id, 0, sizeof *id);
	id->uid = geteuid();
	id->gid = getegid();
	if (geteuid() != 0)
		return 0;
	if (!name || !*name)
		name = KR_SANDBOX_USER;
	if (strlen(name) >= sizeof id->user)
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "KBOX_SANDBOX_USER: \"%.20s…\" is too long", name);
	e = getpwnam_r(name, &pw, buf, sizeof buf, &found);
	if (!found)
		return kbox_error_set(
		        err, KBOX_E_NOTFOUND,
		        "under root, kbox runs each sandbox as an unprivileged user, and there "
		        "is no user \"%s\"%s%s: create it with `kbox doctor --fix`, or name "
		        "another in KBOX_SANDBOX_USER",
		        name, e ? ": " : "", e ? strerror(e) : "");
	if (pw.pw_uid == 0 || pw.pw_gid == 0)
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "the sandbox user \"%s\" is uid %u, gid %u: it must be neither root "
		        "nor in root's group",
		        name, (unsigned)pw.pw_uid, (unsigned)pw.pw_gid);
	id->drop = true;
	id->uid = pw.pw_uid;
	id->gid = pw.pw_gid;
	snprintf(id->user, sizeof id->user, "%s", name);
	return 0;
}

/* Whether ID may search the directory ST describes (its owner's, its
 * group's or others' x bit: the sandbox user has no supplementary
 * groups). */
static bool id_can_search(const kr_sandbox_id_t *id, const struct stat *st)
{
	if (st->st_uid == id->uid)
		return st->st_mode & S_IXUSR;
	if (st->st_gid == id->gid)
		return st->st_mode & S_IXGRP;
	return st->st_mode & S_IXOTH;
}

/* Whether DIR is a home directory of the password database (root's
 * /root among them): one to keep closed, not to open for a sandbox. */
static bool is_home_dir(const char *dir)
{
	struct passwd *pw;
	bool yes = false;
	setpwent();
	while (!yes && (pw = getpwent()))
		yes = pw->pw_dir && strcmp(pw->pw_dir, dir) == 0 && strcmp(dir, "/") != 0;
	endpwent();
	return yes;
}

/* How to let the sandbox through the directory DIR it cannot search,
 * into BUF: opening it, or, for a home, another directory. */
static const char *reach_advice(const char *dir, char *buf, size_t size)
{
	if (is_home_dir(dir))
		snprintf(buf, size,
		         "%s is a home directory, best kept closed: use a directory outside it",
		         dir);
	else
		snprintf(buf, size,
		         "make it searchable by that group or others, e.g. chmod o+x %s, or use a "
		         "directory outside it",
		         dir);
	return buf;
}

int kr_session_check_home_reachable(const char *home, const kr_sandbox_id_t *id, kbox_error_t *err)
{
	kr_sandbox_id_t any = *id;
	char probe[PATH_MAX], *slash;
	struct stat st;
	any.uid = (uid_t)-1; /* (any session's uid: the group's and others' bits) */
	if (!id->drop || (size_t)snprintf(probe, sizeof probe, "%s", home) >= sizeof probe)
		return 0;
	if ((slash = strrchr(probe, '/')) && slash != probe)
		*slash = '\0';
	while (stat(probe, &st) < 0 && (slash = strrchr(probe, '/')) && slash != probe)
		*slash = '\0';
	return kr_sandbox_reachable(&any, probe, err);
}

int kr_sandbox_reachable(const kr_sandbox_id_t *id, const char *path, kbox_error_t *err)
{
	char advice[4200];
	char buf[4096];
	size_t n = strlen(path);
	if (!id->drop)
		return 0;
	if (n >= sizeof buf || path[0] != '/')
		return kbox_error_set(err, KBOX_E_INVALID, "%s: not an absolute path", path);
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char save = *p;
			struct stat st;
			*p = '\0';
			if (stat(buf, &st) < 0)
				return kbox_error_set_sys(err, "%s", buf);
			if (S_ISDIR(st.st_mode) && !id_can_search(id, &st) && id->uid == (uid_t)-1)
				return kbox_error_set(
				        err, KBOX_E_INVALID,
				        "the sandboxes (a uid of their own each, group %s's) cannot reach "
				        "%s: %s is mode %04o, owner %u:%u (%s)",
				        id->user, path, buf, (unsigned)(st.st_mode & 07777),
				        (unsigned)st.st_uid, (unsigned)st.st_gid,
				        reach_advice(buf, advice, sizeof advice));
			if (S_ISDIR(st.st_mode) && !id_can_search(id, &st))
				return kbox_error_set(
				        err, KBOX_E_INVALID,
				        "the sandbox (uid %u, group %s's) cannot reach %s: %s is mode "
				        "%04o, owner %u:%u (%s)",
				        (unsigned)id->uid, id->user, path, buf,
				        (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
				        (unsigned)st.st_gid,
				        reach_advice(buf, advice, sizeof advice));
			*p = save;
			if (!save)
				break;
		}
	}
	return 0;
}

/* Open NAME of the directory AT (no link at its last part; made first
 * with CREATE) and make it OWNER:GROUP with MODE; DIR is its path, for
 * messages.  It must be ours (root's) or already the sandbox user's.  0
 * or -1 with ERR. */
static int share_dir(int at, const char *name, const char *dir, const kr_sandbox_id_t *id,
                     uid_t owner, mode_t mode, bool create, kbox_error_t *err)
{
	struct stat st;
	int fd;
	if (create && mkdirat(at, name, 0700) < 0 && errno != EEXIST)
		return kbox_error_set_sys(err, "cannot create directory %s", dir);
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return kbox_error_set_sys(err, "directory %s", dir);
	if (fstat(fd, &st) < 0) {
		close(fd);
		return kbox_error_set_sys(err, "directory %s", dir);
	}
	if (st.st_uid != geteuid() && st.st_uid != id->uid) {
		close(fd);
		return kbox_error_set(
		        err, KBOX_E_INVALID,
		        "directory %s is owned by uid %u, neither root nor the sandbox user %s "
		        "(uid %u): was the session made with another KBOX_SANDBOX_USER?",
		        dir, (unsigned)st.st_uid, id->user, (unsigned)id->uid);
	}
	if ((st.st_uid != owner || st.st_gid != id->gid) && fchown(fd, owner, id->gid) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return kbox_error_set_sys(err, "cannot give %s to uid %u", dir, (unsigned)owner);
	}
	if ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return kbox_error_set_sys(err, "cannot chmod %s", dir);
	}
	close(fd);
	return 0;
}

int kr_session_share(int dir_fd, const char *dir, const kr_sandbox_id_t *id, kbox_error_t *err)
{
	char path[4096], home[4096], *slash;
	static const char *const given[] = {"workspace", "home"};
	/* the sandbox's own directories are made and changed from the
	 * session's directory held open, never by path: one swapped for a
	 * link would have another directory made, given away and chmod'ed */
	uid_t owner = id->drop ? id->uid : geteuid();

	if (id->drop) {
		/* DIR is HOME/sessions/NAME (kbox start's) or a directory of its
		 * own (kbox run's): HOME and HOME/sessions are passed too (by
		 * path: under root no sandbox can change them or what is above) */
		snprintf(home, sizeof home, "%s", dir);
		if ((slash = strrchr(home, '/')) && slash != home) {
			*slash = '\0';
			if ((slash = strrchr(home, '/')) && slash != home &&
			    strcmp(slash, "/sessions") == 0) {
				snprintf(path, sizeof path, "%s", home);
				*slash = '\0';
				if (share_dir(AT_FDCWD, home, home, id, geteuid(), 0710, false,
				              err) < 0 ||
				    share_dir(AT_FDCWD, path, path, id, geteuid(), 0710, false,
				              err) < 0)
					return -1;
			}
		}
		if (share_dir(dir_fd, ".", dir, id, geteuid(), 0710, false, err) < 0)
			return -1;
	}
	/* (without DROP, ours: only the sandbox's own directories, back to
	 * 0700 whatever a kernel made of their modes) */
	for (size_t i = 0; i < sizeof given / sizeof *given; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, given[i]);
		if (share_dir(dir_fd, given[i], path, id, owner, 0700, true, err) < 0)
			return -1;
	}
	if (!id->drop)
		return 0;
	snprintf(path, sizeof path, "%s/home", dir);
	return kr_sandbox_reachable(id, path, err);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **kr_session_list(const char *home, size_t *n_p, kbox_error_t *err)
{
	char *path = NULL, **v = NULL;
	size_t n = 0, cap = 0;
	DIR *d;
	struct dirent *e;

	*n_p = 0;
	if (kr_session_check_home(home, err) < 0)
		return NULL;
	if (asprintf(&path, "%s/sessions", home) < 0) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	if (!(d = kx_opendir(path))) {
		if (errno == ENOENT) {
			free(path);
			return calloc(1, sizeof *v);
		}
		kbox_error_set_sys(err, "cannot list %s", path);
		free(path);
		return NULL;
	}
	while ((e = readdir(d))) {
		if (kr_session_check_name(e->d_name, NULL) < 0)
			continue;
		if (n + 1 >= cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
			if (!nv)
				goto nomem;
			v = nv;
		}
		if (!(v[n] = strdup(e->d_name)))
			goto nomem;
		n++;
	}
	closedir(d);
	free(path);
	if (!v && !(v = calloc(1, sizeof *v)))
		goto nomem2;
	qsort(v, n, sizeof *v, cmp_str);
	v[n] = NULL;
	*n_p = n;
	return v;
nomem:
	closedir(d);
	free(path);
nomem2:
	kr_session_list_free(v, n);
	kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
	return NULL;
}

void kr_session_list_free(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

bool kr_session_is_dir(const char *home, const char *name)
{
	char path[4096];
	struct stat st;
	int n = snprintf(path, sizeof path, "%s/sessions/%s", home, name);
	return n > 0 && (size_t)n < sizeof path && lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int kr_session_log(const char *dir, const char *event, json_t *fields, kbox_error_t *err)
{
	/* (the directory once, through no link below the state directory:
	 * the log and its rotation are in that one) */
	int dfd = kx_open_path(AT_FDCWD, dir, O_PATH | O_DIRECTORY, 0), rc;
	if (dfd < 0) {
		rc = kbox_error_set_sys(err, "cannot open %s/events.ndjson", dir);
		json_decref(fields);
		return rc;
	}
	rc = kr_session_log_at(dfd, dir, event, fields, err);
	close(dfd);
	return rc;
}

int kr_session_log_at(int dfd, const char *dir, const char *event, json_t *fields,
                      kbox_error_t *err)
{
	static const char log[] = "events.ndjson", log_old[] = "events.ndjson.1";
	char stamp[32];
	struct stat st;
	char *line = NULL;
	int fd = -1, rc = -1;
	size_t len;

	if (!fields)
		fields = json_object();
	kx_iso8601(kx_wall_s(), 3, stamp);
	if (!fields || json_object_set_new(fields, "time", json_string(stamp)) < 0 ||
	    json_object_set_new(fields, "event", json_string(event)) < 0 ||
	    !(line = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(9)))) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		goto out;
	}
	len = strlen(line);
	line[len] = '\n'; /* json_dumps left room: replace the NUL */
	fd = kx_open_file_st(dfd, log, O_WRONLY | O_CREAT | O_APPEND, 0600, &st);
	/* over its bound, the log becomes events.ndjson.1 (replacing the one
	 * before) and a new one is begun */
	if (fd >= 0 && st.st_size > 0 && st.st_size + (off_t)len + 1 > KR_EVENTS_LOG_MAX) {
		close(fd);
		fd = renameat(dfd, log, dfd, log_old) < 0
		             ? -1
		             : kx_open_file(dfd, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	}
	if (fd < 0) {
		kbox_error_set_sys(err, "cannot open %s/%s", dir, log);
		goto out;
	}
	if (write(fd, line, len + 1) != (ssize_t)(len + 1))
		kbox_error_set_sys(err, "cannot append to %s/%s", dir, log);
	else
		rc = 0;
	close(fd);
out:
	free(line);
	json_decref(fields);
	return rc;
}

/* Remove the session directory DIR and what it holds, reached without
 * following a link at DIR nor at the directory it is in (its sessions
 * directory: O_NOFOLLOW, then openat), and, unless it was just made
 * (MADE), only when it holds a file kbox makes in every session
 * (session.json, supervisor.pid, events.ndjson): never a directory of the
 * user's that something put in its place.  0, or -1 with ERR. */
static int remove_session_dir(const char *dir, bool made, kbox_error_t *err)
{
	static const char *const own[] = {"session.json", "supervisor.pid", "events.ndjson"};
	char parent[PATH_MAX], *slash;
	const char *name;
	int pfd = -1, fd = -1, rc = -1, lock = -1, start = -1;
	bool kbox_made = made;
	struct stat st;

	if ((size_t)snprintf(parent, sizeof parent, "%s", dir) >= sizeof parent ||
	    !(slash = strrchr(parent, '/')) || !slash[1])
		return kbox_error_set(err, KBOX_E_INVALID, "%s: not a session directory", dir);
	*slash = '\0';
	name = dir + (slash - parent) + 1;
	if ((pfd = kx_open_path(AT_FDCWD, parent[0] ? parent : "/",
	                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0)) < 0 ||
	    (fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		if (errno == ENOENT)
			rc = 0; /* gone already */
		else
			kbox_error_set_sys(err, "cannot remove %s", dir);
		goto out;
	}
	/* the lock of a start (unless MADE: the start that made it removes
	 * it), then the supervisor's own, taken in the very directory that
	 * goes (FD), not by DIR's name again, and held while it goes: none
	 * starts meanwhile (it would find them taken, and then its lock file
	 * gone).  By name, a state directory swapped with a link as the
	 * name was looked up made supervisor.pid fail to open (kx_open_path
	 * follows no link below it), and a running session went once it
	 * was back (identity.sh, row 44, under load) */
	if (!made && (start = kx_open_file(fd, "start.lock", O_RDONLY, 0)) >= 0 &&
	    flock(start, LOCK_EX | LOCK_NB) < 0) {
		kbox_error_set(err, KBOX_E_INVALID,
		               "it is being started (a kbox start holds %s/start.lock): remove it "
		               "once that start has ended",
		               dir);
		goto out;
	}
	if ((lock = kx_open_file(fd, "supervisor.pid", O_RDONLY, 0)) >= 0 &&
	    flock(lock, LOCK_EX | LOCK_NB) < 0) {
		errno = EBUSY;
		kbox_error_set_sys(err, "session %s: its supervisor runs", dir);
		goto out;
	}
	kr_session_uid_release(dir);
	/* (by name, whatever the file is: a session whose session.json was
	 * made a FIFO, which ls shows as invalid, is still one to remove) */
	for (size_t i = 0; i < sizeof own / sizeof *own && !kbox_made; i++)
		kbox_made = fstatat(fd, own[i], &st, AT_SYMLINK_NOFOLLOW) == 0;
	/* (or one whose session.json kbox sealed there, since removed: a
	 * session kbox refuses to start until it is removed) */
	if (!kbox_made)
		kbox_made = kr_live_seal_known(dir);
	/* (an empty one has nothing to lose: newcomer 11, F7, it was a dead
	 * end that start took for a new session) */
	if (!kbox_made && unlinkat(pfd, name, AT_REMOVEDIR) == 0)
		rc = 0;
	else if (!kbox_made) {
		char word[KX_SHELL_WORD_MAX(PATH_MAX)];
		kbox_error_set(err, KBOX_E_INVALID,
		               "%s holds none of the files kbox makes in a session (session.json, "
		               "supervisor.pid, events.ndjson): not removed; if it is yours to "
		               "remove, rm -r %s",
		               dir, kx_shell_word(dir, word, sizeof word));
	} else if (kx_empty_dirfd(fd) < 0 || unlinkat(pfd, name, AT_REMOVEDIR) < 0)
		kbox_error_set_sys(err, "cannot remove %s", dir);
	else
		rc = 0;
out:
	if (lock >= 0)
		close(lock);
	if (start >= 0)
		close(start);
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);
	return rc;
}

int kr_session_remove(const char *dir, kbox_error_t *err)
{
	return kr_session_remove_ex(dir, false, err);
}

int kr_session_remove_ex(const char *dir, bool starting, kbox_error_t *err)
{
	if (remove_session_dir(dir, starting, err) < 0)
		return -1;
	kr_live_session_forget(dir); /* its seal's record, what it kept */
	kr_session_home_forget();    /* a state directory made for it */
	return 0;
}

bool kr_session_starting(const char *dir)
{
	char path[4096];
	int fd;
	bool held;

	snprintf(path, sizeof path, "%s/start.lock", dir);
	if ((fd = kx_open_file(AT_FDCWD, path, O_RDONLY, 0)) < 0)
		return false;
	held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

kr_supervisor_state_t kr_session_supervisor(const char *dir, pid_t *pid_p)
{
	char path[4096], buf[32];
	int fd;
	ssize_t n;
	kr_supervisor_state_t st;

	if (pid_p)
		*pid_p = 0;
	snprintf(path, sizeof path, "%s/supervisor.pid", dir);
	fd = kx_open_file(AT_FDCWD, path, O_RDONLY, 0);
	if (fd < 0)
		return KR_SUPERVISOR_NONE;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
		st = KR_SUPERVISOR_RUNNING;
	else
		st = KR_SUPERVISOR_DEAD;
	n = read(fd, buf, sizeof buf - 1);
	if (n > 0 && pid_p) {
		/* (a pid as the supervisor writes it, or none: never a number
		 * that overflows into another, -1 say, from what else wrote it) */
		char *end;
		long v;
		buf[n] = '\0';
		errno = 0;
		v = strtol(buf, &end, 10);
		if (errno == 0 && end != buf && (*end == '\0' || *end == '\n') && v > 0 &&
		    v <= INT_MAX && buf[0] >= '0' && buf[0] <= '9')
			*pid_p = (pid_t)v;
	}
	close(fd);
	return st;
}
