// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: RDMA links. A link is one RC queue pair between this host and a peer
 * host, set up with rdma_cm and shared by every SMR connection between the
 * two: the first connection to a peer creates it, later ones find it.
 *
 * The active side resolves the peer's TCP address (rdma_cm picks the RDMA
 * device that routes to it: no configuration), connects to the module's
 * rdma_cm listener on the peer (port cm_port) and learns the peer's link id
 * from the reply's private data; the client names that id in its PROPOSAL
 * so that both ends of a connection use the same queue pair.
 *
 * Each link owns a protection domain, one completion queue polled in
 * softirq, a QP, CDC message slots (send) and posted CDC receives, all
 * allocated and DMA-mapped once; the data path allocates nothing. Every
 * CDC send is signalled and carries the count of unsignalled RDMA WRITEs
 * posted ahead of it, so send queue credits come back in order.
 *
 * Links live in init_net only: rdma_cm ids pin their namespace, and a
 * listener per namespace would keep every namespace alive forever.
 * Sockets in other namespaces fall back to TCP (no_rdma_device).
 *
 * Locking and lifetimes
 * ---------------------
 * smr_links_lock (BH) protects smr_links and the id IDR; a link is listed
 * until it goes down. link->lock (BH) protects @state, @conns, @nconns,
 * @free_slots, @sq_free, @tx_wait (and each waiter's conn.tx_queued),
 * @ntx_wait, the credits (@peer_credits, @credits_owed) and
 * @credit_msg_posted; posting to the QP happens under it, so a post never
 * races with teardown. References (kref): the list holds one until
 * teardown ends, every attached connection holds one, as do lookups and
 * the queued teardown work. A connection on @tx_wait holds a sock
 * reference, dropped when it leaves the list. The rdma_cm id is destroyed
 * by the teardown work only (never in its own handler), before the last
 * reference can go, so the handler always finds its link.
 *
 * @setup_mutex is held by the rdma_cm handler while it acts on an event
 * (it creates the QP, connects, activates) and taken once by the teardown
 * after the link is DEAD: a handler that began before cannot build on a
 * link being freed, and a later one sees DEAD and does nothing.
 *
 * Teardown (process context, smr_wq): mark DEAD, fence the handler, drain
 * the QP (every posted send and receive completes, flushed), detach and
 * reset every connection under its sock lock, then free the pool, QP, CQ,
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
 * completed for SMR_LINK_STALL_TIMEOUT take the link down. A silent peer
 * fails the link within SMR_LINK_STALL_TIMEOUT + SMR_LINK_KEEPALIVE of the
 * last acknowledgement. Documentation/design.rst, "Failure semantics".
 *
 * Credits: an IB SEND the peer has no receive posted for draws an RNR NAK,
 * and RNR retries stall and then fail the whole link. So each end sends at
 * most as many SENDs as the peer granted: the rdma_cm private data's
 * initial grant, plus the credits every CDC and link message carries back
 * (receives re-posted since the last report). CDCs keep the last credit
 * for a credit-only link message, sent once SMR_LINK_CREDIT_BATCH are
 * owed, so both ends can never be left without one.
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/seq_file_net.h>
#include <linux/slab.h>
#include <linux/xarray.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>

#include "smr.h"

#define SMR_LINK_SQ_DEPTH	256
#define SMR_LINK_RQ_DEPTH	128	/* receives posted: the peer's credits */
/* owed credits go back alone (a link message) once this many gathered */
#define SMR_LINK_CREDIT_BATCH	(SMR_LINK_RQ_DEPTH / 8)
/* a CDC leaves this many credits for a credit message */
#define SMR_LINK_CREDITS_RESERVED	1
#define SMR_LINK_WR_PER_CDC	3	/* up to two WRITEs and the CDC */
/*
 * CDC sends in flight; the rest of the send queue stays free for memory
 * registrations and the keepalive, so they never wait on data.
 */
#define SMR_LINK_SQ_RESERVED	16
#define SMR_LINK_SLOTS		((SMR_LINK_SQ_DEPTH - SMR_LINK_SQ_RESERVED) / \
				 SMR_LINK_WR_PER_CDC)
#define SMR_LINK_MSG_SIZE	192	/* per slot: a CDC and its inline data */
/* message slots: CDC sends, receives, one credit message */
#define SMR_LINK_MSGS		(SMR_LINK_SLOTS + SMR_LINK_RQ_DEPTH + 1)
#define SMR_CM_TIMEOUT_MS	2000
/* an idle peer is probed this often: a dead one fails the probe */
#define SMR_LINK_KEEPALIVE	(5 * HZ)
/*
 * Sends outstanding this long with none completed: the peer is gone. Longer
 * than the QP's own retries (7 x 1.07 s), which normally fail it first.
 */
#define SMR_LINK_STALL_TIMEOUT	(10 * HZ)
/*
 * A link we connect that is not up this long fails, so that the next
 * connection tries a new one: rdma_cm retries a lost request for minutes.
 */
#define SMR_LINK_SETUP_TIMEOUT	(10 * HZ)
/*
 * RC retransmissions of a lost packet before the QP fails (7 would mean
 * "for ever" to rxe), and the ack timeout exponent between them
 * (4.096 us << 18 = 1.07 s: slow TCG guests retransmit, they do not fail).
 */
