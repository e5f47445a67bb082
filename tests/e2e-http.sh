#!/bin/sh
# End-to-end: tdlisten --http on loopback.  A real tdagent streams a
# workload of known size over TLS; /metrics passes promtool and its numbers
# are the recording's own (events == libtracecmd's count of the file, bytes
# == the listener's log line, disk use == the identity's directory); /status
# (jq) says the same; a live recording shows as open; a refused handshake
# and a resume (across a restart of the listener) are counted; the page loads in headless Chromium without a console error,
# shows the recording's exact event count, and a screenshot is taken;
# the recordings that ended are listed again after a restart (history);
# unknown paths are 404, other methods 405.  Hostile page readers: a
# crowd trickling its requests (from one address, from many) or sending
# nothing keeps no honest reader out and is closed by its deadline; the
# listener's descriptors stay bounded; a Host that is not the listener's
# (DNS rebinding) is refused with 421, over TLS too; a pipelined flood of
# /metrics is answered at a bounded rate from a reply made at most once a
# second.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
for t in curl jq promtool chromium; do
	command -v $t >/dev/null || {
		echo "FAIL: $t is not installed (scripts/deps.sh installs it)"
		exit 99
	}
done
P=$WORK/pki
OUT=$WORK/out
pki "$P" web1 || { echo "FAIL: cannot make certificates"; exit 99; }
# another CA's agent
pki "$WORK/other" rogue || { echo "FAIL: cannot make certificates"; exit 99; }

# port 0: the kernel picks one, the log says which
start_listener "$WORK/l.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --http 127.0.0.1:0 || exit 99
# the --http line follows the TCP port's, which start_listener waits for
wait_until $((100 * SLOW)) grep -q "status page and metrics at" "$WORK/l.log"
HPORT=$(sed -n 's|.*status page and metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
    "$WORK/l.log")
check "the listener says where the status page is" test -n "$HPORT"
U=http://127.0.0.1:$HPORT

# get PATH FILE: the body of GET PATH into FILE
get() {
	curl -sS --max-time $((10 * SLOW)) -o "$2" "$U$1"
}
# metric FILE LINE-START: the value of the one sample whose line starts so
metric() {
	awk -v k="$2" 'index($0, k) == 1 { print $NF; n++ } END { if (n != 1) print "(" n + 0 " samples)" }' "$1"
}
# sessions_open N: /metrics says N sessions are open, with N recordings
# (a session is open from the end of its handshake, its recording from
# its HELLO)
sessions_open() {
	get /metrics "$WORK/live.prom" &&
	    [ "$(metric "$WORK/live.prom" 'tdlisten_sessions{state="open"}')" = "$1" ] &&
	    [ "$(metric "$WORK/live.prom" 'tdlisten_recordings{state="recording"}')" = "$1" ]
}

get /metrics "$WORK/m0.prom"
eq "/metrics before any recording" $? 0
check "promtool passes the metrics of an idle listener" \
    promtool check metrics < "$WORK/m0.prom"
eq "no events received yet" \
    "$(metric "$WORK/m0.prom" tdlisten_received_events_total)" 0

# a refused handshake: a certificate of another CA
"$TDAGENT" -q -h 127.0.0.1 -p "$LPORT" --cert "$WORK/other/rogue.pem" \
    --key "$WORK/other/rogue.key" --ca "$P/ca.pem" -e sched -s 1 \
    2> "$WORK/rogue.err"
check "the rogue agent is refused" test $? -ne 0
failed_one() {
	get /metrics "$WORK/f.prom" && [ "$(metric "$WORK/f.prom" \
	    'tdlisten_handshake_failures_total{reason="failed"}')" = 1 ]
}
wait_until $((200 * SLOW)) failed_one
eq "the failed handshake is counted" \
    "$(metric "$WORK/f.prom" 'tdlisten_handshake_failures_total{reason="failed"}')" 1

# the workload: dd's 2000 one-byte blocks, raw_syscalls, streamed over TLS
rm -f "$WORK/pid"
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --name dd -e raw_syscalls -F \
    -b 4096 -- sh -c 'echo $$ > '"$WORK/pid"'; exec dd if=/dev/zero of=/dev/null bs=1 count=2000 status=none' \
    2> "$WORK/agent.err"
eq "the agent exits 0" $? 0
RFILE=$(remote_file "$WORK/agent.err")
check "the listener wrote the file" test -f "$OUT/$RFILE"
"$TDCOUNT" "$OUT/$RFILE" > "$WORK/count"
EVENTS=$(field events < "$WORK/count")
check "the file has events ($EVENTS)" test "${EVENTS:-0}" -gt 8000
eq "the ring lost nothing" "$(field missed < "$WORK/count")" 0
done_line() {
	grep -q "session web1 'dd' .*done after" "$WORK/l.log"
}
wait_until $((200 * SLOW)) done_line
BYTES=$(sed -n "s/.*session web1 'dd' .*done after .* pages, \([0-9]*\) bytes, \([0-9]*\) events.*/\1/p" "$WORK/l.log")
LOGEV=$(sed -n "s/.*session web1 'dd' .*done after .* bytes, \([0-9]*\) events.*/\1/p" "$WORK/l.log")
NCPU=$(sed -n "s/.*session web1 'dd'.*: recording \([0-9]*\) CPUs.*/\1/p" "$WORK/l.log")
eq "the listener's log counts the file's events" "$LOGEV" "$EVENTS"

