// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: setting RDMA links up with rdma_cm. The first connection to a peer
 * creates the link, later ones find it (smr_link_get()).
 *
 * A link is made by both ends' SMR handshake, never by whoever reaches the
 * listener (the rdma_cm device node is world-writable, and anyone on the
 * fabric can send a connect request). The active side draws a 128-bit
 * secret for the link and resolves the peer's TCP address (rdma_cm picks
 * the RDMA device that routes to it: no configuration) while its
 * connection asks the peer to grant the secret over the TCP stream
 * (LINK_REQUEST; the server records a grant bound to both addresses,
 * smr_link_grant(), and answers LINK_GRANT). Once granted and routed it
 * connects to the module's rdma_cm listener on the peer (port cm_port),
 * proving the secret in the private data (wire.c's smr_cm_priv, version
 * 3). The listener builds a link only for a request that consumes a live
 * grant from that very address, within the bounds of link_core.h, and
 * rejects anything else before allocating anything (links_refused). The
 * reply echoes the secret and carries the peer's link id; the client names
 * that id in its PROPOSAL, and the server finds the link by it
 * (smr_link_find()), so both ends of a connection use the same queue pair.
 *
 * Links live in init_net only: rdma_cm ids pin their namespace, and a
 * listener per namespace would keep every namespace alive forever.
 * Sockets in other namespaces fall back to TCP (no_rdma_device).
 *
 * Locking and lifetimes
 * ---------------------
 * As link.c says: the rdma_cm handler acts under the link's @setup_mutex
 * and does nothing on a DEAD link; a handler error takes the link down and
 * the teardown destroys the id. A grant that arrives after the route
 * resolved connects from the link's connect work, under the id's handler
 * lock and then @setup_mutex (the handler's order). Connections racing to
 * a peer with no link find one another's under smr_links_lock. The
 * listener's handler runs in rdma_cm's context for each request: it checks
 * the grant under smr_link_grants_lock (BH; the grants and their count,
 * freed at module exit, or by the test module's test_link_grants) and
 * builds passive links one at a time under smr_link_accept_mutex (inside
 * rdma_cm's handler lock, outside @setup_mutex; a server handshake that
 * does not find the link its client named waits for it, inside the sock
 * lock, smr_link_find()), so the per-peer bound holds exactly; its place
 * in net.smr.links_max and in the peers' share of
 * it is taken under smr_links_lock as its room is checked
 * (smr_link_reserve()), so no link listed meanwhile takes it
 * (smr_link_get() checks the total and its user's share and lists under
 * that lock too, in one hold): those bounds hold exactly as well. The
 * listener lives from smr_link_init() to smr_link_exit().
 *
 * Grants (link_core.h) are listed in the order they were made (stamped
 * under smr_link_grants_lock), so the list's head is the oldest: a full
 * table drops, for a new grant, one at least SMR_LINK_GRANT_MIN_AGE old of
 * the peer holding the most (links_grants_evicted); a renewal extends a
 * grant's lifetime in place, never its age.
 *
 * Shares (link_core.h): the peers' links together hold at most half of
 * links_max, so no remote host, nor many of them, can take the places
 * this host's own connects need (a grant or request past it is refused,
 * links_refused_share); a user's connects create at most a quarter of it
 * (root's are not bounded so), so one local user connecting to many peers
 * cannot take every link either (that connect gets no link and falls back,
 * links_user_limit).
 */
#include <crypto/algapi.h>
#include <linux/delay.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>

#include "link_core.h"
#include "stats.h"

#define SMR_CM_PORT_DEFAULT	7609
#define SMR_CM_TIMEOUT_MS	2000	/* address and route resolution */
#define SMR_CM_BACKLOG		128	/* the listener's pending connects */

static unsigned short smr_cm_port = SMR_CM_PORT_DEFAULT;
module_param_named(cm_port, smr_cm_port, ushort, 0444);
MODULE_PARM_DESC(cm_port, "rdma_cm port of SMR's link listener (default "
		 __stringify(SMR_CM_PORT_DEFAULT) ")");

static struct rdma_cm_id *smr_cm_listener;

static void smr_link_connect_work(struct work_struct *work);

/* ---- grants: secrets this host let its peers prove ---- */

struct smr_link_grant {
	struct list_head	node;		/* on smr_link_grants, oldest first */
	struct in6_addr		laddr;		/* ours, as the request must reach */
	struct in6_addr		raddr;		/* the peer's, as it must come from */
	/*
	 * jiffies64, both: a grant nobody renews or takes waits for the next
	 * grant's sweep, which on 32 bits may come after jiffies wrapped
	 */
	u64			made;		/* renewals keep it */
	u64			expires;
	u8			secret[SMR_LINK_SECRET_LEN];
};

/*
 * smr_link_grants_lock (BH): the list and its count; freed at module exit
 * (and by a test_link_grants write, test module)
 */
static LIST_HEAD(smr_link_grants);
static unsigned int smr_link_ngrants;
static DEFINE_SPINLOCK(smr_link_grants_lock);
/*
 * Builds passive links one at a time, so that the bounds checked before
 * anything is allocated still hold when the link is listed. Taken in the
 * listener's handler, inside rdma_cm's handler lock, outside @setup_mutex.
 */
static DEFINE_MUTEX(smr_link_accept_mutex);

static void smr_link_grant_del_locked(struct smr_link_grant *g)
{
	lockdep_assert_held(&smr_link_grants_lock);
	list_del(&g->node);
	smr_link_ngrants--;
	kfree(g);
}

static bool smr_link_grant_match(const struct smr_link_grant *g,
				 const struct in6_addr *laddr,
				 const struct in6_addr *raddr, const u8 *secret)
{
	return ipv6_addr_equal(&g->raddr, raddr) &&
	       ipv6_addr_equal(&g->laddr, laddr) &&
	       !crypto_memneq(g->secret, secret, SMR_LINK_SECRET_LEN);
}

/*
 * One peer, for a full grant table's choice: an IPv4 address, or an IPv6
 * /64 (whoever has one address of it has them all, as for the buffers
 * held before accept()).
 */
static bool smr_link_grant_same_peer(const struct in6_addr *a,
				     const struct in6_addr *b)
{
	if (ipv6_addr_v4mapped(a) || ipv6_addr_v4mapped(b))
		return ipv6_addr_equal(a, b);
	return ipv6_prefix_equal(a, b, SMR_LINK_GRANT_PEER_PREFIX6);
}

/*
 * The grant a full table gives up for a new one: of those at least
 * SMR_LINK_GRANT_MIN_AGE old, one of the peer (smr_link_grant_same_peer())
 * holding the most grants, its oldest (the list runs oldest first). A host
 * filling the table from many addresses, four grants each, so loses its
 * own before a peer with one grant loses that: a legitimate connect whose
 * first rdma_cm request was lost and retried (seconds) keeps its grant.
 * NULL: all are younger. Caller holds smr_link_grants_lock.
 */
static struct smr_link_grant *smr_link_grant_victim_locked(void)
{
	struct smr_link_grant *g, *peer, *victim = NULL;
	unsigned int of_peer, most = 0;
	u64 now = get_jiffies_64();

	lockdep_assert_held(&smr_link_grants_lock);
	list_for_each_entry(g, &smr_link_grants, node) {
		if (time_before64(now, g->made + SMR_LINK_GRANT_MIN_AGE))
			break;		/* the rest are younger still */
		/* a peer's first grant counts all of the peer's: from here */
		of_peer = 0;
		peer = g;
		list_for_each_entry_from(peer, &smr_link_grants, node)
			if (smr_link_grant_same_peer(&peer->raddr, &g->raddr))
				of_peer++;
		if (of_peer > most) {
			most = of_peer;
			victim = g;
		}
	}
	return victim;
}

/*
 * The server side of a handshake whose client asked (LINK_REQUEST) to
 * connect a link from @raddr to @laddr with @secret (SMR_LINK_SECRET_LEN
 * bytes): record the grant its rdma_cm request must prove. A second
 * request for the same link (another connection waiting on it) renews the
 * first's lifetime, not its age. A peer's grants past
 * SMR_LINK_GRANTS_PER_PEER make room from its own oldest; a full table
 * from one at least SMR_LINK_GRANT_MIN_AGE old, of the peer holding the
 * most (smr_link_grant_victim_locked(); links_grants_evicted), so
 * that hosts that ask for grants and never connect cannot keep every
 * other peer's new links out, short of making at least
 * SMR_LINK_GRANTS_MAX grants every SMR_LINK_GRANT_MIN_AGE (then
 * links_grants_full). 0, or -ENETUNREACH (links live in init_net only),
 * -EBUSY (the peer, or this host, has all the links it may, or the table
 * is full of younger grants), -ENOMEM. Process context.
 */
int smr_link_grant(const struct net *net, const struct in6_addr *laddr,
		   const struct in6_addr *raddr, const u8 *secret)
{
	struct smr_link_grant *g, *tmp, *oldest = NULL;
	enum smr_link_room room;
	unsigned int of_peer = 0;
	bool evicted = false;
	int err = 0;

	if (!net_eq(net, &init_net))
		return -ENETUNREACH;
	/* checked again as its request comes (smr_link_reserve()) */
	spin_lock_bh(&smr_links_lock);
	room = smr_link_room_passive_locked(raddr);
	spin_unlock_bh(&smr_links_lock);
	if (room != SMR_LINK_ROOM) {
		if (room == SMR_LINK_ROOM_SHARE)
			smr_stat_inc(&init_net, SMR_STAT_LINKS_REFUSED_SHARE);
		return -EBUSY;
	}
	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g)
		return -ENOMEM;
	g->laddr = *laddr;
	g->raddr = *raddr;
	memcpy(g->secret, secret, SMR_LINK_SECRET_LEN);

	spin_lock_bh(&smr_link_grants_lock);
	/* under the lock: the list stays in the order of making */
	g->made = get_jiffies_64();
	g->expires = g->made + smr_link_grant_timeout();
	list_for_each_entry_safe(tmp, oldest, &smr_link_grants, node)
		if (time_after_eq64(g->made, tmp->expires))
			smr_link_grant_del_locked(tmp);
	oldest = NULL;
	list_for_each_entry(tmp, &smr_link_grants, node) {
		if (smr_link_grant_match(tmp, laddr, raddr, secret)) {
			/*
			 * renewed in place: its age, and so when it may be
			 * evicted, stays that of its making
			 */
			tmp->expires = g->expires;
			spin_unlock_bh(&smr_link_grants_lock);
			kfree(g);
			return 0;
		}
		if (ipv6_addr_equal(&tmp->raddr, raddr) && !of_peer++)
			oldest = tmp;
	}
	/* a peer's grants beyond its share make room from its own oldest */
	if (of_peer >= SMR_LINK_GRANTS_PER_PEER)
		smr_link_grant_del_locked(oldest);
	/* a full table makes room from a grant old enough, if there is one */
	if (smr_link_ngrants >= SMR_LINK_GRANTS_MAX) {
		oldest = smr_link_grant_victim_locked();
		if (oldest) {
			smr_link_grant_del_locked(oldest);
			evicted = true;
		}
	}
	if (smr_link_ngrants < SMR_LINK_GRANTS_MAX) {
		list_add_tail(&g->node, &smr_link_grants);
		smr_link_ngrants++;
		g = NULL;
	} else {
		err = -EBUSY;	/* full of grants younger than the minimum */
	}
	spin_unlock_bh(&smr_link_grants_lock);
	kfree(g);
	if (evicted)
		smr_stat_inc(&init_net, SMR_STAT_LINKS_GRANTS_EVICTED);
	smr_stat_inc(&init_net, err ? SMR_STAT_LINKS_GRANTS_FULL :
				      SMR_STAT_LINKS_GRANTED);
	return err;
}

/*
 * A connect request from @raddr to @laddr proves @secret: true if a live
 * grant matches, which it consumes (one link per grant).
 */
static bool smr_link_grant_take(const struct in6_addr *laddr,
				const struct in6_addr *raddr, const u8 *secret)
{
	struct smr_link_grant *g;
	bool found = false;

	spin_lock_bh(&smr_link_grants_lock);
	list_for_each_entry(g, &smr_link_grants, node) {
		if (smr_link_grant_match(g, laddr, raddr, secret)) {
			found = time_before64(get_jiffies_64(), g->expires);
			smr_link_grant_del_locked(g);
			break;
		}
	}
	spin_unlock_bh(&smr_link_grants_lock);
	return found;
}

static void smr_link_grants_free(void)
{
	struct smr_link_grant *g, *tmp;

	spin_lock_bh(&smr_link_grants_lock);
	list_for_each_entry_safe(g, tmp, &smr_link_grants, node)
		smr_link_grant_del_locked(g);
	spin_unlock_bh(&smr_link_grants_lock);
}

#ifdef SMR_TEST_HOOKS
/*
 * test_link_grants: reads how many grants the table holds; writing 0
 * forgets them all, so that a case filling the table starts from an
 * empty one whatever the case before it left (grants outlive their
 * links by up to their lifetime).
 */
static int smr_link_test_grants_set(const char *val,
				    const struct kernel_param *kp)
{
	unsigned int n;
	int err = kstrtouint(val, 0, &n);

	if (err)
		return err;
	if (n)
		return -EINVAL;
	smr_link_grants_free();
	return 0;
}

static int smr_link_test_grants_get(char *buf, const struct kernel_param *kp)
{
	unsigned int n;

	spin_lock_bh(&smr_link_grants_lock);
	n = smr_link_ngrants;
	spin_unlock_bh(&smr_link_grants_lock);
	return sysfs_emit(buf, "%u\n", n);
}

static const struct kernel_param_ops smr_link_test_grants_ops = {
	.set	= smr_link_test_grants_set,
	.get	= smr_link_test_grants_get,
};

module_param_cb(test_link_grants, &smr_link_test_grants_ops, NULL, 0644);
MODULE_PARM_DESC(test_link_grants,
		 "test only: the grants this host holds; writing 0 forgets them");
#endif

/* ---- rdma_cm ---- */

#ifdef SMR_TEST_HOOKS
/*
 * test_link_retry_forever (selftests/faults, case stall_clock): links we
 * connect from now on ask for retry count 7 (both ends' QPs take it from
 * the request), which rxe takes as "retry for ever" (the specification
 * does so for RNR retries only), so that only the keepalive's progress
 * check can fail a link whose peer stops acknowledging: a case can time
 * that check alone.
 */
static bool smr_link_test_retry_forever;
module_param_named(test_link_retry_forever, smr_link_test_retry_forever,
		   bool, 0644);
MODULE_PARM_DESC(test_link_retry_forever,
		 "test only: links connected from now on retry for ever (retry count 7)");

static u8 smr_link_retry_count(void)
{
	return READ_ONCE(smr_link_test_retry_forever) ? 7 :
						       SMR_LINK_RETRY_COUNT;
}
#else
static u8 smr_link_retry_count(void)
{
	return SMR_LINK_RETRY_COUNT;
}
#endif

/*
 * Our private data: our link id, the receives we posted (credits) and the
 * link's secret (the request proves it; the accept echoes it).
 */
static void smr_link_conn_param(struct rdma_conn_param *param, u8 *priv,
				const struct smr_link *link)
{
	struct smr_cm_priv p = {
		.link_id	= link->id,
		.credits	= SMR_LINK_RQ_DEPTH,
		.flags		= SMR_CM_F_IDLE_ASK,
	};

	if (smr_link_test_idle_peer() == SMR_LINK_IDLE_PEER_NO_FLAG)
		p.flags = 0;

	memcpy(p.secret, link->secret, sizeof(p.secret));
	smr_cm_priv_build(&p, priv);
	memset(param, 0, sizeof(*param));
	param->private_data = priv;
	param->private_data_len = SMR_CM_PRIV_LEN;
	param->retry_count = smr_link_retry_count();
	param->rnr_retry_count = SMR_LINK_RNR_RETRY;
}

/*
 * What rdma_accept() and rdma_connect() of @link need on @id: its ACK
 * timeout, the QP (smr_link_create_qp(), whose rules on errors apply) and
 * @param carrying our private data in @priv. Caller holds @setup_mutex.
 */
static int smr_link_cm_ready(struct smr_link *link, struct rdma_cm_id *id,
			     struct rdma_conn_param *param, u8 *priv)
{
	int err;

	lockdep_assert_held(&link->setup_mutex);
	err = rdma_set_ack_timeout(id, SMR_LINK_ACK_TIMEOUT);
	if (!err)
		err = smr_link_create_qp(link, id);
	if (err)
		return err;
	smr_link_conn_param(param, priv, link);
	return 0;
}

static void smr_addr_from_sockaddr(struct in6_addr *a,
				   const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		ipv6_addr_set_v4mapped(((const struct sockaddr_in *)sa)->sin_addr.s_addr,
				       a);
	else
		*a = ((const struct sockaddr_in6 *)sa)->sin6_addr;
}

/*
 * Reject a connect request we will not build a link for, at once and
 * counted; the caller returns non-zero, so rdma_cm destroys the id: the
 * request leaves nothing behind.
 */
static int smr_link_refuse(struct rdma_cm_id *id)
{
	smr_stat_inc(&init_net, SMR_STAT_LINKS_REFUSED);
	rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
	return -EACCES;
}

/*
 * A passive link takes what its proven request says: the peer's link id
 * and credits, the secret, the addresses. Until it is listed the accept
 * path owns the link's end: a failure meanwhile (rdma_accept() itself
 * moves the QP to error when it fails, and the receives flush) only marks
 * it DEAD, and queues no teardown on a link smr_link_abandon() frees.
 */
static void smr_link_from_request(struct smr_link *link,
				  struct rdma_cm_id *id,
				  const struct smr_cm_priv *p,
				  const struct in6_addr *laddr,
				  const struct in6_addr *raddr)
{
	lockdep_assert_held(&link->setup_mutex);
	spin_lock_bh(&link->lock);
	link->down = true;
	spin_unlock_bh(&link->lock);
	link->peer_id = p->link_id;
	link->peer_credits = p->credits;
	link->peer_idle_ask = p->flags & SMR_CM_F_IDLE_ASK;
	memcpy(link->secret, p->secret, sizeof(link->secret));
	link->authenticated = true;
	link->cm_id = id;
	link->laddr = *laddr;
	link->raddr = *raddr;
}

#ifdef SMR_TEST_HOOKS
/*
 * test_link_accept_window_ms (selftests/faults, case accept_late): the
 * next passive link waits N ms after rdma_accept() sent its reply, before
 * it is listed and active, as a listener's handler preempted there on a
 * loaded host: the client is up as the reply reaches it, and its PROPOSAL
 * comes meanwhile (at most SMR_LINK_TEST_ACCEPT_WINDOW_MAX_MS).
 * test_link_accept_window_hits counts those waits, test_link_accept_waits
 * the PROPOSALs that found their link only once its accept ended.
 */
static unsigned int smr_link_test_accept_window_ms;
module_param_named(test_link_accept_window_ms, smr_link_test_accept_window_ms,
		   uint, 0644);
MODULE_PARM_DESC(test_link_accept_window_ms,
		 "test only: the next passive link waits N ms between its reply and being listed");

static atomic_t smr_link_test_accept_window_hits = ATOMIC_INIT(0);
module_param_named(test_link_accept_window_hits,
		   smr_link_test_accept_window_hits.counter, int, 0444);
MODULE_PARM_DESC(test_link_accept_window_hits,
		 "test only: test_link_accept_window_ms waits taken");

static atomic_t smr_link_test_accept_waits = ATOMIC_INIT(0);
module_param_named(test_link_accept_waits, smr_link_test_accept_waits.counter,
		   int, 0444);
MODULE_PARM_DESC(test_link_accept_waits,
		 "test only: PROPOSALs that found their link once its accept ended");

/* at most this long: the handler holds rdma_cm's locks and ours */
#define SMR_LINK_TEST_ACCEPT_WINDOW_MAX_MS	5000U

static void smr_link_test_accept_window(void)
{
	unsigned int ms = READ_ONCE(smr_link_test_accept_window_ms);

	if (!ms || cmpxchg(&smr_link_test_accept_window_ms, ms, 0) != ms)
		return;
	msleep(min(ms, SMR_LINK_TEST_ACCEPT_WINDOW_MAX_MS));
	atomic_inc(&smr_link_test_accept_window_hits);
}

static void smr_link_test_accept_waited(const struct smr_link *link)
{
	if (link)
		atomic_inc(&smr_link_test_accept_waits);
}
#else
static inline void smr_link_test_accept_window(void) { }
static inline void smr_link_test_accept_waited(const struct smr_link *link) { }
#endif

/*
 * A peer connects to our listener. Before anything is allocated: its
 * private data must parse (version 3), prove a live grant this host made
 * over an SMR handshake from that very address to this one (consumed),
 * and the peer and this host must have room for one more link. Anything
 * else is rejected at once. Then a passive link, authenticated.
 */
static int smr_link_accept(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rdma_conn_param param;
	u8 priv[SMR_CM_PRIV_LEN];
	struct in6_addr laddr, raddr;
	enum smr_link_room room;
	struct smr_link *link;
	struct smr_cm_priv p;
	bool dead;
	int err;

	if (smr_cm_priv_parse(ev->param.conn.private_data,
			      ev->param.conn.private_data_len, &p))
		return smr_link_refuse(id);
	smr_addr_from_sockaddr(&laddr,
			       (struct sockaddr *)&id->route.addr.src_addr);
	smr_addr_from_sockaddr(&raddr,
			       (struct sockaddr *)&id->route.addr.dst_addr);
	if (!smr_link_grant_take(&laddr, &raddr, p.secret))
		return smr_link_refuse(id);

	mutex_lock(&smr_link_accept_mutex);
	room = smr_link_reserve(&raddr);
	if (room != SMR_LINK_ROOM) {
		mutex_unlock(&smr_link_accept_mutex);
		/* granted while there was room: other peers' links came since */
		if (room == SMR_LINK_ROOM_SHARE)
			smr_stat_inc(&init_net, SMR_STAT_LINKS_REFUSED_SHARE);
		return smr_link_refuse(id);
	}
	link = smr_link_alloc(false, smr_link_connect_work);
	if (!link) {
		err = -ENOMEM;
		goto err_unreserve;
	}
	/* not listed yet; the mutex is for the teardown once it is */
	mutex_lock(&link->setup_mutex);
	smr_link_from_request(link, id, &p, &laddr, &raddr);
	err = smr_link_cm_ready(link, id, &param, priv);
	if (err)
		goto err_build;
	id->context = link;
	err = smr_link_test_fault(SMR_LINK_FAULT_ACCEPT) ?
	      smr_link_test_accept_fails(link) : rdma_accept(id, &param);
	if (err) {
		id->context = NULL;
		goto err_build;
	}
	smr_link_test_accept_window();
	/*
	 * The QP is ready to send once accepted; RTU follows. The client is
	 * up as soon as our reply reaches it: smr_link_find() waits for this
	 * mutex if its PROPOSAL comes first.
	 */
	lockdep_assert_held(&smr_link_accept_mutex);
	smr_link_list_reserved(link);
	/* unused yet: it idles out unless the client's connection comes */
	smr_link_set_active(link);
	/* listed: its failures are the teardown's now, one meanwhile too */
	spin_lock_bh(&link->lock);
	link->down = false;
	dead = link->state == SMR_LINK_DEAD;
	spin_unlock_bh(&link->lock);
	if (dead)
		smr_link_fail(link, "failed while being accepted");
	mutex_unlock(&link->setup_mutex);
	mutex_unlock(&smr_link_accept_mutex);
	return 0;

err_build:
	smr_stat_inc(&init_net, SMR_STAT_LINKS_FAILED);
	smr_link_abandon(link);
	mutex_unlock(&link->setup_mutex);
	smr_link_discard(link);
err_unreserve:
	smr_link_unreserve();
	mutex_unlock(&smr_link_accept_mutex);
	/*
	 * The grant is spent, so a retried request could only be refused:
	 * rejected now (ib_cm would not after -ENOMEM), its link fails at
	 * once instead of in its setup timeout.
	 */
	rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
	return err;	/* rdma_cm destroys the id */
}

/*
 * Ours: the route is resolved and the peer granted our secret: the QP,
 * and the connect request proving the secret. Caller holds the id's
 * handler lock (in its handler, or rdma_lock_handler()) and @setup_mutex.
 */
static int smr_link_connect(struct smr_link *link, struct rdma_cm_id *id)
{
	struct rdma_conn_param param;
	u8 priv[SMR_CM_PRIV_LEN];
	int err;

	lockdep_assert_held(&link->setup_mutex);
	err = smr_link_cm_ready(link, id, &param, priv);
	if (err)
		return err;
	return rdma_connect_locked(id, &param);
}

#ifdef SMR_TEST_HOOKS
/*
 * fault_link_grant_late_release: a late grant's connect work waits until
 * the test writes N > 0 here (N works go, each taking one: it reads 0
 * again once they did), its link is down, or the link's setup deadline
 * passed (the work then finds the link failed). The test releases it once
 * it made the table state it tests, so no sleep of ours has to match how
 * fast the guest is.
 */
static int smr_link_test_late_release;
static DECLARE_WAIT_QUEUE_HEAD(smr_link_test_late_wait);

static int smr_link_test_late_release_set(const char *val,
					  const struct kernel_param *kp)
{
	int n, err = kstrtoint(val, 0, &n);

	if (err)
		return err;
	/* a waiter may claim one meanwhile (smr_link_test_late_claim()) */
	WRITE_ONCE(smr_link_test_late_release, n);
	wake_up_all(&smr_link_test_late_wait);
	return 0;
}

static int smr_link_test_late_release_get(char *buf,
					  const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(smr_link_test_late_release));
}

