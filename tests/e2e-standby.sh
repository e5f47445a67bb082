#!/bin/sh
# End-to-end: recordings started from the collector (issue 16, part 1).
# 20 standby agents (tdagent --standby, each its own certificate identity,
# limits from a configuration file) keep one connection each to tdlisten
# --control; one tdctl start asks all of them for a recording of
# tests/tdpoke's getppid calls (raw_syscalls:sys_enter, filtered on the
# workload's pid and getppid's number), the workload runs once all 20
# record, one tdctl stop ends them, and then:
#   - the recordings begin together: each says READY once set up and
#     connected, its tracing off, and the listener's one GO goes to all
#     20 after the last READY;
#   - 20 files, each exactly the workload's N calls, nothing lost;
#   - one timeline: the k-th call has the same place in every file: its
#     stamps (after trace-cmd's time-sync corrections) spread less than
#     half the workload's pause (PAUSE_US / 2) across the 20 files, so no
#     file puts a call nearer another's neighbour than its own (a bound
#     that load cannot break: load only lengthens the pauses);
#   - requests outside an agent's limits (an event it does not allow, a
#     buffer over its --max-buffer) are refused on both sides, logged by
#     both and printed by tdctl, and start nothing;
#   - tdctl list shows each agent's state, CPUs and clocks;
#   - a restarted tdlisten gets every standby agent back and can start
#     recordings again;
#   - the control socket is mode 0660: a non-root user is refused, and a
#     malformed request closes only that client.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
# never sanitized: an ASan runtime makes getppid calls of its own
TDPOKE=$B/tests/tdpoke-static
[ -x "$TDPOKE" ] || { echo "FAIL: no $TDPOKE (make check builds it)"; exit 99; }
NR_GETPPID=$(printf '#include <sys/syscall.h>\nSYS_getppid\n' | cpp -P - |
    tail -1 | grep -x '[0-9][0-9]*') || skip "cannot find getppid's number (cpp)"
TDCTL=$B/tdctl
N=20
PAUSE_US=50000
NAGENTS=20
P=$WORK/pki
agents=""
for i in $(seq -w 1 $NAGENTS); do agents="$agents host$i"; done
pki "$P" $agents || { echo "FAIL: cannot make certificates"; exit 99; }
OUT=$WORK/out
# the socket's directory may be entered by anyone: its mode decides
chmod 711 "$WORK"
mkdir -p "$WORK/run"
chmod 755 "$WORK/run"
CTL=$WORK/run/control
LTLS="--cert $P/listener.pem --key $P/listener.key --ca $P/ca.pem"
# shellcheck disable=SC2086
start_listener "$WORK/listen.log" -d "$OUT" $LTLS --control "$CTL" ||
    exit 99
cat > "$WORK/agent.conf" <<CONF
# what a collector may ask of these agents
allow-events = raw_syscalls, sched:sched_switch
max-buffer 2048
max-duration 300
CONF

SPIDS=""
for a in $agents; do
	"$TDAGENT" --standby -c "$WORK/agent.conf" -h 127.0.0.1 -p "$LPORT" \
	    --cert "$P/$a.pem" --key "$P/$a.key" --ca "$P/ca.pem" \
	    2> "$WORK/agent.$a.err" &
	SPIDS="$SPIDS $!"
done

# in_state N STATE: tdctl list shows N agents in STATE
# (WORK/list: one line per agent, "ID STATE CPUS KERNEL CLOCKS RECORDING
# REFUSED" from --json)
in_state() {
	"$TDCTL" -S "$CTL" list --json > "$WORK/list.json" 2>&1 &&
	    jq -r '.[] | "\(.identity) state=\(.state) cpus=\(.cpus) kernel=\(.kernel) clocks=\(.clocks | join(",")) recording=\(.recording // "-") refused=\(.refused // "")"' \
	    "$WORK/list.json" > "$WORK/list" &&
	    [ "$(grep -c " state=$2 " "$WORK/list")" -eq "$1" ]
}
wait_until $((1200 * SLOW)) in_state $NAGENTS standby
eq "tdctl list: all $NAGENTS agents on standby" \
    "$(grep -c ' state=standby ' "$WORK/list")" $NAGENTS
check "tdctl list: each agent's identity, CPUs and clocks" sh -c "
    for a in $agents; do
	grep -q \"^\$a state=standby cpus=$(nproc) kernel=$(uname -r) clocks=[^ ]*local[^ ]* recording=- \" '$WORK/list' || exit 1
    done"
eq "the socket is mode 0660" "$(stat -c %a "$CTL")" 660

