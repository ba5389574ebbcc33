#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# SMR's TCP-option negotiation and handshake between two QEMU guests (one
# scripts/vm-run boot). Host B runs a control service (selftests/negot/
# negot_b.sh) that starts negot_probe servers, nftables rules, sysctls and
# an echoing NFQUEUE middlebox; host A (selftests/negot/negot_a.sh) runs the
# clients, captures SYNs and SYN-ACKs on its NIC and checks every
# connection from both ends: mode and reason (SMR_INFO), tokens, RMB sizes,
# handshake message and byte counts, byte counters (RDMA's share of them
# too) and /proc/net/smr/stats, and SHA-256 plus offset-exact pattern
# checks of the data both ways. Negotiated pairs end in mode rdma; the
# other cases fall back to TCP, each with its reason.
#
#   selftests/negotiation_test.sh    TAP 13 on stdout; exit 0 iff all pass
#
# Needs smr.ko built for the guests' kernel (make) on this host; builds build/negot/ itself.
# Environment: SMR_NEGOT_TIMEOUT (vm-run timeout in s, default 900). The
# run directory (consoles, every connection's lines, the capture) is
# build/negot-test/run,
# run@KERNEL when run_tests.sh runs several kernels (SMR_TEST_KERNELS).
set -uo pipefail

repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
# run_tests.sh tags each kernel's run when it runs several (SMR_TEST_KERNELS).
tag=${SMR_TEST_RUN_TAG:+@$SMR_TEST_RUN_TAG}
run=$repo/build/negot-test/run$tag
log=$repo/build/negot-test/vm-run$tag.log

# ID|description, in TAP order. The last one is checked here on the host.
tests=(
	"negotiated_v4_nb|SMR<->SMR IPv4, non-blocking, data both ways at once: handshake done, mode rdma (reason none) both ends, bytes by RDMA"
	"negotiated_v4_b|SMR<->SMR IPv4, blocking connect/accept: mode rdma both ends, data intact"
	"negotiated_v6_nb|SMR<->SMR IPv6, non-blocking: mode rdma both ends, data intact"
	"negotiated_v6_b|SMR<->SMR IPv6, blocking: mode rdma both ends, data intact"
	"negotiated_server_first|SMR<->SMR, server sends first (client waits): mode rdma both ends, data intact"
	"negotiated_client_first|SMR<->SMR IPv6, client sends first (server waits): mode rdma both ends, data intact"
	"plain_server|SMR client -> plain TCP listener: client peer_no_smr, server gets exactly the client's bytes"
	"plain_client|plain TCP client -> SMR listener: server peer_no_smr, data intact"
	"strip_answer|nftables strips the answer from SYN-ACKs: client peer_no_smr, data intact"
	"strip_answer_server_first|answer stripped, server speaks first: server handshake_timeout, data intact"
	"syn_cookies|tcp_syncookies=2 on the server: syn_cookies on both ends, data intact"
	"wire_syn|wire: plain SYN has no kind 254 and equals SMR's SYN minus SMR's option"
	"wire_synack|wire: SMR listener's SYN-ACK answers with role 2 and the nonce's proof"
	"option_echoed|middlebox echoes the SYN's option: client option_echoed, no handshake bytes"
	"tcp_md5_plain|TCP-MD5 to a plain listener: client option_no_space, data intact"
	"tcp_md5_smr|TCP-MD5 to an SMR listener: client option_no_space, server peer_no_smr"
	"reuseport|two SO_REUSEPORT SMR listeners: 20 connections in mode rdma, data intact"
	"many_connects|1000 simultaneous non-blocking SMR connects: all in mode rdma, counters consistent"
	"timeout_client|no ACCEPT comes, PROPOSAL unacknowledged: client resets after 4 x net.smr.handshake_timeout_ms, reason handshake_timeout"
	"timeout_server|no PROPOSAL comes: server falls back (handshake_timeout), no bytes leak"
	"declined|B without an RDMA device declines in its SYN-ACK: client peer_declined (peer no_rdma_device), server no_rdma_device, no handshake messages, data intact"
	"guests|both guests shut down cleanly (no kernel splat, rmmod smr succeeded)"
)

