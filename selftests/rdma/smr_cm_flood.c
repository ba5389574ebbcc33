// SPDX-License-Identifier: GPL-2.0
/*
 * smr_cm_flood: a hostile rdma_cm client for the attack suite
 * (selftests/rdma/suite_attack.sh). Run by any user (the rdma_cm device
 * node is world-writable), it opens as many rdma_cm connections as it can
 * to a host's SMR link listener and keeps those that are accepted open, as
 * the client of issue 10 did:
 *
 *   smr_cm_flood -a ADDR [-p PORT] [-m none|v2|v3] [-n COUNT] [-T SECONDS]
 *                [-w WINDOW] [-H SECONDS] [-X FILE] [-R FILE] [-Q]
 *
 *   -a ADDR     the listener's host (IPv4 or IPv6)
 *   -p PORT     its rdma_cm port (default 7609, SMR's cm_port)
 *   -m MODE     the private data of each request:
 *                 none  none at all
 *                 v2    SMR's link private data version 2 (16 bytes: magic,
 *                       version, credits, a random link id), what every
 *                       SMR host accepted before links were authenticated
 *                 v3    version 3 with a random (forged) 128-bit secret
 *   -n COUNT    connection attempts (default 2000)
 *   -T SECONDS  stop starting new attempts after this long (default 15;
 *               the flood's length, not a deadline: never time-scaled)
 *   -w WINDOW   attempts under way at once (default 32)
 *   -R FILE     created once every attempt has ended (the flood's state
 *               is then what stays)
 *   -H SECONDS  then hold the accepted connections this long (default 0)
 *   -X FILE     ... or until FILE appears, whichever comes first
 *   -Q          no QPs: connect with a made-up QP number (by default each
 *               connection has a real RC QP, so that a link the listener
 *               built stays up: its keepalive is answered)
 *
 * Output: one line "summary mode=M attempts=N accepted=N rejected=N
 * errors=N unfinished=N disconnected=N qp=0|1 elapsed_ms=N" when every
 * attempt has ended (accepted: the listener answered with an accept;
 * rejected: with a reject; errors: address, route or connect errors,
 * unreachable; unfinished: still under way after the grace period, 10 s
 * times $SMR_TEST_TIME_SCALE: the test bed's patience), then
 * "held ... disconnected=N" after the hold. Exit status 0, or 2 if the
 * tool itself could not run (usage, no rdma_cm).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "smr_test_lib.h"

#define FLOOD_PORT_DEFAULT	7609
#define FLOOD_COUNT_DEFAULT	2000
#define FLOOD_SECONDS_DEFAULT	15
#define FLOOD_WINDOW_DEFAULT	32
#define FLOOD_RESOLVE_MS	2000
#define FLOOD_GRACE_MS		10000	/* attempts under way may end this late */
#define FLOOD_POLL_MS		100
#define FLOOD_CREDITS		128

/* SMR's link private data, as protocol.rst describes it */
#define SMR_CM_MAGIC		0x534d524cu
#define SMR_CM_V2_LEN		16
#define SMR_CM_V3_LEN		32

enum flood_mode { MODE_NONE, MODE_V2, MODE_V3 };
enum conn_state { ST_FREE, ST_RESOLVING, ST_CONNECTING, ST_OPEN, ST_DONE };

struct conn {
	struct rdma_cm_id	*id;
	enum conn_state		state;
};

static struct {
	const char		*addr;
	unsigned int		port;
	enum flood_mode		mode;
	unsigned int		count;
	unsigned int		seconds;
	unsigned int		window;
	unsigned int		hold;
	const char		*hold_file;
	const char		*ready_file;
	int			use_qp;
} opt = {
	.port = FLOOD_PORT_DEFAULT,
	.mode = MODE_V2,
	.count = FLOOD_COUNT_DEFAULT,
	.seconds = FLOOD_SECONDS_DEFAULT,
	.window = FLOOD_WINDOW_DEFAULT,
	.use_qp = 1,
};

static struct {
	unsigned int	attempts, accepted, rejected, errors, disconnected;
	unsigned int	under_way;
} st;

static struct sockaddr_storage dst;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_context *pd_ctx;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t rnd32(void)
{
	return (uint32_t)random() << 16 ^ (uint32_t)random();
}

