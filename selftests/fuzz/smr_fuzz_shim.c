// SPDX-License-Identifier: GPL-2.0
/*
 * libsmr-fuzz-shim.so: point trinity's socket fuzzing at the SMR family.
 *
 * trinity (Debian's 1.9+git20230109) takes the family for its sockets from
 * its own table of PF_ names (-P NAME): a number it has no name for cannot
 * be given at all, and 19, SMR's default, is in the table as ECONET but
 * refused for sockets ("not actually implemented"). It does know PF_INET
 * and PF_INET6 well: TCP triplets, sockaddr_in and sockaddr_in6 generators,
 * TCP and IP socket options, which are exactly the arguments an SMR socket
 * takes. So trinity runs with -P INET (or INET6) under this LD_PRELOAD
 * library, which turns its inet sockets into SMR sockets and leaves every
 * other argument of every call as trinity made it:
 *
 *  - socket(AF_INET or AF_INET6, TYPE, PROTO), by libc (trinity's pool of
 *    sockets, made before the children fork) or by syscall() (the fuzzed
 *    call), becomes socket(smr_family, SOCK_STREAM | TYPE's flags,
 *    SMRPROTO_IPV4 or SMRPROTO_IPV6): trinity's UDP, SCTP, DCCP and
 *    raw triplets would only earn EINVAL from SMR. A TYPE of 0 (trinity's
 *    deliberately invalid triplets) keeps TYPE and PROTO, so SMR's own
 *    refusals are fuzzed too; TYPE's flag bits are never touched, invalid
 *    ones included.
 *  - SMR_FUZZ_ADDRS, SMR_FUZZ_PORTS: trinity aims 99% of its addresses at
 *    127.0.0.1 or ::1 and any of 65535 ports, where nothing listens and
 *    no RDMA device is. bind(), connect() and sendto() to a loopback
 *    address get one of the listed addresses instead (bind the first of
 *    its family, this host's own; connect and sendto one chosen by the
 *    port), and a non-zero port P becomes BASE + P % COUNT, so that
 *    trinity's sockets meet each other's listeners and the peer's, on
 *    this host and over soft-RoCE. Other addresses (multicast, broadcast,
 *    AF_UNSPEC, odd lengths) pass unchanged. The sockaddr is copied, never
 *    written in place, and read with process_vm_readv(), so a bad pointer
 *    reaches the kernel as trinity made it.
 *  - libc's setsockopt() is only trinity's own setup of its socket pool:
 *    it always reports success (see below why).
 *  - SMR_FUZZ_SOL_SMR=N (default 8): every Nth setsockopt()/getsockopt()
 *    of a process goes to level SOL_SMR, optname reduced to 0..3 (SMR's
 *    options and their neighbours), which trinity does not know; 0: never.
 *
 * Calls trinity makes in 32-bit mode (int 0x80) do not pass through libc
 * and are not changed: they still reach SMR sockets through trinity's pool.
 * SMR_FUZZ_FAMILY=N uses family N instead of the module's parameter. A bad
 * setting stops the program at once: a fuzz run that silently misses SMR
 * must not pass.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/smr.h>

#define SMR_EXPORT	__attribute__((visibility("default")))
#define SMR_MAX_ADDRS	8
#define SMR_TYPE_MASK	0xf	/* the socket type bits of socket()'s type */

typedef int (*smr_socket_fn)(int, int, int);
typedef int (*smr_setsockopt_fn)(int, int, int, const void *, socklen_t);
typedef long (*smr_syscall_fn)(long, ...);

/* Written once by the constructor, before trinity forks; read-only after. */
static struct {
	smr_socket_fn	real_socket;
	smr_setsockopt_fn real_setsockopt;
	smr_syscall_fn	real_syscall;
	int		family;
	unsigned int	n4, n6;
	struct in_addr	addr4[SMR_MAX_ADDRS];
	struct in6_addr	addr6[SMR_MAX_ADDRS];
	unsigned int	port_base, port_count;	/* count 0: ports unchanged */
	unsigned int	sol_smr_every;
} shim;

/* Per process (trinity's children are single-threaded processes). */
static unsigned long sockopt_calls;

static void __attribute__((noreturn)) shim_die(const char *fmt, ...)
{
	va_list ap;

	fputs("smr_fuzz_shim: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	_exit(2);
}

static unsigned long shim_env_uint(const char *name, unsigned long dflt,
				   unsigned long max)
{
	const char *v = getenv(name);
	unsigned long n;
	char *end;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n > max)
		shim_die("%s=\"%s\": want a number up to %lu", name, v, max);
	return n;
}

static int shim_read_family(void)
{
	char buf[16] = "";
	ssize_t n;
	int fd;

	if (getenv("SMR_FUZZ_FAMILY"))
		return (int)shim_env_uint("SMR_FUZZ_FAMILY", 0, AF_MAX - 1);
	fd = open(SMR_FAMILY_SYSFS, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		shim_die("%s: %s (is smr loaded?)", SMR_FAMILY_SYSFS,
			 strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || atoi(buf) <= 0)
		shim_die("%s: no family number in it", SMR_FAMILY_SYSFS);
	return atoi(buf);
}

/* "192.0.2.1,192.0.2.2,fd53:4d52::1": each host's own address first */
static void shim_parse_addrs(const char *list)
{
	char buf[512], *tok, *save;

	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		shim_die("SMR_FUZZ_ADDRS too long");
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (shim.n4 < SMR_MAX_ADDRS &&
		    inet_pton(AF_INET, tok, &shim.addr4[shim.n4]) == 1)
			shim.n4++;
		else if (shim.n6 < SMR_MAX_ADDRS &&
			 inet_pton(AF_INET6, tok, &shim.addr6[shim.n6]) == 1)
			shim.n6++;
		else
			shim_die("SMR_FUZZ_ADDRS: bad or one too many: \"%s\"", tok);
	}
}

