#!/bin/sh
# End-to-end: time sync.  Agents on this machine, each with its own
# instance and a different trace clock, record the same rare events
# (tests/tdpoke: pairs of getppid calls 10 ms apart); after tdlisten's
# TIME_SHIFT, DATE (and TSC2NSEC for x86-tsc) trace-cmd 3.1.6 must give
# every occurrence the same time in every file, and the listener's time.
#
# The kernel writes one occurrence into the instances one after the other,
# in the order they enabled the event, each stamping its own time: so
# "rulers", local tdagents on the mono clock (the listener's reference,
# CLOCK_MONOTONIC) without any correction, are started between the agents,
# and the rulers on both sides of an agent bracket the moment its stamp was
# taken (tests/tsync-err.awk, docs/timesync.md "Measuring the error").  The
# checks use lower bounds of the error (what the rulers cannot account for
# is given to the agent) against the error bounds the samples claim, which
# hold however busy the machine is, and which a missing or wrong correction
# exceeds: the same computation on the uncorrected times must fail them
# (x86-tsc counts cycles, not ns).  TD_TSYNC_INTERVAL=-1 runs the listener
# without time sync: the test must fail then.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDPOKE=$B/tests/tdpoke
N=150
clocks="mono local global mono_raw boot"
grep -q x86-tsc $TRACING/trace_clock && clocks="$clocks x86-tsc"
ev=raw_syscalls:sys_enter
flt='id == 110'

start_listener "$WORK/l.log" --insecure -d "$WORK/out" \
    --tsync-interval "${TD_TSYNC_INTERVAL:-500}" || exit 99
all=""
# started NAME ARGS...: a tdagent, once its instance records the event
started() {
	name=$1
	shift
	"$TDAGENT" -q -b 64 -e $ev -f "$flt" "$@" 2> "$WORK/$name.err" &
	p=$!
	all="$all $p"
	# 30 s (times SLOW), or until it died
	wait_recording $p 600 && return 0
	echo "# $name did not start: $(cat "$WORK/$name.err")"
	return 1
}
# in this order: r0 a1 r1 a2 r2 ... (each enables the event after the last)
k=0
started r0 -o "$WORK/r0.dat" -C mono || exit 99
for c in $clocks; do
	k=$((k + 1))
	# mono with -v: its rounds, judged below
	v=""
	[ "$c" = mono ] && v=-v
	started "$c" -h 127.0.0.1 -p "$LPORT" --insecure --name "$c" -C "$c" \
	    $v || exit 99
	started r$k -o "$WORK/r$k.dat" -C mono || exit 99
done
sleep 0.3
"$TDPOKE" $N 10000 2 &
poke=$!
wait $poke
sleep 0.2
kill -TERM $all
wait $all

