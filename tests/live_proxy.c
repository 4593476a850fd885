/* tests/live_proxy.c — forged, unsigned and replayed messages are dropped.
 *
 * A real kernel is started; the client under test gets a connection whose
 * shell endpoint is a czmq ROUTER owned by a proxy actor, which forwards to
 * a DEALER connected to the kernel's real shell (the other channels go
 * straight to the kernel).  On command the proxy tampers with the next
 * execute_reply on its way back to the client:
 *
 *   FORGE     first a copy whose content was changed but whose signature
 *             is the original one, then the genuine reply;
 *   UNSIGNED  first a copy with an empty signature, then the genuine reply;
 *   REPLAY    first the previous genuine execute_reply again, then the
 *             genuine reply.
 *
 * The client must drop each injected copy, count it, say why, and still
 * finish the execution with its own genuine reply.  A last test checks the
 * other direction: the kernel ignores a request signed with the wrong key. */
#include "private.h" /* czmq, kbox__msg_encode and kbox__msg_decode_zmsg */

#include <stdint.h>

#include "tap.h"
#include "live.h"

enum proxy_mode { PROXY_PASS = 0, PROXY_FORGE, PROXY_UNSIGNED, PROXY_REPLAY };

struct proxy_args {
	char front[4096]; /* where the client's shell connects (we bind) */
	char back[4096];  /* the kernel's real shell endpoint (we connect) */
};

static kbox_kspec_t *g_spec;
static char *g_dir;
static kbox_kernel_t *g_kernel;
static kbox_client_t *g_direct; /* straight to the kernel, with hooks */
static kbox_client_t *g_client; /* shell through the proxy, no hooks */
static zactor_t *g_proxy;
static struct proxy_args g_args;

/* Index of the delimiter frame in MSG, or -1. */
static int delimiter_index(zmsg_t *msg)
{
	zframe_t *f;
	int i = 0;

	for (f = zmsg_first(msg); f; f = zmsg_next(msg), i++)
		if (zframe_streq(f, KBOX_DELIMITER))
			return i;
	return -1;
}

/* Frame I of MSG (borrowed), or NULL. */
static zframe_t *frame_at(zmsg_t *msg, int i)
{
	zframe_t *f = zmsg_first(msg);

	while (f && i-- > 0)
		f = zmsg_next(msg);
	return f;
}

/* True when MSG is an execute_reply (judged by its header frame). */
static bool is_execute_reply(zmsg_t *msg)
{
	int d = delimiter_index(msg);
	zframe_t *hf;
	json_t *h;
	bool yes;

	if (d < 0 || (hf = frame_at(msg, d + 2)) == NULL)
		return false;
	h = json_loadb((const char *)zframe_data(hf), zframe_size(hf), 0, NULL);
	yes = h && json_string_value(json_object_get(h, "msg_type")) &&
	      !strcmp(json_string_value(json_object_get(h, "msg_type")), "execute_reply");
	json_decref(h);
	return yes;
}

/* A copy of MSG with frame I replaced by DATA/SIZE.  Caller owns it. */
static zmsg_t *copy_replacing(zmsg_t *msg, int i, const void *data, size_t size)
{
	zmsg_t *out = zmsg_new();
	zframe_t *f;
	int j = 0;

	for (f = zmsg_first(msg); f; f = zmsg_next(msg), j++) {
		if (j == i)
			zmsg_addmem(out, data, size);
		else
			zmsg_addmem(out, zframe_data(f), zframe_size(f));
	}
	return out;
}

/* The genuine reply MSG with its content turned into a forged error (status
 * "error", execution_count 999), keeping the original signature. */
static zmsg_t *forge(zmsg_t *msg)
{
	int d = delimiter_index(msg);
	zframe_t *cf = frame_at(msg, d + 5);
	json_t *c;
	char *text;
	zmsg_t *out = NULL;

	if (!cf)
		return NULL;
	c = json_loadb((const char *)zframe_data(cf), zframe_size(cf), 0, NULL);
	if (!c)
		return NULL;
	json_object_set_new(c, "status", json_string("error"));
	json_object_set_new(c, "ename", json_string("Forged"));
	json_object_set_new(c, "evalue", json_string("forged by the proxy"));
	json_object_set_new(c, "traceback", json_array());
	json_object_set_new(c, "execution_count", json_integer(999));
	text = json_dumps(c, JSON_COMPACT);
	if (text)
		out = copy_replacing(msg, d + 5, text, strlen(text));
	free(text);
	json_decref(c);
	return out;
}

/* The proxy actor.  Commands on PIPE: "FORGE", "UNSIGNED", "REPLAY" arm a
 * one-shot tampering of the next execute_reply (answered with a signal);
 * "INJECTED" answers with the number of tampered messages sent so far. */
