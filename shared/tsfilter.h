/*
 * tsfilter.h: time-sync samples that lie off their neighbours' line, and
 * samples far less precise than their neighbours.
 *
 * A sample pairs a trace-clock time with the offset of the reference clock
 * there.  Two clocks' offset changes along a line over seconds (their rates
 * are steady), while a round whose probes were all lopsided the same way
 * makes a sample microseconds off that line, and the agent cannot tell.
 * The listener, with all samples of a recording in hand, can: each sample
 * is compared with the line through its neighbours.
 *
 * Pure arithmetic on arrays the caller owns: no I/O, no logging, any
 * thread.
 */
#ifndef TD_TSFILTER_H
#define TD_TSFILTER_H

#include <stdbool.h>
#include <stdint.h>

/* Neighbours on each side that a sample is compared with. */
#define TD_TSFILTER_SIDE	5
/* With fewer samples than this, none is set aside. */
#define TD_TSFILTER_MIN		8

/*
 * Mark in out[0..n) the samples (ts[] ascending, offset[] in the same
 * units) whose offset lies further than max(floor, 4 x the neighbours' own
 * median distance) from the line (Theil-Sen) through up to
 * TD_TSFILTER_SIDE neighbours on each side.  Return how many were marked:
 * 0 (and nothing marked) below TD_TSFILTER_MIN samples, or when more than
 * half would be: then there is no line to speak of.  Up to half may be:
 * rounds can be lopsided in a run, a third of them the same way for a
 * minute (seen on a busy 2-vCPU VM); the line through each sample's
 * neighbours still follows the others.
 */
uint32_t	td_tsfilter_outliers(const uint64_t *ts, const int64_t *offset,
		    uint32_t n, double floor, bool *out);
/*
 * A sample whose error bound is more than this many times its most precise
 * neighbour's (of up to TD_TSFILTER_SIDE on each side) is imprecise.
 */
#define TD_TSFILTER_IMPRECISE	8

/*
 * Mark in out[0..n) (without clearing it) the imprecise samples that
 * disagree with the precise ones, and return how many were newly marked.
 * A sample is imprecise when its error bound (bound[], ns) is above
 * TD_TSFILTER_IMPRECISE x max(floor_ns, the smallest bound of up to
 * TD_TSFILTER_SIDE neighbours on each side); it disagrees when its offset
 * is further than max(floor_ns, their bounds) from what the nearest
 * precise samples say there (the line through the one before and the one
 * after, else through the two nearest, else the one there is): within
 * that it cannot bend the line more than they already may.
 * units_per_ns converts ns into the offsets' units (1, or cycles per ns
 * for x86-tsc).
 *
 * trace-cmd interpolates between samples and extrapolates past the last
 * two: one round made while the machine was saturated (a bound of 40 ms
 * among 150 us ones, an offset 20 ms off) bends the line by its own error
 * and, near an end, sends the extrapolation off by more; its neighbours
 * carry the line better.  An imprecise sample that agrees with them costs
 * nothing and is kept.  The sample with the smallest bound is never
 * imprecise, so at least one stays.
 */
uint32_t	td_tsfilter_imprecise(const uint64_t *ts, const int64_t *offset,
		    const uint64_t *bound, uint32_t n, uint64_t floor_ns,
		    double units_per_ns, bool *out);
/*
 * Two clocks that keep time drift apart by at most a few hundred ppm (NTP
 * slews by 500 ppm at most): a line steeper than this between two samples
 * says one of them is wrong, not the clocks.
 */
#define TD_TSFILTER_MAX_SLOPE	1e-3

/*
 * Mark in out[0..n) (without clearing it) the samples that make a line
 * steeper than TD_TSFILTER_MAX_SLOPE with the next sample not marked, and
 * return how many were newly marked.  Of such a pair, the one with the
 * wider bound (bound[], ns) goes, and the pair is looked at again with its
 * new neighbour, until no steep pair is left or one sample is; a pair whose
 * bounds are both below min_bound_ns is left alone (a coarse clock's steps,
 * such as uptime's jiffies, are not an error of the round).  floor_ns is
 * the offset difference below which no pair is steep; units_per_ns as
 * above.
 *
 * This is the case td_tsfilter_imprecise() cannot see: every round of a
 * short recording made on a saturated machine (two samples, 11 and 8 ms
 * bounds from 3 probes each, 2.8 ms apart over 171 ms: a drift of 16,500
 * ppm, which trace-cmd extrapolates 25 ms off within a second).  One
 * sample's offset, held, is wrong by at most its own bound.
 */
uint32_t	td_tsfilter_steep(const uint64_t *ts, const int64_t *offset,
		    const uint64_t *bound, uint32_t n, uint64_t min_bound_ns,
		    uint64_t floor_ns, double units_per_ns, bool *out);

/*
 * a - b as a double: exact where the difference fits in 64 bits (offsets
 * of any size, such as a guest's TSC's, a few apart), and no overflow where
 * it does not (offsets from a peer can be anything).
 */
double		td_tsfilter_diff(int64_t a, int64_t b);

#endif
