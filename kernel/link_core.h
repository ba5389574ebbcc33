/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: what the link layer's two files share: struct smr_link, its sizes,
 * and link.c's functions that link_cm.c (rdma_cm setup, above it) calls.
 * Nothing outside the link layer includes this.
 */
#ifndef _SMR_LINK_CORE_H
#define _SMR_LINK_CORE_H

#include <linux/in6.h>
#include <linux/jiffies.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/uidgid.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>

#include "buf.h"
#include "link.h"
#include "wire.h"

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
/* message slots: CDC sends, receives, one idle and one credit message */
#define SMR_LINK_MSGS		(SMR_LINK_SLOTS + SMR_LINK_RQ_DEPTH + 2)
/* an idle peer is probed this often: a dead one fails the probe */
#define SMR_LINK_KEEPALIVE	(5 * HZ)
/*
 * Sends outstanding this long with none completed: the peer is gone. Longer
 * than the QP's own retries (7 x 1.07 s), which normally fail it first.
 */
#define SMR_LINK_STALL_TIMEOUT	(10 * HZ)
/*
 * An end that asked whether an idle link may go waits this long for the
 * answer (a live peer answers from its CQ handler), and one that said yes
 * this long for the asker to take the link down; then it goes anyway.
 */
#define SMR_LINK_IDLE_ANSWER_TIMEOUT	(10 * HZ)

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
/*
 * What a host lets its peers build (link_cm.c). Every passive link needs a
 * grant this host made over an SMR handshake (smr_link_grant()); grants
 * live until their link's setup would have failed anyway, and are bounded
 * per peer address (its oldest goes first) and in all (a full table drops
 * a grant at least SMR_LINK_GRANT_MIN_AGE old, of the peer (IPv4 address,
 * IPv6 /64) holding the most: a host filling it from many addresses loses its own first, and to
 * keep it full of grants younger than that must make at least
 * SMR_LINK_GRANTS_MAX of them every SMR_LINK_GRANT_MIN_AGE; a table of
 * younger ones refuses, links_grants_full, and that connection falls back
 * to TCP). Links are bounded in all
 * (both sides: each pins about 300 KB of kernel memory; net.smr.links_max)
 * and, for passive ones, per peer address and together (the peers' share:
 * they never take the places this host's own connects need); ours, by the
 * user whose connect created them (its share: one user's connects to many
 * peers leave the others room; root's are not bounded so). A request
 * past a bound is rejected before anything is allocated.
 */
#define SMR_LINK_GRANTS_PER_PEER	4
#define SMR_LINK_GRANTS_MAX		64
#define SMR_LINK_GRANT_MIN_AGE		HZ	/* evictable from then on */
#define SMR_LINK_GRANT_PEER_PREFIX6	64	/* one IPv6 peer, for eviction */
#define SMR_LINKS_PER_PEER		8
#define SMR_LINKS_PASSIVE_SHARE		2	/* peers': links_max / 2 */
#define SMR_LINKS_USER_SHARE		4	/* one user's: links_max / 4 */
#define SMR_LINK_RETRY_COUNT	6
#define SMR_LINK_RNR_RETRY	6	/* 7 is "for ever"; credits avoid RNR */
#define SMR_LINK_ACK_TIMEOUT	18

/*
 * A CDC's send slot: its fields belong to whoever took it off @free_slots
 * (the post, under the link's @lock) until its completion puts it back;
 * nothing reads them after that (the next post may reuse it at once).
 */
