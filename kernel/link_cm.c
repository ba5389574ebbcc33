// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: setting RDMA links up with rdma_cm. The first connection to a peer
 * creates the link, later ones find it (smr_link_get()).
 *
 * The active side resolves the peer's TCP address (rdma_cm picks the RDMA
 * device that routes to it: no configuration), connects to the module's
 * rdma_cm listener on the peer (port cm_port) and learns the peer's link id
 * from the reply's private data (wire.c's smr_cm_priv); the client names
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
 * the teardown destroys the id. Connections racing to a peer with no link
 * find one another's under smr_links_lock. The listener lives from
 * smr_link_init() to smr_link_exit().
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/module.h>
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

/*
 * The peer's private data, checked by the codec; -EPROTO if not SMR's.
 * Caller holds @setup_mutex.
 */
static int smr_link_peer_param(struct smr_link *link,
			       const struct rdma_conn_param *param)
{
	struct smr_cm_priv p;

	lockdep_assert_held(&link->setup_mutex);
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
	/* a link being torn down builds nothing more (see link.c) */
	err = READ_ONCE(link->state) == SMR_LINK_DEAD ? 0 :
	      smr_link_cm_event(link, id, ev);
	mutex_unlock(&link->setup_mutex);
	if (err) {
		smr_stat_inc(&init_net, SMR_STAT_LINKS_FAILED);
		smr_link_down(link);
	}
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
 * The link from @laddr to @raddr (a connection's addresses, v4-mapped for
 * IPv4; @family says which), attached to @user: an existing one, or a new
 * one whose setup has begun. Connections racing to a peer with no link
 * find one another's under smr_links_lock, so they share one. NULL if none
 * can be made. The user holds the returned reference.
 */
struct smr_link *smr_link_get(struct smr_link_user *user,
			      const struct net *net, int family,
			      const struct in6_addr *laddr,
			      const struct in6_addr *raddr)
{
	struct sockaddr_storage src = {}, dst = {};
	struct smr_link *link, *found;
	struct rdma_cm_id *id;
	int err;

	if (!net_eq(net, &init_net))
		return NULL;

	spin_lock_bh(&smr_links_lock);
	found = smr_link_lookup(laddr, raddr);
	spin_unlock_bh(&smr_links_lock);
	if (found) {
		smr_link_attach(found, user);
		return found;
	}

	link = smr_link_alloc(true);
	if (!link)
		return NULL;
	link->laddr = *laddr;
	link->raddr = *raddr;
	smr_link_sockaddrs(family, laddr, raddr, &src, &dst);
	id = rdma_create_id(&init_net, smr_cm_handler, link, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id)) {
		smr_link_discard(link);
		return NULL;
	}
	link->cm_id = id;

	/* listed before it connects: a racing connection waits on it */
	spin_lock_bh(&smr_links_lock);
	found = smr_link_lookup(laddr, raddr);
	if (!found)
		list_add_tail(&link->node, &smr_links);
	spin_unlock_bh(&smr_links_lock);
	if (found) {
		rdma_destroy_id(id);
		smr_link_discard(link);
		smr_link_attach(found, user);
		return found;
	}
	kref_get(&link->ref);		/* the user's */
	smr_link_attach(link, user);
	/* cancelled by the teardown, like the keepalive it becomes */
	queue_delayed_work(smr_link_wq, &link->keepalive_work,
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
 * The server side: the link the client named by our id @id, if it is
 * active, leads to the connection's peer @raddr, and lives in its
 * namespace. Attached to @user with a reference, or NULL.
 */
struct smr_link *smr_link_find(struct smr_link_user *user, u32 id,
			       const struct net *net,
			       const struct in6_addr *raddr)
{
	struct smr_link *link;

	if (!net_eq(net, &init_net))
		return NULL;
	link = smr_link_lookup_id(id);
	if (link && !ipv6_addr_equal(&link->raddr, raddr)) {
		smr_link_put(link);
		link = NULL;
	}
	if (link)
		smr_link_attach(link, user);
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
	smr_link_devices_gone(NULL);
	/* links that raced into the list behind the flush */
	while (!list_empty_careful(&smr_links))
		smr_link_devices_gone(NULL);
	destroy_workqueue(smr_link_wq);
}
