# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2154 # guests.sh and bed.sh set peer, work, out, bg_pid
#
# The attack suite's cases (selftests/attack_test.sh; sourced by the build
# host for the list, on host A for the case_ID functions and on host B for
# its b_VERB requests: selftests/lib/guests.sh): hostile parties against
# SMR's RDMA links (issue 10). B is the victim; the attacker is an
# unprivileged process on A (uid 65534) with librdmacm, which anyone may
# use: the rdma_cm device node is world-writable. Documentation/
# protocol.rst, "The RDMA link", says what a link needs: a grant over an SMR
# handshake, proven in the rdma_cm private data.

# shellcheck disable=SC2034 # read by selftests/lib/guests.sh
suite_tests=(
	"flood|an unprivileged rdma_cm client on A floods B's link listener (cm_port 7609), up to 2000 requests in 15 s each with no private data, with SMR's old version 2 private data and with version 3 carrying forged secrets, while legitimate connections from A to B run: every request is rejected (0 accepted, B's links_refused grows by the attempts), B builds no link and no QP, B's MemAvailable and Slab stay bounded, and every legitimate connection runs in mode rdma, intact"
	"grant|a first connection between two hosts with no link: the client asks B to grant the new link's secret over the handshake (B's links_granted +1), the link comes up (links_created +1 both sides) and the connection runs in mode rdma, intact; a second connection reuses the link without a new grant"
	"idle|links that never carry a connection idle out: B drops RoCE packets for 2 s while A's first connection sets its link up, so the connection falls back to TCP (handshake_timeout_ms 1000 on A) and rdma_cm's retried request brings the link up afterwards, unused on both hosts; with net.smr.link_idle_timeout_ms 2000 both hosts' links are gone within 15 s (both times the bed's time scale on a slow kernel)"
	"idle_peer|a peer that breaks the idle agreement (B's test module: test_link_idle_peer) cannot keep an unused link on A, nor fail it unseen: one that never answers A's asking fails the link within 10 s of the question (links_failed, said why); one that asks twice fails it at once (said why); one that always says no keeps it at most four of A's handshake timeouts and 10 s (then it goes, links_idle_expired, not a failure); one without the IDLE_ASK flag (an older module) is never asked and the link idles out as before; each time no link is left on either host"
	"credits_withheld|a peer that re-posts its receives but never gives the credits back (B's test module: test_link_idle_peer 5): A's connection writing 16 MiB in pieces of up to 64 bytes spends A's credits down to the one kept for a credit message, or none (A's links show CREDITS 1 or 0), and its bytes stop, as a zero window stops TCP; A's application is killed with its bytes unsent: A cannot send its final, so net.smr.orphan_timeout_ms (3000) resets the connection and its second period fails the link (or, had the final left with the last credit, the unused link cannot ask whether it may go and fails after the answer deadline): within 30 s no connection and no link is left on either host, A's links_failed +1 and orphans_expired +1, A said why"
	"setup_fail|a link whose setup fails once its QP and receives exist leaves nothing behind and frees nothing twice (the test module's fault_link_accept on B: the passive accept fails as if rdma_accept() had; fault_link_recv on B, then on A: posting the receives fails halfway): 8 links each way, every connection falls back to TCP intact, the faulted host counts each in links_failed, no link or smr QP is left on either host, and a following connection runs in mode rdma on a new link"
	"mixed_version|B negotiates as a module that predates LINK_REQUEST (test module's fault_answer_old): its SYN-ACK answer lacks the LINK_REQUEST flag, so A's 8 connections to it fall back to TCP intact, A's reason version_mismatch (A counts each in handshakes_declined), none reset, and A builds no link; then B answers as this module again and a connection runs in mode rdma"
	"link_share|net.smr.links_max 8 on both hosts. (a) A user's share: uid 65534 on A connects to B from 3 of A's source addresses (192.0.2.31-33), each connection held open: 2 links of its own (a quarter of 8), the third connection gets none and falls back to TCP intact, its SMR_INFO reason link_failure, A's links_user_limit +1, A's links show UID 65534 twice; root's connection from a 4th address then runs in mode rdma, intact, on a new link (A's links_created +1). (b) The peers' share: root on A connects from 5 source addresses (192.0.2.31-35), held: B builds 4 passive links (half of 8), the 5th connection falls back to TCP intact (A's reason peer_declined, peer_reason link_failure), B's links_refused_share +1; then B's own connection to A runs in mode rdma, intact, on a new link of B's"
	"grant_evict|a host that asks for grants and never connects cannot keep other peers' new links out: A's test module (fault_link_grant_unused) makes its next 64 links fail right after B granted them, never connecting rdma_cm, so B keeps each grant until it expires; from 16 of A's addresses (192.0.2.41-56) 4 connections each, in turn per address and the addresses at once, fill B's 64 grants (each falls back to TCP intact, B's links_granted +64); then a connection from a 17th address (192.0.2.57) without the fault runs in mode rdma, intact, on a new link: B evicted its oldest grant for it (links_grants_evicted +1, links_granted +1, links_created +1), all within the grants' lifetime (10 s, doubled for the grant cases: grant_scale)"
	"grant_victim|which grant a full table gives up: a connection from an 18th address (192.0.2.58) whose rdma_cm request comes late (A's fault_link_grant_late: only once the case releases it, after the rest, as when the first request was lost) holds the table's oldest grant; 15 addresses then make 4 unused grants each (fault_link_grant_unused), a second later a 16th makes 3 (the table is full, 64), and a 17th address's connection needs one more: B gives up the oldest grant of a peer holding the most (4), not the late client's single one, so its late request still proves its grant and its connection runs in mode rdma, intact (B: links_grants_evicted +1, links_refused +0)"
	"attach_dead|a server whose PROPOSAL names a link that goes down before the connection attaches (the test module's fault_link_find on B: the link is taken down and its teardown finishes between lookup and attach, as an idle expiry may) does not use it: 8 connections, each falls back to TCP intact (B counts each in links_attach_dead), no link or smr QP is left on either host, and a following connection runs in mode rdma on a new link"
	"stale_key|a peer that keeps RDMA-WRITEing under the key of a connection it closed (A's test module: test_link_stale_write_ms, 1 KiB WRITEs one after another) while B pools that connection's RMB and gives it to the next connection: its WRITEs land while the RMB is pooled and none is refused, the first one after B re-registered the RMB (both buffers of the next connection from the pool: no allocation, one registration, no new mapping: test_buf_maps; or the refusal, right after the old key's invalidation, flushes the registration that follows it: counted as failed, the RMB freed, the send buffer never taken) is refused (B's link fails: links_failed +1; A's WRITE ends in remote access error, or flushed when B's disconnect came first), that link goes down, B stays up with no splat, and a fresh connection then runs in mode rdma, intact, on a new link; ${SMR_STALE_KEY_ROUNDS:-3} rounds"
)

# the flood: requests per mode, seconds per mode, modes
attack_count=2000
attack_seconds=15
attack_modes="none v2 v3"
# legitimate rounds during the flood: connections, bytes each way
attack_conns=4
attack_bytes=1048576
# what the flood may cost B while it lasts (kB): a link is ~300 kB, 2000
# of them ~600000 kB
attack_mem_kb=65536
attack_slab_kb=32768

# --- both hosts ---------------------------------------------------------------

# attack_time_scale: on a slow kernel (SMR_TEST_TIME_SCALE > 1: the debug
# kernel) every look at the other host over the control service takes
# seconds, so an unused link idles out between two steps of a case and a
# link's setup deadline runs out before the case's own. Each host stretches
# its link_idle_timeout_ms and the test module's link deadlines
# (test_time_scale) by the bed's scale; cases that set their own idle
# timeout scale it too. At scale 1 nothing changes.
attack_time_scale() {
	local idle r
	[ "$bed_time_scale" -gt 1 ] || return 0
	idle=$(sysctl -n net.smr.link_idle_timeout_ms) || return 1
	sysctl -qw net.smr.link_idle_timeout_ms="$((idle * bed_time_scale))" || return 1
	r=$(fault_param test_time_scale "$bed_time_scale")
	[ "$r" = "$bed_time_scale" ] || { log "test_time_scale: $r"; return 1; }
}

suite_a_setup() {
	attack_time_scale
}

suite_b_setup() {
	attack_time_scale || { echo "attack_time_scale failed on B" >"$out/fatal"; return 1; }
}

# --- host B --------------------------------------------------------------------

# meminfo: B's MemAvailable and Slab in kB, "avail slab".
b_meminfo() {
	meminfo_now
}

b_links_count() {
	rdma_links | rdma_links_count -
}

# roce_drop on|off: drop every RoCE v2 packet B receives (UDP 4791: the
# link's connect request and everything on its QP), as faults' partition.
b_roce_drop() {
	nft delete table inet smr_attack 2>/dev/null
	if [ "$1" = on ]; then
		nft -f - <<'NFT'
table inet smr_attack {
	chain in { type filter hook input priority 0; udp dport 4791 drop; }
}
NFT
	fi
	echo ok
}

