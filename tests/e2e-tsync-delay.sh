#!/bin/sh
# End-to-end: time sync across a delayed, jittery path (issue 27).  This
# kernel may have no sch_netem, so the path is tests/tddelay, a user-space
# netem between the agents and tdlisten: it carries the TCP session as it
# comes and holds each of the probe port's datagrams for a delay of its
# own each way.  Two of them, on their own loopback addresses (the
# listener is bound to 127.0.0.1, each relay to the same port on
# 127.0.0.2 or .3, and connects and sends from there, so that the
# listener sees the session's probes come from the session's address):
#   jitter  100 us +- 50 us each way (netem's "delay 100us 50us");
#   asym    200 us out, nothing back: half of it is a constant error
#           that no probe can see, which the bound must contain.
# One agent on the mono trace clock through each: mono is the listener's
# reference (CLOCK_MONOTONIC, the same kernel), so the truth is 0 offset
# and every sample's offset is its own error.  Checked, for every sample
# and every event (exact counts): the sample's error within its bound,
# and each event's time in the file, after trace-cmd's TIME_SHIFT, within
# the file's bound of the truth (the truth taken from rulers, local
# tdagents on mono without any correction, recorded around each agent as
# in e2e-tsync.sh and tests/tsync-err.awk).  Accuracy (medians) is not
# judged here: bench/tsync.sh TD_TSYNC_MODE=jitter and asym measure it.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDPOKE=$B/tests/tdpoke
TDDELAY=$B/tests/tddelay
N=150
ev=raw_syscalls:sys_enter
flt='id == 110'
paths="jitter asym"

start_listener "$WORK/l.log" --insecure --bind 127.0.0.1 -d "$WORK/out" \
    --tsync-interval 300 || exit 99
# the probe port WELCOME names: the TCP port's number when it was free
uport=$(sed -n 's/^.*time-sync probes on 127.0.0.1 udp port \([0-9]*\).*$/\1/p' \
    "$WORK/l.log")
check "the listener has its probe port" test -n "$uport"
relays=""
# relay NAME ADDR ARGS...: a tddelay on ADDR, ready
relay() {
	_name=$1
	_addr=$2
	shift 2
	"$TDDELAY" "$@" -u "${uport:-0}" "$_addr" "$LPORT" 127.0.0.1 \
	    > "$WORK/$_name.relay" 2>&1 &
	relays="$relays $!"
	wait_until $((100 * SLOW)) grep -q "ready" "$WORK/$_name.relay"
	grep -q ready "$WORK/$_name.relay" ||
	    { echo "# tddelay $_name: $(cat "$WORK/$_name.relay")"; exit 99; }
}
relay jitter 127.0.0.2 -o 100us:50us -b 100us:50us
relay asym 127.0.0.3 -o 200us -b 0
all=""
# started NAME ARGS...: a tdagent, once its instance records the event
started() {
	_n=$1
	shift
	"$TDAGENT" -q -b 64 -e $ev -f "$flt" "$@" 2> "$WORK/$_n.err" &
	p=$!
	all="$all $p"
	# 30 s (times SLOW), or until it died
	wait_recording $p 600 && return 0
	echo "# $_n did not start: $(cat "$WORK/$_n.err")"
	return 1
}
# r0 jitter r1 asym r2: each enables the event after the one before
started r0 -o "$WORK/r0.dat" -C mono || exit 99
started jitter -h 127.0.0.2 -p "$LPORT" --insecure --name jitter -C mono ||
    exit 99
started r1 -o "$WORK/r1.dat" -C mono || exit 99
started asym -h 127.0.0.3 -p "$LPORT" --insecure --name asym -C mono ||
    exit 99
started r2 -o "$WORK/r2.dat" -C mono || exit 99
wait_session "$WORK/l.log" 2
sleep 0.4
"$TDPOKE" $N 10000 2 &
poke=$!
wait $poke
sleep 0.4
# shellcheck disable=SC2086 # a list of pids
kill -TERM $all
# shellcheck disable=SC2086
wait $all
# shellcheck disable=SC2086 # a list of pids
kill -TERM $relays
# shellcheck disable=SC2086
wait $relays
stop_listener
for r in $paths; do
	sed "s/^/# $r: /" "$WORK/$r.relay"
	check "$r: the relay carried probes both ways" awk '
	    $2 == "out:" && $3 > 0 { o = 1 } $2 == "back:" && $3 > 0 { b = 1 }
	    END { exit !(o && b) }' "$WORK/$r.relay"
