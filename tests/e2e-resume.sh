#!/bin/sh
# End-to-end: nothing is lost when the listener dies or the network goes
# away.  Each agent records about 20 s of syscall bursts with -o and -h
# together over TLS; the file the listener ends up with must hold exactly
# the events of the agent's local file (the same pages), with nothing
# marked lost, after:
#   1. kill -9 of tdlisten in the middle, restarted 5 s later;
#   2. SIGTERM of tdlisten in the middle, restarted 2 s later;
#   3. the link cut for 10 s (agent in its own network namespace, joined
#      by a veth pair whose host end goes down, then up);
#   4. the listener's disk full (a small tmpfs) for 8 s, then grown: the
#      agent backs off and resends little, /status says why;
#   6. the identity's --quota reached, then an old file removed.
#   9. the listener killed while the agent's headers are on their way
#      (a shaped veth link), before the first page.
#  10. the listener's disk full before the agent's first connection: it is
#      told to come back later, waits, and records once there is room.
# With -o too, a listener gone for good and no spool (7), the local file
# still loses nothing.  Without -o and without a spool, what the agent
# cannot keep is counted per CPU, marked, logged, and adds up (8).
# And a recording whose agent never comes back is kept as a readable
# .incomplete.dat once --resume-wait has passed.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
command -v ip >/dev/null || skip "the ip command (iproute2) is missing"
# the veth pair's subnet, in this network namespace's routes: one of
# 200 by the test's pid, so that two runs of the suite at once (a shared
# machine, two trees) do not meet there
NET=10.77.$(($$ % 200 + 20))
P=$WORK/pki
pki "$P" web1 || { echo "FAIL: cannot make certificates"; exit 99; }
sh "$TDCERT" issue "$P" vlistener --server --ip $NET.1 >/dev/null ||
    { echo "FAIL: cannot make certificates"; exit 99; }
TLS="--cert $P/listener.pem --key $P/listener.key --ca $P/ca.pem"
NS=
# TD_RESUME_PARTS="1 3" runs only those parts (while debugging)
part() {
	case " ${TD_RESUME_PARTS:-1 2 3 4 5 6 7 8 9 10} " in *" $1 "*) return 0 ;; esac
	return 1
}

# 24 bursts of 5000 one-byte blocks (20000 syscall events each), 0.5 s
# apart: about 20 s of recording, 480,000 events, about 24 MB of ring
# pages.  The rings (-b 32768: 32 MiB per CPU) hold the whole workload, so
# the count is exact by construction however slowly the agent is
# scheduled: what these parts test is what the network and the listener
# do to a recording, not whether a busy machine lets the agent keep up
BURST='for i in $(seq 1 24); do dd if=/dev/zero of=/dev/null bs=1 count=5000 status=none; sleep 0.5; done'

# agent_bg NAME HOST [ARGS...]: record BURST to HOST and to a local file,
# in the background (sets APID); $NS runs it in a network namespace
agent_bg() {
	name=$1 host=$2
	shift 2
	mkdir -p "$WORK/spool.$name"
	$NS "$TDAGENT" -h "$host" -p "$LPORT" --cert "$P/web1.pem" \
	    --key "$P/web1.key" --ca "$P/ca.pem" --name "$name" \
	    --spool "$WORK/spool.$name" -o "$WORK/$name.local.dat" \
	    -e raw_syscalls -F -b 32768 "$@" -- sh -c "$BURST" \
	    2> "$WORK/agent.$name.err" &
	APID=$!
}

# same_events NAME DIR: the listener's file holds the local file's events
same_events() {
	name=$1 dir=$2
	f=$dir/$(remote_file "$WORK/agent.$name.err")
	check "$name: the listener wrote a file" test -f "$f"
	check "$name: trace-cmd reads it cleanly" tc_clean "$f"
	"$TDCOUNT" "$f" > "$WORK/r.$name" 2>&1
	"$TDCOUNT" "$WORK/$name.local.dat" > "$WORK/l.$name" 2>&1
	l=$(field events < "$WORK/l.$name")
	eq "$name: exactly the local file's events" \
	    "$(field events < "$WORK/r.$name")" "$l"
	# 480,000 block events, plus each dd's and sleep's own start-up calls
	check "$name: the recording is the whole workload ($l events)" \
	    test "${l:-0}" -gt 480000 -a "${l:-0}" -lt 500000
	eq "$name: no event marked lost" \
	    "$(field missed < "$WORK/r.$name")$(field missed < "$WORK/l.$name")" 00
	check "$name: per-CPU counts match too" sh -c \
	    "grep '^cpu[0-9]' '$WORK/r.$name' | sort > '$WORK/rc'; grep '^cpu[0-9]' '$WORK/l.$name' | sort > '$WORK/lc'; cmp -s '$WORK/rc' '$WORK/lc'"
	check "$name: no checkpoint or spool left behind" sh -c \
	    "! ls '$dir'/*/*.part '$dir'/*/*.state 2>/dev/null | grep -q ."
}

