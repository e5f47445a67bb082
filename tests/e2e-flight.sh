#!/bin/sh
# End-to-end: the fleet's flight recorder (issue 30).  NAGENTS standby
# agents (tdagent --standby --allow-arm, each its own identity) are armed
# by one tdctl arm with syscalls:sys_enter_getppid; a ticker (tests/tdpoke)
# makes N getppid calls PAUSE_US apart, and then:
#   - a snapshot asked of no armed agent says so (exit 1); an agent without
#     --allow-arm refuses; a trigger filter the kernel refuses comes back
#     to tdctl with the kernel's words;
#   - armed, the agents stream nothing: the listener receives 0 bytes for
#     recordings and no agent runs a recorder, while the ticker runs;
#     tdctl list shows how far back each ring reaches;
#   - tdctl snapshot: one file per agent, printed by tdctl, each exactly the
#     ticker's N calls, none lost, read cleanly by trace-cmd, the k-th call
#     at the same instant in every file (one timeline, as e2e-standby.sh);
#   - re-armed after it (tdctl list), the next window starts empty;
#   - a trigger's agent waits on its sentinel instance, not a timer: it
#     wakes as often as an agent armed without a trigger;
#   - a trigger on one agent (a trace_marker write it alone matches, `ftrace:print
#     if buf ~ "*BOOM-host01*"') snapshots the whole group: a file from
#     every agent, named for the agent that fired, each with the ticker's
#     calls since the last snapshot and the marker itself (the instant is
#     inside every window); /status says who fired, and the kernel's
#     instant of the marker in host01's clock, exactly its time stamp in
#     host01's file;
#   - a second trigger within the hold-off is counted, not acted on: no
#     new file, /status counts it, the agent re-arms;
#   - a trigger while the collector is away: the agent re-arms at once and
#     tells the next listener, which sees every agent armed again;
#   - tdctl disarm: the instances are gone;
#   - a ring that wrapped: what it kept and what it overwrote add up to the
#     ticker's calls, and the file marks the loss;
#   - --fanout self: a trigger on one agent of the group snapshots that
#     agent alone (exactly one new file, its; none from the others);
#   - the collector stopped between TRIGGERED and SNAPSHOT: the agent
#     re-arms after the collector's idle timeout, logs it, and tells the
#     next listener; frozen meanwhile, its ring takes no trace_marker
#     copies (the kernel would fail every marker write on the machine).
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
# never sanitized: an ASan runtime makes getppid calls of its own
TDPOKE=$B/tests/tdpoke-static
[ -x "$TDPOKE" ] || { echo "FAIL: no $TDPOKE (make check builds it)"; exit 99; }
[ -d "$TRACING/events/syscalls/sys_enter_getppid" ] ||
    skip "no syscalls:sys_enter_getppid (CONFIG_FTRACE_SYSCALLS)"
TDCTL=$B/tdctl
# the markers that fire triggers are this run's alone (other runs may write
# theirs to the same trace_marker), as are the instances looked at (flights)
TAG=$$
N=20
PAUSE_US=50000
# 20 as the issue asks; FLIGHT_AGENTS=3 for a quick run
NAGENTS=${FLIGHT_AGENTS:-20}
P=$WORK/pki
agents=""
for i in $(seq 1 $NAGENTS); do agents="$agents host$(printf %02d $i)"; done
pki "$P" $agents plain || { echo "FAIL: cannot make certificates"; exit 99; }
OUT=$WORK/out
CTL=$WORK/control
LTLS="--cert $P/listener.pem --key $P/listener.key --ca $P/ca.pem"
# shellcheck disable=SC2086
# --idle-timeout 6: a KEEPALIVE, and with it the armed window, every 2 s
start_listener "$WORK/listen.log" -d "$OUT" $LTLS --control "$CTL" \
    --http 127.0.0.1:0 --idle-timeout 6 || exit 99
HPORT=$(sed -n 's|.*status page and metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
    "$WORK/listen.log" | head -1)
cat > "$WORK/agent.conf" <<CONF
allow-events = syscalls:sys_enter_getppid, ftrace:print, sched
max-buffer 2048
CONF

