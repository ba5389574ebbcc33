// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: send buffers and RMBs (remote memory buffers), and what their
 * memory is charged to.
 *
 * A buffer is a virtually contiguous ring (vmalloc) whose pages are
 * DMA-mapped once and registered as a fast-registration MR on its link's
 * protection domain: an RMB for remote write (the peer RDMA-WRITEs into it),
 * a send buffer for local access only (our WRITEs read from it). Buffers
 * are sized per socket from SO_RCVBUF / SO_SNDBUF (TCP's defaults and
 * limits apply there), rounded down to a power of two and bounded by
 * net.smr.buf_max and by what the device can register in one MR.
 *
 * A closed connection's buffers go back to its link's pool and are reused
 * by the next connection of the same size and kind; reuse costs one
 * invalidate + register work request pair with a new key (so a stale peer
 * can never write into its successor's ring) and no allocation, mapping or
 * MR creation. A buffer is mapped once, when it is made: some devices
 * (rxe, siw) apply a mapping to the live MR at once, and a former peer may
 * still be writing under the old key until the invalidation runs. A pool
 * keeps at most net.smr.mem_pool_link_max bytes, all pools together
 * net.smr.mem_pool_max; a buffer that does not fit is freed
 * instead (buffers_pool_full), by a work item since puts come from any
 * context. Pools are freed with their link.
 *
 * What bounds the memory (admin guide, "Memory"):
 * - net.smr.mem_max: every buffer, pooled ones included, on this host; a
 *   connection that would exceed it falls back to TCP (reason no_memory),
 *   after its link's pool was emptied.
 * - net.smr.mem_user_max: the buffers a connection holds (not the pooled
 *   ones, which belong to no one) are charged to the uid that owned its
 *   socket when they were taken (accepted sockets inherit their
 *   listener's); the connection records it and gives the charge back to
 *   that uid, whatever the socket's owner is by then (fchown).
 * - a listener's account (struct smr_buf_acct): what its children hold
 *   before accept(), at most net.smr.mem_unaccepted_max in all and
 *   net.smr.mem_unaccepted_peer_max per peer (an IPv4 address, an IPv6
 *   /64), so that peers who never let the application accept cannot take
 *   the memory of other peers' connections; and all listeners' together
 *   at most half of net.smr.mem_max, so that peers with many addresses,
 *   or many listeners, leave this host's own connects and accepted
 *   connections the other half; except that a listener's first
 *   SMR_BUF_UNACCEPTED_FLOOR bytes fit even so (they count in the half),
 *   up to five eighths of mem_max, so that a flood of one listener does
 *   not stop every other one.
 * - the memory cgroup: the ring, its page list and scatterlist are
 *   allocated with __GFP_ACCOUNT in the memory cgroup the connection
 *   names (its socket's sk_memcg; a child's is its listener's), from
 *   whatever context allocates them (the handshake work). Pages keep the
 *   charge of the cgroup they were allocated in, so a pooled buffer is
 *   reused only by connections of that cgroup (buf->memcg). A new buffer
 *   must leave the group, and every group above it, SMR_BUF_MEMCG_HEADROOM
 *   below its memory.max: rings that filled a group to its limit would
 *   leave the next allocation of its tasks (a socket, a page fault) to the
 *   OOM killer; SMR's connections fall back instead.
 *
 * Buffers are registered on their link's queue pair, which belongs to the
 * layer above: the link hands each pool its protection domain and a
 * callback that posts a registration and waits for it.
 *
 * Locking and lifetimes
 * ---------------------
 * pool->lock (BH) protects the free and dying lists; @pd and @post_reg are
 * set before the pool is used and never change. A buffer belongs to
 * exactly one connection (smr_conn.sndbuf/rmb/sndbuf_next), to one pool,
 * or for a moment to a get under way. Buffers are freed in process context
 * only (smr_buf_free() sleeps in MR deregistration): a pool's @free_work
 * frees what it may not keep, and smr_buf_pool_destroy() waits for it. A
 * connection's sock lock keeps its link's pool alive while it gets (the
 * link's teardown takes each connection's sock lock before it destroys
 * the pool); a get made without it (a send ring's growth, tx.c) pins the
 * pool (@pins) from while that lock still held the pool until its buffer
 * is the connection's or back in the pool, and smr_buf_pool_destroy()
 * waits for every pin to go. smr_users_lock (BH: charges are
 * returned from any context) protects the per-user table; an entry lives
 * while its user has bytes charged. An account's lock (BH) protects its
 * peers, each of which lives while it has bytes charged; the account lives
 * while its listener or a child charged to it holds a reference.
 */
#include <linux/hashtable.h>
#include <linux/in6.h>
#include <linux/jhash.h>
#include <linux/log2.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include <linux/refcount.h>
#include <linux/sched/mm.h>
#include <linux/sizes.h>
#include <linux/seq_file.h>
#include <linux/seq_file_net.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/vmalloc.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <rdma/ib_verbs.h>

#include "buf.h"
#include "stats.h"
#include "sysctl.h"
#include "wire.h"

#ifdef SMR_TEST_HOOKS
/*
 * test_buf_maps (read only): how many times a buffer's MR was mapped. A
 * reused buffer must not be mapped again: the attack suite's stale_key
 * case reads it around a reuse.
 */
static atomic_t smr_buf_test_maps = ATOMIC_INIT(0);

static int smr_buf_test_maps_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&smr_buf_test_maps));
}

static const struct kernel_param_ops smr_buf_test_maps_ops = {
	.get	= smr_buf_test_maps_get,
};

module_param_cb(test_buf_maps, &smr_buf_test_maps_ops, NULL, 0444);
MODULE_PARM_DESC(test_buf_maps,
		 "test only: how many times a buffer's MR was mapped");

static void smr_buf_test_mapped(void)
{
	atomic_inc(&smr_buf_test_maps);
}
#else
static inline void smr_buf_test_mapped(void) { }
#endif

/* bytes of buffers (pooled ones included) on this host: net.smr.mem_max */
static atomic_long_t smr_buf_mem_used = ATOMIC_LONG_INIT(0);
/* of those, in pools: net.smr.mem_pool_max */
static atomic_long_t smr_buf_pooled = ATOMIC_LONG_INIT(0);
/* of those, held by children not accepted yet (all listeners) */
static atomic_long_t smr_buf_unaccepted = ATOMIC_LONG_INIT(0);

/* per-user charges: a table of 2^SMR_BUF_USERS_BITS buckets */
#define SMR_BUF_USERS_BITS	6

struct smr_user_charge {
	struct hlist_node	node;
	kuid_t			uid;
	long			bytes;
};

static DEFINE_HASHTABLE(smr_users, SMR_BUF_USERS_BITS);
static DEFINE_SPINLOCK(smr_users_lock);
/* smr_users_lock: the sum of all users' charges */
static long smr_users_charged;

static struct smr_user_charge *smr_user_find(kuid_t uid)
{
	struct smr_user_charge *u;

	hash_for_each_possible(smr_users, u, node, __kuid_val(uid))
		if (uid_eq(u->uid, uid))
			return u;
	return NULL;
}

/*
 * Charge @bytes to @uid if that keeps it within net.smr.mem_user_max.
 * Process context. 0, or -ENOBUFS (counted) / -ENOMEM.
 */
int smr_buf_charge_user(kuid_t uid, long bytes)
{
	struct smr_user_charge *u, *fresh;
	int err = 0;

	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL);
	if (!fresh)
		return -ENOMEM;
	spin_lock_bh(&smr_users_lock);
	u = smr_user_find(uid);
	if (!u) {
		u = fresh;
		fresh = NULL;
		u->uid = uid;
		hash_add(smr_users, &u->node, __kuid_val(uid));
	}
	if (u->bytes + bytes > READ_ONCE(smr_buf_mem_user_max)) {
		err = -ENOBUFS;
		if (!u->bytes) {
			hash_del(&u->node);
			kfree(u);
		}
	} else {
		u->bytes += bytes;
		WRITE_ONCE(smr_users_charged, smr_users_charged + bytes);
	}
	spin_unlock_bh(&smr_users_lock);
	kfree(fresh);
	if (err)
		smr_stat_inc(&init_net, SMR_STAT_BUF_USER_LIMIT);
	return err;
}

