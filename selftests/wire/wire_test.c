// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for kernel/wire.c, the SMR option, handshake, rdma_cm private
 * data, CDC and link message parser, the ring cursor conversions and the
 * CDC receipt's cursor rules (smr_cdc_validate()), built
 * for userspace with ASan/UBSan and run under the kselftest harness (TAP).
 *
 * Golden byte vectors are written out by hand from
 * Documentation/protocol.rst, so the tests pin the wire format itself, not
 * only parse/build agreeing with each other.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "wire.h"

#define PROPOSAL_TOKEN	0x0102030405060708ull
#define ACCEPT_TOKEN	0x1112131415161718ull
#define PROPOSAL_LINK	0x0a0b0c0du
#define CDC_TOKEN	0x2122232425262728ull
#define CDC_CREDITS	0x0123

/* ---- reference messages and their exact bytes ---- */

static const uint8_t golden_proposal[SMR_HS_PROPOSAL_LEN] = {
	0x53, 0x4d, 0x52, 0x48, 0x01, 0x01, 0x00, 0x44,	/* SMRH v1 PROPOSAL 68 */
	0x01, 0x01, 0x06, 0x00,				/* max_ver caps fam rsvd */
	0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* gid */
	0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55,
	0xfd, 0x53, 0x4d, 0x52, 0x00, 0x00, 0x00, 0x00,	/* ip fd53:4d52::1 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,	/* token */
	0x00, 0x04, 0x00, 0x00,				/* rmb_size 256 KiB */
	0x0a, 0x0b, 0x0c, 0x0d,				/* link_id */
	0x00, 0x00, 0x00, 0x00,				/* reserved */
	0x53, 0x4d, 0x52, 0x54,				/* SMRT */
};

static const uint8_t golden_accept[SMR_HS_ACCEPT_LEN] = {
	0x53, 0x4d, 0x52, 0x48, 0x01, 0x02, 0x00, 0x50,	/* SMRH v1 ACCEPT 80 */
	0x01, 0x00, 0x04, 0x00,				/* ver caps fam rsvd */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* gid ::ffff:192.0.2.2 */
	0x00, 0x00, 0xff, 0xff, 0xc0, 0x00, 0x02, 0x02,
	0xc0, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00,	/* ip 192.0.2.2 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,	/* token */
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,	/* token_echo */
	0xff, 0xff, 0x88, 0x80, 0x12, 0x34, 0x50, 0x00,	/* rmb addr */
	0xde, 0xad, 0xbe, 0xef,				/* rkey */
	0x00, 0x01, 0x00, 0x00,				/* size 64 KiB */
	0x53, 0x4d, 0x52, 0x54,
};

static const uint8_t golden_confirm[SMR_HS_CONFIRM_LEN] = {
	0x53, 0x4d, 0x52, 0x48, 0x01, 0x03, 0x00, 0x2c,	/* SMRH v1 CONFIRM 44 */
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,	/* token */
	0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,	/* token_echo */
	0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00,	/* rmb addr */
	0x00, 0x00, 0x00, 0x42,				/* rkey */
	0x00, 0x00, 0x40, 0x00,				/* size 16 KiB */
	0x53, 0x4d, 0x52, 0x54,
};

static const uint8_t golden_decline[SMR_HS_DECLINE_LEN] = {
	0x53, 0x4d, 0x52, 0x48, 0x01, 0x04, 0x00, 0x18,	/* SMRH v1 DECLINE 24 */
	0x05, 0x00, 0x00, 0x00,				/* reason, reserved */
	0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,	/* token_echo */
	0x53, 0x4d, 0x52, 0x54,
};

/* LINK_REQUEST: the client's link id and the secret it asks to be granted */
static const uint8_t golden_link_request[SMR_HS_LINK_MSG_LEN] = {
	0x53, 0x4d, 0x52, 0x48, 0x01, 0x05, 0x00, 0x24,	/* SMRH v1 LINK_REQUEST 36 */
	0x00, 0x00, 0x00, 0x07,				/* link_id */
	0x00, 0x00, 0x00, 0x00,				/* reserved */
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,	/* secret */
	0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
	0x53, 0x4d, 0x52, 0x54,
};

/* LINK_GRANT: the same fields, echoed */
static const uint8_t golden_link_grant[SMR_HS_LINK_MSG_LEN] = {
	0x53, 0x4d, 0x52, 0x48, 0x01, 0x06, 0x00, 0x24,	/* SMRH v1 LINK_GRANT 36 */
	0x00, 0x00, 0x00, 0x07,
	0x00, 0x00, 0x00, 0x00,
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
	0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
	0x53, 0x4d, 0x52, 0x54,
};

#define LINK_MSG_ID	7

static void make_link_msg(struct smr_hs_msg *m, uint8_t type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->link.link_id = LINK_MSG_ID;
	for (int i = 0; i < SMR_LINK_SECRET_LEN; i++)
		m->link.secret[i] = 0xa0 + i;
}

static void make_link_request(struct smr_hs_msg *m)
{
	make_link_msg(m, SMR_HS_LINK_REQUEST);
}

static void make_link_grant(struct smr_hs_msg *m)
{
	make_link_msg(m, SMR_HS_LINK_GRANT);
}

static void make_proposal(struct smr_hs_msg *m)
{
	static const uint8_t gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
					 0x02, 0x11, 0x22, 0xff,
					 0xfe, 0x33, 0x44, 0x55 };
	static const uint8_t ip[16] = { 0xfd, 0x53, 0x4d, 0x52, 0, 0, 0, 0,
					0, 0, 0, 0, 0, 0, 0, 1 };

	memset(m, 0, sizeof(*m));
	m->type = SMR_HS_PROPOSAL;
	m->proposal.max_version = 1;
	m->proposal.caps = SMR_HS_CAP_RDMA;
	m->proposal.addr.family = SMR_HS_AF_INET6;
	memcpy(m->proposal.addr.gid, gid, 16);
	memcpy(m->proposal.addr.ip, ip, 16);
	m->proposal.token = PROPOSAL_TOKEN;
	m->proposal.rmb_size = 256 * 1024;
	m->proposal.link_id = PROPOSAL_LINK;
}

static void make_accept(struct smr_hs_msg *m)
{
	static const uint8_t gid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					 0xff, 0xff, 192, 0, 2, 2 };
	static const uint8_t ip[16] = { 192, 0, 2, 2 };

	memset(m, 0, sizeof(*m));
	m->type = SMR_HS_ACCEPT;
	m->accept.version = 1;
	m->accept.caps = 0;
	m->accept.addr.family = SMR_HS_AF_INET;
	memcpy(m->accept.addr.gid, gid, 16);
	memcpy(m->accept.addr.ip, ip, 16);
	m->accept.token = ACCEPT_TOKEN;
	m->accept.token_echo = PROPOSAL_TOKEN;
	m->accept.rmb.addr = 0xffff888012345000ull;
	m->accept.rmb.rkey = 0xdeadbeef;
	m->accept.rmb.size = 64 * 1024;
}

static void make_confirm(struct smr_hs_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = SMR_HS_CONFIRM;
	m->confirm.token = PROPOSAL_TOKEN;
	m->confirm.token_echo = ACCEPT_TOKEN;
	m->confirm.rmb.addr = 0x00007f0000001000ull;
	m->confirm.rmb.rkey = 0x42;
	m->confirm.rmb.size = 16 * 1024;
}

static void make_decline(struct smr_hs_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = SMR_HS_DECLINE;
	m->decline.reason = 5;
	m->decline.token_echo = ACCEPT_TOKEN;
}

struct ref_msg {
	const char *name;
	void (*make)(struct smr_hs_msg *m);
	const uint8_t *bytes;
	size_t len;
};

static const struct ref_msg refs[] = {
	{ "PROPOSAL", make_proposal, golden_proposal, sizeof(golden_proposal) },
	{ "ACCEPT", make_accept, golden_accept, sizeof(golden_accept) },
	{ "CONFIRM", make_confirm, golden_confirm, sizeof(golden_confirm) },
	{ "DECLINE", make_decline, golden_decline, sizeof(golden_decline) },
	{ "LINK_REQUEST", make_link_request, golden_link_request,
	  sizeof(golden_link_request) },
	{ "LINK_GRANT", make_link_grant, golden_link_grant,
	  sizeof(golden_link_grant) },
};

#define NREFS	(sizeof(refs) / sizeof(refs[0]))

static int addr_eq(const struct smr_hs_addr *a, const struct smr_hs_addr *b)
{
	return a->family == b->family && !memcmp(a->gid, b->gid, 16) &&
	       !memcmp(a->ip, b->ip, 16);
}

static int rmb_eq(const struct smr_hs_rmb *a, const struct smr_hs_rmb *b)
{
	return a->addr == b->addr && a->rkey == b->rkey && a->size == b->size;
}

/* field by field: independent of padding */
static int msg_eq(const struct smr_hs_msg *a, const struct smr_hs_msg *b)
{
	if (a->type != b->type)
		return 0;
	switch (a->type) {
	case SMR_HS_PROPOSAL:
		return a->proposal.max_version == b->proposal.max_version &&
		       a->proposal.caps == b->proposal.caps &&
		       addr_eq(&a->proposal.addr, &b->proposal.addr) &&
		       a->proposal.token == b->proposal.token &&
		       a->proposal.rmb_size == b->proposal.rmb_size &&
		       a->proposal.link_id == b->proposal.link_id;
	case SMR_HS_ACCEPT:
		return a->accept.version == b->accept.version &&
		       a->accept.caps == b->accept.caps &&
		       addr_eq(&a->accept.addr, &b->accept.addr) &&
		       a->accept.token == b->accept.token &&
		       a->accept.token_echo == b->accept.token_echo &&
		       rmb_eq(&a->accept.rmb, &b->accept.rmb);
	case SMR_HS_CONFIRM:
		return a->confirm.token == b->confirm.token &&
		       a->confirm.token_echo == b->confirm.token_echo &&
		       rmb_eq(&a->confirm.rmb, &b->confirm.rmb);
	case SMR_HS_DECLINE:
		return a->decline.reason == b->decline.reason &&
		       a->decline.token_echo == b->decline.token_echo;
	case SMR_HS_LINK_REQUEST:
	case SMR_HS_LINK_GRANT:
		return a->link.link_id == b->link.link_id &&
		       !memcmp(a->link.secret, b->link.secret,
			       SMR_LINK_SECRET_LEN);
	}
	return 0;
}

/* a copy of a reference message's bytes, for corrupting */
static size_t ref_copy(const struct ref_msg *r, uint8_t *buf)
{
	memcpy(buf, r->bytes, r->len);
	return r->len;
}

/* parse from a heap copy of exactly @len bytes, so ASan sees any over-read */
static int parse_bytes(const uint8_t *buf, size_t len)
{
	uint8_t *copy = malloc(len);
	struct smr_hs_msg m;
	int ret;

	if (!copy && len)
		abort();
	if (len)
		memcpy(copy, buf, len);
	ret = smr_hs_parse(copy, len, &m);
	free(copy);
	return ret;
}

/* build @m and parse it back: the error of the parse, or -100 if build failed */
static int build_parse(const struct smr_hs_msg *m, struct smr_hs_msg *out)
{
	uint8_t buf[SMR_HS_MAX_LEN];
	size_t len = smr_hs_build(m, buf, sizeof(buf));

	if (!len)
		return -100;
	return smr_hs_parse(buf, len, out);
}

/* a heap copy of exactly @len bytes (one at least), so ASan sees any over-read */
static uint8_t *heap_copy(const uint8_t *bytes, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);

	if (!copy)
		abort();
	memcpy(copy, bytes, len);
	return copy;
}

/* the big-endian @n-byte @field: all zero but bit @bit of its value */
static void be_one_bit(uint8_t *field, size_t n, int bit)
{
	memset(field, 0, n);
	field[n - 1 - bit / 8] = 1u << bit % 8;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng32(void)
{
	/* xorshift64: fixed seed, so a failure reproduces */
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 32);
}

/* ---- handshake: round trips and exact bytes ---- */

TEST(hs_build_matches_golden_bytes)
{
	for (size_t i = 0; i < NREFS; i++) {
		struct smr_hs_msg m;
		uint8_t buf[SMR_HS_MAX_LEN + 8];

		memset(buf, 0xaa, sizeof(buf));
		refs[i].make(&m);
		ASSERT_EQ(refs[i].len, smr_hs_build(&m, buf, sizeof(buf))) TH_LOG("%s", refs[i].name);
		ASSERT_EQ(0, memcmp(buf, refs[i].bytes, refs[i].len)) TH_LOG("%s", refs[i].name);
		/* nothing written past the message */
		for (size_t j = refs[i].len; j < sizeof(buf); j++) {
			ASSERT_EQ(0xaa, buf[j]);
		}
	}
}

TEST(hs_parse_golden_bytes)
{
	for (size_t i = 0; i < NREFS; i++) {
		struct smr_hs_msg want, got;

		refs[i].make(&want);
		memset(&got, 0x5a, sizeof(got));
		ASSERT_EQ(0, smr_hs_parse(refs[i].bytes, refs[i].len, &got)) TH_LOG("%s", refs[i].name);
		ASSERT_TRUE(msg_eq(&want, &got)) TH_LOG("%s", refs[i].name);
	}
}

TEST(hs_roundtrip_proposal)
{
	struct smr_hs_msg m, out;

	make_proposal(&m);
	ASSERT_EQ(0, build_parse(&m, &out));
	ASSERT_TRUE(msg_eq(&m, &out));
	/* IPv4 variant, max_version above ours, every caps bit */
	m.proposal.addr.family = SMR_HS_AF_INET;
	memset(m.proposal.addr.ip, 0, 16);
	memcpy(m.proposal.addr.ip, "\xc0\x00\x02\x01", 4);
	m.proposal.max_version = 255;
	m.proposal.caps = 0xff;
	ASSERT_EQ(0, build_parse(&m, &out));
	ASSERT_TRUE(msg_eq(&m, &out));
	ASSERT_EQ(0xff, out.proposal.caps);	/* unknown caps are carried */
}

TEST(hs_roundtrip_accept)
{
	struct smr_hs_msg m, out;

	make_accept(&m);
	ASSERT_EQ(0, build_parse(&m, &out));
	ASSERT_TRUE(msg_eq(&m, &out));
	m.accept.token = ~0ull;
	m.accept.token_echo = 1;
	m.accept.rmb.addr = 0;
	m.accept.rmb.rkey = 0;
	m.accept.rmb.size = SMR_HS_RMB_MAX;
	m.accept.addr.family = SMR_HS_AF_INET6;
	memset(m.accept.addr.ip, 0xff, 16);
	ASSERT_EQ(0, build_parse(&m, &out));
	ASSERT_TRUE(msg_eq(&m, &out));
}

TEST(hs_roundtrip_confirm)
{
	struct smr_hs_msg m, out;

	make_confirm(&m);
	ASSERT_EQ(0, build_parse(&m, &out));
	ASSERT_TRUE(msg_eq(&m, &out));
	m.confirm.rmb.addr = ~0ull;
	m.confirm.rmb.rkey = ~0u;
	m.confirm.rmb.size = SMR_HS_RMB_MIN;
	ASSERT_EQ(0, build_parse(&m, &out));
	ASSERT_TRUE(msg_eq(&m, &out));
}

TEST(hs_roundtrip_decline)
{
	struct smr_hs_msg m, out;

	make_decline(&m);
	for (unsigned int reason = 0; reason < SMR_HS_REASON_LIMIT; reason++) {
		m.decline.reason = reason;
		m.decline.token_echo = reason & 1 ? 0 : ACCEPT_TOKEN;
		ASSERT_EQ(0, build_parse(&m, &out));
		ASSERT_TRUE(msg_eq(&m, &out));
	}
}

TEST(hs_roundtrip_random_valid)
{
	/* random field values, kept valid: parse(build(m)) == m */
	for (int n = 0; n < 20000; n++) {
		struct smr_hs_msg m, out;
		uint8_t *raw = (uint8_t *)&m;

		for (size_t i = 0; i < sizeof(m); i++)
			raw[i] = rng32();
		m.type = 1 + rng32() % 4;
		switch (m.type) {
		case SMR_HS_PROPOSAL:
			m.proposal.max_version |= 1;
			m.proposal.addr.family = rng32() & 1 ? 4 : 6;
			if (m.proposal.addr.family == 4)
				memset(m.proposal.addr.ip + 4, 0, 12);
			m.proposal.token |= 1;
			m.proposal.rmb_size = SMR_HS_RMB_MIN << rng32() % 15;
			m.proposal.link_id |= 1u << rng32() % 32;
			break;
		case SMR_HS_ACCEPT:
			m.accept.version = 1;
			m.accept.addr.family = rng32() & 1 ? 4 : 6;
			if (m.accept.addr.family == 4)
				memset(m.accept.addr.ip + 4, 0, 12);
			m.accept.token |= 1ull << 63;
			m.accept.token_echo |= 2;
			m.accept.rmb.size = SMR_HS_RMB_MIN << rng32() % 15;
			break;
		case SMR_HS_CONFIRM:
			m.confirm.token |= 4;
			m.confirm.token_echo |= 8;
			m.confirm.rmb.size = SMR_HS_RMB_MIN << rng32() % 15;
			break;
		case SMR_HS_DECLINE:
			m.decline.reason %= SMR_HS_REASON_LIMIT;
			break;
		}
		ASSERT_EQ(0, build_parse(&m, &out)) TH_LOG("iteration %d type %u", n, m.type);
		ASSERT_TRUE(msg_eq(&m, &out));
	}
}

