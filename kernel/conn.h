/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: the connection layer, a connection's data path over RDMA (conn.c,
 * close.c, tx.c, rx.c, cdc.c), above the link. It reaches the link through
 * link.h and hands the link its callbacks (smr_conn_link_ops); the layers
 * above reach it through this header.
 */
#ifndef _SMR_CONN_H
#define _SMR_CONN_H

#include <linux/in6.h>
#include <linux/poll.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/types.h>
#include <linux/uidgid.h>

#include "buf.h"
#include "link.h"
#include "wire.h"

struct msghdr;
struct seq_file;
struct smr_sock;

/*
 * An RDMA connection's life, the close state machine; close.c makes every
 * transition, under the connection's lock (diagram: design.rst, "Close").
 * Where the application still holds the socket, and whether the
 * connection holds its sock (from smr_conn_start() until the finals are
 * exchanged, given up on, or the link is gone), follow from the state.
 */
enum smr_conn_state {
	SMR_CONN_INIT,		/* the handshake prepares it: no CDC yet */
	SMR_CONN_ACTIVE,	/* open both ways */
	SMR_CONN_WR_SHUT,	/* shutdown(SHUT_WR): DONE_WRITING after our data */
	SMR_CONN_RESET,		/* reset, the application still has it */
	SMR_CONN_CLOSING,	/* closed: DONE|CLOSED after our data, then the peer's final */
	SMR_CONN_RESET_CLOSED,	/* reset and closed: our final, then the peer's */
	SMR_CONN_ORPHANED,	/* closed, the peer's final overdue: ours, then done */
	SMR_CONN_DEAD,		/* over without its finals, the application still has it */
	SMR_CONN_DONE,		/* over and closed */
};

/* Who reset a connection (SMR_ABORT_NONE: nobody, it is not reset). */
enum smr_conn_abort {
	SMR_ABORT_NONE,
	SMR_ABORT_PEER,			/* the peer reset or closed on us */
	SMR_ABORT_LINK,			/* the link failed */
	SMR_ABORT_BAD_CDC,		/* a CDC broke the rules */
	SMR_ABORT_LOCAL,		/* we reset it (SO_LINGER 0, unread data) */
	SMR_ABORT_TCP,			/* the inner TCP connection failed */
};

/*
 * A connection's RDMA state. Cursors are 64-bit byte counts that only grow;
 * ring offsets are counts modulo the ring size (a power of two).
 *
 * @lock (BH-safe) protects every field not marked otherwise. The buffers
 * and @link are set under the SMR sock lock *and* @lock before the mode
 * becomes RDMA and cleared the same way, so holders of either may use them.
 * Fields marked "sock lock" are the writer's (sendmsg) alone. Lock order:
 * SMR sock lock, then @lock, then the link's lock.
 */
struct smr_conn {
	spinlock_t		lock;		/* see above */
	u8			state;		/* enum smr_conn_state */
	u8			abort_reason;	/* enum smr_conn_abort */
	u8			tx_flags;	/* DONE_WRITING/CLOSED/ABORT we sent */
	u8			rx_flags;	/* the peer's: DONE_WRITING (EOF), CLOSED (final) */
	struct smr_link		*link;		/* holds a link reference */
	struct smr_link_user	link_user;	/* the link's lock */
	struct smr_buf		*sndbuf;	/* we copy into it, WRITE from it */
	struct smr_buf		*sndbuf_next;	/* grown: @sndbuf once it is empty */
	struct smr_buf		*rmb;		/* the peer WRITEs into it */
	long			user_charged;	/* bytes charged to @charged_uid */
	kuid_t			charged_uid;	/* sk_uid when charged: it may change */
	/*
	 * Set before the handshake and never changed: the memory cgroup the
	 * buffers are allocated in (a css reference; NULL: the allocating
	 * task's) and a server child's peer key. A server child's @unacc is
	 * its listener's account of unaccepted children (a reference), until
	 * accept() clears it under @lock. A listener's own account is
	 * @children_acct (made under its pull_mutex, kept for its life).
	 */
	struct mem_cgroup	*memcg;
	struct smr_buf_acct	*unacc;
	struct in6_addr		unacc_key;
	long			unacc_charged;	/* bytes charged to @unacc */
	struct smr_buf_acct	*children_acct;
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
	bool			tx_more;	/* last send had MSG_MORE */
	bool			tx_force;	/* cork timer fired: send all */
	bool			tx_grown;	/* sock lock: growth was tried */
	/*
	 * The send ring's growth (tx.c): its work gets @sndbuf_next without
	 * the sock lock, from @grow_link (a reference), @grow_size bytes
	 * (charged): both set before it is queued, read by it alone.
	 */
	struct work_struct	grow_work;
	struct smr_link		*grow_link;
	u32			grow_size;
	struct timer_list	cork_timer;	/* sends what a cork held back */
	struct timer_list	tcp_err_timer;	/* inner TCP failed: reset soon */
	struct timer_list	orphan_timer;	/* closed: peer's final overdue */
	int			tcp_err;	/* atomic: the inner TCP's error */

