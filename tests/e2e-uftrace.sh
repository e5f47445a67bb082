#!/bin/sh
# End-to-end: tdlisten --uftrace-port takes the runs of Debian 12's real
# uftrace 0.13 (uftrace record --host 127.0.0.1 --port P) as uftrace data
# directories that uftrace replay, report and info read unchanged: a
# program built here with -pg making exactly N calls replays the same
# calls as a local uftrace record of it.  Hostile clients (tests/ufpoke:
# ../ and absolute file names, garbage, a 4 GiB message, a file twice, no
# info, a client that vanishes, a 17th client of one address) are
# closed, each run kept as incomplete with its reason, nothing written
# outside its directory, while a real client's run completes; a program
# of two threads gives one .dat each; the receiving machine's clock
# offsets are in tdlisten.clock; with tracefs, the log names the tdagent
# recording of the same host on the mono clock; a run still open when
# tdlisten stops is kept incomplete; out of descriptors, accepting pauses
# a second at a time (one log line each) and resumes.  Needs uftrace and cc
# (scripts/deps.sh installs them).
. "$(dirname "$0")/e2e-lib.sh"
command -v uftrace >/dev/null || skip "uftrace is not installed"
command -v cc >/dev/null || skip "no C compiler to build the traced program"
UFPOKE=$B/tests/ufpoke
[ -x "$UFPOKE" ] || { echo "FAIL: no $UFPOKE"; exit 99; }
N=3000
OUT=$WORK/out
mkdir -p "$OUT" "$WORK/c1" "$WORK/c2"

# ---- the traced program: main calls mid N times, mid calls leaf --------
cat > "$WORK/prog.c" <<EOF
#include <stdio.h>
static int leaf(int x) { return x + 1; }
static int mid(int x) { return leaf(x) * 2; }
int main(void)
{
	int i, s = 0;

	for (i = 0; i < $N; i++)
		s += mid(i);
	printf("%d\n", s);
	return 0;
}
EOF
cc -pg -O0 -o "$WORK/prog" "$WORK/prog.c" || { echo "FAIL: cc -pg"; exit 99; }

# calls DIR OUT: uftrace replay's lines without durations and thread ids.
# Both runs are recorded with --no-sched: a schedule event (the machine's
# load decides where) turns a leaf "f();" into "f() {" "} /* f */" even
# when replay hides it (the run of two threads below keeps them: it sends
# perf-cpuN.dat, and its counts do not depend on them)
calls() {
	uftrace replay -d "$1" -f none --no-event 2>&1 |
	    sed 's/^ *\[ *[0-9]*\] | //' > "$2"
}
# counts DIR: "function calls" of uftrace report, sorted
counts() {
	uftrace report -d "$1" --no-event 2>/dev/null |
	    awk '$NF ~ /^(main|mid|leaf)$/ { print $NF, $(NF-1) }' | sort
}

# the reference: a local run
(cd "$WORK/c1" && uftrace record --no-sched -d "$WORK/local" "$WORK/prog") \
    > "$WORK/local.out" 2>&1
check "a local uftrace record of the program" [ -f "$WORK/local/info" ]
calls "$WORK/local" "$WORK/local.calls"
eq "the local run makes $N calls of leaf" \
    "$(grep -c '^ *leaf();$' "$WORK/local.calls")" "$N"

# ---- tdlisten with a uftrace port ---------------------------------------
# start_uf LOG ARGS: tdlisten on a free --uftrace-port (UPORT)
start_uf() {
	_log=$1
	shift
	for _t in 1 2 3 4 5; do
		UPORT=$(free_port) || return 1
		start_listener "$_log" --insecure -d "$OUT" \
		    --uftrace-port "$UPORT" "$@" || return 1
		wait_until $((100 * SLOW)) grep -q "listening for uftrace" "$_log"
		grep -q "listening for uftrace" "$_log" && return 0
		stop_listener 2>/dev/null
	done
	return 1
}
logged() {
	grep -q "$2" "$1"
}
L=$WORK/l1.log
start_uf "$L" || { echo "FAIL: cannot start tdlisten"; exit 99; }
ok "tdlisten listens for uftrace on 127.0.0.1 port $UPORT"
check "the uftrace port is logged as unauthenticated" \
    logged "$L" "listening for uftrace.*127.0.0.1.*no authentication"

# a hostile client holds a run open while a real client records
mkfifo "$WORK/fifo"
"$UFPOKE" "$UPORT" hold < "$WORK/fifo" > "$WORK/hold.out" 2>&1 &
HOLD=$!
exec 3> "$WORK/fifo"
wait_until $((400 * SLOW)) logged "$L" "run of '../../ufpoke-evil'"
check "the hostile client's run began" logged "$L" "run of '../../ufpoke-evil'"

