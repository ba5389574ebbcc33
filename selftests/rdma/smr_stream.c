// SPDX-License-Identifier: GPL-2.0
/*
 * smr_stream: both ends of the data-path test connections of
 * selftests/rdma_test.sh.
 *
 *   smr_stream server [options]         accept -n connections
 *   smr_stream client -a ADDR [options] make -n connections at once
 *
 * Every connection carries a pseudo-random stream each way, both ways at
 * once (non-blocking sockets in the epoll loop of selftests/lib/engine.c). The stream of a direction is
 * fixed by -S, the client's port and the direction, so the receiver knows
 * every byte it must get: each received byte is checked against it, and a
 * lost, extra, reordered or foreign byte shows at its offset. Write and
 * read sizes are drawn per call, log-uniformly from 1 byte to -m bytes
 * (default 1 MiB), so one-byte and megabyte calls both occur. Both ends
 * hash what they sent and what they received (per little-endian 64-bit
 * word w of the stream, the tail zero-padded, then its length:
 * h = (h ^ w) * FNV_PRIME64, h ^= h >> 29; from FNV's offset basis), so a
 * test can compare the two ends' hashes independently of the byte checks.
 *
 * An end shuts its sending side only once it has sent its whole stream and
 * received the peer's, and judges the connection when the peer's EOF comes:
 * the peer then has every byte this end sent, so none can still wait in a
 * send buffer when the counters are read.
 *
 * At the end each AF_SMR socket is checked against -M: getsockopt(SOL_SMR,
 * SMR_INFO) must report the expected mode and byte counters, and
 * TCP_INFO (which describes the inner TCP connection) what that mode puts
 * on TCP:
 *   rdma   mode rdma, rdma_bytes_sent == bytes_sent, rdma_bytes_received ==
 *          bytes_received, and the inner TCP acked and received fewer than
 *          4096 bytes (the handshake only)
 *   tcp    mode tcp with a fallback reason, no RDMA bytes, and the inner
 *          TCP received at least the payload
 *   any    no mode check
 * bytes_sent and bytes_received must equal what this end sent and
 * received in every mode.
 *
 * One line per connection on stdout, "conn key=value ..." (why= last; its
 * value never has spaces):
 *   idx lport rport   connection number, ports
 *   err at            errno that ended it (0 if none), where (connect,
 *                     send, recv, eof, hang, deadline, ...)
 *   t_ms              from connect()/accept() to the end
 *   fail_ms           -F: from the trigger to the end (-1 without one)
 *   mode_start        SMR mode when the connection became usable
 *   mode reason peer_reason info_sent info_recv info_rdma_sent
 *   info_rdma_recv    SMR_INFO at the end ("-" without it)
 *   tcpi_acked tcpi_rcvd  TCP_INFO tcpi_bytes_acked/_received at the end
 *   tx rx rx_bad      bytes sent, received, first bad offset (-1 none)
 *   writes reads wmin wmax rmin rmax   calls and sizes asked for
 *   tx_hash rx_hash   hashes of the stream sent and received
 *   ok why            1 if every check passed; else why (first failures)
 * then one "summary" line. Exit status 0 iff every connection is ok.
 *
 * Options:
 *   -t smr|tcp   AF_SMR (default; family from SMR_FAMILY_SYSFS) or TCP
 *   -6           IPv6 (SMRPROTO_IPV6)
 *   -a ADDR      client: where to connect; server: bind address
 *   -p PORT      port (default 6000)
 *   -n N         connections (default 1)
 *   -s BYTES     stream length each way per connection (default 8 MiB;
 *                0: endless, until an error ends it, for -F)
 *   -S SEED      stream seed (default 1)
 *   -m BYTES     largest write and read (default 1048576)
 *   -M MODE      expected mode: rdma, tcp or any (default: $SMR_EXPECT_MODE,
 *                else rdma)
 *   -F           expect failure: every connection must end by an error
 *                (ECONNRESET or EPIPE from send/recv, or EOF with every
 *                byte so far intact) after the -X trigger and within -W
 *                seconds of it; the mode is checked when it became usable
 *   -X FILE      -F: the moment FILE appears is the trigger
 *   -W SECONDS   -F: how long after the trigger connections may live (30;
 *                a check of the kernel's reaction: never time-scaled)
 *   -H FILE      hold: once -h bytes went each way, stop moving data (no
 *                shutdown) until FILE appears, then go on
 *   -h BYTES     where -H holds (default: the whole stream)
 *   -R FILE      server: create FILE once listening; client: once every
 *                connection is held (-H), done, or moved 256 KiB each way
 *   -T SECONDS   give up after this long (default 300), times
 *                $SMR_TEST_TIME_SCALE (smr_test_lib.h)
 *   -B BACKLOG   server: listen() backlog (default 4096)
 *   -U UID       server: once listening, drop to UID (and its gid) before
 *                accepting, as a privilege-dropping server does
 *   -C OFFSET    debug: connection 0 sends the byte at OFFSET of its stream
 *                flipped (its tx_hash still covers the true stream), to
 *                prove that the checks catch it
 *   -A ADDR      client: bind to this source address (port 0) first
 *   -r BYTES     SO_RCVBUF and SO_SNDBUF (the kernel doubles them) before
 *                connect() or, for a server, listen(): its children
 *                inherit them
 *   -D FILE      server: accept nothing until FILE appears (connections
 *                negotiate and wait, as for an application that does not
 *                accept, e.g. a busy one)
 *   -P FILE      append a "progress" line (time, connections done and ok,
 *                bytes sent and received) to FILE every 10 s: a slow run
 *                and a stalled one look different before the deadline
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/tcp.h>

#include "smr_test_lib.h"
#include "engine.h"

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))

#define RS_MAX_IO_DEFAULT	(1024u * 1024)
#define RS_READY_BYTES		(256u * 1024)
#define RS_TCP_HS_MAX		4096	/* inner TCP bytes allowed in rdma mode */
#define RS_ENDLESS		UINT64_MAX
#define RS_STEPS		16	/* I/O calls per event, for fairness */
#define RS_C2S			0x6332730000000000ULL
#define RS_S2C			0x7332630000000000ULL
#define RS_FNV_PRIME		0x100000001b3ULL
#define RS_PROGRESS_MS		10000

