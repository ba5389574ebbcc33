// SPDX-License-Identifier: GPL-2.0
/*
 * smr_stress: system-call races on AF_SMR sockets, for the stress suite
 * (selftests/rdma/suite_stress.sh). Each mode runs -j threads for -i
 * iterations each (or until -T seconds pass) and prints one line
 *
 *   summary mode=M iters=N ok=N errors=ERRNO:COUNT,... stuck=N elapsed_ms=N
 *
 * Exit status 0 iff every iteration ran and no thread was stuck.
 *
 *   listen      socket, bind to -a port 0, listen, a non-blocking connect to
 *               it, close both at once: listen()'s work racing close()
 *   hsclose     a non-blocking connect to -a:-p, close after 0..-d us:
 *               close() racing the client handshake (run a sink there)
 *   acceptshut  a listener on -a, -k threads blocked in accept(), a
 *               connector thread; after 0..-d us shutdown(SHUT_RD) must
 *               wake every accept() within 5 s (a stuck one counts)
 *   sink        accept on -a:-p and close what comes, until -T seconds
 *   drain       accept on -a:-p, read every connection to its end, close
 *               it; until -i connections ended or -T seconds passed
 *               (bytes= in the summary)
 *   linger      connect to -a:-p, write -s bytes in 64-byte writes, close
 *               under SO_LINGER of -L seconds: close() must return once
 *               the bytes and the FIN are out, well before the linger time
 *               (max_close_ms= in the summary; one taking -L counts stuck).
 *               With -R FILE and -G FILE (one iteration per thread): all
 *               threads connect, FILE -R is created, and they write only
 *               once FILE -G appears
 *
 * Options: -a ADDR, -p PORT, -6, -i ITERS (per thread), -j THREADS,
 * -k ACCEPTERS, -d MAX_DELAY_US, -T SECONDS, -U UID (drop to it first),
 * -s BYTES, -L SECONDS, -R READY_FILE, -G GO_FILE.
 *
 * -T is the test bed's patience, so it is multiplied by
 * $SMR_TEST_TIME_SCALE (smr_test_lib.h); the limits that check the kernel
 * (accept() woken within 5 s, close() before the linger time -L) are not.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "smr_test_lib.h"

#define STRESS_MAX_ERRNO	256
#define STRESS_WAKE_MS		5000	/* accept() must wake this fast */
#define STRESS_MAX_THREADS	256

static struct {
	const char *mode;
	const char *addr;
	int port;
	bool v6;
	long iters;
	int threads;
	int accepters;
	int max_delay_us;
	int timeout_s;
	long uid;
	long bytes;
	int linger_s;
	const char *ready_file;
	const char *go_file;
} opt = {
	.iters = 1000, .threads = 2, .accepters = 2, .max_delay_us = 2000,
	.timeout_s = 120, .uid = -1, .bytes = 65536, .linger_s = 20,
};

static int smr_fam;
static long long deadline;
static atomic_long iters_done, ok_count, stuck_count;
static atomic_long bytes_moved, max_close_ms, conns_ended, conns_up;

static atomic_long errno_count[STRESS_MAX_ERRNO];

static void count_errno(int err)
{
	if (err > 0 && err < STRESS_MAX_ERRNO)
		atomic_fetch_add(&errno_count[err], 1);
}

static int smr_socket(int extra_flags)
{
	return socket(smr_fam, SOCK_STREAM | SOCK_CLOEXEC | extra_flags,
		      opt.v6 ? SMRPROTO_IPV6 : SMRPROTO_IPV4);
}

static unsigned int rand_below(unsigned int *seed, unsigned int n)
{
	return n ? rand_r(seed) % n : 0;
}

static bool time_left(void)
{
	return smr_now_ms() < deadline;
}

