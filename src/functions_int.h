/* src/functions_int.h — what src/functions.c (a set of host functions)
 * and src/calls.c (their calls, during an execution) share. */
#ifndef KBOX_FUNCTIONS_INT_H
#define KBOX_FUNCTIONS_INT_H

#include <kbox/functions.h>

/* The prompt of a request of calls begins with this, then the set's
 * token (32 hex digits) and a space. */
#define KBOX__FN_MARKER "kbox-call/1 "
#define KBOX__FN_NAME_MAX 64

typedef struct {
	const char *name;               /* in DEF */
	json_t *def;                    /* name, description, parameters, returns */
	const json_t *params, *returns; /* in DEF, or NULL */
	kbox_function_cb *run;
	kbox_call_cancel_cb *cancel;
	void *arg;
} kbox__fn_t;

struct kbox_functions {
	kbox__fn_t *fns;
	size_t n, cap;
	char marker[sizeof KBOX__FN_MARKER + 34];
	size_t max_calls, max_concurrent;
	kbox_call_observer_cb *observer;
	void *observer_arg;
};

/* S names a Python identifier that is no keyword (ASCII). */
bool kbox__py_identifier(const char *s);
/* S is a name the kernel's code has already (a builtin, an exception of
 * kbox_functions, IPython's): no function may take it. */
bool kbox__py_name_taken(const char *s);
/* The function NAME of SELF, or NULL. */
const kbox__fn_t *kbox__functions_find(const kbox_functions_t *self, const char *name);

/* The shim's source (src/functions_shim.py, made into functions_shim.h). */
extern const char kbox__functions_shim[];

#endif