#define SMR_LINK_RETRY_COUNT	6
#define SMR_LINK_RNR_RETRY	6	/* 7 is "for ever"; credits avoid RNR */
#define SMR_LINK_ACK_TIMEOUT	18

static unsigned short smr_cm_port = 7609;
module_param_named(cm_port, smr_cm_port, ushort, 0444);
MODULE_PARM_DESC(cm_port, "rdma_cm port of SMR's link listener (default 7609)");

int smr_link_idle_ms = 30000;

struct smr_cdc_slot {
	struct ib_cqe		cqe;
	struct list_head	node;		/* on free_slots */
	struct smr_sock		*smr;		/* sock reference while posted */
	u64			tx_pos;		/* tx_sent once this completes */
	unsigned int		nr_wr;
	u8			*msg;
	u64			dma;
};

struct smr_rx_slot {
	struct ib_cqe		cqe;
	u8			*msg;
	u64			dma;
};

struct smr_link {
	struct kref		ref;
	struct list_head	node;		/* on smr_links until down */
	u32			id;
	u32			peer_id;
	u8			state;		/* enum smr_link_state */
	bool			active_side;	/* we connected */
	bool			down;		/* teardown queued */
	struct in6_addr		laddr;		/* v4-mapped for IPv4 */
	struct in6_addr		raddr;
	struct rdma_cm_id	*cm_id;
	struct ib_device	*ibdev;
	struct ib_pd		*pd;
	struct ib_cq		*cq;
	struct ib_qp		*qp;
	spinlock_t		lock;		/* see "Locking" above */
	struct mutex		setup_mutex;	/* see "Locking" above */
	struct list_head	conns;
	unsigned int		nconns;
	struct list_head	free_slots;
	unsigned int		sq_free;
	struct list_head	tx_wait;	/* conns waiting for a slot/credits */
	unsigned int		ntx_wait;
	u32			peer_credits;	/* SENDs the peer has receives for */
	u32			credits_owed;	/* receives re-posted, not reported */
	bool			credit_msg_posted;
	struct ib_cqe		credit_cqe;
	u8			*credit_msg;
	u64			credit_dma;
	/* unsignalled WRITEs and invalidations: only their errors complete */
	struct ib_cqe		unsignalled_cqe;
	u8			*msgs;
	u64			msgs_dma;
	bool			msgs_mapped;
	struct smr_cdc_slot	slots[SMR_LINK_SLOTS];
	struct smr_rx_slot	rx_slots[SMR_LINK_RQ_DEPTH];
	struct smr_buf_pool	pool;
	struct delayed_work	idle_work;
	struct delayed_work	keepalive_work;
	struct ib_cqe		keepalive_cqe;
	bool			keepalive_posted;
	/* jiffies of the last send completion (WRITE_ONCE; keepalive reads) */
	unsigned long		send_progress;
	struct work_struct	teardown_work;
};

static void smr_link_teardown(struct work_struct *work);
static void smr_link_discard(struct smr_link *link);

static LIST_HEAD(smr_links);
static DEFINE_SPINLOCK(smr_links_lock);
/* link ids, never 0; erased under smr_links_lock too (smr_link_find()) */
static DEFINE_XARRAY_FLAGS(smr_link_ids, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_BH);
static u32 smr_link_next_id;
static struct rdma_cm_id *smr_cm_listener;

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

struct ib_pd *smr_link_pd(const struct smr_link *link)
{
	return link->pd;
}

struct smr_buf_pool *smr_link_pool(struct smr_link *link)
{
	return &link->pool;
}

/* Any context: take the link down once; the work does the rest. */
static void smr_link_down(struct smr_link *link)
{
	unsigned long flags;
	bool queue;

	spin_lock_irqsave(&link->lock, flags);
	queue = !link->down;
	link->down = true;
	WRITE_ONCE(link->state, SMR_LINK_DEAD);
	spin_unlock_irqrestore(&link->lock, flags);
	if (!queue)
		return;
	kref_get(&link->ref);
	queue_work(smr_wq, &link->teardown_work);
}

/* A connection found the link broken (@why): it goes, counted. */
void smr_link_fail(struct smr_link *link, const char *why)
{
	pr_info_ratelimited("link %u: %s: link down\n", link->id, why);
	smr_stat_inc(&init_net, SMR_STAT_LINKS_FAILED);
	smr_link_down(link);
}

/* Kick every connection waiting on the link's setup. */
static void smr_link_kick_conns(struct smr_link *link)
{
	struct smr_sock *smr;

	spin_lock_bh(&link->lock);
	list_for_each_entry(smr, &link->conns, conn.link_node)
		smr_hs_kick(smr);
	spin_unlock_bh(&link->lock);
}

/* The QP may carry CDCs now. Caller holds @setup_mutex. */
static void smr_link_set_active(struct smr_link *link)
{
	bool up = false;

	lockdep_assert_held(&link->setup_mutex);
	spin_lock_bh(&link->lock);
	if (link->state == SMR_LINK_CONNECTING) {
		WRITE_ONCE(link->state, SMR_LINK_ACTIVE);
		up = true;
	}
	spin_unlock_bh(&link->lock);
	if (!up)
		return;		/* went down meanwhile: the teardown has it */
	WRITE_ONCE(link->send_progress, jiffies);
	/* it guarded the setup until now (smr_link_get()) */
	mod_delayed_work(smr_wq, &link->keepalive_work, SMR_LINK_KEEPALIVE);
	smr_stat_inc(&init_net, SMR_STAT_LINKS_CREATED);
	smr_link_kick_conns(link);
}

