#!/bin/sh
# End-to-end: who gets into tdlisten, and whether a revocation takes.
# 1. A slowloris crowd (tests/tdslow: 400 idle TCP connections from four
#    addresses, 50 stalled ClientHellos from a fifth) against the default
#    handshake budget (--max-handshakes 64, --max-handshakes-per-address
#    16): the crowd holds exactly the 64 slots, every other connection of
#    it is refused at once, an honest agent still gets in (it takes exactly
#    one slot of the busiest address) and records an exact count; the
#    refusals are logged at most 5 a line per 10 s plus one summary line,
#    and the log accounts for every one of the crowd's 450 connections.
# 2. The issue's lock-out: 16 idle connections no longer fill
#    --max-sessions 16.
# 3. One identity's authenticated connections that send no HELLO hold at
#    most --max-per-identity session slots.
# 4. Revocation under -u nobody, the listener's key root's and 0600 as
#    tdcert makes it: SIGHUP reloads the CA and the CRL, keeps the key it
#    read as root, and the revoked agent is refused.
# 5. A crowd of one idle connection from each of 64 addresses (127.0.2.1
#    to .64) fills the default handshake budget with no address busier
#    than another: an honest agent still gets in, taking the slot of the
#    oldest handshake (127.0.2.1's), and records an exact count.
# 6. --max-sessions holds across the kinds of client (issue 29): with
#    --max-sessions 3, two agents and one trace-cmd client keep a uftrace
#    client, a third agent and a second trace-cmd client out (each refusal
#    logged); once the trace-cmd client goes, a uftrace client gets its
#    slot, and then a trace-cmd client is the one refused.  (Before, each
#    kind was counted apart: all of them got in.)
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
TDSLOW=$B/tests/tdslow
P=$WORK/pki
pki "$P" web1 web2 || { echo "FAIL: cannot make certificates"; exit 99; }

# honest NAME CERT N: dd of N one-byte blocks streamed as CERT and kept in
# a local copy too (-o); sets ARC, AFILE (the listener's), APID
honest() {
	rm -f "$WORK/pid.$1"
	"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/$2.pem" \
	    --key "$P/$2.key" --ca "$P/ca.pem" --name "$1" \
	    -o "$WORK/local.$1.dat" -e raw_syscalls -F -b 16384 -- sh -c \
	    'echo $$ > '"$WORK/pid.$1"'; exec dd if=/dev/zero of=/dev/null bs=1 count='"$3"' status=none' \
	    2> "$WORK/agent.$1.err"
	ARC=$?
	APID=$(cat "$WORK/pid.$1" 2>/dev/null)
	AFILE=$OUT/$(remote_file "$WORK/agent.$1.err")
}

# exact NAME N: the listener's file of honest NAME holds exactly the local
# copy's events of dd, none missed, 4 per block plus dd's small constant
exact() {
	"$TDCOUNT" "$AFILE" -p "${APID:-0}" > "$WORK/c.$1" 2>&1
	"$TDCOUNT" "$WORK/local.$1.dat" -p "${APID:-0}" > "$WORK/cl.$1" 2>&1
	ev=$(field events < "$WORK/c.$1")
	eq "$1: no event missed" "$(field missed < "$WORK/c.$1")" 0
	eq "$1: the listener's file holds exactly the local copy's events" \
	    "${ev:-x}" "$(field events < "$WORK/cl.$1")"
	check "$1: 4 events per block plus a small constant ($ev)" \
	    test "${ev:-0}" -gt $((4 * $2)) -a "${ev:-0}" -lt $((4 * $2 + 2000))
}

# sockets LPID: the sockets the listener holds
sockets() {
	ls -l "/proc/$1/fd" 2>/dev/null | grep -c 'socket:'
}

# all_accounted LOG N: LOG accounts for N connections or more
all_accounted() {
	[ "$(accounted "$1")" -ge "$2" ]
}

# sockets_are N: the listener holds N sockets
sockets_are() {
	[ "$(sockets "$LPID")" -eq "$1" ]
}

# now_ms: the time in milliseconds
now_ms() {
	date +%s%3N
}

# older_than T MS: more than MS milliseconds have passed since T (now_ms)
older_than() {
	[ $(($(now_ms) - $1)) -gt "$2" ]
}

# status_is WANT: tdslow's status file says WANT
status_is() {
	[ "$(cat "$WORK/slow.status" 2>/dev/null)" = "$1" ]
}

