# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2154 # guests.sh and bed.sh set peer, work, stream, bg_pid
#
# The churn suite's cases (selftests/churn_test.sh; sourced by
# the build host for the list, on host A for the case_ID functions and on
# host B for its b_VERB requests: selftests/lib/guests.sh).
#
#   burst     32 clients at once against listen(fd, 5) on B, over plain TCP
#             and over SMR in the same boot: without SYN cookies TCP serves
#             every one and so must SMR; with them, SMR's only failures are
#             TCP's own cookie connections (issue 9, item 9)
#   privdrop  a root listener whose accepting process drops to uid 65534
#             (a privilege-dropping server): its connections are charged to
#             root at the handshake and must be uncharged from root; with
#             net.smr.mem_user_max at 32 MiB (a batch's connections, both
#             ends on this host, pin about 21 MiB of root's: RMBs of 2 MiB
#             from TCP's 6.12 receive buffer), 100 connections in batches of
#             5 all run in mode rdma (issue 9, item 10: the uncharge from
#             the wrong user warned and leaked root's charge)
#   churn     thousands of connection lifecycles both ways with random
#             sizes, some processes killed with SIGKILL mid-transfer: no
#             socket or connection is left, the link survives, counters
#             back to their baseline
#   idle_race B's link expires soon after its last connection, A's after
#             10 min. A's next connection attaches to the link at once, B
#             only when its PROPOSAL arrives: B holds that PROPOSAL (nft
#             drops data to its port) past its expiry, 5 rounds; then 150
#             connections one after another, 0 to 100 ms apart. An end
#             that let a link go alone took A's connection down with it
#             (before the fix: every held round; 2 of 150 unheld)

# shellcheck disable=SC2034 # read by selftests/lib/guests.sh
suite_tests=(
	"burst|32 clients at once against listen(fd, 5), 100 bytes each way: without SYN cookies (3 rounds) plain TCP and SMR fail none; with them (2 rounds) SMR fails none other than TCP cookie connections TCP itself resets (plain TCP in the same boot: the reference)"
	"privdrop|a root listener accepting as uid 65534, net.smr.mem_user_max 32 MiB (one batch pins about 21 MiB of root's): 100 connections in batches of 5 all in mode rdma, nothing refused for memory (charges returned to root)"
	"churn|thousands of connection lifecycles with random sizes both ways, some clients and servers killed mid-transfer: no socket or connection left, the link lives, counters back to baseline"
	"idle_race|B's link expires 1 s after its last connection, A's after 10 min: A's next connection attaches to the link at once, B holds its PROPOSAL (nft) past the expiry, 5 rounds: B asks, A says no (links_idle_kept), the connection runs in mode rdma; then 150 connections one after another 0 to 100 ms apart with B's expiry at 100 ms: the link goes only when both ends agree, every connection runs in mode rdma, intact, no link failure counted on either host"
)

# --- host B --------------------------------------------------------------------

# sysctl KEY=VALUE: set one of B's sysctls; prints the old value.
b_sysctl() {
	local key=${1%%=*}
	sysctl -n "$key"
	sysctl -qw "$1"
}

# hold_data PORT|off: drop TCP segments to PORT longer than 100 bytes
# (a handshake message; SYNs and bare ACKs pass), or stop: "ok".
b_hold_data() {
	nft delete table inet smr_churn 2>/dev/null
	if [ "$1" = off ]; then
		echo ok
		return
	fi
	[[ $1 =~ ^[0-9]+$ ]] || { echo "bad port: $1"; return; }
	if nft -f - <<NFT
table inet smr_churn {
	chain in { type filter hook input priority 0; tcp dport $1 meta length > 100 drop; }
}
NFT
	then echo ok; else echo "nft failed"; fi
}

# smr_slab: objects in use in smr's socket slab ("SMR" in /proc/slabinfo),
# "missing" if there is no such slab. SLUB counts the free objects of its
# per-CPU slabs as active: shrinking the cache first flushes those, so what
# is left is sockets still allocated.
smr_slab() {
	[ ! -w /sys/kernel/slab/SMR/shrink ] || echo 1 >/sys/kernel/slab/SMR/shrink
	awk '$1 == "SMR" { print $2; found = 1 } END { if (!found) print "missing" }' /proc/slabinfo
}

