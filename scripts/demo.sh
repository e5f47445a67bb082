#!/bin/sh
# demo.sh: the main job on this machine.  Installs what is missing, builds,
# makes a private CA and certificates, starts tdlisten on loopback, streams
# a few seconds of real scheduler and interrupt events from tdagent to it
# over TLS 1.3, and shows a short report of the file the listener wrote.
# Run as root.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh" --build
"$top/scripts/build.sh" build
B=$top/build
D=$(mktemp -d "${TMPDIR:-/tmp}/tracedock-demo.XXXXXX")
trap 'kill $lpid 2>/dev/null; wait $lpid 2>/dev/null' EXIT

echo "== certificates: a private CA, the listener, one agent ($D/pki)"
sh "$top/scripts/tdcert" init "$D/pki" >/dev/null
sh "$top/scripts/tdcert" issue "$D/pki" listener --server >/dev/null
sh "$top/scripts/tdcert" issue "$D/pki" demo-host >/dev/null

# port 4000, or another one if it is taken
start_listener() {
	"$B/tdlisten" -p "$port" -d "$D/traces" -l "$D/tdlisten.log" \
	    --cert "$D/pki/listener.pem" --key "$D/pki/listener.key" \
	    --ca "$D/pki/ca.pem" &
	lpid=$!
	i=0
	until grep -q "listening on" "$D/tdlisten.log" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 $lpid 2>/dev/null; then
			return 1
		fi
		sleep 0.05
	done
}
lpid=""
for port in ${TD_DEMO_PORT:-4000} 4001 4002 14000 24000; do
	start_listener && break
	lpid=""
done
[ -n "$lpid" ] || { cat "$D/tdlisten.log"; exit 1; }
echo "== tdlisten on port $port, writing under $D/traces"

echo "== tdagent: 3 s of sched and irq events, streamed over TLS"
"$B/tdagent" -h 127.0.0.1 -p "$port" --name demo \
    --cert "$D/pki/demo-host.pem" --key "$D/pki/demo-host.key" \
    --ca "$D/pki/ca.pem" \
    -e sched:sched_switch -e sched:sched_wakeup \
    -e sched:sched_process_exec -e sched:sched_process_exit -e irq -s 3 \
    -- sh -c 'for i in 1 2 3 4 5 6; do ls -R /usr/include >/dev/null; sleep 0.4; done' \
    2> "$D/tdagent.log" || { cat "$D/tdagent.log"; exit 1; }
cat "$D/tdagent.log"
out=$D/traces/$(sed -n "s/.*the listener wrote '\([^']*\)'.*/\1/p" "$D/tdagent.log")
echo "== the listener's log"
sed 's/^/  /' "$D/tdlisten.log"
echo "== $out, as trace-cmd 3.1.6 sees it"
trace-cmd dump --summary -i "$out" 2>&1 | sed -n '2,12p'
echo "== events per type"
trace-cmd report -i "$out" 2>/dev/null |
    awk '$4 ~ /:$/ { n[$4]++ } END { for (e in n) printf "  %-24s %d\n", e, n[e] }' | sort
echo "== first events"
trace-cmd report -i "$out" 2>/dev/null | sed -n '2,9p'
