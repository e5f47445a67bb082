#!/usr/bin/env bash
# bench/all.sh: every streaming benchmark of tracedock against trace-cmd
# 3.1.6 in one command, and one table of them; see bench/README.md, "All
# in one table".
#
# usage: bench/all.sh [--repeat R] [--quick] [--only 'stream conc load tsync']
#                     [--stream-args A] [--conc-args A] [--load-args A]
#                     [--table]
#
# Runs, one after the other (each builds what it needs and takes
# /tmp/td-bench.lock only while it measures):
#
#   stream  bench/run.sh --stream: 1 agent at full rate (dd storm of
#           5,000,000 blocks), tdagent -> tdlisten (TLS, and plain TCP)
#           against trace-cmd record -N -t -> trace-cmd listen
#   conc    bench/concurrent.sh: 1, 4 and 16 agents at once, each with its
#           own dd storm (500,000 blocks) and its own instance, against as
#           many trace-cmd record -N -t clients of one trace-cmd listen
#   tsync   bench/tsync.sh 15: the listener's default time sync, six
#           agents of six trace clocks recording the same occurrences;
#           trace-cmd record -N has no time sync
#   load    bench/load.sh: 1,000 agents (tests/tdload) on one tdlisten;
#           trace-cmd has no counterpart (a process per client and per CPU)
#
# then prints the table (bench/out/all.txt) from their results
# (bench/out/stream.tsv, conc-agents.tsv, conc-runs.tsv, load.tsv).
# --repeat R: runs per tool and case (default 3; load.sh: R runs per mix).
# --quick: small sizes, one run each (a smoke test, not a measurement).
# --only: some of the four (the default: stream conc load).  --stream-args, --conc-args, --load-args:
# more options for that script (after the others, so they win: for
# instance --load-args '--repeat 1').  --table: only print the table from
# the results already in bench/out/.  Run as root.
set -euo pipefail

REPEAT=3
QUICK=0
ONLY="stream conc load"
TABLE_ONLY=0
EXTRA_STREAM=""
EXTRA_CONC=""
EXTRA_LOAD=""

usage() {
	sed -n 's/^# usage: /usage: /p; s/^#                     /       /p' "$0" |
	    head -3
	exit "${1:-2}"
}

die() {
	echo "bench/all: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case "$1" in
	--repeat) [ $# -ge 2 ] || usage; REPEAT=$2; shift 2 ;;
	--quick) QUICK=1; shift ;;
	--only) [ $# -ge 2 ] || usage; ONLY=$2; shift 2 ;;
	--stream-args) [ $# -ge 2 ] || usage; EXTRA_STREAM=$2; shift 2 ;;
	--conc-args) [ $# -ge 2 ] || usage; EXTRA_CONC=$2; shift 2 ;;
	--load-args) [ $# -ge 2 ] || usage; EXTRA_LOAD=$2; shift 2 ;;
	--table) TABLE_ONLY=1; shift ;;
	-h | --help) usage 0 ;;
	*) usage ;;
	esac
done
[[ "$REPEAT" =~ ^[0-9]+$ ]] && [ "$REPEAT" -ge 1 ] ||
    die "--repeat wants a number >= 1"
for p in $ONLY; do
	case $p in stream | conc | load | tsync) ;;
	*) die "unknown part '$p'" ;; esac
done

TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$TOP/bench/lib.sh"
OUT=$TOP/bench/out
cd "$TOP"

