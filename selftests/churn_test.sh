#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The churn suite: connect bursts at a small backlog, a privilege-dropping
# server, connection churn. Two guests on the rdma bed
# (selftests/rdma/bed.sh; selftests/rdma_test.sh documents the environment),
# its cases in selftests/rdma/suite_churn.sh.
#
#   selftests/churn_test.sh           TAP 13 on stdout; exit 0 iff all pass
#   selftests/churn_test.sh --list    the cases, without booting
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
exec "$here/lib/two_guest_test.sh" "$here/rdma/suite_churn.sh" "$@"
