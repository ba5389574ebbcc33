// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the AF_SMR address family and its socket operations.
 *
 * An SMR socket presents TCP's exact semantics. Its data path is its
 * transport (transport.c), chosen once when the mode is decided: until a
 * connection has negotiated an RDMA path it is served by its inner TCP
 * socket (tcp_path.c), whose answers, errnos, poll masks and blocking
 * behaviour are TCP's own. The operations here never ask for the mode:
 * what differs between the paths is the transport's. (The SMR sock's
 * sk_write_space asks which transport it has: only RDMA's ring is SMR's.)
 *
 * A listening SMR socket drains its inner TCP accept queue from a work
 * item, negotiates with each child (handshake.c) and queues the decided
 * ones for accept(), so accept() and EPOLLIN only ever see connections
 * whose mode is settled.
 *
 * Locking and lifetimes
 * ---------------------
 * See smr.h for the smr_sock fields and locks. The SMR sock lock is not
 * held across calls into the inner socket (they lock the inner sock and may
 * block). The module reference of every open socket is held through
 * proto_ops.owner; children that have no file yet are owned by their
 * listener, whose release cancels and frees them, so none outlives the
 * module. accept() grafts a child under the child's sock lock and never
 * holds the listener's sock lock (the accept lists have their own locks).
 */
#include <linux/module.h>
#include <linux/net.h>
#include <linux/poll.h>
#include <linux/splice.h>
#include <linux/tcp.h>
#include <linux/uaccess.h>
#include <net/inet_connection_sock.h>
#include <net/inet_common.h>
#include <net/sock.h>
#include <net/tcp_states.h>

#include "af_smr.h"
#include "handshake.h"
#include "smr.h"
#include "stats.h"
#include "tcp_path.h"
#include "transport.h"

static struct proto smr_proto = {
	.name		= "SMR",
	.owner		= THIS_MODULE,
	.obj_size	= sizeof(struct smr_sock),
};

static const struct proto_ops smr_proto_ops;
static const struct proto_ops smr_proto_ops_peek_off;
static void smr_accept_work(struct work_struct *work);
static void smr_listener_set_inner_backlog(struct smr_sock *lsmr);
static void smr_child_free_later(struct smr_sock *child);

/* The last reference is gone: nothing can find the sock any more. */
static void smr_sock_destruct(struct sock *sk)
{
	smr_conn_destruct(smr_sk(sk));
}

/*
 * setsockopt(SO_SNDBUF) calls this. The SMR sock's own send queue is
 * always empty, so sock_def_write_space() found it writable every time
 * and woke pollers and signalled its owner (POLL_OUT) while the socket
 * was full; what poll() reports is the transport's. In RDMA mode the send
 * ring decides; otherwise the inner TCP socket does: TCP's own
 * write_space ran for the option it took (smr_setsockopt()), or, where
 * the option reached the SMR sock only (before 6.2), runs now.
 */
static void smr_sock_write_space(struct sock *sk)
{
	struct smr_sock *smr = smr_sk(sk);

	if (smr_transport(smr)->mode == SMR_MODE_RDMA)
		smr_tx_write_space(smr);
	else
		smr_tcp_sockopt_write_space(smr);
}

static struct sock *smr_sock_alloc(struct net *net, struct socket *sock,
				   int protocol, int kern)
{
	struct smr_sock *smr;
	struct sock *sk;

	sk = sk_alloc(net, smr_family, GFP_KERNEL, &smr_proto, kern);
	if (!sk)
		return NULL;
	sock_init_data(sock, sk);
	sk->sk_destruct = smr_sock_destruct;
	sk->sk_write_space = smr_sock_write_space;
	sk->sk_type = SOCK_STREAM;	/* children are made without a socket */
	sk->sk_protocol = protocol;
	sk->sk_state = TCP_CLOSE;
	smr = smr_sk(sk);
	smr->mode = SMR_MODE_PENDING;
	smr->reason = SMR_REASON_NONE;
	smr_transport_init(smr);
	atomic64_set(&smr->bytes_sent, 0);
	atomic64_set(&smr->bytes_received, 0);
	atomic64_set(&smr->rdma_bytes_sent, 0);
	atomic64_set(&smr->rdma_bytes_received, 0);
	smr_hs_init_sock(smr);
	smr_conn_init(smr);
	/* a child is owned like its listener: smr_child_new() */
	if (sock)
		smr_conn_owner_init(smr);
	INIT_LIST_HEAD(&smr->accept_node);
	INIT_LIST_HEAD(&smr->accept_pending);
	INIT_LIST_HEAD(&smr->accept_ready);
	spin_lock_init(&smr->accept_lock);
	mutex_init(&smr->pull_mutex);
	INIT_WORK(&smr->accept_work, smr_accept_work);
	INIT_LIST_HEAD(&smr->rx_splicers);
	/* SOL_SOCKET options reach smr_setsockopt() to go to both socks */
	if (sock)
		set_bit(SOCK_CUSTOM_SOCKOPT, &sock->flags);
	smr_stat_inc(net, SMR_STAT_SOCKETS_CREATED);
	smr_stat_inc(net, SMR_STAT_SOCKETS_ACTIVE);
	return sk;
}

