#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Host B's side of selftests/rdma_test.sh (runs in a scripts/vm-run guest;
# host A's a_tests.sh drives it).
#
#   b_service.sh service    the control service: a plain TCP listener on
#                           RDMA_CTL_PORT (socat) that runs "b_service.sh
#                           handle" per request; runs until stopped
#   b_service.sh handle     one request: a line "VERB ARGS..." on stdin,
#                           the answer on stdout
#
# Verbs (functions b_VERB below): ping, serve NAME ARGS..., result NAME
# SECONDS, stop NAME, stats, links, rxe, res KIND, qps, smr_res, rxe_del,
# rxe_add, rmmod, insmod, unref SECONDS, kmemleak. smr_stream servers run
# detached, their output in $work; the service only starts, stops and
# reports them.
set -uo pipefail

# shellcheck source=selftests/rdma/rdma_lib.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/rdma_lib.sh"

work=/tmp/rdma-b

# start_detached NAME CMD...: run CMD in its own session, output in
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

b_ping() {
	echo pong
}

# serve NAME ARGS...: smr_stream server ARGS; "ok" once it listens.
b_serve() {
	local name=$1
	shift
	start_detached "$name" env SMR_EXPECT_MODE="${SMR_EXPECT_MODE:-rdma}" \
		"$RDMA_STREAM" server "$@" -R "$work/$name.ready"
	if rdma_wait_file "$work/$name.ready" 30 && [ ! -e "$work/$name.rc" ]; then
		echo ok
	else
		echo "fail: server $name did not start listening"
		cat "$work/$name.err" 2>/dev/null
	fi
}

# result NAME SECONDS: wait for server NAME to end (stopped after
# SECONDS), then its output and "rc=STATUS".
b_result() {
	local name=$1 secs=${2:-60} rc
	if ! rdma_wait_file "$work/$name.rc" "$secs"; then
		stop_detached "$name"
		sleep 0.2
		echo "rc=stopped after ${secs}s"
	fi
	cat "$work/$name.out" 2>/dev/null
	sed 's/^/stderr: /' "$work/$name.err" 2>/dev/null
	rc=$(cat "$work/$name.rc" 2>/dev/null) || rc=none
	echo "rc=$rc"
}

# trigger NAME: mark the moment for B's -F servers that wait on
# $work/NAME.trigger.
b_trigger() {
	: >"$work/$1.trigger"
	echo ok
}

b_stop() {
	stop_detached "$1"
	echo ok
}

b_stats() {
	rdma_stats
}

b_links() {
	rdma_links
}

b_rxe() {
	rdma_rxe_counters
}

b_res() {
	rdma_res "$1"
}

b_qps() {
	rdma_qps
}

b_smr_res() {
	rdma_smr_res
}

# rxe_del: take B's soft-RoCE device away. $work/loss.trigger marks the
# moment for B's own -F servers.
b_rxe_del() {
	local out rc
	rdma link show 2>/dev/null |
		sed -n 's/^link rxe0\/[0-9]* .* netdev \([^ ]*\).*/\1/p' >"$work/rxe.netdev"
	: >"$work/loss.trigger"
	out=$(timeout 120 rdma link delete rxe0 2>&1)
	rc=$?
	echo "rc=$rc"
	[ -z "$out" ] || echo "$out"
}

b_rxe_add() {
	local dev
	dev=$(cat "$work/rxe.netdev" 2>/dev/null)
	if [ -z "$dev" ]; then
		echo "fail: no saved netdev for rxe0"
		return
	fi
	if ! rdma link add rxe0 type rxe netdev "$dev" 2>&1; then
		echo "fail: rdma link add rxe0 on $dev"
		return
	fi
	for _ in $(seq 100); do
		rdma link show rxe0/1 2>/dev/null | grep -q 'state ACTIVE' && break
		sleep 0.1
	done
	if rdma link show rxe0/1 2>/dev/null | grep -q 'state ACTIVE'; then
		echo ok
	else
		echo "fail: rxe0 not ACTIVE: $(rdma link show rxe0/1 2>&1)"
	fi
}

b_rmmod() {
	rdma_rmmod
}

b_insmod() {
	rdma_insmod
}

b_unref() {
	rdma_wait_unref "${1:-10}"
}

b_kmemleak() {
	rdma_kmemleak
}

# Another suite on this bed brings its own b_VERB requests.
if [ -n "${SMR_RDMA_SUITE:-}" ] && [ "$SMR_RDMA_SUITE" != rdma ]; then
	suite_tests=()
	# shellcheck disable=SC1090
	. "$RDMA_DIR/suite_$SMR_RDMA_SUITE.sh"
fi

case ${1:-} in
service)
	mkdir -p "$work"
	echo "b_service: control service on port $RDMA_CTL_PORT"
	# -t: a request may take minutes after A has sent its line (result)
	exec socat -t 600 "TCP-LISTEN:$RDMA_CTL_PORT,reuseaddr,fork" \
		"EXEC:$RDMA_DIR/b_service.sh handle"
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
	echo "usage: b_service.sh service|handle" >&2
	exit 2
	;;
esac
