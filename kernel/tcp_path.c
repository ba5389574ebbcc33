// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: the inner TCP connection of every SMR socket.
 *
 * Every SMR socket owns a real TCP socket: it carries the connection setup,
 * and it is the data path whenever RDMA is not in use (fallback: the TCP
 * transport, transport.c). This file creates it, ties its wake-ups and
 * errors to the SMR socket, and takes it down. In RDMA mode the inner
 * connection's failure resets the RDMA connection (smr_conn_tcp_failed());
 * while negotiating, its events drive the handshake work (smr_hs_kick()).
 *
 * Locking and lifetimes
 * ---------------------
 * The inner socket is created with __sock_create(kern = 0) for user sockets
 * so that it holds a reference on its network namespace like any user TCP
 * socket: an orphaned inner sock may outlive the SMR socket (FIN_WAIT,
 * TIME_WAIT) and must keep its netns alive.
 *
 * Wake-ups: the inner sock's sk_wq is pointed at the SMR socket's wait queue
 * under the inner sk_callback_lock, as sock_graft() would do. TCP then wakes
 * SMR pollers (with its exact poll keys) and signals SMR's fasync owners.
 * sock_orphan() in the inner tcp_close() clears sk_wq under the same lock
 * before smr_release() returns, and the SMR socket's wait queue is freed by
 * RCU after that, so no softirq can wake a freed queue. In mode rdma the
 * inner sock wakes its own socket's queue instead: its FIN and ACKs are no
 * event of the SMR socket (an edge-triggered poller would see a spurious
 * edge before the CDC that carries the news).
 *
 * Lock order: the SMR sock lock, then the inner sock lock (the end of a
 * negotiation settles the inner sock under both, smr_tcp_settled()); never
 * the reverse: TCP's callbacks, which run with the inner sock owned or in
 * softirq, only kick SMR's work or wake its queue.
 *
 * Errors: SO_ERROR is read by the socket layer from the SMR sock itself, so
 * asynchronous TCP errors (refused connect, reset, timeout) are mirrored into
 * sk.sk_err by the inner sk_error_report hook. The error is reported once,
 * whichever side consumes it first: SO_ERROR (clears the SMR copy; the inner
 * copy is dropped on the next syscall, smr_tcp_err_sync()) or a TCP call
 * (returns it from the inner sock; smr_tcp_err_consumed() drops the copy).
 *
 * Hooks: every hooked callback finds its SMR socket through the inner
 * sk_user_data under the inner sk_callback_lock (read side), and hooks are
 * installed and removed under its write side. While negotiating, the
 * data_ready, state_change and write_space hooks kick the handshake work; a
 * listener's data_ready hook kicks its accept work. TCP's accepted children
 * inherit a listener's hooks but not its owner (NOCOPY), and are given TCP's
 * own callbacks back before they are attached.
 *
 * A hook may run stale: TCP read the callback pointer before the hook was
 * replaced, and the hook then waits for the callback lock while the sock
 * changes hands (an accepted child's inherited listener hook while it is
 * attached to its own SMR socket). So a hook acts for the owner, and calls
 * the callback the owner saved, only while it is still the sock's installed
 * callback; otherwise it does what TCP itself would (smr_tcp_defaults).
 */
#include <linux/bpf.h>
#include <linux/net.h>
#include <linux/tcp.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/tcp_states.h>

#include "smr.h"
#include "tcp_path.h"

/*
 * TCP's own callbacks (sock_def_*), read off the first pristine inner sock:
 * they are not exported, and a callback that raced with smr_tcp_release()
 * (or an accepted child that inherited a hook but not the owner) must
 * still do what TCP would have done.
 */
static void (*smr_tcp_defaults[SMR_TCP_CB_MAX])(struct sock *sk);

