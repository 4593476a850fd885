/* tests/unit_wire.c — the wire module against jupyter_client's own output
 * (tests/data/vectors.json, made by tests/gen_vectors.py) and against the
 * promises of include/kbox/wire.h: signatures, decoding, malformed frames,
 * replay protection, message headers and dates.  (The common module's
 * UTF-8 repair, string buffer and timestamps: tests/unit_common.c.) */
#include "private.h" /* kbox__msg_encode and zmsg_t */

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "tap.h"

#define MAX_FRAMES 32

/* The test vectors, loaded once by main(). */
static json_t *vectors;

/* Frames decoded from base64 (owned). */
typedef struct {
	size_t n;
	kbox_frame_t f[MAX_FRAMES];
} frames_t;

static const char *const DICT_NAMES[4] = {"header", "parent_header", "metadata", "content"};

/* A header with everything a decoder needs. */
#define GOOD_HEADER                                                                      \
	"{\"msg_id\":\"11111111-2222-4333-8444-555555555555\",\"msg_type\":\"status\","  \
	"\"session\":\"s\",\"username\":\"u\",\"date\":\"2026-06-06T17:21:05.123456Z\"," \
	"\"version\":\"5.3\"}"
#define KEY "a0436f6c-1916-498b-8eb9-e81ab9368e84"

/* ---- helpers ---- */

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Decode base64 S into a new buffer; *LEN gets its size. NULL on bad input. */
static unsigned char *b64decode(const char *s, size_t *len)
{
	size_t n = strlen(s), o = 0;
	unsigned char *out = malloc(n / 4 * 3 + 1);
	unsigned acc = 0;
	int bits = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n && s[i] != '='; i++) {
		int v = b64val((unsigned char)s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	*len = o;
	return out;
}

/* Fill FR from a JSON array of base64 strings. 0 or -1. */
static int frames_from_b64(frames_t *fr, json_t *arr)
{
	size_t i;
	json_t *v;

	memset(fr, 0, sizeof *fr);
	if (!json_is_array(arr) || json_array_size(arr) > MAX_FRAMES)
		return -1;
	json_array_foreach(arr, i, v)
	{
		size_t len;
		unsigned char *data = b64decode(json_string_value(v), &len);
		if (!data)
			return -1;
		fr->f[fr->n].data = data;
		fr->f[fr->n].size = len;
		fr->n++;
	}
	return 0;
}

static void frames_free(frames_t *fr)
{
	for (size_t i = 0; i < fr->n; i++)
		free((void *)fr->f[i].data);
	fr->n = 0;
}

static kbox_frame_t str_frame(const char *s)
{
	kbox_frame_t f = {s, strlen(s)};
	return f;
}

static int frame_eq_str(kbox_frame_t f, const char *s)
{
	return f.size == strlen(s) && memcmp(f.data, s, f.size) == 0;
}

static int frame_eq(kbox_frame_t a, kbox_frame_t b)
{
	return a.size == b.size && (a.size == 0 || memcmp(a.data, b.data, a.size) == 0);
}

static int contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return 1;
	return 0;
}

static kbox_auth_t *auth_with_key(const char *key, size_t history)
{
	return kbox_auth_new("hmac-sha256", key, strlen(key), history, NULL);
}

/* Decode [DELIM, sig, h, p, m, c] with AUTH. SIG NULL means "sign with AUTH". */
static kbox_msg_t *decode_dicts(kbox_auth_t *auth, const char *h, const char *p, const char *m,
                                const char *c, const char *sig, kbox_error_t *err)
{
	char good[65];
	kbox_frame_t f[6];

	f[0] = str_frame(KBOX_DELIMITER);
	f[2] = str_frame(h);
	f[3] = str_frame(p);
	f[4] = str_frame(m);
	f[5] = str_frame(c);
	kbox_auth_sign(auth, &f[2], good);
	f[1] = str_frame(sig ? sig : good);
	return kbox_msg_decode(auth, f, 6, err);
}

/* The named entry of vectors[SECTION]. Borrowed. */
static json_t *vector(const char *section, const char *name)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(vectors, section), i, v)
	{
		if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0)
			return v;
	}
	return NULL;
}

static const char *jstr(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/* Frame views over a zmsg_t (borrowed from it). Returns the count. */
static size_t frames_of_zmsg(zmsg_t *zmsg, kbox_frame_t *out, size_t max)
{
	size_t n = 0;
	for (zframe_t *f = zmsg_first(zmsg); f && n < max; f = zmsg_next(zmsg), n++) {
		out[n].data = zframe_data(f);
		out[n].size = zframe_size(f);
	}
	return n;
}

/* ---- signatures ---- */

TEST(signature_matches_jupyter_client_for_every_vector)
{
	size_t i, checked = 0;
	json_t *v;

	json_array_foreach(json_object_get(vectors, "signatures"), i, v)
	{
		kbox_frame_t parts[4];
		char sig[65];
		const char *key = jstr(v, "key");
		kbox_auth_t *auth;

		if (!json_is_true(json_object_get(v, "supported")))
			continue;
		auth = kbox_auth_new(jstr(v, "scheme"), key, strlen(key), 0, NULL);
		REQUIRE(auth != NULL);
		for (int k = 0; k < 4; k++)
			parts[k] = str_frame(jstr(v, DICT_NAMES[k]));
		memset(sig, 'x', sizeof sig);
		kbox_auth_sign(auth, parts, sig);
		if (strcmp(sig, jstr(v, "signature")) != 0)
			printf("# vector %s\n", jstr(v, "name"));
		CHECK_STR_EQ(sig, jstr(v, "signature"));
		kbox_auth_destroy(&auth);
		CHECK(auth == NULL);
		checked++;
	}
	CHECK_INT_EQ(checked, 6);
}

TEST(verify_accepts_every_jupyter_client_signature)
{
	size_t i;
	json_t *v;

	json_array_foreach(json_object_get(vectors, "signatures"), i, v)
	{
		kbox_frame_t parts[4];
		kbox_error_t err = {0};
		const char *key = jstr(v, "key"), *sig = jstr(v, "signature");
		kbox_auth_t *auth;

		if (!json_is_true(json_object_get(v, "supported")))
			continue;
		auth = kbox_auth_new(jstr(v, "scheme"), key, strlen(key), 0, NULL);
		REQUIRE(auth != NULL);
		for (int k = 0; k < 4; k++)
			parts[k] = str_frame(jstr(v, DICT_NAMES[k]));
		CHECK_INT_EQ(kbox_auth_verify(auth, parts, sig, strlen(sig), &err), 0);
		CHECK_INT_EQ(kbox_auth_history_size(auth), 0);
		kbox_auth_destroy(&auth);
	}
}

TEST(empty_key_signs_with_empty_string)
{
	json_t *v = vector("signatures", "empty_key");
	kbox_frame_t parts[4];
	char sig[65] = "not touched";
	kbox_auth_t *auth;

	REQUIRE(v != NULL);
	CHECK_STR_EQ(jstr(v, "signature"), "");
	auth = kbox_auth_new("hmac-sha256", "", 0, 0, NULL);
	REQUIRE(auth != NULL);
	for (int k = 0; k < 4; k++)
		parts[k] = str_frame(jstr(v, DICT_NAMES[k]));
	kbox_auth_sign(auth, parts, sig);
	CHECK_STR_EQ(sig, "");
	kbox_auth_destroy(&auth);
}

TEST(signature_excludes_buffers)
{
	json_t *v = vector("signatures", "buffers_not_signed");
	json_t *m = vector("messages", "comm_msg_with_buffers");
	frames_t fr;
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_msg_t *msg;
	unsigned char *b;
	kbox_error_t err = {0};

	REQUIRE(v != NULL && m != NULL && auth != NULL);
	CHECK_INT_EQ(json_array_size(json_object_get(v, "buffers_b64")), 2);
	/* change a byte of the last buffer: the message still verifies */
	REQUIRE(frames_from_b64(&fr, json_object_get(m, "frames_b64")) == 0);
	b = (unsigned char *)fr.f[fr.n - 1].data;
	b[0] ^= 0x55;
	msg = kbox_msg_decode(auth, fr.f, fr.n, &err);
	CHECK(msg != NULL);
	if (msg) {
		CHECK_INT_EQ(kbox_msg_buffer_count(msg), 2);
		CHECK(frame_eq(kbox_msg_buffer(msg, 1), fr.f[fr.n - 1]));
	}
	kbox_msg_destroy(&msg);
	frames_free(&fr);
	kbox_auth_destroy(&auth);
}

TEST(unsupported_scheme_is_refused_naming_it)
{
	json_t *v = vector("signatures", "hmac_sha512_unsupported");
	const char *schemes[] = {"hmac-sha512", "hmac-md5", "HMAC-SHA256", "rot13", ""};
	kbox_error_t err;

	REQUIRE(v != NULL);
	CHECK_STR_EQ(jstr(v, "scheme"), "hmac-sha512");
	CHECK_INT_EQ(strlen(jstr(v, "signature")), 128);
	for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++) {
		kbox_auth_t *auth;
		memset(&err, 0, sizeof err);
		auth = kbox_auth_new(schemes[i], "secret", 6, 0, &err);
		CHECK(auth == NULL);
		CHECK_INT_EQ(err.code, KBOX_E_UNSUPPORTED);
		if (schemes[i][0])
			CHECK_CONTAINS(err.msg, schemes[i]);
		kbox_auth_destroy(&auth);
	}
}

