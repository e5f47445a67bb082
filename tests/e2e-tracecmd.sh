#!/bin/sh
# End-to-end: stock trace-cmd 3.1.6 record -N clients into tdlisten
# --tracecmd-port.  The real trace-cmd with TCP data (-t) and with UDP (its
# default) records N getppid calls of tests/tdpoke-static (-F: its own
# events only): the file has exactly N events per trace-cmd report (UDP: or
# its loss is in the log).  While a real client records, a third party
# connects to its data ports from another address (refused), and
# tests/tdtcfeed clients come and go on the same listener: a whole replay
# over TCP (exact) and over UDP (pages kept + pages lost = pages sent, with
# datagrams short or out of order on purpose, or dropped by the kernel
# while the listener is stopped: counted to the page), one
# sending garbage as its header, one lying about its CPUs or page size, one
# vanishing without CLOSE (kept as incomplete), a v1 client (refused), one
# whose saved_cmdlines section says a size it does not hold (trace-cmd's
# own race: repaired); the real client's file is exact all the same.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
# trace-cmd records the top-level buffer, one per machine: two runs of
# the suite at once (a shared CI machine, two trees) take turns here
exec 9< "$TRACING/set_event_pid"
flock -w 3600 9 || { echo "FAIL: the top-level buffer stayed taken"; exit 99; }
# a trace-cmd -F killed before its end (an earlier run stopped) leaves its
# pid in set_event_pid, and every later trace-cmd then records nothing:
# pids of processes that are gone are cleared, a live one's left alone
stale=$(cat "$TRACING/set_event_pid")
for p in $stale; do
	kill -0 "$p" 2>/dev/null && stale=""
done
if [ -n "$stale" ]; then
	echo "# set_event_pid held pids of processes gone ($stale): cleared"
	: > "$TRACING/set_event_pid"
fi
POKE=$B/tests/tdpoke-static
FEED=$B/tests/tdtcfeed
N=10000

# trace-cmd 3.1.6 wants to write /proc/sys/kernel/ftrace_enabled and open
# the function tracer's files, which a sandbox may refuse: tests/tcshim.c
# sends those opens to /dev/null (on a normal machine it changes nothing).
# trace-cmd also takes the first tracefs of /proc/mounts: another mount of
# it elsewhere is hidden in a private mount namespace.
cc -shared -fPIC -O2 -o "$WORK/shim.so" "$S/tests/tcshim.c" -ldl ||
    { echo "FAIL: cannot build tests/tcshim.c"; exit 99; }
SHIM=$WORK/shim.so
cat > "$WORK/tc.sh" <<EOF
#!/bin/sh
for m in \$(awk '\$3 == "tracefs" && \$2 != "$TRACING" { print \$2 }' /proc/mounts); do
	umount -l "\$m" 2>/dev/null
done
exec env ${SHIM:+LD_PRELOAD=$SHIM} trace-cmd "\$@"
EOF
chmod 755 "$WORK/tc.sh"
# (a trace-cmd that hangs is killed: the test fails, it does not hang)
if awk -v t=$TRACING '$3 == "tracefs" && $2 != t { f = 1 } END { exit !f }' \
    /proc/mounts && command -v unshare >/dev/null; then
	TC="timeout $((120 * SLOW)) unshare -m --propagation private $WORK/tc.sh"
else
	TC="timeout $((120 * SLOW)) $WORK/tc.sh"
fi

# a port for the trace-cmd clients and 200 data ports after it, all free
TPORT=$(free_port 201) || exit 99
DLO=$((TPORT + 1))
DHI=$((TPORT + 200))
OUT=$WORK/out
mkdir -p "$OUT"
LOG=$WORK/listen.log
# 1024 descriptors at most: an address's share is (1024 - 32) / 4 = 248
# (valgrind keeps a few of them), so 130 CPUs over TCP (260) do not fit
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -gt 1024 ] && ulimit -n 1024
start_listener "$LOG" --insecure -d "$OUT" --resume-wait 0 \
    --tracecmd-port $TPORT --tracecmd-data-ports $DLO-$DHI || exit 1
wait_until $((100 * SLOW)) grep -q "listening for trace-cmd clients" "$LOG"
check "tdlisten listens for trace-cmd clients, unauthenticated" \
    grep -q "listening for trace-cmd clients on 127.0.0.1 port $TPORT, data ports $DLO-$DHI (INSECURE" "$LOG"