static void smr_sock_free(struct sock *sk)
{
	smr_close_stop_timers(smr_sk(sk));
	smr_stat_add(sock_net(sk), SMR_STAT_SOCKETS_ACTIVE, -1);
	sock_orphan(sk);
	sk->sk_state = TCP_CLOSE;
	sock_put(sk);
}

/* Close a connection no application will see (RST, as TCP does). */
static void smr_child_free(struct smr_sock *child)
{
	smr_hs_stop(child);
	smr_transport(child)->release(child, true);
	smr_tcp_release(child, true);
	if (child->listener) {
		sock_put(&child->listener->sk);
		child->listener = NULL;
	}
	smr_sock_free(&child->sk);
}

static void smr_child_free_work(struct work_struct *work)
{
	struct smr_sock *child = container_of(work, struct smr_sock,
					      accept_work);

	smr_child_free(child);
	sock_put(&child->sk);	/* smr_child_free_later()'s reference */
}

/*
 * Free a child from its own handshake work (which smr_child_free() would
 * wait for): a child's accept_work is otherwise unused.
 */
static void smr_child_free_later(struct smr_sock *child)
{
	INIT_WORK(&child->accept_work, smr_child_free_work);
	queue_work(smr_wq, &child->accept_work);
}

/*
 * The listener stops (close, shutdown(SHUT_RD), TCP closed it): free every
 * child it still owns. Once @accept_closing is set no new child joins the
 * lists; taking @pull_mutex once waits for a pull that took a child off the
 * inner queue before that and is still setting it up (it frees the child
 * itself or has listed it by the time it lets go). Process context.
 */
static void smr_listener_stop(struct smr_sock *lsmr)
{
	struct smr_sock *child, *tmp;
	LIST_HEAD(children);

	spin_lock_bh(&lsmr->accept_lock);
	lsmr->accept_closing = true;
	spin_unlock_bh(&lsmr->accept_lock);
	mutex_lock(&lsmr->pull_mutex);
	mutex_unlock(&lsmr->pull_mutex);

	spin_lock_bh(&lsmr->accept_lock);
	list_splice_init(&lsmr->accept_ready, &children);
	list_splice_init(&lsmr->accept_pending, &children);
	lsmr->accept_count = 0;
	smr_listener_set_inner_backlog(lsmr);	/* no phantoms left */
	spin_unlock_bh(&lsmr->accept_lock);
	if (cancel_work_sync(&lsmr->accept_work))
		sock_put(&lsmr->sk);

	list_for_each_entry_safe(child, tmp, &children, accept_node) {
		list_del_init(&child->accept_node);
		smr_child_free(child);
	}
}

static int smr_create(struct net *net, struct socket *sock, int protocol,
		      int kern)
{
	struct sock *sk;
	int err;

	if (sock->type != SOCK_STREAM)
		return -ESOCKTNOSUPPORT;
	if (protocol != SMRPROTO_IPV4 && protocol != SMRPROTO_IPV6)
		return -EPROTONOSUPPORT;

	sock->state = SS_UNCONNECTED;
	/* TCP takes SO_PEEK_OFF from 6.10 on: SMR sockets exactly as TCP's */
	sock->ops = inet_stream_ops.set_peek_off ? &smr_proto_ops_peek_off :
						   &smr_proto_ops;
	sk = smr_sock_alloc(net, sock, protocol, kern);
	if (!sk)
		return -ENOBUFS;
	err = smr_tcp_create(smr_sk(sk), net, protocol, kern);
	if (err) {
		smr_sock_free(sk);
		sock->sk = NULL;
		return err;
	}
	return 0;
}

static int smr_release(struct socket *sock)
{
	struct sock *sk = sock->sk;
	bool reset;

	if (!sk)
		return 0;
	if (READ_ONCE(sk->sk_state) == TCP_LISTEN)
		smr_listener_stop(smr_sk(sk));
	smr_hs_stop(smr_sk(sk));
	/* RDMA: the final CDC goes out first; a reset resets TCP too */
	reset = smr_transport(smr_sk(sk))->release(smr_sk(sk), false);
	smr_tcp_release(smr_sk(sk), reset);
	smr_sock_free(sk);
	sock->sk = NULL;
	return 0;
}

/* the sk_flags bits of SOL_SOCKET options that change TCP's behaviour */
#define SMR_SOCKOPT_FLAGS	(BIT(SOCK_LINGER) | BIT(SOCK_KEEPOPEN) | \
				 BIT(SOCK_URGINLINE) | BIT(SOCK_DBG))

/*
 * The SOL_SOCKET options that change TCP's behaviour, other than buffer
 * sizes (which TCP also sets itself): from the SMR sock to the inner one
 * (compat.c, kernels that give us no SOL_SOCKET options), or from an
 * accepted child's inner sock to its SMR sock. Caller holds @dst's lock.
 */
