/*
 * armsamples.h: the time-sync samples an armed standby agent keeps for
 * its ring's window (armsync.h takes them; docs/timesync.md, "An armed
 * ring's window"): which to keep as the window moves, the cap, another
 * reference.  Pure bookkeeping, no clock read, nothing logs; the
 * standby agent's thread only.
 */
#ifndef TD_ARMSAMPLES_H
#define TD_ARMSAMPLES_H

#include <stdint.h>

/* One sample: the trace clock's ts was the listener's ref. */
struct armsample {
	uint64_t	 ts;
	uint64_t	 ref;		/* ns, the listener's CLOCK_MONOTONIC */
	uint64_t	 mono;		/* ns, the agent's, at the marker */
	int64_t		 theta;		/* ref - mono (the network part) */
	uint64_t	 bound;		/* ns */
	uint64_t	 rtt;		/* ns */
	uint32_t	 probes;
};

struct armsamples;

struct armsamples	*armsamples_new(void);
void			 armsamples_free(struct armsamples *a);
/* All go (a connection that cannot tell its reference). */
void			 armsamples_clear(struct armsamples *a);
/*
 * Keep x, newer than every sample kept.  Those of another reference go
 * (x's network part further from the last one's than their bounds and
 * 1000 ppm of the time between, or a trace clock that went back), and
 * those before the last one at or before start (the window's start, the
 * agent's CLOCK_MONOTONIC); past TD_MAX_ARMED_SAMPLES every other one
 * but the newest is left out.
 */
void			 armsamples_keep(struct armsamples *a,
			    const struct armsample *x, uint64_t start);
uint32_t		 armsamples_count(const struct armsamples *a);
/* Sample i, oldest first (i < armsamples_count()). */
const struct armsample	*armsamples_get(const struct armsamples *a,
			    uint32_t i);

#endif
