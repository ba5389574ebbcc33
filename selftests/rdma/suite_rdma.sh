# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034,SC2154 # registry read, work & co set by guests.sh
#
# The rdma suite (selftests/rdma_test.sh): SMR's RDMA data path between two
# guests. smr_stream servers on B are started and read back through B's
# control service, clients run on A, and both hosts' counters, links, rdma
# resources and module state are compared around each step. Every AF_SMR
# socket checks its own SMR_INFO (mode, RDMA byte counters) and TCP_INFO
# (the inner TCP connection carried the handshake only), and every byte of
# pseudo-random streams both ways, at once, with random write and read
# sizes from 1 byte to 1 MiB.
#
# links runs first: it needs a peer that no connection has linked to yet;
# then the rest in TAP order (rxe reads the counters around integrity).
# unaccepted and pool let every link idle out first (and after), so that
# B's pinned bytes are theirs alone.
#
# Environment (selftests/rdma/bed.sh has the bed's): SMR_RDMA_CONNS (100),
# SMR_RDMA_BYTES (bytes each way per IPv4 connection, 1 MiB),
# SMR_RDMA_CONNS6 (20), SMR_RDMA_BYTES6 (SMR_RDMA_BYTES), SMR_RDMA_CORRUPT
# (debug: stream offset that the first IPv4 connection sends flipped;
# integrity must fail).

suite_tests=(
	"integrity|${SMR_RDMA_CONNS:-100} IPv4 + ${SMR_RDMA_CONNS6:-20} IPv6 AF_SMR connections, random streams both ways at once, random I/O sizes: every byte and both ends' hashes agree, SMR_INFO mode $expect with its byte counters, inner TCP as expected"
	"rxe|rxe0 packet counters on both hosts cover the integrity payload each way (payload/4096)$([ "$expect" = tcp ] && echo ', inverted: payload not on rxe0')"
	"inline|writes of at most 100 B ride in CDCs both ways (counters agree end to end, streams intact); with A's net.smr.cdc_inline_max 0, A sends none inline and still takes B's"
	"slot_reuse|a CDC's completion reports the send position of its own CDC even when another CPU takes its slot the moment it is free (test module's test_link_send_done_delay_us 300 on both hosts widens that window): 4 connections, 16 MiB each way at once in random sizes, every byte and both ends' hashes agree"
	"hostile|A's module breaks each cursor rule once (test hook fault_cdc: producer past the room, backwards, consumer ahead, urgent byte outside, count out of range, overlong inline data): B refuses it, only that connection is reset (ECONNRESET both ends, counted), link and a held connection live on intact"
	"usermem|net.smr.mem_user_max 1 MiB on A: of 16 held connections of uid 65534 some run on RDMA and the rest fall back (no_memory, counted), root's connections meanwhile run on RDMA, uid 65534 fits again once its connections closed"
	"unaccepted|a client on A floods a B listener whose application does not accept with 48 connections from one address (B's net.smr.mem_max 20 MiB, mem_unaccepted_peer_max 4 MiB): the flood holds at most 4 MiB of B's buffers, its excess falls back (peer_reason no_memory, buffers_unaccepted_peer_limit); a connection from A's second address to the same listener and one held open meanwhile run in mode rdma, streams intact"
	"unaccepted_host|B's net.smr.mem_max 8 MiB, per-listener and per-peer unaccepted bounds out of the way: a flood of 24 connections (12 MiB of buffers) to a listener whose application does not accept holds at most half of mem_max, its excess falls back (peer_reason no_memory, buffers_unaccepted_host_limit), and a connection to another listener (within that listener's first 2 MiB, which always fit) runs in mode rdma, stream intact"
	"pool|net.smr.mem_pool_max 2 MiB and mem_pool_link_max 1 MiB on both hosts: once 32 connections of four buffer sizes (7.5 MiB a host) closed, each host's one link keeps at most 1 MiB pinned in its idle pool, the excess was freed (buffers_pool_full)"
	"links|two simultaneous connections share one new link; 20 more add no link and no QP on either host; 10 after they closed allocate nothing and re-register only their RMBs"
	"loss|B's rxe0 deleted under bulk transfers both ways: every SMR socket on A fails (ECONNRESET/EPIPE/clean EOF) within 30 s; a new connection falls back to TCP; rmmod succeeds, no rdma res of smr left"
	"rmmod|rmmod smr refused with a socket open, which still works; after close the refcnt drops, rmmod succeeds, no rdma res of smr, no kmemleak of smr"
)
suite_run_first=(links)

conns4=${SMR_RDMA_CONNS:-100}
bytes4=${SMR_RDMA_BYTES:-1048576}
conns6=${SMR_RDMA_CONNS6:-20}
bytes6=${SMR_RDMA_BYTES6:-$bytes4}
corrupt=${SMR_RDMA_CORRUPT:-}
# links: bytes each way on the held connections
links_bytes=262144
# unaccepted: connections of the flood; SO_RCVBUF/SO_SNDBUF 128 KiB, so
# 256 KiB rings, 512 KiB a connection on B; B's limits during the case
unacc_flood=48
unacc_sockbuf=131072
unacc_conn_bytes=524288
unacc_mem_max=20971520
unacc_peer_max=4194304
unacc_max=12582912
unacc_src=192.0.2.11
# unaccepted_host: B's mem_max (the other bounds set as high), the flood
unhost_mem_max=8388608
unhost_flood=24
# pool: the bounds set on both hosts
pool_max=2097152
pool_link_max=1048576
# loss: connections, and how long they may live once the link is gone
loss_conns=4
loss_window=30

suite_a_setup() {
	log "expected mode $expect; IPv4 $conns4 x $bytes4 B, IPv6 $conns6 x $bytes6 B each way"
}

# links_open NAME PORT N SECONDS WHICH TAG: N connections to B's PORT held
# open (client_bg_ready NAME, bg_pid), then snapshot TAG of both hosts.
links_open() {
	client_bg_ready "$1" "$4" "$5 connections were not all through their data and held" \
		-a "$peer" -p "$2" -n "$3" -s "$links_bytes" -H "$work/links.release" -T 240
	snap "$6"
	t_file "A's links with $5 connections held open" "$work/$6.a.links"
}