SPIDS=""
for a in $agents plain; do
	arm=--allow-arm
	[ $a = plain ] && arm=
	"$TDAGENT" --standby -c "$WORK/agent.conf" -h 127.0.0.1 -p "$LPORT" \
	    --cert "$P/$a.pem" --key "$P/$a.key" --ca "$P/ca.pem" $arm \
	    2> "$WORK/agent.$a.err" &
	SPIDS="$SPIDS $!"
done
cleanup() {
	# shellcheck disable=SC2086
	kill $SPIDS 2>/dev/null
	for p in $SPIDS; do wait "$p" 2>/dev/null; done
	stop_listener
}

# listed N KEY=VALUE: tdctl list shows N agents with KEY=VALUE (jq)
listed() {
	"$TDCTL" -S "$CTL" list --json > "$WORK/list.json" 2>/dev/null &&
	    [ "$(jq "[.[] | select($2)] | length" "$WORK/list.json")" = "$1" ]
}
# metric NAME: its value on /metrics
metric() {
	curl -s --max-time 10 "http://127.0.0.1:$HPORT/metrics" |
	    awk -v m="$1" '$1 == m { print $2 }'
}
# status JQ: /status through jq
status() {
	curl -s --max-time 10 "http://127.0.0.1:$HPORT/status" | jq -r "$1"
}
# flights: these agents' armed instances in tracefs
flights() {
	for p in $SPIDS; do
		[ -d "$TRACING/instances/tracedock-$p-flight" ] &&
		    echo "$TRACING/instances/tracedock-$p-flight"
	done
}
# flights_on: their tracing_on, one a line
flights_on() {
	for d in $(flights); do cat "$d/tracing_on"; done
}
# sentinels: how many of these agents' trigger sentinels are in tracefs
sentinels() {
	for p in $SPIDS; do
		[ -d "$TRACING/instances/tracedock-$p-sentinel" ] && echo "$p"
	done | wc -l
}
# wakes PID: its voluntary context switches so far (each wait that slept)
wakes() {
	awk '$1 == "voluntary_ctxt_switches:" { print $2 }' "/proc/$1/status"
}
wait_until $((1200 * SLOW)) listed $((NAGENTS + 1)) '.state == "standby"'
eq "all $((NAGENTS + 1)) agents on standby" \
    "$(jq length "$WORK/list.json")" $((NAGENTS + 1))

# ---- bad input --------------------------------------------------------------
"$TDCTL" -S "$CTL" snapshot > "$WORK/none.out" 2>&1
eq "a snapshot of no armed agent: exit 1" $? 1
check "a snapshot of no armed agent: says so" \
    grep -qx "none: no armed agent" "$WORK/none.out"
"$TDCTL" -S "$CTL" arm --hosts plain -e syscalls:sys_enter_getppid \
    > "$WORK/plain.out" 2>&1
eq "an agent without --allow-arm: exit 1" $? 1
check "an agent without --allow-arm: refused, says why" grep -qx \
    "refused plain arming is not allowed here (tdagent --standby --allow-arm)" \
    "$WORK/plain.out"
"$TDCTL" -S "$CTL" arm --hosts host02 -e syscalls:sys_enter_getppid \
    --trigger 'ftrace:print if no_such_field == 1' > "$WORK/badtrig.out" 2>&1
eq "a trigger the kernel refuses: exit 1" $? 1
# the kernel's error_log names the field it could not find
check "a trigger the kernel refuses: its error, in the kernel's words" \
    grep -q "^refused host02 trigger 'ftrace:print if no_such_field == 1' refused: .*Field not found: Command: no_such_field == 1" \
    "$WORK/badtrig.out" || sed 's/^/# badtrig: /' "$WORK/badtrig.out"
eq "a refused trigger: no instance left" \
    "$(flights | wc -l) $(sentinels)" "0 0"

# ---- armed: nothing streams -------------------------------------------------
# the two tickers (the snapshot's, the trigger's) wait for their go; the
# rings take their calls only (whatever else the machine runs)
TDPOKE_WAIT=$WORK/go1 "$TDPOKE" $N $PAUSE_US &
W1=$!
TDPOKE_WAIT=$WORK/go2 "$TDPOKE" $N $PAUSE_US &
W2=$!
F="common_pid == $W1 || common_pid == $W2"
# host01 carries the trigger; the others join its group without one
"$TDCTL" -S "$CTL" arm --hosts host01 -e syscalls:sys_enter_getppid \
    -f "$F" -b 512 --name inc --trigger "ftrace:print if buf ~ \"*BOOM-host01-$TAG*\"" \
    --trigger-holdoff 600 > "$WORK/arm1.out" 2>&1
