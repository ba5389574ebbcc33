// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: receiving over RDMA.
 *
 * The peer WRITEs into our RMB and its CDC moves rx_prod (cdc.c). recvmsg()
 * copies from the ring to the application and advances rx_cons; the new
 * consumer cursor goes back to the peer with the next CDC we send anyway,
 * or on its own when the peer said it is blocked, or once a quarter of the
 * ring was freed while the peer may see less than half of it free: no
 * message per read, and none the peer has no use for.
 *
 * TCP's receive semantics are kept: SO_RCVLOWAT and MSG_WAITALL targets,
 * MSG_PEEK (one that another reader overtakes returns what it has: TCP
 * goes on from the new place) and SO_PEEK_OFF where TCP has it (6.10 on),
 * MSG_TRUNC (discard), EOF after the peer's last byte, reads stopping at
 * the urgent mark, the urgent byte out of band unless SO_OOBINLINE, and
 * TCP's errors and poll bits.
 *
 * Locking and lifetimes
 * ---------------------
 * Readers run under the SMR sock lock (one reader copies at a time, and
 * the link teardown, which frees the RMB, takes it too); cursors are read
 * and written under conn->lock. smr->rx_splicers is under the sock lock;
 * its entries live on their splicers' stacks, on it while they run.
 */
#include <linux/net.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/splice.h>
#include <asm/ioctls.h>
#include <linux/sockios.h>
#include <linux/uaccess.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "smr.h"
#include "stats.h"
#include "test_hooks.h"

/*
 * Readable bytes from @pos, stopping before the urgent byte (TCP does).
 * Caller holds conn->lock.
 */
static u64 smr_rx_avail(const struct smr_conn *conn, u64 pos, bool *at_mark)
{
	u64 avail = conn->rx_prod > pos ? conn->rx_prod - pos : 0;
	u64 mark = conn->rx_urg ? conn->rx_urg - 1 : 0;

	lockdep_assert_held(&conn->lock);
	*at_mark = conn->rx_urg && mark == pos;
	if (conn->rx_urg && mark > pos && mark - pos < avail)
		avail = mark - pos;
	return avail;
}

/*
 * SO_RCVLOWAT as far as the ring holds it, for a peek (and poll(), which
 * caps its own target the same way): a full ring is readable. A higher
 * mark would never be met while the peer waits for room (TCP grows its
 * buffer to the mark; the ring keeps the size it was given). A recv() that
 * consumes makes room as it reads, so it keeps the whole mark. Caller
 * holds conn->lock or the sock lock (either keeps the RMB).
 */
static int smr_rx_lowat(const struct smr_conn *conn, struct sock *sk,
			size_t len)
{
	int lowat = sock_rcvlowat(sk, 0, len);

	return conn->rmb ? min_t(u32, lowat, conn->rmb->size) : lowat;
}

/*
 * A reader waiting at byte count @pos (past what it peeked, or at its
 * SO_PEEK_OFF, which may lie beyond what came) has something new to look
 * at. Read without conn->lock: a wake-up condition, looked at again under
 * it.
 */
static bool smr_rx_readable(struct smr_sock *smr, u64 pos)
{
	struct smr_conn *conn = &smr->conn;

	return READ_ONCE(conn->rx_prod) > pos || smr_conn_peer_done(conn) ||
	       smr_conn_is_reset(conn) || READ_ONCE(smr->sk.sk_err) ||
	       (READ_ONCE(smr->sk.sk_shutdown) & RCV_SHUTDOWN) ||
	       !READ_ONCE(conn->rmb);
}

/* recv(MSG_OOB): the urgent byte, as TCP hands it out. */
static int smr_rx_recv_urgent(struct smr_sock *smr, struct msghdr *msg,
			      size_t len, int flags)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;
	int ret = -EINVAL;
	u8 byte;

	lock_sock(sk);
	spin_lock_bh(&conn->lock);
	if (sock_flag(sk, SOCK_URGINLINE) || !conn->rx_urg ||
	    conn->rx_urg_read) {
		ret = -EINVAL;
	} else if (conn->rx_urg - 1 >= conn->rx_prod || !conn->rmb) {
		ret = -EAGAIN;
	} else {
		byte = *((u8 *)conn->rmb->cpu +
			 ((conn->rx_urg - 1) & (conn->rmb->size - 1)));
		if (!(flags & MSG_PEEK))
			conn->rx_urg_read = true;
		ret = 1;
	}
	if (ret == -EINVAL && (sk->sk_shutdown & RCV_SHUTDOWN) &&
	    !conn->rx_urg)
		ret = 0;
	spin_unlock_bh(&conn->lock);
	release_sock(sk);

	if (ret != 1)
		return ret;
	msg->msg_flags |= MSG_OOB;
	if (len > 0) {
		if (copy_to_iter(&byte, 1, &msg->msg_iter) != 1)
			return -EFAULT;
		return 1;
	}
	msg->msg_flags |= MSG_TRUNC;
	return 0;
}

