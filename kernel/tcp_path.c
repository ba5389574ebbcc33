// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the inner TCP connection of every SMR socket.
 *
 * Every SMR socket owns a real TCP socket: it carries the connection setup,
 * and it is the data path whenever RDMA is not in use (fallback). This file
 * creates it, ties its wake-ups and errors to the SMR socket, and takes it
 * down.
 *
 * Locking and lifetimes
 * ---------------------
 * The inner socket is created with __sock_create(kern = 0) for user sockets
 * so that it holds a reference on its network namespace like any user TCP
 * socket: an orphaned inner sock may outlive the SMR socket (FIN_WAIT,
 * TIME_WAIT) and must keep its netns alive.
 *
 * Wake-ups: the inner sock's sk_wq is pointed at the SMR socket's wait queue
 * under the inner sk_callback_lock, as sock_graft() would do. TCP then wakes
 * SMR pollers (with its exact poll keys) and signals SMR's fasync owners.
 * sock_orphan() in the inner tcp_close() clears sk_wq under the same lock
 * before smr_release() returns, and the SMR socket's wait queue is freed by
 * RCU after that, so no softirq can wake a freed queue.
 *
 * Errors: SO_ERROR is read by the socket layer from the SMR sock itself, so
 * asynchronous TCP errors (refused connect, reset, timeout) are mirrored into
 * sk.sk_err by the inner sk_error_report hook. The error is reported once,
 * whichever side consumes it first: SO_ERROR (clears the SMR copy; the inner
 * copy is dropped on the next syscall, smr_tcp_err_sync()) or a TCP call
 * (returns it from the inner sock; smr_tcp_err_consumed() drops the copy).
 */
#include <linux/net.h>
#include <linux/tcp.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/tcp_states.h>

#include "smr.h"

/*
 * Raced with smr_tcp_release(): the saved callback is gone with the SMR
 * socket, so wake whoever still waits on the inner sock, as TCP would.
 */