# accounted LOG: connections the admission lines of LOG account for: one
# per line logged on its own, N per summary line
accounted() {
	awk '/refusing 127\.0\.0\.[2-6]:[0-9]+: / ||
	    /session 127\.0\.0\.[2-6]:[0-9]+: closing: / { n++ }
	    / more connections refused or closed before the end of their handshake/ {
		for (i = 1; i < NF; i++)
			if ($(i + 1) == "more") { n += $i; break }
	    }
	    END { print n + 0 }' "$1"
}

# ---- 1. a slowloris crowd at the default handshake budget -------------
OUT=$WORK/out
# The budget (--max-handshakes, --max-handshakes-per-address) and
# --max-sessions are the defaults.  The handshake timeout is raised so
# that the crowd holds its slots for the whole test however slow the
# machine: the attacker's best case (with the default 10 s its slots
# would only come free sooner).
start_listener "$WORK/l.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --handshake-timeout 3600 ||
    exit 99
base=$(sockets "$LPID")
t0=$(date +%s)
"$TDSLOW" 127.0.0.1 "$LPORT" "$WORK/slow.status" idle:127.0.0.2:100 \
    idle:127.0.0.3:100 idle:127.0.0.4:100 idle:127.0.0.5:100 \
    hello:127.0.0.6:50 2> "$WORK/slow.err" &
spid=$!
# 5 addresses may hold 16 each, the budget is 64: 450 - 64 refused
wait_until $((1200 * SLOW)) status_is "opened 450 closed 386"
eq "the crowd: 450 connections, all but the 64 handshake slots refused" \
    "$(cat "$WORK/slow.status" 2>/dev/null)" "opened 450 closed 386"
eq "the listener holds exactly 64 connections in the handshake" \
    "$(sockets "$LPID")" $((base + 64))
check "refusals over the per-address limit are logged" \
    grep -q "refusing 127.0.0.[2-6]:[0-9]*: its address has 16 connections in the handshake already" "$WORK/l.log"

honest crowd web1 20000
eq "an honest agent records through the crowd (exit 0)" "$ARC" 0
exact crowd 20000
wait_until $((200 * SLOW)) status_is "opened 450 closed 387"
eq "its connection took exactly one slot of the crowd" \
    "$(cat "$WORK/slow.status")" "opened 450 closed 387"
check "the crowd never took a session slot" sh -c \
    "! grep -q 'sessions already' '$WORK/l.log'"

kill -TERM "$spid"
wait "$spid"
eq "the crowd goes away by itself (tdslow exits 0)" $? 0
eq "tdslow closed the rest" "$(cat "$WORK/slow.status")" \
    "opened 450 closed 387 done"
# every connection of the crowd ends refused or cut in its handshake; the
# summary of an interval comes at its end
wait_until $((600 * SLOW)) all_accounted "$WORK/l.log" 450
t1=$(date +%s)
eq "the log accounts for each of the crowd's 450 connections, once" \
    "$(accounted "$WORK/l.log")" 450
lines=$(grep -Ec "refusing 127\.0\.0\.|session 127\.0\.0\.[0-9]*:[0-9]*: closing: | more connections refused or closed" "$WORK/l.log")
summaries=$(grep -c " more connections refused or closed" "$WORK/l.log")
check "refusals are summed up ($summaries summary lines)" test "$summaries" -ge 1
# at most 5 lines and one summary per 10 s interval begun in the window
bound=$((6 * ((t1 - t0) / 10 + 2)))
check "$lines admission lines for 450 refusals, at most $bound in $((t1 - t0)) s" \
    test "$lines" -le "$bound"
wait_until $((200 * SLOW)) sockets_are "$base"
eq "every descriptor of the crowd given back" "$(sockets "$LPID")" "$base"
check "the listener is alive" kill -0 "$LPID"
stop_listener
eq "the listener stops cleanly" $? 0

# ---- 2. 16 idle connections and --max-sessions 16 ---------------------
OUT=$WORK/out2
start_listener "$WORK/l2.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --handshake-timeout 3600 \
    --max-sessions 16 || exit 99
base=$(sockets "$LPID")
rm -f "$WORK/slow.status"
"$TDSLOW" 127.0.0.1 "$LPORT" "$WORK/slow.status" idle:127.0.0.2:16 \
    2> "$WORK/slow2.err" &
spid=$!
wait_until $((600 * SLOW)) sockets_are $((base + 16))
eq "16 idle connections held, in the handshake" "$(sockets "$LPID")" \
    $((base + 16))
honest sixteen web2 2000
eq "--max-sessions 16: an agent still gets in (exit 0)" "$ARC" 0
exact sixteen 2000
eq "and none of the 16 was cut for it" "$(cat "$WORK/slow.status")" \
    "opened 16 closed 0"
