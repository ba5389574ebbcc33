// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: sending over RDMA.
 *
 * sendmsg() copies the application's bytes into the connection's send
 * buffer (a ring registered once) and pushes: the bytes the peer's RMB has
 * room for go out as RDMA WRITEs (one per contiguous piece of the RMB, so
 * at most two, each reading the send ring in one or two pieces) followed
 * by one CDC carrying the new producer cursor. Nothing is allocated or
 * registered per message.
 *
 * Coalescing follows the inner TCP socket's options: TCP_CORK and MSG_MORE
 * hold small amounts back until uncorked or a full ring's worth; without
 * TCP_NODELAY (Nagle) new bytes wait while an earlier CDC is in flight and
 * go out together when it completes. FIN, urgent data and a blocked writer
 * always push.
 *
 * Writers block (or get EAGAIN) when the send buffer is full, which happens
 * exactly when the peer's RMB has been full long enough for the send
 * buffer to fill behind it; they wake when a WRITE completes (and an O_ASYNC
 * owner that found it full gets SIGIO POLL_OUT, as from TCP). A writer that
 * fills a ring smaller than twice the peer's RMB gets a larger one, once:
 * a work item gets it (registering it waits behind the link's traffic, and
 * no send may wait for that), and the writer swaps it in when its ring is
 * next empty (smr_tx_grow_start(), smr_tx_grow_work(), smr_tx_swap()).
 *
 * The push also sends what closing owes (close.c decides, through the
 * state: DONE_WRITING after the last byte, then the final CLOSED or
 * ABORT), and after it lets the connection go if that was the last thing
 * it waited for.
 *
 * Locking and lifetimes
 * ---------------------
 * sendmsg() runs under the SMR sock lock: one writer copies into the ring
 * at a time, into space no posted WRITE still reads, and only it swaps the
 * ring (under conn->lock too, when no byte is in it). The push runs under
 * conn->lock from any context (sendmsg, CDC receipt, completions); the
 * link's lock nests inside it while the CDC is posted.
 *
 * The growth work runs without the sock lock, on smr_tx_wq. Queued by the
 * writer (sock lock held, the connection on its link), it holds the sock,
 * the link and a pin on the link's pool (smr_buf_pool_pin(): the link's
 * teardown frees the pool only after it) until its buffer is
 * conn->sndbuf_next, set under conn->lock only while conn->link is still
 * that link and the connection ACTIVE, or back in the pool. Whoever
 * takes the connection's buffers takes sndbuf_next with them
 * (smr_conn_take()). Queued at most once per connection (tx_grown).
 */
#include <linux/net.h>
#include <linux/sched/signal.h>
#include <linux/tcp.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <rdma/ib_verbs.h>

#include "smr.h"
#include "stats.h"
#include "sysctl.h"
#include "test_hooks.h"

#define SMR_TX_MAX_WRITES	2	/* the RMB wraps at most once per push */
#define SMR_TX_PUSH_SGES	3	/* and the send ring at most once */

/*
 * The inner TCP socket's TCP_NODELAY and TCP_CORK (a bit-field, read
 * locklessly: a stale answer only delays or hastens one push).
 */
static bool smr_tx_corked(const struct smr_sock *smr)
{
	unsigned int nonagle = tcp_sk(smr->tcp->sk)->nonagle;

	return nonagle & TCP_NAGLE_CORK;
}

static bool smr_tx_nodelay(const struct smr_sock *smr)
{
	unsigned int nonagle = tcp_sk(smr->tcp->sk)->nonagle;

	return nonagle & TCP_NAGLE_OFF;
}

/*
 * Chain RDMA WRITEs for @len bytes (at most the peer's RMB and our send
 * ring) starting at byte count @pos: one WRITE per contiguous piece of the
 * RMB, its source one SGE per contiguous piece of the send ring (every
 * WRITE ends in a short packet and draws an ACK: fewer is cheaper).
 * Returns the first WR.
 */
static struct ib_send_wr *smr_tx_build_writes(struct smr_conn *conn, u64 pos,
					      u32 len,
					      struct ib_rdma_wr *wr,
					      struct ib_sge *sge)
{
	u32 ssize = conn->sndbuf->size, dsize = conn->peer_rmb_size;
	int w = 0, s = 0;

