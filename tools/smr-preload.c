// SPDX-License-Identifier: GPL-2.0
/*
 * libsmr-preload.so: make unmodified programs use SMR sockets.
 *
 * Loaded with LD_PRELOAD (normally by smr_run), it turns TCP stream sockets,
 * socket(AF_INET or AF_INET6, SOCK_STREAM [| SOCK_NONBLOCK | SOCK_CLOEXEC],
 * 0 or IPPROTO_TCP), into SMR sockets: socket(smr_family, same type and
 * flags, SMRPROTO_IPV4 or SMRPROTO_IPV6). An SMR socket takes the same
 * sockaddr_in/sockaddr_in6 addresses and TCP-level options, so everything
 * after socket() goes to the kernel untouched.
 *
 * Environment knobs (read once per process, when the library loads):
 *
 *   SMR_DISABLE=1   do nothing at all.
 *   SMR_VERBOSE=1   log to stderr, one line per converted socket
 *                   ("smr_run: fd N -> SMR (AF_INET)"), one line per socket
 *                   a port/address filter keeps on TCP, and once per process
 *                   why SMR is not used (module not loaded, socket() failed).
 *   SMR_PORTS=LIST  only sockets that bind() or connect() to one of these
 *                   ports become SMR, e.g. "80,6379,5201-5210".
 *   SMR_ADDRS=LIST  only sockets that connect() to, or bind() to, one of these
 *                   addresses or prefixes become SMR, e.g.
 *                   "192.0.2.2,fd53:4d52::/64". IPv4-mapped IPv6 addresses
 *                   match IPv4 entries. A bind() to the wildcard address and
 *                   a non-zero port matches any list (such a listener also
 *                   serves the listed addresses).
 *                   When both SMR_PORTS and SMR_ADDRS are set, both must match.
 *   SMR_FAMILY=N    use family N instead of reading it from
 *                   /sys/module/smr/parameters/family (for tests/diagnostics).
 *
 * Without SMR_PORTS/SMR_ADDRS every eligible socket is SMR from socket() on.
 * With a filter the port and address are not known at socket() time, so the
 * socket starts as plain TCP and is replaced in place (same fd number, via
 * dup3) by an SMR socket in bind() or connect() when the address matches.
 * That is only possible while the socket is unbound; the replacement keeps
 * O_NONBLOCK, FD_CLOEXEC and the common socket/TCP/IP options the program
 * set so far (see smr_copied_opts). Limitations of filter mode: an fd added
 * to epoll, or dup()ed or inherited by a child, before bind()/connect() keeps
 * referring to the old TCP socket; a socket bound to a non-matching address
 * stays TCP even if it later connects to a matching one; listen() without
 * bind() and sendto(MSG_FASTOPEN) are not filtered (they stay TCP).
 *
 * If the SMR module is not loaded, or socket(smr_family, ...) fails, the
 * socket is created exactly as the program asked (plain TCP).
 *
 * Only programs that call socket()/bind()/connect() through the dynamic libc
 * are affected: static binaries and raw syscalls (e.g. Go) are not.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/smr.h>

#define SMR_EXPORT	__attribute__((visibility("default")))
#define __printf(a, b)	__attribute__((format(printf, a, b)))
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define SMR_MAX_ADDRS	64

typedef int (*smr_socket_fn)(int, int, int);
typedef int (*smr_addr_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*smr_setsockopt_fn)(int, int, int, const void *, socklen_t);

struct smr_prefix {
	int		family;		/* AF_INET or AF_INET6 */
	unsigned int	prefix_len;
	unsigned char	addr[16];
};

/*
 * Process-wide configuration, written once by smr_init() under pthread_once
 * and read-only afterwards. glibc's pthread_once restarts an initialisation
 * interrupted by fork() in the child, and the constructor runs it before the
 * program can start threads, so no caller ever waits on another thread.
 */
static struct {
	smr_socket_fn	real_socket;
	smr_addr_fn	real_bind;
	smr_addr_fn	real_connect;
	smr_setsockopt_fn real_setsockopt;
	bool		enabled;	/* module present and knobs valid */
	bool		verbose;
	bool		filter;		/* SMR_PORTS or SMR_ADDRS given */
	bool		have_ports;
	int		family;
	unsigned int	n_addrs;
	struct smr_prefix addrs[SMR_MAX_ADDRS];
	unsigned char	ports[65536 / 8];
} smr_cfg;