get /metrics "$WORK/m1.prom"
eq "/metrics after the recording" $? 0
check "promtool passes them" promtool check metrics < "$WORK/m1.prom"
cp "$WORK/m1.prom" "$WORK/metrics.txt"
eq "events received: the file's, per libtracecmd" \
    "$(metric "$WORK/m1.prom" tdlisten_received_events_total)" "$EVENTS"
REC=$(sed -n 's/^tdlisten_recording_info{identity="web1",name="dd",recording="\([0-9a-f]*\)",state="done",file="\([^"]*\)"} 1$/\1 \2/p' "$WORK/m1.prom")
eq "the recording is listed, done, with its file" "${REC#* }" "$RFILE"
L="{identity=\"web1\",name=\"dd\",recording=\"${REC%% *}\"}"
eq "its events: the file's" \
    "$(metric "$WORK/m1.prom" "tdlisten_recording_events$L")" "$EVENTS"
eq "its bytes received: the log's" \
    "$(metric "$WORK/m1.prom" "tdlisten_recording_received_bytes$L")" "$BYTES"
eq "bytes received in all: the same" \
    "$(metric "$WORK/m1.prom" tdlisten_received_bytes_total)" "$BYTES"
eq "its CPUs: the log's" \
    "$(metric "$WORK/m1.prom" "tdlisten_recording_cpus$L")" "$NCPU"
eq "its lost events: none" \
    "$(metric "$WORK/m1.prom" "tdlisten_recording_lost_events$L")" 0
eq "lost events by cause: no overrun" \
    "$(metric "$WORK/m1.prom" 'tdlisten_lost_events_total{cause="overrun"}')" 0
eq "lost events by cause: none dropped" \
    "$(metric "$WORK/m1.prom" 'tdlisten_lost_events_total{cause="dropped"}')" 0
# the recording label is the file's TRACEID, as trace-cmd shows it
FTRACEID=$(trace-cmd dump --options -i "$OUT/$RFILE" 2>/dev/null |
    awk '/Option TRACEID/ { getline; print tolower($1) }' | sed 's/^0x//')
eq "the recording label is the file's TRACEID (trace-cmd dump --options)" \
    "${REC%% *}" "$(printf '%016s' "$FTRACEID" | tr ' ' 0)"
eq "tdlisten_build_info: the version tdlisten --version says" \
    "$(sed -n 's/^tdlisten_build_info{version="\([^"]*\)",.*} 1$/\1/p' "$WORK/m1.prom")" \
    "$("$B/tdlisten" --version | awk '{ print $NF }')"
# the process metrics, against /proc (one descriptor more: the request's)
FDN=$(ls /proc/$LPID/fd | wc -l)
PFDS=$(metric "$WORK/m1.prom" process_open_fds)
check "process_open_fds: the listener's descriptors ($PFDS, $FDN listed now)" \
    test "$PFDS" -ge $((FDN - 2)) -a "$PFDS" -le $((FDN + 2))
# (valgrind keeps a dozen descriptors of the limit for itself, and the
# program's getrlimit() says so)
LIMFD=$(awk '/^Max open files/ { print $4 }' /proc/$LPID/limits)
PMAX=$(metric "$WORK/m1.prom" process_max_fds)
if [ "${TD_VALGRIND:-0}" = 0 ]; then
	eq "process_max_fds: its limit" "$PMAX" "$LIMFD"
else
	check "process_max_fds: its limit less valgrind's ($PMAX of $LIMFD)" \
	    test "$PMAX" -le "$LIMFD" -a "$PMAX" -ge $((LIMFD - 64))
fi
PSTART=$(awk -v tck="$(getconf CLK_TCK)" -v bt="$(awk '/^btime/ { print $2 }' /proc/stat)" \
    '{ sub(/.*\) /, ""); printf "%d", bt + $20 / tck }' /proc/$LPID/stat)
eq "process_start_time_seconds: its start" \
    "$(metric "$WORK/m1.prom" process_start_time_seconds | cut -d. -f1)" "$PSTART"
check "process_resident_memory_bytes and process_virtual_memory_bytes" \
    test "$(metric "$WORK/m1.prom" process_resident_memory_bytes)" -gt 1000000 -a \
    "$(metric "$WORK/m1.prom" process_virtual_memory_bytes)" -gt \
    "$(metric "$WORK/m1.prom" process_resident_memory_bytes)"
check "process_cpu_seconds_total" grep -q '^process_cpu_seconds_total [0-9.]*$' "$WORK/m1.prom"
eq "one recording done" \
    "$(metric "$WORK/m1.prom" 'tdlisten_recordings_ended_total{how="done"}')" 1
eq "none ended early" \
    "$(metric "$WORK/m1.prom" 'tdlisten_recordings_ended_total{how="early"}')" 0
eq "no resume" "$(metric "$WORK/m1.prom" tdlisten_resumes_total)" 0
eq "none open now" \
    "$(metric "$WORK/m1.prom" 'tdlisten_recordings{state="recording"}')" 0
DISK=$(find "$OUT/web1" -maxdepth 1 -type f ! -name '.*' -exec stat -c '%b %B' {} + |
    awk '{ n += $1 * $2 } END { print n + 0 }')
# disk use is measured at most every few seconds: until it settles
disk_is() {
	get /metrics "$WORK/d.prom" && [ "$(metric "$WORK/d.prom" \
	    'tdlisten_disk_used_bytes{identity="web1"}')" = "$1" ]
}
wait_until $((300 * SLOW)) disk_is "$DISK"
eq "disk use of web1: its directory's" \
    "$(metric "$WORK/d.prom" 'tdlisten_disk_used_bytes{identity="web1"}')" "$DISK"

get /status "$WORK/s1.json"
eq "/status" $? 0
check "/status is JSON" sh -c "jq -e . '$WORK/s1.json' > /dev/null"
eq "/status: one recording" "$(jq '.recordings | length' "$WORK/s1.json")" 1
eq "/status: its identity, name, state, file" \
    "$(jq -r '.recordings[0] | "\(.identity) \(.name) \(.state) \(.file)"' "$WORK/s1.json")" \
    "web1 dd done $RFILE"
eq "/status: its events" "$(jq '.recordings[0].events' "$WORK/s1.json")" "$EVENTS"
eq "/status: its bytes" "$(jq '.recordings[0].bytes' "$WORK/s1.json")" "$BYTES"
eq "/status: its CPUs" "$(jq '.recordings[0].cpus' "$WORK/s1.json")" "$NCPU"
eq "/status: the recording's traceid is its label" \
    "$(jq -r '.recordings[0] | "\(.recording) \(.traceid)"' "$WORK/s1.json" 2>/dev/null || true)" \
    "${REC%% *} ${REC%% *}"
# time-sync samples: the start and end rounds (none kept when a round
# cannot finish, as under valgrind); a bound only with one
if [ "$(jq '.recordings[0].sync_samples' "$WORK/s1.json")" -gt 0 ]; then
	eq "/status: the same sync bound as /metrics" \
	    "$(jq '.recordings[0].sync_bound_ns / 1e9' "$WORK/s1.json" |
	    awk '{ printf "%.9f", $1 }')" \
	    "$(metric "$WORK/m1.prom" "tdlisten_recording_sync_error_bound_seconds$L")"
	# the bound in force for the file: the one its log line gives (no
	# sample set aside at END widens it), flagged when wide
	b=$(sed -n "s/^.*'dd' .*time sync: .*error bound +-\([0-9]*\) ns.*$/\1/p" \
	    "$WORK/l.log")
	eq "/status: the bound the file got" \
	    "$(jq '.recordings[0].sync_bound_ns' "$WORK/s1.json")" "${b:-none}"
	w=false
	[ "${b:-0}" -gt 100000 ] && w=true
	eq "/status: wide or not, as the bound says" \
	    "$(jq '.recordings[0].sync_wide' "$WORK/s1.json")" "$w"
	eq "/metrics: wide or not, as the bound says" \
	    "$(metric "$WORK/m1.prom" "tdlisten_recording_sync_error_bound_wide$L")" \
	    "$([ $w = true ] && echo 1 || echo 0)"
