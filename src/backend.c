/* src/backend.c — the backend interface and the `none` backend.
 *
 * Each backend is a table of operations; kbox_sandbox_t holds the table and
 * the backend's own state.  `none` wraps kbox_kernel_t: a plain local
 * process, not isolated. */
#include "private.h"
#include <kbox/backend.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct {
	const char *name;
	bool sandboxed;
	/* which limits it enforces */
	bool memory, cpus, pids;
	void *(*spawn)(const kbox_kspec_t *spec, const kbox_sandbox_opts_t *o, kbox_error_t *err);
	kbox_client_t *(*connect)(void *h, kbox_error_t *err);
	const char *(*connection_file)(void *h);
	pid_t (*pid)(void *h);
	/* true while running; once ended, fills CAUSE */
	bool (*alive)(void *h, char *cause, size_t size);
	int (*signal)(void *h, int sig, kbox_error_t *err);
	int (*stop)(void *h, kbox_client_t *c, kbox_error_t *err);
	void (*destroy)(void *h);
} backend_ops_t;

struct kbox_sandbox {
	const backend_ops_t *ops;
	void *h;
	kbox_interrupt_mode_t interrupt_mode;
	bool ended;
	char cause[256];
};

/* ---- none ---- */

static void *none_spawn(const kbox_kspec_t *spec, const kbox_sandbox_opts_t *o,
                        kbox_error_t *err)
{
	kbox_kernel_opts_t ko = {0};
	ko.runtime_dir = o->runtime_dir;
	ko.cwd = o->workspace;
	ko.env = o->env;
	ko.log_path = o->log_path;
	return kbox_kernel_start(spec, &ko, err);
}

static kbox_client_t *none_connect(void *h, kbox_error_t *err)
{
	return kbox_kernel_connect(h, err);
}

static const char *none_connection_file(void *h)
{
	return kbox_kernel_connection_file(h);
}

static pid_t none_pid(void *h) { return kbox_kernel_pid(h); }

static bool none_alive(void *h, char *cause, size_t size)
{
	int st;
	if (kbox_kernel_is_alive(h))
		return true;
	st = kbox_kernel_exit_status(h);
	if (st == -1)
		snprintf(cause, size, "the kernel process vanished (not reaped by kbox)");
	else if (WIFEXITED(st))
		snprintf(cause, size, "the kernel exited with status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st)) {
		const char *abbrev = sigabbrev_np(WTERMSIG(st));
		snprintf(cause, size, "the kernel was killed by signal %d (SIG%s)", WTERMSIG(st),
		         abbrev ? abbrev : "?");
	} else
		snprintf(cause, size, "the kernel ended (wait status %d)", st);
	return false;
}

static int none_signal(void *h, int sig, kbox_error_t *err)
{
	return kbox_kernel_signal(h, sig, err);
}

static int none_stop(void *h, kbox_client_t *c, kbox_error_t *err)
{
	return kbox_kernel_stop(h, c, err);
}

static void none_destroy(void *h)
{
	kbox_kernel_t *k = h;
	kbox_kernel_destroy(&k);
}

static const backend_ops_t none_ops = {
    "none",      false,      false,       false,         false,
    none_spawn,  none_connect, none_connection_file, none_pid, none_alive,
    none_signal, none_stop,  none_destroy,
};

static const backend_ops_t *const backends[] = {&none_ops, NULL};
static const char *const backend_names[] = {"none", NULL};

