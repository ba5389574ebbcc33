/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR wire formats: the TCP option and the handshake messages.
 *
 * This header and wire.c have no kernel dependencies: they are compiled
 * into the module and into userspace unit tests and a libFuzzer target.
 * Parsing never reads past the given length, never trusts a length field,
 * and never writes outside the output struct. All multi-byte wire fields
 * are big-endian; the structs below are host-order views, never overlaid on
 * wire bytes. Exact layouts: Documentation/protocol.rst.
 */
#ifndef _SMR_WIRE_H
#define _SMR_WIRE_H

#include <linux/types.h>
#ifndef __KERNEL__
#include <stddef.h>
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
#endif

/* ---- TCP option: kind 254 (RFC 6994), 32-bit ExID ---- */
#define SMR_OPT_KIND		254
#define SMR_OPT_LEN		12		/* multiple of 4: no padding */
#define SMR_OPT_EXID		0x534d5231u	/* "SMR1" */
#define SMR_OPT_VERSION		1
#define SMR_OPT_ROLE_OFFER	1		/* in a SYN */
#define SMR_OPT_ROLE_ANSWER	2		/* in a SYN-ACK */
#define SMR_OPT_F_COOKIE	0x01		/* answer: SYN cookie, no SMR */

struct smr_opt {
	u8	version;
	u8	role;		/* SMR_OPT_ROLE_* */
	u8	flags;		/* SMR_OPT_F_*; unknown bits ignored */
	u32	nonce;		/* offer: nonce; answer: smr_opt_proof(nonce) */
};

/* The answer's proof of an offer's nonce; never equal to the nonce. */
u32 smr_opt_proof(u32 nonce);
/* true if @nonce is usable in an offer (non-zero, proof differs) */
int smr_opt_nonce_ok(u32 nonce);
/*
 * Scan a TCP option area (@opts, @len bytes: the bytes after the 20-byte
 * fixed header) for the SMR option. Returns 1 and fills @out if a
 * well-formed SMR option is present, 0 if there is none, and a negative
 * SMR_WIRE_E* if an option with SMR's ExID is malformed or the option
 * area itself is malformed before it.
 */
int smr_opt_parse(const u8 *opts, size_t len, struct smr_opt *out);
/* Write the option's SMR_OPT_LEN bytes at @buf. */
void smr_opt_write(u8 *buf, const struct smr_opt *opt);

/* ---- handshake messages over the TCP stream ---- */
#define SMR_HS_MAGIC		0x534d5248u	/* "SMRH", first 4 bytes */
#define SMR_HS_TRAILER		0x534d5254u	/* "SMRT", last 4 bytes */
#define SMR_HS_VERSION		1
#define SMR_HS_HDR_LEN		8
#define SMR_HS_MAX_LEN		80		/* longest message (ACCEPT) */

enum smr_hs_type {
	SMR_HS_PROPOSAL	= 1,	/* client -> server */
	SMR_HS_ACCEPT	= 2,	/* server -> client */
	SMR_HS_CONFIRM	= 3,	/* client -> server */
	SMR_HS_DECLINE	= 4,	/* either way, instead of the next message */
};

/* exact total lengths (header + body + trailer) of version 1 messages */
#define SMR_HS_PROPOSAL_LEN	64
#define SMR_HS_ACCEPT_LEN	80
#define SMR_HS_CONFIRM_LEN	44
#define SMR_HS_DECLINE_LEN	24

#define SMR_HS_CAP_RDMA		0x01	/* sender has an RDMA device for the peer */

/*
 * DECLINE carries the sender's enum smr_reason (uapi, not included here).
 * Parsing accepts any value below this limit; the caller maps reasons it
 * does not know (a newer peer's) to one it does.
 */
#define SMR_HS_REASON_LIMIT	64

#define SMR_HS_AF_INET		4
#define SMR_HS_AF_INET6		6

/* RMB sizes a peer may announce: powers of two in this range */
#define SMR_HS_RMB_MIN		(16u * 1024)
#define SMR_HS_RMB_MAX		(256u * 1024 * 1024)

