/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: hooks only the test build of the module has (Kbuild
 * SMR_TEST_HOOKS=1, make modules-test; the suites boot that build). The
 * product module compiles each call below to nothing.
 */
#ifndef _SMR_TEST_HOOKS_H
#define _SMR_TEST_HOOKS_H

#include <linux/types.h>

struct smr_conn;
struct smr_cdc;

#ifdef SMR_TEST_HOOKS
int smr_test_cdc_fault(struct smr_conn *conn, struct smr_cdc *cdc, u32 n,
		       u8 *data);
void smr_test_cdc_fault_unsent(int fault);
bool smr_test_answer_old(void);
void smr_test_rx_window(struct smr_conn *conn);
void smr_test_shutdown_window(struct smr_conn *conn);
void smr_test_tx_window(struct smr_conn *conn);
void smr_test_hs_answer_delay(void);
void smr_test_tx_grow_delay(void);
#else
/* The rule of protocol.rst a data CDC about to be posted breaks: none. */
static inline int smr_test_cdc_fault(struct smr_conn *conn,
				     struct smr_cdc *cdc, u32 n, u8 *data)
{
	return 0;
}

/* A CDC smr_test_cdc_fault() broke did not go out. */
static inline void smr_test_cdc_fault_unsent(int fault) { }

/* This host answers as a module older than LINK_REQUEST would: never. */
static inline bool smr_test_answer_old(void)
{
	return false;
}

/* A reader that found nothing waits here for the peer's EOF: never. */
static inline void smr_test_rx_window(struct smr_conn *conn) { }

/* shutdown(SHUT_WR) waits here for the peer's EOF: never. */
static inline void smr_test_shutdown_window(struct smr_conn *conn) { }

/* A sender with uncommitted bytes waits here for a shutdown: never. */
static inline void smr_test_tx_window(struct smr_conn *conn) { }

/* A client that read the server's ACCEPT is slow to go on: never. */
static inline void smr_test_hs_answer_delay(void) { }

/* A send ring grow is slow to get its ring: never. */
static inline void smr_test_tx_grow_delay(void) { }
#endif

#endif /* _SMR_TEST_HOOKS_H */
