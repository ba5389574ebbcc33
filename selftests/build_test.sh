#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Build-host tests (TAP): the module builds warning-free with W=1 and sparse
# on every supported kernel, checkpatch --strict is clean, the uapi header
# stands alone in userspace, the module carries what users rely on, its
# layers depend one way, and only the test build has the test hooks.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 1
# shellcheck source=selftests/lib/tap.sh
. "$repo/selftests/lib/tap.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "TAP version 13"
echo "1..9"

# W=1 and sparse (C=2 checks every file) per kernel; any warning fails.
# rt (PREEMPT_RT changes lock types and config options, not just timing)
# with W=1 only: sparse's lock context checks misread RT's local locks
# (idr_preload() takes one: "context imbalance ... unexpected unlock").
for k in 6.12 6.1 rt; do
	log=$tmp/build-$k.log
	opts=(W=1 C=2)
	[ "$k" != rt ] || opts=(W=1)
	if scripts/build-copy "$k" "${opts[@]}" >"$log" 2>&1 &&
	   ! grep -qE 'warning:|error:' "$log"; then
		tap_result OK "builds on $k with ${opts[*]} without warnings"
	else
		tap_result FAIL "builds on $k with ${opts[*]} without warnings" "$log"
	fi
done

log=$tmp/checkpatch.log
# checkpatch-run fails on any finding, CHECKs included
if scripts/checkpatch-run >"$log" 2>&1; then
	tap_result OK "checkpatch --strict clean"
else
	tap_result FAIL "checkpatch --strict clean" "$log"
fi

log=$tmp/uapi.log
printf '#include <linux/smr.h>\nint main(void) { struct smr_info i = { .version = SMR_INFO_VERSION }; return i.version != 1 || sizeof(i) != 96; }\n' >"$tmp/uapi.c"
if gcc -Wall -Wextra -Werror -Iuapi -o "$tmp/uapi" "$tmp/uapi.c" >"$log" 2>&1 && "$tmp/uapi"; then
	tap_result OK "uapi/linux/smr.h compiles alone in userspace, struct smr_info is 96 bytes"
else
	tap_result FAIL "uapi/linux/smr.h compiles alone in userspace, struct smr_info is 96 bytes" "$log"
fi

ver=$(basename "$(dirname "$(scripts/kdir 6.12)")")
ko=build/kernels/$ver/kernel/smr.ko
log=$tmp/modinfo.log
if modinfo "$ko" >"$log" 2>&1 && grep -q "^vermagic: *$ver " "$log" &&
   grep -q '^parm: *family:' "$log" && grep -q '^license: *GPL' "$log"; then
	tap_result OK "smr.ko for $ver has vermagic, family parameter and GPL license"
else
	tap_result FAIL "smr.ko for $ver has vermagic, family parameter and GPL license" "$log"
fi

# The layers depend one way (Documentation/design.rst, "Layers"): every
# call, variable and include goes to the same or a lower layer, no file
# calls back into one that calls it.
log=$tmp/layers.log
if scripts/dev/callgraph --check-layers "build/kernels/$ver/kernel" >"$log" 2>&1 &&
   grep -q '^cycles: none' "$log"; then
	tap_result OK "kernel files call, use and include only their own and lower layers, no cycles (scripts/dev/callgraph)"
else
	tap_result FAIL "kernel files call, use and include only their own and lower layers, no cycles (scripts/dev/callgraph)" "$log"
fi

# Test hooks are only in the test build (SMR_TEST_HOOKS=1), which the test
# suites boot: the product module must not even have their parameters.
log=$tmp/hooks.log
if scripts/build-copy --test 6.12 W=1 C=2 >"$log" 2>&1 && ! grep -qE 'warning:|error:' "$log" &&
   modinfo -F parm "build/kernels/$ver-test/kernel/smr.ko" >"$tmp/parm-test" 2>>"$log" &&
   grep -q '^fault_cdc:' "$tmp/parm-test" && grep -q '^fault_answer_old:' "$tmp/parm-test" &&
   [ "$(grep -cE '^fault_link_(accept|recv|find|grant_unused|grant_late|grant_late_release|qp_fatal_irq):' "$tmp/parm-test")" = 7 ] &&
   [ "$(grep -cE '^test_(time_scale|link_grants|link_send_done_delay_us|link_send_done_reused):' "$tmp/parm-test")" = 4 ] &&
   modinfo -F parm "$ko" >"$tmp/parm-product" 2>>"$log" &&
   grep -q '^family:' "$tmp/parm-product" && ! grep -qE '^(fault|test)_' "$tmp/parm-product"; then
	tap_result OK "the test module (build-copy --test, W=1 C=2 clean) has the fault_cdc, fault_answer_old, fault_link_* and test_* hooks, the product smr.ko has none"
else
	{ echo "test module parameters:"; cat "$tmp/parm-test" 2>/dev/null
	  echo "product module parameters:"; cat "$tmp/parm-product" 2>/dev/null; } >>"$log"
	tap_result FAIL "the test module (build-copy --test, W=1 C=2 clean) has the fault_cdc, fault_answer_old, fault_link_* and test_* hooks, the product smr.ko has none" "$log"
fi

# the in-tree build (what the guests load) must match the sources
log=$tmp/intree.log
if make -s modules >"$log" 2>&1 && [ kernel/smr.ko -nt kernel/af_smr.c ] &&
   modinfo -F parm kernel/smr.ko >"$tmp/parm-intree" 2>>"$log" &&
   ! grep -q '^fault_' "$tmp/parm-intree"; then
	tap_result OK "in-tree kernel/smr.ko is up to date and has no test hook"
else
	tap_result FAIL "in-tree kernel/smr.ko is up to date and has no test hook" "$log"
fi

[ "$tap_failed" -eq 0 ]
