#!/bin/sh
# End-to-end: several collectors (tdagent -h A,B,C) and listeners that
# share an output directory.  The workload is tests/tdpoke's getppid()
# calls (-f "id == getppid"): each is a sys_enter and a sys_exit, so a
# file holds exactly 2 N events of tdpoke-static, counted in trace-cmd
# report.
#   1. -h DEAD,LIVE: the first is a closed port, the second takes the
#      recording; the agent's log names it.
#   2. -h A,B where A says "come back later" (its open files limit leaves
#      no descriptors for a recording): B takes it.
#   3. stickiness: A takes the recording of -h A,B; A is killed -9 during
#      it and restarted on its port and directory: the agent resumes on A
#      (which recovered the recording), never on B; the file is exact.
#   4. two listeners on one -d: the second cannot take over (recover) the
#      recording the first holds (its .part is locked); the first finishes
#      it exactly.
# Usage errors (an empty collector, too many) exit 2; every collector
# unreachable exits 1 with each one's reason.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
# never sanitized: an ASan runtime makes getppid calls of its own
TDPOKE=$B/tests/tdpoke-static
[ -x "$TDPOKE" ] || { echo "FAIL: no $TDPOKE (make check builds it)"; exit 99; }
NR_GETPPID=$(printf '#include <sys/syscall.h>\nSYS_getppid\n' | cpp -P - |
    tail -1 | grep -x '[0-9][0-9]*') || skip "cannot find getppid's number (cpp)"
P=$WORK/pki
pki "$P" web1 || { echo "FAIL: cannot make certificates"; exit 99; }
LTLS="--cert $P/listener.pem --key $P/listener.key --ca $P/ca.pem"
ATLS="--cert $P/web1.pem --key $P/web1.key --ca $P/ca.pem"
# nothing listens on port 1 of loopback (tcpmux, never served here)
DEAD=127.0.0.1:1

# agent NAME HOSTS CMD...: record CMD's getppid calls to the collectors
# HOSTS, in the background (sets APID); its stderr in $WORK/agent.NAME.err
agent() {
	name=$1 hosts=$2
	shift 2
	# shellcheck disable=SC2086
	"$TDAGENT" -h "$hosts" $ATLS --name "$name" -e raw_syscalls \
	    -f "id == $NR_GETPPID" -F -b 4096 -- "$@" \
	    2> "$WORK/agent.$name.err" &
	APID=$!
}

# exact NAME DIR N: the file the agent NAME reported, under DIR, holds
# exactly N getppid calls of tdpoke (2 N events), nothing lost
exact() {
	f=$2/$(remote_file "$WORK/agent.$1.err")
	check "$1: the listener wrote a file" test -f "$f"
	check "$1: trace-cmd reads it cleanly" tc_clean "$f"
	eq "$1: exactly the workload's events" "$(awk -v nr="$NR_GETPPID" \
	    '/ tdpoke-static-[0-9]+ / && $0 ~ "NR " nr " " { n++ } END { print n + 0 }' \
	    "$WORK/report.out")" $((2 * $3))
	"$TDCOUNT" "$f" > "$WORK/count.$1" 2>&1
	eq "$1: no event marked lost" "$(field missed < "$WORK/count.$1")" 0
}

# files DIR: how many recordings (finished or not) DIR holds
files() {
	find "$1" -name '*.dat*' 2>/dev/null | wc -l
}

# ---- usage errors --------------------------------------------------------
"$TDAGENT" -h "127.0.0.1,,127.0.0.2" --insecure -o "$WORK/u.dat" -- true \
    2> "$WORK/u1.err"
eq "an empty collector: exit 2" $? 2
check "an empty collector: said so" \
    grep -q "^tdagent: -h 127.0.0.1,,127.0.0.2: an empty collector in the list (item 2)$" "$WORK/u1.err"
"$TDAGENT" -h "a,b,c,d,e,f,g,h,i" --insecure -o "$WORK/u.dat" -- true \
    2> "$WORK/u2.err"
