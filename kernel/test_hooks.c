// SPDX-License-Identifier: GPL-2.0
/*
 * SMR: test hooks, built only into the test module (Kbuild
 * SMR_TEST_HOOKS=1: make modules-test, scripts/build-copy --test), which
 * the test suites boot (scripts/vm-run --module test). The product module
 * has none of this, nor its module parameter.
 *
 * fault_cdc (selftests/rdma, case "hostile"): the next CDC that carries
 * data breaks rule N of Documentation/protocol.rst's cursor checks, so
 * that a test can see the receiver refuse it. It reads 0 again once used.
 *
 * fault_answer_old (selftests/attack, case "mixed_version"): while set,
 * this host negotiates as a module older than LINK_REQUEST: its SYN-ACK
 * answers lack SMR_OPT_F_LINK_REQUEST and a LINK_REQUEST it receives is
 * an unknown message (the connection resets), so a rolling upgrade can be
 * tested with one build.
 *
 * test_rx_eof_window_ms (selftests smr_api, rx_eof_after_its_bytes): the
 * next recvmsg() that finds nothing to read and no EOF waits, between its
 * look at the cursors and its verdict, until the peer's EOF has come (at
 * most N ms), so that the peer's last bytes and EOF arrive in that window,
 * as a CDC on another CPU may bring them. It reads 0 again once taken;
 * test_rx_eof_window_hits counts the windows that ended with the EOF in.
 *
 * test_shutdown_wr_window_ms (selftests smr_api, shutdown_wr_keeps_peer_eof):
 * the next shutdown(SHUT_WR) in mode rdma waits the same way, just before
 * it marks the socket shut for writing, so that the peer's EOF (its CDC
 * marks the socket shut for reading) comes in between, as on another CPU;
 * test_shutdown_wr_window_hits counts those windows. It widens the gap a
 * mark computed outside conn->lock had: the test sees an unlocked mark
 * only if it is made of bits read before this window.
 *
 * test_tx_shutdown_window_ms (selftests smr_api, shutdown_wr_during_send):
 * the next send, its bytes copied into the ring but not yet committed,
 * waits until the socket is shut for writing (at most N ms), as when
 * another thread's shutdown(SHUT_WR) comes then; the hits count the
 * windows that saw it (none once shutdown waits for the sender).
 *
 * test_tx_grow_delay_ms (selftests smr_api, nonblock_send_not_held_by_grow):
 * the next send ring grow waits N ms once it has its bigger ring, before
 * it gives it to the connection, as if its registration had waited behind
 * a busy link's requests (rxe runs the LOCAL_INV that leads it only once
 * they completed);
 * test_tx_grow_delay_hits counts those waits.
 *
 * test_tx_grow_hold (selftests faults, qp_fatal): while 1, every send ring
 * growth that got its ring holds it, and its pin on the link's pool, for
 * as long (at most SMR_TEST_HOLD_MAX_MS) before it gives it to its
 * connection, so that a link can fail under it; test_tx_grow_held counts
 * the growths that began to hold.
 *
 * test_hs_answer_delay_ms (selftests smr_api, handshake_slow_client and
 * handshake_peer_gave_up): the next client that read its server's ACCEPT
 * waits N ms before it goes on (buffers, CONFIRM), as a client whose
 * handshake work or buffer registration runs late on a loaded host;
 * test_hs_answer_delay_hits counts those waits.
 *
 * Delays (not windows, which end when their event comes) last
 * SMR_TEST_DELAY_MAX_MS at most: their callers hold locks.
 *
 * Locking and lifetimes: fault_cdc and the windows are claimed by
 * cmpxchg, so one CDC (or one caller) takes each (fault_answer_old
 * holds while set); the CDC's fields are the caller's
 * (conn->lock held); a caller in a window holds no spinlock while it
 * waits (a reader or sender holds its sock lock, shutdown() that too).
 */
#include <linux/delay.h>
#include <linux/moduleparam.h>
#include <linux/lockdep.h>

#include "smr.h"
#include "test_hooks.h"

enum smr_fault_cdc {
	SMR_FAULT_NONE,
	SMR_FAULT_PROD_PAST_ROOM = 1,	/* beyond what the receiver consumed + S */
	SMR_FAULT_PROD_BACKWARDS,
	SMR_FAULT_CONS_AHEAD,		/* consumed more than was produced */
	SMR_FAULT_URG_OUTSIDE,		/* urgent byte not in the new data */
	SMR_FAULT_COUNT_RANGE,		/* prod.count not below S */
	SMR_FAULT_INLINE_OVERLONG,	/* more inline data than prod adds */
	SMR_FAULT_MAX,
};

