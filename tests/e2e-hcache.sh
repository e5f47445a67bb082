#!/bin/sh
# End-to-end: the header cache (protocol version 4, issue 16 part 4).
# A recording sent twice (tests/tdfeed replays one trace.dat) is written
# byte for byte the same whether its header sections came whole or from
# the listener's cache, or from a listener without one; the second send
# carries exactly the sections' bytes less (the listener's byte count);
# kallsyms and printk are never shared across identities, the formats
# are; a damaged entry is dropped and the section sent whole; an agent
# that sends other bytes than it offered does not get them kept; a
# recording with references in its stream resumes.  Then tdagent itself:
# two recordings of one agent, the second without the bytes of the
# sections the listener has, both files read cleanly with their exact
# event counts.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
P=$WORK/pki
pki "$P" web1 web2 web3 web4 || { echo "FAIL: cannot make certificates"; exit 99; }
TLS="--cert $P/listener.pem --key $P/listener.key --ca $P/ca.pem"

# feed CERT MODE ID [HCACHE]: tests/tdfeed over TLS as CERT; stderr to
# WORK/feed.CERT.ID
feed() {
	TDFEED_CERT=$P/$1.pem TDFEED_KEY=$P/$1.key TDFEED_CA=$P/ca.pem \
	    TDFEED_ID=$3 TDFEED_HCACHE=${4:-} "$TDFEED" 127.0.0.1 "$LPORT" \
	    "$WORK/src.dat" "$2" "$1-$3" 2> "$WORK/feed.$1.$3"
}
# sent CERT ID: the bytes tdfeed sent; refs CERT ID: its references
sent() {
	sed -n 's/^tdfeed: sent \([0-9]*\) bytes.*/\1/p' "$WORK/feed.$1.$2"
}
refs() {
	sed -n 's/^tdfeed: sent .*, \([0-9]*\) sections by reference/\1/p' \
	    "$WORK/feed.$1.$2"
}
# received LOG CERT ID: the bytes the listener logged for that recording
received() {
	sed -n "s/.*'$2-$3'.*: done after .* pages, \([0-9]*\) bytes,.*/\1/p" \
	    "$1"
}
# out DIR CERT ID: the file of that recording
out() {
	ls "$1"/$2/*-$2-$3.dat 2>/dev/null
}
# framed LEN: the bytes tdfeed frames a section of LEN bytes in (SECTION,
# 1 MiB SECTION_DATA pieces, SECTION_END)
framed() {
	echo $((10 + 8 + $1 + 8 * (($1 + 1048575) / 1048576)))
}

"$TDAGENT" -q -o "$WORK/src.dat" -e sched:sched_switch -s 0.2 ||
    { echo "FAIL: cannot record the source file"; exit 99; }

# ---- tdfeed: one recording, sent again and again
OUT=$WORK/out
start_listener "$WORK/l.log" -d "$OUT" $TLS || exit 99
feed web1 good 11 1
eq "first send: DONE" $? 0
eq "first send: nothing by reference (an empty cache)" "$(refs web1 11)" 0
C=$OUT/.tdlisten-cache
eq "the formats are kept in shared/ (HEADER_INFO, FTRACE_EVENTS, EVENT_FORMATS)" \
    "$(ls "$C/shared" | wc -l)" 3
eq "kallsyms and printk in the identity's own directory" \
    "$(ls "$C/id/web1" | wc -l)" 2
check "every entry is named after the SHA-256 of its content" sh -c "
    cd '$C' && for f in shared/* id/web1/*; do
        [ \"\$(sha256sum < \$f | cut -c1-64)\" = \"\${f##*/}\" ] || exit 1
    done"
eq "the cache is private (0700 directories, 0600 files)" \
    "$(find "$C" -perm /077 | wc -l)" 0
feed web1 good 12 1
eq "second send: DONE" $? 0
eq "second send: all five sections by reference" "$(refs web1 12)" 5
f1=$(out "$OUT" web1 11)
f2=$(out "$OUT" web1 12)
check "the file from the cache is byte for byte the file sent whole" \
    cmp "$f1" "$f2"
