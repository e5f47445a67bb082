#!/bin/sh
# demo.sh: the main job on this machine.  Installs what is missing, builds,
# records a few seconds of real scheduler and interrupt events with tdagent
# while some work runs, and shows a short report of the file.  Run as root.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh" build
B=$top/build
out=${TMPDIR:-/tmp}/tracedock-demo.dat
echo "== recording 3 s of sched and irq events into $out"
"$B/tdagent" -o "$out" -e sched:sched_switch -e sched:sched_wakeup \
    -e sched:sched_process_exec -e sched:sched_process_exit -e irq -s 3 \
    -- sh -c 'for i in 1 2 3 4 5 6; do ls -R /usr/include >/dev/null; sleep 0.4; done'
echo "== the file, as trace-cmd 3.1.6 sees it"
trace-cmd dump --summary -i "$out" 2>&1 | sed -n '2,12p'
echo "== events per type"
trace-cmd report -i "$out" 2>/dev/null | awk '$4 ~ /:$/ { n[$4]++ } END { for (e in n) printf "  %-24s %d\n", e, n[e] }' | sort
echo "== first events"
trace-cmd report -i "$out" 2>/dev/null | sed -n '2,9p'
