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
 * SO_SNDBUF reached the SMR sock only: the inner sock takes it and TCP's
 * write_space judges it, as it would have on a TCP socket. Process
 * context, the SMR sock's lock held (sk_setsockopt()): inner lock next.
 */
void smr_tcp_sockopt_write_space(struct smr_sock *smr)
{
	struct sock *tsk = smr->tcp->sk;

	sock_owned_by_me(&smr->sk);
	smr_tcp_copy_sockopts(smr);
	lock_sock(tsk);
	tsk->sk_write_space(tsk);
	release_sock(tsk);
}
#endif