	while (len && w < SMR_TX_MAX_WRITES) {
		u32 doff = pos & (dsize - 1);
		u32 n = min(len, dsize - doff);

		memset(&wr[w], 0, sizeof(wr[w]));
		wr[w].wr.opcode = IB_WR_RDMA_WRITE;
		wr[w].wr.sg_list = &sge[s];
		wr[w].remote_addr = conn->peer_rmb_addr + doff;
		wr[w].rkey = conn->peer_rmb_rkey;
		if (w)
			wr[w - 1].wr.next = &wr[w].wr;
		len -= n;
		while (n && s < SMR_TX_PUSH_SGES) {
			u32 soff = pos & (ssize - 1);
			u32 m = min(n, ssize - soff);

			sge[s].addr = conn->sndbuf->mr->iova + soff;
			sge[s].length = m;
			sge[s].lkey = conn->sndbuf->mr->lkey;
			wr[w].wr.num_sge++;
			s++;
			pos += m;
			n -= m;
		}
		w++;
	}
	/* a push never exceeds either ring: the arrays always suffice */
	WARN_ON_ONCE(len);
	return w ? &wr[0].wr : NULL;
}

/* Copy @len bytes at byte count @pos out of the send ring into @dst. */
static void smr_tx_copy_out(const struct smr_conn *conn, u64 pos, u32 len,
			    u8 *dst)
{
	u32 size = conn->sndbuf->size, off = pos & (size - 1);
	u32 first = min(len, size - off);

	memcpy(dst, conn->sndbuf->cpu + off, first);
	memcpy(dst + first, conn->sndbuf->cpu, len - first);
}

/*
 * How many bytes to WRITE now; 0 to hold them back (coalescing). Caller
 * holds conn->lock.
 */
static u32 smr_tx_amount(struct smr_sock *smr, bool *blocked)
{
	struct smr_conn *conn = &smr->conn;
	u64 unsent = conn->tx_prod - conn->tx_sent;
	u64 room = conn->peer_rmb_size - (conn->tx_sent - conn->tx_peer_cons);
	u64 n = min(unsent, room);
	u32 hold;

	lockdep_assert_held(&conn->lock);
	*blocked = unsent > room;
	if (!n)
		return 0;
	/*
	 * nor is a ring held back that waits to be swapped for a grown one:
	 * cork and Nagle wait until it is swapped in, empty
	 */
	if (smr_conn_fin_owed(conn) || conn->tx_urg > conn->tx_sent ||
	    *blocked || conn->tx_force || conn->sndbuf_next)
		return n;
	/* corked: wait for a quarter ring, the uncork or the cork timer */
	hold = min(conn->peer_rmb_size, conn->sndbuf->size) / 4;
	if ((smr_tx_corked(smr) || conn->tx_more) && unsent < hold) {
		if (!timer_pending(&conn->cork_timer))
			sk_reset_timer(&smr->sk, &conn->cork_timer,
				       jiffies + TCP_RTO_MIN);
		return 0;
	}
	/*
	 * Nagle: while a batch is in flight, small writes gather until half
	 * a ring's worth (fewer, larger WRITEs and CDCs; two batches at most
	 * in flight keep the ring busy).
	 */
	if (!smr_tx_nodelay(smr) && conn->tx_sent != conn->tx_done &&
	    unsent < hold * 2)
		return 0;
	return n;
}

/*
 * Post @cdc after the WRITEs (or inline copy) of the next @n bytes. Apart
 * from smr_tx_push_locked() so that the many pushes that send nothing do
 * not pay for zeroing these arrays (the kernel zeroes every stack
 * variable). Caller holds conn->lock.
 */
static noinline int smr_tx_post(struct smr_sock *smr, struct smr_cdc *cdc,
				u32 n)
{
	struct smr_conn *conn = &smr->conn;
	struct ib_rdma_wr wr[SMR_TX_MAX_WRITES];
	struct ib_sge sge[SMR_TX_PUSH_SGES];
	struct ib_send_wr *writes = NULL;
	u8 data[SMR_CDC_INLINE_MAX];
	int err, fault = 0;

	lockdep_assert_held(&conn->lock);
	if (n && conn->peer_cdc_inline && n <= READ_ONCE(smr_cdc_inline_max)) {
		smr_tx_copy_out(conn, conn->tx_sent, n, data);
		cdc->inline_len = n;
	} else if (n) {
		writes = smr_tx_build_writes(conn, conn->tx_sent, n, wr, sge);
	}
	if (n)
		fault = smr_test_cdc_fault(conn, cdc, n, data);
	err = smr_link_post_cdc(conn->link, &conn->link_user, writes, cdc, data,
				conn->tx_sent + n);
	if (err)
		smr_test_cdc_fault_unsent(fault);
	return err;
}

