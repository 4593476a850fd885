/* src/cli/type_check.c — --type-check: the code's calls of the host
 * functions (kbox-functions(5)) checked with mypy against the functions'
 * stubs before the code runs.
 *
 * mypy (Debian's python3-mypy) runs on the host, in /usr/bin/python3 -I,
 * as a process of its own with a clean environment: a driver (below)
 * writes the stubs (made plain functions returning Any: a call's result
 * is not checked, only its arguments) and the cell (inside an async def,
 * so that a top-level await is code mypy reads; the names earlier cells
 * defined are unknown to it, so name-defined is not reported) into a new
 * temporary directory, with an empty configuration file (so that no
 * mypy.ini, setup.cfg or plugin of anyone's is read), and reports the
 * errors of the cell that name a host function.  mypy runs in that
 * directory, which holds nothing else: the modules the code imports are
 * looked for nowhere but there (no site packages, no MYPYPATH), and not
 * followed. */
#include "config.h"
#include "cli.h"
#include "runtime/functions.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MYPY_PYTHON "/usr/bin/python3"
#define TYPE_CHECK_MS 120000
#define TYPE_CHECK_CPU_S 60               /* mypy's CPU time */
#define TYPE_CHECK_MEMORY (2048ULL << 20) /* its address space */
#define TYPE_CHECK_CODE_MAX (256 * 1024)  /* code checked; longer runs unchecked */
#define REPORT_MAX (1 << 20)

/* Reads {"stubs", "code", "names", "cache"} on stdin; writes {"errors":
 * [{"line", "message"}]} or {"skipped": WHY} on stdout. */
static const char driver[] =
        "import json, os, re, shutil, sys, tempfile\n"
        "try:\n"
        "    from mypy import api\n"
        "except ImportError:\n"
        "    print(json.dumps({'missing': 1})); sys.exit(0)\n"
        "d = json.load(sys.stdin)\n"
        "lines = []\n"
        "for l in d['stubs'].splitlines():\n"
        "    m = re.match(r'async def (.*)\\) -> .*:$', l)\n"
        "    lines.append('def %s) -> Any:' % m.group(1) if m else l)\n"
        "head = '\\n'.join(lines) + '\\n\\n\\nasync def __kbox_cell__() -> None:\\n'\n"
        "off = head.count('\\n')\n"
        "body = ''.join('    ' + l for l in (d['code'] + '\\n').splitlines(True))\n"
        "t = tempfile.mkdtemp(prefix='kbox-mypy-')\n"
        "os.chdir(t)\n"
        "try:\n"
        "    cell = os.path.join(t, 'cell.py')\n"
        "    with open(cell, 'w') as f:\n"
        "        f.write(head + body + '    pass\\n')\n"
        "    with open(os.path.join(t, 'mypy.ini'), 'w') as f:\n"
        "        f.write('[mypy]\\n')\n"
        "    out, err, rc = api.run(['--config-file', os.path.join(t, 'mypy.ini'),\n"
        "        '--cache-dir', d['cache'], '--ignore-missing-imports',\n"
        "        '--follow-imports=skip', '--no-error-summary', '--show-error-codes',\n"
        "        '--disable-error-code=name-defined', '--no-color-output',\n"
        "        '--no-site-packages', cell])\n"
        "finally:\n"
        "    shutil.rmtree(t, ignore_errors=True)\n"
        "errs = []\n"
        "names = set(d['names'])\n"
        "for l in out.splitlines():\n"
        "    m = re.match(r'.*?cell\\.py:(\\d+): (error|note): (.*?)(  \\[([a-z-]+)\\])?$', l)\n"
        "    if not m:\n"
        "        continue\n"
        "    if m.group(5) == 'syntax':\n"
        "        print(json.dumps({'skipped': 'mypy cannot read it'})); sys.exit(0)\n"
        "    line = int(m.group(1)) - off\n"
        "    quoted = set(re.findall(r'\"([A-Za-z_][A-Za-z0-9_]*)\"', m.group(3)))\n"
        "    if m.group(2) == 'error' and line > 0 and quoted & names:\n"
        "        errs.append({'line': line, 'message': m.group(3)})\n"
        "print(json.dumps({'errors': errs}))\n";

