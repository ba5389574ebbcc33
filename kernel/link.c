// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: RDMA links, the queue pair and what travels on it. A link is one RC
 * queue pair between this host and a peer host, shared by every SMR
 * connection between the two (link_cm.c sets it up with rdma_cm).
 *
 * Each link owns a protection domain, one completion queue polled in
 * softirq, a QP, CDC message slots (send) and posted CDC receives, all
 * allocated and DMA-mapped once; the data path allocates nothing. Every
 * CDC send is signalled and carries the count of unsignalled RDMA WRITEs
 * posted ahead of it, so send queue credits come back in order.
 *
 * A link knows its connections only as struct smr_link_user and reaches
 * them through the smr_link_ops the connection layer registered
 * (smr_link_init()): received CDCs, completions of their CDCs, room after
 * a wait, the link coming up or going down, and references on them.
 *
 * Locking and lifetimes
 * ---------------------
 * smr_links_lock (BH) protects smr_links, the id IDR and the counts the
 * bounds are checked against (smr_links_count, smr_links_passive); a link
 * is listed until it goes down. Its place in those bounds is checked and
 * taken in one step under that lock (as it is listed, or for a passive
 * link reserved before it is built, smr_link_reserve()), and given back
 * where it is unlisted (the teardown) or its reservation dropped; the
 * per-peer and per-user counts are the listed links themselves, read
 * under the same lock. link->lock (BH) protects what struct smr_link lists
 * (link_core.h): the state, users and their smr_link_user fields, slots,
 * send queue room, the wait list and the credits; posting to the QP
 * happens under it, so a post never races with teardown. It nests inside
 * a connection's lock (a CDC is posted under both). References (kref): the
 * list holds one until teardown ends, every attached user holds one, as
 * do lookups and the queued idle, teardown and fatal QP event works. A
 * QP's events may come in hard interrupt context, where no SMR lock is
 * taken: a fatal one queues its work (smr_link_qp_event()). A user on @tx_wait,
 * and a posted CDC slot, hold a reference on the user's owner
 * (smr_link_ops.hold), dropped when it leaves the list or completes. The
 * rdma_cm id is destroyed by the teardown work only (never in its own
 * handler), before the last reference can go, so the handler always finds
 * its link.
 *
 * @setup_mutex is held by the rdma_cm handler while it acts on an event
 * (it creates the QP, connects, activates), by the connect work (which
 * holds the id's handler lock first, in the handler's order; the test
 * module's late grant first waits for its release holding nothing, and for
 * a tenth of a second at most once the link is DEAD) and by the handshake
 * telling a link it was granted, and taken once by the teardown after the
 * link is DEAD: a handler that began before cannot build on a link being
 * freed, and a later one sees DEAD and does nothing. A connect work is
 * queued only under it and before DEAD, so the teardown's cancel after
 * that fence catches every one.
 *
 * Trust: a link carries connections only once both ends' SMR handshake
 * made it (link_cm.c: grants, and the secret proven in the private data):
 * lookups return only such links (smr_link_trusted()).
 *
 * Idle: an active link with no user idles out after
 * net.smr.link_idle_timeout_ms (armed when it comes up unused and when its
 * last user detaches), so neither a peer nor a vanished connection can
 * leave one for ever; but only when both ends agree. The peer attaches a
 * new connection before its PROPOSAL, we only when that arrives: an end
 * that let the link go alone would take down a connection the peer is
 * setting up on it. So the idle end asks (an IDLE link message); the peer
 * says yes only if it has no user either, and from then on attaches none
 * (@idle_agreed); on that yes the asker takes the link down. While its
 * question is open (@idle_asked) an end attaches only connections the
 * peer's PROPOSAL names (the peer then has a user and says no), its own
 * new ones take another link. No answer in SMR_LINK_IDLE_ANSWER_TIMEOUT
 * fails the link; an asker that does not take it down that long after a
 * yes finds it gone anyway; a peer that keeps saying no while no
 * connection of its reaches this end does not keep it longer than such a
 * connection's setup could take (smr_link_kept_for_nothing_locked()).
 * A peer whose private data lacks SMR_CM_F_IDLE_ASK (an older module) is
 * never asked: each end lets the link go alone, as before.
 *
 * Memory registrations sleep: for send queue room on @reg_wait (woken
 * whenever a signalled WR gives room back, and when the link goes down),
 * at most handshake_timeout_ms, then for their completion.
 *
 * Teardown (process context, smr_link_wq): mark DEAD, fence the handler
 * and the connect work, drain the QP (every posted send and receive
 * completes, flushed), detach
 * every user and tell it (smr_link_ops.down), then free the pool, QP, CQ,
 * messages, PD and id.
 *
 * Failure detection: every work request's failure reaches the link
 * (unsignalled WRITEs and invalidations carry an error-only completion
 * entry; a flushed one means the QP went to error), and the QP retries a
 * lost packet at most SMR_LINK_RETRY_COUNT times, SMR_LINK_ACK_TIMEOUT
 * apart (the RC ack timeout 4.096 us << 18 = 1.07 s). The adapter's
 * retries are not relied on alone: a device whose packets cannot leave
 * (its netdev's queue stalled) never counts one, and some retry for ever.
 * So the keepalive work also checks progress: sends outstanding and none
 * completed for SMR_LINK_STALL_TIMEOUT take the link down, counted from the
 * later of the last completion and the post that found the send queue
 * empty (idle time before a send does not count). A silent peer fails the
 * link within SMR_LINK_STALL_TIMEOUT + SMR_LINK_KEEPALIVE of the last
 * acknowledgment, and no link fails so before SMR_LINK_STALL_TIMEOUT after
 * its oldest send not completed was posted. The same work guards the
 * setup of a link we connect: not up in SMR_LINK_SETUP_TIMEOUT, it fails.
 * Documentation/design.rst, "Failure semantics".
 *
 * Credits: an IB SEND the peer has no receive posted for draws an RNR NAK,
 * and RNR retries stall and then fail the whole link. So each end sends at
 * most as many SENDs as the peer granted: the rdma_cm private data's
 * initial grant, plus the credits every CDC and link message carries back
 * (receives re-posted since the last report). CDCs keep the last credit
 * for a credit-only link message, sent once SMR_LINK_CREDIT_BATCH are
 * owed, so both ends can never be left without one.
 */
#include <linux/delay.h>
#include <linux/irq_work.h>
#include <linux/moduleparam.h>
#include <linux/seq_file.h>
#include <linux/seq_file_net.h>
#include <linux/slab.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "link_core.h"
#include "stats.h"
#include "sysctl.h"

/* the teardown waits this long between looks at users being destroyed */
#define SMR_LINK_DYING_WAIT_US		1000

LIST_HEAD(smr_links);
DEFINE_SPINLOCK(smr_links_lock);
/*
 * smr_links_lock: links on smr_links and passive ones reserved, bounded by
 * net.smr.links_max; of those, the passive ones (the peers' share)
 */
unsigned int smr_links_count;
static unsigned int smr_links_passive;
struct workqueue_struct *smr_link_wq;
const struct smr_link_ops *smr_link_user_ops;
/* link ids, never 0; erased under smr_links_lock too (smr_link_lookup_id()) */
static DEFINE_XARRAY_FLAGS(smr_link_ids, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_BH);
static u32 smr_link_next_id;

#ifdef SMR_TEST_HOOKS
#define SMR_LINK_TEST_FLUSH_WAIT_MS	200

/* the test module's faults (link_core.h): how many of each are to come */
static int smr_link_faults[SMR_LINK_FAULTS];
module_param_named(fault_link_accept, smr_link_faults[SMR_LINK_FAULT_ACCEPT],
		   int, 0644);
MODULE_PARM_DESC(fault_link_accept,
		 "test only: the next N passive links fail their accept after their QP and receives exist");
module_param_named(fault_link_recv, smr_link_faults[SMR_LINK_FAULT_RECV],
		   int, 0644);
MODULE_PARM_DESC(fault_link_recv,
		 "test only: the next N link QPs fail to post half their receives");
module_param_named(fault_link_find, smr_link_faults[SMR_LINK_FAULT_FIND],
		   int, 0644);
MODULE_PARM_DESC(fault_link_find,
		 "test only: the next N links a PROPOSAL names go down between lookup and attach");
module_param_named(fault_link_grant_unused,
		   smr_link_faults[SMR_LINK_FAULT_GRANT_UNUSED], int, 0644);
MODULE_PARM_DESC(fault_link_grant_unused,
		 "test only: the next N links the peer granted fail without connecting (the peer keeps the grant until it expires)");
module_param_named(fault_link_grant_late,
		   smr_link_faults[SMR_LINK_FAULT_GRANT_LATE], int, 0644);
MODULE_PARM_DESC(fault_link_grant_late,
		 "test only: the next N links the peer granted send their rdma_cm connect request only once fault_link_grant_late_release lets them (as if the first was lost)");
module_param_named(fault_link_post, smr_link_faults[SMR_LINK_FAULT_POST],
		   int, 0644);
MODULE_PARM_DESC(fault_link_post,
		 "test only: the next N CDC posts are refused (nothing posted), as a broken QP refuses them");

/*
 * test_link_idle_peer: this host takes part in the idle agreement as a
 * misbehaving peer would (enum smr_link_idle_peer: 1 never answers, 2 asks
 * twice, 3 always says no, 4 leaves IDLE_ASK out of its private data, 5
 * gives no credit back), so that the other host's defences can be seen.
 */
static unsigned int smr_link_test_idle_peer_mode;
module_param_named(test_link_idle_peer, smr_link_test_idle_peer_mode, uint,
		   0644);
MODULE_PARM_DESC(test_link_idle_peer,
		 "test only: 1 never answer an IDLE, 2 ask twice, 3 always answer no, 4 no IDLE_ASK flag, 5 withhold credits");

enum smr_link_idle_peer smr_link_test_idle_peer(void)
{
	return READ_ONCE(smr_link_test_idle_peer_mode);
}

/*
 * test_time_scale: link setup deadlines, grant lifetimes and the idle
 * question's deadlines last N times as long, as the suites' own deadlines
 * do on a slow (debug) kernel, so a case that races them keeps its
 * proportions there.
 */
static unsigned int smr_link_test_time_scale = 1;

static int smr_link_test_time_scale_set(const char *val,
					const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, 100);
}

static const struct kernel_param_ops smr_link_test_time_scale_ops = {
	.set	= smr_link_test_time_scale_set,
	.get	= param_get_uint,
};

module_param_cb(test_time_scale, &smr_link_test_time_scale_ops,
		&smr_link_test_time_scale, 0644);
MODULE_PARM_DESC(test_time_scale,
		 "test only: link setup and idle question deadlines and grant lifetimes last N (1-100) times as long");

/*
 * test_link_send_done_delay_us: a CDC's completion waits this long after
 * its slot went back to the free list, before it reports to the
 * connection: another CPU's post can take the slot meanwhile, as a slow
 * CPU lets it (the window stays harmless only if the completion took
 * what it reports before letting the slot go).
 */
