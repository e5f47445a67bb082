#!/bin/sh
# End-to-end: tdagent --import-plan9 turns Plan 9 kernel traces into
# trace.dat files that trace-cmd 3.1.6 and libtracecmd (tests/tdcount -l)
# read back exactly: trace(3)'s own example, 100,000 generated records with
# function names from nm -n symbols and KTZERO offsets, malformed lines
# counted with their line numbers, records out of order, an empty input,
# signals, and the same events streamed with -h to a real tdlisten over
# TLS, also across a restart of the listener.  The import needs no root
# and no tracefs: only trace-cmd.
. "$(dirname "$0")/e2e-lib.sh"
command -v trace-cmd >/dev/null || skip "trace-cmd is not installed"
[ -x "$TDAGENT" ] || { echo "FAIL: no $TDAGENT"; exit 99; }

# import OUT ARGS...: tdagent --import-plan9 ARGS -o OUT; sets RC, stderr
# in $WORK/err
import() {
	out=$1
	shift
	rm -f "$out"
	"$TDAGENT" --import-plan9 "$@" -o "$out" 2> "$WORK/err"
	RC=$?
}

# listing FILE OUT: tdcount -l's events of FILE into OUT (ev lines only)
listing() {
	"$TDCOUNT" -l "$1" | grep '^ev ' > "$2"
}

# report FILE OUT: trace-cmd report's event lines without their times
report() {
	trace-cmd report -i "$1" 2>&1 | awk '/\[000\]/ {
		out = $1 " " $2
		for (i = 4; i <= NF; i++)
			out = out " " $i
		print out
	}' > "$2"
}

# ---- trace(3)'s example -------------------------------------------------
# as /dev/trace writes it (121-byte lines) and as the manual prints it
printf '%s\n' \
    'E ffffffff8016c2c6 00000096d2011acb 0000000000000057 ffffffff80a8b2d8 ffffffff80a8b2d8 ffffffff8016d446 ffffffff80a7c548' \
    'X ffffffff8016c306 00000096d2011c3c 0000000000000057 ffffffff80251b38 0000000000000000 0000000000000000 0000000000000000' \
    > "$WORK/seed.txt"
printf '%s\n' \
    'E ffffffff8016c2c6 00000096d2011acb 0000000000000057 ffffffff80a8b2d8' \
    'ffffffff80a8b2d8 ffffffff8016d446 ffffffff80a7c548' \
    'X ffffffff8016c306 00000096d2011c3c 0000000000000057 ffffffff80251b38' \
    '0000000000000000 0000000000000000 0000000000000000' \
    > "$WORK/seed-wrapped.txt"
eq "the device's lines are 121 bytes" \
    "$(awk '{ print length($0) + 1 }' "$WORK/seed.txt" | sort -u)" 121
cat > "$WORK/seed.want" <<'EOF'
ev 647768382155 0 87 plan9:func_entry pc=0xffffffff8016c2c6 pid=0x57 arg1=0xffffffff80a8b2d8 arg2=0xffffffff80a8b2d8 arg3=0xffffffff8016d446 arg4=0xffffffff80a7c548
ev 647768382524 0 87 plan9:func_exit pc=0xffffffff8016c306 pid=0x57 ret=0xffffffff80251b38
EOF

import "$WORK/seed.dat" "$WORK/seed.txt"
eq "seed: the import exits 0" "$RC" 0
check "seed: trace-cmd reads the file cleanly" tc_clean "$WORK/seed.dat"
"$TDCOUNT" "$WORK/seed.dat" > "$WORK/count"
eq "seed: exactly two events" "$(field events < "$WORK/count")" 2
eq "seed: on one CPU" "$(field cpus < "$WORK/count")" 1
listing "$WORK/seed.dat" "$WORK/seed.got"
check "seed: the manual's pc, time, pid, arguments and return value" \
    cmp -s "$WORK/seed.got" "$WORK/seed.want"
check "seed: trace-cmd report prints the entry with its arguments" grep -q \
    'plan9-87 .*func_entry: *0xffffffff8016c2c6 pid=87 arg1=0xffffffff80a8b2d8 arg2=0xffffffff80a8b2d8 arg3=0xffffffff8016d446 arg4=0xffffffff80a7c548$' \
    "$WORK/report.out"
check "seed: and the exit with its return value" grep -q \
    'plan9-87 .*func_exit: *0xffffffff8016c306 pid=87 ret=0xffffffff80251b38$' \
    "$WORK/report.out"
