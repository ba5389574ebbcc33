// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: /proc/net/smr, per network namespace: stats (stats.c, buf.c's
 * gauges), devices (ib_dev.c), links (link.c), conns (conn.c) and users
 * (buf.c). This file only makes the directory and its entries; each layer
 * shows its own.
 *
 * Locking and lifetimes: a namespace's directory lives from its pernet
 * init to its pernet exit, registered after the counters (stats.c) and
 * removed before them; each show takes the locks of what it shows.
 */
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/seq_file_net.h>
#include <net/net_namespace.h>

#include "af_smr.h"
#include "buf.h"
#include "conn.h"
#include "ib_dev.h"
#include "link.h"
#include "stats.h"

/* The counters, and (where links live) the buffers' bytes. */
static int smr_proc_stats_show(struct seq_file *seq, void *v)
{
	smr_stats_show(seq, v);
	/* buffers belong to links, which live in init_net only */
	if (net_eq(seq_file_single_net(seq), &init_net))
		smr_buf_show(seq);
	return 0;
}

static int __net_init smr_proc_net_init(struct net *net)
{
	struct proc_dir_entry *dir;

	dir = proc_net_mkdir(net, "smr", net->proc_net);
	if (!dir)
		return -ENOMEM;
	if (!proc_create_net_single("stats", 0444, dir, smr_proc_stats_show,
				    NULL) ||
	    !proc_create_net_single("devices", 0444, dir,
				    smr_ib_devices_show, NULL) ||
	    !proc_create_net_single("links", 0444, dir, smr_links_show,
				    NULL) ||
	    !proc_create_net_single("conns", 0444, dir, smr_conns_show,
				    NULL) ||
	    !proc_create_net_single("users", 0444, dir, smr_buf_users_show,
				    NULL)) {
		remove_proc_subtree("smr", net->proc_net);
		return -ENOMEM;
	}
	return 0;
}

static void __net_exit smr_proc_net_exit(struct net *net)
{
	remove_proc_subtree("smr", net->proc_net);
}

static struct pernet_operations smr_proc_net_ops = {
	.init	= smr_proc_net_init,
	.exit	= smr_proc_net_exit,
};

int smr_proc_init(void)
{
	return register_pernet_subsys(&smr_proc_net_ops);
}

void smr_proc_exit(void)
{
	unregister_pernet_subsys(&smr_proc_net_ops);
}
