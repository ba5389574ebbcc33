// SPDX-License-Identifier: GPL-2.0
/*
 * The connection engine of SMR's traffic tools: see engine.h.
 *
 * Locking and lifetimes: single-threaded; the connection table is allocated
 * once in eng_setup() and lives until exit, a socket until eng_finish()
 * (connections) or until every connection was accepted (listeners).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "smr_test_lib.h"
#include "engine.h"

struct eng_listener {
	enum eng_kind kind;	/* ENG_LISTENER: first, as in struct eng_conn */
	int fd;
	int idx;
};

struct eng_opts eng_opt = {
	.smr = true, .nconns = 1, .backlog = 4096, .nlisteners = 1,
	.timeout_s = 60, .run_as_uid = -1,
};
long long eng_t_begin, eng_deadline;
int eng_nstarted, eng_ndone, eng_nok;
unsigned int eng_spurious_wakeups;

static const struct eng_tool *tool;
static int smr_fam = -1;
static int ep = -1;
static char *table;
static struct eng_listener listeners[ENG_MAX_LISTENERS];

void eng_die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", tool->name, what, strerror(errno));
	exit(2);
}

static void eng_exit_msg(const char *msg)
{
	fprintf(stderr, "%s: %s\n", tool->name, msg);
	exit(2);
}

void eng_init(const struct eng_tool *t, int argc, char **argv)
{
	tool = t;
	if (argc < 2)
		tool->usage();
	if (!strcmp(argv[1], "server"))
		eng_opt.server = true;
	else if (strcmp(argv[1], "client"))
		tool->usage();
	optind = 2;
}

uint64_t eng_parse_u64(const char *s)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || end == s)
		tool->usage();
	return v;
}

bool eng_parse_opt(int c, const char *arg)
{
	switch (c) {
	case 't':
		if (!strcmp(arg, "tcp"))
			eng_opt.smr = false;
		else if (strcmp(arg, "smr"))
			tool->usage();
		return true;
	case '6':
		eng_opt.v6 = true;
		return true;
	case 'a':
		eng_opt.addr = arg;
		return true;
	case 'b':
		eng_opt.blocking = true;
		return true;
	case 'p':
		eng_opt.port = eng_parse_u64(arg);
		return true;
	case 'n':
		eng_opt.nconns = eng_parse_u64(arg);
		return true;
	case 'B':
		eng_opt.backlog = eng_parse_u64(arg);
		return true;
	case 'L':
		eng_opt.nlisteners = eng_parse_u64(arg);
		return true;
	case 'R':
		eng_opt.ready_file = arg;
		return true;
	case 'T':
		eng_opt.timeout_s = eng_parse_u64(arg);
		return true;
	case 'U':
		eng_opt.run_as_uid = (long)eng_parse_u64(arg);
		return true;
	}
	return false;
}

void eng_setup(void)
{
	struct rlimit rl;

	if (eng_opt.nconns < 1 || eng_opt.timeout_s < 1 || eng_opt.nlisteners < 1 ||
	    eng_opt.nlisteners > ENG_MAX_LISTENERS)
		tool->usage();
	if (eng_opt.smr) {
		smr_fam = smr_module_family();
		if (smr_fam < 0) {
			fprintf(stderr, "%s: smr module not loaded (%s)\n",
				tool->name, SMR_FAMILY_SYSFS);
			exit(2);
		}
	}
	/* room for every connection's socket */
	if (!getrlimit(RLIMIT_NOFILE, &rl) &&
	    rl.rlim_cur < (rlim_t)eng_opt.nconns + 64) {
		rl.rlim_cur = eng_opt.nconns + 64;
		if (rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			eng_die("setrlimit(RLIMIT_NOFILE)");
	}
	signal(SIGPIPE, SIG_IGN);
	/* the last word if everything else hangs: no summary, so a failure */
	alarm((eng_opt.timeout_s + tool->alarm_slack_s) * smr_time_scale());

	table = calloc(eng_opt.nconns, tool->conn_size);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (!table || ep < 0)
		eng_die("setup");
	eng_t_begin = smr_now_ms();
	/* -T is the test bed's patience: stretched by its time scale */
	eng_deadline = eng_t_begin + eng_opt.timeout_s * 1000LL * smr_time_scale();
}

struct eng_conn *eng_conn(int idx)
{
	return (struct eng_conn *)(table + (size_t)idx * tool->conn_size);
}

void eng_ep_set(struct eng_conn *c, uint32_t events)
{
	if (smr_ep_update(ep, c->fd, c, &c->events, events))
		eng_die(c->events ? "epoll_ctl(MOD)" : "epoll_ctl(ADD)");
}

void eng_touch(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		eng_die(path);
	fclose(f);
}

static int eng_socket(bool nonblock)
{
	int type = SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0);

	if (eng_opt.smr)
		return socket(smr_fam, type, eng_opt.v6 ? SMRPROTO_IPV6 : SMRPROTO_IPV4);
	return socket(eng_opt.v6 ? AF_INET6 : AF_INET, type, 0);
}