eq "tdctl arm host01 (trigger): exit 0" $? 0
"$TDCTL" -S "$CTL" arm --hosts 'host*' -e syscalls:sys_enter_getppid -f "$F" -b 512 \
    --name inc --trigger-holdoff 600 > "$WORK/arm.out" 2>&1
eq "tdctl arm the others: armed, host01 says it is already" \
    "$(grep -c '^armed host[0-9]* inc$' "$WORK/arm.out") $(grep -c '^refused host01 armed already' "$WORK/arm.out")" \
    "$((NAGENTS - 1)) 1"
wait_until $((200 * SLOW)) listed $NAGENTS '.armed == "inc"'
eq "tdctl list: $NAGENTS armed in group inc, each since a time" \
    "$(jq '[.[] | select(.armed == "inc" and .armed_since > 0 and .armed_ring_kb == 512)] | length' "$WORK/list.json")" \
    $NAGENTS
eq "$NAGENTS armed instances, tracing, overwrite mode" \
    "$(for d in $(flights); do
	echo "$(cat "$d/tracing_on")$(cat "$d/options/overwrite")"; done |
	grep -c '^11$')" $NAGENTS
# host01's trigger: a sentinel instance the agent waits on, woken by the
# kernel (every trace_marker write, buffer_percent 0), no timer: it sleeps
# as much as host02, armed without a trigger (4 a second before: 12 in 3 s)
set -- $SPIDS
H1=$1 H2=$2
eq "host01's trigger: one sentinel, copying trace_marker, woken at once" \
    "$(sentinels) $(cat "$TRACING/instances/tracedock-$H1-sentinel/options/copy_trace_marker" \
	"$TRACING/instances/tracedock-$H1-sentinel/buffer_percent" \
	"$TRACING/instances/tracedock-$H1-sentinel/tracing_on" | tr '\n' ' ')" "1 1 0 1 "
check "host01's trigger: no fallback to reading tracing_on" \
    sh -c "! grep -q 'no sentinel' '$WORK/agent.host01.err'"
w1=$(wakes "$H1") w2=$(wakes "$H2")
sleep 3
w1=$(($(wakes "$H1") - w1)) w2=$(($(wakes "$H2") - w2))
check "host01's trigger: no timer, as many wake-ups in 3 s as host02's ($w1 vs $w2)" \
    [ "$w1" -le $((w2 + 5)) ]

touch "$WORK/go1"
wait $W1
eq "the ticker ran" $? 0
sleep 1
eq "armed: the listener received 0 bytes for recordings" \
    "$(metric tdlisten_received_bytes_total)" 0
eq "armed: no agent runs a recorder" \
    "$(for p in $SPIDS; do ps --ppid "$p" -o pid= ; done | wc -l)" 0
# the window: how far back each ring reaches (the ticker's calls since it
# was armed, at most the time since then)
wait_until $((200 * SLOW)) listed $NAGENTS '.armed_window_s != null'
now=$(date +%s)
eq "tdctl list: each armed agent's window, within the time it has been armed" \
    "$(jq --argjson now "$now" '[.[] | select(.armed_window_s != null and
	.armed_window_s > 0 and .armed_window_s <= $now - .armed_since + 1)] |
	length' "$WORK/list.json")" $NAGENTS

# ---- a snapshot -------------------------------------------------------------
"$TDCTL" -S "$CTL" snapshot --name snap1 > "$WORK/snap1.out" 2>&1
eq "tdctl snapshot: exit 0" $? 0
eq "tdctl snapshot: a file printed for each of the $NAGENTS" \
    "$(grep -c '^file host[0-9]* .*-snap1.dat$' "$WORK/snap1.out")" $NAGENTS
eq "tdctl snapshot: $NAGENTS finished cleanly" \
    "$(grep -c '^finished host[0-9]* snap1 exit 0$' "$WORK/snap1.out")" \
    $NAGENTS
[ "$(grep -c '^file ' "$WORK/snap1.out")" = $NAGENTS ] ||
    sed 's/^/# snap1: /' "$WORK/snap1.out"

