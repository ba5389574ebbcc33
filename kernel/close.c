// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: closing an RDMA connection, as one state machine (enum
 * smr_conn_state). Every transition is made here, by smr_close_set(),
 * under conn->lock; each event below switches on the state with a case for
 * every state, and ends with one wake-up of the socket when it changed
 * something the application can see.
 *
 *   INIT ---start---> ACTIVE ---shutdown(WR)---> WR_SHUT
 *   ACTIVE, WR_SHUT ---close()---> CLOSING     (unread data, SO_LINGER 0:
 *                                               reset, RESET_CLOSED)
 *   ACTIVE, WR_SHUT ---reset---> RESET ---close()---> RESET_CLOSED
 *   CLOSING ---reset---> RESET_CLOSED
 *   CLOSING, RESET_CLOSED ---both finals exchanged---> DONE
 *   CLOSING, RESET_CLOSED ---orphan timeout---> ORPHANED
 *   ORPHANED ---our final sent---> DONE
 *   ACTIVE, WR_SHUT, RESET ---link down, handshake cut short---> DEAD
 *   CLOSING, RESET_CLOSED, ORPHANED ---link down---> DONE
 *   DEAD ---close()---> DONE
 *
 * Each side sends exactly one final CDC (CLOSED, or ABORT with CLOSED)
 * and nothing after it (smr_conn_final_owed() says which, tx.c sends it).
 * The connection holds a reference on its sock from start until DONE or
 * DEAD: only then may the buffers go back to the pool, since the peer,
 * whose last WRITE precedes its final CDC, can no longer write into our
 * RMB. A closed connection whose peer's final does not come within
 * net.smr.orphan_timeout_ms (the peer's application keeps its socket open,
 * as TCP's FIN_WAIT2 orphans) resets and stops waiting for it; one whose
 * own final cannot leave within a second period takes its link down (a
 * peer that returns no credits or completions is broken, and the link is
 * only shared with that peer).
 *
 * What the wire said is kept apart from the state: conn->tx_flags holds
 * the DONE_WRITING/CLOSED/ABORT flags that went out, conn->rx_flags the
 * peer's (its EOF and its final), conn->abort_reason who reset.
 *
 * Locking and lifetimes
 * ---------------------
 * conn->lock guards the state, the flags and the reason; events take it,
 * decide, let it go, then act (push, wake, put). A transition made after
 * a gap in the lock (the sock lock dropped while lingering, or conn->lock
 * between two steps) re-reads the state first. The hold on the sock is
 * dropped by whoever moves the state out of a holding state, after
 * unlocking (smr_close_put_hold()). Pushing CDCs is tx.c's: events that
 * owe one say so, and their callers (above tx.c) push.
 */
#include <linux/poll.h>
#include <net/sock.h>

#include "smr.h"
#include "stats.h"
#include "sysctl.h"

/* The only writer of conn->state. Caller holds conn->lock. */
static void smr_close_set(struct smr_conn *conn, enum smr_conn_state state)
{
	lockdep_assert_held(&conn->lock);
	WRITE_ONCE(conn->state, state);
}

/* Everything the peer may see go wrong on a reset connection. */
#define SMR_CLOSE_RESET_WAKE	(EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | \
				 EPOLLRDHUP)

/*
 * The one wake-up after an event: an error report if it reset the
 * connection, then @mask to the socket's waiters. No lock held.
 */
void smr_close_notify(struct smr_sock *smr, __poll_t mask, bool reset)
{
	if (reset)
		smr->sk.sk_error_report(&smr->sk);
	if (mask)
		smr_conn_wake(smr, mask);
}

/*
 * The orphan timer is armed and stopped under conn->lock only: its sock
 * reference must change hands atomically with its pending state (an
 * unlocked sk_reset_timer(), arm then hold, let a concurrent stop put a
 * reference not taken yet, and the sock was freed under its open file).
 * Its handler takes conn->lock before anything else.
 */
static void smr_close_arm_orphan_locked(struct smr_sock *smr)
{
	unsigned long timeout = READ_ONCE(smr_orphan_timeout_ms);

	lockdep_assert_held(&smr->conn.lock);
	sock_hold(&smr->sk);		/* the timer's, before it can run */
	if (mod_timer(&smr->conn.orphan_timer,
		      jiffies + msecs_to_jiffies(timeout)))
		__sock_put(&smr->sk);	/* it was armed: it has one */
}

