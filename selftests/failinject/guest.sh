#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Allocation failures at smr.ko's call sites (runs in one debug-kernel
# guest; selftests/failinject_test.sh boots it). failslab and
# fail_page_alloc fail allocations with probability P percent, but only
# those with a frame of smr.ko on the stack (the stack-trace filter set to
# the module's address range): SMR's own kmallocs and vmallocs and what
# the RDMA core and rxe allocate on its behalf (PDs, CQs, QPs, MRs), in
# process, workqueue and softirq context alike. Each round runs
# connections to this host over soft-RoCE with pseudo-random streams both
# ways (build/rdma/smr_stream); every connection must either carry its
# stream intact (in mode rdma, or in mode tcp with a fallback reason) or
# end with a clear errno, never hang or deliver a wrong byte, and once the
# round is over no SMR socket may be left (sockets_active back to its
# baseline). Then injection stops: a clean round must run in mode rdma,
# buffer_bytes_pinned and the links must drain, and vm-run's rmmod and
# kmemleak scan follow.
#
# TAP on stdout. Environment: SMR_FAIL_ROUNDS (default 120),
# SMR_FAIL_PERCENT (default 3), SMR_FAIL_CONNS per round (default 4).
set -uo pipefail

rounds=${SMR_FAIL_ROUNDS:-120}
percent=${SMR_FAIL_PERCENT:-3}
conns=${SMR_FAIL_CONNS:-4}
stream=$SMR_REPO/build/rdma/smr_stream
addr=$SMR_SELF_ADDR
work=/tmp/failinject
out=${SMR_VM_OUT:-$work}
dbg=/sys/kernel/debug
mkdir -p "$work" "$out"

n=0
fails=0
tap() {	# tap ok|fail DESCRIPTION [DIAG...]
	n=$((n + 1))
	local v=$1 d=$2
	shift 2
	if [ "$v" = ok ]; then
		echo "ok $n - $d"
	else
		echo "not ok $n - $d"
		fails=$((fails + 1))
	fi
	[ $# = 0 ] || printf '# %s\n' "$@"
}

stat() {
	awk -v k="$1" '$1 == k { print $2 }' /proc/net/smr/stats
}

set_attr() {	# set_attr DIR KEY VALUE
	echo "$3" >"$dbg/$1/$2" 2>/dev/null
}

inject() {	# inject on|off
	local d p=0
	[ "$1" = on ] && p=$percent
	for d in failslab fail_page_alloc; do
		set_attr $d probability "$p"
	done
}

echo "TAP version 13"
echo "1..4"

mountpoint -q $dbg || mount -t debugfs none $dbg
if [ ! -d $dbg/failslab ] || [ ! -e $dbg/failslab/require-start ]; then
	tap fail "fault injection available (failslab with a stack-trace filter)" \
		"this kernel has no $dbg/failslab/require-start: run on the debug kernel (make check-debug)"
	exit 1
fi
# (the guests have no /dev/fd: no process substitution)
read -r _ size _ _ _ base _ <<<"$(awk '$1 == "smr"' /proc/modules)"
if [ -z "${base:-}" ]; then
	tap fail "smr.ko loaded" "smr is not in /proc/modules"
	exit 1
fi
# kernel addresses overflow bash's signed arithmetic: print them unsigned
start=$(printf '%u' "$base")
end=$(printf '%u' "$((base + size))")
for d in failslab fail_page_alloc; do
	set_attr $d probability 0
	set_attr $d interval 1
	set_attr $d times 1000000	# what is left of it counts the failures
	set_attr $d space 0
	set_attr $d verbose 2
	set_attr $d task-filter N
	set_attr $d ignore-gfp-wait N
	set_attr $d require-start "$start"
	set_attr $d require-end "$end"
	set_attr $d stacktrace-depth 32
done
set_attr failslab cache-filter N
set_attr fail_page_alloc ignore-gfp-highmem N
set_attr fail_page_alloc min-order 0

# round NAME MODE: one server and one client of $conns connections each
round() {
	local name=$1 mode=$2 port=$((7000 + RANDOM % 2000))
	rm -f "$work/$name.ready"
	"$stream" server -a "$addr" -p "$port" -n "$conns" -s 65536 -m 16384 \
		-M "$mode" -T 20 -R "$work/$name.ready" \
		>"$work/$name.server" 2>&1 &
	local spid=$!
	for _ in $(seq 100); do
		[ -e "$work/$name.ready" ] && break
		sleep 0.05
	done
	"$stream" client -a "$addr" -p "$port" -n "$conns" -s 65536 -m 16384 \
		-M "$mode" -T 20 >"$work/$name.client" 2>&1
	# a child the handshake failed never reaches accept(): the server
	# waits for it until its deadline; end it once the client is done
	sleep 1
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}

# judge FILE: every connection line either ok=1, or an errno that ended it
# before or while moving data, with no wrong byte; prints the bad ones
judge() {
	awk '/^conn / {
		ok = 0; err = ""; at = ""; bad = "-1"
		for (i = 2; i <= NF; i++) {
			split($i, kv, "=")
			if (kv[1] == "ok") ok = kv[2]
			if (kv[1] == "err") err = kv[2]
			if (kv[1] == "at") at = kv[2]
			if (kv[1] == "rx_bad") bad = kv[2]
		}
		if (bad != "-1") { print "wrong byte at " bad ": " $0; next }
		if (ok == 1) next
		if (at == "deadline" || at == "hang" || err == "0" || err == "") {
			print "stuck or no errno: " $0; next
		}
	}' "$1"
}