static pthread_once_t smr_once = PTHREAD_ONCE_INIT;
/* Set once socket(smr_family) failed for good: stop trying, log once. */
static int smr_unavailable;

static __printf(1, 2) void smr_log(const char *fmt, ...);

/* No stdio (its locks and buffers are the program's): one write(2) per line. */
static void smr_log(const char *fmt, ...)
{
	int saved_errno = errno;
	ssize_t unused;
	char buf[256];
	va_list ap;
	int len;

	memcpy(buf, "smr_run: ", 9);
	va_start(ap, fmt);
	len = vsnprintf(buf + 9, sizeof(buf) - 10, fmt, ap);
	va_end(ap);
	if (len < 0)
		len = 0;
	len += 9;
	if (len > (int)sizeof(buf) - 1)
		len = sizeof(buf) - 1;
	buf[len++] = '\n';
	/* A failed write has nowhere to be reported. */
	unused = write(STDERR_FILENO, buf, len);
	(void)unused;
	errno = saved_errno;
}

static const char *smr_strerror(int err, char *buf, size_t len)
{
	return strerror_r(err, buf, len);
}

static bool smr_env_true(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") != 0;
}

static const char *smr_env_list(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static bool smr_parse_uint(const char *s, const char **end, unsigned long max,
			   unsigned long *out)
{
	unsigned long v = 0;
	const char *p = s;

	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (unsigned long)(*p - '0');
		if (v > max)
			return false;
		p++;
	}
	if (p == s)
		return false;
	*end = p;
	*out = v;
	return true;
}

/* "80,6379,5201-5210": ports 1..65535, spaces allowed around entries. */
static bool smr_parse_ports(const char *list)
{
	const char *p = list;

	for (;;) {
		unsigned long lo, hi;

		while (*p == ' ')
			p++;
		if (!smr_parse_uint(p, &p, 65535, &lo) || lo == 0)
			goto bad;
		hi = lo;
		if (*p == '-' &&
		    (!smr_parse_uint(p + 1, &p, 65535, &hi) || hi < lo))
			goto bad;
		for (unsigned long port = lo; port <= hi; port++)
			smr_cfg.ports[port / 8] |= 1u << (port % 8);
		while (*p == ' ')
			p++;
		if (*p == '\0')
			return true;
		if (*p++ != ',')
			goto bad;
	}
bad:
	smr_log("bad SMR_PORTS \"%s\" near \"%s\" (want e.g. 80,5201-5210): SMR disabled",
		list, p);
	return false;
}

/* "192.0.2.2,fd53:4d52::/64": addresses with optional prefix length. */
static bool smr_parse_addrs(const char *list)
{
	const char *p = list;

	for (;;) {
		struct smr_prefix *e;
		char tok[INET6_ADDRSTRLEN + 8];
		const char *end = p + strcspn(p, ",");
		char *slash;
		size_t len;

		while (*p == ' ')
			p++;
		len = (size_t)(end - p);
		while (len && p[len - 1] == ' ')
			len--;
		if (len == 0 || len >= sizeof(tok) || smr_cfg.n_addrs == SMR_MAX_ADDRS)
			goto bad;
		memcpy(tok, p, len);
		tok[len] = '\0';
		e = &smr_cfg.addrs[smr_cfg.n_addrs];
		slash = strchr(tok, '/');
		if (slash)
			*slash = '\0';
		if (inet_pton(AF_INET, tok, e->addr) == 1) {
			e->family = AF_INET;
			e->prefix_len = 32;
		} else if (inet_pton(AF_INET6, tok, e->addr) == 1) {
			e->family = AF_INET6;
			e->prefix_len = 128;
		} else {
			goto bad;
		}
		if (slash) {
			unsigned long plen;
			const char *pend;

			if (!smr_parse_uint(slash + 1, &pend, e->prefix_len, &plen) ||
			    *pend != '\0')
				goto bad;
			e->prefix_len = (unsigned int)plen;
		}
		smr_cfg.n_addrs++;
		if (*end == '\0')
			return true;
		p = end + 1;
	}
bad:
	smr_log("bad SMR_ADDRS \"%s\" near \"%s\" (want e.g. 192.0.2.2,fd53:4d52::/64, at most %d entries): SMR disabled",
		list, p, SMR_MAX_ADDRS);
	return false;
}

