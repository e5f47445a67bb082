/*
 * tdlimits.h: every cap on a buffer fed from the network, the disk or the
 * kernel lives here, so that the bounds of the program can be read in one
 * place.  Values are bytes unless the name says otherwise.
 */
#ifndef TD_LIMITS_H
#define TD_LIMITS_H

/* Largest ring-buffer sub-buffer ("page") accepted anywhere. */
#define TD_MAX_PAGE_SIZE	(1024 * 1024)
/* Smallest sub-buffer: the 16-byte page header plus some data. */
#define TD_MIN_PAGE_SIZE	256
/*
 * tdagent's ring per CPU for its own instance when -b is not given (KiB):
 * RING_KB, but all CPUs together at most RING_TOTAL_KB and 1/RING_RAM_DIV
 * of the machine's memory, and never less than the kernel's size for a new
 * instance.  8 MiB holds about 150 ms of a full-rate syscall storm (55 MB/s
 * here): the kernel's 1.4 MiB (25 ms) lost events to one late wake-up of
 * the recorder on a busy 2-CPU machine (bench/README.md, "Concurrent
 * agents").  The kernel allocates the ring per CPU, outside tdagent's RSS.
 */
#define TD_AGENT_RING_KB	8192
#define TD_AGENT_RING_TOTAL_KB	(64 * 1024)
#define TD_AGENT_RING_RAM_DIV	128
/*
 * Room a recording paused by a full disk or its identity's --quota needs
 * before its agent may resume it: less, and the agent is told to come
 * back later at its HELLO, before it sends anything again (it sent the
 * same megabytes over and over, the listener taking a little each time).
 */
#define TD_RESUME_ROOM		(4ull * 1024 * 1024)
/* Most output read from "trace-cmd list -c", and how long it may take. */
#define TD_TCLOCAL_OUT		4096
#define TD_TCLOCAL_MS		3000
/* Most CPUs a recording may declare. */
#define TD_MAX_CPUS		4096
/* Largest metadata section (kallsyms is the big one, ~6 MiB uncompressed). */
#define TD_MAX_SECTION_SIZE	(256u * 1024 * 1024)
/* Largest single option record. */
#define TD_MAX_OPTION_SIZE	(16u * 1024 * 1024)
/* Largest event filter expression. */
#define TD_MAX_FILTER_LEN	4096
/* Most -e arguments. */
#define TD_MAX_EVENT_ARGS	256
/* Pages per compressed chunk of CPU data (trace-cmd 3.1.6 writes 10). */
#define TD_CHUNK_PAGES		10
/* Most a compressed block may claim to expand when read back (x). */
#define TD_MAX_EXPANSION	4096
/* Largest compressed chunk accepted when reading a file back. */
#define TD_MAX_CHUNK_SIZE	(64u * 1024 * 1024)
/* Highest compression level a checkpoint may ask for (writers use 0: fast) */
#define TD_MAX_RESTORE_LEVEL	9
/* Total size of the STRINGS section. */
#define TD_MAX_STRINGS_SIZE	(1024 * 1024)
/*
 * Longest peer identity (from a TLS certificate, used as a directory name),
 * not counting the terminating NUL; 64 is the X.509 limit of a commonName.
 */
#define TD_MAX_IDENTITY_LEN	64

/* Largest payload of one protocol frame (a batch of pages). */
#define TD_MAX_FRAME		(1024 * 1024)
/*
 * tdlisten's TLS read buffer: one read() ahead takes up to this much (4
 * records); held only while undecrypted bytes wait in it.
 */
#define TD_TLS_READ_AHEAD	(64u * 1024)
/*
 * The resynchronisation preamble of a byte pipe (proto/resync.h): bytes
 * either side discards before it finds one (the tail of an old session),
 * and the preambles of new nonces tdlisten answers on one connection (an
 * agent tries again with a new one each time it connects).
 */
#define TD_RESYNC_DISCARD_MAX	(16u * 1024 * 1024)
#define TD_RESYNC_MAX_PREAMBLES	16
/* Largest HELLO or WELCOME payload. */
#define TD_MAX_HELLO		1024
/* A standby frame (STANDBY, START: a filter and the events fit). */
#define TD_MAX_STANDBY_MSG	(TD_MAX_FILTER_LEN + 2048)
/* An ARM frame: a filter and a trigger's, the events, a name. */
#define TD_MAX_ARM_MSG		(2 * TD_MAX_FILTER_LEN + 2048)
/*
 * Standby connections of one identity at once: one is the normal case, a
 * second lets an agent whose old connection is not yet known dead come
 * back at once (issue 31 row 1: one certificate had filled --max-sessions).
 */
