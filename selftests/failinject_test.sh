#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Allocation failures injected at smr.ko's call sites, in one guest of the
# debug kernel (failslab, fail_page_alloc and their stack-trace filter are
# not in Debian's kernels): selftests/failinject/guest.sh says what it
# checks. run_tests.sh runs it when the guests boot the debug kernel (make
# check-debug); elsewhere it fails with the reason.
#
#   selftests/failinject_test.sh    TAP 13 on stdout; exit 0 iff all pass
set -uo pipefail
repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
if ! make -s -C "$repo/selftests/rdma" >/dev/null 2>&1; then
	echo "TAP version 13"
	echo "1..1"
	echo "not ok 1 - build/rdma/smr_stream: make -C selftests/rdma failed"
	exit 1
fi
env_words=()
for v in SMR_FAIL_ROUNDS SMR_FAIL_PERCENT SMR_FAIL_CONNS; do
	[ -z "${!v:-}" ] || env_words+=("$v=$(printf '%q' "${!v}")")
done
exec "$repo/scripts/vm-run" --hosts 1 --timeout "${SMR_FAIL_TIMEOUT:-3600}" -- \
	"${env_words[*]} $repo/selftests/failinject/guest.sh"