static void smr_tcp_learn_defaults(const struct sock *tsk)
{
	if (READ_ONCE(smr_tcp_defaults[SMR_TCP_CB_DATA_READY]))
		return;
	WRITE_ONCE(smr_tcp_defaults[SMR_TCP_CB_ERROR_REPORT], tsk->sk_error_report);
	WRITE_ONCE(smr_tcp_defaults[SMR_TCP_CB_STATE_CHANGE], tsk->sk_state_change);
	WRITE_ONCE(smr_tcp_defaults[SMR_TCP_CB_WRITE_SPACE], tsk->sk_write_space);
	WRITE_ONCE(smr_tcp_defaults[SMR_TCP_CB_DATA_READY], tsk->sk_data_ready);
}

/* sk_user_data carries the owner, tagged so TCP's clones drop it */
static void smr_tcp_set_owner(struct sock *tsk, struct smr_sock *smr)
{
	tsk->sk_user_data = smr ? (void *)((uintptr_t)smr | SK_USER_DATA_NOCOPY)
				: NULL;
}

/* The SMR socket owning inner sock @tsk, or NULL. Caller keeps it alive. */
struct smr_sock *smr_tcp_owner(const struct sock *tsk)
{
	uintptr_t v = (uintptr_t)READ_ONCE(tsk->sk_user_data);

	return (struct smr_sock *)(v & SK_USER_DATA_PTRMASK);
}

/*
 * The SMR socket a running hook acts for: the owner, if @hook is still the
 * callback installed (@installed, the sock's callback read now; see "A hook
 * may run stale" above). Caller holds the inner sk_callback_lock.
 */
static struct smr_sock *smr_tcp_hook_owner(const struct sock *tsk,
					   void (*installed)(struct sock *sk),
					   void (*hook)(struct sock *sk))
{
	lockdep_assert_held_read(&tsk->sk_callback_lock);
	return installed == hook ? smr_tcp_owner(tsk) : NULL;
}

/*
 * What every hook does: while @hook is still the callback installed in
 * @slot (read under the inner sk_callback_lock), @act for its owner, then
 * the callback the owner saved for @cb; otherwise TCP's own (see "A hook
 * may run stale" above). Always inlined: @act is a direct call.
 */
static __always_inline void
smr_tcp_hook_run(struct sock *tsk, enum smr_tcp_cb cb,
		 void (**slot)(struct sock *sk), void (*hook)(struct sock *sk),
		 void (*act)(struct sock *tsk, struct smr_sock *smr))
{
	void (*saved)(struct sock *sk) = READ_ONCE(smr_tcp_defaults[cb]);
	struct smr_sock *smr;

	read_lock_bh(&tsk->sk_callback_lock);
	smr = smr_tcp_hook_owner(tsk, READ_ONCE(*slot), hook);
	if (smr) {
		saved = smr->tcp_saved[cb];
		act(tsk, smr);
	}
	read_unlock_bh(&tsk->sk_callback_lock);
	saved(tsk);
}

static void smr_tcp_mirror_error(struct sock *tsk, struct smr_sock *smr)
{
	int err = READ_ONCE(tsk->sk_err);

	if (err && READ_ONCE(smr->mode) == SMR_MODE_RDMA) {
		/* the control connection failed: so does this one */
		smr_conn_tcp_failed(smr, err);
	} else if (err) {
		WRITE_ONCE(smr->tcp_err_mirrored, err);
		WRITE_ONCE(smr->sk.sk_err, err);
		/*
		 * TCP's own SIGIO for it reaches the owners only once the
		 * socket settled on TCP (smr_tcp_sync_fasync(), under the
		 * inner lock TCP holds for the errors it raises): before, a
		 * connect refused, reset or aborted signals here. (An error
		 * queued with the error queue's skb comes unlocked: a racing
		 * settle may then give one SIGIO too many or too few.)
		 */
		if (!sock_flag(tsk, SOCK_FASYNC))
			sk_wake_async(&smr->sk, SOCK_WAKE_IO, POLL_ERR);
	}
}

/*
 * Softirq or process context, with the inner sock locked by TCP. The saved
 * callback wakes the (redirected) wait queue.
 */