void smr_sock_copy_opts(struct sock *dst, const struct sock *src)
{
	sock_owned_by_me(dst);
	/* @src is live (softirq sets its flags): one read of each field */
	dst->sk_flags = (dst->sk_flags & ~SMR_SOCKOPT_FLAGS) |
			(READ_ONCE(src->sk_flags) & SMR_SOCKOPT_FLAGS);
	WRITE_ONCE(dst->sk_rcvtimeo, READ_ONCE(src->sk_rcvtimeo));
	WRITE_ONCE(dst->sk_sndtimeo, READ_ONCE(src->sk_sndtimeo));
	WRITE_ONCE(dst->sk_lingertime, READ_ONCE(src->sk_lingertime));
	dst->sk_reuse = src->sk_reuse;
	dst->sk_reuseport = src->sk_reuseport;
	WRITE_ONCE(dst->sk_priority, READ_ONCE(src->sk_priority));
	WRITE_ONCE(dst->sk_mark, READ_ONCE(src->sk_mark));
	WRITE_ONCE(dst->sk_bound_dev_if, READ_ONCE(src->sk_bound_dev_if));
}

/*
 * An accepted child's SMR sock is new, with every option at its default,
 * while its inner sock is TCP's clone of the inner listener and holds what
 * TCP's children inherit (SO_REUSEADDR, SO_KEEPALIVE, SO_LINGER, ...) and
 * what TCP chose for the connection (the bound device of a link-local or
 * VRF peer). The SMR sock takes those, so that getsockopt() and SMR's own
 * close (SO_LINGER) see what a TCP child would have, and on kernels
 * before 6.2 the copy before each operation passes TCP's values back, not
 * the defaults (a child whose SO_REUSEADDR was cleared so left a TIME_WAIT
 * a restarted listener could not bind over: the bind conflict wants
 * sk_reuse on both sides).
 *
 * A listener's SO_SNDBUF/SO_RCVBUF set after listen() may not have reached
 * its inner socket before children were cloned from it (before 6.2 they
 * get there on its next operation): an accepted child takes them here, as
 * TCP's children inherit the listener's. Caller holds the child's lock.
 */
static void smr_accept_inherit_sockopts(struct smr_sock *child,
					const struct smr_sock *listener)
{
	const struct sock *lsk = &listener->sk;
	struct sock *sk = &child->sk;
	/* a plain read: sk_userlocks is a bit-field before 6.2 */
	u8 locks = lsk->sk_userlocks & (SOCK_SNDBUF_LOCK | SOCK_RCVBUF_LOCK);

	sock_owned_by_me(sk);
	/* unlocked: nothing writes these on a child not yet accepted */
	smr_sock_copy_opts(sk, child->tcp->sk);
	if (locks & SOCK_SNDBUF_LOCK)
		WRITE_ONCE(sk->sk_sndbuf, READ_ONCE(lsk->sk_sndbuf));
	if (locks & SOCK_RCVBUF_LOCK)
		WRITE_ONCE(sk->sk_rcvbuf, READ_ONCE(lsk->sk_rcvbuf));
	sk->sk_userlocks |= locks;
}

static struct socket *smr_tcp_of(struct socket *sock)
{
	struct smr_sock *smr = smr_sk(sock->sk);

	smr_tcp_err_sync(smr);
	smr_tcp_copy_sockopts(smr);
	return smr->tcp;
}

static int smr_bind(struct socket *sock, struct sockaddr *addr, int len)
{
	struct socket *tcp = smr_tcp_of(sock);

	return tcp->ops->bind(tcp, addr, len);
}

static int smr_connect(struct socket *sock, struct sockaddr *addr, int len,
		       int flags)
{
	struct smr_sock *smr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);
	long timeo;
	int err, dis;

	bool unspec = addr && len >= sizeof(addr->sa_family) &&
		      addr->sa_family == AF_UNSPEC;

	/* a fresh connect (not a retry of one under way) may negotiate */
	lock_sock(&smr->sk);
	smr->connecting = true;
	smr_hs_client_prepare(smr, addr, len);
	release_sock(&smr->sk);

	/* RDMA: the disconnect resets it and TCP carries on alone */
	if (unspec)
		smr_transport(smr)->disconnect(smr);
	dis = READ_ONCE(tcp->sk->sk_disconnects);
	err = tcp->ops->connect(tcp, addr, len, flags);
	smr_tcp_err_consumed(smr, err);
	/*
	 * A failed attempt TCP disconnected (__inet_stream_connect()) has no
	 * peek offset left (tcp_disconnect()): the application's is ours
	 */
	if (err && !unspec && READ_ONCE(tcp->sk->sk_disconnects) != dis)
		WRITE_ONCE(smr->sk.sk_peek_off, -1);
	/* connect(AF_UNSPEC) disconnects: TCP's answer is the answer */
	if (unspec) {
		if (!err) {
			sock->state = SS_UNCONNECTED;
			/* as tcp_disconnect() turns TCP's off */
			WRITE_ONCE(smr->sk.sk_peek_off, -1);
		}
		return err;
	}
	smr_hs_client_connect_failed(smr, err);
	if (err)
		return err;

	/* TCP is connected; the application waits for the negotiation */
	timeo = sock_sndtimeo(&smr->sk, flags & O_NONBLOCK);
	if (smr_hs_pending(smr)) {
		err = smr_wait_decided(smr, timeo);
		if (err == -EAGAIN)
			return flags & O_NONBLOCK ? -EALREADY : -EINPROGRESS;
		if (err)
			return err;
		/* the handshake reset the connection: report it here */
		if (READ_ONCE(smr->sk.sk_err)) {
			err = sock_error(&smr->sk);
			/* once: the inner copy goes too */
			smr_tcp_err_sync(smr);
			return err;
		}
	}
	sock->state = SS_CONNECTED;
	smr_tcp_sync_bufs(smr);
	smr_mode_refresh(smr);
	return 0;
}

