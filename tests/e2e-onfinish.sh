#!/bin/sh
# End-to-end: tdlisten --on-finish CMD (issue 16, part 3).  Real tdagents
# record a known workload (dd, 2000 one-byte blocks) into a listener whose
# output directory's name holds a space, quotes, a $(...) and a ';' (and
# is given relative: the command gets the absolute path).  The command
# (a script of this test) logs its $1 and environment, copies the file,
# and fails, hangs or waits where a recording's name tells it to:
#   plain   runs once;
#   fail2   exits 1 at attempts 1 and 2, works at the third;
#   hang    hangs at attempt 1 (a child of its own too): killed at the
#           --on-finish-timeout with its process group, works at the second;
#   slow    waits for a file the test makes only after the recording
#           "after" was received and its command ran: the loop serves
#           another agent while a command runs;
#   giveup  fails every --on-finish-attempts (4): given up, its sidecar
#           stays, and the next tdlisten runs it again;
#   block   still running when tdlisten stops: sent SIGTERM, run again
#           by the next tdlisten;
#   cut     a recording tdlisten stops under: the next one recovers it
#           and keeps it as .incomplete.dat (TD_FILE_KIND=incomplete);
#   tracecmd a trace-cmd client's recording (tests/tdtcfeed), with the
#           listener run as daemon (-u): the command runs as daemon;
#   uftrace a run of uftrace record --host (when uftrace and cc are
#           there): the command gets the run's directory.
# Every file's command works exactly once in the end; each copy is the
# received file byte for byte, which trace-cmd reads; /metrics counts
# the attempts (promtool checks the text when it is installed).
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
command -v curl >/dev/null || skip "curl is not installed"

cd "$WORK" || exit 99
# never seen by a shell: a file named pwned would say it was
ODIR="out 'q\" \$(touch pwned);x"
mkdir -p copies
HOOK=$WORK/hook.sh
HLOG=$WORK/hook.log
cat > "$HOOK" <<EOF
#!/bin/sh
# the --on-finish command of e2e-onfinish.sh
w='$WORK'
n=\${TD_RECORDING:-\$TD_PRODUCER}
printf 'start %s %s %s %s %s|%s\n' "\$n" "\$TD_ATTEMPT" \\
    "\$TD_FILE_KIND" "\$TD_PRODUCER" "\$TD_IDENTITY" "\$1" >> "\$w/hook.log"
[ \$# = 1 ] || exit 9
printf 'uid %s %s\n' "\$n" "\$(id -u)" >> "\$w/hook.log"
case \$TD_RECORDING:\$TD_ATTEMPT in
fail2:1|fail2:2) exit 1 ;;
hang:1) sleep 3600 & echo \$! > "\$w/hang.pid"; wait; exit 0 ;;
giveup:*) [ -f "\$w/fixed" ] || exit 3 ;;
slow:*) while [ ! -f "\$w/release" ]; do sleep 0.05; done ;;
block:*) while [ ! -f "\$w/release2" ]; do sleep 0.05; done ;;
esac
if [ -d "\$1" ]; then
	cp -r "\$1" "\$w/copies/\$n" || exit 4
else
	cp "\$1" "\$w/copies/\$n.dat" || exit 4
fi
printf 'end %s|%s\n' "\$n" "\$1" >> "\$w/hook.log"
EOF
chmod 755 "$HOOK"

