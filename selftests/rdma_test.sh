#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# SMR's RDMA data path between two QEMU guests (one scripts/vm-run boot):
# data integrity, rxe counters, inline CDCs, hostile CDCs, per-user memory,
# a flood of connections never accepted, bounded pools, links, link loss,
# rmmod. The cases are selftests/rdma/suite_rdma.sh's,
# the bed (smr_stream servers on B, clients on A) selftests/rdma/bed.sh's,
# the run selftests/lib/two_guest_test.sh's.
#
#   selftests/rdma_test.sh           TAP 13 on stdout; exit 0 iff all pass
#   selftests/rdma_test.sh --list    the cases, without booting
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
#   SMR_RDMA_TESTS             the cases to run (default all; rxe reads the
#       counters around integrity); those left out report "not ok ... not run"
#   SMR_RDMA_VM_RUN            the vm-run to boot with (default
#       scripts/vm-run); another checkout's vm-run boots that checkout's
#       smr.ko, e.g. a worktree of HEAD while kernel/ is mid-edit
#   SMR_RDMA_TIMEOUT           vm-run timeout in s (default 900)
#   SMR_RDMA_SUITE=NAME        another suite on this bed
#       (selftests/rdma/suite_NAME.sh: stress_test.sh & co run them)
# The run directory (consoles, every connection's lines) is
# build/rdma-test/run, run@KERNEL when run_tests.sh runs several kernels.
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
exec "$here/lib/two_guest_test.sh" "$here/rdma/suite_${SMR_RDMA_SUITE:-rdma}.sh" "$@"
