// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the handshake over the TCP stream (PROPOSAL, ACCEPT, CONFIRM or
 * DECLINE; before the PROPOSAL, LINK_REQUEST and LINK_GRANT when the
 * client's RDMA link to the server is new: the server grants the link's
 * secret, which the link's rdma_cm request must prove, so that only links
 * both SMR ends agreed on are ever built; link_cm.c), run when the SYN
 * offered SMR and the SYN-ACK answered.
 *
 * The client starts as soon as its TCP connection is established; the
 * server child as soon as TCP hands it over. Both are driven by a work item
 * that reads only whole messages (peeking first, so that bytes which are not
 * a handshake message stay in the stream for the application), kicked by
 * the inner sock's data_ready/state_change callbacks and by a timer. The
 * application's connect() and accept() return once the socket's mode is
 * decided. Layouts and rules: Documentation/protocol.rst.
 *
 * The negotiation ends in smr_hs_set_done(): the mode's transport
 * becomes the socket's (transport.c), then SMR_HS_DONE is published. A
 * server child tells its listener through the callback the listener gave
 * it (smr_sock.hs_decided); a client wakes its connect() and pollers.
 *
 * Locking and lifetimes
 * ---------------------
 * The work runs under the SMR sock lock; connect() prepares under it too.
 * The work item and the timer each hold a reference on the SMR sock while
 * queued or armed (queue_work()/sk_reset_timer()); smr_hs_stop() cancels
 * both synchronously before the socket is freed. Tokens are the
 * connection layer's (conn.c).
 */
#include <linux/random.h>
#include <linux/tcp.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "handshake.h"
#include "ib_dev.h"
#include "smr.h"
#include "stats.h"
#include "sysctl.h"
#include "tcp_path.h"
#include "test_hooks.h"
#include "transport.h"
#include "wire.h"

/*
 * Extra handshake timeouts a client waits for the server's answer: its TCP
 * may not even have acknowledged the PROPOSAL (a listener whose accept
 * queue is full drops the segments), or the server is busy with many
 * handshakes at once. The client gives up after (1 + this) x
 * handshake_timeout_ms. A server waits as long for the CONFIRM after its
 * ACCEPT: the client registers its buffers first (up to a timeout of its
 * own) and its work may run late as well.
 */
#define SMR_HS_ACCEPT_WAITS	3
/*
 * LINK_REQUESTs a server takes on one connection: its client asks only
 * for the one link it waits on.
 */
#define SMR_HS_LINK_REQUESTS_MAX	1

static void smr_hs_timer_fired(struct timer_list *t)
{
	struct smr_sock *smr = from_timer(smr, t, hs_timer);

	WRITE_ONCE(smr->hs_timed_out, true);
	smr_hs_kick(smr);
	sock_put(&smr->sk);	/* the timer's reference */
}

static void smr_hs_arm_timer(struct smr_sock *smr)
{
	sock_owned_by_me(&smr->sk);
	smr->hs_deadline = jiffies +
			   msecs_to_jiffies(READ_ONCE(smr_hs_timeout_ms));
	WRITE_ONCE(smr->hs_timed_out, false);
	sk_reset_timer(&smr->sk, &smr->hs_timer, smr->hs_deadline);
}

/*
 * The step's time is up. The deadline is checked too: a timer callback
 * of the step before may set hs_timed_out just after a new step re-armed.
 */
static bool smr_hs_step_timed_out(const struct smr_sock *smr)
{
	sock_owned_by_me(&smr->sk);
	return READ_ONCE(smr->hs_timed_out) &&
	       time_after_eq(jiffies, smr->hs_deadline);
}

/*
 * The negotiation is over: the mode's transport takes the socket over,
 * then SMR_HS_DONE says so (a release: whoever sees it sees the
 * transport). @connected: it decided a connection (not a close or an
 * abort). Sock lock held.
 */
static void smr_hs_set_done(struct smr_sock *smr, bool connected)
{
	bool was_done = READ_ONCE(smr->hs_state) == SMR_HS_DONE;

	sock_owned_by_me(&smr->sk);
	smr_transport_settle(smr);
	/* a TCP read that sees DONE peeks at the application's offset */
	if (!was_done && READ_ONCE(smr->mode) == SMR_MODE_TCP)
		smr_tcp_sync_peek_off(smr);
	/* pairs with smr_hs_pending(): DONE is seen after the transport */
	smp_store_release(&smr->hs_state, SMR_HS_DONE);
	/* TCP's wake-ups from here on find the socket decided */
	if (!was_done && READ_ONCE(smr->mode) == SMR_MODE_TCP)
		smr_tcp_settled(smr, connected);
}