wait_sockets() {	# wait_sockets BASELINE: sockets_active back to it (10 s)
	for _ in $(seq 100); do
		[ "$(stat sockets_active)" -le "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# the reports go to the kernel log only: a serial console is slow enough
# under TCG to change the timing of what is tested
dmesg -n 1
# warm up: the link exists before the baseline
round warm rdma
warm_bad=$(judge "$work/warm.client")
base_active=$(stat sockets_active)
dmesg -C

inject on
bad_rounds=0
stuck=0
ok_conns=0
err_conns=0
fallbacks=0
declare -A errnos
for r in $(seq "$rounds"); do
	round "r$r" any
	b=$(judge "$work/r$r.client")
	if [ -n "$b" ]; then
		bad_rounds=$((bad_rounds + 1))
		[ "$bad_rounds" -gt 5 ] || printf '%s\n' "round $r: $b" >>"$work/bad.txt"
	fi
	ok_conns=$((ok_conns + $(grep -c '^conn .* ok=1' "$work/r$r.client")))
	fallbacks=$((fallbacks + $(grep '^conn .* ok=1' "$work/r$r.client" | grep -vc ' mode=rdma ')))
	while read -r e; do
		[ -n "$e" ] || continue
		errnos[$e]=$(( ${errnos[$e]:-0} + 1 ))
		err_conns=$((err_conns + 1))
	done <<<"$(grep '^conn ' "$work/r$r.client" | grep -v ' ok=1' | sed -n 's/.* err=\([A-Z0-9]*\).*/\1/p')"
	if ! wait_sockets "$base_active"; then
		stuck=$((stuck + 1))
		echo "round $r: sockets_active $(stat sockets_active), baseline $base_active" >>"$work/bad.txt"
		# let it settle so one stuck socket does not fail every round
		base_active=$(stat sockets_active)
	fi
done
inject off

injected=0
for d in failslab fail_page_alloc; do
	injected=$((injected + 1000000 - $(cat "$dbg/$d/times")))
done
# the first smr frame of each injected failure's stack: its call site
# (a reliable frame "func+0x../0x.. [smr]", not a "? " guess)
dmesg | awk '/FAULT_INJECTION: forcing a failure/ { want = 1; next }
	want && /\+0x[0-9a-f]+\/0x[0-9a-f]+ \[smr\]/ && !/ \? / {
		sub(/^.*\] +/, ""); sub(/\+0x.*/, ""); print; want = 0 }' |
	sort | uniq -c | sort -rn >"$work/sites.txt"
cp "$work/sites.txt" "$out/failinject-sites.txt" 2>/dev/null
sites=$(wc -l <"$work/sites.txt")
errs=$(for e in "${!errnos[@]}"; do printf '%s:%s ' "$e" "${errnos[$e]}"; done)

if [ "$injected" -gt 0 ] && [ "$bad_rounds" = 0 ]; then
	tap ok "$rounds rounds of $conns connections with ${percent}% of smr's allocations failing: every connection intact or ended by an errno" \
		"$injected allocations failed; call sites of the last ones the kernel log kept: $sites; connections: $ok_conns intact ($fallbacks of them on TCP), $err_conns ended by an errno (${errs:-none})"
else
	tap fail "$rounds rounds of $conns connections with ${percent}% of smr's allocations failing: every connection intact or ended by an errno" \
		"$injected allocations failed (0 means the filter matched nothing); $bad_rounds rounds had a stuck connection or a wrong byte" \
		"$(head -c 3000 "$work/bad.txt" 2>/dev/null)"
fi
if [ "$stuck" = 0 ]; then
	tap ok "after every round no SMR socket is left (sockets_active back to $base_active within 10 s)"
else
	tap fail "after every round no SMR socket is left" "$stuck rounds left sockets behind" \
		"$(grep sockets_active "$work/bad.txt" | head -n 5)"
fi

round clean rdma
clean_bad=$(judge "$work/clean.client")
clean_ok=$(grep -c '^conn .* ok=1' "$work/clean.client")
if [ -z "$clean_bad" ] && [ -z "$warm_bad" ] && [ "$clean_ok" = "$conns" ]; then
	tap ok "injection off: $conns new connections run in mode rdma, intact"
else
	tap fail "injection off: $conns new connections run in mode rdma, intact" \
		"$clean_ok of $conns ok" "$(head -n 5 "$work/clean.client")" "$warm_bad"
fi

drained=0
for _ in $(seq 150); do
	if [ "$(awk 'NR > 1' /proc/net/smr/conns | wc -l)" = 0 ]; then
		drained=1
		break
	fi
	sleep 0.2
done
pinned=$(stat buffer_bytes_pinned)
if [ "$drained" = 1 ]; then
	tap ok "every connection left /proc/net/smr/conns (buffer_bytes_pinned $pinned in the link's pool; rmmod and kmemleak follow in vm-run)"
else
	tap fail "every connection left /proc/net/smr/conns" "$(head -n 5 /proc/net/smr/conns)"
fi
[ "$fails" = 0 ]
