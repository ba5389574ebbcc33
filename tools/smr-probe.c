// SPDX-License-Identifier: GPL-2.0
/*
 * smr-probe: show whether a program's TCP socket is really an SMR socket.
 *
 * It opens an ordinary socket(AF_INET or AF_INET6, SOCK_STREAM, 0), so under
 * smr_run (LD_PRELOAD) that socket becomes SMR, runs a small echo exchange
 * with a deterministic byte pattern and reports what the kernel says:
 *
 *   smr-probe [-f] [-n BYTES] [-t SECS] HOST PORT     client: connect, send
 *       BYTES (default 65536), read them back, check them
 *   smr-probe -l [-f] [-t SECS] [-6] [-b ADDR] PORT   server: listen on PORT
 *       (0: any), print "listening port=N", accept one connection and echo
 *       everything until the peer shuts down
 *
 * Result line (stdout), for the connected socket:
 *   family=19 mode=tcp reason=not_negotiated bytes_sent=N bytes_received=N app_sent=N app_received=N
 * where family is getsockopt(SO_DOMAIN), mode/reason/bytes_* come from
 * getsockopt(SOL_SMR, SMR_INFO) and app_* are what this program moved. A
 * socket that is not SMR reports "family=2 smr=no app_sent=N app_received=N".
 *
 * -f creates the socket with SOCK_NONBLOCK | SOCK_CLOEXEC and sets TCP_NODELAY
 * before bind()/connect(); the line then also carries nonblock=, cloexec=,
 * nodelay= and reuseaddr= as read back after bind()/connect() (that is
 * after a filter-mode smr_run replaced the socket). The server always sets
 * SO_REUSEADDR before bind(). Exit status 0 iff the exchange was complete and
 * every byte came back intact.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/smr.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

struct probe_opts {
	bool		listen;
	bool		flags;		/* -f */
	bool		ipv6;		/* -6 */
	const char	*bind_addr;
	const char	*host;
	unsigned int	port;
	size_t		bytes;
	int		timeout_ms;
};

static void die(const char *what)
{
	fprintf(stderr, "smr-probe: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void print_usage(void)
{
	fprintf(stderr,
		"usage: smr-probe [-f] [-n BYTES] [-t SECS] HOST PORT\n"
		"       smr-probe -l [-f] [-t SECS] [-6] [-b ADDR] PORT\n");
	exit(2);
}

static void on_alarm(int sig)
{
	static const char msg[] = "smr-probe: timed out\n";

	ssize_t unused;

	(void)sig;
	unused = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)unused;
	_exit(1);
}

static unsigned char pattern_byte(uint64_t i)
{
	return (unsigned char)((i * 131 + 7) % 251);
}

static int parse_addr(const char *s, unsigned int port,
		      struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, s, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		*len = sizeof(*sin);
		return AF_INET;
	}
	if (inet_pton(AF_INET6, s, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		*len = sizeof(*sin6);
		return AF_INET6;
	}
	fprintf(stderr, "smr-probe: not a numeric IPv4/IPv6 address: %s\n", s);
	exit(2);
}

static void wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, timeout_ms);

	if (n < 0)
		die("poll");
	if (n == 0) {
		errno = ETIMEDOUT;
		die("poll");
	}
}

static int getint(int fd, int level, int name)
{
	socklen_t len = sizeof(int);
	int v;

	if (getsockopt(fd, level, name, &v, &len) < 0)
		return -1;
	return v;
}

/* Flags and options as the program sees them after bind()/connect(). */
static void snapshot_flags(int fd, char *buf, size_t size)
{
	int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);

	snprintf(buf, size, " nonblock=%d cloexec=%d nodelay=%d reuseaddr=%d",
		 fl >= 0 && (fl & O_NONBLOCK) ? 1 : 0,
		 fdfl >= 0 && (fdfl & FD_CLOEXEC) ? 1 : 0,
		 getint(fd, IPPROTO_TCP, TCP_NODELAY),
		 getint(fd, SOL_SOCKET, SO_REUSEADDR));
}

static void report(int fd, uint64_t sent, uint64_t received, const char *extra)
{
	int family = getint(fd, SOL_SOCKET, SO_DOMAIN);
	struct smr_info info;
	socklen_t len = sizeof(info);

	if (family == AF_INET || family == AF_INET6) {
		printf("family=%d smr=no", family);
	} else {
		memset(&info, 0, sizeof(info));
		if (getsockopt(fd, SOL_SMR, SMR_INFO, &info, &len) < 0) {
			printf("family=%d smr=error:%s", family, strerror(errno));
		} else {
			printf("family=%d mode=%s reason=%s bytes_sent=%llu bytes_received=%llu",
			       family,
			       smr_mode_name(info.mode) ?: "unknown",
			       smr_reason_name(info.reason) ?: "unknown",
			       (unsigned long long)info.bytes_sent,
			       (unsigned long long)info.bytes_received);
		}
	}
	printf(" app_sent=%llu app_received=%llu%s\n",
	       (unsigned long long)sent, (unsigned long long)received, extra);
	fflush(stdout);
}

/*
 * Client side of the echo: send the pattern while reading the echo back
 * (so neither side can block on a full buffer), then half-close and read
 * to EOF. Returns true if exactly @total bytes came back unchanged.
 */
