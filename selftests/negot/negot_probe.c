// SPDX-License-Identifier: GPL-2.0
/*
 * negot_probe: one end of SMR negotiation test connections.
 *
 *   negot_probe server [options]    listen, accept -n connections
 *   negot_probe client -a ADDR [options]
 *
 * Every connection moves a pattern stream each way (client to server -s
 * bytes, server to client -r bytes; each byte depends on its offset and on
 * the client's port, so a lost, extra or foreign byte shows at its offset),
 * then shuts its sending side and reads to EOF. Both directions run at once
 * from the moment connect()/accept() returns, unless -o says one side
 * waits for the other's bytes first. The sockets, connects, accepts and the
 * epoll loop are selftests/lib/engine.c's.
 *
 * One line per connection on stdout, "conn key=value ...":
 *   err, at        errno that ended it (0 if none) and where (connect,
 *                  recv, send, shutdown, deadline)
 *   connect_ret    client: what connect() itself returned
 *   t_ms           from connect() (client) or accept() (server) to the end
 *   ready_ms       from connect() until the connection was usable
 *   first_rx_ms    from usable until the peer's first byte arrived
 *   early_send     non-blocking client: send() of the stream's first byte
 *                  right after connect() returned EINPROGRESS: its errno, or
 *                  OK if it was taken (not tried when the client waits for
 *                  the server to speak first)
 *   mode_ready     SMR mode when the connection became usable (EPOLLOUT,
 *                  connect() or accept() returning): an SMR socket must
 *                  never look usable while its negotiation is pending (0)
 *   mode ... hs_brecv   SMR_INFO at the end (AF_SMR sockets; -1 otherwise):
 *                  info_sent/info_recv are bytes_sent/received (all the
 *                  application's bytes), rdma_sent/rdma_recv the part of
 *                  them moved by RDMA, hs_bsent/hs_brecv the handshake
 *                  messages' bytes on the TCP stream
 *   tx, rx         bytes sent and received
 *   rx_bad         offset of the first received byte off the pattern, -1
 *   tx_sha, rx_sha SHA-256 of all bytes sent and received
 *   ok             1 if every byte went both ways intact
 * then one "summary" line (with spurious_accept_wakeups: listener wake-ups
 * whose accept() found nothing). Exit status 0 iff every connection is ok.
 *
 * Options:
 *   -t smr|tcp    socket family: AF_SMR (default) or plain AF_INET/AF_INET6
 *   -6            IPv6 (AF_SMR: SMRPROTO_IPV6)
 *   -a ADDR       client: where to connect; server: bind address (any)
 *   -p PORT       port (default 5000)
 *   -n N          connections (default 1)
 *   -b            blocking connect()/accept(), one connection at a time;
 *                 default: non-blocking, all at once, completion by epoll
 *   -s BYTES      client-to-server bytes per connection (default 65536)
 *   -r BYTES      server-to-client bytes per connection (default 65536)
 *   -o ORDER      both (default): both send at once; client-first: the
 *                 server sends once it has the client's bytes;
 *                 server-first: the client sends once it has the server's
 *   -m KEY        TCP-MD5 key (RFC 2385) for the peer address
 *   -P ADDR       server: the peer address the MD5 key is for
 *   -L N          server: N listeners on the port with SO_REUSEPORT
 *   -B N          server: listen() backlog (default 4096)
 *   -R FILE       server: create FILE once listening
 *   -T SECONDS    give up after this long (default 60) times
 *                 $SMR_TEST_TIME_SCALE (smr_test_lib.h); unfinished
 *                 connections are reported with err=ETIMEDOUT
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "smr_test_lib.h"
#include "engine.h"
#include "negot_sha256.h"

#define NEGOT_CHUNK		65536
#define NEGOT_C2S_SEED		0xc2500000u
#define NEGOT_S2C_SEED		0x52c00000u

enum negot_order { ORDER_BOTH, ORDER_CLIENT_FIRST, ORDER_SERVER_FIRST };

/* This tool's options; the shared ones are in eng_opt. */
static struct {
	uint64_t c2s, s2c;
	enum negot_order order;
	const char *md5_key;
	const char *md5_peer;
} opt = {
	.c2s = 65536, .s2c = 65536,
};

