// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: a connection's RDMA objects: its buffers and link from the
 * handshake, the peer's RMB, its token (how the peer's CDCs name it), and
 * what is left when the sock goes. /proc/net/smr/conns lists them.
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
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/random.h>
#include <linux/seq_file.h>
#include <linux/seq_file_net.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <rdma/ib_verbs.h>

#include "buf.h"
#include "smr.h"

/* the token table: 2^SMR_TOKEN_BITS buckets */
#define SMR_TOKEN_BITS		10

static DEFINE_HASHTABLE(smr_token_table, SMR_TOKEN_BITS);
static DEFINE_SPINLOCK(smr_token_lock);

/* Wake the SMR socket's waiters and async owners for @mask. Any context. */
void smr_conn_wake(struct smr_sock *smr, __poll_t mask)
{
	struct sock *sk = &smr->sk;
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_poll(&wq->wait, mask);
	rcu_read_unlock();
	if (mask & (EPOLLIN | EPOLLHUP | EPOLLERR))
		sk_wake_async(sk, SOCK_WAKE_WAITD, POLL_IN);
	if (mask & EPOLLOUT)
		sk_wake_async(sk, SOCK_WAKE_SPACE, POLL_OUT);
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
 * Handshake: buffers for a connection whose link is attached (@link holds
 * the connection's reference). Process context, sock lock held. 0 or
 * -ENOBUFS; on error the caller unprepares.
 */
int smr_conn_prepare(struct smr_sock *smr, struct smr_link *link)
{
	struct smr_buf_pool *pool = smr_link_pool(link);
	struct smr_conn *conn = &smr->conn;
	struct smr_buf *rmb, *sndbuf;

	sock_owned_by_me(&smr->sk);
	rmb = smr_buf_get(pool, smr->local_rmb_size, true);
	if (!rmb)
		return -ENOBUFS;
	sndbuf = smr_buf_get(pool, smr_buf_sndbuf_size(smr->tcp->sk), false);
	if (!sndbuf) {
		smr_buf_put(pool, rmb);
		return -ENOBUFS;
	}
	if (smr_buf_charge_user(smr->sk.sk_uid, rmb->size + sndbuf->size)) {
		smr_buf_put(pool, sndbuf);
		smr_buf_put(pool, rmb);
		return -ENOBUFS;
	}
	spin_lock_bh(&conn->lock);
	conn->rmb = rmb;
	conn->sndbuf = sndbuf;
	conn->user_charged = rmb->size + sndbuf->size;
	conn->charged_uid = smr->sk.sk_uid;
	spin_unlock_bh(&conn->lock);
	/* the device may have lowered the size we planned to announce */
	smr->local_rmb_size = rmb->size;
	return 0;
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
 * Take the buffers and link away, and end the user's charge for them;
 * caller holds the sock lock or owns the sock (its destructor).
 */
void smr_conn_take(struct smr_sock *smr, struct smr_link **link,
		   struct smr_buf **rmb, struct smr_buf **sndbuf)
{
	struct smr_conn *conn = &smr->conn;
	kuid_t uid;
	long charged;

	spin_lock_bh(&conn->lock);
	*link = conn->link;
	*rmb = conn->rmb;
	*sndbuf = conn->sndbuf;
	charged = conn->user_charged;
	uid = conn->charged_uid;
	conn->link = NULL;
	conn->rmb = NULL;
	conn->sndbuf = NULL;
	conn->user_charged = 0;
	spin_unlock_bh(&conn->lock);
	/* the user's charge ends with the connection's hold on the buffers */
	if (charged)
		smr_buf_uncharge_user(uid, charged);
}

/* Give what smr_conn_take() took back to the link's pool. Any context. */
void smr_conn_release_link(struct smr_sock *smr, struct smr_link *link,
			   struct smr_buf *rmb, struct smr_buf *sndbuf)
{
	if (!link)
		return;
	if (rmb)
		smr_buf_put(smr_link_pool(link), rmb);
	if (sndbuf)
		smr_buf_put(smr_link_pool(link), sndbuf);
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
 * sk_destruct: nothing refers to the sock any more; its token, buffers and
 * link go. Any context.
 */
void smr_conn_destruct(struct smr_sock *smr)
{
	struct smr_link *link;
	struct smr_buf *rmb, *sndbuf;

	if (smr->local_token) {
		spin_lock_bh(&smr_token_lock);
		hash_del(&smr->token_node);
		spin_unlock_bh(&smr_token_lock);
	}
	smr_conn_take(smr, &link, &rmb, &sndbuf);
	smr_conn_release_link(smr, link, rmb, sndbuf);
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
		   c->tx_peer_cons, c->rx_prod, c->rx_cons);
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
