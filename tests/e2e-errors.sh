#!/bin/sh
# End-to-end: bad input gives a clear error, the right exit status, and
# leaves nothing behind in tracefs or beside the output; a disk that fills
# up during the recording leaves what was recorded, readable (issue 28).
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs

# run EXPECTED_RC PATTERN ARGS...: tdagent fails as expected, says why,
# removes its instance and writes no file.
run() {
	want=$1
	pat=$2
	shift 2
	rm -f "$WORK"/out.dat*
	"$TDAGENT" "$@" > "$WORK/out" 2> "$WORK/err" &
	pid=$!
	wait $pid
	rc=$?
	eq "tdagent $* exits $want" "$rc" "$want"
	check "tdagent $* says '$pat'" grep -q -- "$pat" "$WORK/err"
	check "tdagent $*: instance removed" no_instances $pid
	check "tdagent $*: no output left" \
	    test -z "$(ls "$WORK" | grep 'out\.dat')"
}

run 2 "unknown event 'nosuch:event'" -o "$WORK/out.dat" -e nosuch:event -s 1
run 2 "unknown event 'nosuchsystem' (no such event system)" \
    -o "$WORK/out.dat" -e nosuchsystem -s 1
run 2 "unknown event 'sched:nosuch'" -o "$WORK/out.dat" -e sched:sched_switch \
    -e sched:nosuch -s 1
# the kernel's own error_log text is shown for a bad filter
run 2 "Field not found" -o "$WORK/out.dat" -e sched:sched_switch \
    -f 'no_such_field == 1' -s 1
# a filter no event of a whole system can take is refused too
run 2 "parse_error" -o "$WORK/out.dat" -e sched -f 'no_such_field == 1' -s 1
run 2 "unknown trace clock 'bogus'" -o "$WORK/out.dat" -C bogus -s 1
run 2 "cannot be compressed" -o "$WORK/out.dat" --file-version 6 \
    --compression zstd -s 1
run 2 "no output" -s 1
run 2 "invalid file version" -o "$WORK/out.dat" --file-version 8
run 2 "unknown compression" -o "$WORK/out.dat" --compression lz4
run 2 "invalid duration" -o "$WORK/out.dat" -s -1
run 2 "invalid duration" -o "$WORK/out.dat" -s nan
run 2 "invalid buffer size" -o "$WORK/out.dat" -b nan
run 2 "takes no operand" check-events extra
run 1 "cannot create '/nonexistent/dir/out.dat'" -o /nonexistent/dir/out.dat -s 1

# Disk full: a 2 MiB tmpfs fills up; the error is clear, the instance and
# every partial file are removed.
mkdir -p "$WORK/full"
if mount -t tmpfs -o size=2m tmpfs "$WORK/full" 2>/dev/null; then
	"$TDAGENT" -o "$WORK/full/out.dat" --compression none -e raw_syscalls \
	    -- dd if=/dev/zero of=/dev/null bs=1 count=300000 status=none \
	    2> "$WORK/err" &
	pid=$!
	wait $pid
	rc=$?
	eq "disk full exits 1" "$rc" 1
	check "disk full says so" grep -q "No space left on device" "$WORK/err"
	check "disk full: instance removed" no_instances $pid
	eq "disk full: nothing left in the full directory" \
	    "$(ls -A "$WORK/full" | wc -l)" 0
	umount "$WORK/full"
else
	fail "cannot mount a tmpfs for the disk-full test"
fi

# Disk full after the header sections (issue 28): what was recorded until
# then is kept as a readable NAME.incomplete.dat, and stderr says so with
# the number of events it holds.  The tmpfs holds the header sections
# (--compression none: kallsyms whole) and 6 MiB of pages of a storm that
# makes some 20 MB.
"$TDAGENT" -q -o "$WORK/hdr.dat" --compression none -e raw_syscalls -s 0.01
hdr=$(stat -c %s "$WORK/hdr.dat" 2>/dev/null || echo 0)
if mount -t tmpfs -o size=$((hdr / 1048576 + 6))m tmpfs "$WORK/full" \
    2>/dev/null; then
	"$TDAGENT" -o "$WORK/full/out.dat" --compression none -e raw_syscalls \
	    -- dd if=/dev/zero of=/dev/null bs=1 count=300000 status=none \
	    2> "$WORK/err" &
	pid=$!
	wait $pid
	rc=$?
	sed 's/^/# /' "$WORK/err"
	eq "disk full after the headers exits 1" "$rc" 1
	check "it says the disk is full" \
	    grep -q "cannot write '$WORK/full/out.dat': No space left on device" \
	    "$WORK/err"
	check "disk full: instance removed" no_instances $pid
	eq "what was recorded is kept as out.incomplete.dat, alone" \
	    "$(ls -A "$WORK/full")" out.incomplete.dat
	kept=$(sed -n "s|.*kept the \([0-9]*\) events recorded until the disk filled up as '$WORK/full/out.incomplete.dat'\$|\1|p" \
	    "$WORK/err")
	check "stderr says so, with the events it holds" test -n "$kept"
	check "trace-cmd reads it cleanly" tc_clean "$WORK/full/out.incomplete.dat"
	eq "trace-cmd report shows exactly those events" \
	    "$(grep -Ec ': sys_(enter|exit): ' "$WORK/report.out")" "${kept:-x}"
	"$TDCOUNT" "$WORK/full/out.incomplete.dat" > "$WORK/count" 2>&1
	eq "libtracecmd counts them too" "$(field events < "$WORK/count")" \
	    "${kept:-x}"
	check "and a good part of the file system's worth" \
	    test "${kept:-0}" -gt 50000
	umount "$WORK/full"
else
	fail "cannot mount a tmpfs for the disk-full test"
fi

# Not root: a clear message, no instance.
if command -v setpriv >/dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups "$TDAGENT" \
	    -o /tmp/never.dat -s 1 2> "$WORK/err"
	eq "non-root exits 1" $? 1
	check "non-root is told it needs root" grep -q "needs root" "$WORK/err"
fi

# --help and --version work without root and mention every option.
"$TDAGENT" --help > "$WORK/help"
eq "--help exits 0" $? 0
for o in -o -e -f -b -C -s --file-version --compression -q -v check-events; do
	check "--help mentions $o" grep -q -- "$o" "$WORK/help"
done
check "--version" sh -c "'$TDAGENT' --version | grep -q tracedock"
finish
