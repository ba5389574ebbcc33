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
 * waits for the other's bytes first.
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
 *   -T SECONDS    give up after this long (default 60); unfinished
 *                 connections are reported with err=ETIMEDOUT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "smr_test_lib.h"
#include "negot_sha256.h"

#define NEGOT_CHUNK		65536
#define NEGOT_MAX_LISTENERS	8
#define NEGOT_C2S_SEED		0xc2500000u
#define NEGOT_S2C_SEED		0x52c00000u

enum negot_order { ORDER_BOTH, ORDER_CLIENT_FIRST, ORDER_SERVER_FIRST };
enum negot_kind { KIND_CONN, KIND_LISTENER };
enum negot_state { ST_CONNECTING, ST_ACTIVE, ST_DONE };

static struct {
	bool server;
	bool smr;
	bool v6;
	const char *addr;
	int port;
	int nconns;
	bool blocking;
	uint64_t c2s, s2c;
	enum negot_order order;
	const char *md5_key;
	const char *md5_peer;
	int nlisteners;
	int backlog;
	const char *ready_file;
	int timeout_s;
} opt = {
	.port = 5000, .nconns = 1, .c2s = 65536, .s2c = 65536,
	.nlisteners = 1, .backlog = 4096, .timeout_s = 60,
};

struct negot_listener {
	int kind;		/* KIND_LISTENER: first, like struct negot_conn */
	int fd;
	int idx;
};

struct negot_conn {
	int kind;		/* KIND_CONN */
	int fd;
	int idx;
	int lst;		/* server: which listener accepted it */
	int state;
	int err;		/* errno that ended it, 0 if none */
	const char *err_at;
	long long t_start, t_ready, t_first_rx;
	int early_send;		/* -1 not tried, 0 taken, else errno */
	bool connect_called;
	int connect_ret;	/* what connect() returned */
	int mode_ready;		/* SMR mode when it became usable, -1 n/a */
	unsigned int lport, rport;
	uint32_t tx_seed, rx_seed;
	uint64_t tx_off, tx_len, rx_off, rx_want;
	int64_t rx_bad;		/* first offset off the pattern, -1 none */
	bool tx_shut, rx_eof;
	uint32_t events;	/* registered with epoll, 0 if not */
	struct negot_sha256 tx_sha, rx_sha;
};

static int smr_fam = -1;
static int ep = -1;
static long long t_begin, deadline;
static struct negot_conn *conns;
static int nconns_started, nconns_done, nconns_ok;
static unsigned int spurious_wakeups;
static uint8_t chunk[NEGOT_CHUNK];

static void server_accept_ready(struct negot_listener *l);

static void die(const char *what)
{
	fprintf(stderr, "negot_probe: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: negot_probe server|client [-t smr|tcp] [-6] [-a ADDR] [-p PORT]\n"
		"       [-n N] [-b] [-s BYTES] [-r BYTES] [-o both|client-first|server-first]\n"
		"       [-m KEY] [-P ADDR] [-L N] [-B N] [-R FILE] [-T SECONDS]\n");
	exit(2);
}

static int new_socket(bool nonblock)
{
	int type = SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0);
	int fd;

	if (opt.smr)
		fd = socket(smr_fam, type, opt.v6 ? SMRPROTO_IPV6 : SMRPROTO_IPV4);
	else
		fd = socket(opt.v6 ? AF_INET6 : AF_INET, type, 0);
	return fd;
}

static void set_md5(int fd, const char *peer)
{
	struct tcp_md5sig md5 = {};
	struct sockaddr_storage ss;
	size_t klen = strlen(opt.md5_key);

	if (klen > TCP_MD5SIG_MAXKEYLEN || smr_fill_addr(&ss, opt.v6, peer, 0) < 0) {
		fprintf(stderr, "negot_probe: bad MD5 key or peer address\n");
		exit(2);
	}
	memcpy(&md5.tcpm_addr, &ss, sizeof(ss));
	md5.tcpm_keylen = klen;
	memcpy(md5.tcpm_key, opt.md5_key, klen);
	if (setsockopt(fd, IPPROTO_TCP, TCP_MD5SIG, &md5, sizeof(md5)))
		die("setsockopt(TCP_MD5SIG)");
}

