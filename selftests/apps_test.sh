#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# End-to-end tests with real applications nobody here wrote, run through
# smr_run across two QEMU guests (one scripts/vm-run boot): host B runs
# iperf3 -s, redis-server and socat (selftests/apps/b_servers.sh), host A
# runs their clients (selftests/apps/a_clients.sh). Every test checks what
# the application saw (byte counts, values, checksums) and that SMR sockets
# carried it (/proc/net/smr/stats deltas on both hosts over that test).
#
#   selftests/apps_test.sh        TAP 13 on stdout; exit 0 iff all pass
#
# Needs (build first, on this host): smr.ko for the guests' kernel (make), and
# build/tools/libsmr-preload.so (make -C tools).
# Environment: SMR_APPS_IPERF_BYTES (64 MiB), SMR_APPS_COPY_BYTES (32 MiB),
# SMR_APPS_REDIS_REQUESTS (10000), SMR_APPS_REDIS_CLIENTS (8),
# SMR_APPS_TIMEOUT (vm-run timeout in s, 900). The run directory (guest
# consoles, outputs, counters) is build/apps-test/run,
# run@KERNEL when run_tests.sh runs several kernels (SMR_TEST_KERNELS).
set -uo pipefail

repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
# run_tests.sh tags each kernel's run when it runs several (SMR_TEST_KERNELS).
tag=${SMR_TEST_RUN_TAG:+@$SMR_TEST_RUN_TAG}
run=$repo/build/apps-test/run$tag
log=$repo/build/apps-test/vm-run$tag.log

# ID|description, in TAP order. The last one is checked here on the host.
tests=(
	"iperf3_fwd|iperf3 -n IPv4 A->B, every counted byte moved by RDMA"
	"iperf3_rev6|iperf3 -n -R IPv6 B->A, every counted byte moved by RDMA"
	"redis_bench|redis-benchmark SET and GET complete without errors, bytes moved by RDMA"
	"redis_cli4|redis-cli SET/GET round trip of a 16 KiB value over SMR RDMA (IPv4)"
	"redis_cli6|redis-cli SET/GET round trip of a 16 KiB value over SMR RDMA (IPv6)"
	"copy4|socat copies a random file A->B over SMR RDMA (IPv4), sha256 equal"
	"copy6|socat copies a random file B->A over SMR RDMA (IPv6), sha256 equal"
	"guests|both guests shut down cleanly (no kernel splat, rmmod smr succeeded)"
)

diag() { sed 's/^/# /'; }

echo "TAP version 13"
echo "1..${#tests[@]}"

# Without the pieces, every test fails with the reason (never a skip).
missing=()
# vm-run --dry-run names the smr.ko built for the guests' kernel, or
# says which make target builds it.
dry=$("$repo/scripts/vm-run" --dry-run 2>&1) || missing+=("$dry")
[ -f "$repo/build/tools/libsmr-preload.so" ] ||
	missing+=("build/tools/libsmr-preload.so (run make -C tools)")
[ -x "$repo/scripts/vm-run" ] || missing+=("scripts/vm-run")
for p in iperf3 redis-server redis-benchmark redis-cli socat python3 sha256sum; do
	command -v "$p" >/dev/null || missing+=("$p (run scripts/install-deps)")
done
if [ ${#missing[@]} -gt 0 ]; then
	n=0
	for t in "${tests[@]}"; do
		n=$((n + 1))
		echo "not ok $n - ${t#*|}"
		printf 'missing: %s\n' "${missing[@]}" | diag
	done
	exit 1
fi

rm -rf "$run"
mkdir -p "$run"
env_words=()
for v in SMR_APPS_IPERF_BYTES SMR_APPS_COPY_BYTES SMR_APPS_REDIS_REQUESTS \
	SMR_APPS_REDIS_CLIENTS; do
	[ -z "${!v:-}" ] || env_words+=("$v=$(printf '%q' "${!v}")")
done
cmd_a="${env_words[*]} $repo/selftests/apps/a_clients.sh"
cmd_b="${env_words[*]} $repo/selftests/apps/b_servers.sh"

t0=$SECONDS
echo "# booting two guests (vm-run log: ${log#"$repo"/})"
SMR_VM_RUN_DIR=$run "$repo/scripts/vm-run" --hosts 2 \
	--timeout "${SMR_APPS_TIMEOUT:-900}" --b "$cmd_b" -- "$cmd_a" >"$log" 2>&1
vm_rc=$?
echo "# vm-run exited $vm_rc after $((SECONDS - t0)) s"

out_a=$run/out/a
out_b=$run/out/b
results=$out_a/results

# Shown once, with the first failure that may be about the run as a whole.
run_tail_shown=0
run_tail() {
	echo "--- vm-run output (last 40 lines; all of it in ${log#"$repo"/}):"
	tail -n 40 "$log"
	if [ -s "$out_b/fatal" ]; then
		echo "--- host B: $(cat "$out_b/fatal")"
	fi
}

fails=0
n=0
for t in "${tests[@]}"; do
	n=$((n + 1))
	id=${t%%|*}
	desc=${t#*|}
	if [ "$id" = guests ]; then
		if [ "$vm_rc" = 0 ]; then
			echo "ok $n - $desc"
		else
			echo "not ok $n - $desc"
			fails=$((fails + 1))
			{
				echo "vm-run exited $vm_rc; its verdict:"
				grep -E '^vm-run: ' "$log" | tail -n 20
				[ "$run_tail_shown" = 1 ] || run_tail
			} | diag
			run_tail_shown=1
		fi
		continue
	fi
	line=$(awk -v id="$id" '$1 == id' "$results" 2>/dev/null | tail -n 1)
	verdict=$(awk '{ print $2 }' <<<"$line")
	summary=$(cut -d' ' -f3- <<<"$line")
	# The checksum B wrote must match what A recorded, independently of
	# A's own comparison over the control service.
	extra=
	case $id in
	copy4 | copy6)
		if [ "$verdict" = ok ]; then
			sb=$(cat "$out_b/$id.sha256" 2>/dev/null)
			sa=$(cat "$out_a/$id.sha256.a" 2>/dev/null)
			if [ -z "$sb" ] || [ "$sb" != "$sa" ]; then
				verdict=fail
				extra="host side: B's $id.sha256 '${sb:-missing}' != A's '${sa:-missing}'"
			fi
		fi
		;;
	esac
	if [ "$verdict" = ok ]; then
		echo "ok $n - $desc"
		echo "$summary" | diag
	else
		echo "not ok $n - $desc"
		fails=$((fails + 1))
		{
			if [ -z "$line" ]; then
				echo "no result: host A's script did not get to this test"
				[ "$run_tail_shown" = 1 ] || run_tail
			else
				echo "$summary"
			fi
			[ -z "$extra" ] || echo "$extra"
			[ ! -s "$out_a/diag-$id.txt" ] || cat "$out_a/diag-$id.txt"
		} | diag
		[ -n "$line" ] || run_tail_shown=1
	fi
done

# Counters over the whole run, for the record.
{
	echo "counters at the end: A ($out_a/stats-a.end), B at stop ($out_b/stats-b.end):"
	paste "$out_a/stats-a.end" "$out_b/stats-b.end" 2>/dev/null |
		awk '{ printf "  %-28s A %12s   B %12s\n", $1, $2, $4 }'
} | diag
echo "# apps: $((n - fails)) of $n passed in $((SECONDS - t0)) s; run directory ${run#"$repo"/}"
[ "$fails" = 0 ]