enum rs_expect { EXPECT_RDMA, EXPECT_TCP, EXPECT_ANY };

/* This tool's options; the shared ones are in eng_opt. */
static struct {
	uint64_t bytes;		/* RS_ENDLESS for -s 0 */
	uint64_t seed;
	uint32_t max_io;
	enum rs_expect expect;
	bool expect_fail;
	const char *trigger_file;
	int fail_window_s;
	const char *hold_file;
	uint64_t hold_at;
	int64_t corrupt_off;
	const char *src_addr;
	int sockbuf;
	const char *defer_file;
	const char *progress_file;
} opt = {
	.bytes = 8u << 20, .seed = 1, .max_io = RS_MAX_IO_DEFAULT,
	.fail_window_s = 30, .hold_at = 0, .corrupt_off = -1,
};

struct rs_hash {
	uint64_t h;
	uint64_t carry;
	unsigned int ncarry;
	uint64_t len;
};

struct rs_conn {
	struct eng_conn e;	/* first: the engine's part */
	int mode_start;		/* SMR mode when usable, -1 n/a */
	long long t_end;
	uint64_t tx_seed, rx_seed;
	uint64_t tx_rng, rx_rng;	/* write and read sizes */
	uint64_t gen;		/* stream bytes put into wbuf so far */
	uint64_t tx, rx;
	uint8_t *wbuf;		/* the current write */
	size_t wcap, wlen, wdone;
	int64_t rx_bad;
	bool tx_shut, rx_eof;
	uint64_t writes, reads;
	uint32_t wmin, wmax, rmin, rmax;
	struct rs_hash tx_hash, rx_hash;
};

static long long t_trigger;
static bool released;
static uint64_t tx_total, rx_total;
static uint8_t *rxbuf, *expbuf;

static void usage(void)
{
	fprintf(stderr,
		"usage: smr_stream server|client [-t smr|tcp] [-6] [-a ADDR] [-p PORT] [-n N]\n"
		"       [-s BYTES] [-S SEED] [-m BYTES] [-M rdma|tcp|any] [-F] [-X FILE]\n"
		"       [-W SECONDS] [-H FILE] [-h BYTES] [-R FILE] [-T SECONDS] [-B BACKLOG]\n"
		"       [-U UID] [-C OFFSET] [-A ADDR] [-r BYTES] [-D FILE] [-P FILE]\n");
	exit(2);
}

static const char *mode_name(unsigned int mode)
{
	return smr_mode_name(mode) ?: "unknown";
}

static const char *reason_name(unsigned int reason)
{
	return smr_reason_name(reason) ?: "unknown";
}

static bool file_exists(const char *path)
{
	return !access(path, F_OK);
}

