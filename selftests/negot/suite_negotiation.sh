# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034,SC2154 # registry read, work & co set by guests.sh
#
# The negotiation suite (selftests/negotiation_test.sh): SMR's TCP-option
# negotiation and handshake between two guests. B's servers (negot_probe),
# nftables rules, sysctls and an echoing NFQUEUE middlebox (negot_echo_mb)
# are set up through B's control service; clients run on A; both ends
# report each connection (negot_probe's "conn" lines) and the SYNs and
# SYN-ACKs on A's NIC are captured for the wire checks. Every connection is
# checked from both ends: mode and reason (SMR_INFO), tokens, RMB sizes,
# handshake message and byte counts, byte counters (RDMA's share of them
# too) and /proc/net/smr/stats, and SHA-256 plus offset-exact pattern
# checks of the data both ways. Negotiated pairs end in mode rdma; the
# other cases fall back to TCP, each with its reason.
#
# Environment: SMR_NEGOT_TESTS (the cases to run, default all; the wire
# cases read the captures of the negotiated and plain ones),
# SMR_NEGOT_TIMEOUT (vm-run's timeout in s, default 900), SMR_NEGOT_VM_RUN
# (another checkout's vm-run, which boots that checkout's smr.ko: e.g. a
# worktree of an older commit, to see a case fail before its fix).
# (no process substitution below: the guests' /dev has no /dev/fd)

suite_tests=(
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
	"syn_cookies_full|tcp_syncookies=1 and a listener whose SYN queue is full (backlog 0, one forged SYN's request sock held): TCP answers with a cookie and SMR keeps no record for it, yet the SYN-ACK carries the COOKIE answer: client syn_cookies, server peer_no_smr (it kept nothing), data intact"
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
	"flood_spoofed_syn|forged SYNs with a valid offer at B's listener X: B's records for X within backlog + 1 in a burst (no record once TCP's SYN queue is full), 2 x (backlog + 1) over time, the excess counted as refused; connections to listener Y during the flood and to X after it in mode rdma"
	"flood_listener_share|forged SYNs at B's listener X (backlog 4096): X holds at most an eighth of B's answer share; listener Y (backlog 128) keeps negotiating, its connections during the flood in mode rdma"
	"flood_memcg|forged SYNs at a listener in a memory cgroup of its own on B: its records are charged to that cgroup (made in softirq), the charge goes with them"
	"flood_syn_sent_user|uid 65534 opens share + 1000 SMR connects nobody answers: it holds its share of A's records and no more, its own connection falls back with negot_limit, root's run in mode rdma"
	"flood_netns_isolation|70000 forged offers at 9 listeners fill a namespace on B: it fills its own answer share and holds no more than it (plus each listener's floor), B's initial namespace refuses nothing and its connections run in mode rdma"
)

bed_name=negot
bed_ctl_port=7000
bed_run_name=negot
bed_timeout_var=SMR_NEGOT_TIMEOUT
bed_select_var=SMR_NEGOT_TESTS
bed_vm_run_var=SMR_NEGOT_VM_RUN
bed_needs=(tcpdump socat nft python3)
bed_make=(selftests/negot)
NEGOT_DIR=$BED_TOP/selftests/negot
NEGOT_BIN=$BED_TOP/build/negot
# The NFQUEUE number of the echoing middlebox.
NEGOT_ECHO_QUEUE=7
probe=$NEGOT_BIN/negot_probe
bed_server=("$probe")
# 1000 connections are checked field by field: only failures are written
ck_log_ok=0

# Handshake messages on the TCP stream, bytes (Documentation/protocol.rst):
# the client sends PROPOSAL and CONFIRM, the server ACCEPT.
HS_PROPOSAL=68
HS_ACCEPT=80
HS_CONFIRM=44
HS_CLIENT_SENT=$((HS_PROPOSAL + HS_CONFIRM))
# LINK_REQUEST and LINK_GRANT: before the PROPOSAL of a connection whose
# RDMA link is new (protocol.rst, "The RDMA link")
HS_LINK_MSG=36

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

suite_a_setup() {
	pcap=$work/syn.pcap
	cap_start
}

suite_a_teardown() {
	kill -INT "$tcpdump_pid" 2>/dev/null
	wait "$tcpdump_pid" 2>/dev/null
	cp "$pcap" "$out/syn.pcap"
	python3 "$NEGOT_DIR/negot_pcap.py" "$pcap" >"$out/syn.txt" 2>&1
}

# --- host B ----------------------------------------------------------------------

# strip_answer PORT: SYN-ACKs from PORT leave without their kind-254
# option (nftables overwrites it with NOPs, after SMR's output hook).
b_strip_answer() {
	nft -f - <<-EOF && echo ok
	table inet negot_strip {
		chain out {
			type filter hook output priority filter; policy accept;
			tcp sport $1 tcp flags & (syn | ack) == syn | ack reset tcp option 254 counter
		}
	}
	EOF
}

# drop_hs PORT: segments to PORT whose payload starts with the handshake
# magic ("SMRH") never arrive: the server never sees a PROPOSAL.
b_drop_hs() {
	nft -f - <<-EOF && echo ok
	table inet negot_drop {
		chain in {
			type filter hook input priority filter; policy accept;
			tcp dport $1 @ih,0,32 0x534d5248 counter drop
		}
	}
	EOF
}

# echo_start PORT: SYN-ACKs from PORT echo the SYN's SMR option verbatim.
b_echo_start() {
	local port=$1
	start_detached echo_mb "$NEGOT_BIN/negot_echo_mb" -q "$NEGOT_ECHO_QUEUE" \
		-p "$port" -R "$work/echo_mb.ready"
	if ! wait_detached echo_mb "$work/echo_mb.ready" 20; then
		echo "fail: negot_echo_mb did not start"
		cat "$work/echo_mb.err" 2>/dev/null
		return
	fi
	nft -f - <<-EOF && echo ok
	table inet negot_echo {
		chain in {
			type filter hook input priority filter; policy accept;
			tcp dport $port tcp flags & (syn | ack) == syn counter queue num $NEGOT_ECHO_QUEUE bypass
		}
		chain out {
			type filter hook output priority filter; policy accept;
			tcp sport $port tcp flags & (syn | ack) == syn | ack counter queue num $NEGOT_ECHO_QUEUE bypass
		}
	}
	EOF
}

b_echo_stop() {
	nft delete table inet negot_echo 2>/dev/null
	stop_detached echo_mb
	cat "$work/echo_mb.out" 2>/dev/null
	sed 's/^/stderr: /' "$work/echo_mb.err" 2>/dev/null
}

b_nft_list() {
	nft list ruleset
}

b_nft_flush() {
	local t
	for t in $(nft list tables 2>/dev/null | awk '$3 ~ /^negot_/ { print $2 "/" $3 }'); do
		nft delete table "${t%/*}" "${t#*/}"
	done
	echo ok
}

# --- host A: running connections ---------------------------------------------

# pair NAME PORT 'SERVER ARGS' 'CLIENT ARGS' [WAIT]: negot_probe server on B,
# negot_probe client here; outputs in $work/NAME.{client,server}.
pair() {
	local name=$1 port=$2 sargs=$3 cargs=$4 wait=${5:-90} r
	# shellcheck disable=SC2086
	r=$(b_call serve "$name" -p "$port" $sargs)
	if [ "$r" != ok ]; then
		t_fail "$name: B's server did not start: $r"
		: >"$work/$name.client"
		: >"$work/$name.server"
		return 1
	fi
	# shellcheck disable=SC2086
	"$probe" client -p "$port" $cargs >"$work/$name.client" 2>"$work/$name.client.err"
	echo "rc=$?" >>"$work/$name.client"
	b_call result "$name" "$wait" >"$work/$name.server"
	cp "$work/$name.client" "$work/$name.server" "$out/conns/"
	[ ! -s "$work/$name.client.err" ] || cp "$work/$name.client.err" "$out/conns/"
	return 0
}

# ck_summaries NAME N: both ends saw N connections, every one intact (or
# only that they ended, with "any").
ck_summaries() {
	local name=$1 n=$2 f sum
	declare -A sm
	for f in client server; do
		sum=$(grep '^summary ' "$work/$name.$f" | tail -n 1)
		if [ -z "$sum" ]; then
			t_fail "$name: no summary from the $f"
			t_file "$name $f output" "$work/$name.$f" 20
			continue
		fi
		negot_kv sm "$sum"
		ck "$name $f connections" "${sm[started]}" eq "$n"
		[ "${3:-}" = any ] || ck "$name $f intact connections" "${sm[ok]}" eq "$n"
	done
}

declare -gA C S
pair_ctx=
pair_count=0

# each_pair NAME FN: FN runs once per client line, with C (client) and S
# (the server line of the same connection, by port) filled in.
each_pair() {
	local name=$1 fn=$2 line
	local -a lines
	declare -A srv
	# mapfile from the files: read(1) from a pipe goes a byte at a time
	mapfile -t lines <"$work/$name.server"
	for line in "${lines[@]}"; do
		[[ $line == "conn "* && $line =~ \ rport=([0-9]+)\  ]] &&
			srv[${BASH_REMATCH[1]}]=$line
	done
	mapfile -t lines <"$work/$name.client"
	pair_count=0
	for line in "${lines[@]}"; do
		[[ $line == "conn "* ]] || continue
		negot_kv C "$line"
		pair_ctx="$name#${C[idx]} (client port ${C[lport]})"
		if [ -z "${srv[${C[lport]}]:-}" ]; then
			t_fail "$pair_ctx: no server line for this connection"
			continue
		fi
		negot_kv S "${srv[${C[lport]}]}"
		pair_count=$((pair_count + 1))
		"$fn"
	done
}

# Expected bytes per connection for ck_data: client to server, back.
c2s=0
s2c=0

# The pair checks compare everything at once first and only go through
# the checks one by one (for the messages) when something differs: 1000
# connections checked one field at a time take minutes in a TCG guest.
ck_data() {
	local got="${C[err]}@${C[at]} ${S[err]}@${S[at]} ${C[tx]} ${S[rx]} ${S[tx]} ${C[rx]} ${S[rx_bad]} ${C[rx_bad]} ${S[rx_sha]} ${C[rx_sha]}"
	[ "$got" = "0@- 0@- $c2s $c2s $s2c $s2c -1 -1 ${C[tx_sha]} ${S[tx_sha]}" ] ||
		ck_data_each
}

ck_data_each() {
	local p=$pair_ctx
	ck "$p client err" "${C[err]}@${C[at]}" eq "0@-"
	ck "$p server err" "${S[err]}@${S[at]}" eq "0@-"
	ck "$p client bytes sent" "${C[tx]}" eq "$c2s"
	ck "$p server bytes received" "${S[rx]}" eq "$c2s"
	ck "$p server bytes sent" "${S[tx]}" eq "$s2c"
	ck "$p client bytes received" "${C[rx]}" eq "$s2c"
	ck "$p server: first byte off the client's stream" "${S[rx_bad]}" eq -1
	ck "$p client: first byte off the server's stream" "${C[rx_bad]}" eq -1
	ck "$p sha256 client->server (server's view)" "${S[rx_sha]}" eq "${C[tx_sha]}"
	ck "$p sha256 server->client (client's view)" "${C[rx_sha]}" eq "${S[tx_sha]}"
}