static unsigned int smr_link_test_send_done_delay_us;

static int smr_link_test_delay_set(const char *val,
				   const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 0, 1000);
}

static const struct kernel_param_ops smr_link_test_delay_ops = {
	.set	= smr_link_test_delay_set,
	.get	= param_get_uint,
};

module_param_cb(test_link_send_done_delay_us, &smr_link_test_delay_ops,
		&smr_link_test_send_done_delay_us, 0644);
MODULE_PARM_DESC(test_link_send_done_delay_us,
		 "test only: a CDC completion waits N (0-1000) us after freeing its slot");

/*
 * test_link_send_done_reused (read only): how many times another post
 * took a slot during that delay: the window the case means to race was
 * really raced.
 */
static atomic_t smr_link_test_slot_reused = ATOMIC_INIT(0);

static int smr_link_test_reused_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&smr_link_test_slot_reused));
}

static const struct kernel_param_ops smr_link_test_reused_ops = {
	.get	= smr_link_test_reused_get,
};

module_param_cb(test_link_send_done_reused, &smr_link_test_reused_ops, NULL,
		0444);
MODULE_PARM_DESC(test_link_send_done_reused,
		 "test only: slots another post took during test_link_send_done_delay_us");

/*
 * After @slot went back to the free list (it reported @tx_pos): wait, and
 * count it if meanwhile a post took it (only a glance at a slot that is
 * no longer ours, for the count: nothing uses what it reads).
 */
void smr_link_test_send_done_delay(struct smr_cdc_slot *slot, u64 tx_pos)
{
	unsigned int us = READ_ONCE(smr_link_test_send_done_delay_us);

	if (!us)
		return;
	udelay(us);
	if (READ_ONCE(slot->tx_pos) != tx_pos)
		atomic_inc(&smr_link_test_slot_reused);
}

/* A link deadline of @timeout jiffies, times test_time_scale. */
unsigned long smr_link_time_scaled(unsigned long timeout)
{
	return timeout * READ_ONCE(smr_link_test_time_scale);
}

/*
 * What a failing rdma_accept() does before it returns (cma_modify_qp_err()
 * on its reject path): the QP goes to error, its receives flush. The
 * flushes complete asynchronously (rxe: in its tasks); waiting for them
 * here makes the worst case, every flush seen before the caller's error
 * path runs, the one the test sees.
 */
int smr_link_test_accept_fails(struct smr_link *link)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	ib_modify_qp(link->qp, &attr, IB_QP_STATE);
	msleep(SMR_LINK_TEST_FLUSH_WAIT_MS);
	return -EIO;
}

/* One @fault is due: true, and one fewer to come. Any context. */
bool smr_link_test_fault(enum smr_link_fault fault)
{
	int *left = &smr_link_faults[fault];
	int n = READ_ONCE(*left);

	do {
		if (n <= 0)
			return false;
	} while (!try_cmpxchg(left, &n, n - 1));
	pr_info("test fault %d taken (%d to come)\n", fault, n - 1);
	return true;
}
#endif

static void smr_link_release(struct kref *ref)
{
	kfree(container_of(ref, struct smr_link, ref));
}

void smr_link_put(struct smr_link *link)
{
	kref_put(&link->ref, smr_link_release);
}

void smr_link_hold(struct smr_link *link)
{
	kref_get(&link->ref);
}

enum smr_link_state smr_link_state(const struct smr_link *link)
{
	return READ_ONCE(link->state);
}

u32 smr_link_peer_id(const struct smr_link *link)
{
	return READ_ONCE(link->peer_id);
}

struct smr_buf_pool *smr_link_pool(struct smr_link *link)
{
	return &link->pool;
}

/*
 * Process or softirq context (never hard interrupt: @lock is BH-only, see
 * smr_link_qp_event()): take the link down once; the work does the rest.
 * True if this call did (not one before it, nor a passive link's accept
 * that still owns its end).
 */
bool smr_link_down(struct smr_link *link)
{
	bool queue;

	spin_lock_bh(&link->lock);
	queue = !link->down;
	link->down = true;
	WRITE_ONCE(link->state, SMR_LINK_DEAD);
	spin_unlock_bh(&link->lock);
	/* registrations waiting for room give up */
	wake_up(&link->reg_wait);
	if (!queue)
		return false;
	kref_get(&link->ref);
	queue_work(smr_link_wq, &link->teardown_work);
	return true;
}

/*
 * A user found the link broken (@why): it goes, counted once, by whoever
 * takes it down (a fatal QP event's work usually comes after the QP's
 * flushes did).
 */
void smr_link_fail(struct smr_link *link, const char *why)
{
	if (!smr_link_down(link))
		return;
	pr_info_ratelimited("link %u: %s: link down\n", link->id, why);
	smr_stat_inc(&init_net, SMR_STAT_LINKS_FAILED);
}

static int smr_link_post_idle_msg_locked(struct smr_link *link, u8 type);
static int smr_link_send_idle_answer_locked(struct smr_link *link);

/*
 * The idle work runs after @delay (the link's idle expiry, or an idle
 * question's deadline). A queued idle work holds a reference, taken before
 * it can run; if one was pending already it has its own (ours is not the
 * last: the list holds one). Caller holds link->lock.
 */
static void smr_link_idle_in_locked(struct smr_link *link,
				    unsigned long delay)
{
	lockdep_assert_held(&link->lock);
	kref_get(&link->ref);
	if (mod_delayed_work(smr_link_wq, &link->idle_work, delay))
		kref_put(&link->ref, smr_link_release);
}

/*
 * An active link nobody uses goes after net.smr.link_idle_timeout_ms
 * unless a user attaches meanwhile; not while an idle question is open:
 * its deadline is queued then, and the answer decides.
 */
static void smr_link_arm_idle_locked(struct smr_link *link)
{
	lockdep_assert_held(&link->lock);
	if (link->idle_asked || link->idle_agreed)
		return;
	smr_link_idle_in_locked(link,
				msecs_to_jiffies(READ_ONCE(smr_link_idle_ms)));
}

/* The QP may carry CDCs now. Caller holds @setup_mutex. */
void smr_link_set_active(struct smr_link *link)
{
	struct smr_link_user *user;
	bool up = false;
	int refused = 0;

	lockdep_assert_held(&link->setup_mutex);
	spin_lock_bh(&link->lock);
	if (link->state == SMR_LINK_CONNECTING) {
		WRITE_ONCE(link->state, SMR_LINK_ACTIVE);
		up = true;
		/*
		 * The peer, up first, asked already: the answer goes now,
		 * and a yes's deadline runs from here.
		 */
		refused = smr_link_send_idle_answer_locked(link);
		if (link->idle_agreed) {
			link->idle_deadline = jiffies +
					      smr_link_idle_answer_timeout();
			smr_link_idle_in_locked(link,
						smr_link_idle_answer_timeout());
		}
		/* users waiting for the setup go on */
		list_for_each_entry(user, &link->users, node)
			smr_link_user_ops->up(user);
		/*
		 * Nobody waits (a passive link, always; ours if its connections
		 * went during the setup): it idles out like a link whose last
		 * user left, so a link that never carries a connection does
		 * not live for ever.
		 */
		if (!link->nusers)
			smr_link_arm_idle_locked(link);
	}
	spin_unlock_bh(&link->lock);
	if (refused)
		smr_link_fail(link, "idle answer refused");
	if (!up)
		return;		/* went down meanwhile: the teardown has it */
	/* it guarded the setup until now (smr_link_get()) */
	mod_delayed_work(smr_link_wq, &link->keepalive_work,
			 SMR_LINK_KEEPALIVE);
	smr_stat_inc(&init_net, SMR_STAT_LINKS_CREATED);
}

/*
 * The link had no user for link_idle_timeout_ms: ask the peer whether it
 * may go. Or the deadline of an open question: no answer came (the link
 * fails), or the asker we said yes to never took it down (it goes).
 */
static void smr_link_idle(struct work_struct *work)
{
	struct smr_link *link = container_of(to_delayed_work(work),
					     struct smr_link, idle_work);
	const char *why = NULL;
	bool down = false;
	int err;

	spin_lock_bh(&link->lock);
	if (link->state != SMR_LINK_ACTIVE) {
		/* going down already, or set_active() arms it */
	} else if ((link->idle_asked || link->idle_agreed) &&
		   time_before(jiffies, link->idle_deadline)) {
		/* a run that began before the question: wait for its deadline */
		smr_link_idle_in_locked(link, link->idle_deadline - jiffies);
	} else if (link->idle_agreed) {
		down = true;
	} else if (link->idle_asked) {
		why = "peer did not answer whether the idle link may go";
	} else if (link->nusers) {
		/* a user came since: its detach arms this again */
	} else if (!link->peer_idle_ask) {
		down = true;	/* a peer that never asks: alone, as it does */
	} else {
		err = smr_link_post_idle_msg_locked(link, SMR_LMSG_IDLE);
		if (!err) {
			link->idle_ask_waiting = false;
			WRITE_ONCE(link->idle_asked, true);
			/* test: the next idle message out asks again */
			if (smr_link_test_idle_peer() ==
			    SMR_LINK_IDLE_PEER_ASKS_TWICE)
				link->idle_answer_owed = SMR_LMSG_IDLE;
			link->idle_deadline = jiffies +
					      smr_link_idle_answer_timeout();
			smr_link_idle_in_locked(link,
						smr_link_idle_answer_timeout());
		} else if (err != -EAGAIN) {
			why = "idle request refused";
		} else if (!link->idle_ask_waiting) {
			/* no credit or room yet: soon again */
			link->idle_ask_waiting = true;
			link->idle_ask_wait_since = jiffies;
			smr_link_idle_in_locked(link, HZ);
		} else if (time_after(jiffies, link->idle_ask_wait_since +
				      smr_link_idle_answer_timeout())) {
			/*
			 * Unused, we send nothing that needs credits: a peer
			 * that returns none keeps us from asking, and would
			 * keep the link for ever
			 */
			why = "no credit to ask whether the idle link may go";
		} else {
			smr_link_idle_in_locked(link, HZ);
		}
	}
	spin_unlock_bh(&link->lock);
	if (why)
		smr_link_fail(link, why);
	else if (down)
		smr_link_down(link);
	smr_link_put(link);	/* the queued work's reference */
}

/*
 * @user uses the link from now on; the caller holds a link reference.
 * -ENOLINK if the link is DEAD already: its teardown may have passed its
 * detach loop and freed the pool, so nobody would ever tell @user. DEAD is
 * set under @lock before the teardown's loop takes it, so a user attached
 * here is always seen by that loop. -EAGAIN if the link is about to idle
 * out ("Idle" above): we agreed to the peer's asking, or asked ourselves
 * and @user is not one the peer's PROPOSAL named (@peer_named).
 */
int smr_link_attach(struct smr_link *link, struct smr_link_user *user,
		    bool peer_named)
{
	int err = 0;

	spin_lock_bh(&link->lock);
	if (link->state == SMR_LINK_DEAD) {
		err = -ENOLINK;
	} else if (link->idle_agreed || (link->idle_asked && !peer_named)) {
		err = -EAGAIN;
	} else {
		link->idle_kept = false;
		link->idle_ask_waiting = false;
		list_add_tail(&user->node, &link->users);
		link->nusers++;
	}
	spin_unlock_bh(&link->lock);
	return err;
}

