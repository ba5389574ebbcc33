// SPDX-License-Identifier: GPL-2.0
/*
 * smr-bench: the data mover of `make bench`. One binary, both ends, three
 * transports with identical code paths: tcp (AF_INET), smr (AF_SMR, family
 * from /sys/module/smr/parameters/family) and smc (Linux AF_SMC).
 *
 *   smr-bench server [-p PORT] [-b ADDR]
 *       listen on PORT (tcp), PORT+1 (smr) and PORT+2 (smc), IPv4, and serve
 *       one test connection at a time until killed. Prints one line
 *       "listening tcp=P smr=P smc=P" (a transport whose socket family is
 *       missing shows "-") once all listeners are up.
 *   smr-bench client -T tcp|smr|smc [-p PORT] [-r ROUND] [-n NAME] HOST TEST
 *       TEST is one of
 *         bulk WSIZE TOTAL   send TOTAL bytes in write() calls of WSIZE
 *                            (a power of two <= 65536); the server answers
 *                            once it has read them all
 *         rr SIZE COUNT      COUNT request/response round trips of SIZE
 *                            bytes each way
 *         connect COUNT      COUNT times: socket(), connect(), 1 byte to
 *                            the server and its echo back, close()
 *
 * The client prints one JSON object on stdout: what ran, how long it took
 * (usec, wall clock), per-sample microseconds for rr and connect, /proc/stat
 * busy/total ticks of both hosts around a bulk transfer, soft-RoCE
 * (rxe0) packet counter deltas of both hosts, and the mode of every
 * connection as its socket reports it:
 *   tcp  "tcp"
 *   smr  "rdma" / "tcp:REASON" / "pending" from getsockopt(SOL_SMR, SMR_INFO),
 *        plus the SMR_INFO RDMA byte counters
 *   smc  "smcr" / "smcd" / "fallback:0xCODE" from the smc_diag sock_diag
 *        dump (NETLINK_SOCK_DIAG), matched by the socket's inode; CODE is
 *        the CLC decline reason (net/smc/smc_clc.h)
 * and, for smr and smc, the ring sizes of its last connection ("rings":
 * send buffer, own RMB, peer's RMB; SMR_INFO or smc_diag's CONNINFO).
 * The server reports its own end's mode for bulk transfers too.
 *
 * Integrity: bulk data follows a fixed 64 KiB pattern the server samples
 * (every 509th byte and each read's last byte), the byte count must match
 * exactly, and every rr response must equal its request (which carries the
 * round-trip number). Any mismatch fails the test. Sockets get no options
 * but 60 s send/receive timeouts, so each transport runs with its defaults.
 * Exit status: 0 if the test ran completely and intact, 1 otherwise
 * (message on stderr), 2 on a usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/smc_diag.h>
#include <linux/sock_diag.h>
#include <linux/smr.h>

#ifndef AF_SMC
#define AF_SMC		43
#endif
#define SMCPROTO_SMC	0	/* AF_SMC over IPv4 (include/net/smc.h) */

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define BENCH_PORT	7201
#define BENCH_PAT_LEN	65536
#define BENCH_RBUF	65536
#define BENCH_TIMEOUT_S	60
#define BENCH_MODE_LEN	48
#define BENCH_RXE	"/sys/class/infiniband/rxe0/ports/1/hw_counters/"
#define BENCH_NO_COUNT	UINT64_MAX

enum bench_transport { BT_TCP, BT_SMR, BT_SMC, BT_NR };

static const char *const bench_tnames[BT_NR] = { "tcp", "smr", "smc" };

/* Test operations: the first byte a client sends. */
#define BENCH_OP_CONNECT	'C'
#define BENCH_OP_BULK		'B'
#define BENCH_OP_RR		'R'

struct bench_req {
	uint8_t		op;
	uint8_t		pad[3];
	uint32_t	size;		/* write size (bulk), message size (rr) */
	uint64_t	count;		/* total bytes (bulk), round trips (rr) */
};

struct bench_cpu {
	uint64_t	busy, total;	/* USER_HZ ticks, all CPUs */
};

struct bench_rxe {
	uint64_t	sent, rcvd;	/* packets, BENCH_NO_COUNT without rxe0 */
};

/* The server's answer once a bulk transfer is in. */
struct bench_bulk_reply {
	uint64_t	bytes;
	uint64_t	cpu_busy, cpu_total;
	uint64_t	rxe_sent, rxe_rcvd;
	uint32_t	bad;		/* pattern mismatches */
	uint32_t	pad;
	char		mode[BENCH_MODE_LEN];
};