# fault NAME [N]: the test module's parameter NAME (fault_*) set to N if
# given, then read back.
b_fault() {
	fault_param "$@"
}

# client NAME ARGS...: an smr_stream client on B (to host A), its output
# and "rc=N" last.
b_client() {
	local name=$1
	shift
	"${bed_server[@]}" client "$@" >"$work/$name.client" 2>"$work/$name.client.err"
	echo "rc=$?" >>"$work/$name.client"
	cat "$work/$name.client"
}

# --- both hosts ----------------------------------------------------------------

fault_param() {
	local f=/sys/module/smr/parameters/$1
	[[ $1 =~ ^(fault|test)_[a-z_]+$ ]] || { echo "bad name"; return; }
	[ -e "$f" ] || { echo "missing $1 (not the test module?)"; return; }
	if [ -n "${2:-}" ] && ! echo "$2" 2>/dev/null >"$f"; then
		echo "writing $2 to $1 failed"
		return
	fi
	cat "$f"
}

# meminfo_now: "MemAvailable Slab" in kB.
meminfo_now() {
	awk '$1 == "MemAvailable:" { a = $2 } $1 == "Slab:" { s = $2 }
		END { print a + 0, s + 0 }' /proc/meminfo
}

# --- host A --------------------------------------------------------------------

no_links_a() {
	[ "$(rdma_links | rdma_links_count -)" = 0 ]
}

no_links_b() {
	[ "$(b_call links_count)" = 0 ]
}

active_link_a() {
	[ "$(rdma_links | rdma_links_count - active)" -ge 1 ]
}

# links_gone: no link left on either host (the idle timeout ran).
links_gone() {
	no_links_a && no_links_b
}

# legit_round NAME: one round of legitimate connections A -> B, checked.
legit_round() {
	serve "$1" -p "$2" -n "$attack_conns" -s "$attack_bytes" -T 300 || return 1
	client "$1" -a "$peer" -p "$2" -n "$attack_conns" -s "$attack_bytes" -T 300
	server_result "$1" 120
	pair_check "$1" "$attack_conns" "$attack_bytes"
}

# flood_dir: where the unprivileged attacker may write.
flood_dir() {
	mkdir -p "$work/nobody"
	chmod 777 "$work/nobody"
	echo "$work/nobody"
}

case_flood() {
	local mode dir pid round n sum att acc rej pre_l pre_q mid_l mid_q
	local m0 s0 m1 s1 m2 s2 refused port=6200 figures=()
	t_begin flood
	dir=$(flood_dir)
	t_diag "the device node anyone may open: $(ls -l /dev/infiniband/rdma_cm 2>&1)"
	# the legitimate link first: the flood must not stall it either
	legit_round attack0 6150
	for mode in $attack_modes; do
		snap "flood.$mode.pre"
		read -r m0 s0 <<<"$(b_call meminfo)"
		rm -f "$dir/$mode.ready" "$dir/$mode.go"
		(
			setpriv --reuid=65534 --regid=65534 --clear-groups \
				"${RDMA_STREAM%/*}/smr_cm_flood" -a "$peer" -m "$mode" \
				-n "$attack_count" -T "$attack_seconds" \
				-R "$dir/$mode.ready" -H 120 -X "$dir/$mode.go" \
				>"$work/flood.$mode.out" 2>&1
			echo "rc=$?" >>"$work/flood.$mode.out"
		) &
		pid=$!
		# legitimate rounds for as long as the flood lasts (one at least)
		round=0
		while :; do
			round=$((round + 1))
			port=$((port + 1))
			legit_round "legit.$mode.$round" "$port"
			[ -e "$dir/$mode.ready" ] && break
			kill -0 "$pid" 2>/dev/null || break
			[ "$round" -lt 20 ] || break
		done
		rdma_wait_file "$dir/$mode.ready" 120 "$pid" ||
			t_fail "$mode: the flood did not end within 120 s"
		# what the flood left while its accepted connections are held
		snap "flood.$mode.mid"
		read -r m1 s1 <<<"$(b_call meminfo)"
		: >"$dir/$mode.go"
		wait "$pid"
		cp "$work/flood.$mode.out" "$out/conns/"
		sleep 2
		snap "flood.$mode.post"
		read -r m2 s2 <<<"$(b_call meminfo)"
		sum=$(grep '^summary' "$work/flood.$mode.out")
		t_diag "$mode: $sum"
		t_diag "$mode: $(grep -v '^summary' "$work/flood.$mode.out" | tr '\n' ' ')"
		att=$(sed -n 's/.* attempts=\([0-9]*\).*/\1/p' <<<"$sum")
		acc=$(sed -n 's/.* accepted=\([0-9]*\).*/\1/p' <<<"$sum")
		rej=$(sed -n 's/.* rejected=\([0-9]*\).*/\1/p' <<<"$sum")
		ck "$mode: requests the attacker made" "${att:-0}" ge 100
		ck "$mode: requests B accepted" "$acc" eq 0
		ck "$mode: requests B rejected" "$rej" eq "$att"
		refused=$(delta "flood.$mode.pre" "flood.$mode.mid" b links_refused)
		ck "$mode: B's links_refused over the flood" "$refused" eq "$att"
		pre_l=$(rdma_links_count "$work/flood.$mode.pre.b.links")
		mid_l=$(rdma_links_count "$work/flood.$mode.mid.b.links")
		pre_q=$(rdma_res_count "$work/flood.$mode.pre.b.qp" smr)
		mid_q=$(rdma_res_count "$work/flood.$mode.mid.b.qp" smr)
		ck "$mode: B's links during the flood (before: $pre_l)" "$mid_l" le "$pre_l"
		ck "$mode: B's smr QPs during the flood (before: $pre_q)" "$mid_q" le "$pre_q"
		ck "$mode: B's MemAvailable drop (kB) while the flood held what it got" \
			"$((m0 - m1))" lt "$attack_mem_kb"
		ck "$mode: B's Slab growth (kB) while the flood held what it got" \
			"$((s1 - s0))" lt "$attack_slab_kb"
		t_file "$mode: B's links while the flood held what it got" "$work/flood.$mode.mid.b.links"
		figures+=("$mode: ${att:-?} requests ${acc:-?} accepted ${rej:-?} rejected, B refused +$refused, links $pre_l->$mid_l, smr QPs $pre_q->$mid_q, MemAvailable kB $m0/$m1/$m2 Slab kB $s0/$s1/$s2 (before/during/after), $round legit rounds")
	done
	for n in "${figures[@]}"; do
		t_note "$n"
	done
	t_end
}

# fault_on HOST NAME [N]: fault_param on host a or b.
fault_on() {
	local host=$1
	shift
	if [ "$host" = a ]; then fault_param "$@"; else b_call fault "$@"; fi
}

# The grant cases race the grants' lifetime (10 s), filling B's table
# faster than its grants expire: a slower host (seen: a full make check
# 1.5 times as long as on another machine) took 10.1 s where 8 s was the
# limit. They run with lifetimes twice the bed's scale, the proportions the
# same.
grant_scale=$((2 * bed_time_scale))

# grant_time SCALE: on both hosts, link setup deadlines and grant
# lifetimes SCALE times as long (the test module's test_time_scale: a case
# racing them keeps its proportions on a slow kernel), and B's grant table
# empty (grants outlive the case that made them).
grant_time() {
	ck "A: test_time_scale" "$(fault_on a test_time_scale "$1")" eq "$1"
	ck "B: test_time_scale" "$(fault_on b test_time_scale "$1")" eq "$1"
	ck "B: grant table emptied" "$(fault_on b test_link_grants 0)" eq 0
}

# links_idle_soon: both hosts' idle timeout 1 s, and the links already idle
# re-armed at it (test_link_idle_rearm): an expiry armed under the bed's
# scaled timeout (8 min on the debug kernel) is not waited out.
links_idle_soon() {
	local r
	sysctl -qw net.smr.link_idle_timeout_ms=1000
	b_call sysctl net.smr.link_idle_timeout_ms=1000 >/dev/null
	r=$(fault_on a test_link_idle_rearm 1)
	[[ $r =~ ^[0-9]+$ ]] || t_fail "A's test_link_idle_rearm: $r"
	r=$(fault_on b test_link_idle_rearm 1)
	[[ $r =~ ^[0-9]+$ ]] || t_fail "B's test_link_idle_rearm: $r"
}

# links_cleared: earlier cases' links idle out soon and are gone, so the
# case starts with none.
links_cleared() {
	links_idle_soon
	wait_until 60 links_gone || t_fail "links did not idle out before the case"
}