static void smr_close_stop_orphan_locked(struct smr_sock *smr)
{
	lockdep_assert_held(&smr->conn.lock);
	if (del_timer(&smr->conn.orphan_timer))
		__sock_put(&smr->sk);	/* the timer's; the caller has one */
}

/*
 * The connection let go of its sock (it left a holding state): the orphan
 * timer has nothing left to guard. Any context, conn->lock not held.
 */
void smr_close_put_hold(struct smr_sock *smr)
{
	spin_lock_bh(&smr->conn.lock);
	smr_close_stop_orphan_locked(smr);
	spin_unlock_bh(&smr->conn.lock);
	sock_put(&smr->sk);	/* the connection's hold */
}

/*
 * The file goes: no cork or inner-TCP timer may run on the sock afterwards.
 * The orphan timer is not stopped here: it guards the connection that
 * outlives the file, holds a sock reference while armed, and is stopped
 * when the connection lets go (smr_close_put_hold()).
 */
void smr_close_stop_timers(struct smr_sock *smr)
{
	sk_stop_timer_sync(&smr->sk, &smr->conn.cork_timer);
	sk_stop_timer_sync(&smr->sk, &smr->conn.tcp_err_timer);
}

/*
 * CDCs for this connection are accepted from now on (the peer may write as
 * soon as it hears from us). The connection holds its sock until the final
 * CDCs are exchanged. A peer that gave up first (its ABORT came early:
 * smr_close_early_abort_locked()) resets it at once; our final is owed.
 */
void smr_close_start(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;

	spin_lock_bh(&conn->lock);
	switch (conn->state) {
	case SMR_CONN_INIT:
		if (!conn->link || !conn->rmb)
			break;
		smr_close_set(conn, SMR_CONN_ACTIVE);
		sock_hold(&smr->sk);
		if (conn->rx_flags & SMR_CDC_F_ABORT)
			smr_close_reset_locked(smr, ECONNRESET, SMR_ABORT_PEER);
		break;
	case SMR_CONN_ACTIVE:
	case SMR_CONN_WR_SHUT:
	case SMR_CONN_RESET:
	case SMR_CONN_CLOSING:
	case SMR_CONN_RESET_CLOSED:
	case SMR_CONN_ORPHANED:
	case SMR_CONN_DEAD:
	case SMR_CONN_DONE:
		break;		/* started before */
	}
	spin_unlock_bh(&conn->lock);
}

/*
 * An ABORT for a connection not started yet: the server gave up after its
 * ACCEPT, and its final overtook the ACCEPT we have yet to read. It must
 * not be lost (we would wait for it): it is the peer's final, and
 * smr_close_start() applies it. Caller holds conn->lock.
 */
void smr_close_early_abort_locked(struct smr_sock *smr)
{
	lockdep_assert_held(&smr->conn.lock);
	WRITE_ONCE(smr->conn.rx_flags,
		   smr->conn.rx_flags | SMR_CDC_F_CLOSED | SMR_CDC_F_ABORT);
}

/* Open, on a link, with the peer's RMB known: RDMA may carry the bytes. */
bool smr_close_ready(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	bool ready;

	spin_lock_bh(&conn->lock);
	ready = conn->state == SMR_CONN_ACTIVE && conn->link &&
		conn->peer_rmb_size;
	spin_unlock_bh(&conn->lock);
	return ready;
}

/*
 * Reset the connection: the application sees @err (unless an error is
 * pending already) and both directions shut; @why says who (a reset here
 * owes the peer an ABORT: smr_conn_final_owed()). The first reason
 * stays. Caller holds conn->lock, and wakes the socket afterwards.
 */