static const struct kernel_param_ops smr_link_test_late_release_ops = {
	.set	= smr_link_test_late_release_set,
	.get	= smr_link_test_late_release_get,
};

module_param_cb(fault_link_grant_late_release,
		&smr_link_test_late_release_ops, &smr_link_test_late_release,
		0644);
MODULE_PARM_DESC(fault_link_grant_late_release,
		 "test only: let N late links (fault_link_grant_late) send their connect request now");

/* One release is there: true, and it is ours. */
static bool smr_link_test_late_claim(void)
{
	int n = READ_ONCE(smr_link_test_late_release);

	do {
		if (n <= 0)
			return false;
	} while (!try_cmpxchg(&smr_link_test_late_release, &n, n - 1));
	return true;
}

/*
 * fault_link_grant_late: @link, just granted, takes its grant only from
 * its connect work, once the test releases it (a client whose first
 * rdma_cm request was lost and retried). True if so: the caller leaves
 * the grant alone. Caller holds @setup_mutex.
 */
static bool smr_link_test_grant_late(struct smr_link *link)
{
	lockdep_assert_held(&link->setup_mutex);
	if (link->test_grant_late)
		return true;		/* the work is under way */
	if (!smr_link_test_fault(SMR_LINK_FAULT_GRANT_LATE))
		return false;
	/* before the queueing, which makes it visible to the work */
	WRITE_ONCE(link->test_grant_late, true);
	kref_get(&link->ref);	/* the work's */
	/* never pending before the grant: no work would take it */
	if (WARN_ON_ONCE(!queue_work(smr_link_wq, &link->connect_work))) {
		WRITE_ONCE(link->test_grant_late, false);
		smr_link_put(link);
		return false;
	}
	return true;
}

