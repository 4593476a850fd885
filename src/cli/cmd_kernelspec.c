/* src/cli/cmd_kernelspec.c — kbox kernelspec install: a kernelspec for
 * Jupyter front ends whose command is kbox kernel (kbox-kernel(1)), as
 * jupyter_client reads one: DIR/kernels/NAME/kernel.json with argv,
 * display_name, language, interrupt_mode and metadata, and the logos of
 * the kernelspec it runs in the sandbox.
 *
 * DIR: --user's (JUPYTER_DATA_DIR, else XDG_DATA_HOME/jupyter, else
 * ~/.local/share/jupyter, as Jupyter's own user directory), --prefix
 * P's (P/share/jupyter), else kbox's prefix's (where make install puts
 * kbox-python3).  The options after -- are kbox kernel's, checked here as
 * kbox kernel will read them. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Make DIR and the directories above it (0755). 0, or -1 with errno. */
static int make_dirs(const char *dir)
{
	char buf[PATH_MAX];
	if (strlen(dir) >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, dir, strlen(dir) + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* The data directory of Jupyter that the kernelspec goes in, into BUF. */
static void data_dir(bool user, const char *prefix, char *buf, size_t size)
{
	const char *e;
	if (prefix)
		snprintf(buf, size, "%s/share/jupyter", prefix);
	else if (!user)
		snprintf(buf, size, "%s/share/jupyter", KBOX_PREFIX);
	else if ((e = getenv("JUPYTER_DATA_DIR")) && *e)
		snprintf(buf, size, "%s", e);
	else if ((e = getenv("XDG_DATA_HOME")) && *e)
		snprintf(buf, size, "%s/jupyter", e);
	else
		snprintf(buf, size, "%s/.local/share/jupyter", (e = getenv("HOME")) ? e : "");
}

/* Whether NAME is a kernelspec's name as Jupyter takes one: letters,
 * digits, '.', '_' and '-', at most 64. */
static bool name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 64 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return false;
	return true;
}

/* Copy the file NAME of the directory FROM into TO, when FROM has it. */
static void copy_logo(const char *from, const char *to, const char *name)
{
	char src[PATH_MAX + 64], buf[1 << 16];
	ssize_t n;
	int in, out;
	size_t len = 0;
	char *data = NULL;
	snprintf(src, sizeof src, "%s/%s", from, name);
	if ((in = kx_open_file(AT_FDCWD, src, O_RDONLY, 0)) < 0)
		return;
	while ((n = read(in, buf, sizeof buf)) > 0 && len + (size_t)n <= (1 << 20)) {
		char *d = realloc(data, len + (size_t)n);
		if (!d)
			break;
		data = d;
		memcpy(data + len, buf, (size_t)n);
		len += (size_t)n;
	}
	close(in);
	if (n == 0 && (out = open(to, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		if (kx_write_atomic(out, name, data, len, 0644, 0) < 0)
			cli_error("kernelspec", "warning: %s/%s: %s", to, name, strerror(errno));
		close(out);
	}
	free(data);
}

static int install(bool user, const char *prefix, const char *name, const char *display,
                   const char *backend, const char *mode, int kargc, char **kargv)
{
	kbox_error_t err = {0};
	char dir[PATH_MAX], spec_dir[PATH_MAX + 80], self[PATH_MAX], dname[256], auto_name[96];
	const char *inner = NULL;
	kbox_kspec_t *spec;
	json_t *argv, *doc, *old;
	char *text;
	int status, fd;

	if ((status = cli_kernel_check_options(kargc, kargv, backend, &inner)) != EXIT_OK)
		return status;
	if (!inner)
		inner = KR_KERNEL_DEFAULT;
	if (!(spec = kbox_kspec_find(inner, &err))) {
		cli_error("kernelspec", "%s", err.msg);
		return EXIT_UNAVAILABLE;
	}
	if (kr_kspec_is_kbox(kbox_kspec_metadata(spec))) {
		cli_error(
		        "kernelspec",
		        "kernelspec %s is one of kbox's own: give -k the kernelspec to run in the "
		        "sandbox, such as " KR_KERNEL_DEFAULT,
		        inner);
		kbox_kspec_destroy(&spec);
		return EXIT_USAGE;
	}
	if (!name) {
		snprintf(auto_name, sizeof auto_name, "kbox-%s%s%s",
		         backend && strcmp(backend, "bwrap") != 0 ? backend : "",
		         backend && strcmp(backend, "bwrap") != 0 ? "-" : "", inner);
		name = auto_name;
	}
	if (!name_ok(name)) {
		cli_error("kernelspec",
		          "invalid --name \"%s\": a kernelspec's name is 1 to 64 letters, digits, "
		          "'.', '_' or '-', not . or ..",
		          name);
		kbox_kspec_destroy(&spec);
		return EXIT_USAGE;
	}
	if (!display) {
		/* "Python 3 (ipykernel)" is "Python 3" here */
		const char *d = kbox_kspec_display_name(spec), *paren = strstr(d, " (");
		int len = paren && d[strlen(d) - 1] == ')' ? (int)(paren - d) : (int)strlen(d);
		const char *how = !backend || strcmp(backend, "bwrap") == 0 ? "kbox sandbox"
		                  : strcmp(backend, "docker") == 0          ? "kbox docker sandbox"
		                                                            : "kbox, unsandboxed";
		snprintf(dname, sizeof dname, "%.*s (%s)", len, d, how);
		display = dname;
	}
	{
		ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
		self[n > 0 ? n : 0] = '\0';
	}
	argv = json_pack("[s, s, s, s]", self, "kernel", "--connection-file", "{connection_file}");
	if (backend) {
		json_array_append_new(argv, json_string("--backend"));
		json_array_append_new(argv, json_string(backend));
	}
	for (int i = 1; i < kargc; i++)
		json_array_append_new(argv, json_string(kargv[i]));
	doc = json_pack("{s:o, s:s, s:s, s:s, s:{s:{s:{s:s, s:s}}}}", "argv", argv, "display_name",
	                display, "language", kbox_kspec_language(spec), "interrupt_mode", mode,
	                "metadata", "kbox", "runs", "kernel", inner, "backend",
	                backend ? backend : KR_BACKEND_DEFAULT);
	data_dir(user, prefix, dir, sizeof dir);
	snprintf(spec_dir, sizeof spec_dir, "%s/kernels/%s", dir, name);
	/* (one of another program's is never replaced) */
	{
		char path[PATH_MAX + 96];
		snprintf(path, sizeof path, "%s/kernel.json", spec_dir);
		old = json_load_file(path, 0, NULL);
		if (old && !kr_kspec_is_kbox(json_object_get(old, "metadata"))) {
			cli_error("kernelspec",
			          "%s holds a kernelspec that is not kbox's: give another --name",
			          spec_dir);
			json_decref(old);
			json_decref(doc);
			kbox_kspec_destroy(&spec);
			return EXIT_USAGE;
		}
		json_decref(old);
	}
	text = json_dumps(doc, JSON_INDENT(1));
	json_decref(doc);
	if (!text || make_dirs(spec_dir) < 0 ||
	    (fd = open(spec_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		cli_error("kernelspec", "cannot make %s: %s", spec_dir,
		          text ? strerror(errno) : "out of memory");
		free(text);
		kbox_kspec_destroy(&spec);
		return EXIT_UNAVAILABLE;
	}
	if (kx_write_atomic(fd, "kernel.json", text, strlen(text), 0644, 0) < 0) {
		cli_error("kernelspec", "cannot write %s/kernel.json: %s", spec_dir,
		          strerror(errno));
		status = EXIT_UNAVAILABLE;
	} else {
		const char *logos[] = {"logo-32x32.png", "logo-64x64.png", "logo-svg.svg"};
		for (size_t i = 0; i < sizeof logos / sizeof *logos; i++)
			copy_logo(kbox_kspec_resource_dir(spec), spec_dir, logos[i]);
		printf("kernelspec %s installed in %s (\"%s\": %s %s)\n", name, spec_dir, display,
		       inner,
		       backend && strcmp(backend, "none") == 0 ? "unsandboxed, through kbox"
		                                               : "in kbox's sandbox");
		status = EXIT_OK;
	}
	close(fd);
	free(text);
	kbox_kspec_destroy(&spec);
	return status;
}

int cmd_kernelspec(int argc, char **argv)
{
	const char *prefix = NULL, *name = NULL, *display = NULL, *backend = NULL, *mode = "signal";
	bool user = false;
	int status, dd = argc, n;
	cli_option_t opts[] = {
	        CLI_OPT_FLAG(0, "user", &user,
	                     "install in your own Jupyter data directory (default: kbox's "
	                     "prefix's, for everyone)"),
	        CLI_OPT_STRING(0, "prefix", "DIR", &prefix,
	                       "install in DIR/share/jupyter (a virtualenv's, a conda "
	                       "environment's)"),
	        CLI_OPT_STRING(0, "name", "NAME", &name,
	                       "the kernelspec's name (default: kbox-SPEC, or kbox-BACKEND-SPEC)"),
	        CLI_OPT_STRING(0, "display-name", "TEXT", &display,
	                       "what front ends show (default: SPEC's, with \"(kbox sandbox)\")"),
	        CLI_OPT_STRING('b', "backend", "B", &backend,
	                       "the backend the kernel runs in: bwrap, docker or none (default: "
	                       "kbox kernel's)"),
	        CLI_OPT_STRING(0, "interrupt-mode", "signal|message", &mode,
	                       "how front ends interrupt the kernel: SIGINT to kbox kernel, or an "
	                       "interrupt_request on control (default: signal)"),
	        CLI_OPT_END};

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			dd = i;
			break;
		}
	n = cli_parse_options("kernelspec", opts, dd, argv, &status);
	if (n < 0)
		return status;
	if (n != 1 || strcmp(argv[0], "install") != 0) {
		cli_error(
		        "kernelspec",
		        n == 0 ? "say what to do: kbox kernelspec install [OPTIONS] [-- KERNEL-OPTIONS]"
		               : "unknown action \"%s\": the one action is install",
		        n ? argv[0] : "");
		return EXIT_USAGE;
	}
	if (prefix && !*prefix) {
		cli_error("kernelspec", "--prefix is empty: name a directory");
		return EXIT_USAGE;
	}
	if (user && prefix) {
		cli_error("kernelspec", "--user and --prefix name two places: give one");
		return EXIT_USAGE;
	}
	if (backend && !kr_backend_find(backend)) {
		cli_error("kernelspec", "invalid --backend \"%s\": expected bwrap, docker or none",
		          backend);
		return EXIT_USAGE;
	}
	if (strcmp(mode, "signal") != 0 && strcmp(mode, "message") != 0) {
		cli_error("kernelspec",
		          "invalid --interrupt-mode \"%s\": expected signal or message", mode);
		return EXIT_USAGE;
	}
	/* kbox kernel's options, as its own argv: "kernel" first */
	if (dd < argc)
		argv[dd] = "kernel";
	return install(user, prefix, name, display, backend, mode, dd < argc ? argc - dd : 1,
	               dd < argc ? argv + dd : (char *[]){"kernel", NULL});
}
