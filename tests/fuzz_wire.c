/* tests/fuzz_wire.c — a libFuzzer target for the wire decoder.
 *
 * Input format: the frames of one message separated by the byte 0x1e
 * (ASCII "record separator").  JSON text never contains a raw 0x1e, so seeds
 * stay readable; a frame cannot contain 0x1e (identities and buffers in
 * seeds avoid it).  N separators give N+1 frames, up to MAX_FRAMES; the rest
 * of the input after the last allowed separator is the final frame.
 *
 *   ident 0x1e <IDS|MSG> 0x1e signature 0x1e header 0x1e parent 0x1e metadata 0x1e content [0x1e buffer]…
 *
 * Each input is decoded
 *   - with a fresh signer keyed with FUZZ_KEY ("fuzz-key"), so the signature
 *     check is exercised (tests/fuzz_corpus/signed-* are signed with it), and
 *   - with a fresh signer with an empty key, so every input reaches the JSON
 *     parsing and header checks;
 * and the whole input, NUL-terminated, is given to kbox_parse_iso8601.
 *
 * Invariants checked (a violation aborts, which libFuzzer reports):
 *   - a failure fills the error with a known code and a message;
 *   - a message that decodes has a msg_type and msg_id, and a date that is a
 *     number; re-encoding it and decoding the result gives the same header,
 *     parent header, metadata, content, identities and buffers;
 *   - decoding the same frames twice with one keyed signer fails the second
 *     time with KBOX_E_AUTH (replay);
 *   - what the keyed signer accepts, the empty-key signer accepts too.
 *
 * FUZZ_WIRE_EXPECT=signed or =unsigned (environment) additionally aborts when
 * the keyed / the empty-key decode of an input fails: tests/fuzz_wire.sh uses
 * it to prove the seeds are valid messages. */
#include "private.h" /* kbox__msg_encode, kbox__msg_decode_zmsg and zmsg_t */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_KEY "fuzz-key"
#define SEPARATOR 0x1e
#define MAX_FRAMES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const kbox_error_t *err)
{
	fprintf(stderr, "fuzz_wire: invariant broken: %s (code %d: %s)\n", what,
	        err ? (int)err->code : 0, err ? err->msg : "");
	abort();
}

/* Split DATA into at most MAX_FRAMES frames at SEPARATOR bytes. */
static size_t split(const uint8_t *data, size_t size, kbox_frame_t *frames)
{
	size_t n = 0, start = 0;

	for (size_t i = 0; i < size && n < MAX_FRAMES - 1; i++) {
		if (data[i] != SEPARATOR)
			continue;
		frames[n].data = data + start;
		frames[n].size = i - start;
		n++;
		start = i + 1;
	}
	frames[n].data = data + start;
	frames[n].size = size - start;
	return n + 1;
}

static void check_error(const kbox_error_t *err)
{
	switch (err->code) {
	case KBOX_E_PROTOCOL:
	case KBOX_E_AUTH:
	case KBOX_E_NOMEM:
		break;
	default:
		fail("decode failed with an unexpected error code", err);
	}
	if (err->msg[0] == '\0')
		fail("decode failed without a message", err);
}

static int frames_equal(kbox_frame_t a, kbox_frame_t b)
{
	return a.size == b.size && (a.size == 0 || memcmp(a.data, b.data, a.size) == 0);
}

/* Encode MSG with AUTH and decode it with a fresh signer of the same KEY:
 * everything must come back. */
static void check_round_trip(const kbox_msg_t *msg, const kbox_auth_t *auth, const char *key)
{
	kbox_error_t err = {0};
	kbox_auth_t *fresh = kbox_auth_new("hmac-sha256", key, strlen(key), 4, &err);
	zmsg_t *zmsg;
	kbox_msg_t *back;

	if (!fresh)
		fail("kbox_auth_new", &err);
	zmsg = kbox__msg_encode(msg, auth, &err);
	if (!zmsg)
		fail("re-encoding a decoded message", &err);
	back = kbox__msg_decode_zmsg(fresh, zmsg, &err);
	if (!back)
		fail("decoding a re-encoded message", &err);
	if (!json_equal(kbox_msg_header(back), kbox_msg_header(msg)) ||
	    !json_equal(kbox_msg_parent_header(back), kbox_msg_parent_header(msg)) ||
	    !json_equal(kbox_msg_metadata(back), kbox_msg_metadata(msg)) ||
	    !json_equal(kbox_msg_content(back), kbox_msg_content(msg)))
		fail("round trip changed a dict", NULL);
	if (kbox_msg_identity_count(back) != kbox_msg_identity_count(msg) ||
	    kbox_msg_buffer_count(back) != kbox_msg_buffer_count(msg))
		fail("round trip changed the frame counts", NULL);
	for (size_t i = 0; i < kbox_msg_identity_count(msg); i++)
		if (!frames_equal(kbox_msg_identity(back, i), kbox_msg_identity(msg, i)))
			fail("round trip changed an identity", NULL);
	for (size_t i = 0; i < kbox_msg_buffer_count(msg); i++)
		if (!frames_equal(kbox_msg_buffer(back, i), kbox_msg_buffer(msg, i)))
			fail("round trip changed a buffer", NULL);
	kbox_msg_destroy(&back);
	zmsg_destroy(&zmsg);
	kbox_auth_destroy(&fresh);
}