# links_reset: no link between the two hosts (both idle out theirs). The
# re-arm arms every unused link, so this does not show that a link's last
# user leaving arms its expiry: the rdma suite (links_idle_out) does.
links_reset() {
	local saved
	saved=$(sysctl -n net.smr.link_idle_timeout_ms)
	links_idle_soon
	wait_until 60 links_gone || t_fail "links did not idle out: A $(rdma_links | tr '\n' ' ') B $(b_call links | tr '\n' ' ')"
	sysctl -qw net.smr.link_idle_timeout_ms="$saved"
	b_call sysctl net.smr.link_idle_timeout_ms="$saved" >/dev/null
}

# fallback_round NAME PORT WANT: one connection A -> B that must fall back
# to TCP intact; its reason on A must be one of WANT (words).
fallback_round() {
	local reason
	serve "$1" -p "$2" -n 1 -s 65536 -M tcp -T 120 || return 1
	client "$1" -a "$peer" -p "$2" -n 1 -s 65536 -M tcp -T 120
	server_result "$1" 60
	pair_check "$1" 1 65536
	reason=$(grep '^conn ' "$work/$1.client" | grep -o ' reason=[^ ]*' | head -n 1)
	ck "$1: A's fallback reason" "${reason# reason=}" in "$3"
}

# after_round NAME PORT: after a case's faults, one connection A -> B on
# a new link runs in mode rdma, intact (pair_check), the link up on both
# hosts (links_created +1 each); after_note says so.
after_round() {
	local ca cb
	snap "$1.pre"
	serve "$1" -p "$2" -n 1 -s 1048576 -T 120 || return 1
	client "$1" -a "$peer" -p "$2" -n 1 -s 1048576 -T 120
	server_result "$1" 60
	pair_check "$1" 1 1048576
	snap "$1.post"
	ca=$(delta "$1.pre" "$1.post" a links_created)
	cb=$(delta "$1.pre" "$1.post" b links_created)
	ck "$1: A's links_created" "$ca" eq 1
	ck "$1: B's links_created" "$cb" eq 1
	after_note="mode rdma intact, links_created A +$ca B +$cb"
}

# grant_round NAME PORT PRE POST WHAT N: one connection A -> B, intact,
# then snapshot POST: B granted N links over it and both hosts made N.
grant_round() {
	serve "$1" -p "$2" -n 1 -s 1048576 -T 120 || return 1
	client "$1" -a "$peer" -p "$2" -n 1 -s 1048576 -T 120
	server_result "$1" 60
	pair_check "$1" 1 1048576
	snap "$4"
	ck "B: links_granted over $5" "$(delta "$3" "$4" b links_granted)" eq "$6"
	ck "A: links_created over $5" "$(delta "$3" "$4" a links_created)" eq "$6"
	ck "B: links_created over $5" "$(delta "$3" "$4" b links_created)" eq "$6"
}

case_grant() {
	t_begin grant
	# no link between the two hosts to begin with
	links_reset
	snap grant.pre
	grant_round grant1 6170 grant.pre grant.mid "the first connection" 1 || { t_end; return; }
	ck "B: links_refused over the first connection" "$(delta grant.pre grant.mid b links_refused)" eq 0
	ck "A: handshakes_declined" "$(delta grant.pre grant.mid a handshakes_declined)" eq 0
	grant_round grant2 6171 grant.mid grant.post "the second connection" 0 || { t_end; return; }
	t_file "A's links" "$work/grant.post.a.links"
	t_file "B's links" "$work/grant.post.b.links"
	t_end
}

# idle_links_created: the idle case's link came up on both hosts (it may
# be gone again); leaves the snap idle.up.
idle_links_created() {
	snap idle.up
	[ "$(delta idle.pre idle.up a links_created)" -ge 1 ] &&
		[ "$(delta idle.pre idle.up b links_created)" -ge 1 ]
}

# idle_peer_round MODE NAME PORT A_IDLE_MS B_IDLE_MS: B's
# test_link_idle_peer MODE; one connection A -> B in mode rdma makes the
# link and leaves it unused; idle timeouts A_IDLE_MS and B_IDLE_MS; then
# until no link is left on either host (60 s times the bed's time scale,
# as the kernel's answer deadline: test_time_scale). Sets idle_peer_t: the
# seconds that took, or "timeout".
idle_peer_t=
idle_peer_round() {
	local mode=$1 name=$2 port=$3 t0 r
	idle_peer_t=none
	r=$(fault_on b test_link_idle_peer "$mode")
	[ "$r" = "$mode" ] || { t_fail "B's test_link_idle_peer: $r"; return; }
	sysctl -qw net.smr.link_idle_timeout_ms="$4"
	b_call sysctl net.smr.link_idle_timeout_ms="$5" >/dev/null
	serve "$name" -p "$port" -n 1 -s 65536 -M rdma -T 60 || return
	client "$name" -a "$peer" -p "$port" -n 1 -s 65536 -M rdma -T 60
	server_result "$name" 60
	[ "$(summary_field "$name" client ok)" = 1 ] ||
		t_fail "$name: the connection that made the link: $(grep '^conn' "$work/$name.client" | cut -c1-200)"
	t0=$SECONDS
	if wait_until 60 links_gone; then
		idle_peer_t=$((SECONDS - t0))
	else
		idle_peer_t=timeout
	fi
	fault_on b test_link_idle_peer 0 >/dev/null
}

# idle_peer_said PATTERN: A's kernel lines since the case began that match.
idle_peer_said() {
	rdma_kmsg "smr-test: case $t_id" | grep -c "$1"
}

case_idle_peer() {
	local saved_idle saved_hs t t1 t2 t3 t4
	t_begin idle_peer
	saved_idle=$(sysctl -n net.smr.link_idle_timeout_ms)
	saved_hs=$(sysctl -n net.smr.handshake_timeout_ms)
	links_cleared

	# A asks after 1 s, B never answers: A's 10 s deadline
	snap ip1.pre
	idle_peer_round 1 ip1 6190 1000 600000
	t=$idle_peer_t t1=$idle_peer_t
	snap ip1.post
	ck "never answered: seconds until no link is left (1 s idle, 10 s deadline)" "$t" le "$(tscale 20)"
	ck "never answered: A's links_failed" "$(delta ip1.pre ip1.post a links_failed)" eq 1
	ck "never answered: A said why" "$(idle_peer_said 'peer did not answer whether the idle link may go')" eq 1

	# B asks after 1 s, twice
	snap ip2.pre
	idle_peer_round 2 ip2 6191 600000 1000
	t=$idle_peer_t t2=$idle_peer_t
	snap ip2.post
	ck "asked twice: seconds until no link is left" "$t" le 10
	ck "asked twice: A's links_failed" "$(delta ip2.pre ip2.post a links_failed)" eq 1
	ck "asked twice: A said why" "$(idle_peer_said 'peer asked whether the idle link may go twice')" eq 1

	# A asks every 1 s, B always says no: at most 4 x 1 s + 10 s after the first no
	sysctl -qw net.smr.handshake_timeout_ms=1000
	snap ip3.pre
	idle_peer_round 3 ip3 6192 1000 600000
	t=$idle_peer_t t3=$idle_peer_t
	snap ip3.post
	sysctl -qw net.smr.handshake_timeout_ms="$saved_hs"
	ck "always no: seconds until no link is left (1 s idle, 4 x 1 s + 10 s scaled)" "$t" le "$((15 + $(tscale 10)))"
	ck "always no: B's no's" "$(delta ip3.pre ip3.post b links_idle_kept)" ge 2
	ck "always no: A's links_idle_expired" "$(delta ip3.pre ip3.post a links_idle_expired)" eq 1
	ck "always no: A's links_failed" "$(delta ip3.pre ip3.post a links_failed)" eq 0
	ck "always no: A said why" "$(idle_peer_said 'the peer kept it idle')" eq 1

	# B without the flag: A never asks, its link goes alone after 1 s
	snap ip4.pre
	idle_peer_round 4 ip4 6193 1000 600000
	t=$idle_peer_t t4=$idle_peer_t
	snap ip4.post
	ck "no flag: seconds until no link is left (1 s idle)" "$t" le 10
	ck "no flag: B asked nothing, so answered nothing" "$(delta ip4.pre ip4.post b links_idle_kept)" eq 0
	ck "no flag: A's links_idle_expired (it went alone)" "$(delta ip4.pre ip4.post a links_idle_expired)" eq 0
	ck "no flag: links_failed on A" "$(delta ip4.pre ip4.post a links_failed)" eq 0

	sysctl -qw net.smr.link_idle_timeout_ms="$saved_idle"
	b_call sysctl net.smr.link_idle_timeout_ms="$saved_idle" >/dev/null
	t_note "a peer breaking the idle agreement, A's idle timeout 1 s (B's when B asks): never answering, no link left after $t1 s (A's 10 s deadline, links_failed); asking twice, $t2 s (links_failed); always saying no ($(delta ip3.pre ip3.post b links_idle_kept) no's), $t3 s (4 x 1 s handshake timeout + 10 s, links_idle_expired, no failure); without the IDLE_ASK flag, $t4 s (alone, as before)"
	t_end
}

