/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The connection engine of SMR's traffic tools (selftests/rdma/smr_stream.c,
 * selftests/negot/negot_probe.c): one epoll loop that makes -n connections
 * (all at once, non-blocking, their connect() completed by epoll; or one at
 * a time, blocking) or accepts them from one or more listeners, drives them
 * until each has ended or the deadline has passed, and has each reported
 * once and closed. Both families: AF_SMR (the family the loaded module
 * registered) or TCP, IPv4 or IPv6.
 *
 * What a connection moves, checks and prints is the tool's: it embeds
 * struct eng_conn first in its own connection struct and hooks in through
 * struct eng_tool. The options every tool shares are parsed here
 * (eng_parse_opt); which of them a tool offers is its getopt string.
 *
 * The deadline (-T) and the last-word alarm after it are the test bed's
 * patience, so both are multiplied by SMR_TEST_TIME_SCALE (smr_time_scale(),
 * smr_test_lib.h); a tool's own limits that check a kernel bound are not.
 *
 * Locking and lifetimes: single-threaded. Everything runs from eng_run()'s
 * loop or before it; a connection lives in the engine's table from connect()
 * or accept() to the end of the process, its socket until eng_finish().
 */
#ifndef SMR_ENGINE_H
#define SMR_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENG_MAX_LISTENERS	8

enum eng_kind { ENG_CONN, ENG_LISTENER };
enum eng_state { ENG_CONNECTING, ENG_ACTIVE, ENG_HELD, ENG_DONE };

struct eng_conn {
	enum eng_kind kind;	/* ENG_CONN; first, as in struct eng_listener */
	int fd;
	int idx;
	int lst;		/* server: the listener that accepted it, -1 */
	enum eng_state state;
	int err;		/* errno that ended it, 0 if none */
	const char *err_at;	/* where: connect, send, recv, deadline, ... */
	long long t_start;	/* connect() or accept() */
	bool connect_called;
	int connect_ret;	/* client: what connect() itself returned */
	unsigned int lport, rport;
	uint32_t events;	/* registered with epoll, 0 if not */
};

/* What a tool does with its connections; the optional hooks may be NULL. */
struct eng_tool {
	const char *name;	/* in messages */
	size_t conn_size;	/* the tool's struct, struct eng_conn first */
	int alarm_slack_s;	/* SIGALRM this long after -T: the last word */
	int tick_ms;		/* the longest epoll wait */
	void (*usage)(void);	/* prints the usage, exits 2 */
	void (*init)(struct eng_conn *c);	/* a new connection's fields */
	void (*tick)(void);			/* optional: every loop turn */
	void (*prepare)(int fd, bool listener);	/* optional: before connect()/bind() */
	void (*connecting)(struct eng_conn *c);	/* optional: connect() in flight */
	void (*ready)(struct eng_conn *c);	/* usable: connect()/accept() done */
	void (*step)(struct eng_conn *c);	/* an epoll event on an active one */
	bool (*report)(struct eng_conn *c);	/* its line, socket still open; ok? */
};

/* The options every tool shares (eng_parse_opt's letters in brackets). */
struct eng_opts {
	bool server;		/* argv[1]: server or client */
	bool smr;		/* [-t smr|tcp] AF_SMR (default) or TCP */
	bool v6;		/* [-6] */
	bool blocking;		/* [-b] blocking, one connection at a time */
	const char *addr;	/* [-a] client: the server; server: bind address */
	int port;		/* [-p] */
	int nconns;		/* [-n] */
	int backlog;		/* [-B] server: listen() backlog */
	int nlisteners;		/* [-L] server: listeners with SO_REUSEPORT */
	const char *ready_file;	/* [-R] server: created once listening */
	int timeout_s;		/* [-T] the deadline, before the time scale */
	long run_as_uid;	/* [-U] server: drop to it once listening; -1 */
};

extern struct eng_opts eng_opt;
extern long long eng_t_begin, eng_deadline;
extern int eng_nstarted, eng_ndone, eng_nok;
extern unsigned int eng_spurious_wakeups;

/* argv[1] (server|client) and the defaults; before parsing options. */
void eng_init(const struct eng_tool *tool, int argc, char **argv);
/* One of the shared options: true if @c was one (@arg checked). */
bool eng_parse_opt(int c, const char *arg);
uint64_t eng_parse_u64(const char *s);
/* The family, limits, table and epoll set, after parsing. */
void eng_setup(void);
/* Connect or accept every connection; returns when all ended or at the deadline. */
void eng_run(void);
/* Ends what is still open with ETIMEDOUT at @where. */
void eng_fail_unfinished(const char *where);

struct eng_conn *eng_conn(int idx);
void eng_ep_set(struct eng_conn *c, uint32_t events);
/* Report, close and count the connection (once). */
void eng_finish(struct eng_conn *c);
void eng_fail(struct eng_conn *c, int err, const char *where);
void eng_touch(const char *path);
void eng_die(const char *what) __attribute__((noreturn));

#endif /* SMR_ENGINE_H */