/* SO_SNDTIMEO or SO_RCVTIMEO: a blocking call returns by the deadline. */
static void eng_timeout_at_deadline(int fd, int opt)
{
	long long left = eng_deadline - smr_now_ms();
	struct timeval tv = {
		.tv_sec = left > 0 ? left / 1000 : 0,
		.tv_usec = left > 0 ? (left % 1000) * 1000 : 1000,
	};

	if (setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv)))
		eng_die(opt == SO_SNDTIMEO ? "setsockopt(SO_SNDTIMEO)" :
					     "setsockopt(SO_RCVTIMEO)");
}

void eng_finish(struct eng_conn *c)
{
	bool ok;

	if (c->state == ENG_DONE)
		return;
	ok = tool->report(c);
	if (c->events)
		eng_ep_set(c, 0);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = ENG_DONE;
	eng_ndone++;
	if (ok)
		eng_nok++;
}

void eng_fail(struct eng_conn *c, int err, const char *where)
{
	c->err = err;
	c->err_at = where;
	eng_finish(c);
}

void eng_fail_unfinished(const char *where)
{
	int i;

	for (i = 0; i < eng_nstarted; i++)
		if (eng_conn(i)->state != ENG_DONE)
			eng_fail(eng_conn(i), ETIMEDOUT, where);
}

static struct eng_conn *eng_conn_new(void)
{
	struct eng_conn *c = eng_conn(eng_nstarted);

	memset(c, 0, tool->conn_size);
	c->kind = ENG_CONN;
	c->fd = -1;
	c->idx = eng_nstarted++;
	c->lst = -1;
	c->t_start = smr_now_ms();
	tool->init(c);
	return c;
}

/* connect() or accept() completed: the connection is usable from here. */
static void eng_ready(struct eng_conn *c)
{
	int fl;

	c->lport = smr_sock_port(c->fd, false);
	c->rport = smr_sock_port(c->fd, true);
	fl = fcntl(c->fd, F_GETFL);
	if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK))
		eng_die("fcntl(O_NONBLOCK)");
	c->state = ENG_ACTIVE;
	tool->ready(c);
}

static void eng_conn_event(struct eng_conn *c)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (c->state == ENG_ACTIVE) {
		tool->step(c);
		return;
	}
	if (c->state != ENG_CONNECTING)
		return;
	/* a non-blocking connect() ended (EPOLLOUT, ERR or HUP) */
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len))
		err = errno;
	if (err)
		eng_fail(c, err, "connect");
	else
		eng_ready(c);
}

/* All connections are in: listen no more. */
static void eng_close_listeners(void)
{
	int i;

	for (i = 0; i < eng_opt.nlisteners; i++) {
		if (listeners[i].fd < 0)
			continue;
		epoll_ctl(ep, EPOLL_CTL_DEL, listeners[i].fd, NULL);
		close(listeners[i].fd);
		listeners[i].fd = -1;
	}
}

static void eng_accept(struct eng_listener *l)
{
	bool got = false;

	while (eng_nstarted < eng_opt.nconns) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct eng_conn *c;

		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				if (!got)
					eng_spurious_wakeups++;
				return;
			}
			/* TCP too returns a pending error of a child: go on */
			if (errno == ECONNABORTED || errno == ECONNRESET)
				continue;
			eng_die("accept");
		}
		got = true;
		c = eng_conn_new();
		c->fd = fd;
		c->lst = l->idx;
		eng_ready(c);
	}
	eng_close_listeners();
}

/* Until @one (or, NULL, every connection) has ended or the deadline passed. */
static void eng_loop(const struct eng_conn *one)
{
	struct epoll_event evs[64];
	int i, n;

	while (one ? one->state != ENG_DONE : eng_ndone < eng_opt.nconns) {
		long long left;

		if (tool->tick)
			tool->tick();
		left = eng_deadline - smr_now_ms();
		if (left <= 0)
			return;
		n = epoll_wait(ep, evs, 64, left > tool->tick_ms ? tool->tick_ms : (int)left);
		if (n < 0 && errno != EINTR)
			eng_die("epoll_wait");
		for (i = 0; i < n; i++) {
			enum eng_kind *kind = evs[i].data.ptr;

			if (*kind == ENG_CONN)
				eng_conn_event(evs[i].data.ptr);
			else
				eng_accept(evs[i].data.ptr);
		}
	}
}

