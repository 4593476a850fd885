/* bench/floor_zmq.c — the libzmq floor: the least a C client on libzmq can
 * do per execute("1+1"), to show how much of libkbox's CPU is its own.
 *
 * Usage: floor_zmq CONNFILE N [WARMUP]
 *
 * A DEALER on shell and a SUB on iopub, straight on libzmq (no czmq).  Each
 * call signs one execute_request (HMAC-SHA256, libsodium), sends it, and
 * reads frames until the execute_reply and the iopub idle of that request
 * have both arrived — found by searching the raw frames for the request's
 * msg_id and for "idle", with no JSON parsing and no verification of what
 * comes back.  That is less than any correct client may do; libkbox also
 * verifies every signature, parses every message, keeps a replay history and
 * watches the heartbeat.  Output: one JSON line in bench_exec's format with
 * "client": "c-floor". */
#include "config.h" /* _GNU_SOURCE, for memmem */
#include <jansson.h>
#include <sodium.h>
#include <zmq.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Receive one multipart message; return 1 if some frame contains NEEDLE and
 * (when AND is non-NULL) some frame contains AND too. */
static int recv_match(void *sock, const char *needle, const char *and)
{
	int found = 0, found2 = and? 0 : 1, more = 1;
	while (more) {
		zmq_msg_t m;
		size_t sz = sizeof more;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, sock, 0) < 0) {
			zmq_msg_close(&m);
			return 0;
		}
		if (memmem(zmq_msg_data(&m), zmq_msg_size(&m), needle, strlen(needle)))
			found = 1;
		if (and&&memmem(zmq_msg_data(&m), zmq_msg_size(&m), and, strlen(and)))
			found2 = 1;
		zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz);
		zmq_msg_close(&m);
	}
	return found && found2;
}

static int call(void *sh, void *io, const char *key, long seq)
{
	char id[64], hdr[512], sig[65];
	unsigned char mac[32];
	const char
	        *content = "{\"code\":\"1+1\",\"silent\":false,\"store_history\":true,"
	                   "\"user_expressions\":{},\"allow_stdin\":false,\"stop_on_error\":true}";
	crypto_auth_hmacsha256_state st;
	int reply = 0, idle = 0;

	snprintf(id, sizeof id, "floor-%ld-%ld", (long)time(NULL), seq);
	snprintf(hdr, sizeof hdr,
	         "{\"msg_id\":\"%s\",\"session\":\"floor\",\"username\":\"bench\","
	         "\"date\":\"2026-01-01T00:00:00.000000Z\",\"msg_type\":\"execute_request\","
	         "\"version\":\"5.3\"}",
	         id);
	crypto_auth_hmacsha256_init(&st, (const unsigned char *)key, strlen(key));
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)hdr, strlen(hdr));
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)"{}", 2);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)"{}", 2);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)content, strlen(content));
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_bin2hex(sig, sizeof sig, mac, sizeof mac);
	zmq_send(sh, "<IDS|MSG>", 9, ZMQ_SNDMORE);
	zmq_send(sh, sig, 64, ZMQ_SNDMORE);
	zmq_send(sh, hdr, strlen(hdr), ZMQ_SNDMORE);
	zmq_send(sh, "{}", 2, ZMQ_SNDMORE);
	zmq_send(sh, "{}", 2, ZMQ_SNDMORE);
	zmq_send(sh, content, strlen(content), 0);
	while (!(reply && idle)) {
		zmq_pollitem_t items[2] = {{sh, 0, ZMQ_POLLIN, 0}, {io, 0, ZMQ_POLLIN, 0}};
		if (zmq_poll(items, 2, 10000) <= 0)
			return -1;
		if ((items[0].revents & ZMQ_POLLIN) && recv_match(sh, id, NULL))
			reply = 1;
		if ((items[1].revents & ZMQ_POLLIN) && recv_match(io, id, "\"idle\""))
			idle = 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	json_error_t jerr;
	json_t *cf;
	char ep[2][1024];
	const char *key, *ip, *transport;
	void *ctx, *sh, *io;
	long n, warm, errors = 0;
	double *lat, *cpu, cpu_total = 0;
	struct rusage r0, r1;

	if (argc < 3 || sodium_init() < 0) {
		fprintf(stderr, "usage: floor_zmq CONNFILE N [WARMUP]\n");
		return 2;
	}
	n = atol(argv[2]);
	warm = argc > 3 ? atol(argv[3]) : 20;
	cf = json_load_file(argv[1], 0, &jerr);
	if (!cf || n < 1) {
		fprintf(stderr, "floor_zmq: %s: %s\n", argv[1], cf ? "bad N" : jerr.text);
		return 2;
	}
	key = json_string_value(json_object_get(cf, "key"));
	ip = json_string_value(json_object_get(cf, "ip"));
	transport = json_string_value(json_object_get(cf, "transport"));
	if (!key || !ip || !transport)
		return 2;
	for (int i = 0; i < 2; i++) {
		json_int_t port = json_integer_value(
		        json_object_get(cf, i ? "iopub_port" : "shell_port"));
		if (strcmp(transport, "ipc") == 0)
			snprintf(ep[i], sizeof ep[i], "ipc://%s-%lld", ip, (long long)port);
		else
			snprintf(ep[i], sizeof ep[i], "tcp://%s:%lld", ip, (long long)port);
	}
	ctx = zmq_ctx_new();
	sh = zmq_socket(ctx, ZMQ_DEALER);
	io = zmq_socket(ctx, ZMQ_SUB);
	zmq_setsockopt(io, ZMQ_SUBSCRIBE, "", 0);
	zmq_connect(sh, ep[0]);
	zmq_connect(io, ep[1]);
	{ /* let the subscription reach the kernel (the slow joiner) */
		struct timespec ts = {0, 500000000};
		nanosleep(&ts, NULL);
	}
	for (long i = 0; i < warm; i++)
		if (call(sh, io, key, -1 - i) < 0)
			errors++;
	lat = calloc((size_t)n, sizeof *lat);
	cpu = calloc((size_t)n, sizeof *cpu);
	getrusage(RUSAGE_SELF, &r0);
	for (long i = 0; i < n; i++) {
		double c0 = now(CLOCK_PROCESS_CPUTIME_ID), t0 = now(CLOCK_MONOTONIC);
		if (call(sh, io, key, i) < 0)
			errors++;
		lat[i] = now(CLOCK_MONOTONIC) - t0;
		cpu[i] = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
		cpu_total += cpu[i];
	}
	getrusage(RUSAGE_SELF, &r1);
	printf("{\"client\": \"c-floor\", \"calls\": %ld, \"warmup\": %ld, \"lat_s\": [", n, warm);
	for (long i = 0; i < n; i++)
		printf("%s%.9f", i ? ", " : "", lat[i]);
	printf("], \"cpu_s\": [");
	for (long i = 0; i < n; i++)
		printf("%s%.9f", i ? ", " : "", cpu[i]);
	printf("], \"cpu_total_s\": %.9f, \"errors\": %ld, \"rusage\": {\"user_s\": %.6f, "
	       "\"sys_s\": %.6f, \"nvcsw\": %ld, \"nivcsw\": %ld}}\n",
	       cpu_total, errors,
	       (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
	               (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6,
	       (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
	               (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6,
	       r1.ru_nvcsw - r0.ru_nvcsw, r1.ru_nivcsw - r0.ru_nivcsw);
	zmq_close(sh);
	zmq_close(io);
	zmq_ctx_term(ctx);
	json_decref(cf);
	free(lat);
	free(cpu);
	return errors ? 1 : 0;
}
