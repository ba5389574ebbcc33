#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Host A's side of selftests/apps_test.sh (runs in a scripts/vm-run guest
# while b_servers.sh runs on host B). Drives unmodified clients through
# smr_run against B's servers and checks, per test, what the application
# saw (byte counts, values, checksums) and that SMR carried it: the
# /proc/net/smr/stats deltas on A (local) and on B (from B's control
# service) around that test alone.
#
# Results go to $SMR_VM_OUT/results, one line per test:
#   ID ok|fail SUMMARY
# and $SMR_VM_OUT/diag-ID.txt (what was checked, counter deltas, and on
# failure the application's output). apps_test.sh turns them into TAP.
# Exit status 0 when every test ran (passed or not), non-zero only when this
# script itself could not do its job.
#
# Environment: SMR_APPS_IPERF_BYTES (default 64 MiB), SMR_APPS_COPY_BYTES
# (default 32 MiB), SMR_APPS_REDIS_REQUESTS (default 10000),
# SMR_APPS_REDIS_CLIENTS (default 8).
set -uo pipefail

# shellcheck source=selftests/apps/smr_apps_lib.sh
. "$SMR_REPO/selftests/apps/smr_apps_lib.sh"

out=$SMR_VM_OUT
work=/tmp/smr-apps-a
iperf_bytes=${SMR_APPS_IPERF_BYTES:-67108864}
copy_bytes=${SMR_APPS_COPY_BYTES:-33554432}
redis_n=${SMR_APPS_REDIS_REQUESTS:-10000}
redis_c=${SMR_APPS_REDIS_CLIENTS:-8}
peer=$SMR_PEER_ADDR
peer6=$SMR_PEER_ADDR6
app_timeout=300
mkdir -p "$work"
: >"$out/results"

smr_a_log() {
	echo "a_clients: $*"
}

# --- per-test bookkeeping ---------------------------------------------------

t_id=
t_failed=0
t_summary=

# t_begin ID: start a test; snapshots the counters on both hosts.
t_begin() {
	t_id=$1
	t_failed=0
	t_summary=
	: >"$out/diag-$t_id.txt"
	smr_a_log "test $t_id"
	smr_apps_snap "$work" "$t_id.before"
}

t_diag() {
	printf '%s\n' "$*" >>"$out/diag-$t_id.txt"
}

t_fail() {
	t_failed=1
	t_diag "FAIL: $*"
	smr_a_log "$t_id: FAIL: $*"
}

# t_file LABEL FILE: append (the tail of) a file to the diagnostics.
t_file() {
	t_diag "--- $1 (last 25 lines):"
	if [ -s "$2" ]; then
		tail -n 25 "$2" >>"$out/diag-$t_id.txt"
	else
		t_diag "(empty)"
	fi
}

# t_ge WHAT ACTUAL MIN / t_eq WHAT ACTUAL EXPECTED: checks; "" never passes.
t_ge() {
	if [[ $2 =~ ^-?[0-9]+$ ]] && [[ $3 =~ ^-?[0-9]+$ ]] && [ "$2" -ge "$3" ]; then
		t_diag "ok: $1 = $2 (>= $3)"
	else
		t_fail "$1 = ${2:-unknown}, want >= $3"
	fi
}

t_eq() {
	if [ -n "$2" ] && [ "$2" = "$3" ]; then
		t_diag "ok: $1 = $2"
	else
		t_fail "$1 = '${2:-}', want '$3'"
	fi
}

# t_smr HOST WHAT MIN COUNTER...: the counters' delta on host a|b over
# this test is at least MIN.
t_smr() {
	local h=$1 what=$2 min=$3 d
	shift 3
	d=$(smr_apps_delta "$work" "$t_id.before" "$t_id.after" "$h" "$@")
	t_ge "${h^^} $what [delta of $*]" "$d" "$min"
}

# t_after: the closing snapshot, taken as soon as the application is done
# and before the checks run.
t_after() {
	smr_apps_snap "$work" "$t_id.after"
	if [ ! -s "$work/$t_id.after.b" ]; then
		t_fail "could not read host B's counters from its control service"
	fi
}