else
	eq "no sample: no bound in /status or /metrics" \
	    "$(jq '.recordings[0].sync_bound_ns' "$WORK/s1.json") $(metric \
	    "$WORK/m1.prom" "tdlisten_recording_sync_error_bound_seconds$L")" \
	    "null (0 samples)"
fi
eq "/status: events received" "$(jq '.totals.events' "$WORK/s1.json")" "$EVENTS"
eq "/status: the failed handshake" \
    "$(jq '.handshake_failures.failed' "$WORK/s1.json")" 1
eq "/status: disk use of web1" \
    "$(jq '.identities[] | select(.identity == "web1") | .disk_bytes' "$WORK/s1.json")" "$DISK"

# connections before their session: one silent (the preamble is looked
# for), one stalled in its TLS ClientHello: both counted and listed as
# in the handshake
"$B/tests/tdslow" 127.0.0.1 "$LPORT" "$WORK/slow.status" idle:127.0.0.1:1 \
    hello:127.0.0.1:1 &
slowpid=$!
wait_until $((200 * SLOW)) grep -q "^opened 2 closed 0" "$WORK/slow.status"
in_handshake() {
	get /metrics "$WORK/hs.prom" &&
	    [ "$(metric "$WORK/hs.prom" 'tdlisten_sessions{state="handshake"}')" = 2 ]
}
wait_until $((200 * SLOW)) in_handshake
eq "two connections in the handshake, counted" \
    "$(metric "$WORK/hs.prom" 'tdlisten_sessions{state="handshake"}')" 2
get /status "$WORK/hs.json"
eq "and listed so" "$(jq -r '[.agents[].state] | join(" ")' "$WORK/hs.json")" \
    "handshake handshake"
kill -TERM $slowpid
wait $slowpid
in_none() {
	get /metrics "$WORK/hs.prom" &&
	    [ "$(metric "$WORK/hs.prom" 'tdlisten_sessions{state="handshake"}')" = 0 ]
}
wait_until $((200 * SLOW)) in_none

# a live recording: open while it runs, then done
"$TDAGENT" -q -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --name live -e sched -s 300 \
    2> "$WORK/live.err" &
apid=$!
wait_until $((400 * SLOW)) sessions_open 1
eq "a live recording: one session open" \
    "$(metric "$WORK/live.prom" 'tdlisten_sessions{state="open"}')" 1
eq "a live recording: one recording open" \
    "$(metric "$WORK/live.prom" 'tdlisten_recordings{state="recording"}')" 1
check "promtool passes the metrics of a live recording" \
    promtool check metrics < "$WORK/live.prom"
get /status "$WORK/s2.json"
eq "/status: the live one is recording" \
    "$(jq -r '.recordings[] | select(.name == "live") | .state' "$WORK/s2.json")" recording
eq "/status: its agent is connected, open" \
    "$(jq -r '.agents[] | "\(.identity) \(.state)"' "$WORK/s2.json")" "web1 open"
kill -TERM $apid
wait $apid
eq "the live agent stops cleanly" $? 0
wait_until $((200 * SLOW)) sessions_open 0