b_smr_slab() {
	smr_slab
}

# --- host A --------------------------------------------------------------------

# conn_counts FILE: "ok failed rdma tcp REASONS" of smr_stream's lines.
conn_counts() {
	awk '/^conn / {
		ok = 0; mode = ""; reason = ""
		for (i = 2; i <= NF; i++) {
			split($i, kv, "=")
			if (kv[1] == "ok") ok = kv[2]
			if (kv[1] == "mode") mode = kv[2]
			if (kv[1] == "reason") reason = kv[2]
		}
		if (ok != 1) { bad++; next }
		good++
		if (mode == "rdma") rdma++
		else { tcp++; why[reason]++ }
	}
	END {
		r = ""
		for (k in why) r = r k ":" why[k] " "
		printf "%d %d %d %d %s\n", good, bad, rdma, tcp, r
	}' "$1"
}

# burst_round COOKIES ROUND: 32 clients at once against backlog 5 on B,
# plain TCP then SMR; adds to the burst_* totals.
burst_round() {
	local cookies=$1 round=$2 t port good bad rdma tcp reasons name
	for t in tcp smr; do
		port=$((7100 + cookies * 20 + round * 2))
		[ "$t" = smr ] && port=$((port + 1))
		name=burst_${t}_c${cookies}_$round
		# echo-sized streams: a burst of larger first flights is
		# reset by plain TCP too (data behind a dropped cookie ACK)
		serve "$name" -t "$t" -p "$port" -n 32 -B 5 -s 100 -m 100 \
			-M any -T 25 || continue
		client "$name" -t "$t" -a "$peer" -p "$port" -n 32 -s 100 \
			-m 100 -M any -T 25
		server_result "$name" 40
		read -r good bad rdma tcp reasons <<<"$(conn_counts "$work/$name.client")"
		if [ "$t" = tcp ]; then
			burst_tcp_bad[cookies]=$((burst_tcp_bad[cookies] + 32 - good))
		else
			burst_smr_bad[cookies]=$((burst_smr_bad[cookies] + 32 - good))
			burst_smr_rdma[cookies]=$((burst_smr_rdma[cookies] + rdma))
			burst_reasons[cookies]+=$reasons
			# failures TCP would share: fallen back on a cookie,
			# which the client sees as syn_cookies, or, when the
			# SYN queue was full (B makes no negotiation record
			# for a SYN TCP keeps no request sock for), as no
			# answer: peer_no_smr from an SMR listener
			burst_smr_own[cookies]=$((burst_smr_own[cookies] + \
				$(awk '/^conn / && !/ ok=1/ && !/ reason=(syn_cookies|peer_no_smr) /' \
					"$work/$name.client" | wc -l)))
		fi
		[ "$bad" = 0 ] || t_file "$name clients" "$work/$name.client" 8
	done
}

case_burst() {
	local round old
	burst_tcp_bad=(0 0) burst_smr_bad=(0 0) burst_smr_rdma=(0 0)
	burst_smr_own=(0 0) burst_reasons=("" "")
	t_begin burst
	# Without SYN cookies TCP drops the SYNs its queue has no room for
	# and the clients retransmit: TCP serves every connection, so SMR
	# must too (it may fall back).
	old=$(b_call sysctl net.ipv4.tcp_syncookies=0 | head -n 1)
	for round in 1 2 3; do
		burst_round 0 "$round"
	done
	b_call sysctl "net.ipv4.tcp_syncookies=${old:-1}" >/dev/null
	# With cookies (the default) TCP itself resets some connections whose
	# cookie ACK met a full accept queue; SMR's may fail only that way.
	for round in 1 2; do
		burst_round 1 "$round"
	done
	ck "no SYN cookies: plain TCP connections that failed of 96" "${burst_tcp_bad[0]}" eq 0
	ck "no SYN cookies: SMR connections that failed of 96" "${burst_smr_bad[0]}" eq 0
	ck "SYN cookies: SMR connections that failed other than as TCP's cookie connections (of 64)" "${burst_smr_own[1]}" eq 0
	t_note "32 at once against backlog 5 on B. Without SYN cookies, 3 rounds: TCP ${burst_tcp_bad[0]} of 96 failed, SMR ${burst_smr_bad[0]} of 96 (${burst_smr_rdma[0]} in mode rdma, fallbacks: ${burst_reasons[0]:-none}). With SYN cookies, 2 rounds: TCP ${burst_tcp_bad[1]} of 64 failed, SMR ${burst_smr_bad[1]} of 64, all of them TCP cookie connections reset by TCP (${burst_smr_rdma[1]} in mode rdma, fallbacks: ${burst_reasons[1]:-none})"
	t_end
}

