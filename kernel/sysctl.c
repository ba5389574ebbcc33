// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the net.smr sysctls (admin guide, "Sysctls"): the tunables every
 * layer reads (sysctl.h), their defaults and what root may write.
 *
 * Locking and lifetimes: the table is registered at module init and
 * unregistered at exit; readers use READ_ONCE() (a value may change
 * between two reads, each use takes one).
 */
#include <linux/sysctl.h>

#include "sysctl.h"
#include "wire.h"

int smr_hs_timeout_ms = SMR_HS_TIMEOUT_MS_DEFAULT;
int smr_link_idle_ms = SMR_LINK_IDLE_MS_DEFAULT;
int smr_orphan_timeout_ms = SMR_ORPHAN_TIMEOUT_MS_DEFAULT;
int smr_buf_max = SMR_BUF_MAX_DEFAULT;
int smr_buf_wmem = SMR_BUF_WMEM_DEFAULT;
/* sends this small ride in the CDC itself */
int smr_cdc_inline_max = SMR_CDC_INLINE_MAX;
long smr_buf_mem_max = SMR_BUF_MEM_MAX_DEFAULT;
long smr_buf_mem_user_max = SMR_BUF_MEM_USER_MAX_DEFAULT;
int smr_negot_max = SMR_NEGOT_MAX_DEFAULT;
long smr_buf_mem_pool_max = SMR_BUF_MEM_POOL_MAX_DEFAULT;
long smr_buf_mem_pool_link_max = SMR_BUF_MEM_POOL_LINK_MAX_DEFAULT;
long smr_buf_mem_unaccepted_max = SMR_BUF_MEM_UNACCEPTED_MAX_DEFAULT;
long smr_buf_mem_unaccepted_peer_max = SMR_BUF_MEM_UNACCEPTED_PEER_MAX_DEFAULT;
int smr_links_max = SMR_LINKS_MAX_DEFAULT;

static int smr_timeout_ms_min = SMR_TIMEOUT_MS_MIN;
static int smr_hs_timeout_ms_max = SMR_HS_TIMEOUT_MS_MAX;
static int smr_timeout_ms_max = SMR_TIMEOUT_MS_MAX;
static int smr_buf_max_min = SMR_HS_RMB_MIN;
static int smr_buf_max_max = SMR_HS_RMB_MAX;
static int smr_cdc_inline_limit = SMR_CDC_INLINE_MAX;
static int smr_negot_max_min = SMR_NEGOT_MAX_MIN;
static int smr_negot_max_max = SMR_NEGOT_MAX_MAX;
static int smr_links_max_min = SMR_LINKS_MAX_MIN;
static int smr_links_max_max = SMR_LINKS_MAX_MAX;
/* byte limits: a value past LONG_MAX would read back as negative */
static unsigned long smr_bytes_min;
static unsigned long smr_bytes_max = LONG_MAX;

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
		.extra2		= &smr_timeout_ms_max,
	},
	{
		.procname	= "orphan_timeout_ms",
		.data		= &smr_orphan_timeout_ms,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &smr_timeout_ms_min,
		.extra2		= &smr_timeout_ms_max,
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
		.extra1		= &smr_bytes_min,
		.extra2		= &smr_bytes_max,
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
		.extra1		= &smr_bytes_min,
		.extra2		= &smr_bytes_max,
	},
	{
		.procname	= "negotiation_records_max",
		.data		= &smr_negot_max,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &smr_negot_max_min,
		.extra2		= &smr_negot_max_max,
	},
	{
		.procname	= "mem_pool_max",
		.data		= &smr_buf_mem_pool_max,
		.maxlen		= sizeof(long),
		.mode		= 0644,
		.proc_handler	= proc_doulongvec_minmax,
		.extra1		= &smr_bytes_min,
		.extra2		= &smr_bytes_max,
	},
	{
		.procname	= "mem_pool_link_max",
		.data		= &smr_buf_mem_pool_link_max,
		.maxlen		= sizeof(long),
		.mode		= 0644,
		.proc_handler	= proc_doulongvec_minmax,
		.extra1		= &smr_bytes_min,
		.extra2		= &smr_bytes_max,
	},
	{
		.procname	= "mem_unaccepted_max",
		.data		= &smr_buf_mem_unaccepted_max,
		.maxlen		= sizeof(long),
		.mode		= 0644,
		.proc_handler	= proc_doulongvec_minmax,
		.extra1		= &smr_bytes_min,
		.extra2		= &smr_bytes_max,
	},
	{
		.procname	= "mem_unaccepted_peer_max",
		.data		= &smr_buf_mem_unaccepted_peer_max,
		.maxlen		= sizeof(long),
		.mode		= 0644,
		.proc_handler	= proc_doulongvec_minmax,
		.extra1		= &smr_bytes_min,
		.extra2		= &smr_bytes_max,
	},
	{
		.procname	= "links_max",
		.data		= &smr_links_max,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &smr_links_max_min,
		.extra2		= &smr_links_max_max,
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
