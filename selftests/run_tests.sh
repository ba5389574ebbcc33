#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# SMR test runner: what `make check` runs. Each suite prints TAP; this script
# keeps every suite's log under build/test-logs/, counts its results and ends
# with one line "N passed, N failed, N skipped".
#
# Suites run on the build host (builds, style) or inside QEMU guests through
# scripts/vm-run. Inside guests the module is loaded, so a skipped SMR case
# there is a failure, not a skip: nothing is allowed to silently not run.
#
#   selftests/run_tests.sh [SUITE...]     default: all suites, in order
#   SMR_TEST_LIST=1 selftests/run_tests.sh   list the suites
#
# Guests: every guest suite boots the kernel SMR_VM_KERNEL names (vm-run
# --kernel: 6.12 by default, 6.1, rt, debug or a release) with SMR_VM_SMP
# vCPUs per guest, 2 unless set: races between softirq, workqueues and
# syscalls need two CPUs to show. SMR_TEST_KERNELS="6.1 rt" runs the guest
# suites once per kernel (named SUITE@KERNEL), host suites once. The kernel
# each suite ran on is printed; a kernel that does not resolve (the debug
# kernel not built) fails the run before anything boots, and never falls
# back to another. On the debug kernel (KASAN and lockdep under TCG are
# many times slower) the test bed's time scale (SMR_TEST_TIME_SCALE: every
# per-case deadline and wait of the traffic tools and selftests/lib/
# guests.sh, never a check of a documented kernel bound) defaults to
# debug_time_scale below, 1 on the others, and the suites' vm-run timeouts
# to an hour, or 900 s times the scale if longer.
# The guests load the test module (vm-run --module test: the build with the
# hooks only tests use, e.g. fault_cdc; make modules-test, scripts/build-copy
# --test NAME), unless SMR_VM_MODULE says otherwise; the build suite checks
# that the product module has none of them.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
logs=$repo/build/test-logs
summary=$repo/build/test-summary
mkdir -p "$logs"
rm -f "$summary"
cd "$repo" || exit 2

passed=0 failed=0 skipped=0
failures=()

# count_tap NAME LOG RC STRICT: fold one suite's TAP into the totals.
# Only top-level TAP result lines count (kselftest nests sub-results behind
# "# "). STRICT=1 turns skips into failures.
count_tap() {
	local name=$1 log=$2 rc=$3 strict=$4
	local p f s
	p=$(grep -cE '^ok [0-9]+' "$log" | tr -d ' ')
	s=$(grep -E '^ok [0-9]+' "$log" | grep -ciE '# *skip' | tr -d ' ')
	f=$(grep -cE '^not ok [0-9]+' "$log" | tr -d ' ')
	p=$((p - s))
	if [ "$strict" = 1 ] && [ "$s" -gt 0 ]; then
		grep -E '^ok [0-9]+' "$log" | grep -iE '# *skip' | sed 's/^/  skipped where it must run: /'
		f=$((f + s))
		s=0
	fi
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		# the suite died or failed outside any single case
		echo "  $name exited $rc with no failing case: counted as one failure"
		f=1
	fi
	if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		echo "  $name ran no test: counted as one failure"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	[ "$f" -eq 0 ] || failures+=("$name")
	printf '%-22s %4d passed %4d failed %4d skipped  (%s)\n' "$name" "$p" "$f" "$s" "${log#"$repo"/}"
}

# run_suite NAME STRICT CMD...: run, tee the log, count.
run_suite() {
	local name=$1 strict=$2
	shift 2
	local log=$logs/$name.log rc start
	start=$(date +%s)
	echo "=== $name: $*"
	"$@" >"$log" 2>&1
	rc=$?
	# the whole log on failure, the TAP lines otherwise
	if [ "$rc" -ne 0 ] || grep -qE '^not ok' "$log"; then
		cat "$log"
	else
		grep -E '^(not )?ok [0-9]+' "$log"
	fi
	echo "--- $name finished in $(( $(date +%s) - start )) s, exit $rc"
	count_tap "$name" "$log" "$rc" "$strict"
}

