#!/bin/bash
# bench/instr.sh: load-independent figures of two trees, before and after:
# instructions (callgrind's Ir) and peak RSS, for a table of
# before / after / ratio.  See bench/README.md, "Before and after the
# seam (#12)", "Load-independent: instructions and peak RSS".
#
#	sudo bench/instr.sh [--runs R] [--poke N] [--dd N] [--storm N] [--keep]
#	    [--only cg|rss] [--scen "SCENARIO..."] [--append] BEFORE_TREE
#	    AFTER_TREE
#
# --append adds its runs to the results already in the output directory
# (reusing its src.dat files) and prints the table of them all.
#
# Each tree must be built (sh scripts/build.sh build); the script makes the
# test tools it needs (tests/tdload, tests/tdpoke) in its build/ and copies
# the binaries to a directory of its own, so a rebuild cannot change them
# mid-run.  Every agent talks only to the listener of its own tree.
#
# Scenarios (each R times per tree, R = 3 by default, the trees alternating
# run by run):
#
#   load-tcp, load-tls  tdlisten receives one fixed recording from
#                       tests/tdload -n 1 (plain TCP with --insecure, or
#                       TLS); the recording, src.dat, is made once with the
#                       BEFORE tree's tdagent (dd, N blocks, -e sched -e
#                       raw_syscalls) and replayed to both trees
#   load0-tcp, load0-tls  the same with src0.dat: the same headers (5 MB of
#                       kallsyms...) and almost no pages (tdagent ... -- true);
#                       load less load0 over the MB of pages between them is
#                       the listener's marginal cost per ring MB
#   idle-tcp, idle-tls  tdlisten starts and stops, no connection: its fixed
#                       cost
#   start-tcp, start-tls  tdagent -h ... -e syscalls:sys_enter_getppid -F
#                       -b 65536 -- true: the agent's start-up (connection,
#                       headers, instance) with nothing to stream, and its
#                       end; poke less start is the streaming's marginal
#                       cost
#   poke-tcp, poke-tls  tdagent -h ... -e syscalls:sys_enter_getppid -F
#                       -b 65536 -- tests/tdpoke N 0: N events (1,000,000 by
#                       default) streamed, the ring big enough to hold them
#                       all whatever the speed
#   storm-tcp, storm-tls  peak RSS only (not under callgrind): tdagent -h
#                       ... -e raw_syscalls -F -- dd if=/dev/zero
#                       of=/dev/null bs=1 count=N (2,000,000 by default) at
#                       the kernel's ring size, the storm of bench/run.sh:
#                       the agent's queue fills as fast as the listener
#                       lags, so this one does depend on the load
#
# The listeners run with --tsync-interval 0 (a time-sync round at the start
# and at the end only, not one every 10 s of wall time, which valgrind and
# the load would make vary).  Instructions: every program measured runs
# under valgrind --tool=callgrind (both the agent and the listener at once
# in start-* and poke-*; the agent's privileged parent and its recorder
# are summed, the workload is not measured); Ir per ring MB divides by
# the ring-buffer pages of the listener's file (bench/flysize.c).  Peak
# RSS: the same scenarios natively, /usr/bin/time's %M (wait4's
# ru_maxrss: the largest of the process and its reaped children, as
# bench/run.sh reports it), MB of 2^20 bytes.
#
# Output in bench/out/instr/ (or $INSTR_OUT): results.tsv (one line per
# measure per run), table.txt, and with --keep the callgrind files (one per
# process: cg/TREE-SCENARIO-RUN-ROLE.PID) for callgrind_annotate.
set -euo pipefail

RUNS=3
POKE=1000000
DD=50000
STORM=2000000
KEEP=0
APPEND=0
ONLY="cg rss"
SCENS="idle-tcp idle-tls load0-tcp load0-tls load-tcp load-tls start-tcp start-tls poke-tcp poke-tls storm-tcp storm-tls"
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift 2 ;;
	--poke) POKE=$2; shift 2 ;;
	--dd) DD=$2; shift 2 ;;
	--storm) STORM=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	--append) APPEND=1; shift ;;
	--only) ONLY=$2; shift 2 ;;
	--scen) SCENS=$2; shift 2 ;;
	-*) echo "usage: $0 [--runs R] [--poke N] [--dd N] [--storm N]" \
	    "[--keep] [--only cg|rss] [--scen LIST] [--append] BEFORE_TREE" \
	    "AFTER_TREE" >&2
	    exit 2 ;;
	*) break ;;
	esac