# poke_times: the times in ns of the pokes' calls in a report on stdin,
# by pid (the comm shows as <...> when saved_cmdlines lost it)
poke_times() {
	grep -E -- "-$poke +\[" | sed 's/^.*\] *\([0-9.]*\):.*$/\1/' |
	    tr -d .
}
# stamps FILE [ARGS]: times in ns after trace-cmd's corrections (or with
# ARGS, e.g. --raw-ts, without), of the second call of each pair
stamps() {
	_st_f=$1	# not f: callers keep their own
	shift
	trace-cmd report -t --nodate "$@" -i "$_st_f" 2>/dev/null |
	    poke_times | awk 'NR % 2 == 0'
}
k=0
stamps "$WORK/r0.dat" > "$WORK/r0.ts"
cols="$WORK/r0.ts"
rawcols="$WORK/r0.ts"
for c in $clocks; do
	k=$((k + 1))
	f=$(ls "$WORK"/out/127.0.0.1/*-"$c".dat 2>/dev/null)
	check "$c: time sync in the listener's log" \
	    grep -q "'$c' .*time sync: [0-9]* samples" "$WORK/l.log"
	check "$c: TIME_SHIFT and DATE in the file" sh -c \
	    "trace-cmd dump --options -i '$f' 2>/dev/null | grep -q 'Option TimeShift' &&
	     trace-cmd dump --options -i '$f' 2>/dev/null | grep -q 'Option DATE'"
	# no option of tracedock's own (issue 28: 0x7464 made libtracecmd
	# warn "unknown option 29796" in split, report --verbose, KernelShark)
	check "$c: trace-cmd report --verbose warns of nothing" sh -c \
	    "! trace-cmd report --verbose -i '$f' 2>&1 >/dev/null |
	     grep -q 'unknown option'"
	if [ "$c" = mono ]; then
		check "$c: split, convert, libtracecmd, KernelShark warn of nothing" \
		    tools_clean "$f"
	fi
	stamps "$f" > "$WORK/$c.ts"
	stamps "$f" --raw-ts > "$WORK/$c.raw"
	stamps "$WORK/r$k.dat" > "$WORK/r$k.ts"
	eq "$c: every poke is in the file" "$(wc -l < "$WORK/$c.ts")" $N
	eq "ruler $k: every poke is in the file" "$(wc -l < "$WORK/r$k.ts")" $N
	cols="$cols $WORK/$c.ts $WORK/r$k.ts"
	rawcols="$rawcols $WORK/$c.raw $WORK/r$k.ts"
done
eq "ruler 0: every poke is in the file" "$(wc -l < "$WORK/r0.ts")" $N
paste $cols | awk -v names="$clocks" -f "$S/tests/tsync-err.awk" > "$WORK/err"
paste $rawcols | awk -v names="$clocks" -f "$S/tests/tsync-err.awk" \
    > "$WORK/raw"
sed 's/^/# /' "$WORK/err"

# the view users ask for: trace-cmd report -i A -i B ... of all the files
# at once gives each file's occurrences the times checked here (the same
# corrections), in one time order
args=""
for c in $clocks; do
	args="$args -i $(ls "$WORK"/out/127.0.0.1/*-"$c".dat)"
done
# shellcheck disable=SC2086 # one -i FILE pair per clock
trace-cmd report -t --nodate $args > "$WORK/merged" 2>/dev/null
for c in $clocks; do
	f=$(basename "$(ls "$WORK"/out/127.0.0.1/*-"$c".dat)")
	grep -E "^ *$f: " "$WORK/merged" | poke_times | awk 'NR % 2 == 0' \
	    > "$WORK/$c.merged"
	check "$c: the same times in the report of all the files" \
	    cmp -s "$WORK/$c.merged" "$WORK/$c.ts"
done
poke_times < "$WORK/merged" > "$WORK/merged.ts"
check "the report of all the files is in one time order" \
    sort -c -n "$WORK/merged.ts"
eq "the report of all the files has every occurrence of every agent" \
    "$(wc -l < "$WORK/merged.ts")" "$(( 2 * N * $(echo $clocks | wc -w) ))"
sed -n "s/^.*'\([a-z0-9_-]*\)' .*time sync: /# \1: /p" "$WORK/l.log"

# received NAME LOG: how many samples the listener received from NAME's
# session: kept, dropped, imprecise and off the line
received() {
	sed -n "s/^.*'$1' .*time sync: \([0-9]*\) samples (\([0-9]*\) dropped, \([0-9]*\) imprecise, \([0-9]*\) off the line).*$/\1 \2 \3 \4/p
	    s/^.*'$1' .*no time sync: the agent sent no usable sample (\([0-9]*\) dropped).*$/\1/p" \
	    "$2" | awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; print s }'
}

# limits LOG ERR CLOCKS: each agent's and each pair's error (ERR, from
# tsync-err.awk) within what the samples claim (LOG, the listener's).
# Every sample claims an error bound, half its round trip, which holds by
# causality (the listener's stamp lies between the agent's two markers),
# and trace-cmd interpolates between samples, so an occurrence's error
# lies within the larger bound of the two samples around it.  After the
# last sample (the last round may make none, right after a round that made
# one) trace-cmd extrapolates the last two, here at least 0.5 s apart,
# over at most 0.7 s: within 1 + 2 * 1.4 bounds.  So the largest error of
# a file must be within 4 times its largest bound (+ 1 us for the rulers'
# own uncertainty), and of two files within 4 times the sum of theirs.
# The median must be within half the bound: a systematic error of half a
# round trip (a sample at the wrong end of its probe) fails that.  It is
# judged where a file kept 3 samples or more: with one or two (a saturated
# machine whose rounds made few samples, or whose wide ones the listener
# set aside) every occurrence carries the same sample's own error, which
# may lie anywhere within its bound; then it is reported.  It is reported,
# not judged, with the listener under valgrind (SLOW): the listener stamps
# a probe when its read callback begins, and memcheck makes that late by
# a good part of the round trip every time, one-sided (seen: a median of
# 50,980 ns against half a bound of 50,878 ns over 3 samples).
limits() {
	for c in $3; do
		sed -n "s/^.*'$c' .*time sync: \([0-9]*\) samples .*error bound +-\([0-9]*\) ns.*/$c \2 \1/p" \
		    "$1"
	done > "$WORK/bound"
	awk 'FILENAME == ARGV[1] { b[$1] = $2; n[$1] = $3; next }
	    $1 == "agent" { print $2, $5, $6, b[$2], n[$2] + 0 }
	    $1 == "pair" { print $2 "-" $3, $8, $9, b[$2] + b[$3],
		n[$2] < n[$3] ? n[$2] + 0 : n[$3] + 0 }' \
	    "$WORK/bound" "$2" > "$WORK/low"
	while read -r what med max bound nsamples; do
		check "$what: largest error >= $max ns, <= 4 * ${bound:-0} + 1000" \
		    test "$max" -le "$(( 4 * ${bound:-0} + 1000 ))"
		if [ "${nsamples:-0}" -ge 3 ] && [ "$SLOW" = 1 ]; then
			check "$what: median error >= $med ns, within $(( ${bound:-0} / 2 )) ns" \
			    test "$med" -le "$(( ${bound:-0} / 2 ))"
		else
			echo "# $what: median error >= $med ns (bound $bound ns; ${nsamples:-0} samples, SLOW $SLOW: not judged)"
		fi
	done < "$WORK/low"
}
limits "$WORK/l.log" "$WORK/err" "$clocks"
# the median between two files, through the lower bound of each pair's
# median: reported, not judged.  How close two files come depends on how
# promptly the machine schedules the probes and replies (two busy loops
# gave medians up to 1.03 us, ASan builds 2 to 10 us): a rate of the
# machine, which bench/tsync.sh measures against the 1 us target.  What is
# judged above holds however busy the machine is: every error within the
# bounds the samples claim.
awk '$1 == "pair" { print "# pair " $2 "-" $3 ": median error >= " $8 " ns" }' \
    "$WORK/err"
