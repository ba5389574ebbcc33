// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: a connection's RDMA life: buffers and link from the handshake, CDC
 * messages from the peer, close, abort and link loss.
 *
 * Each end writes into the other's RMB with RDMA WRITE and then sends a CDC
 * message (IB SEND on the same QP, so it arrives after the data) carrying
 * its producer cursor (how far it wrote into the peer's RMB), its consumer
 * cursor (how far it read its own RMB: the peer may overwrite up to there)
 * and flags. Every cursor and flag the peer sends is checked against what
 * it may claim; a CDC that breaks the rules resets the connection (counted
 * in cdc_bad / conn_abort_bad_cdc), never more.
 *
 * Close: each end sends exactly one final CDC (CLOSED, or ABORT) once its
 * application closed; its RMB and send buffer return to the link's pool
 * only when both finals are exchanged (then the peer can no longer write
 * into our RMB) or the link is gone. Until then the sock stays alive, held
 * by the connection (@holds_sock), without a file. An orphan (closed here)
 * whose peer does not send its final within net.smr.orphan_timeout_ms (the
 * peer's application keeps its socket open, as TCP's FIN_WAIT2 orphans)
 * resets and lets go; one whose own final cannot leave either within a
 * second period takes its link down (a peer that returns no credits or
 * completions is broken, and the link is only shared with that peer).
 *
 * Locking and lifetimes
 * ---------------------
 * See struct smr_conn in smr.h. CDCs are handled in the CQ's softirq under
 * conn->lock; the sock is found through its token (handshake.c) with a
 * reference taken only if it is not already being destroyed. Wake-ups and
 * pushes run after conn->lock is dropped.
 */
#include <linux/net.h>
#include <linux/poll.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <rdma/ib_verbs.h>

#include "smr.h"

static void smr_conn_tcp_err_expired(struct timer_list *t)
{
	struct smr_sock *smr = from_timer(smr, t, conn.tcp_err_timer);
	int err = READ_ONCE(smr->conn.tcp_err);

	if (!READ_ONCE(smr->sk.sk_err) && !READ_ONCE(smr->conn.reset))
		WRITE_ONCE(smr->sk.sk_err, err);
	smr_conn_abort(smr, SMR_ABORT_TCP);
	sock_put(&smr->sk);	/* the timer's reference */
}

int smr_orphan_timeout_ms = 60000;

static void smr_conn_orphan_expired(struct timer_list *t);

void smr_conn_init(struct smr_sock *smr)
{
	spin_lock_init(&smr->conn.lock);
	INIT_LIST_HEAD(&smr->conn.link_node);
	INIT_LIST_HEAD(&smr->conn.wait_node);
	timer_setup(&smr->conn.cork_timer, smr_tx_cork_expired, 0);
	timer_setup(&smr->conn.tcp_err_timer, smr_conn_tcp_err_expired, 0);
	timer_setup(&smr->conn.orphan_timer, smr_conn_orphan_expired, 0);
}

/*
 * The file goes: no cork or inner-TCP timer may run on the sock afterwards.
 * The orphan timer is not stopped here: it guards the connection that
 * outlives the file, holds a sock reference while armed, and is stopped
 * when the connection lets go (smr_conn_put_hold()).
 */
void smr_conn_stop_timers(struct smr_sock *smr)
{
	sk_stop_timer_sync(&smr->sk, &smr->conn.cork_timer);
	sk_stop_timer_sync(&smr->sk, &smr->conn.tcp_err_timer);
}

/*
 * The orphan timer is armed and stopped under conn->lock only: its sock
 * reference must change hands atomically with its pending state. Armed
 * from close() while a CDC in softirq let the connection go, an unlocked
 * sk_reset_timer() (arm, then hold) let sk_stop_timer() put a reference
 * that was not taken yet: the sock was freed under its open file. The
 * handler takes conn->lock before anything else.
 */
static void smr_conn_arm_orphan_locked(struct smr_sock *smr)
{
	unsigned long timeout = READ_ONCE(smr_orphan_timeout_ms);

	lockdep_assert_held(&smr->conn.lock);
	sock_hold(&smr->sk);		/* the timer's, before it can run */
	if (mod_timer(&smr->conn.orphan_timer,
		      jiffies + msecs_to_jiffies(timeout)))
		__sock_put(&smr->sk);	/* it was armed: it has one */
}

static void smr_conn_stop_orphan_locked(struct smr_sock *smr)
{
	lockdep_assert_held(&smr->conn.lock);
	if (del_timer(&smr->conn.orphan_timer))
		__sock_put(&smr->sk);	/* the timer's; the caller has one */
}

/*
 * The connection let go of its sock (smr_conn_done_locked() said so, or
 * the link went): the orphan timer has nothing left to guard. Any context.
 */
void smr_conn_put_hold(struct smr_sock *smr)
{
	spin_lock_bh(&smr->conn.lock);
	smr_conn_stop_orphan_locked(smr);
	spin_unlock_bh(&smr->conn.lock);
	sock_put(&smr->sk);	/* the connection's hold */
}

/*
 * The inner TCP connection failed (reset, keepalive timeout) while RDMA
 * carries the bytes. A peer's reset comes with an ABORT CDC that may still
 * be behind the RST (different paths): give it a moment, so that data
 * written before it is read first, then reset with TCP's error.
 */
void smr_conn_tcp_failed(struct smr_sock *smr, int err)
{
	if (READ_ONCE(smr->conn.reset))
		return;
	WRITE_ONCE(smr->conn.tcp_err, err);
	if (!timer_pending(&smr->conn.tcp_err_timer))
		sk_reset_timer(&smr->sk, &smr->conn.tcp_err_timer,
			       jiffies + HZ / 5);
}

/*
 * A writer or poller waiting for room (SOCK_NOSPACE) is woken once there
 * is enough (smr_tx_writable_locked() says why only then); completions and
 * consumer updates are no event otherwise. Any context, no lock held.
 */
void smr_conn_write_space(struct smr_sock *smr)
{
	struct socket *sock = READ_ONCE(smr->sk.sk_socket);
	bool writable;

	if (!sock || !test_bit(SOCK_NOSPACE, &sock->flags))
		return;
	spin_lock_bh(&smr->conn.lock);
	writable = smr_tx_writable_locked(&smr->conn);
	spin_unlock_bh(&smr->conn.lock);
	if (writable && test_and_clear_bit(SOCK_NOSPACE, &sock->flags))
		smr_conn_wake(smr, EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND);
}

bool smr_conn_is_rdma(const struct smr_sock *smr)
{
	return READ_ONCE(smr->mode) == SMR_MODE_RDMA;
}

/* Wake the SMR socket's waiters and async owners for @mask. */
void smr_conn_wake(struct smr_sock *smr, __poll_t mask)
{
	struct sock *sk = &smr->sk;
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_poll(&wq->wait, mask);
	rcu_read_unlock();
	if (mask & (EPOLLIN | EPOLLHUP | EPOLLERR))
		sk_wake_async(sk, SOCK_WAKE_WAITD, POLL_IN);
	if (mask & EPOLLOUT)
		sk_wake_async(sk, SOCK_WAKE_SPACE, POLL_OUT);
}

/*
 * Handshake: buffers for a connection whose link is attached (@link holds
 * the connection's reference). Process context, sock lock held. 0 or
 * -ENOBUFS; on error the caller unprepares.
 */
int smr_conn_prepare(struct smr_sock *smr, struct smr_link *link)
{
	struct smr_conn *conn = &smr->conn;
	struct smr_buf *rmb, *sndbuf;

	sock_owned_by_me(&smr->sk);
	rmb = smr_buf_get(link, smr_link_pool(link), smr->local_rmb_size, true);
	if (!rmb)
		return -ENOBUFS;
	sndbuf = smr_buf_get(link, smr_link_pool(link),
			     smr_buf_sndbuf_size(smr->tcp->sk),
			     false);
	if (!sndbuf) {
		smr_buf_put(smr_link_pool(link), rmb);
		return -ENOBUFS;
	}
	if (smr_buf_charge_user(smr->sk.sk_uid, rmb->size + sndbuf->size)) {
		smr_buf_put(smr_link_pool(link), sndbuf);
		smr_buf_put(smr_link_pool(link), rmb);
		return -ENOBUFS;
	}
	spin_lock_bh(&conn->lock);
	conn->rmb = rmb;
	conn->sndbuf = sndbuf;
	conn->user_charged = rmb->size + sndbuf->size;
	conn->charged_uid = smr->sk.sk_uid;
	spin_unlock_bh(&conn->lock);
	/* the device may have lowered the size we planned to announce */
	smr->local_rmb_size = rmb->size;
	return 0;
}

void smr_conn_fill_rmb(struct smr_sock *smr, struct smr_hs_rmb *rmb)
{
	rmb->addr = smr->conn.rmb->mr->iova;
	rmb->rkey = smr->conn.rmb->mr->rkey;
	rmb->size = smr->conn.rmb->size;
}

/* The peer's RMB is known: we may write. */
void smr_conn_set_peer(struct smr_sock *smr, const struct smr_hs_rmb *rmb)
{
	struct smr_conn *conn = &smr->conn;

	spin_lock_bh(&conn->lock);
	conn->peer_rmb_addr = rmb->addr;
	conn->peer_rmb_rkey = rmb->rkey;
	conn->peer_rmb_size = rmb->size;
	spin_unlock_bh(&conn->lock);
}

/*
 * CDCs for this connection are accepted from now on (the peer may write as
 * soon as it hears from us). The connection holds its sock until the final
 * CDCs are exchanged.
 */
void smr_conn_start(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;

	spin_lock_bh(&conn->lock);
	if (!conn->active && conn->link && conn->rmb) {
		conn->active = true;
		conn->holds_sock = true;
		sock_hold(&smr->sk);
		/* the peer gave up first: its final came, ours is owed */
		if (conn->rx_early_abort) {
			conn->rx_final = true;
			conn->abort_reason = SMR_ABORT_PEER;
			smr_conn_reset_locked(smr, ECONNRESET);
		}
	}
	spin_unlock_bh(&conn->lock);
}

/* Take the buffers and link away; caller holds the sock lock or owns it. */
static void smr_conn_take(struct smr_sock *smr, struct smr_link **link,
			  struct smr_buf **rmb, struct smr_buf **sndbuf)
{
	struct smr_conn *conn = &smr->conn;
	kuid_t uid;
	long charged;

	spin_lock_bh(&conn->lock);
	*link = conn->link;
	*rmb = conn->rmb;
	*sndbuf = conn->sndbuf;
	charged = conn->user_charged;
	uid = conn->charged_uid;
	conn->link = NULL;
	conn->rmb = NULL;
	conn->sndbuf = NULL;
	conn->user_charged = 0;
	spin_unlock_bh(&conn->lock);
	/* the user's charge ends with the connection's hold on the buffers */
	if (charged)
		smr_buf_uncharge_user(uid, charged);
}

/* Give the buffers back and let go of the link. Any context. */
static void smr_conn_release_link(struct smr_sock *smr, struct smr_link *link,
				  struct smr_buf *rmb, struct smr_buf *sndbuf)
{
	if (!link)
		return;
	if (rmb)
		smr_buf_put(smr_link_pool(link), rmb);
	if (sndbuf)
		smr_buf_put(smr_link_pool(link), sndbuf);
	smr_link_detach(link, smr);
	smr_link_put(link);
}

/*
 * The handshake ended without RDMA, or the socket went before it ended:
 * give back what it took. If CDCs were already allowed, the peer may have
 * started too: it gets a final ABORT, and the RMB goes only with the sock
 * (smr_conn_destruct()). Idempotent.
 */
void smr_conn_unprepare(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct smr_link *link;
	struct smr_buf *rmb, *sndbuf;
	bool active, put;

	spin_lock_bh(&conn->lock);
	active = conn->active;
	/* our final: an ABORT, or CLOSED if the peer reset first */
	if (active && !conn->reset)
		conn->tx_abort = true;
	else if (active)
		conn->tx_close = true;
	conn->reset = true;
	put = conn->holds_sock;
	conn->holds_sock = false;
	spin_unlock_bh(&conn->lock);
	if (active) {
		smr_tx_push(smr);
	} else {
		smr_conn_take(smr, &link, &rmb, &sndbuf);
		smr_conn_release_link(smr, link, rmb, sndbuf);
	}
	if (put)
		smr_conn_put_hold(smr);
}

/* sk_destruct: nothing refers to the sock any more. Any context. */
void smr_conn_destruct(struct smr_sock *smr)
{
	struct smr_link *link;
	struct smr_buf *rmb, *sndbuf;

	smr_conn_take(smr, &link, &rmb, &sndbuf);
	smr_conn_release_link(smr, link, rmb, sndbuf);
}

/*
 * Drop the connection's hold on its sock once both finals are exchanged
 * (or the peer's final is given up on: orphan timeout). Caller holds
 * conn->lock and, if this returns true, calls smr_conn_put_hold() after
 * unlocking.
 */
bool smr_conn_done_locked(struct smr_conn *conn)
{
	lockdep_assert_held(&conn->lock);
	if (!conn->holds_sock || !conn->user_closed)
		return false;
	if (!(conn->tx_final_sent && (conn->rx_final || conn->orphan_expired)) &&
	    conn->link)
		return false;
	conn->holds_sock = false;
	return true;
}

static void smr_conn_maybe_done(struct smr_sock *smr)
{
	bool put;

	spin_lock_bh(&smr->conn.lock);
	put = smr_conn_done_locked(&smr->conn);
	spin_unlock_bh(&smr->conn.lock);
	if (put)
		smr_conn_put_hold(smr);
}

/*
 * The orphan timer: the application closed net.smr.orphan_timeout_ms ago
 * and the peer's final has not come. First expiry: reset (an ABORT if our
 * final is still owed) and stop waiting for the peer's final; second: our
 * own final could not leave either, and the link goes. Softirq.
 */
static void smr_conn_orphan_expired(struct timer_list *t)
{
	struct smr_sock *smr = from_timer(smr, t, conn.orphan_timer);
	struct smr_conn *conn = &smr->conn;
	struct smr_link *link = NULL;
	bool first = false;

	spin_lock_bh(&conn->lock);
	if (conn->holds_sock && conn->user_closed) {
		if (!conn->orphan_expired) {
			conn->orphan_expired = true;
			first = true;
		} else if (conn->link) {
			link = conn->link;
			smr_link_hold(link);
		}
	}
	spin_unlock_bh(&conn->lock);

	if (first) {
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_ORPHANS_EXPIRED);
		smr_conn_abort(smr, SMR_ABORT_LOCAL);
		smr_tx_push(smr);
		smr_conn_maybe_done(smr);
		spin_lock_bh(&conn->lock);
		if (conn->holds_sock)
			smr_conn_arm_orphan_locked(smr);
		spin_unlock_bh(&conn->lock);
	}
	if (link) {
		smr_link_fail(link, "orphan's final CDC cannot leave");
		smr_link_put(link);
	}
	sock_put(&smr->sk);	/* the timer's reference */
}

