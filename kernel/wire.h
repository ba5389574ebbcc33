/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR wire formats: the TCP option, the handshake messages, the rdma_cm
 * private data of the RDMA link, and what the link carries: CDC messages
 * and link messages.
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
#define SMR_OPT_F_NO_DEVICE	0x02		/* answer: no RDMA device here */
#define SMR_OPT_F_LINK_REQUEST	0x04		/* answer: takes LINK_REQUEST */

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
	SMR_HS_LINK_REQUEST = 5, /* client -> server, before PROPOSAL */
	SMR_HS_LINK_GRANT = 6,	/* server -> client, answers LINK_REQUEST */
};

/* exact total lengths (header + body + trailer) of version 1 messages */
#define SMR_HS_PROPOSAL_LEN	68
#define SMR_HS_ACCEPT_LEN	80
#define SMR_HS_CONFIRM_LEN	44
#define SMR_HS_DECLINE_LEN	24
#define SMR_HS_LINK_MSG_LEN	36	/* LINK_REQUEST and LINK_GRANT */

/*
 * The secret that ties an RDMA link to a handshake: drawn by the host that
 * connects the link, granted by its peer over an SMR handshake
 * (LINK_REQUEST, LINK_GRANT) and proven in the rdma_cm connect request's
 * private data. Never all zero.
 */
#define SMR_LINK_SECRET_LEN	16

#define SMR_HS_CAP_RDMA		0x01	/* sender has an RDMA device for the peer */
#define SMR_HS_CAP_CDC_INLINE	0x02	/* sender takes CDCs carrying data */

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
			u32			link_id;	/* server's id of the link */
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
		/* LINK_REQUEST, and LINK_GRANT echoing the request */
		struct {
			u32			link_id;	/* client's id, non-zero */
			u8			secret[SMR_LINK_SECRET_LEN];
		} link;
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
	SMR_WIRE_ESTATE		= 10,	/* not allowed now: a CDC after the final */
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
 * ACCEPT/CONFIRM/DECLINE; a DECLINE may echo 0). LINK_REQUEST and
 * LINK_GRANT carry no token: their secret is the link layer's to check.
 * 0 or -SMR_WIRE_E*.
 */
int smr_hs_check(const struct smr_hs_msg *msg, u8 expected, u64 my_token);
/*
 * Encode @msg into @buf (@cap bytes). Returns the length written, or 0 if
 * @cap is too small or @msg would not parse (encoding is canonical:
 * smr_hs_parse() of the output gives back @msg).
 */
size_t smr_hs_build(const struct smr_hs_msg *msg, u8 *buf, size_t cap);

/* ---- rdma_cm private data of the RDMA link's connect and accept ---- */
#define SMR_CM_MAGIC		0x534d524cu	/* "SMRL" */
#define SMR_CM_VERSION		3
#define SMR_CM_PRIV_LEN		32
#define SMR_CM_CREDITS_MAX	4096		/* largest initial grant */

/*
 * The sender asks before it lets an idle link go, and answers the peer's
 * asking (IDLE link messages); a link goes by agreement only when both
 * ends set it (protocol.rst, "The RDMA link").
 */
#define SMR_CM_F_IDLE_ASK	0x01

struct smr_cm_priv {
	u32	link_id;	/* the sender's id of the link, non-zero */
	u16	credits;	/* receives posted for the peer's SENDs: 1..MAX */
	u8	flags;		/* SMR_CM_F_*; unknown bits ignored */
	/* request: the granted secret; accept: its echo. Never all zero */
	u8	secret[SMR_LINK_SECRET_LEN];
};

/*
 * Parse the private data of an rdma_cm connect request or accept. 0 and
 * @out filled, or -SMR_WIRE_ELENGTH (@buf NULL or @len under
 * SMR_CM_PRIV_LEN) / -SMR_WIRE_EMAGIC / -SMR_WIRE_EVERSION (any version
 * but SMR_CM_VERSION, 1 and 2 included) / -SMR_WIRE_EFIELD (link_id 0,
 * credits 0 or over SMR_CM_CREDITS_MAX, reserved bytes not zero, secret
 * all zero). rdma_cm may hand over a longer, padded buffer: bytes past
 * SMR_CM_PRIV_LEN are ignored. @flags keeps unknown bits. @out is written
 * only on success.
 */