/* ---- the streams, their hashes, the size draws ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* Word @w (bytes 8w .. 8w+7, little-endian) of the stream @seed. */
static uint64_t stream_word(uint64_t seed, uint64_t w)
{
	return mix64(seed + w * 0x9e3779b97f4a7c15ULL);
}

/* Bytes @off .. @off+@len-1 of stream @seed. */
static void stream_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	uint64_t w = off / 8, v;
	unsigned int skip = off % 8;
	size_t n;

	while (len) {
		v = stream_word(seed, w++);
		if (!skip && len >= 8) {
			memcpy(buf, &v, 8);	/* x86: little-endian */
			n = 8;
		} else {
			n = 8 - skip < len ? 8 - skip : len;
			memcpy(buf, (uint8_t *)&v + skip, n);
			skip = 0;
		}
		buf += n;
		len -= n;
	}
}

static void hash_init(struct rs_hash *h)
{
	memset(h, 0, sizeof(*h));
	h->h = SMR_FNV1A_INIT;
}

/*
 * FNV-1a's step on a whole word. A product only carries a difference
 * upwards, so a flipped high bit would stay in the top bits (and two
 * could cancel): the shift brings it down. Both steps are bijective, so
 * one wrong word always changes the hash.
 */
static void hash_word(struct rs_hash *h, uint64_t w)
{
	h->h = (h->h ^ w) * RS_FNV_PRIME;
	h->h ^= h->h >> 29;
}

static void hash_update(struct rs_hash *h, const uint8_t *p, size_t len)
{
	uint64_t w;

	h->len += len;
	while (len && h->ncarry) {
		h->carry |= (uint64_t)*p++ << (8 * h->ncarry);
		len--;
		if (++h->ncarry == 8) {
			hash_word(h, h->carry);
			h->carry = 0;
			h->ncarry = 0;
		}
	}
	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&w, p, 8);
		hash_word(h, w);
	}
	for (; len; len--) {
		h->carry |= (uint64_t)*p++ << (8 * h->ncarry);
		h->ncarry++;
	}
}

static uint64_t hash_final(const struct rs_hash *h)
{
	struct rs_hash t = *h;

	if (t.ncarry)
		hash_word(&t, t.carry);
	hash_word(&t, t.len);
	return t.h;
}

static uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ULL;
	return mix64(*s);
}

/*
 * A write or read size: an exponent e uniform in 0..20, then a size
 * uniform in (2^(e-1), 2^e] (1 for e = 0): log-uniform from 1 byte to
 * 1 MiB, capped at -m.
 */
static uint32_t io_size(uint64_t *rng)
{
	uint64_t r = rng_next(rng);
	unsigned int e = r % 21;
	uint32_t hi = 1u << e, lo = hi / 2 + 1, n;

	n = lo + (uint32_t)((r >> 8) % (hi - lo + 1));
	return n < opt.max_io ? n : opt.max_io;
}

/* ---- connections ---- */

static int get_tcp_info(int fd, struct tcp_info *ti)
{
	socklen_t len = sizeof(*ti);

	memset(ti, 0, sizeof(*ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len))
		return -errno;
	return 0;
}

/* Failure reasons of one connection, comma-separated, no spaces. */
struct rs_why {
	char buf[512];
	size_t used;
	int n;
};

static void why_add(struct rs_why *w, const char *fmt, ...)
{
	va_list ap;
	size_t i;
	int r;

	if (w->used >= sizeof(w->buf) - 1)
		return;
	if (w->n++)
		w->buf[w->used++] = ',';
	va_start(ap, fmt);
	r = vsnprintf(w->buf + w->used, sizeof(w->buf) - w->used, fmt, ap);
	va_end(ap);
	if (r < 0)
		return;
	for (i = w->used; i < sizeof(w->buf) && w->buf[i]; i++)
		if (w->buf[i] == ' ')
			w->buf[i] = '_';
	w->used += (size_t)r < sizeof(w->buf) - w->used ?
		   (size_t)r : sizeof(w->buf) - w->used - 1;
}