# ck_counters SIDE ARRAY: SMR_INFO's byte counters match what moved.
ck_counters() {
	local -n x=$2
	ck "$pair_ctx $1 SMR_INFO bytes_sent" "${x[info_sent]}" eq "${x[tx]}"
	ck "$pair_ctx $1 SMR_INFO bytes_received" "${x[info_recv]}" eq "${x[rx]}"
}

# ck_tcp_bytes SIDE ARRAY: every application byte went over TCP.
ck_tcp_bytes() {
	local -n x=$2
	ck "$pair_ctx $1 SMR_INFO rdma_bytes_sent/received" "${x[rdma_sent]}/${x[rdma_recv]}" eq 0/0
}

# ck_fallback SIDE ARRAY REASONS: TCP mode, one of REASONS, no handshake.
ck_fallback() {
	local -n x=$2
	ck "$pair_ctx $1 mode" "${x[mode]}" eq 2
	ck "$pair_ctx $1 reason" "${x[reason]}" in "$3"
	ck "$pair_ctx $1 mode when usable" "${x[mode_ready]}" eq 2
	ck "$pair_ctx $1 handshake messages sent/received" "${x[hs_sent]}/${x[hs_recv]}" eq 0/0
	ck "$pair_ctx $1 handshake bytes sent/received" "${x[hs_bsent]}/${x[hs_brecv]}" eq 0/0
	ck "$pair_ctx $1 tokens" "${x[ltok]}/${x[ptok]}" eq 0000000000000000/0000000000000000
	ck_counters "$1" "$2"
	ck_tcp_bytes "$1" "$2"
}

rmb_ok() {
	[[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge 16384 ] && [ "$1" -le 268435456 ] &&
		[ $(($1 & ($1 - 1))) = 0 ]
}

# Both ends negotiated: tokens and RMBs crossed, mode rdma with reason
# none from the moment the connection was usable, every application byte
# by RDMA. A sender's rdma_bytes_sent may still lag behind its bytes_sent
# when it finishes (its last WRITEs can be on their way once the peer's EOF
# is in), so the exact check is on the receiving side: all of what each end
# received came by RDMA (and ck_data says it was all of what the other end
# sent).
# hs_link_grant: 1 if the pair's client had its new link granted first
# (LINK_REQUEST, LINK_GRANT: one message and HS_LINK_MSG bytes more each
# way), else 0.
hs_link_grant() {
	if [ "${C[hs_sent]}" = 3 ]; then echo 1; else echo 0; fi
}

ck_negotiated() {
	local z=0000000000000000 g
	g=$(hs_link_grant)
	local cs=$((HS_CLIENT_SENT + g * HS_LINK_MSG)) sa=$((HS_ACCEPT + g * HS_LINK_MSG))
	local got="${C[mode]}/${C[reason]} ${S[mode]}/${S[reason]} ${C[mode_ready]} ${S[mode_ready]} ${C[peer_reason]}/${S[peer_reason]} ${C[hs_sent]}/${C[hs_recv]} ${S[hs_sent]}/${S[hs_recv]} ${C[hs_bsent]}/${C[hs_brecv]} ${S[hs_bsent]}/${S[hs_brecv]} ${C[ptok]} ${S[ptok]} ${C[prmb]} ${S[prmb]} ${C[info_sent]} ${C[info_recv]} ${S[info_sent]} ${S[info_recv]} ${C[rdma_recv]} ${S[rdma_recv]}"
	local want="1/0 1/0 1 1 0/0 $((2 + g))/$((1 + g)) $((1 + g))/$((2 + g)) $cs/$sa $sa/$cs ${S[ltok]} ${C[ltok]} ${S[lrmb]} ${C[lrmb]} ${C[tx]} ${C[rx]} ${S[tx]} ${S[rx]} ${C[rx]} ${S[rx]}"
	if [ "$got" = "$want" ] && [ "${C[ltok]}" != "$z" ] && [ "${S[ltok]}" != "$z" ] &&
		[ "${C[ltok]}" != "${S[ltok]}" ] && rmb_ok "${C[lrmb]}" && rmb_ok "${S[lrmb]}" &&
		[[ ${C[rdma_sent]} =~ ^[0-9]+$ ]] && [ "${C[rdma_sent]}" -le "${C[tx]}" ] &&
		[[ ${S[rdma_sent]} =~ ^[0-9]+$ ]] && [ "${S[rdma_sent]}" -le "${S[tx]}" ]; then
		return 0
	fi
	ck_negotiated_each
}

ck_negotiated_each() {
	local p=$pair_ctx z=0000000000000000 g
	g=$(hs_link_grant)
	local cs=$((HS_CLIENT_SENT + g * HS_LINK_MSG)) sa=$((HS_ACCEPT + g * HS_LINK_MSG))
	ck "$p client mode/reason" "${C[mode]}/${C[reason]}" eq 1/0
	ck "$p server mode/reason" "${S[mode]}/${S[reason]}" eq 1/0
	ck "$p client mode when EPOLLOUT/connect() said usable" "${C[mode_ready]}" eq 1
	ck "$p server mode right after accept()" "${S[mode_ready]}" eq 1
	ck "$p peer_reason client/server" "${C[peer_reason]}/${S[peer_reason]}" eq 0/0
	ck "$p client handshake messages sent/received (link granted first: $g)" "${C[hs_sent]}/${C[hs_recv]}" eq $((2 + g))/$((1 + g))
	ck "$p server handshake messages sent/received" "${S[hs_sent]}/${S[hs_recv]}" eq $((1 + g))/$((2 + g))
	ck "$p client handshake bytes sent/received (PROPOSAL+CONFIRM $HS_PROPOSAL+$HS_CONFIRM, ACCEPT $HS_ACCEPT, LINK_REQUEST/GRANT $HS_LINK_MSG x $g)" \
		"${C[hs_bsent]}/${C[hs_brecv]}" eq "$cs/$sa"
	ck "$p server handshake bytes sent/received" \
		"${S[hs_bsent]}/${S[hs_brecv]}" eq "$sa/$cs"
	ck "$p client token" "${C[ltok]}" ne "$z"
	ck "$p server token" "${S[ltok]}" ne "$z"
	ck "$p client and server tokens differ" "${C[ltok]}" ne "${S[ltok]}"
	ck "$p client's peer token = server's token" "${C[ptok]}" eq "${S[ltok]}"
	ck "$p server's peer token = client's token" "${S[ptok]}" eq "${C[ltok]}"
	ck "$p client's peer RMB = server's RMB" "${C[prmb]}" eq "${S[lrmb]}"
	ck "$p server's peer RMB = client's RMB" "${S[prmb]}" eq "${C[lrmb]}"
	rmb_ok "${C[lrmb]}" || t_fail "$p client RMB size ${C[lrmb]} not a power of two in 16K..256M"
	rmb_ok "${S[lrmb]}" || t_fail "$p server RMB size ${S[lrmb]} not a power of two in 16K..256M"
	ck_counters client C
	ck_counters server S
	ck "$p client SMR_INFO rdma_bytes_received (all it received)" "${C[rdma_recv]}" eq "${C[rx]}"
	ck "$p server SMR_INFO rdma_bytes_received (all it received)" "${S[rdma_recv]}" eq "${S[rx]}"
	ck "$p client SMR_INFO rdma_bytes_sent (at most its bytes_sent)" "${C[rdma_sent]}" le "${C[tx]}"
	ck "$p server SMR_INFO rdma_bytes_sent (at most its bytes_sent)" "${S[rdma_sent]}" le "${S[tx]}"
}

# The client's first byte, sent right after a non-blocking connect()
# returned EINPROGRESS: refused (EAGAIN) until the connection is decided,
# or taken if the decision came first (the process can be preempted
# between the two calls). A byte taken before the decision would come
# before the handshake's messages and break the handshake (mode, reason,
# message counts) or the data check, which every pair is held to.
early_ok=0
ck_early_send() {
	ck "$pair_ctx client send() right after connect() said EINPROGRESS" "${C[early_send]}" in "EAGAIN OK"
	[ "${C[early_send]}" != OK ] || early_ok=$((early_ok + 1))
}

# A blocking connect() that worked returned 0.
ck_connect_ret() {
	ck "$pair_ctx client connect() return value" "${C[connect_ret]}" eq 0
}

chk_negotiated_pair() {
	ck_data
	ck_negotiated
	if [ "$client_nb" = 1 ]; then
		[ "$order" = server-first ] || ck_early_send
	else
		ck_connect_ret
	fi
}

# tokens_unique NAME: no token twice among a run's live connections.
tokens_unique() {
	local f dup
	for f in client server; do
		dup=$(grep '^conn ' "$work/$1.$f" | tr ' ' '\n' | sed -n 's/^ltok=//p' |
			grep -v '^0*$' | sort | uniq -d | head -n 3)
		[ -z "$dup" ] || t_fail "$1: the ${f}s drew a token twice: $dup"
	done
}

# ck_no_spurious NAME: a non-blocking server's listener reported EPOLLIN
# only when accept() had a connection for it.
ck_no_spurious() {
	local sum
	declare -A sm
	sum=$(grep '^summary ' "$work/$1.server" | tail -n 1)
	negot_kv sm "$sum"
	ck "$1 server: listener EPOLLIN with nothing to accept" "${sm[spurious_accept_wakeups]:-}" eq 0
}

# ck_deltas HOST FROM TO NAME=N...: counter changes, exactly.
ck_deltas() {
	local h=$1 from=$2 to=$3 kv
	shift 3
	for kv in "$@"; do
		ck "host ${h^^} counter ${kv%%=*} change" "$(delta "$from" "$to" "$h" "${kv%%=*}")" eq "${kv#*=}"
	done
}

# ck_no_fallback HOST FROM TO: no fallback_* counter moved.
ck_no_fallback() {
	local names
	names=$(awk '$1 ~ /^fallback_/ { printf "%s=0 ", $1 }' "$work/$3.$1.stats")
	if [ -z "$names" ]; then
		t_fail "host ${1^^}: no fallback_* counters in /proc/net/smr/stats"
		return
	fi
	# shellcheck disable=SC2086
	ck_deltas "$1" "$2" "$3" $names
}

# ck_rdma_deltas FROM TO N C2S S2C: N connections from A to B went over RDMA
# with C2S and S2C bytes each: the mode, byte and handshake counters of
# both hosts moved by exactly that, and no fallback counter moved.
ck_rdma_deltas() {
	local from=$1 to=$2 n=$3 c2s=$4 s2c=$5 h
	for h in a b; do
		ck_deltas $h "$from" "$to" handshakes_started="$n" \
			handshakes_completed="$n" handshakes_declined=0 handshakes_aborted=0 \
			bad_options=0 mode_rdma="$n" mode_tcp=0 \
			tcp_bytes_sent=0 tcp_bytes_received=0
		ck_no_fallback $h "$from" "$to"
	done
	ck_deltas a "$from" "$to" rdma_bytes_sent=$((n * c2s)) \
		rdma_bytes_received=$((n * s2c)) connects="$n" accepts=0
	ck_deltas b "$from" "$to" rdma_bytes_sent=$((n * s2c)) \
		rdma_bytes_received=$((n * c2s)) accepts="$n" connects=0
}

# snap_settled LABEL FROM: snap LABEL once sockets_active on both hosts is
# back where it was at snapshot FROM (closed RDMA connections hold their
# sock until both final CDCs are exchanged), or after 20 s.
snap_settled() {
	local i
	for ((i = 0; i < $(tscale 40); i++)); do
		snap_stats "$1"
		[ "$(delta "$2" "$1" a sockets_active)/$(delta "$2" "$1" b sockets_active)" = 0/0 ] &&
			break
		sleep 0.5
	done
	t_diag "sockets_active back after $i extra snapshot(s) of 0.5 s"
}

# --- the capture -------------------------------------------------------------

tcpdump_pid=

cap_start() {
	local nic i
	nic=$(ip -o route get "$peer" | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1) }')
	tcpdump -i "$nic" -n -s 200 --immediate-mode -U -w "$pcap" \
		"(ip and tcp[tcpflags] & tcp-syn != 0 and not net $FLOOD_SPOOF_NET) or (ip6 and ip6[6] == 6 and ip6[53] & 2 != 0)" \
		2>"$work/tcpdump.err" &
	tcpdump_pid=$!
	for ((i = 0; i < $(tscale 100); i++)); do
		grep -q 'listening on' "$work/tcpdump.err" 2>/dev/null && return 0
		sleep 0.1
	done
	log "tcpdump did not start: $(cat "$work/tcpdump.err")"
	return 1
}