/* Tell the application: the listener, or connect() waiters and pollers. */
static void smr_hs_tell(struct smr_sock *smr, bool reset)
{
	if (smr->hs_decided)
		smr->hs_decided(smr, reset);
	else
		smr->sk.sk_state_change(&smr->sk);
}

/* Wake the application: connect() waiters and pollers see the decision. */
static void smr_hs_finish(struct smr_sock *smr)
{
	sock_owned_by_me(&smr->sk);
	if (smr->hs_sent || smr->hs_received)
		smr_tcp_fresh_after_handshake(smr);
	smr_hs_set_done(smr, true);
	sk_stop_timer(&smr->sk, &smr->hs_timer);
	smr_tcp_hook_negotiation(smr, false);
	smr_hs_tell(smr, false);
}

/* Decided: use the TCP connection, for @reason. */
static void smr_hs_fallback(struct smr_sock *smr, enum smr_reason reason)
{
	sock_owned_by_me(&smr->sk);
	smr_conn_unprepare(smr);
	smr_set_mode(smr, SMR_MODE_TCP, reason);
	smr_hs_finish(smr);
}

/*
 * The stream's state is not known to both sides any more: reset the
 * connection rather than risk handshake bytes reaching the application.
 */
static void smr_hs_abort(struct smr_sock *smr, enum smr_reason reason)
{
	struct sock *tsk = smr->tcp->sk;

	sock_owned_by_me(&smr->sk);
	smr_stat_inc(sock_net(&smr->sk), SMR_STAT_HS_ABORTED);
	/* and why: an operator sees what resets connections, not just how many */
	if (!WARN_ON_ONCE(reason == SMR_REASON_NONE ||
			  reason >= SMR_REASON_MAX))
		smr_stat_inc(sock_net(&smr->sk),
			     SMR_STAT_ABORTED_FIRST + reason);
	smr_conn_unprepare(smr);
	WRITE_ONCE(smr->reason, reason);
	sk_stop_timer(&smr->sk, &smr->hs_timer);
	smr_tcp_hook_negotiation(smr, false);
	/*
	 * The error first, then DONE: a connect() that sees the negotiation
	 * over, woken by anything, must find the reset too (it returned 0,
	 * and the next recv() ECONNRESET, when DONE came first).
	 */
	/*
	 * A connection TCP closed with an error (smr_hs_keep_tcp_error())
	 * keeps it: older kernels' tcp_abort() would report a reset too.
	 */
	if (READ_ONCE(tsk->sk_state) != TCP_CLOSE || !READ_ONCE(tsk->sk_err))
		tcp_abort(tsk, ECONNRESET);
	smr_hs_set_done(smr, false);
	smr_hs_tell(smr, true);
}

/*
 * Why a handshake whose stream failed (@err from smr_hs_recv() or
 * smr_hs_send()) ends: the TCP connection failed or ended under it (the
 * peer reset it, often at its own handshake timeout, or closed it; or TCP
 * gave up on it), or, for our own message not going out whole, a protocol
 * error.
 */
static enum smr_reason smr_hs_stream_reason(int err)
{
	switch (err) {
	case -EPIPE:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -ECONNREFUSED:
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -EHOSTDOWN:
	case -ENETDOWN:
		return SMR_REASON_CONNECTION_LOST;
	default:
		return SMR_REASON_PROTOCOL_ERROR;
	}
}

/*
 * A handshake read or write returned TCP's pending error @err, which TCP
 * cleared: it is the application's (connect() or the next call reports
 * it), so it goes back, unless a newer one came meanwhile.
 */
static void smr_hs_keep_tcp_error(struct smr_sock *smr, int err)
{
	/* TCP's answers that were no pending error of its own */
	if (err == -EPIPE || err == -EAGAIN || err == -ENOTCONN)
		return;
	cmpxchg(&smr->tcp->sk->sk_err, 0, -err);
}

static int smr_hs_send(struct smr_sock *smr, const struct smr_hs_msg *msg)
{
	u8 buf[SMR_HS_MAX_LEN];
	struct msghdr mh = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	struct kvec iov;
	size_t len;
	int ret;

	sock_owned_by_me(&smr->sk);
	len = smr_hs_build(msg, buf, sizeof(buf));
	if (!len)
		return -EINVAL;
	iov.iov_base = buf;
	iov.iov_len = len;
	smr->hs_wrote = true;
	ret = kernel_sendmsg(smr->tcp, &mh, &iov, 1, len);
	/* -EPIPE alone: TCP had no error to hand us (sk_stream_error()) */
	if (ret < 0)
		smr_hs_keep_tcp_error(smr, ret);
	if (ret != len)
		return ret < 0 ? ret : -EIO;
	smr->hs_sent++;
	smr->hs_bytes_sent += len;
	return 0;
}