/* The -M checks of SMR_INFO and TCP_INFO at the end of a connection. */
static void judge_mode(const struct rs_conn *c, const struct smr_info *in,
		       const struct tcp_info *ti, int tierr, struct rs_why *w)
{
	if (in->bytes_sent != c->tx)
		why_add(w, "info_bytes_sent_%llu_!=_sent_%llu",
			(unsigned long long)in->bytes_sent,
			(unsigned long long)c->tx);
	if (in->bytes_received != c->rx)
		why_add(w, "info_bytes_received_%llu_!=_received_%llu",
			(unsigned long long)in->bytes_received,
			(unsigned long long)c->rx);
	if (opt.expect == EXPECT_ANY)
		return;
	if (opt.expect == EXPECT_RDMA) {
		if (in->mode != SMR_MODE_RDMA)
			why_add(w, "mode_%s(%s)_want_rdma", mode_name(in->mode),
				reason_name(in->reason));
		if (in->rdma_bytes_sent != in->bytes_sent)
			why_add(w, "rdma_bytes_sent_%llu_!=_bytes_sent_%llu",
				(unsigned long long)in->rdma_bytes_sent,
				(unsigned long long)in->bytes_sent);
		if (in->rdma_bytes_received != in->bytes_received)
			why_add(w, "rdma_bytes_received_%llu_!=_bytes_received_%llu",
				(unsigned long long)in->rdma_bytes_received,
				(unsigned long long)in->bytes_received);
		if (tierr) {
			why_add(w, "TCP_INFO_%s", smr_errname(-tierr));
			return;
		}
		if (ti->tcpi_bytes_acked >= RS_TCP_HS_MAX)
			why_add(w, "inner_tcp_bytes_acked_%llu_>=_%d",
				(unsigned long long)ti->tcpi_bytes_acked,
				RS_TCP_HS_MAX);
		if (ti->tcpi_bytes_received >= RS_TCP_HS_MAX)
			why_add(w, "inner_tcp_bytes_received_%llu_>=_%d",
				(unsigned long long)ti->tcpi_bytes_received,
				RS_TCP_HS_MAX);
		return;
	}
	if (in->mode != SMR_MODE_TCP || in->reason == SMR_REASON_NONE)
		why_add(w, "mode_%s(%s)_want_tcp_with_a_reason",
			mode_name(in->mode), reason_name(in->reason));
	if (in->rdma_bytes_sent || in->rdma_bytes_received)
		why_add(w, "rdma_bytes_%llu/%llu_in_tcp_mode",
			(unsigned long long)in->rdma_bytes_sent,
			(unsigned long long)in->rdma_bytes_received);
	if (tierr)
		why_add(w, "TCP_INFO_%s", smr_errname(-tierr));
	else if (ti->tcpi_bytes_received < c->rx)
		why_add(w, "inner_tcp_bytes_received_%llu_<_payload_%llu",
			(unsigned long long)ti->tcpi_bytes_received,
			(unsigned long long)c->rx);
}

/* The checks of a connection that was to carry its whole stream. */
static void judge_stream(const struct rs_conn *c, struct rs_why *w)
{
	if (c->e.err)
		why_add(w, "%s_at_%s", smr_errname(c->e.err), c->e.err_at);
	if (c->rx_bad >= 0)
		why_add(w, "byte_%lld_received_off_the_stream", (long long)c->rx_bad);
	if (c->tx != opt.bytes)
		why_add(w, "sent_%llu_of_%llu", (unsigned long long)c->tx,
			(unsigned long long)opt.bytes);
	if (c->rx != opt.bytes)
		why_add(w, "received_%llu_of_%llu", (unsigned long long)c->rx,
			(unsigned long long)opt.bytes);
	if (!c->e.err && !c->rx_eof)
		why_add(w, "no_EOF");
}

/* -F: the connection had to die of the trigger, promptly and cleanly. */
static void judge_failure(const struct rs_conn *c, struct rs_why *w)
{
	const char *at = c->e.err_at ? c->e.err_at : "-";
	bool eof = !c->e.err && c->rx_eof;

	if (!strcmp(at, "hang"))
		why_add(w, "still_open_%d_s_after_the_trigger", opt.fail_window_s);
	else if (!strcmp(at, "deadline"))
		why_add(w, "still_open_at_the_deadline%s",
			t_trigger ? "" : "_(no_trigger)");
	else if (!t_trigger || c->t_end < t_trigger)
		why_add(w, "ended_before_the_trigger(%s_at_%s)",
			smr_errname(c->e.err), at);
	else if (c->t_end - t_trigger > opt.fail_window_s * 1000LL)
		why_add(w, "ended_%lld_ms_after_the_trigger_(limit_%d_s)",
			c->t_end - t_trigger, opt.fail_window_s);
	else if (!eof && c->e.err != ECONNRESET && c->e.err != EPIPE)
		why_add(w, "ended_by_%s_at_%s_want_ECONNRESET_or_EPIPE",
			smr_errname(c->e.err), at);
	if (c->rx_bad >= 0)
		why_add(w, "byte_%lld_received_off_the_stream", (long long)c->rx_bad);
	if (eng_opt.smr && opt.expect != EXPECT_ANY &&
	    c->mode_start != (opt.expect == EXPECT_RDMA ? SMR_MODE_RDMA : SMR_MODE_TCP))
		why_add(w, "mode_%s_when_usable_want_%s",
			c->mode_start < 0 ? "unknown" : mode_name(c->mode_start),
			opt.expect == EXPECT_RDMA ? "rdma" : "tcp");
}

