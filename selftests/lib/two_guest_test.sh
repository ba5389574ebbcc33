#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The build-host side of every two-guest suite (selftests/lib/guests.sh
# describes them): one scripts/vm-run boot of two guests, host B running
# the suite's control service and host A its cases, then TAP on stdout, one
# line per case of the suite's registry (suite_tests) and a last one,
# "guests": both guests shut down cleanly. A case that did not report is a
# failure, never a skip; so is every case when something the run needs is
# missing (the reason is in its diagnostics). Exit status 0 iff all pass.
#
#   selftests/lib/two_guest_test.sh SUITE_FILE          run it
#   selftests/lib/two_guest_test.sh SUITE_FILE --list   its TAP cases, no boot
#
# Needs smr.ko built for the guests' kernel (make; see vm-run --kernel and
# SMR_VM_KERNEL); builds the suite's tools itself (bed_make). The run
# directory (consoles, A's results and diagnostics, every connection's
# lines) is build/NAME-test/run, run@KERNEL when run_tests.sh runs several
# kernels (SMR_TEST_KERNELS); vm-run's output is build/NAME-test/vm-run.log.
set -uo pipefail

lib=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
repo=$(cd "$lib/../.." && pwd)
if [ $# -lt 1 ] || [ ! -r "$1" ]; then
	sed -n '12,13s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
suite_file=$(readlink -f "$1")
# shellcheck source=selftests/lib/guests.sh
. "$lib/guests.sh"
# shellcheck source=selftests/lib/tap.sh
. "$lib/tap.sh"
bed_load "$suite_file"

tests=("${suite_tests[@]}"
	"guests|both guests shut down cleanly (no kernel splat, rmmod smr succeeded)")
if [ "${2:-}" = --list ]; then
	for t in "${tests[@]}"; do
		tap_n=$((tap_n + 1))
		echo "$tap_n ${t%%|*} - ${t#*|}"
	done
	exit 0
fi

# run_tests.sh tags each kernel's run when it runs several (SMR_TEST_KERNELS).
tag=${SMR_TEST_RUN_TAG:+@$SMR_TEST_RUN_TAG}
base=$repo/build/$bed_run_name-test
run=$base/run$tag
log=$base/vm-run$tag.log
vm_run=
[ -z "$bed_vm_run_var" ] || vm_run=${!bed_vm_run_var:-}
vm_run=${vm_run:-$repo/scripts/vm-run}
# vm-run's timeout: 900 s (times the time scale, guests.sh) unless the
# bed's variable says
timeout=$(tscale 900)
[ -z "$bed_timeout_var" ] || timeout=${!bed_timeout_var:-$timeout}

echo "TAP version 13"
echo "1..${#tests[@]}"

# Without the pieces every test fails with the reason (never a skip).
missing=()
ko=
# vm-run --dry-run names the smr.ko built for the guests' kernel, or says
# which make target builds it.
if [ ! -x "$vm_run" ]; then
	missing+=("$vm_run")
elif ! dry=$("$vm_run" --dry-run 2>&1); then
	missing+=("$dry")
else
	ko=$(sed -n 's/^smr_ko=//p' <<<"$dry")
fi
for p in "${bed_needs[@]}"; do
	command -v "$p" >/dev/null || missing+=("$p (run scripts/install-deps)")
done
mkdir -p "$base"
for d in "${bed_make[@]}"; do
	make -s -C "$repo/$d" >"$base/build.log" 2>&1 ||
		missing+=("make -C $d failed: $(tail -n 5 "$base/build.log")")
done
! declare -F bed_host_check >/dev/null || bed_host_check
! declare -F suite_host_check >/dev/null || suite_host_check
if [ ${#missing[@]} -gt 0 ]; then
	tap_fail_missing "${tests[@]}"
	exit 1
fi

env_words=()
for v in "${bed_env[@]}" $bed_select_var; do
	[ -z "${!v:-}" ] || env_words+=("$v=$(printf '%q' "${!v}")")
done

rm -rf "$run"
mkdir -p "$run"
t0=$SECONDS
echo "# booting two guests with $ko (vm-run log: ${log#"$repo"/})"
[ ${#env_words[@]} = 0 ] || echo "# environment: ${env_words[*]}"
[ "$bed_time_scale" = 1 ] || echo "# time scale $bed_time_scale: the test bed's deadlines and waits last $bed_time_scale times as long (SMR_TEST_TIME_SCALE)"
SMR_VM_RUN_DIR=$run "$vm_run" --hosts 2 --timeout "$timeout" \
	--b "${env_words[*]} $lib/guests.sh b $suite_file" \
	-- "${env_words[*]} $lib/guests.sh a $suite_file" >"$log" 2>&1
vm_rc=$?
echo "# vm-run exited $vm_rc after $((SECONDS - t0)) s"

out_a=$run/out/a
# both hosts' outputs, for a suite's suite_host_verdict (apps reads B's)
# shellcheck disable=SC2034
out_b=$run/out/b

tap_guest_results "$vm_rc" "$log" "$out_a" "${tests[@]}"

# Both hosts' counters at the end, for the record.
if [ -s "$out_a/stats-a.end" ] && [ -s "$out_a/stats-b.end" ]; then
	{
		echo "counters at the end, A and B (${out_a#"$repo"/}/stats-{a,b}.end):"
		paste "$out_a/stats-a.end" "$out_a/stats-b.end" |
			awk '{ printf "  %-28s A %12s   B %12s\n", $1, $2, $4 }'
	} | tap_diag
fi
# A failure's kernel side: SMR's own messages (why a link went down, say)
# from both consoles, the last of each.
if [ "$tap_failed" != 0 ]; then
	for h in a b; do
		[ -r "$run/console-$h.log" ] || continue
		grep -E '\] smr(_test)?: ' "$run/console-$h.log" | grep -v 'taints kernel\|signature' |
			tail -n 15 | sed "s/^/${h^^}'s kernel: /" | tap_diag
	done
fi
echo "# $bed_suite: $((tap_n - tap_failed)) of $tap_n passed in $((SECONDS - t0)) s; run directory ${run#"$repo"/}"
[ "$tap_failed" = 0 ]
