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
 * @accept_ready, @accept_count, @accept_closing, @accept_phantoms and every
 * child's @accept_node and @listener. @pull_mutex serialises taking
 * connections off the inner queue (accept work, accept()) with the
 * listener's stop. A child holds a reference on its listener; the
 * listener's stop frees children it still owns.
 * Work items and the handshake timer hold a reference on their sock while
 * queued or armed.
 */
#ifndef _SMR_H
#define _SMR_H

#include <linux/atomic.h>
#include <linux/in6.h>
#include <linux/list.h>
#include <linux/net.h>
#include <linux/scatterlist.h>
#include <linux/timer.h>
#include <linux/workqueue.h>
#include <net/sock.h>
#include <linux/smr.h>

#include "wire.h"

struct seq_file;
struct ib_send_wr;
struct ib_device;
struct ib_pd;

enum smr_hs_state {
	SMR_HS_IDLE,		/* not negotiating */
	SMR_HS_CONNECTING,	/* client: inner TCP connect under way */
	SMR_HS_WAIT_ACCEPT,	/* client: PROPOSAL sent */
	SMR_HS_WAIT_PROPOSAL,	/* server child: answered the SYN */
	SMR_HS_WAIT_CONFIRM,	/* server child: ACCEPT sent */
	SMR_HS_WAIT_LINK,	/* client: the RDMA link to the peer comes up */
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

struct smr_link;
struct smr_buf;

/*
 * A connection's RDMA state. Cursors are 64-bit byte counts that only grow;
 * ring offsets are counts modulo the ring size (a power of two).
 *
 * @lock (BH-safe) protects the cursors, flags and @link_node; the buffers
 * and @link are set under the SMR sock lock *and* @lock before the mode
 * becomes RDMA and cleared the same way, so holders of either may use them.
 * Lock order: SMR sock lock, then @lock, then the link's lock.
 */
struct smr_conn {
	spinlock_t		lock;		/* see above */
	struct smr_link		*link;		/* holds a link reference */
	struct list_head	link_node;	/* on link->conns */
	struct list_head	wait_node;	/* on link->tx_wait */
	struct smr_buf		*sndbuf;	/* we copy into it, WRITE from it */
	struct smr_buf		*rmb;		/* the peer WRITEs into it */
	long			user_charged;	/* bytes charged to @charged_uid */
	kuid_t			charged_uid;	/* sk_uid when charged: it may change */
	u64			peer_rmb_addr;
	u32			peer_rmb_rkey;
	u32			peer_rmb_size;
	bool			peer_cdc_inline; /* takes data in CDCs */

	u64			tx_prod;	/* copied into sndbuf */
	u64			tx_sent;	/* RDMA WRITE posted */
	u64			tx_done;	/* WRITE completed: sndbuf free */
	u64			tx_peer_cons;	/* peer consumed of its RMB */
	u64			tx_urg;		/* urgent byte + 1, 0: none */
	u16			tx_seq;
	bool			tx_blocked;	/* told the peer we are blocked */
	bool			tx_fin;		/* shutdown(WR)/close: send DONE */
	bool			tx_fin_sent;
	bool			tx_close;	/* send CLOSED with the FIN */
	bool			tx_abort;	/* send ABORT */
	bool			tx_final_sent;	/* CLOSED or ABORT went out */
	bool			tx_queued;	/* on link->tx_wait */
	bool			tx_more;	/* last send had MSG_MORE */
	bool			tx_force;	/* cork timer fired: send all */
	bool			tx_grow;	/* larger ring once empty */
	bool			tx_grown;	/* sock lock: growth was tried */
	struct timer_list	cork_timer;	/* sends what a cork held back */
	struct timer_list	tcp_err_timer;	/* inner TCP failed: reset soon */
	struct timer_list	orphan_timer;	/* closed: peer's final overdue */
	int			tcp_err;

