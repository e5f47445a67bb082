#!/bin/sh
# test-alone.sh LOCKDIR TEST...: scripts/test.sh's test runner (make
# check's SH_LOG_COMPILER in every worker).  The e2e scripts of
# TD_ALONE_TESTS (Makefile.am's ALONE_TESTS: many agents or sessions
# against handshake timeouts, 20 files' stamps compared) run alone, but
# under valgrind: no test of another worker (nor its distcheck or fuzz
# job: test.sh's beside()) runs beside them.  Others run side by side.  Two locks, so that a waiting lone test is not passed
# over: "gate" is taken by every test before it starts (by a lone one for
# its whole run), "run" shared by the others and exclusively by a lone one.
set -u
dir=$1
shift
# tests/NAME, whatever directory make runs it from
name=tests/${1##*/}
exec 8> "$dir/gate" 9> "$dir/run"
# under valgrind (TD_VALGRIND) the tests' waits are 10 times as long
# (SLOW): those runs go side by side
alone=${TD_ALONE_TESTS:-}
[ "${TD_VALGRIND:-0}" = 0 ] || alone=
case " $alone " in
*" $name "*)
	flock 8 && flock 9 ;;
*)
	flock 8 && flock -s 9 && flock -u 8 ;;
esac
# the test and what it starts do not hold the locks; LOCKDIR/times gets
# each script's start, end (seconds since the epoch), exit status and run
# (the build directory make runs it in, or vg under valgrind: the numbers
# scripts/test-costs wants)
s=$(date +%s)
sh "$@" 8>&- 9>&-
r=$?
run=$(basename "$(pwd)")
[ "${TD_VALGRIND:-0}" = 0 ] || run=vg
echo "$name $s $(date +%s) $r $run" >> "$dir/times"
exit $r
