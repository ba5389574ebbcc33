# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034,SC2154 # registry read, work & co set by guests.sh
#
# The apps suite (selftests/apps_test.sh): real applications nobody here
# wrote, run through smr_run across two guests. Host B runs iperf3 -s,
# redis-server and socat (suite_b_setup), host A their clients (the
# cases). Every case checks what the application saw (byte counts, values,
# checksums) and that SMR sockets carried it: the /proc/net/smr/stats
# deltas on both hosts over that case alone (apps_begin, apps_after).
#
#   iperf3 -s          B, port 5201 (IPv4 and IPv6)
#   redis-server       B, port 6379 on 0.0.0.0 and ::
#   socat receiver     B, port 5301 (IPv4): A's file into copy4.bin;
#                      its sha256 -> copy4.sha256 in B's SMR_VM_OUT
#   socat sender       B, port 5302 (IPv6): B's random file to A;
#                      its sha256 -> copy6.sha256
#
# Environment: SMR_APPS_IPERF_BYTES (64 MiB), SMR_APPS_COPY_BYTES (32 MiB),
# SMR_APPS_REDIS_REQUESTS (10000), SMR_APPS_REDIS_CLIENTS (8),
# SMR_APPS_TESTS (the cases to run, default all), SMR_APPS_TIMEOUT
# (vm-run's timeout in s, 900).

suite_tests=(
	"iperf3_fwd|iperf3 -n IPv4 A->B, every counted byte moved by RDMA"
	"iperf3_rev6|iperf3 -n -R IPv6 B->A, every counted byte moved by RDMA"
	"redis_bench|redis-benchmark SET and GET complete without errors, bytes moved by RDMA"
	"redis_cli4|redis-cli SET/GET round trip of a 16 KiB value over SMR RDMA (IPv4)"
	"redis_cli6|redis-cli SET/GET round trip of a 16 KiB value over SMR RDMA (IPv6)"
	"copy4|socat copies a random file A->B over SMR RDMA (IPv4), sha256 equal"
	"copy6|socat copies a random file B->A over SMR RDMA (IPv6), sha256 equal"
)

bed_name=apps
bed_ctl_port=5999
bed_timeout_var=SMR_APPS_TIMEOUT
bed_select_var=SMR_APPS_TESTS
bed_env=(SMR_APPS_IPERF_BYTES SMR_APPS_COPY_BYTES SMR_APPS_REDIS_REQUESTS
	SMR_APPS_REDIS_CLIENTS)
bed_needs=(iperf3 redis-server redis-benchmark redis-cli socat python3 sha256sum)
bed_make=(tools)

iperf_bytes=${SMR_APPS_IPERF_BYTES:-67108864}
copy_bytes=${SMR_APPS_COPY_BYTES:-33554432}
redis_n=${SMR_APPS_REDIS_REQUESTS:-10000}
redis_c=${SMR_APPS_REDIS_CLIENTS:-8}
# how long one application run may take (time-scaled, guests.sh)
app_timeout=$(tscale 300)

# Counters that say how many bytes SMR moved by RDMA are rdma_bytes_sent
# and rdma_bytes_received. Bytes that fell back to the inner TCP connection
# (tcp_bytes_*) do not count: between two hosts with soft-RoCE every
# application byte must travel by RDMA.

# The checksum B wrote must match what A recorded, independently of A's
# own comparison over the control service.
suite_host_verdict() {
	local sa sb
	case $1 in
	copy4 | copy6)
		sb=$(cat "$out_b/$1.sha256" 2>/dev/null)
		sa=$(cat "$out_a/$1.sha256.a" 2>/dev/null)
		[ -n "$sb" ] && [ "$sb" = "$sa" ] ||
			echo "host side: B's $1.sha256 '${sb:-missing}' != A's '${sa:-missing}'"
		;;
	esac
}

# --- host B ----------------------------------------------------------------------

