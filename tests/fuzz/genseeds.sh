#!/bin/sh
# genseeds.sh BINDIR OUT: write the seeds that tests/fuzz/mkseeds.sh makes
# without --real into OUT/<target>/, with BINDIR's seedgen and
# seedgen-standby, run from the top of the source tree (the current
# directory: seedgen reads tests/data/, the agent streams come from the
# committed tests/fuzz/corpus/tdread/real-*).  mkseeds.sh writes them into
# tests/fuzz/corpus/; tests/check-seeds.sh into a temporary directory,
# to compare with the committed ones byte for byte.  The same bytes every
# time: no time, random number, path or host goes into a seed.
set -eu
[ $# = 2 ] || { echo "usage: genseeds.sh BINDIR OUT" >&2; exit 2; }
G=$1/seedgen
S=$1/seedgen-standby
O=$2
if [ ! -d tests/data ] || [ ! -d tests/fuzz/corpus ]; then
	echo "genseeds.sh: run from the top of the source tree" >&2
	exit 2
fi
for t in proto page tdread session restore standby control; do
	mkdir -p "$O/$t"
done
"$G" proto "$O/proto"
"$G" page "$O/page"
"$G" tdread "$O/tdread"
"$G" session "$O/session"
"$G" restore "$O/restore"
# fuzz-standby's frames (seedgen-standby.c), fuzz-control's requests
"$S" "$O/standby"
C=$O/control
printf 'list\n' > "$C/list"
printf 'list\nlist\nlist\n' > "$C/list3"
awk 'BEGIN { for (i = 0; i < 200; i++) print "list" }' > "$C/list-many"
printf 'reload\nreload\n' > "$C/reload"
printf 'start\t*\tsched\t\t0\t\t10\trec\n' > "$C/start-all"
printf 'start\thost0\tsched,irq\tprev_pid > 0\t1024\tglobal\t0\t\nlist\nstop\t*\t\n' \
    > "$C/start-stop"
printf 'stop\t*\trec\nstop\tnone\t\n' > "$C/stop-none"
printf 'start\t*\t\t\t\t\t\t\n' > "$C/start-malformed"
printf 'bogus\n' > "$C/bogus"
# four clients: reads, reads nothing, hangs up, shuts its writing down
{
	printf 'list\n#tdfuzz#\002start\t*\tsched\t\t0\t\t0\t\n'
	printf '#tdfuzz#\001list\nlist\n#tdfuzz#\003stop\t\t\n'
} > "$C/clients"
# the agent streams of the real recordings (the protocol may have changed)
for f in tests/fuzz/corpus/tdread/real-*; do
	[ -f "$f" ] || continue
	"$G" stream "$f" "$O/session/${f##*/}"
done
if [ -f "$O/session/real-v7-zstd" ]; then
	cp "$O/session/real-v7-zstd" "$O/proto/real-stream"
fi