TEST(hs_build_cap_too_small)
{
	for (size_t i = 0; i < NREFS; i++) {
		struct smr_hs_msg m;
		uint8_t buf[SMR_HS_MAX_LEN];

		refs[i].make(&m);
		for (size_t cap = 0; cap < refs[i].len; cap++) {
			memset(buf, 0xaa, sizeof(buf));
			ASSERT_EQ(0, smr_hs_build(&m, buf, cap));
			for (size_t j = 0; j < sizeof(buf); j++) {
				ASSERT_EQ(0xaa, buf[j]);	/* untouched */
			}
		}
		ASSERT_EQ(refs[i].len, smr_hs_build(&m, buf, refs[i].len));
	}
}

TEST(hs_build_rejects_invalid)
{
	struct smr_hs_msg m;
	uint8_t buf[256];

#define EXPECT_BUILD_FAILS(make, mutation) do {			\
		make(&m);					\
		mutation;					\
		EXPECT_EQ(0, smr_hs_build(&m, buf, sizeof(buf)))	\
			TH_LOG("%s", #mutation);		\
	} while (0)

	EXPECT_BUILD_FAILS(make_proposal, m.type = 0);
	EXPECT_BUILD_FAILS(make_proposal, m.type = 7);
	EXPECT_BUILD_FAILS(make_proposal, m.proposal.token = 0);
	EXPECT_BUILD_FAILS(make_proposal, m.proposal.max_version = 0);
	EXPECT_BUILD_FAILS(make_proposal, m.proposal.rmb_size = 48 * 1024);
	EXPECT_BUILD_FAILS(make_proposal, m.proposal.link_id = 0);
	EXPECT_BUILD_FAILS(make_proposal, m.proposal.addr.family = 5);
	EXPECT_BUILD_FAILS(make_proposal,
			   (m.proposal.addr.family = 4, m.proposal.addr.ip[15] = 1));
	EXPECT_BUILD_FAILS(make_accept, m.accept.version = 2);
	EXPECT_BUILD_FAILS(make_accept, m.accept.token = 0);
	EXPECT_BUILD_FAILS(make_accept, m.accept.token_echo = 0);
	EXPECT_BUILD_FAILS(make_accept, m.accept.rmb.size = 0);
	EXPECT_BUILD_FAILS(make_accept, m.accept.addr.family = 0);
	EXPECT_BUILD_FAILS(make_confirm, m.confirm.token = 0);
	EXPECT_BUILD_FAILS(make_confirm, m.confirm.token_echo = 0);
	EXPECT_BUILD_FAILS(make_confirm, m.confirm.rmb.size = SMR_HS_RMB_MAX * 2);
	EXPECT_BUILD_FAILS(make_decline, m.decline.reason = SMR_HS_REASON_LIMIT);
	EXPECT_BUILD_FAILS(make_decline, m.decline.reason = 255);
	EXPECT_BUILD_FAILS(make_link_request, m.link.link_id = 0);
	EXPECT_BUILD_FAILS(make_link_request, memset(m.link.secret, 0, 16));
	EXPECT_BUILD_FAILS(make_link_grant, m.link.link_id = 0);
	EXPECT_BUILD_FAILS(make_link_grant, memset(m.link.secret, 0, 16));
#undef EXPECT_BUILD_FAILS
}

/* ---- handshake: header violations ---- */

TEST(hs_magic_each_byte)
{
	for (size_t i = 0; i < NREFS; i++) {
		for (int byte = 0; byte < 4; byte++) {
			for (int bit = 0; bit < 8; bit++) {
				uint8_t buf[SMR_HS_MAX_LEN];
				size_t len = ref_copy(&refs[i], buf);

				buf[byte] ^= 1u << bit;
				ASSERT_EQ(-SMR_WIRE_EMAGIC, smr_hs_peek(buf, len));
				ASSERT_EQ(-SMR_WIRE_EMAGIC, parse_bytes(buf, len));
				/* seen as early as the differing byte arrives */
				ASSERT_EQ(-SMR_WIRE_EMAGIC, smr_hs_peek(buf, byte + 1));
			}
		}
	}
}

TEST(hs_wrong_magic_whole)
{
	uint8_t buf[SMR_HS_MAX_LEN];
	size_t len = ref_copy(&refs[0], buf);

	memcpy(buf, "SMRT", 4);	/* the trailer is not the magic */
	EXPECT_EQ(-SMR_WIRE_EMAGIC, parse_bytes(buf, len));
	memset(buf, 0, 4);
	EXPECT_EQ(-SMR_WIRE_EMAGIC, parse_bytes(buf, len));
}

/*
 * Every reference message with header byte @off set to each of the @n
 * values @bad: smr_hs_peek() and the parser refuse it with @err, and
 * (@by_header) so does smr_hs_peek() of the header alone.
 */
static void hs_byte_refused(struct __test_metadata *_metadata, size_t off,
			    const uint8_t *bad, size_t n, int err,
			    bool by_header)
{
	for (size_t i = 0; i < NREFS; i++) {
		for (size_t b = 0; b < n; b++) {
			uint8_t buf[SMR_HS_MAX_LEN];
			size_t len = ref_copy(&refs[i], buf);

			buf[off] = bad[b];
			ASSERT_EQ(err, smr_hs_peek(buf, len))
				TH_LOG("%s byte %zu = %u", refs[i].name, off, bad[b]);
			if (by_header) {	/* ASSERT_EQ is two statements */
				ASSERT_EQ(err, smr_hs_peek(buf, SMR_HS_HDR_LEN));
			}
			ASSERT_EQ(err, parse_bytes(buf, len));
		}
	}
}

TEST(hs_version_0_and_2)
{
	static const uint8_t bad[] = { 0, 2, 0x11, 255 };

	hs_byte_refused(_metadata, 4, bad, sizeof(bad), -SMR_WIRE_EVERSION, true);
}

TEST(hs_type_0_7_255)
{
	static const uint8_t bad[] = { 0, 7, 8, 0x81, 255 };

	hs_byte_refused(_metadata, 5, bad, sizeof(bad), -SMR_WIRE_ETYPE, false);
}

TEST(hs_length_field_wrong)
{
	for (size_t i = 0; i < NREFS; i++) {
		const unsigned int exact = refs[i].len;
		const unsigned int bad[] = { exact - 1, exact + 1, 0, 65535,
					     exact + 256, SMR_HS_HDR_LEN };

		for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
			uint8_t buf[SMR_HS_MAX_LEN];
			size_t len = ref_copy(&refs[i], buf);

			buf[6] = bad[b] >> 8;
			buf[7] = bad[b] & 0xff;
			ASSERT_EQ(-SMR_WIRE_ELENGTH, smr_hs_peek(buf, len))
				TH_LOG("%s length %u", refs[i].name, bad[b]);
			ASSERT_EQ(-SMR_WIRE_ELENGTH, parse_bytes(buf, len));
		}
	}
}

TEST(hs_length_of_another_type)
{
	/* a valid length, but another type's: the pair must match */
	for (size_t i = 0; i < NREFS; i++) {
		for (size_t j = 0; j < NREFS; j++) {
			uint8_t buf[SMR_HS_MAX_LEN];
			size_t len = ref_copy(&refs[i], buf);

			/* LINK_REQUEST and LINK_GRANT share their length */
			if (refs[i].len == refs[j].len)
				continue;
			buf[7] = refs[j].len;
			ASSERT_EQ(-SMR_WIRE_ELENGTH, smr_hs_peek(buf, len));
		}
	}
}

TEST(hs_truncated_every_length)
{
	for (size_t i = 0; i < NREFS; i++) {
		for (size_t cut = 0; cut < refs[i].len; cut++) {
			struct smr_hs_msg out;
			/* exactly @cut bytes, so ASan sees any over-read */
			uint8_t *buf = malloc(cut ? cut : 1);

			ASSERT_NE(NULL, buf);
			memcpy(buf, refs[i].bytes, cut);
			memset(&out, 0x5a, sizeof(out));
			ASSERT_EQ(-SMR_WIRE_EAGAIN, smr_hs_parse(buf, cut, &out))
				TH_LOG("%s cut at %zu", refs[i].name, cut);
			ASSERT_EQ(0x5a, ((uint8_t *)&out)[0]);	/* not written */
			if (cut < SMR_HS_HDR_LEN) {
				ASSERT_EQ(-SMR_WIRE_EAGAIN, smr_hs_peek(buf, cut));
			} else {
				ASSERT_EQ((int)refs[i].len, smr_hs_peek(buf, cut));
			}
			free(buf);
		}
	}
}

TEST(hs_oversized_buffer_rejected)
{
	for (size_t i = 0; i < NREFS; i++) {
		uint8_t buf[2 * SMR_HS_MAX_LEN];
		size_t len = ref_copy(&refs[i], buf);

		/* the next message (or application data) follows */
		memcpy(buf + len, refs[0].bytes, refs[0].len);
		ASSERT_EQ((int)len, smr_hs_peek(buf, sizeof(buf)));
		ASSERT_EQ(-SMR_WIRE_ELENGTH, parse_bytes(buf, len + 1));
		ASSERT_EQ(-SMR_WIRE_ELENGTH, parse_bytes(buf, len + refs[0].len));
		ASSERT_EQ(0, parse_bytes(buf, len));
	}
}

TEST(hs_trailer_every_bit)
{
	for (size_t i = 0; i < NREFS; i++) {
		for (size_t off = refs[i].len - 4; off < refs[i].len; off++) {
			for (int bit = 0; bit < 8; bit++) {
				uint8_t buf[SMR_HS_MAX_LEN];
				size_t len = ref_copy(&refs[i], buf);

				buf[off] ^= 1u << bit;
				ASSERT_EQ(-SMR_WIRE_ETRAILER, parse_bytes(buf, len));
				/* peek only looks at the header */
				ASSERT_EQ((int)len, smr_hs_peek(buf, len));
			}
		}
	}
}

/* ---- handshake: body field violations ---- */

/* every bit of every reserved byte, one at a time */
static int reserved_rejected(const struct ref_msg *r, size_t off, size_t n)
{
	for (size_t o = off; o < off + n; o++) {
		for (int bit = 0; bit < 8; bit++) {
			uint8_t buf[SMR_HS_MAX_LEN];
			size_t len = ref_copy(r, buf);

			buf[o] ^= 1u << bit;
			if (parse_bytes(buf, len) != -SMR_WIRE_EFIELD)
				return 0;
		}
	}
	return 1;
}

TEST(hs_reserved_proposal)
{
	EXPECT_TRUE(reserved_rejected(&refs[0], 11, 1));
	EXPECT_TRUE(reserved_rejected(&refs[0], 60, 4));
}

TEST(hs_reserved_accept)
{
	EXPECT_TRUE(reserved_rejected(&refs[1], 11, 1));
}

TEST(hs_reserved_decline)
{
	EXPECT_TRUE(reserved_rejected(&refs[3], 9, 3));
}

TEST(hs_token_zero)
{
	static const struct { size_t ref, off; } tokens[] = {
		{ 0, 44 },		/* PROPOSAL token */
		{ 1, 44 }, { 1, 52 },	/* ACCEPT token, token_echo */
		{ 2, 8 }, { 2, 16 },	/* CONFIRM token, token_echo */
	};

	for (size_t t = 0; t < sizeof(tokens) / sizeof(tokens[0]); t++) {
		uint8_t buf[SMR_HS_MAX_LEN];
		size_t len = ref_copy(&refs[tokens[t].ref], buf);

		memset(buf + tokens[t].off, 0, 8);
		ASSERT_EQ(-SMR_WIRE_ETOKEN, parse_bytes(buf, len))
			TH_LOG("%s offset %zu", refs[tokens[t].ref].name, tokens[t].off);
		/* one bit set anywhere makes it a token again */
		buf[tokens[t].off + 7] = 1;
		ASSERT_EQ(0, parse_bytes(buf, len));
	}
}

TEST(hs_decline_echo_zero_parses)
{
	uint8_t buf[SMR_HS_MAX_LEN];
	size_t len = ref_copy(&refs[3], buf);
	struct smr_hs_msg out;

	memset(buf + 12, 0, 8);
	ASSERT_EQ(0, smr_hs_parse(buf, len, &out));
	ASSERT_EQ(0, out.decline.token_echo);
}

static int rmb_size_err(size_t ref, size_t off, uint32_t size)
{
	uint8_t buf[SMR_HS_MAX_LEN];
	size_t len = ref_copy(&refs[ref], buf);

	buf[off] = size >> 24;
	buf[off + 1] = size >> 16;
	buf[off + 2] = size >> 8;
	buf[off + 3] = size;
	return parse_bytes(buf, len);
}

/* where rmb_size sits in PROPOSAL, ACCEPT and CONFIRM */
static const struct { size_t ref, off; } rmb_sizes[] = {
	{ 0, 52 }, { 1, 72 }, { 2, 36 },
};

TEST(hs_rmb_size_not_power_of_two)
{
	static const uint32_t bad[] = {
		SMR_HS_RMB_MIN + 1, 3 * SMR_HS_RMB_MIN, SMR_HS_RMB_MAX - 1,
		SMR_HS_RMB_MIN | SMR_HS_RMB_MAX, 0x00030000,
	};

	for (size_t r = 0; r < 3; r++) {
		for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
			ASSERT_EQ(-SMR_WIRE_EFIELD,
				  rmb_size_err(rmb_sizes[r].ref, rmb_sizes[r].off, bad[b]))
				TH_LOG("size 0x%x", bad[b]);
		}
	}
}

TEST(hs_rmb_size_too_small)
{
	for (size_t r = 0; r < 3; r++) {
		ASSERT_EQ(-SMR_WIRE_EFIELD, rmb_size_err(rmb_sizes[r].ref, rmb_sizes[r].off, 0));
		for (uint32_t size = 1; size < SMR_HS_RMB_MIN; size <<= 1) {
			ASSERT_EQ(-SMR_WIRE_EFIELD,
				  rmb_size_err(rmb_sizes[r].ref, rmb_sizes[r].off, size));
		}
		ASSERT_EQ(0, rmb_size_err(rmb_sizes[r].ref, rmb_sizes[r].off, SMR_HS_RMB_MIN));
	}
}

TEST(hs_rmb_size_too_large)
{
	for (size_t r = 0; r < 3; r++) {
		for (uint64_t size = 2ull * SMR_HS_RMB_MAX; size <= 0x80000000u; size <<= 1) {
			ASSERT_EQ(-SMR_WIRE_EFIELD,
				  rmb_size_err(rmb_sizes[r].ref, rmb_sizes[r].off, size));
		}
		ASSERT_EQ(-SMR_WIRE_EFIELD,
			  rmb_size_err(rmb_sizes[r].ref, rmb_sizes[r].off, 0xffffffffu));
		ASSERT_EQ(0, rmb_size_err(rmb_sizes[r].ref, rmb_sizes[r].off, SMR_HS_RMB_MAX));
	}
}

TEST(hs_addr_family_invalid)
{
	static const uint8_t bad[] = { 0, 2, 5, 10, 255 };

	for (size_t r = 0; r < 2; r++) {	/* PROPOSAL, ACCEPT */
		for (size_t b = 0; b < sizeof(bad); b++) {
			uint8_t buf[SMR_HS_MAX_LEN];
			size_t len = ref_copy(&refs[r], buf);

			buf[10] = bad[b];
			ASSERT_EQ(-SMR_WIRE_EFIELD, parse_bytes(buf, len))
				TH_LOG("%s family %u", refs[r].name, bad[b]);
		}
	}
}

TEST(hs_ipv4_junk_in_ip_tail)
{
	for (size_t r = 0; r < 2; r++) {
		for (size_t i = 4; i < 16; i++) {
			uint8_t buf[SMR_HS_MAX_LEN];
			size_t len = ref_copy(&refs[r], buf);

			buf[10] = SMR_HS_AF_INET;
			memset(buf + 28 + 4, 0, 12);
			ASSERT_EQ(0, parse_bytes(buf, len));
			buf[28 + i] = 0x80;
			ASSERT_EQ(-SMR_WIRE_EFIELD, parse_bytes(buf, len))
				TH_LOG("%s ip[%zu]", refs[r].name, i);
			/* the same bytes are a fine IPv6 address */
			buf[10] = SMR_HS_AF_INET6;
			ASSERT_EQ(0, parse_bytes(buf, len));
		}
	}
}

TEST(hs_proposal_max_version_zero)
{
	uint8_t buf[SMR_HS_MAX_LEN];
	size_t len = ref_copy(&refs[0], buf);

	buf[8] = 0;
	EXPECT_EQ(-SMR_WIRE_EFIELD, parse_bytes(buf, len));
	buf[8] = 2;	/* a newer client: we answer with version 1 */
	EXPECT_EQ(0, parse_bytes(buf, len));
}

