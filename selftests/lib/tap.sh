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

# TAP diagnostics: every line behind "# ".
tap_diag() { sed 's/^/# /'; }

# tap_fail_missing TEST...: every TEST ("ID|description") fails, with the
# lines of the caller's array "missing" (what the run needs and lacks) as
# diagnostics: a run that cannot start reports each case, never a skip.
tap_fail_missing() {
	local t
	for t in "$@"; do
		tap_result fail "${t#*|}"
		printf 'missing: %s\n' "${missing[@]}" | tap_diag
	done
}

# tap_guest_results VM_RC LOG OUT_A TEST...: the TAP lines of a run in which
# host A's script wrote one line "ID ok|fail SUMMARY" per case to
# OUT_A/results (and any diagnostics to OUT_A/diag-ID.txt); each TEST is
# "ID|description". The case "guests" is vm-run's own verdict (VM_RC, LOG:
# its output). A case with no line fails ("did not get to this test"). A
# suite may define suite_host_verdict ID to fail a case on what the build
# host sees: it prints why, or nothing. vm-run's tail is shown once, with
# the first failure that may concern the run as a whole.
tap_guest_results() {
	local vm_rc=$1 log=$2 out_a=$3
	shift 3
	local t id desc line verdict summary extra tail_shown=0

	tap_guest_tail() {
		[ "$tail_shown" = 0 ] || return 0
		echo "--- vm-run output (last 40 lines; all of it in $log):"
		tail -n 40 "$log"
		[ ! -s "$out_a/../b/fatal" ] || echo "--- host B: $(cat "$out_a/../b/fatal")"
	}
	for t in "$@"; do
		id=${t%%|*}
		desc=${t#*|}
		if [ "$id" = guests ]; then
			tap_result "$vm_rc" "$desc" && continue
			{
				echo "vm-run exited $vm_rc; its verdict:"
				grep -E '^vm-run: ' "$log" | tail -n 20
				tap_guest_tail
			} | tap_diag
			tail_shown=1
			continue
		fi
		line=$(awk -v id="$id" '$1 == id' "$out_a/results" 2>/dev/null | tail -n 1)
		verdict=$(awk '{ print $2 }' <<<"$line")
		summary=$(cut -d' ' -f3- <<<"$line")
		extra=
		if [ "$verdict" = ok ] && declare -F suite_host_verdict >/dev/null; then
			extra=$(suite_host_verdict "$id")
			[ -z "$extra" ] || verdict=fail
		fi
		if tap_result "${verdict:-fail}" "$desc"; then
			echo "$summary" | tap_diag
			continue
		fi
		{
			if [ -z "$line" ]; then
				echo "no result: host A's script did not get to this test"
				tap_guest_tail
			else
				echo "$summary"
			fi
			[ -z "$extra" ] || echo "$extra"
			[ ! -s "$out_a/diag-$id.txt" ] || cat "$out_a/diag-$id.txt"
		} | tap_diag
		[ -n "$line" ] || tail_shown=1
	done
}
