#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# shellcheck disable=SC2034 # the suites read what is set here
#
# The library of SMR's two-guest suites: everything but their cases. One
# scripts/vm-run boot gives two guests, A and B; B runs a control service,
# A runs the cases and asks B (over plain TCP, never SMR) to start servers,
# report its counters, links and rdma resources, unload its module, ...
# selftests/lib/two_guest_test.sh, on the build host, boots them and turns
# A's results into TAP.
#
# A suite is one file, selftests/BED/suite_NAME.sh (sourced on the build
# host, on A and on B, so it only defines things), with
#   suite_tests=("ID|description" ...)   the registry, in TAP order
#   case_ID()      each case, run on A in registry order: t_begin ID,
#                  checks (ck, t_fail), t_note, t_end
#   b_VERB()       requests of its own to B's service (b_call VERB ARGS)
# and optionally suite_run_first (IDs to run before the others),
# suite_a_setup, suite_a_teardown (A, around the cases), suite_b_setup (B,
# before its service starts; fails: A's cases do not run),
# suite_host_check (build host: appends to the array "missing") and
# suite_host_verdict ID (build host: prints why an ok case fails after
# all; $out_a and $out_b are the hosts' output directories). BED/bed.sh, if there, is sourced first: what the suites of one bed
# share, e.g. selftests/rdma/bed.sh (smr_stream servers and clients), with
# bed_a_setup and bed_host_check run before the suite's. So adding a case
# is writing case_ID and its line in suite_tests.
#
# Settings (a bed or suite sets them; defaults here):
#   bed_name         work directories /tmp/NAME-a and /tmp/NAME-b
#   bed_ctl_port     B's control service
#   bed_run_name     build/NAME-test/ holds the run (default: the suite)
#   bed_timeout_var  the variable with vm-run's timeout (default 900 s)
#   bed_select_var   the variable naming the cases to run (default all)
#   bed_vm_run_var   a variable naming another vm-run (another checkout's
#                    smr.ko), if the bed offers one
#   bed_env          variables passed on to both guests
#   bed_needs        commands the build host must have
#   bed_make         directories make -C builds before the boot
#   bed_server       B's "serve" runs "${bed_server[@]} server ARGS -R FILE"
#   ck_log_ok        1: every check that holds is written to the case's diag
#
# Time scale: SMR_TEST_TIME_SCALE, a positive integer (1 unless set;
# selftests/run_tests.sh sets it on the debug kernel, scripts/vm-run hands
# it to both guests). Every wait here that bounds how long a test-bed step
# may take (wait_until, rdma_wait_file, wait_detached, B's results, answers
# and files, socat's timeouts) lasts SECONDS times the scale, as does a
# traffic tool's -T (smr_test_lib.h); tscale SECONDS scales a suite's own.
# A wait that checks a documented kernel bound (a link fails within 15 s of
# its peer going silent, say) is wait_bound, never scaled: the kernel's
# timers run on wall-clock time on every kernel.
#
#   guests.sh a SUITE_FILE        host A: every case, results in SMR_VM_OUT
#   guests.sh b SUITE_FILE        host B: setup, then the control service
#   guests.sh handle [SUITE_FILE] one request on stdin (socat runs it)
#
# Results: $SMR_VM_OUT/results on A, one line "ID ok|fail SUMMARY (N s)" per
# case, $SMR_VM_OUT/diag-ID.txt (what was checked, what failed), every
# server's and client's output in $SMR_VM_OUT/conns/. Tools are found next
# to this file, never through SMR_REPO: the guests may boot another
# checkout's smr.ko (bed_vm_run_var), whose SMR_REPO names that checkout.
#
# Locking and lifetimes: B answers each request in its own process
# (socat fork); what must outlive a request (servers) runs detached in its
# own session with its output in B's work directory, and is stopped by
# name. Everything A starts ends before its case does (pkill_streams).

