#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# End-to-end tests with real applications nobody here wrote, run through
# smr_run across two QEMU guests (one scripts/vm-run boot): iperf3,
# redis-benchmark, redis-cli and socat on A against iperf3 -s, redis-server
# and socat on B. Every test checks what the application saw (byte counts,
# values, checksums) and that SMR sockets carried it (/proc/net/smr/stats
# deltas on both hosts over that test). The cases are
# selftests/apps/suite_apps.sh's, the run selftests/lib/two_guest_test.sh's.
#
#   selftests/apps_test.sh           TAP 13 on stdout; exit 0 iff all pass
#   selftests/apps_test.sh --list    the cases, without booting
#
# Needs smr.ko for the guests' kernel (make); builds tools/ (smr_run's
# library) itself. Environment: SMR_APPS_IPERF_BYTES (64 MiB),
# SMR_APPS_COPY_BYTES (32 MiB), SMR_APPS_REDIS_REQUESTS (10000),
# SMR_APPS_REDIS_CLIENTS (8), SMR_APPS_TESTS (the cases to run, default
# all), SMR_APPS_TIMEOUT (vm-run timeout in s, 900). The run directory
# (guest consoles, outputs, counters) is build/apps-test/run, run@KERNEL
# when run_tests.sh runs several kernels (SMR_TEST_KERNELS).
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
exec "$here/lib/two_guest_test.sh" "$here/apps/suite_apps.sh" "$@"