static uint8_t bench_pat[BENCH_PAT_LEN];

static void bench_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "smr-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void bench_pat_init(void)
{
	uint32_t i;

	for (i = 0; i < BENCH_PAT_LEN; i++)
		bench_pat[i] = (uint8_t)((i * 2654435761u) >> 24) ^ (uint8_t)i;
}

static uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void bench_read_cpu(struct bench_cpu *c)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	c->busy = 0;
	c->total = 0;
	if (!f)
		return;
	/* user nice system idle iowait irq softirq steal */
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) >= 4) {
		c->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
		c->total = c->busy + v[3] + v[4];
	}
	fclose(f);
}

static uint64_t bench_read_u64(const char *path)
{
	unsigned long long v;
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return BENCH_NO_COUNT;
	ok = fscanf(f, "%llu", &v) == 1;
	fclose(f);
	return ok ? v : BENCH_NO_COUNT;
}

static void bench_read_rxe(struct bench_rxe *r)
{
	r->sent = bench_read_u64(BENCH_RXE "sent_pkts");
	r->rcvd = bench_read_u64(BENCH_RXE "rcvd_pkts");
}

static uint64_t bench_delta(uint64_t a, uint64_t b)
{
	return (a == BENCH_NO_COUNT || b == BENCH_NO_COUNT) ? BENCH_NO_COUNT : b - a;
}

static int bench_smr_family(void)
{
	uint64_t fam = bench_read_u64(SMR_FAMILY_SYSFS);

	return fam == BENCH_NO_COUNT ? -1 : (int)fam;
}

static int bench_socket(enum bench_transport t)
{
	int fam;

	switch (t) {
	case BT_TCP:
		return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	case BT_SMR:
		fam = bench_smr_family();
		if (fam < 0) {
			errno = EAFNOSUPPORT;
			return -1;
		}
		return socket(fam, SOCK_STREAM | SOCK_CLOEXEC, SMRPROTO_IPV4);
	case BT_SMC:
		return socket(AF_SMC, SOCK_STREAM | SOCK_CLOEXEC, SMCPROTO_SMC);
	default:
		errno = EINVAL;
		return -1;
	}
}

static void bench_timeouts(int fd)
{
	struct timeval tv = { .tv_sec = BENCH_TIMEOUT_S };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int bench_read_full(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, (char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		done += n;
	}
	return 0;
}

static int bench_write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, (const char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		done += n;
	}
	return 0;
}

static void bench_smr_mode(int fd, char *mode, struct smr_info *info)
{
	socklen_t len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	if (getsockopt(fd, SOL_SMR, SMR_INFO, info, &len) < 0) {
		snprintf(mode, BENCH_MODE_LEN, "smr_info_error:%d", errno);
		return;
	}
	if (info->mode == SMR_MODE_RDMA) {
		snprintf(mode, BENCH_MODE_LEN, "rdma");
	} else if (info->mode == SMR_MODE_TCP) {
		if (smr_reason_name(info->reason))
			snprintf(mode, BENCH_MODE_LEN, "tcp:%s", smr_reason_name(info->reason));
		else
			snprintf(mode, BENCH_MODE_LEN, "tcp:reason_%u", info->reason);
	} else if (info->mode == SMR_MODE_PENDING) {
		snprintf(mode, BENCH_MODE_LEN, "pending");
	} else {
		snprintf(mode, BENCH_MODE_LEN, "mode_%u", info->mode);
	}
}

/*
 * AF_SMC has no per-socket getsockopt that tells SMC-R from fallback; its
 * sock_diag handler (smc_diag) does. Dump all SMC sockets of the netns and
 * pick ours by inode.
 */
