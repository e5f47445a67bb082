# shellcheck shell=bash disable=SC2034,SC2153,SC2154
# bench/stream.sh: the streaming half of bench/run.sh, sourced by it (not a
# program of its own: it uses run.sh's build, calibration and helpers).
#
# The same dd storm is recorded over loopback by three agent/listener pairs,
# a fresh listener for every run:
#
#	tdagent-tls    tdagent -h -> tdlisten, TLS 1.3 (v7 zstd, the defaults)
#	tdagent-tcp    the same, both sides --insecure (plain TCP)
#	trace-cmd-net  trace-cmd record -N -t -> trace-cmd listen (TCP)
#
# Both listeners run under /usr/bin/time from their start to their exit, so
# their CPU is everything they did for the recording.  trace-cmd listen
# forks a child per client, which forks a reader per CPU; each parent reaps
# its children, so the times /usr/bin/time reports (wait4) include the whole
# tree.  The script checks this: once the file is complete and the
# per-client child is gone, it reads utime+stime+cutime+cstime of the
# listener from /proc/PID/stat just before stopping it.  See
# bench/README.md, "Streaming".

STREAM_TOOLS=(tdagent-tls tdagent-tcp trace-cmd-net)
CLK_TCK=$(getconf CLK_TCK)

# A CA, the listener's certificate and an agent's (web1), made afresh.
stream_pki() {
	PKI=$TMP/pki
	pki "$PKI" web1 >>"$OUT/build.log" 2>&1 ||
	    die "scripts/tdcert failed, see $OUT/build.log"
}

# Start the listener of TOOL under /usr/bin/time, writing into directory
# $2, its log in $3 and its times in $4; sets LPORT, LPID, LISTENER_TIME.
stream_listen() {
	local tool=$1 dir=$2 log=$3 tf=$4 i
	local -a cmd extra

	read -r -a extra <<<"$TDLISTEN_ARGS"

	for _ in 1 2 3 4 5; do
		LPORT=$(free_port) || continue
		case $tool in
		tdagent-tls)
			cmd=("$TDLISTEN" -p "$LPORT" -d "$dir" -v
			    --cert "$PKI/listener.pem" --key "$PKI/listener.key"
			    --ca "$PKI/ca.pem" ${extra[@]+"${extra[@]}"})
			;;
		tdagent-tcp)
			cmd=("$TDLISTEN" -p "$LPORT" -d "$dir" -v --insecure
			    ${extra[@]+"${extra[@]}"})
			;;
		trace-cmd-net)
			cmd=(env ${SHIM:+LD_PRELOAD=$SHIM} trace-cmd listen
			    -p "$LPORT" -d "$dir")
			;;
		esac
		/usr/bin/time -f '%e %U %S %M' -o "$tf" "${cmd[@]}" \
		    >"$log" 2>&1 &
		LISTENER_TIME=$!
		LPID=""
		for i in $(seq 100); do
			kill -0 "$LISTENER_TIME" 2>/dev/null || break
			LPID=$(pgrep -P "$LISTENER_TIME" | head -1 || true)
			[ -z "$LPID" ] || break
			sleep 0.05
		done
		[ -n "$LPID" ] && wait_listening "$LPORT" "$LPID" && return 0
		[ -z "$LPID" ] || kill -TERM "$LPID" 2>/dev/null || true
		wait "$LISTENER_TIME" 2>/dev/null || true
		LISTENER_TIME=""
	done
	cat "$log" >&2
	die "cannot start the listener of $tool"
}

# CPU seconds of process $1 and the children it reaped, from /proc.
proc_cpu() {
	awk -v hz="$CLK_TCK" '{
	    # the command name (field 2) has no spaces here
	    printf "%.2f", ($14 + $15 + $16 + $17) / hz }' "/proc/$1/stat"
}