TEST(verify_checks_length_before_content)
{
	json_t *v = vector("signatures", "basic");
	kbox_frame_t parts[4];
	char longer[130];
	kbox_error_t err = {0};
	kbox_auth_t *auth;

	REQUIRE(v != NULL);
	auth = auth_with_key(jstr(v, "key"), 0);
	REQUIRE(auth != NULL);
	for (int k = 0; k < 4; k++)
		parts[k] = str_frame(jstr(v, DICT_NAMES[k]));
	/* the right 64 digits followed by more: must not match as a prefix */
	snprintf(longer, sizeof longer, "%s%s", jstr(v, "signature"), "00");
	CHECK_INT_EQ(kbox_auth_verify(auth, parts, longer, strlen(longer), &err), -1);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	memset(&err, 0, sizeof err);
	CHECK_INT_EQ(kbox_auth_verify(auth, parts, longer, 63, &err), -1);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	kbox_auth_destroy(&auth);
}

/* ---- decoding jupyter_client's messages ---- */

/* Decode the vector message NAME and check every field against "expect". */
static void check_python_message(const char *name)
{
	json_t *m = vector("messages", name), *ex, *ids, *bufs;
	frames_t fr, idf, buf;
	kbox_auth_t *auth;
	kbox_msg_t *msg;
	kbox_error_t err = {0};
	const char *parent;

	REQUIRE(m != NULL);
	ex = json_object_get(m, "expect");
	auth = auth_with_key(jstr(m, "key"), 0);
	REQUIRE(auth != NULL);
	REQUIRE(frames_from_b64(&fr, json_object_get(m, "frames_b64")) == 0);
	REQUIRE(frames_from_b64(&idf, json_object_get(m, "identities_b64")) == 0);
	REQUIRE(frames_from_b64(&buf, json_object_get(ex, "buffers_b64")) == 0);

	msg = kbox_msg_decode(auth, fr.f, fr.n, &err);
	if (!msg)
		printf("# %s: %s\n", name, err.msg);
	REQUIRE(msg != NULL);
	CHECK_STR_EQ(kbox_msg_type(msg), jstr(ex, "msg_type"));
	CHECK_STR_EQ(kbox_msg_id(msg), jstr(ex, "msg_id"));
	parent = jstr(ex, "parent_msg_id");
	if (parent)
		CHECK_STR_EQ(kbox_msg_parent_id(msg), parent);
	else
		CHECK(kbox_msg_parent_id(msg) == NULL);
	CHECK_STR_EQ(kbox_msg_session(msg), jstr(ex, "session"));
	CHECK_STR_EQ(jstr(kbox_msg_header(msg), "username"), jstr(ex, "username"));
	CHECK(json_equal(kbox_msg_content(msg), json_object_get(ex, "content")));
	CHECK(json_is_object(kbox_msg_metadata(msg)));
	CHECK(json_is_object(kbox_msg_parent_header(msg)));
	CHECK(fabs(kbox_msg_date(msg) - json_real_value(json_object_get(ex, "date_epoch"))) < 1e-6);
	/* the signature is the frame after the delimiter */
	CHECK(frame_eq_str(fr.f[idf.n + 1], kbox_msg_signature(msg)));

	ids = json_object_get(m, "identities_b64");
	CHECK_INT_EQ(kbox_msg_identity_count(msg), json_array_size(ids));
	for (size_t i = 0; i < idf.n && i < kbox_msg_identity_count(msg); i++)
		CHECK(frame_eq(kbox_msg_identity(msg, i), idf.f[i]));

	bufs = json_object_get(ex, "buffers_b64");
	CHECK_INT_EQ(kbox_msg_buffer_count(msg), json_array_size(bufs));
	for (size_t i = 0; i < buf.n && i < kbox_msg_buffer_count(msg); i++)
		CHECK(frame_eq(kbox_msg_buffer(msg, i), buf.f[i]));

	CHECK_INT_EQ(kbox_auth_history_size(auth), 1);
	kbox_msg_destroy(&msg);
	CHECK(msg == NULL);
	frames_free(&fr);
	frames_free(&idf);
	frames_free(&buf);
	kbox_auth_destroy(&auth);
}

TEST(decodes_python_request_without_identities)
{
	check_python_message("execute_request");
}

TEST(decodes_python_reply_keeping_binary_identities)
{
	check_python_message("execute_reply_with_identities");
}

TEST(decodes_python_unicode_message_with_unicode_key)
{
	json_t *m = vector("messages", "stream_unicode");
	REQUIRE(m != NULL);
	check_python_message("stream_unicode");
}

TEST(decodes_python_message_carrying_buffers)
{
	check_python_message("comm_msg_with_buffers");
}

TEST(decode_zmsg_matches_decode_and_leaves_zmsg_alone)
{
	json_t *m = vector("messages", "execute_reply_with_identities");
	frames_t fr;
	zmsg_t *zmsg;
	kbox_auth_t *auth;
	kbox_msg_t *msg;
	kbox_error_t err = {0};
	kbox_frame_t after[MAX_FRAMES];
	size_t n;

	REQUIRE(m != NULL);
	auth = auth_with_key(jstr(m, "key"), 0);
	REQUIRE(frames_from_b64(&fr, json_object_get(m, "frames_b64")) == 0);
	zmsg = zmsg_new();
	for (size_t i = 0; i < fr.n; i++)
		zmsg_addmem(zmsg, fr.f[i].data, fr.f[i].size);
	msg = kbox__msg_decode_zmsg(auth, zmsg, &err);
	CHECK(msg != NULL);
	if (msg) {
		CHECK_STR_EQ(kbox_msg_type(msg), "execute_reply");
		CHECK_INT_EQ(kbox_msg_identity_count(msg), 2);
	}
	n = frames_of_zmsg(zmsg, after, MAX_FRAMES);
	CHECK_INT_EQ(n, fr.n);
	for (size_t i = 0; i < n && i < fr.n; i++)
		CHECK(frame_eq(after[i], fr.f[i]));
	kbox_msg_destroy(&msg);
	zmsg_destroy(&zmsg);
	frames_free(&fr);
	kbox_auth_destroy(&auth);
}