/* A memfd holding TEXT, at its start.  -1 on failure. */
static int text_fd(const char *text)
{
	int fd = memfd_create("kbox-type-check", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (kx_write_all(fd, text, strlen(text)) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Run the driver on INPUT: its output (new), or NULL after one line. */
static char *run_driver(const char *cmd, const char *input)
{
	char *argv[] = {(char *)MYPY_PYTHON, (char *)"-I", (char *)"-c", (char *)driver, NULL};
	char *env[] = {(char *)"PATH=/usr/bin:/bin", (char *)"LANG=C.UTF-8", NULL};
	int in = text_fd(input), out[2] = {-1, -1}, st = 0;
	long long deadline = kx_now_ms() + TYPE_CHECK_MS;
	kx_buf_t b = KX_BUF_INIT;
	pid_t pid = -1, parent = getpid();

	if (in < 0 || pipe2(out, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		cli_error(cmd, "--type-check: cannot run mypy: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		kx_child_t c = {
		        .cwd = "/", .errfd = -1, .out_fd = out[1], .in_fd = in, .parent = parent};
		/* mypy's time and memory, bounded; the CPU given to others first */
		struct rlimit cpu = {TYPE_CHECK_CPU_S, TYPE_CHECK_CPU_S},
		              as = {TYPE_CHECK_MEMORY, TYPE_CHECK_MEMORY};
		setrlimit(RLIMIT_CPU, &cpu);
		setrlimit(RLIMIT_AS, &as);
		if (nice(10) < 0) {
			/* (as it was) */
		}
		kx_child_exec(MYPY_PYTHON, argv, env, &c);
	}
	close(out[1]);
	out[1] = -1;
	for (;;) {
		struct pollfd p = {.fd = out[0], .events = POLLIN};
		char buf[65536];
		long long left = deadline - kx_now_ms();
		ssize_t n;
		if (left <= 0) {
			cli_error(cmd, "--type-check: mypy did not finish within %d s",
			          TYPE_CHECK_MS / 1000);
			kill(pid, SIGKILL);
			goto fail;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			continue;
		if ((n = read(out[0], buf, sizeof buf)) < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		if (b.len + (size_t)n > REPORT_MAX) {
			cli_error(cmd, "--type-check: mypy said more than %d bytes", REPORT_MAX);
			kill(pid, SIGKILL);
			goto fail;
		}
		kx_buf_append(&b, buf, (size_t)n);
	}
	close(out[0]);
	close(in);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		cli_error(cmd, "--type-check: %s -m mypy failed (%s %d)", MYPY_PYTHON,
		          WIFEXITED(st) ? "exit status" : "signal",
		          WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		kx_buf_reset(&b);
		return NULL;
	}
	return kx_buf_take(&b, NULL);
fail:
	if (pid > 0)
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	for (int i = 0; i < 2; i++)
		if (out[i] >= 0)
			close(out[i]);
	if (in >= 0)
		close(in);
	kx_buf_reset(&b);
	return NULL;
}

int cli_type_check(const char *cmd, const json_t *doc, const char *code, const char *cache,
                   char **report)
{
	char *stubs = kr_functions_stubs(doc), *in = NULL, *out;
	json_t *names = json_array(), *fn, *res, *errs;
	size_t i;
	int status = EXIT_OK;

	*report = NULL;
	if (strlen(code) > TYPE_CHECK_CODE_MAX) {
		/* mypy's time grows with it: such code runs unchecked, the
		 * functions check its arguments all the same */
		free(stubs);
		return EXIT_OK;
	}
	if (!stubs) {
		json_decref(names);
		cli_error(cmd,
		          "--type-check checks the calls of host functions, and there are none "
		          "(see kbox-functions(5))");
		return EXIT_USAGE;
	}
	json_array_foreach(json_object_get(doc, "functions"), i, fn)
	        json_array_append(names, json_object_get(fn, "name"));
	mkdir(cache, 0700);
	res = json_pack("{s:s, s:s, s:o, s:s}", "stubs", stubs, "code", code, "names", names,
	                "cache", cache);
	in = res ? json_dumps(res, JSON_COMPACT) : NULL;
	json_decref(res);
	free(stubs);
	if (!in) {
		cli_error(cmd, "out of memory");
		return EXIT_UNAVAILABLE;
	}
	out = run_driver(cmd, in);
	free(in);
	if (!out)
		return EXIT_UNAVAILABLE;
	res = json_loads(out, 0, NULL);
	free(out);
	if (json_object_get(res, "missing")) {
		cli_error(cmd, "--type-check needs mypy (Debian's python3-mypy) for %s",
		          MYPY_PYTHON);
		status = EXIT_USAGE;
	} else if ((errs = json_object_get(res, "errors")) && json_array_size(errs)) {
		kx_buf_t b = KX_BUF_INIT;
		json_t *e;
		kx_buf_appendf(
		        &b,
		        "The code was not run: mypy found %zu error%s in its calls of the host "
		        "functions:\n",
		        json_array_size(errs), json_array_size(errs) == 1 ? "" : "s");
		json_array_foreach(errs, i, e)
		        kx_buf_appendf(&b, "line %lld: %s\n",
		                       (long long)json_integer_value(json_object_get(e, "line")),
		                       json_string_value(json_object_get(e, "message")));
		*report = kx_buf_take(&b, NULL);
	} else if (!json_is_object(res)) {
		cli_error(cmd, "--type-check: mypy's driver said nothing readable");
		status = EXIT_UNAVAILABLE;
	}
	json_decref(res);
	return status;
}
