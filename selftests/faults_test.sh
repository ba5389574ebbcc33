#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The faults suite: a peer that goes silent, is partitioned away, is kept
# busy or dies during link setup, and one whose application never closes.
# Two guests on the rdma bed (selftests/rdma/bed.sh; selftests/rdma_test.sh
# documents the environment), its cases in selftests/rdma/suite_faults.sh.
#
#   selftests/faults_test.sh           TAP 13 on stdout; exit 0 iff all pass
#   selftests/faults_test.sh --list    the cases, without booting
#
# A switched wire: a frozen guest loses the frames sent to it, as a dead
# host on a real wire does (scripts/vm-run, SMR_VM_WIRE).
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
export SMR_RDMA_TIMEOUT=${SMR_RDMA_TIMEOUT:-1800} SMR_VM_WIRE=${SMR_VM_WIRE:-switch}
exec "$here/lib/two_guest_test.sh" "$here/rdma/suite_faults.sh" "$@"