static void proxy_actor(zsock_t *pipe, void *arg)
{
	struct proxy_args *a = arg;
	zsock_t *front = zsock_new(ZMQ_ROUTER);
	zsock_t *back = zsock_new(ZMQ_DEALER);
	zpoller_t *poller = NULL;
	zmsg_t *last = NULL; /* the last genuine execute_reply sent on */
	enum proxy_mode mode = PROXY_PASS;
	int injected = 0;
	bool ok;

	ok = front && back && zsock_bind(front, "%s", a->front) == 0 &&
	     zsock_connect(back, "%s", a->back) == 0;
	if (ok)
		poller = zpoller_new(pipe, front, back, NULL);
	zsock_signal(pipe, ok && poller ? 0 : 1);
	while (poller) {
		void *which = zpoller_wait(poller, -1);
		zmsg_t *msg;

		if (!which)
			break;
		msg = zmsg_recv(which);
		if (!msg)
			break;
		if (which == pipe) {
			char *cmd = zmsg_popstr(msg);
			bool term = !cmd || !strcmp(cmd, "$TERM");

			if (cmd && !strcmp(cmd, "INJECTED"))
				zsock_send(pipe, "i", injected);
			else if (!term) {
				mode = !strcmp(cmd, "FORGE")      ? PROXY_FORGE
				       : !strcmp(cmd, "UNSIGNED") ? PROXY_UNSIGNED
				       : !strcmp(cmd, "REPLAY")   ? PROXY_REPLAY
				                                  : PROXY_PASS;
				zsock_signal(pipe, 0);
			}
			free(cmd);
			zmsg_destroy(&msg);
			if (term)
				break;
			continue;
		}
		if (which == front) {
			zmsg_send(&msg, back);
			continue;
		}
		if (is_execute_reply(msg)) {
			zmsg_t *bad = NULL;

			if (mode == PROXY_FORGE)
				bad = forge(msg);
			else if (mode == PROXY_UNSIGNED)
				bad = copy_replacing(msg, delimiter_index(msg) + 1, "", 0);
			else if (mode == PROXY_REPLAY && last)
				bad = zmsg_dup(last);
			if (bad) {
				injected++;
				zmsg_send(&bad, front);
			}
			mode = PROXY_PASS;
			zmsg_destroy(&last);
			last = zmsg_dup(msg);
		}
		zmsg_send(&msg, front);
	}
	zmsg_destroy(&last);
	zpoller_destroy(&poller);
	zsock_destroy(&front);
	zsock_destroy(&back);
}

/* Arm the proxy with CMD and wait for its acknowledgement. */
static void proxy_arm(const char *cmd)
{
	zstr_send(g_proxy, cmd);
	zsock_wait(g_proxy);
}

static int proxy_injected(void)
{
	int n = -1;

	zstr_send(g_proxy, "INJECTED");
	zsock_recv(g_proxy, "i", &n);
	return n;
}

/* A connection like the kernel's, but with shell on a fresh ipc path for
 * the proxy.  Fills g_args.  NULL on failure. */
static kbox_conn_t *proxy_conn(const kbox_conn_t *real, const char *connection_file)
{
	kbox_error_t err = {0};
	json_error_t jerr;
	json_t *obj = json_load_file(connection_file, 0, &jerr);
	kbox_conn_t *conn = NULL;
	json_int_t port = 0;
	int ch;

	if (!obj) {
		printf("# %s: %s\n", connection_file, jerr.text);
		return NULL;
	}
	for (ch = 0; ch < KBOX_CH_COUNT; ch++)
		if (kbox_conn_port(real, ch) > port)
			port = kbox_conn_port(real, ch);
	json_object_set_new(obj, "shell_port", json_integer(port + 100));
	conn = kbox_conn_from_json(obj, "proxy connection", &err);
	json_decref(obj);
	if (!conn) {
		printf("# kbox_conn_from_json: %s\n", err.msg);
		return NULL;
	}
	snprintf(g_args.front, sizeof g_args.front, "%s", kbox_conn_endpoint(conn, KBOX_CH_SHELL));
	snprintf(g_args.back, sizeof g_args.back, "%s", kbox_conn_endpoint(real, KBOX_CH_SHELL));
	return conn;
}

/* ---- tests ---- */