#define RS_NO_INFO "mode=- reason=- peer_reason=- info_sent=- info_recv=- info_rdma_sent=- info_rdma_recv=-"

/* The engine's report: judge the connection and print its line. */
static bool conn_report(struct eng_conn *ec)
{
	struct rs_conn *c = (struct rs_conn *)ec;
	char info_part[300] = RS_NO_INFO;
	char ti_part[80] = "tcpi_acked=- tcpi_rcvd=-";
	struct rs_why w = { .n = 0 };
	struct smr_info info;
	struct tcp_info ti;
	int ierr = -ENOTSOCK, tierr = -ENOTCONN;

	if (!c->t_end)
		c->t_end = smr_now_ms();
	/* the trigger may be newer than the last look at it */
	if (opt.trigger_file && !t_trigger && file_exists(opt.trigger_file)) {
		t_trigger = c->t_end;
		eng_deadline = t_trigger + opt.fail_window_s * 1000LL;
	}
	if (c->e.fd >= 0) {
		if (eng_opt.smr)
			ierr = smr_get_info(c->e.fd, &info);
		tierr = get_tcp_info(c->e.fd, &ti);
	}
	if (!ierr)
		snprintf(info_part, sizeof(info_part),
			 "mode=%s reason=%s peer_reason=%s info_sent=%llu info_recv=%llu info_rdma_sent=%llu info_rdma_recv=%llu",
			 mode_name(info.mode), reason_name(info.reason),
			 reason_name(info.peer_reason),
			 (unsigned long long)info.bytes_sent,
			 (unsigned long long)info.bytes_received,
			 (unsigned long long)info.rdma_bytes_sent,
			 (unsigned long long)info.rdma_bytes_received);
	if (!tierr)
		snprintf(ti_part, sizeof(ti_part), "tcpi_acked=%llu tcpi_rcvd=%llu",
			 (unsigned long long)ti.tcpi_bytes_acked,
			 (unsigned long long)ti.tcpi_bytes_received);

	if (opt.expect_fail) {
		judge_failure(c, &w);
	} else {
		judge_stream(c, &w);
		if (eng_opt.smr && ierr)
			why_add(&w, "SMR_INFO_%s", smr_errname(-ierr));
		else if (eng_opt.smr)
			judge_mode(c, &info, &ti, tierr, &w);
	}

	free(c->wbuf);
	c->wbuf = NULL;
	tx_total += c->tx;
	rx_total += c->rx;
	printf("conn role=%s type=%s ip=%d idx=%d lport=%u rport=%u err=%s at=%s t_ms=%lld fail_ms=%lld mode_start=%s %s %s tx=%llu rx=%llu rx_bad=%lld writes=%llu reads=%llu wmin=%u wmax=%u rmin=%u rmax=%u tx_hash=%016llx rx_hash=%016llx ok=%d why=%s\n",
	       eng_opt.server ? "server" : "client", eng_opt.smr ? "smr" : "tcp",
	       eng_opt.v6 ? 6 : 4, c->e.idx, c->e.lport, c->e.rport, smr_errname(c->e.err),
	       c->e.err_at ? c->e.err_at : "-", c->t_end - c->e.t_start,
	       t_trigger ? c->t_end - t_trigger : -1LL,
	       c->mode_start < 0 ? "-" : mode_name(c->mode_start),
	       info_part, ti_part,
	       (unsigned long long)c->tx, (unsigned long long)c->rx,
	       (long long)c->rx_bad, (unsigned long long)c->writes,
	       (unsigned long long)c->reads, c->writes ? c->wmin : 0, c->wmax,
	       c->reads ? c->rmin : 0, c->rmax,
	       (unsigned long long)hash_final(&c->tx_hash),
	       (unsigned long long)hash_final(&c->rx_hash),
	       !w.n, w.n ? w.buf : "-");
	fflush(stdout);
	return !w.n;
}

static bool holding(void)
{
	return opt.hold_file && !released;
}

/* Where sending and receiving stop for now. */
static uint64_t tx_limit(void)
{
	return holding() ? opt.hold_at : opt.bytes;
}