struct smr_cdc_slot {
	struct ib_cqe		cqe;
	struct list_head	node;		/* on free_slots */
	struct smr_link_user	*user;		/* holds its owner while posted */
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

/*
 * One RC queue pair to a peer; see link.c's "Locking and lifetimes" for
 * what each lock covers. @lock: @state, @down, @users, @nusers,
 * @free_slots, @sq_free, @tx_wait, @ntx_wait, @peer_credits,
 * @credits_owed, @credit_msg_posted, @keepalive_posted, the idle
 * agreement's fields (@idle_asked, @idle_agreed: written under it with
 * WRITE_ONCE, lookups read them as a hint) and every user's smr_link_user
 * fields. smr_links_lock: @node. @setup_mutex: the QP's
 * creation, @granted, @route_resolved, @test_grant_late, @authenticated
 * (written; read locklessly once the link is ACTIVE) and @peer_id,
 * @peer_credits, @peer_idle_ask before the link is ACTIVE. The rest is set once during
 * setup and read-only afterwards (@secret, @uid: before the link is
 * listed).
 */
struct smr_link {
	struct kref		ref;
	struct list_head	node;		/* on smr_links until down */
	u32			id;
	u32			peer_id;
	u8			state;		/* enum smr_link_state */
	bool			active_side;	/* we connected */
	/* teardown queued, or (passive, not listed yet) smr_link_accept()'s */
	bool			down;
	/*
	 * Both ends' SMR handshake made this link: ours once the peer's
	 * accept echoed the secret it granted us, the peer's from the
	 * start (its request proved a grant we made). Only such a link
	 * carries connections (see smr_link_trusted()).
	 */
	bool			authenticated;
	bool			granted;	/* ours: the peer granted @secret */
	bool			route_resolved;	/* ours: ready to connect */
#ifdef SMR_TEST_HOOKS
	/*
	 * test (fault_link_grant_late): its connect work takes the grant;
	 * written under @setup_mutex, read once without it by that work
	 */
	bool			test_grant_late;
#endif
	/* ours: the owner of the socket whose connect created it */
	kuid_t			uid;
	/* ours: drawn at creation; the peer's: the one its request proved */
	u8			secret[SMR_LINK_SECRET_LEN];
	/* ours: connects once granted after the route resolved (link_cm.c) */
	struct work_struct	connect_work;
	struct in6_addr		laddr;		/* v4-mapped for IPv4 */
	struct in6_addr		raddr;
	struct rdma_cm_id	*cm_id;
	struct ib_device	*ibdev;
	struct ib_pd		*pd;
	struct ib_cq		*cq;
	struct ib_qp		*qp;
	spinlock_t		lock;		/* see above */
	struct mutex		setup_mutex;	/* see above */
	struct list_head	users;		/* smr_link_user.node */
	unsigned int		nusers;
	struct list_head	free_slots;
	unsigned int		sq_free;
	wait_queue_head_t	reg_wait;	/* registrations: sq_free */
	struct list_head	tx_wait;	/* users waiting for a slot/credit */
	unsigned int		ntx_wait;
	u32			peer_credits;	/* SENDs the peer has receives for */
	u32			credits_owed;	/* receives re-posted, not reported */
	bool			credit_msg_posted;
	struct ib_cqe		credit_cqe;
	u8			*credit_msg;
	u64			credit_dma;
	/*
	 * Idle agreement (link.c, "Idle"): we asked the peer whether the
	 * link may go; we said yes to its asking (it takes the link down);
	 * the answer we owe it (enum smr_lmsg_type, 0: none), sent once a
	 * credit allows; one idle message in flight at a time.
	 */
	bool			idle_asked;
	bool			idle_agreed;
	u8			idle_answer_owed;
	/* jiffies: an idle question's deadline (asked or agreed) */
	unsigned long		idle_deadline;
	/* the peer said no, and no user came since: from when (jiffies) */
	bool			idle_kept;
	unsigned long		idle_kept_since;
	/* unused, but no credit or room to ask: since when (jiffies) */
	bool			idle_ask_waiting;
	unsigned long		idle_ask_wait_since;
	/* the peer's private data had SMR_CM_F_IDLE_ASK: it takes part */
	bool			peer_idle_ask;
	bool			idle_msg_posted;
	struct ib_cqe		idle_cqe;
	u8			*idle_msg;
	u64			idle_dma;
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
	/*
	 * jiffies of the last send completion or of the post that found the
	 * send queue empty, the later (WRITE_ONCE; keepalive reads)
	 */
	unsigned long		send_progress;
	struct work_struct	teardown_work;
	/*
	 * A fatal QP event's work, queued once (bit 0 of @qp_fatal_queued,
	 * atomic); @qp_fatal_event is written before it is queued.
	 */
	unsigned long		qp_fatal_queued;
	enum ib_event_type	qp_fatal_event;
	struct work_struct	qp_fatal_work;
};

extern struct list_head smr_links;
extern spinlock_t smr_links_lock;
extern unsigned int smr_links_count;
extern struct workqueue_struct *smr_link_wq;
extern const struct smr_link_ops *smr_link_user_ops;

/*
 * Faults only the test module has (Kbuild SMR_TEST_HOOKS=1; link.c's
 * module parameters of the same names, each a count of the faults still to
 * come): the link layer's error paths, on demand.
 */
enum smr_link_fault {
	SMR_LINK_FAULT_ACCEPT,	/* a passive link's accept fails, QP built */
	SMR_LINK_FAULT_RECV,	/* a link fails to post half its receives */
	SMR_LINK_FAULT_FIND,	/* a PROPOSAL's link goes, lookup..attach */
	SMR_LINK_FAULT_GRANT_UNUSED, /* granted, our link fails unconnected */
	SMR_LINK_FAULT_GRANT_LATE, /* granted, ours connects when released */
	SMR_LINK_FAULT_POST,	/* a CDC post refused, as a broken QP's is */
	SMR_LINK_FAULTS,
};

/*
 * How the test module takes part in the idle agreement
 * (test_link_idle_peer): as it should, or as a misbehaving peer would.
 */
enum smr_link_idle_peer {
	SMR_LINK_IDLE_PEER_OK,
	SMR_LINK_IDLE_PEER_SILENT,	/* never answers an IDLE */
	SMR_LINK_IDLE_PEER_ASKS_TWICE,	/* a second IDLE, deaf to the answer */
	SMR_LINK_IDLE_PEER_SAYS_NO,	/* answers no, used or not */
	SMR_LINK_IDLE_PEER_NO_FLAG,	/* leaves IDLE_ASK out: an older module */
	SMR_LINK_IDLE_PEER_NO_CREDITS,	/* re-posts receives, reports none */
};

#ifdef SMR_TEST_HOOKS
unsigned long smr_link_time_scaled(unsigned long timeout);
void smr_link_test_send_done_delay(struct smr_cdc_slot *slot, u64 tx_pos);
bool smr_link_test_fault(enum smr_link_fault fault);
int smr_link_test_accept_fails(struct smr_link *link);
void smr_link_test_exit(void);
void smr_link_test_exit_links_gone(void);
enum smr_link_idle_peer smr_link_test_idle_peer(void);
#else
/* A link deadline of @timeout jiffies, as the product keeps it. */
static inline unsigned long smr_link_time_scaled(unsigned long timeout)
{
	return timeout;
}

/* A CDC completion's test delay (test_link_send_done_delay_us): none. */
static inline void smr_link_test_send_done_delay(struct smr_cdc_slot *slot,
						 u64 tx_pos) { }

/* The test module's fault @fault is due now: never in the product. */
static inline bool smr_link_test_fault(enum smr_link_fault fault)
{
	return false;
}

/* Never called in the product (smr_link_test_fault() is false). */
static inline int smr_link_test_accept_fails(struct smr_link *link)
{
	return -EIO;
}

/* The test module's pending faults are done with: none in the product. */
static inline void smr_link_test_exit(void) { }
static inline void smr_link_test_exit_links_gone(void) { }

/* The product always takes part as it should. */
static inline enum smr_link_idle_peer smr_link_test_idle_peer(void)
{
	return SMR_LINK_IDLE_PEER_OK;
}
#endif

/* A link we connect that is not up this long fails. */
static inline unsigned long smr_link_setup_timeout(void)
{
	return smr_link_time_scaled(SMR_LINK_SETUP_TIMEOUT);
}

/* How long an open idle question (or a yes to one) is waited on. */
static inline unsigned long smr_link_idle_answer_timeout(void)
{
	return smr_link_time_scaled(SMR_LINK_IDLE_ANSWER_TIMEOUT);
}

/*
 * A grant lives until its link's setup would have failed anyway: a client
 * whose link is slow to connect still finds it.
 */
static inline unsigned long smr_link_grant_timeout(void)
{
	return smr_link_setup_timeout();
}

struct smr_link *smr_link_alloc(bool active_side, work_func_t connect);
void smr_link_discard(struct smr_link *link);
void smr_link_abandon(struct smr_link *link);
struct smr_link *smr_link_lookup(const struct in6_addr *laddr,
				 const struct in6_addr *raddr);
struct smr_link *smr_link_lookup_id(u32 id);
bool smr_link_id_accepting(u32 id);
/* Whether one more link may be listed, and if not, which bound says no. */
enum smr_link_room {
	SMR_LINK_ROOM,
	SMR_LINK_ROOM_FULL,	/* links_max, or the peer's SMR_LINKS_PER_PEER */
	SMR_LINK_ROOM_SHARE,	/* passive: the peers' share of links_max */
	SMR_LINK_ROOM_USER,	/* ours: its user's share of links_max */
};

enum smr_link_room smr_link_room_passive_locked(const struct in6_addr *raddr);
enum smr_link_room smr_link_room_active_locked(kuid_t uid);
void smr_link_list_add_locked(struct smr_link *link);
enum smr_link_room smr_link_reserve(const struct in6_addr *raddr);
void smr_link_unreserve(void);
void smr_link_list_reserved(struct smr_link *link);
int smr_link_attach(struct smr_link *link, struct smr_link_user *user,
		    bool peer_named);
int smr_link_create_qp(struct smr_link *link, struct rdma_cm_id *id);
void smr_link_free_resources(struct smr_link *link);
void smr_link_set_active(struct smr_link *link);
bool smr_link_down(struct smr_link *link);

#endif /* _SMR_LINK_CORE_H */
