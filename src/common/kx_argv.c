/* src/common/kx_argv.c — a growing argv (kx.h). */
#include "config.h" /* _GNU_SOURCE */
#include "common/kx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Append S, taken (freed here when it cannot be added).  0, or -1. */
static int argv_push(kx_argv_t *a, char *s)
{
	if (a->failed || !s)
		goto fail;
	if (a->n + 2 > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		char **v = realloc(a->v, cap * sizeof *v);
		if (!v)
			goto fail;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
	return 0;
fail:
	free(s);
	a->failed = true;
	return -1;
}

int kx_argv_add(kx_argv_t *a, const char *s, ...)
{
	va_list ap;
	int rc = 0;

	va_start(ap, s);
	for (; s; s = va_arg(ap, const char *))
		if (a->failed || argv_push(a, strdup(s)) < 0)
			rc = -1;
	va_end(ap);
	return a->failed ? -1 : rc;
}

int kx_argv_addf(kx_argv_t *a, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	if (a->failed)
		return -1;
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return argv_push(a, n < 0 ? NULL : s);
}

char **kx_argv_take(kx_argv_t *a)
{
	char **v = NULL;

	if (!a->failed && (a->v || (a->v = calloc(1, sizeof *a->v)))) {
		v = a->v;
		a->v = NULL;
		a->n = 0;
	}
	kx_argv_reset(a);
	return v;
}

void kx_argv_reset(kx_argv_t *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	memset(a, 0, sizeof *a);
}
