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
 * What was seen is kept in a table of negotiation records keyed by the
 * connection's 4-tuple (struct smr_negot), because neither a request sock
 * nor a SYN_SENT sock has room for it. The socket side takes its record
 * when the connection is established (smr_negot_take()).
 *
 * Locking and lifetimes
 * ---------------------
 * smr_negot_lock (BH-safe spinlock) protects the hash table, the list of
 * records and smr_negot_count; records are freed by RCU after unlinking.
 * Hooks run in softirq or process context with BH disabled. A record lives
 * until its socket takes it, or until the GC finds it older than
 * SMR_NEGOT_MIN_AGE with no socket left for its 4-tuple (a connection that
 * never completed, or whose socket closed before taking it); the table is
 * bounded by SMR_NEGOT_MAX and a full table means "no offer / no answer",
 * which is always safe. Per-netns hooks are registered in the pernet init
 * and unregistered, and that namespace's records freed, in its exit.
 */
#include <linux/hashtable.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/jhash.h>
#include <linux/netfilter.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6.h>
#include <linux/random.h>
#include <linux/tcp.h>
#include <linux/workqueue.h>
#include <net/addrconf.h>
#include <net/inet6_hashtables.h>
#include <net/inet_hashtables.h>
#include <net/ip.h>
#include <net/ip6_checksum.h>
#include <net/tcp.h>

#include "handshake.h"
#include "ib_dev.h"
#include "smr.h"
#include "stats.h"
#include "tcp_path.h"
#include "wire.h"

/* a TCP header with every option byte used: 20 fixed + 40 */
#define SMR_TCP_HDR_MAX		60
#define SMR_NEGOT_BITS		10
#define SMR_NEGOT_MAX		65536
#define SMR_NEGOT_MIN_AGE	(10 * HZ)
#define SMR_NEGOT_GC_PERIOD	(5 * HZ)

struct smr_negot {
	struct hlist_node	hnode;
	struct list_head	age_node;	/* oldest first, for the GC */
	struct rcu_head		rcu;
	struct smr_tuple	key;
	unsigned long		created;	/* jiffies */
	int			dif, sdif;	/* for the GC's socket lookup */
	u32			nonce;		/* the offer's nonce */
	u8			role;		/* SMR_OPT_ROLE_OFFER: we connect */
	u8			result;		/* enum smr_negot_result */
};

static DEFINE_HASHTABLE(smr_negot_table, SMR_NEGOT_BITS);
static LIST_HEAD(smr_negot_age_list);
static DEFINE_SPINLOCK(smr_negot_lock);
static unsigned int smr_negot_count;
static u32 smr_negot_seed __read_mostly;
static void smr_negot_gc(struct work_struct *work);
static DECLARE_DELAYED_WORK(smr_negot_gc_work, smr_negot_gc);

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

/* Caller holds smr_negot_lock. */
static struct smr_negot *smr_negot_find(const struct smr_tuple *key, u32 hash)
{
	struct smr_negot *n;

	lockdep_assert_held(&smr_negot_lock);
	hash_for_each_possible(smr_negot_table, n, hnode, hash)
		if (smr_tuple_eq(&n->key, key))
			return n;
	return NULL;
}

/* Caller holds smr_negot_lock. */
static void smr_negot_unlink(struct smr_negot *n)
{
	lockdep_assert_held(&smr_negot_lock);
	hash_del(&n->hnode);
	list_del(&n->age_node);
	smr_negot_count--;
	smr_stat_add(n->key.net, SMR_STAT_NEGOT_RECORDS, -1);
	kfree_rcu(n, rcu);
}

/*
 * Record what a hook saw for @key. An existing record (a retransmitted SYN)
 * is updated in place. Returns false if the table is full: the caller then
 * neither offers nor answers.
 */
