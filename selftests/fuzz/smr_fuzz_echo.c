// SPDX-License-Identifier: GPL-2.0
/*
 * smr_fuzz_echo: the peer trinity's SMR sockets connect to in the fuzz
 * suite (selftests/fuzz_test.sh). Without it a connected socket of
 * trinity's pool only ever talks to an accepted socket nobody reads: its
 * receive path would never see a byte.
 *
 *   smr_fuzz_echo -p BASE -n COUNT [-s SEED] [-R FILE]
 *
 * Listens on SMR sockets on ports BASE..BASE+COUNT-1, IPv4 and IPv6 (any
 * address), accepts every connection, and echoes what it reads (as much as
 * the socket takes at once, the rest dropped). Now and then, pseudo-randomly
 * (-s), it does what a real peer may do to a connection: shut down its
 * sending side, send an urgent byte, reset it (SO_LINGER 0) or close it.
 * It also reads every accepted socket's mode (SMR_INFO) and whether it came
 * from this host's own address or another's, to show that the connections
 * trinity made ran in mode rdma as well as tcp, to itself and to its peer
 * host. -R FILE is
 * created once it listens. SIGTERM or SIGINT ends it; it then closes
 * everything and prints one line:
 *
 *   echo accepted=N self=N remote=N rdma=N tcp=N pending=N bytes_in=N
 *        bytes_out=N shutdowns=N urgent=N resets=N closes=N eof=N errors=N
 *
 * Exit status 0, or 1 if a listener could not be set up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "smr_test_lib.h"

#define ECHO_MAX_PORTS	64
#define ECHO_BUF	65536
/* epoll data below this marks a listener, above it a connection's fd */
#define ECHO_LISTENER	(1ULL << 32)

static volatile sig_atomic_t echo_stop;
static uint64_t echo_rng = 0x9e3779b97f4a7c15ULL;

static struct {
	unsigned long accepted, self, remote, rdma, tcp, pending;
	unsigned long bytes_in, bytes_out;
	unsigned long shutdowns, urgent, resets, closes, eof, errors;
} st;

static void echo_on_signal(int sig)
{
	(void)sig;
	echo_stop = 1;
}

/* xorshift64*: a deterministic sequence per -s seed */
static uint32_t echo_rand(void)
{
	echo_rng ^= echo_rng >> 12;
	echo_rng ^= echo_rng << 25;
	echo_rng ^= echo_rng >> 27;
	return (uint32_t)((echo_rng * 0x2545f4914f6cdd1dULL) >> 32);
}

static int echo_listen(int family, bool v6, unsigned int port)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6,
				     .sin6_port = htons(port),
				     .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1, fd;

	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    v6 ? SMRPROTO_IPV6 : SMRPROTO_IPV4);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    (v6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one))) ||
	    (v6 ? bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) :
		  bind(fd, (struct sockaddr *)&sin, sizeof(sin))) ||
	    listen(fd, 1024)) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

static void echo_count_mode(int fd)
{
	struct smr_info info;
	socklen_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (getsockopt(fd, SOL_SMR, SMR_INFO, &info, &len)) {
		st.errors++;
		return;
	}
	if (info.mode == SMR_MODE_RDMA)
		st.rdma++;
	else if (info.mode == SMR_MODE_TCP)
		st.tcp++;
	else
		st.pending++;
}

/* a connection from this host's own address (the same as ours) or not */
static void echo_count_origin(int fd)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	const void *a, *b;
	size_t n;

	if (getsockname(fd, (struct sockaddr *)&me, &ml) ||
	    getpeername(fd, (struct sockaddr *)&peer, &pl) ||
	    me.ss_family != peer.ss_family) {
		st.errors++;
		return;
	}
	if (me.ss_family == AF_INET) {
		a = &((struct sockaddr_in *)&me)->sin_addr;
		b = &((struct sockaddr_in *)&peer)->sin_addr;
		n = sizeof(struct in_addr);
	} else {
		a = &((struct sockaddr_in6 *)&me)->sin6_addr;
		b = &((struct sockaddr_in6 *)&peer)->sin6_addr;
		n = sizeof(struct in6_addr);
	}
	if (memcmp(a, b, n))
		st.remote++;
	else
		st.self++;
}