# cap_lines PORT: the captured SYNs and SYN-ACKs to or from B's PORT.
cap_lines() {
	sleep 0.3	# let tcpdump write the last ones
	python3 "$NEGOT_DIR/negot_pcap.py" "$pcap" 2>&1 |
		awk -v p="$1" '$0 ~ (" dport=" p " ") || $0 ~ (" sport=" p " ")'
}

declare -gA P

# cap_syn PORT CLIENT_PORT KIND: fill P with the capture's syn or synack of
# that connection; false if it is not there.
cap_pkt() {
	local line
	line=$(cap_lines "$1" | awk -v k="$3" -v c="$2" \
		'$1 == k && ($0 ~ (" sport=" c " ") || $0 ~ (" dport=" c " "))' | head -n 1)
	negot_kv P "$line"
	[ -n "$line" ]
}

# ck_wire PORT CLIENT_PORT SYN_SMR SYNACK_ANSWER: the SYN did (yes) or did
# not (no) carry SMR's offer; the SYN-ACK's option compared with it: proof,
# echo or none.
ck_wire() {
	local port=$1 cport=$2 what="wire (port $1, client port $2)"
	if ! cap_pkt "$port" "$cport" syn; then
		t_fail "$what: no SYN captured"
		return
	fi
	if [ "$3" = yes ]; then
		ck "$what: SYN carries SMR's offer (role 1, ExID 534d5231)" \
			"${P[smr_role]:-none}/${P[smr_exid]:-none}" eq 1/534d5231
	else
		ck "$what: SYN carries no SMR option" "${P[smr]}" eq -
		ck "$what: SYN has no kind-254 option at all" "$(tr ',' '\n' <<<"${P[kinds]}" | grep -cx 254)" eq 0
	fi
	if ! cap_pkt "$port" "$cport" synack; then
		t_fail "$what: no SYN-ACK captured"
		return
	fi
	case $4 in
	none)
		ck "$what: SYN-ACK carries no SMR option" "${P[smr]}" eq -
		;;
	*)
		ck "$what: SYN-ACK's SMR option" "${P[answer]:-none}" eq "$4"
		;;
	esac
}

# --- the cases ---------------------------------------------------------------

client_nb=1
order=both

# negotiated ID NAME PORT FAMILY BLOCKING ORDER N: SMR client to SMR server.
negotiated() {
	local id=$1 name=$2 port=$3 fam=$4 blocking=$5 n=$7
	order=$6
	local addr=$peer fargs='' bargs=''
	[ "$fam" = 6 ] && addr=$peer6 fargs=-6
	[ "$blocking" = 1 ] && bargs=-b
	client_nb=$((1 - blocking))
	c2s=262144 s2c=196608
	local common="$fargs $bargs -n $n -s $c2s -r $s2c -o $order"
	t_begin "$id"
	snap_stats "$name.before"
	pair "$name" "$port" "$common" "-a $addr $common"
	snap_stats "$name.after"
	ck_summaries "$name" "$n"
	each_pair "$name" chk_negotiated_pair
	ck "$name connections checked" "$pair_count" eq "$n"
	tokens_unique "$name"
	[ "$blocking" = 1 ] || ck_no_spurious "$name"
	ck_rdma_deltas "$name.before" "$name.after" "$n" "$c2s" "$s2c"
	t_note "IPv$fam $([ "$blocking" = 1 ] && echo blocking || echo non-blocking), $n conns, order $order, $c2s/$s2c bytes each way: mode rdma (reason none) both ends, every byte by RDMA, tokens crossed, hs 2/1 and 1/2 ($HS_CLIENT_SENT/$HS_ACCEPT bytes), counters mode_rdma/rdma_bytes_* moved, tcp_bytes_* and fallback_* did not"
	t_file "$name client" "$work/$name.client" 3
	t_file "$name server" "$work/$name.server" 3
	t_end
}

case_negotiated_v4_nb() { negotiated negotiated_v4_nb neg4nb 5101 4 0 both 4; }
case_negotiated_v4_b() { negotiated negotiated_v4_b neg4b 5102 4 1 both 4; }
case_negotiated_v6_nb() { negotiated negotiated_v6_nb neg6nb 5103 6 0 both 4; }
case_negotiated_v6_b() { negotiated negotiated_v6_b neg6b 5104 6 1 both 4; }
case_negotiated_server_first() { negotiated negotiated_server_first negsf 5105 4 0 server-first 2; }
case_negotiated_client_first() { negotiated negotiated_client_first negcf 5106 6 1 client-first 2; }

chk_plain_server_pair() {
	ck_data
	ck_fallback client C 2
	if [ "$client_nb" = 1 ]; then ck_early_send; else ck_connect_ret; fi
}

case_plain_server() {
	t_begin plain_server
	c2s=100000 s2c=70000
	client_nb=1
	pair plain_srv4 5201 "-t tcp -n 2 -s $c2s -r $s2c" "-a $peer -n 2 -s $c2s -r $s2c"
	ck_summaries plain_srv4 2
	each_pair plain_srv4 chk_plain_server_pair
	ck "connections checked" "$pair_count" eq 2
	ck_wire 5201 "${C[lport]:-0}" yes none
	client_nb=0
	pair plain_srv6 5202 "-6 -t tcp -b -n 2 -s $c2s -r $s2c" "-6 -b -a $peer6 -n 2 -s $c2s -r $s2c"
	ck_summaries plain_srv6 2
	each_pair plain_srv6 chk_plain_server_pair
	ck "connections checked" "$pair_count" eq 2
	ck_wire 5202 "${C[lport]:-0}" yes none
	t_note "SMR client -> AF_INET/AF_INET6 listener: client peer_no_smr, no handshake, server got exactly the client's bytes"
	t_file "client v4" "$work/plain_srv4.client" 2
	t_end
}

chk_plain_client_pair() {
	ck_data
	ck_fallback server S 2
}

case_plain_client() {
	t_begin plain_client
	c2s=100000 s2c=70000
	pair plain_cli4 5301 "-n 2 -s $c2s -r $s2c" "-t tcp -a $peer -n 2 -s $c2s -r $s2c"
	ck_summaries plain_cli4 2
	each_pair plain_cli4 chk_plain_client_pair
	ck "connections checked" "$pair_count" eq 2
	ck_wire 5301 "${C[lport]:-0}" no none
	pair plain_cli6 5302 "-6 -b -n 2 -s $c2s -r $s2c" "-6 -t tcp -b -a $peer6 -n 2 -s $c2s -r $s2c"
	ck_summaries plain_cli6 2
	each_pair plain_cli6 chk_plain_client_pair
	ck "connections checked" "$pair_count" eq 2
	ck_wire 5302 "${C[lport]:-0}" no none
	t_note "AF_INET/AF_INET6 client -> SMR listener: server peer_no_smr, no handshake, data intact"
	t_end
}

strip_server_reasons=
chk_strip_pair() {
	ck_data
	ck_fallback client C 2
	# the server answered, so it waited for a PROPOSAL that never came
	ck "$pair_ctx server mode" "${S[mode]}" eq 2
	ck "$pair_ctx server reason" "${S[reason]}" in "2 7"
	ck "$pair_ctx server handshake messages sent/received" "${S[hs_sent]}/${S[hs_recv]}" eq 0/0
	ck_counters server S
	ck_tcp_bytes server S
	strip_server_reasons+=" ${S[reason]}"
}

case_strip_answer() {
	local r
	t_begin strip_answer
	c2s=50000 s2c=50000
	client_nb=1
	r=$(b_call strip_answer 5401)
	ck "nft rule stripping the option from SYN-ACKs" "$r" eq ok
	strip_server_reasons=
	pair strip 5401 "-n 3 -s $c2s -r $s2c" "-a $peer -n 3 -s $c2s -r $s2c"
	ck_summaries strip 3
	each_pair strip chk_strip_pair
	ck "connections checked" "$pair_count" eq 3
	ck_wire 5401 "${C[lport]:-0}" yes none
	b_call nft_list >"$work/strip.nft"
	t_file "B's ruleset" "$work/strip.nft" 20
	ck "SYN-ACKs the rule rewrote" "$(grep -o 'counter packets [0-9]*' "$work/strip.nft" | head -n 1 | awk '{ print $3 }')" ge 3
	b_call nft_flush >/dev/null
	t_note "answer stripped by nft ('reset tcp option 254'), both send at once: client peer_no_smr; server reasons seen:$strip_server_reasons (2 peer_no_smr, 7 handshake_timeout); data intact"
	t_file "client" "$work/strip.client" 3
	t_file "server" "$work/strip.server" 3
	t_end
}

chk_strip_sf_pair() {
	ck_data
	ck_fallback client C 2
	ck "$pair_ctx server mode/reason" "${S[mode]}/${S[reason]}" eq 2/7
	ck "$pair_ctx server handshake messages sent/received" "${S[hs_sent]}/${S[hs_recv]}" eq 0/0
	ck_counters server S
	ck_tcp_bytes server S
	# accept() only returned once the server gave up on the PROPOSAL
	ck "$pair_ctx client: ms until the server's first byte" "${C[first_rx_ms]}" ge 2900
	strip_first_rx=${C[first_rx_ms]}
}