diag() { sed 's/^/# /'; }

echo "TAP version 13"
echo "1..${#tests[@]}"

# Without the pieces every test fails with the reason (never a skip).
missing=()
# vm-run --dry-run names the smr.ko built for the guests' kernel, or
# says which make target builds it.
dry=$("$repo/scripts/vm-run" --dry-run 2>&1) || missing+=("$dry")
[ -x "$repo/scripts/vm-run" ] || missing+=("scripts/vm-run")
for p in tcpdump socat nft python3; do
	command -v "$p" >/dev/null || missing+=("$p (run scripts/install-deps)")
done
mkdir -p "$repo/build/negot-test"
if ! make -s -C "$repo/selftests/negot" >"$repo/build/negot-test/build.log" 2>&1; then
	missing+=("build/negot tools: make -C selftests/negot failed: $(tail -n 5 "$repo/build/negot-test/build.log")")
fi
if [ ${#missing[@]} -gt 0 ]; then
	n=0
	for t in "${tests[@]}"; do
		n=$((n + 1))
		echo "not ok $n - ${t#*|}"
		printf 'missing: %s\n' "${missing[@]}" | diag
	done
	exit 1
fi

rm -rf "$run"
mkdir -p "$run"
t0=$SECONDS
echo "# booting two guests (vm-run log: ${log#"$repo"/})"
SMR_VM_RUN_DIR=$run "$repo/scripts/vm-run" --hosts 2 \
	--timeout "${SMR_NEGOT_TIMEOUT:-900}" \
	--b "$repo/selftests/negot/negot_b.sh service" \
	-- "$repo/selftests/negot/negot_a.sh" >"$log" 2>&1
vm_rc=$?
echo "# vm-run exited $vm_rc after $((SECONDS - t0)) s"

out_a=$run/out/a
results=$out_a/results

run_tail_shown=0
run_tail() {
	echo "--- vm-run output (last 40 lines; all of it in ${log#"$repo"/}):"
	tail -n 40 "$log"
}

fails=0
n=0
for t in "${tests[@]}"; do
	n=$((n + 1))
	id=${t%%|*}
	desc=${t#*|}
	if [ "$id" = guests ]; then
		if [ "$vm_rc" = 0 ]; then
			echo "ok $n - $desc"
		else
			echo "not ok $n - $desc"
			fails=$((fails + 1))
			{
				echo "vm-run exited $vm_rc; its verdict:"
				grep -E '^vm-run: ' "$log" | tail -n 20
				[ "$run_tail_shown" = 1 ] || run_tail
			} | diag
			run_tail_shown=1
		fi
		continue
	fi
	line=$(awk -v id="$id" '$1 == id' "$results" 2>/dev/null | tail -n 1)
	verdict=$(awk '{ print $2 }' <<<"$line")
	summary=$(cut -d' ' -f3- <<<"$line")
	if [ "$verdict" = ok ]; then
		echo "ok $n - $desc"
		echo "$summary" | diag
	else
		echo "not ok $n - $desc"
		fails=$((fails + 1))
		{
			if [ -z "$line" ]; then
				echo "no result: host A's script did not get to this test"
				[ "$run_tail_shown" = 1 ] || run_tail
			else
				echo "$summary"
			fi
			[ ! -s "$out_a/diag-$id.txt" ] || cat "$out_a/diag-$id.txt"
		} | diag
		[ -n "$line" ] || run_tail_shown=1
	fi
done

echo "# negotiation: $((n - fails)) of $n passed in $((SECONDS - t0)) s; run directory ${run#"$repo"/}"
[ "$fails" = 0 ]