/*
 * Copy @n bytes at byte count @pos from the RMB (two pieces at the wrap).
 * The reader's sock lock keeps the RMB (the link teardown frees it under
 * that lock); the bytes are its alone until it moves rx_cons.
 */
static int smr_rx_copy(struct smr_conn *conn, struct msghdr *msg, u64 pos,
		       u32 n)
{
	u32 size = conn->rmb->size, off = pos & (size - 1);
	u32 first = min(n, size - off);

	if (copy_to_iter(conn->rmb->cpu + off, first, &msg->msg_iter) != first)
		return -EFAULT;
	if (n > first &&
	    copy_to_iter(conn->rmb->cpu, n - first, &msg->msg_iter) !=
	    n - first)
		return -EFAULT;
	return 0;
}

/*
 * The application took @n bytes: the ring has room for the peer again.
 * Returns true if the peer should hear of it now. Sock lock held.
 */
static bool smr_rx_consumed(struct smr_sock *smr, u32 n)
{
	struct smr_conn *conn = &smr->conn;
	bool due;

	sock_owned_by_me(&smr->sk);
	spin_lock_bh(&conn->lock);
	WRITE_ONCE(conn->rx_cons, conn->rx_cons + n);
	due = smr_conn_cons_update_due(conn);
	spin_unlock_bh(&conn->lock);
	atomic64_add(n, &smr->rdma_bytes_received);
	atomic64_add(n, &smr->bytes_received);
	smr_stat_add(sock_net(&smr->sk), SMR_STAT_RDMA_BYTES_RECEIVED, n);
	return due;
}

/*
 * Nothing more to read now, @copied bytes so far: whether recvmsg() waits
 * (1) or returns, with nothing to add (0) or the errno it returns when it
 * copied nothing. In TCP's order: the low-water mark, EOF after the peer's
 * FIN (it wins over a later error), a pending error (@failed), shutdown or
 * reset (@ended), the timeout, a signal. All three were read with the
 * cursors, under conn->lock: a CDC that brings the peer's last bytes and
 * its EOF or reset together sets them under that lock, and a look after
 * the cursors would take that EOF or error for one before those bytes (an
 * error that comes later wakes the wait). Sock lock held.
 */
static int smr_rx_wait_verdict(struct smr_sock *smr, size_t copied,
			       int target, bool eof, bool failed, bool ended,
			       long timeo)
{
	struct sock *sk = &smr->sk;

	sock_owned_by_me(sk);
	if (copied >= target || eof)
		return 0;
	if (failed)
		return copied ? 0 : sock_error(sk);
	if (ended)
		return 0;
	if (!timeo)
		return -EAGAIN;
	if (signal_pending(current))
		return sock_intr_errno(timeo);
	return 1;
}

/*
 * splice_read() copies through recvmsg() (the generic page-by-page copy),
 * but leaves SO_PEEK_OFF alone as TCP's does: the reads it makes know it
 * by their task. Several tasks may splice at once, as on TCP.
 */
struct smr_rx_splicer {
	struct list_head	node;
	struct task_struct	*task;
};

ssize_t smr_rx_splice_read(struct smr_sock *smr, struct socket *sock,
			   loff_t *ppos, struct pipe_inode_info *pipe,
			   size_t len, unsigned int flags)
{
	struct smr_rx_splicer me = { .task = current };
	struct sock *sk = &smr->sk;
	ssize_t ret;

	lock_sock(sk);
	list_add(&me.node, &smr->rx_splicers);
	release_sock(sk);
	ret = copy_splice_read(sock->file, ppos, pipe, len, flags);
	lock_sock(sk);
	list_del(&me.node);
	release_sock(sk);
	return ret;
}

/* Is this read one of splice_read()'s? Sock lock held. */
static bool smr_rx_splicing(struct smr_sock *smr)
{
	struct smr_rx_splicer *s;

	sock_owned_by_me(&smr->sk);
	list_for_each_entry(s, &smr->rx_splicers, node)
		if (s->task == current)
			return true;
	return false;
}

/*
 * Where a read continues: at rx_cons, or a peek past what it peeked
 * (@peek_pos; 0 before its first look, or while it is still at byte 0),
 * its first look @peek_off (SO_PEEK_OFF) bytes past rx_cons. While a peek
 * sleeps another reader may consume: past the peeked bytes, the peek
 * starts again at rx_cons (and its offset) if it has nothing yet, else it
 * ends (-EAGAIN) with what it has (TCP goes on from the new place). A
 * read behind rx_cons or ahead of rx_prod would read bytes the peer never
 * wrote, and past the ring; a peek ahead of rx_prod waits there for them.
 * Caller holds conn->lock.
 */
