/* src/cli/lazy.c — libraries the kbox program loads on first use only.
 *
 * When configure links libzmq and czmq statically (STATIC_DEPS), their
 * objects bring references to two libraries that a kbox command never
 * calls: Kerberos GSSAPI (libzmq's ZMQ_GSSAPI security mechanism; Jupyter
 * signs messages with HMAC over the NULL mechanism, and kbox never sets
 * ZMQ_GSSAPI_*) and libsystemd (czmq's zsock_bind asks it about socket
 * activation; kbox binds no ZeroMQ socket).  Linked, they and what they
 * need are seven plus seven shared libraries loaded and relocated at every
 * start: ~3 ms of a ~20 ms kbox exec here (bench/README.md).
 *
 * So the program defines the functions libzmq and czmq call, and each,
 * on its first call, loads the real library with dlopen(3) and forwards
 * to it: the behaviour is the library's own, only its loading is deferred.
 * If the library cannot be loaded, the call fails as the library says a
 * call fails (GSS_S_UNAVAILABLE; -ENOSYS), with the reason on stderr once. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <gssapi/gssapi.h>
#include <systemd/sd-daemon.h>

#define GSSAPI_SONAME "libgssapi_krb5.so.2"
#define SYSTEMD_SONAME "libsystemd.so.0"

typedef struct {
	const char *soname;
	pthread_once_t once;
	void *handle;
} lazy_lib_t;

static lazy_lib_t gssapi = {GSSAPI_SONAME, PTHREAD_ONCE_INIT, NULL};
static lazy_lib_t systemd = {SYSTEMD_SONAME, PTHREAD_ONCE_INIT, NULL};

static void load_gssapi(void);
static void load_systemd(void);

static void load(lazy_lib_t *lib)
{
	if (!(lib->handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL)))
		fprintf(stderr, "kbox: cannot load %s: %s\n", lib->soname, dlerror());
}
static void load_gssapi(void) { load(&gssapi); }
static void load_systemd(void) { load(&systemd); }

/* SYMBOL of LIB, loading LIB on first use; NULL if either is missing. */
static void *lazy_sym(lazy_lib_t *lib, const char *symbol)
{
	void *p;
	pthread_once(&lib->once, lib == &gssapi ? load_gssapi : load_systemd);
	if (!lib->handle)
		return NULL;
	if (!(p = dlsym(lib->handle, symbol)))
		fprintf(stderr, "kbox: %s has no %s\n", lib->soname, symbol);
	return p;
}

/* ---- GSSAPI (RFC 2744) ---- */

/* The two name-type OIDs libzmq reads are data, not functions: ours have
 * the standard values (RFC 2744 4.1 and 4.3), and gss_import_name hands
 * the library its own. */
static gss_OID_desc nt_user_name = {10, (void *)"\x2a\x86\x48\x86\xf7\x12\x01\x02\x01\x01"};
static gss_OID_desc nt_hostbased_service = {10, (void *)"\x2a\x86\x48\x86\xf7\x12\x01\x02\x01\x04"};
gss_OID GSS_C_NT_USER_NAME = &nt_user_name;
gss_OID GSS_C_NT_HOSTBASED_SERVICE = &nt_hostbased_service;