/* The private data of MODE into @buf; its length. */
static uint8_t build_priv(uint8_t *buf)
{
	int i;

	if (opt.mode == MODE_NONE)
		return 0;
	memset(buf, 0, SMR_CM_V3_LEN);
	put_be32(buf, SMR_CM_MAGIC);
	buf[4] = opt.mode == MODE_V2 ? 2 : 3;
	put_be16(buf + 6, FLOOD_CREDITS);
	put_be32(buf + 8, rnd32() | 1);
	if (opt.mode == MODE_V2)
		return SMR_CM_V2_LEN;
	for (i = 16; i < SMR_CM_V3_LEN; i++)
		buf[i] = rnd32();
	buf[16] |= 1;	/* never all zero */
	return SMR_CM_V3_LEN;
}

static int resolve_dst(void)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *res;
	char port[16];
	int err;

	snprintf(port, sizeof(port), "%u", opt.port);
	err = getaddrinfo(opt.addr, port, &hints, &res);
	if (err) {
		fprintf(stderr, "smr_cm_flood: %s: %s\n", opt.addr, gai_strerror(err));
		return -1;
	}
	memcpy(&dst, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

static void conn_end(struct conn *c)
{
	if (c->id) {
		if (c->id->qp)
			rdma_destroy_qp(c->id);
		rdma_destroy_id(c->id);
	}
	c->id = NULL;
	if (c->state == ST_RESOLVING || c->state == ST_CONNECTING)
		st.under_way--;
	c->state = ST_DONE;
}

static int launch(struct rdma_event_channel *ch, struct conn *c)
{
	st.attempts++;
	if (rdma_create_id(ch, &c->id, c, RDMA_PS_TCP)) {
		st.errors++;
		c->id = NULL;
		c->state = ST_DONE;
		return -1;
	}
	c->state = ST_RESOLVING;
	st.under_way++;
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst,
			      FLOOD_RESOLVE_MS)) {
		st.errors++;
		conn_end(c);
		return -1;
	}
	return 0;
}

/* A QP of its own (tiny), on one PD and CQ for all; -1 if verbs refuse. */
static int make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr attr = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	if (!pd) {
		pd_ctx = id->verbs;
		pd = ibv_alloc_pd(id->verbs);
		if (!pd)
			return -1;
		cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
		if (!cq)
			return -1;
	}
	if (id->verbs != pd_ctx)
		return -1;
	attr.send_cq = cq;
	attr.recv_cq = cq;
	return rdma_create_qp(id, pd, &attr);
}

static void connect_one(struct conn *c)
{
	struct rdma_conn_param param = {
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 1,
		.rnr_retry_count = 1,
	};
	uint8_t priv[SMR_CM_V3_LEN];

	if (opt.use_qp && make_qp(c->id)) {
		fprintf(stderr, "smr_cm_flood: no QP (%s): going on without (-Q)\n",
			strerror(errno));
		opt.use_qp = 0;
	}
	if (!opt.use_qp)
		param.qp_num = rnd32() & 0xffffff;
	param.private_data_len = build_priv(priv);
	param.private_data = param.private_data_len ? priv : NULL;
	c->state = ST_CONNECTING;
	if (rdma_connect(c->id, &param)) {
		st.errors++;
		conn_end(c);
	}
}

static void accepted(struct conn *c)
{
	st.accepted++;
	st.under_way--;
	c->state = ST_OPEN;
}

static void handle(struct rdma_cm_event *ev)
{
	struct conn *c = ev->id->context;
	enum rdma_cm_event_type type = ev->event;
	int status = ev->status;

	rdma_ack_cm_event(ev);
	if (!c || c->state == ST_DONE)
		return;
	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(c->id, FLOOD_RESOLVE_MS)) {
			st.errors++;
			conn_end(c);
		}
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		connect_one(c);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (c->state == ST_CONNECTING)
			accepted(c);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		/* no QP of ours: the listener accepted; finish the handshake */
		if (c->state == ST_CONNECTING) {
			accepted(c);
			rdma_establish(c->id);
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
		st.rejected++;
		conn_end(c);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (c->state == ST_OPEN) {
			st.disconnected++;
			conn_end(c);
		}
		break;
	default:
		(void)status;
		st.errors++;
		conn_end(c);
		break;
	}
}