static int smr_rx_read_pos(struct smr_conn *conn, int flags, u64 *peek_pos,
			   u32 peek_off, size_t copied, u64 *pos)
{
	lockdep_assert_held(&conn->lock);
	*pos = conn->rx_cons;
	if (flags & MSG_PEEK) {
		if (*peek_pos && *peek_pos < conn->rx_cons && copied)
			return -EAGAIN;
		if (*peek_pos && *peek_pos >= conn->rx_cons)
			*pos = *peek_pos;
		else
			*pos += peek_off;
		*peek_pos = *pos;
		return 0;
	}
	/* broken accounting: never read where the peer did not write */
	if (WARN_ON_ONCE(*pos > conn->rx_prod))
		return -EIO;
	return 0;
}

int smr_rx_recvmsg(struct smr_sock *smr, struct msghdr *msg, size_t len,
		   int flags)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;
	u64 peek_pos = 0;
	size_t copied = 0;
	u32 peek_off;
	long timeo;
	int target, err = 0;
	bool push = false;

	if (flags & MSG_OOB)
		return smr_rx_recv_urgent(smr, msg, len, flags);

	lock_sock(sk);
	/* SO_PEEK_OFF (-1: off), which TCP keeps under the sock lock too */
	peek_off = max(sk_peek_offset(sk, flags), 0);
	timeo = sock_rcvtimeo(sk, flags & MSG_DONTWAIT);
	if (flags & MSG_WAITALL)
		target = sock_rcvlowat(sk, 1, len);
	else if (flags & MSG_PEEK)
		target = smr_rx_lowat(conn, sk, len);
	else
		target = sock_rcvlowat(sk, 0, len);
	do {
		bool at_mark, eof, failed, ended;
		u64 pos, avail;
		u32 n;

		spin_lock_bh(&conn->lock);
		err = smr_rx_read_pos(conn, flags, &peek_pos, peek_off, copied,
				      &pos);
		if (err) {
			spin_unlock_bh(&conn->lock);
			if (err == -EAGAIN)
				err = 0;	/* ends with what it copied */
			break;
		}
		avail = conn->rmb ? smr_rx_avail(conn, pos, &at_mark) : 0;
		if (avail && at_mark && copied) {
			/* TCP stops at the mark, the urgent byte in line or not */
			spin_unlock_bh(&conn->lock);
			break;
		}
		if (avail && at_mark && signal_pending(current)) {
			/* nor goes on from it with a signal (SIGURG?) pending */
			spin_unlock_bh(&conn->lock);
			err = timeo ? sock_intr_errno(timeo) : -EAGAIN;
			break;
		}
		if (avail && at_mark && !sock_flag(sk, SOCK_URGINLINE)) {
			/* out of band: a read from the mark skips the byte */
			if (flags & MSG_PEEK)
				peek_pos++;
			else
				WRITE_ONCE(conn->rx_cons, conn->rx_cons + 1);
			spin_unlock_bh(&conn->lock);
			continue;
		}
		eof = smr_conn_peer_done(conn) && pos >= conn->rx_prod;
		failed = READ_ONCE(sk->sk_err);
		ended = smr_conn_is_reset(conn) || !conn->rmb ||
			(READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN);
		spin_unlock_bh(&conn->lock);
		if (!avail && !eof)
			smr_test_rx_window(conn);

		if (avail) {
			n = min_t(u64, avail, len - copied);
			if (!(flags & MSG_TRUNC)) {
				err = smr_rx_copy(conn, msg, pos, n);
				if (err)
					break;
			}
			copied += n;
			if (flags & MSG_PEEK) {
				peek_pos += n;
				sk_peek_offset_fwd(sk, n);
				continue;
			}
			if (!smr_rx_splicing(smr))
				sk_peek_offset_bwd(sk, n);
			if (smr_rx_consumed(smr, n))
				push = true;
			continue;
		}

		err = smr_rx_wait_verdict(smr, copied, target, eof, failed,
					  ended, timeo);
		if (err <= 0)
			break;
		err = 0;
		if (push) {
			smr_tx_push(smr);
			push = false;
		}
		smr_wait_event(sk, &timeo,
			       smr_rx_readable(smr, flags & MSG_PEEK ? peek_pos :
					       READ_ONCE(conn->rx_cons)));
	} while (copied < len);
	release_sock(sk);
	if (push)
		smr_tx_push(smr);
	if (copied)
		return copied;
	return err;
}

