// SPDX-License-Identifier: GPL-2.0
/*
 * negot_echo_mb: an "echoing middlebox" for SMR's negotiation tests.
 *
 * Sits on an NFQUEUE. Incoming SYNs to PORT are read (not changed): the
 * SMR option they carry (kind 254, ExID "SMR1") is remembered per client
 * address and port. Outgoing SYN-ACKs from PORT to such a client get those
 * 12 option bytes appended verbatim (role 1, the client's own nonce), with
 * the TCP data offset, IP lengths and both checksums fixed, as a broken
 * middlebox or peer that reflects unknown options would send them. Every
 * other packet is accepted unchanged.
 *
 *   negot_echo_mb -q QUEUE -p PORT [-R READY_FILE]
 *
 * Runs until killed. One line per echoed SYN-ACK on stdout:
 *   echoed client=ADDR:PORT option=<24 hex digits>
 * and "skipped ..." lines for SYN-ACKs it could not change.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/netfilter.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#define EMB_OPT_KIND	254
#define EMB_OPT_LEN	12
#define EMB_EXID	"\x53\x4d\x52\x31"	/* "SMR1" */
#define EMB_SLOTS	256
#define EMB_MAX_PKT	(60 + 60 + 40)	/* IP + TCP headers, no payload */

/* The offer a client's SYN carried, by client address and port. */
struct emb_slot {
	bool used;
	uint8_t addr[16];	/* IPv4 in the first 4 bytes */
	uint16_t port;
	uint8_t opt[EMB_OPT_LEN];
};

static struct emb_slot slots[EMB_SLOTS];
static unsigned int slot_next;
static uint16_t listen_port;

/* The packet's IP and TCP headers, located. */
struct emb_pkt {
	uint8_t *ip;
	int version;		/* 4 or 6 */
	unsigned int iphl;	/* IP header length */
	uint8_t *tcp;
	unsigned int thl;	/* TCP header length */
	unsigned int len;	/* whole packet */
};

static bool emb_parse(uint8_t *data, unsigned int len, struct emb_pkt *p)
{
	p->ip = data;
	p->len = len;
	if (len < 20)
		return false;
	p->version = data[0] >> 4;
	if (p->version == 4) {
		p->iphl = (data[0] & 0xf) * 4;
		if (data[9] != IPPROTO_TCP || p->iphl < 20)
			return false;
	} else if (p->version == 6) {
		p->iphl = 40;
		if (len < 40 || data[6] != IPPROTO_TCP)
			return false;	/* extension headers: not ours */
	} else {
		return false;
	}
	if (len < p->iphl + 20)
		return false;
	p->tcp = data + p->iphl;
	p->thl = (p->tcp[12] >> 4) * 4;
	return p->thl >= 20 && p->iphl + p->thl <= len;
}

static void emb_addr(const struct emb_pkt *p, bool src, uint8_t out[16])
{
	memset(out, 0, 16);
	if (p->version == 4)
		memcpy(out, p->ip + (src ? 12 : 16), 4);
	else
		memcpy(out, p->ip + (src ? 8 : 24), 16);
}

static uint16_t emb_port(const struct emb_pkt *p, bool src)
{
	return (uint16_t)(p->tcp[src ? 0 : 2] << 8 | p->tcp[src ? 1 : 3]);
}

static struct emb_slot *emb_find(const uint8_t addr[16], uint16_t port)
{
	for (unsigned int i = 0; i < EMB_SLOTS; i++)
		if (slots[i].used && slots[i].port == port &&
		    !memcmp(slots[i].addr, addr, 16))
			return &slots[i];
	return NULL;
}

/* Ones' complement sum over @len bytes, big-endian 16-bit words. */
static uint32_t emb_sum(uint32_t sum, const uint8_t *b, unsigned int len)
{
	for (; len > 1; b += 2, len -= 2)
		sum += (uint32_t)b[0] << 8 | b[1];
	if (len)
		sum += (uint32_t)b[0] << 8;
	return sum;
}

static uint16_t emb_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void emb_put16(uint8_t *b, uint16_t v)
{
	b[0] = v >> 8;
	b[1] = v & 0xff;
}

/* Recompute the IPv4 header and TCP checksums from scratch. */
static void emb_fix_checksums(struct emb_pkt *p)
{
	unsigned int tcplen = p->len - p->iphl;
	uint8_t pseudo[40];
	uint32_t sum;

	if (p->version == 4) {
		emb_put16(p->ip + 10, 0);
		emb_put16(p->ip + 10, emb_fold(emb_sum(0, p->ip, p->iphl)));
		memcpy(pseudo, p->ip + 12, 8);
		pseudo[8] = 0;
		pseudo[9] = IPPROTO_TCP;
		emb_put16(pseudo + 10, tcplen);
		sum = emb_sum(0, pseudo, 12);
	} else {
		memcpy(pseudo, p->ip + 8, 32);
		pseudo[32] = tcplen >> 24;
		pseudo[33] = tcplen >> 16;
		pseudo[34] = tcplen >> 8;
		pseudo[35] = tcplen;
		pseudo[36] = pseudo[37] = pseudo[38] = 0;
		pseudo[39] = IPPROTO_TCP;
		sum = emb_sum(0, pseudo, 40);
	}
	emb_put16(p->tcp + 16, 0);
	emb_put16(p->tcp + 16, emb_fold(emb_sum(sum, p->tcp, tcplen)));
}

static void emb_print_client(const char *what, const struct emb_pkt *p,
			     const uint8_t addr[16], uint16_t port)
{
	char a[INET6_ADDRSTRLEN];

	inet_ntop(p->version == 4 ? AF_INET : AF_INET6, addr, a, sizeof(a));
	printf("%s client=%s%s%s:%u", what, p->version == 6 ? "[" : "", a,
	       p->version == 6 ? "]" : "", port);
}

