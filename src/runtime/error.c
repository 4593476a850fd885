/* src/runtime/error.c — the runtime's way to fill a kbox_error_t
 * (runtime.h): libkbox's own helpers are internal to the library. */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

int kr_err(kbox_error_t *err, kbox_errcode_t code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		err->code = code;
		va_start(ap, fmt);
		kx_vmsgf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int kr_err_sys(kbox_error_t *err, const char *fmt, ...)
{
	int saved = errno;
	if (err) {
		va_list ap;
		size_t len;
		err->code = saved == ENOMEM ? KBOX_E_NOMEM : KBOX_E_SYSTEM;
		va_start(ap, fmt);
		kx_vmsgf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		len = strlen(err->msg);
		kx_msgf(err->msg + len, sizeof err->msg - len, ": %s", strerror(saved));
	}
	errno = saved;
	return -1;
}

int kr_check_private_dir(const char *dir, kbox_error_t *err)
{
	char why[KBOX_ERROR_MSG_MAX];
	int r = kx_private_dir(dir, why, sizeof why);
	if (r < 0)
		return kr_err_sys(err, "directory %s", dir);
	if (r > 0)
		return kr_err(err, KBOX_E_INVALID, "%s", why);
	return 0;
}
