/* src/runtime/supervisor_main.c — kbox-supervisor, a session's supervisor
 * program (its command line is in runtime/supervisor.h).  kbox start runs
 * it; people do not. */
#include "config.h"
#include "runtime/backend.h"
#include "runtime/supervisor.h"
#include "common/kx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <kbox.h>

/* A descriptor number given on the command line, or -1. */
static int fd_arg(const char *s)
{
	char *end;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > 1024)
		return -1;
	return (int)v;
}

int main(int argc, char **argv)
{
	struct stat st;
	int ready_fd;

	/* before anything is opened: no socket may become its stdout */
	if (kx_std_fds_open() < 0) {
		fprintf(stderr, "%s: cannot open /dev/null: %s\n", KR_SUPERVISOR_PROGRAM,
		        strerror(errno));
		return 5;
	}
	signal(SIGPIPE, SIG_IGN);
	/* kbox doctor's check that the program runs here: libkbox.so loads */
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("%s %s (libkbox %s)\n", KR_SUPERVISOR_PROGRAM, PACKAGE_VERSION,
		       kbox_version());
		return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 5;
	}
	if ((argc != 3 && (argc != 4 || strcmp(argv[3], "--new") != 0)) ||
	    (ready_fd = fd_arg(argv[2])) < 0) {
		fprintf(stderr,
		        "%s: usage: %s SESSION_DIR READY_FD [--new] (kbox start runs it), or %s "
		        "--version\n",
		        KR_SUPERVISOR_PROGRAM, KR_SUPERVISOR_PROGRAM, KR_SUPERVISOR_PROGRAM);
		return 2;
	}
	/* the kernels' keys are in its memory: no core file of it (nor of
	 * what it starts).  It stays dumpable: a process of the user's that
	 * could read its memory could as well ask it, on its control socket,
	 * to run code in its kernels; a sandbox sees no process of the host */
	setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
	if (fstat(ready_fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "%s: descriptor %d is not a socket\n", KR_SUPERVISOR_PROGRAM,
		        ready_fd);
		return 2;
	}
	if (kbox_init() < 0) {
		fprintf(stderr, "%s: libsodium could not be initialised\n", KR_SUPERVISOR_PROGRAM);
		return 5;
	}
	return kr_supervisor_run(argv[1], ready_fd, argc == 4 ? KR_SUP_NEW_NOTICE : 0) == 0 ? 0 : 5;
}
