/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small helpers shared by SMR's user-space selftests. Nothing here depends on
 * the kselftest harness, so tools outside it can use them too.
 */
#ifndef SMR_TEST_LIB_H
#define SMR_TEST_LIB_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <linux/smr.h>

#define SMR_STATS_PATH	"/proc/net/smr/stats"

/* The number file @path holds (sysfs, procfs), or -1 if it holds none. */
static inline long smr_read_number(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* SMR's address family number, or -1 when the module is not loaded. */
static inline int smr_module_family(void)
{
	return (int)smr_read_number(SMR_FAMILY_SYSFS);
}

static inline long long smr_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

#define SMR_TIME_SCALE_ENV	"SMR_TEST_TIME_SCALE"
#define SMR_TIME_SCALE_MAX	100

/*
 * The test bed's time scale: $SMR_TEST_TIME_SCALE, a positive integer (1
 * unless set; selftests/run_tests.sh raises it on the debug kernel, where
 * everything runs several times slower). A tool multiplies by it every
 * deadline that bounds how long a test step may take (-T), never a limit
 * that checks a documented kernel bound. Read once; a bad value ends the
 * tool (exit 2), it must not pass for 1.
 */
static inline int smr_time_scale(void)
{
	static int scale;
	const char *s;
	char *end;
	long v;

	if (scale)
		return scale;
	s = getenv(SMR_TIME_SCALE_ENV);
	if (!s || !*s) {
		scale = 1;
		return scale;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1 || v > SMR_TIME_SCALE_MAX) {
		fprintf(stderr, "%s=%s: want an integer 1..%d\n",
			SMR_TIME_SCALE_ENV, s, SMR_TIME_SCALE_MAX);
		exit(2);
	}
	scale = v;
	return scale;
}

/*
 * Byte @off of the test stream named @seed. It depends on the position, so
 * lost, duplicated and reordered bytes all show up as mismatches.
 */
static inline uint8_t smr_pattern_byte(uint32_t seed, uint64_t off)
{
	uint64_t x = (off + 1) * 0x9e3779b97f4a7c15ULL ^ seed;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	return (uint8_t)(x >> 56);
}

static inline void smr_pattern_fill(void *buf, size_t len, uint32_t seed,
				    uint64_t off)
{
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = smr_pattern_byte(seed, off + i);
}

/* Index of the first byte that differs from the pattern, or @len. */
static inline size_t smr_pattern_check(const void *buf, size_t len,
				       uint32_t seed, uint64_t off)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != smr_pattern_byte(seed, off + i))
			return i;
	return len;
}

#define SMR_FNV1A_INIT	0xcbf29ce484222325ULL