/* A SYN to the port: remember its SMR offer. */
static void emb_saw_syn(struct emb_pkt *p)
{
	const uint8_t *o = p->tcp + 20;
	unsigned int i = 0, olen = p->thl - 20;

	while (i < olen) {
		if (o[i] == 0)
			break;
		if (o[i] == 1) {
			i++;
			continue;
		}
		if (i + 1 >= olen || o[i + 1] < 2 || i + o[i + 1] > olen)
			break;
		if (o[i] == EMB_OPT_KIND && o[i + 1] == EMB_OPT_LEN &&
		    !memcmp(o + i + 2, EMB_EXID, 4)) {
			struct emb_slot *s;
			uint8_t addr[16];
			uint16_t port = emb_port(p, true);

			emb_addr(p, true, addr);
			s = emb_find(addr, port);
			if (!s) {
				s = &slots[slot_next++ % EMB_SLOTS];
				s->used = true;
				memcpy(s->addr, addr, 16);
				s->port = port;
			}
			memcpy(s->opt, o + i, EMB_OPT_LEN);
			return;
		}
		i += o[i + 1];
	}
}

/* Our SYN-ACK: append the client's own offer. Returns the new length, or 0. */
static unsigned int emb_echo(struct emb_pkt *p, uint8_t *out)
{
	struct emb_slot *s;
	uint8_t addr[16];
	uint16_t port = emb_port(p, false);
	unsigned int hdrs = p->iphl + p->thl;
	struct emb_pkt q;

	emb_addr(p, false, addr);
	s = emb_find(addr, port);
	if (!s)
		return 0;
	if (p->thl + EMB_OPT_LEN > 60 || p->len != hdrs ||
	    p->len + EMB_OPT_LEN > EMB_MAX_PKT) {
		emb_print_client("skipped", p, addr, port);
		printf(" reason=%s\n", p->len != hdrs ? "payload" : "no-room");
		return 0;
	}
	memcpy(out, p->ip, hdrs);
	memcpy(out + hdrs, s->opt, EMB_OPT_LEN);
	q = *p;
	q.ip = out;
	q.tcp = out + p->iphl;
	q.thl = p->thl + EMB_OPT_LEN;
	q.len = p->len + EMB_OPT_LEN;
	q.tcp[12] = (uint8_t)((q.thl / 4) << 4 | (q.tcp[12] & 0x0f));
	if (q.version == 4)
		emb_put16(q.ip + 2, q.len);
	else
		emb_put16(q.ip + 4, q.len - 40);
	emb_fix_checksums(&q);

	emb_print_client("echoed", p, addr, port);
	printf(" option=");
	for (int i = 0; i < EMB_OPT_LEN; i++)
		printf("%02x", s->opt[i]);
	printf("\n");
	fflush(stdout);
	return q.len;
}

static int emb_cb(struct nfq_q_handle *qh,
		  struct nfgenmsg *nfmsg __attribute__((unused)),
		  struct nfq_data *nfa, void *data __attribute__((unused)))
{
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	uint8_t out[EMB_MAX_PKT];
	unsigned char *pkt;
	struct emb_pkt p;
	uint32_t id;
	int len;

	if (!ph)
		return -1;
	id = ntohl(ph->packet_id);
	len = nfq_get_payload(nfa, &pkt);
	if (len > 0 && emb_parse(pkt, len, &p)) {
		uint8_t flags = p.tcp[13];
		bool syn = flags & 0x02, ack = flags & 0x10;

		if (syn && !ack && emb_port(&p, false) == listen_port) {
			emb_saw_syn(&p);
		} else if (syn && ack && emb_port(&p, true) == listen_port) {
			unsigned int nlen = emb_echo(&p, out);

			if (nlen)
				return nfq_set_verdict(qh, id, NF_ACCEPT, nlen, out);
		}
	}
	return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
}

int main(int argc, char **argv)
{
	const char *ready = NULL;
	struct nfq_q_handle *qh;
	struct nfq_handle *h;
	static char buf[65536];
	int qnum = -1, c, fd, n;

	while ((c = getopt(argc, argv, "q:p:R:")) != -1) {
		switch (c) {
		case 'q':
			qnum = atoi(optarg);
			break;
		case 'p':
			listen_port = (uint16_t)atoi(optarg);
			break;
		case 'R':
			ready = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (qnum < 0 || !listen_port || optind != argc)
		goto usage;

	h = nfq_open();
	if (!h) {
		perror("negot_echo_mb: nfq_open");
		return 1;
	}
	qh = nfq_create_queue(h, qnum, emb_cb, NULL);
	if (!qh) {
		perror("negot_echo_mb: nfq_create_queue");
		return 1;
	}
	if (nfq_set_mode(qh, NFQNL_COPY_PACKET, 0xffff) < 0) {
		perror("negot_echo_mb: nfq_set_mode");
		return 1;
	}
	if (ready) {
		FILE *f = fopen(ready, "w");

		if (f)
			fclose(f);
	}
	printf("listening queue=%d port=%u\n", qnum, listen_port);
	fflush(stdout);
	fd = nfq_fd(h);
	for (;;) {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR || errno == ENOBUFS)
				continue;
			perror("negot_echo_mb: recv");
			return 1;
		}
		nfq_handle_packet(h, buf, n);
	}
usage:
	fprintf(stderr, "usage: negot_echo_mb -q QUEUE -p PORT [-R READY_FILE]\n");
	return 2;
}
