/* src/cli/cmd_start.c — kbox start: create a session and its supervisor. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool valid_env(const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return false;
	for (const char *p = kv; p < eq; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
		      (p > kv && *p >= '0' && *p <= '9')))
			return false;
	return true;
}

/* -e K=V: appended to the cli_strlist_t at VALUE. */
static int env_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	if (!valid_env(arg)) {
		cli_error(cmd, "invalid --env \"%s\": expected NAME=VALUE", arg);
		return EXIT_USAGE;
	}
	return cli_strlist_add(cmd, opt->value, arg);
}

/* --memory, --tmp-size, --file-size: at least 1M, into the long long at VALUE. */
static int size_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	long long v = cli_parse_size(arg);
	if (v < 1024 * 1024) {
		cli_error(cmd, "invalid --%s \"%s\": expected a size of at least 1M (e.g. %s)",
		          opt->long_name, arg,
		          strcmp(opt->long_name, "memory") == 0 ? "512M, 2G" : "256M, 4G");
		return EXIT_USAGE;
	}
	*(long long *)opt->value = v;
	return EXIT_OK;
}

/* --cpus N, into the double at VALUE. */
static int cpus_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	char *end;
	double v;
	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(v) || v <= 0 || v > 1024) {
		cli_error(cmd,
		          "invalid --cpus \"%s\": expected a number of CPUs above 0 and at most "
		          "1024 (e.g. 1 or 0.5)",
		          arg);
		return EXIT_USAGE;
	}
	*(double *)opt->value = v;
	return EXIT_OK;
}

/* --home-config on|off, into the int at VALUE (1 or 0). */
static int home_config_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0) {
		cli_error(cmd, "invalid --home-config \"%s\": expected on or off", arg);
		return EXIT_USAGE;
	}
	*(int *)opt->value = strcmp(arg, "on") == 0;
	return EXIT_OK;
}

/* --pids N, into the long long at VALUE. */
static int pids_cb(const char *cmd, const cli_option_t *opt, const char *arg)
{
	long long v = cli_parse_size(arg);
	if (v < 1 || strpbrk(arg, "kKmMgG") || v > 4194304) {
		cli_error(cmd,
		          "invalid --pids \"%s\": expected a number of processes from 1 to "
		          "4194304",
		          arg);
		return EXIT_USAGE;
	}
	*(long long *)opt->value = v;
	return EXIT_OK;
}

/* The real path of --rootfs ARG, a directory with a usr directory (malloc'd),
 * or NULL (printed). */
static char *rootfs_path(const char *arg)
{
	char usr[PATH_MAX + 8], *rootfs = realpath(arg, NULL);
	struct stat st;
	if (!rootfs) {
		cli_error("start", "invalid --rootfs \"%s\": %s", arg, strerror(errno));
		return NULL;
	}
	snprintf(usr, sizeof usr, "%s/usr", rootfs);
	if (stat(usr, &st) < 0 || !S_ISDIR(st.st_mode)) {
		cli_error("start",
		          "invalid --rootfs \"%s\": a root filesystem has a usr directory, "
		          "and %s is none",
		          arg, usr);
		free(rootfs);
		return NULL;
	}
	return rootfs;
}

