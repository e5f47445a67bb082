#!/bin/sh
# End-to-end: the agent's transports (agent/net/conn.c).  Over a character
# device (-h serial:PATH, what a guest's virtio-serial port is) the same
# TLS session reaches tdlisten: tests/tdrelay makes a pseudo-terminal in
# raw mode and carries its bytes to the listener's TCP port, as QEMU
# carries a virtio-serial port's to a host socket.  The file is exact and
# the listener's certificate is checked against --server-name (required
# there: no host name to check it against).  vsock needs a host side this
# machine does not have (no vsock_loopback): the agent's errors and the
# listener's --vsock socket are checked.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDRELAY=$B/tests/tdrelay
P=$WORK/pki
pki "$P" guest1 || { echo "FAIL: cannot make certificates"; exit 99; }
TLS="--cert $P/guest1.pem --key $P/guest1.key --ca $P/ca.pem"
start_listener "$WORK/l.log" -d "$WORK/out" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" || exit 99

# relay [-l S]: a pseudo-terminal carried to the listener (after S s:
# tests/tdrelay.c); sets RELAY, DEV
relay() {
	rm -f "$WORK/dev"
	"$TDRELAY" "$@" 127.0.0.1 "$LPORT" "$WORK/dev" > "$WORK/relay.out" 2>&1 &
	RELAY=$!
	wait_until $((100 * SLOW)) test -s "$WORK/dev"
	DEV=$(cat "$WORK/dev")
}

# the listener's certificate names "listener" (tdcert issue --server)
relay
rm -f "$WORK/pid"
# shellcheck disable=SC2086
"$TDAGENT" -h "serial:$DEV" --server-name listener $TLS --name serial \
    --reconnect-wait 10 \
    -e raw_syscalls -F -b 16384 -- sh -c 'echo $$ > '"$WORK/pid"'; exec dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none' \
    2> "$WORK/agent.err"
eq "serial: tdagent exits 0" $? 0
wait "$RELAY"
eq "serial: the relay carried bytes both ways" $? 0
f=$WORK/out/$(remote_file "$WORK/agent.err")
check "serial: the file is under the certificate's identity" \
    sh -c "test -f '$f' && test '$(dirname "$f")' = '$WORK/out/guest1'"
check "serial: trace-cmd reads it cleanly" tc_clean "$f"
"$TDCOUNT" "$f" -p "$(cat "$WORK/pid")" > "$WORK/c"
eq "serial: no event lost" "$(field missed < "$WORK/c")" 0
n=$(field events < "$WORK/c")
# 20000 blocks: 80000 events plus the shell's and dd's start-up calls
check "serial: every event of the workload ($n)" \
    test "${n:-0}" -gt 80000 -a "${n:-0}" -lt 82000
# time sync runs over the device too; whether a round makes a sample
# depends on how fast both sides answer (a listener under valgrind does
# not within a round's 200 ms), so the outcome is reported, not judged
check "serial: the listener logged the session's time sync" \
    grep -q "'serial' .*time sync: " "$WORK/l.log"
sed -n "s/^.*'serial' .*\(time sync: .*\)$/# serial: \1/p" "$WORK/l.log" |
    tail -1

# the wrong server name: the listener's certificate is refused
relay
# shellcheck disable=SC2086
"$TDAGENT" -h "serial:$DEV" --server-name other.example $TLS -e sched -s 1 \
    2> "$WORK/wrong.err"
eq "serial: a certificate for another name is refused (exit 1)" $? 1
check "serial: and says why" grep -q "certificate verify failed" \
    "$WORK/wrong.err"
kill "$RELAY" 2>/dev/null
wait "$RELAY" 2>/dev/null

# a host side that comes late (a guest booted before its host's listener,
# or QEMU reconnecting its chardev): for 12 s what the device gets goes
# nowhere, so the first attempt's preambles get no answer within its 10 s;
# the agent tries again (up to --reconnect-wait) and records all of it
relay -l 12
rm -f "$WORK/pid"
# shellcheck disable=SC2086
"$TDAGENT" -h "serial:$DEV" --server-name listener $TLS --name late \
    -e raw_syscalls -F -b 16384 -- sh -c 'echo $$ > '"$WORK/pid"'; exec dd if=/dev/zero of=/dev/null bs=1 count=5000 status=none' \
    2> "$WORK/late.err"
