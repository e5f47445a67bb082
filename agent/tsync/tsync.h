/*
 * tsync.h: the agent's half of time synchronization.
 *
 * Timestamps are taken in the recording's own trace clock: a marker written
 * to a sibling instance ("tracedock-<pid>-sync", same clock, nothing else
 * enabled) gets its time from the ring buffer, exactly as the recorded
 * events do.  tsync_mark() writes one, tsync_collect() reads a round's
 * markers back, through the per-CPU readers tsync_new() opened (so rounds
 * still work after the recorder dropped root).  For the x86-tsc clock the kernel's TSC to nanoseconds
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
struct td_tsync_sample;

struct tsync	*tsync_new(struct instance *recording, char *err,
		    size_t errlen);
/* The same with a ring of kb KB per CPU (0: the kernel's default size). */
struct tsync	*tsync_new_sized(struct instance *recording, int kb,
		    char *err, size_t errlen);
/* Write marker (round, seq, kind 's' before a probe or 'r' after). */
int		 tsync_mark(struct tsync *t, uint32_t round, uint32_t seq,
		    char kind);
/*
 * Read back the markers of a round: ts_s[seq] and ts_r[seq] for seq < n;
 * entries of markers not found are left as they were (zero them first).
 * Consumes what the sync instance holds.
 */
int		 tsync_collect(struct tsync *t, uint32_t round, uint64_t *ts_s,
		    uint64_t *ts_r, uint32_t n);
/* At most this many batches of probes per round (see tsync_pick()). */
#define TSYNC_BATCHES		3
/* In the first and the last round of a recording. */
#define TSYNC_ANCHOR_BATCHES	6
/*
 * The sample of a round from its n probes (ref[seq] the listener's time, 0
 * if no reply): 0 and *sample filled; 1 if the round met a busy moment and
 * should probe again (never when last); 2 if it is left without a sample
 * (an anchor, the first or the last round of a recording, only right after
 * a round with one); -1 if no probe is usable.
 */
int		 tsync_pick(struct tsync *t, uint32_t round,
		    const uint64_t *ref, const uint64_t *ts_s,
		    const uint64_t *ts_r, uint32_t n, bool last, bool anchor,
		    struct td_tsync_sample *sample);
/*
 * The moment (CLOCK_MONOTONIC) of a marker written between the readings m0
 * and m1, within +-*half ns: the bracket narrowed by where in its write()
 * a marker is stamped, as measured at tsync_new().
 */
uint64_t	 tsync_moment(const struct tsync *t, uint64_t m0, uint64_t m1,
		    uint64_t *half);
/*
 * The local part alone: a marker's trace-clock time *ts and its moment
 * *mono (CLOCK_MONOTONIC) within +-*half ns, the tightest of a few.
 */
int		 tsync_local(struct tsync *t, uint32_t round, uint64_t *ts,
		    uint64_t *mono, uint64_t *half);
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