/* Give back what smr_buf_charge_user() took. Any context. */
void smr_buf_uncharge_user(kuid_t uid, long bytes)
{
	struct smr_user_charge *u;

	spin_lock_bh(&smr_users_lock);
	u = smr_user_find(uid);
	if (!WARN_ON_ONCE(!u || u->bytes < bytes)) {
		u->bytes -= bytes;
		WRITE_ONCE(smr_users_charged, smr_users_charged - bytes);
		if (!u->bytes) {
			hash_del(&u->node);
			kfree(u);
		}
	}
	spin_unlock_bh(&smr_users_lock);
}

/* ---- a listener's account of its children before accept() ---- */

/* peers per account: a table of 2^SMR_BUF_ACCT_BITS buckets */
#define SMR_BUF_ACCT_BITS	6
/* one IPv6 peer is a /64: whoever has one address has all of them */
#define SMR_BUF_PEER_PREFIX6	64
/* what a listener's unaccepted children may hold past the host's half */
#define SMR_BUF_UNACCEPTED_FLOOR	(2L << 20)

struct smr_buf_acct_peer {
	struct hlist_node	node;
	struct in6_addr		key;	/* smr_buf_acct_peer_key() */
	long			bytes;
};

struct smr_buf_acct {
	refcount_t		ref;
	spinlock_t		lock;	/* BH: @bytes, @peers */
	long			bytes;	/* net.smr.mem_unaccepted_max */
	DECLARE_HASHTABLE(peers, SMR_BUF_ACCT_BITS);
};