# conns_none: no SMR connection on either host.
conns_none() {
	[ "$(rdma_conns_count)" = 0 ] && b_conns_none
}

# a_credits_spent: A's active link to B has no credit left to spare.
a_credits_spent() {
	rdma_links | awk 'NR > 1 && $3 == "active" && $8 <= 1 { f = 1 } END { exit !f }'
}

# credits_withheld_restore SAVED_ORPHAN SAVED_IDLE: B gives credits back
# again (what it kept is still owed: a link left alive recovers), the
# sysctls as they were, B's server gone.
credits_withheld_restore() {
	fault_on b test_link_idle_peer 0 >/dev/null
	sysctl -qw net.smr.orphan_timeout_ms="$1"
	sysctl -qw net.smr.link_idle_timeout_ms="$2"
	b_call sysctl net.smr.link_idle_timeout_ms="$2" >/dev/null
	b_call stop cw >/dev/null
}

case_credits_withheld() {
	local saved_orphan saved_idle r pid t0 t=timeout links why
	t_begin credits_withheld
	saved_orphan=$(sysctl -n net.smr.orphan_timeout_ms)
	saved_idle=$(sysctl -n net.smr.link_idle_timeout_ms)
	links_cleared
	snap cw.pre
	r=$(fault_on b test_link_idle_peer 5)
	[ "$r" = 5 ] || t_fail "B's test_link_idle_peer: $r"
	# the orphan bound is the kernel's, not scaled; links stay while used
	sysctl -qw net.smr.orphan_timeout_ms=3000
	if [ "$r" != 5 ] || ! serve cw -p 6194 -n 1 -s 16777216 -M rdma -T 120; then
		credits_withheld_restore "$saved_orphan" "$saved_idle"
		t_end
		return
	fi
	client_bg cw -a "$peer" -p 6194 -n 1 -s 16777216 -m 64 -M rdma -T 120
	pid=$bg_pid
	wait_until 60 a_credits_spent ||
		t_fail "A's link kept credits: $(rdma_links | tr '\n' ' ')"
	links=$(rdma_links | awk 'NR > 1 { printf "%s ", $0 }')
	ck "A's connection stalled: the client still runs" "$(kill -0 "$pid" 2>/dev/null && echo yes)" eq yes
	# A's application goes with its bytes unsent (bg_pid is its shell)
	pkill -KILL -P "$pid" smr_stream 2>/dev/null
	wait "$pid" 2>/dev/null
	client_keep cw
	t0=$SECONDS
	if wait_bound 30 no_links_a; then
		t=$((SECONDS - t0))
	else
		t_fail "A: a link still there 30 s after the close: $(rdma_links | tr '\n' ' ') conns: $(head -n 3 /proc/net/smr/conns | tr '\n' ' ')"
	fi
	wait_until 60 links_gone || t_fail "B: a link still there: $(b_call links | tr '\n' ' ')"
	wait_until 60 conns_none || t_fail "connections left: A $(rdma_conns_count), B $(b_call conns_count)"
	snap cw.post
	credits_withheld_restore "$saved_orphan" "$saved_idle"
	why=$(rdma_kmsg "smr-test: case $t_id" | grep -o "orphan's final CDC cannot leave\|no credit to ask whether the idle link may go" | head -n 1)
	ck "A: links_failed" "$(delta cw.pre cw.post a links_failed)" eq 1
	ck "A: orphans_expired" "$(delta cw.pre cw.post a orphans_expired)" eq 1
	ck "A said why (the orphan's final, or no credit to ask)" "${why:+yes}" eq yes
	t_note "B withholding credits: A's link before the kill: $links; the link gone ${t} s after A's application was killed (orphan_timeout_ms 3000, twice): ${why:-no reason logged}"
	t_end
}

# idle: a link comes up after the connection that asked for it gave up on
# it (B dropped RoCE while rdma_cm connected; rdma_cm retries the request
# once the drop ends), so neither host ever has a connection on it; both
# must still let it go after link_idle_timeout_ms.
case_idle() {
	local saved_hs saved_idle pid t0 t_up t_gone created_a created_b r
	t_begin idle
	saved_hs=$(sysctl -n net.smr.handshake_timeout_ms)
	saved_idle=$(sysctl -n net.smr.link_idle_timeout_ms)
	links_idle_soon
	wait_until 60 links_gone || t_fail "links did not idle out before the case: A $(rdma_links | tr '\n' ' ') B $(b_call links | tr '\n' ' ')"
	sysctl -qw net.smr.link_idle_timeout_ms="$(tscale 2000)"
	b_call sysctl net.smr.link_idle_timeout_ms="$(tscale 2000)" >/dev/null
	snap idle.pre
	serve idle -p 6180 -n 1 -s 65536 -M any -T 120 || { t_end; return; }
	r=$(b_call roce_drop on)
	ck "B drops RoCE" "$r" eq ok
	sysctl -qw net.smr.handshake_timeout_ms=1000
	t0=$SECONDS
	client_bg idle -a "$peer" -p 6180 -n 1 -s 65536 -M any -T 120
	pid=$bg_pid
	sleep 2
	r=$(b_call roce_drop off)
	ck "B takes RoCE again" "$r" eq ok
	client_bg_wait "$pid" idle
	sysctl -qw net.smr.handshake_timeout_ms="$saved_hs"
	server_result idle 60
	ck "the connection: mode tcp (its link was not up in time)" \
		"$(grep -o ' mode=[^ ]*' "$work/idle.client" | head -n 1)" eq " mode=tcp"
	t_diag "the connection: $(grep '^conn' "$work/idle.client" | grep -o 'mode=[^ ]* reason=[^ ]*')"
	# rdma_cm retries the request after its response timeout (~4 s); the
	# unused link lives about one idle timeout: watch its counters, not
	# its list entries, which both ends may drop between two polls
	wait_until 30 idle_links_created ||
		t_fail "the link did not come up after the drop: A $(rdma_links | tr '\n' ' ') B $(b_call links | tr '\n' ' ')"
	t_up=$((SECONDS - t0))
	r=$(rdma_links_conns "$work/idle.up.a.links")
	ck "A: connections on the link (if still listed)" "${r:-0}" eq 0
	t_file "A's links once up" "$work/idle.up.a.links"
	t_file "B's links once up" "$work/idle.up.b.links"
	# the idle timeout is the bed's (2 s x scale): the bound scales with it
	t0=$SECONDS
	wait_until 15 links_gone
	t_gone=$((SECONDS - t0))
	ck "A's links $(tscale 15) s after a link came up that no connection used" \
		"$(rdma_links | rdma_links_count -)" eq 0
	ck "B's links $(tscale 15) s after a link came up that no connection used" \
		"$(b_call links_count)" eq 0
	snap idle.gone
	ck "A: links_created (the link came up after its connection left)" \
		"$(delta idle.pre idle.gone a links_created)" eq 1
	ck "B: links_created" "$(delta idle.pre idle.gone b links_created)" eq 1
	ck "B: handshakes completed (none used the link)" \
		"$(delta idle.pre idle.gone b handshakes_completed)" eq 0
	# gone by agreement (one end asked, the other said yes), not failed
	ck "links_idle_expired, A + B" \
		"$(($(delta idle.pre idle.gone a links_idle_expired) + $(delta idle.pre idle.gone b links_idle_expired)))" ge 1
	ck "A: links_failed" "$(delta idle.pre idle.gone a links_failed)" eq 0
	ck "B: links_failed" "$(delta idle.pre idle.gone b links_failed)" eq 0
	t_note "the connection fell back ($(grep -o 'reason=[^ ]*' "$work/idle.client" | head -n 1)), its link came up unused on both hosts ${t_up} s after the connect and was gone ${t_gone} s later (idle timeout $(tscale 2000) ms)"
	sysctl -qw net.smr.handshake_timeout_ms="$saved_hs"
	sysctl -qw net.smr.link_idle_timeout_ms="$saved_idle"
	b_call sysctl net.smr.link_idle_timeout_ms="$saved_idle" >/dev/null
	b_call roce_drop off >/dev/null
	t_end
}

# setup_fail: each of the test module's faults in a link's setup after its
# QP and receives exist, setup_fail_rounds times on fresh links.
setup_fail_rounds=8