/* The family number from SMR_FAMILY or the module's sysfs parameter. */
static int smr_read_family(void)
{
	char buf[32], err[128];
	const char *src = getenv("SMR_FAMILY");
	unsigned long fam;
	const char *end;
	ssize_t n;
	int fd;

	if (!src || !*src) {
		fd = open(SMR_FAMILY_SYSFS, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (smr_cfg.verbose)
				smr_log("SMR module not loaded (%s: %s), sockets stay TCP",
					SMR_FAMILY_SYSFS,
					smr_strerror(errno, err, sizeof(err)));
			return -1;
		}
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0) {
			if (smr_cfg.verbose)
				smr_log("cannot read %s, sockets stay TCP",
					SMR_FAMILY_SYSFS);
			return -1;
		}
		buf[n] = '\0';
		src = buf;
	}
	if (!smr_parse_uint(src, &end, 255, &fam) || (*end && *end != '\n') ||
	    fam == 0 || fam == AF_INET || fam == AF_INET6) {
		smr_log("bad SMR family \"%.16s\", sockets stay TCP", src);
		return -1;
	}
	return (int)fam;
}

static void smr_init(void)
{
	const char *ports, *addrs;

	smr_cfg.real_socket = (smr_socket_fn)dlsym(RTLD_NEXT, "socket");
	smr_cfg.real_bind = (smr_addr_fn)dlsym(RTLD_NEXT, "bind");
	smr_cfg.real_connect = (smr_addr_fn)dlsym(RTLD_NEXT, "connect");
	smr_cfg.real_setsockopt = (smr_setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
	if (smr_env_true("SMR_DISABLE"))
		return;
	smr_cfg.verbose = smr_env_true("SMR_VERBOSE");

	ports = smr_env_list("SMR_PORTS");
	addrs = smr_env_list("SMR_ADDRS");
	if (ports && !smr_parse_ports(ports))
		return;
	if (addrs && !smr_parse_addrs(addrs))
		return;
	smr_cfg.have_ports = ports != NULL;
	smr_cfg.filter = ports || addrs;

	smr_cfg.family = smr_read_family();
	smr_cfg.enabled = smr_cfg.family > 0;
}

static void smr_ensure_init(void)
{
	pthread_once(&smr_once, smr_init);
}

/* Run at load time, before the program can have started any thread. */
__attribute__((constructor)) static void smr_preload_ctor(void)
{
	smr_ensure_init();
}

static int smr_call_socket(int domain, int type, int protocol)
{
	if (smr_cfg.real_socket)
		return smr_cfg.real_socket(domain, type, protocol);
	return (int)syscall(SYS_socket, domain, type, protocol);
}

static const char *smr_domain_name(int domain)
{
	return domain == AF_INET6 ? "AF_INET6" : "AF_INET";
}

/*
 * Create the SMR twin of a TCP socket of @domain. Returns the fd, or -1 when
 * SMR cannot be used (errno set); the first failure that means "SMR is not
 * available" is logged once and latched.
 */
static int smr_create(int domain, int type_flags)
{
	int proto = domain == AF_INET6 ? SMRPROTO_IPV6 : SMRPROTO_IPV4;
	char err[128];
	int fd, e;

	if (__atomic_load_n(&smr_unavailable, __ATOMIC_RELAXED)) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	fd = smr_call_socket(smr_cfg.family, SOCK_STREAM | type_flags, proto);
	if (fd >= 0)
		return fd;
	e = errno;
	switch (e) {
	case EMFILE: case ENFILE: case ENOMEM: case ENOBUFS:
		/* Resource shortage: transient, the TCP call reports it too. */
		break;
	default:
		if (!__atomic_exchange_n(&smr_unavailable, 1, __ATOMIC_RELAXED) &&
		    smr_cfg.verbose)
			smr_log("socket(family %d, SOCK_STREAM, %d) failed: %s, sockets stay TCP",
				smr_cfg.family, proto,
				smr_strerror(e, err, sizeof(err)));
	}
	errno = e;
	return -1;
}

static bool smr_eligible(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) &&
	       (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

SMR_EXPORT int socket(int domain, int type, int protocol)
{
	int fd;

	smr_ensure_init();
	if (!smr_cfg.enabled || smr_cfg.filter ||
	    !smr_eligible(domain, type, protocol))
		return smr_call_socket(domain, type, protocol);

	fd = smr_create(domain, type & (SOCK_NONBLOCK | SOCK_CLOEXEC));
	if (fd < 0)
		return smr_call_socket(domain, type, protocol);
	if (smr_cfg.verbose)
		smr_log("fd %d -> SMR (%s)", fd, smr_domain_name(domain));
	return fd;
}

/* ---- filter mode: decide in bind()/connect(), replace the fd in place ---- */

struct smr_ipaddr {
	int		family;		/* AF_INET or AF_INET6 after unmapping */
	unsigned char	addr[16];
	unsigned int	port;
	bool		wildcard;
};

static bool smr_get_ipaddr(const struct sockaddr *sa, socklen_t len,
			   struct smr_ipaddr *ip)
{
	static const unsigned char v4mapped[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(ip, 0, sizeof(*ip));
	if (!sa || len < sizeof(sa_family_t))
		return false;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = (const void *)sa;

		ip->family = AF_INET;
		memcpy(ip->addr, &sin->sin_addr, 4);
		ip->port = ntohs(sin->sin_port);
		ip->wildcard = sin->sin_addr.s_addr == htonl(INADDR_ANY);
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = (const void *)sa;

		ip->port = ntohs(sin6->sin6_port);
		if (!memcmp(sin6->sin6_addr.s6_addr, v4mapped, 12)) {
			ip->family = AF_INET;
			memcpy(ip->addr, sin6->sin6_addr.s6_addr + 12, 4);
			ip->wildcard = !memcmp(ip->addr, "\0\0\0\0", 4);
		} else {
			ip->family = AF_INET6;
			memcpy(ip->addr, sin6->sin6_addr.s6_addr, 16);
			ip->wildcard = IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr);
		}
		return true;
	}
	return false;
}

static bool smr_prefix_match(const struct smr_prefix *e,
			     const struct smr_ipaddr *ip)
{
	unsigned int bytes = e->prefix_len / 8, bits = e->prefix_len % 8;
	unsigned char mask;

	if (e->family != ip->family || memcmp(e->addr, ip->addr, bytes))
		return false;
	if (!bits)
		return true;
	mask = (unsigned char)(0xff00 >> bits);
	return ((e->addr[bytes] ^ ip->addr[bytes]) & mask) == 0;
}

static bool smr_filter_match(const struct smr_ipaddr *ip, bool is_bind)
{
	if (smr_cfg.have_ports &&
	    !(smr_cfg.ports[ip->port / 8] & (1u << (ip->port % 8))))
		return false;
	/* A listener on the wildcard address serves the listed ones too. */
	if (smr_cfg.n_addrs && !(is_bind && ip->wildcard && ip->port)) {
		unsigned int i;

		for (i = 0; i < smr_cfg.n_addrs; i++)
			if (smr_prefix_match(&smr_cfg.addrs[i], ip))
				break;
		if (i == smr_cfg.n_addrs)
			return false;
	}
	return true;
}

static int smr_getint(int fd, int level, int name)
{
	socklen_t len = sizeof(int);
	int v;

	if (getsockopt(fd, level, name, &v, &len) < 0 || len != sizeof(int))
		return -1;
	return v;
}

/* A TCP socket that has not been bound, connected or put to listen. */
static int smr_unbound_tcp_domain(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct smr_ipaddr ip;
	int domain = smr_getint(fd, SOL_SOCKET, SO_DOMAIN);

	if (domain != AF_INET && domain != AF_INET6)
		return -1;
	if (smr_getint(fd, SOL_SOCKET, SO_TYPE) != SOCK_STREAM ||
	    smr_getint(fd, SOL_SOCKET, SO_PROTOCOL) != IPPROTO_TCP)
		return -1;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    !smr_get_ipaddr((struct sockaddr *)&ss, len, &ip) ||
	    ip.port != 0 || !ip.wildcard)
		return -1;
	return domain;
}