done
[ $# -eq 2 ] || { echo "usage: $0 [options] BEFORE_TREE AFTER_TREE" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "instr.sh: run as root (tracefs)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instr.sh: needs valgrind" >&2; exit 2; }

S=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$S/bench/lib.sh"
OUT=${INSTR_OUT:-$S/bench/out/instr}
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/td-instr.XXXXXX)
# the agent's recorder runs as nobody: it writes its callgrind file here
chmod 755 "$TMP"
LIVE=""
LPID=""
cleanup() {
	local p
	for p in ${LPID:-} $LIVE; do
		kill -TERM "$p" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
die() { echo "instr.sh: $*" >&2; exit 1; }
say() { echo "instr.sh: $*" >&2; }

TREES=(before after)
declare -A TREE REV
TREE[before]=$(cd "$1" && pwd)
TREE[after]=$(cd "$2" && pwd)

# binaries of each tree, copied
for t in "${TREES[@]}"; do
	d=${TREE[$t]}
	[ -x "$d/build/tdagent" ] && [ -x "$d/build/tdlisten" ] ||
	    die "$d: not built (sh scripts/build.sh build)"
	make -C "$d/build" -s tests/tdload tests/tdpoke >/dev/null ||
	    die "$d: cannot make tests/tdload tests/tdpoke"
	REV[$t]=$(git -C "$d" rev-parse --short HEAD)
	git -C "$d" diff --quiet HEAD -- . 2>/dev/null ||
	    REV[$t]="${REV[$t]}+dirty"
	mkdir -p "$TMP/bin-$t"
	cp "$d/build/tdagent" "$d/build/tdlisten" "$d/build/tests/tdload" \
	    "$d/build/tests/tdpoke" "$TMP/bin-$t/"
done
gcc -O2 -Wall -o "$TMP/flysize" "$S/bench/flysize.c" ||
    die "cannot build bench/flysize.c"


PKI=$TMP/pki
pki "$PKI" web1 >"$TMP/pki.log" 2>&1 ||
    die "scripts/tdcert failed: $(tail -3 "$TMP/pki.log")"
chmod -R a+rX "$PKI"

# the fixed recording tdload replays, made once by the first tree's agent
SRC=$OUT/src.dat
SRC0=$OUT/src0.dat
if [ "$APPEND" = 0 ] || [ ! -s "$SRC" ] || [ ! -s "$SRC0" ]; then
	"$TMP/bin-before/tdagent" -q -o "$SRC" -e sched -e raw_syscalls -F \
	    -b 4096 -- dd if=/dev/zero of=/dev/null bs=1 count="$DD" \
	    status=none || die "cannot make $SRC"
	# the same headers and almost no pages: what a replay costs besides
	# them
	"$TMP/bin-before/tdagent" -q -o "$SRC0" -e sched -e raw_syscalls -F \
	    -b 4096 -- true || die "cannot make $SRC0"
fi
SRC_BYTES=$(data_bytes "$SRC") || die "cannot size $SRC"
say "src.dat: $(stat -c %s "$SRC") bytes, $SRC_BYTES bytes of ring pages"
SRC0_BYTES=$(data_bytes "$SRC0") || die "cannot size $SRC0"
say "src0.dat: $(stat -c %s "$SRC0") bytes, $SRC0_BYTES bytes of ring pages"

# wrap MODE TAG: the command prefix that measures one program: callgrind
# (its files $TMP/cg/TAG.PID[.PART]) or /usr/bin/time (its line in
# $TMP/TAG.time).  A forked child starts with its parent's counts in
# callgrind: tdagent's parent dumps its counts (and so zeroes them) when
# it enters priv_fork(), and its recorder, forked right after, counts only
# its own (the few instructions between the two are counted twice).
wrap() {
	if [ "$1" = cg ]; then
		echo valgrind -q --tool=callgrind --dump-before=priv_fork \
		    "--callgrind-out-file=$TMP/cg/$2.%p"
	else
		echo /usr/bin/time -f %M -o "$TMP/$2.time"
	fi
}

# instr_listen T MODE TAG tcp|tls DIR: tree T's tdlisten under MODE's
# wrapper (lib.sh's start_listener runs no wrapper); sets LPORT, LPID
instr_listen() {
	local t=$1 mode=$2 tag=$3 sec=$4 dir=$5
	local -a sec_args

	if [ "$sec" = tcp ]; then
		sec_args=(--insecure)
	else
		sec_args=(--cert "$PKI/listener.pem" --key "$PKI/listener.key"
		    --ca "$PKI/ca.pem")
	fi
	mkdir -p "$dir"
	for _ in 1 2 3 4 5; do
		LPORT=$(free_port) || continue
		# shellcheck disable=SC2046
		$(wrap "$mode" "$tag-listener") "$TMP/bin-$t/tdlisten" \
		    -p "$LPORT" -d "$dir" -v --tsync-interval 0 \
		    "${sec_args[@]}" >"$TMP/$tag.llog" 2>&1 &
		LWRAP=$!
		LIVE="$LIVE $LWRAP"
		# under /usr/bin/time, the listener is its child
		LPID=$LWRAP
		for _ in $(seq 1200); do
			[ "$mode" = cg ] ||
			    LPID=$(pgrep -P "$LWRAP" | head -1 || true)
			[ -n "$LPID" ] &&
			    grep -q "listening on" "$TMP/$tag.llog" 2>/dev/null &&
			    return 0
			kill -0 "$LWRAP" 2>/dev/null || break
			sleep 0.05
		done
		[ -z "$LPID" ] || kill -TERM "$LPID" 2>/dev/null || true
		wait "$LWRAP" 2>/dev/null || true
		LIVE=${LIVE/ $LWRAP/}
	done
	die "cannot start tdlisten ($t): $(tail -3 "$TMP/$tag.llog")"
}

instr_unlisten() {
	kill -TERM "$LPID"
	wait "$LWRAP" || die "the listener exited $?: $(tail -3 "$1")"
	LIVE=${LIVE/ $LWRAP/}
}

# the Ir of the callgrind files $TMP/cg/$1.*
ir_of() {
	local f s=0 n

	for f in "$TMP"/cg/"$1".*; do
		[ -e "$f" ] || die "no callgrind file for $1"
		n=$(awk '/^(summary|totals):/ { print $2; exit }' "$f")
		[ -n "$n" ] || die "no total in $f"
		s=$((s + n))
	done
	echo "$s"
}

# self Ir of the callgrind files $TMP/cg/$1.* by object, in groups: own
# (tdagent, tdlisten), zstd, libc, libevent, ssl (libssl and libcrypto),
# ld.so, other; "GROUP IR" lines
obj_of() {
	awk '
	function obid(s,    id, rest) {
		if (match(s, /^\([0-9]+\)/)) {
			id = substr(s, 1, RLENGTH)
			rest = substr(s, RLENGTH + 2)
			if (rest != "")
				name[FILENAME, id] = rest
			return id
		}
		name[FILENAME, s] = s
		return s
	}
	/^ob=/ { ob = obid(substr($0, 4)); next }
	/^cob=/ { obid(substr($0, 5)); next }
	# the line after calls= is the inclusive cost of the call
	/^calls=/ { skip = 1; next }
	/^[-+*0-9]/ {
		if (skip) { skip = 0; next }
		ir[FILENAME, ob] += $2
		next
	}
	END {
		for (k in ir) {
			n = name[k]
			sub(/.*\//, "", n)
			g = "other"
			if (n ~ /^td(agent|listen)$/) g = "own"
			else if (n ~ /^libzstd/) g = "zstd"
			else if (n ~ /^libc\.so/) g = "libc"
			else if (n ~ /^libevent/) g = "libevent"
			else if (n ~ /^lib(ssl|crypto)/) g = "ssl"
			else if (n ~ /^ld-linux/) g = "ld.so"
			t[g] += ir[k]
		}
		for (g in t)
			print g, t[g]
	}' "$TMP"/cg/"$1".*
}

# peak RSS in MB of /usr/bin/time's file $TMP/$1.time
rss_of() {
	awk 'END { printf "%.2f", $1 / 1024 }' "$TMP/$1.time"
}

# record T MODE SCEN RUN ROLE VALUE
record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$OUT/results.tsv"
}

# keep the callgrind files of TAG
keep_cg() {
	[ "$KEEP" = 1 ] || return 0
	mkdir -p "$OUT/cg"
	cp "$TMP"/cg/"$1".* "$OUT/cg/" 2>/dev/null || true
}

# one_run T MODE SCEN RUN
one_run() {
	local t=$1 mode=$2 scen=$3 run=$4
	local tag=$t-$scen-$run sec=${scen##*-} dir=$TMP/out-$t-$scen-$run f
	local bytes=0
	local -a sec_args

	if [ "$sec" = tcp ]; then
		sec_args=(--insecure)
	else
		sec_args=(--cert "$PKI/web1.pem" --key "$PKI/web1.key"
		    --ca "$PKI/ca.pem")
	fi
	rm -rf "$TMP/cg"
	mkdir -m 1777 "$TMP/cg"
	case $scen in
	idle-*)
		instr_listen "$t" "$mode" "$tag" "$sec" "$dir"
		# its signal handlers come after the "listening on" line: a
		# SIGTERM before them kills it (no callgrind file); 2 s of a
		# listener with nothing to do cost no instructions to speak of
		sleep 2
		instr_unlisten "$TMP/$tag.llog"
		;;
	load-* | load0-*)
		local src=$SRC
		[ "${scen%-*}" = load ] || src=$SRC0
		instr_listen "$t" "$mode" "$tag" "$sec" "$dir"
		if [ "$sec" = tls ]; then
			sec_args=(--cert "$PKI/web1.pem" --key "$PKI/web1.key"
			    --ca "$PKI/ca.pem")
		fi
		"$TMP/bin-$t/tdload" -h 127.0.0.1 -p "$LPORT" \
		    "${sec_args[@]}" -n 1 -q --timeout 600 "$src" \
		    >"$TMP/$tag.load" 2>&1 ||
		    die "$tag: tdload failed: $(tail -3 "$TMP/$tag.load")"
		instr_unlisten "$TMP/$tag.llog"
		;;
	start-* | poke-* | storm-*)
		instr_listen "$t" "$mode" "$tag" "$sec" "$dir"
		local -a rec=(-e syscalls:sys_enter_getppid -F -b 65536 --
		    "$TMP/bin-$t/tdpoke" "$POKE" 0)
		[ "${scen%-*}" != start ] ||
		    rec=(-e syscalls:sys_enter_getppid -F -b 65536 -- true)
		[ "${scen%-*}" != storm ] ||
		    rec=(-e raw_syscalls -F -- dd if=/dev/zero of=/dev/null
		    bs=1 count="$STORM" status=none)
		# shellcheck disable=SC2046
		$(wrap "$mode" "$tag-agent") "$TMP/bin-$t/tdagent" \
		    -h 127.0.0.1 -p "$LPORT" "${sec_args[@]}" "${rec[@]}" \
		    >"$TMP/$tag.aout" 2>"$TMP/$tag.aerr" ||
		    die "$tag: tdagent failed: $(tail -3 "$TMP/$tag.aerr")"
		instr_unlisten "$TMP/$tag.llog"
		;;
	esac
	case $scen in
	idle-*) ;;
	*)
		f=$(find "$dir" -name '*.dat' | head -1)
		[ -n "$f" ] || die "$tag: no file in $dir"
		find "$dir" -name '*incomplete*' | grep -q . &&
		    die "$tag: an incomplete file in $dir"
		# tdagent ... -- true may have no page at all
		bytes=$(data_bytes "$f") || case $scen in
		start-*) bytes=0 ;;
		*) die "$tag: cannot size $f" ;;
		esac
		;;
	esac
	if [ "$mode" = cg ]; then
		local role g n
		record "$t" ir "$scen" "$run" listener "$(ir_of "$tag-listener")"
		case $scen in
		start-* | poke-*)
			record "$t" ir "$scen" "$run" agent \
			    "$(ir_of "$tag-agent")"
			record "$t" ir "$scen" "$run" agent-files \
			    "$(find "$TMP/cg" -name "$tag-agent.*" | wc -l)"
			;;
		esac
		for role in listener agent; do
			ls "$TMP/cg/$tag-$role".* >/dev/null 2>&1 || continue
			obj_of "$tag-$role" | while read -r g n; do
				record "$t" ir "$scen" "$run" "$role:$g" "$n"
			done
		done
		keep_cg "$tag-listener"
		keep_cg "$tag-agent"
	else
		record "$t" rss "$scen" "$run" listener "$(rss_of "$tag-listener")"
		case $scen in
		start-* | poke-* | storm-*)
			record "$t" rss "$scen" "$run" agent \
			    "$(rss_of "$tag-agent")" ;;
		esac
	fi
	if [ "$mode" = cg ]; then
		record "$t" ir "$scen" "$run" ring-bytes "$bytes"
	else
		record "$t" rss "$scen" "$run" ring-bytes "$bytes"
	fi
	rm -rf "$dir"
}

