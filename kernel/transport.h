/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: the data path behind the socket ops (transport.c), one table per
 * mode, as RDS's struct rds_transport: the socket ops call the socket's
 * transport and never ask which mode it is in. The top of the data path
 * layer; the handshake decides the mode through it.
 */
#ifndef _SMR_TRANSPORT_H
#define _SMR_TRANSPORT_H

#include <linux/poll.h>
#include <linux/smr.h>
#include <linux/types.h>

#include "smr.h"

struct file;
struct msghdr;
struct pipe_inode_info;
struct socket;

struct smr_transport {
	u8	mode;		/* the enum smr_mode it serves */
	int	(*sendmsg)(struct smr_sock *smr, struct msghdr *msg,
			   size_t len);
	int	(*recvmsg)(struct smr_sock *smr, struct msghdr *msg,
			   size_t len, int flags);
	ssize_t	(*splice_read)(struct smr_sock *smr, struct socket *sock,
			       loff_t *ppos, struct pipe_inode_info *pipe,
			       size_t len, unsigned int flags);
	__poll_t (*poll)(struct smr_sock *smr, struct file *file);
	int	(*ioctl)(struct smr_sock *smr, unsigned int cmd,
			 unsigned long arg);
	int	(*shutdown)(struct smr_sock *smr, int how);
	/* the inner TCP socket took option @optname at @level */
	void	(*option_set)(struct smr_sock *smr, int level, int optname);
	/* connect(AF_UNSPEC): TCP disconnects, the socket may connect again */
	void	(*disconnect)(struct smr_sock *smr);
	/* accept() gave the connection its socket @sock */
	void	(*accepted)(struct smr_sock *smr, struct socket *sock);
	/* the socket goes (@reset: abortively); true: reset its TCP too */
	bool	(*release)(struct smr_sock *smr, bool reset);
};

/* The socket's transport, from socket creation on (never NULL). */
static inline const struct smr_transport *
smr_transport(const struct smr_sock *smr)
{
	return READ_ONCE(smr->transport);
}

void smr_transport_init(struct smr_sock *smr);
void smr_transport_settle(struct smr_sock *smr);
void smr_set_mode(struct smr_sock *smr, enum smr_mode mode,
		  enum smr_reason reason);
void smr_mode_refresh(struct smr_sock *smr);
int smr_wait_decided(struct smr_sock *smr, long timeo);

#endif /* _SMR_TRANSPORT_H */
