/* src/common/kx_time.c — clocks and ISO-8601 timestamps (kx.h). */
#include "config.h" /* _GNU_SOURCE */
#include "common/kx.h"

#include <math.h>
#include <stdio.h>
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

void kx_iso8601(double t, int digits, char out[32])
{
	static const long scale[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};
	char buf[96];
	struct tm tm;
	time_t secs;
	long frac;
	int n;

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
	n = snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", (tm.tm_year + 1900) % 10000,
	             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	if (n < 0)
		n = 0;
	if (digits)
		snprintf(buf + n, sizeof buf - (size_t)n, ".%0*ldZ", digits, frac);
	else
		snprintf(buf + n, sizeof buf - (size_t)n, "Z");
	buf[31] = '\0'; /* at most 27 characters for years 0-9999 */
	memcpy(out, buf, 32);
}
