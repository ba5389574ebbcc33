/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Backfill for kernels older than the newest one SMR supports (6.12; the
 * oldest is 6.1), force-included into every file by Kbuild (-include), so
 * that the other files are written against the upstream API alone and carry
 * no version checks. Kbuild decides each HAVE_* by grepping the target
 * kernel's headers; compat.c holds what needs a body.
 */
#ifndef _SMR_COMPAT_H
#define _SMR_COMPAT_H

#include <linux/types.h>

struct socket;
struct smr_sock;

/*
 * 6.10 folded ->accept()'s flags and kern into struct proto_accept_arg.
 * Older kernels get the struct, and smr_accept() keeps the upstream
 * signature: the macro renames its definition to smr_accept_arg(), and
 * the name smr_accept, where proto_ops takes it, is compat.c's wrapper of
 * the old signature.
 */
#ifndef HAVE_PROTO_ACCEPT_ARG
struct proto_accept_arg {
	int flags;
	int err;
	int is_empty;
	bool kern;
};

#define smr_accept(sock, newsock, arg) smr_accept_arg(sock, newsock, arg)
int (smr_accept)(struct socket *sock, struct socket *newsock, int flags,
		 bool kern);
#endif

/*
 * 6.2 lets a family take SOL_SOCKET options through ->setsockopt() when
 * the socket sets SOCK_CUSTOM_SOCKOPT. Older kernels ignore the bit (it is
 * unused there) and apply those options to the SMR sock only: compat.c
 * copies the ones that matter to the inner TCP sock before each
 * operation (smr_sock_copy_opts(), af_smr.c).
 */
#ifdef HAVE_SOCK_CUSTOM_SOCKOPT
static inline void smr_tcp_copy_sockopts(struct smr_sock *smr) { }
static inline void smr_tcp_sockopt_write_space(struct smr_sock *smr) { }
#else
#define SOCK_CUSTOM_SOCKOPT	6
void smr_tcp_copy_sockopts(struct smr_sock *smr);
void smr_tcp_sockopt_write_space(struct smr_sock *smr);
#endif

/*
 * 6.6 counts a sysctl table's entries; older kernels read up to the empty
 * entry that ends it (SMR's table has one for them).
 */
#ifndef HAVE_REGISTER_SYSCTL_SZ
#include <linux/sysctl.h>
static inline struct ctl_table_header *
register_sysctl_sz(const char *path, struct ctl_table *table, size_t size)
{
	return register_sysctl(path, table);
}
#endif

/* 6.5 renamed generic_file_splice_read() to copy_splice_read(). */
#ifndef HAVE_COPY_SPLICE_READ
#define copy_splice_read generic_file_splice_read
#endif

/*
 * 6.1 keeps ib_device_get_netdev() to the RDMA core: /proc/net/smr/devices
 * names no netdev there.
 */
#ifndef HAVE_IB_DEVICE_GET_NETDEV
struct ib_device;
struct net_device;
static inline struct net_device *ib_device_get_netdev(struct ib_device *ibdev,
						      u32 port)
{
	return NULL;
}
#endif

#endif /* _SMR_COMPAT_H */