static void smr_link_idle(struct work_struct *work)
{
	struct smr_link *link = container_of(to_delayed_work(work),
					     struct smr_link, idle_work);
	bool idle;

	spin_lock_bh(&link->lock);
	idle = !link->nconns && link->state == SMR_LINK_ACTIVE;
	spin_unlock_bh(&link->lock);
	if (idle)
		smr_link_down(link);
	smr_link_put(link);	/* the queued work's reference */
}

void smr_link_attach(struct smr_link *link, struct smr_sock *smr)
{
	spin_lock_bh(&link->lock);
	list_add_tail(&smr->conn.link_node, &link->conns);
	link->nconns++;
	spin_unlock_bh(&link->lock);
}

/* The connection no longer uses the link; an unused link idles out. */
void smr_link_detach(struct smr_link *link, struct smr_sock *smr)
{
	bool arm = false;

	spin_lock_bh(&link->lock);
	if (!list_empty(&smr->conn.link_node)) {
		list_del_init(&smr->conn.link_node);
		link->nconns--;
		arm = !link->nconns && link->state == SMR_LINK_ACTIVE;
	}
	if (smr->conn.tx_queued) {
		list_del_init(&smr->conn.wait_node);
		link->ntx_wait--;
		smr->conn.tx_queued = false;
		__sock_put(&smr->sk);	/* the caller holds another */
	}
	/*
	 * A queued idle work holds a reference, taken before it can run; if
	 * one was pending already it has its own (ours is not the last: the
	 * list holds one).
	 */
	if (arm) {
		kref_get(&link->ref);
		if (mod_delayed_work(smr_wq, &link->idle_work,
				     msecs_to_jiffies(READ_ONCE(smr_link_idle_ms))))
			kref_put(&link->ref, smr_link_release);
	}
	spin_unlock_bh(&link->lock);
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
	pr_info_ratelimited("link %u: work completion status %d (%s): link down\n",
			    link->id, wc->status, ib_wc_status_msg(wc->status));
	smr_stat_inc(&init_net, SMR_STAT_LINKS_FAILED);
	smr_link_down(link);
}

/* Unsignalled WRITEs and LOCAL_INVs complete only when they fail. */
static void smr_link_unsignalled_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;

	if (wc->status != IB_WC_SUCCESS)
		smr_link_wc_error(link, wc);
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
 * Give owed credits back in a link message once enough gathered and no CDC
 * took them along; it may use the last credit (CDCs never do), and one is
 * in flight at a time. Caller holds link->lock.
 */
static int smr_link_return_credits_locked(struct smr_link *link)
{
	int err;
	struct smr_lmsg msg = { .type = SMR_LMSG_CREDITS };
	struct ib_sge sge = {
		.addr	= link->credit_dma,
		.length	= SMR_LMSG_LEN,
		.lkey	= link->pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_cqe		= &link->credit_cqe,
		.sg_list	= &sge,
		.num_sge	= 1,
		.opcode		= IB_WR_SEND,
		.send_flags	= IB_SEND_SIGNALED,
	};

	lockdep_assert_held(&link->lock);
	if (link->state != SMR_LINK_ACTIVE || link->credit_msg_posted ||
	    link->credits_owed < SMR_LINK_CREDIT_BATCH ||
	    !link->peer_credits || !link->sq_free)
		return 0;
	msg.credits = min_t(u32, link->credits_owed, U16_MAX);
	smr_lmsg_build(&msg, link->credit_msg);
	ib_dma_sync_single_for_device(link->ibdev, link->credit_dma,
				      SMR_LMSG_LEN, DMA_TO_DEVICE);
	/* only a broken QP refuses a post: the caller takes the link down */
	err = ib_post_send(link->qp, &wr, NULL);
	if (err)
		return err;
	link->credits_owed -= msg.credits;
	link->peer_credits--;
	link->sq_free--;
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

static void smr_link_credit_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;
	int err;

	smr_link_send_progress(link, wc);
	spin_lock_bh(&link->lock);
	link->sq_free++;
	link->credit_msg_posted = false;
	err = smr_link_return_credits_locked(link);
	spin_unlock_bh(&link->lock);
	if (err)
		smr_link_down(link);
}

/*
 * Push connections that waited for a CDC slot or credits, one at a time:
 * each leaves the wait list (under link->lock) before its push, which may
 * put it back, so a node is never on two lists. At most as many as were
 * waiting at the start: one put back waits for the next completion.
 * Any context but hard IRQ; no lock held.
 */
