/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: shared-memory sockets over RDMA - core socket state.
 *
 * Locking and lifetimes
 * ---------------------
 * struct smr_sock embeds the struct sock that the socket layer owns. A user
 * socket's file holds its reference until smr_release(); a server-side
 * child that is still negotiating (or waiting to be accepted) has no file
 * and is owned by its listener's lists until accept() grafts it.
 *
 * @tcp, the inner TCP socket, is set once before the SMR socket is visible
 * and released only when the SMR socket goes away, so syscall paths read it
 * without a lock. Data and connection work is delegated to it without
 * holding the SMR sock lock: blocking there must not stall others.
 *
 * The SMR sock lock (lock_sock) serialises the negotiation: @hs_state and
 * the hs_* fields are written by the handshake work and connect() under it.
 * @mode leaves SMR_MODE_PENDING exactly once, by cmpxchg, and @reason is
 * written before that; both are read locklessly. Byte counters are atomics.
 *
 * Inner sock callbacks (tcp_path.c) find the smr_sock through the inner
 * sk_user_data (tagged NOCOPY so that TCP's accepted children do not
 * inherit it), set and cleared under the inner sk_callback_lock.
 *
 * Listener: @accept_lock (BH-safe spinlock) protects @accept_pending,
 * @accept_ready, @accept_count, @accept_closing and every child's
 * @accept_node and @listener. A child holds a reference on its listener;
 * the listener's release cancels and frees children it still owns.
 * Work items and the handshake timer hold a reference on their sock while
 * queued or armed.
 */
#ifndef _SMR_H
#define _SMR_H

#include <linux/atomic.h>
#include <linux/in6.h>
#include <linux/list.h>
#include <linux/net.h>
#include <linux/timer.h>
#include <linux/workqueue.h>
#include <net/sock.h>
#include <linux/smr.h>

#include "wire.h"

enum smr_hs_state {
	SMR_HS_IDLE,		/* not negotiating */
	SMR_HS_CONNECTING,	/* client: inner TCP connect under way */
	SMR_HS_WAIT_ACCEPT,	/* client: PROPOSAL sent */
	SMR_HS_WAIT_PROPOSAL,	/* server child: answered the SYN */
	SMR_HS_WAIT_CONFIRM,	/* server child: ACCEPT sent */
	SMR_HS_WAIT_ACKED,	/* client: CONFIRM sent, until TCP acks it */
	SMR_HS_DONE,		/* decided: @mode is set */
};

/* The inner sock callbacks SMR hooks (tcp_path.c). */
enum smr_tcp_cb {
	SMR_TCP_CB_ERROR_REPORT,
	SMR_TCP_CB_DATA_READY,
	SMR_TCP_CB_STATE_CHANGE,
	SMR_TCP_CB_WRITE_SPACE,
	SMR_TCP_CB_MAX,
};

struct smr_sock {
	struct sock		sk;		/* must be first: smr_sk() casts */
	struct socket		*tcp;		/* inner TCP socket (see above) */
	/* inner sock's callbacks, restored in smr_tcp_release() */
	void			(*tcp_saved[SMR_TCP_CB_MAX])(struct sock *sk);
	/* error copied from the inner sock into sk.sk_err, not yet consumed */
	int			tcp_err_mirrored;
	u8			mode;		/* enum smr_mode */
	u8			reason;		/* enum smr_reason */
	u8			peer_reason;	/* enum smr_reason, from the peer */
	bool			connecting;	/* connect() was called */

	/* negotiation (handshake.c), under the sock lock */
	u8			hs_state;	/* enum smr_hs_state */
	bool			hs_wrote;	/* handshake bytes went out */
	bool			hs_timed_out;	/* set by the timer */
	u32			syn_nonce;	/* non-zero: the SYN offers */
	u64			local_token;
	u64			peer_token;
	u32			local_rmb_size;
	u32			peer_rmb_size;
	u32			hs_sent;	/* handshake messages */
	u32			hs_received;
	u32			hs_bytes_sent;
	u32			hs_bytes_received;
	struct work_struct	hs_work;
	struct timer_list	hs_timer;
	struct hlist_node	token_node;	/* in the host's token table */

	/* listener side (af_smr.c) */
	struct smr_sock		*listener;	/* child: until accepted */
	struct list_head	accept_node;	/* child: on a listener list */
	struct list_head	accept_pending;	/* listener: negotiating */
	struct list_head	accept_ready;	/* listener: for accept() */
	spinlock_t		accept_lock;
	unsigned int		accept_count;	/* pending + ready */
	unsigned int		accept_backlog;
	bool			accept_closing;
	bool			accept_plugged;	/* inner queue made to look full */
	struct work_struct	accept_work;	/* drains the inner queue */

	atomic64_t		bytes_sent;
	atomic64_t		bytes_received;
	atomic64_t		rdma_bytes_sent;
	atomic64_t		rdma_bytes_received;
};

static inline struct smr_sock *smr_sk(const struct sock *sk)
{
	return (struct smr_sock *)sk;
}

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
};