# a standby agent (tdagent --standby): counted by state
"$TDAGENT" --standby -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" 2> "$WORK/standby.err" &
sbpid=$!
standby_is() {
	get /metrics "$WORK/sb.prom" &&
	    [ "$(metric "$WORK/sb.prom" 'tdlisten_standby_agents{state="standby"}')" = "$1" ]
}
wait_until $((400 * SLOW)) standby_is 1
eq "a standby agent: tdlisten_standby_agents{state=\"standby\"}" \
    "$(metric "$WORK/sb.prom" 'tdlisten_standby_agents{state="standby"}') $(metric "$WORK/sb.prom" 'tdlisten_standby_agents{state="recording"}')" \
    "1 0"
check "promtool passes the metrics with a standby agent" \
    promtool check metrics < "$WORK/sb.prom"
kill -TERM $sbpid
wait $sbpid
eq "the standby agent exits 0 on SIGTERM" $? 0
wait_until $((400 * SLOW)) standby_is 0

# the page, in headless Chromium: no console message but the page's own,
# the recording's exact count in its row, a screenshot
get / "$WORK/page.html"
check "the page is HTML" grep -q '<!DOCTYPE html>' "$WORK/page.html"
check "the page loads nothing from elsewhere" \
    sh -c "! grep -Eq '(src|href)=\"(https?:)?//' '$WORK/page.html'"
CH="chromium --headless --no-sandbox --disable-gpu --user-data-dir=$WORK/chrome \
    --window-size=1280,800 --virtual-time-budget=10000 --enable-logging=stderr --v=0"
HOME=$WORK $CH --screenshot="$WORK/page.png" "$U/" > "$WORK/chrome.out" \
    2> "$WORK/chrome.err"
eq "chromium takes a screenshot" $? 0
check "the screenshot is a PNG" sh -c \
    "od -An -c -N4 '$WORK/page.png' | grep -q 'P   N   G'"
check "the page's script ran and showed both recordings" \
    grep -q 'CONSOLE.*"tdlisten status: 2 recordings shown"' "$WORK/chrome.err"
eq "no other console message (errors, CSP refusals)" \
    "$(grep CONSOLE "$WORK/chrome.err" | grep -vc '"tdlisten status: ')" 0
HOME=$WORK $CH --dump-dom "$U/" > "$WORK/dom.html" 2> "$WORK/chrome2.err"
eq "chromium dumps the page's DOM" $? 0
eq "the page shows the recording's exact event count" \
    "$(grep -o "<tr data-recording=\"${REC%% *}\">.*" "$WORK/dom.html" |
    sed 's|</tr>.*||' | grep -o '<td class="events">[0-9]*</td>' |
    sed 's/[^0-9]//g')" "$EVENTS"
check "the page draws its event rate" sh -c \
    "grep -o '<tr data-recording=\"${REC%% *}\">.*' '$WORK/dom.html' | sed 's|</tr>.*||' | grep -q '<polyline points='"

# what is not there
code() {
	curl -s --max-time $((10 * SLOW)) -o /dev/null -w '%{http_code}' "$@"
}
eq "an unknown path: 404" "$(code "$U/nothing")" 404
eq "POST: 405" "$(code -X POST --data x "$U/metrics")" 405
eq "DELETE: 405" "$(code -X DELETE "$U/")" 405
eq "HEAD: 200" "$(code -I "$U/status")" 200
curl -sv -I --max-time $((10 * SLOW)) "$U/" > "$WORK/head.out" 2>&1
eq "HEAD: the page's length, and no body" \
    "$(sed -n 's/^< Content-Length: \([0-9]*\).*/\1/p' "$WORK/head.out") $(grep -c Excess "$WORK/head.out")" \
    "$(wc -c < "$WORK/page.html") 0"
# the caps of tdlimits.h: connections at once, of them per address, the
# seconds a client has for its whole request, the age past which a client
# that owes one gives its slot to a newcomer
lim() {
	sed -n "s/^#define $1[[:space:]][^0-9]*\([0-9]*\).*/\1/p" \
	    "$S/shared/tdlimits.h"
}
MAXC=$(lim TD_HTTP_MAX_CONNS)
MAXA=$(lim TD_HTTP_MAX_CONNS_ADDR)
DL=$(lim TD_HTTP_DEADLINE)
AGE_MS=$(lim TD_HTTP_MIN_AGE_MS)
AGE=$(awk -v m="$AGE_MS" 'BEGIN { printf "%.2f", m / 1000 + 0.2 }')
# the listener's side of connections to the page
http_conns() {
	ss -Htn "( sport = :$HPORT )" | grep -vc TIME-WAIT
}
conns_are() {
	[ "$(http_conns)" = "$1" ]
}
# slow_is FILE WANT: tdslow's status file says WANT
slow_is() {
	[ "$(cat "$1" 2>/dev/null)" = "$2" ]
}
# get_fresh PATH FILE: as get, once the reply made last is too old to be
# reused (the HTTP counters do not make a new one by themselves)
get_fresh() {
	sleep "$AGE"
	get "$@"
}
# refused REASON [FILE]: the page's count of clients closed for REASON
refused() {
	metric "${2:-$WORK/rf.prom}" "tdlisten_http_refused_total{reason=\"$1\"}"
}
wait_until $((200 * SLOW)) conns_are 0
get_fresh /metrics "$WORK/rf0.prom"