static void smr_link_run_waiters(struct smr_link *link)
{
	struct smr_sock *waiter;
	unsigned int budget;

	spin_lock_bh(&link->lock);
	budget = link->ntx_wait;
	spin_unlock_bh(&link->lock);
	while (budget--) {
		spin_lock_bh(&link->lock);
		waiter = NULL;
		if (smr_link_cdc_room_locked(link, 1))
			waiter = list_first_entry_or_null(&link->tx_wait,
							  struct smr_sock,
							  conn.wait_node);
		if (waiter) {
			list_del_init(&waiter->conn.wait_node);
			link->ntx_wait--;
			waiter->conn.tx_queued = false;
		}
		spin_unlock_bh(&link->lock);
		if (!waiter)
			break;
		smr_tx_push(waiter);
		sock_put(&waiter->sk);	/* the wait list's reference */
	}
}

static void smr_link_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;
	struct smr_cdc_slot *slot = container_of(wc->wr_cqe,
						 struct smr_cdc_slot, cqe);
	struct smr_sock *smr = slot->smr;

	smr_link_send_progress(link, wc);

	spin_lock_bh(&link->lock);
	link->sq_free += slot->nr_wr;
	slot->smr = NULL;
	list_add(&slot->node, &link->free_slots);
	spin_unlock_bh(&link->lock);

	smr_conn_sent(smr, slot->tx_pos, wc->status == IB_WC_SUCCESS);
	sock_put(&smr->sk);	/* the slot's reference */
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
	spin_unlock_bh(&link->lock);
	if (err)
		smr_link_down(link);
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
		smr_conn_cdc_recv(link, &cdc, rx->msg + SMR_CDC_LEN);
		break;
	case SMR_MSG_LINK:
		if (smr_lmsg_parse(rx->msg, len, &lmsg)) {
			smr_stat_inc(&init_net, SMR_STAT_CDC_BAD);
			break;
		}
		smr_link_credits_in(link, lmsg.credits);
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
		smr_link_down(link);
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
	link->sq_free += ctx->nr_wr;
	spin_unlock_bh(&link->lock);
	ctx->status = wc->status == IB_WC_SUCCESS ? 0 : -EIO;
	complete(&ctx->done);
}

/*
 * Post a memory registration chain (LOCAL_INV and/or REG_MR; the last one
 * signalled here) and wait for it. Process context.
 */
int smr_link_post_reg(struct smr_link *link, struct ib_send_wr *wr)
{
	struct smr_reg_ctx ctx = { .cqe.done = smr_link_reg_done };
	const struct ib_send_wr *bad;
	struct ib_send_wr *last = wr;
	int tries, err;

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

	/* registrations are rare: wait a little for room rather than fail */
	for (tries = 0;; tries++) {
		spin_lock_bh(&link->lock);
		if (link->state != SMR_LINK_ACTIVE) {
			err = -ENOTCONN;
		} else if (link->sq_free < ctx.nr_wr) {
			err = -EBUSY;
		} else {
			link->sq_free -= ctx.nr_wr;
			err = ib_post_send(link->qp, wr, &bad);
			if (err)
				link->sq_free += ctx.nr_wr;
		}
		spin_unlock_bh(&link->lock);
		if (err != -EBUSY || tries >= 1000)
			break;
		usleep_range(1000, 2000);
	}
	if (err) {
		if (err != -ENOTCONN && err != -EBUSY)
			smr_link_down(link);
		return err;
	}
	/* completes, or is flushed when the link goes down */
	wait_for_completion(&ctx.done);
	return ctx.status;
}

/*
 * No slot or credit is free: push @smr again when one comes back. Called
 * under link->lock by the post that found no room, so no completion can
 * slip in between and miss the waiter. The wait list holds a sock
 * reference.
 */
static void smr_link_wait_room_locked(struct smr_link *link,
				      struct smr_sock *smr)
{
	lockdep_assert_held(&link->lock);
	if (smr->conn.tx_queued || link->state == SMR_LINK_DEAD)
		return;
	sock_hold(&smr->sk);
	list_add_tail(&smr->conn.wait_node, &link->tx_wait);
	link->ntx_wait++;
	smr->conn.tx_queued = true;
	smr_stat_inc(&init_net, SMR_STAT_CDC_WAITS);
}

/*
 * Post @writes (an unsignalled chain of RDMA WRITEs, or NULL) and then the
 * CDC @cdc, in one call; the CDC takes the link's owed credits along.
 * Caller holds the connection's lock. Returns 0, -EAGAIN when no slot,
 * send queue room or credit is free (@smr is then pushed again once one
 * comes back), or -ENOTCONN when the link is not usable.
 */
int smr_link_post_cdc(struct smr_link *link, struct smr_sock *smr,
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

	lockdep_assert_held(&smr->conn.lock);
	for (w = writes; w; w = w->next) {
		w->wr_cqe = &link->unsignalled_cqe;
		nr_wr++;
	}

	spin_lock(&link->lock);
	if (link->state != SMR_LINK_ACTIVE) {
		spin_unlock(&link->lock);
		return -ENOTCONN;
	}
	if (!smr_link_cdc_room_locked(link, nr_wr)) {
		smr_link_wait_room_locked(link, smr);
		spin_unlock(&link->lock);
		return -EAGAIN;
	}
	slot = list_first_entry(&link->free_slots, struct smr_cdc_slot, node);
	list_del(&slot->node);
	link->sq_free -= nr_wr;
	with_credits.credits = min_t(u32, link->credits_owed, U16_MAX);

	smr_cdc_build(&with_credits, slot->msg);
	if (cdc->inline_len)
		memcpy(slot->msg + SMR_CDC_LEN, data, cdc->inline_len);
	ib_dma_sync_single_for_device(link->ibdev, slot->dma, len,
				      DMA_TO_DEVICE);
	sock_hold(&smr->sk);
	slot->smr = smr;
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
	err = ib_post_send(link->qp, first, &bad);
	if (err) {
		/* a post only fails on a broken QP: the link goes */
		link->sq_free += nr_wr;
		slot->smr = NULL;
		list_add(&slot->node, &link->free_slots);
		spin_unlock(&link->lock);
		sock_put(&smr->sk);
		smr_link_down(link);
		return -ENOTCONN;
	}
	link->peer_credits--;
	link->credits_owed -= with_credits.credits;
	spin_unlock(&link->lock);
	smr_stat_inc(&init_net, SMR_STAT_CDC_SENT);
	return 0;
}