eq "nine collectors: exit 2" $? 2
check "nine collectors: said so" \
    grep -q "^tdagent: -h a,b,c,d,e,f,g,h,i: more than 8 collectors$" "$WORK/u2.err"
"$TDAGENT" -h "127.0.0.1:0" --insecure -o "$WORK/u.dat" -- true \
    2> "$WORK/u3.err"
eq "a bad port of its own: exit 2" $? 2
check "a bad port of its own: said so" \
    grep -q "bad port '0' in '127.0.0.1:0'" "$WORK/u3.err"

# ---- every collector unreachable -----------------------------------------
"$TDAGENT" -h "$DEAD,127.0.0.1:2" $ATLS -e raw_syscalls -- true \
    2> "$WORK/agent.dead.err"
eq "no collector reachable: exit 1" $? 1
check "no collector reachable: every one's reason" \
    grep -q "no collector took the recording: '127.0.0.1' port 1: cannot connect to '127.0.0.1' port 1: Connection refused; '127.0.0.1' port 2: cannot connect to '127.0.0.1' port 2: Connection refused" \
    "$WORK/agent.dead.err"

# ---- 1. a dead collector, then a live one --------------------------------
start_listener "$WORK/l1.log" -d "$WORK/out1" $LTLS || exit 99
agent dead_live "$DEAD,127.0.0.1:$LPORT" "$TDPOKE" 1000 100
wait "$APID"
eq "1: tdagent exits 0" $? 0
check "1: the dead collector was passed over" \
    grep -q "collector '127.0.0.1' port 1: cannot connect .*Connection refused" \
    "$WORK/agent.dead_live.err"
check "1: the log names the second as the one that took it" \
    grep -q "connected to '127.0.0.1' port $LPORT as 'web1' (collector 2 of 2: it keeps the recording)" \
    "$WORK/agent.dead_live.err"
check "1: the summary names it too" \
    grep -q "the listener wrote '.*' (.* MB sent to '127.0.0.1' port $LPORT)" \
    "$WORK/agent.dead_live.err"
exact dead_live "$WORK/out1" 1000
stop_listener

# ---- 2. "come back later", then the next --------------------------------
# A's open files limit (hard too) leaves a recording no descriptors:
# (44 - 32 kept) / 4 for one identity is less than the 4 of even a 1-CPU
# recording; under valgrind (which keeps some) the whole limit runs short
cat > "$WORK/nofile" <<EOF
#!/bin/sh
ulimit -n 44 || exit 1
exec "$TDLISTEN" "\$@"
EOF
chmod 755 "$WORK/nofile"
REAL_TDLISTEN=$TDLISTEN
TDLISTEN=$WORK/nofile
start_listener "$WORK/l2a.log" -d "$WORK/out2a" $LTLS || exit 99
TDLISTEN=$REAL_TDLISTEN
PA=$LPORT APID_A=$LPID
start_listener "$WORK/l2b.log" -d "$WORK/out2b" $LTLS || exit 99
PB=$LPORT
agent later "127.0.0.1:$PA,127.0.0.1:$PB" "$TDPOKE" 1000 100
wait "$APID"
eq "2: tdagent exits 0" $? 0
check "2: A said come back later" \
    grep -q "collector '127.0.0.1' port $PA: the listener refused: .*come back later" \
    "$WORK/agent.later.err"
check "2: A refused the recording for lack of descriptors" \
    grep -q "session web1 'later' .*closing: .*file descriptors: come back later" \
    "$WORK/l2a.log"
check "2: B took it" \
    grep -q "connected to '127.0.0.1' port $PB as 'web1' (collector 2 of 2" \
    "$WORK/agent.later.err"
exact later "$WORK/out2b" 1000
eq "2: A has no file" "$(files "$WORK/out2a")" 0
stop_listener
LPID=$APID_A
stop_listener

