#!/bin/sh
# bench/tsync.sh [SECONDS [INTERVAL_MS]]: accuracy of time sync on this
# machine.  One tdlisten (its defaults; --tsync-interval INTERVAL_MS when
# given), one
# streaming tdagent per trace clock, each its own instance, all recording
# the same rare events (tests/tdpoke: two getppid calls in a row every
# 50 ms, the second one counts) for SECONDS (default 60); between and
# around the agents, "rulers": local tdagents on the mono clock
# (CLOCK_MONOTONIC, the listener's reference) without any correction.
# Every process enables the event only after the one before it records, so
# the kernel writes each occurrence in the order r0 a1 r1 a2 ... ak rk, and
# the rulers around an agent bracket the moment its stamp was taken
# (docs/timesync.md, "Measuring the error").
#
# Prints, after trace-cmd 3.1.6's corrections (TIME_SHIFT, TSC2NSEC):
# each clock's error against the reference, then for every pair of clocks
# |dt| as trace-cmd shows it (raw: includes the write order) and corrected
# for the write order (the sync error between the two files).
# Run as root from the top of a built tree (make tdagent tdlisten
# tests/tdpoke), or with TD_BUILDDIR; hold /tmp/td-bench.lock.
# TD_KEEP=1 keeps the files; bench/tsync.sh --report DIR prints the tables
# of a kept run again.
#
# TD_TSYNC_MODE (issue 27):
#   quiet       (default) as above;
#   stress      10 more tdagents stream every system call to the same
#               listener while two dd loops make one-byte system calls, so
#               both CPUs are busy and the link is full;
#   veth        the listener in a network namespace of its own, joined to
#               this one by a veth pair (a real device, not loopback);
#   netem       the same with netem on both ends (delay
#               100us 50us: symmetric jitter); the namespaces share the
#               kernel's clocks, so the truth is known as before;
#   netem-asym  the same with netem on the way out only (delay 200us): a
#               path 200 us longer one way, whose error must stay within
#               the bound (half of it shows as a constant offset);
#   jitter      for kernels without sch_netem: tests/tddelay, a user-space
#               netem, between the agents (127.0.0.2) and the listener
#               (--bind 127.0.0.1), 100 us +- 50 us each way (uniform);
#   asym        the same, 200 us out and nothing back.
# The relay's own figures (datagrams, how late they left) follow the
# samples in the head.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)

# report DIR: the tables, from DIR/head and DIR/err (tests/tsync-err.awk)
report() {
	cat "$1/head"
	echo
	echo "error against the reference (CLOCK_MONOTONIC), ns (clean: the" \
	    "occurrences whose rulers' uncertainty is below 250 ns):"
	echo "clock        median  clean max        max   lower bounds" \
	    "  bracket min/median  not clean"
	awk '$1 == "agent" {
	    printf "%-9s %9d %10d %10d %7d / %-7d %7d / %-6d %6d\n",
	    $2, $3, $7, $4, $5, $6, $8, $9, $10 }' "$1/err"
	for what in raw corrected; do
		echo
		if [ $what = raw ]; then
			echo "|dt| as trace-cmd shows it (write order included)," \
			    "median / max ns:"
		else
			echo "|dt| corrected for the write order, median / clean" \
			    "max ns:"
		fi
		printf "%-9s" ""
		for b in $(awk '$1 == "agent" { print $2 }' "$1/err"); do
			printf "%15s" "$b"
		done
		echo
		for a in $(awk '$1 == "agent" { print $2 }' "$1/err"); do
			printf "%-9s" "$a"
			for b in $(awk '$1 == "agent" { print $2 }' "$1/err"); do
				awk -v a="$a" -v b="$b" -v w="$what" '
				    $1 == "pair" && (($2 == a && $3 == b) ||
				    ($2 == b && $3 == a)) { f = 1
					if (w == "raw") printf "%15s", $4 " / " $5
					else printf "%15s", $6 " / " $10 }
				    END { if (!f) printf "%15s", "-" }' "$1/err"
			done
			echo
		done
	done
	echo
	awk '$1 == "pair" { m[++n] = $6; if ($6 > mm) mm = $6
		if ($10 > cx) cx = $10; if ($7 > mx) mx = $7
		if ($8 > lm) lm = $8; if ($9 > lx) lx = $9
		if ($11 > wd) wd = $11 }
	    END { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (m[j] < m[i]) { t = m[i]; m[i] = m[j]; m[j] = t }
		printf "corrected |dt| over the %d pairs: median of the" \
		    " medians %d ns, largest median %d ns, largest clean max" \
		    " %d ns, largest max %d ns;\nlower bounds: largest" \
		    " median %d ns, largest max %d ns; not clean: at most" \
		    " %d occurrences of a pair\n", n, m[int((n + 1) / 2)],
		    mm, cx, mx, lm, lx, wd }' "$1/err"
}
if [ "${1:-}" = --report ]; then
	report "$2"
	exit