/* peers choose their addresses: the bucket is not theirs to choose */
static u32 smr_buf_acct_seed __read_mostly;

/* Process context. NULL if there is no memory. */
struct smr_buf_acct *smr_buf_acct_new(void)
{
	struct smr_buf_acct *acct;

	get_random_once(&smr_buf_acct_seed, sizeof(smr_buf_acct_seed));
	acct = kzalloc(sizeof(*acct), GFP_KERNEL);
	if (!acct)
		return NULL;
	refcount_set(&acct->ref, 1);
	spin_lock_init(&acct->lock);
	hash_init(acct->peers);
	return acct;
}

void smr_buf_acct_hold(struct smr_buf_acct *acct)
{
	refcount_inc(&acct->ref);
}

/* Any context: the last reference frees it (nothing is charged then). */
void smr_buf_acct_put(struct smr_buf_acct *acct)
{
	struct smr_buf_acct_peer *p;
	struct hlist_node *tmp;
	int bkt;

	if (!acct || !refcount_dec_and_test(&acct->ref))
		return;
	WARN_ON_ONCE(acct->bytes);
	hash_for_each_safe(acct->peers, bkt, tmp, p, node)
		kfree(p);
	kfree(acct);
}

/* The peer @addr is charged as: itself (IPv4), its /64 (IPv6). */
void smr_buf_acct_peer_key(struct in6_addr *key, const struct in6_addr *addr,
			   bool v6)
{
	*key = *addr;
	if (v6)
		ipv6_addr_prefix(key, addr, SMR_BUF_PEER_PREFIX6);
}

static u32 smr_buf_acct_hash(const struct in6_addr *key)
{
	return jhash2((const u32 *)key, sizeof(*key) / sizeof(u32),
		      smr_buf_acct_seed);
}

static struct smr_buf_acct_peer *
smr_buf_acct_find(struct smr_buf_acct *acct, const struct in6_addr *key,
		  u32 hash)
{
	struct smr_buf_acct_peer *p;

	lockdep_assert_held(&acct->lock);
	hash_for_each_possible(acct->peers, p, node, hash)
		if (ipv6_addr_equal(&p->key, key))
			return p;
	return NULL;
}

/*
 * Take @bytes of the host's unaccepted share (half of net.smr.mem_max,
 * see above) for an account that holds @held: exact, listeners charge at
 * once; within the account's floor whatever the share holds. False if
 * the share is full.
 */