/*
 * Send what is due: the bytes the peer's RMB has room for (coalescing
 * allowing), the consumer cursor when the peer needs it, and what closing
 * owes, in one CDC. Caller holds conn->lock.
 */
static void smr_tx_push_locked(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct smr_cdc cdc = {};
	bool blocked, all_out, cons_due;
	u8 final;
	int err;
	u32 n;

	lockdep_assert_held(&conn->lock);
	if (!smr_conn_started(conn) || !conn->link ||
	    smr_conn_final_sent(conn))
		return;
	final = smr_conn_final_owed(conn);
	/* before the peer's RMB is known only an ABORT can go */
	if (!(final & SMR_CDC_F_ABORT) && (!conn->sndbuf || !conn->peer_rmb_size))
		return;

	if (final & SMR_CDC_F_ABORT) {
		n = 0;
		blocked = false;
		cdc.flags = final;
	} else if (smr_conn_is_reset(conn)) {
		/* reset by the peer or the link: only the final CDC is owed */
		if (!final)
			return;
		n = 0;
		blocked = false;
		cdc.flags = final;
	} else {
		n = smr_tx_amount(smr, &blocked);
		all_out = conn->tx_sent + n == conn->tx_prod;
		cons_due = smr_conn_cons_update_due(conn) ||
			   (smr_conn_app_closed(conn) &&
			    conn->rx_cons != conn->rx_cons_sent);
		/* DONE once, after everything; CLOSED after everything too */
		if (all_out && smr_conn_fin_owed(conn) &&
		    !(conn->tx_flags & SMR_CDC_F_DONE_WRITING))
			cdc.flags |= SMR_CDC_F_DONE_WRITING;
		if (all_out && final)
			cdc.flags |= SMR_CDC_F_DONE_WRITING | final;
		if (!n && !cdc.flags && !cons_due && blocked == conn->tx_blocked)
			return;
		if (blocked)
			cdc.flags |= SMR_CDC_F_WRITE_BLOCKED;
		if (conn->tx_urg && conn->tx_urg <= conn->tx_sent + n) {
			cdc.flags |= SMR_CDC_F_URGENT;
			smr_cursor_from_count(conn->tx_urg - 1,
					      conn->peer_rmb_size, &cdc.urg);
		}
	}

	cdc.seq = conn->tx_seq + 1;
	cdc.token = smr->peer_token;
	smr_cursor_from_count(conn->tx_sent + n, conn->peer_rmb_size,
			      &cdc.prod);
	smr_cursor_from_count(conn->rx_cons, conn->rmb->size, &cdc.cons);

	/*
	 * -EAGAIN: pushed again when room comes back; -ENOTCONN: the link is
	 * going down and resets us.
	 */
	err = smr_tx_post(smr, &cdc, n);
	if (err)
		return;

	conn->tx_seq++;
	conn->tx_sent += n;
	if (conn->tx_sent == conn->tx_prod)
		conn->tx_force = false;
	conn->rx_cons_sent = conn->rx_cons;
	conn->tx_blocked = blocked;
	/* what went: DONE_WRITING, and the final (CLOSED, with ABORT or not) */
	conn->tx_flags |= cdc.flags & (SMR_CDC_F_DONE_WRITING |
				       SMR_CDC_F_CLOSED | SMR_CDC_F_ABORT);
	if (conn->tx_urg && conn->tx_urg <= conn->tx_sent)
		conn->tx_urg = 0;
	if (cdc.inline_len)
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_CDC_INLINE_SENT);
	if (n) {
		atomic64_add(n, &smr->rdma_bytes_sent);
		smr_stat_add(sock_net(&smr->sk), SMR_STAT_RDMA_BYTES_SENT, n);
	}
}

/* A cork held bytes back for TCP's ~200 ms: send them. Softirq. */
void smr_tx_cork_expired(struct timer_list *t)
{
	struct smr_sock *smr = from_timer(smr, t, conn.cork_timer);

	spin_lock_bh(&smr->conn.lock);
	smr->conn.tx_force = true;
	spin_unlock_bh(&smr->conn.lock);
	smr_tx_push(smr);
	sock_put(&smr->sk);	/* the timer's reference */
}