# exact N: the ticker's calls in each file, none lost, stamps for the
# timeline in WORK/ts.AGENT; $1: the file's suffix, $2: the ticker's pid
exact() {
	bad=""
	for a in $agents; do
		f=$(ls "$OUT/$a"/*-"$1".dat 2>/dev/null | head -1)
		[ -f "$f" ] || { bad="$bad $a:nofile"; continue; }
		"$TDCOUNT" "$f" -p "$2" -e syscalls:sys_enter_getppid \
		    > "$WORK/c.$a" 2>&1
		[ "$(field events < "$WORK/c.$a")" = $N ] ||
		    bad="$bad $a:$(field events < "$WORK/c.$a")"
		[ "$(field missed < "$WORK/c.$a")" = 0 ] || bad="$bad $a:lost"
		tc_clean "$f" || bad="$bad $a:report"
		awk -v p="tdpoke-static-$2 " \
		    'index($0, p) && /sys_enter_getppid/ {
			for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) {
				t = $i; sub(/:$/, "", t); print t; break } }' \
		    "$WORK/report.out" > "$WORK/ts.$a"
		[ "$(wc -l < "$WORK/ts.$a")" = $N ] || bad="$bad $a:stamps"
	done
	echo "$bad"
}
# spread: the widest spread of one call's stamps across the files, ns
spread() {
	base=$(head -1 "$WORK/ts.host01" | cut -d. -f1)
	for a in $agents; do printf '%s ' "$WORK/ts.$a"; done |
	    xargs paste | awk -v base="${base:-0}" '
		function ns(t,	x) {
			split(t, x, ".")
			return (x[1] - base) * 1e9 + x[2] * 10 ^ (9 - length(x[2]))
		}
		{ lo = hi = ns($1)
		for (i = 2; i <= NF; i++) { v = ns($i); if (v < lo) lo = v; if (v > hi) hi = v }
		if (hi - lo > m) m = hi - lo } END { printf "%d\n", m }'
}
eq "snapshot: every file exactly the $N calls, none lost, read cleanly" \
    "$(exact snap1 $W1)" ""
s=$(spread)
echo "# one timeline: the widest spread of one call across the $NAGENTS files: $s ns"
check "snapshot: one timeline, each call within $((PAUSE_US / 2)) us across the files" \
    [ "${s:-999999999999}" -lt $((PAUSE_US / 2 * 1000)) ]
wait_until $((200 * SLOW)) listed $NAGENTS '.armed == "inc" and .state == "standby"'
eq "snapshot: every instance re-armed and empty" \
    "$(for d in $(flights); do
	echo "$(cat "$d/tracing_on") $(grep -cv '^#' "$d/trace")"; done |
	grep -c '^1 0$')" $NAGENTS

# ---- a trigger ----------------------------------------------------------------
touch "$WORK/go2"
wait $W2
echo "boom: BOOM-host01-$TAG latency spike" > "$TRACING/trace_marker"
# everything the trigger's snapshot makes: one file per agent, named for it
trig_files() {
	[ "$(ls "$OUT"/host*/*-inc.trig.host01.*.dat 2>/dev/null | wc -l)" -ge "$NAGENTS" ]
}
wait_until $((600 * SLOW)) trig_files
eq "a trigger on host01: a file from each of the $NAGENTS" \
    "$(ls "$OUT"/host*/*-inc.trig.host01.*.dat 2>/dev/null | wc -l)" $NAGENTS
