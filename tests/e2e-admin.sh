#!/bin/sh
# End-to-end: tdlisten's administration: it drops root for -u USER after
# binding, and SIGHUP reloads certificates and the CRL for new sessions, so
# a revoked agent is refused without a restart.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
P=$WORK/pki
pki "$P" web1 web2 || { echo "FAIL: cannot make certificates"; exit 99; }
OUT=$WORK/out
mkdir -p "$OUT"
chown nobody "$OUT"
chmod 755 "$WORK" "$P"
# the key must stay readable after the switch for SIGHUP to reload it
chown nobody "$P/listener.key"

agent() {
	"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/$1.pem" --key "$P/$1.key" \
	    --ca "$P/ca.pem" -e sched -s 0.3 2> "$WORK/$1.err"
}

start_listener "$WORK/l.log" -d "$OUT" -u nobody --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --crl "$P/crl.pem" || exit 99
# it binds (and says "listening on") before it switches: wait for that
wait_until $((100 * SLOW)) grep -q "running as user 'nobody'" "$WORK/l.log"
check "-u: tdlisten says it runs as nobody" \
    grep -q "running as user 'nobody'" "$WORK/l.log"
eq "-u: and it does" "$(ps -o user= -p "$LPID" | tr -d ' ')" nobody
agent web1
eq "web1 streams before revocation" $? 0
f=$(ls "$OUT"/web1/*.dat | head -1)
eq "files belong to nobody" "$(stat -c %U "$f")" nobody
check "trace-cmd reads it" tc_clean "$f"

sh "$TDCERT" revoke "$P" web1 >/dev/null 2>&1
kill -HUP "$LPID"
wait_until $((50 * SLOW)) grep -q "SIGHUP: certificates and CRL reloaded" \
    "$WORK/l.log"
check "SIGHUP reloads the certificates and the CRL" \
    grep -q "SIGHUP: certificates and CRL reloaded" "$WORK/l.log"
agent web1
eq "a revoked agent is refused after SIGHUP" $? 1
check "the agent is told its certificate was revoked" \
    grep -q "revoked" "$WORK/web1.err"
check "the listener logs the revocation" \
    grep -q "certificate verify failed: certificate revoked" "$WORK/l.log"
agent web2
eq "another agent still streams" $? 0
stop_listener

# SIGTERM while a recording streams: tdlisten exits at once, checkpoints
# the recording and leaves it for the next tdlisten; the agent cannot
# reconnect and gives up after --reconnect-wait; the next tdlisten takes
# the recording up and, its agent gone, keeps it as a readable
# .incomplete.dat after --resume-wait
HPORT=$(free_port) || exit 99
start_listener "$WORK/l3.log" -d "$WORK/out3" --insecure \
    --http "127.0.0.1:$HPORT" || exit 99
# (-s 600: the recording is still going when the listener goes, however
# slowly it started; stopped once the listener is gone, the agent tries
# --reconnect-wait 1 s more to deliver, then gives up)
"$TDAGENT" -q -h 127.0.0.1 -p "$LPORT" --insecure -e sched -s 600 \
    --reconnect-wait 1 2>/dev/null &
apid=$!
# tracing starts once the headers are out (the first time-sync round
# flushes them), so from then on the partial file is worth keeping
wait_recording "$apid"
wait_session "$WORK/l3.log"
# and until events came in (a listener slowed by valgrind and a loaded
# machine may take seconds for the first pages; with none, there is
# nothing worth keeping and the file is rightly dropped)
received_events() {
	curl -s --max-time $((5 * SLOW)) "http://127.0.0.1:$HPORT/metrics" |
	    awk '$1 == "tdlisten_received_events_total" && $2 > 0 { f = 1 }
		END { exit !f }'
}
wait_until $((400 * SLOW)) received_events
check "events came in before the SIGTERM" received_events
kill -TERM "$LPID"
i=0
while kill -0 "$LPID" 2>/dev/null && [ $i -lt $((100 * SLOW)) ]; do
	sleep 0.05
	i=$((i + 1))
done
check "SIGTERM with a session open: tdlisten exits" sh -c "! kill -0 $LPID 2>/dev/null"
wait "$LPID"
check "and leaves the recording to be resumed" \
    grep -q "left '.*' to be resumed" "$WORK/l3.log"
kill -TERM "$apid"
wait "$apid"
eq "the agent cannot deliver the recording (exit 1)" $? 1
start_listener "$WORK/l3b.log" -d "$WORK/out3" --insecure --resume-wait 1 ||
    exit 99
wait_until $((100 * SLOW)) sh -c \
    "ls '$WORK'/out3/127.0.0.1/*.incomplete.dat >/dev/null 2>&1"
check "the next tdlisten recovered it" grep -q "recovered '" "$WORK/l3b.log"
inc=$(ls "$WORK"/out3/127.0.0.1/*.incomplete.dat 2>/dev/null)
check "and kept it when its agent did not come" test -n "$inc"
[ -n "$inc" ] && check "and trace-cmd reads it" tc_clean "$inc"
stop_listener

# -u without root, and an unknown user, fail at start, before binding:
# on a port another tdlisten holds, the user is named all the same
start_listener "$WORK/l4.log" -d "$WORK/out4" --insecure || exit 99
"$TDLISTEN" -p "$LPORT" --insecure -u no-such-user-td -d "$WORK/x" \
    2> "$WORK/err"
eq "an unknown -u user fails at start" $? 1
check "and is named" grep -q "unknown user 'no-such-user-td'" "$WORK/err"
check "before the port is bound" sh -c \
    "! grep -q 'cannot listen\|Address already in use' '$WORK/err'"
check "and before the output directory is made" test ! -e "$WORK/x"
stop_listener
finish
