// SPDX-License-Identifier: GPL-2.0
/*
 * vm-wire: the wire between two scripts/vm-run guests when it must behave
 * like a switch port rather than a pipe (SMR_VM_WIRE=switch).
 *
 *   vm-wire SOCKET_A SOCKET_B
 *
 * Connects to both guests' QEMU stream netdevs (unix sockets, server=on)
 * and forwards their frames (QEMU's stream framing: a 32-bit big-endian
 * length, then the frame) both ways. Each direction has its own reader and
 * writer and a bounded queue between them, as a switch has a buffer per
 * port: a receiver that does not take its frames (its guest is frozen)
 * fills its queue and then loses frames, while its sender goes on
 * unhindered. A plain stream wire would hold the sender's NIC back, which
 * no real wire does (and rxe cannot destroy a QP whose packets are stuck
 * in the send queue of a NIC that never drains).
 *
 * Exits when either side closes. Prints the frames dropped per direction
 * on exit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define WIRE_QUEUE_BYTES	(16u << 20)	/* per direction, as a port buffer */
#define WIRE_FRAME_MAX		65536u		/* QEMU never sends more */
#define WIRE_CONNECT_TRIES	300		/* 30 s for QEMU to listen */

struct wire_dir {
	const char *name;
	int from, to;
	pthread_mutex_t lock;
	pthread_cond_t more;
	uint8_t *ring;		/* frames with their length prefix */
	size_t head, tail;	/* byte counts: tail - head is queued */
	int eof;
	unsigned long dropped;
};

static int wire_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int i, fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "vm-wire: path too long: %s\n", path);
		exit(2);
	}
	strcpy(sa.sun_path, path);
	for (i = 0; i < WIRE_CONNECT_TRIES; i++) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			break;
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		close(fd);
		usleep(100000);
	}
	fprintf(stderr, "vm-wire: cannot connect to %s: %s\n", path,
		strerror(errno));
	exit(2);
}

/* All @n bytes read into @p (@out: written from it); -1 at EOF or error. */
static int io_full(int fd, uint8_t *p, size_t n, int out)
{
	while (n) {
		ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		n -= r;
	}
	return 0;
}

/* A frame's length, from its 32-bit big-endian prefix. */
static uint32_t frame_len(const uint8_t *frame)
{
	return (uint32_t)frame[0] << 24 | frame[1] << 16 | frame[2] << 8 |
	       frame[3];
}

/* Copy @n bytes in or out of the ring at byte count @pos (it wraps). */
static void ring_copy(struct wire_dir *d, size_t pos, uint8_t *buf, size_t n,
		      int out)
{
	size_t off = pos % WIRE_QUEUE_BYTES, first = WIRE_QUEUE_BYTES - off;

	if (first > n)
		first = n;
	if (out) {
		memcpy(buf, d->ring + off, first);
		memcpy(buf + first, d->ring, n - first);
	} else {
		memcpy(d->ring + off, buf, first);
		memcpy(d->ring, buf + first, n - first);
	}
}

static void *wire_reader(void *arg)
{
	struct wire_dir *d = arg;
	uint8_t frame[4 + WIRE_FRAME_MAX];

	for (;;) {
		uint32_t len;
		size_t n;

		if (io_full(d->from, frame, 4, 0))
			break;
		len = frame_len(frame);
		if (len > WIRE_FRAME_MAX || io_full(d->from, frame + 4, len, 0))
			break;
		n = 4 + len;
		pthread_mutex_lock(&d->lock);
		if (d->tail - d->head + n > WIRE_QUEUE_BYTES) {
			d->dropped++;	/* the port's buffer is full: tail drop */
		} else {
			ring_copy(d, d->tail, frame, n, 0);
			d->tail += n;
			pthread_cond_signal(&d->more);
		}
		pthread_mutex_unlock(&d->lock);
	}
	pthread_mutex_lock(&d->lock);
	d->eof = 1;
	pthread_cond_signal(&d->more);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static void *wire_writer(void *arg)
{
	struct wire_dir *d = arg;
	uint8_t frame[4 + WIRE_FRAME_MAX];

	for (;;) {
		size_t n;

		pthread_mutex_lock(&d->lock);
		while (d->head == d->tail && !d->eof)
			pthread_cond_wait(&d->more, &d->lock);
		if (d->head == d->tail) {
			pthread_mutex_unlock(&d->lock);
			break;
		}
		ring_copy(d, d->head, frame, 4, 1);
		n = 4 + frame_len(frame);
		ring_copy(d, d->head, frame, n, 1);
		d->head += n;
		pthread_mutex_unlock(&d->lock);
		/* may block while the receiver's guest is frozen: frames queue */
		if (io_full(d->to, frame, n, 1))
			break;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct wire_dir dir[2] = {
		{ .name = "a->b" }, { .name = "b->a" },
	};
	pthread_t th[4];
	int a, b, i;

	if (argc != 3) {
		fprintf(stderr, "usage: vm-wire SOCKET_A SOCKET_B\n");
		return 2;
	}
	a = wire_connect(argv[1]);
	b = wire_connect(argv[2]);
	dir[0].from = a;
	dir[0].to = b;
	dir[1].from = b;
	dir[1].to = a;
	for (i = 0; i < 2; i++) {
		pthread_mutex_init(&dir[i].lock, NULL);
		pthread_cond_init(&dir[i].more, NULL);
		dir[i].ring = malloc(WIRE_QUEUE_BYTES);
		if (!dir[i].ring) {
			perror("vm-wire");
			return 2;
		}
		pthread_create(&th[2 * i], NULL, wire_reader, &dir[i]);
		pthread_create(&th[2 * i + 1], NULL, wire_writer, &dir[i]);
	}
	/* the first side to go ends the wire */
	pthread_join(th[0], NULL);
	for (i = 0; i < 2; i++)
		fprintf(stderr, "vm-wire: %s: %lu frames dropped\n",
			dir[i].name, dir[i].dropped);
	return 0;
}