/* Options copied to the SMR socket when the program changed them. */
struct smr_opt {
	int		level;
	int		name;
	int		domain;		/* 0: any, else only for this domain */
	bool		kernel_doubles;	/* getsockopt returns 2 * value set */
	const char	*label;
};

#define SMR_OPT(l, n, d, k)	{ l, n, d, k, #n }
static const struct smr_opt smr_copied_opts[] = {
	SMR_OPT(SOL_SOCKET, SO_REUSEADDR, 0, false),
	SMR_OPT(SOL_SOCKET, SO_REUSEPORT, 0, false),
	SMR_OPT(SOL_SOCKET, SO_KEEPALIVE, 0, false),
	SMR_OPT(SOL_SOCKET, SO_LINGER, 0, false),
	SMR_OPT(SOL_SOCKET, SO_OOBINLINE, 0, false),
	SMR_OPT(SOL_SOCKET, SO_RCVBUF, 0, true),
	SMR_OPT(SOL_SOCKET, SO_SNDBUF, 0, true),
	SMR_OPT(SOL_SOCKET, SO_RCVLOWAT, 0, false),
	SMR_OPT(SOL_SOCKET, SO_RCVTIMEO, 0, false),
	SMR_OPT(SOL_SOCKET, SO_SNDTIMEO, 0, false),
	SMR_OPT(SOL_SOCKET, SO_PRIORITY, 0, false),
	SMR_OPT(SOL_SOCKET, SO_MARK, 0, false),
	SMR_OPT(SOL_SOCKET, SO_BINDTODEVICE, 0, false),
	SMR_OPT(SOL_SOCKET, SO_DONTROUTE, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_NODELAY, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_MAXSEG, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_CORK, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_KEEPIDLE, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_KEEPINTVL, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_KEEPCNT, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_SYNCNT, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_LINGER2, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_DEFER_ACCEPT, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_WINDOW_CLAMP, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_CONGESTION, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_USER_TIMEOUT, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_FASTOPEN, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 0, false),
	SMR_OPT(IPPROTO_TCP, TCP_NOTSENT_LOWAT, 0, false),
	SMR_OPT(IPPROTO_IP, IP_TOS, AF_INET, false),
	SMR_OPT(IPPROTO_IP, IP_TTL, AF_INET, false),
	SMR_OPT(IPPROTO_IP, IP_FREEBIND, AF_INET, false),
	SMR_OPT(IPPROTO_IP, IP_TRANSPARENT, AF_INET, false),
	SMR_OPT(IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, AF_INET, false),
	SMR_OPT(IPPROTO_IP, IP_MTU_DISCOVER, AF_INET, false),
	SMR_OPT(IPPROTO_IPV6, IPV6_V6ONLY, AF_INET6, false),
	SMR_OPT(IPPROTO_IPV6, IPV6_TCLASS, AF_INET6, false),
	SMR_OPT(IPPROTO_IPV6, IPV6_UNICAST_HOPS, AF_INET6, false),
	SMR_OPT(IPPROTO_IPV6, IPV6_TRANSPARENT, AF_INET6, false),
	SMR_OPT(IPPROTO_IPV6, IPV6_MTU_DISCOVER, AF_INET6, false),
};

