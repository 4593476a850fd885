/* src/version.c — library version and one-time initialisation. */
#include "private.h"

#include <sodium.h>

const char *kbox_version(void)
{
	return PACKAGE_VERSION;
}

int kbox_init(void)
{
	static int done;
	if (!done) {
		/* czmq must not install its own SIGINT/SIGTERM handlers in our host */
		zsys_handler_set(NULL);
		done = 1;
	}
	return sodium_init() < 0 ? -1 : 0;
}
