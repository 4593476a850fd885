/* src/wire.c — Jupyter wire messages: signing, verifying, encoding, decoding. */
#include "private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sodium.h>

#define SIG_HEX 64 /* hex digits of an HMAC-SHA256 */
#define SIG_BYTES 32
#define SLOT_EMPTY UINT32_MAX

struct kbox_auth {
	unsigned char *key;
	size_t keylen;
	/* the HMAC state after absorbing the key, copied for each message */
	crypto_auth_hmacsha256_state *keyed;
	/* replay history: the signatures' 32 bytes in a ring (eviction
	 * order), and an open-addressing table (linear probing) of ring
	 * indices for lookup: 36 bytes a signature, not a string and a hash
	 * entry apiece */
	unsigned char (*ring)[SIG_BYTES];
	uint32_t *slot; /* ring index, or SLOT_EMPTY */
	size_t mask;    /* slots - 1; slots a power of two >= 2 * cap */
	size_t cap, head, count;
};

/* A growable array of owned byte strings (buffers or identities). */
typedef struct {
	kbox_frame_t *v;
	size_t n, cap;
} framev_t;

/* The header's fields that every message is asked for, and its parent's
 * msg_id: read from a flat header (flat_object) without parsing it. */
enum { F_ID, F_TYPE, F_SESSION, F_PARENT_ID, F_COUNT };

struct kbox_msg {
	/* the four dicts; one is NULL while it is still text (text[i]) */
	json_t *header, *parent, *metadata, *content;
	char sig[SIG_HEX + 1];
	framev_t buffers, identities;
	/* the verified text of the dicts not parsed yet, parsed on first use
	 * (lazy_dict).  Header and parent are left as text only when flat
	 * (their fields then in FIELD), and live in BLOB; metadata and
	 * content are malloc'd apiece, freed once parsed. */
	const char *text[4];
	size_t text_len[4];
	bool unreadable[4];         /* its text was not a JSON object: read as {} */
	const char *field[F_COUNT]; /* in BLOB; NULL when absent */
	char *blob;
};

/* ---- helpers ---- */

void kbox_uuid(char out[37])
{
	unsigned char b[16];
	randombytes_buf(b, sizeof b);
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	/* 8-4-4-4-12 hex digits, written by hand: one is made for every
	 * message, and snprintf took 30 times as long (callgrind) */
	static const char hex[] = "0123456789abcdef";
	char *o = out;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*o++ = '-';
		*o++ = hex[b[i] >> 4];
		*o++ = hex[b[i] & 0x0f];
	}
	*o = '\0';
}

void kbox_iso8601(double t, char out[32])
{
	kx_iso8601(t, 6, out);
}

/* Read exactly N digits at *P into *OUT; advance. 0 or -1. */
static int digits(const char **p, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return -1;
		v = v * 10 + (c - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

double kbox_parse_iso8601(const char *s)
{
	struct tm tm;
	int y, mo, d, h = 0, mi = 0, sec = 0, zh = 0, zm = 0, sign = 0;
	double frac = 0;
	const char *p = s;
	time_t t;

	if (!s)
		return 0;
	memset(&tm, 0, sizeof tm);
	if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
	    digits(&p, 2, &d))
		return 0;
	if (*p == 'T' || *p == 't' || *p == ' ') {
		p++;
		if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi))
			return 0;
		if (*p == ':') {
			p++;
			if (digits(&p, 2, &sec))
				return 0;
			if (*p == '.' || *p == ',') {
				double scale = 0.1;
				p++;
				if (*p < '0' || *p > '9')
					return 0;
				while (*p >= '0' && *p <= '9') {
					frac += (*p - '0') * scale;
					scale /= 10;
					p++;
				}
			}
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '-' ? -1 : 1;
		p++;
		if (digits(&p, 2, &zh))
			return 0;
		if (*p == ':')
			p++;
		if (*p >= '0' && *p <= '9' && digits(&p, 2, &zm))
			return 0;
	}
	if (*p != '\0')
		return 0;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || zh > 23 ||
	    zm > 59)
		return 0;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return 0;
	return (double)t + frac - sign * (zh * 3600 + zm * 60);
}

/* ---- auth ---- */