case_privdrop() {
	local saved batch port ok=0 lim nomem self=$SMR_SELF_ADDR r
	t_begin privdrop
	# root's charges of the cases before must be back first
	r=$(wait_settled a) || t_fail "A not settled before the case: $r; $(awk 'NR > 1' /proc/net/smr/conns | head -n 5 | tr '\n' ';')"
	snap pd.pre
	saved=$(sysctl -n net.smr.mem_user_max)
	sysctl -qw net.smr.mem_user_max=33554432
	for batch in $(seq 20); do
		port=$((7300 + batch))
		rm -f "$work/pd$batch.ready"
		"$stream" server -a "$self" -p "$port" -n 5 -U 65534 -s 16384 \
			-m 4096 -M rdma -T 60 -R "$work/pd$batch.ready" \
			>"$work/pd$batch.server" 2>&1 &
		local spid=$!
		rdma_wait_file "$work/pd$batch.ready" 30 ||
			t_fail "batch $batch: the server did not listen"
		client "pd$batch" -a "$self" -p "$port" -n 5 -s 16384 -m 4096 -M rdma -T 60
		wait "$spid" || t_file "batch $batch: server" "$work/pd$batch.server" 5
		ok=$((ok + $(grep -c '^conn .* ok=1' "$work/pd$batch.client")))
	done
	sysctl -qw net.smr.mem_user_max="$saved"
	snap pd.post
	ck "connections in mode rdma, intact, of 100" "$ok" eq 100
	lim=$(delta pd.pre pd.post a buffers_user_limit)
	nomem=$(delta pd.pre pd.post a fallback_no_memory)
	ck "connections refused by mem_user_max" "$lim" eq 0
	ck "connections fallen back for memory" "$nomem" eq 0
	t_note "root listener, accepting process uid 65534, mem_user_max 32 MiB: $ok of 100 connections (20 batches of 5) in mode rdma; refused for memory: $lim, no_memory fallbacks: $nomem"
	t_end
}

# wait_settled HOST: sockets_active of HOST (a|b) and its conns drain (30 s,
# time-scaled).
wait_settled() {
	local i active conns n
	n=$(tscale 150)
	for i in $(seq "$n"); do
		if [ "$1" = a ]; then
			conns=$(awk 'NR > 1' /proc/net/smr/conns | wc -l)
			active=$(rdma_stats | awk '$1 == "sockets_active" { print $2 }')
		else
			conns=$(b_call conns_count)
			active=$(b_call stats | awk '$1 == "sockets_active" { print $2 }')
		fi
		[ "$conns" = 0 ] && [ "${active:-1}" = 0 ] && return 0
		[ "$i" -lt "$n" ] && sleep 0.2
	done
	echo "$1: $conns connections, $active sockets active"
	return 1
}