/* Mark the connection reset; caller holds conn->lock. */
void smr_conn_reset_locked(struct smr_sock *smr, int err)
{
	struct sock *sk = &smr->sk;

	lockdep_assert_held(&smr->conn.lock);
	smr->conn.reset = true;
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	if (!READ_ONCE(sk->sk_err))
		WRITE_ONCE(sk->sk_err, err);
}

/*
 * Reset the connection: the application sees ECONNRESET (or the inner TCP
 * connection's own error), and the peer an ABORT unless it is the one that
 * reset or the link is gone. Any context.
 */
void smr_conn_abort(struct smr_sock *smr, enum smr_conn_abort why)
{
	struct smr_conn *conn = &smr->conn;
	struct net *net = sock_net(&smr->sk);

	spin_lock_bh(&conn->lock);
	if (conn->reset || !conn->active) {
		spin_unlock_bh(&conn->lock);
		return;
	}
	conn->abort_reason = why;
	smr_conn_reset_locked(smr, ECONNRESET);
	if (why != SMR_ABORT_PEER && why != SMR_ABORT_LINK)
		conn->tx_abort = true;
	spin_unlock_bh(&conn->lock);

	if (why == SMR_ABORT_BAD_CDC)
		smr_stat_inc(net, SMR_STAT_CONN_ABORT_BAD_CDC);
	else if (why == SMR_ABORT_PEER)
		smr_stat_inc(net, SMR_STAT_CONN_ABORT_PEER);
	smr_tx_push(smr);
	smr->sk.sk_error_report(&smr->sk);
	smr_conn_wake(smr, EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP |
			   EPOLLRDHUP);
	smr_conn_maybe_done(smr);
}

