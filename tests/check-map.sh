#!/bin/sh
# check-map.sh: docs/architecture.md's behaviour -> file table is true.
# Every row names files that exist, and each holds the row's string (the
# last column, `grep -F`): a file moved, renamed or emptied of its job
# without the map fails here.  No root, no tracefs.
set -u
top=${TD_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
map=$top/docs/architecture.md
[ -f "$map" ] || { echo "not ok 1 - no $map"; exit 1; }
rows=$(sed -n '/^## Behaviour → file/,/^## /p' "$map" |
    grep '^| ' | grep -v '^| Behaviour |')
n=0
bad=0
[ -n "$rows" ] || { echo "not ok 1 - no rows in the table"; exit 1; }
echo "$rows" | {
	while IFS= read -r row; do
		files=$(printf '%s\n' "$row" | awk -F' \\| ' '{ print $2 }')
		str=$(printf '%s\n' "$row" | awk -F' \\| ' '{ print $3 }' |
		    sed 's/ *|$//; s/^`//; s/`$//')
		paths=$(printf '%s\n' "$files" | sed 's/([^)]*)//g' |
		    tr ', ' '\n\n' | grep -E '^[a-z0-9]+/[A-Za-z0-9_./-]+$')
		if [ -z "$paths" ] || [ -z "$str" ]; then
			n=$((n + 1))
			echo "not ok $n - a row without files or string: $row"
			bad=1
			continue
		fi
		for f in $paths; do
			n=$((n + 1))
			if [ ! -f "$top/$f" ]; then
				echo "not ok $n - $f: no such file ($str)"
				bad=1
			elif ! grep -qF -- "$str" "$top/$f"; then
				echo "not ok $n - $f does not hold '$str'"
				bad=1
			else
				echo "ok $n - $f holds '$str'"
			fi
		done
	done
	echo "1..$n"
	exit $bad
}