# a slowloris crowd of MAXC clients from the page reader's own address,
# each sending its request a byte a second (evhttp's timeout is per read:
# they held every slot for 90 s): the address holds its share, the others
# are closed at once; a reader past the age takes the oldest's slot, the
# rest are closed at their deadline
"$B/tests/tdslow" 127.0.0.1 "$HPORT" "$WORK/tr.status" trickle:127.0.0.1:$MAXC &
trpid=$!
wait_until $((200 * SLOW)) slow_is "$WORK/tr.status" \
    "opened $MAXC closed $((MAXC - MAXA))"
eq "$MAXC trickling clients from one address: $MAXA kept, the rest closed at once" \
    "$(cat "$WORK/tr.status")" "opened $MAXC closed $((MAXC - MAXA))"
sleep "$AGE"
eq "an honest reader from the same address is answered at once" \
    "$(code --max-time $((2 * SLOW)) "$U/metrics")" 200
wait_until $((20 * (DL + 2) * SLOW)) slow_is "$WORK/tr.status" \
    "opened $MAXC closed $MAXC"
eq "the tricklers are all closed by their deadline ($DL s)" \
    "$(cat "$WORK/tr.status")" "opened $MAXC closed $MAXC"
kill -TERM $trpid
wait $trpid
get_fresh /metrics "$WORK/rf.prom"
eq "counted: closed for their address, the slot taken, the deadline" \
    "$(($(refused address) - $(refused address "$WORK/rf0.prom"))) $(($(refused evicted) - $(refused evicted "$WORK/rf0.prom"))) $(($(refused deadline) - $(refused deadline "$WORK/rf0.prom")))" \
    "$((MAXC - MAXA)) 1 $((MAXA - 1))"
cp "$WORK/rf.prom" "$WORK/rf0.prom"

# the same from MAXC addresses, one each: every slot taken; the reader
# takes the slot of the one that has owed its request longest
set --
i=1
while [ $i -le "$MAXC" ]; do
	set -- "$@" trickle:127.0.1.$i:1
	i=$((i + 1))
done
"$B/tests/tdslow" 127.0.0.1 "$HPORT" "$WORK/tr2.status" "$@" &
trpid=$!
wait_until $((200 * SLOW)) slow_is "$WORK/tr2.status" "opened $MAXC closed 0"
wait_until $((200 * SLOW)) conns_are "$MAXC"
eq "$MAXC trickling clients from $MAXC addresses hold every slot" \
    "$(cat "$WORK/tr2.status") $(http_conns)" "opened $MAXC closed 0 $MAXC"
sleep "$AGE"
eq "an honest reader is answered at once" \
    "$(code --max-time $((2 * SLOW)) "$U/status")" 200
wait_until $((20 * (DL + 2) * SLOW)) slow_is "$WORK/tr2.status" \
    "opened $MAXC closed $MAXC"
eq "and the tricklers are closed by their deadline" \
    "$(cat "$WORK/tr2.status")" "opened $MAXC closed $MAXC"
kill -TERM $trpid
wait $trpid
get_fresh /metrics "$WORK/rf.prom"
eq "counted: one slot taken, the others at the deadline" \
    "$(($(refused evicted) - $(refused evicted "$WORK/rf0.prom"))) $(($(refused deadline) - $(refused deadline "$WORK/rf0.prom")))" \
    "1 $((MAXC - 1))"
cp "$WORK/rf.prom" "$WORK/rf0.prom"

# idle connections count from their accept: MAXC are taken, the others
# wait in the kernel's queue until a client has owed its request past the
# age, then take its slot; so the listener's descriptors stay bounded
# (one more at most, the newcomer of the moment) while agents still
# connect and record, and every one is gone by the deadline
NIDLE=$((MAXC + 8))
wait_until $((200 * SLOW)) conns_are 0
FDS0=$(ls /proc/$LPID/fd | wc -l)
set --
i=1
while [ $((i * MAXA)) -le "$NIDLE" ]; do
	set -- "$@" idle:127.0.2.$i:$MAXA
	i=$((i + 1))
done
"$B/tests/tdslow" 127.0.0.1 "$HPORT" "$WORK/idle.status" "$@" &
idpid=$!
# the listener's descriptors, every 0.05 s for twice the age
i=0
while [ $i -lt $((AGE_MS / 25)) ]; do
	ls /proc/$LPID/fd | wc -l
	sleep 0.05
	i=$((i + 1))
done > "$WORK/fds"
check "$NIDLE idle connections to the page were opened" \
    grep -q "^opened $NIDLE " "$WORK/idle.status"
FDSMAX=$(sort -n "$WORK/fds" | tail -1)
check "the listener held $MAXC or $((MAXC + 1)) descriptors more, not $NIDLE ($((FDSMAX - FDS0)))" \
    test "$FDSMAX" -ge $((FDS0 + MAXC)) -a "$FDSMAX" -le $((FDS0 + MAXC + 1))
rm -f "$WORK/pid"
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --name dd2 -e raw_syscalls -F \
    -b 4096 -- dd if=/dev/zero of=/dev/null bs=1 count=2000 status=none \
    2> "$WORK/agent2.err"
eq "meanwhile an agent records: it exits 0" $? 0
RFILE2=$(remote_file "$WORK/agent2.err")
"$TDCOUNT" "$OUT/$RFILE2" > "$WORK/count2"
EVENTS2=$(field events < "$WORK/count2")
done2_line() {
	grep -q "session web1 'dd2' .*done after" "$WORK/l.log"
}
wait_until $((200 * SLOW)) done2_line
eq "its events: the listener's count is the file's" \
    "$(sed -n "s/.*session web1 'dd2' .*done after .* bytes, \([0-9]*\) events.*/\1/p" "$WORK/l.log")" \
    "${EVENTS2:-none}"
