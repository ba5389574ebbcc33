# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034,SC2154 # the suites read what is set here; guests.sh sets work, out, t_id
#
# The rdma bed: what the suites in this directory share (selftests/lib/
# guests.sh sources it before suite_rdma.sh, suite_stress.sh,
# suite_faults.sh or suite_churn.sh; selftests/rdma_test.sh documents the
# environment). Their traffic is smr_stream's (build/rdma/): B's "serve"
# request starts an smr_stream server, A's client ... runs its clients,
# pair_check holds both ends' lines against each other.
#
# Environment: SMR_EXPECT_MODE=rdma|tcp (the mode every data connection must
# be in), SMR_RDMA_TESTS (the cases to run), SMR_RDMA_TIMEOUT (vm-run's),
# SMR_RDMA_VM_RUN (another checkout's vm-run, which boots that checkout's
# smr.ko, e.g. a worktree of HEAD while kernel/ is mid-edit), and the
# suites' own: SMR_RDMA_CONNS, SMR_RDMA_BYTES, SMR_RDMA_CONNS6,
# SMR_RDMA_BYTES6, SMR_RDMA_CORRUPT, SMR_STRESS_ITERS, SMR_CHURN_SECONDS.

bed_name=rdma
bed_ctl_port=7100
bed_timeout_var=SMR_RDMA_TIMEOUT
bed_select_var=SMR_RDMA_TESTS
bed_vm_run_var=SMR_RDMA_VM_RUN
bed_env=(SMR_EXPECT_MODE SMR_RDMA_CONNS SMR_RDMA_BYTES SMR_RDMA_CONNS6
	SMR_RDMA_BYTES6 SMR_RDMA_CORRUPT SMR_STRESS_ITERS SMR_CHURN_SECONDS
	SMR_STALE_KEY_ROUNDS)
bed_needs=(socat rdma)
bed_make=(selftests/rdma)
RDMA_STREAM=$BED_TOP/build/rdma/smr_stream
expect=${SMR_EXPECT_MODE:-rdma}
stream=$RDMA_STREAM
bed_server=(env "SMR_EXPECT_MODE=$expect" "$RDMA_STREAM")

bed_host_check() {
	case $expect in
	rdma | tcp) ;;
	*) missing+=("a valid SMR_EXPECT_MODE (rdma or tcp, not '$expect')") ;;
	esac
}

bed_a_setup() {
	export SMR_EXPECT_MODE=$expect
	[ -x "$stream" ] && return 0
	log "FATAL: $stream missing (make -C selftests/rdma)"
	return 1
}

# --- running connections -----------------------------------------------------

# serve NAME ARGS...: smr_stream server on B; fails the test if it does
# not start.
serve() {
	local name=$1 r
	shift
	r=$(b_call serve "$name" "$@")
	[ "$r" = ok ] && return 0
	t_fail "$name: B's server did not start: $r"
	return 1
}

# server_result NAME SECONDS: B's server output into $work/NAME.server.
server_result() {
	b_call result "$1" "$2" >"$work/$1.server"
	cp "$work/$1.server" "$out/conns/"
}

# client_run [-u UID] NAME ARGS...: an smr_stream client here (as UID, if
# given), output in $work/NAME.client, "rc=N" last.
client_run() {
	local as=() name
	if [ "$1" = -u ]; then
		as=(setpriv --reuid="$2" --regid="$2" --clear-groups)
		shift 2
	fi
	name=$1
	shift
	"${as[@]}" "$stream" client "$@" >"$work/$name.client" 2>"$work/$name.client.err"
	echo "rc=$?" >>"$work/$name.client"
}

# client_keep NAME: the client's output into $out/conns.
client_keep() {
	cp "$work/$1.client" "$out/conns/"
	[ ! -s "$work/$1.client.err" ] || cp "$work/$1.client.err" "$out/conns/"
}

# client [-u UID] NAME ARGS...: client_run in the foreground, kept.
client() {
	client_run "$@"
	[ "$1" != -u ] || shift 2
	client_keep "$1"
}

