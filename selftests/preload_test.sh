#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Tests for smr_run / libsmr-preload.so and smr-probe. TAP output, exit 0 iff
# every test passed.
#
#   preload_test.sh          in a guest with the smr module loaded (or
#                            loadable from $SMR_KO, vm-run's): converted
#                            sockets are SMR end to end, filters, flags, IPv6,
#                            forking/threaded programs, fallback after rmmod
#   preload_test.sh --host   without the module (build host): build, help,
#                            library lookup, fallback to TCP, plain echo
#
# Environment: SMR_REPO (checkout, default: this script's ..), SMR_SELF_ADDR
# and SMR_SELF_ADDR6 (this machine's test addresses; default 192.0.2.1/2 or
# fd53:4d52::1/2 if configured here, else 127.0.0.1 / ::1).
set -uo pipefail
# Test functions are called indirectly, from the TESTS table.
# shellcheck disable=SC2317

SMR_REPO=${SMR_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export PATH="$PATH:/usr/sbin:/sbin"
BUILD=$SMR_REPO/build/tools
SMR_RUN=$SMR_REPO/tools/smr_run
PROBE=$BUILD/smr-probe
LIB=$BUILD/libsmr-preload.so
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
BYTES=100000
WORK=$(mktemp -d /tmp/smr-preload-test.XXXXXX)
MODE=guest
FAM='' SELF='' SELF6=''
[ "${1:-}" = "--host" ] && MODE=host

smr_cleanup() {
	local p
	for p in $(jobs -p); do
		kill "$p" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap smr_cleanup EXIT

diag() { sed 's/^/# /'; }

# A file's content as TAP diagnostics, labelled.
show() {
	local f
	for f in "$@"; do
		[ -s "$f" ] || continue
		echo "# --- ${f#"$WORK"/}"
		diag <"$f"
	done
}

# Every later word must appear as a whole space-separated word of line $1.
has_words() {
	local line=" $1 " w
	shift
	for w in "$@"; do
		case "$line" in
		*" $w "*) ;;
		*) echo "# missing '$w' in: $1"; return 1 ;;
		esac
	done
}

# Wait (up to 10 s) for a listener started in the background to print its port.
wait_listening() {
	local out=$1 pid=$2
	for _ in $(seq 100); do
		if grep -q '^listening port=' "$out" 2>/dev/null; then
			sed -n 's/^listening port=\([0-9]*\).*/\1/p' "$out" | head -1
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "# listener did not come up" >&2
	return 1
}

# pair NAME ADDR PORT: smr-probe listener on ADDR:PORT (0: any) run through
# the words in SRV_WRAP, client through CLI_WRAP, extra options in SRV_OPTS
# and CLI_OPTS. Sets SRV_LINE/CLI_LINE to their result lines; returns 0 iff
# both sides exited 0 (the client checked every byte of the echo).
SRV_WRAP=() CLI_WRAP=() SRV_OPTS=() CLI_OPTS=()
pair() {
	local addr=$2 port=$3 d="$WORK/$1" spid lport crc src
	SRV_LINE='' CLI_LINE=''
	"${SRV_WRAP[@]}" "$PROBE" -l -t 20 "${SRV_OPTS[@]}" -b "$addr" "$port" \
		>"$d.srv.out" 2>"$d.srv.err" &
	spid=$!
	if ! lport=$(wait_listening "$d.srv.out" "$spid"); then
		kill "$spid" 2>/dev/null
		wait "$spid"
		show "$d.srv.out" "$d.srv.err"
		return 1
	fi
	"${CLI_WRAP[@]}" "$PROBE" -t 20 -n "$BYTES" "${CLI_OPTS[@]}" "$addr" "$lport" \
		>"$d.cli.out" 2>"$d.cli.err"
	crc=$?
	wait "$spid"
	src=$?
	SRV_LINE=$(grep '^family=' "$d.srv.out" | head -1)
	CLI_LINE=$(grep '^family=' "$d.cli.out" | head -1)
	echo "# server: $SRV_LINE"
	echo "# client: $CLI_LINE"
	if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
		echo "# exit status: client $crc, server $src"
		show "$d.srv.err" "$d.cli.err"
		return 1
	fi
}

# The line of a converted (SMR) or plain (TCP) end of a completed echo.
# is_smr_end LINE [MODE]: MODE rdma (both ends SMR, the default) or tcp
# (the other end is plain TCP, so the SMR end falls back).
is_smr_end() {
	has_words "$1" "family=$FAM" "mode=${2:-rdma}" "bytes_sent=$BYTES" \
		"bytes_received=$BYTES" "app_sent=$BYTES" "app_received=$BYTES"
}

