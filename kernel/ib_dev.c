// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the RDMA devices and ports SMR may use, tracked as they come and go.
 *
 * An ib_client learns every RDMA device (soft-RoCE included) when it is
 * registered or when SMR loads, and forgets it when it goes (after the
 * link layer, which registered for that, took its links down); an event
 * handler per device follows its ports going up and down. The list is
 * shown in /proc/net/smr/devices. smr_ib_dev_for_addr() tells whether the
 * netdev that owns an address has an RDMA device.
 *
 * Locking and lifetimes
 * ---------------------
 * smr_ib_lock (mutex) protects smr_ib_devs; entries are added in the
 * client's add() and removed in its remove(), both in process context, and
 * the IB core guarantees the device outlives the client's remove(). Port
 * states are single bytes written by the event handler with WRITE_ONCE and
 * read locklessly. smr_ib_device_gone is set once at init, before the
 * client registers.
 */
#include <linux/inetdevice.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/seq_file.h>
#include <linux/seq_file_net.h>
#include <linux/slab.h>
#include <net/addrconf.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>

#include "ib_dev.h"

struct smr_ib_dev {
	struct list_head	node;
	struct ib_device	*ibdev;
	struct ib_event_handler	event_handler;
	u32			first_port;
	u32			nports;
	u8			port_state[];	/* enum ib_port_state */
};

static LIST_HEAD(smr_ib_devs);
static DEFINE_MUTEX(smr_ib_lock);
static struct ib_client smr_ib_client;
static void (*smr_ib_device_gone)(struct ib_device *ibdev);

static void smr_ib_event(struct ib_event_handler *handler,
			 struct ib_event *event)
{
	struct smr_ib_dev *d = container_of(handler, struct smr_ib_dev,
					    event_handler);
	u32 port = event->element.port_num;
	u8 state;

	switch (event->event) {
	case IB_EVENT_PORT_ACTIVE:
		state = IB_PORT_ACTIVE;
		break;
	case IB_EVENT_PORT_ERR:
		state = IB_PORT_DOWN;
		break;
	default:
		return;
	}
	if (port < d->first_port || port - d->first_port >= d->nports)
		return;
	WRITE_ONCE(d->port_state[port - d->first_port], state);
}

static int smr_ib_add(struct ib_device *ibdev)
{
	u32 first = rdma_start_port(ibdev), last = rdma_end_port(ibdev);
	struct ib_port_attr attr;
	struct smr_ib_dev *d;
	u32 port;

	d = kzalloc(struct_size(d, port_state, last - first + 1), GFP_KERNEL);
	if (!d)
		return -ENOMEM;
	d->ibdev = ibdev;
	d->first_port = first;
	d->nports = last - first + 1;
	for (port = first; port <= last; port++)
		d->port_state[port - first] =
			ib_query_port(ibdev, port, &attr) ? IB_PORT_NOP :
							    attr.state;
	INIT_IB_EVENT_HANDLER(&d->event_handler, ibdev, smr_ib_event);
	ib_register_event_handler(&d->event_handler);
	ib_set_client_data(ibdev, &smr_ib_client, d);
	mutex_lock(&smr_ib_lock);
	list_add_tail(&d->node, &smr_ib_devs);
	mutex_unlock(&smr_ib_lock);
	return 0;
}

static void smr_ib_remove(struct ib_device *ibdev, void *client_data)
{
	struct smr_ib_dev *d = client_data;

	/* before rdma_cm (registered earlier, removed later) lets go of it */
	smr_ib_device_gone(ibdev);
	mutex_lock(&smr_ib_lock);
	list_del(&d->node);
	mutex_unlock(&smr_ib_lock);
	ib_unregister_event_handler(&d->event_handler);
	kfree(d);
}

static struct ib_client smr_ib_client = {
	.name	= "smr",
	.add	= smr_ib_add,
	.remove	= smr_ib_remove,
};

static const char *smr_ib_state_name(u8 state)
{
	switch (state) {
	case IB_PORT_DOWN:
		return "DOWN";
	case IB_PORT_INIT:
		return "INIT";
	case IB_PORT_ARMED:
		return "ARMED";
	case IB_PORT_ACTIVE:
		return "ACTIVE";
	case IB_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER";
	default:
		return "UNKNOWN";
	}
}

/* /proc/net/smr/devices: "DEVICE PORT STATE NETDEV" per port. */
int smr_ib_devices_show(struct seq_file *seq, void *v)
{
	struct smr_ib_dev *d;
	u32 i;

	/* links, hence the devices SMR uses, live in init_net only */
	if (!net_eq(seq_file_single_net(seq), &init_net))
		return 0;
	mutex_lock(&smr_ib_lock);
	list_for_each_entry(d, &smr_ib_devs, node) {
		for (i = 0; i < d->nports; i++) {
			const char *ndev_name = "-";
			struct net_device *ndev;

			ndev = ib_device_get_netdev(d->ibdev, d->first_port + i);
			if (ndev)
				ndev_name = ndev->name;
			seq_printf(seq, "%s %u %s %s\n", dev_name(&d->ibdev->dev),
				   d->first_port + i,
				   smr_ib_state_name(READ_ONCE(d->port_state[i])),
				   ndev_name);
			if (ndev)
				dev_put(ndev);
		}
	}
	mutex_unlock(&smr_ib_lock);
	return 0;
}

/* Is there an RDMA device on the netdev that owns @laddr in @net? */
bool smr_ib_dev_for_addr(struct net *net, int family,
			 const struct in6_addr *laddr)
{
	struct net_device *ndev = NULL;
	struct ib_device *ibdev;

	if (family == AF_INET)
		ndev = ip_dev_find(net, laddr->s6_addr32[3]);
#if IS_ENABLED(CONFIG_IPV6)
	else
		ndev = ipv6_dev_find(net, laddr, NULL);
	if (ndev && family != AF_INET)
		dev_hold(ndev);
#endif
	if (!ndev)
		return false;
	ibdev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	dev_put(ndev);
	if (!ibdev)
		return false;
	ib_device_put(ibdev);
	return true;
}

int smr_ib_init(void (*device_gone)(struct ib_device *ibdev))
{
	smr_ib_device_gone = device_gone;
	return ib_register_client(&smr_ib_client);
}

void smr_ib_exit(void)
{
	ib_unregister_client(&smr_ib_client);
}
