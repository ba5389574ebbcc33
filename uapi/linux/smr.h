/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * SMR: shared-memory sockets over RDMA, the user-visible interface.
 *
 * An SMR socket is created with socket(smr_family, SOCK_STREAM, proto) where
 * smr_family is the module's "family" parameter (read it from
 * /sys/module/smr/parameters/family; SMR_FAMILY_DEFAULT unless the
 * administrator changed it) and proto is SMRPROTO_IPV4 or SMRPROTO_IPV6.
 * Addresses are plain struct sockaddr_in / sockaddr_in6 with sin_family
 * AF_INET / sin6_family AF_INET6.
 */
#ifndef _UAPI_LINUX_SMR_H
#define _UAPI_LINUX_SMR_H

#include <linux/types.h>

/*
 * Default address family number. 19 was AF_ECONET, whose implementation left
 * the kernel in 3.5: no 6.x kernel registers it, and AF_SMC (43) is left free
 * so that both families load side by side.
 */
#define SMR_FAMILY_DEFAULT	19
#define SMR_FAMILY_SYSFS	"/sys/module/smr/parameters/family"

#define SMRPROTO_IPV4		0	/* inner TCP over IPv4 */
#define SMRPROTO_IPV6		1	/* inner TCP over IPv6 */

/* getsockopt level private to SMR sockets ("SMR" in ASCII). */
#define SOL_SMR			0x534d52

/* getsockopt(fd, SOL_SMR, SMR_INFO, &struct smr_info, &len) */
#define SMR_INFO		1

/*
 * setsockopt(fd, SOL_SMR, SMR_REUSEPORT, &int, sizeof(int)): SO_REUSEPORT.
 * Before 6.2 the socket layer keeps SOL_SOCKET options from a family's own
 * setsockopt, and stable kernels refuse SO_REUSEPORT outside AF_INET and
 * AF_INET6 (EOPNOTSUPP): there, this sets it (getsockopt(SO_REUSEPORT)
 * reads it back). The preload helper falls back to it by itself.
 */
#define SMR_REUSEPORT		2

/* How the socket's bytes travel. */
enum smr_mode {
	SMR_MODE_PENDING	= 0,	/* not connected yet, or deciding */
	SMR_MODE_RDMA		= 1,	/* payload by RDMA WRITE into the peer's RMB */
	SMR_MODE_TCP		= 2,	/* fallback: payload over the inner TCP connection */
};

/*
 * Why a socket is not (or not yet) in SMR_MODE_RDMA. Numbers are ABI: new
 * reasons are appended, never renumbered.
 */
enum smr_reason {
	SMR_REASON_NONE			= 0,	/* in RDMA mode, or still pending */
	SMR_REASON_NOT_NEGOTIATED	= 1,	/* this module version does not negotiate yet */
	SMR_REASON_PEER_NO_SMR		= 2,	/* peer's SYN/SYN-ACK carried no SMR option */
	SMR_REASON_OPTION_NO_SPACE	= 3,	/* no room for the option in the SYN */
	SMR_REASON_SYN_COOKIES		= 4,	/* listener answered with a SYN cookie */
	SMR_REASON_NO_RDMA_DEVICE	= 5,	/* no RDMA device for the route to the peer */
	SMR_REASON_PEER_DECLINED	= 6,	/* peer declined; see peer_reason */
	SMR_REASON_HANDSHAKE_TIMEOUT	= 7,	/* handshake did not finish in time */
	SMR_REASON_VERSION_MISMATCH	= 8,	/* no common protocol version */
	SMR_REASON_NO_MEMORY		= 9,	/* buffers could not be allocated */
	SMR_REASON_LINK_FAILURE		= 10,	/* the RDMA link could not be set up */
	SMR_REASON_PROTOCOL_ERROR	= 11,	/* malformed handshake message */
	SMR_REASON_RDMA_UNAVAILABLE	= 12,	/* handshake done, RDMA data path not built in */
	SMR_REASON_OPTION_ECHOED	= 13,	/* SYN-ACK option failed the nonce proof */
	SMR_REASON_NEGOT_LIMIT		= 14,	/* no negotiation record could be kept: no offer */
	SMR_REASON_CONNECTION_LOST	= 15,	/* TCP connection lost in the handshake */
	SMR_REASON_MAX,
};