# ---- refused requests -----------------------------------------------------
sessions0=$(grep -c ': recording [0-9]* CPUs' "$WORK/listen.log")
"$TDCTL" -S "$CTL" start --hosts host01 -e irq > "$WORK/r1.out" 2>&1
eq "an event not allowed: tdctl exits 1" $? 1
check "an event not allowed: tdctl says why" grep -qx \
    "refused host01 event 'irq' not allowed (--allow-events raw_syscalls, sched:sched_switch)" \
    "$WORK/r1.out"
"$TDCTL" -S "$CTL" start --hosts 'host0[2]' -e raw_syscalls -b 4096 \
    > "$WORK/r2.out" 2>&1
eq "a buffer too big: tdctl exits 1" $? 1
check "a buffer too big: tdctl says why" grep -qx \
    "refused host02 buffer of 4096 KB over --max-buffer 2048 KB" \
    "$WORK/r2.out"
check "refusals: the listener logged both" sh -c "
    grep -q \"standby host01: refused: event 'irq' not allowed\" '$WORK/listen.log' &&
    grep -q 'standby host02: refused: buffer of 4096 KB' '$WORK/listen.log'"
check "refusals: each agent logged its own" sh -c "
    grep -q \"refused: event 'irq' not allowed\" '$WORK/agent.host01.err' &&
    grep -q 'refused: buffer of 4096 KB over --max-buffer 2048 KB' '$WORK/agent.host02.err'"
in_state 2 refused
check "refusals: tdctl list shows them refused, not recording" sh -c "
    grep -q '^host01 state=refused .*recording=- .*refused=event' '$WORK/list' &&
    grep -q '^host02 state=refused .*recording=- .*refused=buffer' '$WORK/list'"
eq "refusals: no recording started" \
    "$(grep -c ': recording [0-9]* CPUs' "$WORK/listen.log")" "$sessions0"

# a recording that fails in its set-up (a filter the kernel refuses): its
# end answers the START, so the request ends without waiting for a GO
"$TDCTL" -S "$CTL" start --hosts 'host0[34]' -e sched:sched_switch \
    -f 'no_such_field == 1' --name badf > "$WORK/badf.out" 2>&1
check "a failed set-up: both started, then finished with an error, no GO" sh -c "
    [ \$(grep -c '^started host0[34] badf pid' '$WORK/badf.out') = 2 ] &&
    [ \$(grep -c '^finished host0[34] badf exit [1-9]' '$WORK/badf.out') = 2 ] &&
    ! grep -q '^go \|^timeout ' '$WORK/badf.out'" ||
    sed 's/^/# badf: /' "$WORK/badf.out"

# ---- the control socket ---------------------------------------------------
setpriv --reuid=65534 --regid=65534 --clear-groups "$TDCTL" -S "$CTL" list \
    > "$WORK/nobody.out" 2>&1
eq "a non-root user: tdctl exits 2" $? 2
check "a non-root user: permission denied" \
    grep -q "Permission denied" "$WORK/nobody.out"
perl -MIO::Socket::UNIX -e '
    my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 3;
    print $s "start\tonly two fields\n";
    my $l = <$s>;
    exit(defined $l ? 1 : 0);' "$CTL"
eq "a malformed request: that client is closed, unanswered" $? 0
check "a malformed request: logged" \
    grep -q "control: a malformed request: closing that client" \
    "$WORK/listen.log"

# live PID: PID's instance records, or PID is gone (then a check fails)
live() {
	recording "$1" || ! kill -0 "$1" 2>/dev/null
}

# ---- first recordings, five agents at a time -------------------------------
# Each identity's first recording sends its header sections in full
# (kallsyms: 5 MB); the listener keeps them (its header cache), and later
# recordings send a reference.  Twenty at once through a listener under
# valgrind took longer than an agent waits for an answer (10 s), so the
# first ones go in batches: start, all recording, stop.
: > "$WORK/warm.all"
: > "$WORK/warm.kb"
for batch in 'host0[1-5]' 'host0[6-9]' 'host1[0-4]' 'host1[5-9]' host20; do
	"$TDCTL" -S "$CTL" start --hosts "$batch" -e sched:sched_switch \
	    --name warm > "$WORK/warm.out" 2>&1
	k=$(grep -c '^started ' "$WORK/warm.out")
	for p in $(awk '/^started/ { print $5 }' "$WORK/warm.out"); do
		wait_until $((400 * SLOW)) live "$p"
		cat "$TRACING/instances/tracedock-$p/buffer_size_kb" \
		    >> "$WORK/warm.kb" 2>/dev/null || echo gone >> "$WORK/warm.kb"
	done
	sessions0=$((sessions0 + k))
	wait_session "$WORK/listen.log" $sessions0
	"$TDCTL" -S "$CTL" stop --hosts "$batch" warm >> "$WORK/warm.out" 2>&1
	cat "$WORK/warm.out" >> "$WORK/warm.all"