/*
 * Read one whole message without consuming anything else. Returns 0 with
 * @msg filled, -EAGAIN (not all there yet), -EPIPE (stream ended or
 * failed), -EBADMSG (the stream does not start with a handshake message:
 * nothing was consumed) or -EPROTO (a malformed message).
 */
static int smr_hs_recv(struct smr_sock *smr, struct smr_hs_msg *msg)
{
	u8 buf[SMR_HS_MAX_LEN];
	struct msghdr mh = {};
	struct kvec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	int n, len;

	sock_owned_by_me(&smr->sk);
	n = kernel_recvmsg(smr->tcp, &mh, &iov, 1, sizeof(buf),
			   MSG_PEEK | MSG_DONTWAIT);
	if (n == -EAGAIN)
		return -EAGAIN;
	if (n < 0) {
		smr_hs_keep_tcp_error(smr, n);
		return -EPIPE;
	}
	if (!n)
		return -EPIPE;
	len = smr_hs_peek(buf, n);
	if (len == -SMR_WIRE_EAGAIN)
		return -EAGAIN;
	if (len == -SMR_WIRE_EMAGIC)
		return -EBADMSG;
	if (len < 0)
		return -EPROTO;
	if (n < len)
		return -EAGAIN;

	/* consume exactly this message */
	iov.iov_base = buf;
	iov.iov_len = len;
	memset(&mh, 0, sizeof(mh));
	n = kernel_recvmsg(smr->tcp, &mh, &iov, 1, len, MSG_DONTWAIT);
	if (n != len)
		return -EPIPE;
	smr->hs_received++;
	smr->hs_bytes_received += len;
	if (smr_hs_parse(buf, len, msg))
		return -EPROTO;
	return 0;
}

static void smr_hs_fill_addr(struct smr_sock *smr, struct smr_hs_addr *a)
{
	struct smr_tuple t;

	smr_tuple_of_sock(&t, smr->tcp->sk);
	memset(a, 0, sizeof(*a));
	/* RoCEv2 GIDs are the IPv6 or v4-mapped address of the netdev */
	memcpy(a->gid, &t.laddr, sizeof(a->gid));
	if (t.family == AF_INET) {
		a->family = SMR_HS_AF_INET;
		memcpy(a->ip, &t.laddr.s6_addr32[3], 4);
	} else {
		a->family = SMR_HS_AF_INET6;
		memcpy(a->ip, &t.laddr, sizeof(a->ip));
	}
}

/* The RMB size this socket would ask for: its receive buffer, bounded. */
static u32 smr_hs_rmb_size(struct smr_sock *smr)
{
	return smr_buf_size_for(READ_ONCE(smr->tcp->sk->sk_rcvbuf));
}

static bool smr_hs_have_device(struct smr_sock *smr)
{
	struct smr_tuple t;

	smr_tuple_of_sock(&t, smr->tcp->sk);
	return smr_ib_dev_for_addr(sock_net(&smr->sk), t.family, &t.laddr);
}

static void smr_hs_decline(struct smr_sock *smr, enum smr_reason reason)
{
	struct smr_hs_msg msg = { .type = SMR_HS_DECLINE };
	int err;

	sock_owned_by_me(&smr->sk);
	msg.decline.reason = reason;
	msg.decline.token_echo = smr->peer_token;
	smr_stat_inc(sock_net(&smr->sk), SMR_STAT_HS_DECLINED);
	err = smr_hs_send(smr, &msg);
	if (err) {
		smr_hs_abort(smr, smr_hs_stream_reason(err));
		return;
	}
	smr_hs_fallback(smr, reason);
}

static void smr_hs_peer_declined(struct smr_sock *smr,
				 const struct smr_hs_msg *msg)
{
	sock_owned_by_me(&smr->sk);
	WRITE_ONCE(smr->peer_reason, msg->decline.reason);
	smr_stat_inc(sock_net(&smr->sk), SMR_STAT_HS_DECLINED);
	smr_hs_fallback(smr, SMR_REASON_PEER_DECLINED);
}

/*
 * Read the peer's answer to what we sent: true if it is the @expected
 * message (in @msg). False if none is whole yet, or if the handshake ended
 * here: aborted on anything but @expected or a DECLINE echoing @token; on
 * a DECLINE, @asked (the link our LINK_REQUEST asked a grant for, or NULL)
 * fails at once rather than in its setup timeout, then we fall back.
 */
static bool smr_hs_recv_answer(struct smr_sock *smr, struct smr_hs_msg *msg,
			       u8 expected, u64 token, struct smr_link *asked)
{
	int err;

	sock_owned_by_me(&smr->sk);
	err = smr_hs_recv(smr, msg);
	if (err == -EAGAIN)
		return false;
	if (err) {
		smr_hs_abort(smr, smr_hs_stream_reason(err));
		return false;
	}
	if (smr_hs_check(msg, expected, token)) {
		smr_hs_abort(smr, SMR_REASON_PROTOCOL_ERROR);
		return false;
	}
	if (msg->type == SMR_HS_DECLINE) {
		if (asked)
			smr_link_grant_declined(asked);
		smr_hs_peer_declined(smr, msg);
		return false;
	}
	return true;
}

