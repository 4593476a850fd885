/* src/cli/cmd_start.c — kbox start: create a session and its supervisor. */
#include "config.h"
#include "cli.h"
#include "runtime/functions.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Why KV is not NAME=VALUE with NAME a shell variable's name (letters,
 * digits and '_', not starting with a digit), or NULL when it is. */
static const char *env_wrong(const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (!eq)
		return "no '=' (expected NAME=VALUE)";
	if (eq == kv)
		return "no NAME before '='";
	if (*kv >= '0' && *kv <= '9')
		return "a NAME may not begin with a digit";
	for (const char *p = kv; p < eq; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
		      (*p >= '0' && *p <= '9')))
			return "a NAME is letters, digits and '_'";
	return NULL;
}

/* -e K=V: appended to the cli_strlist_t at VALUE. */
int cli_opt_env(const char *cmd, const cli_option_t *opt, const char *arg)
{
	const char *why = env_wrong(arg);
	if (why) {
		cli_error(cmd, "invalid --env \"%s\": %s", arg, why);
		return EXIT_USAGE;
	}
	return cli_strlist_add(cmd, opt->value, arg);
}

/* --memory, --tmp-size, --file-size: at least 1M, into the long long at VALUE. */
int cli_opt_size(const char *cmd, const cli_option_t *opt, const char *arg)
{
	long long v = cli_parse_size(arg), ram;
	if (v < 1024 * 1024) {
		cli_error(
		        cmd,
		        "invalid --%s \"%s\": expected a size of at least 1M, a number of bytes or one with "
		        "a suffix K, M, G or T (e.g. %s)",
		        opt->long_name, arg,
		        strcmp(opt->long_name, "memory") == 0 ? "512M, 1.5G" : "256M, 4G");
		return EXIT_USAGE;
	}
	*(long long *)opt->value = v;
	/* more than the machine has bounds nothing: said, and taken */
	ram = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	if (strcmp(opt->long_name, "memory") == 0 && ram > 0 && v > ram) {
		char have[32];
		cli_error(cmd,
		          "warning: --memory %s is more than the %s of memory of this machine: it "
		          "bounds nothing",
		          arg, kx_fmt_bytes(have, sizeof have, ram));
	}
	return EXIT_OK;
}

/* --cpus N, into the double at VALUE. */
int cli_opt_cpus(const char *cmd, const cli_option_t *opt, const char *arg)
{
	const char *p = arg;
	size_t digits = 0;
	double v = 0;

	/* decimal digits, perhaps with a fraction, as every number kbox
	 * reads (newcomer 12, F2: strtod took 0x10, 1e1 and " 1"); at least
	 * 0.01, the least a CFS quota can be (1 ms in each 100 ms: F1, a
	 * kernel given 0.001 never started, and no message said why) */
	while (*p >= '0' && *p <= '9')
		p++, digits++;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			digits++;
	if (digits && !*p && strlen(arg) <= 32) {
		errno = 0;
		v = strtod(arg, NULL);
	}
	if (!digits || *p || strlen(arg) > 32 || errno || v < 0.01 || v > 1024) {
		cli_error(cmd,
		          "invalid --cpus \"%s\": expected a number of CPUs from 0.01 to 1024 "
		          "(e.g. 1 or 0.5)",
		          arg);
		return EXIT_USAGE;
	}
	*(double *)opt->value = v;
	/* more than the machine has bounds nothing: said, and taken */
	if (v > (double)sysconf(_SC_NPROCESSORS_ONLN))
		cli_error(
		        cmd,
		        "warning: --cpus %s is more than the %ld CPUs of this machine: the kernel "
		        "may use them all",
		        arg, sysconf(_SC_NPROCESSORS_ONLN));
	return EXIT_OK;
}

/* --home-config on|off, into the int at VALUE (1 or 0). */
int cli_opt_home_config(const char *cmd, const cli_option_t *opt, const char *arg)
{
	if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0) {
		cli_error(cmd, "invalid --home-config \"%s\": expected on or off", arg);
		return EXIT_USAGE;
	}
	*(int *)opt->value = strcmp(arg, "on") == 0;
	return EXIT_OK;
}

