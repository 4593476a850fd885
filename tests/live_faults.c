/* tests/live_faults.c — faults found in review, each pinned by a test:
 * sends that could block forever, an owned busy kernel taken for dead,
 * host fds leaking into the kernel, two kernels sharing one runtime dir,
 * a runtime dir too long for unix sockets, a callback stopping an execute
 * at an input_request. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kbox.h>
#include "tap.h"
#include "live.h"

static kbox_kspec_t *g_spec;

/* A connection whose sockets lead nowhere: a fresh ipc dir, no kernel. */
TEST(requests_to_an_absent_kernel_never_block)
{
	char *dir = live_mkdtemp("absent");
	kbox_conn_t *conn = dir ? kbox_conn_new_ipc(dir, NULL) : NULL;
	kbox_client_t *c = conn ? kbox_client_new(conn, NULL) : NULL;
	kbox_error_t err = {0};
	long long t0 = live_ms();
	int i, send_failed = 0;

	REQUIRE(c != NULL);
	/* more than the DEALER's 1000-message queue */
	for (i = 0; i < 1100; i++) {
		kbox_msg_t *r = kbox_client_request(c, KBOX_CH_SHELL, "kernel_info_request", NULL,
		                                    1, &err);
		CHECK(r == NULL);
		kbox_msg_destroy(&r);
		if (strstr(err.msg, "sending"))
			send_failed++;
	}
	CHECK(live_ms() - t0 < 20000);
	CHECK(send_failed > 0); /* the queue filled up and said so instead of blocking */
	CHECK_CONTAINS(err.msg, "kernel_info_request");
	kbox_client_destroy(&c);
	kbox_conn_destroy(&conn);
	live_rm_rf(dir);
	free(dir);
}

static int hook_alive_yes(void *arg)
{
	(void)arg;
	return 1;
}

/* A client whose heartbeat leads nowhere, but whose owner says "alive":
 * a busy kernel is not declared dead for missing beats. */
TEST(owned_kernel_missing_heartbeats_while_busy_is_not_dead)
{
	char *dir = live_mkdtemp("busy");
	kbox_client_t *owner = NULL, *c = NULL;
	kbox_kernel_t *k = dir ? live_start(g_spec, dir, &owner, NULL) : NULL;
	json_t *cf;
	kbox_conn_t *conn;
	kbox_client_hooks_t hooks = {NULL, hook_alive_yes, NULL};
	kbox_exec_t *ex;
	const kbox_conn_t *kc;
	size_t keylen;
	const unsigned char *key;

	REQUIRE(k != NULL);
	kc = kbox_kernel_conn(k);
	key = kbox_conn_key(kc, &keylen);
	cf = json_pack("{s:s, s:s, s:s#, s:s, s:i, s:i, s:i, s:i, s:i}", "transport", "ipc", "ip",
	               kbox_conn_ip(kc), "key", (const char *)key, (int)keylen, "signature_scheme",
	               "hmac-sha256", "shell_port", kbox_conn_port(kc, KBOX_CH_SHELL), "iopub_port",
	               kbox_conn_port(kc, KBOX_CH_IOPUB), "stdin_port",
	               kbox_conn_port(kc, KBOX_CH_STDIN), "control_port",
	               kbox_conn_port(kc, KBOX_CH_CONTROL), "hb_port", 999 /* nobody there */);
	conn = kbox_conn_from_json(cf, "test", NULL);
	json_decref(cf);
	REQUIRE(conn != NULL);
	c = kbox_client_new(conn, NULL);
	kbox_conn_destroy(&conn);
	REQUIRE(c != NULL);
	kbox_client_set_hooks(c, &hooks);
	REQUIRE(kbox_client_wait_ready(c, LIVE_READY_MS, NULL) == 0);
	CHECK(kbox_client_heartbeat(c, 200) < 0); /* beats really go nowhere */
	ex = live_run(c, "import time; time.sleep(3); 'done'", LIVE_EXEC_MS);
	REQUIRE(ex != NULL);
	CHECK_STR_EQ(kbox_exec_status_name(kbox_exec_status(ex)), "ok");
	CHECK_STR_EQ(live_result(ex), "'done'");
	kbox_exec_destroy(&ex);
	kbox_client_destroy(&c);
	kbox_kernel_stop(k, owner, NULL);
	kbox_client_destroy(&owner);
	kbox_kernel_destroy(&k);
	live_rm_rf(dir);
	free(dir);
}

