#!/bin/sh
# End-to-end: hostile peers against the admission rules of issue 31, each
# with an honest recording of a known exact count running beside it.
#   1. (row 1) One certificate opens standby connections: it holds at
#      most 2 (TD_MAX_STANDBY_PER_IDENTITY), the third is told to come
#      back later.  Other identities then fill --max-sessions; an honest
#      recording whose connection is cut (ss -K) resumes all the same, in
#      a slot kept for the resumes of its identity, and its file holds
#      exactly the events of the agent's local copy.  The same with
#      --insecure (the address is the identity).
#   2. (row 7) One local process keeps 24 silent connections to --unix
#      open (opening another whenever one is closed): its connections are
#      admitted by its own credentials (SO_PEERCRED), 16 at most, each
#      closed at --handshake-timeout; a guest (tests/tdrelay carries a
#      serial device to the socket, as QEMU does) is never refused and
#      records an exact count.
#   3. (row 11) One address on the trace-cmd port asks for 256 CPUs and
#      trickles its header, 128 KiB each half second: closed 6 x
#      --handshake-timeout after its RINIT all the same; a second client
#      of that address asking for more ports than a quarter of
#      --tracecmd-data-ports is refused; a client of another address
#      replays part 1's file beside them, exactly.
#   4. (rows 12, 13) A standby agent whose kernel string holds spaces
#      cannot forge fields of tdctl list; a collector's -b times the CPUs
#      over 64 MiB is refused by a real standby agent (tdagent --standby,
#      --max-buffer far above it); an honest recording runs beside them.
#   5. (idle uftrace clients) A silent client of the uftrace port is closed
#      at --handshake-timeout; 16 idle clients from each of 16 addresses
#      (each run named, then nothing) hold all 256 slots: a real uftrace
#      record --host still gets in, in the slot of the client idle the
#      longest, and its run replays exactly the program's N calls.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
command -v ss >/dev/null || skip "the ss command (iproute2) is missing"
TDHOSTILE=$B/tests/tdhostile
TDCTL=$B/tdctl
P=$WORK/pki
pki "$P" web1 evil crowd1 crowd2 || { echo "FAIL: cannot make certificates"; exit 99; }
LTLS="--cert $P/listener.pem --key $P/listener.key --ca $P/ca.pem"
OUT=$WORK/out
CTL=$WORK/control
HPIDS=""

# hostile NAME CERT N MODE [ARGS...]: tdhostile N sessions of MODE as CERT
# from 127.0.0.2, held open in the background; its outcomes go to
# $WORK/h.NAME; waits for its "held" line
hostile() {
	name=$1 cert=$2 n=$3 mode=$4
	shift 4
	"$TDHOSTILE" --cert "$P/$cert.pem" --key "$P/$cert.key" \
	    --ca "$P/ca.pem" -n "$n" --hold "$@" 127.0.0.1 "$LPORT" "$mode" \
	    > "$WORK/h.$name" 2>&1 &
	HPIDS="$HPIDS $!"
	wait_until $((400 * SLOW)) grep -q "^held " "$WORK/h.$name" 2>/dev/null
}

# let_go: the held sessions are closed
let_go() {
	for p in $HPIDS; do kill -TERM "$p" 2>/dev/null; wait "$p"; done
	HPIDS=""
}

# exact NAME APID FILE: FILE (the listener's) holds exactly the events of
# the local copy, none missed
exact() {
	"$TDCOUNT" "$3" > "$WORK/c.$1" 2>&1
	"$TDCOUNT" "$WORK/local.$1.dat" > "$WORK/cl.$1" 2>&1
	eq "$1: no event missed" "$(field missed < "$WORK/c.$1")" 0
	eq "$1: the listener's file holds exactly the local copy's events" \
	    "$(field events < "$WORK/c.$1")" "$(field events < "$WORK/cl.$1")"
	"$TDCOUNT" "$3" -p "$2" > "$WORK/cp.$1" 2>&1
	ev=$(field events < "$WORK/cp.$1")
	check "$1: 4 events per block of its last dd plus a little ($ev)" \
	    test "${ev:-0}" -gt $((4 * 20000)) -a "${ev:-0}" -lt $((4 * 20000 + 2000))
}

# standbys: the standby agents tdctl list shows
standbys() {
	"$TDCTL" -S "$CTL" list --json 2>/dev/null | jq length
}

# ---- 1. standby connections per identity; resumes keep their slots -------
# shellcheck disable=SC2086
start_listener "$WORK/l1.log" -d "$OUT" $LTLS --control "$CTL" \
    --max-sessions 6 --resume-wait 60 || exit 99