	u64			rx_prod;	/* peer wrote into our RMB */
	u64			rx_cons;	/* the application read */
	u64			rx_cons_sent;	/* last consumer cursor sent */
	u64			rx_fin;		/* EOF after this count */
	u64			rx_urg;		/* urgent byte + 1, 0: none */
	u16			rx_seq;
	bool			rx_seq_valid;
	bool			rx_peer_blocked;
	bool			rx_urg_read;	/* urgent byte taken by MSG_OOB */
};

/* ---- the close state, read under conn->lock (or READ_ONCE, racily) ---- */

/* The connection was reset (by either side, the link or its TCP). */
static inline bool smr_conn_is_reset(const struct smr_conn *conn)
{
	return READ_ONCE(conn->abort_reason) != SMR_ABORT_NONE;
}

/* CDCs are accepted: smr_conn_start() ran. */
static inline bool smr_conn_started(const struct smr_conn *conn)
{
	return conn->state != SMR_CONN_INIT;
}

/* The application closed its socket (smr_close_app()). */
static inline bool smr_conn_app_closed(const struct smr_conn *conn)
{
	switch (conn->state) {
	case SMR_CONN_CLOSING:
	case SMR_CONN_RESET_CLOSED:
	case SMR_CONN_ORPHANED:
	case SMR_CONN_DONE:
		return true;
	default:
		return false;
	}
}

/* The connection holds a reference on its sock (see enum smr_conn_state). */
static inline bool smr_conn_holds_sock(u8 state)
{
	switch (state) {
	case SMR_CONN_ACTIVE:
	case SMR_CONN_WR_SHUT:
	case SMR_CONN_RESET:
	case SMR_CONN_CLOSING:
	case SMR_CONN_RESET_CLOSED:
	case SMR_CONN_ORPHANED:
		return true;
	default:
		return false;
	}
}

/* Our writing is shut (not reset): DONE_WRITING goes after the last byte. */
static inline bool smr_conn_fin_owed(const struct smr_conn *conn)
{
	return conn->state == SMR_CONN_WR_SHUT ||
	       conn->state == SMR_CONN_CLOSING;
}

/* The peer said DONE_WRITING (or closed): EOF after @rx_fin. */
static inline bool smr_conn_peer_done(const struct smr_conn *conn)
{
	return READ_ONCE(conn->rx_flags) & SMR_CDC_F_DONE_WRITING;
}

/* The peer sent its final CDC (CLOSED or ABORT): nothing follows it. */
static inline bool smr_conn_peer_final(const struct smr_conn *conn)
{
	return READ_ONCE(conn->rx_flags) & SMR_CDC_F_CLOSED;
}

/* Our final CDC (CLOSED or ABORT) went out: nothing follows it. */
static inline bool smr_conn_final_sent(const struct smr_conn *conn)
{
	return conn->tx_flags & SMR_CDC_F_CLOSED;
}

/* Whether this side reset the connection, and owes an ABORT for it. */
static inline bool smr_conn_reset_here(const struct smr_conn *conn)
{
	return conn->abort_reason == SMR_ABORT_LOCAL ||
	       conn->abort_reason == SMR_ABORT_BAD_CDC ||
	       conn->abort_reason == SMR_ABORT_TCP;
}

/*
 * The flags of the final CDC this side owes (0: none yet): an ABORT (sent
 * with CLOSED) once it reset the connection, else CLOSED once the
 * application closed (after the last byte unless the connection is reset)
 * or the connection ended early (DEAD).
 */
static inline u8 smr_conn_final_owed(const struct smr_conn *conn)
{
	u8 abort = SMR_CDC_F_ABORT | SMR_CDC_F_CLOSED;

	switch (conn->state) {
	case SMR_CONN_INIT:
	case SMR_CONN_ACTIVE:
	case SMR_CONN_WR_SHUT:
		return 0;
	case SMR_CONN_RESET:
		return smr_conn_reset_here(conn) ? abort : 0;
	case SMR_CONN_CLOSING:
		return SMR_CDC_F_CLOSED;
	case SMR_CONN_DEAD:	/* over early: the peer may wait for it */
	case SMR_CONN_RESET_CLOSED:
	case SMR_CONN_ORPHANED:
	case SMR_CONN_DONE:
		return smr_conn_reset_here(conn) ? abort : SMR_CDC_F_CLOSED;
	}
	return 0;
}

/*
 * Whether the consumer cursor should go to the peer on its own (a CDC of
 * ours that goes anyway carries it too): the peer said it is blocked, or a
 * quarter of the ring was read since the last report while the writer,
 * going by what it was told, sees at most half of it free. Caller holds
 * conn->lock.
 */
