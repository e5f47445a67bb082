#!/bin/sh
# test.sh: the whole test suite.  Installs what is missing, builds the
# plain build (alone: it bootstraps autotools for the others), then runs
# two workers at once (the e2e tests wait on the kernel and the network
# more than they compute: on 2 cores two tests overlap).  The work:
#   asan       the ASan+UBSan build: every unit test, and every end-to-end
#              test (each e2e script runs under the sanitizers once);
#   valgrind   the e2e scripts of VALGRIND_TESTS (where valgrind memcheck
#              finds what ASan cannot, reads of uninitialised memory) with
#              tdlisten under memcheck in the plain build;
#   plain      the plain build's unit tests (two at a time) and
#              PLAIN_TESTS (the e2e scripts that start no listener);
#   distcheck  "make distcheck" (the tarball builds out of tree and runs
#              the unit tests and two e2e scripts, DISTCHECK_TESTS);
#   fuzz       a short libFuzzer run of every decoder.
# One worker builds build-asan, the other runs the plain unit and e2e
# tests meanwhile; then both take jobs off one queue (make_queue): the
# lone tests under ASan first, then the longest first (scripts/test-costs:
# each job's measured seconds), so that neither waits long for the other
# at the end.  A job of the ASan build waits for it.  The e2e scripts of
# ALONE_TESTS run alone (scripts/test-alone.sh): no other test, nor
# distcheck or the fuzzers, runs beside them; the lists are Makefile.am's.  TD_WORKERS=N runs
# N workers (default 2): the e2e scripts mostly wait (under valgrind
# their waits are 10 times as long), a third one keeps the cores busier.
# Each worker's output follows in order, then each stage's time; the last
# line is "tests: N passed, N failed, N skipped" (CI reads it).  As root
# the end-to-end tests must run: a missing tracefs is a failure, not a
# skip.
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
# ("PASS FAIL SKIP SECONDS"), per worker worker-NAME.out, jobs (the
# queue), and times
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
# happens (fd 3: the workers' own output is shown at the end, in order)
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

# beside CMD...: CMD as test-alone.sh runs a test that is not alone: a
# lone test neither starts nor runs while it does (distcheck's build and
# tests and the fuzzers load the machine; the unit tests, not run by
# test-alone.sh, start listeners and agents of their own)
beside() {
	(
	flock 8 && flock -s 9 && flock -u 8
	"$@" 8>&- 9>&-
	) 8> "$R/gate" 9> "$R/run"
}

# make_queue: the jobs the workers share, $R/jobs, "FIRST SECONDS KIND
# NAME" one a line: the ASan unit tests (asan-unit), each e2e script
# under ASan (asan), each of VALGRIND_TESTS under valgrind (vg),
# distcheck and fuzz.  The lone tests' ASan jobs (FIRST 0) come first: a
# lone test waits for the job the other worker is running to end, and
# each such wait idles a worker, once here for all of them (while the
# ASan build is made, the other worker takes the shortest jobs: see
# job_next).  Then the longest first (LPT: the last jobs, the shortest,
# fill the gaps).  SECONDS from scripts/test-costs (KIND NAME SECONDS
# lines, # comments); a job it does not list counts 60 s.
make_queue() {
	alone=$(make -C "$top/build" -s alone-tests)
	{
		echo "asan-unit -"
		echo "distcheck -"
		echo "fuzz -"
		make -C "$top/build" -s e2e-tests | tr ' ' '\n' | grep . |
		    sed 's/^/asan /'
		make -C "$top/build" -s valgrind-tests | tr ' ' '\n' | grep . |
		    sed 's/^/vg /'
	} | awk -v alone=" $alone " '{ sub(/#.*/, "") }
	    NR == FNR { if (NF == 3) c[$1 " " $2] = $3; next }
	    { k = $1 " " $2
	      first = ($1 == "asan" && index(alone, " " $2 " ")) ? 0 : 1
	      print first, (k in c ? c[k] : 60), k }' \
	    "$top/scripts/test-costs" - | sort -s -k1,1n -k2,2nr > "$R/jobs"
}

# job_next: the next job of $R/jobs this worker may run, taken off it
# ("KIND NAME"): the first once the ASan build is built or failed
# ($R/asan.done); until then the last of those that do not need it (vg,
# fuzz), the shortest, so that the lone tests then wait little.  Exits 1
# when none is left, 2 when those left wait for the ASan build.
job_next() {
	(
	flock 7
	[ -s "$R/jobs" ] || exit 1
	n=1
	[ -f "$R/asan.done" ] ||
	    n=$(awk '$3 == "vg" || $3 == "fuzz" { n = NR } END { print n }' \
	    "$R/jobs")
	[ -n "$n" ] || exit 2
	sed -n "${n}p" "$R/jobs" | cut -d' ' -f3-
	sed -i "${n}d" "$R/jobs"
	) 7> "$R/jobs.lock"
}

# distcheck: the tarball's build is plain (distcheck does not pass on
# configure's arguments); in build-asan, as build/ is busy with valgrind
distcheck() {
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
}