fi

B=${TD_BUILDDIR:-$top}
MODE=${TD_TSYNC_MODE:-quiet}
T=${1:-60}
IV=${2:-}
ivarg=""
[ -n "$IV" ] && ivarg="--tsync-interval $IV"
TR=/sys/kernel/tracing
W=$(mktemp -d /tmp/td-tsync-bench.XXXXXX)
# free_port, wait_until, wait_recording: tests/harness.sh
HARNESS_TOP=$top TMP=$W TRACING=$TR
. "$top/tests/harness.sh"
all=""
lpid=""
busy=""
dpid=""
ns=""
# every child must go with the script, whatever ends it: they hold the lock
cleanup() {
	trap - EXIT INT TERM HUP PIPE
	kill $all $lpid $busy $dpid 2>/dev/null
	wait 2>/dev/null
	[ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
	[ -n "$ns" ] && ip link del "$ns-h" 2>/dev/null
	[ -n "${TD_KEEP:-}" ] || rm -rf "$W"
	exit "$1"
}
trap 'cleanup $?' EXIT
trap 'cleanup 1' INT TERM HUP PIPE
clocks="mono local global mono_raw boot"
grep -q x86-tsc $TR/trace_clock && clocks="$clocks x86-tsc"
ev=raw_syscalls:sys_enter
flt='id == 110'		# getppid on x86-64

load0=$(cut -d' ' -f1-3 /proc/loadavg)
port=$(free_port) || exit 1
host=127.0.0.1
run=""
lbind=""
case $MODE in
quiet|stress) ;;
jitter|asym)
	[ -x "$B/tests/tddelay" ] || { echo "no $B/tests/tddelay" >&2; exit 1; }
	lbind="--bind 127.0.0.1"
	host=127.0.0.2
	;;
veth|netem|netem-asym)
	ns=tdb$$
	ip netns add $ns || exit 1
	ip link add $ns-h type veth peer name $ns-l || exit 1
	ip link set $ns-l netns $ns
	ip addr add 10.77.0.1/24 dev $ns-h
	ip link set $ns-h up
	ip netns exec $ns ip addr add 10.77.0.2/24 dev $ns-l
	ip netns exec $ns ip link set $ns-l up
	ip netns exec $ns ip link set lo up
	nofq="netem is not in this kernel (CONFIG_NET_SCH_NETEM)"
	if [ $MODE = netem ]; then
		tc qdisc add dev $ns-h root netem delay 100us 50us &&
		ip netns exec $ns tc qdisc add dev $ns-l root netem \
		    delay 100us 50us || { echo "$nofq" >&2; exit 1; }
	elif [ $MODE = netem-asym ]; then
		tc qdisc add dev $ns-h root netem delay 200us ||
		    { echo "$nofq" >&2; exit 1; }
	fi
	host=10.77.0.2
	run="ip netns exec $ns"
	;;
*)
	echo "TD_TSYNC_MODE: quiet, stress, veth, netem, netem-asym," \
	    "jitter or asym" >&2
	exit 1
	;;
esac
# shellcheck disable=SC2086
$run "$B/tdlisten" -p $port $lbind --insecure -v -d "$W/out" $ivarg > "$W/l.log" 2>&1 &
lpid=$!
until grep -q "listening on" "$W/l.log"; do
	kill -0 $lpid 2>/dev/null || { cat "$W/l.log"; exit 1; }
	sleep 0.05