/* @user no longer uses the link; an unused link idles out. */
void smr_link_detach(struct smr_link *link, struct smr_link_user *user)
{
	bool arm = false, waited = false;

	spin_lock_bh(&link->lock);
	if (!list_empty(&user->node)) {
		list_del_init(&user->node);
		link->nusers--;
		arm = !link->nusers && link->state == SMR_LINK_ACTIVE;
	}
	if (user->waiting) {
		list_del_init(&user->wait_node);
		link->ntx_wait--;
		user->waiting = false;
		waited = true;
	}
	if (arm)
		smr_link_arm_idle_locked(link);
	spin_unlock_bh(&link->lock);
	/* the caller holds a reference of its own: this is not the last */
	if (waited)
		smr_link_user_ops->put(user);
}

/* ---- completions ---- */

/*
 * A work request failed: the QP is in error, every later one flushes. A
 * flush on a link that is not already going down is a failure too (its
 * first error may have come on a request nobody waits for).
 */
static void smr_link_wc_error(struct smr_link *link, struct ib_wc *wc)
{
	if (wc->status == IB_WC_WR_FLUSH_ERR &&
	    READ_ONCE(link->state) == SMR_LINK_DEAD)
		return;
	/* counted once, by whoever takes the link down */
	if (smr_link_down(link)) {
		pr_info_ratelimited("link %u: work completion status %d (%s): link down\n",
				    link->id, wc->status,
				    ib_wc_status_msg(wc->status));
		smr_stat_inc(&init_net, SMR_STAT_LINKS_FAILED);
	} else if (wc->status != IB_WC_WR_FLUSH_ERR) {
		/*
		 * The cause may complete after a flush another queue of the
		 * QP gave first (one CQ serves both): say it too.
		 */
		pr_info_ratelimited("link %u: work completion status %d (%s) as the link went down\n",
				    link->id, wc->status,
				    ib_wc_status_msg(wc->status));
	}
}

/* Unsignalled WRITEs and LOCAL_INVs complete only when they fail. */
static void smr_link_unsignalled_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;

	if (wc->status != IB_WC_SUCCESS)
		smr_link_wc_error(link, wc);
}

/*
 * Take @nr_wr send queue entries. The progress check counts from the later
 * of the last send completion and the post that found the queue empty:
 * time the link idled before a send never counts against it. Caller holds
 * link->lock.
 */
static void smr_link_sq_take_locked(struct smr_link *link, unsigned int nr_wr)
{
	lockdep_assert_held(&link->lock);
	if (link->sq_free == SMR_LINK_SQ_DEPTH)
		WRITE_ONCE(link->send_progress, jiffies);
	link->sq_free -= nr_wr;
}

/*
 * Send queue room comes back (a signalled WR completed): registrations
 * that wait for it try again. Caller holds link->lock.
 */
static void smr_link_sq_release_locked(struct smr_link *link,
				       unsigned int nr_wr)
{
	lockdep_assert_held(&link->lock);
	link->sq_free += nr_wr;
	if (wq_has_sleeper(&link->reg_wait))
		wake_up(&link->reg_wait);
}

/* A CDC may go: a slot, send queue room and a credit it may use. */
static bool smr_link_cdc_room_locked(struct smr_link *link,
				     unsigned int nr_wr)
{
	lockdep_assert_held(&link->lock);
	return !list_empty(&link->free_slots) && link->sq_free >= nr_wr &&
	       link->peer_credits > SMR_LINK_CREDITS_RESERVED;
}

/*
 * The owed credits the next message takes back: all it can carry, or none
 * while the test module plays a peer that keeps them (test_link_idle_peer
 * 5: still owed, so they go back once it stops). Caller holds link->lock.
 */
static u16 smr_link_credits_to_report(const struct smr_link *link)
{
	lockdep_assert_held(&link->lock);
	if (smr_link_test_idle_peer() == SMR_LINK_IDLE_PEER_NO_CREDITS)
		return 0;
	return min_t(u32, link->credits_owed, U16_MAX);
}

/*
 * Post the link message @type from @buf (@dma), completing on @cqe, with
 * the credits owed. The caller checked room and credit. Caller holds
 * link->lock.
 */
static int smr_link_post_lmsg_locked(struct smr_link *link, u8 type,
				     u8 *buf, u64 dma, struct ib_cqe *cqe)
{
	struct smr_lmsg msg = { .type = type };
	struct ib_sge sge = {
		.addr	= dma,
		.length	= SMR_LMSG_LEN,
		.lkey	= link->pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_cqe		= cqe,
		.sg_list	= &sge,
		.num_sge	= 1,
		.opcode		= IB_WR_SEND,
		.send_flags	= IB_SEND_SIGNALED,
	};
	int err;

	lockdep_assert_held(&link->lock);
	msg.credits = smr_link_credits_to_report(link);
	smr_lmsg_build(&msg, buf);
	ib_dma_sync_single_for_device(link->ibdev, dma, SMR_LMSG_LEN,
				      DMA_TO_DEVICE);
	/* only a broken QP refuses a post: the caller takes the link down */
	err = ib_post_send(link->qp, &wr, NULL);
	if (err)
		return err;
	link->credits_owed -= msg.credits;
	link->peer_credits--;
	smr_link_sq_take_locked(link, 1);
	return 0;
}

/*
 * Give owed credits back in a link message once enough gathered and no CDC
 * took them along; it may use the last credit (CDCs never do), and one is
 * in flight at a time. Caller holds link->lock.
 */
static int smr_link_return_credits_locked(struct smr_link *link)
{
	int err;

	lockdep_assert_held(&link->lock);
	if (link->state != SMR_LINK_ACTIVE || link->credit_msg_posted ||
	    smr_link_credits_to_report(link) < SMR_LINK_CREDIT_BATCH ||
	    !link->peer_credits || !link->sq_free)
		return 0;
	err = smr_link_post_lmsg_locked(link, SMR_LMSG_CREDITS,
					link->credit_msg, link->credit_dma,
					&link->credit_cqe);
	if (err)
		return err;
	link->credit_msg_posted = true;
	smr_stat_inc(&init_net, SMR_STAT_CREDIT_MSGS_SENT);
	return 0;
}

/* A signalled send completed: the peer acknowledges (keepalive checks). */
static void smr_link_send_progress(struct smr_link *link, struct ib_wc *wc)
{
	if (wc->status == IB_WC_SUCCESS)
		WRITE_ONCE(link->send_progress, jiffies);
	else
		smr_link_wc_error(link, wc);
}

/*
 * Post the idle message @type with the credits owed. Like a CDC it leaves
 * the peer's last credit to a credit message (taking it could leave both
 * ends owing each other credits with none to send them). -EAGAIN if it
 * cannot go yet: the last one still in flight, no credit or no room, or
 * the link is not active. Caller holds link->lock.
 */
static int smr_link_post_idle_msg_locked(struct smr_link *link, u8 type)
{
	int err;

	lockdep_assert_held(&link->lock);
	if (link->state != SMR_LINK_ACTIVE || link->idle_msg_posted ||
	    !link->sq_free || link->peer_credits <= SMR_LINK_CREDITS_RESERVED)
		return -EAGAIN;
	err = smr_link_post_lmsg_locked(link, type, link->idle_msg,
					link->idle_dma, &link->idle_cqe);
	if (!err)
		link->idle_msg_posted = true;
	return err;
}

/*
 * The answer we owe the peer's idle question goes, if it can now; else
 * it waits for the next link message completion, credits or keepalive.
 * Caller holds link->lock.
 */
static int smr_link_send_idle_answer_locked(struct smr_link *link)
{
	int err;

	lockdep_assert_held(&link->lock);
	if (!link->idle_answer_owed)
		return 0;
	err = smr_link_post_idle_msg_locked(link, link->idle_answer_owed);
	if (err == -EAGAIN)
		return 0;
	if (!err)
		link->idle_answer_owed = 0;
	return err;
}

/*
 * A link message's send completed (@posted: its buffer's flag): the
 * buffer is free again, and owed credits or an owed idle answer that
 * waited for room go.
 */
static void smr_link_lmsg_done(struct smr_link *link, struct ib_wc *wc,
			       bool *posted)
{
	int err;

	smr_link_send_progress(link, wc);
	spin_lock_bh(&link->lock);
	smr_link_sq_release_locked(link, 1);
	*posted = false;
	err = smr_link_return_credits_locked(link);
	if (!err)
		err = smr_link_send_idle_answer_locked(link);
	spin_unlock_bh(&link->lock);
	if (err)
		smr_link_fail(link, "credit or idle message refused");
}

static void smr_link_credit_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;

	smr_link_lmsg_done(link, wc, &link->credit_msg_posted);
}

static void smr_link_idle_msg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;

	smr_link_lmsg_done(link, wc, &link->idle_msg_posted);
}

/*
 * The peer said no to our idle question while we have no user: true if it
 * has kept the link so, with no user of ours since, longer than any
 * connection of the peer's takes to reach us (a client resets after four
 * handshake timeouts; this host's stands for the peer's): then it is
 * keeping it for nothing (or for a socket whose end here is gone) and the
 * link goes alone. Caller holds link->lock.
 */
static bool smr_link_kept_for_nothing_locked(struct smr_link *link)
{
	unsigned long limit;

	limit = 4 * msecs_to_jiffies(READ_ONCE(smr_hs_timeout_ms)) +
		smr_link_idle_answer_timeout();

	lockdep_assert_held(&link->lock);
	if (!link->idle_kept) {
		link->idle_kept = true;
		link->idle_kept_since = jiffies;
		return false;
	}
	return time_after(jiffies, link->idle_kept_since + limit);
}

/*
 * The peer's link message of @type, its credits taken already: an idle
 * question or the answer to ours ("Idle" above). A peer that answers what
 * nobody asked, or asks again before it has our answer, breaks the
 * protocol: the link fails. Asking costs it one of its credits each time,
 * so it cannot make us queue answers without bound.
 */
