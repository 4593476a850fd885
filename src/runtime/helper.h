/* src/runtime/helper.h — a backend's helper process (kbox-engine for
 * docker, kbox-gateway for gateway): the sandbox's process, run with its
 * commands on its standard input and its status lines on a descriptor of
 * their own; what both backends share of talking to it. */
#ifndef KR_RUNTIME_HELPER_H
#define KR_RUNTIME_HELPER_H

#include <stddef.h>
#include "runtime/backend.h"

/* The two ends the backend holds: the helper's standard input (its
 * commands), and its status lines (non-blocking), with what came of a
 * line not yet whole. */
typedef struct {
	int cmd_fd;
	int status_fd;
	char in[8192];
	size_t in_len;
} kr_helper_t;

/* Nothing open yet. */
void kr_helper_init(kr_helper_t *h);

/* Read what the helper has said so far, each whole line (without its
 * newline) to LINE(ARG, TEXT).  At its end of file (or an error) the
 * status descriptor is closed.  A line longer than the buffer is dropped. */
void kr_helper_read(kr_helper_t *h, void (*line)(void *arg, const char *text), void *arg);

/* Write the command CMD (its newline included); a helper that cannot take
 * it is gone: its standard input is closed then. */
void kr_helper_send(kr_helper_t *h, const char *cmd);

/* Close the helper's standard input (its end of file: it cleans up and
 * ends) and give SB's helper up to MS to end (polled), WHAT naming it;
 * then kill it.  sb->ended is true after. */
void kr_helper_end(kr_helper_t *h, kr_sandbox_t *sb, const char *what, int ms);

/* Close what is left open. */
void kr_helper_close(kr_helper_t *h);

#endif
