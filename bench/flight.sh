#!/usr/bin/env bash
# bench/flight.sh: what an armed flight recorder costs (issue 30), side by
# side on one listener: N idle standby agents and N armed ones
# (sched:sched_switch, a 1024 KB ring per CPU, a trigger on ftrace:print),
# each agent's CPU (user + system, /proc/PID/stat) over T seconds; then the
# time from tdctl snapshot to its exit (every armed agent's file in place)
# and from a trigger (a trace_marker write) to the last file of its
# snapshot, and the bytes per file.  With -B, N more armed agents run
# from another build (say, the tree before a change) in the same run,
# armed the same way (their own group and marker): the before and after
# side by side, under the same load.  CPU is given as clock ticks
# (utime + stime, /proc/PID/stat) and as the scheduler's ns
# (/proc/PID/schedstat, finer than a tick), per agent, and as the ratio of
# armed to idle.
#
# usage: bench/flight.sh [-n N] [-t SECONDS] [-b BUILDDIR] [-B BUILDDIR]
#
# Run as root, on a quiet machine (other load moves the CPU figures).
set -euo pipefail

N=20
T=60
BDIR=build
BEFORE=""
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-t) T=$2; shift 2 ;;
	-b) BDIR=$2; shift 2 ;;
	-B) BEFORE=$(cd "$2" && pwd); shift 2 ;;
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
	[ -n "$BEFORE" ] && names+=("old$(printf %03d "$i")")
done
NG=2
[ -n "$BEFORE" ] && NG=3
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
	bin=$B
	case $a in old*) bin=$BEFORE ;; esac
	"$bin/tdagent" --standby -q -c "$TMP/agent.conf" -h 127.0.0.1 \
	    -p "$PORT" --cert "$TMP/pki/$a.pem" --key "$TMP/pki/$a.key" \
	    --ca "$TMP/pki/ca.pem" 2>"$TMP/$a.err" &
	PIDS+=($!)
	PID[$a]=$!
done
for _ in $(seq 600); do
	[ "$("$B/tdctl" -S "$CTL" list --json 2>/dev/null | jq length)" = \
	    $((NG * N)) ] && break
	sleep 0.1
done
"$B/tdctl" -S "$CTL" arm --hosts 'arm*' -e sched:sched_switch -b 1024 \
    --name bench --trigger "ftrace:print if buf ~ \"*FLIGHTBENCH-$$*\"" \
    --trigger-holdoff 1 >"$TMP/arm.out"
[ "$(grep -c '^armed ' "$TMP/arm.out")" = "$N" ] ||
    { cat "$TMP/arm.out"; echo "bench/flight: not all armed" >&2; exit 1; }
if [ -n "$BEFORE" ]; then
	"$B/tdctl" -S "$CTL" arm --hosts 'old*' -e sched:sched_switch \
	    -b 1024 --name benchold \
	    --trigger "ftrace:print if buf ~ \"*FLIGHTOLD-$$*\"" \
	    --trigger-holdoff 1 >"$TMP/armold.out"
	[ "$(grep -c '^armed ' "$TMP/armold.out")" = "$N" ] ||
	    { cat "$TMP/armold.out"; echo "bench/flight: not all armed" >&2
	    exit 1; }
fi

# ticks: user + system clock ticks of process $1
ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}
# ns: the ns process $1 ran, as the scheduler counts (its threads: one)
ns() {
	awk '{ print $1 }' "/proc/$1/schedstat"
}
# wakes: the times process $1 slept and was woken
wakes() {
	awk '$1 == "voluntary_ctxt_switches:" { print $2 }' "/proc/$1/status"
}
declare -A T0 S0 W0
for a in "${names[@]}"; do
	T0[$a]=$(ticks "${PID[$a]}")
	S0[$a]=$(ns "${PID[$a]}")
	W0[$a]=$(wakes "${PID[$a]}")
done
sleep "$T"
hz=$(getconf CLK_TCK)
declare -A TK SN WK
for g in idle arm old; do TK[$g]=0; SN[$g]=0; WK[$g]=0; done
for a in "${names[@]}"; do
	g=${a%%[0-9]*}
	TK[$g]=$((TK[$g] + $(ticks "${PID[$a]}") - T0[$a]))
	SN[$g]=$((SN[$g] + $(ns "${PID[$a]}") - S0[$a]))
	WK[$g]=$((WK[$g] + $(wakes "${PID[$a]}") - W0[$a]))
done
echo "CPU over $T s, $N agents each, per agent: ms in ticks (utime + stime) / ms in scheduler ns, wake-ups"
row() {
	awk -v t="${TK[$2]}" -v s="${SN[$2]}" -v ti="${TK[idle]}" \
	    -v si="${SN[idle]}" -v n="$N" -v hz="$hz" -v what="$1" \
	    -v w="${WK[$2]}" 'BEGIN {
		printf "  %-22s %7.1f / %8.3f, %5.1f", what, t * 1000 / hz / n,
		    s / 1e6 / n, w / n
		rt = "-"
		if (ti > 0)
			rt = sprintf("%.2f", t / ti)
		rs = "-"
		if (si > 0)
			rs = sprintf("%.2f", s / si)
		if (what !~ /^idle/)
			printf "   x idle: %s / %s", rt, rs
		printf "\n" }'
}
row "idle standby" idle
row "armed, trigger" arm
[ -n "$BEFORE" ] && row "armed, trigger (-B)" old

t0=$(date +%s%N)
"$B/tdctl" -S "$CTL" snapshot --hosts 'arm*' --name snap >"$TMP/snap.out"
t1=$(date +%s%N)
echo "tdctl snapshot -> its exit (all $(grep -c '^file ' "$TMP/snap.out") files in place): $(((t1 - t0) / 1000000)) ms"
ls -l "$TMP"/out/arm*/*-snap.dat | awk '{ s += $5; n++ }
    END { printf "bytes per file: %d (mean of %d)\n", s / n, n }'

sleep 2
t0=$(date +%s%N)
echo "FLIGHTBENCH-$$" >/sys/kernel/tracing/trace_marker
for _ in $(seq 1200); do
	[ "$(ls "$TMP"/out/arm*/*-bench.trig.*.dat 2>/dev/null | wc -l)" -ge "$N" ] &&
	    break
	sleep 0.05
done
t1=$(date +%s%N)
echo "trigger -> the last of $(ls "$TMP"/out/arm*/*-bench.trig.*.dat 2>/dev/null | wc -l) files in place: $(((t1 - t0) / 1000000)) ms (polled every 50 ms)"
"$B/tdctl" -S "$CTL" disarm >/dev/null
