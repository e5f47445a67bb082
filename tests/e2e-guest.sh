#!/bin/sh
# End-to-end: a real guest.  QEMU (software emulation, TCG: no KVM is
# needed) boots Debian 12's kernel with a busybox initramfs that holds
# tdagent-static, a static tests/tdpoke and the guest's certificate; its
# /init records tdpoke's getppid calls with tdagent-static over a
# virtio-serial port, "-h serial:/dev/vportNpM", and powers the guest off.
# QEMU carries the port to tdlisten's Unix socket (tdlisten --unix, QEMU a
# client chardev with reconnect=1), so the listener sees one connection
# from QEMU's process with the guest's TLS in it.
#
# Checked: the guest's tdagent-static runs (--version, with no /etc) and
# exits 0, as /init reports on the serial console; the listener files the
# recording under the guest certificate's name; trace-cmd 3.1.6 reads it
# cleanly and it holds exactly tdpoke's N getppid calls and nothing else
# of the filter, none lost; time sync ran over the port (TIME_SHIFT); and
# QEMU ends by itself.  The times from QEMU's start to the guest's HELLO
# and to the end are reported, not judged.
#
# The kernel package (linux-image-amd64's current version, 70 MB) is
# downloaded with apt-get once per build tree: tests/guest-kernel/VERSION/
# (or $TD_GUEST_CACHE/VERSION/: scripts/test.sh shares one among its
# builds) keeps vmlinuz and the virtio modules (8 MB), filled under a
# lock, so two runs at once download it once.  What this needs
# (qemu-system-x86, busybox-static, cpio, a kernel package) missing or not
# downloadable is a skip, and with TD_REQUIRE_TRACEFS=1 a failure, as for
# tracefs.  Not root: QEMU runs as the user, and the guest is root.
. "$(dirname "$0")/e2e-lib.sh"
TDAGENT_STATIC=$B/tdagent-static
TDPOKE_STATIC=$B/tests/tdpoke-static
KCACHE=${TD_GUEST_CACHE:-$B/tests/guest-kernel}
# tdpoke's getppid calls, 1 ms apart: about 1.1 s of recording under TCG,
# for a few time-sync rounds (--tsync-interval 250) after the first,
# which meets a listener still busy with the headers (4 MB, kallsyms
# mostly): under valgrind, 2 of 3 runs had no sample with 200
N=1000
# the guest certificate's name: the listener files the recording under it
GUEST=qemu-guest1
# insmod order (the package has no modules.dep): each after its depends=
MODS="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev
virtio_pci virtio_console"

[ -x "$TDAGENT_STATIC" ] && [ -x "$TDPOKE_STATIC" ] ||
    { echo "FAIL: no $TDAGENT_STATIC or $TDPOKE_STATIC (make check builds them)"; exit 99; }
for c in qemu-system-x86_64 cpio gzip apt-get apt-cache dpkg-deb flock \
    trace-cmd readelf; do
	command -v $c >/dev/null || skip "$c is not installed"
done
QBOOT=/usr/share/qemu/qboot.rom
[ -f $QBOOT ] || skip "no $QBOOT (qemu-system-x86)"
BUSYBOX=$(command -v busybox || echo /bin/busybox)
[ -x "$BUSYBOX" ] || skip "busybox is not installed (busybox-static)"
readelf -d "$BUSYBOX" 2>/dev/null | grep -q NEEDED &&
    skip "$BUSYBOX is not static (busybox-static)"
# the system call tdpoke makes, on this architecture (the guest's too)
NR=$(printf '#include <sys/syscall.h>\nSYS_getppid\n' | cpp -P - | tail -1)
case $NR in
[0-9]*) ;;
*) echo "FAIL: cannot find getppid's number ($NR)"; exit 99 ;;
esac

# kernel_fetch VERSION: download linux-image-VERSION into $KCACHE/tmp and
# keep its vmlinuz and the modules of $MODS in $KDIR, "done" last; print
# what went wrong
kernel_fetch() {
	(
	rm -rf "$KDIR" "$KCACHE/tmp"
	mkdir -p "$KDIR" "$KCACHE/tmp" && cd "$KCACHE/tmp" || exit 1
	if ! apt-get download -q "linux-image-$1" > dl.log 2>&1; then
		echo "apt-get download linux-image-$1 failed:" \
		    "$(grep -v '^W:' dl.log | tail -1)"
		exit 1
	fi
	deb=$(ls linux-image-*.deb)
	set -f		# the patterns are tar's, not the shell's
	# shellcheck disable=SC2046
	dpkg-deb --fsys-tarfile "$deb" | tar -x --wildcards './boot/vmlinuz-*' \
	    $(for m in $MODS; do echo "*/$m.ko"; done) ||
	    { echo "cannot extract vmlinuz and $(echo $MODS) from $deb"; exit 1; }
	set +f
	cp boot/vmlinuz-* "$KDIR/vmlinuz" &&
	    find . -name '*.ko' -exec cp {} "$KDIR" \; &&
	    touch "$KDIR/done" || { echo "cannot fill $KDIR"; exit 1; }
	)
	r=$?
	rm -rf "$KCACHE/tmp"
	[ $r = 0 ] || rm -rf "$KDIR"
	return $r
}

