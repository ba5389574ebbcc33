/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: the inner TCP socket of every SMR socket (tcp_path.c), part of the
 * data path layer: it is the TCP path, and the RDMA path's control
 * connection.
 */
#ifndef _SMR_TCP_PATH_H
#define _SMR_TCP_PATH_H

#include <linux/types.h>

struct net;
struct sock;
struct socket;
struct smr_sock;

int smr_tcp_create(struct smr_sock *smr, struct net *net, int protocol,
		   int kern);
void smr_tcp_attach(struct smr_sock *smr, struct socket *tcp);
void smr_tcp_redirect_wq(struct smr_sock *smr, struct socket *sock);
void smr_tcp_release(struct smr_sock *smr, bool reset);
void smr_tcp_hook_negotiation(struct smr_sock *smr, bool on);
void smr_tcp_hook_listener(struct smr_sock *smr);
bool smr_tcp_sock_is_smr(const struct sock *tsk);
struct smr_sock *smr_tcp_owner(const struct sock *tsk);
void smr_tcp_err_sync(struct smr_sock *smr);
void smr_tcp_err_consumed(struct smr_sock *smr, int ret);
bool smr_tcp_was_connected(const struct smr_sock *smr);
void smr_tcp_fresh_after_handshake(struct smr_sock *smr);
void smr_tcp_sync_bufs(struct smr_sock *smr);
void smr_tcp_sync_sockopts(struct smr_sock *smr);
void smr_tcp_sync_rcvlowat(struct smr_sock *smr, bool set);
void smr_tcp_settled(struct smr_sock *smr, bool connected);
void smr_tcp_listen_prepare(struct smr_sock *smr, bool listening);
void smr_tcp_sync_peek_off(struct smr_sock *smr);

#endif /* _SMR_TCP_PATH_H */
