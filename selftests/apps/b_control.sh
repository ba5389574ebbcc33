#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One request to host B's control service (socat runs this per connection,
# with the connection on stdin/stdout). Plain TCP, never under smr_run.
#
#   ping          "ready" once b_servers.sh has every server listening
#   stats         B's /proc/net/smr/stats
#   rxe           B's soft-RoCE (rxe0) hw_counters, "name value" lines
#   file NAME     the file NAME from B's SMR_VM_OUT, waiting up to 240 s
#                 for it to appear (checksums are written when a transfer
#                 ends); "missing" if it never does
set -uo pipefail

read -r cmd arg || exit 0
case $cmd in
ping)
	if [ -e "$SMR_VM_OUT/ready" ]; then echo ready; else echo starting; fi
	;;
stats)
	cat /proc/net/smr/stats
	;;
rxe)
	# shellcheck source=selftests/apps/smr_apps_lib.sh
	. "$SMR_REPO/selftests/apps/smr_apps_lib.sh"
	smr_apps_rxe_counters
	;;
file)
	# Only plain names inside SMR_VM_OUT.
	[[ $arg =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "bad name"; exit 0; }
	for _ in $(seq 480); do
		[ -e "$SMR_VM_OUT/$arg" ] && break
		sleep 0.5
	done
	if [ -e "$SMR_VM_OUT/$arg" ]; then cat "$SMR_VM_OUT/$arg"; else echo missing; fi
	;;
*)
	echo "unknown request"
	;;
esac
