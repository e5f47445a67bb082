#!/usr/bin/env bash
# bench/load.sh: one tdlisten against 1,000 agents at once (tests/tdload, the
# load generator: a real recording replayed over TLS on every connection),
# for a few mixes of idle and streaming agents; see bench/README.md, "1,000
# agents on one listener".
#
# usage: bench/load.sh [-n N] [--repeat R] [--mix NAME]... [--keep]
#
# Mixes (N connections each, all open at once: tdload --together, and all
# connecting at once: --ramp N):
#	idle	every agent idle 30 s after its metadata, then its pages
#	mix	N/5 idle for 30 s, the others streaming their pages over 30 s
#	fast	N/5 idle for 30 s, the others streaming as fast as they can
#	standby	N standby agents (tdload --standby 30: STANDBY, WELCOME,
#		then only KEEPALIVE, as tdagent --standby), held 30 s once all
#		N are welcomed: no recording, one descriptor each; what an
#		idle standby agent costs.  While they are held, tdctl list
#		(tdlisten --control) must count exactly N agents, and the
#		listener's RSS then is taken; "files exact" means every
#		connection was held to the end and listed
# For each run: the listener's peak RSS (VmHWM), its CPU (user + system,
# /proc/PID/stat) and CPU per MB received, the time from tdload's start to
# the last DONE, the most connections open at once, and whether every file
# is exact (tests/tdcount, libtracecmd: each file holds the source's events
# and there is one per agent).  Holds /tmp/td-bench.lock while it measures.
# Run as root (the source recording uses tracefs).  Results: bench/out/
# load.txt and load.tsv; logs beside them.
set -euo pipefail

N=1000
REPEAT=1
KEEP=0
MIXES=()
LOCK=/tmp/td-bench.lock

usage() {
	sed -n 's/^# usage: /usage: /p' "$0"
	exit "${1:-2}"
}

die() {
	echo "bench/load: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case "$1" in
	-n)
		[ $# -ge 2 ] || usage
		N=$2
		shift 2
		;;
	--repeat)
		[ $# -ge 2 ] || usage
		REPEAT=$2
		shift 2
		;;
	--mix)
		[ $# -ge 2 ] || usage
		case $2 in
		idle | mix | fast | standby) MIXES+=("$2") ;;
		*) die "unknown mix '$2' (idle, mix, fast, standby)" ;;
		esac
		shift 2
		;;
	--keep)
		KEEP=1
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
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 5 ] || die "-n wants a number >= 5"
[[ "$REPEAT" =~ ^[0-9]+$ ]] && [ "$REPEAT" -ge 1 ] ||
    die "--repeat wants a number >= 1"
