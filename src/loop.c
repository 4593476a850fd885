/* src/loop.c — the event loop of kbox/loop.h. */
#include "private.h"
