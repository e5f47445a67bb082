#!/bin/sh
# End-to-end: a virtual machine and its host traced together.  A real
# guest (tests/guest-lib.sh: QEMU in TCG, named with -name
# NAME,debug-threads=on, one vCPU of two possible) records N getppid()
# calls of tdpoke, each followed by a write of one byte to a second
# virtio-serial port, and streams them over its first port to tdlisten
# --unix.  At the same time the host's tdagent --guest NAME:QEMUPID
# records tdsink, which reads the second port's bytes from QEMU's socket
# and makes one getppid() per byte: every guest write causes a host
# event.  A vCPU is plugged into the running guest (QMP device_add), so
# the host agent must read the vCPU threads again.  A second host agent
# asks QEMU's monitor (--guest NAME:qmp:SOCKET) for the same threads.
#
# Checked: exact counts on both sides (N writes and N getppid in the
# guest's file, N getppid of tdsink in the host's); the listener pairs the
# two recordings and says so; the host file's GUEST option names the
# guest, the guest file's TRACEID and QEMU's vCPU -> thread map as QMP
# query-cpus-fast and /proc/QEMUPID/task/*/comm give it, after the plug;
# the guest file's TIME_SHIFT names the host file's TRACEID; both agents
# say what they found; trace-cmd report -i host.dat -i guest.dat reads
# both cleanly, and in it every guest write comes before the host
# getppid it caused, or after it by no more than the two files' stored
# error bounds together.  Needs root (the host's tracefs) besides what
# e2e-guest.sh needs, and perl (Debian's perl-base) to ask QMP.
. "$(dirname "$0")/e2e-lib.sh"
. "$(dirname "$0")/guest-lib.sh"
need_tracefs
# the guest's occurrences, 2 ms apart (about 1 s under TCG)
N=300
GUEST=qemu-guest2
HOST=hv1
TDSINK=$B/tests/tdsink
[ -x "$TDSINK" ] || { echo "FAIL: no $TDSINK (make check builds it)"; exit 99; }
perl -MIO::Socket::UNIX -e 1 2>/dev/null ||
    skip "perl with IO::Socket::UNIX is not installed (perl-base)"
guest_need

P=$WORK/pki
pki "$P" "$GUEST" "$HOST" || { echo "FAIL: cannot make certificates"; exit 99; }

# The guest's /init: tdpoke's getppid calls and writes (tdn: their count,
# tdnr and tdnw: the calls' numbers), recorded over org.tracedock.0, the
# writes to org.tracedock.poke
R=$WORK/root
guest_root "$R" "$GUEST" || { echo "FAIL: cannot fill the initramfs"; exit 99; }
{
	guest_init_head
	cat <<EOF
dev=\$(td_port org.tracedock.0)
poke=\$(td_port org.tracedock.poke)
echo "td-guest: ports \$dev \$poke"
tdagent -v -h serial:\$dev --server-name "\$tdserver" --cert /pki/$GUEST.pem \\
    --key /pki/$GUEST.key --ca /pki/ca.pem -e raw_syscalls:sys_enter \\
    -f "id == \$tdnr || id == \$tdnw" -F -- tdpoke "\$tdn" 2000 1 "\$poke"
echo "td-guest: tdagent rc \$?"
poweroff -f
EOF
} > "$R/init"
guest_initrd "$R" || { echo "FAIL: cannot make the initramfs"; exit 99; }

# qmp SOCKET COMMAND...: send QMP commands, print each answer's line
cat > "$WORK/qmp.pl" <<'EOF'
use IO::Socket::UNIX;
my $s = IO::Socket::UNIX->new(Peer => shift @ARGV) or die "qmp: $!\n";
my $line = <$s>;
for my $cmd ('{"execute": "qmp_capabilities"}', @ARGV) {
	print $s "$cmd\r\n";
	while (defined($line = <$s>)) {
		last unless $line =~ /^\{"(timestamp|event)"/;
	}
	print $line;
}
EOF
qmp() {
	perl "$WORK/qmp.pl" "$@"
}
# qmp_map: "vCPU:thread ..." by vCPU, from QMP query-cpus-fast
qmp_map() {
	qmp "$WORK/qmp.sock" '{"execute": "query-cpus-fast"}' | tail -1 |
	    sed 's/"props": {[^}]*}//g' | tr '{' '\n' |
	    sed -n 's/.*"thread-id": \([0-9]*\).*"cpu-index": \([0-9]*\).*/\2:\1/p' |
	    sort -n | tr '\n' ' ' | sed 's/ $//'
}
# proc_map: the same from the names of QEMU's threads
proc_map() {
	for t in /proc/$QPID/task/*; do
		sed -n "s|^CPU \([0-9]*\)/.*|\1:${t##*/}|p" "$t/comm"
	done | sort -n | tr '\n' ' ' | sed 's/ $//'
}

