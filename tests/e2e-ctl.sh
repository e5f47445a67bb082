#!/bin/sh
# End-to-end: what tdctl and tdlisten tell the operator (issue 28, "tdctl
# and the listener tell the truth"; issue 31 row 4).  Two standby agents
# (web1, web2) on one tdlisten --control:
#   - a recording that fails in its set-up (an event the kernel does not
#     have, a filter it refuses): tdctl exits 1 and prints the agent's
#     reason, the kernel's filter error too;
#   - an event name that cannot be one is refused by tdctl before it asks;
#   - a recording that ends well: tdctl stop prints its file's path.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDCTL=$B/tdctl
P=$WORK/pki
pki "$P" web1 web2 loadgen || { echo "FAIL: cannot make certificates"; exit 99; }
OUT=$WORK/out
CTL=$WORK/control
LTLS="--cert $P/listener.pem --key $P/listener.key --ca $P/ca.pem"
# shellcheck disable=SC2086
start_listener "$WORK/listen.log" -d "$OUT" $LTLS --control "$CTL" \
    --max-standby-per-identity 16 \
    --crl "$P/crl.pem" --http 127.0.0.1:0 || exit 99
wait_until $((100 * SLOW)) grep -q "status page and metrics at" \
    "$WORK/listen.log"
U=$(sed -n 's|.*status page and metrics at \(http://127.0.0.1:[0-9]*\)/.*|\1|p' \
    "$WORK/listen.log")
cat > "$WORK/agent.conf" <<CONF
allow-events = sched
max-buffer 1024
max-duration 60
CONF
SPIDS=""
for a in web1 web2; do
	"$TDAGENT" --standby -c "$WORK/agent.conf" -h 127.0.0.1 -p "$LPORT" \
	    --cert "$P/$a.pem" --key "$P/$a.key" --ca "$P/ca.pem" \
	    2> "$WORK/agent.$a.err" &
	SPIDS="$SPIDS $!"
done
cleanup() {
	# shellcheck disable=SC2086
	kill $SPIDS 2>/dev/null
	# shellcheck disable=SC2086
	wait $SPIDS 2>/dev/null
	stop_listener
}
both_standby() {
	[ "$("$TDCTL" -S "$CTL" list --json 2>/dev/null |
	    jq '[.[] | select(.state == "standby")] | length')" = 2 ]
}
wait_until $((400 * SLOW)) both_standby
check "both agents on standby" both_standby

# ---- item 1: failures say why ------------------------------------------
"$TDCTL" -S "$CTL" start --hosts web1 -e sched:no_such_event --name noev \
    > "$WORK/noev.out" 2>&1
eq "an event the kernel does not have: tdctl exits 1" $? 1
check "... and prints the agent's reason" grep -q \
    "^finished web1 noev exit 2: unknown event 'sched:no_such_event'" \
    "$WORK/noev.out" || sed 's/^/# noev: /' "$WORK/noev.out"
"$TDCTL" -S "$CTL" start --hosts web2 -e sched:sched_switch \
    -f 'no_such_field == 1' --name badf > "$WORK/badf.out" 2>&1
eq "a filter the kernel refuses: tdctl exits 1" $? 1
check "... and prints the kernel's filter error" grep -q \
    "^finished web2 badf exit 2: invalid filter.*Field not found" \
    "$WORK/badf.out" || sed 's/^/# badf: /' "$WORK/badf.out"
starts0=$(grep -c "control: START" "$WORK/listen.log")
"$TDCTL" -S "$CTL" start -e 'sched:bad event!' > "$WORK/syn.out" 2>&1
eq "an event name that cannot be one: tdctl exits 2" $? 2
check "... says so" grep -q "not an event name" "$WORK/syn.out"
eq "... and asks nobody" "$(grep -c "control: START" "$WORK/listen.log")" \
    "$starts0"

# a recording that ends well: its file's path
wait_until $((400 * SLOW)) both_standby
"$TDCTL" -S "$CTL" start --hosts web1 -e sched:sched_switch --name good \
    > "$WORK/good.out" 2>&1
eq "a good recording: tdctl start exits 0" $? 0
"$TDCTL" -S "$CTL" stop --hosts web1 good > "$WORK/stop.out" 2>&1
eq "tdctl stop exits 0" $? 0
check "tdctl stop says it finished well" \
    grep -qx "finished web1 good exit 0" "$WORK/stop.out"
f=$(sed -n 's/^file web1 //p' "$WORK/stop.out")
check "tdctl stop prints the file's path" test -n "$f" ||
    sed 's/^/# stop: /' "$WORK/stop.out"
check "... and the file is there, readable" tc_clean "$f"

# ---- item 2: list, stop, a missing socket ----------------------------
wait_until $((400 * SLOW)) both_standby
"$TDCTL" -S "$CTL" list > "$WORK/list" 2>&1
eq "tdctl list exits 0" $? 0
eq "tdctl list: a header, then the agents sorted" \
    "$(awk '{ print $1 }' "$WORK/list" | tr '\n' ' ')" "AGENT web1 web2 "
