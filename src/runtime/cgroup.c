/* src/cgroup.c — limits for a sandbox through cgroups v1 or v2. */
#include "runtime/runtime.h"
#include "runtime/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_CTL 3
#define CPU_PERIOD_US 100000

static const char *const ctl_names[N_CTL] = {"memory", "pids", "cpu"};

typedef struct {
	char dir[PATH_MAX]; /* the cgroup's directory in this hierarchy */
	char procs[PATH_MAX + 16];
	unsigned mask; /* controllers of ours it carries */
	bool v2;
	int oom_fd; /* its memory.oom_control or memory.events, once read; or -1 */
} hier_t;

struct kr_cgroup {
	hier_t h[N_CTL];
	int n;
	unsigned enforced;
	long long memory_limit;
};

/* The record of the cgroups this process makes (kr_cgroup_record), ""
 * when there is none, and the most of one that is read. */
static char ledger[PATH_MAX];
#define LEDGER_MAX (1 << 20)

/* The text of the record at PATH, malloc'd ("" when there is none), or
 * NULL with errno. */
static char *ledger_read(const char *path)
{
	int fd = kx_open_file(AT_FDCWD, path, O_RDONLY, 0), e;
	struct stat st;
	size_t len = 0, cap;
	char *text = NULL;
	if (fd < 0)
		return errno == ENOENT ? strdup("") : NULL;
	if (fstat(fd, &st) < 0)
		goto fail;
	cap = st.st_size > LEDGER_MAX ? LEDGER_MAX : (size_t)st.st_size;
	if (!(text = malloc(cap + 1)))
		goto fail;
	while (len < cap) {
		ssize_t n = read(fd, text + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	text[len] = '\0';
	close(fd);
	return text;
fail:
	e = errno;
	free(text);
	close(fd);
	errno = e;
	return NULL;
}

/* The next line of *P (a NUL-terminated text): its start and length;
 * false at the end. */
static bool next_line(const char **p, const char **line, size_t *len)
{
	const char *nl;
	if (!**p)
		return false;
	*line = *p;
	nl = strchr(*p, '\n');
	*len = nl ? (size_t)(nl - *p) : strlen(*p);
	*p += *len + (nl ? 1 : 0);
	return true;
}

static bool line_is(const char *line, size_t len, const char *s)
{
	return s && strlen(s) == len && memcmp(line, s, len) == 0;
}

/* Replace the record at PATH by the lines of TEXT other than DROP, then
 * ADD (DROP and ADD may be NULL); no lines: no file.  Written at once
 * (kx_write_atomic), not durably: the record outlives a supervisor that
 * was killed, and a machine that crashed has no cgroups left to reap.
 * 0 or -1 with errno. */
static int ledger_write(const char *path, const char *text, const char *drop, const char *add)
{
	kx_buf_t b = KX_BUF_INIT;
	const char *p = text, *line;
	size_t len;
	char *all;
	int rc;
	while (next_line(&p, &line, &len))
		if (len > 0 && !line_is(line, len, drop) && !line_is(line, len, add)) {
			kx_buf_append(&b, line, len);
			kx_buf_appends(&b, "\n");
		}
	if (add) {
		kx_buf_appends(&b, add);
		kx_buf_appends(&b, "\n");
	}
	if (!(all = kx_buf_take(&b, &len))) {
		errno = ENOMEM;
		return -1;
	}
	if (len == 0)
		rc = unlink(path) < 0 && errno != ENOENT ? -1 : 0;
	else
		rc = kx_write_atomic(AT_FDCWD, path, all, len, 0600, 0);
	free(all);
	return rc;
}

/* Take DROP out of this process's record and put ADD in (either may be
 * NULL).  0 (also when there is no record) or -1 with errno. */
static int ledger_change(const char *drop, const char *add)
{
	char *text;
	int rc;
	if (!ledger[0])
		return 0;
	if (!(text = ledger_read(ledger)))
		return -1;
	rc = ledger_write(ledger, text, drop, add);
	free(text);
	return rc;
}

void kr_cgroup_record(const char *path)
{
	snprintf(ledger, sizeof ledger, "%s", path ? path : "");
}

const char *kr_cgroup_name(unsigned bit)
{
	for (int i = 0; i < N_CTL; i++)
		if (bit == 1u << i)
			return ctl_names[i];
	return "?";
}

/* Is WORD one of the comma-separated tokens of LIST? */
static bool has_token(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == wl && strncmp(p, word, wl) == 0)
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

/* The mount of controller CTL's hierarchy (v1: a "cgroup" mount with CTL
 * in its options; CTL NULL: the "cgroup2" mount): mount point and root. */
static bool find_mount(const char *ctl, char *point, char *root, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	bool found = false;
	if (!f)
		return false;
	while (!found && fgets(line, sizeof line, f)) {
		char r[PATH_MAX], mp[PATH_MAX], type[64], src[PATH_MAX], opts[1024];
		char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", r, mp) != 2 ||
		    sscanf(dash + 3, "%63s %4095s %1023s", type, src, opts) != 3)
			continue;
		if (ctl ? strcmp(type, "cgroup") == 0 && has_token(opts, ctl)
		        : strcmp(type, "cgroup2") == 0) {
			snprintf(point, size, "%s", mp);
			snprintf(root, size, "%s", r);
			found = true;
		}
	}
	fclose(f);
	return found;
}

int kr_cgroup_version(unsigned bit)
{
	char point[PATH_MAX], root[PATH_MAX];
	const char *ctl = kr_cgroup_name(bit);
	if (find_mount(ctl, point, root, sizeof point))
		return 1;
	return find_mount(NULL, point, root, sizeof point) ? 2 : 0;
}

/* Our own cgroup path in the hierarchy of CTL (v1), or in the unified one
 * (CTL NULL). */
static bool own_path(const char *ctl, char *path, size_t size)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[PATH_MAX + 256];
	bool found = false;
	if (!f)
		return false;
	while (!found && fgets(line, sizeof line, f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		size_t n;
		if (!c2)
			continue;
		*c2 = '\0';
		n = strlen(c2 + 1);
		while (n > 0 && c2[1 + n - 1] == '\n')
			c2[1 + --n] = '\0';
		if (ctl ? has_token(c1 + 1, ctl) : (strcmp(line, "0") == 0 && c1[1] == '\0')) {
			snprintf(path, size, "%s", c2 + 1);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static bool parent_dir_now(int i, char *dir, size_t size, bool *v2, char *why, size_t wsize);

/* The directory of our own cgroup for controller I, and whether it is v2.
 * False with WHY when the controller is not there.  Found once and kept:
 * a supervisor that moved itself into a cgroup of its own still makes
 * its sandboxes' beside it, not under it. */
static bool parent_dir(int i, char *dir, size_t size, bool *v2, char *why, size_t wsize)
{
	static char found[N_CTL][PATH_MAX];
	static bool found_v2[N_CTL];
	if (!found[i][0]) {
		if (!parent_dir_now(i, found[i], sizeof found[i], &found_v2[i], why, wsize)) {
			found[i][0] = '\0';
			return false;
		}
	}
	snprintf(dir, size, "%s", found[i]);
	*v2 = found_v2[i];
	return true;
}

static bool parent_dir_now(int i, char *dir, size_t size, bool *v2, char *why, size_t wsize)
{
	char point[PATH_MAX], root[PATH_MAX], path[PATH_MAX], file[PATH_MAX + 32];
	const char *rel;
	*v2 = false;
	if (!find_mount(ctl_names[i], point, root, sizeof point) ||
	    !own_path(ctl_names[i], path, sizeof path)) {
		FILE *f;
		char ctls[512] = "";
		if (!find_mount(NULL, point, root, sizeof point) ||
		    !own_path(NULL, path, sizeof path)) {
			snprintf(why, wsize, "no %s controller is mounted", ctl_names[i]);
			return false;
		}
		*v2 = true;
		rel = strncmp(path, root, strlen(root)) == 0 && strcmp(root, "/") != 0
		              ? path + strlen(root)
		              : path;
		if ((size_t)snprintf(dir, size, "%s%s", point, strcmp(rel, "/") == 0 ? "" : rel) >=
		    size) {
			kx_msgf(why, wsize, "the path of our cgroup under %s is too long", point);
			return false;
		}
		snprintf(file, sizeof file, "%s/cgroup.controllers", dir);
		kx_first_line(f = fopen(file, "re"), ctls, sizeof ctls);
		if (f)
			fclose(f);
		for (char *p = ctls; *p; p++)
			if (*p == ' ')
				*p = ',';
		if (!has_token(ctls, ctl_names[i])) {
			snprintf(why, wsize, "the %s controller is not delegated to %s",
			         ctl_names[i], dir);
			return false;
		}
		return true;
	}
	rel = strncmp(path, root, strlen(root)) == 0 && strcmp(root, "/") != 0 ? path + strlen(root)
	                                                                       : path;
	if ((size_t)snprintf(dir, size, "%s%s", point, strcmp(rel, "/") == 0 ? "" : rel) >= size) {
		kx_msgf(why, wsize, "the path of our %s cgroup under %s is too long", ctl_names[i],
		        point);
		return false;
	}
	return true;
}

static int write_file(const char *dir, const char *name, const char *value)
{
	char path[PATH_MAX + 64];
	int fd, rc = 0;
	size_t len = strlen(value);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	if (write(fd, value, len) != (ssize_t)len)
		rc = -1;
	if (close(fd) < 0)
		rc = -1;
	return rc;
}

static long long read_number(const char *dir, const char *name)
{
	char path[PATH_MAX + 64], buf[64];
	long long v = -1;
	FILE *f;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!(f = fopen(path, "re")))
		return -1;
	if (fgets(buf, sizeof buf, f) && sscanf(buf, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* The value of the "KEY N" line of the file open at FD (memory.events,
 * memory.oom_control, pids.events), read whole from its start: a cgroup
 * file is made afresh at offset 0, so one descriptor serves every read. */
static long long pread_key(int fd, const char *key)
{
	char buf[4096];
	size_t kl = strlen(key);
	ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
	char *line = buf;
	if (got <= 0)
		return -1;
	buf[got] = '\0';
	while (line) {
		char *nl = strchr(line, '\n');
		long long v;
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ' &&
		    sscanf(line + kl, "%lld", &v) == 1)
			return v;
		line = nl ? nl + 1 : NULL;
	}
	return -1;
}

/* The same of the file NAME in DIR. */
static long long read_key(const char *dir, const char *name, const char *key)
{
	char path[PATH_MAX + 64];
	long long v;
	int fd;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	v = pread_key(fd, key);
	close(fd);
	return v;
}

unsigned kr_cgroup_available(char *why, size_t size)
{
	unsigned mask = 0;
	size_t n = 0;
	if (size)
		why[0] = '\0';
	for (int i = 0; i < N_CTL; i++) {
		char dir[PATH_MAX], w[PATH_MAX + 64] = "";
		bool v2;
		if (!parent_dir(i, dir, sizeof dir, &v2, w, sizeof w))
			;
		else if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) < 0)
			snprintf(w, sizeof w, "%s is not writable (%s)", dir, strerror(errno));
		else {
			mask |= 1u << i;
			continue;
		}
		if (n < size)
			n += (size_t)snprintf(why + n, size - n, "%s%s: %s", n ? "; " : "",
			                      ctl_names[i], w);
	}
	return mask;
}

unsigned kr_cgroup_enforced(const kr_cgroup_t *self)
{
	return self ? self->enforced : 0;
}

static hier_t *hier_of(const kr_cgroup_t *self, unsigned bit)
{
	for (int i = 0; self && i < self->n; i++)
		if (self->h[i].mask & bit)
			return (hier_t *)&self->h[i];
	return NULL;
}

/* Set controller I's limit in H.  0 or -1 with errno. */
static int set_limit(hier_t *h, int i, long long memory_bytes, double cpus, long pids)
{
	char v[64];
	if (i == 0 && memory_bytes > 0) {
		snprintf(v, sizeof v, "%lld", memory_bytes);
		if (h->v2) {
			if (write_file(h->dir, "memory.max", v) < 0)
				return -1;
			write_file(h->dir, "memory.swap.max", "0"); /* absent without swap */
		} else {
			if (write_file(h->dir, "memory.limit_in_bytes", v) < 0)
				return -1;
			write_file(h->dir, "memory.memsw.limit_in_bytes",
			           v); /* absent without swap accounting */
		}
	} else if (i == 1 && pids > 0) {
		snprintf(v, sizeof v, "%ld", pids);
		if (write_file(h->dir, "pids.max", v) < 0)
			return -1;
	} else if (i == 2 && cpus > 0) {
		long long quota = (long long)(cpus * CPU_PERIOD_US + 0.5);
		if (quota < 1000)
			quota = 1000;
		if (h->v2) {
			snprintf(v, sizeof v, "%lld %d", quota, CPU_PERIOD_US);
			if (write_file(h->dir, "cpu.max", v) < 0)
				return -1;
		} else {
			snprintf(v, sizeof v, "%d", CPU_PERIOD_US);
			if (write_file(h->dir, "cpu.cfs_period_us", v) < 0)
				return -1;
			snprintf(v, sizeof v, "%lld", quota);
			if (write_file(h->dir, "cpu.cfs_quota_us", v) < 0)
				return -1;
		}
	}
	return 0;
}

kr_cgroup_t *kr_cgroup_new(const char *name, unsigned want, long long memory_bytes, double cpus,
                           long pids, char *why, size_t size)
{
	kr_cgroup_t *self = calloc(1, sizeof *self);
	size_t n = 0;
	if (size)
		why[0] = '\0';
	if (!self) {
		snprintf(why, size, "out of memory");
		return NULL;
	}
	self->memory_limit = memory_bytes > 0 ? memory_bytes : 0;
	for (int i = 0; i < N_CTL; i++) {
		char parent[PATH_MAX], dir[sizeof self->h[0].dir], w[PATH_MAX + 128] = "";
		bool v2;
		hier_t *h = NULL;
		if (!(want & (1u << i)))
			continue;
		if (!parent_dir(i, parent, sizeof parent, &v2, w, sizeof w))
			goto fail_ctl;
		if ((size_t)snprintf(dir, sizeof dir, "%s/%s", parent, name) >= sizeof dir) {
			snprintf(w, sizeof w, "the cgroup path under %s is too long", parent);
			goto fail_ctl;
		}
		for (int j = 0; j < self->n; j++)
			if (strcmp(self->h[j].dir, dir) == 0)
				h = &self->h[j];
		if (!h) {
			if (v2) {
				char plus[32];
				snprintf(plus, sizeof plus, "+%s", ctl_names[i]);
				/* may fail while the parent has processes of its own */
				write_file(parent, "cgroup.subtree_control", plus);
			}
			/* recorded first: a process killed right after the mkdir
			 * leaves nothing unknown */
			if (ledger_change(NULL, dir) < 0) {
				kx_msgf(w, sizeof w, "cannot record %s in %s: %s", dir, ledger,
				        strerror(errno));
				goto fail_ctl;
			}
			if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
				kx_msgf(w, sizeof w, "cannot create %s: %s", dir, strerror(errno));
				ledger_change(dir, NULL);
				goto fail_ctl;
			}
			h = &self->h[self->n++];
			snprintf(h->dir, sizeof h->dir, "%s", dir);
			snprintf(h->procs, sizeof h->procs, "%s/cgroup.procs", dir);
			h->v2 = v2;
			h->oom_fd = -1;
		}
		if (set_limit(h, i, memory_bytes, cpus, pids) < 0) {
			snprintf(w, sizeof w, "cannot set the limit in %s: %s", h->dir,
			         strerror(errno));
			goto fail_ctl;
		}
		h->mask |= 1u << i;
		self->enforced |= 1u << i;
		continue;
fail_ctl:
		if (n < size)
			n += (size_t)snprintf(why + n, size - n, "%s%s: %s", n ? "; " : "",
			                      ctl_names[i], w);
	}
	/* hierarchies where every controller failed carry nothing: drop them */
	for (int j = 0; j < self->n;) {
		if (!self->h[j].mask) {
			if (rmdir(self->h[j].dir) == 0)
				ledger_change(self->h[j].dir, NULL);
			self->h[j] = self->h[--self->n];
		} else
			j++;
	}
	if (!self->n) {
		free(self);
		return NULL;
	}
	return self;
}

int kr_cgroup_enter(const kr_cgroup_t *self)
{
	int rc = 0;
	for (int j = 0; self && j < self->n; j++) {
		int fd = open(self->h[j].procs, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "0", 1) != 1)
			rc = -1;
		if (fd >= 0)
			close(fd);
	}
	return rc;
}

int kr_cgroup_add(const kr_cgroup_t *self, pid_t pid)
{
	char v[32];
	int rc = 0;
	snprintf(v, sizeof v, "%ld", (long)pid);
	for (int j = 0; self && j < self->n; j++) {
		int fd = open(self->h[j].procs, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, v, strlen(v)) != (ssize_t)strlen(v))
			rc = -1;
		if (fd >= 0)
			close(fd);
	}
	return rc;
}

