#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One host's side of the fuzz suite (selftests/fuzz_test.sh boots two
# scripts/vm-run guests that both run this; SMR_HOST says which one).
#
# Each host starts smr_fuzz_echo (SMR listeners on ports PORT..PORT+3,
# IPv4 and IPv6) and then runs trinity as uid 65534, in rounds, until
# SMR_FUZZ_SECONDS are spent: host A with trinity's PF_INET sockets, host
# B with PF_INET6, both turned into SMR sockets by libsmr-fuzz-shim.so
# (smr_fuzz_shim.c says how), which also aims trinity's loopback addresses
# at this host and its peer over soft-RoCE and folds its ports onto
# PORT..PORT+7, where the echoes and trinity's own listeners are. Each
# round is a fresh trinity (seed SEED+ROUND) with a fresh pool of 50 SMR
# sockets; it ends after SMR_FUZZ_OPS system calls, fewer for the last
# rounds so that the last ends about when the time is up.
# Only socket calls and the calls that take a socket's fd (read, write,
# poll, epoll, splice, sendfile, ioctl, fcntl) are enabled, and only
# trinity's 64-bit ones: its 32-bit calls get its 64-bit pointers truncated
# and fail with EFAULT before SMR sees them. Its fds are sockets, pipes
# (for splice) and epoll sets, nothing else.
#
# Once both hosts' trinity is done, the echo stops and every SMR socket must
# be gone (sockets_active 0, /proc/net/smr/conns empty) within
# SMR_FUZZ_DRAIN seconds (default 150: a closed RDMA connection may wait
# net.smr.orphan_timeout_ms, 60 s, for its peer). vm-run then unloads smr
# and, on the debug kernel, scans kmemleak; a splat anywhere fails the run.
#
# Host A writes its verdicts to $SMR_VM_OUT/results ("ID ok|fail SUMMARY",
# IDs as in fuzz_test.sh) with diagnostics in diag-ID.txt; each host writes
# its figures to $SMR_VM_OUT/figures and trinity's per-round output to
# $SMR_VM_OUT/trinity-rN.txt. The hosts meet through files in each other's
# out directory (both see the whole run directory).
#
# Environment: SMR_FUZZ_SECONDS (default 300), SMR_FUZZ_OPS (per round,
# default 1000: each round's fresh pool adds 50 SMR sockets to the 4% of
# calls that are socket()), SMR_FUZZ_CHILDREN (trinity -C, default 4),
# SMR_FUZZ_SEED (first round's seed, default random), SMR_FUZZ_PORT
# (default 7200), SMR_FUZZ_MIN_SOCKETS (SMR sockets each host must create,
# default 500), SMR_FUZZ_FAMILY (the family the shim maps to, default the
# module's: a wrong one shows the suite failing), SMR_FUZZ_DRAIN.
set -uo pipefail

here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=$top/build/fuzz
seconds=${SMR_FUZZ_SECONDS:-300}
ops=${SMR_FUZZ_OPS:-1000}
children=${SMR_FUZZ_CHILDREN:-4}
seed=${SMR_FUZZ_SEED:-$(( (RANDOM << 15 | RANDOM) + 1 ))}
port=${SMR_FUZZ_PORT:-7200}
min_sockets=${SMR_FUZZ_MIN_SOCKETS:-500}
drain=${SMR_FUZZ_DRAIN:-150}
me=$SMR_HOST
peer=b
[ "$me" = a ] || peer=a
out=$SMR_VM_OUT
peer_out=$(dirname "$out")/$peer
work=/tmp/fuzz
export PATH="$PATH:/usr/sbin:/sbin"

# What trinity may call: the socket API and what takes a socket's fd.
# One call per kernel path: readv/writev, select/ppoll/epoll_pwait would
# reach SMR as read/write, poll and epoll_wait do; trinity never runs
# close and pselect6 (AVOID in its tables).
calls=(socket bind connect listen accept accept4 shutdown getsockname
	getpeername setsockopt getsockopt sendto recvfrom sendmsg recvmsg
	sendmmsg recvmmsg read write splice sendfile poll epoll_create1
	epoll_ctl epoll_wait ioctl fcntl)

smr_stat() {
	awk -v k="$1" '$1 == k { print $2 }' /proc/net/smr/stats 2>/dev/null
}

# wait_file FILE SECONDS
wait_file() {
	local i
	for ((i = 0; i < $2 * 5; i++)); do
		[ -e "$1" ] && return 0
		sleep 0.2
	done
	return 1
}

figure() {	# figure KEY VALUE: one line of this host's figures
	echo "$1=$2" >>"$out/figures"
}

mkdir -p "$work" "$out"
rm -f "$out/figures" "$out/results" "$out"/diag-*.txt "$out"/fuzz.*
chmod 1777 "$work"
domain=INET6
[ "$me" = b ] || domain=INET
problems=()