/*
 * Both sides agreed and exchanged RMB descriptors: from now on the
 * application's bytes travel by RDMA (unless the link died meanwhile).
 */
static void smr_hs_agreed(struct smr_sock *smr)
{
	sock_owned_by_me(&smr->sk);
	smr_stat_inc(sock_net(&smr->sk), SMR_STAT_HS_COMPLETED);
	if (!smr_close_ready(smr)) {
		smr_hs_abort(smr, SMR_REASON_LINK_FAILURE);
		return;
	}
	smr_set_mode(smr, SMR_MODE_RDMA, SMR_REASON_NONE);
	/* the inner TCP's own events (its FIN, ACKs) are no SMR events now */
	if (READ_ONCE(smr->mode) == SMR_MODE_RDMA)
		smr_tcp_redirect_wq(smr, smr->tcp);
	smr_hs_finish(smr);
	/* connected: O_ASYNC owners hear it as from TCP's handshake */
	sk_wake_async(&smr->sk, SOCK_WAKE_IO, POLL_OUT);
	/*
	 * Writable now; readable if bytes (up to the mark) or a FIN came
	 * before the application looked: TCP signals POLL_IN only then.
	 */
	smr_conn_wake(smr, EPOLLOUT);
	smr_rx_lowat_changed(smr);
}

static enum smr_reason smr_hs_reason_of(enum smr_negot_result res)
{
	switch (res) {
	case SMR_NEGOT_ECHOED:
		return SMR_REASON_OPTION_ECHOED;
	case SMR_NEGOT_COOKIE:
		return SMR_REASON_SYN_COOKIES;
	case SMR_NEGOT_NO_SPACE:
		return SMR_REASON_OPTION_NO_SPACE;
	case SMR_NEGOT_NO_DEVICE:
		return SMR_REASON_NO_RDMA_DEVICE;
	case SMR_NEGOT_LIMIT:
		return SMR_REASON_NEGOT_LIMIT;
	default:
		return SMR_REASON_PEER_NO_SMR;
	}
}

/* ---- client ---- */

/*
 * connect() is about to start the inner TCP connect to @addr: a fresh one
 * (not a retry of one under way, nor a disconnect) offers on its SYN. Sock
 * lock held.
 */
void smr_hs_client_prepare(struct smr_sock *smr, const struct sockaddr *addr,
			   int len)
{
	u32 nonce;

	sock_owned_by_me(&smr->sk);
	if (READ_ONCE(smr->mode) != SMR_MODE_PENDING ||
	    READ_ONCE(smr->hs_state) != SMR_HS_IDLE ||
	    READ_ONCE(smr->tcp->sk->sk_state) != TCP_CLOSE ||
	    !addr || len < sizeof(addr->sa_family) ||
	    addr->sa_family == AF_UNSPEC)
		return;
	do {
		nonce = get_random_u32();
	} while (!smr_opt_nonce_ok(nonce));
	WRITE_ONCE(smr->syn_nonce, nonce);
	WRITE_ONCE(smr->hs_state, SMR_HS_CONNECTING);
	smr->hs_wrote = false;
	smr->hs_unacked_waits = 0;
	smr_tcp_hook_negotiation(smr, true);
}

/* The inner connect failed: this attempt negotiates nothing. */
static void smr_hs_client_abandon(struct smr_sock *smr)
{
	sock_owned_by_me(&smr->sk);
	WRITE_ONCE(smr->syn_nonce, 0);
	WRITE_ONCE(smr->hs_state, SMR_HS_IDLE);
	smr_tcp_hook_negotiation(smr, false);
}

/*
 * The inner connect() returned @err: one that failed for good (not
 * EINPROGRESS or EALREADY) before TCP left CLOSE negotiates nothing.
 * Sock lock not held.
 */
void smr_hs_client_connect_failed(struct smr_sock *smr, int err)
{
	if (!err || err == -EINPROGRESS || err == -EALREADY)
		return;
	if (READ_ONCE(smr->hs_state) != SMR_HS_CONNECTING ||
	    READ_ONCE(smr->tcp->sk->sk_state) != TCP_CLOSE)
		return;
	lock_sock(&smr->sk);
	smr_hs_client_abandon(smr);
	release_sock(&smr->sk);
}

static void smr_hs_client_propose(struct smr_sock *smr);