static inline bool smr_conn_cons_update_due(const struct smr_conn *conn)
{
	u32 size = conn->rmb->size;
	u64 unreported = conn->rx_cons - conn->rx_cons_sent;
	/* what the writer can know is free: it saw only rx_cons_sent */
	u64 peer_free = size - (conn->rx_prod - conn->rx_cons_sent);

	lockdep_assert_held(&conn->lock);
	if (!unreported)
		return false;
	return conn->rx_peer_blocked ||
	       (unreported >= size / 4 && peer_free <= size / 2);
}

/* conn.c: the connection object, its buffers and its token */
void smr_conn_set_link(struct smr_sock *smr, struct smr_link *link);
int smr_conn_prepare(struct smr_sock *smr, struct smr_link *link);
void smr_conn_set_peer(struct smr_sock *smr, const struct smr_hs_rmb *rmb);
void smr_conn_fill_rmb(struct smr_sock *smr, struct smr_hs_rmb *rmb);
void smr_conn_take(struct smr_sock *smr, struct smr_link **link,
		   struct smr_buf **rmb, struct smr_buf **sndbuf,
		   struct smr_buf **sndbuf_next);
void smr_conn_give_back(struct smr_sock *smr);
void smr_conn_destruct(struct smr_sock *smr);
void smr_conn_owner_init(struct smr_sock *smr);
int smr_conn_child_init(struct smr_sock *child, struct smr_sock *listener,
			const struct in6_addr *peer, bool v6);
void smr_conn_accepted(struct smr_sock *child);
void smr_conn_wake_sleepers(struct smr_sock *smr, __poll_t mask);
void smr_conn_wake(struct smr_sock *smr, __poll_t mask);
u64 smr_conn_new_token(struct smr_sock *smr);
struct smr_sock *smr_conn_lookup_token(u64 token);
int smr_conns_show(struct seq_file *seq, void *v);

/* close.c: the close state machine */
void smr_close_notify(struct smr_sock *smr, __poll_t mask, bool reset);
void smr_close_start(struct smr_sock *smr);
bool smr_close_ready(struct smr_sock *smr);
void smr_close_shutdown_wr(struct smr_sock *smr);
void smr_close_shutdown_rd(struct smr_sock *smr);
bool smr_close_app(struct smr_sock *smr);
bool smr_close_app_done(struct smr_sock *smr);
bool smr_close_abort(struct smr_sock *smr, enum smr_conn_abort why);
void smr_close_reset_locked(struct smr_sock *smr, int err,
			    enum smr_conn_abort why);
bool smr_close_peer_flags_locked(struct smr_sock *smr, u8 flags, u64 prod,
				 __poll_t *wake);
bool smr_close_refuses_data_locked(struct smr_sock *smr, u8 flags);
void smr_close_early_abort_locked(struct smr_sock *smr);
bool smr_close_done_locked(struct smr_conn *conn);
void smr_close_put_hold(struct smr_sock *smr);
void smr_close_link_down(struct smr_sock *smr);
bool smr_close_unprepare(struct smr_sock *smr);
bool smr_close_orphan_expired(struct smr_sock *smr, struct smr_link **fail);
void smr_close_orphan_rearm(struct smr_sock *smr);
void smr_close_stop_timers(struct smr_sock *smr);

/* tx.c: sending */
int smr_tx_sendmsg(struct smr_sock *smr, struct msghdr *msg, size_t len);
void smr_tx_push(struct smr_sock *smr);
void smr_tx_cork_expired(struct timer_list *t);
void smr_tx_grow_work(struct work_struct *work);
void smr_tx_drop_grown(struct smr_sock *smr);
int smr_tx_wait_sent(struct smr_sock *smr, long timeo);
bool smr_tx_writable_locked(const struct smr_conn *conn);
void smr_tx_write_space(struct smr_sock *smr);

/* rx.c: receiving */
int smr_rx_recvmsg(struct smr_sock *smr, struct msghdr *msg, size_t len,
		   int flags);
ssize_t smr_rx_splice_read(struct smr_sock *smr, struct socket *sock,
			   loff_t *ppos, struct pipe_inode_info *pipe,
			   size_t len, unsigned int flags);
__poll_t smr_rx_poll(struct smr_sock *smr);
void smr_rx_lowat_changed(struct smr_sock *smr);
int smr_rx_ioctl(struct smr_sock *smr, unsigned int cmd, unsigned long arg);

/* cdc.c: what happens to a connection: CDCs, completions, link, timers */
extern const struct smr_link_ops smr_conn_link_ops;
void smr_conn_init(struct smr_sock *smr);
void smr_conn_unprepare(struct smr_sock *smr);
void smr_conn_abort(struct smr_sock *smr, enum smr_conn_abort why);
void smr_conn_tcp_failed(struct smr_sock *smr, int err);

#endif /* _SMR_CONN_H */
