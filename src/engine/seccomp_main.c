/* src/engine/seccomp_main.c — kbox-seccomp: the init of a docker
 * backend's container, under kbox's seccomp filter.  The docker backend
 * binds it read-only into each container and makes it the container's
 * entrypoint, as pid 1 (the engine's own init is not used): it installs
 * the filter a bubblewrap sandbox has (src/runtime/bwrap.c) on top of the
 * engine's profile (seccomp filters stack; the strictest answer wins),
 * then runs the program as its child, reaps every process left to it,
 * passes the signals the engine sends (an interrupt, a stop) on to the
 * child, and exits as the child did.
 *
 *     KBOX_SECCOMP=HEX kbox-seccomp PROGRAM [ARG...]
 *
 * HEX is the filter as the supervisor made it (libseccomp's export: an
 * array of struct sock_filter in this machine's byte order), two hex digits
 * a byte.  The variable is dropped before PROGRAM runs.  Without a filter
 * that installs, PROGRAM never runs: exit 127, one line on standard error.
 *
 * Every process of the container is under the filter, this one too: an
 * init outside it, of the kernel's uid, could have its memory written
 * (/proc/1/mem) and run what the filter refuses.  The values of
 * KBOX_SECCOMP and KBOX_CONNECTION (the kernel's key) are wiped from this
 * process's memory once the child has its copy, so /proc/1/environ shows
 * neither.
 *
 * It runs inside containers of images kbox did not build (their C library
 * may be another, or none), so it is linked statically and uses nothing
 * of the C library's but system calls, getenv, execvp and stdio. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define VAR "KBOX_SECCOMP"

static int fail(const char *what, const char *why)
{
	fprintf(stderr, "kbox-seccomp: %s: %s\n", what, why);
	return 127;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Overwrite the value of NAME in this process's environment block. */
static void wipe(const char *name)
{
	char *v = getenv(name);
	if (v)
		memset(v, 0, strlen(v));
}

/* Reap until CHILD has ended: its status as an exit status (128 + N when
 * killed by signal N), passing on the signals SET holds (blocked). */
static int supervise(pid_t child, const sigset_t *set)
{
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(set, &si), st;
		pid_t p;
		if (sig < 0)
			continue; /* (EINTR) */
		if (sig != SIGCHLD) {
			kill(child, sig);
			continue;
		}
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			if (p == child)
				return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}

int main(int argc, char **argv)
{
	static struct sock_filter insns[BPF_MAXINSNS];
	static const int passed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
	unsigned char *bytes = (unsigned char *)insns;
	const char *hex = getenv(VAR);
	sigset_t set, old;
	size_t len, n;
	pid_t child;

	if (argc < 2)
		return fail("usage", "KBOX_SECCOMP=HEX kbox-seccomp PROGRAM [ARG...]");
	if (!hex || !*hex)
		return fail(VAR, "not set: no filter to install");
	len = strlen(hex);
	if (len % (2 * sizeof *insns) || len / 2 > sizeof insns)
		return fail(VAR, "not a filter (a whole number of instructions, at most 4096)");
	for (n = 0; n < len / 2; n++) {
		int hi = hex_digit(hex[2 * n]), lo = hex_digit(hex[2 * n + 1]);
		if (hi < 0 || lo < 0)
			return fail(VAR, "not a filter (two lowercase hex digits a byte)");
		bytes[n] = (unsigned char)(hi << 4 | lo);
	}

	struct sock_fprog prog = {.len = (unsigned short)(n / sizeof *insns), .filter = insns};
	/* the engine set no_new_privs already (no-new-privileges); without
	 * it, an unprivileged process cannot install a filter */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail("no_new_privs", strerror(errno));
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return fail("installing the filter", strerror(errno));
	wipe(VAR);
	if (unsetenv(VAR) < 0)
		return fail(VAR, strerror(errno));

	/* the signals to pass on wait in sigwaitinfo (blocked before the
	 * fork: none is lost to the default action meanwhile) */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < sizeof passed / sizeof *passed; i++)
		sigaddset(&set, passed[i]);
	if (sigprocmask(SIG_BLOCK, &set, &old) < 0)
		return fail("sigprocmask", strerror(errno));
	if ((child = fork()) < 0)
		return fail("fork", strerror(errno));
	if (child == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[1], argv + 1);
		_exit(fail(argv[1], strerror(errno)));
	}
	wipe("KBOX_CONNECTION");
	return supervise(child, &set);
}