SOCK=$WORK/guests.sock
# --guest: the listener's configuration authorises the pair (an agent's
# --guest alone pairs nothing: issue 31, row 2)
start_listener "$WORK/l.log" -d "$WORK/out" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --unix "$SOCK" \
    --guest "$HOST:$GUEST" \
    --handshake-timeout $((120 * SLOW)) --tsync-interval 250 || exit 99

GUEST_SMP=1,maxcpus=2 guest_start "$WORK/qemu.out" \
    "tdn=$N tdnr=$NR_GETPPID tdnw=$NR_WRITE tdserver=listener" \
    -name "$GUEST,debug-threads=on" \
    -qmp "unix:$WORK/qmp.sock,server=on,wait=off" \
    -qmp "unix:$WORK/qmp-agent.sock,server=on,wait=off" \
    -chardev socket,id=td0,path="$SOCK",reconnect=1 \
    -device virtserialport,chardev=td0,name=org.tracedock.0 \
    -chardev socket,id=td1,path="$WORK/poke.sock",server=on,wait=off \
    -device virtserialport,chardev=td1,name=org.tracedock.poke
# vcpus N: QEMU runs N vCPU threads
vcpus() {
	[ "$(proc_map | wc -w)" = "$1" ]
}
wait_until $((200 * SLOW)) test -S "$WORK/poke.sock" -a -S "$WORK/qmp.sock"
wait_until $((200 * SLOW)) vcpus 1
eq "QEMU starts with one vCPU" "$(proc_map | wc -w)" 1

# the host: tdsink's getppid calls, with the guest's vCPU threads
"$TDAGENT" -v -h 127.0.0.1 -p "$LPORT" --cert "$P/$HOST.pem" \
    --key "$P/$HOST.key" --ca "$P/ca.pem" --name host \
    --guest "$GUEST:$QPID" -e raw_syscalls:sys_enter \
    -f "id == $NR_GETPPID" -F -- "$TDSINK" "$WORK/poke.sock" $N \
    > "$WORK/host.log" 2>&1 &
HPID=$!
wait_session "$WORK/l.log" 1
check "the host agent names the guest's vCPU thread" \
    grep -q "guest '$GUEST' (QEMU pid $QPID): 1 vCPUs, vCPU:thread $(proc_map)\$" \
    "$WORK/host.log"

# a second vCPU: a second thread, CPU 1/TCG
qmp "$WORK/qmp.sock" '{"execute": "device_add", "arguments": {"driver":
    "qemu64-x86_64-cpu", "id": "cpu1", "socket-id": 0, "core-id": 1,
    "thread-id": 0}}' > "$WORK/plug.out" 2>&1
check "QEMU plugs a second vCPU in" grep -q '"return"' "$WORK/plug.out"
map=$(qmp_map)
eq "QMP query-cpus-fast and the threads' names agree" "$map" "$(proc_map)"
eq "two vCPUs now" "$(echo "$map" | wc -w)" 2
wait_until $((100 * SLOW)) grep -q "guest '$GUEST' (QEMU pid $QPID): 2 vCPUs" \
    "$WORK/host.log"
check "the host agent reads the vCPU threads again ($map)" \
    grep -q "guest '$GUEST' (QEMU pid $QPID): 2 vCPUs, vCPU:thread $map\$" \
    "$WORK/host.log"