TRIG=$(ls "$OUT"/host01/*-inc.trig.host01.*.dat 2>/dev/null | head -1 |
    sed 's/.*-\(inc\.trig\.host01\.[0-9]*\)\.dat$/\1/')
eq "a trigger: every file holds the ticker's $N calls since the snapshot" \
    "$(exact "$TRIG" $W2)" ""
bad=""
for a in $agents; do
	f=$(ls "$OUT/$a"/*-"$TRIG".dat 2>/dev/null | head -1)
	"$TDCOUNT" "$f" -e ftrace:print > "$WORK/m.$a" 2>&1
	[ "$(field events < "$WORK/m.$a")" = 1 ] || bad="$bad $a"
done
eq "a trigger: its instant (the marker) is inside every file's window" \
    "$bad" ""
eq "/status: host01 fired, one trigger acted on" \
    "$(status '.flight[] | select(.name == "inc") | "\(.fired_by) \(.triggers) \(.held_off) \(.snapshot)"')" \
    "host01 1 0 $TRIG"
check "host01 told the listener its trigger fired" \
    grep -q "standby host01: trigger of 'inc' fired" "$WORK/listen.log"
# the trigger's own instant, in host01's trace clock (every agent here has
# the same): exactly the marker's in host01's file, and inside every file's
# window (raw time stamps, no time sync applied): after its first event,
# and within a ms of its own copy of the marker (the others' rings ran on
# after it, recording nothing more)
rawts() {	# FILE [PATTERN]: the events' raw ns (those matching PATTERN)
	trace-cmd report -t --raw-ts -i "$1" 2>/dev/null | grep -e "${2:-.}" |
	    sed -n 's/^.*\] *\([0-9][0-9]*\): .*/\1/p'
}
KNS=$(status '.flight[] | select(.name == "inc") | .fired_clock_ns')
f=$(ls "$OUT"/host01/*-"$TRIG".dat 2>/dev/null | head -1)
eq "/status: the trigger's kernel instant is its marker's in host01's file" \
    "$KNS" "$(rawts "$f" "BOOM-host01-$TAG latency" | head -1)"
bad=""
for a in $agents; do
	f=$(ls "$OUT/$a"/*-"$TRIG".dat 2>/dev/null | head -1)
	first=$(rawts "$f" | sort -n | head -1)
	m=$(rawts "$f" "BOOM-host01-$TAG latency" | head -1)
	awk -v f="${first:-x}" -v m="${m:-x}" -v k="${KNS:-x}" 'BEGIN {
	    ok = f ~ /^[0-9]+$/ && m ~ /^[0-9]+$/ && k ~ /^[0-9]+$/ &&
		f + 0 <= k + 0 && m - k <= 1e6 && k - m <= 1e6
	    exit !ok }' || bad="$bad $a"
done
eq "the trigger's kernel instant lies in every file's window" "$bad" ""

# ---- a second trigger within the hold-off ---------------------------------------
wait_until $((200 * SLOW)) listed $NAGENTS '.armed == "inc" and .state == "standby"'
on=$(flights_on | grep -c 1)
eq "after the trigger's snapshot: all $NAGENTS re-armed" "$on" $NAGENTS
echo "boom: BOOM-host01-$TAG again" > "$TRACING/trace_marker"
held() {
	[ "$(status '.flight[] | select(.name == "inc") | .held_off')" = 1 ]
}
wait_until $((200 * SLOW)) held
eq "a trigger within the hold-off: counted, not acted on" \
    "$(status '.flight[] | select(.name == "inc") | "\(.triggers) \(.held_off)"')" \
    "1 1"
rearmed() {
	[ "$(flights_on | grep -c 1)" = $NAGENTS ]
}
wait_until $((200 * SLOW)) rearmed
eq "a held-off trigger: host01 re-armed, no new file" \
    "$(flights_on | grep -c 1) $(ls "$OUT"/host*/*-inc.trig.*.dat | wc -l)" \
    "$NAGENTS $NAGENTS"

# each snapshot's agent sent its own TRACEID, its HELLO's, which the
# listener writes: not a line per snapshot for it
eq "snapshots: no 'dropped option' line in the listener's log" \
    "$(grep -c 'dropped option' "$WORK/listen.log")" 0

# ---- a trigger with no collector --------------------------------------------------
# the listener goes; host01's trigger fires meanwhile: its agent re-arms at
# once and, back on a new listener, says so; every agent is armed still
stop_listener
echo "boom: BOOM-host01-$TAG while away" > "$TRACING/trace_marker"
away() {
	grep -q "flight recorder 'inc': its trigger fired with no collector: re-armed" \
	    "$WORK/agent.host01.err"
}
wait_until $((200 * SLOW)) away
check "no collector: host01's agent re-armed at once, and logged it" away
LPORT_FIXED=$LPORT
# shellcheck disable=SC2086
start_listener "$WORK/listen2.log" -d "$OUT" $LTLS --control "$CTL" \
    --http 127.0.0.1:0 --idle-timeout 6 || exit 99
HPORT=$(sed -n 's|.*status page and metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
    "$WORK/listen2.log" | head -1)
wait_until $((1200 * SLOW)) listed $NAGENTS '.armed == "inc"'
eq "a new listener: the $NAGENTS agents tell it they are armed" \
    "$(jq '[.[] | select(.armed == "inc")] | length' "$WORK/list.json")" $NAGENTS
