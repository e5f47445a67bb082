#!/bin/sh
# End-to-end: time sync under a storm (issue 27).  Eight agents record
# every system call while two dd loops make one-byte system calls as fast
# as they can, so the agents stream at full rate and both CPUs are busy;
# with the probes on the data stream most of such recordings got no time
# sync at all ("no time sync: the agent sent no usable sample").  Checked:
# every recording has its time shift, from several samples, and on the
# mono clock, which is the listener's reference (CLOCK_MONOTONIC), every
# sample's offset is its own error: it must lie within the sample's bound.
# Then the same with tdlisten --no-udp-probes: the in-band probes fail
# under the storm, yet every recording gets its time shift (coarse
# samples), within the bounds.  TD_STORM_LISTENER_ARGS adds arguments to
# the first tdlisten (--no-udp-probes: the in-band probes alone, which fail
# its "3 samples or more" on a busy machine).
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
clocks="mono mono mono mono local global boot"
if grep -q x86-tsc $TRACING/trace_clock; then
	clocks="$clocks x86-tsc"
else
	clocks="$clocks mono"
fi
# median: the middle line of a sorted column
median() {
	sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
largest() {
	sort -n | tail -1
}
# run_storm LOG OUT [TDLISTEN ARGS...]: the agents and the dd loops, once
run_storm() {
	_log=$1
	_out=$2
	shift 2
	start_listener "$_log" --insecure -d "$_out" --tsync-interval 300 \
	    "$@" || exit 99
	i=0
	dds=""
	for _ in 1 2; do
		dd if=/dev/zero of=/dev/null bs=1 count=100000000 status=none &
		dds="$dds $!"
	done
	agents=""
	for c in $clocks; do
		i=$((i + 1))
		"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure --name "s$i-$c" \
		    -C "$c" -e raw_syscalls -b 1024 -s $((5 * SLOW)) \
		    2> "$WORK/s$i.err" &
		agents="$agents $!"
	done
	rc=0
	for p in $agents; do
		wait "$p" || rc=$?
	done
	# shellcheck disable=SC2086 # a list of pids
	kill $dds 2>/dev/null
	# shellcheck disable=SC2086
	wait $dds 2>/dev/null
	stop_listener
}
n=$(echo $clocks | wc -w)
# synced WHAT LOG: every recording has its time shift, and the mono
# samples (true offset 0) lie within their bounds
synced() {
	eq "$1: every agent exits 0" "$rc" 0
	eq "$1: every recording is written" \
	    "$(grep -c "'s[0-9]*-[a-z0-9_-]*' .*: wrote '" "$2")" "$n"
	grep "'s[0-9]*-.*time sync: [0-9]* samples\|no time sync" "$2" |
	    sed 's/^.*session [^ ]* /# /'
	eq "$1: every recording has its time shift" \
	    "$(grep -c "'s[0-9]*-[a-z0-9_-]*' .*time sync: [0-9]* samples" \
	    "$2")" "$n"
	eq "$1: no recording without time sync" \
	    "$(grep -c "no time sync" "$2")" 0
	grep "'s[0-9]*-mono' .*time sync round" "$2" |
	    sed 's/.*offset \(-*[0-9]*\) .*+-\([0-9]*\) ns.*/\1 \2/' |
	    tr -d - > "$WORK/mono.off"
	check "$1: mono samples were logged" test -s "$WORK/mono.off"
	echo "# $1: mono samples: $(wc -l < "$WORK/mono.off"), error median" \
	    "$(cut -d' ' -f1 "$WORK/mono.off" | median) ns, largest" \
	    "$(cut -d' ' -f1 "$WORK/mono.off" | largest) ns; bound median" \
	    "$(cut -d' ' -f2 "$WORK/mono.off" | median) ns, largest" \
	    "$(cut -d' ' -f2 "$WORK/mono.off" | largest) ns"
	check "$1: mono: every sample's error within its bound" \
	    awk '$1 > $2 { exit 1 }' "$WORK/mono.off"
}
# the probe port
# shellcheck disable=SC2086 # extra arguments, split on purpose
run_storm "$WORK/l.log" "$WORK/out" ${TD_STORM_LISTENER_ARGS:-}
synced "probe port" "$WORK/l.log"
# samples kept per recording: rounds come every ~0.4 s for 5 s
sed -n "s/^.*'\(s[0-9]*-[a-z0-9_-]*\)' .*time sync: \([0-9]*\) samples.*$/\1 \2/p" \
    "$WORK/l.log" > "$WORK/kept"
check "probe port: every recording kept 3 samples or more" \
    awk 'NF == 2 && $2 < 3 { exit 1 }' "$WORK/kept"

# without it (a firewall, an older listener): in-band probes, which the
# storm makes fail; the rounds that fail send a coarse sample instead (the
# local part and the best network part known, from an earlier round or
# the handshake, its bound aged), so that no recording is left without
# its time shift, and the bounds still hold
run_storm "$WORK/l2.log" "$WORK/out2" --no-udp-probes
synced "in-band" "$WORK/l2.log"
grep -h "coarse sample" "$WORK"/s*.err | head -3 | sed 's/^/# /'
finish
