#!/bin/sh
# mkseeds.sh: regenerate the seed corpora of tests/fuzz/corpus/.
#
# Synthetic seeds come from build-fuzz/seedgen (built by scripts/fuzz.sh -b).
# Real ones need root and tracefs: three short tdagent recordings (v7 zstd,
# v7 zlib, v7 none, v6) are shrunk with "seedgen shrink" (a few lines of
# kallsyms, at most 2 pages per CPU) and also turned into agent streams and
# page seeds.  Without root the real seeds already in the tree are kept.
# Run from anywhere; it works in the top of the tree.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
C=tests/fuzz/corpus
G=build-fuzz/seedgen
[ -x "$G" ] || sh scripts/fuzz.sh -b
for t in proto page tdread session; do
	mkdir -p "$C/$t"
	find "$C/$t" -type f ! -name 'real-*' -delete
done
"$G" proto "$C/proto"
"$G" page "$C/page"
"$G" tdread "$C/tdread"
"$G" session "$C/session"

agent=""
for a in build/tdagent ./tdagent; do
	[ -x "$a" ] && { agent=$a; break; }
done
if [ "$(id -u)" != 0 ] || [ -z "$agent" ] ||
    ! [ -d /sys/kernel/tracing/instances ]; then
	echo "mkseeds.sh: no root, tdagent or tracefs: real seeds kept as they are"
	exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/mkseeds.XXXXXX")
trap 'rm -rf "$T"' EXIT
rec() {
	out=$1
	shift
	"$agent" -q -o "$T/$out.dat" -e sched -s 0.2 "$@"
	"$G" shrink "$T/$out.dat" "$C/tdread/real-$out.dat"
	"$G" stream "$C/tdread/real-$out.dat" "$C/session/real-$out"
}
find "$C" -type f -name 'real-*' -delete
rec v7-zstd
rec v7-zlib --compression zlib
rec v7-none --compression none
rec v6 --file-version 6
cp "$C/session/real-v7-zstd" "$C/proto/real-stream"
"$G" pages "$C/tdread/real-v7-zstd.dat" "$C/page" 4
for f in "$C/page"/real-v7-zstd-*; do
	mv "$f" "$C/page/real-page-${f##*-}"
done
ls -l "$C"/*/ | awk '$5 > 100000 { print "mkseeds.sh: too big:", $0; bad = 1 }
    END { exit bad }'