struct smr_hs_rmb {
	u64	addr;		/* remote address for RDMA WRITE */
	u32	rkey;
	u32	size;		/* bytes, power of two in [RMB_MIN, RMB_MAX] */
};

struct smr_hs_addr {
	u8	family;		/* SMR_HS_AF_INET or SMR_HS_AF_INET6 */
	u8	gid[16];
	u8	ip[16];		/* IPv4: first 4 bytes, rest zero */
};

struct smr_hs_msg {
	u8	type;			/* enum smr_hs_type */
	union {
		struct {
			u8			max_version;	/* >= 1 */
			u8			caps;		/* SMR_HS_CAP_* */
			struct smr_hs_addr	addr;
			u64			token;		/* client's, non-zero */
			u32			rmb_size;	/* planned */
		} proposal;
		struct {
			u8			version;	/* chosen, 1 */
			u8			caps;
			struct smr_hs_addr	addr;
			u64			token;		/* server's, non-zero */
			u64			token_echo;	/* client's */
			struct smr_hs_rmb	rmb;		/* server's RMB */
		} accept;
		struct {
			u64			token;		/* client's */
			u64			token_echo;	/* server's */
			struct smr_hs_rmb	rmb;		/* client's RMB */
		} confirm;
		struct {
			u8			reason;		/* smr_reason, < REASON_LIMIT */
			u64			token_echo;	/* receiver's, 0 if unknown */
		} decline;
	};
};

/* parse errors (negative returns); each maps to a counted abort reason */
enum smr_wire_err {
	SMR_WIRE_EAGAIN		= 1,	/* fewer bytes than needed yet */
	SMR_WIRE_EMAGIC		= 2,	/* not an SMR message */
	SMR_WIRE_EVERSION	= 3,	/* unsupported message version */
	SMR_WIRE_ETYPE		= 4,	/* unknown type */
	SMR_WIRE_ELENGTH	= 5,	/* length field wrong for the type */
	SMR_WIRE_ETRAILER	= 6,	/* bad trailer */
	SMR_WIRE_EFIELD		= 7,	/* a field out of range / reserved set */
	SMR_WIRE_ETOKEN		= 8,	/* token zero or echo mismatch */
	SMR_WIRE_EOPTION	= 9,	/* malformed TCP option area */
};

/*
 * Look at the first @avail bytes of a stream. -SMR_WIRE_EMAGIC as soon as
 * the available prefix differs from the magic (even with @avail < 4: the
 * server uses this to tell application bytes from a PROPOSAL early);
 * -SMR_WIRE_EAGAIN if the prefix matches but @avail < SMR_HS_HDR_LEN; else
 * validate version, type and length and return the message's total length.
 */
int smr_hs_peek(const u8 *buf, size_t avail);
/*
 * Strictly parse exactly one message of @len bytes (as smr_hs_peek()
 * returned). 0 on success, negative SMR_WIRE_E* otherwise: the header's
 * errors as smr_hs_peek(), -SMR_WIRE_EAGAIN if @len is shorter than the
 * header or the message it announces, -SMR_WIRE_ELENGTH if longer. Caps
 * and option flags keep unknown bits (ignored, never rejected); an ACCEPT
 * whose version is not 1 is -SMR_WIRE_EVERSION. @out is written only on
 * success.
 */
int smr_hs_parse(const u8 *buf, size_t len, struct smr_hs_msg *out);
/*
 * Check a parsed message against the state machine: its type must be
 * @expected (or DECLINE) and its token echo must equal @my_token (for
 * ACCEPT/CONFIRM/DECLINE; a DECLINE may echo 0). 0 or -SMR_WIRE_E*.
 */
int smr_hs_check(const struct smr_hs_msg *msg, u8 expected, u64 my_token);
/*
 * Encode @msg into @buf (@cap bytes). Returns the length written, or 0 if
 * @cap is too small or @msg would not parse (encoding is canonical:
 * smr_hs_parse() of the output gives back @msg).
 */
size_t smr_hs_build(const struct smr_hs_msg *msg, u8 *buf, size_t cap);

#endif /* _SMR_WIRE_H */
