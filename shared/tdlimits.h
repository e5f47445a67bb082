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
/* Largest HELLO or WELCOME payload. */
#define TD_MAX_HELLO		1024
/* Longest agent name, clock name or identity on the wire. */
#define TD_MAX_NAME_LEN		64
/* Longest text of an ERROR message. */
#define TD_MAX_ERROR_LEN	512

/*
 * tdlisten's connections still in their TLS handshake (--max-handshakes,
 * --max-handshakes-per-address): the most either option may say; the
 * admission tables are searched in order, so they stay small.
 */
#define TD_MAX_HANDSHAKES	4096
/* Refusals logged one a line per interval (s); the rest in one line. */
#define TD_ADMIT_LOG_BURST	5
#define TD_ADMIT_LOG_INTERVAL	10

/* Time-sync samples kept per recording (one a second is 27 hours). */
#define TD_MAX_TSYNC_SAMPLES	100000
/* A sample whose error bound is wider than this (ns) is dropped. */
#define TD_MAX_TSYNC_BOUND	(100u * 1000 * 1000)

#endif