for f in "$bin/libsmr-fuzz-shim.so" "$bin/smr_fuzz_echo"; do
	[ -e "$f" ] || problems+=("$f missing (make -C selftests/fuzz)")
done
command -v trinity >/dev/null || problems+=("trinity is not installed (scripts/install-deps)")
[ -r /proc/net/smr/stats ] || problems+=("smr is not loaded")

echo "# host $me: trinity -P $domain for $seconds s, rounds of $ops calls, $children children, first seed $seed"

created0=$(smr_stat sockets_created)
rdma0=$(smr_stat mode_rdma)
hs0=$(smr_stat handshakes_completed)
accepts0=$(smr_stat accepts)

"$bin/smr_fuzz_echo" -p "$port" -n 4 -s "$seed" -R "$work/echo.ready" \
	>"$work/echo.out" 2>&1 &
echo_pid=$!
wait_file "$work/echo.ready" 30 || problems+=("smr_fuzz_echo did not listen: $(cat "$work/echo.out")")
: >"$out/fuzz.listening"
# the peer's listeners must be there before trinity aims at them
wait_file "$peer_out/fuzz.listening" 120 || problems+=("host $peer never listened")

shim_env=(
	LD_PRELOAD="$bin/libsmr-fuzz-shim.so"
	SMR_FUZZ_ADDRS="$SMR_SELF_ADDR,$SMR_PEER_ADDR,$SMR_SELF_ADDR6,$SMR_PEER_ADDR6"
	SMR_FUZZ_PORTS="$port:8"
)
[ -z "${SMR_FUZZ_FAMILY:-}" ] || shim_env+=(SMR_FUZZ_FAMILY="$SMR_FUZZ_FAMILY")
fd_kinds=sockets,pipes,epoll
trinity_args=(-q -l off -a 64 -P "$domain" -C "$children" --stats
	"--enable-fds=$fd_kinds")
for c in "${calls[@]}"; do
	trinity_args+=(-c "$c")
done