check "trace-cmd reads it cleanly" tc_clean "$f2"
r1=$(received "$WORK/l.log" web1 11)
r2=$(received "$WORK/l.log" web1 12)
eq "first send: the listener received what tdfeed sent" "$r1" "$(sent web1 11)"
eq "second send: the same" "$r2" "$(sent web1 12)"
# each section whole, against one 52-byte SECTION_REF
saved=0
for e in "$C"/shared/* "$C"/id/web1/*; do
	saved=$((saved + $(framed $(stat -c %s "$e")) - 52))
done
eq "second send: exactly the sections' frames less (less 5 references)" \
    "$((r1 - r2))" "$saved"
echo "# first send $r1 bytes, second $r2 bytes"

# ---- another identity: the formats are shared, kallsyms and printk not
feed web2 good 21 1
eq "web2: DONE" $? 0
eq "web2: only the three shared sections by reference" "$(refs web2 21)" 3
check "web2: the same file" cmp "$f1" "$(out "$OUT" web2 21)"
eq "web2: its kallsyms and printk are kept apart from web1's" \
    "$(ls "$C/id/web2" | wc -l)" 2

# ---- a damaged entry: dropped, the section sent whole, the file the same
k=$(ls -S "$C"/id/web1/* | head -1)
printf 'X' | dd of="$k" bs=1 seek=100 conv=notrunc status=none
feed web1 good 13 1
eq "damaged: DONE" $? 0
eq "damaged: the other four by reference" "$(refs web1 13)" 4
check "damaged: the listener says so" \
    grep -q "session web1 .*the header cache's copy of section 19 was damaged" \
    "$WORK/l.log"
check "damaged: the file is the same" cmp "$f1" "$(out "$OUT" web1 13)"
check "damaged: the entry is good again" sh -c \
    "[ \"\$(sha256sum < '$k' | cut -c1-64)\" = '${k##*/}' ]"

# ---- an agent that sends other bytes than the hashes it offered
feed web3 good 31 lie
eq "lie: DONE (its own file has what it sent)" $? 0
check "lie: the listener did not keep the kallsyms" \
    grep -q "session web3 .*a section was not what the agent offered: not kept" \
    "$WORK/l.log"
eq "lie: web3 has only its printk in the cache" "$(ls "$C/id/web3" | wc -l)" 1
feed web3 good 32 1
eq "lie: web3's next send gets no kallsyms from the cache" \
    "$(refs web3 32)" 4
check "lie: that file is the true one" cmp "$f1" "$(out "$OUT" web3 32)"

# ---- resuming a stream that holds references
feed web1 cut 14 1
wait_until $((200 * SLOW)) grep -q "'web1-14'.*lost" "$WORK/l.log"
eq "cut: all five sections by reference" \
    "$(refs web1 14)" 5
TDFEED_REFS=11111 feed web1 resume-replay 14
eq "resume: DONE" $? 0
check "resume: the listener resumed it" \
    grep -q "session web1 'web1-14'.*resumed at offset" "$WORK/l.log"
check "resume: the file is the same" cmp "$f1" "$(out "$OUT" web1 14)"

# ---- old peers: a version 3 feed with this listener
feed web1 good 15
eq "version 3 feed: DONE" $? 0
eq "version 3 feed: nothing by reference" "$(refs web1 15)" 0
check "version 3 feed: the listener answered version 3 (no offer)" \
    grep -q "session web1 'web1-15'.*done after" "$WORK/l.log"
check "version 3 feed: the same file" cmp "$f1" "$(out "$OUT" web1 15)"
stop_listener
# 5 + 3 + 4 + 3 + 4 + 5 hits; 5 + 2 + 1 (damaged) + 2 + 1 misses, all
# kept but the lie
check "the listener's tally: 24 there, 11 not, 10 kept, 1 damaged" \
    grep -q "header cache: 24 sections offered were there, 11 not, 10 kept, 1 damaged" \
    "$WORK/l.log"

# ---- a listener without the cache (version 3 only)
OUT0=$WORK/out0
start_listener "$WORK/l0.log" -d "$OUT0" --no-header-cache $TLS || exit 99
feed web1 good 16 1
eq "no cache: DONE" $? 0
eq "no cache: nothing by reference" "$(refs web1 16)" 0
check "no cache: the same file" cmp "$f1" "$(out "$OUT0" web1 16)"
check "no cache: nothing kept" test ! -e "$OUT0/.tdlisten-cache"
stop_listener

# ---- tdagent: two recordings of one agent
OUTA=$WORK/outa
start_listener "$WORK/la.log" -d "$OUTA" $TLS || exit 99
# N one-byte blocks of dd: raw_syscalls of dd, counted exactly
rec() {
	rm -f "$WORK/pid"
	"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web4.pem" \
	    --key "$P/web4.key" --ca "$P/ca.pem" --name "rec$1" \
	    -e raw_syscalls -F -b 4096 -- sh -c \
	    'echo $$ > '"$WORK/pid"'; exec dd if=/dev/zero of=/dev/null bs=1 count=20000 status=none' \
	    2> "$WORK/agent.$1.err"
	eq "tdagent $1: exits 0" $? 0
	f=$OUTA/$(remote_file "$WORK/agent.$1.err")
	check "tdagent $1: trace-cmd reads its file cleanly" tc_clean "$f"
	"$TDCOUNT" "$f" -p "$(cat "$WORK/pid")" > "$WORK/count.$1" 2>&1
	# 20000 reads and 20000 writes, entry and exit: 80000, plus dd's
	# own start and end (a few dozen)
	n=$(field events < "$WORK/count.$1")
	check "tdagent $1: dd's events are all there ($n)" \
	    test "${n:-0}" -ge 80000 -a "${n:-0}" -lt 80400
	eq "tdagent $1: none marked lost" "$(field missed < "$WORK/count.$1")" 0
	eval "n$1=\$n"
}
rec 1
check "tdagent 1: offered its sections, the listener had none" \
    grep -q "header cache: the listener has 0 of [0-9]* sections offered" \
    "$WORK/agent.1.err"