static void smr_link_idle_msg_in(struct smr_link *link, u8 type)
{
	bool expired = false, kept_idle = false;
	const char *why = NULL;
	int err = 0;

	if (type == SMR_LMSG_CREDITS)
		return;
	spin_lock_bh(&link->lock);
	/*
	 * Still CONNECTING is fine: the passive end is up as soon as it
	 * accepted and may ask before our ESTABLISHED came; the answer
	 * waits for smr_link_set_active().
	 */
	if (link->state == SMR_LINK_DEAD)
		goto unlock;	/* going down anyway */
	switch (type) {
	case SMR_LMSG_IDLE:
		/* after our yes it takes the link down: it never asks again */
		if (link->idle_answer_owed || link->idle_agreed) {
			why = "peer asked whether the idle link may go twice";
			break;
		}
		if (smr_link_test_idle_peer() == SMR_LINK_IDLE_PEER_SILENT)
			break;
		if (link->nusers || smr_link_test_idle_peer() ==
				    SMR_LINK_IDLE_PEER_SAYS_NO) {
			link->idle_answer_owed = SMR_LMSG_IDLE_NO;
			smr_stat_inc(&init_net, SMR_STAT_LINKS_IDLE_KEPT);
		} else {
			link->idle_answer_owed = SMR_LMSG_IDLE_YES;
			WRITE_ONCE(link->idle_agreed, true);
			link->idle_deadline = jiffies +
					      smr_link_idle_answer_timeout();
			smr_link_idle_in_locked(link,
						smr_link_idle_answer_timeout());
		}
		err = smr_link_send_idle_answer_locked(link);
		break;
	case SMR_LMSG_IDLE_YES:
	case SMR_LMSG_IDLE_NO:
		/* test: it asks again whatever the answer, and waits for it */
		if (smr_link_test_idle_peer() == SMR_LINK_IDLE_PEER_ASKS_TWICE)
			break;
		if (!link->idle_asked) {
			why = "peer answered an idle question nobody asked";
			break;
		}
		WRITE_ONCE(link->idle_asked, false);
		if (type == SMR_LMSG_IDLE_YES)
			expired = true;
		else if (link->nusers)
			break;	/* its detach asks again */
		else if (smr_link_kept_for_nothing_locked(link))
			kept_idle = true;
		else
			smr_link_arm_idle_locked(link);	/* asks again later */
		break;
	}
unlock:
	spin_unlock_bh(&link->lock);
	if (err)
		why = "idle answer refused";
	if (why) {
		smr_link_fail(link, why);
	} else if (expired && smr_link_down(link)) {
		smr_stat_inc(&init_net, SMR_STAT_LINKS_IDLE_EXPIRED);
	} else if (kept_idle && smr_link_down(link)) {
		/* not a failure: a peer socket left open keeps it so too */
		pr_info_ratelimited("link %u: the peer kept it idle, no connection of its came here: link down\n",
				    link->id);
		smr_stat_inc(&init_net, SMR_STAT_LINKS_IDLE_EXPIRED);
	}
}

/*
 * Push users that waited for a CDC slot or credits, one at a time: each
 * leaves the wait list (under link->lock) before its push, which may put
 * it back, so a node is never on two lists. At most as many as were
 * waiting at the start: one put back waits for the next completion.
 * Any context but hard IRQ; no lock held.
 */
static void smr_link_run_waiters(struct smr_link *link)
{
	struct smr_link_user *waiter;
	unsigned int budget;

	spin_lock_bh(&link->lock);
	budget = link->ntx_wait;
	spin_unlock_bh(&link->lock);
	while (budget--) {
		spin_lock_bh(&link->lock);
		waiter = NULL;
		if (smr_link_cdc_room_locked(link, 1))
			waiter = list_first_entry_or_null(&link->tx_wait,
							  struct smr_link_user,
							  wait_node);
		if (waiter) {
			list_del_init(&waiter->wait_node);
			link->ntx_wait--;
			waiter->waiting = false;
		}
		spin_unlock_bh(&link->lock);
		if (!waiter)
			break;
		smr_link_user_ops->room(waiter);
		smr_link_user_ops->put(waiter);	/* the wait list's */
	}
}

static void smr_link_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;
	struct smr_cdc_slot *slot = container_of(wc->wr_cqe,
						 struct smr_cdc_slot, cqe);
	struct smr_link_user *user = slot->user;
	/*
	 * Taken before the slot goes back: the next post (any CPU) may
	 * reuse it at once, and a later position reported as ours would
	 * free send ring bytes whose WRITE has not gone out.
	 */
	u64 tx_pos = slot->tx_pos;

	smr_link_send_progress(link, wc);

	spin_lock_bh(&link->lock);
	smr_link_sq_release_locked(link, slot->nr_wr);
	slot->user = NULL;
	list_add(&slot->node, &link->free_slots);
	spin_unlock_bh(&link->lock);
	smr_link_test_send_done_delay(slot, tx_pos);

	smr_link_user_ops->cdc_sent(user, tx_pos,
				    wc->status == IB_WC_SUCCESS);
	smr_link_user_ops->put(user);	/* the slot's */
	smr_link_run_waiters(link);
}

static int smr_link_post_recv(struct smr_link *link, struct smr_rx_slot *rx)
{
	struct ib_sge sge = {
		.addr	= rx->dma,
		.length	= SMR_LINK_MSG_SIZE,
		.lkey	= link->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe		= &rx->cqe,
		.sg_list	= &sge,
		.num_sge	= 1,
	};

	return ib_post_recv(link->qp, &wr, NULL);
}

/* The peer gave @credits back: CDCs that waited for them may go. */
static void smr_link_credits_in(struct smr_link *link, u16 credits)
{
	int err;

	if (!credits)
		return;
	spin_lock_bh(&link->lock);
	/* bounded: a peer's arithmetic error must not overflow ours */
	link->peer_credits = min_t(u32, link->peer_credits + credits,
				   SMR_CM_CREDITS_MAX);
	err = smr_link_return_credits_locked(link);
	if (!err)
		err = smr_link_send_idle_answer_locked(link);
	spin_unlock_bh(&link->lock);
	if (err)
		smr_link_fail(link, "credit or idle message refused");
	smr_link_run_waiters(link);
}

static void smr_link_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;
	struct smr_rx_slot *rx = container_of(wc->wr_cqe, struct smr_rx_slot,
					      cqe);
	u32 len = min_t(u32, wc->byte_len, SMR_LINK_MSG_SIZE);
	struct smr_lmsg lmsg;
	struct smr_cdc cdc;
	int err;

	if (wc->status != IB_WC_SUCCESS) {
		smr_link_wc_error(link, wc);
		return;
	}
	ib_dma_sync_single_for_cpu(link->ibdev, rx->dma, SMR_LINK_MSG_SIZE,
				   DMA_FROM_DEVICE);
	switch (smr_msg_kind(rx->msg, len)) {
	case SMR_MSG_CDC:
		smr_stat_inc(&init_net, SMR_STAT_CDC_RECEIVED);
		if (smr_cdc_parse(rx->msg, len, &cdc)) {
			smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
			break;
		}
		/* the link's credits, whatever becomes of the connection's part */
		smr_link_credits_in(link, cdc.credits);
		smr_link_user_ops->cdc_recv(link, &cdc, rx->msg + SMR_CDC_LEN);
		break;
	case SMR_MSG_LINK:
		if (smr_lmsg_parse(rx->msg, len, &lmsg)) {
			smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
			break;
		}
		smr_link_credits_in(link, lmsg.credits);
		smr_link_idle_msg_in(link, lmsg.type);
		break;
	default:
		smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
		break;
	}
	ib_dma_sync_single_for_device(link->ibdev, rx->dma, SMR_LINK_MSG_SIZE,
				      DMA_FROM_DEVICE);

	spin_lock_bh(&link->lock);
	if (link->state == SMR_LINK_DEAD) {
		err = 0;	/* flushed soon: nothing to re-post */
	} else {
		err = smr_link_post_recv(link, rx);
		if (!err) {
			link->credits_owed++;
			err = smr_link_return_credits_locked(link);
		}
	}
	spin_unlock_bh(&link->lock);
	if (err)
		smr_link_fail(link, "receive or credit message refused");
}

struct smr_reg_ctx {
	struct ib_cqe		cqe;
	struct completion	done;
	unsigned int		nr_wr;
	int			status;
};

static void smr_link_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;
	struct smr_reg_ctx *ctx = container_of(wc->wr_cqe, struct smr_reg_ctx,
					       cqe);

	smr_link_send_progress(link, wc);
	spin_lock_bh(&link->lock);
	smr_link_sq_release_locked(link, ctx->nr_wr);
	spin_unlock_bh(&link->lock);
	ctx->status = wc->status == IB_WC_SUCCESS ? 0 : -EIO;
	complete(&ctx->done);
}

/* A registration of @nr_wr WRs may try: room, or the link is gone. */
static bool smr_link_reg_may_try(struct smr_link *link, unsigned int nr_wr)
{
	return READ_ONCE(link->state) != SMR_LINK_ACTIVE ||
	       READ_ONCE(link->sq_free) >= nr_wr;
}

/*
 * The pool's registration callback (smr_buf_post_reg_t): post a memory
 * registration chain (LOCAL_INV and/or REG_MR; the last one signalled
 * here) on the pool's link and wait for it. Process context.
 */
static int smr_link_post_reg(struct smr_buf_pool *pool, struct ib_send_wr *wr,
			     const unsigned long *deadline)
{
	struct smr_link *link = container_of(pool, struct smr_link, pool);
	struct smr_reg_ctx ctx = { .cqe.done = smr_link_reg_done };
	const struct ib_send_wr *bad;
	struct ib_send_wr *last = wr;
	long left;
	int err;

	might_sleep();
	init_completion(&ctx.done);
	ctx.nr_wr = 1;
	while (last->next) {
		/* unsignalled: only its failure completes, and must be seen */
		last->wr_cqe = &link->unsignalled_cqe;
		last = last->next;
		ctx.nr_wr++;
	}
	last->wr_cqe = &ctx.cqe;
	last->send_flags |= IB_SEND_SIGNALED;

	/*
	 * Data never takes the send queue's last SMR_LINK_SQ_RESERVED WRs,
	 * but registrations share those, and each holds its WRs until every
	 * WR posted before it completes (an RC send queue completes in
	 * order): when many connections start on a link busy with data,
	 * they queue here for room until the caller's @deadline (a
	 * handshake step's time: the peer gives up after that anyway), or
	 * a fatal signal. No room by then: -ETIMEDOUT.
	 */
	for (;;) {
		spin_lock_bh(&link->lock);
		if (link->state != SMR_LINK_ACTIVE) {
			err = -ENOTCONN;
		} else if (link->sq_free < ctx.nr_wr) {
			err = -ETIMEDOUT;
		} else {
			smr_link_sq_take_locked(link, ctx.nr_wr);
			err = ib_post_send(link->qp, wr, &bad);
			if (err)
				link->sq_free += ctx.nr_wr;
		}
		spin_unlock_bh(&link->lock);
		left = deadline ? (long)(*deadline - jiffies) : 0;
		if (err != -ETIMEDOUT || left <= 0)
			break;
		if (wait_event_killable_timeout(link->reg_wait,
						smr_link_reg_may_try(link,
								     ctx.nr_wr),
						left) < 0)
			break;
	}
	if (err) {
		if (err == -ENOTCONN || err == -ETIMEDOUT)
			return err;
		/* only a broken QP refuses a post (an error of the link's) */
		smr_link_fail(link, "registration refused");
		return -EIO;
	}
	/* completes, or is flushed when the link goes down */
	wait_for_completion(&ctx.done);
	return ctx.status;
}

/*
 * No slot or credit is free: @user is pushed again when one comes back.
 * Called under link->lock by the post that found no room, so no completion
 * can slip in between and miss the waiter. The wait list holds a reference
 * on the user's owner.
 */