static int smr_listen(struct socket *sock, int backlog)
{
	struct smr_sock *smr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);
	int err;

	smr_tcp_listen_prepare(smr, true);
	err = tcp->ops->listen(tcp, backlog);
	smr_tcp_listen_prepare(smr, !err);
	if (err)
		return err;
	mutex_lock(&smr->pull_mutex);
	spin_lock_bh(&smr->accept_lock);
	smr->accept_closing = false;	/* listening again after shutdown */
	smr_listener_set_inner_backlog(smr);
	spin_unlock_bh(&smr->accept_lock);
	mutex_unlock(&smr->pull_mutex);
	if (READ_ONCE(smr->sk.sk_state) != TCP_LISTEN) {
		smr_tcp_hook_listener(smr);
		WRITE_ONCE(smr->sk.sk_state, TCP_LISTEN);
		smr_stat_inc(sock_net(sock->sk), SMR_STAT_LISTENS);
	}
	/* connections may have queued before the hook went in */
	smr_sock_queue_work(&smr->sk, &smr->accept_work);
	return 0;
}

/*
 * TCP lets a listener hold backlog + 1 established connections: beyond
 * that it drops the handshake's last ACK (the client retransmits until
 * accept() makes room), and it sends SYN cookies once its SYN queue passes
 * the backlog. SMR takes every connection off the inner queue at once (a
 * client's connect() needs the server side of the handshake), so the
 * connections it holds count in the inner queue as phantom entries, added
 * under the queue's own lock as TCP counts its own: TCP then applies its
 * exact rules to the whole, and its backlog (SYN queue, cookies) stays as
 * listen() set it. Phantoms are removed before TCP ever stops the listener
 * (which expects an empty count). Caller holds lsmr->accept_lock.
 */
static void smr_listener_set_inner_backlog(struct smr_sock *lsmr)
{
	struct sock *tsk = lsmr->tcp->sk;
	struct request_sock_queue *queue = &inet_csk(tsk)->icsk_accept_queue;
	unsigned int want = lsmr->accept_closing ? 0 : lsmr->accept_count;

	lockdep_assert_held(&lsmr->accept_lock);
	if (want == lsmr->accept_phantoms)
		return;
	spin_lock(&queue->rskq_lock);
	while (lsmr->accept_phantoms < want) {
		sk_acceptq_added(tsk);
		lsmr->accept_phantoms++;
	}
	while (lsmr->accept_phantoms > want) {
		sk_acceptq_removed(tsk);
		lsmr->accept_phantoms--;
	}
	spin_unlock(&queue->rskq_lock);
}

/* A child's mode is settled: hand it to accept(). */
static void smr_child_decided(struct smr_sock *child)
{
	struct smr_sock *lsmr = child->listener;

	spin_lock_bh(&lsmr->accept_lock);
	if (!lsmr->accept_closing) {
		list_move_tail(&child->accept_node, &lsmr->accept_ready);
		lsmr->sk.sk_data_ready(&lsmr->sk);
	}
	spin_unlock_bh(&lsmr->accept_lock);
}

/* A child's handshake reset the connection: nobody will accept it. */
static void smr_child_aborted(struct smr_sock *child)
{
	struct smr_sock *lsmr = child->listener;
	bool mine = false;

	spin_lock_bh(&lsmr->accept_lock);
	if (!lsmr->accept_closing) {
		list_del_init(&child->accept_node);
		lsmr->accept_count--;
		smr_listener_set_inner_backlog(lsmr);
		mine = true;
	}
	spin_unlock_bh(&lsmr->accept_lock);
	/* freeing waits for the handshake work, which is running us */
	if (mine) {
		sock_hold(&child->sk);
		smr_sock_queue_work(&lsmr->sk, &lsmr->accept_work);
		smr_child_free_later(child);
	}
}

/* The handshake's word on a child (smr_sock.hs_decided). */
static void smr_child_hs_decided(struct smr_sock *child, bool reset)
{
	sock_owned_by_me(&child->sk);
	if (reset)
		smr_child_aborted(child);
	else
		smr_child_decided(child);
}

static struct smr_sock *smr_child_new(struct smr_sock *lsmr,
				      struct socket *newtcp)
{
	struct smr_sock *child;
	struct sock *sk;