/*
 * Push, then drop conn->lock (taken with spin_lock_bh by the caller). A
 * push may finish the connection: the reference it held goes last.
 */
static void smr_tx_push_unlock(struct smr_sock *smr)
	__releases(&smr->conn.lock)
{
	struct smr_conn *conn = &smr->conn;
	u8 sent_before = conn->tx_flags;
	bool put, fin_now;

	lockdep_assert_held(&conn->lock);
	smr_tx_push_locked(smr);
	fin_now = ~sent_before & conn->tx_flags & SMR_CDC_F_DONE_WRITING;
	put = smr_close_done_locked(conn);
	spin_unlock_bh(&conn->lock);
	/* a lingering close() waits for the FIN, which may have waited for room */
	if (fin_now)
		smr_conn_wake(smr, EPOLLOUT);
	if (put)
		smr_close_put_hold(smr);
}

/* Any context. */
void smr_tx_push(struct smr_sock *smr)
{
	spin_lock_bh(&smr->conn.lock);
	smr_tx_push_unlock(smr);
}

/*
 * Whether a writer waiting for room (SOCK_NOSPACE) may go on: a third of
 * the ring free, as TCP wakes writers and pollers, or with a grown ring
 * waiting, an empty one (it is swapped in empty). Wakers clear
 * SOCK_NOSPACE only when this holds (smr_tx_write_space()): one that
 * cleared it on any other event would leave a writer that checked just
 * before asleep with nobody left to wake it. Room only grows until the
 * writer adds bytes, so once true this stays true for it, but for the
 * grown ring's arrival (smr_tx_grow_work()): a writer woken before it
 * looks again and waits, SOCK_NOSPACE set anew, for the ring to empty,
 * which it does (smr_tx_amount() sends all of a ring waiting for its
 * swap). Caller holds conn->lock.
 */
bool smr_tx_writable_locked(const struct smr_conn *conn)
{
	u64 used, free;

	lockdep_assert_held(&conn->lock);
	if (smr_conn_is_reset(conn) || !conn->sndbuf)
		return true;
	used = conn->tx_prod - conn->tx_done;
	if (conn->sndbuf_next)
		return !used;
	free = conn->sndbuf->size - used;
	return free && free >= used / 2;
}

/*
 * A writer or poller waiting for room (SOCK_NOSPACE) is woken once there
 * is enough (smr_tx_writable_locked() says why only then); completions and
 * consumer updates are no event otherwise. The O_ASYNC owner gets SIGIO
 * POLL_OUT then if it was armed, as from TCP's sk_stream_write_space():
 * SOCKWQ_ASYNC_NOSPACE, which a send that found no room and a poll that
 * found the socket not writable set while the socket is O_ASYNC
 * (sk_set_bit()), as TCP's do; not once writing is shut down. Any
 * context, no lock held; setsockopt() calls it too (the SMR sock's
 * sk_write_space in RDMA mode).
 */
void smr_tx_write_space(struct smr_sock *smr)
{
	struct sock *sk = &smr->sk;
	struct socket *sock = READ_ONCE(sk->sk_socket);
	struct socket_wq *wq;
	bool writable;

	if (!sock || !test_bit(SOCK_NOSPACE, &sock->flags))
		return;
	spin_lock_bh(&smr->conn.lock);
	writable = smr_tx_writable_locked(&smr->conn);
	spin_unlock_bh(&smr->conn.lock);
	if (!writable || !test_and_clear_bit(SOCK_NOSPACE, &sock->flags))
		return;
	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_poll(&wq->wait, EPOLLOUT | EPOLLWRNORM |
					   EPOLLWRBAND);
	rcu_read_unlock();
	if (!(READ_ONCE(sk->sk_shutdown) & SEND_SHUTDOWN))
		sk_wake_async(sk, SOCK_WAKE_SPACE, POLL_OUT);
}

static bool smr_tx_writable(struct smr_conn *conn)
{
	bool writable;

	spin_lock_bh(&conn->lock);
	writable = smr_tx_writable_locked(conn);
	spin_unlock_bh(&conn->lock);
	return writable;
}

/*
 * The ring a writer that filled its own should have: twice the peer's RMB
 * (bytes stay in the ring until their WRITE completes, so a ring no larger
 * than the RMB idles the writer through every completion; measured ~20%
 * less bulk throughput at RoCE MTU 1024), at most net.smr.buf_max. 0 when
 * there is nothing to grow: SO_SNDBUF set, or big enough already. Sock lock
 * held.
 */
