/*
 * clock.h: the time deadlines, timeouts, backoffs and probes are measured
 * in.
 *
 * CLOCK_MONOTONIC, so a change of the wall clock moves no deadline.
 * Nothing here logs or fails (clock_gettime() of CLOCK_MONOTONIC cannot
 * fail on Linux); any thread may call it.
 */
#ifndef TD_CLOCK_H
#define TD_CLOCK_H

#include <stdint.h>

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t	td_clock_now_ms(void);
/* Nanoseconds of CLOCK_MONOTONIC. */
uint64_t	td_clock_now_ns(void);

#endif
