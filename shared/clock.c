/*
 * clock.c: the monotonic clock in milliseconds and nanoseconds, and the
 * kernel's realtime stamps turned monotonic (see clock.h).
 */
#include <time.h>

#include "clock.h"
#include "banned.h"

uint64_t
td_clock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
td_clock_now_ns(void)
{
	return td_clock_ns(CLOCK_MONOTONIC);
}

uint64_t
td_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t
td_clock_real_to_mono(uint64_t real_ns, uint64_t *err)
{
	uint64_t m0, r, m1;

	m0 = td_clock_ns(CLOCK_MONOTONIC);
	r = td_clock_ns(CLOCK_REALTIME);
	m1 = td_clock_ns(CLOCK_MONOTONIC);
	*err = (m1 - m0) / 2 + 1;
	return real_ns - r + m0 + (m1 - m0) / 2;
}