static void smr_tcp_error_report(struct sock *tsk)
{
	smr_tcp_hook_run(tsk, SMR_TCP_CB_ERROR_REPORT, &tsk->sk_error_report,
			 smr_tcp_error_report, smr_tcp_mirror_error);
}

/*
 * Every inner sock of an SMR socket carries this error hook, and TCP's
 * children of an SMR listener inherit it: the option hooks use it to tell
 * SMR's TCP socks from all others.
 */
bool smr_tcp_sock_is_smr(const struct sock *tsk)
{
	return READ_ONCE(tsk->sk_error_report) == smr_tcp_error_report;
}

/*
 * While negotiating, new bytes, a state change or an ACK that shrank the
 * send queue (the client waits for CONFIRM's) drive the handshake; then
 * whatever TCP would have called runs.
 */
static void smr_tcp_hs_data_ready(struct sock *tsk);

static void smr_tcp_kick_hs(struct sock *tsk, struct smr_sock *smr)
{
	smr_hs_kick(smr);
}

static void smr_tcp_hs_event(struct sock *tsk, enum smr_tcp_cb cb)
{
	/* the three are installed and removed together */
	smr_tcp_hook_run(tsk, cb, &tsk->sk_data_ready, smr_tcp_hs_data_ready,
			 smr_tcp_kick_hs);
}

static void smr_tcp_hs_data_ready(struct sock *tsk)
{
	smr_tcp_hs_event(tsk, SMR_TCP_CB_DATA_READY);
}

static void smr_tcp_hs_state_change(struct sock *tsk)
{
	smr_tcp_hs_event(tsk, SMR_TCP_CB_STATE_CHANGE);
}

static void smr_tcp_hs_write_space(struct sock *tsk)
{
	smr_tcp_hs_event(tsk, SMR_TCP_CB_WRITE_SPACE);
}

/* Install (@on) or remove the negotiation callbacks. */
void smr_tcp_hook_negotiation(struct smr_sock *smr, bool on)
{
	struct sock *tsk = smr->tcp->sk;

	write_lock_bh(&tsk->sk_callback_lock);
	if (on && tsk->sk_data_ready != smr_tcp_hs_data_ready) {
		smr->tcp_saved[SMR_TCP_CB_DATA_READY] = tsk->sk_data_ready;
		smr->tcp_saved[SMR_TCP_CB_STATE_CHANGE] = tsk->sk_state_change;
		smr->tcp_saved[SMR_TCP_CB_WRITE_SPACE] = tsk->sk_write_space;
		tsk->sk_data_ready = smr_tcp_hs_data_ready;
		tsk->sk_state_change = smr_tcp_hs_state_change;
		tsk->sk_write_space = smr_tcp_hs_write_space;
	} else if (!on && tsk->sk_data_ready == smr_tcp_hs_data_ready) {
		tsk->sk_data_ready = smr->tcp_saved[SMR_TCP_CB_DATA_READY];
		tsk->sk_state_change = smr->tcp_saved[SMR_TCP_CB_STATE_CHANGE];
		tsk->sk_write_space = smr->tcp_saved[SMR_TCP_CB_WRITE_SPACE];
	}
	write_unlock_bh(&tsk->sk_callback_lock);
}

/*
 * After the handshake, leave TCP as a fresh connection would be: the
 * handshake's small segment must not hold the application's first small
 * write back (Minshall's Nagle), and the application's first data must be
 * acknowledged in quick-ACK mode as on a new connection, not with the
 * delayed ACKs the request/response handshake taught TCP.
 */
void smr_tcp_fresh_after_handshake(struct smr_sock *smr)
{
	struct sock *tsk = smr->tcp->sk;

	lock_sock(tsk);
	tcp_sk(tsk)->snd_sml = tcp_sk(tsk)->snd_una;
	inet_csk_exit_pingpong_mode(tsk);
	inet_csk(tsk)->icsk_ack.ato = 0;	/* next data re-enters quick ACK */
	release_sock(tsk);
}