/*
 * The connect work of a late grant: wait for the release (see above),
 * then take the grant. True if the link is to connect now (its route
 * resolved before; else the handler connects it as the route resolves).
 * The wait ends by the link's setup deadline; the teardown, which runs on
 * a DEAD link only, waits in its cancel a tenth of a second at most.
 */
static bool smr_link_test_grant_late_wait(struct smr_link *link)
{
	unsigned long deadline = jiffies + smr_link_setup_timeout();
	bool released = false, connect;

	if (!READ_ONCE(link->test_grant_late))
		return true;
	/* short waits: a link that goes down wakes no one here */
	while (!released && READ_ONCE(link->state) != SMR_LINK_DEAD &&
	       time_before(jiffies, deadline))
		released = wait_event_timeout(smr_link_test_late_wait,
					      smr_link_test_late_claim(),
					      HZ / 10) > 0;
	pr_info("test fault: late grant %s\n",
		released ? "released" : "not released, link down or late");
	mutex_lock(&link->setup_mutex);
	WRITE_ONCE(link->test_grant_late, false);
	link->granted = released && READ_ONCE(link->state) != SMR_LINK_DEAD;
	connect = link->granted && link->route_resolved;
	mutex_unlock(&link->setup_mutex);
	return connect;
}
#else
static inline bool smr_link_test_grant_late(struct smr_link *link)
{
	return false;
}