# client_bg [-u UID] NAME ARGS...: the same in the background; sets bg_pid.
bg_pid=
client_bg() {
	client_run "$@" &
	bg_pid=$!
}

# client_bg_ready NAME SECONDS WHAT ARGS...: client_bg NAME ARGS with
# -R READY, then up to SECONDS (time-scaled) for it to be ready (every
# connection held, done or 256 KiB each way); the case fails "WHAT within
# SECONDS s" if not.
# bg_pid stays the client's.
client_bg_ready() {
	local name=$1 secs=$2 what=$3
	shift 3
	rm -f "$work/$name.ready"
	client_bg "$name" "$@" -R "$work/$name.ready"
	rdma_wait_file "$work/$name.ready" "$secs" "$bg_pid" ||
		t_fail "$what within $(tscale "$secs") s"
}

# client_bg_wait PID NAME: the background client ended, its output kept.
client_bg_wait() {
	wait "$1"
	client_keep "$2"
}

# pair_check NAME CONNS BYTES: the client's and the server's lines of a run
# agree connection by connection (matched by the client's port): both ends
# ok (stream intact, SMR_INFO and TCP_INFO as expected), each end's
# tx_hash equal to the other's rx_hash, all bytes both ways. Fails the test
# per problem; notes "N/N intact, modes ..." for the summary.
pair_check() {
	local name=$1 n=$2 bytes=$3 res line
	res=$(awk -v n="$n" -v bytes="$bytes" -v name="$name" '
		function kv(line, arr,    i, w, k) {
			delete arr
			split(line, w, " ")
			for (i in w) {
				k = index(w[i], "=")
				if (k)
					arr[substr(w[i], 1, k - 1)] = substr(w[i], k + 1)
			}
		}
		# Connections failing alike are one line with a count: the
		# first of them in full, the rest by their reason with the
		# numbers taken out.
		function bad(msg, ctx,    key) {
			key = msg
			gsub(/hash [0-9a-f]+/, "hash H", key)
			gsub(/[0-9]+/, "N", key)
			if (!(key in seen)) {
				seen[key] = 0
				order[++nkeys] = key
				first[key] = (ctx == "" ? "" : ctx ": ") msg
			}
			seen[key]++
		}
		FNR == 1 { file++ }
		file == 1 && /^conn / { kv($0, c); cl[c["lport"]] = $0; nc++ }
		file == 1 && /^summary / { csum = $0 }
		file == 1 && /^rc=/ { crc = substr($0, 4) }
		file == 2 && /^conn / { kv($0, s); sv[s["rport"]] = $0; ns++ }
		file == 2 && /^summary / { ssum = $0 }
		file == 2 && /^rc=/ { src = substr($0, 4) }
		END {
			if (csum == "")
				bad("no summary from the client (rc=" crc ")")
			if (ssum == "")
				bad("no summary from the server (rc=" src ")")
			if (nc != n)
				bad("client reported " nc " connections, want " n)
			if (ns != n)
				bad("server reported " ns " connections, want " n)
			good = 0
			for (p in cl) {
				kv(cl[p], c)
				ctx = "conn#" c["idx"] " (client port " p ")"
				if (!(p in sv)) {
					bad("no server line; client: ok=" c["ok"] " why=" c["why"], ctx)
					continue
				}
				kv(sv[p], s)
				fine = 1
				if (c["ok"] != 1) {
					bad("client: " c["why"] " [mode=" c["mode"] " reason=" c["reason"] " err=" c["err"] "@" c["at"] "]", ctx)
					fine = 0
				}
				if (s["ok"] != 1) {
					bad("server: " s["why"] " [mode=" s["mode"] " reason=" s["reason"] " err=" s["err"] "@" s["at"] "]", ctx)
					fine = 0
				}
				if (c["tx_hash"] != s["rx_hash"]) {
					bad("client sent hash " c["tx_hash"] ", server received hash " s["rx_hash"], ctx)
					fine = 0
				}
				if (s["tx_hash"] != c["rx_hash"]) {
					bad("server sent hash " s["tx_hash"] ", client received hash " c["rx_hash"], ctx)
					fine = 0
				}
				if (c["tx"] != bytes || s["rx"] != bytes || s["tx"] != bytes || c["rx"] != bytes) {
					bad("bytes c->s " c["tx"] "/" s["rx"] ", s->c " s["tx"] "/" c["rx"] ", want " bytes " each", ctx)
					fine = 0
				}
				good += fine
				modes[c["mode"] "/" c["reason"]]++
				wmin = (wmin == "" || c["wmin"] + 0 < wmin) ? c["wmin"] + 0 : wmin
				wmax = (c["wmax"] + 0 > wmax) ? c["wmax"] + 0 : wmax
				rmin = (rmin == "" || c["rmin"] + 0 < rmin) ? c["rmin"] + 0 : rmin
				rmax = (c["rmax"] + 0 > rmax) ? c["rmax"] + 0 : rmax
				acked = (c["tcpi_acked"] + 0 > acked) ? c["tcpi_acked"] + 0 : acked
				rcvd = (c["tcpi_rcvd"] + 0 > rcvd) ? c["tcpi_rcvd"] + 0 : rcvd
			}
			m = ""
			for (k in modes)
				m = m (m == "" ? "" : ",") k ":" modes[k]
			printf "NOTE %d/%d intact, client modes %s, client write sizes %s..%s, read sizes %s..%s, inner TCP max acked %d received %d\n", good, n, (m == "" ? "none" : m), wmin, wmax, rmin, rmax, acked, rcvd
			for (i = 1; i <= nkeys && i <= 12; i++) {
				k = order[i]
				print "FAIL " name ": " first[k] (seen[k] > 1 ? " (and " seen[k] - 1 " more connections alike)" : "")
			}
			if (nkeys > 12)
				print "FAIL " name ": " nkeys - 12 " more kinds of problems"
		}' "$work/$name.client" "$work/$name.server")
	while IFS= read -r line; do
		case $line in
		"FAIL "*) t_fail "${line#FAIL }" ;;
		"NOTE "*) t_note "$name: ${line#NOTE }"; t_diag "$name: ${line#NOTE }" ;;
		esac
	done <<<"$res"
	grep -h '^summary ' "$work/$name.client" "$work/$name.server" | sed "s/^/$name: /" >>"$out/diag-$t_id.txt"
}

