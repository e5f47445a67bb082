#!/bin/sh
# test.sh: the whole test suite.  Installs what is missing, builds, runs
# "make check" (unit tests and end-to-end tests on the real tracefs), then
# the same suite built with ASan+UBSan, tdlisten's end-to-end tests under
# valgrind memcheck, "make distcheck", and a short
# libFuzzer run of every decoder.  As root the
# end-to-end tests must run: a missing tracefs is a failure, not a skip.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh" || exit 1
if [ "$(id -u)" = 0 ]; then
	TD_REQUIRE_TRACEFS=1
	export TD_REQUIRE_TRACEFS
fi
# the guest kernel of tests/e2e-guest.sh, downloaded once for every build
TD_GUEST_CACHE=$top/build/tests/guest-kernel
export TD_GUEST_CACHE
pass=0 fail=0 skip=0 rc=0

# stage NAME BUILDDIR [CONFIGURE ARGS...]: build and run make check there
stage() {
	name=$1
	dir=$2
	shift 2
	echo "== $name"
	if ! "$top/scripts/build.sh" "$dir" "$@"; then
		echo "== $name: build failed"
		fail=$((fail + 1))
		rc=1
		return
	fi
	run_check "$dir"
}

# failed_logs DIR: what went wrong in the test logs of DIR
failed_logs() {
	for f in "$1"/*.log; do
		grep -q "^not ok\|FAIL\|ERROR" "$f" 2>/dev/null &&
		    { echo "---- $f"; grep -v "^ok" "$f" | tail -40; }
	done
}

# run_check BUILDDIR [MAKE ARGS...]: run make check there, count the results
run_check() {
	dir=$1
	shift
	make -C "$top/$dir" -s check "$@" > "$top/$dir/check.out" 2>&1
	r=$?
	sed -n '/^PASS\|^FAIL\|^SKIP\|^ERROR\|^XPASS\|^# /p' "$top/$dir/check.out"
	if [ $r != 0 ]; then
		rc=1
		failed_logs "$top/$dir/tests"
	fi
	p=$(awk '/^# PASS:/ {print $3}' "$top/$dir/check.out")
	f=$(awk '/^# (FAIL|XPASS|ERROR):/ {s += $3} END {print s+0}' "$top/$dir/check.out")
	s=$(awk '/^# SKIP:/ {print $3}' "$top/$dir/check.out")
	pass=$((pass + ${p:-0}))
	fail=$((fail + ${f:-0}))
	skip=$((skip + ${s:-0}))
	[ -n "$p" ] || { fail=$((fail + 1)); rc=1; }
}

stage "tests" build
stage "tests under ASan+UBSan" build-asan --enable-sanitizers
# valgrind memcheck on the plain build finds what ASan cannot (reads of
# uninitialised memory): every tdlisten of the end-to-end tests that start
# one must end with no error and no definite or indirect leak
# (TD_VALGRIND in tests/e2e-lib.sh).  e2e-resume runs parts 1 2 4 5 6:
# 3 (a 10 s link cut, the listener mostly idle) and 7 (the listener killed
# for good: nothing to judge) would add a minute.  The unit tests under
# valgrind: README.md.
echo "== tdlisten under valgrind (build-vg)"
VG_TESTS=$(cd "$top" && grep -l '^[[:space:]]*start_listener ' tests/e2e-*.sh)
VG_TESTS=$(echo $VG_TESTS)
if "$top/scripts/build.sh" build-vg; then
	run_check build-vg TD_VALGRIND=1 TD_RESUME_PARTS="1 2 4 5 6" \
	    TESTS="$VG_TESTS"
else
	echo "== valgrind: build failed"
	fail=$((fail + 1))
	rc=1
fi
# the tarball builds out of tree and runs its tests: all but the longest
# end-to-end tests, which ran in each stage above (DISTCHECK_TESTS in
# Makefile.am)
echo "== make distcheck"
if make -C "$top/build" -s distcheck TESTS='$(DISTCHECK_TESTS)' \
    > "$top/build/distcheck.out" 2>&1; then
	grep "archives ready" -A2 "$top/build/distcheck.out" | head -3
	pass=$((pass + 1))
else
	tail -30 "$top/build/distcheck.out"
	# a failed distcheck leaves its tree: show the tests that failed
	for d in "$top"/build/tracedock-*/_build/sub/tests; do
		[ -d "$d" ] && failed_logs "$d"
	done
	fail=$((fail + 1))
	rc=1
fi
echo "== fuzz: every decoder, 20 s each (scripts/fuzz.sh)"
if sh "$top/scripts/fuzz.sh" -j 2 20; then
	pass=$((pass + 1))
else
	fail=$((fail + 1))
	rc=1
fi
echo "tests: $pass passed, $fail failed, $skip skipped"
exit $rc