# listen LOG TIMEOUT [ARGS...]: the listener of this test, into ODIR
listen() {
	_l=$1
	_t=$2
	shift 2
	start_listener "$_l" -d "$ODIR" --insecure --http 127.0.0.1:0 \
	    --on-finish "$HOOK" --on-finish-jobs 2 --on-finish-timeout "$_t" \
	    --on-finish-retry 1 --on-finish-attempts 4 "$@" || exit 99
	wait_until $((100 * SLOW)) grep -q "status page and metrics at" "$_l"
	HPORT=$(sed -n 's|.*status page and metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$_l")
}
# rec NAME: a tdagent recording of dd named NAME, to its end (DONE)
rec() {
	"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure --name "$1" \
	    -e raw_syscalls -F -b 4096 -- sh -c "echo \$\$ > '$WORK/$1.pid';
	    exec dd if=/dev/zero of=/dev/null bs=1 count=2000 status=none" \
	    2> "$WORK/$1.err"
	eq "$1: the agent delivered the recording" $? 0
}
# the file the listener wrote for recording NAME, as the command gets it
path_of() {
	echo "$WORK/$ODIR/$(remote_file "$WORK/$1.err")"
}
# ended NAME: the command for NAME ran to its end
ended() {
	grep -q "^end $1|" "$HLOG" 2>/dev/null
}
started() {
	[ "$(grep -c "^start $1 " "$HLOG" 2>/dev/null)" -ge "$2" ]
}
# attempts NAME: how many times the command started for NAME
attempts() {
	grep -c "^start $1 " "$HLOG"
}
# logged LOG TEXT: the listener's LOG has the line TEXT (paths are text)
logged() {
	grep -qF -- "$2" "$1"
}
metric() {
	awk -v k="tdlisten_$1" '$1 == k { print $2 }' "$WORK/m.prom"
}
get_metrics() {
	curl -sS --max-time $((10 * SLOW)) -o m.prom \
	    "http://127.0.0.1:$HPORT/metrics"
}
# gone PID: no such process, or a zombie (reparented where none reaps)
gone() {
	[ ! -e "/proc/$1" ] || awk '{ exit $3 != "Z" }' "/proc/$1/stat" \
	    2>/dev/null
}

# hang: killed at the timeout with what it started, then works (a
# listener of its own: the others' timeout is long, for commands that
# wait for the test however slow the machine)
T0=$((3 * SLOW))
listen "$WORK/l0.log" $T0
# (logged after the status page's line, which listen waited for)
wait_until $((100 * SLOW)) grep -q "on-finish: 2 at once" "$WORK/l0.log"
check "the listener says how it runs the command" \
    grep -q "on-finish: 2 at once, timeout $T0 s, 4 attempts" "$WORK/l0.log"
rec hang
wait_until $((400 * SLOW)) ended hang
eq "hang: two attempts" "$(attempts hang)" 2
check "hang: attempt 1 killed at the timeout" logged "$WORK/l0.log" \
    "'$(path_of hang)': attempt 1 of 4 killed after $T0 s (--on-finish-timeout); again in 1 s"
hp=$(cat hang.pid 2>/dev/null)
[ -n "$hp" ] && wait_until $((200 * SLOW)) gone "$hp"
check "hang: the command's own child was killed too" \
    eval '[ -n "$hp" ] && gone "$hp"'
check "hang: the copy is the received file" cmp -s "$(path_of hang)" \
    copies/hang.dat
get_metrics
eq "metrics: runs started" "$(metric onfinish_started_total)" 2
eq "metrics: failed attempts" "$(metric onfinish_failed_total)" 1
eq "metrics: of them at the timeout" "$(metric onfinish_timeouts_total)" 1
stop_listener
eq "the listener exits 0" $? 0

listen "$WORK/l1.log" 600

# plain: one run, the path intact, the environment right
rec plain
P=$(path_of plain)
wait_until $((200 * SLOW)) ended plain
eq "plain: the command ran once" "$(attempts plain)" 1
eq "plain: with the path and the environment" \
    "$(grep "^start plain " "$HLOG")" \
    "start plain 1 complete tdproto 127.0.0.1|$P"
check "plain: its copy is the received file" cmp -s "$P" copies/plain.dat
check "plain: trace-cmd reads the copy" tc_clean copies/plain.dat
"$TDCOUNT" copies/plain.dat -p "$(cat plain.pid)" > plain.count 2>&1
check "plain: the copy holds dd's 2000 blocks (4 events each)" \
    test "$(field events < plain.count)" -ge 8000
check "plain: its sidecar is gone" test ! -e "$P.onfinish"
check "no shell ever read the path" test ! -e pwned

# fail2: exit 1 twice, then it works
rec fail2
wait_until $((400 * SLOW)) ended fail2
eq "fail2: three attempts" "$(attempts fail2)" 3
F=$(path_of fail2)
check "fail2: attempt 1 logged as failed, with its status" logged \
    "$WORK/l1.log" "'$F': attempt 1 of 4 failed: exit status 1; again in 1 s"
check "fail2: attempt 2 too, with twice the wait" logged "$WORK/l1.log" \
    "'$F': attempt 2 of 4 failed: exit status 1; again in 2 s"
check "fail2: the copy is the received file" cmp -s "$(path_of fail2)" \
    copies/fail2.dat

# slow: while its command waits, another agent's recording is received
# and its command runs
rec slow
wait_until $((200 * SLOW)) started slow 1
check "slow: its command runs" started slow 1
rec after
wait_until $((200 * SLOW)) ended after
check "after: received and its command done while slow's still runs" \
    sh -c "grep -q '^end after|' '$HLOG' && ! grep -q '^end slow|' '$HLOG'"
touch release
wait_until $((200 * SLOW)) ended slow
check "slow: then its command ends" ended slow
for n in slow after; do
	check "$n: the copy is the received file" cmp -s "$(path_of $n)" \
	    copies/$n.dat
done

get_metrics
eq "metrics: runs started" "$(metric onfinish_started_total)" 6
eq "metrics: runs that worked" "$(metric onfinish_succeeded_total)" 4
eq "metrics: failed attempts" "$(metric onfinish_failed_total)" 2
eq "metrics: none at the timeout" "$(metric onfinish_timeouts_total)" 0
eq "metrics: given up" "$(metric onfinish_given_up_total)" 0
eq "metrics: queued now" "$(metric onfinish_queued)" 0
if command -v promtool >/dev/null; then
	check "promtool passes the metrics" promtool check metrics < m.prom
fi
curl -sS --max-time $((10 * SLOW)) -o s.json \
    "http://127.0.0.1:$HPORT/status"
check "/status has the same counters" grep -q \
    '"on_finish":{"started":6,"succeeded":4,"failed":2,"timeouts":0,"given_up":0,"dropped":0,"queued":0,"running":0}' \
    s.json

# giveup: every attempt fails; its sidecar stays
rec giveup
G=$(path_of giveup)
wait_until $((600 * SLOW)) logged "$WORK/l1.log" \
    "'$G': attempt 4 of 4 failed: exit status 3; given up"
check "giveup: given up after 4 attempts, logged" logged "$WORK/l1.log" \
    "'$G': attempt 4 of 4 failed: exit status 3; given up"
eq "giveup: four attempts" "$(attempts giveup)" 4
check "giveup: its sidecar stays" test -f "$G.onfinish"

# block: its command still runs when tdlisten stops; cut: a recording
# still open then (its headers in: the first time-sync round came after)
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure --name cut -e sched \
    -s 600 --reconnect-wait 1 2> cut.err &
cpid=$!
wait_until $((400 * SLOW)) grep -q "'cut' .*: time sync round" "$WORK/l1.log"
check "cut: recording, headers in" grep -q "'cut' .*: time sync round" \
    "$WORK/l1.log"
rec block
BLK=$(path_of block)
wait_until $((200 * SLOW)) started block 1
kill -TERM "$LPID"
wait "$LPID"
eq "the listener exits 0 with a command running" $? 0
check "the stop says what was pending" grep -q \
    "on-finish: 1 file pending (1 running: sent SIGTERM)" "$WORK/l1.log"
check "block: its sidecar stays" test -f "$BLK.onfinish"
kill -TERM "$cpid"
wait "$cpid"
eq "block: one attempt, stopped" "$(attempts block)" 1

# the next tdlisten: the pending, the given up and the recovered cut
touch release2 fixed
listen "$WORK/l2.log" 600 --resume-wait 1
for n in giveup block cut; do
	wait_until $((400 * SLOW)) ended $n
	check "$n: done by the next tdlisten" ended $n
done
eq "giveup: one more attempt" "$(attempts giveup)" 5
eq "block: one more attempt" "$(attempts block)" 2
check "giveup: queued again from its sidecar" logged "$WORK/l2.log" \
    "'$G': left by an earlier tdlisten, queued again"
check "block: queued again from its sidecar" logged "$WORK/l2.log" \
    "'$BLK': left by an earlier tdlisten, queued again"
C=$(sed -n "s/.*kept what was received as '\(.*\)'/\1/p" "$WORK/l2.log")
case $C in
*cut.incomplete.dat) ok "cut: kept as $C" ;;
*) fail "cut: not kept as NAME.incomplete.dat: '$C'" ;;
esac
eq "cut: the command heard it as incomplete" \
    "$(grep "^start cut " "$HLOG")" \
    "start cut 1 incomplete tdproto 127.0.0.1|$WORK/$C"