	u64			rx_prod;	/* peer wrote into our RMB */
	u64			rx_cons;	/* the application read */
	u64			rx_cons_sent;	/* last consumer cursor sent */
	u64			rx_fin;		/* EOF after this count */
	u64			rx_urg;		/* urgent byte + 1, 0: none */
	u16			rx_seq;
	bool			rx_seq_valid;
	bool			rx_peer_blocked;
	bool			rx_done;	/* peer: DONE_WRITING */
	bool			rx_final;	/* peer: CLOSED or ABORT */
	bool			rx_urg_read;	/* urgent byte taken by MSG_OOB */
	bool			rx_shut;	/* shutdown(SHUT_RD) here */
	u8			rx_urg_byte;

	bool			active;		/* set up: RDMA may flow */
	bool			reset;		/* aborted: ECONNRESET */
	bool			holds_sock;	/* @active took a sock reference */
	bool			user_closed;	/* the file is gone */
	bool			orphan_expired;	/* gave up on the peer's final */
	u8			abort_reason;	/* enum smr_conn_abort */
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
	u8			hs_unacked_waits; /* timeouts forgiven, PROPOSAL unacked */
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
	unsigned int		accept_phantoms; /* of those, counted in the inner queue */
	bool			accept_closing;
	struct mutex		pull_mutex;	/* see above */
	struct work_struct	accept_work;	/* drains the inner queue */

	atomic64_t		bytes_sent;
	atomic64_t		bytes_received;
	atomic64_t		rdma_bytes_sent;
	atomic64_t		rdma_bytes_received;

	struct smr_conn		conn;		/* the RDMA data path (conn.c) */
};

static inline struct smr_sock *smr_sk(const struct sock *sk)
{
	return (struct smr_sock *)sk;
}

/*
 * Sleep until @cond (sock lock held by the caller, dropped while asleep),
 * the timeout or a signal; wake-ups come through the SMR socket's queue.
 */
#define smr_wait_event(sk, timeo, cond)					\
	({								\
		DEFINE_WAIT_FUNC(__smr_wait, woken_wake_function);	\
		struct sock *__smr_sk = (sk);				\
		int __smr_rc;						\
									\
		add_wait_queue(sk_sleep(__smr_sk), &__smr_wait);	\
		__smr_rc = sk_wait_event(__smr_sk, timeo, cond,		\
					 &__smr_wait);			\
		remove_wait_queue(sk_sleep(__smr_sk), &__smr_wait);	\
		__smr_rc;						\
	})

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
};

extern int smr_family;
extern struct workqueue_struct *smr_wq;

/*
 * Queue @work on smr_wq for @sk; the work drops one sock reference when it
 * has run. The reference is taken before queue_work(), never after it
 * succeeded: on another CPU the work may already have run and put it. The
 * caller holds a reference of its own, so the put of a work that was
 * queued already is never the last.
 */
static inline void smr_sock_queue_work(struct sock *sk,
				       struct work_struct *work)
{
	sock_hold(sk);
	if (!queue_work(smr_wq, work))
		sock_put(sk);
}

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
int smr_accept(struct socket *sock, struct socket *newsock,
	       struct proto_accept_arg *arg);

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
bool smr_tcp_has_unacked(const struct smr_sock *smr);
void smr_tcp_fresh_after_handshake(struct smr_sock *smr);
void smr_tcp_sync_bufs(struct smr_sock *smr);
void smr_tcp_sync_sockopts(struct smr_sock *smr);

/* tcp_option.c: the SMR TCP option and the negotiation records */
int smr_option_init(void);
void smr_option_exit(void);
void smr_tuple_of_sock(struct smr_tuple *t, const struct sock *sk);
enum smr_negot_result smr_negot_take(const struct smr_tuple *key, u8 role);
bool smr_rdma_dev_for_addr(struct net *net, const struct smr_tuple *t);

/* link.c: RDMA links (one RC QP per peer) over rdma_cm */
enum smr_link_state {
	SMR_LINK_CONNECTING,
	SMR_LINK_ACTIVE,
	SMR_LINK_DEAD,
};

