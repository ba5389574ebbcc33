// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the socket's data path, chosen once when its mode is decided: one
 * ops table per mode (struct smr_transport), as RDS's rds_transport.
 *
 *   pending  the mode is not decided for the application yet: what must
 *            wait for the negotiation waits (as TCP does while it
 *            connects), then goes to the transport that came out of it;
 *            what does not wait is TCP's
 *   tcp      everything is the inner TCP socket's: errnos, poll masks,
 *            blocking and signals are TCP's own
 *   rdma     sending, receiving, poll, the queue ioctls and shutdown are
 *            the RDMA connection's (tx.c, rx.c, close.c); the inner TCP
 *            connection stays the control channel
 *
 * The socket starts on the pending transport; smr_transport_settle()
 * switches to the mode's once the negotiation is over (the handshake
 * calls it right before it says so), and connect(AF_UNSPEC) leaves RDMA
 * for TCP. The mode itself is decided once, by smr_set_mode().
 *
 * Locking and lifetimes
 * ---------------------
 * smr->transport is written with WRITE_ONCE() before the handshake
 * publishes SMR_HS_DONE (a release) and read with READ_ONCE() after
 * smr_hs_pending() (an acquire) said so; a caller that finds the pending
 * transport after that is a socket that never negotiated. Each op is
 * called with no lock held and takes what it needs (rx.c, tx.c: the sock
 * lock). The tables are const and live as long as the module.
 */
#include <linux/net.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/splice.h>
#include <linux/tcp.h>
#include <net/sock.h>
#include <net/tcp_states.h>

#include "smr.h"
#include "stats.h"
#include "test_hooks.h"
#include "tcp_path.h"
#include "transport.h"

static const struct smr_transport smr_transport_pending;
static const struct smr_transport smr_transport_tcp;
static const struct smr_transport smr_transport_rdma;

void smr_transport_init(struct smr_sock *smr)
{
	smr->transport = &smr_transport_pending;
}

/*
 * The negotiation is over (or never was): the socket's mode picks its
 * transport. Before the handshake's release store of SMR_HS_DONE.
 */
void smr_transport_settle(struct smr_sock *smr)
{
	const struct smr_transport *t;

	switch (READ_ONCE(smr->mode)) {
	case SMR_MODE_RDMA:
		t = &smr_transport_rdma;
		break;
	case SMR_MODE_TCP:
		t = &smr_transport_tcp;
		break;
	default:
		t = &smr_transport_pending;	/* reset by the handshake */
		break;
	}
	WRITE_ONCE(smr->transport, t);
}

/* The mode is decided, once: RDMA, or TCP for @reason. Counted. */
void smr_set_mode(struct smr_sock *smr, enum smr_mode mode,
		  enum smr_reason reason)
{
	struct net *net = sock_net(&smr->sk);

	WRITE_ONCE(smr->reason, reason);
	if (cmpxchg(&smr->mode, SMR_MODE_PENDING, mode) != SMR_MODE_PENDING)
		return;
	/* a connect settles here, blocking or not (accepts count in accept) */
	if (smr->connecting) {
		WRITE_ONCE(smr->sk.sk_state, TCP_ESTABLISHED);
		smr_stat_inc(net, SMR_STAT_CONNECTS);
	}
	smr_stat_inc(net, mode == SMR_MODE_RDMA ? SMR_STAT_MODE_RDMA :
						  SMR_STAT_MODE_TCP);
	if (mode == SMR_MODE_TCP)
		smr_stat_inc(net, SMR_STAT_FALLBACK_FIRST + reason);
}

/*
 * A connection found established without a negotiation (none was started
 * for it) settles on TCP with that reason.
 */