/* A listener on opt.addr, port @port (0: any); its address in @ss. */
static int make_listener(int port, int backlog, struct sockaddr_storage *ss,
			 socklen_t *len)
{
	int one = 1, fd = smr_socket(0);

	if (fd < 0)
		return -errno;
	*len = smr_fill_addr(ss, opt.v6, opt.addr, port);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)ss, *len) || listen(fd, backlog) ||
	    getsockname(fd, (struct sockaddr *)ss, len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static void *run_listen(void *arg)
{
	unsigned int seed = (uintptr_t)arg * 7919 + time(NULL);
	struct sockaddr_storage ss;
	socklen_t len;
	long i;

	for (i = 0; i < opt.iters && time_left(); i++) {
		int l = make_listener(0, 8, &ss, &len), c;

		atomic_fetch_add(&iters_done, 1);
		if (l < 0) {
			count_errno(-l);
			continue;
		}
		c = smr_socket(SOCK_NONBLOCK);
		if (c >= 0 && rand_below(&seed, 2)) {
			if (connect(c, (struct sockaddr *)&ss, len) &&
			    errno != EINPROGRESS)
				count_errno(errno);
		}
		if (rand_below(&seed, 2))
			usleep(rand_below(&seed, opt.max_delay_us + 1));
		if (c >= 0)
			close(c);
		close(l);
		atomic_fetch_add(&ok_count, 1);
	}
	return NULL;
}

static void *run_hsclose(void *arg)
{
	unsigned int seed = (uintptr_t)arg * 7919 + time(NULL);
	struct sockaddr_storage ss;
	socklen_t len = smr_fill_addr(&ss, opt.v6, opt.addr, opt.port);
	long i;

	for (i = 0; i < opt.iters && time_left(); i++) {
		int c = smr_socket(SOCK_NONBLOCK);

		atomic_fetch_add(&iters_done, 1);
		if (c < 0) {
			count_errno(errno);
			continue;
		}
		if (connect(c, (struct sockaddr *)&ss, len) &&
		    errno != EINPROGRESS) {
			count_errno(errno);
		} else {
			usleep(rand_below(&seed, opt.max_delay_us + 1));
			atomic_fetch_add(&ok_count, 1);
		}
		close(c);
	}
	return NULL;
}

struct accept_round {
	int listener;
	struct sockaddr_storage ss;
	socklen_t len;
	atomic_bool stop;
	atomic_int woken;
};

static void *accepter(void *arg)
{
	struct accept_round *r = arg;
	int fd;

	/* blocking accept until shutdown(SHUT_RD) wakes it with an error */
	while ((fd = accept(r->listener, NULL, NULL)) >= 0)
		close(fd);
	count_errno(errno);
	atomic_fetch_add(&r->woken, 1);
	return NULL;
}

static void *connector(void *arg)
{
	struct accept_round *r = arg;

	while (!atomic_load(&r->stop)) {
		int c = smr_socket(SOCK_NONBLOCK);

		if (c < 0)
			break;
		if (connect(c, (struct sockaddr *)&r->ss, r->len) == 0 ||
		    errno == EINPROGRESS)
			usleep(200);
		close(c);
	}
	return NULL;
}

static void *run_acceptshut(void *arg)
{
	unsigned int seed = (uintptr_t)arg * 7919 + time(NULL);
	pthread_t acc[64], con;
	long i;
	int k;

	for (i = 0; i < opt.iters && time_left(); i++) {
		struct accept_round r = { .listener = -1 };
		long long until;

		atomic_fetch_add(&iters_done, 1);
		r.listener = make_listener(0, 64, &r.ss, &r.len);
		if (r.listener < 0) {
			count_errno(-r.listener);
			continue;
		}
		for (k = 0; k < opt.accepters; k++)
			pthread_create(&acc[k], NULL, accepter, &r);
		pthread_create(&con, NULL, connector, &r);
		usleep(rand_below(&seed, opt.max_delay_us + 1));
		shutdown(r.listener, SHUT_RD);
		until = smr_now_ms() + STRESS_WAKE_MS;
		while (atomic_load(&r.woken) < opt.accepters &&
		       smr_now_ms() < until)
			usleep(1000);
		atomic_store(&r.stop, true);
		pthread_join(con, NULL);
		if (atomic_load(&r.woken) < opt.accepters) {
			/* stuck: report, and let the process end with them */
			atomic_fetch_add(&stuck_count, opt.accepters - atomic_load(&r.woken));
			fprintf(stderr, "smr_stress: accept() not woken by shutdown(SHUT_RD) in %d ms\n",
				STRESS_WAKE_MS);
			return NULL;
		}
		for (k = 0; k < opt.accepters; k++)
			pthread_join(acc[k], NULL);
		close(r.listener);
		atomic_fetch_add(&ok_count, 1);
	}
	return NULL;
}

/* The listener a server mode serves on opt.port; exits if there is none. */
static int server_listener(const char *mode)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = make_listener(opt.port, 4096, &ss, &len);

	if (l < 0) {
		fprintf(stderr, "smr_stress: %s listener: %s\n", mode,
			strerror(-l));
		exit(2);
	}
	return l;
}