	sk = smr_sock_alloc(sock_net(&lsmr->sk), NULL, lsmr->sk.sk_protocol,
			    0);
	if (!sk)
		return NULL;
	child = smr_sk(sk);
	/* made without a socket: owned like its listener (memory charges) */
	sk->sk_uid = lsmr->sk.sk_uid;
	/* as a TCP child: the listener's mark when the child is taken in */
	WRITE_ONCE(sk->sk_rcvlowat, READ_ONCE(lsmr->sk.sk_rcvlowat));
	smr_tcp_attach(child, newtcp);
	/* it negotiates: not the mark TCP cloned from a listener in TCP mode */
	smr_tcp_sync_rcvlowat(child, false);
	/*
	 * The peek offset a TCP child clones: its inner sock's once settled,
	 * none while it negotiates (as the mark: one set as the listener
	 * started listening may have reached TCP's clone).
	 */
	WRITE_ONCE(sk->sk_peek_off, READ_ONCE(lsmr->sk.sk_peek_off));
	smr_tcp_sync_peek_off(child);
	sk->sk_state = TCP_ESTABLISHED;
	sock_hold(&lsmr->sk);
	child->listener = lsmr;
	child->hs_decided = smr_child_hs_decided;
	return child;
}

/*
 * Take one connection from the inner TCP accept queue into negotiation (or
 * straight to the ready list when there is nothing to negotiate). Returns
 * false when there was none, or the listener is going away. Caller holds
 * @pull_mutex: the listener's stop waits for the child to be listed (or
 * freed here) before it frees what is listed.
 */
static bool smr_listener_pull_one_locked(struct smr_sock *lsmr)
{
	enum smr_negot_result res;
	struct socket *newtcp;
	struct smr_sock *child;
	struct smr_tuple t;

	lockdep_assert_held(&lsmr->pull_mutex);
	if (READ_ONCE(lsmr->sk.sk_state) != TCP_LISTEN ||
	    READ_ONCE(lsmr->accept_closing) ||
	    kernel_accept(lsmr->tcp, &newtcp, O_NONBLOCK))
		return false;
	child = smr_child_new(lsmr, newtcp);
	if (!child) {
		sock_no_linger(newtcp->sk);
		sock_release(newtcp);
		return true;
	}
	smr_tuple_of_sock(&t, newtcp->sk);
	res = smr_negot_take(&t, SMR_OPT_ROLE_ANSWER);
	/* charged to the listener's account of unaccepted children */
	if (smr_conn_child_init(child, lsmr, &t.raddr, t.family == AF_INET6)) {
		smr_child_free(child);
		return true;
	}

	spin_lock_bh(&lsmr->accept_lock);
	if (lsmr->accept_closing) {
		spin_unlock_bh(&lsmr->accept_lock);
		smr_child_free(child);
		return false;
	}
	list_add_tail(&child->accept_node, &lsmr->accept_pending);
	lsmr->accept_count++;
	smr_listener_set_inner_backlog(lsmr);
	spin_unlock_bh(&lsmr->accept_lock);

	if (res == SMR_NEGOT_ANSWERED) {
		smr_hs_server_start(child);
		return true;
	}
	if (res == SMR_NEGOT_PEER_NO_DEVICE)	/* declined in the SYN-ACK */
		smr_stat_inc(sock_net(&child->sk), SMR_STAT_HS_DECLINED);
	smr_hs_skip(child,
		    res == SMR_NEGOT_COOKIE ? SMR_REASON_SYN_COOKIES :
		    res == SMR_NEGOT_NO_SPACE ? SMR_REASON_OPTION_NO_SPACE :
		    res == SMR_NEGOT_PEER_NO_DEVICE ? SMR_REASON_NO_RDMA_DEVICE :
		    SMR_REASON_PEER_NO_SMR);
	smr_child_decided(child);
	return true;
}

static bool smr_listener_pull_one(struct smr_sock *lsmr)
{
	bool pulled;

	mutex_lock(&lsmr->pull_mutex);
	pulled = smr_listener_pull_one_locked(lsmr);
	mutex_unlock(&lsmr->pull_mutex);
	return pulled;
}

/* Negotiate every established connection ahead of accept(). */
static void smr_accept_work(struct work_struct *work)
{
	struct smr_sock *lsmr = container_of(work, struct smr_sock,
					     accept_work);

	while (smr_listener_pull_one(lsmr))
		;
	sock_put(&lsmr->sk);	/* the queued work's reference */
}

int smr_accept(struct socket *sock, struct socket *newsock,
	       struct proto_accept_arg *arg)
{
	struct smr_sock *lsmr = smr_sk(sock->sk);
	struct sock *lsk = &lsmr->sk;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct smr_sock *child = NULL;
	long timeo;
	int err = 0;

	smr_tcp_err_sync(lsmr);
	if (READ_ONCE(lsk->sk_state) != TCP_LISTEN)
		return -EINVAL;

