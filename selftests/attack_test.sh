#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The attack suite: hostile parties against SMR's RDMA links (issue 10):
# an unprivileged rdma_cm client flooding the link listener with no, old
# (version 2) or forged (version 3, random secret) private data while
# legitimate connections run; the grant round trip of a new link; a link
# that never carries a connection idling out; a peer that breaks the idle
# agreement or keeps its credits (idle_peer, credits_withheld); link
# setups that fail on either side (test hooks fault_link_*); a link that
# goes down between a
# server's lookup and its attach; a peer whose module predates
# LINK_REQUEST (mixed_version: the test module's fault_answer_old); the
# link table's shares (link_share: a user's quarter, the peers' half); a
# peer WRITEing under a closed connection's key while its RMB is reused
# (stale_key; SMR_STALE_KEY_ROUNDS rounds, default 3).
# Two guests on the rdma bed
# (selftests/rdma/bed.sh; selftests/rdma_test.sh documents the
# environment, SMR_RDMA_VM_RUN included: another checkout's module), its
# cases in selftests/rdma/suite_attack.sh.
#
#   selftests/attack_test.sh           TAP 13 on stdout; exit 0 iff all pass
#   selftests/attack_test.sh --list    the cases, without booting
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# 788 s of 900 in stop 28's full run, 901 (cut off) in stop 29's
export SMR_RDMA_TIMEOUT=${SMR_RDMA_TIMEOUT:-1800}
exec "$here/lib/two_guest_test.sh" "$here/rdma/suite_attack.sh" "$@"