case_strip_answer_server_first() {
	local r
	t_begin strip_answer_server_first
	c2s=20000 s2c=20000
	client_nb=1
	b_call sysctl net.smr.handshake_timeout_ms=3000 >/dev/null
	r=$(b_call strip_answer 5402)
	ck "nft rule stripping the option from SYN-ACKs" "$r" eq ok
	strip_first_rx=
	pair strip_sf 5402 "-n 1 -o server-first -s $c2s -r $s2c" \
		"-a $peer -n 1 -o server-first -s $c2s -r $s2c"
	ck_summaries strip_sf 1
	each_pair strip_sf chk_strip_sf_pair
	ck "connections checked" "$pair_count" eq 1
	ck_wire 5402 "${C[lport]:-0}" yes none
	b_call nft_flush >/dev/null
	t_note "answer stripped, server speaks first: server handshake_timeout after ${strip_first_rx:-?} ms (net.smr.handshake_timeout_ms=3000), client peer_no_smr, data intact"
	t_file "client" "$work/strip_sf.client" 2
	t_file "server" "$work/strip_sf.server" 2
	t_end
}

chk_cookie_pair() {
	ck_data
	ck_fallback client C 4
	ck_fallback server S 4
}

# cookie_case_start NAME SYNCOOKIES: begin case NAME, one connection at a
# time of 30000 bytes each way, B's net.ipv4.tcp_syncookies as given.
cookie_case_start() {
	t_begin "$1"
	c2s=30000 s2c=30000
	client_nb=1
	ck "B's tcp_syncookies" "$(b_call sysctl net.ipv4.tcp_syncookies="$2")" \
		eq "net.ipv4.tcp_syncookies = $2"
}

case_syn_cookies() {
	cookie_case_start syn_cookies 2
	pair cookie4 5501 "-n 2 -s $c2s -r $s2c" "-a $peer -n 2 -s $c2s -r $s2c"
	pair cookie6 5502 "-6 -n 2 -s $c2s -r $s2c" "-6 -a $peer6 -n 2 -s $c2s -r $s2c"
	b_call sysctl net.ipv4.tcp_syncookies=1 >/dev/null
	for n in cookie4 cookie6; do
		ck_summaries $n 2
		each_pair $n chk_cookie_pair
		ck "$n connections checked" "$pair_count" eq 2
	done
	ck_wire 5502 "${C[lport]:-0}" yes proof
	ck "wire: the cookie SYN-ACK's answer flags (bit 0 COOKIE)" "${P[smr_flags]:-}" eq 1
	t_note "tcp_syncookies=2 on B: client and server syn_cookies (IPv4 and IPv6), answer with the COOKIE flag on the wire, data intact"
	t_end
}

chk_cookie_full_pair() {
	ck_data
	ck_fallback client C 4
	ck_fallback server S 2
}

# A full SYN queue: a listener with backlog 0 holding one request sock (a
# forged SYN whose SYN-ACK goes nowhere) has no room for another, so with
# tcp_syncookies=1 the next SYN gets a cookie.
case_syn_cookies_full() {
	local r
	cookie_case_start syn_cookies_full 1
	ck "B routes $FLOOD_SPOOF_NET back to A" "$(b_call spoof_route add "$self")" eq ok
	r=$(b_call serve cookiefull -p 5503 -n 1 -B 0 -s "$c2s" -r "$s2c")
	if [ "$r" = ok ]; then
		forged_burst cookiefull 5503 1
		"$probe" client -p 5503 -a "$peer" -n 1 -s "$c2s" -r "$s2c" \
			>"$work/cookiefull.client" 2>"$work/cookiefull.client.err"
		echo "rc=$?" >>"$work/cookiefull.client"
		b_call result cookiefull 90 >"$work/cookiefull.server"
		cp "$work/cookiefull.client" "$work/cookiefull.server" "$out/conns/"
		ck_summaries cookiefull 1
		each_pair cookiefull chk_cookie_full_pair
		ck "cookiefull connections checked" "$pair_count" eq 1
	else
		t_fail "cookiefull: B's server did not start: $r"
	fi
	b_call spoof_route del "$self" >/dev/null
	t_note "tcp_syncookies=1, B's listener (backlog 0) holding a forged SYN's request sock: the client's SYN got a cookie and SMR kept no record, yet the SYN-ACK said COOKIE: client syn_cookies, server peer_no_smr, data intact"
	t_end
}

# The SYN area of a plain socket is what the kernel sends anyway: the same
# bytes as SMR's SYN without SMR's option (timestamp values masked).
case_wire_syn() {
	local plain smr fam pport sport
	t_begin wire_syn
	for fam in 4 6; do
		if [ "$fam" = 4 ]; then pport=5301 sport=5101; else pport=5302 sport=5103; fi
		plain=$(cap_lines $pport | awk '$1 == "syn"' | head -n 1)
		smr=$(cap_lines $sport | awk '$1 == "syn"' | head -n 1)
		t_diag "IPv$fam plain SYN: $plain"
		t_diag "IPv$fam SMR SYN:   $smr"
		if [ -z "$plain" ] || [ -z "$smr" ]; then
			t_fail "IPv$fam: SYNs not captured (plain '${plain:0:40}', SMR '${smr:0:40}')"
			continue
		fi
		negot_kv P "$plain"
		local pkinds=${P[kinds]} pmasked=${P[masked]} psmr=${P[smr]}
		ck "IPv$fam plain SYN: no kind 254" "$(tr ',' '\n' <<<"$pkinds" | grep -cx 254)" eq 0
		ck "IPv$fam plain SYN: no SMR option" "$psmr" eq -
		negot_kv P "$smr"
		ck "IPv$fam SMR SYN: option = 254, len 12, ExID 534d5231, ver 1 role 1" \
			"${P[smr]:0:16}" eq fe0c534d52311100
		ck "IPv$fam SMR SYN: nonce non-zero" "${P[smr_nonce]:-0}" ne 00000000
		ck "IPv$fam SMR SYN minus SMR's option = plain SYN (TS values masked)" \
			"${P[nosmr]}" eq "$pmasked"
		t_note "IPv$fam plain SYN options $pkinds; SMR SYN ${P[kinds]}, option ${P[smr]}"
	done
	t_end
}

case_wire_synack() {
	local fam port syn synack
	t_begin wire_synack
	for fam in 4 6; do
		if [ "$fam" = 4 ]; then port=5101; else port=5103; fi
		syn=$(cap_lines $port | awk '$1 == "syn"' | head -n 1)
		negot_kv P "$syn"
		local cport=${P[sport]:-0} nonce=${P[smr_nonce]:-none}
		synack=$(cap_lines $port | awk -v c="$cport" '$1 == "synack" && $0 ~ (" dport=" c " ")' | head -n 1)
		t_diag "IPv$fam SYN:     $syn"
		t_diag "IPv$fam SYN-ACK: $synack"
		negot_kv P "$synack"
		ck "IPv$fam SYN-ACK from the SMR listener: ExID, version, role" \
			"${P[smr_exid]:-none}/${P[smr_ver]:-none}/${P[smr_role]:-none}" eq 534d5231/1/2
		ck "IPv$fam SYN-ACK: the answer's value is proof(SYN's nonce)" "${P[answer]:-none}" eq proof
		ck "IPv$fam SYN-ACK: proof differs from the nonce" "${P[smr_nonce]:-none}" ne "$nonce"
		ck "IPv$fam SYN-ACK: answer flags LINK_REQUEST only (bit 2; no COOKIE, no NO_DEVICE)" \
			"${P[smr_flags]:-none}" eq 4
		t_note "IPv$fam nonce $nonce -> answer ${P[smr]:-none}"
	done
	t_end
}

chk_echo_pair() {
	ck_data
	ck_fallback client C 13
}

case_option_echoed() {
	local r n
	t_begin option_echoed
	c2s=40000 s2c=40000
	client_nb=1
	r=$(b_call echo_start 5701)
	ck "B's echoing middlebox (NFQUEUE) started" "$r" eq ok
	pair echo4 5701 "-t tcp -n 2 -s $c2s -r $s2c" "-a $peer -n 2 -s $c2s -r $s2c"
	ck_summaries echo4 2
	each_pair echo4 chk_echo_pair
	ck "echo4 connections checked" "$pair_count" eq 2
	ck_wire 5701 "${C[lport]:-0}" yes echo
	pair echo6 5701 "-6 -t tcp -n 2 -s $c2s -r $s2c" "-6 -a $peer6 -n 2 -s $c2s -r $s2c"
	ck_summaries echo6 2
	each_pair echo6 chk_echo_pair
	ck "echo6 connections checked" "$pair_count" eq 2
	ck_wire 5701 "${C[lport]:-0}" yes echo
	b_call echo_stop >"$work/echo_mb.out"
	cp "$work/echo_mb.out" "$out/conns/"
	t_file "middlebox" "$work/echo_mb.out" 8
	n=$(grep -c '^echoed ' "$work/echo_mb.out")
	ck "SYN-ACKs the middlebox echoed" "$n" ge 4
	t_note "SYN-ACKs carried the SYN's option verbatim ($n echoed): client option_echoed, no handshake bytes, plain server got exactly the client's data (IPv4 and IPv6)"
	t_end
}

chk_md5_plain_pair() {
	ck_data
	ck_fallback client C 3
}

chk_md5_smr_pair() {
	ck_data
	ck_fallback client C 3
	ck_fallback server S 2
}

# md5_pair ID NAME PORT 'SERVER ARGS' CHECK: a case of 2 connections with
# TCP-MD5 on both ends, their SYNs without SMR's option.
md5_pair() {
	local key=smr-negot-md5-key
	c2s=30000 s2c=30000
	client_nb=1
	t_begin "$1"
	pair "$2" "$3" "$4 -n 2 -m $key -P $self -s $c2s -r $s2c" \
		"-a $peer -n 2 -m $key -s $c2s -r $s2c"
	ck_summaries "$2" 2
	each_pair "$2" "$5"
	ck "connections checked" "$pair_count" eq 2
	ck_wire "$3" "${C[lport]:-0}" no none
}

case_tcp_md5_plain() {
	md5_pair tcp_md5_plain md5_plain 5801 "-t tcp" chk_md5_plain_pair
	ck "wire: the SYN carries TCP-MD5 (kind 19)" "$(tr ',' '\n' <<<"${P[kinds]:-}" | grep -cx 19)" eq 1
	t_file "client" "$work/md5_plain.client" 2
	t_note "TCP-MD5 on both ends, plain listener: client option_no_space, no option on the wire, data intact"
	t_end
}

case_tcp_md5_smr() {
	md5_pair tcp_md5_smr md5_smr 5802 "" chk_md5_smr_pair
	t_note "TCP-MD5 on both ends, SMR listener: client option_no_space, server peer_no_smr, data intact"
	t_end
}

chk_reuseport_pair() {
	ck_data
	ck_negotiated
	reuse_lst[${S[lst]}]=$(( ${reuse_lst[${S[lst]}]:-0} + 1 ))
}

