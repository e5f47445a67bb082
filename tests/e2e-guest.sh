#!/bin/sh
# End-to-end: a real guest.  QEMU (software emulation, TCG: no KVM is
# needed) boots Debian 12's kernel with a busybox initramfs that holds
# tdagent-static, a static tests/tdpoke and the guest's certificate; its
# /init records tdpoke's getppid calls twice with tdagent-static, and
# powers the guest off:
#  - "serial": over a virtio-serial port, "-h serial:/dev/vportNpM".
#    QEMU carries the port to tdlisten's Unix socket (tdlisten --unix,
#    QEMU a client chardev with reconnect=1), so the listener sees one
#    connection from QEMU's process with the guest's TLS in it;
#  - "tcp": over the guest's own network, QEMU's user-mode networking
#    (slirp, a virtio-net NIC): /init sets eth0 up as 10.0.2.15 and
#    records with "-h 10.0.2.2 -p PORT --server-name NAME"; slirp makes
#    the guest's connection to 10.0.2.2 one from the host's 127.0.0.1 to
#    tdlisten's TCP port, with the guest's TLS in it.
#
# Checked, for each: the guest's tdagent-static exits 0, as /init reports
# on the serial console; the listener files the recording under the guest
# certificate's name, from the peer it should (unix:QEMU's pid; over TCP
# 127.0.0.1); trace-cmd 3.1.6 reads it cleanly and it holds exactly
# tdpoke's N getppid calls and nothing else of the filter, none lost; time
# sync ran over that transport (TIME_SHIFT); over TCP the guest's kernel
# made the TLS records (kTLS, where the guest has the tls module).
# Besides: tdagent-static --version runs with no /etc, and QEMU ends by
# itself.  The times from QEMU's start to the guest's first HELLO and to
# the end are reported, not judged.
#
# The guest (kernel, initramfs, QEMU's command) is tests/guest-lib.sh's,
# which e2e-guest-host.sh shares.  Not root: QEMU runs as the user, and
# the guest is root.
. "$(dirname "$0")/e2e-lib.sh"
. "$(dirname "$0")/guest-lib.sh"
# tdpoke's getppid calls, PAUSE us apart: about 1.1 s of recording under
# TCG, for a few time-sync rounds (--tsync-interval 250) after the first,
# which meets a listener still busy with the headers (4 MB, kallsyms
# mostly): under valgrind, 2 of 3 runs had no sample with 200, and with
# 1000 1 ms apart the first 2 to 4 of 6 rounds had no answer in time
# (1 or 2 samples kept): 3 ms apart there
N=1000
PAUSE=1000
[ "$SLOW" -gt 1 ] && PAUSE=3000
# the guest certificate's name: the listener files the recording under it
GUEST=qemu-guest1
# a NIC's modules in the initramfs (virtio_net)
GUEST_NET=1
guest_need
NR=$NR_GETPPID

P=$WORK/pki
pki "$P" "$GUEST" || { echo "FAIL: cannot make certificates"; exit 99; }

# The initramfs: /init records tdpoke's getppid calls (tdn: their count,
# tdus: their pause, tdnr: getppid's number, tdserver: the name in the
# listener's certificate) over the port named org.tracedock.0, then sets up the
# network (QEMU's user-mode network: the host is 10.0.2.2) and records
# them again over TCP (tdport: the listener's port), and powers off.
# "td-guest: NAME" starts each recording's part of the console
R=$WORK/root
guest_root "$R" "$GUEST" || { echo "FAIL: cannot fill the initramfs"; exit 99; }
{
	guest_init_head
	cat <<EOF
dev=\$(td_port org.tracedock.0)
echo "td-guest: port \$dev"
echo "td-guest: version \$(tdagent --version 2>&1) rc \$?"
echo "td-guest: serial"
tdagent -v -h serial:\$dev --server-name "\$tdserver" --cert /pki/$GUEST.pem \\
    --key /pki/$GUEST.key --ca /pki/ca.pem \\
    -e raw_syscalls:sys_enter -f "id == \$tdnr" -- tdpoke "\$tdn" "\$tdus"
echo "td-guest: tdagent rc \$?"
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 &&
    ip route add default via 10.0.2.2
echo "td-guest: network rc \$?"
echo "td-guest: tcp"
tdagent -v -h 10.0.2.2 -p "\$tdport" --server-name "\$tdserver" \\
    --cert /pki/$GUEST.pem --key /pki/$GUEST.key --ca /pki/ca.pem \\
    -e raw_syscalls:sys_enter -f "id == \$tdnr" -- tdpoke "\$tdn" "\$tdus"
echo "td-guest: tdagent rc \$?"
poweroff -f
EOF
} > "$R/init"
guest_initrd "$R" || { echo "FAIL: cannot make the initramfs"; exit 99; }

