// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the SMR TCP option on SYN and SYN-ACK, through netfilter hooks.
 *
 * Outgoing (LOCAL_OUT): a connecting SMR socket's SYN gets an offer with a
 * fresh nonce; the SYN-ACK of an SMR listener gets an answer carrying the
 * nonce's proof, but only when that SYN carried an offer. Incoming
 * (LOCAL_IN): an offer on a SYN to an SMR listener and the answer on a
 * SYN-ACK to a connecting SMR socket are recorded. No other segment is
 * touched. Layout and rules: Documentation/protocol.rst.
 *
 * What was seen is kept in negotiation records keyed by the connection's
 * 4-tuple (struct smr_negot), because neither a request sock nor a
 * SYN_SENT sock has room for it. The socket side takes its record when the
 * connection is established (smr_negot_take()).
 *
 * Bounds
 * ------
 * A spoofed SYN carrying an offer costs its sender nothing, and any local
 * user may open sockets in SYN_SENT, so records are bounded so that
 * neither can take SMR away from anyone else:
 *
 * - Each network namespace has its own records (struct smr_negot_net), at
 *   most net.smr.negotiation_records_max of them: half for offers we
 *   received at a listener ("answer" records), half for our own SYNs'
 *   offers ("offer" records). A flood at a namespace's listeners never
 *   touches its clients, nor any other namespace.
 * - Answer records of one listener: at most 2 x (backlog + 1), its
 *   listen() backlog being the inner TCP listener's sk_max_ack_backlog,
 *   and at most an eighth of the answer share (SMR_NEGOT_LISTENER_DIV;
 *   never fewer than SMR_NEGOT_LISTENER_FLOOR for that): a flood at one
 *   listener leaves the others most of the share.
 *   TCP itself keeps no more than backlog + 1 request socks and backlog +
 *   1 established children not yet taken off its queue, and a record lives
 *   from the SYN until SMR takes that child; a record is made only for a
 *   SYN TCP will keep a request sock for (as tcp_conn_request() decides:
 *   its SYN queue and accept queue not full), so a flood of forged SYNs
 *   holds no more records than TCP holds request socks. A SYN TCP answers
 *   with a cookie gets its answer from a per-CPU slot instead (the client
 *   falls back, syn_cookies; its server, which kept nothing, reports
 *   peer_no_smr) unless the namespace always sends cookies
 *   (tcp_syncookies=2): then the record is made so that the SYN-ACK can
 *   say so, and lives until the cookie's ACK or the GC.
 * - Each listener may make its first SMR_NEGOT_LISTENER_FLOOR records (up
 *   to its own bound) even when the answer share is used up: a flood at
 *   many listeners, filling the share, leaves every other listener that
 *   many connections negotiating at once. The namespace then holds at
 *   most that many records more per listener, which its owner already
 *   pays a socket for.
 * - Offer records of one user (the uid owning the SMR socket): at most a
 *   quarter of the namespace's records (half of the offer share), so one
 *   user's SYN_SENT sockets always leave the others half of it.
 * The bound is checked when a record would be made; a record found for
 * the same 4-tuple (a retransmitted SYN) is updated in place at no cost.
 *
 * Memory: a record (and its owner entry) is charged to the memory cgroup
 * of the socket it is made for, the connecting inner TCP sock or the
 * listener, the one TCP charges that socket's buffers to (sk_memcg), in
 * softirq too (set_active_memcg()): a container flooding its own
 * listeners pays for their records. A namespace's record table is
 * charged to whoever creates the namespace. A socket with no memory
 * cgroup of its own (the root's, or cgroup v1 without TCP accounting) has
 * its answer records charged to no one, its offer records to the caller
 * of connect() for the first SYN.
 *
 * Over a bound, the decision is per connection: a listener keeps no
 * record and so sends no answer (the client falls back, peer_no_smr; the
 * server child finds no record; negotiation_refused_listen counts it), and
 * a connecting socket sends no offer on this or any retransmitted SYN: the
 * hook clears its syn_nonce, which smr_negot_take_offer() reads as the
 * refusal (reason negot_limit; negotiation_refused_connect).
 *
 * Locking and lifetimes
 * ---------------------
 * A namespace's struct smr_negot_net lives from its pernet init to its
 * pernet exit. Its lock (BH-safe spinlock) protects its hash table, owner
 * table, age list and counts, and every field of its records and owners;
 * nothing is read outside it, so records and owners are freed at once
 * when unlinked (no RCU). Hooks run in softirq or process context, under
 * the RCU read lock of the netfilter core, which keeps the listener they
 * look up alive, and with it its memory cgroup (a listener releases it
 * only when freed); that listener's address only serves as the key of its
 * owner entry, never dereferenced later. The offer hook
 * holds the inner sock's sk_callback_lock (read) while it reads and may
 * clear the owner's syn_nonce, so the SMR socket cannot go meanwhile
 * (order: sk_callback_lock, then the records' lock).
 *
 * A record lives until its socket takes it, or until the GC finds it
 * older than SMR_NEGOT_MIN_AGE with no socket left for its 4-tuple (a
 * connection that never completed, a spoofed SYN, or a socket closed
 * before taking it). The GC is a delayed work per namespace, armed while
 * it has records; it walks the age list oldest first in batches of
 * SMR_NEGOT_GC_BATCH records, dropping the lock (and so BH) and
 * rescheduling between batches; a record that still has its socket goes
 * to the list's tail with a fresh age, so each run ends.
 *
 * Namespace exit: the pernet pre_exit unregisters the hooks, which does
 * not wait for hooks still running (netfilter frees its entries after an
 * RCU grace period); the namespace core then waits a grace period
 * (cleanup_net(), unregister_pernet_subsys()) before any exit runs, and
 * hooks run under the RCU read lock: by the pernet exit none runs, so
 * none can make a record or arm the GC, and the exit cancels the GC and
 * frees every record and the table. Sockets hold their namespace, so
 * none can take a record then.
 */
#include <linux/hashtable.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/jhash.h>
#include <linux/netfilter.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6.h>
#include <linux/random.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/tcp.h>
#include <linux/workqueue.h>
#include <net/addrconf.h>
#include <net/inet6_hashtables.h>
#include <net/inet_hashtables.h>
#include <net/ip.h>
#include <net/ip6_checksum.h>
#include <net/netns/generic.h>
#include <net/tcp.h>

#include "handshake.h"
#include "ib_dev.h"
#include "smr.h"
#include "stats.h"
#include "sysctl.h"
#include "tcp_path.h"
#include "test_hooks.h"
#include "wire.h"

/* a TCP header with every option byte used: 20 fixed + 40 */
#define SMR_TCP_HDR_MAX		60
/* per namespace: 1024 buckets (8 KiB), some 16 records a chain when full */
#define SMR_NEGOT_HASH_BITS	10
#define SMR_NEGOT_OWNER_BITS	6
/* one listener's answer records: at most this fraction of the share */
#define SMR_NEGOT_LISTENER_DIV	8
/* records a listener may make even with the answer share used up */
#define SMR_NEGOT_LISTENER_FLOOR 32
#define SMR_NEGOT_MIN_AGE	(10 * HZ)
#define SMR_NEGOT_GC_PERIOD	(5 * HZ)
/* records the GC handles per hold of the lock (BH off) */
#define SMR_NEGOT_GC_BATCH	64
/*
 * Records are charged to a memory cgroup (see "Memory"). Not GFP_ATOMIC:
 * its __GFP_HIGH forces the charge past the group's limit, so a flood
 * would push a container over it; a failed charge only costs the offer.
 */
#define SMR_NEGOT_GFP		(GFP_NOWAIT | __GFP_ACCOUNT | __GFP_NOWARN)

/* The two shares of a namespace's records, by who made the offer. */
enum smr_negot_pool {
	SMR_NEGOT_POOL_OFFER,	/* our SYN offered (role offer) */
	SMR_NEGOT_POOL_ANSWER,	/* a SYN to our listener offered */
	SMR_NEGOT_POOLS,
};

/* Whose records: a user's offers or a listener's answers. */
struct smr_negot_owner {
	struct hlist_node	node;
	unsigned long		key;	/* a kuid, or the listener's address */
	unsigned int		count;	/* records charged to it */
	u8			pool;	/* enum smr_negot_pool */
};

struct smr_negot {
	struct hlist_node	hnode;
	struct list_head	age_node;	/* oldest first, for the GC */
	struct smr_negot_owner	*owner;
	struct smr_tuple	key;
	unsigned long		created;	/* jiffies */
	int			dif, sdif;	/* for the GC's socket lookup */
	u32			nonce;		/* the offer's nonce */
	u8			role;		/* SMR_OPT_ROLE_OFFER: we connect */
	u8			result;		/* enum smr_negot_result */
};

/*
 * A namespace's records. @lock guards the tables, the list, the counts and
 * every record and owner; @table and @net are set at init, @gc_work is the
 * workqueue's.
 */
struct smr_negot_net {
	spinlock_t		lock;		/* see above */
	struct hlist_head	*table;		/* records by 4-tuple */
	DECLARE_HASHTABLE(owners, SMR_NEGOT_OWNER_BITS);
	struct list_head	age_list;	/* records, oldest first */
	unsigned int		count[SMR_NEGOT_POOLS];
	struct delayed_work	gc_work;	/* armed while records exist */
	struct net		*net;		/* ours; no reference needed */
};

/* Who may make a record, how many it may hold, who pays for them. */
struct smr_negot_quota {
	unsigned long		key;
	unsigned int		max;
	/* of @max, how many even when the namespace's share is used up */
	unsigned int		floor;
	struct mem_cgroup	*memcg;	/* charged; NULL: the current task's */
};

static unsigned int smr_negot_net_id __read_mostly;
static u32 smr_negot_seed __read_mostly;

static struct smr_negot_net *smr_negot_net(const struct net *net)
{
	return net_generic(net, smr_negot_net_id);
}

static enum smr_negot_pool smr_negot_pool_of(u8 role)
{
	return role == SMR_OPT_ROLE_OFFER ? SMR_NEGOT_POOL_OFFER :
					    SMR_NEGOT_POOL_ANSWER;
}

/* Each pool's share of net.smr.negotiation_records_max. */
static unsigned int smr_negot_pool_max(void)
{
	return READ_ONCE(smr_negot_max) / SMR_NEGOT_POOLS;
}

/* ---- tuples and the record table ---- */

static void smr_tuple_v4(struct smr_tuple *t, const struct net *net,
			 __be32 laddr, __be16 lport, __be32 raddr, __be16 rport)
{
	memset(t, 0, sizeof(*t));
	t->net = net;
	t->family = AF_INET;
	ipv6_addr_set_v4mapped(laddr, &t->laddr);
	ipv6_addr_set_v4mapped(raddr, &t->raddr);
	t->lport = lport;
	t->rport = rport;
}

static void smr_tuple_v6(struct smr_tuple *t, const struct net *net,
			 const struct in6_addr *laddr, __be16 lport,
			 const struct in6_addr *raddr, __be16 rport)
{
	memset(t, 0, sizeof(*t));
	t->net = net;
	t->family = AF_INET6;
	t->laddr = *laddr;
	t->raddr = *raddr;
	t->lport = lport;
	t->rport = rport;
}

/* The tuple of a connected or connecting TCP sock, as its packets carry it. */
void smr_tuple_of_sock(struct smr_tuple *t, const struct sock *sk)
{
	const struct inet_sock *inet = inet_sk(sk);

#if IS_ENABLED(CONFIG_IPV6)
	if (sk->sk_family == AF_INET6 &&
	    !ipv6_addr_v4mapped(&sk->sk_v6_daddr)) {
		smr_tuple_v6(t, sock_net(sk), &sk->sk_v6_rcv_saddr,
			     inet->inet_sport, &sk->sk_v6_daddr,
			     inet->inet_dport);
		return;
	}
#endif
	smr_tuple_v4(t, sock_net(sk), inet->inet_rcv_saddr, inet->inet_sport,
		     inet->inet_daddr, inet->inet_dport);
}

static u32 smr_tuple_hash(const struct smr_tuple *t)
{
	u32 h = jhash2((const u32 *)&t->laddr, 4, smr_negot_seed);

	h = jhash2((const u32 *)&t->raddr, 4, h);
	return jhash_3words((__force u32)t->lport, (__force u32)t->rport,
			    (u32)(unsigned long)t->net, h);
}

static bool smr_tuple_eq(const struct smr_tuple *a, const struct smr_tuple *b)
{
	return a->net == b->net && a->family == b->family &&
	       a->lport == b->lport && a->rport == b->rport &&
	       ipv6_addr_equal(&a->laddr, &b->laddr) &&
	       ipv6_addr_equal(&a->raddr, &b->raddr);
}

static struct hlist_head *smr_negot_bucket(struct smr_negot_net *nn,
					   const struct smr_tuple *key)
{
	return &nn->table[hash_32(smr_tuple_hash(key), SMR_NEGOT_HASH_BITS)];
}

static struct smr_negot *smr_negot_find(struct smr_negot_net *nn,
					const struct smr_tuple *key)
{
	struct smr_negot *n;

	lockdep_assert_held(&nn->lock);
	hlist_for_each_entry(n, smr_negot_bucket(nn, key), hnode)
		if (smr_tuple_eq(&n->key, key))
			return n;
	return NULL;
}

static u32 smr_negot_owner_hash(enum smr_negot_pool pool, unsigned long key)
{
	return jhash_2words((u32)key, (u32)((u64)key >> 32) ^ pool,
			    smr_negot_seed);
}

/*
 * A record or owner entry, charged to @q's memory cgroup: in softirq the
 * current task is nobody's, so the cgroup is named (see "Memory").
 */
static void *smr_negot_zalloc(size_t size, const struct smr_negot_quota *q)
{
	struct mem_cgroup *old;
	void *p;

	if (!q->memcg)
		return kzalloc(size, SMR_NEGOT_GFP);
	old = set_active_memcg(q->memcg);
	p = kzalloc(size, SMR_NEGOT_GFP);
	set_active_memcg(old);
	return p;
}

/* The owner entry of @q's key in @pool, made if there is none; NULL: no memory. */
static struct smr_negot_owner *
smr_negot_owner_get(struct smr_negot_net *nn, enum smr_negot_pool pool,
		    const struct smr_negot_quota *q)
{
	u32 hash = smr_negot_owner_hash(pool, q->key);
	unsigned long key = q->key;
	struct smr_negot_owner *o;

	lockdep_assert_held(&nn->lock);
	hash_for_each_possible(nn->owners, o, node, hash)
		if (o->key == key && o->pool == pool)
			return o;
	o = smr_negot_zalloc(sizeof(*o), q);
	if (!o)
		return NULL;
	o->key = key;
	o->pool = pool;
	hash_add(nn->owners, &o->node, hash);
	return o;
}

/* An owner with no record left goes. */
static void smr_negot_owner_put(struct smr_negot_net *nn,
				struct smr_negot_owner *o)
{
	lockdep_assert_held(&nn->lock);
	if (o->count)
		return;
	hash_del(&o->node);
	kfree(o);
}

static void smr_negot_unlink(struct smr_negot_net *nn, struct smr_negot *n)
{
	lockdep_assert_held(&nn->lock);
	hlist_del(&n->hnode);
	list_del(&n->age_node);
	nn->count[n->owner->pool]--;
	n->owner->count--;
	smr_negot_owner_put(nn, n->owner);
	smr_stat_add(nn->net, SMR_STAT_NEGOT_RECORDS, -1);
	kfree(n);
}

/*
 * Record what a hook saw for @key, charged to @q's owner. An existing record
 * of the same role (a retransmitted SYN) is updated in place. Returns 0,
 * -ENOSPC (the namespace's share for this role is used up and the owner
 * holds its floor), -EDQUOT (the owner's share is used up) or -ENOMEM: the
 * caller then neither offers nor answers.
 */
static int smr_negot_record(struct smr_negot_net *nn,
			    const struct smr_tuple *key, u8 role, u32 nonce,
			    u8 result, int dif, int sdif,
			    const struct smr_negot_quota *q)
{
	enum smr_negot_pool pool = smr_negot_pool_of(role);
	struct smr_negot_owner *o;
	struct smr_negot *n;
	bool full;
	int err = 0;

	spin_lock_bh(&nn->lock);
	n = smr_negot_find(nn, key);
	if (n && n->role == role) {
		n->nonce = nonce;
		n->result = result;
		goto out;
	}
	if (n)		/* the 4-tuple changed sides: start afresh */
		smr_negot_unlink(nn, n);
	full = nn->count[pool] >= smr_negot_pool_max();
	if (full && !q->floor) {
		err = -ENOSPC;
		goto out;
	}
	o = smr_negot_owner_get(nn, pool, q);
	if (!o) {
		err = -ENOMEM;
		goto out;
	}
	if (o->count >= q->max) {
		err = -EDQUOT;
		goto out_owner;
	}
	if (full && o->count >= q->floor) {
		err = -ENOSPC;
		goto out_owner;
	}
	n = smr_negot_zalloc(sizeof(*n), q);
	if (!n) {
		err = -ENOMEM;
		goto out_owner;
	}
	n->key = *key;
	n->owner = o;
	n->created = jiffies;
	n->dif = dif;
	n->sdif = sdif;
	n->nonce = nonce;
	n->role = role;
	n->result = result;
	o->count++;
	hlist_add_head(&n->hnode, smr_negot_bucket(nn, key));
	list_add_tail(&n->age_node, &nn->age_list);
	smr_stat_inc(nn->net, SMR_STAT_NEGOT_RECORDS);
	if (!nn->count[SMR_NEGOT_POOL_OFFER] &&
	    !nn->count[SMR_NEGOT_POOL_ANSWER])
		mod_delayed_work(system_wq, &nn->gc_work,
				 SMR_NEGOT_GC_PERIOD);
	nn->count[pool]++;
	goto out;
out_owner:
	smr_negot_owner_put(nn, o);
out:
	spin_unlock_bh(&nn->lock);
	return err;
}

/* Update the result of an existing record with @role; false if none. */
static bool smr_negot_update(const struct smr_tuple *key, u8 role,
			     u8 (*decide)(const struct smr_negot *n,
					  const void *arg),
			     const void *arg, struct smr_negot *copy)
{
	struct smr_negot_net *nn = smr_negot_net(key->net);
	struct smr_negot *n;
	bool found = false;

	spin_lock_bh(&nn->lock);
	n = smr_negot_find(nn, key);
	if (n && n->role == role) {
		if (decide)
			n->result = decide(n, arg);
		if (copy)
			*copy = *n;
		found = true;
	}
	spin_unlock_bh(&nn->lock);
	return found;
}

/*
 * The socket side takes the record of its connection (and so frees it).
 * Returns the recorded result, or SMR_NEGOT_NONE if there was none.
 */
enum smr_negot_result smr_negot_take(const struct smr_tuple *key, u8 role)
{
	struct smr_negot_net *nn = smr_negot_net(key->net);
	enum smr_negot_result res = SMR_NEGOT_NONE;
	struct smr_negot *n;

	spin_lock_bh(&nn->lock);
	n = smr_negot_find(nn, key);
	if (n && n->role == role) {
		res = n->result;
		smr_negot_unlink(nn, n);
	}
	spin_unlock_bh(&nn->lock);
	return res;
}

/*
 * A connecting SMR socket takes the record of its SYN: as smr_negot_take(),
 * and SMR_NEGOT_LIMIT when the offer hook refused to keep one (it cleared
 * @smr's syn_nonce then: no SYN of this connect offered). The nonce is set
 * non-zero before the connect and cleared otherwise only when the connect
 * is abandoned, which never gets here. Sock lock held.
 */
enum smr_negot_result smr_negot_take_offer(struct smr_sock *smr,
					   const struct smr_tuple *key)
{
	enum smr_negot_result res = smr_negot_take(key, SMR_OPT_ROLE_OFFER);

	sock_owned_by_me(&smr->sk);
	if (res == SMR_NEGOT_NONE && !READ_ONCE(smr->syn_nonce))
		res = SMR_NEGOT_LIMIT;
	return res;
}

/* Does a TCP socket (any state but listen) still exist for @n's tuple? */
static bool smr_negot_has_sock(struct net *net, const struct smr_negot *n)
{
	const struct smr_tuple *t = &n->key;
	struct inet_hashinfo *hinfo = net->ipv4.tcp_death_row.hashinfo;
	struct sock *sk = NULL;

	rcu_read_lock();
	if (t->family == AF_INET)
		sk = __inet_lookup_established(net, hinfo,
					       t->raddr.s6_addr32[3], t->rport,
					       t->laddr.s6_addr32[3],
					       ntohs(t->lport), n->dif,
					       n->sdif);
#if IS_ENABLED(CONFIG_IPV6)
	else
		sk = __inet6_lookup_established(net, hinfo, &t->raddr,
						t->rport, &t->laddr,
						ntohs(t->lport), n->dif,
						n->sdif);
#endif
	rcu_read_unlock();
	if (!sk)
		return false;
	sock_gen_put(sk);
	return true;
}

/*
 * Free the records of one namespace whose connection is gone, a batch at a
 * time (see "Locking and lifetimes"). A record's age restarts when its
 * socket is still there, so each record is looked at once per run.
 */
static void smr_negot_gc(struct work_struct *work)
{
	struct smr_negot_net *nn = container_of(to_delayed_work(work),
						struct smr_negot_net, gc_work);
	unsigned long now = jiffies;
	struct smr_negot *n;
	bool done = false, more;
	unsigned int i;

	do {
		spin_lock_bh(&nn->lock);
		for (i = 0; i < SMR_NEGOT_GC_BATCH; i++) {
			n = list_first_entry_or_null(&nn->age_list,
						     struct smr_negot,
						     age_node);
			/* the list is oldest first */
			if (!n || time_before(now, n->created +
						   SMR_NEGOT_MIN_AGE)) {
				done = true;
				break;
			}
			if (smr_negot_has_sock(nn->net, n)) {
				/* still waiting to be taken: look again later */
				n->created = jiffies;
				list_move_tail(&n->age_node, &nn->age_list);
				continue;
			}
			smr_negot_unlink(nn, n);
		}
		more = nn->count[SMR_NEGOT_POOL_OFFER] ||
		       nn->count[SMR_NEGOT_POOL_ANSWER];
		spin_unlock_bh(&nn->lock);
		cond_resched();
	} while (!done);
	if (more)
		schedule_delayed_work(&nn->gc_work, SMR_NEGOT_GC_PERIOD);
}

/* Free every record of a namespace that is going away. */
static void smr_negot_flush(struct smr_negot_net *nn)
{
	struct smr_negot *n;
	bool done = false;
	unsigned int i;

	while (!done) {
		spin_lock_bh(&nn->lock);
		for (i = 0; i < SMR_NEGOT_GC_BATCH; i++) {
			n = list_first_entry_or_null(&nn->age_list,
						     struct smr_negot,
						     age_node);
			if (!n) {
				done = true;
				break;
			}
			smr_negot_unlink(nn, n);
		}
		spin_unlock_bh(&nn->lock);
		cond_resched();
	}
}

/* ---- packet surgery ---- */

struct smr_pkt {
	struct tcphdr	*th;
	unsigned int	nhlen;		/* network header length */
	unsigned int	thlen;		/* TCP header length */
	struct smr_tuple tuple;		/* as the sender sees it */
};

/* Parse the IP and TCP headers of a locally sent or received packet. */
static bool smr_pkt_parse(struct sk_buff *skb, u8 family,
			  const struct net *net, bool incoming,
			  struct smr_pkt *p)
{
	unsigned int nhlen;
	struct tcphdr *th;

	if (family == NFPROTO_IPV4) {
		const struct iphdr *iph = ip_hdr(skb);

		if (iph->protocol != IPPROTO_TCP || ip_is_fragment(iph))
			return false;
		nhlen = iph->ihl * 4;
	} else {
		if (ipv6_hdr(skb)->nexthdr != IPPROTO_TCP)
			return false;	/* extension headers: leave alone */
		nhlen = sizeof(struct ipv6hdr);
	}
	if (!pskb_may_pull(skb, skb_network_offset(skb) + nhlen +
			   sizeof(struct tcphdr)))
		return false;
	th = (struct tcphdr *)(skb_network_header(skb) + nhlen);
	if (!th->syn || th->rst || th->fin)
		return false;
	p->thlen = th->doff * 4;
	if (p->thlen < sizeof(struct tcphdr) ||
	    !pskb_may_pull(skb, skb_network_offset(skb) + nhlen + p->thlen))
		return false;
	/* pskb_may_pull may have moved the headers */
	th = (struct tcphdr *)(skb_network_header(skb) + nhlen);
	p->th = th;
	p->nhlen = nhlen;

	if (family == NFPROTO_IPV4) {
		const struct iphdr *iph = ip_hdr(skb);

		if (incoming)
			smr_tuple_v4(&p->tuple, net, iph->daddr, th->dest,
				     iph->saddr, th->source);
		else
			smr_tuple_v4(&p->tuple, net, iph->saddr, th->source,
				     iph->daddr, th->dest);
	} else {
		const struct ipv6hdr *ip6h = ipv6_hdr(skb);

		if (incoming)
			smr_tuple_v6(&p->tuple, net, &ip6h->daddr, th->dest,
				     &ip6h->saddr, th->source);
		else
			smr_tuple_v6(&p->tuple, net, &ip6h->saddr, th->source,
				     &ip6h->daddr, th->dest);
	}
	return true;
}

static int smr_pkt_find_opt(const struct smr_pkt *p, struct smr_opt *opt)
{
	return smr_opt_parse((const u8 *)(p->th + 1),
			     p->thlen - sizeof(struct tcphdr), opt);
}

/* An option area with an EOL would hide anything appended after it. */
static bool smr_opts_have_eol(const struct smr_pkt *p)
{
	const u8 *o = (const u8 *)(p->th + 1);
	unsigned int i = 0, len = p->thlen - sizeof(struct tcphdr);

	while (i < len) {
		if (o[i] == TCPOPT_EOL)
			return true;
		if (o[i] == TCPOPT_NOP) {
			i++;
			continue;
		}
		if (i + 1 >= len || o[i + 1] < 2)
			return true;	/* malformed: treat as no room */
		i += o[i + 1];
	}
	return false;
}

/*
 * Append the option to a locally generated SYN or SYN-ACK and fix the
 * lengths and checksums. Only header-only segments (no payload, e.g. no
 * Fast Open data) are changed. Returns 0, -ENOSPC (no room: reason
 * option_no_space) or -ENOMEM.
 */
static int smr_pkt_add_opt(struct sk_buff *skb, u8 family, struct smr_pkt *p,
			   const struct smr_opt *opt)
{
	unsigned int hdrs = p->nhlen + p->thlen;
	unsigned int tcplen;
	struct tcphdr *th;

	if (p->thlen + SMR_OPT_LEN > SMR_TCP_HDR_MAX ||
	    skb_network_offset(skb) != 0 || skb->len != hdrs ||
	    smr_opts_have_eol(p) || skb_is_gso(skb))
		return -ENOSPC;
	if (skb_ensure_writable(skb, skb->len) ||
	    skb_cow_head(skb, SMR_OPT_LEN))
		return -ENOMEM;

	/* open a gap after the TCP header by moving the headers down */
	__skb_push(skb, SMR_OPT_LEN);
	memmove(skb->data, skb->data + SMR_OPT_LEN, hdrs);
	skb_reset_network_header(skb);
	skb_set_transport_header(skb, p->nhlen);
	th = tcp_hdr(skb);
	smr_opt_write((u8 *)th + p->thlen, opt);
	th->doff += SMR_OPT_LEN / 4;
	p->th = th;
	p->thlen += SMR_OPT_LEN;
	tcplen = p->thlen;

	if (family == NFPROTO_IPV4) {
		struct iphdr *iph = ip_hdr(skb);

		iph->tot_len = htons(skb->len);
		ip_send_check(iph);
		th->check = 0;
		if (skb->ip_summed == CHECKSUM_PARTIAL) {
			th->check = ~tcp_v4_check(tcplen, iph->saddr,
						  iph->daddr, 0);
		} else {
			th->check = tcp_v4_check(tcplen, iph->saddr, iph->daddr,
						 csum_partial(th, tcplen, 0));
			skb->ip_summed = CHECKSUM_NONE;
		}
	} else {
		struct ipv6hdr *ip6h = ipv6_hdr(skb);

		ip6h->payload_len = htons(tcplen);
		th->check = 0;
		if (skb->ip_summed == CHECKSUM_PARTIAL) {
			th->check = ~tcp_v6_check(tcplen, &ip6h->saddr,
						  &ip6h->daddr, 0);
		} else {
			th->check = tcp_v6_check(tcplen, &ip6h->saddr,
						 &ip6h->daddr,
						 csum_partial(th, tcplen, 0));
			skb->ip_summed = CHECKSUM_NONE;
		}
	}
	if (skb->ip_summed == CHECKSUM_PARTIAL) {
		skb->csum_start = skb_transport_header(skb) - skb->head;
		skb->csum_offset = offsetof(struct tcphdr, check);
	}
	return 0;
}

/* ---- the hooks ---- */

static u8 smr_decide_set(const struct smr_negot *n, const void *arg)
{
	return *(const u8 *)arg;
}

/*
 * Our SYN: offer, unless there is no room, no RDMA device or no record
 * (see "Bounds"). The SMR socket is read under the inner sk_callback_lock:
 * a retransmitted SYN may race with the SMR socket's release, which clears
 * the owner under that lock before freeing it.
 */
static void smr_out_syn(struct sk_buff *skb, u8 family, struct smr_pkt *p,
			struct net *net)
{
	struct smr_opt opt = {
		.version = SMR_OPT_VERSION,
		.role = SMR_OPT_ROLE_OFFER,
	};
	struct smr_negot_quota q;
	struct sock *sk = skb->sk;
	u8 result = SMR_NEGOT_OFFERED;
	struct smr_sock *smr;
	int err;

	if (!sk || !sk_fullsock(sk) || !smr_tcp_sock_is_smr(sk))
		return;
	if (!smr_ib_dev_for_addr(net, p->tuple.family, &p->tuple.laddr))
		result = SMR_NEGOT_NO_DEVICE;
	else if (p->thlen + SMR_OPT_LEN > SMR_TCP_HDR_MAX ||
		 smr_opts_have_eol(p))
		result = SMR_NEGOT_NO_SPACE;

	read_lock_bh(&sk->sk_callback_lock);
	smr = smr_tcp_owner(sk);
	opt.nonce = smr ? READ_ONCE(smr->syn_nonce) : 0;
	if (!smr_opt_nonce_ok(opt.nonce)) {
		/* this socket does not negotiate, or was refused already */
		read_unlock_bh(&sk->sk_callback_lock);
		return;
	}
	/* one user may hold half of the offer share */
	q.key = __kuid_val(sock_net_uid(net, &smr->sk));
	q.max = smr_negot_pool_max() / 2;
	q.floor = 0;
	q.memcg = READ_ONCE(sk->sk_memcg);
	/* the record must exist before the SYN can be answered */
	err = smr_negot_record(smr_negot_net(net), &p->tuple,
			       SMR_OPT_ROLE_OFFER, opt.nonce, result,
			       READ_ONCE(sk->sk_bound_dev_if), 0, &q);
	if (err) {
		/* no SYN of this connect offers (smr_negot_take_offer()) */
		cmpxchg(&smr->syn_nonce, opt.nonce, 0);
		smr_stat_inc(net, SMR_STAT_NEGOT_REFUSED_CONNECT);
	}
	read_unlock_bh(&sk->sk_callback_lock);
	if (err || result != SMR_NEGOT_OFFERED)
		return;
	if (smr_pkt_add_opt(skb, family, p, &opt)) {
		result = SMR_NEGOT_NO_SPACE;
		smr_negot_update(&p->tuple, SMR_OPT_ROLE_OFFER, smr_decide_set,
				 &result, NULL);
	}
}

/*
 * A SYN that TCP answers with a cookie because its listener's SYN queue is
 * full gets no record (see "Bounds"), yet its client should learn why SMR
 * is off (syn_cookies, not peer_no_smr). TCP sends that SYN-ACK before
 * the SYN's softirq ends, on the same CPU (listeners take SYNs without a
 * lock): the SYN's offer waits for it in a per-CPU slot, which the next
 * such SYN on that CPU overwrites. Nothing is kept beyond one slot a CPU.
 */
struct smr_cookie_offer {
	struct smr_tuple	tuple;
	u32			nonce;
	bool			armed;
};

static DEFINE_PER_CPU(struct smr_cookie_offer, smr_cookie_offer);

static void smr_cookie_offer_arm(const struct smr_tuple *tuple, u32 nonce)
{
	struct smr_cookie_offer *c;

	local_bh_disable();
	c = this_cpu_ptr(&smr_cookie_offer);
	c->tuple = *tuple;
	c->nonce = nonce;
	c->armed = true;
	local_bh_enable();
}

/* The offer of the SYN this cookie SYN-ACK answers: true and its nonce. */
static bool smr_cookie_offer_take(const struct smr_tuple *tuple, u32 *nonce)
{
	struct smr_cookie_offer *c;
	bool hit;

	local_bh_disable();
	c = this_cpu_ptr(&smr_cookie_offer);
	hit = c->armed && smr_tuple_eq(&c->tuple, tuple);
	if (hit) {
		*nonce = c->nonce;
		c->armed = false;
	}
	local_bh_enable();
	return hit;
}

/* A cookie SYN-ACK whose SYN offered but has no record: say so. */
static void smr_out_cookie_synack(struct sk_buff *skb, u8 family,
				  struct smr_pkt *p)
{
	struct smr_opt opt = {
		.version = SMR_OPT_VERSION,
		.role = SMR_OPT_ROLE_ANSWER,
		.flags = SMR_OPT_F_COOKIE,
	};
	u32 nonce;

	if (!smr_cookie_offer_take(&p->tuple, &nonce))
		return;
	opt.nonce = smr_opt_proof(nonce);
	smr_pkt_add_opt(skb, family, p, &opt);
}

/* A SYN-ACK from us: answer if the SYN offered to an SMR listener. */
static void smr_out_synack(struct sk_buff *skb, u8 family, struct smr_pkt *p,
			   struct net *net)
{
	struct smr_opt opt = {
		.version = SMR_OPT_VERSION,
		.role = SMR_OPT_ROLE_ANSWER,
	};
	struct smr_negot n;
	u8 result;

	if (!smr_negot_update(&p->tuple, SMR_OPT_ROLE_ANSWER, NULL, NULL, &n)) {
		/* SYN cookie SYN-ACKs carry no socket */
		if (!skb->sk)
			smr_out_cookie_synack(skb, family, p);
		return;
	}
	if (n.result != SMR_NEGOT_OFFERED && n.result != SMR_NEGOT_ANSWERED &&
	    n.result != SMR_NEGOT_COOKIE && n.result != SMR_NEGOT_PEER_NO_DEVICE)
		return;
	/* SYN cookie SYN-ACKs carry no socket: nothing will remember this */
	if (!skb->sk) {
		opt.flags = SMR_OPT_F_COOKIE;
		result = SMR_NEGOT_COOKIE;
	} else if (!smr_ib_dev_for_addr(net, p->tuple.family, &p->tuple.laddr)) {
		/* say so now: the client then builds no link to us */
		opt.flags = SMR_OPT_F_NO_DEVICE;
		result = SMR_NEGOT_PEER_NO_DEVICE;
	} else {
		/* the client may ask for a link's grant (handshake.c) */
		opt.flags = smr_test_answer_old() ? 0 : SMR_OPT_F_LINK_REQUEST;
		result = SMR_NEGOT_ANSWERED;
	}
	opt.nonce = smr_opt_proof(n.nonce);
	if (smr_pkt_add_opt(skb, family, p, &opt))
		result = SMR_NEGOT_NO_SPACE;
	smr_negot_update(&p->tuple, SMR_OPT_ROLE_ANSWER, smr_decide_set,
			 &result, NULL);
}

static unsigned int smr_nf_out(void *priv, struct sk_buff *skb,
			       const struct nf_hook_state *state)
{
	struct smr_pkt p;

	if (!smr_pkt_parse(skb, state->pf, state->net, false, &p))
		return NF_ACCEPT;
	if (!p.th->ack)
		smr_out_syn(skb, state->pf, &p, state->net);
	else
		smr_out_synack(skb, state->pf, &p, state->net);
	return NF_ACCEPT;
}

/* The listener this SYN will reach, if it is an SMR socket's; else NULL. */
static struct sock *smr_syn_smr_listener(struct sk_buff *skb, u8 family,
					 const struct smr_pkt *p,
					 const struct nf_hook_state *state)
{
	struct net *net = state->net;
	struct inet_hashinfo *hinfo = net->ipv4.tcp_death_row.hashinfo;
	struct sock *sk = NULL;

	if (family == NFPROTO_IPV4) {
		const struct iphdr *iph = ip_hdr(skb);

		sk = __inet_lookup_listener(net, hinfo, skb, p->nhlen + p->thlen,
					    iph->saddr, p->th->source,
					    iph->daddr, ntohs(p->th->dest),
					    inet_iif(skb), inet_sdif(skb));
	} else if (IS_ENABLED(CONFIG_IPV6)) {
		const struct ipv6hdr *ip6h = ipv6_hdr(skb);

		sk = inet6_lookup_listener(net, hinfo, skb,
					   p->nhlen + p->thlen,
					   &ip6h->saddr, p->th->source,
					   &ip6h->daddr, ntohs(p->th->dest),
					   inet6_iif(skb), inet6_sdif(skb));
	}
	/* listeners are RCU-freed: no reference needed under the hook */
	return sk && smr_tcp_sock_is_smr(sk) ? sk : NULL;
}

/*
 * Will TCP keep a request sock for this SYN to @lsk? Not when its accept
 * queue is full (dropped), nor when its SYN queue is (a cookie or a drop),
 * as tcp_conn_request() decides; with tcp_syncookies=2 every SYN gets a
 * cookie, and the record then lets the SYN-ACK say so (see "Bounds").
 */
static bool smr_syn_gets_reqsk(const struct sock *lsk, const struct net *net)
{
	if (sk_acceptq_is_full(lsk))
		return false;
	return !inet_csk_reqsk_queue_is_full(lsk) ||
	       READ_ONCE(net->ipv4.sysctl_tcp_syncookies) == 2;
}

/*
 * An offer reached an SMR listener: record it, within the listener's and
 * the namespace's bounds (see "Bounds"), or count the refusal; the SYN-ACK
 * answers only what was recorded.
 */
static void smr_in_syn(struct sk_buff *skb, const struct smr_pkt *p,
		       const struct smr_opt *opt,
		       const struct nf_hook_state *state)
{
	bool v4 = state->pf == NFPROTO_IPV4;
	struct smr_negot_quota q;
	unsigned int share;
	struct sock *lsk;
	u64 max;

	lsk = smr_syn_smr_listener(skb, state->pf, p, state);
	if (!lsk)
		return;
	if (!smr_syn_gets_reqsk(lsk, state->net)) {
		/* a cookie, unless the accept queue is full (a drop) */
		if (!sk_acceptq_is_full(lsk) &&
		    READ_ONCE(state->net->ipv4.sysctl_tcp_syncookies))
			smr_cookie_offer_arm(&p->tuple, opt->nonce);
		smr_stat_inc(state->net, SMR_STAT_NEGOT_REFUSED_LISTEN);
		return;
	}
	/* what TCP may hold: request socks and children, backlog + 1 each */
	max = 2 * ((u64)READ_ONCE(lsk->sk_max_ack_backlog) + 1);
	/* and a fraction of the share, so that others keep the rest */
	share = max_t(unsigned int,
		      smr_negot_pool_max() / SMR_NEGOT_LISTENER_DIV,
		      SMR_NEGOT_LISTENER_FLOOR);
	q.key = (unsigned long)lsk;
	q.max = min_t(u64, max, share);
	q.floor = min_t(unsigned int, q.max, SMR_NEGOT_LISTENER_FLOOR);
	q.memcg = READ_ONCE(lsk->sk_memcg);
	if (smr_negot_record(smr_negot_net(state->net), &p->tuple,
			     SMR_OPT_ROLE_ANSWER, opt->nonce,
			     SMR_NEGOT_OFFERED,
			     v4 ? inet_iif(skb) : inet6_iif(skb),
			     v4 ? inet_sdif(skb) : inet6_sdif(skb), &q))
		smr_stat_inc(state->net, SMR_STAT_NEGOT_REFUSED_LISTEN);
}

static u8 smr_decide_synack(const struct smr_negot *n, const void *arg)
{
	const struct smr_opt *opt = arg;

	if (n->result != SMR_NEGOT_OFFERED)
		return n->result;	/* first SYN-ACK decides */
	if (!opt)
		return SMR_NEGOT_NO_ANSWER;
	if (opt->role != SMR_OPT_ROLE_ANSWER ||
	    opt->nonce != smr_opt_proof(n->nonce))
		return SMR_NEGOT_ECHOED;
	if (opt->flags & SMR_OPT_F_COOKIE)
		return SMR_NEGOT_COOKIE;
	if (opt->flags & SMR_OPT_F_NO_DEVICE)
		return SMR_NEGOT_PEER_NO_DEVICE;
	if (!(opt->flags & SMR_OPT_F_LINK_REQUEST))
		return SMR_NEGOT_PEER_NO_GRANTS;
	return SMR_NEGOT_ANSWERED;
}

static unsigned int smr_nf_in(void *priv, struct sk_buff *skb,
			      const struct nf_hook_state *state)
{
	struct smr_opt opt;
	struct smr_pkt p;
	int found;

	if (!smr_pkt_parse(skb, state->pf, state->net, true, &p))
		return NF_ACCEPT;
	found = smr_pkt_find_opt(&p, &opt);

	if (p.th->ack) {
		/* SYN-ACK: settles a connect we offered on, if any */
		smr_negot_update(&p.tuple, SMR_OPT_ROLE_OFFER,
				 smr_decide_synack, found > 0 ? &opt : NULL,
				 NULL);
		if (found < 0)
			smr_stat_inc(state->net, SMR_STAT_BAD_OPTIONS);
		return NF_ACCEPT;
	}
	if (found <= 0 || opt.role != SMR_OPT_ROLE_OFFER) {
		if (found < 0)
			smr_stat_inc(state->net, SMR_STAT_BAD_OPTIONS);
		return NF_ACCEPT;
	}
	smr_in_syn(skb, &p, &opt, state);
	return NF_ACCEPT;
}

/*
 * Out: after raw, before conntrack and the filter tables, so that
 * nftables output rules see (and may strip) the option. In: after the
 * filter tables, so that input rules may strip it before it counts.
 */
static const struct nf_hook_ops smr_nf_ops[] = {
	{
		.hook		= smr_nf_out,
		.pf		= NFPROTO_IPV4,
		.hooknum	= NF_INET_LOCAL_OUT,
		.priority	= NF_IP_PRI_RAW + 1,
	},
	{
		.hook		= smr_nf_in,
		.pf		= NFPROTO_IPV4,
		.hooknum	= NF_INET_LOCAL_IN,
		.priority	= NF_IP_PRI_SECURITY + 1,
	},
#if IS_ENABLED(CONFIG_IPV6)
	{
		.hook		= smr_nf_out,
		.pf		= NFPROTO_IPV6,
		.hooknum	= NF_INET_LOCAL_OUT,
		.priority	= NF_IP6_PRI_RAW + 1,
	},
	{
		.hook		= smr_nf_in,
		.pf		= NFPROTO_IPV6,
		.hooknum	= NF_INET_LOCAL_IN,
		.priority	= NF_IP6_PRI_SECURITY + 1,
	},
#endif
};

static int __net_init smr_option_net_init(struct net *net)
{
	struct smr_negot_net *nn = smr_negot_net(net);
	int err;

	/* charged to the namespace's creator (see "Memory") */
	nn->table = kvcalloc(1 << SMR_NEGOT_HASH_BITS, sizeof(*nn->table),
			     GFP_KERNEL_ACCOUNT);
	if (!nn->table)
		return -ENOMEM;
	spin_lock_init(&nn->lock);
	hash_init(nn->owners);
	INIT_LIST_HEAD(&nn->age_list);
	INIT_DELAYED_WORK(&nn->gc_work, smr_negot_gc);
	nn->net = net;
	err = nf_register_net_hooks(net, smr_nf_ops, ARRAY_SIZE(smr_nf_ops));
	if (err)
		kvfree(nn->table);
	return err;
}

/*
 * New hooks stop here; those running may still make a record or arm the GC
 * until the grace period the namespace core waits before the exit below.
 */
static void __net_exit smr_option_net_pre_exit(struct net *net)
{
	nf_unregister_net_hooks(net, smr_nf_ops, ARRAY_SIZE(smr_nf_ops));
}

/* A grace period after the pre_exit: no hook runs, none arms the GC. */
static void __net_exit smr_option_net_exit(struct net *net)
{
	struct smr_negot_net *nn = smr_negot_net(net);

	cancel_delayed_work_sync(&nn->gc_work);
	smr_negot_flush(nn);
	kvfree(nn->table);
}

static struct pernet_operations smr_option_net_ops = {
	.init		= smr_option_net_init,
	.pre_exit	= smr_option_net_pre_exit,
	.exit		= smr_option_net_exit,
	.id		= &smr_negot_net_id,
	.size		= sizeof(struct smr_negot_net),
};

int smr_option_init(void)
{
	smr_negot_seed = get_random_u32();
	return register_pernet_subsys(&smr_option_net_ops);
}

/* Every namespace's exit above runs, freeing its records. */
void smr_option_exit(void)
{
	unregister_pernet_subsys(&smr_option_net_ops);
}
