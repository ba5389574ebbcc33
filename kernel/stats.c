// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: per-network-namespace counters, shown in /proc/net/smr/stats
 * (proc.c makes the file).
 *
 * Locking and lifetimes
 * ---------------------
 * Counters are per-CPU s64 arrays updated with this_cpu_add(), so the data
 * path takes no lock and shares no cache line; readers sum all CPUs, which
 * is exact for counters at rest and a close snapshot under traffic. A
 * namespace's array lives from its pernet init to its pernet exit; sockets
 * hold their netns, so no socket can count into a freed array.
 */
#include <linux/percpu.h>
#include <linux/seq_file.h>
#include <linux/seq_file_net.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>

#include "stats.h"

struct smr_stats {
	s64 count[SMR_STAT_MAX];
};

struct smr_net {
	struct smr_stats __percpu *stats;
};

static unsigned int smr_net_id __read_mostly;

static const char *const smr_stat_names[SMR_STAT_FALLBACK_FIRST] = {
	[SMR_STAT_SOCKETS_CREATED]	= "sockets_created",
	[SMR_STAT_SOCKETS_ACTIVE]	= "sockets_active",
	[SMR_STAT_LISTENS]		= "listens",
	[SMR_STAT_CONNECTS]		= "connects",
	[SMR_STAT_ACCEPTS]		= "accepts",
	[SMR_STAT_MODE_TCP]		= "mode_tcp",
	[SMR_STAT_MODE_RDMA]		= "mode_rdma",
	[SMR_STAT_TCP_BYTES_SENT]	= "tcp_bytes_sent",
	[SMR_STAT_TCP_BYTES_RECEIVED]	= "tcp_bytes_received",
	[SMR_STAT_RDMA_BYTES_SENT]	= "rdma_bytes_sent",
	[SMR_STAT_RDMA_BYTES_RECEIVED]	= "rdma_bytes_received",
	[SMR_STAT_HS_STARTED]		= "handshakes_started",
	[SMR_STAT_HS_COMPLETED]		= "handshakes_completed",
	[SMR_STAT_HS_DECLINED]		= "handshakes_declined",
	[SMR_STAT_HS_ABORTED]		= "handshakes_aborted",
	[SMR_STAT_BAD_OPTIONS]		= "bad_options",
	[SMR_STAT_NEGOT_RECORDS]	= "negotiation_records",
	[SMR_STAT_NEGOT_REFUSED_LISTEN]	= "negotiation_refused_listen",
	[SMR_STAT_NEGOT_REFUSED_CONNECT] = "negotiation_refused_connect",
	[SMR_STAT_LINKS_CREATED]	= "links_created",
	[SMR_STAT_LINKS_DESTROYED]	= "links_destroyed",
	[SMR_STAT_LINKS_FAILED]		= "links_failed",
	[SMR_STAT_LINKS_GRANTED]	= "links_granted",
	[SMR_STAT_LINKS_REFUSED]	= "links_refused",
	[SMR_STAT_LINKS_ATTACH_DEAD]	= "links_attach_dead",
	[SMR_STAT_CDC_SENT]		= "cdc_sent",
	[SMR_STAT_CDC_RECEIVED]		= "cdc_received",
	[SMR_STAT_CDC_STALE]		= "cdc_stale",
	[SMR_STAT_CDC_BAD]		= "cdc_bad",
	[SMR_STAT_CONN_ABORT_BAD_CDC]	= "conn_abort_bad_cdc",
	[SMR_STAT_CONN_ABORT_LINK]	= "conn_abort_link",
	[SMR_STAT_CONN_ABORT_PEER]	= "conn_abort_peer",
	[SMR_STAT_BUF_ALLOCATED]	= "buffers_allocated",
	[SMR_STAT_BUF_REUSED]		= "buffers_reused",
	[SMR_STAT_BUF_REGISTERED]	= "buffers_registered",
	[SMR_STAT_BUF_REGISTER_FAILED]	= "buffers_register_failed",
	[SMR_STAT_SNDBUF_GROWN]		= "sndbufs_grown",
	[SMR_STAT_SNDBUF_GROW_DROPPED]	= "sndbufs_grow_dropped",
	[SMR_STAT_BUF_MEM_LIMIT]	= "buffers_mem_limit",
	[SMR_STAT_BUF_USER_LIMIT]	= "buffers_user_limit",
	[SMR_STAT_CDC_INLINE_SENT]	= "cdc_inline_sent",
	[SMR_STAT_CDC_INLINE_RECEIVED]	= "cdc_inline_received",
	[SMR_STAT_CREDIT_MSGS_SENT]	= "credit_msgs_sent",
	[SMR_STAT_CDC_WAITS]		= "cdc_waits",
	[SMR_STAT_ORPHANS_EXPIRED]	= "orphans_expired",
	[SMR_STAT_BUF_POOL_FULL]	= "buffers_pool_full",
	[SMR_STAT_BUF_UNACCEPTED_LIMIT]	= "buffers_unaccepted_limit",
	[SMR_STAT_BUF_UNACCEPTED_PEER_LIMIT] = "buffers_unaccepted_peer_limit",
	[SMR_STAT_BUF_UNACCEPTED_HOST_LIMIT] = "buffers_unaccepted_host_limit",
	[SMR_STAT_BUF_MEMCG_LIMIT]	= "buffers_memcg_limit",
	[SMR_STAT_LINKS_REFUSED_SHARE]	= "links_refused_share",
	[SMR_STAT_LINKS_USER_LIMIT]	= "links_user_limit",
	[SMR_STAT_LINKS_GRANTS_EVICTED]	= "links_grants_evicted",
	[SMR_STAT_LINKS_GRANTS_FULL]	= "links_grants_full",
	[SMR_STAT_LINKS_IDLE_EXPIRED]	= "links_idle_expired",
	[SMR_STAT_LINKS_IDLE_KEPT]	= "links_idle_kept",
};

