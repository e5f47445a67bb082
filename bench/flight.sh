#!/usr/bin/env bash
# bench/flight.sh: what an armed flight recorder costs (issue 30), side by
# side on one listener: N idle standby agents and N armed ones
# (sched:sched_switch, a 1024 KB ring per CPU, a trigger on ftrace:print),
# each agent's CPU (user + system, /proc/PID/stat) over T seconds; then the
# time from tdctl snapshot to its exit (every armed agent's file in place)
# and from a trigger (a trace_marker write) to the last file of its
# snapshot, and the bytes per file.
#
# usage: bench/flight.sh [-n N] [-t SECONDS] [-b BUILDDIR]
#
# Run as root, on a quiet machine (other load moves the CPU figures).
set -euo pipefail

N=20
T=60
BDIR=build
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-t) T=$2; shift 2 ;;
	-b) BDIR=$2; shift 2 ;;
	*) sed -n 's/^# usage: /usage: /p' "$0"; exit 2 ;;
	esac
done
TOP=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$BDIR" && pwd)
TMP=$(mktemp -d /tmp/tdflight.XXXXXX)
. "$TOP/bench/lib.sh"
PIDS=()
LPID=""
cleanup() {
	[ ${#PIDS[@]} -gt 0 ] && kill "${PIDS[@]}" 2>/dev/null || true
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -n "$LPID" ] && kill "$LPID" 2>/dev/null && wait "$LPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

names=()
for i in $(seq 1 "$N"); do
	names+=("idle$(printf %03d "$i")" "arm$(printf %03d "$i")")
done
sh "$TOP/scripts/tdcert" init "$TMP/pki" >/dev/null
sh "$TOP/scripts/tdcert" issue "$TMP/pki" listener --server >/dev/null
for a in "${names[@]}"; do
	sh "$TOP/scripts/tdcert" issue "$TMP/pki" "$a" >/dev/null
done
PORT=$(free_port)
CTL=$TMP/control
"$B/tdlisten" -p "$PORT" -d "$TMP/out" --control "$CTL" \
    --cert "$TMP/pki/listener.pem" --key "$TMP/pki/listener.key" \
    --ca "$TMP/pki/ca.pem" 2>"$TMP/listen.log" &
LPID=$!
wait_listening "$PORT"
printf 'allow-events sched, ftrace:print\nallow-arm yes\n' >"$TMP/agent.conf"
declare -A PID
for a in "${names[@]}"; do
	"$B/tdagent" --standby -q -c "$TMP/agent.conf" -h 127.0.0.1 \
	    -p "$PORT" --cert "$TMP/pki/$a.pem" --key "$TMP/pki/$a.key" \
	    --ca "$TMP/pki/ca.pem" 2>"$TMP/$a.err" &
	PIDS+=($!)
	PID[$a]=$!
done
for _ in $(seq 600); do
	[ "$("$B/tdctl" -S "$CTL" list --json 2>/dev/null | jq length)" = \
	    $((2 * N)) ] && break
	sleep 0.1
done
"$B/tdctl" -S "$CTL" arm --hosts 'arm*' -e sched:sched_switch -b 1024 \
    --name bench --trigger 'ftrace:print if buf ~ "*FLIGHTBENCH*"' \
    --trigger-holdoff 1 >"$TMP/arm.out"
[ "$(grep -c '^armed ' "$TMP/arm.out")" = "$N" ] ||
    { cat "$TMP/arm.out"; echo "bench/flight: not all armed" >&2; exit 1; }

# ticks: user + system clock ticks of process $1
ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}
declare -A T0
for a in "${names[@]}"; do T0[$a]=$(ticks "${PID[$a]}"); done
sleep "$T"
hz=$(getconf CLK_TCK)
idle=0
armed=0
for a in "${names[@]}"; do
	d=$(($(ticks "${PID[$a]}") - T0[$a]))
	case $a in idle*) idle=$((idle + d)) ;; *) armed=$((armed + d)) ;; esac
done
echo "CPU over $T s, $N agents each (ms per agent, user + system):"
echo "  idle standby: $(awk -v t=$idle -v n=$N -v hz=$hz 'BEGIN { printf "%.1f", t * 1000 / hz / n }')"
echo "  armed:        $(awk -v t=$armed -v n=$N -v hz=$hz 'BEGIN { printf "%.1f", t * 1000 / hz / n }')"

t0=$(date +%s%N)
"$B/tdctl" -S "$CTL" snapshot --hosts 'arm*' --name snap >"$TMP/snap.out"
t1=$(date +%s%N)
echo "tdctl snapshot -> its exit (all $(grep -c '^file ' "$TMP/snap.out") files in place): $(((t1 - t0) / 1000000)) ms"
ls -l "$TMP"/out/arm*/*-snap.dat | awk '{ s += $5; n++ }
    END { printf "bytes per file: %d (mean of %d)\n", s / n, n }'

sleep 2
t0=$(date +%s%N)
echo "FLIGHTBENCH" >/sys/kernel/tracing/trace_marker
for _ in $(seq 1200); do
	[ "$(ls "$TMP"/out/arm*/*-bench.trig.*.dat 2>/dev/null | wc -l)" -ge "$N" ] &&
	    break
	sleep 0.05
done
t1=$(date +%s%N)
echo "trigger -> the last of $(ls "$TMP"/out/arm*/*-bench.trig.*.dat 2>/dev/null | wc -l) files in place: $(((t1 - t0) / 1000000)) ms (polled every 50 ms)"
"$B/tdctl" -S "$CTL" disarm >/dev/null
