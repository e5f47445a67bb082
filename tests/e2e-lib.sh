# e2e-lib.sh: common code of the end-to-end tests (sourced, not run).
#
# The tests drive the real tdagent on the real tracefs and check the files
# with trace-cmd 3.1.6 and libtracecmd (tests/tdcount).  They need root.
# Without root or tracefs they skip (exit 77) and say why; with
# TD_REQUIRE_TRACEFS=1 (set by CI) that is a hard failure (exit 99)
# instead, so a CI run can never report a skipped test as passed.

set -u
B=${TD_BUILDDIR:-$(cd "$(dirname "$0")/.." && pwd)}
S=${TD_SRCDIR:-$B}
TDAGENT=$B/tdagent
TDCOUNT=$B/tests/tdcount
TRACING=/sys/kernel/tracing
WORK=$(mktemp -d "${TMPDIR:-/tmp}/td-e2e.XXXXXX")
FAILS=0
CHECKS=0
# TD_KEEP_WORK=1 keeps the work directory (to look at after a failure)
[ "${TD_KEEP_WORK:-0}" = 1 ] && echo "# work directory: $WORK" ||
    trap 'rm -rf "$WORK"' EXIT

# TD_VALGRIND=1 (or "listener") runs every tdlisten of the test under
# valgrind memcheck (tests/valgrind.sh), "agent" every tdagent, "all" both.
# A memory error or a definite or indirect leak that tests/valgrind.supp
# does not list (it lists library-internal leaks only) fails the test:
# finish() reads every valgrind log.  Commands that tdagent runs (-- CMD)
# are not traced.  SLOW scales the tests' waits (10 under valgrind, or
# TD_SLOW).  Memcheck makes tdagent 20-50x slower: with "agent" or "all",
# system-wide recordings can lose events and e2e-stream's 16 concurrent
# TLS agents can miss the listener's handshake timeout.
SLOW=${TD_SLOW:-1}
VG=$WORK/vg
# vg_wrap NAME: print the path of a script that runs $B/NAME under
# tests/valgrind.sh, one log per process in $VG (which a test that runs
# the program as nobody can reach and write to)
vg_wrap() {
	mkdir -p "$VG"
	chmod 711 "$WORK"
	chmod 1777 "$VG"
	cat > "$VG/$1" <<-EOF
	#!/bin/sh
	TD_VG_LOG="$VG/$1.%p.log"
	export TD_VG_LOG
	exec sh "$S/tests/valgrind.sh" "$B/$1" "\$@"
	EOF
	chmod 755 "$VG/$1"
	echo "$VG/$1"
}

skip() {
	if [ "${TD_REQUIRE_TRACEFS:-0}" = 1 ]; then
		echo "FAIL: cannot run: $* (TD_REQUIRE_TRACEFS=1)"
		exit 99
	fi
	echo "SKIP: $*"
	exit 77
}

need_tracefs() {
	[ "$(id -u)" = 0 ] || skip "end-to-end tests need root (real tracefs)"
	if [ ! -d $TRACING/instances ]; then
		mount -t tracefs nodev $TRACING 2>/dev/null
		[ -d $TRACING/instances ] || skip "tracefs is not available"
	fi
	command -v trace-cmd >/dev/null || skip "trace-cmd is not installed"
	[ -x "$TDAGENT" ] || { echo "FAIL: no $TDAGENT"; exit 99; }
}

ok() {
	CHECKS=$((CHECKS + 1))
	echo "ok $CHECKS - $*"
}

fail() {
	CHECKS=$((CHECKS + 1))
	FAILS=$((FAILS + 1))
	echo "not ok $CHECKS - $*"
}

# check DESCRIPTION COMMAND...: pass if the command succeeds
check() {
	desc=$1
	shift
	if "$@"; then ok "$desc"; else fail "$desc"; fi
}

# eq DESCRIPTION GOT WANT
eq() {
	if [ "$2" = "$3" ]; then ok "$1 ($2)"; else fail "$1: got '$2', want '$3'"; fi
}

