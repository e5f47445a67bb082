#!/bin/sh
# End-to-end: a virtio-serial port that outlives sessions.  One real guest
# (tests/guest-lib.sh: QEMU in TCG, allowed to reboot) records four times
# over the same port, org.tracedock.0, carried by QEMU's client chardev
# to tdlisten --unix; every session starts with the resynchronisation
# preamble (docs/tdproto.md, "Resynchronisation").  The guest takes its
# orders on a second port, org.tracedock.ctl (a QEMU pipe chardev: the
# test writes a line when the guest asks for one on its console), so each
# step happens at a known point of a recording: every recording is
# tdpoke's A getppid calls, a pause for an order, then B more.
#
#   r1  tdlisten is killed (-9) in the pause and started again on the
#       same socket and directory: the agent reconnects through the
#       preamble and resumes; the file holds exactly A + B calls.
#   r2  the next recording on the same port in the same boot: exact.
#   r3  the guest reboots (reboot -f) in the pause.  The listener's
#       connection from QEMU stays up with r3's TLS session in it until
#       the next boot's agent writes its preamble there: TLS fails, the
#       listener says it was a new session's preamble, r3 waits for a
#       resume (--resume-wait) that never comes, and is kept as
#       .incomplete.dat.
#   r4  the second boot's recording: a new one (no resume), exact; r3's
#       file holds at most A calls, so nothing of r4 went into it.
#
# Judged: exact counts by libtracecmd and trace-cmd, the listener's and
# the agents' words.  Not root: QEMU runs as the user, the guest is root.
. "$(dirname "$0")/e2e-lib.sh"
. "$(dirname "$0")/guest-lib.sh"
# tdpoke's calls before and after each pause, 1 ms apart
A=300
B=200
GUEST=qemu-guest3
guest_need
NR=$NR_GETPPID

P=$WORK/pki
pki "$P" "$GUEST" || { echo "FAIL: cannot make certificates"; exit 99; }

# /init: orders from the control port, one a line, each asked for on the
# console ("td-guest: want"): "rec NAME A B" records (the workload asks
# for the next order after A calls: "reboot", or anything to go on),
# "off" powers off.  The control port is opened for each line only, so
# that the workload can read it too; the test writes a line only when
# asked, so none is lost when the port closes.
R=$WORK/root
guest_root "$R" "$GUEST" || { echo "FAIL: cannot fill the initramfs"; exit 99; }
{
	guest_init_head
	cat <<EOF
dev=\$(td_port org.tracedock.0)
ctl=\$(td_port org.tracedock.ctl)
echo "td-guest: ports \$dev \$ctl"
order() {
	echo "td-guest: want"
	read -r cmd name a b < \$ctl
}
cat > /bin/work <<'EOW'
#!/bin/sh
tdpoke \$1 1000
echo "td-guest: want" > /dev/console
read -r go < \$3
echo "td-guest: go \$go" > /dev/console
[ "\$go" = reboot ] && reboot -f
tdpoke \$2 1000
EOW
chmod 755 /bin/work
while order; do
	case \$cmd in
	rec)
		tdagent -v -h serial:\$dev --server-name "\$tdserver" \\
		    --cert /pki/$GUEST.pem --key /pki/$GUEST.key \\
		    --ca /pki/ca.pem --name \$name -e raw_syscalls:sys_enter \\
		    -f "id == \$tdnr" -- work \$a \$b \$ctl 2> /tmp/\$name.err
		echo "td-guest: \$name rc \$?"
		sed "s/^/td-guest: \$name: /" /tmp/\$name.err
		;;
	off)
		poweroff -f
		;;
	esac
done
EOF
} > "$R/init"
guest_initrd "$R" || { echo "FAIL: cannot make the initramfs"; exit 99; }