static inline bool smr_link_test_grant_late_wait(struct smr_link *link)
{
	return true;
}
#endif

/*
 * The grant came after the route resolved: connect from here, with the
 * id's handler lock taken first as rdma_cm takes it for the handler. The
 * queued work holds a link reference; the teardown cancels it (fenced
 * first, see link.c), so the id lives while it runs. In the test module
 * it is also a late grant's waiter (fault_link_grant_late), which may end
 * without connecting.
 */
static void smr_link_connect_work(struct work_struct *work)
{
	struct smr_link *link = container_of(work, struct smr_link,
					     connect_work);
	int err = 0;

	if (!smr_link_test_grant_late_wait(link)) {
		smr_link_put(link);	/* the queued work's */
		return;
	}
	rdma_lock_handler(link->cm_id);
	mutex_lock(&link->setup_mutex);
	if (READ_ONCE(link->state) != SMR_LINK_DEAD && !link->qp)
		err = smr_link_connect(link, link->cm_id);
	mutex_unlock(&link->setup_mutex);
	rdma_unlock_handler(link->cm_id);
	if (err)
		smr_link_fail(link, "connect after the grant failed");
	smr_link_put(link);	/* the queued work's */
}

/*
 * Ours, the accept: its private data must parse and echo our secret
 * (the peer built the link on our grant). Caller holds @setup_mutex.
 */
