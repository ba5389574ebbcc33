#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Test kernel/wire.c on the build host: the unit tests (their TAP results
# pass through, renumbered into this script's plan), then a bounded
# libFuzzer run from a seed corpus that the unit test binary writes from its
# reference messages. One TAP stream, one plan line; exit 0 only if all
# passed.
#
#   selftests/wire/run.sh
#   SMR_FUZZ_SECONDS=600 selftests/wire/run.sh     fuzz longer (default 60)
#   SMR_WIRE_BUILD=/abs/dir                        binaries from elsewhere
#                                                  (default build/wire, made
#                                                  with make -C selftests/wire)
#
# Fuzzing state lives in the build directory: fuzz-corpus/ grows across
# runs, crashes/ keeps any input that failed.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${SMR_WIRE_BUILD:-$repo/build/wire}
fuzz_seconds=${SMR_FUZZ_SECONDS:-60}

case $fuzz_seconds in
'' | *[!0-9]* | 0)
	echo "run.sh: SMR_FUZZ_SECONDS must be a positive integer" >&2
	exit 2
	;;
esac

if [ -z "${SMR_WIRE_BUILD:-}" ]; then
	make -s -C "$repo/selftests/wire" >&2 || {
		echo "TAP version 13"
		echo "1..1"
		echo "not ok 1 - build selftests/wire"
		exit 1
	}
fi

# "+NAME" passed, "-NAME" failed (numbered at the end), "# ..." comments
results=()

# ---- unit tests ----
unit_log=$(mktemp)
trap 'rm -f "$unit_log" "${fuzz_log:-}"' EXIT
"$out/wire_test" >"$unit_log" 2>&1
unit_rc=$?
unit_fail=0
tap_result='^(not )?ok [0-9]+ (.*)$'
while IFS= read -r line; do
	if [[ $line =~ $tap_result ]]; then
		if [ -z "${BASH_REMATCH[1]}" ]; then
			results+=("+${BASH_REMATCH[2]}")
		else
			results+=("-${BASH_REMATCH[2]}")
			unit_fail=1
		fi
	elif [[ $line == "TAP version"* || $line =~ ^1\.\.[0-9]+ ]]; then
		:	# replaced by this script's own header and plan
	else
		results+=("# ${line#\# }")	# diagnostics stay comments
	fi
done <"$unit_log"
if [ "$unit_rc" -ne 0 ] && [ "$unit_fail" -eq 0 ]; then
	results+=("-- wire_test exited $unit_rc without a failing case")
fi

# ---- fuzzing ----
seeds=$out/seeds
corpus=$out/fuzz-corpus
crashes=$out/crashes
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus" "$crashes"
fuzz_name="- fuzz wire parser for $fuzz_seconds s"
if ! "$out/wire_test" --write-seeds "$seeds" >&2; then
	results+=("-$fuzz_name: could not write the seed corpus")
else
	fuzz_log=$(mktemp)
	# Inputs are short wire messages, option areas, CDCs, link messages,
	# rdma_cm private data and cursor arguments; 256 bytes covers a
	# message followed by stream data, the largest option area and padded
	# private data.
	"$out/wire_fuzz" -max_total_time="$fuzz_seconds" -max_len=256 \
		-timeout=10 -print_final_stats=1 \
		-artifact_prefix="$crashes/" "$corpus" "$seeds" \
		>"$fuzz_log" 2>&1
	fuzz_rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$fuzz_log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$fuzz_log" | tail -n 1)
	crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$fuzz_log" | tail -n 1)
	units=$(find "$corpus" -type f | wc -l)
	results+=("# fuzz: ${rate:-?} execs/s, $units inputs in ${corpus#"$repo"/}")
	if [ "$fuzz_rc" -eq 0 ] && [ -z "$crash" ] && [ -n "$execs" ] && [ "$execs" -gt 0 ]; then
		results+=("+$fuzz_name ($execs execs, no crash)")
	else
		while IFS= read -r line; do
			results+=("# $line")
		done < <(grep -E 'ERROR|SUMMARY|runtime error|deadly signal|#[0-9]+ +0x' "$fuzz_log" | head -n 30)
		results+=("-$fuzz_name: exit $fuzz_rc, crash file ${crash:-none written}")
	fi
fi

# ---- TAP ----
echo "TAP version 13"
n=0
for r in "${results[@]}"; do
	case $r in [+-]*) n=$((n + 1)) ;; esac
done
echo "1..$n"
i=0 rc=0
for r in "${results[@]}"; do
	case $r in
	+*) i=$((i + 1)); echo "ok $i ${r:1}" ;;
	-*) i=$((i + 1)); rc=1; echo "not ok $i ${r:1}" ;;
	*) echo "$r" ;;
	esac
done
exit $rc
