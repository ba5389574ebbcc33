/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: registered send rings and RMBs (buf.c), pooled per link, and what
 * their memory is charged to: net.smr.mem_max, the socket owner's uid, a
 * listener's account of its unaccepted children, the memory cgroup. Below
 * the links: a pool reaches its link's send queue only through the
 * registration callback the link gave it (smr_buf_pool_init()).
 */
#ifndef _SMR_BUF_H
#define _SMR_BUF_H

#include <linux/list.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/uidgid.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

struct ib_device;
struct ib_mr;
struct ib_pd;
struct ib_send_wr;
struct in6_addr;
struct mem_cgroup;
struct seq_file;
struct sock;

struct smr_buf_pool;
struct smr_buf_acct;

/*
 * Post a memory registration chain (LOCAL_INV and/or REG_MR) on the pool's
 * link and wait for it: 0 or a negative errno (-ETIMEDOUT: no room on the
 * link by *@deadline, in jiffies; none at once if @deadline is NULL).
 * Process context.
 */
typedef int (*smr_buf_post_reg_t)(struct smr_buf_pool *pool,
				  struct ib_send_wr *wr,
				  const unsigned long *deadline);

struct smr_buf_pool {
	spinlock_t		lock;		/* BH: @free, @nfree, @bytes, @dying */
	struct list_head	free;		/* registered, unused buffers */
	unsigned int		nfree;
	long			bytes;		/* of @free: net.smr.mem_pool_link_max */
	struct list_head	dying;		/* not pooled: @free_work frees them */
	struct work_struct	free_work;
	struct ib_pd		*pd;		/* set once, before any get */
	smr_buf_post_reg_t	post_reg;	/* the link's, set at init */
	atomic_t		pins;		/* gets no sock lock orders */
	wait_queue_head_t	unpinned;	/* destroy waits for @pins 0 */
};

struct smr_buf {
	struct list_head	node;		/* on the pool's free or dying list */
	void			*cpu;		/* the ring, virtually contiguous */
	u32			size;
	bool			remote;		/* RMB: remote write allowed */
	bool			registered;	/* MR valid under its key */
	struct sg_table		sgt;
	int			nents;		/* DMA-mapped entries */
	struct ib_mr		*mr;
	struct ib_device	*dev;
	/*
	 * the memory cgroup its memory is charged to (a reference; NULL:
	 * none named): reused only by connections of the same group, so
	 * that no group holds another's connections' memory
	 */
	struct mem_cgroup	*memcg;
};

/* a WRITE reads the send ring in at most two pieces (its wrap) */
#define SMR_TX_WRITE_SGES	2

void smr_buf_pool_init(struct smr_buf_pool *pool, smr_buf_post_reg_t post_reg);
void smr_buf_pool_destroy(struct smr_buf_pool *pool);
u32 smr_buf_size_on(struct smr_buf_pool *pool, u32 size);
struct smr_buf *smr_buf_get(struct smr_buf_pool *pool, u32 size, bool remote,
			    struct mem_cgroup *memcg,
			    const unsigned long *deadline);
void smr_buf_put(struct smr_buf_pool *pool, struct smr_buf *buf);
void smr_buf_pool_pin(struct smr_buf_pool *pool);
void smr_buf_pool_unpin(struct smr_buf_pool *pool);
void smr_buf_free(struct smr_buf *buf);
u32 smr_buf_size_for(int sockbuf);
u32 smr_buf_sndbuf_size(const struct sock *tsk);
int smr_buf_charge_user(kuid_t uid, long bytes);
void smr_buf_uncharge_user(kuid_t uid, long bytes);
void smr_buf_show(struct seq_file *seq);
int smr_buf_users_show(struct seq_file *seq, void *v);

/* memory cgroups: a reference on @memcg (NULL: none), and its end */
struct mem_cgroup *smr_buf_memcg_hold(struct mem_cgroup *memcg);
void smr_buf_memcg_put(struct mem_cgroup *memcg);

/* a listener's account of its unaccepted children's buffers, by peer */
struct smr_buf_acct *smr_buf_acct_new(void);
void smr_buf_acct_hold(struct smr_buf_acct *acct);
void smr_buf_acct_put(struct smr_buf_acct *acct);
void smr_buf_acct_peer_key(struct in6_addr *key, const struct in6_addr *addr,
			   bool v6);
int smr_buf_acct_charge(struct smr_buf_acct *acct, const struct in6_addr *key,
			long bytes);
void smr_buf_acct_uncharge(struct smr_buf_acct *acct,
			   const struct in6_addr *key, long bytes);

#endif /* _SMR_BUF_H */
