#!/bin/sh
# mkseeds.sh [--real]: regenerate the seed corpora of tests/fuzz/corpus/.
#
# Synthetic seeds come from build-fuzz/fuzz/seedgen (made by make fuzz,
# which scripts/fuzz.sh -b runs) and are the same bytes every time.  With
# --real (root and tracefs needed) the real-* seeds are recorded again:
# tdagent -e sched -s 0.2 with zstd, zlib, none and --file-version 6,
# shrunk with "seedgen shrink" (a few lines of kallsyms, at most 2 pages
# per CPU), then turned into agent streams and page seeds.  Without --real
# the real-* recordings in the tree are kept, and their agent streams made
# again (the protocol may have changed).  The restore seeds state1-* to
# state4-* (checkpoints of versions 1 to 4, which the listener still reads
# but no longer writes) are kept as they are.  No seed may reach 100 KB.
# The generation itself is tests/fuzz/genseeds.sh; tests/check-seeds.sh
# fails when the committed seeds are not what it makes: after a change of
# the protocol or of a file format, run this and commit the seeds.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
C=tests/fuzz/corpus
G=build-fuzz/fuzz/seedgen
sh scripts/fuzz.sh -b >/dev/null
for t in proto page tdread session restore standby control; do
	mkdir -p "$C/$t"
	find "$C/$t" -type f ! -name 'real-*' ! -name 'state[1234]-*' -delete
done

if [ "${1:-}" = --real ]; then
	agent=""
	for a in build/tdagent ./tdagent; do
		[ -x "$a" ] && { agent=$a; break; }
	done
	if [ "$(id -u)" != 0 ] || [ -z "$agent" ] ||
	    ! [ -d /sys/kernel/tracing/instances ]; then
		echo "mkseeds.sh: --real needs root, a built tdagent and tracefs" >&2
		exit 1
	fi
	T=$(mktemp -d "${TMPDIR:-/tmp}/mkseeds.XXXXXX")
	trap 'rm -rf "$T"' EXIT
	rec() {
		out=$1
		shift
		"$agent" -q -o "$T/$out.dat" -e sched -s 0.2 "$@"
		"$G" shrink "$T/$out.dat" "$C/tdread/real-$out"
	}
	find "$C" -type f -name 'real-*' -delete
	rec v7-zstd
	rec v7-zlib --compression zlib
	rec v7-none --compression none
	rec v6 --file-version 6
	"$G" pages "$C/tdread/real-v7-zstd" "$C/page" 4
	for f in "$C/page"/real-v7-zstd-*; do
		mv "$f" "$C/page/real-page-${f##*-}"
	done
fi
# the synthetic seeds and the agent streams of the real recordings: the
# same bytes tests/check-seeds.sh makes and compares
sh tests/fuzz/genseeds.sh build-fuzz/fuzz "$C"
big=$(find "$C" -type f -size +99k)
if [ -n "$big" ]; then
	echo "mkseeds.sh: seeds of 100 KB or more: $big" >&2
	exit 1
fi