rounds=0
syscalls=0
round_fail=()
t0=$SECONDS
deadline=$((t0 + seconds))
rate=0		# calls per second so far, to size the rounds
while [ ${#problems[@]} = 0 ] && [ $SECONDS -lt $deadline ]; do
	left=$((deadline - SECONDS))
	# trinity cannot be stopped in time (on SIGINT it may reap a lost
	# child forever): each round ends by its call count, sized to the
	# time left once the rate is known (a short first round measures it)
	n=$ops
	if [ "$rate" = 0 ]; then
		[ "$n" -le 1000 ] || n=1000
	elif [ $((rate * left)) -lt "$n" ]; then
		n=$((rate * left))
	fi
	[ "$n" -ge 200 ] || break
	s=$((seed + rounds))
	rounds=$((rounds + 1))
	dir=$work/r$rounds
	mkdir -p "$dir"
	chown 65534:65534 "$dir"
	c0=$(smr_stat sockets_created)
	r0=$SECONDS
	# a round far past its time is stuck in the kernel: kill it
	(cd "$dir" && timeout -s KILL $((left * 2 + 300)) \
		env "${shim_env[@]}" \
		setpriv --reuid=65534 --regid=65534 --clear-groups \
		trinity "${trinity_args[@]}" -N "$n" -s "$s") >"$out/trinity-r$rounds.txt" 2>&1
	rc=$?
	ran=$(sed -n 's/.*Ran \([0-9]*\) syscalls.*/\1/p' "$out/trinity-r$rounds.txt" | tail -n 1)
	if [ -z "$ran" ]; then
		round_fail+=("round $rounds (seed $s) exited $rc without its totals: $(grep -v '^ ' "$out/trinity-r$rounds.txt" | tail -n 3 | tr '\n' ' ')")
		ran=0
	fi
	syscalls=$((syscalls + ran))
	rate=$((syscalls / (SECONDS - t0 > 0 ? SECONDS - t0 : 1)))
	echo "# host $me round $rounds seed $s: $ran calls in $((SECONDS - r0)) s, SMR sockets +$(( $(smr_stat sockets_created) - c0 ))"
	rm -rf "$dir"
	# a round that cannot even start (bad shim setting) ends the run
	[ "$ran" -gt 0 ] || break
done
fuzz_s=$((SECONDS - t0))
: >"$out/fuzz.trinity-done"

created=$(( $(smr_stat sockets_created) - created0 ))
rdma=$(( $(smr_stat mode_rdma) - rdma0 ))
hs=$(( $(smr_stat handshakes_completed) - hs0 ))
accepts=$(( $(smr_stat accepts) - accepts0 ))

# the peer's trinity may still connect to this host's echo
wait_file "$peer_out/fuzz.trinity-done" $((seconds + 300)) ||
	problems+=("host $peer's trinity never finished")
kill -TERM "$echo_pid" 2>/dev/null
wait "$echo_pid"
echo_line=$(grep '^echo ' "$work/echo.out" | tail -n 1)
kv() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<" $echo_line"; }

left_active=
for ((i = 0; i < drain * 5; i++)); do
	if [ "$(smr_stat sockets_active)" = 0 ] &&
		[ "$(awk 'NR > 1' /proc/net/smr/conns | wc -l)" = 0 ]; then
		left_active=0
		break
	fi
	sleep 0.2
done
drain_s=$((i / 5))
if [ -z "$left_active" ]; then
	left_active=$(smr_stat sockets_active)
	{
		echo "host $me after ${drain}s: sockets_active $left_active"
		head -n 20 /proc/net/smr/conns
	} >"$out/leftover.txt"
fi

figure problems "${problems[*]:-}${round_fail[*]:+ ${round_fail[*]}}"
figure domain "$domain"
figure seconds "$fuzz_s"
figure rounds "$rounds"
figure first_seed "$seed"
figure syscalls "$syscalls"
figure sockets_created "$created"
figure mode_rdma "$rdma"
figure handshakes "$hs"
figure accepts "$accepts"
figure echo_accepted "$(kv accepted)"
figure echo_self "$(kv self)"
figure echo_remote "$(kv remote)"
figure echo_rdma "$(kv rdma)"
figure echo_bytes "$(kv bytes_in)"
figure sockets_active "$left_active"
figure drain_seconds "$drain_s"
cp /proc/net/smr/stats "$out/stats-end.txt"
: >"$out/fuzz.done"
[ "$me" = a ] || exit 0

# ---- host A judges both hosts ----
wait_file "$peer_out/fuzz.done" $((drain + 120)) || true
get() {	# get HOST KEY
	local d=$out
	[ "$1" = a ] || d=$peer_out
	sed -n "s/^$2=//p" "$d/figures" 2>/dev/null | tail -n 1
}
result() {	# result ID ok|fail SUMMARY [DIAG FILE CONTENT...]
	local id=$1 v=$2 s=$3
	shift 3
	echo "$id $v $s" >>"$out/results"
	[ $# = 0 ] || printf '%s\n' "$@" >"$out/diag-$id.txt"
}

# Each check gathers a verdict, a summary and diagnostics, and records
# them with check_done ID, which starts the next check afresh.
check_start() {
	verdict=ok
	sum=
	diag=()
}
fail() {	# fail DIAG...: the current check failed, saying why
	verdict=fail
	diag+=("$@")
}
check_done() {	# check_done ID
	result "$1" "$verdict" "$sum" "${diag[@]}"
	check_start
}

check_start
for h in a b; do
	if [ ! -s "$( [ $h = a ] && echo "$out" || echo "$peer_out")/figures" ]; then
		fail "host $h reported nothing"
		continue
	fi
	p=$(get $h problems)
	[ -z "$p" ] || fail "host $h: $p"
	[ "$(get $h syscalls)" -gt 0 ] 2>/dev/null || fail "host $h: trinity ran no syscall"
	sum+="$h: $(get $h syscalls) calls ($(get $h domain)) in $(get $h rounds) rounds, $(get $h seconds) s, first seed $(get $h first_seed); "
done
check_done trinity

for h in a b; do
	n=$(get $h sockets_created)
	r=$(get $h mode_rdma)
	if ! [ "${n:-0}" -ge "$min_sockets" ] 2>/dev/null; then
		fail "host $h: only ${n:-0} SMR sockets created (want $min_sockets): trinity did not reach SMR"
	fi
	if ! [ "${r:-0}" -gt 0 ] 2>/dev/null; then
		fail "host $h: no connection ran in mode rdma"
	fi
	sum+="$h: $n SMR sockets, $(get $h handshakes) handshakes, $r in mode rdma, $(get $h accepts) accepted; echo took $(get $h echo_accepted) ($(get $h echo_self) from itself, $(get $h echo_remote) from the peer, $(get $h echo_rdma) rdma, $(get $h echo_bytes) bytes); "
done
ra=$(get a echo_remote) rb=$(get b echo_remote)
sa=$(get a echo_self) sb=$(get b echo_self)
remote=$((${ra:-0} + ${rb:-0}))
self=$((${sa:-0} + ${sb:-0}))
if [ "$remote" -le 0 ] || [ "$self" -le 0 ]; then
	fail "connections to the echoes: $self from their own host, $remote from the peer (want both)"
fi
check_done sockets

for h in a b; do
	l=$(get $h sockets_active)
	if [ "$l" != 0 ]; then
		d=$out
		[ $h = a ] || d=$peer_out
		fail "host $h: sockets_active ${l:-?} after ${drain}s" "$(cat "$d/leftover.txt" 2>/dev/null)"
	fi
	sum+="$h: 0 after $(get $h drain_seconds) s; "
done
check_done drained
exit 0
