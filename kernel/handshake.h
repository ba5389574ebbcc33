/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: the negotiation layer: the SMR TCP option and its records
 * (tcp_option.c) and the handshake over the TCP stream (handshake.c),
 * above the data path, below the socket ops.
 */
#ifndef _SMR_HANDSHAKE_H
#define _SMR_HANDSHAKE_H

#include <linux/in6.h>
#include <linux/smr.h>
#include <linux/types.h>

struct net;
struct sock;
struct sockaddr;
struct smr_sock;

/* A connection's addresses as its packets carry them (v4 as v4-mapped). */
struct smr_tuple {
	const struct net	*net;
	struct in6_addr		laddr;
	struct in6_addr		raddr;
	__be16			lport;
	__be16			rport;
	u8			family;		/* AF_INET or AF_INET6 */
};

/* What the option hooks saw for one connection. */
enum smr_negot_result {
	SMR_NEGOT_NONE,		/* no record */
	SMR_NEGOT_OFFERED,	/* client: SYN offered; server: SYN had an offer */
	SMR_NEGOT_ANSWERED,	/* both: a valid answer went/came back */
	SMR_NEGOT_NO_ANSWER,	/* client: SYN-ACK without the option */
	SMR_NEGOT_ECHOED,	/* client: SYN-ACK option failed the proof */
	SMR_NEGOT_COOKIE,	/* both: the listener used a SYN cookie */
	SMR_NEGOT_NO_SPACE,	/* the option did not fit */
	SMR_NEGOT_NO_DEVICE,	/* client: no RDMA device, no offer */
	SMR_NEGOT_PEER_NO_DEVICE, /* both: the listener has no RDMA device */
	SMR_NEGOT_LIMIT,	/* client: no record could be kept, no offer */
	SMR_NEGOT_PEER_NO_GRANTS, /* client: answered without LINK_REQUEST */
};

/* tcp_option.c: the SMR TCP option and the negotiation records */
int smr_option_init(void);
void smr_option_exit(void);
void smr_tuple_of_sock(struct smr_tuple *t, const struct sock *sk);
enum smr_negot_result smr_negot_take(const struct smr_tuple *key, u8 role);
enum smr_negot_result smr_negot_take_offer(struct smr_sock *smr,
					   const struct smr_tuple *key);

/* handshake.c: the negotiation over the TCP stream */
void smr_hs_init_sock(struct smr_sock *smr);
void smr_hs_client_prepare(struct smr_sock *smr, const struct sockaddr *addr,
			   int len);
void smr_hs_client_connect_failed(struct smr_sock *smr, int err);
void smr_hs_server_start(struct smr_sock *child);
void smr_hs_skip(struct smr_sock *child, enum smr_reason reason);
void smr_hs_stop(struct smr_sock *smr);

#endif /* _SMR_HANDSHAKE_H */
