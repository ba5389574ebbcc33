#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# SMR's TCP-option negotiation and handshake between two QEMU guests (one
# scripts/vm-run boot): negotiated pairs in mode rdma, every fallback with
# its reason, the options on the wire, TCP-MD5, SYN cookies, an echoing
# middlebox, SO_REUSEPORT, 1000 connects at once, handshake timeouts, a
# peer without an RDMA device, and floods of the negotiation records (a
# forging peer, a local user's SYN_SENT sockets, a filled namespace, who
# pays for the records). The cases are
# selftests/negot/suite_negotiation.sh's, the run
# selftests/lib/two_guest_test.sh's.
#
#   selftests/negotiation_test.sh           TAP 13 on stdout; exit 0 iff all pass
#   selftests/negotiation_test.sh --list    the cases, without booting
#
# Environment: SMR_NEGOT_TESTS (the cases to run, default all),
# SMR_NEGOT_TIMEOUT (vm-run timeout in s, default 900), SMR_NEGOT_VM_RUN
# (another checkout's vm-run: boots that checkout's smr.ko with this
# checkout's cases, e.g. to see a case fail before its fix). The run directory
# (consoles, every connection's lines, the capture) is build/negot-test/run,
# run@KERNEL when run_tests.sh runs several kernels (SMR_TEST_KERNELS).
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
exec "$here/lib/two_guest_test.sh" "$here/negot/suite_negotiation.sh" "$@"