static uint64_t rx_limit(void)
{
	return holding() ? opt.hold_at : RS_ENDLESS;
}

/* Everything sent and received (and not held): time to send EOF. */
static bool shutdown_due(const struct rs_conn *c)
{
	return c->gen == opt.bytes && c->wdone == c->wlen &&
	       c->rx >= opt.bytes && !holding();
}

static void conn_update_events(struct rs_conn *c)
{
	uint32_t ev = 0;

	if (!c->rx_eof && c->rx < rx_limit())
		ev |= EPOLLIN;
	/* more to send, or the shutdown after the last byte is still due */
	if (!c->tx_shut && (c->wdone < c->wlen || c->gen < tx_limit() ||
			    shutdown_due(c)))
		ev |= EPOLLOUT;
	eng_ep_set(&c->e, ev);
}

/* Take the next write of the stream into wbuf. */
static void next_write(struct rs_conn *c)
{
	uint64_t left = tx_limit() - c->gen;
	size_t n = io_size(&c->tx_rng);

	if (n > left)
		n = left;
	if (n > c->wcap) {
		free(c->wbuf);
		c->wbuf = malloc(n);
		if (!c->wbuf)
			eng_die("malloc");
		c->wcap = n;
	}
	stream_fill(c->wbuf, n, c->tx_seed, c->gen);
	hash_update(&c->tx_hash, c->wbuf, n);
	if (opt.corrupt_off >= 0 && !c->e.idx &&
	    (uint64_t)opt.corrupt_off >= c->gen &&
	    (uint64_t)opt.corrupt_off < c->gen + n)
		c->wbuf[opt.corrupt_off - c->gen] ^= 0x20;
	c->gen += n;
	c->wlen = n;
	c->wdone = 0;
	c->writes++;
	if (!c->wmin || n < c->wmin)
		c->wmin = n;
	if (n > c->wmax)
		c->wmax = n;
}

/* One send; 1 if it moved bytes, 0 if not now, -1 if the conn ended. */
static int conn_tx(struct rs_conn *c)
{
	ssize_t n;

	if (c->tx_shut)
		return 0;
	if (c->wdone == c->wlen) {
		if (c->gen == opt.bytes) {
			if (!shutdown_due(c))
				return 0;
			if (shutdown(c->e.fd, SHUT_WR)) {
				eng_fail(&c->e, errno, "shutdown");
				return -1;
			}
			c->tx_shut = true;
			return 1;
		}
		if (c->gen >= tx_limit())
			return 0;
		next_write(c);
	}
	n = send(c->e.fd, c->wbuf + c->wdone, c->wlen - c->wdone,
		 MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		eng_fail(&c->e, errno, "send");
		return -1;
	}
	c->wdone += n;
	c->tx += n;
	return n > 0;
}

/* One recv; 1 if it moved bytes or saw EOF, 0 if not now, -1 if ended. */
static int conn_rx(struct rs_conn *c)
{
	uint64_t left = rx_limit() - c->rx;
	size_t want = io_size(&c->rx_rng), bad;
	ssize_t n;

	if (c->rx_eof || !left)
		return 0;
	if (want > left)
		want = left;
	n = recv(c->e.fd, rxbuf, want, MSG_DONTWAIT);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		eng_fail(&c->e, errno, "recv");
		return -1;
	}
	c->reads++;
	if (!c->rmin || want < c->rmin)
		c->rmin = want;
	if (want > c->rmax)
		c->rmax = want;
	if (!n) {
		c->rx_eof = true;
		if (opt.expect_fail) {
			eng_fail(&c->e, 0, "eof");
			return -1;
		}
		return 1;
	}
	if (opt.bytes != RS_ENDLESS && c->rx + n > opt.bytes && c->rx_bad < 0)
		c->rx_bad = c->rx > opt.bytes ? c->rx : opt.bytes;
	if (c->rx_bad < 0) {
		stream_fill(expbuf, n, c->rx_seed, c->rx);
		if (memcmp(expbuf, rxbuf, n)) {
			for (bad = 0; bad < (size_t)n; bad++)
				if (expbuf[bad] != rxbuf[bad])
					break;
			c->rx_bad = c->rx + bad;
		}
	}
	hash_update(&c->rx_hash, rxbuf, n);
	c->rx += n;
	return 1;
}

