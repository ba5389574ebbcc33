#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Host B's side of selftests/apps_test.sh (runs in a scripts/vm-run guest).
# Starts unmodified servers through smr_run, then the control service that
# host A's a_clients.sh talks to, and runs until vm-run stops it (SIGTERM).
#
#   iperf3 -s                         port 5201 (IPv4 and IPv6)
#   redis-server                      port 6379 on 0.0.0.0 and ::
#   socat receiver                    port 5301 (IPv4): A's file into
#                                     copy4.bin; sha256 -> copy4.sha256
#   socat sender                      port 5302 (IPv6): B's random file to A;
#                                     its sha256 -> copy6.sha256
#
# Everything B has to say goes to SMR_VM_OUT (server logs, checksums, the
# counters at start and at stop); the host side reads it after the run.
#
# Environment: SMR_APPS_COPY_BYTES (size of the file B sends, default 32 MiB)
set -uo pipefail

# shellcheck source=selftests/apps/smr_apps_lib.sh
. "$SMR_REPO/selftests/apps/smr_apps_lib.sh"

out=$SMR_VM_OUT
work=/tmp/smr-apps-b
copy_bytes=${SMR_APPS_COPY_BYTES:-33554432}
mkdir -p "$work"

smr_b_log() {
	echo "b_servers: $*"
}

smr_b_stop() {
	trap - TERM INT
	cat "$SMR_APPS_STATS" >"$out/stats-b.end" 2>&1
	smr_b_log "stopping; final counters in stats-b.end"
	jobs -p | xargs -r kill 2>/dev/null
	exit 0
}
trap smr_b_stop TERM INT

if ! smr_apps_have_stats; then
	smr_b_log "FATAL: $SMR_APPS_STATS missing: is smr.ko loaded?"
	echo "no $SMR_APPS_STATS" >"$out/fatal"
fi
cat "$SMR_APPS_STATS" >"$out/stats-b.start" 2>&1

# The file B sends to A over IPv6.
head -c "$copy_bytes" /dev/urandom >"$work/copy6.bin"
sha256sum "$work/copy6.bin" | cut -d' ' -f1 >"$out/copy6.sha256.tmp" &&
	mv "$out/copy6.sha256.tmp" "$out/copy6.sha256"

"$SMR_RUN" -v iperf3 -s -p 5201 --forceflush >"$out/iperf3-server.log" 2>&1 &

"$SMR_RUN" -v redis-server --port 6379 --bind '0.0.0.0 ::' \
	--protected-mode no --save '' --appendonly no \
	>"$out/redis-server.log" 2>&1 &

# One-shot socat transfers; each records its exit status and, for the
# receiver, the checksum of what arrived.
(
	"$SMR_RUN" -v socat -d -d -u TCP4-LISTEN:5301,reuseaddr \
		"CREATE:$work/copy4.bin" >"$out/socat-recv4.log" 2>&1
	echo $? >"$out/copy4.status"
	{ sha256sum "$work/copy4.bin" 2>/dev/null || echo none; } | cut -d' ' -f1 \
		>"$out/copy4.sha256.tmp"
	stat -c %s "$work/copy4.bin" >"$out/copy4.size" 2>/dev/null || echo 0 >"$out/copy4.size"
	mv "$out/copy4.sha256.tmp" "$out/copy4.sha256"
	rm -f "$work/copy4.bin"
) &
(
	"$SMR_RUN" -v socat -d -d -u "OPEN:$work/copy6.bin" TCP6-LISTEN:5302,reuseaddr \
		>"$out/socat-send6.log" 2>&1
	echo $? >"$out/copy6.status"
) &

# Ready means every server is listening; each says so in its own way.
smr_b_ready() {
	grep -q 'Server listening' "$out/iperf3-server.log" 2>/dev/null &&
		redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG &&
		grep -q 'listening on' "$out/socat-recv4.log" 2>/dev/null &&
		grep -q 'listening on' "$out/socat-send6.log" 2>/dev/null
}
ok=0
for _ in $(seq 600); do
	if smr_b_ready; then
		ok=1
		break
	fi
	sleep 0.2
done
if [ "$ok" = 1 ]; then
	smr_b_log "servers listening"
else
	smr_b_log "servers did not all come up in 120 s; logs follow"
	tail -n 20 "$out"/*.log
fi

socat TCP4-LISTEN:$SMR_APPS_CTL_PORT,reuseaddr,fork \
	"EXEC:bash $SMR_REPO/selftests/apps/b_control.sh" >"$out/control.log" 2>&1 &
[ "$ok" = 1 ] && : >"$out/ready"

# Until SIGTERM (bash runs the trap once the current wait returns).
while :; do
	sleep 1 &
	wait $!
done
