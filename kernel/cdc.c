// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: what happens to a connection from below and from its timers: CDC
 * messages from the peer, the completion of ours, the link's events (room
 * to send again, up, down), the inner TCP connection's failure and the
 * orphan timeout. The link reaches these through smr_conn_link_ops, which
 * the module registers with it at init.
 *
 * Each end writes into the other's RMB with RDMA WRITE and then sends a CDC
 * message (IB SEND on the same QP, so it arrives after the data) carrying
 * its producer cursor (how far it wrote into the peer's RMB), its consumer
 * cursor (how far it read its own RMB: the peer may overwrite up to there)
 * and flags. A received CDC is first checked against every rule by the
 * pure validator (wire.c's smr_cdc_validate()) and only then applied
 * (smr_cdc_apply_locked()); one that breaks a rule resets the connection
 * (counted in cdc_bad / conn_abort_bad_cdc), never more.
 *
 * Locking and lifetimes
 * ---------------------
 * See struct smr_conn (conn.h). CDCs are handled in the CQ's softirq under
 * conn->lock; the sock is found through its token (conn.c) with a
 * reference taken only if it is not already being destroyed. Wake-ups and
 * pushes run after conn->lock is dropped. The timers hold a sock reference
 * while armed (sk_reset_timer()), the link's references on the sock are
 * taken and dropped through smr_conn_link_ops.
 */
#include <linux/net.h>
#include <linux/poll.h>
#include <net/sock.h>

#include "smr.h"
#include "stats.h"

/* the inner TCP connection failed: its peer's ABORT may come this late */
#define SMR_TCP_ERR_GRACE	(HZ / 5)

static void smr_conn_tcp_err_expired(struct timer_list *t);
static void smr_conn_orphan_expired(struct timer_list *t);

void smr_conn_init(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;

	spin_lock_init(&conn->lock);
	conn->state = SMR_CONN_INIT;
	INIT_LIST_HEAD(&conn->link_user.node);
	INIT_LIST_HEAD(&conn->link_user.wait_node);
	INIT_HLIST_NODE(&smr->token_node);
	timer_setup(&conn->cork_timer, smr_tx_cork_expired, 0);
	timer_setup(&conn->tcp_err_timer, smr_conn_tcp_err_expired, 0);
	timer_setup(&conn->orphan_timer, smr_conn_orphan_expired, 0);
	INIT_WORK(&conn->grow_work, smr_tx_grow_work);
}

/*
 * Reset the connection from this side (@why); the peer gets an ABORT.
 * Any context, no lock held.
 */
void smr_conn_abort(struct smr_sock *smr, enum smr_conn_abort why)
{
	if (smr_close_abort(smr, why))
		smr_tx_push(smr);
}

/*
 * The handshake ended without RDMA, or the socket went before it ended:
 * give back what it took (smr_close_unprepare()). Idempotent.
 */
void smr_conn_unprepare(struct smr_sock *smr)
{
	if (smr_close_unprepare(smr))
		smr_tx_push(smr);	/* the ABORT, if CDCs were allowed */
}

/* ---- timers ---- */

static void smr_conn_tcp_err_expired(struct timer_list *t)
{
	struct smr_sock *smr = from_timer(smr, t, conn.tcp_err_timer);
	int err = READ_ONCE(smr->conn.tcp_err);

	if (!READ_ONCE(smr->sk.sk_err) && !smr_conn_is_reset(&smr->conn))
		WRITE_ONCE(smr->sk.sk_err, err);
	smr_conn_abort(smr, SMR_ABORT_TCP);
	sock_put(&smr->sk);	/* the timer's reference */
}

/*
 * The inner TCP connection failed (reset, keepalive timeout) while RDMA
 * carries the bytes. A peer's reset comes with an ABORT CDC that may still
 * be behind the RST (different paths): give it a moment, so that data
 * written before it is read first, then reset with TCP's error.
 */
void smr_conn_tcp_failed(struct smr_sock *smr, int err)
{
	if (smr_conn_is_reset(&smr->conn))
		return;
	WRITE_ONCE(smr->conn.tcp_err, err);
	if (!timer_pending(&smr->conn.tcp_err_timer))
		sk_reset_timer(&smr->sk, &smr->conn.tcp_err_timer,
			       jiffies + SMR_TCP_ERR_GRACE);
}

/* See smr_close_orphan_expired(). Softirq. */
static void smr_conn_orphan_expired(struct timer_list *t)
{
	struct smr_sock *smr = from_timer(smr, t, conn.orphan_timer);
	struct smr_link *link;

	if (smr_close_orphan_expired(smr, &link)) {
		smr_tx_push(smr);	/* our final, if still owed */
		smr_close_orphan_rearm(smr);
	}
	if (link) {
		smr_link_fail(link, "orphan's final CDC cannot leave");
		smr_link_put(link);
	}
	sock_put(&smr->sk);	/* the timer's reference */
}

/* ---- CDCs in ---- */

/* What the connection knows, for the validator. Caller holds conn->lock. */
static void smr_cdc_view(const struct smr_conn *conn,
			 struct smr_cdc_rx_view *v)
{
	lockdep_assert_held(&conn->lock);
	memset(v, 0, sizeof(*v));
	v->rmb_size = conn->rmb->size;
	v->peer_rmb_size = conn->peer_rmb_size;
	v->rx_prod = conn->rx_prod;
	v->rx_cons = conn->rx_cons;
	v->tx_sent = conn->tx_sent;
	v->tx_peer_cons = conn->tx_peer_cons;
	v->rx_seq = conn->rx_seq;
	v->rx_seq_valid = conn->rx_seq_valid;
	v->peer_done = smr_conn_peer_done(conn);
	v->peer_final = smr_conn_peer_final(conn);
}

/*
 * Bytes a CDC carried go into the RMB where a WRITE would have put them,
 * before the producer cursor that makes them readable moves.
 */
static void smr_cdc_place_inline(struct smr_conn *conn, u64 pos,
				 const u8 *data, u32 len)
{
	u32 size = conn->rmb->size, off = pos & (size - 1);
	u32 first = min(len, size - off);

	memcpy(conn->rmb->cpu + off, data, first);
	memcpy(conn->rmb->cpu, data + first, len - first);
}

/*
 * Apply a CDC that passed the validator (@c: its cursors as counts): its
 * data becomes readable, the peer's consumer cursor frees our ring, its
 * urgent byte and flags take effect. Adds the wake-up to @wake; returns
 * true if a CDC of ours is owed now. Caller holds conn->lock.
 */
static bool smr_cdc_apply_locked(struct smr_sock *smr,
				 const struct smr_cdc *cdc,
				 const struct smr_cdc_rx_counts *c,
				 const u8 *data, __poll_t *wake, bool *sigurg)
{
	struct smr_conn *conn = &smr->conn;
	bool push = false;

	lockdep_assert_held(&conn->lock);
	if (cdc->inline_len) {
		smr_cdc_place_inline(conn, c->prod - cdc->inline_len, data,
				     cdc->inline_len);
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_CDC_INLINE_RECEIVED);
	}
	if (c->prod != conn->rx_prod) {
		WRITE_ONCE(conn->rx_prod, c->prod);	/* smr_rx_readable() */
		*wake |= EPOLLIN | EPOLLRDNORM;
	}
	if (c->cons != conn->tx_peer_cons) {
		conn->tx_peer_cons = c->cons;
		push = true;
	}
	if (cdc->flags & SMR_CDC_F_URGENT && c->urg + 1 != conn->rx_urg) {
		conn->rx_urg = c->urg + 1;
		conn->rx_urg_read = false;
		*sigurg = true;
		*wake |= EPOLLPRI | EPOLLRDBAND;
	}
	conn->rx_peer_blocked = cdc->flags & SMR_CDC_F_WRITE_BLOCKED;
	if (conn->rx_peer_blocked && conn->rx_cons != conn->rx_cons_sent)
		push = true;
	if (smr_close_peer_flags_locked(smr, cdc->flags, c->prod, wake))
		push = true;
	return push;
}

/*
 * A CDC for this host arrived on @link, parsed (@data: its inline bytes).
 * Softirq. The validator checks every value before anything changes; a
 * bad one resets the connection.
 */
static void smr_cdc_recv(struct smr_link *link, const struct smr_cdc *cdc,
			 const u8 *data)
{
	struct smr_cdc_rx_counts c;
	struct smr_cdc_rx_view view;
	bool push, put, sigurg = false;
	struct smr_sock *smr;
	struct smr_conn *conn;
	__poll_t wake = 0;
	int verdict;

	smr = smr_conn_lookup_token(cdc->token);
	if (!smr) {
		smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
		return;
	}
	conn = &smr->conn;

	spin_lock_bh(&conn->lock);
	if (conn->link == link && !smr_conn_started(conn) &&
	    !conn->rx_seq_valid && cdc->flags & SMR_CDC_F_ABORT) {
		smr_close_early_abort_locked(smr);
		spin_unlock_bh(&conn->lock);
		goto out;
	}
	if (conn->link != link || !smr_conn_started(conn) || !conn->rmb) {
		spin_unlock_bh(&conn->lock);
		smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
		goto out;
	}
	smr_cdc_view(conn, &view);
	verdict = smr_cdc_validate(cdc, &view, &c);
	if (verdict == SMR_CDC_STALE) {
		spin_unlock_bh(&conn->lock);
		smr_stat_inc(&init_net, SMR_STAT_CDC_STALE);
		goto out;
	}
	conn->rx_seq = cdc->seq;
	conn->rx_seq_valid = true;
	if (verdict) {
		spin_unlock_bh(&conn->lock);
		smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
		smr_conn_abort(smr, SMR_ABORT_BAD_CDC);
		goto out;
	}
	if (c.prod != conn->rx_prod &&
	    smr_close_refuses_data_locked(smr, cdc->flags)) {
		spin_unlock_bh(&conn->lock);
		smr_conn_abort(smr, SMR_ABORT_LOCAL);
		goto out;
	}
	push = smr_cdc_apply_locked(smr, cdc, &c, data, &wake, &sigurg);
	put = smr_close_done_locked(conn);
	spin_unlock_bh(&conn->lock);

	if (sigurg)
		sk_send_sigurg(&smr->sk);
	smr_close_notify(smr, wake, wake & EPOLLERR);
	if (push) {
		smr_tx_push(smr);
		smr_tx_write_space(smr);
	}
	if (put)
		smr_close_put_hold(smr);
out:
	sock_put(&smr->sk);	/* the lookup's reference */
}

/* ---- the link's callbacks ---- */

static struct smr_sock *smr_of_user(struct smr_link_user *user)
{
	return container_of(user, struct smr_sock, conn.link_user);
}

/* A CDC we posted completed: the WRITEs before it are done. Softirq. */
static void smr_cdc_sent(struct smr_link_user *user, u64 tx_pos, bool ok)
{
	struct smr_sock *smr = smr_of_user(user);
	struct smr_conn *conn = &smr->conn;
	bool wake = false, linger = false;

	spin_lock_bh(&conn->lock);
	/* nothing completes that was not posted: the ring's room relies on it */
	if (WARN_ON_ONCE(tx_pos > conn->tx_sent))
		ok = false;
	if (ok && tx_pos > conn->tx_done) {
		conn->tx_done = tx_pos;
		wake = true;
		/* close() under SO_LINGER waits for this */
		linger = smr_conn_app_closed(conn) &&
			 conn->tx_done == conn->tx_prod;
	}
	spin_unlock_bh(&conn->lock);
	if (wake) {
		smr_tx_push(smr);	/* what Nagle held back */
		smr_tx_write_space(smr);
	}
	if (linger)
		smr_conn_wake(smr, EPOLLOUT);
}

/* A slot or credit came back after this connection found none. */
static void smr_conn_link_room(struct smr_link_user *user)
{
	smr_tx_push(smr_of_user(user));
}

/* The link is up: a handshake waiting for it goes on (link's lock held). */
static void smr_conn_link_up(struct smr_link_user *user)
{
	smr_hs_kick(smr_of_user(user));
}

static void smr_conn_link_down(struct smr_link_user *user)
{
	smr_close_link_down(smr_of_user(user));
}

static void smr_conn_link_hold(struct smr_link_user *user)
{
	sock_hold(&smr_of_user(user)->sk);
}

static bool smr_conn_link_hold_unless_dying(struct smr_link_user *user)
{
	return refcount_inc_not_zero(&smr_of_user(user)->sk.sk_refcnt);
}

static void smr_conn_link_put(struct smr_link_user *user)
{
	sock_put(&smr_of_user(user)->sk);
}

const struct smr_link_ops smr_conn_link_ops = {
	.cdc_recv		= smr_cdc_recv,
	.cdc_sent		= smr_cdc_sent,
	.room			= smr_conn_link_room,
	.up			= smr_conn_link_up,
	.down			= smr_conn_link_down,
	.hold			= smr_conn_link_hold,
	.hold_unless_dying	= smr_conn_link_hold_unless_dying,
	.put			= smr_conn_link_put,
};