/* Move what can be moved without blocking; finish, hold or wait. */
static void conn_step(struct rs_conn *c)
{
	int i, r, moved = 1;

	for (i = 0; i < RS_STEPS && moved && c->e.state == ENG_ACTIVE; i++) {
		moved = 0;
		r = conn_rx(c);
		if (r < 0)
			return;
		moved |= r;
		r = conn_tx(c);
		if (r < 0)
			return;
		moved |= r;
	}
	if (c->e.state != ENG_ACTIVE)
		return;
	if (c->tx_shut && c->rx_eof) {
		eng_finish(&c->e);
		return;
	}
	if (holding() && c->gen >= opt.hold_at && c->wdone == c->wlen &&
	    c->rx >= opt.hold_at) {
		c->e.state = ENG_HELD;
		eng_ep_set(&c->e, 0);
		return;
	}
	conn_update_events(c);
}

/* The engine's new connection: nothing moved, nothing known yet. */
static void conn_init(struct eng_conn *ec)
{
	struct rs_conn *c = (struct rs_conn *)ec;

	c->mode_start = -1;
	c->rx_bad = -1;
	hash_init(&c->tx_hash);
	hash_init(&c->rx_hash);
}

/* connect() or accept() completed: the connection is usable from here. */
static void conn_ready(struct eng_conn *ec)
{
	struct rs_conn *c = (struct rs_conn *)ec;
	struct smr_info info;
	uint64_t key;

	if (eng_opt.smr && !smr_get_info(c->e.fd, &info))
		c->mode_start = info.mode;
	/* both ends derive the same streams from the client's port */
	key = opt.seed * 0x100000001b3ULL + (eng_opt.server ? c->e.rport : c->e.lport);
	c->tx_seed = mix64(key ^ (eng_opt.server ? RS_S2C : RS_C2S));
	c->rx_seed = mix64(key ^ (eng_opt.server ? RS_C2S : RS_S2C));
	c->tx_rng = c->tx_seed ^ 0x7772697465ULL;	/* "write" */
	c->rx_rng = c->rx_seed ^ 0x72656164ULL;		/* "read" */
	conn_step(c);
}

static void conn_event(struct eng_conn *ec)
{
	conn_step((struct rs_conn *)ec);
}

static bool client_ready(void)
{
	uint64_t r = opt.bytes < RS_READY_BYTES ? opt.bytes : RS_READY_BYTES;
	int i;

	if (eng_nstarted < eng_opt.nconns)
		return false;
	for (i = 0; i < eng_nstarted; i++) {
		const struct rs_conn *c = (struct rs_conn *)eng_conn(i);

		if (c->e.state == ENG_HELD || c->e.state == ENG_DONE)
			continue;
		if (c->e.state != ENG_ACTIVE || c->tx < r || c->rx < r)
			return false;
	}
	return true;
}

/* Files that move the run on: trigger (-X), hold release (-H), ready (-R). */
/* -P: one line per RS_PROGRESS_MS, appended (the file is the bed's). */
static void progress_note(long long now)
{
	static long long last;
	FILE *f;

	if (!opt.progress_file || now - last < RS_PROGRESS_MS)
		return;
	last = now;
	f = fopen(opt.progress_file, "a");
	if (!f)
		return;
	fprintf(f, "progress t_ms=%lld started=%d done=%d ok=%d tx=%llu rx=%llu\n",
		now - eng_t_begin, eng_nstarted, eng_ndone, eng_nok,
		(unsigned long long)tx_total, (unsigned long long)rx_total);
	fclose(f);
}

static void check_files(void)
{
	static long long last;
	long long now = smr_now_ms();
	int i;

	/* -D: nothing was accepted yet, so nothing else needs the loop */
	while (opt.defer_file && !file_exists(opt.defer_file) &&
	       now < eng_deadline) {
		usleep(50000);
		now = smr_now_ms();
	}
	opt.defer_file = NULL;
	if (now - last < 50)
		return;
	last = now;
	progress_note(now);
	if (opt.trigger_file && !t_trigger && file_exists(opt.trigger_file)) {
		t_trigger = now;
		eng_deadline = t_trigger + opt.fail_window_s * 1000LL;
	}
	if (opt.hold_file && !released && file_exists(opt.hold_file)) {
		released = true;
		for (i = 0; i < eng_nstarted; i++) {
			struct rs_conn *c = (struct rs_conn *)eng_conn(i);

			if (c->e.state != ENG_HELD)
				continue;
			c->e.state = ENG_ACTIVE;
			conn_step(c);
		}
	}
	if (!eng_opt.server && eng_opt.ready_file && client_ready()) {
		eng_touch(eng_opt.ready_file);
		eng_opt.ready_file = NULL;
	}
}