static void smr_link_qp_event(struct ib_event *event, void *context)
{
	struct smr_link *link = context;

	switch (event->event) {
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
	case IB_EVENT_QP_ACCESS_ERR:
	case IB_EVENT_DEVICE_FATAL:
		pr_info_ratelimited("link %u: %s: link down\n", link->id,
				    ib_event_msg(event->event));
		smr_stat_inc(&init_net, SMR_STAT_LINKS_FAILED);
		smr_link_down(link);
		break;
	default:
		break;
	}
}

static void smr_link_keepalive_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct smr_link *link = cq->cq_context;

	smr_link_send_progress(link, wc);
	spin_lock_bh(&link->lock);
	link->sq_free++;
	link->keepalive_posted = false;
	spin_unlock_bh(&link->lock);
}

/*
 * A peer that died (or lost its device without a word) answers nothing:
 * a zero-length RDMA WRITE (no key needed, IBTA C9-88) every few seconds
 * then fails after the QP's retries and takes the link down, so sockets
 * waiting on that peer fail instead of hanging; and sends that stay
 * unacknowledged for SMR_LINK_STALL_TIMEOUT take it down even when the
 * adapter's retries never end (see "Failure detection" above).
 */
static void smr_link_keepalive(struct work_struct *work)
{
	struct smr_link *link = container_of(to_delayed_work(work),
					     struct smr_link, keepalive_work);
	unsigned long progress = READ_ONCE(link->send_progress);
	struct ib_rdma_wr wr = {};
	bool alive, stalled = false, down = false;

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
	if (link->sq_free == SMR_LINK_SQ_DEPTH)
		/* nothing outstanding: nothing to wait for */
		WRITE_ONCE(link->send_progress, jiffies);
	else if (time_after(jiffies, progress + SMR_LINK_STALL_TIMEOUT))
		stalled = link->state == SMR_LINK_ACTIVE;
	if (link->state == SMR_LINK_ACTIVE && !stalled &&
	    !link->keepalive_posted && link->sq_free) {
		link->sq_free--;
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
		smr_link_down(link);
	else if (alive)
		queue_delayed_work(smr_wq, &link->keepalive_work,
				   SMR_LINK_KEEPALIVE);
}

/* ---- setup ---- */

static struct smr_link *smr_link_alloc(bool active_side)
{
	struct smr_link *link;

	link = kzalloc(sizeof(*link), GFP_KERNEL);
	if (!link)
		return NULL;
	kref_init(&link->ref);		/* the list's reference */
	INIT_LIST_HEAD(&link->node);
	spin_lock_init(&link->lock);
	INIT_LIST_HEAD(&link->conns);
	INIT_LIST_HEAD(&link->free_slots);
	INIT_LIST_HEAD(&link->tx_wait);
	mutex_init(&link->setup_mutex);
	link->unsignalled_cqe.done = smr_link_unsignalled_done;
	link->credit_cqe.done = smr_link_credit_done;
	INIT_DELAYED_WORK(&link->idle_work, smr_link_idle);
	INIT_DELAYED_WORK(&link->keepalive_work, smr_link_keepalive);
	link->keepalive_cqe.done = smr_link_keepalive_done;
	INIT_WORK(&link->teardown_work, smr_link_teardown);
	smr_buf_pool_init(&link->pool);
	link->active_side = active_side;
	link->state = SMR_LINK_CONNECTING;

	if (xa_alloc_cyclic_bh(&smr_link_ids, &link->id, link, xa_limit_32b,
			       &smr_link_next_id, GFP_KERNEL) < 0) {
		kfree(link);
		return NULL;
	}
	return link;
}

/* Free what smr_link_create_qp() made; the QP must be drained. */
static void smr_link_free_resources(struct smr_link *link)
{
	if (link->qp)
		rdma_destroy_qp(link->cm_id);
	link->qp = NULL;
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
}

static int smr_link_create_qp(struct smr_link *link, struct rdma_cm_id *id)
{
	struct ib_device *dev = id->device;
	struct ib_qp_init_attr attr = {};
	size_t len = SMR_LINK_MSGS * SMR_LINK_MSG_SIZE;
	int i, err;

	link->ibdev = dev;
	link->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(link->pd)) {
		err = PTR_ERR(link->pd);
		link->pd = NULL;
		return err;
	}
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
		err = smr_link_post_recv(link, rx);
		if (err)
			goto err_drain;
	}
	return 0;

