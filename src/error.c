/* src/error.c — filling kbox_error_t (public: the library, the runtime and
 * a user's hooks share one way), and small shared helpers that need it. */
#include "private.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *kbox_strerror(kbox_errcode_t code)
{
	switch (code) {
	case KBOX_OK:
		return "success";
	case KBOX_E_SYSTEM:
		return "system error";
	case KBOX_E_INVALID:
		return "invalid input";
	case KBOX_E_PROTOCOL:
		return "protocol error";
	case KBOX_E_AUTH:
		return "authentication failure";
	case KBOX_E_TIMEOUT:
		return "timed out";
	case KBOX_E_DEAD:
		return "kernel died";
	case KBOX_E_NOTFOUND:
		return "not found";
	case KBOX_E_UNSUPPORTED:
		return "unsupported";
	case KBOX_E_NOMEM:
		return "out of memory";
	}
	return "unknown error";
}

int kbox_error_set(kbox_error_t *err, kbox_errcode_t code, const char *fmt, ...)
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

int kbox_error_set_sys(kbox_error_t *err, const char *fmt, ...)
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

int kbox_check_private_dir(const char *dir, kbox_error_t *err)
{
	char why[KBOX_ERROR_MSG_MAX];
	int r = kx_private_dir(dir, why, sizeof why);
	if (r < 0)
		return kbox_error_set_sys(err, "directory %s", dir);
	if (r > 0)
		return kbox_error_set(err, KBOX_E_INVALID, "%s", why);
	return 0;
}
