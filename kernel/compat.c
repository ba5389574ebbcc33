// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the bodies of compat.h's backfill, for kernels older than 6.12.
 * Only this file and compat.h know kernel versions (by Kbuild's feature
 * probes).
 *
 * Locking and lifetimes: as the callers' (each function says); nothing
 * here keeps state of its own.
 */
#include <linux/net.h>
#include <linux/tcp.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "af_smr.h"
#include "smr.h"

#ifndef HAVE_PROTO_ACCEPT_ARG
/* 6.1's ->accept(sock, newsock, flags, kern), for smr_accept(). */
int (smr_accept)(struct socket *sock, struct socket *newsock, int flags,
		 bool kern)
{
	struct proto_accept_arg arg = { .flags = flags, .kern = kern };

	return smr_accept_arg(sock, newsock, &arg);
}
#endif

#ifndef HAVE_SOCK_CUSTOM_SOCKOPT
/* the sk_flags bits of SOL_SOCKET options that change TCP's behaviour */
#define SMR_SOCKOPT_FLAGS	(BIT(SOCK_LINGER) | BIT(SOCK_KEEPOPEN) | \
				 BIT(SOCK_URGINLINE) | BIT(SOCK_DBG))

/*
 * The SOL_SOCKET options that change TCP's behaviour, other than buffer
 * sizes (which TCP also sets itself). Caller holds @dst's sock lock.
 */
static void smr_sock_copy_opts(struct sock *dst, const struct sock *src)
{
	dst->sk_flags = (dst->sk_flags & ~SMR_SOCKOPT_FLAGS) |
			(src->sk_flags & SMR_SOCKOPT_FLAGS);
	dst->sk_rcvtimeo = src->sk_rcvtimeo;
	dst->sk_sndtimeo = src->sk_sndtimeo;
	dst->sk_lingertime = src->sk_lingertime;
	dst->sk_reuse = src->sk_reuse;
	dst->sk_reuseport = src->sk_reuseport;
	dst->sk_priority = src->sk_priority;
	dst->sk_mark = src->sk_mark;
	dst->sk_bound_dev_if = src->sk_bound_dev_if;
}

/*
 * Kernels before 6.2 apply SOL_SOCKET options to the SMR sock only. Copy the
 * ones that change TCP's behaviour to the inner sock before each operation.
 * Racy against a concurrent setsockopt exactly as two threads racing
 * setsockopt and send on a TCP socket are.
 */
void smr_tcp_copy_sockopts(struct smr_sock *smr)
{
	struct sock *sk = &smr->sk;
	struct sock *tsk = smr->tcp->sk;
	bool keepalive = sock_flag(sk, SOCK_KEEPOPEN);

	lock_sock(tsk);
	if (keepalive != sock_flag(tsk, SOCK_KEEPOPEN))
		tcp_set_keepalive(tsk, keepalive);
	smr_sock_copy_opts(tsk, sk);
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

/*
 * An accepted child's SMR sock is new, with every option at its default,
 * while its inner sock is TCP's clone of the inner listener and holds what
 * TCP's children inherit (SO_REUSEADDR, SO_KEEPALIVE, SO_LINGER, ...) and
 * what TCP chose for the connection (the bound device of a link-local or
 * VRF peer). The SMR sock takes those first, so that the copy below, and
 * the one before each later operation, pass TCP's own values back instead
 * of the defaults: a child whose SO_REUSEADDR was cleared so left a
 * TIME_WAIT that a restarted listener could not bind over even with
 * SO_REUSEADDR (the bind conflict wants sk_reuse on both sides).
 *
 * A listener's SO_SNDBUF/SO_RCVBUF set after listen() reach its inner
 * socket only on its next operation, after children were cloned from it: an
 * accepted child takes them here, as TCP's children inherit the listener's.
 */
void smr_tcp_inherit_sockopts(struct smr_sock *child,
			      const struct smr_sock *listener)
{
	const struct sock *lsk = &listener->sk;
	struct sock *sk = &child->sk;
	/* a plain read: sk_userlocks is a bit-field before 6.2 */
	u8 locks = lsk->sk_userlocks & (SOCK_SNDBUF_LOCK | SOCK_RCVBUF_LOCK);

	lock_sock(sk);
	/* unlocked: nothing writes these on a child not yet accepted */
	smr_sock_copy_opts(sk, child->tcp->sk);
	if (locks & SOCK_SNDBUF_LOCK)
		WRITE_ONCE(sk->sk_sndbuf, READ_ONCE(lsk->sk_sndbuf));
	if (locks & SOCK_RCVBUF_LOCK)
		WRITE_ONCE(sk->sk_rcvbuf, READ_ONCE(lsk->sk_rcvbuf));
	sk->sk_userlocks |= locks;
	release_sock(sk);
	smr_tcp_copy_sockopts(child);
}
#endif
