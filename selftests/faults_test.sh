#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The faults suite: two guests on the RDMA suite's bed (selftests/rdma_test.sh,
# which documents the environment), its cases in selftests/rdma/suite_faults.sh.
#
#   selftests/faults_test.sh    TAP 13 on stdout; exit 0 iff all pass
# A switched wire: a frozen guest loses the frames sent to it, as a dead
# host on a real wire does (scripts/vm-run, SMR_VM_WIRE).
SMR_VM_WIRE=${SMR_VM_WIRE:-switch} SMR_RDMA_SUITE=faults exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/rdma_test.sh" "$@"