err_drain:
	ib_drain_qp(link->qp);
err:
	smr_link_free_resources(link);
	return err;
}

/* Our private data: our link id, and the receives we posted (credits). */
static void smr_link_conn_param(struct rdma_conn_param *param, u8 *priv,
				u32 id)
{
	struct smr_cm_priv p = {
		.link_id	= id,
		.credits	= SMR_LINK_RQ_DEPTH,
	};

	smr_cm_priv_build(&p, priv);
	memset(param, 0, sizeof(*param));
	param->private_data = priv;
	param->private_data_len = SMR_CM_PRIV_LEN;
	param->retry_count = SMR_LINK_RETRY_COUNT;
	param->rnr_retry_count = SMR_LINK_RNR_RETRY;
}

/* The peer's private data, checked by the codec; -EPROTO if not SMR's. */
static int smr_link_peer_param(struct smr_link *link,
			       const struct rdma_conn_param *param)
{
	struct smr_cm_priv p;

	if (smr_cm_priv_parse(param->private_data, param->private_data_len,
			      &p))
		return -EPROTO;
	link->peer_id = p.link_id;
	link->peer_credits = p.credits;
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

static void smr_link_list_add(struct smr_link *link)
{
	spin_lock_bh(&smr_links_lock);
	list_add_tail(&link->node, &smr_links);
	spin_unlock_bh(&smr_links_lock);
}

/* A peer connects to our listener: a passive link. */
static int smr_link_accept(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rdma_conn_param param;
	u8 priv[SMR_CM_PRIV_LEN];
	struct smr_link *link;
	int err;

	link = smr_link_alloc(false);
	if (!link)
		return -ENOMEM;
	/* not listed yet; the mutex is for the teardown once it is */
	mutex_lock(&link->setup_mutex);
	err = smr_link_peer_param(link, &ev->param.conn);
	if (err) {
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		goto err_free;
	}
	link->cm_id = id;
	smr_addr_from_sockaddr(&link->laddr,
			       (struct sockaddr *)&id->route.addr.src_addr);
	smr_addr_from_sockaddr(&link->raddr,
			       (struct sockaddr *)&id->route.addr.dst_addr);
	err = rdma_set_ack_timeout(id, SMR_LINK_ACK_TIMEOUT);
	if (!err)
		err = smr_link_create_qp(link, id);
	if (err)
		goto err_free;
	smr_link_conn_param(&param, priv, link->id);
	id->context = link;
	err = rdma_accept(id, &param);
	if (err) {
		id->context = NULL;
		ib_drain_qp(link->qp);
		smr_link_free_resources(link);
		goto err_free;
	}
	/* the QP is ready to send once accepted; RTU follows */
	smr_link_list_add(link);
	smr_link_set_active(link);
	mutex_unlock(&link->setup_mutex);
	return 0;

err_free:
	mutex_unlock(&link->setup_mutex);
	smr_link_discard(link);
	return err;	/* rdma_cm destroys the id */
}

/* One rdma_cm event of a link's id. Caller holds @setup_mutex. */
static int smr_link_cm_event(struct smr_link *link, struct rdma_cm_id *id,
			     struct rdma_cm_event *ev)
{
	struct rdma_conn_param param;
	u8 priv[SMR_CM_PRIV_LEN];
	int err = 0;

	lockdep_assert_held(&link->setup_mutex);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		err = rdma_resolve_route(id, SMR_CM_TIMEOUT_MS);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		err = rdma_set_ack_timeout(id, SMR_LINK_ACK_TIMEOUT);
		if (!err)
			err = smr_link_create_qp(link, id);
		if (err)
			break;
		smr_link_conn_param(&param, priv, link->id);
		err = rdma_connect_locked(id, &param);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (link->active_side) {
			err = smr_link_peer_param(link, &ev->param.conn);
			if (!err)
				smr_link_set_active(link);
		}
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		err = -ENOTCONN;
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
	int err;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return smr_link_accept(id, ev);
	if (!link)
		return 0;	/* the listener itself */

	mutex_lock(&link->setup_mutex);
	/* a link being torn down builds nothing more (see "Locking") */
	err = READ_ONCE(link->state) == SMR_LINK_DEAD ? 0 :
	      smr_link_cm_event(link, id, ev);
	mutex_unlock(&link->setup_mutex);
	if (err) {
		smr_stat_inc(&init_net, SMR_STAT_LINKS_FAILED);
		smr_link_down(link);
	}
	return 0;	/* the teardown work destroys the id, never rdma_cm */
}

/*
 * The link to the peer of @t (a connection's addresses), attached to @smr:
 * an existing one, or a new one whose setup has begun. NULL if none can be
 * made. The caller's connection holds the returned reference.
 */
/* The live link from @laddr to @raddr, with a reference; smr_links_lock held. */
static struct smr_link *smr_link_lookup(const struct in6_addr *laddr,
					const struct in6_addr *raddr)
{
	struct smr_link *link;

	list_for_each_entry(link, &smr_links, node) {
		if (READ_ONCE(link->state) != SMR_LINK_DEAD &&
		    ipv6_addr_equal(&link->raddr, raddr) &&
		    ipv6_addr_equal(&link->laddr, laddr)) {
			kref_get(&link->ref);
			return link;
		}
	}
	return NULL;
}

static void smr_link_discard(struct smr_link *link)
{
	spin_lock_bh(&smr_links_lock);
	xa_erase_bh(&smr_link_ids, link->id);
	spin_unlock_bh(&smr_links_lock);
	kfree(link);
}

/*
 * The link to the peer of @t (a connection's addresses), attached to @smr:
 * an existing one, or a new one whose setup has begun. Connections racing
 * to a peer with no link find one another's under smr_links_lock, so they
 * share one. NULL if none can be made. The connection holds the returned
 * reference.
 */
struct smr_link *smr_link_get(struct smr_sock *smr, const struct smr_tuple *t)
{
	struct sockaddr_storage src = {}, dst = {};
	struct smr_link *link, *found;
	struct rdma_cm_id *id;
	int err;

	if (!net_eq(t->net, &init_net))
		return NULL;

	spin_lock_bh(&smr_links_lock);
	found = smr_link_lookup(&t->laddr, &t->raddr);
	spin_unlock_bh(&smr_links_lock);
	if (found) {
		smr_link_attach(found, smr);
		return found;
	}

	link = smr_link_alloc(true);
	if (!link)
		return NULL;
	link->laddr = t->laddr;
	link->raddr = t->raddr;
	if (t->family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&src;
		struct sockaddr_in *d = (struct sockaddr_in *)&dst;

		s->sin_family = AF_INET;
		s->sin_addr.s_addr = t->laddr.s6_addr32[3];
		d->sin_family = AF_INET;
		d->sin_addr.s_addr = t->raddr.s6_addr32[3];
		d->sin_port = htons(smr_cm_port);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&src;
		struct sockaddr_in6 *d = (struct sockaddr_in6 *)&dst;

		s->sin6_family = AF_INET6;
		s->sin6_addr = t->laddr;
		d->sin6_family = AF_INET6;
		d->sin6_addr = t->raddr;
		d->sin6_port = htons(smr_cm_port);
	}
	id = rdma_create_id(&init_net, smr_cm_handler, link, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id)) {
		smr_link_discard(link);
		return NULL;
	}
	link->cm_id = id;

	/* listed before it connects: a racing connection waits on it */
	spin_lock_bh(&smr_links_lock);
	found = smr_link_lookup(&t->laddr, &t->raddr);
	if (!found)
		list_add_tail(&link->node, &smr_links);
	spin_unlock_bh(&smr_links_lock);
	if (found) {
		rdma_destroy_id(id);
		smr_link_discard(link);
		smr_link_attach(found, smr);
		return found;
	}
	kref_get(&link->ref);		/* the connection's */
	smr_link_attach(link, smr);
	/* cancelled by the teardown, like the keepalive it becomes */
	queue_delayed_work(smr_wq, &link->keepalive_work,
			   SMR_LINK_SETUP_TIMEOUT);

	err = rdma_resolve_addr(id, (struct sockaddr *)&src,
				(struct sockaddr *)&dst, SMR_CM_TIMEOUT_MS);
	if (err) {
		smr_stat_inc(&init_net, SMR_STAT_LINKS_FAILED);
		smr_link_down(link);
	}
	return link;
}