/* FNV-1a, to compare what both ends of a transfer saw. */
static inline uint64_t smr_fnv1a(uint64_t h, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Value of counter @name in /proc/net/smr/stats; -1 if file or name absent. */
static inline int smr_stat_read(const char *name, long long *val)
{
	FILE *f = fopen(SMR_STATS_PATH, "r");
	char key[64];
	long long v;
	int ret = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", key, &v) == 2) {
		if (!strcmp(key, name)) {
			*val = v;
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/* The @idx-th (0-based) integer in a /proc/sys file such as tcp_rmem. */
static inline int smr_sysctl_read(const char *path, int idx, long long *val)
{
	FILE *f = fopen(path, "r");
	long long v = 0;
	int i, ret = -1;

	if (!f)
		return -1;
	for (i = 0; i <= idx; i++)
		if (fscanf(f, "%lld", &v) != 1)
			break;
	if (i > idx) {
		*val = v;
		ret = 0;
	}
	fclose(f);
	return ret;
}

/*
 * Whether /proc/net/tcp (or tcp6) lists a socket of local port @port, and
 * remote port @rport unless that is 0, in TCP state @st. A local port
 * alone also matches an older connection from that port to another peer
 * port (ephemeral ports are reused across destinations).
 */
static inline bool smr_tcp_conn_in_state(bool v6, unsigned int port,
					 unsigned int rport, unsigned int st)
{
	FILE *f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
	unsigned int lport, rp, state;
	bool found = false;
	char line[512];

	if (!f)
		return false;
	if (!fgets(line, sizeof(line), f)) {	/* header */
		fclose(f);
		return false;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%x %x",
			   &lport, &rp, &state) != 3)
			continue;
		if (lport == port && (!rport || rp == rport) && state == st) {
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Whether a socket of local port @port is listed in TCP state @st. */
static inline bool smr_tcp_port_in_state(bool v6, unsigned int port,
					 unsigned int st)
{
	return smr_tcp_conn_in_state(v6, port, 0, st);
}

/* "EPOLLIN|EPOLLOUT" style rendering of a poll mask, for failure messages. */
static inline const char *smr_mask_str(unsigned int mask, char *buf,
				       size_t len)
{
	static const struct {
		unsigned int bit;
		const char *name;
	} names[] = {
		{ EPOLLIN, "IN" }, { EPOLLPRI, "PRI" }, { EPOLLOUT, "OUT" },
		{ EPOLLERR, "ERR" }, { EPOLLHUP, "HUP" },
		{ EPOLLRDNORM, "RDNORM" }, { EPOLLRDBAND, "RDBAND" },
		{ EPOLLWRNORM, "WRNORM" }, { EPOLLWRBAND, "WRBAND" },
		{ EPOLLMSG, "MSG" }, { EPOLLRDHUP, "RDHUP" },
	};
	size_t i, used = 0;

	buf[0] = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(mask & names[i].bit))
			continue;
		used += snprintf(buf + used, used < len ? len - used : 0,
				 "%s%s", used ? "|" : "", names[i].name);
		mask &= ~names[i].bit;
	}
	if (mask)
		used += snprintf(buf + used, used < len ? len - used : 0,
				 "%s0x%x", used ? "|" : "", mask);
	if (!used)
		snprintf(buf, len, "0");
	return buf;
}

/* "ECONNRESET" for ECONNRESET, "0" for no error. */
static inline const char *smr_errname(int err)
{
	const char *n;

	if (!err)
		return "0";
	n = strerrorname_np(err);
	return n ? n : "EUNKNOWN";
}

/* @addr (NULL: any) and @port into @ss; its length, or -1 if unparsable. */
static inline int smr_fill_addr(struct sockaddr_storage *ss, bool v6,
				const char *addr, int port)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	if (v6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		if (addr && inet_pton(AF_INET6, addr, &s6->sin6_addr) != 1)
			return -1;
		return sizeof(*s6);
	}
	s4->sin_family = AF_INET;
	s4->sin_port = htons(port);
	if (addr && inet_pton(AF_INET, addr, &s4->sin_addr) != 1)
		return -1;
	return sizeof(*s4);
}

/* getsockopt(SOL_SMR, SMR_INFO): 0 or -errno; @info zeroed first. */
static inline int smr_get_info(int fd, struct smr_info *info)
{
	socklen_t len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	if (getsockopt(fd, SOL_SMR, SMR_INFO, info, &len))
		return -errno;
	return 0;
}

/* The local (or @peer) port of @fd, 0 if unknown. */
static inline unsigned int smr_sock_port(int fd, bool peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int r = peer ? getpeername(fd, (struct sockaddr *)&ss, &len) :
		       getsockname(fd, (struct sockaddr *)&ss, &len);

	if (r)
		return 0;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/*
 * Move @fd's epoll interest from *@cur to @events (0: out of the set),
 * @ptr as its data. 0, or -1 with errno from epoll_ctl.
 */
static inline int smr_ep_update(int ep, int fd, void *ptr, uint32_t *cur,
				uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = ptr };

	if (events == *cur)
		return 0;
	if (!*cur) {
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
			return -1;
	} else if (!events) {
		epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	} else if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev)) {
		return -1;
	}
	*cur = events;
	return 0;
}

#endif /* SMR_TEST_LIB_H */