struct negot_conn {
	struct eng_conn e;	/* first: the engine's part */
	long long t_ready, t_first_rx;
	int early_send;		/* -1 not tried, 0 taken, else errno */
	int mode_ready;		/* SMR mode when it became usable, -1 n/a */
	uint32_t tx_seed, rx_seed;
	uint64_t tx_off, tx_len, rx_off, rx_want;
	int64_t rx_bad;		/* first offset off the pattern, -1 none */
	bool tx_shut, rx_eof;
	struct negot_sha256 tx_sha, rx_sha;
};

static uint8_t chunk[NEGOT_CHUNK];

static void usage(void)
{
	fprintf(stderr,
		"usage: negot_probe server|client [-t smr|tcp] [-6] [-a ADDR] [-p PORT]\n"
		"       [-n N] [-b] [-s BYTES] [-r BYTES] [-o both|client-first|server-first]\n"
		"       [-m KEY] [-P ADDR] [-L N] [-B N] [-R FILE] [-T SECONDS]\n");
	exit(2);
}

static void set_md5(int fd, const char *peer)
{
	struct tcp_md5sig md5 = {};
	struct sockaddr_storage ss;
	size_t klen = strlen(opt.md5_key);

	if (klen > TCP_MD5SIG_MAXKEYLEN || smr_fill_addr(&ss, eng_opt.v6, peer, 0) < 0) {
		fprintf(stderr, "negot_probe: bad MD5 key or peer address\n");
		exit(2);
	}
	memcpy(&md5.tcpm_addr, &ss, sizeof(ss));
	md5.tcpm_keylen = klen;
	memcpy(md5.tcpm_key, opt.md5_key, klen);
	if (setsockopt(fd, IPPROTO_TCP, TCP_MD5SIG, &md5, sizeof(md5)))
		eng_die("setsockopt(TCP_MD5SIG)");
}

static bool conn_ok(const struct negot_conn *c)
{
	return !c->e.err && c->tx_off == c->tx_len && c->rx_off == c->rx_want &&
	       c->rx_bad < 0 && c->tx_shut && c->rx_eof;
}

/* The engine's report: the connection's line. */
static bool conn_report(struct eng_conn *ec)
{
	struct negot_conn *c = (struct negot_conn *)ec;
	char tx_hex[65], rx_hex[65];
	struct smr_info info;
	char smr_part[512], cret[16] = "-";
	int ierr = -ENOTSOCK;

	if (eng_opt.smr && c->e.fd >= 0)
		ierr = smr_get_info(c->e.fd, &info);
	if (!ierr)
		snprintf(smr_part, sizeof(smr_part),
			 "mode=%u reason=%u peer_reason=%u ltok=%016llx ptok=%016llx lrmb=%u prmb=%u hs_sent=%u hs_recv=%u info_sent=%llu info_recv=%llu rdma_sent=%llu rdma_recv=%llu hs_bsent=%u hs_brecv=%u",
			 info.mode, info.reason, info.peer_reason,
			 (unsigned long long)info.local_token,
			 (unsigned long long)info.peer_token,
			 info.local_rmb_size, info.peer_rmb_size,
			 info.hs_msgs_sent, info.hs_msgs_received,
			 (unsigned long long)info.bytes_sent,
			 (unsigned long long)info.bytes_received,
			 (unsigned long long)info.rdma_bytes_sent,
			 (unsigned long long)info.rdma_bytes_received,
			 info.hs_bytes_sent, info.hs_bytes_received);
	else
		snprintf(smr_part, sizeof(smr_part),
			 "mode=-1 reason=-1 peer_reason=-1 ltok=- ptok=- lrmb=-1 prmb=-1 hs_sent=-1 hs_recv=-1 info_sent=-1 info_recv=-1 rdma_sent=-1 rdma_recv=-1 hs_bsent=-1 hs_brecv=-1 info_err=%s",
			 smr_errname(-ierr));
	negot_sha256_hex(&c->tx_sha, tx_hex);
	negot_sha256_hex(&c->rx_sha, rx_hex);
	if (c->e.connect_called)
		snprintf(cret, sizeof(cret), "%d", c->e.connect_ret);
	printf("conn role=%s type=%s ip=%d idx=%d lst=%d lport=%u rport=%u err=%s at=%s connect_ret=%s t_ms=%lld ready_ms=%lld first_rx_ms=%lld early_send=%s mode_ready=%d %s tx=%llu rx=%llu rx_bad=%lld tx_sha=%s rx_sha=%s ok=%d\n",
	       eng_opt.server ? "server" : "client", eng_opt.smr ? "smr" : "tcp",
	       eng_opt.v6 ? 6 : 4, c->e.idx, c->e.lst, c->e.lport, c->e.rport,
	       smr_errname(c->e.err), c->e.err_at ? c->e.err_at : "-", cret,
	       smr_now_ms() - c->e.t_start,
	       c->t_ready ? c->t_ready - c->e.t_start : -1LL,
	       c->t_first_rx ? c->t_first_rx - c->t_ready : -1LL,
	       c->early_send < 0 ? "-" : c->early_send ? smr_errname(c->early_send) : "OK",
	       c->mode_ready, smr_part,
	       (unsigned long long)c->tx_off, (unsigned long long)c->rx_off,
	       (long long)c->rx_bad, tx_hex, rx_hex, conn_ok(c));
	fflush(stdout);
	return conn_ok(c);
}