check "cut: the copy is the kept file" cmp -s "$WORK/$C" copies/cut.dat
check "cut: trace-cmd reads it" tc_clean copies/cut.dat
stop_listener
eq "the next listener exits 0" $? 0

# other producers: a trace-cmd client (tests/tdtcfeed sends plain's
# file) and a uftrace client (when uftrace and cc are there), whose run
# the command gets as its directory; this listener runs as daemon (-u),
# and so does the command
chmod 711 "$WORK"
chown daemon "$WORK/$ODIR"
chmod 777 copies
chmod 666 "$HLOG"
UF=false
command -v uftrace >/dev/null && command -v cc >/dev/null && UF=true
# free ports (the kernel's word): the trace-cmd clients' and 50 data
# ports after it, and the uftrace port; the trace-cmd line is the last
# tdlisten logs of the three (a taken port ends tdlisten after the
# uftrace line: waiting for that one alone let check 61 run against a
# listener that had gone)
for try in 1 2 3 4 5; do
	TPORT=$(free_port 51) || exit 99
	UPORT=$(free_port) || exit 99
	listen "$WORK/l3.log" 600 -u daemon --tracecmd-port "$TPORT" \
	    --tracecmd-data-ports $((TPORT + 1))-$((TPORT + 50)) \
	    --uftrace-port "$UPORT"
	wait_until $((100 * SLOW)) grep -q "listening for trace-cmd clients" \
	    "$WORK/l3.log"
	grep -q "listening for uftrace" "$WORK/l3.log" &&
	    grep -q "listening for trace-cmd clients" "$WORK/l3.log" && break
	stop_listener