static void shim_parse_ports(const char *spec)
{
	unsigned int base, count;
	char tail;

	if (sscanf(spec, "%u:%u%c", &base, &count, &tail) != 2 || !base ||
	    !count || base + count > 65536)
		shim_die("SMR_FUZZ_PORTS=\"%s\": want BASE:COUNT", spec);
	shim.port_base = base;
	shim.port_count = count;
}

__attribute__((constructor)) static void shim_init(void)
{
	const char *v;

	shim.real_socket = (smr_socket_fn)dlsym(RTLD_NEXT, "socket");
	shim.real_syscall = (smr_syscall_fn)dlsym(RTLD_NEXT, "syscall");
	shim.real_setsockopt = (smr_setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
	if (!shim.real_socket || !shim.real_syscall || !shim.real_setsockopt)
		shim_die("no libc socket() or syscall() behind the shim");
	shim.family = shim_read_family();
	v = getenv("SMR_FUZZ_ADDRS");
	if (v && *v)
		shim_parse_addrs(v);
	v = getenv("SMR_FUZZ_PORTS");
	if (v && *v)
		shim_parse_ports(v);
	shim.sol_smr_every = shim_env_uint("SMR_FUZZ_SOL_SMR", 8, 1000000);
}

/* AF_INET(6) becomes SMR; returns true if it did */
static bool shim_socket_args(long *family, long *type, long *protocol)
{
	int proto;

	if (*family == AF_INET)
		proto = SMRPROTO_IPV4;
	else if (*family == AF_INET6)
		proto = SMRPROTO_IPV6;
	else
		return false;
	*family = shim.family;
	if (*type & SMR_TYPE_MASK) {
		*type = (*type & ~(long)SMR_TYPE_MASK) | SOCK_STREAM;
		*protocol = proto;
	}
	return true;
}

SMR_EXPORT int socket(int family, int type, int protocol)
{
	long f = family, t = type, p = protocol;

	shim_socket_args(&f, &t, &p);
	return shim.real_socket((int)f, (int)t, (int)p);
}

/*
 * libc's setsockopt() is trinity's own setup of its pool (one random option
 * per socket): it retries a refused option up to 100 times, each time with
 * a new one from its generators, and one of those reads past trinity's
 * protocol table and kills trinity before it fuzzed anything (SMR refuses
 * more of the options trinity draws for a UDP or SCTP triplet than those
 * protocols would). The option is set, and trinity told it was.
 */
SMR_EXPORT int setsockopt(int fd, int level, int optname, const void *optval,
			  socklen_t optlen)
{
	shim.real_setsockopt(fd, level, optname, optval, optlen);
	return 0;
}

static unsigned int shim_port(unsigned int port)
{
	if (!shim.port_count || !port)
		return port;
	return shim.port_base + port % shim.port_count;
}

/*
 * Copy the sockaddr at @uaddr (@len bytes) into @buf and steer it if it is
 * a loopback address; false (pass the call through unchanged) if it is
 * not one to steer or cannot be read.
 */
static bool shim_steer(unsigned long uaddr, unsigned long len, bool own,
		       struct sockaddr_storage *buf)
{
	struct iovec local = { buf, len }, remote = { (void *)uaddr, len };
	struct sockaddr_in *sin = (struct sockaddr_in *)buf;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)buf;
	unsigned int port;

	if (!uaddr || len < sizeof(*sin) || len > sizeof(*buf))
		return false;
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)len)
		return false;
	if (sin->sin_family == AF_INET && shim.n4 &&
	    (ntohl(sin->sin_addr.s_addr) >> 24) == 127) {
		port = ntohs(sin->sin_port);
		sin->sin_addr = shim.addr4[own ? 0 : port % shim.n4];
		sin->sin_port = htons(shim_port(port));
		return true;
	}
	if (sin6->sin6_family == AF_INET6 && len >= sizeof(*sin6) && shim.n6 &&
	    IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr)) {
		port = ntohs(sin6->sin6_port);
		sin6->sin6_addr = shim.addr6[own ? 0 : port % shim.n6];
		sin6->sin6_port = htons(shim_port(port));
		return true;
	}
	return false;
}

/* every Nth socket option of a process goes to SOL_SMR */
static void shim_sockopt(long *level, long *optname)
{
	if (!shim.sol_smr_every || ++sockopt_calls % shim.sol_smr_every)
		return;
	*level = SOL_SMR;
	*optname = (unsigned long)*optname % 4;
}

/*
 * trinity makes its fuzzed calls through syscall(); x86-64 passes six
 * register arguments whatever the call, so reading six is what libc's own
 * syscall() does too.
 */
SMR_EXPORT long syscall(long nr, ...)
{
	struct sockaddr_storage addr;
	long a[6];
	va_list ap;
	int i;

	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);

	switch (nr) {
	case __NR_socket:
		shim_socket_args(&a[0], &a[1], &a[2]);
		break;
	case __NR_bind:
	case __NR_connect:
		if (shim_steer(a[1], a[2], nr == __NR_bind, &addr))
			a[1] = (long)&addr;
		break;
	case __NR_sendto:
		if (shim_steer(a[4], a[5], false, &addr))
			a[4] = (long)&addr;
		break;
	case __NR_setsockopt:
	case __NR_getsockopt:
		shim_sockopt(&a[1], &a[2]);
		break;
	}
	return shim.real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
