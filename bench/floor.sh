#!/bin/bash
# bench/floor.sh [--repeat R] [--blocks N]: the CPU floor under a recorder
# that encrypts, measured on this machine.
#
#   1. bench/floor.c takes the pages of the syscall storm (dd bs=1
#      count=N, default 2,000,000: 8 M raw_syscalls events, 400 MB of
#      pages) out of the kernel's ring buffer three ways, with no network
#      and no file: read(2) per page (tdagent), splice(2) batches then one
#      read(2), splice(2) to /dev/null (trace-cmd's recorder without its
#      socket).  R runs each (default 3), interleaved.
#   2. openssl speed: AES-128-GCM (what tdagent's TLS 1.3 uses first) and
#      ChaCha20-Poly1305 on 16 KiB records, the size TLS sends.
#
# Extraction plus the cipher is what a TLS recorder pays per MB before
# its first byte reaches a socket: in user space the pages must be copied
# to the process (splice-read), with kernel TLS they need not (splice-null).
# Compare with trace-cmd's recorder in bench/run.sh --stream
# (bench/README.md, "The floor under an encrypting recorder").  Prints a table and keeps it in bench/out/floor.txt.
# Run as root from the top of the tree; holds /tmp/td-bench.lock while it
# measures.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
REPEAT=3
BLOCKS=2000000
while [ $# -gt 0 ]; do
	case $1 in
	--repeat) REPEAT=$2; shift 2 ;;
	--blocks) BLOCKS=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0 ;;
	*) echo "bench/floor.sh: unknown option '$1' (see --help)" >&2
		exit 2 ;;
	esac
done
case "$REPEAT$BLOCKS" in
*[!0-9]*) echo "bench/floor.sh: --repeat and --blocks take numbers" >&2
	exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "bench/floor.sh: run as root" >&2; exit 1; }
[ -d /sys/kernel/tracing/instances ] ||
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
[ -d /sys/kernel/tracing/instances ] ||
    { echo "bench/floor.sh: no tracefs" >&2; exit 1; }
command -v openssl >/dev/null ||
    { echo "bench/floor.sh: needs the openssl command" >&2; exit 1; }

OUT=bench/out
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/td-floor.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -Wall -o "$TMP/floor" bench/floor.c

exec 9>/tmp/td-bench.lock
echo "bench/floor.sh: waiting for /tmp/td-bench.lock" >&2
flock 9
load=$(cut -d' ' -f1 /proc/loadavg)
for r in $(seq 1 "$REPEAT"); do
	for m in read splice-read splice-null; do
		"$TMP/floor" "$m" "$BLOCKS" >> "$TMP/runs"
	done
	echo "bench/floor.sh: run $r of $REPEAT done" >&2
done
for c in aes-128-gcm chacha20-poly1305; do
	openssl speed -seconds 2 -bytes 16384 -evp "$c" 2>/dev/null |
	    awk -v c="$c" 'tolower($1) == c { v = $NF; sub(/k$/, "", v)
		printf "%s %.3f\n", c, 1e3 / (v * 1000 / 1e6) }' >> "$TMP/cipher"
done
flock -u 9

{
	echo "the CPU floor of a recorder (bench/floor.sh), $(nproc) CPUs," \
	    "$(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'), load $load"
	echo "dd bs=1 count=$BLOCKS; $REPEAT runs; median [min..max]"
	echo
	awk "$BENCH_AWK_STATS"'
	FILENAME ~ /runs$/ {
		n[$1]++; mb[$1, n[$1]] = $2; ms[$1, n[$1]] = $4
		sc[$1, n[$1]] = $5 / ($2 * 1e6 / 4096)
		next
	}
	{ cipher[$1] = $2 }
	END {
		printf "%-34s %-24s %-10s %s\n", "taking pages out of the ring",
		    "CPU ms per MB", "MB", "syscalls per page"
		split("read splice-read splice-null", modes, " ")
		for (k = 1; k <= 3; k++) {
			m = modes[k]
			for (i = 1; i <= n[m]; i++) {
				a[i] = ms[m, i]; b[i] = mb[m, i]; c[i] = sc[m, i]
			}
			sort(a, n[m]); sort(b, n[m]); sort(c, n[m])
			printf "  %-32s %.3f [%.3f..%.3f]      %-10.1f %.2f\n", m,
			    med(a, n[m]), a[1], a[n[m]], med(b, n[m]),
			    med(c, n[m])
			md[m] = med(a, n[m])
		}
		printf "%-34s %s\n", "encrypting 16 KiB records",
		    "CPU ms per MB"
		for (c2 in cipher)
			printf "  %-32s %.3f\n", c2, cipher[c2]
		aes = cipher["aes-128-gcm"]
		printf "floor of a TLS recorder, before its socket:\n"
		printf "  %-32s %.3f + %.3f = %.3f ms per MB\n",
		    "in user space (splice-read)", md["splice-read"], aes,
		    md["splice-read"] + aes
		printf "  %-32s %.3f + %.3f = %.3f ms per MB\n",
		    "kernel TLS (splice-null)", md["splice-null"], aes,
		    md["splice-null"] + aes
	}' "$TMP/runs" "$TMP/cipher"
} | tee "$OUT/floor.txt"