check "it has events ($EVENTS2)" test "${EVENTS2:-0}" -gt 8000
wait_until $((20 * (DL + 2) * SLOW)) slow_is "$WORK/idle.status" \
    "opened $NIDLE closed $NIDLE"
eq "every idle connection is closed by the listener" \
    "$(cat "$WORK/idle.status")" "opened $NIDLE closed $NIDLE"
kill -TERM $idpid
wait $idpid
wait_until $((400 * SLOW)) conns_are 0
get_fresh /metrics "$WORK/m2.prom"
eq "once they close, /metrics answers" $? 0
eq "the idle ones: slots taken and deadlines, one each" \
    "$(($(refused evicted "$WORK/m2.prom") + $(refused deadline "$WORK/m2.prom") - $(refused evicted "$WORK/rf0.prom") - $(refused deadline "$WORK/rf0.prom")))" \
    "$NIDLE"
eq "and counts three recordings done (dd, live, dd2)" \
    "$(metric "$WORK/m2.prom" 'tdlisten_recordings_ended_total{how="done"}')" 3
check "the listener is alive" kill -0 "$LPID"

# DNS rebinding: a page of another site whose name points here may not
# read the status; the listener's names and addresses may
host_code() {
	code -H "Host: $1" "$U/status"
}
eq "a Host that is not the listener's: 421" "$(host_code "evil.example:$HPORT")" 421
eq "the same by name resolution (curl --resolve)" \
    "$(code --resolve "evil.example:$HPORT:127.0.0.1" "http://evil.example:$HPORT/metrics")" 421
eq "an address of another machine: 421" "$(host_code "192.0.2.1:$HPORT")" 421
eq "Host localhost: 200" "$(host_code "localhost:$HPORT")" 200
eq "Host 127.0.0.1: 200" "$(host_code "127.0.0.1:$HPORT")" 200
eq "Host [::1]: 200" "$(host_code "[::1]:$HPORT")" 200
eq "Host: this machine's name: 200" "$(host_code "$(hostname):$HPORT")" 200
get_fresh /metrics "$WORK/rf.prom"
eq "the refused requests are counted" \
    "$(($(refused host) - $(refused host "$WORK/rf0.prom")))" 3

# a pipelined flood of /metrics on one connection (it took 97% of the
# listener's CPU): a reply is made anew at most once a second while no
# count of things changes, and one address is answered BURST requests at
# once, then RATE a second (its connection is not read meanwhile); a
# reader from another address is answered at once all the while
BURST=$(lim TD_HTTP_BURST)
RATE=$(lim TD_HTTP_RATE)
FL=3
# num V: V when a number, else -1 (a metric that is not there)
num() {
	case $1 in
	''|*[!0-9]*) echo -1 ;;
	*) echo "$1" ;;
	esac
}
renders() {
	num "$(metric "$1" 'tdlisten_http_renders_total{page="metrics"}')"
}
sleep $((BURST / RATE + 1))	# the address's allowance is full again
get /metrics "$WORK/fl0.prom"
CPU0=$(awk '{ print $14 + $15 }' /proc/$LPID/stat)
bash -c 'exec 3<>/dev/tcp/127.0.0.1/$1 || exit 1
	( i=0; while [ $i -lt 20000 ]; do
		printf "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
		i=$((i + 1))
	done >&3 ) 2>/dev/null &
	timeout "$2" cat <&3 > "$3"
	kill $! 2>/dev/null
	wait $! 2>/dev/null
	exit 0' flood "$HPORT" "$FL" "$WORK/flood.out" &
flpid=$!
sleep 1
eq "during the flood a reader from another address is answered at once" \
    "$(code --interface 127.0.0.5 --max-time $((2 * SLOW)) "$U/status")" 200
wait $flpid
CPU1=$(awk '{ print $14 + $15 }' /proc/$LPID/stat)
echo "# tdlisten's CPU time during the ${FL} s flood: $((CPU1 - CPU0)) ticks of $(getconf CLK_TCK) a second (noisy)"
NREP=$(grep -c '^HTTP/1.1 200 OK' "$WORK/flood.out")
check "the flood's replies are bounded: $BURST at once, $RATE a second ($NREP in $FL s)" \
    test "$NREP" -ge "$BURST" -a "$NREP" -le $((BURST + RATE * (FL + 1)))
get_fresh /metrics "$WORK/fl1.prom"
R0=$(renders "$WORK/fl0.prom")
R1=$(renders "$WORK/fl1.prom")
check "renders counted ($R0, $R1)" test "$R0" -ge 0 -a "$R1" -ge 0
check "/metrics made at most once a second during the flood ($((R1 - R0)) for $NREP replies, this one's included)" \
    test $((R1 - R0)) -ge 1 -a $((R1 - R0)) -le $((FL + 2))
check "the requests past the rate were held" \
    test "$(num "$(metric "$WORK/fl1.prom" tdlisten_http_delayed_total)")" -ge $((NREP - BURST))
check "promtool passes the metrics with the HTTP counters" \
    promtool check metrics < "$WORK/fl1.prom"
eq "three connections closed for a reason: the rogue's and the two of the handshake part" \
    "$(grep -v '^tdlisten: standby ' "$WORK/l.log" | grep -c 'closing:')" 3
eq "and the standby agent's, once" \
    "$(grep -c '^tdlisten: standby web1 .*closing:' "$WORK/l.log")" 1

