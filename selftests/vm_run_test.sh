#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Tests of scripts/vm-run itself (the QEMU guest runner). Prints TAP and
# exits 0 only if every test passed. Six guest boots (about 2-3 minutes
# under TCG).
#
#   selftests/vm_run_test.sh
#
# Uses kernel/smr.ko when it has been built (make at the repo root), so the
# insmod/rmmod path is covered too; without it the guests run --no-smr.
# SMR_VM_TEST_NO_SMR=1 forces --no-smr.
set -uo pipefail

repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
vm_run=$repo/scripts/vm-run
# Under the checkout, not /tmp: guests see the host's files but have their
# own /tmp.
mkdir -p "$repo/build/vm"
tmp=$(mktemp -d "$repo/build/vm/selftest.XXXXXX")

smr_opts=()
if [ "${SMR_VM_TEST_NO_SMR:-0}" = 1 ] || [ ! -f "$repo/kernel/smr.ko" ]; then
	smr_opts=(--no-smr)
fi

test_num=0
test_failed=0
smr_tap() {
	local ok=$1 desc=$2
	test_num=$((test_num + 1))
	if [ "$ok" = 0 ]; then
		echo "ok $test_num - $desc"
	else
		echo "not ok $test_num - $desc"
		test_failed=$((test_failed + 1))
	fi
}

# smr_check DESC COMMAND...: one TAP line for the command's success.
smr_check() {
	local desc=$1
	shift
	"$@" >/dev/null 2>&1
	smr_tap $? "$desc"
}

# smr_vm NAME ARGS...: run vm-run; stdout, stderr, status and run directory
# of the run are left in $tmp/NAME.{out,err,rc} and $tmp/NAME.run/.
smr_vm() {
	local name=$1 t0=$SECONDS rc
	shift
	SMR_VM_RUN_DIR=$tmp/$name.run "$vm_run" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	rc=$?
	echo "$rc" >"$tmp/$name.rc"
	echo "# vm-run $name: exit status $rc after $((SECONDS - t0)) s"
}

smr_rc() {
	cat "$tmp/$1.rc"
}

# Lines "check NAME ok" printed by a guest command.
# shellcheck disable=SC2317 # called through smr_check
smr_guest_ok() {
	grep -qx "check $2 ok" "$tmp/$1.out"
}

