/*
 * timesync.h: the listener's side of time sync (docs/timesync.md) for one
 * recording: the samples its agent sent, kept in order, and at the end the
 * options that put its file on the listener's timeline (TIME_SHIFT, DATE
 * and our own with each sample's error bound).
 *
 * A struct timesync belongs to one recording, which frees it; nothing here
 * knows connections, sessions or recordings, and nothing here logs: what
 * happened comes back in a struct timesync_report for the caller's log
 * line.  Probes are answered by the producer, in the reference clock
 * (timesync_now(CLOCK_MONOTONIC)).  Loop thread only.
 */
#ifndef TD_TIMESYNC_H
#define TD_TIMESYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct timesync;
struct td_buf;
struct td_cur;
struct td_file;
struct td_tsync_sample;

/* What timesync_options() did, for the caller's log line. */
struct timesync_report {
	uint32_t	 kept;		/* samples on the line */
	uint32_t	 dropped;	/* absurd ones, never kept */
	uint32_t	 thinned;	/* left out to keep the count bounded */
	uint32_t	 imprecise;	/* set aside: wide and wrong */
	uint32_t	 off_line;	/* set aside: off their neighbours' line */
	uint32_t	 in_option;	/* of kept, in TIME_SHIFT (its size cap) */
	bool		 wide_only;	/* only samples past the cap came:
					   the tightest is the time shift */
	bool		 unchecked;	/* x86-tsc without TSC2NSEC: none set
					   aside */
	int64_t		 offset;	/* the last sample's */
	double		 drift_ppm;	/* first to last */
	uint64_t	 bound;		/* the widest kept, ns */
};

/* Now in clock id, ns. */
uint64_t	 timesync_now(clockid_t id);
struct timesync	*timesync_new(void);
void		 timesync_free(struct timesync *t);
/*
 * Keep a sample the agent sent; an absurd one (bound past the cap, a
 * scaling or fraction trace-cmd would misread, not after the last) is
 * dropped and counted: false.  Past TD_MAX_TSYNC_SAMPLES every other
 * sample kept so far is left out first (counted in the report).
 */
bool		 timesync_add(struct timesync *t,
		    const struct td_tsync_sample *s);
/*
 * The TSC2NSEC option's factors (x86-tsc; p: at least 8 bytes, u32 mult,
 * u32 shift, in the agent's byte order); ignored when absurd.
 */
void		 timesync_tsc2nsec(struct timesync *t, const uint8_t *p,
		    bool big_endian);
/* The TSC2NSEC factors it has (x86-tsc): false when none came. */
bool		 timesync_factors(const struct timesync *t, uint32_t *mult,
		    uint32_t *shift);
/* Set them (samples made elsewhere, in those units). */
void		 timesync_set_factors(struct timesync *t, uint32_t mult,
		    uint32_t shift);
/* The samples kept, in order: n of them. */
const struct td_tsync_sample *timesync_samples(const struct timesync *t,
		    uint32_t *n);
/* Samples kept so far. */
uint32_t	 timesync_count(const struct timesync *t);
/*
 * The bound the file would get now: the widest of the samples that
 * TIME_SHIFT would hold (those set aside at END left out, as they are
 * then), 0 with none.  For /status and /metrics.
 */
uint64_t	 timesync_bound_now(const struct timesync *t, const char *clock);
/* A bound past this is flagged as wide (the targets are 1 and 10 us). */
#define TIMESYNC_WIDE_NS	100000
/* Bytes it holds, for the memory budget. */
uint64_t	 timesync_mem(const struct timesync *t);
/*
 * TIME_SHIFT (peer_id: the recording's trace id; ncpus copies) and DATE
 * into f.  clock names the agent's trace clock
 * (x86-tsc's offsets are cycles).  Returns 0 and fills rep, 1 when no
 * sample was kept (nothing written; rep->dropped says how many came), or
 * -1 (the writer refused, errno set).
 */
int		 timesync_options(struct timesync *t, struct td_file *f,
		    uint64_t peer_id, uint32_t ncpus, const char *clock,
		    struct timesync_report *rep);
/* Append the samples and factors to a checkpoint (host order); 0 or -1. */
int		 timesync_save(const struct timesync *t, struct td_buf *b);
/*
 * Take them back from a checkpoint of that version (1 and 2: samples as
 * TSYNC_SAMPLE frames, 1 without the factors); -1 when damaged.
 */
int		 timesync_load(struct timesync *t, struct td_cur *c,
		    uint32_t version);

#endif