static void smr_hs_client_start(struct smr_sock *smr)
{
	struct smr_hs_msg req = { .type = SMR_HS_LINK_REQUEST };
	struct sock *tsk = smr->tcp->sk;
	enum smr_negot_result res;
	struct smr_link *link;
	struct smr_tuple t;
	int state = READ_ONCE(tsk->sk_state);
	int err;

	sock_owned_by_me(&smr->sk);
	if ((1 << state) & (TCPF_SYN_SENT | TCPF_SYN_RECV))
		return;		/* not connected yet */
	if (state != TCP_ESTABLISHED && state != TCP_CLOSE_WAIT) {
		/* the connect failed: connect() reports TCP's error */
		smr_hs_client_abandon(smr);
		smr->sk.sk_state_change(&smr->sk);
		return;
	}

	smr_tuple_of_sock(&t, tsk);
	res = smr_negot_take_offer(smr, &t);
	if (res == SMR_NEGOT_PEER_NO_DEVICE) {
		/* the listener declined in its SYN-ACK already */
		WRITE_ONCE(smr->peer_reason, SMR_REASON_NO_RDMA_DEVICE);
		smr_stat_inc(sock_net(&smr->sk), SMR_STAT_HS_DECLINED);
		smr_hs_fallback(smr, SMR_REASON_PEER_DECLINED);
		return;
	}
	if (res == SMR_NEGOT_PEER_NO_GRANTS) {
		/*
		 * A server that predates LINK_REQUEST (it did not say it takes
		 * one): it resets on one, and no link can be made with it
		 * (its listener cannot check a secret). DECLINE is understood
		 * by every version: both ends use TCP.
		 */
		smr_hs_decline(smr, SMR_REASON_VERSION_MISMATCH);
		return;
	}
	if (res != SMR_NEGOT_ANSWERED) {
		smr_hs_fallback(smr, smr_hs_reason_of(res));
		return;
	}

	smr_stat_inc(sock_net(&smr->sk), SMR_STAT_HS_STARTED);
	link = smr_link_get(&smr->conn.link_user, t.net, t.family, &t.laddr,
			    &t.raddr, READ_ONCE(smr->sk.sk_uid));
	if (!link) {
		smr_hs_decline(smr, SMR_REASON_LINK_FAILURE);
		return;
	}
	smr_conn_set_link(smr, link);
	/*
	 * A new link of ours connects only once the peer granted its secret
	 * on a handshake (its listener builds nothing else); the address
	 * resolution runs meanwhile.
	 */
	if (smr_link_needs_grant(link, &req.link.link_id, req.link.secret)) {
		err = smr_hs_send(smr, &req);
		if (err) {
			smr_hs_abort(smr, smr_hs_stream_reason(err));
			return;
		}
		WRITE_ONCE(smr->hs_state, SMR_HS_WAIT_GRANT);
		smr_hs_arm_timer(smr);
		smr_hs_kick(smr);	/* the answer may be there already */
		return;
	}
	WRITE_ONCE(smr->hs_state, SMR_HS_WAIT_LINK);
	smr_hs_arm_timer(smr);
	smr_hs_client_propose(smr);
}

/*
 * The answer to our LINK_REQUEST: the grant (the link connects; wait for
 * it to come up) or a DECLINE. Read before anything else is decided, so
 * that no handshake byte reaches the application.
 */
static void smr_hs_client_read_grant(struct smr_sock *smr)
{
	struct smr_link *link = smr->conn.link;
	struct smr_hs_msg msg;

	sock_owned_by_me(&smr->sk);
	if (!smr_hs_recv_answer(smr, &msg, SMR_HS_LINK_GRANT, 0, link))
		return;
	/* no link: its teardown took it meanwhile; propose declines */
	if (link && smr_link_granted(link, msg.link.link_id, msg.link.secret)) {
		smr_hs_abort(smr, SMR_REASON_PROTOCOL_ERROR);
		return;
	}
	/* the server answered: WAIT_ACCEPT has its own extra waits */
	smr->hs_unacked_waits = 0;
	WRITE_ONCE(smr->hs_state, SMR_HS_WAIT_LINK);
	smr_hs_client_propose(smr);
}