kill -TERM "$spid"
wait "$spid"
stop_listener

# ---- 3. one identity's connections waiting for their HELLO -------------
# Through TLS, a connection holds a --max-sessions slot until its HELLO:
# one identity may hold at most --max-per-identity (64) such, so 70 of
# web1's that never send one leave web2 the 65th slot of --max-sessions 65
# (before, they took all 65 and web2 was refused)
OUT=$WORK/out3
start_listener "$WORK/l3.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --handshake-timeout 3600 \
    --max-sessions 65 || exit 99
base=$(sockets "$LPID")
rm -f "$WORK/slow.status"
"$TDSLOW" --cert "$P/web1.pem" --key "$P/web1.key" --ca "$P/ca.pem" \
    127.0.0.1 "$LPORT" "$WORK/slow.status" tls:127.0.0.1:70 \
    2> "$WORK/slow3.err" &
spid=$!
wait_until $((1200 * SLOW)) status_is "opened 70 closed 6"
eq "70 authenticated connections without HELLO: 6 over 64 refused" \
    "$(cat "$WORK/slow.status" 2>/dev/null)" "opened 70 closed 6"
eq "the listener holds exactly 64 of them" "$(sockets "$LPID")" \
    $((base + 64))
check "the refusal names --max-per-identity" \
    grep -q "session web1 (127.0.0.1:[0-9]*): closing: 64 connections of 'web1' wait for their HELLO already (--max-per-identity)" "$WORK/l3.log"
honest waiting web2 2000
eq "another identity still gets a session slot (exit 0)" "$ARC" 0
exact waiting 2000
kill -TERM "$spid"
wait "$spid"
eq "tdslow exits 0" $? 0
stop_listener

# ---- 3b. over --max-sessions at its first connection: told, comes back --
# With the one session slot taken, a new agent gets through TLS and an
# ERROR RETRY naming --max-sessions (it was closed without a word before,
# and the agent exited 1): it logs the listener's reason, tries again, and
# records once the holder's session ends.
OUT=$WORK/out3b
start_listener "$WORK/l3b.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --max-sessions 1 || exit 99
rm -f "$WORK/go"
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --name holder -e sched -F -- \
    sh -c 'until [ -e '"$WORK/go"' ]; do sleep 0.1; done' \
    2> "$WORK/agent.holder.err" &
hpid=$!
wait_session "$WORK/l3b.log"
( honest later web2 2000; echo "$ARC" > "$WORK/arc.later" ) &
bpid=$!
wait_until $((1200 * SLOW)) grep -q "come back later; trying again" \
    "$WORK/agent.later.err"
check "the agent over the cap logs the listener's reason and tries again" \
    grep -q "the listener holds all the sessions it takes (--max-sessions): come back later; trying again for up to" "$WORK/agent.later.err"
check "the listener logs the refusal" \
    grep -q "session web2 (127.0.0.1:[0-9]*): closing: 1 sessions already (--max-sessions)" "$WORK/l3b.log"
touch "$WORK/go"
wait "$hpid"
eq "the holder ends well (exit 0)" $? 0
wait "$bpid"
ARC=$(cat "$WORK/arc.later" 2>/dev/null)
APID=$(cat "$WORK/pid.later" 2>/dev/null)
AFILE=$OUT/$(remote_file "$WORK/agent.later.err")
eq "the agent refused at its first connection records once a slot frees (exit 0)" \
    "$ARC" 0
exact later 2000
stop_listener

# ---- 4. revocation under -u nobody, the key root's and 0600 ------------
OUT=$WORK/out4
mkdir -p "$OUT"
chown nobody "$OUT"
# the CA and the CRL are public (0644); the directory tdcert made 0700
# becomes 0711 as tdcert(1) says: reachable, its keys still private
chmod 711 "$WORK" "$P"
eq "the key is root's, 0600 (tdcert's modes)" \
    "$(stat -c '%U %a' "$P/listener.key")" "root 600"
check "nobody cannot read the key" sh -c \
    "! su -s /bin/sh nobody -c 'cat \"$P/listener.key\"' >/dev/null 2>&1"
start_listener "$WORK/l4.log" -d "$OUT" -u nobody --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --crl "$P/crl.pem" || exit 99
wait_until $((100 * SLOW)) grep -q "running as user 'nobody'" "$WORK/l4.log"
eq "-u: the listener runs as nobody" \
    "$(ps -o user= -p "$LPID" | tr -d ' ')" nobody
honest before web1 2000
eq "web1 records before its revocation" "$ARC" 0
exact before 2000