# the guest's console so far, without CRs
con() {
	tr -d '\r' < "$WORK/console" > "$WORK/console.txt" 2>/dev/null
}
# con_has PATTERN: the console has a line that matches (or QEMU ended)
con_has() {
	con
	grep -q "$1" "$WORK/console.txt" || ! kill -0 $QPID 2>/dev/null
}
# ask: until the guest asks for its next order (the Nth); tell LINE:
# write it; say LINE: both
said=0
wants() {
	con
	[ "$(grep -c '^td-guest: want$' "$WORK/console.txt")" -ge "$said" ] ||
	    ! kill -0 $QPID 2>/dev/null
}
ask() {
	said=$((said + 1))
	wait_until $((2400 * SLOW)) wants
}
tell() {
	kill -0 $QPID 2>/dev/null && echo "$1" > "$WORK/ctl.in"
}
say() {
	ask
	tell "$1"
}
# rec_done NAME: until the guest says NAME's tdagent ended
rec_done() {
	wait_until $((2400 * SLOW)) con_has "^td-guest: $1 rc "
}
# file_of NAME: the file tdagent NAME reported, from the console
file_of() {
	grep "^td-guest: $1: " "$WORK/console.txt" > "$WORK/$1.err"
	rel=$(remote_file "$WORK/$1.err")
	[ -n "$rel" ] && echo "$OUT/$rel"
}
# calls FILE: tdpoke's getppid calls in FILE (trace-cmd report)
calls() {
	trace-cmd report -i "$1" 2>/dev/null | awk -v nr="$NR" \
	    '/sys_enter:/ && $0 ~ "NR " nr " " && $1 ~ /^tdpoke-/ { n++ }
	    END { print n + 0 }'
}
# exact NAME: NAME's file holds A + B calls of tdpoke, nothing lost
exact() {
	f=$(file_of "$1")
	eq "$1: tdagent exits 0" "$(sed -n "s/^td-guest: $1 rc //p" \
	    "$WORK/console.txt")" 0
	check "$1: the file is under the guest's name" \
	    sh -c "test -f '$f' && test '$(dirname "$f")' = '$OUT/$GUEST'"
	check "$1: trace-cmd reads it cleanly" tc_clean "$f"
	eq "$1: exactly A + B getppid calls of tdpoke" "$(calls "$f")" \
	    $((A + B))
	"$TDCOUNT" "$f" > "$WORK/c" 2>&1
	eq "$1: no event lost" "$(field missed < "$WORK/c")" 0
	# the shells of the workload make getppid calls too (ash's PPID)
	others=$(($(field events < "$WORK/c") - A - B))
}
# opened LOG NAME: the listener logging to LOG opened recording NAME
opened() {
	grep -q "'$2' (.*: recording [0-9]* CPUs" "$1"
}

OUT=$WORK/out
SOCK=$WORK/guests.sock
# the boot outlasts the handshake timeout otherwise (QEMU connects at its
# start); --resume-wait: how long r3 waits for a resume before it is kept
# as .incomplete.dat (the test waits for it), and how long the restarted
# listener keeps r1 for its agent (back within seconds, valgrind or not)
LARGS="-d $OUT --cert $P/listener.pem --key $P/listener.key --ca $P/ca.pem
--unix $SOCK --handshake-timeout $((120 * SLOW)) --resume-wait 20"
# shellcheck disable=SC2086
start_listener "$WORK/l1.log" $LARGS || exit 99
mkfifo "$WORK/ctl.in" "$WORK/ctl.out" ||
    { echo "FAIL: cannot make the control pipes"; exit 99; }
GUEST_REBOOT=1 guest_start "$WORK/qemu.out" "tdserver=listener tdnr=$NR" \
    -chardev socket,id=td0,path="$SOCK",reconnect=1 \
    -device virtserialport,chardev=td0,name=org.tracedock.0 \
    -chardev pipe,id=ctl,path="$WORK/ctl" \
    -device virtserialport,chardev=ctl,name=org.tracedock.ctl

# r1: in the pause, once the listener has a checkpoint of it, tdlisten is
# killed and started again; the guest goes on once it resumed
say "rec r1 $A $B"
ask
wait_until $((2400 * SLOW)) sh -c "ls '$OUT/$GUEST'/*.dat.state >/dev/null 2>&1"
kill -9 "$LPID"
wait "$LPID" 2>/dev/null
check "r1: the listener was killed with a checkpoint on disk" \
    sh -c "ls '$OUT/$GUEST'/*.dat.state >/dev/null 2>&1"
# shellcheck disable=SC2086
LPORT_FIXED=$LPORT start_listener "$WORK/l2.log" $LARGS || exit 99
unset LPORT_FIXED	# sh keeps an assignment made for a function call
wait_until $((2400 * SLOW)) grep -q "resumed at offset" "$WORK/l2.log"
tell go
rec_done r1

# r2: the next recording on the port, in the same boot
say "rec r2 $A $B"
say go
rec_done r2