#define TD_MAX_STANDBY_PER_IDENTITY	2
/*
 * A control client's (tdctl's) answers not read yet: above this tdlisten
 * reads none of its requests until they drain to half (one answer may go
 * past it: a list of every standby agent).
 */
#define TD_MAX_CONTROL_OUT	(1024 * 1024)
/* tdctl clients at once (each a descriptor and a little memory) */
#define TD_CONTROL_MAX_CLIENTS	64
/* Longest agent name, clock name or identity on the wire. */
#define TD_MAX_NAME_LEN		64
/* Longest text of an ERROR message. */
#define TD_MAX_ERROR_LEN	512

/*
 * Finished recordings tdlisten remembers for agents that come back for a
 * lost DONE: per identity, and in all (368 bytes each, allocated at the
 * first: 368 KiB for the table).
 */
#define TD_MAX_FINISHED_PER_IDENTITY	32
#define TD_MAX_FINISHED			1024

/*
 * tdlisten's header cache (listener/recording/hcache.c): bytes of entries per
 * identity (and in shared/, the sections every identity may use), and in
 * all.  A section above half the first is never kept.  A kallsyms is about
 * 5.4 MB: 1,000 machines fit in the total.
 */
#define TD_HCACHE_IDENTITY_MAX	(64ull * 1024 * 1024)
/*
 * Bytes one identity may have the header cache write (kept or not) within
 * a window of seconds: its whole share twice, 24 recordings' headers of
 * 5.4 MB a minute.
 */
#define TD_HCACHE_WRITE_MAX	(2 * TD_HCACHE_IDENTITY_MAX)
#define TD_HCACHE_WRITE_WINDOW	60
#define TD_HCACHE_TOTAL_MAX	(8ull * 1024 * 1024 * 1024)

/*
 * Most a HELLO may declare as ncpus x page size: what one page on every
 * CPU of the traced machine comes to.  Real machines: 4,096 CPUs of 4 KiB
 * pages (16 MiB), 64 CPUs of 1 MiB pages (64 MiB).
 */
#define TD_MAX_CPU_SPAN		(64u * 1024 * 1024)
/* All the options of one recording together (they stay in memory). */
#define TD_MAX_OPTIONS_TOTAL	(4u * 1024 * 1024)
/*
 * Pages a writer may hold in unfinished chunks (and their compressed
 * chunks gathered for the spools), over all its CPUs: past it, the chunk
 * of the CPU written to goes out at once, shorter.  Honest agents of 256
 * CPUs with 4 KiB pages stay under it (10 MiB of full chunks).
 */
#define TD_WRITER_CHUNK_MEM	(16u * 1024 * 1024)
/* Spool files a listener's writer keeps open at once (more are reopened). */
#define TD_WRITER_SPOOL_FDS	16

/*
 * tdlisten's memory budget: what a peer can make the listener hold (chunk
 * buffers, decompressed pages, options, replies not sent yet, time-sync
 * samples), per session, per identity (all its sessions) and in all.  A
 * session past one of them pauses (the agent is told to come back later).
 */
#define TD_SESSION_MEM		(48u * 1024 * 1024)
#define TD_IDENTITY_MEM		(96u * 1024 * 1024)
#define TD_LISTENER_MEM		(1024u * 1024 * 1024)
/*
 * Replies (time-sync answers) a session may have waiting to be sent: past
 * it the listener stops reading the session until the agent reads.
 */
#define TD_MAX_UNSENT		(64u * 1024)
/*
 * Bytes of frames (counting PAGES_Z as the pages it expands to) one read
 * callback of a session handles before the others have their turn: 128
 * chunks of 9 zero pages of 512 KiB take 1.4 KB on the wire and 576 MiB
 * to decompress and compress again, seconds that would make the other
 * sessions miss their idle timeouts.
 */
#define TD_SESSION_TURN		(8u * 1024 * 1024)
/*
 * ... or this many ms, whichever comes first: on a slow listener (valgrind
 * on a loaded box) an agent's first 8 MiB took 10 s, and a peer's
 * time-sync probes (small frames, each answered) 21 s, while no other socket
 * was read (an agent's TCP_USER_TIMEOUT, 15 s, counts a zero window).  A
 * turn does one frame (or piece of a bulk frame) at least.
 */
#define TD_SESSION_TURN_MS	50
/*
 * Collectors an agent is given at most (tdagent -h A,B,C): it tries them
 * in order for the first connection, each with its own connect and TLS
 * timeouts, so a long list only makes a start slower.
 */
#define TD_MAX_COLLECTORS	8
/*
 * Descriptors the listener keeps for itself (listening sockets, logs,
 * checkpoints being written, accepts): a recording starts only if its
 * descriptors fit in RLIMIT_NOFILE minus these and the connections.
 */