void smr_mode_refresh(struct smr_sock *smr)
{
	if (READ_ONCE(smr->mode) != SMR_MODE_PENDING ||
	    READ_ONCE(smr->hs_state) != SMR_HS_IDLE ||
	    READ_ONCE(smr->sk.sk_state) == TCP_LISTEN)
		return;
	if (!smr_tcp_was_connected(smr))
		return;
	smr_set_mode(smr, SMR_MODE_TCP, SMR_REASON_NOT_NEGOTIATED);
	smr_transport_settle(smr);
	smr_tcp_settled(smr, false);
}

/*
 * Wait until the negotiation decided (blocking send/recv/connect on a
 * socket still negotiating). Returns 0, -EAGAIN (@timeo 0 or expired) or
 * a signal errno, like TCP waiting for its connection.
 */
int smr_wait_decided(struct smr_sock *smr, long timeo)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct sock *sk = &smr->sk;
	int err = 0;

	if (!smr_hs_pending(smr))
		return 0;
	if (!timeo)
		return -EAGAIN;
	add_wait_queue(sk_sleep(sk), &wait);
	while (smr_hs_pending(smr)) {
		if (signal_pending(current)) {
			err = sock_intr_errno(timeo);
			break;
		}
		if (!timeo) {
			err = -EAGAIN;
			break;
		}
		timeo = wait_woken(&wait, TASK_INTERRUPTIBLE, timeo);
	}
	remove_wait_queue(sk_sleep(sk), &wait);
	return err;
}

/* ---- tcp: the inner TCP socket does it all ---- */

static void smr_tcp_count_bytes(struct smr_sock *smr, int ret, bool sent)
{
	struct net *net = sock_net(&smr->sk);

	if (ret <= 0)
		return;
	if (sent) {
		atomic64_add(ret, &smr->bytes_sent);
		smr_stat_add(net, SMR_STAT_TCP_BYTES_SENT, ret);
	} else {
		atomic64_add(ret, &smr->bytes_received);
		smr_stat_add(net, SMR_STAT_TCP_BYTES_RECEIVED, ret);
	}
	smr_mode_refresh(smr);
}

static int smr_tcp_sendmsg(struct smr_sock *smr, struct msghdr *msg,
			   size_t len)
{
	struct socket *tcp = smr->tcp;
	int ret;

	ret = tcp->ops->sendmsg(tcp, msg, len);
	smr_tcp_err_consumed(smr, ret);
	smr_tcp_count_bytes(smr, ret, true);
	return ret;
}

static int smr_tcp_recvmsg(struct smr_sock *smr, struct msghdr *msg,
			   size_t len, int flags)
{
	struct socket *tcp = smr->tcp;
	int peek_off = READ_ONCE(smr->sk.sk_peek_off);
	int moved, ret;

	ret = tcp->ops->recvmsg(tcp, msg, len, flags);
	smr_tcp_err_consumed(smr, ret);
	if (!(flags & (MSG_PEEK | MSG_ERRQUEUE)))
		smr_tcp_count_bytes(smr, ret, false);
	/*
	 * Settled on TCP, TCP's read moved the peek offset it was given
	 * (smr_tcp_sync_peek_off()); getsockopt() reads the SMR sock's. A
	 * read never turns an offset off: an inner -1 is one not given yet
	 * (the socket is settling, or listens), and an offset the
	 * application set meanwhile stays.
	 */
	moved = READ_ONCE(tcp->sk->sk_peek_off);
	if (READ_ONCE(smr->mode) == SMR_MODE_TCP && !(flags & MSG_ERRQUEUE) &&
	    peek_off >= 0 && moved >= 0)
		cmpxchg(&smr->sk.sk_peek_off, peek_off, moved);
	return ret;
}

/*
 * TCP paths that read the socket file's flags (splice) must find the SMR
 * socket's file on the inner socket. The value never changes once set and
 * is cleared before the inner socket is released.
 */
static void smr_tcp_lend_file(struct socket *sock, struct socket *tcp)
{
	if (unlikely(!READ_ONCE(tcp->file)) && sock->file)
		WRITE_ONCE(tcp->file, sock->file);
}