# The listener, on its Unix socket and its TCP port (every address: slirp
# connects from 127.0.0.1).  QEMU connects its chardev when it starts,
# long before the guest's tdagent says anything, so the handshake timeout
# must outlast the boot on a busy machine (a dropped chardev stays down
# without reconnect=N; with it QEMU dials again when the guest writes:
# README.md)
SOCK=$WORK/guests.sock
start_listener "$WORK/l.log" -d "$WORK/out" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --unix "$SOCK" \
    --handshake-timeout $((120 * SLOW)) --tsync-interval 250 || exit 99
# start_listener waits for the first "listening on" (TCP): the Unix
# socket's line follows
wait_until $((100 * SLOW)) grep -q "listening on Unix socket" "$WORK/l.log"
check "the listener listens on its Unix socket" \
    grep -q "listening on Unix socket '$SOCK' (TLS 1.3" "$WORK/l.log"
check "the socket is a socket, mode 0660" \
    test -S "$SOCK" -a "$(stat -c %a "$SOCK")" = 660

guest_start "$WORK/qemu.out" \
    "tdn=$N tdus=$PAUSE tdnr=$NR tdserver=listener tdport=$LPORT" \
    -chardev socket,id=td0,path="$SOCK",reconnect=1 \
    -device virtserialport,chardev=td0,name=org.tracedock.0 \
    -netdev user,id=n0,restrict=off -device virtio-net-pci,netdev=n0,romfile=
# until QEMU ends: note when the listener opened the guest's recording
t_hello=""
note_hello() {
	[ -z "$t_hello" ] && sessions_opened "$WORK/l.log" 1 &&
	    t_hello=$(date +%s.%N)
	return 0
}
if guest_wait 1200 note_hello; then
	wait $QPID
	eq "QEMU ends by itself, exit 0" $? 0
else
	fail "the guest powers off within $((120 * SLOW)) s"
	kill $QPID
	wait $QPID
fi
t_end=$(date +%s.%N)
[ -s "$WORK/qemu.out" ] && sed 's/^/# qemu: /' "$WORK/qemu.out"
echo "# QEMU start to the listener's recording of the guest (HELLO): $(since "$t_hello")"
echo "# to QEMU's end: $(since "$t_end")"

guest_console
con=$WORK/console.txt
# a kernel panic ends QEMU too (panic=-1, -no-reboot): not a power-off
check "the guest powered off (poweroff -f)" grep -q "reboot: Power down$" "$con"
check "the guest found the port" grep -q "^td-guest: port /dev/vport[0-9]*p[0-9]*$" "$con"
check "tdagent-static --version runs in the guest (no /etc)" \
    grep -q "^td-guest: version tdagent (tracedock) [0-9.]* rc 0$" "$con"
eq "the guest's network came up (ip link, addr, route)" \
    "$(sed -n 's/^td-guest: network rc //p' "$con")" 0
