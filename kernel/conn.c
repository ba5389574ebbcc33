// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: a connection's RDMA objects: its buffers and link from the
 * handshake, whom their memory is charged to, the peer's RMB, its token
 * (how the peer's CDCs name it), and what is left when the sock goes.
 * /proc/net/smr/conns lists them.
 *
 * Charges (buf.c has the limits): a connection's buffers are charged when
 * the handshake takes them, to the uid owning the socket then (recorded,
 * so that the same uid is uncharged whoever owns the socket later) and,
 * for a server child not accepted yet, to its listener's account of
 * unaccepted children under the peer's address (accept() moves them off
 * it); their memory is allocated in the memory cgroup the socket was made
 * in, a child's listener's. All of it ends when the buffers are taken
 * away (smr_conn_take()).
 *
 * The rest of the connection layer builds on this: close.c (the close
 * state machine), tx.c and rx.c (the data path), cdc.c (CDCs and link
 * events in).
 *
 * Locking and lifetimes
 * ---------------------
 * See struct smr_conn (conn.h). The buffers and the link are set and taken
 * away under the SMR sock lock and conn->lock (or by the destructor, when
 * nothing else refers to the sock). Tokens live in a host-wide hash table
 * (smr_token_lock, BH) from the moment they are drawn until the sock is
 * destroyed, which is what keeps them unique on the host; a lookup takes
 * a sock reference unless the sock is already being destroyed.
 * @memcg, @unacc_key and the first @unacc are set before the connection
 * negotiates; @unacc (given up at accept()) and @unacc_charged change
 * under conn->lock. A listener's @children_acct is made under its
 * pull_mutex with its first child and lives as long as its sock.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/lockdep.h>
#include <linux/random.h>
#include <linux/seq_file.h>
#include <linux/seq_file_net.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <rdma/ib_verbs.h>

#include "buf.h"
#include "smr.h"
#include "sysctl.h"

/* the token table: 2^SMR_TOKEN_BITS buckets */
#define SMR_TOKEN_BITS		10

static DEFINE_HASHTABLE(smr_token_table, SMR_TOKEN_BITS);
static DEFINE_SPINLOCK(smr_token_lock);

/*
 * Wake the SMR socket's sleepers for @mask, signalling nobody: what TCP's
 * sk_state_change does (a shutdown of our own). Any context.
 */
