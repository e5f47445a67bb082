#!/usr/bin/env bash
# bench/concurrent.sh: 1, 4 and 16 concurrent agents, each streaming its own
# workload to one listener, side by side with trace-cmd, in one run; see
# bench/README.md, "Concurrent agents".
#
# usage: bench/concurrent.sh [--agents 'N...'] [--total BLOCKS | --blocks K]
#                            [--repeat R] [--tools 'tdagent trace-cmd']
#                            [--agent-args 'ARGS'] [--tdlisten-args 'ARGS']
#                            [--agent-nice N] [--stagger]
#                            [--before BUILDDIR] [--keep]
#
# For every N (default 1 4 16) and every repeat (default 3), both tools in
# turn (the order alternates):
#
#   tdagent    one tdlisten over TLS (v7 zstd, its defaults); N tdagent -h,
#              each with its own certificate (identity hostNN) and its own
#              instance, -e raw_syscalls -F -- its own dd
#   trace-cmd  one trace-cmd listen; N trace-cmd record -N 127.0.0.1:PORT -t
#              -B INSTANCE -e raw_syscalls -P PID -c, each following its own
#              dd (started beforehand and waiting)
#
# Every dd waits on one FIFO until all N recorders record, so the N
# workloads run at the same time.  With --stagger (tdagent only) there is
# no common release: the agents are started one after another (without
# waiting for each other) and each agent's dd starts as soon as its own
# agent records (-F), so agents read kallsyms, connect, send their headers
# and sync their clocks while the others' workloads storm, as when users
# start agents whenever.  (The "dd end"
# and "file ready" times then count from the last agent's start.)
# --before BUILDDIR adds a tool, tdagent-before: the tdagent of another
# build (the tree before a change), with this tree's tdlisten, in the same
# runs, so before and after are measured side by side.  Each dd copies K blocks of one byte:
# K fixed (--blocks, default 500,000: every agent has a storm of its own,
# 16 of them 8,000,000 blocks) or K = BLOCKS / N (--total: the same work for
# every N).  Everything runs in a private network namespace, so
# the loopback counters are this benchmark's bytes alone.
#
# Run as root.  Each timed run holds /tmp/td-bench.lock (released between
# runs, so other benchmarks can take turns); the events are counted
# afterwards, without it, at nice 19.
# Results go to bench/out/: conc.txt (the table), conc-agents.tsv (one line
# per agent and run), conc-runs.tsv (one line per run), conc-build.log, and
# every run's logs and times in conc-logs-TOOL-N-RUN/ (with --keep, its
# trace files too, in conc-TOOL-N-RUN/).
set -euo pipefail

AGENTS="1 4 16"
TOTAL=""
BLOCKS=500000
REPEAT=3
TOOLS="tdagent trace-cmd"
AGENT_ARGS=""
TDLISTEN_ARGS=""
AGENT_NICE=""
STAGGER=0
BEFORE=""
KEEP=0
CAL1=1000
CAL2=2000
TRACEFS=/sys/kernel/tracing
LOCK=/tmp/td-bench.lock
HZ=$(getconf CLK_TCK)

usage() {
	sed -n 's/^# usage: /usage: /p; s/^#                            /       /p' \
	    "$0" | head -4
	exit "${1:-2}"
}

die() {
	echo "conc: $*" >&2
	exit 1
}

warn() {
	echo "conc: warning: $*" >&2
}

ORIG_ARGS=("$@")
while [ $# -gt 0 ]; do
	case "$1" in
	--agents) [ $# -ge 2 ] || usage; AGENTS=$2; shift 2 ;;
	--total) [ $# -ge 2 ] || usage; TOTAL=$2; BLOCKS=""; shift 2 ;;
	--blocks) [ $# -ge 2 ] || usage; BLOCKS=$2; TOTAL=""; shift 2 ;;
	--repeat) [ $# -ge 2 ] || usage; REPEAT=$2; shift 2 ;;
	--tools) [ $# -ge 2 ] || usage; TOOLS=$2; shift 2 ;;
	--agent-args) [ $# -ge 2 ] || usage; AGENT_ARGS=$2; shift 2 ;;
	--tdlisten-args) [ $# -ge 2 ] || usage; TDLISTEN_ARGS=$2; shift 2 ;;
	--agent-nice) [ $# -ge 2 ] || usage; AGENT_NICE=$2; shift 2 ;;
	--stagger) STAGGER=1; shift ;;
	--before) [ $# -ge 2 ] || usage; BEFORE=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage 0 ;;
	*) usage ;;
	esac
done
for n in $AGENTS; do
	[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 99 ] ||
	    die "--agents wants numbers from 1 to 99"
done
[[ "$REPEAT" =~ ^[0-9]+$ ]] && [ "$REPEAT" -ge 1 ] ||
    die "--repeat wants a number >= 1"
[ -z "$TOTAL" ] || [[ "$TOTAL" =~ ^[0-9]+$ ]] || die "--total wants a number"
[ -z "$BLOCKS" ] || [[ "$BLOCKS" =~ ^[0-9]+$ ]] || die "--blocks wants a number"
for t in $TOOLS; do
	case $t in tdagent | trace-cmd) ;; *) die "unknown tool '$t'" ;; esac
	[ "$STAGGER" = 0 ] || [ "$t" = tdagent ] ||
	    die "--stagger: tdagent only (trace-cmd follows a PID started before it)"
done
if [ -n "$BEFORE" ]; then
	[ -x "$BEFORE/tdagent" ] || die "--before: no $BEFORE/tdagent"
	BEFORE=$(cd "$BEFORE" && pwd)
	TOOLS="$TOOLS tdagent-before"