static bool smr_buf_unaccepted_take(long held, long bytes)
{
	long total = atomic_long_add_return(bytes, &smr_buf_unaccepted);
	long half = READ_ONCE(smr_buf_mem_max) / 2;

	/* floors too are bounded: listeners are anyone's to open */
	if (total <= half || (held + bytes <= SMR_BUF_UNACCEPTED_FLOOR &&
			      total <= half + half / 4))
		return true;
	atomic_long_sub(bytes, &smr_buf_unaccepted);
	return false;
}

/*
 * Charge @bytes to the peer @key of @acct if that keeps the peer within
 * net.smr.mem_unaccepted_peer_max, the account within
 * net.smr.mem_unaccepted_max and all accounts within half of
 * net.smr.mem_max (past the account's floor). Process context. 0, or
 * -ENOBUFS (counted) / -ENOMEM.
 */
int smr_buf_acct_charge(struct smr_buf_acct *acct, const struct in6_addr *key,
			long bytes)
{
	struct smr_buf_acct_peer *p, *fresh;
	u32 hash = smr_buf_acct_hash(key);
	enum smr_stat limit = SMR_STAT_MAX;

	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL);
	if (!fresh)
		return -ENOMEM;
	spin_lock_bh(&acct->lock);
	p = smr_buf_acct_find(acct, key, hash);
	if ((p ? p->bytes : 0) + bytes >
	    READ_ONCE(smr_buf_mem_unaccepted_peer_max)) {
		limit = SMR_STAT_BUF_UNACCEPTED_PEER_LIMIT;
	} else if (acct->bytes + bytes > READ_ONCE(smr_buf_mem_unaccepted_max)) {
		limit = SMR_STAT_BUF_UNACCEPTED_LIMIT;
	} else if (!smr_buf_unaccepted_take(acct->bytes, bytes)) {
		limit = SMR_STAT_BUF_UNACCEPTED_HOST_LIMIT;
	} else {
		if (!p) {
			p = fresh;
			fresh = NULL;
			p->key = *key;
			hash_add(acct->peers, &p->node, hash);
		}
		p->bytes += bytes;
		acct->bytes += bytes;
	}
	spin_unlock_bh(&acct->lock);
	kfree(fresh);
	if (limit == SMR_STAT_MAX)
		return 0;
	smr_stat_inc(&init_net, limit);
	return -ENOBUFS;
}

/* Give back what smr_buf_acct_charge() took. Any context. */
void smr_buf_acct_uncharge(struct smr_buf_acct *acct,
			   const struct in6_addr *key, long bytes)
{
	struct smr_buf_acct_peer *p;

	spin_lock_bh(&acct->lock);
	p = smr_buf_acct_find(acct, key, smr_buf_acct_hash(key));
	if (!WARN_ON_ONCE(!p || p->bytes < bytes || acct->bytes < bytes)) {
		p->bytes -= bytes;
		acct->bytes -= bytes;
		atomic_long_sub(bytes, &smr_buf_unaccepted);
		if (!p->bytes) {
			hash_del(&p->node);
			kfree(p);
		}
	}
	spin_unlock_bh(&acct->lock);
}

/* ---- memory cgroups ---- */

/* what a new buffer leaves free below its memory cgroups' limits */
#define SMR_BUF_MEMCG_HEADROOM	SZ_1M

/* Room for @size more bytes in @memcg and above, with the headroom. */
static bool smr_buf_memcg_room(struct mem_cgroup *memcg, u32 size)
{
#ifdef CONFIG_MEMCG
	unsigned long want = (size + SMR_BUF_MEMCG_HEADROOM) >> PAGE_SHIFT;

	/* the connection's reference keeps @memcg and its ancestors */
	for (; memcg; memcg = parent_mem_cgroup(memcg))
		if (page_counter_read(&memcg->memory) + want >
		    READ_ONCE(memcg->memory.max))
			return false;
#endif
	return true;
}

/* A reference on @memcg for a connection's life (NULL: none). */
struct mem_cgroup *smr_buf_memcg_hold(struct mem_cgroup *memcg)
{
#ifdef CONFIG_MEMCG
	if (memcg)
		css_get(&memcg->css);
#endif
	return memcg;
}

void smr_buf_memcg_put(struct mem_cgroup *memcg)
{
	mem_cgroup_put(memcg);
}

/* ---- what /proc/net/smr/stats shows of the buffers ---- */