static int smr_link_peer_param(struct smr_link *link,
			       const struct rdma_conn_param *param)
{
	struct smr_cm_priv p;

	lockdep_assert_held(&link->setup_mutex);
	if (smr_cm_priv_parse(param->private_data, param->private_data_len,
			      &p) ||
	    crypto_memneq(p.secret, link->secret, sizeof(p.secret)))
		return -EPROTO;
	link->peer_id = p.link_id;
	link->peer_credits = p.credits;
	link->peer_idle_ask = p.flags & SMR_CM_F_IDLE_ASK;
	WRITE_ONCE(link->authenticated, true);
	return 0;
}

/*
 * One rdma_cm event of a link's id. Caller holds @setup_mutex. An error
 * fails the link; @why says why, for the kernel log.
 */
static int smr_link_cm_event(struct smr_link *link, struct rdma_cm_id *id,
			     struct rdma_cm_event *ev, const char **why)
{
	int err = 0;

	lockdep_assert_held(&link->setup_mutex);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		err = rdma_resolve_route(id, SMR_CM_TIMEOUT_MS);
		*why = "route resolution did not start";
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		/* connects once granted too (smr_link_granted()) */
		link->route_resolved = true;
		if (link->granted && !link->qp)
			err = smr_link_connect(link, id);
		*why = "connect did not start";
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (link->active_side) {
			err = smr_link_peer_param(link, &ev->param.conn);
			if (!err)
				smr_link_set_active(link);
		}
		*why = "peer's private data invalid";
		break;
	case RDMA_CM_EVENT_REJECTED:
		err = -ENOTCONN;
		*why = rdma_reject_msg(id, ev->status);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		err = -ENOTCONN;
		*why = rdma_event_msg(ev->event);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
	case RDMA_CM_EVENT_ADDR_CHANGE:
		smr_link_down(link);
		break;
	default:
		break;
	}
	return err;
}