# the honest recording: 20000 blocks, a pause the test ends, 20000 more
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --name honest1 \
    -o "$WORK/local.honest1.dat" -e raw_syscalls -F -b 16384 -- sh -c \
    'dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none;
     touch '"$WORK/paused"'; while [ ! -e '"$WORK/go"' ]; do sleep 0.1; done
     echo $$ > '"$WORK/pid.honest1"'
     exec dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none' \
    2> "$WORK/agent.honest1.err" &
apid=$!
wait_session "$WORK/l1.log"
wait_until $((400 * SLOW)) test -e "$WORK/paused"

hostile evil evil 3 standby
check "one identity: its third standby connection is refused" \
    grep -q "^held 2 of 3" "$WORK/h.evil"
check "and told to come back later" \
    grep -q "^error: 'evil' has 2 standby connections already" "$WORK/h.evil"
eq "tdctl list: 2 standby agents" "$(standbys)" 2
# other identities fill --max-sessions 6: honest1, evil x2, crowd1 x2,
# crowd2 x1
hostile crowd1 crowd1 2 standby
hostile crowd2a crowd2 1 standby
check "crowd: 3 standby connections held" sh -c \
    "grep -q '^held 2 of 2' '$WORK/h.crowd1' && grep -q '^held 1 of 1' '$WORK/h.crowd2a'"
# the honest recorder stops a moment, its connection is cut, the last
# free slot is taken, then it goes on and resumes
rpid=$(recorder "$apid")
kill -STOP "$rpid"
ss -K src 127.0.0.1 dst 127.0.0.1 dport = ":$LPORT" > /dev/null 2>&1
wait_until $((400 * SLOW)) grep -q "honest1.*the recording waits 60 s" "$WORK/l1.log"
hostile crowd2b crowd2 1 standby
check "crowd: --max-sessions full again" grep -q '^held 1 of 1' "$WORK/h.crowd2b"
kill -CONT "$rpid"
wait_until $((400 * SLOW)) grep -q "honest1.*resumed at offset" "$WORK/l1.log"
check "the honest recording resumed over a full --max-sessions" \
    grep -q "honest1.*resumed at offset" "$WORK/l1.log"
check "in a slot kept for its resumes" \
    grep -q "session web1 .*a slot kept for the resume" "$WORK/l1.log"
touch "$WORK/go"
wait "$apid"
eq "the honest agent finished" $? 0
exact honest1 "$(cat "$WORK/pid.honest1" 2>/dev/null)" \
    "$OUT/$(remote_file "$WORK/agent.honest1.err")"
check "no .incomplete.dat" test -z "$(find "$OUT" -name '*.incomplete.dat')"
let_go
stop_listener

# ---- 1b. the same with --insecure ------------------------------------------
rm -f "$WORK/paused" "$WORK/go"
start_listener "$WORK/l1b.log" --insecure -d "$OUT" --max-sessions 2 \
    --resume-wait 60 || exit 99
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure --name honest1b \
    -o "$WORK/local.honest1b.dat" -e raw_syscalls -F -b 16384 -- sh -c \
    'dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none;
     touch '"$WORK/paused"'; while [ ! -e '"$WORK/go"' ]; do sleep 0.1; done
     echo $$ > '"$WORK/pid.honest1b"'
     exec dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none' \
    2> "$WORK/agent.honest1b.err" &
apid=$!
wait_session "$WORK/l1b.log"
wait_until $((400 * SLOW)) test -e "$WORK/paused"
# held NAME SRC: a recording that holds a session slot, from SRC
held() {
	"$TDHOSTILE" --hold 127.0.0.1 "$LPORT" hello "$2" > "$WORK/h.$1" 2>&1 &
	HPIDS="$HPIDS $!"
	wait_until $((400 * SLOW)) grep -q "^held " "$WORK/h.$1" 2>/dev/null
}
held plain1 127.0.0.2
rpid=$(recorder "$apid")
kill -STOP "$rpid"
ss -K src 127.0.0.1 dst 127.0.0.1 dport = ":$LPORT" > /dev/null 2>&1
wait_until $((400 * SLOW)) grep -q "honest1b.*the recording waits 60 s" "$WORK/l1b.log"
held plain2 127.0.0.3
check "--insecure: --max-sessions full again" grep -q '^held 1 of 1' "$WORK/h.plain2"
kill -CONT "$rpid"
wait_until $((400 * SLOW)) grep -q "honest1b.*resumed at offset" "$WORK/l1b.log"
check "--insecure: the honest recording resumed over a full --max-sessions" \
    grep -q "honest1b.*resumed at offset" "$WORK/l1b.log"