static void smr_tcp_kick_accept(struct sock *tsk, struct smr_sock *smr)
{
	smr_sock_queue_work(&smr->sk, &smr->accept_work);
}

/* A listener's inner sock: a queued child drives the accept work. */
static void smr_tcp_listen_data_ready(struct sock *tsk)
{
	/* the owner: not an accepted child that inherited the hook */
	smr_tcp_hook_run(tsk, SMR_TCP_CB_DATA_READY, &tsk->sk_data_ready,
			 smr_tcp_listen_data_ready, smr_tcp_kick_accept);
}

void smr_tcp_hook_listener(struct smr_sock *smr)
{
	struct sock *tsk = smr->tcp->sk;

	write_lock_bh(&tsk->sk_callback_lock);
	if (tsk->sk_data_ready != smr_tcp_listen_data_ready) {
		smr->tcp_saved[SMR_TCP_CB_DATA_READY] = tsk->sk_data_ready;
		tsk->sk_data_ready = smr_tcp_listen_data_ready;
	}
	write_unlock_bh(&tsk->sk_callback_lock);
}

/* Point @tcp's wake-ups and errors at @smr; @smr becomes its owner. */
void smr_tcp_attach(struct smr_sock *smr, struct socket *tcp)
{
	struct sock *tsk = tcp->sk;

	smr->tcp = tcp;
	write_lock_bh(&tsk->sk_callback_lock);
	/* a child of an SMR listener inherited the listener's hooks */
	if (tsk->sk_data_ready == smr_tcp_listen_data_ready ||
	    tsk->sk_data_ready == smr_tcp_hs_data_ready)
		tsk->sk_data_ready = smr_tcp_defaults[SMR_TCP_CB_DATA_READY];
	if (tsk->sk_state_change == smr_tcp_hs_state_change)
		tsk->sk_state_change = smr_tcp_defaults[SMR_TCP_CB_STATE_CHANGE];
	if (tsk->sk_write_space == smr_tcp_hs_write_space)
		tsk->sk_write_space = smr_tcp_defaults[SMR_TCP_CB_WRITE_SPACE];
	if (tsk->sk_error_report == smr_tcp_error_report)
		tsk->sk_error_report = smr_tcp_defaults[SMR_TCP_CB_ERROR_REPORT];
	smr_tcp_set_owner(tsk, smr);
	smr->tcp_saved[SMR_TCP_CB_ERROR_REPORT] = tsk->sk_error_report;
	tsk->sk_error_report = smr_tcp_error_report;
	write_unlock_bh(&tsk->sk_callback_lock);
	if (smr->sk.sk_socket)
		smr_tcp_redirect_wq(smr, smr->sk.sk_socket);
	smr_tcp_sync_bufs(smr);
}

/*
 * TCP's SIGIOs go to the SMR socket's owners exactly when TCP's events are
 * the application's: settled on TCP, not a listener (whose TCP children
 * are not accept()able before their negotiation), the inner queue the SMR
 * socket's. sk_wake_async() looks at the inner sock's own SOCK_FASYNC,
 * which O_ASYNC sets on the SMR sock only; an empty fasync list costs
 * nothing. Inner sock lock held (sk_flags).
 */
static void smr_tcp_sync_fasync(struct smr_sock *smr)
{
	struct socket *sock = smr->sk.sk_socket;
	struct sock *tsk = smr->tcp->sk;

	sock_owned_by_me(tsk);
	sock_valbool_flag(tsk, SOCK_FASYNC,
			  sock && READ_ONCE(smr->mode) == SMR_MODE_TCP &&
			  tsk->sk_state != TCP_LISTEN &&
			  rcu_access_pointer(tsk->sk_wq) == &sock->wq);
}

