#!/bin/sh
# End-to-end: the time sync of a flight recorder's window (issue 30).  A
# snapshot streams a window that began long before it; its own time-sync
# rounds come after the window, and trace-cmd would extrapolate their
# line back over it.  So an armed agent takes samples while armed (every
# 30 x the listener's --tsync-interval: 3 s here) and its snapshot sends
# them first.  One standby agent is armed with syscalls:sys_enter_getppid
# of a ticker (tests/tdpoke: pairs of getppid calls, 0.6 s apart over
# 9 s), then snapshot:
#   - TIME_SHIFT (trace-cmd dump --options) holds samples from before the
#     window's first event, and every 3 s (+ a round) across it;
#   - each call's time after trace-cmd's corrections is the truth to
#     within the samples' bounds: rulers (local tdagents on the mono
#     clock, the listener's CLOCK_MONOTONIC, no correction) enable the
#     event before and after the armed instance and bracket its stamp
#     (tests/tsync-err.awk, docs/timesync.md "Measuring the error"), the
#     window's first call included;
#   - DATE puts the window's first call at the wall time it was made;
#   - with a listener without a probe port (as before version 5) the
#     agent says it has no time sync while armed, and its snapshot is as
#     before: every call, the snapshot's own rounds.
# The armed ring runs on the local clock, whose rate against
# CLOCK_MONOTONIC (NTP steers the latter) is the drift of this machine:
# the listener's log says it; on one machine it is a few ppm at most, so
# the span of the samples is what fails on a tree without them.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDPOKE=$B/tests/tdpoke-static
[ -x "$TDPOKE" ] || { echo "FAIL: no $TDPOKE (make check builds it)"; exit 99; }
[ -d "$TRACING/events/syscalls/sys_enter_getppid" ] ||
    skip "no syscalls:sys_enter_getppid (CONFIG_FTRACE_SYSCALLS)"
TDCTL=$B/tdctl
N=16
PAUSE_US=600000
P=$WORK/pki
pki "$P" host01 || { echo "FAIL: cannot make certificates"; exit 99; }
OUT=$WORK/out
CTL=$WORK/control
# shellcheck disable=SC2086
start_listener "$WORK/listen.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --control "$CTL" \
    --tsync-interval 100 || exit 99
cat > "$WORK/agent.conf" <<CONF
allow-events = syscalls:sys_enter_getppid
max-buffer 2048
CONF
"$TDAGENT" --standby -v -c "$WORK/agent.conf" -h 127.0.0.1 -p "$LPORT" \
    --cert "$P/host01.pem" --key "$P/host01.key" --ca "$P/ca.pem" \
    --allow-arm 2> "$WORK/agent.err" &
SPID=$!
all=""
cleanup() {
	# shellcheck disable=SC2086
	kill $SPID $all 2>/dev/null
	# shellcheck disable=SC2086
	wait $SPID $all 2>/dev/null
	stop_listener
}
listed() {
	"$TDCTL" -S "$CTL" list --json > "$WORK/list.json" 2>/dev/null &&
	    [ "$(jq "[.[] | select($2)] | length" "$WORK/list.json")" = "$1" ]
}
wait_until $((400 * SLOW)) listed 1 '.state == "standby"' ||
    { echo "FAIL: the standby agent did not come"; cleanup; exit 99; }

TDPOKE_WAIT=$WORK/go "$TDPOKE" $N $PAUSE_US 2 &
W=$!
# the second ticker's, for the listener without a probe port (below)
TDPOKE_WAIT=$WORK/go2 "$TDPOKE" 4 100000 2 &
W2=$!
F="common_pid == $W || common_pid == $W2"
# ruler NAME: a local tdagent on the mono clock, once it records
ruler() {
	"$TDAGENT" -q -b 64 -e syscalls:sys_enter_getppid -f "$F" -C mono \
	    -o "$WORK/$1.dat" 2> "$WORK/$1.err" &
	all="$all $!"
	wait_recording $! 600 && return 0
	echo "# ruler $1 did not start: $(cat "$WORK/$1.err")"
	return 1
}
# the event enabled in this order: r0, the armed ring, r1
ruler r0 || { cleanup; exit 99; }
"$TDCTL" -S "$CTL" arm --hosts host01 -e syscalls:sys_enter_getppid -f "$F" \
    -b 512 --name win > "$WORK/arm.out" 2>&1
eq "tdctl arm: exit 0" $? 0
ruler r1 || { cleanup; exit 99; }