fi
[ "$(id -u)" = 0 ] || die "needs root (ftrace instances, network namespace)"

# A private network namespace: the loopback byte counters are ours alone
# (other people's tests share the machine), and any port is free.
if [ "${TD_CONC_NETNS:-}" != 1 ]; then
	exec unshare --net env TD_CONC_NETNS=1 bash "$0" ${ORIG_ARGS[@]+"${ORIG_ARGS[@]}"}
fi
ip link set lo up || die "cannot bring up lo in the network namespace"

TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$TOP/bench/lib.sh"
OUT=$TOP/bench/out
B=${TD_BUILDDIR:-$TOP/build}
cd "$TOP"
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/tdconc.XXXXXX)
LOG=$OUT/conc-build.log
# processes of the current run, stopped by cleanup() if the script dies
RUN_PIDS=""
LPID=""
INST_PREFIX=tdconc-$$

cleanup() {
	local rc=$? p i

	for p in $RUN_PIDS $LPID; do
		kill -INT "$p" 2>/dev/null || true
		kill -TERM "$p" 2>/dev/null || true
	done
	[ -z "$RUN_PIDS$LPID" ] || sleep 2
	for i in "$TRACEFS"/instances/"$INST_PREFIX"-*; do
		[ -d "$i" ] && rmdir "$i" 2>/dev/null
	done
	if [ "$rc" != 0 ] && compgen -G "$TMP/run-*" >/dev/null; then
		# keep the logs (not the trace files) for a post-mortem
		rm -rf "$OUT/conc-failed"
		mkdir -p "$OUT/conc-failed"
		cp -r "$TMP"/run-* "$OUT/conc-failed/" 2>/dev/null
		echo "conc: the runs' logs and files are in $OUT/conc-failed" >&2
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
set -o errtrace
trap 'echo "conc: failed (status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

# --- build ------------------------------------------------------------------

build() {
	local flags

	: >"$LOG"
	if [ -z "${TD_BUILDDIR:-}" ]; then
		sh scripts/build.sh build >>"$LOG" 2>&1 ||
		    die "scripts/build.sh failed, see $LOG"
	fi
	make -C "$B" -s tdagent tdlisten tests/tdcount >>"$LOG" 2>&1 ||
	    die "make in $B failed, see $LOG"
	cp "$B/tdagent" "$B/tdlisten" "$B/tests/tdcount" "$TMP/"
	TDAGENT=$TMP/tdagent
	TDLISTEN=$TMP/tdlisten
	TDCOUNT=$TMP/tdcount
	if [ -n "$BEFORE" ]; then
		cp "$BEFORE/tdagent" "$TMP/tdagent-before"
	fi
	for f in selftime concwatch flysize; do
		gcc -O2 -Wall -o "$TMP/$f" "bench/$f.c" >>"$LOG" 2>&1 ||
		    die "cannot build bench/$f.c, see $LOG"
	done
	SHIM=""
	if [ -f /work/shared/tools/sandbox-shim.c ]; then
		SHIM=$TMP/sandbox-shim.so
		gcc -shared -fPIC -O2 -o "$SHIM" \
		    /work/shared/tools/sandbox-shim.c -ldl >>"$LOG" 2>&1 ||
		    die "cannot build the sandbox shim, see $LOG"
	fi
	flags=$(git -C "$TOP" describe --always --dirty 2>/dev/null || echo unknown)
	REV="$flags, tdagent $(sha256sum "$TDAGENT" | cut -c1-12), tdlisten"
	REV="$REV $(sha256sum "$TDLISTEN" | cut -c1-12)"
	[ -z "$BEFORE" ] || REV="$REV; tdagent-before ($BEFORE)"
	REV="$REV $( [ -z "$BEFORE" ] || sha256sum "$TMP/tdagent-before" | cut -c1-12)"
}

# A CA, the listener's certificate and one per agent (lib.sh's pki).
make_pki() {
	local n max=0

	for n in $AGENTS; do
		[ "$n" -gt "$max" ] && max=$n
	done
	PKI=$TMP/pki
	# shellcheck disable=SC2046 # one name per agent (agent_id prints
	# no newline)
	pki "$PKI" $(for n in $(seq "$max"); do agent_id "$n"; echo; done) \
	    >>"$LOG" 2>&1 || die "scripts/tdcert failed, see $LOG"
}

# --- helpers ----------------------------------------------------------------

# The workload, the same text for both tools and the calibration: write
# the shell's PID, wait until FIFO is opened for writing and closed, then
# become dd.  Arguments: PIDFILE FIFO BLOCKS.
# shellcheck disable=SC2016
WORKLOAD='echo $$ > "$1"; read x < "$2"; exec dd if=/dev/zero of=/dev/null bs=1 count="$3" status=none'
# --stagger: the same system calls without waiting (no FIFO).
# shellcheck disable=SC2016
WORKLOAD_NOW='echo $$ > "$1"; read x < /dev/null; exec dd if=/dev/zero of=/dev/null bs=1 count="$3" status=none'

agent_id() {
	printf 'host%02d' "$1"
}

tdcount_get() {
	awk -v k="$2" '$1 == k { print $2 }' "$1"
}


# Wait until every PID in $1 is a shell blocked opening the FIFO.
wait_blocked() {
	local pids=$1 p i ok

	for i in $(seq 600); do
		ok=1
		for p in $pids; do
			[ "$(cat "/proc/$p/wchan" 2>/dev/null)" = \
			    wait_for_partner ] || { ok=0; break; }
		done
		[ "$ok" = 1 ] && return 0
		sleep 0.05
	done
	return 1
}

# Wait until each of the files $2... exists (at most $1 tenths of a second).
wait_files() {
	local n=$1 f i
	shift
	for i in $(seq "$n"); do
		for f in "$@"; do
			[ -s "$f" ] || break
		done
		[ -s "$f" ] && return 0
		sleep 0.1
	done
	return 1
}

# Local port of process $1's TCP connection to port $2 (its control
# connection to trace-cmd listen), from its fds and /proc/net/tcp{,6}.
ctl_port() {
	local pid=$1 port=$2 inodes

	inodes=$({ find "/proc/$pid/fd" -lname 'socket:*' -printf '%l\n' \
	    2>/dev/null || true; } | sed 's/socket:\[\([0-9]*\)\]/\1/' |
	    tr '\n' ' ')
	awk -v rp="$(printf '%04X' "$port")" -v inodes=" $inodes" '
	    FNR > 1 && index(inodes, " " $10 " ") &&
	    substr($3, length($3) - 3) == rp {
		h = substr($2, length($2) - 3); p = 0
		for (i = 1; i <= 4; i++)
			p = p * 16 + index("0123456789ABCDEF",
			    substr(h, i, 1)) - 1
		print p; exit
	    }' /proc/net/tcp /proc/net/tcp6
}

# CPU ticks used so far by each process tree ROOT... (live processes'
# own times plus what they reaped), leaving out the subtrees of the PIDs
# in EXCLUDE (a quoted list): "ROOT TICKS" lines.
cpu_snapshot() {
	local exclude=$1
	shift
	# processes come and go: some stat files vanish before cat reads them
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v roots="$*" \
	    -v exclude="$exclude" '
	{
		s = $0
		sub(/^[0-9]+ \(.*\) /, "", s)
		split(s, f, " ")
		pid = $1; pp[pid] = f[2]; t[pid] = f[12] + f[13] + f[14] + f[15]
	}
	END {
		nx = split(exclude, x, " ")
		for (i = 1; i <= nx; i++)
			ex[x[i]] = 1
		nr = split(roots, r, " ")
		for (i = 1; i <= nr; i++) {
			sum = 0
			for (p in t) {
				# walk up from p: is root an ancestor, with no
				# excluded process on the way?
				q = p; in_tree = 0
				for (d = 0; d < 64 && q != "" && q > 0; d++) {
					if (q in ex)
						break
					if (q == r[i]) {
						in_tree = 1
						break
					}
					q = pp[q]
				}
				if (in_tree)
					sum += t[p]
			}
			print r[i], sum
		}
	}'
}

# Take the benchmark lock on fd 9 (other people's benchmarks use it too).
lock_take() {
	exec 9>>"$LOCK"
	if ! flock -n 9; then
		echo "conc: waiting for $LOCK"
		flock 9
	fi
}

lock_drop() {
	flock -u 9
	exec 9>&-
}

# --- calibration: each method's constant --------------------------------------

# Events of the workload's PID beyond 4 per block, recorded locally by
# tdagent (not by the tools under test).  Method "follow" is tdagent's in
# the runs: tdagent -F runs the workload (its shell starts once tracing
# is on).  Method "pid" is trace-cmd's: the shell runs before the recorder
# starts and is followed by PID (here: everything is recorded and counted
# by PID, which is what set_event_pid keeps).
calibrate_one() {
	local method=$1 k=$2 d=$TMP/cal p tpid
	rm -rf "$d"
	mkdir -p "$d/out"
	mkfifo "$d/fifo"
	if [ "$method" = follow ]; then
		"$TDAGENT" -q -o "$d/cal.dat" -e raw_syscalls -F -- \
		    sh -c "$WORKLOAD" sh "$d/pid" "$d/fifo" "$k" \
		    </dev/null 2>"$d/err" &
		tpid=$!
		wait_files 600 "$d/pid" || die "calibration: no workload"
		p=$(cat "$d/pid")
		wait_blocked "$p" || die "calibration: the workload is not waiting"
	else
		sh -c "$WORKLOAD" sh "$d/pid" "$d/fifo" "$k" </dev/null &
		wait_files 600 "$d/pid" || die "calibration: no workload"
		p=$(cat "$d/pid")
		wait_blocked "$p" || die "calibration: the workload is not waiting"
		"$TDAGENT" -q -o "$d/cal.dat" -e raw_syscalls </dev/null \
		    2>"$d/err" &
		tpid=$!
		wait_recording "$tpid" || true
	fi
	sleep 0.5
	"$TMP/concwatch" tdlisten "$d/out" 0 "$d/fifo" 60 0 "$p" >/dev/null ||
	    die "calibration: the workload did not finish"
	[ "$method" = follow ] || kill -INT "$tpid"
	wait "$tpid" || die "calibration: tdagent failed: $(cat "$d/err")"
	wait 2>/dev/null || true
	"$TDCOUNT" "$d/cal.dat" -p "$p" >"$d/count"
	[ "$(tdcount_get "$d/count" missed)" = 0 ] ||
	    die "calibration: the ring lost events"
	echo $(($(tdcount_get "$d/count" events) - 4 * k))
}

calibrate() {
	local m a b

	for m in follow pid; do
		a=$(calibrate_one $m $CAL1) && [[ "$a" =~ ^[0-9]+$ ]] ||
		    die "calibration failed"
		b=$(calibrate_one $m $CAL2) && [[ "$b" =~ ^[0-9]+$ ]] ||
		    die "calibration failed"
		[ "$a" = "$b" ] || die "the constant of method $m does not hold:" \
		    "$CAL1 blocks give 4N+$a, $CAL2 blocks 4N+$b"
		echo "conc: method $m: dd's pid makes 4N+$a raw_syscalls events"
		if [ $m = follow ]; then C_FOLLOW=$a; else C_PID=$a; fi
	done
}

# --- one run -------------------------------------------------------------------

PORT=20000

# run_one TOOL N K REP: N agents of TOOL at once, K blocks each: the timed
# part.  Leaves the files, logs and times in $TMP/run-TOOL-N-REP/ and
# what count_one needs in its "meta".
run_one() {
	local tool=$1 n=$2 k=$3 rep=$4
	local d=$TMP/run-$tool-$n-$rep i id load b0 b1 mode expected c
	local -a ddpids rpids wrappers ports
	local -a targs largs
	local agent=$TMP/tdagent workload=$WORKLOAD fpid

	[ "$STAGGER" = 0 ] || workload=$WORKLOAD_NOW
	[ "$tool" != tdagent-before ] || agent=$TMP/tdagent-before
	rm -rf "$d"
	mkdir -p "$d/out"
	mkfifo "$d/fifo"
	read -r -a targs <<<"$AGENT_ARGS"
	read -r -a largs <<<"$TDLISTEN_ARGS"
	PORT=$((PORT + 1))
	if [ "$tool" != trace-cmd ]; then
		mode=tdlisten
		c=$C_FOLLOW
	else
		mode=trace-cmd
		c=$C_PID
	fi
	expected=$((4 * k + c))

	load=$(cut -d' ' -f1 /proc/loadavg)
	b0=$(lo_bytes)
	if [ "$tool" != trace-cmd ]; then
		"$TMP/selftime" "$d/ltime" "$d/lpid" -- "$TDLISTEN" -p "$PORT" \
		    -d "$d/out" -v --cert "$PKI/listener.pem" \
		    --key "$PKI/listener.key" --ca "$PKI/ca.pem" \
		    ${largs[@]+"${largs[@]}"} >"$d/listener.log" 2>&1 </dev/null &
	else
		"$TMP/selftime" "$d/ltime" "$d/lpid" -- env \
		    ${SHIM:+LD_PRELOAD=$SHIM} trace-cmd listen -p "$PORT" \
		    -d "$d/out" >"$d/listener.log" 2>&1 </dev/null &
	fi
	LWRAP=$!
	wait_files 100 "$d/lpid" || die "$tool: the listener did not start"
	LPID=$(cat "$d/lpid")
	wait_listening "$PORT" "$LPID" ||
	    die "$tool: the listener does not listen: $(tail -3 "$d/listener.log")"

	RUN_PIDS=""
	for i in $(seq "$n"); do
		id=$(agent_id "$i")
		if [ "$tool" != trace-cmd ]; then
			"$TMP/selftime" "$d/time.$i" "$d/rpid.$i" -- \
			    "$agent" -h 127.0.0.1 -p "$PORT" \
			    --cert "$PKI/$id.pem" --key "$PKI/$id.key" \
			    --ca "$PKI/ca.pem" -e raw_syscalls -F -v \
			    ${targs[@]+"${targs[@]}"} -- \
			    sh -c "$workload" sh "$d/pid.$i" "$d/fifo" "$k" \
			    >"$d/agent.$i.out" 2>"$d/agent.$i.err" </dev/null &
			wrappers[i]=$!
		else
			sh -c "$WORKLOAD" sh "$d/pid.$i" "$d/fifo" "$k" \
			    </dev/null 2>"$d/dd.$i.err" &
			RUN_PIDS="$RUN_PIDS $!"
		fi
	done
	if [ "$tool" = trace-cmd ]; then
		for i in $(seq "$n"); do
			wait_files 600 "$d/pid.$i" || die "$tool: no workload $i"
			ddpids[i]=$(cat "$d/pid.$i")
		done
		wait_blocked "${ddpids[*]}" || die "$tool: workloads not waiting"
		for i in $(seq "$n"); do
			"$TMP/selftime" "$d/time.$i" "$d/rpid.$i" -- env \
			    ${SHIM:+LD_PRELOAD=$SHIM} stdbuf -oL trace-cmd \
			    record -N "127.0.0.1:$PORT" -t \
			    -B "$INST_PREFIX-$i" -e raw_syscalls \
			    -P "${ddpids[i]}" -c \
			    >"$d/agent.$i.out" 2>"$d/agent.$i.err" </dev/null &
			wrappers[i]=$!
		done
	fi
	for i in $(seq "$n"); do
		wait_files 600 "$d/rpid.$i" || die "$tool: recorder $i missing"
		rpids[i]=$(cat "$d/rpid.$i")
		RUN_PIDS="$RUN_PIDS ${rpids[i]}"
	done
	# ready: tdagent starts its workload once it records; trace-cmd
	# prints "Hit Ctrl^C" once it records
	if [ "$tool" != trace-cmd ]; then
		for i in $(seq "$n"); do
			wait_files 1200 "$d/pid.$i" || die "$tool: agent $i did" \
			    "not start its workload: $(tail -2 "$d/agent.$i.err")"
			ddpids[i]=$(cat "$d/pid.$i")
		done
		[ "$STAGGER" = 1 ] || wait_blocked "${ddpids[*]}" ||
		    die "$tool: workloads not waiting"
	else
		for i in $(seq "$n"); do
			for _ in $(seq 1200); do
				grep -q 'Hit Ctrl' "$d/agent.$i.out" && break
				kill -0 "${rpids[i]}" 2>/dev/null || die \
				    "$tool: recorder $i failed:" \
				    "$(tail -2 "$d/agent.$i.err")"
				sleep 0.05
			done
			grep -q 'Hit Ctrl' "$d/agent.$i.out" ||
			    die "$tool: recorder $i does not record"
			ports[i]=$(ctl_port "${rpids[i]}" "$PORT")
			[ -n "${ports[i]}" ] ||
			    die "$tool: no control connection for recorder $i"
		done
	fi
	# a diagnostic: the agents (and trace-cmd's per-CPU recorders), not
	# their workloads, at another priority
	if [ -n "$AGENT_NICE" ]; then
		for i in $(seq "$n"); do
			# shellcheck disable=SC2046
			renice -n "$AGENT_NICE" -p "${rpids[i]}" \
			    $(pgrep -P "${rpids[i]}" | grep -vx "${ddpids[i]}" ||
			    true) >/dev/null
		done
	fi
	# let the readers reach their first read (as bench/run.sh); with
	# --stagger the workloads run already: no waiting, and nobody waits on
	# the FIFO (a reader of it lets concwatch's open return)
	if [ "$STAGGER" = 1 ]; then
		cat "$d/fifo" >/dev/null &
		fpid=$!
	else
		sleep 0.5
	fi
	# what the agents and the listener used to start (connections,
	# headers, instances): kept apart from the streaming's CPU
	cpu_snapshot "${ddpids[*]}" "$LPID" "${rpids[@]}" >"$d/cpu0"

	"$TMP/concwatch" "$mode" "$d/out" "$n" "$d/fifo" 600 "$LPID" \
	    "${ddpids[@]}" >"$d/watch" || die "$tool: runs or files" \
	    "unfinished after 600 s ($(tail -1 "$d/watch"))"
	[ "$STAGGER" = 0 ] || wait "$fpid" || true
	for i in $(seq "$n"); do
		wait "${wrappers[i]}" || warn "$tool: agent $i exited" \
		    "$(awk '{ print $7 }' "$d/time.$i"):" \
		    "$(tail -2 "$d/agent.$i.err")"
	done
	RUN_PIDS=""
	b1=$(lo_bytes)
	# trace-cmd listen's per-client children must be gone (reaped: their
	# CPU is in its children's times) before it is stopped
	for _ in $(seq 200); do
		[ -z "$(pgrep -P "$LPID" || true)" ] && break
		sleep 0.05
	done
	[ -z "$(pgrep -P "$LPID" || true)" ] ||
	    warn "$tool: the listener still has children"
	if [ "$tool" != trace-cmd ]; then
		kill -TERM "$LPID" || warn "$tool: the listener is gone"
	else
		kill -INT "$LPID" || warn "$tool: the listener is gone"
	fi
	wait "$LWRAP" || warn "$tool: the listener exited" \
	    "$(awk '{ print $7 }' "$d/ltime")"
	lpid0=$LPID
	LPID=""
	declare -p tool n k rep expected load b0 b1 lpid0 ddpids rpids ports \
	    >"$d/meta" 2>/dev/null || true
	echo "conc: $tool N=$n run $rep done (load $load at the start," \
	    "$(cut -d' ' -f1 /proc/loadavg) at the end)"
}

# count_one DIR: count the files of one run (not timed: outside the lock)
# and append to conc-agents.tsv and conc-runs.tsv.
count_one() {
	local d=$1 tool n k rep expected load b0 b1 lpid0 i id
	local -a ddpids rpids ports
	local f cf cap missed lost bytes sum=0 texit tfile acpu acpu0 arss sent
	local lcpu lcpu0 lrss rss pss span

	local -a files

	# shellcheck disable=SC1091
	. "$d/meta"
	for i in $(seq "$n"); do
		id=$(agent_id "$i")
		if [ "$tool" != trace-cmd ]; then
			f=$(ls "$d/out/$id/"*.dat 2>/dev/null | head -1) || true
		else
			f=$(ls "$d/out/"trace.*:"${ports[i]}".dat \
			    2>/dev/null | head -1) || true
		fi
		[ -n "$f" ] || die "$tool: no file for agent $i"
		files[i]=$f
	done
	# libtracecmd takes most of the benchmark's time: two files at once,
	# at nice 19 (someone else may be measuring meanwhile)
	for i in $(seq "$n"); do
		printf '%s\0%s\0%s\0' "${files[i]}" "${ddpids[i]}" "$d/count.$i"
	done | xargs -0 -n 3 -P 2 sh -c 'nice -n 19 "$0" "$1" -p "$2" >"$3" ||
	    { echo "events 0"; echo "missed -"; echo "unreadable 1"; } >"$3"' \
	    "$TDCOUNT" || die "$tool: counting failed"
	for i in $(seq "$n"); do
		f=${files[i]}
		cf=$d/count.$i
		cap=$(tdcount_get "$cf" events)
		missed=$(tdcount_get "$cf" missed)
		# a file libtracecmd cannot open captured nothing
		if [ "$(tdcount_get "$cf" unreadable)" = 1 ]; then
			warn "$tool N=$n run $rep: libtracecmd cannot open" \
			    "agent $i's file ${f#"$d"/}: 0 events"
			echo "$tool $n $rep $i" >>"$OUT/conc-unreadable.txt"
		fi
		bytes=$(data_bytes "$f") || {
			warn "$tool N=$n run $rep: cannot size agent $i's data"
			bytes=0
		}
		sum=$((sum + bytes))
		if [ "$tool" != trace-cmd ]; then
			lost=$({ trace-cmd dump --options -i "$f" \
			    2>/dev/null || true; } | awk '/^overrun:/ { s += $2 }
			    /^dropped events:/ { s += $3 } END { print s + 0 }')
			sent=$(sed -n 's/.*(\([0-9.]*\) MB sent).*/\1/p' \
			    "$d/agent.$i.err" | tail -1)
			[ -n "$sent" ] || sent=-
			# tdagent's own CPU and, where a separate recorder ran
			# (-v: "recording in process"), the recorder's, which
			# it logs at its end (-v: "cpu S s"); not its
			# workload's (its other child)
			rcpu=0
			grep -q "recording in process" "$d/agent.$i.err" &&
			    rcpu=$(sed -n 's/^tdagent: cpu \([0-9.]*\) s (user.*/\1/p' \
			    "$d/agent.$i.err" | tail -1)
			acpu=$(awk -v r="${rcpu:-0}" '{ printf "%.2f", $2 + $3 + r }' \
			    "$d/time.$i")
		else
			lost=-
			sent=-
			# trace-cmd's per-CPU recorders are its children
			acpu=$(awk '{ printf "%.2f", $2 + $3 + $4 + $5 }' \
			    "$d/time.$i")
		fi
		acpu0=$(awk -v p="${rpids[i]}" -v hz="$HZ" '$1 == p {
		    printf "%.2f", $2 / hz }' "$d/cpu0")
		arss=$(awk '{ print $6 }' "$d/time.$i")
		texit=$(awk -v p="${ddpids[i]}" '$1 == "exit" && $2 == p {
		    print $3 }' "$d/watch")
		tfile=$(awk -v f="$f" '$1 == "file" && $4 == f { print $2 }' \
		    "$d/watch")
		[ -n "$texit" ] && [ -n "$tfile" ] ||
		    die "$tool: agent $i has no exit or file time"
		printf '%s\t' "$tool" "$n" "$rep" "$i" "$k" "$cap" "$expected" \
		    "$missed" "$lost" "$acpu" "$acpu0" "$arss" "$bytes" "$texit" \
		    "$tfile" "$sent" >>"$OUT/conc-agents.tsv"
		# main thread's wait for a CPU; ring pauses logged with -v
		printf '%s\t' "$load" "$(awk '{ print $8 }' "$d/time.$i")" \
		    "$(awk '{ print $10 }' "$d/time.$i")" >>"$OUT/conc-agents.tsv"
		if [ "$tool" != trace-cmd ] && grep -q 'time sync round' \
		    "$d/agent.$i.err"; then
			grep -c 'pause reading the rings' "$d/agent.$i.err" \
			    >>"$OUT/conc-agents.tsv" || true
		else
			echo - >>"$OUT/conc-agents.tsv"
		fi
	done
	lcpu=$(awk '{ printf "%.2f", $2 + $3 + $4 + $5 }' "$d/ltime")
	lcpu0=$(awk -v p="$lpid0" -v hz="$HZ" '$1 == p {
	    printf "%.2f", $2 / hz }' "$d/cpu0")
	lrss=$(awk '{ print $6 }' "$d/ltime")
	read -r rss pss < <(awk '$1 == "rss" { print $2, $3 }' "$d/watch")
	span=$(awk '$1 == "exit" && $3 > m { m = $3 } END { print m }' \
	    "$d/watch")
	printf '%s\t' "$tool" "$n" "$rep" "$k" "$lcpu" "$lcpu0" "$lrss" "$rss" "$pss" \
	    "$((b1 - b0))" "$sum" "$span" >>"$OUT/conc-runs.tsv"
	printf '%s\t' "$load" >>"$OUT/conc-runs.tsv"
	awk '{ print $8 }' "$d/ltime" >>"$OUT/conc-runs.tsv"
	awk -F'\t' -v t="$tool" -v n="$n" -v r="$rep" '
	    $1 == t && $2 == n && $3 == r {
		a++; c = $6 / $7; s += c; if (a == 1 || c < mn) mn = c
	    } END {
		printf "conc: %-9s N=%-2d run %d: capture min %.4f mean %.4f",
		    t, n, r, mn, s / a
	    }' "$OUT/conc-agents.tsv"
	printf ', %.1f MB, listener %s s CPU, dd %s s, load %s\n' \
	    "$(awk -v b="$sum" 'BEGIN { print b / 1e6 }')" "$lcpu" "$span" \
	    "$load"
	if [ "$KEEP" = 1 ]; then
		rm -rf "$OUT/conc-$tool-$n-$rep"
		cp -r "$d" "$OUT/conc-$tool-$n-$rep"
	else
		rm -f "$d"/out/*.dat "$d"/out/*/*.dat
		rm -rf "$OUT/conc-logs-$tool-$n-$rep"
		cp -r "$d" "$OUT/conc-logs-$tool-$n-$rep"
	fi
	rm -rf "$d"
}

# --- the table ---------------------------------------------------------------

table() {
	echo "concurrent agents, each streaming its own dd if=/dev/zero" \
	    "of=/dev/null bs=1 count=K over loopback"
	if [ -n "$BLOCKS" ]; then
		echo "K = $BLOCKS blocks per agent"
	else
		echo "K = $TOTAL / N blocks per agent (the same total for" \
		    "every N)"
	fi
	echo "expected per agent 4K+$C_FOLLOW (tdagent -F) and 4K+$C_PID" \
	    "(trace-cmd -P); $REPEAT runs; median [min..max]"
	echo "$(nproc) CPUs, $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC');" \
	    "tree $REV"
	[ -z "$AGENT_ARGS" ] || echo "tdagent also given: $AGENT_ARGS"
	[ -z "$TDLISTEN_ARGS" ] || echo "tdlisten also given: $TDLISTEN_ARGS"
	[ -z "$AGENT_NICE" ] || echo "agents and recorders reniced to $AGENT_NICE" \
	    "(their workloads not)"
	[ "$STAGGER" = 0 ] || echo "--stagger: agents started one after another," \
	    "each dd as soon as its agent records; no common release"
	[ -z "$BEFORE" ] || echo "tdagent-before: $BEFORE/tdagent"
	awk -F'\t' -v agents="$AGENTS" -v tools="$TOOLS" "$BENCH_AWK_STATS"'
	function put(t, n, m, x) {
		if (x == "-")
			return
		k = ++cnt[t, n, m]
		v[t, n, m, k] = x
	}
	FNR == 1 { next }
	FILENAME ~ /agents/ {
		t = $1; n = $2; r = $3; mb = $13 / 1e6
		put(t, n, "capture", $6 / $7)
		put(t, n, "lostev", $7 - $6)
		put(t, n, "missed", $8)
		put(t, n, "klost", $9)
		put(t, n, "acpu0", $11)
		x = y = "-"
		if (mb > 0) {
			x = ($10 - $11) * 1000 / mb
			y = $10 * 1000 / mb
		}
		put(t, n, "acpums", x)
		put(t, n, "acpumsall", y)
		put(t, n, "arss", $12 / 1024)
		put(t, n, "amb", mb)
		put(t, n, "ready", $15 - $14)
		put(t, n, "ddend", $14)
		put(t, n, "adelay", $18)
		put(t, n, "apreempt", $19)
		put(t, n, "apause", $20)
		acpu[t, n, r] += $10 - $11
		amb[t, n, r] += mb
		if ($16 != "-")
			sent[t, n, r] += $16
		next
	}
	{
		t = $1; n = $2; r = $3; mb = $11 / 1e6
		x = "-"
		if (amb[t, n, r] > 0)
			x = acpu[t, n, r] * 1000 / amb[t, n, r]
		put(t, n, "acpusum", x)
		x = y = "-"
		if (mb > 0) {
			x = ($5 - $6) * 1000 / mb
			y = $5 * 1000 / mb
		}
		put(t, n, "lcpums", x)
		put(t, n, "lcpumsall", y)
		put(t, n, "lcpu0", $6)
		put(t, n, "lcpu", $5)
		put(t, n, "lrss", $7 / 1024)
		put(t, n, "lrsssum", $8 / 1024)
		put(t, n, "lpsssum", $9 / 1024)
		put(t, n, "runmb", mb)
		put(t, n, "wire", $10 / 1e6)
		x = "-"
		if (mb > 0)
			x = $10 / $11
		put(t, n, "wireratio", x)
		put(t, n, "wireextra", ($10 - $11) / n / 1e6)
		x = "-"
		if ((t, n, r) in sent && mb > 0)
			x = sent[t, n, r] * 1e6 / $11
		put(t, n, "sent", x)
		put(t, n, "span", $12)
		put(t, n, "load", $13)
		put(t, n, "ldelay", $14)
	}
	END {
		nm = split("capture lostev missed klost acpums acpusum " \
		    "acpumsall acpu0 arss amb adelay apreempt apause lcpums " \
		    "lcpumsall lcpu lcpu0 ldelay " \
		    "lrss lrsssum lpsssum runmb wire wireratio wireextra " \
		    "sent ready ddend span load", ms, " ")
		label["capture"] = "capture per agent"
		label["lostev"] = "events missing per agent"
		label["missed"] = "records flagged missed"
		label["klost"] = "kernel lost (CPUSTAT)"
		label["acpums"] = "agent CPU ms/MB streaming"
		label["acpusum"] = "  all agents of a run together"
		label["acpumsall"] = "agent CPU ms/MB with start-up"
		label["acpu0"] = "agent CPU s to start"
		label["arss"] = "agent peak RSS MB"
		label["amb"] = "ring-buffer MB per agent"
		label["adelay"] = "agent s runnable, not running"
		label["apreempt"] = "agent preempted (times)"
		label["apause"] = "agent ring pauses (-v only)"
		label["ldelay"] = "listener s runnable, not run."
		label["lcpums"] = "listener CPU ms/MB streaming"
		label["lcpumsall"] = "listener CPU ms/MB with start"
		label["lcpu"] = "listener CPU s"
		label["lcpu0"] = "listener CPU s to start"
		label["lrss"] = "listener RSS MB (largest proc)"
		label["lrsssum"] = "listener RSS MB (all procs)"
		label["lpsssum"] = "listener PSS MB (all procs)"
		label["runmb"] = "ring-buffer MB per run"
		label["wire"] = "wire MB (loopback, all)"
		label["wireratio"] = "wire bytes / ring bytes"
		label["wireextra"] = "wire MB beyond ring, per agent"
		label["sent"] = "agent-reported MB sent / ring"
		label["ready"] = "file ready after dd end s"
		label["ddend"] = "dd end after start s"
		label["span"] = "last dd end s"
		label["load"] = "load average at start"
		fmt["capture"] = "%.4f"; fmt["lostev"] = "%d"
		fmt["missed"] = "%d"; fmt["klost"] = "%d"
		fmt["acpums"] = "%.2f"; fmt["acpusum"] = "%.2f"
		fmt["acpumsall"] = "%.2f"; fmt["acpu0"] = "%.2f"
		fmt["lcpumsall"] = "%.2f"; fmt["lcpu0"] = "%.2f"
		fmt["wireextra"] = "%.2f"; fmt["adelay"] = "%.3f"
		fmt["apreempt"] = "%d"; fmt["apause"] = "%d"
		fmt["ldelay"] = "%.3f"
		fmt["arss"] = "%.1f"; fmt["amb"] = "%.1f"
		fmt["lcpums"] = "%.2f"; fmt["lcpu"] = "%.2f"
		fmt["lrss"] = "%.1f"; fmt["lrsssum"] = "%.1f"
		fmt["lpsssum"] = "%.1f"; fmt["runmb"] = "%.1f"
		fmt["wire"] = "%.1f"; fmt["wireratio"] = "%.3f"
		fmt["sent"] = "%.3f"; fmt["ready"] = "%.3f"
		fmt["ddend"] = "%.2f"; fmt["span"] = "%.2f"
		fmt["load"] = "%.2f"
		noratio["lostev"] = noratio["missed"] = noratio["klost"] = 1
		noratio["load"] = noratio["sent"] = noratio["ready"] = 1
		noratio["apause"] = 1
		na = split(agents, ns, " ")
		for (x = 1; x <= na; x++) {
			n = ns[x]
			printf "\nN = %d: per agent, min/median/max over agents" \
			    " and runs; per run, over runs\n", n
			nt = split(tools, tl, " ")
			hd["tdagent"] = "tdagent -> tdlisten TLS"
			hd["trace-cmd"] = "record -N -t -> listen"
			hd["tdagent-before"] = "tdagent before -> tdlisten"
			printf "%-32s", "metric"
			for (y = 1; y <= nt; y++)
				printf "  %-30s", hd[tl[y]]
			printf "  %7s\n", "td/tc"
			for (j = 1; j <= nm; j++) {
				m = ms[j]
				printf "%-32s", label[m]
				md["tdagent"] = md["trace-cmd"] = "-"
				for (y = 1; y <= nt; y++) {
					t = tl[y]
					c = cnt[t, n, m]
					if (c == 0) {
						md[t] = "-"
						printf "  %-30s", "n/a"
						continue
					}
					for (i = 1; i <= c; i++)
						a[i] = v[t, n, m, i] + 0
					sort(a, c)
					md[t] = med(a, c)
					f3 = fmt[m] " [" fmt[m] ".." fmt[m] "]"
					printf "  %-30s", sprintf(f3, md[t],
					    a[1], a[c])
				}
				tc = md["trace-cmd"]
				if (m in noratio || tc == "-" || tc <= 0 ||
				    md["tdagent"] == "-")
					printf "\n"
				else
					printf "  %7.3f\n", md["tdagent"] / tc
			}
		}
	}' "$OUT/conc-agents.tsv" "$OUT/conc-runs.tsv"
}

# --- main -------------------------------------------------------------------

[ -e "$TRACEFS/trace" ] || mount -t tracefs nodev "$TRACEFS" ||
    die "cannot mount tracefs"
echo "conc: building (log in $LOG)"
build
make_pki
echo "conc: uptime at start: $(uptime)"
echo "conc: calibrating with $CAL1 and $CAL2 blocks under tdagent -o"
calibrate

printf '%s\t' tool n run agent blocks captured expected missed lost \
    cpu_s start_cpu_s maxrss_kb data_bytes dd_exit_s file_s sent_mb load \
    run_delay_s preempted >"$OUT/conc-agents.tsv"
printf 'pauses\n' >>"$OUT/conc-agents.tsv"
printf '%s\t' tool n run blocks lis_cpu_s lis_start_cpu_s lis_maxrss_kb lis_rss_kb \
    lis_pss_kb wire_bytes data_bytes span_s load >"$OUT/conc-runs.tsv"
printf 'lis_run_delay_s\n' >>"$OUT/conc-runs.tsv"
read -r -a tools <<<"$TOOLS"
rm -rf "$OUT"/conc-logs-* "$OUT"/conc-tdagent-* "$OUT"/conc-trace-cmd-*
rm -f "$OUT/conc-unreadable.txt"
# the timed runs, one after the other, each under the lock; counted afterwards
echo "conc: uptime before the runs: $(uptime)"
runs=()
for r in $(seq "$REPEAT"); do
	x=0
	for n in $AGENTS; do
		if [ -n "$BLOCKS" ]; then
			k=$BLOCKS
		else
			k=$((TOTAL / n))
		fi
		# alternate which tool goes first
		x=$((x + 1))
		if [ $(((x + r) % 2)) = 0 ]; then
			order=("${tools[@]}")
		else
			order=()
			for ((j = ${#tools[@]} - 1; j >= 0; j--)); do
				order+=("${tools[j]}")
			done
		fi
		for t in "${order[@]}"; do
			lock_take
			run_one "$t" "$n" "$k" "$r"
			lock_drop
			runs+=("$TMP/run-$t-$n-$r")
		done
	done
done
echo "conc: uptime at the end of the runs: $(uptime)"
echo "conc: counting the events in every file (libtracecmd, nice 19)"
for d in "${runs[@]}"; do
	count_one "$d"
done
echo
table | tee "$OUT/conc.txt"
