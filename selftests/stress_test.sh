#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The stress suite: system-call and completion races that crashed 2-vCPU
# guests before their fixes. Two guests on the rdma bed
# (selftests/rdma/bed.sh; selftests/rdma_test.sh documents the environment),
# its cases in selftests/rdma/suite_stress.sh.
#
#   selftests/stress_test.sh           TAP 13 on stdout; exit 0 iff all pass
#   selftests/stress_test.sh --list    the cases, without booting
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
exec "$here/lib/two_guest_test.sh" "$here/rdma/suite_stress.sh" "$@"
