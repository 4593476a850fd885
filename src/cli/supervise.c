/* src/cli/supervise.c — kbox-supervisor, a session's supervisor: small on
 * purpose.
 *
 * `kbox start` runs it (src/cli/session.c) from $(pkglibexecdir).  It links
 * only libc and jansson, so a supervisor that lives for hours costs little
 * memory; what needs libzmq (starting a kernel, waiting for it to answer,
 * shutting it down) it runs as short-lived `kbox _CMD` helpers, through the
 * kbox program its starter passed it as an open descriptor.  That keeps the
 * very program that started the session even if kbox is replaced on disk
 * meanwhile, as /proc/self/exe would. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <kbox/session.h>

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
	char exe[64];
	struct stat st;
	int ready_fd, exe_fd;

	signal(SIGPIPE, SIG_IGN);
	if (argc != 4 || (ready_fd = fd_arg(argv[2])) < 0 || (exe_fd = fd_arg(argv[3])) < 0) {
		fprintf(stderr, "kbox-supervisor: usage: kbox-supervisor SESSION_DIR READY_FD KBOX_FD "
		                "(internal: kbox start runs it)\n");
		return 2;
	}
	if (fstat(exe_fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "kbox-supervisor: descriptor %d is not the kbox program (%s)\n", exe_fd,
		        fcntl(exe_fd, F_GETFD) < 0 ? strerror(EBADF) : "not a regular file");
		return 2;
	}
	/* the helpers get it by path, /proc/self/fd/N, which the kernel resolves
	 * before it closes descriptors marked close-on-exec */
	fcntl(exe_fd, F_SETFD, FD_CLOEXEC);
	snprintf(exe, sizeof exe, "/proc/self/fd/%d", exe_fd);
	return kbox_supervisor_run(argv[1], ready_fd, exe) == 0 ? 0 : 5;
}
