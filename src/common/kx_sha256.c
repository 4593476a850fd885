/* src/common/kx_sha256.c — SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC
 * 2104), for what must be hashed in kbox(1), which links no libsodium:
 * the seal of a session's configuration (session_config.c).  Checked
 * against the standards' vectors in tests/unit_common.c. */
#include "common/kx.h"

#include <string.h>

static const uint32_t k256[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

/* One 64-byte block B into the state H. */
static void block(uint32_t h[8], const unsigned char *b)
{
	uint32_t w[64], v[8], t1, t2;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
		       (uint32_t)b[4 * i + 2] << 8 | (uint32_t)b[4 * i + 3];
	for (; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(v, h, sizeof v);
	for (i = 0; i < 64; i++) {
		t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) +
		     ((v[4] & v[5]) ^ (~v[4] & v[6])) + k256[i] + w[i];
		t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) +
		     ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
		memmove(v + 1, v, 7 * sizeof *v);
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (i = 0; i < 8; i++)
		h[i] += v[i];
}

void kx_sha256_init(kx_sha256_t *c)
{
	static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(c->h, h0, sizeof c->h);
	c->len = 0;
	c->used = 0;
}

void kx_sha256_update(kx_sha256_t *c, const void *data, size_t len)
{
	const unsigned char *p = data;
	c->len += len;
	while (len > 0) {
		size_t n = sizeof c->buf - c->used;
		if (n > len)
			n = len;
		memcpy(c->buf + c->used, p, n);
		c->used += n;
		p += n;
		len -= n;
		if (c->used == sizeof c->buf) {
			block(c->h, c->buf);
			c->used = 0;
		}
	}
}

void kx_sha256_final(kx_sha256_t *c, unsigned char out[KX_SHA256_LEN])
{
	uint64_t bits = c->len * 8;
	unsigned char pad = 0x80, zero = 0, len[8];

	kx_sha256_update(c, &pad, 1);
	while (c->used != 56)
		kx_sha256_update(c, &zero, 1);
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)(bits >> (56 - 8 * i));
	kx_sha256_update(c, len, 8);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (unsigned char)(c->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)c->h[i];
	}
	memset(c, 0, sizeof *c);
}

void kx_hmac_sha256_init(kx_hmac_sha256_t *m, const void *key, size_t key_len)
{
	unsigned char k[64] = {0}, pad[64];

	if (key_len > sizeof k) { /* a long key is its hash */
		kx_sha256_init(&m->inner);
		kx_sha256_update(&m->inner, key, key_len);
		kx_sha256_final(&m->inner, k);
	} else if (key_len > 0)
		memcpy(k, key, key_len);
	for (size_t i = 0; i < sizeof pad; i++)
		pad[i] = k[i] ^ 0x36;
	kx_sha256_init(&m->inner);
	kx_sha256_update(&m->inner, pad, sizeof pad);
	for (size_t i = 0; i < sizeof pad; i++)
		pad[i] = k[i] ^ 0x5c;
	kx_sha256_init(&m->outer);
	kx_sha256_update(&m->outer, pad, sizeof pad);
	memset(k, 0, sizeof k);
	memset(pad, 0, sizeof pad);
}

void kx_hmac_sha256_update(kx_hmac_sha256_t *m, const void *data, size_t len)
{
	kx_sha256_update(&m->inner, data, len);
}

void kx_hmac_sha256_final(kx_hmac_sha256_t *m, unsigned char out[KX_SHA256_LEN])
{
	unsigned char inner[KX_SHA256_LEN];
	kx_sha256_final(&m->inner, inner);
	kx_sha256_update(&m->outer, inner, sizeof inner);
	kx_sha256_final(&m->outer, out);
	memset(inner, 0, sizeof inner);
}

bool kx_equal_ct(const void *a, const void *b, size_t len)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char d = 0;
	for (size_t i = 0; i < len; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}
