# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # the suites read tap_failed
#
# TAP result lines for the shell suites (sourced): tap_result numbers them
# and counts the failures, so a suite ends with [ "$tap_failed" = 0 ].

tap_n=0
tap_failed=0

# tap_result STATUS DESCRIPTION [DIAG_FILE]: "ok N - DESCRIPTION" when
# STATUS is 0 or ok, else "not ok N - DESCRIPTION" with the last 40 lines of
# DIAG_FILE as diagnostics. Returns 0 for ok, 1 otherwise.
tap_result() {
	tap_n=$((tap_n + 1))
	case $1 in
	0 | ok | OK)
		echo "ok $tap_n - $2"
		return 0
		;;
	esac
	echo "not ok $tap_n - $2"
	tap_failed=$((tap_failed + 1))
	[ -z "${3:-}" ] || tail -n 40 "$3" | sed 's/^/# /'
	return 1
}