static void ep_set(struct negot_conn *c, uint32_t events)
{
	if (smr_ep_update(ep, c->fd, c, &c->events, events))
		die(c->events ? "epoll_ctl(MOD)" : "epoll_ctl(ADD)");
}

static bool conn_ok(const struct negot_conn *c)
{
	return !c->err && c->tx_off == c->tx_len && c->rx_off == c->rx_want &&
	       c->rx_bad < 0 && c->tx_shut && c->rx_eof;
}

/* Print the connection's line and close it. */
static void conn_finish(struct negot_conn *c)
{
	char tx_hex[65], rx_hex[65];
	struct smr_info info;
	char smr_part[512], cret[16] = "-";
	int ierr = -ENOTSOCK;

	if (c->state == ST_DONE)
		return;
	if (opt.smr && c->fd >= 0)
		ierr = smr_get_info(c->fd, &info);
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
	if (c->events)
		ep_set(c, 0);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = ST_DONE;
	nconns_done++;
	if (conn_ok(c))
		nconns_ok++;
	if (c->connect_called)
		snprintf(cret, sizeof(cret), "%d", c->connect_ret);
	printf("conn role=%s type=%s ip=%d idx=%d lst=%d lport=%u rport=%u err=%s at=%s connect_ret=%s t_ms=%lld ready_ms=%lld first_rx_ms=%lld early_send=%s mode_ready=%d %s tx=%llu rx=%llu rx_bad=%lld tx_sha=%s rx_sha=%s ok=%d\n",
	       opt.server ? "server" : "client", opt.smr ? "smr" : "tcp",
	       opt.v6 ? 6 : 4, c->idx, c->lst, c->lport, c->rport,
	       smr_errname(c->err), c->err_at ? c->err_at : "-", cret,
	       smr_now_ms() - c->t_start,
	       c->t_ready ? c->t_ready - c->t_start : -1LL,
	       c->t_first_rx ? c->t_first_rx - c->t_ready : -1LL,
	       c->early_send < 0 ? "-" : c->early_send ? smr_errname(c->early_send) : "OK",
	       c->mode_ready, smr_part,
	       (unsigned long long)c->tx_off, (unsigned long long)c->rx_off,
	       (long long)c->rx_bad, tx_hex, rx_hex, conn_ok(c));
	fflush(stdout);
}

static void conn_fail(struct negot_conn *c, int err, const char *where)
{
	c->err = err;
	c->err_at = where;
	conn_finish(c);
}

static struct negot_conn *conn_new(void)
{
	struct negot_conn *c = &conns[nconns_started];

	memset(c, 0, sizeof(*c));
	c->kind = KIND_CONN;
	c->fd = -1;
	c->idx = nconns_started++;
	c->lst = -1;
	c->early_send = -1;
	c->mode_ready = -1;
	c->rx_bad = -1;
	c->t_start = smr_now_ms();
	negot_sha256_init(&c->tx_sha);
	negot_sha256_init(&c->rx_sha);
	return c;
}

/* May this end send now? (-o: one side waits for the other's bytes) */
static bool conn_may_send(const struct negot_conn *c)
{
	if (opt.order == ORDER_CLIENT_FIRST && opt.server)
		return c->rx_off >= c->rx_want;
	if (opt.order == ORDER_SERVER_FIRST && !opt.server)
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
	ep_set(c, ev);
}