# t_end: counter table into the diagnostics, verdict into results.
t_end() {
	t_diag "counter deltas over this test (only those that moved):"
	smr_apps_delta_table "$work" "$t_id.before" "$t_id.after" >>"$out/diag-$t_id.txt"
	local verdict=ok
	[ "$t_failed" = 0 ] || verdict=fail
	printf '%s %s %s\n' "$t_id" "$verdict" "$t_summary" >>"$out/results"
	smr_a_log "$t_id: $verdict $t_summary"
}

# --- helpers ------------------------------------------------------------------

# iperf3 -J: "sent received seconds error" from the end summary.
iperf_summary() {
	python3 -c '
import json, sys
try:
	j = json.load(open(sys.argv[1]))
except Exception as e:
	print("? ? ? unparsable-json:%s" % type(e).__name__)
	sys.exit(0)
end = j.get("end", {})
s = end.get("sum_sent", {})
r = end.get("sum_received", {})
err = j.get("error", "none").replace(" ", "_")
print(s.get("bytes", "?"), r.get("bytes", "?"), "%.2f" % r.get("seconds", 0), err)
' "$1"
}

# iperf3's -n is not an exact byte count (upstream iperf issues #382, #768):
# the sender stops at the first block that reaches N, so it may send a little
# more, and the receiver stops reading when the end-of-test message arrives
# on the control connection, dropping what is still in flight. In flight is
# at most the sender's socket send buffer plus the receiver's receive
# buffer, whose ceilings are the third fields of tcp_wmem / tcp_rmem.
# Exact counts and content are what the socat tests check.
iperf_in_flight_max() {
	local w r
	w=$(awk '{ print $3 }' /proc/sys/net/ipv4/tcp_wmem)
	r=$(awk '{ print $3 }' /proc/sys/net/ipv4/tcp_rmem)
	echo $((w + r))
}

# iperf_checks DIR: the checks both iperf3 tests share. DIR is fwd (A
# sends) or rev (B sends).
iperf_checks() {
	local snd=a rcv=b slack
	[ "$1" = rev ] && snd=b rcv=a
	slack=$(iperf_in_flight_max)
	t_eq "iperf3 exit status" "$rc" 0
	t_eq "iperf3 error" "$err" none
	t_ge "iperf3 sum_sent.bytes (asked for $iperf_bytes)" "$sent" "$iperf_bytes"
	t_ge "iperf3 sum_received.bytes (asked for $iperf_bytes, at most $slack in flight at the end)" \
		"$recv" $((iperf_bytes - slack))
	t_smr a "sockets created" 2 sockets_created
	t_smr a "connects" 2 connects
	t_smr a "sockets in RDMA mode" 2 mode_rdma
	t_smr b "accepts" 2 accepts
	# Every byte iperf3 counted as received went through SMR sockets, from
	# the sender by RDMA WRITE. (Not every byte of sum_sent: what is still
	# in the sender's ring when the receiver stops reading never leaves,
	# as it never leaves a TCP send queue.)
	t_smr "$snd" "bytes sent by RDMA (iperf3's sum_received)" "${recv:-0}" \
		"$smr_apps_bytes_sent_names"
	t_smr "$rcv" "bytes received by RDMA (iperf3's sum_received)" "${recv:-0}" \
		"$smr_apps_bytes_received_names"
}

mbit() {
	awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", b * 8 / s / 1e6; else print "?" }'
}

# The converted-socket lines smr_run -v printed (for family checks).
smr_lines() {
	grep -c -- "-> SMR ($2)" "$1" 2>/dev/null || true
}

# --- start ----------------------------------------------------------------------

if ! smr_apps_have_stats; then
	smr_a_log "FATAL: $SMR_APPS_STATS missing on host A: is smr.ko loaded?"
	exit 1
fi
smr_a_log "waiting for host B's servers"
if ! smr_apps_wait_b 180; then
	smr_a_log "FATAL: host B's control service never said ready"
	exit 1
fi

