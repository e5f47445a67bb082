#!/bin/bash
# bench/tlscost.sh: what TLS adds to the agent, TLS and plain TCP
# alternating on one tree, without trace-cmd or a file count (minutes,
# not the quarter of an hour of bench/run.sh --stream).  See
# bench/README.md, "TLS at the cost of the cipher".
#
#	sudo bench/tlscost.sh [--runs R] [--blocks N] [--strace] [TREE]
#
# Each run: a fresh tdlisten (TLS, or --insecure), `tdagent -h 127.0.0.1
# ... -e raw_syscalls` (every process's syscalls, the default ring), and
# once its instance records, dd bs=1 count=N (2,000,000 by default)
# outside it; the recorder's utime + stime from /proc/PID/stat over the
# storm (dd and 0.3 s after it), the ring MB from the agent's summary line
# (10^6 bytes).  --strace attaches `strace -f -c` to the recorder for the
# storm instead: system calls per ring MB (strace slows the recorder; the
# counts, not the CPU, are the figure).  Each run holds /tmp/td-bench.lock.
# TREE (default: this one) must be built (sh scripts/build.sh build).
set -euo pipefail

RUNS=3
N=2000000
STRACE=0
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift 2 ;;
	--blocks) N=$2; shift 2 ;;
	--strace) STRACE=1; shift ;;
	-*) echo "usage: $0 [--runs R] [--blocks N] [--strace] [TREE]" >&2
	    exit 2 ;;
	*) break ;;
	esac
done
S=$(cd "$(dirname "$0")/.." && pwd)
T=$(cd "${1:-$S}" && pwd)
# shellcheck source=bench/lib.sh
. "$S/bench/lib.sh"
[ -x "$T/build/tdagent" ] && [ -x "$T/build/tdlisten" ] ||
    { echo "tlscost.sh: $T: not built (sh scripts/build.sh build)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "tlscost.sh: must run as root" >&2; exit 1; }
TMP=$(mktemp -d /tmp/td-tlscost.XXXXXX)
chmod 755 "$TMP"
LPID=""
APID=""
cleanup() {
	local p
	for p in $APID $LPID; do
		kill -TERM "$p" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
cp "$T/build/tdagent" "$T/build/tdlisten" "$TMP/"
PKI=$TMP/pki
pki "$PKI" web1 >"$TMP/pki.log" 2>&1 ||
    { echo "tlscost.sh: scripts/tdcert failed" >&2; exit 1; }

# one MODE: prints "MODE ticks MB" (or the strace table)
one() {
	local mode=$1 port d sec_l sec_a r t0 t1 sp=""

	port=$(free_port)
	d=$TMP/out-$mode
	rm -rf "$d"
	mkdir -p "$d"
	if [ "$mode" = tls ]; then
		sec_l=(--cert "$PKI/listener.pem" --key "$PKI/listener.key"
		    --ca "$PKI/ca.pem")
		sec_a=(--cert "$PKI/web1.pem" --key "$PKI/web1.key"
		    --ca "$PKI/ca.pem")
	else
		sec_l=(--insecure)
		sec_a=(--insecure)
	fi
	"$TMP/tdlisten" -p "$port" -d "$d" "${sec_l[@]}" >"$TMP/l.log" 2>&1 &
	LPID=$!
	wait_listening "$port" || true
	"$TMP/tdagent" -h 127.0.0.1 -p "$port" "${sec_a[@]}" \
	    -e raw_syscalls >"$TMP/a.out" 2>"$TMP/a.err" &
	APID=$!
	wait_recording "$APID" || true
	sleep 0.5
	r=$(pgrep -P "$APID" | head -1)
	if [ "$STRACE" = 1 ]; then
		strace -f -c -o "$TMP/strace" -p "$r" 2>/dev/null &
		sp=$!
		sleep 1
	fi
	t0=$(awk '{ print $14 + $15 }' "/proc/$r/stat")
	dd if=/dev/zero of=/dev/null bs=1 count="$N" status=none
	sleep 0.3
	t1=$(awk '{ print $14 + $15 }' "/proc/$r/stat")
	if [ -n "$sp" ]; then
		kill -INT "$sp"
		wait "$sp" || true
	fi
	kill -INT "$APID"
	wait "$APID" || true
	APID=""
	for _ in $(seq 300); do
		[ -z "$(find "$d" -name '*.part')" ] &&
		    [ -n "$(find "$d" -name '*.dat')" ] && break
		sleep 0.2
	done
	kill -TERM "$LPID"
	wait "$LPID" || true
	LPID=""
	# "cpu0 N events X MB, cpu1 ..." of the summary line
	mb=$(grep -o 'cpu[0-9]* [0-9]* events [0-9.]* MB' "$TMP/a.err" |
	    awk '{ s += $4 } END { print s + 0 }')
	if [ "$STRACE" = 1 ]; then
		echo "# $mode: system calls per ring MB ($mb MB)"
		awk -v mb="$mb" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ {
		    printf "#   %-12s %8.1f\n", $NF, $4 / mb }' "$TMP/strace"
	fi
	echo "$mode $((t1 - t0)) $mb"
}

TICK=$(getconf CLK_TCK)
echo "# bench/tlscost.sh $(date -u '+%F %H:%M') UTC, $(uname -r)," \
    "$(nproc) CPUs, tree $(git -C "$T" rev-parse --short HEAD), blocks $N"
echo "# run mode load CPU_ms ring_MB ms_per_MB"
for k in $(seq "$RUNS"); do
	for m in tls tcp; do
		exec 8>/tmp/td-bench.lock
		flock 8
		read -r load _ </proc/loadavg
		one "$m" >"$TMP/one"
		exec 8>&-
		grep '^#' "$TMP/one" || true
		read -r mode ticks mb < <(grep -v '^#' "$TMP/one")
		awk -v k="$k" -v m="$ticks" -v mb="$mb" -v hz="$TICK" \
		    -v l="$load" -v mode="$mode" 'BEGIN { ms = m * 1000 / hz
		    printf "%s %s %s %d %.1f %.3f\n", k, mode, l, ms, mb,
		    (mb > 0 ? ms / mb : 0) }'
	done
done
