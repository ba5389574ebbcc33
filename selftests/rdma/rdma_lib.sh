# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034
#
# Shared by a_tests.sh and b_service.sh (sourced, inside scripts/vm-run
# guests). The tools are found next to these scripts, not through
# SMR_REPO: the guests may boot another checkout's smr.ko (rdma_test.sh's
# SMR_RDMA_VM_RUN), whose SMR_REPO then names that checkout.

RDMA_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RDMA_TOP=$(cd "$RDMA_DIR/../.." && pwd)
RDMA_STREAM=$RDMA_TOP/build/rdma/smr_stream
# The module the guest booted with (vm-guest-init insmods $SMR_KO, the one
# built for the kernel the guest runs; an older vm-run sets no SMR_KO).
RDMA_KO=${SMR_KO:-$SMR_REPO/kernel/smr.ko}
# Host B's control service (plain TCP, never SMR).
RDMA_CTL_PORT=7100
RDMA_STATS=/proc/net/smr/stats
RDMA_LINKS=/proc/net/smr/links
RDMA_RXE_COUNTERS=/sys/class/infiniband/rxe0/ports/1/hw_counters
export PATH="$PATH:/usr/sbin:/sbin"

# rdma_rxe_counters: this host's rxe0 port 1 hw_counters, "name value".
rdma_rxe_counters() {
	local f
	for f in "$RDMA_RXE_COUNTERS"/*; do
		[ -r "$f" ] && printf '%s %s\n' "${f##*/}" "$(cat "$f")"
	done
	return 0
}

# rdma_kv FILE NAME: the value of NAME in a "name value" file, "" if none.
rdma_kv() {
	awk -v n="$2" '$1 == n { print $2; exit }' "$1" 2>/dev/null
}

# rdma_stats: this host's /proc/net/smr/stats (empty without the module).
rdma_stats() {
	cat "$RDMA_STATS" 2>/dev/null
	return 0
}

# rdma_links: this host's /proc/net/smr/links, or one line "missing ...".
rdma_links() {
	if [ -r "$RDMA_LINKS" ]; then
		cat "$RDMA_LINKS"
	else
		echo "missing $RDMA_LINKS"
	fi
}

# rdma_links_count FILE [STATE]: link lines (after the header) in a saved
# links file ("-": stdin; the guests have no /dev/fd for "<(...)"), only
# those in STATE if given; "" if the file said missing.
rdma_links_count() {
	awk -v st="${2:-}" '
		NR == 1 && $1 == "missing" { miss = 1; exit }
		NR > 1 && NF >= 7 && (st == "" || $3 == st) { n++ }
		END { if (!miss) print n + 0 }' "$1"
}

# rdma_links_conns FILE: the CONNS column of the active link lines, space
# separated.
rdma_links_conns() {
	awk 'NR > 1 && NF >= 7 && $3 == "active" { printf "%s%s", s, $7; s = " " }' "$1"
}

# rdma_res KIND: "rdma res show KIND" lines (qp, mr, pd, cq, cm_id).
rdma_res() {
	rdma res show "$1" 2>&1
	return 0
}

# rdma_qps: the QPs with the cm_ids before them ("rdma res show cm_id",
# then "rdma res show qp"), for rdma_res_count.
rdma_qps() {
	rdma res show cm_id 2>&1
	rdma res show qp 2>&1
	return 0
}

