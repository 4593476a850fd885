/* src/cli/cmd_start.c — kbox start: create a session and its supervisor. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
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

int cmd_start(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"session", required_argument, NULL, 's'}, {"kernel", required_argument, NULL, 'k'},
	    {"backend", required_argument, NULL, 'b'}, {"ttl", required_argument, NULL, 'T'},
	    {"memory", required_argument, NULL, 'm'},  {"cpus", required_argument, NULL, 'c'},
	    {"pids", required_argument, NULL, 'p'},    {"env", required_argument, NULL, 'e'},
	    {"rootfs", required_argument, NULL, 'R'},  {"tmp-size", required_argument, NULL, 'S'},
	    {"file-size", required_argument, NULL, 'F'}, {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	const char *name = NULL, *kernel = NULL, *backend = NULL;
	char *rootfs = NULL;
	long long ttl = -1, memory = -1, pids = -1, tmp_size = -1, file_size = -1;
	double cpus = -1;
	json_t *env = json_array(), *config = NULL;
	char *dir = NULL;
	int c, status = EXIT_OK;
	kbox_error_t err = {0};
	bool started = false, is_new = false;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:k:b:e:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': name = optarg; break;
		case 'k': kernel = optarg; break;
		case 'b': backend = optarg; break;
		case 'T':
			if ((ttl = kbox_parse_duration(optarg)) < 0) {
				cli_error("start", "invalid --ttl \"%s\": expected a duration such as 90s, "
				          "30m, 2h or 0 for never", optarg);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'm':
			if ((memory = cli_parse_size(optarg)) < 1024 * 1024) {
				cli_error("start", "invalid --memory \"%s\": expected a size of at least 1M "
				          "(e.g. 512M, 2G)", optarg);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'c': {
			char *end;
			errno = 0;
			cpus = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(cpus) || cpus <= 0 || cpus > 1024) {
				cli_error("start", "invalid --cpus \"%s\": expected a number of CPUs above 0 "
				          "and at most 1024 (e.g. 1 or 0.5)", optarg);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		}
		case 'p':
			pids = cli_parse_size(optarg);
			if (pids < 1 || strpbrk(optarg, "kKmMgG") || pids > 4194304) {
				cli_error("start", "invalid --pids \"%s\": expected a number of processes "
				          "from 1 to 4194304", optarg);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'R': {
			char usr[PATH_MAX + 8];
			struct stat st;
			free(rootfs);
			if (!(rootfs = realpath(optarg, NULL))) {
				cli_error("start", "invalid --rootfs \"%s\": %s", optarg, strerror(errno));
				status = EXIT_USAGE;
				goto out;
			}
			snprintf(usr, sizeof usr, "%s/usr", rootfs);
			if (stat(usr, &st) < 0 || !S_ISDIR(st.st_mode)) {
				cli_error("start", "invalid --rootfs \"%s\": a root filesystem has a usr "
				          "directory, and %s is none", optarg, usr);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		}
		case 'S':
		case 'F': {
			long long v = cli_parse_size(optarg);
			if (v < 1024 * 1024) {
				cli_error("start", "invalid --%s \"%s\": expected a size of at least 1M "
				          "(e.g. 256M, 4G)", c == 'S' ? "tmp-size" : "file-size", optarg);
				status = EXIT_USAGE;
				goto out;
			}
			*(c == 'S' ? &tmp_size : &file_size) = v;
			break;
		}
		case 'e':
			if (!valid_env(optarg)) {
				cli_error("start", "invalid --env \"%s\": expected NAME=VALUE", optarg);
				status = EXIT_USAGE;
				goto out;
			}
			json_array_append_new(env, json_string(optarg));
			break;
		case 'h':
			cli_usage(cli_find("start"), stdout);
			goto out;
		default:
			cli_bad_option("start", c, argv);
			status = EXIT_USAGE;
			goto out;
		}
	}
	if (optind < argc) {
		cli_error("start", "unexpected argument \"%s\" (see kbox start --help)", argv[optind]);
		status = EXIT_USAGE;
		goto out;
	}
	name = cli_session_name(name);
	if ((status = cli_check_session("start", name)) != EXIT_OK)
		goto out;
	if (backend && !kbox_backend_exists(backend)) {
		char list[128] = "";
		for (const char *const *b = kbox_backend_names(); *b; b++)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
			         list[0] ? ", " : "", *b);
		cli_error("start", "unknown backend \"%s\" (available: %s)", backend, list);
		status = EXIT_USAGE;
		goto out;
	}
	{
		/* a kernelspec that does not exist must not leave an empty session
		 * behind: check the one given (a stored one was checked before) */
		kbox_kspec_t *spec = kernel ? kbox_kspec_find(kernel, &err) : NULL;
		if (kernel && !spec) {
			cli_error("start", "%s", err.msg);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		kbox_kspec_destroy(&spec);
	}
	{
		/* a session that is new when this start fails leaves nothing behind */
		kbox_error_t ignored = {0};
		char *home = kbox_state_home(&ignored);
		char *old = home ? kbox_session_dir(home, name, false, &ignored) : NULL;
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
		if (kbox_session_supervisor(dir, &pid) == KBOX_SUPERVISOR_RUNNING) {
			printf("session %s is already running (supervisor pid %ld)\n", name, (long)pid);
			if (kernel || backend || ttl >= 0 || memory >= 0 || cpus >= 0 || pids >= 0 ||
			    json_array_size(env) || rootfs || tmp_size >= 0 || file_size >= 0)
				cli_error("start", "warning: session %s runs already; the options given were "
				          "not applied (kbox stop -s %s first)", name, name);
			goto out;
		}
	}
	if (!(config = kbox_session_config_load(dir, &err))) {
		cli_error("start", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	json_object_set_new(config, "name", json_string(name));
	if (kernel)
		json_object_set_new(config, "kernel", json_string(kernel));
	if (backend)
		json_object_set_new(config, "backend", json_string(backend));
	if (!json_object_get(config, "kernel"))
		json_object_set_new(config, "kernel", json_string("python3"));
	if (!json_object_get(config, "backend"))
		json_object_set_new(config, "backend", json_string(KBOX_BACKEND_DEFAULT));
	if (ttl >= 0)
		json_object_set_new(config, "ttl_ms", json_integer(ttl));
	if (memory >= 0)
		json_object_set_new(config, "memory", json_integer(memory));
	if (cpus >= 0)
		json_object_set_new(config, "cpus", json_real(cpus));
	if (pids >= 0)
		json_object_set_new(config, "pids", json_integer(pids));
	if (tmp_size >= 0)
		json_object_set_new(config, "tmp_size", json_integer(tmp_size));
	if (file_size >= 0)
		json_object_set_new(config, "file_size", json_integer(file_size));
	if (rootfs)
		json_object_set_new(config, "rootfs", json_string(rootfs));
	if (json_array_size(env))
		json_object_set(config, "env", env);
	{
		kbox_kspec_t *spec = kbox_kspec_find(json_string_value(json_object_get(config, "kernel")),
		                                     &err);
		if (!spec) {
			cli_error("start", "%s", err.msg);
			status = EXIT_UNAVAILABLE;
			goto out;
		}
		kbox_kspec_destroy(&spec);
	}
	{
		const char *b = json_string_value(json_object_get(config, "backend"));
		if ((status = cli_check_backend("start", config)) != EXIT_OK)
			goto out;
		if (!kbox_backend_sandboxed(b))
			fprintf(stderr, "kbox: warning: backend %s: the kernel runs unsandboxed\n", b);
	}
	status = cli_session_start("start", dir, name, config, &started);
	if (status == EXIT_OK) {
		pid_t pid;
		kbox_session_supervisor(dir, &pid);
		if (started)
			printf("session %s started (backend %s, kernel %s, supervisor pid %ld)\n", name,
			       json_string_value(json_object_get(config, "backend")),
			       json_string_value(json_object_get(config, "kernel")), (long)pid);
		else
			printf("session %s is already running (supervisor pid %ld)\n", name, (long)pid);
	}
out:
	if (dir && is_new && status != EXIT_OK && !started)
		cli_session_forget(dir);
	json_decref(env);
	json_decref(config);
	free(rootfs);
	free(dir);
	return status;
}
