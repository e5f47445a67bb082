#!/bin/sh
# deps.sh [--build]: install the Debian 12 packages tracedock needs to
# build, test and benchmark (with --build: only to build it and run it with
# trace-cmd's report, as scripts/demo.sh does: no QEMU, uftrace, valgrind or
# browser); does nothing when they are all present.  Run as root.
# tests/e2e-guest.sh boots a QEMU guest: qemu-system-x86, busybox-static
# and cpio (the guest's kernel is downloaded by the test, with apt-get).
# tests/e2e-uftrace.sh runs the real uftrace 0.13 (uftrace record --host).
# tests/e2e-http.sh reads tdlisten --http with curl and jq, checks /metrics
# with promtool (prometheus) and loads the page in headless chromium (about
# 145 MB to download, 750 MB installed: 22 s from a nearby mirror).
# tests/e2e-service.sh checks systemd/tdlisten.service with systemd-analyze
# (the systemd package: installed, never started).
# tests/e2e-tsync.sh opens a time-synced file in KernelShark under xvfb
# (kernelshark, xvfb, xauth) to see that it warns of nothing.
set -eu
PKGS="build-essential autoconf automake libtool pkg-config
libevent-dev libssl-dev zlib1g-dev libzstd-dev
libtracefs-dev libtraceevent-dev trace-cmd util-linux procps openssl"
[ "${1:-}" = --build ] || PKGS="$PKGS libtracecmd-dev libcmocka-dev
time iproute2 valgrind
qemu-system-x86 busybox-static cpio uftrace
curl jq prometheus chromium systemd kernelshark xvfb xauth"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
	    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "deps.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