TEST(hs_proposal_link_id)
{
	static const uint32_t ids[] = { 1, 0x80000000u, 0xffffffffu, 0x00ff0000u };
	struct smr_hs_msg m, out;
	uint8_t buf[SMR_HS_MAX_LEN];
	size_t len;

	/* at offset 56, big-endian, carried through parse and build */
	ASSERT_EQ(0, smr_hs_parse(golden_proposal, sizeof(golden_proposal), &out));
	ASSERT_EQ(PROPOSAL_LINK, out.proposal.link_id);
	make_proposal(&m);
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		m.proposal.link_id = ids[i];
		ASSERT_EQ(0, build_parse(&m, &out)) TH_LOG("link_id 0x%x", ids[i]);
		ASSERT_TRUE(msg_eq(&m, &out));
		ASSERT_EQ(SMR_HS_PROPOSAL_LEN, smr_hs_build(&m, buf, sizeof(buf)));
		ASSERT_EQ(ids[i] >> 24, buf[56]);
		ASSERT_EQ((ids[i] >> 16) & 0xff, buf[57]);
		ASSERT_EQ((ids[i] >> 8) & 0xff, buf[58]);
		ASSERT_EQ(ids[i] & 0xff, buf[59]);
	}

	/* zero is not a link: rejected on parse, output untouched */
	len = ref_copy(&refs[0], buf);
	memset(buf + 56, 0, 4);
	memset(&out, 0x5a, sizeof(out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, smr_hs_parse(buf, len, &out));
	ASSERT_EQ(0x5a, ((uint8_t *)&out)[0]);
	ASSERT_EQ(-SMR_WIRE_EFIELD, parse_bytes(buf, len));
	/* any one bit makes it a link id again */
	for (int bit = 0; bit < 32; bit++) {
		be_one_bit(buf + 56, 4, bit);
		ASSERT_EQ(0, smr_hs_parse(buf, len, &out));
		ASSERT_EQ(1u << bit, out.proposal.link_id);
	}
	/* and refused on build */
	make_proposal(&m);
	m.proposal.link_id = 0;
	ASSERT_EQ(0, smr_hs_build(&m, buf, sizeof(buf)));
}

TEST(hs_accept_version_not_1)
{
	static const uint8_t bad[] = { 0, 2, 255 };

	for (size_t b = 0; b < sizeof(bad); b++) {
		uint8_t buf[SMR_HS_MAX_LEN];
		size_t len = ref_copy(&refs[1], buf);

		buf[8] = bad[b];
		EXPECT_EQ(-SMR_WIRE_EVERSION, parse_bytes(buf, len));
	}
}

TEST(hs_decline_reason_limit)
{
	uint8_t buf[SMR_HS_MAX_LEN];
	size_t len = ref_copy(&refs[3], buf);
	struct smr_hs_msg out;

	buf[8] = SMR_HS_REASON_LIMIT - 1;
	ASSERT_EQ(0, smr_hs_parse(buf, len, &out));
	ASSERT_EQ(SMR_HS_REASON_LIMIT - 1, out.decline.reason);
	buf[8] = SMR_HS_REASON_LIMIT;
	ASSERT_EQ(-SMR_WIRE_EFIELD, parse_bytes(buf, len));
	buf[8] = 255;
	ASSERT_EQ(-SMR_WIRE_EFIELD, parse_bytes(buf, len));
}

TEST(hs_parse_failure_leaves_out_alone)
{
	uint8_t buf[SMR_HS_MAX_LEN];
	size_t len = ref_copy(&refs[1], buf);
	struct smr_hs_msg out;
	uint8_t *raw = (uint8_t *)&out;

	buf[72] = 0xff;		/* rmb size out of range */
	memset(&out, 0x5a, sizeof(out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, smr_hs_parse(buf, len, &out));
	for (size_t i = 0; i < sizeof(out); i++) {
		ASSERT_EQ(0x5a, raw[i]);
	}
}

TEST(hs_every_single_bit_flip_classified)
{
	/*
	 * Flip each bit of each reference message: the result either parses
	 * (a free field) and rebuilds to the same bytes, or fails with the
	 * error of the region the bit is in.
	 */
	for (size_t i = 0; i < NREFS; i++) {
		for (size_t off = 0; off < refs[i].len; off++) {
			for (int bit = 0; bit < 8; bit++) {
				uint8_t buf[SMR_HS_MAX_LEN], again[SMR_HS_MAX_LEN];
				size_t len = ref_copy(&refs[i], buf);
				struct smr_hs_msg out;
				int err;

				buf[off] ^= 1u << bit;
				err = smr_hs_parse(buf, len, &out);
				if (off < 4) {
					ASSERT_EQ(-SMR_WIRE_EMAGIC, err);
				} else if (off == 4) {
					ASSERT_EQ(-SMR_WIRE_EVERSION, err);
				} else if (off < SMR_HS_HDR_LEN) {
					ASSERT_TRUE(err == -SMR_WIRE_ETYPE ||
						    err == -SMR_WIRE_ELENGTH);
				} else if (off >= len - 4) {
					ASSERT_EQ(-SMR_WIRE_ETRAILER, err);
				}
				if (err)
					continue;
				ASSERT_EQ(len, smr_hs_build(&out, again, sizeof(again)));
				ASSERT_EQ(0, memcmp(buf, again, len))
					TH_LOG("%s offset %zu bit %d", refs[i].name, off, bit);
			}
		}
	}
}

/* ---- handshake: state machine checks ---- */

TEST(hs_check_expected_type)
{
	struct smr_hs_msg m;

	make_proposal(&m);
	EXPECT_EQ(0, smr_hs_check(&m, SMR_HS_PROPOSAL, 0));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, SMR_HS_CONFIRM, 0));
	make_accept(&m);
	EXPECT_EQ(0, smr_hs_check(&m, SMR_HS_ACCEPT, PROPOSAL_TOKEN));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, SMR_HS_PROPOSAL, PROPOSAL_TOKEN));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, SMR_HS_CONFIRM, PROPOSAL_TOKEN));
	make_confirm(&m);
	EXPECT_EQ(0, smr_hs_check(&m, SMR_HS_CONFIRM, ACCEPT_TOKEN));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, SMR_HS_ACCEPT, ACCEPT_TOKEN));
	/* an expected type that does not exist */
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, 0, ACCEPT_TOKEN));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, 7, ACCEPT_TOKEN));
	m.type = 9;
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, 9, ACCEPT_TOKEN));
	/* a DECLINE answers any real expected type, but not a bogus one */
	make_decline(&m);
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, 0, ACCEPT_TOKEN));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, 7, ACCEPT_TOKEN));
	EXPECT_EQ(0, smr_hs_check(&m, SMR_HS_DECLINE, ACCEPT_TOKEN));
}

/* ---- handshake: LINK_REQUEST and LINK_GRANT ---- */

TEST(hs_link_msgs_reserved)
{
	EXPECT_TRUE(reserved_rejected(&refs[4], 12, 4));
	EXPECT_TRUE(reserved_rejected(&refs[5], 12, 4));
}

TEST(hs_link_msgs_fields)
{
	for (size_t r = 4; r <= 5; r++) {
		uint8_t buf[SMR_HS_MAX_LEN];
		struct smr_hs_msg m, out;
		size_t len;

		/* the link id at 8 and the secret at 16, carried through */
		ASSERT_EQ(0, smr_hs_parse(refs[r].bytes, refs[r].len, &out));
		ASSERT_EQ(LINK_MSG_ID, out.link.link_id);
		for (int i = 0; i < SMR_LINK_SECRET_LEN; i++)
			ASSERT_EQ(0xa0 + i, out.link.secret[i]);
		/* a zero link id is none: refused on parse and on build */
		len = ref_copy(&refs[r], buf);
		memset(buf + 8, 0, 4);
		memset(&out, 0x5a, sizeof(out));
		ASSERT_EQ(-SMR_WIRE_EFIELD, smr_hs_parse(buf, len, &out));
		ASSERT_EQ(0x5a, ((uint8_t *)&out)[0]);
		refs[r].make(&m);
		m.link.link_id = 0;
		ASSERT_EQ(0, smr_hs_build(&m, buf, sizeof(buf)));
		/* a zero secret proves nothing: refused both ways */
		len = ref_copy(&refs[r], buf);
		memset(buf + 16, 0, SMR_LINK_SECRET_LEN);
		ASSERT_EQ(-SMR_WIRE_EFIELD, parse_bytes(buf, len));
		refs[r].make(&m);
		memset(m.link.secret, 0, sizeof(m.link.secret));
		ASSERT_EQ(0, smr_hs_build(&m, buf, sizeof(buf)));
		/* any one bit anywhere in the secret makes it one again */
		for (int bit = 0; bit < 8 * SMR_LINK_SECRET_LEN; bit++) {
			len = ref_copy(&refs[r], buf);
			memset(buf + 16, 0, SMR_LINK_SECRET_LEN);
			buf[16 + bit / 8] = 1u << bit % 8;
			ASSERT_EQ(0, smr_hs_parse(buf, len, &out)) TH_LOG("bit %d", bit);
			ASSERT_EQ(1u << bit % 8, out.link.secret[bit / 8]);
		}
	}
}

TEST(hs_link_msgs_check)
{
	struct smr_hs_msg m;

	/* no token to echo: only the type is checked (the secret is the link's) */
	make_link_request(&m);
	EXPECT_EQ(0, smr_hs_check(&m, SMR_HS_LINK_REQUEST, 0));
	EXPECT_EQ(0, smr_hs_check(&m, SMR_HS_LINK_REQUEST, ACCEPT_TOKEN));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, SMR_HS_PROPOSAL, 0));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, SMR_HS_LINK_GRANT, 0));
	make_link_grant(&m);
	EXPECT_EQ(0, smr_hs_check(&m, SMR_HS_LINK_GRANT, 0));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, SMR_HS_LINK_REQUEST, 0));
	EXPECT_EQ(-SMR_WIRE_ETYPE, smr_hs_check(&m, SMR_HS_ACCEPT, 0));
	/* a DECLINE (echo 0: no token known yet) answers a LINK_REQUEST */
	make_decline(&m);
	m.decline.token_echo = 0;
	EXPECT_EQ(0, smr_hs_check(&m, SMR_HS_LINK_GRANT, 0));
}

TEST(hs_check_token_echo)
{
	struct smr_hs_msg m;

	make_accept(&m);
	EXPECT_EQ(-SMR_WIRE_ETOKEN, smr_hs_check(&m, SMR_HS_ACCEPT, PROPOSAL_TOKEN ^ 1));
	EXPECT_EQ(-SMR_WIRE_ETOKEN, smr_hs_check(&m, SMR_HS_ACCEPT, ACCEPT_TOKEN));
	EXPECT_EQ(-SMR_WIRE_ETOKEN, smr_hs_check(&m, SMR_HS_ACCEPT, 0));
	make_confirm(&m);
	EXPECT_EQ(-SMR_WIRE_ETOKEN, smr_hs_check(&m, SMR_HS_CONFIRM, ACCEPT_TOKEN << 1));
	/* the client's own token is not the echo the server wants */
	EXPECT_EQ(-SMR_WIRE_ETOKEN, smr_hs_check(&m, SMR_HS_CONFIRM, PROPOSAL_TOKEN));
}

TEST(hs_check_decline)
{
	static const uint8_t expected[] = {
		SMR_HS_PROPOSAL, SMR_HS_ACCEPT, SMR_HS_CONFIRM,
	};
	struct smr_hs_msg m;

	make_decline(&m);
	for (size_t e = 0; e < sizeof(expected); e++) {
		m.decline.token_echo = 0;	/* sender never learnt our token */
		EXPECT_EQ(0, smr_hs_check(&m, expected[e], ACCEPT_TOKEN));
		m.decline.token_echo = ACCEPT_TOKEN;
		EXPECT_EQ(0, smr_hs_check(&m, expected[e], ACCEPT_TOKEN));
		m.decline.token_echo = ACCEPT_TOKEN + 1;
		EXPECT_EQ(-SMR_WIRE_ETOKEN, smr_hs_check(&m, expected[e], ACCEPT_TOKEN));
	}
}

/* ---- peek on application data ---- */

TEST(peek_http_request)
{
	static const char req[] = "GET / HTTP/1.1\r\n";

	/* the first byte already decides */
	for (size_t n = 1; n < sizeof(req); n++) {
		ASSERT_EQ(-SMR_WIRE_EMAGIC, smr_hs_peek((const uint8_t *)req, n));
	}
}

TEST(peek_magic_prefixes)
{
	static const struct { const char *bytes; size_t len; int want; } cases[] = {
		{ "", 0, -SMR_WIRE_EAGAIN },
		{ "\x53", 1, -SMR_WIRE_EAGAIN },
		{ "\x53\x00", 2, -SMR_WIRE_EMAGIC },
		{ "SM", 2, -SMR_WIRE_EAGAIN },
		{ "SMR", 3, -SMR_WIRE_EAGAIN },
		{ "SMX", 3, -SMR_WIRE_EMAGIC },
		{ "SMRX", 4, -SMR_WIRE_EMAGIC },
		{ "SMRT", 4, -SMR_WIRE_EMAGIC },
		{ "SMRH", 4, -SMR_WIRE_EAGAIN },
		{ "SMRH\x01\x01\x00", 7, -SMR_WIRE_EAGAIN },
		{ "smrh", 4, -SMR_WIRE_EMAGIC },
		{ "\x16\x03\x01", 3, -SMR_WIRE_EMAGIC },	/* TLS ClientHello */
		{ "*1\r\n", 4, -SMR_WIRE_EMAGIC },		/* redis RESP */
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint8_t *buf = malloc(cases[c].len + 1);	/* exact size for ASan */

		ASSERT_NE(NULL, buf);
		memcpy(buf, cases[c].bytes, cases[c].len);
		EXPECT_EQ(cases[c].want, smr_hs_peek(buf, cases[c].len))
			TH_LOG("case %zu", c);
		free(buf);
	}
	EXPECT_EQ(-SMR_WIRE_EAGAIN, smr_hs_peek(NULL, 0));
}

TEST(peek_header_returns_length)
{
	for (size_t i = 0; i < NREFS; i++) {
		for (size_t avail = SMR_HS_HDR_LEN; avail <= refs[i].len; avail++) {
			ASSERT_EQ((int)refs[i].len, smr_hs_peek(refs[i].bytes, avail));
		}
	}
}

/* ---- TCP option ---- */

/* parse from a heap copy of exactly @len bytes, so ASan sees any over-read */
static int opt_parse_exact(const uint8_t *bytes, size_t len, struct smr_opt *out)
{
	uint8_t *copy = malloc(len);
	int ret;

	if (!copy && len)
		abort();
	if (len)
		memcpy(copy, bytes, len);
	ret = smr_opt_parse(copy, len, out);
	free(copy);
	return ret;
}

static const uint8_t golden_offer[SMR_OPT_LEN] = {
	0xfe, 0x0c, 0x53, 0x4d, 0x52, 0x31, 0x11, 0x00,
	0x12, 0x34, 0x56, 0x78,
};

/* proof(0x12345678) = ror32(0x12345678, 11) ^ 0x5a17c3e9 = 0x95158563 */
static const uint8_t golden_answer[SMR_OPT_LEN] = {
	0xfe, 0x0c, 0x53, 0x4d, 0x52, 0x31, 0x12, 0x01,
	0x95, 0x15, 0x85, 0x63,
};

TEST(opt_write_golden_bytes)
{
	struct smr_opt offer = { .version = 1, .role = SMR_OPT_ROLE_OFFER,
				 .flags = 0, .nonce = 0x12345678 };
	struct smr_opt answer = { .version = 1, .role = SMR_OPT_ROLE_ANSWER,
				  .flags = SMR_OPT_F_COOKIE,
				  .nonce = smr_opt_proof(0x12345678) };
	uint8_t buf[SMR_OPT_LEN + 4];

	memset(buf, 0xaa, sizeof(buf));
	smr_opt_write(buf, &offer);
	ASSERT_EQ(0, memcmp(buf, golden_offer, SMR_OPT_LEN));
	ASSERT_EQ(0xaa, buf[SMR_OPT_LEN]);
	smr_opt_write(buf, &answer);
	ASSERT_EQ(0, memcmp(buf, golden_answer, SMR_OPT_LEN));
}

TEST(opt_parse_golden_bytes)
{
	struct smr_opt o;

	ASSERT_EQ(1, opt_parse_exact(golden_offer, sizeof(golden_offer), &o));
	EXPECT_EQ(1, o.version);
	EXPECT_EQ(SMR_OPT_ROLE_OFFER, o.role);
	EXPECT_EQ(0, o.flags);
	EXPECT_EQ(0x12345678, o.nonce);
	ASSERT_EQ(1, opt_parse_exact(golden_answer, sizeof(golden_answer), &o));
	EXPECT_EQ(SMR_OPT_ROLE_ANSWER, o.role);
	EXPECT_EQ(SMR_OPT_F_COOKIE, o.flags);
	EXPECT_EQ(0x95158563, o.nonce);
}

/*
 * The answer flags (protocol.rst: bit 0 COOKIE, 1 NO_DEVICE, 2
 * LINK_REQUEST) travel in byte 7 as they are; unknown bits are kept for
 * the caller to ignore, not rejected (an older host's answer lacks bit 2,
 * a newer one's may have more).
 */
