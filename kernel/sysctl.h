/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SMR: the net.smr.* tunables (sysctl.c owns them; Documentation/admin
 * guide, "Sysctls"). Every layer reads them with READ_ONCE(): root may
 * change one at any time, and each use takes one value.
 */
#ifndef _SMR_SYSCTL_H
#define _SMR_SYSCTL_H

/* defaults */
#define SMR_HS_TIMEOUT_MS_DEFAULT	3000		/* handshake_timeout_ms */
#define SMR_LINK_IDLE_MS_DEFAULT	30000		/* link_idle_timeout_ms */
#define SMR_ORPHAN_TIMEOUT_MS_DEFAULT	60000		/* orphan_timeout_ms */
#define SMR_BUF_MAX_DEFAULT		(4 << 20)	/* buf_max */
/*
 * wmem: the least send ring of a socket whose SO_SNDBUF was not set. TCP's
 * 16 KiB start suits a window that autotuning grows; an SMR ring starts at
 * this and grows once only for a writer that fills it (tx.c), so
 * idle connections pin little.
 */
#define SMR_BUF_WMEM_DEFAULT		(64 << 10)
#define SMR_BUF_MEM_MAX_DEFAULT		(256L << 20)	/* mem_max */
/* mem_user_max: three quarters of mem_max, one user leaves the others room */
#define SMR_BUF_MEM_USER_MAX_DEFAULT	(192L << 20)
/*
 * negotiation_records_max, per network namespace: some 2 MiB of records at
 * most; 8192 SYNs in flight to its listeners and 8192 connects (4096 of one
 * user) before a connection falls back for want of one (tcp_option.c).
 */
#define SMR_NEGOT_MAX_DEFAULT		16384
/*
 * mem_pool_max, mem_pool_link_max: what pools may keep for reuse, a
 * quarter of mem_max in all, half of that for one link (one peer's
 * churn does not take every link's pooling).
 */
#define SMR_BUF_MEM_POOL_MAX_DEFAULT	(64L << 20)
#define SMR_BUF_MEM_POOL_LINK_MAX_DEFAULT (32L << 20)
/*
 * mem_unaccepted_max, mem_unaccepted_peer_max: what one listener's
 * children may hold before accept(), half of mem_max, and what those of
 * one peer may hold, half of that: a peer that never lets the application
 * accept leaves the listener's other peers the other half, and other
 * listeners half of mem_max. One peer's burst of connections is
 * pre-accept as a whole while their handshakes run (300 at once of the
 * default 192 KiB are some 56 MiB), hence no smaller.
 */
#define SMR_BUF_MEM_UNACCEPTED_MAX_DEFAULT (128L << 20)
#define SMR_BUF_MEM_UNACCEPTED_PEER_MAX_DEFAULT (64L << 20)
/*
 * links_max: RDMA links of both kinds (each pins some 300 KB of kernel
 * memory); the peers' links at most half of it, the links one user's
 * connects created at most a quarter (link.c, smr_link_room_*_locked()).
 */
#define SMR_LINKS_MAX_DEFAULT		256

/* bounds root may write */
#define SMR_TIMEOUT_MS_MIN		10
#define SMR_HS_TIMEOUT_MS_MAX		600000		/* ten minutes */
#define SMR_TIMEOUT_MS_MAX		(24 * 3600 * 1000)	/* a day */
#define SMR_NEGOT_MAX_MIN		64
#define SMR_NEGOT_MAX_MAX		1048576
#define SMR_LINKS_MAX_MIN		8	/* a quarter is 2 links */
#define SMR_LINKS_MAX_MAX		4096

extern int smr_hs_timeout_ms;
extern int smr_link_idle_ms;
extern int smr_orphan_timeout_ms;
extern int smr_buf_max;
extern int smr_buf_wmem;
extern int smr_cdc_inline_max;
extern long smr_buf_mem_max;
extern long smr_buf_mem_user_max;
extern int smr_negot_max;
extern long smr_buf_mem_pool_max;
extern long smr_buf_mem_pool_link_max;
extern long smr_buf_mem_unaccepted_max;
extern long smr_buf_mem_unaccepted_peer_max;
extern int smr_links_max;

int smr_sysctl_init(void);
void smr_sysctl_exit(void);

#endif /* _SMR_SYSCTL_H */