static bool smr_negot_record(const struct smr_tuple *key, u8 role, u32 nonce,
			     u8 result, int dif, int sdif)
{
	u32 hash = smr_tuple_hash(key);
	struct smr_negot *n;
	bool ok = true;

	spin_lock_bh(&smr_negot_lock);
	n = smr_negot_find(key, hash);
	if (n) {
		n->nonce = nonce;
		n->role = role;
		n->result = result;
		goto out;
	}
	if (smr_negot_count >= SMR_NEGOT_MAX) {
		ok = false;
		goto out;
	}
	n = kzalloc(sizeof(*n), GFP_ATOMIC);
	if (!n) {
		ok = false;
		goto out;
	}
	n->key = *key;
	n->created = jiffies;
	n->dif = dif;
	n->sdif = sdif;
	n->nonce = nonce;
	n->role = role;
	n->result = result;
	hash_add(smr_negot_table, &n->hnode, hash);
	list_add_tail(&n->age_node, &smr_negot_age_list);
	smr_stat_inc(n->key.net, SMR_STAT_NEGOT_RECORDS);
	if (!smr_negot_count++)
		mod_delayed_work(system_wq, &smr_negot_gc_work,
				 SMR_NEGOT_GC_PERIOD);
out:
	spin_unlock_bh(&smr_negot_lock);
	return ok;
}

/* Update the result of an existing record with @role; false if none. */
static bool smr_negot_update(const struct smr_tuple *key, u8 role,
			     u8 (*decide)(const struct smr_negot *n,
					  const void *arg),
			     const void *arg, struct smr_negot *copy)
{
	u32 hash = smr_tuple_hash(key);
	struct smr_negot *n;
	bool found = false;

	spin_lock_bh(&smr_negot_lock);
	n = smr_negot_find(key, hash);
	if (n && n->role == role) {
		if (decide)
			n->result = decide(n, arg);
		if (copy)
			*copy = *n;
		found = true;
	}
	spin_unlock_bh(&smr_negot_lock);
	return found;
}

/*
 * The socket side takes the record of its connection (and so frees it).
 * Returns the recorded result, or SMR_NEGOT_NONE if there was none.
 */
enum smr_negot_result smr_negot_take(const struct smr_tuple *key, u8 role)
{
	u32 hash = smr_tuple_hash(key);
	enum smr_negot_result res = SMR_NEGOT_NONE;
	struct smr_negot *n;

	spin_lock_bh(&smr_negot_lock);
	n = smr_negot_find(key, hash);
	if (n && n->role == role) {
		res = n->result;
		smr_negot_unlink(n);
	}
	spin_unlock_bh(&smr_negot_lock);
	return res;
}