kbox_auth_t *kbox_auth_new(const char *scheme, const void *key, size_t keylen, size_t history,
                           kbox_error_t *err)
{
	kbox_auth_t *self;

	if (kbox_init() < 0) {
		kbox_error_set(err, KBOX_E_SYSTEM, "libsodium failed to initialise");
		return NULL;
	}
	if (!scheme || strcmp(scheme, "hmac-sha256") != 0) {
		kbox_error_set(err, KBOX_E_UNSUPPORTED,
		               "signature scheme \"%s\" is not supported (only hmac-sha256)",
		               scheme ? scheme : "(none)");
		return NULL;
	}
	self = calloc(1, sizeof *self);
	if (!self)
		goto nomem;
	self->cap = history ? history : KBOX_REPLAY_HISTORY;
	if (self->cap > UINT32_MAX / 4)
		self->cap = UINT32_MAX / 4;
	self->mask = 1;
	while (self->mask + 1 < 2 * self->cap)
		self->mask = self->mask * 2 + 1;
	self->ring = calloc(self->cap, sizeof *self->ring);
	self->slot = malloc((self->mask + 1) * sizeof *self->slot);
	if (!self->ring || !self->slot)
		goto nomem;
	memset(self->slot, 0xff, (self->mask + 1) * sizeof *self->slot); /* SLOT_EMPTY */
	if (keylen) {
		self->key = sodium_malloc(keylen);
		if (!self->key)
			goto nomem;
		memcpy(self->key, key, keylen);
		self->keylen = keylen;
		self->keyed = sodium_malloc(sizeof *self->keyed);
		if (!self->keyed)
			goto nomem;
		crypto_auth_hmacsha256_init(self->keyed, self->key, self->keylen);
	}
	return self;
nomem:
	kbox_auth_destroy(&self);
	kbox_error_set(err, KBOX_E_NOMEM, "out of memory creating a message signer");
	return NULL;
}

void kbox_auth_destroy(kbox_auth_t **self_p)
{
	kbox_auth_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	if (self->key)
		sodium_free(self->key); /* wipes */
	if (self->keyed)
		sodium_free(self->keyed);
	free(self->ring);
	free(self->slot);
	free(self);
	*self_p = NULL;
}

void kbox_auth_sign(const kbox_auth_t *self, const kbox_frame_t parts[4], char out[65])
{
	crypto_auth_hmacsha256_state st;
	unsigned char mac[crypto_auth_hmacsha256_BYTES];

	if (!self->keylen) {
		out[0] = '\0';
		return;
	}
	st = *self->keyed;
	for (int i = 0; i < 4; i++)
		crypto_auth_hmacsha256_update(&st, parts[i].data, parts[i].size);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_bin2hex(out, SIG_HEX + 1, mac, sizeof mac);
	sodium_memzero(&st, sizeof st);
}

int kbox_auth_verify(const kbox_auth_t *self, const kbox_frame_t parts[4], const void *sig,
                     size_t siglen, kbox_error_t *err)
{
	char want[SIG_HEX + 1];
	int rc;

	if (!self->keylen)
		return 0;
	if (siglen == 0)
		return kbox_error_set(err, KBOX_E_AUTH, "unsigned message (empty signature)");
	if (siglen != SIG_HEX)
		return kbox_error_set(err, KBOX_E_AUTH, "signature has %zu characters, expected %d",
		                      siglen, SIG_HEX);
	kbox_auth_sign(self, parts, want);
	rc = sodium_memcmp(want, sig, SIG_HEX);
	sodium_memzero(want, sizeof want);
	if (rc != 0)
		return kbox_error_set(err, KBOX_E_AUTH, "signature mismatch");
	return 0;
}

/* The home slot of digest D (HMAC output: its first bytes are as good a
 * hash as any). */
static size_t sig_home(const kbox_auth_t *self, const unsigned char *d)
{
	uint64_t v;
	memcpy(&v, d, sizeof v);
	return (size_t)v & self->mask;
}

/* The slot holding digest D, or the empty slot where it would go. */
static size_t sig_find(const kbox_auth_t *self, const unsigned char *d)
{
	size_t i = sig_home(self, d);
	while (self->slot[i] != SLOT_EMPTY && memcmp(self->ring[self->slot[i]], d, SIG_BYTES) != 0)
		i = (i + 1) & self->mask;
	return i;
}

/* Empty slot I, moving back the entries after it that would no longer be
 * found (backward-shift deletion: no tombstones). */
static void sig_delete(kbox_auth_t *self, size_t i)
{
	size_t j = i;
	self->slot[i] = SLOT_EMPTY;
	for (;;) {
		size_t home;
		j = (j + 1) & self->mask;
		if (self->slot[j] == SLOT_EMPTY)
			return;
		home = sig_home(self, self->ring[self->slot[j]]);
		/* J's entry may fill I when I lies on its probe path (home .. J) */
		if (((j - home) & self->mask) >= ((j - i) & self->mask)) {
			self->slot[i] = self->slot[j];
			self->slot[j] = SLOT_EMPTY;
			i = j;
		}
	}
}

/* Hex signature SIG (SIGLEN characters) as 32 bytes; what is not hex, or
 * missing, counts as zero bits (a signature that verified is all hex). */
static void sig_bytes(const char *sig, size_t siglen, unsigned char out[SIG_BYTES])
{
	memset(out, 0, SIG_BYTES);
	for (size_t k = 0; k < siglen && k < SIG_HEX; k++) {
		int c = (unsigned char)sig[k], v = c >= '0' && c <= '9'   ? c - '0'
		                                   : c >= 'a' && c <= 'f' ? c - 'a' + 10
		                                   : c >= 'A' && c <= 'F' ? c - 'A' + 10
		                                                          : 0;
		out[k / 2] |= (unsigned char)(k % 2 ? v : v << 4);
	}
}