# vg_check: one check per valgrind-wrapped program: no log of it may
# report a memory error or a definite or indirect leak.  A run killed with
# SIGKILL leaves a log without a summary: it is counted, not judged, and
# so is a child that tdagent forks for its command (-- CMD), which execs it
# untraced.
vg_check() {
	for p in tdlisten tdagent; do
		[ -x "$VG/$p" ] || continue
		runs=0 judged=0 bad=""
		for l in "$VG/$p".*.log; do
			[ -f "$l" ] || continue
			runs=$((runs + 1))
			grep -q "ERROR SUMMARY:" "$l" || continue
			judged=$((judged + 1))
			grep -q "ERROR SUMMARY: 0 errors" "$l" ||
			    bad="$bad $l"
		done
		[ $runs = 0 ] && continue
		if [ $judged = 0 ]; then
			echo "# valgrind: no $p run ended normally: nothing to judge"
			continue
		fi
		if [ -z "$bad" ]; then
			ok "valgrind: $p clean ($judged runs judged of $runs)"
			continue
		fi
		fail "valgrind: $p: errors or leaks in$bad ($judged runs judged of $runs)"
		for l in $bad; do
			echo "# ---- $l"
			sed 's/^/# /' "$l"
		done
	done
}

finish() {
	vg_check
	echo "# $CHECKS checks, $FAILS failed"
	[ "$FAILS" = 0 ] || exit 1
	exit 0
}

# No tracedock instance of a live test process may stay behind.
no_instances() {
	! ls $TRACING/instances 2>/dev/null | grep -q "^tracedock-$1\$"
}

# field KEY FILE...: the value of "KEY N" in tdcount output
field() {
	awk -v k="$1" '$1 == k { print $2 }'
}

# storm FILE N [ARGS...]: record dd with N one-byte blocks; sets STORM_PID
# and STORM_EVENTS (raw_syscalls events of dd, counted with libtracecmd).
# -F and a 4 MiB buffer keep other activity on a busy machine from
# overrunning the ring and spoiling the exact count.
storm() {
	f=$1
	n=$2
	shift 2
	rm -f "$WORK/pid"
	"$TDAGENT" -q -o "$f" -e raw_syscalls -F -b 4096 "$@" -- sh -c \
	    'echo $$ > '"$WORK/pid"'; exec dd if=/dev/zero of=/dev/null bs=1 count='"$n"' status=none' \
	    2>"$WORK/storm.err"
	STORM_RC=$?
	STORM_PID=$(cat "$WORK/pid" 2>/dev/null)
	"$TDCOUNT" "$f" -p "${STORM_PID:-0}" > "$WORK/count" 2>&1
	STORM_EVENTS=$(field events < "$WORK/count")
	STORM_MISSED=$(field missed < "$WORK/count")
}

# trace-cmd must read the file without a warning or an error.  When it
# does not, what it said and the file's size go to the log (# lines): a
# failure seen once in CI, whose work directory is gone, still says why.
tc_clean() {
	if trace-cmd report -i "$1" > "$WORK/report.out" \
	    2> "$WORK/report.err" && [ ! -s "$WORK/report.err" ] &&
	    trace-cmd dump --summary -i "$1" > "$WORK/dump.out" \
	    2> "$WORK/dump.err" && [ ! -s "$WORK/dump.err" ]; then
		return 0
	fi
	echo "# tc_clean $1: $(ls -l "$1" 2>&1)"
	for _f in report.err dump.err; do
		[ -s "$WORK/$_f" ] && head -20 "$WORK/$_f" | sed "s|^|# $_f: |"
	done
	return 1
}