# the same threads from QEMU's monitor, by a short second host recording
"$TDAGENT" -v -h 127.0.0.1 -p "$LPORT" --cert "$P/$HOST.pem" \
    --key "$P/$HOST.key" --ca "$P/ca.pem" --name qmp \
    --guest "$GUEST:qmp:$WORK/qmp-agent.sock" -e raw_syscalls:sys_enter \
    -f "id == $NR_GETPPID" -F -- true > "$WORK/qmp-agent.log" 2>&1
eq "tdagent --guest NAME:qmp:SOCKET exits 0" $? 0
check "it finds QEMU's pid and the same threads through QMP" \
    grep -q "guest '$GUEST' (QEMU pid $QPID): 2 vCPUs, vCPU:thread $map\$" \
    "$WORK/qmp-agent.log"

if guest_wait 1200; then
	wait $QPID
	eq "QEMU ends by itself, exit 0" $? 0
else
	fail "the guest powers off within $((120 * SLOW)) s"
	kill $QPID
	wait $QPID
fi
[ -s "$WORK/qemu.out" ] && sed 's/^/# qemu: /' "$WORK/qemu.out"
echo "# QEMU start to its end: $(since "$(date +%s.%N)")"
wait $HPID
eq "the host agent exits 0 (tdsink took N bytes)" $? 0
guest_console
con=$WORK/console.txt
eq "tdagent-static exits 0 in the guest" \
    "$(sed -n 's/^td-guest: tdagent rc //p' "$con")" 0
# three recordings: the host's, the monitor's, the guest's
wait_until $((200 * SLOW)) test "$(grep -c ": wrote '" "$WORK/l.log")" -ge 3
check "the listener survived" kill -0 "$LPID"
stop_listener
if [ $FAILS != 0 ]; then
	echo "# ---- guest console"
	sed 's/^/# /' "$con"
	echo "# ---- host agent"
	sed 's/^/# /' "$WORK/host.log"
fi

hf=$WORK/out/$(remote_file "$WORK/host.log")
gf=$WORK/out/$(remote_file "$con")
check "the host's file is under its name ($hf)" \
    test -f "$hf" -a "$(basename "$(dirname "$hf")")" = "$HOST"
check "the guest's file is under its name ($gf)" \
    test -f "$gf" -a "$(basename "$(dirname "$gf")")" = "$GUEST"
sed -n "s/^tdlisten: \(.*: paired with .*\)$/# \1/p;
    s/^tdlisten: \(.*: GUEST option: .*\)$/# \1/p;
    s/^tdlisten: \(.*: TIME_SHIFT against .*\)$/# \1/p" "$WORK/l.log"
check "the listener pairs the host's recording with the guest's" \
    grep -q "session $HOST 'host' (.*): paired with guest '$GUEST', its recording" \
    "$WORK/l.log"
check "... and says so for the guest's" \
    grep -q "session $GUEST (unix:$QPID): paired with the recording [0-9a-f]* of its host '$HOST'" \
    "$WORK/l.log"
check "the monitor's recording had no guest recording to pair with" \
    grep -q "session $HOST 'qmp' (.*): guest '$GUEST' had no recording here" \
    "$WORK/l.log"

# exact counts
cp "$hf" "$WORK/host.dat" && cp "$gf" "$WORK/guest.dat"
cd "$WORK" || exit 99
check "trace-cmd reads the guest's file cleanly" tc_clean guest.dat
eq "N writes of tdpoke in the guest" "$(awk -v nr="$NR_WRITE" \
    '/ tdpoke-[0-9]+ / && $0 ~ "NR " nr " " { n++ } END { print n + 0 }' \
    report.out)" $N
eq "N getppid of tdpoke in the guest" "$(awk -v nr="$NR_GETPPID" \
    '/ tdpoke-[0-9]+ / && $0 ~ "NR " nr " " { n++ } END { print n + 0 }' \
    report.out)" $N
"$TDCOUNT" guest.dat > c 2>&1
eq "and nothing else, nothing lost: events" "$(field events < c)" $((2 * N))
eq "missed" "$(field missed < c)" 0
check "trace-cmd reads the host's file cleanly" tc_clean host.dat
eq "N getppid of tdsink on the host" "$(awk -v nr="$NR_GETPPID" \
    '/ tdsink-[0-9]+ / && $0 ~ "NR " nr " " { n++ } END { print n + 0 }' \
    report.out)" $N
