/* src/util.c — small utilities of libkbox's own (declared in src/private.h
 * and kbox/capture.h) that speak kbox_error_t or libkbox's API; the ones
 * that need only libc are the common module's (src/common/kx.h). */
#include "private.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- unix socket paths ---- */

int kbox__unix_path(char *buf, size_t size, const char *dir, const char *name, int *dirfd_p,
                    kbox_error_t *err)
{
	int opened = *dirfd_p >= 0;
	if (kx_unix_path(buf, size, dir, name, dirfd_p) == 0)
		return 0;
	if (opened || *dirfd_p >= 0) /* DIR is open: NAME is what is too long */
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "%s: the name is too long for a unix socket", name);
	return kbox_error_set_sys(err, "directory %s", dir);
}

/* kbox_strip_ansi (kbox/capture.h): here, in the base that kbox(1) links
 * too, so that its inspect and complete strip as the capture does. */
char *kbox_strip_ansi(const char *s, size_t len, size_t *out_len)
{
	char *out = malloc(len + 1);
	size_t i = 0, o = 0;
	if (!out)
		return NULL;
	while (i < len) {
		if (s[i] != '\033') {
			out[o++] = s[i++];
			continue;
		}
		i++;
		if (i < len && s[i] == '[') { /* CSI: parameters, then a final byte 0x40-0x7e */
			i++;
			while (i < len &&
			       !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e))
				i++;
			if (i < len)
				i++;
		} else if (i < len && s[i] == ']') { /* OSC: until BEL or ESC \ */
			i++;
			while (i < len && s[i] != '\a' &&
			       !(s[i] == '\033' && i + 1 < len && s[i + 1] == '\\'))
				i++;
			if (i < len)
				i += s[i] == '\a' ? 1 : 2;
		} else if (i < len && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x2f) {
			/* nF: intermediate bytes, then a final byte (ESC ( B) */
			while (i < len && (unsigned char)s[i] >= 0x20 &&
			       (unsigned char)s[i] <= 0x2f)
				i++;
			if (i < len)
				i++;
		} else if (i < len) {
			i++; /* a two-byte sequence */
		}
	}
	out[o] = '\0';
	if (out_len)
		*out_len = o;
	return out;
}