touch "$WORK/go"
wait "$apid"
eq "--insecure: the honest agent finished" $? 0
exact honest1b "$(cat "$WORK/pid.honest1b" 2>/dev/null)" \
    "$OUT/$(remote_file "$WORK/agent.honest1b.err")"
let_go
stop_listener

# ---- 2. silent Unix socket peers, told apart by their credentials ----------
SOCK=$WORK/guests.sock
# shellcheck disable=SC2086
start_listener "$WORK/l2.log" -d "$OUT" $LTLS --unix "$SOCK" \
    --handshake-timeout 3 || exit 99
# silent: 24 connections held, one opened again whenever one is closed
perl -MIO::Socket::UNIX -MIO::Select -e '
    $SIG{TERM} = sub { exit 0 };
    my $sel = IO::Select->new;
    sub one { my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or return;
	$sel->add($s) }
    one() for 1 .. 24;
    open(my $f, ">", $ARGV[1]); close($f);
    for (;;) {
	for my $s ($sel->can_read(0.05)) {
	    my $b; next if sysread($s, $b, 4096);
	    $sel->remove($s); close($s); one();
	}
	one() if $sel->count < 24;
	select(undef, undef, undef, 0.02);
    }' "$SOCK" "$WORK/silent.up" &
spid=$!
wait_until $((400 * SLOW)) test -e "$WORK/silent.up"
sleep 0.5
rm -f "$WORK/dev" "$WORK/pid.guest"
"$B/tests/tdrelay" "unix:$SOCK" 0 "$WORK/dev" > "$WORK/relay.out" 2>&1 &
relay=$!
wait_until $((100 * SLOW)) test -s "$WORK/dev"
"$TDAGENT" -h "serial:$(cat "$WORK/dev")" --server-name listener \
    --cert "$P/web1.pem" --key "$P/web1.key" --ca "$P/ca.pem" \
    --name guest -o "$WORK/local.guest.dat" --reconnect-wait 10 \
    -e raw_syscalls -F -b 16384 -- sh -c 'echo $$ > '"$WORK/pid.guest"'; exec dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none' \
    2> "$WORK/agent.guest.err"
eq "guest: tdagent exits 0" $? 0
wait "$relay"
check "the silent process: over 16 connections refused, by its own key" \
    grep -q "refusing unix:$spid: its address has 16 connections" "$WORK/l2.log"
# closed at the deadline: logged one by one, or in the summary of 10 s
timed_out() {
	grep -q "session unix:$spid: closing: handshake timed out\|[0-9] failed or timed out in the handshake" "$WORK/l2.log"
}
wait_until $((400 * SLOW)) timed_out
check "the silent process: its connections closed at the deadline" timed_out
check "the guest's connection was never refused" sh -c \
    "! grep -q 'refusing unix:$relay:' '$WORK/l2.log'"
exact guest "$(cat "$WORK/pid.guest" 2>/dev/null)" \
    "$OUT/$(remote_file "$WORK/agent.guest.err")"
kill -TERM "$spid"
wait "$spid"
stop_listener

# ---- 3. trace-cmd clients: the header's deadline, data ports an address --
FEED=$B/tests/tdtcfeed
SRC=$WORK/local.honest1.dat
for try in 1 2 3 4 5; do
	TPORT=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000))
	DLO=$((TPORT + 1))
	DHI=$((TPORT + 1200))
	start_listener "$WORK/l3.log" --insecure -d "$WORK/out3" \
	    --resume-wait 0 --handshake-timeout 1 --tracecmd-port "$TPORT" \
	    --tracecmd-data-ports "$DLO-$DHI" || exit 99
	wait_until $((100 * SLOW)) grep -q "listening for trace-cmd clients" "$WORK/l3.log"
	grep -q "listening for trace-cmd clients" "$WORK/l3.log" && break
	stop_listener 2>/dev/null
done
t0=$(date +%s)
"$FEED" -T -S 127.0.0.3 -c 256 127.0.0.1 "$TPORT" "$SRC" > "$WORK/trickle.out" 2>&1 &
tpid=$!
wait_until $((100 * SLOW)) grep -q "127.0.0.3:.*256 CPUs" "$WORK/l3.log"
"$FEED" -T -S 127.0.0.3 -c 64 127.0.0.1 "$TPORT" "$SRC" > "$WORK/trickle2.out" 2>&1
check "a second client of that address: refused past a quarter of the ports" \
    grep -q "127.0.0.3:[0-9]*: closing: 64 CPUs: its address would hold more than 300 data ports" "$WORK/l3.log"
