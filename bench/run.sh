#!/usr/bin/env bash
# bench/run.sh: the syscall storm, recorded side by side by tdagent (v7 zstd
# and v6) and trace-cmd record, then streamed side by side by tdagent -h to
# tdlisten (TLS and plain TCP) and trace-cmd record -N to trace-cmd listen,
# in one run; see bench/README.md.
#
# usage: bench/run.sh [--local | --stream] [--blocks N] [--repeat R] [--keep]
#                     [--tdlisten-args 'ARGS']
#        bench/run.sh --profile | --profile-v6 [--blocks N]
#
# Run as root.  Results go to bench/out/ (results.tsv and table.txt for the
# local recorders, stream.tsv and stream.txt for streaming, logs); trace
# files are deleted once counted unless --keep is given.  Every measured
# run holds /tmp/td-bench.lock (shared with other benchmarks), released
# while the files are counted.  Streaming runs in a private network
# namespace (unshare --net), so the loopback byte counters are the
# benchmark's own: the wire bytes.  --local or
# --stream runs only that half.  --profile records tdagent (v7 zstd, or v6)
# with perf during one storm instead and writes bench/out/perf.data and
# profile.txt.  --tdlisten-args adds options to every tdlisten (for
# instance '--tsync-interval -1'); the streaming table names them.
set -euo pipefail

BLOCKS=5000000
REPEAT=3
KEEP=0
PROFILE=0
PROFILE_ARGS=()
CAL1=1000
CAL2=2000
TRACEFS=/sys/kernel/tracing
DO_LOCAL=1
DO_STREAM=1
TDLISTEN_ARGS=""
LOCK=/tmp/td-bench.lock
ORIG_ARGS=("$@")

usage() {
	sed -n 's/^# usage: /usage: /p; s/^#        /       /p' "$0" | head -3
	exit "${1:-2}"
}

die() {
	echo "bench: $*" >&2
	exit 1
}

warn() {
	echo "bench: warning: $*" >&2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--blocks)
		[ $# -ge 2 ] || usage
		BLOCKS=$2
		shift 2
		;;
	--repeat)
		[ $# -ge 2 ] || usage
		REPEAT=$2
		shift 2
		;;
	--keep)
		KEEP=1
		shift
		;;
	--local)
		DO_STREAM=0
		shift
		;;
	--stream)
		DO_LOCAL=0
		shift
		;;
	--tdlisten-args)
		[ $# -ge 2 ] || usage
		TDLISTEN_ARGS=$2
		shift 2
		;;
	--profile)
		PROFILE=1
		shift
		;;
	--profile-v6)
		PROFILE=1
		PROFILE_ARGS=(--file-version 6)
		shift
		;;
	-h | --help)
		usage 0
		;;
	*)
		usage
		;;
	esac
done
if ! [[ "$BLOCKS" =~ ^[0-9]+$ ]] || [ "$BLOCKS" -lt 1000 ]; then
	die "--blocks wants a number >= 1000"
fi
if ! [[ "$REPEAT" =~ ^[0-9]+$ ]] || [ "$REPEAT" -lt 1 ]; then
	die "--repeat wants a number >= 1"
fi
[ "$DO_LOCAL" = 1 ] || [ "$DO_STREAM" = 1 ] ||
    die "--local and --stream exclude each other (neither runs both)"

TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$TOP/bench/lib.sh"
OUT=$TOP/bench/out
[ "$(id -u)" = 0 ] || die "needs root (ftrace instances, trace-cmd record)"
cd "$TOP"
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/tdbench.XXXXXX)
LIVE=""	# a recorder this script started
LIVE_TIME=""	# the /usr/bin/time running it (time ignores SIGINT)
LISTENER_TIME=""	# the /usr/bin/time running a listener (bench/stream.sh)