# Which QPs are smr's. PDs, CQs, MRs and cm_ids of a kernel module carry
# its name ("comm [smr]"), but a QP made by rdma_create_qp() carries
# rdma_cm's ("comm [rdma_cm]"); the cm_id it belongs to names it ("lqpn N"
# on a cm_id line of smr). So a QP is smr's if its comm names smr or an smr
# cm_id names its number on its port. With "strict", any kernel QP of
# rdma_cm counts as well: in these guests smr is rdma_cm's only kernel user,
# and a QP left behind without its cm_id shows no other way.
# shellcheck disable=SC2016 # awk's own $ fields
RDMA_SMR_QP_AWK='
	function lqpn(    i) {
		for (i = 1; i < NF; i++)
			if ($i == "lqpn")
				return $(i + 1)
		return ""
	}
	function is_smr() { return $0 ~ /comm \[?[^ ]*smr/ }
	{ kind = ""; qp = 0 }
	/^link .* cm-idn / {
		kind = "cm_id"
		if (is_smr() && lqpn() != "")
			cmid[$2 " " lqpn()] = 1
	}
	kind == "" && /^link .* lqpn [0-9]+ (.* )?type / {
		kind = "qp"
		qp = is_smr() || (($2 " " lqpn()) in cmid) ||
		     (strict && $0 ~ /comm \[rdma_cm\]/)
	}
'

# rdma_res_count FILE [smr]: QP lines in a saved rdma_qps output; with
# "smr" only smr's.
rdma_res_count() {
	awk -v only="${2:-}" "$RDMA_SMR_QP_AWK"'
		kind == "qp" && (only == "" || qp) { n++ }
		END { print n + 0 }' "$1"
}

# rdma_smr_res: every rdma resource of smr on this host (cm_id, qp, pd,
# cq, mr; QPs the strict way), "KIND: line" each; empty if none.
rdma_smr_res() {
	local k
	{
		rdma_qps
		for k in pd cq mr; do
			rdma res show "$k" 2>/dev/null | sed "s/^/$k: /"
		done
	} | awk -v strict=1 "$RDMA_SMR_QP_AWK"'
		kind == "cm_id" && is_smr() { print "cm_id: " $0 }
		kind == "qp" && qp { print "qp: " $0 }
		/^(pd|cq|mr): / && is_smr() { print }'
	return 0
}

# rdma_wait_unref SECONDS: wait until nothing holds the module (refcnt 0,
# sockets_active 0); prints "refcnt=N sockets_active=N waited_ms=N".
rdma_wait_unref() {
	local i refs active t0
	t0=$(date +%s%N)
	for ((i = 0; i < $1 * 10; i++)); do
		refs=$(cat /sys/module/smr/refcnt 2>/dev/null)
		active=$(rdma_kv "$RDMA_STATS" sockets_active)
		[ "${refs:-0}" = 0 ] && [ "${active:-0}" = 0 ] && break
		sleep 0.1
	done
	echo "refcnt=${refs:-none} sockets_active=${active:-none} waited_ms=$((($(date +%s%N) - t0) / 1000000))"
}

# rdma_rmmod: "rmmod smr"; prints "rc=N" then what rmmod said.
rdma_rmmod() {
	local out rc
	out=$(rmmod smr 2>&1)
	rc=$?
	echo "rc=$rc"
	[ -z "$out" ] || echo "$out"
}

# rdma_insmod: load the module the guest booted with again (its
# dependencies are still loaded); prints "rc=N" and what insmod said.
rdma_insmod() {
	local out rc
	if [ -d /sys/module/smr ]; then
		echo "rc=0"
		echo "already loaded"
		return 0
	fi
	out=$(insmod "$RDMA_KO" 2>&1)
	rc=$?
	echo "rc=$rc"
	[ -z "$out" ] || echo "$out"
}

# rdma_kmemleak: "none" without kmemleak; else scan and print what it
# reports about smr ("clean" if nothing).
rdma_kmemleak() {
	local k=/sys/kernel/debug/kmemleak leaks
	if [ ! -w "$k" ]; then
		echo none
		return 0
	fi
	echo scan >"$k"
	sleep 1
	echo scan >"$k"
	leaks=$(cat "$k")
	if grep -q smr <<<"$leaks"; then
		echo "leaks:"
		echo "$leaks" | head -n 60
	else
		echo clean
	fi
}

# rdma_wait_file FILE SECONDS [PID]: until FILE exists; 1 on timeout or if
# PID exited first.
rdma_wait_file() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		[ -e "$1" ] && return 0
		if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
			[ -e "$1" ]
			return
		fi
		sleep 0.1
	done
	return 1
}