"$FEED" 127.0.0.1 "$TPORT" "$SRC" > "$WORK/feed.out" 2>&1
eq "another address: its replay is taken" $? 0
wait_until $((200 * SLOW)) grep -q "trace-cmd 127.0.0.1:[0-9]*: wrote '" "$WORK/l3.log"
f=$(sed -n "s/.*trace-cmd 127.0.0.1:[0-9]*: wrote '\([^']*\)'.*/\1/p" "$WORK/l3.log")
"$TDCOUNT" "$f" > "$WORK/c.tc" 2>&1
"$TDCOUNT" "$SRC" > "$WORK/cs.tc" 2>&1
eq "another address: exactly the source's events" \
    "$(field events < "$WORK/c.tc")" "$(field events < "$WORK/cs.tc")"
wait_until $((400 * SLOW)) grep -q "closed by the listener" "$WORK/trickle.out"
kill "$tpid" 2>/dev/null
wait "$tpid"
t=$(($(date +%s) - t0))
check "the trickling client: closed at the header's deadline ($t s)" \
    grep -q "127.0.0.3:[0-9]*: closing: its header is not whole 6 s after RINIT" "$WORK/l3.log"
check "within 6 s and a little of its RINIT ($t s)" test "$t" -le $((10 * SLOW))
stop_listener

# ---- 4. what a standby agent says, what a collector asks -------------------
# shellcheck disable=SC2086
start_listener "$WORK/l4.log" -d "$OUT" $LTLS --control "$CTL" || exit 99
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --name honest4 \
    -o "$WORK/local.honest4.dat" -e raw_syscalls -F -b 16384 -- sh -c \
    'while [ ! -e '"$WORK/go4"' ]; do sleep 0.1; done
     echo $$ > '"$WORK/pid.honest4"'
     exec dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none' \
    2> "$WORK/agent.honest4.err" &
apid=$!
wait_session "$WORK/l4.log"
hostile forger crowd1 1 standby --kernel "6.1 recording=forged peer=6.6.6.6"
printf 'allow-events = raw_syscalls\nmax-buffer 1048576\n' > "$WORK/sb.conf"
"$TDAGENT" --standby -c "$WORK/sb.conf" -h 127.0.0.1 -p "$LPORT" \
    --cert "$P/crowd2.pem" --key "$P/crowd2.key" --ca "$P/ca.pem" \
    2> "$WORK/standby.err" &
sbpid=$!
two_standbys() {
	[ "$(standbys)" -eq 2 ]
}
wait_until $((400 * SLOW)) two_standbys
"$TDCTL" -S "$CTL" list --json > "$WORK/list4.json" 2>&1
eq "the forged kernel string is one field" \
    "$(jq -r '.[] | select(.identity == "crowd1") | "\(.kernel) \(.recording // "-") \(.peer)"' \
    "$WORK/list4.json" | sed 's/:[0-9]*$//')" \
    "6.1_recording=forged_peer=6.6.6.6 - 127.0.0.2"
"$TDCTL" -S "$CTL" list > "$WORK/list4" 2>&1
grep '^crowd1 ' "$WORK/list4" > "$WORK/forger"
eq "the table's row has as many columns as its header" \
    "$(awk '{print NF}' "$WORK/forger")" \
    "$(awk 'NR == 1 {print NF - 4}' "$WORK/list4")"
check "the table shows the forged kernel string as one column" \
    grep -q ' 6.1_recording=forged_peer=6.6.6.6 ' "$WORK/forger"
ncpu=$(getconf _NPROCESSORS_CONF)
kb=$((65536 / ncpu + 1))
"$TDCTL" -S "$CTL" start --hosts crowd2 -e raw_syscalls -b $kb \
    > "$WORK/big.out" 2>&1
eq "-b times the CPUs over 64 MiB: tdctl exits 1" $? 1
check "refused by the agent, which says why" grep -q \
    "^refused crowd2 buffer of $kb KB x $ncpu CPUs over 65536 KB in all" "$WORK/big.out"
touch "$WORK/go4"
wait "$apid"
eq "the honest agent finished" $? 0
exact honest4 "$(cat "$WORK/pid.honest4" 2>/dev/null)" \
    "$OUT/$(remote_file "$WORK/agent.honest4.err")"
kill -TERM "$sbpid"
wait "$sbpid"
let_go
stop_listener

