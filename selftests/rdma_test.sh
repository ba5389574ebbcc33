#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# SMR's RDMA data path between two QEMU guests (one scripts/vm-run boot).
# Host B runs a control service (selftests/rdma/b_service.sh) that starts
# smr_stream servers and reports B's counters, links, rdma resources and
# module state; host A (selftests/rdma/a_tests.sh) runs the clients and the
# checks. Every AF_SMR socket checks its own SMR_INFO (mode, RDMA byte
# counters) and TCP_INFO (the inner TCP connection carried the handshake
# only), and every byte of pseudo-random streams both ways, at once, with
# random write and read sizes from 1 byte to 1 MiB.
#
#   selftests/rdma_test.sh    TAP 13 on stdout; exit 0 iff all pass
#
# Until the kernel has an RDMA data path, these tests fail (with the reason).
#
# Needs smr.ko built for the guests' kernel (see vm-run --kernel and
# SMR_VM_KERNEL) on this host, the test module (make modules-test: case
# hostile uses its fault_cdc hook; run_tests.sh sets SMR_VM_MODULE=test,
# which vm-run reads); builds build/rdma/ itself.
# Environment:
#   SMR_EXPECT_MODE=rdma|tcp   the mode every data connection must be in
#       (default rdma). tcp checks the checker against a module without
#       the data path: integrity then wants mode tcp with a fallback
#       reason, and rxe wants the payload NOT on rxe0.
#   SMR_RDMA_CONNS (100), SMR_RDMA_BYTES (1 MiB): IPv4 integrity run,
#       connections and bytes each way per connection
#   SMR_RDMA_CONNS6 (20), SMR_RDMA_BYTES6 (SMR_RDMA_BYTES): IPv6 run
#   SMR_RDMA_CORRUPT=OFFSET    debug: the first IPv4 connection sends the
#       byte at OFFSET of its stream flipped; integrity must fail
#   SMR_RDMA_TESTS             guest cases to run (default "links integrity
#       inline hostile usermem loss rmmod"); those left out report "not ok ... not run"
#   SMR_RDMA_VM_RUN            the vm-run to boot with (default
#       scripts/vm-run); another checkout's vm-run boots that checkout's
#       smr.ko, e.g. a worktree of HEAD while kernel/ is mid-edit
#   SMR_RDMA_TIMEOUT           vm-run timeout in s (default 900)
# The run directory (consoles, every connection's lines) is
# build/rdma-test/run,
# run@KERNEL when run_tests.sh runs several kernels (SMR_TEST_KERNELS).
set -uo pipefail

repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
# run_tests.sh tags each kernel's run when it runs several (SMR_TEST_KERNELS).
tag=${SMR_TEST_RUN_TAG:+@$SMR_TEST_RUN_TAG}
run=$repo/build/rdma-test/run$tag
log=$repo/build/rdma-test/vm-run$tag.log
vm_run=${SMR_RDMA_VM_RUN:-$repo/scripts/vm-run}
expect=${SMR_EXPECT_MODE:-rdma}

# SMR_RDMA_SUITE names the case set: rdma (this file's list and
# rdma/a_tests.sh's cases) or another suite that reuses this two-guest bed
# (selftests/rdma/suite_NAME.sh defines its suite_tests list, its case_ID
# functions for host A and its b_VERB requests for host B).
suite=${SMR_RDMA_SUITE:-rdma}
if [ "$suite" != rdma ]; then
	run=$repo/build/$suite-test/run$tag
	log=$repo/build/$suite-test/vm-run$tag.log
fi

# ID|description, in TAP order. The last one is checked here on the host.
rdma_tests=(
	"integrity|${SMR_RDMA_CONNS:-100} IPv4 + ${SMR_RDMA_CONNS6:-20} IPv6 AF_SMR connections, random streams both ways at once, random I/O sizes: every byte and both ends' hashes agree, SMR_INFO mode $expect with its byte counters, inner TCP as expected"
	"rxe|rxe0 packet counters on both hosts cover the integrity payload each way (payload/4096)$([ "$expect" = tcp ] && echo ', inverted: payload not on rxe0')"
	"inline|writes of at most 100 B ride in CDCs both ways (counters agree end to end, streams intact); with A's net.smr.cdc_inline_max 0, A sends none inline and still takes B's"
	"hostile|A's module breaks each cursor rule once (test hook fault_cdc: producer past the room, backwards, consumer ahead, urgent byte outside, count out of range, overlong inline data): B refuses it, only that connection is reset (ECONNRESET both ends, counted), link and a held connection live on intact"
	"usermem|net.smr.mem_user_max 1 MiB on A: of 16 held connections of uid 65534 some run on RDMA and the rest fall back (no_memory, counted), root's connections meanwhile run on RDMA, uid 65534 fits again once its connections closed"
	"links|two simultaneous connections share one new link; 20 more add no link and no QP on either host; 10 after they closed allocate nothing and re-register only their RMBs"
	"loss|B's rxe0 deleted under bulk transfers both ways: every SMR socket on A fails (ECONNRESET/EPIPE/clean EOF) within 30 s; a new connection falls back to TCP; rmmod succeeds, no rdma res of smr left"
	"rmmod|rmmod smr refused with a socket open, which still works; after close the refcnt drops, rmmod succeeds, no rdma res of smr, no kmemleak of smr"
	"guests|both guests shut down cleanly (no kernel splat, rmmod smr succeeded)"
)
if [ "$suite" = rdma ]; then
	tests=("${rdma_tests[@]}")