/*
 * The link went down (link teardown, process context): the connection is
 * reset and its buffers freed with the link's pool.
 */
void smr_conn_link_down(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct smr_link *link;
	struct smr_buf *rmb, *sndbuf;
	bool was_active, put;

	lock_sock(&smr->sk);
	spin_lock_bh(&conn->lock);
	was_active = conn->active && !conn->reset;
	if (was_active) {
		conn->abort_reason = SMR_ABORT_LINK;
		smr_conn_reset_locked(smr, ECONNRESET);
	}
	put = conn->holds_sock;
	conn->holds_sock = false;
	conn->rx_final = true;
	spin_unlock_bh(&conn->lock);
	smr_conn_take(smr, &link, &rmb, &sndbuf);
	if (rmb)
		smr_buf_free(rmb);
	if (sndbuf)
		smr_buf_free(sndbuf);
	/* a handshake waiting for this link decides now */
	smr_hs_kick(smr);
	release_sock(&smr->sk);

	if (was_active) {
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_CONN_ABORT_LINK);
		smr->sk.sk_error_report(&smr->sk);
		smr_conn_wake(smr, EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP |
				   EPOLLRDHUP);
	}
	if (link)
		smr_link_put(link);	/* detached by the teardown already */
	if (put)
		smr_conn_put_hold(smr);
}