# links: two simultaneous connections make one link; 20 more add no link
# and no QP on either host; 10 after those closed reuse pooled buffers.
case_links() {
	local n1 n2 pid2 pid20 lines conns rc h idle_saved
	t_begin links
	local rel=$work/links.release
	rm -f "$rel"
	snap links.pre
	if [ "$(head -n 1 "$work/links.pre.a.links")" = "missing $RDMA_LINKS" ]; then
		t_fail "A has no $RDMA_LINKS (the kernel does not provide it yet)"
	fi
	if [ "$(head -n 1 "$work/links.pre.b.links")" = "missing $RDMA_LINKS" ]; then
		t_fail "B has no $RDMA_LINKS"
	fi
	lines=$(rdma_links_count "$work/links.pre.a.links")
	[ -z "$lines" ] || ck "A: links before the first connection to B" "$lines" eq 0

	serve links2 -p 6111 -n 2 -s "$links_bytes" -T 240
	serve links20 -p 6112 -n 20 -s "$links_bytes" -T 240
	# two connections at the same moment to a peer without a link
	links_open links2 6111 2 90 "the 2 first" links.mid
	pid2=$bg_pid
	t_file "B's links with the 2 connections open" "$work/links.mid.b.links"
	ck "A: links_created over the 2 simultaneous connections" \
		"$(delta links.pre links.mid a links_created)" eq 1
	t_diag "B: links_created over them: $(delta links.pre links.mid b links_created)"
	ck "A: active link lines" "$(rdma_links_count "$work/links.mid.a.links" active)" eq 1
	ck "A: link lines" "$(rdma_links_count "$work/links.mid.a.links")" eq 1
	ck "A: CONNS of the active link" "$(rdma_links_conns "$work/links.mid.a.links")" eq 2
	ck "A: QPs of smr (rdma res show qp/cm_id)" \
		"$(rdma_res_count "$work/links.mid.a.qp" smr)" ge 1
	ck "B: QPs of smr (rdma res show qp/cm_id)" \
		"$(rdma_res_count "$work/links.mid.b.qp" smr)" ge 1

	# 20 more while those two are held open
	links_open links20 6112 20 120 "the 20 later" links.post
	pid20=$bg_pid
	t_file "A's cm_ids and QPs with all 22 connections open" "$work/links.post.a.qp"
	t_file "B's cm_ids and QPs with all 22 connections open" "$work/links.post.b.qp"
	ck "A: links_created over the 20 later connections" \
		"$(delta links.mid links.post a links_created)" eq 0
	ck "B: links_created over the 20 later connections" \
		"$(delta links.mid links.post b links_created)" eq 0
	for h in a b; do
		ck "${h^^}: QPs (rdma res show qp) before/after the 20 later connections" \
			"$(rdma_res_count "$work/links.post.$h.qp")" eq \
			"$(rdma_res_count "$work/links.mid.$h.qp")"
		ck "${h^^}: QPs of smr before/after the 20 later connections" \
			"$(rdma_res_count "$work/links.post.$h.qp" smr)" eq \
			"$(rdma_res_count "$work/links.mid.$h.qp" smr)"
	done
	ck "A: active link lines with 22 connections" \
		"$(rdma_links_count "$work/links.post.a.links" active)" eq 1
	ck "A: CONNS of the active link" "$(rdma_links_conns "$work/links.post.a.links")" eq 22

	# The pools below live as long as the link: on a slow test bed (the
	# debug kernel) draining and snapshotting the closed 22 outlasts the
	# 30 s idle timeout, so it is stretched by the time scale while the
	# case runs (the timer reads it when the last user leaves).
	idle_saved=$(sysctl -n net.smr.link_idle_timeout_ms)
	sysctl_both link_idle_timeout_ms "$(tscale "$idle_saved")"
	: >"$rel"
	client_bg_wait "$pid2" links2
	client_bg_wait "$pid20" links20
	server_result links2 60
	server_result links20 60
	pair_check links2 2 "$links_bytes"
	pair_check links20 20 "$links_bytes"
	snap links.end
	n1=$(rdma_links_count "$work/links.mid.a.links" active)
	n2=$(delta links.pre links.end a links_created)
	conns=$(rdma_links_conns "$work/links.post.a.links")
	t_note "A: ${n1:-no} active link(s) after 2 connections, links_created +$n2 over the test, CONNS '${conns}' with 22 open"
	rc=$(rdma_res_count "$work/links.post.a.qp" smr)
	t_note "smr QPs A ${rc}/B $(rdma_res_count "$work/links.post.b.qp" smr)"

	# Once both ends let go of those 22, their buffers wait in the link's
	# pools: 10 more connections take them without allocating, and only
	# the RMBs are registered again (new key; a send buffer's key never
	# left its host). 16 KiB each way never fills a send ring: no growth.
	if links_drained 60; then
		snap reuse.pre
		serve links10 -p 6113 -n 10 -s 16384 -T 240
		client links10 -a "$peer" -p 6113 -n 10 -s 16384 -T 240
		server_result links10 60
		pair_check links10 10 16384
		snap reuse.post
		for h in a b; do
			ck "${h^^}: buffers_allocated over 10 connections after 22 closed" \
				"$(delta reuse.pre reuse.post $h buffers_allocated)" eq 0
			ck "${h^^}: buffers_reused over them (RMB + send buffer each)" \
				"$(delta reuse.pre reuse.post $h buffers_reused)" eq 20
			ck "${h^^}: buffers_registered over them (the RMBs)" \
				"$(delta reuse.pre reuse.post $h buffers_registered)" eq 10
			ck "${h^^}: links_created over them (the pools' link is still up)" \
				"$(delta reuse.pre reuse.post $h links_created)" eq 0
		done
	else
		t_fail "the 22 connections still held their buffers 60 s after they closed"
	fi
	sysctl_both link_idle_timeout_ms "$idle_saved"
	t_end
}

# links_drained SECONDS: wait (time-scaled) until no connection is attached
# to a link on either host (closed sockets hand their buffers back to the
# pool), however many links there are (none included).
links_drained() {
	local until=$((SECONDS + $(tscale "$1")))
	while :; do
		rdma_links >"$work/drain.a.links"
		b_call links >"$work/drain.b.links"
		[ "$(links_conns_sum "$work/drain.a.links")" = 0 ] &&
			[ "$(links_conns_sum "$work/drain.b.links")" = 0 ] && return 0
		[ "$SECONDS" -lt "$until" ] || return 1
		sleep 0.5
	done
}

# links_conns_sum FILE: the CONNS of every link in a saved links file.
links_conns_sum() {
	awk 'NR > 1 && NF >= 7 { n += $7 } END { print n + 0 }' "$1"
}

# integrity (and rxe around it): 100 IPv4 connections and a smaller IPv6
# run, random streams both ways at once.
case_integrity() {
	local t0 cargs=()
	t_begin integrity
	snap_rxe rxe.pre
	snap int.pre
	t0=$SECONDS
	[ -z "$corrupt" ] || cargs=(-C "$corrupt")
	[ -z "$corrupt" ] || t_diag "debug: the first IPv4 connection sends byte $corrupt flipped (SMR_RDMA_CORRUPT)"
	if serve int4 -p 6101 -n "$conns4" -s "$bytes4" -T 600; then
		client int4 -a "$peer" -p 6101 -n "$conns4" -s "$bytes4" -T 600 \
			-P "$out/conns/int4.progress" "${cargs[@]}"
		server_result int4 120
		pair_check int4 "$conns4" "$bytes4"
	fi
	t_diag "IPv4: $((SECONDS - t0)) s, the client's last $(tail -n 1 "$out/conns/int4.progress" 2>/dev/null)"
	t0=$SECONDS
	if serve int6 -6 -p 6102 -n "$conns6" -s "$bytes6" -T 600; then
		client int6 -6 -a "$peer6" -p 6102 -n "$conns6" -s "$bytes6" -T 600 \
			-P "$out/conns/int6.progress"
		server_result int6 120
		pair_check int6 "$conns6" "$bytes6"
	fi
	t_diag "IPv6: $((SECONDS - t0)) s, the client's last $(tail -n 1 "$out/conns/int6.progress" 2>/dev/null)"
	snap_rxe rxe.post
	snap int.post
	t_diag "SMR counters that moved (A, B):"
	for k in mode_rdma mode_tcp rdma_bytes_sent rdma_bytes_received tcp_bytes_sent \
		tcp_bytes_received fallback_rdma_unavailable links_created; do
		t_diag "  $k A $(delta int.pre int.post a $k) B $(delta int.pre int.post b $k)"
	done
	t_note "expected mode $expect"
	t_end
}

