#!/bin/sh
# End-to-end: tdagent check-events agrees with trace-cmd check-events on
# this machine, and names exactly the formats that fail to parse.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs

for flag in "" "-N"; do
	trace-cmd check-events $flag > "$WORK/tc.out" 2>&1
	tc=$?
	"$TDAGENT" check-events $flag > "$WORK/td.out" 2> "$WORK/td.err"
	td=$?
	eq "check-events $flag: same exit status as trace-cmd" "$td" "$tc"
	nformats=$(find $TRACING/events -mindepth 3 -maxdepth 3 -name format | wc -l)
	check "check-events $flag parsed all $nformats formats" \
	    grep -q "^tdagent: $nformats event formats parsed" "$WORK/td.err"
	nfail=$(grep -vc warning "$WORK/td.out")
	check "check-events $flag: failures listed = failures counted ($nfail)" \
	    grep -q "parsed, $nfail failed" "$WORK/td.err"
done

# A tracing directory with one good format, one that libtraceevent
# rejects (a failure, as for trace-cmd) and one whose print format it cannot
# follow (a warning, listed with -v).
d=$WORK/tracing
mkdir -p "$d/events/good/ok" "$d/events/bad/garbage" "$d/events/bad/rawonly"
real=$TRACING/events/raw_syscalls/sys_exit/format
cp "$real" "$d/events/good/ok/format"
echo "this is not an event format" > "$d/events/bad/garbage/format"
sed -e "s/^ID: .*/ID: 60001/" -e "s/^print fmt: .*/print fmt: \"v=%s\", __no_such_helper(REC->ret)/" "$real" \
    > "$d/events/bad/rawonly/format"
"$TDAGENT" check-events -N -t "$d" > "$WORK/td.out" 2> "$WORK/td.err"
eq "a rejected format makes check-events fail" $? 1
eq "exactly one failure is listed" "$(wc -l < "$WORK/td.out")" 1
check "the rejected event is named" grep -q "^bad:garbage:" "$WORK/td.out"
check "the counts are right" \
    grep -q "3 event formats parsed, 1 failed, 1 print formats" "$WORK/td.err"
"$TDAGENT" check-events -v -N -t "$d" > "$WORK/td.out" 2> "$WORK/td.err"
check "-v names the event whose print format is not understood" \
    grep -q "^bad:rawonly: warning" "$WORK/td.out"
eq "-v lists both" "$(wc -l < "$WORK/td.out")" 2
finish
