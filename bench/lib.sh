# shellcheck shell=bash
# bench/lib.sh: pieces the benchmarks share, sourced by run.sh (and so
# stream.sh), concurrent.sh, load.sh, all.sh and instr.sh (not a program).

BENCH_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# pki, free_port (tdport built into $TMP when $B has none), port_listening,
# wait_listening, wait_until, recording, wait_recording, start_listener
# (of $TDLISTEN, without -v here), stop_listener, reap: the harness the
# end-to-end tests share (tests/harness.sh)
HARNESS_TOP=$(cd "$BENCH_LIB_DIR/.." && pwd)
LISTEN_VERBOSE=
# shellcheck source=tests/harness.sh
. "$HARNESS_TOP/tests/harness.sh"

# Bytes sent on lo (each packet crosses lo once); in a benchmark's private
# network namespace, only its own.
lo_bytes() {
	awk -F'[: ]+' '$2 == "lo" { print $11 }' /proc/net/dev
}

# Raw per-CPU data bytes of trace.dat $1 (pages x page size), from the
# flyrecord offsets and sizes trace-cmd dump prints, chunks added up by
# bench/flysize, which the caller builds as $TMP/flysize: one method for
# every file, whoever wrote it (safe under pipefail).
data_bytes() {
	local f=$1 codec args

	codec=$({ trace-cmd dump --summary -i "$f" 2>/dev/null || true; } |
	    awk '/\[Compression algorithm\]/ { print $1 }')
	[ -n "$codec" ] || codec=none
	args=$({ trace-cmd dump --flyrecord -i "$f" 2>/dev/null || true; } | awk '
	    /\[id, data offset and size\]/ { print $2, $3 }
	    /\[offset, size of cpu/ { print $1, $2 }')
	[ -n "$args" ] || return 1
	# shellcheck disable=SC2086
	"$TMP/flysize" "$f" "$codec" $args
}

# awk functions for the tables, to put in front of a program:
# sort(a, n) sorts a[1..n]; med(a, n) is the median of a sorted a[1..n].
# shellcheck disable=SC2034
BENCH_AWK_STATS='
function sort(a, n,    i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
}
function med(a, n) {
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
'