check "a new listener: host01 says it re-armed while it was away" grep -q \
    "standby host01: inc re-armed while the collector was away" \
    "$WORK/listen2.log"
eq "a trigger with no collector: no new file, every ring tracing" \
    "$(ls "$OUT"/host*/*-inc.trig.*.dat | wc -l) $(flights_on | grep -c 1)" \
    "$NAGENTS $NAGENTS"

# ---- disarm -------------------------------------------------------------------
"$TDCTL" -S "$CTL" disarm > "$WORK/disarm.out" 2>&1
eq "tdctl disarm: exit 0, each disarmed" \
    "$?:$(grep -c '^disarmed host[0-9]*$' "$WORK/disarm.out")" "0:$NAGENTS"
eq "disarmed: no instance left (nor sentinel)" \
    "$(flights | wc -l) $(sentinels)" "0 0"

# ---- a ring that wrapped: its losses marked -----------------------------------
# the smallest ring, a ticker of W calls at once: what the ring kept and
# what it overwrote add up to W, and the file marks the loss
W=20000
TDPOKE_WAIT=$WORK/go3 "$TDPOKE" $W 0 &
W3=$!
"$TDCTL" -S "$CTL" arm --hosts host01 -e syscalls:sys_enter_getppid \
    -f "common_pid == $W3" -b 8 --name wrap > "$WORK/wrap.out" 2>&1