# the window: the ticker's calls over 9 s, then a snapshot
wall0=$(date +%s.%N)
touch "$WORK/go"
wait $W
eq "the ticker ran" $? 0
sleep 0.5
"$TDCTL" -S "$CTL" snapshot --name win1 > "$WORK/snap.out" 2>&1
eq "tdctl snapshot: exit 0" $? 0
# shellcheck disable=SC2086
kill -TERM $all
# shellcheck disable=SC2086
wait $all
all=""
f=$(ls "$OUT"/host01/*-win1.dat 2>/dev/null | head -1)
check "the snapshot's file is there" test -f "$f" ||
    sed 's/^/# snap: /' "$WORK/snap.out"
"$TDCOUNT" "$f" -p "$W" -e syscalls:sys_enter_getppid > "$WORK/c" 2>&1
eq "the snapshot holds the ticker's $((2 * N)) calls, none lost" \
    "$(field events < "$WORK/c") $(field missed < "$WORK/c")" "$((2 * N)) 0"

# ---- TIME_SHIFT spans the window ----------------------------------------------
# after "[Option TimeShift", "N [samples count for CPU 0]" and for each
# CPU its N lines "OFFSET SCALING FRAC TS[offset * scaling >> fraction @
# time]": CPU 0's, as "TS OFFSET"
trace-cmd dump --options -i "$f" > "$WORK/dump" 2>&1
awk '/Option TimeShift/ { on = 1; next }
    on && /samples count for CPU 0/ { n = $1 }
    on && /@ time\]/ { sub(/\[.*/, ""); print $4, $1; if (++k == n) exit }' \
    "$WORK/dump" > "$WORK/samples"
# the calls' raw times (the trace clock, no correction), ns
poke_times() {
	grep -E -- "-$W +\[" | sed 's/^.*\] *\([0-9.]*\):.*$/\1/' | tr -d .
}
trace-cmd report -t --raw-ts -i "$f" 2>/dev/null | poke_times > "$WORK/raw"
first=$(head -1 "$WORK/raw")
last=$(tail -1 "$WORK/raw")
echo "# TIME_SHIFT: $(wc -l < "$WORK/samples") samples; the window's calls from $first to $last (raw ns)"
sed 's/^/# sample /' "$WORK/samples"
check "TIME_SHIFT has samples from before the window's first call" \
    awk -v t="${first:-0}" 'NR == 1 { ok = $1 < t } END { exit !ok }' \
    "$WORK/samples"
inside=$(awk -v a="${first:-0}" -v b="${last:-0}" '$1 > a && $1 < b' \
    "$WORK/samples" | wc -l)
# 9 s of calls, a sample every 3 s and a round: 2 at least
check "TIME_SHIFT has samples across the window ($inside inside it)" \
    test "$inside" -ge 2
# (what the listener set aside, as imprecise or off the line, is not in
# TIME_SHIFT: on a saturated machine it may set aside an armed sample)
sed -n "s/^.*'win1' .*time sync: /# listener: /p" "$WORK/listen.log"

# ---- the shift at the window's start, against the truth ---------------------------
# stamps FILE [ARGS]: the second call of each pair, ns, after trace-cmd's
# corrections (the rulers have none: mono is the reference)
stamps() {
	trace-cmd report -t --nodate -i "$1" 2>/dev/null | poke_times |
	    awk 'NR % 2 == 0'
}
stamps "$WORK/r0.dat" > "$WORK/r0.ts"
stamps "$f" > "$WORK/a.ts"
stamps "$WORK/r1.dat" > "$WORK/r1.ts"
eq "the rulers and the snapshot: each of the $N pairs" \
    "$(wc -l < "$WORK/r0.ts") $(wc -l < "$WORK/a.ts") $(wc -l < "$WORK/r1.ts")" \
    "$N $N $N"
paste "$WORK/r0.ts" "$WORK/a.ts" "$WORK/r1.ts" |
    awk -v names=armed -f "$S/tests/tsync-err.awk" > "$WORK/err"
sed 's/^/# /' "$WORK/err"
bound=$(sed -n "s/^.*'win1' .*time sync: .*error bound +-\([0-9]*\) ns.*/\1/p" \
    "$WORK/listen.log" | head -1)