int kr_cgroup_leave(const kr_cgroup_t *self)
{
	int rc = 0;
	for (int j = 0; self && j < self->n; j++) {
		char procs[PATH_MAX + 16];
		const char *slash = strrchr(self->h[j].dir, '/');
		int fd;
		if (!slash ||
		    snprintf(procs, sizeof procs, "%.*s/cgroup.procs",
		             (int)(slash - self->h[j].dir), self->h[j].dir) >= (int)sizeof procs) {
			rc = -1;
			continue;
		}
		fd = open(procs, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "0", 1) != 1)
			rc = -1;
		if (fd >= 0)
			close(fd);
	}
	return rc;
}

const char *kr_cgroup_where(const kr_cgroup_t *self, unsigned bit, char *buf, size_t size)
{
	hier_t *h = hier_of(self, bit);
	if (size)
		buf[0] = '\0';
	if (h)
		snprintf(buf, size, "cgroup %s %s", h->v2 ? "v2" : "v1", h->dir);
	return buf;
}

long long kr_cgroup_memory(const kr_cgroup_t *self)
{
	hier_t *h = hier_of(self, KR_CG_MEMORY);
	if (!h)
		return -1;
	return read_number(h->dir, h->v2 ? "memory.current" : "memory.usage_in_bytes");
}