# the same without the corrections must fail these limits where the clock
# is not CLOCK_MONOTONIC's (always so for x86-tsc: it counts cycles)
awk '$1 == "agent" { print "# uncorrected " $2 ": median |e| " $3 " ns" }' \
    "$WORK/raw"
if echo " $clocks " | grep -q " x86-tsc "; then
	med=$(awk '$1 == "agent" && $2 == "x86-tsc" { print $5 }' "$WORK/raw")
	b=$(awk '$1 == "x86-tsc" { print $2 }' "$WORK/bound")
	check "the limits catch uncorrected times (x86-tsc: $med ns)" \
	    test "${med:-0}" -gt "$(( 4 * ${b:-0} + 1000 ))"
fi
# mono is CLOCK_MONOTONIC, the listener's reference: there the true offset
# is 0 and every sample's offset is its own error, within its bound
grep "'mono' .*time sync round" "$WORK/l.log" |
    sed 's/.*offset \(-*[0-9]*\) .*+-\([0-9]*\) ns.*/\1 \2/' | tr -d - \
    > "$WORK/mono.off"
n=$(wc -l < "$WORK/mono.off")
# rounds at the start, every 500 ms of the 1.5 s of pokes and at the end:
# at least 3, however busy the machine (a round that meets only busy
# moments makes no sample, so the samples are reported, not judged); and
# every sample the agent sent is in the listener's account
rounds=$(sed -n 's/^.*time sync: \([0-9]*\) rounds, .*$/\1/p' "$WORK/mono.err")
sent=$(sed -n 's/^.*time sync: [0-9]* rounds, \([0-9]*\) samples sent.*$/\1/p' \
    "$WORK/mono.err")
echo "# mono: ${rounds:-?} rounds, ${sent:-?} samples sent, $n kept"
check "mono: rounds at the start, periodically and at the end (${rounds:-none})" \
    test "${rounds:-0}" -ge 3
eq "mono: every sample sent reached the listener" "$(received mono "$WORK/l.log")" \
    "${sent:-none}"
awk '{ print "# mono sample: error " $1 " ns, bound " $2 " ns" }' \
    "$WORK/mono.off"
check "mono: every sample's error within its bound" \
    awk '$1 > $2 { exit 1 }' "$WORK/mono.off"
stop_listener

# a recording resumed after kill -9 of the listener stays on the
# timeline: the restarted listener recovers the samples from the
# checkpoint, the agent resends what was not acknowledged, later rounds add
# samples, and every occurrence before, during and after the gap is placed
# within the samples' bounds
rc=boot
echo " $clocks " | grep -q " x86-tsc " && rc=x86-tsc
start_listener "$WORK/l4.log" --insecure -d "$WORK/out4" \
    --tsync-interval "${TD_TSYNC_INTERVAL:-500}" || exit 99
