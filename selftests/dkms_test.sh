#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The module as a distribution installs it: in one QEMU guest booted
# without smr (scripts/vm-run --no-smr) on the kernel SMR_VM_KERNEL names
# (6.12 by default, 6.1 with --kernel 6.1 or SMR_TEST_KERNELS), Debian's
# dkms builds smr.ko from what `make dkms-install` put in
# /usr/src/smr-VERSION, for the running kernel, against its headers; then
# `modprobe smr` must load it (with its RDMA dependencies), modinfo must
# name the version dkms-install wrote, a socket of the family must open
# and /proc/net/smr/stats count it, and rmmod must unload it. The guest's
# root is a throw-away overlay over the host's, so /usr/src, /var/lib/dkms
# and /lib/modules are written in the guest only.
#
#   selftests/dkms_test.sh    TAP 13 on stdout; exit 0 iff all pass
#
# Environment: SMR_DKMS_TIMEOUT (vm-run timeout in s, default 1800: the
# build alone takes minutes under TCG), SMR_DKMS_MODPROBE_ARGS (options for
# modprobe smr, e.g. family=0 to see the suite fail).
set -uo pipefail

repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)

tests=(
	"make dkms-install writes /usr/src/smr-VERSION with dkms.conf, the sources and kernel/VERSION"
	"dkms install smr/VERSION builds and installs smr.ko for the running kernel"
	"modprobe smr loads the DKMS module (modinfo version is VERSION), a socket of the family opens and /proc/net/smr/stats counts it"
	"rmmod smr unloads it"
)

if [ "${1:-}" != --guest ]; then
	if ! dry=$("$repo/scripts/vm-run" --no-smr --dry-run 2>&1); then
		echo "TAP version 13"
		echo "1..${#tests[@]}"
		for i in "${!tests[@]}"; do
			echo "not ok $((i + 1)) - ${tests[$i]}"
			echo "# $dry"
		done
		exit 1
	fi
	echo "# kernel $(sed -n 's/^kernel=//p' <<<"$dry"), guest without smr"
	args=
	[ -z "${SMR_DKMS_MODPROBE_ARGS:-}" ] ||
		args="SMR_DKMS_MODPROBE_ARGS=$(printf '%q' "$SMR_DKMS_MODPROBE_ARGS")"
	exec "$repo/scripts/vm-run" --hosts 1 --no-smr \
		--timeout "${SMR_DKMS_TIMEOUT:-1800}" -- \
		"$args $repo/selftests/dkms_test.sh --guest"
fi

# ---- inside the guest ----
export PATH="$PATH:/usr/sbin:/sbin"
release=$(uname -r)
n=0
fails=0
tap() {	# tap ok|fail [DIAG...]: the next test's result
	local v=$1
	shift
	n=$((n + 1))
	if [ "$v" = ok ]; then
		echo "ok $n - ${tests[$((n - 1))]}"
	else
		echo "not ok $n - ${tests[$((n - 1))]}"
		fails=$((fails + 1))
	fi
	[ $# = 0 ] || printf '%s\n' "$@" | sed 's/^/# /'
}
# the rest fail with the reason when an earlier step leaves nothing to test
skip_rest() {
	while [ "$n" -lt ${#tests[@]} ]; do
		tap fail "not run: $1"
	done
	exit 1
}

echo "TAP version 13"
echo "1..${#tests[@]}"
if [ -e /sys/module/smr ]; then
	tap fail "smr is already loaded: the guest must boot without it (vm-run --no-smr)"
	skip_rest "smr was loaded before DKMS built it"
fi

t0=$SECONDS
log=$(make -C "$SMR_REPO" dkms-install 2>&1)
src=$(sed -n 's/^dkms-install: \(\/usr\/src\/smr-[^ ]*\) .*/\1/p' <<<"$log")
version=${src#/usr/src/smr-}
if [ -n "$src" ] && [ -s "$src/dkms.conf" ] && [ -s "$src/kernel/Kbuild" ] &&
	[ "$(cat "$src/kernel/VERSION" 2>/dev/null)" = "$version" ] &&
	grep -qx "PACKAGE_VERSION=\"$version\"" "$src/dkms.conf"; then
	tap ok "$src: $(find "$src" -type f | wc -l) files in $((SECONDS - t0)) s"
else
	tap fail "$log" "$(find "$src" 2>&1 | head -n 20)"
	skip_rest "make dkms-install failed"
fi

t0=$SECONDS
log=$(dkms install "smr/$version" -k "$release" 2>&1)
rc=$?
build_s=$((SECONDS - t0))
ko=$(find "/lib/modules/$release/updates" -name 'smr.ko*' 2>/dev/null | head -n 1)
status=$(dkms status "smr/$version" -k "$release" 2>&1)
if [ "$rc" = 0 ] && [ -n "$ko" ] && grep -q installed <<<"$status"; then
	tap ok "dkms built and installed $ko for $release in $build_s s" "dkms status: $status"
else
	tap fail "dkms install exited $rc after $build_s s; status: $status" \
		"$(tail -n 20 <<<"$log")" \
		"$(tail -n 20 "/var/lib/dkms/smr/$version/build/make.log" 2>/dev/null)"
	skip_rest "dkms did not install smr"
fi
echo "# dkms build time on $release: $build_s s"

read -ra modprobe_args <<<"${SMR_DKMS_MODPROBE_ARGS:-}"
err=$(modprobe smr "${modprobe_args[@]}" 2>&1)
rc=$?
family=$(cat /sys/module/smr/parameters/family 2>/dev/null)
mod_version=$(modinfo -F version smr 2>/dev/null)
loaded_from=$(modinfo -n smr 2>/dev/null)
before=$(awk '$1 == "sockets_created" { print $2 }' /proc/net/smr/stats 2>/dev/null)
sock=$(python3 -c '
import socket, sys
s = socket.socket(int(sys.argv[1]), socket.SOCK_STREAM, 0)
print("opened fd", s.fileno())
s.close()' "${family:-0}" 2>&1)
sock_rc=$?
after=$(awk '$1 == "sockets_created" { print $2 }' /proc/net/smr/stats 2>/dev/null)
if [ "$rc" = 0 ] && [ -n "$family" ] && [ "$mod_version" = "$version" ] &&
	[ "$loaded_from" = "$ko" ] && [ "$sock_rc" = 0 ] &&
	[ -n "$before" ] && [ "${after:-0}" -gt "$before" ]; then
	tap ok "family $family, version $mod_version from $loaded_from; socket: $sock; sockets_created $before -> $after"
else
	tap fail "modprobe smr ${modprobe_args[*]}: exit $rc${err:+: $err}" \
		"family '${family}', modinfo version '$mod_version' (want '$version'), file '$loaded_from' (want '$ko')" \
		"socket: $sock" "sockets_created '$before' -> '$after'"
fi

if [ ! -e /sys/module/smr ]; then
	tap fail "smr is not loaded"
elif err=$(rmmod smr 2>&1) && [ ! -e /sys/module/smr ]; then
	tap ok
else
	tap fail "rmmod smr: $err (refcnt $(cat /sys/module/smr/refcnt 2>/dev/null))"
fi
[ "$fails" = 0 ]