static void eng_client_start(struct eng_conn *c, const struct sockaddr_storage *ss,
			     socklen_t sslen)
{
	c->fd = eng_socket(!eng_opt.blocking);
	if (c->fd < 0)
		eng_die("socket");
	if (tool->prepare)
		tool->prepare(c->fd, false);
	if (eng_opt.blocking)
		eng_timeout_at_deadline(c->fd, SO_SNDTIMEO);
	c->t_start = smr_now_ms();
	errno = 0;
	c->connect_ret = connect(c->fd, (const struct sockaddr *)ss, sslen);
	c->connect_called = true;
	if (!c->connect_ret) {
		eng_ready(c);
		return;
	}
	if (c->connect_ret > 0) {
		/* not the syscall ABI: report the value as the error */
		eng_fail(c, c->connect_ret, "connect");
		return;
	}
	if (eng_opt.blocking || errno != EINPROGRESS) {
		eng_fail(c, errno, "connect");
		return;
	}
	c->state = ENG_CONNECTING;
	if (tool->connecting)
		tool->connecting(c);
	eng_ep_set(c, EPOLLOUT);
}

static void eng_client_run(void)
{
	struct sockaddr_storage ss;
	int sslen, i;

	sslen = smr_fill_addr(&ss, eng_opt.v6, eng_opt.addr, eng_opt.port);
	if (!eng_opt.addr || sslen < 0)
		eng_exit_msg("client needs -a ADDR of the right family");
	/* non-blocking: all at once, the connects are in flight together */
	for (i = 0; i < eng_opt.nconns; i++) {
		struct eng_conn *c = eng_conn_new();

		eng_client_start(c, &ss, sslen);
		if (eng_opt.blocking) {
			eng_loop(c);
			if (c->state != ENG_DONE)
				return;
		}
	}
	eng_loop(NULL);
}

static void eng_listen(void)
{
	struct sockaddr_storage ss;
	int sslen, i, one = 1;

	sslen = smr_fill_addr(&ss, eng_opt.v6, eng_opt.addr, eng_opt.port);
	if (sslen < 0)
		eng_exit_msg("bad bind address");
	if (eng_opt.blocking && eng_opt.nlisteners > 1)
		eng_exit_msg("-L needs non-blocking mode");
	for (i = 0; i < eng_opt.nlisteners; i++) {
		struct eng_listener *l = &listeners[i];
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = l };

		l->kind = ENG_LISTENER;
		l->idx = i;
		l->fd = eng_socket(!eng_opt.blocking);
		if (l->fd < 0)
			eng_die("socket");
		if (setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
			eng_die("setsockopt(SO_REUSEADDR)");
		if (eng_opt.nlisteners > 1 &&
		    setsockopt(l->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
			eng_die("setsockopt(SO_REUSEPORT)");
		if (tool->prepare)
			tool->prepare(l->fd, true);
		if (bind(l->fd, (struct sockaddr *)&ss, sslen))
			eng_die("bind");
		if (listen(l->fd, eng_opt.backlog))
			eng_die("listen");
		if (!eng_opt.blocking && epoll_ctl(ep, EPOLL_CTL_ADD, l->fd, &ev))
			eng_die("epoll_ctl(listener)");
	}
	if (eng_opt.ready_file)
		eng_touch(eng_opt.ready_file);
	if (eng_opt.run_as_uid >= 0 &&
	    (setgroups(0, NULL) ||
	     setresgid(eng_opt.run_as_uid, eng_opt.run_as_uid, eng_opt.run_as_uid) ||
	     setresuid(eng_opt.run_as_uid, eng_opt.run_as_uid, eng_opt.run_as_uid)))
		eng_die("dropping privileges (-U)");
}

/* Blocking: accept() and serve one connection at a time on listener 0. */
static void eng_server_blocking(void)
{
	int i;

	for (i = 0; i < eng_opt.nconns; i++) {
		struct eng_conn *c;
		int fd;

		eng_timeout_at_deadline(listeners[0].fd, SO_RCVTIMEO);
		fd = accept4(listeners[0].fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;	/* the deadline passed */
			if (errno == ECONNABORTED || errno == ECONNRESET ||
			    errno == EINTR) {
				i--;
				continue;
			}
			eng_die("accept");
		}
		c = eng_conn_new();
		c->fd = fd;
		c->lst = 0;
		eng_ready(c);
		eng_loop(c);
		if (c->state != ENG_DONE)
			return;
	}
}

void eng_run(void)
{
	if (!eng_opt.server) {
		eng_client_run();
		return;
	}
	eng_listen();
	if (eng_opt.blocking)
		eng_server_blocking();
	else
		eng_loop(NULL);
}
