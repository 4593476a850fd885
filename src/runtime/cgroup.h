/* src/runtime/cgroup.h — limits for a sandbox through cgroups (private).
 *
 * A sandbox's cgroup is created under the caller's own cgroup, one
 * directory per controller hierarchy: cgroup v2 where a controller is on
 * the unified hierarchy, v1 otherwise (memory, pids, cpu).  Only libc:
 * the supervisor links this. */
#ifndef KR_CGROUP_H
#define KR_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum {
	KR_CG_MEMORY = 1u << 0,
	KR_CG_PIDS = 1u << 1,
	KR_CG_CPU = 1u << 2,
};

typedef struct kr_cgroup kr_cgroup_t;

/* The controllers under which the caller can create a cgroup and set
 * limits (a mask of KR_CG_*).  For each one that cannot, a phrase why
 * goes to WHY ("memory: /sys/fs/cgroup/memory/x is not writable (EACCES);
 * pids: no pids controller is mounted"), "" when all can. */
unsigned kr_cgroup_available(char *why, size_t size);

/* The name of controller BIT ("memory", "pids", "cpu"). */
const char *kr_cgroup_name(unsigned bit);

/* The cgroup version of controller BIT's hierarchy here: 1, 2 (no v1
 * hierarchy has it, and cgroup v2 is mounted), or 0 (neither). */
int kr_cgroup_version(unsigned bit);

/* Make cgroup NAME (one path component) under the caller's own cgroup in
 * the hierarchies of the controllers in WANT, with the limits given (0 =
 * none for that one).  Controllers that fail are left out, with the
 * reason in WHY; NULL when none could be made (the reason in WHY). */
kr_cgroup_t *kr_cgroup_new(const char *name, unsigned want, long long memory_bytes, double cpus,
                           long pids, char *why, size_t size);

/* The controllers the cgroup enforces. */
unsigned kr_cgroup_enforced(const kr_cgroup_t *self);

/* Move the calling process into the cgroup (in every hierarchy).  Only
 * open, write and close: safe between fork and exec.  0 or -1. */
int kr_cgroup_enter(const kr_cgroup_t *self);

/* Move process PID (the whole process) into the cgroup.  0 or -1. */
int kr_cgroup_add(const kr_cgroup_t *self, pid_t pid);

/* Move the calling process back to the cgroup it made SELF under (before
 * destroying SELF, which would otherwise wait for it).  0 or -1. */
int kr_cgroup_leave(const kr_cgroup_t *self);

/* Where controller BIT's limit is: "cgroup v1 /sys/fs/cgroup/memory/…/NAME"
 * into BUF; "" when the cgroup does not enforce it. */
const char *kr_cgroup_where(const kr_cgroup_t *self, unsigned bit, char *buf, size_t size);

/* Memory charged to the cgroup in bytes, -1 when unknown. */
long long kr_cgroup_memory(const kr_cgroup_t *self);
/* The memory limit set, 0 when none. */
long long kr_cgroup_memory_limit(const kr_cgroup_t *self);
/* How many processes the OOM killer has killed in the cgroup, -1 when unknown. */
long kr_cgroup_oom_kills(const kr_cgroup_t *self);
/* The same for the memory cgroup NAME under the caller's own (one made
 * by an earlier process), -1 when unknown or there is none. */
long kr_cgroup_oom_kills_named(const char *name);
/* The same for the memory cgroup directory DIR (cgroup v2's with V2),
 * one made by someone else (a container engine's). */
long kr_cgroup_oom_kills_in(const char *dir, bool v2);
/* How many forks the pids limit refused, -1 when unknown. */
long kr_cgroup_pids_refused(const kr_cgroup_t *self);
/* Processes in the cgroup now, -1 when unknown. */
long kr_cgroup_pids_current(const kr_cgroup_t *self);

/* From now on, record in the file at PATH (NULL: nowhere, the default)
 * the directory of every cgroup this process makes: each path goes in,
 * one a line, before the directory is made, and out once it is removed.
 * What a process killed with SIGKILL left is then known exactly, for
 * kr_cgroup_reap.  The file is rewritten whole each time (a temporary
 * file renamed over it); a cgroup that cannot be recorded is not made. */
void kr_cgroup_record(const char *path);

/* Remove the cgroups listed in the file at PATH (what an earlier process
 * recorded, kr_cgroup_record), killing what is still in them; the
 * lines of those removed leave the file.  Only a directory named "kbox-…"
 * directly under the caller's own cgroup of a hierarchy is touched; any
 * other line is dropped.  Nothing is ever matched by name: a cgroup not
 * listed stays.  How many were removed. */
int kr_cgroup_reap(const char *path);

/* Kill what is left in the cgroup, remove its directories, free.
 * Accepts NULL. */
void kr_cgroup_destroy(kr_cgroup_t **self_p);

#endif