int smr_link_init(void);
void smr_link_exit(void);
struct smr_link *smr_link_get(struct smr_sock *smr, const struct smr_tuple *t);
struct smr_link *smr_link_find(struct smr_sock *smr, u32 id,
			       const struct smr_tuple *t);
void smr_link_put(struct smr_link *link);
void smr_link_hold(struct smr_link *link);
void smr_link_fail(struct smr_link *link, const char *why);
enum smr_link_state smr_link_state(const struct smr_link *link);
u32 smr_link_peer_id(const struct smr_link *link);
void smr_link_attach(struct smr_link *link, struct smr_sock *smr);
void smr_link_detach(struct smr_link *link, struct smr_sock *smr);
int smr_link_post_cdc(struct smr_link *link, struct smr_sock *smr,
		      struct ib_send_wr *writes, const struct smr_cdc *cdc,
		      const u8 *data, u64 tx_pos);
int smr_link_post_reg(struct smr_link *link, struct ib_send_wr *wr);
void smr_link_devices_gone(struct ib_device *ibdev);
int smr_links_show(struct seq_file *seq, void *v);
int smr_conns_show(struct seq_file *seq, void *v);
struct ib_pd *smr_link_pd(const struct smr_link *link);
struct smr_buf_pool *smr_link_pool(struct smr_link *link);
extern int smr_link_idle_ms;

/* buf.c: registered send buffers and RMBs, pooled per link */
struct smr_buf_pool {
	spinlock_t		lock;		/* protects @free, @nfree */
	struct list_head	free;		/* registered, unused buffers */
	unsigned int		nfree;
};

struct smr_buf {
	struct list_head	node;		/* on the pool's free list */
	void			*cpu;		/* the ring, virtually contiguous */
	u32			size;
	bool			remote;		/* RMB: remote write allowed */
	bool			registered;	/* MR valid: invalidate first */
	struct sg_table		sgt;
	int			nents;		/* DMA-mapped entries */
	struct ib_mr		*mr;
	struct ib_device	*dev;
};

void smr_buf_pool_init(struct smr_buf_pool *pool);
void smr_buf_pool_destroy(struct smr_buf_pool *pool);
struct smr_buf *smr_buf_get(struct smr_link *link, struct smr_buf_pool *pool,
			    u32 size, bool remote);
void smr_buf_put(struct smr_buf_pool *pool, struct smr_buf *buf);
void smr_buf_free(struct smr_buf *buf);
/* a WRITE reads the send ring in at most two pieces (its wrap) */
#define SMR_TX_WRITE_SGES	2
u32 smr_buf_size_for(int sockbuf);
u32 smr_buf_sndbuf_size(const struct sock *tsk);
extern long smr_buf_mem_max;
extern int smr_buf_max;
extern int smr_buf_wmem;
extern int smr_cdc_inline_max;
extern long smr_buf_mem_user_max;
int smr_buf_charge_user(kuid_t uid, long bytes);
void smr_buf_uncharge_user(kuid_t uid, long bytes);
extern atomic_long_t smr_buf_mem_used;

/* conn.c: a connection's RDMA life: setup, CDC handling, close, abort */
enum smr_conn_abort {
	SMR_ABORT_NONE,
	SMR_ABORT_PEER,			/* the peer reset the connection */
	SMR_ABORT_LINK,			/* the link failed */
	SMR_ABORT_BAD_CDC,		/* a CDC broke the rules */
	SMR_ABORT_LOCAL,		/* we reset it (SO_LINGER 0, unread data) */
	SMR_ABORT_TCP,			/* the inner TCP connection failed */
};

void smr_conn_init(struct smr_sock *smr);
int smr_conn_prepare(struct smr_sock *smr, struct smr_link *link);
void smr_conn_set_peer(struct smr_sock *smr, const struct smr_hs_rmb *rmb);
void smr_conn_fill_rmb(struct smr_sock *smr, struct smr_hs_rmb *rmb);
void smr_conn_start(struct smr_sock *smr);
void smr_conn_unprepare(struct smr_sock *smr);
void smr_conn_cdc_recv(struct smr_link *link, const struct smr_cdc *cdc,
		       const u8 *data);