BED_LIB=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
BED_TOP=$(cd "$BED_LIB/../.." && pwd)
RDMA_KO=${SMR_KO:-${SMR_REPO:-$BED_TOP}/kernel/smr.ko}
RDMA_STATS=/proc/net/smr/stats
RDMA_LINKS=/proc/net/smr/links
RDMA_CONNS=/proc/net/smr/conns
RDMA_RXE_COUNTERS=/sys/class/infiniband/rxe0/ports/1/hw_counters
# The user tools (tools/), as they run from this checkout.
SMR_RUN=$BED_TOP/tools/smr_run
SMR_PROBE=$BED_TOP/build/tools/smr-probe
export PATH="$PATH:/usr/sbin:/sbin"

bed_name=bed
bed_ctl_port=7100
bed_run_name=
bed_timeout_var=
bed_select_var=
bed_vm_run_var=
bed_env=()
bed_needs=(socat)
bed_make=()
bed_server=()
ck_log_ok=1
suite_tests=()
suite_run_first=()
bed_suite=
bed_suite_file=

bed_time_scale=${SMR_TEST_TIME_SCALE:-1}
if ! [[ $bed_time_scale =~ ^([1-9][0-9]?|100)$ ]]; then
	echo "guests.sh: SMR_TEST_TIME_SCALE='$bed_time_scale': want an integer 1..100" >&2
	exit 2
fi

# tscale SECONDS: SECONDS times the test bed's time scale.
tscale() {
	echo $(($1 * bed_time_scale))
}

