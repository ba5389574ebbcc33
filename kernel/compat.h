/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel API differences between the oldest supported kernel (6.1) and
 * newer ones, keyed by feature. Kbuild decides each HAVE_* by grepping the
 * target kernel's headers (see kernel/Kbuild); no version checks here.
 */
#ifndef _SMR_COMPAT_H
#define _SMR_COMPAT_H

#include <linux/net.h>

/*
 * 6.10 folded accept's flags and kern arguments into struct
 * proto_accept_arg. SMR_ACCEPT_ARGS declares the ->accept parameter list,
 * SMR_ACCEPT_FLAGS and SMR_ACCEPT_KERN read them back.
 */
#ifdef HAVE_PROTO_ACCEPT_ARG
#define SMR_ACCEPT_ARGS		struct proto_accept_arg *arg
#define SMR_ACCEPT_FLAGS	(arg->flags)
#define SMR_ACCEPT_KERN		(arg->kern)
#else
#define SMR_ACCEPT_ARGS		int flags, bool kern
#define SMR_ACCEPT_FLAGS	(flags)
#define SMR_ACCEPT_KERN		(kern)
#endif

/*
 * 6.2 let any family take SOL_SOCKET options through ->setsockopt
 * (SOCK_CUSTOM_SOCKOPT). Before that the socket layer applies them to the SMR
 * sock only, and smr_tcp_copy_sockopts() copies them to the inner socket.
 */
static inline void smr_want_sol_socket(struct socket *sock)
{
#ifdef HAVE_SOCK_CUSTOM_SOCKOPT
	set_bit(SOCK_CUSTOM_SOCKOPT, &sock->flags);
#endif
}

/* 6.6 counts a sysctl table instead of reading up to its sentinel. */
#include <linux/sysctl.h>
static inline struct ctl_table_header *
smr_register_sysctl(const char *path, struct ctl_table *table, size_t count)
{
#ifdef HAVE_REGISTER_SYSCTL_SZ
	return register_sysctl_sz(path, table, count);
#else
	return register_sysctl(path, table);
#endif
}

/*
 * 6.5 renamed the generic read_iter-based splice helper to
 * copy_splice_read(); 6.1 has generic_file_splice_read().
 */
#include <linux/fs.h>
#include <linux/splice.h>
static inline ssize_t smr_copy_splice_read(struct file *in, loff_t *ppos,
					   struct pipe_inode_info *pipe,
					   size_t len, unsigned int flags)
{
#ifdef HAVE_COPY_SPLICE_READ
	return copy_splice_read(in, ppos, pipe, len, flags);
#else
	return generic_file_splice_read(in, ppos, pipe, len, flags);
#endif
}

#endif /* _SMR_COMPAT_H */