cleanup() {
	local l

	if [ -z "$LIVE" ] && [ -n "$LIVE_TIME" ]; then
		LIVE=$(pgrep -P "$LIVE_TIME" | head -1 || true)
	fi
	if [ -n "$LIVE" ] && kill -0 "$LIVE" 2>/dev/null; then
		kill -INT "$LIVE" 2>/dev/null || true
		sleep 2
	fi
	if [ -n "$LISTENER_TIME" ]; then
		# tdlisten stops on SIGTERM, trace-cmd listen on SIGINT
		l=$(pgrep -P "$LISTENER_TIME" | head -1 || true)
		if [ -n "$l" ]; then
			kill -INT "$l" 2>/dev/null || true
			kill -TERM "$l" 2>/dev/null || true
			sleep 1
		fi
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- dependencies and build -------------------------------------------------

have_deps() {
	local c
	for c in gcc make autoreconf pkg-config trace-cmd pgrep awk; do
		command -v "$c" >/dev/null || return 1
	done
	[ -x /usr/bin/time ] &&
	    pkg-config --exists libtracefs libtraceevent libtracecmd libzstd \
	    zlib openssl libevent libevent_openssl
}

if ! have_deps; then
	[ -x scripts/deps.sh ] || die "missing tools or libraries and no " \
	    "scripts/deps.sh to install them"
	scripts/deps.sh || die "scripts/deps.sh failed"
	have_deps || die "still missing tools or libraries after scripts/deps.sh"
fi

# Streaming: a private network namespace (after the dependencies, which may
# need the network), so the loopback counters count this benchmark's bytes
# alone (other people's tests share the machine) and any port is free.
if [ "$DO_STREAM" = 1 ] && [ "$PROFILE" = 0 ] &&
    [ "${TD_BENCH_NETNS:-}" != 1 ]; then
	rm -rf "$TMP"
	exec unshare --net env TD_BENCH_NETNS=1 bash "$0" \
	    ${ORIG_ARGS[@]+"${ORIG_ARGS[@]}"}
fi
[ "${TD_BENCH_NETNS:-}" != 1 ] || ip link set lo up ||
    die "cannot bring up lo in the network namespace"

# The benchmark lock on fd 9, held while a run measures (other people's
# benchmarks take it too), dropped while files are counted.
lock_take() {
	exec 9>>"$LOCK"
	if ! flock -n 9; then
		echo "bench: waiting for $LOCK"
		flock 9
	fi
}

lock_drop() {
	flock -u 9
	exec 9>&-
}

# Build tdagent and tests/tdcount with the project's autotools: in the tree
# when it is configured there (a build dir would then be refused), else in
# build-bench/.  If make fails (a file mid-edit elsewhere), compile the
# programs directly with gcc into the temp dir.  The programs run from
# copies in the temp dir, so a rebuild in the tree during the benchmark
# cannot swap them between runs.
build() {
	local bdir log=$OUT/build.log flags libs

	: >"$log"
	if [ -f config.status ]; then
		bdir=$TOP
	else
		bdir=$TOP/build-bench
		if [ ! -x configure ] || [ configure.ac -nt configure ] ||
		    [ Makefile.am -nt Makefile.in ]; then
			autoreconf -fi >>"$log" 2>&1 || die "autoreconf failed," \
			    "see $log"
		fi
		mkdir -p "$bdir"
		if [ ! -f "$bdir/Makefile" ]; then
			(cd "$bdir" && "$TOP/configure" -q) >>"$log" 2>&1 ||
			    die "configure failed, see $log"
		fi
	fi
	TDAGENT=$bdir/tdagent
	TDLISTEN=$bdir/tdlisten
	TDCOUNT=$bdir/tests/tdcount
	if ! make -C "$bdir" -j"$(nproc)" tdagent >>"$log" 2>&1; then
		warn "make tdagent failed (see $log); compiling it with gcc"
		libs="libtracefs libtraceevent libzstd zlib"
		pkg-config --exists openssl && libs="$libs openssl"
		pkg-config --exists libevent_openssl &&
		    libs="$libs libevent libevent_openssl"
		# shellcheck disable=SC2046,SC2086
		gcc -O2 -g -include "$bdir/config.h" -Ishared -Iproto \
		    $(pkg-config --cflags $libs) -o "$TMP/tdagent.gcc" \
		    $(for d in agent/*/; do printf -- "-I%s " "$d"; done) \
		    agent/*.c agent/*/*.c shared/*.c proto/*.c -Wl,--as-needed \
		    $(pkg-config --libs $libs) -lm >>"$log" 2>&1 ||
		    die "cannot build tdagent, see $log"
		TDAGENT=$TMP/tdagent.gcc
	fi
	if [ "$DO_STREAM" = 1 ] &&
	    ! make -C "$bdir" -j"$(nproc)" tdlisten >>"$log" 2>&1; then
		warn "make tdlisten failed (see $log); compiling it with gcc"
		libs="libevent libevent_openssl openssl libzstd zlib"
		# shellcheck disable=SC2046,SC2086
		gcc -O2 -g -include "$bdir/config.h" -Ishared -Iproto \
		    $(pkg-config --cflags $libs) -o "$TMP/tdlisten.gcc" \
		    $(for d in listener/*/; do printf -- "-I%s " "$d"; done) \
		    listener/*.c listener/*/*.c shared/*.c proto/*.c -Wl,--as-needed \
		    $(pkg-config --libs $libs) -lm >>"$log" 2>&1 ||
		    die "cannot build tdlisten, see $log"
		TDLISTEN=$TMP/tdlisten.gcc
	fi
	if ! make -C "$bdir" tests/tdcount >>"$log" 2>&1; then
		flags=$(pkg-config --cflags --libs libtracecmd libtraceevent \
		    libtracefs)
		# shellcheck disable=SC2086
		gcc -O2 -o "$TMP/tdcount.gcc" tests/tdcount.c $flags \
		    >>"$log" 2>&1 || die "cannot build tests/tdcount, see $log"
		TDCOUNT=$TMP/tdcount.gcc
	fi
	cp "$TDAGENT" "$TMP/tdagent"
	cp "$TDCOUNT" "$TMP/tdcount"
	TDAGENT=$TMP/tdagent
	TDCOUNT=$TMP/tdcount
	REV=$(git -C "$TOP" describe --always --dirty 2>/dev/null || echo unknown)
	REV="$REV, tdagent sha256 $(sha256sum "$TDAGENT" | cut -c1-12)"
	if [ "$DO_STREAM" = 1 ]; then
		cp "$TDLISTEN" "$TMP/tdlisten"
		TDLISTEN=$TMP/tdlisten
		REV="$REV, tdlisten $(sha256sum "$TDLISTEN" | cut -c1-12)"
		gcc -O2 -Wall -o "$TMP/fileready" bench/fileready.c \
		    >>"$log" 2>&1 || die "cannot build bench/fileready, see $log"
	fi
	gcc -O2 -Wall -o "$TMP/flysize" bench/flysize.c >>"$log" 2>&1 ||
	    die "cannot build bench/flysize, see $log"
	SHIM=$TMP/sandbox-shim.so
	if [ -f /work/shared/tools/sandbox-shim.c ]; then
		gcc -shared -fPIC -O2 -o "$SHIM" \
		    /work/shared/tools/sandbox-shim.c -ldl >>"$log" 2>&1 ||
		    die "cannot build the sandbox shim, see $log"
	else
		SHIM=""	# a normal machine: trace-cmd records without it
	fi
}

if [ ! -e "$TRACEFS/trace" ]; then
	mount -t tracefs nodev "$TRACEFS" || die "cannot mount tracefs"
fi
echo "bench: building (log in bench/out/build.log)"
build

# --- one recording ----------------------------------------------------------

# Print the value of "key value" in a tdcount output file.
tdcount_get() {
	awk -v k="$2" '$1 == k { print $2 }' "$1"
}


# Wait until the recorder started under /usr/bin/time (pid $1) records;
# sets RPID to the recorder's pid.
wait_ready() {
	local tpid=$1 tool=$2 out=$3 i

	RPID=""
	for i in $(seq 400); do
		kill -0 "$tpid" 2>/dev/null || return 1
		[ -n "$RPID" ] || RPID=$(pgrep -P "$tpid" | head -1 || true)
		if [ -n "$RPID" ]; then
			case $tool in
			tdagent*)
				recording "$RPID" && break
				;;
			trace-cmd*)
				grep -q 'Hit Ctrl^C' "$out" 2>/dev/null && break
				;;
			esac
		fi
		sleep 0.05
	done
	[ "$i" -lt 400 ] || return 1
	# the per-CPU readers are set up before tracing is switched on; give
	# them a moment to reach their first read, the same for every tool
	sleep 0.5
}

# Run the storm once under a recorder: run_one TOOL BLOCKS TAG.  Appends a
# line to $OUT/results.tsv (unless TAG is "cal") and sets CAPTURED.
run_one() {
	local tool=$1 n=$2 tag=$3
	local f=$OUT/$tool.dat tf=$TMP/time ef=$OUT/$tool.err of=$OUT/$tool.out
	local pidf=$TMP/dd.pid cf=$TMP/count tpid t0 t1 t2 load
	local -a cmd

	rm -f "$f" "$f".cpu* "$tf" "$pidf"
	case $tool in
	tdagent-v7)
		cmd=("$TDAGENT" -o "$f" -e raw_syscalls)
		;;
	tdagent-v6)
		cmd=("$TDAGENT" -o "$f" -e raw_syscalls --file-version 6)
		;;
	trace-cmd)
		# stdbuf: the "Hit Ctrl^C" line tells when tracing is on
		cmd=(env ${SHIM:+LD_PRELOAD=$SHIM} stdbuf -oL trace-cmd record
		    -o "$f" -e raw_syscalls)
		if pgrep -x trace-cmd >/dev/null; then
			warn "another trace-cmd is running; waiting up to 60 s"
			for _ in $(seq 60); do
				pgrep -x trace-cmd >/dev/null || break
				sleep 1
			done
		fi
		;;
	esac
	lock_take
	load=$(cut -d' ' -f1 /proc/loadavg)
	/usr/bin/time -f '%e %U %S %M' -o "$tf" "${cmd[@]}" >"$of" 2>"$ef" &
	tpid=$!
	LIVE_TIME=$tpid
	wait_ready "$tpid" "$tool" "$of" || {
		cat "$ef" >&2
		die "$tool did not start recording"
	}
	LIVE=$RPID
	t0=$(date +%s.%N)
	sh -c 'echo $$ > "$1"; exec dd if=/dev/zero of=/dev/null bs=1 count="$2"' \
	    sh "$pidf" "$n" 2>"$TMP/dd.err"
	t1=$(date +%s.%N)
	kill -INT "$RPID"
	wait "$tpid" || die "$tool failed: $(tail -3 "$ef")"
	t2=$(date +%s.%N)
	LIVE=""
	LIVE_TIME=""
	lock_drop

	"$TDCOUNT" "$f" -p "$(cat "$pidf")" >"$cf" || die "tdcount failed on $f"
	CAPTURED=$(tdcount_get "$cf" events)
	if [ "$tag" = cal ]; then
		rm -f "$f"
		return 0
	fi

	local bytes missed cpu rss lost selfmb fsize
	bytes=$(data_bytes "$f") || die "cannot size the data of $f"
	missed=$(tdcount_get "$cf" missed)
	fsize=$(stat -c %s "$f")
	read -r _ cpu rss < <(awk 'END { print $1, $2 + $3, $4 }' "$tf")
	# events the kernel lost, from the CPUSTAT options both programs save
	lost=$(trace-cmd dump --options -i "$f" 2>/dev/null | awk '
	    /^overrun:/ { s += $2 } /^dropped events:/ { s += $3 }
	    END { print s + 0 }')
	# the recorder's own view of the data size, to cross-check data_bytes
	case $tool in
	tdagent*)
		selfmb=$(grep '; lost ' "$ef" | tail -1 | grep -o \
		    'cpu[0-9]* [0-9]* events [0-9.]* MB' |
		    awk '{ s += $4 } END { printf "%.1f", s }')
		;;
	trace-cmd)
		selfmb=$(cat "$of" "$ef" |
		    sed -n 's/.*(\([0-9]*\) uncompressed).*/\1/p' |
		    awk '{ s += $1 } END { printf "%.1f", s / 1e6 }')
		;;
	esac
	awk -v a="$selfmb" -v b="$bytes" 'BEGIN {
	    exit (a == "-" || (a - b / 1e6) ^ 2 < 0.25) ? 0 : 1 }' ||
	    warn "$tool: recorder says $selfmb MB, the file holds" \
	    "$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
	    "$tool" "$tag" "$CAPTURED" "$EXPECTED" "$missed" "$lost" "$cpu" \
	    "$bytes" "$rss" "$(awk -v a="$t0" -v b="$t2" \
	    'BEGIN { printf "%.2f", b - a }')" "$(awk -v a="$t0" -v b="$t1" \
	    'BEGIN { printf "%.2f", b - a }')" "$fsize" "$load" \
	    >>"$OUT/results.tsv"
	printf 'bench: %-10s run %s: %s of %s events, %s s CPU, %.1f MB data, ' \
	    "$tool" "$tag" "$CAPTURED" "$EXPECTED" "$cpu" \
	    "$(awk -v b="$bytes" 'BEGIN { print b / 1e6 }')"
	printf '%s KB RSS\n' "$rss"
	if [ "$KEEP" = 0 ]; then
		rm -f "$f"
	fi
	sync
}

