/*
 * tsync.h: the agent's half of time synchronization.
 *
 * Timestamps are taken in the recording's own trace clock: a marker written
 * to a sibling instance ("tracedock-<pid>-sync", same clock, nothing else
 * enabled) gets its time from the ring buffer, exactly as the recorded
 * events do.  tsync_mark() writes one, tsync_collect() reads a round's
 * markers back.  For the x86-tsc clock the kernel's TSC to nanoseconds
 * factors are known too (tsync_tsc2nsec()).  No logging; -1 and err on
 * failure.
 */
#ifndef TD_TSYNC_H
#define TD_TSYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tsync;
struct instance;

struct tsync	*tsync_new(struct instance *recording, char *err,
		    size_t errlen);
/* Write marker (round, seq, kind 's' before a probe or 'r' after). */
int		 tsync_mark(struct tsync *t, uint32_t round, uint32_t seq,
		    char kind);
/*
 * Read back the markers of a round: ts_s[seq] and ts_r[seq] (0 where a
 * marker is missing) for seq < n.  Empties the sync instance.
 */
int		 tsync_collect(struct tsync *t, uint32_t round, uint64_t *ts_s,
		    uint64_t *ts_r, uint32_t n);
/* Whether the clock counts TSC cycles; then mult/shift convert to ns. */
bool		 tsync_tsc2nsec(const struct tsync *t, uint32_t *mult,
		    uint32_t *shift);
/* Trace clock units to ns (identity unless x86-tsc). */
uint64_t	 tsync_to_ns(const struct tsync *t, uint64_t v);
/* ns to trace clock units. */
uint64_t	 tsync_from_ns(const struct tsync *t, uint64_t ns);
void		 tsync_free(struct tsync *t);

/* Probe the kernel's TSC to ns factors (perf's mmap page); -1 if none. */
int		 tsync_tsc_factors(uint32_t *mult, uint32_t *shift);

#endif