# rxe: the soft-RoCE packet counters of both hosts over the integrity runs
# cover the payload (rxe's path MTU is at most 4096).
case_rxe() {
	local ab ba h k d want name v1 v2
	t_begin rxe
	# the payload each way, as the tools counted it
	ab=$(summary_field int4 client tx) ba=$(summary_field int4 server tx)
	ab=$((${ab:-0} + $(summary_field int6 client tx | grep . || echo 0)))
	ba=$((${ba:-0} + $(summary_field int6 server tx | grep . || echo 0)))
	t_diag "payload A->B $ab bytes, B->A $ba bytes (smr_stream summaries)"
	ck "payload A->B" "$ab" gt 0
	ck "payload B->A" "$ba" gt 0
	for h in a b; do
		for k in sent_pkts rcvd_pkts; do
			t_diag "${h^^} $k: $(rdma_kv "$work/rxe.pre.$h.rxe" $k) -> $(rdma_kv "$work/rxe.post.$h.rxe" $k)"
		done
	done
	declare -A dl=()
	for h in a b; do
		for k in sent_pkts rcvd_pkts; do
			name="${h^^} rxe0 $k"
			v1=$(rdma_kv "$work/rxe.pre.$h.rxe" $k)
			v2=$(rdma_kv "$work/rxe.post.$h.rxe" $k)
			if [ -z "$v1" ] || [ -z "$v2" ]; then
				t_fail "$name: no counter (hw_counters of rxe0 port 1: $(awk '{ printf "%s ", $1 }' "$work/rxe.pre.$h.rxe"))"
				continue
			fi
			d=$((v2 - v1))
			dl[$h$k]=$d
			# A sends and B receives A->B payload, and the other way
			if { [ $h = a ] && [ $k = sent_pkts ]; } || { [ $h = b ] && [ $k = rcvd_pkts ]; }; then
				want=$((ab / 4096))
			else
				want=$((ba / 4096))
			fi
			if [ "$expect" = tcp ]; then
				# the checker's own check: without RDMA the payload
				# must not show on rxe
				ck "$name delta, payload on TCP (SMR_EXPECT_MODE=tcp)" "$d" lt "$want"
			else
				ck "$name delta vs payload/4096" "$d" ge "$want"
			fi
		done
	done
	t_note "packets A sent ${dl[asent_pkts]:-?} rcvd ${dl[arcvd_pkts]:-?}, B sent ${dl[bsent_pkts]:-?} rcvd ${dl[brcvd_pkts]:-?}; payload/4096: A->B $((ab / 4096)), B->A $((ba / 4096))"
	t_end
}

# inline: small writes ride in the CDC itself (one SEND, no WRITE); a
# sender with net.smr.cdc_inline_max 0 sends none inline but still takes
# the peer's. Integrity is checked as everywhere.
case_inline() {
	local sent_a sent_b recv_a recv_b
	t_begin inline
	snap inl.pre
	if serve inl1 -p 6115 -n 8 -s 65536 -m 100 -S 7 -T 300; then
		client inl1 -a "$peer" -p 6115 -n 8 -s 65536 -m 100 -S 7 -T 300
		server_result inl1 120
		pair_check inl1 8 65536
	fi
	snap inl.mid
	sent_a=$(delta inl.pre inl.mid a cdc_inline_sent)
	sent_b=$(delta inl.pre inl.mid b cdc_inline_sent)
	recv_a=$(delta inl.pre inl.mid a cdc_inline_received)
	recv_b=$(delta inl.pre inl.mid b cdc_inline_received)
	if [ "$expect" = tcp ]; then
		# the checker's own check: no CDCs without RDMA
		ck "A cdc_inline_sent (SMR_EXPECT_MODE=tcp)" "$sent_a" eq 0
		ck "B cdc_inline_sent (SMR_EXPECT_MODE=tcp)" "$sent_b" eq 0
		t_end
		return
	fi
	ck "A cdc_inline_sent, writes <= 100 B" "$sent_a" gt 0
	ck "B cdc_inline_sent, writes <= 100 B" "$sent_b" gt 0
	ck "B cdc_inline_received = A's sent" "$recv_b" eq "$sent_a"
	ck "A cdc_inline_received = B's sent" "$recv_a" eq "$sent_b"
	t_note "inline CDCs A->B $sent_a, B->A $sent_b"

	sysctl -qw net.smr.cdc_inline_max=0
	if serve inl2 -p 6116 -n 8 -s 65536 -m 100 -S 8 -T 300; then
		client inl2 -a "$peer" -p 6116 -n 8 -s 65536 -m 100 -S 8 -T 300
		server_result inl2 120
		pair_check inl2 8 65536
	fi
	sysctl -qw net.smr.cdc_inline_max=128
	snap inl.post
	sent_a=$(delta inl.mid inl.post a cdc_inline_sent)
	sent_b=$(delta inl.mid inl.post b cdc_inline_sent)
	recv_a=$(delta inl.mid inl.post a cdc_inline_received)
	ck "A cdc_inline_sent with cdc_inline_max 0" "$sent_a" eq 0
	ck "B cdc_inline_sent (A still takes them)" "$sent_b" gt 0
	ck "A cdc_inline_received = B's sent" "$recv_a" eq "$sent_b"
	ck "A cdc_bad" "$(delta inl.pre inl.post a cdc_bad)" eq 0
	ck "B cdc_bad" "$(delta inl.pre inl.post b cdc_bad)" eq 0
	t_note "with A's cdc_inline_max 0: A->B $sent_a, B->A $sent_b"
	t_end
}

