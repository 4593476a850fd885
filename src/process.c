/* src/process.c — the environment a kernel starts with (kbox_kernel_env,
 * kbox/kernel.h), whatever starts it: kernel.c's local kernels, the
 * runtime's sandboxes.  Only libc and the kspec: kbox(1) links it too.
 * The rest of starting a process is the common module's (kx_proc.c). */
#include "private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- environment ---- */

/* Set KV ("KEY=VALUE", copied) in ENV (NULL-terminated, *N entries), replacing
 * an entry with the same key. */
static int env_set(char ***env, size_t *n, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
	char *copy = strdup(kv), **v;
	if (!copy || !eq)
		return free(copy), eq ? -1 : 0;
	for (size_t i = 0; i < *n; i++)
		if (strncmp((*env)[i], kv, klen + 1) == 0) {
			free((*env)[i]);
			(*env)[i] = copy;
			return 0;
		}
	v = realloc(*env, (*n + 2) * sizeof *v);
	if (!v) {
		free(copy);
		return -1;
	}
	v[(*n)++] = copy;
	v[*n] = NULL;
	*env = v;
	return 0;
}

char **kbox_kernel_env(const kbox_kspec_t *spec, const char *const *extra, const char *home_dir)
{
	char **env = calloc(1, sizeof *env), **spec_env, *home = NULL, pid[48];
	size_t n = 0;
	int rc = 0;

	if (!home_dir)
		home_dir = getenv("HOME");
	if (!env || asprintf(&home, "HOME=%s", home_dir && *home_dir ? home_dir : "/") < 0) {
		free(env);
		return NULL;
	}
	snprintf(pid, sizeof pid, "JPY_PARENT_PID=%ld", (long)getpid());
	rc |= env_set(&env, &n, "PATH=" KX_SAFE_PATH);
	rc |= env_set(&env, &n, home);
	rc |= env_set(&env, &n, "LANG=C.UTF-8");
	rc |= env_set(&env, &n, pid);
	free(home);
	spec_env = kbox_kspec_format_env(spec);
	for (char **p = spec_env; p && *p; p++)
		rc |= env_set(&env, &n, *p);
	kbox_strv_free(spec_env);
	for (const char *const *p = extra; p && *p; p++)
		rc |= env_set(&env, &n, *p);
	if (rc) {
		kbox_strv_free(env);
		return NULL;
	}
	return env;
}
