/* bench/bench_exec.c — the libkbox column of the benchmark: the round trip
 * of execute("1+1") and the client CPU it costs, through the public API only.
 *
 * Usage: bench_exec CONNFILE N [WARMUP]
 *
 * Loads CONNFILE, connects, waits until the kernel answers, makes WARMUP
 * unmeasured calls (default 20), then N measured ones, each
 * kbox_client_execute({.code = "1+1", .collect = false}) to completion
 * (execute_reply and iopub idle).  Prints one JSON object on stdout:
 *
 *   {"client": "libkbox", "calls": N, "warmup": W, "lat_s": [...],
 *    "cpu_s": [...], "cpu_total_s": S, "errors": E, "dropped": D,
 *    "rusage": {"user_s", "sys_s", "nvcsw", "nivcsw"}}
 *
 * lat_s: the wall time of each call (CLOCK_MONOTONIC) from before
 * kbox_client_execute to its return.  cpu_s: the CPU time of this process,
 * all threads, user + sys (CLOCK_PROCESS_CPUTIME_ID) over the same call plus
 * kbox_exec_destroy.  rusage: getrusage(RUSAGE_SELF) differences over all
 * the measured calls (user and sys CPU, voluntary and involuntary context
 * switches).  Startup and warm-up are not measured.  Exit status 0,
 * or 1 when the kernel could not be reached or a call did not end in ok. */
#include <kbox.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define WARMUP_DEFAULT 20
#define CALL_TIMEOUT_MS 10000
#define READY_TIMEOUT_MS 30000

static double now(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Parse a non-negative count; -1 when ARG is not one. */
static long parse_count(const char *arg)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (end == arg || *end != '\0' || v < 0 || v > 100000000)
		return -1;
	return v;
}

/* One execute("1+1") to completion.  *DONE gets the CLOCK_MONOTONIC time
 * at which kbox_client_execute returned.  0 when the call ended in ok; -1
 * otherwise, after saying why on stderr. */
static int call(kbox_client_t *client, const kbox_exec_opts_t *opts, double *done)
{
	kbox_error_t err = {0};
	kbox_exec_t *ex = kbox_client_execute(client, opts, &err);
	int rc = -1;

	*done = now(CLOCK_MONOTONIC);
	if (!ex) {
		fprintf(stderr, "bench_exec: execute: %s\n", err.msg);
		return -1;
	}
	if (kbox_exec_status(ex) == KBOX_EXEC_OK)
		rc = 0;
	else
		fprintf(stderr, "bench_exec: execute: %s %s\n",
		        kbox_exec_status_name(kbox_exec_status(ex)), kbox_exec_reason(ex));
	kbox_exec_destroy(&ex);
	return rc;
}

static double tv_seconds(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static void print_array(const char *name, const double *v, long n)
{
	printf("\"%s\": [", name);
	for (long i = 0; i < n; i++)
		printf(i ? ", %.9f" : "%.9f", v[i]);
	printf("]");
}

int main(int argc, char **argv)
{
	kbox_error_t err = {0};
	kbox_conn_t *conn = NULL;
	kbox_client_t *client = NULL;
	double *lat = NULL, *cpu = NULL, cpu_total = 0.0, t1;
	long n, warmup = WARMUP_DEFAULT, errors = 0;
	struct rusage ru0, ru1;
	int rc = 1;
	kbox_exec_opts_t opts = {
	        .code = "1+1",
	        .collect = false,
	        .timeout_ms = CALL_TIMEOUT_MS,
	};

	if (argc < 3 || argc > 4 || (n = parse_count(argv[2])) < 1 ||
	    (argc == 4 && (warmup = parse_count(argv[3])) < 0)) {
		fprintf(stderr, "usage: bench_exec CONNFILE N [WARMUP]\n");
		return 2;
	}
	lat = calloc((size_t)n, sizeof *lat);
	cpu = calloc((size_t)n, sizeof *cpu);
	if (!lat || !cpu) {
		fprintf(stderr, "bench_exec: out of memory\n");
		goto out;
	}
	conn = kbox_conn_load(argv[1], &err);
	if (!conn) {
		fprintf(stderr, "bench_exec: %s\n", err.msg);
		goto out;
	}
	client = kbox_client_new(conn, &err);
	if (!client) {
		fprintf(stderr, "bench_exec: %s\n", err.msg);
		goto out;
	}
	if (kbox_client_wait_ready(client, READY_TIMEOUT_MS, &err) != 0) {
		fprintf(stderr, "bench_exec: kernel not ready: %s\n", err.msg);
		goto out;
	}
	for (long i = 0; i < warmup; i++)
		if (call(client, &opts, &t1) != 0)
			errors++;
	getrusage(RUSAGE_SELF, &ru0);
	for (long i = 0; i < n; i++) {
		double c0 = now(CLOCK_PROCESS_CPUTIME_ID);
		double t0 = now(CLOCK_MONOTONIC);

		if (call(client, &opts, &t1) != 0)
			errors++;
		cpu[i] = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
		lat[i] = t1 - t0;
		cpu_total += cpu[i];
	}
	getrusage(RUSAGE_SELF, &ru1);
	printf("{\"client\": \"libkbox\", \"calls\": %ld, \"warmup\": %ld, ", n, warmup);
	print_array("lat_s", lat, n);
	printf(", ");
	print_array("cpu_s", cpu, n);
	printf(", \"cpu_total_s\": %.9f, \"errors\": %ld, \"dropped\": %lu", cpu_total, errors,
	       kbox_client_dropped(client));
	printf(", \"rusage\": {\"user_s\": %.6f, \"sys_s\": %.6f, \"nvcsw\": %ld, \"nivcsw\": %ld}}\n",
	       tv_seconds(ru1.ru_utime) - tv_seconds(ru0.ru_utime),
	       tv_seconds(ru1.ru_stime) - tv_seconds(ru0.ru_stime), ru1.ru_nvcsw - ru0.ru_nvcsw,
	       ru1.ru_nivcsw - ru0.ru_nivcsw);
	rc = errors ? 1 : 0;
out:
	kbox_client_destroy(&client);
	kbox_conn_destroy(&conn);
	free(lat);
	free(cpu);
	return rc;
}
