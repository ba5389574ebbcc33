#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Syscall fuzzing of the SMR family with trinity (Debian's package), in two
# QEMU guests on the RDMA bed (scripts/vm-run --hosts 2): each guest runs
# trinity as uid 65534 for a fixed time, host A on trinity's PF_INET
# sockets and host B on PF_INET6, every one of them an SMR socket, against
# the other host, itself and an echoing SMR peer on each host
# (selftests/fuzz/guest.sh says what runs and what is checked).
#
# trinity cannot be pointed at the SMR family itself: -P takes only names
# from its own table, and SMR's default number, 19, is in it as ECONET,
# which trinity refuses to open ("not actually implemented"). So trinity
# runs with -P INET or INET6 under an LD_PRELOAD shim
# (selftests/fuzz/smr_fuzz_shim.c) that turns each inet socket it creates
# into an SMR socket of the same flags (SMR sockets take the same sockaddr_in
# and sockaddr_in6 addresses and TCP/IP options, which trinity generates
# well), and aims its loopback addresses and random ports at the two hosts'
# soft-RoCE addresses and eight ports, so that its sockets really connect,
# over rdma, to each other and to the peer. Every other argument is
# trinity's own.
#
# Pass: trinity ran on both hosts and reports its syscalls; each host
# created at least SMR_FUZZ_MIN_SOCKETS (500) SMR sockets and ran
# connections in mode rdma, the echoes saw connections from their own host
# and from the peer; afterwards no SMR socket is left (sockets_active 0);
# and the guests shut down cleanly: no splat (WARN, KASAN, lockdep, RCU
# stall, soft lockup: vm-run), rmmod smr succeeded, kmemleak clean on the
# debug kernel. run_tests.sh runs it in make check-debug, not in make check.
#
#   selftests/fuzz_test.sh    TAP 13 on stdout; exit 0 iff all pass
#
# Environment: SMR_FUZZ_SECONDS (fuzzing time per host, default 300, which
# makes the suite about ten minutes on the debug kernel, seven on 6.12),
# SMR_FUZZ_OPS, SMR_FUZZ_CHILDREN, SMR_FUZZ_SEED, SMR_FUZZ_MIN_SOCKETS,
# SMR_FUZZ_FAMILY (see guest.sh), SMR_FUZZ_TIMEOUT (vm-run timeout, default
# SMR_FUZZ_SECONDS + 900). The run directory (consoles, each round's
# trinity output and per-syscall errno counts, each host's figures) is
# build/fuzz-test/run, run@KERNEL when run_tests.sh runs several kernels.
set -uo pipefail

repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
tag=${SMR_TEST_RUN_TAG:+@$SMR_TEST_RUN_TAG}
run=$repo/build/fuzz-test/run$tag
log=$repo/build/fuzz-test/vm-run$tag.log
seconds=${SMR_FUZZ_SECONDS:-300}

# ID|description, in TAP order. The last one is checked here on the host.
tests=(
	"trinity|trinity as uid 65534 for ${seconds} s on each host, 64-bit socket calls only, its inet sockets made SMR sockets (A: PF_INET, B: PF_INET6)"
	"sockets|each host created at least ${SMR_FUZZ_MIN_SOCKETS:-500} SMR sockets and ran connections in mode rdma; the echoes took connections from their own host and from the peer"
	"drained|after trinity and the echoes, no SMR socket is left on either host (sockets_active 0, /proc/net/smr/conns empty)"
	"guests|both guests shut down cleanly: no kernel splat, rmmod smr succeeded, kmemleak clean (debug kernel)"
)

# shellcheck source=selftests/lib/tap.sh
. "$repo/selftests/lib/tap.sh"

echo "TAP version 13"
echo "1..${#tests[@]}"

missing=()
dry=$("$repo/scripts/vm-run" --dry-run 2>&1) || missing+=("$dry")
command -v trinity >/dev/null || missing+=("trinity (run scripts/install-deps)")
mkdir -p "$repo/build/fuzz-test"
if ! make -s -C "$repo/selftests/fuzz" >"$repo/build/fuzz-test/build.log" 2>&1; then
	missing+=("build/fuzz: make -C selftests/fuzz failed: $(tail -n 5 "$repo/build/fuzz-test/build.log")")
fi
if [ ${#missing[@]} -gt 0 ]; then
	tap_fail_missing "${tests[@]}"
	exit 1
fi

env_words=()
for v in SMR_FUZZ_SECONDS SMR_FUZZ_OPS SMR_FUZZ_CHILDREN SMR_FUZZ_SEED \
	SMR_FUZZ_MIN_SOCKETS SMR_FUZZ_FAMILY SMR_FUZZ_PORT SMR_FUZZ_DRAIN; do
	[ -z "${!v:-}" ] || env_words+=("$v=$(printf '%q' "${!v}")")
done
guest="${env_words[*]} $repo/selftests/fuzz/guest.sh"

rm -rf "$run"
mkdir -p "$run"
t0=$SECONDS
echo "# booting two guests with $(sed -n 's/^smr_ko=//p' <<<"$dry") (vm-run log: ${log#"$repo"/})"
[ ${#env_words[@]} = 0 ] || echo "# environment: ${env_words[*]}"
SMR_VM_RUN_DIR=$run "$repo/scripts/vm-run" --hosts 2 \
	--timeout "${SMR_FUZZ_TIMEOUT:-$((seconds + 900))}" \
	--b "$guest" -- "$guest" >"$log" 2>&1
vm_rc=$?
echo "# vm-run exited $vm_rc after $((SECONDS - t0)) s"
grep -E '^(\[B\] )?# host ' "$log" | tap_diag

tap_guest_results "$vm_rc" "$log" "$run/out/a" "${tests[@]}"
echo "# fuzz: $((tap_n - tap_failed)) of $tap_n passed in $((SECONDS - t0)) s; run directory ${run#"$repo"/}"
[ "$tap_failed" = 0 ]
