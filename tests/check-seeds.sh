#!/bin/sh
# check-seeds.sh: the committed fuzz seeds are what their generator makes.
# tests/fuzz/genseeds.sh runs the build's tests/fuzz/seedgen and
# seedgen-standby (the same sources as make fuzz's) into a temporary
# directory; every seed it makes must be in tests/fuzz/corpus/ byte for
# byte, and every committed seed of those folders must be one it makes or
# one kept by hand (real-*: recorded by mkseeds.sh --real; state1-* to
# state4-*: checkpoints of versions the listener no longer writes).  A
# protocol or file format that changes without sh tests/fuzz/mkseeds.sh
# fails here, as a generator that puts a time, a path or an uninitialised
# byte into a seed does.  No root, no tracefs.
set -u
top=${TD_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
bin=${TD_BUILDDIR:-$top/build}/tests/fuzz
C=$top/tests/fuzz/corpus
T=$(mktemp -d "${TMPDIR:-/tmp}/check-seeds.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
n=0
bad=0
say() {
	n=$((n + 1))
	if [ "$1" = ok ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; bad=1; fi
}
if ! (cd "$top" && sh tests/fuzz/genseeds.sh "$bin" "$T/a") \
    > "$T/log" 2>&1; then
	cat "$T/log"
	say fail "genseeds.sh ran"
	exit 1
fi
say ok "genseeds.sh ran"
# twice: the same bytes (a time or an address would differ here)
(cd "$top" && sh tests/fuzz/genseeds.sh "$bin" "$T/b") > /dev/null 2>&1
if diff -r "$T/a" "$T/b" > "$T/diff" 2>&1; then
	say ok "a second run made the same bytes"
else
	cat "$T/diff"
	say fail "a second run made other bytes"
fi
made=0
stale=""
for f in "$T"/a/*/*; do
	rel=${f#"$T"/a/}
	made=$((made + 1))
	if [ ! -f "$C/$rel" ]; then
		stale="$stale $rel(not committed)"
	elif ! cmp -s "$f" "$C/$rel"; then
		stale="$stale $rel"
	fi
done
if [ -z "$stale" ]; then
	say ok "the $made seeds made are the committed ones, byte for byte"
else
	say fail "seeds the generator no longer makes so (run sh\
 tests/fuzz/mkseeds.sh and commit them):$stale"
fi
extra=""
for d in "$T"/a/*; do
	t=${d##*/}
	for f in "$C/$t"/*; do
		[ -f "$f" ] || continue
		b=${f##*/}
		case $b in
		state[1234]-*) continue ;;
		real-*) [ "$t" = page ] || [ "$t" = tdread ] && continue ;;
		esac
		[ -f "$d/$b" ] || extra="$extra $t/$b"
	done
done
if [ -z "$extra" ]; then
	say ok "no committed seed outside the generator but those kept by hand"
else
	say fail "committed seeds the generator does not make:$extra"
fi
echo "1..$n"
exit $bad
