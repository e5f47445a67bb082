# shellcheck shell=sh disable=SC2120 # free_port N: the e2e tests pass N
# harness.sh: the harness the end-to-end tests (tests/e2e-lib.sh) and the
# benchmarks (bench/lib.sh) share: certificates, free ports, the wait for a
# listener and for an agent's ftrace instance, starting and stopping a
# listener, reaping.  Sourced, not run; POSIX sh (the tests run it under
# sh, the benchmarks under bash with set -euo pipefail: every command that
# may fail here is tested).  One copy of each: add to it here, not in a
# script.
#
# The caller sets, before sourcing:
#	HARNESS_TOP	the source tree (scripts/tdcert, tests/tdport.c)
# and, before calling what uses them:
#	B		a build tree (its tests/tdport, if built)
#	TMP		where free_port builds tdport when B has none
#	TDLISTEN	the tdlisten start_listener runs
#	LISTEN_VERBOSE	start_listener's verbosity flag ("-v" if unset; the
#			benchmarks set it empty)
#	SLOW		scales every wait (1 if unset)
TRACING=${TRACING:-/sys/kernel/tracing}

# pki DIR NAME...: with scripts/tdcert, a CA in DIR, a listener
# certificate for localhost (DIR/listener.pem, .key) and one client
# certificate per NAME (DIR/NAME.pem, .key); 1 if tdcert failed
pki() {
	_pk_d=$1
	shift
	sh "$HARNESS_TOP/scripts/tdcert" init "$_pk_d" >/dev/null || return 1
	sh "$HARNESS_TOP/scripts/tdcert" issue "$_pk_d" listener --server \
	    >/dev/null || return 1
	for _pk_a in "$@"; do
		sh "$HARNESS_TOP/scripts/tdcert" issue "$_pk_d" "$_pk_a" \
		    >/dev/null || return 1
	done
}

# free_port [N]: the first of N free consecutive TCP and UDP ports
# (default 1), as the kernel says (tests/tdport: it binds them all); below
# the ephemeral range, where no connection takes one before the caller
# binds it.  Never a fixed port or a range other software may hold: a
# collection box runs tdlisten on 4000.  tdport is $TDPORT, else
# $B/tests/tdport, else built from tests/tdport.c into $TMP once.
free_port() {
	_fp=${TDPORT:-}
	[ -x "$_fp" ] || _fp=${B:-/nonexistent}/tests/tdport
	if [ ! -x "$_fp" ]; then
		_fp=${TMP:?free_port: no tdport built and no TMP}/tdport
		[ -x "$_fp" ] || ${CC:-cc} -O2 -o "$_fp" \
		    "$HARNESS_TOP/tests/tdport.c" || return 1
	fi
	"$_fp" "$@"
}

# port_listening PORT: something listens on TCP port PORT (IPv4 or IPv6)
port_listening() {
	awk -v p="$(printf ':%04X' "$1")" '$4 == "0A" &&
	    substr($2, length($2) - 4) == p { found = 1 }
	    END { exit !found }' /proc/net/tcp /proc/net/tcp6
}

# wait_until TICKS CMD [ARG...]: run CMD until it succeeds, every 0.05 s,
# giving up after TICKS + 1 pauses; 0 if CMD succeeded, else 1 (CMD's
# complaints while it fails, such as grep's about a file not written yet,
# are not shown)
wait_until() {
	_wu_max=$1
	shift
	_wu_i=0
	while :; do
		"$@" 2>/dev/null && return 0
		[ "$_wu_i" -gt "$_wu_max" ] && return 1
		sleep 0.05
		_wu_i=$((_wu_i + 1))
	done
}

# _listening_or_gone PORT PID: PORT listens, or PID (if any) is gone
_listening_or_gone() {
	port_listening "$1" && return 0
	[ -z "$2" ] && return 1
	kill -0 "$2" 2>/dev/null && return 1
	_lg_gone=1
	return 0
}

# wait_listening PORT [PID]: until something listens on PORT (10 s times
# SLOW at most); 1 if it never did, or as soon as process PID is gone
wait_listening() {
	_lg_gone=0
	wait_until $((200 * ${SLOW:-1})) _listening_or_gone "$1" "${2:-}" &&
	    [ "$_lg_gone" = 0 ]
}

# recording PID: tdagent PID's instance records.  Events first, then
# tracing_on: a new instance has tracing on for a moment (the kernel's
# default) before tdagent turns it off, enables its events, clears the
# buffer and turns tracing on; a wait that saw only tracing_on = 1 in that
# moment lost the events of its first 100 ms (seen under load)
recording() {
	_rd=$TRACING/instances/tracedock-$1
	_re=$(cat "$_rd/events/enable" 2>/dev/null || true)
	[ -n "$_re" ] && [ "$_re" != 0 ] &&
	    [ "$(cat "$_rd/tracing_on" 2>/dev/null || true)" = 1 ]
}

# _recording_or_gone PID: PID's instance records, or PID is gone
_recording_or_gone() {
	recording "$1" && return 0
	kill -0 "$1" 2>/dev/null && return 1
	_wr_gone=1
	return 0
}

# wait_recording PID [TICKS]: until tdagent PID's instance records (at
# most TICKS 0.05 s pauses, default 400: 20 s, times SLOW); 1 if it never
# did, as soon as PID is gone
wait_recording() {
	_wr_gone=0
	wait_until $((${2:-400} * ${SLOW:-1})) _recording_or_gone "$1" &&
	    [ "$_wr_gone" = 0 ]
}

# start_listener LOG ARGS...: run $TDLISTEN -p PORT $LISTEN_VERBOSE ARGS
# in the background, its output in LOG, on a free port (or on
# $LPORT_FIXED: a restarted listener), five ports tried; returns once it
# says "listening on"; sets LPORT, LPID
start_listener() {
	_sl_log=$1
	shift
	for _sl_try in 1 2 3 4 5; do
		LPORT=${LPORT_FIXED:-$(free_port)} || continue
		# shellcheck disable=SC2086 # LISTEN_VERBOSE: a flag or nothing
		"$TDLISTEN" -p "$LPORT" ${LISTEN_VERBOSE--v} "$@" \
		    > "$_sl_log" 2>&1 &
		LPID=$!
		_sl_i=0
		while [ $_sl_i -lt $((100 * ${SLOW:-1})) ]; do
			grep -q "listening on" "$_sl_log" 2>/dev/null &&
			    return 0
			kill -0 $LPID 2>/dev/null || break
			sleep 0.05
			_sl_i=$((_sl_i + 1))
		done
		reap $LPID
	done
	echo "cannot start tdlisten: $(cat "$_sl_log")"
	return 1
}

# stop_listener: SIGTERM to $LPID; its exit status
stop_listener() {
	kill -TERM "$LPID" 2>/dev/null
	wait "$LPID"
}

# reap PID...: SIGTERM to each process still there, then wait for each
# (what they exited with is not asked); for the clean-ups
reap() {
	for _rp in "$@"; do
		kill -TERM "$_rp" 2>/dev/null || true
	done
	for _rp in "$@"; do
		wait "$_rp" 2>/dev/null || true
	done
}
