/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: shared-memory sockets over RDMA - the core socket structure, for
 * the connection layer and the layers above it (the layers below never
 * see a socket). Each layer's functions are declared in its own header
 * (Documentation/design.rst, "Layers").
 *
 * Locking and lifetimes
 * ---------------------
 * struct smr_sock embeds the struct sock that the socket layer owns. A user
 * socket's file holds its reference until smr_release(); a server-side
 * child that is still negotiating (or waiting to be accepted) has no file
 * and is owned by its listener's lists until accept() grafts it (under
 * the child's sock lock).
 *
 * @tcp, the inner TCP socket, is set once before the SMR socket is visible
 * and released only when the SMR socket goes away, so syscall paths read it
 * without a lock. Data and connection work is delegated to it without
 * holding the SMR sock lock: blocking there must not stall others.
 *
 * The SMR sock lock (lock_sock) serialises the negotiation: @hs_state and
 * the hs_* fields are written by the handshake work and connect() under it
 * (@hs_state with release semantics when the negotiation ends, read
 * locklessly with acquire: smr_hs_pending()). @mode leaves
 * SMR_MODE_PENDING exactly once, by cmpxchg, and @reason is written before
 * that; both are read locklessly. @transport is written (WRITE_ONCE) when
 * the mode is decided and the negotiation is over, before @hs_state says
 * so; it is read locklessly. Byte counters are atomics.
 *
 * Inner sock callbacks (tcp_path.c) find the smr_sock through the inner
 * sk_user_data (tagged NOCOPY so that TCP's accepted children do not
 * inherit it), set and cleared under the inner sk_callback_lock, which
 * also protects @tcp_saved.
 *
 * Tokens: @local_token and @token_node are under smr_token_lock (conn.c)
 * from the moment a token is drawn until the sock is destroyed.
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
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/net.h>
#include <linux/timer.h>
#include <linux/workqueue.h>
#include <net/sock.h>
#include <linux/smr.h>

#include "conn.h"

struct smr_transport;

enum smr_hs_state {
	SMR_HS_IDLE,		/* not negotiating */
	SMR_HS_CONNECTING,	/* client: inner TCP connect under way */
	SMR_HS_WAIT_ACCEPT,	/* client: PROPOSAL sent */
	SMR_HS_WAIT_PROPOSAL,	/* server child: answered the SYN */
	SMR_HS_WAIT_CONFIRM,	/* server child: ACCEPT sent */
	SMR_HS_WAIT_LINK,	/* client: the RDMA link to the peer comes up */
	SMR_HS_WAIT_GRANT,	/* client: LINK_REQUEST sent for a new link */
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
	bool			connecting;	/* sock lock: connect() was called */
	/* the data path the socket ops call (transport.c) */
	const struct smr_transport *transport;

	/* negotiation (handshake.c), under the sock lock */
	u8			hs_state;	/* enum smr_hs_state */
	bool			hs_wrote;	/* handshake bytes went out */
	bool			hs_timed_out;	/* atomic: set by the timer */
	unsigned long		hs_deadline;	/* jiffies: this step's end, sock lock */
	u8			hs_unacked_waits; /* timeouts forgiven, PROPOSAL unanswered */
	/*
	 * atomic: non-zero, the SYN offers; set by connect(), cleared by the
	 * SYN hook when a bound on the negotiation records refuses the offer
	 */
	u32			syn_nonce;
	u64			local_token;	/* smr_token_lock (see above) */
	u64			peer_token;
	u32			local_rmb_size;
	u32			peer_rmb_size;
	u32			hs_sent;	/* handshake messages */
	u32			hs_received;
	u32			hs_bytes_sent;
	u32			hs_bytes_received;
	struct work_struct	hs_work;
	struct timer_list	hs_timer;
	struct hlist_node	token_node;	/* smr_token_lock: the token table */
	/*
	 * Set by the listener for its children, called under the child's
	 * sock lock when the negotiation ended (@reset: it reset the
	 * connection); NULL for a client, whose waiters are woken instead.
	 */
	void			(*hs_decided)(struct smr_sock *smr, bool reset);

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

	/* sock lock: tasks in splice_read() in RDMA mode (rx.c) */
	struct list_head	rx_splicers;

	struct smr_conn		conn;		/* the RDMA data path (conn.h) */
};

static inline struct smr_sock *smr_sk(const struct sock *sk)
{
	return (struct smr_sock *)sk;
}

static inline struct smr_sock *smr_of_conn(struct smr_conn *conn)
{
	return container_of(conn, struct smr_sock, conn);
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

/* the module's workqueue for socket work (main.c) */
extern struct workqueue_struct *smr_wq;
/*
 * and for send rings' growth (tx.c), which waits on its link: its own, so
 * that no number of them delays a handshake, and unlimited, so that one
 * busy link's never delay another's (its teardown waits for them)
 */
extern struct workqueue_struct *smr_tx_wq;

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

/* A negotiation is under way: the mode is not decided for the application. */
static inline bool smr_hs_pending(const struct smr_sock *smr)
{
	/* pairs with the handshake's release of DONE (smr_hs_set_done()) */
	u8 state = smp_load_acquire(&smr->hs_state);

	return state != SMR_HS_IDLE && state != SMR_HS_DONE;
}

/* Softirq or process context: let the handshake work look again. */
static inline void smr_hs_kick(struct smr_sock *smr)
{
	if (smr_hs_pending(smr))
		smr_sock_queue_work(&smr->sk, &smr->hs_work);
}

#endif /* _SMR_H */
