// SPDX-License-Identifier: GPL-2.0
/*
 * smr_fuzz_repro: deterministic reproducers of the kernel bugs the fuzz
 * suite's trinity found (selftests/fuzz_test.sh), one case per run:
 *
 *   smr_fuzz_repro -c CASE [-a ADDR] [-p PORT]
 *
 *   relisten-unspec    a socket listens, connect(AF_UNSPEC) disconnects it,
 *   relisten-shutdown  (or shutdown(SHUT_RDWR) stops it listening), then it
 *                      connects to an SMR listener and the accepted socket
 *                      sends it a byte. The inner TCP socket kept the
 *                      listener's data_ready hook and the negotiation saved
 *                      that hook as TCP's own: the byte's arrival spins in
 *                      softirq (smr_tcp_listen_data_ready() calling itself
 *                      from tcp_data_queue()), RCU stalls and soft lockups
 *                      follow, the machine never recovers.
 *   listener-unspec    a client connects to an SMR listener nobody accepts
 *                      from (SMR holds the connection, counted in the inner
 *                      listener's accept backlog), then connect(AF_UNSPEC)
 *                      on the listener: TCP stops the inner listener with
 *                      SMR's counts still in sk_ack_backlog, and
 *                      inet_csk_listen_stop() WARNs (a panic under
 *                      panic_on_warn).
 *
 * ADDR:PORT (default 127.0.0.1:7300) is where the SMR listener listens;
 * this host's soft-RoCE address gives mode rdma, 127.0.0.1 mode tcp, both
 * reproduce. Prints each step; "ok" and exit 0 if the kernel survived the
 * case (the connection then works both ways), 1 on an error; on an
 * affected kernel the guest dies or hangs and scripts/vm-run reports the
 * splat.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "smr_test_lib.h"

static int family;
static struct sockaddr_in srv = { .sin_family = AF_INET };

static int fail(const char *what)
{
	printf("error: %s: %s\n", what, strerror(errno));
	return 1;
}

static void step(const char *fmt, const char *arg)
{
	printf(fmt, arg);
	putchar('\n');
	fflush(stdout);
}

static int smr_listener(void)
{
	int one = 1, fd = socket(family, SOCK_STREAM, SMRPROTO_IPV4);

	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&srv, sizeof(srv)) || listen(fd, 8))
		return -1;
	return fd;
}

/* A new SMR socket connected to the listener, or -1. */
static int smr_client(void)
{
	int fd = socket(family, SOCK_STREAM, SMRPROTO_IPV4);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&srv, sizeof(srv))) {
		close(fd);
		return -1;
	}
	return fd;
}

static const char *mode_of(int fd)
{
	struct smr_info info;
	socklen_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (getsockopt(fd, SOL_SMR, SMR_INFO, &info, &len))
		return "?";
	return smr_mode_name(info.mode) ?: "?";
}

/* one byte each way between connected @fd and accepted @cfd */
static int exchange(int fd, int cfd)
{
	char c = 'x';

	step("connected, mode %s; the accepted socket sends a byte", mode_of(fd));
	if (send(cfd, &c, 1, 0) != 1 || recv(fd, &c, 1, 0) != 1)
		return fail("server to client byte");
	if (send(fd, &c, 1, 0) != 1 || recv(cfd, &c, 1, 0) != 1)
		return fail("client to server byte");
	step("%s", "ok");
	return 0;
}

/* Listener @lfd accepts connected @fd's connection: one byte each way. */
static int accept_exchange(int lfd, int fd)
{
	int cfd = accept(lfd, NULL, NULL);

	if (cfd < 0)
		return fail("accept()");
	return exchange(fd, cfd);
}

static int case_relisten(bool unspec)
{
	struct sockaddr none = { .sa_family = AF_UNSPEC };
	int lfd, fd;

	lfd = smr_listener();
	if (lfd < 0)
		return fail("SMR listener");
	fd = socket(family, SOCK_STREAM, SMRPROTO_IPV4);
	if (fd < 0 || listen(fd, 1))
		return fail("second socket's listen()");
	step("%s", "a second SMR socket listens");
	if (unspec ? connect(fd, &none, sizeof(none)) : shutdown(fd, SHUT_RDWR))
		return fail(unspec ? "connect(AF_UNSPEC)" : "shutdown()");
	step("%s stopped it listening", unspec ? "connect(AF_UNSPEC)" : "shutdown()");
	if (connect(fd, (struct sockaddr *)&srv, sizeof(srv)))
		return fail("connect()");
	return accept_exchange(lfd, fd);
}

static int case_listener_unspec(void)
{
	struct sockaddr none = { .sa_family = AF_UNSPEC };
	int lfd, fd;

	lfd = smr_listener();
	if (lfd < 0)
		return fail("SMR listener");
	fd = smr_client();
	if (fd < 0)
		return fail("client connect()");
	/* let SMR's accept work take the connection off the inner queue */
	sleep(1);
	step("%s", "a client connected; nobody accepted it");
	if (connect(lfd, &none, sizeof(none)))
		return fail("listener connect(AF_UNSPEC)");
	step("%s", "connect(AF_UNSPEC) stopped the listener");
	close(fd);
	close(lfd);
	lfd = smr_listener();
	if (lfd < 0)
		return fail("SMR listener again");
	fd = smr_client();
	if (fd < 0)
		return fail("second client connect()");
	return accept_exchange(lfd, fd);
}

int main(int argc, char **argv)
{
	const char *addr = "127.0.0.1", *name = NULL;
	unsigned int port = 7300;
	int opt;

	while ((opt = getopt(argc, argv, "c:a:p:")) != -1) {
		switch (opt) {
		case 'c':
			name = optarg;
			break;
		case 'a':
			addr = optarg;
			break;
		case 'p':
			port = (unsigned int)atoi(optarg);
			break;
		default:
			name = NULL;
			optind = argc;
			break;
		}
	}
	if (!name) {
		fprintf(stderr, "usage: %s -c relisten-unspec|relisten-shutdown|listener-unspec [-a ADDR] [-p PORT]\n",
			argv[0]);
		return 2;
	}
	family = smr_module_family();
	if (family < 0)
		return fail("smr not loaded");
	srv.sin_port = htons(port);
	if (inet_pton(AF_INET, addr, &srv.sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", addr);
		return 2;
	}
	alarm(60);
	if (!strcmp(name, "relisten-unspec"))
		return case_relisten(true);
	if (!strcmp(name, "relisten-shutdown"))
		return case_relisten(false);
	if (!strcmp(name, "listener-unspec"))
		return case_listener_unspec();
	fprintf(stderr, "unknown case %s\n", name);
	return 2;
}