static ssize_t smr_tcp_splice_read(struct smr_sock *smr, struct socket *sock,
				   loff_t *ppos, struct pipe_inode_info *pipe,
				   size_t len, unsigned int flags)
{
	struct socket *tcp = smr->tcp;
	ssize_t ret;

	smr_tcp_lend_file(sock, tcp);
	ret = tcp->ops->splice_read(tcp, ppos, pipe, len, flags);
	smr_tcp_err_consumed(smr, ret);
	smr_tcp_count_bytes(smr, ret, false);
	return ret;
}

static __poll_t smr_tcp_poll(struct smr_sock *smr, struct file *file)
{
	struct socket *tcp = smr->tcp;
	__poll_t mask;

	mask = tcp->ops->poll(file, tcp, NULL);
	if (READ_ONCE(smr->sk.sk_err))
		mask |= EPOLLERR;
	smr_mode_refresh(smr);
	return mask;
}

static int smr_tcp_ioctl(struct smr_sock *smr, unsigned int cmd,
			 unsigned long arg)
{
	return smr->tcp->ops->ioctl(smr->tcp, cmd, arg);
}

/*
 * TCP's answer and state are the socket's. In SYN_SENT TCP disconnects
 * (inet_shutdown()), which turns the peek offset off (tcp_disconnect()):
 * the application's is the SMR sock's, so it goes too.
 */
static int smr_tcp_shutdown(struct smr_sock *smr, int how)
{
	struct socket *tcp = smr->tcp;
	bool syn_sent = READ_ONCE(tcp->sk->sk_state) == TCP_SYN_SENT;
	int err;

	err = tcp->ops->shutdown(tcp, how);
	/*
	 * Disconnected: it was in SYN_SENT and is unconnected without an
	 * error (not a listener, nor a connect that completed meanwhile)
	 */
	if (!err && syn_sent && READ_ONCE(tcp->state) == SS_UNCONNECTED)
		WRITE_ONCE(smr->sk.sk_peek_off, -1);
	return err;
}

static void smr_tcp_option_set(struct smr_sock *smr, int level, int optname)
{
}

static void smr_tcp_disconnect(struct smr_sock *smr)
{
}

/* TCP wakes the SMR socket's waiters: its events are the socket's */
static void smr_tcp_accepted(struct smr_sock *smr, struct socket *sock)
{
	smr_tcp_redirect_wq(smr, sock);
}

/* A handshake cut short gives back what it took; TCP closes as it would. */
static bool smr_tcp_release_conn(struct smr_sock *smr, bool reset)
{
	smr_conn_unprepare(smr);
	return false;
}

static const struct smr_transport smr_transport_tcp = {
	.mode		= SMR_MODE_TCP,
	.sendmsg	= smr_tcp_sendmsg,
	.recvmsg	= smr_tcp_recvmsg,
	.splice_read	= smr_tcp_splice_read,
	.poll		= smr_tcp_poll,
	.ioctl		= smr_tcp_ioctl,
	.shutdown	= smr_tcp_shutdown,
	.option_set	= smr_tcp_option_set,
	.disconnect	= smr_tcp_disconnect,
	.accepted	= smr_tcp_accepted,
	.release	= smr_tcp_release_conn,
};

/* ---- pending: wait for the negotiation where TCP would wait to connect ---- */

/* The transport the negotiation chose, TCP's if it chose none. */
static const struct smr_transport *smr_transport_decided(struct smr_sock *smr)
{
	const struct smr_transport *t = smr_transport(smr);

	return t == &smr_transport_pending ? &smr_transport_tcp : t;
}

static int smr_pending_sendmsg(struct smr_sock *smr, struct msghdr *msg,
			       size_t len)
{
	int err;

	err = smr_wait_decided(smr, sock_sndtimeo(&smr->sk, msg->msg_flags &
						  MSG_DONTWAIT));
	if (err)
		return err;
	return smr_transport_decided(smr)->sendmsg(smr, msg, len);
}