case_reuseport() {
	declare -gA reuse_lst=()
	t_begin reuseport
	c2s=20000 s2c=20000
	client_nb=1
	snap_stats reuse.before
	pair reuse 5901 "-L 2 -n 20 -s $c2s -r $s2c" "-a $peer -n 20 -s $c2s -r $s2c"
	snap_stats reuse.after
	ck_summaries reuse 20
	each_pair reuse chk_reuseport_pair
	ck "connections checked" "$pair_count" eq 20
	tokens_unique reuse
	ck_no_spurious reuse
	ck "connections accepted by listener 0" "${reuse_lst[0]:-0}" ge 1
	ck "connections accepted by listener 1" "${reuse_lst[1]:-0}" ge 1
	ck_rdma_deltas reuse.before reuse.after 20 "$c2s" "$s2c"
	t_note "two SO_REUSEPORT SMR listeners: 20 conns in mode rdma, split ${reuse_lst[0]:-0}/${reuse_lst[1]:-0}, data intact"
	t_end
}

# many_watch: in the background while the 1000 connections run, every
# 15 s both hosts' counters and A's links into $out/many-progress.txt (it
# survives a vm-run timeout); after 90 s, a stall: blocked tasks of both
# hosts to their consoles (sysrq w).
many_watch() {
	local i=0
	while :; do
		sleep 15
		i=$((i + 15))
		{
			echo "--- +$i s"
			echo "A: $(grep -E '^(connects|accepts|mode_rdma|mode_tcp|handshakes_[a-z]*|buffers_[a-z_]*|cdc_sent|cdc_received|cdc_bad|sockets_active|fallback_no_memory) ' /proc/net/smr/stats | tr '\n' ' ')"
			echo "B: $(b_call stats | grep -E '^(connects|accepts|mode_rdma|mode_tcp|handshakes_[a-z]*|buffers_[a-z_]*|cdc_sent|cdc_received|cdc_bad|sockets_active|fallback_no_memory) ' | tr '\n' ' ')"
			cat /proc/net/smr/links
			echo "A: connections on links: $(($(wc -l </proc/net/smr/conns) - 1))"
		} >>"$out/many-progress.txt" 2>&1
		if [ "$i" = 90 ]; then
			log "many_connects: still running after 90 s: blocked tasks to the consoles (sysrq w)"
			echo w >/proc/sysrq-trigger
			b_call sysrq_w >/dev/null
		fi
	done
}

chk_many_pair() {
	ck_data
	ck_negotiated
	ck_early_send
}

# unaccepted_max BYTES|default: B's mem_unaccepted_max and
# mem_unaccepted_peer_max both BYTES, and mem_max twice that (unaccepted
# connections hold at most half of it), or back to their defaults.
unaccepted_max() {
	local all=134217728 peer=67108864 max=268435456
	[ "$1" = default ] || all=$1 peer=$1 max=$(($1 * 2))
	ck "B: mem_max" "$(b_call sysctl net.smr.mem_max="$max")" eq "net.smr.mem_max = $max"
	ck "B: mem_unaccepted_max" "$(b_call sysctl net.smr.mem_unaccepted_max="$all")" \
		eq "net.smr.mem_unaccepted_max = $all"
	ck "B: mem_unaccepted_peer_max" "$(b_call sysctl net.smr.mem_unaccepted_peer_max="$peer")" \
		eq "net.smr.mem_unaccepted_peer_max = $peer"
}

case_many_connects() {
	local n=1000 el watch_pid
	t_begin many_connects
	c2s=512 s2c=512
	client_nb=1
	order=both
	early_ok=0
	# a scale test, not a timing one: 1000 handshakes at once on one
	# emulated vCPU may take longer than the usual 3 s
	handshake_timeouts 30000 30000
	# 1000 handshakes from one peer at once hold some 188 MiB of buffers
	# on B before accept(), past the 64 MiB mem_unaccepted_peer_max allows
	# (the rdma suite's unaccepted cases test those bounds): B lets this
	# peer have 256 MiB before accept(), as an operator expecting such
	# bursts would
	unaccepted_max 268435456
	snap_stats many.before
	: >"$out/many-progress.txt"
	many_watch &
	watch_pid=$!
	pair many 6001 "-n $n -B 4096 -T 240 -s $c2s -r $s2c" "-a $peer -n $n -T 240 -s $c2s -r $s2c" 300
	kill "$watch_pid" 2>/dev/null
	wait "$watch_pid" 2>/dev/null
	handshake_timeouts 3000 3000
	unaccepted_max default
	log "many_connects: the $n connections ended after $((SECONDS - t_start)) s"
	snap_settled many.after many.before
	cat /proc/net/smr/links >"$work/many.links.a" 2>&1
	ck_summaries many $n
	each_pair many chk_many_pair
	ck "connections checked" "$pair_count" eq $n
	tokens_unique many
	ck_no_spurious many
	ck_rdma_deltas many.before many.after $n $c2s $s2c
	for h in a b; do
		ck_deltas $h many.before many.after sockets_active=0 negotiation_records=0
	done
	ck_deltas a many.before many.after sockets_created=$n
	ck_deltas b many.before many.after listens=1 sockets_created=$((n + 1))
	el=$(grep '^summary ' "$work/many.client" | sed -n 's/.*elapsed_ms=\([0-9]*\).*/\1/p')
	t_diag "client: $(grep '^summary ' "$work/many.client")"
	t_diag "client mode/reason/peer_reason of the connections (count value):"
	awk '/^conn / { for (i = 1; i <= NF; i++) if ($i ~ /^(mode|reason|peer_reason)=/) printf "%s ", $i; print "" }' \
		"$work/many.client" | sort | uniq -c | sed 's/^/  /' >>"$out/diag-$t_id.txt"
	t_diag "server: $(grep '^summary ' "$work/many.server")"
	t_file "A's links after" "$work/many.links.a"
	t_note "$n simultaneous non-blocking SMR connects: all in mode rdma in ${el:-?} ms ($early_ok decided before the send() that followed connect()), data intact, counters moved by $n on each host (handshakes_started/completed, mode_rdma; rdma_bytes_* by $n x $c2s/$s2c; tcp_bytes_*, mode_tcp and fallback_* not at all), sockets_active back to where it was"
	t_diag "counters A before/after, B before/after:"
	paste "$work/many.before.a.stats" "$work/many.after.a.stats" \
		"$work/many.before.b.stats" "$work/many.after.b.stats" |
		awk '{ printf "  %-28s %10s %10s   %10s %10s\n", $1, $2, $4, $6, $8 }' >>"$out/diag-$t_id.txt"
	t_end
}

# A listener without an RDMA device declines in its SYN-ACK already (the
# answer carries the NO_DEVICE flag, 0x02): the client builds no RDMA link
# to it and sends no PROPOSAL; both ends decide at once, without a
# handshake message, and carry on over TCP.
decl_ready=
chk_decline_pair() {
	ck_data
	ck "$pair_ctx client mode/reason/peer_reason" \
		"${C[mode]}/${C[reason]}/${C[peer_reason]}" eq 2/6/5
	ck "$pair_ctx server mode/reason/peer_reason" \
		"${S[mode]}/${S[reason]}/${S[peer_reason]}" eq 2/5/0
	ck "$pair_ctx client mode when usable" "${C[mode_ready]}" eq 2
	ck "$pair_ctx server mode right after accept()" "${S[mode_ready]}" eq 2
	ck "$pair_ctx client handshake messages/bytes sent/received" \
		"${C[hs_sent]}/${C[hs_recv]} ${C[hs_bsent]}/${C[hs_brecv]}" eq "0/0 0/0"
	ck "$pair_ctx server handshake messages/bytes sent/received" \
		"${S[hs_sent]}/${S[hs_recv]} ${S[hs_bsent]}/${S[hs_brecv]}" eq "0/0 0/0"
	ck "$pair_ctx client tokens" "${C[ltok]}/${C[ptok]}" eq 0000000000000000/0000000000000000
	ck "$pair_ctx server tokens" "${S[ltok]}/${S[ptok]}" eq 0000000000000000/0000000000000000
	ck_counters client C
	ck_counters server S
	ck_tcp_bytes client C
	ck_tcp_bytes server S
	ck_early_send
	decl_ready+=" ${C[ready_ms]}"
}

case_declined() {
	local r h
	t_begin declined
	client_nb=1
	order=both
	early_ok=0
	c2s=65536 s2c=65536
	decl_ready=
	r=$(b_call rxe_del)
	ck "B's soft-RoCE device removed" "${r%%$'\n'*}" eq rc=0
	snap_stats decl.before
	cat /proc/net/smr/links >"$work/decl.links.a" 2>&1
	pair decl 6201 "-n 2 -s $c2s -r $s2c" "-a $peer -n 2 -s $c2s -r $s2c"
	snap_stats decl.after
	r=$(b_call rxe_add)
	ck "B's soft-RoCE device restored" "$r" eq ok
	ck_summaries decl 2
	each_pair decl chk_decline_pair
	ck "connections checked" "$pair_count" eq 2
	ck_wire 6201 "${C[lport]:-0}" yes proof
	ck "wire: the SYN-ACK's answer flags (bit 1 NO_DEVICE)" "${P[smr_flags]:-}" eq 2
	ck_deltas a decl.before decl.after handshakes_declined=2 \
		fallback_peer_declined=2 connects=2
	ck_deltas b decl.before decl.after handshakes_declined=2 \
		fallback_no_rdma_device=2 accepts=2
	for h in a b; do
		ck_deltas $h decl.before decl.after handshakes_started=0 \
			handshakes_completed=0 handshakes_aborted=0 mode_tcp=2 mode_rdma=0 \
			tcp_bytes_sent=$((2 * c2s)) tcp_bytes_received=$((2 * s2c)) \
			rdma_bytes_sent=0 rdma_bytes_received=0
	done
	t_file "A's links when the clients started" "$work/decl.links.a"
	t_note "B without an RDMA device: its SYN-ACK answers with the NO_DEVICE flag; client peer_declined (peer no_rdma_device), server no_rdma_device, no handshake message either way, usable after$decl_ready ms, data intact over TCP"
	t_end
}

# handshake_timeouts A_MS B_MS: net.smr.handshake_timeout_ms on A and on B.
handshake_timeouts() {
	sysctl -qw net.smr.handshake_timeout_ms="$1"
	b_call sysctl net.smr.handshake_timeout_ms="$2" >/dev/null
}

# Handshake timeouts, made certain by B dropping every segment that starts
# with the handshake magic: the PROPOSAL never arrives.

# drop_handshakes NAME PORT: B drops PORT's handshake segments from now on;
# counters before (NAME.before).
drop_handshakes() {
	ck "nft rule dropping handshake segments on B" "$(b_call drop_hs "$2")" eq ok
	snap_stats "$1.before"
}