/* Move what can be moved without blocking; finish when both ways are done. */
static void conn_step(struct negot_conn *c)
{
	bool progress = true;

	while (progress && c->state == ST_ACTIVE) {
		progress = false;
		if (!c->rx_eof) {
			ssize_t n = recv(c->fd, chunk, sizeof(chunk), MSG_DONTWAIT);

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
				conn_fail(c, errno, "recv");
				return;
			}
		}
		if (!c->tx_shut && conn_may_send(c)) {
			uint64_t left = c->tx_len - c->tx_off;

			if (left) {
				size_t len = left < sizeof(chunk) ? left : sizeof(chunk);
				ssize_t n;

				smr_pattern_fill(chunk, len, c->tx_seed, c->tx_off);
				n = send(c->fd, chunk, len, MSG_DONTWAIT | MSG_NOSIGNAL);
				if (n > 0) {
					negot_sha256_update(&c->tx_sha, chunk, n);
					c->tx_off += n;
					progress = true;
				} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
					conn_fail(c, errno, "send");
					return;
				}
			} else {
				if (shutdown(c->fd, SHUT_WR)) {
					conn_fail(c, errno, "shutdown");
					return;
				}
				c->tx_shut = true;
				progress = true;
			}
		}
	}
	if (c->state != ST_ACTIVE)
		return;
	if (c->tx_shut && c->rx_eof)
		conn_finish(c);
	else if (c->rx_eof && !conn_may_send(c))
		conn_fail(c, ENODATA, "eof-before-peer-data");
	else
		conn_update_events(c);
}

/* connect() or accept() completed: the connection is usable from here. */
static void conn_ready(struct negot_conn *c)
{
	struct smr_info info;
	unsigned int client_port;
	int fl;

	c->t_ready = smr_now_ms();
	if (opt.smr && !smr_get_info(c->fd, &info))
		c->mode_ready = info.mode;
	c->lport = smr_sock_port(c->fd, false);
	c->rport = smr_sock_port(c->fd, true);
	client_port = opt.server ? c->rport : c->lport;
	c->tx_seed = (opt.server ? NEGOT_S2C_SEED : NEGOT_C2S_SEED) ^ client_port;
	c->rx_seed = (opt.server ? NEGOT_C2S_SEED : NEGOT_S2C_SEED) ^ client_port;
	c->tx_len = opt.server ? opt.s2c : opt.c2s;
	c->rx_want = opt.server ? opt.c2s : opt.s2c;
	fl = fcntl(c->fd, F_GETFL);
	if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK))
		die("fcntl(O_NONBLOCK)");
	c->state = ST_ACTIVE;
	/* an early byte that was taken is the stream's first byte */
	if (c->early_send == 0) {
		smr_pattern_fill(chunk, 1, c->tx_seed, 0);
		negot_sha256_update(&c->tx_sha, chunk, 1);
		c->tx_off = 1;
	}
	conn_step(c);
}

/* A non-blocking connect reported completion (EPOLLOUT/ERR/HUP). */
static void conn_connected(struct negot_conn *c)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len))
		err = errno;
	if (err) {
		conn_fail(c, err, "connect");
		return;
	}
	conn_ready(c);
}

static void conn_event(struct negot_conn *c)
{
	if (c->state == ST_CONNECTING)
		conn_connected(c);
	else if (c->state == ST_ACTIVE)
		conn_step(c);
}