# slot_reuse: a CDC completion used to read its slot's send position after
# giving the slot back, so a post on another CPU could make it report a
# later one: the writer then overwrote bytes whose WRITE had not gone out
# (the debug kernel's faults suite received bytes off the stream). The
# test module's delay holds that window open on both hosts.
slot_reuse_conns=4
slot_reuse_bytes=16777216
slot_reuse_delay_us=300
case_slot_reuse() {
	local r reused_a reused_b
	t_begin slot_reuse
	if [ "$expect" = tcp ]; then
		t_note "no CDCs in mode tcp: nothing to race"
		t_end
		return
	fi
	ck "A: test_link_send_done_delay_us" "$(test_param test_link_send_done_delay_us "$slot_reuse_delay_us")" eq "$slot_reuse_delay_us"
	ck "B: test_link_send_done_delay_us" "$(b_call test_param test_link_send_done_delay_us "$slot_reuse_delay_us")" eq "$slot_reuse_delay_us"
	snap slot.pre
	if serve slot -p 6140 -n "$slot_reuse_conns" -s "$slot_reuse_bytes" -T 600; then
		client slot -a "$peer" -p 6140 -n "$slot_reuse_conns" -s "$slot_reuse_bytes" -T 600
		server_result slot 120
		pair_check slot "$slot_reuse_conns" "$slot_reuse_bytes"
	fi
	snap slot.post
	r=$(test_param test_link_send_done_delay_us 0)
	[ "$r" = 0 ] || t_fail "A: delay not reset: $r"
	r=$(b_call test_param test_link_send_done_delay_us 0)
	[ "$r" = 0 ] || t_fail "B: delay not reset: $r"
	# the race needs a second CPU to post while a completion waits
	ck "A: CPUs" "$(nproc)" ge 2
	reused_a=$(test_param test_link_send_done_reused)
	reused_b=$(b_call test_param test_link_send_done_reused)
	ck "slots another post took during a completion's delay (A + B)" \
		"$((10#0${reused_a//[!0-9]/} + 10#0${reused_b//[!0-9]/}))" ge 1
	t_note "slots taken during the delay: A $reused_a, B $reused_b; CDCs posted A +$(delta slot.pre slot.post a cdc_sent), B +$(delta slot.pre slot.post b cdc_sent)"
	t_end
}

# test_param NAME [N]: the test module's parameter NAME (test_*) set to N
# if given, then read back.
test_param() {
	local f=/sys/module/smr/parameters/$1
	[[ $1 =~ ^test_[a-z_]+$ ]] || { echo "bad name"; return; }
	[ -e "$f" ] || { echo "missing $1 (not the test module?)"; return; }
	[ -z "${2:-}" ] || echo "$2" >"$f"
	cat "$f"
}

b_test_param() {
	test_param "$@"
}

# hostile: A's module breaks one cursor rule in a data CDC (test hook
# /sys/module/smr/parameters/fault_cdc, one rule per round: only the test
# module has it, which run_tests.sh boots). B must refuse
# that CDC: only that connection is reset (ECONNRESET on both ends, B's
# conn_abort_bad_cdc and cdc_bad +1, A's conn_abort_peer +1), the link and
# a connection held open on it live on, and the held one stays intact.
hostile_rules=(prod_past_room prod_backwards cons_ahead urg_outside count_range inline_overlong)
case_hostile() {
	local rel=$work/hostile.release pid_hold pid i rule name err_a err_b left
	local fault=/sys/module/smr/parameters/fault_cdc
	t_begin hostile
	rm -f "$rel"
	if [ ! -w "$fault" ]; then
		t_fail "A: no test hook $fault (the guests must boot the test module: vm-run --module test, make modules-test)"
		t_end
		return
	fi
	if [ "$expect" = tcp ]; then
		t_note "no CDCs in mode tcp: nothing to break"
		t_end
		return
	fi
	serve hold -p 6150 -n 1 -s 65536 -S 3 -T 600 || { t_end; return; }
	client_bg_ready hold 60 "the held connection was not through its data" \
		-a "$peer" -p 6150 -n 1 -s 65536 -S 3 -H "$rel" -T 600
	pid_hold=$bg_pid
	snap hos.pre
	for i in "${!hostile_rules[@]}"; do
		rule=${hostile_rules[$i]} name=hos$((i + 1))
		rm -f "$work/$name.trigger"
		# before the stream starts: a saturated guest answers slowly
		snap_stats "$name.pre"
		# random sizes: small writes go inline (rule 6), big ones by WRITE
		serve "$name" -p $((6151 + i)) -n 1 -s 0 -F -W 20 \
			-X "/tmp/rdma-b/$name.trigger" -T 120 || continue
		client_bg_ready "$name" 60 "$rule: the transfer did not get going" \
			-a "$peer" -p $((6151 + i)) -n 1 -s 0 -F -W 20 -X "$work/$name.trigger" -T 120
		pid=$bg_pid
		b_call trigger "$name" >/dev/null
		: >"$work/$name.trigger"
		echo $((i + 1)) >"$fault"
		client_bg_wait "$pid" "$name"
		server_result "$name" 60
		snap_stats "$name.post"
		left=$(cat "$fault")
		ck "$rule: the hook was used (fault_cdc back to 0)" "$left" eq 0
		[ "$left" = 0 ] || echo 0 >"$fault"
		err_a=$(sed -n 's/^conn .* err=\([^ ]*\) .*/\1/p' "$work/$name.client")
		err_b=$(sed -n 's/^conn .* err=\([^ ]*\) .*/\1/p' "$work/$name.server")
		ck "$rule: A's socket ends with" "$err_a" eq ECONNRESET
		ck "$rule: B's socket ends with" "$err_b" eq ECONNRESET
		ck "$rule: B conn_abort_bad_cdc" \
			"$(delta "$name.pre" "$name.post" b conn_abort_bad_cdc)" eq 1
		ck "$rule: B cdc_bad" "$(delta "$name.pre" "$name.post" b cdc_bad)" ge 1
		ck "$rule: A conn_abort_peer" \
			"$(delta "$name.pre" "$name.post" a conn_abort_peer)" eq 1
		ck "$rule: A conn_abort_bad_cdc" \
			"$(delta "$name.pre" "$name.post" a conn_abort_bad_cdc)" eq 0
	done
	snap hos.post
	for h in a b; do
		ck "${h^^}: links_created over the rounds" \
			"$(delta hos.pre hos.post $h links_created)" eq 0
		ck "${h^^}: links_failed over the rounds" \
			"$(delta hos.pre hos.post $h links_failed)" eq 0
	done
	: >"$rel"
	client_bg_wait "$pid_hold" hold
	server_result hold 60
	pair_check hold 1 65536
	t_note "${#hostile_rules[@]} rules broken, each refused by B with only its connection reset; held connection intact"
	t_end
}