echo "TAP version 13"
echo "1..28"
[ ${#smr_opts[@]} -eq 0 ] || echo "# kernel/smr.ko not used: guests run ${smr_opts[*]}"

# --- argument errors never boot anything
"$vm_run" --hosts 3 -- true >/dev/null 2>&1
smr_tap $((! ($? == 2))) "--hosts 3 is rejected with status 2"
"$vm_run" --no-smr --b true -- true >/dev/null 2>&1
smr_tap $((! ($? == 2))) "--b without --hosts 2 is rejected with status 2"

# --- exit status propagation
smr_vm false "${smr_opts[@]}" -- false
smr_tap $((! ($(smr_rc false) == 1))) "'-- false' makes vm-run fail with status 1"

smr_vm true "${smr_opts[@]}" -- 'printf "hello from A\n"; true'
smr_tap "$(smr_rc true)" "'-- true' makes vm-run pass"
# Exactly the command's output on stdout: no kernel console lines.
smr_check "host A's output comes through verbatim and alone on stdout" \
	diff <(printf 'hello from A\n') "$tmp/true.out"
smr_check "the guest console was saved" grep -q 'Linux version' "$tmp/true.run/console-a.log"

# --- one host: environment, network, soft-RoCE
cat >"$tmp/one-host.sh" <<'EOF'
repo=$1 mode=$2
check() { if eval "$2"; then echo "check $1 ok"; else echo "check $1 FAILED"; fi; }
check env-host '[ "$SMR_HOST" = a ]'
check env-addrs '[ "$SMR_SELF_ADDR $SMR_PEER_ADDR $SMR_SELF_ADDR6 $SMR_PEER_ADDR6" = "192.0.2.1 192.0.2.1 fd53:4d52::1 fd53:4d52::1" ]'
check env-repo '[ "$SMR_REPO" = "$repo" ] && [ "$(pwd)" = "$repo" ]'
check hostname '[ "$(cat /proc/sys/kernel/hostname)" = smr-a ]'
nic=$(rdma link show rxe0/1 | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
check rxe-active 'rdma link show rxe0/1 | grep -q "state ACTIVE"'
check addrs 'ip -o addr show dev "$nic" | grep -q "inet 192.0.2.1/24" && ip -o addr show dev "$nic" | grep -q "inet6 fd53:4d52::1/64"'
check mtu '[ "$(cat /sys/class/net/$nic/mtu)" = 4000 ]'
if [ "$mode" = smr ]; then
	check smr-loaded '[ -d /sys/module/smr ]'
else
	check smr-loaded '[ ! -d /sys/module/smr ]'
fi
gid=$(grep -l '0000:0000:0000:0000:0000:ffff:c000:0201' /sys/class/infiniband/rxe0/ports/1/gids/* | head -n 1)
gid=${gid##*/}
ibv_rc_pingpong -d rxe0 -g "$gid" -n 20 -s 4096 -c >/tmp/server.log 2>&1 &
ok=1
for i in 1 2 3 4 5 6 7 8 9 10; do
	sleep 1
	ibv_rc_pingpong -d rxe0 -g "$gid" -n 20 -s 4096 -c "$SMR_PEER_ADDR" >/tmp/client.log 2>&1 && { ok=0; break; }
done
wait $! && [ $ok = 0 ] && echo "check rxe-loopback ok" || { echo "check rxe-loopback FAILED"; cat /tmp/server.log /tmp/client.log; }
echo "artifact from A" >"$SMR_VM_OUT/note"
EOF
smr_vm one "${smr_opts[@]}" --mtu 4000 -- \
	bash "$tmp/one-host.sh" "$repo" "$([ ${#smr_opts[@]} -eq 0 ] && echo smr || echo no-smr)"
smr_tap "$(smr_rc one)" "--hosts 1 run passes"
smr_check "SMR_HOST is a" smr_guest_ok one env-host
smr_check "SMR_SELF/PEER_ADDR(6) are A's own addresses" smr_guest_ok one env-addrs
smr_check "SMR_REPO is the checkout and the command runs there" smr_guest_ok one env-repo
smr_check "hostname is smr-a" smr_guest_ok one hostname
smr_check "rxe0 exists and is ACTIVE" smr_guest_ok one rxe-active
smr_check "NIC has 192.0.2.1/24 and fd53:4d52::1/64" smr_guest_ok one addrs
smr_check "--mtu 4000 sets the NIC MTU" smr_guest_ok one mtu
smr_check "smr.ko loaded exactly when expected" smr_guest_ok one smr-loaded
smr_check "rxe loopback RC transfer with data check works" smr_guest_ok one rxe-loopback
smr_check "files in SMR_VM_OUT reach the host" \
	grep -qx 'artifact from A' "$tmp/one.run/out/a/note"

# --- two hosts: wire, IPv4/IPv6, RDMA across, B before A
cat >"$tmp/host-b.sh" <<'EOF'
echo "B is up"
gid=$(grep -l '0000:0000:0000:0000:0000:ffff:c000:0202' /sys/class/infiniband/rxe0/ports/1/gids/* | head -n 1)
ibv_rc_pingpong -d rxe0 -g "${gid##*/}" -n 50 -s 4096 -c
echo $? >"$SMR_VM_OUT/pingpong-status"
sleep infinity
EOF
cat >"$tmp/host-a.sh" <<'EOF'
touch "$SMR_VM_OUT/started"
busybox ping -c 3 -W 2 "$SMR_PEER_ADDR" && echo "check ping4 ok"
busybox ping6 -c 3 -W 2 "$SMR_PEER_ADDR6" && echo "check ping6 ok"
gid=$(grep -l '0000:0000:0000:0000:0000:ffff:c000:0201' /sys/class/infiniband/rxe0/ports/1/gids/* | head -n 1)
for i in 1 2 3 4 5 6 7 8 9 10; do
	ibv_rc_pingpong -d rxe0 -g "${gid##*/}" -n 50 -s 4096 -c "$SMR_PEER_ADDR" && { echo "check rdma ok"; break; }
	sleep 1
done
EOF
# shellcheck disable=SC2016 # $$ and $SMR_VM_OUT are B's
smr_vm two "${smr_opts[@]}" --hosts 2 --b 'echo $$ >"$SMR_VM_OUT/pid"; bash '"$tmp/host-b.sh" \
	-- bash "$tmp/host-a.sh"
smr_tap "$(smr_rc two)" "--hosts 2 run passes"
# vm-run's readiness file is written by B's command's own process (same
# PID as the script) and, by the host's clock, before A's command began.
# shellcheck disable=SC2317 # called through smr_check
smr_b_first() {
	local run=$tmp/two.run
	[ -s "$run/ctl/b.ready" ] && [ -s "$run/out/b/pid" ] &&
		[ "$(cat "$run/ctl/b.ready")" = "$(cat "$run/out/b/pid")" ] &&
		[ "$run/ctl/b.ready" -ot "$run/out/a/started" ]
}
smr_check "B's command started before A's" smr_b_first
smr_check "A pings B over IPv4" smr_guest_ok two ping4
smr_check "A pings B over IPv6" smr_guest_ok two ping6
smr_check "RC transfer with data check from A to B over rxe" smr_guest_ok two rdma
smr_check "B's side of the transfer succeeded" \
	grep -qx 0 "$tmp/two.run/out/b/pingpong-status"
smr_check "B's output reaches stdout prefixed [B]" grep -qx '\[B\] B is up' "$tmp/two.out"

# --- a crash on host B fails the run and names host B
smr_vm crash "${smr_opts[@]}" --hosts 2 --b 'sleep 1; echo c >/proc/sysrq-trigger' -- \
	'echo A waits; sleep 600'
smr_tap $((! ($(smr_rc crash) != 0))) "a crash on host B fails the run"
smr_check "the report names host B and shows its panic" \
	grep -q 'host B: kernel splat.*trace owner: core kernel' "$tmp/crash.err"
# A was stopped early instead of sleeping out its 600 s (or, on a loaded
# machine where B died before A's command began, never started it).
smr_check "host A was stopped once B went down" \
	grep -qE "A.s command was stopped|before A.s command started" "$tmp/crash.err"

# --- timeout
smr_vm timeout "${smr_opts[@]}" --timeout 40 -- 'sleep 600'
smr_check "--timeout kills the guest and says which host" \
	grep -q 'timeout on host A' "$tmp/timeout.err"

if [ "$test_failed" -gt 0 ]; then
	echo "# $test_failed test(s) failed; vm-run outputs kept in $tmp"
	exit 1
fi
rm -rf "$tmp"
exit 0
