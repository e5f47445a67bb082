#!/bin/sh
# test.sh: the whole test suite.  Installs what is missing, then runs two
# lanes at once (the e2e tests wait on the kernel and the network more
# than they compute: on 2 cores the lanes overlap):
#   asan   the ASan+UBSan build: every unit test and every end-to-end test
#          (each e2e script runs under the sanitizers once); then "make
#          distcheck" (the tarball builds out of tree and runs the unit
#          tests and two e2e scripts, DISTCHECK_TESTS), then a short
#          libFuzzer run of every decoder;
#   plain  the plain build: the unit tests (two at a time) and
#          PLAIN_TESTS (the e2e scripts that start no listener).
# Then each lane takes scripts of VALGRIND_TESTS off one queue (the e2e
# scripts where valgrind memcheck finds what ASan cannot, reads of
# uninitialised memory) and runs them with tdlisten under memcheck in the
# plain build, until none is left.
# The e2e scripts of ALONE_TESTS run alone (scripts/test-alone.sh); the
# lists are Makefile.am's.  The plain build comes first, alone: it
# bootstraps autotools for the others.
# Each stage's output follows in order, then its time; the last line is
# "tests: N passed, N failed, N skipped" (CI reads it).  As root the
# end-to-end tests must run: a missing tracefs is a failure, not a skip.
# shellcheck disable=SC2016 # make expands the $(LISTS) of Makefile.am
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh" || exit 1
if [ "$(id -u)" = 0 ]; then
	TD_REQUIRE_TRACEFS=1
	export TD_REQUIRE_TRACEFS
fi
# the guest kernel of tests/e2e-guest*.sh, downloaded once for every build
TD_GUEST_CACHE=$top/build/tests/guest-kernel
export TD_GUEST_CACHE
# in build-suite/: per stage NAME.check (make's output) and NAME.res
# ("PASS FAIL SKIP SECONDS"), per lane lane-NAME.out, and times
R=$top/build-suite
rm -rf "$R"
mkdir -p "$R"
t0=$(date +%s)

# failed_logs DIR: what went wrong in the test logs of DIR
failed_logs() {
	for f in "$1"/*.log; do
		grep -q "^not ok\|FAIL\|ERROR" "$f" 2>/dev/null &&
		    { echo "---- $f"; grep -v "^ok" "$f" | tail -40; }
	done
}

# result NAME PASS FAIL SKIP START: write NAME.res, and say so as it
# happens (fd 3: the lanes' own output is shown at the end, in order)
result() {
	echo "$2 $3 $4 $(($(date +%s) - $5))" > "$R/$1.res"
	echo "-- $1 done: $2 passed, $3 failed after $(($(date +%s) - $5)) s" >&3
}

# check NAME BUILDDIR [MAKE ARGS...]: make check there, its counts as NAME
check() {
	name=$1
	dir=$2
	shift 2
	s=$(date +%s)
	echo "== $name"
	make -C "$top/$dir" -s check "$@" \
	    SH_LOG_COMPILER="sh $top/scripts/test-alone.sh $R" \
	    TD_ALONE_TESTS='$(ALONE_TESTS)' > "$R/$name.check" 2>&1
	r=$?
	sed -n '/^PASS\|^FAIL\|^SKIP\|^ERROR\|^XPASS\|^# /p' "$R/$name.check"
	[ $r = 0 ] || failed_logs "$top/$dir/tests"
	p=$(awk '/^# PASS:/ {print $3}' "$R/$name.check")
	f=$(awk '/^# (FAIL|XPASS|ERROR):/ {s += $3} END {print s+0}' \
	    "$R/$name.check")
	k=$(awk '/^# SKIP:/ {print $3}' "$R/$name.check")
	# no summary (a build error): one failure
	[ -n "$p" ] || f=$((f + 1))
	[ $r = 0 ] || [ "$f" -gt 0 ] || f=1
	result "$name" "${p:-0}" "$f" "${k:-0}" "$s"
}

# build NAME BUILDDIR [CONFIGURE ARGS...]: build there and its test programs
build() {
	name=$1
	dir=$2
	shift 2
	s=$(date +%s)
	echo "== $name"
	if "$top/scripts/build.sh" "$dir" "$@" &&
	    make -C "$top/$dir" -s -j2 check TESTS= >/dev/null; then
		result "$name" 0 0 0 "$s"
		return 0
	fi
	echo "== $name: build failed"
	result "$name" 0 1 0 "$s"
	return 1
}

# vg_next: the next script of the valgrind queue ($R/vg.queue, one a
# line), taken off it; fails when it is empty
vg_next() {
	(
	flock 7
	n=$(head -1 "$R/vg.queue")
	[ -n "$n" ] || exit 1
	sed -i 1d "$R/vg.queue"
	echo "$n"
	) 7> "$R/vg.lock"
}

# valgrind_queue: memcheck on the plain build, the queue's scripts one at
# a time until it is empty: every tdlisten of these tests ends with no
# error and no definite or indirect leak (TD_VALGRIND in
# tests/e2e-lib.sh).  Both lanes take from the queue once their own work
# is done.  e2e-resume runs parts 1 2 4 5 6: 3 (a 10 s link cut, the
# listener mostly idle) and 7 (the listener killed for good: nothing to
# judge) would add a minute.  The unit tests under valgrind: README.md.
valgrind_queue() {
	[ "$plain_built" = 1 ] || return
	while t=$(vg_next); do
		b=${t##*/}
		b=${b%.sh}
		# two make checks at once in build/: each its own summary
		check "vg-$b" build TD_VALGRIND=1 TD_RESUME_PARTS="1 2 4 5 6" \
		    TESTS="$t" TEST_SUITE_LOG="vg-$b-suite.log"
	done
}