done
# no size asked: tdagent's default ring (8192 KiB per CPU), at most
# --max-buffer 2048 (the kernel rounds up to whole pages)
check "first recordings: no size asked, each ring is --max-buffer's 2048 KiB" \
    awk -v n=$NAGENTS '$1 >= 2048 && $1 < 2112 { k++ } END { exit !(k == n && NR == n) }' \
    "$WORK/warm.kb" || sed 's/^/# ring KiB: /' "$WORK/warm.kb"
eq "first recordings: $NAGENTS started and finished cleanly" \
    "$(grep -c '^started host[0-9]* warm pid' "$WORK/warm.all") $(grep -c '^finished host[0-9]* warm exit 0$' "$WORK/warm.all")" \
    "$NAGENTS $NAGENTS"

# ---- one start, one stop, 20 exact files on one timeline -----------------
rm -f "$WORK/go"
TDPOKE_WAIT=$WORK/go "$TDPOKE" $N $PAUSE_US &
WPID=$!
t0=$(date +%s%N)
"$TDCTL" -S "$CTL" start -e raw_syscalls:sys_enter \
    -f "common_pid == $WPID && id == $NR_GETPPID" -b 1024 --name fleet \
    > "$WORK/start.out" 2>&1
eq "tdctl start: exit 0" $? 0
eq "tdctl start: $NAGENTS agents started" \
    "$(grep -c '^started host[0-9]* fleet pid [0-9]*$' "$WORK/start.out")" \
    $NAGENTS
check "the listener sent all the STARTs in one pass" grep -q \
    "control: START 'fleet' sent to $NAGENTS standby agents matching '\*'" \
    "$WORK/listen.log"
# the recordings begin together: each, set up and connected, said READY
# and waited; the one GO went to all once the last was ready
eq "tdctl start: a GO to each of the $NAGENTS" \
    "$(grep -c '^go host[0-9]*$' "$WORK/start.out")" $NAGENTS
check "the listener sent one GO to all $NAGENTS, after the last READY" awk -v n=$NAGENTS '
    /standby host[0-9]*: recording fleet ready$/ { ready++; last = NR }
    /control: GO to [0-9]* standby agents/ && ready == n && $0 ~ ("GO to " n " standby") { go = NR }
    END { exit !(ready == n && go > last) }' "$WORK/listen.log"
check "each agent's recording waited for the GO to trace" sh -c '
    for f in "$1"/agent.host*.err; do
	grep -q "recording .fleet. set up: its tracing waits for the collector.s GO" "$f" &&
	grep -q "recording .fleet.: the collector.s GO: tracing" "$f" || exit 1
    done' sh "$WORK"
# every recorder has its instance recording and its session open
for p in $(awk '/^started/ { print $5 }' "$WORK/start.out"); do
	wait_until $((400 * SLOW)) live "$p"
done
# what the start costs (not judged: it depends on the machine's load)
echo "# all $NAGENTS instances recording $(( ($(date +%s%N) - t0) / 1000000 )) ms after tdctl start began (polled every 50 ms)"
wait_session "$WORK/listen.log" $((sessions0 + NAGENTS))
wait_until $((400 * SLOW)) in_state $NAGENTS recording
eq "tdctl list: all $NAGENTS recording" \
    "$(grep -c ' state=recording .* recording=fleet ' "$WORK/list")" $NAGENTS
[ "$(grep -c ' state=recording .* recording=fleet ' "$WORK/list")" = $NAGENTS ] ||
    for a in $agents; do
	# why a recording is not running: what its agent and the listener said
	tail -3 "$WORK/agent.$a.err" | sed "s/^/# $a: /"
	grep "session $a 'fleet'.*\(closing\|TLS\|refus\|lost\)" \
	    "$WORK/listen.log" | sed "s/^/# listener: /"
    done
touch "$WORK/go"
wait $WPID
eq "the workload ran" $? 0
"$TDCTL" -S "$CTL" stop fleet > "$WORK/stop.out" 2>&1
eq "tdctl stop: exit 0" $? 0
eq "tdctl stop: $NAGENTS recordings finished cleanly" \
    "$(grep -c '^finished host[0-9]* fleet exit 0$' "$WORK/stop.out")" \
    $NAGENTS
eq "$NAGENTS files" "$(ls "$OUT"/host*/*-fleet.dat 2>/dev/null | wc -l)" \
    $NAGENTS