TEST(opt_answer_flags_bits)
{
	static const uint8_t flags[] = {
		SMR_OPT_F_COOKIE, SMR_OPT_F_NO_DEVICE, SMR_OPT_F_LINK_REQUEST,
		0x00, 0xf8, 0xff,
	};
	uint8_t buf[SMR_OPT_LEN];

	EXPECT_EQ(0x01, SMR_OPT_F_COOKIE);
	EXPECT_EQ(0x02, SMR_OPT_F_NO_DEVICE);
	EXPECT_EQ(0x04, SMR_OPT_F_LINK_REQUEST);
	for (size_t i = 0; i < sizeof(flags); i++) {
		struct smr_opt in = { .version = 1, .role = SMR_OPT_ROLE_ANSWER,
				      .flags = flags[i],
				      .nonce = smr_opt_proof(0x12345678) };
		struct smr_opt out;

		smr_opt_write(buf, &in);
		EXPECT_EQ(flags[i], buf[7]);
		ASSERT_EQ(1, opt_parse_exact(buf, sizeof(buf), &out));
		EXPECT_EQ(flags[i], out.flags);
		EXPECT_EQ(SMR_OPT_ROLE_ANSWER, out.role);
	}
}

TEST(opt_in_syn_with_mss_sack_ts_ws)
{
	uint8_t area[40] = {
		2, 4, 0x05, 0xb4,			/* MSS 1460 */
		4, 2,					/* SACK permitted */
		8, 10, 0, 0, 0, 1, 0, 0, 0, 0,		/* timestamps */
		1,					/* NOP */
		3, 3, 7,				/* window scale */
	};
	struct smr_opt o;

	memcpy(area + 20, golden_offer, SMR_OPT_LEN);
	ASSERT_EQ(1, opt_parse_exact(area, 32, &o));
	EXPECT_EQ(0x12345678, o.nonce);
	/* the same with EOL padding to the full 40 bytes */
	ASSERT_EQ(1, opt_parse_exact(area, sizeof(area), &o));
	/* and without the SMR option: plain TCP */
	ASSERT_EQ(0, opt_parse_exact(area, 20, &o));
}

TEST(opt_tfo_254_skipped)
{
	uint8_t area[40] = {
		254, 4, 0xf9, 0x89,			/* TFO cookie request */
		254, 12, 0xf9, 0x89, 1, 2, 3, 4, 5, 6, 7, 8, /* TFO cookie */
		254, 8, 0x53, 0x4d, 0x52, 0x32, 0x11, 0,	/* "SMR2": another ExID */
	};
	struct smr_opt o;

	ASSERT_EQ(0, opt_parse_exact(area, 24, &o));
	memcpy(area + 24, golden_answer, SMR_OPT_LEN);
	ASSERT_EQ(1, opt_parse_exact(area, 36, &o));
	EXPECT_EQ(SMR_OPT_ROLE_ANSWER, o.role);
}

TEST(opt_short_254_not_ours)
{
	/* 254 shorter than a 32-bit ExID, even if its bytes start like ours */
	static const uint8_t area[] = { 254, 4, 0x53, 0x4d, 254, 5, 0x53, 0x4d, 0x52, 1, 1, 0 };
	struct smr_opt o;

	EXPECT_EQ(0, opt_parse_exact(area, sizeof(area), &o));
}

TEST(opt_length_overflows_area)
{
	uint8_t area[16] = { 2, 4, 0x05, 0xb4, 8, 10, 0, 0, 0, 1, 0, 0 };
	struct smr_opt o;

	/* timestamps claim 10 bytes but the area ends after 8 of them */
	EXPECT_EQ(-SMR_WIRE_EOPTION, opt_parse_exact(area, 12, &o));
	/* an SMR option cut short by the area */
	EXPECT_EQ(-SMR_WIRE_EOPTION, opt_parse_exact(golden_offer, 11, &o));
	EXPECT_EQ(-SMR_WIRE_EOPTION, opt_parse_exact(golden_offer, 2, &o));
	/* a kind byte with no room for its length */
	area[4] = 3;
	EXPECT_EQ(-SMR_WIRE_EOPTION, opt_parse_exact(area, 5, &o));
	EXPECT_EQ(-SMR_WIRE_EOPTION, opt_parse_exact(golden_offer, 1, &o));
}

TEST(opt_nop_padding)
{
	uint8_t area[40];
	struct smr_opt o;

	memset(area, 1, sizeof(area));
	EXPECT_EQ(0, opt_parse_exact(area, sizeof(area), &o));
	memcpy(area + 27, golden_offer, SMR_OPT_LEN);	/* unaligned after NOPs */
	ASSERT_EQ(1, opt_parse_exact(area, 39, &o));
	EXPECT_EQ(0x12345678, o.nonce);
}

TEST(opt_eol_before_smr)
{
	uint8_t area[20] = { 2, 4, 0x05, 0xb4, 0, 0, 0, 0 };
	struct smr_opt o;

	memcpy(area + 8, golden_offer, SMR_OPT_LEN);
	EXPECT_EQ(0, opt_parse_exact(area, sizeof(area), &o));
	EXPECT_EQ(1, opt_parse_exact(area + 8, 12, &o));
}

TEST(opt_zero_and_one_length)
{
	static const uint8_t zero[] = { 2, 0, 1, 1, 1, 1 };
	static const uint8_t one[] = { 3, 1, 1, 1 };
	static const uint8_t smr0[] = { 254, 0, 0x53, 0x4d, 0x52, 0x31 };
	struct smr_opt o;

	EXPECT_EQ(-SMR_WIRE_EOPTION, opt_parse_exact(zero, sizeof(zero), &o));
	EXPECT_EQ(-SMR_WIRE_EOPTION, opt_parse_exact(one, sizeof(one), &o));
	EXPECT_EQ(-SMR_WIRE_EOPTION, opt_parse_exact(smr0, sizeof(smr0), &o));
}

TEST(opt_smr_wrong_length)
{
	static const uint8_t bad_len[] = { 6, 7, 10, 11, 13, 16 };

	for (size_t b = 0; b < sizeof(bad_len); b++) {
		uint8_t area[40] = { 0 };
		struct smr_opt o;

		memcpy(area, golden_offer, SMR_OPT_LEN);
		area[1] = bad_len[b];
		EXPECT_EQ(-SMR_WIRE_EFIELD, opt_parse_exact(area, sizeof(area), &o))
			TH_LOG("length %u", bad_len[b]);
	}
}

TEST(opt_smr_bad_version_or_role)
{
	static const uint8_t bad[] = {
		0x01, 0x21, 0xf1,	/* version 0, 2, 15 */
		0x10, 0x13, 0x1f,	/* role 0, 3, 15 */
	};

	for (size_t b = 0; b < sizeof(bad); b++) {
		uint8_t area[SMR_OPT_LEN];
		struct smr_opt o = { .nonce = 7 };

		memcpy(area, golden_offer, SMR_OPT_LEN);
		area[6] = bad[b];
		EXPECT_EQ(-SMR_WIRE_EFIELD, opt_parse_exact(area, sizeof(area), &o))
			TH_LOG("byte 6 = 0x%02x", bad[b]);
		EXPECT_EQ(7, o.nonce);	/* not written */
	}
}

TEST(opt_flags_unknown_bits_kept)
{
	uint8_t area[SMR_OPT_LEN];
	struct smr_opt o;

	memcpy(area, golden_answer, SMR_OPT_LEN);
	area[7] = 0xff;
	ASSERT_EQ(1, opt_parse_exact(area, sizeof(area), &o));
	EXPECT_EQ(0xff, o.flags);
}

TEST(opt_first_smr_option_decides)
{
	/* after the SMR option the area is not examined: junk is fine */
	uint8_t area[20];
	struct smr_opt o;

	memcpy(area, golden_offer, SMR_OPT_LEN);
	memcpy(area + 12, "\x08\x30\x00\x00\x00\x00\x00\x00", 8);
	EXPECT_EQ(1, opt_parse_exact(area, sizeof(area), &o));
	/* but junk before it is an error */
	memcpy(area, "\x08\x30", 2);
	EXPECT_EQ(-SMR_WIRE_EOPTION, opt_parse_exact(area, sizeof(area), &o));
}

TEST(opt_empty_area)
{
	struct smr_opt o;

	EXPECT_EQ(0, smr_opt_parse(NULL, 0, &o));
	EXPECT_EQ(0, opt_parse_exact(golden_offer, 0, &o));
}

TEST(opt_write_parse_random)
{
	for (int n = 0; n < 10000; n++) {
		struct smr_opt in = {
			.version = 1,
			.role = 1 + (rng32() & 1),
			.flags = rng32(),
			.nonce = rng32(),
		}, out;
		uint8_t area[40];
		size_t at = rng32() % 28;

		memset(area, 1, sizeof(area));	/* NOPs around it */
		smr_opt_write(area + at, &in);
		ASSERT_EQ(1, opt_parse_exact(area, sizeof(area), &out));
		ASSERT_EQ(in.version, out.version);
		ASSERT_EQ(in.role, out.role);
		ASSERT_EQ(in.flags, out.flags);
		ASSERT_EQ(in.nonce, out.nonce);
	}
}

/* ---- nonce and proof ---- */

static uint32_t proof_reference(uint32_t n)
{
	return ((n >> 11) | (n << 21)) ^ 0x5a17c3e9u;
}

TEST(opt_proof_known_values)
{
	EXPECT_EQ(0x95158563u, smr_opt_proof(0x12345678));
	EXPECT_EQ(0x5a37c3e9u, smr_opt_proof(1));
	EXPECT_EQ(0x5a07c3e9u, smr_opt_proof(0x80000000u));
	EXPECT_EQ(0xa5e83c16u, smr_opt_proof(0xffffffffu));
	EXPECT_EQ(0x5a17c3e9u, smr_opt_proof(0));
}

TEST(opt_proof_differs_from_nonce)
{
	for (int n = 0; n < 1000000; n++) {
		uint32_t nonce = rng32();

		ASSERT_EQ(proof_reference(nonce), smr_opt_proof(nonce));
		ASSERT_NE(nonce, smr_opt_proof(nonce)) TH_LOG("nonce 0x%08x", nonce);
		/* why no nonce can be its own proof: odd parity of the xor */
		ASSERT_EQ(1, __builtin_popcount(nonce ^ smr_opt_proof(nonce)) & 1);
		ASSERT_EQ(nonce != 0, smr_opt_nonce_ok(nonce));
	}
}

TEST(opt_nonce_ok_zero)
{
	EXPECT_FALSE(smr_opt_nonce_ok(0));
	EXPECT_TRUE(smr_opt_nonce_ok(1));
	EXPECT_TRUE(smr_opt_nonce_ok(0xffffffffu));
}

/* ---- checks every fixed-size format gets: CDC, cm private data, link message ---- */

/* room for a parsed message of any of them */
union any_msg {
	struct smr_cdc cdc;
	struct smr_cm_priv cm;
	struct smr_lmsg lmsg;
};

#define FMT_MAX_LEN	SMR_CDC_LEN	/* the longest of them on the wire */
_Static_assert(SMR_CM_PRIV_LEN <= FMT_MAX_LEN && SMR_LMSG_LEN <= FMT_MAX_LEN,
	       "FMT_MAX_LEN holds every fixed-size format");

/*
 * One fixed-size format: a 4-byte magic, the version at byte 4, then its
 * own fields. Its functions take the format's own struct as void *.
 */
struct wire_fmt {
	size_t len;			/* bytes on the wire */
	size_t size;			/* of the parsed struct */
	const uint8_t *golden;		/* the reference message's bytes */
	void (*make)(void *m);		/* the reference message */
	void (*build)(const void *m, uint8_t *buf);
	int (*parse)(const uint8_t *buf, size_t len, void *out);
	/* what a bit flipped at @off (past magic and version) must parse as */
	int (*flip_err)(struct __test_metadata *_metadata, size_t off,
			const uint8_t *buf);
	/* breaks fields past the version, each refused on its own */
	void (*spoil)(uint8_t *buf);
};

/*
 * Parse a heap copy of exactly @len bytes, so ASan sees any over-read: the
 * error, or -1000 if a refused message was written; @out (if any) gets
 * the message only if it parsed.
 */
static int fmt_parse_exact(const struct wire_fmt *f, const uint8_t *bytes,
			   size_t len, void *out)
{
	uint8_t *copy = heap_copy(bytes, len);
	union any_msg m;
	int ret;

	memset(&m, 0x5a, sizeof(m));
	ret = f->parse(copy, len, &m);
	free(copy);
	if (ret && ((uint8_t *)&m)[0] != 0x5a)
		return -1000;	/* written on failure */
	if (!ret && out)
		memcpy(out, &m, f->size);
	return ret;
}

/*
 * The struct wire_fmt PFX_fmt of make_PFX, smr_PFX_build, smr_PFX_parse,
 * PFX_flip_err and PFX_spoil; PFX_parse_exact(), fmt_parse_exact() of it, and PFX_err(),
 * the error of parsing one message's bytes.
 */
#define WIRE_FMT(pfx, type, golden_bytes)				\
static void pfx##_build_any(const void *m, uint8_t *buf)		\
{									\
	smr_##pfx##_build(m, buf);					\
}									\
									\
static int pfx##_parse_any(const uint8_t *buf, size_t len, void *out)	\
{									\
	return smr_##pfx##_parse(buf, len, out);			\
}									\
									\
static const struct wire_fmt pfx##_fmt = {				\
	.len = sizeof(golden_bytes), .size = sizeof(type),		\
	.golden = golden_bytes, .make = make_##pfx,			\
	.build = pfx##_build_any, .parse = pfx##_parse_any,		\
	.flip_err = pfx##_flip_err, .spoil = pfx##_spoil,		\
};									\
									\