/* The engine's new connection: nothing moved, nothing known yet. */
static void conn_init(struct eng_conn *ec)
{
	struct negot_conn *c = (struct negot_conn *)ec;

	c->early_send = -1;
	c->mode_ready = -1;
	c->rx_bad = -1;
	negot_sha256_init(&c->tx_sha);
	negot_sha256_init(&c->rx_sha);
}

/* May this end send now? (-o: one side waits for the other's bytes) */
static bool conn_may_send(const struct negot_conn *c)
{
	if (opt.order == ORDER_CLIENT_FIRST && eng_opt.server)
		return c->rx_off >= c->rx_want;
	if (opt.order == ORDER_SERVER_FIRST && !eng_opt.server)
		return c->rx_off >= c->rx_want;
	return true;
}

static void conn_update_events(struct negot_conn *c)
{
	uint32_t ev = 0;

	if (!c->rx_eof)
		ev |= EPOLLIN;
	if (!c->tx_shut && conn_may_send(c))
		ev |= EPOLLOUT;
	eng_ep_set(&c->e, ev);
}

/* Move what can be moved without blocking; finish when both ways are done. */
static void conn_step(struct negot_conn *c)
{
	bool progress = true;

	while (progress && c->e.state == ENG_ACTIVE) {
		progress = false;
		if (!c->rx_eof) {
			ssize_t n = recv(c->e.fd, chunk, sizeof(chunk), MSG_DONTWAIT);

			if (n > 0) {
				if (!c->t_first_rx)
					c->t_first_rx = smr_now_ms();
				if (c->rx_bad < 0) {
					size_t bad = smr_pattern_check(chunk, n, c->rx_seed,
								       c->rx_off);
					if (bad < (size_t)n)
						c->rx_bad = c->rx_off + bad;
				}
				negot_sha256_update(&c->rx_sha, chunk, n);
				c->rx_off += n;
				progress = true;
			} else if (n == 0) {
				c->rx_eof = true;
				progress = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				eng_fail(&c->e, errno, "recv");
				return;
			}
		}
		if (!c->tx_shut && conn_may_send(c)) {
			uint64_t left = c->tx_len - c->tx_off;

			if (left) {
				size_t len = left < sizeof(chunk) ? left : sizeof(chunk);
				ssize_t n;

				smr_pattern_fill(chunk, len, c->tx_seed, c->tx_off);
				n = send(c->e.fd, chunk, len, MSG_DONTWAIT | MSG_NOSIGNAL);
				if (n > 0) {
					negot_sha256_update(&c->tx_sha, chunk, n);
					c->tx_off += n;
					progress = true;
				} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
					eng_fail(&c->e, errno, "send");
					return;
				}
			} else {
				if (shutdown(c->e.fd, SHUT_WR)) {
					eng_fail(&c->e, errno, "shutdown");
					return;
				}
				c->tx_shut = true;
				progress = true;
			}
		}
	}
	if (c->e.state != ENG_ACTIVE)
		return;
	if (c->tx_shut && c->rx_eof)
		eng_finish(&c->e);
	else if (c->rx_eof && !conn_may_send(c))
		eng_fail(&c->e, ENODATA, "eof-before-peer-data");
	else
		conn_update_events(c);
}

