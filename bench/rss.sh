#!/usr/bin/env bash
# bench/rss.sh: the agent's peak memory, tdagent against trace-cmd record, in
# one run; see bench/README.md, "Agent peak RSS".
#
# usage: bench/rss.sh [--blocks N] [--repeat R] [--build DIR] [--before DIR]
#
# Each run streams the syscall storm (dd bs=1 count=N: 4N raw_syscalls
# events, every process's, as in bench/run.sh) over loopback:
#
#	tdagent       tdagent -h -> tdlisten, TLS 1.3 (the defaults)
#	before        the same with the tdagent and tdlisten of --before DIR
#	              (a build of an older tree), when given
#	trace-cmd     trace-cmd record -N -t -B INSTANCE -> trace-cmd listen
#
# Both record in an instance of their own (tdagent always does; trace-cmd
# with -B, as in bench/concurrent.sh, so that it never waits for
# tests/e2e-tracecmd.sh, which holds the top-level buffer), every
# process's raw_syscalls, with the kernel's default ring size.
# The recorder's peak RSS is what wait4 reports for it (/usr/bin/time %M:
# the largest of the process and the children it reaped: for tdagent the
# privileged parent and the recorder it forks, for trace-cmd its per-CPU
# readers).  For tdagent the two processes' VmHWM are also sampled every
# 20 ms from /proc (the last value seen before each exits: a lower bound).
# Tools take turns within a run, so load changes hit all of them.  Run as
# root; binaries from --build DIR (default: the tree built into build/);
# trace-cmd under the sandbox shim where /work/shared/tools has one (a
# read-only /proc/sys).  Results: bench/out/rss.tsv, rss.txt.
set -euo pipefail

BLOCKS=1000000
REPEAT=3
BUILD=""
BEFORE=""

usage() {
	sed -n 's/^# usage: /usage: /p' "$0"
	exit "${1:-2}"
}

die() {
	echo "rss: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case "$1" in
	--blocks) [ $# -ge 2 ] || usage; BLOCKS=$2; shift 2 ;;
	--repeat) [ $# -ge 2 ] || usage; REPEAT=$2; shift 2 ;;
	--build) [ $# -ge 2 ] || usage; BUILD=$2; shift 2 ;;
	--before) [ $# -ge 2 ] || usage; BEFORE=$2; shift 2 ;;
	-h | --help) usage 0 ;;
	*) usage ;;
	esac
done

TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
# shellcheck source=bench/lib.sh
. bench/lib.sh
OUT=$TOP/bench/out
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/td-rss.XXXXXX)
LIVE=()
cleanup() {
	local p

	for p in ${LIVE[@]+"${LIVE[@]}"}; do
		kill -TERM "$p" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || die "run as root (tracefs)"
if [ -z "$BUILD" ]; then
	sh scripts/build.sh build >"$OUT/rss-build.log" 2>&1 ||
	    die "the build failed, see $OUT/rss-build.log"
	BUILD=$TOP/build
fi
for d in "$BUILD" ${BEFORE:+"$BEFORE"}; do
	[ -x "$d/tdagent" ] && [ -x "$d/tdlisten" ] ||
	    die "no tdagent and tdlisten in $d"
done
command -v trace-cmd >/dev/null || die "no trace-cmd"
SHIM=""
if [ -f /work/shared/tools/sandbox-shim.c ]; then
	SHIM=$TMP/shim.so
	gcc -shared -fPIC -O2 -o "$SHIM" /work/shared/tools/sandbox-shim.c \
	    -ldl || die "cannot build the sandbox shim"
fi
PKI=$TMP/pki
pki "$PKI" web1 >/dev/null 2>&1 || die "scripts/tdcert failed"

# The VmHWM (KiB) of process $1 and of its first child, sampled until $1
# exits, into file $2 as "PARENT CHILD" (the last values seen).
hwm_watch() {
	local p=$1 f=$2 c="" hp=0 hc=0 v

	while kill -0 "$p" 2>/dev/null; do
		[ -n "$c" ] || c=$(pgrep -P "$p" | head -1 || true)
		v=$(awk '/^VmHWM/ { print $2 }' "/proc/$p/status" \
		    2>/dev/null || true)
		[ -z "$v" ] || hp=$v
		if [ -n "$c" ]; then
			v=$(awk '/^VmHWM/ { print $2 }' "/proc/$c/status" \
			    2>/dev/null || true)
			[ -z "$v" ] || hc=$v
		fi
		echo "$hp $hc" >"$f"
		sleep 0.02
	done
}

# One streamed storm: run_td TOOL BUILDDIR RUN; appends to rss.tsv.
run_td() {
	local tool=$1 b=$2 run=$3 d=$TMP/$1 port lpid tpid apid rpid i w
	local hp hc load0

	load0=$(cut -d' ' -f1 /proc/loadavg)
	rm -rf "$d"
	mkdir -p "$d/l"
	port=$(free_port)
	/usr/bin/time -f '%U %S' -o "$d/ltime" \
	    "$b/tdlisten" -p "$port" -d "$d/l" --cert "$PKI/listener.pem" \
	    --key "$PKI/listener.key" --ca "$PKI/ca.pem" >"$d/listen.log" 2>&1 &
	lpid=$!
	LIVE=("$lpid")
	wait_listening "$port" "$lpid" || die "$tool: tdlisten did not start"
	/usr/bin/time -f '%M' -o "$d/time" "$b/tdagent" -h 127.0.0.1 \
	    -p "$port" -e raw_syscalls --cert "$PKI/web1.pem" \
	    --key "$PKI/web1.key" --ca "$PKI/ca.pem" >"$d/agent.out" \
	    2>"$d/agent.err" &
	tpid=$!
	LIVE+=("$tpid")
	apid=""
	for i in $(seq 400); do
		apid=$(pgrep -P "$tpid" | head -1 || true)
		[ -z "$apid" ] || break
		kill -0 "$tpid" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$apid" ] && wait_recording "$apid" || {
		cat "$d/agent.err" >&2
		die "$tool did not start recording"
	}
	hwm_watch "$apid" "$d/hwm" &
	w=$!
	sleep 0.5
	dd if=/dev/zero of=/dev/null bs=1 count="$BLOCKS" 2>/dev/null
	sleep 0.5
	rpid=$(pgrep -P "$apid" | head -1 || true)
	kill -INT "${rpid:-$apid}"
	wait "$tpid" || die "$tool failed: $(tail -2 "$d/agent.err")"
	wait "$w" || true
	kill -TERM "$(pgrep -P "$lpid" | head -1)"
	wait "$lpid" || die "$tool: tdlisten failed"
	LIVE=()
	read -r hp hc <"$d/hwm"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$run" \
	    "$(cat "$d/time")" "$hp" "$hc" "$load0" \
	    "$(awk '{ print $1 + $2 }' "$d/ltime")" >>"$OUT/rss.tsv"
}