/*
 * Copy to @to every option whose value on @from differs from a fresh TCP
 * socket's (@ref): copying defaults would pin values the kernel otherwise
 * tunes itself (SO_RCVBUF/SO_SNDBUF locking off autotuning, for one).
 */
static int smr_copy_opts(int from, int ref, int to, int domain,
			 const char **failed)
{
	for (size_t i = 0; i < ARRAY_SIZE(smr_copied_opts); i++) {
		const struct smr_opt *o = &smr_copied_opts[i];
		unsigned char val[64], def[64];
		socklen_t vlen = sizeof(val), dlen = sizeof(def);

		if (o->domain && o->domain != domain)
			continue;
		if (getsockopt(from, o->level, o->name, val, &vlen) < 0 ||
		    getsockopt(ref, o->level, o->name, def, &dlen) < 0)
			continue;
		if (vlen == dlen && !memcmp(val, def, vlen))
			continue;
		if (o->kernel_doubles && vlen == sizeof(int)) {
			int v;

			memcpy(&v, val, sizeof(v));
			v /= 2;
			memcpy(val, &v, sizeof(v));
		}
		if (setsockopt(to, o->level, o->name, val, vlen) < 0) {
			*failed = o->label;
			return -1;
		}
	}
	return 0;
}

static void smr_format_ip(const struct sockaddr *sa, socklen_t len,
			  char *buf, size_t size)
{
	struct smr_ipaddr ip;
	char a[INET6_ADDRSTRLEN];

	if (!smr_get_ipaddr(sa, len, &ip) ||
	    !inet_ntop(ip.family, ip.addr, a, sizeof(a)))
		snprintf(a, sizeof(a), "?");
	snprintf(buf, size, "%s port %u", a, ip.port);
}

