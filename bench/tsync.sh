#!/bin/sh
# bench/tsync.sh [SECONDS]: accuracy of tracedock's time sync on this
# machine.  One tdlisten, one tdagent per trace clock (each its own
# instance), all recording the same rare events (tests/tdpoke: getppid
# every 50 ms) for SECONDS (default 60); then trace-cmd 3.1.6 reads every
# file with its TIME_SHIFT/TSC2NSEC corrections and the same occurrence is
# compared across every pair of files.  Also reports the sync error
# itself: the offsets measured for the "mono" clock, which is the
# listener's reference (CLOCK_MONOTONIC), so its true offset is 0.
# Run as root from the top of a built tree (make tdagent tdlisten
# tests/tdpoke).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
B=${TD_BUILDDIR:-$top}
T=${1:-60}
W=$(mktemp -d /tmp/td-tsync-bench.XXXXXX)
trap 'kill $lpid 2>/dev/null; rm -rf "$W"' EXIT
clocks="mono local global mono_raw boot"
grep -q x86-tsc /sys/kernel/tracing/trace_clock && clocks="$clocks x86-tsc"
port=$((30000 + $$ % 20000))
"$B/tdlisten" -p $port --insecure -v -d "$W/out" --tsync-interval 1000 \
    > "$W/l.log" 2>&1 &
lpid=$!
sleep 0.5
pids=""
for c in $clocks; do
	"$B/tdagent" -q -h 127.0.0.1 -p $port --insecure --name "$c" -C "$c" \
	    -e raw_syscalls:sys_enter -f 'id == 110' -s $((T + 2)) \
	    2>/dev/null &
	pids="$pids $!"
done
for p in $pids; do
	until [ "$(cat /sys/kernel/tracing/instances/tracedock-$p/tracing_on 2>/dev/null)" = 1 ]; do
		sleep 0.05
	done
done
sleep 0.5
n=$((T * 20))
"$B/tests/tdpoke" $n 50000 &
poke=$!
wait $poke
wait $pids
for c in $clocks; do
	trace-cmd report -t --nodate -i "$W"/out/127.0.0.1/*-"$c".dat 2>/dev/null |
	    grep "tdpoke-$poke " | sed 's/^.*\] *\([0-9.]*\):.*$/\1/' |
	    tr -d . > "$W/$c.ts"
done
echo "tracedock time sync, $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs,"
echo "$T s, $n events per file, a sync round every 1000 ms"
echo
echo "|dt| of the same occurrence, median / max in ns (row vs column):"
printf "%-9s" ""
for b in $clocks; do printf "%18s" "$b"; done
echo
for a in $clocks; do
	printf "%-9s" "$a"
	for b in $clocks; do
		if [ "$a" = "$b" ]; then
			printf "%18s" "-"
			continue
		fi
		paste "$W/$a.ts" "$W/$b.ts" | awk 'NF == 2 { d = $1 - $2;
		    if (d < 0) d = -d; print d }' | sort -n > "$W/d"
		k=$(wc -l < "$W/d")
		med=$(sed -n "$(( (k + 1) / 2 ))p" "$W/d")
		max=$(tail -1 "$W/d")
		printf "%18s" "$med / $max"
	done
	echo
done
echo
for c in $clocks; do
	printf "%-9s %s events\n" "$c" "$(wc -l < "$W/$c.ts")"
done
grep "'mono' .*time sync round" "$W/l.log" |
    sed 's/.*offset \(-*[0-9]*\) .*+-\([0-9]*\) ns.*/\1 \2/' > "$W/mono"
awk '{ o = $1 < 0 ? -$1 : $1; print o }' "$W/mono" | sort -n > "$W/mo"
k=$(wc -l < "$W/mo")
echo
echo "sync error (mono samples, true offset 0): $k samples, median |offset|" \
    "$(sed -n "$(( (k + 1) / 2 ))p" "$W/mo") ns, max $(tail -1 "$W/mo") ns," \
    "claimed bound median $(cut -d' ' -f2 "$W/mono" | sort -n | sed -n "$(( (k + 1) / 2 ))p") ns"
grep "time sync:" "$W/l.log" | sed 's/^.*(127.0.0.1:[0-9]*): /  /'