eq "serial, late host: tdagent exits 0" $? 0
kill "$RELAY" 2>/dev/null
wait "$RELAY" 2>/dev/null
sed 's/^/# relay: /' "$WORK/relay.out"
check "serial, late host: the relay threw the first attempt's bytes away" \
    grep -q "relayed [1-9][0-9]* bytes up, [1-9][0-9]* down ([1-9][0-9]* thrown away)" \
    "$WORK/relay.out"
check "serial, late host: the agent said it tries again" grep -q \
    "no answer to the resynchronisation preamble within 10 s .*; trying again for up to 300 s" \
    "$WORK/late.err"
f=$WORK/out/$(remote_file "$WORK/late.err")
check "serial, late host: trace-cmd reads the file cleanly" tc_clean "$f"
"$TDCOUNT" "$f" -p "$(cat "$WORK/pid")" > "$WORK/c"
eq "serial, late host: no event lost" "$(field missed < "$WORK/c")" 0
n=$(field events < "$WORK/c")
# 5000 blocks: 20000 events plus the shell's and dd's start-up calls
check "serial, late host: every event of the workload ($n)" \
    test "${n:-0}" -gt 20000 -a "${n:-0}" -lt 22000

# a device nobody answers (/dev/null reads end of file): the agent waits
# (it does not spin), tries again, and a SIGTERM ends the trying
"$TDAGENT" -h serial:/dev/null --insecure -e sched -s 1 2> "$WORK/null.err" &
npid=$!
wait_until $((600 * SLOW)) grep -q "trying again for up to" "$WORK/null.err"
kill -TERM $npid
wait $npid
eq "serial, nobody answers: SIGTERM while trying again: exit 1" $? 1
check "serial, nobody answers: and says so" grep -q \
    "stopped by SIGTERM before the listener took the recording" "$WORK/null.err"

# usage errors: say what is wrong, exit 2, touch nothing
# shellcheck disable=SC2086
"$TDAGENT" -h "serial:$DEV" $TLS -e sched -s 1 2> "$WORK/err"
eq "serial without --server-name: exit 2" $? 2
check "and is told to give it" grep -q "give --server-name" "$WORK/err"
"$TDAGENT" -h "serial:$DEV" -p "$(free_port)" --insecure -e sched -s 1 \
    2> "$WORK/err"
eq "serial with -p: exit 2" $? 2
"$TDAGENT" -h vsock:nine --insecure -e sched -s 1 2> "$WORK/err"
eq "a bad vsock context id: exit 2" $? 2
check "and is named" grep -q "bad vsock context id 'nine'" "$WORK/err"
"$TDAGENT" -h serial:/tmp --insecure -e sched -s 1 2> "$WORK/err"
eq "serial: a path that is not a device: exit 1" $? 1
check "and says so" grep -q "'/tmp'" "$WORK/err"
check "the listener survived" kill -0 "$LPID"
stop_listener

# tdlisten --vsock PORT: the guests' AF_VSOCK port, beside the TCP port.
# Nothing can connect to it here (no vsock transport), but the socket is
# real: a second listener cannot take the same port.  Where the kernel
# has no AF_VSOCK at all, tdlisten must say so and not start.
VPORT=$((40000 + $$ % 20000))
start_listener "$WORK/lv.log" --insecure -d "$WORK/outv" --vsock "$VPORT" ||
    exit 99
# start_listener waits for the TCP port's line: the vsock port's follows
wait_until $((100 * SLOW)) grep -q \
    "listening on vsock port\|no AF_VSOCK" "$WORK/lv.log"
if grep -q "listening on vsock port $VPORT (INSECURE" "$WORK/lv.log"; then
	"$TDLISTEN" -p "$(free_port)" --insecure -d "$WORK/outv2" \
	    --vsock "$VPORT" 2> "$WORK/v2.err"
	eq "--vsock: the port is taken, a second listener exits 1" $? 1
	check "and says why" grep -q "cannot listen on vsock port $VPORT: Address already in use" \
	    "$WORK/v2.err"
	check "--vsock: the first listener goes on" kill -0 "$LPID"
	stop_listener
else
	stop_listener
	check "--vsock without AF_VSOCK: the log says so" \
	    grep -q "this kernel offers no AF_VSOCK socket" "$WORK/lv.log"
fi
"$TDLISTEN" -p "$(free_port)" --insecure --vsock nine 2> "$WORK/err"
eq "--vsock with a bad port: exit 2" $? 2
check "and is named" grep -q "invalid vsock port 'nine'" "$WORK/err"
finish