static u32 smr_tx_grow_size(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	u32 want;

	sock_owned_by_me(&smr->sk);
	if (conn->tx_grown || !conn->sndbuf ||
	    (smr->tcp->sk->sk_userlocks & SOCK_SNDBUF_LOCK))
		return 0;
	want = smr_buf_size_for(min_t(u64, 2ULL * conn->peer_rmb_size, INT_MAX));
	return want > conn->sndbuf->size ? want : 0;
}

/*
 * The writer filled its ring, which should be larger: charge the new ring
 * and have smr_tx_grow_work() get it. Once per connection; on any
 * shortage (the user's limit here, memory or the device's MR size there)
 * the ring stays as it is. The new ring is charged whole until the swap
 * gives the old one's charge back: the connection holds both meanwhile.
 * The ring is ours alone (the peer only knows our RMB), so nothing is
 * announced. Sock lock held, which keeps conn->link (and its reference)
 * in place (smr.h) while the work takes its own.
 */
static void smr_tx_grow_start(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct smr_link *link = conn->link;
	u32 want = smr_tx_grow_size(smr);

	sock_owned_by_me(&smr->sk);
	conn->tx_grown = true;
	if (!want || !link)
		return;
	want = smr_buf_size_on(smr_link_pool(link), want);
	if (want <= conn->sndbuf->size)
		return;
	/* charged first: past the user's limit, nothing is allocated */
	if (smr_buf_charge_user(conn->charged_uid, want))
		return;
	conn->grow_size = want;
	smr_link_hold(link);
	conn->grow_link = link;
	smr_buf_pool_pin(smr_link_pool(link));
	sock_hold(&smr->sk);
	/* queued once per connection (tx_grown): it cannot be pending */
	WARN_ON_ONCE(!queue_work(smr_tx_wq, &conn->grow_work));
}

/*
 * Get the grown ring (see "Locking and lifetimes"): it becomes
 * conn->sndbuf_next if the connection still sends on the link, else goes
 * back to the pool with its charge. Its memory goes to conn->memcg (as the
 * handshake's buffers: none named, the worker's, the root). Process
 * context, no lock held.
 */
void smr_tx_grow_work(struct work_struct *work)
{
	struct smr_conn *conn = container_of(work, struct smr_conn, grow_work);
	struct smr_sock *smr = container_of(conn, struct smr_sock, conn);
	struct smr_link *link = conn->grow_link;
	struct smr_buf_pool *pool = smr_link_pool(link);
	struct smr_buf *bigger = ERR_PTR(-EPIPE);
	bool taken = false;

	/*
	 * Optional: nothing for a connection that stopped sending, and no
	 * wait for the link's room (a registration still waits behind what
	 * the link has in flight, which is why this is a work).
	 */
	if (READ_ONCE(conn->state) == SMR_CONN_ACTIVE)
		bigger = smr_buf_get(pool, conn->grow_size, false, conn->memcg,
				     NULL);
	if (!IS_ERR(bigger)) {
		smr_test_tx_grow_delay();
		spin_lock_bh(&conn->lock);
		if (conn->link == link && conn->state == SMR_CONN_ACTIVE) {
			conn->sndbuf_next = bigger;
			conn->user_charged += conn->grow_size;
			taken = true;
		}
		spin_unlock_bh(&conn->lock);
		if (taken) {
			/* a ring waiting for its swap holds nothing back */
			smr_tx_push(smr);
		} else {
			smr_buf_put(pool, bigger);
			smr_stat_inc(sock_net(&smr->sk),
				     SMR_STAT_SNDBUF_GROW_DROPPED);
		}
	}
	if (!taken)
		smr_buf_uncharge_user(conn->charged_uid, conn->grow_size);
	smr_buf_pool_unpin(pool);
	smr_link_put(link);
	sock_put(&smr->sk);
}

/*
 * The ring is empty and a grown one waits: swap them, and give the old
 * one back with its charge; or give the grown one back if the
 * application set SO_SNDBUF meanwhile (its size rules then). Sock lock
 * held (the writer's), which keeps conn->link in place; the ring is
 * empty, so no posted WRITE reads the old one: every CDC slot holds the
 * sock until it completes, and its WRITEs complete before it.
 */