static int smr_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct smr_link *link = id->context;
	const char *why = NULL;
	int err;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return smr_link_accept(id, ev);
	if (!link)
		return 0;	/* the listener itself */

	mutex_lock(&link->setup_mutex);
	/* a link being torn down builds nothing more (see link.c) */
	err = READ_ONCE(link->state) == SMR_LINK_DEAD ? 0 :
	      smr_link_cm_event(link, id, ev, &why);
	mutex_unlock(&link->setup_mutex);
	if (err)
		smr_link_fail(link, why);
	return 0;	/* the teardown work destroys the id, never rdma_cm */
}

/* The rdma_cm addresses of a link from @laddr to @raddr's listener. */
static void smr_link_sockaddrs(int family, const struct in6_addr *laddr,
			       const struct in6_addr *raddr,
			       struct sockaddr_storage *src,
			       struct sockaddr_storage *dst)
{
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)src;
		struct sockaddr_in *d = (struct sockaddr_in *)dst;

		s->sin_family = AF_INET;
		s->sin_addr.s_addr = laddr->s6_addr32[3];
		d->sin_family = AF_INET;
		d->sin_addr.s_addr = raddr->s6_addr32[3];
		d->sin_port = htons(smr_cm_port);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)src;
		struct sockaddr_in6 *d = (struct sockaddr_in6 *)dst;

		s->sin6_family = AF_INET6;
		s->sin6_addr = *laddr;
		d->sin6_family = AF_INET6;
		d->sin6_addr = *raddr;
		d->sin6_port = htons(smr_cm_port);
	}
}

/*
 * Attach @user to @link, whose reference (a lookup's) becomes the user's:
 * 0, or -ENOLINK if the link went down since it was looked up (counted in
 * links_attach_dead, and the caller's connection falls back with
 * link_failure), or -EAGAIN if it is about to idle out (@peer_named: the
 * peer's PROPOSAL named it; see smr_link_attach()). The reference is
 * dropped on error.
 */