if [ "$TABLE_ONLY" = 0 ]; then
	[ "$(id -u)" = 0 ] || die "needs root (ftrace instances, trace-cmd)"
	mkdir -p "$OUT"
	if [ "$QUICK" = 1 ]; then
		REPEAT=1
		stream_args=(--blocks 500000)
		conc_args=(--blocks 100000)
		load_args=(-n 100 --mix fast)
	else
		stream_args=()
		conc_args=()
		load_args=()
	fi
	read -r -a x <<<"$EXTRA_STREAM"
	stream_args+=(${x[@]+"${x[@]}"})
	read -r -a x <<<"$EXTRA_CONC"
	conc_args+=(${x[@]+"${x[@]}"})
	read -r -a x <<<"$EXTRA_LOAD"
	load_args+=(${x[@]+"${x[@]}"})
	echo "bench/all: start $(date -u '+%H:%M:%S UTC'), uptime: $(uptime)"
	for p in $ONLY; do
		case $p in
		stream)
			bash bench/run.sh --stream --repeat "$REPEAT" \
			    ${stream_args[@]+"${stream_args[@]}"} ||
			    die "bench/run.sh --stream failed"
			;;
		conc)
			bash bench/concurrent.sh --repeat "$REPEAT" \
			    ${conc_args[@]+"${conc_args[@]}"} ||
			    die "bench/concurrent.sh failed"
			;;
		tsync)
			# the line of each run: largest pair median and clean max
			tb=${TD_BUILDDIR:-$TOP/build}
			if [ -z "${TD_BUILDDIR:-}" ]; then
				sh scripts/build.sh build > "$OUT/tsync-build.log" \
				    2>&1 || die "scripts/build.sh failed"
			fi
			make -s -C "$tb" tdagent tdlisten tests/tdpoke \
			    >> "$OUT/tsync-build.log" 2>&1 || die "make failed"
			printf 'run\tmedian_ns\tclean_max_ns\tload\n' \
			    > "$OUT/tsync.tsv"
			for r in $(seq "$REPEAT"); do
				flock /tmp/td-bench.lock env TD_BUILDDIR="$tb" \
				    sh bench/tsync.sh 15 > "$OUT/tsync-$r.txt" 2>&1 ||
				    die "bench/tsync.sh failed: $OUT/tsync-$r.txt"
				awk -v r="$r" '/^tracedock time sync/ {
				    sub(/.*load /, ""); l = $1 }
				    /^corrected \|dt\| over/ {
				    for (i = 1; i <= NF; i++) {
					if ($i == "largest" && $(i + 1) == "median")
						m = $(i + 2)
					if ($(i + 1) == "clean" && $(i + 2) == "max")
						c = $(i + 3) }
				    printf "%s\t%s\t%s\t%s\n", r, m, c, l }' \
				    "$OUT/tsync-$r.txt" >> "$OUT/tsync.tsv"
			done
			;;
		load)
			bash bench/load.sh --repeat "$REPEAT" \
			    ${load_args[@]+"${load_args[@]}"} ||
			    die "bench/load.sh failed"
			;;
		esac
		echo "bench/all: $p done $(date -u '+%H:%M:%S UTC'), uptime: $(uptime)"
	done
	echo
fi

# --- the table ------------------------------------------------------------

files=()
for f in stream.tsv conc-agents.tsv conc-runs.tsv load.tsv tsync.tsv; do
	[ -f "$OUT/$f" ] && files+=("$OUT/$f")