/*
 * The server side: the link the client named by our id, if it is alive,
 * leads to the connection's peer, and lives in its namespace. Attached to
 * @smr with a reference, or NULL.
 */
struct smr_link *smr_link_find(struct smr_sock *smr, u32 id,
			       const struct smr_tuple *t)
{
	struct smr_link *link;

	if (!net_eq(t->net, &init_net))
		return NULL;
	spin_lock_bh(&smr_links_lock);
	link = xa_load(&smr_link_ids, id);
	if (link && (READ_ONCE(link->state) != SMR_LINK_ACTIVE ||
		     !ipv6_addr_equal(&link->raddr, &t->raddr) ||
		     list_empty(&link->node)))
		link = NULL;
	if (link)
		kref_get(&link->ref);
	spin_unlock_bh(&smr_links_lock);
	if (link)
		smr_link_attach(link, smr);
	return link;
}

/* ---- teardown ---- */

static void smr_link_teardown(struct work_struct *work)
{
	struct smr_link *link = container_of(work, struct smr_link,
					     teardown_work);
	struct smr_sock *smr;
	bool listed;

	spin_lock_bh(&smr_links_lock);
	listed = !list_empty(&link->node);
	list_del_init(&link->node);
	xa_erase_bh(&smr_link_ids, link->id);
	spin_unlock_bh(&smr_links_lock);

	/* DEAD already: no rdma_cm handler builds on the link after this */
	mutex_lock(&link->setup_mutex);
	mutex_unlock(&link->setup_mutex);
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
	 * Reset and detach every connection, each under its sock lock. A sock
	 * already being destroyed detaches itself (smr_conn_destruct()): wait
	 * for it, its buffers come back to the pool freed below.
	 */
	for (;;) {
		struct smr_sock *found = NULL;
		bool dying = false, waited = false;

		spin_lock_bh(&link->lock);
		list_for_each_entry(smr, &link->conns, conn.link_node) {
			if (refcount_inc_not_zero(&smr->sk.sk_refcnt)) {
				found = smr;
				break;
			}
			dying = true;
		}
		if (found) {
			list_del_init(&found->conn.link_node);
			link->nconns--;
			/* no slot comes back any more: the wait list lets go */
			if (found->conn.tx_queued) {
				list_del_init(&found->conn.wait_node);
				link->ntx_wait--;
				found->conn.tx_queued = false;
				waited = true;
			}
		}
		spin_unlock_bh(&link->lock);
		if (found) {
			smr_conn_link_down(found);
			if (waited)
				sock_put(&found->sk);
			sock_put(&found->sk);
		} else if (dying) {
			usleep_range(1000, 2000);
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

/* ---- /proc/net/smr/links ---- */

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
	seq_puts(seq, "ID PEER_ID STATE DEV LOCAL PEER CONNS CREDITS OWED WAITING SQ_FREE\n");
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
		seq_printf(seq, " %u %u %u %u %u\n", link->nconns,
			   link->peer_credits, link->credits_owed,
			   link->ntx_wait, link->sq_free);
		spin_unlock(&link->lock);
	}
	spin_unlock_bh(&smr_links_lock);
	return 0;
}

/*
 * Tokens address a connection on the wire and cursors tell its traffic:
 * only the socket's owner and the namespace's admin read them, as
 * /proc/net/tcp keeps sockets' inodes and uids but no sequence numbers.
 */
static bool smr_seq_may_see(struct seq_file *seq, const struct sock *sk)
{
	const struct cred *reader = seq->file->f_cred;

	return uid_eq(reader->fsuid, READ_ONCE(sk->sk_uid)) ||
	       file_ns_capable(seq->file, sock_net(sk)->user_ns, CAP_NET_ADMIN);
}

/*
 * /proc/net/smr/conns: every connection attached to a link, with its
 * cursors and close state (debugging what holds buffers). Other users'
 * connections show their close state only.
 */
int smr_conns_show(struct seq_file *seq, void *v)
{
	struct smr_link *link;
	struct smr_sock *smr;

	seq_puts(seq, "LINK TOKEN PEER_TOKEN MODE ACTIVE RESET CLOSED FINAL_SENT PEER_FINAL TX_PROD TX_SENT TX_DONE PEER_CONS RX_PROD RX_CONS\n");
	if (!net_eq(seq_file_single_net(seq), &init_net))
		return 0;
	spin_lock_bh(&smr_links_lock);
	list_for_each_entry(link, &smr_links, node) {
		spin_lock(&link->lock);
		list_for_each_entry(smr, &link->conns, conn.link_node) {
			struct smr_conn *c = &smr->conn;

			if (!smr_seq_may_see(seq, &smr->sk)) {
				seq_printf(seq, "%u - - %u %u %u %u %u %u - - - - - -\n",
					   link->id, READ_ONCE(smr->mode),
					   c->active, c->reset, c->user_closed,
					   c->tx_final_sent, c->rx_final);
				continue;
			}
			seq_printf(seq, "%u %016llx %016llx %u %u %u %u %u %u %llu %llu %llu %llu %llu %llu\n",
				   link->id, smr->local_token, smr->peer_token,
				   READ_ONCE(smr->mode), c->active, c->reset,
				   c->user_closed, c->tx_final_sent, c->rx_final,
				   c->tx_prod, c->tx_sent, c->tx_done,
				   c->tx_peer_cons, c->rx_prod, c->rx_cons);
		}
		spin_unlock(&link->lock);
	}
	spin_unlock_bh(&smr_links_lock);
	return 0;
}

/* An RDMA device goes: take its links down before rdma_cm tears it. */
void smr_link_devices_gone(struct ib_device *ibdev)
{
	struct smr_link *link;

	spin_lock_bh(&smr_links_lock);
	list_for_each_entry(link, &smr_links, node)
		if (link->ibdev == ibdev || !ibdev)
			smr_link_down(link);
	spin_unlock_bh(&smr_links_lock);
	flush_workqueue(smr_wq);
}

/* ---- module ---- */

int smr_link_init(void)
{
	struct sockaddr_in6 any = {
		.sin6_family	= AF_INET6,
		.sin6_port	= htons(smr_cm_port),
	};
	struct rdma_cm_id *id;
	int err;

	BUILD_BUG_ON(SMR_LINK_MSG_SIZE < SMR_CDC_MAX_LEN);
	id = rdma_create_id(&init_net, smr_cm_handler, NULL, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	/* one listener for IPv4 and IPv6 peers */
	err = rdma_set_afonly(id, 0);
	if (!err)
		err = rdma_bind_addr(id, (struct sockaddr *)&any);
	if (!err)
		err = rdma_listen(id, 128);
	if (err) {
		pr_err("rdma_cm listener on port %u: %d (choose another with cm_port=)\n",
		       smr_cm_port, err);
		rdma_destroy_id(id);
		return err;
	}
	smr_cm_listener = id;
	return 0;
}

/* No SMR socket has a file left; links may still carry closing ones. */
void smr_link_exit(void)
{
	rdma_destroy_id(smr_cm_listener);
	smr_link_devices_gone(NULL);
	/* links that raced into the list behind the flush */
	while (!list_empty_careful(&smr_links))
		smr_link_devices_gone(NULL);
	xa_destroy(&smr_link_ids);
}
