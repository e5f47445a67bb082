#!/bin/bash
# bench/rssparts.sh: what the agent's peak RSS is made of.  See
# bench/README.md, "A smaller agent".
#
#	sudo bench/rssparts.sh [--runs R] [--blocks N] [--tcp] TREE...
#
# For each run and each TREE in turn (built: sh scripts/build.sh build):
# a fresh tdlisten, `tdagent -h 127.0.0.1 -e raw_syscalls` (TLS, or plain
# TCP with --tcp; the defaults otherwise), and once its instance records,
# dd bs=1 count=N (5,000,000 by default).  The parent's and the
# recorder's /proc/PID/smaps are sampled every 20 ms and the one of the
# largest Rss kept (the figure a sampler sees: a lower bound of VmHWM).
# Printed per run: /usr/bin/time's %M (the largest of the parent and the
# recorder, as bench/rss.sh and bench/all.sh count it), the sampled peak
# of each, and the recorder's peak by kind of mapping: the stream's
# queue (the largest anonymous mapping), other anonymous memory (heap,
# malloc's other mappings, the libraries' data, the stack) and the
# libraries' file pages (libcrypto, libc, ...).  Files are kept in
# /tmp/td-rssparts.*/ (the smaps at the peaks).  Run as root.
set -euo pipefail

RUNS=3
N=5000000
MODE=tls
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift 2 ;;
	--blocks) N=$2; shift 2 ;;
	--tcp) MODE=tcp; shift ;;
	-*) echo "usage: $0 [--runs R] [--blocks N] [--tcp] TREE..." >&2
	    exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || set -- "$(cd "$(dirname "$0")/.." && pwd)"
S=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$S/bench/lib.sh"
[ "$(id -u)" = 0 ] || { echo "rssparts.sh: must run as root" >&2; exit 1; }
TMP=$(mktemp -d /tmp/td-rssparts.XXXXXX)
PKI=$TMP/pki
pki "$PKI" web1 >"$TMP/pki.log" 2>&1 ||
    { echo "rssparts.sh: scripts/tdcert failed" >&2; exit 1; }
if [ "$MODE" = tls ]; then
	SL=(--cert "$PKI/listener.pem" --key "$PKI/listener.key"
	    --ca "$PKI/ca.pem")
	SA=(--cert "$PKI/web1.pem" --key "$PKI/web1.key" --ca "$PKI/ca.pem")
else
	SL=(--insecure)
	SA=(--insecure)
fi

# peak PID OUT: the smaps of PID's largest Rss into OUT.smaps, that Rss
# (KiB) into OUT.max, sampled until PID exits
peak() {
	local p=$1 o=$2 max=0 r

	while r=$(awk '/^Rss:/ { print $2 }' "/proc/$p/smaps_rollup" \
	    2>/dev/null) && [ -n "$r" ]; do
		if [ "$r" -gt "$max" ] &&
		    cat "/proc/$p/smaps" >"$o.tmp" 2>/dev/null; then
			mv "$o.tmp" "$o.smaps"
			max=$r
		fi
		sleep 0.02
	done
	echo "$max" >"$o.max"
}

# parts SMAPS: "queue other-anon files" in KiB
parts() {
	awk '/^[0-9a-f]+-[0-9a-f]+ / { file = NF >= 6 && $6 ~ /^\//; next }
	    /^Rss:/ { rss = $2; next }
	    /^Anonymous:/ { if (!file && rss > q) q = rss
		anon += $2; if (file) frss += rss - $2 }
	    END { printf "%.1f %.1f %.1f", q / 1024, (anon - q) / 1024,
		frss / 1024 }' "$1"
}

# one TREE OUT
one() {
	local b=$1/build o=$2 port l t a r w1 w2

	rm -rf "$o"
	mkdir -p "$o/l"
	port=$(free_port)
	"$b/tdlisten" -p "$port" -d "$o/l" "${SL[@]}" >"$o/l.log" 2>&1 &
	l=$!
	wait_listening "$port" || true
	/usr/bin/time -f '%M' -o "$o/time" "$b/tdagent" -h 127.0.0.1 \
	    -p "$port" "${SA[@]}" -e raw_syscalls >"$o/a.out" 2>"$o/a.err" &
	t=$!
	a=""
	for _ in $(seq 100); do
		a=$(pgrep -P "$t" | head -1 || true)
		[ -z "$a" ] || break
		sleep 0.02
	done
	peak "$a" "$o/parent" &
	w1=$!
	wait_recording "$a" || true
	r=$(pgrep -P "$a" | head -1)
	peak "$r" "$o/rec" &
	w2=$!
	sleep 0.5
	dd if=/dev/zero of=/dev/null bs=1 count="$N" status=none
	sleep 0.5
	kill -INT "$a"
	wait "$t" || true
	wait "$w1" "$w2"
	for _ in $(seq 300); do
		[ -z "$(find "$o/l" -name '*.part')" ] && break
		sleep 0.2
	done
	kill -TERM "$l"
	wait "$l" || true
}

echo "# bench/rssparts.sh $(date -u '+%F %H:%M') UTC, $(uname -r)," \
    "$(nproc) CPUs, $MODE, blocks $N; MB (2^20 bytes)"
echo "# run tree load %M parent recorder: queue other-anon files"
for k in $(seq "$RUNS"); do
	for tree in "$@"; do
		read -r load _ </proc/loadavg
		o=$TMP/$k-$(basename "$tree")
		one "$tree" "$o"
		printf '%s %s %s %.1f %.1f %.1f: %s\n' "$k" \
		    "$(git -C "$tree" rev-parse --short HEAD)" "$load" \
		    "$(awk '{ print $1 / 1024 }' "$o/time")" \
		    "$(awk '{ print $1 / 1024 }' "$o/parent.max")" \
		    "$(awk '{ print $1 / 1024 }' "$o/rec.max")" \
		    "$(parts "$o/rec.smaps")"
	done
done
echo "# smaps at the peaks: $TMP"