is_tcp_end() {
	has_words "$1" "family=${2:-2}" smr=no "app_sent=$BYTES" "app_received=$BYTES"
}

stat_of() {
	awk -v k="$1" '$1 == k { print $2 }' /proc/net/smr/stats
}

pick_addr() {
	local want=$1 a
	shift
	for a in "$@"; do
		if ip -o addr show 2>/dev/null | grep -qw "inet6\? $a/[0-9]*"; then
			echo "$a"
			return
		fi
	done
	echo "$want"
}

# ---------------------------------------------------------------- common tests

# Through smr_run -v without a usable module: the library says why once and
# the echo runs over plain TCP. $1: why (not_loaded or no_family).
t_fallback_echo() {
	local re f env=()
	# Family 19 is free on a host without the module (checked in main).
	[ "$1" = no_family ] && env=(env SMR_FAMILY=19)
	SRV_WRAP=("${env[@]}" "$SMR_RUN" -v) CLI_WRAP=("${env[@]}" "$SMR_RUN" -v)
	SRV_OPTS=() CLI_OPTS=()
	pair fallback_$1 127.0.0.1 0 || return 1
	is_tcp_end "$SRV_LINE" && is_tcp_end "$CLI_LINE" || return 1
	if [ "$1" = not_loaded ]; then
		re='^smr_run: SMR module not loaded .*sockets stay TCP$'
	else
		re='^smr_run: socket\(family [0-9]+, SOCK_STREAM, 0\) failed: .*sockets stay TCP$'
	fi
	for f in "$WORK/fallback_$1.srv.err" "$WORK/fallback_$1.cli.err"; do
		if [ "$(grep -cE "$re" "$f")" -ne 1 ]; then
			echo "# expected exactly one line matching /$re/ in ${f#"$WORK"/}:"
			show "$f"
			return 1
		fi
	done
	if grep -q -- '-> SMR' "$WORK"/fallback_$1.*.err; then
		echo "# a socket claims to be SMR"
		return 1
	fi
}

# A forking server and a multithreaded client, both under smr_run: every
# connection is served by a forked child on a socket of family $1, and every
# client thread's socket is of family $1 with its echo intact.
FORK_SERVER='
import os, socket, socketserver, sys
addr, log = sys.argv[1], open(sys.argv[2], "a", buffering=1)
class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        dom = self.request.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)
        n = 0
        while True:
            b = self.request.recv(65536)
            if not b:
                break
            self.request.sendall(b)
            n += len(b)
        log.write("pid=%d domain=%d bytes=%d\n" % (os.getpid(), dom, n))
class Server(socketserver.ForkingTCPServer):
    allow_reuse_address = True
    request_queue_size = 16
    address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET
srv = Server((addr, 0), Echo)
srv.timeout = 20
print("listening port=%d pid=%d domain=%d" % (srv.server_address[1], os.getpid(),
      srv.socket.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)), flush=True)
for _ in range(int(sys.argv[3])):
    srv.handle_request()
srv.server_close()
'
THREAD_CLIENTS='
import socket, sys, threading
addr, port, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out = [None] * n
def run(i):
    try:
        s = socket.create_connection((addr, port), timeout=20)
        dom = s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)
        data = bytes((i * 7 + j * 13) % 256 for j in range(size))
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = bytearray()
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
        s.close()
        out[i] = "client=%d domain=%d intact=%d" % (i, dom, got == data)
    except Exception as e:
        out[i] = "client=%d error=%r" % (i, e)
ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("\n".join(out))
'
t_forking_threads() {
	local fam=$1 addr=$2 n=8 size=30000 spid lport d=$WORK/fork
	"$SMR_RUN" -v "$PYTHON" -c "$FORK_SERVER" "$addr" "$d.log" "$n" \
		>"$d.srv.out" 2>"$d.srv.err" &
	spid=$!
	lport=$(wait_listening "$d.srv.out" "$spid") || { show "$d.srv.err"; return 1; }
	"$SMR_RUN" "$PYTHON" -c "$THREAD_CLIENTS" "$addr" "$lport" "$n" "$size" \
		>"$d.cli.out" 2>"$d.cli.err"
	wait "$spid"
	show "$d.srv.out" "$d.log" "$d.cli.out"
	local srvpid
	srvpid=$(sed -n 's/.* pid=\([0-9]*\).*/\1/p' "$d.srv.out")
	grep -q " domain=$fam\$" "$d.srv.out" || { echo "# listener not family $fam"; return 1; }
	[ "$(grep -c "^client=[0-9]* domain=$fam intact=1\$" "$d.cli.out")" -eq $n ] ||
		{ echo "# not all $n client threads had family $fam and an intact echo"; show "$d.cli.err"; return 1; }
	[ "$(grep -c "^pid=[0-9]* domain=$fam bytes=$size\$" "$d.log")" -eq $n ] ||
		{ echo "# not all $n served connections had family $fam and $size bytes"; show "$d.srv.err"; return 1; }
	[ "$(cut -d' ' -f1 "$d.log" | sort -u | grep -vc "^pid=$srvpid\$")" -eq $n ] ||
		{ echo "# connections were not served by $n distinct forked children"; return 1; }
}