/* ARG as a whole number from 1 to MAX, into the long long at OPT's
 * value; else an error that says what was expected (WHAT: "processes"). */
static int count_cb(const char *cmd, const cli_option_t *opt, const char *arg, const char *what,
                    long long max)
{
	long long v = cli_parse_size(arg);
	if (v < 1 || strpbrk(arg, "kKmMgGtT.") || v > max) {
		cli_error(cmd, "invalid --%s \"%s\": expected a number of %s from 1 to %lld",
		          opt->long_name, arg, what, max);
		return EXIT_USAGE;
	}
	*(long long *)opt->value = v;
	return EXIT_OK;
}

/* --launch-timeout DURATION, from 1s to 1h (a launch is told in whole
 * seconds: a fraction of one rounds up), into the long long at VALUE
 * (milliseconds). */
static int opt_launch_timeout(const char *cmd, const cli_option_t *opt, const char *arg)
{
	return cli_opt_duration_within(cmd, opt, arg, 1000, 3600000, "1s to 1h", "30s, 2m or 1h");
}

/* --pids N, into the long long at VALUE. */
int cli_opt_pids(const char *cmd, const cli_option_t *opt, const char *arg)
{
	return count_cb(cmd, opt, arg, "processes", 4194304);
}

/* --output-rate N, into the long long at VALUE. */
int cli_opt_output_rate(const char *cmd, const cli_option_t *opt, const char *arg)
{
	return count_cb(cmd, opt, arg, "messages a second", 1000000);
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

/* Refuse a kernelspec KERNEL that does not exist.  EXIT_OK, or
 * EXIT_UNAVAILABLE after one line. */
static int check_kspec(const char *kernel)
{
	kbox_error_t err = {0};
	kbox_kspec_t *spec = kbox_kspec_find(kernel, &err);

	if (!spec) {
		cli_error("start", "%s", err.msg);
		return EXIT_UNAVAILABLE;
	}
	kbox_kspec_destroy(&spec);
	return EXIT_OK;
}

/* True when session NAME has no configuration yet: a start of it that
 * fails leaves nothing behind. */
static bool session_is_new(const char *name)
{
	kbox_error_t ignored = {0};
	char *home = kr_state_home(&ignored);
	char *old = home ? kr_session_dir(home, name, false, &ignored) : NULL;
	char path[PATH_MAX + 32];
	bool is_new = true;

	if (old) {
		snprintf(path, sizeof path, "%s/session.json", old);
		is_new = access(path, F_OK) < 0;
	}
	free(old);
	free(home);
	return is_new;
}

/* True when session NAME in DIR runs already, which is said (with a
 * warning when options O were given: they are not applied). */
static bool says_running(const char *dir, const char *name, const kr_session_opts_t *o)
{
	pid_t pid;

	if (kr_session_supervisor(dir, &pid) != KR_SUPERVISOR_RUNNING)
		return false;
	printf("session %s is already running (supervisor pid %ld)\n", name, (long)pid);
	if (!kr_session_opts_empty(o))
		cli_error("start",
		          "warning: session %s runs already; the options given were not applied "
		          "(kbox stop -s %s first)",
		          name, name);
	return true;
}

/* The session's token as it was before this start gave another (the
 * gateway's KR_GATEWAY_TOKEN_FILE), to put back when the start fails. */
typedef struct {
	bool changed; /* this start replaced it (and OLD is what to put back) */
	bool had;     /* there was one: OLD, LEN bytes; else there was none */
	char old[4097];
	size_t len;
} token_undo_t;

/* Keep TOKEN in the session's directory DIR (0600, beside session.json:
 * never in it, an argument or a variable of the supervisor's), what was
 * there before in UNDO.  EXIT_OK, or EXIT_UNAVAILABLE after one line. */
static int save_token(const char *dir, const char *token, token_undo_t *undo)
{
	char path[PATH_MAX + 32];
	ssize_t n = -1;
	bool none;
	int fd;

	snprintf(path, sizeof path, "%s/" KR_GATEWAY_TOKEN_FILE, dir);
	fd = kx_open_file(AT_FDCWD, path, O_RDONLY, 0);
	none = fd < 0 && errno == ENOENT;
	if (fd >= 0) {
		n = kx_pread_full(fd, undo->old, sizeof undo->old, 0);
		close(fd);
	}
	undo->had = n >= 0;
	undo->len = n > 0 ? (size_t)n : 0;
	if (kx_write_atomic(AT_FDCWD, path, token, strlen(token), 0600, 0) < 0) {
		cli_error("start", "cannot keep the token in %s: %s", path, strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	/* (one that could not be read back whole is not put back: the new
	 * one stays, as every one did before review 23, P8) */
	undo->changed = none || (n >= 0 && (size_t)n < sizeof undo->old);
	return EXIT_OK;
}

/* Put back the token UNDO kept in the session's directory DIR (or remove
 * the one given, when there was none): atomically, as it was saved. */
static void restore_token(const char *dir, token_undo_t *undo)
{
	char path[PATH_MAX + 32];
	if (!undo->changed)
		return;
	snprintf(path, sizeof path, "%s/" KR_GATEWAY_TOKEN_FILE, dir);
	if (undo->had)
		kx_write_atomic(AT_FDCWD, path, undo->old, undo->len, 0600, 0);
	else
		unlink(path);
	undo->changed = false;
}

/* After a start of the session in DIR that failed: a NEW session leaves
 * nothing behind; else, once the supervisor that reported its failure is
 * gone (never under one that runs), the configuration BEFORE and the
 * token of TOKEN are put back: a kernel that could not be started, or
 * options (a token) it could not start with, are not the session's. */
static void undo_start(const char *dir, bool is_new, const kr_session_config_t *before,
                       token_undo_t *token)
{
	kbox_error_t ignored = {0};

	if (is_new) {
		cli_session_forget(dir);
		return;
	}
	for (int i = 0; i < 100 && kr_session_supervisor(dir, NULL) == KR_SUPERVISOR_RUNNING; i++)
		usleep(50000);
	if (kr_session_supervisor(dir, NULL) != KR_SUPERVISOR_RUNNING) {
		kr_session_config_save(before, dir, &ignored);
		restore_token(dir, token);
	}
}

/* Start session NAME in DIR with CONFIG, after checking its kernelspec and
 * backend, and say so; *STARTED is true when this start made its
 * supervisor.  EXIT_OK, or an exit status after one line. */
static int start_session(const char *dir, const char *name, const kr_session_config_t *config,
                         bool is_new, bool *started)
{
	int status;
	pid_t pid;

	bool gateway = strcmp(config->backend, "gateway") == 0;
	/* (a remote kernel's kernelspec is its server's: the supervisor asks) */
	if ((!gateway && (status = check_kspec(config->kernel)) != EXIT_OK) ||
	    (status = cli_check_backend("start", config, is_new)) != EXIT_OK)
		return status;
	if (kr_backend_unsandboxed_here(config->backend))
		fprintf(stderr, "kbox: warning: backend %s: the kernel runs unsandboxed\n",
		        config->backend);
	if ((status = cli_session_start("start", dir, name, config, 0, started, &pid)) != EXIT_OK)
		return status;
	/* (the supervisor it started, not what the pid file says: code that
	 * reached the session's directory may have put another's pid there) */
	if (!*started)
		kr_session_supervisor(dir, &pid);
	if (*started)
		printf("session %s started (backend %s, kernel %s, supervisor pid %ld)\n", name,
		       config->backend, config->kernel, (long)pid);
	else
		printf("session %s is already running (supervisor pid %ld)\n", name, (long)pid);
	return EXIT_OK;
}

/* What kbox start was asked. */
typedef struct {
	const char *name, *rootfs_arg, *token_file, *token_env, *ca_arg;
	long long launch_ms;
	cli_functions_opts_t fo;
	kr_session_opts_t o;
	cli_strlist_t env;
	bool reseal;
} start_args_t;

/* Parse kbox start's options into A.  0 to go on, or -1 when the command
 * is done, *STATUS saying how (EXIT_OK after --help, else after one line). */
static int parse_start_options(int argc, char **argv, start_args_t *a, int *status)
{
/* An option of kbox start that sets the session's setting FIELD with CB:
 * WHAT it does, and DFLT, what a session has without it ever given. */
#define START_OPT(s, long_, arg, cb, field, what, dflt) \
	CLI_OPT_CALLBACK(s, long_, arg, cb, field, what " (default: the session's, else " dflt ")")

	cli_option_t opts[] = {
	        CLI_OPT_SESSION(&a->name),
	        CLI_OPT_STRING('k', "kernel", "SPEC", &a->o.kernel,
	                       "the kernelspec (default: the session's, else " KR_KERNEL_DEFAULT
	                       ")"),
	        CLI_OPT_STRING(
	                'b', "backend", "B", &a->o.backend,
	                "bwrap, docker (a container; the engine from DOCKER_HOST), gateway (a remote "
	                "Jupyter server, --url), or none, "
	                "unsandboxed (default: the session's, else $KBOX_BACKEND, else " KR_BACKEND_DEFAULT
	                ")"),
	        CLI_OPT_STRING(0, "url", "URL", &a->o.gateway,
	                       "gateway: the Jupyter server, http(s)://HOST:PORT[/PATH] "
	                       "(default: the session's, else $KBOX_GATEWAY_URL)"),
	        CLI_OPT_STRING(0, "token-file", "FILE", &a->token_file,
	                       "gateway: the server's token, read from FILE (default: the "
	                       "session's, else $KBOX_GATEWAY_TOKEN, else none)"),
	        CLI_OPT_STRING(0, "token-env", "VAR", &a->token_env,
	                       "gateway: the server's token, from the variable VAR"),
	        CLI_OPT_STRING(0, "ca-file", "FILE", &a->ca_arg,
	                       "gateway: the CA certificates that verify an https server "
	                       "(default: the session's, else the system's)"),
	        CLI_OPT_CALLBACK(0, "launch-timeout", "DURATION", opt_launch_timeout, &a->launch_ms,
	                         "how long a kernel may take to start and answer (default: "
	                         "the session's, else 1m; gateway: 2m to start on the server)"),
	        CLI_OPT_STRING(0, "image", "NAME", &a->o.image,
	                       "docker: the container image (default: the session's, else "
	                       "$KBOX_IMAGE_NAME, else kbox-kernel)"),
	        START_OPT(0, "ttl", "DURATION", cli_opt_duration, &a->o.ttl_ms,
	                  "stop after DURATION idle, 0 never", "30m"),
	        START_OPT(0, "memory", "SIZE", cli_opt_size, &a->o.memory,
	                  "limit the kernel's memory", "2G"),
	        START_OPT(0, "cpus", "N", cli_opt_cpus, &a->o.cpus,
	                  "limit it to N CPUs, such as 0.5", "none"),
	        START_OPT(0, "pids", "N", cli_opt_pids, &a->o.pids,
	                  "limit its processes and threads", "1024"),
	        START_OPT(0, "tmp-size", "SIZE", cli_opt_size, &a->o.tmp_size,
	                  "size of /tmp and /dev/shm", "512M"),
	        START_OPT(0, "file-size", "SIZE", cli_opt_size, &a->o.file_size,
	                  "largest file it may write", "4G"),
	        CLI_OPT_STRING(
	                0, "rootfs", "DIR", &a->rootfs_arg,
	                "the sandbox's system files (default: the session's, else the host's)"),
	        CLI_OPT_FUNCTIONS(&a->fo, "its code"),
	        CLI_OPT_CALLBACK(
	                'e', "env", "K=V", cli_opt_env, &a->env,
	                "set K to V in its environment; repeatable (default: the session's)"),
	        START_OPT(0, "outputs-quota", "SIZE", cli_opt_size, &a->o.outputs_quota,
	                  "the most its outputs directory may hold: spilled text and images", "1G"),
	        START_OPT(0, "output-rate", "N", cli_opt_output_rate, &a->o.output_rate,
	                  "output messages a second an execution may send once they cannot be "
	                  "kept on disk; more are dropped and counted",
	                  "1000"),
	        START_OPT(0, "home-config", "on|off", cli_opt_home_config, &a->o.home_config,
	                  "let a new kernel run the startup files and configuration in its home",
	                  "off"),
	        CLI_OPT_FLAG(0, "reseal", &a->reseal,
	                     "seal the session's session.json as it is and print it; start "
	                     "nothing (see kbox(7))"),
	        CLI_OPT_END};
#undef START_OPT

	return cli_parse_no_operands("start", opts, argc, argv, status);
}

/* The token A gives (--token-file, --token-env, else $KBOX_GATEWAY_TOKEN)
 * into BUF; *GIVEN false when none is.  EXIT_OK, or EXIT_USAGE after one
 * line. */
static int gateway_token(const start_args_t *a, char *buf, size_t size, bool *given)
{
	const char *v = NULL, *from = NULL;
	size_t n;
	*given = false;
	if (a->token_file && a->token_env) {
		cli_error("start", "--token-file and --token-env: give one");
		return EXIT_USAGE;
	}
	if (a->token_file) {
		FILE *f = fopen(a->token_file, "re");
		struct stat st;
		int e = 0;
		if (!f) {
			cli_error("start", "invalid --token-file \"%s\": %s", a->token_file,
			          strerror(errno));
			return EXIT_USAGE;
		}
		/* (a directory opens, and reads as empty: review 23, P3; a pipe,
		 * such as <(pass show jupyter), is taken) */
		if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
			fclose(f);
			cli_error("start",
			          "invalid --token-file \"%s\": it is a directory, not a file "
			          "holding the token",
			          a->token_file);
			return EXIT_USAGE;
		}
		n = fread(buf, 1, size - 1, f);
		if (ferror(f))
			e = errno;
		fclose(f);
		buf[n] = '\0';
		if (e) {
			cli_error("start", "invalid --token-file \"%s\": %s", a->token_file,
			          strerror(e));
			return EXIT_USAGE;
		}
		if (n == size - 1) {
			cli_error("start", "invalid --token-file \"%s\": over %zu bytes",
			          a->token_file, size - 2);
			return EXIT_USAGE;
		}
		while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			buf[--n] = '\0';
		from = "--token-file";
	} else {
		from = a->token_env ? "--token-env" : "KBOX_GATEWAY_TOKEN";
		v = getenv(a->token_env ? a->token_env : "KBOX_GATEWAY_TOKEN");
		if (!v && a->token_env) {
			cli_error("start", "invalid --token-env %s: the variable is not set",
			          a->token_env);
			return EXIT_USAGE;
		}
		if (!v)
			return EXIT_OK;
		if (strlen(v) >= size) {
			cli_error("start", "the token of %s is over %zu bytes", from, size - 1);
			return EXIT_USAGE;
		}
		snprintf(buf, size, "%s", v);
		n = strlen(buf);
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < ' ' || buf[i] == 0x7f) {
			cli_error("start", "the token of %s has a control character in it", from);
			return EXIT_USAGE;
		}
	if (!n) {
		cli_error("start", "the token of %s is empty", from);
		return EXIT_USAGE;
	}
	*given = true;
	return EXIT_OK;
}

/* The gateway backend's settings (before the merge: A's options into
 * O, KBOX_GATEWAY_URL for a session without a server).  EXIT_OK, or
 * EXIT_USAGE after one line. */
static int check_gateway_opts(start_args_t *a, const kr_session_config_t *config)
{
	kr_session_opts_t *o = &a->o;
	const char *backend = o->backend ? o->backend : config->backend;
	bool gateway = strcmp(backend, "gateway") == 0;
	const char *given = o->gateway      ? "--url"
	                    : a->token_file ? "--token-file"
	                    : a->token_env  ? "--token-env"
	                    : a->ca_arg     ? "--ca-file"
	                                    : NULL;
	/* (from 1s to 1h: opt_launch_timeout) */
	if (a->launch_ms >= 0)
		o->launch_timeout = (a->launch_ms + 999) / 1000;
	if (!gateway) {
		if (given) {
			cli_error("start",
			          "%s is for --backend gateway (this session's backend is %s)",
			          given, backend);
			return EXIT_USAGE;
		}
		return EXIT_OK;
	}
	if (!o->gateway && !config->gateway) {
		const char *env = getenv("KBOX_GATEWAY_URL");
		if (!env || !*env) {
			cli_error("start",
			          "backend gateway: no server: give its URL with --url URL, "
			          "or in KBOX_GATEWAY_URL");
			return EXIT_USAGE;
		}
		o->gateway = env;
	}
	/* (not shown: a user or a query in it may be a token) */
	if (o->gateway && !kr_gateway_url_valid(o->gateway)) {
		cli_error("start",
		          "invalid --url: expected http://HOST[:PORT][/PATH] or https://..., PORT "
		          "from 1 to 65535, with no user, query or fragment (give the token with "
		          "--token-file or --token-env)");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Whether --ca-file ARG, whose real path is PATH, is a readable regular
 * file holding a PEM certificate (a line "-----BEGIN CERTIFICATE-----"):
 * a file that is not fails every call to the server later, with a TLS
 * error (review 23, P7).  EXIT_OK, or EXIT_USAGE after one line. */
static int check_ca_file(const char *arg, const char *path)
{
	char line[256];
	struct stat st;
	bool found = false;
	int e = 0;
	/* (not blocking: a FIFO would wait here for a writer) */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	FILE *f = NULL;

	if (fd < 0 || fstat(fd, &st) < 0) {
		e = errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		cli_error("start", "invalid --ca-file \"%s\": not a regular file", arg);
		close(fd);
		return EXIT_USAGE;
	}
	if (!(f = fdopen(fd, "r"))) {
		e = errno;
		goto out;
	}
	fd = -1;
	/* (a line longer than LINE comes in pieces: none of them is one) */
	while (!found && fgets(line, sizeof line, f))
		found = strncmp(line, "-----BEGIN CERTIFICATE-----", 27) == 0;
	if (ferror(f))
		e = errno;
out:
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	if (e) {
		cli_error("start", "invalid --ca-file \"%s\": %s", arg, strerror(e));
		return EXIT_USAGE;
	}
	if (!found) {
		cli_error("start",
		          "invalid --ca-file \"%s\": no certificate in it (expected PEM: a "
		          "line -----BEGIN CERTIFICATE----- and the certificate after it)",
		          arg);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* kbox start --reseal -s NAME: seal NAME's session.json as it is (one kbox
 * refuses: unsealed, or changed), and print it as sealed, for the user to
 * read before starting the session (what is sealed is what is shown: a
 * file changed again since fails the seal at the start).  Nothing is
 * started, and no other option is taken (O: the others given).  The exit
 * status. */
static int reseal(const char *name, const kr_session_opts_t *o)
{
	kbox_error_t err = {0};
	kr_session_config_t cfg;
	char *dir, *text = NULL;
	json_t *j = NULL;
	int status = cli_check_session("start", name);

	if (status != EXIT_OK)
		return status;
	if (!kr_session_opts_empty(o) || o->n_env || o->rootfs || o->functions) {
		cli_error("start", "--reseal takes no other option but -s: it seals the file as it "
		                   "is and starts nothing");
		return EXIT_USAGE;
	}
	if (!(dir = cli_session_dir("start", name, false, &status)))
		return status;
	kr_session_config_init(&cfg);
	/* what is printed is what was sealed: one read (review 15, W15-2: a
	 * second read, to print, showed another file than the one sealed) */
	if (kr_session_config_reseal(dir, &cfg, &err) < 0 ||
	    !(j = kr_session_config_to_json(&cfg)) ||
	    !(text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9)))) {
		cli_error("start", "session %s: %s", name, err.msg[0] ? err.msg : "out of memory");
		status = EXIT_UNAVAILABLE;
	} else {
		printf("%s\n", text);
		if (geteuid() == 0) /* (newcomer 11, F11: it said "sealed") */
			cli_error("start",
			          "session %s: its session.json is as printed; under root nothing "
			          "is sealed (no sandbox can write the state directory): start it "
			          "with kbox start -s %s",
			          name, name);
		else
			cli_error("start",
			          "session %s: its session.json, as printed, is sealed; start it "
			          "with kbox start -s %s",
			          name, name);
	}
	free(text);
	json_decref(j);
	kr_session_config_free(&cfg);
	free(dir);
	return status;
}

int cmd_start(int argc, char **argv)
{
	start_args_t a = {.o = KR_SESSION_OPTS_INIT, .launch_ms = -1};
	char *ca = NULL;
	kr_session_opts_t *o = &a.o;
	const char *name;
	char *rootfs = NULL, *dir = NULL;
	kr_session_config_t config, before;
	json_t *functions = NULL;
	char *functions_text = NULL;
	kbox_error_t err = {0};
	bool started = false, is_new = false, restore = false, have_token = false;
	char token[4097];
	token_undo_t token_undo = {0};
	int status;

	kr_session_config_init(&config);
	kr_session_config_init(&before);
	if (parse_start_options(argc, argv, &a, &status) < 0)
		goto out;
	if (a.rootfs_arg && !(rootfs = rootfs_path(a.rootfs_arg))) {
		status = EXIT_USAGE;
		goto out;
	}
	o->rootfs = rootfs;
	if ((status = cli_functions_for("start", &a.fo, NULL, &functions)) != EXIT_OK)
		goto out;
	if (functions && !(o->functions = functions_text = kr_functions_text(functions))) {
		cli_error("start", "out of memory");
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	o->env = a.env.v;
	o->n_env = a.env.n;
	name = cli_session_name(a.name);
	if (a.reseal) {
		status = reseal(name, o);
		goto out;
	}
	/* a kernelspec that does not exist must not leave an empty session
	 * behind: check the one given (a stored one was checked before) */
	if ((status = cli_check_session("start", name)) != EXIT_OK)
		goto out;
	is_new = session_is_new(name);
	/* (a stored session keeps its backend and image: the environment's
	 * are for new ones) */
	if ((status = cli_session_defaults("start", is_new, &o->backend, &o->image)) != EXIT_OK ||
	    (o->kernel && !(o->backend && strcmp(o->backend, "gateway") == 0) &&
	     (status = check_kspec(o->kernel)) != EXIT_OK))
		goto out;
	if (!(dir = cli_session_dir("start", name, true, &status)))
		goto out;
	if (says_running(dir, name, o))
		goto out;
	/* the session's configuration, and the command line over it; and
	 * what a start that fails puts back (undo_start) */
	o->name = name;
	if (kr_session_config_load(&config, dir, &err) < 0 ||
	    (!is_new && kr_session_config_load(&before, dir, &err) < 0)) {
		cli_error("start", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	if ((status = check_gateway_opts(&a, &config)) != EXIT_OK)
		goto out;
	if (a.ca_arg && !(ca = realpath(a.ca_arg, NULL))) {
		cli_error("start", "invalid --ca-file \"%s\": %s", a.ca_arg, strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	if (ca && (status = check_ca_file(a.ca_arg, ca)) != EXIT_OK)
		goto out;
	o->gateway_ca = ca;
	if (kr_session_config_merge(&config, o, &err) < 0) {
		cli_error("start", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	if ((status = cli_check_docker("start", o, &config)) != EXIT_OK)
		goto out;
	if (strcmp(config.backend, "gateway") == 0 &&
	    (status = gateway_token(&a, token, sizeof token, &have_token)) != EXIT_OK)
		goto out;
	if (config.functions) {
		/* what the kernel can write is never what the host runs */
		char ws[PATH_MAX + 16];
		json_t *doc = kr_functions_doc(config.functions);
		int bad;
		snprintf(ws, sizeof ws, "%s/workspace", dir);
		bad = kr_functions_check_workspace(doc, config.workspace ? config.workspace : ws,
		                                   &err);
		json_decref(doc);
		if (bad < 0) {
			cli_error("start", "session %s: %s", name, err.msg);
			status = EXIT_USAGE;
			goto out;
		}
	}
	/* (kept last: a start that fails puts the one before back) */
	restore = !is_new;
	if (have_token && (status = save_token(dir, token, &token_undo)) != EXIT_OK)
		goto out;
	status = start_session(dir, name, &config, is_new, &started);
out:
	if (dir && (is_new || restore) && status != EXIT_OK && !started)
		undo_start(dir, is_new, &before, &token_undo);
	explicit_bzero(token, sizeof token);
	explicit_bzero(&token_undo, sizeof token_undo);
	kr_session_config_free(&before);
	kr_session_config_free(&config);
	cli_strlist_clear(&a.env);
	json_decref(functions);
	free(functions_text);
	cli_functions_opts_clear(&a.fo);
	free(rootfs);
	free(ca);
	free(dir);
	return status;
}