case_timeout_client() {
	local r line
	declare -A T
	t_begin timeout_client
	# B's segments never acknowledge the PROPOSAL: A waits 4 x its timeout
	# (as for a full accept queue); B's children wait longer than that
	handshake_timeouts 1000 10000
	drop_handshakes tmo_c 6101
	r=$(b_call serve tmo_c -p 6101 -n 2 -s 0 -r 0 -T 40)
	ck "B's server started" "$r" eq ok
	"$probe" client -p 6101 -a "$peer" -b -n 1 -s 0 -r 0 -T 30 >"$work/tmo_c.client"
	"$probe" client -p 6101 -a "$peer" -n 1 -s 0 -r 0 -T 30 >>"$work/tmo_c.client"
	b_call result tmo_c 30 >"$work/tmo_c.server"
	snap_stats tmo_c.after
	b_call nft_list >"$work/tmo_c.nft"
	b_call nft_flush >/dev/null
	cp "$work/tmo_c.client" "$work/tmo_c.server" "$out/conns/"
	while read -r line; do
		[ -n "$line" ] || continue
		negot_kv T "$line"
		local p="client #${T[idx]} (non-blocking)"
		[ "${T[early_send]}" != - ] || p="client #${T[idx]} (blocking)"
		ck "$p: connect error" "${T[err]}@${T[at]}" eq ECONNRESET@connect
		[ "${T[early_send]}" != - ] ||
			ck "$p: connect() return value (-1 and errno ECONNRESET)" "${T[connect_ret]}" eq -1
		ck "$p: reason" "${T[reason]}" eq 7
		ck "$p: handshake messages sent/received" "${T[hs_sent]}/${T[hs_recv]}" eq 1/0
		ck "$p: ms until connect failed" "${T[t_ms]}" ge 3900
		ck "$p: ms until connect failed" "${T[t_ms]}" le 7000
		ck "$p: bytes" "${T[tx]}/${T[rx]}" eq 0/0
		t_note "$p: ${T[err]} after ${T[t_ms]} ms, reason ${T[reason]}, mode ${T[mode]}"
	done <<<"$(grep '^conn ' "$work/tmo_c.client")"
	ck "client connections" "$(grep -c '^conn ' "$work/tmo_c.client")" eq 2
	while read -r line; do
		[ -n "$line" ] || continue
		negot_kv T "$line"
		ck "server #${T[idx]}: application bytes received" "${T[rx]}" eq 0
		ck "server #${T[idx]}: handshake messages sent" "${T[hs_sent]}" eq 0
		t_note "server #${T[idx]}: reason ${T[reason]}, ended ${T[err]}@${T[at]}"
	done <<<"$(grep '^conn ' "$work/tmo_c.server")"
	ck "server connections accepted" "$(grep -c '^conn ' "$work/tmo_c.server")" eq 2
	ck "handshake segments B dropped" "$(grep -o 'counter packets [0-9]*' "$work/tmo_c.nft" | head -n 1 | awk '{ print $3 }')" ge 2
	ck_deltas a tmo_c.before tmo_c.after handshakes_started=2 handshakes_aborted=2 \
		aborted_handshake_timeout=2 handshakes_completed=0
	t_file "clients" "$work/tmo_c.client"
	t_file "server" "$work/tmo_c.server"
	handshake_timeouts 3000 3000
	t_end
}

case_timeout_server() {
	local r line
	declare -A T
	t_begin timeout_server
	# A's PROPOSAL is never acknowledged: A resets after 4 x 2000 ms
	handshake_timeouts 2000 1000
	drop_handshakes tmo_s 6102
	# the server waits for the client's bytes: it never sends a byte
	r=$(b_call serve tmo_s -p 6102 -n 1 -o client-first -s 100 -r 100 -T 40)
	ck "B's server started" "$r" eq ok
	"$probe" client -p 6102 -a "$peer" -b -n 1 -o client-first -s 100 -r 100 -T 30 >"$work/tmo_s.client"
	b_call result tmo_s 30 >"$work/tmo_s.server"
	snap_stats tmo_s.after
	b_call nft_flush >/dev/null
	cp "$work/tmo_s.client" "$work/tmo_s.server" "$out/conns/"
	line=$(grep '^conn ' "$work/tmo_s.client" | head -n 1)
	negot_kv T "$line"
	ck "client: connect error" "${T[err]:-none}@${T[at]:-}" eq ECONNRESET@connect
	ck "client: connect() return value (-1 and errno ECONNRESET)" "${T[connect_ret]:-}" eq -1
	ck "client: reason" "${T[reason]:-}" eq 7
	ck "client: handshake messages sent/received" "${T[hs_sent]:-}/${T[hs_recv]:-}" eq 1/0
	ck "client: ms until connect failed" "${T[t_ms]:-}" ge 7900
	ck "client: ms until connect failed" "${T[t_ms]:-}" le 11000
	t_note "client: ${T[err]:-none} after ${T[t_ms]:-?} ms, reason ${T[reason]:-?}"
	line=$(grep '^conn ' "$work/tmo_s.server" | head -n 1)
	negot_kv T "$line"
	ck "server: mode/reason" "${T[mode]:-}/${T[reason]:-}" eq 2/7
	ck "server: handshake messages sent/received" "${T[hs_sent]:-}/${T[hs_recv]:-}" eq 0/0
	ck "server: application bytes received" "${T[rx]:-}" eq 0
	ck "server: the connection ended by the client's reset" "${T[err]:-}" in "ECONNRESET ENODATA"
	t_note "server: fell back (handshake_timeout, nothing sent), then ${T[err]:-?}@${T[at]:-?} with 0 bytes"
	ck_deltas b tmo_s.before tmo_s.after fallback_handshake_timeout=1 handshakes_aborted=0
	ck_deltas a tmo_s.before tmo_s.after handshakes_aborted=1 aborted_handshake_timeout=1
	t_file "client" "$work/tmo_s.client"
	t_file "server" "$work/tmo_s.server"
	handshake_timeouts 3000 3000
	t_end
}

# --- hostile load on the negotiation records ----------------------------------
#
# A forging peer (spoofed SYNs carrying a valid offer), a local user's
# SYN_SENT sockets and a filled namespace must each meet their own bound
# (tcp_option.c, "Bounds"), never take SMR from anyone else: a legitimate
# connection runs in mode rdma during each. Memory: the records held
# (negotiation_records) against the bound, and Slab (/proc/meminfo) before,
# during and after.

flood=$NEGOT_BIN/negot_flood
# Where the forged SYNs come from (B routes it back to A, which drops it).
FLOOD_SPOOF_NET=10.200.0.0/16
# SYNs that may pass SMR's hook before TCP's request sock for the ones
# ahead of them fills its SYN queue (one a CPU, some softirq batching)
FLOOD_INFLIGHT=8
# A's address for the user's SYNs that nobody answers (a dummy device).
FLOOD_BLACKHOLE_NET=10.201.0.1/24
FLOOD_BLACKHOLE_PEER=10.201.0.2
# B's namespace filled with forged offers, and its listener.
FLOOD_NS=smrnegfill
FLOOD_NS_ADDR=10.202.0.1
# listeners the namespace's flood spreads over: one listener holds at most
# an eighth of the answer share (SMR_NEGOT_LISTENER_DIV), so nine fill it
# and the namespace's bound, not a listener's, is the one that stops them
FLOOD_NS_LISTENERS=9
# records a listener makes with the share used up (SMR_NEGOT_LISTENER_FLOOR)
NEGOT_LISTENER_FLOOR=32

# negot_max: net.smr.negotiation_records_max (the default where the module
# has no such sysctl: a module without the bounds).
negot_max() {
	sysctl -n net.smr.negotiation_records_max 2>/dev/null || echo 16384
}

# flood_start TAG: B routes the forged addresses back to A, then the
# counters before the flood (snapshot TAG.before), and the caller's
# s_before (B's Slab) and before_rec (B's negotiation records).
flood_start() {
	ck "B routes $FLOOD_SPOOF_NET back to A" "$(b_call spoof_route add "$self")" eq ok
	snap_stats "$1.before"
	s_before=$(slab_kb b)
	before_rec=$(stat_of "$work/$1.before.b.stats" negotiation_records)
}

# forged_burst TAG PORT N: N SYNs with a valid offer from forged
# addresses to B's PORT at once; all of them sent, or the case fails.
forged_burst() {
	local sent
	"$flood" syn -a "$peer" -p "$2" -n "$3" -S "$FLOOD_SPOOF_NET" >"$work/$1.burst" 2>&1
	sent=$(sed -n 's/^syn sent=\([0-9]*\) .*/\1/p' "$work/$1.burst")
	t_diag "burst: $(cat "$work/$1.burst")"
	ck "forged SYNs sent" "${sent:-0}" eq "$3"
}

# slab_kb [b]: Slab of /proc/meminfo in kB, here or on B.
slab_kb() {
	if [ "${1:-}" = b ]; then
		b_call slab
	else
		awk '$1 == "Slab:" { print $2 }' /proc/meminfo
	fi
}

b_slab() {
	awk '$1 == "Slab:" { print $2 }' /proc/meminfo
}

# spoof_route add|del VIA: B sends what goes to the forged sources to A.
b_spoof_route() {
	ip route "$1" "$FLOOD_SPOOF_NET" via "$2" 2>&1 && echo ok
}

# stat_of FILE NAME: a counter from a saved stats file ("" if absent).
stat_of() {
	rdma_kv "$1" "$2"
}

# wait_records HOST MAX SECONDS: until HOST's negotiation_records is at
# most MAX; prints the last value read.
wait_records() {
	local i v
	for ((i = 0; i < $3; i++)); do
		if [ "$1" = b ]; then
			v=$(b_call stats | awk '$1 == "negotiation_records" { print $2 }')
		else
			v=$(rdma_kv "$RDMA_STATS" negotiation_records)
		fi
		[ -n "$v" ] && [ "$v" -le "$2" ] && break
		sleep 1
	done
	echo "${v:-missing}"
}

# client_of NAME PORT 'CLIENT ARGS' [WAIT] [PREFIX...]: the client half of
# pair (B's server NAME already started), the client run through PREFIX.
client_of() {
	local name=$1 port=$2 cargs=$3 wait=${4:-90}
	shift 4
	# shellcheck disable=SC2086
	"$@" "$probe" client -p "$port" $cargs >"$work/$name.client" 2>"$work/$name.client.err"
	echo "rc=$?" >>"$work/$name.client"
	b_call result "$name" "$wait" >"$work/$name.server"
	cp "$work/$name.client" "$work/$name.server" "$out/conns/"
	[ ! -s "$work/$name.client.err" ] || cp "$work/$name.client.err" "$out/conns/"
}

# serve_b NAME ARGS...: B's negot_probe server NAME; a failure if it did
# not start.
serve_b() {
	local r
	r=$(b_call serve "$@")
	ck "B's server $1 started" "$r" eq ok
}

chk_rdma_pair() {
	ck_data
	ck_negotiated
	ck_early_send
}

