/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: RDMA links (link.c): one RC queue pair per pair of addresses, its
 * work requests, completions and credits. A link knows its users (the
 * connections on it) only as struct smr_link_user, and reaches them only
 * through the smr_link_ops the connection layer registered at init, as
 * SMC's work-request layer does with its receive handlers.
 */
#ifndef _SMR_LINK_H
#define _SMR_LINK_H

#include <linux/list.h>
#include <linux/types.h>
#include <linux/uidgid.h>

struct ib_device;
struct ib_send_wr;
struct in6_addr;
struct net;
struct seq_file;
struct smr_buf_pool;
struct smr_cdc;
struct smr_link;

enum smr_link_state {
	SMR_LINK_CONNECTING,
	SMR_LINK_ACTIVE,
	SMR_LINK_DEAD,
};

/* What a link's user embeds; every field is under the link's lock. */
struct smr_link_user {
	struct list_head	node;		/* on the link's users, attached */
	struct list_head	wait_node;	/* on its tx_wait list */
	bool			waiting;	/* on tx_wait: holds a reference */
};

/*
 * How a link reaches its users (registered once, smr_link_init()). None
 * is called with the link's lock held unless it says so.
 */
struct smr_link_ops {
	/* a CDC arrived on @link, parsed (@data: its inline bytes); softirq */
	void (*cdc_recv)(struct smr_link *link, const struct smr_cdc *cdc,
			 const u8 *data);
	/* a CDC @user posted completed (@ok), with all before it; softirq */
	void (*cdc_sent)(struct smr_link_user *user, u64 tx_pos, bool ok);
	/* a slot or credit came back after @user found none: push again */
	void (*room)(struct smr_link_user *user);
	/* the link came up; under the link's lock: must not sleep or lock */
	void (*up)(struct smr_link_user *user);
	/* the link is torn down under @user (detached already); process ctx */
	void (*down)(struct smr_link_user *user);
	/* references on the user's owner while a CDC or a wait holds it */
	void (*hold)(struct smr_link_user *user);
	bool (*hold_unless_dying)(struct smr_link_user *user);
	void (*put)(struct smr_link_user *user);
};

int smr_link_init(const struct smr_link_ops *ops);
void smr_link_exit(void);
struct smr_link *smr_link_get(struct smr_link_user *user,
			      const struct net *net, int family,
			      const struct in6_addr *laddr,
			      const struct in6_addr *raddr, kuid_t uid);
struct smr_link *smr_link_find(struct smr_link_user *user, u32 id,
			       const struct net *net,
			       const struct in6_addr *raddr);
bool smr_link_needs_grant(struct smr_link *link, u32 *id, u8 *secret);
int smr_link_granted(struct smr_link *link, u32 id, const u8 *secret);
void smr_link_grant_declined(struct smr_link *link);
int smr_link_grant(const struct net *net, const struct in6_addr *laddr,
		   const struct in6_addr *raddr, const u8 *secret);
void smr_link_detach(struct smr_link *link, struct smr_link_user *user);
void smr_link_hold(struct smr_link *link);
void smr_link_put(struct smr_link *link);
void smr_link_fail(struct smr_link *link, const char *why);
enum smr_link_state smr_link_state(const struct smr_link *link);
u32 smr_link_peer_id(const struct smr_link *link);
struct smr_buf_pool *smr_link_pool(struct smr_link *link);
int smr_link_post_cdc(struct smr_link *link, struct smr_link_user *user,
		      struct ib_send_wr *writes, const struct smr_cdc *cdc,
		      const u8 *data, u64 tx_pos);
void smr_link_devices_gone(struct ib_device *ibdev);
#ifdef SMR_TEST_HOOKS
void smr_link_test_stale_key(struct smr_link *link, u32 rkey, u32 size);
#else
/* The test module's stale writer (test_link_stale_write_ms): none. */
static inline void smr_link_test_stale_key(struct smr_link *link, u32 rkey,
					   u32 size) { }
#endif
int smr_links_show(struct seq_file *seq, void *v);
void smr_links_walk_users(void (*fn)(void *arg, u32 link_id,
				     struct smr_link_user *user),
			  void *arg);

#endif /* _SMR_LINK_H */