# a resume: the listener restarts under a recording, its agent comes back
"$TDAGENT" -q -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --name again -e sched -s 300 \
    2> "$WORK/again.err" &
apid=$!
wait_until $((400 * SLOW)) sessions_open 1
stop_listener
eq "the listener stops cleanly" $? 0
check "it left the recording to be resumed" \
    grep -q "left '.*-again.dat' to be resumed" "$WORK/l.log"
LPORT_FIXED=$LPORT start_listener "$WORK/l3.log" -d "$OUT" \
    --cert "$P/listener.pem" --key "$P/listener.key" --ca "$P/ca.pem" \
    --http 127.0.0.1:0 || exit 99
unset LPORT_FIXED
# the --http line follows the TCP port's, which start_listener waits for
wait_until $((100 * SLOW)) grep -q "status page and metrics at" "$WORK/l3.log"
HPORT=$(sed -n 's|.*status page and metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
    "$WORK/l3.log")
U=http://127.0.0.1:$HPORT
resumed() {
	get /metrics "$WORK/r.prom" &&
	    [ "$(metric "$WORK/r.prom" tdlisten_resumes_total)" = 1 ]
}
wait_until $((400 * SLOW)) resumed
eq "the new listener counts one resume" \
    "$(metric "$WORK/r.prom" tdlisten_resumes_total)" 1
eq "and the recording is open again" \
    "$(metric "$WORK/r.prom" 'tdlisten_recordings{state="recording"}')" 1
get /status "$WORK/s3.json"
eq "the history survives the restart: the recordings that ended before it" \
    "$(jq -r '[.recordings[] | select(.state == "done") | .name] | sort | join(" ")' "$WORK/s3.json")" \
    "dd dd2 live"
eq "with their events, file and TRACEID" \
    "$(jq -r '.recordings[] | select(.name == "dd") | "\(.events) \(.file) \(.recording)"' "$WORK/s3.json")" \
    "$EVENTS $RFILE ${REC%% *}"
check "kept in the output directory, one line each" \
    test "$(wc -l < "$OUT/.tdlisten-history")" -eq 3
check "promtool passes them" promtool check metrics < "$WORK/r.prom"
kill -TERM $apid
wait $apid
eq "the resumed agent stops cleanly" $? 0
stop_listener
eq "the second listener stops cleanly" $? 0

# not on loopback: TLS, and a client certificate from --ca required
start_listener "$WORK/l4.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --http 0.0.0.0:0 || exit 99
# the --http line follows the TCP port's, which start_listener waits for
wait_until $((100 * SLOW)) grep -q "status page and metrics at" "$WORK/l4.log"
HPORT=$(sed -n 's|.*status page and metrics at https://0.0.0.0:\([0-9]*\)/ (client certificates from --ca only)$|\1|p' \
    "$WORK/l4.log")
check "off loopback: https, client certificates only" test -n "$HPORT"
U=https://localhost:$HPORT
eq "off loopback: a client with a certificate of the CA reads /metrics" \
    "$(code --cacert "$P/ca.pem" --cert "$P/web1.pem" --key "$P/web1.key" \
    "$U/metrics")" 200
eq "off loopback: a client without one is refused" \
    "$(code --cacert "$P/ca.pem" "$U/metrics")" 000
eq "off loopback: a client of another CA is refused" \
    "$(code --cacert "$P/ca.pem" --cert "$WORK/other/rogue.pem" \
    --key "$WORK/other/rogue.key" "$U/metrics")" 000
eq "off loopback: plain HTTP gets nothing" \
    "$(code "http://localhost:$HPORT/metrics")" 000
# a client stalled in its TLS handshake and one that sends nothing: each
# closed at its deadline (evhttp's timeout, per read, took 10 s for these
# and never came for one trickling its handshake)
"$B/tests/tdslow" 127.0.0.1 "$HPORT" "$WORK/tls.status" hello:127.0.0.1:1 \
    idle:127.0.0.2:1 &
tlpid=$!
wait_until $((200 * SLOW)) slow_is "$WORK/tls.status" "opened 2 closed 0"
eq "off loopback: a client with a certificate reads meanwhile" \
    "$(code --cacert "$P/ca.pem" --cert "$P/web1.pem" --key "$P/web1.key" \
    "$U/status")" 200
wait_until $((20 * (DL + 1) * SLOW)) slow_is "$WORK/tls.status" \
    "opened 2 closed 2"
eq "off loopback: a stalled handshake and a silent client are closed by the deadline" \
    "$(cat "$WORK/tls.status")" "opened 2 closed 2"
kill -TERM $tlpid
wait $tlpid
eq "off loopback: a name of the listener's certificate (localhost) is its own" \
    "$(code --cacert "$P/ca.pem" --cert "$P/web1.pem" --key "$P/web1.key" \
    --resolve "localhost:$HPORT:127.0.0.1" "$U/status")" 200
eq "off loopback: another name is refused (421)" \
    "$(code -k --cert "$P/web1.pem" --key "$P/web1.key" \
    --resolve "evil.example:$HPORT:127.0.0.1" "https://evil.example:$HPORT/status")" 421
stop_listener
eq "the third listener stops cleanly" $? 0

# not on loopback without certificates: refused, never plain text
"$TDLISTEN" -p "$LPORT" --insecure -d "$WORK/o2" --http 0.0.0.0:0 > "$WORK/l2.log" 2>&1
check "--http off loopback with --insecure is refused" test $? -ne 0
check "and says why" grep -q "not a loopback address" "$WORK/l2.log"