[ ${#MIXES[@]} -gt 0 ] || MIXES=(idle mix fast)
[ "$(id -u)" = 0 ] || die "needs root (the source recording uses tracefs)"

TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$TOP/bench/lib.sh"
OUT=$TOP/bench/out
cd "$TOP"
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/tdload.XXXXXX)
LPID=""
cleanup() {
	if [ -n "$LPID" ] && kill -0 "$LPID" 2>/dev/null; then
		kill -TERM "$LPID" 2>/dev/null || true
		wait "$LPID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build: in the tree when it is configured there, else in build-bench/ ---
LOG=$OUT/load-build.log
: >"$LOG"
if [ -f config.status ]; then
	BDIR=$TOP
else
	BDIR=$TOP/build-bench
	if [ ! -x configure ] || [ configure.ac -nt configure ] ||
	    [ Makefile.am -nt Makefile.in ]; then
		autoreconf -fi >>"$LOG" 2>&1 || die "autoreconf failed, see $LOG"
	fi
	mkdir -p "$BDIR"
	[ -f "$BDIR/Makefile" ] || (cd "$BDIR" && "$TOP/configure" -q) \
	    >>"$LOG" 2>&1 || die "configure failed, see $LOG"
fi
make -C "$BDIR" -j"$(nproc)" tdagent tdlisten tdctl tests/tdload \
    tests/tdcount >>"$LOG" 2>&1 || die "make failed, see $LOG"
# run copies: a rebuild in the tree cannot swap them between runs
for p in tdagent tdlisten tdctl tests/tdload tests/tdcount; do
	cp "$BDIR/$p" "$TMP/"
done
REV=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
git diff --quiet HEAD 2>/dev/null || REV="$REV+changes"

# --- certificates and the recording every agent replays -------------------
PKI=$TMP/pki
pki "$PKI" loadgen >>"$LOG" 2>&1 || die "scripts/tdcert failed, see $LOG"
# a fixed workload, so that runs on a busy machine replay the same amount:
# dd's 10,000 one-byte blocks, 4 raw_syscalls events each, and its sched
"$TMP/tdagent" -q -o "$TMP/src.dat" -e sched -e raw_syscalls -F -b 4096 -- \
    dd if=/dev/zero of=/dev/null bs=1 count=10000 status=none ||
    die "cannot record the source"
SRC_EVENTS=$("$TMP/tdcount" "$TMP/src.dat" | awk '$1 == "events" { print $2 }')
SRC_MB=$(awk -v s="$(stat -c %s "$TMP/src.dat")" 'BEGIN { printf "%.1f", s / 1e6 }')

exec 9>"$LOCK"
if ! flock -n 9; then
	echo "bench/load: waiting for $LOCK" >&2
	flock 9
fi

CLK_TCK=$(getconf CLK_TCK)

# One run of mix $1, number $2: a fresh listener, tdload, the checks.
# Appends a line to load.tsv.
run_one() {
	local mix=$1 rep=$2 idle spread dir port load rc ticks cpu hwm fds
	local secs peak mb files exact try hs listed=- rss0=- rss=- tpid
	local -a targs

	case $mix in
	idle) idle=$N spread=0 ;;
	mix) idle=$((N / 5)) spread=30 ;;
	fast) idle=$((N / 5)) spread=0 ;;
	standby) idle=$N spread=0 ;;
	esac
	dir=$TMP/out-$mix-$rep
	rm -rf "$dir"
	# a free port (lib.sh); another one if tdlisten cannot bind it
	for try in 1 2 3 4 5; do
		port=$(free_port) || die "no free port"
		# one certificate for all: --max-per-identity lets it open N;
		# tdload does not come back when refused, and its N handshakes
		# at once (--ramp N) come from one address: the handshake
		# budget must hold them all
		# (at most 4096 in the handshake: a standby crowd is through
		# it at once, then holds --max-sessions slots)
		hs=$((N > 4096 ? 4096 : N))
		"$TMP/tdlisten" -p "$port" -d "$dir" --cert "$PKI/listener.pem" \
		    --key "$PKI/listener.key" --ca "$PKI/ca.pem" \
		    --max-per-identity "$N" --max-standby-per-identity "$N" \
		    --max-handshakes "$hs" \
		    --max-handshakes-per-address "$hs" --max-sessions "$N" \
		    --handshake-timeout 600 --control "$TMP/control" \
		    >"$OUT/load-$mix.listener.log" 2>&1 &
		LPID=$!
		wait_listening "$port" "$LPID" && break
		wait "$LPID" 2>/dev/null || true
		LPID=""
		grep -q 'Address already in use' "$OUT/load-$mix.listener.log" &&
		    [ "$try" -lt 5 ] && continue
		die "tdlisten did not start, see $OUT/load-$mix.listener.log"
	done
	fds=$(ls "/proc/$LPID/fd" | wc -l)
	rss0=$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$LPID/status")
	load=$(cut -d' ' -f1 /proc/loadavg)
	targs=(-h localhost -p "$port" --cert "$PKI/loadgen.pem"
	    --key "$PKI/loadgen.key" --ca "$PKI/ca.pem" -n "$N" -i "$idle"
	    -t 30 --ramp "$N" --together --timeout 900)
	[ "$spread" = 0 ] || targs+=(-T "$spread")
	[ "$mix" != standby ] || targs=("${targs[@]:0:10}" -n "$N"
	    --standby 30 --ramp 64 --timeout 900)
	echo "bench/load: $mix run $rep: tdload ${targs[*]:4}" >&2
	rc=0
	if [ "$mix" = standby ]; then
		# the last run's "standing by" must not be read for this one's
		rm -f "$OUT/load-$mix.tdload.err"
		"$TMP/tdload" "${targs[@]}" "$TMP/src.dat" \
		    >"$OUT/load-$mix.tdload.out" \
		    2>"$OUT/load-$mix.tdload.err" &
		tpid=$!
		# all N welcomed (or failed): tdload says so, then holds them
		# 30 s: count the listener's standby agents and take its RSS
		while kill -0 "$tpid" 2>/dev/null &&
		    ! grep -qs 'standing by' "$OUT/load-$mix.tdload.err"; do
			sleep 0.2
		done
		if kill -0 "$tpid" 2>/dev/null; then
			listed=$("$TMP/tdctl" -S "$TMP/control" list |
			    grep -c '^agent ' || true)
			rss=$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' \
			    "/proc/$LPID/status")
		fi
		echo "bench/load: standby agents listed: $listed" >&2
		wait "$tpid" || rc=$?
	else
		"$TMP/tdload" "${targs[@]}" "$TMP/src.dat" \
		    >"$OUT/load-$mix.tdload.out" \
		    2>"$OUT/load-$mix.tdload.err" || rc=$?
	fi
	kill -0 "$LPID" 2>/dev/null || die "tdlisten died during $mix"
	# sessions end when DONE has left: wait until they are all gone
	for _ in $(seq 100); do
		[ "$(ls "/proc/$LPID/fd" | wc -l)" -le "$fds" ] && break
		sleep 0.1
	done
	ticks=$(awk '{ print $14 + $15 }' "/proc/$LPID/stat")
	cpu=$(awk -v t="$ticks" -v h="$CLK_TCK" 'BEGIN { printf "%.1f", t / h }')
	hwm=$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$LPID/status")
	kill -TERM "$LPID"
	wait "$LPID" || true
	LPID=""
	# "tdload: N connections: D done, F failed; at most P open at once;
	#  M MB sent in S s"
	read -r secs peak mb < <(awk '/^tdload: / { for (i = 1; i <= NF; i++) {
	    if ($i == "most") p = $(i + 1); if ($i == "MB") m = $(i - 1);
	    if ($i == "in") s = $(i + 1) } print s, p, m }' \
	    "$OUT/load-$mix.tdload.out")
	if [ "$mix" = standby ]; then
		# no file: every connection held to the end, all at once,
		# and every one listed as a standby agent meanwhile
		files=$(grep -c '^ok ' "$OUT/load-$mix.tdload.out" || true)
		exact=$files
		[ "$peak" = "$N" ] && [ "$listed" = "$N" ] || exact=0
	else
		files=$(find "$dir" -name '*.dat' | wc -l)
		(cd "$dir" && find . -name '*.dat' -print0 | xargs -0 -P 2 \
		    -n 1 "$TMP/tdcount" | awk '$1 == "events"') >"$TMP/counts"
		exact=$(awk -v n="$SRC_EVENTS" '$2 == n' "$TMP/counts" | wc -l)
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
	    "$mix" "$rep" "$N" "$idle" "$spread" "$rc" "$peak" "$secs" "$hwm" \
	    "$cpu" "$mb" "$files/$exact" "$load" "$listed" "$rss0" "$rss" \
	    >>"$OUT/load.tsv"
	[ "$KEEP" = 1 ] || rm -rf "$dir"
}

