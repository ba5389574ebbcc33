// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the AF_SMR address family and its socket operations.
 *
 * An SMR socket presents TCP's exact semantics. Until a connection has
 * negotiated an RDMA path it is served by its inner TCP socket
 * (tcp_path.c): every operation is handed to it, and the answers, errnos,
 * poll masks and blocking behaviour are TCP's own.
 *
 * Locking and lifetimes
 * ---------------------
 * See smr.h for the smr_sock fields. The sock lock of the SMR socket is not
 * taken around calls into the inner socket (they lock the inner sock and may
 * block); SMR's own state here is a handful of fields written with
 * WRITE_ONCE/cmpxchg. The module reference of every open socket is held
 * through proto_ops.owner, so the module cannot unload under a socket.
 */
#include <linux/module.h>
#include <linux/net.h>
#include <linux/poll.h>
#include <linux/uaccess.h>
#include <net/sock.h>
#include <net/tcp_states.h>

#include "compat.h"
#include "smr.h"

static struct proto smr_proto = {
	.name		= "SMR",
	.owner		= THIS_MODULE,
	.obj_size	= sizeof(struct smr_sock),
};

static const struct proto_ops smr_proto_ops;

void smr_set_mode(struct smr_sock *smr, enum smr_mode mode,
		  enum smr_reason reason)
{
	struct net *net = sock_net(&smr->sk);

	WRITE_ONCE(smr->reason, reason);
	if (cmpxchg(&smr->mode, SMR_MODE_PENDING, mode) != SMR_MODE_PENDING)
		return;
	smr_stat_inc(net, mode == SMR_MODE_RDMA ? SMR_STAT_MODE_RDMA :
						  SMR_STAT_MODE_TCP);
	if (mode == SMR_MODE_TCP)
		smr_stat_inc(net, SMR_STAT_FALLBACK_FIRST + reason);
}

/*
 * A connection found established (by a blocking connect, a poll after a
 * non-blocking one, or data moving) settles the socket's mode. Negotiation
 * is not part of this module version, so it is TCP with that reason.
 */
static void smr_mode_refresh(struct smr_sock *smr)
{
	if (READ_ONCE(smr->mode) != SMR_MODE_PENDING ||
	    READ_ONCE(smr->sk.sk_state) == TCP_LISTEN)
		return;
	if (smr_tcp_was_connected(smr))
		smr_set_mode(smr, SMR_MODE_TCP, SMR_REASON_NOT_NEGOTIATED);
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
	sk->sk_protocol = protocol;
	sk->sk_state = TCP_CLOSE;
	smr = smr_sk(sk);
	smr->mode = SMR_MODE_PENDING;
	smr->reason = SMR_REASON_NONE;
	atomic64_set(&smr->bytes_sent, 0);
	atomic64_set(&smr->bytes_received, 0);
	atomic64_set(&smr->rdma_bytes_sent, 0);
	atomic64_set(&smr->rdma_bytes_received, 0);
	/* SOL_SOCKET options reach smr_setsockopt() to go to both socks */
	smr_want_sol_socket(sock);
	smr_stat_inc(net, SMR_STAT_SOCKETS_CREATED);
	smr_stat_inc(net, SMR_STAT_SOCKETS_ACTIVE);
	return sk;
}

static void smr_sock_free(struct sock *sk)
{
	smr_stat_add(sock_net(sk), SMR_STAT_SOCKETS_ACTIVE, -1);
	sock_orphan(sk);
	sk->sk_state = TCP_CLOSE;
	sock_put(sk);
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
	sock->ops = &smr_proto_ops;
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

	if (!sk)
		return 0;
	smr_tcp_release(smr_sk(sk));
	smr_sock_free(sk);
	sock->sk = NULL;
	return 0;
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
	int err;

	err = tcp->ops->connect(tcp, addr, len, flags);
	smr_tcp_err_consumed(smr, err);
	if (!err) {
		sock->state = SS_CONNECTED;
		WRITE_ONCE(smr->sk.sk_state, TCP_ESTABLISHED);
		smr_stat_inc(sock_net(sock->sk), SMR_STAT_CONNECTS);
		smr_tcp_sync_bufs(smr);
		smr_mode_refresh(smr);
	}
	return err;
}

static int smr_listen(struct socket *sock, int backlog)
{
	struct smr_sock *smr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);
	int err;

	err = tcp->ops->listen(tcp, backlog);
	if (!err && READ_ONCE(smr->sk.sk_state) != TCP_LISTEN) {
		WRITE_ONCE(smr->sk.sk_state, TCP_LISTEN);
		smr_stat_inc(sock_net(sock->sk), SMR_STAT_LISTENS);
	}
	return err;
}