static int smr_fault_cdc;
module_param_named(fault_cdc, smr_fault_cdc, int, 0644);
MODULE_PARM_DESC(fault_cdc,
		 "test only: the next data CDC breaks cursor rule N (1-6)");

static bool smr_fault_answer_old;
module_param_named(fault_answer_old, smr_fault_answer_old, bool, 0644);
MODULE_PARM_DESC(fault_answer_old,
		 "test only: negotiate as a module older than LINK_REQUEST");

/* This host answers as a module older than LINK_REQUEST would. */
bool smr_test_answer_old(void)
{
	return READ_ONCE(smr_fault_answer_old);
}

/*
 * A one-shot hook: writing N to <name>_ms arms it for the next caller that
 * passes it; <name>_hits counts the times it was taken.
 */
struct smr_test_shot {
	unsigned int ms;
	atomic_t hits;
};

/* defines smr_<name>_shot */
#define DEFINE_SMR_TEST_SHOT(name, ms_desc, hits_desc)			\
	static struct smr_test_shot smr_##name##_shot;			\
	module_param_named(name##_ms, smr_##name##_shot.ms, uint, 0644); \
	MODULE_PARM_DESC(name##_ms, "test only: " ms_desc);		\
	module_param_named(name##_hits, smr_##name##_shot.hits.counter, int, \
			   0444);					\
	MODULE_PARM_DESC(name##_hits, "test only: " hits_desc)

DEFINE_SMR_TEST_SHOT(test_rx_eof_window,
		     "the next reader that finds nothing waits up to N ms for the peer's EOF before its verdict",
		     "test_rx_eof_window_ms windows that ended with the peer's EOF in");

DEFINE_SMR_TEST_SHOT(test_shutdown_wr_window,
		     "the next shutdown(SHUT_WR) waits up to N ms for the peer's EOF before it marks the socket",
		     "test_shutdown_wr_window_ms windows that ended with the peer's EOF in");

DEFINE_SMR_TEST_SHOT(test_tx_shutdown_window,
		     "the next send waits up to N ms, its bytes copied but not committed, for a shutdown(SHUT_WR)",
		     "test_tx_shutdown_window_ms windows that ended with the socket shut for writing");

DEFINE_SMR_TEST_SHOT(test_tx_grow_delay,
		     "the next send ring grow waits N ms before it takes its bigger ring, as a slow registration on a busy link does",
		     "test_tx_grow_delay_ms waits taken");

DEFINE_SMR_TEST_SHOT(test_hs_answer_delay,
		     "the next client that read its server's ACCEPT waits N ms before it goes on",
		     "test_hs_answer_delay_ms waits taken");

/* a delay holds locks others wait for: at most this long */
#define SMR_TEST_DELAY_MAX_MS	5000U

/*
 * Take the delay @shot arms, if armed (the caller that swaps its ms to 0
 * takes it): sleep its length, at most SMR_TEST_DELAY_MAX_MS, and count it.
 * Process context.
 */
static void smr_test_delay(struct smr_test_shot *shot)
{
	unsigned int ms = READ_ONCE(shot->ms);

	might_sleep();
	if (!ms || cmpxchg(&shot->ms, ms, 0) != ms)
		return;
	msleep(min(ms, SMR_TEST_DELAY_MAX_MS));
	atomic_inc(&shot->hits);
}

static bool smr_test_tx_grow_hold;
module_param_named(test_tx_grow_hold, smr_test_tx_grow_hold, bool, 0644);
MODULE_PARM_DESC(test_tx_grow_hold,
		 "test only: while 1, send ring growths hold the ring they got");

static atomic_t smr_test_tx_grow_held = ATOMIC_INIT(0);
module_param_named(test_tx_grow_held, smr_test_tx_grow_held.counter, int,
		   0444);
MODULE_PARM_DESC(test_tx_grow_held,
		 "test only: send ring growths that began to hold their ring");

/* a hold keeps a link's teardown waiting: at most this long */
#define SMR_TEST_HOLD_MAX_MS	60000

/* See test_tx_grow_delay_ms and test_tx_grow_hold above. Process context. */
void smr_test_tx_grow_delay(void)
{
	unsigned long until;

	smr_test_delay(&smr_test_tx_grow_delay_shot);
	if (!READ_ONCE(smr_test_tx_grow_hold))
		return;
	atomic_inc(&smr_test_tx_grow_held);
	until = jiffies + msecs_to_jiffies(SMR_TEST_HOLD_MAX_MS);
	while (READ_ONCE(smr_test_tx_grow_hold) && time_before(jiffies, until))
		msleep(20);
}

/* See test_hs_answer_delay_ms above. Process context, sock lock held. */
void smr_test_hs_answer_delay(void)
{
	smr_test_delay(&smr_test_hs_answer_delay_shot);
}

/* What a window waits for. */
static bool smr_test_peer_eof_in(struct smr_conn *conn)
{
	return READ_ONCE(conn->rx_flags) & SMR_CDC_F_DONE_WRITING;
}

static bool smr_test_shut_for_writing(struct smr_conn *conn)
{
	return READ_ONCE(smr_of_conn(conn)->sk.sk_shutdown) & SEND_SHUTDOWN;
}

/*
 * Take the window @shot arms, if armed: wait until @came holds (counted in
 * its hits) or the time is up. Process context, no spinlock held.
 */
static void smr_test_window(struct smr_conn *conn, struct smr_test_shot *shot,
			    bool (*came)(struct smr_conn *conn))
{
	unsigned int ms = READ_ONCE(shot->ms);
	unsigned long until;

	might_sleep();
	if (!ms || cmpxchg(&shot->ms, ms, 0) != ms)
		return;
	until = jiffies + msecs_to_jiffies(ms);
	while (time_before(jiffies, until)) {
		if (came(conn)) {
			atomic_inc(&shot->hits);
			return;
		}
		usleep_range(1000, 2000);
	}
}

/* See test_rx_eof_window_ms above. */
void smr_test_rx_window(struct smr_conn *conn)
{
	smr_test_window(conn, &smr_test_rx_eof_window_shot,
			smr_test_peer_eof_in);
}

/* See test_shutdown_wr_window_ms above. */
void smr_test_shutdown_window(struct smr_conn *conn)
{
	smr_test_window(conn, &smr_test_shutdown_wr_window_shot,
			smr_test_peer_eof_in);
}

/* See test_tx_shutdown_window_ms above. */
void smr_test_tx_window(struct smr_conn *conn)
{
	smr_test_window(conn, &smr_test_tx_shutdown_window_shot,
			smr_test_shut_for_writing);
}

/*
 * Break the rule fault_cdc names in @cdc, about to carry @n bytes (@data:
 * its inline bytes). Returns the rule broken (0: none), for
 * smr_test_cdc_fault_unsent() if the CDC does not go out.
 */
int smr_test_cdc_fault(struct smr_conn *conn, struct smr_cdc *cdc, u32 n,
		       u8 *data)
{
	int mode = READ_ONCE(smr_fault_cdc);
	u64 sent = conn->tx_sent;

	lockdep_assert_held(&conn->lock);
	if (mode <= SMR_FAULT_NONE || mode >= SMR_FAULT_MAX ||
	    (mode == SMR_FAULT_PROD_BACKWARDS && !sent) ||
	    (mode == SMR_FAULT_INLINE_OVERLONG &&
	     (!cdc->inline_len || cdc->inline_len >= SMR_CDC_INLINE_MAX)))
		return SMR_FAULT_NONE;
	if (cmpxchg(&smr_fault_cdc, mode, SMR_FAULT_NONE) != mode)
		return SMR_FAULT_NONE;
	switch (mode) {
	case SMR_FAULT_PROD_PAST_ROOM:
		smr_cursor_from_count(sent + conn->peer_rmb_size + 1,
				      conn->peer_rmb_size, &cdc->prod);
		break;
	case SMR_FAULT_PROD_BACKWARDS:
		smr_cursor_from_count(sent - 1, conn->peer_rmb_size,
				      &cdc->prod);
		break;
	case SMR_FAULT_CONS_AHEAD:
		/* the peer never sent past our consumer + S */
		smr_cursor_from_count(conn->rx_cons + conn->rmb->size + 1,
				      conn->rmb->size, &cdc->cons);
		break;
	case SMR_FAULT_URG_OUTSIDE:
		cdc->flags |= SMR_CDC_F_URGENT;
		smr_cursor_from_count(sent + n, conn->peer_rmb_size,
				      &cdc->urg);
		break;
	case SMR_FAULT_COUNT_RANGE:
		cdc->prod.count = conn->peer_rmb_size;
		break;
	case SMR_FAULT_INLINE_OVERLONG:
		data[cdc->inline_len++] = 0;
		break;
	}
	return mode;
}

/* The CDC that took @fault did not go out: the next one takes it. */
void smr_test_cdc_fault_unsent(int fault)
{
	if (fault)
		cmpxchg(&smr_fault_cdc, SMR_FAULT_NONE, fault);
}