void smr_close_reset_locked(struct smr_sock *smr, int err,
			    enum smr_conn_abort why)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;

	lockdep_assert_held(&conn->lock);
	if (!smr_conn_is_reset(conn))
		WRITE_ONCE(conn->abort_reason, why);
	switch (conn->state) {
	case SMR_CONN_ACTIVE:
	case SMR_CONN_WR_SHUT:
		smr_close_set(conn, SMR_CONN_RESET);
		break;
	case SMR_CONN_CLOSING:
		smr_close_set(conn, SMR_CONN_RESET_CLOSED);
		break;
	case SMR_CONN_INIT:		/* never: nothing can reset it yet */
	case SMR_CONN_RESET:
	case SMR_CONN_RESET_CLOSED:
	case SMR_CONN_ORPHANED:
	case SMR_CONN_DEAD:
	case SMR_CONN_DONE:
		break;
	}
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	if (!READ_ONCE(sk->sk_err))
		WRITE_ONCE(sk->sk_err, err);
}

/*
 * Let go of the sock once both finals are exchanged (or the peer's final
 * is given up on: ORPHANED), or the link is gone. Caller holds conn->lock
 * and, if this returns true, calls smr_close_put_hold() after unlocking.
 */
bool smr_close_done_locked(struct smr_conn *conn)
{
	lockdep_assert_held(&conn->lock);
	switch (conn->state) {
	case SMR_CONN_CLOSING:
	case SMR_CONN_RESET_CLOSED:
		if (conn->link &&
		    !(smr_conn_final_sent(conn) && smr_conn_peer_final(conn)))
			return false;
		break;
	case SMR_CONN_ORPHANED:
		if (conn->link && !smr_conn_final_sent(conn))
			return false;
		break;
	case SMR_CONN_INIT:
	case SMR_CONN_ACTIVE:
	case SMR_CONN_WR_SHUT:
	case SMR_CONN_RESET:
		return false;	/* the application still has it */
	case SMR_CONN_DEAD:
	case SMR_CONN_DONE:
		return false;	/* let go already */
	}
	smr_close_set(conn, SMR_CONN_DONE);
	return true;
}

/* Reset by this side (@why): returns true if it was not reset before. */
bool smr_close_abort(struct smr_sock *smr, enum smr_conn_abort why)
{
	struct smr_conn *conn = &smr->conn;
	struct net *net = sock_net(&smr->sk);
	bool put;

	spin_lock_bh(&conn->lock);
	if (!smr_conn_started(conn) || smr_conn_is_reset(conn)) {
		spin_unlock_bh(&conn->lock);
		return false;
	}
	smr_close_reset_locked(smr, ECONNRESET, why);
	put = smr_close_done_locked(conn);
	spin_unlock_bh(&conn->lock);

	if (why == SMR_ABORT_BAD_CDC)
		smr_stat_inc(net, SMR_STAT_CONN_ABORT_BAD_CDC);
	else if (why == SMR_ABORT_PEER)
		smr_stat_inc(net, SMR_STAT_CONN_ABORT_PEER);
	smr_close_notify(smr, SMR_CLOSE_RESET_WAKE, true);
	if (put)
		smr_close_put_hold(smr);
	return true;
}

/*
 * shutdown(SHUT_WR): EOF after what was written (the caller pushes it).
 * The mark is set under conn->lock, as the peer's CDC sets RCV_SHUTDOWN:
 * a mark made of bits read before that lock could undo the peer's EOF.
 */
void smr_close_shutdown_wr(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;

	spin_lock_bh(&conn->lock);
	WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | SEND_SHUTDOWN);
	switch (conn->state) {
	case SMR_CONN_ACTIVE:
		smr_close_set(conn, SMR_CONN_WR_SHUT);
		break;
	case SMR_CONN_INIT:
	case SMR_CONN_WR_SHUT:
	case SMR_CONN_RESET:
	case SMR_CONN_CLOSING:
	case SMR_CONN_RESET_CLOSED:
	case SMR_CONN_ORPHANED:
	case SMR_CONN_DEAD:
	case SMR_CONN_DONE:
		break;		/* shut already, or nothing will be sent */
	}
	spin_unlock_bh(&conn->lock);
}

/*
 * shutdown(SHUT_RD): reads return EOF; the peer is not told (as TCP), but
 * data it sends after both directions are shut resets the connection
 * (smr_close_refuses_data_locked()).
 */
void smr_close_shutdown_rd(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;

	spin_lock_bh(&conn->lock);
	WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | RCV_SHUTDOWN);
	spin_unlock_bh(&conn->lock);
	smr_close_notify(smr, EPOLLIN | EPOLLRDNORM | EPOLLRDHUP, false);
}