# ------------------------------------------------------------------ host tests

t_host_build() {
	make -s -C "$SMR_REPO/tools" >"$WORK/make.out" 2>&1 || { show "$WORK/make.out"; return 1; }
	[ -x "$PROBE" ] && [ -f "$LIB" ] || return 1
	# Only the interposed functions are exported (setsockopt: SO_REUSEPORT
	# through SOL_SMR on 6.1).
	local syms
	syms=$(nm -D --defined-only "$LIB" | awk '$2 == "T" { print $3 }' | sort | tr '\n' ' ')
	echo "# exported: $syms"
	[ "$syms" = "bind connect setsockopt socket " ]
}

t_host_help() {
	local out k
	out=$("$SMR_RUN" --help) || return 1
	for k in SMR_VERBOSE SMR_PORTS SMR_ADDRS SMR_DISABLE SMR_FAMILY SMR_PRELOAD_LIB \
		 -v --ports --addrs; do
		grep -q -- "$k" <<<"$out" || { echo "# --help does not mention $k"; return 1; }
	done
}

t_host_not_loaded_true() {
	local err rc
	err=$("$SMR_RUN" -v true 2>&1)
	rc=$?
	echo "$err" | diag
	[ $rc -eq 0 ] && [ "$(grep -c '^smr_run: SMR module not loaded' <<<"$err")" -eq 1 ]
}

t_host_missing_lib() {
	local err rc
	err=$(SMR_PRELOAD_LIB=$WORK/nonexistent/libsmr-preload.so "$SMR_RUN" true 2>&1)
	rc=$?
	echo "$err" | diag
	[ $rc -eq 127 ] && grep -q 'cannot find libsmr-preload.so' <<<"$err"
}

t_host_bad_ports() {
	"$SMR_RUN" --ports 80,x true 2>&1 | diag
	[ "${PIPESTATUS[0]}" -eq 2 ] || return 1
	# The library itself rejects a bad list (and converts nothing).
	local err
	err=$(SMR_FAMILY=19 SMR_PORTS=70000 LD_PRELOAD=$LIB /bin/true 2>&1)
	echo "$err" | diag
	grep -q '^smr_run: bad SMR_PORTS "70000"' <<<"$err"
}

t_host_ld_preload_appended() {
	local out
	out=$(LD_PRELOAD=libm.so.6 "$SMR_RUN" sh -c 'echo "$LD_PRELOAD"') || return 1
	echo "# LD_PRELOAD=$out"
	[ "$out" = "libm.so.6:$(readlink -f "$LIB")" ]
}

t_host_install_layout() {
	local dest=$WORK/inst out
	make -s -C "$SMR_REPO/tools" install DESTDIR="$dest" PREFIX=/usr/local \
		>"$WORK/inst.out" 2>&1 || { show "$WORK/inst.out"; return 1; }
	out=$("$dest/usr/local/bin/smr_run" sh -c 'echo "$LD_PRELOAD"') || return 1
	echo "# LD_PRELOAD=$out"
	[ "$out" = "$dest/usr/local/lib/smr/libsmr-preload.so" ]
}

t_host_disable() {
	local err
	err=$(SMR_DISABLE=1 SMR_FAMILY=19 "$SMR_RUN" -v "$PROBE" -l -t 1 -b 127.0.0.1 0 2>&1 >/dev/null)
	echo "$err" | diag
	# Nothing logged (the probe itself times out, accepting nobody).
	! grep -q '^smr_run:' <<<"$err"
}