# r3: the guest reboots in the pause, once the listener has r3's
# headers whole and a checkpoint of it (what is kept of it is then a
# readable file, however slowly the headers came through)
say "rec r3 $A $B"
ask
r3_kept() {
	ls "$OUT/$GUEST"/*-r3.dat.state >/dev/null 2>&1 ||
	    con_has "^td-guest: r3 rc "
}
wait_until $((2400 * SLOW)) r3_kept
check "r3: the listener has a checkpoint of it before the reboot" \
    sh -c "ls '$OUT/$GUEST'/*-r3.dat.state >/dev/null 2>&1"
tell reboot

# r4: the second boot's recording, then off
say "rec r4 $A $B"
say go
rec_done r4
say off
if guest_wait 1200; then
	wait $QPID
	eq "QEMU ends by itself, exit 0" $? 0
else
	fail "the guest powers off"
	kill $QPID
	wait $QPID
fi
# r3 is kept once nobody resumed it for --resume-wait
wait_until $((2400 * SLOW)) grep -q "'r3' .*kept what was received as" \
    "$WORK/l2.log"
echo "# QEMU start to the end: $(since "$(date +%s.%N)")"
[ -s "$WORK/qemu.out" ] && sed 's/^/# qemu: /' "$WORK/qemu.out"
con
if ! grep -q "^td-guest: r4 rc 0$" "$WORK/console.txt"; then
	echo "# ---- guest console"
	sed 's/^/# /' "$WORK/console.txt"
fi
# what the agents' preambles met
sed -n 's/^td-guest: \(r[0-9]\): .*\(connected to .*\)$/# \1: \2/p' \
    "$WORK/console.txt"
sed 's/^/# l1: /' "$WORK/l1.log"
sed 's/^/# l2: /' "$WORK/l2.log"

exact r1
check "r1: the restarted listener recovered it" \
    grep -q "recovered '" "$WORK/l2.log"
check "r1: and the agent resumed it there" \
    grep -q "'r1' .*resumed at offset" "$WORK/l2.log"
check "r1: the agent reconnected through the preamble" \
    grep -q "^td-guest: r1: .*reconnected to serial device .*(resynchronised: " \
    "$WORK/console.txt"
exact r2
check "r2: a new recording on the port" opened "$WORK/l2.log" r2
echo "# getppid calls of a recording besides tdpoke's: $others"
check "the guest rebooted" grep -q "^td-guest: go reboot$" "$WORK/console.txt"
check "the guest booted twice" \
    test "$(grep -c "^td-guest: ports " "$WORK/console.txt")" = 2
exact r4
check "r4: a new recording (not a resume)" opened "$WORK/l2.log" r4
check "r4: not resumed" sh -c "! grep -q \"'r4' .*resumed\" '$WORK/l2.log'"
check "r3: its session ended with the reason, waiting for a resume" \
    grep -q "'r3' .*: a new session's resynchronisation preamble came in the middle of this one: the agent started over .*; the recording waits [0-9]* s for the agent to resume" \
    "$WORK/l2.log"
sed -n "s/^.*'r3' ([^)]*): \(.*\); the recording waits.*$/# r3 ended: \1/p" \
    "$WORK/l2.log"
inc=$(sed -n "s/^.*'r3' .*kept what was received as '\(.*\)'$/\1/p" \
    "$WORK/l2.log")
check "r3: kept as .incomplete.dat ($inc)" \
    sh -c "test -f '$inc' && case '$inc' in *.incomplete.dat) ;; *) exit 1;; esac"
check "r3: trace-cmd reads it cleanly" tc_clean "$inc"
# cut short, it has no process names (they come at the end): all its
# getppid calls, at most the first half's of a recording, none of r4's
"$TDCOUNT" "$inc" > "$WORK/c" 2>&1
n3=$(field events < "$WORK/c")
check "r3: at most A + $others calls, nothing of r4 ($n3)" \
    test "${n3:-999999}" -le $((A + others))
check "every session on the Unix socket began with a preamble" \
    test "$(cat "$WORK/l1.log" "$WORK/l2.log" | grep -c ": resynchronised: ")" -ge 5
check "no state or checkpoint left behind" \
    sh -c "! ls '$OUT/$GUEST'/*.state '$OUT/$GUEST'/*.part 2>/dev/null | grep -q ."
check "the listener survived" kill -0 "$LPID"
stop_listener
finish