static int smr_accept(struct socket *sock, struct socket *newsock,
		      SMR_ACCEPT_ARGS)
{
	struct smr_sock *lsmr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);
	struct socket *newtcp;
	struct smr_sock *smr;
	struct sock *newsk;
	int err;

	err = kernel_accept(tcp, &newtcp, SMR_ACCEPT_FLAGS);
	if (err)
		return err;

	newsk = smr_sock_alloc(sock_net(sock->sk), newsock,
			       lsmr->sk.sk_protocol, SMR_ACCEPT_KERN);
	if (!newsk) {
		sock_release(newtcp);
		return -ENOMEM;
	}
	smr = smr_sk(newsk);
	smr_tcp_attach(smr, newtcp);
	newsock->state = SS_CONNECTED;
	newsk->sk_state = TCP_ESTABLISHED;
	smr_stat_inc(sock_net(newsk), SMR_STAT_ACCEPTS);
	smr_mode_refresh(smr);
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
	struct socket *tcp = smr_tcp_of(sock);
	__poll_t mask;

	/* TCP wakes this queue: the inner sk_wq points at it */
	sock_poll_wait(file, sock, wait);
	mask = tcp->ops->poll(file, tcp, NULL);
	if (READ_ONCE(smr->sk.sk_err))
		mask |= EPOLLERR;
	smr_mode_refresh(smr);
	return mask;
}

static int smr_ioctl(struct socket *sock, unsigned int cmd, unsigned long arg)
{
	struct socket *tcp = smr_tcp_of(sock);

	return tcp->ops->ioctl(tcp, cmd, arg);
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

static int smr_shutdown(struct socket *sock, int how)
{
	struct socket *tcp = smr_tcp_of(sock);

	return tcp->ops->shutdown(tcp, how);
}

static int smr_setsockopt(struct socket *sock, int level, int optname,
			  sockptr_t optval, unsigned int optlen)
{
	struct smr_sock *smr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);
	int err;

	if (level == SOL_SMR)
		return -ENOPROTOOPT;
	if (level != SOL_SOCKET)
		return tcp->ops->setsockopt(tcp, level, optname, optval,
					    optlen);

	/*
	 * TCP acts on the option; the SMR sock keeps a copy because
	 * getsockopt(SOL_SOCKET) reads it. TCP's verdict is the answer.
	 */
	err = sock_setsockopt(tcp, level, optname, optval, optlen);
	if (err)
		return err;
	sock_setsockopt(sock, level, optname, optval, optlen);
	smr_tcp_sync_bufs(smr);
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
	return tcp->ops->getsockopt(tcp, level, optname, optval, optlen);
}

static void smr_count_bytes(struct smr_sock *smr, int ret, bool sent)
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

static int smr_sendmsg(struct socket *sock, struct msghdr *msg, size_t len)
{
	struct smr_sock *smr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);
	int ret;

	ret = tcp->ops->sendmsg(tcp, msg, len);
	smr_tcp_err_consumed(smr, ret);
	smr_count_bytes(smr, ret, true);
	return ret;
}

static int smr_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
		       int flags)
{
	struct smr_sock *smr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);
	int ret;

	ret = tcp->ops->recvmsg(tcp, msg, len, flags);
	smr_tcp_err_consumed(smr, ret);
	if (!(flags & (MSG_PEEK | MSG_ERRQUEUE)))
		smr_count_bytes(smr, ret, false);
	return ret;
}

static ssize_t smr_splice_read(struct socket *sock, loff_t *ppos,
			       struct pipe_inode_info *pipe, size_t len,
			       unsigned int flags)
{
	struct smr_sock *smr = smr_sk(sock->sk);
	struct socket *tcp = smr_tcp_of(sock);
	ssize_t ret;

	smr_tcp_lend_file(sock, tcp);
	ret = tcp->ops->splice_read(tcp, ppos, pipe, len, flags);
	smr_tcp_err_consumed(smr, ret);
	smr_count_bytes(smr, ret, false);
	return ret;
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
static const struct proto_ops smr_proto_ops = {
	.family		= SMR_FAMILY_DEFAULT,
	.owner		= THIS_MODULE,
	.release	= smr_release,
	.bind		= smr_bind,
	.connect	= smr_connect,
	.socketpair	= sock_no_socketpair,
	.accept		= smr_accept,
	.getname	= smr_getname,
	.poll		= smr_poll,
	.ioctl		= smr_ioctl,
#ifdef CONFIG_COMPAT
	.compat_ioctl	= smr_compat_ioctl,
#endif
	.gettstamp	= smr_gettstamp,
	.listen		= smr_listen,
	.shutdown	= smr_shutdown,
	.setsockopt	= smr_setsockopt,
	.getsockopt	= smr_getsockopt,
	.sendmsg	= smr_sendmsg,
	.recvmsg	= smr_recvmsg,
	.mmap		= sock_no_mmap,
	.splice_read	= smr_splice_read,
	.splice_eof	= smr_splice_eof,
};

static struct net_proto_family smr_family_ops = {
	.owner	= THIS_MODULE,
	.create	= smr_create,
};

int smr_af_init(void)
{
	int err;

	err = proto_register(&smr_proto, 1);
	if (err)
		return err;
	smr_family_ops.family = smr_family;
	err = sock_register(&smr_family_ops);
	if (err) {
		pr_err("smr: cannot register address family %d (%d): choose another with family=\n",
		       smr_family, err);
		proto_unregister(&smr_proto);
	}
	return err;
}

void smr_af_exit(void)
{
	sock_unregister(smr_family);
	proto_unregister(&smr_proto);
}
