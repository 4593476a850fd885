/* kbox.h — libkbox: a Jupyter messaging-protocol client in C.
 *
 * Include this umbrella header; link with `pkg-config --libs libkbox`.
 *
 * Ownership.  Every comment in these headers that hands a pointer across
 * the API uses one of four words:
 *   new       the caller owns what is returned and must release it with the
 *             function named: kbox_X_destroy(&p) for a kbox_X_t, free() for
 *             a string, kbox_strv_free() for a string array, json_decref()
 *             for a json_t (a new reference, in jansson's terms).
 *   borrowed  the pointer belongs to someone else (an object, the library,
 *             the caller) and stays valid while that owner lives, or until
 *             the event named ("until the next kbox_capture_feed").  Never
 *             free it; copy (or json_incref) what must outlive it.  A
 *             "static" string is borrowed for the life of the program.
 *   taken     the function takes ownership of the argument (jansson says
 *             "steals"): the caller must not use or free it afterwards.
 *             For a json_t **P argument it is taken even on failure, and
 *             *P is set to NULL.
 *   copied    the function copies the argument (or what it needs of it);
 *             the caller keeps its own and may free it when the call
 *             returns.
 * An argument of a call that is neither taken nor copied is borrowed for
 * the call only: the library keeps no pointer to it after returning. */
#ifndef KBOX_H
#define KBOX_H

#include <kbox/error.h>
#include <kbox/wire.h>
#include <kbox/conn.h>
#include <kbox/kspec.h>
#include <kbox/loop.h>
#include <kbox/client.h>
#include <kbox/kernel.h>
#include <kbox/capture.h>
#include <kbox/render.h>
#include <kbox/functions.h>
#include <kbox/relay.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Initialise libsodium and tell czmq not to install SIGINT/SIGTERM handlers.
 * Every constructor calls it; call it yourself first from a multi-threaded
 * program.  0, or -1 if libsodium cannot start. */
int kbox_init(void);

/* 0 if DIR is private, as kbox_conn_save and kbox_kernel_start
 * (kbox_kernel_opts_t.runtime_dir) need it to be: a directory of ours, not
 * a link, closed to group and others (0700).  Else -1 with ERR: "directory
 * D: strerror" when it cannot be looked at, or what is wrong and the chmod
 * that fixes it. */
int kbox_check_private_dir(const char *dir, kbox_error_t *err);

/* The library version, e.g. "0.1.0".  Static (borrowed). */
const char *kbox_version(void);

#ifdef __cplusplus
}
#endif
#endif