t_host_flags_fallback() {
	SRV_WRAP=(env SMR_FAMILY=19 "$SMR_RUN") CLI_WRAP=(env SMR_FAMILY=19 "$SMR_RUN")
	SRV_OPTS=(-f) CLI_OPTS=(-f)
	pair flags_fb 127.0.0.1 0 || return 1
	is_tcp_end "$CLI_LINE" && is_tcp_end "$SRV_LINE" &&
		has_words "$CLI_LINE" nonblock=1 cloexec=1 nodelay=1 &&
		has_words "$SRV_LINE" nonblock=1 cloexec=1 reuseaddr=1
}

t_host_filter_fallback() {
	SRV_WRAP=(env SMR_FAMILY=19 "$SMR_RUN" -v --addrs 127.0.0.0/8)
	CLI_WRAP=(env SMR_FAMILY=19 "$SMR_RUN" -v --addrs 127.0.0.0/8)
	SRV_OPTS=() CLI_OPTS=()
	pair filter_fb 127.0.0.1 0 || return 1
	is_tcp_end "$CLI_LINE" && is_tcp_end "$SRV_LINE" &&
		grep -q '^smr_run: socket(family 19, .*sockets stay TCP$' "$WORK/filter_fb.cli.err"
}

t_host_ipv6_fallback() {
	SRV_WRAP=("$SMR_RUN") CLI_WRAP=("$SMR_RUN") SRV_OPTS=() CLI_OPTS=()
	pair ipv6_fb ::1 0 || return 1
	is_tcp_end "$CLI_LINE" 10 && is_tcp_end "$SRV_LINE" 10
}

# ----------------------------------------------------------------- guest tests

t_module_loaded() {
	local f=/sys/module/smr/parameters/family
	if [ ! -r $f ]; then
		insmod "${SMR_KO:-$SMR_REPO/kernel/smr.ko}" 2>&1 | diag
	fi
	[ -x "$PROBE" ] && [ -f "$LIB" ] ||
		{ echo "# $PROBE or $LIB missing: run make -C tools first"; return 1; }
	FAM=$(cat $f 2>/dev/null) || return 1
	echo "# family=$FAM self=$SELF self6=$SELF6"
	[[ $FAM =~ ^[0-9]+$ ]] && [ -r /proc/net/smr/stats ]
}

t_smr_both_ends() {
	local before_c before_a before_s before_r
	before_c=$(stat_of connects) before_a=$(stat_of accepts)
	before_s=$(stat_of rdma_bytes_sent) before_r=$(stat_of rdma_bytes_received)
	SRV_WRAP=("$SMR_RUN") CLI_WRAP=("$SMR_RUN") SRV_OPTS=() CLI_OPTS=()
	pair smr4 "$SELF" 0 || return 1
	is_smr_end "$SRV_LINE" && is_smr_end "$CLI_LINE" || return 1
	# The module's per-namespace counters saw this one connection and its
	# bytes (both ends live in this namespace).
	local dc=$(($(stat_of connects) - before_c)) da=$(($(stat_of accepts) - before_a))
	local ds=$(($(stat_of rdma_bytes_sent) - before_s))
	local dr=$(($(stat_of rdma_bytes_received) - before_r))
	echo "# stats delta: connects $dc accepts $da rdma_bytes_sent $ds rdma_bytes_received $dr"
	[ $dc -eq 1 ] && [ $da -eq 1 ] && [ $ds -eq $((2 * BYTES)) ] && [ $dr -eq $((2 * BYTES)) ]
}

t_plain_without_smr_run() {
	SRV_WRAP=() CLI_WRAP=() SRV_OPTS=() CLI_OPTS=()
	pair plain4 "$SELF" 0 || return 1
	is_tcp_end "$SRV_LINE" && is_tcp_end "$CLI_LINE"
}

t_smr_client_plain_server() {
	SRV_WRAP=() CLI_WRAP=("$SMR_RUN") SRV_OPTS=() CLI_OPTS=()
	pair mixed4 "$SELF" 0 || return 1
	is_tcp_end "$SRV_LINE" && is_smr_end "$CLI_LINE" tcp
}

t_verbose_line() {
	SRV_WRAP=("$SMR_RUN" -v) CLI_WRAP=("$SMR_RUN" -v) SRV_OPTS=() CLI_OPTS=()
	pair verbose4 "$SELF" 0 || return 1
	is_smr_end "$SRV_LINE" && is_smr_end "$CLI_LINE" || return 1
	local f
	for f in "$WORK/verbose4.srv.err" "$WORK/verbose4.cli.err"; do
		show "$f"
		[ "$(grep -cE '^smr_run: fd [0-9]+ -> SMR \(AF_INET\)$' "$f")" -eq 1 ] || return 1
		[ "$(grep -c '^smr_run:' "$f")" -eq 1 ] || return 1
	done
}