# 1. iperf3, IPv4, A -> B, fixed byte count.
t_begin iperf3_fwd
t_diag "smr_run iperf3 -c $peer -n $iperf_bytes -J"
timeout "$app_timeout" "$SMR_RUN" -v iperf3 -c "$peer" -p 5201 -n "$iperf_bytes" -J \
	>"$work/iperf3_fwd.json" 2>"$work/iperf3_fwd.err"
rc=$?
t_after
read -r sent recv secs err <<<"$(iperf_summary "$work/iperf3_fwd.json")"
iperf_checks fwd
t_ge "smr_run -v AF_INET conversions" "$(smr_lines "$work/iperf3_fwd.err" AF_INET)" 2
t_summary="sent $sent, received $recv bytes in ${secs}s, $(mbit "$recv" "$secs") Mbit/s"
[ "$t_failed" = 0 ] || { t_file "iperf3 JSON" "$work/iperf3_fwd.json"; t_file "iperf3 stderr" "$work/iperf3_fwd.err"; }
t_end

# 2. iperf3 -R over IPv6: B sends, A receives.
t_begin iperf3_rev6
t_diag "smr_run iperf3 -c $peer6 -R -n $iperf_bytes -J"
timeout "$app_timeout" "$SMR_RUN" -v iperf3 -c "$peer6" -p 5201 -R -n "$iperf_bytes" -J \
	>"$work/iperf3_rev6.json" 2>"$work/iperf3_rev6.err"
rc=$?
t_after
read -r sent recv secs err <<<"$(iperf_summary "$work/iperf3_rev6.json")"
iperf_checks rev
t_ge "smr_run -v AF_INET6 conversions" "$(smr_lines "$work/iperf3_rev6.err" AF_INET6)" 2
t_summary="sent $sent, received $recv bytes in ${secs}s, $(mbit "$recv" "$secs") Mbit/s (IPv6, B to A)"
[ "$t_failed" = 0 ] || { t_file "iperf3 JSON" "$work/iperf3_rev6.json"; t_file "iperf3 stderr" "$work/iperf3_rev6.err"; }
t_end

# 3. redis-benchmark SET and GET.
# The server's own count of connections and commands, read through smr_run
# too; the INFO connection itself is counted in total_connections_received.
redis_info() {
	timeout 60 "$SMR_RUN" redis-cli -h "$peer" -p 6379 INFO all 2>&1 | tr -d '\r'
}
redis_field() {
	sed -n "s/^$2:\(.*\)/\1/p" "$1" | head -n 1
}
redis_calls() {
	sed -n "s/^cmdstat_$2:calls=\([0-9]*\).*/\1/p" "$1" | head -n 1
}
t_begin redis_bench
redis_info >"$work/redis.info0"
t_diag "smr_run redis-benchmark -h $peer -t set,get -n $redis_n -c $redis_c --csv"
timeout "$app_timeout" "$SMR_RUN" -v redis-benchmark -h "$peer" -p 6379 -t set,get \
	-n "$redis_n" -c "$redis_c" --csv >"$work/redis_bench.csv" 2>"$work/redis_bench.err"