/* A CDC we posted completed: the WRITEs before it are done. Softirq. */
void smr_conn_sent(struct smr_sock *smr, u64 tx_pos, bool ok)
{
	struct smr_conn *conn = &smr->conn;
	bool wake = false;

	bool linger = false;

	spin_lock_bh(&conn->lock);
	if (ok && tx_pos > conn->tx_done) {
		conn->tx_done = tx_pos;
		wake = true;
		/* close() under SO_LINGER waits for this */
		linger = conn->user_closed && conn->tx_done == conn->tx_prod;
	}
	spin_unlock_bh(&conn->lock);
	if (wake) {
		smr_tx_push(smr);	/* what Nagle held back */
		smr_conn_write_space(smr);
	}
	if (linger)
		smr_conn_wake(smr, EPOLLOUT);
}

/*
 * Bytes a CDC carried go into the RMB where a WRITE would have put them,
 * before the producer cursor that makes them readable moves.
 */
static void smr_conn_place_inline(struct smr_conn *conn, u64 pos,
				  const u8 *data, u32 len)
{
	u32 size = conn->rmb->size, off = pos & (size - 1);
	u32 first = min(len, size - off);

	memcpy(conn->rmb->cpu + off, data, first);
	memcpy(conn->rmb->cpu, data + first, len - first);
}