long long kr_cgroup_memory_limit(const kr_cgroup_t *self)
{
	return hier_of(self, KR_CG_MEMORY) ? self->memory_limit : 0;
}

long kr_cgroup_oom_kills(const kr_cgroup_t *self)
{
	hier_t *h = hier_of(self, KR_CG_MEMORY);
	if (!h)
		return -1;
	/* asked before and after every execution: the file stays open */
	if (h->oom_fd < 0) {
		char path[sizeof h->dir + 32];
		snprintf(path, sizeof path, "%s/%s", h->dir,
		         h->v2 ? "memory.events" : "memory.oom_control");
		if ((h->oom_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return -1;
	}
	return (long)pread_key(h->oom_fd, "oom_kill");
}

long kr_cgroup_oom_kills_named(const char *name)
{
	char parent[PATH_MAX], dir[PATH_MAX + 256], why[256];
	bool v2;
	if (!parent_dir(0, parent, sizeof parent, &v2, why, sizeof why) ||
	    snprintf(dir, sizeof dir, "%s/%s", parent, name) >= (int)sizeof dir)
		return -1;
	return (long)read_key(dir, v2 ? "memory.events" : "memory.oom_control", "oom_kill");
}

long kr_cgroup_oom_kills_in(const char *dir, bool v2)
{
	return (long)read_key(dir, v2 ? "memory.events" : "memory.oom_control", "oom_kill");
}

long kr_cgroup_pids_refused(const kr_cgroup_t *self)
{
	hier_t *h = hier_of(self, KR_CG_PIDS);
	return h ? (long)read_key(h->dir, "pids.events", "max") : -1;
}

long kr_cgroup_pids_current(const kr_cgroup_t *self)
{
	hier_t *h = hier_of(self, KR_CG_PIDS);
	return h ? (long)read_number(h->dir, "pids.current") : -1;
}

/* SIGKILL every process listed in H's cgroup.procs; how many there were. */
static int kill_all(const hier_t *h)
{
	FILE *f = fopen(h->procs, "re");
	long pid;
	int n = 0;
	if (!f)
		return 0;
	while (fscanf(f, "%ld", &pid) == 1) {
		if (pid > 0 && pid != (long)getpid())
			kill((pid_t)pid, SIGKILL);
		n++;
	}
	fclose(f);
	return n;
}

/* Remove H's directory, killing what is in it (a cgroup with processes
 * cannot go; those killed leave once their parent has reaped them).  True
 * once it is gone. */
static bool remove_cgroup(const hier_t *h)
{
	for (int tries = 0; rmdir(h->dir) < 0; tries++) {
		if (errno == ENOENT)
			return true;
		if (errno != EBUSY || tries == 100)
			return false;
		kill_all(h);
		usleep(10000);
	}
	return true;
}

void kr_cgroup_destroy(kr_cgroup_t **self_p)
{
	kr_cgroup_t *self;
	if (!self_p || !(self = *self_p))
		return;
	for (int j = 0; j < self->n; j++) {
		if (self->h[j].oom_fd >= 0)
			close(self->h[j].oom_fd);
		if (remove_cgroup(&self->h[j]))
			ledger_change(self->h[j].dir, NULL);
	}
	free(self);
	*self_p = NULL;
}

/* Is LINE (LEN bytes of a record) a cgroup this module makes: "kbox-…"
 * directly in the caller's own cgroup of a hierarchy?  Then true, and H
 * is filled. */
static bool recorded_cgroup(const char *line, size_t len, hier_t *h)
{
	const char *slash;
	if (len == 0 || len >= sizeof h->dir)
		return false;
	memcpy(h->dir, line, len);
	h->dir[len] = '\0';
	if (!(slash = strrchr(h->dir, '/')) || strncmp(slash + 1, "kbox-", 5) != 0)
		return false;
	for (int i = 0; i < N_CTL; i++) {
		char parent[PATH_MAX], why[256];
		size_t pl = (size_t)(slash - h->dir);
		bool v2;
		if (parent_dir(i, parent, sizeof parent, &v2, why, sizeof why) &&
		    strlen(parent) == pl && memcmp(parent, h->dir, pl) == 0) {
			snprintf(h->procs, sizeof h->procs, "%s/cgroup.procs", h->dir);
			h->v2 = v2;
			return true;
		}
	}
	return false;
}

int kr_cgroup_reap(const char *path)
{
	char *text = ledger_read(path), *left;
	const char *p = text, *line;
	size_t len, n = 0;
	int removed = 0;
	if (!text)
		return 0;
	if (!(left = malloc(strlen(text) + 1))) {
		free(text);
		return 0;
	}
	while (next_line(&p, &line, &len)) {
		hier_t h = {0};
		if (!recorded_cgroup(line, len, &h))
			continue;
		if (remove_cgroup(&h)) {
			removed++;
			continue;
		}
		/* kept for the next time */
		memcpy(left + n, line, len);
		n += len;
		left[n++] = '\n';
	}
	left[n] = '\0';
	ledger_write(path, left, NULL, NULL);
	free(left);
	free(text);
	return removed;
}