# --- profile mode -----------------------------------------------------------

if [ "$PROFILE" = 1 ]; then
	command -v perf >/dev/null || die "--profile needs perf (linux-perf)"
	f=$OUT/profile.dat
	"$TDAGENT" -o "$f" -e raw_syscalls ${PROFILE_ARGS[@]+"${PROFILE_ARGS[@]}"} \
	    2>"$OUT/profile.err" &
	tpid=$!
	LIVE=$tpid
	wait_recording "$tpid" || true
	perf record -q -g -o "$OUT/perf.data" -p "$tpid" 2>/dev/null &
	perfpid=$!
	sleep 0.5
	dd if=/dev/zero of=/dev/null bs=1 count="$BLOCKS" status=none
	kill -INT "$tpid"
	wait "$tpid" || true
	LIVE=""
	kill -INT "$perfpid" 2>/dev/null || true
	wait "$perfpid" || true
	cat "$OUT/profile.err" >&2
	{
		perf report -i "$OUT/perf.data" --stdio --no-children \
		    --sort dso -g none 2>/dev/null | grep '^# Samples' || true
		perf report -i "$OUT/perf.data" --stdio --no-children \
		    --sort dso -g none 2>/dev/null | grep -v '^[#]' |
		    grep -v '^$' | head -8 || true
		echo
		perf report -i "$OUT/perf.data" --stdio --no-children \
		    --sort dso,symbol -g none 2>/dev/null | grep -v '^[#]' |
		    grep -v '^$' | head -25 || true
		echo
		echo "inclusive, where the call chains are complete:"
		perf report -i "$OUT/perf.data" --stdio --children \
		    --sort symbol -g none 2>/dev/null | grep -E '\] (ksys_read|'\
'tracing_buffers_read|do_epoll_wait|pwritev64|copy_file_range|'\
'td_page_parse) ' || true
	} | tee "$OUT/profile.txt"
	rm -f "$f"
	exit 0