/*
 * Replace @fd, a plain unbound TCP socket, by an SMR socket with the same
 * fd number, file status/descriptor flags and options. On any failure @fd
 * is left as it was (still TCP) and errno is preserved.
 */
static void smr_convert(int fd, int domain, const char *op,
			const struct sockaddr *sa, socklen_t len)
{
	int saved_errno = errno, fl, fdfl, nfd = -1, ref = -1;
	const char *failed = NULL;
	char where[96], err[128];

	smr_format_ip(sa, len, where, sizeof(where));
	fl = fcntl(fd, F_GETFL);
	fdfl = fcntl(fd, F_GETFD);
	if (fl < 0 || fdfl < 0)
		goto out;
	/* CLOEXEC until dup3 so a concurrent exec elsewhere cannot leak it. */
	nfd = smr_create(domain, SOCK_CLOEXEC |
			 ((fl & O_NONBLOCK) ? SOCK_NONBLOCK : 0));
	if (nfd < 0) {
		failed = "SMR socket()";
		goto fail;
	}
	ref = smr_call_socket(domain, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
	if (ref < 0) {
		failed = "reference TCP socket()";
		goto fail;
	}
	if (smr_copy_opts(fd, ref, nfd, domain, &failed) < 0)
		goto fail;
	if (dup3(nfd, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		failed = "dup3()";
		goto fail;
	}
	if (smr_cfg.verbose)
		smr_log("fd %d -> SMR (%s) on %s %s", fd,
			smr_domain_name(domain), op, where);
	goto out;
fail:
	if (smr_cfg.verbose)
		smr_log("fd %d stays TCP: %s%s failed: %s", fd,
			strchr(failed, '(') ? "" : "copying ", failed,
			smr_strerror(errno, err, sizeof(err)));
out:
	if (nfd >= 0)
		close(nfd);
	if (ref >= 0)
		close(ref);
	errno = saved_errno;
}

static void smr_filter(int fd, bool is_bind, const struct sockaddr *sa,
		       socklen_t len)
{
	const char *op = is_bind ? "bind" : "connect";
	struct smr_ipaddr ip;
	char where[96];
	int domain;

	smr_ensure_init();
	if (!smr_cfg.enabled || !smr_cfg.filter ||
	    __atomic_load_n(&smr_unavailable, __ATOMIC_RELAXED) ||
	    !smr_get_ipaddr(sa, len, &ip))
		return;
	domain = smr_unbound_tcp_domain(fd);
	if (domain < 0)
		return;
	if (smr_filter_match(&ip, is_bind)) {
		smr_convert(fd, domain, op, sa, len);
	} else if (smr_cfg.verbose) {
		smr_format_ip(sa, len, where, sizeof(where));
		smr_log("fd %d stays TCP: %s %s not in SMR_PORTS/SMR_ADDRS",
			fd, op, where);
	}
}

SMR_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	smr_filter(fd, true, addr, len);
	if (smr_cfg.real_bind)
		return smr_cfg.real_bind(fd, addr, len);
	return (int)syscall(SYS_bind, fd, addr, len);
}

SMR_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	smr_filter(fd, false, addr, len);
	if (smr_cfg.real_connect)
		return smr_cfg.real_connect(fd, addr, len);
	return (int)syscall(SYS_connect, fd, addr, len);
}

/*
 * SO_REUSEPORT on an SMR socket: kernels before 6.2 refuse it (EOPNOTSUPP,
 * outside AF_INET and AF_INET6) before SMR sees it; SOL_SMR's SMR_REUSEPORT
 * does the same. Any other option, or any other socket, goes through as is.
 */
SMR_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			  socklen_t len)
{
	int ret, saved;

	if (smr_cfg.real_setsockopt)
		ret = smr_cfg.real_setsockopt(fd, level, name, val, len);
	else
		ret = (int)syscall(SYS_setsockopt, fd, level, name, val, len);
	saved = errno;
	if (ret == 0 || saved != EOPNOTSUPP || level != SOL_SOCKET ||
	    name != SO_REUSEPORT || !smr_cfg.enabled)
		return ret;
	if (smr_getint(fd, SOL_SOCKET, SO_DOMAIN) == smr_cfg.family &&
	    syscall(SYS_setsockopt, fd, SOL_SMR, SMR_REUSEPORT, val, len) == 0)
		return 0;
	errno = saved;
	return ret;
}
