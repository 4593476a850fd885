/* kbox/functions.h — host functions: Python functions in the kernel whose
 * body runs in the program that drives it.
 *
 * An embedder describes each function as a tool is described to a model
 * (a name, a description, JSON Schemas of its parameters and of what it
 * returns) and gives a callback.  kbox_functions_kernel_code is the
 * Python that defines them in the kernel (run it silently once per
 * kernel, before the code that calls them); an execution given the set
 * (kbox_exec_opts_t.functions) answers their calls.
 *
 * A call travels over the Jupyter protocol itself, so it works over any
 * transport that carries the stdin channel: the kernel sends an
 * input_request whose prompt starts with the set's marker (a random token
 * per set), holding one or more calls; the client checks each call's
 * arguments against the function's schema, runs the valid ones through
 * their callbacks (at most MAX_CONCURRENT at a time, at most MAX_CALLS in
 * an execution), and answers with one input_reply once every call of the
 * request has its answer.  An input_request without the marker is the
 * code's own input() and is answered as before (the execution's input
 * lines, or EOF); input() stays refused when the execution allows no
 * stdin, since the calls do not need allow_stdin.
 *
 * In the kernel (a Python kernel, ipykernel), each function has the
 * signature its schema gives (required parameters first, in the order of
 * "properties", then the optional ones, with their "default" or None) and
 * its description as docstring, in the user's namespace and in the module
 * kbox_functions.  Called from synchronous code it returns the result;
 * called from code that awaits (a statement with await at the top level
 * of a cell, an async def) it returns an awaitable, and the calls of
 * several awaitables gathered together go to the host as one request.
 * Errors are exceptions of kbox_functions: ArgumentError (also a
 * TypeError: the arguments broke the schema, the message says which rule),
 * FunctionError (the function's own error text), FunctionTimeout (also a
 * TimeoutError) and CallBudgetExceeded, all subclasses of FunctionError. */
#ifndef KBOX_FUNCTIONS_H
#define KBOX_FUNCTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <kbox/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KBOX_FUNCTIONS_MAX 256            /* functions in one set */
#define KBOX_CALLS_DEFAULT 200            /* calls in one execution, by default */
#define KBOX_CALLS_CONCURRENT_DEFAULT 8   /* calls running at once, by default */
#define KBOX_CALL_ARGS_MAX (1u << 20)     /* bytes of one call's arguments, as JSON */
#define KBOX_CALL_RESULT_MAX (16u << 20)  /* bytes of one call's result, as JSON */
#define KBOX_CALL_REQUEST_MAX (32u << 20) /* bytes of one request of calls */
#define KBOX_CALL_BATCH_MAX 1024          /* calls in one request */
#define KBOX_CALL_ERROR_MAX 4096          /* bytes of an error's text */
#define KBOX_CALLS_RECORDED_MAX 1000      /* calls kept in kbox_exec_calls */
/* The most memory decoding a request or a result may take (its text's
 * kx_json_cost): a small text of many tiny values takes ~60 times its size. */
#define KBOX_CALL_DECODE_MAX (128u << 20)

typedef struct kbox_functions kbox_functions_t;
typedef struct kbox_call kbox_call_t;

/* Run CALL (its arguments are valid): answer it with kbox_call_return or
 * kbox_call_fail, now or later from the loop, once.  ARG is the one given
 * to kbox_functions_add. */
typedef void(kbox_function_cb)(void *arg, kbox_call_t *call);
/* CALL will not be answered: its execution ended (the kernel was
 * interrupted, died, or the execution was given up).  Stop its work; CALL
 * is freed when this returns.  May be NULL when the callback always
 * answers before it returns. */
typedef void(kbox_call_cancel_cb)(void *arg, kbox_call_t *call);
/* A call ended: RECORD (borrowed for the call) is its entry of the
 * execution's list (kbox_exec_calls). */
typedef void(kbox_call_observer_cb)(void *arg, const json_t *record);

/* A new empty set, with its own marker.  New: kbox_functions_destroy(&p);
 * NULL with ERR. */
kbox_functions_t *kbox_functions_new(kbox_error_t *err);
/* Free SELF: not while an execution that was given it runs.  Sets
 * *SELF_P to NULL.  Accepts NULL. */
void kbox_functions_destroy(kbox_functions_t **self_p);

/* Add the function DEF describes (copied):
 *   {"name": "get_order",                 a Python identifier, not a keyword,
 *                                         not starting with "_"
 *    "description": "Return one order.",  optional: the docstring
 *    "parameters": {JSON Schema},         optional: {"type": "object", ...};
 *                                         its property names are identifiers
 *    "returns": {JSON Schema}}            optional: the result is checked
 * Other members are left for the caller.  RUN(ARG, call) runs its calls;
 * CANCEL(ARG, call) is told of those that will not be answered.  0, or -1
 * with ERR saying what is wrong with DEF (a name used twice, a schema
 * that cannot be used, ...). */
int kbox_functions_add(kbox_functions_t *self, const json_t *def, kbox_function_cb *run,
                       kbox_call_cancel_cb *cancel, void *arg, kbox_error_t *err);
size_t kbox_functions_count(const kbox_functions_t *self);
/* The Ith function's definition: name, description, parameters, returns
 * (borrowed), or NULL past the end. */
const json_t *kbox_functions_def(const kbox_functions_t *self, size_t i);
/* At most MAX_CALLS calls in one execution (0: KBOX_CALLS_DEFAULT): past
 * it, a call fails with CallBudgetExceeded; at most MAX_CONCURRENT (0:
 * KBOX_CALLS_CONCURRENT_DEFAULT) running at once: the others wait. */
void kbox_functions_set_limits(kbox_functions_t *self, size_t max_calls, size_t max_concurrent);
void kbox_functions_limits(const kbox_functions_t *self, size_t *max_calls, size_t *max_concurrent);
/* Tell OBSERVER(ARG, record) of every call that ends. */
void kbox_functions_set_observer(kbox_functions_t *self, kbox_call_observer_cb *observer,
                                 void *arg);

/* The Python a model reads: a stub of each function (async def, its
 * signature with type hints from the schemas, its docstring with the
 * parameters' descriptions).  New (free), or NULL when out of memory. */
char *kbox_functions_stubs(const kbox_functions_t *self);
/* The Python that defines the functions in a kernel (ipykernel): it
 * leaves no name in the user's namespace but the functions.  New (free),
 * or NULL when out of memory. */
char *kbox_functions_kernel_code(const kbox_functions_t *self);

/* ---- a call, in its callback ---- */

/* The function's name (borrowed). */
const char *kbox_call_name(const kbox_call_t *call);
/* Its arguments, valid against its schema: an object (borrowed). */
const json_t *kbox_call_args(const kbox_call_t *call);
/* Answer CALL with VALUE (taken): checked against the function's
 * "returns" schema, when it has one (a value that breaks it fails the
 * call instead, as the function's error), and bounded by
 * KBOX_CALL_RESULT_MAX.  CALL is not to be used after. */
void kbox_call_return(kbox_call_t *call, json_t *value);
/* Fail CALL with the text FMT makes (the function's error, cut at
 * KBOX_CALL_ERROR_MAX; UTF-8 repaired); TIMEOUT says it ran out of time
 * (FunctionTimeout in the kernel).  CALL is not to be used after. */
void kbox_call_fail(kbox_call_t *call, bool timeout, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