# wait_agent NAME: its exit status is 0 and it said it reconnected
wait_agent() {
	wait "$APID"
	_rc=$?
	eq "$1: tdagent exits 0" $_rc 0
	[ $_rc = 0 ] || tail -5 "$WORK/agent.$1.err" | sed 's/^/# /'
	# during the recording, or at its end (net_finish)
	check "$1: tdagent reconnected and resumed" \
	    grep -q -e "reconnected to" -e "resumed after lost connections" \
	    "$WORK/agent.$1.err"
}

# 1. kill -9, restart 5 s later
if part 1; then
OUT=$WORK/out1
start_listener "$WORK/l1.log" -d "$OUT" $TLS || exit 99
agent_bg kill9 127.0.0.1
wait_recording "$APID"
wait_session "$WORK/l1.log"
# killed once it has a checkpoint (its headers are through), however
# slowly they came
wait_until $((800 * SLOW)) sh -c "ls '$OUT'/web1/*.dat.state >/dev/null 2>&1"
kill -9 "$LPID"
wait "$LPID" 2>/dev/null
check "kill -9: the recording's checkpoint is on disk" \
    sh -c "ls '$OUT'/web1/*.dat.state >/dev/null 2>&1"
sleep 5
LPORT_FIXED=$LPORT start_listener "$WORK/l1b.log" -d "$OUT" $TLS || exit 99
unset LPORT_FIXED	# sh keeps an assignment made for a function call
wait_agent kill9
check "kill -9: the restarted listener recovered the recording" \
    grep -q "recovered '" "$WORK/l1b.log"
check "kill -9: the agent resumed the recovered recording" \
    grep -q "resumed at offset" "$WORK/l1b.log"
same_events kill9 "$OUT"
stop_listener
fi

# 2. SIGTERM, restart 2 s later
if part 2; then
OUT=$WORK/out2
start_listener "$WORK/l2.log" -d "$OUT" $TLS || exit 99
agent_bg term 127.0.0.1
wait_recording "$APID"
wait_session "$WORK/l2.log"
wait_until $((800 * SLOW)) sh -c "ls '$OUT'/web1/*.dat.state >/dev/null 2>&1"
kill -TERM "$LPID"
wait "$LPID"
eq "SIGTERM: tdlisten exits 0" $? 0
check "SIGTERM: the recording was left to be resumed" \
    grep -q "left '.*' to be resumed" "$WORK/l2.log"
sleep 2
LPORT_FIXED=$LPORT start_listener "$WORK/l2b.log" -d "$OUT" $TLS || exit 99
unset LPORT_FIXED
wait_agent term
check "SIGTERM: the agent was told to come back later" \
    grep -q "shutting down: come back later" "$WORK/agent.term.err"
same_events term "$OUT"
stop_listener
fi

# 3. the link cut for 10 s
NSN=tdns$$
# ip mounts /run/netns on the first "netns add": undo that too, so a
# throw-away root (../shared/tools/fresh-debian.sh) can be removed
mountpoint -q /run/netns 2>/dev/null && netns_mounted=1 || netns_mounted=0
cleanup_ns() {
	ip netns del "$NSN" 2>/dev/null
	ip link del tdv$$ 2>/dev/null
	if [ $netns_mounted = 0 ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]
	then
		umount /run/netns 2>/dev/null
		umount /run/netns 2>/dev/null
	fi
}
trap 'cleanup_ns; [ "${TD_KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"' EXIT
# ns_up: the namespace $NSN, joined to this one by a veth pair: tdv$$
# ($NET.1) here, tdp$$ ($NET.2) there
ns_up() {
	ip netns add "$NSN" 2>/dev/null &&
	    ip link add tdv$$ type veth peer name tdp$$ &&
	    ip link set tdp$$ netns "$NSN" &&
	    ip addr add $NET.1/24 dev tdv$$ && ip link set tdv$$ up &&
	    ip -n "$NSN" addr add $NET.2/24 dev tdp$$ &&
	    ip -n "$NSN" link set tdp$$ up && ip -n "$NSN" link set lo up
}
if ! part 3; then
	:
elif ns_up; then
	OUT=$WORK/out3
	start_listener "$WORK/l3.log" -d "$OUT" --bind $NET.1 \
	    --cert "$P/vlistener.pem" --key "$P/vlistener.key" \
	    --ca "$P/ca.pem" || exit 99
	NS="ip netns exec $NSN"
	agent_bg cut $NET.1
	NS=
	wait_recording "$APID"
	wait_session "$WORK/l3.log"
	sleep 3
	ip link set tdv$$ down
	sleep 10
	ip link set tdv$$ up
	wait "$APID"
	eq "link cut: tdagent exits 0" $? 0
	[ -n "${TD_DEBUG:-}" ] && cat "$WORK/agent.cut.err" "$WORK/l3.log" >&2
	same_events cut "$OUT"
	stop_listener
	cleanup_ns
else
	fail "cannot make a network namespace with a veth pair"
fi

# 4. the listener's disk fills up, then has room again
OUT=$WORK/out4
mkdir -p "$OUT"
if ! part 4; then
	:
elif mount -t tmpfs -o size=6m tdfull "$OUT"; then
	start_listener "$WORK/l4.log" -d "$OUT" $TLS --compression none \
	    --http 127.0.0.1:0 || exit 99
	wait_until $((100 * SLOW)) grep -q "status page and metrics at" \
	    "$WORK/l4.log"
	HPORT=$(sed -n 's|.*status page and metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
	    "$WORK/l4.log")
	agent_bg full 127.0.0.1
	wait_until $((1200 * SLOW)) grep -q "the recording pauses" "$WORK/l4.log"
	check "disk full: the listener paused the recording" \
	    grep -q "the recording pauses" "$WORK/l4.log"
	# /status says why (issue 28): the page said "paused" only
	why_full() {
		curl -sS --max-time $((10 * SLOW)) \
		    "http://127.0.0.1:$HPORT/status" > "$WORK/status4" &&
		    grep -q '"why":"[^"]*: No space left on device"' \
		    "$WORK/status4"
	}
	wait_until $((200 * SLOW)) why_full
	check "disk full: /status says why ($(grep -o '"why":"[^"]*"' \
	    "$WORK/status4" | head -1))" why_full
	# 8 s full: the agent backs off, told to come back later at its
	# HELLO, and sends nothing again until there is room (it resent the
	# same megabytes 26 times in 20 s, 102.6 MB for 24.4 MB)
	sleep 8
	mount -o remount,size=400m "$OUT"
	wait_agent full
	same_events full "$OUT"
	sed -n -e 's/^tdagent: \([0-9]* reconnections\)$/# \1/p' \
	    -e "s/^tdagent: the listener wrote .* (\(.* MB sent\).*/# \1/p" \
	    "$WORK/agent.full.err"
	n=$(sed -n 's/^tdagent: \([0-9]*\) reconnections$/\1/p' \
	    "$WORK/agent.full.err")
	check "disk full: the agent resumed at most 3 times (${n:-?})" \
	    test "${n:-99}" -le 3
	n=$(grep -c "the listener stopped the recording" "$WORK/agent.full.err")
	check "disk full: it was stopped at most twice ($n log lines)" \
	    test "$n" -le 2
	check "disk full: it sent at most 1.3 times what it recorded" awk '
	    /^tdagent: the listener wrote .* MB sent/ {
		s = $0; sub(/.*\(/, "", s); sub(/ MB sent.*/, "", s); sent = s }
	    /^tdagent: .* s: cpu0 / {
		for (i = 1; i < NF; i++) if ($(i + 1) == "MB," || $(i + 1) == "MB;")
			rec += $i }
	    END { print "# sent " sent " MB, recorded " rec " MB";
		exit !(sent > 0 && rec > 0 && sent <= 1.3 * rec) }' \
	    "$WORK/agent.full.err"
	stop_listener
	umount "$OUT"
else
	fail "cannot mount a tmpfs"
fi

# 6. the identity's --quota is reached, then an old file goes
if part 6; then
OUT=$WORK/out6
mkdir -p "$OUT/web1"
head -c 90000000 /dev/zero > "$OUT/web1/old.dat"
start_listener "$WORK/l6.log" -d "$OUT" $TLS --compression none \
    --quota 100M || exit 99
agent_bg quota 127.0.0.1
wait_until $((1200 * SLOW)) grep -q "over the --quota" "$WORK/l6.log"
check "quota: the listener paused the recording" \
    grep -q "over the --quota" "$WORK/l6.log"
sleep 1
rm -f "$OUT/web1/old.dat"
wait_agent quota
n=$(grep -c "resumed at offset" "$WORK/l6.log")
check "quota: the agent backs off while it is paused ($n resumes)" \
    test "$n" -le 20
same_events quota "$OUT"
stop_listener
fi

# 7. -o with -h, the listener gone for good and no spool: the network
# is given up, the local file loses nothing.  200,000 blocks make about
# 40 MB of ring pages: the 48 MiB rings hold them all, so the count is
# exact however slowly the agent is scheduled (with a storm larger than
# the rings a busy machine decides the count, not tdagent)
if part 7; then
OUT=$WORK/out7
start_listener "$WORK/l7.log" -d "$OUT" $TLS || exit 99
rm -f "$WORK/pid7"
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --spool-max 0 --reconnect-wait 1 \
    -o "$WORK/gone.dat" -e raw_syscalls -F -b 49152 -- sh -c \
    'echo $$ > '"$WORK/pid7"'; sleep 1; exec dd if=/dev/zero of=/dev/null bs=1 count=200000 status=none' \
    2> "$WORK/agent.gone7.err" &
APID=$!
wait_recording "$APID"
wait_session "$WORK/l7.log"
kill -9 "$LPID"
wait "$LPID" 2>/dev/null
wait "$APID"
rc=$?
eq "listener gone, no spool: tdagent -o -h exits 0" $rc 0
[ $rc = 0 ] || sed 's/^/# /' "$WORK/agent.gone7.err"
check "it gave the network up" \
    grep -q "the recording goes on into '$WORK/gone.dat' only" \
    "$WORK/agent.gone7.err"
"$TDCOUNT" "$WORK/gone.dat" -p "$(cat "$WORK/pid7")" > "$WORK/c7"
n=$(field events < "$WORK/c7")
eq "and the local file lost nothing" "$(field missed < "$WORK/c7")" 0
check "it holds the whole storm ($n events for 200000 blocks)" \
    test "${n:-0}" -gt 800000 -a "${n:-0}" -lt 802000
fi

# 8. no spool (--spool-max 0) and the listener stopped while a storm runs:
# once 20 MiB wait in memory the agent stops reading its 1 MiB rings and
# the kernel overwrites them; that loss is counted per CPU in the file's
# CPU stats, marked in its pages, logged by both sides with the same
# count, and with the events kept adds up to the whole storm
if part 8; then
OUT=$WORK/out8
start_listener "$WORK/l8.log" -d "$OUT" $TLS || exit 99
rm -f "$WORK/pid8"
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --spool-max 0 --name full \
    -e raw_syscalls -F -b 1024 -- sh -c \
    'echo $$ > '"$WORK/pid8"'; sleep 1; exec dd if=/dev/zero of=/dev/null bs=1 count=1500000 status=none' \
    2> "$WORK/agent.full8.err" &
APID=$!
wait_recording "$APID"
wait_session "$WORK/l8.log"
kill -STOP "$LPID"
# until the storm is over (its process gone), at most 12 s: the agent's
# TCP_USER_TIMEOUT is 15
wait_until 240 test -s "$WORK/pid8"
wait_until 240 sh -c "! kill -0 $(cat "$WORK/pid8" 2>/dev/null || echo 0) 2>/dev/null"
kill -CONT "$LPID"
wait "$APID"
rc=$?
eq "no spool, listener stopped: tdagent exits 0" $rc 0
[ $rc = 0 ] || sed 's/^/# /' "$WORK/agent.full8.err"
lost=$(sed -n 's/.*the ring buffer lost \([0-9]*\) events.*/\1/p' \
    "$WORK/agent.full8.err")
check "tdagent says the ring lost events (${lost:-none})" \
    test "${lost:-0}" -gt 0
check "tdlisten logs the same loss" \
    grep -q "'full' .* ${lost:-x} lost ([1-9][0-9]* pages marked)" \
    "$WORK/l8.log"
f=$OUT/$(remote_file "$WORK/agent.full8.err")
check "the file is read cleanly" tc_clean "$f"
"$TDCOUNT" "$f" > "$WORK/c8"
check "the losses are marked in its pages ($(field missed < "$WORK/c8"))" \
    test "$(field missed < "$WORK/c8")" -gt 0
trace-cmd report --stat -i "$f" 2>/dev/null |
    awk '/^(overrun|dropped events):/ { s += $NF } END { print s + 0 }' \
    > "$WORK/stat8"
eq "its CPU stats count them (overrun + dropped of each CPU)" \
    "$(cat "$WORK/stat8")" "${lost:-none}"
n=$(field events < "$WORK/c8")
check "kept + lost is the whole storm ($n + ${lost:-0} events for 1500000 blocks)" \
    test $(( ${n:-0} + ${lost:-0} )) -gt 6000000 -a \
    $(( ${n:-0} + ${lost:-0} )) -lt 6002000
stop_listener
fi

# 9. the listener killed while the agent's headers (kallsyms above all,
# megabytes) are on their way, before a single page: a 1 Mbit/s link (tbf
# on the agent's end) stretches them over seconds.  The recording starts
# anyway, the agent reconnects and resumes from the listener's first
# checkpoint (offset 0), and nothing is lost (tdagent used to exit 1 there,
# -o or not)
if ! part 9; then
	:
elif ns_up && ip netns exec "$NSN" tc qdisc add dev tdp$$ root tbf \
    rate 1mbit burst 32kbit latency 5s; then
	OUT=$WORK/out9
	VTLS="--cert $P/vlistener.pem --key $P/vlistener.key --ca $P/ca.pem"
	# shellcheck disable=SC2086 # the TLS flags are words
	start_listener "$WORK/l9.log" -d "$OUT" --bind $NET.1 $VTLS ||
	    exit 99
	NS="ip netns exec $NSN"
	agent_bg headers $NET.1
	NS=
	wait_session "$WORK/l9.log"
	sleep 1
	kill -9 "$LPID"
	wait "$LPID" 2>/dev/null
	ip netns exec "$NSN" tc qdisc del dev tdp$$ root
	sleep 1
	# shellcheck disable=SC2086
	LPORT_FIXED=$LPORT start_listener "$WORK/l9b.log" -d "$OUT" \
	    --bind $NET.1 $VTLS || exit 99
	unset LPORT_FIXED
	# it looks at the directory once it listens (under valgrind: later)
	wait_until $((400 * SLOW)) grep -q "recovered '" "$WORK/l9b.log"
	check "headers: the listener was killed before the first page" \
	    grep -q "recovered '.*' at offset [0-9]* (0 pages)" "$WORK/l9b.log"
	wait_agent headers
	check "headers: the agent went on recording" \
	    grep -q "reconnecting, the recording goes on" \
	    "$WORK/agent.headers.err"
	same_events headers "$OUT"
	stop_listener
	cleanup_ns
else
	fail "cannot make a network namespace with a shaped veth pair"
fi

# 10. no room for a new recording when the agent first comes (the disk is
# full): the listener says "come back later", the agent tries again with
# backoff (tracing is not on yet: nothing to lose), and once a file is
# removed it records the whole workload
OUT=$WORK/out10
mkdir -p "$OUT"
if ! part 10; then
	:
elif mount -t tmpfs -o size=8m tdfull10 "$OUT"; then
	start_listener "$WORK/l10.log" -d "$OUT" $TLS || exit 99
	dd if=/dev/zero of="$OUT/filler" bs=64k status=none 2>/dev/null
	agent_bg later 127.0.0.1
	wait_until $((200 * SLOW)) grep -q "trying again for up to 300 s" \
	    "$WORK/agent.later.err"
	check "no room: the agent is told to come back later, and waits" \
	    grep -q "the listener refused: .*No space left on device; trying again for up to 300 s" \
	    "$WORK/agent.later.err"
	check "no room: the listener said why, as a retry" \
	    grep -q "web1 'later' .*closing: .*No space left on device" \
	    "$WORK/l10.log"
	rm -f "$OUT/filler"
	mount -o remount,size=400m "$OUT"
	wait "$APID"
	eq "no room: tdagent exits 0" $? 0
	same_events later "$OUT"
	stop_listener
	umount "$OUT"
else
	fail "cannot mount a tmpfs"
fi

# 5. an agent that never comes back: kept as incomplete after the wait
if part 5; then
OUT=$WORK/out5
start_listener "$WORK/l5.log" -d "$OUT" $TLS --resume-wait 2 || exit 99
agent_bg gone 127.0.0.1 --reconnect-wait 0
wait_recording "$APID"
wait_session "$WORK/l5.log"
sleep 2
kill -9 "$APID"
wait "$APID" 2>/dev/null
# the listener notices, waits --resume-wait 2, keeps it at its next tick
wait_until $((400 * SLOW)) sh -c \
    "ls '$OUT'/web1/*-gone.incomplete.dat >/dev/null 2>&1"
inc=$(ls "$OUT"/web1/*-gone.incomplete.dat 2>/dev/null)
check "an agent that never resumes: kept as .incomplete.dat" test -n "$inc"
check "and trace-cmd reads it" tc_clean "$inc"
check "nothing else is left" sh -c \
    "! ls '$OUT'/*/*.part '$OUT'/*/*.state 2>/dev/null | grep -q ."
stop_listener
# tdagent was killed: its instance is reaped by the next tdagent, by hand here
rmdir "$TRACING"/instances/tracedock-"$APID" 2>/dev/null
fi
finish
