# shellcheck shell=bash
# bench/lib.sh: pieces the benchmarks share, sourced by run.sh (and so
# stream.sh), concurrent.sh, load.sh, all.sh and instr.sh (not a program).

# Whether something listens on TCP port $1 (IPv4 or IPv6).
port_listening() {
	local hex

	hex=$(printf ':%04X' "$1")
	awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p {
	    found = 1 } END { exit !found }' /proc/net/tcp /proc/net/tcp6
}

BENCH_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# free_port [N]: the first of N free TCP and UDP ports in a row (default
# 1), as the kernel says: tests/tdport.c (the tests' free_port), built
# into $TMP the first time; below the ephemeral range, where no outgoing
# connection takes one before the benchmark binds it
free_port() {
	if [ ! -x "$TMP/tdport" ]; then
		gcc -O2 -o "$TMP/tdport" "$BENCH_LIB_DIR/../tests/tdport.c" ||
		    return 1
	fi
	"$TMP/tdport" "$@"
}

# wait_listening PORT: until something listens on PORT, 10 s at most
wait_listening() {
	local _

	for _ in $(seq 100); do
		port_listening "$1" && return 0
		sleep 0.1
	done
	return 1
}

# Wait until tdagent $1's instance records (its tracing_on is 1), trying
# $2 times $3 s apart; 1 if it never did.
instance_records() {
	local i

	for i in $(seq "$2"); do
		[ "$(cat "/sys/kernel/tracing/instances/tracedock-$1/tracing_on" \
		    2>/dev/null)" = 1 ] && return 0
		[ "$i" = "$2" ] || sleep "$3"
	done
	return 1
}

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
