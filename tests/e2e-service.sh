#!/bin/sh
# End-to-end: systemd/tdlisten.service and systemd/tdagent-standby.service,
# the units make install puts in place.  systemd-analyze (Debian's systemd package) verifies it with no
# warning and rates its sandbox (security --offline: the exposure level
# must stay "OK" or better: every ProtectX/RestrictX the unit names counts).
# Then its own ExecStart line runs, with the directories systemd would
# give it (STATE_DIRECTORY, CREDENTIALS_DIRECTORY holding the TLS files
# under the names LoadCredential gives them) and only -p changed: a real
# tdagent records through it exactly.  Nothing is installed or started in
# the machine's systemd.  Its control socket (--control in
# RUNTIME_DIRECTORY) answers tdctl.  tdagent-standby.service is verified
# and rated the same way (the exposure of a service that must be root for
# tracefs is printed, not judged).
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
command -v systemd-analyze >/dev/null ||
    skip "systemd-analyze is missing (Debian's systemd package)"
N=2000
UNIT=$WORK/tdlisten.service
sed -e "s|@bindir@|$B|g" "$S/systemd/tdlisten.service.in" > "$UNIT"

systemd-analyze verify --man=no "$UNIT" > "$WORK/verify" 2>&1
eq "systemd-analyze verify: exit 0" $? 0
eq "systemd-analyze verify: no warning" "$(cat "$WORK/verify")" ""
systemd-analyze security --offline=yes --no-pager "$UNIT" \
    > "$WORK/security" 2>&1
level=$(sed -n 's/^.*Overall exposure level for .*: \([0-9.]*\) \([A-Z]*\).*$/\1 \2/p' \
    "$WORK/security")
echo "# exposure: ${level:-?}"
case ${level#* } in
OK|SAFE) ok "systemd-analyze security: exposure $level" ;;
*) fail "systemd-analyze security: exposure '${level:-none}'"
   sed 's/^/# /' "$WORK/security" ;;
esac
SUNIT=$WORK/tdagent-standby.service
sed -e "s|@bindir@|$B|g" "$S/systemd/tdagent-standby.service.in" > "$SUNIT"
systemd-analyze verify --man=no "$SUNIT" > "$WORK/sverify" 2>&1
eq "tdagent-standby.service: systemd-analyze verify: exit 0" $? 0
eq "tdagent-standby.service: no warning" "$(cat "$WORK/sverify")" ""
systemd-analyze security --offline=yes --no-pager "$SUNIT" \
    > "$WORK/ssecurity" 2>&1
echo "# tdagent-standby.service exposure: $(sed -n 's/^.*Overall exposure level for .*: \([0-9.]* [A-Z]*\).*$/\1/p' "$WORK/ssecurity")"
for d in "ExecStart=$B/tdagent --standby -c /etc/tracedock/agent.conf" \
    NoNewPrivileges=yes ProtectSystem=strict \
    "CapabilityBoundingSet=CAP_SETUID CAP_SETGID CAP_SYSLOG CAP_DAC_OVERRIDE"; do
	check "tdagent-standby.service says $d" grep -qx "$d" "$SUNIT"
done
# the file it reads parses (an unknown key would not)
printf 'host 127.0.0.1\nport 1\ninsecure yes\nallow-events sched\nmax-buffer 1024\nmax-duration 60\n' \
    > "$WORK/agent.conf"
"$TDAGENT" --standby -c "$WORK/agent.conf" --bogus 2> "$WORK/sbad.err"
eq "tdagent --standby: a usage error exits 2" $? 2
printf 'nosuchkey 1\n' > "$WORK/bad.conf"
"$TDAGENT" --standby -c "$WORK/bad.conf" 2> "$WORK/sbad.err"
eq "tdagent --standby: an unknown key exits 2" $? 2
check "tdagent --standby: names the file and line" \
    grep -q "bad.conf:1: unknown key 'nosuchkey'" "$WORK/sbad.err"

for d in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes \
    "CapabilityBoundingSet=" StateDirectory=tdlisten \
    "LoadCredential=listener.key:/etc/tracedock/listener.key"; do
	check "the unit says $d" grep -qx "$d" "$UNIT"