# The servers, through smr_run; false (B's fatal says why) unless every one
# listens within 120 s.
suite_b_setup() {
	if [ ! -r "$RDMA_STATS" ]; then
		echo "no $RDMA_STATS: is smr.ko loaded?" >"$out/fatal"
		return 1
	fi
	cat "$RDMA_STATS" >"$out/stats-b.start"
	# The file B sends to A over IPv6.
	head -c "$copy_bytes" /dev/urandom >"$work/copy6.bin"
	sha256sum "$work/copy6.bin" | cut -d' ' -f1 >"$out/copy6.sha256.tmp" &&
		mv "$out/copy6.sha256.tmp" "$out/copy6.sha256"

	"$SMR_RUN" -v iperf3 -s -p 5201 --forceflush >"$out/iperf3-server.log" 2>&1 &

	"$SMR_RUN" -v redis-server --port 6379 --bind '0.0.0.0 ::' \
		--protected-mode no --save '' --appendonly no \
		>"$out/redis-server.log" 2>&1 &

	# One-shot socat transfers; each records its exit status and, for the
	# receiver, the checksum of what arrived.
	(
		"$SMR_RUN" -v socat -d -d -u TCP4-LISTEN:5301,reuseaddr \
			"CREATE:$work/copy4.bin" >"$out/socat-recv4.log" 2>&1
		echo $? >"$out/copy4.status"
		{ sha256sum "$work/copy4.bin" 2>/dev/null || echo none; } | cut -d' ' -f1 \
			>"$out/copy4.sha256.tmp"
		stat -c %s "$work/copy4.bin" >"$out/copy4.size" 2>/dev/null || echo 0 >"$out/copy4.size"
		mv "$out/copy4.sha256.tmp" "$out/copy4.sha256"
		rm -f "$work/copy4.bin"
	) &
	(
		"$SMR_RUN" -v socat -d -d -u "OPEN:$work/copy6.bin" TCP6-LISTEN:5302,reuseaddr \
			>"$out/socat-send6.log" 2>&1
		echo $? >"$out/copy6.status"
	) &

	# Ready means every server is listening; each says so in its own way.
	for _ in $(seq "$(tscale 600)"); do
		apps_b_ready && break
		sleep 0.2
	done
	if apps_b_ready; then
		log "servers listening"
		return 0
	fi
	log "servers did not all come up in $(tscale 120) s; logs follow"
	tail -n 20 "$out"/*.log
	echo "its servers did not all come up in $(tscale 120) s (logs in its SMR_VM_OUT)" >"$out/fatal"
	return 1
}

apps_b_ready() {
	grep -q 'Server listening' "$out/iperf3-server.log" 2>/dev/null &&
		redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG &&
		grep -q 'listening on' "$out/socat-recv4.log" 2>/dev/null &&
		grep -q 'listening on' "$out/socat-send6.log" 2>/dev/null
}

# --- host A: bookkeeping around each case --------------------------------------

# apps_begin ID: a case, with both hosts' counters before it.
apps_begin() {
	t_begin "$1"
	snap_stats "$1.before"
}

# apps_after: the closing snapshot, taken as soon as the application is
# done and before the checks run.
apps_after() {
	snap_stats "$t_id.after"
	[ -s "$work/$t_id.after.b.stats" ] ||
		t_fail "could not read host B's counters from its control service"
}

# apps_end: the counters that moved into the diagnostics; the verdict.
apps_end() {
	t_diag "counter deltas over this test (only those that moved):"
	delta_table "$t_id.before" "$t_id.after" >>"$out/diag-$t_id.txt"
	t_end
}

# ck_smr HOST WHAT MIN COUNTER...: the counters' delta on host a|b over
# this case is at least MIN.
ck_smr() {
	local h=$1 what=$2 min=$3
	shift 3
	ck "${h^^} $what [delta of $*]" "$(delta "$t_id.before" "$t_id.after" "$h" "$@")" ge "$min"
}

suite_a_setup() {
	[ -r "$RDMA_STATS" ] && return 0
	log "FATAL: $RDMA_STATS missing on host A: is smr.ko loaded?"
	return 1
}


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
	ck "iperf3 exit status" "$rc" eq 0
	ck "iperf3 error" "$err" eq none
	ck "iperf3 sum_sent.bytes (asked for $iperf_bytes)" "$sent" ge "$iperf_bytes"
	ck "iperf3 sum_received.bytes (asked for $iperf_bytes, at most $slack in flight at the end)" \
		"$recv" ge $((iperf_bytes - slack))
	ck_smr a "sockets created" 2 sockets_created
	ck_smr a "connects" 2 connects
	ck_smr a "sockets in RDMA mode" 2 mode_rdma
	ck_smr b "accepts" 2 accepts
	# Every byte iperf3 counted as received went through SMR sockets, from
	# the sender by RDMA WRITE. (Not every byte of sum_sent: what is still
	# in the sender's ring when the receiver stops reading never leaves,
	# as it never leaves a TCP send queue.)
	ck_smr "$snd" "bytes sent by RDMA (iperf3's sum_received)" "${recv:-0}" \
		rdma_bytes_sent
	ck_smr "$rcv" "bytes received by RDMA (iperf3's sum_received)" "${recv:-0}" \
		rdma_bytes_received
}

mbit() {
	awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", b * 8 / s / 1e6; else print "?" }'
}

# The converted-socket lines smr_run -v printed (for family checks).
smr_lines() {
	grep -c -- "-> SMR ($2)" "$1" 2>/dev/null || true
}

# --- the cases ---------------------------------------------------------------------

# iperf_case ID ADDR FAMILY fwd|rev: iperf3 -n through smr_run to ADDR,
# A sending (fwd) or receiving (rev, -R).
iperf_case() {
	local id=$1 addr=$2 fam=$3 dir=$4 r=
	[ "$dir" = rev ] && r=-R
	apps_begin "$id"
	t_diag "smr_run iperf3 -c $addr $r -n $iperf_bytes -J"
	# shellcheck disable=SC2086 # $r: -R or nothing
	timeout "$app_timeout" "$SMR_RUN" -v iperf3 -c "$addr" -p 5201 $r -n "$iperf_bytes" -J \
		>"$work/$id.json" 2>"$work/$id.err"
	rc=$?
	apps_after
	read -r sent recv secs err <<<"$(iperf_summary "$work/$id.json")"
	iperf_checks "$dir"
	ck "smr_run -v $fam conversions" "$(smr_lines "$work/$id.err" "$fam")" ge 2
	t_note "sent $sent, received $recv bytes in ${secs}s, $(mbit "$recv" "$secs") Mbit/s$([ "$dir" = rev ] && echo ' (IPv6, B to A)')"
	[ "$t_failed" = 0 ] || { t_file_tail "iperf3 JSON" "$work/$id.json"; t_file_tail "iperf3 stderr" "$work/$id.err"; }
	apps_end
}

# iperf3, IPv4, A -> B, fixed byte count.
case_iperf3_fwd() { iperf_case iperf3_fwd "$peer" AF_INET fwd; }
# iperf3 -R over IPv6: B sends, A receives.
case_iperf3_rev6() { iperf_case iperf3_rev6 "$peer6" AF_INET6 rev; }

# redis: the server's own count of connections and commands, read through smr_run
# too; the INFO connection itself is counted in total_connections_received.
redis_info() {
	timeout "$(tscale 60)" "$SMR_RUN" redis-cli -h "$peer" -p 6379 INFO all 2>&1 | tr -d '\r'
}
redis_field() {
	sed -n "s/^$2:\(.*\)/\1/p" "$1" | head -n 1
}
redis_calls() {
	sed -n "s/^cmdstat_$2:calls=\([0-9]*\).*/\1/p" "$1" | head -n 1
}

