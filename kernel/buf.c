// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: send buffers and RMBs (remote memory buffers).
 *
 * A buffer is a virtually contiguous ring (vzalloc) whose pages are
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
 * MR creation. All buffers, pooled ones included, count against
 * net.smr.mem_max (bytes pinned by the module on this host); a connection
 * that would exceed it falls back to TCP (reason no_memory). Pools are
 * freed with their link.
 *
 * Per user: the buffers a connection holds (not the pooled ones, which
 * belong to no one) are charged to its socket's owner (sk_uid; accepted
 * sockets inherit their listener's), bounded by net.smr.mem_user_max, so
 * one user's sockets cannot take the whole of net.smr.mem_max. Over the
 * limit the connection falls back to TCP (reason no_memory).
 *
 * Buffers are registered on their link's queue pair, which belongs to the
 * layer above: the link hands each pool its protection domain and a
 * callback that posts a registration and waits for it.
 *
 * Locking and lifetimes
 * ---------------------
 * pool->lock (BH) protects the free list; @pd and @post_reg are set before
 * the pool is used and never change. A buffer belongs to exactly one
 * connection (smr_conn.sndbuf/rmb) or to one pool. Buffers are freed in
 * process context only (smr_buf_free() sleeps in MR deregistration).
 * smr_users_lock (BH: charges are returned from any context) protects the
 * per-user table; an entry lives while its user has bytes charged.
 */
#include <linux/hashtable.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <rdma/ib_verbs.h>

#include "buf.h"
#include "stats.h"
#include "sysctl.h"
#include "wire.h"

/* bytes of buffers (pooled ones included) on this host: net.smr.mem_max */
static atomic_long_t smr_buf_mem_used = ATOMIC_LONG_INIT(0);

/* per-user charges: a table of 2^SMR_BUF_USERS_BITS buckets */
#define SMR_BUF_USERS_BITS	6

struct smr_user_charge {
	struct hlist_node	node;
	kuid_t			uid;
	long			bytes;
};

static DEFINE_HASHTABLE(smr_users, SMR_BUF_USERS_BITS);
static DEFINE_SPINLOCK(smr_users_lock);

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
		if (!u->bytes) {
			hash_del(&u->node);
			kfree(u);
		}
	}
	spin_unlock_bh(&smr_users_lock);
}

/* Bytes the module has pinned in buffers: /proc/net/smr/stats. */
long smr_buf_mem_pinned(void)
{
	return atomic_long_read(&smr_buf_mem_used);
}

/* @post_reg posts registrations on the pool's link; @pd comes later. */
void smr_buf_pool_init(struct smr_buf_pool *pool, smr_buf_post_reg_t post_reg)
{
	spin_lock_init(&pool->lock);
	INIT_LIST_HEAD(&pool->free);
	pool->nfree = 0;
	pool->pd = NULL;
	pool->post_reg = post_reg;
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
	kfree(buf);
}

static struct smr_buf *smr_buf_alloc(struct ib_pd *pd, u32 size, bool remote)
{
	unsigned int i, npages = size >> PAGE_SHIFT;
	struct page **pages;
	struct smr_buf *buf;
	int err;

	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return NULL;
	buf->size = size;
	buf->remote = remote;
	buf->dev = pd->device;
	atomic_long_add(size, &smr_buf_mem_used);
	buf->cpu = vzalloc(size);
	if (!buf->cpu)
		goto err;

	pages = kvmalloc_array(npages, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		goto err;
	for (i = 0; i < npages; i++)
		pages[i] = vmalloc_to_page(buf->cpu + ((size_t)i << PAGE_SHIFT));
	err = sg_alloc_table_from_pages(&buf->sgt, pages, npages, 0, size,
					GFP_KERNEL);
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
	smr_stat_inc(&init_net, SMR_STAT_BUF_ALLOCATED);
	return buf;

err:
	smr_buf_free(buf);
	return NULL;
}

/*
 * Register @buf under a fresh key: invalidate the old registration first if
 * it had one, so that a key a former peer knew stops working.
 */
static int smr_buf_register(struct smr_buf_pool *pool, struct smr_buf *buf)
{
	struct ib_send_wr inv = {};
	struct ib_reg_wr reg = {};
	int n, err;

	n = ib_map_mr_sg(buf->mr, buf->sgt.sgl, buf->nents, NULL, PAGE_SIZE);
	if (n != buf->nents)
		return n < 0 ? n : -EINVAL;
	/*
	 * Zero-based: the peer addresses the ring by offset, and no kernel
	 * address (rxe and siw map by virtual address) leaves the host.
	 */
	buf->mr->iova = 0;

	if (buf->registered) {
		inv.opcode = IB_WR_LOCAL_INV;
		inv.ex.invalidate_rkey = buf->mr->rkey;
		inv.next = &reg.wr;
	}
	ib_update_fast_reg_key(buf->mr, ib_inc_rkey(buf->mr->rkey));
	reg.wr.opcode = IB_WR_REG_MR;
	reg.mr = buf->mr;
	reg.key = buf->mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE;
	if (buf->remote)
		reg.access |= IB_ACCESS_REMOTE_WRITE;

	err = pool->post_reg(pool, buf->registered ? &inv : &reg.wr);
	if (err) {
		/* the MR's state is unknown now: never reuse it */
		buf->registered = false;
		return err;
	}
	buf->registered = true;
	smr_stat_inc(&init_net, SMR_STAT_BUF_REGISTERED);
	return 0;
}

/*
 * A registered buffer of @size bytes for a connection on the pool's link:
 * from the pool if one fits, else new. Process context. NULL if memory or
 * the module's limit (counted) does not allow it, or the link failed.
 */
struct smr_buf *smr_buf_get(struct smr_buf_pool *pool, u32 size, bool remote)
{
	struct smr_buf *buf = NULL, *b;
	u32 dev_max = smr_buf_dev_max(pool->pd->device);

	if (size > dev_max)
		size = dev_max;
	if (size < SMR_HS_RMB_MIN)
		return NULL;

	spin_lock_bh(&pool->lock);
	list_for_each_entry(b, &pool->free, node) {
		if (b->size == size && b->remote == remote) {
			list_del_init(&b->node);
			pool->nfree--;
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
			smr_buf_pool_destroy(pool);
			if (atomic_long_read(&smr_buf_mem_used) + size >
			    READ_ONCE(smr_buf_mem_max)) {
				smr_stat_inc(&init_net, SMR_STAT_BUF_MEM_LIMIT);
				return NULL;
			}
		}
		buf = smr_buf_alloc(pool->pd, size, remote);
		if (!buf)
			return NULL;
	}
	if (smr_buf_register(pool, buf)) {
		smr_buf_free(buf);
		return NULL;
	}
	return buf;
}

/* Any context: @buf's connection is done with it, and so is the peer. */
void smr_buf_put(struct smr_buf_pool *pool, struct smr_buf *buf)
{
	spin_lock_bh(&pool->lock);
	list_add(&buf->node, &pool->free);
	pool->nfree++;
	spin_unlock_bh(&pool->lock);
}

/* Process context: free every pooled buffer. */
void smr_buf_pool_destroy(struct smr_buf_pool *pool)
{
	struct smr_buf *buf;

	for (;;) {
		spin_lock_bh(&pool->lock);
		buf = list_first_entry_or_null(&pool->free, struct smr_buf,
					       node);
		if (buf) {
			list_del_init(&buf->node);
			pool->nfree--;
		}
		spin_unlock_bh(&pool->lock);
		if (!buf)
			break;
		smr_buf_free(buf);
	}
}
