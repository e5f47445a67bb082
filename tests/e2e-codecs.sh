#!/bin/sh
# End-to-end: zlib-compressed v7 files, which no installed trace-cmd reads,
# checked through tracedock's own reader: a real zlib recording is rewritten
# as zstd (tests/tdrecode: shared/tdread -> shared/tdfile), the zstd copy
# must give trace-cmd the exact event count, and the decompressed sections
# and pages of every rewrite must be byte-identical to the original's.
# tdagent and tdlisten warn that the local trace-cmd cannot read zlib.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDRECODE=$B/tests/tdrecode

# (storm's own count fails on zlib: libtracecmd cannot read it either)
storm "$WORK/z1.dat" 2000 --compression zlib
p1=$STORM_PID
# ... and tdagent says so at start (issue 28), as tdlisten does, and
# --help says so too
check "tdagent --compression zlib warns that the trace-cmd here cannot read it" \
    grep -q -- "--compression zlib: the trace-cmd here cannot read zlib files (it reads zstd), nor can Debian 12's trace-cmd, libtracecmd and KernelShark" \
    "$WORK/storm.err"
"$TDAGENT" -o "$WORK/zs.dat" -e sched:sched_switch -s 0.05 2> "$WORK/zs.err"
check "zstd: no such warning" sh -c "! grep -q 'cannot read' '$WORK/zs.err'"
for p in tdagent tdlisten; do
	"$B/$p" --help | tr -s ' \n' '  ' > "$WORK/help.$p"
	check "$p --help: zlib files cannot be opened by Debian 12's tools" \
	    grep -q "zlib files: Debian 12's trace-cmd, libtracecmd and KernelShark, built without zlib, cannot open them" \
	    "$WORK/help.$p"
done
mkdir -p "$WORK/lz"
start_listener "$WORK/lz.log" -d "$WORK/lz" --insecure --compression zlib ||
    exit 99
stop_listener
check "tdlisten --compression zlib warns at start" \
    grep -q -- "--compression zlib: the trace-cmd here cannot read zlib files" \
    "$WORK/lz.log"
storm "$WORK/z2.dat" 7000 --compression zlib
p2=$STORM_PID
check "trace-cmd 3.1.6 cannot read zlib v7 itself (so this test is needed)" \
    sh -c "! trace-cmd report -i '$WORK/z1.dat' >/dev/null 2>&1"
check "the zlib file names its codec" \
    sh -c "head -c 32 '$WORK/z1.dat' | grep -aq zlib"

for f in z1 z2; do
	"$TDRECODE" "$WORK/$f.dat" "$WORK/$f-zstd.dat" 7 zstd
	eq "$f: zlib -> zstd rewrite" $? 0
	"$TDRECODE" "$WORK/$f.dat" "$WORK/$f-none.dat" 7 none
	eq "$f: zlib -> none rewrite" $? 0
	"$TDRECODE" "$WORK/$f.dat" "$WORK/$f-v6.dat" 6 none
	eq "$f: zlib -> v6 rewrite" $? 0
	"$TDRECODE" -d "$WORK/$f.dat" > "$WORK/$f.dig"
	check "$f: digest of the zlib file has every CPU" \
	    test "$(grep -c '^cpu' "$WORK/$f.dig")" = "$(nproc)"
	for g in zstd none v6; do
		"$TDRECODE" -d "$WORK/$f-$g.dat" > "$WORK/$f-$g.dig"
		check "$f: $g copy byte-identical to the zlib original" \
		    cmp -s "$WORK/$f.dig" "$WORK/$f-$g.dig"
		check "$f: trace-cmd reads the $g copy cleanly" \
		    tc_clean "$WORK/$f-$g.dat"
	done
done
"$TDCOUNT" "$WORK/z1-zstd.dat" -p "$p1" > "$WORK/c1"
"$TDCOUNT" "$WORK/z2-zstd.dat" -p "$p2" > "$WORK/c2"
m1=$(field missed < "$WORK/c1")
m2=$(field missed < "$WORK/c2")
if [ "$m1$m2" = 00 ]; then
	n1=$(field events < "$WORK/c1")
	n2=$(field events < "$WORK/c2")
	eq "exact count difference for 5000 blocks through zlib" \
	    "$((n2 - n1))" 20000
	"$TDCOUNT" "$WORK/z1-v6.dat" -p "$p1" > "$WORK/c1v6"
	eq "the v6 copy holds the same events" \
	    "$(field events < "$WORK/c1v6")" "$n1"
else
	fail "the ring lost events (missed $m1/$m2), no exact count"
fi
finish