else
	suite_file=$repo/selftests/rdma/suite_$suite.sh
	suite_tests=("$suite|suite file ${suite_file#"$repo"/} defines suite_tests")
	# shellcheck disable=SC1090
	[ ! -r "$suite_file" ] || . "$suite_file"
	tests=("${suite_tests[@]}"
		"guests|both guests shut down cleanly (no kernel splat, rmmod smr succeeded)")
fi

diag() { sed 's/^/# /'; }

echo "TAP version 13"
echo "1..${#tests[@]}"

# Without the pieces every test fails with the reason (never a skip).
missing=()
ko=
# The smr.ko vm-run boots: the one built for the guests' kernel.
if [ ! -x "$vm_run" ]; then
	missing+=("$vm_run")
elif ! dry=$("$vm_run" --dry-run 2>&1); then
	missing+=("$dry")
else
	ko=$(sed -n 's/^smr_ko=//p' <<<"$dry")
fi
case $expect in
rdma | tcp) ;;
*) missing+=("a valid SMR_EXPECT_MODE (rdma or tcp, not '$expect')") ;;
esac
for p in socat rdma; do
	command -v "$p" >/dev/null || missing+=("$p (run scripts/install-deps)")
done
mkdir -p "$repo/build/rdma-test" "$(dirname "$run")"
if ! make -s -C "$repo/selftests/rdma" >"$repo/build/rdma-test/build.log" 2>&1; then
	missing+=("build/rdma/smr_stream: make -C selftests/rdma failed: $(tail -n 5 "$repo/build/rdma-test/build.log")")
fi
if [ ${#missing[@]} -gt 0 ]; then
	n=0
	for t in "${tests[@]}"; do
		n=$((n + 1))
		echo "not ok $n - ${t#*|}"
		printf 'missing: %s\n' "${missing[@]}" | diag
	done
	exit 1
fi

env_words=()
for v in SMR_EXPECT_MODE SMR_RDMA_CONNS SMR_RDMA_BYTES SMR_RDMA_CONNS6 \
	SMR_RDMA_BYTES6 SMR_RDMA_CORRUPT SMR_RDMA_TESTS SMR_RDMA_SUITE \
	SMR_STRESS_ITERS SMR_CHURN_SECONDS; do
	[ -z "${!v:-}" ] || env_words+=("$v=$(printf '%q' "${!v}")")
done

rm -rf "$run"
mkdir -p "$run"
t0=$SECONDS
echo "# booting two guests with $ko, expected mode $expect (vm-run log: ${log#"$repo"/})"
[ ${#env_words[@]} = 0 ] || echo "# environment: ${env_words[*]}"
SMR_VM_RUN_DIR=$run "$vm_run" --hosts 2 \
	--timeout "${SMR_RDMA_TIMEOUT:-900}" \
	--b "${env_words[*]} $repo/selftests/rdma/b_service.sh service" \
	-- "${env_words[*]} $repo/selftests/rdma/a_tests.sh" >"$log" 2>&1
vm_rc=$?
echo "# vm-run exited $vm_rc after $((SECONDS - t0)) s"

out_a=$run/out/a
results=$out_a/results

run_tail_shown=0
run_tail() {
	echo "--- vm-run output (last 40 lines; all of it in ${log#"$repo"/}):"
	tail -n 40 "$log"
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
			[ ! -s "$out_a/diag-$id.txt" ] || cat "$out_a/diag-$id.txt"
		} | diag
		[ -n "$line" ] || run_tail_shown=1
	fi
done

echo "# $suite: $((n - fails)) of $n passed in $((SECONDS - t0)) s; run directory ${run#"$repo"/}"
[ "$fails" = 0 ]
