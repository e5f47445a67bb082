# guest-lib.sh: a real test guest, for the e2e-guest*.sh tests (sourced
# after e2e-lib.sh, not run).
#
# QEMU (software emulation, TCG: no KVM is needed) boots Debian 12's
# kernel with a busybox initramfs that holds tdagent-static, a static
# tests/tdpoke and the guest's certificate.  The kernel package
# (linux-image-amd64's current version, 70 MB) is downloaded with apt-get
# once per build tree: tests/guest-kernel/VERSION/ (or
# $TD_GUEST_CACHE/VERSION/: scripts/test.sh shares one among its builds)
# keeps vmlinuz and the virtio modules (8 MB), filled under a lock, so two
# runs at once download it once (and filled again where it lacks a module:
# a cache from before a module was added).  What this needs (qemu-system-x86,
# busybox-static, cpio, a kernel package) missing or not downloadable is a
# skip, and with TD_REQUIRE_TRACEFS=1 a failure, as for tracefs.
#
#	GUEST_NET=1		a guest with a NIC: set before guest_need,
#				adds the virtio_net modules ($NET_MODS) to
#				the initramfs and its insmods (the network
#				is /init's to configure)
#	guest_need		the programs, the kernel: KDIR, NR_GETPPID,
#				NR_WRITE (or skip)
#	guest_root DIR CERT	an initramfs tree in DIR with CERT's key
#				and certificate (from $P) but no /init
#	guest_init_head		the start of an /init (mounts, modules,
#				td_port NAME: a virtio-serial port's device)
#	guest_initrd DIR	pack DIR into $WORK/initrd.gz
#	guest_start OUT APPEND [QEMU ARGS...]
#				boot it in the background (QPID, t0), with
#				-smp $GUEST_SMP (2 by default); the
#				console goes to $WORK/console, QEMU's own
#				output to OUT; a reboot ends QEMU unless
#				GUEST_REBOOT=1
#	guest_wait TICKS [CMD]	until QEMU ends (0.1 s ticks, times SLOW),
#				running CMD each tick; 0 when it ended
#	guest_console		$WORK/console.txt: the console without CRs
TDAGENT_STATIC=$B/tdagent-static
TDPOKE_STATIC=$B/tests/tdpoke-static
KCACHE=${TD_GUEST_CACHE:-$B/tests/guest-kernel}
QBOOT=/usr/share/qemu/qboot.rom
# insmod order (the package has no modules.dep): each after its depends=
MODS="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev
virtio_pci virtio_console"
# and for a NIC (GUEST_NET=1): virtio_net's depends= are virtio_ring,
# virtio and net_failover, which needs failover; and tls (kernel TLS, which
# tdagent asks OpenSSL for over TCP) with the AES-GCM it needs: Debian
# builds gcm, ctr and ghash as modules, and without modprobe in the
# initramfs the kernel cannot load them when a socket asks for gcm(aes)
# (TLS_TX then fails and OpenSSL makes the records itself)
NET_MODS="failover net_failover virtio_net gf128mul ghash-generic ctr gcm tls"

# guest_mods: the modules of this guest, in insmod order
guest_mods() {
	echo $MODS
	[ "${GUEST_NET:-0}" = 1 ] && echo $NET_MODS
	return 0
}

# kernel_has: $KDIR is filled and holds every module of $MODS $NET_MODS
kernel_has() {
	[ -f "$KDIR/done" ] || return 1
	for _m in $MODS $NET_MODS; do
		[ -f "$KDIR/$_m.ko" ] || return 1
	done
}

# kernel_fetch VERSION: download linux-image-VERSION into $KCACHE/tmp and
# keep its vmlinuz and the modules of $MODS $NET_MODS in $KDIR, "done"
# last; print what went wrong.  A kept KDIR that lacks a module is filled
# again in place, each file renamed into place: a run of another build
# may be reading it.
kernel_fetch() {
	(
	rm -rf "$KCACHE/tmp"
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
	    $(for m in $MODS $NET_MODS; do echo "*/$m.ko"; done) ||
	    { echo "cannot extract vmlinuz and $(echo $MODS $NET_MODS) from $deb"; exit 1; }
	set +f
	mv boot/vmlinuz-* boot/vmlinuz &&
	    find . -name vmlinuz -o -name '*.ko' | while read -r f; do
		cp "$f" "$KDIR/.new" && mv "$KDIR/.new" "$KDIR/${f##*/}" ||
		    exit 1
	    done && touch "$KDIR/done" || { echo "cannot fill $KDIR"; exit 1; }
	)
	r=$?
	rm -rf "$KCACHE/tmp"
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
	kernel_has && return 0
	# one fetch at a time; a run that waited for it finds it done
	exec 9> "$KCACHE/lock"
	if ! flock -w 600 9; then
		KWHY="waited 600 s for $KCACHE/lock"
	elif ! kernel_has; then
		KWHY=$(kernel_fetch "$kver")
	fi
	exec 9>&-
	kernel_has || { [ -n "$KWHY" ] || KWHY="$KDIR lacks a module"; return 1; }
}