case_setup_fail() {
	local spec what host param r i tag port=6300 failed figures=()
	t_begin setup_fail
	links_reset
	for spec in accept:b:fault_link_accept recv:b:fault_link_recv \
		    recv:a:fault_link_recv; do
		IFS=: read -r what host param <<<"$spec"
		tag=sf.$what.$host
		snap "$tag.pre"
		r=$(fault_on "$host" "$param" "$setup_fail_rounds")
		ck "$host: $param armed" "$r" eq "$setup_fail_rounds"
		for ((i = 1; i <= setup_fail_rounds; i++)); do
			port=$((port + 1))
			# A's link is refused (B's faults) or fails (A's)
			fallback_round "$tag.$i" "$port" "link_failure peer_declined" || break
		done
		ck "$host: $param once every round ran" "$(fault_on "$host" "$param")" eq 0
		wait_until 30 links_gone ||
			t_fail "$tag: links left: A $(rdma_links | tr '\n' ' ') B $(b_call links | tr '\n' ' ')"
		snap "$tag.post"
		failed=$(delta "$tag.pre" "$tag.post" "$host" links_failed)
		ck "$tag: $host's links_failed" "$failed" eq "$setup_fail_rounds"
		ck "$tag: B's links_created" "$(delta "$tag.pre" "$tag.post" b links_created)" eq 0
		ck "$tag: A's links_created" "$(delta "$tag.pre" "$tag.post" a links_created)" eq 0
		ck "$tag: A's smr QPs left" "$(rdma_res_count "$work/$tag.post.a.qp" smr)" eq 0
		ck "$tag: B's smr QPs left" "$(rdma_res_count "$work/$tag.post.b.qp" smr)" eq 0
		figures+=("$what on $host: $setup_fail_rounds of $setup_fail_rounds fell back, $host's links_failed +$failed")
	done
	# nothing the faults left stands in the way of the next link
	after_round sf.after 6390 && figures+=("then a fresh link: $after_note")
	for r in "${figures[@]}"; do
		t_note "$r"
	done
	t_end
}

# stale_key: a peer's WRITEs under the key of a closed connection's RMB.
# B reuses a pooled RMB under a new key (LOCAL_INV + REG_MR) and, since
# the RMB is mapped once for its life, rewrites nothing a WRITE under the
# old key could meet half done: on rxe, a mapping applies to the live MR
# at once, and the window that leaves is microseconds wide, so the case
# reads B's test_buf_maps (no mapping over a reuse) besides the refusal.
# SMR_STALE_KEY_ROUNDS: rounds (each on a fresh link: the refused WRITE
# takes the last one down).
stale_key_rounds=${SMR_STALE_KEY_ROUNDS:-3}
stale_key_ms=30000

# sk_writes ok|failed|status: the stale writer's WRITEs so far that
# completed, that failed, or the last failure's status.
sk_writes() {
	local f
	case $1 in
	ok) f=1 ;;
	failed) f=2 ;;
	*) f=3- ;;
	esac
	fault_on a test_link_stale_writes | cut -d' ' -f"$f"
}

sk_landed() {
	[ "$(sk_writes ok)" -gt "$sk_ok0" ]
}

sk_refused() {
	[ "$(sk_writes failed)" -gt "$sk_failed0" ]
}

sk_taken() {
	[ "$(fault_on a test_link_stale_write_ms)" = 0 ]
}

b_conns_none() {
	[ "$(b_call conns_count)" = 0 ]
}

case_stale_key() {
	local i tag landed=0 refused=0 notes=() ok failed fa fb idle maps0 maps reg_failed
	local status hold sk_ms
	t_begin stale_key
	if [ "$expect" = tcp ]; then
		t_note "no RMB in mode tcp: no key to go stale"
		t_end
		return
	fi
	# the link carries no connection between the two: it must not idle out
	idle=$(sysctl -n net.smr.link_idle_timeout_ms)
	hold=$((idle > 600000 ? idle : 600000))
	sysctl -qw net.smr.link_idle_timeout_ms="$hold"
	b_call sysctl net.smr.link_idle_timeout_ms="$hold" >/dev/null
	# the writer's time, within test_link_stale_write_ms's bound
	sk_ms=$(tscale "$stale_key_ms")
	((sk_ms <= 600000)) || sk_ms=600000
	for ((i = 1; i <= stale_key_rounds; i++)); do
		tag=sk.$i
		links_reset
		serve "$tag.first" -p 6731 -n 1 -s 65536 -T 120 || break
		serve "$tag.next" -p 6732 -n 1 -s 65536 -M any -T 120 || break
		sk_ok0=$(sk_writes ok)
		sk_failed0=$(sk_writes failed)
		ck "$tag: A's test_link_stale_write_ms armed" "$(fault_on a test_link_stale_write_ms "$sk_ms")" eq "$sk_ms"
		snap "$tag.pre"
		client "$tag.first" -a "$peer" -p 6731 -n 1 -s 65536 -T 120
		server_result "$tag.first" 60
		pair_check "$tag.first" 1 65536
		wait_until 10 sk_taken || t_fail "$tag: the writer did not take the closed connection's key"
		# B's side closed too: its RMB is in the link's pool
		wait_until 30 b_conns_none || t_fail "$tag: B still has connections"
		wait_until 10 sk_landed || t_fail "$tag: no stale WRITE completed"
		ck "$tag: stale WRITEs refused while B pooled the RMB" "$(sk_writes failed)" eq "$sk_failed0"
		snap_stats "$tag.pooled"
		maps0=$(b_call fault test_buf_maps)
		# the next connection takes the pooled RMB: new key, old one refused
		client "$tag.next" -a "$peer" -p 6732 -n 1 -s 65536 -M any -T 120
		wait_until 30 sk_refused || t_fail "$tag: no stale WRITE was refused"
		server_result "$tag.next" 60
		wait_until 30 links_gone || t_fail "$tag: links left: A $(rdma_links | tr '\n' ' ') B $(b_call links | tr '\n' ' ')"
		snap "$tag.post"
		maps=$(b_call fault test_buf_maps)
		ok=$(($(sk_writes ok) - sk_ok0))
		failed=$(($(sk_writes failed) - sk_failed0))
		# A's WRITE fails with B's refusal, or is flushed when B's
		# disconnect took A's link down first
		status=$(sk_writes status)
		case $status in
		"remote access error" | "WR flushed") ;;
		*) t_fail "$tag: the refused WRITE's status: $status" ;;
		esac
		ck "$tag: stale WRITEs refused" "$failed" eq 1
		# both of the next connection's buffers came from the pool, and
		# the RMB's new registration, or: the refusal, right after the
		# old key's invalidation, failed B's QP before the registration
		# that follows it in the same post completed (flushed: counted
		# as failed, that RMB freed, the connection gone before it
		# took its send buffer)
		reg_failed=$(delta "$tag.pooled" "$tag.post" b buffers_register_failed)
		ck "$tag: B's buffers_register_failed over the next connection" "$reg_failed" le 1
		ck "$tag: B's buffers_reused over the next connection" "$(delta "$tag.pooled" "$tag.post" b buffers_reused)" eq $((2 - reg_failed))
		ck "$tag: B's buffers_allocated over the next connection" "$(delta "$tag.pooled" "$tag.post" b buffers_allocated)" eq 0
		ck "$tag: B's buffers_registered over the next connection" "$(delta "$tag.pooled" "$tag.post" b buffers_registered)" eq $((1 - reg_failed))
		ck "$tag: B's buffer mappings over the next connection" "$((maps - maps0))" eq 0
		# B's QP fails as it refuses the WRITE (B counts it first); A's
		# fails with the refusal, or learns of it by B's disconnect
		fa=$(delta "$tag.pre" "$tag.post" a links_failed)
		fb=$(delta "$tag.pre" "$tag.post" b links_failed)
		ck "$tag: B's links_failed" "$fb" eq 1
		ck "$tag: A's links_failed" "$fa" le 1
		ck "$tag: A's smr QPs left" "$(rdma_res_count "$work/$tag.post.a.qp" smr)" eq 0
		ck "$tag: B's smr QPs left" "$(rdma_res_count "$work/$tag.post.b.qp" smr)" eq 0
		landed=$((landed + ok))
		refused=$((refused + failed))
		notes+=("$tag: $ok stale WRITEs landed, $failed refused, A's status $status, links_failed A +$fa B +$fb, B's registrations lost to the refusal $reg_failed, B's mappings over the reuse +$((maps - maps0)); the next connection: mode $(ls_conn_field "$tag.next" mode) rc $(sed -n 's/^rc=//p' "$work/$tag.next.client")")
	done
	# every arming was taken by its round's writer; none is left behind
	ck "A: test_link_stale_write_ms left armed" "$(fault_on a test_link_stale_write_ms)" eq 0
	fault_on a test_link_stale_write_ms 0 >/dev/null
	sysctl -qw net.smr.link_idle_timeout_ms="$idle"
	b_call sysctl net.smr.link_idle_timeout_ms="$idle" >/dev/null
	after_round sk.after 6733 && notes+=("then a fresh link: $after_note")
	t_note "$stale_key_rounds rounds: $landed stale WRITEs landed in pooled RMBs, $refused refused after B's re-registration"
	for i in "${notes[@]}"; do
		t_note "$i"
	done
	t_end
}