int smr_cm_priv_parse(const u8 *buf, size_t len, struct smr_cm_priv *out);
/* Encode @p into SMR_CM_PRIV_LEN bytes at @buf (reserved bytes zero). */
void smr_cm_priv_build(const struct smr_cm_priv *p, u8 *buf);

/* ---- CDC: connection data control, one IB SEND per message ---- */
#define SMR_CDC_MAGIC		0x534d5243u	/* "SMRC" */
#define SMR_CDC_VERSION		1
#define SMR_CDC_LEN		44		/* version 1 header, exact */
/*
 * A CDC may carry the last @inline_len stream bytes before its producer
 * cursor after the header (one SEND instead of WRITE + SEND: small
 * messages pay one packet), to peers that announced SMR_HS_CAP_CDC_INLINE.
 */
#define SMR_CDC_INLINE_MAX	128
#define SMR_CDC_MAX_LEN		(SMR_CDC_LEN + SMR_CDC_INLINE_MAX)

/* flags; unknown bits are ignored */
#define SMR_CDC_F_WRITE_BLOCKED	0x01	/* sender has data the ring can't take */
#define SMR_CDC_F_URGENT	0x02	/* @urg names the urgent byte */
#define SMR_CDC_F_DONE_WRITING	0x04	/* no bytes after @prod: EOF */
#define SMR_CDC_F_CLOSED	0x08	/* sender closed: no more reads/writes */
#define SMR_CDC_F_ABORT		0x10	/* reset the connection */

/* A ring position: how often the ring wrapped, offset in it. */
struct smr_cdc_cursor {
	u32	wrap;
	u32	count;		/* < ring size */
};

struct smr_cdc {
	u8			flags;		/* SMR_CDC_F_* */
	u16			seq;		/* per connection and direction */
	u64			token;		/* receiver's connection token */
	struct smr_cdc_cursor	prod;		/* sender's writes into our RMB */
	struct smr_cdc_cursor	cons;		/* sender's reads from its RMB */
	struct smr_cdc_cursor	urg;		/* the urgent byte, if F_URGENT */
	u16			inline_len;	/* data bytes after the header */
	u16			credits;	/* receives re-posted on the link */
};

/*
 * Parse one CDC message of @len bytes (what the receive completion said).
 * 0 and @out filled, or -SMR_WIRE_EMAGIC / -SMR_WIRE_EVERSION /
 * -SMR_WIRE_ELENGTH (shorter than SMR_CDC_LEN, or than the header plus
 * its inline data) / -SMR_WIRE_EFIELD (inline_len over SMR_CDC_INLINE_MAX)
 * / -SMR_WIRE_ETOKEN (token zero). The inline data is the @inline_len
 * bytes after the header; bytes past it are ignored. Cursor values are not
 * checked here: only the connection knows its ring (smr_cursor_to_count()).
 * Nor is @credits (any value parses): the link bounds what it accepts.
 */
int smr_cdc_parse(const u8 *buf, size_t len, struct smr_cdc *out);
/* Encode @cdc's header into SMR_CDC_LEN bytes at @buf (data not copied). */
void smr_cdc_build(const struct smr_cdc *cdc, u8 *buf);

/*
 * Cursors on the wire carry a 32-bit wrap count; both ends keep 64-bit
 * byte counts. smr_cursor_from_count() gives the cursor of byte count
 * @count in a ring of @size bytes (a power of two, at most 2^31).
 * smr_cursor_to_count() turns a peer's cursor back into a byte count,
 * trusting nothing: @prev is the last count accepted for this cursor and
 * @max the largest the peer may claim. Returns 0 and *@out with
 * @prev <= *@out <= @max, or -SMR_WIRE_EFIELD (offset not below @size,
 * cursor behind @prev or beyond @max, or @size not a power of two).
 */
void smr_cursor_from_count(u64 count, u32 size, struct smr_cdc_cursor *c);
int smr_cursor_to_count(const struct smr_cdc_cursor *c, u32 size, u64 prev,
			u64 max, u64 *out);

/*
 * ---- CDC receipt: the cursor rules ----
 *
 * What the receiver of a CDC knows of its connection, host order. Counts
 * are 64-bit byte counts that only grow (see smr_cursor_to_count()).
 */
