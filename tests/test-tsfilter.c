/*
 * test-tsfilter.c: time-sync samples off their neighbours' line
 * (shared/tsfilter.c).
 *
 * Samples on a sloped line with sub-microsecond noise keep every one; a
 * sample microseconds off is set aside, also at either end and two in a
 * row; x86-tsc-sized numbers (cycles since boot, offsets of 1e11) keep
 * their precision; too few samples, or too many off the line, set none
 * aside; offsets near the ends of int64 (a guest's TSC, or a hostile
 * peer's samples) neither lose precision nor overflow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tsfilter.h"
#include "banned.h"

#define N	60

static uint64_t ts[N];
static int64_t off[N];
static bool out[N];

/* A second apart from base, offset o0 + slope, noise of +-200 units. */
static void
line(uint64_t base, int64_t o0, double slope)
{
	static const int noise[7] = { 0, 150, -200, 80, -120, 200, -40 };
	int i;

	for (i = 0; i < N; i++) {
		ts[i] = base + (uint64_t)i * 1000000000ULL +
		    (uint64_t)(i * 7919);
		off[i] = o0 + (int64_t)(slope * i * 1e9) + noise[i % 7];
	}
}

static void
test_clean_line(void **state)
{
	line(23000000000000ULL, -27000000, 0.05e-6);
	assert_int_equal(td_tsfilter_outliers(ts, off, N, 1000, out), 0);
}

static void
test_outliers(void **state)
{
	int i;

	line(23000000000000ULL, 244690000, -0.08e-6);
	off[0] += 5000;		/* the first round */
	off[17] += 9500;	/* lopsided rounds */
	off[30] -= 6600;
	off[31] -= 5100;	/* two in a row */
	off[N - 1] -= 4000;	/* the last round */
	off[40] += 600;		/* within the floor: kept */
	assert_int_equal(td_tsfilter_outliers(ts, off, N, 1000, out), 5);
	for (i = 0; i < N; i++)
		assert_int_equal(out[i], i == 0 || i == 17 || i == 30 ||
		    i == 31 || i == N - 1);
}

static void
test_cycles(void **state)
{
	/* x86-tsc: 2.4 cycles per ns, floor 2400 cycles */
	line(55000000000000ULL, -202441541000LL, 0.15e-6);
	off[20] += 12000;
	assert_int_equal(td_tsfilter_outliers(ts, off, N, 2400, out), 1);
	assert_true(out[20]);
}

static void
test_too_few_or_too_many(void **state)
{
	int i;

	line(23000000000000ULL, 0, 0);
	off[3] += 20000;
	assert_int_equal(td_tsfilter_outliers(ts, off, TD_TSFILTER_MIN - 1,
	    1000, out), 0);
	for (i = 0; i < TD_TSFILTER_MIN - 1; i++)
		assert_false(out[i]);
	assert_int_equal(td_tsfilter_outliers(ts, off, TD_TSFILTER_MIN, 1000,
	    out), 1);
	/* a third of them 3 us down: set aside */
	line(23000000000000ULL, 0, 0);
	for (i = 1; i < N; i += 3)
		off[i] -= 3000;
	assert_int_equal(td_tsfilter_outliers(ts, off, N, 1000, out), N / 3);
	for (i = 0; i < N; i++)
		assert_int_equal(out[i], i % 3 == 1);
	/* every other sample 5 us up: no line, nothing set aside */
	line(23000000000000ULL, 0, 0);
	for (i = 0; i < N; i += 2)
		off[i] += 5000;
	assert_int_equal(td_tsfilter_outliers(ts, off, N, 1000, out), 0);
	for (i = 0; i < N; i++)
		assert_false(out[i]);
}

static void
test_huge_offsets(void **state)
{
	int i;

	/* close to INT64_MAX, a few apart: exact */
	assert_true(td_tsfilter_diff(INT64_MAX, INT64_MAX - 3) == 3.0);
	assert_true(td_tsfilter_diff(INT64_MIN + 5, INT64_MIN) == 5.0);
	/* beyond 64 bits: no overflow (UBSan would stop here), sign kept */
	assert_true(td_tsfilter_diff(INT64_MAX, INT64_MIN) > 1.8e19);
	assert_true(td_tsfilter_diff(INT64_MIN, INT64_MAX) < -1.8e19);
	/* a guest TSC's offset near INT64_MAX: the lopsided round still seen */
	line(55000000000000ULL, INT64_MAX - 100000000000LL, 0.15e-6);
	off[20] += 12000;
	assert_int_equal(td_tsfilter_outliers(ts, off, N, 2400, out), 1);
	assert_true(out[20]);
	/* offsets all over the range, as a hostile peer may send: no crash */
	for (i = 0; i < N; i++)
		off[i] = i % 2 ? INT64_MAX - i : INT64_MIN + i;
	(void)td_tsfilter_outliers(ts, off, N, 1000, out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_line),
		cmocka_unit_test(test_outliers),
		cmocka_unit_test(test_cycles),
		cmocka_unit_test(test_too_few_or_too_many),
		cmocka_unit_test(test_huge_offsets),
	};

	return cmocka_run_group_tests_name("tsfilter", tests, NULL, NULL);
}