static void smr_tx_swap(struct smr_sock *smr)
{
	bool keep = smr->tcp->sk->sk_userlocks & SOCK_SNDBUF_LOCK;
	struct smr_conn *conn = &smr->conn;
	struct smr_buf *unused;

	sock_owned_by_me(&smr->sk);
	spin_lock_bh(&conn->lock);
	if (keep) {
		unused = conn->sndbuf_next;
	} else {
		unused = conn->sndbuf;
		conn->sndbuf = conn->sndbuf_next;
	}
	conn->sndbuf_next = NULL;
	conn->user_charged -= unused->size;
	spin_unlock_bh(&conn->lock);
	smr_buf_uncharge_user(conn->charged_uid, unused->size);
	smr_buf_put(smr_link_pool(conn->link), unused);
	smr_stat_inc(sock_net(&smr->sk), keep ? SMR_STAT_SNDBUF_GROW_DROPPED :
						SMR_STAT_SNDBUF_GROWN);
}

/*
 * The application stopped writing (shutdown(SHUT_WR), close()): a grown
 * ring that waits for its swap never will be swapped in; give it back
 * with its charge rather than hold both rings until the connection ends.
 * Sock lock held, which keeps conn->link in place.
 */
void smr_tx_drop_grown(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct smr_buf *unused;

	sock_owned_by_me(&smr->sk);
	spin_lock_bh(&conn->lock);
	unused = conn->sndbuf_next;
	conn->sndbuf_next = NULL;
	if (unused)
		conn->user_charged -= unused->size;
	spin_unlock_bh(&conn->lock);
	if (!unused)
		return;
	smr_buf_uncharge_user(conn->charged_uid, unused->size);
	smr_buf_put(smr_link_pool(conn->link), unused);
	smr_stat_inc(sock_net(&smr->sk), SMR_STAT_SNDBUF_GROW_DROPPED);
}

/*
 * The reason a send cannot go on (negative errno), or 0. A pending error
 * is -EPIPE here and stays pending: a send that copied bytes returns them,
 * and the error is the next call's (sk_stream_error()), as with TCP.
 * Caller holds conn->lock.
 */
static int smr_tx_check(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;

	lockdep_assert_held(&conn->lock);
	if (READ_ONCE(sk->sk_err))
		return -EPIPE;
	/* reset, shut, closed or over: only ACTIVE takes bytes */
	if (conn->state != SMR_CONN_ACTIVE || !conn->sndbuf ||
	    (sk->sk_shutdown & SEND_SHUTDOWN))
		return -EPIPE;
	/*
	 * The peer's socket is gone. TCP would send these bytes and draw a
	 * reset, which in CLOSE_WAIT reads as EPIPE: take them, and reset.
	 */
	if (smr_conn_peer_final(conn))
		return -ESHUTDOWN;
	return 0;
}

/*
 * The ring is full, or waits to be swapped for a grown one: mark the
 * writer waiting, push what is in it and wait for room. 0 to look again,
 * or the errno that ends the send. Sock lock held (dropped while asleep).
 */
static int smr_tx_wait_room(struct smr_sock *smr, long *timeo)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;
	bool give_up;

	sock_owned_by_me(sk);
	if (smr_tx_grow_size(smr))
		smr_tx_grow_start(smr);
	give_up = !*timeo || signal_pending(current);
	/*
	 * As sk_stream_wait_memory(): a send that gives up arms SIGIO
	 * POLL_OUT (while O_ASYNC), one that sleeps disarms it. Armed before
	 * SOCK_NOSPACE is set: a completion on another CPU clears NOSPACE and
	 * then signals if armed, so the other order could wake with the
	 * signal not yet armed and leave none for later (TCP's ACKs wait
	 * for the socket lock; our completions do not).
	 */
	if (give_up)
		sk_set_bit(SOCKWQ_ASYNC_NOSPACE, sk);
	else
		sk_clear_bit(SOCKWQ_ASYNC_NOSPACE, sk);
	smp_mb__before_atomic();	/* the arming, then NOSPACE */
	set_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
	smp_mb__after_atomic();		/* NOSPACE, then the room re-read */
	smr_tx_push(smr);
	if (give_up) {
		/* room that came before NOSPACE was set woke nobody: look */
		if (smr_tx_writable(conn))
			return 0;
		return !*timeo ? -EAGAIN : sock_intr_errno(*timeo);
	}
	smr_wait_event(sk, timeo, smr_tx_writable(conn) ||
		       READ_ONCE(sk->sk_err));
	return 0;
}