/* The link is up (or failed): propose RDMA on it, or decline. */
static void smr_hs_client_propose(struct smr_sock *smr)
{
	struct smr_hs_msg msg = { .type = SMR_HS_PROPOSAL };
	struct smr_link *link = smr->conn.link;
	int err;

	sock_owned_by_me(&smr->sk);
	if (!link || smr_link_state(link) == SMR_LINK_DEAD) {
		smr_hs_decline(smr, SMR_REASON_LINK_FAILURE);
		return;
	}
	if (smr_link_state(link) != SMR_LINK_ACTIVE)
		return;		/* kicked again when it is */

	msg.proposal.max_version = SMR_HS_VERSION;
	/* we offered: we have one */
	msg.proposal.caps = SMR_HS_CAP_RDMA | SMR_HS_CAP_CDC_INLINE;
	smr_hs_fill_addr(smr, &msg.proposal.addr);
	msg.proposal.token = smr_conn_new_token(smr);
	smr->local_rmb_size = smr_hs_rmb_size(smr);
	msg.proposal.rmb_size = smr->local_rmb_size;
	msg.proposal.link_id = smr_link_peer_id(link);
	err = smr_hs_send(smr, &msg);
	if (err) {
		smr_hs_abort(smr, smr_hs_stream_reason(err));
		return;
	}
	WRITE_ONCE(smr->hs_state, SMR_HS_WAIT_ACCEPT);
	smr_hs_kick(smr);	/* the answer may be there already */
}

/*
 * Why buffers for the connection could not be had: memory (a limit or
 * none left), or the link, which failed or was too busy to register them
 * in time.
 */
static enum smr_reason smr_hs_prepare_reason(int err)
{
	return err == -ENOBUFS || err == -ENOMEM ? SMR_REASON_NO_MEMORY :
						   SMR_REASON_LINK_FAILURE;
}

static void smr_hs_client_read(struct smr_sock *smr)
{
	struct smr_hs_msg msg, confirm = { .type = SMR_HS_CONFIRM };
	int err;

	sock_owned_by_me(&smr->sk);
	if (!smr_hs_recv_answer(smr, &msg, SMR_HS_ACCEPT, smr->local_token,
				NULL))
		return;
	smr_test_hs_answer_delay();
	smr->peer_token = msg.accept.token;
	smr->peer_rmb_size = msg.accept.rmb.size;

	if (!smr->conn.link || smr_link_state(smr->conn.link) != SMR_LINK_ACTIVE) {
		smr_hs_decline(smr, SMR_REASON_LINK_FAILURE);
		return;
	}
	err = smr_conn_prepare(smr, smr->conn.link);
	if (err) {
		smr_hs_decline(smr, smr_hs_prepare_reason(err));
		return;
	}
	smr->conn.peer_cdc_inline = msg.accept.caps & SMR_HS_CAP_CDC_INLINE;
	smr_conn_set_peer(smr, &msg.accept.rmb);
	smr_close_start(smr);

	confirm.confirm.token = smr->local_token;
	confirm.confirm.token_echo = smr->peer_token;
	smr_conn_fill_rmb(smr, &confirm.confirm.rmb);
	err = smr_hs_send(smr, &confirm);
	if (err) {
		smr_hs_abort(smr, smr_hs_stream_reason(err));
		return;
	}
	/*
	 * Done: from here on the application's bytes go by RDMA, which the
	 * server accepts since it sent ACCEPT, and what TCP still has in
	 * flight (CONFIRM) is no longer the application's business (queue
	 * sizes come from the rings). Waiting for CONFIRM's ACK would cost a
	 * round trip for nothing.
	 */
	smr_hs_agreed(smr);
}

/* ---- server ---- */

/*
 * A child TCP hands over with nothing to negotiate: it settles on TCP for
 * @reason at once.
 */
void smr_hs_skip(struct smr_sock *child, enum smr_reason reason)
{
	lock_sock(&child->sk);
	smr_set_mode(child, SMR_MODE_TCP, reason);
	smr_hs_set_done(child, false);
	release_sock(&child->sk);
}

/* A child TCP hands over whose SYN we answered: expect a PROPOSAL. */
void smr_hs_server_start(struct smr_sock *child)
{
	lock_sock(&child->sk);
	child->hs_wrote = false;
	child->hs_unacked_waits = 0;
	WRITE_ONCE(child->hs_state, SMR_HS_WAIT_PROPOSAL);
	smr_tcp_hook_negotiation(child, true);
	smr_stat_inc(sock_net(&child->sk), SMR_STAT_HS_STARTED);
	smr_hs_arm_timer(child);
	smr_hs_kick(child);	/* the PROPOSAL may be there already */
	release_sock(&child->sk);
}

/*
 * The client asks (LINK_REQUEST, before its PROPOSAL) to connect a new link
 * with the secret it sent: grant it (the link layer records it for the
 * connect request that must prove it) and answer LINK_GRANT, then keep
 * waiting for the PROPOSAL; or DECLINE. Once per connection.
 */