t_ports_filter() {
	local p_in=5301 p_out=5302
	SRV_WRAP=("$SMR_RUN" -v --ports "$p_in,6000-6001") CLI_WRAP=("${SRV_WRAP[@]}")
	SRV_OPTS=() CLI_OPTS=()
	pair ports_in "$SELF" $p_in || return 1
	is_smr_end "$SRV_LINE" && is_smr_end "$CLI_LINE" || return 1
	grep -q "^smr_run: fd [0-9]* -> SMR (AF_INET) on bind $SELF port $p_in\$" "$WORK/ports_in.srv.err" &&
		grep -q "^smr_run: fd [0-9]* -> SMR (AF_INET) on connect $SELF port $p_in\$" "$WORK/ports_in.cli.err" ||
		{ show "$WORK"/ports_in.*.err; return 1; }
	pair ports_out "$SELF" $p_out || return 1
	is_tcp_end "$SRV_LINE" && is_tcp_end "$CLI_LINE" || return 1
	grep -q "^smr_run: fd [0-9]* stays TCP: connect $SELF port $p_out not in" "$WORK/ports_out.cli.err" ||
		{ show "$WORK"/ports_out.*.err; return 1; }
}

t_addrs_filter() {
	# Listener matches (its bind address is listed), client does not.
	SRV_WRAP=("$SMR_RUN" --addrs "$SELF/32") CLI_WRAP=("$SMR_RUN" --addrs 198.51.100.0/24)
	SRV_OPTS=() CLI_OPTS=()
	pair addrs_srv "$SELF" 0 || return 1
	is_smr_end "$SRV_LINE" tcp && is_tcp_end "$CLI_LINE" || return 1
	# And the other way round, with a prefix and an IPv6 entry in the list.
	SRV_WRAP=("$SMR_RUN" --addrs 198.51.100.1) CLI_WRAP=("$SMR_RUN" --addrs "fd00::/8,$SELF/24")
	pair addrs_cli "$SELF" 0 || return 1
	is_tcp_end "$SRV_LINE" && is_smr_end "$CLI_LINE" tcp
}

# SOCK_NONBLOCK/SOCK_CLOEXEC and options set before bind()/connect() survive,
# both when converted at socket() and when replaced in bind()/connect().
t_flags() {
	SRV_OPTS=(-f) CLI_OPTS=(-f)
	SRV_WRAP=("$SMR_RUN") CLI_WRAP=("$SMR_RUN")
	pair flags_sock "$SELF" 0 || return 1
	is_smr_end "$SRV_LINE" && is_smr_end "$CLI_LINE" &&
		has_words "$CLI_LINE" nonblock=1 cloexec=1 nodelay=1 &&
		has_words "$SRV_LINE" nonblock=1 cloexec=1 nodelay=1 reuseaddr=1 || return 1
	SRV_WRAP=("$SMR_RUN" --ports 5303) CLI_WRAP=("$SMR_RUN" --ports 5303)
	pair flags_filter "$SELF" 5303 || return 1
	is_smr_end "$SRV_LINE" && is_smr_end "$CLI_LINE" &&
		has_words "$CLI_LINE" nonblock=1 cloexec=1 nodelay=1 &&
		has_words "$SRV_LINE" nonblock=1 cloexec=1 nodelay=1 reuseaddr=1
}

t_ipv6() {
	SRV_WRAP=("$SMR_RUN" -v) CLI_WRAP=("$SMR_RUN" -v) SRV_OPTS=() CLI_OPTS=()
	pair smr6 "$SELF6" 0 || return 1
	is_smr_end "$SRV_LINE" && is_smr_end "$CLI_LINE" &&
		grep -qE '^smr_run: fd [0-9]+ -> SMR \(AF_INET6\)$' "$WORK/smr6.cli.err" ||
		{ show "$WORK"/smr6.*.err; return 1; }
	SRV_WRAP=("$SMR_RUN" --ports 5304) CLI_WRAP=("$SMR_RUN" --addrs "$SELF6/64")
	pair smr6_filter "$SELF6" 5304 || return 1
	is_smr_end "$SRV_LINE" && is_smr_end "$CLI_LINE"
}