# count_lines PATTERN: lines of the log that have it
count_lines() {
	grep -c "$1" "$LOG" 2>/dev/null
}
# at_least N PATTERN: the log has N lines with PATTERN
at_least() {
	[ "$(count_lines "$2")" -ge "$1" ]
}
# wrote K: the file of the K-th "wrote" line of the log (waits for it)
wrote() {
	wait_until $((200 * SLOW)) at_least "$1" ": wrote '"
	grep ": wrote '" "$LOG" | sed -n "$1s/.*: wrote '\([^']*\)'.*/\1/p"
}
# file_of FROM: the file the client at 127.0.0.1:FROM made (waits for it)
file_of() {
	wait_until $((200 * SLOW)) grep -q "trace-cmd 127.0.0.1:$1: wrote '" "$LOG"
	sed -n "s/.*trace-cmd 127.0.0.1:$1: wrote '\([^']*\)'.*/\1/p" "$LOG"
}
# from FILE: the port tdtcfeed's output FILE says it came from
from() {
	sed -n 's/^tdtcfeed: from 127.0.0.1:\([0-9]*\)$/\1/p' "$1"
}
# events FILE: the getppid events trace-cmd report finds in FILE
events() {
	trace-cmd report -i "$1" 2>/dev/null | grep -c 'sys_enter_getppid:'
}
# client_line FROM WHAT: the log line of the client at 127.0.0.1:FROM
client_line() {
	grep "trace-cmd 127.0.0.1:$1: $2" "$LOG" | tail -1
}

# ---- TCP: the real trace-cmd record -N -t ----------------------------------
$TC record -N 127.0.0.1:$TPORT -t -e syscalls:sys_enter_getppid -F \
    "$POKE" $N 0 > "$WORK/tc1.out" 2>&1