int cmd_start(int argc, char **argv)
{
	const char *name = NULL, *rootfs_arg = NULL;
	char *rootfs = NULL;
	kr_session_opts_t o = KR_SESSION_OPTS_INIT;
	kr_session_config_t config, before;
	cli_strlist_t env = {0};
	cli_option_t opts[] = {
	        CLI_OPT_SESSION(&name),
	        CLI_OPT_STRING('k', "kernel", "SPEC", &o.kernel,
	                       "the kernelspec (default: the session's, else " KR_KERNEL_DEFAULT
	                       ")"),
	        CLI_OPT_STRING(
	                'b', "backend", "B", &o.backend,
	                "bwrap or none, unsandboxed (default: the session's, else " KR_BACKEND_DEFAULT
	                ")"),
	        CLI_OPT_CALLBACK(
	                0, "ttl", "DURATION", cli_opt_duration, &o.ttl_ms,
	                "stop after DURATION idle, 0 never (default: the session's, else 30m)"),
	        CLI_OPT_CALLBACK(0, "memory", "SIZE", size_cb, &o.memory,
	                         "limit the kernel's memory (default: the session's, else 2G)"),
	        CLI_OPT_CALLBACK(
	                0, "cpus", "N", cpus_cb, &o.cpus,
	                "limit it to N CPUs, such as 0.5 (default: the session's, else none)"),
	        CLI_OPT_CALLBACK(
	                0, "pids", "N", pids_cb, &o.pids,
	                "limit its processes and threads (default: the session's, else 1024)"),
	        CLI_OPT_CALLBACK(0, "tmp-size", "SIZE", size_cb, &o.tmp_size,
	                         "size of /tmp and /dev/shm (default: the session's, else 512M)"),
	        CLI_OPT_CALLBACK(0, "file-size", "SIZE", size_cb, &o.file_size,
	                         "largest file it may write (default: the session's, else 4G)"),
	        CLI_OPT_STRING(
	                0, "rootfs", "DIR", &rootfs_arg,
	                "the sandbox's system files (default: the session's, else the host's)"),
	        CLI_OPT_CALLBACK(
	                'e', "env", "K=V", env_cb, &env,
	                "set K to V in its environment; repeatable (default: the session's)"),
	        CLI_OPT_CALLBACK(0, "outputs-quota", "SIZE", size_cb, &o.outputs_quota,
	                         "the most its outputs directory may hold: spilled text and images "
	                         "(default: the session's, else 1G)"),
	        CLI_OPT_CALLBACK(0, "home-config", "on|off", home_config_cb, &o.home_config,
	                         "let a new kernel run the startup files and configuration in its "
	                         "home (default: the session's, else off)"),
	        CLI_OPT_END};
	char *dir = NULL;
	int status, n;
	kbox_error_t err = {0};
	bool started = false, is_new = false, restore = false;

	kr_session_config_init(&config);
	kr_session_config_init(&before);
	if ((n = cli_parse_options("start", opts, argc, argv, &status)) < 0)
		goto out;
	if ((status = cli_no_operands("start", n, argv)) != EXIT_OK)
		goto out;
	if (rootfs_arg && !(rootfs = rootfs_path(rootfs_arg))) {
		status = EXIT_USAGE;
		goto out;
	}
	o.rootfs = rootfs;
	o.env = env.v;
	o.n_env = env.n;
	name = cli_session_name(name);
	if ((status = cli_check_session("start", name)) != EXIT_OK)
		goto out;
	if (o.backend && !kr_backend_exists(o.backend)) {
		char list[128] = "";
		for (const char *const *b = kr_backend_names(); *b; b++)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
			         list[0] ? ", " : "", *b);
		cli_error("start", "unknown backend \"%s\" (available: %s)", o.backend, list);
		status = EXIT_USAGE;
		goto out;
	}
	{
		/* a kernelspec that does not exist must not leave an empty session
		 * behind: check the one given (a stored one was checked before) */
		kbox_kspec_t *spec = o.kernel ? kbox_kspec_find(o.kernel, &err) : NULL;
		if (o.kernel && !spec) {
			cli_error("start", "%s", err.msg);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		kbox_kspec_destroy(&spec);
	}
	{
		/* a session that is new when this start fails leaves nothing behind */
		kbox_error_t ignored = {0};
		char *home = kr_state_home(&ignored);
		char *old = home ? kr_session_dir(home, name, false, &ignored) : NULL;
		char path[PATH_MAX + 32];
		if (old) {
			snprintf(path, sizeof path, "%s/session.json", old);
			is_new = access(path, F_OK) < 0;
		} else
			is_new = true;
		free(old);
		free(home);
	}
	if (!(dir = cli_session_dir("start", name, true, &status)))
		goto out;
	{
		pid_t pid;
		if (kr_session_supervisor(dir, &pid) == KR_SUPERVISOR_RUNNING) {
			printf("session %s is already running (supervisor pid %ld)\n", name,
			       (long)pid);
			if (!kr_session_opts_empty(&o))
				cli_error(
				        "start",
				        "warning: session %s runs already; the options given were "
				        "not applied (kbox stop -s %s first)",
				        name, name);
			goto out;
		}
	}
	/* the session's configuration, and the command line over it; and
	 * what a start that fails puts back: a kernel that could not be
	 * started, or options it could not start with, are not the
	 * session's (the next start or exec uses what worked before) */
	o.name = name;
	if (kr_session_config_load(&config, dir, &err) < 0 ||
	    (!is_new && kr_session_config_load(&before, dir, &err) < 0) ||
	    kr_session_config_merge(&config, &o, &err) < 0) {
		cli_error("start", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	restore = !is_new;
	{
		kbox_kspec_t *spec = kbox_kspec_find(config.kernel, &err);
		if (!spec) {
			cli_error("start", "%s", err.msg);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		kbox_kspec_destroy(&spec);
	}
	if ((status = cli_check_backend("start", &config)) != EXIT_OK)
		goto out;
	if (!kr_backend_sandboxed(config.backend))
		fprintf(stderr, "kbox: warning: backend %s: the kernel runs unsandboxed\n",
		        config.backend);
	status = cli_session_start("start", dir, name, &config, &started);
	if (status == EXIT_OK) {
		pid_t pid;
		kr_session_supervisor(dir, &pid);
		if (started)
			printf("session %s started (backend %s, kernel %s, supervisor pid %ld)\n",
			       name, config.backend, config.kernel, (long)pid);
		else
			printf("session %s is already running (supervisor pid %ld)\n", name,
			       (long)pid);
	}
out:
	if (dir && is_new && status != EXIT_OK && !started)
		cli_session_forget(dir);
	else if (dir && restore && status != EXIT_OK && !started) {
		/* a supervisor that reported its failure is on its way out: once
		 * it is gone (never under one that runs), put the old back */
		kbox_error_t ignored = {0};
		for (int i = 0;
		     i < 100 && kr_session_supervisor(dir, NULL) == KR_SUPERVISOR_RUNNING; i++)
			usleep(50000);
		if (kr_session_supervisor(dir, NULL) != KR_SUPERVISOR_RUNNING)
			kr_session_config_save(&before, dir, &ignored);
	}
	kr_session_config_free(&before);
	kr_session_config_free(&config);
	cli_strlist_clear(&env);
	free(rootfs);
	free(dir);
	return status;
}