/*
 * The application closed the socket (sock lock held by the caller, who
 * pushes next). Unread data or SO_LINGER 0 reset the connection as TCP
 * does; otherwise what was written goes before EOF and our final, in the
 * background. Returns true if close() waits for that (SO_LINGER with a
 * time: smr_tx_wait_sent()).
 */
bool smr_close_app(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;
	bool linger = sock_flag(sk, SOCK_LINGER);
	bool wait = linger && sk->sk_lingertime;

	sock_owned_by_me(sk);
	spin_lock_bh(&conn->lock);
	switch (conn->state) {
	case SMR_CONN_ACTIVE:
	case SMR_CONN_WR_SHUT:
		if (conn->rx_prod != conn->rx_cons ||
		    (linger && !sk->sk_lingertime)) {
			smr_close_reset_locked(smr, ECONNRESET,
					       SMR_ABORT_LOCAL);
			smr_close_set(conn, SMR_CONN_RESET_CLOSED);
			wait = false;
			break;
		}
		smr_close_set(conn, SMR_CONN_CLOSING);
		break;
	case SMR_CONN_RESET:
		smr_close_set(conn, SMR_CONN_RESET_CLOSED);
		break;
	case SMR_CONN_INIT:		/* never started: nothing owed */
	case SMR_CONN_DEAD:
		smr_close_set(conn, SMR_CONN_DONE);
		break;
	case SMR_CONN_CLOSING:
	case SMR_CONN_RESET_CLOSED:
	case SMR_CONN_ORPHANED:
	case SMR_CONN_DONE:
		wait = false;	/* closed already */
		break;
	}
	spin_unlock_bh(&conn->lock);
	return wait;
}

/*
 * After close() pushed (and lingered): let go if the finals are exchanged
 * already, else guard the wait for the peer's final with the orphan timer
 * (armed under conn->lock: see smr_close_arm_orphan_locked()). Returns true
 * if the connection was reset for any reason: the inner TCP resets too (if
 * the link died, that RST is how the peer learns).
 */
bool smr_close_app_done(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	bool put, reset;

	spin_lock_bh(&conn->lock);
	put = smr_close_done_locked(conn);
	/* the connection outlives the file until the peer's final comes */
	if (smr_conn_holds_sock(conn->state))
		smr_close_arm_orphan_locked(smr);
	reset = smr_conn_is_reset(conn);
	spin_unlock_bh(&conn->lock);
	if (put)
		smr_close_put_hold(smr);
	return reset;
}

/*
 * A valid CDC carried @flags and producer cursor @prod: the peer's EOF
 * (DONE_WRITING, or CLOSED without ABORT), its final (CLOSED or ABORT),
 * its reset. A peer that closed while bytes of ours wait for room in its
 * RMB will never read them: TCP would send them and draw a reset; this
 * resets now (EPIPE, as after the peer's FIN), owing only our final,
 * rather than wait for room that never comes. Adds the wake-up to @wake;
 * returns true if a CDC is owed now. Caller holds conn->lock.
 */