static void smr_hs_server_grant(struct smr_sock *smr, struct smr_hs_msg *msg)
{
	struct smr_tuple t;
	int err;

	sock_owned_by_me(&smr->sk);
	if (smr->hs_received > SMR_HS_LINK_REQUESTS_MAX) {
		smr_hs_abort(smr, SMR_REASON_PROTOCOL_ERROR);
		return;
	}
	if (!smr_hs_have_device(smr)) {
		smr_hs_decline(smr, SMR_REASON_NO_RDMA_DEVICE);
		return;
	}
	smr_tuple_of_sock(&t, smr->tcp->sk);
	if (smr_link_grant(t.net, &t.laddr, &t.raddr, msg->link.secret)) {
		/* this host or this peer has all the links it may */
		smr_hs_decline(smr, SMR_REASON_LINK_FAILURE);
		return;
	}
	msg->type = SMR_HS_LINK_GRANT;	/* the request's fields, echoed */
	err = smr_hs_send(smr, msg);
	if (err) {
		smr_hs_abort(smr, smr_hs_stream_reason(err));
		return;
	}
	/* the client's link setup and PROPOSAL: a step of its own */
	smr_hs_arm_timer(smr);
}

static void smr_hs_server_read_proposal(struct smr_sock *smr)
{
	struct smr_hs_msg msg, accept = { .type = SMR_HS_ACCEPT };
	struct smr_link *link;
	struct smr_tuple t;
	int err;

	sock_owned_by_me(&smr->sk);
	err = smr_hs_recv(smr, &msg);
	if (err == -EAGAIN)
		return;
	if ((err == -EBADMSG || err == -EPIPE) && !smr->hs_wrote) {
		/*
		 * Application bytes, or the end of the stream, first: the client
		 * did not take up the answer (e.g. a middlebox stripped it).
		 * (Once we granted a link, it had: the stream is a mess.)
		 */
		smr_hs_fallback(smr, SMR_REASON_PEER_NO_SMR);
		return;
	}
	if (!err && msg.type == SMR_HS_LINK_REQUEST && !smr_test_answer_old()) {
		smr_hs_server_grant(smr, &msg);
		return;
	}
	if (err) {
		smr_hs_abort(smr, smr_hs_stream_reason(err));
		return;
	}
	if (smr_hs_check(&msg, SMR_HS_PROPOSAL, 0)) {
		smr_hs_abort(smr, SMR_REASON_PROTOCOL_ERROR);
		return;
	}
	if (msg.type == SMR_HS_DECLINE) {
		smr_hs_peer_declined(smr, &msg);
		return;
	}
	smr->peer_token = msg.proposal.token;
	smr->peer_rmb_size = msg.proposal.rmb_size;
	if (!(msg.proposal.caps & SMR_HS_CAP_RDMA) ||
	    !smr_hs_have_device(smr)) {
		smr_hs_decline(smr, SMR_REASON_NO_RDMA_DEVICE);
		return;
	}
	smr_tuple_of_sock(&t, smr->tcp->sk);
	link = smr_link_find(&smr->conn.link_user, msg.proposal.link_id, t.net,
			     &t.raddr);
	if (!link) {
		smr_hs_decline(smr, SMR_REASON_LINK_FAILURE);
		return;
	}
	smr_conn_set_link(smr, link);
	smr->local_rmb_size = smr_hs_rmb_size(smr);
	err = smr_conn_prepare(smr, smr->conn.link);
	if (err) {
		smr_hs_decline(smr, smr_hs_prepare_reason(err));
		return;
	}
	/* read under conn->lock only after smr_conn_set_peer() */
	smr->conn.peer_cdc_inline = msg.proposal.caps & SMR_HS_CAP_CDC_INLINE;
	/* the token goes in the table before the client can use it */
	accept.accept.token = smr_conn_new_token(smr);
	smr_close_start(smr);

	accept.accept.version = SMR_HS_VERSION;
	accept.accept.caps = SMR_HS_CAP_RDMA | SMR_HS_CAP_CDC_INLINE;
	smr_hs_fill_addr(smr, &accept.accept.addr);
	accept.accept.token_echo = smr->peer_token;
	smr_conn_fill_rmb(smr, &accept.accept.rmb);
	err = smr_hs_send(smr, &accept);
	if (err) {
		smr_hs_abort(smr, smr_hs_stream_reason(err));
		return;
	}
	/* as long as a client waits for the ACCEPT (SMR_HS_ACCEPT_WAITS) */
	smr->hs_unacked_waits = 0;
	WRITE_ONCE(smr->hs_state, SMR_HS_WAIT_CONFIRM);
	smr_hs_kick(smr);
}

static void smr_hs_server_read_confirm(struct smr_sock *smr)
{
	struct smr_hs_msg msg;

	sock_owned_by_me(&smr->sk);
	if (!smr_hs_recv_answer(smr, &msg, SMR_HS_CONFIRM, smr->local_token,
				NULL))
		return;
	if (msg.confirm.token != smr->peer_token) {
		smr_hs_abort(smr, SMR_REASON_PROTOCOL_ERROR);
		return;
	}
	smr->peer_rmb_size = msg.confirm.rmb.size;
	smr_conn_set_peer(smr, &msg.confirm.rmb);
	smr_hs_agreed(smr);
}

