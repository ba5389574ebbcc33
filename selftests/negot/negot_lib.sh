# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034
#
# Shared by negot_a.sh and negot_b.sh (sourced, inside scripts/vm-run
# guests). SMR_REPO comes from vm-run's guest environment.

NEGOT_DIR=$SMR_REPO/selftests/negot
NEGOT_BIN=$SMR_REPO/build/negot
# Host B's control service (plain TCP, never SMR, never filtered).
NEGOT_CTL_PORT=7000
# The NFQUEUE number of the echoing middlebox.
NEGOT_ECHO_QUEUE=7

# negot_kv ARRAY LINE: ARRAY[key]=value for each key=value word of LINE
# (the "conn ..." and "summary ..." lines of negot_probe, the lines of
# negot_pcap.py).
negot_kv() {
	local -n negot_kv_arr=$1
	local - w
	set -f	# split the line into words, never glob them
	negot_kv_arr=()
	for w in $2; do
		[[ $w == *=* ]] && negot_kv_arr[${w%%=*}]=${w#*=}
	done
	return 0
}

# negot_stat FILE NAME: a counter from a saved /proc/net/smr/stats.
negot_stat() {
	awk -v n="$2" '$1 == n { print $2; found = 1 } END { if (!found) print "missing" }' "$1"
}