	timeo = sock_rcvtimeo(lsk, arg->flags & O_NONBLOCK);
	add_wait_queue_exclusive(sk_sleep(lsk), &wait);
	for (;;) {
		spin_lock_bh(&lsmr->accept_lock);
		child = list_first_entry_or_null(&lsmr->accept_ready,
						 struct smr_sock, accept_node);
		if (child) {
			list_del_init(&child->accept_node);
			lsmr->accept_count--;
			smr_listener_set_inner_backlog(lsmr);
		}
		spin_unlock_bh(&lsmr->accept_lock);
		if (child)
			break;
		/* the work may be behind: don't make accept() wait for it */
		if (smr_listener_pull_one(lsmr))
			continue;
		if (READ_ONCE(lsk->sk_state) != TCP_LISTEN) {
			err = -EINVAL;
			break;
		}
		if (!timeo) {
			err = -EAGAIN;
			break;
		}
		if (signal_pending(current)) {
			err = sock_intr_errno(timeo);
			break;
		}
		timeo = wait_woken(&wait, TASK_INTERRUPTIBLE, timeo);
	}
	remove_wait_queue(sk_sleep(lsk), &wait);
	if (!child)
		return err;

	/* room for one more: pull the next one from the inner queue */
	smr_sock_queue_work(lsk, &lsmr->accept_work);

	/* its buffers are the application's now, no longer the listener's */
	smr_conn_accepted(child);

	/*
	 * Grafted under its lock, as inet_accept() does (security_sock_graft()
	 * and BPF LSM hooks see an owned sock). No listener sock lock is held
	 * here: the two never nest.
	 */
	lock_sock(&child->sk);
	smr_accept_inherit_sockopts(child, lsmr);
	sock_graft(&child->sk, newsock);
	release_sock(&child->sk);
	smr_tcp_copy_sockopts(child);
	set_bit(SOCK_CUSTOM_SOCKOPT, &newsock->flags);
	smr_transport(child)->accepted(child, newsock);
	sock_put(lsk);			/* the child's listener reference */
	child->listener = NULL;
	newsock->state = SS_CONNECTED;
	smr_stat_inc(sock_net(lsk), SMR_STAT_ACCEPTS);
	smr_mode_refresh(child);
	return 0;
}

static int smr_getname(struct socket *sock, struct sockaddr *addr, int peer)
{
	struct socket *tcp = smr_tcp_of(sock);

	return tcp->ops->getname(tcp, addr, peer);
}

static __poll_t smr_poll(struct file *file, struct socket *sock,
			 poll_table *wait)
{
	struct smr_sock *smr = smr_sk(sock->sk);

	smr_tcp_of(sock);
	/* TCP wakes this queue: the inner sk_wq points at it */
	sock_poll_wait(file, sock, wait);
	if (READ_ONCE(smr->sk.sk_state) == TCP_LISTEN) {
		if (!list_empty_careful(&smr->accept_ready))
			return EPOLLIN | EPOLLRDNORM;
		return 0;
	}
	return smr_transport(smr)->poll(smr, file);
}

static int smr_ioctl(struct socket *sock, unsigned int cmd, unsigned long arg)
{
	smr_tcp_of(sock);
	return smr_transport(smr_sk(sock->sk))->ioctl(smr_sk(sock->sk), cmd,
						      arg);
}

#ifdef CONFIG_COMPAT
static int smr_compat_ioctl(struct socket *sock, unsigned int cmd,
			    unsigned long arg)
{
	struct socket *tcp = smr_tcp_of(sock);

	if (!tcp->ops->compat_ioctl)
		return -ENOIOCTLCMD;
	return tcp->ops->compat_ioctl(tcp, cmd, arg);
}
#endif

static int smr_gettstamp(struct socket *sock, void __user *userstamp,
			 bool timeval, bool time32)
{
	struct socket *tcp = smr_tcp_of(sock);

	if (!tcp->ops->gettstamp)
		return -ENOIOCTLCMD;
	return tcp->ops->gettstamp(tcp, userstamp, timeval, time32);
}

/*
 * shutdown() of a listener: TCP stops it on SHUT_RD, so the phantom entries
 * go first; if TCP closed the listener, so does SMR, queue and all.
 */
static int smr_listener_shutdown(struct smr_sock *smr, int how)
{
	struct socket *tcp = smr->tcp;
	int err;

	if (how == SHUT_RD || how == SHUT_RDWR)
		smr_listener_stop(smr);
	err = tcp->ops->shutdown(tcp, how);
	if (!err && READ_ONCE(smr->sk.sk_state) == TCP_LISTEN &&
	    READ_ONCE(tcp->sk->sk_state) != TCP_LISTEN) {
		WRITE_ONCE(smr->sk.sk_state, TCP_CLOSE);
		smr_listener_stop(smr);
		/* TCP disconnected the listener: its peek offset is off */
		WRITE_ONCE(smr->sk.sk_peek_off, -1);
		/* a socket in TCP mode that connects again has its mark */
		smr_tcp_listen_prepare(smr, false);
		smr->sk.sk_state_change(&smr->sk);
	}
	return err;
}