static bool run_client_io(int fd, size_t total, int timeout_ms,
			  uint64_t *sent, uint64_t *received)
{
	unsigned char buf[16384];
	bool shut = false, intact = true;

	*sent = *received = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (*sent < total)
			p.events |= POLLOUT;
		else if (!shut) {
			if (shutdown(fd, SHUT_WR) < 0)
				die("shutdown");
			shut = true;
		}
		n = poll(&p, 1, timeout_ms);
		if (n < 0)
			die("poll");
		if (n == 0) {
			errno = ETIMEDOUT;
			die("echo");
		}
		if (p.revents & POLLOUT) {
			size_t chunk = total - *sent;

			if (chunk > sizeof(buf))
				chunk = sizeof(buf);
			for (size_t i = 0; i < chunk; i++)
				buf[i] = pattern_byte(*sent + i);
			n = send(fd, buf, chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				die("send");
			if (n > 0)
				*sent += (uint64_t)n;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				die("recv");
			if (n == 0)
				break;
			for (ssize_t i = 0; i < n; i++)
				if (buf[i] != pattern_byte(*received + i))
					intact = false;
			if (n > 0)
				*received += (uint64_t)n;
		}
	}
	if (!intact)
		fprintf(stderr, "smr-probe: echoed data differs from what was sent\n");
	if (*received != total || *sent != total)
		fprintf(stderr, "smr-probe: sent %llu, got %llu back, wanted %zu\n",
			(unsigned long long)*sent,
			(unsigned long long)*received, total);
	return intact && *received == total && *sent == total;
}

static int run_client(const struct probe_opts *o)
{
	int type = SOCK_STREAM | (o->flags ? SOCK_NONBLOCK | SOCK_CLOEXEC : 0);
	struct sockaddr_storage ss;
	uint64_t sent, received;
	char extra[128] = "";
	socklen_t len;
	int fd, family, one = 1, err;
	bool ok;

	family = parse_addr(o->host, o->port, &ss, &len);
	fd = socket(family, type, 0);
	if (fd < 0)
		die("socket");
	if (o->flags &&
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		die("setsockopt TCP_NODELAY");
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno != EINPROGRESS)
			die("connect");
		wait_fd(fd, POLLOUT, o->timeout_ms);
		err = getint(fd, SOL_SOCKET, SO_ERROR);
		if (err) {
			errno = err;
			die("connect");
		}
	}
	if (o->flags)
		snapshot_flags(fd, extra, sizeof(extra));
	ok = run_client_io(fd, o->bytes, o->timeout_ms, &sent, &received);
	report(fd, sent, received, extra);
	close(fd);
	return ok ? 0 : 1;
}

static int run_server(const struct probe_opts *o)
{
	int type = SOCK_STREAM | (o->flags ? SOCK_NONBLOCK | SOCK_CLOEXEC : 0);
	struct sockaddr_storage ss;
	uint64_t sent = 0, received = 0;
	unsigned char buf[16384];
	char extra[128] = "";
	socklen_t len;
	int lfd, fd, family, one = 1;

	family = parse_addr(o->bind_addr ? o->bind_addr :
			    o->ipv6 ? "::" : "0.0.0.0", o->port, &ss, &len);
	lfd = socket(family, type, 0);
	if (lfd < 0)
		die("socket");
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		die("setsockopt SO_REUSEADDR");
	if (o->flags &&
	    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		die("setsockopt TCP_NODELAY");
	if (bind(lfd, (struct sockaddr *)&ss, len) < 0)
		die("bind");
	if (listen(lfd, 4) < 0)
		die("listen");
	len = sizeof(ss);
	if (getsockname(lfd, (struct sockaddr *)&ss, &len) < 0)
		die("getsockname");
	printf("listening port=%u\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
	fflush(stdout);
	if (o->flags)
		snapshot_flags(lfd, extra, sizeof(extra));

	wait_fd(lfd, POLLIN, o->timeout_ms);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(lfd);
	for (;;) {
		ssize_t n, off = 0;

		wait_fd(fd, POLLIN, o->timeout_ms);
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			die("recv");
		if (n == 0)
			break;
		received += (uint64_t)n;
		while (off < n) {
			ssize_t w = send(fd, buf + off, (size_t)(n - off),
					 MSG_NOSIGNAL);

			if (w < 0)
				die("send");
			off += w;
			sent += (uint64_t)w;
		}
	}
	report(fd, sent, received, extra);
	close(fd);
	return 0;
}

static unsigned long parse_num(const char *s, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || v > max || *s == '-')
		print_usage();
	return v;
}

int main(int argc, char **argv)
{
	struct probe_opts o = { .bytes = 65536, .timeout_ms = 30000 };
	int c;

	while ((c = getopt(argc, argv, "lf6b:n:t:h")) != -1) {
		switch (c) {
		case 'l':
			o.listen = true;
			break;
		case 'f':
			o.flags = true;
			break;
		case '6':
			o.ipv6 = true;
			break;
		case 'b':
			o.bind_addr = optarg;
			break;
		case 'n':
			o.bytes = parse_num(optarg, 1UL << 40);
			break;
		case 't':
			o.timeout_ms = (int)parse_num(optarg, 3600) * 1000;
			if (!o.timeout_ms)
				print_usage();
			break;
		default:
			print_usage();
		}
	}
	if (o.listen ? argc - optind != 1 : argc - optind != 2)
		print_usage();
	if (!o.listen)
		o.host = argv[optind++];
	o.port = (unsigned int)parse_num(argv[optind], 65535);
	if (!o.listen && o.port == 0)
		print_usage();

	/* Whole-run deadline on top of the per-wait timeouts. */
	signal(SIGALRM, on_alarm);
	alarm((unsigned int)(o.timeout_ms / 1000) * 2 + 1);
	return o.listen ? run_server(&o) : run_client(&o);
}
