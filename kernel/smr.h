/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: shared-memory sockets over RDMA - core socket state.
 *
 * Locking and lifetimes
 * ---------------------
 * struct smr_sock embeds the struct sock that the socket layer owns; the
 * socket's file holds the only long-lived reference, dropped in
 * smr_release(). Syscalls on one socket may run concurrently; the socket
 * layer guarantees that none is in flight when ->release runs.
 *
 * @tcp, the inner TCP socket, is set once before the SMR socket becomes
 * visible (create or accept) and released only in smr_release(), so syscall
 * paths read it without a lock. All data and connection work is delegated to
 * it without holding the SMR sock lock: the inner socket has its own lock,
 * and blocking there must not stall poll, close or other threads.
 *
 * The inner sock's sk_wq points at the SMR socket's wait queue (see
 * smr_tcp_attach()), so TCP's own wake-ups reach SMR pollers and SIGIO
 * owners directly. sk_user_data of the inner sock points back at the
 * smr_sock; it is written and cleared under the inner sk_callback_lock and
 * read under it (read side) by the softirq error callback.
 *
 * @mode leaves SMR_MODE_PENDING exactly once, by cmpxchg; @reason is written
 * before that and never after. Byte counters are atomics: send and receive
 * may run on different CPUs at once.
 */
#ifndef _SMR_H
#define _SMR_H

#include <linux/atomic.h>
#include <linux/net.h>
#include <net/sock.h>
#include <linux/smr.h>

struct smr_sock {
	struct sock		sk;		/* must be first: smr_sk() casts */
	struct socket		*tcp;		/* inner TCP socket (see above) */
	/* inner sock's error callback, restored in smr_tcp_detach() */
	void			(*tcp_saved_error_report)(struct sock *sk);
	/* error copied from the inner sock into sk.sk_err, not yet consumed */
	int			tcp_err_mirrored;
	u8			mode;		/* enum smr_mode */
	u8			reason;		/* enum smr_reason */
	u8			peer_reason;	/* enum smr_reason, from the peer */
	atomic64_t		bytes_sent;
	atomic64_t		bytes_received;
	atomic64_t		rdma_bytes_sent;
	atomic64_t		rdma_bytes_received;
};

static inline struct smr_sock *smr_sk(const struct sock *sk)
{
	return (struct smr_sock *)sk;
}

extern int smr_family;

/* af_smr.c: the address family and its proto_ops */
int smr_af_init(void);
void smr_af_exit(void);
void smr_set_mode(struct smr_sock *smr, enum smr_mode mode,
		  enum smr_reason reason);

/* tcp_path.c: the inner TCP connection and the fallback data path */
int smr_tcp_create(struct smr_sock *smr, struct net *net, int protocol,
		   int kern);
void smr_tcp_attach(struct smr_sock *smr, struct socket *tcp);
void smr_tcp_release(struct smr_sock *smr);
void smr_tcp_err_sync(struct smr_sock *smr);
void smr_tcp_err_consumed(struct smr_sock *smr, int ret);
bool smr_tcp_was_connected(const struct smr_sock *smr);
void smr_tcp_sync_bufs(struct smr_sock *smr);
#ifdef HAVE_SOCK_CUSTOM_SOCKOPT
static inline void smr_tcp_copy_sockopts(struct smr_sock *smr) { }
#else
void smr_tcp_copy_sockopts(struct smr_sock *smr);
#endif

/* stats.c: per-network-namespace counters, /proc/net/smr/stats */
enum smr_stat {
	SMR_STAT_SOCKETS_CREATED,
	SMR_STAT_SOCKETS_ACTIVE,
	SMR_STAT_LISTENS,
	SMR_STAT_CONNECTS,
	SMR_STAT_ACCEPTS,
	SMR_STAT_MODE_TCP,
	SMR_STAT_MODE_RDMA,
	SMR_STAT_TCP_BYTES_SENT,
	SMR_STAT_TCP_BYTES_RECEIVED,
	SMR_STAT_RDMA_BYTES_SENT,
	SMR_STAT_RDMA_BYTES_RECEIVED,
	SMR_STAT_FALLBACK_FIRST,	/* one counter per enum smr_reason */
	SMR_STAT_MAX = SMR_STAT_FALLBACK_FIRST + SMR_REASON_MAX,
};

int smr_stats_init(void);
void smr_stats_exit(void);
void smr_stat_add(const struct net *net, enum smr_stat stat, s64 delta);

static inline void smr_stat_inc(const struct net *net, enum smr_stat stat)
{
	smr_stat_add(net, stat, 1);
}

#endif /* _SMR_H */