static void run_sink(void)
{
	int l = server_listener("sink");

	while (time_left()) {
		struct pollfd p = { .fd = l, .events = POLLIN };
		int fd;

		if (poll(&p, 1, 200) <= 0)
			continue;
		fd = accept4(l, NULL, NULL, SOCK_NONBLOCK);
		atomic_fetch_add(&iters_done, 1);
		if (fd < 0) {
			count_errno(errno);
			continue;
		}
		atomic_fetch_add(&ok_count, 1);
		close(fd);
	}
	close(l);
}

/* -R/-G: once every thread is connected, say so and wait for the go. */
static void linger_barrier(void)
{
	FILE *f;

	if (!opt.ready_file || !opt.go_file)
		return;
	if (atomic_fetch_add(&conns_up, 1) + 1 == opt.threads) {
		f = fopen(opt.ready_file, "w");
		if (f)
			fclose(f);
	}
	while (access(opt.go_file, F_OK) && time_left())
		usleep(10000);
}

static void *drain_one(void *arg)
{
	int fd = (intptr_t)arg;
	char buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		atomic_fetch_add(&bytes_moved, n);
	if (n < 0)
		count_errno(errno);
	else
		atomic_fetch_add(&ok_count, 1);
	close(fd);
	atomic_fetch_add(&conns_ended, 1);
	return NULL;
}

static void run_drain(void)
{
	int l = server_listener("drain");

	while (time_left() && atomic_load(&conns_ended) < opt.iters) {
		struct pollfd p = { .fd = l, .events = POLLIN };
		pthread_t th;
		int fd;

		if (poll(&p, 1, 200) <= 0)
			continue;
		fd = accept(l, NULL, NULL);
		atomic_fetch_add(&iters_done, 1);
		if (fd < 0) {
			count_errno(errno);
			continue;
		}
		if (pthread_create(&th, NULL, drain_one, (void *)(intptr_t)fd)) {
			close(fd);
			continue;
		}
		pthread_detach(th);
	}
	close(l);
}

