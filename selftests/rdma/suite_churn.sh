# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2154 # guests.sh and bed.sh set peer, work, stream, bg_pid
#
# The churn suite's cases (selftests/churn_test.sh; sourced by
# the build host for the list, on host A for the case_ID functions and on
# host B for its b_VERB requests: selftests/lib/guests.sh).
#
#   burst     32 clients at once against listen(fd, 5) on B, over plain TCP
#             and over SMR in the same boot, several rounds: SMR fails no
#             connection TCP serves (issue 9, item 9)
#   privdrop  a root listener whose accepting process drops to uid 65534
#             (a privilege-dropping server): its connections are charged to
#             root at the handshake and must be uncharged from root; with
#             net.smr.mem_user_max at 2 MiB, 100 connections in batches of
#             5 all run in mode rdma (issue 9, item 10: the uncharge from
#             the wrong user warned and leaked root's charge)
#   churn     thousands of connection lifecycles both ways with random
#             sizes, some processes killed with SIGKILL mid-transfer: no
#             socket or connection is left, the link survives, counters
#             back to their baseline

# shellcheck disable=SC2034 # read by selftests/lib/guests.sh
suite_tests=(
	"burst|32 clients at once against listen(fd, 5), 100 bytes each way, 5 rounds: SMR fails no connection (plain TCP in the same boot: the reference), modes and fallback reasons counted"
	"privdrop|a root listener accepting as uid 65534, net.smr.mem_user_max 2 MiB: 100 connections in batches of 5 all in mode rdma, nothing refused for memory (charges returned to root)"
	"churn|thousands of connection lifecycles with random sizes both ways, some clients and servers killed mid-transfer: no socket or connection left, the link lives, counters back to baseline"
)

# --- host B --------------------------------------------------------------------

# sysctl KEY=VALUE: set one of B's sysctls; prints the old value.
b_sysctl() {
	local key=${1%%=*}
	sysctl -n "$key"
	sysctl -qw "$1"
}

# conns_count: connections in B's /proc/net/smr/conns.
b_conns_count() {
	awk 'NR > 1' /proc/net/smr/conns | wc -l
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

case_burst() {
	local round port good bad rdma tcp reasons
	local smr_bad=0 tcp_bad=0 smr_rdma=0 smr_tcp=0 all_reasons=
	t_begin burst
	for round in 1 2 3 4 5; do
		for t in tcp smr; do
			port=$((7100 + round * 2))
			[ "$t" = smr ] && port=$((port + 1))
			# echo-sized streams: a burst of larger first flights is
			# reset by plain TCP too (data behind a dropped cookie ACK)
			serve "burst_${t}_$round" -t "$t" -p "$port" -n 32 -B 5 \
				-s 100 -m 100 -M any -T 60 || continue
			client "burst_${t}_$round" -t "$t" -a "$peer" -p "$port" -n 32 \
				-s 100 -m 100 -M any -T 60
			server_result "burst_${t}_$round" 60
			read -r good bad rdma tcp reasons <<<"$(conn_counts "$work/burst_${t}_$round.client")"
			if [ "$t" = tcp ]; then
				tcp_bad=$((tcp_bad + 32 - good))
			else
				smr_bad=$((smr_bad + 32 - good))
				smr_rdma=$((smr_rdma + rdma))
				smr_tcp=$((smr_tcp + tcp))
				all_reasons+=$reasons
			fi
			[ "$bad" = 0 ] || t_file "round $round $t clients" "$work/burst_${t}_$round.client" 8
		done
	done
	ck "plain TCP: connections that failed of 160" "$tcp_bad" eq 0
	ck "SMR: connections that failed of 160" "$smr_bad" eq 0
	t_note "5 rounds of 32 at once against backlog 5: TCP $tcp_bad of 160 failed; SMR $smr_bad of 160 failed, $smr_rdma in mode rdma, $smr_tcp fell back (${all_reasons:-none})"
	t_end
}

case_privdrop() {
	local saved batch port ok=0 lim nomem self=$SMR_SELF_ADDR
	t_begin privdrop
	snap pd.pre
	saved=$(sysctl -n net.smr.mem_user_max)
	sysctl -qw net.smr.mem_user_max=2097152
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
	t_note "root listener, accepting process uid 65534, mem_user_max 2 MiB: $ok of 100 connections (20 batches of 5) in mode rdma; refused for memory: $lim, no_memory fallbacks: $nomem"
	t_end
}

# wait_settled HOST: sockets_active of HOST (a|b) and its conns drain (30 s).
wait_settled() {
	local i active conns
	for i in $(seq 150); do
		if [ "$1" = a ]; then
			conns=$(awk 'NR > 1' /proc/net/smr/conns | wc -l)
			active=$(rdma_stats | awk '$1 == "sockets_active" { print $2 }')
		else
			conns=$(b_call conns_count)
			active=$(b_call stats | awk '$1 == "sockets_active" { print $2 }')
		fi
		[ "$conns" = 0 ] && [ "${active:-1}" = 0 ] && return 0
		[ "$i" -lt 150 ] && sleep 0.2
	done
	echo "$1: $conns connections, $active sockets active"
	return 1
}

case_churn() {
	local round port n size killed=0 started=0 t_end_s r links_pre links_post
	t_begin churn
	snap churn.pre
	links_pre=$(rdma_links_count)
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
	links_post=$(rdma_links_count)
	ck "links on A after the churn" "$links_post" eq "$links_pre"
	ck "A's link failures during the churn" "$(delta churn.pre churn.post a links_failed)" eq 0
	ck "B's link failures during the churn" "$(delta churn.pre churn.post b links_failed)" eq 0
	t_note "$started connection lifecycles in $round rounds ($killed with a process killed mid-transfer) in $((SECONDS - t_start)) s; afterwards no SMR socket or connection on either host, links $links_pre -> $links_post, none failed"
	t_end
}
