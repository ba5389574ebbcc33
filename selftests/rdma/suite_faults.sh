# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2154 # guests.sh and bed.sh set peer, work, out, bg_pid
#
# The faults suite's cases (selftests/faults_test.sh; sourced by
# the build host for the list, on host A for the case_ID functions and on
# host B for its b_VERB requests: selftests/lib/guests.sh): a peer
# that dies without a word, and one whose application never closes
# (issue 9, items 5, 7 and 8). Documentation/design.rst, "Failure
# semantics", gives the bounds checked here.

# shellcheck disable=SC2034 # read by selftests/lib/guests.sh
suite_tests=(
	"silent|B frozen (QEMU stopped: no FIN, no RST, no teardown) under bulk transfers both ways: every SMR socket on A fails (ECONNRESET/ETIMEDOUT) within 30 s, A's link goes, its buffers are freed and rmmod succeeds; thawed, B's sockets and link fail too"
	"orphan|A's application exits while B's holds its sockets open and reads nothing: with net.smr.orphan_timeout_ms 3000 A's connections reset and free their buffers (orphans_expired), and rmmod succeeds on A while B still holds its sockets"
)

faults_conns=4

# --- host B --------------------------------------------------------------------

b_conns_count() {
	awk 'NR > 1' /proc/net/smr/conns | wc -l
}

b_links_count() {
	rdma_links_count
}

# hold_release NAME: let server NAME (held with -H) go on.
b_hold_release() {
	: >"$work/$1.go"
	echo ok
}

# --- host A --------------------------------------------------------------------

# wait_until SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
wait_until() {
	local until=$((SECONDS + $1))
	shift
	while ! "$@"; do
		[ "$SECONDS" -lt "$until" ] || return 1
		sleep 0.2
	done
}

no_links_a() {
	[ "$(rdma_links_count)" = 0 ]
}

no_links_b() {
	[ "$(b_call links_count)" = 0 ]
}

no_conns_a() {
	[ "$(awk 'NR > 1' /proc/net/smr/conns | wc -l)" = 0 ]
}

# reload_a: rmmod and insmod smr on A; fails the test if rmmod fails.
reload_a() {
	local r
	pkill_streams
	rdma_wait_unref 10 >/dev/null
	r=$(rdma_rmmod)
	[[ $r == rc=0* ]] || t_fail "A: rmmod smr: $(tr '\n' ' ' <<<"$r") ($(rdma_wait_unref 0))"
	r=$(rdma_insmod)
	[[ $r == rc=0* ]] || t_fail "A: insmod smr again: $r"
}

case_silent() {
	local pid t0 t_gone ok_n r fails pinned
	t_begin silent
	rm -f "$work/silent.trigger" "$work/silent.ready"
	serve silent -p 6131 -n "$faults_conns" -s 0 -T 300 || { t_end; return; }
	client_bg silent -a "$peer" -p 6131 -n "$faults_conns" -s 0 -F \
		-X "$work/silent.trigger" -W 30 -R "$work/silent.ready" -T 300
	pid=$bg_pid
	rdma_wait_file "$work/silent.ready" 120 "$pid" ||
		t_fail "the bulk transfers did not reach 256 KiB each way within 120 s"
	: >"$work/silent.trigger"
	t0=$SECONDS
	r=$("$SMR_REPO/scripts/vm-ctl" freeze b 2>&1) || t_fail "freezing B: $r"
	client_bg_wait "$pid" silent
	ok_n=$(summary_field silent client ok)
	ck "A: SMR sockets that failed within 30 s of B going silent" "${ok_n:-none}" eq "$faults_conns"
	fails=$(awk '/^conn / { for (i = 1; i <= NF; i++) if ($i ~ /^(err|at|fail_ms)=/) printf "%s ", $i; print "" }' "$work/silent.client")
	t_diag "A: how each connection ended: $fails"
	wait_until 30 no_links_a || t_fail "A: the link to the silent B is still there: $(rdma_links | tr '\n' ' ')"
	t_gone=$((SECONDS - t0))
	wait_until 10 no_conns_a || t_fail "A: connections left: $(head -n 3 /proc/net/smr/conns | tr '\n' ' ')"
	pinned=$(rdma_stats | awk '$1 == "buffer_bytes_pinned" { print $2 }')
	reload_a
	r=$("$SMR_REPO/scripts/vm-ctl" thaw b 2>&1) || t_fail "thawing B: $r"
	# B's keepalive finds the link dead once its clock runs again
	wait_until 60 no_links_b || t_fail "B: its link to A is still there 60 s after the thaw: $(b_call links | tr '\n' ' ')"
	server_result silent 60
	t_diag "B (after the thaw): $(grep '^summary' "$work/silent.server")"
	b_call stop silent >/dev/null
	t_note "A: $ok_n/$faults_conns sockets failed ($(awk '/^conn / { for (i = 1; i <= NF; i++) if ($i ~ /^(err|fail_ms)=/) printf "%s ", $i }' "$work/silent.client")); A's link gone ${t_gone} s after the freeze, buffer_bytes_pinned then $pinned, rmmod ok; B's link gone after the thaw"
	t_end
}

case_orphan() {
	local saved pre post expired r
	t_begin orphan
	snap orphan.pre
	saved=$(sysctl -n net.smr.orphan_timeout_ms)
	sysctl -qw net.smr.orphan_timeout_ms=3000
	# B's application stops at 64 KiB each way and never closes
	serve orphan -p 6132 -n "$faults_conns" -s 1048576 -h 65536 \
		-H /tmp/rdma-b/orphan.go -T 300 || { t_end; return; }
	client orphan_hold -a "$peer" -p 6132 -n "$faults_conns" -s 1048576 \
		-h 65536 -H "$work/never" -R "$work/orphan.ready" -T 20 &
	local pid=$!
	rdma_wait_file "$work/orphan.ready" 120 "$pid" ||
		t_fail "the connections did not reach 64 KiB each way"
	# A's application goes: its sockets close with bytes still unread
	pkill -KILL -f "smr_stream client .* -p 6132 " 2>/dev/null
	wait "$pid" 2>/dev/null
	pre=$(awk 'NR > 1' /proc/net/smr/conns | wc -l)
	t0=$SECONDS
	wait_until 30 no_conns_a || t_fail "A: orphaned connections still there 30 s after close: $(head -n 3 /proc/net/smr/conns | tr '\n' ' ')"
	post=$((SECONDS - t0))
	snap orphan.post
	expired=$(delta orphan.pre orphan.post a orphans_expired)
	ck "A: orphans expired" "$expired" ge 1
	ck "B: connections B's application still holds" "$(b_call conns_count)" ge 1
	sysctl -qw net.smr.orphan_timeout_ms="$saved"
	reload_a
	r=$(b_call hold_release orphan)
	server_result orphan 60
	b_call stop orphan >/dev/null
	t_note "A's application killed with its peers holding: $pre connections left on A, gone ${post} s later (orphan_timeout_ms 3000), orphans_expired +$expired; rmmod on A succeeded while B held its sockets"
	t_end
}