case_churn() {
	local round port n size killed=0 started=0 t_end_s r links_pre links_post
	t_begin churn
	snap churn.pre
	links_pre=$(rdma_links | awk -v p="$peer" 'NR > 1 && $6 == p' | wc -l)
	t_end_s=$((SECONDS + ${SMR_CHURN_SECONDS:-150}))
	round=0
	while [ "$SECONDS" -lt "$t_end_s" ]; do
		round=$((round + 1))
		port=$((7400 + round % 500))
		n=$((20 + RANDOM % 80))
		size=$((1 + RANDOM % 200000))
		serve "churn$round" -p "$port" -n "$n" -s "$size" -m 65536 -M any -T 60 || break
		client_bg "churn$round" -a "$peer" -p "$port" -n "$n" -s "$size" -m 65536 -M any -T 60
		case $((round % 4)) in
		1)	# the client dies mid-transfer
			sleep "0.$((RANDOM % 10))"
			kill -KILL "$bg_pid" 2>/dev/null
			pkill -KILL -f "smr_stream client .* -p $port " 2>/dev/null
			# its server would wait for the rest until its deadline
			b_call stop "churn$round" >/dev/null
			killed=$((killed + 1))
			;;
		2)	# the server dies mid-transfer
			sleep "0.$((RANDOM % 10))"
			b_call stop "churn$round" >/dev/null
			killed=$((killed + 1))
			;;
		esac
		wait "$bg_pid" 2>/dev/null
		r=$(b_call result "churn$round" 60)
		started=$((started + n))
		# streams that were not killed must be intact
		if [ $((round % 4)) = 3 ] || [ $((round % 4)) = 0 ]; then
			grep -q '^rc=0' "$work/churn$round.client" ||
				{ t_fail "round $round ($n x $size B): a connection was not intact"; t_file "round $round client" "$work/churn$round.client" 5; }
		fi
		grep -q 'wrong byte\|rx_bad=[0-9]' <<<"$r" &&
			t_fail "round $round: B received a wrong byte"
	done
	r=$(wait_settled a) || t_fail "A not settled: $r"
	r=$(wait_settled b) || t_fail "B not settled: $r"
	snap churn.post
	# the link to B carried it all (others may idle out meanwhile)
	links_post=$(rdma_links | awk -v p="$peer" 'NR > 1 && $6 == p && $3 == "active"' | wc -l)
	ck "A's active links to B after the churn" "$links_post" eq 1
	ck "A's link failures during the churn" "$(delta churn.pre churn.post a links_failed)" eq 0
	ck "B's link failures during the churn" "$(delta churn.pre churn.post b links_failed)" eq 0
	# back to the baseline: links idle out at once, their pools go with them
	sysctl -qw net.smr.link_idle_timeout_ms=100
	b_call sysctl net.smr.link_idle_timeout_ms=100 >/dev/null
	wait_until 30 no_links_a || t_fail "A: links left: $(rdma_links | tr '\n' ' ')"
	wait_until 30 no_links_b || t_fail "B: links left: $(b_call links | tr '\n' ' ')"
	ck "A: buffer_bytes_pinned once the links went" "$(rdma_kv "$RDMA_STATS" buffer_bytes_pinned)" eq 0
	ck "B: buffer_bytes_pinned once the links went" "$(b_call stats | awk '$1 == "buffer_bytes_pinned" { print $2 }')" eq 0
	ck "A: SMR sockets in the slab" "$(smr_slab)" eq 0
	ck "B: SMR sockets in the slab" "$(b_call smr_slab)" eq 0
	sysctl -qw net.smr.link_idle_timeout_ms=30000
	b_call sysctl net.smr.link_idle_timeout_ms=30000 >/dev/null
	t_note "$started connection lifecycles in $round rounds ($killed with a process killed mid-transfer) in $((SECONDS - t_start)) s; afterwards no SMR socket or connection on either host, none failed; once the links idled out, nothing pinned and no SMR socket in the slab on either host"
	t_end
}

# idle_held ROUND: A's connection attaches to the link B's expiry is
# about to end while B holds its PROPOSAL; "ok N" if it ran in mode rdma,
# intact (N: A's links_idle_kept meanwhile), else what happened.
idle_held() {
	local r=$1 p1=$((7280 + 2 * $1)) p2=$((7281 + 2 * $1)) r1 r2 kept0 kept1
	r1=$(b_call hold_data "$p2")
	[ "$r1" = ok ] || { echo "B's nft: $r1"; return; }
	serve "irh$r.1" -p "$p1" -n 1 -s 512 -M rdma -T 60 || return
	serve "irh$r.2" -p "$p2" -n 1 -s 512 -M rdma -T 120 || return
	kept0=$(rdma_kv "$RDMA_STATS" links_idle_kept)
	# the link up (or reused), then unused: B's expiry armed
	client "irh$r.1" -a "$peer" -p "$p1" -n 1 -s 512 -M rdma -T 60
	client_bg "irh$r.2" -a "$peer" -p "$p2" -n 1 -s 512 -M rdma -T 120
	sleep "$(tscale 4)"
	kept1=$(rdma_kv "$RDMA_STATS" links_idle_kept)
	b_call hold_data off >/dev/null
	client_bg_wait "$bg_pid" "irh$r.2"
	server_result "irh$r.1" 30
	server_result "irh$r.2" 60
	r1=$(conn_counts "$work/irh$r.1.client")
	r2=$(conn_counts "$work/irh$r.2.client")
	if [ "${r1%% *}" = 1 ] && [ "$(echo "$r2" | cut -d' ' -f3)" = 1 ] &&
	   grep -q '^conn .* ok=1' "$work/irh$r.2.server"; then
		echo "ok $((kept1 - kept0))"
	else
		echo "first: $r1; held: $r2 (ok failed rdma tcp reasons)"
	fi
}