static int pfx##_parse_exact(const uint8_t *bytes, size_t len, void *out) \
{									\
	return fmt_parse_exact(&pfx##_fmt, bytes, len, out);		\
}									\
									\
static int pfx##_err(const uint8_t *bytes)				\
{									\
	return fmt_parse_exact(&pfx##_fmt, bytes, pfx##_fmt.len, NULL);	\
}

/* a test that is one of these checks, on one format */
#define FMT_TEST(name, check, fmt)					\
	TEST(name) { check(_metadata, &(fmt)); }

/* the reference message builds to the golden bytes and nothing past them */
static void fmt_build_matches_golden(struct __test_metadata *_metadata,
				     const struct wire_fmt *f)
{
	uint8_t buf[FMT_MAX_LEN + 8];
	union any_msg m;

	memset(buf, 0xaa, f->len + 8);
	f->make(&m);
	f->build(&m, buf);
	ASSERT_EQ(0, memcmp(buf, f->golden, f->len));
	/* nothing written past the message */
	for (size_t j = f->len; j < f->len + 8; j++) {
		ASSERT_EQ(0xaa, buf[j]);
	}
}

/* the golden bytes parse to the reference message (@want), into @got */
static void fmt_parse_golden(struct __test_metadata *_metadata,
			     const struct wire_fmt *f, union any_msg *want,
			     union any_msg *got)
{
	f->make(want);
	memset(got, 0x5a, sizeof(*got));
	ASSERT_EQ(0, fmt_parse_exact(f, f->golden, f->len, got));
	/* parse zeroes padding: whole structs compare too */
	ASSERT_EQ(0, memcmp(want, got, f->size));
}

/* every length short of a message is refused first, @out untouched */
static void fmt_truncated_every_length(struct __test_metadata *_metadata,
				       const struct wire_fmt *f)
{
	for (size_t cut = 0; cut < f->len; cut++) {
		uint8_t bad[FMT_MAX_LEN];
		union any_msg out;

		memset(&out, 0x5a, sizeof(out));
		ASSERT_EQ(-SMR_WIRE_ELENGTH, fmt_parse_exact(f, f->golden, cut, &out))
			TH_LOG("cut at %zu", cut);
		ASSERT_EQ(0x5a, ((uint8_t *)&out)[0]);	/* not written */
		/* length is checked first: before magic, version and fields */
		memset(bad, 0, sizeof(bad));
		ASSERT_EQ(-SMR_WIRE_ELENGTH, fmt_parse_exact(f, bad, cut, &out));
	}
}

static void fmt_magic_each_bit(struct __test_metadata *_metadata,
			       const struct wire_fmt *f)
{
	for (int byte = 0; byte < 4; byte++) {
		for (int bit = 0; bit < 8; bit++) {
			uint8_t buf[FMT_MAX_LEN];

			memcpy(buf, f->golden, f->len);
			buf[byte] ^= 1u << bit;
			ASSERT_EQ(-SMR_WIRE_EMAGIC, fmt_parse_exact(f, buf, f->len, NULL))
				TH_LOG("byte %d bit %d", byte, bit);
		}
	}
}

/*
 * Every version but the reference message's is refused, and before the
 * fields: so it still is with f->spoil's broken fields behind it.
 */
static void fmt_version_first(struct __test_metadata *_metadata,
			      const struct wire_fmt *f)
{
	for (unsigned int v = 0; v < 256; v++) {
		uint8_t buf[FMT_MAX_LEN];

		if (v == f->golden[4])
			continue;
		memcpy(buf, f->golden, f->len);
		buf[4] = v;
		ASSERT_EQ(-SMR_WIRE_EVERSION, fmt_parse_exact(f, buf, f->len, NULL))
			TH_LOG("version %u", v);
		f->spoil(buf);
		ASSERT_EQ(-SMR_WIRE_EVERSION, fmt_parse_exact(f, buf, f->len, NULL))
			TH_LOG("version %u, fields spoilt", v);
	}
}

/*
 * Every single bit flip is refused as f->flip_err says, or is a free field
 * (flip_err 0): it parses and is built back as is.
 */
static void fmt_every_single_bit_flip(struct __test_metadata *_metadata,
				      const struct wire_fmt *f)
{
	for (size_t off = 0; off < f->len; off++) {
		for (int bit = 0; bit < 8; bit++) {
			uint8_t buf[FMT_MAX_LEN], again[FMT_MAX_LEN];
			union any_msg out;
			int err, want;

			memcpy(buf, f->golden, f->len);
			buf[off] ^= 1u << bit;
			err = fmt_parse_exact(f, buf, f->len, &out);
			if (off < 4)
				want = -SMR_WIRE_EMAGIC;
			else if (off == 4)
				want = -SMR_WIRE_EVERSION;
			else
				want = f->flip_err(_metadata, off, buf);
			ASSERT_EQ(want, err) TH_LOG("offset %zu bit %d", off, bit);
			if (want)
				continue;
			f->build(&out, again);
			ASSERT_EQ(0, memcmp(again, buf, f->len))
				TH_LOG("offset %zu bit %d", off, bit);
		}
	}
}

/* ---- CDC messages ---- */

static const uint8_t golden_cdc[SMR_CDC_LEN] = {
	0x53, 0x4d, 0x52, 0x43, 0x01, 0x05, 0xbe, 0xef,	/* SMRC v1 flags seq */
	0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,	/* token */
	0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x10, 0x00,	/* prod 3:0x1000 */
	0xff, 0xff, 0xff, 0xfe, 0x00, 0x00, 0xff, 0xff,	/* cons 0xfffffffe:0xffff */
	0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00, 0x42,	/* urg 0x11223344:0x42 */
	0x00, 0x00, 0x01, 0x23,				/* inline_len, credits */
};

static void make_cdc(void *m)
{
	struct smr_cdc *c = m;

	memset(c, 0, sizeof(*c));
	c->flags = SMR_CDC_F_WRITE_BLOCKED | SMR_CDC_F_DONE_WRITING;
	c->seq = 0xbeef;
	c->token = CDC_TOKEN;
	c->prod.wrap = 3;
	c->prod.count = 0x1000;
	c->cons.wrap = 0xfffffffeu;
	c->cons.count = 0xffff;
	c->urg.wrap = 0x11223344u;
	c->urg.count = 0x42;
	c->credits = CDC_CREDITS;
}

/* the token zero */
static void cdc_spoil(uint8_t *buf)
{
	memset(buf + 8, 0, 8);
}

static int cdc_flip_err(struct __test_metadata *_metadata, size_t off,
			const uint8_t *buf)
{
	/* inline_len: 256 and up is too long, less is short */
	if (off == 40)
		return -SMR_WIRE_EFIELD;
	/* every other byte is a free field */
	return off == 41 ? -SMR_WIRE_ELENGTH : 0;
}

WIRE_FMT(cdc, struct smr_cdc, golden_cdc);

static int cursor_eq(const struct smr_cdc_cursor *a,
		     const struct smr_cdc_cursor *b)
{
	return a->wrap == b->wrap && a->count == b->count;
}

/* field by field: independent of padding */
static int cdc_eq(const struct smr_cdc *a, const struct smr_cdc *b)
{
	return a->flags == b->flags && a->seq == b->seq &&
	       a->token == b->token && cursor_eq(&a->prod, &b->prod) &&
	       cursor_eq(&a->cons, &b->cons) && cursor_eq(&a->urg, &b->urg) &&
	       a->inline_len == b->inline_len && a->credits == b->credits;
}


FMT_TEST(cdc_build_matches_golden_bytes, fmt_build_matches_golden, cdc_fmt)

TEST(cdc_parse_golden_bytes)
{
	union any_msg want, got;

	fmt_parse_golden(_metadata, &cdc_fmt, &want, &got);
	ASSERT_TRUE(cdc_eq(&want.cdc, &got.cdc));
}

TEST(cdc_truncated_every_length)
{
	fmt_truncated_every_length(_metadata, &cdc_fmt);
	ASSERT_EQ(-SMR_WIRE_ELENGTH, smr_cdc_parse(NULL, 0, NULL));
}

TEST(cdc_longer_buffer_ignores_tail)
{
	uint8_t buf[SMR_CDC_LEN + 64];
	struct smr_cdc want, got;

	make_cdc(&want);
	for (size_t extra = 1; extra <= 64; extra++) {
		memcpy(buf, golden_cdc, SMR_CDC_LEN);
		memset(buf + SMR_CDC_LEN, (int)extra, extra);
		ASSERT_EQ(0, cdc_parse_exact(buf, SMR_CDC_LEN + extra, &got));
		ASSERT_TRUE(cdc_eq(&want, &got));
	}
}

FMT_TEST(cdc_magic_each_bit, fmt_magic_each_bit, cdc_fmt)

TEST(cdc_other_magics)
{
	uint8_t buf[SMR_CDC_LEN];
	struct smr_cdc out;

	memcpy(buf, golden_cdc, SMR_CDC_LEN);
	memcpy(buf, "SMRH", 4);		/* a handshake message is not a CDC */
	EXPECT_EQ(-SMR_WIRE_EMAGIC, cdc_err(buf));
	memcpy(buf, "CRMS", 4);		/* little-endian magic */
	EXPECT_EQ(-SMR_WIRE_EMAGIC, cdc_err(buf));
	memset(buf, 0, 4);
	EXPECT_EQ(-SMR_WIRE_EMAGIC, cdc_err(buf));
	/* magic before version and token */
	buf[4] = 2;
	memset(buf + 8, 0, 8);
	EXPECT_EQ(-SMR_WIRE_EMAGIC, cdc_err(buf));
	/* a whole handshake message of the same length */
	EXPECT_EQ(-SMR_WIRE_EMAGIC, cdc_parse_exact(golden_confirm, sizeof(golden_confirm), &out));
}

TEST(cdc_version_not_1)
{
	static const uint8_t bad[] = { 0, 2, 0x11, 0x80, 255 };

	for (size_t v = 0; v < sizeof(bad); v++) {
		uint8_t buf[SMR_CDC_LEN];

		memcpy(buf, golden_cdc, SMR_CDC_LEN);
		buf[4] = bad[v];
		ASSERT_EQ(-SMR_WIRE_EVERSION, cdc_err(buf));
		/* version before token */
		cdc_spoil(buf);
		ASSERT_EQ(-SMR_WIRE_EVERSION, cdc_err(buf));
	}
}

TEST(cdc_token_zero)
{
	uint8_t buf[SMR_CDC_LEN];
	struct smr_cdc out;

	memcpy(buf, golden_cdc, SMR_CDC_LEN);
	memset(buf + 8, 0, 8);
	memset(&out, 0x5a, sizeof(out));
	ASSERT_EQ(-SMR_WIRE_ETOKEN, cdc_parse_exact(buf, SMR_CDC_LEN, &out));
	ASSERT_EQ(0x5a, ((uint8_t *)&out)[0]);
	/* one bit set anywhere makes it a token again */
	for (int bit = 0; bit < 64; bit++) {
		be_one_bit(buf + 8, 8, bit);
		ASSERT_EQ(0, cdc_parse_exact(buf, SMR_CDC_LEN, &out));
		ASSERT_EQ(1ull << bit, out.token);
	}
}

TEST(cdc_flags_unknown_bits_kept)
{
	uint8_t buf[SMR_CDC_LEN];
	struct smr_cdc out;

	memcpy(buf, golden_cdc, SMR_CDC_LEN);
	for (unsigned int flags = 0; flags < 256; flags++) {
		buf[5] = flags;
		ASSERT_EQ(0, cdc_parse_exact(buf, SMR_CDC_LEN, &out));
		ASSERT_EQ(flags, out.flags);
	}
}

TEST(cdc_credits_every_value)
{
	/* at offset 42, big-endian; any value parses and is built back */
	uint8_t buf[SMR_CDC_LEN], again[SMR_CDC_LEN];
	struct smr_cdc want, out;

	ASSERT_EQ(0, cdc_parse_exact(golden_cdc, SMR_CDC_LEN, &out));
	ASSERT_EQ(CDC_CREDITS, out.credits);
	make_cdc(&want);
	for (unsigned int credits = 0; credits <= 0xffff; credits++) {
		memcpy(buf, golden_cdc, SMR_CDC_LEN);
		buf[42] = credits >> 8;
		buf[43] = credits & 0xff;
		ASSERT_EQ(0, cdc_parse_exact(buf, SMR_CDC_LEN, &out))
			TH_LOG("credits %u", credits);
		ASSERT_EQ(credits, out.credits);
		/* the other fields are not disturbed */
		want.credits = credits;
		ASSERT_TRUE(cdc_eq(&want, &out));
		memset(again, 0xa5, sizeof(again));
		smr_cdc_build(&want, again);
		ASSERT_EQ(0, memcmp(again, buf, SMR_CDC_LEN));
	}
}

TEST(cdc_credits_with_inline_data)
{
	/* credits sit in the header: the inline data still starts at 44 */
	uint8_t buf[SMR_CDC_MAX_LEN];
	struct smr_cdc c, out;

	make_cdc(&c);
	c.inline_len = SMR_CDC_INLINE_MAX;
	c.credits = 0xffff;
	memset(buf, 0x3c, sizeof(buf));
	smr_cdc_build(&c, buf);
	ASSERT_EQ(0x00, buf[40]);
	ASSERT_EQ(SMR_CDC_INLINE_MAX, buf[41]);
	ASSERT_EQ(0xff, buf[42]);
	ASSERT_EQ(0xff, buf[43]);
	ASSERT_EQ(0x3c, buf[SMR_CDC_LEN]);
	ASSERT_EQ(0, cdc_parse_exact(buf, sizeof(buf), &out));
	ASSERT_TRUE(cdc_eq(&c, &out));
	ASSERT_EQ(-SMR_WIRE_ELENGTH, cdc_parse_exact(buf, sizeof(buf) - 1, &out));
}

TEST(cdc_cursor_values_not_checked)
{
	/* offsets at or beyond any ring size parse: the connection decides */
	uint8_t buf[SMR_CDC_LEN];
	struct smr_cdc out;

	memcpy(buf, golden_cdc, SMR_CDC_LEN);
	memset(buf + 16, 0xff, 24);
	ASSERT_EQ(0, cdc_parse_exact(buf, SMR_CDC_LEN, &out));
	ASSERT_EQ(0xffffffffu, out.prod.wrap);
	ASSERT_EQ(0xffffffffu, out.prod.count);
	ASSERT_EQ(0xffffffffu, out.cons.count);
	ASSERT_EQ(0xffffffffu, out.urg.count);
}

FMT_TEST(cdc_every_single_bit_flip_classified, fmt_every_single_bit_flip, cdc_fmt)

TEST(cdc_inline_len_bounds)
{
	uint8_t buf[SMR_CDC_MAX_LEN + 8];
	struct smr_cdc out;
	unsigned int len;

	memset(buf, 0x77, sizeof(buf));
	memcpy(buf, golden_cdc, SMR_CDC_LEN);
	for (len = 0; len <= SMR_CDC_INLINE_MAX + 1; len++) {
		buf[40] = len >> 8;
		buf[41] = len;
		if (len > SMR_CDC_INLINE_MAX) {
			ASSERT_EQ(-SMR_WIRE_EFIELD,
				  cdc_parse_exact(buf, sizeof(buf), &out));
			continue;
		}
		/* the data must all be there; more after it is ignored */
		if (len)
			ASSERT_EQ(-SMR_WIRE_ELENGTH,
				  cdc_parse_exact(buf, SMR_CDC_LEN + len - 1,
						  &out));
		ASSERT_EQ(0, cdc_parse_exact(buf, SMR_CDC_LEN + len, &out));
		ASSERT_EQ(len, out.inline_len);
		ASSERT_EQ(0, cdc_parse_exact(buf, sizeof(buf), &out));
		ASSERT_EQ(len, out.inline_len);
	}
	buf[40] = 0xff;
	buf[41] = 0xff;
	ASSERT_EQ(-SMR_WIRE_EFIELD, cdc_parse_exact(buf, sizeof(buf), &out));
}

TEST(cdc_roundtrip_random)
{
	for (int n = 0; n < 20000; n++) {
		struct smr_cdc c, out;
		uint8_t buf[SMR_CDC_MAX_LEN], again[SMR_CDC_LEN];

		memset(&c, 0, sizeof(c));
		memset(buf, 0x3c, sizeof(buf));
		c.flags = rng32();
		c.seq = rng32();
		c.token = (uint64_t)rng32() << 32 | rng32();
		c.token |= 1ull << rng32() % 64;
		c.prod.wrap = rng32();
		c.prod.count = rng32();
		c.cons.wrap = rng32();
		c.cons.count = rng32();
		c.urg.wrap = rng32();
		c.urg.count = rng32();
		c.inline_len = rng32() % (SMR_CDC_INLINE_MAX + 1);
		c.credits = rng32();
		smr_cdc_build(&c, buf);
		ASSERT_EQ(0, cdc_parse_exact(buf, SMR_CDC_LEN + c.inline_len,
					     &out));
		ASSERT_TRUE(cdc_eq(&c, &out)) TH_LOG("iteration %d", n);
		smr_cdc_build(&out, again);
		ASSERT_EQ(0, memcmp(buf, again, SMR_CDC_LEN));
		ASSERT_EQ(c.inline_len, buf[40] << 8 | buf[41]);
		ASSERT_EQ(c.credits, buf[42] << 8 | buf[43]);
		/* the header only: the data after it is the caller's */
		ASSERT_EQ(0x3c, buf[SMR_CDC_LEN]);
	}
}

/* ---- ring cursors ---- */

#define KIB	1024u

/* smr_cursor_to_count() with *out preset, checking it stays put on error */
static int to_count(uint32_t wrap, uint32_t count, uint32_t size,
		    uint64_t prev, uint64_t max, uint64_t *out)
{
	struct smr_cdc_cursor c = { .wrap = wrap, .count = count };
	u64 v = 0x5a5a5a5a5a5a5a5aull;
	int err = smr_cursor_to_count(&c, size, prev, max, &v);

	if (err && v != 0x5a5a5a5a5a5a5a5aull)
		return -1000;	/* written on failure */
	if (!err)
		*out = v;
	return err;
}

TEST(cursor_from_count_values)
{
	static const struct {
		uint64_t count;
		uint32_t size, wrap, off;
	} cases[] = {
		{ 0, 16 * KIB, 0, 0 },
		{ 16 * KIB - 1, 16 * KIB, 0, 16 * KIB - 1 },
		{ 16 * KIB, 16 * KIB, 1, 0 },
		{ 5 * 64 * KIB + 7, 64 * KIB, 5, 7 },
		/* the wrap count keeps its low 32 bits */
		{ (1ull << 32) * 16 * KIB + 5, 16 * KIB, 0, 5 },
		{ (0xffffffffull) * 16 * KIB + 9, 16 * KIB, 0xffffffffu, 9 },
		{ UINT64_MAX, 1, 0xffffffffu, 0 },
		{ 0x123456789ull, 1, 0x23456789u, 0 },
		{ UINT64_MAX, 0x80000000u, 0xffffffffu, 0x7fffffffu },
		{ 0x80000000ull * 7 + 1, 0x80000000u, 7, 1 },
		{ UINT64_MAX, 2, 0xffffffffu, 1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct smr_cdc_cursor c = { 0x5a5a5a5a, 0x5a5a5a5a };

		smr_cursor_from_count(cases[i].count, cases[i].size, &c);
		EXPECT_EQ(cases[i].wrap, c.wrap) TH_LOG("case %zu", i);
		EXPECT_EQ(cases[i].off, c.count) TH_LOG("case %zu", i);
	}
}

TEST(cursor_from_count_bad_size)
{
	/* outside the contract: a fixed cursor, no undefined shift (UBSan) */
	static const uint32_t bad[] = { 0, 3, 0xffffffffu, 0x80000001u };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct smr_cdc_cursor c = { 0x5a5a5a5a, 0x5a5a5a5a };

		smr_cursor_from_count(UINT64_MAX, bad[i], &c);
		EXPECT_EQ(0, c.wrap);
		EXPECT_EQ(0, c.count);
	}
}

TEST(cursor_to_count_basic)
{
	const uint32_t size = 64 * KIB;
	uint64_t out = 0;

	ASSERT_EQ(0, to_count(0, 0, size, 0, 0, &out));
	ASSERT_EQ(0, out);
	ASSERT_EQ(0, to_count(0, 100, size, 0, size, &out));
	ASSERT_EQ(100, out);
	ASSERT_EQ(0, to_count(1, 100, size, 50, 3ull * size, &out));
	ASSERT_EQ(size + 100, out);
	/* the cursor equal to @prev: nothing new, still fine */
	ASSERT_EQ(0, to_count(2, 7, size, 2ull * size + 7, 2ull * size + 7, &out));
	ASSERT_EQ(2ull * size + 7, out);
	/* a whole ring ahead of @prev */
	ASSERT_EQ(0, to_count(3, 7, size, 2ull * size + 7, 3ull * size + 7, &out));
	ASSERT_EQ(3ull * size + 7, out);
}

TEST(cursor_to_count_wrap_counter_wraps)
{
	const uint32_t size = 64 * KIB;
	/* prev in the last wrap a 32-bit counter can name */
	const uint64_t prev = 0xffffffffull * size + 10;
	/* prev in wrap 0x5_0000_0003: far past 2^32 rings */
	const uint64_t p = ((5ull << 32) + 3) * size + 100;
	uint64_t out = 0;

	ASSERT_EQ(0, to_count(0xffffffffu, 20, size, prev, prev + size, &out));
	ASSERT_EQ(prev + 10, out);
	/* the peer's counter went 0xffffffff -> 0: the next ring, 2^32 wraps */
	ASSERT_EQ(0, to_count(0, 5, size, prev, prev + size, &out));
	ASSERT_EQ((1ull << 32) * size + 5, out);
	ASSERT_EQ(0, to_count(1, 0, size, prev, prev + 2ull * size, &out));
	ASSERT_EQ(((1ull << 32) + 1) * size, out);
	ASSERT_EQ(0, to_count(3, 200, size, p, p + size, &out));
	ASSERT_EQ(p + 100, out);
	ASSERT_EQ(0, to_count(4, 99, size, p, p + size, &out));
	ASSERT_EQ(p + size - 1, out);
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(4, 100, size, p, p + size - 1, &out));
	/* size 1: wrap is the low 32 bits of the byte count itself */
	ASSERT_EQ(0, to_count(2, 0, 1, 0xfffffffeull, 0x100000010ull, &out));
	ASSERT_EQ(0x100000002ull, out);
	/* the largest ring */
	ASSERT_EQ(0, to_count(0, 1, 0x80000000u, 0xffffffffull * 0x80000000u,
			      (1ull << 32) * 0x80000000u + 1, &out));
	ASSERT_EQ((1ull << 32) * 0x80000000u + 1, out);
}

TEST(cursor_to_count_top_of_u64)
{
	uint64_t out = 0;

	/* the last representable byte count */
	ASSERT_EQ(0, to_count(0xffffffffu, 0x7fffffffu, 0x80000000u,
			      UINT64_MAX - 5, UINT64_MAX, &out));
	ASSERT_EQ(UINT64_MAX, out);
	ASSERT_EQ(0, to_count(0xffffffffu, 0, 1, UINT64_MAX, UINT64_MAX, &out));
	ASSERT_EQ(UINT64_MAX, out);
	/* one ring later would be 2^64 or more: rejected, not wrapped to 0 */
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(0, 0, 0x80000000u,
					     UINT64_MAX - 0x7fffffffull, UINT64_MAX, &out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(0, 0, 1, UINT64_MAX, UINT64_MAX, &out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(0, 0, 16 * KIB,
					     UINT64_MAX - 3, UINT64_MAX, &out));
}

TEST(cursor_to_count_offset_not_below_size)
{
	static const uint32_t sizes[] = { 1, 2, 16 * KIB, 256 * 1024 * KIB, 0x80000000u };
	uint64_t out = 0;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const uint32_t size = sizes[i];

		ASSERT_EQ(0, to_count(1, size - 1, size, 0, UINT64_MAX, &out));
		ASSERT_EQ(2ull * size - 1, out);
		ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(1, size, size, 0, UINT64_MAX, &out))
			TH_LOG("size %u", size);
		ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(0, size, size, 0, UINT64_MAX, &out));
		ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(1, 0xffffffffu, size, 0, UINT64_MAX, &out));
		if (size < 0x80000000u) {
			ASSERT_EQ(-SMR_WIRE_EFIELD,
				  to_count(0, 2 * size, size, 0, UINT64_MAX, &out));
		}
	}
}