/*
 * What is queued meets SO_RCVLOWAT: poll()'s EPOLLIN for data. As
 * tcp_poll(): the mark counts all that is queued, one more at an urgent
 * byte that recv() skips (out of band, read or not: alone, it is nothing
 * to read); as far as the ring holds. Caller holds conn->lock.
 */
static bool smr_rx_lowat_met(const struct smr_conn *conn, struct sock *sk)
{
	u64 queued = conn->rx_prod - conn->rx_cons;
	u32 target = sock_rcvlowat(sk, 0, INT_MAX);
	bool at_mark;

	lockdep_assert_held(&conn->lock);
	if (!conn->rmb || !queued)
		return false;
	smr_rx_avail(conn, conn->rx_cons, &at_mark);
	if (at_mark && !sock_flag(sk, SOCK_URGINLINE))
		target++;
	return queued >= min_t(u64, target, conn->rmb->size);
}

/*
 * SO_RCVLOWAT was set: as tcp_set_rcvlowat(), waiters hear of it when
 * what is queued meets the new mark (a lower one may make it readable
 * now) or the peer's EOF came, and not otherwise. Without a ring (TCP
 * carries the bytes) TCP's own wake-up reaches our waiters
 * (smr_tcp_sync_rcvlowat()). Any context but hard IRQ.
 */
void smr_rx_lowat_changed(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	bool met;

	spin_lock_bh(&conn->lock);
	met = READ_ONCE(smr->mode) == SMR_MODE_RDMA && conn->rmb &&
	      (smr_rx_lowat_met(conn, &smr->sk) || smr_conn_peer_done(conn));
	spin_unlock_bh(&conn->lock);
	if (met)
		smr_conn_wake(smr, EPOLLIN | EPOLLRDNORM);
}

__poll_t smr_rx_poll(struct smr_sock *smr)
{
	struct smr_conn *conn = &smr->conn;
	struct sock *sk = &smr->sk;
	u8 shutdown = READ_ONCE(sk->sk_shutdown);
	__poll_t mask = 0;

	spin_lock_bh(&conn->lock);
	if (shutdown == SHUTDOWN_MASK)
		mask |= EPOLLHUP;
	if (shutdown & RCV_SHUTDOWN)
		mask |= EPOLLIN | EPOLLRDNORM | EPOLLRDHUP;
	if (conn->rmb) {
		if (smr_rx_lowat_met(conn, sk))
			mask |= EPOLLIN | EPOLLRDNORM;
		if (conn->rx_urg && !conn->rx_urg_read &&
		    conn->rx_urg - 1 >= conn->rx_cons)
			mask |= EPOLLPRI;
	}
	if (!(shutdown & SEND_SHUTDOWN)) {
		/*
		 * As TCP: writable once a third of the queue is free (and a
		 * ring whose grown successor waits, once it is empty:
		 * smr_tx_writable_locked()).
		 */
		if (conn->sndbuf) {
			if (smr_tx_writable_locked(conn)) {
				mask |= EPOLLOUT | EPOLLWRNORM;
			} else {	/* SIGIO later, as tcp_poll() */
				sk_set_bit(SOCKWQ_ASYNC_NOSPACE, sk);
				set_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
			}
		}
	} else {
		mask |= EPOLLOUT | EPOLLWRNORM;
	}
	spin_unlock_bh(&conn->lock);
	if (READ_ONCE(sk->sk_err))
		mask |= EPOLLERR;
	return mask;
}

/* SIOCINQ, SIOCOUTQ, SIOCOUTQNSD and SIOCATMARK; others go to TCP. */
int smr_rx_ioctl(struct smr_sock *smr, unsigned int cmd, unsigned long arg)
{
	struct smr_conn *conn = &smr->conn;
	bool at_mark;
	u64 val;

	spin_lock_bh(&conn->lock);
	switch (cmd) {
	case SIOCINQ:
		val = conn->rx_prod - conn->rx_cons;
		if (conn->rx_urg && conn->rx_urg - 1 >= conn->rx_cons &&
		    conn->rx_urg - 1 < conn->rx_prod &&
		    !sock_flag(&smr->sk, SOCK_URGINLINE))
			val--;	/* TCP does not count the urgent byte */
		break;
	case SIOCOUTQ:
		val = conn->tx_prod - conn->tx_done;
		break;
	case SIOCOUTQNSD:
		val = conn->tx_prod - conn->tx_sent;
		break;
	case SIOCATMARK:
		smr_rx_avail(conn, conn->rx_cons, &at_mark);
		val = at_mark;
		break;
	default:
		spin_unlock_bh(&conn->lock);
		return -ENOIOCTLCMD;
	}
	spin_unlock_bh(&conn->lock);
	return put_user(min_t(u64, val, INT_MAX), (int __user *)arg);
}