static void bench_smc_mode(int fd, char *mode, uint32_t rings[3])
{
	struct {
		struct nlmsghdr		nlh;
		struct smc_diag_req	req;
	} msg = {
		.nlh = {
			.nlmsg_len = sizeof(msg),
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
			.nlmsg_seq = 1,
		},
		.req = {
			.diag_family = AF_SMC,
			/* bit (ext - 1): SMC_DIAG_FALLBACK comes anyway */
			.diag_ext = 1 << (SMC_DIAG_FALLBACK - 1) |
				    1 << (SMC_DIAG_CONNINFO - 1),
		},
	};
	static char buf[32768];
	struct stat st;
	int nl;

	snprintf(mode, BENCH_MODE_LEN, "smc_diag_not_found");
	if (fstat(fd, &st) < 0)
		return;
	nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0) {
		snprintf(mode, BENCH_MODE_LEN, "smc_diag_error:%d", errno);
		return;
	}
	if (send(nl, &msg, sizeof(msg), 0) < 0) {
		snprintf(mode, BENCH_MODE_LEN, "smc_diag_error:%d", errno);
		goto out;
	}
	for (;;) {
		ssize_t n = recv(nl, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto out;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			struct smc_diag_msg *r = NLMSG_DATA(h);
			struct smc_diag_fallback fb = { 0 };
			struct rtattr *rta;
			int alen;

			if (h->nlmsg_type == NLMSG_DONE)
				goto out;
			if (h->nlmsg_type == NLMSG_ERROR) {
				snprintf(mode, BENCH_MODE_LEN, "smc_diag_error:%d",
					 -((struct nlmsgerr *)NLMSG_DATA(h))->error);
				goto out;
			}
			if (r->diag_inode != st.st_ino)
				continue;
			alen = h->nlmsg_len - NLMSG_LENGTH(sizeof(*r));
			for (rta = (struct rtattr *)(r + 1); RTA_OK(rta, alen);
			     rta = RTA_NEXT(rta, alen)) {
				if (rta->rta_type == SMC_DIAG_FALLBACK &&
				    RTA_PAYLOAD(rta) >= (int)sizeof(fb))
					memcpy(&fb, RTA_DATA(rta), sizeof(fb));
				if (rta->rta_type == SMC_DIAG_CONNINFO &&
				    RTA_PAYLOAD(rta) >= (int)sizeof(struct smc_diag_conninfo)) {
					struct smc_diag_conninfo ci;

					memcpy(&ci, RTA_DATA(rta), sizeof(ci));
					rings[0] = ci.sndbuf_size;
					rings[1] = ci.rmbe_size;
					rings[2] = ci.peer_rmbe_size;
				}
			}
			if (r->diag_mode == SMC_DIAG_MODE_SMCR)
				snprintf(mode, BENCH_MODE_LEN, "smcr");
			else if (r->diag_mode == SMC_DIAG_MODE_SMCD)
				snprintf(mode, BENCH_MODE_LEN, "smcd");
			else if (r->diag_mode == SMC_DIAG_MODE_FALLBACK_TCP)
				snprintf(mode, BENCH_MODE_LEN, "fallback:0x%08x", fb.reason);
			else
				snprintf(mode, BENCH_MODE_LEN, "mode_%u", r->diag_mode);
			/* keep reading to the end so the socket drains */
		}
	}
out:
	close(nl);
}

struct bench_conn_mode {
	char		mode[BENCH_MODE_LEN];
	uint64_t	rdma_sent, rdma_received;	/* SMR_INFO, smr only */
	/* send buffer, own RMB, peer's RMB (smr, smc; 0 where unknown) */
	uint32_t	rings[3];
};

static void bench_mode(int fd, enum bench_transport t, struct bench_conn_mode *m)
{
	struct smr_info info;

	memset(m, 0, sizeof(*m));
	switch (t) {
	case BT_SMR:
		bench_smr_mode(fd, m->mode, &info);
		m->rdma_sent = info.rdma_bytes_sent;
		m->rdma_received = info.rdma_bytes_received;
		m->rings[0] = info.sndbuf_size;
		m->rings[1] = info.local_rmb_size;
		m->rings[2] = info.peer_rmb_size;
		break;
	case BT_SMC:
		bench_smc_mode(fd, m->mode, m->rings);
		break;
	default:
		snprintf(m->mode, BENCH_MODE_LEN, "tcp");
		break;
	}
}

/* ------------------------------------------------------------------ server */