int kbox_auth_remember(kbox_auth_t *self, const char *sig, size_t siglen, kbox_error_t *err)
{
	unsigned char d[SIG_BYTES];
	size_t i, at;

	if (!self->keylen)
		return 0;
	sig_bytes(sig, siglen, d);
	if (self->slot[sig_find(self, d)] != SLOT_EMPTY)
		return kbox_error_set(err, KBOX_E_AUTH, "replayed message (duplicate signature)");
	if (self->count == self->cap) {
		/* full: forget the oldest (ring[head]) */
		sig_delete(self, sig_find(self, self->ring[self->head]));
		self->head = (self->head + 1) % self->cap;
		self->count--;
	}
	at = (self->head + self->count) % self->cap;
	memcpy(self->ring[at], d, SIG_BYTES);
	i = sig_find(self, d);
	self->slot[i] = (uint32_t)at;
	self->count++;
	return 0;
}

size_t kbox_auth_history_size(const kbox_auth_t *self)
{
	return self->count;
}

/* ---- frame vectors ---- */

static int framev_push(framev_t *fv, const void *data, size_t size)
{
	kbox_frame_t *v = kx_grow(fv->v, &fv->cap, fv->n, sizeof *v);
	void *copy;

	if (!v)
		return -1;
	fv->v = v;
	copy = malloc(size ? size : 1);
	if (!copy)
		return -1;
	if (size)
		memcpy(copy, data, size);
	fv->v[fv->n].data = copy;
	fv->v[fv->n].size = size;
	fv->n++;
	return 0;
}

static void framev_free(framev_t *fv)
{
	for (size_t i = 0; i < fv->n; i++)
		free((void *)fv->v[i].data);
	free(fv->v);
	memset(fv, 0, sizeof *fv);
}

/* ---- messages ---- */

/* The text of an empty dict, left unparsed in a message made here. */
static const char empty_object[] = "{}";

/* The body of the JSON string of the UTF-8 text S into OUT (NULL: only
 * measured); its length. */
static size_t json_escape(char *out, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			if (out)
				out[n] = '\\', out[n + 1] = (char)c;
			n += 2;
		} else if (c < 0x20) {
			if (out)
				memcpy(out + n, "\\u00", 4), out[n + 4] = hex[c >> 4],
				                                     out[n + 5] = hex[c & 15];
			n += 6;
		} else {
			if (out)
				out[n] = (char)c;
			n++;
		}
	}
	return n;
}

/* Make SELF's header as text, with its fields, in SELF's blob: the
 * object jansson would write of these strings (valid UTF-8: checked by
 * the caller).  0, or -1 when out of memory. */
static int header_text(kbox_msg_t *self, const char *id, const char *session, const char *username,
                       const char *date, const char *msg_type)
{
	/* the members in the order kbox_msg_new always wrote them */
	const char *const keys[] = {"{\"msg_id\":\"", "\",\"session\":\"",  "\",\"username\":\"",
	                            "\",\"date\":\"", "\",\"msg_type\":\"", "\",\"version\":\""};
	const char *const values[] = {id, session, username, date, msg_type, KBOX_PROTOCOL_VERSION};
	const char *const fields[F_COUNT] = {id, msg_type, session, NULL};
	size_t size = sizeof "\"}", len[F_COUNT];
	char *b;

	for (int k = 0; k < 6; k++)
		size += strlen(keys[k]) + json_escape(NULL, values[k]);
	for (int f = 0; f < F_COUNT; f++)
		size += fields[f] ? (len[f] = strlen(fields[f])) + 1 : 0;
	if (!(self->blob = b = malloc(size)))
		return -1;
	self->text[0] = b;
	for (int k = 0; k < 6; k++) {
		size_t kl = strlen(keys[k]);
		memcpy(b, keys[k], kl);
		b += kl;
		b += json_escape(b, values[k]);
	}
	memcpy(b, "\"}", 2);
	b += 2;
	self->text_len[0] = (size_t)(b - self->text[0]);
	for (int f = 0; f < F_COUNT; f++) {
		if (!fields[f])
			continue;
		memcpy(b, fields[f], len[f] + 1);
		self->field[f] = b;
		b += len[f] + 1;
	}
	return 0;
}

kbox_msg_t *kbox_msg_new(const char *msg_type, const char *session, const char *username,
                         json_t **content_p)
{
	kbox_msg_t *self = calloc(1, sizeof *self);
	char id[37], date[32];

	if (!session)
		session = "";
	if (!username)
		username = "kbox";
	/* (what jansson refuses to hold: not UTF-8) */
	if (!self || !msg_type || !kx_utf8_valid_str(msg_type) || !kx_utf8_valid_str(session) ||
	    !kx_utf8_valid_str(username))
		goto fail;
	kbox_init();
	kbox_uuid(id);
	kbox_iso8601(kx_wall_s(), date);
	if (header_text(self, id, session, username, date, msg_type) < 0)
		goto fail;
	/* parent and metadata stay "{}" until asked for */
	for (int i = 1; i < 3; i++) {
		self->text[i] = empty_object;
		self->text_len[i] = sizeof empty_object - 1;
	}
	if (content_p && *content_p) {
		self->content = *content_p;
		*content_p = NULL;
	} else {
		self->text[3] = empty_object;
		self->text_len[3] = sizeof empty_object - 1;
	}
	return self;
fail:
	if (content_p)
		json_decref(*content_p), *content_p = NULL;
	kbox_msg_destroy(&self);
	return NULL;
}

