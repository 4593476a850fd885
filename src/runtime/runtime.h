/* src/runtime/runtime.h — what every file of the runtime includes first:
 * config.h, libkbox's public API, the common module, and the runtime's own
 * way to fill a kbox_error_t (error.c).
 *
 * The runtime uses libkbox's public API only, never src/private.h: so
 * kbox-supervisor links the installed libkbox.so, and kbox(1) the part of
 * it that needs neither libzmq nor libsodium. */
#ifndef KR_RUNTIME_H
#define KR_RUNTIME_H

#include "config.h"
#include <kbox.h>
#include "common/kx.h"

/* Fill ERR (may be NULL) with CODE and a formatted message (cut with
 * "..." when it does not fit: kx_msgf).  Always returns -1. */
int kr_err(kbox_error_t *err, kbox_errcode_t code, const char *fmt, ...) KX_PRINTF(3, 4);

/* The same with code KBOX_E_SYSTEM (KBOX_E_NOMEM for ENOMEM), appending
 * ": strerror(errno)"; errno is read on entry and left as it was.
 * Always returns -1. */
int kr_err_sys(kbox_error_t *err, const char *fmt, ...) KX_PRINTF(2, 3);

/* 0 if DIR is private (kx_private_dir), else -1 with ERR: "directory D:
 * why" when it cannot be looked at, else what is wrong and its chmod. */
int kr_check_private_dir(const char *dir, kbox_error_t *err);

#endif