static int smr_pending_recvmsg(struct smr_sock *smr, struct msghdr *msg,
			       size_t len, int flags)
{
	int err;

	err = smr_wait_decided(smr, sock_rcvtimeo(&smr->sk,
						  flags & MSG_DONTWAIT));
	if (err)
		return err;
	return smr_transport_decided(smr)->recvmsg(smr, msg, len, flags);
}

static ssize_t smr_pending_splice_read(struct smr_sock *smr,
				       struct socket *sock, loff_t *ppos,
				       struct pipe_inode_info *pipe,
				       size_t len, unsigned int flags)
{
	bool nonblock = (flags & SPLICE_F_NONBLOCK) ||
			(sock->file && (sock->file->f_flags & O_NONBLOCK));
	int err;

	err = smr_wait_decided(smr, sock_rcvtimeo(&smr->sk, nonblock));
	if (err)
		return err;
	return smr_transport_decided(smr)->splice_read(smr, sock, ppos, pipe,
						       len, flags);
}

/*
 * TCP is connected but the negotiation is not done: as TCP while its
 * connect is under way. Before and after that, the decided transport's.
 */
static __poll_t smr_pending_poll(struct smr_sock *smr, struct file *file)
{
	if (smr_hs_pending(smr) && !READ_ONCE(smr->sk.sk_err) &&
	    smr_tcp_was_connected(smr))
		return 0;
	return smr_transport_decided(smr)->poll(smr, file);
}

static const struct smr_transport smr_transport_pending = {
	.mode		= SMR_MODE_PENDING,
	.sendmsg	= smr_pending_sendmsg,
	.recvmsg	= smr_pending_recvmsg,
	.splice_read	= smr_pending_splice_read,
	.poll		= smr_pending_poll,
	.ioctl		= smr_tcp_ioctl,
	.shutdown	= smr_tcp_shutdown,
	.option_set	= smr_tcp_option_set,
	.disconnect	= smr_tcp_disconnect,
	.accepted	= smr_tcp_accepted,
	.release	= smr_tcp_release_conn,
};

/* ---- rdma: the RDMA connection carries the bytes ---- */

static int smr_rdma_recvmsg(struct smr_sock *smr, struct msghdr *msg,
			    size_t len, int flags)
{
	/* the error queue is the inner socket's (timestamps, zerocopy) */
	if (flags & MSG_ERRQUEUE)
		return smr_tcp_recvmsg(smr, msg, len, flags);
	return smr_rx_recvmsg(smr, msg, len, flags);
}

static ssize_t smr_rdma_splice_read(struct smr_sock *smr, struct socket *sock,
				    loff_t *ppos, struct pipe_inode_info *pipe,
				    size_t len, unsigned int flags)
{
	if (!sock->file)
		return smr_tcp_splice_read(smr, sock, ppos, pipe, len, flags);
	return smr_rx_splice_read(smr, sock, ppos, pipe, len, flags);
}

static __poll_t smr_rdma_poll(struct smr_sock *smr, struct file *file)
{
	return smr_rx_poll(smr);
}

/* SIOCINQ and friends are the ring's; the rest are TCP's. */
static int smr_rdma_ioctl(struct smr_sock *smr, unsigned int cmd,
			  unsigned long arg)
{
	int err = smr_rx_ioctl(smr, cmd, arg);

	if (err != -ENOIOCTLCMD)
		return err;
	return smr_tcp_ioctl(smr, cmd, arg);
}

/*
 * The inner TCP connection shuts down alongside (its FIN carries no data:
 * EOF itself travels in the CDC), so its state and TCP's answer (EINVAL,
 * ENOTCONN once closed) are TCP's own. Shutting down writing takes the
 * sock lock, as TCP's does: a send that copied its bytes but did not
 * commit them yet holds it, and they go before the EOF, never after.
 */