/*
 * A CDC for this host arrived on @link, parsed (@data: its inline bytes).
 * Softirq. Every value is checked before anything changes; a bad one
 * resets the connection.
 */
void smr_conn_cdc_recv(struct smr_link *link, const struct smr_cdc *cdcp,
		       const u8 *data)
{
	const struct smr_cdc cdc = *cdcp;
	__poll_t wake = 0;
	struct smr_sock *smr;
	struct smr_conn *conn;
	u64 prod, cons, urg = 0;
	bool bad = false, push = false, sigurg = false, shut_reset = false;
	bool was_done, put;

	smr = smr_hs_token_lookup(cdc.token);
	if (!smr) {
		smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
		return;
	}
	conn = &smr->conn;

	spin_lock_bh(&conn->lock);
	if (conn->link == link && !conn->active && !conn->rx_seq_valid &&
	    cdc.flags & SMR_CDC_F_ABORT) {
		/*
		 * The server gave up after its ACCEPT, and its ABORT overtook
		 * the ACCEPT we have yet to read: that final must not be lost
		 * (smr_conn_start() applies it), or we would wait for it.
		 */
		conn->rx_early_abort = true;
		spin_unlock_bh(&conn->lock);
		sock_put(&smr->sk);
		return;
	}
	if (conn->link != link || !conn->active || !conn->rmb) {
		spin_unlock_bh(&conn->lock);
		smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
		sock_put(&smr->sk);
		return;
	}
	if (conn->rx_seq_valid && (s16)(cdc.seq - conn->rx_seq) <= 0) {
		spin_unlock_bh(&conn->lock);
		smr_stat_inc(&init_net, SMR_STAT_CDC_STALE);
		sock_put(&smr->sk);
		return;
	}
	conn->rx_seq = cdc.seq;
	conn->rx_seq_valid = true;
	if (conn->rx_final) {
		/* nothing may follow a final CDC */
		bad = true;
		goto unlock;
	}

	/* the peer may fill our RMB up to what we consumed plus its size */
	if (smr_cursor_to_count(&cdc.prod, conn->rmb->size, conn->rx_prod,
				conn->rx_cons + conn->rmb->size, &prod) ||
	    (conn->rx_done && prod != conn->rx_prod)) {
		bad = true;
		goto unlock;
	}
	/* inline data: the last bytes of what this CDC makes readable */
	if (cdc.inline_len > prod - conn->rx_prod) {
		bad = true;
		goto unlock;
	}
	/* it may have consumed only what we wrote */
	if (conn->peer_rmb_size) {
		if (smr_cursor_to_count(&cdc.cons, conn->peer_rmb_size,
					conn->tx_peer_cons, conn->tx_sent,
					&cons)) {
			bad = true;
			goto unlock;
		}
	} else {
		if (cdc.cons.wrap || cdc.cons.count) {
			bad = true;
			goto unlock;
		}
		cons = 0;
	}
	if (cdc.flags & SMR_CDC_F_URGENT) {
		/* the urgent byte lies in what this CDC makes readable */
		if (prod == conn->rx_cons ||
		    smr_cursor_to_count(&cdc.urg, conn->rmb->size,
					conn->rx_cons, prod - 1, &urg)) {
			bad = true;
			goto unlock;
		}
	}

	/*
	 * TCP resets a connection that gets data after it shut both ways or
	 * closed: nobody will read it, and a writer waiting for room in a
	 * full RMB would otherwise wait for ever.
	 */
	if (prod != conn->rx_prod && (conn->rx_shut || conn->user_closed) &&
	    conn->tx_fin && !conn->reset) {
		/* its final CDC may carry that data: still the last one */
		if (cdc.flags & (SMR_CDC_F_CLOSED | SMR_CDC_F_ABORT))
			conn->rx_final = true;
		shut_reset = true;
		goto unlock;
	}
	if (cdc.inline_len) {
		smr_conn_place_inline(conn, prod - cdc.inline_len, data,
				      cdc.inline_len);
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_CDC_INLINE_RECEIVED);
	}
	if (prod != conn->rx_prod) {
		conn->rx_prod = prod;
		wake |= EPOLLIN | EPOLLRDNORM;
	}
	if (cons != conn->tx_peer_cons) {
		conn->tx_peer_cons = cons;
		push = true;
	}
	if (cdc.flags & SMR_CDC_F_URGENT && urg + 1 != conn->rx_urg) {
		conn->rx_urg = urg + 1;
		conn->rx_urg_read = false;
		sigurg = true;
		wake |= EPOLLPRI | EPOLLRDBAND;
	}
	conn->rx_peer_blocked = cdc.flags & SMR_CDC_F_WRITE_BLOCKED;
	if (conn->rx_peer_blocked && conn->rx_cons != conn->rx_cons_sent)
		push = true;
	was_done = conn->rx_done;
	/* an ABORT is no EOF: TCP's reset reports an error instead */
	if (cdc.flags & (SMR_CDC_F_DONE_WRITING | SMR_CDC_F_CLOSED) &&
	    !(cdc.flags & SMR_CDC_F_ABORT) && !conn->rx_done) {
		conn->rx_done = true;
		conn->rx_fin = prod;
		WRITE_ONCE(smr->sk.sk_shutdown,
			   smr->sk.sk_shutdown | RCV_SHUTDOWN);
		wake |= EPOLLIN | EPOLLRDNORM | EPOLLRDHUP;
	}
	if (cdc.flags & (SMR_CDC_F_CLOSED | SMR_CDC_F_ABORT))
		conn->rx_final = true;
	if (cdc.flags & SMR_CDC_F_ABORT && !conn->reset) {
		conn->abort_reason = SMR_ABORT_PEER;
		/* as TCP's reset after the peer's FIN: EPIPE */
		smr_conn_reset_locked(smr, was_done ? EPIPE : ECONNRESET);
		wake |= EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLRDHUP;
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_CONN_ABORT_PEER);
	} else if (cdc.flags & SMR_CDC_F_CLOSED &&
		   conn->tx_sent != conn->tx_prod && !conn->reset) {
		/*
		 * The peer closed: bytes not yet in its RMB will never be
		 * read. TCP would send them and draw a reset; reset now
		 * (EPIPE, as after the peer's FIN), owing only our final CDC,
		 * rather than wait for room that never comes.
		 */
		conn->abort_reason = SMR_ABORT_PEER;
		smr_conn_reset_locked(smr, EPIPE);
		wake |= EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLRDHUP;
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_CONN_ABORT_PEER);
		push = true;	/* the final CDC, if the application closed */
	}
