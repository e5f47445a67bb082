#!/usr/bin/env bash
# bench/hcache.sh: what the header cache saves (issue 16, part 4): bytes on
# the wire and start-up time, with tdlisten's cache (protocol version 4, the
# default) and without it (--no-header-cache: every section sent whole, as
# protocol version 3 did), over loopback, --insecure (TLS costs the same
# both ways).  See bench/README.md, "The header cache".
#
# usage: bench/hcache.sh [-n N] [-P PARALLEL] [--keep]
#
#   1. one agent, ten recordings: tdagent -h -e sched -- a command that notes
#      when it starts (tdagent starts it once tracing is on); for the tenth:
#      the bytes the listener received (its "done" line) and the time from
#      tdagent's start to tracing on.
#   2. N agents of one kernel build (default 1000): tests/tdfeed replays one
#      short recording (tdagent -o, 0.2 s of sched_switch) from N loopback
#      addresses, each its own identity, PARALLEL at a time (default 8), two
#      rounds: the first recording of each agent (only the shared formats
#      can come from the cache: kallsyms is per identity) and the second
#      (everything can); the bytes the listener received in all and the
#      round's wall-clock time.
# Run as root (tracefs).  Results: bench/out/hcache.txt; logs beside it.
set -euo pipefail

N=1000
PAR=8
KEEP=0
while [ $# -gt 0 ]; do
	case "$1" in
	-n) N=$2; shift 2 ;;
	-P) PAR=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	*) sed -n 's/^# usage: /usage: /p' "$0"; exit 2 ;;
	esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
B=${TD_BUILDDIR:-$HERE/../build}
TDAGENT=$B/tdagent
TDLISTEN=$B/tdlisten
TDFEED=$B/tests/tdfeed
[ -x "$TDFEED" ] || make -C "$B" tests/tdfeed >/dev/null
# pki, free_port, start_listener (of $TDLISTEN), reap: tests/harness.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
OUTD=$HERE/out
mkdir -p "$OUTD"
W=$(mktemp -d /tmp/td-hcache.XXXXXX)
TMP=$W	# where free_port builds tdport if $B has none
[ "$KEEP" = 1 ] || trap 'rm -rf "$W"' EXIT
RES=$OUTD/hcache.txt
: > "$RES"
LPID=

listener() {	# listener LOG DIR [ARGS]: sets PORT, LPID
	local log=$1 dir=$2
	shift 2
	start_listener "$log" --insecure -d "$dir" --resume-wait 0 \
	    --max-per-identity 100 "$@" ||
	    { echo "bench/hcache: tdlisten did not start" >&2; exit 1; }
	PORT=$LPORT
}
stop() {
	reap "$LPID"
}
# cpu PID: user + system CPU of a process so far, in ms
cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{ printf "%d\n", ($14 + $15) * 1000 / hz }' \
	    "/proc/$1/stat"
}
# bytes LOG NAME: what the listener received for recording NAME
bytes() {
	sed -n "s/.*'$2'.*: done after .* pages, \([0-9]*\) bytes,.*/\1/p" "$1"
}

# ---- 1. one agent, ten recordings, with and without the cache taking
# turns (two listeners at once), so that a busy machine slows both alike
listener "$W/l1-off.log" "$W/o1-off" --no-header-cache
POFF=$PORT LOFF=$LPID
listener "$W/l1-on.log" "$W/o1-on"
PON=$PORT LON=$LPID
for i in $(seq 1 10); do
	for mode in off on; do
		p=$PON
		[ "$mode" = off ] && p=$POFF
		t0=$(date +%s%N)
		"$TDAGENT" -h 127.0.0.1 -p "$p" --insecure --name "r$i" \
		    -e sched -- sh -c "date +%s%N > $W/t1; sleep 0.2" \
		    2> "$W/a1-$mode-$i.err"
		t1=$(cat "$W/t1")
		echo "$mode $i $(( (t1 - t0) / 1000000 )) $(bytes "$W/l1-$mode.log" "r$i")" \
		    >> "$W/one.tsv"
	done