# usermem: net.smr.mem_user_max bounds one user's buffers. With A's limit
# at 1 MiB, 16 connections of uid 65534 held open: some run on RDMA, the
# rest fall back with reason no_memory (counted); root's connections at the
# same time still run on RDMA; once uid 65534's are closed, its new ones
# run on RDMA again (the charge was given back).
case_usermem() {
	local nob=$work/nobody rel pid n_rdma n_nomem n_other limit_delta r saved
	t_begin usermem
	if [ "$expect" = tcp ]; then
		t_note "no buffers in mode tcp: nothing to bound"
		t_end
		return
	fi
	mkdir -p "$nob"
	chmod 1777 "$nob"
	rel=$nob/release
	rm -f "$rel" "$nob/um1.ready"
	snap um.pre
	saved=$(sysctl -n net.smr.mem_user_max)
	sysctl -qw net.smr.mem_user_max=1048576
	if serve um1 -p 6141 -n 16 -s 65536 -M any -T 300; then
		client_bg -u 65534 um1 -a "$peer" -p 6141 -n 16 -s 65536 \
			-M any -H "$rel" -R "$nob/um1.ready" -T 300
		pid=$bg_pid
		rdma_wait_file "$nob/um1.ready" 120 "$pid" ||
			t_fail "uid 65534's 16 connections were not through their data within 120 s"
		# root, while uid 65534 holds its connections
		if serve um2 -p 6142 -n 2 -s 65536 -T 120; then
			client um2 -a "$peer" -p 6142 -n 2 -s 65536 -T 120
			server_result um2 60
			pair_check um2 2 65536
		fi
		: >"$rel"
		client_bg_wait "$pid" um1
		server_result um1 60
		pair_check um1 16 65536
		n_rdma=$(grep -c '^conn .* mode=rdma ' "$work/um1.client")
		n_nomem=$(grep -c '^conn .* mode=tcp reason=no_memory ' "$work/um1.client")
		n_other=$((16 - n_rdma - n_nomem))
		ck "uid 65534: connections on RDMA within 1 MiB" "$n_rdma" ge 1
		ck "uid 65534: connections over the limit, mode tcp reason no_memory" "$n_nomem" ge 1
		ck "uid 65534: connections in neither" "$n_other" eq 0
		snap um.mid
		limit_delta=$(delta um.pre um.mid a buffers_user_limit)
		ck "A buffers_user_limit = uid 65534's refused connections" "$limit_delta" eq "$n_nomem"
		t_note "uid 65534 under a 1 MiB limit: $n_rdma on RDMA, $n_nomem fell back (no_memory); root's 2 on RDMA meanwhile"
	fi
	# closed connections give their charge back once their final CDCs
	# are through; then uid 65534 fits again
	sleep 2
	rm -f "$nob/um3.ready"
	if serve um3 -p 6143 -n 2 -s 65536 -T 120; then
		client -u 65534 um3 -a "$peer" -p 6143 -n 2 -s 65536 -T 120
		server_result um3 60
		pair_check um3 2 65536
	fi
	r=$(sysctl -n net.smr.mem_user_max)
	sysctl -qw net.smr.mem_user_max="$saved"
	ck "A net.smr.mem_user_max read back" "$r" eq 1048576
	t_end
}

# b_sysctls_set KEY=VALUE...: set B's net.smr.KEY, each old value kept for
# b_sysctls_restore (a value that does not stick fails the case).
b_sysctls_saved=()
b_sysctls_set() {
	local kv k old r
	for kv in "$@"; do
		k=${kv%%=*}
		old=$(b_call sysctl_get "net.smr.$k")
		r=$(b_call sysctl "net.smr.$kv")
		[ "$r" = "net.smr.$k = ${kv#*=}" ] ||
			t_fail "B: cannot set net.smr.$k: ${r:-no answer} (was $old)"
		[ "$old" = missing ] || b_sysctls_saved+=("$k=$old")
	done
}

b_sysctls_restore() {
	local kv
	for kv in "${b_sysctls_saved[@]}"; do
		b_call sysctl "net.smr.$kv" >/dev/null
	done
	b_sysctls_saved=()
}

# b_sysctl_get KEY: B's value of KEY, "missing" if it has no such sysctl.
b_sysctl_get() {
	sysctl -n "$1" 2>/dev/null || echo missing
}

# sysctl_both KEY VALUE: set KEY on A and B (a missing one fails the case).
sysctl_both() {
	local r
	sysctl -qw "net.smr.$1=$2" || t_fail "A: cannot set net.smr.$1"
	r=$(b_call sysctl "net.smr.$1=$2")
	[ "$r" = "net.smr.$1 = $2" ] || t_fail "B: cannot set net.smr.$1: $r"
}

# links_idle_out: no connection attached anywhere, every link on both
# hosts idles out (their pools go with them), then the idle timeout is
# back to what it was. A link idle already keeps the timeout it was given
# (30 s): false if they were not all gone within 45 s (the kernel's idle
# timer: never time-scaled).
links_idle_out() {
	local saved until gone=1
	links_drained 60 || t_diag "connections still attached before the links idle out"
	saved=$(sysctl -n net.smr.link_idle_timeout_ms)
	sysctl -qw net.smr.link_idle_timeout_ms=100
	b_call sysctl net.smr.link_idle_timeout_ms=100 >/dev/null
	until=$((SECONDS + 45))
	while :; do
		gone=1
		[ "$(rdma_links_count)" = 0 ] || gone=0
		[ "$gone" = 0 ] || [ "$(b_call links | rdma_links_count -)" = 0 ] || gone=0
		if [ "$gone" = 1 ] || [ "$SECONDS" -ge "$until" ]; then
			break
		fi
		sleep 0.2
	done
	sysctl -qw net.smr.link_idle_timeout_ms="$saved"
	b_call sysctl "net.smr.link_idle_timeout_ms=$saved" >/dev/null
	[ "$gone" = 1 ]
}

# stat_of TAG HOST NAME: NAME in snapshot TAG of HOST (a|b).
stat_of() {
	rdma_kv "$work/$1.$2.stats" "$3"
}

# server_part NAME PART: the lines of B's server NAME whose client is in
# $work/PART.client (by port), with its summary and rc, as
# $work/PART.server: one server, several clients, each pair_check'd.
server_part() {
	awk 'FNR == 1 { f++ }
		f == 1 && /^conn / { for (i = 2; i <= NF; i++) if ($i ~ /^lport=/) want[substr($i, 7)] = 1 }
		f == 2 && /^conn / { for (i = 2; i <= NF; i++) if ($i ~ /^rport=/ && (substr($i, 7) in want)) print }
		f == 2 && /^(summary |rc=)/ { print }' \
		"$work/$2.client" "$work/$1.server" >"$work/$2.server"
	cp "$work/$2.server" "$out/conns/"
}