/* Bytes the module has pinned in buffers. */
static long smr_buf_mem_pinned(void)
{
	return atomic_long_read(&smr_buf_mem_used);
}

/*
 * Host-wide gauges: pinned (all buffers), pooled (of those, unused),
 * charged (to users: held by connections), unaccepted (of those, by
 * listeners' children not accepted yet).
 */
void smr_buf_show(struct seq_file *seq)
{
	seq_printf(seq, "buffer_bytes_pinned %ld\n", smr_buf_mem_pinned());
	seq_printf(seq, "buffer_bytes_pooled %ld\n",
		   atomic_long_read(&smr_buf_pooled));
	seq_printf(seq, "buffer_bytes_charged %ld\n",
		   READ_ONCE(smr_users_charged));
	seq_printf(seq, "buffer_bytes_unaccepted %ld\n",
		   atomic_long_read(&smr_buf_unaccepted));
}

/*
 * /proc/net/smr/users: what each user's connections hold, "UID BYTES" a
 * line (uids as the reader's namespace maps them). Charges are host-wide:
 * listed in the initial network namespace only, as the links are.
 */
int smr_buf_users_show(struct seq_file *seq, void *v)
{
	struct smr_user_charge *u;
	int bkt;

	seq_puts(seq, "UID BYTES\n");
	if (!net_eq(seq_file_single_net(seq), &init_net))
		return 0;
	spin_lock_bh(&smr_users_lock);
	hash_for_each(smr_users, bkt, u, node)
		seq_printf(seq, "%u %ld\n",
			   from_kuid_munged(seq_user_ns(seq), u->uid), u->bytes);
	spin_unlock_bh(&smr_users_lock);
	return 0;
}

/* ---- buffers and pools ---- */

static void smr_buf_pool_free_work(struct work_struct *work);

/* @post_reg posts registrations on the pool's link; @pd comes later. */
void smr_buf_pool_init(struct smr_buf_pool *pool, smr_buf_post_reg_t post_reg)
{
	spin_lock_init(&pool->lock);
	INIT_LIST_HEAD(&pool->free);
	pool->nfree = 0;
	pool->bytes = 0;
	INIT_LIST_HEAD(&pool->dying);
	INIT_WORK(&pool->free_work, smr_buf_pool_free_work);
	pool->pd = NULL;
	pool->post_reg = post_reg;
	atomic_set(&pool->pins, 0);
	init_waitqueue_head(&pool->unpinned);
}

/* A power of two in [SMR_HS_RMB_MIN, net.smr.buf_max] near @sockbuf. */
u32 smr_buf_size_for(int sockbuf)
{
	u32 max = clamp_t(u32, READ_ONCE(smr_buf_max), SMR_HS_RMB_MIN,
			  SMR_HS_RMB_MAX);
	u32 size = clamp_t(u32, sockbuf > 0 ? sockbuf : 0, SMR_HS_RMB_MIN,
			   max);

	return rounddown_pow_of_two(size);
}

/*
 * The send buffer for a connection over inner TCP sock @tsk: SO_SNDBUF if
 * the application set it, else TCP's current one but at least net.smr.wmem.
 * (sk_userlocks is a bit-field before 6.2: no READ_ONCE; it is set before
 * the connection exists.)
 */
u32 smr_buf_sndbuf_size(const struct sock *tsk)
{
	int size = READ_ONCE(tsk->sk_sndbuf);

	if (!(tsk->sk_userlocks & SOCK_SNDBUF_LOCK))
		size = max(size, READ_ONCE(smr_buf_wmem));
	return smr_buf_size_for(size);
}

/* Largest buffer one MR of @dev can map. */
static u32 smr_buf_dev_max(struct ib_device *dev)
{
	u64 max = (u64)dev->attrs.max_fast_reg_page_list_len << PAGE_SHIFT;

	return max > SMR_HS_RMB_MAX ? SMR_HS_RMB_MAX :
	       max ? rounddown_pow_of_two((u32)max) : 0;
}

/*
 * The size smr_buf_get() gives for @size on the pool's device (at most
 * what one MR maps), or 0 if the device cannot map the least buffer.
 */