/* Checks on a message that decoded. */
static void check_message(const kbox_msg_t *msg, const kbox_auth_t *auth, const char *key)
{
	double t = kbox_msg_date(msg);

	if (!kbox_msg_type(msg) || !kbox_msg_id(msg))
		fail("decoded message without msg_type or msg_id", NULL);
	if (!kbox_msg_session(msg) || !kbox_msg_signature(msg))
		fail("NULL session or signature", NULL);
	if (isnan(t) || isinf(t))
		fail("date is not a number", NULL);
	(void)kbox_msg_parent_id(msg);
	check_round_trip(msg, auth, key);
}

/* Two strings alike, NULL included. */
static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* The client's decoding of FRAMES with KEY (kbox__msg_decode_zmsg: a flat
 * header or parent read off its text, metadata and content parsed on
 * use) against kbox_msg_decode's outcome EAGER (or its error EAGER_ERR):
 * it accepts what that accepts, with the same header and parent, and
 * refuses what that refuses but for metadata or content. */
static void check_lazy(const char *key, const kbox_frame_t *frames, size_t n,
                       const kbox_msg_t *eager, const kbox_error_t *eager_err)
{
	kbox_error_t err = {0};
	kbox_auth_t *auth = kbox_auth_new("hmac-sha256", key, strlen(key), 4, &err);
	zmsg_t *z = zmsg_new();
	kbox_msg_t *lazy;
	const char *type, *id, *session, *pid;

	if (!auth || !z)
		fail("kbox_auth_new or zmsg_new", &err);
	for (size_t i = 0; i < n; i++)
		zmsg_addmem(z, frames[i].data, frames[i].size);
	lazy = kbox__msg_decode_zmsg(auth, z, &err);
	if (eager && !lazy)
		fail("the client's decoding refused what kbox_msg_decode accepted", &err);
	if (!eager && lazy && strncmp(eager_err->msg, "malformed message: metadata ", 28) != 0 &&
	    strncmp(eager_err->msg, "malformed message: content ", 27) != 0)
		fail("the client's decoding accepted what kbox_msg_decode refused", eager_err);
	if (lazy) {
		/* read off the text, then once parsed: the same */
		type = kbox_msg_type(lazy);
		id = kbox_msg_id(lazy);
		session = kbox_msg_session(lazy);
		pid = kbox_msg_parent_id(lazy);
		if (!type || !id)
			fail("the client decoded a message without msg_type or msg_id", NULL);
		if (eager &&
		    (!same_str(type, kbox_msg_type(eager)) || !same_str(id, kbox_msg_id(eager)) ||
		     !same_str(session, kbox_msg_session(eager)) ||
		     !same_str(pid, kbox_msg_parent_id(eager)) ||
		     !json_equal(kbox_msg_header(lazy), kbox_msg_header(eager)) ||
		     !json_equal(kbox_msg_parent_header(lazy), kbox_msg_parent_header(eager))))
			fail("the client's decoding read another header or parent", NULL);
		if (!same_str(type, kbox_msg_type(lazy)) || !same_str(id, kbox_msg_id(lazy)) ||
		    !same_str(session, kbox_msg_session(lazy)) ||
		    !same_str(pid, kbox_msg_parent_id(lazy)))
			fail("a header read off its text and parsed differ", NULL);
	}
	kbox_msg_destroy(&lazy);
	zmsg_destroy(&z);
	kbox_auth_destroy(&auth);
}

/* Decode FRAMES with KEY ("" for none); returns 1 if accepted. */
static int decode_with(const char *key, const kbox_frame_t *frames, size_t n)
{
	kbox_error_t err = {0};
	kbox_auth_t *auth = kbox_auth_new("hmac-sha256", key, strlen(key), 4, &err);
	kbox_msg_t *msg, *again;
	int ok;

	if (!auth)
		fail("kbox_auth_new", &err);
	msg = kbox_msg_decode(auth, frames, n, &err);
	ok = msg != NULL;
	check_lazy(key, frames, n, msg, &err);
	if (!msg) {
		check_error(&err);
	} else {
		check_message(msg, auth, key);
		if (key[0]) {
			memset(&err, 0, sizeof err);
			again = kbox_msg_decode(auth, frames, n, &err);
			if (again || err.code != KBOX_E_AUTH)
				fail("a replayed message was accepted", &err);
		}
	}
	kbox_msg_destroy(&msg);
	kbox_auth_destroy(&auth);
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *expect;
	static int initialised;
	kbox_frame_t frames[MAX_FRAMES];
	size_t n;
	char *text;
	double t;
	int signed_ok, unsigned_ok;

	if (!initialised) {
		if (kbox_init() < 0)
			abort();
		expect = getenv("FUZZ_WIRE_EXPECT");
		initialised = 1;
	}

	n = split(data, size, frames);
	signed_ok = decode_with(FUZZ_KEY, frames, n);
	unsigned_ok = decode_with("", frames, n);
	if (signed_ok && !unsigned_ok)
		fail("the keyed signer accepted what the empty-key signer refused", NULL);
	if (expect && strcmp(expect, "signed") == 0 && !signed_ok)
		fail("FUZZ_WIRE_EXPECT=signed but the keyed decode failed", NULL);
	if (expect && strcmp(expect, "unsigned") == 0 && !unsigned_ok)
		fail("FUZZ_WIRE_EXPECT=unsigned but the empty-key decode failed", NULL);

	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	t = kbox_parse_iso8601(text);
	if (isnan(t) || isinf(t))
		fail("kbox_parse_iso8601 gave a non-number", NULL);
	free(text);
	return 0;
}