if [ "$APPEND" = 0 ]; then
	: >"$OUT/results.tsv"
	: >"$OUT/head.txt"
fi
{
	echo "# bench/instr.sh $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r)," \
	    "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# before ${TREE[before]} ${REV[before]}; after ${TREE[after]} ${REV[after]}"
	echo "# runs $RUNS, poke $POKE, dd $DD, storm $STORM, ring bytes: src.dat" \
	    "$SRC_BYTES, src0.dat $SRC0_BYTES; $ONLY: $SCENS"
} >>"$OUT/head.txt"
for run in $(seq "$RUNS"); do
	order="before after"
	[ $((run % 2)) = 1 ] || order="after before"
	for mode in $ONLY; do
		for scen in $SCENS; do
			for t in $order; do
				# the storm depends on the load: no callgrind
				[ "$mode:${scen%-*}" != cg:storm ] || continue
				say "run $run: $mode $scen $t ($(cut -d' ' -f1 /proc/loadavg))"
				one_run "$t" "$mode" "$scen" "$run"
			done
		done
	done
done

# the table: median [min..max] of each figure, and after/before of medians
awk -F'\t' -v srcb="$SRC_BYTES" -v src0b="$SRC0_BYTES" "$BENCH_AWK_STATS"'
function key(t, m, s, r) { return t SUBSEP m SUBSEP s SUBSEP r }
{
	v[$1, $2, $3, $4, $5] = $6
	if (!(($2, $3) in seen)) { seen[$2, $3] = 1; ord[++no] = $2 SUBSEP $3 }
	runs[$4] = 1
}
function fig(t, m, s, role, per,    r, n, a, x, b) {
	n = 0
	for (r in runs) {
		if (!((t, m, s, r, role) in v))
			continue
		x = v[t, m, s, r, role]
		sec = substr(s, index(s, "-") + 1)
		b = s ~ /^load-/ ? srcb : s ~ /^load0-/ ? src0b : v[t, m, s, r, "ring-bytes"]
		if (per == "idle") {
			if (!((t, m, "idle-" sec, r, "listener") in v))
				continue
			x = x - v[t, m, "idle-" sec, r, "listener"]
		}
		# the marginal cost: less the same without (almost) pages
		if (per == "load0") {
			if (!((t, m, "load0-" sec, r, role) in v))
				continue
			x = x - v[t, m, "load0-" sec, r, role]
			b = b - src0b
		}
		if (per == "start") {
			if (!((t, m, "start-" sec, r, role) in v))
				continue
			x = x - v[t, m, "start-" sec, r, role]
			b = b - v[t, m, "start-" sec, r, "ring-bytes"]
		}
		if (role == "ring-bytes")
			x = x / 1048576
		if (per != "")
			x = x / (b / 1048576)
		a[++n] = x
	}
	if (n == 0)
		return ""
	sort(a, n)
	med_[t] = med(a, n)
	min_[t] = a[1]
	max_[t] = a[n]
	return n
}
function fmt(x, m) {
	if (m == "rss" || m == "mb")
		return sprintf("%.2f", x)
	if (x >= 1e7)
		return sprintf("%.1f M", x / 1e6)
	return sprintf("%.3f M", x / 1e6)
}
function row(label, m, s, role, per,    nb, na, sb, sa) {
	fm = role == "ring-bytes" ? "mb" : m
	nb = fig("before", m, s, role, per)
	if (nb == "") return
	sb = sprintf("%s [%s..%s]", fmt(med_["before"], fm), fmt(min_["before"], fm), fmt(max_["before"], fm))
	spb = (max_["before"] - min_["before"]) / med_["before"] * 100
	na = fig("after", m, s, role, per)
	if (na == "") return
	sa = sprintf("%s [%s..%s]", fmt(med_["after"], fm), fmt(min_["after"], fm), fmt(max_["after"], fm))
	spa = (max_["after"] - min_["after"]) / med_["after"] * 100
	printf "%-40s %-32s %-32s %6.3f  %4.1f%% %4.1f%%\n", label, sb, sa, med_["after"] / med_["before"], spb, spa
}
END {
	printf "%-40s %-32s %-32s %6s  %s\n", "figure: median [min..max]", "before", "after", "a/b", "spread b, a"
	print "instructions (callgrind Ir)"
	row("listener idle, TCP: start+stop", "ir", "idle-tcp", "listener", "")
	row("listener idle, TLS: start+stop", "ir", "idle-tls", "listener", "")
	row("listener tdload src0 TCP: total", "ir", "load0-tcp", "listener", "")
	row("listener tdload src0 TLS: total", "ir", "load0-tls", "listener", "")
	row("listener tdload TCP: total", "ir", "load-tcp", "listener", "")
	row("listener tdload TCP: (-idle) per MB", "ir", "load-tcp", "listener", "idle")
	row("listener tdload TCP: (-src0) per MB", "ir", "load-tcp", "listener", "load0")
	row("listener tdload TLS: total", "ir", "load-tls", "listener", "")
	row("listener tdload TLS: (-idle) per MB", "ir", "load-tls", "listener", "idle")
	row("listener tdload TLS: (-src0) per MB", "ir", "load-tls", "listener", "load0")
	row("agent start TCP (-- true): total", "ir", "start-tcp", "agent", "")
	row("agent start TLS (-- true): total", "ir", "start-tls", "agent", "")
	row("listener, agent start TCP: total", "ir", "start-tcp", "listener", "")
	row("listener, agent start TLS: total", "ir", "start-tls", "listener", "")
	row("agent poke TCP: total", "ir", "poke-tcp", "agent", "")
	row("agent poke TCP: per ring MB", "ir", "poke-tcp", "agent", "mb")
	row("agent poke TCP: (-start) per ring MB", "ir", "poke-tcp", "agent", "start")
	row("agent poke TLS: total", "ir", "poke-tls", "agent", "")
	row("agent poke TLS: per ring MB", "ir", "poke-tls", "agent", "mb")
	row("agent poke TLS: (-start) per ring MB", "ir", "poke-tls", "agent", "start")
	row("listener, poke TCP: per ring MB", "ir", "poke-tcp", "listener", "mb")
	row("listener, poke TCP: (-start) per ring MB", "ir", "poke-tcp", "listener", "start")
	row("listener, poke TLS: per ring MB", "ir", "poke-tls", "listener", "mb")
	row("listener, poke TLS: (-start) per ring MB", "ir", "poke-tls", "listener", "start")
	row("poke TCP: ring MB (callgrind runs)", "ir", "poke-tcp", "ring-bytes", "")
	row("poke TLS: ring MB (callgrind runs)", "ir", "poke-tls", "ring-bytes", "")
	print "self Ir by object (own: tdagent or tdlisten itself)"
	ns = split("load-tcp load-tls start-tcp start-tls poke-tcp poke-tls", sc, " ")
	ng = split("own zstd libc libevent ssl ld.so other", gr, " ")
	for (i = 1; i <= ns; i++)
		for (rr = 1; rr <= 2; rr++) {
			ro = rr == 1 ? "listener" : "agent"
			for (j = 1; j <= ng; j++)
				row("  " sc[i] " " ro ": " gr[j], "ir", sc[i], ro ":" gr[j], "")
		}
	print "peak RSS MB (native)"
	row("listener idle TCP", "rss", "idle-tcp", "listener", "")
	row("listener idle TLS", "rss", "idle-tls", "listener", "")
	row("listener tdload src0 TCP", "rss", "load0-tcp", "listener", "")
	row("listener tdload src0 TLS", "rss", "load0-tls", "listener", "")
	row("listener tdload TCP", "rss", "load-tcp", "listener", "")
	row("listener tdload TLS", "rss", "load-tls", "listener", "")
	row("agent start TCP", "rss", "start-tcp", "agent", "")
	row("agent start TLS", "rss", "start-tls", "agent", "")
	row("listener, agent start TCP", "rss", "start-tcp", "listener", "")
	row("listener, agent start TLS", "rss", "start-tls", "listener", "")
	row("agent poke TCP", "rss", "poke-tcp", "agent", "")
	row("agent poke TLS", "rss", "poke-tls", "agent", "")
	row("listener, poke TCP", "rss", "poke-tcp", "listener", "")
	row("listener, poke TLS", "rss", "poke-tls", "listener", "")
	row("agent storm TCP (load-dependent)", "rss", "storm-tcp", "agent", "")
	row("agent storm TLS (load-dependent)", "rss", "storm-tls", "agent", "")
	row("listener, storm TCP", "rss", "storm-tcp", "listener", "")
	row("listener, storm TLS", "rss", "storm-tls", "listener", "")
	row("storm TCP: ring MB", "rss", "storm-tcp", "ring-bytes", "")
	row("storm TLS: ring MB", "rss", "storm-tls", "ring-bytes", "")
}' "$OUT/results.tsv" >"$OUT/body.txt"
cat "$OUT/head.txt" "$OUT/body.txt" >"$OUT/table.txt"
cat "$OUT/table.txt"