check "tdctl list: each agent's allowance" sh -c "
    grep -q '^web1  *[^ ]*  *standby  *-  *sched  *1024  *60 ' '$WORK/list' &&
    grep -q '^web2  *[^ ]*  *standby  *-  *sched  *1024  *60 ' '$WORK/list'" ||
    sed 's/^/# list: /' "$WORK/list"
"$TDCTL" -S "$CTL" list --json > "$WORK/list.json"
check "tdctl list --json: the agents, their allowance" sh -c "
    jq -e '[.[].identity] == [\"web1\", \"web2\"] and
	.[0].allow_events == [\"sched\"] and .[0].max_buffer_kb == 1024 and
	.[0].max_duration_s == 60 and .[1].cpus == $(nproc) and
	.[0].recording == null and (.[0].clocks | index(\"local\")) != null' \
	'$WORK/list.json' > /dev/null" || sed 's/^/# json: /' "$WORK/list.json"
"$TDCTL" -S "$CTL" stop nosuch > "$WORK/nosuch.out" 2>&1
eq "tdctl stop nosuch exits 1" $? 1
check "... and says there is no such recording" \
    grep -q "no such recording 'nosuch'" "$WORK/nosuch.out"
"$TDCTL" -S "$WORK/nothere" list > "$WORK/nosock.out" 2>&1
eq "no socket: tdctl exits 2" $? 2
check "... and asks whether tdlisten runs with --control" \
    grep -q "is tdlisten running with --control?" "$WORK/nosock.out"

# ---- item 3: a second tdlisten on the same --control -------------------
# shellcheck disable=SC2086
timeout 20 "$TDLISTEN" -p $((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000)) \
    -d "$WORK/out2" $LTLS --control "$CTL" > "$WORK/second.log" 2>&1
eq "a second tdlisten on the same --control exits 1" $? 1
check "... and says the socket is in use" \
    grep -q "is in use: another tdlisten listens on it" "$WORK/second.log"
check "the first is still reachable" both_standby

# ---- item 4: a control client that asks and never reads ---------------
# (issue 31 row 4: 100 KB of "list" made tdlisten 396 MB with 200 standby
# agents; here 16 (tests/tdload --standby) beside web1 and web2: each
# list about 6 KB, 20,000 of them 120 MB were nothing bounded)
"$B/tests/tdload" -h 127.0.0.1 -p "$LPORT" --cert "$P/loadgen.pem" \
    --key "$P/loadgen.key" --ca "$P/ca.pem" -n 16 --standby 600 \
    --name sb --timeout 120 "$f" > "$WORK/sb.out" 2> "$WORK/sb.err" &
SBPID=$!
SPIDS="$SPIDS $SBPID"
standing() {
	grep -q 'standing by' "$WORK/sb.err" || ! kill -0 $SBPID 2>/dev/null
}
# (the protocol's own lines: what tdctl makes of them is not the point)
nload() {
	perl -MIO::Socket::UNIX -e '
	    my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 3;
	    print $s "list\n";
	    while (my $l = <$s>) { last if $l eq ".\n"; print $l; }' "$CTL" |
	    grep -c '^agent loadgen '
}
wait_until $((600 * SLOW)) standing
all16() {
	[ "$(nload)" = 16 ]
}
wait_until $((600 * SLOW)) all16
eq "16 more standby agents" "$(nload)" 16
rss() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$LPID/status"
}
rss0=$(rss)
perl -MIO::Socket::UNIX -e '
    my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 3;
    print $s "list\n" x 20000;
    $s->flush;
    sleep 4;
    exit 0;' "$CTL" &
NOREAD=$!
sleep 3
rss1=$(rss)
echo "# tdlisten VmRSS $rss0 kB, $rss1 kB with a client that does not read"
check "a client that never reads: tdlisten stays bounded (+$((rss1 - rss0)) kB < 16384)" \
    test $((rss1 - rss0)) -lt 16384
"$TDCTL" -S "$CTL" list > /dev/null 2>&1
eq "... and still answers the others" $? 0
wait $NOREAD
# one that reads, late: every answer (its reads paused, then resumed)
perl -MIO::Socket::UNIX -e '
    my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 3;
    print $s "list\n" x 500;
    $s->flush;
    sleep 1;
    my $n = 0;
    while (my $l = <$s>) { $n++ if $l eq ".\n"; last if $n == 500; }
    print "$n\n";' "$CTL" > "$WORK/slow.out"
eq "a client that reads late gets all its answers" "$(cat "$WORK/slow.out")" 500
kill $SBPID
wait $SBPID 2>/dev/null

# the other bounds of tdlisten(8) SECURITY, "A control client": 64 clients
# at once (70 connect and hold: 6 are closed at once), a request of more
# than 9728 bytes (CONTROL_LINE_MAX: two filters, arm's and its
# trigger's) or with a byte that is not printable closes its client; each
# time the others are still answered
perl -MIO::Socket::UNIX -e '
    my @s;
    $SIG{ALRM} = sub { print "hung\n"; exit 0 };
    alarm 30;
    for (1 .. 70) {
        my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 3;
        push @s, $s;
    }
    sleep 2;
    my $closed = 0;
    for my $s (@s) {
        $s->blocking(0);
        my $n = sysread($s, my $b, 1);
        $closed++ if defined $n && $n == 0;
    }
    print "$closed\n";' "$CTL" > "$WORK/many.out"
eq "a 65th control client and beyond are closed at once" \
    "$(cat "$WORK/many.out")" 6
check "... each one logged" grep -q "control: 64 clients already: refusing one" \
    "$WORK/listen.log"
# ctl_closed TEXT [NL]: TEXT (and a newline with NL) to a new client
ctl_closed() {
	perl -MIO::Socket::UNIX -e '
	    my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 3;
	    $SIG{ALRM} = sub { print "hung\n"; exit 0 };
	    alarm 20;
	    print $s $ARGV[1], $ARGV[2] ? "\n" : "";
	    $s->flush;
	    my $l = <$s>;
	    print defined $l ? "answered\n" : "closed\n";' "$CTL" "$1" "${2:-}"
}
eq "a request of 9729 bytes closes its client" \
    "$(ctl_closed "$(printf '%09729d' 0)")" closed
check "... logged" grep -q "control: a request longer than 9728 bytes" \
    "$WORK/listen.log"
eq "a request with a control byte closes its client" \
    "$(ctl_closed "$(printf 'stop\t\033[2J\t')" 1)" closed
eq "a well-formed one is answered" "$(ctl_closed list 1)" answered
"$TDCTL" -S "$CTL" list > /dev/null 2>&1
eq "... and tdctl still is" $? 0

# ---- item 5: a reload that fails is loud --------------------------------
"$TDCTL" -S "$CTL" reload > "$WORK/reload1.out" 2>&1
eq "tdctl reload: exit 0" $? 0
check "... says what it reloaded" \
    grep -q "^reloaded: certificates and CRL reloaded" "$WORK/reload1.out"
mv "$P/crl.pem" "$P/crl.pem.away"
"$TDCTL" -S "$CTL" reload > "$WORK/reload2.out" 2>&1
eq "tdctl reload with the CRL missing: exit 1" $? 1
check "... and says why, and that the old CRL is in force" \
    grep -q "^error reload failed, the old CA and CRL are still in force.*crl.pem" \
    "$WORK/reload2.out" || sed 's/^/# reload: /' "$WORK/reload2.out"
kill -HUP "$LPID"
wait_until $((100 * SLOW)) grep -q "SIGHUP: reload failed" "$WORK/listen.log"
check "SIGHUP with the CRL missing: an error line in the log" \
    grep -q "SIGHUP: reload failed, the old CA and CRL are still in force" \
    "$WORK/listen.log"
curl -sS --max-time 10 "$U/metrics" > "$WORK/metrics" 2>&1
eq "/metrics counts the failed reloads" \
    "$(awk '$1 == "tdlisten_reload_failures_total" { print $2 }' "$WORK/metrics")" 2
curl -sS --max-time 10 "$U/status" > "$WORK/status" 2>&1
check "/status says why the last reload failed" \
    jq -e '.reload.failures == 2 and (.reload.last_error | test("crl.pem"))' \
    "$WORK/status"
mv "$P/crl.pem.away" "$P/crl.pem"
"$TDCTL" -S "$CTL" reload > "$WORK/reload3.out" 2>&1
eq "the CRL back: tdctl reload exits 0" $? 0
curl -sS --max-time 10 "$U/status" > "$WORK/status" 2>&1
check "/status: no reload error now" \
    jq -e '.reload.last_error == null' "$WORK/status"

# ---- item 6: tdlisten -D says why it cannot start ----------------------
"$TDLISTEN" -D -p "$LPORT" --insecure -d "$WORK/out6" > "$WORK/d.out" 2>&1
eq "tdlisten -D on a port in use: exit 1" $? 1
check "... and says why on stderr, before detaching" \
    grep -q "cannot listen on port $LPORT" "$WORK/d.out" ||
    sed 's/^/# -D: /' "$WORK/d.out"

# ---- item 8: the docs say what the code does ---------------------------
check "README: no top-level make install" sh -c \
    "! grep -q '\`make install\`' '$S/README.md' && grep -q 'make -C build install' '$S/README.md'"
check "README: -h localhost on one box" grep -q -- '-h localhost' "$S/README.md"
check "tdagent(8) BUGS: no claim that tdlisten lacks vsock and Unix listeners" \
    sh -c "! grep -q 'no vsock or Unix-socket listener' '$S/docs/tdagent.8'"
check "tdlisten(8): the protocol versions it speaks" sh -c \
    "! grep -q 'protocol version other than 2' '$S/docs/tdlisten.8'"
timeout 20 "$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure \
    --spool "$WORK/no/such/dir" -e sched -s 0.1 > "$WORK/spool.err" 2>&1
eq "tdagent --spool DIR that is missing: exit 1" $? 1
check "... saying so, as tdagent(8) says" sh -c \
    "grep -q \"cannot spool in '$WORK/no/such/dir'\" '$WORK/spool.err' &&
     grep -q 'that cannot be written is an error' '$S/docs/tdagent.8'"

cleanup
finish