# ---- 3. the collector that took it keeps it -----------------------------
start_listener "$WORK/l3b.log" -d "$WORK/out3b" $LTLS || exit 99
PB=$LPORT LPID_B=$LPID
start_listener "$WORK/l3a.log" -d "$WORK/out3a" $LTLS || exit 99
PA=$LPORT
# 500 calls, then 500 more once the test says go (A restarted)
# (not exec'd from the shell: report names a pid's events after its last
# command, and the shell's own getppid would count as tdpoke's)
agent sticky "127.0.0.1:$PA,127.0.0.1:$PB" sh -c \
    "'$TDPOKE' 500 100 && TDPOKE_WAIT='$WORK/go3' '$TDPOKE' 500 100"
wait_session "$WORK/l3a.log"
wait_until $((400 * SLOW)) sh -c "ls '$WORK'/out3a/web1/*.dat.state >/dev/null 2>&1"
# the agent says so once its header sections are framed (after WELCOME
# and, with the header cache, SECTION_HAVE): later than the listener's file
wait_until $((400 * SLOW)) grep -q "connected to '127.0.0.1' port $PA" \
    "$WORK/agent.sticky.err"
check "3: A took the recording" \
    grep -q "connected to '127.0.0.1' port $PA as 'web1' (collector 1 of 2" \
    "$WORK/agent.sticky.err"
kill -9 "$LPID"
wait "$LPID" 2>/dev/null
wait_until $((400 * SLOW)) grep -q "reconnecting, the recording goes on" \
    "$WORK/agent.sticky.err"
check "3: the agent lost A and reconnects" \
    grep -q "reconnecting, the recording goes on" "$WORK/agent.sticky.err"
LPORT_FIXED=$PA start_listener "$WORK/l3a2.log" -d "$WORK/out3a" $LTLS ||
    exit 99
unset LPORT_FIXED	# sh keeps an assignment made for a function call
wait_until $((400 * SLOW)) grep -q "reconnected to" "$WORK/agent.sticky.err"
touch "$WORK/go3"
wait "$APID"
eq "3: tdagent exits 0" $? 0
check "3: the restarted A recovered the recording" \
    grep -q "recovered '" "$WORK/l3a2.log"
check "3: the agent resumed on A" \
    grep -q "reconnected to '127.0.0.1' port $PA: resuming" \
    "$WORK/agent.sticky.err"
check "3: A resumed it" grep -q "resumed at offset" "$WORK/l3a2.log"
exact sticky "$WORK/out3a" 1000
check "3: B never saw the agent" sh -c "! grep -q 'session' '$WORK/l3b.log'"
eq "3: B has no file" "$(files "$WORK/out3b")" 0
stop_listener
LPID=$LPID_B
stop_listener

# ---- 4. two listeners, one directory -------------------------------------
start_listener "$WORK/l4a.log" -d "$WORK/out4" $LTLS || exit 99
PA=$LPORT LPID_A=$LPID
agent shared "127.0.0.1:$PA" env TDPOKE_WAIT="$WORK/go4" "$TDPOKE" 1000 100
wait_session "$WORK/l4a.log"
wait_until $((400 * SLOW)) sh -c "ls '$WORK'/out4/web1/*.dat.state >/dev/null 2>&1"
st=$(ls "$WORK"/out4/web1/*.dat.state 2>/dev/null)
start_listener "$WORK/l4b.log" -d "$WORK/out4" $LTLS || exit 99
# it looks at the directory once it listens (under valgrind: later)
wait_until $((400 * SLOW)) grep -q "recover" "$WORK/l4b.log"
check "4: the second listener does not take the recording the first holds" \
    grep -q "'$st': another tdlisten holds this recording (its .part is locked): not recovered" \
    "$WORK/l4b.log"
check "4: nor does it recover it" sh -c "! grep -q \"recovered '\" '$WORK/l4b.log'"
stop_listener
touch "$WORK/go4"
LPID=$LPID_A
wait "$APID"
eq "4: tdagent exits 0" $? 0
exact shared "$WORK/out4" 1000
check "4: no checkpoint left behind" sh -c \
    "! ls '$WORK'/out4/*/*.part '$WORK'/out4/*/*.state* 2>/dev/null | grep -q ."
stop_listener
finish
