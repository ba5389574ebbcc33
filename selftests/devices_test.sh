#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# SMR's view of RDMA devices (/proc/net/smr/devices) follows them as they
# come and go and as their ports go down and up. Runs inside a guest:
#   scripts/vm-run --hosts 1 -- selftests/devices_test.sh
# TAP on stdout; exit 0 iff all passed.
set -uo pipefail

# shellcheck source=selftests/lib/tap.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/tap.sh"

# tap 0|1 description: a failure shows what SMR lists
tap() {
	tap_result "$1" "$2" /proc/net/smr/devices
}

# wait_for PATTERN [absent]: until /proc/net/smr/devices has (or lacks) it
wait_for() {
	for _ in $(seq 50); do
		if grep -qE "$1" /proc/net/smr/devices; then
			[ "${2:-}" = absent ] || return 0
		else
			[ "${2:-}" = absent ] && return 0
		fi
		sleep 0.2
	done
	return 1
}

echo "TAP version 13"
echo "1..6"
nic=$(rdma link show | sed -n 's/^link rxe0\/[0-9]* .* netdev \([^ ]*\).*/\1/p')
[ -n "$nic" ] || { echo "not ok 1 - rxe0 exists (rdma link show)"; exit 1; }

wait_for "^rxe0 1 ACTIVE $nic\$"
tap $? "rxe0 port 1 listed ACTIVE on $nic"

ip link set "$nic" down
wait_for "^rxe0 1 DOWN "
tap $? "port goes DOWN with its netdev"
ip link set "$nic" up
wait_for "^rxe0 1 ACTIVE "
tap $? "port comes back ACTIVE"

rdma link delete rxe0
wait_for "^rxe0 " absent
tap $? "a removed device disappears"
rdma link add rxe0 type rxe netdev "$nic"
wait_for "^rxe0 1 ACTIVE $nic\$"
tap $? "a new device appears, ACTIVE"

# SMR uses devices from the initial namespace only (its links live there):
# another namespace's list is empty, though the device is still listed here
ip netns add smrdev
[ "$(ip netns exec smrdev cat /proc/net/smr/devices | wc -l)" = 0 ] &&
	grep -q "^rxe0 1 " /proc/net/smr/devices
tap $? "a new network namespace lists no device; the initial one still does"
ip netns del smrdev

[ "$tap_failed" -eq 0 ]