# attach_dead: B's lookup of the link a PROPOSAL names races its teardown
# (forced by fault_link_find), attach_dead_rounds times on fresh links.
attach_dead_rounds=8

case_attach_dead() {
	local r i port=6400 n_tcp
	t_begin attach_dead
	links_reset
	snap ad.pre
	r=$(fault_on b fault_link_find "$attach_dead_rounds")
	ck "B: fault_link_find armed" "$r" eq "$attach_dead_rounds"
	for ((i = 1; i <= attach_dead_rounds; i++)); do
		port=$((port + 1))
		fallback_round "ad.$i" "$port" "peer_declined link_failure" || break
		# the next round's link is a new one: A's went with B's
		wait_until 30 no_links_a || t_fail "ad.$i: A's link did not go"
	done
	ck "B: fault_link_find once every round ran" "$(fault_on b fault_link_find)" eq 0
	wait_until 30 links_gone ||
		t_fail "links left: A $(rdma_links | tr '\n' ' ') B $(b_call links | tr '\n' ' ')"
	snap ad.post
	n_tcp=$(delta ad.pre ad.post b handshakes_completed)
	ck "B: handshakes completed (none may use a link that went)" "$n_tcp" eq 0
	ck "B: links_attach_dead" "$(delta ad.pre ad.post b links_attach_dead)" eq "$attach_dead_rounds"
	ck "A's smr QPs left" "$(rdma_res_count "$work/ad.post.a.qp" smr)" eq 0
	ck "B's smr QPs left" "$(rdma_res_count "$work/ad.post.b.qp" smr)" eq 0
	t_note "$attach_dead_rounds connections whose link went between B's lookup and attach fell back; links_created A +$(delta ad.pre ad.post a links_created) B +$(delta ad.pre ad.post b links_created), B's links_attach_dead +$(delta ad.pre ad.post b links_attach_dead)"
	after_round ad.after 6490 && t_note "then a fresh link: $after_note"
	t_end
}

# mixed_version: a rolling upgrade, B still negotiating as a module that
# predates LINK_REQUEST (the test module's fault_answer_old: its answers
# lack the flag, a LINK_REQUEST resets, as main's module at 24398b7 did);
# mixed_version_rounds connections A -> B.
mixed_version_rounds=8

case_mixed_version() {
	local r i port=6500 n_rst
	t_begin mixed_version
	links_reset
	r=$(b_call fault fault_answer_old 1)
	if [ "$r" != Y ]; then
		t_fail "B: fault_answer_old: $r"
		t_end
		return
	fi
	snap mv.pre
	for ((i = 1; i <= mixed_version_rounds; i++)); do
		port=$((port + 1))
		fallback_round "mv.$i" "$port" "version_mismatch" || break
	done
	snap mv.post
	ck "A: handshakes_declined" "$(delta mv.pre mv.post a handshakes_declined)" eq "$mixed_version_rounds"
	n_rst=$(delta mv.pre mv.post a handshakes_aborted)
	ck "A: handshakes_aborted (a reset)" "$n_rst" eq 0
	ck "A: links_created" "$(delta mv.pre mv.post a links_created)" eq 0
	ck "A's smr QPs left" "$(rdma_res_count "$work/mv.post.a.qp" smr)" eq 0
	r=$(b_call fault fault_answer_old 0)
	ck "B: fault_answer_old cleared" "$r" eq N
	t_note "$mixed_version_rounds connections to B answering as a pre-LINK_REQUEST module: A's handshakes_declined +$(delta mv.pre mv.post a handshakes_declined), handshakes_aborted +$n_rst, fallback version_mismatch +$(delta mv.pre mv.post a fallback_version_mismatch)"
	after_round mv.after 6590 && t_note "then B answering as this module: $after_note"
	t_end
}

# addrs_add SRC...: A's addresses SRC (/24) on the device of its own; sets
# addrs_dev and addrs. False (the case failed) if one cannot be added,
# those added before it removed again.
addrs_dev=
addrs=()
addrs_add() {
	local src
	addrs_dev=$(ip -o -4 addr show | awk -v a="$self" '$4 ~ "^" a "/" { print $2; exit }')
	addrs=()
	for src in "$@"; do
		if ! ip addr add "$src/24" dev "$addrs_dev"; then
			t_fail "A: cannot add $src to $addrs_dev"
			addrs_del
			return 1
		fi
		addrs+=("$src")
	done
}

# addrs_del: the addresses addrs_add added are gone.
addrs_del() {
	local src
	for src in "${addrs[@]}"; do
		ip addr del "$src/24" dev "$addrs_dev"
	done
	addrs=()
}

# link_share: the shares of net.smr.links_max (link_share_max on both
# hosts): a user's connects create at most a quarter of it, the peers'
# links hold at most half of it. A's source addresses, the connections'
# bytes each way and where they hold (until $ls_dir/release).
link_share_max=8
link_share_srcs="192.0.2.31 192.0.2.32 192.0.2.33 192.0.2.34 192.0.2.35"
link_share_bytes=131072
link_share_hold=65536

# ls_sysctl_both KEY VALUE: net.smr.KEY on both hosts; "ok" or what failed.
ls_sysctl_both() {
	local r
	sysctl -qw "net.smr.$1=$2" 2>/dev/null || { echo "A: cannot set net.smr.$1"; return; }
	r=$(b_call sysctl "net.smr.$1=$2")
	[ "$r" = "net.smr.$1 = $2" ] || { echo "B: cannot set net.smr.$1: ${r:-no answer}"; return; }
	echo ok
}

# ls_hold [-u UID] NAME SRC PORT MODE: one connection A -> B from A's
# address SRC (as UID, if given) to B's server NAME, held once
# link_share_hold bytes went each way until $ls_dir/release exists; sets
# bg_pid. False (the case failed) if it is not held within 120 s.
ls_hold() {
	local as=() name src port mode
	[ "$1" != -u ] || { as=(-u "$2"); shift 2; }
	name=$1 src=$2 port=$3 mode=$4
	serve "$name" -p "$port" -n 1 -s "$link_share_bytes" -M "$mode" -T 400 || return 1
	rm -f "$ls_dir/$name.ready"
	client_bg "${as[@]}" "$name" -a "$peer" -A "$src" -p "$port" -n 1 \
		-s "$link_share_bytes" -h "$link_share_hold" -H "$ls_dir/release" \
		-M "$mode" -T 400 -R "$ls_dir/$name.ready"
	rdma_wait_file "$ls_dir/$name.ready" 120 "$bg_pid" && return 0
	t_fail "$name: the connection from $src was not held within 120 s"
	return 1
}

# ls_release NAME...: the held connections end (links idle out 1 s after),
# each checked intact; then no link is left on either host.
ls_release() {
	local name pid i=0
	ls_sysctl_both link_idle_timeout_ms 1000 >/dev/null
	: >"$ls_dir/release"
	for name in "$@"; do
		pid=${ls_pids[$i]}
		i=$((i + 1))
		client_bg_wait "$pid" "$name"
		server_result "$name" 120
		pair_check "$name" 1 "$link_share_bytes"
	done
	ls_pids=()
	wait_until 60 links_gone ||
		t_fail "links left after the release: A $(rdma_links | tr '\n' ' ') B $(b_call links | tr '\n' ' ')"
	ls_sysctl_both link_idle_timeout_ms "$ls_idle" >/dev/null
	rm -f "$ls_dir/release"
}

# ls_conn_field NAME KEY: KEY of connection NAME's line on A (client).
ls_conn_field() {
	grep '^conn ' "$work/$1.client" | grep -o " $2=[^ ]*" | head -n 1 | cut -d= -f2
}

# ls_links_of_uid FILE UID: the links of FILE (a links snapshot) whose
# UID column (the last) is UID.
ls_links_of_uid() {
	awk -v u="$2" 'NR > 1 && NF >= 12 && $NF == u { n++ } END { print n + 0 }' "$1"
}

ls_dir=
ls_idle=
ls_pids=()