static int smr_link_use(struct smr_link *link, struct smr_link_user *user,
			bool peer_named)
{
	int err = smr_link_attach(link, user, peer_named);

	if (err == -ENOLINK)
		smr_stat_inc(&init_net, SMR_STAT_LINKS_ATTACH_DEAD);
	if (err)
		smr_link_put(link);
	return err;
}

/*
 * A new link of ours from @laddr to @raddr for @uid, unlisted, with a
 * fresh secret (what the peer grants and our connect request proves) and
 * its rdma_cm id: NULL if either cannot be had.
 */
static struct smr_link *smr_link_new_active(const struct in6_addr *laddr,
					    const struct in6_addr *raddr,
					    kuid_t uid)
{
	struct smr_link *link;
	struct rdma_cm_id *id;

	link = smr_link_alloc(true, smr_link_connect_work);
	if (!link)
		return NULL;
	link->laddr = *laddr;
	link->raddr = *raddr;
	link->uid = uid;
	do {
		get_random_bytes(link->secret, sizeof(link->secret));
	} while (!memchr_inv(link->secret, 0, sizeof(link->secret)));
	id = rdma_create_id(&init_net, smr_cm_handler, link, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id)) {
		smr_link_discard(link);
		return NULL;
	}
	link->cm_id = id;
	return link;
}

/*
 * Start a listed, attached link of ours on its way: its setup deadline
 * (the keepalive work's first run, cancelled by the teardown like the
 * keepalive it becomes) and address resolution. A failure to start takes
 * the link down: its users fall back.
 */
static void smr_link_start_active(struct smr_link *link, int family)
{
	struct sockaddr_storage src = {}, dst = {};
	int err = 0;

	smr_link_sockaddrs(family, &link->laddr, &link->raddr, &src, &dst);
	queue_delayed_work(smr_link_wq, &link->keepalive_work,
			   smr_link_setup_timeout());
	/* the handler and the teardown may run from now on */
	mutex_lock(&link->setup_mutex);
	if (READ_ONCE(link->state) != SMR_LINK_DEAD)
		err = rdma_resolve_addr(link->cm_id, (struct sockaddr *)&src,
					(struct sockaddr *)&dst,
					SMR_CM_TIMEOUT_MS);
	mutex_unlock(&link->setup_mutex);
	if (err)
		smr_link_fail(link, "address resolution did not start");
}

/*
 * The link from @laddr to @raddr (a connection's addresses, v4-mapped for
 * IPv4; @family says which), attached to @user: an existing one this host
 * may use (smr_link_lookup()), or a new one of ours, with a fresh secret,
 * whose address and route resolution has begun; it connects once the peer
 * granted the secret too (smr_link_needs_grant(), smr_link_granted()).
 * Connections racing to a peer with no link find one another's under
 * smr_links_lock, so they share one. A new link is created for @uid, the
 * owner of the connecting socket, within its share (links_user_limit
 * counts a connect past it). NULL if none can be made (or this host has
 * net.smr.links_max, or @uid its share). The user holds the returned
 * reference.
 */
struct smr_link *smr_link_get(struct smr_link_user *user,
			      const struct net *net, int family,
			      const struct in6_addr *laddr,
			      const struct in6_addr *raddr, kuid_t uid)
{
	enum smr_link_room room = SMR_LINK_ROOM_FULL;
	struct smr_link *link, *found;
	bool retried = false;

	if (!net_eq(net, &init_net))
		return NULL;

again:
	spin_lock_bh(&smr_links_lock);
	found = smr_link_lookup(laddr, raddr);
	/* no id nor link allocated for a connect that may not have one */
	if (!found)
		room = smr_link_room_active_locked(uid);
	spin_unlock_bh(&smr_links_lock);
	if (!found && room != SMR_LINK_ROOM) {
		if (room == SMR_LINK_ROOM_USER)
			smr_stat_inc(&init_net, SMR_STAT_LINKS_USER_LIMIT);
		return NULL;
	}
	if (found) {
		if (!smr_link_use(found, user, false))
			return found;
		/* it went down, or idles out: the lookup skips it now */
		if (!retried) {
			retried = true;
			goto again;
		}
		return NULL;
	}

	link = smr_link_new_active(laddr, raddr, uid);
	if (!link)
		return NULL;
	/*
	 * Listed before it connects: a racing connection waits on it. Its
	 * room is checked again, in the hold that lists it: the bounds hold
	 * exactly whatever was listed since the check above.
	 */
	spin_lock_bh(&smr_links_lock);
	found = smr_link_lookup(laddr, raddr);
	if (!found) {
		room = smr_link_room_active_locked(uid);
		if (room == SMR_LINK_ROOM)
			smr_link_list_add_locked(link);
	}
	spin_unlock_bh(&smr_links_lock);
	if (found || room != SMR_LINK_ROOM) {
		rdma_destroy_id(link->cm_id);
		smr_link_discard(link);
		if (!found && room == SMR_LINK_ROOM_USER)
			smr_stat_inc(&init_net, SMR_STAT_LINKS_USER_LIMIT);
		if (found && smr_link_use(found, user, false))
			found = NULL;
		return found;
	}
	kref_get(&link->ref);		/* the user's */
	if (smr_link_use(link, user, false))
		return NULL;	/* down already (its device went) */
	smr_link_start_active(link, family);
	return link;
}

/*
 * The client side: @link is ours and the peer has not granted its secret
 * yet: true, with our id of it in @id and the secret in @secret
 * (SMR_LINK_SECRET_LEN bytes) for a LINK_REQUEST. Every connection waiting
 * on such a link may ask; the peer keeps one grant for them all.
 */
bool smr_link_needs_grant(struct smr_link *link, u32 *id, u8 *secret)
{
	bool needs;

	mutex_lock(&link->setup_mutex);
	needs = link->active_side && !link->granted &&
		READ_ONCE(link->state) == SMR_LINK_CONNECTING;
	mutex_unlock(&link->setup_mutex);
	if (needs) {
		*id = link->id;
		memcpy(secret, link->secret, SMR_LINK_SECRET_LEN);
	}
	return needs;
}

