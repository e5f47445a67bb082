#!/bin/sh
# End-to-end: protocol faults from a peer close that one session with a
# logged reason; what arrived is kept as NAME.incomplete.dat when it is a
# readable trace; a good agent streaming at the same time stays exact.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
OUT=$WORK/out
# an idle timeout a slow (sanitized) agent's start-up cannot reach
start_listener "$WORK/l.log" --insecure -d "$OUT" --resume-wait 0 \
    --idle-timeout 5 || exit 99

# a real recording to replay
"$TDAGENT" -q -o "$WORK/src.dat" -e sched -e raw_syscalls -s 0.5
src_events=$("$TDCOUNT" "$WORK/src.dat" | field events)

# a faithful replay lands as the same events
"$TDFEED" 127.0.0.1 "$LPORT" "$WORK/src.dat" good replay
eq "a faithful replay is accepted" $? 0
f=$(ls "$OUT"/127.0.0.1/*-replay.dat)
eq "the replayed file holds the same events" \
    "$("$TDCOUNT" "$f" | field events)" "$src_events"
check "trace-cmd reads the replayed file cleanly" tc_clean "$f"
# the replay answers no time-sync probe: the file completes without
# TIME_SHIFT and the log says why
check "no sample: the log says there is no time sync" \
    grep -q "'replay' .*no time sync: the agent sent no usable sample" "$WORK/l.log"
check "no sample: no TIME_SHIFT in the file" sh -c \
    "! trace-cmd dump --options -i '$f' 2>/dev/null | grep -q 'Option TimeShift'"
# absurd samples (bound, scaling, fraction out of range) are dropped and
# counted: the recording completes.  Issue 27 (never without a time
# shift): the one whose only fault is a bound past 100 ms is kept as the
# time shift when no other sample was, with a warning that gives its
# bound; the scaling and the fraction are refused as before
"$TDFEED" 127.0.0.1 "$LPORT" "$WORK/src.dat" bad-samples
eq "absurd samples: the recording is accepted" $? 0
f=$(ls "$OUT"/127.0.0.1/*-bad-samples.dat)
eq "absurd samples: the file holds the same events" \
    "$("$TDCOUNT" "$f" | field events)" "$src_events"
check "absurd samples: the log counts the 2 dropped" \
    grep -q "'bad-samples' .*time sync: 1 samples (2 dropped" "$WORK/l.log"
check "absurd samples: the wide one is the time shift, and the log says so" \
    grep -q "'bad-samples' .*every sample's bound was past 100 ms; the tightest is the time shift, +-100000001 ns: wide" "$WORK/l.log"
check "absurd samples: its TIME_SHIFT in the file" sh -c \
    "trace-cmd dump --options -i '$f' 2>/dev/null | grep -q 'Option TimeShift'"

# the good agent streams while the faults come in; its 16 MiB rings hold
# the whole workload (about 6 MB), so its count is exact however slowly a
# busy machine (or a sanitizer build) lets it run
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure --name good -F -b 16384 \
    -e raw_syscalls -- sh -c 'echo $$ > '"$WORK/gpid"'; sleep 0.5; exec dd if=/dev/zero of=/dev/null bs=1 count=30000 status=none' \
    2> "$WORK/good.err" &
gpid=$!

# mode  reason in the log  kept?
while read -r mode reason kept; do
	"$TDFEED" 127.0.0.1 "$LPORT" "$WORK/src.dat" "$mode"
	eq "$mode: the listener refuses it" $? 0
	check "$mode: logged as '$reason'" \
	    grep -q "closing: .*$reason" "$WORK/l.log"
	inc=$(ls "$OUT"/127.0.0.1/*-"$mode".incomplete.dat 2>/dev/null)
	if [ "$kept" = yes ]; then
		check "$mode: what arrived is kept as .incomplete.dat" \
		    test -n "$inc"
		[ -n "$inc" ] && check "$mode: and trace-cmd reads it" \
		    tc_clean "$inc"
	else
		check "$mode: nothing usable, nothing kept" test -z "$inc"
	fi
done <<'MODES'
garbage bad.frame.header no
early-pages expected.HELLO.first no
hello-twice unexpected.message no
bad-section bad.or.repeated.SECTION no
oversize bad.frame.header yes
bad-cpu pages.for.CPU yes
seq-gap was.due yes
end-mismatch arrived yes
truncated connection.closed.before yes
cut connection.closed.before yes
idle no.data.for.5.s yes
MODES

wait $gpid
eq "the good agent finished" $? 0
gf=$OUT/$(remote_file "$WORK/good.err")
"$TDCOUNT" "$gf" -p "$(cat "$WORK/gpid")" > "$WORK/cgood"
n=$(field events < "$WORK/cgood")
eq "the good session lost nothing" "$(field missed < "$WORK/cgood")" 0
# 30000 blocks: 120000 events plus the shell's and dd's own start-up calls
check "the good session is complete and exact-sized ($n)" \
    test "$n" -gt 120000 -a "$n" -lt 122000
check "the listener survived" kill -0 "$LPID"
check "no .part left behind" test -z "$(find "$OUT" -name '*.part')"
# an agent whose DONE was lost comes back for it (the replay was recording
# 1 of this identity): told DONE again, also by the next tdlisten
"$TDFEED" 127.0.0.1 "$LPORT" "$WORK/src.dat" resume-done
eq "a late resume of a finished recording is told DONE" $? 0
stop_listener
check "finished recordings are listed in DIR/.tdlisten-finished" \
    grep -q "^0000000000000001 .* 127.0.0.1 127.0.0.1/.*-replay.dat\$" \
    "$OUT/.tdlisten-finished"
start_listener "$WORK/l4.log" --insecure -d "$OUT" || exit 99
"$TDFEED" 127.0.0.1 "$LPORT" "$WORK/src.dat" resume-done
eq "and by a tdlisten started again" $? 0
check "which logs it" grep -q "came back for its DONE ('127.0.0.1/.*-replay.dat')" \
    "$WORK/l4.log"
"$TDFEED" 127.0.0.1 "$LPORT" "$WORK/src.dat" resume-unknown
eq "a resume of a recording never seen is refused" $? 0
stop_listener

# --max-per-identity: one recording at a time for this identity (the
# first one records until it is stopped, however long the second takes)
start_listener "$WORK/l3.log" --insecure -d "$WORK/out3" \
    --max-per-identity 1 || exit 99
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure -e sched -s 600 \
    2> "$WORK/first.err" &
apid=$!
wait_recording "$apid"
wait_session "$WORK/l3.log"
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure -e sched -s 1 \
    2> "$WORK/second.err"
eq "a second recording of the same identity is refused" $? 1
check "and told why" grep -q "too many recordings open for" \
    "$WORK/second.err"
kill -TERM "$apid"
wait "$apid"
rc=$?
eq "while the first one completes" $rc 0
[ $rc = 0 ] || cat "$WORK/first.err" "$WORK/second.err" "$WORK/l3.log"
stop_listener

# the listener dies mid-recording: with -o too, the local file still
# completes and tdagent says what happened (the recording goes on until
# it is stopped, once the agent has given the network up)
start_listener "$WORK/l2.log" --insecure -d "$WORK/out2" || exit 99
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure -o "$WORK/both.dat" -e sched \
    -s 600 --reconnect-wait 1 2> "$WORK/both.err" &
apid=$!
# once its first time-sync sample arrived the agent records in its loop
# (a listener lost during the headers' flush is e2e-resume's part 9)
wait_until $((400 * SLOW)) grep -q "time sync round 1:" "$WORK/l2.log"
kill -9 "$LPID"
wait_until $((400 * SLOW)) grep -q "goes on into '$WORK/both.dat' only" \
    "$WORK/both.err"
kill -TERM "$apid"
wait "$apid"
eq "listener killed for good: tdagent -o -h still exits 0" $? 0
check "and says it tried to reconnect" grep -q "reconnecting" "$WORK/both.err"
check "and that the recording is complete locally" \
    grep -q "complete in '$WORK/both.dat' only" "$WORK/both.err"
check "and the local file is complete" tc_clean "$WORK/both.dat"
# issue 31, row 5: a peer's recording name reaches --on-finish commands
# only as the file's name has it.  The name holds a $(...) and a forged
# JSON field; the site's hook is careless on purpose (its shell reads
# $TD_RECORDING again, and it pastes the values into JSON), and a
# tdagent's honest recording of dd runs beside it.  TD_JSON, built by
# the listener's escaping writer, is what a hook posts instead.
cd "$WORK" || exit 99
cat > "$WORK/hook5.sh" <<EOF
#!/bin/sh
cd '$WORK' || exit 9
sh -c "echo careless \$TD_RECORDING" >> hook5.out
printf '{"recording":"%s","identity":"%s"}\n' "\$TD_RECORDING" \\
    "\$TD_IDENTITY" >> hook5.pasted
printf '%s\n' "\$TD_JSON" >> hook5.json
printf '%s|%s\n' "\$TD_RECORDING" "\$1" >> hook5.log
EOF
chmod 755 "$WORK/hook5.sh"
start_listener "$WORK/l5.log" --insecure -d "$WORK/out5" \
    --on-finish "$WORK/hook5.sh" || exit 99
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure --name honest5 -F -b 4096 \
    -e raw_syscalls -- sh -c 'echo $$ > '"$WORK/h5pid"'; exec dd if=/dev/zero of=/dev/null bs=1 count=2000 status=none' \
    2> "$WORK/honest5.err"
eq "row 5: the honest recording is delivered" $? 0
EVIL='x$(touch pwned5)","identity":"web1'
"$TDFEED" 127.0.0.1 "$LPORT" "$WORK/src.dat" good "$EVIL"
eq "row 5: the evil name's recording is accepted" $? 0
wait_until $((400 * SLOW)) eval '[ "$(wc -l 2>/dev/null < hook5.log)" = 2 ]'
eq "row 5: the command ran for both files" "$(wc -l < hook5.log)" 2
check "row 5: no shell ran the name's \$(...)" test ! -e pwned5
ef=$(ls "$WORK"/out5/127.0.0.1/*-x_*.dat)
eq "row 5: TD_RECORDING is the file's sanitized name" \
    "$(grep -v '^honest5|' hook5.log)" \
    "x__touch_pwned5____identity___web1|$ef"
eq "row 5: pasted JSON holds one identity" \
    "$(grep -c '"identity":.*"identity"' hook5.pasted)" 0
eq "row 5: pasted JSON: the identity is the true one" \
    "$(jq -r '.identity' < hook5.pasted | sort -u)" 127.0.0.1
eq "row 5: TD_JSON: both files, identity the true one" \
    "$(jq -r '.identity' < hook5.json | sort | uniq -c | tr -s ' ')" \
    " 2 127.0.0.1"
eq "row 5: TD_JSON: path, kind, producer, recording, attempt" \
    "$(jq -r 'select(.recording != "honest5") |
    [.path, .kind, .producer, .recording, .attempt] | join(" ")' < hook5.json)" \
    "$ef complete tdproto x__touch_pwned5____identity___web1 1"
hf=$WORK/out5/$(remote_file "$WORK/honest5.err")
"$TDCOUNT" "$hf" -p "$(cat "$WORK/h5pid")" > "$WORK/c5"
eq "row 5: the honest recording lost nothing" "$(field missed < "$WORK/c5")" 0
n=$(field events < "$WORK/c5")
# 2000 blocks: 8000 events plus the shell's and dd's own start-up calls
check "row 5: the honest recording is exact-sized ($n)" \
    test "$n" -gt 8000 -a "$n" -lt 10000
stop_listener
# issue 31, row 6: one identity's 1,100 finished files wait for a slow
# --on-finish command (their sidecars, as the listener writes them, left
# by an earlier tdlisten: the start queues them again), and an honest
# identity finishes a recording meanwhile.  An identity queues at most 64
# (TD_ONFINISH_QUEUE_ID), the rest wait in their sidecars and are queued
# again as its queue drains: the honest file is queued, and in the end
# every file's command ran exactly once.
mkdir -p "$WORK/out6/127.0.0.3"
: > "$WORK/out6/tiny"
i=0
while [ $i -lt 1100 ]; do
	f=$(printf '%s/out6/127.0.0.3/20261128T000000Z-t%04d.dat' "$WORK" $i)
	ln "$WORK/out6/tiny" "$f"
	printf 'tdlisten-onfinish 1\nkind=complete\nproducer=tdproto\nidentity=127.0.0.3\nname=t%04d\n' \
	    $i > "$f.onfinish"
	i=$((i + 1))
done
cat > "$WORK/hook6.sh" <<EOF
#!/bin/sh
cd '$WORK' || exit 9
if [ "\$TD_IDENTITY" = 127.0.0.3 ]; then
	while [ ! -e release6 ]; do sleep 0.02; done
fi
printf '%s %s\n' "\$TD_IDENTITY" "\$1" >> hook6.log
EOF
chmod 755 "$WORK/hook6.sh"
start_listener "$WORK/l6.log" --insecure -d "$WORK/out6" \
    --on-finish "$WORK/hook6.sh" --on-finish-jobs 2 || exit 99
# the start reads the sidecars after it listens (under valgrind: later)
wait_until $((200 * SLOW)) grep -q "on-finish: identity '127.0.0.3' has 64" \
    "$WORK/l6.log"
check "row 6: the start defers what is past the identity's 64" grep -q \
    "on-finish: identity '127.0.0.3' has 64 files queued (64 in all): .* wait in their sidecars" \
    "$WORK/l6.log"
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --insecure --name honest6 -F -b 4096 \
    -e raw_syscalls -- sh -c 'echo $$ > '"$WORK/h6pid"'; exec dd if=/dev/zero of=/dev/null bs=1 count=2000 status=none' \
    2> "$WORK/honest6.err"
eq "row 6: the honest recording is delivered" $? 0
hf=$WORK/out6/$(remote_file "$WORK/honest6.err")
check "row 6: the honest file is not refused a place" sh -c \
    "! grep -F '$hf' '$WORK/l6.log' | grep -q 'is not\|cannot be queued\|wait in their'"
touch "$WORK/release6"
wait_until $((1200 * SLOW)) eval '[ "$(wc -l 2>/dev/null < hook6.log)" -ge 1101 ] 2>/dev/null'
eq "row 6: the honest file's command ran once" \
    "$(grep -c "^127.0.0.1 $hf\$" hook6.log)" 1
eq "row 6: 1,100 commands for the other identity" \
    "$(grep -c '^127.0.0.3 ' hook6.log)" 1100
eq "row 6: each file's exactly once" \
    "$(sort -u hook6.log | wc -l)" 1101
eq "row 6: no sidecar left" \
    "$(find "$WORK/out6" -name '*.onfinish' | wc -l)" 0
check "row 6: the log says the waiting files were queued again" grep -q \
    "on-finish: identity '127.0.0.3': 32 waiting files queued again from their sidecars" \
    "$WORK/l6.log"
"$TDCOUNT" "$hf" -p "$(cat "$WORK/h6pid")" > "$WORK/c6"
eq "row 6: the honest recording lost nothing" "$(field missed < "$WORK/c6")" 0
n=$(field events < "$WORK/c6")
check "row 6: the honest recording is exact-sized ($n)" \
    test "$n" -gt 8000 -a "$n" -lt 10000
stop_listener
# issue 31, row 2: identity "evil" says its agent runs the guest "vm1"
# (tdagent --guest vm1:PID of a process whose thread is named as QEMU
# names vCPU threads), before vm1's real host hv1 says so; the listener
# allows only --guest hv1:vm1.  vm1 records dd (exact counts); its file's
# TIME_SHIFT must name hv1's file, never evil's.
if command -v python3 >/dev/null; then
	P2=$WORK/pki2
	pki "$P2" evil hv1 vm1 || { echo "FAIL: cannot make certificates"; exit 99; }
	python3 -c 'import ctypes, time
ctypes.CDLL(None).prctl(15, b"CPU 0/KVM", 0, 0, 0); time.sleep(600)' &
	fq=$!
	start_listener "$WORK/l2g.log" -d "$WORK/out2g" --cert "$P2/listener.pem" \
	    --key "$P2/listener.key" --ca "$P2/ca.pem" --guest hv1:vm1 || exit 99
	# tdagent_as ID ARGS...: a tdagent with identity ID's certificate (exec:
	# run it in a subshell or in the background)
	tdagent_as() {
		_id=$1
		shift
		exec "$TDAGENT" -h localhost -p "$LPORT" --cert "$P2/$_id.pem" \
		    --key "$P2/$_id.key" --ca "$P2/ca.pem" "$@"
	}
	wait_until $((100 * SLOW)) eval '[ "$(cat /proc/$fq/comm 2>/dev/null)" = "CPU 0/KVM" ]'
	tdagent_as evil --guest "vm1:$fq" -e sched:sched_switch -s 600 \
	    2> "$WORK/evil.err" &
	epid=$!
	wait_until $((400 * SLOW)) grep -q "session evil .*guest 'vm1'" "$WORK/l2g.log"
	check "row 2: evil's claim is logged as not allowed" grep -q \
	    "session evil .*: its agent says it runs guest 'vm1', which no --guest evil:vm1 allows: never paired" \
	    "$WORK/l2g.log"
	tdagent_as hv1 --guest "vm1:$fq" -e sched:sched_switch -s 600 \
	    2> "$WORK/hv1.err" &
	hpid=$!
	wait_until $((400 * SLOW)) grep -q "session hv1 .*guest 'vm1'" "$WORK/l2g.log"
	(tdagent_as vm1 -F -b 4096 -e raw_syscalls -- sh -c 'echo $$ > '"$WORK/g2pid"'; exec dd if=/dev/zero of=/dev/null bs=1 count=2000 status=none') \
	    2> "$WORK/vm1.err"
	eq "row 2: the guest's recording is delivered" $? 0
	kill -TERM "$epid" "$hpid"
	wait "$epid"
	eq "row 2: evil's agent exits 0" $? 0
	wait "$hpid"
	eq "row 2: hv1's agent exits 0" $? 0
	kill "$fq"
	wait "$fq" 2>/dev/null
	stop_listener
	gf=$WORK/out2g/$(remote_file "$WORK/vm1.err")
	hf=$WORK/out2g/$(remote_file "$WORK/hv1.err")
	ef=$WORK/out2g/$(remote_file "$WORK/evil.err")
	traceid() {
		trace-cmd dump --options -i "$1" 2>/dev/null |
		    sed -n '/Option TRACEID/{n;p;}'
	}
	peer() {
		trace-cmd dump --options -i "$1" 2>/dev/null |
		    sed -n 's/^\(0x[0-9A-F]*\) \[peer.s trace id\]/\1/p'
	}
	check "row 2: never paired with evil" sh -c \
	    "! grep -q \"of its host 'evil'\" '$WORK/l2g.log'"
	check "row 2: paired with its host hv1" grep -q \
	    "session vm1 .*: paired with the recording [0-9a-f]* of its host 'hv1'" \
	    "$WORK/l2g.log"
	eq "row 2: the guest's TIME_SHIFT names hv1's file" "$(peer "$gf")" \
	    "$(traceid "$hf")"
	check "row 2: hv1's file has the GUEST option of vm1" sh -c \
	    "trace-cmd dump --options -i '$hf' 2>/dev/null | grep -q 'Option GUEST'"
	check "row 2: evil's file has no GUEST option" sh -c \
	    "! trace-cmd dump --options -i '$ef' 2>/dev/null | grep -q 'Option GUEST'"
	"$TDCOUNT" "$gf" -p "$(cat "$WORK/g2pid")" > "$WORK/c2"
	eq "row 2: the guest's recording lost nothing" "$(field missed < "$WORK/c2")" 0
	n=$(field events < "$WORK/c2")
	check "row 2: the guest's recording is exact-sized ($n)" \
	    test "$n" -gt 8000 -a "$n" -lt 10000
else
	echo "# python3 missing: no row 2 (it names a thread as QEMU does)"
fi
finish