static int smr_shutdown(struct socket *sock, int how)
{
	struct smr_sock *smr = smr_sk(sock->sk);

	smr_tcp_of(sock);
	if (READ_ONCE(smr->sk.sk_state) == TCP_LISTEN)
		return smr_listener_shutdown(smr, how);
	return smr_transport(smr)->shutdown(smr, how);
}

/* SOL_SMR: SMR_REUSEPORT is SO_REUSEPORT where SOL_SOCKET cannot reach us. */
static int smr_setsockopt_smr(struct smr_sock *smr, struct socket *tcp,
			      int optname, sockptr_t optval,
			      unsigned int optlen)
{
	int err;

	if (optname != SMR_REUSEPORT)
		return -ENOPROTOOPT;
	err = sock_setsockopt(tcp, SOL_SOCKET, SO_REUSEPORT, optval, optlen);
	if (!err)
		smr_tcp_sync_sockopts(smr);
	return err;
}

static int smr_setsockopt(struct socket *sock, int level, int optname,
			  sockptr_t optval, unsigned int optlen)
{
	struct smr_sock *smr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);
	int err;

	if (level == SOL_SMR)
		return smr_setsockopt_smr(smr, tcp, optname, optval, optlen);
	if (level != SOL_SOCKET) {
		err = tcp->ops->setsockopt(tcp, level, optname, optval, optlen);
		if (!err)
			smr_transport(smr)->option_set(smr, level, optname);
		return err;
	}

	/*
	 * The inner sock's mark is not always the application's; the peek
	 * offset is the SMR sock's to keep in RDMA mode (smr_set_peek_off()).
	 */
	if (optname == SO_RCVLOWAT || optname == SO_PEEK_OFF)
		return sock_setsockopt(sock, level, optname, optval, optlen);
	/*
	 * TCP acts on the option; the SMR sock keeps a copy because
	 * getsockopt(SOL_SOCKET) reads it. TCP's verdict is the answer.
	 */
	err = sock_setsockopt(tcp, level, optname, optval, optlen);
	if (err)
		return err;
	sock_setsockopt(sock, level, optname, optval, optlen);
	smr_tcp_sync_sockopts(smr);
	return 0;
}

/*
 * SO_RCVLOWAT, the one path on every kernel (smr_setsockopt() does not
 * give it to TCP first): the SMR sock's mark, capped as
 * tcp_set_rcvlowat() caps it (half the most the receive buffer may grow
 * to; getsockopt() reads the capped value); waiters hear of it if what
 * the ring holds meets it now; in TCP mode TCP takes it
 * (smr_tcp_sync_rcvlowat()). Usually under the sock lock; a BPF program
 * may set it on a sock it does not own.
 */
static int smr_set_rcvlowat(struct sock *sk, int val)
{
	int cap;

	if (sk->sk_userlocks & SOCK_RCVBUF_LOCK)
		cap = READ_ONCE(sk->sk_rcvbuf) >> 1;
	else
		cap = READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_rmem[2]) >> 1;
	WRITE_ONCE(sk->sk_rcvlowat, min(val, cap) ? : 1);
	smr_rx_lowat_changed(smr_sk(sk));
	smr_tcp_sync_rcvlowat(smr_sk(sk), true);
	return 0;
}

/*
 * SO_PEEK_OFF, only where TCP has it (getsockopt() answers it for a family
 * with this op). The SMR sock's is the application's: RDMA reads keep it
 * (smr_rx_recvmsg()); the inner sock has it only once the socket settled
 * on TCP (smr_tcp_sync_peek_off()), and TCP's reads then move it, which
 * the TCP path copies back. The socket layer may call this without the
 * sock lock, as it calls TCP's.
 */
static int smr_set_peek_off(struct sock *sk, int val)
{
	struct smr_sock *smr = smr_sk(sk);

	if (!smr->tcp->ops->set_peek_off)
		return -EOPNOTSUPP;
	WRITE_ONCE(sk->sk_peek_off, val);
	smr_tcp_sync_peek_off(smr);
	return 0;
}

static int smr_info_get(struct smr_sock *smr, char __user *optval,
			int __user *optlen)
{
	struct smr_info info;
	int len;

	if (get_user(len, optlen))
		return -EFAULT;
	if (len < 0)
		return -EINVAL;

	smr_mode_refresh(smr);
	memset(&info, 0, sizeof(info));
	info.version = SMR_INFO_VERSION;
	info.size = sizeof(info);
	info.mode = READ_ONCE(smr->mode);
	info.reason = READ_ONCE(smr->reason);
	info.peer_reason = READ_ONCE(smr->peer_reason);
	info.is_listener = READ_ONCE(smr->sk.sk_state) == TCP_LISTEN;
	info.bytes_sent = atomic64_read(&smr->bytes_sent);
	info.bytes_received = atomic64_read(&smr->bytes_received);
	info.rdma_bytes_sent = atomic64_read(&smr->rdma_bytes_sent);
	info.rdma_bytes_received = atomic64_read(&smr->rdma_bytes_received);
	if (!smr_hs_pending(smr)) {
		info.local_token = smr->local_token;
		info.peer_token = smr->peer_token;
		info.local_rmb_size = smr->local_rmb_size;
		info.peer_rmb_size = smr->peer_rmb_size;
		info.hs_msgs_sent = smr->hs_sent;
		info.hs_msgs_received = smr->hs_received;
		info.hs_bytes_sent = smr->hs_bytes_sent;
		info.hs_bytes_received = smr->hs_bytes_received;
	}
	/* the ring comes and goes under conn->lock */
	spin_lock_bh(&smr->conn.lock);
	if (smr->conn.sndbuf)
		info.sndbuf_size = smr->conn.sndbuf->size;
	spin_unlock_bh(&smr->conn.lock);

	len = min_t(int, len, sizeof(info));
	if (put_user(len, optlen) || copy_to_user(optval, &info, len))
		return -EFAULT;
	return 0;
}