rec 2
eq "tdagent: both recordings hold the same count of dd's events" "$n2" "$n1"
cached=$(du -bc "$OUTA"/.tdlisten-cache/shared/* \
    "$OUTA"/.tdlisten-cache/id/web4/* | tail -1 | cut -f1)
n=$(ls "$OUTA"/.tdlisten-cache/shared/* "$OUTA"/.tdlisten-cache/id/web4/* | wc -l)
check "tdagent 2: the listener had all $n, $cached bytes, not sent again" \
    grep -q "header cache: the listener has $n of $n sections offered ($cached bytes not sent)" \
    "$WORK/agent.2.err"
b1=$(sed -n "s/.*'rec1'.*: done after .* pages, \([0-9]*\) bytes,.*/\1/p" "$WORK/la.log")
b2=$(sed -n "s/.*'rec2'.*: done after .* pages, \([0-9]*\) bytes,.*/\1/p" "$WORK/la.log")
echo "# tdagent: first recording $b1 bytes received, second $b2"
sed -n 's/^/# /; /MB sent/p' "$WORK/agent.1.err" "$WORK/agent.2.err"
check "tdagent 2: fewer bytes received than for the first" \
    test "$b2" -lt "$b1"

# ---- issue 31, row 10: web3 offers the true hashes and sends another
# kallsyms, 40 times in a row: each is written into the cache and thrown
# away; past 128 MiB within 60 s (TD_HCACHE_WRITE_MAX) no more is
# written for web3, while web4's next recording still gets every section
# from the cache, its count exact
# (the window is the listener's, from web3's first write: every feed that
# ended within 60 s of the loop's start wrote inside it.  Under valgrind
# the feeds are slow enough that fewer than 128 MiB may be offered in that
# window: then the cap is not reached and is judged by the plain and ASan
# runs, and said so)
thrown_now() {
	grep -c "session web3 .*a section was not what the agent offered: not kept" "$WORK/la.log"
}
t0=$(date +%s)
early=0 early_feeds=0
i=0
while [ $i -lt 40 ]; do
	feed web3 good $((100 + i)) lie || fail "lie $i: not DONE"
	i=$((i + 1))
	if [ $(($(date +%s) - t0)) -lt 60 ]; then
		early=$(thrown_now)
		early_feeds=$i
	fi
done
thrown=$(thrown_now)
refused=$(grep -c "session web3 .*header cache: section 19 not kept: 'web3' had [0-9]* bytes written within 60 s (at most 134217728)" "$WORK/la.log")
ks=$(trace-cmd dump --kallsyms -i "$WORK/src.dat" 2>/dev/null | wc -c)
echo "# row 10: $thrown kallsyms of about $ks bytes written and thrown away, $refused refused; $early_feeds feeds in the first 60 s, $early written"
eq "row 10: every lie either written and thrown away or refused" \
    $((thrown + refused)) 40
check "row 10: at most 128 MiB written for web3 within 60 s ($early x $ks bytes)" \
    test $((early * ks)) -le 134217728
if [ $((early_feeds * ks)) -gt 134217728 ]; then
	check "row 10: the cache stopped writing for web3 ($refused refused)" \
	    test "$refused" -ge 1
else
	echo "# row 10: only $early_feeds feeds in 60 s (under 128 MiB): the cap was not reached in this run, not judged here"
	[ "${TD_VALGRIND:-0}" != 0 ] ||
	    fail "row 10: $early_feeds feeds in 60 s outside valgrind: too slow to reach the cap"
fi
rec 3
eq "tdagent 3: the same count of dd's events" "$n3" "$n1"
eq "tdagent 3: the listener had all its sections, as for tdagent 2" \
    "$(grep -o 'header cache: the listener has .*' "$WORK/agent.3.err")" \
    "$(grep -o 'header cache: the listener has .*' "$WORK/agent.2.err")"
stop_listener
finish