sh "$TDCERT" revoke "$P" web1 >/dev/null 2>&1
kill -HUP "$LPID"
wait_until $((100 * SLOW)) grep -q "SIGHUP: CA and CRL reloaded" "$WORK/l4.log"
check "SIGHUP reloads the CA and the CRL, keeps the key in memory" \
    grep -q "SIGHUP: CA and CRL reloaded for new sessions; certificate and key kept in memory (cannot read key '.*listener.key': Permission denied)" "$WORK/l4.log"
check "no warning that the old certificates are kept" sh -c \
    "! grep -q 'keeping the old certificates' '$WORK/l4.log'"
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" -e sched -s 0.3 \
    2> "$WORK/revoked.err"
eq "the revoked agent is refused after SIGHUP (exit 1)" $? 1
check "the agent is told its certificate was revoked" \
    grep -q "revoked" "$WORK/revoked.err"
check "the listener logs the revocation" \
    grep -q "certificate verify failed: certificate revoked" "$WORK/l4.log"
honest after web2 2000
eq "another agent records after SIGHUP, with the key kept" "$ARC" 0
exact after 2000
check "the listener is alive" kill -0 "$LPID"
stop_listener
eq "the listener stops cleanly" $? 0

# ---- 5. one idle connection from each of 64 addresses ------------------
# The default budget (--max-handshakes 64), the handshake timeout raised
# as in 1.  Each address holds one slot, so none is busier than the
# newcomer's: the slot it takes is the oldest handshake's, once that one
# has run TD_ADMIT_MIN_AGE_MS (1 s) (before, the agent was refused for as
# long as the crowd stayed).
OUT=$WORK/out5
start_listener "$WORK/l5.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --handshake-timeout 3600 ||
    exit 99
base=$(sockets "$LPID")
rm -f "$WORK/slow.status"
crowd=
for i in $(seq 1 64); do
	crowd="$crowd idle:127.0.2.$i:1"
done
# shellcheck disable=SC2086
"$TDSLOW" 127.0.0.1 "$LPORT" "$WORK/slow.status" $crowd \
    2> "$WORK/slow5.err" &
spid=$!
wait_until $((1200 * SLOW)) status_is "opened 64 closed 0"
wait_until $((600 * SLOW)) sockets_are $((base + 64))
eq "64 addresses hold the 64 handshake slots" "$(sockets "$LPID")" \
    $((base + 64))
eq "none of the crowd was refused" "$(cat "$WORK/slow.status")" \
    "opened 64 closed 0"
# every handshake of the crowd is older than the listener's minimum age
# for a slot to be taken once this holds: the listener held all 64 at t
t=$(now_ms)
wait_until $((100 * SLOW)) older_than "$t" 1000
honest many web1 20000
eq "an honest agent records through the crowd of 64 addresses (exit 0)" \
    "$ARC" 0
exact many 20000
wait_until $((200 * SLOW)) status_is "opened 64 closed 1"
eq "its connection took exactly one slot of the crowd" \
    "$(cat "$WORK/slow.status")" "opened 64 closed 1"
check "the slot taken was the oldest handshake's (127.0.2.1's)" \
    grep -q "session 127\.0\.2\.1:[0-9]*: closing: its handshake slot goes to 127\.0\.0\.1:[0-9]*" "$WORK/l5.log"
eq "only one handshake was cut for it" \
    "$(grep -c "closing: its handshake slot goes to" "$WORK/l5.log")" 1
kill -TERM "$spid"
wait "$spid"
eq "tdslow exits 0" $? 0
check "the listener is alive" kill -0 "$LPID"
stop_listener
eq "the listener stops cleanly" $? 0

# ---- 6. --max-sessions 3 across agents, trace-cmd and uftrace ----------
# slowfile_is FILE WANT: a tdslow status file says WANT
slowfile_is() {
	[ "$(cat "$1" 2>/dev/null)" = "$2" ]
}
# slow6 NAME PORT MODE: one tdslow connection (MODE tls: an agent through
# TLS that sends no HELLO; idle: a TCP connection that sends nothing) to
# PORT, status in $WORK/s6.NAME; sets SPID
slow6() {
	rm -f "$WORK/s6.$1"
	"$TDSLOW" --cert "$P/web1.pem" --key "$P/web1.key" --ca "$P/ca.pem" \
	    127.0.0.1 "$2" "$WORK/s6.$1" "$3:127.0.0.1:${4:-1}" \
	    2> "$WORK/s6.$1.err" &
	SPID=$!
}
# log6_has N PATTERN: the log has N lines with PATTERN (or more)
log6_has() {
	[ "$(grep -c "$2" "$WORK/l6.log" 2>/dev/null)" -ge "$1" ]
}
OUT=$WORK/out6
TPORT=$(free_port 11) || exit 99
UPORT=$(free_port) || exit 99
start_listener "$WORK/l6.log" -d "$OUT" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --handshake-timeout 3600 \
    --max-sessions 3 --tracecmd-port "$TPORT" \
    --tracecmd-data-ports $((TPORT + 1))-$((TPORT + 10)) \
    --uftrace-port "$UPORT" || exit 99