eq "TCP: trace-cmd record -N -t exits 0" "$?" 0
F1=$(wrote 1)
case $F1 in
"$OUT"/tracecmd-127.0.0.1/*.dat) ok "TCP: the file is DIR/tracecmd-127.0.0.1/<UTC time>.dat" ;;
*) fail "TCP: the file is '$F1'"; sed 's/^/# /' "$LOG" "$WORK/tc1.out" ;;
esac
eq "TCP: exactly N events in the file" "$(events "$F1")" $N
check "TCP: trace-cmd reads the file cleanly" tc_clean "$F1"

# a client that sends empty SEND_DATA every half second and never its
# header: closed after --handshake-timeout (10 s) all the same (checked at
# the end)
"$FEED" -E 127.0.0.1 $TPORT "$F1" > "$WORK/feedE.out" 2>&1 &
EPID=$!

# ---- UDP: trace-cmd's default --------------------------------------------
$TC record -N 127.0.0.1:$TPORT -e syscalls:sys_enter_getppid -F \
    "$POKE" $N 0 > "$WORK/tc2.out" 2>&1
eq "UDP: trace-cmd record -N exits 0" "$?" 0
F2=$(wrote 2)
GOT=$(events "$F2")
if [ "$GOT" = $N ]; then
	ok "UDP: exactly N events in the file (nothing lost)"
elif [ "$GOT" -lt $N ] && grep -q "pages lost on the way" "$LOG"; then
	ok "UDP: $GOT of $N events, the loss counted in the log and the file"
else
	fail "UDP: $GOT of $N events and no loss counted"
fi
check "UDP: trace-cmd reads the file cleanly" tc_clean "$F2"

# ---- while a real client records: a third party, other clients ------------
rm -f "$WORK/go"
RINITS=$(count_lines "data over TCP to ports")
TDPOKE_WAIT=$WORK/go $TC record -N 127.0.0.1:$TPORT -t \
    -e syscalls:sys_enter_getppid -F "$POKE" $N 0 > "$WORK/tc3.out" 2>&1 &
TCPID=$!
wait_until $((400 * SLOW)) at_least $((RINITS + 1)) "data over TCP to ports"
RLINE=$(grep "data over TCP to ports" "$LOG" | sed -n "$((RINITS + 1))p")
REAL=$(echo "$RLINE" | sed 's/.*trace-cmd 127.0.0.1:\([0-9]*\): .*/\1/')
PORTS=$(echo "$RLINE" | sed 's/.* ports \([0-9]*\)-\([0-9]*\) .*/\1 \2/')
set -- $PORTS
LIST=$(seq -s, "$1" "$2")
NCPU=$(($2 - $1 + 1))
"$FEED" -H 127.0.0.2 127.0.0.1 "$LIST" > "$WORK/hijack.out" 2>&1
wait_until $((200 * SLOW)) at_least $NCPU "refused a data connection (not the client's address) from 127.0.0.2"
eq "hijack: every data connection from 127.0.0.2 refused" \
    "$(count_lines "refused a data connection (not the client's address) from 127.0.0.2")" $NCPU

# a whole replay of the first file over TCP, at the same time
"$FEED" 127.0.0.1 $TPORT "$F1" > "$WORK/feed1.out" 2>&1
eq "replay over TCP: tdtcfeed exits 0" "$?" 0
F3=$(file_of "$(from "$WORK/feed1.out")")
eq "replay over TCP: exactly N events" "$(events "$F3")" $N

# ... over UDP: what was kept and what was lost make what was sent
"$FEED" -u 127.0.0.1 $TPORT "$F1" > "$WORK/feed2.out" 2>&1
eq "replay over UDP: tdtcfeed exits 0" "$?" 0
FROM=$(from "$WORK/feed2.out")
SENT=$(sed -n 's/^tdtcfeed: \([0-9]*\) pages sent$/\1/p' "$WORK/feed2.out")
wait_until $((200 * SLOW)) grep -q "trace-cmd 127.0.0.1:$FROM: done after" "$LOG"
KEPT=$(client_line "$FROM" "done after" | sed 's/.* CPUs, \([0-9]*\) pages,.*/\1/')
LOST=$(client_line "$FROM" "[0-9]* pages lost" | sed 's/.*: \([0-9]*\) pages lost.*/\1/')
eq "replay over UDP: pages kept + pages lost = pages sent" \
    "$((KEPT + ${LOST:-0}))" "$SENT"

# ... over UDP with every 4th datagram short, and with two pages out of
# order: counted to the page, in the log and in the file's loss option
for how in -s -r; do
	"$FEED" -u $how 127.0.0.1 $TPORT "$F1" > "$WORK/feed$how.out" 2>&1
	FROM=$(from "$WORK/feed$how.out")
	SENT=$(sed -n 's/^tdtcfeed: \([0-9]*\) pages sent$/\1/p' "$WORK/feed$how.out")
	F=$(file_of "$FROM")
	wait_until $((200 * SLOW)) grep -q "trace-cmd 127.0.0.1:$FROM: done after" "$LOG"
	KEPT=$(client_line "$FROM" "done after" | sed 's/.* CPUs, \([0-9]*\) pages,.*/\1/')
	LOST=$(client_line "$FROM" "[0-9]* pages lost" | sed 's/.*: \([0-9]*\) pages lost.*/\1/')
	case $how in
	-s) WANT=$(sed -n 's/^tdtcfeed: \([0-9]*\) short, .*/\1/p' "$WORK/feed$how.out") ;;
	-r) WANT=$(sed -n 's/^tdtcfeed: .* short, \([0-9]*\) out of order$/\1/p' "$WORK/feed$how.out") ;;
	esac
	[ "${WANT:-0}" -gt 0 ] || fail "replay over UDP $how: tdtcfeed spoiled nothing"
	eq "replay over UDP $how: the pages lost, counted" "${LOST:-0}" $WANT
	eq "replay over UDP $how: pages kept + pages lost = pages sent" \
	    "$((KEPT + ${LOST:-0}))" "$SENT"
	check "replay over UDP $how: the loss is in the file (option 0x746c)" \
	    sh -c "trace-cmd dump --options -i '$F' 2>/dev/null | grep -q '^ *29804 '"
	check "replay over UDP $how: trace-cmd reads the file cleanly" tc_clean "$F"
done