bool smr_close_peer_flags_locked(struct smr_sock *smr, u8 flags, u64 prod,
				 __poll_t *wake)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;
	bool was_done = smr_conn_peer_done(conn), push = false;

	lockdep_assert_held(&conn->lock);
	/* an ABORT is no EOF: TCP's reset reports an error instead */
	if (flags & (SMR_CDC_F_DONE_WRITING | SMR_CDC_F_CLOSED) &&
	    !(flags & SMR_CDC_F_ABORT) && !was_done) {
		WRITE_ONCE(conn->rx_flags,
			   conn->rx_flags | SMR_CDC_F_DONE_WRITING);
		conn->rx_fin = prod;
		WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | RCV_SHUTDOWN);
		*wake |= EPOLLIN | EPOLLRDNORM | EPOLLRDHUP;
	}
	if (flags & (SMR_CDC_F_CLOSED | SMR_CDC_F_ABORT))
		WRITE_ONCE(conn->rx_flags, conn->rx_flags | SMR_CDC_F_CLOSED);
	if (flags & SMR_CDC_F_ABORT)
		WRITE_ONCE(conn->rx_flags, conn->rx_flags | SMR_CDC_F_ABORT);

	if (smr_conn_is_reset(conn))
		return false;
	if (flags & SMR_CDC_F_ABORT) {
		/* as TCP's reset after the peer's FIN: EPIPE */
		smr_close_reset_locked(smr, was_done ? EPIPE : ECONNRESET,
				       SMR_ABORT_PEER);
		*wake |= SMR_CLOSE_RESET_WAKE;
		smr_stat_inc(sock_net(sk), SMR_STAT_CONN_ABORT_PEER);
		/*
		 * Our final, if the application closed: it waited behind
		 * bytes the peer will never take, and nothing else would
		 * push it now.
		 */
		push = smr_conn_app_closed(conn);
	} else if (flags & SMR_CDC_F_CLOSED &&
		   conn->tx_sent != conn->tx_prod) {
		smr_close_reset_locked(smr, EPIPE, SMR_ABORT_PEER);
		*wake |= SMR_CLOSE_RESET_WAKE;
		smr_stat_inc(sock_net(sk), SMR_STAT_CONN_ABORT_PEER);
		push = true;	/* the final CDC, if the application closed */
	}
	return push;
}

/*
 * New bytes arrived: TCP resets a connection that gets data after it shut
 * both ways or closed, since nobody will read it and a writer waiting for
 * room in a full RMB would otherwise wait for ever. Returns true if they
 * must be refused (the caller resets: smr_close_abort()); a final CDC that
 * carried them is still the peer's last. Caller holds conn->lock.
 */
bool smr_close_refuses_data_locked(struct smr_sock *smr, u8 flags)
{
	struct smr_conn *conn = &smr->conn;
	bool refuse;

	lockdep_assert_held(&conn->lock);
	switch (conn->state) {
	case SMR_CONN_CLOSING:
		refuse = true;
		break;
	case SMR_CONN_WR_SHUT:
		refuse = READ_ONCE(smr->sk.sk_shutdown) & RCV_SHUTDOWN;
		break;
	case SMR_CONN_INIT:
	case SMR_CONN_ACTIVE:
		refuse = false;		/* reading is the application's */
		break;
	case SMR_CONN_RESET:
	case SMR_CONN_RESET_CLOSED:
	case SMR_CONN_ORPHANED:
	case SMR_CONN_DEAD:
	case SMR_CONN_DONE:
		refuse = false;		/* reset or over already */
		break;
	}
	if (refuse && flags & (SMR_CDC_F_CLOSED | SMR_CDC_F_ABORT))
		WRITE_ONCE(conn->rx_flags, conn->rx_flags | SMR_CDC_F_CLOSED);
	return refuse;
}

/*
 * The connection ends before its finals (the link is gone, or the
 * handshake was cut short) and lets go of its sock: DEAD where the
 * application still has the socket, DONE where it closed it. Returns true
 * if it held the sock (the caller puts it, unlocked: smr_close_put_hold()).
 * Caller holds conn->lock.
 */
static bool smr_close_end_early_locked(struct smr_conn *conn)
{
	u8 old = conn->state;

	lockdep_assert_held(&conn->lock);
	switch (conn->state) {
	case SMR_CONN_INIT:
		break;		/* never started: nothing held */
	case SMR_CONN_ACTIVE:
	case SMR_CONN_WR_SHUT:
	case SMR_CONN_RESET:
		smr_close_set(conn, SMR_CONN_DEAD);
		break;
	case SMR_CONN_CLOSING:
	case SMR_CONN_RESET_CLOSED:
	case SMR_CONN_ORPHANED:
		smr_close_set(conn, SMR_CONN_DONE);
		break;
	case SMR_CONN_DEAD:
	case SMR_CONN_DONE:
		break;		/* let go already */
	}
	return smr_conn_holds_sock(old);
}

/*
 * The link went down (its teardown, process context): the connection is
 * reset, its buffers are freed with the link's pool, a handshake waiting
 * for this link decides, and the sock is let go.
 */