# The forging peer: A sends SYNs with a valid offer from random forged
# addresses to B's listener X (backlog 64: records only for the SYNs TCP
# keeps a request sock for, at most 65 in a burst, a few more for SYNs in
# flight between SMR's hook and TCP; at most 2 x 65 over time, as TCP
# drops old request socks early and the GC takes their records only after
# SMR_NEGOT_MIN_AGE), first
# in a burst, then paced while legitimate connections run to B's listener
# Y; once the flood ends and X's records are gone, X serves in mode rdma.
case_flood_spoofed_syn() {
	local n=3000 backlog=64 bound qbound fpid v maxrec=0 before_rec
	local s_before s_during s_after
	t_begin flood_spoofed_syn
	bound=$((2 * (backlog + 1)))
	qbound=$((backlog + 1 + FLOOD_INFLIGHT))
	c2s=65536 s2c=65536
	client_nb=1
	order=both
	early_ok=0
	serve_b sfx -p 6401 -B $backlog -n 1 -T 400 -s $c2s -r $s2c
	flood_start sf

	# the burst
	forged_burst sf 6401 $n
	# every SYN is in once B's counters moved for all of them
	for _ in $(seq "$(tscale 30)"); do
		snap_stats sf.burst
		v=$(delta sf.before sf.burst b negotiation_refused_listen)
		[[ $v =~ ^[0-9]+$ ]] && [ "$v" -ge $((n - 2 * bound)) ] && break
		sleep 1
	done
	v=$(delta sf.before sf.burst b negotiation_records)
	ck "B: negotiation records after $n forged offers at X (TCP's SYN queue, $backlog + 1, + $FLOOD_INFLIGHT in flight = $qbound)" "$v" le $qbound
	ck "B: forged offers X refused a record (at least $n - 2 x $bound: one GC round may free some)" \
		"$(delta sf.before sf.burst b negotiation_refused_listen)" ge $((n - 2 * bound))
	ck "B: forged offers X refused a record (at most all)" \
		"$(delta sf.before sf.burst b negotiation_refused_listen)" le $n

	# paced, while legitimate connections run to Y
	"$flood" syn -a "$peer" -p 6401 -r 200 -t 30 -S "$FLOOD_SPOOF_NET" >"$work/sf.paced" 2>&1 &
	fpid=$!
	sleep 2
	pair sfy 6402 "-n 4 -s $c2s -r $s2c" "-a $peer -n 4 -s $c2s -r $s2c"
	ck_summaries sfy 4
	each_pair sfy chk_rdma_pair
	ck "Y's connections during the flood checked" "$pair_count" eq 4
	snap_stats sf.during
	s_during=$(slab_kb b)
	for _ in 1 2 3; do
		v=$(b_call stats | awk '$1 == "negotiation_records" { print $2 }')
		[[ $v =~ ^[0-9]+$ ]] && [ "$v" -gt "$maxrec" ] && maxrec=$v
		sleep 2
	done
	ck "B: negotiation records during the paced flood (3 samples, the largest)" \
		"$((maxrec - before_rec))" le $bound
	ck "B: X kept refusing during the paced flood" \
		"$(delta sf.burst sf.during b negotiation_refused_listen)" gt 0
	wait "$fpid"
	t_diag "paced: $(cat "$work/sf.paced")"

	# the flood is over: X's request socks go, then the GC takes their records
	v=$(wait_records b "$before_rec" 120)
	ck "B: negotiation records back to $before_rec after the flood" "$v" le "$before_rec"
	log "flood_spoofed_syn: X's records gone after $((SECONDS - t_start)) s"
	client_of sfx 6401 "-a $peer -n 1 -s $c2s -r $s2c" 90
	ck_summaries sfx 1
	each_pair sfx chk_rdma_pair
	ck "X's connection after the flood checked" "$pair_count" eq 1
	snap_stats sf.after
	s_after=$(slab_kb b)
	b_call spoof_route del "$self" >/dev/null
	t_diag "counters that moved, burst to end:"
	delta_table sf.before sf.after >>"$out/diag-$t_id.txt"
	t_note "$n forged offers at once at X (backlog $backlog): B held at most $(delta sf.before sf.burst b negotiation_records) records (bound $bound), refused $(delta sf.before sf.burst b negotiation_refused_listen); then $(sed -n 's/^syn sent=\([0-9]*\) .*/\1/p' "$work/sf.paced") more over 30 s: records at most $((maxrec - before_rec)), Y's 4 connections in mode rdma meanwhile; X in mode rdma once its records were gone; B Slab before/during/after $s_before/$s_during/$s_after kB"
	t_end
}

# One listener's flood leaves the others their offers: A forges SYNs with
# a valid offer at B's listener X at the common backlog 4096
# (listen(fd, SOMAXCONN)), more than B's whole answer share, first in a
# burst, then paced while A connects to B's listener Y (backlog 128). X
# holds at most an eighth of the share (its 2 x 4097 alone would exceed
# it); Y's connections run in mode rdma, both ends say so.
case_flood_listener_share() {
	local n=12000 backlog=4096 max share cap fpid v rec ref
	local before_rec s_before s_during
	t_begin flood_listener_share
	max=$(negot_max)	# B's is the same: neither case changes it
	share=$((max / 2))
	cap=$((share / 8))
	[ $cap -ge 32 ] || cap=32
	c2s=65536 s2c=65536
	client_nb=1
	order=both
	early_ok=0
	serve_b lsx -p 6601 -B $backlog -n 1 -T 400 -s $c2s -r $s2c
	serve_b lsy -p 6602 -B 128 -n 4 -T 400 -s $c2s -r $s2c
	flood_start ls

	forged_burst ls 6601 $n
	# every SYN is in once B recorded or refused (nearly) all of them
	for _ in $(seq "$(tscale 30)"); do
		snap_stats ls.full
		rec=$(delta ls.before ls.full b negotiation_records)
		ref=$(delta ls.before ls.full b negotiation_refused_listen)
		[[ $rec =~ ^[0-9]+$ && $ref =~ ^[0-9]+$ ]] &&
			[ $((rec + ref)) -ge $((n - 2 * cap)) ] && break
		sleep 1
	done
	s_during=$(slab_kb b)
	ck "B: records for X after $n forged offers (at most share $share / 8 = $cap)" "$rec" le $cap
	ck "B: forged offers at X refused a record" "$ref" ge $((n - 2 * cap))

	# keep the share under pressure while Y's connections run
	"$flood" syn -a "$peer" -p 6601 -r 500 -t 20 -S "$FLOOD_SPOOF_NET" >"$work/ls.paced" 2>&1 &
	fpid=$!
	sleep 1
	client_of lsy 6602 "-a $peer -n 4 -s $c2s -r $s2c" 90
	ck_summaries lsy 4
	each_pair lsy chk_rdma_pair
	ck "Y's connections during the flood checked" "$pair_count" eq 4
	snap_stats ls.during
	ck "B: records for X during the paced flood" \
		"$(delta ls.before ls.during b negotiation_records)" le $cap
	ck_deltas b ls.full ls.during mode_rdma=4 mode_tcp=0
	wait "$fpid"
	t_diag "paced: $(cat "$work/ls.paced")"

	# X closes: its request socks go, the GC takes their records
	b_call stop lsx >/dev/null
	v=$(wait_records b "$before_rec" 60)
	ck "B: negotiation records back to $before_rec once X closed" "$v" le "$before_rec"
	b_call stop lsy >/dev/null
	b_call spoof_route del "$self" >/dev/null
	snap_stats ls.after
	t_diag "counters that moved:"
	delta_table ls.before ls.after >>"$out/diag-$t_id.txt"
	t_note "$n forged offers at X (backlog $backlog), then $(sed -n 's/^syn sent=\([0-9]*\) .*/\1/p' "$work/ls.paced") paced: X held $rec records (cap $cap of the answer share $share), refused $ref; Y's 4 connections (backlog 128) in mode rdma meanwhile; B Slab before/full $s_before/$s_during kB"
	t_end
}

# memcg_setup NAME: a memory cgroup NAME under cgroup2 (mounted on
# /sys/fs/cgroup if it is not), the memory controller enabled below the
# root; "ok PATH".
b_memcg_setup() {
	local root=/sys/fs/cgroup
	if [ "$(stat -fc %T $root 2>/dev/null)" != cgroup2fs ]; then
		mount -t cgroup2 none $root 2>&1 || return
	fi
	grep -qw memory $root/cgroup.controllers ||
		{ echo "fail: no memory controller"; return; }
	echo +memory >$root/cgroup.subtree_control || return
	mkdir -p "$root/$1" && echo "ok $root/$1"
}

# memcg_serve NAME CGROUP ARGS...: as serve, the server in CGROUP.
b_memcg_serve() {
	local name=$1 cg=$2
	shift 2
	(echo "$BASHPID" >"$cg/cgroup.procs" && b_serve "$name" "$@")
}

# memcg_slab CGROUP: its slab_unreclaimable (bytes), once the memory
# cgroup core has flushed its per-CPU counts (every 2 s).
b_memcg_slab() {
	sleep 3
	awk '$1 == "slab_unreclaimable" { print $2 }' "$1/memory.stat"
}

# memcg_clean CGROUP: "ok" once it is removed (its processes gone).
b_memcg_clean() {
	rmdir "$1" 2>&1 && echo ok
}