done
if [ -n "$lbind" ]; then
	uport=$(sed -n 's/^.*time-sync probes on .* udp port \([0-9]*\).*$/\1/p' \
	    "$W/l.log")
	if [ $MODE = jitter ]; then
		dargs="-o 100us:50us -b 100us:50us"
	else
		dargs="-o 200us -b 0"
	fi
	# shellcheck disable=SC2086
	"$B/tests/tddelay" $dargs -u "${uport:-$port}" $host $port 127.0.0.1 \
	    > "$W/relay.out" 2>&1 &
	dpid=$!
	until grep -q ready "$W/relay.out" 2>/dev/null; do
		kill -0 $dpid 2>/dev/null || { cat "$W/relay.out"; exit 1; }
		sleep 0.05
	done
fi

# start CMD...: run a tdagent, return once its instance records
started() {
	"$@" &
	p=$!
	all="$all $p"
	wait_recording $p || { echo "tdagent $* failed"; exit 1; }
}
ruler() {
	started "$B/tdagent" -q -o "$W/r$1.dat" -C mono -b 64 -e $ev -f "$flt" \
	    2> "$W/r$1.err"
}
if [ $MODE = stress ]; then
	for _ in 1 2; do
		dd if=/dev/zero of=/dev/null bs=1 count=2000000000 status=none &
		busy="$busy $!"
	done
	for k in 1 2 3 4 5 6 7 8 9 10; do
		"$B/tdagent" -q -h $host -p $port --insecure --name storm$k \
		    -e raw_syscalls -b 1024 -s $((T + 5)) 2> "$W/storm$k.err" &
		busy="$busy $!"
	done
	sleep 1
fi
i=0
ruler 0
for c in $clocks; do
	i=$((i + 1))
	started "$B/tdagent" -q -h $host -p $port --insecure --name "$c" \
	    -C "$c" -b 64 -e $ev -f "$flt" 2> "$W/$c.err"
	ruler $i
done
sleep 0.5
n=$((T * 20))
"$B/tests/tdpoke" $n 50000 2 &
poke=$!
wait $poke
sleep 0.2
kill -TERM $all
wait $all
all=""
# shellcheck disable=SC2086
[ -n "$busy" ] && kill $busy 2>/dev/null && wait $busy 2>/dev/null
busy=""
if [ -n "$dpid" ]; then
	kill -TERM $dpid
	wait $dpid
	dpid=""
fi
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# stamps FILE: the times in ns, after trace-cmd's corrections, of the
# second call of each burst of two (the first warms the caches up), by
# pid: the comm shows as <...> when the kernel's saved_cmdlines (shared by
# the whole machine) no longer had tdpoke when the agent saved them
stamps() {
	trace-cmd report -t --nodate -i "$1" 2>/dev/null | grep -E -- "-$poke +\[" |
	    sed 's/^.*\] *\([0-9.]*\):.*$/\1/' | tr -d . | awk 'NR % 2 == 0'
}
i=0
stamps "$W/r0.dat" > "$W/r0.ts"
cols="$W/r0.ts"
for c in $clocks; do
	i=$((i + 1))
	stamps "$(ls "$W"/out/*/*-"$c".dat)" > "$W/$c.ts"
	stamps "$W/r$i.dat" > "$W/r$i.ts"
	cols="$cols $W/$c.ts $W/r$i.ts"
done
for f in $cols; do
	if [ "$(wc -l < "$f")" != $n ]; then
		echo "$(basename "$f" .ts): $(wc -l < "$f") events, want $n"
		exit 1
	fi
done
paste $cols | awk -v names="$clocks" -f "$top/tests/tsync-err.awk" > "$W/err"
{
	echo "tracedock time sync ($MODE), $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r)," \
	    "$(nproc) CPUs, load $load0 (start) $load1 (end)"
	echo "$T s, $n events per file, a sync round every" \
	    "${IV:-default ($("$B/tdlisten" --help 2>&1 |
	    sed -n 's/.*--tsync-interval MS.*(default \([0-9]*\).*/\1/p'))}" \
	    "ms, tree $(git -C "$top" describe --always --dirty 2>/dev/null)"
	grep "time sync: [0-9]* samples" "$W/l.log" | grep -v "'storm" |
	    sed 's/^.* \(.[a-z0-9_-]*.\) ([0-9.]*:[0-9]*): /  \1 /'
	[ -f "$W/relay.out" ] && grep -v ready "$W/relay.out" | sed 's/^/  /'
	true
} > "$W/head"
[ -n "${TD_KEEP:-}" ] && echo "files kept in $W"
report "$W"