static int smr_rdma_shutdown(struct smr_sock *smr, int how)
{
	int err;

	err = smr_tcp_shutdown(smr, how);
	if (err)
		return err;
	how++;		/* SHUT_RD 0 -> RCV_SHUTDOWN ... */
	if (how & RCV_SHUTDOWN)
		smr_close_shutdown_rd(smr);
	if (how & SEND_SHUTDOWN) {
		lock_sock(&smr->sk);
		smr_test_shutdown_window(&smr->conn);
		smr_close_shutdown_wr(smr);
		smr_tx_drop_grown(smr);
		release_sock(&smr->sk);
		smr_tx_push(smr);
	}
	/* our own shutdown: pollers look again, nobody is signalled (TCP's) */
	smr_conn_wake_sleepers(smr, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
	return 0;
}

/* uncorking or TCP_NODELAY sends what was held back */
static void smr_rdma_option_set(struct smr_sock *smr, int level, int optname)
{
	if (level == SOL_TCP && (optname == TCP_CORK || optname == TCP_NODELAY))
		smr_tx_push(smr);
}

/* Its own socket takes the inner TCP's events: they are no SMR events. */
static void smr_rdma_accepted(struct smr_sock *smr, struct socket *sock)
{
	smr_tcp_redirect_wq(smr, smr->tcp);
}

/*
 * The application closed the socket (process context, sock lock not
 * held; @reset: a connection no application will see, or a disconnect).
 * Unread data or SO_LINGER 0 reset the connection as TCP does; otherwise
 * what was written is delivered before EOF, in the background, or before
 * close() returns under SO_LINGER. Returns true if the connection was
 * reset: the inner TCP resets too.
 */
static bool smr_rdma_release(struct smr_sock *smr, bool reset)
{
	struct sock *sk = &smr->sk;
	bool linger;

	if (reset)
		smr_conn_abort(smr, SMR_ABORT_LOCAL);
	lock_sock(sk);
	linger = smr_close_app(smr);
	smr_tx_drop_grown(smr);
	smr_tx_push(smr);
	if (linger)
		smr_tx_wait_sent(smr, sk->sk_lingertime);
	release_sock(sk);
	return smr_close_app_done(smr);
}

/*
 * connect(AF_UNSPEC): TCP resets the connection and the socket may connect
 * again. The RDMA connection is reset and let go (its final CDC and
 * buffers finish in the background); the socket carries on as TCP.
 */
static void smr_rdma_disconnect(struct smr_sock *smr)
{
	smr_rdma_release(smr, true);
	WRITE_ONCE(smr->reason, SMR_REASON_NOT_NEGOTIATED);
	WRITE_ONCE(smr->mode, SMR_MODE_TCP);
	WRITE_ONCE(smr->transport, &smr_transport_tcp);
	if (smr->sk.sk_socket) {
		/*
		 * the ring's SOCK_NOSPACE goes with it: a late completion of
		 * the old connection wakes nobody and signals no POLL_OUT
		 * (smr_tx_write_space()); TCP sets its own socket's
		 */
		clear_bit(SOCK_NOSPACE, &smr->sk.sk_socket->flags);
		smr_tcp_redirect_wq(smr, smr->sk.sk_socket);
	}
	smr_tcp_settled(smr, false);
}

static const struct smr_transport smr_transport_rdma = {
	.mode		= SMR_MODE_RDMA,
	.sendmsg	= smr_tx_sendmsg,
	.recvmsg	= smr_rdma_recvmsg,
	.splice_read	= smr_rdma_splice_read,
	.poll		= smr_rdma_poll,
	.ioctl		= smr_rdma_ioctl,
	.shutdown	= smr_rdma_shutdown,
	.option_set	= smr_rdma_option_set,
	.disconnect	= smr_rdma_disconnect,
	.accepted	= smr_rdma_accepted,
	.release	= smr_rdma_release,
};