vm() {
	"$repo/scripts/vm-run" "$@"
}

# Suites that boot guests; the rest run on the build host.
guest_suites=" vm_run api preload devices negotiation apps rdma stress faults churn attack failinject fuzz dkms "

suite_build() { run_suite build 0 "$repo/selftests/build_test.sh"; }
suite_wire() { run_suite wire 0 "$repo/selftests/wire/run.sh"; }
suite_vm_run() { run_suite "vm_run$at" 0 "$repo/selftests/vm_run_test.sh"; }
suite_api() {
	run_suite "api$at" 1 vm --hosts 1 -- "$repo/build/selftests/smr_api"
}
suite_preload() {
	run_suite "preload$at" 1 vm --hosts 1 -- "$repo/selftests/preload_test.sh"
}
suite_devices() {
	run_suite "devices$at" 1 vm --hosts 1 -- "$repo/selftests/devices_test.sh"
}
suite_apps() { run_suite "apps$at" 0 "$repo/selftests/apps_test.sh"; }
suite_negotiation() {
	run_suite "negotiation$at" 0 "$repo/selftests/negotiation_test.sh"
}
suite_rdma() { run_suite "rdma$at" 0 "$repo/selftests/rdma_test.sh"; }
suite_stress() { run_suite "stress$at" 0 "$repo/selftests/stress_test.sh"; }
suite_faults() { run_suite "faults$at" 0 "$repo/selftests/faults_test.sh"; }
suite_churn() { run_suite "churn$at" 0 "$repo/selftests/churn_test.sh"; }
suite_attack() { run_suite "attack$at" 0 "$repo/selftests/attack_test.sh"; }
suite_failinject() {
	run_suite "failinject$at" 1 "$repo/selftests/failinject_test.sh"
}
suite_fuzz() { run_suite "fuzz$at" 1 "$repo/selftests/fuzz_test.sh"; }
suite_dkms() { run_suite "dkms$at" 1 "$repo/selftests/dkms_test.sh"; }

all_suites=(build wire vm_run api preload devices negotiation apps rdma stress faults churn attack)
if [ -n "${SMR_TEST_LIST:-}" ]; then
	printf '%s\n' "${all_suites[@]}"
	exit 0