# redis-benchmark SET and GET.
case_redis_bench() {
	local set_rps get_rps nerr c0 c1 conns
	apps_begin redis_bench
	redis_info >"$work/redis.info0"
	t_diag "smr_run redis-benchmark -h $peer -t set,get -n $redis_n -c $redis_c --csv"
	timeout "$app_timeout" "$SMR_RUN" -v redis-benchmark -h "$peer" -p 6379 -t set,get \
		-n "$redis_n" -c "$redis_c" --csv >"$work/redis_bench.csv" 2>"$work/redis_bench.err"
	rc=$?
	redis_info >"$work/redis.info1"
	apps_after
	ck "redis-benchmark exit status" "$rc" eq 0
	set_rps=$(sed -n 's/^"SET","\([0-9.]*\)".*/\1/p' "$work/redis_bench.csv")
	get_rps=$(sed -n 's/^"GET","\([0-9.]*\)".*/\1/p' "$work/redis_bench.csv")
	ck "SET requests/s (integer part)" "${set_rps%.*}" ge 1
	ck "GET requests/s (integer part)" "${get_rps%.*}" ge 1
	nerr=$(grep -ciE 'error|refused|reset' "$work/redis_bench.err")
	ck "error lines from redis-benchmark" "$nerr" eq 0
	c0=$(redis_calls "$work/redis.info0" set) c1=$(redis_calls "$work/redis.info1" set)
	ck "SET calls the server processed" "$(( ${c1:-0} - ${c0:-0} ))" ge "$redis_n"
	c0=$(redis_calls "$work/redis.info0" get) c1=$(redis_calls "$work/redis.info1" get)
	ck "GET calls the server processed" "$(( ${c1:-0} - ${c0:-0} ))" ge "$redis_n"
	ck "SET failed_calls" "$(sed -n 's/^cmdstat_set:.*failed_calls=\([0-9]*\).*/\1/p' "$work/redis.info1")" eq 0
	ck "GET failed_calls" "$(sed -n 's/^cmdstat_get:.*failed_calls=\([0-9]*\).*/\1/p' "$work/redis.info1")" eq 0
	# Each test of redis-benchmark opens its own -c connections.
	ck_smr a "connects" $((2 * redis_c)) connects
	ck_smr b "accepts" $((2 * redis_c)) accepts
	c0=$(redis_field "$work/redis.info0" total_connections_received)
	c1=$(redis_field "$work/redis.info1" total_connections_received)
	conns=$(( ${c1:-0} - ${c0:-0} ))
	t_diag "redis-server counted $conns new connections (benchmark + closing INFO)"
	ck_smr b "accepts, vs. connections redis-server counted" "$conns" accepts
	ck_smr a "bytes sent by RDMA" "$((redis_n * 2 * 20))" rdma_bytes_sent
	ck_smr b "bytes received by RDMA" "$((redis_n * 2 * 20))" rdma_bytes_received
	t_note "SET $set_rps req/s, GET $get_rps req/s, $redis_c clients"
	[ "$t_failed" = 0 ] || {
		t_file_tail "redis-benchmark --csv" "$work/redis_bench.csv"
		t_file_tail "redis-benchmark stderr" "$work/redis_bench.err"
	}
	apps_end
}