fuzz() {
	s=$(date +%s)
	# 11 targets, 2 at a time: about 90 s, as 9 of 20 s were
	echo "== fuzz: every decoder, 16 s each (scripts/fuzz.sh)"
	if sh "$top/scripts/fuzz.sh" -j 2 16; then
		result fuzz 1 0 0 "$s"
	else
		result fuzz 0 1 0 "$s"
	fi
}

# run_job KIND NAME: one job of the queue.  A job whose build failed is
# not run, and is said so at the end ($R/notrun).  Under valgrind every
# tdlisten of the script ends with no error and no definite or indirect
# leak (TD_VALGRIND in tests/e2e-lib.sh); e2e-resume runs parts 1 2 4 5
# 6: 3 (a 10 s link cut, the listener mostly idle) and 7 (the listener
# killed for good: nothing to judge) would add a minute.  The unit tests
# under valgrind: README.md.  Two make checks at once in one build
# directory: each its own summary (TEST_SUITE_LOG).
run_job() {
	b=${2##*/}
	b=${b%.sh}
	case $1 in
	asan|asan-unit)
		if [ -f "$R/asan.failed" ]; then
			echo "$1 $2" >> "$R/notrun"
			return
		fi
		if [ "$1" = asan-unit ]; then
			beside check "asan-unit" build-asan TESTS='$(UNIT_TESTS)' \
			    TEST_SUITE_LOG="asan-unit-suite.log"
			return
		fi
		check "asan-$b" build-asan TESTS="$2" \
		    TEST_SUITE_LOG="asan-$b-suite.log" ;;
	vg)
		if [ "$plain_built" != 1 ]; then
			echo "vg $2" >> "$R/notrun"
			return
		fi
		check "vg-$b" build TD_VALGRIND=1 TD_RESUME_PARTS="1 2 4 5 6" \
		    TESTS="$2" TEST_SUITE_LOG="vg-$b-suite.log" ;;
	distcheck)
		beside distcheck ;;
	fuzz)
		beside fuzz ;;
	esac
}

# worker: jobs off the queue until none is left
worker() {
	while :; do
		j=$(job_next)
		case $? in
		1) return ;;
		2) sleep 5; continue ;;
		esac
		# shellcheck disable=SC2086 # KIND and NAME
		run_job $j
	done
}

# worker_asan: builds build-asan (then the queue's ASan jobs may start),
# then takes jobs
worker_asan() {
	build "build-asan" build-asan --enable-sanitizers ||
	    touch "$R/asan.failed"
	touch "$R/asan.done"
	worker
}

# worker_plain: the plain build's unit tests (they are independent: two
# at a time) and PLAIN_TESTS, then takes jobs
worker_plain() {
	if [ "$plain_built" = 1 ]; then
		beside check "plain-unit" build -j2 TESTS='$(UNIT_TESTS)'
		check "plain-e2e" build TESTS='$(PLAIN_TESTS)'
	fi
	worker
}

# the plain build first and alone: it bootstraps autotools (configure),
# which the other builds then share
exec 3>&1
plain_built=0
build "build" build > "$R/build.out" 2>&1 && plain_built=1
cat "$R/build.out"
make_queue
worker_asan > "$R/worker-asan.out" 2>&1 &
pids=$!
# TD_WORKERS=N (at least 2): N-2 more workers take jobs off the queue
i=3
while [ "$i" -le "${TD_WORKERS:-2}" ]; do
	worker > "$R/worker-$i.out" 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done
# shellcheck disable=SC2086 # the workers' pids
trap 'kill $pids 2>/dev/null; exit 1' INT TERM
worker_plain > "$R/worker-plain.out" 2>&1
# shellcheck disable=SC2086
wait $pids
trap - INT TERM
cat "$R/worker-asan.out" "$R/worker-plain.out"
i=3
while [ "$i" -le "${TD_WORKERS:-2}" ]; do
	cat "$R/worker-$i.out"
	i=$((i + 1))
done

pass=0 fail=0 skip=0
echo "== times (s; the workers ran at once, $(($(date +%s) - t0)) s in all)"
# asan and valgrind: their jobs' counts, and seconds added up
for n in asan vg; do
	ls "$R/$n"-*.res > /dev/null 2>&1 || continue
	cat "$R/$n"-*.res | awk '{ p += $1; f += $2; k += $3; s += $4 }
	    END { print p + 0, f + 0, k + 0, s + 0 }' > "$R/$n.sum"
done
[ -f "$R/asan.sum" ] && mv "$R/asan.sum" "$R/asan.res"
[ -f "$R/vg.sum" ] && mv "$R/vg.sum" "$R/valgrind.res"
# jobs whose build failed, or left on the queue
cut -d' ' -f2- "$R/jobs" >> "$R/notrun"
[ -s "$R/notrun" ] && { echo "not run: $(tr "\n" " " < "$R/notrun")"; fail=$((fail + 1)); }
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
echo "each e2e script's start, end, status and run: $R/times"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