check "seed: without --cycles-per-sec trace-cmd shows the counter" grep -q \
    '\[000\] *647768382155: func_entry' "$WORK/report.out"
check "seed: trace clock plan9-cycles" grep -q '"plan9-cycles" clock' \
    "$WORK/dump.out"

import "$WORK/wrapped.dat" - < "$WORK/seed-wrapped.txt"
eq "seed as the manual prints it (stdin): exits 0" "$RC" 0
listing "$WORK/wrapped.dat" "$WORK/wrapped.got"
check "seed as the manual prints it: the same two events" \
    cmp -s "$WORK/wrapped.got" "$WORK/seed.want"

import "$WORK/seed6.dat" "$WORK/seed.txt" --file-version 6
check "seed, version 6: trace-cmd reads it cleanly" tc_clean "$WORK/seed6.dat"
listing "$WORK/seed6.dat" "$WORK/seed6.got"
check "seed, version 6: the same two events" \
    cmp -s "$WORK/seed6.got" "$WORK/seed.want"

# 1 GHz: ns = cycles, exactly (mult 2^30, shift 30)
import "$WORK/seed1g.dat" "$WORK/seed.txt" --cycles-per-sec 1G
listing "$WORK/seed1g.dat" "$WORK/seed1g.got"
check "seed at 1 GHz: times in ns are the cycles" \
    cmp -s "$WORK/seed1g.got" "$WORK/seed.want"
trace-cmd report -i "$WORK/seed1g.dat" > "$WORK/r1g" 2>&1
check "seed at 1 GHz: trace-cmd report shows seconds" \
    grep -q '647\.768382: func_entry' "$WORK/r1g"
trace-cmd report --raw-ts -i "$WORK/seed1g.dat" > "$WORK/rraw" 2>&1
check "seed at 1 GHz: --raw-ts shows Plan 9's counter" \
    grep -q '647768382524: func_exit' "$WORK/rraw"
# 2.4 GHz: TSC2NSEC's 31-bit multiplier is within 0.5 ns per second
import "$WORK/seed24.dat" "$WORK/seed.txt" --cycles-per-sec 2.4G
trace-cmd report -t -i "$WORK/seed24.dat" > "$WORK/r24" 2>&1
check "seed at 2.4 GHz: trace-cmd shows 647768382155 / 2.4e9 s" awk '
    /func_entry/ { sub(":", "", $3); d = $3 - 647768382155 / 2.4e9
	if (d < 0) d = -d; found = d < 1e-6 }
    END { exit !found }' "$WORK/r24"

# --symbols: the pcs' function names, the exit's offset in its function
printf '%s\n' 'ffffffff80110000 T _main' 'ffffffff8016c2c6 T sleep' \
    'ffffffff8016c400 t tsleep' '         U undefined' \
    'ffffffff80a8b2d8 D somedata' > "$WORK/seed.nm"
import "$WORK/seedsym.dat" "$WORK/seed.txt" --symbols "$WORK/seed.nm"
check "seed with symbols: trace-cmd reads it cleanly" \
    tc_clean "$WORK/seedsym.dat"
check "seed with symbols: the entry is 'sleep'" grep -q \
    'func_entry: *sleep pid=87 ' "$WORK/report.out"
check "seed with symbols: the exit is 'sleep+0x40'" grep -q \
    'func_exit: *sleep+0x40 pid=87 ret=' "$WORK/report.out"
check "seed with symbols: kallsyms holds functions and data" sh -c \
    "trace-cmd dump --kallsyms -i '$WORK/seedsym.dat' 2>/dev/null | grep -c ' [TtD] ' | grep -qx 4"

# ---- 100,000 generated records ------------------------------------------
# Function k (0..49) at KTZERO + k * 0x100; every third entry gives its pc
# as an offset from KTZERO; exits return from +0x40.  Gaps of 2^27 + 5 and
# 3e9 cycles need TIME_EXTENDs and more than 32 bits; every 17th task is
# Plan 9's 'no process' (-1), which is task 0 (<idle>).  An exit's
# ARG2..ARG4 hold stale values the import must ignore.  Expected: the
# listing (tdcount -l) and the report lines (trace-cmd) of every event.
N=100000
awk -v n=$N -v data="$WORK/big.txt" -v syms="$WORK/big.nm" \
    -v list="$WORK/big.want" -v rep="$WORK/big.rep" '