case_idle_race() {
	local n=150 port=7299 i r old_a old_b hs_a hs_b ok bad rdma tcp why gone
	local held=0 kept=0
	t_begin idle_race
	r=$(wait_settled a) || t_fail "A not settled before the case: $r"
	snap ir.pre
	old_a=$(sysctl -n net.smr.link_idle_timeout_ms)
	hs_a=$(sysctl -n net.smr.handshake_timeout_ms)
	sysctl -qw net.smr.link_idle_timeout_ms=600000
	# the held PROPOSAL comes seconds late (TCP's retransmission)
	sysctl -qw net.smr.handshake_timeout_ms=20000
	hs_b=$(b_call sysctl net.smr.handshake_timeout_ms=20000)
	old_b=$(b_call sysctl net.smr.link_idle_timeout_ms="$(tscale 1000)")
	for i in 1 2 3 4 5; do
		r=$(idle_held "$i")
		if [[ $r =~ ^ok\ ([0-9]+)$ ]]; then
			held=$((held + 1))
			kept=$((kept + BASH_REMATCH[1]))
			[ "${BASH_REMATCH[1]}" -ge 1 ] ||
				t_fail "round $i: A did not say no to B's asking while its connection waited"
		else
			t_fail "round $i: $r"
		fi
	done
	b_call hold_data off >/dev/null
	ck "held rounds in mode rdma, intact, of 5" "$held" eq 5
	sysctl -qw net.smr.handshake_timeout_ms="$hs_a"
	b_call sysctl net.smr.handshake_timeout_ms="$hs_b" >/dev/null
	snap ir.mid
	b_call sysctl net.smr.link_idle_timeout_ms=100 >/dev/null
	if serve ir -p "$port" -n "$n" -s 512 -M rdma -T 900; then
		: >"$work/ir.client"
		for i in $(seq "$n"); do
			"$stream" client -a "$peer" -p "$port" -n 1 -s 512 \
				-M rdma -T 60 >>"$work/ir.client" 2>&1
			sleep "$(printf '0.%03d' $((RANDOM % 100)))"
		done
		server_result ir 60
		cp "$work/ir.client" "$out/conns/"
	fi
	sysctl -qw net.smr.link_idle_timeout_ms="$old_a"
	b_call sysctl net.smr.link_idle_timeout_ms="$old_b" >/dev/null
	snap ir.post
	read -r ok bad rdma tcp why <<<"$(conn_counts "$work/ir.client")"
	ck "A's connections intact in mode rdma, of $n" "$rdma" eq "$n"
	ck "A's connections that failed" "$bad" eq 0
	ck "A's connections over TCP (reasons: ${why:-none})" "$tcp" eq 0
	ck "B's connections intact" "$(grep -c '^conn .* ok=1' "$work/ir.server")" eq "$n"
	ck "A's link failures" "$(delta ir.pre ir.post a links_failed)" eq 0
	ck "B's link failures" "$(delta ir.pre ir.post b links_failed)" eq 0
	# B's link expired between connections many times, by agreement
	gone=$(delta ir.mid ir.post b links_idle_expired)
	ck "B's links ended idle, A agreeing" "$gone" ge 10
	[ "$rdma" = "$n" ] || delta_table ir.pre ir.post >>"$out/diag-$t_id.txt"
	t_note "B's link expiring (1 s) while A's next connection waited for B to take its PROPOSAL (held by nft): $held of 5 rounds in mode rdma, A said no to B's asking $kept times; then $n connections from A 0 to 100 ms apart, B's expiry 100 ms: $rdma in mode rdma and intact, $bad failed, $tcp over TCP; B's link ended idle $gone times, A said no $(delta ir.mid ir.post a links_idle_kept) times; links_failed A +$(delta ir.pre ir.post a links_failed), B +$(delta ir.pre ir.post b links_failed)"
	t_end
}