# bed_load SUITE_FILE: the bed's bed.sh and the suite; "" or "-": none.
bed_load() {
	bed_suite_file=${1:-}
	[ "$bed_suite_file" != - ] || bed_suite_file=
	[ -n "$bed_suite_file" ] || return 0
	bed_suite=${bed_suite_file##*/suite_}
	bed_suite=${bed_suite%.sh}
	# shellcheck disable=SC1090,SC1091
	[ ! -r "${bed_suite_file%/*}/bed.sh" ] || . "${bed_suite_file%/*}/bed.sh"
	# shellcheck disable=SC1090
	. "$bed_suite_file"
	bed_run_name=${bed_run_name:-$bed_suite}
}

log() {
	echo "$bed_suite ($SMR_HOST): $*"
}

# --- this host's SMR state ---------------------------------------------------

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

# rdma_links_count [FILE [STATE]]: link lines (after the header) in a saved
# links file (default: this host's), only those in STATE if given; "" if
# the file said missing.
rdma_links_count() {
	if [ -n "${1:-}" ]; then cat "$1"; else rdma_links; fi | awk -v st="${2:-}" '
		NR == 1 && $1 == "missing" { miss = 1; exit }
		NR > 1 && NF >= 7 && (st == "" || $3 == st) { n++ }
		END { if (!miss) print n + 0 }'
}

# rdma_links_conns FILE: the CONNS column of the active link lines, space
# separated.
rdma_links_conns() {
	awk 'NR > 1 && NF >= 7 && $3 == "active" { printf "%s%s", s, $7; s = " " }' "$1"
}

# rdma_kmsg [MARK]: this host's last 12 kernel lines from smr (link and
# connection failures, with their reasons) and rxe (its errors), after the
# line MARK if given;
# then rxe0's error counters that are not 0 and what eth0's queue dropped
# (rxe fails a QP whose packet its netdev's queue refuses).
rdma_kmsg() {
	dmesg | awk -v m="${1:-}" '
		m != "" && index($0, m) { n = 0; next }
		/ smr: | rxe[0-9]+: / { l[++n] = substr($0, 1, 200) }
		END { for (i = n > 12 ? n - 11 : 1; i <= n; i++) print l[i] }'
	echo "rxe0 errors: $(rdma_rxe_counters | awk '$1 ~ /err|link_downed/ && $2 != 0 { printf "%s %s ", $1, $2 }')"
	echo "eth0 queue: $(tc -s qdisc show dev eth0 2>/dev/null | grep -o 'dropped [0-9]*' | tr '\n' ' ')"
}

# rdma_conns_count: connections in this host's /proc/net/smr/conns.
rdma_conns_count() {
	awk 'NR > 1' "$RDMA_CONNS" 2>/dev/null | wc -l
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

# rdma_wait_unref SECONDS: wait (time-scaled) until nothing holds the module
# (refcnt 0, sockets_active 0); prints "refcnt=N sockets_active=N
# waited_ms=N".
rdma_wait_unref() {
	local i refs active t0
	t0=$(date +%s%N)
	for ((i = 0; i < $1 * bed_time_scale * 10; i++)); do
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

# rdma_wait_file FILE SECONDS [PID]: until FILE exists (SECONDS
# time-scaled); 1 on timeout or if PID exited first.
rdma_wait_file() {
	local i
	for ((i = 0; i < $2 * bed_time_scale * 10; i++)); do
		[ -e "$1" ] && return 0
		if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
			[ -e "$1" ]
			return
		fi
		sleep 0.1
	done
	return 1
}

# wait_until SECONDS CMD...: poll CMD every 0.2 s until it succeeds; 1 if
# it did not within SECONDS (time-scaled: the test bed's patience).
wait_until() {
	wait_bound "$(tscale "$1")" "${@:2}"
}

# wait_bound SECONDS CMD...: the same for a documented kernel bound: SECONDS
# as given on every kernel.
wait_bound() {
	local until=$((SECONDS + $1))
	shift
	while ! "$@"; do
		[ "$SECONDS" -lt "$until" ] || return 1
		sleep 0.2
	done
}

# --- per-case bookkeeping (host A) -------------------------------------------

t_id=
t_failed=0
t_nfail=0
t_summary=
t_start=0
t_kmsg_pid=

t_begin() {
	t_id=$1
	t_failed=0
	t_nfail=0
	t_summary=
	t_start=$SECONDS
	t_kmsg_pid=
	: >"$out/diag-$t_id.txt"
	# t_fail quotes this host's kernel lines from here on
	echo "smr-test: case $t_id" >/dev/kmsg 2>/dev/null || true
	log "test $t_id"
}

t_diag() {
	printf '%s\n' "$*" >>"$out/diag-$t_id.txt"
}

# At most 30 failure lines per case: 1000 connections could fail alike.
t_fail() {
	t_failed=1
	t_nfail=$((t_nfail + 1))
	if [ "$t_nfail" -le 30 ]; then
		t_diag "FAIL: $*"
		log "$t_id: FAIL: $*"
	elif [ "$t_nfail" = 31 ]; then
		t_diag "FAIL: (more failures not shown)"
	fi
	# why a link went down or a connection was cut is only in the kernel
	# log (pr_info, below the console's level): the first failure quotes
	# it, before the case's cleanup adds its own lines. B's are asked for
	# in the background (B may be frozen or held busy), quoted by t_end.
	if [ "$t_nfail" = 1 ]; then
		t_diag "A's kernel, smr lines since the case began: $(rdma_kmsg "smr-test: case $t_id" | tr '\n' '|')"
		timeout "$(tscale 60)" socat -t "$(tscale 50)" -T "$(tscale 50)" - \
			"TCP:$SMR_PEER_ADDR:$bed_ctl_port,connect-timeout=$(tscale 10)" \
			<<<kmsg >"$out/kmsg-b-$t_id.txt" 2>&1 &
		t_kmsg_pid=$!
	fi
}

# t_note TEXT: goes into the case's one-line summary.
t_note() {
	t_summary+="${t_summary:+; }$*"
}

# t_file LABEL FILE [LINES [tail]]: the head (or tail) of a file, 15 lines
# unless told, into the diagnostics; t_file_tail: its last 25 lines.
t_file() {
	t_diag "--- $1:"
	if [ -s "$2" ]; then
		cut -c1-600 "$2" | "${4:-head}" -n "${3:-15}" >>"$out/diag-$t_id.txt"
	else
		t_diag "(empty)"
	fi
}

t_file_tail() {
	t_file "$1 (last ${3:-25} lines)" "$2" "${3:-25}" tail
}

t_end() {
	local v=ok
	[ "$t_failed" = 0 ] || v=fail
	if [ -n "$t_kmsg_pid" ]; then
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$t_kmsg_pid" 2>/dev/null || break
			sleep 0.5
		done
		if kill "$t_kmsg_pid" 2>/dev/null; then
			t_diag "B's kernel, last smr lines: (no answer)"
		else
			t_diag "B's kernel, last smr lines: $(tr '\n' '|' <"$out/kmsg-b-$t_id.txt")"
		fi
		wait "$t_kmsg_pid" 2>/dev/null
		t_kmsg_pid=
	fi
	[ "$t_nfail" -le 30 ] || t_note "$t_nfail failed checks"
	echo "$t_id $v ${t_summary:-} ($((SECONDS - t_start)) s)" >>"$out/results"
	log "test $t_id: $v"
}

# t_notrun ID: a case the selection left out still reports (a failure).
t_notrun() {
	echo "$1 fail not run: $bed_select_var='${bed_selected# }'" >>"$out/results"
}

# ck WHAT ACTUAL OP EXPECTED: OP is eq, ne, ge, gt, le, lt or in (a word
# list). Nothing (an empty ACTUAL: a value not read) never holds.
ck() {
	local what=$1 a=$2 op=$3 e=$4 ok=1 num='^-?[0-9]+$'
	case $op in
	eq) [ "$a" = "$e" ] || ok=0 ;;
	ne) [ "$a" != "$e" ] || ok=0 ;;
	ge) [[ $a =~ $num && $e =~ $num ]] && [ "$a" -ge "$e" ] || ok=0 ;;
	gt) [[ $a =~ $num && $e =~ $num ]] && [ "$a" -gt "$e" ] || ok=0 ;;
	le) [[ $a =~ $num && $e =~ $num ]] && [ "$a" -le "$e" ] || ok=0 ;;
	lt) [[ $a =~ $num && $e =~ $num ]] && [ "$a" -lt "$e" ] || ok=0 ;;
	in) [[ " $e " == *" $a "* ]] || ok=0 ;;
	*) t_fail "$what: bad check '$op'"; return 1 ;;
	esac
	[ -n "$a" ] || ok=0
	if [ "$ok" = 1 ]; then
		[ "$ck_log_ok" != 1 ] || t_diag "ok: $what: $a ($op $e)"
		return 0
	fi
	t_fail "$what: got '${a:-nothing}', expected $op '$e'"
	return 1
}