# ---- 5. idle uftrace clients ----------------------------------------------
if command -v uftrace >/dev/null && command -v cc >/dev/null; then
N=3000
printf '#include <stdio.h>\nstatic int leaf(int x) { return x + 1; }\nstatic int mid(int x) { return leaf(x) * 2; }\nint main(void) { int i, s = 0; for (i = 0; i < %d; i++) s += mid(i); printf("%%d\\n", s); return 0; }\n' $N > "$WORK/prog.c"
cc -pg -O0 -o "$WORK/prog" "$WORK/prog.c" || { echo "FAIL: cc -pg"; exit 99; }
# a uftrace port that is free (five tries, as e2e-uftrace)
for try in 1 2 3 4 5; do
	UPORT=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000))
	start_listener "$WORK/l5.log" --insecure -d "$WORK/out5" \
	    --uftrace-port "$UPORT" --handshake-timeout 2 || exit 99
	wait_until $((100 * SLOW)) grep -q "listening for uftrace" "$WORK/l5.log"
	grep -q "listening for uftrace" "$WORK/l5.log" && break
	stop_listener 2>/dev/null
done
# crowd ADDRS PER UP: PER connections from each of ADDRS; a run named
# on each unless PER is negative (silent); UP is made once all are open
# shellcheck disable=SC2086 # ADDRS is a list
crowd() {
	perl -MIO::Socket::INET -e '
	    $SIG{TERM} = sub { exit 0 };
	    my ($port, $per, $up, @addrs) = @ARGV; my @s;
	    for my $a (@addrs) { for (1 .. abs($per)) {
		my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1",
		    PeerPort => $port, LocalAddr => $a) or next;
		syswrite($s, pack("nnN", 0xface, 101, 4) . "idle") if $per > 0;
		push @s, $s; } }
	    open(my $f, ">", $up); close($f);
	    sleep 1 while 1;' "$UPORT" "$2" "$3" $1 &
}
crowd 127.0.2.1 -1 "$WORK/silent5.up"
cpid1=$!
wait_until $((100 * SLOW)) test -e "$WORK/silent5.up"
wait_until $((200 * SLOW)) grep -q "uftrace 127.0.2.1:[0-9]*: closed: no SEND_DIR_NAME within 2 s" "$WORK/l5.log"
check "a silent uftrace client: closed at --handshake-timeout" \
    grep -q "uftrace 127.0.2.1:[0-9]*: closed: no SEND_DIR_NAME within 2 s" "$WORK/l5.log"
addrs=""
for i in $(seq 1 16); do addrs="$addrs 127.0.1.$i"; done
crowd "$addrs" 16 "$WORK/crowd5.up"
cpid2=$!
wait_until $((400 * SLOW)) test -e "$WORK/crowd5.up"
begun() {
	[ "$(grep -c "uftrace 127.0.1.[0-9]*:[0-9]*: run of 'idle'" "$WORK/l5.log")" -ge 256 ]
}
wait_until $((400 * SLOW)) begun
eq "the crowd: 256 runs begun" \
    "$(grep -c "uftrace 127.0.1.[0-9]*:[0-9]*: run of 'idle'" "$WORK/l5.log")" 256
sleep 2.5
mkdir -p "$WORK/c5"
(cd "$WORK/c5" && uftrace record --no-sched --host 127.0.0.1 \
    --port "$UPORT" "$WORK/prog") > "$WORK/uf5.out" 2>&1
eq "uftrace record --host exits 0" "$?" 0
check "it took the slot of an idle client" \
    grep -q "uftrace 127.0.1.[0-9]*:[0-9]*: kept .* as incomplete .*idle for [0-9]* s, its slot goes to 127.0.0.1:" "$WORK/l5.log"
wait_until $((400 * SLOW)) grep -q "uftrace 127.0.0.1:[0-9]*: wrote '" "$WORK/l5.log"
R=$(sed -n "s/.*uftrace 127.0.0.1:[0-9]*: wrote '\([^']*\)'.*/\1/p" "$WORK/l5.log" | head -1)
uftrace replay -d "$R" -f none --no-event 2>&1 | sed 's/^ *\[ *[0-9]*\] | //' > "$WORK/calls5"
eq "its run replays exactly the N calls of leaf" \
    "$(grep -c '^ *leaf();$' "$WORK/calls5")" $N
kill -TERM $cpid1 $cpid2
wait $cpid1 $cpid2
stop_listener
else
	echo "# part 5 not run: no uftrace or no cc"
fi

finish