# unaccepted: issue 10's pre-accept exhaustion. B's server accepts nothing
# until told (smr_stream -D): its children negotiate and wait, holding
# their buffers. A floods it from its own address with connections held
# at their first byte; then a second address of A connects to the same
# listener, while a connection to another listener is held open from it.
# B's limits for the case: mem_max 20 MiB (the flood alone, at 512 KiB a
# connection, would take it all), mem_unaccepted_peer_max 4 MiB (8 of the
# flood), mem_unaccepted_max 12 MiB. Once everything was checked the
# server accepts, every stream runs, and both ends' lines are compared.
case_unaccepted() {
	local dev rel=$work/unacc.release n_rdma n_nomem n_other
	local pin_pre pin_mid pin_post unacc_mid lim pid_hold='' pid_flood pid_legit
	t_begin unaccepted
	if [ "$expect" = tcp ]; then
		t_note "no buffers in mode tcp: nothing to hold"
		t_end
		return
	fi
	rm -f "$rel" "$work/unacc_hold.release"
	dev=$(ip -o -4 addr show | awk -v a="$self" '$4 ~ "^" a "/" { print $2; exit }')
	if ! ip addr add "$unacc_src/24" dev "$dev"; then
		t_fail "A: cannot add $unacc_src to $dev"
		t_end
		return
	fi
	# B's pools from the cases before go: its pinned bytes are the flood's
	links_idle_out || t_fail "links did not idle out within 45 s before the flood"
	b_sysctls_set "mem_max=$unacc_mem_max" "mem_unaccepted_peer_max=$unacc_peer_max" \
		"mem_unaccepted_max=$unacc_max"
	snap unacc.pre
	pin_pre=$(stat_of unacc.pre b buffer_bytes_pinned)

	# a legitimate connection from the second address, held open (on
	# another listener, which accepts) through the flood
	if serve unacc_hold -p 6161 -n 1 -s 1048576 -r "$unacc_sockbuf" -T 300; then
		client_bg_ready unacc_hold 90 "the held connection was not through its first 256 KiB" \
			-a "$peer" -A "$unacc_src" -p 6161 -n 1 -s 1048576 -h 262144 \
			-r "$unacc_sockbuf" -H "$work/unacc_hold.release" -T 300
		pid_hold=$bg_pid
	fi
	# the flood: connections held before their first byte, never accepted
	serve unacc -p 6160 -n $((unacc_flood + 1)) -s 16384 -r "$unacc_sockbuf" \
		-D /tmp/rdma-b/unacc.trigger -M any -T 300 || { t_end; return; }
	client_bg_ready unacc_flood 180 "the flood's $unacc_flood connections were not all connected" \
		-a "$peer" -p 6160 -n "$unacc_flood" -s 16384 -h 0 -H "$rel" \
		-r "$unacc_sockbuf" -M any -T 300
	pid_flood=$bg_pid
	# then another client's connection to the same listener
	client_bg_ready unacc_legit 90 "the second address's connection did not connect" \
		-a "$peer" -A "$unacc_src" -p 6160 -n 1 -s 16384 -h 0 -H "$rel" \
		-r "$unacc_sockbuf" -M rdma -T 300
	pid_legit=$bg_pid
	snap unacc.mid
	pin_mid=$(stat_of unacc.mid b buffer_bytes_pinned)
	unacc_mid=$(stat_of unacc.mid b buffer_bytes_unaccepted)
	t_diag "B while the flood waits: $(grep -E '^buffer_bytes_' "$work/unacc.mid.b.stats" | tr '\n' ' ')"

	# the server accepts now; every stream runs
	b_call trigger unacc >/dev/null
	: >"$rel"
	: >"$work/unacc_hold.release"
	client_bg_wait "$pid_flood" unacc_flood
	client_bg_wait "$pid_legit" unacc_legit
	[ -z "${pid_hold:-}" ] || client_bg_wait "$pid_hold" unacc_hold
	server_result unacc 120
	server_part unacc unacc_flood
	server_part unacc unacc_legit
	pair_check unacc_flood "$unacc_flood" 16384
	pair_check unacc_legit 1 16384
	[ -z "${pid_hold:-}" ] || { server_result unacc_hold 60; pair_check unacc_hold 1 1048576; }
	links_drained 60 || t_fail "connections still attached 60 s after the case"
	snap unacc.post
	pin_post=$(stat_of unacc.post b buffer_bytes_pinned)

	n_rdma=$(grep -c '^conn .* mode=rdma ' "$work/unacc_flood.client")
	n_nomem=$(grep -c '^conn .* mode=tcp reason=peer_declined peer_reason=no_memory ' "$work/unacc_flood.client")
	n_other=$((unacc_flood - n_rdma - n_nomem))
	ck "flood: connections in mode rdma" "$n_rdma" ge 1
	ck "flood: connections in mode rdma, at most mem_unaccepted_peer_max's worth" \
		"$n_rdma" le $((unacc_peer_max / unacc_conn_bytes))
	ck "flood: connections in neither (rdma, or B declined for memory)" "$n_other" eq 0
	lim=$(delta unacc.pre unacc.mid b buffers_unaccepted_peer_limit)
	ck "B buffers_unaccepted_peer_limit = the flood's refused connections" "$lim" eq "$n_nomem"
	ck "B buffers_mem_limit over the flood" "$(delta unacc.pre unacc.mid b buffers_mem_limit)" eq 0
	ck "B buffer_bytes_unaccepted while the flood waits (the flood's, and the second address's)" \
		"$unacc_mid" le $((unacc_peer_max + unacc_conn_bytes))
	ck "B buffer_bytes_pinned added while the flood waits" \
		"$((pin_mid - pin_pre))" le $((unacc_peer_max + 2 * unacc_conn_bytes))
	ck "B buffer_bytes_unaccepted once all closed" "$(stat_of unacc.post b buffer_bytes_unaccepted)" eq 0
	ck "B buffer_bytes_charged once all closed" "$(stat_of unacc.post b buffer_bytes_charged)" eq 0
	ck "A buffer_bytes_charged once all closed" "$(stat_of unacc.post a buffer_bytes_charged)" eq 0
	t_note "flood of $unacc_flood: $n_rdma in mode rdma, $n_nomem declined by B (no_memory); B pinned before/during/after the close: $pin_pre/$pin_mid/$pin_post bytes (after: pooled), unaccepted during $unacc_mid"

	b_sysctls_restore
	links_idle_out || t_fail "links did not idle out within 45 s after the case"
	snap_stats unacc.end
	ck "B buffer_bytes_pinned once the links idled out" "$(stat_of unacc.end b buffer_bytes_pinned)" eq 0
	t_note "B pinned once the links idled out: $(stat_of unacc.end b buffer_bytes_pinned)"
	ip addr del "$unacc_src/24" dev "$dev"
	t_end
}