bad=""
: > "$WORK/cols"
for a in $agents; do
	f=$(ls "$OUT/$a"/*-fleet.dat 2>/dev/null)
	[ -f "$f" ] || { bad="$bad $a:nofile"; continue; }
	"$TDCOUNT" "$f" -p "$WPID" > "$WORK/c.$a" 2>&1
	[ "$(field events < "$WORK/c.$a")" = $N ] ||
	    bad="$bad $a:$(field events < "$WORK/c.$a")"
	[ "$(field missed < "$WORK/c.$a")" = 0 ] || bad="$bad $a:lost"
	tc_clean "$f" || bad="$bad $a:report"
	# the stamps of the workload's calls, time sync applied: "S.FRAC"
	# (trace-cmd prints wall-clock seconds, FRAC 6 or 9 digits)
	awk -v p="tdpoke-static-$WPID " -v nr="NR $NR_GETPPID " \
	    'index($0, p) && index($0, nr) {
		for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) {
			t = $i; sub(/:$/, "", t); print t; break } }' \
	    "$WORK/report.out" > "$WORK/ts.$a"
	[ "$(wc -l < "$WORK/ts.$a")" = $N ] || bad="$bad $a:stamps"
done
eq "every file: exactly the $N calls, none lost, read cleanly" "$bad" ""
# the k-th call in every file: the spread of its 20 stamps
# (in ns from the first stamp's second: exact in awk's doubles)
base=$(head -1 "$WORK/ts.host01" | cut -d. -f1)
spread=$(for a in $agents; do printf '%s ' "$WORK/ts.$a"; done |
    xargs paste | awk -v base="${base:-0}" '
	function ns(t,	x) {
		split(t, x, ".")
		return (x[1] - base) * 1e9 + x[2] * 10 ^ (9 - length(x[2]))
	}
	{ lo = hi = ns($1)
	for (i = 2; i <= NF; i++) { v = ns($i); if (v < lo) lo = v; if (v > hi) hi = v }
	if (hi - lo > m) m = hi - lo } END { printf "%d\n", m }')
echo "# one timeline: the widest spread of one call across the $NAGENTS files: $spread ns"
check "one timeline: each call's stamps within $((PAUSE_US / 2)) us across the files" \
    test "$spread" -lt $((PAUSE_US / 2 * 1000))
if [ "$spread" -ge $((PAUSE_US / 2 * 1000)) ]; then
	# what each file says, and what each recording's time sync said
	for a in $agents; do
		echo "# $a: $(tr '\n' ' ' < "$WORK/ts.$a")"
	done
	grep "'fleet' .*time sync: " "$WORK/listen.log" | sed 's/^/# /'
	cp -r "$WORK" "${TMPDIR:-/tmp}/e2e-standby-timeline.$$" &&
	    echo "# kept in ${TMPDIR:-/tmp}/e2e-standby-timeline.$$"
fi
check "the files are in the agents' identities' directories" sh -c "
    for a in $agents; do ls '$OUT'/\$a/*-fleet.dat >/dev/null 2>&1 || exit 1; done"
wait_until $((400 * SLOW)) in_state $NAGENTS standby
eq "after the stop: all on standby again" \
    "$(grep -c ' state=standby ' "$WORK/list")" $NAGENTS

# ---- the listener restarts: the agents come back ---------------------------
stop_listener
LPORT_FIXED=$LPORT
# shellcheck disable=SC2086
start_listener "$WORK/listen2.log" -d "$OUT" $LTLS --control "$CTL" ||
    exit 99
wait_until $((1200 * SLOW)) in_state $NAGENTS standby
eq "a restarted listener: all $NAGENTS agents back on standby" \
    "$(grep -c ' state=standby ' "$WORK/list")" $NAGENTS
check "the agents said they lost the listener" \
    grep -q "lost the collector" "$WORK/agent.host01.err"
"$TDCTL" -S "$CTL" start --hosts 'host0[12]' -e sched:sched_switch \
    --name again > "$WORK/again.out" 2>&1
eq "started again: tdctl exits 0" $? 0
eq "started again: 2 agents" \
    "$(grep -c '^started host0[12] again pid [0-9]*$' "$WORK/again.out")" 2
for p in $(awk '/^started/ { print $5 }' "$WORK/again.out"); do
	wait_until $((400 * SLOW)) live "$p"
done
wait_session "$WORK/listen2.log" 2
"$TDCTL" -S "$CTL" stop --hosts 'host0*' > "$WORK/stop2.out" 2>&1
eq "stopped again: 2 finished" \
    "$(grep -c '^finished host0[12] again exit 0$' "$WORK/stop2.out")" 2
check "stopped again: 2 more files, readable" sh -c "
    for a in host01 host02; do f=\$(ls '$OUT'/\$a/*-again.dat) &&
	trace-cmd report -i \"\$f\" >/dev/null 2>&1 || exit 1; done"

# ---- the end: SIGTERM stops every standby agent ----------------------------
# shellcheck disable=SC2086
kill -TERM $SPIDS
rcs=""
for p in $SPIDS; do
	wait "$p"
	rcs="$rcs$?"
done
eq "every standby agent exits 0 on SIGTERM" "$rcs" \
    "$(printf '0%.0s' $(seq 1 $NAGENTS))"
stop_listener
check "no control socket left" test ! -e "$CTL"
finish