# Last: unload the module, check smr_run falls back, load it again.
t_unloaded_fallback() {
	local active refs err
	# Closed sockets may take a moment to release the module.
	for _ in $(seq 50); do
		active=$(stat_of sockets_active)
		refs=$(cat /sys/module/smr/refcnt 2>/dev/null)
		[ "${active:-0}" = 0 ] && [ "${refs:-0}" = 0 ] && break
		sleep 0.2
	done
	if ! err=$(rmmod smr 2>&1); then
		echo "# rmmod smr failed (refcnt ${refs:-?}, sockets_active ${active:-?}): $err"
		return 1
	fi
	local rc=0
	t_fallback_echo not_loaded || rc=1
	insmod "${SMR_KO:-$SMR_REPO/kernel/smr.ko}" family="$FAM" 2>&1 | diag
	[ "$(cat /sys/module/smr/parameters/family 2>/dev/null)" = "$FAM" ] ||
		{ echo "# could not load the module again"; rc=1; }
	return $rc
}

# ---------------------------------------------------------------------- main

if [ $MODE = host ]; then
	TESTS=(
		"t_host_build|make builds the library (exporting socket/bind/connect/setsockopt) and smr-probe"
		"t_host_help|smr_run --help documents every knob"
		"t_host_not_loaded_true|smr_run -v true says the module is not loaded"
		"t_host_missing_lib|smr_run exits 127 when the library is missing"
		"t_host_bad_ports|bad --ports/SMR_PORTS are rejected"
		"t_host_ld_preload_appended|smr_run appends to an existing LD_PRELOAD"
		"t_host_install_layout|installed smr_run finds PREFIX/lib/smr/libsmr-preload.so"
		"t_host_disable|SMR_DISABLE=1 turns the library off"
		"t_fallback_echo not_loaded|no module: TCP echo through smr_run -v works, says why"
		"t_fallback_echo no_family|SMR socket() fails: TCP echo works, says why once"
		"t_host_flags_fallback|fallback keeps SOCK_NONBLOCK/SOCK_CLOEXEC and options"
		"t_host_filter_fallback|filter mode falls back to TCP when SMR socket() fails"
		"t_host_ipv6_fallback|IPv6 echo through smr_run falls back to TCP"
		"t_forking_threads 2 127.0.0.1|forking server and threaded clients under smr_run (TCP)"
	)
	[ -e /sys/module/smr ] && { echo "preload_test.sh: --host needs a machine without the smr module" >&2; exit 2; }
else
	SELF=${SMR_SELF_ADDR:-$(pick_addr 127.0.0.1 192.0.2.1 192.0.2.2)}
	SELF6=${SMR_SELF_ADDR6:-$(pick_addr ::1 fd53:4d52::1 fd53:4d52::2)}

	TESTS=(
		"t_module_loaded|smr module loaded, family readable, stats present"
		"t_smr_both_ends|smr_run: listener and client are SMR, mode rdma, byte counts exact (RDMA counters)"
		"t_plain_without_smr_run|without smr_run both ends are plain TCP"
		"t_smr_client_plain_server|SMR client talks to a plain TCP server"
		"t_verbose_line|smr_run -v prints one conversion line per socket"
		"t_ports_filter|--ports: listed port becomes SMR, other port stays TCP"
		"t_addrs_filter|--addrs: matching address becomes SMR, others stay TCP"
		"t_flags|SOCK_NONBLOCK/SOCK_CLOEXEC and options preserved (socket and filter mode)"
		"t_ipv6|IPv6 sockets become SMR (socket and filter mode)"
		"t_forking_threads FAM SELF|forking server and threaded clients under smr_run are SMR"
		"t_unloaded_fallback|after rmmod smr_run -v falls back to TCP and says so; module reloads"
	)
fi

echo "TAP version 13"
echo "1..${#TESTS[@]}"
failed=0
n=0
for t in "${TESTS[@]}"; do
	n=$((n + 1))
	cmd=${t%%|*}
	desc=${t#*|}
	cmd=${cmd//FAM/$FAM}
	cmd=${cmd//SELF/${SELF:-}}
	# A test that needs the module cannot pass without it.
	if [ $MODE = guest ] && [ $n -gt 1 ] && [ -z "$FAM" ]; then
		echo "not ok $n - $desc # module not loaded"
		failed=$((failed + 1))
		continue
	fi
	# shellcheck disable=SC2086
	if $cmd >"$WORK/test.log" 2>&1; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		failed=$((failed + 1))
	fi
	sed 's/^\([^#]\)/# \1/' "$WORK/test.log"
done
[ $failed -eq 0 ] && exit 0
echo "# $failed of ${#TESTS[@]} failed"
exit 1