static void client_start(struct negot_conn *c, const struct sockaddr_storage *ss,
			 socklen_t sslen)
{
	c->fd = new_socket(!opt.blocking);
	if (c->fd < 0)
		die("socket");
	if (opt.md5_key)
		set_md5(c->fd, opt.addr);
	if (opt.blocking) {
		long long left = deadline - smr_now_ms();
		struct timeval tv = {
			.tv_sec = left > 0 ? left / 1000 : 0,
			.tv_usec = left > 0 ? (left % 1000) * 1000 : 1000,
		};

		if (setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
			die("setsockopt(SO_SNDTIMEO)");
	}
	c->t_start = smr_now_ms();
	errno = 0;
	c->connect_ret = connect(c->fd, (const struct sockaddr *)ss, sslen);
	c->connect_called = true;
	if (!c->connect_ret) {
		conn_ready(c);
		return;
	}
	if (c->connect_ret > 0) {
		/* not the syscall ABI: report the value as the error */
		conn_fail(c, c->connect_ret, "connect");
		return;
	}
	if (opt.blocking || errno != EINPROGRESS) {
		conn_fail(c, errno, "connect");
		return;
	}
	c->state = ST_CONNECTING;
	/*
	 * The first pattern byte, at once: refused until the connection is
	 * usable (a client that waits for the server's bytes sends nothing).
	 */
	if (opt.order != ORDER_SERVER_FIRST) {
		smr_pattern_fill(chunk, 1, NEGOT_C2S_SEED ^ smr_sock_port(c->fd, false), 0);
		if (send(c->fd, chunk, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
			c->early_send = 0;
		else
			c->early_send = errno;
	}
	ep_set(c, EPOLLOUT);
}

static void run_loop(bool (*until)(void))
{
	struct epoll_event evs[64];
	int i, n;

	while (!until()) {
		long long left = deadline - smr_now_ms();

		if (left <= 0)
			return;
		n = epoll_wait(ep, evs, 64, left > 1000 ? 1000 : (int)left);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (i = 0; i < n; i++) {
			int *kind = evs[i].data.ptr;

			if (*kind == KIND_CONN)
				conn_event(evs[i].data.ptr);
			else
				server_accept_ready(evs[i].data.ptr);
		}
	}
}

static int cur_conn;

static bool one_done(void)
{
	return conns[cur_conn].state == ST_DONE;
}

static bool all_done(void)
{
	return nconns_done == opt.nconns;
}

static void client_run(void)
{
	struct sockaddr_storage ss;
	int sslen, i;

	sslen = smr_fill_addr(&ss, opt.v6, opt.addr, opt.port);
	if (!opt.addr || sslen < 0) {
		fprintf(stderr, "negot_probe: client needs -a ADDR of the right family\n");
		exit(2);
	}
	for (i = 0; i < opt.nconns; i++) {
		struct negot_conn *c = conn_new();

		client_start(c, &ss, sslen);
		if (opt.blocking) {
			cur_conn = c->idx;
			run_loop(one_done);
			if (c->state != ST_DONE)
				break;
		}
	}
	run_loop(all_done);
}

static struct negot_listener listeners[NEGOT_MAX_LISTENERS];

static void server_accept_ready(struct negot_listener *l)
{
	bool got = false;

	while (nconns_started < opt.nconns) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct negot_conn *c;

		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				if (!got)
					spurious_wakeups++;
				return;
			}
			/* TCP too returns a pending error of a child: go on */
			if (errno == ECONNABORTED || errno == ECONNRESET)
				continue;
			die("accept");
		}
		got = true;
		c = conn_new();
		c->fd = fd;
		c->lst = l->idx;
		conn_ready(c);
	}
	/* all there: stop watching the listeners */
	for (int i = 0; i < opt.nlisteners; i++)
		epoll_ctl(ep, EPOLL_CTL_DEL, listeners[i].fd, NULL);
}

