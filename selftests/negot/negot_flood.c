// SPDX-License-Identifier: GPL-2.0
/*
 * negot_flood: hostile load on SMR's negotiation records, for the
 * negotiation suite's flood cases.
 *
 *   negot_flood syn -a ADDR -p PORT [-n N] [-S NET/LEN] [-r PPS] [-t SECS]
 *   negot_flood connect -a ADDR -p PORT -n N [-u UID] [-R FILE] [-T SECS]
 *
 * syn: N IPv4 SYNs to ADDR:PORT through a raw socket (root), each from a
 * source address of NET/LEN (default 10.200.0.0/16, a random one each
 * time) and a random source port, carrying MSS and a valid SMR offer
 * (Documentation/protocol.rst: kind 254, ExID "SMR1", version 1, role 1, a
 * nonce N with proof(N) != N) and a correct checksum, as a forging peer
 * would send them. -r paces them (PPS a second; default as fast as the
 * socket takes them); -t SECS keeps sending for that long (N then bounds
 * nothing; it is the count per line of progress). Prints "syn sent=N
 * errors=N elapsed_ms=N".
 *
 * connect: N non-blocking SMR connects to ADDR:PORT, as a local user would
 * open them: -u UID drops to that uid (and gid) after raising the file
 * limit, so that the sockets are that user's. Prints "connect tried=N
 * inprogress=N connected=N failed=N first_errno=NAME elapsed_ms=N",
 * creates FILE (-R: in a directory the uid may write),
 * then holds every socket open for SECS (-T, default 120) or until
 * SIGTERM, and prints "held pending=N rdma=N tcp=N closed=N" (SMR_INFO
 * modes at the end; closed: the connect failed meanwhile).
 *
 * Exit status 0 unless the tool itself failed (bad arguments, no raw
 * socket, no SMR module).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "smr_test_lib.h"

/* The SMR option (protocol.rst, "The TCP option"). */
#define FLOOD_OPT_KIND		254
#define FLOOD_OPT_LEN		12
#define FLOOD_OPT_EXID		0x534d5231u
#define FLOOD_OPT_VER_ROLE	0x11	/* version 1, role 1 (offer) */
#define FLOOD_PROOF_KEY		0x5a17c3e9u
#define FLOOD_MSS		1460
/* MSS (4) and the SMR option (12) */
#define FLOOD_OPTS_LEN		16
#define FLOOD_PKT_LEN		(20 + 20 + FLOOD_OPTS_LEN)
#define FLOOD_PACE_BATCH	16

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: negot_flood syn -a ADDR -p PORT [-n N] [-S NET/LEN] [-r PPS] [-t SECS]\n"
		"       negot_flood connect -a ADDR -p PORT -n N [-u UID] [-R FILE] [-T SECS]\n");
	exit(2);
}