static void bench_serve_bulk(int fd, enum bench_transport t, const struct bench_req *req)
{
	static uint8_t rbuf[BENCH_RBUF];
	struct bench_bulk_reply rep = { 0 };
	struct bench_cpu c0, c1;
	struct bench_rxe r0, r1;
	struct bench_conn_mode m;
	uint64_t off = 0;

	bench_read_rxe(&r0);
	bench_read_cpu(&c0);
	while (off < req->count) {
		uint64_t want = req->count - off;
		ssize_t n = read(fd, rbuf, want < sizeof(rbuf) ? want : sizeof(rbuf));
		uint64_t i;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		/* sample the pattern: cheap enough not to skew CPU time */
		for (i = (509 - off % 509) % 509; i < (uint64_t)n; i += 509)
			rep.bad += rbuf[i] != bench_pat[(off + i) % BENCH_PAT_LEN];
		rep.bad += rbuf[n - 1] != bench_pat[(off + n - 1) % BENCH_PAT_LEN];
		off += n;
	}
	bench_read_cpu(&c1);
	bench_read_rxe(&r1);
	bench_mode(fd, t, &m);
	rep.bytes = off;
	rep.cpu_busy = c1.busy - c0.busy;
	rep.cpu_total = c1.total - c0.total;
	rep.rxe_sent = bench_delta(r0.sent, r1.sent);
	rep.rxe_rcvd = bench_delta(r0.rcvd, r1.rcvd);
	memcpy(rep.mode, m.mode, sizeof(rep.mode));
	if (off < req->count)
		fprintf(stderr,
			"smr-bench server: %s bulk ended after %" PRIu64 " of %" PRIu64 " bytes: %s\n",
			bench_tnames[t], off, (uint64_t)req->count, strerror(errno));
	else
		bench_write_full(fd, &rep, sizeof(rep));
}

static void bench_serve_rr(int fd, enum bench_transport t, const struct bench_req *req)
{
	uint8_t *buf = malloc(req->size);
	uint64_t i;

	if (!buf)
		return;
	for (i = 0; i < req->count; i++) {
		if (bench_read_full(fd, buf, req->size) || bench_write_full(fd, buf, req->size)) {
			fprintf(stderr,
				"smr-bench server: %s rr ended after %" PRIu64 " round trips: %s\n",
				bench_tnames[t], i, strerror(errno));
			break;
		}
	}
	free(buf);
}

static void bench_serve_conn(int fd, enum bench_transport t)
{
	struct bench_req req = { 0 };
	char sink[256];

	bench_timeouts(fd);
	if (bench_read_full(fd, &req.op, 1))
		return;
	switch (req.op) {
	case BENCH_OP_CONNECT:
		bench_write_full(fd, &req.op, 1);
		break;
	case BENCH_OP_BULK:
	case BENCH_OP_RR:
		if (bench_read_full(fd, (char *)&req + 1, sizeof(req) - 1))
			return;
		if (req.op == BENCH_OP_BULK)
			bench_serve_bulk(fd, t, &req);
		else if (req.size > 0 && req.size <= (1u << 20))
			bench_serve_rr(fd, t, &req);
		break;
	default:
		fprintf(stderr, "smr-bench server: unknown op 0x%02x on %s\n", req.op,
			bench_tnames[t]);
		return;
	}
	/* the client closes first: wait for its EOF */
	while (read(fd, sink, sizeof(sink)) > 0)
		;
}

static int bench_listen(enum bench_transport t, const char *addr, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, one = 1;

	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		bench_die("bad address %s", addr);
	fd = bench_socket(t);
	if (fd < 0) {
		fprintf(stderr, "smr-bench server: no %s socket: %s\n", bench_tnames[t],
			strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 64) < 0)
		bench_die("%s listen on port %d: %s", bench_tnames[t], port, strerror(errno));
	return fd;
}

/* Serves until killed. */
static void bench_server(const char *addr, int port)
{
	struct pollfd pfd[BT_NR];
	char shown[BT_NR][16];
	int t;

	for (t = 0; t < BT_NR; t++) {
		pfd[t].fd = bench_listen(t, addr, port + t);
		pfd[t].events = POLLIN;
		if (pfd[t].fd >= 0)
			snprintf(shown[t], sizeof(shown[t]), "%d", port + t);
		else
			snprintf(shown[t], sizeof(shown[t]), "-");
	}
	printf("listening tcp=%s smr=%s smc=%s\n", shown[BT_TCP], shown[BT_SMR], shown[BT_SMC]);
	fflush(stdout);
	/* One connection at a time: the client runs one test at a time. */
	for (;;) {
		if (poll(pfd, BT_NR, -1) < 0) {
			if (errno == EINTR)
				continue;
			bench_die("poll: %s", strerror(errno));
		}
		for (t = 0; t < BT_NR; t++) {
			int fd;

			if (!(pfd[t].revents & POLLIN))
				continue;
			fd = accept4(pfd[t].fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0) {
				fprintf(stderr, "smr-bench server: %s accept: %s\n",
					bench_tnames[t], strerror(errno));
				continue;
			}
			bench_serve_conn(fd, t);
			close(fd);
		}
	}
}