wait_until $((100 * SLOW)) log6_has 1 "listening for uftrace"
slow6 agents "$LPORT" tls 2
apid=$SPID
wait_until $((600 * SLOW)) log6_has 2 "TLS handshake done"
eq "two agents hold two session slots" \
    "$(grep -c "TLS handshake done" "$WORK/l6.log")" 2
slow6 tc "$TPORT" idle
tpid=$SPID
wait_until $((600 * SLOW)) log6_has 1 "trace-cmd client (unauthenticated)"
check "a trace-cmd client takes the third" \
    grep -q "trace-cmd client (unauthenticated)" "$WORK/l6.log"
slow6 uf1 "$UPORT" idle
wait_until $((600 * SLOW)) slowfile_is "$WORK/s6.uf1" "opened 1 closed 1"
eq "a uftrace client over --max-sessions 3 is refused" \
    "$(cat "$WORK/s6.uf1")" "opened 1 closed 1"
check "... and logged, naming --max-sessions" \
    grep -q "uftrace 127.0.0.1:[0-9]*: refused: 3 sessions of every kind already (--max-sessions)" "$WORK/l6.log"
kill -TERM "$SPID"
wait "$SPID"
slow6 agent3 "$LPORT" tls
wait_until $((600 * SLOW)) slowfile_is "$WORK/s6.agent3" "opened 1 closed 1"
eq "a third agent is refused (told ERROR RETRY, closed)" \
    "$(cat "$WORK/s6.agent3")" "opened 1 closed 1"
check "... and logged, counting the sessions of every kind" \
    grep -q "session web1 (127.0.0.1:[0-9]*): closing: 3 sessions already (--max-sessions)" "$WORK/l6.log"
kill -TERM "$SPID"
wait "$SPID"
slow6 tc2 "$TPORT" idle
wait_until $((600 * SLOW)) slowfile_is "$WORK/s6.tc2" "opened 1 closed 1"
eq "a second trace-cmd client is refused" "$(cat "$WORK/s6.tc2")" \
    "opened 1 closed 1"
check "... and logged" \
    grep -q "trace-cmd client refused: --max-sessions 3 reached (trace-cmd 127.0.0.1:[0-9]*; sessions of every kind: 3)" "$WORK/l6.log"
kill -TERM "$SPID"
wait "$SPID"
# the trace-cmd client goes: its slot is free for a client of another kind
kill -TERM "$tpid"
wait "$tpid"
wait_until $((600 * SLOW)) log6_has 1 "trace-cmd 127.0.0.1:[0-9]*: closing: the client went away without CLOSE"
check "the trace-cmd client's close is logged" \
    grep -q "trace-cmd 127.0.0.1:[0-9]*: closing: the client went away without CLOSE" "$WORK/l6.log"
slow6 uf2 "$UPORT" idle
wait_until $((600 * SLOW)) log6_has 1 "uftrace 127.0.0.1:[0-9]*: connected"
check "then a uftrace client gets the slot" \
    grep -q "uftrace 127.0.0.1:[0-9]*: connected" "$WORK/l6.log"
ufpid=$SPID
slow6 tc3 "$TPORT" idle
wait_until $((600 * SLOW)) slowfile_is "$WORK/s6.tc3" "opened 1 closed 1"
eq "and now a trace-cmd client is the one refused" \
    "$(cat "$WORK/s6.tc3")" "opened 1 closed 1"
kill -TERM "$SPID"
wait "$SPID"
eq "the uftrace client was not cut for it" "$(cat "$WORK/s6.uf2")" \
    "opened 1 closed 0"
eq "two refusals of a trace-cmd client logged" \
    "$(grep -c "trace-cmd client refused: --max-sessions 3 reached" "$WORK/l6.log")" 2
kill -TERM "$ufpid" "$apid"
wait "$ufpid"
wait "$apid"
check "the listener is alive" kill -0 "$LPID"
stop_listener
eq "the listener stops cleanly" $? 0
finish