# --- snapshots of both hosts (host A) ------------------------------------------

# snap TAG: stats, links, QPs of both hosts into $work/TAG.{a,b}.*
snap() {
	local tag=$1
	rdma_stats >"$work/$tag.a.stats"
	rdma_links >"$work/$tag.a.links"
	rdma_qps >"$work/$tag.a.qp"
	b_call stats >"$work/$tag.b.stats"
	b_call links >"$work/$tag.b.links"
	b_call qps >"$work/$tag.b.qp"
}

# snap_stats TAG: the counters only (cheap enough while streams run).
snap_stats() {
	rdma_stats >"$work/$1.a.stats"
	b_call stats >"$work/$1.b.stats"
}

# snap_rxe TAG: both hosts' rxe0 hw_counters into $work/TAG.{a,b}.rxe.
snap_rxe() {
	rdma_rxe_counters >"$work/$1.a.rxe"
	b_call rxe >"$work/$1.b.rxe"
}

# delta_in KIND TAG1 TAG2 HOST NAME...: how much the named counters of
# snapshot KIND (stats, rxe) grew together on HOST (a|b) between two
# snapshots; "missing(NAME)" if one of them is not in both.
delta_in() {
	local kind=$1 f1=$work/$2.$4.$1 f2=$work/$3.$4.$1 name v1 v2 sum=0
	shift 4
	for name in "$@"; do
		v1=$(rdma_kv "$f1" "$name")
		v2=$(rdma_kv "$f2" "$name")
		if [ -z "$v1" ] || [ -z "$v2" ]; then
			echo "missing($name)"
			return 0
		fi
		sum=$((sum + v2 - v1))
	done
	echo "$sum"
}

# delta TAG1 TAG2 HOST NAME...: the same for the SMR counters (snap).
delta() {
	delta_in stats "$@"
}