TEST(cursor_to_count_behind_prev)
{
	const uint32_t size = 16 * KIB;
	const uint64_t prev = 10ull * size + 500;
	const uint64_t max = prev + size;
	/* just past the 32-bit wrap counter's wrap-around */
	const uint64_t p = (1ull << 32) * size + 100;
	uint64_t out = 0;

	/* same wrap, smaller offset */
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(10, 499, size, prev, max, &out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(10, 0, size, prev, max, &out));
	/* an earlier wrap reads as 2^32 - 1 rings ahead: beyond @max */
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(9, 600, size, prev, max, &out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(0, 0, size, prev, max, &out));
	/* behind across the 32-bit wrap counter's wrap-around */
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(0xffffffffu, 200, size, p, p + size, &out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(0, 99, size, p, p + size, &out));
	ASSERT_EQ(0, to_count(0, 100, size, p, p + size, &out));
	ASSERT_EQ(p, out);
}

TEST(cursor_to_count_beyond_max)
{
	const uint32_t size = 16 * KIB;
	const uint64_t prev = 3ull * size + 10;
	uint64_t out = 0;

	/* consumed 3 * size + 10, ring of @size: at most 4 * size + 10 */
	ASSERT_EQ(0, to_count(4, 10, size, prev, prev + size, &out));
	ASSERT_EQ(prev + size, out);
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(4, 11, size, prev, prev + size, &out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(5, 0, size, prev, prev + size, &out));
	/* @max below @prev: nothing is acceptable */
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(3, 10, size, prev, prev - 1, &out));
	/* @max == @prev: only the same cursor */
	ASSERT_EQ(0, to_count(3, 10, size, prev, prev, &out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(3, 11, size, prev, prev, &out));
}

TEST(cursor_to_count_size_not_power_of_two)
{
	static const uint32_t bad[] = {
		0, 3, 5, 6, 12345, 16 * KIB + 1, 3 * 16 * KIB, 0x7fffffffu,
		0x80000001u, 0xc0000000u, 0xffffffffu,
	};
	uint64_t out = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(0, 0, bad[i], 0, UINT64_MAX, &out))
			TH_LOG("size %u", bad[i]);
		ASSERT_EQ(-SMR_WIRE_EFIELD, to_count(1, 1, bad[i], 0, UINT64_MAX, &out));
	}
	/* every power of two is a size */
	for (int shift = 0; shift < 32; shift++) {
		ASSERT_EQ(0, to_count(1, 0, 1u << shift, 0, UINT64_MAX, &out));
		ASSERT_EQ(1ull << shift, out);
	}
}

TEST(cursor_roundtrip_random)
{
	/*
	 * Any count from @prev up to (but not into) the ring 2^32 wraps after
	 * @prev's converts to a cursor and back; one below @prev or above
	 * @max does not.
	 */
	for (int n = 0; n < 200000; n++) {
		const int shift = rng32() % 32;
		const uint32_t size = 1u << shift;
		/* < 2^62, so the sums below stay in range */
		const uint64_t prev = ((uint64_t)rng32() << 32 | rng32()) >> 2;
		/* the span 2^32 rings cover, minus one */
		const uint64_t span = (1ull << (32 + shift)) - 1;
		/* the largest unambiguous distance from @prev */
		const uint64_t limit = span - (prev & (size - 1));
		uint64_t delta = ((uint64_t)rng32() << 32 | rng32()) % (limit + 1);
		uint64_t count, out = 0;
		struct smr_cdc_cursor c;

		if (n % 4 == 0)
			delta &= size * 4ull - 1;	/* near: the common case */
		if (n % 64 == 1)
			delta = limit;			/* the farthest */
		count = prev + delta;
		smr_cursor_from_count(count, size, &c);
		ASSERT_EQ(0, to_count(c.wrap, c.count, size, prev, count, &out))
			TH_LOG("iteration %d", n);
		ASSERT_EQ(count, out);
		ASSERT_EQ(0, to_count(c.wrap, c.count, size, prev, UINT64_MAX, &out));
		ASSERT_EQ(count, out);
		if (count > prev) {
			ASSERT_EQ(-SMR_WIRE_EFIELD,
				  to_count(c.wrap, c.count, size, prev, count - 1, &out));
		}
		/* one byte further names @prev's ring again, 2^32 wraps back */
		if (delta == limit) {
			int err;

			smr_cursor_from_count(count + 1, size, &c);
			err = to_count(c.wrap, c.count, size, prev, UINT64_MAX, &out);
			ASSERT_TRUE(err == -SMR_WIRE_EFIELD || (!err && out == prev));
			ASSERT_TRUE(err || !(prev & (size - 1)));
		}
		/* a count behind @prev, with @max less than 2^31 rings ahead */
		if (prev > 0) {
			uint64_t back = 1 + (((uint64_t)rng32() << 32 | rng32()) & (span >> 1));
			uint64_t behind = back > prev ? 0 : prev - back;

			smr_cursor_from_count(behind, size, &c);
			ASSERT_EQ(-SMR_WIRE_EFIELD,
				  to_count(c.wrap, c.count, size, prev,
					   prev + (span >> 1), &out))
				TH_LOG("iteration %d prev %llu behind %llu", n,
				       (unsigned long long)prev, (unsigned long long)behind);
		}
	}
}

/* ---- rdma_cm private data ---- */

#define CM_CREDITS	0x0102

static const uint8_t golden_cm_priv[SMR_CM_PRIV_LEN] = {
	0x53, 0x4d, 0x52, 0x4c, 0x03, 0x00, 0x01, 0x02,	/* SMRL v3 flags credits */
	0x0a, 0x0b, 0x0c, 0x0d,				/* link_id */
	0x00, 0x00, 0x00, 0x00,				/* reserved */
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,	/* secret */
	0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
};

/* version 2, as kernel/link_cm.c sent it before: 16 bytes, no secret */
static const uint8_t cm_priv_v2[16] = {
	0x53, 0x4d, 0x52, 0x4c, 0x02, 0x00, 0x01, 0x02,
	0x0a, 0x0b, 0x0c, 0x0d,
	0x00, 0x00, 0x00, 0x00,
};

/* version 1, as kernel/link.c sent it before: 12 bytes, no credits */
static const uint8_t cm_priv_v1[12] = {
	0x53, 0x4d, 0x52, 0x4c, 0x01, 0x00, 0x00, 0x00,
	0x0a, 0x0b, 0x0c, 0x0d,
};

static void make_cm_priv(void *m)
{
	struct smr_cm_priv *p = m;

	memset(p, 0, sizeof(*p));
	p->link_id = PROPOSAL_LINK;	/* the id a PROPOSAL names */
	p->credits = CM_CREDITS;
	p->flags = 0;
	for (int i = 0; i < SMR_LINK_SECRET_LEN; i++)
		p->secret[i] = 0xa0 + i;
}

static int cm_priv_eq(const struct smr_cm_priv *a, const struct smr_cm_priv *b)
{
	return a->link_id == b->link_id && a->credits == b->credits &&
	       a->flags == b->flags &&
	       !memcmp(a->secret, b->secret, SMR_LINK_SECRET_LEN);
}

/* credits and link id zero, a reserved bit set */
static void cm_priv_spoil(uint8_t *buf)
{
	memset(buf + 6, 0, 6);
	buf[15] = 1;
}

static int cm_priv_flip_err(struct __test_metadata *_metadata, size_t off,
		       const uint8_t *buf)
{
	if (off >= 12 && off < 16)	/* reserved */
		return -SMR_WIRE_EFIELD;
	/* credits leave 1..MAX when a high bit is set */
	if ((buf[6] << 8 | buf[7]) > SMR_CM_CREDITS_MAX) {
		ASSERT_EQ(6, off);
		return -SMR_WIRE_EFIELD;
	}
	/* flags, credits within bounds, link id: free */
	return 0;
}

WIRE_FMT(cm_priv, struct smr_cm_priv, golden_cm_priv);

FMT_TEST(cm_priv_build_matches_golden_bytes, fmt_build_matches_golden, cm_priv_fmt)

TEST(cm_priv_parse_golden_bytes)
{
	union any_msg want, got;

	fmt_parse_golden(_metadata, &cm_priv_fmt, &want, &got);
	ASSERT_TRUE(cm_priv_eq(&want.cm, &got.cm));
	ASSERT_EQ(PROPOSAL_LINK, got.cm.link_id);
	ASSERT_EQ(CM_CREDITS, got.cm.credits);
}

TEST(cm_priv_truncated_every_length)
{
	fmt_truncated_every_length(_metadata, &cm_priv_fmt);
	/* no private data at all, whatever the length says */
	ASSERT_EQ(-SMR_WIRE_ELENGTH, smr_cm_priv_parse(NULL, 0, NULL));
	ASSERT_EQ(-SMR_WIRE_ELENGTH, smr_cm_priv_parse(NULL, SMR_CM_PRIV_LEN, NULL));
	ASSERT_EQ(-SMR_WIRE_ELENGTH, smr_cm_priv_parse(NULL, 256, NULL));
}

TEST(cm_priv_longer_buffer_ignores_tail)
{
	/* rdma_cm pads private data: zeros, or whatever the peer sent */
	uint8_t buf[SMR_CM_PRIV_LEN + 240];
	struct smr_cm_priv want, got;

	make_cm_priv(&want);
	for (size_t len = SMR_CM_PRIV_LEN + 1; len <= sizeof(buf); len++) {
		for (int fill = 0; fill < 2; fill++) {
			memcpy(buf, golden_cm_priv, SMR_CM_PRIV_LEN);
			memset(buf + SMR_CM_PRIV_LEN, fill ? 0xff : 0,
			       len - SMR_CM_PRIV_LEN);
			ASSERT_EQ(0, cm_priv_parse_exact(buf, len, &got))
				TH_LOG("length %zu fill %d", len, fill);
			ASSERT_TRUE(cm_priv_eq(&want, &got));
		}
	}
}

FMT_TEST(cm_priv_magic_each_bit, fmt_magic_each_bit, cm_priv_fmt)

TEST(cm_priv_other_magics)
{
	static const char *const magics[] = {
		"SMRC", "SMRK", "SMRH", "SMRT", "LRMS", "smrl", "\0\0\0\0",
	};
	uint8_t buf[SMR_CM_PRIV_LEN];

	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++) {
		memcpy(buf, golden_cm_priv, SMR_CM_PRIV_LEN);
		memcpy(buf, magics[i], 4);
		EXPECT_EQ(-SMR_WIRE_EMAGIC, cm_priv_err(buf)) TH_LOG("magic %zu", i);
		/* magic before version and fields */
		buf[4] = 1;
		memset(buf + 6, 0, 6);
		buf[12] = 0xff;
		EXPECT_EQ(-SMR_WIRE_EMAGIC, cm_priv_err(buf)) TH_LOG("magic %zu", i);
	}
}

FMT_TEST(cm_priv_version_not_3, fmt_version_first, cm_priv_fmt)

TEST(cm_priv_flag_idle_ask)
{
	/*
	 * bit 0 of the flags (offset 5): IDLE_ASK, kept as sent; a module
	 * that predates it sent 0 there, and ignores it
	 */
	uint8_t buf[SMR_CM_PRIV_LEN];
	struct smr_cm_priv m, out;

	ASSERT_EQ(0x01, SMR_CM_F_IDLE_ASK);
	make_cm_priv(&m);
	m.flags = SMR_CM_F_IDLE_ASK;
	smr_cm_priv_build(&m, buf);
	ASSERT_EQ(0x01, buf[5]);
	ASSERT_EQ(0, cm_priv_parse_exact(buf, sizeof(buf), &out));
	ASSERT_EQ(SMR_CM_F_IDLE_ASK, out.flags);
	ASSERT_EQ(0, cm_priv_parse_exact(golden_cm_priv, sizeof(golden_cm_priv), &out));
	ASSERT_EQ(0, out.flags & SMR_CM_F_IDLE_ASK);
}

TEST(cm_priv_version_1_peer)
{
	/* the old 12 bytes: too short; padded by rdma_cm: the wrong version */
	uint8_t padded[56] = { 0 };

	ASSERT_EQ(-SMR_WIRE_ELENGTH, cm_priv_parse_exact(cm_priv_v1, sizeof(cm_priv_v1), NULL));
	memcpy(padded, cm_priv_v1, sizeof(cm_priv_v1));
	ASSERT_EQ(-SMR_WIRE_EVERSION, cm_priv_parse_exact(padded, SMR_CM_PRIV_LEN, NULL));
	ASSERT_EQ(-SMR_WIRE_EVERSION, cm_priv_parse_exact(padded, sizeof(padded), NULL));
}

TEST(cm_priv_version_2_peer)
{
	/*
	 * The 16 bytes of version 2 (no secret): too short; padded by rdma_cm
	 * (zeros, or a forger's secret behind them): the wrong version.
	 */
	uint8_t padded[56] = { 0 };

	ASSERT_EQ(-SMR_WIRE_ELENGTH, cm_priv_parse_exact(cm_priv_v2, sizeof(cm_priv_v2), NULL));
	memcpy(padded, cm_priv_v2, sizeof(cm_priv_v2));
	ASSERT_EQ(-SMR_WIRE_EVERSION, cm_priv_parse_exact(padded, SMR_CM_PRIV_LEN, NULL));
	memset(padded + 16, 0x5a, 16);
	ASSERT_EQ(-SMR_WIRE_EVERSION, cm_priv_parse_exact(padded, sizeof(padded), NULL));
}

