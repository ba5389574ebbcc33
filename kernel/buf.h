/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: registered send rings and RMBs (buf.c), pooled per link. Below the
 * links: a pool reaches its link's send queue only through the
 * registration callback the link gave it (smr_buf_pool_init()).
 */
#ifndef _SMR_BUF_H
#define _SMR_BUF_H

#include <linux/list.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/uidgid.h>

struct ib_device;
struct ib_mr;
struct ib_pd;
struct ib_send_wr;
struct sock;

struct smr_buf_pool;

/*
 * Post a memory registration chain (LOCAL_INV and/or REG_MR) on the pool's
 * link and wait for it: 0 or a negative errno. Process context.
 */
typedef int (*smr_buf_post_reg_t)(struct smr_buf_pool *pool,
				  struct ib_send_wr *wr);

struct smr_buf_pool {
	spinlock_t		lock;		/* protects @free, @nfree */
	struct list_head	free;		/* registered, unused buffers */
	unsigned int		nfree;
	struct ib_pd		*pd;		/* set once, before any get */
	smr_buf_post_reg_t	post_reg;	/* the link's, set at init */
};

struct smr_buf {
	struct list_head	node;		/* on the pool's free list */
	void			*cpu;		/* the ring, virtually contiguous */
	u32			size;
	bool			remote;		/* RMB: remote write allowed */
	bool			registered;	/* MR valid: invalidate first */
	struct sg_table		sgt;
	int			nents;		/* DMA-mapped entries */
	struct ib_mr		*mr;
	struct ib_device	*dev;
};

/* a WRITE reads the send ring in at most two pieces (its wrap) */
#define SMR_TX_WRITE_SGES	2

void smr_buf_pool_init(struct smr_buf_pool *pool, smr_buf_post_reg_t post_reg);
void smr_buf_pool_destroy(struct smr_buf_pool *pool);
struct smr_buf *smr_buf_get(struct smr_buf_pool *pool, u32 size, bool remote);
void smr_buf_put(struct smr_buf_pool *pool, struct smr_buf *buf);
void smr_buf_free(struct smr_buf *buf);
u32 smr_buf_size_for(int sockbuf);
u32 smr_buf_sndbuf_size(const struct sock *tsk);
int smr_buf_charge_user(kuid_t uid, long bytes);
void smr_buf_uncharge_user(kuid_t uid, long bytes);
long smr_buf_mem_pinned(void);

#endif /* _SMR_BUF_H */