fi

# --- calibration: the workload's own constant -------------------------------

EXPECTED=0
echo "bench: calibrating with $CAL1 and $CAL2 blocks under tdagent"
run_one tdagent-v7 "$CAL1" cal
c1=$((CAPTURED - 4 * CAL1))
run_one tdagent-v7 "$CAL2" cal
c2=$((CAPTURED - 4 * CAL2))
[ "$c1" = "$c2" ] || die "the constant does not hold: $CAL1 blocks give" \
    "4N+$c1 events, $CAL2 blocks give 4N+$c2"
EXPECTED=$((4 * BLOCKS + c1))
echo "bench: dd makes 4N+$c1 raw_syscalls events: expecting $EXPECTED"

# --- streaming (bench/stream.sh): alone, or after the local table ----------

if [ "$DO_STREAM" = 1 ]; then
	# shellcheck source=bench/stream.sh
	. "$TOP/bench/stream.sh"
	if [ "$DO_LOCAL" = 0 ]; then
		stream_main
		exit 0
	fi
fi

# --- the measured runs ------------------------------------------------------

TOOLS=(tdagent-v7 tdagent-v6 trace-cmd)
printf '%s\t' tool run captured expected missed lost cpu_s data_bytes rss_kb \
    wall_s dd_s file_bytes >"$OUT/results.tsv"