/* A descriptor the host opened without O_CLOEXEC is not in the kernel. */
TEST(host_fds_do_not_leak_into_the_kernel)
{
	char *dir = live_mkdtemp("fds");
	char json[8192], out[PATH_MAX], listing[256] = "";
	kbox_kspec_t *spec;
	kbox_kernel_t *k;
	kbox_error_t err = {0};
	long long t0;
	FILE *f;
	int leak;

	REQUIRE(dir != NULL);
	snprintf(out, sizeof out, "%s/fds.txt", dir);
	snprintf(json, sizeof json,
	         "{\"argv\": [\"/bin/sh\", \"-c\", \"exec >\\\"$0\\\"; ls /proc/$$/fd\", \"%s\"],"
	         " \"display_name\": \"fds\", \"language\": \"sh\"}",
	         out);
	spec = live_make_kspec(dir, "fds", json, &err);
	REQUIRE(spec != NULL);
	leak = open("/dev/null", O_RDONLY); /* no O_CLOEXEC, on purpose */
	REQUIRE(leak >= 3);
	k = kbox_kernel_start(spec, NULL, &err);
	close(leak);
	REQUIRE(k != NULL);
	t0 = live_ms();
	while (kbox_kernel_is_alive(k) && live_ms() - t0 < 10000)
		usleep(10000);
	f = fopen(out, "r");
	REQUIRE(f != NULL);
	{
		size_t n = fread(listing, 1, sizeof listing - 1, f);
		listing[n] = '\0';
	}
	fclose(f);
	CHECK_STR_EQ(listing, "0\n1\n2\n");
	kbox_kernel_destroy(&k);
	kbox_kspec_destroy(&spec);
	live_rm_rf(dir);
	free(dir);
}

/* Two kernels started one after the other in one runtime dir both work. */
TEST(two_kernels_in_one_runtime_dir_both_answer)
{
	char *dir = live_mkdtemp("shared");
	kbox_client_t *a = NULL, *b = NULL;
	kbox_kernel_opts_t o = {0};
	kbox_kernel_t *ka, *kb;
	kbox_exec_t *ea = NULL, *eb = NULL;

	REQUIRE(dir != NULL);
	o.runtime_dir = dir;
	ka = kbox_kernel_start(g_spec, &o, NULL);
	kb = kbox_kernel_start(g_spec, &o, NULL);
	REQUIRE(ka && kb);
	a = kbox_kernel_connect(ka, NULL);
	b = kbox_kernel_connect(kb, NULL);
	REQUIRE(a && b);
	CHECK(kbox_client_wait_ready(a, LIVE_READY_MS, NULL) == 0);
	CHECK(kbox_client_wait_ready(b, LIVE_READY_MS, NULL) == 0);
	ea = live_run(a, "import os; os.getpid()", LIVE_EXEC_MS);
	eb = live_run(b, "import os; os.getpid()", LIVE_EXEC_MS);
	REQUIRE(ea && eb);
	{
		char want[32];
		snprintf(want, sizeof want, "%ld", (long)kbox_kernel_pid(ka));
		CHECK_STR_EQ(live_result(ea), want);
		snprintf(want, sizeof want, "%ld", (long)kbox_kernel_pid(kb));
		CHECK_STR_EQ(live_result(eb), want);
	}
	kbox_exec_destroy(&ea);
	kbox_exec_destroy(&eb);
	kbox_kernel_stop(ka, a, NULL);
	kbox_kernel_stop(kb, b, NULL);
	kbox_client_destroy(&a);
	kbox_client_destroy(&b);
	kbox_kernel_destroy(&ka);
	kbox_kernel_destroy(&kb);
	CHECK_INT_EQ(live_dir_entries(dir, true), 0);
	live_rm_rf(dir);
	free(dir);
}

/* kbox_kernel_start's kernel binds its sockets by their paths: a runtime
 * directory too long for a unix socket's is refused before anything is
 * written or run there (kbox's sessions have no such limit: their kernels
 * get short paths; tests/long_home.sh). */