void kbox_msg_destroy(kbox_msg_t **self_p)
{
	kbox_msg_t *self;
	if (!self_p || !*self_p)
		return;
	self = *self_p;
	json_decref(self->header);
	json_decref(self->parent);
	json_decref(self->metadata);
	json_decref(self->content);
	for (int i = 2; i < 4; i++)
		if (self->text[i] != empty_object)
			free((char *)self->text[i]);
	free(self->blob);
	framev_free(&self->buffers);
	framev_free(&self->identities);
	free(self);
	*self_p = NULL;
}

void kbox_msg_set_parent(kbox_msg_t *self, const kbox_msg_t *parent)
{
	json_t *copy = json_deep_copy(kbox_msg_header(parent));
	if (copy) {
		json_decref(self->parent);
		self->parent = copy;
	}
}

int kbox_msg_add_buffer(kbox_msg_t *self, const void *data, size_t size)
{
	return framev_push(&self->buffers, data, size);
}

int kbox_msg_add_identity(kbox_msg_t *self, const void *data, size_t size)
{
	return framev_push(&self->identities, data, size);
}

static const char *str_field(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Field F of the header (or, F_PARENT_ID, the parent's msg_id): from the
 * dict once it is parsed, else from the fields read off its flat text. */
static const char *msg_field(const kbox_msg_t *self, int f, const char *key)
{
	json_t *d = f == F_PARENT_ID ? self->parent : self->header;
	return d ? str_field(d, key) : self->field[f];
}

const char *kbox_msg_type(const kbox_msg_t *self)
{
	return msg_field(self, F_TYPE, "msg_type");
}

const char *kbox_msg_id(const kbox_msg_t *self)
{
	return msg_field(self, F_ID, "msg_id");
}

const char *kbox_msg_parent_id(const kbox_msg_t *self)
{
	return msg_field(self, F_PARENT_ID, "msg_id");
}

const char *kbox_msg_session(const kbox_msg_t *self)
{
	const char *s = msg_field(self, F_SESSION, "session");
	return s ? s : "";
}

static json_t *parse_dict(const char *p, size_t n, json_error_t *jerr);

/* The dict *SLOT of SELF, parsed now from its text I if it was left as
 * text.  A decoded message is unchanged by this as its user sees it (the
 * text was verified): SELF is const to callers, the parse is a cache.
 * Text that is not a JSON object, which only the holder of the key can
 * have sent, reads as an empty object (a header or parent left as text
 * is flat, which jansson always reads: only memory can fail it). */
static json_t *lazy_dict(const kbox_msg_t *self, json_t *const *slot, int i)
{
	kbox_msg_t *m = (kbox_msg_t *)self;
	json_error_t jerr;
	json_t *d;
	if (*slot || !m->text[i])
		return *slot;
	d = parse_dict(m->text[i], m->text_len[i], &jerr);
	if (!d || !json_is_object(d)) {
		json_decref(d);
		d = json_object();
		m->unreadable[i] = true;
	}
	if (i >= 2 && m->text[i] != empty_object)
		free((char *)m->text[i]);
	m->text[i] = NULL;
	*(json_t **)slot = d;
	return d;
}

json_t *kbox_msg_header(const kbox_msg_t *self)
{
	return lazy_dict(self, &self->header, 0);
}
json_t *kbox_msg_parent_header(const kbox_msg_t *self)
{
	return lazy_dict(self, &self->parent, 1);
}
json_t *kbox_msg_metadata(const kbox_msg_t *self)
{
	return lazy_dict(self, &self->metadata, 2);
}
json_t *kbox_msg_content(const kbox_msg_t *self)
{
	return lazy_dict(self, &self->content, 3);
}

/* Was SELF's content text that is not a JSON object (private.h)? */
bool kbox__msg_content_unreadable(const kbox_msg_t *self)
{
	lazy_dict(self, &self->content, 3);
	return self->unreadable[3];
}
const char *kbox_msg_signature(const kbox_msg_t *self)
{
	return self->sig;
}

double kbox_msg_date(const kbox_msg_t *self)
{
	return kbox_parse_iso8601(str_field(kbox_msg_header(self), "date"));
}

size_t kbox_msg_buffer_count(const kbox_msg_t *self)
{
	return self->buffers.n;
}
kbox_frame_t kbox_msg_buffer(const kbox_msg_t *self, size_t i)
{
	return self->buffers.v[i];
}
size_t kbox_msg_identity_count(const kbox_msg_t *self)
{
	return self->identities.n;
}
kbox_frame_t kbox_msg_identity(const kbox_msg_t *self, size_t i)
{
	return self->identities.v[i];
}

static const char *const dict_names[4] = {"header", "parent_header", "metadata", "content"};

zmsg_t *kbox__msg_encode(const kbox_msg_t *self, const kbox_auth_t *auth, kbox_error_t *err)
{
	/* (a header or parent left as text is flat; metadata and content
	 * that came as text are parsed, and sent as their JSON reads) */
	json_t *dicts[4] = {self->header, self->parent, self->metadata, self->content};
	char *text[4] = {NULL, NULL, NULL, NULL};
	kbox_frame_t parts[4];
	char sig[SIG_HEX + 1];
	zmsg_t *zmsg = NULL;
	int i;

	for (i = 0; i < 4; i++) {
		if (!dicts[i] && (i < 2 || self->text[i] == empty_object)) {
			/* flat text, or "{}" made here: sent as it is */
			parts[i].data = self->text[i];
			parts[i].size = self->text_len[i];
			continue;
		}
		if (i >= 2)
			dicts[i] = i == 2 ? kbox_msg_metadata(self) : kbox_msg_content(self);
		if (json_is_object(dicts[i]) && json_object_size(dicts[i]) == 0) {
			parts[i].data = empty_object;
			parts[i].size = sizeof empty_object - 1;
			continue;
		}
		text[i] = json_dumps(dicts[i], JSON_COMPACT | JSON_ENCODE_ANY);
		if (!text[i]) {
			kbox_error_set(err, KBOX_E_INVALID, "cannot serialise %s of %s message",
			               dict_names[i],
			               kbox_msg_type(self) ? kbox_msg_type(self) : "a");
			goto out;
		}
		parts[i].data = text[i];
		parts[i].size = strlen(text[i]);
	}
	kbox_auth_sign(auth, parts, sig);
	zmsg = zmsg_new();
	if (!zmsg)
		goto nomem;
	for (size_t k = 0; k < self->identities.n; k++)
		if (zmsg_addmem(zmsg, self->identities.v[k].data, self->identities.v[k].size))
			goto nomem;
	if (zmsg_addstr(zmsg, KBOX_DELIMITER) || zmsg_addstr(zmsg, sig))
		goto nomem;
	for (i = 0; i < 4; i++)
		if (zmsg_addmem(zmsg, parts[i].data, parts[i].size))
			goto nomem;
	for (size_t k = 0; k < self->buffers.n; k++)
		if (zmsg_addmem(zmsg, self->buffers.v[k].data, self->buffers.v[k].size))
			goto nomem;
	goto out;
nomem:
	zmsg_destroy(&zmsg);
	kbox_error_set(err, KBOX_E_NOMEM, "out of memory encoding a message");
out:
	for (i = 0; i < 4; i++)
		free(text[i]);
	return zmsg;
}

/* What decoding the JSON text P (N bytes) would take in memory, about:
 * the text itself, and for every container and every member or element
 * what jansson allocates for it (an array or object ~200 bytes with its
 * table, a scalar or pair ~64).  Read without allocating anything: a
 * small message of many tiny values ("[[],[],...]", ~3 bytes apiece)
 * would otherwise take ~60 times its size. */
/* The most kx_json_cost gives per byte of text: a '[' or '{' is a
 * container and an item besides its byte.  Frames under
 * KBOX_MAX_DECODE_BYTES / COST_PER_BYTE_MAX bytes cannot go over the
 * bound, so they are not scanned. */
#define COST_PER_BYTE_MAX (1 + 200 + 64)

/* ---- flat dicts: a header read without jansson ---- */

/* A string of P (N bytes) in a flat object (flat_object). */
typedef struct {
	const char *p;
	size_t n;
} span_t;

/* The keys flat_object looks for in a header: F_ID, F_TYPE, F_SESSION. */
static const char *const header_keys[] = {"msg_id", "msg_type", "session"};
static const char *const parent_keys[] = {"msg_id"};

/* The index of the first byte at or after I of P (N bytes) that is not
 * JSON whitespace (N when none is). */
static size_t skip_ws(const char *p, size_t n, size_t i)
{
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	return i;
}

/* Read at *I of P (N bytes) a JSON string of printable ASCII without
 * escapes into OUT (its characters, without the quotes).  False for
 * anything else. */
static bool flat_string(const char *p, size_t n, size_t *i, span_t *out)
{
	size_t k = *i;
	if (k >= n || p[k] != '"')
		return false;
	out->p = p + ++k;
	for (; k < n && p[k] != '"'; k++)
		if (p[k] < 0x20 || p[k] > 0x7e || p[k] == '\\')
			return false;
	if (k >= n)
		return false;
	out->n = (size_t)(p + k - out->p);
	*i = k + 1;
	return true;
}

/* Is the text P (N bytes) a flat object: one JSON object, with
 * whitespace around its tokens, whose members are all strings, and whose
 * keys and values are printable ASCII without escapes?  That is what a
 * Jupyter header is, and jansson reads it as an object of those very
 * strings; so for such text the parse is left for later (lazy_dict) and
 * the values of KEYS (N_KEYS of them) are put in OUT, as jansson would
 * give them (the last of a repeated key; p NULL when absent).  False for
 * any other text, valid JSON or not: the caller parses it with jansson,
 * which decides. */
static bool flat_object(const char *p, size_t n, const char *const *keys, size_t n_keys,
                        span_t *out)
{
	size_t i = 0;
	for (size_t k = 0; k < n_keys; k++)
		out[k].p = NULL, out[k].n = 0;
	i = skip_ws(p, n, i);
	if (i >= n || p[i++] != '{')
		return false;
	i = skip_ws(p, n, i);
	if (i < n && p[i] == '}') {
		i++;
	} else {
		for (;;) {
			span_t key, value;
			if (!flat_string(p, n, &i, &key))
				return false;
			i = skip_ws(p, n, i);
			if (i >= n || p[i++] != ':')
				return false;
			i = skip_ws(p, n, i);
			if (!flat_string(p, n, &i, &value))
				return false;
			for (size_t k = 0; k < n_keys; k++)
				if (key.n == strlen(keys[k]) && memcmp(key.p, keys[k], key.n) == 0)
					out[k] = value;
			i = skip_ws(p, n, i);
			if (i >= n)
				return false;
			if (p[i] == '}') {
				i++;
				break;
			}
			if (p[i++] != ',')
				return false;
			i = skip_ws(p, n, i);
		}
	}
	i = skip_ws(p, n, i);
	return i == n;
}

/* Parse the JSON text P (N bytes); bytes that are not UTF-8 (a kernel
 * writing raw bytes) read as U+FFFD, as jupyter_client does.  NULL with
 * JERR. */
static json_t *parse_dict(const char *p, size_t n, json_error_t *jerr)
{
	json_t *d = json_loadb(p, n, JSON_ALLOW_NUL, jerr);
	if (!d) {
		size_t rlen;
		char *repaired = kx_utf8_repair(p, n, &rlen);
		if (repaired) {
			d = json_loadb(repaired, rlen, JSON_ALLOW_NUL, jerr);
			free(repaired);
		}
	}
	return d;
}

/* Keep in SELF's blob the text of the header and parent (FRAMES[0], [1])
 * that are flat (FLAT[i]), with the fields read from them (HF: the
 * header's, header_keys; PF: the parent's msg_id).  0, or -1 when out of
 * memory. */
static int keep_flat(kbox_msg_t *self, const kbox_frame_t frames[2], const bool flat[2],
                     const span_t hf[3], const span_t pf[1])
{
	const span_t *fields[F_COUNT] = {&hf[0], &hf[1], &hf[2], &pf[0]};
	size_t size = 0;
	char *b;

	for (int i = 0; i < 2; i++)
		size += flat[i] ? frames[i].size : 0;
	for (int f = 0; f < F_COUNT; f++)
		size += flat[f == F_PARENT_ID] && fields[f]->p ? fields[f]->n + 1 : 0;
	if (!(self->blob = b = malloc(size ? size : 1)))
		return -1;
	for (int i = 0; i < 2; i++) {
		if (!flat[i])
			continue;
		memcpy(b, frames[i].data, frames[i].size);
		self->text[i] = b;
		self->text_len[i] = frames[i].size;
		b += frames[i].size;
	}
	for (int f = 0; f < F_COUNT; f++) {
		if (!flat[f == F_PARENT_ID] || !fields[f]->p)
			continue;
		memcpy(b, fields[f]->p, fields[f]->n);
		b[fields[f]->n] = '\0';
		self->field[f] = b;
		b += fields[f]->n + 1;
	}
	return 0;
}

/* kbox_msg_decode; with LAZY, metadata and content are kept as text and
 * parsed on first use (kbox_msg_metadata, kbox_msg_content). */
/* The index of the <IDS|MSG> delimiter among the N FRAMES, with the five
 * frames a message has after it; -1 with ERR set when there is none. */
static ssize_t find_delimiter(const kbox_frame_t *frames, size_t n, kbox_error_t *err)
{
	const size_t dlen = sizeof KBOX_DELIMITER - 1;
	size_t d;

	for (d = 0; d < n; d++)
		if (frames[d].size == dlen && memcmp(frames[d].data, KBOX_DELIMITER, dlen) == 0)
			break;
	if (d == n) {
		kbox_error_set(err, KBOX_E_PROTOCOL,
		               "malformed message: no <IDS|MSG> delimiter in %zu frames", n);
		return -1;
	}
	if (n - d - 1 < 5) {
		kbox_error_set(err, KBOX_E_PROTOCOL,
		               "malformed message: %zu frames after the delimiter, need at least 5",
		               n - d - 1);
		return -1;
	}
	return (ssize_t)d;
}

/* Whether the four dicts at DICTS (header, parent, metadata, content) may
 * be decoded: headers within KBOX_MAX_HEADER_BYTES, and what decoding
 * would take within KBOX_MAX_DECODE_BYTES, judged before any of it is
 * done.  0, or -1 with ERR set. */
static int decode_cost_ok(const kbox_frame_t *dicts, kbox_error_t *err)
{
	size_t cost = 0, bytes = 0, i;

	for (i = 0; i < 4; i++) {
		if (i < 2 && dicts[i].size > KBOX_MAX_HEADER_BYTES) {
			kbox_error_set(err, KBOX_E_PROTOCOL,
			               "message refused: its %s is %zu bytes (at most %d)",
			               dict_names[i], dicts[i].size, KBOX_MAX_HEADER_BYTES);
			return -1;
		}
		bytes += dicts[i].size;
	}
	for (i = 0; bytes > KBOX_MAX_DECODE_BYTES / COST_PER_BYTE_MAX && i < 4; i++)
		cost += kx_json_cost(dicts[i].data, dicts[i].size);
	if (cost > KBOX_MAX_DECODE_BYTES) {
		kbox_error_set(err, KBOX_E_PROTOCOL,
		               "message refused: decoding it would take about %zu MiB (at most %d)",
		               cost >> 20, KBOX_MAX_DECODE_BYTES >> 20);
		return -1;
	}
	return 0;
}

/* Keep in SELF what it holds of the N FRAMES beside its dicts (delimiter
 * at D): the metadata's and content's text when LAZY, the signature, the
 * identities and the buffers.  0, or -1 when out of memory. */
static int keep_frames(kbox_msg_t *self, const kbox_frame_t *frames, size_t n, size_t d, bool lazy)
{
	const kbox_frame_t *sig = &frames[d + 1];
	size_t i, sl;

	for (i = 2; lazy && i < 4; i++) {
		const kbox_frame_t *f = &frames[d + 2 + i];
		char *t = malloc(f->size ? f->size : 1);
		if (!t)
			return -1;
		memcpy(t, f->data, f->size);
		self->text[i] = t;
		self->text_len[i] = f->size;
	}
	sl = sig->size < SIG_HEX ? sig->size : SIG_HEX;
	memcpy(self->sig, sig->data, sl);
	self->sig[sl] = '\0';
	for (i = 0; i < d; i++)
		if (framev_push(&self->identities, frames[i].data, frames[i].size))
			return -1;
	for (i = d + 6; i < n; i++)
		if (framev_push(&self->buffers, frames[i].data, frames[i].size))
			return -1;
	return 0;
}

static kbox_msg_t *decode(kbox_auth_t *auth, const kbox_frame_t *frames, size_t n, bool lazy,
                          kbox_error_t *err)
{
	kbox_msg_t *self = NULL;
	ssize_t found = find_delimiter(frames, n, err);
	size_t d, i;
	json_t *dicts[4] = {NULL, NULL, NULL, NULL};
	const kbox_frame_t *sig;
	span_t hf[3], pf[1];
	bool flat[2] = {false, false};

	if (found < 0)
		return NULL;
	d = (size_t)found;
	sig = &frames[d + 1];
	if (kbox_auth_verify(auth, &frames[d + 2], sig->data, sig->size, err) < 0 ||
	    decode_cost_ok(&frames[d + 2], err) < 0)
		return NULL;
	for (i = 0; i < (lazy ? 2u : 4u); i++) {
		json_error_t jerr;
		const kbox_frame_t *f = &frames[d + 2 + i];
		if (lazy && i < 2 &&
		    flat_object(f->data, f->size, i ? parent_keys : header_keys, i ? 1 : 3,
		                i ? pf : hf)) {
			flat[i] = true; /* read: parsed on first use */
			continue;
		}
		dicts[i] = parse_dict(f->data, f->size, &jerr);
		if (!dicts[i]) {
			kbox_error_set(err, KBOX_E_PROTOCOL,
			               "malformed message: %s is not valid JSON: %s", dict_names[i],
			               jerr.text);
			goto fail;
		}
		if (!json_is_object(dicts[i])) {
			kbox_error_set(err, KBOX_E_PROTOCOL,
			               "malformed message: %s is not a JSON object", dict_names[i]);
			goto fail;
		}
	}
	if (flat[0] ? !hf[F_ID].p || !hf[F_TYPE].p
	            : !str_field(dicts[0], "msg_id") || !str_field(dicts[0], "msg_type")) {
		kbox_error_set(err, KBOX_E_PROTOCOL,
		               "malformed message: header lacks a string msg_id or msg_type");
		goto fail;
	}
	if (kbox_auth_remember(auth, sig->data, sig->size, err) < 0)
		goto fail;

	self = calloc(1, sizeof *self);
	if (!self)
		goto nomem;
	self->header = dicts[0];
	self->parent = dicts[1];
	self->metadata = dicts[2];
	self->content = dicts[3];
	memset(dicts, 0, sizeof dicts);
	if ((flat[0] || flat[1]) && keep_flat(self, &frames[d + 2], flat, hf, pf) < 0)
		goto nomem;
	if (keep_frames(self, frames, n, d, lazy) < 0)
		goto nomem;
	return self;
nomem:
	kbox_error_set(err, KBOX_E_NOMEM, "out of memory decoding a message");
fail:
	for (i = 0; i < 4; i++)
		json_decref(dicts[i]);
	kbox_msg_destroy(&self);
	return NULL;
}

kbox_msg_t *kbox_msg_decode(kbox_auth_t *auth, const kbox_frame_t *frames, size_t n,
                            kbox_error_t *err)
{
	return decode(auth, frames, n, false, err);
}

kbox_msg_t *kbox__msg_decode_zmsg(kbox_auth_t *auth, zmsg_t *zmsg, kbox_error_t *err)
{
	size_t n = zmsg_size(zmsg), i = 0;
	kbox_frame_t stackv[16] = {{NULL, 0}}, *v = stackv;
	kbox_msg_t *msg;

	if (n > 16) {
		v = calloc(n, sizeof *v);
		if (!v) {
			kbox_error_set(err, KBOX_E_NOMEM, "out of memory decoding a message");
			return NULL;
		}
	}
	for (zframe_t *f = zmsg_first(zmsg); f && i < n; f = zmsg_next(zmsg), i++) {
		v[i].data = zframe_data(f);
		v[i].size = zframe_size(f);
	}
	msg = decode(auth, v, i, true, err);
	if (v != stackv)
		free(v);
	return msg;
}

bool kbox__msg_content_is(const kbox_msg_t *self, const char *key, const char *value)
{
	json_t *v;
	span_t got;
	if (!self->content && self->text[3] &&
	    flat_object(self->text[3], self->text_len[3], &key, 1, &got))
		return got.p && got.n == strlen(value) && memcmp(got.p, value, got.n) == 0;
	v = json_object_get(kbox_msg_content(self), key);
	return json_is_string(v) && strcmp(json_string_value(v), value) == 0;
}

/* ---- parts: a message received into zmq_msg_t ---- */

void kbox__parts_close(kbox__parts_t *self)
{
	for (size_t i = 0; i < self->n; i++)
		zmq_msg_close(&self->parts[i]);
	if (self->parts != self->inline_parts) {
		free(self->parts);
		free(self->frames);
	}
	self->parts = self->inline_parts;
	self->frames = self->inline_frames;
	self->n = self->bytes = 0;
}

/* Room in SELF for one more part: the parts move (zmq_msg_move) to an
 * array twice as large.  0, or -1 when out of memory. */
static int parts_grow(kbox__parts_t *self)
{
	size_t cap = self->cap * 2;
	zmq_msg_t *parts = malloc(cap * sizeof *parts);
	kbox_frame_t *frames = malloc(cap * sizeof *frames);
	if (!parts || !frames) {
		free(parts);
		free(frames);
		return -1;
	}
	for (size_t i = 0; i < self->n; i++) {
		zmq_msg_init(&parts[i]);
		zmq_msg_move(&parts[i], &self->parts[i]);
		zmq_msg_close(&self->parts[i]);
	}
	if (self->parts != self->inline_parts) {
		free(self->parts);
		free(self->frames);
	}
	self->parts = parts;
	self->frames = frames;
	self->cap = cap;
	return 0;
}

int kbox__parts_recv_bounded(kbox__parts_t *self, void *sock, size_t max_frames, size_t max_bytes,
                             bool *over)
{
	int e, more = 0;
	self->parts = self->inline_parts;
	self->frames = self->inline_frames;
	self->n = self->bytes = 0;
	self->cap = KBOX__PARTS_INLINE;
	*over = false;
	for (;;) {
		zmq_msg_t *m;
		if (self->n == max_frames || self->bytes > max_bytes ||
		    (self->n == self->cap && parts_grow(self) < 0)) {
			*over = true;
			break;
		}
		m = &self->parts[self->n];
		zmq_msg_init(m);
		/* (the parts of a message come together: only the first can be
		 * missing) */
		if (zmq_msg_recv(m, sock, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(m);
			goto fail;
		}
		self->n++;
		self->bytes += zmq_msg_size(m);
		if (!(more = zmq_msg_more(m)))
			break;
	}
	if (self->bytes > max_bytes)
		*over = true; /* (its last part took it over) */
	if (*over) {
		/* the rest of it, a part at a time, let go as it comes */
		zmq_msg_t extra;
		kbox__parts_close(self);
		while (more) {
			zmq_msg_init(&extra);
			if (zmq_msg_recv(&extra, sock, ZMQ_DONTWAIT) < 0) {
				zmq_msg_close(&extra);
				break;
			}
			more = zmq_msg_more(&extra);
			zmq_msg_close(&extra);
		}
		return 0;
	}
	for (size_t i = 0; i < self->n; i++) {
		self->frames[i].data = zmq_msg_data(&self->parts[i]);
		self->frames[i].size = zmq_msg_size(&self->parts[i]);
	}
	return 0;
fail:
	e = errno; /* the receive's (EAGAIN: nothing was waiting) */
	kbox__parts_close(self);
	errno = e;
	return -1;
}

int kbox__parts_recv(kbox__parts_t *self, void *sock)
{
	bool over;
	int rc = kbox__parts_recv_bounded(self, sock, SIZE_MAX, SIZE_MAX, &over);
	if (rc == 0 && over) { /* (out of memory: nothing is held) */
		errno = ENOMEM;
		return -1;
	}
	return rc;
}

kbox_msg_t *kbox__msg_decode_parts(kbox_auth_t *auth, const kbox__parts_t *p, kbox_error_t *err)
{
	return decode(auth, p->frames, p->n, true, err);
}