done
"$B/tests/tdtcfeed" 127.0.0.1 "$TPORT" copies/plain.dat > feed.out 2>&1
eq "tracecmd: the trace-cmd client's recording went through" $? 0
wait_until $((400 * SLOW)) ended tracecmd
T=$(sed -n "s/.*trace-cmd 127.0.0.1:[0-9]*: wrote '\(.*\)' ([0-9]* bytes)\$/\1/p" \
    "$WORK/l3.log")
eq "tracecmd: the command got its file, as trace-cmd's" \
    "$(grep "^start tracecmd " "$HLOG")" \
    "start tracecmd 1 complete tracecmd tracecmd-127.0.0.1|$WORK/$T"
check "tracecmd: the copy is the received file" cmp -s "$WORK/$T" \
    copies/tracecmd.dat
eq "tracecmd: the command ran as the -u user" \
    "$(sed -n 's/^uid tracecmd //p' "$HLOG")" "$(id -u daemon)"
check "tracecmd: trace-cmd reads the copy" tc_clean copies/tracecmd.dat
nf=9
if $UF; then
	nf=10
	printf '%s\n' 'static int f(int x) { return x + 1; }' \
	    'int main(void) { int i, s = 0; for (i = 0; i < 100; i++) s += f(i); return s == 0; }' \
	    > prog.c
	cc -pg -O0 -o prog prog.c || { echo "FAIL: cc -pg"; exit 99; }
	mkdir -p ufrun
	(cd ufrun && uftrace record --no-sched --host 127.0.0.1 \
	    --port "$UPORT" ../prog) > uftrace.out 2>&1
	eq "uftrace: uftrace record --host exits 0" $? 0
	wait_until $((400 * SLOW)) ended uftrace
	R=$(sed -n "s/.*: wrote '\(.*\)' ([0-9]* files.*/\1/p" "$WORK/l3.log")
	eq "uftrace: the command got the run's directory" \
	    "$(grep "^start uftrace " "$HLOG")" \
	    "start uftrace 1 complete uftrace uftrace-127.0.0.1|$WORK/$R"
	check "uftrace: the copy is the run, file for file" \
	    diff -r "$WORK/$R" copies/uftrace
	uftrace replay -d copies/uftrace -f none --no-event > replay.out 2>&1
	eq "uftrace: uftrace replay of the copy shows the 100 calls" \
	    "$(grep -c ' f();' replay.out)" 100
else
	echo "# uftrace or cc missing: no uftrace run"
fi
stop_listener
eq "the listener of other producers exits 0" $? 0

# in all: one run to its end per file, every sidecar gone
eq "one end per file" "$(grep -c '^end ' "$HLOG")" $nf
eq "each with its own path" "$(grep '^end ' "$HLOG" | sort -u -t'|' -k2 |
    wc -l)" $nf
eq "no sidecar left" "$(find "$WORK/$ODIR" -name '*.onfinish' | wc -l)" 0
check "no shell ever read the path" test ! -e pwned
finish
