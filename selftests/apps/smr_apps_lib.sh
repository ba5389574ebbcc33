# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034
#
# Shared by the guest-side scripts of selftests/apps_test.sh and by
# scripts/demo (sourced, never run). Runs inside scripts/vm-run guests:
# SMR_REPO, SMR_HOST, SMR_VM_OUT, SMR_SELF_ADDR*, SMR_PEER_ADDR* are set.
#
# Host B runs a small control service on SMR_APPS_CTL_PORT (plain TCP: it is
# never started under smr_run, so it never touches SMR's counters). Host A
# asks it for B's /proc/net/smr/stats before and after each test, which
# gives per-test counter deltas on both ends, and for files B left in
# SMR_VM_OUT (checksums, server logs). See b_control.sh.

SMR_APPS_CTL_PORT=5999
SMR_APPS_STATS=/proc/net/smr/stats
SMR_RUN=$SMR_REPO/tools/smr_run
SMR_PROBE=$SMR_REPO/build/tools/smr-probe
export PATH="$PATH:/usr/sbin:/sbin"

# Counters that say how many bytes SMR moved by RDMA. Bytes that fell back
# to the inner TCP connection (tcp_bytes_*) do not count: between two hosts
# with soft-RoCE every application byte must travel by RDMA.
smr_apps_bytes_sent_names="rdma_bytes_sent"
smr_apps_bytes_received_names="rdma_bytes_received"

# Soft-RoCE device counters ("name value" lines) of this host's rxe0, port 1.
smr_apps_rxe_counters() {
	local f
	for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
		[ -r "$f" ] && printf '%s %s\n' "${f##*/}" "$(cat "$f")"
	done
}

smr_apps_have_stats() {
	[ -r "$SMR_APPS_STATS" ]
}

# smr_apps_ctl REQUEST [TIMEOUT]: one request to host B's control service;
# the reply goes to stdout. bash's /dev/tcp makes a plain TCP socket (this
# shell is not under smr_run).
smr_apps_ctl() {
	# shellcheck disable=SC2016
	timeout "${2:-60}" bash -c '
		exec 5<>"/dev/tcp/$0/$1" || exit 1
		printf "%s\n" "$2" >&5
		cat <&5' "$SMR_PEER_ADDR" "$SMR_APPS_CTL_PORT" "$1"
}

# Wait until host B says its servers are all listening.
smr_apps_wait_b() {
	local reply
	for _ in $(seq "${1:-180}"); do
		reply=$(smr_apps_ctl ping 5 2>/dev/null) || reply=
		[ "$reply" = ready ] && return 0
		sleep 1
	done
	return 1
}

# smr_apps_snap DIR TAG: save this host's and host B's counters as
# DIR/TAG.a and DIR/TAG.b.
smr_apps_snap() {
	local dir=$1 tag=$2
	cat "$SMR_APPS_STATS" >"$dir/$tag.a" 2>/dev/null || : >"$dir/$tag.a"
	smr_apps_ctl stats 30 >"$dir/$tag.b" 2>/dev/null || : >"$dir/$tag.b"
}

# smr_apps_stat FILE NAME...: the sum of the named counters in FILE
# ("" if FILE has none of them).
smr_apps_stat() {
	local f=$1
	shift
	awk -v names=" $* " '
		index(names, " " $1 " ") { s += $2; n++ }
		END { if (n) print s }' "$f"
}

# smr_apps_delta DIR TAG1 TAG2 a|b NAME...: how much the named counters
# grew on that host between two snapshots ("" if unknown).
smr_apps_delta() {
	local dir=$1 t1=$2 t2=$3 h=$4 v1 v2
	shift 4
	v1=$(smr_apps_stat "$dir/$t1.$h" "$@")
	v2=$(smr_apps_stat "$dir/$t2.$h" "$@")
	[ -n "$v1" ] && [ -n "$v2" ] || return 0
	echo $((v2 - v1))
}

# smr_apps_delta_table DIR TAG1 TAG2: every counter that moved, both hosts,
# as "name  A +n  B +n" lines.
smr_apps_delta_table() {
	local dir=$1 t1=$2 t2=$3
	awk -v fa1="$dir/$t1.a" -v fa2="$dir/$t2.a" \
	    -v fb1="$dir/$t1.b" -v fb2="$dir/$t2.b" '
		function load(f, arr,    line, p) {
			while ((getline line < f) > 0) {
				split(line, p, " ")
				arr[p[1]] = p[2]
				if (!(p[1] in seen)) {
					seen[p[1]] = 1
					order[++n] = p[1]
				}
			}
			close(f)
		}
		BEGIN {
			load(fa1, a1); load(fa2, a2); load(fb1, b1); load(fb2, b2)
			for (i = 1; i <= n; i++) {
				k = order[i]
				da = a2[k] - a1[k]; db = b2[k] - b1[k]
				if (da == 0 && db == 0)
					continue
				printf "  %-28s A %+12d   B %+12d\n", k, da, db
			}
		}'
}