u32 smr_buf_size_on(struct smr_buf_pool *pool, u32 size)
{
	u32 dev_max = smr_buf_dev_max(pool->pd->device);

	if (size > dev_max)
		size = dev_max;
	return size < SMR_HS_RMB_MIN ? 0 : size;
}

void smr_buf_free(struct smr_buf *buf)
{
	if (buf->mr)
		ib_dereg_mr(buf->mr);
	if (buf->nents)
		ib_dma_unmap_sg(buf->dev, buf->sgt.sgl, buf->sgt.orig_nents,
				DMA_BIDIRECTIONAL);
	sg_free_table(&buf->sgt);
	vfree(buf->cpu);
	atomic_long_sub(buf->size, &smr_buf_mem_used);
	smr_buf_memcg_put(buf->memcg);
	kfree(buf);
}

/*
 * The allocations of a new buffer, charged (__GFP_ACCOUNT) to the memory
 * cgroup the caller made the active one. The MR is the driver's. A group
 * at its limit fails them (__GFP_RETRY_MAYFAIL) and the connection falls
 * back, no_memory: a peer's connections must never make the memory
 * cgroup OOM-kill one of the listener's tasks.
 */
#define SMR_BUF_GFP	(GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

static struct smr_buf *smr_buf_alloc_charged(struct ib_pd *pd, u32 size,
					     bool remote)
{
	unsigned int i, npages = size >> PAGE_SHIFT;
	struct page **pages;
	struct smr_buf *buf;
	int err;

	buf = kzalloc(sizeof(*buf), SMR_BUF_GFP);
	if (!buf)
		return NULL;
	buf->size = size;
	buf->remote = remote;
	buf->dev = pd->device;
	atomic_long_add(size, &smr_buf_mem_used);
	buf->cpu = __vmalloc(size, SMR_BUF_GFP | __GFP_ZERO);
	if (!buf->cpu)
		goto err;

	pages = kvmalloc_array(npages, sizeof(*pages), SMR_BUF_GFP);
	if (!pages)
		goto err;
	for (i = 0; i < npages; i++)
		pages[i] = vmalloc_to_page(buf->cpu + ((size_t)i << PAGE_SHIFT));
	err = sg_alloc_table_from_pages(&buf->sgt, pages, npages, 0, size,
					SMR_BUF_GFP);
	kvfree(pages);
	if (err)
		goto err;
	buf->nents = ib_dma_map_sg(buf->dev, buf->sgt.sgl, buf->sgt.orig_nents,
				   DMA_BIDIRECTIONAL);
	if (buf->nents <= 0) {
		buf->nents = 0;
		goto err;
	}
	buf->mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(buf->mr)) {
		buf->mr = NULL;
		goto err;
	}
	/*
	 * Mapped once, for the buffer's life: every registration after this
	 * one only changes the key. A device may apply a mapping the moment
	 * it is made (rxe rewrites a live MR's page list and address), and a
	 * former peer may still be writing under the old key then.
	 */
	smr_buf_test_mapped();
	if (ib_map_mr_sg(buf->mr, buf->sgt.sgl, buf->nents, NULL,
			 PAGE_SIZE) != buf->nents)
		goto err;
	/*
	 * Zero-based: the peer addresses the ring by offset, and no kernel
	 * address (rxe and siw map by virtual address) leaves the host.
	 */
	buf->mr->iova = 0;
	smr_stat_inc(&init_net, SMR_STAT_BUF_ALLOCATED);
	return buf;

err:
	smr_buf_free(buf);
	return NULL;
}

/*
 * A new buffer, its memory charged to @memcg (NULL: the current task's).
 * The caller may be a work item of the module's: without naming it, the
 * charge would go to the worker's cgroup, i.e. nowhere.
 */
static struct smr_buf *smr_buf_alloc(struct ib_pd *pd, u32 size, bool remote,
				     struct mem_cgroup *memcg)
{
	struct mem_cgroup *old;
	struct smr_buf *buf;

	if (!memcg)
		return smr_buf_alloc_charged(pd, size, remote);
	old = set_active_memcg(memcg);
	buf = smr_buf_alloc_charged(pd, size, remote);
	set_active_memcg(old);
	if (buf)
		buf->memcg = smr_buf_memcg_hold(memcg);
	return buf;
}