fi
suites=("$@")
if [ ${#suites[@]} = 0 ]; then
	suites=("${all_suites[@]}")
	# fault injection needs the debug kernel's failslab, and trinity's
	# splats want its KASAN and lockdep (make check-debug)
	[ "${SMR_TEST_KERNELS:-${SMR_VM_KERNEL:-}}" != debug ] || suites+=(failinject fuzz)
fi

export SMR_VM_SMP=${SMR_VM_SMP:-2}
export SMR_VM_MODULE=${SMR_VM_MODULE:-test}
# The debug kernel's time scale, measured (one 2-vCPU TCG guest, smr_stream
# to itself over rxe, the test module; 6.12 -> debug): 22 connections of
# 16 KiB each way 0.72 -> 3.24 s (4.5x) and again on the link now up 0.32
# -> 3.04 s (9.6x); 2 connections of 16 MiB each way 2.7 -> 37.2 s
# (13.6x); a user-space bash loop 8.0 -> 16.1 s (2x). The suites' logs
# show the same and worse: stress's listen case 3.5-10 -> 158 s, rdma's
# 10 connections on a link up 71 -> 2219 ms. 16: the bulk ratio rounded
# up, with room for a busy build host.
debug_time_scale=16
user_time_scale=${SMR_TEST_TIME_SCALE:-}
read -ra kernels <<<"${SMR_TEST_KERNELS:-${SMR_VM_KERNEL:-6.12}}"
[ ${#kernels[@]} -gt 0 ] || kernels=(6.12)

# Point the guest suites at kernel $1; prints which release and vCPUs.
# Fails (and counts a failure) if the name does not resolve.
use_kernel() {
	local rel t
	export SMR_VM_KERNEL=$1
	export SMR_TEST_TIME_SCALE=${user_time_scale:-1}
	if ! rel=$("$repo/scripts/vm-run" --print-kernel 2>&1); then
		echo "run_tests: kernel '$1' for the guests: $rel" >&2
		failed=$((failed + 1))
		failures+=("kernel $1")
		return 1
	fi
	echo "=== guests: kernel $rel (--kernel $1), $SMR_VM_MODULE module, $SMR_VM_SMP vCPU(s) each"
	case $rel in
	*-smr-debug-*)
		SMR_TEST_TIME_SCALE=${user_time_scale:-$debug_time_scale}
		# an hour, or the ordinary 900 s times the scale if longer
		t=$((900 * SMR_TEST_TIME_SCALE))
		[ "$t" -ge 3600 ] || t=3600
		export SMR_VM_TIMEOUT=${SMR_VM_TIMEOUT:-$t}
		export SMR_RDMA_TIMEOUT=${SMR_RDMA_TIMEOUT:-$t}
		export SMR_NEGOT_TIMEOUT=${SMR_NEGOT_TIMEOUT:-$t}
		export SMR_APPS_TIMEOUT=${SMR_APPS_TIMEOUT:-$t}
		export SMR_FAIL_TIMEOUT=${SMR_FAIL_TIMEOUT:-$t}
		export SMR_FUZZ_TIMEOUT=${SMR_FUZZ_TIMEOUT:-$t}
		;;
	esac
	[ "$SMR_TEST_TIME_SCALE" = 1 ] ||
		echo "=== time scale $SMR_TEST_TIME_SCALE: per-case deadlines and waits last $SMR_TEST_TIME_SCALE times as long"
}

t0=$(date +%s)
for s in "${suites[@]}"; do
	if ! declare -F "suite_$s" >/dev/null; then
		echo "run_tests: unknown suite '$s' (have: ${all_suites[*]})" >&2
		failed=$((failed + 1))
	fi
done
# Host suites once, guest suites once per kernel, in the order given.
for i in "${!kernels[@]}"; do
	k=${kernels[$i]}
	at=
	[ ${#kernels[@]} = 1 ] || at=@$k
	# the two-guest suites keep each kernel's run directory
	export SMR_TEST_RUN_TAG=${at#@}
	kernel_ok=
	for s in "${suites[@]}"; do
		declare -F "suite_$s" >/dev/null || continue
		if [[ $guest_suites != *" $s "* ]]; then
			[ "$i" = 0 ] && "suite_$s"
			continue
		fi
		if [ -z "$kernel_ok" ]; then
			if use_kernel "$k"; then kernel_ok=1; else kernel_ok=0; fi
		fi
		[ "$kernel_ok" = 1 ] && "suite_$s"
	done
done

echo
echo "test run took $(( $(date +%s) - t0 )) s (guests: ${kernels[*]}, $SMR_VM_SMP vCPU(s)); logs in ${logs#"$repo"/}/"
if [ ${#failures[@]} -gt 0 ]; then
	# last, where a truncated CI log still shows it: what failed and why
	echo "failures (each failing case and its first checks that failed):"
	for name in "${failures[@]}"; do
		[ -r "$logs/$name.log" ] || continue
		awk -v suite="$name" '
			/^not ok [0-9]+/ { print "  " suite ": " substr($0, 1, 160); fails = 0; next }
			/^# FAIL/ && fails < 4 { print "    " substr($0, 1, 300); fails++ }
			/^# [AB]\047s kernel/ { print "    " substr($0, 1, 700) }
		' "$logs/$name.log" | head -n 40
	done
	echo "failing suites: ${failures[*]}"
fi
line="$passed passed, $failed failed, $skipped skipped"
echo "$line" >"$summary"
echo "$line"
[ "$failed" -eq 0 ]