printf 'mix\trun\tagents\tidle\tstream_s\ttdload_rc\topen_at_once\tsecs_to_all_done\tlistener_hwm_MB\tlistener_cpu_s\tMB_received\tfiles/exact\tload\tstandby_listed\tlistener_rss_start_MB\tlistener_rss_held_MB\n' \
    >"$OUT/load.tsv"
START_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
for mix in "${MIXES[@]}"; do
	for rep in $(seq "$REPEAT"); do
		run_one "$mix" "$rep"
	done
done

# --- the table: min / median / max over the repeats -----------------------
{
	echo "bench/load.sh -n $N --repeat $REPEAT, tree at $REV, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "source: tdagent -e sched -e raw_syscalls -F -- dd ... count=10000, $SRC_MB MB," \
	    "$SRC_EVENTS events; each agent sends it all (metadata with kallsyms, pages, options)"
	echo "load average at start: $START_LOAD ($(nproc) CPUs)"
	echo
	awk -F'\t' -v N="$N" '
	NR == 1 { next }
	{
		k = $1; mixes[k] = 1; n[k]++
		v[k, "open", n[k]] = $7; v[k, "secs", n[k]] = $8
		v[k, "hwm", n[k]] = $9; v[k, "cpu", n[k]] = $10
		v[k, "cpuMB", n[k]] = $11 > 0 ? $10 * 1000 / $11 : 0
		v[k, "mb", n[k]] = $11
		if ($6 != 0 || $12 != N "/" N) bad[k]++
		desc[k] = k == "standby" ? $3 " standby agents" : \
		    $4 " idle, " ($3 - $4) " streaming" \
		    ($5 > 0 ? " over " $5 " s" : ($3 > $4 ? " at full speed" : ""))
		load[k] = load[k] (load[k] == "" ? "" : " ") $13
	}
	function stat(k, f,    i, j, t, a, m, fmt) {
		m = n[k]
		for (i = 1; i <= m; i++) a[i] = v[k, f, i]
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		fmt = f == "open" ? "%d" : "%.1f"
		if (m == 1) return sprintf(fmt, a[1])
		return sprintf(fmt "/" fmt "/" fmt, a[1], a[int((m + 1) / 2)], a[m])
	}
	END {
		printf "| mix | agents | open at once | s to all DONE | listener peak RSS MB | listener CPU s | MB received | listener CPU ms/MB | files exact | load |\n"
		printf "|---|---|---|---|---|---|---|---|---|---|\n"
		for (k in mixes)
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			    k, desc[k], stat(k, "open"), stat(k, "secs"),
			    stat(k, "hwm"), stat(k, "cpu"), stat(k, "mb"),
			    stat(k, "cpuMB"),
			    bad[k] ? "NO (" bad[k] " runs)" : "yes, all " N,
			    load[k]
	}' "$OUT/load.tsv"
	# standby: the agents tdctl listed and the listener while they were held
	awk -F'\t' 'NR > 1 && $1 == "standby" {
		per = $16 != "-" && $3 > 0 ? ($16 - $15) * 1024 / $3 : 0
		printf "standby run %s: standby agents listed: %s of %s; " \
		    "listener RSS %s MB at start, %s MB while held " \
		    "(%.1f KB per agent), peak %s MB (%.1f KB per agent)\n",
		    $2, $14, $3, $15, $16, per, $9, $9 * 1024 / $3
	}' "$OUT/load.tsv"
} | tee "$OUT/load.txt"
awk -F'\t' -v N="$N" 'NR > 1 && ($6 != 0 || $12 != N "/" N) { bad = 1 }
    END { exit bad }' "$OUT/load.tsv" ||
    die "some runs were not exact (files/exact in $OUT/load.tsv)"