TEST(runtime_dir_too_long_for_unix_sockets_is_refused)
{
	char *dir = live_mkdtemp("long"), sub[512];
	kbox_kernel_opts_t o = {0};
	kbox_error_t err = {0};
	kbox_kernel_t *k;
	char want[sizeof err.msg + sizeof sub];

	REQUIRE(dir != NULL);
	snprintf(sub, sizeof sub, "%s/%0100d", dir, 0);
	REQUIRE(mkdir(sub, 0700) == 0);
	REQUIRE(strlen(sub) < 200); /* the message below fits err.msg */
	o.runtime_dir = sub;
	k = kbox_kernel_start(g_spec, &o, &err);
	CHECK(k == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	snprintf(want, sizeof want,
	         "runtime directory %s is too long for the kernel's unix sockets", sub);
	CHECK_STR_EQ(err.msg, want);
	CHECK_INT_EQ(live_dir_entries(sub, true), 0);
	kbox_kernel_destroy(&k);
	live_rm_rf(dir);
	free(dir);
}

static int stop_at_input(void *arg, kbox_channel_t ch, const kbox_msg_t *msg)
{
	(void)arg;
	(void)msg;
	return ch == KBOX_CH_STDIN;
}

/* A callback that returns non-zero at an input_request stops the wait; the
 * request is answered with EOF so the kernel is not left blocked. */
TEST(callback_stop_at_input_request_answers_eof_and_stops)
{
	char *dir = live_mkdtemp("cbstop");
	kbox_client_t *c = NULL;
	kbox_kernel_t *k = dir ? live_start(g_spec, dir, &c, NULL) : NULL;
	kbox_exec_opts_t o = {0};
	kbox_exec_t *ex, *next;

	REQUIRE(k != NULL);
	o.code = "x = 1\ntry:\n    input('? ')\nexcept EOFError:\n    x = 'eof'\n";
	o.allow_stdin = true;
	o.timeout_ms = LIVE_EXEC_MS;
	o.on_msg = stop_at_input;
	ex = kbox_client_execute(c, &o, NULL);
	REQUIRE(ex != NULL);
	CHECK_STR_EQ(kbox_exec_status_name(kbox_exec_status(ex)), "timeout");
	CHECK_STR_EQ(kbox_exec_reason(ex), "stopped by the caller");
	CHECK_INT_EQ(kbox_exec_inputs_answered(ex), 1);
	kbox_exec_destroy(&ex);
	next = live_run(c, "x", LIVE_EXEC_MS); /* the kernel got EOF and went on */
	REQUIRE(next != NULL);
	CHECK_STR_EQ(live_result(next), "'eof'");
	kbox_exec_destroy(&next);
	kbox_kernel_stop(k, c, NULL);
	kbox_client_destroy(&c);
	kbox_kernel_destroy(&k);
	live_rm_rf(dir);
	free(dir);
}

/* Output that never stops (a thread printing after the cell ended) does not
 * keep the execute from returning: the drain after idle is bounded. */
TEST(output_after_idle_that_never_stops_does_not_hold_execute)
{
	char *dir = live_mkdtemp("drain");
	kbox_client_t *c = NULL;
	kbox_kernel_t *k = dir ? live_start(g_spec, dir, &c, NULL) : NULL;
	kbox_exec_t *ex;
	long long t0;

	REQUIRE(k != NULL);
	t0 = live_ms();
	ex = live_run(c,
	              "import threading, sys\n"
	              "def flood():\n"
	              "    while True:\n"
	              "        sys.stdout.write('x' * 100 + '\\n'); sys.stdout.flush()\n"
	              "threading.Thread(target=flood, daemon=True).start()\n"
	              "'started'",
	              10000);
	REQUIRE(ex != NULL);
	CHECK_STR_EQ(kbox_exec_status_name(kbox_exec_status(ex)), "ok");
	CHECK(live_ms() - t0 < 5000);
	kbox_exec_destroy(&ex);
	kbox_kernel_stop(k, c, NULL);
	kbox_client_destroy(&c);
	kbox_kernel_destroy(&k);
	live_rm_rf(dir);
	free(dir);
}

/* A kernel over tcp on 127.0.0.1 works like one over ipc. */
TEST(kernel_over_tcp_on_loopback_answers)
{
	char *dir = live_mkdtemp("tcp");
	kbox_client_t *c = NULL;
	kbox_kernel_opts_t o = {0};
	kbox_kernel_t *k;
	kbox_exec_t *ex;

	REQUIRE(dir != NULL);
	o.runtime_dir = dir;
	o.transport = KBOX_TRANSPORT_TCP;
	k = kbox_kernel_start_ready(g_spec, &o, LIVE_READY_MS, &c, NULL);
	REQUIRE(k != NULL);
	CHECK_INT_EQ(kbox_conn_transport(kbox_kernel_conn(k)), KBOX_TRANSPORT_TCP);
	CHECK_CONTAINS(kbox_conn_endpoint(kbox_kernel_conn(k), KBOX_CH_SHELL), "tcp://127.0.0.1:");
	ex = live_run(c, "6*7", LIVE_EXEC_MS);
	REQUIRE(ex != NULL);
	CHECK_STR_EQ(live_result(ex), "42");
	kbox_exec_destroy(&ex);
	kbox_kernel_stop(k, c, NULL);
	kbox_client_destroy(&c);
	kbox_kernel_destroy(&k);
	CHECK_INT_EQ(live_dir_entries(dir, true), 0);
	live_rm_rf(dir);
	free(dir);
}

int main(void)
{
	if (kbox_init() != 0) {
		printf("Bail out! kbox_init failed\n");
		return 1;
	}
	RUN(requests_to_an_absent_kernel_never_block);
	RUN(host_fds_do_not_leak_into_the_kernel);
	g_spec = live_python3();
	if (g_spec) {
		RUN(owned_kernel_missing_heartbeats_while_busy_is_not_dead);
		RUN(two_kernels_in_one_runtime_dir_both_answer);
		RUN(runtime_dir_too_long_for_unix_sockets_is_refused);
		RUN(kernel_over_tcp_on_loopback_answers);
		RUN(callback_stop_at_input_request_answers_eof_and_stops);
		RUN(output_after_idle_that_never_stops_does_not_hold_execute);
	} else {
		printf("# no Debian python3 kernelspec: kernel tests not run\n");
	}
	kbox_kspec_destroy(&g_spec);
	return tap_done();
}