void smr_conn_wake_sleepers(struct smr_sock *smr, __poll_t mask)
{
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(smr->sk.sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_poll(&wq->wait, mask);
	rcu_read_unlock();
}

/*
 * Wake the SMR socket's sleepers for @mask, and its O_ASYNC owner for
 * input (data, EOF, a reset), as TCP's data_ready does. Write space
 * signals only from smr_tx_write_space(), where TCP's write_space does:
 * once a send or poll that found no room armed it, never after shutdown.
 * Any context.
 */
void smr_conn_wake(struct smr_sock *smr, __poll_t mask)
{
	smr_conn_wake_sleepers(smr, mask);
	if (mask & (EPOLLIN | EPOLLHUP | EPOLLERR))
		sk_wake_async(&smr->sk, SOCK_WAKE_WAITD, POLL_IN);
}

/*
 * Handshake: the connection will use @link (attached to it, with its
 * reference). Sock lock held.
 */
void smr_conn_set_link(struct smr_sock *smr, struct smr_link *link)
{
	sock_owned_by_me(&smr->sk);
	spin_lock_bh(&smr->conn.lock);
	smr->conn.link = link;
	spin_unlock_bh(&smr->conn.lock);
}

/*
 * The socket's owner for its buffers' memory: the memory cgroup it was
 * made in (sk_memcg, which the socket layer set; NULL outside any). A
 * server child takes its listener's instead (smr_conn_child_init()).
 * Before the socket is visible.
 */
void smr_conn_owner_init(struct smr_sock *smr)
{
	smr->conn.memcg = smr_buf_memcg_hold(smr->sk.sk_memcg);
}

/*
 * A server child from peer address @peer (@v6: an IPv6 peer) of
 * @listener: its buffers are charged to the listener's memory cgroup and,
 * until accept(), to the listener's account of unaccepted children (made
 * with its first child), under this peer's key. Before the child
 * negotiates; caller holds the listener's pull_mutex. 0 or -ENOMEM.
 */
int smr_conn_child_init(struct smr_sock *child, struct smr_sock *listener,
			const struct in6_addr *peer, bool v6)
{
	struct smr_conn *lconn = &listener->conn, *conn = &child->conn;

	lockdep_assert_held(&listener->pull_mutex);
	if (!lconn->children_acct) {
		lconn->children_acct = smr_buf_acct_new();
		if (!lconn->children_acct)
			return -ENOMEM;
	}
	smr_buf_acct_hold(lconn->children_acct);
	conn->unacc = lconn->children_acct;
	smr_buf_acct_peer_key(&conn->unacc_key, peer, v6);
	conn->memcg = smr_buf_memcg_hold(lconn->memcg);
	return 0;
}

/*
 * accept() took @child: its buffers leave the listener's account of
 * unaccepted children (the charge to its owner stays). Process context.
 */
void smr_conn_accepted(struct smr_sock *child)
{
	struct smr_conn *conn = &child->conn;
	struct smr_buf_acct *acct;
	long charged;

	spin_lock_bh(&conn->lock);
	acct = conn->unacc;
	charged = conn->unacc_charged;
	conn->unacc = NULL;
	conn->unacc_charged = 0;
	spin_unlock_bh(&conn->lock);
	if (charged)
		smr_buf_acct_uncharge(acct, &conn->unacc_key, charged);
	smr_buf_acct_put(acct);
}

/*
 * Handshake: buffers for a connection whose link is attached (@link holds
 * the connection's reference). Their bytes are charged first, and the
 * connection records to whom: its owner's uid as it is now (whoever owns
 * the socket later, the same uid is uncharged) and, for a server child,
 * its listener's account of unaccepted children; the memory goes to the
 * connection's memory cgroup. Process context, sock lock held. 0,
 * -ENOBUFS (a limit, counted), -ENOMEM, or the link's error when the
 * buffers could not be registered on it; on error the caller unprepares.
 */
int smr_conn_prepare(struct smr_sock *smr, struct smr_link *link)
{
	struct smr_buf_pool *pool = smr_link_pool(link);
	struct smr_conn *conn = &smr->conn;
	struct smr_buf *rmb, *sndbuf;
	struct smr_buf_acct *unacc;
	u32 rmb_size, snd_size;
	unsigned long deadline;
	long bytes;
	kuid_t uid;
	int err;

	sock_owned_by_me(&smr->sk);
	rmb_size = smr_buf_size_on(pool, smr->local_rmb_size);
	snd_size = smr_buf_size_on(pool, smr_buf_sndbuf_size(smr->tcp->sk));
	if (!rmb_size || !snd_size)
		return -ENOBUFS;
	bytes = (long)rmb_size + snd_size;

	/* one read: the owner may change under us (fchown) */
	uid = READ_ONCE(smr->sk.sk_uid);
	if (smr_buf_charge_user(uid, bytes))
		return -ENOBUFS;
	spin_lock_bh(&conn->lock);
	unacc = conn->unacc;
	spin_unlock_bh(&conn->lock);
	if (unacc && smr_buf_acct_charge(unacc, &conn->unacc_key, bytes)) {
		smr_buf_uncharge_user(uid, bytes);
		return -ENOBUFS;
	}

	/* one handshake step: both registrations share its time */
	deadline = jiffies + msecs_to_jiffies(READ_ONCE(smr_hs_timeout_ms));
	rmb = smr_buf_get(pool, rmb_size, true, conn->memcg, &deadline);
	if (IS_ERR(rmb)) {
		err = PTR_ERR(rmb);
		goto uncharge;
	}
	sndbuf = smr_buf_get(pool, snd_size, false, conn->memcg, &deadline);
	if (IS_ERR(sndbuf)) {
		err = PTR_ERR(sndbuf);
		smr_buf_put(pool, rmb);
		goto uncharge;
	}
	spin_lock_bh(&conn->lock);
	WRITE_ONCE(conn->rmb, rmb);	/* read unlocked: smr_rx_readable() */
	conn->sndbuf = sndbuf;
	conn->user_charged = bytes;
	conn->charged_uid = uid;
	if (unacc)
		conn->unacc_charged = bytes;
	spin_unlock_bh(&conn->lock);
	/* the device may have lowered the size we planned to announce */
	smr->local_rmb_size = rmb->size;
	return 0;

uncharge:
	if (unacc)
		smr_buf_acct_uncharge(unacc, &conn->unacc_key, bytes);
	smr_buf_uncharge_user(uid, bytes);
	return err;
}

/* Our RMB's descriptor, for ACCEPT or CONFIRM. Sock lock held. */
void smr_conn_fill_rmb(struct smr_sock *smr, struct smr_hs_rmb *rmb)
{
	sock_owned_by_me(&smr->sk);
	rmb->addr = smr->conn.rmb->mr->iova;
	rmb->rkey = smr->conn.rmb->mr->rkey;
	rmb->size = smr->conn.rmb->size;
}

/* The peer's RMB is known: we may write. */
void smr_conn_set_peer(struct smr_sock *smr, const struct smr_hs_rmb *rmb)
{
	struct smr_conn *conn = &smr->conn;

	spin_lock_bh(&conn->lock);
	conn->peer_rmb_addr = rmb->addr;
	conn->peer_rmb_rkey = rmb->rkey;
	conn->peer_rmb_size = rmb->size;
	spin_unlock_bh(&conn->lock);
}

/*
 * Take the buffers and link away, and end the charges for them (to the
 * uid and the account recorded when they were taken, never the socket's
 * owner now); caller holds the sock lock or owns the sock (its
 * destructor).
 */
void smr_conn_take(struct smr_sock *smr, struct smr_link **link,
		   struct smr_buf **rmb, struct smr_buf **sndbuf,
		   struct smr_buf **sndbuf_next)
{
	struct smr_conn *conn = &smr->conn;
	struct smr_buf_acct *unacc;
	long charged, unacc_charged;
	kuid_t uid;

	spin_lock_bh(&conn->lock);
	*link = conn->link;
	*rmb = conn->rmb;
	*sndbuf = conn->sndbuf;
	*sndbuf_next = conn->sndbuf_next;
	charged = conn->user_charged;
	uid = conn->charged_uid;
	unacc = conn->unacc;
	unacc_charged = conn->unacc_charged;
	/* accept() may drop the child's reference meanwhile */
	if (unacc_charged)
		smr_buf_acct_hold(unacc);
	conn->link = NULL;
	WRITE_ONCE(conn->rmb, NULL);
	conn->sndbuf = NULL;
	conn->sndbuf_next = NULL;
	conn->user_charged = 0;
	conn->unacc_charged = 0;
	spin_unlock_bh(&conn->lock);
	/* the charges end with the connection's hold on the buffers */
	if (charged)
		smr_buf_uncharge_user(uid, charged);
	if (unacc_charged) {
		smr_buf_acct_uncharge(unacc, &conn->unacc_key, unacc_charged);
		smr_buf_acct_put(unacc);
	}
}

/*
 * Take the buffers and link away (smr_conn_take(), whose caller rules
 * apply) and give them back to the link's pool.
 */
void smr_conn_give_back(struct smr_sock *smr)
{
	struct smr_buf *rmb, *sndbuf, *sndbuf_next;
	struct smr_link *link;

	smr_conn_take(smr, &link, &rmb, &sndbuf, &sndbuf_next);
	if (!link)
		return;
	if (rmb)
		smr_buf_put(smr_link_pool(link), rmb);
	if (sndbuf)
		smr_buf_put(smr_link_pool(link), sndbuf);
	if (sndbuf_next)
		smr_buf_put(smr_link_pool(link), sndbuf_next);
	smr_link_test_stale_key(link, smr->conn.peer_rmb_rkey,
				smr->conn.peer_rmb_size);
	smr_link_detach(link, &smr->conn.link_user);
	smr_link_put(link);
}

/* ---- tokens ---- */

/* Draw a token no live socket on this host holds, and list @smr by it. */
u64 smr_conn_new_token(struct smr_sock *smr)
{
	struct smr_sock *other;
	u64 token;
	bool taken;

	do {
		token = get_random_u64();
		if (!token)
			continue;
		taken = false;
		spin_lock_bh(&smr_token_lock);
		hash_for_each_possible(smr_token_table, other, token_node, token)
			if (other->local_token == token)
				taken = true;
		if (!taken) {
			smr->local_token = token;
			hash_add(smr_token_table, &smr->token_node, token);
		}
		spin_unlock_bh(&smr_token_lock);
	} while (!token || taken);
	return token;
}

/*
 * The socket whose local token is @token, with a reference, unless it is
 * being destroyed (its token leaves the table in its destructor). Any
 * context.
 */
struct smr_sock *smr_conn_lookup_token(u64 token)
{
	struct smr_sock *smr, *found = NULL;

	spin_lock_bh(&smr_token_lock);
	hash_for_each_possible(smr_token_table, smr, token_node, token) {
		if (smr->local_token == token &&
		    refcount_inc_not_zero(&smr->sk.sk_refcnt)) {
			found = smr;
			break;
		}
	}
	spin_unlock_bh(&smr_token_lock);
	return found;
}

/*
 * sk_destruct: nothing refers to the sock any more; its token, buffers,
 * link, account and memory cgroup references go. Any context.
 */
void smr_conn_destruct(struct smr_sock *smr)
{
	if (smr->local_token) {
		spin_lock_bh(&smr_token_lock);
		hash_del(&smr->token_node);
		spin_unlock_bh(&smr_token_lock);
	}
	smr_conn_give_back(smr);
	/* a child never accepted, a listener: their accounts */
	smr_buf_acct_put(smr->conn.unacc);
	smr_buf_acct_put(smr->conn.children_acct);
	smr_buf_memcg_put(smr->conn.memcg);
}

/* ---- /proc/net/smr/conns ---- */

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

/* One line of smr_conns_show(); under the link's lock (not conn->lock). */
static void smr_conn_show(void *arg, u32 link_id, struct smr_link_user *user)
{
	struct smr_sock *smr = container_of(user, struct smr_sock,
					    conn.link_user);
	struct smr_conn *c = &smr->conn;
	struct seq_file *seq = arg;
	bool started = smr_conn_started(c), closed = smr_conn_app_closed(c);
	bool final_sent = READ_ONCE(c->tx_flags) & SMR_CDC_F_CLOSED;
	bool peer_final = READ_ONCE(c->rx_flags) & SMR_CDC_F_CLOSED;

	if (!smr_seq_may_see(seq, &smr->sk)) {
		seq_printf(seq, "%u - - %u %u %u %u %u %u - - - - - -\n",
			   link_id, READ_ONCE(smr->mode), started,
			   smr_conn_is_reset(c), closed, final_sent, peer_final);
		return;
	}
	seq_printf(seq, "%u %016llx %016llx %u %u %u %u %u %u %llu %llu %llu %llu %llu %llu\n",
		   link_id, smr->local_token, smr->peer_token,
		   READ_ONCE(smr->mode), started, smr_conn_is_reset(c), closed,
		   final_sent, peer_final, c->tx_prod, c->tx_sent, c->tx_done,
		   c->tx_peer_cons, READ_ONCE(c->rx_prod),
		   READ_ONCE(c->rx_cons));
}

/*
 * /proc/net/smr/conns: every connection attached to a link, with its
 * cursors and close state (debugging what holds buffers). Other users'
 * connections show their close state only. Racy reads, as /proc/net/tcp.
 */
int smr_conns_show(struct seq_file *seq, void *v)
{
	seq_puts(seq, "LINK TOKEN PEER_TOKEN MODE ACTIVE RESET CLOSED FINAL_SENT PEER_FINAL TX_PROD TX_SENT TX_DONE PEER_CONS RX_PROD RX_CONS\n");
	if (!net_eq(seq_file_single_net(seq), &init_net))
		return 0;
	smr_links_walk_users(smr_conn_show, seq);
	return 0;
}