extern int smr_family;
extern struct workqueue_struct *smr_wq;

/* af_smr.c: the address family and its proto_ops */
int smr_proto_init(void);
void smr_proto_exit(void);
int smr_af_init(void);
void smr_af_exit(void);
void smr_set_mode(struct smr_sock *smr, enum smr_mode mode,
		  enum smr_reason reason);
void smr_child_decided(struct smr_sock *child);
void smr_child_aborted(struct smr_sock *child);
void smr_listener_stop(struct smr_sock *lsmr);

/* tcp_path.c: the inner TCP connection and the fallback data path */
int smr_tcp_create(struct smr_sock *smr, struct net *net, int protocol,
		   int kern);
void smr_tcp_attach(struct smr_sock *smr, struct socket *tcp);
void smr_tcp_redirect_wq(struct smr_sock *smr, struct socket *sock);
void smr_tcp_release(struct smr_sock *smr, bool reset);
void smr_tcp_hook_negotiation(struct smr_sock *smr, bool on);
void smr_tcp_hook_listener(struct smr_sock *smr);
bool smr_tcp_sock_is_smr(const struct sock *tsk);
struct smr_sock *smr_tcp_owner(const struct sock *tsk);
void smr_tcp_err_sync(struct smr_sock *smr);
void smr_tcp_err_consumed(struct smr_sock *smr, int ret);
bool smr_tcp_was_connected(const struct smr_sock *smr);
bool smr_tcp_all_acked(struct smr_sock *smr);
void smr_tcp_fresh_after_handshake(struct smr_sock *smr);
void smr_tcp_sync_bufs(struct smr_sock *smr);
void smr_tcp_sync_sockopts(struct smr_sock *smr);
#ifdef HAVE_SOCK_CUSTOM_SOCKOPT
static inline void smr_tcp_copy_sockopts(struct smr_sock *smr) { }
#else
void smr_tcp_copy_sockopts(struct smr_sock *smr);
#endif

/* tcp_option.c: the SMR TCP option and the negotiation records */
int smr_option_init(void);
void smr_option_exit(void);
void smr_tuple_of_sock(struct smr_tuple *t, const struct sock *sk);
enum smr_negot_result smr_negot_take(const struct smr_tuple *key, u8 role);
bool smr_rdma_dev_for_addr(struct net *net, const struct smr_tuple *t);

/* ib_dev.c: RDMA devices and their ports */
int smr_ib_init(void);
void smr_ib_exit(void);
int smr_ib_devices_show(struct seq_file *seq, void *v);

/* handshake.c: the negotiation over the TCP stream */
void smr_hs_init_sock(struct smr_sock *smr);
void smr_hs_client_prepare(struct smr_sock *smr);
void smr_hs_client_abandon(struct smr_sock *smr);
void smr_hs_server_start(struct smr_sock *child);
void smr_hs_kick(struct smr_sock *smr);
void smr_hs_stop(struct smr_sock *smr);
bool smr_hs_pending(const struct smr_sock *smr);
int smr_hs_wait(struct smr_sock *smr, long timeo);
void smr_hs_forget_token(struct smr_sock *smr);
int smr_hs_init(void);
void smr_hs_exit(void);
extern int smr_hs_timeout_ms;

/* stats.c: per-network-namespace counters, /proc/net/smr/stats */
enum smr_stat {
	SMR_STAT_SOCKETS_CREATED,
	SMR_STAT_SOCKETS_ACTIVE,
	SMR_STAT_LISTENS,
	SMR_STAT_CONNECTS,
	SMR_STAT_ACCEPTS,
	SMR_STAT_MODE_TCP,
	SMR_STAT_MODE_RDMA,
	SMR_STAT_TCP_BYTES_SENT,
	SMR_STAT_TCP_BYTES_RECEIVED,
	SMR_STAT_RDMA_BYTES_SENT,
	SMR_STAT_RDMA_BYTES_RECEIVED,
	SMR_STAT_HS_STARTED,		/* handshakes begun (client or server) */
	SMR_STAT_HS_COMPLETED,		/* PROPOSAL/ACCEPT/CONFIRM all done */
	SMR_STAT_HS_DECLINED,		/* a DECLINE sent or received */
	SMR_STAT_HS_ABORTED,		/* connection reset by the handshake */
	SMR_STAT_BAD_OPTIONS,		/* malformed SMR TCP options seen */
	SMR_STAT_NEGOT_RECORDS,		/* negotiation records held now */
	SMR_STAT_FALLBACK_FIRST,	/* one counter per enum smr_reason */
	SMR_STAT_MAX = SMR_STAT_FALLBACK_FIRST + SMR_REASON_MAX,
};

int smr_stats_init(void);
void smr_stats_exit(void);
void smr_stat_add(const struct net *net, enum smr_stat stat, s64 delta);

static inline void smr_stat_inc(const struct net *net, enum smr_stat stat)
{
	smr_stat_add(net, stat, 1);
}

#endif /* _SMR_H */