/* kbox__msg_decode_zmsg of [DELIM, sig, h, p, m, c] signed with AUTH. */
static kbox_msg_t *decode_zmsg_dicts(kbox_auth_t *auth, const char *h, const char *p, const char *m,
                                     const char *c, kbox_error_t *err)
{
	kbox_frame_t f[4] = {str_frame(h), str_frame(p), str_frame(m), str_frame(c)};
	char sig[65];
	zmsg_t *z = zmsg_new();
	kbox_msg_t *msg;

	kbox_auth_sign(auth, f, sig);
	zmsg_addstr(z, KBOX_DELIMITER);
	zmsg_addstr(z, sig);
	for (int i = 0; i < 4; i++)
		zmsg_addmem(z, f[i].data, f[i].size);
	msg = kbox__msg_decode_zmsg(auth, z, err);
	zmsg_destroy(&z);
	return msg;
}

/* The client's decoding leaves a flat header or parent (strings of plain
 * ASCII) unparsed until asked: what it answers must be what jansson reads
 * in the text, whether the text is flat or not. */
TEST(decode_zmsg_reads_headers_as_jansson_does)
{
	static const char *const headers[] = {
	        GOOD_HEADER,
	        " { \"msg_id\" : \"a\" ,\n\t\"msg_type\":\"status\", \"session\":\"s\" } \r\n",
	        "{\"msg_id\":\"a\",\"msg_type\":\"x\",\"msg_type\":\"status\"}", /* the last */
	        "{\"msg_id\":\"a\\\"b\",\"msg_type\":\"st\\u0061tus\",\"session\":\"\"}",
	        "{\"msg_id\":\"\xc3\xa9\",\"msg_type\":\"status\",\"n\":1,\"o\":{}}",
	};
	static const char *const parents[] = {"{}", "{\"msg_id\":\"p-1\"}",
	                                      "{\"msg_id\":\"p\\/2\",\"x\":[1]}",
	                                      " {\"msg_id\":\"p-1\",\"msg_id\":\"p-3\"} "};
	kbox_auth_t *auth = auth_with_key(KEY, 1000);

	REQUIRE(auth != NULL);
	for (size_t i = 0; i < sizeof headers / sizeof *headers; i++)
		for (size_t j = 0; j < sizeof parents / sizeof *parents; j++) {
			kbox_error_t err = {0};
			kbox_msg_t *msg = decode_zmsg_dicts(auth, headers[i], parents[j], "{}",
			                                    "{}", &err);
			json_t *h = json_loads(headers[i], 0, NULL);
			json_t *p = json_loads(parents[j], 0, NULL);
			const char *ps = jstr(p, "msg_id");

			REQUIRE(msg != NULL && h != NULL && p != NULL);
			CHECK_STR_EQ(kbox_msg_id(msg), jstr(h, "msg_id"));
			CHECK_STR_EQ(kbox_msg_type(msg), jstr(h, "msg_type"));
			CHECK_STR_EQ(kbox_msg_session(msg),
			             jstr(h, "session") ? jstr(h, "session") : "");
			if (ps)
				CHECK_STR_EQ(kbox_msg_parent_id(msg), ps);
			else
				CHECK(kbox_msg_parent_id(msg) == NULL);
			CHECK(json_equal(kbox_msg_header(msg), h));
			CHECK(json_equal(kbox_msg_parent_header(msg), p));
			/* once parsed, the same answers */
			CHECK_STR_EQ(kbox_msg_type(msg), jstr(h, "msg_type"));
			kbox_msg_destroy(&msg);
			json_decref(h);
			json_decref(p);
		}
	kbox_auth_destroy(&auth);
}

/* What kbox_msg_decode refuses in a header or parent, the client's
 * decoding refuses too (flat or not, it is validated when it comes). */
TEST(decode_zmsg_refuses_bad_headers_and_parents)
{
	static const char *const bad[] = {
	        "{\"a\":",
	        "{} trailing",
	        "",
	        "[]",
	        "\"text\"",
	        "null",
	        "{\"a\":\"b\",}",
	        "{\"a\":\"b\"\"c\":\"d\"}",
	        "{a:\"b\"}",
	        "{\"a\"}",
	        "{\"a\":\"b\"}}",
	        "{\"a\":\"b\"",
	        "{\"a\":\"\x01\"}",
	};
	kbox_auth_t *auth = auth_with_key(KEY, 1000);

	REQUIRE(auth != NULL);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		for (int which = 0; which < 2; which++) {
			kbox_error_t err = {0};
			kbox_msg_t *msg = decode_zmsg_dicts(auth, which ? GOOD_HEADER : bad[i],
			                                    which ? bad[i] : "{}", "{}", "{}",
			                                    &err);
			if (msg)
				printf("# %s %s was accepted\n", DICT_NAMES[which], bad[i]);
			CHECK(msg == NULL);
			CHECK_INT_EQ(err.code, KBOX_E_PROTOCOL);
			kbox_msg_destroy(&msg);
		}
	{
		kbox_error_t err = {0};
		kbox_msg_t *msg = decode_zmsg_dicts(auth, "{\"msg_id\":\"a\"}", "{}", "{}", "{}",
		                                    &err);
		CHECK(msg == NULL);
		CHECK_INT_EQ(err.code, KBOX_E_PROTOCOL);
		msg = decode_zmsg_dicts(auth, "{\"msg_id\":\"a\",\"msg_type\":7}", "{}", "{}", "{}",
		                        &err);
		CHECK(msg == NULL);
	}
	kbox_auth_destroy(&auth);
}

/* A message of more parts than are held inline (buffers) is received
 * whole, each part as it was sent; with nothing waiting, nothing. */
TEST(parts_recv_takes_every_part_of_a_long_message)
{
	zsock_t *tx = zsock_new_pair("@inproc://unit-wire-parts");
	zsock_t *rx = zsock_new_pair(">inproc://unit-wire-parts");
	kbox__parts_t p;
	size_t bytes = 0;
	const int n = 3 * KBOX__PARTS_INLINE + 5;

	REQUIRE(tx && rx);
	CHECK(kbox__parts_recv(&p, zsock_resolve(rx)) == -1);
	for (int i = 0; i < n; i++) {
		char buf[80];
		int len = snprintf(buf, sizeof buf, "part %d %s", i,
		                   i % 2 ? "" : "long enough to be allocated by libzmq");
		bytes += (size_t)len;
		zmq_send(zsock_resolve(tx), buf, (size_t)len, i + 1 < n ? ZMQ_SNDMORE : 0);
	}
	zsock_set_rcvtimeo(rx, 2000);
	REQUIRE(zsock_events(rx) & ZMQ_POLLIN);
	REQUIRE(kbox__parts_recv(&p, zsock_resolve(rx)) == 0);
	CHECK_INT_EQ(p.n, n);
	CHECK_INT_EQ(p.bytes, bytes);
	for (int i = 0; i < n && (size_t)i < p.n; i++) {
		char buf[80];
		int len = snprintf(buf, sizeof buf, "part %d %s", i,
		                   i % 2 ? "" : "long enough to be allocated by libzmq");
		CHECK(p.frames[i].size == (size_t)len &&
		      memcmp(p.frames[i].data, buf, (size_t)len) == 0);
	}
	kbox__parts_close(&p);
	CHECK(kbox__parts_recv(&p, zsock_resolve(rx)) == -1);
	zsock_destroy(&rx);
	zsock_destroy(&tx);
}