static void smr_tcp_error_wake(struct sock *tsk)
{
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(tsk->sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_poll(&wq->wait, EPOLLERR);
	rcu_read_unlock();
	sk_wake_async(tsk, SOCK_WAKE_IO, POLL_ERR);
}

/* Softirq or process context, with the inner sock locked by TCP. */
static void smr_tcp_error_report(struct sock *tsk)
{
	void (*saved)(struct sock *sk) = NULL;
	struct smr_sock *smr;
	int err;

	read_lock_bh(&tsk->sk_callback_lock);
	smr = tsk->sk_user_data;
	if (smr) {
		saved = smr->tcp_saved_error_report;
		err = READ_ONCE(tsk->sk_err);
		if (err) {
			WRITE_ONCE(smr->tcp_err_mirrored, err);
			WRITE_ONCE(smr->sk.sk_err, err);
		}
	}
	read_unlock_bh(&tsk->sk_callback_lock);

	/* the saved callback wakes the (redirected) wait queue */
	if (saved)
		saved(tsk);
	else
		smr_tcp_error_wake(tsk);
}

/* Point @tcp's wake-ups and errors at @smr; @smr becomes its owner. */
void smr_tcp_attach(struct smr_sock *smr, struct socket *tcp)
{
	struct sock *tsk = tcp->sk;
	struct socket *sock = smr->sk.sk_socket;

	smr->tcp = tcp;
	write_lock_bh(&tsk->sk_callback_lock);
	tsk->sk_user_data = smr;
	smr->tcp_saved_error_report = tsk->sk_error_report;
	tsk->sk_error_report = smr_tcp_error_report;
	rcu_assign_pointer(tsk->sk_wq, &sock->wq);
	write_unlock_bh(&tsk->sk_callback_lock);

	smr_tcp_sync_bufs(smr);
}

int smr_tcp_create(struct smr_sock *smr, struct net *net, int protocol,
		   int kern)
{
	int family = protocol == SMRPROTO_IPV6 ? PF_INET6 : PF_INET;
	struct socket *tcp;
	int err;

	err = __sock_create(net, family, SOCK_STREAM, IPPROTO_TCP, &tcp, kern);
	if (err)
		return err;
	smr_tcp_attach(smr, tcp);
	return 0;
}

/* Give the inner socket back its own hooks and close it (TCP close rules). */
void smr_tcp_release(struct smr_sock *smr)
{
	struct socket *tcp = smr->tcp;
	struct sock *tsk;

	if (!tcp)
		return;
	tsk = tcp->sk;
	write_lock_bh(&tsk->sk_callback_lock);
	tsk->sk_user_data = NULL;
	tsk->sk_error_report = smr->tcp_saved_error_report;
	write_unlock_bh(&tsk->sk_callback_lock);

	/*
	 * ->file was lent for TCP paths that read the file's flags; the inner
	 * socket must not think it owns a file when it is released.
	 */
	WRITE_ONCE(tcp->file, NULL);
	smr->tcp = NULL;
	/* blocks here for SO_LINGER, waiting on the SMR socket's wait queue */
	sock_release(tcp);
}

/* Process context: drop the inner error if SO_ERROR consumed the SMR copy. */
void smr_tcp_err_sync(struct smr_sock *smr)
{
	int err = READ_ONCE(smr->tcp_err_mirrored);

	if (!err || READ_ONCE(smr->sk.sk_err))
		return;
	if (cmpxchg(&smr->tcp_err_mirrored, err, 0) == err)
		cmpxchg(&smr->tcp->sk->sk_err, err, 0);
}

/* A TCP call returned @ret; if that was the mirrored error, drop the copy. */
void smr_tcp_err_consumed(struct smr_sock *smr, int ret)
{
	int err = READ_ONCE(smr->tcp_err_mirrored);

	if (!err || ret != -err)
		return;
	if (cmpxchg(&smr->tcp_err_mirrored, err, 0) == err)
		cmpxchg(&smr->sk.sk_err, err, 0);
}

/* Has the inner connection ever reached ESTABLISHED? */
bool smr_tcp_was_connected(const struct smr_sock *smr)
{
	int state = READ_ONCE(smr->tcp->sk->sk_state);

	return (1 << state) & (TCPF_ESTABLISHED | TCPF_CLOSE_WAIT |
			       TCPF_FIN_WAIT1 | TCPF_FIN_WAIT2 |
			       TCPF_CLOSING | TCPF_LAST_ACK | TCPF_TIME_WAIT);
}

/*
 * getsockopt(SOL_SOCKET) reads the SMR sock, but TCP sizes its buffers
 * itself (at connect and by autotuning): show TCP's current values.
 */
void smr_tcp_sync_bufs(struct smr_sock *smr)
{
	struct sock *tsk = smr->tcp->sk;

	WRITE_ONCE(smr->sk.sk_sndbuf, READ_ONCE(tsk->sk_sndbuf));
	WRITE_ONCE(smr->sk.sk_rcvbuf, READ_ONCE(tsk->sk_rcvbuf));
}

#ifndef HAVE_SOCK_CUSTOM_SOCKOPT
/*
 * Kernels before 6.2 apply SOL_SOCKET options to the SMR sock only. Copy the
 * ones that change TCP's behaviour to the inner sock before each operation.
 * Racy against a concurrent setsockopt exactly as two threads racing
 * setsockopt and send on a TCP socket are.
 */
void smr_tcp_copy_sockopts(struct smr_sock *smr)
{
	const unsigned long flags = BIT(SOCK_LINGER) | BIT(SOCK_KEEPOPEN) |
				    BIT(SOCK_URGINLINE) | BIT(SOCK_DBG);
	struct sock *sk = &smr->sk;
	struct sock *tsk = smr->tcp->sk;
	bool keepalive = sock_flag(sk, SOCK_KEEPOPEN);

	lock_sock(tsk);
	if (keepalive != sock_flag(tsk, SOCK_KEEPOPEN))
		tcp_set_keepalive(tsk, keepalive);
	tsk->sk_flags = (tsk->sk_flags & ~flags) | (sk->sk_flags & flags);
	tsk->sk_rcvtimeo = sk->sk_rcvtimeo;
	tsk->sk_sndtimeo = sk->sk_sndtimeo;
	tsk->sk_lingertime = sk->sk_lingertime;
	tsk->sk_reuse = sk->sk_reuse;
	tsk->sk_reuseport = sk->sk_reuseport;
	tsk->sk_priority = sk->sk_priority;
	tsk->sk_mark = sk->sk_mark;
	tsk->sk_bound_dev_if = sk->sk_bound_dev_if;
	if (sk->sk_userlocks & SOCK_SNDBUF_LOCK) {
		tsk->sk_sndbuf = sk->sk_sndbuf;
		tsk->sk_userlocks |= SOCK_SNDBUF_LOCK;
	}
	if (sk->sk_userlocks & SOCK_RCVBUF_LOCK) {
		tsk->sk_rcvbuf = sk->sk_rcvbuf;
		tsk->sk_userlocks |= SOCK_RCVBUF_LOCK;
	}
	release_sock(tsk);
}
#endif