static void smr_hs_work(struct work_struct *work)
{
	struct smr_sock *smr = container_of(work, struct smr_sock, hs_work);
	u8 step;

	/* every step below runs under the sock lock (see smr_hs_stop()) */
	lock_sock(&smr->sk);
	step = smr->hs_state;
	switch (step) {
	case SMR_HS_CONNECTING:
		smr_hs_client_start(smr);
		break;
	case SMR_HS_WAIT_ACCEPT:
		smr_hs_client_read(smr);
		break;
	case SMR_HS_WAIT_PROPOSAL:
		smr_hs_server_read_proposal(smr);
		break;
	case SMR_HS_WAIT_CONFIRM:
		smr_hs_server_read_confirm(smr);
		break;
	case SMR_HS_WAIT_LINK:
		smr_hs_client_propose(smr);
		break;
	case SMR_HS_WAIT_GRANT:
		smr_hs_client_read_grant(smr);
		break;
	default:
		break;
	}
	/*
	 * Each step has its own handshake_timeout_ms: a step taken now is
	 * progress even if the timer fired while this work waited its turn
	 * (a server with hundreds of children runs their works seconds
	 * late; aborting right after sending ACCEPT would reset a client
	 * that did nothing wrong).
	 */
	if (smr_hs_pending(smr) && smr->hs_state != step &&
	    smr->hs_state != SMR_HS_CONNECTING) {
		smr_hs_arm_timer(smr);
	} else if (smr_hs_pending(smr) && smr->hs_state != SMR_HS_CONNECTING &&
		   smr_hs_step_timed_out(smr)) {
		/*
		 * A PROPOSAL or LINK_REQUEST unanswered: its server may be slow
		 * to accept (TCP has not acknowledged it: a full accept queue
		 * drops segments) or busy with a burst of handshakes (200 at
		 * once take seconds on a loaded host). A TCP client would wait,
		 * so this one waits too, but only SMR_HS_ACCEPT_WAITS more
		 * timeouts, so that a path that drops handshake segments ends
		 * in a bounded time. (Resetting is the only way out once the
		 * PROPOSAL went.) A server that granted a link waits as long
		 * for the PROPOSAL: its client declines first (below). A
		 * server that sent ACCEPT waits as long for the CONFIRM: its
		 * client may take a timeout to register its buffers, and its
		 * work may run late on a loaded host.
		 */
		if ((smr->hs_state == SMR_HS_WAIT_ACCEPT ||
		     smr->hs_state == SMR_HS_WAIT_GRANT ||
		     smr->hs_state == SMR_HS_WAIT_CONFIRM ||
		     (smr->hs_state == SMR_HS_WAIT_PROPOSAL && smr->hs_wrote)) &&
		    smr->hs_unacked_waits < SMR_HS_ACCEPT_WAITS) {
			smr->hs_unacked_waits++;
			smr_hs_arm_timer(smr);
		}
		/* nothing sent yet: the peer never started; TCP is safe */
		else if (!smr->hs_wrote)
			smr_hs_fallback(smr, SMR_REASON_HANDSHAKE_TIMEOUT);
		/*
		 * Granted, but the link is not up in time: the stream is in
		 * step (we read the grant, the server waits for a PROPOSAL),
		 * so a DECLINE takes both to TCP.
		 */
		else if (smr->hs_state == SMR_HS_WAIT_LINK)
			smr_hs_decline(smr, SMR_REASON_HANDSHAKE_TIMEOUT);
		else
			smr_hs_abort(smr, SMR_REASON_HANDSHAKE_TIMEOUT);
	}
	release_sock(&smr->sk);
	sock_put(&smr->sk);	/* the queued work's reference */
}

void smr_hs_init_sock(struct smr_sock *smr)
{
	INIT_WORK(&smr->hs_work, smr_hs_work);
	timer_setup(&smr->hs_timer, smr_hs_timer_fired, 0);
}

/*
 * The socket goes away: no work or timer may touch it afterwards. The state
 * changes under the sock lock, which the work holds from its state check to
 * its last step: a work that already checked cannot re-arm the timer (or
 * reach the inner socket) after this, and a later one finds DONE and does
 * nothing. Process context, sock lock not held.
 */
void smr_hs_stop(struct smr_sock *smr)
{
	lock_sock(&smr->sk);
	smr_hs_set_done(smr, false);
	release_sock(&smr->sk);
	sk_stop_timer_sync(&smr->sk, &smr->hs_timer);
	if (cancel_work_sync(&smr->hs_work))
		sock_put(&smr->sk);
}