done

# ExecStart, its continued lines joined, systemd's variables set
exec_line=$(awk '/^ExecStart=/ { on = 1; sub(/^ExecStart=/, "") }
    on { l = $0; c = sub(/\\$/, "", l); printf "%s ", l; if (!c) exit }' "$UNIT")
echo "# ExecStart: $exec_line"
STATE_DIRECTORY=$WORK/state
CREDENTIALS_DIRECTORY=$WORK/cred
RUNTIME_DIRECTORY=$WORK/run
mkdir -p "$STATE_DIRECTORY" "$CREDENTIALS_DIRECTORY" "$RUNTIME_DIRECTORY"
chmod 700 "$STATE_DIRECTORY"
P=$WORK/pki
pki "$P" web1 || { echo "FAIL: cannot make certificates"; exit 99; }
cp "$P/listener.pem" "$P/listener.key" "$P/ca.pem" "$CREDENTIALS_DIRECTORY/"
check "the unit reads options from an EnvironmentFile" \
    grep -qx 'EnvironmentFile=-/etc/default/tdlisten' "$UNIT"
check "... and gives them to tdlisten" grep -q ' \$TDLISTEN_OPTS$' "$UNIT"
eq "the unit is Type=notify" "$(sed -n 's/^Type=//p' "$UNIT")" notify
# what /etc/default/tdlisten would say
TDLISTEN_OPTS="--resume-wait 30"
# the notifications systemd would get: a datagram socket of our own
NOTIFY_SOCKET=$WORK/notify
export NOTIFY_SOCKET
perl -MIO::Socket::UNIX -MSocket -e '
    $| = 1;
    my $s = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $ARGV[0])
	or die "notify socket: $!";
    while (defined $s->recv(my $m, 4096)) { $m =~ s/\n/ /g; print "$m\n"; }' \
    "$NOTIFY_SOCKET" > "$WORK/notify.log" 2>&1 &
NPID=$!
wait_until 100 test -S "$NOTIFY_SOCKET"
set -f
# shellcheck disable=SC2086
set -- $exec_line
set +f
check "ExecStart runs the built tdlisten" test "$1" = "$B/tdlisten"
shift
args=""
while [ $# -gt 0 ]; do
	case $1 in
	-p) shift; port=$1 ;;
	# EnvironmentFile's options, split on spaces as systemd does
	'$TDLISTEN_OPTS') args="$args $TDLISTEN_OPTS" ;;
	*) a=$(echo "$1" | sed -e "s|\${STATE_DIRECTORY}|$STATE_DIRECTORY|" \
	       -e "s|\${CREDENTIALS_DIRECTORY}|$CREDENTIALS_DIRECTORY|" \
	       -e "s|\${RUNTIME_DIRECTORY}|$RUNTIME_DIRECTORY|" \
	       -e "s|^/etc/tracedock/|$P/|")
	   args="$args $a" ;;
	esac
	shift
done
eq "ExecStart listens on port 4000" "${port:-}" 4000
check "ExecStart reads the CRL itself (a reload renews it)" \
    grep -q -- '--crl /etc/tracedock/crl.pem' "$UNIT"
# shellcheck disable=SC2086
start_listener "$WORK/l.log" $args || exit 99
check "the EnvironmentFile's options reach tdlisten" sh -c \
    "tr '\\0' ' ' < /proc/$LPID/cmdline | grep -q -- '--resume-wait 30 '"
wait_until $((100 * SLOW)) grep -q "READY=1" "$WORK/notify.log"
check "Type=notify: READY=1 once it listens" \
    grep -q "^READY=1" "$WORK/notify.log" || sed 's/^/# notify: /' "$WORK/notify.log"

# tdpoke-static: never sanitized (ASan's runtime makes getppid calls)
"$TDAGENT" -h 127.0.0.1 -p "$LPORT" --cert "$P/web1.pem" \
    --key "$P/web1.key" --ca "$P/ca.pem" --name svc \
    -e syscalls:sys_enter_getppid -F -- "$B/tests/tdpoke-static" $N 0 \
    2> "$WORK/agent.err"