lane_asan() {
	build "build-asan" build-asan --enable-sanitizers &&
	    check "asan" build-asan
	# the tarball's build is plain (distcheck does not pass on
	# configure's arguments): the plain lane's build/ is busy
	s=$(date +%s)
	echo "== distcheck"
	if make -C "$top/build-asan" -s -j2 distcheck TESTS='$(DISTCHECK_TESTS)' \
	    > "$R/distcheck.check" 2>&1; then
		grep "archives ready" -A2 "$R/distcheck.check" | head -3
		result distcheck 1 0 0 "$s"
	else
		tail -30 "$R/distcheck.check"
		# a failed distcheck leaves its tree: the tests that failed
		for d in "$top"/build-asan/tracedock-*/_build/sub/tests; do
			[ -d "$d" ] && failed_logs "$d"
		done
		result distcheck 0 1 0 "$s"
	fi
	s=$(date +%s)
	# 11 targets, 2 at a time: about 90 s, as 9 of 20 s were
	echo "== fuzz: every decoder, 16 s each (scripts/fuzz.sh)"
	if sh "$top/scripts/fuzz.sh" -j 2 16; then
		result fuzz 1 0 0 "$s"
	else
		result fuzz 0 1 0 "$s"
	fi
	valgrind_queue
}

lane_plain() {
	if [ "$plain_built" = 1 ]; then
		# the unit tests are independent: two at a time
		check "plain-unit" build -j2 TESTS='$(UNIT_TESTS)'
		check "plain-e2e" build TESTS='$(PLAIN_TESTS)'
	fi
	valgrind_queue
}

# the plain build first and alone: it bootstraps autotools (configure),
# which the other builds then share
exec 3>&1
plain_built=0
build "build" build > "$R/build.out" 2>&1 && plain_built=1
cat "$R/build.out"
if [ $plain_built = 1 ]; then
	make -C "$top/build" -s valgrind-tests | tr ' ' '\n' |
	    grep . > "$R/vg.queue"
fi
lane_asan > "$R/lane-asan.out" 2>&1 &
asan_pid=$!
trap 'kill $asan_pid 2>/dev/null; exit 1' INT TERM
lane_plain > "$R/lane-plain.out" 2>&1
wait $asan_pid
trap - INT TERM
cat "$R/lane-asan.out" "$R/lane-plain.out"

pass=0 fail=0 skip=0
echo "== times (s; the lanes ran at once, $(($(date +%s) - t0)) s in all)"
# valgrind: the scripts of the queue, their seconds added up
cat "$R"/vg-*.res 2>/dev/null | awk '{ p += $1; f += $2; k += $3; s += $4 }
    END { print p + 0, f + 0, k + 0, s + 0 }' > "$R/valgrind.res"
[ -s "$R/vg.queue" ] && { echo "valgrind: not run: $(cat "$R/vg.queue")"; fail=$((fail + 1)); }
for n in build build-asan asan distcheck fuzz plain-unit plain-e2e valgrind; do
	if [ ! -f "$R/$n.res" ]; then
		echo "$n: did not run"
		fail=$((fail + 1))
		continue
	fi
	read -r p f k secs < "$R/$n.res"
	printf '%-12s %5d s  %d passed, %d failed, %d skipped\n' "$n" \
	    "$secs" "$p" "$f" "$k"
	pass=$((pass + p))
	fail=$((fail + f))
	skip=$((skip + k))
done
echo "each e2e script's start, end and status: $R/times"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