done

# stamps FILE: times in ns after trace-cmd's corrections of the second
# call of each pair (the comm may show as <...>: by pid)
stamps() {
	trace-cmd report -t --nodate -i "$1" 2>/dev/null |
	    grep -E -- "-$poke +\[" | sed 's/^.*\] *\([0-9.]*\):.*$/\1/' |
	    tr -d . | awk 'NR % 2 == 0'
}
for k in 0 1 2; do
	stamps "$WORK/r$k.dat" > "$WORK/r$k.ts"
	eq "ruler $k: every poke is in the file" "$(wc -l < "$WORK/r$k.ts")" $N
done
cols="$WORK/r0.ts"
k=0
for r in $paths; do
	k=$((k + 1))
	f=$(ls "$WORK"/out/127.0.0.*/*-"$r".dat 2>/dev/null)
	stamps "$f" > "$WORK/$r.ts"
	eq "$r: every poke is in the file" "$(wc -l < "$WORK/$r.ts")" $N
	cols="$cols $WORK/$r.ts $WORK/r$k.ts"
	sed -n "s/^.*'$r' .*time sync: /# $r: /p" "$WORK/l.log"
	check "$r: the recording has its time shift" \
	    grep -q "'$r' .*time sync: [0-9]* samples" "$WORK/l.log"
	check "$r: TIME_SHIFT in the file" sh -c \
	    "trace-cmd dump --options -i '$f' 2>/dev/null | grep -q 'Option TimeShift'"
	# every sample: offset (its error, mono's truth being 0) and bound
	grep "'$r' .*time sync round" "$WORK/l.log" |
	    sed 's/.*offset \(-*[0-9]*\) .*+-\([0-9]*\) ns.*/\1 \2/' |
	    tr -d - > "$WORK/$r.off"
	n=$(wc -l < "$WORK/$r.off")
	echo "# $r: samples' error median $(cut -d' ' -f1 "$WORK/$r.off" |
	    sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }') ns," \
	    "largest $(cut -d' ' -f1 "$WORK/$r.off" | sort -n | tail -1) ns;" \
	    "bounds $(cut -d' ' -f2 "$WORK/$r.off" | sort -n | head -1) to" \
	    "$(cut -d' ' -f2 "$WORK/$r.off" | sort -n | tail -1) ns"
	check "$r: samples came over the probe port ($n)" test "$n" -ge 3
	eq "$r: samples whose error lies within their bound" \
	    "$(awk '$1 <= $2' "$WORK/$r.off" | wc -l)" "$n"
	# the delay is in the path: jitter's two ways take 100 us at least,
	# asym's 200 us, and a bound is at least half the round trip
	[ $r = jitter ] && low=50000 || low=100000
	eq "$r: samples whose bound covers the path's delay ($low ns)" \
	    "$(awk -v l=$low '$2 >= l' "$WORK/$r.off" | wc -l)" "$n"
done

# every event: its error e = a - (r_lo + r_hi) / 2, known within half its
# bracket's widening over the narrowest (tests/tsync-err.awk), must lie
# within the file's bound (the largest bound of its kept samples:
# trace-cmd interpolates between them, and the truth, 0, is a line) and
# the rulers' slack of 1 us, as in e2e-tsync.sh
paste $cols | awk -v names="$paths" -f "$S/tests/tsync-err.awk" \
    > "$WORK/err"
sed 's/^/# /' "$WORK/err"
k=0
for r in $paths; do
	k=$((k + 1))
	b=$(sed -n "s/^.*'$r' .*time sync: [0-9]* samples .*error bound +-\([0-9]*\) ns.*/\1/p" \
	    "$WORK/l.log")
	paste $cols | awk -v k=$k -v b="${b:-0}" '
	    { lo = $(2 * k - 1); a = $(2 * k); hi = $(2 * k + 1)
	      e[NR] = a - (lo + hi) / 2; w[NR] = hi - lo
	      if (NR == 1 || w[NR] < w0) w0 = w[NR] }
	    END { for (i = 1; i <= NR; i++) {
		v = e[i] < 0 ? -e[i] : e[i]
		if (v - (w[i] - w0) / 2 <= b + 1000) ok++ }
		print ok + 0 }' > "$WORK/$r.within"
	eq "$r: events whose time lies within +-${b:-?} ns of the truth" \
	    "$(cat "$WORK/$r.within")" $N
done
finish
