/*
 * test-armsamples.c: which time-sync samples an armed standby agent keeps
 * for its ring's window (agent/standby/armsamples.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "armsamples.h"
#include "tdlimits.h"

#define S	30000000000ULL		/* a period: 30 s in ns */

/* Sample k of a steady pair of clocks, 20 ppm apart, +-4 us. */
static struct armsample
at(uint64_t k)
{
	struct armsample x;

	memset(&x, 0, sizeof x);
	x.mono = 1000 * S + k * S;
	x.ts = x.mono + 777;
	x.theta = -5000000 + (int64_t)(k * S / 50000);
	x.ref = x.mono + (uint64_t)x.theta;
	x.bound = 4000;
	x.rtt = 8000;
	x.probes = 48;
	return x;
}

/* A quiet ring (its window from the arm on): every sample stays. */
static void
test_window_from_arm(void **state)
{
	struct armsamples *a = armsamples_new();
	struct armsample x;
	uint64_t k;

	(void)state;
	for (k = 0; k < 10; k++) {
		x = at(k);
		armsamples_keep(a, &x, at(0).mono - 1);
	}
	assert_int_equal(armsamples_count(a), 10);
	assert_int_equal(armsamples_get(a, 0)->mono, at(0).mono);
	assert_int_equal(armsamples_get(a, 9)->mono, at(9).mono);
	armsamples_free(a);
}

/* A ring that wraps: the last sample before its start, and all after. */
static void
test_window_moves(void **state)
{
	struct armsamples *a = armsamples_new();
	struct armsample x;
	uint64_t k;

	(void)state;
	for (k = 0; k < 10; k++) {
		x = at(k);
		/* the window began 2.5 periods before this sample */
		armsamples_keep(a, &x, x.mono - 5 * S / 2);
	}
	/* start between samples 6 and 7: 6, 7, 8, 9 */
	assert_int_equal(armsamples_count(a), 4);
	assert_int_equal(armsamples_get(a, 0)->mono, at(6).mono);
	/* an empty ring (start: now): the last one before, and the new */
	x = at(10);
	armsamples_keep(a, &x, x.mono);
	assert_int_equal(armsamples_count(a), 2);
	assert_int_equal(armsamples_get(a, 0)->mono, at(9).mono);
	armsamples_free(a);
}

/* Past the cap every other one goes, the oldest and the newest stay. */
static void
test_cap(void **state)
{
	struct armsamples *a = armsamples_new();
	struct armsample x;
	uint64_t k;

	(void)state;
	for (k = 0; k < TD_MAX_ARMED_SAMPLES + 1; k++) {
		x = at(k);
		armsamples_keep(a, &x, 0);
	}
	assert_int_equal(armsamples_count(a), TD_MAX_ARMED_SAMPLES / 2 + 2);
	assert_int_equal(armsamples_get(a, 0)->mono, at(0).mono);
	assert_int_equal(armsamples_get(a, 1)->mono, at(2).mono);
	assert_int_equal(armsamples_get(a, armsamples_count(a) - 1)->mono,
	    at(TD_MAX_ARMED_SAMPLES).mono);
	for (k = 0; k < 1000; k++) {
		x = at(TD_MAX_ARMED_SAMPLES + 1 + k);
		armsamples_keep(a, &x, 0);
		assert_true(armsamples_count(a) <= TD_MAX_ARMED_SAMPLES);
	}
	assert_int_equal(armsamples_get(a, 0)->mono, at(0).mono);
	armsamples_free(a);
}

/* Another reference (a jump past the bounds and 1000 ppm): the old go. */
static void
test_other_reference(void **state)
{
	struct armsamples *a = armsamples_new();
	struct armsample x;

	(void)state;
	x = at(0);
	armsamples_keep(a, &x, 0);
	x = at(1);
	armsamples_keep(a, &x, 0);
	/* 30 s later, 1000 ppm are 30 ms: a jump of 31 ms is another one */
	x = at(2);
	x.theta += 31000000;
	armsamples_keep(a, &x, 0);
	assert_int_equal(armsamples_count(a), 1);
	assert_int_equal(armsamples_get(a, 0)->theta, x.theta);
	/* 29 ms is a drift it may be */
	x = at(3);
	x.theta += 31000000 + 29000000;
	armsamples_keep(a, &x, 0);
	assert_int_equal(armsamples_count(a), 2);
	/* a trace clock that went back: another clock */
	x = at(4);
	x.theta += 60000000;
	x.ts = at(1).ts;
	armsamples_keep(a, &x, 0);
	assert_int_equal(armsamples_count(a), 1);
	armsamples_clear(a);
	assert_int_equal(armsamples_count(a), 0);
	armsamples_free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_from_arm),
		cmocka_unit_test(test_window_moves),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_other_reference),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