static void smr_link_wait_room_locked(struct smr_link *link,
				      struct smr_link_user *user)
{
	lockdep_assert_held(&link->lock);
	if (user->waiting || link->state == SMR_LINK_DEAD)
		return;
	smr_link_user_ops->hold(user);
	list_add_tail(&user->wait_node, &link->tx_wait);
	link->ntx_wait++;
	user->waiting = true;
	smr_stat_inc(&init_net, SMR_STAT_CDC_WAITS);
}

/*
 * Post @writes (an unsignalled chain of RDMA WRITEs, or NULL) and then the
 * CDC @cdc (@data: its inline bytes), in one call; the CDC takes the
 * link's owed credits along, and its completion tells @user that @tx_pos
 * bytes are written. Takes link->lock inside the caller's connection lock.
 * Returns 0, -EAGAIN when no slot, send queue room or credit is free
 * (@user is then pushed again once one comes back: smr_link_ops.room), or
 * -ENOTCONN when the link is not usable.
 */
int smr_link_post_cdc(struct smr_link *link, struct smr_link_user *user,
		      struct ib_send_wr *writes, const struct smr_cdc *cdc,
		      const u8 *data, u64 tx_pos)
{
	u32 len = SMR_CDC_LEN + cdc->inline_len;
	struct smr_cdc_slot *slot;
	const struct ib_send_wr *bad;
	struct ib_send_wr send = {}, *w, *first;
	struct smr_cdc with_credits = *cdc;
	struct ib_sge sge;
	unsigned int nr_wr = 1;
	int err;

	for (w = writes; w; w = w->next) {
		w->wr_cqe = &link->unsignalled_cqe;
		nr_wr++;
	}

	spin_lock_bh(&link->lock);
	if (link->state != SMR_LINK_ACTIVE) {
		spin_unlock_bh(&link->lock);
		return -ENOTCONN;
	}
	if (!smr_link_cdc_room_locked(link, nr_wr)) {
		smr_link_wait_room_locked(link, user);
		spin_unlock_bh(&link->lock);
		return -EAGAIN;
	}
	slot = list_first_entry(&link->free_slots, struct smr_cdc_slot, node);
	list_del(&slot->node);
	smr_link_sq_take_locked(link, nr_wr);
	with_credits.credits = smr_link_credits_to_report(link);

	smr_cdc_build(&with_credits, slot->msg);
	if (cdc->inline_len)
		memcpy(slot->msg + SMR_CDC_LEN, data, cdc->inline_len);
	ib_dma_sync_single_for_device(link->ibdev, slot->dma, len,
				      DMA_TO_DEVICE);
	smr_link_user_ops->hold(user);
	slot->user = user;
	slot->tx_pos = tx_pos;
	slot->nr_wr = nr_wr;

	sge.addr = slot->dma;
	sge.length = len;
	sge.lkey = link->pd->local_dma_lkey;
	send.wr_cqe = &slot->cqe;
	send.sg_list = &sge;
	send.num_sge = 1;
	send.opcode = IB_WR_SEND;
	send.send_flags = IB_SEND_SIGNALED;

	first = &send;
	if (writes) {
		for (w = writes; w->next; w = w->next)
			;
		w->next = &send;
		first = writes;
	}
	err = smr_link_test_fault(SMR_LINK_FAULT_POST) ? -EIO :
	      ib_post_send(link->qp, first, &bad);
	if (err) {
		/* a post only fails on a broken QP: the link goes */
		link->sq_free += nr_wr;
		slot->user = NULL;
		list_add(&slot->node, &link->free_slots);
		spin_unlock_bh(&link->lock);
		smr_link_user_ops->put(user);	/* the caller holds another */
		smr_link_fail(link, "send refused");
		return -ENOTCONN;
	}
	link->peer_credits--;
	link->credits_owed -= with_credits.credits;
	spin_unlock_bh(&link->lock);
	smr_stat_inc(&init_net, SMR_STAT_CDC_SENT);
	return 0;
}

/* The work a fatal QP event queued: the link goes, counted. */
static void smr_link_qp_fatal(struct work_struct *work)
{
	struct smr_link *link = container_of(work, struct smr_link,
					     qp_fatal_work);

	smr_link_fail(link, ib_event_msg(link->qp_fatal_event));
	smr_link_put(link);
}

/*
 * The QP's asynchronous events. A driver may raise them in hard interrupt
 * context (its event queue's interrupt handler), where @lock (BH) must not
 * be taken: the first fatal one queues the work that takes the link down,
 * holding a reference (the QP, and so this handler, go before the link's
 * last reference).
 */
static void smr_link_qp_event(struct ib_event *event, void *context)
{
	struct smr_link *link = context;

	switch (event->event) {
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
	case IB_EVENT_QP_ACCESS_ERR:
	case IB_EVENT_DEVICE_FATAL:
		if (test_and_set_bit(0, &link->qp_fatal_queued))
			break;
		link->qp_fatal_event = event->event;
		kref_get(&link->ref);
		queue_work(smr_link_wq, &link->qp_fatal_work);
		break;
	default:
		break;
	}
}

#ifdef SMR_TEST_HOOKS
/*
 * fault_link_qp_fatal_irq (write only): writing any value does to an
 * active link what a device's fatal QP error does: the QP goes to error
 * (its posted requests flush, and the link goes down on the first), then
 * IB_EVENT_QP_FATAL reaches the QP's event handler in hard interrupt
 * context (a hard irq_work), as from a driver's interrupt handler.
 * -ENOENT if no link is active, -EBUSY while the last one is under way.
 * The irq_work holds a reference on the link, which a work drops (the
 * last one frees: not in hard interrupt context). Writes are serialized
 * by the module's parameter lock, which module exit takes to stop them
 * (sysfs parameters outlive ->exit()).
 */
static struct smr_link *smr_link_test_irq_link;
/* set under kernel_param_lock() and smr_link_test_stale_lock */
static bool smr_link_test_exiting;

static void smr_link_test_irq_put(struct work_struct *work)
{
	struct smr_link *link = xchg(&smr_link_test_irq_link, NULL);

	if (link)
		smr_link_put(link);
}

static DECLARE_WORK(smr_link_test_irq_put_work, smr_link_test_irq_put);

static void smr_link_test_qp_fatal_irq(struct irq_work *work)
{
	struct smr_link *link = READ_ONCE(smr_link_test_irq_link);
	struct ib_event event = {
		.device		= link->ibdev,
		.event		= IB_EVENT_QP_FATAL,
	};

	pr_info("test fault: QP fatal event in hard interrupt context: %d\n",
		!!in_hardirq());
	smr_link_qp_event(&event, link);
	schedule_work(&smr_link_test_irq_put_work);
}

static struct irq_work smr_link_test_irq =
	IRQ_WORK_INIT_HARD(smr_link_test_qp_fatal_irq);

static int smr_link_test_qp_fatal_set(const char *val,
				      const struct kernel_param *kp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct smr_link *link, *found = NULL;

	if (smr_link_test_exiting)
		return -ENODEV;
	spin_lock_bh(&smr_links_lock);
	list_for_each_entry(link, &smr_links, node) {
		if (READ_ONCE(link->state) == SMR_LINK_ACTIVE) {
			kref_get(&link->ref);	/* the list holds one */
			found = link;
			break;
		}
	}
	spin_unlock_bh(&smr_links_lock);
	if (!found)
		return -ENOENT;
	if (cmpxchg(&smr_link_test_irq_link, NULL, found)) {
		smr_link_put(found);
		return -EBUSY;
	}
	/* the teardown's fence: its QP stays while we hold this */
	mutex_lock(&found->setup_mutex);
	if (READ_ONCE(found->state) == SMR_LINK_ACTIVE)
		ib_modify_qp(found->qp, &attr, IB_QP_STATE);
	mutex_unlock(&found->setup_mutex);
	/* the order a device often shows: the flushes first, then the event */
	msleep(SMR_LINK_TEST_FLUSH_WAIT_MS);
	irq_work_queue(&smr_link_test_irq);
	return 0;
}

static const struct kernel_param_ops smr_link_test_qp_fatal_ops = {
	.set	= smr_link_test_qp_fatal_set,
};

module_param_cb(fault_link_qp_fatal_irq, &smr_link_test_qp_fatal_ops, NULL,
		0200);
MODULE_PARM_DESC(fault_link_qp_fatal_irq,
		 "test only: write to fail an active link's QP and deliver its fatal QP event from hard interrupt context");

/*
 * test_link_idle_rearm (write 1): every active link nobody uses has its
 * expiry re-armed at the current link_idle_timeout_ms, as if its last user
 * had just left (a shorter one pending is postponed), so a suite that
 * lowers the timeout to clear the links need not wait out expiries armed
 * under a longer one. Read: how many links the last write re-armed.
 */
static unsigned int smr_link_test_idle_rearmed;

static int smr_link_test_idle_rearm_set(const char *val,
					const struct kernel_param *kp)
{
	struct smr_link *link;
	unsigned int n = 0;

	if (!sysfs_streq(val, "1"))
		return -EINVAL;
	if (READ_ONCE(smr_link_test_exiting))
		return -ENODEV;
	spin_lock_bh(&smr_links_lock);
	list_for_each_entry(link, &smr_links, node) {
		spin_lock(&link->lock);
		if (!link->nusers && link->state == SMR_LINK_ACTIVE &&
		    !link->idle_asked && !link->idle_agreed) {
			smr_link_arm_idle_locked(link);
			n++;
		}
		spin_unlock(&link->lock);
	}
	spin_unlock_bh(&smr_links_lock);
	WRITE_ONCE(smr_link_test_idle_rearmed, n);
	return 0;
}

static const struct kernel_param_ops smr_link_test_idle_rearm_ops = {
	.set	= smr_link_test_idle_rearm_set,
	.get	= param_get_uint,
};

module_param_cb(test_link_idle_rearm, &smr_link_test_idle_rearm_ops,
		&smr_link_test_idle_rearmed, 0644);
MODULE_PARM_DESC(test_link_idle_rearm,
		 "test only: write to re-arm every unused active link's expiry at the current link_idle_timeout_ms; read: links the last write re-armed");

/*
 * test_link_stale_write_ms (write N, 0 disarms): the next connection that
 * gives its buffers back on a link of a software (virtual DMA) device
 * hands its peer's RMB key to that link, which then RDMA-WRITEs
 * SMR_LINK_TEST_STALE_LEN bytes at the ring's start under the key, one
 * WRITE after another, for N ms or until one fails: what a hostile peer
 * can do with the key of a connection it closed, while the other side
 * pools that RMB and gives it to the next connection. One writer at a
 * time (an arming waits while one runs). test_link_stale_writes
 * (read): WRITEs that completed, those that failed, and the last
 * failure's status.
 *
 * The writer (smr_link_test_stale) belongs to whoever claimed ->link and
 * has at most one WRITE outstanding: its work runs only when none is,
 * which is when it may stop and drop the link. It is claimed and queued
 * under smr_link_test_stale_lock, which module exit takes to set
 * smr_link_test_exiting: once exit has, nothing queues the writer again.
 */