# Who pays for the records: B's listener X runs in a memory cgroup of its
# own; A floods it with forged offers, whose records B makes in softirq.
# They are charged to X's cgroup (its slab_unreclaimable grows by at
# least 64 bytes a record; a record takes some 128), and the charge goes
# once X closes and the GC frees them.
case_flood_memcg() {
	local n=3000 backlog=4096 max cap r cg rec before_rec s0 s1 s2 min
	t_begin flood_memcg
	max=$(negot_max)
	cap=$((max / 16))
	[ $cap -ge 32 ] || cap=32
	r=$(b_call memcg_setup smr_negot_test)
	ck "B: a memory cgroup for the listener" "${r%% *}" eq ok
	cg=${r#ok }
	ck "B routes $FLOOD_SPOOF_NET back to A" "$(b_call spoof_route add "$self")" eq ok
	ck "B's server mcx started in $cg" \
		"$(b_call memcg_serve mcx "$cg" -p 6701 -B $backlog -n 1 -T 300)" eq ok
	snap_stats mc.before
	before_rec=$(stat_of "$work/mc.before.b.stats" negotiation_records)
	s0=$(b_call memcg_slab "$cg")

	"$flood" syn -a "$peer" -p 6701 -n $n -S "$FLOOD_SPOOF_NET" >"$work/mc.burst" 2>&1
	t_diag "burst: $(cat "$work/mc.burst")"
	for _ in $(seq "$(tscale 30)"); do
		snap_stats mc.full
		rec=$(delta mc.before mc.full b negotiation_records)
		[[ $rec =~ ^[0-9]+$ ]] && [ "$rec" -ge $cap ] && break
		sleep 1
	done
	s1=$(b_call memcg_slab "$cg")
	ck "B: records for X (its cap, $cap)" "$rec" eq $cap
	min=$((rec * 64))
	ck "B: X's cgroup slab_unreclaimable grew (bytes, at least 64 x $rec records)" \
		"$((s1 - s0))" ge $min

	b_call stop mcx >/dev/null
	r=$(wait_records b "$before_rec" 60)
	ck "B: negotiation records back to $before_rec once X closed" "$r" le "$before_rec"
	s2=$(b_call memcg_slab "$cg")
	ck "B: X's cgroup slab_unreclaimable once the records went (bytes, at most a quarter of the growth above before)" \
		"$((s2 - s0))" le $(((s1 - s0) / 4))
	ck "B: X's memory cgroup removed" "$(b_call memcg_clean "$cg")" eq ok
	b_call spoof_route del "$self" >/dev/null
	t_note "$n forged offers at X (backlog $backlog) in its own memory cgroup: $rec records; the cgroup's slab_unreclaimable before/full/after $s0/$s1/$s2 bytes"
	t_end
}

# A local user (uid 65534) opens share + 1000 non-blocking SMR connects to
# an address nobody answers: it holds its share of the offer records
# (negotiation_records_max / 4) and no more, its further connects fall
# back with reason negot_limit (its own connection to B shows it), and
# root's connection meanwhile runs in mode rdma.
case_flood_syn_sent_user() {
	local max share n fpid v before_rec s_before s_during s_after
	declare -A U
	t_begin flood_syn_sent_user
	max=$(negot_max)
	share=$((max / 4))
	n=$((share + 1000))
	c2s=65536 s2c=65536
	client_nb=1
	order=both
	early_ok=0
	ip link add smrblk0 type dummy 2>/dev/null
	ip addr add "$FLOOD_BLACKHOLE_NET" dev smrblk0 2>/dev/null
	ip link set smrblk0 up
	serve_b ufu -p 6301 -n 1 -T 300 -s $c2s -r $s2c
	serve_b ufr -p 6302 -n 2 -T 300 -s $c2s -r $s2c
	snap_stats uf.before
	s_before=$(slab_kb)
	before_rec=$(stat_of "$work/uf.before.a.stats" negotiation_records)
	# the user writes its ready file in a directory of its own
	mkdir -p "$work/uf"
	chown 65534:65534 "$work/uf"
	rm -f "$work/uf/ready"
	"$flood" connect -a "$FLOOD_BLACKHOLE_PEER" -p 9 -n $n -u 65534 \
		-R "$work/uf/ready" -T 300 >"$work/uf.flood" 2>&1 &
	fpid=$!
	if ! rdma_wait_file "$work/uf/ready" 120 "$fpid"; then
		t_fail "the user's $n connects did not get under way: $(cat "$work/uf.flood")"
		kill -TERM "$fpid" 2>/dev/null
		wait "$fpid"
		ip link del smrblk0 2>/dev/null
		b_call stop ufu >/dev/null
		b_call stop ufr >/dev/null
		t_end
		return
	fi
	t_diag "flooder: $(cat "$work/uf.flood")"
	ck "the user's connects under way (EINPROGRESS)" \
		"$(sed -n 's/^connect .*inprogress=\([0-9]*\).*/\1/p' "$work/uf.flood")" eq $n
	snap_stats uf.during
	s_during=$(slab_kb)
	ck "A: negotiation records held for the user's $n SYN_SENT sockets (its share, $max / 4)" \
		"$(delta uf.before uf.during a negotiation_records)" eq $share
	ck "A: the user's SYNs that could not offer" \
		"$(delta uf.before uf.during a negotiation_refused_connect)" eq $((n - share))

	# the flooding user's own connection to B: no offer, reason negot_limit
	client_of ufu 6301 "-a $peer -n 1 -s $c2s -r $s2c" 90 \
		setpriv --reuid=65534 --regid=65534 --clear-groups
	ck_summaries ufu 1
	v=$(grep '^conn ' "$work/ufu.client" | head -n 1)
	negot_kv U "$v"
	ck "the user's connection to B: client mode/reason (2 tcp / 14 negot_limit)" \
		"${U[mode]:-}/${U[reason]:-}" eq 2/14
	ck "the user's connection to B: handshake messages sent/received" \
		"${U[hs_sent]:-}/${U[hs_recv]:-}" eq 0/0
	v=$(grep '^conn ' "$work/ufu.server" | head -n 1)
	negot_kv U "$v"
	ck "the user's connection to B: server mode/reason (2 tcp / 2 peer_no_smr: no offer came)" \
		"${U[mode]:-}/${U[reason]:-}" eq 2/2

	# root's connections meanwhile
	client_of ufr 6302 "-a $peer -n 2 -s $c2s -r $s2c" 90
	ck_summaries ufr 2
	each_pair ufr chk_rdma_pair
	ck "root's connections during the flood checked" "$pair_count" eq 2
	snap_stats uf.probes
	ck_deltas a uf.during uf.probes fallback_negot_limit=1 mode_rdma=2 mode_tcp=1

	kill -TERM "$fpid" 2>/dev/null
	wait "$fpid"
	t_diag "flooder at the end: $(tail -n 1 "$work/uf.flood")"
	v=$(wait_records a "$before_rec" 60)
	ck "A: negotiation records back to $before_rec once the user's sockets closed" "$v" le "$before_rec"
	snap_stats uf.after
	s_after=$(slab_kb)
	ip link del smrblk0 2>/dev/null
	t_diag "counters that moved:"
	delta_table uf.before uf.after >>"$out/diag-$t_id.txt"
	t_note "uid 65534 with $n SMR connects in SYN_SENT held $(delta uf.before uf.during a negotiation_records) records (its share $share of $max), $(delta uf.before uf.during a negotiation_refused_connect) refused; its connection to B fell back with negot_limit; root's 2 in mode rdma; A Slab before/during/after $s_before/$s_during/$s_after kB"
	t_end
}

# B: namespace FLOOD_NS with FLOOD_NS_LISTENERS SMR listeners on
# FLOOD_NS_ADDR, ports PORT.. (backlogs and SYN queue big enough that TCP
# keeps a request sock for every SYN, so only SMR's own bounds limit the
# records), each flooded with its part of N forged offers from inside (raw
# socket to its own address; SYN-ACKs go to a dummy device). Prints the
# floods' lines, then the namespace's counters.
b_ns_fill() {
	local n=$1 port=$2 ns=$FLOOD_NS i
	ip netns add $ns || return
	ip -n $ns link set lo up
	ip -n $ns link add d0 type dummy
	ip -n $ns link set d0 up
	ip -n $ns addr add "$FLOOD_NS_ADDR/24" dev d0
	ip -n $ns route add "$FLOOD_SPOOF_NET" dev d0
	ip netns exec $ns sysctl -qw net.core.somaxconn=262144
	ip netns exec $ns sysctl -qw net.ipv4.tcp_max_syn_backlog=262144
	# request socks outlive the case (SYN-ACKs retried for minutes)
	ip netns exec $ns sysctl -qw net.ipv4.tcp_synack_retries=7
	for ((i = 0; i < FLOOD_NS_LISTENERS; i++)); do
		start_detached ns_srv$i ip netns exec $ns "$probe" server \
			-a "$FLOOD_NS_ADDR" -p $((port + i)) -B 262144 -n 1 \
			-T 900 -R "$work/ns_srv$i.ready"
		if ! wait_detached ns_srv$i "$work/ns_srv$i.ready" 30; then
			echo "fail: the namespace's server $i did not start: $(cat "$work/ns_srv$i.err" 2>/dev/null)"
			return
		fi
	done
	for ((i = 0; i < FLOOD_NS_LISTENERS; i++)); do
		ip netns exec $ns "$NEGOT_BIN/negot_flood" syn -a "$FLOOD_NS_ADDR" \
			-p $((port + i)) -n $((n / FLOOD_NS_LISTENERS)) \
			-S "$FLOOD_SPOOF_NET" 2>&1
	done
	sleep 2
	ip netns exec $ns cat /proc/net/smr/stats
}

b_ns_stats() {
	ip netns exec $FLOOD_NS cat /proc/net/smr/stats
}

# ns_clean: the namespace goes (its exit, a little later, frees its
# records); "ok".
b_ns_clean() {
	local i
	for ((i = 0; i < FLOOD_NS_LISTENERS; i++)); do
		stop_detached ns_srv$i
	done
	ip netns del $FLOOD_NS 2>&1 && echo ok
}

# A namespace on B filled with 70000 forged offers (more than the whole
# host's table held before the bounds) leaves B's initial namespace alone:
# connections there run in mode rdma and B refuses none of their offers.
case_flood_netns_isolation() {
	local n=70000 max pool r rec ref s_before s_during s_after i sent extra
	t_begin flood_netns_isolation
	max=$(negot_max)
	pool=$((max / 2))
	c2s=65536 s2c=65536
	client_nb=1
	order=both
	early_ok=0
	snap_stats iso.before
	s_before=$(slab_kb b)
	b_call ns_fill $n 7777 >"$work/iso.fill"
	t_file "B's namespace after the fill" "$work/iso.fill" 60
	sent=$(sed -n 's/^syn sent=\([0-9]*\) .*/\1/p' "$work/iso.fill" |
		awk '{ t += $1 } END { print t + 0 }')
	ck "forged SYNs sent inside B's namespace, to $FLOOD_NS_LISTENERS listeners" \
		"$sent" eq $((n / FLOOD_NS_LISTENERS * FLOOD_NS_LISTENERS))
	rec=$(rdma_kv "$work/iso.fill" negotiation_records)
	ref=$(rdma_kv "$work/iso.fill" negotiation_refused_listen)
	# the share filled (listeners' own bounds add up to more), and beyond
	# it each listener made at most its floor
	extra=$((FLOOD_NS_LISTENERS * NEGOT_LISTENER_FLOOR))
	ck "B's namespace: negotiation records (its answer share, $max / 2, filled)" "$rec" ge $pool
	ck "B's namespace: negotiation records (at most the share and each listener's floor)" "$rec" le $((pool + extra))
	ck "B's namespace: offers refused a record" "$ref" ge $((sent - pool - extra))
	snap_stats iso.full
	s_during=$(slab_kb b)
	pair iso 6501 "-n 4 -s $c2s -r $s2c" "-a $peer -n 4 -s $c2s -r $s2c"
	ck_summaries iso 4
	each_pair iso chk_rdma_pair
	ck "initial namespace connections checked" "$pair_count" eq 4
	snap_stats iso.during
	ck_deltas b iso.full iso.during negotiation_refused_listen=0 mode_rdma=4 mode_tcp=0
	ck_deltas a iso.full iso.during negotiation_refused_connect=0 mode_rdma=4 mode_tcp=0
	b_call ns_stats >"$work/iso.ns.after"
	t_file "B's namespace after the connections" "$work/iso.ns.after" 60
	r=$(b_call ns_clean)
	ck "B's namespace deleted" "$r" eq ok
	# the namespace's exit and TCP's request socks go in the background:
	# the figure once Slab is within 4 MiB of where it was (at most 60 s)
	for ((i = 0; i < $(tscale 30); i++)); do
		sleep 2
		s_after=$(slab_kb b)
		[[ $s_after =~ ^[0-9]+$ ]] && [ "$s_after" -le $((s_before + 4096)) ] && break
	done
	snap_stats iso.after
	t_note "B's namespace took $sent forged offers at $FLOOD_NS_LISTENERS listeners: it held ${rec:-?} records (its share $pool), refused ${ref:-?}; 4 connections in B's initial namespace meanwhile in mode rdma, none of their offers refused; B Slab before/full/$((2 * i + 2)) s after deleting the namespace $s_before/$s_during/$s_after kB"
	t_end
}