printf 'load\n' >>"$OUT/results.tsv"
for r in $(seq "$REPEAT"); do
	# rotate the order so no tool always runs first or last
	for k in 0 1 2; do
		run_one "${TOOLS[$(((k + r - 1) % 3))]}" "$BLOCKS" "$r"
	done
done

# --- the table --------------------------------------------------------------

{
echo "syscall storm: dd if=/dev/zero of=/dev/null bs=1 count=$BLOCKS"
echo "expected $EXPECTED raw_syscalls events of dd's pid (4N+$c1);" \
    "$REPEAT runs per tool; median [min..max]"
echo "$(nproc) CPUs, $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC');" \
    "tree $REV"
echo
awk -F'\t' "$BENCH_AWK_STATS"'
NR == 1 { next }
{
	t = $1; k = ++n[t]
	v[t, "capture", k] = $3 / $4
	v[t, "captured", k] = $3
	v[t, "missed", k] = $5
	v[t, "lost", k] = $6
	v[t, "cpu", k] = $7
	v[t, "mb", k] = $8 / 1e6
	v[t, "cpums", k] = $7 * 1000 / ($8 / 1e6)
	v[t, "rss", k] = $9 / 1024
	v[t, "wall", k] = $10
	v[t, "dd", k] = $11
	v[t, "file", k] = $12 / 1e6
	v[t, "load", k] = $13
}
END {
	nt = split("tdagent-v7 tdagent-v6 trace-cmd", tools, " ")
	nm = split("capture captured missed lost cpums cpu mb rss wall dd " \
	    "file load", ms, " ")
	label["capture"] = "capture (captured/expected)"
	label["captured"] = "events of dd captured"
	label["missed"] = "records flagged missed"
	label["lost"] = "kernel lost (overrun+drop)"
	label["cpums"] = "recorder CPU ms per MB"
	label["cpu"] = "recorder CPU s (user+sys)"
	label["mb"] = "ring-buffer data MB"
	label["rss"] = "peak RSS MB"
	label["wall"] = "wall s (dd start..exit)"
	label["dd"] = "dd s (under tracing)"
	label["file"] = "output file MB"
	label["load"] = "load average at start"
	fmt["capture"] = "%.4f"; fmt["captured"] = "%d"; fmt["missed"] = "%d"
	fmt["lost"] = "%d"
	fmt["cpums"] = "%.2f"; fmt["cpu"] = "%.2f"; fmt["mb"] = "%.1f"
	fmt["rss"] = "%.1f"; fmt["wall"] = "%.2f"; fmt["dd"] = "%.2f"
	fmt["file"] = "%.1f"; fmt["load"] = "%.2f"
	head["tdagent-v7"] = "tdagent v7 zstd"
	head["tdagent-v6"] = "tdagent v6"
	head["trace-cmd"] = "trace-cmd v7 zstd"
	printf "%-28s", "metric"
	for (i = 1; i <= nt; i++)
		printf "  %-30s", head[tools[i]]
	printf "  %7s  %7s\n", "v7/tc", "v6/tc"
	for (j = 1; j <= nm; j++) {
		m = ms[j]
		printf "%-28s", label[m]
		for (i = 1; i <= nt; i++) {
			t = tools[i]
			for (k = 1; k <= n[t]; k++)
				a[k] = v[t, m, k]
			sort(a, n[t])
			md[t] = med(a, n[t])
			cell = sprintf(fmt[m] " [" fmt[m] ".." fmt[m] "]",
			    md[t], a[1], a[n[t]])
			printf "  %-30s", cell
		}
		if (m == "load" || m == "captured" || m == "missed" ||
		    m == "lost")
			printf "  %7s  %7s\n", "", ""
		else
			printf "  %7s  %7s\n",
			    md["trace-cmd"] ? sprintf("%.3f",
			    md["tdagent-v7"] / md["trace-cmd"]) : "-",
			    md["trace-cmd"] ? sprintf("%.3f",
			    md["tdagent-v6"] / md["trace-cmd"]) : "-"
	}
}' "$OUT/results.tsv"
} | tee "$OUT/table.txt"

if [ "$DO_STREAM" = 1 ]; then
	stream_main
fi