# Run the storm once, streamed: stream_one TOOL BLOCKS RUN.  Appends a line
# to $OUT/stream.tsv.
stream_one() {
	local tool=$1 n=$2 tag=$3
	local ldir=$OUT/stream-$tool rtf=$TMP/rtime ltf=$TMP/ltime
	local ef=$OUT/stream-$tool.err of=$OUT/stream-$tool.out
	local llog=$OUT/stream-$tool.listener.log
	local pidf=$TMP/dd.pid cf=$TMP/count mode=tdlisten
	local tpid t0 t1 tc0 tc1 load f rel ready texit tfile seen fsize i lproc
	local b0 wire
	local -a cmd

	rm -rf "$ldir"
	mkdir -p "$ldir"
	rm -f "$rtf" "$ltf" "$pidf"
	if [ "$tool" = trace-cmd-net ]; then
		mode=trace-cmd
		# another trace-cmd (someone else's) would share the ring
		if pgrep -x trace-cmd >/dev/null; then
			warn "another trace-cmd is running; waiting up to 60 s"
			for _ in $(seq 60); do
				pgrep -x trace-cmd >/dev/null || break
				sleep 1
			done
		fi
	fi
	lock_take
	load=$(cut -d' ' -f1 /proc/loadavg)
	b0=$(lo_bytes)
	stream_listen "$tool" "$ldir" "$llog" "$ltf"
	case $tool in
	tdagent-tls)
		cmd=("$TDAGENT" -h 127.0.0.1 -p "$LPORT" -e raw_syscalls
		    --cert "$PKI/web1.pem" --key "$PKI/web1.key"
		    --ca "$PKI/ca.pem")
		;;
	tdagent-tcp)
		cmd=("$TDAGENT" -h 127.0.0.1 -p "$LPORT" -e raw_syscalls
		    --insecure)
		;;
	trace-cmd-net)
		cmd=(env ${SHIM:+LD_PRELOAD=$SHIM} stdbuf -oL trace-cmd record
		    -N "127.0.0.1:$LPORT" -t -e raw_syscalls)
		;;
	esac
	/usr/bin/time -f '%e %U %S %M' -o "$rtf" "${cmd[@]}" >"$of" 2>"$ef" &
	tpid=$!
	LIVE_TIME=$tpid
	wait_ready "$tpid" "$tool" "$of" || {
		cat "$ef" >&2
		die "$tool did not start recording"
	}
	LIVE=$RPID
	t0=$(date +%s.%N)
	# the same command line as the calibration's: the same constant
	sh -c 'echo $$ > "$1"; exec dd if=/dev/zero of=/dev/null bs=1 count="$2"' \
	    sh "$pidf" "$n" 2>"$TMP/dd.err"
	t1=$(date +%s.%N)
	# fileready sends the SIGINT and times the recorder's exit and the
	# complete file from it
	ready=$("$TMP/fileready" "$mode" "$ldir" "$RPID" 10 120) ||
	    die "$tool: no complete file in $ldir ($ready)"
	wait "$tpid" || die "$tool failed: $(tail -3 "$ef")"
	LIVE=""
	LIVE_TIME=""
	read -r _ texit _ tfile _ seen _ f <<<"$ready"

	# stop the listener; trace-cmd listen's per-client child must be
	# gone (reaped: its CPU is in the parent's cutime) first
	for i in $(seq 200); do
		[ -z "$(pgrep -P "$LPID" || true)" ] && break
		sleep 0.05
	done
	[ "$i" -lt 200 ] || warn "$tool: the listener still has children"
	lproc=$(proc_cpu "$LPID")
	if [ "$mode" = trace-cmd ]; then
		kill -INT "$LPID"
	else
		kill -TERM "$LPID"
	fi
	wait "$LISTENER_TIME" || die "$tool: the listener failed:" \
	    "$(tail -3 "$llog")"
	LISTENER_TIME=""
	wire=-
	[ "${TD_BENCH_NETNS:-}" != 1 ] || wire=$(($(lo_bytes) - b0))
	lock_drop

	if [ "$mode" = tdlisten ]; then
		rel=$(sed -n "s/.*the listener wrote '\([^']*\)'.*/\1/p" \
		    "$ef" | tail -1)
		[ "$ldir/$rel" = "$f" ] || warn "$tool: the agent names" \
		    "'$rel', the directory holds '$f'"
	fi
	fsize=$(stat -c %s "$f")
	[ "$fsize" = "$seen" ] || warn "$tool: $f had $seen bytes when" \
	    "found complete, $fsize at the end"

	tc0=$(date +%s.%N)
	# at nice 19: someone else may be measuring meanwhile
	nice -n 19 "$TDCOUNT" "$f" -p "$(cat "$pidf")" >"$cf" ||
	    die "tdcount failed on $f"
	tc1=$(date +%s.%N)
	CAPTURED=$(tdcount_get "$cf" events)

	local bytes missed rcpu rrss lcpu lrss lost selfmb
	bytes=$(data_bytes "$f") || die "cannot size the data of $f"
	missed=$(tdcount_get "$cf" missed)
	read -r rcpu rrss < <(awk 'END { print $2 + $3, $4 }' "$rtf")
	read -r lcpu lrss < <(awk 'END { print $2 + $3, $4 }' "$ltf")
	awk -v a="$lcpu" -v b="$lproc" \
	    'BEGIN { exit ((a - b) ^ 2 < 0.0025) ? 0 : 1 }' ||
	    warn "$tool: listener CPU $lcpu s (time), $lproc s" \
	    "(/proc before the signal)"
	if [ "$mode" = tdlisten ]; then
		lost=$(trace-cmd dump --options -i "$f" 2>/dev/null | awk '
		    /^overrun:/ { s += $2 } /^dropped events:/ { s += $3 }
		    END { print s + 0 }')
		selfmb=$(grep '; lost ' "$ef" | tail -1 | grep -o \
		    'cpu[0-9]* [0-9]* events [0-9.]* MB' |
		    awk '{ s += $4 } END { printf "%.1f", s }')
	else
		lost=-	# record -N sends no CPUSTAT to the listener
		selfmb=$(sed -n 's/.*(\([0-9]*\) uncompressed).*/\1/p' \
		    "$llog" | awk '{ s += $1 } END { printf "%.1f", s / 1e6 }')
	fi
	awk -v a="$selfmb" -v b="$bytes" \
	    'BEGIN { exit ((a - b / 1e6) ^ 2 < 0.25) ? 0 : 1 }' ||
	    warn "$tool: the programs say $selfmb MB, the file holds" \
	    "$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB"
	printf '%s\t' "$tool" "$tag" "$CAPTURED" "$EXPECTED" "$missed" "$lost" \
	    "$rcpu" "$rrss" "$lcpu" "$lproc" "$lrss" "$bytes" "$texit" \
	    "$tfile" "$(awk -v a="$t0" -v b="$t1" \
	    'BEGIN { printf "%.2f", b - a }')" "$fsize" "$(awk -v a="$tc0" \
	    -v b="$tc1" 'BEGIN { printf "%.1f", b - a }')" >>"$OUT/stream.tsv"
	printf '%s\t%s\n' "$load" "$wire" >>"$OUT/stream.tsv"
	printf 'bench: %-13s run %s: %s of %s events, %.1f MB data, CPU %s s' \
	    "$tool" "$tag" "$CAPTURED" "$EXPECTED" \
	    "$(awk -v b="$bytes" 'BEGIN { print b / 1e6 }')" "$rcpu"
	printf ' + listener %s s, file ready %s s after SIGINT\n' "$lcpu" \
	    "$tfile"
	if [ "$KEEP" = 0 ]; then
		rm -rf "$ldir"
	fi
	sync
}

