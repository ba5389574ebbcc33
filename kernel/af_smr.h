/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: the socket layer, the top: the address family and its proto_ops
 * (af_smr.c), /proc/net/smr (proc.c) and the module (main.c).
 */
#ifndef _SMR_AF_SMR_H
#define _SMR_AF_SMR_H

struct proto_accept_arg;
struct socket;

extern int smr_family;

int smr_proto_init(void);
void smr_proto_exit(void);
int smr_af_init(void);
void smr_af_exit(void);
void smr_sock_copy_opts(struct sock *dst, const struct sock *src);
int smr_accept(struct socket *sock, struct socket *newsock,
	       struct proto_accept_arg *arg);

int smr_proc_init(void);
void smr_proc_exit(void);

#endif /* _SMR_AF_SMR_H */
