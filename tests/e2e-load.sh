#!/bin/sh
# End-to-end: one tdlisten holds many agents at once.  tests/tdload, the load
# generator, replays a real recording over TLS with a client certificate on
# N connections, all open together: some stay idle for a while after their
# metadata, the others stream their pages at a steady rate.  Every one gets
# its DONE, every file holds exactly the recording's events (libtracecmd),
# nothing else is left in the output directory, the listener lives on and
# gives back every descriptor.  Then tdload --standby: 50 connections that
# are standby agents (STANDBY, WELCOME, then KEEPALIVE only), every one
# listed by tdctl list while they are held.  bench/load.sh is the same at
# 1,000 (and its standby mix at 10,000) with the memory and CPU it takes.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDLOAD=$B/tests/tdload
TDCTL=$B/tdctl
N=200
IDLE=50
P=$WORK/pki
OUT=$WORK/out
pki "$P" loadgen || { echo "FAIL: cannot make certificates"; exit 99; }
# one certificate for every connection: one identity, 200 recordings
# 200 TLS handshakes at once take a listener under valgrind longer than
# the default 10 s to get through: the limit grows with SLOW.  All come
# from 127.0.0.1, up to 64 (tdload's --ramp) in the handshake at once: one
# address, as a fleet behind one NAT, needs more than the default 16
start_listener "$WORK/l.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --max-per-identity 1000 \
    --max-standby-per-identity 50 \
    --handshake-timeout $((10 * SLOW)) --max-handshakes-per-address 64 \
    --control "$WORK/control" || exit 99

# tdload gives up after 300 s without a word from the listener (a
# listener under valgrind on a saturated machine takes its time, but goes
# on answering)
# a real recording to replay on every connection, of a fixed workload so
# that a busy machine does not make it bigger: about 40,000 events
"$TDAGENT" -q -o "$WORK/src.dat" -e sched -e raw_syscalls -F -b 4096 -- \
    dd if=/dev/zero of=/dev/null bs=1 count=10000 status=none
src_events=$("$TDCOUNT" "$WORK/src.dat" | field events)
check "the source recording has events" [ "${src_events:-0}" -gt 0 ]
fds=$(ls /proc/$LPID/fd | wc -l)

"$TDLOAD" -h 127.0.0.1 -p "$LPORT" --cert "$P/loadgen.pem" \
    --key "$P/loadgen.key" --ca "$P/ca.pem" -n $N -i $IDLE -t 2 -r 1000 \
    --together --timeout 300 "$WORK/src.dat" > "$WORK/load.out" \
    2> "$WORK/load.err"
eq "tdload: every connection got its DONE" $? 0
grep "not ok" "$WORK/load.out" | head -5
eq "DONE for each connection" "$(grep -c '^ok ' "$WORK/load.out")" $N
check "all $N connections were open at once" \
    grep -q "at most $N open at once" "$WORK/load.out"
check "the listener is alive" kill -0 "$LPID"

# the files: one per connection, named by the HELLO's name, nothing else
eq "one file per connection" "$(ls "$OUT"/loadgen | grep -c '^loadgen-[0-9TZ.]*-load-[0-9]*\.dat$')" $N
eq "nothing else in the output directory" "$(ls "$OUT"/loadgen | grep -vc '\.dat$')" 0
eq "no incomplete file" "$(ls "$OUT"/loadgen | grep -c incomplete)" 0
awk '$1 == "ok" { print $5 }' "$WORK/load.out" | sort -u > "$WORK/paths"
eq "DONE names distinct files" "$(wc -l < "$WORK/paths")" $N
# every file read by libtracecmd holds exactly the source's events
(cd "$OUT" && xargs -P 2 -n 1 sh -c \
    'echo "$("$0" "$1" | awk "\$1 == \"events\" { print \$2 }") $1"' \
    "$TDCOUNT") < "$WORK/paths" > "$WORK/counts"
eq "files read" "$(wc -l < "$WORK/counts")" $N
eq "files with exactly the source's $src_events events" \
    "$(awk -v n="$src_events" '$1 == n' "$WORK/counts" | wc -l)" $N
check "trace-cmd reads one cleanly" tc_clean "$OUT/$(head -1 "$WORK/paths")"
check "no session closed for a reason" sh -c \
    "! grep -q 'closing:' '$WORK/l.log'"
eq "the listener logged $N recordings done" \
    "$(grep -c ': done after' "$WORK/l.log")" $N

# standby agents: tdload --standby holds them (far longer than the test
# runs) once all are welcomed; tdctl list then shows every one, host
# sb-NNNN as each STANDBY said; killing tdload closes them
SB=50
"$TDLOAD" -h 127.0.0.1 -p "$LPORT" --cert "$P/loadgen.pem" \
    --key "$P/loadgen.key" --ca "$P/ca.pem" -n $SB --standby 3600 \
    --name sb --timeout 300 "$WORK/src.dat" > "$WORK/sb.out" \
    2> "$WORK/sb.err" &
SBPID=$!
standing() {
	grep -q 'standing by' "$WORK/sb.err" || ! kill -0 $SBPID 2>/dev/null
}
wait_until $((600 * SLOW)) standing
check "tdload: all $SB standby agents welcomed" \
    grep -q "^tdload: $SB standby agents welcomed" "$WORK/sb.err"
"$TDCTL" -S "$WORK/control" list --json |
    jq -r '.[] | "\(.identity) host=\(.host) state=\(.state) cpus=\(.cpus)"' \
    > "$WORK/sb.list"
eq "tdctl lists the $SB standby agents" \
    "$(grep -c '^loadgen host=sb-[0-9]* state=standby cpus=[0-9]' \
    "$WORK/sb.list")" $SB
eq "each its own host" "$(awk '{ print $2 }' "$WORK/sb.list" | sort -u |
    wc -l)" $SB
kill $SBPID
wait $SBPID 2>/dev/null
check "the listener is alive" kill -0 "$LPID"

# every session is gone: back to the descriptors it had before
fds_back() {
	[ "$(ls /proc/$LPID/fd | wc -l)" -eq "$fds" ]
}
wait_until $((200 * SLOW)) fds_back
eq "every descriptor given back" "$(ls /proc/$LPID/fd | wc -l)" "$fds"
stop_listener
eq "the listener stops cleanly" $? 0
finish
