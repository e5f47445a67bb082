#!/bin/sh
# End-to-end: tdagent -h streams to tdlisten over TLS 1.3 on loopback; the
# listener's files hold exactly the events local mode records, for v7 and
# v6, 16 agents at once each land in their own identity's directory with
# exact counts, and refused clients leave nothing behind.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
P=$WORK/pki
agents=""
for i in $(seq -w 1 16); do agents="$agents host$i"; done
pki "$P" web1 $agents || { echo "FAIL: cannot make certificates"; exit 99; }
# another CA's agent
pki "$WORK/other" rogue || { echo "FAIL: cannot make certificates"; exit 99; }

# stream_storm NAME N CERT [ARGS...]: dd streamed as CERT; sets RFILE, RPID
stream_storm() {
	name=$1 n=$2 cert=$3
	shift 3
	rm -f "$WORK/pid.$name"
	"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/$cert.pem" \
	    --key "$P/$cert.key" --ca "$P/ca.pem" --name "$name" \
	    -e raw_syscalls -b 4096 "$@" -- sh -c \
	    'echo $$ > '"$WORK/pid.$name"'; exec dd if=/dev/zero of=/dev/null bs=1 count='"$n"' status=none' \
	    2> "$WORK/agent.$name.err"
	RRC=$?
	RPID=$(cat "$WORK/pid.$name" 2>/dev/null)
	RFILE=$OUT/$(remote_file "$WORK/agent.$name.err")
}