# redis-cli SET then GET of a 16 KiB random value, IPv4 and IPv6.
redis_roundtrip() {
	local id=$1 host=$2 fam=$3 key=$4 val got rc1 rc2
	apps_begin "$id"
	val=$(head -c 12288 /dev/urandom | base64 -w0)
	t_diag "smr_run redis-cli -h $host SET $key <16384 random base64 chars>; GET $key"
	timeout "$(tscale 60)" "$SMR_RUN" -v redis-cli -h "$host" -p 6379 SET "$key" "$val" \
		>"$work/$id.set" 2>"$work/$id.err"
	rc1=$?
	timeout "$(tscale 60)" "$SMR_RUN" -v redis-cli -h "$host" -p 6379 GET "$key" \
		>"$work/$id.get" 2>>"$work/$id.err"
	rc2=$?
	apps_after
	got=$(tr -d '\r\n' <"$work/$id.get")
	ck "redis-cli SET exit status" "$rc1" eq 0
	ck "redis-cli GET exit status" "$rc2" eq 0
	ck "SET reply" "$(tr -d '\r\n' <"$work/$id.set")" eq OK
	if [ "$got" = "$val" ]; then
		t_diag "ok: GET returned the 16384-character value byte for byte"
	else
		t_fail "GET returned ${#got} characters that differ from the ${#val} SET"
	fi
	ck_smr a "connects" 2 connects
	ck_smr b "accepts" 2 accepts
	ck_smr a "bytes sent by RDMA" "${#val}" rdma_bytes_sent
	ck_smr a "bytes received by RDMA" "${#val}" rdma_bytes_received
	ck_smr b "bytes received by RDMA" "${#val}" rdma_bytes_received
	ck_smr b "bytes sent by RDMA" "${#val}" rdma_bytes_sent
	ck "smr_run -v $fam conversions" "$(smr_lines "$work/$id.err" "$fam")" ge 2
	t_note "16 KiB value stored and read back via $host"
	[ "$t_failed" = 0 ] || {
		t_file_tail "SET output" "$work/$id.set"
		t_diag "--- GET output: first 200 characters: ${got:0:200}"
		t_file_tail "redis-cli stderr" "$work/$id.err"
	}
	apps_end
}
case_redis_cli4() { redis_roundtrip redis_cli4 "$peer" AF_INET smr:apps:v4; }
case_redis_cli6() { redis_roundtrip redis_cli6 "$peer6" AF_INET6 smr:apps:v6; }