TEST(cm_priv_secret)
{
	uint8_t buf[SMR_CM_PRIV_LEN];
	struct smr_cm_priv p, out;

	/* at offset 16, 16 bytes, carried through build and parse */
	make_cm_priv(&p);
	memset(buf, 0xff, sizeof(buf));
	smr_cm_priv_build(&p, buf);
	ASSERT_EQ(0, memcmp(buf + 16, p.secret, SMR_LINK_SECRET_LEN));
	ASSERT_EQ(0, cm_priv_parse_exact(buf, SMR_CM_PRIV_LEN, &out));
	ASSERT_EQ(0, memcmp(out.secret, p.secret, SMR_LINK_SECRET_LEN));
	/* all zero is no secret: refused (a request would prove nothing) */
	memset(buf + 16, 0, SMR_LINK_SECRET_LEN);
	memset(&out, 0x5a, sizeof(out));
	ASSERT_EQ(-SMR_WIRE_EFIELD, cm_priv_parse_exact(buf, SMR_CM_PRIV_LEN, &out));
	/* any one bit anywhere in it makes it a secret again */
	for (int bit = 0; bit < 8 * SMR_LINK_SECRET_LEN; bit++) {
		memset(buf + 16, 0, SMR_LINK_SECRET_LEN);
		buf[16 + bit / 8] = 1u << bit % 8;
		ASSERT_EQ(0, cm_priv_parse_exact(buf, SMR_CM_PRIV_LEN, &out)) TH_LOG("bit %d", bit);
		ASSERT_EQ(1u << bit % 8, out.secret[bit / 8]);
	}
}

TEST(cm_priv_flags_unknown_bits_kept)
{
	uint8_t buf[SMR_CM_PRIV_LEN], again[SMR_CM_PRIV_LEN];
	struct smr_cm_priv out;

	memcpy(buf, golden_cm_priv, SMR_CM_PRIV_LEN);
	for (unsigned int flags = 0; flags < 256; flags++) {
		buf[5] = flags;
		ASSERT_EQ(0, cm_priv_parse_exact(buf, SMR_CM_PRIV_LEN, &out));
		ASSERT_EQ(flags, out.flags);
		ASSERT_EQ(CM_CREDITS, out.credits);
		ASSERT_EQ(PROPOSAL_LINK, out.link_id);
		smr_cm_priv_build(&out, again);
		ASSERT_EQ(0, memcmp(buf, again, SMR_CM_PRIV_LEN));
	}
}

TEST(cm_priv_credits_bounds)
{
	/* at offset 6, big-endian: 1..SMR_CM_CREDITS_MAX, every other value refused */
	for (unsigned int credits = 0; credits <= 0xffff; credits++) {
		uint8_t buf[SMR_CM_PRIV_LEN];
		struct smr_cm_priv p, out;
		int err;

		make_cm_priv(&p);
		p.credits = credits;
		memset(buf, 0xa5, sizeof(buf));
		smr_cm_priv_build(&p, buf);
		ASSERT_EQ(credits >> 8, buf[6]);
		ASSERT_EQ(credits & 0xff, buf[7]);
		err = cm_priv_parse_exact(buf, SMR_CM_PRIV_LEN, &out);
		if (credits == 0 || credits > SMR_CM_CREDITS_MAX) {
			ASSERT_EQ(-SMR_WIRE_EFIELD, err) TH_LOG("credits %u", credits);
			continue;
		}
		ASSERT_EQ(0, err) TH_LOG("credits %u", credits);
		ASSERT_EQ(credits, out.credits);
		ASSERT_TRUE(cm_priv_eq(&p, &out));
	}
	ASSERT_EQ(4096, SMR_CM_CREDITS_MAX);
}

TEST(cm_priv_link_id)
{
	static const uint32_t ids[] = { 1, 0x80000000u, 0xffffffffu, 0x00ff0000u };
	uint8_t buf[SMR_CM_PRIV_LEN];
	struct smr_cm_priv p, out;

	/* at offset 8, big-endian, carried through build and parse */
	make_cm_priv(&p);
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		p.link_id = ids[i];
		smr_cm_priv_build(&p, buf);
		ASSERT_EQ(ids[i] >> 24, buf[8]);
		ASSERT_EQ((ids[i] >> 16) & 0xff, buf[9]);
		ASSERT_EQ((ids[i] >> 8) & 0xff, buf[10]);
		ASSERT_EQ(ids[i] & 0xff, buf[11]);
		ASSERT_EQ(0, cm_priv_parse_exact(buf, SMR_CM_PRIV_LEN, &out));
		ASSERT_TRUE(cm_priv_eq(&p, &out));
	}
	/* zero is never a link id */
	memcpy(buf, golden_cm_priv, SMR_CM_PRIV_LEN);
	memset(buf + 8, 0, 4);
	ASSERT_EQ(-SMR_WIRE_EFIELD, cm_priv_err(buf));
	/* any one bit makes it one again */
	for (int bit = 0; bit < 32; bit++) {
		be_one_bit(buf + 8, 4, bit);
		ASSERT_EQ(0, cm_priv_parse_exact(buf, SMR_CM_PRIV_LEN, &out));
		ASSERT_EQ(1u << bit, out.link_id);
	}
}

TEST(cm_priv_reserved_every_bit)
{
	for (size_t off = 12; off < 16; off++) {
		for (int bit = 0; bit < 8; bit++) {
			uint8_t buf[SMR_CM_PRIV_LEN];

			memcpy(buf, golden_cm_priv, SMR_CM_PRIV_LEN);
			buf[off] ^= 1u << bit;
			ASSERT_EQ(-SMR_WIRE_EFIELD, cm_priv_err(buf))
				TH_LOG("offset %zu bit %d", off, bit);
		}
	}
	/* and build writes them zero whatever was in the buffer */
	{
		uint8_t buf[SMR_CM_PRIV_LEN];
		struct smr_cm_priv p;

		make_cm_priv(&p);
		memset(buf, 0xff, sizeof(buf));
		smr_cm_priv_build(&p, buf);
		ASSERT_EQ(0, buf[12] | buf[13] | buf[14] | buf[15]);
	}
}

FMT_TEST(cm_priv_every_single_bit_flip_classified, fmt_every_single_bit_flip, cm_priv_fmt)

TEST(cm_priv_roundtrip_random)
{
	for (int n = 0; n < 20000; n++) {
		uint8_t buf[SMR_CM_PRIV_LEN + 4], again[SMR_CM_PRIV_LEN];
		struct smr_cm_priv p, out;

		memset(&p, 0, sizeof(p));
		memset(buf, 0x3c, sizeof(buf));
		p.link_id = rng32() | 1u << rng32() % 32;
		p.credits = 1 + rng32() % SMR_CM_CREDITS_MAX;
		p.flags = rng32();
		for (int i = 0; i < SMR_LINK_SECRET_LEN; i++)
			p.secret[i] = rng32();
		p.secret[rng32() % SMR_LINK_SECRET_LEN] |= 1u << rng32() % 8;
		smr_cm_priv_build(&p, buf);
		ASSERT_EQ(0, cm_priv_parse_exact(buf, SMR_CM_PRIV_LEN, &out));
		ASSERT_TRUE(cm_priv_eq(&p, &out)) TH_LOG("iteration %d", n);
		smr_cm_priv_build(&out, again);
		ASSERT_EQ(0, memcmp(buf, again, SMR_CM_PRIV_LEN));
		ASSERT_EQ(0x3c, buf[SMR_CM_PRIV_LEN]);
	}
}

/* ---- link messages ---- */

#define LMSG_CREDITS	0x4567

static const uint8_t golden_lmsg[SMR_LMSG_LEN] = {
	0x53, 0x4d, 0x52, 0x4b, 0x01, 0x01, 0x45, 0x67,	/* SMRK v1 CREDITS 0x4567 */
};

static void make_lmsg(void *msg)
{
	struct smr_lmsg *m = msg;

	memset(m, 0, sizeof(*m));
	m->type = SMR_LMSG_CREDITS;
	m->credits = LMSG_CREDITS;
}

/* the type zero */
static void lmsg_spoil(uint8_t *buf)
{
	buf[5] = 0;
}

static int lmsg_flip_err(struct __test_metadata *_metadata, size_t off,
			 const uint8_t *buf)
{
	/* the type (1 to 4 are known: 1 ^ 2 is IDLE_YES); credits are free */
	if (off != 5)
		return 0;
	return buf[5] >= SMR_LMSG_CREDITS && buf[5] <= SMR_LMSG_IDLE_NO ?
	       0 : -SMR_WIRE_ETYPE;
}

WIRE_FMT(lmsg, struct smr_lmsg, golden_lmsg);

FMT_TEST(lmsg_build_matches_golden_bytes, fmt_build_matches_golden, lmsg_fmt)

TEST(lmsg_parse_golden_bytes)
{
	union any_msg want, got;

	fmt_parse_golden(_metadata, &lmsg_fmt, &want, &got);
	ASSERT_EQ(SMR_LMSG_CREDITS, got.lmsg.type);
	ASSERT_EQ(LMSG_CREDITS, got.lmsg.credits);
}

TEST(lmsg_truncated_every_length)
{
	fmt_truncated_every_length(_metadata, &lmsg_fmt);
	ASSERT_EQ(-SMR_WIRE_ELENGTH, smr_lmsg_parse(NULL, 0, NULL));
}

TEST(lmsg_longer_buffer_ignores_tail)
{
	/* up to a whole CDC receive buffer, the tail any bytes at all */
	uint8_t buf[SMR_CDC_MAX_LEN];
	struct smr_lmsg want, got;

	make_lmsg(&want);
	for (size_t len = SMR_LMSG_LEN + 1; len <= sizeof(buf); len++) {
		memcpy(buf, golden_lmsg, SMR_LMSG_LEN);
		memset(buf + SMR_LMSG_LEN, (int)len, len - SMR_LMSG_LEN);
		memset(&got, 0x5a, sizeof(got));
		ASSERT_EQ(0, lmsg_parse_exact(buf, len, &got)) TH_LOG("length %zu", len);
		ASSERT_EQ(0, memcmp(&want, &got, sizeof(want)));
	}
	/* a CDC's header after it changes nothing */
	memcpy(buf, golden_lmsg, SMR_LMSG_LEN);
	memcpy(buf + SMR_LMSG_LEN, golden_cdc, SMR_CDC_LEN);
	ASSERT_EQ(0, lmsg_parse_exact(buf, SMR_LMSG_LEN + SMR_CDC_LEN, &got));
	ASSERT_EQ(0, memcmp(&want, &got, sizeof(want)));
}

TEST(lmsg_fits_cdc_receive_buffer)
{
	uint8_t buf[SMR_CDC_MAX_LEN];
	struct smr_cdc c;
	struct smr_lmsg m;

	ASSERT_LE(SMR_LMSG_LEN, SMR_CDC_MAX_LEN);
	/* shorter than a CDC header: one never parses as the other */
	ASSERT_LT(SMR_LMSG_LEN, SMR_CDC_LEN);
	memset(buf, 0, sizeof(buf));
	memcpy(buf, golden_lmsg, SMR_LMSG_LEN);
	ASSERT_EQ(-SMR_WIRE_ELENGTH, smr_cdc_parse(buf, SMR_LMSG_LEN, &c));
	ASSERT_EQ(-SMR_WIRE_EMAGIC, smr_cdc_parse(buf, sizeof(buf), &c));
	memcpy(buf, golden_cdc, SMR_CDC_LEN);
	ASSERT_EQ(-SMR_WIRE_EMAGIC, smr_lmsg_parse(buf, SMR_LMSG_LEN, &m));
	ASSERT_EQ(-SMR_WIRE_EMAGIC, smr_lmsg_parse(buf, sizeof(buf), &m));
}

FMT_TEST(lmsg_magic_each_bit, fmt_magic_each_bit, lmsg_fmt)

TEST(lmsg_other_magics)
{
	static const char *const magics[] = {
		"SMRC",		/* a CDC's */
		"SMRH",		/* a handshake message's */
		"SMRL",		/* rdma_cm private data's */
		"SMRT",		/* the handshake trailer */
		"KRMS",		/* little-endian magic */
		"smrk",
	};
	uint8_t buf[SMR_LMSG_LEN];

	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++) {
		memcpy(buf, golden_lmsg, SMR_LMSG_LEN);
		memcpy(buf, magics[i], 4);
		EXPECT_EQ(-SMR_WIRE_EMAGIC, lmsg_err(buf)) TH_LOG("%s", magics[i]);
		/* magic before version and type */
		buf[4] = 2;
		buf[5] = 0;
		EXPECT_EQ(-SMR_WIRE_EMAGIC, lmsg_err(buf)) TH_LOG("%s", magics[i]);
	}
	memset(buf, 0, sizeof(buf));
	EXPECT_EQ(-SMR_WIRE_EMAGIC, lmsg_err(buf));
}

FMT_TEST(lmsg_version_not_1, fmt_version_first, lmsg_fmt)

TEST(lmsg_type_unknown)
{
	for (unsigned int t = 0; t < 256; t++) {
		uint8_t buf[SMR_LMSG_LEN];
		int err;

		memcpy(buf, golden_lmsg, SMR_LMSG_LEN);
		buf[5] = t;
		err = lmsg_err(buf);
		if (t >= SMR_LMSG_CREDITS && t <= SMR_LMSG_IDLE_NO) {
			ASSERT_EQ(0, err) TH_LOG("type %u", t);
		} else {
			ASSERT_EQ(-SMR_WIRE_ETYPE, err) TH_LOG("type %u", t);
		}
	}
}

TEST(lmsg_credits_every_value)
{
	/* at offset 6, big-endian; any value parses and is built back */
	for (unsigned int credits = 0; credits <= 0xffff; credits++) {
		uint8_t buf[SMR_LMSG_LEN], again[SMR_LMSG_LEN];
		struct smr_lmsg m, out;

		make_lmsg(&m);
		m.credits = credits;
		memset(buf, 0xa5, sizeof(buf));
		smr_lmsg_build(&m, buf);
		ASSERT_EQ(0, memcmp(buf, golden_lmsg, 6));
		ASSERT_EQ(credits >> 8, buf[6]);
		ASSERT_EQ(credits & 0xff, buf[7]);
		memset(&out, 0x5a, sizeof(out));
		ASSERT_EQ(0, lmsg_parse_exact(buf, SMR_LMSG_LEN, &out))
			TH_LOG("credits %u", credits);
		ASSERT_EQ(0, memcmp(&m, &out, sizeof(m)));
		smr_lmsg_build(&out, again);
		ASSERT_EQ(0, memcmp(buf, again, SMR_LMSG_LEN));
	}
}

TEST(lmsg_idle_types)
{
	/* IDLE 2, IDLE_YES 3, IDLE_NO 4 at offset 5, credits along */
	static const uint8_t types[] = { 2, 3, 4 };

	for (unsigned int i = 0; i < sizeof(types); i++) {
		uint8_t buf[SMR_LMSG_LEN];
		struct smr_lmsg m, out;

		make_lmsg(&m);
		m.type = types[i];
		smr_lmsg_build(&m, buf);
		ASSERT_EQ(types[i], buf[5]);
		ASSERT_EQ(0, memcmp(buf + 6, golden_lmsg + 6, 2));
		ASSERT_EQ(0, lmsg_parse_exact(buf, SMR_LMSG_LEN, &out));
		ASSERT_EQ(types[i], out.type);
		ASSERT_EQ(m.credits, out.credits);
	}
	ASSERT_EQ(SMR_LMSG_IDLE, 2);
	ASSERT_EQ(SMR_LMSG_IDLE_YES, 3);
	ASSERT_EQ(SMR_LMSG_IDLE_NO, 4);
}

FMT_TEST(lmsg_every_single_bit_flip_classified, fmt_every_single_bit_flip, lmsg_fmt)

/* ---- what a received SEND is ---- */

/* smr_msg_kind() on a heap copy of exactly @len bytes */
static enum smr_msg_kind kind_exact(const uint8_t *bytes, size_t len)
{
	uint8_t *copy = heap_copy(bytes, len);
	enum smr_msg_kind kind;

	kind = smr_msg_kind(copy, len);
	free(copy);
	return kind;
}

TEST(msg_kind_every_prefix_length)
{
	static const struct {
		const uint8_t *bytes;
		size_t len;
		enum smr_msg_kind kind;
	} msgs[] = {
		{ golden_cdc, SMR_CDC_LEN, SMR_MSG_CDC },
		{ golden_lmsg, SMR_LMSG_LEN, SMR_MSG_LINK },
	};

	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		/* the magic decides, once all of it is there */
		for (size_t len = 0; len <= msgs[i].len; len++) {
			ASSERT_EQ(len < 4 ? SMR_MSG_UNKNOWN : msgs[i].kind,
				  kind_exact(msgs[i].bytes, len))
				TH_LOG("message %zu length %zu", i, len);
		}
	}
	ASSERT_EQ(SMR_MSG_UNKNOWN, smr_msg_kind(NULL, 0));
	ASSERT_EQ(SMR_MSG_UNKNOWN, kind_exact((const uint8_t *)"SMR", 3));
	ASSERT_EQ(SMR_MSG_CDC, kind_exact((const uint8_t *)"SMRC", 4));
	ASSERT_EQ(SMR_MSG_LINK, kind_exact((const uint8_t *)"SMRK", 4));
}