/* connect() or accept() completed: the connection is usable from here. */
static void conn_ready(struct eng_conn *ec)
{
	struct negot_conn *c = (struct negot_conn *)ec;
	struct smr_info info;
	unsigned int client_port;

	c->t_ready = smr_now_ms();
	if (eng_opt.smr && !smr_get_info(c->e.fd, &info))
		c->mode_ready = info.mode;
	client_port = eng_opt.server ? c->e.rport : c->e.lport;
	c->tx_seed = (eng_opt.server ? NEGOT_S2C_SEED : NEGOT_C2S_SEED) ^ client_port;
	c->rx_seed = (eng_opt.server ? NEGOT_C2S_SEED : NEGOT_S2C_SEED) ^ client_port;
	c->tx_len = eng_opt.server ? opt.s2c : opt.c2s;
	c->rx_want = eng_opt.server ? opt.c2s : opt.s2c;
	/* an early byte that was taken is the stream's first byte */
	if (c->early_send == 0) {
		smr_pattern_fill(chunk, 1, c->tx_seed, 0);
		negot_sha256_update(&c->tx_sha, chunk, 1);
		c->tx_off = 1;
	}
	conn_step(c);
}

static void conn_event(struct eng_conn *ec)
{
	conn_step((struct negot_conn *)ec);
}

/* TCP-MD5 (-m) on every socket, for the peer address (-a, or -P on a server). */
static void conn_prepare(int fd, bool listener)
{
	if (!opt.md5_key)
		return;
	if (listener && !opt.md5_peer) {
		fprintf(stderr, "negot_probe: -m on a server needs -P ADDR\n");
		exit(2);
	}
	set_md5(fd, listener ? opt.md5_peer : eng_opt.addr);
}

/*
 * The first pattern byte, at once, while a non-blocking connect() is in
 * flight: refused until the connection is usable (a client that waits for
 * the server's bytes sends nothing).
 */
static void conn_connecting(struct eng_conn *ec)
{
	struct negot_conn *c = (struct negot_conn *)ec;

	if (opt.order == ORDER_SERVER_FIRST)
		return;
	smr_pattern_fill(chunk, 1, NEGOT_C2S_SEED ^ smr_sock_port(c->e.fd, false), 0);
	if (send(c->e.fd, chunk, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
		c->early_send = 0;
	else
		c->early_send = errno;
}

static const struct eng_tool negot_tool = {
	.name = "negot_probe",
	.conn_size = sizeof(struct negot_conn),
	.alarm_slack_s = 15,
	.tick_ms = 1000,
	.usage = usage,
	.init = conn_init,
	.prepare = conn_prepare,
	.connecting = conn_connecting,
	.ready = conn_ready,
	.step = conn_event,
	.report = conn_report,
};

int main(int argc, char **argv)
{
	int c;

	eng_init(&negot_tool, argc, argv);
	eng_opt.port = 5000;
	eng_opt.timeout_s = 60;
	while ((c = getopt(argc, argv, "t:6a:p:n:bs:r:o:m:P:L:B:R:T:")) != -1) {
		switch (c) {
		case 's':
			opt.c2s = eng_parse_u64(optarg);
			break;
		case 'r':
			opt.s2c = eng_parse_u64(optarg);
			break;
		case 'o':
			if (!strcmp(optarg, "both"))
				opt.order = ORDER_BOTH;
			else if (!strcmp(optarg, "client-first"))
				opt.order = ORDER_CLIENT_FIRST;
			else if (!strcmp(optarg, "server-first"))
				opt.order = ORDER_SERVER_FIRST;
			else
				usage();
			break;
		case 'm':
			opt.md5_key = optarg;
			break;
		case 'P':
			opt.md5_peer = optarg;
			break;
		default:
			if (!eng_parse_opt(c, optarg))
				usage();
		}
	}
	if (optind != argc)
		usage();
	eng_setup();

	eng_run();

	eng_fail_unfinished("deadline");
	printf("summary role=%s type=%s conns=%d started=%d ok=%d failed=%d spurious_accept_wakeups=%u elapsed_ms=%lld\n",
	       eng_opt.server ? "server" : "client", eng_opt.smr ? "smr" : "tcp",
	       eng_opt.nconns, eng_nstarted, eng_nok,
	       eng_opt.nconns - eng_nok, eng_spurious_wakeups,
	       smr_now_ms() - eng_t_begin);
	fflush(stdout);
	return eng_nok == eng_opt.nconns ? 0 : 1;
}