/* Wait up to @ms for events and handle them. */
static void pump(struct rdma_event_channel *ch, int ms)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&pfd, 1, ms) <= 0)
		return;
	while (poll(&pfd, 1, 0) > 0 && !rdma_get_cm_event(ch, &ev))
		handle(ev);
}

static int usage(void)
{
	fprintf(stderr, "usage: smr_cm_flood -a ADDR [-p PORT] [-m none|v2|v3] [-n COUNT] [-T SECONDS] [-w WINDOW] [-R FILE] [-H SECONDS] [-X FILE] [-Q]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct conn *conns;
	unsigned int next = 0, i, open = 0;
	long t0, stop, grace_end, hold_end;
	int o;

	while ((o = getopt(argc, argv, "a:p:m:n:T:w:R:H:X:Q")) != -1) {
		switch (o) {
		case 'a': opt.addr = optarg; break;
		case 'p': opt.port = strtoul(optarg, NULL, 0); break;
		case 'm':
			if (!strcmp(optarg, "none"))
				opt.mode = MODE_NONE;
			else if (!strcmp(optarg, "v2"))
				opt.mode = MODE_V2;
			else if (!strcmp(optarg, "v3"))
				opt.mode = MODE_V3;
			else
				return usage();
			break;
		case 'n': opt.count = strtoul(optarg, NULL, 0); break;
		case 'T': opt.seconds = strtoul(optarg, NULL, 0); break;
		case 'w': opt.window = strtoul(optarg, NULL, 0); break;
		case 'R': opt.ready_file = optarg; break;
		case 'H': opt.hold = strtoul(optarg, NULL, 0); break;
		case 'X': opt.hold_file = optarg; break;
		case 'Q': opt.use_qp = 0; break;
		default: return usage();
		}
	}
	if (!opt.addr || !opt.count || !opt.window || resolve_dst())
		return usage();
	srandom(getpid() ^ (unsigned int)now_ms());
	conns = calloc(opt.count, sizeof(*conns));
	ch = rdma_create_event_channel();
	if (!conns || !ch) {
		fprintf(stderr, "smr_cm_flood: rdma_create_event_channel: %s\n",
			strerror(errno));
		return 2;
	}

	t0 = now_ms();
	stop = t0 + opt.seconds * 1000L;
	while (next < opt.count && now_ms() < stop) {
		while (st.under_way < opt.window && next < opt.count)
			launch(ch, &conns[next++]);
		pump(ch, FLOOD_POLL_MS);
	}
	grace_end = now_ms() + FLOOD_GRACE_MS * smr_time_scale();
	while (st.under_way && now_ms() < grace_end)
		pump(ch, FLOOD_POLL_MS);
	for (i = 0; i < next; i++)
		open += conns[i].state == ST_OPEN;
	printf("summary mode=%s attempts=%u accepted=%u rejected=%u errors=%u unfinished=%u disconnected=%u open=%u qp=%d elapsed_ms=%ld\n",
	       opt.mode == MODE_NONE ? "none" : opt.mode == MODE_V2 ? "v2" : "v3",
	       st.attempts, st.accepted, st.rejected, st.errors, st.under_way,
	       st.disconnected, open, opt.use_qp, now_ms() - t0);
	fflush(stdout);
	if (opt.ready_file) {
		FILE *f = fopen(opt.ready_file, "w");

		if (f)
			fclose(f);
	}

	hold_end = now_ms() + opt.hold * 1000L;
	while (now_ms() < hold_end) {
		struct stat sb;

		if (opt.hold_file && !stat(opt.hold_file, &sb))
			break;
		pump(ch, FLOOD_POLL_MS);
	}
	open = 0;
	for (i = 0; i < next; i++)
		open += conns[i].state == ST_OPEN;
	printf("held open=%u disconnected=%u\n", open, st.disconnected);
	for (i = 0; i < next; i++)
		if (conns[i].state != ST_DONE && conns[i].state != ST_FREE)
			conn_end(&conns[i]);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	rdma_destroy_event_channel(ch);
	free(conns);
	return 0;
}