all=""
started q0 -o "$WORK/q0.dat" -C mono || exit 99
started "$rc" -h 127.0.0.1 -p "$LPORT" --insecure --name "$rc" -C "$rc" ||
    exit 99
started q1 -o "$WORK/q1.dat" -C mono || exit 99
wait_session "$WORK/l4.log"
"$TDPOKE" 400 10000 2 &
poke=$!
sleep 1.5
kill -9 "$LPID"
wait "$LPID" 2>/dev/null
sleep 1
LPORT_FIXED=$LPORT start_listener "$WORK/l4b.log" --insecure -d "$WORK/out4" \
    --tsync-interval "${TD_TSYNC_INTERVAL:-500}" || exit 99
unset LPORT_FIXED	# sh keeps an assignment made for a function call
wait $poke
wait_until $((200 * SLOW)) grep -q "resumed at offset" "$WORK/l4b.log"
# a round after the resume, whenever it comes (the listener logs it)
wait_until $((200 * SLOW)) grep -q "'$rc' .*time sync round" "$WORK/l4b.log"
kill -TERM $all
wait $all
check "resumed: the restarted listener recovered the recording" \
    grep -q "recovered '" "$WORK/l4b.log"
check "resumed: the agent resumed it" grep -q "resumed at offset" \
    "$WORK/l4b.log"
check "resumed: the restarted listener made its time shift" \
    grep -q "'$rc' .*time sync: [0-9]* samples" "$WORK/l4b.log"
f=$(ls "$WORK"/out4/127.0.0.1/*-"$rc".dat 2>/dev/null)
stamps "$WORK/q0.dat" > "$WORK/q0.ts"
stamps "$WORK/q1.dat" > "$WORK/q1.ts"
stamps "$f" > "$WORK/resumed.ts"
eq "resumed: every poke is in the file" "$(wc -l < "$WORK/resumed.ts")" 400
eq "resumed: every poke is in the rulers' files" \
    "$(cat "$WORK/q0.ts" "$WORK/q1.ts" | wc -l)" 800
paste "$WORK/q0.ts" "$WORK/resumed.ts" "$WORK/q1.ts" |
    awk -v names="$rc" -f "$S/tests/tsync-err.awk" > "$WORK/err4"
sed 's/^/# resumed: /' "$WORK/err4"
sed -n "s/^.*'\([a-z0-9_-]*\)' .*time sync: /# resumed \1: /p" "$WORK/l4b.log"
limits "$WORK/l4b.log" "$WORK/err4" "$rc"
stop_listener

# a listener that stalls past a round's timeout: later replies of that
# round are dropped, later rounds work, the recording ends normally
start_listener "$WORK/l3.log" --insecure -d "$WORK/out3" --tsync-interval 300 ||
    exit 99
# (the recording runs until a round after the stall went through, then
# SIGTERM: a listener under valgrind on a loaded machine may miss several
# rounds' 1 s probe timeout after it, where a fixed 6 s recording had none
# left)
later_round() {
	awk '/time sync: no answer from the listener/ { failed = 1; next }
	    failed && (/time sync round [0-9]*: offset/ ||
		/no sample in round/) { ok = 1 }
	    END { exit !ok }' "$WORK/stall.err"
}
"$TDAGENT" -v -h 127.0.0.1 -p "$LPORT" --insecure -e sched \
    -s $((120 * SLOW)) --name stall 2> "$WORK/stall.err" &
apid=$!
wait_recording "$apid"
wait_session "$WORK/l3.log"
sleep 0.2
# three seconds: longer than a probe's 1 s timeout wherever a round starts
kill -STOP "$LPID"
sleep 3
kill -CONT "$LPID"
wait_until $((1200 * SLOW)) later_round
kill -TERM "$apid"
wait "$apid"
eq "a stalled listener: the agent still exits 0" $? 0
# the stalled round is reported (no answer in time); a round after it
# went through: its replies matched its probes, whether it made a sample
# or found only busy moments (a saturated machine); every sample the agent
# sent reached the listener
check "the stalled round is reported" grep -q "tdagent: time sync: " \
    "$WORK/stall.err"
grep -v "time sync round\|recording: \|sent [0-9]" "$WORK/stall.err" |
    grep "time sync" | sed 's/^/# /'
check "a later round went through" later_round
sent=$(sed -n 's/^.*time sync: [0-9]* rounds, \([0-9]*\) samples sent.*$/\1/p' \
    "$WORK/stall.err")
eq "every sample sent after the stall made it into the file's account" \
    "$(received stall "$WORK/l3.log")" "${sent:-none}"
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