/*
 * The client side: the peer's LINK_GRANT names @link (our @id) and echoes
 * @secret: the link connects as soon as its route is resolved. -EPROTO if
 * the grant is not for this link. Process context.
 */
int smr_link_granted(struct smr_link *link, u32 id, const u8 *secret)
{
	if (!link->active_side || id != link->id ||
	    crypto_memneq(secret, link->secret, SMR_LINK_SECRET_LEN))
		return -EPROTO;
	mutex_lock(&link->setup_mutex);
	if (!link->granted && READ_ONCE(link->state) == SMR_LINK_CONNECTING &&
	    smr_link_test_fault(SMR_LINK_FAULT_GRANT_UNUSED)) {
		/* a client that asks for grants and never connects */
		smr_link_fail(link, "test: grant left unused");
	} else if (!link->granted && READ_ONCE(link->state) != SMR_LINK_DEAD &&
		   !smr_link_test_grant_late(link)) {
		link->granted = true;
		/* resolved before: the handler left the connect to us */
		if (link->route_resolved && !link->qp) {
			kref_get(&link->ref);	/* the work's */
			if (!queue_work(smr_link_wq, &link->connect_work))
				smr_link_put(link);
		}
	}
	mutex_unlock(&link->setup_mutex);
	return 0;
}

/*
 * The client side: the peer DECLINEd our LINK_REQUEST for @link (its
 * bounds are full, or it makes no links). A link it never granted cannot
 * come up: it fails now (links_failed), not after SMR_LINK_SETUP_TIMEOUT
 * with every connection to that peer meanwhile attaching to it and paying
 * a round trip to be declined again. The connections waiting on it fall
 * back; the next one asks afresh. Process context.
 */
void smr_link_grant_declined(struct smr_link *link)
{
	/* failed under the mutex: a GRANT another connection reads meanwhile
	 * either finds it failed or made it granted first
	 */
	mutex_lock(&link->setup_mutex);
	if (link->active_side && !link->granted &&
	    READ_ONCE(link->state) == SMR_LINK_CONNECTING)
		smr_link_fail(link, "peer declined its grant");
	mutex_unlock(&link->setup_mutex);
}

/*
 * The server side: the link the client named by our id @id, if it is
 * active (or becomes so as the accept under way ends), leads to the
 * connection's peer @raddr, and lives in its namespace. Attached to @user
 * with a reference, or NULL. Process context.
 */
struct smr_link *smr_link_find(struct smr_link_user *user, u32 id,
			       const struct net *net,
			       const struct in6_addr *raddr)
{
	struct smr_link *link;

	if (!net_eq(net, &init_net))
		return NULL;
	link = smr_link_lookup_id(id);
	if (!link && smr_link_id_accepting(id)) {
		/*
		 * The client's link is up once our reply reached it, and
		 * rdma_accept() sent that reply before smr_link_accept() lists
		 * the link and makes it active: its PROPOSAL may come first.
		 * That accept ends before this mutex is ours.
		 */
		mutex_lock(&smr_link_accept_mutex);
		mutex_unlock(&smr_link_accept_mutex);
		link = smr_link_lookup_id(id);
		smr_link_test_accept_waited(link);
	}
	if (link && !ipv6_addr_equal(&link->raddr, raddr)) {
		smr_link_put(link);
		link = NULL;
	}
	if (link && smr_link_test_fault(SMR_LINK_FAULT_FIND)) {
		/* as if it idled out just now, all the way */
		smr_link_down(link);
		flush_work(&link->teardown_work);
	}
	/* it may have gone down since the lookup, its teardown done */
	if (link && smr_link_use(link, user, true))
		link = NULL;
	return link;
}

/* ---- module ---- */

/* The link layer starts; @ops is how it reaches its users from now on. */
int smr_link_init(const struct smr_link_ops *ops)
{
	struct sockaddr_in6 any = {
		.sin6_family	= AF_INET6,
		.sin6_port	= htons(smr_cm_port),
	};
	struct rdma_cm_id *id;
	int err;

	BUILD_BUG_ON(SMR_LINK_MSG_SIZE < SMR_CDC_MAX_LEN);
	smr_link_user_ops = ops;
	smr_link_wq = alloc_workqueue("smr_link", WQ_UNBOUND, 0);
	if (!smr_link_wq)
		return -ENOMEM;
	id = rdma_create_id(&init_net, smr_cm_handler, NULL, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id)) {
		err = PTR_ERR(id);
		goto err_wq;
	}
	/* one listener for IPv4 and IPv6 peers */
	err = rdma_set_afonly(id, 0);
	if (!err)
		err = rdma_bind_addr(id, (struct sockaddr *)&any);
	if (!err)
		err = rdma_listen(id, SMR_CM_BACKLOG);
	if (err) {
		pr_err("rdma_cm listener on port %u: %d (choose another with cm_port=)\n",
		       smr_cm_port, err);
		rdma_destroy_id(id);
		goto err_wq;
	}
	smr_cm_listener = id;
	return 0;

err_wq:
	destroy_workqueue(smr_link_wq);
	return err;
}

/* No SMR socket has a file left; links may still carry closing ones. */
void smr_link_exit(void)
{
	rdma_destroy_id(smr_cm_listener);
	smr_link_test_exit();
	smr_link_devices_gone(NULL);
	/* links that raced into the list behind the flush */
	while (!list_empty_careful(&smr_links))
		smr_link_devices_gone(NULL);
	/* teardowns still running drain their QPs: the writer's last one too */
	destroy_workqueue(smr_link_wq);
	smr_link_test_exit_links_gone();
	/* no handshake or listener is left to add or take one */
	smr_link_grants_free();
}
