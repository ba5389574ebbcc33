// SPDX-License-Identifier: GPL-2.0
/*
 * SMR wire formats: parse and build the TCP option, the handshake
 * messages, the RDMA link's rdma_cm private data, and the CDC and link
 * messages described in Documentation/protocol.rst; tell the two kinds of
 * SEND apart, convert the CDC's ring cursors to and from byte counts, and
 * check a received CDC against its connection's cursor rules.
 *
 * Built into the module and, unchanged, into userspace unit tests and a
 * libFuzzer target, so it uses nothing but wire.h: no kernel or libc
 * helpers beyond compiler builtins. Parsers decode wire bytes into a local
 * host-order struct and copy it out only on success. One validator serves
 * both directions, so smr_hs_build() refuses exactly what smr_hs_parse()
 * would reject and parse(build(m)) gives back m.
 */
#include "wire.h"

/* ---- big-endian accessors ---- */

static inline u16 smr_get_be16(const u8 *p)
{
	return (u16)(p[0] << 8 | p[1]);
}

static inline u32 smr_get_be32(const u8 *p)
{
	return (u32)p[0] << 24 | (u32)p[1] << 16 | (u32)p[2] << 8 | p[3];
}

static inline u64 smr_get_be64(const u8 *p)
{
	return (u64)smr_get_be32(p) << 32 | smr_get_be32(p + 4);
}

