#!/bin/sh
# End-to-end: a peer that is let in cannot make tdlisten hold, write or
# open more than its share (issue 13, findings 1-4).  tdhostile attacks
# from 127.0.0.2 (its own identity on an --insecure listener) while two
# honest agents (127.0.0.1) record dd: their recordings stay exact, the
# listener's peak RSS stays within 64 MiB of what it held for them, what it
# writes for the options trickle stays within twice what the attacker
# sent, and with 256 descriptors the honest agents never run out.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
OUT=$WORK/out
TDHOSTILE=$B/tests/tdhostile
# RSS under a sanitizer (shadow memory, ASan's quarantine of freed
# blocks) or valgrind is not the program's: the bound is 3 x 64 MiB there
MEMX=1
if ldd "$TDLISTEN" 2>/dev/null | grep -q libasan || [ "$SLOW" != 1 ]; then
	MEMX=3
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16
	export ASAN_OPTIONS
fi
# the listener (and everything here) with 256 descriptors, hard limit too
ulimit -n 256 || skip "cannot lower the open files limit"
start_listener "$WORK/l.log" --insecure -d "$OUT" \
    --idle-timeout $((30 * SLOW)) || exit 99

# proc_field FILE KEY: a number from /proc/$LPID/FILE
proc_field() {
	awk -v k="$2:" '$1 == k { print $2 }' "/proc/$LPID/$1"
}

# honest NAME BLOCKS: an agent that records dd of BLOCKS one-byte blocks
# once go.NAME is written to; the shell's wait is one blocking open and
# one read, the same system calls however long it waits
honest() {
	mkfifo "$WORK/go.$1"
	"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure --name "$1" \
	    -e raw_syscalls -F -b 16384 -- sh -c 'echo $$ > '"$WORK/pid.$1"'; read x < '"$WORK/go.$1"'; exec dd if=/dev/zero of=/dev/null bs=1 count='"$2"' status=none' \
	    2> "$WORK/$1.err" &
}
honest a 20000
apid=$!
honest b 25000
bpid=$!
wait_session "$WORK/l.log" 2
check "the two honest agents are recording" sessions_opened "$WORK/l.log" 2
base=$(proc_field status VmHWM)
echo "# listener's peak RSS with the honest sessions: $base kB"
bound=$((base + MEMX * 64 * 1024))

# attack LABEL MODE WANT: tdhostile MODE must end as the fixed listener
# makes it (exit 0), and the listener's peak RSS stays within the bound
attack() {
	"$TDHOSTILE" 127.0.0.1 "$LPORT" "$2" > "$WORK/h.$2" 2>&1
	eq "$1: tdhostile $2 ends as expected ($(tr '\n' ' ' < "$WORK/h.$2"))" \
	    $? 0
	hwm=$(proc_field status VmHWM)
	check "$1: the listener's peak RSS ($hwm kB) is under $bound kB" \
	    test "$hwm" -le "$bound"
}

# 1. 128 CPUs x 9 pages of 512 KiB, 1.4 KB each on the wire in zlib (the
# file is zstd): 576 MiB held before the fix (600 MB peak measured)
attack "tiny compressed pages" chunks
check "tiny compressed pages: every page was taken (the probe after them was answered)" \
    grep -q "^reply" "$WORK/h.chunks"
# a HELLO of more than 64 MiB of pages (one on every CPU) is refused
attack "a HELLO of 256 x 512 KiB" span
check "a HELLO of 256 x 512 KiB: logged as malformed" \
    grep -q "127.0.0.2.*closing: malformed HELLO" "$WORK/l.log"
# 2. 200 options of 1 MiB: closed past 4 MiB (before: all kept in memory
# and rewritten at every checkpoint, 735 MB written, 427 MB peak)
attack "200 options of 1 MiB" options
check "200 options of 1 MiB: closed with the reason" \
    grep -q "127.0.0.2.*closing: options over the listener's limit" "$WORK/l.log"
# 3 MiB of options, then 60 small ones 50 ms apart: each option is written
# once (the side file), states of a few KB only when enough came (before:
# 3 MiB rewritten at every 250 ms tick, 40.9 MB for 3.1 MB sent).  wchar
# counts every write(2), also to sockets (probe replies, keepalives): the
# honest agents' share is a few KB; the bound is twice what was sent
w0=$(proc_field io wchar)
attack "an options trickle" trickle
w1=$(proc_field io wchar)
sent=$(sed -n 's/^sent //p' "$WORK/h.trickle")
echo "# options trickle: $sent bytes sent, $((w1 - w0)) bytes written"
check "an options trickle: written $((w1 - w0)) <= 2 x sent ($sent)" \
    test $((w1 - w0)) -le $((2 * ${sent:-0}))
# 3. probes never read: the listener stops reading them (before: 400 MB
# of replies held)
attack "probes without reading" probes
check "probes without reading: the listener stopped reading that session" \
    grep -q "127.0.0.2.*replies unread: not reading" "$WORK/l.log"
# 4. one page on 1010 CPUs under 256 descriptors (before: the listener ran
# out, a recording ended with "Too many open files")
attack "one page on 1010 CPUs" fds
check "one page on 1010 CPUs: the attacker's pages were all taken" \
    grep -q "^reply" "$WORK/h.fds"

# the honest agents' dd runs now, and their recordings end
echo > "$WORK/go.a"
echo > "$WORK/go.b"
wait $apid
eq "honest agent a ends well" $? 0
wait $bpid
eq "honest agent b ends well" $? 0
check "no descriptor ran out anywhere" sh -c \
    "! grep -q 'Too many open files' '$WORK/l.log' '$WORK/a.err' '$WORK/b.err'"
check "no honest session was closed or paused" sh -c \
    "! grep -E \"'[ab]' .*(closing|pauses|waits)\" '$WORK/l.log'"
fa=$(ls "$OUT"/127.0.0.1/*-a.dat 2>/dev/null)
fb=$(ls "$OUT"/127.0.0.1/*-b.dat 2>/dev/null)
"$TDCOUNT" "$fa" -p "$(cat "$WORK/pid.a")" > "$WORK/ca" 2>&1
"$TDCOUNT" "$fb" -p "$(cat "$WORK/pid.b")" > "$WORK/cb" 2>&1
eq "honest a: no event missed" "$(field missed < "$WORK/ca")" 0
eq "honest b: no event missed" "$(field missed < "$WORK/cb")" 0
a=$(field events < "$WORK/ca")
b=$(field events < "$WORK/cb")
eq "honest recordings: exact count difference for 5000 blocks" \
    "$((${b:-0} - ${a:-0}))" 20000
C=$((${a:-0} - 80000))
check "honest recordings: dd's constant is small ($C)" \
    test "$C" -gt 0 -a "$C" -lt 2000
check "trace-cmd reads honest a cleanly" tc_clean "$fa"
check "trace-cmd reads honest b cleanly" tc_clean "$fb"
stop_listener
finish