# delta_table TAG1 TAG2 [KIND]: every counter that moved, both hosts, as
# "name  A +n  B +n" lines.
delta_table() {
	local k=${3:-stats}
	awk -v fa1="$work/$1.a.$k" -v fa2="$work/$2.a.$k" \
	    -v fb1="$work/$1.b.$k" -v fb2="$work/$2.b.$k" '
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

# --- host B's control service --------------------------------------------------

# b_call VERB ARGS...: one request to host B's control service (A).
b_call() {
	local t
	t=$(tscale 300)
	printf '%s\n' "$*" |
		socat -t "$t" -T "$t" - "TCP:$SMR_PEER_ADDR:$bed_ctl_port" 2>&1
}

# start_detached NAME CMD...: run CMD in its own session (the request's
# connection closes, the group can be stopped), output in $work/NAME.out
# and .err, exit status in $work/NAME.rc once it ends.
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

# wait_detached NAME FILE SECONDS: until FILE appears or NAME has ended
# (SECONDS time-scaled); true if FILE is there and NAME still runs.
wait_detached() {
	local i
	for ((i = 0; i < $3 * bed_time_scale * 10; i++)); do
		[ -e "$2" ] || [ -e "$work/$1.rc" ] && break
		sleep 0.1
	done
	[ -e "$2" ] && [ ! -e "$work/$1.rc" ]
}

# The requests every suite has (b_VERB ARGS; a suite adds its own).

# ping: "pong" once the service runs ("fail: ..." if B's setup failed).
b_ping() {
	if [ -s "$SMR_VM_OUT/fatal" ]; then
		echo "fail: $(cat "$SMR_VM_OUT/fatal")"
	else
		echo pong
	fi
}

# serve NAME ARGS...: a server (bed_server) on B, detached; "ok" once it
# listens.
b_serve() {
	local name=$1
	shift
	start_detached "$name" "${bed_server[@]}" server "$@" -R "$work/$name.ready"
	if wait_detached "$name" "$work/$name.ready" 30; then
		echo ok
	else
		echo "fail: server $name did not start listening"
		cat "$work/$name.err" 2>/dev/null
	fi
}

# result NAME SECONDS: wait for server NAME to end (stopped after
# SECONDS, time-scaled), then its output and "rc=STATUS".
b_result() {
	local name=$1 secs=${2:-60} rc
	if ! rdma_wait_file "$work/$name.rc" "$secs"; then
		stop_detached "$name"
		sleep 0.2
		echo "rc=stopped after $(tscale "$secs")s"
	fi
	cat "$work/$name.out" 2>/dev/null
	sed 's/^/stderr: /' "$work/$name.err" 2>/dev/null
	rc=$(cat "$work/$name.rc" 2>/dev/null) || rc=none
	echo "rc=$rc"
}

# trigger NAME: mark the moment for B's servers that wait on
# $work/NAME.trigger (smr_stream -F -X).
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

# sysctl KEY=VALUE: set one of B's sysctls; "KEY = VALUE" read back.
b_sysctl() {
	local key=${1%%=*}
	sysctl -qw "$1" && echo "$key = $(sysctl -n "$key")"
}

b_kmsg() {
	rdma_kmsg
}

# sysrq_w: the blocked tasks to the console (diagnosing a stall).
b_sysrq_w() {
	echo w >/proc/sysrq-trigger && echo ok
}

# rxe_del: take B's soft-RoCE device away; "rc=N" and what rdma said.
b_rxe_del() {
	local out rc
	rdma link show 2>/dev/null |
		sed -n 's/^link rxe0\/[0-9]* .* netdev \([^ ]*\).*/\1/p' >"$work/rxe.netdev"
	out=$(timeout "$(tscale 120)" rdma link delete rxe0 2>&1)
	rc=$?
	echo "rc=$rc"
	[ -z "$out" ] || echo "$out"
}

# rxe_add: rxe0 back on the device rxe_del took it from; "ok" once ACTIVE.
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
	for _ in $(seq "$(tscale 100)"); do
		rdma link show rxe0/1 2>/dev/null | grep -q 'state ACTIVE' && break
		sleep 0.1
	done
	if rdma link show rxe0/1 2>/dev/null | grep -q 'state ACTIVE'; then
		echo ok
	else
		echo "fail: rxe0 not ACTIVE: $(rdma link show rxe0/1 2>&1)"
	fi
}