# The streaming table, from $OUT/stream.tsv.
stream_table() {
	echo "streamed over loopback: dd if=/dev/zero of=/dev/null bs=1" \
	    "count=$BLOCKS"
	echo "expected $EXPECTED raw_syscalls events of dd's pid (4N+$c1);" \
	    "$REPEAT runs per tool; median [min..max]"
	echo "$(nproc) CPUs, $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC');" \
	    "tree $REV"
	[ -z "$TDLISTEN_ARGS" ] || echo "tdlisten started with: $TDLISTEN_ARGS"
	echo
	awk -F'\t' "$BENCH_AWK_STATS"'
	NR == 1 { next }
	{
		t = $1; k = ++n[t]; mb = $12 / 1e6
		v[t, "capture", k] = $3 / $4
		v[t, "captured", k] = $3
		v[t, "missed", k] = $5
		v[t, "lost", k] = $6
		v[t, "rcpums", k] = $7 * 1000 / mb
		v[t, "rcpu", k] = $7
		v[t, "rrss", k] = $8 / 1024
		v[t, "lcpums", k] = $9 * 1000 / mb
		v[t, "lcpu", k] = $9
		v[t, "lrss", k] = $11 / 1024
		v[t, "mb", k] = mb
		v[t, "ready", k] = $14 - $13
		v[t, "texit", k] = $13
		v[t, "tfile", k] = $14
		v[t, "dd", k] = $15
		v[t, "file", k] = $16 / 1e6
		v[t, "count", k] = $17
		v[t, "load", k] = $18
		v[t, "wire", k] = $19 == "-" ? "-" : $19 / 1e6
		v[t, "wireratio", k] = $19 == "-" ? "-" : $19 / $12
		v[t, "rcpuev", k] = $7 * 1000 / ($4 / 1e6)
		v[t, "lcpuev", k] = $9 * 1000 / ($4 / 1e6)
	}
	END {
		nt = split("tdagent-tls tdagent-tcp trace-cmd-net", tools, " ")
		nm = split("capture captured missed lost rcpums rcpuev rcpu " \
		    "rrss lcpums lcpuev lcpu lrss mb ready texit tfile dd " \
		    "file wire wireratio count load", ms, " ")
		label["capture"] = "capture (captured/expected)"
		label["captured"] = "events of dd captured"
		label["missed"] = "records flagged missed"
		label["lost"] = "kernel lost (overrun+drop)"
		label["rcpums"] = "agent/recorder CPU ms per MB"
		label["rcpu"] = "agent/recorder CPU s"
		label["rrss"] = "agent/recorder peak RSS MB"
		label["lcpums"] = "listener CPU ms per MB"
		label["lcpu"] = "listener CPU s"
		label["lrss"] = "listener peak RSS MB"
		label["mb"] = "ring-buffer data MB"
		label["ready"] = "file ready after exit s"
		label["texit"] = "SIGINT to recorder exit s"
		label["tfile"] = "SIGINT to file ready s"
		label["dd"] = "dd s (under tracing)"
		label["file"] = "output file MB"
		label["load"] = "load average at start"
		label["rcpuev"] = "  ... ms per M dd events"
		label["lcpuev"] = "  ... ms per M dd events"
		label["count"] = "tdcount s (libtracecmd)"
		label["wire"] = "wire MB (loopback, IP)"
		label["wireratio"] = "wire bytes / ring bytes"
		fmt["wire"] = "%.1f"; fmt["wireratio"] = "%.3f"
		fmt["rcpuev"] = fmt["lcpuev"] = "%.1f"
		fmt["count"] = "%.1f"
		fmt["capture"] = "%.4f"; fmt["captured"] = "%d"
		fmt["missed"] = "%d"; fmt["lost"] = "%d"
		fmt["rcpums"] = "%.2f"; fmt["rcpu"] = "%.2f"
		fmt["rrss"] = "%.1f"; fmt["lcpums"] = "%.2f"
		fmt["lcpu"] = "%.2f"; fmt["lrss"] = "%.1f"; fmt["mb"] = "%.1f"
		fmt["ready"] = "%.3f"; fmt["texit"] = "%.3f"
		fmt["tfile"] = "%.3f"; fmt["dd"] = "%.2f"; fmt["file"] = "%.1f"
		fmt["load"] = "%.2f"
		head["tdagent-tls"] = "tdagent->tdlisten TLS"
		head["tdagent-tcp"] = "tdagent->tdlisten TCP"
		head["trace-cmd-net"] = "record -N -> listen"
		noratio["captured"] = noratio["missed"] = noratio["lost"] = 1
		noratio["load"] = noratio["ready"] = 1
		printf "%-29s", "metric"
		for (i = 1; i <= nt; i++)
			printf "  %-30s", head[tools[i]]
		printf "  %7s  %7s\n", "tls/tc", "tcp/tc"
		for (j = 1; j <= nm; j++) {
			m = ms[j]
			printf "%-29s", label[m]
			for (i = 1; i <= nt; i++) {
				t = tools[i]
				c = 0
				for (k = 1; k <= n[t]; k++)
					if (v[t, m, k] != "-")
						a[++c] = v[t, m, k] + 0
				if (c == 0) {
					md[t] = "-"
					printf "  %-30s", "n/a"
					continue
				}
				sort(a, c)
				md[t] = med(a, c)
				f3 = fmt[m] " [" fmt[m] ".." fmt[m] "]"
				cell = sprintf(f3, md[t], a[1], a[c])
				printf "  %-30s", cell
			}
			tc = md["trace-cmd-net"]
			if (m in noratio || tc == "-" || tc <= 0)
				printf "\n"
			else
				printf "  %7.3f  %7.3f\n",
				    md["tdagent-tls"] / tc, md["tdagent-tcp"] / tc
		}
	}' "$OUT/stream.tsv"
}

# The streaming runs and their table.
stream_main() {
	local r k

	stream_pki
	printf '%s\t' tool run captured expected missed lost rec_cpu_s \
	    rec_rss_kb lis_cpu_s lis_proc_cpu_s lis_rss_kb data_bytes \
	    exit_s file_s dd_s file_bytes count_s >"$OUT/stream.tsv"
	printf 'load\twire_bytes\n' >>"$OUT/stream.tsv"
	for r in $(seq "$REPEAT"); do
		# rotate the order so no tool always runs first or last
		for k in 0 1 2; do
			stream_one "${STREAM_TOOLS[$(((k + r - 1) % 3))]}" \
			    "$BLOCKS" "$r"
		done
	done
	echo
	stream_table | tee "$OUT/stream.txt"
}