/*
 * Copy @n bytes of @msg into the send ring at byte count @prod (two pieces
 * at its wrap), into space no posted WRITE reads. Sock lock held.
 */
static int smr_tx_copy_in(struct smr_buf *sndbuf, u64 prod,
			  struct msghdr *msg, u32 n)
{
	u32 off = prod & (sndbuf->size - 1);
	u32 first = min_t(u32, n, sndbuf->size - off);

	if (copy_from_iter(sndbuf->cpu + off, first, &msg->msg_iter) != first)
		return -EFAULT;
	if (n > first &&
	    copy_from_iter(sndbuf->cpu, n - first, &msg->msg_iter) != n - first)
		return -EFAULT;
	return 0;
}

int smr_tx_sendmsg(struct smr_sock *smr, struct msghdr *msg, size_t len)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;
	bool oob = msg->msg_flags & MSG_OOB;
	size_t copied = 0;
	long timeo;
	int err = 0;

	lock_sock(sk);
	timeo = sock_sndtimeo(sk, msg->msg_flags & MSG_DONTWAIT);
	/* a send disarms SIGIO POLL_OUT, as tcp_sendmsg_locked() */
	sk_clear_bit(SOCKWQ_ASYNC_NOSPACE, sk);
	while (copied < len) {
		struct smr_buf *sndbuf;
		u64 prod, space;
		bool empty, swap;
		u32 n;

		spin_lock_bh(&conn->lock);
		err = smr_tx_check(smr);
		sndbuf = conn->sndbuf;
		prod = conn->tx_prod;
		space = sndbuf ? sndbuf->size - (prod - conn->tx_done) : 0;
		empty = prod == conn->tx_done;
		swap = !!conn->sndbuf_next;
		/* broken accounting must never write past the ring */
		if (!err && sndbuf &&
		    WARN_ON_ONCE(prod - conn->tx_done > sndbuf->size))
			err = -EIO;
		if (err == -ESHUTDOWN) {
			smr_close_reset_locked(smr, EPIPE, SMR_ABORT_PEER);
			spin_unlock_bh(&conn->lock);
			smr_close_notify(smr, EPOLLERR | EPOLLHUP, true);
			copied = len;
			err = 0;
			break;
		}
		spin_unlock_bh(&conn->lock);
		if (err)
			break;

		if (swap && empty) {
			smr_tx_swap(smr);
			continue;
		}
		/* a ring to be swapped takes no more bytes until it is empty */
		if (!space || swap) {
			err = smr_tx_wait_room(smr, &timeo);
			if (err)
				break;
			continue;
		}

		n = min_t(u64, space, len - copied);
		err = smr_tx_copy_in(sndbuf, prod, msg, n);
		if (err)
			break;
		smr_test_tx_window(conn);

		/* and push (MSG_MORE / cork: held unless full), one lock */
		spin_lock_bh(&conn->lock);
		conn->tx_prod += n;
		conn->tx_more = msg->msg_flags & MSG_MORE;
		if (oob && copied + n == len)
			conn->tx_urg = conn->tx_prod;
		smr_tx_push_unlock(smr);
		copied += n;
	}
	release_sock(sk);

	if (copied) {
		atomic64_add(copied, &smr->bytes_sent);
		return copied;
	}
	/* the pending error if there is one, else EPIPE and SIGPIPE */
	return sk_stream_error(sk, msg->msg_flags, err);
}

/* Every byte and the EOF are in the peer's RMB, or never will be. */
static bool smr_tx_all_sent(const struct smr_conn *conn)
{
	return smr_conn_is_reset(conn) || !READ_ONCE(conn->link) ||
	       (READ_ONCE(conn->tx_done) == READ_ONCE(conn->tx_prod) &&
		READ_ONCE(conn->tx_flags) & SMR_CDC_F_DONE_WRITING);
}

/*
 * SO_LINGER: wait until every byte was written into the peer's RMB. Sock
 * lock held (dropped while asleep).
 */
int smr_tx_wait_sent(struct smr_sock *smr, long timeo)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;

	sock_owned_by_me(sk);
	while (timeo && !signal_pending(current)) {
		bool done;

		spin_lock_bh(&conn->lock);
		done = smr_tx_all_sent(conn);
		spin_unlock_bh(&conn->lock);
		if (done)
			return 0;
		smr_wait_event(sk, &timeo, smr_tx_all_sent(conn));
	}
	return -EAGAIN;
}
