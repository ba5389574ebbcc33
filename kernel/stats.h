/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: per-network-namespace counters (stats.c), shown in
 * /proc/net/smr/stats. Every layer counts into them; they call nothing of
 * SMR's.
 */
#ifndef _SMR_STATS_H
#define _SMR_STATS_H

#include <linux/types.h>
#include <linux/smr.h>

struct net;
struct seq_file;

enum smr_stat {
	SMR_STAT_SOCKETS_CREATED,
	SMR_STAT_SOCKETS_ACTIVE,
	SMR_STAT_LISTENS,
	SMR_STAT_CONNECTS,
	SMR_STAT_ACCEPTS,
	SMR_STAT_MODE_TCP,
	SMR_STAT_MODE_RDMA,
	SMR_STAT_TCP_BYTES_SENT,
	SMR_STAT_TCP_BYTES_RECEIVED,
	SMR_STAT_RDMA_BYTES_SENT,
	SMR_STAT_RDMA_BYTES_RECEIVED,
	SMR_STAT_HS_STARTED,		/* handshakes begun (client or server) */
	SMR_STAT_HS_COMPLETED,		/* PROPOSAL/ACCEPT/CONFIRM all done */
	SMR_STAT_HS_DECLINED,		/* a DECLINE sent or received */
	SMR_STAT_HS_ABORTED,		/* connection reset by the handshake */
	SMR_STAT_BAD_OPTIONS,		/* malformed SMR TCP options seen */
	SMR_STAT_NEGOT_RECORDS,		/* negotiation records held now */
	SMR_STAT_NEGOT_REFUSED_LISTEN,	/* offers to our listeners unrecorded */
	SMR_STAT_NEGOT_REFUSED_CONNECT,	/* our SYNs that could not offer */
	SMR_STAT_LINKS_CREATED,		/* RDMA links set up (either side) */
	SMR_STAT_LINKS_DESTROYED,
	SMR_STAT_LINKS_FAILED,		/* links that died in error */
	SMR_STAT_LINKS_GRANTED,		/* link secrets granted to peers */
	SMR_STAT_LINKS_REFUSED,		/* rdma_cm requests rejected unbuilt */
	SMR_STAT_LINKS_ATTACH_DEAD,	/* found links gone before attached */
	SMR_STAT_CDC_SENT,
	SMR_STAT_CDC_RECEIVED,
	SMR_STAT_CDC_STALE,		/* ignored: old sequence number */
	SMR_STAT_CDC_BAD,		/* malformed or unknown connection */
	SMR_STAT_CONN_ABORT_BAD_CDC,	/* connections aborted for a bad CDC */
	SMR_STAT_CONN_ABORT_LINK,	/* connections lost with their link */
	SMR_STAT_CONN_ABORT_PEER,	/* connections the peer reset */
	SMR_STAT_BUF_ALLOCATED,		/* buffers registered */
	SMR_STAT_BUF_REUSED,		/* buffers taken from a pool */
	SMR_STAT_BUF_REGISTERED,	/* memory registrations (REG_MR) */
	SMR_STAT_BUF_REGISTER_FAILED,	/* registrations the link refused */
	SMR_STAT_SNDBUF_GROWN,		/* send rings a writer outgrew */
	SMR_STAT_SNDBUF_GROW_DROPPED,	/* grown rings never swapped in */
	SMR_STAT_BUF_MEM_LIMIT,		/* refused: net.smr.mem_max reached */
	SMR_STAT_BUF_USER_LIMIT,	/* refused: net.smr.mem_user_max */
	SMR_STAT_CDC_INLINE_SENT,	/* CDCs that carried the data */
	SMR_STAT_CDC_INLINE_RECEIVED,
	SMR_STAT_CREDIT_MSGS_SENT,	/* link messages returning credits */
	SMR_STAT_CDC_WAITS,		/* CDCs that waited for a slot or credit */
	SMR_STAT_ORPHANS_EXPIRED,	/* closed conns freed by orphan_timeout_ms */
	SMR_STAT_BUF_POOL_FULL,		/* freed, not pooled: mem_pool_*max */
	SMR_STAT_BUF_UNACCEPTED_LIMIT,	/* refused: mem_unaccepted_max */
	SMR_STAT_BUF_UNACCEPTED_PEER_LIMIT, /* refused: mem_unaccepted_peer_max */
	SMR_STAT_BUF_UNACCEPTED_HOST_LIMIT, /* refused: half of mem_max */
	SMR_STAT_BUF_MEMCG_LIMIT,	/* refused: memory cgroup near its max */
	SMR_STAT_LINKS_REFUSED_SHARE,	/* passive: peers' half of links_max */
	SMR_STAT_LINKS_USER_LIMIT,	/* ours: a user's quarter of links_max */
	SMR_STAT_LINKS_GRANTS_EVICTED,	/* a full grant table's oldest, dropped */
	SMR_STAT_LINKS_GRANTS_FULL,	/* refused: every grant too young to go */
	SMR_STAT_LINKS_IDLE_EXPIRED,	/* idle links ended, the peer agreeing */
	SMR_STAT_LINKS_IDLE_KEPT,	/* idle requests we said no to: in use */
	SMR_STAT_FALLBACK_FIRST,	/* one counter per enum smr_reason */
	/* handshakes reset, one counter per enum smr_reason */
	SMR_STAT_ABORTED_FIRST = SMR_STAT_FALLBACK_FIRST + SMR_REASON_MAX,
	SMR_STAT_MAX = SMR_STAT_ABORTED_FIRST + SMR_REASON_MAX,
};

int smr_stats_init(void);
void smr_stats_exit(void);
void smr_stat_add(const struct net *net, enum smr_stat stat, s64 delta);
int smr_stats_show(struct seq_file *seq, void *v);

static inline void smr_stat_inc(const struct net *net, enum smr_stat stat)
{
	smr_stat_add(net, stat, 1);
}

#endif /* _SMR_STATS_H */
