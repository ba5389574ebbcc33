#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The churn suite: two guests on the RDMA suite's bed (selftests/rdma_test.sh,
# which documents the environment), its cases in selftests/rdma/suite_churn.sh.
#
#   selftests/churn_test.sh    TAP 13 on stdout; exit 0 iff all pass
SMR_RDMA_SUITE=churn exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/rdma_test.sh" "$@"