/* kbox__msg_content_is answers as the parsed content does, whether the
 * content is still flat text, text jansson must read, or parsed. */
TEST(content_is_answers_as_the_parsed_content)
{
	static const struct {
		const char *content, *value;
		bool want;
	} cases[] = {
	        {"{\"execution_state\":\"idle\"}", "idle", true},
	        {" { \"execution_state\" : \"busy\" } ", "idle", false},
	        {"{\"execution_state\":\"idle\",\"execution_state\":\"busy\"}", "idle", false},
	        {"{\"execution_state\":\"id\\u006ce\"}", "idle", true},
	        {"{\"execution_state\":1}", "idle", false},
	        {"{\"other\":\"idle\"}", "idle", false},
	        {"{\"execution_state\":\"idl\"}", "idle", false},
	        {"not json", "idle", false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		for (int parsed = 0; parsed < 2; parsed++) {
			kbox_auth_t *auth = auth_with_key(KEY, 0); /* (a message twice) */
			kbox_error_t err = {0};
			kbox_msg_t *msg = decode_zmsg_dicts(auth, GOOD_HEADER, "{}", "{}",
			                                    cases[i].content, &err);
			REQUIRE(msg != NULL);
			if (parsed)
				kbox_msg_content(msg);
			if (kbox__msg_content_is(msg, "execution_state", cases[i].value) !=
			    cases[i].want)
				printf("# %s (parsed %d)\n", cases[i].content, parsed);
			CHECK(kbox__msg_content_is(msg, "execution_state", cases[i].value) ==
			      cases[i].want);
			kbox_msg_destroy(&msg);
			kbox_auth_destroy(&auth);
		}
}

TEST(python_message_with_wrong_key_is_refused)
{
	json_t *m = vector("messages", "execute_request");
	frames_t fr;
	kbox_auth_t *auth = auth_with_key("some other key", 0);
	kbox_error_t err = {0};
	kbox_msg_t *msg;

	REQUIRE(m != NULL && auth != NULL);
	REQUIRE(frames_from_b64(&fr, json_object_get(m, "frames_b64")) == 0);
	msg = kbox_msg_decode(auth, fr.f, fr.n, &err);
	CHECK(msg == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	CHECK_INT_EQ(kbox_auth_history_size(auth), 0);
	kbox_msg_destroy(&msg);
	frames_free(&fr);
	kbox_auth_destroy(&auth);
}

TEST(empty_key_accepts_any_signature)
{
	json_t *m = vector("messages", "execute_request");
	frames_t fr;
	kbox_auth_t *auth = kbox_auth_new("hmac-sha256", "", 0, 0, NULL);
	kbox_msg_t *msg;

	REQUIRE(m != NULL && auth != NULL);
	REQUIRE(frames_from_b64(&fr, json_object_get(m, "frames_b64")) == 0);
	msg = kbox_msg_decode(auth, fr.f, fr.n, NULL);
	CHECK(msg != NULL);
	kbox_msg_destroy(&msg);
	frames_free(&fr);
	kbox_auth_destroy(&auth);
}

/* ---- encode → decode ---- */

TEST(encode_then_decode_round_trips_every_part)
{
	json_t *content = json_pack("{s:s, s:b}", "code", "print('h\xc3\xa9llo \xe2\x98\x83')",
	                            "silent", 0);
	kbox_msg_t *parent = kbox_msg_new("execute_request", "sess-1", "alice", NULL);
	kbox_msg_t *msg = kbox_msg_new("execute_request", "sess-1", "alice", &content);
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_msg_t *back;
	kbox_error_t err = {0};
	zmsg_t *zmsg;
	kbox_frame_t f[MAX_FRAMES];
	char sig[65];
	size_t n;
	const unsigned char bin[] = {0, 1, 2, 0xff, 0xfe};

	REQUIRE(parent && msg && auth);
	CHECK(content == NULL);
	kbox_msg_set_parent(msg, parent);
	json_object_set_new(kbox_msg_metadata(msg), "note",
	                    json_string("\xc3\xbc"
	                                "ber"));
	CHECK_INT_EQ(kbox_msg_add_identity(msg, "\x00peer", 5), 0);
	CHECK_INT_EQ(kbox_msg_add_buffer(msg, bin, sizeof bin), 0);
	CHECK_INT_EQ(kbox_msg_add_buffer(msg, "", 0), 0);

	zmsg = kbox__msg_encode(msg, auth, &err);
	REQUIRE(zmsg != NULL);
	n = frames_of_zmsg(zmsg, f, MAX_FRAMES);
	REQUIRE(n == 9);
	CHECK(f[0].size == 5 && memcmp(f[0].data, "\x00peer", 5) == 0);
	CHECK(frame_eq_str(f[1], KBOX_DELIMITER));
	kbox_auth_sign(auth, &f[3], sig);
	CHECK(frame_eq_str(f[2], sig));
	CHECK_INT_EQ(f[2].size, 64);
	CHECK(f[7].size == sizeof bin && memcmp(f[7].data, bin, sizeof bin) == 0);
	CHECK_INT_EQ(f[8].size, 0);

	back = kbox_msg_decode(auth, f, n, &err);
	if (!back)
		printf("# %s\n", err.msg);
	REQUIRE(back != NULL);
	CHECK_STR_EQ(kbox_msg_type(back), "execute_request");
	CHECK_STR_EQ(kbox_msg_id(back), kbox_msg_id(msg));
	CHECK_STR_EQ(kbox_msg_parent_id(back), kbox_msg_id(parent));
	CHECK_STR_EQ(kbox_msg_session(back), "sess-1");
	CHECK(json_equal(kbox_msg_header(back), kbox_msg_header(msg)));
	CHECK(json_equal(kbox_msg_parent_header(back), kbox_msg_header(parent)));
	CHECK(json_equal(kbox_msg_metadata(back), kbox_msg_metadata(msg)));
	CHECK(json_equal(kbox_msg_content(back), kbox_msg_content(msg)));
	CHECK_STR_EQ(kbox_msg_signature(back), sig);
	CHECK_STR_EQ(kbox_msg_signature(msg), "");
	CHECK(fabs(kbox_msg_date(back) - kbox_msg_date(msg)) < 1e-9);
	CHECK_INT_EQ(kbox_msg_identity_count(back), 1);
	if (kbox_msg_identity_count(back) == 1)
		CHECK(frame_eq(kbox_msg_identity(back, 0), f[0]));
	CHECK_INT_EQ(kbox_msg_buffer_count(back), 2);
	if (kbox_msg_buffer_count(back) == 2) {
		CHECK(frame_eq(kbox_msg_buffer(back, 0), f[7]));
		CHECK_INT_EQ(kbox_msg_buffer(back, 1).size, 0);
	}
	kbox_msg_destroy(&back);
	zmsg_destroy(&zmsg);
	kbox_msg_destroy(&msg);
	kbox_msg_destroy(&parent);
	kbox_auth_destroy(&auth);
}

TEST(encode_writes_compact_json_dicts)
{
	kbox_msg_t *msg = kbox_msg_new("kernel_info_request", "s", "u", NULL);
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	zmsg_t *zmsg;
	kbox_frame_t f[MAX_FRAMES];
	size_t n;
	char *header;

	REQUIRE(msg && auth);
	zmsg = kbox__msg_encode(msg, auth, NULL);
	REQUIRE(zmsg != NULL);
	n = frames_of_zmsg(zmsg, f, MAX_FRAMES);
	REQUIRE(n == 6);
	header = strndup(f[2].data, f[2].size);
	CHECK(strstr(header, ": ") == NULL && strstr(header, ", ") == NULL);
	CHECK(frame_eq_str(f[3], "{}"));
	CHECK(frame_eq_str(f[4], "{}"));
	CHECK(frame_eq_str(f[5], "{}"));
	free(header);
	zmsg_destroy(&zmsg);
	kbox_msg_destroy(&msg);
	kbox_auth_destroy(&auth);
}

TEST(encode_with_empty_key_sends_empty_signature)
{
	kbox_msg_t *msg = kbox_msg_new("kernel_info_request", "s", "u", NULL);
	kbox_auth_t *auth = kbox_auth_new("hmac-sha256", "", 0, 0, NULL);
	zmsg_t *zmsg;
	kbox_frame_t f[MAX_FRAMES];

	REQUIRE(msg && auth);
	zmsg = kbox__msg_encode(msg, auth, NULL);
	REQUIRE(zmsg != NULL);
	REQUIRE(frames_of_zmsg(zmsg, f, MAX_FRAMES) == 6);
	CHECK(frame_eq_str(f[0], KBOX_DELIMITER));
	CHECK_INT_EQ(f[1].size, 0);
	zmsg_destroy(&zmsg);
	kbox_msg_destroy(&msg);
	kbox_auth_destroy(&auth);
}

/* ---- malformed frames ---- */

TEST(no_delimiter_is_a_protocol_error)
{
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_frame_t f[6];
	kbox_error_t err = {0};
	char sig[65];
	kbox_msg_t *msg;

	REQUIRE(auth != NULL);
	f[0] = str_frame("<IDS|MSG"); /* near miss */
	f[2] = str_frame(GOOD_HEADER);
	f[3] = f[4] = f[5] = str_frame("{}");
	kbox_auth_sign(auth, &f[2], sig);
	f[1] = str_frame(sig);
	msg = kbox_msg_decode(auth, f, 6, &err);
	CHECK(msg == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_PROTOCOL);
	CHECK_CONTAINS(err.msg, "delimiter");
	memset(&err, 0, sizeof err);
	msg = kbox_msg_decode(auth, f, 0, &err);
	CHECK(msg == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_PROTOCOL);
	kbox_auth_destroy(&auth);
}

TEST(fewer_than_five_frames_after_delimiter_is_a_protocol_error)
{
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_frame_t f[7];
	kbox_error_t err;
	char sig[65];

	REQUIRE(auth != NULL);
	f[0] = str_frame("ident");
	f[1] = str_frame(KBOX_DELIMITER);
	f[3] = str_frame(GOOD_HEADER);
	f[4] = f[5] = f[6] = str_frame("{}");
	kbox_auth_sign(auth, &f[3], sig);
	f[2] = str_frame(sig);
	for (size_t n = 1; n < 7; n++) {
		memset(&err, 0, sizeof err);
		CHECK(kbox_msg_decode(auth, f, n, &err) == NULL);
		CHECK_INT_EQ(err.code, KBOX_E_PROTOCOL);
	}
	CHECK_INT_EQ(kbox_auth_history_size(auth), 0);
	kbox_auth_destroy(&auth);
}

TEST(empty_signature_is_refused_when_keyed)
{
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_error_t err = {0};

	REQUIRE(auth != NULL);
	CHECK(decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{}", "", &err) == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	kbox_auth_destroy(&auth);
}

TEST(wrong_signature_is_an_auth_error)
{
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_frame_t parts[4] = {str_frame(GOOD_HEADER), str_frame("{}"), str_frame("{}"),
	                         str_frame("{}")};
	kbox_error_t err = {0};
	char sig[65];

	REQUIRE(auth != NULL);
	kbox_auth_sign(auth, parts, sig);
	sig[10] = sig[10] == '0' ? '1' : '0';
	CHECK(decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{}", sig, &err) == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	/* a correct signature for different content */
	memset(&err, 0, sizeof err);
	kbox_auth_sign(auth, parts, sig);
	CHECK(decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{\"x\":1}", sig, &err) == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	CHECK_INT_EQ(kbox_auth_history_size(auth), 0);
	kbox_auth_destroy(&auth);
}

TEST(signature_of_wrong_length_is_an_auth_error)
{
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_frame_t parts[4] = {str_frame(GOOD_HEADER), str_frame("{}"), str_frame("{}"),
	                         str_frame("{}")};
	kbox_error_t err;
	char sig[65], longer[140];

	REQUIRE(auth != NULL);
	kbox_auth_sign(auth, parts, sig);
	snprintf(longer, sizeof longer, "%s%s", sig, sig);
	memset(&err, 0, sizeof err);
	CHECK(decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{}", longer, &err) == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	sig[63] = '\0';
	memset(&err, 0, sizeof err);
	CHECK(decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{}", sig, &err) == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	kbox_auth_destroy(&auth);
}

TEST(non_hex_or_uppercase_signature_is_an_auth_error)
{
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_frame_t parts[4] = {str_frame(GOOD_HEADER), str_frame("{}"), str_frame("{}"),
	                         str_frame("{}")};
	kbox_error_t err;
	char sig[65], upper[65];

	REQUIRE(auth != NULL);
	kbox_auth_sign(auth, parts, sig);
	for (int i = 0; i < 65; i++)
		upper[i] = (char)toupper((unsigned char)sig[i]);
	sig[0] = 'g';
	memset(&err, 0, sizeof err);
	CHECK(decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{}", sig, &err) == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	memset(&err, 0, sizeof err);
	CHECK(decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{}", upper, &err) == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	kbox_auth_destroy(&auth);
}

/* Decode a correctly signed message whose dict number BAD is TEXT; expect a
 * protocol error naming that dict. */
static void check_bad_dict(int bad, const char *text, const char *why)
{
	const char *d[4] = {GOOD_HEADER, "{}", "{}", "{}"};
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_error_t err = {0};
	kbox_msg_t *msg;

	REQUIRE(auth != NULL);
	d[bad] = text;
	msg = decode_dicts(auth, d[0], d[1], d[2], d[3], NULL, &err);
	if (msg)
		printf("# %s in %s was accepted\n", why, DICT_NAMES[bad]);
	CHECK(msg == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_PROTOCOL);
	CHECK_CONTAINS(err.msg, DICT_NAMES[bad]);
	/* a refused message is not remembered */
	CHECK_INT_EQ(kbox_auth_history_size(auth), 0);
	kbox_msg_destroy(&msg);
	kbox_auth_destroy(&auth);
}

TEST(invalid_json_in_each_dict_is_a_protocol_error)
{
	for (int i = 0; i < 4; i++) {
		check_bad_dict(i, "{\"a\":", "truncated JSON");
		check_bad_dict(i, "{} trailing", "trailing bytes");
		check_bad_dict(i, "", "empty frame");
	}
}

TEST(non_object_dicts_are_a_protocol_error)
{
	for (int i = 0; i < 4; i++) {
		check_bad_dict(i, "[]", "an array");
		check_bad_dict(i, "\"text\"", "a string");
		check_bad_dict(i, "null", "null");
	}
}

TEST(header_without_msg_type_is_a_protocol_error)
{
	check_bad_dict(0, "{\"msg_id\":\"abc\"}", "no msg_type");
	check_bad_dict(0, "{\"msg_id\":\"abc\",\"msg_type\":7}", "numeric msg_type");
	check_bad_dict(0, "{\"msg_type\":\"status\"}", "no msg_id");
}

/* Decode a signed message whose dict BAD is TEXT; the string member KEY of
 * that dict must come out as WANT. */
static void check_repaired_dict(int bad, const char *text, const char *key, const char *want)
{
	const char *d[4] = {GOOD_HEADER, "{}", "{}", "{}"};
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_error_t err = {0};
	kbox_msg_t *msg;
	json_t *dict;

	REQUIRE(auth != NULL);
	d[bad] = text;
	msg = decode_dicts(auth, d[0], d[1], d[2], d[3], NULL, &err);
	REQUIRE(msg != NULL);
	dict = bad == 0   ? kbox_msg_header(msg)
	       : bad == 1 ? kbox_msg_parent_header(msg)
	       : bad == 2 ? kbox_msg_metadata(msg)
	                  : kbox_msg_content(msg);
	CHECK_STR_EQ(json_string_value(json_object_get(dict, key)), want);
	kbox_msg_destroy(&msg);
	kbox_auth_destroy(&auth);
}

/* As jupyter_client does (decode("utf8", "replace")): each invalid byte of
 * a signed message reads as U+FFFD; nothing is dropped. */
TEST(non_utf8_bytes_read_as_replacement_characters)
{
	check_repaired_dict(3, "{\"text\":\"\xff\xfe bad\"}", "text",
	                    "\xef\xbf\xbd\xef\xbf\xbd bad");
	check_repaired_dict(3, "{\"text\":\"a\xc3\"}", "text", "a\xef\xbf\xbd");
	check_repaired_dict(2, "{\"k\":\"\xc0\xaf\"}", "k", "\xef\xbf\xbd\xef\xbf\xbd");
	check_repaired_dict(3, "{\"k\":\"\xed\xa0\x80\"}", "k",
	                    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* a surrogate */
	/* one U+FFFD per maximal ill-formed subpart, as Python's "replace" */
	check_repaired_dict(3,
	                    "{\"k\":\"\xe2\x82"
	                    "A\"}",
	                    "k",
	                    "\xef\xbf\xbd"
	                    "A");
	check_repaired_dict(3, "{\"k\":\"\xf0\x9f\x98\"}", "k", "\xef\xbf\xbd");
	/* repair never makes broken JSON acceptable */
	check_bad_dict(3, "{\"text\":\"\xff\"", "invalid UTF-8 in truncated JSON");
}

/* ---- replay protection ---- */

TEST(replayed_message_is_refused_the_second_time)
{
	json_t *m = vector("messages", "execute_request");
	frames_t fr;
	kbox_auth_t *auth;
	kbox_msg_t *first, *second;
	kbox_error_t err = {0};

	REQUIRE(m != NULL);
	auth = auth_with_key(jstr(m, "key"), 0);
	REQUIRE(auth != NULL);
	REQUIRE(frames_from_b64(&fr, json_object_get(m, "frames_b64")) == 0);
	first = kbox_msg_decode(auth, fr.f, fr.n, &err);
	CHECK(first != NULL);
	second = kbox_msg_decode(auth, fr.f, fr.n, &err);
	CHECK(second == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	CHECK(contains_ci(err.msg, "replay") || contains_ci(err.msg, "duplicate"));
	CHECK_INT_EQ(kbox_auth_history_size(auth), 1);
	kbox_msg_destroy(&first);
	kbox_msg_destroy(&second);
	frames_free(&fr);
	kbox_auth_destroy(&auth);
}

TEST(remember_refuses_a_signature_seen_before)
{
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_error_t err = {0};
	const char *s = "4a13e29cb2319cb1b09f5834b4962c53ce135e6a23cc44bb5b3f269386b49ee3";

	REQUIRE(auth != NULL);
	CHECK_INT_EQ(kbox_auth_remember(auth, s, 64, &err), 0);
	CHECK_INT_EQ(kbox_auth_remember(auth, s, 64, &err), -1);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	CHECK_INT_EQ(kbox_auth_history_size(auth), 1);
	kbox_auth_destroy(&auth);
}

/* A signed message whose content is an array of N empty arrays: tiny on
 * the wire, ~260 bytes apiece once decoded. */
static kbox_msg_t *decode_many_arrays(kbox_auth_t *auth, size_t n, kbox_error_t *err)
{
	json_t *arr = json_array(), *content;
	kbox_msg_t *m, *got;
	kbox_frame_t f[MAX_FRAMES];
	zmsg_t *z;
	size_t nf;
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, json_array());
	content = json_pack("{s:s, s:o}", "comm_id", "x", "data", arr);
	m = kbox_msg_new("comm_msg", "s", "u", &content);
	z = kbox__msg_encode(m, auth, NULL);
	kbox_msg_destroy(&m);
	nf = frames_of_zmsg(z, f, MAX_FRAMES);
	got = kbox_msg_decode(auth, f, nf, err);
	zmsg_destroy(&z);
	return got;
}

TEST(message_that_would_take_too_much_memory_to_decode_is_refused_unparsed)
{
	kbox_auth_t *auth = auth_with_key(KEY, 0);
	kbox_error_t err = {0};
	kbox_msg_t *m;

	REQUIRE(auth != NULL);
	/* 1000 arrays: decoded */
	m = decode_many_arrays(auth, 1000, &err);
	CHECK(m != NULL);
	kbox_msg_destroy(&m);
	/* 600000 arrays (1.8 MB of text): counted as ~189 MiB, over the bound */
	m = decode_many_arrays(auth, 600000, &err);
	CHECK(m == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_PROTOCOL);
	CHECK_STR_EQ(err.msg,
	             "message refused: decoding it would take about 189 MiB (at most 128)");
	/* refused before the replay history: the same message is not a replay */
	CHECK_INT_EQ(kbox_auth_history_size(auth), 1);
	kbox_msg_destroy(&m);
	kbox_auth_destroy(&auth);
}

/* Signature I of a sequence, as 64 hex digits: distinct for distinct I
 * and spread like HMAC output (splitmix64), so that the history's table
 * has runs that evictions break and must mend. */
static void nth_sig(unsigned i, char out[65])
{
	for (int k = 0; k < 4; k++) {
		uint64_t z = (uint64_t)i * 4 + (uint64_t)k + 0x9e3779b97f4a7c15ULL;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		z ^= z >> 31;
		snprintf(out + 16 * k, 17, "%016llx", (unsigned long long)z);
	}
}

TEST(replay_history_remembers_exactly_the_last_n_after_many_evictions)
{
	kbox_auth_t *auth = auth_with_key(KEY, 1000);
	kbox_error_t err = {0};
	char s[65];
	int refused = 0, accepted = 0;

	REQUIRE(auth != NULL);
	for (unsigned i = 0; i < 20000; i++) {
		nth_sig(i, s);
		REQUIRE(kbox_auth_remember(auth, s, 64, &err) == 0);
	}
	CHECK_INT_EQ(kbox_auth_history_size(auth), 1000);
	/* each of the last 1000 is remembered; a refusal changes nothing */
	for (unsigned i = 19000; i < 20000; i++) {
		nth_sig(i, s);
		refused += kbox_auth_remember(auth, s, 64, &err) == -1 && err.code == KBOX_E_AUTH;
	}
	CHECK_INT_EQ(refused, 1000);
	/* the one before them was forgotten */
	nth_sig(18999, s);
	accepted += kbox_auth_remember(auth, s, 64, &err) == 0;
	CHECK_INT_EQ(accepted, 1);
	CHECK_INT_EQ(kbox_auth_history_size(auth), 1000);
	/* and it evicted the oldest, 19000, and no other */
	nth_sig(19000, s);
	CHECK_INT_EQ(kbox_auth_remember(auth, s, 64, &err), 0);
	nth_sig(19002, s);
	CHECK_INT_EQ(kbox_auth_remember(auth, s, 64, &err), -1);
	kbox_auth_destroy(&auth);
}

TEST(replay_history_is_bounded_and_forgets_the_oldest)
{
	kbox_auth_t *auth = auth_with_key(KEY, 16);
	zmsg_t *sent[100];
	kbox_frame_t f[MAX_FRAMES];
	kbox_error_t err = {0};
	kbox_msg_t *msg;
	size_t n;
	int accepted = 0;

	REQUIRE(auth != NULL);
	for (int i = 0; i < 100; i++) {
		kbox_msg_t *m = kbox_msg_new("status", "s", "u", NULL);
		sent[i] = kbox__msg_encode(m, auth, NULL);
		kbox_msg_destroy(&m);
		n = frames_of_zmsg(sent[i], f, MAX_FRAMES);
		msg = kbox_msg_decode(auth, f, n, &err);
		accepted += msg != NULL;
		kbox_msg_destroy(&msg);
	}
	CHECK_INT_EQ(accepted, 100);
	CHECK(kbox_auth_history_size(auth) <= 16);
	CHECK(kbox_auth_history_size(auth) > 0);
	/* the newest is still remembered */
	n = frames_of_zmsg(sent[99], f, MAX_FRAMES);
	msg = kbox_msg_decode(auth, f, n, &err);
	CHECK(msg == NULL);
	CHECK_INT_EQ(err.code, KBOX_E_AUTH);
	kbox_msg_destroy(&msg);
	/* the very first has been forgotten and is accepted again */
	n = frames_of_zmsg(sent[0], f, MAX_FRAMES);
	msg = kbox_msg_decode(auth, f, n, &err);
	CHECK(msg != NULL);
	kbox_msg_destroy(&msg);
	CHECK(kbox_auth_history_size(auth) <= 16);
	for (int i = 0; i < 100; i++)
		zmsg_destroy(&sent[i]);
	kbox_auth_destroy(&auth);
}

TEST(empty_key_accepts_empty_signatures_without_replay_check)
{
	kbox_auth_t *auth = kbox_auth_new("hmac-sha256", "", 0, 0, NULL);
	kbox_error_t err = {0};
	kbox_msg_t *a, *b, *c;

	REQUIRE(auth != NULL);
	a = decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{}", "", &err);
	CHECK(a != NULL);
	/* unsigned messages all share the signature "": none is a replay */
	b = decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{\"n\":2}", "", &err);
	CHECK(b != NULL);
	c = decode_dicts(auth, GOOD_HEADER, "{}", "{}", "{}", "", &err);
	CHECK(c != NULL);
	CHECK_INT_EQ(kbox_auth_history_size(auth), 0);
	kbox_msg_destroy(&a);
	kbox_msg_destroy(&b);
	kbox_msg_destroy(&c);
	kbox_auth_destroy(&auth);
}

/* ---- new messages and dates ---- */

static int is_uuid4(const char *s)
{
	if (!s || strlen(s) != 36)
		return 0;
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) {
			return 0;
		}
	}
	return s[14] == '4' && strchr("89ab", s[19]) != NULL;
}

/* "YYYY-MM-DDTHH:MM:SS.ffffffZ" */
static int is_iso8601_utc_micro(const char *s)
{
	const char *pat = "dddd-dd-ddTdd:dd:dd.ddddddZ";
	if (!s || strlen(s) != strlen(pat))
		return 0;
	for (size_t i = 0; pat[i]; i++) {
		if (pat[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != pat[i])
			return 0;
	}
	return 1;
}

TEST(new_message_header_has_every_field)
{
	json_t *content = json_pack("{s:s}", "code", "1");
	kbox_msg_t *msg = kbox_msg_new("execute_request", "sess-9", "bob", &content);
	json_t *h;
	double now = (double)time(NULL);

	REQUIRE(msg != NULL);
	CHECK(content == NULL);
	h = kbox_msg_header(msg);
	CHECK(is_uuid4(jstr(h, "msg_id")));
	CHECK_STR_EQ(kbox_msg_id(msg), jstr(h, "msg_id"));
	CHECK_STR_EQ(jstr(h, "msg_type"), "execute_request");
	CHECK_STR_EQ(kbox_msg_type(msg), "execute_request");
	CHECK_STR_EQ(jstr(h, "session"), "sess-9");
	CHECK_STR_EQ(kbox_msg_session(msg), "sess-9");
	CHECK_STR_EQ(jstr(h, "username"), "bob");
	CHECK_STR_EQ(jstr(h, "version"), "5.3");
	CHECK_STR_EQ(jstr(h, "version"), KBOX_PROTOCOL_VERSION);
	if (!is_iso8601_utc_micro(jstr(h, "date")))
		printf("# date \"%s\"\n", jstr(h, "date"));
	CHECK(is_iso8601_utc_micro(jstr(h, "date")));
	CHECK(fabs(kbox_msg_date(msg) - now) < 3);
	CHECK_STR_EQ(jstr(kbox_msg_content(msg), "code"), "1");
	CHECK(kbox_msg_parent_id(msg) == NULL);
	CHECK_INT_EQ(json_object_size(kbox_msg_parent_header(msg)), 0);
	CHECK_INT_EQ(json_object_size(kbox_msg_metadata(msg)), 0);
	CHECK_INT_EQ(kbox_msg_buffer_count(msg), 0);
	CHECK_INT_EQ(kbox_msg_identity_count(msg), 0);
	kbox_msg_destroy(&msg);
}

/* The header is written as text: any string a caller gives comes back
 * as it was, from the header and from what is sent; what is not UTF-8
 * (which JSON cannot carry) makes no message. */
TEST(new_message_header_escapes_what_the_caller_gives)
{
	static const char *const odd[] = {"a\"b",        "back\\slash", "tab\tnl\n\x01\x1f",
	                                  "caf\xc3\xa9", "{\"x\":1}",   ""};
	kbox_auth_t *auth = auth_with_key(KEY, 0);

	REQUIRE(auth != NULL);
	for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
		kbox_msg_t *msg = kbox_msg_new(odd[i], odd[i], odd[i], NULL), *back;
		kbox_frame_t f[MAX_FRAMES];
		kbox_error_t err = {0};
		zmsg_t *z;
		json_t *h;

		REQUIRE(msg != NULL);
		CHECK_STR_EQ(kbox_msg_type(msg), odd[i]);
		CHECK_STR_EQ(kbox_msg_session(msg), odd[i]);
		z = kbox__msg_encode(msg, auth, &err);
		REQUIRE(z != NULL);
		REQUIRE(frames_of_zmsg(z, f, MAX_FRAMES) == 6);
		h = json_loadb(f[2].data, f[2].size, 0, NULL);
		CHECK(h != NULL);
		CHECK_STR_EQ(jstr(h, "msg_type"), odd[i]);
		CHECK_STR_EQ(jstr(h, "session"), odd[i]);
		CHECK_STR_EQ(jstr(h, "username"), odd[i]);
		CHECK_STR_EQ(jstr(h, "msg_id"), kbox_msg_id(msg));
		CHECK_INT_EQ(json_object_size(h), 6);
		CHECK(json_equal(kbox_msg_header(msg), h));
		back = kbox__msg_decode_zmsg(auth, z, &err);
		CHECK(back != NULL);
		if (back)
			CHECK(json_equal(kbox_msg_header(back), h));
		kbox_msg_destroy(&back);
		json_decref(h);
		zmsg_destroy(&z);
		kbox_msg_destroy(&msg);
	}
	CHECK(kbox_msg_new("status", "s", "\xff", NULL) == NULL);
	CHECK(kbox_msg_new("status", "\xc3", "u", NULL) == NULL);
	CHECK(kbox_msg_new("\xed\xa0\x80", "s", "u", NULL) == NULL);
	CHECK(kbox_msg_new(NULL, "s", "u", NULL) == NULL);
	kbox_auth_destroy(&auth);
}

TEST(new_message_without_content_has_empty_object)
{
	json_t *content = NULL;
	kbox_msg_t *a = kbox_msg_new("kernel_info_request", "s", "u", NULL);
	kbox_msg_t *b = kbox_msg_new("kernel_info_request", "s", "u", &content);

	REQUIRE(a && b);
	CHECK(json_is_object(kbox_msg_content(a)));
	CHECK_INT_EQ(json_object_size(kbox_msg_content(a)), 0);
	CHECK_INT_EQ(json_object_size(kbox_msg_content(b)), 0);
	CHECK(strcmp(kbox_msg_id(a), kbox_msg_id(b)) != 0);
	kbox_msg_destroy(&a);
	kbox_msg_destroy(&b);
	kbox_msg_destroy(&a); /* NULL is fine */
}

TEST(uuid_is_lowercase_version4_and_fresh)
{
	char a[37], b[37];
	kbox_uuid(a);
	kbox_uuid(b);
	CHECK(is_uuid4(a));
	CHECK(is_uuid4(b));
	CHECK(strcmp(a, b) != 0);
}

TEST(iso8601_formats_utc_with_microseconds)
{
	char out[32];
	kbox_iso8601(0, out);
	CHECK_STR_EQ(out, "1970-01-01T00:00:00.000000Z");
	kbox_iso8601(1780766465.5, out);
	CHECK_STR_EQ(out, "2026-06-06T17:21:05.500000Z");
	kbox_iso8601(1780766465.123456, out);
	CHECK_STR_EQ(out, "2026-06-06T17:21:05.123456Z");
	kbox_iso8601(0.9999996, out); /* to the nearest microsecond: the next second */
	CHECK_STR_EQ(out, "1970-01-01T00:00:01.000000Z");
	kbox_iso8601(1.0000004, out);
	CHECK_STR_EQ(out, "1970-01-01T00:00:01.000000Z");
}

TEST(parse_iso8601_is_lenient_and_exact)
{
	CHECK(kbox_parse_iso8601("2026-06-06T17:21+0000") == 1780766460.0);
	CHECK(kbox_parse_iso8601("2026-06-06T17:21:05Z") == 1780766465.0);
	CHECK(fabs(kbox_parse_iso8601("2026-06-06T17:21:05.123456+02:00") - 1780759265.123456) <
	      1e-6);
	CHECK(kbox_parse_iso8601("2026-06-06T17:21:05.5-05:30") == 1780786265.5);
	CHECK(kbox_parse_iso8601("2026-06-06T17:21:05") == 1780766465.0);
	CHECK(fabs(kbox_parse_iso8601("2026-06-06T17:21:05.123456Z") - 1780766465.123456) < 1e-6);
	CHECK(kbox_parse_iso8601("1970-01-01T00:00:00Z") == 0.0);
}

TEST(parse_iso8601_gives_zero_for_garbage)
{
	const char *bad[] = {"garbage",
	                     "",
	                     "2026",
	                     "2026-06-06T",
	                     "2026-06-06T17",
	                     "2026-13-06T17:21:05Z",
	                     "2026-06-06T17:21:05Zjunk",
	                     "2026-06-06T17:21:05.Z",
	                     "2026-06-06T25:00:00Z"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		double t = kbox_parse_iso8601(bad[i]);
		if (t != 0)
			printf("# \"%s\" gave %f\n", bad[i], t);
		CHECK(t == 0);
	}
}

TEST(python_date_round_trips_through_iso8601)
{
	char out[32];
	double t = kbox_parse_iso8601("2026-06-06T17:21:05.654321Z");
	kbox_iso8601(t, out);
	CHECK_STR_EQ(out, "2026-06-06T17:21:05.654321Z");
}

/* ---- main ---- */

static json_t *load_vectors(void)
{
	const char *top = getenv("top_srcdir");
	const char *tries[] = {top, "..", "."};
	char path[4096];
	json_error_t jerr;

	for (size_t i = 0; i < sizeof tries / sizeof *tries; i++) {
		json_t *doc;
		if (!tries[i] || !*tries[i])
			continue;
		snprintf(path, sizeof path, "%s/tests/data/vectors.json", tries[i]);
		doc = json_load_file(path, 0, &jerr);
		if (doc)
			return doc;
	}
	printf("Bail out! cannot load tests/data/vectors.json (top_srcdir=%s): %s\n",
	       top ? top : "(unset)", jerr.text);
	return NULL;
}

int main(void)
{
	int rc;

	if (kbox_init() < 0) {
		printf("Bail out! kbox_init failed\n");
		return 1;
	}
	vectors = load_vectors();
	if (!vectors)
		return 1;

	RUN(signature_matches_jupyter_client_for_every_vector);
	RUN(verify_accepts_every_jupyter_client_signature);
	RUN(empty_key_signs_with_empty_string);
	RUN(signature_excludes_buffers);
	RUN(unsupported_scheme_is_refused_naming_it);
	RUN(verify_checks_length_before_content);

	RUN(decodes_python_request_without_identities);
	RUN(decodes_python_reply_keeping_binary_identities);
	RUN(decodes_python_unicode_message_with_unicode_key);
	RUN(decodes_python_message_carrying_buffers);
	RUN(decode_zmsg_matches_decode_and_leaves_zmsg_alone);
	RUN(decode_zmsg_reads_headers_as_jansson_does);
	RUN(decode_zmsg_refuses_bad_headers_and_parents);
	RUN(parts_recv_takes_every_part_of_a_long_message);
	RUN(content_is_answers_as_the_parsed_content);
	RUN(python_message_with_wrong_key_is_refused);
	RUN(empty_key_accepts_any_signature);

	RUN(encode_then_decode_round_trips_every_part);
	RUN(encode_writes_compact_json_dicts);
	RUN(encode_with_empty_key_sends_empty_signature);

	RUN(no_delimiter_is_a_protocol_error);
	RUN(fewer_than_five_frames_after_delimiter_is_a_protocol_error);
	RUN(empty_signature_is_refused_when_keyed);
	RUN(wrong_signature_is_an_auth_error);
	RUN(signature_of_wrong_length_is_an_auth_error);
	RUN(non_hex_or_uppercase_signature_is_an_auth_error);
	RUN(invalid_json_in_each_dict_is_a_protocol_error);
	RUN(non_object_dicts_are_a_protocol_error);
	RUN(header_without_msg_type_is_a_protocol_error);
	RUN(non_utf8_bytes_read_as_replacement_characters);

	RUN(replayed_message_is_refused_the_second_time);
	RUN(remember_refuses_a_signature_seen_before);
	RUN(replay_history_remembers_exactly_the_last_n_after_many_evictions);
	RUN(message_that_would_take_too_much_memory_to_decode_is_refused_unparsed);
	RUN(replay_history_is_bounded_and_forgets_the_oldest);
	RUN(empty_key_accepts_empty_signatures_without_replay_check);

	RUN(new_message_header_has_every_field);
	RUN(new_message_header_escapes_what_the_caller_gives);
	RUN(new_message_without_content_has_empty_object);
	RUN(uuid_is_lowercase_version4_and_fresh);
	RUN(iso8601_formats_utc_with_microseconds);
	RUN(parse_iso8601_is_lenient_and_exact);
	RUN(parse_iso8601_gives_zero_for_garbage);
	RUN(python_date_round_trips_through_iso8601);

	rc = tap_done();
	json_decref(vectors);
	return rc;
}