# unaccepted_host: all listeners' unaccepted children together hold at
# most half of B's mem_max, whatever the per-listener and per-peer bounds
# allow; another listener still takes its first 2 MiB of connections
# (every server connection is unaccepted while it negotiates).
case_unaccepted_host() {
	local rel=$work/unhost.release pid_flood n_rdma n_nomem unacc_mid
	local half=$((unhost_mem_max / 2))
	t_begin unaccepted_host
	if [ "$expect" = tcp ]; then
		t_note "no buffers in mode tcp: nothing to hold"
		t_end
		return
	fi
	rm -f "$rel"
	links_idle_out || t_fail "links did not idle out within 45 s before the flood"
	b_sysctls_set "mem_max=$unhost_mem_max" "mem_unaccepted_max=$unhost_mem_max" \
		"mem_unaccepted_peer_max=$unhost_mem_max"
	snap unhost.pre
	serve unhost -p 6165 -n "$unhost_flood" -s 16384 -r "$unacc_sockbuf" \
		-D /tmp/rdma-b/unhost.trigger -M any -T 300 || { t_end; return; }
	client_bg_ready unhost_flood 180 "the flood's $unhost_flood connections were not all connected" \
		-a "$peer" -p 6165 -n "$unhost_flood" -s 16384 -h 0 -H "$rel" \
		-r "$unacc_sockbuf" -M any -T 300
	pid_flood=$bg_pid
	snap unhost.mid
	unacc_mid=$(stat_of unhost.mid b buffer_bytes_unaccepted)
	# meanwhile another listener, which accepts, gets buffers
	if serve unhost_acc -p 6166 -n 1 -s 1048576 -r "$unacc_sockbuf" -T 120; then
		client unhost_acc -a "$peer" -p 6166 -n 1 -s 1048576 -r "$unacc_sockbuf" -M rdma -T 120
		server_result unhost_acc 60
		pair_check unhost_acc 1 1048576
	fi
	b_call trigger unhost >/dev/null
	: >"$rel"
	client_bg_wait "$pid_flood" unhost_flood
	server_result unhost 120
	server_part unhost unhost_flood
	pair_check unhost_flood "$unhost_flood" 16384
	links_drained 60 || t_fail "connections still attached 60 s after the case"
	snap unhost.post
	n_rdma=$(grep -c '^conn .* mode=rdma ' "$work/unhost_flood.client")
	n_nomem=$(grep -c '^conn .* mode=tcp reason=peer_declined peer_reason=no_memory ' "$work/unhost_flood.client")
	ck "flood: connections in mode rdma" "$n_rdma" ge 1
	ck "flood: connections in mode rdma, at most half of mem_max's worth" \
		"$n_rdma" le $((half / unacc_conn_bytes))
	ck "flood: the others declined by B for memory" "$n_nomem" eq $((unhost_flood - n_rdma))
	ck "B buffers_unaccepted_host_limit = the flood's declined connections" \
		"$(delta unhost.pre unhost.mid b buffers_unaccepted_host_limit)" eq "$n_nomem"
	ck "B buffer_bytes_unaccepted while the flood waits" "$unacc_mid" le "$half"
	ck "B buffer_bytes_unaccepted once all closed" "$(stat_of unhost.post b buffer_bytes_unaccepted)" eq 0
	b_sysctls_restore
	links_idle_out || t_fail "links did not idle out within 45 s after the case"
	t_note "B mem_max $unhost_mem_max: flood of $unhost_flood to a listener that does not accept: $n_rdma in mode rdma, $n_nomem declined (buffers_unaccepted_host_limit), unaccepted bytes $unacc_mid; the accepting listener's connection in mode rdma"
	t_end
}

# pool: what idle pools keep is bounded: net.smr.mem_pool_max (all pools)
# and mem_pool_link_max (one link's) at 2 MiB and 1 MiB on both hosts;
# 32 connections of four buffer sizes (SO_RCVBUF/SO_SNDBUF 16..128 KiB:
# rings of 32..256 KiB) open together and close; once they are gone, no
# host has more than 1 MiB pinned (its one link's pool), the rest was
# freed (buffers_pool_full). (The links case checks reuse.)
case_pool() {
	local sz i pids=() h pinned pooled saved_a=() saved_b=() k until
	local keys=(mem_pool_max mem_pool_link_max) vals=("$pool_max" "$pool_link_max")
	t_begin pool
	if [ "$expect" = tcp ]; then
		t_note "no buffers in mode tcp: nothing to pool"
		t_end
		return
	fi
	# the pools of the cases before go with their links
	links_idle_out || t_fail "links did not idle out within 45 s"
	for k in "${!keys[@]}"; do
		saved_a[k]=$(sysctl -n "net.smr.${keys[k]}" 2>/dev/null || echo missing)
		saved_b[k]=$(b_call sysctl_get "net.smr.${keys[k]}")
		sysctl_both "${keys[k]}" "${vals[k]}"
	done
	snap pool.pre
	i=0
	for sz in 16384 32768 65536 131072; do
		i=$((i + 1))
		serve "pool$i" -p $((6170 + i)) -n 8 -s 65536 -r "$sz" -T 300 || continue
		client_bg "pool$i" -a "$peer" -p $((6170 + i)) -n 8 -s 65536 -r "$sz" -T 300
		pids+=("$bg_pid")
	done
	for i in "${!pids[@]}"; do
		client_bg_wait "${pids[i]}" "pool$((i + 1))"
		server_result "pool$((i + 1))" 60
		pair_check "pool$((i + 1))" 8 65536
	done
	links_drained 60 || t_fail "connections still attached 60 s after they closed"
	# what the pools could not keep is freed by a work item: a moment
	until=$((SECONDS + $(tscale 10)))
	while :; do
		snap_stats pool.mid
		[ "$(stat_of pool.mid a buffer_bytes_pinned)" -le "$pool_link_max" ] 2>/dev/null &&
			[ "$(stat_of pool.mid b buffer_bytes_pinned)" -le "$pool_link_max" ] 2>/dev/null && break
		[ "$SECONDS" -lt "$until" ] || break
		sleep 0.2
	done
	for h in a b; do
		pinned=$(stat_of pool.mid $h buffer_bytes_pinned)
		pooled=$(stat_of pool.mid $h buffer_bytes_pooled)
		ck "${h^^}: buffer_bytes_pinned with every connection gone (one link)" "$pinned" le "$pool_link_max"
		ck "${h^^}: buffer_bytes_pooled (one link)" "$pooled" le "$pool_link_max"
		ck "${h^^}: buffer_bytes_pooled, something kept" "$pooled" gt 0
		ck "${h^^}: buffer_bytes_pooled = pinned (no connection holds any)" "$pooled" eq "$pinned"
		ck "${h^^}: buffers_pool_full over the 32 connections" \
			"$(delta pool.pre pool.mid $h buffers_pool_full)" gt 0
		ck "${h^^}: buffer_bytes_charged with every connection gone" \
			"$(stat_of pool.mid $h buffer_bytes_charged)" eq 0
	done
	t_note "idle pools after 32 connections of 4 sizes closed: A $(stat_of pool.mid a buffer_bytes_pooled) B $(stat_of pool.mid b buffer_bytes_pooled) bytes (bound $pool_max); freed instead of pooled: A $(delta pool.pre pool.mid a buffers_pool_full) B $(delta pool.pre pool.mid b buffers_pool_full)"
	for k in "${!keys[@]}"; do
		[ "${saved_a[k]}" = missing ] || sysctl -qw "net.smr.${keys[k]}=${saved_a[k]}"
		[ "${saved_b[k]}" = missing ] || b_call sysctl "net.smr.${keys[k]}=${saved_b[k]}" >/dev/null
	done
	t_end
}

# unload_both WHEN: every stream of A's ended, then rmmod smr on A and on B
# (the case fails if either refuses); A's refcnt by then in unload_refs.
unload_refs=
unload_both() {
	local r
	pkill_streams
	r=$(rdma_wait_unref 10)
	t_diag "A: $1: $r"
	unload_refs=$(sed -n 's/.*refcnt=\([^ ]*\).*/\1/p' <<<"$r")
	r=$(rdma_rmmod)
	[[ $r == rc=0* ]] || t_fail "A: rmmod smr $1: $(tr '\n' ' ' <<<"$r") ($(rdma_wait_unref 0))"
	t_diag "B: $1: $(b_call unref 10)"
	r=$(b_call rmmod)
	[[ $r == rc=0* ]] || t_fail "B: rmmod smr $1: $(tr '\n' ' ' <<<"$r")"
}

