#!/bin/sh
# End-to-end: tests/tdload --armed plays armed standby agents (the flight
# recorder's frames, docs/tdproto.md) against a real tdlisten, as
# bench/flight-load.sh does with 200: NAGENTS of them, one certificate
# (one identity, NAGENTS hosts), armed by tdctl arm; one fires its trigger
# (TRIGGERED) and the group is snapshot, then tdctl snapshot asks for
# another.  Each snapshot brings one file per agent, each exactly the
# replayed recording's events (the listener takes 2 handshakes at a time:
# the snapshots' connections it closes are tried again, as tdagent does);
# tdctl prints one distinct "file" line per
# agent (standby agents of one identity used to get one file line between
# them: the listener gave every file to the first agent of that identity
# recording that name); tdctl disarm disarms them all.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDLOAD=$B/tests/tdload
TDCTL=$B/tdctl
NAGENTS=8
P=$WORK/pki
OUT=$WORK/out
CTL=$WORK/control
pki "$P" loadgen || { echo "FAIL: cannot make certificates"; exit 99; }
start_listener "$WORK/l.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --control "$CTL" \
    --max-standby-per-identity $NAGENTS --max-handshakes 2 || exit 99
TPID=""
cleanup() {
	reap $TPID
	stop_listener
}

# the recording every snapshot replays: a fixed workload
"$TDAGENT" -q -o "$WORK/src.dat" -e sched -e raw_syscalls -F -b 4096 -- \
    dd if=/dev/zero of=/dev/null bs=1 count=2000 status=none
src_events=$("$TDCOUNT" "$WORK/src.dat" | field events)
check "the source recording has events" [ "${src_events:-0}" -gt 0 ]

# agent 3 fires its trigger 1 s after its ARM
"$TDLOAD" -h 127.0.0.1 -p "$LPORT" --cert "$P/loadgen.pem" \
    --key "$P/loadgen.key" --ca "$P/ca.pem" -n $NAGENTS --name flt \
    --standby 120 --armed --trigger 3:1 --timeout 120 --ramp 2 \
    "$WORK/src.dat" \
    > "$WORK/load.out" 2> "$WORK/load.err" &
TPID=$!
welcomed() {
	grep -q "^tdload: $NAGENTS standby agents welcomed" "$WORK/load.err"
}
check "tdload: $NAGENTS standby agents welcomed" wait_until $((400 * SLOW)) welcomed

"$TDCTL" -S "$CTL" arm --hosts 'flt-*' -e sched:sched_switch -b 512 \
    --name grp --trigger 'ftrace:print if buf ~ "*BOOM*"' > "$WORK/arm.out"
eq "tdctl arm exits 0" $? 0
eq "every agent armed" "$(grep -c '^armed loadgen grp$' "$WORK/arm.out")" $NAGENTS

# the trigger: one file per agent, named for the snapshot it fired
trig_done() {
	[ "$(grep -c '^snapshot .* grp\.trig\.loadgen\.' "$WORK/load.out")" -ge $NAGENTS ]
}
check "the trigger's snapshot: $NAGENTS files" wait_until $((400 * SLOW)) trig_done
eq "agent 3 fired" "$(awk '$1 == "triggered" { print $2, $3 }' "$WORK/load.out")" "3 flt-0003"
eq "files of the trigger's snapshot on disk" \
    "$(ls "$OUT/loadgen" | grep -c '^loadgen-.*-grp\.trig\.loadgen\.[0-9]*\.dat$')" $NAGENTS

"$TDCTL" -S "$CTL" snapshot --hosts 'flt-*' --name op > "$WORK/snap.out"
eq "tdctl snapshot exits 0" $? 0
eq "started by each" "$(grep -c '^started loadgen op pid ' "$WORK/snap.out")" $NAGENTS
eq "finished by each" "$(grep -c '^finished loadgen op exit 0$' "$WORK/snap.out")" $NAGENTS
eq "a file line for each" "$(grep -c '^file loadgen ' "$WORK/snap.out")" $NAGENTS
eq "the file lines distinct" "$(awk '$1 == "file" { print $3 }' "$WORK/snap.out" | sort -u | wc -l)" $NAGENTS
eq "tdload's snapshot lines" "$(grep -c '^snapshot .* op ' "$WORK/load.out")" $NAGENTS
# tdctl's files are tdload's (the listener's directory before each DONE's)
awk '$1 == "file" { print $3 }' "$WORK/snap.out" | sort > "$WORK/ctl.files"
awk -v d="$OUT/" '$1 == "snapshot" && $4 == "op" { print d $5 }' "$WORK/load.out" |
    sort > "$WORK/load.files"
check "tdctl's files are those tdload got DONE for" cmp -s "$WORK/ctl.files" "$WORK/load.files"

# every file holds exactly the replayed events
bad=0
for f in "$OUT"/loadgen/*.dat; do
	n=$("$TDCOUNT" "$f" | field events)
	[ "$n" = "$src_events" ] || { echo "# $f: $n events"; bad=$((bad + 1)); }
done
eq "every file holds the recording's $src_events events" $bad 0
eq "no other file" "$(ls "$OUT/loadgen" | wc -l)" $((2 * NAGENTS))
check "no snapshot failed in tdload" sh -c "! grep -q '^not ok' '$WORK/load.out'"

"$TDCTL" -S "$CTL" disarm --hosts 'flt-*' > "$WORK/disarm.out"
eq "tdctl disarm: every agent" "$(grep -c '^disarmed loadgen$' "$WORK/disarm.out")" $NAGENTS
"$TDCTL" -S "$CTL" snapshot --hosts 'flt-*' --name after > "$WORK/after.out"
eq "a snapshot of disarmed agents exits 1" $? 1
check "none armed" grep -q '^none' "$WORK/after.out"
check "the listener logged no error" sh -c "! grep -qi 'error\|malformed' '$WORK/l.log'"
# SIGTERM: tdload's agents are done, and so is it
kill -TERM $TPID
wait $TPID
eq "tdload exits 0" $? 0
TPID=""
check "tdload counted $((2 * NAGENTS)) snapshot files" \
    grep -q "^tdload: $((2 * NAGENTS)) snapshots: $((2 * NAGENTS)) files, 0 failed; 0 SNAPSHOT refused" "$WORK/load.out"
check "snapshot connections closed in the handshake were tried again" \
    grep -q "^tdload: .* snapshots: .*; [1-9][0-9]* connections tried again" "$WORK/load.out"
check "tdload said nothing amiss" sh -c "! grep -v '^tdload: ' '$WORK/load.err'"
check "the listener is alive" kill -0 "$LPID"
cleanup
finish
