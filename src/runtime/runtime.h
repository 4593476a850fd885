/* src/runtime/runtime.h — what every file of the runtime includes first:
 * config.h, libkbox's public API (a kbox_error_t is filled with its
 * kbox_error_set and kbox_error_set_sys, a directory checked with its
 * kbox_check_private_dir) and the common module.
 *
 * The runtime uses libkbox's public API only, never src/private.h: so
 * kbox-supervisor links the installed libkbox.so, and kbox(1) the part of
 * it that needs neither libzmq nor libsodium. */
#ifndef KR_RUNTIME_H
#define KR_RUNTIME_H

#include "config.h"
#include <kbox.h>
#include "common/kx.h"

#endif