# guest_nr NAME: the number of system call NAME on this architecture (the
# guest's too), or nothing
guest_nr() {
	printf '#include <sys/syscall.h>\nSYS_%s\n' "$1" | cpp -P - | tail -1 |
	    grep -x '[0-9][0-9]*'
}

guest_need() {
	[ -x "$TDAGENT_STATIC" ] && [ -x "$TDPOKE_STATIC" ] ||
	    { echo "FAIL: no $TDAGENT_STATIC or $TDPOKE_STATIC (make check builds them)"; exit 99; }
	for c in qemu-system-x86_64 cpio gzip apt-get apt-cache dpkg-deb \
	    flock trace-cmd readelf; do
		command -v $c >/dev/null || skip "$c is not installed"
	done
	[ -f $QBOOT ] || skip "no $QBOOT (qemu-system-x86)"
	BUSYBOX=$(command -v busybox || echo /bin/busybox)
	[ -x "$BUSYBOX" ] || skip "busybox is not installed (busybox-static)"
	readelf -d "$BUSYBOX" 2>/dev/null | grep -q NEEDED &&
	    skip "$BUSYBOX is not static (busybox-static)"
	NR_GETPPID=$(guest_nr getppid)
	NR_WRITE=$(guest_nr write)
	[ -n "$NR_GETPPID" ] && [ -n "$NR_WRITE" ] ||
	    { echo "FAIL: cannot find the system calls' numbers"; exit 99; }
	KWHY=""
	guest_kernel || skip "no guest kernel: $KWHY"
	for m in $(guest_mods); do
		[ -f "$KDIR/$m.ko" ] || { echo "FAIL: no $m.ko in $KDIR"; exit 99; }
	done
	echo "# guest kernel: $(basename "$KDIR")"
}

guest_root() {
	_gr=$1
	mkdir -p "$_gr/bin" "$_gr/sbin" "$_gr/usr/bin" "$_gr/usr/sbin" \
	    "$_gr/proc" "$_gr/sys" "$_gr/dev" "$_gr/mods" "$_gr/pki" \
	    "$_gr/tmp" "$_gr/var/tmp" || return 1
	cp "$BUSYBOX" "$_gr/bin/busybox" || return 1
	for m in $(guest_mods); do
		cp "$KDIR/$m.ko" "$_gr/mods/" || return 1
	done
	cp "$TDAGENT_STATIC" "$_gr/bin/tdagent" &&
	    cp "$TDPOKE_STATIC" "$_gr/bin/tdpoke" &&
	    cp "$P/$2.pem" "$P/$2.key" "$P/ca.pem" "$_gr/pki/"
}

# The start of /init: unknown key=value words of the kernel command line
# are its environment.  No udev: td_port NAME prints the device of the
# virtio-serial port named NAME (/dev/vportNpM), waiting up to 10 s.
guest_init_head() {
	cat <<EOF
#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
chmod 1777 /tmp /var/tmp
for m in $(echo $(guest_mods)); do
	insmod /mods/\$m.ko || echo "td-guest: insmod \$m failed"
done
echo "td-guest: TCP ULPs: \$(cat /proc/sys/net/ipv4/tcp_available_ulp)"
td_port() {
	i=0
	while [ \$i -lt 100 ]; do
		for p in /sys/class/virtio-ports/*; do
			[ "\$(cat \$p/name 2>/dev/null)" = "\$1" ] &&
			    [ -c /dev/\${p##*/} ] && { echo /dev/\${p##*/}; return 0; }
		done
		sleep 0.1
		i=\$((i + 1))
	done
	return 1
}
EOF
}

guest_initrd() {
	chmod 755 "$1/init" &&
	    (cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) \
	    > "$WORK/initrd.gz"
}

guest_start() {
	_gout=$1
	_gappend=$2
	shift 2
	t0=$(date +%s.%N)
	_gnoreboot=-no-reboot
	[ "${GUEST_REBOOT:-0}" = 1 ] && _gnoreboot=
	# shellcheck disable=SC2086
	qemu-system-x86_64 -accel tcg -m 256 -smp "${GUEST_SMP:-2}" \
	    -nographic $_gnoreboot \
	    -bios $QBOOT -kernel "$KDIR/vmlinuz" -initrd "$WORK/initrd.gz" \
	    -append "console=ttyS0 panic=-1 quiet loglevel=3 $_gappend" \
	    -monitor none -serial "file:$WORK/console" \
	    -device virtio-serial-pci,romfile= "$@" \
	    < /dev/null > "$_gout" 2>&1 &
	QPID=$!
}

guest_wait() {
	_gw_max=$1
	shift
	_gw_i=0
	while kill -0 $QPID 2>/dev/null && [ $_gw_i -lt $(($_gw_max * SLOW)) ]; do
		[ $# -gt 0 ] && "$@"
		sleep 0.1
		_gw_i=$((_gw_i + 1))
	done
	! kill -0 $QPID 2>/dev/null
}

guest_console() {
	tr -d '\r' < "$WORK/console" > "$WORK/console.txt"
}

# since TIME: TIME (date +%s.%N, or empty: never) after QEMU started
since() {
	[ -n "$1" ] && echo "$1 $t0" | awk '{ printf "%.1f s", $1 - $2 }' ||
	    echo "never"
}