#define TD_FD_RESERVE		32
/*
 * One identity's recordings reserve at most 1/TD_FD_SHARE of the rest:
 * recordings that wait for a resume keep their descriptors, and a
 * compromised agent must not keep every other one from starting.
 */
#define TD_FD_SHARE		4
/*
 * A checkpoint rewrites the session's state file: one is taken only when
 * the bytes received since the last are at least 1/TD_CK_AMPLIFY of the
 * state's size, so that state writes stay within TD_CK_AMPLIFY times what
 * the agent sent (a trickle of bytes cannot make the listener rewrite a
 * large state four times a second).
 */
#define TD_CK_AMPLIFY		8

/*
 * uftrace record --host clients (listener/producers/uftrace.c, proto/ufmsg.c).
 * A message carries one piece of one file (a buffer of a thread, a whole
 * .sym file: kallsyms and the symbols of large programs run to tens of
 * MiB); its body is streamed to disk, never held.
 */
/* Longest file name in a run (NAME_MAX), and the client directory logged. */
#define TD_UF_MAX_NAME		255
/* Longest SEND_DIR_NAME payload (PATH_MAX: only logged). */
#define TD_UF_MAX_DIR_NAME	4096
/* Largest payload of one message. */
#define TD_UF_MAX_MSG		(256u * 1024 * 1024)
/* Largest info file (uftrace writes a few KiB of text). */
#define TD_UF_MAX_INFO		(1024u * 1024)
/* Largest file of a run, and all of a run's files together. */
#define TD_UF_MAX_FILE		(4ull * 1024 * 1024 * 1024)
#define TD_UF_MAX_RUN		(16ull * 1024 * 1024 * 1024)
/* Most files in one run (a .dat per thread, a .sym per object). */
#define TD_UF_MAX_FILES		16384
/* uftrace clients connected at once, and from one address (more are refused). */
#define TD_UF_MAX_CLIENTS	256
#define TD_UF_MAX_CLIENTS_ADDR	16
/* Bytes read ahead from one client before its data goes to disk. */
#define TD_UF_READ_AHEAD	(256u * 1024)

/*
 * tdlisten's connections still in their TLS handshake (--max-handshakes,
 * --max-handshakes-per-address): the most either option may say; the
 * admission tables are searched in order, so they stay small.
 */
#define TD_MAX_HANDSHAKES	4096
/* A handshake this old (ms) gives its slot to a newcomer when full. */
#define TD_ADMIT_MIN_AGE_MS	1000
/* Refusals logged one a line per interval (s); the rest in one line. */
#define TD_ADMIT_LOG_BURST	5
#define TD_ADMIT_LOG_INTERVAL	10

/*
 * Guests one host recording may declare (tdagent --guest), and guest
 * recordings it may be paired with over its life (a guest rebooted in a
 * loop makes one each time): each pairing is a GUEST option of the host's
 * file, of at most 8 x TD_MAX_CPUS + 78 bytes.
 */
#define TD_MAX_GUESTS		64
/* tdlisten --guest HOST:GUEST pairs allowed (the listener's configuration) */
#define TD_MAX_GUEST_ALLOW	4096

/*
 * tdlisten --http: connections at once (more wait in the listen queue),
 * of them from one address (an IPv6 /64), a request's line and headers,
 * its body (a GET has none), and the replies: recordings listed (open
 * ones and TD_TALLY_ENDED ended) and identities whose disk use is summed,
 * past which a reply says it is truncated.  A client has
 * TD_HTTP_DEADLINE seconds from its accept (TLS handshake included), or
 * from its last reply, to send a whole request; one that has owed a
 * request for TD_HTTP_MIN_AGE_MS gives its slot to a newcomer when its
 * address or the whole is at its cap (httpd.c).
 */
#define TD_HTTP_MAX_CONNS	16
#define TD_HTTP_MAX_CONNS_ADDR	4
#define TD_HTTP_MAX_HEADERS	8192
#define TD_HTTP_MAX_BODY	1024
#define TD_HTTP_DEADLINE	5
#define TD_HTTP_MIN_AGE_MS	1000
/*
 * Requests one address has answered at once, then per second (more wait
 * their turn), and how long (ms) a /metrics or /status reply is reused
 * while no count of things has changed (httpd.c).
 */
#define TD_HTTP_BURST		10
#define TD_HTTP_RATE		5
#define TD_HTTP_CACHE_MS	1000
#define TD_HTTP_MAX_RECS	4096
#define TD_HTTP_MAX_IDENTITIES	256
#define TD_MAX_GUEST_PAIRS	256
/*
 * Longest line tdagent takes from QEMU's monitor (QMP): query-cpus-fast
 * says some 200 bytes per vCPU.
 */
#define TD_MAX_QMP_REPLY	(1024u * 1024)

