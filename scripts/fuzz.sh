#!/bin/sh
# fuzz.sh [-b] [-j JOBS] [-t TARGET,...] [SECONDS]: build the libFuzzer
# targets of tests/fuzz/ (make fuzz: clang, ASan + UBSan) in build-fuzz/
# and run each one (or those of -t: proto, page, tdread, session, restore,
# plan9, ufmsg, tcmsg, resync, standby, control)
# for SECONDS (default 30) on a copy of its seed corpus, JOBS targets at a
# time (default 1), under nice.  Prints one summary line per target
# (executions, coverage, new corpus units) and exits 1 if any target
# crashed, leaked, timed out or ran out of memory; the input that did it is
# kept as build-fuzz/crashes/<target>-crash-*.  -b only builds (with the
# seed generator, build-fuzz/fuzz/seedgen).  Installs clang, libFuzzer and
# what configure needs when they are missing (Debian 12, as root).  See
# tests/fuzz/README.md.
# shellcheck disable=SC2086 # flag lists are split on purpose
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build-fuzz
F=$top/tests/fuzz
TARGETS="proto page tdread session restore plan9 ufmsg tcmsg resync standby control"
build_only=0
jobs=1
run=$TARGETS
while getopts bj:t: o; do
	case $o in
	b) build_only=1 ;;
	j) jobs=$OPTARG ;;
	t) run=$(echo "$OPTARG" | tr ',' ' ') ;;
	*) echo "usage: fuzz.sh [-b] [-j JOBS] [-t TARGET,...] [SECONDS]" >&2
	   exit 2 ;;
	esac
done
shift $((OPTIND - 1))
secs=${1:-30}
for t in $run; do
	case " $TARGETS " in
	*" $t "*) ;;
	*) echo "fuzz.sh: no target '$t' (targets: $TARGETS)" >&2; exit 2 ;;
	esac
done

# clang with libFuzzer (Debian 12: libclang_rt.fuzzer is in libclang-rt-14-dev)
# and what configure needs
PKGS="clang libclang-rt-14-dev make autoconf automake pkg-config
zlib1g-dev libzstd-dev libssl-dev libevent-dev libtracefs-dev
libtraceevent-dev"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
	    missing="$missing $p"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "fuzz.sh: missing packages:$missing (run as root to install them)" >&2
		exit 1
	fi
	echo "fuzz.sh: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# build-fuzz is configured once (bootstrapped as scripts/build.sh does);
# "make fuzz" builds the targets of Makefile.am into build-fuzz/fuzz/
echo "== building the fuzz targets in $B/fuzz (make fuzz)"
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] && [ Makefile.in -nt Makefile.am ] ||
    autoreconf -fi >/dev/null 2>&1 || { autoreconf -fi; exit 1; }
mkdir -p "$B/log" "$B/crashes" "$B/corpus"
if [ ! -f "$B/Makefile" ] || [ "$top/configure" -nt "$B/Makefile" ]; then
	(cd "$B" && "$top/configure" -q)
fi
make -C "$B" -s -j"$(nproc)" fuzz
echo "== built: $(for t in $TARGETS; do printf 'fuzz-%s ' "$t"; done)seedgen seedgen-standby"
[ $build_only = 1 ] && exit 0

UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$F/ubsan.supp
export UBSAN_OPTIONS
# fuzz-session writes its recordings here (tmpfs when there is one); a
# crashed run leaves its partial files, so the whole directory goes at exit
FUZZ_TMPDIR=$(mktemp -d /dev/shm/tracedock-fuzz.XXXXXX 2>/dev/null ||
    mktemp -d "${TMPDIR:-/tmp}/tracedock-fuzz.XXXXXX")
export FUZZ_TMPDIR
trap 'rm -rf "$FUZZ_TMPDIR"' EXIT

# run_one TARGET: fuzz a copy of the corpus; the summary goes to a file
run_one() {
	t=$1
	work=$B/corpus/$t
	rm -rf "$work" "$B/crashes/$t-"*
	mkdir -p "$work"
	if [ -d "$F/corpus/$t" ]; then
		cp "$F/corpus/$t"/* "$work"/
	fi
	# the inputs of earlier findings: every run replays them first
	for c in "$F/crashes/$t-"*; do
		[ -f "$c" ] && cp "$c" "$work/"
	done
	n0=$(find "$work" -type f | wc -l)
	opts=""
	[ -f "$F/$t.dict" ] && opts="-dict=$F/$t.dict"
	# tdlisten's log lines (fuzz-session, fuzz-standby, fuzz-control) go
	# nowhere; reports still do
	case $t in
	session|standby|control) opts="$opts -close_fd_mask=2" ;;
	esac
	start=$(date +%s)
	set +e
	nice -n 10 "$B/fuzz/fuzz-$t" -max_total_time="$secs" \
	    -rss_limit_mb=2048 -timeout=60 -print_final_stats=1 \
	    -artifact_prefix="$B/crashes/$t-" $opts "$work" \
	    > "$B/log/$t.log" 2>&1
	rc=$?
	set -e
	n1=$(find "$work" -type f | wc -l)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/log/$t.log")
	last=$(grep ' cov: ' "$B/log/$t.log" | tail -1)
	cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$B/log/$t.log")
	if [ $rc = 0 ]; then
		res=ok
	else
		res="FAILED (exit $rc)"
	fi
	printf 'fuzz-%-8s %s: %s execs in %ss, cov %s edges, ft %s, corpus %s -> %s (+%s new units), peak rss %s MB\n' \
	    "$t" "$res" "${execs:-?}" "$(( $(date +%s) - start ))" \
	    "${cov:-?}" "${ft:-?}" "$n0" "$n1" "$((n1 - n0))" "${rss:-?}" \
	    > "$B/log/$t.summary"
	if [ $rc != 0 ]; then
		{
			grep -E '^(==[0-9]+==ERROR|SUMMARY|.*property failed|.*runtime error)' \
			    "$B/log/$t.log" | head -5
			find "$B/crashes" -name "$t-*" | sed 's/^/  input: /'
			echo "  log: $B/log/$t.log"
		} >> "$B/log/$t.summary"
	fi
}

echo "== fuzzing $run for $secs s each, $jobs at a time"
rm -f "$B"/log/*.summary
n=0
for t in $run; do
	run_one "$t" &
	n=$((n + 1))
	if [ $n -ge "$jobs" ]; then
		wait
		n=0
	fi
done
wait
rc=0
for t in $run; do
	cat "$B/log/$t.summary"
	head -1 "$B/log/$t.summary" | grep -q ' ok: ' || rc=1
done
if [ $rc = 0 ]; then
	echo "== fuzz: all targets ok"
else
	echo "== fuzz: FAILED (inputs in $B/crashes/)"
fi
exit $rc