# 64-bit hex of a number below 2^53 (mawk prints %x of 32 bits only)
function hex64(v,	hi) {
	hi = int(v / 4294967296)
	return sprintf("%08x%08x", hi, v - hi * 4294967296)
}
BEGIN {
	for (k = 0; k < 50; k++) {
		t = k % 3 == 0 ? "T" : k % 3 == 1 ? "t" : "L"
		printf "ffffffff8011%04x %s fn_%d\n", k * 256, t, k > syms
		print "00000008 a local_" k > syms
	}
	# the text ends where the data starts: it bounds the last function
	for (k = 0; k < 50; k++)
		printf "ffffffff8012%04x D data_%d\n", k * 8, k > syms
	print "         U undefined" > syms
	ts = 1000000000
	for (i = 0; i < n; i++) {
		j = int(i / 2)
		k = j % 50
		if (i % 1000 == 999)
			ts += 3000000000
		else if (i % 7 == 3)
			ts += 134217733
		else
			ts += 37 + i % 11
		if (j % 17 == 16) {
			pidf = "ffffffffffffffff"; pidx = "ffffffffffffffff"
			pidd = -1; task = 0; comm = "<idle>-0"
		} else {
			p = 1 + j % 13
			pidf = sprintf("%016x", p); pidx = sprintf("%x", p)
			pidd = p; task = p; comm = "plan9-" p
		}
		full = sprintf("ffffffff8011%04x", k * 256)
		if (i % 2 == 0) {
			pc = j % 3 == 0 ? sprintf("%016x", k * 256) : full
			printf "E %s %s %s %016x %016x %016x ffffffff80a8b2d8\n",
			    pc, hex64(ts), pidf, j, 7 * j, 3 * j + 1 > data
			printf "ev %.0f 0 %d plan9:func_entry pc=0x%s pid=0x%s arg1=0x%x arg2=0x%x arg3=0x%x arg4=0xffffffff80a8b2d8\n",
			    ts, task, full, pidx, j, 7 * j, 3 * j + 1 > list
			printf "%s [000] func_entry: fn_%d pid=%d arg1=0x%x arg2=0x%x arg3=0x%x arg4=0xffffffff80a8b2d8\n",
			    comm, k, pidd, j, 7 * j, 3 * j + 1 > rep
		} else {
			printf "X ffffffff8011%04x %s %s %016x 00000000deadbeef 0000000012345678 ffffffffffffffff\n",
			    k * 256 + 64, hex64(ts), pidf, 5 * j > data
			printf "ev %.0f 0 %d plan9:func_exit pc=0xffffffff8011%04x pid=0x%s ret=0x%x\n",
			    ts, task, k * 256 + 64, pidx, 5 * j > list
			printf "%s [000] func_exit: fn_%d+0x40 pid=%d ret=0x%x\n",
			    comm, k, pidd, 5 * j > rep
		}
	}
}'
eq "generated: $N records" "$(wc -l < "$WORK/big.txt")" $N
import "$WORK/big.dat" "$WORK/big.txt" --symbols "$WORK/big.nm" \
    --ktzero ffffffff80110000 --cycles-per-sec 1000000000
eq "$N records: the import exits 0" "$RC" 0
check "$N records: nothing skipped or reordered" \
    test -z "$(grep -e skipped -e 'order' "$WORK/err")"
check "$N records: trace-cmd reads the file cleanly" tc_clean "$WORK/big.dat"
"$TDCOUNT" "$WORK/big.dat" > "$WORK/count"
eq "$N records: exactly $N events" "$(field events < "$WORK/count")" $N
eq "$N records: in time order" "$(field order < "$WORK/count")" ok
listing "$WORK/big.dat" "$WORK/big.got"
check "$N records: every event's time, task and fields, in order" \
    cmp -s "$WORK/big.got" "$WORK/big.want"
report "$WORK/big.dat" "$WORK/big.rgot"
check "$N records: trace-cmd names every pc's function" \
    cmp -s "$WORK/big.rgot" "$WORK/big.rep"
check "$N records: the summary counts them" grep -q \
    "$N events (50000 entries, 50000 exits) of 13 tasks from $N lines" \
    "$WORK/err"