/* TCP's wake-ups of the inner sock go to @sock's waiters from now on. */
void smr_tcp_redirect_wq(struct smr_sock *smr, struct socket *sock)
{
	struct sock *tsk = smr->tcp->sk;

	write_lock_bh(&tsk->sk_callback_lock);
	rcu_assign_pointer(tsk->sk_wq, &sock->wq);
	write_unlock_bh(&tsk->sk_callback_lock);
	lock_sock(tsk);
	smr_tcp_sync_fasync(smr);
	release_sock(tsk);
}

int smr_tcp_create(struct smr_sock *smr, struct net *net, int protocol,
		   int kern)
{
	int family = protocol == SMRPROTO_IPV6 ? PF_INET6 : PF_INET;
	struct socket *tcp;
	int err;

	err = __sock_create(net, family, SOCK_STREAM, IPPROTO_TCP, &tcp, kern);
	if (err)
		return err;
	smr_tcp_learn_defaults(tcp->sk);
	smr_tcp_attach(smr, tcp);
	return 0;
}

/*
 * Give the inner socket back its own callbacks and close it: TCP's close
 * rules (linger, FIN) apply; @reset closes abortively (RST), as TCP does
 * for connections a listener never handed out.
 */
void smr_tcp_release(struct smr_sock *smr, bool reset)
{
	struct socket *tcp = smr->tcp;
	struct sock *tsk;

	if (!tcp)
		return;
	tsk = tcp->sk;
	write_lock_bh(&tsk->sk_callback_lock);
	smr_tcp_set_owner(tsk, NULL);
	tsk->sk_error_report = smr->tcp_saved[SMR_TCP_CB_ERROR_REPORT];
	if (tsk->sk_data_ready == smr_tcp_hs_data_ready) {
		tsk->sk_data_ready = smr->tcp_saved[SMR_TCP_CB_DATA_READY];
		tsk->sk_state_change = smr->tcp_saved[SMR_TCP_CB_STATE_CHANGE];
		tsk->sk_write_space = smr->tcp_saved[SMR_TCP_CB_WRITE_SPACE];
	} else if (tsk->sk_data_ready == smr_tcp_listen_data_ready) {
		tsk->sk_data_ready = smr->tcp_saved[SMR_TCP_CB_DATA_READY];
	}
	write_unlock_bh(&tsk->sk_callback_lock);

	if (reset)
		sock_no_linger(tsk);
	/*
	 * ->file was lent for TCP paths that read the file's flags; the inner
	 * socket must not think it owns a file when it is released.
	 */
	WRITE_ONCE(tcp->file, NULL);
	smr->tcp = NULL;
	/* blocks here for SO_LINGER, waiting on the SMR socket's wait queue */
	sock_release(tcp);
}

/* Process context: drop the inner error if SO_ERROR consumed the SMR copy. */
void smr_tcp_err_sync(struct smr_sock *smr)
{
	int err = READ_ONCE(smr->tcp_err_mirrored);

	if (!err || READ_ONCE(smr->sk.sk_err))
		return;
	if (cmpxchg(&smr->tcp_err_mirrored, err, 0) == err)
		cmpxchg(&smr->tcp->sk->sk_err, err, 0);
}

/* A TCP call returned @ret; if that was the mirrored error, drop the copy. */
void smr_tcp_err_consumed(struct smr_sock *smr, int ret)
{
	int err = READ_ONCE(smr->tcp_err_mirrored);

	if (!err || ret != -err)
		return;
	if (cmpxchg(&smr->tcp_err_mirrored, err, 0) == err)
		cmpxchg(&smr->sk.sk_err, err, 0);
}

/* Has the inner connection ever reached ESTABLISHED? */
bool smr_tcp_was_connected(const struct smr_sock *smr)
{
	int state = READ_ONCE(smr->tcp->sk->sk_state);

	return (1 << state) & (TCPF_ESTABLISHED | TCPF_CLOSE_WAIT |
			       TCPF_FIN_WAIT1 | TCPF_FIN_WAIT2 |
			       TCPF_CLOSING | TCPF_LAST_ACK | TCPF_TIME_WAIT);
}