done
LPID=$LOFF stop
LPID=$LON stop
{
	echo "1. One agent, ten recordings (tdagent -e sched, 0.2 s each)"
	echo
	echo "| cache | 10th: bytes received | 10th: start-up to tracing on (ms) | 1st: bytes | 1st: start-up (ms) | median start-up of 2..10 (ms) |"
	echo "|---|---|---|---|---|---|"
	for mode in off on; do
		awk -v m="$mode" '$1 == m { s[$2] = $3; b[$2] = $4 }
		    END {
			n = 0
			for (i = 2; i <= 10; i++) a[++n] = s[i]
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && a[j-1] > a[j]; j--) {
					t = a[j]; a[j] = a[j-1]; a[j-1] = t
				}
			printf "| %s | %d | %d | %d | %d | %d |\n",
			    m == "on" ? "on" : "off (--no-header-cache)",
			    b[10], s[10], b[1], s[1], a[5]
		    }' "$W/one.tsv"
	done
	echo
} >> "$RES"

# ---- 2. N agents of one kernel build
"$TDAGENT" -q -o "$W/src.dat" -e sched:sched_switch -s 0.2
addr() {	# the loopback address of agent I (up to 62,500 of them)
	echo "127.1.$(( $1 / 250 )).$(( $1 % 250 + 1 ))"
}
feed_round() {	# feed_round LOG ROUND
	local i
	for i in $(seq 0 $((N - 1))); do
		echo "$(addr "$i") a$i-$2"
	done | xargs -P "$PAR" -n 2 sh -c \
	    't0=$(date +%s%N); TDFEED_SRC=$0 TDFEED_HCACHE=1 TDFEED_ID='"$2"' "'"$TDFEED"'" 127.0.0.1 '"$PORT"' "'"$W/src.dat"'" good "$1" 2>/dev/null ||
	    echo "tdfeed $0 failed" >&2; echo $(( ($(date +%s%N) - t0) / 1000000 ))' \
	    > "$W/ms-$mode-$2"
}
for mode in off on; do
	args=()
	[ "$mode" = off ] && args=(--no-header-cache)
	listener "$W/l2-$mode.log" "$W/o2-$mode" "${args[@]}"
	for round in 1 2; do
		t0=$(date +%s%N)
		c0=$(cpu "$LPID")
		feed_round "$W/l2-$mode.log" "$round"
		t1=$(date +%s%N)
		c1=$(cpu "$LPID")
		total=$(sed -n "s/.*'a[0-9]*-$round'.*: done after .* pages, \([0-9]*\) bytes,.*/\1/p" \
		    "$W/l2-$mode.log" | awk '{ s += $1; n++ } END { printf "%.0f %d\n", s, n }')
		med=$(sort -n "$W/ms-$mode-$round" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
		echo "$mode $round $(( (t1 - t0) / 1000000 )) $total $med $((c1 - c0))" >> "$W/many.tsv"
	done
	stop
	du -sb "$W/o2-$mode/.tdlisten-cache" 2>/dev/null | \
	    awk -v m="$mode" '{ print m, $1 }' >> "$W/cache.tsv" || true
	rm -rf "$W/o2-$mode"
done
{
	echo "2. $N agents of one kernel build (tests/tdfeed, one recording replayed, $PAR at a time)"
	echo
	echo "| cache | round | recordings done | bytes received in all | per recording | median time per recording (ms) | wall time (s) | tdlisten CPU (s) |"
	echo "|---|---|---|---|---|---|---|---|"
	awk '{ printf "| %s | %s | %d | %.0f | %.0f | %d | %.1f | %.1f |\n",
	    $1 == "on" ? "on" : "off", $2 == 1 ? "1st of each agent" : "2nd of each agent",
	    $5, $4, $5 ? $4 / $5 : 0, $6, $3 / 1000, $7 / 1000 }' "$W/many.tsv"
	echo
	awk '$1 == "on" { printf "cache on disk after both rounds: %.0f bytes\n", $2 }' \
	    "$W/cache.tsv"
} >> "$RES"
cat "$RES"
