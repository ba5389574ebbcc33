/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: RDMA devices (ib_dev.c), below the links: which devices and ports
 * exist, and whether an address has one.
 */
#ifndef _SMR_IB_DEV_H
#define _SMR_IB_DEV_H

#include <linux/types.h>

struct ib_device;
struct in6_addr;
struct net;
struct seq_file;

/*
 * @device_gone runs (process context) when an RDMA device is removed,
 * before the RDMA core lets go of it: its users take down what they built
 * on it.
 */
int smr_ib_init(void (*device_gone)(struct ib_device *ibdev));
void smr_ib_exit(void);
int smr_ib_devices_show(struct seq_file *seq, void *v);
bool smr_ib_dev_for_addr(struct net *net, int family,
			 const struct in6_addr *laddr);

#endif /* _SMR_IB_DEV_H */
