// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for kernel/wire.c. Each input is treated as the start
 * of a TCP stream (handshake messages) and as a TCP option area. Besides
 * the sanitizers' memory checks it asserts the parser's contracts, calling
 * abort() on any violation:
 *  - smr_hs_peek() returns a documented error or a known message length;
 *  - whatever smr_hs_parse() accepts, smr_hs_build() reproduces byte for
 *    byte (one encoding per message), and smr_hs_check() agrees with the
 *    type and token rules;
 *  - whatever smr_hs_build() encodes from a struct made of input bytes
 *    parses again (build refuses exactly what parse would reject);
 *  - whatever smr_opt_parse() accepts survives smr_opt_write() and a
 *    second parse unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static void expect(int cond)
{
	if (!cond)
		abort();
}

static int known_len(int len)
{
	return len == SMR_HS_PROPOSAL_LEN || len == SMR_HS_ACCEPT_LEN ||
	       len == SMR_HS_CONFIRM_LEN || len == SMR_HS_DECLINE_LEN;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint64_t echo_of(const struct smr_hs_msg *m)
{
	switch (m->type) {
	case SMR_HS_ACCEPT:
		return m->accept.token_echo;
	case SMR_HS_CONFIRM:
		return m->confirm.token_echo;
	case SMR_HS_DECLINE:
		return m->decline.token_echo;
	}
	return 0;
}

/* smr_hs_check() against every expected type and a few tokens */
static void fuzz_check(const struct smr_hs_msg *m, const uint8_t *data,
		       size_t size)
{
	uint64_t tokens[4] = { 0, echo_of(m), echo_of(m) ^ 1, 0 };

	if (size >= 8)
		tokens[3] = get_be64(data + size - 8);
	for (int expected = 0; expected <= 5; expected++) {
		for (int t = 0; t < 4; t++) {
			uint64_t tok = tokens[t];
			uint64_t echo = echo_of(m);
			int err = smr_hs_check(m, expected, tok);
			int type_ok = expected >= SMR_HS_PROPOSAL &&
				      expected <= SMR_HS_DECLINE &&
				      (m->type == expected ||
				       m->type == SMR_HS_DECLINE);
			int echo_ok = m->type == SMR_HS_PROPOSAL ||
				      echo == tok ||
				      (m->type == SMR_HS_DECLINE && echo == 0);

			if (!type_ok)
				expect(err == -SMR_WIRE_ETYPE);
			else if (!echo_ok)
				expect(err == -SMR_WIRE_ETOKEN);
			else
				expect(err == 0);
		}
	}
}

/* parse exactly @len bytes; on success the encoding must be canonical */
static void fuzz_parse(const uint8_t *data, size_t len, size_t size)
{
	struct smr_hs_msg m;
	uint8_t again[256];
	int err = smr_hs_parse(data, len, &m);

	expect(err <= 0 && err >= -SMR_WIRE_EOPTION);
	if (err)
		return;
	expect(smr_hs_peek(data, len) == (int)len);
	expect(smr_hs_build(&m, again, sizeof(again)) == len);
	expect(memcmp(data, again, len) == 0);
	/* exactly enough room works, one byte less does not */
	expect(smr_hs_build(&m, again, len) == len);
	expect(smr_hs_build(&m, again, len - 1) == 0);
	fuzz_check(&m, data, size);
}

static void fuzz_hs(const uint8_t *data, size_t size)
{
	int len = smr_hs_peek(data, size);

	if (len >= 0)
		expect(known_len(len) && size >= SMR_HS_HDR_LEN);
	else
		expect(len >= -SMR_WIRE_ELENGTH);
	/* the whole input as one message, as a test would pass it */
	fuzz_parse(data, size, size);
	/* a stream: the announced message, with more bytes behind it */
	if (len > 0 && (size_t)len < size)
		fuzz_parse(data, len, size);
}

/* the input's bytes as a host-order struct: build only what parses */
static void fuzz_build(const uint8_t *data, size_t size)
{
	struct smr_hs_msg m, parsed;
	uint8_t buf[256], again[256];
	size_t len;

	if (size < sizeof(m))
		return;
	memcpy(&m, data, sizeof(m));
	len = smr_hs_build(&m, buf, sizeof(buf));
	if (!len)
		return;
	expect(known_len((int)len));
	expect(smr_hs_parse(buf, len, &parsed) == 0);
	expect(parsed.type == m.type);
	expect(smr_hs_build(&parsed, again, sizeof(again)) == len);
	expect(memcmp(buf, again, len) == 0);
}

static void fuzz_opt(const uint8_t *data, size_t size)
{
	struct smr_opt o, again;
	uint8_t buf[SMR_OPT_LEN];
	int ret = smr_opt_parse(data, size, &o);

	expect(ret == 0 || ret == 1 || ret == -SMR_WIRE_EOPTION ||
	       ret == -SMR_WIRE_EFIELD);
	if (ret != 1)
		return;
	expect(o.version == SMR_OPT_VERSION);
	expect(o.role == SMR_OPT_ROLE_OFFER || o.role == SMR_OPT_ROLE_ANSWER);
	smr_opt_write(buf, &o);
	expect(smr_opt_parse(buf, sizeof(buf), &again) == 1);
	expect(again.version == o.version && again.role == o.role &&
	       again.flags == o.flags && again.nonce == o.nonce);
	expect(smr_opt_nonce_ok(o.nonce) == (o.nonce != 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_hs(data, size);
	fuzz_build(data, size);
	fuzz_opt(data, size);
	return 0;
}