unlock:
	put = !bad && !shut_reset && smr_conn_done_locked(conn);
	spin_unlock_bh(&conn->lock);

	if (shut_reset) {
		smr_conn_abort(smr, SMR_ABORT_LOCAL);
	} else if (bad) {
		smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
		smr_conn_abort(smr, SMR_ABORT_BAD_CDC);
	} else {
		if (sigurg)
			sk_send_sigurg(&smr->sk);
		if (wake & EPOLLERR)
			smr->sk.sk_error_report(&smr->sk);
		if (wake)
			smr_conn_wake(smr, wake);
		if (push) {
			smr_tx_push(smr);
			smr_conn_write_space(smr);
		}
	}
	if (put)
		smr_conn_put_hold(smr);
	sock_put(&smr->sk);	/* the lookup's reference */
}

/*
 * connect(AF_UNSPEC): TCP resets the connection and the socket may connect
 * again. The RDMA connection is reset and let go (its final CDC and
 * buffers finish in the background); the socket carries on as TCP.
 */
void smr_conn_disconnect(struct smr_sock *smr)
{
	smr_conn_abort(smr, SMR_ABORT_LOCAL);
	smr_conn_close(smr);
	WRITE_ONCE(smr->reason, SMR_REASON_NOT_NEGOTIATED);
	WRITE_ONCE(smr->mode, SMR_MODE_TCP);
	if (smr->sk.sk_socket)
		smr_tcp_redirect_wq(smr, smr->sk.sk_socket);
}

