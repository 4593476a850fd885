/* src/common/kx_time.c — clocks and ISO-8601 timestamps (kx.h). */
#include "config.h" /* _GNU_SOURCE */
#include "common/kx.h"

#include <math.h>
#include <string.h>
#include <time.h>

long long kx_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double kx_wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)(ts.tv_nsec / 1000) / 1e6;
}

/* N decimal digits of V (0 <= V < 10^N) at P; past them. */
static char *put_digits(char *p, long v, int n)
{
	for (int i = n - 1; i >= 0; i--, v /= 10)
		p[i] = (char)('0' + v % 10);
	return p + n;
}

void kx_iso8601(double t, int digits, char out[32])
{
	static const long scale[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};
	struct tm tm;
	time_t secs;
	long frac;
	char *p = out;

	if (digits < 0)
		digits = 0;
	if (digits > 6)
		digits = 6;
	secs = (time_t)floor(t);
	frac = (long)llround((t - (double)secs) * (double)scale[digits]);
	if (frac >= scale[digits]) {
		secs++;
		frac -= scale[digits];
	}
	if (frac < 0)
		frac = 0;
	memset(&tm, 0, sizeof tm);
	gmtime_r(&secs, &tm);
	/* YYYY-MM-DDTHH:MM:SS[.F]Z, at most 27 characters, written by hand:
	 * every message carries one, and snprintf took 10 times as long */
	p = put_digits(p, tm.tm_year + 1900 < 0 ? 0 : (tm.tm_year + 1900) % 10000, 4);
	*p++ = '-';
	p = put_digits(p, tm.tm_mon + 1, 2);
	*p++ = '-';
	p = put_digits(p, tm.tm_mday, 2);
	*p++ = 'T';
	p = put_digits(p, tm.tm_hour, 2);
	*p++ = ':';
	p = put_digits(p, tm.tm_min, 2);
	*p++ = ':';
	p = put_digits(p, tm.tm_sec % 100, 2);
	if (digits) {
		*p++ = '.';
		p = put_digits(p, frac, digits);
	}
	*p++ = 'Z';
	*p = '\0';
}
