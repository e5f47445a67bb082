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
# again (the protocol may have changed).  The restore seeds state1-*,
# state2-* and state3-* (checkpoints of versions 1 to 3, which the
# listener still reads but no longer writes) are kept as they are.  No seed may reach
# 100 KB.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
C=tests/fuzz/corpus
G=build-fuzz/fuzz/seedgen
sh scripts/fuzz.sh -b >/dev/null
for t in proto page tdread session restore; do
	mkdir -p "$C/$t"
	find "$C/$t" -type f ! -name 'real-*' ! -name 'state[123]-*' -delete
done
"$G" proto "$C/proto"
"$G" page "$C/page"
"$G" tdread "$C/tdread"
"$G" session "$C/session"
"$G" restore "$C/restore"
# fuzz-standby's frames (seedgen-standby.c), fuzz-control's requests
mkdir -p "$C/standby" "$C/control"
find "$C/standby" "$C/control" -type f -delete
build-fuzz/fuzz/seedgen-standby "$C/standby"
printf 'list\n' > "$C/control/list"
printf 'list\nlist\nlist\n' > "$C/control/list3"
awk 'BEGIN { for (i = 0; i < 200; i++) print "list" }' > "$C/control/list-many"
printf 'reload\nreload\n' > "$C/control/reload"
printf 'start\t*\tsched\t\t0\t\t10\trec\n' > "$C/control/start-all"
printf 'start\thost0\tsched,irq\tprev_pid > 0\t1024\tglobal\t0\t\nlist\nstop\t*\t\n' \
    > "$C/control/start-stop"
printf 'stop\t*\trec\nstop\tnone\t\n' > "$C/control/stop-none"
printf 'start\t*\t\t\t\t\t\t\n' > "$C/control/start-malformed"
printf 'bogus\n' > "$C/control/bogus"
# four clients: reads, reads nothing, hangs up, shuts its writing down
{
	printf 'list\n#tdfuzz#\002start\t*\tsched\t\t0\t\t0\t\n'
	printf '#tdfuzz#\001list\nlist\n#tdfuzz#\003stop\t\t\n'
} > "$C/control/clients"

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
for f in "$C"/tdread/real-*; do
	[ -f "$f" ] || continue
	"$G" stream "$f" "$C/session/${f##*/}"
done
if [ -f "$C/session/real-v7-zstd" ]; then
	cp "$C/session/real-v7-zstd" "$C/proto/real-stream"
fi
big=$(find "$C" -type f -size +99k)
if [ -n "$big" ]; then
	echo "mkseeds.sh: seeds of 100 KB or more: $big" >&2
	exit 1
fi