#define SMR_LINK_TEST_STALE_LEN		1024
#define SMR_LINK_TEST_STALE_MAX_MS	600000

struct smr_link_test_stale {
	struct ib_cqe		cqe;
	struct delayed_work	work;
	struct smr_link		*link;	/* a reference; NULL: none running */
	u32			rkey;
	unsigned long		until;	/* jiffies */
	bool			stop;	/* a WRITE failed */
	/* kmalloc'ed: a software device reads it by its direct-map address */
	u8			*data;
};

static void smr_link_test_stale_done(struct ib_cq *cq, struct ib_wc *wc);
static void smr_link_test_stale_post(struct work_struct *work);

static struct smr_link_test_stale smr_link_test_stale = {
	.cqe.done	= smr_link_test_stale_done,
	.work		= __DELAYED_WORK_INITIALIZER(smr_link_test_stale.work,
						     smr_link_test_stale_post,
						     0),
};

static DEFINE_SPINLOCK(smr_link_test_stale_lock);
static unsigned int smr_link_test_stale_ms;
static atomic_t smr_link_test_stale_ok = ATOMIC_INIT(0);
static atomic_t smr_link_test_stale_failed = ATOMIC_INIT(0);
static int smr_link_test_stale_status = -1;	/* the last failure's */

static int smr_link_test_stale_ms_set(const char *val,
				      const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 0, SMR_LINK_TEST_STALE_MAX_MS);
}

static const struct kernel_param_ops smr_link_test_stale_ms_ops = {
	.set	= smr_link_test_stale_ms_set,
	.get	= param_get_uint,
};

module_param_cb(test_link_stale_write_ms, &smr_link_test_stale_ms_ops,
		&smr_link_test_stale_ms, 0644);
MODULE_PARM_DESC(test_link_stale_write_ms,
		 "test only: the next connection closed on a software device's link leaves its peer's RMB key to a writer that WRITEs under it for N (0-600000) ms or until a WRITE fails");

static int smr_link_test_stale_get(char *buf, const struct kernel_param *kp)
{
	int status = READ_ONCE(smr_link_test_stale_status);

	return sysfs_emit(buf, "%d %d %s\n",
			  atomic_read(&smr_link_test_stale_ok),
			  atomic_read(&smr_link_test_stale_failed),
			  status < 0 ? "none" : ib_wc_status_msg(status));
}

static const struct kernel_param_ops smr_link_test_stale_get_ops = {
	.get	= smr_link_test_stale_get,
};

module_param_cb(test_link_stale_writes, &smr_link_test_stale_get_ops, NULL,
		0444);
MODULE_PARM_DESC(test_link_stale_writes,
		 "test only: the stale writer's WRITEs: completed, failed, the last failure's status");

static void smr_link_test_stale_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link_test_stale *st = container_of(wc->wr_cqe,
						      struct smr_link_test_stale,
						      cqe);
	struct smr_link *link = cq->cq_context;

	if (wc->status == IB_WC_SUCCESS) {
		atomic_inc(&smr_link_test_stale_ok);
	} else {
		atomic_inc(&smr_link_test_stale_failed);
		WRITE_ONCE(smr_link_test_stale_status, wc->status);
		WRITE_ONCE(st->stop, true);
	}
	/* a refused WRITE takes the link down, counted, as any failed one */
	smr_link_send_progress(link, wc);
	spin_lock_bh(&link->lock);
	smr_link_sq_release_locked(link, 1);
	spin_unlock_bh(&link->lock);
	queue_delayed_work(system_wq, &st->work, 0);
}

/* Process context, no WRITE outstanding: post the next one, or stop. */
static void smr_link_test_stale_post(struct work_struct *work)
{
	struct smr_link_test_stale *st = container_of(to_delayed_work(work),
						      struct smr_link_test_stale,
						      work);
	struct smr_link *link = st->link;
	struct ib_sge sge = {
		.addr	= (uintptr_t)st->data,
		.length	= SMR_LINK_TEST_STALE_LEN,
	};
	struct ib_rdma_wr wr = {
		.wr.wr_cqe	= &st->cqe,
		.wr.opcode	= IB_WR_RDMA_WRITE,
		.wr.send_flags	= IB_SEND_SIGNALED,
		.wr.sg_list	= &sge,
		.wr.num_sge	= 1,
		.rkey		= st->rkey,
	};
	bool posted = false, busy = false, refused = false;

	if (!READ_ONCE(st->stop) && !READ_ONCE(smr_link_test_exiting) &&
	    time_before(jiffies, st->until)) {
		spin_lock_bh(&link->lock);
		if (link->state == SMR_LINK_ACTIVE && !link->sq_free) {
			busy = true;
		} else if (link->state == SMR_LINK_ACTIVE) {
			sge.lkey = link->pd->local_dma_lkey;
			smr_link_sq_take_locked(link, 1);
			posted = !ib_post_send(link->qp, &wr.wr, NULL);
			if (!posted) {
				link->sq_free++;
				refused = true;
			}
		}
		spin_unlock_bh(&link->lock);
		if (!posted && !busy)
			pr_info("test stale writer: link %u: not posted\n",
				link->id);
		/* the QP is broken: counted, as a failed WRITE would be */
		if (refused)
			smr_link_fail(link, "test stale writer: post refused");
	}
	if (busy)
		queue_delayed_work(system_wq, &st->work, 1);
	if (busy || posted)
		return;
	/* nothing outstanding: the writer is free for the next arming */
	kfree(st->data);
	st->data = NULL;
	/* the writer's fields are written before the next claim can see it */
	smp_store_release(&st->link, NULL);
	smr_link_put(link);
}

/*
 * The connection that gave its buffers back on @link knew its peer's RMB
 * by @rkey (@size bytes; 0: it never had one): the writer takes the key if
 * it was armed. Any context; the caller holds a reference on @link.
 */
void smr_link_test_stale_key(struct smr_link *link, u32 rkey, u32 size)
{
	struct smr_link_test_stale *st = &smr_link_test_stale;
	unsigned long flags;
	unsigned int ms;
	u8 *data;

	/*
	 * Only an active link can carry the WRITEs: an arming met on a link
	 * going down is left for the next connection's (best effort: a link
	 * that goes down after this look still uses it up, posting nothing).
	 */
	if (!READ_ONCE(smr_link_test_stale_ms) ||
	    size < SMR_LINK_TEST_STALE_LEN || !link->ibdev ||
	    !ib_uses_virt_dma(link->ibdev) ||
	    smr_link_state(link) != SMR_LINK_ACTIVE)
		return;
	/* any context: before the lock, so a failure leaves the arming */
	data = kzalloc(SMR_LINK_TEST_STALE_LEN, GFP_ATOMIC);
	if (!data)
		return;
	spin_lock_irqsave(&smr_link_test_stale_lock, flags);
	/* claimed first, so an arming is used up only by a writer it starts */
	if (smr_link_test_exiting || smp_load_acquire(&st->link))
		goto out;
	ms = xchg(&smr_link_test_stale_ms, 0);
	if (!ms)
		goto out;
	/* the caller's reference lasts the call; the writer keeps its own */
	smr_link_hold(link);
	st->link = link;
	st->data = data;
	data = NULL;
	st->rkey = rkey;
	st->stop = false;
	st->until = jiffies + msecs_to_jiffies(ms);
	queue_delayed_work(system_wq, &st->work, 0);
out:
	spin_unlock_irqrestore(&smr_link_test_stale_lock, flags);
	kfree(data);
}

/* Module exit: no more injected events; the last one is done with. */
void smr_link_test_exit(void)
{
	kernel_param_lock(THIS_MODULE);
	spin_lock_irq(&smr_link_test_stale_lock);
	WRITE_ONCE(smr_link_test_exiting, true);
	spin_unlock_irq(&smr_link_test_stale_lock);
	kernel_param_unlock(THIS_MODULE);
	irq_work_sync(&smr_link_test_irq);
	flush_work(&smr_link_test_irq_put_work);
}

/*
 * Module exit, every link torn down and smr_link_wq destroyed (the last
 * teardowns drained their QPs): a stale writer's last WRITE completed by
 * then, and its work drops the link.
 */
void smr_link_test_exit_links_gone(void)
{
	flush_delayed_work(&smr_link_test_stale.work);
}

#endif

static void smr_link_keepalive_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;

	smr_link_send_progress(link, wc);
	spin_lock_bh(&link->lock);
	smr_link_sq_release_locked(link, 1);
	link->keepalive_posted = false;
	spin_unlock_bh(&link->lock);
}

/*
 * A peer that died (or lost its device without a word) answers nothing:
 * a zero-length RDMA WRITE (no key needed, IBTA C9-88) every few seconds
 * then fails after the QP's retries and takes the link down, so sockets
 * waiting on that peer fail instead of hanging; and sends that stay
 * unacknowledged for SMR_LINK_STALL_TIMEOUT take it down even when the
 * adapter's retries never end (see "Failure detection" above). Queued
 * first by smr_link_get(), it fails a link that is not up in time.
 */
static void smr_link_keepalive(struct work_struct *work)
{
	struct smr_link *link = container_of(to_delayed_work(work),
					     struct smr_link, keepalive_work);
	bool alive, stalled = false, down = false, answer_refused = false;
	struct ib_rdma_wr wr = {};
	unsigned long progress;

	wr.wr.wr_cqe = &link->keepalive_cqe;
	wr.wr.opcode = IB_WR_RDMA_WRITE;
	wr.wr.send_flags = IB_SEND_SIGNALED;

	spin_lock_bh(&link->lock);
	if (link->state == SMR_LINK_CONNECTING) {
		/* queued by smr_link_get(): the setup took too long */
		spin_unlock_bh(&link->lock);
		smr_link_fail(link, "not up in time");
		return;
	}
	/*
	 * Under the lock: the post that found the queue empty set it. Ticks
	 * SMR_LINK_KEEPALIVE apart, one at SMR_LINK_STALL_TIMEOUT (a multiple)
	 * after a send the tick itself posted: a silent peer fails the link
	 * within SMR_LINK_STALL_TIMEOUT + SMR_LINK_KEEPALIVE of its last
	 * acknowledgment, never before SMR_LINK_STALL_TIMEOUT after the oldest
	 * send not completed.
	 */
	BUILD_BUG_ON(SMR_LINK_STALL_TIMEOUT % SMR_LINK_KEEPALIVE);
	progress = READ_ONCE(link->send_progress);
	if (link->sq_free < SMR_LINK_SQ_DEPTH &&
	    !time_before(jiffies, progress + SMR_LINK_STALL_TIMEOUT))
		stalled = link->state == SMR_LINK_ACTIVE;
	/* owed credits or an idle answer that found no room go first */
	if (!stalled && (smr_link_return_credits_locked(link) ||
			 smr_link_send_idle_answer_locked(link)))
		answer_refused = true;
	if (link->state == SMR_LINK_ACTIVE && !stalled && !answer_refused &&
	    !link->keepalive_posted && link->sq_free) {
		smr_link_sq_take_locked(link, 1);
		link->keepalive_posted = true;
		if (ib_post_send(link->qp, &wr.wr, NULL)) {
			link->sq_free++;
			link->keepalive_posted = false;
			down = true;
		}
	}
	alive = link->state != SMR_LINK_DEAD;
	spin_unlock_bh(&link->lock);
	if (stalled)
		smr_link_fail(link, "peer acknowledges nothing");
	else if (down)
		smr_link_fail(link, "keepalive refused");
	else if (answer_refused)
		smr_link_fail(link, "credit or idle message refused");
	else if (alive)
		queue_delayed_work(smr_link_wq, &link->keepalive_work,
				   SMR_LINK_KEEPALIVE);
}