struct smr_cdc_rx_view {
	u32	rmb_size;	/* our RMB, the peer writes into it: power of two */
	u32	peer_rmb_size;	/* the peer's RMB; 0 until we know it */
	u64	rx_prod;	/* bytes the peer wrote into our RMB so far */
	u64	rx_cons;	/* bytes we read from it */
	u64	tx_sent;	/* bytes we wrote into the peer's RMB */
	u64	tx_peer_cons;	/* bytes the peer read from its RMB so far */
	u16	rx_seq;		/* the last sequence number taken */
	u8	rx_seq_valid;	/* rx_seq is set: a CDC was taken */
	u8	peer_done;	/* the peer sent DONE_WRITING: no byte after rx_prod */
	u8	peer_final;	/* the peer sent CLOSED or ABORT: nothing follows */
};

/* The cursors of a CDC that passed smr_cdc_validate(), as byte counts. */
struct smr_cdc_rx_counts {
	u64	prod;		/* rx_prod <= prod <= rx_cons + rmb_size */
	u64	cons;		/* tx_peer_cons <= cons <= tx_sent */
	u64	urg;		/* with SMR_CDC_F_URGENT: rx_cons <= urg < prod */
};

/* smr_cdc_validate(): a sequence number already taken; not an error */
#define SMR_CDC_STALE		1

/*
 * Check a parsed CDC against what its receiver knows: the rules of
 * protocol.rst, in this order. Its sequence number must be newer than
 * @v->rx_seq (serial arithmetic), else SMR_CDC_STALE: ignore it. Nothing
 * may follow the peer's final: -SMR_WIRE_ESTATE. Then -SMR_WIRE_EFIELD
 * for: a producer cursor behind rx_prod or past rx_cons + rmb_size (the
 * peer may fill the RMB up to what we read), or moved after DONE_WRITING;
 * more inline data than the bytes it makes readable; a consumer cursor
 * behind tx_peer_cons or past tx_sent (only what we wrote can be read),
 * or non-zero before we know the peer's RMB; an urgent byte outside the
 * readable bytes [rx_cons, prod). Returns 0 and @out filled when the CDC
 * may be applied; @out is written only then. A CDC refused with an error
 * resets its connection.
 */
int smr_cdc_validate(const struct smr_cdc *cdc,
		     const struct smr_cdc_rx_view *v,
		     struct smr_cdc_rx_counts *out);

/* ---- link messages: IB SENDs on the link's QP that are not CDCs ---- */
#define SMR_LMSG_MAGIC		0x534d524bu	/* "SMRK" */
#define SMR_LMSG_VERSION	1
#define SMR_LMSG_LEN		8		/* version 1, exact */

/* A link message lands in a receive buffer posted for CDCs. */
#if SMR_LMSG_LEN > SMR_CDC_MAX_LEN
#error "a link message must fit a CDC receive buffer"
#endif

enum smr_lmsg_type {
	SMR_LMSG_CREDITS	= 1,	/* only returns credits */
	/* the sender has had no connection on the link: may it go? */
	SMR_LMSG_IDLE		= 2,
	SMR_LMSG_IDLE_YES	= 3,	/* nor has this end: the asker ends it */
	SMR_LMSG_IDLE_NO	= 4,	/* this end has one: the link stays */
	SMR_LMSG_TYPE_LAST	= SMR_LMSG_IDLE_NO,
};

struct smr_lmsg {
	u8	type;		/* enum smr_lmsg_type */
	u16	credits;	/* receives re-posted on the link, any value */
};

/*
 * Parse one link message of @len bytes. 0 and @out filled, or
 * -SMR_WIRE_ELENGTH (shorter than SMR_LMSG_LEN) / -SMR_WIRE_EMAGIC /
 * -SMR_WIRE_EVERSION / -SMR_WIRE_ETYPE (a type this version does not
 * know). Bytes past SMR_LMSG_LEN are ignored. @out is written only on
 * success.
 */
int smr_lmsg_parse(const u8 *buf, size_t len, struct smr_lmsg *out);
/* Encode @msg into SMR_LMSG_LEN bytes at @buf. */
void smr_lmsg_build(const struct smr_lmsg *msg, u8 *buf);

/* What a received SEND is, by its first 4 bytes (the magic). */
enum smr_msg_kind {
	SMR_MSG_UNKNOWN	= 0,	/* shorter than 4 bytes, or neither magic */
	SMR_MSG_CDC,		/* SMR_CDC_MAGIC: smr_cdc_parse() it */
	SMR_MSG_LINK,		/* SMR_LMSG_MAGIC: smr_lmsg_parse() it */
};

/* Only the magic is looked at: the parser of that kind checks the rest. */
enum smr_msg_kind smr_msg_kind(const u8 *buf, size_t len);

#endif /* _SMR_WIRE_H */