static const backend_ops_t *find(const char *name)
{
	for (size_t i = 0; name && backends[i]; i++)
		if (strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}

const char *const *kbox_backend_names(void) { return backend_names; }

bool kbox_backend_exists(const char *name) { return find(name) != NULL; }

bool kbox_backend_sandboxed(const char *name)
{
	const backend_ops_t *ops = find(name);
	return ops && ops->sandboxed;
}

const char *kbox_backend_unenforced(const char *name, const kbox_sandbox_opts_t *o, char *buf,
                                    size_t size)
{
	const backend_ops_t *ops = find(name);
	size_t n = 0;
	if (size)
		buf[0] = '\0';
	if (!ops || !o || !size)
		return buf;
#define ADD(cond, what)                                                                        \
	if ((cond) && n < size)                                                                    \
		n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", what);
	ADD(o->memory_bytes > 0 && !ops->memory, "memory");
	ADD(o->cpus > 0 && !ops->cpus, "cpus");
	ADD(o->pids > 0 && !ops->pids, "pids");
#undef ADD
	return buf;
}

kbox_sandbox_t *kbox_sandbox_spawn(const char *name, const kbox_kspec_t *spec,
                                   const kbox_sandbox_opts_t *opts, kbox_error_t *err)
{
	const backend_ops_t *ops = find(name);
	kbox_sandbox_opts_t none = {0};
	kbox_sandbox_t *self;

	if (!ops) {
		kbox__err(err, KBOX_E_NOTFOUND, "unknown backend \"%s\"", name ? name : "(null)");
		return NULL;
	}
	if (!(self = calloc(1, sizeof *self))) {
		kbox__err(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	self->ops = ops;
	self->interrupt_mode = kbox_kspec_interrupt_mode(spec);
	if (!(self->h = ops->spawn(spec, opts ? opts : &none, err))) {
		free(self);
		return NULL;
	}
	return self;
}

kbox_client_t *kbox_sandbox_connect(kbox_sandbox_t *self, kbox_error_t *err)
{
	return self->ops->connect(self->h, err);
}

const char *kbox_sandbox_connection_file(const kbox_sandbox_t *self)
{
	return self->ops->connection_file(self->h);
}

const char *kbox_sandbox_backend(const kbox_sandbox_t *self) { return self->ops->name; }

pid_t kbox_sandbox_pid(const kbox_sandbox_t *self) { return self->ops->pid(self->h); }

bool kbox_sandbox_alive(kbox_sandbox_t *self)
{
	if (self->ended)
		return false;
	if (self->ops->alive(self->h, self->cause, sizeof self->cause))
		return true;
	self->ended = true;
	return false;
}

const char *kbox_sandbox_cause(const kbox_sandbox_t *self)
{
	return self->ended ? self->cause : "";
}

long long kbox_sandbox_memory(const kbox_sandbox_t *self)
{
	char path[64], line[256];
	long long kb = -1;
	FILE *f;
	if (self->ended)
		return -1;
	snprintf(path, sizeof path, "/proc/%ld/status", (long)kbox_sandbox_pid(self));
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

int kbox_sandbox_interrupt(kbox_sandbox_t *self, kbox_client_t *client, kbox_error_t *err)
{
	kbox_client_t *own = NULL;
	int rc;
	if (self->interrupt_mode == KBOX_INTERRUPT_SIGNAL)
		return self->ops->signal(self->h, SIGINT, err);
	if (!client && !(client = own = self->ops->connect(self->h, err)))
		return -1;
	{
		/* interrupt_request on control: the client sends it when it has
		 * no interrupt hook */
		json_t *c = json_object();
		kbox_msg_t *reply = kbox_client_request(client, KBOX_CH_CONTROL, "interrupt_request",
		                                        &c, 5000, err);
		rc = reply ? 0 : -1;
		kbox_msg_destroy(&reply);
	}
	kbox_client_destroy(&own);
	return rc;
}

int kbox_sandbox_signal(kbox_sandbox_t *self, int sig, kbox_error_t *err)
{
	return self->ops->signal(self->h, sig, err);
}

int kbox_sandbox_stop(kbox_sandbox_t *self, kbox_client_t *client, kbox_error_t *err)
{
	return self->ops->stop(self->h, client, err);
}

void kbox_sandbox_destroy(kbox_sandbox_t **self_p)
{
	if (!self_p || !*self_p)
		return;
	(*self_p)->ops->destroy((*self_p)->h);
	free(*self_p);
	*self_p = NULL;
}