for v in 7 6; do
	OUT=$WORK/out$v
	start_listener "$WORK/listen$v.log" -d "$OUT" --file-version $v \
	    --cert "$P/listener.pem" --key "$P/listener.key" --ca "$P/ca.pem" ||
	    exit 99
	stream_storm a$v 2000 web1 -F -v
	eq "v$v: streamed recording exits 0" "$RRC" 0
	# the suite both sides prefer: AES-128-GCM (AES-NI's cheapest)
	check "v$v: -v names the TLS session: TLS 1.3, AES-128-GCM" \
	    grep -q "TLSv1.3 TLS_AES_128_GCM_SHA256, records made by " \
	    "$WORK/agent.a$v.err"
	fa=$RFILE pa=$RPID
	stream_storm b$v 7000 web1 -F -o "$WORK/local$v.dat"
	fb=$RFILE pb=$RPID
	check "v$v: the file is under the certificate's identity" \
	    test -f "$OUT/web1/$(basename "$fa")"
	check "v$v: the agent's --name is the file's suffix" \
	    sh -c "basename '$fa' | grep -q -- '-a$v.dat\$'"
	check "v$v: trace-cmd reads the received file cleanly" tc_clean "$fa"
	"$TDCOUNT" "$fa" -p "$pa" > "$WORK/ca"
	"$TDCOUNT" "$fb" -p "$pb" > "$WORK/cb"
	"$TDCOUNT" "$WORK/local$v.dat" -p "$pb" > "$WORK/cl"
	if [ "$(field missed < "$WORK/ca")$(field missed < "$WORK/cb")" = 00 ]; then
		a=$(field events < "$WORK/ca")
		b=$(field events < "$WORK/cb")
		eq "v$v: exact count difference for 5000 blocks over TLS" \
		    "$((b - a))" 20000
		C=$((a - 8000))
		check "v$v: dd's constant is the local one ($C)" \
		    test "$C" -gt 0 -a "$C" -lt 2000
	else
		fail "v$v: the ring lost events, no exact count"
	fi
	eq "v$v: -o and -h together: the local file holds the same events" \
	    "$(field events < "$WORK/cl")" "$(field events < "$WORK/cb")"
	trace-cmd dump --summary -i "$fa" > "$WORK/sum" 2>&1
	if [ $v = 7 ]; then
		check "v7: received file is zstd v7" grep -q "zstd" "$WORK/sum"
	else
		check "v6: received file is v6" grep -q "Flyrecord" "$WORK/sum"
	fi
	check "v$v: no spool or .part left" \
	    test -z "$(find "$OUT" -name '*.part')"
	check "v$v: the listener logged the session" \
	    grep -q "session web1 'b$v' .*done after" "$WORK/listen$v.log"
	[ $v = 6 ] && { stop_listener; break; }

	# 16 agents at once, each its own instance, workload and identity
	n=0
	pids=""
	for a in $agents; do
		n=$((n + 1))
		stream_storm "$a" $((1000 + n * 100)) "$a" -q -F &
		pids="$pids $!"
	done
	wait $pids
	# each agent follows its own dd (-F): a background shell makes a few
	# system calls fewer than a foreground one, so the constant is
	# measured here: every agent must show the same one
	n=0
	consts=""
	for a in $agents; do
		n=$((n + 1))
		f=$(ls "$OUT/$a"/*.dat 2>/dev/null | head -1)
		# an agent that never ran its workload: what it said
		[ -f "$WORK/pid.$a" ] ||
		    sed "s/^/# $a: /" "$WORK/agent.$a.err"
		pid=$(cat "$WORK/pid.$a" 2>/dev/null)
		"$TDCOUNT" "$f" -p "$pid" > "$WORK/c16" 2>&1
		got=$(field events < "$WORK/c16")
		m=$(field missed < "$WORK/c16")
		[ "$m" = 0 ] || echo "# $a: the ring lost events"
		consts="$consts $((got - 4 * (1000 + n * 100)))"
	done
	C16=${consts# }
	C16=${C16%% *}
	echo "# 16 agents: count - 4 N per agent:$consts"
	eq "16 concurrent agents: every file exact (same constant $C16)" \
	    "$(echo $consts | tr ' ' '\n' | sort -u | wc -l)" 1
	check "16 concurrent agents: the constant is small" \
	    test "$C16" -gt 0 -a "$C16" -lt 2000
	eq "16 concurrent agents: 16 identity directories (+web1)" \
	    "$(ls "$OUT" | wc -l)" 17

	# refused: a certificate of another CA, a plain TCP client, a TLS
	# agent told --insecure; a good session runs at the same time
	stream_storm good 4000 web1 -F > "$WORK/good.out" &
	gpid=$!
	"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$WORK/other/rogue.pem" \
	    --key "$WORK/other/rogue.key" --ca "$P/ca.pem" -s 1 \
	    2> "$WORK/rogue.err"
	eq "an agent of another CA is refused (exit 1)" $? 1
	check "and is told why" grep -q "refused" "$WORK/rogue.err"
	"$TDFEED" 127.0.0.1 "$LPORT" "$fa" garbage
	eq "a plain TCP client sending garbage is cut off" $? 0
	"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure -s 1 2> "$WORK/ins.err"
	eq "a plain agent cannot talk to a TLS listener" $? 1
	wait $gpid
	gfile=$OUT/$(remote_file "$WORK/agent.good.err")
	"$TDCOUNT" "$gfile" -p "$(cat "$WORK/pid.good")" > "$WORK/cg"
	eq "the concurrent good session is exact" \
	    "$(field events < "$WORK/cg")" $((16000 + C16))
	check "no directory for the rogue agent" test ! -e "$OUT/rogue"
	check "the refusal is logged with the peer address" \
	    grep -q "127.0.0.1:[0-9]*.*TLS handshake refused" "$WORK/listen7.log"
	check "the listener survived" kill -0 "$LPID"
	stop_listener
	eq "tdlisten exits 0 on SIGTERM" $? 0
done

# --wire-compression: pages cross the link compressed; a zstd file stores
# zstd blocks as they came, zlib blocks are recompressed; both exact.  The
# codec is judged on the recording's own pages in full batches (tests/
# tdrecode -z), which must come to at most a quarter of the page bytes.
# The live frames' ratio (tdagent's "wire compression" line) is reported:
# batches closed by the 100 ms timer are smaller, however rarely; and what
# the link carried in all (headers of megabytes, uncompressed, time sync,
# resends) only has to be less than the pages
TDRECODE=$B/tests/tdrecode
OUT=$WORK/outw
start_listener "$WORK/listenw.log" -d "$OUT" \
    --cert "$P/listener.pem" --key "$P/listener.key" --ca "$P/ca.pem" ||
    exit 99
for w in zstd zlib; do
	# --reconnect-wait 0 still delivers on a healthy link
	stream_storm w$w 200000 web1 -F --wire-compression $w \
	    -o "$WORK/wlocal$w.dat" --reconnect-wait 0
	eq "wire $w: the agent exits 0" "$RRC" 0
	# what the agent said, when the listener's file is not where it says
	[ -f "$RFILE" ] || sed 's/^/# agent: /' "$WORK/agent.w$w.err"
	check "wire $w: trace-cmd reads the file cleanly" tc_clean "$RFILE"
	"$TDCOUNT" "$RFILE" > "$WORK/cw"
	"$TDCOUNT" "$WORK/wlocal$w.dat" > "$WORK/cwl"
	eq "wire $w: exactly the local file's events" \
	    "$(field events < "$WORK/cw")" "$(field events < "$WORK/cwl")"
	ratio=$(sed -n 's/.*wire compression: .* MB of frames (\([0-9.]*\)).*/\1/p' \
	    "$WORK/agent.w$w.err")
	echo "# wire $w: bytes of the live PAGES_Z frames / page bytes: ${ratio:-none}"
	pages=$(sed -n 's/.*wire compression: \([0-9.]*\) MB of pages.*/\1/p' \
	    "$WORK/agent.w$w.err")
	sent=$(sed -n "s/.*the listener wrote '.*' (\([0-9.]*\) MB sent.*/\1/p" \
	    "$WORK/agent.w$w.err")
	echo "# wire $w: all bytes sent ${sent:-none} MB for ${pages:-none} MB of pages"
	check "wire $w: the link carried fewer bytes than the pages (${sent:-none} < ${pages:-none} MB)" \
	    awk -v s="${sent:-1}" -v p="${pages:-0}" 'BEGIN { exit !(s < p) }'
	"$TDRECODE" -z $w "$WORK/wlocal$w.dat" > "$WORK/zr" 2>&1
	fixed=$(awk '$1 == "pages" { print $6 }' "$WORK/zr")
	check "wire $w: the pages in full batches <= 0.25 of their bytes (${fixed:-$(cat "$WORK/zr")})" \
	    awk -v r="${fixed:-1}" 'BEGIN { exit !(r <= 0.25) }'
done
check "wire: the listener's file is zstd" sh -c \
    "trace-cmd dump --summary -i '$RFILE' 2>&1 | grep -q zstd"
stop_listener

# A listener too busy to answer an agent's first connection in time (here
# stopped: the TLS handshake times out after 10 s): the agent tries again,
# up to --reconnect-wait, and records exactly.  A HELLO whose WELCOME never
# reached its agent (tdfeed hello-only: it gave up) leaves nothing to wait
# for a resume: the next HELLO of that recording takes it over.
OUT=$WORK/outb
start_listener "$WORK/listenb.log" -d "$OUT" \
    --cert "$P/listener.pem" --key "$P/listener.key" --ca "$P/ca.pem" ||
    exit 99
kill -STOP "$LPID"
(
	wait_until $((600 * SLOW)) grep -q "trying again for up to" \
	    "$WORK/agent.busy.err" 2>/dev/null
	kill -CONT "$LPID"
) &
kpid=$!
stream_storm busy 1000 web1 -F --reconnect-wait $((300 * SLOW))
wait $kpid
eq "busy listener: the agent exits 0" "$RRC" 0
check "busy listener: the agent tried again" grep -q \
    "TLS handshake with the listener failed: timed out; trying again for up to" \
    "$WORK/agent.busy.err"
"$TDCOUNT" "$RFILE" -p "$RPID" > "$WORK/cbusy"
eq "busy listener: the recording is exact" \
    "$(field events < "$WORK/cbusy")" $((4000 + ${C:-0}))
feed_again() {
	TDFEED_CERT=$P/web1.pem TDFEED_KEY=$P/web1.key TDFEED_CA=$P/ca.pem \
	    TDFEED_ID=77 "$TDFEED" 127.0.0.1 "$LPORT" "$WORK/local7.dat" \
	    "$1" again 2>> "$WORK/again.err"
}
feed_again hello-only
feed_again good
eq "HELLO again after a lost WELCOME: DONE" $? 0
check "the listener says the agent started again" \
    grep -q "session web1 'again' .*the agent started again" \
    "$WORK/listenb.log"
"$TDCOUNT" "$WORK/local7.dat" > "$WORK/csrc"
"$TDCOUNT" "$(ls "$OUT"/web1/*-again.dat)" > "$WORK/cagain"
eq "and the recording holds every event of its source" \
    "$(field events < "$WORK/cagain")" "$(field events < "$WORK/csrc")"
stop_listener
eq "two recordings in all, nothing left to resume" \
    "$(ls "$OUT"/web1 | wc -l)" 2
check "the listener left nothing to be resumed" \
    sh -c "! grep -q 'to be resumed' '$WORK/listenb.log'"
stop_listener

# Privilege separation: while it streams, the recorder runs as nobody
# with no capability and no way back, though the key and the spool
# directory are root's alone; SIGTERM to tdagent stops it cleanly; a
# recorder that crashes leaves no instance and no .part file behind.
OUT=$WORK/outp
start_listener "$WORK/listenp.log" -d "$OUT" \
    --cert "$P/listener.pem" --key "$P/listener.key" --ca "$P/ca.pem" ||
    exit 99
chmod 600 "$P/web1.key"
mkdir -m 700 "$WORK/spool"
nobody_ids="65534 65534 65534 65534 / 65534 65534 65534 65534 / 0000000000000000"
# live TAG: a streaming tdagent with -o (no core files), sets PID, REC
live() {
	(ulimit -c 0; exec "$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
	    --key "$P/web1.key" --ca "$P/ca.pem" --spool "$WORK/spool" \
	    --name "$1" -o "$WORK/$1.dat" -e sched -e raw_syscalls \
	    2> "$WORK/agent.$1.err") &
	PID=$!
	wait_recording $PID
	sleep 0.5
	REC=$(recorder $PID)
}
live p1
eq "privsep: the recorder streams as nobody, CapEff 0" \
    "$(status_ids "$REC")" "$nobody_ids"
eq "privsep: no new privileges for the recorder" \
    "$(awk '/^NoNewPrivs:/ { print $2 }' /proc/$REC/status)" 1
# undumpable: it holds the private key, and nobody is shared
check "privsep: another process of that user cannot read its memory" \
    sh -c "! setpriv --reuid 65534 --regid 65534 --clear-groups -- \
    cat /proc/$REC/environ > /dev/null 2>&1"
eq "privsep: tdagent itself stays root" \
    "$(awk '/^Uid:/ { print $2 }' /proc/$PID/status)" 0
check "privsep: its -o file is open, its directory is root's" \
    test -f "$WORK/p1.dat.part" -a "$(stat -c %U "$WORK")" = root
kill -TERM $PID
wait $PID
eq "privsep: SIGTERM to tdagent stops the recording with status 0" $? 0
check "privsep: the instances are removed" \
    test -z "$(ls $TRACING/instances | grep "^tracedock-$PID")"
check "privsep: the streamed file is complete" \
    tc_clean "$OUT/$(remote_file "$WORK/agent.p1.err")"
check "privsep: the -o file is complete" tc_clean "$WORK/p1.dat"
check "privsep: nothing left beside it" \
    test -z "$(ls "$WORK" | grep '\.part$')"

# (a sanitizer build would report the SIGSEGV as its own and exit 1)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0 live p2
kill -SEGV "$REC"
wait $PID
eq "privsep: a recorder killed by SIGSEGV: tdagent exits 139" $? 139
check "privsep: and says so" \
    grep -q "recorder (pid $REC) was killed by signal 11" "$WORK/agent.p2.err"
check "privsep: the instances of the crashed recorder are removed" \
    test -z "$(ls $TRACING/instances | grep "^tracedock-$PID")"
check "privsep: no -o file and no .part after the crash" \
    test ! -e "$WORK/p2.dat" -a ! -e "$WORK/p2.dat.part"
stop_listener

# start-up errors are clear
check "no certificates and no --insecure is a usage error" \
    sh -c "'$TDLISTEN' -p '$(free_port)' 2>&1 | grep -q 'TLS needs --cert'"
start_listener "$WORK/busy.log" --insecure -d "$WORK/busy" || exit 99
"$TDLISTEN" -p "$LPORT" --insecure --bind 127.0.0.1 -d "$WORK/busy" 2> "$WORK/err"
eq "a busy port fails at start" $? 1
check "and says so" grep -q "Address already in use" "$WORK/err"
stop_listener
"$TDLISTEN" -p "$(free_port)" --cert /nonexistent.pem --key "$P/listener.key" \
    --ca "$P/ca.pem" 2> "$WORK/err"
eq "an unreadable certificate fails at start" $? 1
check "and names the file" grep -q "/nonexistent.pem" "$WORK/err"
finish
