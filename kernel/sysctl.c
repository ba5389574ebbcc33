// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the net.smr sysctls (admin guide, "Sysctls"). Each value lives with
 * the code that uses it; this file only publishes them and bounds what
 * root may write.
 *
 * Locking and lifetimes: the table is registered at module init and
 * unregistered at exit; readers use READ_ONCE() (a value may change
 * between two reads, each use takes one).
 */
#include <linux/sysctl.h>

#include "smr.h"

static int smr_timeout_ms_min = 10;
static int smr_hs_timeout_ms_max = 600000;
static int smr_day_ms = 24 * 3600 * 1000;
static int smr_buf_max_min = SMR_HS_RMB_MIN;
static int smr_buf_max_max = SMR_HS_RMB_MAX;
static int smr_cdc_inline_limit = SMR_CDC_INLINE_MAX;

static struct ctl_table smr_sysctl_table[] = {
	{
		.procname	= "handshake_timeout_ms",
		.data		= &smr_hs_timeout_ms,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &smr_timeout_ms_min,
		.extra2		= &smr_hs_timeout_ms_max,
	},
	{
		.procname	= "link_idle_timeout_ms",
		.data		= &smr_link_idle_ms,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &smr_timeout_ms_min,
		.extra2		= &smr_day_ms,
	},
	{
		.procname	= "orphan_timeout_ms",
		.data		= &smr_orphan_timeout_ms,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &smr_timeout_ms_min,
		.extra2		= &smr_day_ms,
	},
	{
		.procname	= "buf_max",
		.data		= &smr_buf_max,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &smr_buf_max_min,
		.extra2		= &smr_buf_max_max,
	},
	{
		.procname	= "wmem",
		.data		= &smr_buf_wmem,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &smr_buf_max_min,
		.extra2		= &smr_buf_max_max,
	},
	{
		.procname	= "mem_user_max",
		.data		= &smr_buf_mem_user_max,
		.maxlen		= sizeof(long),
		.mode		= 0644,
		.proc_handler	= proc_doulongvec_minmax,
	},
	{
		.procname	= "cdc_inline_max",
		.data		= &smr_cdc_inline_max,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= &smr_cdc_inline_limit,
	},
	{
		.procname	= "mem_max",
		.data		= &smr_buf_mem_max,
		.maxlen		= sizeof(long),
		.mode		= 0644,
		.proc_handler	= proc_doulongvec_minmax,
	},
	{ }	/* the end, for kernels that read up to it: not counted */
};

static struct ctl_table_header *smr_sysctl_header;

int smr_sysctl_init(void)
{
	smr_sysctl_header = register_sysctl_sz("net/smr", smr_sysctl_table,
					       ARRAY_SIZE(smr_sysctl_table) - 1);
	return smr_sysctl_header ? 0 : -ENOMEM;
}

void smr_sysctl_exit(void)
{
	unregister_sysctl_table(smr_sysctl_header);
}