# file NAME: the file NAME from B's SMR_VM_OUT, waiting up to 240 s
# (time-scaled) for it to appear (a checksum is written when its transfer
# ends); "missing" if it never does.
b_file() {
	# Only plain names inside SMR_VM_OUT.
	[[ ${1:-} =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "bad name"; return; }
	for _ in $(seq "$(tscale 480)"); do
		[ -e "$SMR_VM_OUT/$1" ] && break
		sleep 0.5
	done
	if [ -e "$SMR_VM_OUT/$1" ]; then cat "$SMR_VM_OUT/$1"; else echo missing; fi
}

# bed_service: on B, the control service (a plain TCP listener that runs
# "guests.sh handle SUITE_FILE" per request) until vm-run stops it.
bed_service() {
	mkdir -p "$work"
	echo "${bed_suite:-$bed_name} (B): control service on port $bed_ctl_port"
	# -t: a request may take minutes after A has sent its line (result)
	exec socat -t "$(tscale 600)" "TCP-LISTEN:$bed_ctl_port,reuseaddr,fork" \
		"EXEC:$BED_LIB/guests.sh handle ${bed_suite_file:--}"
}

bed_handle() {
	local verb args
	read -r verb args || return 0
	if [[ $verb =~ ^[a-z_]+$ ]] && declare -F "b_$verb" >/dev/null; then
		# shellcheck disable=SC2086
		"b_$verb" $args 2>&1
	else
		echo "fail: unknown request '$verb'"
	fi
}

# --- the run --------------------------------------------------------------------

# bed_wait_b SECONDS: until B's service answers (SECONDS time-scaled);
# false if it never does or says B's setup failed.
bed_wait_b() {
	local r i
	for ((i = 0; i < $1 * bed_time_scale; i++)); do
		r=$(b_call ping 2>/dev/null)
		case $r in
		pong) return 0 ;;
		fail:*) log "FATAL: host B: ${r#fail: }"; return 1 ;;
		esac
		sleep 1
	done
	log "FATAL: host B's control service does not answer"
	return 1
}

# bed_ids: the registry's IDs, in TAP order.
bed_ids() {
	local t
	for t in "${suite_tests[@]}"; do
		printf '%s\n' "${t%%|*}"
	done
}

bed_a_main() {
	local f id ids order=()
	out=$SMR_VM_OUT
	work=/tmp/$bed_name-a
	peer=$SMR_PEER_ADDR
	peer6=$SMR_PEER_ADDR6
	self=$SMR_SELF_ADDR
	mkdir -p "$work" "$out/conns"
	: >"$out/results"
	for f in bed_a_setup suite_a_setup; do
		if declare -F "$f" >/dev/null && ! "$f"; then
			log "FATAL: $f failed"
			exit 1
		fi
	done
	bed_wait_b 180 || exit 1
	ids=$(bed_ids | tr '\n' ' ')
	bed_selected=" ${ids}"
	[ -z "$bed_select_var" ] || bed_selected=" ${!bed_select_var:-$ids} "
	for id in "${suite_run_first[@]}"; do
		[[ " $ids " == *" $id "* ]] && order+=("$id")
	done
	for id in $ids; do
		[[ " ${suite_run_first[*]} " == *" $id "* ]] || order+=("$id")
	done
	for id in "${order[@]}"; do
		if [[ $bed_selected != *" $id "* ]]; then
			t_notrun "$id"
		elif declare -F "case_$id" >/dev/null; then
			"case_$id"
		else
			echo "$id fail no function case_$id in ${bed_suite_file#"$BED_TOP"/}" >>"$out/results"
		fi
	done
	! declare -F suite_a_teardown >/dev/null || suite_a_teardown
	rdma_stats >"$out/stats-a.end"
	b_call stats >"$out/stats-b.end"
	log "done"
}

bed_b_main() {
	out=$SMR_VM_OUT
	work=/tmp/$bed_name-b
	mkdir -p "$work"
	rm -f "$out/fatal"
	if declare -F suite_b_setup >/dev/null && ! suite_b_setup; then
		[ -s "$out/fatal" ] || echo "the suite's setup on B failed" >"$out/fatal"
		log "FATAL: $(cat "$out/fatal")"
	fi
	bed_service
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -uo pipefail
	bed_load "${2:-}"
	case ${1:-} in
	a) bed_a_main ;;
	b) bed_b_main ;;
	handle)
		out=$SMR_VM_OUT
		work=/tmp/$bed_name-b
		bed_handle
		;;
	*)
		echo "usage: guests.sh a|b|handle SUITE_FILE" >&2
		exit 2
		;;
	esac
fi
