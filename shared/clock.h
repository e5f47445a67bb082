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
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t	td_clock_now_ms(void);
/* Nanoseconds of CLOCK_MONOTONIC. */
uint64_t	td_clock_now_ns(void);
/* Nanoseconds of clock id (CLOCK_REALTIME for the kernel's stamps). */
uint64_t	td_clock_ns(clockid_t id);
/*
 * A CLOCK_REALTIME stamp (ns; a socket's SO_TIMESTAMPNS) as
 * CLOCK_MONOTONIC: the two differ by a constant between steps of the wall
 * clock, read here between two monotonic readings; *err is how far the
 * result may be off (half that bracket, and 1 ns).  A step of the wall
 * clock between the stamp and this call is not seen.
 */
uint64_t	td_clock_real_to_mono(uint64_t real_ns, uint64_t *err);

#endif