/*
 * getsockopt(SOL_SOCKET) reads the SMR sock, but TCP sizes its buffers
 * itself (at connect and by autotuning): show TCP's current values.
 */
void smr_tcp_sync_bufs(struct smr_sock *smr)
{
	struct sock *tsk = smr->tcp->sk;

	WRITE_ONCE(smr->sk.sk_sndbuf, READ_ONCE(tsk->sk_sndbuf));
	WRITE_ONCE(smr->sk.sk_rcvbuf, READ_ONCE(tsk->sk_rcvbuf));
}

/*
 * The inner sock's SO_RCVLOWAT: 1 until the socket settles on TCP, the
 * application's (the SMR sock's) from then on. TCP calls data_ready only
 * once its queue meets the mark, and the handshake's messages, tens of
 * bytes, must wake the negotiation whatever mark the application set (a
 * listener's children inherit its inner mark, so a listener keeps 1); in
 * RDMA mode the inner connection carries no application bytes. In TCP
 * mode TCP's own set_rcvlowat takes it (its cap, its buffer growth, its
 * wake-up when what is queued meets the mark): when the application sets
 * it (@set: TCP wakes on every set), or when the mark differs. Mode and
 * mark are read under the inner lock, so of two racing syncs the last
 * sees both.
 */
static bool smr_tcp_sync_rcvlowat_locked(struct smr_sock *smr, bool set)
{
	struct socket *tcp = smr->tcp;
	struct sock *tsk = tcp->sk;
	int lowat = READ_ONCE(smr->sk.sk_rcvlowat);

	sock_owned_by_me(tsk);
	if (READ_ONCE(smr->mode) != SMR_MODE_TCP || tsk->sk_state == TCP_LISTEN) {
		WRITE_ONCE(tsk->sk_rcvlowat, 1);
	} else if (!tcp->ops->set_rcvlowat) {
		WRITE_ONCE(tsk->sk_rcvlowat, lowat);
	} else if (set || READ_ONCE(tsk->sk_rcvlowat) != lowat) {
		tcp->ops->set_rcvlowat(tsk, lowat);
		return true;
	}
	return false;
}

/*
 * The inner sock's SO_PEEK_OFF: off (-1) until the socket settles on TCP
 * (the handshake peeks at the inner stream, and TCP's children clone a
 * listener's), the application's (the SMR sock's) from then on. Inner sock
 * lock held: of a racing set and settle, the last sees both.
 */
static void smr_tcp_sync_peek_off_locked(struct smr_sock *smr)
{
	struct sock *tsk = smr->tcp->sk;

	sock_owned_by_me(tsk);
	WRITE_ONCE(tsk->sk_peek_off,
		   READ_ONCE(smr->mode) == SMR_MODE_TCP &&
		   tsk->sk_state != TCP_LISTEN ?
		   READ_ONCE(smr->sk.sk_peek_off) : -1);
}

/* The application set SO_PEEK_OFF. Process context, inner lock not held. */
void smr_tcp_sync_peek_off(struct smr_sock *smr)
{
	struct sock *tsk = smr->tcp->sk;

	lock_sock(tsk);
	smr_tcp_sync_peek_off_locked(smr);
	release_sock(tsk);
}

/*
 * Before 6.2 the options set last reach TCP before it acts (buffer sizes
 * for its mark): not for a child before accept(), whose SMR sock has
 * defaults where TCP's clone has its listener's options.
 */
static void smr_tcp_copy_before(struct smr_sock *smr)
{
	if (smr->sk.sk_socket && READ_ONCE(smr->mode) == SMR_MODE_TCP)
		smr_tcp_copy_sockopts(smr);
}

/*
 * The application set SO_RCVLOWAT (@set), or a child starts negotiating.
 * Process context, inner sock lock not held; a BPF program, which may not
 * sleep, gets the plain writes.
 */