# guest_kernel: set KDIR to the kept kernel of linux-image-amd64's current
# version, fetched first if needed, or KWHY to why not.  A version apt
# does not know (no package lists) falls back on the newest one kept.
guest_kernel() {
	mkdir -p "$KCACHE" || { KWHY="cannot make $KCACHE"; return 1; }
	kver=$(apt-cache depends linux-image-amd64 2>/dev/null |
	    sed -n 's/^ *Depends: linux-image-\([0-9].*-amd64\)$/\1/p' |
	    head -1)
	if [ -z "$kver" ]; then
		for d in "$KCACHE"/*-amd64/done; do
			[ -f "$d" ] || continue
			[ -z "$kver" ] || [ "$d" -nt "$KCACHE/$kver/done" ] &&
			    kver=$(basename "$(dirname "$d")")
		done
		[ -n "$kver" ] ||
		    { KWHY="apt-cache knows no linux-image-amd64"; return 1; }
	fi
	KDIR=$KCACHE/$kver
	[ -f "$KDIR/done" ] && return 0
	# one fetch at a time; a run that waited for it finds it done
	exec 9> "$KCACHE/lock"
	if ! flock -w 600 9; then
		KWHY="waited 600 s for $KCACHE/lock"
	elif [ ! -f "$KDIR/done" ]; then
		KWHY=$(kernel_fetch "$kver")
	fi
	exec 9>&-
	[ -f "$KDIR/done" ]
}
KWHY=""
guest_kernel || skip "no guest kernel: $KWHY"
for m in $MODS; do
	[ -f "$KDIR/$m.ko" ] || { echo "FAIL: no $m.ko in $KDIR"; exit 99; }
done
echo "# guest kernel: $(basename "$KDIR")"

P=$WORK/pki
pki "$P" "$GUEST" || { echo "FAIL: cannot make certificates"; exit 99; }

# The initramfs: busybox, the modules, the programs, the certificates and
# /init.  Unknown key=value words of the kernel command line are /init's
# environment: tdn (tdpoke's count), tdnr (getppid's number), tdserver
# (the name in the listener's certificate).
R=$WORK/root
mkdir -p "$R/bin" "$R/sbin" "$R/usr/bin" "$R/usr/sbin" "$R/proc" "$R/sys" \
    "$R/dev" "$R/mods" "$R/pki" "$R/tmp" "$R/var/tmp"
cp "$BUSYBOX" "$R/bin/busybox"
for m in $MODS; do
	cp "$KDIR/$m.ko" "$R/mods/"
done
cp "$TDAGENT_STATIC" "$R/bin/tdagent"
cp "$TDPOKE_STATIC" "$R/bin/tdpoke"
cp "$P/$GUEST.pem" "$P/$GUEST.key" "$P/ca.pem" "$R/pki/"
cat > "$R/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
chmod 1777 /tmp /var/tmp
for m in $(echo $MODS); do
	insmod /mods/\$m.ko || echo "td-guest: insmod \$m failed"
done
# no udev: the port named org.tracedock.0 is /dev/vportNpM
dev=""
i=0
while [ -z "\$dev" ] && [ \$i -lt 100 ]; do
	for p in /sys/class/virtio-ports/*; do
		[ "\$(cat \$p/name 2>/dev/null)" = org.tracedock.0 ] &&
		    [ -c /dev/\${p##*/} ] && dev=/dev/\${p##*/}
	done
	[ -n "\$dev" ] || sleep 0.1
	i=\$((i + 1))
done
echo "td-guest: port \$dev"
echo "td-guest: version \$(tdagent --version 2>&1) rc \$?"
tdagent -v -h serial:\$dev --server-name "\$tdserver" --cert /pki/$GUEST.pem \\
    --key /pki/$GUEST.key --ca /pki/ca.pem \\
    -e raw_syscalls:sys_enter -f "id == \$tdnr" -- tdpoke "\$tdn" 1000
echo "td-guest: tdagent rc \$?"
poweroff -f
EOF
chmod 755 "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initrd.gz" ||
    { echo "FAIL: cannot make the initramfs"; exit 99; }

# The listener: QEMU connects its chardev when it starts, long before the
# guest's tdagent says anything, so the handshake timeout must outlast the
# boot on a busy machine (a dropped chardev stays down without
# reconnect=N; with it QEMU dials again when the guest writes: README.md)
SOCK=$WORK/guests.sock
start_listener "$WORK/l.log" -d "$WORK/out" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --unix "$SOCK" \
    --handshake-timeout $((120 * SLOW)) --tsync-interval 250 || exit 99
check "the listener listens on its Unix socket" \
    grep -q "listening on Unix socket '$SOCK' (TLS 1.3" "$WORK/l.log"
check "the socket is a socket, mode 0660" \
    test -S "$SOCK" -a "$(stat -c %a "$SOCK")" = 660

t0=$(date +%s.%N)
qemu-system-x86_64 -accel tcg -m 256 -smp 2 -nographic -no-reboot \
    -bios $QBOOT -kernel "$KDIR/vmlinuz" -initrd "$WORK/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet loglevel=3 tdn=$N tdnr=$NR tdserver=listener" \
    -monitor none -serial "file:$WORK/console" \
    -chardev socket,id=td0,path="$SOCK",reconnect=1 \
    -device virtio-serial-pci,romfile= \
    -device virtserialport,chardev=td0,name=org.tracedock.0 \
    < /dev/null > "$WORK/qemu.out" 2>&1 &
QPID=$!
# until QEMU ends: note when the listener opened the guest's recording
t_hello=""
i=0
while kill -0 $QPID 2>/dev/null && [ $i -lt $((1200 * SLOW)) ]; do
	[ -z "$t_hello" ] && sessions_opened "$WORK/l.log" 1 &&
	    t_hello=$(date +%s.%N)
	sleep 0.1
	i=$((i + 1))
done
t_end=$(date +%s.%N)
if kill -0 $QPID 2>/dev/null; then
	fail "the guest powers off within $((120 * SLOW)) s"
	kill $QPID
	wait $QPID
else
	wait $QPID
	eq "QEMU ends by itself, exit 0" $? 0
fi
[ -s "$WORK/qemu.out" ] && sed 's/^/# qemu: /' "$WORK/qemu.out"
# since TIME: TIME (date +%s.%N, or empty: never) after QEMU started
since() {
	[ -n "$1" ] && echo "$1 $t0" | awk '{ printf "%.1f s", $1 - $2 }' ||
	    echo "never"
}
echo "# QEMU start to the listener's recording of the guest (HELLO): $(since "$t_hello")"
echo "# to QEMU's end: $(since "$t_end")"

con=$WORK/console.txt
tr -d '\r' < "$WORK/console" > "$con"
# a kernel panic ends QEMU too (panic=-1, -no-reboot): not a power-off
check "the guest powered off (poweroff -f)" grep -q "reboot: Power down$" "$con"
check "the guest found the port" grep -q "^td-guest: port /dev/vport[0-9]*p[0-9]*$" "$con"
check "tdagent-static --version runs in the guest (no /etc)" \
    grep -q "^td-guest: version tdagent (tracedock) [0-9.]* rc 0$" "$con"
eq "tdagent-static exits 0 in the guest" \
    "$(sed -n 's/^td-guest: tdagent rc //p' "$con")" 0
sed -n 's/^\[ *\([0-9.]*\)\] reboot: Power down$/# the guest kernel powered off at its uptime \1 s/p' "$con"
if [ $FAILS != 0 ]; then
	echo "# ---- guest console"
	sed 's/^/# /' "$con"
fi

# the agent's word for the file, the listener's, and the file
rel=$(remote_file "$con")
f=$WORK/out/$rel
check "the file is under the guest certificate's name ($rel)" \
    sh -c "test -f '$f' && test '$(dirname "$f")' = '$WORK/out/$GUEST'"
check "the listener logged it under that name" \
    grep -q "session $GUEST (.*): wrote '$f'" "$WORK/l.log"
check "over the Unix socket, from QEMU's process (unix:$QPID)" \
    grep -q "session $GUEST (unix:$QPID): wrote '$f'" "$WORK/l.log"
check "trace-cmd reads it cleanly" tc_clean "$f"
# tdpoke: N getppid calls; nothing else in the guest makes one
pids=$(awk -v nr="$NR" '/sys_enter:/ && $0 ~ "NR " nr " " { print $1 }' \
    "$WORK/report.out" | sort | uniq -c)
eq "every getppid of the recording is tdpoke's, from one process" \
    "$(echo "$pids" | awk '{ sub(/-[0-9]+$/, "", $2); print $2 }')" tdpoke
eq "exactly N getppid calls of tdpoke" "$(echo "$pids" | awk '{ print $1 }')" $N
pid=$(echo "$pids" | awk '{ n = split($2, a, "-"); print a[n] }')
"$TDCOUNT" "$f" -p "${pid:-0}" > "$WORK/c" 2>&1
eq "libtracecmd: N events of that process" "$(field events < "$WORK/c")" $N
"$TDCOUNT" "$f" > "$WORK/c" 2>&1
eq "and no other event in the file" "$(field events < "$WORK/c")" $N
eq "no event lost" "$(field missed < "$WORK/c")" 0
trace-cmd dump --options -i "$f" > "$WORK/options" 2>&1
# trace-cmd 3.1.6 calls TIME_SHIFT "TimeShift"
check "time sync ran over the port (TIME_SHIFT)" \
    grep -q "^[[:space:]]*\[Option TimeShift, " "$WORK/options"
sed -n "s/^.*session $GUEST (.*\(time sync: .*\)$/# \1/p" "$WORK/l.log"
check "the listener survived" kill -0 "$LPID"
stop_listener
check "the stopped listener removed its socket" test ! -e "$SOCK"
finish
