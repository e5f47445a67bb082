#!/bin/sh
# bench/wire.sh [BLOCKS [RUNS]]: what --wire-compression saves on this
# machine.  A dd storm of BLOCKS one-byte blocks (default 200000) is
# streamed over TLS on loopback with --wire-compression zstd and zlib, RUNS
# times each (default 3), also written locally (-o).  Per run:
#
#	frames	bytes of the PAGES_Z frames / page bytes they carry
#		(tdagent's own "wire compression" line): the live codec
#	full	the same pages (the -o file) in full batches of
#		TD_CHUNK_PAGES through the same codec call (tests/tdrecode -z)
#	sent	every byte the agent sent (the header sections, time sync,
#		resends too) / page bytes
#
# The test suite judges "full" (e2e-stream: <= 0.25) and reports the
# others.  Run as root from the top of a built tree (make tdagent tdlisten
# tests/tdrecode), or with TD_BUILDDIR.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
B=${TD_BUILDDIR:-$top/build}
blocks=${1:-200000}
runs=${2:-3}
for p in tdagent tdlisten tests/tdrecode; do
	[ -x "$B/$p" ] || { echo "wire.sh: no $B/$p (build first)" >&2; exit 2; }
done
T=$(mktemp -d /tmp/td-wire.XXXXXX)
LPID=
trap 'reap $LPID; rm -rf "$T"' EXIT
# pki, free_port, start_listener, reap
HARNESS_TOP=$top TMP=$T TDLISTEN=$B/tdlisten LISTEN_VERBOSE=
. "$top/tests/harness.sh"
pki "$T/pki" web1 || { echo "wire.sh: tdcert failed" >&2; exit 1; }
start_listener "$T/l.log" -d "$T/out" --cert "$T/pki/listener.pem" \
    --key "$T/pki/listener.key" --ca "$T/pki/ca.pem" || exit 1
echo "dd storm of $blocks blocks, $runs runs per codec, TLS on loopback"
printf '%-6s %4s %9s %9s %9s %7s %7s %7s\n' codec run "page MB" \
    "frame MB" "sent MB" frames full sent
for w in zstd zlib; do
	for r in $(seq 1 "$runs"); do
		"$B/tdagent" -h 127.0.0.1 -p "$LPORT" --cert "$T/pki/web1.pem" \
		    --key "$T/pki/web1.key" --ca "$T/pki/ca.pem" -e raw_syscalls \
		    -F -b 4096 --wire-compression $w -o "$T/local.dat" -- \
		    dd if=/dev/zero of=/dev/null bs=1 count="$blocks" status=none \
		    2> "$T/agent.err"
		live=$(sed -n 's/.*wire compression: \([0-9.]*\) MB of pages in \([0-9.]*\) MB of frames (\([0-9.]*\)).*/\1 \2 \3/p' \
		    "$T/agent.err")
		sent=$(sed -n "s/.*the listener wrote '.*' (\([0-9.]*\) MB sent.*/\1/p" \
		    "$T/agent.err")
		full=$("$B/tests/tdrecode" -z $w "$T/local.dat" |
		    awk '$1 == "pages" { print $6 }')
		set -- $live
		all=$(awk -v s="${sent:-0}" -v p="${1:-0}" \
		    'BEGIN { if (p > 0) printf "%.3f", s / p; else print "-" }')
		printf '%-6s %4s %9s %9s %9s %7s %7s %7s\n' $w "$r" "${1:--}" \
		    "${2:--}" "${sent:--}" "${3:--}" "${full:--}" "$all"
		rm -f "$T"/local.dat "$T"/out/web1/*.dat
	done
done