eq "tdagent exits 0" $? 0
eq "the control socket is in RUNTIME_DIRECTORY, mode 0660" \
    "$(stat -c %a "$RUNTIME_DIRECTORY/control" 2>&1)" 660
"$B/tdctl" -S "$RUNTIME_DIRECTORY/control" list > "$WORK/list" 2>&1
eq "tdctl list: exit 0, no standby agent" "$?:$(cat "$WORK/list")" "0:"
f=$STATE_DIRECTORY/$(remote_file "$WORK/agent.err")
check "the file is in STATE_DIRECTORY, under the agent's identity" \
    sh -c "test -f '$f' && test '$(dirname "$f")' = '$STATE_DIRECTORY/web1'"
check "trace-cmd reads it cleanly" tc_clean "$f"
"$TDCOUNT" "$f" > "$WORK/c"
eq "exactly the $N getppid calls" "$(field events < "$WORK/c")" $N
eq "none lost" "$(field missed < "$WORK/c")" 0
eq "no file below STATE_DIRECTORY is open to group or others" \
    "$(find "$STATE_DIRECTORY" -perm /077 -type f | wc -l)" 0
# ExecReload: tdctl reload, which tells the outcome (a failed reload
# fails systemctl reload)
reload_line=$(sed -n 's/^ExecReload=//p' "$UNIT" |
    sed "s|\${RUNTIME_DIRECTORY}|$RUNTIME_DIRECTORY|")
check "ExecReload runs the built tdctl reload" sh -c \
    "test '$reload_line' = '$B/tdctl -S $RUNTIME_DIRECTORY/control reload'"
# shellcheck disable=SC2086
$reload_line > "$WORK/reload" 2>&1
eq "ExecReload: exit 0, reloaded" "$?:$(cut -c1-9 "$WORK/reload")" "0:reloaded:"
check "a reload: RELOADING=1, then READY=1 again" sh -c \
    "grep -A1 '^RELOADING=1 MONOTONIC_USEC=[0-9]*$' '$WORK/notify.log' | tail -1 | grep -qx READY=1"
rm "$CREDENTIALS_DIRECTORY/ca.pem"
# shellcheck disable=SC2086
$reload_line > "$WORK/reload" 2>&1
eq "ExecReload with the CA gone: exit 1" $? 1
check "... saying why" grep -q "reload failed.*ca.pem" "$WORK/reload"
stop_listener
check "SIGTERM: STOPPING=1" grep -qx "STOPPING=1" "$WORK/notify.log"
kill $NPID 2>/dev/null
wait $NPID 2>/dev/null
unset NOTIFY_SOCKET

# stderr as the journal (JOURNAL_STREAM names it): each line says its
# priority, so journalctl -p works; a start-up error is <2> (fatal): a
# port in use, held by a listener of our own
start_listener "$WORK/l2.log" --insecure -d "$WORK/out2" || exit 99
: > "$WORK/journal"
JOURNAL_STREAM=$(stat -c %d:%i "$WORK/journal") timeout 20 "$TDLISTEN" -p "$LPORT" \
    --insecure -d "$WORK/jout" 2>> "$WORK/journal"
eq "a port in use: exit 1" $? 1
check "journal: an info line is <6>" grep -q '^<6>tdlisten: tracedock' "$WORK/journal"
check "journal: a warning is <4>" grep -q '^<4>tdlisten: --insecure' "$WORK/journal"
check "journal: the start-up error is <2>" \
    grep -q "^<2>tdlisten: cannot listen on port $LPORT" "$WORK/journal" ||
    sed 's/^/# journal: /' "$WORK/journal"
check "journal: every line has its priority" sh -c \
    "! grep -qv '^<[0-7]>' '$WORK/journal'"
JOURNAL_STREAM=1:1 timeout 20 "$TDLISTEN" -p "$LPORT" --insecure -d "$WORK/jout" \
    2> "$WORK/nojournal"
check "JOURNAL_STREAM not stderr's: no prefixes" sh -c \
    "! grep -q '^<[0-7]>' '$WORK/nojournal'"
stop_listener

finish
