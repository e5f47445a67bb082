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
/* Largest tracefs text file read whole (formats, stats, cmdlines...). */
#define TD_MAX_TRACEFS_FILE	(64u * 1024 * 1024)
/* Largest event filter expression. */
#define TD_MAX_FILTER_LEN	4096
/* Most -e arguments. */
#define TD_MAX_EVENT_ARGS	256
/* Pages per compressed chunk of CPU data (trace-cmd 3.1.6 writes 10). */
#define TD_CHUNK_PAGES		10
/* Largest compressed chunk accepted when reading a file back. */
#define TD_MAX_CHUNK_SIZE	(64u * 1024 * 1024)
/* Total size of the STRINGS section. */
#define TD_MAX_STRINGS_SIZE	(1024 * 1024)

#endif