# copy_case ID fwd|rev: socat copies copy_bytes of random data through
# smr_run, A to B over IPv4 (fwd: to B's receiver on 5301) or B to A over
# IPv6 (rev: from B's sender on 5302); the receiver's sha256 must be the
# sender's, here and (suite_host_verdict) on the build host.
copy_case() {
	local id=$1 dir=$2 sum_a sum_b size status_b got want snd=a rcv=b fam=AF_INET
	local blog=socat-recv4.log
	apps_begin "$id"
	if [ "$dir" = fwd ]; then
		head -c "$copy_bytes" /dev/urandom >"$work/$id.bin"
		sum_a=$(sha256sum "$work/$id.bin" | cut -d' ' -f1)
		t_diag "smr_run socat -u OPEN:$id.bin TCP4:$peer:5301 ($copy_bytes random bytes)"
		timeout "$app_timeout" "$SMR_RUN" -v socat -d -d -u "OPEN:$work/$id.bin" \
			"TCP4:$peer:5301" >"$work/$id.log" 2>&1
		rc=$?
		sum_b=$(b_call file "$id.sha256" | tr -d '\n')
		size=$(b_call file "$id.size" | tr -d '\n')
		got=$sum_b want=$sum_a
	else
		snd=b rcv=a fam=AF_INET6 blog=socat-send6.log
		t_diag "smr_run socat -u TCP6:[$peer6]:5302 CREATE:$id.bin"
		timeout "$app_timeout" "$SMR_RUN" -v socat -d -d -u "TCP6:[$peer6]:5302" \
			"CREATE:$work/$id.bin" >"$work/$id.log" 2>&1
		rc=$?
		sum_a=$(sha256sum "$work/$id.bin" 2>/dev/null | cut -d' ' -f1)
		size=$(stat -c %s "$work/$id.bin" 2>/dev/null)
		sum_b=$(b_call file "$id.sha256" | tr -d '\n')
		got=$sum_a want=$sum_b
	fi
	status_b=$(b_call file "$id.status" | tr -d '\n')
	apps_after
	ck "socat exit status on A" "$rc" eq 0
	ck "socat exit status on B" "$status_b" eq 0
	ck "bytes ${rcv^^} wrote" "$size" eq "$copy_bytes"
	ck "sha256 on ${rcv^^} (${snd^^}'s: $want)" "$got" eq "$want"
	ck_smr a "connects" 1 connects
	ck_smr b "accepts" 1 accepts
	ck_smr "$snd" "bytes sent by RDMA" "$copy_bytes" rdma_bytes_sent
	ck_smr "$rcv" "bytes received by RDMA" "$copy_bytes" rdma_bytes_received
	ck "smr_run -v $fam conversions" "$(smr_lines "$work/$id.log" "$fam")" ge 1
	echo "$sum_a" >"$out/$id.sha256.a"
	t_note "$copy_bytes bytes, sha256 ${sum_a:0:16}... on both hosts$([ "$dir" = rev ] && echo ' (IPv6, B to A)')"
	[ "$t_failed" = 0 ] ||
		{ t_file_tail "socat on A" "$work/$id.log"; t_diag "$(b_call file "$blog" | tail -n 25)"; }
	rm -f "$work/$id.bin"
	apps_end
}

# socat sends A's random file to B over IPv4.
case_copy4() { copy_case copy4 fwd; }
# socat fetches B's random file over IPv6 (B listens and sends).
case_copy6() { copy_case copy6 rev; }