/* ---- the link object and its queue pair ---- */

static void smr_link_teardown(struct work_struct *work);

/*
 * A link not listed yet, with the list's reference; NULL without memory.
 * @connect: its connect work (link_cm.c; the teardown cancels it).
 */
struct smr_link *smr_link_alloc(bool active_side, work_func_t connect)
{
	struct smr_link *link;

	link = kzalloc(sizeof(*link), GFP_KERNEL);
	if (!link)
		return NULL;
	kref_init(&link->ref);		/* the list's reference */
	INIT_LIST_HEAD(&link->node);
	spin_lock_init(&link->lock);
	init_waitqueue_head(&link->reg_wait);
	INIT_LIST_HEAD(&link->users);
	INIT_LIST_HEAD(&link->free_slots);
	INIT_LIST_HEAD(&link->tx_wait);
	mutex_init(&link->setup_mutex);
	link->unsignalled_cqe.done = smr_link_unsignalled_done;
	link->credit_cqe.done = smr_link_credit_done;
	link->idle_cqe.done = smr_link_idle_msg_done;
	INIT_DELAYED_WORK(&link->idle_work, smr_link_idle);
	INIT_DELAYED_WORK(&link->keepalive_work, smr_link_keepalive);
	link->keepalive_cqe.done = smr_link_keepalive_done;
	INIT_WORK(&link->teardown_work, smr_link_teardown);
	INIT_WORK(&link->qp_fatal_work, smr_link_qp_fatal);
	INIT_WORK(&link->connect_work, connect);
	smr_buf_pool_init(&link->pool, smr_link_post_reg);
	link->active_side = active_side;
	link->state = SMR_LINK_CONNECTING;

	if (xa_alloc_cyclic_bh(&smr_link_ids, &link->id, link, xa_limit_32b,
			       &smr_link_next_id, GFP_KERNEL) < 0) {
		kfree(link);
		return NULL;
	}
	return link;
}

/* A link that never was listed or used goes. */
void smr_link_discard(struct smr_link *link)
{
	spin_lock_bh(&smr_links_lock);
	xa_erase_bh(&smr_link_ids, link->id);
	spin_unlock_bh(&smr_links_lock);
	kfree(link);
}

/*
 * A link never listed whose setup failed (the peer's, smr_link_accept()):
 * DEAD first, under @lock as smr_link_down() marks it, so that the
 * receives the drain flushes neither count as a failure nor queue a
 * teardown on a link the caller is about to free (smr_link_discard());
 * then drained and freed. The id is not ours to destroy (the handler's
 * error makes rdma_cm do it): forgotten. Caller holds @setup_mutex.
 */
void smr_link_abandon(struct smr_link *link)
{
	lockdep_assert_held(&link->setup_mutex);
	spin_lock_bh(&link->lock);
	link->down = true;
	WRITE_ONCE(link->state, SMR_LINK_DEAD);
	spin_unlock_bh(&link->lock);
	if (link->qp)
		ib_drain_qp(link->qp);
	smr_link_free_resources(link);
	link->cm_id = NULL;
}

/*
 * Free what smr_link_create_qp() made; the QP must be drained. Process
 * context (a queued fatal QP event's work is waited for).
 */
void smr_link_free_resources(struct smr_link *link)
{
	if (link->qp)
		rdma_destroy_qp(link->cm_id);
	WRITE_ONCE(link->qp, NULL);
	/*
	 * No QP event comes now; one that came before has its work queued,
	 * holding a reference, and a link that fails its setup is freed
	 * regardless of references (smr_link_discard()): the work goes first.
	 */
	if (cancel_work_sync(&link->qp_fatal_work))
		smr_link_put(link);
	if (link->cq)
		ib_free_cq(link->cq);
	link->cq = NULL;
	if (link->msgs_mapped)
		ib_dma_unmap_single(link->ibdev, link->msgs_dma,
				    SMR_LINK_MSGS * SMR_LINK_MSG_SIZE,
				    DMA_BIDIRECTIONAL);
	link->msgs_mapped = false;
	kfree(link->msgs);
	link->msgs = NULL;
	if (link->pd)
		ib_dealloc_pd(link->pd);
	link->pd = NULL;
	/* the pool (destroyed before) must not reach the freed PD either */
	link->pool.pd = NULL;
}

/*
 * The PD, CQ, message slots and QP of a link whose rdma_cm @id resolved
 * its route (or came in), with every receive posted. Caller holds
 * @setup_mutex. On an error before the QP exists, nothing is left; once
 * it exists (@link->qp set: posting a receive failed), everything is,
 * receives posted: the caller drains and frees it (ours: the teardown;
 * the peer's: smr_link_accept() after marking the link DEAD, so that the
 * flushed receives do not take it down once more).
 */
int smr_link_create_qp(struct smr_link *link, struct rdma_cm_id *id)
{
	struct ib_device *dev = id->device;
	struct ib_qp_init_attr attr = {};
	size_t len = SMR_LINK_MSGS * SMR_LINK_MSG_SIZE;
	int i, err;

	lockdep_assert_held(&link->setup_mutex);
	link->ibdev = dev;
	link->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(link->pd)) {
		err = PTR_ERR(link->pd);
		link->pd = NULL;
		return err;
	}
	/* the pool registers its buffers on this PD from now on */
	link->pool.pd = link->pd;
	/* room for ib_drain_qp()'s own send and receive, too */
	link->cq = ib_alloc_cq(dev, link, SMR_LINK_SQ_DEPTH +
			       SMR_LINK_RQ_DEPTH + 2, 0, IB_POLL_SOFTIRQ);
	if (IS_ERR(link->cq)) {
		err = PTR_ERR(link->cq);
		link->cq = NULL;
		goto err;
	}
	link->msgs = kzalloc(len, GFP_KERNEL);
	if (!link->msgs) {
		err = -ENOMEM;
		goto err;
	}
	link->msgs_dma = ib_dma_map_single(dev, link->msgs, len,
					   DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(dev, link->msgs_dma)) {
		err = -ENOMEM;
		goto err;
	}
	link->msgs_mapped = true;

	attr.event_handler = smr_link_qp_event;
	attr.qp_context = link;
	attr.send_cq = link->cq;
	attr.recv_cq = link->cq;
	attr.cap.max_send_wr = SMR_LINK_SQ_DEPTH + 1;	/* + the drain's */
	attr.cap.max_recv_wr = SMR_LINK_RQ_DEPTH + 1;
	attr.cap.max_send_sge = SMR_TX_WRITE_SGES;
	attr.cap.max_recv_sge = 1;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	err = rdma_create_qp(id, link->pd, &attr);
	if (err)
		goto err;
	link->qp = id->qp;
	link->sq_free = SMR_LINK_SQ_DEPTH;

	for (i = 0; i < SMR_LINK_SLOTS; i++) {
		struct smr_cdc_slot *slot = &link->slots[i];

		slot->cqe.done = smr_link_send_done;
		slot->msg = link->msgs + i * SMR_LINK_MSG_SIZE;
		slot->dma = link->msgs_dma + i * SMR_LINK_MSG_SIZE;
		list_add_tail(&slot->node, &link->free_slots);
	}
	link->idle_msg = link->msgs + (SMR_LINK_MSGS - 2) * SMR_LINK_MSG_SIZE;
	link->idle_dma = link->msgs_dma +
			 (SMR_LINK_MSGS - 2) * SMR_LINK_MSG_SIZE;
	link->credit_msg = link->msgs + (SMR_LINK_MSGS - 1) * SMR_LINK_MSG_SIZE;
	link->credit_dma = link->msgs_dma +
			   (SMR_LINK_MSGS - 1) * SMR_LINK_MSG_SIZE;
	/* posted before the private data announces them as credits */
	for (i = 0; i < SMR_LINK_RQ_DEPTH; i++) {
		struct smr_rx_slot *rx = &link->rx_slots[i];
		size_t off = (SMR_LINK_SLOTS + i) * SMR_LINK_MSG_SIZE;

		rx->cqe.done = smr_link_recv_done;
		rx->msg = link->msgs + off;
		rx->dma = link->msgs_dma + off;
		if (i == SMR_LINK_RQ_DEPTH / 2 &&
		    smr_link_test_fault(SMR_LINK_FAULT_RECV))
			err = -ENOMEM;
		else
			err = smr_link_post_recv(link, rx);
		/*
		 * The QP stays: the receives posted complete only once it is
		 * drained, and how depends on the side (the caller's).
		 */
		if (err)
			return err;
	}
	return 0;

err:
	smr_link_free_resources(link);
	return err;
}

/* ---- the list of links ---- */

/*
 * Room for one more passive link, from @raddr: the peers' links fewer than
 * their share of net.smr.links_max (SMR_LINKS_PASSIVE_SHARE: this host's
 * own connects keep the rest), fewer than links_max in all, and fewer than
 * SMR_LINKS_PER_PEER from that address. Listed links count until their
 * teardown unlists them: each still holds its memory. Caller holds
 * smr_links_lock.
 */
enum smr_link_room smr_link_room_passive_locked(const struct in6_addr *raddr)
{
	unsigned int max = READ_ONCE(smr_links_max), n = 0;
	struct smr_link *link;

	lockdep_assert_held(&smr_links_lock);
	if (smr_links_passive >= max / SMR_LINKS_PASSIVE_SHARE)
		return SMR_LINK_ROOM_SHARE;
	if (smr_links_count >= max)
		return SMR_LINK_ROOM_FULL;
	list_for_each_entry(link, &smr_links, node)
		if (!link->active_side && ipv6_addr_equal(&link->raddr, raddr))
			n++;
	return n < SMR_LINKS_PER_PEER ? SMR_LINK_ROOM : SMR_LINK_ROOM_FULL;
}

/*
 * Room for one more link of ours, for a connect of a socket @uid owns:
 * fewer than a share of net.smr.links_max (SMR_LINKS_USER_SHARE) listed
 * that @uid's connects created (root's are not counted so), and fewer
 * than links_max in all. Caller holds smr_links_lock.
 */
enum smr_link_room smr_link_room_active_locked(kuid_t uid)
{
	unsigned int max = READ_ONCE(smr_links_max), n = 0;
	struct smr_link *link;