case_link_share() {
	local srcs=() r i names=() name port spid
	local limit mode_u3 reason_u3 created refused share b_links b_pre max
	t_begin link_share
	max=$(sysctl -n net.smr.links_max 2>/dev/null || echo 256)
	ls_dir=$(flood_dir)
	rm -f "$ls_dir/release"
	ls_idle=$(sysctl -n net.smr.link_idle_timeout_ms)
	links_reset
	# shellcheck disable=SC2086 # a list of addresses
	addrs_add $link_share_srcs || { t_end; return; }
	srcs=("${addrs[@]}")
	r=$(ls_sysctl_both links_max "$link_share_max")
	ck "net.smr.links_max $link_share_max on both hosts" "$r" eq ok

	# (a) uid 65534's quarter: 2 links, the third connect gets none
	snap ls.a.pre
	ls_pids=()
	names=()
	for i in 0 1; do
		name=ls.user$((i + 1))
		ls_hold -u 65534 "$name" "${srcs[$i]}" $((6601 + i)) rdma || break
		ls_pids+=("$bg_pid")
		names+=("$name")
	done
	snap ls.a.held
	ck "(a) A's links of uid 65534 while its 2 connections are held" \
		"$(ls_links_of_uid "$work/ls.a.held.a.links" 65534)" eq 2
	if serve ls.user3 -p 6603 -n 1 -s "$link_share_bytes" -M tcp -T 120; then
		client -u 65534 ls.user3 -a "$peer" -A "${srcs[2]}" -p 6603 -n 1 \
			-s "$link_share_bytes" -M tcp -T 120
		server_result ls.user3 60
		pair_check ls.user3 1 "$link_share_bytes"
	fi
	snap ls.a.user3
	mode_u3=$(ls_conn_field ls.user3 mode)
	reason_u3=$(ls_conn_field ls.user3 reason)
	ck "(a) uid 65534's third connection: mode" "$mode_u3" eq tcp
	ck "(a) uid 65534's third connection: its reason (SMR_INFO)" "$reason_u3" eq link_failure
	limit=$(delta ls.a.held ls.a.user3 a links_user_limit)
	ck "(a) A's links_user_limit over the third connection" "$limit" eq 1
	ck "(a) A's links_created over the third connection" \
		"$(delta ls.a.held ls.a.user3 a links_created)" eq 0
	# root is not bounded by the share: a 4th address, a new link
	if ls_hold ls.root "${srcs[3]}" 6604 rdma; then
		ls_pids+=("$bg_pid")
		names+=(ls.root)
	fi
	snap ls.a.root
	created=$(delta ls.a.user3 ls.a.root a links_created)
	ck "(a) A's links_created over root's connection" "$created" eq 1
	ck "(a) A's links of root" "$(ls_links_of_uid "$work/ls.a.root.a.links" 0)" eq 1
	t_file "(a) A's links with the three held" "$work/ls.a.root.a.links"
	ls_release "${names[@]}"
	t_note "(a) links_max $link_share_max: uid 65534's third connection mode=${mode_u3:-?} reason=${reason_u3:-?}, A's links_user_limit +$limit; root's connection then: links_created +$created, mode $(ls_conn_field ls.root mode)"

	# (b) the peers' half: B takes 4 of A's 5 addresses' links
	snap ls.b.pre
	names=()
	for i in 0 1 2 3; do
		name=ls.peer$((i + 1))
		ls_hold "$name" "${srcs[$i]}" $((6611 + i)) rdma || break
		ls_pids+=("$bg_pid")
		names+=("$name")
	done
	snap ls.b.held
	b_links=$(rdma_links_count "$work/ls.b.held.b.links")
	ck "(b) B's links with 4 connections from 4 addresses held" "$b_links" eq 4
	if serve ls.peer5 -p 6615 -n 1 -s "$link_share_bytes" -M tcp -T 120; then
		client ls.peer5 -a "$peer" -A "${srcs[4]}" -p 6615 -n 1 \
			-s "$link_share_bytes" -M tcp -T 120
		server_result ls.peer5 60
		pair_check ls.peer5 1 "$link_share_bytes"
	fi
	snap ls.b.peer5
	ck "(b) the 5th address's connection: mode" "$(ls_conn_field ls.peer5 mode)" eq tcp
	ck "(b) the 5th address's connection: reason (SMR_INFO)" "$(ls_conn_field ls.peer5 reason)" eq peer_declined
	ck "(b) the 5th address's connection: peer_reason" "$(ls_conn_field ls.peer5 peer_reason)" eq link_failure
	share=$(delta ls.b.held ls.b.peer5 b links_refused_share)
	ck "(b) B's links_refused_share over the 5th connection" "$share" eq 1
	ck "(b) B's links_created over the 5th connection" \
		"$(delta ls.b.held ls.b.peer5 b links_created)" eq 0
	refused=$(delta ls.b.pre ls.b.peer5 b links_refused)
	b_pre=$(rdma_links_count "$work/ls.b.peer5.b.links")
	ck "(b) B's links after the 5th connection" "$b_pre" eq 4
	# B's own connects keep the other half: B -> A on a new link of B's
	rm -f "$work/ls.back.ready"
	"$stream" server -a "$self" -p 6620 -n 1 -s 1048576 -M rdma -T 120 \
		-R "$work/ls.back.ready" >"$work/ls.back.server" 2>&1 &
	spid=$!
	if rdma_wait_file "$work/ls.back.ready" 30 "$spid"; then
		b_call client ls.back -a "$self" -p 6620 -n 1 -s 1048576 -M rdma -T 120 \
			>"$work/ls.back.client"
		wait "$spid"
		echo "rc=$?" >>"$work/ls.back.server"
		cp "$work/ls.back.client" "$work/ls.back.server" "$out/conns/"
		pair_check ls.back 1 1048576
	else
		t_fail "(b) A's server for B's connection did not listen"
		kill "$spid" 2>/dev/null
	fi
	snap ls.b.back
	ck "(b) B's links_created over its own connection" \
		"$(delta ls.b.peer5 ls.b.back b links_created)" eq 1
	ck "(b) B's mode_rdma over its own connection" \
		"$(delta ls.b.peer5 ls.b.back b mode_rdma)" eq 1
	t_file "(b) B's links with the 4 held and its own" "$work/ls.b.back.b.links"
	ls_release "${names[@]}"
	t_note "(b) B's links with 4 addresses' connections held: $b_links; the 5th: mode $(ls_conn_field ls.peer5 mode) reason $(ls_conn_field ls.peer5 reason)/$(ls_conn_field ls.peer5 peer_reason), B's links_refused_share +$share (links_refused +$refused); B's own connection to A then: mode $(ls_conn_field ls.back mode)"

	r=$(ls_sysctl_both links_max "$max")
	[ "$r" = ok ] || t_diag "links_max not restored: $r"
	addrs_del
	t_end
}

# grant_evict: the grant table under a host that asks for grants and never
# connects (issue 10). grant_evict_srcs are A's addresses: the first
# grant_evict_fillers fill B's table, grant_evict_per link grants each
# (SMR_LINK_GRANTS_PER_PEER x grant_evict_fillers = SMR_LINK_GRANTS_MAX),
# the last asks for one more without the fault. All of it must happen
# within the grants' lifetime (smr_link_grant_timeout(), 10 s times
# grant_scale, see grant_time), or the first ones expire and make room by
# themselves: grant_evict_max_ms (scaled) bounds it.
grant_evict_srcs="$(seq -f '192.0.2.%g' 41 57 | tr '\n' ' ')"
grant_evict_fillers=16
grant_evict_per=4
grant_evict_max_ms=9000

# ge_fill SRC I: grant_evict_per connections from A's address SRC to B's
# ge.fill server, one after another (each asks for a new link: the last
# one's failed), each falling back to TCP.
ge_fill() {
	local j
	for ((j = 1; j <= grant_evict_per; j++)); do
		client_run "ge.fill.$2.$j" -a "$peer" -A "$1" -p 6701 -n 1 \
			-s 4096 -M tcp -T 60
	done
}