/* Does a TCP socket (any state but listen) still exist for @n's tuple? */
static bool smr_negot_has_sock(const struct smr_negot *n)
{
	const struct smr_tuple *t = &n->key;
	struct net *net = (struct net *)t->net;
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

static void smr_negot_gc(struct work_struct *work)
{
	struct smr_negot *n, *tmp;
	unsigned long now = jiffies;
	bool more;

	spin_lock_bh(&smr_negot_lock);
	list_for_each_entry_safe(n, tmp, &smr_negot_age_list, age_node) {
		if (time_before(now, n->created + SMR_NEGOT_MIN_AGE))
			break;	/* the list is oldest first */
		if (smr_negot_has_sock(n)) {
			/* still waiting to be taken: look again later */
			n->created = now;
			list_move_tail(&n->age_node, &smr_negot_age_list);
			continue;
		}
		smr_negot_unlink(n);
	}
	more = smr_negot_count;
	spin_unlock_bh(&smr_negot_lock);
	if (more)
		schedule_delayed_work(&smr_negot_gc_work, SMR_NEGOT_GC_PERIOD);
}

/* Free every record of @net (NULL: all), at netns exit or module unload. */
static void smr_negot_flush(const struct net *net)
{
	struct smr_negot *n, *tmp;

	spin_lock_bh(&smr_negot_lock);
	list_for_each_entry_safe(n, tmp, &smr_negot_age_list, age_node)
		if (!net || n->key.net == net)
			smr_negot_unlink(n);
	spin_unlock_bh(&smr_negot_lock);
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

/* Our SYN: offer, unless there is no room or no RDMA device. */
static void smr_out_syn(struct sk_buff *skb, u8 family, struct smr_pkt *p,
			struct net *net, u32 nonce)
{
	struct smr_opt opt = {
		.version = SMR_OPT_VERSION,
		.role = SMR_OPT_ROLE_OFFER,
		.nonce = nonce,
	};
	u8 result = SMR_NEGOT_OFFERED;

	if (!smr_opt_nonce_ok(opt.nonce))
		return;		/* this socket does not negotiate */
	if (!smr_ib_dev_for_addr(net, p->tuple.family, &p->tuple.laddr))
		result = SMR_NEGOT_NO_DEVICE;
	else if (p->thlen + SMR_OPT_LEN > SMR_TCP_HDR_MAX ||
		 smr_opts_have_eol(p))
		result = SMR_NEGOT_NO_SPACE;
	/* the record must exist before the SYN can be answered */
	if (!smr_negot_record(&p->tuple, SMR_OPT_ROLE_OFFER, opt.nonce, result,
			      0, 0))
		return;
	if (result != SMR_NEGOT_OFFERED)
		return;
	if (smr_pkt_add_opt(skb, family, p, &opt))
		smr_negot_record(&p->tuple, SMR_OPT_ROLE_OFFER, opt.nonce,
				 SMR_NEGOT_NO_SPACE, 0, 0);
}

/*
 * The nonce an SMR socket's inner sock offers, or 0. Read under the inner
 * sk_callback_lock: a retransmitted SYN may race with the SMR socket's
 * release, which clears the owner under that lock before freeing it.
 */
static u32 smr_syn_nonce_of(struct sock *sk)
{
	struct smr_sock *smr;
	u32 nonce = 0;

	if (!sk || !sk_fullsock(sk) || !smr_tcp_sock_is_smr(sk))
		return 0;
	read_lock_bh(&sk->sk_callback_lock);
	smr = smr_tcp_owner(sk);
	if (smr)
		nonce = READ_ONCE(smr->syn_nonce);
	read_unlock_bh(&sk->sk_callback_lock);
	return nonce;
}

static u8 smr_decide_answer(const struct smr_negot *n, const void *arg)
{
	return *(const u8 *)arg;
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

	if (!smr_negot_update(&p->tuple, SMR_OPT_ROLE_ANSWER, NULL, NULL, &n))
		return;
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
		result = SMR_NEGOT_ANSWERED;
	}
	opt.nonce = smr_opt_proof(n.nonce);
	if (smr_pkt_add_opt(skb, family, p, &opt))
		result = SMR_NEGOT_NO_SPACE;
	smr_negot_update(&p->tuple, SMR_OPT_ROLE_ANSWER, smr_decide_answer,
			 &result, NULL);
}

static unsigned int smr_nf_out(void *priv, struct sk_buff *skb,
			       const struct nf_hook_state *state)
{
	struct smr_pkt p;
	u32 nonce;

	if (!smr_pkt_parse(skb, state->pf, state->net, false, &p))
		return NF_ACCEPT;
	if (!p.th->ack) {
		nonce = smr_syn_nonce_of(skb->sk);
		if (nonce)
			smr_out_syn(skb, state->pf, &p, state->net, nonce);
	} else {
		smr_out_synack(skb, state->pf, &p, state->net);
	}
	return NF_ACCEPT;
}

/* Is the listener this SYN will reach an SMR socket? */
static bool smr_syn_to_smr_listener(struct sk_buff *skb, u8 family,
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
	return sk && smr_tcp_sock_is_smr(sk);
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
	if (smr_syn_to_smr_listener(skb, state->pf, &p, state))
		smr_negot_record(&p.tuple, SMR_OPT_ROLE_ANSWER, opt.nonce,
				 SMR_NEGOT_OFFERED,
				 state->pf == NFPROTO_IPV4 ? inet_iif(skb) :
							     inet6_iif(skb),
				 state->pf == NFPROTO_IPV4 ? inet_sdif(skb) :
							     inet6_sdif(skb));
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
	return nf_register_net_hooks(net, smr_nf_ops, ARRAY_SIZE(smr_nf_ops));
}

static void __net_exit smr_option_net_exit(struct net *net)
{
	nf_unregister_net_hooks(net, smr_nf_ops, ARRAY_SIZE(smr_nf_ops));
	smr_negot_flush(net);
}

static struct pernet_operations smr_option_net_ops = {
	.init	= smr_option_net_init,
	.exit	= smr_option_net_exit,
};

int smr_option_init(void)
{
	smr_negot_seed = get_random_u32();
	return register_pernet_subsys(&smr_option_net_ops);
}

void smr_option_exit(void)
{
	unregister_pernet_subsys(&smr_option_net_ops);
	cancel_delayed_work_sync(&smr_negot_gc_work);
	smr_negot_flush(NULL);
}