	lockdep_assert_held(&smr_links_lock);
	if (!uid_eq(uid, GLOBAL_ROOT_UID)) {
		list_for_each_entry(link, &smr_links, node)
			if (link->active_side && uid_eq(link->uid, uid))
				n++;
		if (n >= max / SMR_LINKS_USER_SHARE)
			return SMR_LINK_ROOM_USER;
	}
	return smr_links_count < max ? SMR_LINK_ROOM : SMR_LINK_ROOM_FULL;
}

/* The counts @link takes its place in; caller holds smr_links_lock. */
static void smr_link_count_locked(const struct smr_link *link, int n)
{
	lockdep_assert_held(&smr_links_lock);
	smr_links_count += n;
	if (!link->active_side)
		smr_links_passive += n;
}

/*
 * List @link, counted, right after its room was found under the same hold
 * of smr_links_lock (smr_link_room_active_locked()); caller holds it.
 */
void smr_link_list_add_locked(struct smr_link *link)
{
	lockdep_assert_held(&smr_links_lock);
	list_add_tail(&link->node, &smr_links);
	smr_link_count_locked(link, 1);
}

/*
 * A passive link from @raddr is about to be built: SMR_LINK_ROOM if it has
 * room (smr_link_room_passive_locked()), with its place in the counts
 * taken now, under the lock the check ran under, so no link listed
 * meanwhile can take it too; else the bound that refuses it. The caller
 * lists it (smr_link_list_reserved()) or gives the place back
 * (smr_link_unreserve()). Passive builds are serialised (link_cm.c), so
 * the per-peer count needs no reservation.
 */
enum smr_link_room smr_link_reserve(const struct in6_addr *raddr)
{
	enum smr_link_room room;

	spin_lock_bh(&smr_links_lock);
	room = smr_link_room_passive_locked(raddr);
	if (room == SMR_LINK_ROOM) {
		smr_links_count++;
		smr_links_passive++;
	}
	spin_unlock_bh(&smr_links_lock);
	return room;
}

/* A passive link's place that smr_link_reserve() took goes back. */
void smr_link_unreserve(void)
{
	spin_lock_bh(&smr_links_lock);
	smr_links_count--;
	smr_links_passive--;
	spin_unlock_bh(&smr_links_lock);
}

/* List @link in the place smr_link_reserve() took for it. */
void smr_link_list_reserved(struct smr_link *link)
{
	spin_lock_bh(&smr_links_lock);
	list_add_tail(&link->node, &smr_links);
	spin_unlock_bh(&smr_links_lock);
}

/*
 * Every listed link was made by both ends' SMR handshake: ours connect
 * only once the peer granted their secret (and are ACTIVE only once its
 * accept echoed it), the peer's exist only because their request proved a
 * grant this host made (link_cm.c). Checked anyway, so that no link built
 * by an unknown party can ever carry or stall a connection.
 */
static bool smr_link_trusted(const struct smr_link *link)
{
	return link->active_side || READ_ONCE(link->authenticated);
}

/*
 * The live link from @laddr to @raddr that this host may use, with a
 * reference (ours while it is still set up, so that racing connections
 * share it); smr_links_lock held.
 */
struct smr_link *smr_link_lookup(const struct in6_addr *laddr,
				 const struct in6_addr *raddr)
{
	struct smr_link *link;

	lockdep_assert_held(&smr_links_lock);
	list_for_each_entry(link, &smr_links, node) {
		/* one about to idle out: a new one (attach re-checks) */
		if (READ_ONCE(link->state) != SMR_LINK_DEAD &&
		    !READ_ONCE(link->idle_asked) &&
		    !READ_ONCE(link->idle_agreed) &&
		    smr_link_trusted(link) &&
		    ipv6_addr_equal(&link->raddr, raddr) &&
		    ipv6_addr_equal(&link->laddr, laddr)) {
			kref_get(&link->ref);
			return link;
		}
	}
	return NULL;
}

/*
 * @id is a passive link still being accepted (smr_link_accept(): its
 * reply may have gone, it is not listed yet). Looked at under
 * smr_links_lock, as smr_link_discard() erases the id.
 */
bool smr_link_id_accepting(u32 id)
{
	struct smr_link *link;
	bool accepting;

	spin_lock_bh(&smr_links_lock);
	link = xa_load(&smr_link_ids, id);
	accepting = link && !link->active_side &&
		    READ_ONCE(link->state) == SMR_LINK_CONNECTING &&
		    list_empty(&link->node);
	spin_unlock_bh(&smr_links_lock);
	return accepting;
}

/*
 * The listed, active, authenticated link with id @id, with a reference;
 * or NULL. Not one we agreed to let idle out: the peer asked while it had
 * no user, so a PROPOSAL naming it is older than its question.
 */
struct smr_link *smr_link_lookup_id(u32 id)
{
	struct smr_link *link;

	spin_lock_bh(&smr_links_lock);
	link = xa_load(&smr_link_ids, id);
	if (link && (READ_ONCE(link->state) != SMR_LINK_ACTIVE ||
		     READ_ONCE(link->idle_agreed) ||
		     !READ_ONCE(link->authenticated) ||
		     list_empty(&link->node)))
		link = NULL;
	if (link)
		kref_get(&link->ref);
	spin_unlock_bh(&smr_links_lock);
	return link;
}

/* ---- teardown ---- */

static void smr_link_teardown(struct work_struct *work)
{
	struct smr_link *link = container_of(work, struct smr_link,
					     teardown_work);
	const struct smr_link_ops *ops = smr_link_user_ops;
	struct smr_link_user *user;
	bool listed;

	/*
	 * DEAD already: no rdma_cm handler builds on the link after this,
	 * nor lists it (a passive link is listed under this mutex): unlisted
	 * only then, or it could stay listed, and counted, for ever.
	 */
	mutex_lock(&link->setup_mutex);
	mutex_unlock(&link->setup_mutex);
	spin_lock_bh(&smr_links_lock);
	listed = !list_empty(&link->node);
	list_del_init(&link->node);
	if (listed)
		smr_link_count_locked(link, -1);
	xa_erase_bh(&smr_link_ids, link->id);
	spin_unlock_bh(&smr_links_lock);
	/* nor queues a connect: one queued before runs (sees DEAD) or goes */
	if (cancel_work_sync(&link->connect_work))
		smr_link_put(link);
	if (cancel_delayed_work_sync(&link->idle_work))
		smr_link_put(link);
	/* DEAD already: it does not queue itself again */
	cancel_delayed_work_sync(&link->keepalive_work);
	if (link->qp) {
		rdma_disconnect(link->cm_id);
		/* every posted send and receive completes (flushed) */
		ib_drain_qp(link->qp);
	}

	/*
	 * Detach every user and tell it. A user whose owner is already being
	 * destroyed detaches itself (its destructor): wait for it, its
	 * buffers come back to the pool freed below.
	 */
	for (;;) {
		struct smr_link_user *found = NULL;
		bool dying = false, waited = false;

		spin_lock_bh(&link->lock);
		list_for_each_entry(user, &link->users, node) {
			if (ops->hold_unless_dying(user)) {
				found = user;
				break;
			}
			dying = true;
		}
		if (found) {
			list_del_init(&found->node);
			link->nusers--;
			/* no slot comes back any more: the wait list lets go */
			if (found->waiting) {
				list_del_init(&found->wait_node);
				link->ntx_wait--;
				found->waiting = false;
				waited = true;
			}
		}
		spin_unlock_bh(&link->lock);
		if (found) {
			ops->down(found);
			if (waited)
				ops->put(found);
			ops->put(found);
		} else if (dying) {
			usleep_range(SMR_LINK_DYING_WAIT_US,
				     2 * SMR_LINK_DYING_WAIT_US);
		} else {
			break;
		}
	}

	smr_buf_pool_destroy(&link->pool);
	smr_link_free_resources(link);
	if (link->cm_id)
		rdma_destroy_id(link->cm_id);
	link->cm_id = NULL;
	smr_stat_inc(&init_net, SMR_STAT_LINKS_DESTROYED);
	if (listed)
		smr_link_put(link);	/* the list's reference */
	smr_link_put(link);		/* the work's reference */
}

/* An RDMA device goes (NULL: all): take its links down, and wait. */
void smr_link_devices_gone(struct ib_device *ibdev)
{
	struct smr_link *link;

	spin_lock_bh(&smr_links_lock);
	list_for_each_entry(link, &smr_links, node)
		if (link->ibdev == ibdev || !ibdev)
			smr_link_down(link);
	spin_unlock_bh(&smr_links_lock);
	flush_workqueue(smr_link_wq);
}

/* ---- /proc/net/smr/links and conns ---- */

static const char *smr_link_state_name(u8 state)
{
	switch (state) {
	case SMR_LINK_CONNECTING:
		return "connecting";
	case SMR_LINK_ACTIVE:
		return "active";
	default:
		return "dead";
	}
}

static void smr_seq_addr(struct seq_file *seq, const struct in6_addr *a)
{
	if (ipv6_addr_v4mapped(a))
		seq_printf(seq, " %pI4", &a->s6_addr32[3]);
	else
		seq_printf(seq, " %pI6c", a);
}

int smr_links_show(struct seq_file *seq, void *v)
{
	struct smr_link *link;

	/* the first seven columns are stable; flow control state follows */
	seq_puts(seq, "ID PEER_ID STATE DEV LOCAL PEER CONNS CREDITS OWED WAITING SQ_FREE UID\n");
	if (!net_eq(seq_file_single_net(seq), &init_net))
		return 0;	/* links live in init_net only */
	spin_lock_bh(&smr_links_lock);
	list_for_each_entry(link, &smr_links, node) {
		seq_printf(seq, "%u %u %s %s", link->id, READ_ONCE(link->peer_id),
			   smr_link_state_name(READ_ONCE(link->state)),
			   link->ibdev ? dev_name(&link->ibdev->dev) : "-");
		smr_seq_addr(seq, &link->laddr);
		smr_seq_addr(seq, &link->raddr);
		spin_lock(&link->lock);
		seq_printf(seq, " %u %u %u %u %u", link->nusers,
			   link->peer_credits, link->credits_owed,
			   link->ntx_wait, link->sq_free);
		spin_unlock(&link->lock);
		/* whose connect created it; the peer's: no one of ours */
		if (link->active_side)
			seq_printf(seq, " %u\n",
				   from_kuid_munged(seq_user_ns(seq), link->uid));
		else
			seq_puts(seq, " -\n");
	}
	spin_unlock_bh(&smr_links_lock);
	return 0;
}

/*
 * Call @fn for every user of every listed link, in list order, under
 * smr_links_lock and the link's lock (@fn must not sleep or take either).
 */
void smr_links_walk_users(void (*fn)(void *arg, u32 link_id,
				     struct smr_link_user *user),
			  void *arg)
{
	struct smr_link_user *user;
	struct smr_link *link;

	spin_lock_bh(&smr_links_lock);
	list_for_each_entry(link, &smr_links, node) {
		spin_lock(&link->lock);
		list_for_each_entry(user, &link->users, node)
			fn(arg, link->id, user);
		spin_unlock(&link->lock);
	}
	spin_unlock_bh(&smr_links_lock);
}