void smr_stat_add(const struct net *net, enum smr_stat stat, s64 delta)
{
	struct smr_net *sn = net_generic(net, smr_net_id);

	this_cpu_add(sn->stats->count[stat], delta);
}

static s64 smr_stat_sum(const struct smr_net *sn, enum smr_stat stat)
{
	s64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu_ptr(sn->stats, cpu)->count[stat];
	return sum;
}

/* Every counter of the reader's namespace, "name value" a line. */
int smr_stats_show(struct seq_file *seq, void *v)
{
	struct smr_net *sn = net_generic(seq_file_single_net(seq), smr_net_id);
	int i;

	for (i = 0; i < SMR_STAT_FALLBACK_FIRST; i++)
		seq_printf(seq, "%s %lld\n", smr_stat_names[i],
			   smr_stat_sum(sn, i));
	for (i = SMR_REASON_NONE + 1; i < SMR_REASON_MAX; i++)
		seq_printf(seq, "fallback_%s %lld\n", smr_reason_name(i),
			   smr_stat_sum(sn, SMR_STAT_FALLBACK_FIRST + i));
	for (i = SMR_REASON_NONE + 1; i < SMR_REASON_MAX; i++)
		seq_printf(seq, "aborted_%s %lld\n", smr_reason_name(i),
			   smr_stat_sum(sn, SMR_STAT_ABORTED_FIRST + i));
	return 0;
}

static int __net_init smr_stats_net_init(struct net *net)
{
	struct smr_net *sn = net_generic(net, smr_net_id);

	sn->stats = alloc_percpu(struct smr_stats);
	return sn->stats ? 0 : -ENOMEM;
}

static void __net_exit smr_stats_net_exit(struct net *net)
{
	struct smr_net *sn = net_generic(net, smr_net_id);

	free_percpu(sn->stats);
}

static struct pernet_operations smr_stats_net_ops = {
	.init	= smr_stats_net_init,
	.exit	= smr_stats_net_exit,
	.id	= &smr_net_id,
	.size	= sizeof(struct smr_net),
};

int smr_stats_init(void)
{
	return register_pernet_subsys(&smr_stats_net_ops);
}

void smr_stats_exit(void)
{
	unregister_pernet_subsys(&smr_stats_net_ops);
}
