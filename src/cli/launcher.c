/* src/cli/launcher.c — the kbox program itself: small on purpose.
 *
 * It links only libc and jansson.  `kbox _supervise` (a session's
 * supervisor, which kbox start re-executes this program as) runs here, so
 * a supervisor that lives for hours costs little memory.  Every other
 * command is in the kbox-cli module (kbox_cli_main), loaded on demand with
 * the libraries it needs (libzmq, czmq, libsodium). */
#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <kbox/session.h>

#define MODULE "kbox-cli.so"

/* The module: beside the program in a build tree (.libs/), where it was
 * installed, or in ../lib/kbox/ relative to the program (a moved prefix). */
static void *load_module(char *tried, size_t size)
{
	char exe[PATH_MAX], path[PATH_MAX + 64], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	size_t used = 0;

	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')))
			*slash = '\0';
	} else
		exe[0] = '\0';
	tried[0] = '\0';
	for (int i = 0; i < 3; i++) {
		void *h;
		if (i == 0 && exe[0])
			snprintf(path, sizeof path, "%s/.libs/%s", exe, MODULE);
		else if (i == 1)
			snprintf(path, sizeof path, "%s/%s", KBOX_PKGLIBDIR, MODULE);
		else if (i == 2 && exe[0])
			snprintf(path, sizeof path, "%s/../lib/kbox/%s", exe, MODULE);
		else
			continue;
		if (access(path, R_OK) < 0) {
			used += (size_t)snprintf(tried + used, used < size ? size - used : 0, "%s%s",
			                         used ? ", " : "", path);
			continue;
		}
		if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
			return h;
		snprintf(tried, size, "%s", dlerror());
		return NULL;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char tried[2048];
	void *mod;
	int (*cli_main)(int, char **);

	signal(SIGPIPE, SIG_IGN);
	if (argc >= 2 && strcmp(argv[1], "_supervise") == 0) {
		if (argc != 4) {
			fprintf(stderr, "kbox _supervise: usage: kbox _supervise SESSION_DIR READY_FD "
			                "(internal: kbox start runs it)\n");
			return 2;
		}
		return kbox_supervisor_run(argv[2], atoi(argv[3]), "/proc/self/exe") == 0 ? 0 : 5;
	}
	if (!(mod = load_module(tried, sizeof tried))) {
		fprintf(stderr, "kbox: cannot load its module %s (%s)\n", MODULE, tried);
		return 5;
	}
	*(void **)&cli_main = dlsym(mod, "kbox_cli_main");
	if (!cli_main) {
		fprintf(stderr, "kbox: %s has no kbox_cli_main: %s\n", MODULE, dlerror());
		return 5;
	}
	return cli_main(argc, argv);
}