static void *run_linger(void *arg)
{
	struct sockaddr_storage ss;
	socklen_t len = smr_fill_addr(&ss, opt.v6, opt.addr, opt.port);
	struct linger lg = { .l_onoff = 1, .l_linger = opt.linger_s };
	char buf[64];
	long i, done;
	int one = 1;

	(void)arg;
	memset(buf, 'x', sizeof(buf));
	for (i = 0; i < opt.iters && time_left(); i++) {
		int c = smr_socket(0);
		long long t;
		long ms, prev;

		atomic_fetch_add(&iters_done, 1);
		if (c < 0 || connect(c, (struct sockaddr *)&ss, len)) {
			count_errno(errno);
			if (c >= 0)
				close(c);
			continue;
		}
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		linger_barrier();
		for (done = 0; done < opt.bytes;) {
			ssize_t n = write(c, buf, sizeof(buf));

			if (n <= 0)
				break;
			done += n;
		}
		if (done < opt.bytes) {
			count_errno(errno);
			close(c);
			continue;
		}
		setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		t = smr_now_ms();
		if (close(c))
			count_errno(errno);
		ms = smr_now_ms() - t;
		prev = atomic_load(&max_close_ms);
		while (ms > prev &&
		       !atomic_compare_exchange_weak(&max_close_ms, &prev, ms))
			;
		if (ms >= opt.linger_s * 1000L)
			atomic_fetch_add(&stuck_count, 1);
		else
			atomic_fetch_add(&ok_count, 1);
		atomic_fetch_add(&bytes_moved, done);
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: smr_stress listen|hsclose|acceptshut|sink|drain|linger [-a ADDR]\n"
		"       [-p PORT] [-6] [-i ITERS] [-j THREADS] [-k ACCEPTERS]\n"
		"       [-d MAX_DELAY_US] [-T SECONDS] [-U UID] [-s BYTES] [-L SECONDS]\n"
		"       [-R READY_FILE] [-G GO_FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	void *(*fn)(void *) = NULL;
	pthread_t th[STRESS_MAX_THREADS];
	char errs[2048] = "";
	size_t off = 0;
	long long t0;
	int c, i;

	if (argc < 2)
		usage();
	opt.mode = argv[1];
	optind = 2;
	while ((c = getopt(argc, argv, "a:p:6i:j:k:d:T:U:s:L:R:G:")) != -1) {
		switch (c) {
		case 'a':
			opt.addr = optarg;
			break;
		case 'p':
			opt.port = atoi(optarg);
			break;
		case '6':
			opt.v6 = true;
			break;
		case 'i':
			opt.iters = atol(optarg);
			break;
		case 'j':
			opt.threads = atoi(optarg);
			break;
		case 'k':
			opt.accepters = atoi(optarg);
			break;
		case 'd':
			opt.max_delay_us = atoi(optarg);
			break;
		case 'T':
			opt.timeout_s = atoi(optarg);
			break;
		case 'U':
			opt.uid = atol(optarg);
			break;
		case 's':
			opt.bytes = atol(optarg);
			break;
		case 'L':
			opt.linger_s = atoi(optarg);
			break;
		case 'R':
			opt.ready_file = optarg;
			break;
		case 'G':
			opt.go_file = optarg;
			break;
		default:
			usage();
		}
	}
	if (!opt.addr || opt.threads < 1 || opt.threads > STRESS_MAX_THREADS ||
	    opt.accepters < 1 || opt.accepters > 64 || opt.iters < 1)
		usage();
	if (!strcmp(opt.mode, "listen"))
		fn = run_listen;
	else if (!strcmp(opt.mode, "hsclose"))
		fn = run_hsclose;
	else if (!strcmp(opt.mode, "acceptshut"))
		fn = run_acceptshut;
	else if (!strcmp(opt.mode, "linger"))
		fn = run_linger;
	else if (strcmp(opt.mode, "sink") && strcmp(opt.mode, "drain"))
		usage();
	smr_fam = smr_module_family();
	if (smr_fam < 0) {
		fprintf(stderr, "smr_stress: smr module not loaded\n");
		return 2;
	}
	if (opt.uid >= 0 && (setgroups(0, NULL) ||
			     setresgid(opt.uid, opt.uid, opt.uid) ||
			     setresuid(opt.uid, opt.uid, opt.uid))) {
		perror("smr_stress: dropping privileges");
		return 2;
	}
	t0 = smr_now_ms();
	deadline = t0 + opt.timeout_s * 1000LL * smr_time_scale();
	if (fn) {
		for (i = 0; i < opt.threads; i++)
			pthread_create(&th[i], NULL, fn, (void *)(uintptr_t)i);
		for (i = 0; i < opt.threads; i++)
			pthread_join(th[i], NULL);
	} else if (!strcmp(opt.mode, "drain")) {
		run_drain();
	} else {
		run_sink();
	}
	for (i = 1; i < STRESS_MAX_ERRNO; i++) {
		long n = atomic_load(&errno_count[i]);

		if (n && off < sizeof(errs) - 64)
			off += snprintf(errs + off, sizeof(errs) - off, "%s%s:%ld",
					off ? "," : "", smr_errname(i), n);
	}
	printf("summary mode=%s iters=%ld ok=%ld errors=%s stuck=%ld elapsed_ms=%lld bytes=%ld max_close_ms=%ld\n",
	       opt.mode, atomic_load(&iters_done), atomic_load(&ok_count),
	       off ? errs : "-", atomic_load(&stuck_count), smr_now_ms() - t0,
	       atomic_load(&bytes_moved), atomic_load(&max_close_ms));
	fflush(stdout);
	/* stuck threads never return: do not wait for them */
	_exit(atomic_load(&stuck_count) ? 1 : 0);
}