/* Forward NAME (RET NAME PARAMS) to the library with ARGS. */
#define GSS_FORWARD(name, params, args)                                                         \
	OM_uint32 name params                                                                       \
	{                                                                                           \
		OM_uint32(*real) params;                                                                \
		*(void **)&real = lazy_sym(&gssapi, #name);                                             \
		if (!real) {                                                                            \
			if (minor_status)                                                                   \
				*minor_status = 0;                                                              \
			return GSS_S_UNAVAILABLE;                                                           \
		}                                                                                       \
		return real args;                                                                       \
	}

GSS_FORWARD(gss_accept_sec_context,
            (OM_uint32 * minor_status, gss_ctx_id_t *context_handle, gss_cred_id_t acceptor_cred,
             gss_buffer_t input_token, gss_channel_bindings_t bindings, gss_name_t *src_name,
             gss_OID *mech_type, gss_buffer_t output_token, OM_uint32 *ret_flags,
             OM_uint32 *time_rec, gss_cred_id_t *delegated_cred),
            (minor_status, context_handle, acceptor_cred, input_token, bindings, src_name,
             mech_type, output_token, ret_flags, time_rec, delegated_cred))
GSS_FORWARD(gss_acquire_cred,
            (OM_uint32 * minor_status, gss_name_t desired_name, OM_uint32 time_req,
             gss_OID_set desired_mechs, gss_cred_usage_t usage, gss_cred_id_t *cred,
             gss_OID_set *actual_mechs, OM_uint32 *time_rec),
            (minor_status, desired_name, time_req, desired_mechs, usage, cred, actual_mechs,
             time_rec))
GSS_FORWARD(gss_delete_sec_context,
            (OM_uint32 * minor_status, gss_ctx_id_t *context_handle, gss_buffer_t output_token),
            (minor_status, context_handle, output_token))
GSS_FORWARD(gss_display_name,
            (OM_uint32 * minor_status, gss_name_t input_name, gss_buffer_t output_name,
             gss_OID *output_name_type),
            (minor_status, input_name, output_name, output_name_type))
GSS_FORWARD(gss_init_sec_context,
            (OM_uint32 * minor_status, gss_cred_id_t cred, gss_ctx_id_t *context_handle,
             gss_name_t target_name, gss_OID mech_type, OM_uint32 req_flags, OM_uint32 time_req,
             gss_channel_bindings_t bindings, gss_buffer_t input_token, gss_OID *actual_mech_type,
             gss_buffer_t output_token, OM_uint32 *ret_flags, OM_uint32 *time_rec),
            (minor_status, cred, context_handle, target_name, mech_type, req_flags, time_req,
             bindings, input_token, actual_mech_type, output_token, ret_flags, time_rec))
GSS_FORWARD(gss_release_buffer, (OM_uint32 * minor_status, gss_buffer_t buffer),
            (minor_status, buffer))
GSS_FORWARD(gss_release_cred, (OM_uint32 * minor_status, gss_cred_id_t *cred),
            (minor_status, cred))
GSS_FORWARD(gss_release_name, (OM_uint32 * minor_status, gss_name_t *name),
            (minor_status, name))
GSS_FORWARD(gss_unwrap,
            (OM_uint32 * minor_status, gss_ctx_id_t context_handle, gss_buffer_t input,
             gss_buffer_t output, int *conf_state, gss_qop_t *qop_state),
            (minor_status, context_handle, input, output, conf_state, qop_state))
GSS_FORWARD(gss_wrap,
            (OM_uint32 * minor_status, gss_ctx_id_t context_handle, int conf_req, gss_qop_t qop,
             gss_buffer_t input, int *conf_state, gss_buffer_t output),
            (minor_status, context_handle, conf_req, qop, input, conf_state, output))

OM_uint32 gss_import_name(OM_uint32 *minor_status, gss_buffer_t input_name, gss_OID name_type,
                          gss_name_t *output_name)
{
	OM_uint32 (*real)(OM_uint32 *, gss_buffer_t, gss_OID, gss_name_t *);
	gss_OID *theirs = NULL;

	*(void **)&real = lazy_sym(&gssapi, "gss_import_name");
	if (!real) {
		if (minor_status)
			*minor_status = 0;
		return GSS_S_UNAVAILABLE;
	}
	if (name_type == &nt_user_name)
		theirs = lazy_sym(&gssapi, "GSS_C_NT_USER_NAME");
	else if (name_type == &nt_hostbased_service)
		theirs = lazy_sym(&gssapi, "GSS_C_NT_HOSTBASED_SERVICE");
	if (theirs)
		name_type = *theirs;
	return real(minor_status, input_name, name_type, output_name);
}

/* ---- libsystemd: socket activation (sd_listen_fds(3), sd_is_socket(3)) ---- */

int sd_listen_fds(int unset_environment)
{
	int (*real)(int);
	*(void **)&real = lazy_sym(&systemd, "sd_listen_fds");
	return real ? real(unset_environment) : -ENOSYS;
}

int sd_is_socket_inet(int fd, int family, int type, int listening, uint16_t port)
{
	int (*real)(int, int, int, int, uint16_t);
	*(void **)&real = lazy_sym(&systemd, "sd_is_socket_inet");
	return real ? real(fd, family, type, listening, port) : -ENOSYS;
}

int sd_is_socket_unix(int fd, int type, int listening, const char *path, size_t length)
{
	int (*real)(int, int, int, const char *, size_t);
	*(void **)&real = lazy_sym(&systemd, "sd_is_socket_unix");
	return real ? real(fd, type, listening, path, length) : -ENOSYS;
}