void smr_conn_link_down(struct smr_sock *smr);
void smr_conn_sent(struct smr_sock *smr, u64 tx_pos, bool ok);
void smr_conn_abort(struct smr_sock *smr, enum smr_conn_abort why);
bool smr_conn_close(struct smr_sock *smr);
bool smr_conn_done_locked(struct smr_conn *conn);
void smr_conn_put_hold(struct smr_sock *smr);
void smr_conn_arm_orphan_timer(struct smr_sock *smr);
extern int smr_orphan_timeout_ms;
void smr_conn_reset_locked(struct smr_sock *smr, int err);
void smr_conn_destruct(struct smr_sock *smr);
bool smr_conn_is_rdma(const struct smr_sock *smr);
void smr_conn_wake(struct smr_sock *smr, __poll_t mask);
void smr_conn_write_space(struct smr_sock *smr);
void smr_conn_tcp_failed(struct smr_sock *smr, int err);
void smr_conn_disconnect(struct smr_sock *smr);
void smr_conn_stop_timers(struct smr_sock *smr);

/* tx.c / rx.c: the RDMA data path behind the socket calls */
int smr_tx_sendmsg(struct smr_sock *smr, struct msghdr *msg, size_t len);
void smr_tx_push(struct smr_sock *smr);
void smr_tx_cork_expired(struct timer_list *t);
int smr_tx_shutdown(struct smr_sock *smr);
int smr_tx_wait_sent(struct smr_sock *smr, long timeo);
bool smr_tx_writable_locked(const struct smr_conn *conn);
bool smr_rx_cons_update_due(const struct smr_conn *conn);
int smr_rx_recvmsg(struct smr_sock *smr, struct msghdr *msg, size_t len,
		   int flags);
__poll_t smr_rx_poll(struct smr_sock *smr);
int smr_rx_ioctl(struct smr_sock *smr, unsigned int cmd, unsigned long arg);
void smr_rx_shutdown(struct smr_sock *smr);

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
struct smr_sock *smr_hs_token_lookup(u64 token);
extern int smr_hs_timeout_ms;

/* sysctl.c: net.smr.* */
int smr_sysctl_init(void);
void smr_sysctl_exit(void);

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
	SMR_STAT_LINKS_CREATED,		/* RDMA links set up (either side) */
	SMR_STAT_LINKS_DESTROYED,
	SMR_STAT_LINKS_FAILED,		/* links that died in error */
	SMR_STAT_CDC_SENT,
	SMR_STAT_CDC_RECEIVED,
	SMR_STAT_CDC_STALE,		/* ignored: old sequence number */
	SMR_STAT_CDC_BAD,		/* malformed or unknown connection */
	SMR_STAT_CONN_ABORT_BAD_CDC,	/* connections aborted for a bad CDC */
	SMR_STAT_CONN_ABORT_LINK,	/* connections lost with their link */
	SMR_STAT_CONN_ABORT_PEER,	/* connections the peer reset */
	SMR_STAT_BUF_ALLOCATED,		/* buffers registered */
	SMR_STAT_BUF_REUSED,		/* buffers taken from a pool */
	SMR_STAT_BUF_REGISTERED,	/* memory registrations (REG_MR) */
	SMR_STAT_SNDBUF_GROWN,		/* send rings a writer outgrew */
	SMR_STAT_BUF_MEM_LIMIT,		/* refused: net.smr.mem_max reached */
	SMR_STAT_BUF_USER_LIMIT,	/* refused: net.smr.mem_user_max */
	SMR_STAT_CDC_INLINE_SENT,	/* CDCs that carried the data */
	SMR_STAT_CDC_INLINE_RECEIVED,
	SMR_STAT_CREDIT_MSGS_SENT,	/* link messages returning credits */
	SMR_STAT_CDC_WAITS,		/* CDCs that waited for a slot or credit */
	SMR_STAT_ORPHANS_EXPIRED,	/* closed conns freed by orphan_timeout_ms */
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