void smr_tcp_sync_rcvlowat(struct smr_sock *smr, bool set)
{
	struct sock *tsk = smr->tcp->sk;

	if (has_current_bpf_ctx()) {
		WRITE_ONCE(tsk->sk_rcvlowat,
			   READ_ONCE(smr->mode) == SMR_MODE_TCP &&
			   READ_ONCE(tsk->sk_state) != TCP_LISTEN ?
			   READ_ONCE(smr->sk.sk_rcvlowat) : 1);
		return;
	}
	smr_tcp_copy_before(smr);
	lock_sock(tsk);
	smr_tcp_sync_rcvlowat_locked(smr, set);
	release_sock(tsk);
	smr_tcp_sync_bufs(smr);
}

/*
 * The socket settled on TCP (after the negotiation said so, or without
 * one): the application's mark and SIGIOs go to TCP, SIGIOs first so
 * that a mark TCP finds met signals. @connected: the negotiation of a
 * connection just ended, and TCP's own SIGIO for it (POLL_OUT at the
 * handshake, POLL_IN for bytes that came during the negotiation) went
 * nowhere: send them now, as TCP would have. Process context, inner sock
 * lock not held.
 */
void smr_tcp_settled(struct smr_sock *smr, bool connected)
{
	struct sock *tsk = smr->tcp->sk;
	bool readable, tcp_told;

	smr_tcp_copy_before(smr);
	lock_sock(tsk);
	smr_tcp_sync_fasync(smr);
	connected = connected && smr_tcp_was_connected(smr);
	if (connected)
		sk_wake_async(&smr->sk, SOCK_WAKE_IO, POLL_OUT);
	smr_tcp_sync_peek_off_locked(smr);
	/* TCP's set_rcvlowat signals a met mark itself */
	tcp_told = smr_tcp_sync_rcvlowat_locked(smr, false);
	readable = tcp_inq(tsk) >= max(READ_ONCE(tsk->sk_rcvlowat), 1) ||
		   (tsk->sk_shutdown & RCV_SHUTDOWN);
	release_sock(tsk);
	smr_tcp_sync_bufs(smr);
	if (connected && readable && !tcp_told)
		sk_wake_async(&smr->sk, SOCK_WAKE_WAITD, POLL_IN);
}

/*
 * listen(): TCP's children negotiate before accept() may have them, and
 * they inherit the inner mark and peek offset; so from before listen() on,
 * the inner sock has mark 1, no peek offset and no SIGIOs (a socket
 * disconnected in TCP mode had the application's), and again once it
 * listens (a racing setsockopt() saw no listener yet). After a listen()
 * that failed, or once the socket stopped listening (@listening false),
 * they are synced back. Process context, inner sock lock not held.
 */
void smr_tcp_listen_prepare(struct smr_sock *smr, bool listening)
{
	struct sock *tsk = smr->tcp->sk;

	lock_sock(tsk);
	if (listening && (1 << tsk->sk_state) & (TCPF_CLOSE | TCPF_LISTEN)) {
		WRITE_ONCE(tsk->sk_rcvlowat, 1);
		WRITE_ONCE(tsk->sk_peek_off, -1);
		sock_reset_flag(tsk, SOCK_FASYNC);
	} else {
		smr_tcp_sync_fasync(smr);
		smr_tcp_sync_peek_off_locked(smr);
		smr_tcp_sync_rcvlowat_locked(smr, false);
	}
	release_sock(tsk);
}

/*
 * Options the socket layer refuses on a non-inet sock (SO_REUSEPORT,
 * SO_ZEROCOPY) are copied from the inner sock after it accepted them, so
 * that getsockopt() shows them.
 */
void smr_tcp_sync_sockopts(struct smr_sock *smr)
{
	struct sock *sk = &smr->sk;
	struct sock *tsk = smr->tcp->sk;

	smr_tcp_sync_bufs(smr);
	lock_sock(sk);
	sk->sk_reuseport = tsk->sk_reuseport;
	sock_valbool_flag(sk, SOCK_ZEROCOPY, sock_flag(tsk, SOCK_ZEROCOPY));
	release_sock(sk);
}