void smr_close_link_down(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct smr_buf *rmb, *sndbuf, *sndbuf_next;
	struct smr_link *link;
	bool was_open, put;

	lock_sock(&smr->sk);
	spin_lock_bh(&conn->lock);
	was_open = smr_conn_started(conn) && !smr_conn_is_reset(conn);
	if (was_open)
		smr_close_reset_locked(smr, ECONNRESET, SMR_ABORT_LINK);
	/* not started (INIT): the handshake decides, kicked below */
	put = smr_close_end_early_locked(conn);
	spin_unlock_bh(&conn->lock);
	smr_conn_take(smr, &link, &rmb, &sndbuf, &sndbuf_next);
	if (rmb)
		smr_buf_free(rmb);
	if (sndbuf)
		smr_buf_free(sndbuf);
	if (sndbuf_next)
		smr_buf_free(sndbuf_next);
	/* a handshake waiting for this link decides now */
	smr_hs_kick(smr);
	release_sock(&smr->sk);

	if (was_open) {
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_CONN_ABORT_LINK);
		smr_close_notify(smr, SMR_CLOSE_RESET_WAKE, true);
	}
	if (link)
		smr_link_put(link);	/* detached by the teardown already */
	if (put)
		smr_close_put_hold(smr);
}

/*
 * The handshake ended without RDMA, or the socket went before it ended:
 * give back what it took. If CDCs were already allowed, the peer may have
 * started too: it gets our final (the caller pushes it when this returns
 * true), an ABORT, or CLOSED if it reset first, and the RMB goes only with
 * the sock (smr_conn_destruct()). Idempotent.
 */
bool smr_close_unprepare(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	bool started, put;

	spin_lock_bh(&conn->lock);
	started = smr_conn_started(conn);
	/* reset here (no error for the application: it goes to TCP or away) */
	if (started && !smr_conn_is_reset(conn))
		WRITE_ONCE(conn->abort_reason, SMR_ABORT_LOCAL);
	put = smr_close_end_early_locked(conn);
	spin_unlock_bh(&conn->lock);
	if (!started)
		smr_conn_give_back(smr);
	if (put)
		smr_close_put_hold(smr);
	return started;
}

/*
 * The orphan timer fired: the application closed
 * net.smr.orphan_timeout_ms ago and the peer's final has not come. The
 * first time: reset (an ABORT if our final is still owed; the caller
 * pushes it, then calls smr_close_orphan_rearm()) and stop waiting for
 * the peer's final; returns true. The second time our own final could not
 * leave either: *@fail gets the link (with a reference), which the caller
 * takes down.
 */
bool smr_close_orphan_expired(struct smr_sock *smr, struct smr_link **fail)
{
	struct smr_conn *conn = &smr->conn;
	bool first = false, reset_now = false;

	*fail = NULL;
	spin_lock_bh(&conn->lock);
	switch (conn->state) {
	case SMR_CONN_CLOSING:
		smr_close_reset_locked(smr, ECONNRESET, SMR_ABORT_LOCAL);
		reset_now = true;
		fallthrough;
	case SMR_CONN_RESET_CLOSED:
		smr_close_set(conn, SMR_CONN_ORPHANED);
		first = true;
		break;
	case SMR_CONN_ORPHANED:
		if (conn->link) {
			*fail = conn->link;
			smr_link_hold(*fail);
		}
		break;
	case SMR_CONN_INIT:
	case SMR_CONN_ACTIVE:
	case SMR_CONN_WR_SHUT:
	case SMR_CONN_RESET:
		break;		/* the application still has it */
	case SMR_CONN_DEAD:
	case SMR_CONN_DONE:
		break;		/* let go already */
	}
	spin_unlock_bh(&conn->lock);
	if (first)
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_ORPHANS_EXPIRED);
	if (reset_now)
		smr_close_notify(smr, SMR_CLOSE_RESET_WAKE, true);
	return first;
}

/* After the first orphan expiry's push: let go, or wait one more period. */
void smr_close_orphan_rearm(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	bool put;

	spin_lock_bh(&conn->lock);
	put = smr_close_done_locked(conn);
	if (smr_conn_holds_sock(conn->state))
		smr_close_arm_orphan_locked(smr);
	spin_unlock_bh(&conn->lock);
	if (put)
		smr_close_put_hold(smr);
}
