#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Host B's side of selftests/negotiation_test.sh (runs in a scripts/vm-run
# guest; host A's negot_a.sh drives it).
#
#   negot_b.sh service    the control service: a plain TCP listener on
#                         NEGOT_CTL_PORT (socat) that runs "negot_b.sh
#                         handle" for each request; runs until stopped
#   negot_b.sh handle     one request: a line "VERB ARGS..." on stdin,
#                         the answer on stdout
#
# Verbs (functions b_VERB below): ping, serve NAME ARGS..., result NAME
# SECONDS, stats, sysctl KEY=VALUE, strip_answer PORT, drop_hs PORT,
# echo_start PORT, echo_stop, nft_list, nft_flush, rxe_del, rxe_add,
# sysrq_w. Servers and the middlebox run detached, their output in $work;
# the service only starts, stops and reports them.
set -uo pipefail

# shellcheck source=selftests/negot/negot_lib.sh
. "$SMR_REPO/selftests/negot/negot_lib.sh"

work=/tmp/negot-b

# start_detached NAME CMD...: run CMD in its own session (so that the
# request's connection closes and the group can be killed), output in
# $work/NAME.out and .err, exit status in $work/NAME.rc once it ends.
start_detached() {
	local w=$work/$1
	shift
	rm -f "$w".*
	# shellcheck disable=SC2016
	setsid -f bash -c 'w=$1; shift; echo $$ >"$w.pid"
		"$@" >"$w.out" 2>"$w.err"; echo $? >"$w.rc"' _ "$w" "$@" \
		</dev/null >/dev/null 2>&1
}

stop_detached() {
	local w=$work/$1 pid
	pid=$(cat "$w.pid" 2>/dev/null) || return 0
	kill -TERM -- "-$pid" 2>/dev/null
	for _ in $(seq 20); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL -- "-$pid" 2>/dev/null
	return 0
}

# wait_file FILE SECONDS [RC_FILE]: until FILE exists (or RC_FILE does:
# the process ended early).
wait_file() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		[ -e "$1" ] && return 0
		[ -n "${3:-}" ] && [ -e "$3" ] && return 1
		sleep 0.1
	done
	return 1
}

b_ping() {
	echo pong
}

# serve NAME ARGS...: negot_probe server ARGS, answers "ok" once listening.
b_serve() {
	local name=$1
	shift
	start_detached "$name" "$NEGOT_BIN/negot_probe" server "$@" \
		-R "$work/$name.ready"
	if wait_file "$work/$name.ready" 20 "$work/$name.rc"; then
		echo ok
	else
		echo "fail: server $name did not start listening"
		cat "$work/$name.err" 2>/dev/null
	fi
}

# result NAME SECONDS: wait for server NAME to end (killed after SECONDS),
# then its output and "rc=STATUS".
b_result() {
	local name=$1 secs=${2:-60} rc
	if ! wait_file "$work/$name.rc" "$secs"; then
		stop_detached "$name"
		sleep 0.2
		echo "rc=killed after ${secs}s"
	fi
	cat "$work/$name.out" 2>/dev/null
	sed 's/^/stderr: /' "$work/$name.err" 2>/dev/null
	rc=$(cat "$work/$name.rc" 2>/dev/null) || rc=none
	echo "rc=$rc"
}

b_stats() {
	cat /proc/net/smr/stats
}

b_sysctl() {
	local key=${1%%=*}
	sysctl -qw "$1" && echo "$key = $(sysctl -n "$key")"
}

# strip_answer PORT: SYN-ACKs from PORT leave without their kind-254
# option (nftables overwrites it with NOPs, after SMR's output hook).
b_strip_answer() {
	nft -f - <<-EOF && echo ok
	table inet negot_strip {
		chain out {
			type filter hook output priority filter; policy accept;
			tcp sport $1 tcp flags & (syn | ack) == syn | ack reset tcp option 254 counter
		}
	}
	EOF
}

# drop_hs PORT: segments to PORT whose payload starts with the handshake
# magic ("SMRH") never arrive: the server never sees a PROPOSAL.
b_drop_hs() {
	nft -f - <<-EOF && echo ok
	table inet negot_drop {
		chain in {
			type filter hook input priority filter; policy accept;
			tcp dport $1 @ih,0,32 0x534d5248 counter drop
		}
	}
	EOF
}

# echo_start PORT: SYN-ACKs from PORT echo the SYN's SMR option verbatim.
b_echo_start() {
	local port=$1
	start_detached echo_mb "$NEGOT_BIN/negot_echo_mb" -q "$NEGOT_ECHO_QUEUE" \
		-p "$port" -R "$work/echo_mb.ready"
	if ! wait_file "$work/echo_mb.ready" 20 "$work/echo_mb.rc"; then
		echo "fail: negot_echo_mb did not start"
		cat "$work/echo_mb.err" 2>/dev/null
		return
	fi
	nft -f - <<-EOF && echo ok
	table inet negot_echo {
		chain in {
			type filter hook input priority filter; policy accept;
			tcp dport $port tcp flags & (syn | ack) == syn counter queue num $NEGOT_ECHO_QUEUE bypass
		}
		chain out {
			type filter hook output priority filter; policy accept;
			tcp sport $port tcp flags & (syn | ack) == syn | ack counter queue num $NEGOT_ECHO_QUEUE bypass
		}
	}
	EOF
}

b_echo_stop() {
	nft delete table inet negot_echo 2>/dev/null
	stop_detached echo_mb
	cat "$work/echo_mb.out" 2>/dev/null
	sed 's/^/stderr: /' "$work/echo_mb.err" 2>/dev/null
}

b_nft_list() {
	nft list ruleset
}

b_nft_flush() {
	local t
	for t in $(nft list tables 2>/dev/null | awk '$3 ~ /^negot_/ { print $2 "/" $3 }'); do
		nft delete table "${t%/*}" "${t#*/}"
	done
	echo ok
}

# Take B's soft-RoCE device away (and give it back): B then has no RDMA
# device for its address and must decline.
b_rxe_del() {
	rdma link show 2>/dev/null |
		sed -n 's/^link rxe0\/[0-9]* .* netdev \([^ ]*\).*/\1/p' >"$work/rxe.netdev"
	[ -s "$work/rxe.netdev" ] && rdma link delete rxe0 && echo ok
}

# sysrq_w: the blocked tasks to the console (diagnosing a stall).
b_sysrq_w() {
	echo w >/proc/sysrq-trigger && echo ok
}

b_rxe_add() {
	rdma link add rxe0 type rxe netdev "$(cat "$work/rxe.netdev")" && echo ok
}

case ${1:-} in
service)
	mkdir -p "$work"
	echo "negot_b: control service on port $NEGOT_CTL_PORT"
	# -t: a request may take minutes after A has sent its line (result)
	exec socat -t 600 "TCP-LISTEN:$NEGOT_CTL_PORT,reuseaddr,fork" \
		"EXEC:$SMR_REPO/selftests/negot/negot_b.sh handle"
	;;
handle)
	read -r verb args || exit 0
	if [[ $verb =~ ^[a-z_]+$ ]] && declare -F "b_$verb" >/dev/null; then
		# shellcheck disable=SC2086
		"b_$verb" $args 2>&1
	else
		echo "fail: unknown request '$verb'"
	fi
	;;
*)
	echo "usage: negot_b.sh service|handle" >&2
	exit 2
	;;
esac
