/*
 * tally.h: what tdlisten counted since it started, for its metrics and
 * status page (httpd.c, metrics.c): totals over every recording (bytes
 * and events received, events lost by cause, resumes), and what the last
 * TD_TALLY_ENDED recordings to end looked like at their end.
 *
 * recording.c feeds it where the events happen; metrics.c reads it.  The
 * totals are counters: they only grow (a resend after a rewind is counted
 * again, as the bytes crossed the network again).  Pure bookkeeping, no
 * I/O, nothing logs.  Loop thread only.
 */
#ifndef TD_TALLY_H
#define TD_TALLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdlimits.h"

/* Recordings that ended, kept for the status page (oldest go first). */
#define TD_TALLY_ENDED	32

/* Why events were lost, as the traced machine's ring reported it. */
enum tally_loss {
	TALLY_OVERRUN,		/* the ring overwrote them (CPUSTAT overrun) */
	TALLY_DROPPED,		/* the ring refused them (CPUSTAT dropped) */
	TALLY_NLOSS
};

/* One recording as the status page shows it (open or ended). */
struct tally_rec {
	char		 identity[TD_MAX_NAME_LEN + 1];
	char		 name[TD_MAX_NAME_LEN + 1];
	char		 path[TD_MAX_NAME_LEN * 4 + 1];	/* under DIR */
	const char	*state;		/* "recording", "waiting", "paused",
					   "done", "ended early" */
	uint64_t	 trace_id;	/* the listener's (WELCOME's) */
	uint64_t	 file_trace_id;	/* the file's TRACEID, 0: unknown */
	uint32_t	 ncpus;
	uint64_t	 bytes;		/* received */
	uint64_t	 events;	/* in the pages taken in */
	uint64_t	 lost;		/* overrun + dropped (CPUSTAT) */
	uint64_t	 missed_pages;	/* pages marked as after a loss */
	uint64_t	 sync_bound_ns;	/* widest time-sync error bound of the
					   samples in force (none set aside),
					   0: no sample yet */
	uint32_t	 sync_samples;
	double		 elapsed;	/* s since it started */
	char		 why[128];	/* why it paused last (no room), until
					   it goes on; "" */
	double		 started;	/* when, s since the epoch */
};

/* Totals since tdlisten started. */
struct tally_totals {
	uint64_t	 bytes;
	uint64_t	 events;
	uint64_t	 lost[TALLY_NLOSS];
	uint64_t	 missed_pages;
	uint64_t	 resumes;
	uint64_t	 done;		/* recordings finished */
	uint64_t	 ended_early;	/* closed unfinished */
	uint64_t	 pieces;	/* --rotate: pieces put in place */
	uint64_t	 pieces_removed;	/* ... removed by --keep */
};

void		 tally_bytes(uint64_t n);
void		 tally_events(uint64_t n, bool missed);
/*
 * A CPUSTAT option's text (one CPU's ring statistics, n bytes): its
 * overrun and dropped events counted by cause; their sum.
 */
uint64_t	 tally_cpustat(const void *p, size_t n);
void		 tally_resume(void);
/* --rotate: a piece was put in place; --keep removed one. */
void		 tally_piece(void);
void		 tally_piece_removed(void);
/* A recording ended (r->state says how): remembered, counted. */
void		 tally_ended(const struct tally_rec *r);
/* One that ended before tdlisten started (history.c): remembered only. */
void		 tally_restore(const struct tally_rec *r);
/* fn(arg) after each tally_ended() (NULL: none). */
void		 tally_on_ended(void (*fn)(void *), void *arg);
/* The label of a cause in the metrics ("overrun", "dropped"). */
const char	*tally_loss_name(enum tally_loss cause);
const struct tally_totals *tally_totals(void);
/* The ended recordings remembered, newest first: i from 0, NULL past. */
const struct tally_rec *tally_ended_at(int i);

#endif
