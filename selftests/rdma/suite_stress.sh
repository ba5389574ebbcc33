# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2154 # guests.sh and bed.sh set peer, work, out, stream
#
# The stress suite's cases (selftests/stress_test.sh; sourced by
# the build host for the list, on host A for the case_ID functions and on
# host B for its b_VERB requests: selftests/lib/guests.sh). Each
# reproduces a race that took a 2-vCPU guest down before its fix (issue 9,
# items 1, 2, 3 and 11), as an unprivileged user where one could: the
# guests boot with panic_on_warn, so a splat fails the run (and the
# `guests` case), and every case also checks what the calls returned.
# SMR_STRESS_ITERS scales the iteration counts (default 1).

# shellcheck disable=SC2034 # read by selftests/lib/guests.sh
suite_tests=(
	"listen|listen() racing close() and connects, 2 threads x 2000 as uid 65534: every iteration runs, no splat (the work used to drop the listener's only reference)"
	"hsclose|non-blocking connect() then close() after 0..3 ms, 2 threads x 1500 as uid 65534, to B and to this host: no splat, no socket left (the handshake timer used to run on a released TCP socket)"
	"acceptshut|3 threads blocked in accept() while connects arrive and shutdown(SHUT_RD) wakes them, 2 x 300 rounds as uid 65534: every accept() wakes within 5 s, no splat (accept used to take a child the stop was freeing)"
	"cdcflood|300 connections from 3 processes, writes of 1..64 bytes both ways at once: more CDCs than the link's slots wait for room (cdc_waits), every byte intact, no splat (the completion used to re-add a waiter still on its list)"
)

stress_scale=${SMR_STRESS_ITERS:-1}
stress_tool=${RDMA_STREAM:-}
stress_tool=${stress_tool%/*}/smr_stress

# --- host B --------------------------------------------------------------------

# sink PORT SECONDS: an SMR listener on B that accepts and closes.
b_sink() {
	stress_server "sink$1" sink -p "$1" -T "$2"
}

b_sockets_active() {
	awk '$1 == "sockets_active" { print $2 }' /proc/net/smr/stats
}

# --- host A --------------------------------------------------------------------

# stress NAME ARGS...: smr_stress here; its summary line into $work/NAME.
stress() {
	local name=$1
	shift
	timeout "$(tscale 600)" "$stress_tool" "$@" >"$work/$name" 2>"$work/$name.err"
	echo "rc=$?" >>"$work/$name"
	cp "$work/$name" "$out/conns/"
}

# stress_kv FILE KEY: a key of smr_stress's summary line.
stress_kv() {
	sed -n "s/^summary .*\\b$2=\\([^ ]*\\).*/\\1/p" "$1"
}

# sockets_settle: A's and B's sockets_active back to 0 within 30 s
# (time-scaled).
sockets_settle() {
	local a b
	for _ in $(seq "$(tscale 150)"); do
		a=$(awk '$1 == "sockets_active" { print $2 }' /proc/net/smr/stats)
		b=$(b_call sockets_active)
		[ "$a" = 0 ] && [ "$b" = 0 ] && return 0
		sleep 0.2
	done
	t_fail "sockets left: A $a, B $b"
	return 1
}

# stress_check NAME WANT: the run ended by itself with WANT iterations.
stress_check() {
	ck "$1: exit status" "$(sed -n 's/^rc=//p' "$work/$1")" eq 0
	ck "$1: iterations" "$(stress_kv "$work/$1" iters)" ge "$2"
	ck "$1: stuck threads" "$(stress_kv "$work/$1" stuck)" eq 0
	[ -s "$work/$1.err" ] && t_file "$1 stderr" "$work/$1.err" 5
	return 0
}

case_listen() {
	local n=$((2000 * stress_scale))
	t_begin listen
	stress listen.run listen -a "$SMR_SELF_ADDR" -j 2 -i "$n" -d 500 -U 65534 -T 300
	stress_check listen.run $((2 * n))
	sockets_settle
	t_note "$(grep '^summary' "$work/listen.run")"
	t_end
}

case_hsclose() {
	local n=$((1500 * stress_scale)) r
	t_begin hsclose
	r=$(b_call sink 7600 400)
	ck "B's sink started" "$r" eq ok
	"$stress_tool" sink -a "$SMR_SELF_ADDR" -p 7601 -T 400 >"$work/sink.a" 2>&1 &
	local sink_pid=$!
	sleep 0.5
	stress hsclose.peer hsclose -a "$peer" -p 7600 -j 2 -i "$n" -d 3000 -U 65534 -T 300
	stress hsclose.self hsclose -a "$SMR_SELF_ADDR" -p 7601 -j 2 -i "$n" -d 3000 -U 65534 -T 300
	b_call stop sink7600 >/dev/null
	kill "$sink_pid" 2>/dev/null
	wait "$sink_pid" 2>/dev/null
	stress_check hsclose.peer $((2 * n))
	stress_check hsclose.self $((2 * n))
	sockets_settle
	t_note "to B: $(grep '^summary' "$work/hsclose.peer"); to itself: $(grep '^summary' "$work/hsclose.self")"
	t_end
}

case_acceptshut() {
	local n=$((300 * stress_scale))
	t_begin acceptshut
	stress acceptshut.run acceptshut -a "$SMR_SELF_ADDR" -j 2 -k 3 -i "$n" -d 3000 -U 65534 -T 400
	stress_check acceptshut.run $((2 * n))
	sockets_settle
	t_note "$(grep '^summary' "$work/acceptshut.run")"
	t_end
}

case_cdcflood() {
	local p pids=() waits
	t_begin cdcflood
	snap flood.pre
	serve flood -p 7700 -n 300 -s 16384 -m 64 -M rdma -T 400 || { t_end; return; }
	for p in 1 2 3; do
		client_bg "flood$p" -a "$peer" -p 7700 -n 100 -s 16384 -m 64 -M rdma -T 400
		pids+=("$bg_pid")
	done
	for p in 1 2 3; do
		client_bg_wait "${pids[$((p - 1))]}" "flood$p"
	done
	server_result flood 120
	snap flood.post
	for p in 1 2 3; do
		ck "client process $p: exit status" "$(sed -n 's/^rc=//p' "$work/flood$p.client")" eq 0
	done
	ck "B's server: exit status" "$(sed -n 's/^rc=//p' "$work/flood.server" | tail -n 1)" eq 0
	waits=$(( $(delta flood.pre flood.post a cdc_waits) + $(delta flood.pre flood.post b cdc_waits) ))
	ck "CDCs that waited for a slot or a credit (both hosts)" "$waits" gt 0
	ck "A's link failures" "$(delta flood.pre flood.post a links_failed)" eq 0
	sockets_settle
	t_note "300 connections x 16 KiB each way in writes of 1..64 B: $(delta flood.pre flood.post a cdc_sent) CDCs from A, $(delta flood.pre flood.post b cdc_sent) from B, $waits waited for room; every byte intact"
	t_end
}