# tools_clean FILE: every other tool people open a trace.dat with opens
# FILE with nothing on stderr but its progress lines (issue 28: zero
# warnings): trace-cmd report --verbose, split, convert, libtracecmd
# (tests/tdcount) and, where it is installed, KernelShark's loader under
# xvfb (killed once it has read the file: Qt's XDG_RUNTIME_DIR note is not
# a warning about the file).  What was said: $WORK/tools.err
tools_clean() {
	: > "$WORK/tools.err"
	for _t in "report --verbose" "split -o $WORK/tools-split.dat" \
	    "convert -o $WORK/tools-conv.dat"; do
		# shellcheck disable=SC2086 # _t is the subcommand and its -o
		trace-cmd $_t -i "$1" 2>&1 >/dev/null |
		    grep -v '^CPU[0-9]* data recorded at offset\|^ *[0-9]* bytes in size' |
		    sed "s|^|trace-cmd ${_t%% -o*}: |" >> "$WORK/tools.err"
	done
	rm -f "$WORK"/tools-split.dat* "$WORK/tools-conv.dat"
	"$B/tests/tdcount" "$1" 2>&1 >/dev/null | sed 's|^|libtracecmd: |' \
	    >> "$WORK/tools.err"
	if command -v kernelshark >/dev/null && command -v xvfb-run >/dev/null
	then
		timeout 20 xvfb-run -a kernelshark "$1" 2>&1 >/dev/null |
		    grep -v '^QStandardPaths: XDG_RUNTIME_DIR' |
		    sed 's|^|kernelshark: |' >> "$WORK/tools.err"
	elif [ "${TD_REQUIRE_TRACEFS:-0}" = 1 ]; then
		echo "kernelshark and xvfb-run are not installed (scripts/deps.sh)" \
		    >> "$WORK/tools.err"
	else
		echo "# kernelshark or xvfb-run not installed: not opened there"
	fi
	[ ! -s "$WORK/tools.err" ] || { sed 's/^/# /' "$WORK/tools.err"; false; }
}

TDLISTEN=$B/tdlisten
TDCERT=$S/scripts/tdcert
TDFEED=$B/tests/tdfeed
TDPORT=$B/tests/tdport
# pki, free_port, start_listener, stop_listener, wait_until, recording,
# wait_recording, port_listening, wait_listening, reap: the harness the
# benchmarks share
HARNESS_TOP=$S
# shellcheck source=tests/harness.sh
. "$S/tests/harness.sh"

case ${TD_VALGRIND:-0} in
0) ;;
1|listener|agent|all)
	command -v valgrind >/dev/null ||
	    { echo "FAIL: TD_VALGRIND=$TD_VALGRIND: valgrind is not installed"; exit 99; }
	[ "$TD_VALGRIND" = agent ] || TDLISTEN=$(vg_wrap tdlisten)
	[ "$TD_VALGRIND" = agent ] || [ "$TD_VALGRIND" = all ] &&
	    TDAGENT=$(vg_wrap tdagent)
	SLOW=${TD_SLOW:-10}
	;;
*)
	echo "FAIL: TD_VALGRIND=$TD_VALGRIND: want 1, listener, agent or all"
	exit 99
	;;
esac

# sessions_opened LOG N: the listener logging to LOG opened N recordings
sessions_opened() {
	[ "$(grep -c ': recording [0-9]* CPUs' "$1" 2>/dev/null)" -ge "$2" ]
}

# wait_session LOG [N]: until the listener logging to LOG has opened N
# recordings (default 1; at most 20 s times SLOW).  An agent's instance
# may record (-o) before its recorder has connected: a test that acts on
# the listener waits for this, not for wait_recording alone
wait_session() {
	wait_until $((400 * SLOW)) sessions_opened "$1" "${2:-1}"
}

# recorder PID: the unprivileged recorder of tdagent PID: its child that
# leads its own process group (the command stays in tdagent's); looked
# for during 2 s (times SLOW), as ps missed it once in CI
recorder() {
	i=0
	while [ $i -lt $((40 * SLOW)) ]; do
		r=$(ps --ppid "$1" -o pid=,pgid= | awk '$1 == $2 { print $1 }')
		[ -n "$r" ] && break
		sleep 0.05
		i=$((i + 1))
	done
	echo "$r"
}

# status_ids PID: "UID GID CAPEFF" of a process, its real ids
status_ids() {
	awk '/^Uid:/ { u = $2 " " $3 " " $4 " " $5 }
	    /^Gid:/ { g = $2 " " $3 " " $4 " " $5 }
	    /^CapEff:/ { c = $2 }
	    END { print u " / " g " / " c }' "/proc/$1/status" 2>/dev/null
}

# the file tdagent reported the listener wrote (from its stderr)
remote_file() {
	sed -n "s/.*the listener wrote '\([^']*\)'.*/\1/p" "$1" | tail -1
}