eq "tdctl arm a small ring: exit 0" $? 0
touch "$WORK/go3"
wait $W3
"$TDCTL" -S "$CTL" snapshot --hosts host01 --name wrap1 >> "$WORK/wrap.out" 2>&1
eq "the small ring's snapshot: exit 0" $? 0
f=$(ls "$OUT"/host01/*-wrap1.dat 2>/dev/null | head -1)
"$TDCOUNT" "$f" -p $W3 > "$WORK/c.wrap" 2>&1
# "done after S s: C CPUs, P pages, B bytes, E events, L lost (M pages marked)"
done_line=$(grep "session host01 'wrap1'.*: done after" "$WORK/listen2.log")
kept=$(echo "$done_line" | sed -n 's/.* \([0-9]*\) events, \([0-9]*\) lost (\([0-9]*\) pages marked).*/\1 \2 \3/p')
set -- $kept
eq "a wrapped ring: kept + overwritten = the ticker's $W calls, the file holds the kept" \
    "$(($1 + $2)) $(field events < "$WORK/c.wrap")" "$W $1"
check "a wrapped ring: the loss is marked in the file, read cleanly" sh -c "
    [ \$(awk '\$1 == \"missed\" { print \$2 }' '$WORK/c.wrap') -ge 1 ] && [ $3 -ge 1 ]" ||
    echo "# $done_line"
check "a wrapped ring: trace-cmd reads it without a warning" tc_clean "$f"
"$TDCTL" -S "$CTL" disarm > /dev/null 2>&1

# ---- --fanout self: a trigger snapshots its own agent alone ---------------------
# every agent armed in group solo with --fanout self, host03 with a trigger
# of its own: its marker makes exactly one new file, host03's; the others none
"$TDCTL" -S "$CTL" arm --hosts host03 -e syscalls:sys_enter_getppid -b 64 \
    --name solo --fanout self --trigger "ftrace:print if buf ~ \"*SOLO-host03-$TAG*\"" \
    > "$WORK/solo.out" 2>&1
eq "tdctl arm host03 --fanout self (trigger): exit 0" $? 0
"$TDCTL" -S "$CTL" arm --hosts 'host*' -e syscalls:sys_enter_getppid -b 64 \
    --name solo --fanout self >> "$WORK/solo.out" 2>&1
wait_until $((200 * SLOW)) listed $NAGENTS '.armed == "solo"'
eq "--fanout self: $NAGENTS armed in group solo" \
    "$(jq '[.[] | select(.armed == "solo")] | length' "$WORK/list.json")" $NAGENTS
dats() { ls "$OUT"/host*/*.dat 2>/dev/null | sort; }
dats > "$WORK/dats.before"
echo "boom: SOLO-host03-$TAG alone" > "$TRACING/trace_marker"
solo_file() { ls "$OUT"/host03/*-solo.trig.host03.*.dat > /dev/null 2>&1; }
wait_until $((600 * SLOW)) solo_file
# the snapshot is over, every ring tracing again: anything else would be here
wait_until $((200 * SLOW)) listed $NAGENTS '.armed == "solo" and .state == "standby"'
wait_until $((200 * SLOW)) rearmed
sleep 1
dats | comm -13 "$WORK/dats.before" - > "$WORK/dats.new"
eq "--fanout self: a trigger on host03 makes one new file, host03's" \
    "$(wc -l < "$WORK/dats.new") $(grep -c "/host03/host03-.*-solo\.trig\.host03\.[0-9]*\.dat$" "$WORK/dats.new")" \
    "1 1"
[ "$(wc -l < "$WORK/dats.new")" = 1 ] || sed 's/^/# new: /' "$WORK/dats.new"
eq "--fanout self: no other agent recorded (no .part, no new file)" \
    "$(ls "$OUT"/host*/*.part 2>/dev/null | wc -l) $(grep -vc /host03/ "$WORK/dats.new")" "0 0"
eq "--fanout self: /status says host03 fired, group solo, fanout self" \
    "$(status '.flight[] | select(.name == "solo") | "\(.fired_by) \(.fanout) \(.triggers)"')" \
    "host03 self 1"
"$TDCTL" -S "$CTL" disarm > /dev/null 2>&1

# ---- the collector gone between TRIGGERED and SNAPSHOT --------------------------
# the listener stopped (SIGSTOP: its connections stay, nothing answers),
# host02's trigger fires and its agent sends TRIGGERED; no SNAPSHOT comes:
# after the collector's idle timeout (6 s here) the agent re-arms and logs
# why; the listener killed and started again, host02 tells it so, armed
"$TDCTL" -S "$CTL" arm --hosts host02 -e syscalls:sys_enter_getppid -b 64 \
    --name late --trigger "ftrace:print if buf ~ \"*LATE-host02-$TAG*\"" \
    > "$WORK/late.out" 2>&1
eq "tdctl arm host02 (trigger), group late: exit 0" $? 0
# SPIDS: host01 host02 ... in order
H2PID=$(echo $SPIDS | cut -d' ' -f2)
H2ON=$TRACING/instances/tracedock-$H2PID-flight/tracing_on
kill -STOP "$LPID"
echo "boom: LATE-host02-$TAG the collector hangs" > "$TRACING/trace_marker"
reported() {
	grep -q "flight recorder 'late': its trigger fired: frozen" \
	    "$WORK/agent.host02.err"
}
wait_until $((200 * SLOW)) reported
check "host02 sent TRIGGERED, the collector stopped" reported
eq "host02's ring frozen by its trigger" "$(cat "$H2ON")" 0
# frozen, it takes no trace_marker copies: the kernel would fail every
# application's marker write (EBADF) and stop the copies to other rings
COPY2=$(dirname "$H2ON")/options/copy_trace_marker
eq "host02's frozen ring: no trace_marker copies" "$(cat "$COPY2")" 0
timedout() {
	grep -q "flight recorder 'late': frozen by its trigger and no snapshot came: re-armed" \
	    "$WORK/agent.host02.err"
}
# 6 s (3 KEEPALIVEs of 2 s), noticed at the next KEEPALIVE
wait_until $((400 * SLOW)) timedout
check "no SNAPSHOT after TRIGGERED: host02 re-armed after its timeout, and logged it" \
    timedout || tail -5 "$WORK/agent.host02.err" | sed 's/^/# host02: /'
eq "no SNAPSHOT after TRIGGERED: host02's ring tracing again, copying markers" \
    "$(cat "$H2ON") $(cat "$COPY2")" "1 1"
kill -KILL "$LPID"
wait "$LPID" 2>/dev/null
# shellcheck disable=SC2086
start_listener "$WORK/listen3.log" -d "$OUT" $LTLS --control "$CTL" \
    --idle-timeout 6 || exit 99
wait_until $((1200 * SLOW)) listed 1 '.identity == "host02" and .armed == "late"'
eq "a new listener: host02 armed in group late" \
    "$(jq -r '.[] | select(.identity == "host02") | .armed' "$WORK/list.json")" late
check "a new listener: host02 says it re-armed while the collector was away" \
    grep -q "standby host02: late re-armed while the collector was away" \
    "$WORK/listen3.log"
"$TDCTL" -S "$CTL" disarm > /dev/null 2>&1

cleanup
no_instances "[0-9]*-flight"
finish