done
[ ${#files[@]} -gt 0 ] || die "no results in $OUT (run without --table)"
{
echo "tracedock against trace-cmd 3.1.6, streamed over loopback (bench/all.sh)"
echo "$(nproc) CPUs, $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'), tree" \
    "$(git describe --always --dirty 2>/dev/null || echo unknown)"
echo "median [min..max] over runs (per agent: over agents and runs); td/tc:" \
    "ratio of the medians"
awk -F'\t' "$BENCH_AWK_STATS"'
# put(SCENARIO, TOOL, METRIC, VALUE): one sample ("-": none)
function put(s, t, m, x) {
	if (x == "-" || x == "")
		return
	if (!(s in seen)) {
		seen[s] = 1
		order[++ns] = s
	}
	v[s, t, m, ++cnt[s, t, m]] = x
}
FNR == 1 { next }
FILENAME ~ /stream.tsv$/ {
	# tdagent-tls and trace-cmd-net (tdagent-tcp: see stream.txt)
	t = $1 == "tdagent-tls" ? "td" : $1 == "trace-cmd-net" ? "tc" : ""
	if (t == "")
		next
	s = "1 agent at full rate: dd " $4 - 0 " events (bench/run.sh --stream)"
	mb = $12 / 1e6
	put(s, t, "capture", $3 / $4)
	put(s, t, "acpu", $7 * 1000 / mb)
	put(s, t, "lcpu", $9 * 1000 / mb)
	put(s, t, "arss", $8 / 1024)
	put(s, t, "lrss", $11 / 1024)
	put(s, t, "ready", $14)
	put(s, t, "wire", $19 == "-" ? "-" : $19 / $12)
	put(s, t, "load", $18)
	next
}
FILENAME ~ /conc-agents.tsv$/ {
	t = $1 == "tdagent" ? "td" : "tc"
	s = $2 " concurrent agent" ($2 > 1 ? "s" : "") ", each dd " $5 \
	    " blocks (bench/concurrent.sh)"
	put(s, t, "capture", $6 / $7)
	if ($13 > 0)
		put(s, t, "acpu", $10 * 1000 / ($13 / 1e6))
	put(s, t, "arss", $12 / 1024)
	put(s, t, "ready", $15 - $14)
	next
}
FILENAME ~ /conc-runs.tsv$/ {
	t = $1 == "tdagent" ? "td" : "tc"
	s = $2 " concurrent agent" ($2 > 1 ? "s" : "") ", each dd " $4 \
	    " blocks (bench/concurrent.sh)"
	if ($11 > 0) {
		put(s, t, "lcpu", $5 * 1000 / ($11 / 1e6))
		put(s, t, "wire", $10 / $11)
	}
	put(s, t, "lrss", $7 / 1024)
	put(s, t, "lpss", $9 / 1024)
	put(s, t, "load", $13)
	next
}
FILENAME ~ /load.tsv$/ {
	s = $3 " agents on one tdlisten, mix " $1 " (bench/load.sh)"
	split($12, fe, "/")
	put(s, "td", "capture", $3 > 0 ? fe[2] / $3 : "-")
	if ($11 > 0)
		put(s, "td", "lcpurx", $10 * 1000 / $11)
	put(s, "td", "lrss", $9)
	put(s, "td", "done", $8)
	put(s, "td", "load", $13)
	next
}
FILENAME ~ /tsync.tsv$/ {
	s = "time sync at the defaults, 15 pairs of 6 trace clocks, 15 s" \
	    " (bench/tsync.sh; trace-cmd -N: none)"
	put(s, "td", "tsmed", $2 / 1000)
	put(s, "td", "tsmax", $3 / 1000)
	put(s, "td", "load", $4)
	next
}
END {
	nm = split("capture acpu lcpu lcpurx arss lrss lpss ready done wire " \
	    "tsmed tsmax load", ms, " ")
	label["tsmed"] = "largest pair median |dt| us"
	label["tsmax"] = "largest pair clean max |dt| us"
	fmt["tsmed"] = "%.3f"; fmt["tsmax"] = "%.2f"
	label["capture"] = "capture (captured/expected)"
	label["acpu"] = "agent CPU ms per ring MB"
	label["lcpu"] = "listener CPU ms per ring MB"
	label["lcpurx"] = "listener CPU ms per MB received"
	label["arss"] = "agent peak RSS MB"
	label["lrss"] = "listener peak RSS MB (1 process)"
	label["lpss"] = "listener PSS MB (all processes)"
	label["ready"] = "file ready after workload end s"
	label["done"] = "s to all DONE"
	label["wire"] = "wire bytes / ring bytes"
	label["load"] = "load average at start"
	fmt["capture"] = "%.4f"; fmt["acpu"] = "%.2f"; fmt["lcpu"] = "%.2f"
	fmt["lcpurx"] = "%.2f"; fmt["arss"] = "%.1f"; fmt["lrss"] = "%.1f"
	fmt["lpss"] = "%.1f"; fmt["ready"] = "%.3f"; fmt["done"] = "%.1f"
	fmt["wire"] = "%.3f"; fmt["load"] = "%.2f"
	noratio["load"] = 1
	printf "\n%-34s  %-28s  %-28s  %6s\n", "", "tdagent -> tdlisten, TLS",
	    "trace-cmd record -N -t", "td/tc"
	for (i = 1; i <= ns; i++) {
		s = order[i]
		printf "%s\n", s
		for (j = 1; j <= nm; j++) {
			m = ms[j]
			if (!cnt[s, "td", m] && !cnt[s, "tc", m])
				continue
			printf "  %-32s", label[m]
			for (y = 1; y <= 2; y++) {
				t = y == 1 ? "td" : "tc"
				c = cnt[s, t, m]
				if (!c) {
					md[t] = "-"
					printf "  %-28s", "n/a"
					continue
				}
				for (k = 1; k <= c; k++)
					a[k] = v[s, t, m, k] + 0
				sort(a, c)
				md[t] = med(a, c)
				printf "  %-28s", sprintf(fmt[m] " [" fmt[m] ".." \
				    fmt[m] "]", md[t], a[1], a[c])
			}
			if (m in noratio || md["td"] == "-" || md["tc"] == "-" ||
			    md["tc"] <= 0)
				printf "\n"
			else
				printf "  %6.3f\n", md["td"] / md["tc"]
		}
	}
}' "${files[@]}"
} | tee "$OUT/all.txt"