rc=$?
redis_info >"$work/redis.info1"
t_after
t_eq "redis-benchmark exit status" "$rc" 0
set_rps=$(sed -n 's/^"SET","\([0-9.]*\)".*/\1/p' "$work/redis_bench.csv")
get_rps=$(sed -n 's/^"GET","\([0-9.]*\)".*/\1/p' "$work/redis_bench.csv")
t_ge "SET requests/s (integer part)" "${set_rps%.*}" 1
t_ge "GET requests/s (integer part)" "${get_rps%.*}" 1
nerr=$(grep -ciE 'error|refused|reset' "$work/redis_bench.err")
t_eq "error lines from redis-benchmark" "$nerr" 0
c0=$(redis_calls "$work/redis.info0" set) c1=$(redis_calls "$work/redis.info1" set)
t_ge "SET calls the server processed" "$(( ${c1:-0} - ${c0:-0} ))" "$redis_n"
c0=$(redis_calls "$work/redis.info0" get) c1=$(redis_calls "$work/redis.info1" get)
t_ge "GET calls the server processed" "$(( ${c1:-0} - ${c0:-0} ))" "$redis_n"
t_eq "SET failed_calls" "$(sed -n 's/^cmdstat_set:.*failed_calls=\([0-9]*\).*/\1/p' "$work/redis.info1")" 0
t_eq "GET failed_calls" "$(sed -n 's/^cmdstat_get:.*failed_calls=\([0-9]*\).*/\1/p' "$work/redis.info1")" 0
# Each test of redis-benchmark opens its own -c connections.
t_smr a "connects" $((2 * redis_c)) connects
t_smr b "accepts" $((2 * redis_c)) accepts
c0=$(redis_field "$work/redis.info0" total_connections_received)
c1=$(redis_field "$work/redis.info1" total_connections_received)
conns=$(( ${c1:-0} - ${c0:-0} ))
t_diag "redis-server counted $conns new connections (benchmark + closing INFO)"
t_smr b "accepts, vs. connections redis-server counted" "$conns" accepts
t_smr a "bytes sent by RDMA" "$((redis_n * 2 * 20))" "$smr_apps_bytes_sent_names"
t_smr b "bytes received by RDMA" "$((redis_n * 2 * 20))" "$smr_apps_bytes_received_names"
t_summary="SET $set_rps req/s, GET $get_rps req/s, $redis_c clients"
[ "$t_failed" = 0 ] || {
	t_file "redis-benchmark --csv" "$work/redis_bench.csv"
	t_file "redis-benchmark stderr" "$work/redis_bench.err"
}
t_end

# 4./5. redis-cli SET then GET of a 16 KiB random value, IPv4 and IPv6.
redis_roundtrip() {
	local id=$1 host=$2 fam=$3 key=$4 val got rc1 rc2
	t_begin "$id"
	val=$(head -c 12288 /dev/urandom | base64 -w0)
	t_diag "smr_run redis-cli -h $host SET $key <16384 random base64 chars>; GET $key"
	timeout 60 "$SMR_RUN" -v redis-cli -h "$host" -p 6379 SET "$key" "$val" \
		>"$work/$id.set" 2>"$work/$id.err"
	rc1=$?
	timeout 60 "$SMR_RUN" -v redis-cli -h "$host" -p 6379 GET "$key" \
		>"$work/$id.get" 2>>"$work/$id.err"
	rc2=$?
	t_after
	got=$(tr -d '\r\n' <"$work/$id.get")
	t_eq "redis-cli SET exit status" "$rc1" 0
	t_eq "redis-cli GET exit status" "$rc2" 0
	t_eq "SET reply" "$(tr -d '\r\n' <"$work/$id.set")" OK
	if [ "$got" = "$val" ]; then
		t_diag "ok: GET returned the 16384-character value byte for byte"
	else
		t_fail "GET returned ${#got} characters that differ from the ${#val} SET"
	fi
	t_smr a "connects" 2 connects
	t_smr b "accepts" 2 accepts
	t_smr a "bytes sent by RDMA" "${#val}" "$smr_apps_bytes_sent_names"
	t_smr a "bytes received by RDMA" "${#val}" "$smr_apps_bytes_received_names"
	t_smr b "bytes received by RDMA" "${#val}" "$smr_apps_bytes_received_names"
	t_smr b "bytes sent by RDMA" "${#val}" "$smr_apps_bytes_sent_names"
	t_ge "smr_run -v $fam conversions" "$(smr_lines "$work/$id.err" "$fam")" 2
	t_summary="16 KiB value stored and read back via $host"
	[ "$t_failed" = 0 ] || {
		t_file "SET output" "$work/$id.set"
		t_diag "--- GET output: first 200 characters: ${got:0:200}"
		t_file "redis-cli stderr" "$work/$id.err"
	}
	t_end
}
redis_roundtrip redis_cli4 "$peer" AF_INET smr:apps:v4
redis_roundtrip redis_cli6 "$peer6" AF_INET6 smr:apps:v6