# ... over UDP while the listener is stopped (SIGSTOP): the kernel drops
# what its socket buffers cannot hold, and SO_MEMINFO counts it exactly
rm -f "$WORK/go2"
"$FEED" -u -n 100 -w "$WORK/go2" 127.0.0.1 $TPORT "$F1" > "$WORK/feedn.out" 2>&1 &
FPID=$!
wait_until $((200 * SLOW)) grep -q "^tdtcfeed: from" "$WORK/feedn.out"
FROM=$(from "$WORK/feedn.out")
wait_until $((400 * SLOW)) grep -q "trace-cmd 127.0.0.1:$FROM: trace-cmd header of" "$LOG"
kill -STOP $LPID
touch "$WORK/go2"
wait $FPID
kill -CONT $LPID
SENT=$(sed -n 's/^tdtcfeed: \([0-9]*\) pages sent$/\1/p' "$WORK/feedn.out")
F=$(file_of "$FROM")
wait_until $((200 * SLOW)) grep -q "trace-cmd 127.0.0.1:$FROM: done after" "$LOG"
KEPT=$(client_line "$FROM" "done after" | sed 's/.* CPUs, \([0-9]*\) pages,.*/\1/')
LOST=$(client_line "$FROM" "[0-9]* pages lost" | sed 's/.*: \([0-9]*\) pages lost.*/\1/')
check "UDP to a stopped listener: the socket's drops are counted" \
    grep -q "trace-cmd 127.0.0.1:$FROM: cpu [0-9]*: [0-9]* datagrams lost ([1-9][0-9]* dropped by the socket" "$LOG"
eq "UDP to a stopped listener: pages kept + pages lost = pages sent" \
    "$((KEPT + ${LOST:-0}))" "$SENT"
check "UDP to a stopped listener: trace-cmd reads the file cleanly" tc_clean "$F"

# trace-cmd 3.1.6 reads saved_cmdlines twice (its size, then its bytes):
# a task that comes in between makes the section say one size and hold
# another, and trace-cmd report then shows an empty file without a word.
# The listener puts the size right and says so.
"$FEED" -C 127.0.0.1 $TPORT "$F1" > "$WORK/feedC.out" 2>&1
F=$(file_of "$(from "$WORK/feedC.out")")
check "saved_cmdlines of the wrong size: repaired, and the log says so" \
    grep -q "its saved_cmdlines section says [0-9]* bytes and holds" "$LOG"
eq "saved_cmdlines of the wrong size: exactly N events" "$(events "$F")" $N

# bad clients: each closed with its reason, nothing else disturbed
"$FEED" -g 127.0.0.1 $TPORT "$F1" > "$WORK/feed3.out" 2>&1
wait_until $((200 * SLOW)) grep -q "closing: its metadata is not a trace.dat header" "$LOG"
check "garbage header: closed with its reason" \
    grep -q "closing: its metadata is not a trace.dat header" "$LOG"
"$FEED" -c 3 127.0.0.1 $TPORT "$F1" > "$WORK/feed4.out" 2>&1
wait_until $((200 * SLOW)) grep -q "closing: its metadata says [0-9]* CPUs, its TINIT said 3" "$LOG"
check "a client lying about its CPUs: closed with its reason" \
    grep -q "closing: its metadata says [0-9]* CPUs, its TINIT said 3" "$LOG"
"$FEED" -P 8192 127.0.0.1 $TPORT "$F1" > "$WORK/feed5.out" 2>&1
wait_until $((200 * SLOW)) grep -q "closing: its metadata says 4096-byte pages, its TINIT said 8192" "$LOG"
check "a client lying about its page size: closed with its reason" \
    grep -q "closing: its metadata says 4096-byte pages, its TINIT said 8192" "$LOG"
"$FEED" -c 100000 127.0.0.1 $TPORT "$F1" > "$WORK/feed6.out" 2>&1
wait_until $((200 * SLOW)) grep -q "closing: malformed TINIT" "$LOG"
check "a client claiming 100000 CPUs: refused at TINIT" \
    grep -q "closing: malformed TINIT" "$LOG"
"$FEED" -1 127.0.0.1 $TPORT "$F1" > "$WORK/feed7.out" 2>&1
check "a v1 client: refused, said why" grep -q "old v1 protocol" "$LOG"
"$FEED" -v 127.0.0.1 $TPORT "$F1" > "$WORK/feed8.out" 2>&1
wait_until $((200 * SLOW)) grep -q "went away without CLOSE" "$LOG"
wait_until $((200 * SLOW)) grep -q "kept what was received as" "$LOG"
check "a client vanishing: its recording kept as incomplete with the reason" \
    grep -q "went away without CLOSE" "$LOG"