/*
 * Time-sync samples kept per recording (a round a second fills it in 68
 * minutes; then every other one is left out: timesync.c).  A checkpoint
 * holds them all and is rewritten every SESSION_CK_BYTES, so this bounds
 * its size (48 bytes a sample), the memory and the options.  A checkpoint
 * of an older tdlisten may hold up to TD_MAX_TSYNC_SAMPLES_READ.
 */
#define TD_MAX_TSYNC_SAMPLES	4096
#define TD_MAX_TSYNC_SAMPLES_READ	100000
/* A sample whose error bound is wider than this (ns) is dropped. */
#define TD_MAX_TSYNC_BOUND	(100u * 1000 * 1000)
/*
 * Time-sync samples an armed standby agent keeps for its ring's window
 * (armsync.c): one every 30 s at the defaults, so 64 minutes of window;
 * past that every other one is left out.  A snapshot's recording reads
 * at most this many (each line at most TD_ARMED_SAMPLE_LINE bytes).
 */
#define TD_MAX_ARMED_SAMPLES	128
#define TD_ARMED_SAMPLE_LINE	96

/*
 * tdagent --import-plan9: the longest input line (Plan 9's /dev/trace
 * writes 121 bytes), the records put back in time order at once (80
 * bytes each: 5 MiB; records are out of order only between processors
 * logging at the same moment, and the device's log holds 8,192 by
 * default), and the tasks the CMDLINES section names (at most 17 MiB of
 * text).
 */
#define TD_PLAN9_LINE_MAX	4096
#define TD_PLAN9_REORDER	(1u << 16)
#define TD_PLAN9_MAX_TASKS	(1u << 20)

/*
 * trace-cmd record -N clients (listener/producers/tracecmd.c): the trace.dat
 * header a client sends before its data (v6 is uncompressed: kallsyms of some
 * 6 MiB is most of it), and how long (s) a client's data connections may take
 * to end after its CLOSE before the file is finished without them.
 */
#define TD_TC_MAX_META		(64u * 1024 * 1024)
#define TD_TC_CLOSE_WAIT	10
/*
 * A trace-cmd header's metadata sections decompressed, all of them (a real
 * kernel's kallsyms is some 6 MB): a header of compressible sections would
 * otherwise expand to TD_MAX_SECTION_SIZE each.  A section's own cap in
 * that total, header_page's, is much smaller.  Before the header is whole,
 * its deadline (--handshake-timeout) is put back only when at least
 * TD_TC_META_PROGRESS bytes more of it came: a client sending nothing, or
 * empty messages, is closed.
 */
#define TD_TC_MAX_SECTIONS	(64u * 1024 * 1024)
/*
 * However it trickles, a trace-cmd client's whole header must come within
 * TD_TC_META_TIMES x --handshake-timeout of its RINIT (60 s by default;
 * issue 31 row 11: 64 KiB each 10 s held a client's data ports 2.8 h),
 * and the clients of one address hold at most 1/TD_TC_PORTS_SHARE of
 * --tracecmd-data-ports (at least TD_TC_PORTS_MIN when the span has them:
 * one big machine's CPUs).
 */
#define TD_TC_META_TIMES	6
#define TD_TC_PORTS_SHARE	4
#define TD_TC_PORTS_MIN		256
#define TD_TC_MAX_HEADER_INFO	(1024u * 1024)
#define TD_TC_META_PROGRESS	(64u * 1024)

/*
 * tdlisten --on-finish (listener/fleet/onfinish.c): files waiting for their
 * command or running it, in all and of one identity (more wait in their
 * sidecars, counted as dropped, and are queued again as the queue
 * drains), commands at once (--on-finish-jobs), the longest wait between
 * two attempts (s), and a sidecar file's size as read back.
 */
#define TD_ONFINISH_QUEUE	1024
#define TD_ONFINISH_QUEUE_ID	64
#define TD_ONFINISH_MAX_JOBS	64
#define TD_ONFINISH_RETRY_MAX	600
#define TD_ONFINISH_SIDECAR	4096

/*
 * tdlisten --rotate (listener/recording/rotate.c): the smallest piece (every
 * piece repeats the recording's header sections, a few MiB with kallsyms), the
 * shortest and longest span, the highest piece number (four digits or more in
 * the name), and the most pieces of one recording --keep looks at in one pass.
 */
#define TD_ROTATE_MIN_SIZE	(1024u * 1024)
#define TD_ROTATE_MIN_SECS	1u
#define TD_ROTATE_MAX_SECS	(7u * 24 * 3600)
#define TD_ROTATE_MAX_PIECE	999999u
#define TD_ROTATE_SCAN		100000u
/* A cut copies an uncompressed header section in pieces of this much. */
#define TD_ROTATE_COPY_CHUNK	(1024u * 1024)

#endif