# ---- malformed lines ----------------------------------------------------
# 13 bad records (one over two lines: 14 lines) among 14 good ones: the
# first 10 shown with their line numbers, all counted
{
	echo 'E 1 10 1 1 1 1 1'			# 1
	echo 'garbage'				# 2
	echo 'E 1 11 1 1 1 1 1'			# 3
	echo 'E 1 12 1'				# 4 cut short
	echo '1 1'				# 5  by line 6
	echo 'X 1 13 1 1 1 1 1'			# 6
	echo 'X 1 zz 1 1 1 1 1'			# 7 not hex
	for i in 1 2 3 4 5 6 7 8 9 10; do
		echo "E 1 2$i 1 1 1 1 1 9"	# 8, 10, .. 26: 8 fields
		echo "X 1 3$i 1 1 1 1 1"	# 9, 11, .. 27
	done
	echo 'E 1 99 1 1 1 1 1'			# 28
} > "$WORK/bad.txt"
import "$WORK/bad.dat" "$WORK/bad.txt"
eq "malformed: the import exits 0" "$RC" 0
check "malformed: trace-cmd reads the file cleanly" tc_clean "$WORK/bad.dat"
"$TDCOUNT" "$WORK/bad.dat" > "$WORK/count"
eq "malformed: the 14 good records are there" \
    "$(field events < "$WORK/count")" 14
eq "malformed: the first ten shown with their lines" \
    "$(sed -n "s/.*bad\.txt': \(lines* [0-9-]*\): .*skipped\$/\1/p" \
    "$WORK/err" | tr '\n' ' ')" \
    "line 2 lines 4-5 line 7 line 8 line 10 line 12 line 14 line 16 line 18 line 20 "
check "malformed: the others counted, not shown" \
    grep -q "further malformed lines are counted, not shown" "$WORK/err"
check "malformed: all 13 counted, 14 lines" \
    grep -q "13 malformed records skipped (14 lines)" "$WORK/err"

# ---- out of order -------------------------------------------------------
printf 'E 1 %x 1 1 1 1 1\n' 50 10 30 20 40 > "$WORK/order.txt"
import "$WORK/order.dat" "$WORK/order.txt"
eq "out of order: sorted" "$("$TDCOUNT" -l "$WORK/order.dat" |
    awk '/^ev / { printf "%s ", $2 }')" "10 20 30 40 50 "
check "out of order: said so" \
    grep -q "4 records out of time order, sorted" "$WORK/err"

# ---- empty input --------------------------------------------------------
: > "$WORK/empty.txt"
import "$WORK/empty.dat" "$WORK/empty.txt"
eq "empty: the import exits 0" "$RC" 0
check "empty: trace-cmd reads the file cleanly" tc_clean "$WORK/empty.dat"
eq "empty: no events" "$("$TDCOUNT" "$WORK/empty.dat" | field events)" 0
import "$WORK/empty2.dat" - < /dev/null
check "empty standard input: a valid file" tc_clean "$WORK/empty2.dat"

# ---- errors and signals -------------------------------------------------
"$TDAGENT" --import-plan9 "$WORK/seed.txt" 2> "$WORK/err"
eq "no output: usage error" "$?" 2
"$TDAGENT" --import-plan9 "$WORK/seed.txt" -o "$WORK/x.dat" -e sched \
    2> "$WORK/err"
eq "recording options: usage error" "$?" 2
import "$WORK/none.dat" "$WORK/no-such-file"
eq "a missing input: exit 1" "$RC" 1
check "a missing input: no file" test ! -e "$WORK/none.dat"
# signal SIG: the import of a pipe that never ends stops and finishes
for sig in TERM HUP; do
	rm -f "$WORK/fifo" "$WORK/sig.dat"
	mkfifo "$WORK/fifo"
	"$TDAGENT" --import-plan9 "$WORK/fifo" -o "$WORK/sig.dat" -q &
	pid=$!
	# the open returns once tdagent opened its end (signals blocked)
	exec 3> "$WORK/fifo"
	cat "$WORK/seed.txt" >&3
	kill -$sig $pid
	wait $pid
	rc=$?
	exec 3>&-
	want=0
	[ $sig = HUP ] && want=129
	eq "SIG$sig: exits as a recording would" "$rc" $want
	check "SIG$sig: the file is complete" tc_clean "$WORK/sig.dat"
done

# ---- no root needed -----------------------------------------------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
    id nobody >/dev/null 2>&1; then
	mkdir -p "$WORK/nobody"
	chmod 711 "$WORK"
	chmod 777 "$WORK/nobody"
	cp "$WORK/seed.txt" "$WORK/nobody/"
	chmod 644 "$WORK/nobody/seed.txt"
	setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
	    "$TDAGENT" --import-plan9 "$WORK/nobody/seed.txt" \
	    -o "$WORK/nobody/seed.dat" 2> "$WORK/err"
	eq "as nobody: the import exits 0" "$?" 0
	listing "$WORK/nobody/seed.dat" "$WORK/nobody.got"
	check "as nobody: the same two events" \
	    cmp -s "$WORK/nobody.got" "$WORK/seed.want"
fi