static inline void smr_put_be16(u8 *p, u16 v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

static inline void smr_put_be32(u8 *p, u32 v)
{
	p[0] = v >> 24;
	p[1] = (v >> 16) & 0xff;
	p[2] = (v >> 8) & 0xff;
	p[3] = v & 0xff;
}

static inline void smr_put_be64(u8 *p, u64 v)
{
	smr_put_be32(p, v >> 32);
	smr_put_be32(p + 4, v & 0xffffffffu);
}

static inline void smr_copy_bytes(u8 *dst, const u8 *src, size_t n)
{
	__builtin_memcpy(dst, src, n);
}

static int smr_bytes_zero(const u8 *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* ---- the head every message opens with: magic (u32), version ---- */

#define SMR_HEAD_OFF_MAGIC	0
#define SMR_HEAD_OFF_VERSION	4

/*
 * A message of at least @min bytes (checked first: nothing is read past
 * @len) with our @magic and @version.
 */
static int smr_check_head(const u8 *buf, size_t len, size_t min, u32 magic,
			  u8 version)
{
	if (len < min)
		return -SMR_WIRE_ELENGTH;
	if (smr_get_be32(buf + SMR_HEAD_OFF_MAGIC) != magic)
		return -SMR_WIRE_EMAGIC;
	if (buf[SMR_HEAD_OFF_VERSION] != version)
		return -SMR_WIRE_EVERSION;
	return 0;
}

static void smr_put_head(u8 *buf, u32 magic, u8 version)
{
	smr_put_be32(buf + SMR_HEAD_OFF_MAGIC, magic);
	buf[SMR_HEAD_OFF_VERSION] = version;
}

/* ---- TCP option ---- */

#define SMR_OPT_EOL		0
#define SMR_OPT_NOP		1
#define SMR_OPT_EXID_LEN	6	/* kind, length, 32-bit ExID */
#define SMR_OPT_PROOF_KEY	0x5a17c3e9u

static inline u32 smr_ror32(u32 word, unsigned int shift)
{
	return word >> shift | word << (32 - shift);
}

u32 smr_opt_proof(u32 nonce)
{
	/*
	 * No nonce is its own proof: N ^ ror32(N, 11) always has an even
	 * number of bits set and the key has an odd number, so proof(N) == N
	 * has no solution. smr_opt_nonce_ok() still checks, to keep the
	 * documented rule independent of this argument.
	 */
	return smr_ror32(nonce, 11) ^ SMR_OPT_PROOF_KEY;
}

int smr_opt_nonce_ok(u32 nonce)
{
	return nonce != 0 && smr_opt_proof(nonce) != nonce;
}

/* Decode one option whose ExID is SMR's; @olen fits in the area. */
static int smr_opt_decode(const u8 *opt, size_t olen, struct smr_opt *out)
{
	u8 version, role;

	if (olen != SMR_OPT_LEN)
		return -SMR_WIRE_EFIELD;
	version = opt[6] >> 4;
	role = opt[6] & 0x0f;
	if (version != SMR_OPT_VERSION)
		return -SMR_WIRE_EFIELD;
	if (role != SMR_OPT_ROLE_OFFER && role != SMR_OPT_ROLE_ANSWER)
		return -SMR_WIRE_EFIELD;
	out->version = version;
	out->role = role;
	out->flags = opt[7];
	out->nonce = smr_get_be32(opt + 8);
	return 1;
}

int smr_opt_parse(const u8 *opts, size_t len, struct smr_opt *out)
{
	size_t i = 0;

	while (i < len) {
		u8 kind = opts[i];
		size_t olen;

		if (kind == SMR_OPT_EOL)
			return 0;
		if (kind == SMR_OPT_NOP) {
			i++;
			continue;
		}
		/* every other kind has a length byte counting kind and itself */
		if (len - i < 2)
			return -SMR_WIRE_EOPTION;
		olen = opts[i + 1];
		if (olen < 2 || olen > len - i)
			return -SMR_WIRE_EOPTION;
		/* other kind 254 users: 16-bit ExIDs (TFO's 0xF989), other 32-bit ones */
		if (kind == SMR_OPT_KIND && olen >= SMR_OPT_EXID_LEN &&
		    smr_get_be32(opts + i + 2) == SMR_OPT_EXID)
			return smr_opt_decode(opts + i, olen, out);
		i += olen;
	}
	return 0;
}

void smr_opt_write(u8 *buf, const struct smr_opt *opt)
{
	buf[0] = SMR_OPT_KIND;
	buf[1] = SMR_OPT_LEN;
	smr_put_be32(buf + 2, SMR_OPT_EXID);
	buf[6] = (u8)((opt->version & 0x0f) << 4 | (opt->role & 0x0f));
	buf[7] = opt->flags;
	smr_put_be32(buf + 8, opt->nonce);
}

/* ---- handshake messages ---- */

/* header: 0 magic, 4 version (the head) */
#define SMR_HS_OFF_TYPE		5
#define SMR_HS_OFF_LENGTH	6
#define SMR_HS_TRAILER_LEN	4

/* address block of PROPOSAL and ACCEPT: family, reserved, gid, ip */
#define SMR_HS_OFF_ADDR		10
#define SMR_HS_ADDR_GID		2
#define SMR_HS_ADDR_IP		18
#define SMR_HS_ADDR_LEN		34

/* RMB block of ACCEPT and CONFIRM: addr, rkey, size */
#define SMR_HS_RMB_RKEY		8
#define SMR_HS_RMB_SIZE		12

/* PROPOSAL */
#define SMR_HS_P_MAX_VERSION	8
#define SMR_HS_P_CAPS		9
#define SMR_HS_P_TOKEN		44
#define SMR_HS_P_RMB_SIZE	52
#define SMR_HS_P_LINK_ID	56
#define SMR_HS_P_RESERVED	60

/* ACCEPT */
#define SMR_HS_A_VERSION	8
#define SMR_HS_A_CAPS		9
#define SMR_HS_A_TOKEN		44
#define SMR_HS_A_TOKEN_ECHO	52
#define SMR_HS_A_RMB		60

/* CONFIRM */
#define SMR_HS_C_TOKEN		8
#define SMR_HS_C_TOKEN_ECHO	16
#define SMR_HS_C_RMB		24

/* DECLINE */
#define SMR_HS_D_REASON		8
#define SMR_HS_D_RESERVED	9
#define SMR_HS_D_RESERVED_LEN	3
#define SMR_HS_D_TOKEN_ECHO	12

/* LINK_REQUEST and LINK_GRANT */
#define SMR_HS_L_LINK_ID	8
#define SMR_HS_L_RESERVED	12	/* u32 */
#define SMR_HS_L_SECRET		16

/* exact length of a version 1 message of @type, 0 for an unknown type */
static size_t smr_hs_type_len(u8 type)
{
	switch (type) {
	case SMR_HS_PROPOSAL:
		return SMR_HS_PROPOSAL_LEN;
	case SMR_HS_ACCEPT:
		return SMR_HS_ACCEPT_LEN;
	case SMR_HS_CONFIRM:
		return SMR_HS_CONFIRM_LEN;
	case SMR_HS_DECLINE:
		return SMR_HS_DECLINE_LEN;
	case SMR_HS_LINK_REQUEST:
	case SMR_HS_LINK_GRANT:
		return SMR_HS_LINK_MSG_LEN;
	}
	return 0;
}

static int smr_hs_rmb_size_ok(u32 size)
{
	return size >= SMR_HS_RMB_MIN && size <= SMR_HS_RMB_MAX &&
	       (size & (size - 1)) == 0;
}

static int smr_hs_addr_valid(const struct smr_hs_addr *addr)
{
	if (addr->family == SMR_HS_AF_INET6)
		return 0;
	if (addr->family != SMR_HS_AF_INET)
		return -SMR_WIRE_EFIELD;
	/* an IPv4 address has one encoding: the rest of ip[] is zero */
	if (!smr_bytes_zero(addr->ip + 4, sizeof(addr->ip) - 4))
		return -SMR_WIRE_EFIELD;
	return 0;
}

/*
 * The semantic rules of protocol.rst for a host-order message: shared by
 * parse (after decoding) and build (before encoding). Rules that concern
 * only wire bytes (reserved bytes, trailer) are checked by the parser.
 */
static int smr_hs_validate(const struct smr_hs_msg *m)
{
	int err;

	switch (m->type) {
	case SMR_HS_PROPOSAL:
		if (m->proposal.max_version < SMR_HS_VERSION)
			return -SMR_WIRE_EFIELD;
		err = smr_hs_addr_valid(&m->proposal.addr);
		if (err)
			return err;
		if (!smr_hs_rmb_size_ok(m->proposal.rmb_size))
			return -SMR_WIRE_EFIELD;
		if (!m->proposal.link_id)
			return -SMR_WIRE_EFIELD;
		if (!m->proposal.token)
			return -SMR_WIRE_ETOKEN;
		return 0;
	case SMR_HS_ACCEPT:
		if (m->accept.version != SMR_HS_VERSION)
			return -SMR_WIRE_EVERSION;
		err = smr_hs_addr_valid(&m->accept.addr);
		if (err)
			return err;
		if (!smr_hs_rmb_size_ok(m->accept.rmb.size))
			return -SMR_WIRE_EFIELD;
		/* the echo is the client's token, which is never zero */
		if (!m->accept.token || !m->accept.token_echo)
			return -SMR_WIRE_ETOKEN;
		return 0;
	case SMR_HS_CONFIRM:
		if (!smr_hs_rmb_size_ok(m->confirm.rmb.size))
			return -SMR_WIRE_EFIELD;
		if (!m->confirm.token || !m->confirm.token_echo)
			return -SMR_WIRE_ETOKEN;
		return 0;
	case SMR_HS_DECLINE:
		/* unknown reasons below the limit are the caller's to map */
		if (m->decline.reason >= SMR_HS_REASON_LIMIT)
			return -SMR_WIRE_EFIELD;
		return 0;
	case SMR_HS_LINK_REQUEST:
	case SMR_HS_LINK_GRANT:
		/* a zero secret is none: it would prove nothing */
		if (!m->link.link_id ||
		    smr_bytes_zero(m->link.secret, sizeof(m->link.secret)))
			return -SMR_WIRE_EFIELD;
		return 0;
	}
	return -SMR_WIRE_ETYPE;
}

int smr_hs_peek(const u8 *buf, size_t avail)
{
	size_t i, len;

	/* byte by byte: application data is told apart from its first byte */
	for (i = 0; i < 4 && i < avail; i++)
		if (buf[i] != ((SMR_HS_MAGIC >> (24 - 8 * i)) & 0xff))
			return -SMR_WIRE_EMAGIC;
	if (avail < SMR_HS_HDR_LEN)
		return -SMR_WIRE_EAGAIN;
	if (buf[SMR_HEAD_OFF_VERSION] != SMR_HS_VERSION)
		return -SMR_WIRE_EVERSION;
	len = smr_hs_type_len(buf[SMR_HS_OFF_TYPE]);
	if (!len)
		return -SMR_WIRE_ETYPE;
	if (smr_get_be16(buf + SMR_HS_OFF_LENGTH) != len)
		return -SMR_WIRE_ELENGTH;
	return (int)len;
}

static int smr_hs_decode_addr(const u8 *p, struct smr_hs_addr *addr)
{
	if (p[1])	/* reserved byte after the family */
		return -SMR_WIRE_EFIELD;
	addr->family = p[0];
	smr_copy_bytes(addr->gid, p + SMR_HS_ADDR_GID, sizeof(addr->gid));
	smr_copy_bytes(addr->ip, p + SMR_HS_ADDR_IP, sizeof(addr->ip));
	return 0;
}

static void smr_hs_decode_rmb(const u8 *p, struct smr_hs_rmb *rmb)
{
	rmb->addr = smr_get_be64(p);
	rmb->rkey = smr_get_be32(p + SMR_HS_RMB_RKEY);
	rmb->size = smr_get_be32(p + SMR_HS_RMB_SIZE);
}

/* Decode the body of a message whose header and length are checked. */
static int smr_hs_decode(const u8 *buf, struct smr_hs_msg *m)
{
	m->type = buf[SMR_HS_OFF_TYPE];
	switch (m->type) {
	case SMR_HS_PROPOSAL:
		if (smr_get_be32(buf + SMR_HS_P_RESERVED))
			return -SMR_WIRE_EFIELD;
		m->proposal.max_version = buf[SMR_HS_P_MAX_VERSION];
		m->proposal.caps = buf[SMR_HS_P_CAPS];
		m->proposal.token = smr_get_be64(buf + SMR_HS_P_TOKEN);
		m->proposal.rmb_size = smr_get_be32(buf + SMR_HS_P_RMB_SIZE);
		m->proposal.link_id = smr_get_be32(buf + SMR_HS_P_LINK_ID);
		return smr_hs_decode_addr(buf + SMR_HS_OFF_ADDR,
					  &m->proposal.addr);
	case SMR_HS_ACCEPT:
		m->accept.version = buf[SMR_HS_A_VERSION];
		m->accept.caps = buf[SMR_HS_A_CAPS];
		m->accept.token = smr_get_be64(buf + SMR_HS_A_TOKEN);
		m->accept.token_echo = smr_get_be64(buf + SMR_HS_A_TOKEN_ECHO);
		smr_hs_decode_rmb(buf + SMR_HS_A_RMB, &m->accept.rmb);
		return smr_hs_decode_addr(buf + SMR_HS_OFF_ADDR,
					  &m->accept.addr);
	case SMR_HS_CONFIRM:
		m->confirm.token = smr_get_be64(buf + SMR_HS_C_TOKEN);
		m->confirm.token_echo = smr_get_be64(buf + SMR_HS_C_TOKEN_ECHO);
		smr_hs_decode_rmb(buf + SMR_HS_C_RMB, &m->confirm.rmb);
		return 0;
	case SMR_HS_DECLINE:
		if (!smr_bytes_zero(buf + SMR_HS_D_RESERVED,
				    SMR_HS_D_RESERVED_LEN))
			return -SMR_WIRE_EFIELD;
		m->decline.reason = buf[SMR_HS_D_REASON];
		m->decline.token_echo = smr_get_be64(buf + SMR_HS_D_TOKEN_ECHO);
		return 0;
	case SMR_HS_LINK_REQUEST:
	case SMR_HS_LINK_GRANT:
		if (smr_get_be32(buf + SMR_HS_L_RESERVED))
			return -SMR_WIRE_EFIELD;
		m->link.link_id = smr_get_be32(buf + SMR_HS_L_LINK_ID);
		smr_copy_bytes(m->link.secret, buf + SMR_HS_L_SECRET,
			       sizeof(m->link.secret));
		return 0;
	}
	return -SMR_WIRE_ETYPE;	/* unreachable: smr_hs_peek() checked */
}

int smr_hs_parse(const u8 *buf, size_t len, struct smr_hs_msg *out)
{
	struct smr_hs_msg m;
	int total, err;

	total = smr_hs_peek(buf, len);
	if (total < 0)
		return total;
	if (len < (size_t)total)
		return -SMR_WIRE_EAGAIN;
	if (len > (size_t)total)
		return -SMR_WIRE_ELENGTH;
	if (smr_get_be32(buf + total - SMR_HS_TRAILER_LEN) != SMR_HS_TRAILER)
		return -SMR_WIRE_ETRAILER;

	/* zeroed, padding included, so callers may compare whole structs */
	__builtin_memset(&m, 0, sizeof(m));
	err = smr_hs_decode(buf, &m);
	if (!err)
		err = smr_hs_validate(&m);
	if (err)
		return err;
	*out = m;
	return 0;
}

int smr_hs_check(const struct smr_hs_msg *msg, u8 expected, u64 my_token)
{
	if (!smr_hs_type_len(expected))
		return -SMR_WIRE_ETYPE;
	if (msg->type != expected && msg->type != SMR_HS_DECLINE)
		return -SMR_WIRE_ETYPE;
	switch (msg->type) {
	case SMR_HS_PROPOSAL:
		return 0;	/* opens the exchange: nothing to echo */
	case SMR_HS_ACCEPT:
		return msg->accept.token_echo == my_token ? 0 : -SMR_WIRE_ETOKEN;
	case SMR_HS_CONFIRM:
		return msg->confirm.token_echo == my_token ? 0 : -SMR_WIRE_ETOKEN;
	case SMR_HS_DECLINE:
		/* a DECLINE sent before the sender learnt our token echoes 0 */
		if (msg->decline.token_echo == 0 ||
		    msg->decline.token_echo == my_token)
			return 0;
		return -SMR_WIRE_ETOKEN;
	case SMR_HS_LINK_REQUEST:
	case SMR_HS_LINK_GRANT:
		return 0;	/* no token: the link layer checks the secret */
	}
	return -SMR_WIRE_ETYPE;
}

static void smr_hs_encode_addr(u8 *p, const struct smr_hs_addr *addr)
{
	p[0] = addr->family;
	smr_copy_bytes(p + SMR_HS_ADDR_GID, addr->gid, sizeof(addr->gid));
	smr_copy_bytes(p + SMR_HS_ADDR_IP, addr->ip, sizeof(addr->ip));
}

static void smr_hs_encode_rmb(u8 *p, const struct smr_hs_rmb *rmb)
{
	smr_put_be64(p, rmb->addr);
	smr_put_be32(p + SMR_HS_RMB_RKEY, rmb->rkey);
	smr_put_be32(p + SMR_HS_RMB_SIZE, rmb->size);
}

size_t smr_hs_build(const struct smr_hs_msg *msg, u8 *buf, size_t cap)
{
	size_t len = smr_hs_type_len(msg->type);

	if (!len || len > cap || smr_hs_validate(msg))
		return 0;

	/* reserved bytes and anything a type leaves out stay zero */
	__builtin_memset(buf, 0, len);
	smr_put_head(buf, SMR_HS_MAGIC, SMR_HS_VERSION);
	buf[SMR_HS_OFF_TYPE] = msg->type;
	smr_put_be16(buf + SMR_HS_OFF_LENGTH, (u16)len);
	smr_put_be32(buf + len - SMR_HS_TRAILER_LEN, SMR_HS_TRAILER);

	switch (msg->type) {
	case SMR_HS_PROPOSAL:
		buf[SMR_HS_P_MAX_VERSION] = msg->proposal.max_version;
		buf[SMR_HS_P_CAPS] = msg->proposal.caps;
		smr_hs_encode_addr(buf + SMR_HS_OFF_ADDR, &msg->proposal.addr);
		smr_put_be64(buf + SMR_HS_P_TOKEN, msg->proposal.token);
		smr_put_be32(buf + SMR_HS_P_RMB_SIZE, msg->proposal.rmb_size);
		smr_put_be32(buf + SMR_HS_P_LINK_ID, msg->proposal.link_id);
		break;
	case SMR_HS_ACCEPT:
		buf[SMR_HS_A_VERSION] = msg->accept.version;
		buf[SMR_HS_A_CAPS] = msg->accept.caps;
		smr_hs_encode_addr(buf + SMR_HS_OFF_ADDR, &msg->accept.addr);
		smr_put_be64(buf + SMR_HS_A_TOKEN, msg->accept.token);
		smr_put_be64(buf + SMR_HS_A_TOKEN_ECHO, msg->accept.token_echo);
		smr_hs_encode_rmb(buf + SMR_HS_A_RMB, &msg->accept.rmb);
		break;
	case SMR_HS_CONFIRM:
		smr_put_be64(buf + SMR_HS_C_TOKEN, msg->confirm.token);
		smr_put_be64(buf + SMR_HS_C_TOKEN_ECHO, msg->confirm.token_echo);
		smr_hs_encode_rmb(buf + SMR_HS_C_RMB, &msg->confirm.rmb);
		break;
	case SMR_HS_DECLINE:
		buf[SMR_HS_D_REASON] = msg->decline.reason;
		smr_put_be64(buf + SMR_HS_D_TOKEN_ECHO, msg->decline.token_echo);
		break;
	case SMR_HS_LINK_REQUEST:
	case SMR_HS_LINK_GRANT:
		smr_put_be32(buf + SMR_HS_L_LINK_ID, msg->link.link_id);
		smr_copy_bytes(buf + SMR_HS_L_SECRET, msg->link.secret,
			       sizeof(msg->link.secret));
		break;
	}
	return len;
}

/* ---- rdma_cm private data ---- */

/* 0: magic, 4: version (the head) */
#define SMR_CM_OFF_FLAGS	5
#define SMR_CM_OFF_CREDITS	6	/* u16 */
#define SMR_CM_OFF_LINK_ID	8	/* u32 */
#define SMR_CM_OFF_RESERVED	12	/* u32, written 0, must be 0 */
#define SMR_CM_OFF_SECRET	16	/* SMR_LINK_SECRET_LEN bytes */

int smr_cm_priv_parse(const u8 *buf, size_t len, struct smr_cm_priv *out)
{
	struct smr_cm_priv p;
	int err;

	if (!buf)
		return -SMR_WIRE_ELENGTH;
	err = smr_check_head(buf, len, SMR_CM_PRIV_LEN, SMR_CM_MAGIC,
			     SMR_CM_VERSION);
	if (err)
		return err;
	/* a later version may give these bytes a meaning: refuse them now */
	if (smr_get_be32(buf + SMR_CM_OFF_RESERVED))
		return -SMR_WIRE_EFIELD;

	/* zeroed, padding included, so callers may compare whole structs */
	__builtin_memset(&p, 0, sizeof(p));
	p.flags = buf[SMR_CM_OFF_FLAGS];
	p.credits = smr_get_be16(buf + SMR_CM_OFF_CREDITS);
	p.link_id = smr_get_be32(buf + SMR_CM_OFF_LINK_ID);
	smr_copy_bytes(p.secret, buf + SMR_CM_OFF_SECRET, sizeof(p.secret));
	if (!p.credits || p.credits > SMR_CM_CREDITS_MAX || !p.link_id ||
	    smr_bytes_zero(p.secret, sizeof(p.secret)))
		return -SMR_WIRE_EFIELD;
	*out = p;
	return 0;
}

void smr_cm_priv_build(const struct smr_cm_priv *p, u8 *buf)
{
	smr_put_head(buf, SMR_CM_MAGIC, SMR_CM_VERSION);
	buf[SMR_CM_OFF_FLAGS] = p->flags;
	smr_put_be16(buf + SMR_CM_OFF_CREDITS, p->credits);
	smr_put_be32(buf + SMR_CM_OFF_LINK_ID, p->link_id);
	smr_put_be32(buf + SMR_CM_OFF_RESERVED, 0);
	smr_copy_bytes(buf + SMR_CM_OFF_SECRET, p->secret, sizeof(p->secret));
}

/* ---- CDC messages ---- */

/* 0: magic, 4: version (the head) */
#define SMR_CDC_OFF_FLAGS	5
#define SMR_CDC_OFF_SEQ		6
#define SMR_CDC_OFF_TOKEN	8
#define SMR_CDC_OFF_PROD	16
#define SMR_CDC_OFF_CONS	24
#define SMR_CDC_OFF_URG		32
#define SMR_CDC_OFF_INLINE_LEN	40	/* u16 */
#define SMR_CDC_OFF_CREDITS	42	/* u16 */

/* a cursor on the wire: wrap (u32), count (u32) */
#define SMR_CDC_CURSOR_COUNT	4

static void smr_cdc_decode_cursor(const u8 *p, struct smr_cdc_cursor *c)
{
	c->wrap = smr_get_be32(p);
	c->count = smr_get_be32(p + SMR_CDC_CURSOR_COUNT);
}

static void smr_cdc_encode_cursor(u8 *p, const struct smr_cdc_cursor *c)
{
	smr_put_be32(p, c->wrap);
	smr_put_be32(p + SMR_CDC_CURSOR_COUNT, c->count);
}

int smr_cdc_parse(const u8 *buf, size_t len, struct smr_cdc *out)
{
	int err = smr_check_head(buf, len, SMR_CDC_LEN, SMR_CDC_MAGIC,
				 SMR_CDC_VERSION);
	struct smr_cdc c;

	if (err)
		return err;

	/* zeroed, padding included, so callers may compare whole structs */
	__builtin_memset(&c, 0, sizeof(c));
	c.token = smr_get_be64(buf + SMR_CDC_OFF_TOKEN);
	if (!c.token)
		return -SMR_WIRE_ETOKEN;
	c.flags = buf[SMR_CDC_OFF_FLAGS];
	c.seq = smr_get_be16(buf + SMR_CDC_OFF_SEQ);
	smr_cdc_decode_cursor(buf + SMR_CDC_OFF_PROD, &c.prod);
	smr_cdc_decode_cursor(buf + SMR_CDC_OFF_CONS, &c.cons);
	smr_cdc_decode_cursor(buf + SMR_CDC_OFF_URG, &c.urg);
	c.inline_len = smr_get_be16(buf + SMR_CDC_OFF_INLINE_LEN);
	c.credits = smr_get_be16(buf + SMR_CDC_OFF_CREDITS);
	if (c.inline_len > SMR_CDC_INLINE_MAX)
		return -SMR_WIRE_EFIELD;
	if (len - SMR_CDC_LEN < c.inline_len)
		return -SMR_WIRE_ELENGTH;
	*out = c;
	return 0;
}

void smr_cdc_build(const struct smr_cdc *cdc, u8 *buf)
{
	smr_put_head(buf, SMR_CDC_MAGIC, SMR_CDC_VERSION);
	buf[SMR_CDC_OFF_FLAGS] = cdc->flags;
	smr_put_be16(buf + SMR_CDC_OFF_SEQ, cdc->seq);
	smr_put_be64(buf + SMR_CDC_OFF_TOKEN, cdc->token);
	smr_cdc_encode_cursor(buf + SMR_CDC_OFF_PROD, &cdc->prod);
	smr_cdc_encode_cursor(buf + SMR_CDC_OFF_CONS, &cdc->cons);
	smr_cdc_encode_cursor(buf + SMR_CDC_OFF_URG, &cdc->urg);
	smr_put_be16(buf + SMR_CDC_OFF_INLINE_LEN, cdc->inline_len);
	smr_put_be16(buf + SMR_CDC_OFF_CREDITS, cdc->credits);
}

/* ---- ring cursors ---- */

/*
 * log2 of a ring size, or -1 if @size is not a power of two (every power
 * of two a u32 holds is at most 2^31). Byte counts are 64-bit: cursors use
 * this shift and a mask, never a u64 division, which the kernel allows only
 * through div_u64() (32-bit builds have no helper for it).
 */
static int smr_ring_shift(u32 size)
{
	if (!size || (size & (size - 1)))
		return -1;
	return __builtin_ctz(size);
}

void smr_cursor_from_count(u64 count, u32 size, struct smr_cdc_cursor *c)
{
	int shift = smr_ring_shift(size);

	/* outside the contract: a fixed cursor rather than undefined shifts */
	if (shift < 0) {
		c->wrap = 0;
		c->count = 0;
		return;
	}
	c->wrap = (u32)(count >> shift);
	c->count = (u32)(count & (size - 1));
}

int smr_cursor_to_count(const struct smr_cdc_cursor *c, u32 size, u64 prev,
			u64 max, u64 *out)
{
	int shift = smr_ring_shift(size);
	u64 prev_wraps, wraps, count;

	if (shift < 0 || c->count >= size)
		return -SMR_WIRE_EFIELD;
	/*
	 * The wire keeps the low 32 bits of the wrap count: the peer's cursor
	 * is the one at or after @prev's wrap whose low bits match. A cursor
	 * behind @prev's wrap comes out nearly 2^32 wraps ahead: beyond @max
	 * whenever @max is less than that far past @prev, as it always is.
	 */
	prev_wraps = prev >> shift;
	wraps = prev_wraps + (u32)(c->wrap - (u32)prev_wraps);
	if (wraps < prev_wraps || wraps > (~0ull >> shift))
		return -SMR_WIRE_EFIELD;	/* past 2^64 bytes */
	/* the low @shift bits of wraps << shift are zero: no carry */
	count = wraps << shift | c->count;
	if (count < prev || count > max)
		return -SMR_WIRE_EFIELD;
	*out = count;
	return 0;
}

/* ---- CDC receipt ---- */

int smr_cdc_validate(const struct smr_cdc *cdc,
		     const struct smr_cdc_rx_view *v,
		     struct smr_cdc_rx_counts *out)
{
	struct smr_cdc_rx_counts c;
	u16 ahead = (u16)(cdc->seq - v->rx_seq);

	/* serial arithmetic: 1..0x7fff ahead is newer, the rest is not */
	if (v->rx_seq_valid && (ahead == 0 || ahead & 0x8000))
		return SMR_CDC_STALE;
	if (v->peer_final)
		return -SMR_WIRE_ESTATE;

	__builtin_memset(&c, 0, sizeof(c));
	/* the peer may fill our RMB up to what we read plus its size */
	if (smr_cursor_to_count(&cdc->prod, v->rmb_size, v->rx_prod,
				v->rx_cons + v->rmb_size, &c.prod))
		return -SMR_WIRE_EFIELD;
	if (v->peer_done && c.prod != v->rx_prod)
		return -SMR_WIRE_EFIELD;
	/* inline data: the last bytes of what this CDC makes readable */
	if (cdc->inline_len > c.prod - v->rx_prod)
		return -SMR_WIRE_EFIELD;
	/* it may have read only what we wrote */
	if (v->peer_rmb_size) {
		if (smr_cursor_to_count(&cdc->cons, v->peer_rmb_size,
					v->tx_peer_cons, v->tx_sent, &c.cons))
			return -SMR_WIRE_EFIELD;
	} else if (cdc->cons.wrap || cdc->cons.count) {
		return -SMR_WIRE_EFIELD;
	}
	/* the urgent byte lies in what this CDC makes readable */
	if (cdc->flags & SMR_CDC_F_URGENT &&
	    (c.prod == v->rx_cons ||
	     smr_cursor_to_count(&cdc->urg, v->rmb_size, v->rx_cons,
				 c.prod - 1, &c.urg)))
		return -SMR_WIRE_EFIELD;
	*out = c;
	return 0;
}

/* ---- link messages ---- */

/* 0: magic, 4: version (the head) */
#define SMR_LMSG_OFF_TYPE	5
#define SMR_LMSG_OFF_CREDITS	6	/* u16 */

int smr_lmsg_parse(const u8 *buf, size_t len, struct smr_lmsg *out)
{
	struct smr_lmsg m;
	int err;

	err = smr_check_head(buf, len, SMR_LMSG_LEN, SMR_LMSG_MAGIC,
			     SMR_LMSG_VERSION);
	if (err)
		return err;
	if (buf[SMR_LMSG_OFF_TYPE] < SMR_LMSG_CREDITS ||
	    buf[SMR_LMSG_OFF_TYPE] > SMR_LMSG_TYPE_LAST)
		return -SMR_WIRE_ETYPE;

	/* zeroed, padding included, so callers may compare whole structs */
	__builtin_memset(&m, 0, sizeof(m));
	m.type = buf[SMR_LMSG_OFF_TYPE];
	m.credits = smr_get_be16(buf + SMR_LMSG_OFF_CREDITS);
	*out = m;
	return 0;
}

void smr_lmsg_build(const struct smr_lmsg *msg, u8 *buf)
{
	smr_put_head(buf, SMR_LMSG_MAGIC, SMR_LMSG_VERSION);
	buf[SMR_LMSG_OFF_TYPE] = msg->type;
	smr_put_be16(buf + SMR_LMSG_OFF_CREDITS, msg->credits);
}

enum smr_msg_kind smr_msg_kind(const u8 *buf, size_t len)
{
	u32 magic;

	if (len < 4)
		return SMR_MSG_UNKNOWN;
	magic = smr_get_be32(buf);
	if (magic == SMR_CDC_MAGIC)
		return SMR_MSG_CDC;
	if (magic == SMR_LMSG_MAGIC)
		return SMR_MSG_LINK;
	return SMR_MSG_UNKNOWN;
}