TEST(msg_kind_only_the_magic)
{
	/* a malformed CDC or link message is still of its kind */
	uint8_t buf[SMR_CDC_MAX_LEN];

	memset(buf, 0xff, sizeof(buf));
	memcpy(buf, "SMRC", 4);
	ASSERT_EQ(SMR_MSG_CDC, kind_exact(buf, sizeof(buf)));
	ASSERT_EQ(SMR_MSG_CDC, kind_exact(buf, 5));
	memcpy(buf, "SMRK", 4);
	ASSERT_EQ(SMR_MSG_LINK, kind_exact(buf, sizeof(buf)));
	ASSERT_EQ(SMR_MSG_LINK, kind_exact(buf, 5));
}

TEST(msg_kind_other_bytes)
{
	static const char *const magics[] = {
		"SMRH", "SMRL", "SMRT", "SMR1", "CRMS", "KRMS", "smrc", "smrk",
		"\0\0\0\0", "\xff\xff\xff\xff",
	};

	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++) {
		EXPECT_EQ(SMR_MSG_UNKNOWN, kind_exact((const uint8_t *)magics[i], 4))
			TH_LOG("magic %zu", i);
	}
	for (size_t i = 0; i < NREFS; i++) {
		EXPECT_EQ(SMR_MSG_UNKNOWN, kind_exact(refs[i].bytes, refs[i].len));
	}
	EXPECT_EQ(SMR_MSG_UNKNOWN, kind_exact(golden_cm_priv, SMR_CM_PRIV_LEN));
}

TEST(msg_kind_magic_each_bit)
{
	/*
	 * Any one bit off makes a magic unknown, with one exception: "SMRC"
	 * and "SMRK" differ in bit 3 of their last byte only.
	 */
	static const struct {
		const uint8_t *bytes;
		enum smr_msg_kind kind, other;
	} msgs[] = {
		{ golden_cdc, SMR_MSG_CDC, SMR_MSG_LINK },
		{ golden_lmsg, SMR_MSG_LINK, SMR_MSG_CDC },
	};

	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		for (int byte = 0; byte < 4; byte++) {
			for (int bit = 0; bit < 8; bit++) {
				uint8_t buf[4];

				memcpy(buf, msgs[i].bytes, 4);
				buf[byte] ^= 1u << bit;
				ASSERT_EQ(byte == 3 && bit == 3 ? msgs[i].other :
					  SMR_MSG_UNKNOWN, kind_exact(buf, 4))
					TH_LOG("message %zu byte %d bit %d", i, byte, bit);
			}
		}
	}
}

/* ---- CDC receipt: smr_cdc_validate() ---- */

#define OUT_POISON	0x5a5a5a5a5a5a5a5aull

#define RX_RING		(64 * KIB)

/* A receiver with RX_RING rings both ways, 1000 bytes written to the peer. */
static struct smr_cdc_rx_view rx_view(void)
{
	struct smr_cdc_rx_view v;

	memset(&v, 0, sizeof(v));
	v.rmb_size = RX_RING;
	v.peer_rmb_size = RX_RING;
	v.tx_sent = 1000;
	return v;
}

/* rx_view() that has read @cons bytes of the @prod it was sent */
static struct smr_cdc_rx_view rx_view_at(uint64_t cons, uint64_t prod)
{
	struct smr_cdc_rx_view v = rx_view();

	v.rx_cons = cons;
	v.rx_prod = prod;
	return v;
}

/* A CDC for @v naming byte counts @prod and @cons, sequence number 1. */
static struct smr_cdc rx_cdc(const struct smr_cdc_rx_view *v, uint64_t prod,
			     uint64_t cons)
{
	struct smr_cdc c;

	memset(&c, 0, sizeof(c));
	c.seq = 1;
	c.token = CDC_TOKEN;
	smr_cursor_from_count(prod, v->rmb_size, &c.prod);
	if (v->peer_rmb_size)
		smr_cursor_from_count(cons, v->peer_rmb_size, &c.cons);
	return c;
}

/* smr_cdc_validate(), checking @out is left alone unless it returns 0 */
static int validate(const struct smr_cdc *c, const struct smr_cdc_rx_view *v,
		    struct smr_cdc_rx_counts *out)
{
	struct smr_cdc_rx_counts got = { OUT_POISON, OUT_POISON, OUT_POISON };
	int ret = smr_cdc_validate(c, v, &got);

	if (ret && (got.prod != OUT_POISON || got.cons != OUT_POISON ||
		    got.urg != OUT_POISON))
		return -1000;	/* written on failure */
	if (!ret && out)
		*out = got;
	return ret;
}

TEST(cdc_validate_accepts)
{
	struct smr_cdc_rx_view v = rx_view();
	struct smr_cdc c = rx_cdc(&v, 100, 500);
	struct smr_cdc_rx_counts out;

	ASSERT_EQ(0, validate(&c, &v, &out));
	ASSERT_EQ(100, out.prod);
	ASSERT_EQ(500, out.cons);
	ASSERT_EQ(0, out.urg);
	/* nothing new at all is fine too (a consumer update) */
	c = rx_cdc(&v, 0, 0);
	ASSERT_EQ(0, validate(&c, &v, &out));
	ASSERT_EQ(0, out.prod);
	/* counts far into the stream, the wrap counter wrapped */
	v.rx_prod = 0xffffffffull * v.rmb_size + 10;
	v.rx_cons = v.rx_prod - 5;
	v.tx_peer_cons = 7ull << 40;
	v.tx_sent = v.tx_peer_cons + 9;
	c = rx_cdc(&v, v.rx_cons + v.rmb_size, v.tx_sent);
	ASSERT_EQ(0, validate(&c, &v, &out));
	ASSERT_EQ(v.rx_cons + v.rmb_size, out.prod);
	ASSERT_EQ(v.tx_sent, out.cons);
}

TEST(cdc_validate_sequence)
{
	static const struct {
		uint16_t last, seq;
		int stale;
	} cases[] = {
		{ 10, 11, 0 }, { 10, 10, 1 }, { 10, 9, 1 },
		{ 10, 10 + 0x7fff, 0 }, { 10, 10 + 0x8000, 1 },
		{ 0xffff, 0, 0 }, { 0, 0xffff, 1 }, { 0x8000, 0, 1 },
	};
	struct smr_cdc_rx_view v = rx_view();
	struct smr_cdc c = rx_cdc(&v, 100, 0);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		v.rx_seq_valid = 1;
		v.rx_seq = cases[i].last;
		c.seq = cases[i].seq;
		EXPECT_EQ(cases[i].stale ? SMR_CDC_STALE : 0,
			  validate(&c, &v, NULL)) TH_LOG("case %zu", i);
		/* the first CDC of a connection takes any number */
		v.rx_seq_valid = 0;
		EXPECT_EQ(0, validate(&c, &v, NULL)) TH_LOG("case %zu", i);
	}
}

TEST(cdc_validate_nothing_after_final)
{
	struct smr_cdc_rx_view v = rx_view();
	struct smr_cdc c = rx_cdc(&v, 0, 0);

	v.peer_final = 1;
	ASSERT_EQ(-SMR_WIRE_ESTATE, validate(&c, &v, NULL));
	/* a stale one is still only stale */
	v.rx_seq_valid = 1;
	v.rx_seq = c.seq;
	ASSERT_EQ(SMR_CDC_STALE, validate(&c, &v, NULL));
	/* the final outranks a broken cursor */
	v.rx_seq_valid = 0;
	c = rx_cdc(&v, v.rmb_size + 1, 0);
	ASSERT_EQ(-SMR_WIRE_ESTATE, validate(&c, &v, NULL));
}

TEST(cdc_validate_producer)
{
	struct smr_cdc_rx_view v = rx_view_at(3 * RX_RING, 3 * RX_RING + 100);
	struct smr_cdc c;

	/* up to what we read plus the ring, not a byte more */
	c = rx_cdc(&v, v.rx_cons + v.rmb_size, 0);
	ASSERT_EQ(0, validate(&c, &v, NULL));
	c = rx_cdc(&v, v.rx_cons + v.rmb_size + 1, 0);
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	/* never backwards */
	c = rx_cdc(&v, v.rx_prod - 1, 0);
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	/* the offset in the ring is below its size */
	c = rx_cdc(&v, v.rx_prod, 0);
	c.prod.count = v.rmb_size;
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	/* after DONE_WRITING not a byte more */
	v.peer_done = 1;
	c = rx_cdc(&v, v.rx_prod, 0);
	ASSERT_EQ(0, validate(&c, &v, NULL));
	c = rx_cdc(&v, v.rx_prod + 1, 0);
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
}

TEST(cdc_validate_inline_data)
{
	struct smr_cdc_rx_view v = rx_view_at(40, 40);
	struct smr_cdc c;

	c = rx_cdc(&v, 40 + SMR_CDC_INLINE_MAX, 0);
	c.inline_len = SMR_CDC_INLINE_MAX;
	ASSERT_EQ(0, validate(&c, &v, NULL));
	c = rx_cdc(&v, 40 + 10, 0);
	c.inline_len = 10;
	ASSERT_EQ(0, validate(&c, &v, NULL));
	c.inline_len = 11;
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	c = rx_cdc(&v, 40, 0);
	c.inline_len = 1;
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
}

TEST(cdc_validate_consumer)
{
	struct smr_cdc_rx_view v = rx_view();
	struct smr_cdc c;

	v.tx_peer_cons = 200;
	v.tx_sent = 900;
	c = rx_cdc(&v, 0, 900);
	ASSERT_EQ(0, validate(&c, &v, NULL));
	c = rx_cdc(&v, 0, 200);
	ASSERT_EQ(0, validate(&c, &v, NULL));
	/* more than we wrote, or backwards */
	c = rx_cdc(&v, 0, 901);
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	c = rx_cdc(&v, 0, 199);
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	/* before the peer's RMB is known its cursor can only be zero */
	v.peer_rmb_size = 0;
	v.tx_peer_cons = 0;
	v.tx_sent = 0;
	c = rx_cdc(&v, 0, 0);
	ASSERT_EQ(0, validate(&c, &v, NULL));
	c.cons.count = 1;
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	c.cons.count = 0;
	c.cons.wrap = 1;
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
}

TEST(cdc_validate_urgent)
{
	struct smr_cdc_rx_view v = rx_view_at(50, 100);
	struct smr_cdc_rx_counts out;
	struct smr_cdc c;

	c = rx_cdc(&v, 150, 0);
	c.flags = SMR_CDC_F_URGENT;
	/* anywhere in [rx_cons, prod) */
	smr_cursor_from_count(50, v.rmb_size, &c.urg);
	ASSERT_EQ(0, validate(&c, &v, &out));
	ASSERT_EQ(50, out.urg);
	smr_cursor_from_count(149, v.rmb_size, &c.urg);
	ASSERT_EQ(0, validate(&c, &v, &out));
	ASSERT_EQ(149, out.urg);
	smr_cursor_from_count(150, v.rmb_size, &c.urg);
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	smr_cursor_from_count(49, v.rmb_size, &c.urg);
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	/* no readable byte at all: no urgent one either */
	v.rx_cons = 100;
	c = rx_cdc(&v, 100, 0);
	c.flags = SMR_CDC_F_URGENT;
	smr_cursor_from_count(100, v.rmb_size, &c.urg);
	ASSERT_EQ(-SMR_WIRE_EFIELD, validate(&c, &v, NULL));
	/* without the flag the field means nothing */
	c.flags = 0;
	c.urg.count = 0xffffffffu;
	ASSERT_EQ(0, validate(&c, &v, NULL));
}

/* ---- seed corpus for the fuzzer, from the same reference bytes ---- */

static int write_seed(const char *dir, const char *name, const void *data,
		      size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
		fprintf(stderr, "wire_test: %s: %s\n", path, strerror(errno));
		return 1;
	}
	return 0;
}

/*
 * Cursor inputs as wire_fuzz.c reads them: size selector, wrap, count,
 * prev, max (see fuzz_cursor() there).
 */
static const uint8_t cursor_wrap[] = {
	16,					/* 64 KiB ring */
	0x00, 0x00, 0x00, 0x00,			/* wrap: counter wrapped */
	0x00, 0x00, 0x00, 0x05,			/* count */
	0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x0a,	/* prev */
	0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a,	/* max */
};

static const uint8_t cursor_top[] = {
	31,					/* 2 GiB ring */
	0xff, 0xff, 0xff, 0xff,			/* wrap */
	0x7f, 0xff, 0xff, 0xff,			/* count */
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfa,	/* prev */
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,	/* max */
};

/*
 * A receiver's view and CDC as wire_fuzz.c reads them (fuzz_cdc_validate()):
 * 64 KiB rings, cursors made from counts in range, one urgent byte.
 */
static const uint8_t cdc_rx_urgent[56] = {
	0x22, 0x79,				/* rings, bools */
	0x00, 0x07, 0x00, 0x08,			/* rx_seq, seq */
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,	/* rx_cons */
	0x00, 0x00, 0x10, 0x00,			/* rx_prod - rx_cons */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00,	/* tx_peer_cons */
	0x00, 0x00, 0x08, 0x00,			/* tx_sent - tx_peer_cons */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00,	/* prod */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,	/* cons */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0x00,	/* urg */
	0x00, 0x10,				/* inline_len */
};

static int write_seeds(const char *dir)
{
	static const char http[] = "GET / HTTP/1.1\r\n";
	uint8_t syn[32] = { 2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1,
			    0, 0, 0, 0, 1, 3, 3, 7 };
	uint8_t synack[20] = { 254, 4, 0xf9, 0x89, 1, 1, 1, 1 };
	uint8_t stream[SMR_HS_PROPOSAL_LEN + 5];
	uint8_t cdc_long[SMR_CDC_LEN + 20];
	uint8_t lmsg_long[SMR_CDC_MAX_LEN];
	uint8_t cm_padded[56];	/* an IB connect request's private data */
	uint8_t cm_v1_padded[56];
	int err = 0;

	memcpy(syn + 20, golden_offer, SMR_OPT_LEN);
	memcpy(synack + 8, golden_answer, SMR_OPT_LEN);
	memcpy(stream, golden_proposal, SMR_HS_PROPOSAL_LEN);
	memcpy(stream + SMR_HS_PROPOSAL_LEN, "GET /", 5);
	memcpy(cdc_long, golden_cdc, SMR_CDC_LEN);
	memset(cdc_long + SMR_CDC_LEN, 0xee, sizeof(cdc_long) - SMR_CDC_LEN);
	memset(lmsg_long, 0xee, sizeof(lmsg_long));
	memcpy(lmsg_long, golden_lmsg, SMR_LMSG_LEN);
	memset(cm_padded, 0, sizeof(cm_padded));
	memcpy(cm_padded, golden_cm_priv, SMR_CM_PRIV_LEN);
	memset(cm_v1_padded, 0, sizeof(cm_v1_padded));
	memcpy(cm_v1_padded, cm_priv_v1, sizeof(cm_priv_v1));

	for (size_t i = 0; i < NREFS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "hs-%s", refs[i].name);
		err |= write_seed(dir, name, refs[i].bytes, refs[i].len);
	}
	err |= write_seed(dir, "hs-proposal-then-data", stream, sizeof(stream));
	err |= write_seed(dir, "cdc", golden_cdc, sizeof(golden_cdc));
	err |= write_seed(dir, "cdc-long", cdc_long, sizeof(cdc_long));
	err |= write_seed(dir, "cdc-short", golden_cdc, SMR_CDC_LEN - 1);
	err |= write_seed(dir, "lmsg", golden_lmsg, sizeof(golden_lmsg));
	err |= write_seed(dir, "lmsg-in-cdc-buffer", lmsg_long, sizeof(lmsg_long));
	err |= write_seed(dir, "lmsg-short", golden_lmsg, SMR_LMSG_LEN - 1);
	err |= write_seed(dir, "cm-priv", golden_cm_priv, sizeof(golden_cm_priv));
	err |= write_seed(dir, "cm-priv-padded", cm_padded, sizeof(cm_padded));
	err |= write_seed(dir, "cm-priv-short", golden_cm_priv, SMR_CM_PRIV_LEN - 1);
	err |= write_seed(dir, "cm-priv-v1", cm_priv_v1, sizeof(cm_priv_v1));
	err |= write_seed(dir, "cm-priv-v1-padded", cm_v1_padded, sizeof(cm_v1_padded));
	err |= write_seed(dir, "cm-priv-v2", cm_priv_v2, sizeof(cm_priv_v2));
	err |= write_seed(dir, "hs-link-request", golden_link_request,
			  sizeof(golden_link_request));
	err |= write_seed(dir, "hs-link-grant", golden_link_grant,
			  sizeof(golden_link_grant));
	err |= write_seed(dir, "cursor-wrap", cursor_wrap, sizeof(cursor_wrap));
	err |= write_seed(dir, "cursor-top", cursor_top, sizeof(cursor_top));
	err |= write_seed(dir, "cdc-rx-urgent", cdc_rx_urgent, sizeof(cdc_rx_urgent));
	err |= write_seed(dir, "opt-syn-offer", syn, sizeof(syn));
	err |= write_seed(dir, "opt-synack-tfo-answer", synack, sizeof(synack));
	err |= write_seed(dir, "app-http", http, sizeof(http) - 1);
	err |= write_seed(dir, "app-magic-only", "SMRH", 4);
	return err;
}

/* wire_test [harness options] | wire_test --write-seeds DIR */
int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write-seeds"))
		return write_seeds(argv[2]);
	return test_harness_run(argc, argv);
}