static int smr_getsockopt(struct socket *sock, int level, int optname,
			  char __user *optval, int __user *optlen)
{
	struct smr_sock *smr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);

	if (level == SOL_SMR) {
		if (optname == SMR_INFO)
			return smr_info_get(smr, optval, optlen);
		return -ENOPROTOOPT;
	}
	if (!tcp->ops->getsockopt)
		return -EOPNOTSUPP;
	/*
	 * A listener's TCP_INFO (accept queue, backlog) is the whole: SMR's
	 * held connections count in the inner queue as phantoms.
	 */
	return tcp->ops->getsockopt(tcp, level, optname, optval, optlen);
}

static int smr_sendmsg(struct socket *sock, struct msghdr *msg, size_t len)
{
	struct smr_sock *smr = smr_sk(sock->sk);

	smr_tcp_of(sock);
	return smr_transport(smr)->sendmsg(smr, msg, len);
}

static int smr_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
		       int flags)
{
	struct smr_sock *smr = smr_sk(sock->sk);

	smr_tcp_of(sock);
	return smr_transport(smr)->recvmsg(smr, msg, len, flags);
}

static ssize_t smr_splice_read(struct socket *sock, loff_t *ppos,
			       struct pipe_inode_info *pipe, size_t len,
			       unsigned int flags)
{
	struct smr_sock *smr = smr_sk(sock->sk);

	smr_tcp_of(sock);
	return smr_transport(smr)->splice_read(smr, sock, ppos, pipe, len,
					       flags);
}

static void smr_splice_eof(struct socket *sock)
{
	struct socket *tcp = smr_tcp_of(sock);

	if (tcp->ops->splice_eof)
		tcp->ops->splice_eof(tcp);
}

/*
 * sock_register() keys the family on smr_family_ops.family (the module
 * parameter); proto_ops.family is informational only, so the default stands.
 */
#define SMR_PROTO_OPS_COMMON						\
	.family		= SMR_FAMILY_DEFAULT,				\
	.owner		= THIS_MODULE,					\
	.release	= smr_release,					\
	.bind		= smr_bind,					\
	.connect	= smr_connect,					\
	.socketpair	= sock_no_socketpair,				\
	.accept		= smr_accept,					\
	.getname	= smr_getname,					\
	.poll		= smr_poll,					\
	.ioctl		= smr_ioctl,					\
	SMR_PROTO_OPS_COMPAT_IOCTL					\
	.gettstamp	= smr_gettstamp,				\
	.listen		= smr_listen,					\
	.shutdown	= smr_shutdown,					\
	.setsockopt	= smr_setsockopt,				\
	.getsockopt	= smr_getsockopt,				\
	.sendmsg	= smr_sendmsg,					\
	.recvmsg	= smr_recvmsg,					\
	.mmap		= sock_no_mmap,					\
	.splice_read	= smr_splice_read,				\
	.splice_eof	= smr_splice_eof,				\
	.set_rcvlowat	= smr_set_rcvlowat

#ifdef CONFIG_COMPAT
#define SMR_PROTO_OPS_COMPAT_IOCTL	.compat_ioctl = smr_compat_ioctl,
#else
#define SMR_PROTO_OPS_COMPAT_IOCTL
#endif

static const struct proto_ops smr_proto_ops = {
	SMR_PROTO_OPS_COMMON,
};

/* where TCP takes SO_PEEK_OFF (6.10 on), SMR sockets take it as TCP's */
static const struct proto_ops smr_proto_ops_peek_off = {
	SMR_PROTO_OPS_COMMON,
	.set_peek_off	= smr_set_peek_off,
};

static struct net_proto_family smr_family_ops = {
	.owner	= THIS_MODULE,
	.create	= smr_create,
};

int smr_proto_init(void)
{
	return proto_register(&smr_proto, 1);
}

void smr_proto_exit(void)
{
	proto_unregister(&smr_proto);
}

int smr_af_init(void)
{
	int err;

	smr_family_ops.family = smr_family;
	err = sock_register(&smr_family_ops);
	if (err)
		pr_err("cannot register address family %d (%d): choose another with family=\n",
		       smr_family, err);
	return err;
}

void smr_af_exit(void)
{
	sock_unregister(smr_family);
}