/*
 * Register @buf under a fresh key, invalidating the old one in the same
 * post, so that a key a former peer knew stops working. The mapping stays
 * as smr_buf_alloc_charged() made it.
 *
 * A new buffer's MR is invalidated too, although it never had a key: rxe
 * runs a local operation again when it retransmits a request posted before
 * it (its retry restarts at the oldest request not yet acknowledged, local
 * ones included), and a second REG_MR of a valid MR fails the whole QP. rxe
 * runs a LOCAL_INV only once every request before it completed, so the
 * pair never sits behind an unacknowledged one (rxe's fence since 6.0).
 * Invalidating a free MR leaves it free (rxe checks its key, siw its index).
 */
static int smr_buf_register(struct smr_buf_pool *pool, struct smr_buf *buf,
			    const unsigned long *deadline)
{
	struct ib_send_wr inv = {};
	struct ib_reg_wr reg = {};
	int err;

	inv.opcode = IB_WR_LOCAL_INV;
	inv.ex.invalidate_rkey = buf->mr->rkey;
	inv.next = &reg.wr;
	ib_update_fast_reg_key(buf->mr, ib_inc_rkey(buf->mr->rkey));
	reg.wr.opcode = IB_WR_REG_MR;
	reg.mr = buf->mr;
	reg.key = buf->mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE;
	if (buf->remote)
		reg.access |= IB_ACCESS_REMOTE_WRITE;

	err = pool->post_reg(pool, &inv, deadline);
	if (err) {
		/* the MR's state is unknown now: never reuse it */
		buf->registered = false;
		return err;
	}
	buf->registered = true;
	smr_stat_inc(&init_net, SMR_STAT_BUF_REGISTERED);
	return 0;
}

/* Take @buf off the pool's free list. Caller holds pool->lock. */
static void smr_buf_unpool_locked(struct smr_buf_pool *pool,
				  struct smr_buf *buf)
{
	lockdep_assert_held(&pool->lock);
	list_del_init(&buf->node);
	pool->nfree--;
	pool->bytes -= buf->size;
	atomic_long_sub(buf->size, &smr_buf_pooled);
}

/*
 * Process context: free every buffer on @list, the pool's free list or its
 * dying list (those smr_buf_put() could not keep).
 */
static void smr_buf_pool_free_list(struct smr_buf_pool *pool,
				   struct list_head *list)
{
	struct smr_buf *buf;

	for (;;) {
		spin_lock_bh(&pool->lock);
		buf = list_first_entry_or_null(list, struct smr_buf, node);
		if (buf && list == &pool->free)
			smr_buf_unpool_locked(pool, buf);
		else if (buf)
			list_del_init(&buf->node);
		spin_unlock_bh(&pool->lock);
		if (!buf)
			break;
		smr_buf_free(buf);
	}
}

/*
 * Process context: net.smr.mem_max is reached, so pooled buffers of other
 * sizes give way to a new one, and those still waiting for the free work
 * (they count as used until freed) go now.
 */
static void smr_buf_pool_drain(struct smr_buf_pool *pool)
{
	smr_buf_pool_free_list(pool, &pool->dying);
	smr_buf_pool_free_list(pool, &pool->free);
}

static void smr_buf_pool_free_work(struct work_struct *work)
{
	struct smr_buf_pool *pool = container_of(work, struct smr_buf_pool,
						 free_work);

	smr_buf_pool_free_list(pool, &pool->dying);
}

/*
 * A registered buffer of @size bytes for a connection on the pool's link:
 * from the pool if one fits, else new, its memory charged to @memcg
 * (NULL: the current task's); its registration waits for room on the
 * link until *@deadline (NULL: not at all). Process context.
 * ERR_PTR(-ENOBUFS) past a limit (counted) or what the device registers,
 * -ENOMEM without memory or when the device cannot map the buffer, or the
 * link's error when the registration failed (counted: the link is down or
 * had no room in time).
 */