static enum rs_expect parse_expect(const char *s)
{
	if (!strcmp(s, "rdma"))
		return EXPECT_RDMA;
	if (!strcmp(s, "tcp"))
		return EXPECT_TCP;
	if (!strcmp(s, "any"))
		return EXPECT_ANY;
	usage();
	return EXPECT_ANY;
}

/* Before connect() or bind(): -r's buffer sizes, a client's -A. */
static void sock_prepare(int fd, bool listener)
{
	struct sockaddr_storage ss;
	int len;

	if (opt.sockbuf &&
	    (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &opt.sockbuf, sizeof(opt.sockbuf)) ||
	     setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opt.sockbuf, sizeof(opt.sockbuf))))
		eng_die("setsockopt(SO_RCVBUF/SO_SNDBUF)");
	if (listener || !opt.src_addr)
		return;
	len = smr_fill_addr(&ss, eng_opt.v6, opt.src_addr, 0);
	if (len < 0)
		usage();
	if (bind(fd, (struct sockaddr *)&ss, len))
		eng_die("bind(-A)");
}

static const struct eng_tool rs_tool = {
	.name = "smr_stream",
	.conn_size = sizeof(struct rs_conn),
	.alarm_slack_s = 60,
	.tick_ms = 50,
	.usage = usage,
	.init = conn_init,
	.tick = check_files,
	.prepare = sock_prepare,
	.ready = conn_ready,
	.step = conn_event,
	.report = conn_report,
};

int main(int argc, char **argv)
{
	const char *env = getenv("SMR_EXPECT_MODE");
	bool hold_at_set = false;
	int c;

	eng_init(&rs_tool, argc, argv);
	eng_opt.port = 6000;
	eng_opt.timeout_s = 300;
	opt.expect = env && *env ? parse_expect(env) : EXPECT_RDMA;
	while ((c = getopt(argc, argv, "t:6a:p:n:s:S:m:M:FX:W:H:h:R:T:B:U:C:A:r:D:P:")) != -1) {
		switch (c) {
		case 's':
			opt.bytes = eng_parse_u64(optarg);
			if (!opt.bytes)
				opt.bytes = RS_ENDLESS;
			break;
		case 'S':
			opt.seed = eng_parse_u64(optarg);
			break;
		case 'm':
			opt.max_io = eng_parse_u64(optarg);
			break;
		case 'M':
			opt.expect = parse_expect(optarg);
			break;
		case 'F':
			opt.expect_fail = true;
			break;
		case 'X':
			opt.trigger_file = optarg;
			break;
		case 'W':
			opt.fail_window_s = eng_parse_u64(optarg);
			break;
		case 'H':
			opt.hold_file = optarg;
			break;
		case 'h':
			opt.hold_at = eng_parse_u64(optarg);
			hold_at_set = true;
			break;
		case 'C':
			opt.corrupt_off = eng_parse_u64(optarg);
			break;
		case 'A':
			opt.src_addr = optarg;
			break;
		case 'r':
			opt.sockbuf = eng_parse_u64(optarg);
			break;
		case 'D':
			opt.defer_file = optarg;
			break;
		case 'P':
			opt.progress_file = optarg;
			break;
		default:
			if (!eng_parse_opt(c, optarg))
				usage();
		}
	}
	if (!hold_at_set)
		opt.hold_at = opt.bytes;
	if (optind != argc || opt.max_io < 1 || opt.max_io > (1u << 30) ||
	    (opt.hold_file && (opt.hold_at > opt.bytes || opt.bytes == RS_ENDLESS)))
		usage();
	eng_setup();
	rxbuf = malloc(opt.max_io);
	expbuf = malloc(opt.max_io);
	if (!rxbuf || !expbuf)
		eng_die("setup");

	eng_run();

	eng_fail_unfinished(t_trigger ? "hang" : "deadline");
	printf("summary role=%s type=%s ip=%d conns=%d started=%d ok=%d failed=%d tx=%llu rx=%llu elapsed_ms=%lld trigger_ms=%lld\n",
	       eng_opt.server ? "server" : "client", eng_opt.smr ? "smr" : "tcp",
	       eng_opt.v6 ? 6 : 4, eng_opt.nconns, eng_nstarted, eng_nok,
	       eng_opt.nconns - eng_nok,
	       (unsigned long long)tx_total, (unsigned long long)rx_total,
	       smr_now_ms() - eng_t_begin, t_trigger ? t_trigger - eng_t_begin : -1LL);
	fflush(stdout);
	return eng_nok == eng_opt.nconns ? 0 : 1;
}
