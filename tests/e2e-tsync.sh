#!/bin/sh
# End-to-end: time sync.  Agents on this machine, each with its own
# instance and a different trace clock, record the same rare events
# (tests/tdpoke: getppid calls 10 ms apart); after tdlisten's TIME_SHIFT,
# DATE (and TSC2NSEC for x86-tsc) trace-cmd 3.1.6 must give every occurrence
# the same time in every file.  The bounds here are loose for a busy CI
# machine (SLOW times looser under TD_VALGRIND, where tdlisten answers
# probes late).  Note that the kernel writes one tracepoint into the instances
# one after the other, so the same occurrence carries times a microsecond
# or two apart even in two instances of the same clock: the mono samples
# below measure the sync error itself.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDPOKE=$B/tests/tdpoke
N=150
MEDIAN_NS=${TD_TSYNC_MEDIAN_NS:-$((20000 * SLOW))}
MAX_NS=${TD_TSYNC_MAX_NS:-$((200000 * SLOW))}
clocks="mono local global mono_raw boot"
grep -q x86-tsc $TRACING/trace_clock && clocks="$clocks x86-tsc"

start_listener "$WORK/l.log" --insecure -d "$WORK/out" --tsync-interval 500 ||
    exit 99
pids=""
for c in $clocks; do
	"$TDAGENT" -q -h 127.0.0.1 -p "$LPORT" --insecure --name "$c" -C "$c" \
	    -e raw_syscalls:sys_enter -f 'id == 110' -s 5 2> "$WORK/$c.err" &
	pids="$pids $!"
done
# poke only once every agent records
for p in $pids; do
	wait_recording "$p"
done
sleep 0.3
"$TDPOKE" $N 10000 &
poke=$!
wait $poke
wait $pids

# timestamps (ns, after every correction) of the pokes in one file
stamps() {
	trace-cmd report -t --nodate -i "$1" 2>/dev/null | grep "tdpoke-$poke " |
	    sed 's/^.*\] *\([0-9.]*\):.*$/\1/' | tr -d .
}
stamps "$(ls "$WORK"/out/127.0.0.1/*-mono.dat)" > "$WORK/ref"
eq "the mono file holds every poke" "$(wc -l < "$WORK/ref")" $N
for c in $clocks; do
	f=$(ls "$WORK"/out/127.0.0.1/*-"$c".dat 2>/dev/null)
	check "$c: time sync in the listener's log" \
	    grep -q "'$c' .*time sync: [0-9]* samples" "$WORK/l.log"
	check "$c: TIME_SHIFT and DATE in the file" sh -c \
	    "trace-cmd dump --options -i '$f' 2>/dev/null | grep -q 'Option TimeShift' &&
	     trace-cmd dump --options -i '$f' 2>/dev/null | grep -q 'Option DATE'"
	[ "$c" = mono ] && continue
	stamps "$f" > "$WORK/$c.ts"
	eq "$c: every poke is there" "$(wc -l < "$WORK/$c.ts")" $N
	paste "$WORK/ref" "$WORK/$c.ts" | awk '{ d = $1 - $2; if (d < 0) d = -d;
	    print d }' | sort -n > "$WORK/$c.d"
	med=$(sed -n "$(( (N + 1) / 2 ))p" "$WORK/$c.d")
	max=$(tail -1 "$WORK/$c.d")
	echo "# $c vs mono: median |dt| $med ns, max $max ns"
	check "$c vs mono: median |dt| $med ns <= $MEDIAN_NS" \
	    test "${med:-999999999}" -le "$MEDIAN_NS"
	check "$c vs mono: max |dt| $max ns <= $MAX_NS" \
	    test "${max:-999999999}" -le "$MAX_NS"
done
# mono is CLOCK_MONOTONIC, the listener's reference: there the true offset
# is 0 and every sample's offset is its own error
grep "'mono' .*time sync round" "$WORK/l.log" |
    sed 's/.*offset \(-*[0-9]*\) .*/\1/' | tr -d - | sort -n > "$WORK/mono.off"
n=$(wc -l < "$WORK/mono.off")
check "mono: at least start, end and periodic samples ($n)" test "$n" -ge 4
mx=$(tail -1 "$WORK/mono.off")
md=$(sed -n "$(( (n + 1) / 2 ))p" "$WORK/mono.off")
echo "# mono samples: |offset| median $md ns, max $mx ns (the sync error)"
check "mono: median sync error $md ns <= $MEDIAN_NS" \
    test "${md:-999999999}" -le "$MEDIAN_NS"
check "mono: largest sync error $mx ns <= $MAX_NS" \
    test "${mx:-999999999}" -le "$MAX_NS"
stop_listener

# a listener that stalls past a round's timeout: later replies of that
# round are dropped, later rounds work, the recording ends normally
start_listener "$WORK/l3.log" --insecure -d "$WORK/out3" --tsync-interval 300 ||
    exit 99
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure -e sched -s 6 \
    2> "$WORK/stall.err" &
apid=$!
wait_recording "$apid"
sleep 0.2
# three seconds: longer than a probe's 1 s timeout wherever a round starts
kill -STOP "$LPID"
sleep 3
kill -CONT "$LPID"
wait "$apid"
eq "a stalled listener: the agent still exits 0" $? 0
check "the stalled round is reported" grep -q "time sync:" "$WORK/stall.err"
grep -q "time sync:" "$WORK/stall.err" || sed 's/^/# /' "$WORK/stall.err"
check "later rounds made it into the file" \
    grep -q "time sync: [0-9]* samples" "$WORK/l3.log"
stop_listener

# no sync wanted: the file completes without TIME_SHIFT, and says so
start_listener "$WORK/l2.log" --insecure -d "$WORK/out2" --tsync-interval -1 ||
    exit 99
"$TDAGENT" -q -h 127.0.0.1 -p "$LPORT" --insecure -e sched -s 0.3
f=$(ls "$WORK"/out2/127.0.0.1/*.dat)
check "--tsync-interval -1: no TIME_SHIFT" sh -c \
    "! trace-cmd dump --options -i '$f' 2>/dev/null | grep -q 'Option TimeShift'"
check "--tsync-interval -1: the file is complete" tc_clean "$f"
stop_listener
finish