# 6. socat sends A's random file to B over IPv4.
t_begin copy4
head -c "$copy_bytes" /dev/urandom >"$work/copy4.bin"
sum_a=$(sha256sum "$work/copy4.bin" | cut -d' ' -f1)
t_diag "smr_run socat -u OPEN:copy4.bin TCP4:$peer:5301 ($copy_bytes random bytes)"
timeout "$app_timeout" "$SMR_RUN" -v socat -d -d -u "OPEN:$work/copy4.bin" "TCP4:$peer:5301" \
	>"$work/copy4.log" 2>&1
rc=$?
sum_b=$(smr_apps_ctl "file copy4.sha256" 300 | tr -d '\n')
size_b=$(smr_apps_ctl "file copy4.size" 60 | tr -d '\n')
status_b=$(smr_apps_ctl "file copy4.status" 60 | tr -d '\n')
t_after
t_eq "socat exit status on A" "$rc" 0
t_eq "socat exit status on B" "$status_b" 0
t_eq "bytes B wrote" "$size_b" "$copy_bytes"
t_eq "sha256 on B (A's: $sum_a)" "$sum_b" "$sum_a"
t_smr a "connects" 1 connects
t_smr a "bytes sent by RDMA" "$copy_bytes" "$smr_apps_bytes_sent_names"
t_smr b "accepts" 1 accepts
t_smr b "bytes received by RDMA" "$copy_bytes" "$smr_apps_bytes_received_names"
t_ge "smr_run -v AF_INET conversions" "$(smr_lines "$work/copy4.log" AF_INET)" 1
echo "$sum_a" >"$out/copy4.sha256.a"
t_summary="$copy_bytes bytes, sha256 ${sum_a:0:16}... on both hosts"
[ "$t_failed" = 0 ] || { t_file "socat on A" "$work/copy4.log"; t_diag "$(smr_apps_ctl "file socat-recv4.log" 10 | tail -n 25)"; }
rm -f "$work/copy4.bin"
t_end

# 7. socat fetches B's random file over IPv6 (B listens and sends).
t_begin copy6
t_diag "smr_run socat -u TCP6:[$peer6]:5302 CREATE:copy6.bin"
timeout "$app_timeout" "$SMR_RUN" -v socat -d -d -u "TCP6:[$peer6]:5302" "CREATE:$work/copy6.bin" \
	>"$work/copy6.log" 2>&1
rc=$?
sum_a=$(sha256sum "$work/copy6.bin" 2>/dev/null | cut -d' ' -f1)
size_a=$(stat -c %s "$work/copy6.bin" 2>/dev/null)
sum_b=$(smr_apps_ctl "file copy6.sha256" 60 | tr -d '\n')
status_b=$(smr_apps_ctl "file copy6.status" 60 | tr -d '\n')
t_after
t_eq "socat exit status on A" "$rc" 0
t_eq "socat exit status on B" "$status_b" 0
t_eq "bytes A wrote" "$size_a" "$copy_bytes"
t_eq "sha256 on A (B's: $sum_b)" "$sum_a" "$sum_b"
t_smr a "connects" 1 connects
t_smr a "bytes received by RDMA" "$copy_bytes" "$smr_apps_bytes_received_names"
t_smr b "accepts" 1 accepts
t_smr b "bytes sent by RDMA" "$copy_bytes" "$smr_apps_bytes_sent_names"
t_ge "smr_run -v AF_INET6 conversions" "$(smr_lines "$work/copy6.log" AF_INET6)" 1
echo "$sum_a" >"$out/copy6.sha256.a"
t_summary="$copy_bytes bytes, sha256 ${sum_a:0:16}... on both hosts (IPv6, B to A)"
[ "$t_failed" = 0 ] || { t_file "socat on A" "$work/copy6.log"; t_diag "$(smr_apps_ctl "file socat-send6.log" 10 | tail -n 25)"; }
rm -f "$work/copy6.bin"
t_end

cat "$SMR_APPS_STATS" >"$out/stats-a.end"
smr_a_log "all tests ran"
exit 0