(cd "$WORK/c2" && uftrace record --no-sched --host 127.0.0.1 \
    --port "$UPORT" "$WORK/prog") > "$WORK/remote.out" 2>&1
eq "uftrace record --host exits 0" "$?" 0
wait_until $((400 * SLOW)) logged "$L" ": wrote '"
check "tdlisten wrote the run" logged "$L" ": wrote '$OUT/uftrace-127.0.0.1/"
R=$(sed -n "s/.*: wrote '\([^']*\)'.*/\1/p" "$L" | head -1)
check "the run is a directory DIR/uftrace-127.0.0.1/<UTC time>[.N]" \
    sh -c "echo '$R' | grep -Eq '/uftrace-127.0.0.1/[0-9]{8}T[0-9]{6}Z(\.[0-9]+)?\$' &&
    [ -d '$R' ]"

# now the hostile client sends ../ufpoke-evil.sym: closed
echo go >&3
exec 3>&-
wait $HOLD
eq "the hostile client was closed" "$?" 0
check "its reason is logged" \
    logged "$L" "unsafe file name '../ufpoke-evil.sym'"

# ---- the received run is the local run ---------------------------------
calls "$R" "$WORK/remote.calls"
check "uftrace replay -d prints the same calls as the local run" \
    cmp -s "$WORK/local.calls" "$WORK/remote.calls"
eq "... $N calls of leaf" "$(grep -c '^ *leaf();$' "$WORK/remote.calls")" "$N"
eq "... $N calls of mid" "$(grep -c '^ *mid() {$' "$WORK/remote.calls")" "$N"
eq "uftrace report -d counts the same calls" "$(counts "$R" | tr '\n' ' ')" \
    "$(counts "$WORK/local" | tr '\n' ' ')"
eq "... $N of leaf" "$(counts "$R" | awk '$1 == "leaf" { print $2 }')" "$N"
uftrace info -d "$R" > "$WORK/info.out" 2>&1
eq "uftrace info -d reads it" "$?" 0
check "... the program's command line" \
    grep -q "cmdline.*uftrace record --no-sched --host 127.0.0.1 --port $UPORT" \
    "$WORK/info.out"
syms() {
	(cd "$1" && ls -- *.sym sid-*.map task.txt info) 2>/dev/null |
	    sed 's/^sid-.*\.map$/sid-map/' | sort | tr '\n' ' '
}
eq "the same kinds of metadata files as the local run" "$(syms "$R")" \
    "$(syms "$WORK/local")"
eq "one thread's data file" "$(cd "$R" && ls | grep -Ec '^[0-9]+\.dat$')" 1
check "tdlisten.clock holds the offsets" sh -c "
    grep -Eq '^start_offset_ns: [0-9]+\$' '$R/tdlisten.clock' &&
    grep -Eq '^end_offset_ns: [0-9]+\$' '$R/tdlisten.clock'"
m0=$(awk '$1 == "start_monotonic_ns:" { print $2 }' "$R/tdlisten.clock")
m1=$(awk '$1 == "end_monotonic_ns:" { print $2 }' "$R/tdlisten.clock")
check "... the run's start before its end" [ "$m0" -le "$m1" ]
check "no .part directory left" sh -c "! ls -d '$OUT'/*/*.part 2>/dev/null"

# ---- a program of two threads: one .dat each ---------------------------
cat > "$WORK/prog2.c" <<EOF
#include <pthread.h>
#include <stdio.h>
static int leaf(int x) { return x + 1; }
static int mid(int x) { return leaf(x) * 2; }
static void *worker(void *arg)
{
	int i, s = 0;

	for (i = 0; i < 2000; i++)
		s += mid(i);
	*(int *)arg = s;
	return NULL;
}
int main(void)
{
	pthread_t t;
	int i, s = 0, w = 0;

	pthread_create(&t, NULL, worker, &w);
	for (i = 0; i < $N; i++)
		s += mid(i);
	pthread_join(t, NULL);
	printf("%d %d\n", s, w);
	return 0;
}
EOF
# allcounts DIR: every "function calls" of uftrace report, sorted
allcounts() {
	uftrace report -d "$1" --no-event 2>/dev/null |
	    awk 'NR > 2 { print $NF, $(NF-1) }' | sort | tr '\n' ' '
}
if cc -pg -O0 -pthread -o "$WORK/prog2" "$WORK/prog2.c"; then
	(cd "$WORK/c1" && uftrace record -d "$WORK/local2" "$WORK/prog2") \
	    > /dev/null 2>&1
	n0=$(grep -c "uftrace .*: wrote '" "$L")
	(cd "$WORK/c2" && uftrace record --host 127.0.0.1 --port "$UPORT" \
	    "$WORK/prog2") > "$WORK/remote3.out" 2>&1
	eq "uftrace record --host of two threads exits 0" "$?" 0
	wait_until $((400 * SLOW)) sh -c \
	    "[ \$(grep -c \"uftrace .*: wrote '\" '$L') -gt $n0 ]"
	R2=$(sed -n "s/.*uftrace .*: wrote '\([^']*\)'.*/\1/p" "$L" | tail -1)
	eq "two threads: one data file each" \
	    "$(cd "$R2" && ls | grep -Ec '^[0-9]+\.dat$')" 2
	eq "two threads: uftrace report -d counts what the local run does" \
	    "$(allcounts "$R2")" "$(allcounts "$WORK/local2")"
	eq "... $((N + 2000)) calls of mid" "$(uftrace report -d "$R2" \
	    --no-event | awk '$NF == "mid" { print $(NF-1) }')" $((N + 2000))