# the page with a standby agent recording (tdctl start -s): the agent is
# one row (its standby connection and its recording's were two), its
# recording shows when it started and the time left
CTL=$WORK/control
start_listener "$WORK/l5.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --http 127.0.0.1:0 \
    --control "$CTL" || exit 99
wait_until $((100 * SLOW)) grep -q "status page and metrics at" "$WORK/l5.log"
HPORT=$(sed -n 's|.*status page and metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
    "$WORK/l5.log")
U=http://127.0.0.1:$HPORT
"$TDAGENT" --standby -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" 2> "$WORK/standby2.err" &
sbpid=$!
wait_until $((400 * SLOW)) standby_is 1
"$B/tdctl" -S "$CTL" start -e sched:sched_switch -s 30 --name sb \
    > "$WORK/tdctl.out" 2>&1
eq "tdctl starts a recording on the standby agent" $? 0
sb_recording() {
	get /status "$WORK/sb.json" &&
	    [ "$(jq -r '[.recordings[] | select(.name == "sb" and .state == "recording")] | length' "$WORK/sb.json")" = 1 ] &&
	    [ "$(jq -r '.agents[0].state' "$WORK/sb.json")" = recording ]
}
wait_until $((400 * SLOW)) sb_recording
eq "/status: the standby agent recording is one agent, not two connections" \
    "$(jq -c '[.agents[] | [.identity, .standby, .state, .recording]]' "$WORK/sb.json")" \
    '[["web1",true,"recording","sb"]]'
eq "/status: its recording's time left is known (at most 30 s)" \
    "$(jq '.recordings[] | select(.name == "sb") | .remaining > 0 and .remaining <= 30' "$WORK/sb.json")" \
    true
NOW=$(date +%s)
eq "/status: its start is a time of today (within 60 s of now)" \
    "$(jq --argjson now "$NOW" '.recordings[] | select(.name == "sb") | (.started - $now) | fabs < 60' "$WORK/sb.json")" \
    true
HOME=$WORK $CH --dump-dom "$U/" > "$WORK/dom2.html" 2> "$WORK/chrome3.err"
eq "the page shows one agent row" \
    "$(grep -o '<tr class="agent">' "$WORK/dom2.html" | wc -l)" 1
check "and the recording's time left" \
    grep -q '<td class="remaining">[0-9][0-9]* s</td>' "$WORK/dom2.html"
"$B/tdctl" -S "$CTL" stop > "$WORK/tdctl2.out" 2>&1
kill -TERM $sbpid
wait $sbpid
eq "the standby agent exits 0 on SIGTERM" $? 0
stop_listener
eq "the fifth listener stops cleanly" $? 0

# a recording paused by its identity's --quota says why
OUT6=$WORK/out6
mkdir -p "$OUT6/web1"
head -c 1500000 /dev/zero > "$OUT6/web1/old.dat"
start_listener "$WORK/l6.log" -d "$OUT6" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --http 127.0.0.1:0 \
    --quota 2M --compression none || exit 99
wait_until $((100 * SLOW)) grep -q "status page and metrics at" "$WORK/l6.log"
HPORT=$(sed -n 's|.*status page and metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
    "$WORK/l6.log")
U=http://127.0.0.1:$HPORT
"$TDAGENT" -q -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --name q -e raw_syscalls -F \
    -b 4096 -- dd if=/dev/zero of=/dev/null bs=1 count=5000 status=none \
    2> "$WORK/q.err" &
qpid=$!
paused_quota() {
	get /status "$WORK/q.json" &&
	    jq -e '.recordings[] | select(.name == "q" and .state == "paused") | .paused_why | test("--quota")' \
	    "$WORK/q.json" > /dev/null
}
wait_until $((600 * SLOW)) paused_quota
check "the listener paused it over the --quota" grep -q "over the --quota" "$WORK/l6.log"
eq "/status says why it pauses: the identity's --quota" \
    "$(jq -r '.recordings[] | select(.name == "q") | "\(.state): \(.paused_why)"' "$WORK/q.json" | sed 's/ (.*//')" \
    "paused: over the --quota of this identity"
# the agent waits for a resume that cannot come: SIGTERM (again, once
# the recording has stopped) gives the wait up, and the agent goes,
# removing its instances itself
QKIDS=$(ps --ppid $qpid -o pid=)
term_q() {
	kill -TERM $qpid 2>/dev/null
	! kill -0 $qpid 2>/dev/null
}
wait_until $((300 * SLOW)) term_q
check "SIGTERM ends the agent that waits for a full --quota" \
    sh -c "! kill -0 $qpid 2>/dev/null"
wait $qpid 2>/dev/null
check "... and it says it gave the wait up" grep -q \
    "SIGTERM while the listener was unreachable: gave up waiting" \
    "$WORK/q.err"
kill -KILL $QKIDS $qpid 2>/dev/null
# gone_all PID...: none of them runs; rm_instances: both are removed
gone_all() {
	for _p in "$@"; do
		kill -0 "$_p" 2>/dev/null && return 1
	done
	return 0
}
rm_instances() {
	for _d in $TRACING/instances/tracedock-$qpid-sync \
	    $TRACING/instances/tracedock-$qpid; do
		[ ! -d "$_d" ] || rmdir "$_d" 2>/dev/null || return 1
	done
}
# shellcheck disable=SC2086
wait_until $((200 * SLOW)) gone_all $QKIDS
wait_until $((200 * SLOW)) rm_instances
check "no instance of the agent is left" no_instances $qpid
stop_listener
eq "the sixth listener stops cleanly" $? 0
finish