/*
 * Names of modes and reasons as SMR's tools print them; a reason's counters
 * in /proc/net/smr/stats are "fallback_" + its name (connections on TCP for
 * it) and "aborted_" + its name (connections the handshake reset for it).
 * NULL if unknown.
 */
static inline const char *smr_mode_name(unsigned int mode)
{
	switch (mode) {
	case SMR_MODE_PENDING:
		return "pending";
	case SMR_MODE_RDMA:
		return "rdma";
	case SMR_MODE_TCP:
		return "tcp";
	}
	return (const char *)0;
}

static inline const char *smr_reason_name(unsigned int reason)
{
	switch (reason) {
	case SMR_REASON_NONE:
		return "none";
	case SMR_REASON_NOT_NEGOTIATED:
		return "not_negotiated";
	case SMR_REASON_PEER_NO_SMR:
		return "peer_no_smr";
	case SMR_REASON_OPTION_NO_SPACE:
		return "option_no_space";
	case SMR_REASON_SYN_COOKIES:
		return "syn_cookies";
	case SMR_REASON_NO_RDMA_DEVICE:
		return "no_rdma_device";
	case SMR_REASON_PEER_DECLINED:
		return "peer_declined";
	case SMR_REASON_HANDSHAKE_TIMEOUT:
		return "handshake_timeout";
	case SMR_REASON_VERSION_MISMATCH:
		return "version_mismatch";
	case SMR_REASON_NO_MEMORY:
		return "no_memory";
	case SMR_REASON_LINK_FAILURE:
		return "link_failure";
	case SMR_REASON_PROTOCOL_ERROR:
		return "protocol_error";
	case SMR_REASON_RDMA_UNAVAILABLE:
		return "rdma_unavailable";
	case SMR_REASON_OPTION_ECHOED:
		return "option_echoed";
	case SMR_REASON_NEGOT_LIMIT:
		return "negot_limit";
	case SMR_REASON_CONNECTION_LOST:
		return "connection_lost";
	}
	return (const char *)0;
}

#define SMR_INFO_VERSION	1

/*
 * Reply of SMR_INFO. Versioned like TCP_INFO: the kernel copies
 * min(optlen, sizeof(struct smr_info)) bytes and stores the copied length in
 * optlen; fields are only ever appended. @size is the kernel's full size.
 */
struct smr_info {
	__u32	version;		/* SMR_INFO_VERSION */
	__u32	size;			/* sizeof(struct smr_info) in the kernel */
	__u8	mode;			/* enum smr_mode */
	__u8	reason;			/* enum smr_reason */
	__u8	peer_reason;		/* peer's enum smr_reason when it declined */
	__u8	is_listener;		/* 1 on a listening socket */
	__u32	reserved;
	__u64	bytes_sent;		/* application bytes accepted by send calls */
	__u64	bytes_received;		/* application bytes handed to receive calls */
	__u64	rdma_bytes_sent;	/* of those, moved by RDMA WRITE */
	__u64	rdma_bytes_received;	/* of those, arrived by RDMA WRITE */
	/* the handshake (0 where it did not run) */
	__u64	local_token;		/* this end's connection token */
	__u64	peer_token;		/* the peer's connection token */
	__u32	local_rmb_size;		/* RMB size this end announced */
	__u32	peer_rmb_size;		/* RMB size the peer announced */
	__u32	hs_msgs_sent;		/* handshake messages sent */
	__u32	hs_msgs_received;	/* handshake messages received */
	__u32	hs_bytes_sent;		/* their bytes on the TCP stream */
	__u32	hs_bytes_received;
	__u32	sndbuf_size;		/* this end's send buffer (RDMA mode) */
	__u32	reserved2;
};

#endif /* _UAPI_LINUX_SMR_H */