TEST(proxied_client_works_normally)
{
	kbox_exec_t *ex;

	REQUIRE(g_client);
	CHECK(strcmp(g_args.front, g_args.back) != 0);
	CHECK_STR_EQ(kbox_conn_endpoint(kbox_kernel_conn(g_kernel), KBOX_CH_SHELL), g_args.back);
	ex = live_run(g_client, "1+1", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	CHECK_STR_EQ(live_result(ex), "2");
	CHECK_INT_EQ(kbox_client_dropped(g_client), 0);
	CHECK_INT_EQ(proxy_injected(), 0);
	kbox_exec_destroy(&ex);
}

TEST(forged_reply_with_original_signature_is_dropped)
{
	unsigned long dropped;
	kbox_exec_t *before, *ex;

	REQUIRE(g_client);
	before = live_run(g_client, "0", LIVE_EXEC_MS);
	REQUIRE(before);
	dropped = kbox_client_dropped(g_client);
	proxy_arm("FORGE");
	ex = live_run(g_client, "6*7", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(proxy_injected(), 1);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	CHECK_STR_EQ(live_result(ex), "42");
	CHECK_STR_EQ(live_reply_str(ex, "status"), "ok");
	CHECK_INT_EQ(kbox_exec_count(ex), kbox_exec_count(before) + 1);
	CHECK_INT_EQ(kbox_client_dropped(g_client), dropped + 1);
	printf("# last drop: %s\n", kbox_client_last_drop(g_client));
	CHECK(live_icontains(kbox_client_last_drop(g_client), "signature"));
	kbox_exec_destroy(&before);
	kbox_exec_destroy(&ex);
}

TEST(unsigned_reply_is_dropped)
{
	unsigned long dropped;
	kbox_exec_t *ex;

	REQUIRE(g_client);
	dropped = kbox_client_dropped(g_client);
	proxy_arm("UNSIGNED");
	ex = live_run(g_client, "3*3", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(proxy_injected(), 2);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	CHECK_STR_EQ(live_result(ex), "9");
	CHECK_INT_EQ(kbox_client_dropped(g_client), dropped + 1);
	printf("# last drop: %s\n", kbox_client_last_drop(g_client));
	CHECK(live_icontains(kbox_client_last_drop(g_client), "signature"));
	kbox_exec_destroy(&ex);
}

TEST(replayed_reply_is_dropped_and_next_request_gets_its_own)
{
	unsigned long dropped;
	kbox_exec_t *first, *ex;

	REQUIRE(g_client);
	first = live_run(g_client, "'first'", LIVE_EXEC_MS);
	REQUIRE(first);
	CHECK_STR_EQ(live_result(first), "'first'");
	dropped = kbox_client_dropped(g_client);
	proxy_arm("REPLAY");
	ex = live_run(g_client, "2**3", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_INT_EQ(proxy_injected(), 3);
	CHECK_INT_EQ(kbox_exec_status(ex), KBOX_EXEC_OK);
	CHECK_STR_EQ(live_result(ex), "8");
	CHECK_INT_EQ(kbox_exec_count(ex), kbox_exec_count(first) + 1);
	CHECK_INT_EQ(kbox_client_dropped(g_client), dropped + 1);
	printf("# last drop: %s\n", kbox_client_last_drop(g_client));
	CHECK(live_icontains(kbox_client_last_drop(g_client), "replay"));
	kbox_exec_destroy(&first);
	kbox_exec_destroy(&ex);

	/* and nothing is dropped once the proxy behaves */
	dropped = kbox_client_dropped(g_client);
	ex = live_run(g_client, "'after'", LIVE_EXEC_MS);
	REQUIRE(ex);
	CHECK_STR_EQ(live_result(ex), "'after'");
	CHECK_INT_EQ(kbox_client_dropped(g_client), dropped);
	kbox_exec_destroy(&ex);
}

/* Send an execute_request for CODE signed by AUTH on DEALER; its msg_id
 * goes to ID.  0 or -1. */
static int send_signed(zsock_t *dealer, const kbox_auth_t *auth, const char *code, char id[64])
{
	json_t *content = json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", code, "silent", 0,
	                            "store_history", 1, "user_expressions", "allow_stdin", 0,
	                            "stop_on_error", 1);
	kbox_msg_t *msg = kbox_msg_new("execute_request", "kbox-proxy-test-session", "kbox",
	                               &content);
	kbox_error_t err = {0};
	zmsg_t *z = NULL;
	int rc = -1;

	if (!msg)
		goto out;
	snprintf(id, 64, "%s", kbox_msg_id(msg));
	z = kbox__msg_encode(msg, auth, &err);
	if (!z) {
		printf("# encode: %s\n", err.msg);
		goto out;
	}
	rc = zmsg_send(&z, dealer);
out:
	zmsg_destroy(&z);
	kbox_msg_destroy(&msg);
	json_decref(content);
	return rc;
}

TEST(kernel_ignores_request_signed_with_wrong_key)
{
	static const char wrong_key[] = "0123456789abcdef0123456789abcdef";
	kbox_error_t err = {0};
	const kbox_conn_t *conn;
	const unsigned char *key;
	size_t keylen = 0;
	kbox_auth_t *bad = NULL, *good = NULL;
	zsock_t *dealer = NULL;
	zpoller_t *poller = NULL;
	zmsg_t *z = NULL;
	kbox_msg_t *reply = NULL;
	kbox_exec_t *ex = NULL;
	char id_bad[64], id_good[64];

	REQUIRE(g_kernel && g_direct);
	conn = kbox_kernel_conn(g_kernel);
	key = kbox_conn_key(conn, &keylen);
	REQUIRE(key && keylen > 0);
	bad = kbox_auth_new(kbox_conn_scheme(conn), wrong_key, sizeof wrong_key - 1, 0, &err);
	good = kbox_auth_new(kbox_conn_scheme(conn), key, keylen, 0, &err);
	dealer = zsock_new_dealer(kbox_conn_endpoint(conn, KBOX_CH_SHELL));
	if (!bad || !good || !dealer) {
		CHECK(bad && good && dealer);
		goto out;
	}
	poller = zpoller_new(dealer, NULL);

	CHECK_INT_EQ(send_signed(dealer, bad, "wrong_key_ran = True", id_bad), 0);
	CHECK(zpoller_wait(poller, 1000) == NULL);
	CHECK(zpoller_expired(poller));

	CHECK_INT_EQ(send_signed(dealer, good, "right_key_ran = True", id_good), 0);
	if (zpoller_wait(poller, 10000) != dealer) {
		CHECK(!"no reply to the genuine request");
		goto out;
	}
	z = zmsg_recv(dealer);
	reply = z ? kbox__msg_decode_zmsg(good, z, &err) : NULL;
	if (!reply)
		printf("# decode: %s\n", err.msg);
	REQUIRE(reply);
	CHECK_STR_EQ(kbox_msg_type(reply), "execute_reply");
	CHECK_STR_EQ(kbox_msg_parent_id(reply), id_good);
	CHECK_STR_EQ(json_string_value(json_object_get(kbox_msg_content(reply), "status")), "ok");

	ex = live_run(g_direct, "('wrong_key_ran' in dir(), 'right_key_ran' in dir())",
	              LIVE_EXEC_MS);
	if (ex)
		CHECK_STR_EQ(live_result(ex), "(False, True)");
	CHECK(ex != NULL);
out:
	kbox_exec_destroy(&ex);
	kbox_msg_destroy(&reply);
	zmsg_destroy(&z);
	zpoller_destroy(&poller);
	zsock_destroy(&dealer);
	kbox_auth_destroy(&bad);
	kbox_auth_destroy(&good);
}

int main(void)
{
	kbox_error_t err = {0};
	kbox_conn_t *pconn = NULL;

	if (kbox_init() != 0) {
		printf("Bail out! kbox_init failed\n");
		return 1;
	}
	g_spec = live_python3();
	if (!g_spec) {
		printf("1..0 # SKIP no Debian python3 kernelspec with ipykernel\n");
		return 0;
	}
	g_dir = live_mkdtemp("proxy");
	if (g_dir)
		g_kernel = live_start(g_spec, g_dir, &g_direct, &err);
	if (!g_kernel)
		printf("# kernel did not start: %s\n", err.msg);
	if (g_kernel)
		pconn = proxy_conn(kbox_kernel_conn(g_kernel),
		                   kbox_kernel_connection_file(g_kernel));
	if (pconn)
		g_proxy = zactor_new(proxy_actor, &g_args);
	if (g_proxy)
		g_client = kbox_client_new(pconn, &err);
	if (g_client && kbox_client_wait_ready(g_client, 10000, &err) != 0) {
		printf("# proxied client not ready: %s\n", err.msg);
		kbox_client_destroy(&g_client);
	}

	RUN(proxied_client_works_normally);
	RUN(forged_reply_with_original_signature_is_dropped);
	RUN(unsigned_reply_is_dropped);
	RUN(replayed_reply_is_dropped_and_next_request_gets_its_own);
	RUN(kernel_ignores_request_signed_with_wrong_key);

	kbox_client_destroy(&g_client);
	zactor_destroy(&g_proxy);
	if (g_kernel)
		kbox_kernel_stop(g_kernel, g_direct, NULL);
	kbox_client_destroy(&g_direct);
	kbox_kernel_destroy(&g_kernel);
	kbox_conn_destroy(&pconn);
	kbox_kspec_destroy(&g_spec);
	live_rm_rf(g_dir);
	free(g_dir);
	return tap_done();
}