static void echo_accept(int ep, int lfd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	int fd;

	for (;;) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED)
				st.errors++;
			return;
		}
		st.accepted++;
		echo_count_mode(fd);
		echo_count_origin(fd);
		ev.data.u64 = (uint64_t)fd;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
			st.errors++;
			close(fd);
		}
	}
}

static void echo_close(int fd, bool reset)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (reset)
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);	/* epoll forgets a closed fd by itself */
}

static void echo_serve(int fd, char *buf)
{
	ssize_t n, w;
	uint32_t r;

	n = recv(fd, buf, ECHO_BUF, 0);
	if (n == 0) {
		st.eof++;
		echo_close(fd, false);
		return;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		st.errors++;
		echo_close(fd, false);
		return;
	}
	st.bytes_in += n;
	w = send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w > 0)
		st.bytes_out += w;
	r = echo_rand() % 256;
	if (r < 2) {
		st.resets++;
		echo_close(fd, true);
	} else if (r < 4) {
		st.closes++;
		echo_close(fd, false);
	} else if (r < 8) {
		st.shutdowns++;
		shutdown(fd, SHUT_WR);
	} else if (r < 12) {
		if (send(fd, "!", 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
			st.urgent++;
	}
}

int main(int argc, char **argv)
{
	struct rlimit nofile = { 65536, 65536 };
	struct epoll_event evs[64], ev = { .events = EPOLLIN };
	unsigned int base = 0, count = 0, i;
	const char *ready = NULL;
	struct sigaction sa;
	int family, ep, opt, n;
	char *buf;

	while ((opt = getopt(argc, argv, "p:n:s:R:")) != -1) {
		switch (opt) {
		case 'p':
			base = (unsigned int)atoi(optarg);
			break;
		case 'n':
			count = (unsigned int)atoi(optarg);
			break;
		case 's':
			echo_rng ^= strtoull(optarg, NULL, 0) * 0xbf58476d1ce4e5b9ULL;
			break;
		case 'R':
			ready = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s -p BASE -n COUNT [-s SEED] [-R FILE]\n",
				argv[0]);
			return 2;
		}
	}
	if (!base || !count || count > ECHO_MAX_PORTS || base + count > 65536) {
		fprintf(stderr, "smr_fuzz_echo: -p BASE -n COUNT (1..%d ports) needed\n",
			ECHO_MAX_PORTS);
		return 2;
	}
	family = smr_module_family();
	if (family < 0) {
		fprintf(stderr, "smr_fuzz_echo: %s: smr not loaded\n", SMR_FAMILY_SYSFS);
		return 1;
	}
	/* trinity's sockets may pile up in our accept queues: keep up */
	setrlimit(RLIMIT_NOFILE, &nofile);
	buf = malloc(ECHO_BUF);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (!buf || ep < 0) {
		perror("smr_fuzz_echo: setup");
		return 1;
	}
	for (i = 0; i < 2 * count; i++) {
		bool v6 = i >= count;
		int lfd = echo_listen(family, v6, base + i % count);

		if (lfd < 0) {
			fprintf(stderr, "smr_fuzz_echo: listen on %s port %u: %s\n",
				v6 ? "IPv6" : "IPv4", base + i % count, strerror(errno));
			return 1;
		}
		ev.data.u64 = ECHO_LISTENER | (uint64_t)lfd;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev)) {
			perror("smr_fuzz_echo: epoll_ctl");
			return 1;
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = echo_on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (ready) {
		int fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

		if (fd >= 0)
			close(fd);
	}

	while (!echo_stop) {
		n = epoll_wait(ep, evs, 64, 1000);
		for (i = 0; i < (unsigned int)(n > 0 ? n : 0); i++) {
			if (evs[i].data.u64 & ECHO_LISTENER)
				echo_accept(ep, (int)(evs[i].data.u64 & 0xffffffff));
			else
				echo_serve((int)evs[i].data.u64, buf);
		}
	}
	printf("echo accepted=%lu self=%lu remote=%lu rdma=%lu tcp=%lu pending=%lu bytes_in=%lu bytes_out=%lu shutdowns=%lu urgent=%lu resets=%lu closes=%lu eof=%lu errors=%lu\n",
	       st.accepted, st.self, st.remote, st.rdma, st.tcp, st.pending, st.bytes_in,
	       st.bytes_out, st.shutdowns, st.urgent, st.resets, st.closes,
	       st.eof, st.errors);
	return 0;
}
