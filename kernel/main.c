// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: shared-memory sockets over RDMA - module entry points.
 *
 * Init brings the layers up from the bottom (Documentation/design.rst,
 * "Layers") and hands the lower ones the callbacks that reach the upper
 * ones: the device code learns whom to tell when a device goes (the
 * links), the links learn their users' ops (the connection layer's).
 *
 * Locking and lifetimes: init runs each subsystem's setup in order and
 * unwinds in reverse on failure; exit is the same unwinding. Nothing here is
 * shared at run time except the read-only module parameters and the
 * socket workqueue, which lives from init to exit.
 */
#include <linux/module.h>
#include <linux/net.h>
#include <linux/workqueue.h>

#include "af_smr.h"
#include "conn.h"
#include "handshake.h"
#include "ib_dev.h"
#include "link.h"
#include "smr.h"
#include "stats.h"
#include "sysctl.h"

int smr_family = SMR_FAMILY_DEFAULT;
module_param_named(family, smr_family, int, 0444);
MODULE_PARM_DESC(family, "address family number of SMR sockets (default "
		 __stringify(SMR_FAMILY_DEFAULT) ")");

struct workqueue_struct *smr_wq;
struct workqueue_struct *smr_tx_wq;

static int __init smr_init(void)
{
	int err;

	if (smr_family <= 0 || smr_family >= NPROTO) {
		pr_err("family=%d out of range 1..%d\n", smr_family,
		       NPROTO - 1);
		return -EINVAL;
	}

	err = smr_stats_init();
	if (err)
		return err;
	err = smr_proc_init();
	if (err)
		goto err_stats;
	err = smr_proto_init();
	if (err)
		goto err_proc;
	smr_wq = alloc_workqueue("smr", WQ_UNBOUND, 0);
	if (!smr_wq) {
		err = -ENOMEM;
		goto err_proto;
	}
	/* a send ring's growth waits on its link: apart from the rest */
	smr_tx_wq = alloc_workqueue("smr_tx", WQ_UNBOUND, 0);
	if (!smr_tx_wq) {
		err = -ENOMEM;
		goto err_wq;
	}
	err = smr_sysctl_init();
	if (err)
		goto err_tx_wq;
	err = smr_option_init();
	if (err)
		goto err_sysctl;
	err = smr_link_init(&smr_conn_link_ops);
	if (err)
		goto err_option;
	err = smr_ib_init(smr_link_devices_gone);
	if (err)
		goto err_link;
	err = smr_af_init();
	if (err)
		goto err_ib;
	pr_info("address family %d registered\n", smr_family);
	return 0;

err_ib:
	smr_ib_exit();
err_link:
	smr_link_exit();
err_option:
	smr_option_exit();
err_sysctl:
	smr_sysctl_exit();
err_tx_wq:
	destroy_workqueue(smr_tx_wq);
err_wq:
	destroy_workqueue(smr_wq);
err_proto:
	smr_proto_exit();
err_proc:
	smr_proc_exit();
err_stats:
	smr_stats_exit();
	return err;
}

/*
 * Every SMR socket with a file holds a module reference, so when this runs
 * only work that frees sockets may be left: drain it before the slab goes.
 */
static void __exit smr_exit(void)
{
	smr_af_exit();
	smr_ib_exit();
	smr_link_exit();
	smr_option_exit();
	smr_sysctl_exit();
	destroy_workqueue(smr_tx_wq);
	destroy_workqueue(smr_wq);
	smr_proto_exit();
	smr_proc_exit();
	smr_stats_exit();
}

module_init(smr_init);
module_exit(smr_exit);

MODULE_DESCRIPTION("SMR: shared-memory sockets over RDMA");
MODULE_LICENSE("GPL");
MODULE_VERSION(SMR_MODULE_VERSION);
MODULE_ALIAS_NETPROTO(SMR_FAMILY_DEFAULT);