# the window's first pair: e = a - (r0 + r1) / 2, within u of the truth
# (u: how much wider its ruler bracket is than the narrowest one)
e1=$(paste "$WORK/r0.ts" "$WORK/a.ts" "$WORK/r1.ts" | awk '
    { w = $3 - $1; if (NR == 1 || w < w0) w0 = w
      if (NR == 1) { e = $2 - ($1 + $3) / 2; w1 = w } }
    END { e = e < 0 ? -e : e; u = (w1 - w0) / 2; l = e - u
	  printf "%d\n", (l > 0 ? l : 0) }')
echo "# the window's first call: error >= $e1 ns (the samples' largest bound +-${bound:-?} ns)"
# what the snapshot's own rounds alone would give there (the tree before
# issue 30's samples): their line extrapolated back, against the rulers
r0_1=$(head -1 "$WORK/r0.ts")
r1_1=$(head -1 "$WORK/r1.ts")
raw1=$(awk 'NR == 2' "$WORK/raw")
awk -v t="${raw1:-0}" -v r="$(( (${r0_1:-0} + ${r1_1:-0}) / 2 ))" -v last="${last:-0}" '
    $1 > last { n++; x[n] = $1; y[n] = $2 }
    END { if (n < 2) { print "# (fewer than two samples after the window)"; exit }
	  o = y[1] + (y[2] - y[1]) * (t - x[1]) / (x[2] - x[1]); e = t + o - r
	  printf "# with the snapshot'"'"'s rounds alone: %d ns off at the window'"'"'s first call\n", e }' \
    "$WORK/samples"
# interpolated between the two samples around it: within the larger of
# their bounds, 2 x for the drift's change over 3 s, + 1 us for the rulers
check "the window's first call within 2 x ${bound:-?} + 1000 ns of the truth" \
    test "${e1:-999999999}" -le "$(( 2 * ${bound:-0} + 1000 ))"
low_max=$(awk '$1 == "agent" { print $6 }' "$WORK/err")
check "every call within 2 x ${bound:-?} + 1000 ns of the truth (>= ${low_max:-?})" \
    test "${low_max:-999999999}" -le "$(( 2 * ${bound:-0} + 1000 ))"

# ---- DATE: the window's wall time ------------------------------------------------
# the first call came right after wall0 (the ticker polls for its go)
t1=$(trace-cmd report -t -i "$f" 2>/dev/null | grep -E -- "-$W +\[" | head -1 |
    sed 's/^.*\] *\([0-9.]*\):.*$/\1/')
echo "# the window's first call at $t1 (wall), the ticker let go at $wall0"
check "DATE: the window's first call at its wall time (within $SLOW x 0.2 s)" \
    awk -v a="${t1:-0}" -v b="$wall0" -v s="$SLOW" \
    'BEGIN { d = a - b; exit !(d >= 0 && d < 0.2 * s) }'

# ---- a listener without a probe port: the snapshot as before ----------------------
# (as a listener before version 5): the agent, still armed (the ring
# re-armed after the snapshot, its samples taken since), back on it, says
# so, drops what it kept (nothing tells it is the same machine) and its
# snapshot carries the snapshot's own rounds only, the calls all there
# a sample taken since the re-arm, on the first listener
resampled() {
	awk '/snapshot sent: re-armed/ { r = 1 } r && /time sync sample/ { s = 1 }
	    END { exit !s }' "$WORK/agent.err"
}
wait_until $((200 * SLOW)) resampled
check "re-armed after the snapshot: a sample since" resampled
stop_listener
LPORT_FIXED=$LPORT
# shellcheck disable=SC2086
start_listener "$WORK/listen2.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --control "$CTL" \
    --tsync-interval 100 --no-udp-probes || { cleanup; exit 99; }
wait_until $((1200 * SLOW)) listed 1 '.armed == "win"'
check "no probe port: the agent says it has no time sync while armed" grep -q \
    "no time sync while armed (the collector has no probe port)" \
    "$WORK/agent.err"
touch "$WORK/go2"
wait $W2
"$TDCTL" -S "$CTL" snapshot --name win2 > "$WORK/snap2.out" 2>&1
eq "no probe port: tdctl snapshot: exit 0" $? 0
f2=$(ls "$OUT"/host01/*-win2.dat 2>/dev/null | head -1)
"$TDCOUNT" "$f2" -p "$W2" -e syscalls:sys_enter_getppid > "$WORK/c2" 2>&1
eq "no probe port: the snapshot holds the ticker's 8 calls" \
    "$(field events < "$WORK/c2")" 8
check "no probe port: a time shift all the same (the snapshot's rounds)" \
    grep -q "'win2' .*time sync: [0-9]* samples" "$WORK/listen2.log"
trace-cmd dump --options -i "$f2" 2>&1 | awk '/Option TimeShift/ { on = 1; next }
    on && /samples count for CPU 0/ { n = $1 }
    on && /@ time\]/ { sub(/\[.*/, ""); print $4; if (++k == n) exit }' \
    > "$WORK/samples2"
first2=$(trace-cmd report -t --raw-ts -i "$f2" 2>/dev/null | grep -E -- "-$W2 +\[" |
    head -1 | sed 's/^.*\] *\([0-9.]*\):.*$/\1/' | tr -d .)
check "no probe port: none of the samples kept before is sent (all after the calls)" \
    awk -v t="${first2:-0}" 'NR == 1 { ok = t > 0 && $1 > t } END { exit !ok }' \
    "$WORK/samples2"

"$TDCTL" -S "$CTL" disarm > /dev/null 2>&1
wait_until $((200 * SLOW)) no_instances "$SPID-sync"
check "disarmed: the armed ring's sync instance is gone" no_instances "$SPID-sync"
cleanup
check "no instance of the agent's left" no_instances "$SPID-.*"
finish