# grant_fillers_check P N: the N filler connections of case P (clients
# P.fill.*, server P.fill), each granted a link that never connected, all
# fell back to TCP intact; P.pre and P.filled snapshot the fill.
grant_fillers_check() {
	local f n ran=0 bad=0 name
	for f in "$work/$1".fill.*.client; do
		[ -e "$f" ] || continue
		name=${f##*/}
		client_keep "${name%.client}"
		ran=$((ran + 1))
		grep -q '^rc=0$' "$f" || bad=$((bad + 1))
	done
	ck "A: filler connections run" "$ran" eq "$2"
	ck "A: fillers' connections not ok (each must fall back intact)" "$bad" eq 0
	n=$(awk '/^summary / { for (i = 1; i <= NF; i++) if ($i ~ /^ok=/) print substr($i, 4) }' "$work/$1.fill.server")
	ck "B: the fillers' connections its server saw intact" "${n:-0}" eq "$2"
	ck "A: fault_link_grant_unused once every filler ran" "$(fault_on a fault_link_grant_unused)" eq 0
	ck "A: links_failed over the fill (every link, granted, never connected)" \
		"$(delta "$1.pre" "$1.filled" a links_failed)" eq "$2"
	ck "B: links_created over the fill" "$(delta "$1.pre" "$1.filled" b links_created)" eq 0
}

case_grant_evict() {
	local srcs=() r i pids=() t0 t1 ms nfill
	local granted evicted created mode reason
	t_begin grant_evict
	links_reset
	# shellcheck disable=SC2086 # a list of addresses
	addrs_add $grant_evict_srcs || { t_end; return; }
	srcs=("${addrs[@]}")
	nfill=$((grant_evict_fillers * grant_evict_per))
	if ! serve ge.fill -p 6701 -n "$nfill" -s 4096 -M tcp -T 120 ||
	   ! serve ge.new -p 6702 -n 1 -s 1048576 -T 120; then
		addrs_del
		t_end
		return
	fi
	grant_time "$grant_scale"
	r=$(fault_on a fault_link_grant_unused "$nfill")
	ck "A: fault_link_grant_unused armed" "$r" eq "$nfill"
	snap ge.pre
	t0=$(date +%s%N)
	for ((i = 0; i < grant_evict_fillers; i++)); do
		ge_fill "${srcs[$i]}" "$i" &
		pids+=($!)
	done
	wait "${pids[@]}"
	snap ge.filled
	# the 17th address, no fault left: a new link, granted in a full table
	client ge.new -a "$peer" -A "${srcs[$grant_evict_fillers]}" -p 6702 \
		-n 1 -s 1048576 -T 120
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000))
	server_result ge.fill 60
	server_result ge.new 60
	snap ge.post
	grant_fillers_check ge "$nfill"
	ck "B: links_granted over the fill" "$(delta ge.pre ge.filled b links_granted)" eq "$nfill"
	ck "fill and the 17th connection within the grants' lifetime (ms)" "$ms" le "$((grant_evict_max_ms * grant_scale))"
	pair_check ge.new 1 1048576
	mode=$(ls_conn_field ge.new mode)
	reason=$(ls_conn_field ge.new reason)
	ck "the 17th address's connection: mode" "$mode" eq rdma
	granted=$(delta ge.filled ge.post b links_granted)
	evicted=$(delta ge.filled ge.post b links_grants_evicted)
	created=$(delta ge.filled ge.post b links_created)
	ck "B: links_granted over the 17th's connection" "$granted" eq 1
	ck "B: links_grants_evicted over the 17th's connection" "$evicted" eq 1
	ck "B: links_created over the 17th's connection" "$created" eq 1
	ck "A: links_failed over the 17th's connection" "$(delta ge.filled ge.post a links_failed)" eq 0
	t_note "$nfill grants from $grant_evict_fillers addresses never connected (A's links_failed +$(delta ge.pre ge.filled a links_failed), B's links_granted +$(delta ge.pre ge.filled b links_granted)), then the 17th address, $ms ms after the fill began: mode ${mode:-?} reason ${reason:-?}; B's links_granted +$granted, links_grants_evicted +${evicted:-?}, links_created +$created"
	grant_time "$bed_time_scale"
	links_reset
	addrs_del
	t_end
}

# grant_victim: the late client is the last of grant_evict_srcs' addresses
# plus one; the fillers are the first 15 (4 grants each), then the 16th (3).
grant_victim_late=192.0.2.58
grant_victim_first=15
grant_victim_second=3
# the late client's connect request leaves once the case releases it
# (fault_link_grant_late_release), after the 17th's connection: all of it
# within the late grant's lifetime (10 s, scaled) with room for that
# request, or the grant expires and the case proves nothing
grant_victim_max_ms=8000

# gv_fill SRC I N: N connections from SRC whose links take a grant and
# never connect (fault_link_grant_unused on A), one after the other.
gv_fill() {
	local j
	for ((j = 1; j <= $3; j++)); do
		client_run "gv.fill.$2.$j" -a "$peer" -A "$1" -p 6711 -n 1 \
			-s 4096 -M tcp -T 60
	done
}

case_grant_victim() {
	local srcs=() i pids=() nfill t0 t1 ms mode reason hs_saved late_pid
	local granted evicted refused
	t_begin grant_victim
	links_reset
	# shellcheck disable=SC2086 # a list of addresses
	addrs_add $grant_evict_srcs $grant_victim_late || { t_end; return; }
	srcs=("${addrs[@]}")
	nfill=$((grant_victim_first * grant_evict_per + grant_victim_second))
	if ! serve gv.fill -p 6711 -n "$nfill" -s 4096 -M tcp -T 120 ||
	   ! serve gv.new -p 6712 -n 1 -s 1048576 -T 120 ||
	   ! serve gv.late -p 6713 -n 1 -s 1048576 -T 120; then
		addrs_del
		t_end
		return
	fi
	grant_time "$grant_scale"
	# the late client's handshake waits for its link while the rest
	# runs: both ends allow it
	hs_saved=$(sysctl -n net.smr.handshake_timeout_ms)
	sysctl -qw net.smr.handshake_timeout_ms="$(tscale 30000)"
	b_call sysctl net.smr.handshake_timeout_ms="$(tscale 30000)" >/dev/null
	ck "A: fault_link_grant_late_release cleared" "$(fault_on a fault_link_grant_late_release 0)" eq 0
	ck "A: fault_link_grant_late armed" "$(fault_on a fault_link_grant_late 1)" eq 1
	snap gv.pre
	t0=$(date +%s%N)
	client_bg gv.late -a "$peer" -A "$grant_victim_late" -p 6713 -n 1 -s 1048576 -T 120
	late_pid=$bg_pid
	wait_until 5 gv_granted || t_fail "B did not grant the late client's link"
	# B counts a grant before it answers: the unused fault is armed only
	# once A's late link took its own
	wait_until 5 gv_late_taken || t_fail "A's late link did not take fault_link_grant_late"
	ck "A: fault_link_grant_unused armed" "$(fault_on a fault_link_grant_unused "$nfill")" eq "$nfill"
	for ((i = 0; i < grant_victim_first; i++)); do
		gv_fill "${srcs[$i]}" "$i" "$grant_evict_per" &
		pids+=($!)
	done
	wait "${pids[@]}"
	# those 60 are at least SMR_LINK_GRANT_MIN_AGE old before the table fills
	sleep 1.2
	gv_fill "${srcs[$grant_victim_first]}" "$grant_victim_first" "$grant_victim_second"
	snap gv.filled
	client gv.new -a "$peer" -A "${srcs[$grant_evict_fillers]}" -p 6712 \
		-n 1 -s 1048576 -T 120
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000))
	# the waiting link takes the release at once: it reads 0 or 1
	ck "A: the late link released" "$(fault_on a fault_link_grant_late_release 1)" le 1
	client_bg_wait "$late_pid" gv.late
	ck "A: the release taken by the late link (not its deadline)" "$(fault_on a fault_link_grant_late_release)" eq 0
	server_result gv.fill 60
	server_result gv.new 60
	server_result gv.late 60
	snap gv.post
	sysctl -qw net.smr.handshake_timeout_ms="$hs_saved"
	b_call sysctl net.smr.handshake_timeout_ms="$hs_saved" >/dev/null
	ck "the table full and the 17th address through within the late grant's lifetime (ms)" \
		"$ms" le "$((grant_victim_max_ms * grant_scale))"
	grant_fillers_check gv "$nfill"
	ck "B: links_granted over the fill (the late client's, the fillers')" \
		"$(delta gv.pre gv.filled b links_granted)" eq $((nfill + 1))
	pair_check gv.new 1 1048576
	ck "the 17th address's connection: mode" "$(ls_conn_field gv.new mode)" eq rdma
	pair_check gv.late 1 1048576
	mode=$(ls_conn_field gv.late mode)
	reason=$(ls_conn_field gv.late reason)
	ck "the late client's connection: mode" "$mode" eq rdma
	granted=$(delta gv.filled gv.post b links_granted)
	evicted=$(delta gv.filled gv.post b links_grants_evicted)
	refused=$(delta gv.pre gv.post b links_refused)
	ck "B: links_grants_evicted for the 17th" "$evicted" eq 1
	ck "B: links_refused (the late client's request proved a live grant)" "$refused" eq 0
	# whatever went wrong, no fault is left for the next case
	fault_on a fault_link_grant_late 0 >/dev/null
	fault_on a fault_link_grant_unused 0 >/dev/null
	fault_on a fault_link_grant_late_release 0 >/dev/null
	t_note "the late client's grant first, then $nfill unused grants from $((grant_victim_first + 1)) addresses, the 17th address $ms ms after the late grant: B granted +$granted, evicted +$evicted, refused +$refused; the late client: mode ${mode:-?} reason ${reason:-?}"
	grant_time "$bed_time_scale"
	links_reset
	addrs_del
	t_end
}

# gv_late_taken: A's late link took fault_link_grant_late.
gv_late_taken() {
	[ "$(fault_param fault_link_grant_late)" = 0 ]
}

# gv_granted: B granted the late client's link (gv.pre's links_granted + 1).
gv_granted() {
	[ "$(b_call stats | awk '$1 == "links_granted" { print $2 }')" -gt \
	  "$(rdma_kv "$work/gv.pre.b.stats" links_granted)" ]
}