"$TDCOUNT" host.dat > c 2>&1
eq "and nothing else, nothing lost: events" "$(field events < c)" $N
eq "missed" "$(field missed < c)" 0

# the options that make the pair
trace-cmd dump --options -i host.dat > host.opt 2>&1
trace-cmd dump --options -i guest.dat > guest.opt 2>&1
traceid() {
	awk '/\[Option TRACEID, / { getline; print; exit }' "$1"
}
htid=$(traceid host.opt)
gtid=$(traceid guest.opt)
guest_opt=$(awk '/\[Option GUEST, / { g = 1; next }
    g && /\[Option / { exit } g' host.opt)
echo "$guest_opt" | sed 's/^/# GUEST: /'
eq "one GUEST option in the host's file" \
    "$(grep -c '\[Option GUEST, ' host.opt)" 1
eq "it names the guest" "$(echo "$guest_opt" |
    sed -n 's/ \[Guest name\]$//p')" "$GUEST"
check "both files have a TRACEID ($htid, $gtid)" \
    test -n "$htid" -a -n "$gtid" -a "$htid" != "$gtid"
eq "the GUEST option's trace id is the guest file's TRACEID" \
    "$(echo "$guest_opt" | sed -n 's/ \[trace id\]$//p')" "$gtid"
eq "its vCPU -> thread map is QMP's" "$(echo "$guest_opt" |
    sed -n 's/^ *\([0-9]*\) \([0-9-]*\) \[guest cpu, host pid\]$/\1:\2/p' |
    tr '\n' ' ' | sed 's/ $//')" "$map"
eq "the guest's TIME_SHIFT names the host file's TRACEID" \
    "$(awk '/\[Option TimeShift, / { getline; print $1; exit }' guest.opt)" \
    "$htid"

# causality on the merged timeline
trace-cmd report -t -i host.dat -i guest.dat > merged 2> merged.err
check "trace-cmd report -i host.dat -i guest.dat reads both cleanly" \
    test ! -s merged.err -a -s merged
# the error bounds the listener stored, in ns
bound() {
	sed -n "s/^.*session $1 .*: time sync: .*error bound +-\([0-9]*\) ns$/\1/p" \
	    "$WORK/l.log" | tail -1
}
hb=$(bound "$HOST 'host'")
gb=$(bound "$GUEST")
check "both files have time sync ($hb ns, $gb ns)" \
    test -n "$hb" -a -n "$gb"
awk -v nw="$NR_WRITE" -v np="$NR_GETPPID" -v b=$((${hb:-0} + ${gb:-0})) '
	function t(   i, s) {
		for (i = 1; i <= NF; i++)
			if ($i ~ /^[0-9]+\.[0-9]+:$/) {
				split($i, s, /[.:]/)
				if (base == "")
					base = s[1]
				return (s[1] - base) * 1e9 + s[2]
			}
		return -1
	}
	$1 == "guest.dat:" && / tdpoke-[0-9]+ / && $0 ~ "NR " nw " " {
		g[++ng] = t()
	}
	$1 == "host.dat:" && / tdsink-[0-9]+ / && $0 ~ "NR " np " " {
		h[++nh] = t()
	}
	END {
		for (i = 1; i <= ng && i <= nh; i++) {
			d = g[i] - h[i]
			if (d < 0)
				before++
			else if (d > b)
				late++
			if (i == 1 || d < min)
				min = d
			if (i == 1 || d > max)
				max = d
		}
		printf "writes %d getppid %d before %d late %d bound %d " \
		    "min %d max %d\n", ng, nh, before, late, b, min, max
	}' merged > causal
sed 's/^/# guest write - host getppid (ns): /' causal
eq "N guest writes and N host getppid in the merged report" \
    "$(awk '{ print $2 " " $4 }' causal)" "$N $N"
eq "no guest write later than its host getppid by more than the bounds" \
    "$(awk '{ print $8 }' causal)" 0
finish
