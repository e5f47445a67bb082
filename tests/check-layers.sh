#!/bin/sh
# check-layers.sh: the include graph docs/architecture.md states.  Within
# agent/ and listener/, a file includes headers of its own folder, of a
# lower one (the parts, lowest first, below) and its program's root header
# only; no module includes its way back to itself (tsort finds no loop
# among the modules: a module is a .c and its .h, NAME-local.h and
# NAME-*.c belonging to NAME); shared/ and proto/ include nothing of the
# programs.  No root, no tracefs.
set -u
top=${TD_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 1
AGENT_PARTS='guest capture tsync net recorder,standby plan9'
LISTEN_PARTS='edge recording producers fleet'
n=0
bad=0
say() {
	n=$((n + 1))
	if [ "$1" = ok ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; bad=1; fi
}
rank() {	# PARTS FOLDER: its rank, 0 for the program's root
	r=0
	i=1
	for p in $1; do
		case ",$p," in *",$2,"*) r=$i ;; esac
		i=$((i + 1))
	done
	echo $r
}
# where HEADER lives in PROG (its folder, "" for the root, "-" elsewhere)
where() {
	if [ -f "$1/$2" ]; then echo ""; return; fi
	for d in "$1"/*/; do
		[ -f "$d$2" ] && { basename "$d"; return; }
	done
	echo -
}
for prog in agent listener; do
	parts=$AGENT_PARTS
	[ $prog = listener ] && parts=$LISTEN_PARTS
	up=0
	for d in "$prog"/*/; do
		f=$(basename "$d")
		[ "$(rank "$parts" "$f")" -gt 0 ] ||
		    say notok "$prog/$f: a folder not among the parts ($parts)"
	done
	for f in "$prog"/*/*.[ch]; do
		fd=$(basename "$(dirname "$f")")
		fr=$(rank "$parts" "$fd")
		for h in $(sed -n 's/^#include "\(.*\)"/\1/p' "$f"); do
			hd=$(where "$prog" "$h")
			[ "$hd" = - ] || [ -z "$hd" ] && continue
			if [ "$(rank "$parts" "$hd")" -gt "$fr" ]; then
				say notok "$f includes $prog/$hd/$h, a higher part"
				up=1
			fi
		done
	done
	[ $up = 0 ] && say ok "$prog: no file includes a higher part's header"
	# the modules' graph: no loop
	loops=$(for f in $(find "$prog" -name '*.[ch]'); do
		m=$(basename "$f"); m=${m%.[ch]}; m=${m%-local}
		for h in $(sed -n 's/^#include "\(.*\)"/\1/p' "$f"); do
			[ "$(where "$prog" "$h")" = - ] && continue
			hm=${h%.h}; hm=${hm%-local}
			case $m in "$hm"|"$hm"-*) continue ;; esac
			echo "$m $hm"
		done
	done | tsort 2>&1 >/dev/null | sed -n 's/^tsort: //p' | tr '\n' ' ')
	if [ -z "$loops" ]; then
		say ok "$prog: no module includes its way back to itself"
	else
		say notok "$prog: a loop of includes: $loops"
	fi
done
for d in shared proto; do
	if grep -l '^#include "\(agent\|listener\)' $d/*.[ch] >/dev/null 2>&1; then
		say notok "$d includes a program's header"
	else
		hit=""
		for f in $d/*.[ch]; do
			for h in $(sed -n 's/^#include "\(.*\)"/\1/p' "$f"); do
				[ -f shared/$h ] || [ -f proto/$h ] ||
				    hit="$hit $f:$h"
			done
		done
		if [ -z "$hit" ]; then
			say ok "$d includes only shared/ and proto/ headers"
		else
			say notok "$d includes a program's header:$hit"
		fi
	fi
done
echo "1..$n"
exit $bad