struct smr_buf *smr_buf_get(struct smr_buf_pool *pool, u32 size, bool remote,
			    struct mem_cgroup *memcg,
			    const unsigned long *deadline)
{
	struct smr_buf *buf = NULL, *b;
	int err;

	size = smr_buf_size_on(pool, size);
	if (!size)
		return ERR_PTR(-ENOBUFS);

	spin_lock_bh(&pool->lock);
	list_for_each_entry(b, &pool->free, node) {
		if (b->size == size && b->remote == remote &&
		    b->memcg == memcg) {
			smr_buf_unpool_locked(pool, b);
			buf = b;
			break;
		}
	}
	spin_unlock_bh(&pool->lock);

	if (buf) {
		smr_stat_inc(&init_net, SMR_STAT_BUF_REUSED);
		/*
		 * A send buffer's key is for local access and never left this
		 * host: it stays registered. An RMB's key went to a peer and
		 * is replaced below.
		 */
		if (!remote && buf->registered)
			return buf;
	} else {
		if (atomic_long_read(&smr_buf_mem_used) + size >
		    READ_ONCE(smr_buf_mem_max)) {
			/* pooled buffers of other sizes give way first */
			smr_buf_pool_drain(pool);
			if (atomic_long_read(&smr_buf_mem_used) + size >
			    READ_ONCE(smr_buf_mem_max)) {
				smr_stat_inc(&init_net, SMR_STAT_BUF_MEM_LIMIT);
				return ERR_PTR(-ENOBUFS);
			}
		}
		if (!smr_buf_memcg_room(memcg, size)) {
			smr_stat_inc(&init_net, SMR_STAT_BUF_MEMCG_LIMIT);
			return ERR_PTR(-ENOBUFS);
		}
		buf = smr_buf_alloc(pool->pd, size, remote, memcg);
		if (!buf)
			return ERR_PTR(-ENOMEM);
	}
	err = smr_buf_register(pool, buf, deadline);
	if (err) {
		smr_stat_inc(&init_net, SMR_STAT_BUF_REGISTER_FAILED);
		smr_buf_free(buf);
		return ERR_PTR(err);
	}
	return buf;
}

/*
 * Any context: @buf's connection is done with it, and so is the peer. The
 * pool keeps it if the pool's and all pools' bounds allow; else it is
 * freed (by the pool's work: freeing sleeps).
 */
void smr_buf_put(struct smr_buf_pool *pool, struct smr_buf *buf)
{
	bool keep = false;

	spin_lock_bh(&pool->lock);
	if (pool->bytes + buf->size <= READ_ONCE(smr_buf_mem_pool_link_max)) {
		keep = atomic_long_add_return(buf->size, &smr_buf_pooled) <=
		       READ_ONCE(smr_buf_mem_pool_max);
		if (!keep)
			atomic_long_sub(buf->size, &smr_buf_pooled);
	}
	if (keep) {
		list_add(&buf->node, &pool->free);
		pool->nfree++;
		pool->bytes += buf->size;
	} else {
		list_add_tail(&buf->node, &pool->dying);
	}
	spin_unlock_bh(&pool->lock);
	if (!keep) {
		smr_stat_inc(&init_net, SMR_STAT_BUF_POOL_FULL);
		queue_work(system_wq, &pool->free_work);
	}
}

/*
 * Any context: a get that does not run under its connection's sock lock
 * is about to start (see "Locking and lifetimes"). The caller holds that
 * lock now, with the connection still on the pool's link.
 */
void smr_buf_pool_pin(struct smr_buf_pool *pool)
{
	atomic_inc(&pool->pins);
}

/*
 * Any context: that get's buffer is its connection's or back in the pool.
 * The caller keeps the pool's link referenced past this call: the teardown
 * may free the pool as soon as the count drops.
 */
void smr_buf_pool_unpin(struct smr_buf_pool *pool)
{
	if (atomic_dec_and_test(&pool->pins))
		wake_up_all(&pool->unpinned);
}

/*
 * Process context, the pool's link going: free every buffer it has (no
 * connection puts one back any more) once no pinned get is under way
 * (the link is down: a registration fails at once, one posted before is
 * flushed) and its work is done with its own.
 */
void smr_buf_pool_destroy(struct smr_buf_pool *pool)
{
	wait_event(pool->unpinned, !atomic_read(&pool->pins));
	flush_work(&pool->free_work);
	smr_buf_pool_drain(pool);
}