# loss: B's rxe0 goes away under bulk transfers both ways.
case_loss() {
	local pid r t0 ok_n fb f line
	t_begin loss
	rm -f "$work/loss.trigger"
	if serve loss -p 6121 -n "$loss_conns" -s 0 -F -X /tmp/rdma-b/loss.trigger \
		-W "$loss_window" -T 300; then
		client_bg_ready loss 120 "the bulk transfers did not reach 256 KiB each way" \
			-a "$peer" -p 6121 -n "$loss_conns" -s 0 -F -X "$work/loss.trigger" \
			-W "$loss_window" -T 300
		pid=$bg_pid
		# the clock starts before the deletion: its own time counts
		: >"$work/loss.trigger"
		t0=$(date +%s%N)
		b_call trigger loss >/dev/null
		r=$(b_call rxe_del)
		t_diag "B: rdma link delete rxe0 took $((($(date +%s%N) - t0) / 1000000)) ms: $(tr '\n' ' ' <<<"$r")"
		[[ $r == rc=0* ]] || t_fail "B: rdma link delete rxe0 failed: $r"
		client_bg_wait "$pid" loss
		server_result loss 60
		ok_n=$(summary_field loss client ok)
		ck "A: SMR sockets that failed cleanly within $loss_window s of the link loss" \
			"${ok_n:-none}" eq "$loss_conns"
		# (no process substitution: the guests' /dev has no /dev/fd)
		f=$(awk '/^conn / && / ok=0 / {
			for (i = 1; i <= NF; i++) if ($i ~ /^(idx|err|at|fail_ms|tx|rx|why)=/) printf "%s ", $i
			print "" }' "$work/loss.client" | head -n 10)
		while IFS= read -r line; do
			[ -z "$line" ] || t_fail "A: $line"
		done <<<"$f"
		t_diag "A: how each connection ended (err, where, ms after the trigger):"
		awk '/^conn / { for (i = 1; i <= NF; i++) if ($i ~ /^(idx|mode_start|err|at|fail_ms|tx|rx|rx_bad)=/) printf "%s ", $i; print "" }' \
			"$work/loss.client" >>"$out/diag-$t_id.txt"
		t_diag "B (not asserted): $(grep '^summary' "$work/loss.server")"
		awk '/^conn / { for (i = 1; i <= NF; i++) if ($i ~ /^(idx|err|at|fail_ms|why)=/) printf "%s ", $i; print "" }' \
			"$work/loss.server" | sed 's/^/  B: /' >>"$out/diag-$t_id.txt"
		t_note "A: $ok_n/$loss_conns failed cleanly, fail_ms $(awk '/^conn / { for (i = 1; i <= NF; i++) if ($i ~ /^fail_ms=/) printf "%s ", substr($i, 9) }' "$work/loss.client")"
	fi
	b_call stop loss >/dev/null

	# B has no RDMA device now: a new connection still works, over TCP
	if serve fallback -p 6122 -n 1 -s 1048576 -M tcp -T 120; then
		client fallback -a "$peer" -p 6122 -n 1 -s 1048576 -M tcp -T 120
		server_result fallback 60
		pair_check fallback 1 1048576
		fb=$(awk '/^conn / { for (i = 1; i <= NF; i++) if ($i ~ /^(mode|reason|peer_reason)=/) printf "%s ", $i }' \
			"$work/fallback.client")
		t_note "new connection without B's rxe0: $fb"
	fi

	# nothing left open: both modules unload, nothing of smr stays
	unload_both "after the link loss"
	r=$(rdma_smr_res)
	if [ -n "$r" ]; then
		t_fail "A: rdma resources of smr left after rmmod: $(head -n 5 <<<"$r" | tr '\n' ';')"
	else
		t_diag "ok: A: no rdma res qp/mr/pd/cq/cm_id of smr after rmmod"
	fi
	# back for the next case: B's rxe0 and both modules
	r=$(b_call rxe_add)
	[ "$r" = ok ] || t_fail "B: could not re-create rxe0: $r"
	r=$(rdma_insmod)
	[[ $r == rc=0* ]] || t_fail "A: insmod smr again: $r"
	r=$(b_call insmod)
	[[ $r == rc=0* ]] || t_fail "B: insmod smr again: $r"
	t_end
}

# rmmod: refused with a socket open, the socket still works, then
# accepted once it is closed; nothing of smr stays behind.
case_rmmod() {
	local pid r k
	t_begin rmmod
	rm -f "$work/rm.release"
	if serve rmmod -p 6131 -n 1 -s 2097152 -T 240; then
		client_bg_ready rmmod 90 "the connection did not move its first 1 MiB each way" \
			-a "$peer" -p 6131 -n 1 -s 2097152 -h 1048576 -H "$work/rm.release" -T 240
		pid=$bg_pid
		r=$(rdma_rmmod)
		t_diag "A: rmmod smr with a socket open: $(tr '\n' ' ' <<<"$r")"
		if [[ $r == rc=0* ]]; then
			t_fail "A: rmmod smr succeeded with an SMR socket open"
		elif [ ! -d /sys/module/smr ]; then
			t_fail "A: rmmod failed, but the module is gone"
		fi
		r=$(b_call rmmod)
		t_diag "B: rmmod smr with a socket open: $(tr '\n' ' ' <<<"$r")"
		[[ $r != rc=0* ]] || t_fail "B: rmmod smr succeeded with an SMR socket open"
		# the socket still works: the second MiB each way, then EOF
		: >"$work/rm.release"
		client_bg_wait "$pid" rmmod
		server_result rmmod 60
		pair_check rmmod 1 2097152
	fi
	unload_both "after the last close"
	ck "A: module refcnt within 10 s of the last close" "$unload_refs" eq 0
	r=$(rdma_smr_res)
	[ -z "$r" ] || t_fail "A: rdma resources of smr after rmmod: $(head -n 5 <<<"$r" | tr '\n' ';')"
	r=$(b_call smr_res)
	[ -z "$r" ] || t_fail "B: rdma resources of smr after rmmod: $(head -n 5 <<<"$r" | tr '\n' ';')"
	for k in qp mr pd cq cm_id; do
		rdma_res "$k" | sed "s/^/A $k: /" >>"$out/diag-$t_id.txt"
	done
	r=$(rdma_kmemleak)
	case $r in
	none) t_note "kmemleak: not available in this kernel (/sys/kernel/debug/kmemleak missing), not checked" ;;
	clean) t_note "kmemleak: no smr leak on A" ;;
	*) t_fail "A: kmemleak reports smr leaks"; t_diag "$r" ;;
	esac
	r=$(b_call kmemleak)
	case $r in
	none | clean) ;;
	*) t_fail "B: kmemleak reports smr leaks"; t_diag "$r" ;;
	esac
	t_end
}

