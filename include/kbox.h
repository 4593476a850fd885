/* kbox.h — libkbox: a Jupyter messaging-protocol client in C.
 *
 * Include this umbrella header; link with `pkg-config --libs libkbox`. */
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

#ifdef __cplusplus
extern "C" {
#endif

/* Initialise libsodium and tell czmq not to install SIGINT/SIGTERM handlers.
 * Every constructor calls it; call it yourself first from a multi-threaded
 * program.  0, or -1 if libsodium cannot start. */
int kbox_init(void);

/* The library version, e.g. "0.1.0". */
const char *kbox_version(void);

#ifdef __cplusplus
}
#endif
#endif