else
	fail "cc -pthread: cannot build the program of two threads"
fi

# ---- more hostile clients ----------------------------------------------
# scenario, what the log says
for t in "slash|unsafe file name '/tmp/ufpoke-evil.sym'" \
    "garbage|not a uftrace message (magic 0xa5a5)" \
    "huge|SEND_DATA of 4294967295 bytes" \
    "twice|'task.txt' sent twice" \
    "noinfo|SEND_END without the info file" \
    "vanish|the client went away before SEND_END"; do
	s=${t%%|*}
	why=${t#*|}
	"$UFPOKE" "$UPORT" "$s" > "$WORK/poke.out" 2>&1
	eq "ufpoke $s: closed" "$?" 0
	wait_until $((400 * SLOW)) logged "$L" "as incomplete.*: $why"
	check "... kept as incomplete: $why" logged "$L" "as incomplete.*: $why"
done
eq "seven runs kept as incomplete" \
    "$(ls -d "$OUT"/uftrace-127.0.0.1/*.incomplete | wc -l)" 7
check "each says why in tdlisten.incomplete" sh -c "
    for d in '$OUT'/uftrace-127.0.0.1/*.incomplete; do
	[ -s \$d/tdlisten.incomplete ] || exit 1
    done"
eq "nothing named by a hostile client anywhere" \
    "$(find "$WORK" -name '*ufpoke-evil*' | wc -l)" 0
eq "incomplete runs hold only files of the format and tdlisten's" \
    "$(cd "$OUT/uftrace-127.0.0.1" && ls *.incomplete | grep -v ':$' |
    grep -Ev '^(1\.dat|task\.txt|tdlisten\.(clock|incomplete))?$' | wc -l)" 0
eq "the output directory holds the uftrace host directory only" \
    "$(ls -A "$OUT" | grep -v '^\.tdlisten' | tr '\n' ' ')" "uftrace-127.0.0.1 "

# ---- 16 clients at once from one address, no more ---------------------
"$UFPOKE" "$UPORT" flood > "$WORK/flood.out" 2>&1
eq "a 17th client of one address is closed, the 16 others not" "$?" 0
check "... and logged" logged "$L" "refused: 16 clients of that address already"
# ... and 200 more refused after it: logged at a bounded rate as every
# other refusal (issue 31: they flooded the log), at most 5 lines an
# interval of 10 s (the flood takes one or two) and the rest summed up
n=$(grep -c "refused: 16 clients of that address already" "$L")
check "201 refusals: at most 10 lines of them ($n)" test "$n" -le 10
wait_until $((300 * SLOW)) logged "$L" "more connections refused or closed"
check "... the rest summed up" logged "$L" "more connections refused or closed"
wait_until $((400 * SLOW)) sh -c \
    "[ \$(ls -d '$OUT'/uftrace-127.0.0.1/*.incomplete | wc -l) -ge 23 ]"
eq "the 16 runs kept as incomplete when they went away" \
    "$(ls -d "$OUT"/uftrace-127.0.0.1/*.incomplete | wc -l)" 23

# ---- a tdagent recording of the same host on the mono clock ------------
# (--insecure: the agent's identity is its address, as the uftrace
# client's directory is)
if [ "$(id -u)" = 0 ] && { [ -d $TRACING/instances ] ||
    mount -t tracefs nodev $TRACING 2>/dev/null; } &&
    [ -d $TRACING/instances ]; then
	"$TDAGENT" -q -h 127.0.0.1 -p "$LPORT" --insecure -C mono \
	    -e sched:sched_switch -- sh -c \
	    "while [ ! -f '$WORK/agent.stop' ]; do sleep 0.05; done" \
	    2> "$WORK/agent.err" &
	apid=$!
	wait_session "$L"
	check "a tdagent recording of 127.0.0.1 on the mono clock is open" \
	    sessions_opened "$L" 1
	(cd "$WORK/c2" && uftrace record --host 127.0.0.1 --port "$UPORT" \
	    "$WORK/prog") > "$WORK/remote2.out" 2>&1
	eq "a second uftrace run meanwhile" "$?" 0
	wait_until $((400 * SLOW)) logged "$L" "of the same host (clock mono)"
	check "the log names the tdagent file covering the run" logged "$L" \
	    "tdagent recording '$OUT/127.0.0.1/[^']*\\.dat' of the same host (clock mono) covers the interval of '$OUT/uftrace-127.0.0.1/"
	touch "$WORK/agent.stop"
	wait $apid
	eq "the agent ends its recording" "$?" 0
else
	echo "# no tracefs here: the same-host log line is not checked"
fi

# ---- a run open when tdlisten stops ------------------------------------
n0=$(grep -c "run of '../../ufpoke-evil'" "$L")
"$UFPOKE" "$UPORT" hold < "$WORK/fifo" > /dev/null 2>&1 &
HOLD=$!
exec 3> "$WORK/fifo"
wait_until $((400 * SLOW)) sh -c "[ \$(grep -c \"run of '../../ufpoke-evil'\" '$L') -gt $n0 ]"
stop_listener
eq "tdlisten exits 0" "$?" 0
exec 3>&-
wait $HOLD
check "no sanitizer report in the log" sh -c \
    "! grep -Eq 'Sanitizer|runtime error' '$L'"
check "a run open at the stop is kept as incomplete" \
    logged "$L" "as incomplete.*: tdlisten stopped before the run ended"
check "no .part directory left" sh -c "! ls -d '$OUT'/*/*.part 2>/dev/null"

# ---- a run a crashed tdlisten left as .part ----------------------------
start_uf "$WORK/l2.log" || { echo "FAIL: cannot start tdlisten"; exit 99; }
L=$WORK/l2.log
"$UFPOKE" "$UPORT" hold < "$WORK/fifo" > /dev/null 2>&1 &
HOLD=$!
exec 3> "$WORK/fifo"
wait_until $((400 * SLOW)) logged "$L" "run of '../../ufpoke-evil'"
kill -KILL "$LPID"
wait "$LPID"
exec 3>&-
wait $HOLD
check "a tdlisten killed mid-run leaves the run as .part" \
    sh -c "ls -d '$OUT'/uftrace-127.0.0.1/*.part >/dev/null 2>&1"
start_uf "$WORK/l3.log" || { echo "FAIL: cannot start tdlisten"; exit 99; }
check "the next tdlisten keeps it as incomplete" logged "$WORK/l3.log" \
    "uftrace: '$OUT/uftrace-127.0.0.1/[^']*\\.incomplete' kept as incomplete: tdlisten stopped before the run ended"
check "... and no .part is left" \
    sh -c "! ls -d '$OUT'/*/*.part 2>/dev/null"

# ---- out of descriptors: accepting pauses a second, no spinning --------
# the listener's limit lowered to 4 descriptors over those it holds below
# 100 (valgrind's own sit near the old limit), then 10 idle clients
L=$WORK/l3.log
NOFILE=$(prlimit --pid "$LPID" --nofile --noheadings --raw -o SOFT,HARD)
FDLOW=$(ls /proc/$LPID/fd | awk '$1 < 100 { n++ } END { print n + 0 }')
prlimit --pid "$LPID" --nofile=$((FDLOW + 4)):"${NOFILE#* }"
gone() {
	grep -c "went away before" "$L"
}
GONE0=$(gone)
T0=$(date +%s)
bash -c 'for i in $(seq 10); do exec {f}<>/dev/tcp/127.0.0.1/'"$UPORT"' || exit 1
done; read -r x < "$1"' hold "$WORK/fifo" &
HOLD=$!
pauses() {
	[ "$(grep -c 'uftrace port: accept: .*pausing for a second' "$L")" -ge 2 ]
}
wait_until $((400 * SLOW)) pauses
NP=$(grep -c 'uftrace port: accept: .*pausing for a second' "$L")
T1=$(date +%s)
check "out of descriptors, accepting pauses, and again after a second ($NP)" \
    test "$NP" -ge 2
eq "every accept failure pauses it" \
    "$(grep -c 'uftrace port: accept:' "$L")" "$NP"
check "at most one line a second ($NP lines in $((T1 - T0)) s)" \
    test "$NP" -le $((T1 - T0 + 2))
prlimit --pid "$LPID" --nofile="${NOFILE% *}:${NOFILE#* }"
kill "$HOLD"
wait "$HOLD" 2>/dev/null
all_gone() {
	[ "$(gone)" -ge $((GONE0 + 10)) ]
}
wait_until $((400 * SLOW)) all_gone
eq "the 10 clients are taken in the end, each gone" "$(gone)" $((GONE0 + 10))
stop_listener
eq "tdlisten exits 0" "$?" 0
finish