/* ------------------------------------------------------------------ client */

struct bench_client {
	enum bench_transport	t;
	struct sockaddr_in	peer;
	int			round;
	const char		*name;
	/* the modes seen on this run's connections, with counts */
	char			modes[8][BENCH_MODE_LEN];
	unsigned int		mode_cnt[8];
	unsigned int		nmodes;
	uint64_t		rdma_sent, rdma_received;
	uint32_t		rings[3];	/* the last connection's */
};

static void bench_note_mode(struct bench_client *c, int fd)
{
	struct bench_conn_mode m;
	unsigned int i;

	bench_mode(fd, c->t, &m);
	c->rdma_sent += m.rdma_sent;
	c->rdma_received += m.rdma_received;
	memcpy(c->rings, m.rings, sizeof(c->rings));
	for (i = 0; i < c->nmodes; i++) {
		if (!strcmp(c->modes[i], m.mode)) {
			c->mode_cnt[i]++;
			return;
		}
	}
	if (c->nmodes < 8) {
		memcpy(c->modes[c->nmodes], m.mode, BENCH_MODE_LEN);
		c->mode_cnt[c->nmodes++] = 1;
	}
}

static int bench_connect(struct bench_client *c)
{
	int fd = bench_socket(c->t);

	if (fd < 0)
		bench_die("%s socket: %s", bench_tnames[c->t], strerror(errno));
	bench_timeouts(fd);
	if (connect(fd, (struct sockaddr *)&c->peer, sizeof(c->peer)) < 0)
		bench_die("%s connect to %s:%d: %s", bench_tnames[c->t],
			  inet_ntoa(c->peer.sin_addr), ntohs(c->peer.sin_port), strerror(errno));
	return fd;
}

static void bench_json_head(struct bench_client *c, const char *test)
{
	printf("{\"transport\":\"%s\",\"test\":\"%s\",\"name\":\"%s\",\"round\":%d",
	       bench_tnames[c->t], test, c->name ? c->name : test, c->round);
}

static void bench_json_u64(const char *key, uint64_t v)
{
	if (v == BENCH_NO_COUNT)
		printf(",\"%s\":null", key);
	else
		printf(",\"%s\":%" PRIu64, key, v);
}

static void bench_json_tail(struct bench_client *c)
{
	unsigned int i;

	printf(",\"modes\":{");
	for (i = 0; i < c->nmodes; i++)
		printf("%s\"%s\":%u", i ? "," : "", c->modes[i], c->mode_cnt[i]);
	printf("}");
	if (c->t == BT_SMR) {
		bench_json_u64("smr_rdma_bytes_sent", c->rdma_sent);
		bench_json_u64("smr_rdma_bytes_received", c->rdma_received);
	}
	if (c->rings[0] || c->rings[1])
		printf(",\"rings\":[%u,%u,%u]", c->rings[0], c->rings[1],
		       c->rings[2]);
	printf("}\n");
}

static void bench_json_samples(const uint32_t *ns_x10, uint64_t n)
{
	uint64_t i;

	/* 0.1 us resolution is plenty and keeps the line short */
	printf(",\"samples_us\":[");
	for (i = 0; i < n; i++)
		printf("%s%u.%u", i ? "," : "", ns_x10[i] / 10, ns_x10[i] % 10);
	printf("]");
}