static void die(const char *what)
{
	fprintf(stderr, "negot_flood: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint32_t rnd32(void)
{
	static uint64_t s;

	if (!s) {
		if (getrandom(&s, sizeof(s), 0) != sizeof(s))
			s = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL;
		s |= 1;
	}
	/* xorshift64* */
	s ^= s >> 12;
	s ^= s << 25;
	s ^= s >> 27;
	return (uint32_t)((s * 0x2545f4914f6cdd1dULL) >> 32);
}

static uint32_t ror32(uint32_t v, unsigned int n)
{
	return (v >> n) | (v << (32 - n));
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint32_t csum_add(uint32_t sum, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

/* One SYN from @src:@sport to @dst:@dport with a fresh offer. */
static void build_syn(uint8_t *pkt, uint32_t src, uint16_t sport,
		      uint32_t dst, uint16_t dport)
{
	struct iphdr *ip = (struct iphdr *)pkt;
	struct tcphdr *th = (struct tcphdr *)(pkt + 20);
	uint8_t *o = pkt + 40, pseudo[12];
	uint32_t nonce, sum;

	do {
		nonce = rnd32();
	} while (!nonce || (ror32(nonce, 11) ^ FLOOD_PROOF_KEY) == nonce);
	memset(pkt, 0, FLOOD_PKT_LEN);
	ip->version = 4;
	ip->ihl = 5;
	ip->tot_len = htons(FLOOD_PKT_LEN);
	ip->ttl = 64;
	ip->protocol = IPPROTO_TCP;
	ip->saddr = htonl(src);
	ip->daddr = htonl(dst);
	/* id and checksum: the kernel fills them in (IP_HDRINCL) */
	th->source = htons(sport);
	th->dest = htons(dport);
	th->seq = htonl(rnd32());
	th->doff = (20 + FLOOD_OPTS_LEN) / 4;
	th->syn = 1;
	th->window = htons(64240);
	o[0] = TCPOPT_MAXSEG;
	o[1] = 4;
	o[2] = FLOOD_MSS >> 8;
	o[3] = FLOOD_MSS & 0xff;
	o[4] = FLOOD_OPT_KIND;
	o[5] = FLOOD_OPT_LEN;
	put32(o + 6, FLOOD_OPT_EXID);
	o[10] = FLOOD_OPT_VER_ROLE;
	o[11] = 0;			/* flags */
	put32(o + 12, nonce);

	memcpy(pseudo, &ip->saddr, 4);
	memcpy(pseudo + 4, &ip->daddr, 4);
	pseudo[8] = 0;
	pseudo[9] = IPPROTO_TCP;
	pseudo[10] = 0;
	pseudo[11] = 20 + FLOOD_OPTS_LEN;
	sum = csum_add(0, pseudo, sizeof(pseudo));
	sum = csum_add(sum, th, 20 + FLOOD_OPTS_LEN);
	th->check = htons(csum_fold(sum));
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int run_syn(const char *addr, int port, long n, const char *net,
		   long pps, long secs)
{
	uint32_t dst, base, mask, src;
	struct sockaddr_in to = { .sin_family = AF_INET };
	long long t0 = now_ns(), end = t0 + secs * 1000000000LL;
	long sent = 0, errors = 0;
	uint8_t pkt[FLOOD_PKT_LEN];
	char nbuf[64], *slash;
	struct in_addr a;
	int fd, one = 1, len = 16;

	if (inet_pton(AF_INET, addr, &a) != 1)
		usage();
	dst = ntohl(a.s_addr);
	snprintf(nbuf, sizeof(nbuf), "%s", net);
	slash = strchr(nbuf, '/');
	if (slash) {
		*slash = 0;
		len = atoi(slash + 1);
	}
	if (inet_pton(AF_INET, nbuf, &a) != 1 || len < 8 || len > 30)
		usage();
	mask = 0xffffffffu >> len;
	base = ntohl(a.s_addr) & ~mask;
	to.sin_addr.s_addr = htonl(dst);

	fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (fd < 0)
		die("raw socket (root only)");
	if (setsockopt(fd, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one)))
		die("IP_HDRINCL");
	for (;;) {
		if (stop || (secs ? now_ns() >= end : sent + errors >= n))
			break;
		/* neither the network's own address nor its broadcast */
		do {
			src = base | (rnd32() & mask);
		} while ((src & mask) == 0 || (src & mask) == mask);
		build_syn(pkt, src, 1024 + rnd32() % 64000, dst, port);
		if (sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&to,
			   sizeof(to)) == sizeof(pkt))
			sent++;
		else
			errors++;
		if (pps > 0 && (sent + errors) % FLOOD_PACE_BATCH == 0) {
			long long due = t0 + (sent + errors) * 1000000000LL / pps;
			long long left = due - now_ns();

			if (left > 0) {
				struct timespec ts = {
					.tv_sec = left / 1000000000LL,
					.tv_nsec = left % 1000000000LL,
				};

				nanosleep(&ts, NULL);
			}
		}
	}
	printf("syn sent=%ld errors=%ld elapsed_ms=%lld\n", sent, errors,
	       (now_ns() - t0) / 1000000);
	return 0;
}

/* Raise the file limit for @n sockets (as root), then become @uid. */
static void become(long n, long uid)
{
	struct rlimit rl = { .rlim_cur = n + 64, .rlim_max = n + 64 };

	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("setrlimit(RLIMIT_NOFILE)");
	if (uid < 0)
		return;
	if (setgroups(0, NULL) || setgid(uid) || setuid(uid))
		die("dropping to the uid");
}

static int run_connect(const char *addr, int port, long n, long uid,
		       const char *ready, long hold)
{
	struct sockaddr_in to = { .sin_family = AF_INET };
	long inprog = 0, conn = 0, failed = 0, i;
	long pending = 0, rdma = 0, tcp = 0, closed = 0;
	int fam, first_err = 0, *fds;
	long long t0 = smr_now_ms(), end;

	if (inet_pton(AF_INET, addr, &to.sin_addr) != 1 || n < 1)
		usage();
	to.sin_port = htons(port);
	fam = smr_module_family();
	if (fam < 0) {
		fprintf(stderr, "negot_flood: the smr module is not loaded\n");
		return 2;
	}
	become(n, uid);
	fds = calloc(n, sizeof(*fds));
	if (!fds)
		die("calloc");
	for (i = 0; i < n; i++) {
		fds[i] = socket(fam, SOCK_STREAM | SOCK_NONBLOCK, SMRPROTO_IPV4);
		if (fds[i] < 0)
			die("SMR socket");
		if (!connect(fds[i], (struct sockaddr *)&to, sizeof(to))) {
			conn++;
		} else if (errno == EINPROGRESS) {
			inprog++;
		} else {
			if (!first_err)
				first_err = errno;
			failed++;
		}
	}
	printf("connect tried=%ld inprogress=%ld connected=%ld failed=%ld first_errno=%s elapsed_ms=%lld\n",
	       n, inprog, conn, failed,
	       first_err ? strerrorname_np(first_err) : "-", smr_now_ms() - t0);
	fflush(stdout);
	if (ready) {
		int fd = open(ready, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

		if (fd < 0)
			die(ready);
		close(fd);
	}
	end = smr_now_ms() + hold * 1000;
	while (!stop && smr_now_ms() < end)
		usleep(100000);
	for (i = 0; i < n; i++) {
		struct smr_info info;
		socklen_t len = sizeof(info);
		int err = 0;
		socklen_t elen = sizeof(err);

		if (!getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &err, &elen) && err)
			closed++;
		else if (getsockopt(fds[i], SOL_SMR, SMR_INFO, &info, &len))
			closed++;
		else if (info.mode == SMR_MODE_RDMA)
			rdma++;
		else if (info.mode == SMR_MODE_TCP)
			tcp++;
		else
			pending++;
		close(fds[i]);
	}
	printf("held pending=%ld rdma=%ld tcp=%ld closed=%ld\n", pending, rdma,
	       tcp, closed);
	free(fds);
	return 0;
}

int main(int argc, char **argv)
{
	const char *addr = NULL, *net = "10.200.0.0/16", *ready = NULL;
	long n = 1000, pps = 0, secs = 0, uid = -1, hold = 120;
	int port = 0, c;
	bool syn;

	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "syn"))
		syn = true;
	else if (!strcmp(argv[1], "connect"))
		syn = false;
	else
		usage();
	optind = 2;
	while ((c = getopt(argc, argv, "a:p:n:S:r:t:u:R:T:")) != -1) {
		switch (c) {
		case 'a': addr = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'n': n = atol(optarg); break;
		case 'S': net = optarg; break;
		case 'r': pps = atol(optarg); break;
		case 't': secs = atol(optarg); break;
		case 'u': uid = atol(optarg); break;
		case 'R': ready = optarg; break;
		case 'T': hold = atol(optarg); break;
		default: usage();
		}
	}
	if (!addr || port <= 0 || port > 65535 || n < 1)
		usage();
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (syn)
		return run_syn(addr, port, n, net, pps, secs);
	return run_connect(addr, port, n, uid, ready, hold);
}
