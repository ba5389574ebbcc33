// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for kernel/wire.c. Each input is treated as the start
 * of a TCP stream (handshake messages), as a TCP option area, as a received
 * SEND (CDC message or link message), as rdma_cm private data and as the
 * arguments of a cursor conversion. Besides the sanitizers' memory checks
 * it asserts the parser's contracts, calling abort() on any violation:
 *  - smr_hs_peek() returns a documented error or a known message length;
 *  - whatever smr_hs_parse() accepts, smr_hs_build() reproduces byte for
 *    byte (one encoding per message), and smr_hs_check() agrees with the
 *    type and token rules;
 *  - whatever smr_hs_build() encodes from a struct made of input bytes
 *    parses again (build refuses exactly what parse would reject);
 *  - whatever smr_opt_parse() accepts survives smr_opt_write() and a
 *    second parse unchanged;
 *  - smr_cdc_parse() returns the error of the first check that fails
 *    (length, magic, version, token, inline length), and what it accepts
 *    smr_cdc_build() reproduces: all 44 header bytes exactly (credits
 *    included, any value);
 *  - smr_lmsg_parse() returns the error of the first check that fails
 *    (length, magic, version, type), never reads past @len, and what it
 *    accepts smr_lmsg_build() reproduces byte for byte; a link message
 *    built from any struct parses back unless its type is unknown;
 *  - smr_msg_kind() names the kind of the first four bytes' magic, and
 *    agrees with the parsers: a CDC or link message parses only as its
 *    kind, and only a SEND of another kind is -SMR_WIRE_EMAGIC to it;
 *  - smr_cm_priv_parse() returns the error of the first check that fails
 *    (length, magic, version, fields: link id, credits bounds, reserved,
 *    a secret that is all zero),
 *    leaves @out untouched on failure, ignores bytes past 32, and what it
 *    accepts smr_cm_priv_build() reproduces byte for byte; private data
 *    built from any struct parses back exactly when its fields are valid;
 *  - smr_cursor_to_count() accepts exactly the cursors that name a byte
 *    count in [prev, max] (computed here in 128 bits), and on success
 *    smr_cursor_from_count() of the result gives back the cursor; on
 *    failure the output is untouched;
 *  - smr_cdc_validate() gives the verdict of the cursor rules, in their
 *    order, computed here independently (stale sequence, after the final,
 *    producer, inline length, consumer, urgent byte), and what it accepts
 *    lies inside both rings.
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
	       len == SMR_HS_CONFIRM_LEN || len == SMR_HS_DECLINE_LEN ||
	       len == SMR_HS_LINK_MSG_LEN;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
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
	for (int expected = 0; expected <= 7; expected++) {
		for (int t = 0; t < 4; t++) {
			uint64_t tok = tokens[t];
			uint64_t echo = echo_of(m);
			int err = smr_hs_check(m, expected, tok);
			int type_ok = expected >= SMR_HS_PROPOSAL &&
				      expected <= SMR_HS_LINK_GRANT &&
				      (m->type == expected ||
				       m->type == SMR_HS_DECLINE);
			/* PROPOSAL and the link messages carry no echo */
			int echo_ok = m->type == SMR_HS_PROPOSAL ||
				      m->type == SMR_HS_LINK_REQUEST ||
				      m->type == SMR_HS_LINK_GRANT ||
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

static int cdc_eq(const struct smr_cdc *a, const struct smr_cdc *b)
{
	return a->flags == b->flags && a->seq == b->seq &&
	       a->token == b->token &&
	       a->prod.wrap == b->prod.wrap && a->prod.count == b->prod.count &&
	       a->cons.wrap == b->cons.wrap && a->cons.count == b->cons.count &&
	       a->urg.wrap == b->urg.wrap && a->urg.count == b->urg.count &&
	       a->inline_len == b->inline_len && a->credits == b->credits;
}

/*
 * What the parser of a fixed-size format owes @data before reading its own
 * fields: too short, a wrong magic, a wrong version (that error), else 0.
 */
static int header_err(const uint8_t *data, size_t size, size_t len,
		      uint32_t magic, uint8_t version)
{
	if (size < len)
		return -SMR_WIRE_ELENGTH;
	if (get_be32(data) != magic)
		return -SMR_WIRE_EMAGIC;
	if (data[4] != version)
		return -SMR_WIRE_EVERSION;
	return 0;
}

static void fuzz_cdc(const uint8_t *data, size_t size)
{
	struct smr_cdc c, again;
	uint8_t buf[SMR_CDC_MAX_LEN];
	uint16_t inline_len = 0;
	int err, want;

	if (size >= SMR_CDC_LEN)
		inline_len = data[40] << 8 | data[41];
	memset(&c, 0x5a, sizeof(c));
	err = smr_cdc_parse(data, size, &c);
	want = header_err(data, size, SMR_CDC_LEN, SMR_CDC_MAGIC, SMR_CDC_VERSION);
	if (!want) {
		if (get_be64(data + 8) == 0)
			want = -SMR_WIRE_ETOKEN;
		else if (inline_len > SMR_CDC_INLINE_MAX)
			want = -SMR_WIRE_EFIELD;
		else if (size < SMR_CDC_LEN + inline_len)
			want = -SMR_WIRE_ELENGTH;
	}
	expect(err == want);
	if (err) {
		expect(((const uint8_t *)&c)[0] == 0x5a);	/* untouched */
		return;
	}
	memset(buf, 0xa5, sizeof(buf));
	smr_cdc_build(&c, buf);
	expect(c.inline_len == inline_len);
	expect(c.credits == (data[42] << 8 | data[43]));
	expect(memcmp(buf, data, SMR_CDC_LEN) == 0);
	expect(smr_cdc_parse(buf, SMR_CDC_LEN + c.inline_len, &again) == 0);
	expect(cdc_eq(&c, &again));
}

/* the input's bytes as a host-order CDC: what build writes parses back */
static void fuzz_cdc_build(const uint8_t *data, size_t size)
{
	struct smr_cdc c, out;
	uint8_t buf[SMR_CDC_MAX_LEN];
	int err;

	if (size < sizeof(c))
		return;
	memcpy(&c, data, sizeof(c));
	smr_cdc_build(&c, buf);
	err = smr_cdc_parse(buf, sizeof(buf), &out);
	if (!c.token) {
		expect(err == -SMR_WIRE_ETOKEN);
		return;
	}
	if (c.inline_len > SMR_CDC_INLINE_MAX) {
		expect(err == -SMR_WIRE_EFIELD);
		return;
	}
	expect(err == 0);
	expect(cdc_eq(&c, &out));
}

static void fuzz_lmsg(const uint8_t *data, size_t size)
{
	struct smr_lmsg m, again, untouched;
	uint8_t buf[SMR_LMSG_LEN + 1];
	int err, want;

	memset(&m, 0x5a, sizeof(m));
	memset(&untouched, 0x5a, sizeof(untouched));
	err = smr_lmsg_parse(data, size, &m);
	want = header_err(data, size, SMR_LMSG_LEN, SMR_LMSG_MAGIC, SMR_LMSG_VERSION);
	if (!want && (data[5] < SMR_LMSG_CREDITS || data[5] > SMR_LMSG_IDLE_NO))
		want = -SMR_WIRE_ETYPE;
	expect(err == want);
	if (err) {
		expect(memcmp(&m, &untouched, sizeof(m)) == 0);
		return;
	}
	expect(m.type == data[5]);
	expect(m.credits == get_be16(data + 6));
	memset(buf, 0xa5, sizeof(buf));
	smr_lmsg_build(&m, buf);
	expect(memcmp(buf, data, SMR_LMSG_LEN) == 0);
	expect(buf[SMR_LMSG_LEN] == 0xa5);	/* nothing past the message */
	expect(smr_lmsg_parse(buf, SMR_LMSG_LEN, &again) == 0);
	expect(again.type == m.type && again.credits == m.credits);
}

/* the input's bytes as a host-order link message: what build writes parses */
static void fuzz_lmsg_build(const uint8_t *data, size_t size)
{
	struct smr_lmsg m, out;
	uint8_t buf[SMR_LMSG_LEN];
	int err;

	if (size < sizeof(m))
		return;
	memcpy(&m, data, sizeof(m));
	smr_lmsg_build(&m, buf);
	err = smr_lmsg_parse(buf, sizeof(buf), &out);
	if (m.type < SMR_LMSG_CREDITS || m.type > SMR_LMSG_IDLE_NO) {
		expect(err == -SMR_WIRE_ETYPE);
		return;
	}
	expect(err == 0);
	expect(out.type == m.type && out.credits == m.credits);
}

/* the magic decides, and the parsers agree with it */
static void fuzz_kind(const uint8_t *data, size_t size)
{
	enum smr_msg_kind kind = smr_msg_kind(data, size);
	struct smr_cdc c;
	struct smr_lmsg m;
	int cdc_err, lmsg_err;

	if (size < 4)
		expect(kind == SMR_MSG_UNKNOWN);
	else if (get_be32(data) == SMR_CDC_MAGIC)
		expect(kind == SMR_MSG_CDC);
	else if (get_be32(data) == SMR_LMSG_MAGIC)
		expect(kind == SMR_MSG_LINK);
	else
		expect(kind == SMR_MSG_UNKNOWN);

	cdc_err = smr_cdc_parse(data, size, &c);
	lmsg_err = smr_lmsg_parse(data, size, &m);
	expect(cdc_err || lmsg_err);		/* never both */
	if (!cdc_err)
		expect(kind == SMR_MSG_CDC);
	if (!lmsg_err)
		expect(kind == SMR_MSG_LINK);
	if (size >= SMR_CDC_LEN)
		expect((cdc_err == -SMR_WIRE_EMAGIC) == (kind != SMR_MSG_CDC));
	if (size >= SMR_LMSG_LEN)
		expect((lmsg_err == -SMR_WIRE_EMAGIC) == (kind != SMR_MSG_LINK));
}

static int zero_bytes(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static int cm_priv_valid(uint32_t link_id, uint16_t credits,
			 const uint8_t *secret)
{
	return link_id && credits && credits <= SMR_CM_CREDITS_MAX &&
	       !zero_bytes(secret, SMR_LINK_SECRET_LEN);
}

static void fuzz_cm_priv(const uint8_t *data, size_t size)
{
	struct smr_cm_priv p, again, untouched;
	uint8_t buf[SMR_CM_PRIV_LEN + 1];
	int err, want;

	memset(&p, 0x5a, sizeof(p));
	memset(&untouched, 0x5a, sizeof(untouched));
	err = smr_cm_priv_parse(data, size, &p);
	want = header_err(data, size, SMR_CM_PRIV_LEN, SMR_CM_MAGIC, SMR_CM_VERSION);
	if (!want && (!cm_priv_valid(get_be32(data + 8), get_be16(data + 6),
				     data + 16) || get_be32(data + 12)))
		want = -SMR_WIRE_EFIELD;
	expect(err == want);
	if (err) {
		expect(memcmp(&p, &untouched, sizeof(p)) == 0);
		return;
	}
	expect(p.flags == data[5]);
	expect(p.credits == get_be16(data + 6));
	expect(p.link_id == get_be32(data + 8));
	expect(memcmp(p.secret, data + 16, SMR_LINK_SECRET_LEN) == 0);
	memset(buf, 0xa5, sizeof(buf));
	smr_cm_priv_build(&p, buf);
	expect(memcmp(buf, data, SMR_CM_PRIV_LEN) == 0);
	expect(buf[SMR_CM_PRIV_LEN] == 0xa5);	/* nothing past the data */
	expect(smr_cm_priv_parse(buf, SMR_CM_PRIV_LEN, &again) == 0);
	expect(again.link_id == p.link_id && again.credits == p.credits &&
	       again.flags == p.flags &&
	       !memcmp(again.secret, p.secret, SMR_LINK_SECRET_LEN));
}

/* the input's bytes as host-order private data: build, then parse */
static void fuzz_cm_priv_build(const uint8_t *data, size_t size)
{
	struct smr_cm_priv p, out;
	uint8_t buf[SMR_CM_PRIV_LEN];
	int err;

	if (size < sizeof(p))
		return;
	memcpy(&p, data, sizeof(p));
	memset(buf, 0xff, sizeof(buf));
	smr_cm_priv_build(&p, buf);
	expect(get_be32(buf + 12) == 0);	/* reserved, whatever was there */
	err = smr_cm_priv_parse(buf, sizeof(buf), &out);
	if (!cm_priv_valid(p.link_id, p.credits, p.secret)) {
		expect(err == -SMR_WIRE_EFIELD);
		return;
	}
	expect(err == 0);
	expect(out.link_id == p.link_id && out.credits == p.credits &&
	       out.flags == p.flags &&
	       !memcmp(out.secret, p.secret, SMR_LINK_SECRET_LEN));
}

/* from_count() of any count from @prev to 2^32 rings on comes back */
static void fuzz_cursor_roundtrip(uint32_t ring, uint64_t prev, uint64_t pick)
{
	uint64_t limit = ((uint64_t)ring << 32) - 1 - (prev & (ring - 1));
	unsigned __int128 v = (unsigned __int128)prev + pick % (limit + 1);
	struct smr_cdc_cursor c;
	u64 out = 0;

	if (v > ~0ull)
		return;
	smr_cursor_from_count((uint64_t)v, ring, &c);
	expect(c.count < ring);
	expect(smr_cursor_to_count(&c, ring, prev, (uint64_t)v, &out) == 0);
	expect(out == (uint64_t)v);
	if (v > prev) {
		out = 0;
		expect(smr_cursor_to_count(&c, ring, prev, (uint64_t)v - 1,
					   &out) == -SMR_WIRE_EFIELD);
		expect(out == 0);
	}
}

/*
 * Cursor arguments from the input's first 25 bytes (zero-padded): a size
 * selector (low 5 bits: log2 of the size; 0x40: size 0; 0x80: a size with
 * several bits set), wrap, count, prev, max.
 */
static void fuzz_cursor(const uint8_t *data, size_t size)
{
	const uint64_t sentinel = 0x5a5a5a5a5a5a5a5aull;
	uint8_t in[25] = { 0 };
	struct smr_cdc_cursor c, back;
	uint32_t ring;
	uint64_t prev, max;
	u64 out = sentinel;
	unsigned __int128 want = 0;
	int shift, valid, ok = 0, err;

	memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
	shift = in[0] & 31;
	ring = 1u << shift;
	if (in[0] & 0x80)
		ring = in[0] * 0x01010101u;	/* never a power of two */
	else if (in[0] & 0x40)
		ring = 0;
	valid = ring && !(ring & (ring - 1));
	c.wrap = get_be32(in + 1);
	c.count = get_be32(in + 5);
	prev = get_be64(in + 9);
	max = get_be64(in + 17);

	err = smr_cursor_to_count(&c, ring, prev, max, &out);
	expect(err == 0 || err == -SMR_WIRE_EFIELD);

	/* reference, in 128 bits: the count from prev's ring on it names */
	if (valid && c.count < ring) {
		uint64_t base = prev >> shift;

		want = ((unsigned __int128)base +
			(uint32_t)(c.wrap - (uint32_t)base)) * ring + c.count;
		ok = want >= prev && want <= max;
	}
	if (!ok) {
		expect(err == -SMR_WIRE_EFIELD);
		expect(out == sentinel);
	} else {
		expect(err == 0);
		expect(out == (uint64_t)want);
		expect(prev <= out && out <= max);
		smr_cursor_from_count(out, ring, &back);
		expect(back.wrap == c.wrap && back.count == c.count);
	}
	if (valid)
		fuzz_cursor_roundtrip(ring, prev, max);
}

/* smr_cursor_to_count()'s contract, computed in 128 bits */
static int ref_count(const struct smr_cdc_cursor *c, uint32_t ring,
		     uint64_t prev, uint64_t max, uint64_t *out)
{
	unsigned __int128 want;
	uint64_t base;
	int shift;

	if (!ring || (ring & (ring - 1)) || c->count >= ring)
		return 0;
	shift = __builtin_ctz(ring);
	base = prev >> shift;
	want = ((unsigned __int128)base + (uint32_t)(c->wrap - (uint32_t)base)) *
	       ring + c->count;
	if (want < prev || want > max)
		return 0;
	*out = (uint64_t)want;
	return 1;
}

/*
 * A receiver's view and a CDC from the input's first 56 bytes
 * (zero-padded): ring sizes (byte 0: our RMB 2^(14 + low nibble), the
 * peer's 2^(14 + high nibble) or 0 when that is 0xf), booleans (byte 1:
 * seq valid, peer done, peer final, urgent flag; 0x10/0x20/0x40: the
 * producer/consumer/urgent cursor is made from a count near the valid
 * range instead of raw bytes), sequence numbers, cursors and counts.
 * smr_cdc_validate() must give the verdict of the rules in their order,
 * computed here independently, and write @out exactly when it returns 0.
 */
static void fuzz_cdc_validate(const uint8_t *data, size_t size)
{
	const uint64_t sentinel = 0x5a5a5a5a5a5a5a5aull;
	struct smr_cdc_rx_counts out = { sentinel, sentinel, sentinel };
	struct smr_cdc_rx_view v;
	struct smr_cdc c;
	uint8_t in[56] = { 0 };
	uint64_t prod = 0, cons = 0, urg = 0;
	uint16_t ahead;
	int want, err;

	memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
	memset(&v, 0, sizeof(v));
	memset(&c, 0, sizeof(c));
	v.rmb_size = 1u << (14 + (in[0] & 15));
	v.peer_rmb_size = (in[0] >> 4) == 15 ? 0 : 1u << (14 + (in[0] >> 4));
	v.rx_seq_valid = in[1] & 1;
	v.peer_done = !!(in[1] & 2);
	v.peer_final = !!(in[1] & 4);
	c.flags = in[1] & 8 ? SMR_CDC_F_URGENT : 0;
	v.rx_seq = get_be16(in + 2);
	c.seq = get_be16(in + 4);
	v.rx_cons = get_be64(in + 6);
	v.rx_prod = v.rx_cons + get_be32(in + 14) % ((uint64_t)v.rmb_size + 1);
	if (v.rx_prod < v.rx_cons)
		return;		/* past 2^64 bytes: no connection gets there */
	v.tx_peer_cons = get_be64(in + 18);
	v.tx_sent = v.tx_peer_cons +
		    get_be32(in + 26) % ((uint64_t)v.peer_rmb_size + 1);
	if (v.tx_sent < v.tx_peer_cons || (!v.peer_rmb_size && v.tx_sent))
		return;
	c.prod.wrap = get_be32(in + 30);
	c.prod.count = get_be32(in + 34);
	c.cons.wrap = get_be32(in + 38);
	c.cons.count = get_be32(in + 42);
	c.urg.wrap = get_be32(in + 46);
	c.urg.count = get_be32(in + 50);
	c.inline_len = get_be16(in + 54) % (SMR_CDC_INLINE_MAX + 1);
	if (in[1] & 0x10)
		smr_cursor_from_count(v.rx_prod + c.prod.count % (2ull * v.rmb_size),
				      v.rmb_size, &c.prod);
	if (in[1] & 0x20 && v.peer_rmb_size)
		smr_cursor_from_count(v.tx_peer_cons + c.cons.count %
				      (2ull * v.peer_rmb_size),
				      v.peer_rmb_size, &c.cons);
	if (in[1] & 0x40)
		smr_cursor_from_count(v.rx_cons + c.urg.count % (2ull * v.rmb_size),
				      v.rmb_size, &c.urg);

	/* the rules, in protocol.rst's order */
	ahead = (uint16_t)(c.seq - v.rx_seq);
	if (v.rx_seq_valid && (ahead == 0 || ahead >= 0x8000))
		want = SMR_CDC_STALE;
	else if (v.peer_final)
		want = -SMR_WIRE_ESTATE;
	else if (!ref_count(&c.prod, v.rmb_size, v.rx_prod,
			    v.rx_cons + v.rmb_size, &prod) ||
		 (v.peer_done && prod != v.rx_prod) ||
		 c.inline_len > prod - v.rx_prod)
		want = -SMR_WIRE_EFIELD;
	else if (v.peer_rmb_size ?
		 !ref_count(&c.cons, v.peer_rmb_size, v.tx_peer_cons,
			    v.tx_sent, &cons) :
		 c.cons.wrap || c.cons.count)
		want = -SMR_WIRE_EFIELD;
	else if (c.flags & SMR_CDC_F_URGENT &&
		 (prod == v.rx_cons ||
		  !ref_count(&c.urg, v.rmb_size, v.rx_cons, prod - 1, &urg)))
		want = -SMR_WIRE_EFIELD;
	else
		want = 0;

	err = smr_cdc_validate(&c, &v, &out);
	expect(err == want);
	if (err) {
		expect(out.prod == sentinel && out.cons == sentinel &&
		       out.urg == sentinel);
		return;
	}
	expect(out.prod == prod && out.cons == cons && out.urg == urg);
	/* what it accepts is inside the rings */
	expect(v.rx_prod <= out.prod && out.prod <= v.rx_cons + v.rmb_size);
	expect(v.tx_peer_cons <= out.cons && out.cons <= v.tx_sent);
	expect(c.inline_len <= out.prod - v.rx_prod);
	if (c.flags & SMR_CDC_F_URGENT)
		expect(v.rx_cons <= out.urg && out.urg < out.prod);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_hs(data, size);
	fuzz_build(data, size);
	fuzz_opt(data, size);
	fuzz_cdc(data, size);
	fuzz_cdc_build(data, size);
	fuzz_lmsg(data, size);
	fuzz_lmsg_build(data, size);
	fuzz_kind(data, size);
	fuzz_cm_priv(data, size);
	fuzz_cm_priv_build(data, size);
	fuzz_cursor(data, size);
	fuzz_cdc_validate(data, size);
	return 0;
}