# summary_field NAME client|server KEY: a field of a run's summary line.
summary_field() {
	sed -n "s/^summary .* $3=\([^ ]*\).*/\1/p" "$work/$1.$2" | tail -n 1
}


# stress_server NAME MODE ARGS...: smr_stress MODE as the detached server
# NAME on this host's address (host B: a b_VERB runs it). "ok" once it
# runs, "fail: WHY" if it exited at once.
stress_server() {
	local name=$1 mode=$2 port="" prev="" a i
	shift 2
	for a in "$@"; do
		[ "$prev" != -p ] || port=$a
		prev=$a
	done
	start_detached "$name" "${RDMA_STREAM%/*}/smr_stress" "$mode" \
		-a "$SMR_SELF_ADDR" "$@"
	# "ok" once it listens: a busy host starts it late, and a client
	# refused meanwhile gives up (faults linger after waiters' hog)
	for ((i = 0; i < $(tscale 30) * 10; i++)); do
		if [ -e "$work/$name.rc" ]; then
			echo "fail: $(cat "$work/$name.err")"
			return
		fi
		ss -Hltn "sport = :$port" | grep -q . && { echo ok; return; }
		sleep 0.1
	done
	echo "fail: not listening on port $port within $(tscale 30) s"
}

# conns_count: connections in this host's /proc/net/smr/conns (host B: a
# b_VERB).
b_conns_count() {
	awk 'NR > 1' /proc/net/smr/conns | wc -l
}

# no_links_a, no_links_b: no SMR link left on host A, on host B.
no_links_a() {
	[ "$(rdma_links | rdma_links_count -)" = 0 ]
}

no_links_b() {
	[ "$(b_call links | rdma_links_count -)" = 0 ]
}

# Kill smr_stream clients this script started that are still running.
pkill_streams() {
	local p
	for p in $(jobs -p); do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	return 0
}

