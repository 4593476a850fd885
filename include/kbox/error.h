/* kbox/error.h — errors: a code and a message that says what failed and why.
 *
 * The library never prints and never exits.  Every function that can fail
 * takes an optional kbox_error_t * (may be NULL) and fills it on failure. */
#ifndef KBOX_ERROR_H
#define KBOX_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	KBOX_OK = 0,
	KBOX_E_SYSTEM,      /* a system call failed (errno is in the message) */
	KBOX_E_INVALID,     /* bad argument or malformed input (file, JSON) */
	KBOX_E_PROTOCOL,    /* a message that breaks the wire protocol */
	KBOX_E_AUTH,        /* bad, missing or replayed signature */
	KBOX_E_TIMEOUT,     /* the peer did not answer in time */
	KBOX_E_DEAD,        /* the kernel died or stopped answering heartbeats */
	KBOX_E_NOTFOUND,    /* no such kernelspec, file or entry */
	KBOX_E_UNSUPPORTED, /* e.g. a signature scheme libsodium lacks */
	KBOX_E_NOMEM,
} kbox_errcode_t;

#define KBOX_ERROR_MSG_MAX 512

/* Caller-owned; zero-initialise or pass NULL when the details do not matter. */
typedef struct {
	kbox_errcode_t code;
	char msg[KBOX_ERROR_MSG_MAX];
} kbox_error_t;

#if defined(__GNUC__) || defined(__clang__)
#define KBOX_ERROR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KBOX_ERROR_PRINTF(a, b)
#endif

/* A short constant description of CODE ("timed out"): static (borrowed),
 * never NULL. */
const char *kbox_strerror(kbox_errcode_t code);

/* Fill ERR (may be NULL) with CODE and a printf-formatted message, cut
 * with "..." when it does not fit KBOX_ERROR_MSG_MAX: what a hook that
 * takes a kbox_error_t (kbox_client_hooks_t.interrupt) says on failure.
 * Always returns -1, so that `return kbox_error_set(err, ...);` fails. */
int kbox_error_set(kbox_error_t *err, kbox_errcode_t code, const char *fmt, ...)
        KBOX_ERROR_PRINTF(3, 4);

/* The same for a failed system call: code KBOX_E_SYSTEM (KBOX_E_NOMEM for
 * ENOMEM) and ": strerror(errno)" after the message.  errno is read on
 * entry and left as it was.  Always returns -1. */
int kbox_error_set_sys(kbox_error_t *err, const char *fmt, ...) KBOX_ERROR_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif
#endif