# One streamed storm under trace-cmd record -N; appends to rss.tsv.
run_tc() {
	local run=$1 d=$TMP/tc port lpid tpid i kids load0

	load0=$(cut -d' ' -f1 /proc/loadavg)
	rm -rf "$d"
	mkdir -p "$d/l"
	port=$(free_port)
	env ${SHIM:+LD_PRELOAD=$SHIM} trace-cmd listen -p "$port" -d "$d/l" \
	    >"$d/listen.log" 2>&1 &
	lpid=$!
	LIVE=("$lpid")
	wait_listening "$port" "$lpid" || die "trace-cmd listen did not start"
	/usr/bin/time -f '%M' -o "$d/time" \
	    env ${SHIM:+LD_PRELOAD=$SHIM} stdbuf -oL trace-cmd record \
	    -N "127.0.0.1:$port" -t -B "tdrss-$$" -e raw_syscalls \
	    >"$d/rec.out" 2>"$d/rec.err" &
	tpid=$!
	LIVE+=("$tpid")
	for i in $(seq 1200); do
		grep -q 'Hit Ctrl^C' "$d/rec.out" 2>/dev/null && break
		kill -0 "$tpid" 2>/dev/null || break
		sleep 0.05
	done
	[ "$i" -lt 1200 ] || die "trace-cmd did not start recording"
	sleep 0.5
	dd if=/dev/zero of=/dev/null bs=1 count="$BLOCKS" 2>/dev/null
	sleep 0.5
	# time -> env -> stdbuf: trace-cmd record (the main process)
	kids=$(pgrep -P "$tpid" | head -1)
	kill -INT "$kids"
	wait "$tpid" || die "trace-cmd record failed: $(tail -2 "$d/rec.err")"
	for i in $(seq 200); do
		[ -z "$(pgrep -P "$lpid" || true)" ] && break
		sleep 0.05
	done
	kill -INT "$lpid"
	wait "$lpid" || true
	LIVE=()
	printf '%s\t%s\t%s\t-\t-\t%s\t-\n' trace-cmd "$run" \
	    "$(cat "$d/time")" "$load0" >>"$OUT/rss.tsv"
}

printf 'tool\trun\tmaxrss_kb\tparent_hwm_kb\trecorder_hwm_kb\tload\tlistener_cpu_s\n' \
    >"$OUT/rss.tsv"
for r in $(seq "$REPEAT"); do
	run_td tdagent "$BUILD" "$r"
	[ -z "$BEFORE" ] || run_td before "$BEFORE" "$r"
	run_tc "$r"
done

{
	echo "agent peak RSS, dd $BLOCKS blocks streamed over loopback" \
	    "(bench/rss.sh)"
	echo "$(nproc) CPUs, $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC')," \
	    "tree $(git describe --always --dirty 2>/dev/null || echo unknown)"
	awk -F'\t' "$BENCH_AWK_STATS"'
	NR > 1 {
		n[$1]++
		m[$1, n[$1]] = $3 / 1024
		if ($4 != "-") { p[$1, n[$1]] = $4 / 1024; q[$1, n[$1]] = $5 / 1024 }
		l[$1, n[$1]] = $6
		if ($7 != "-") c[$1, n[$1]] = $7
	}
	function row(t, a, what,    i, v, k) {
		k = n[t]
		for (i = 1; i <= k; i++)
			v[i] = a[t, i]
		sort(v, k)
		printf "  %-10s %-28s %5.1f [%4.1f..%4.1f]\n", t, what,
		    med(v, k), v[1], v[k]
		return med(v, k)
	}
	END {
		print "median [min..max] MB over " n["tdagent"] " runs"
		td = row("tdagent", m, "peak RSS (wait4)")
		row("tdagent", p, "parent VmHWM (sampled)")
		row("tdagent", q, "recorder VmHWM (sampled)")
		if (n["before"] > 0) {
			bf = row("before", m, "peak RSS (wait4)")
			row("before", p, "parent VmHWM (sampled)")
			row("before", q, "recorder VmHWM (sampled)")
		}
		row("tdagent", c, "(tdlisten CPU s)")
		if (n["before"] > 0)
			row("before", c, "(tdlisten CPU s)")
		tc = row("trace-cmd", m, "peak RSS (wait4)")
		printf "  tdagent / trace-cmd %.3f", td / tc
		if (n["before"] > 0)
			printf ", before / trace-cmd %.3f", bf / tc
		printf "\n"
		for (i = 1; i <= n["tdagent"]; i++)
			v[i] = l["tdagent", i]
		sort(v, n["tdagent"])
		printf "  load average at start %.2f [%.2f..%.2f]\n",
		    med(v, n["tdagent"]), v[1], v[n["tdagent"]]
	}' "$OUT/rss.tsv"
} | tee "$OUT/rss.txt"
