#!/bin/sh
# End-to-end: a TLS failure names its cause and its fix, not only
# OpenSSL's words (issue 28): whose certificate, which date, "the
# listener does not speak TLS: --insecure, or the HTTP port?".  The
# certificates are made here: expired ones with openssl ca -startdate
# -enddate (no faked clock), another CA's with tdcert.
. "$(dirname "$0")/e2e-lib.sh"
need_tracefs
P=$WORK/pki
pki "$P" web1 || { echo "FAIL: cannot make certificates"; exit 99; }
pki "$WORK/other" rogue || { echo "FAIL: cannot make the other CA"; exit 99; }

# old NAME EXT: a certificate of the test CA valid in January 2020 only,
# as P/NAME.pem, .key (EXT: agent or listener)
mkdir "$WORK/ca"
: > "$WORK/ca/index.txt"
echo 01 > "$WORK/ca/serial"
cat > "$WORK/ca.cnf" <<EOF
[ca]
default_ca = td
[td]
database = $WORK/ca/index.txt
serial = $WORK/ca/serial
new_certs_dir = $WORK/ca
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
[agent]
extendedKeyUsage = clientAuth
basicConstraints = CA:FALSE
subjectAltName = DNS:\$ENV::TD_CN
[listener]
extendedKeyUsage = serverAuth
basicConstraints = CA:FALSE
subjectAltName = DNS:localhost,IP:127.0.0.1
EOF
old() {
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -subj "/CN=$1" -keyout "$P/$1.key" -out "$WORK/$1.csr" \
	    2>/dev/null &&
	TD_CN=$1 openssl ca -batch -config "$WORK/ca.cnf" -extensions "$2" \
	    -cert "$P/ca.pem" -keyfile "$P/ca.key" -notext \
	    -startdate 20200101000000Z -enddate 20200201000000Z \
	    -in "$WORK/$1.csr" -out "$P/$1.pem" >/dev/null 2>&1
}
old oldagent agent && old oldlistener listener ||
    { echo "FAIL: cannot make the expired certificates"; exit 99; }

# agent PORT CERT-DIR NAME ERRFILE: a short recording over TLS
agent() {
	"$TDAGENT" -q -h 127.0.0.1 -p "$1" --cert "$2/$3.pem" \
	    --key "$2/$3.key" --ca "$P/ca.pem" -e sched:sched_switch -s 0.2 \
	    2> "$4"
}

start_listener "$WORK/l.log" -d "$WORK/out" --cert "$P/listener.pem" \
    --key "$P/listener.key" --ca "$P/ca.pem" --http 127.0.0.1:0 || exit 99
wait_until $((100 * SLOW)) grep -q "status page and metrics at" "$WORK/l.log"
HPORT=$(sed -n 's|.*status page and metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
    "$WORK/l.log")

# the agent's own certificate expired: said before it connects
n0=$(grep -c "connection from" "$WORK/l.log")
agent "$LPORT" "$P" oldagent "$WORK/a1.err"
eq "an expired agent certificate: exit 1" $? 1
sed 's/^/# /' "$WORK/a1.err"
check "it says whose certificate expired and when, and the fix" grep -q \
    "certificate '$P/oldagent.pem' expired on 2020-02-01 00:00:00 UTC: the listener will refuse it; make a new one (tdcert issue)" \
    "$WORK/a1.err"
eq "it did not connect" "$(grep -c "connection from" "$WORK/l.log")" "$n0"

# ... which the listener, shown it anyway, names with its date
echo | timeout $((10 * SLOW)) openssl s_client -connect "127.0.0.1:$LPORT" \
    -cert "$P/oldagent.pem" -key "$P/oldagent.key" -CAfile "$P/ca.pem" \
    >/dev/null 2>&1
wait_until $((100 * SLOW)) grep -q "certificate has expired" "$WORK/l.log"
check "the listener names the agent's expired certificate and its date" \
    grep -q "certificate verify failed: certificate has expired (the agent's certificate expired on 2020-02-01 00:00:00 UTC: the agent needs a new one (tdcert issue))" \
    "$WORK/l.log"

# a certificate of another CA: OpenSSL says "tlsv1 alert unknown ca"
agent "$LPORT" "$WORK/other" rogue "$WORK/a2.err"
eq "another CA's certificate: exit 1" $? 1
sed 's/^/# /' "$WORK/a2.err"
check "it says the listener does not know its CA, and the fix" grep -q \
    "tlsv1 alert unknown ca (the listener does not know the CA that signed this agent's certificate: issue it from the CA of the listener's --ca (tdcert), or give the listener this CA)" \
    "$WORK/a2.err"
check "the listener says the agent's CA is not its --ca" grep -q \
    "unable to get local issuer certificate (the agent's certificate is not signed by the CA of this listener's --ca" \
    "$WORK/l.log"

# the HTTP port: OpenSSL says "wrong version number"
agent "$HPORT" "$P" web1 "$WORK/a3.err"
eq "the HTTP port: exit 1" $? 1
sed 's/^/# /' "$WORK/a3.err"
check "it says the peer does not speak TLS, and the fix" grep -q \
    "wrong version number (the listener does not speak TLS: --insecure (on both sides), or is that the HTTP port?)" \
    "$WORK/a3.err"

# an agent without TLS (--insecure) at a TLS listener
"$TDAGENT" -q -h 127.0.0.1 -p "$LPORT" --insecure -e sched:sched_switch \
    -s 0.2 2> "$WORK/a5.err"
eq "--insecure at a TLS listener: exit 1" $? 1
sed 's/^/# /' "$WORK/a5.err"
check "the agent asks whether the listener wants TLS" grep -q \
    "(does it want TLS? give --cert, --key and --ca, not --insecure)" \
    "$WORK/a5.err"
wait_until $((100 * SLOW)) grep -q "the agent does not speak TLS" "$WORK/l.log"
check "the listener says the agent does not speak TLS" grep -q \
    "wrong version number (the agent does not speak TLS: --insecure (on both sides), or is that the HTTP port?)" \
    "$WORK/l.log"
stop_listener

# the listener's certificate expired: the agent names it and its date,
# the listener hears the agent's alert and names its own
start_listener "$WORK/l2.log" -d "$WORK/out2" --cert "$P/oldlistener.pem" \
    --key "$P/oldlistener.key" --ca "$P/ca.pem" || exit 99
agent "$LPORT" "$P" web1 "$WORK/a4.err"
eq "an expired listener certificate: exit 1" $? 1
sed 's/^/# /' "$WORK/a4.err"
check "the agent names the listener's certificate and its date" grep -q \
    "certificate verify failed: certificate has expired (the listener's certificate expired on 2020-02-01 00:00:00 UTC: the listener needs a new one (tdcert issue))" \
    "$WORK/a4.err"
wait_until $((100 * SLOW)) grep -q "alert certificate expired" "$WORK/l2.log"
check "the listener names its own certificate and its date" grep -q \
    "sslv3 alert certificate expired (this listener's certificate expired on 2020-02-01 00:00:00 UTC: it needs a new one (tdcert issue))" \
    "$WORK/l2.log"
stop_listener

finish