sed -n 's/^\[ *\([0-9.]*\)\] reboot: Power down$/# the guest kernel powered off at its uptime \1 s/p' "$con"
# judge NAME PEER WHAT: the recording of the console's part "td-guest:
# NAME" (to the next "td-guest: tdagent rc"), which the listener logged
# as from PEER (a grep pattern), WHAT in words
judge() {
	sed -n "/^td-guest: $1\$/,/^td-guest: tdagent rc /p" "$con" \
	    > "$WORK/con.$1"
	eq "$1: tdagent-static exits 0 in the guest" \
	    "$(sed -n 's/^td-guest: tdagent rc //p' "$WORK/con.$1")" 0
	# the agent's word for the file, the listener's, and the file
	rel=$(remote_file "$WORK/con.$1")
	f=$WORK/out/$rel
	check "$1: the file is under the guest certificate's name ($rel)" \
	    sh -c "test -n '$rel' && test -f '$f' &&
	    test '$(dirname "$f")' = '$WORK/out/$GUEST'"
	check "$1: the listener logged it under that name, from $3" \
	    grep -q "session $GUEST ($2): wrote '$f'" "$WORK/l.log"
	check "$1: trace-cmd reads it cleanly" tc_clean "$f"
	# tdpoke: N getppid calls; nothing else in the guest makes one
	pids=$(awk -v nr="$NR" '/sys_enter:/ && $0 ~ "NR " nr " " { print $1 }' \
	    "$WORK/report.out" | sort | uniq -c)
	eq "$1: every getppid of the recording is tdpoke's, from one process" \
	    "$(echo "$pids" | awk '{ sub(/-[0-9]+$/, "", $2); print $2 }')" tdpoke
	eq "$1: exactly N getppid calls of tdpoke" \
	    "$(echo "$pids" | awk '{ print $1 }')" $N
	pid=$(echo "$pids" | awk '{ n = split($2, a, "-"); print a[n] }')
	"$TDCOUNT" "$f" -p "${pid:-0}" > "$WORK/c" 2>&1
	eq "$1: libtracecmd: N events of that process" \
	    "$(field events < "$WORK/c")" $N
	"$TDCOUNT" "$f" > "$WORK/c" 2>&1
	eq "$1: and no other event in the file" "$(field events < "$WORK/c")" $N
	eq "$1: no event lost" "$(field missed < "$WORK/c")" 0
	trace-cmd dump --options -i "$f" > "$WORK/options" 2>&1
	# trace-cmd 3.1.6 calls TIME_SHIFT "TimeShift"
	check "$1: time sync ran (TIME_SHIFT)" \
	    grep -q "^[[:space:]]*\[Option TimeShift, " "$WORK/options"
	sed -n "s/^.*session $GUEST ($2).*\(time sync: .*\)$/# $1: \1/p" \
	    "$WORK/l.log"
}
judge serial "unix:$QPID" "QEMU's process (unix:$QPID)"
judge tcp "127\.0\.0\.1:[0-9]*" "127.0.0.1 (slirp)"
# the guest's kernel has the tls module and the AES-GCM it needs (Debian's,
# loaded: its TCP ULPs are on the console), which this host's may lack:
# tdagent asks OpenSSL for kernel TLS over TCP, and Debian 12's OpenSSL
# (linked statically) hands the keys to the kernel, so the tcp recording
# above went through tdagent's kTLS path (its header sections, 4 MB, too)
sed -n 's/^td-guest: \(TCP ULPs: .*\)$/# guest \1/p' "$con"
sed -n 's/^.*\(TLSv[0-9.]* .*records made by .*\)$/# tcp: \1/p' \
    "$WORK/con.tcp"
if grep -q "^td-guest: TCP ULPs: .*\<tls\>" "$con"; then
	check "tcp: the guest's kernel made the TLS records (kTLS)" \
	    grep -q "records made by the kernel (kTLS)" "$WORK/con.tcp"
else
	echo "# the guest's kernel has no tls ULP: kTLS not tried"
fi
if [ $FAILS != 0 ]; then
	echo "# ---- guest console"
	sed 's/^/# /' "$con"
fi
check "the listener survived" kill -0 "$LPID"
stop_listener
check "the stopped listener removed its socket" test ! -e "$SOCK"
finish