INC=$(ls "$OUT"/tracecmd-127.0.0.1/*.incomplete.dat 2>/dev/null | head -1)
check "the vanished client's incomplete file reads" tc_clean "$INC"

# a client claiming more CPUs than the descriptors its address may hold:
# refused at TINIT, before a data socket is bound
"$FEED" -c 130 127.0.0.1 $TPORT "$F1" > "$WORK/feed9.out" 2>&1
FROM=$(from "$WORK/feed9.out")
wait_until $((200 * SLOW)) grep -q "127.0.0.1:$FROM: closing:" "$LOG"
check "130 CPUs over TCP (260 descriptors): refused at TINIT, said why" \
    grep -q "127.0.0.1:$FROM: closing: 130 CPUs need 260 file descriptors: past the share of its address" "$LOG"
check "130 CPUs over TCP: no data socket bound" \
    sh -c "! grep -q '127.0.0.1:$FROM: 130 CPUs, .* data over' '$LOG'"
# 64 CPUs of 1 MiB pages: a page buffer a CPU is counted at TINIT (64 MiB,
# past a session's 48 MiB), not when the pages come
"$FEED" -c 64 -P 1048576 127.0.0.1 $TPORT "$F1" > "$WORK/feed10.out" 2>&1
FROM=$(from "$WORK/feed10.out")
wait_until $((200 * SLOW)) grep -q "127.0.0.1:$FROM: closing:" "$LOG"
check "64 CPUs of 1 MiB pages: refused at TINIT, over the session's memory" \
    grep -q "127.0.0.1:$FROM: closing: 64 CPUs of 1048576-byte pages are over the memory budget of a session" "$LOG"
# a header whose kallsyms expands past what trace-cmd headers may hold
# decompressed (64 MiB in all), and one past a session's memory (48 MiB)
"$FEED" -K 65 127.0.0.1 $TPORT "$F1" > "$WORK/feed11.out" 2>&1
FROM=$(from "$WORK/feed11.out")
wait_until $((400 * SLOW)) grep -q "127.0.0.1:$FROM: closing:" "$LOG"
check "a 65 MiB kallsyms: refused, over 64 MiB decompressed" \
    grep -q "127.0.0.1:$FROM: closing: its metadata sections are over 64 MiB decompressed" "$LOG"
"$FEED" -K 50 127.0.0.1 $TPORT "$F1" > "$WORK/feed12.out" 2>&1
FROM=$(from "$WORK/feed12.out")
wait_until $((400 * SLOW)) grep -q "127.0.0.1:$FROM: closing:" "$LOG"
check "a 50 MiB kallsyms: refused, counted in the session's memory" \
    grep -q "127.0.0.1:$FROM: closing: its metadata section [0-9]* ([0-9]* bytes decompressed) is over the memory budget of a session" "$LOG"
# the empty SEND_DATA client is gone, after the deadline (or killed here:
# a failure, not a hang)
FROM=$(from "$WORK/feedE.out")
wait_until $((600 * SLOW)) grep -q "127.0.0.1:$FROM: closing:" "$LOG"
wait_until $((200 * SLOW)) sh -c "! kill -0 $EPID 2>/dev/null"
kill $EPID 2>/dev/null
wait $EPID
eq "empty SEND_DATA: the client was closed (tdtcfeed exits 0)" "$?" 0
check "empty SEND_DATA: closed for no progress, said why" \
    grep -q "127.0.0.1:$FROM: closing: no progress in [0-9]* s (handshake, TINIT or metadata: 0 bytes of metadata so far)" "$LOG"

# now the real client's events
touch "$WORK/go"
wait $TCPID
eq "the real client, through all that: exits 0" "$?" 0
F5=$(file_of "$REAL")
GOT=$(events "$F5")
eq "the real client: exactly N events" "$GOT" $N
[ "$GOT" = $N ] || { grep "$REAL" "$LOG" | sed 's/^/# /'
	sed 's/^/# /' "$WORK/tc3.out"; }
check "the real client: its file reads cleanly" tc_clean "$F5"

stop_listener
check "no .part or .state left" sh -c "! ls '$OUT'/tracecmd-127.0.0.1/ | grep -q '\\.part\$\\|\\.state\$'"
finish