/*
 * The application closed the socket (process context, sock lock not
 * held). Unread data or SO_LINGER 0 reset the connection as TCP does;
 * otherwise what was written is delivered before EOF, in the background,
 * or before close() returns under SO_LINGER.
 * Returns true if the connection was reset (the inner TCP resets too).
 */
bool smr_conn_close(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;
	bool abort, linger;

	lock_sock(sk);
	spin_lock_bh(&conn->lock);
	conn->user_closed = true;
	linger = sock_flag(sk, SOCK_LINGER);
	abort = !conn->reset &&
		(conn->rx_prod != conn->rx_cons || (linger && !sk->sk_lingertime));
	if (abort) {
		conn->abort_reason = SMR_ABORT_LOCAL;
		conn->tx_abort = true;
		smr_conn_reset_locked(smr, ECONNRESET);
	} else {
		conn->tx_fin = true;
		conn->tx_close = true;
	}
	spin_unlock_bh(&conn->lock);
	smr_tx_push(smr);
	if (!abort && linger && sk->sk_lingertime)
		smr_tx_wait_sent(smr, sk->sk_lingertime);
	release_sock(sk);
	smr_conn_maybe_done(smr);
	/* the connection outlives the file until the peer's final comes */
	spin_lock_bh(&conn->lock);
	if (conn->holds_sock)
		smr_conn_arm_orphan_locked(smr);
	spin_unlock_bh(&conn->lock);
	/*
	 * A connection reset for any reason resets its TCP connection too: if
	 * the link died, that RST is how the peer learns (smr_conn_tcp_failed()).
	 */
	return abort || READ_ONCE(conn->reset);
}