# ---- streamed to tdlisten -----------------------------------------------
P=$WORK/pki
pki "$P" plan9box || { echo "FAIL: cannot make certificates"; exit 99; }
OUT=$WORK/out
start_listener "$WORK/listen.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" || exit 99
# stream NAME INPUT ARGS...: the import streamed as plan9box; sets RC, RFILE
stream() {
	name=$1 input=$2
	shift 2
	"$TDAGENT" --import-plan9 "$input" -h 127.0.0.1 -p "$LPORT" \
	    --cert "$P/plan9box.pem" --key "$P/plan9box.key" --ca "$P/ca.pem" \
	    --name "$name" "$@" 2> "$WORK/agent.$name.err"
	RC=$?
	RFILE=$OUT/$(remote_file "$WORK/agent.$name.err")
}
stream seed "$WORK/seed.txt"
eq "-h seed: exits 0" "$RC" 0
check "-h seed: the listener's file is under the certificate's name" \
    test -f "$OUT/plan9box/$(basename "$RFILE")"
check "-h seed: trace-cmd reads it cleanly" tc_clean "$RFILE"
listing "$RFILE" "$WORK/hseed.got"
check "-h seed: the same two events as -o" \
    cmp -s "$WORK/hseed.got" "$WORK/seed.want"
stream big "$WORK/big.txt" --symbols "$WORK/big.nm" \
    --ktzero ffffffff80110000 --cycles-per-sec 1G -o "$WORK/bigboth.dat"
eq "-h and -o, $N records: exits 0" "$RC" 0
check "-h $N records: trace-cmd reads it cleanly" tc_clean "$RFILE"
listing "$RFILE" "$WORK/hbig.got"
check "-h $N records: the same events as -o" \
    cmp -s "$WORK/hbig.got" "$WORK/big.want"
report "$RFILE" "$WORK/hbig.rgot"
check "-h $N records: the same function names" \
    cmp -s "$WORK/hbig.rgot" "$WORK/big.rep"
listing "$WORK/bigboth.dat" "$WORK/both.got"
check "-h and -o together: the local file holds them too" \
    cmp -s "$WORK/both.got" "$WORK/big.want"
stream empty "$WORK/empty.txt"
eq "-h empty: exits 0" "$RC" 0
check "-h empty: a valid file" tc_clean "$RFILE"
check "the listener logged the sessions" \
    grep -q "session plan9box 'big' .*done after" "$WORK/listen.log"

# The listener restarts while an import from a pipe runs: four fifths of
# the records are in (more than the time-order window holds: pages go
# out), the rest come once it is back; the agent resumes, the file is
# whole.
rm -f "$WORK/fifo"
mkfifo "$WORK/fifo"
"$TDAGENT" --import-plan9 "$WORK/fifo" -h 127.0.0.1 -p "$LPORT" \
    --cert "$P/plan9box.pem" --key "$P/plan9box.key" --ca "$P/ca.pem" \
    --name resume --ktzero ffffffff80110000 --cycles-per-sec 1G \
    --reconnect-wait 120 2> "$WORK/agent.resume.err" &
APID=$!
exec 3> "$WORK/fifo"
head -n $((N * 4 / 5)) "$WORK/big.txt" >&3
wait_session "$WORK/listen.log" 4
kill -TERM "$LPID"
wait "$LPID"
eq "restart: tdlisten exits 0" $? 0
check "restart: the recording was left to be resumed" \
    grep -q "left '.*' to be resumed" "$WORK/listen.log"
# (without the pipe's end: the import's input must see its end)
LPORT_FIXED=$LPORT start_listener "$WORK/listen2.log" -d "$OUT" \
    --cert "$P/listener.pem" --key "$P/listener.key" --ca "$P/ca.pem" \
    3>&- || exit 99
unset LPORT_FIXED	# sh keeps an assignment made for a function call
tail -n +$((N * 4 / 5 + 1)) "$WORK/big.txt" >&3
exec 3>&-
wait "$APID"
eq "restart: the import exits 0" $? 0
check "restart: the agent reconnected and resumed" \
    grep -q -e "reconnected to" -e "resumed after lost connections" \
    "$WORK/agent.resume.err"
RFILE=$OUT/$(remote_file "$WORK/agent.resume.err")
check "restart: trace-cmd reads the file cleanly" tc_clean "$RFILE"
listing "$RFILE" "$WORK/hres.got"
check "restart: the same $N events as -o" \
    cmp -s "$WORK/hres.got" "$WORK/big.want"
check "no .part left" test -z "$(find "$OUT" -name '*.part')"
stop_listener
finish