static uint32_t bench_tenth_us(uint64_t ns)
{
	uint64_t v = (ns + 50) / 100;

	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static int bench_client_bulk(struct bench_client *c, uint32_t wsize, uint64_t total)
{
	struct bench_req req = { .op = BENCH_OP_BULK, .size = wsize, .count = total };
	struct bench_bulk_reply rep;
	struct bench_cpu c0, c1;
	struct bench_rxe r0, r1;
	uint64_t t0, t1, off = 0;
	int fd;

	fd = bench_connect(c);
	if (bench_write_full(fd, &req, sizeof(req)))
		bench_die("%s bulk request: %s", bench_tnames[c->t], strerror(errno));
	bench_read_rxe(&r0);
	bench_read_cpu(&c0);
	t0 = bench_now_ns();
	while (off < total) {
		uint64_t in_write = off % wsize;
		uint64_t len = wsize - in_write;
		ssize_t n;

		if (len > total - off)
			len = total - off;
		n = write(fd, bench_pat + off % BENCH_PAT_LEN, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			bench_die("%s bulk write at %" PRIu64 " of %" PRIu64 ": %s",
				  bench_tnames[c->t], off, total, strerror(errno));
		off += n;
	}
	if (bench_read_full(fd, &rep, sizeof(rep)))
		bench_die("%s bulk: no answer from the server: %s", bench_tnames[c->t],
			  strerror(errno));
	t1 = bench_now_ns();
	bench_read_cpu(&c1);
	bench_read_rxe(&r1);
	bench_note_mode(c, fd);
	close(fd);
	rep.mode[BENCH_MODE_LEN - 1] = '\0';

	bench_json_head(c, "bulk");
	printf(",\"size\":%u,\"bytes\":%" PRIu64 ",\"usec\":%.1f", wsize, total, (t1 - t0) / 1e3);
	printf(",\"cpu_a_busy\":%" PRIu64 ",\"cpu_a_total\":%" PRIu64, c1.busy - c0.busy,
	       c1.total - c0.total);
	printf(",\"cpu_b_busy\":%" PRIu64 ",\"cpu_b_total\":%" PRIu64, rep.cpu_busy, rep.cpu_total);
	printf(",\"hz\":%ld", sysconf(_SC_CLK_TCK));
	bench_json_u64("rxe_a_sent", bench_delta(r0.sent, r1.sent));
	bench_json_u64("rxe_a_rcvd", bench_delta(r0.rcvd, r1.rcvd));
	bench_json_u64("rxe_b_sent", rep.rxe_sent);
	bench_json_u64("rxe_b_rcvd", rep.rxe_rcvd);
	printf(",\"server_mode\":\"%s\"", rep.mode);
	bench_json_tail(c);
	if (rep.bytes != total || rep.bad)
		bench_die("%s bulk: server got %" PRIu64 " of %" PRIu64 " bytes, %u pattern mismatches",
			  bench_tnames[c->t], rep.bytes, total, rep.bad);
	return 0;
}

static int bench_client_rr(struct bench_client *c, uint32_t size, uint64_t count)
{
	struct bench_req req = { .op = BENCH_OP_RR, .size = size, .count = count };
	uint8_t *out = malloc(size), *in = malloc(size);
	uint32_t *lat = calloc(count, sizeof(*lat));
	struct bench_rxe r0, r1;
	uint64_t i, t0, t1, tstart;
	int fd;

	if (!out || !in || !lat)
		bench_die("out of memory");
	memcpy(out, bench_pat, size < BENCH_PAT_LEN ? size : BENCH_PAT_LEN);
	fd = bench_connect(c);
	if (bench_write_full(fd, &req, sizeof(req)))
		bench_die("%s rr request: %s", bench_tnames[c->t], strerror(errno));
	bench_read_rxe(&r0);
	tstart = bench_now_ns();
	for (i = 0; i < count; i++) {
		/* the round-trip number travels in the message */
		memcpy(out, &i, size < sizeof(i) ? size : sizeof(i));
		t0 = bench_now_ns();
		if (bench_write_full(fd, out, size) || bench_read_full(fd, in, size))
			bench_die("%s rr round trip %" PRIu64 ": %s", bench_tnames[c->t], i,
				  strerror(errno));
		t1 = bench_now_ns();
		if (memcmp(in, out, size))
			bench_die("%s rr round trip %" PRIu64 ": the response differs from the request",
				  bench_tnames[c->t], i);
		lat[i] = bench_tenth_us(t1 - t0);
	}
	t1 = bench_now_ns();
	bench_read_rxe(&r1);
	bench_note_mode(c, fd);
	close(fd);

	bench_json_head(c, "rr");
	printf(",\"size\":%u,\"count\":%" PRIu64 ",\"usec\":%.1f", size, count,
	       (t1 - tstart) / 1e3);
	bench_json_u64("rxe_a_sent", bench_delta(r0.sent, r1.sent));
	bench_json_u64("rxe_a_rcvd", bench_delta(r0.rcvd, r1.rcvd));
	bench_json_samples(lat, count);
	bench_json_tail(c);
	free(out);
	free(in);
	free(lat);
	return 0;
}

static int bench_client_connect(struct bench_client *c, uint64_t count)
{
	uint32_t *lat = calloc(count, sizeof(*lat));
	struct bench_rxe r0, r1;
	uint64_t i, t0, t1, tstart;

	if (!lat)
		bench_die("out of memory");
	bench_read_rxe(&r0);
	tstart = bench_now_ns();
	for (i = 0; i < count; i++) {
		uint8_t op = BENCH_OP_CONNECT, echo = 0;
		int fd;

		/* socket() is part of the cost: SMR and SMC build more there */
		t0 = bench_now_ns();
		fd = bench_connect(c);
		if (bench_write_full(fd, &op, 1) || bench_read_full(fd, &echo, 1))
			bench_die("%s connect %" PRIu64 ": first byte: %s", bench_tnames[c->t], i,
				  strerror(errno));
		t1 = bench_now_ns();
		if (echo != op)
			bench_die("%s connect %" PRIu64 ": wrong echo", bench_tnames[c->t], i);
		lat[i] = bench_tenth_us(t1 - t0);
		bench_note_mode(c, fd);
		close(fd);
	}
	t1 = bench_now_ns();
	bench_read_rxe(&r1);

	bench_json_head(c, "connect");
	printf(",\"count\":%" PRIu64 ",\"usec\":%.1f", count, (t1 - tstart) / 1e3);
	bench_json_u64("rxe_a_sent", bench_delta(r0.sent, r1.sent));
	bench_json_u64("rxe_a_rcvd", bench_delta(r0.rcvd, r1.rcvd));
	bench_json_samples(lat, count);
	bench_json_tail(c);
	free(lat);
	return 0;
}

static void bench_usage(void)
{
	fprintf(stderr,
		"usage: smr-bench server [-p PORT] [-b ADDR]\n"
		"       smr-bench client -T tcp|smr|smc [-p PORT] [-r ROUND] [-n NAME] HOST\n"
		"                        bulk WSIZE TOTAL | rr SIZE COUNT | connect COUNT\n");
	exit(2);
}

static uint64_t bench_num(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || !v)
		bench_usage();
	return v;
}

int main(int argc, char **argv)
{
	struct bench_client c = { .t = BT_NR };
	const char *bind_addr = "0.0.0.0";
	int port = BENCH_PORT, opt, i;
	bool server;

	if (argc < 2)
		bench_usage();
	server = !strcmp(argv[1], "server");
	if (!server && strcmp(argv[1], "client"))
		bench_usage();
	optind = 2;
	while ((opt = getopt(argc, argv, "p:b:T:r:n:")) != -1) {
		switch (opt) {
		case 'p':
			port = bench_num(optarg);
			break;
		case 'b':
			bind_addr = optarg;
			break;
		case 'T':
			for (i = 0; i < BT_NR; i++)
				if (!strcmp(optarg, bench_tnames[i]))
					c.t = i;
			if (c.t == BT_NR)
				bench_usage();
			break;
		case 'r':
			c.round = atoi(optarg);
			break;
		case 'n':
			c.name = optarg;
			break;
		default:
			bench_usage();
		}
	}
	if (port < 1 || port > 65535 - BT_NR)
		bench_usage();
	signal(SIGPIPE, SIG_IGN);
	bench_pat_init();
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);

	if (server) {
		if (optind != argc)
			bench_usage();
		bench_server(bind_addr, port);
		return 1;
	}

	if (c.t == BT_NR || argc - optind < 3)
		bench_usage();
	c.peer.sin_family = AF_INET;
	c.peer.sin_port = htons(port + c.t);
	if (inet_pton(AF_INET, argv[optind], &c.peer.sin_addr) != 1)
		bench_die("bad IPv4 address %s", argv[optind]);
	if (!strcmp(argv[optind + 1], "bulk") && argc - optind == 4) {
		uint64_t ws = bench_num(argv[optind + 2]);

		if (ws > BENCH_PAT_LEN || (ws & (ws - 1)))
			bench_usage();
		return bench_client_bulk(&c, ws, bench_num(argv[optind + 3]));
	}
	if (!strcmp(argv[optind + 1], "rr") && argc - optind == 4) {
		uint64_t sz = bench_num(argv[optind + 2]);

		if (sz > (1u << 20))
			bench_usage();
		return bench_client_rr(&c, sz, bench_num(argv[optind + 3]));
	}
	if (!strcmp(argv[optind + 1], "connect") && argc - optind == 3)
		return bench_client_connect(&c, bench_num(argv[optind + 2]));
	bench_usage();
	return 2;
}