static void server_run(void)
{
	struct sockaddr_storage ss;
	int sslen, i, one = 1;

	sslen = smr_fill_addr(&ss, opt.v6, opt.addr, opt.port);
	if (sslen < 0) {
		fprintf(stderr, "negot_probe: bad bind address\n");
		exit(2);
	}
	if (opt.blocking && opt.nlisteners > 1) {
		fprintf(stderr, "negot_probe: -L needs non-blocking mode\n");
		exit(2);
	}
	for (i = 0; i < opt.nlisteners; i++) {
		struct negot_listener *l = &listeners[i];
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = l };

		l->kind = KIND_LISTENER;
		l->idx = i;
		l->fd = new_socket(!opt.blocking);
		if (l->fd < 0)
			die("socket");
		if (setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
			die("setsockopt(SO_REUSEADDR)");
		if (opt.nlisteners > 1 &&
		    setsockopt(l->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
			die("setsockopt(SO_REUSEPORT)");
		if (opt.md5_key) {
			if (!opt.md5_peer) {
				fprintf(stderr, "negot_probe: -m on a server needs -P ADDR\n");
				exit(2);
			}
			set_md5(l->fd, opt.md5_peer);
		}
		if (bind(l->fd, (struct sockaddr *)&ss, sslen))
			die("bind");
		if (listen(l->fd, opt.backlog))
			die("listen");
		if (!opt.blocking && epoll_ctl(ep, EPOLL_CTL_ADD, l->fd, &ev))
			die("epoll_ctl(listener)");
	}
	if (opt.ready_file) {
		FILE *f = fopen(opt.ready_file, "w");

		if (!f)
			die("ready file");
		fclose(f);
	}
	if (!opt.blocking) {
		run_loop(all_done);
		return;
	}
	for (i = 0; i < opt.nconns; i++) {
		long long left = deadline - smr_now_ms();
		struct timeval tv = {
			.tv_sec = left > 0 ? left / 1000 : 0,
			.tv_usec = left > 0 ? (left % 1000) * 1000 : 1000,
		};
		struct negot_conn *c;
		int fd;

		if (setsockopt(listeners[0].fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
			       sizeof(tv)))
			die("setsockopt(SO_RCVTIMEO)");
		fd = accept4(listeners[0].fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;	/* the deadline passed */
			if (errno == ECONNABORTED || errno == ECONNRESET ||
			    errno == EINTR) {
				i--;
				continue;
			}
			die("accept");
		}
		c = conn_new();
		c->fd = fd;
		c->lst = 0;
		conn_ready(c);
		cur_conn = c->idx;
		run_loop(one_done);
		if (c->state != ST_DONE)
			return;
	}
}

static uint64_t parse_u64(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || end == s)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	struct rlimit rl;
	int c, i;

	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "server"))
		opt.server = true;
	else if (strcmp(argv[1], "client"))
		usage();
	opt.smr = true;
	optind = 2;
	while ((c = getopt(argc, argv, "t:6a:p:n:bs:r:o:m:P:L:B:R:T:")) != -1) {
		switch (c) {
		case 't':
			if (!strcmp(optarg, "tcp"))
				opt.smr = false;
			else if (strcmp(optarg, "smr"))
				usage();
			break;
		case '6':
			opt.v6 = true;
			break;
		case 'a':
			opt.addr = optarg;
			break;
		case 'p':
			opt.port = parse_u64(optarg);
			break;
		case 'n':
			opt.nconns = parse_u64(optarg);
			break;
		case 'b':
			opt.blocking = true;
			break;
		case 's':
			opt.c2s = parse_u64(optarg);
			break;
		case 'r':
			opt.s2c = parse_u64(optarg);
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
		case 'L':
			opt.nlisteners = parse_u64(optarg);
			break;
		case 'B':
			opt.backlog = parse_u64(optarg);
			break;
		case 'R':
			opt.ready_file = optarg;
			break;
		case 'T':
			opt.timeout_s = parse_u64(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind != argc || opt.nconns < 1 || opt.nlisteners < 1 ||
	    opt.nlisteners > NEGOT_MAX_LISTENERS || opt.timeout_s < 1)
		usage();
	if (opt.smr) {
		smr_fam = smr_module_family();
		if (smr_fam < 0) {
			fprintf(stderr, "negot_probe: smr module not loaded (%s)\n",
				SMR_FAMILY_SYSFS);
			exit(2);
		}
	}
	/* room for every connection's socket */
	if (!getrlimit(RLIMIT_NOFILE, &rl) &&
	    rl.rlim_cur < (rlim_t)opt.nconns + 64) {
		rl.rlim_cur = opt.nconns + 64;
		if (rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			die("setrlimit(RLIMIT_NOFILE)");
	}
	/* the last word if everything else hangs: no summary, so a failure */
	alarm(opt.timeout_s + 15);

	conns = calloc(opt.nconns, sizeof(*conns));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (!conns || ep < 0)
		die("setup");
	t_begin = smr_now_ms();
	deadline = t_begin + opt.timeout_s * 1000LL;

	if (opt.server)
		server_run();
	else
		client_run();

	for (i = 0; i < nconns_started; i++)
		if (conns[i].state != ST_DONE)
			conn_fail(&conns[i], ETIMEDOUT, "deadline");
	printf("summary role=%s type=%s conns=%d started=%d ok=%d failed=%d spurious_accept_wakeups=%u elapsed_ms=%lld\n",
	       opt.server ? "server" : "client", opt.smr ? "smr" : "tcp",
	       opt.nconns, nconns_started, nconns_ok,
	       opt.nconns - nconns_ok, spurious_wakeups,
	       smr_now_ms() - t_begin);
	fflush(stdout);
	for (i = 0; i < opt.nlisteners; i++)
		if (listeners[i].kind == KIND_LISTENER)
			close(listeners[i].fd);
	return nconns_ok == opt.nconns ? 0 : 1;
}
