/*
 * test-tsfilter.c: time-sync samples off their neighbours' line
 * (shared/tsfilter.c).
 *
 * Samples on a sloped line with sub-microsecond noise keep every one; a
 * sample microseconds off is set aside, also at either end and two in a
 * row; x86-tsc-sized numbers (cycles since boot, offsets of 1e11) keep
 * their precision; too few samples, or too many off the line, set none
 * aside; offsets near the ends of int64 (a guest's TSC, or a hostile
 * peer's samples) neither lose precision nor overflow.  Samples whose
 * bounds are far wider than their neighbours' are set aside, down to the
 * floor, never the most precise one.  Of two samples that make a line
 * steeper than clocks drift, the wider goes (a short recording whose every
 * round was made on a saturated machine), not a coarse clock's step
 * between precise ones, and one sample always stays.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

static uint64_t bnd[N];

/* bounds of 150-230 us on the line of line() */
static void
bounds(void)
{
	int i;

	for (i = 0; i < N; i++)
		bnd[i] = 150000 + (uint64_t)(i % 5) * 20000;
}

static uint32_t
imprecise(uint32_t n)
{
	memset(out, 0, sizeof out);
	return td_tsfilter_imprecise(ts, off, bnd, n, 10000, 1, out);
}

static void
test_imprecise(void **state)
{
	int i;

	/* rounds made on a saturated machine: wide bounds, offsets off */
	line(23000000000000ULL, -22700000, 0.05e-6);
	bounds();
	bnd[0] = 4700000;	/* the first round, 3 ms off */
	off[0] += 3000000;
	bnd[7] = 43000000;	/* 20 ms off */
	off[7] += 20000000;
	bnd[8] = 8000000;	/* and the next, 8 ms off the other way */
	off[8] -= 8000000;
	bnd[N - 1] = 2000000;	/* the last round, 1.5 ms off */
	off[N - 1] -= 1500000;
	bnd[20] = 1100000;	/* within 8 x 150 us: kept, though 1 ms off */
	off[20] += 1000000;
	bnd[30] = 15000000;	/* wide but on the line: kept */
	off[30] += 100000;
	assert_int_equal(imprecise(N), 4);
	for (i = 0; i < N; i++)
		assert_int_equal(out[i], i == 0 || i == 7 || i == 8 ||
		    i == N - 1);
	/* already set aside: not counted again */
	memset(out, 0, sizeof out);
	out[7] = true;
	assert_int_equal(td_tsfilter_imprecise(ts, off, bnd, N, 10000, 1,
	    out), 3);
	/* x86-tsc: offsets in cycles, 2.4 per ns; 1.9 ms = 4.6e6 cycles */
	line(55000000000000ULL, -202441541000LL, 0.15e-6);
	bounds();
	bnd[10] = 9000000;
	off[10] += 4560000;
	bnd[11] = 9000000;
	off[11] += 300000;	/* 125 us: within the neighbours' bounds */
	memset(out, 0, sizeof out);
	assert_int_equal(td_tsfilter_imprecise(ts, off, bnd, N, 10000, 2.4,
	    out), 1);
	assert_true(out[10]);
}

static void
test_imprecise_few(void **state)
{
	/* the test run that failed under six busy loops: 'local' made three
	   samples, the last two with wide bounds and offsets that moved by
	   8 and 43 ms; trace-cmd extrapolated them 88 ms off */
	ts[0] = 13014552409995ULL;
	off[0] = -22698576;
	bnd[0] = 163345;
	ts[1] = 13015287959566ULL;
	off[1] = -14809927;
	bnd[1] = 8069027;
	ts[2] = 13018597794056ULL;
	off[2] = 20112265;
	bnd[2] = 43134800;
	assert_int_equal(imprecise(3), 2);
	assert_false(out[0]);
	/* the floor: a lucky 1 us round does not make 20 us ones imprecise */
	bnd[0] = 20000;
	bnd[1] = 1000;
	bnd[2] = 30000;
	off[0] = off[2] = 0;
	off[1] = 5000000;
	assert_int_equal(imprecise(3), 0);
	/* one sample: nothing; huge bounds and offsets: no overflow */
	assert_int_equal(imprecise(1), 0);
	line(23000000000000ULL, 0, 0);
	for (int i = 0; i < N; i++) {
		bnd[i] = i == 30 ? 1 : UINT64_MAX - (uint64_t)i;
		off[i] = i % 2 ? INT64_MAX - i : INT64_MIN + i;
	}
	(void)imprecise(N);
	assert_false(out[30]);	/* the most precise stays */
}

static uint32_t
steep(uint32_t n, double units)
{
	memset(out, 0, sizeof out);
	return td_tsfilter_steep(ts, off, bnd, n, 100000, 1000, units, out);
}

static void
test_steep(void **state)
{
	int i;

	/* e2e-standby under ASan beside a fresh-tree build: both rounds of
	   a short recording from 3 probes, 2.8 ms apart over 171 ms (16,500
	   ppm); the true offset was -10.24 ms: the narrower one stays */
	ts[0] = 42853619219323ULL;
	off[0] = -3041409;
	bnd[0] = 11133486;
	ts[1] = 42853790145746ULL;
	off[1] = -5861676;
	bnd[1] = 7869156;
	assert_int_equal(steep(2, 1), 1);
	assert_true(out[0]);
	assert_false(out[1]);
	/* the same, the wider one second */
	bnd[1] = 12000000;
	assert_int_equal(steep(2, 1), 1);
	assert_false(out[0]);
	assert_true(out[1]);
	/* wide bounds on a line clocks do drift along (50 ppm): kept */
	line(23000000000000ULL, -22700000, 50e-6);
	for (i = 0; i < N; i++)
		bnd[i] = 5000000;
	assert_int_equal(steep(N, 1), 0);
	/* a precise line with a wide sample 4 ms off in the middle: that one
	   goes, and its neighbours then make a line again */
	bounds();
	off[30] += 4000000;
	bnd[30] = 900000;
	assert_int_equal(steep(N, 1), 1);
	for (i = 0; i < N; i++)
		assert_int_equal(out[i], i == 30);
	/* already set aside: not looked at, not counted */
	memset(out, 0, sizeof out);
	out[30] = true;
	assert_int_equal(td_tsfilter_steep(ts, off, bnd, N, 100000, 1000, 1,
	    out), 0);
	/* a coarse clock's step between precise samples: left alone */
	line(23000000000000ULL, 0, 0);
	for (i = 0; i < N; i++)
		bnd[i] = 30000;
	off[10] += 4000000;
	assert_int_equal(steep(N, 1), 0);
	/* x86-tsc: 2.4 cycles per ns, 1.2 ms off in 1 s with a 2 ms bound
	   (2.88e6 cycles in 2.4e9: 1,200 ppm) */
	line(55000000000000ULL, -202441541000LL, 0.15e-6);
	bounds();
	for (i = 0; i < N; i++)
		ts[i] = 55000000000000ULL + (uint64_t)i * 2400000000ULL;
	off[40] += 2880000;
	bnd[40] = 2000000;
	assert_int_equal(steep(N, 2.4), 1);
	assert_true(out[40]);
	/* every sample steep from the last: one always stays */
	for (i = 0; i < 5; i++) {
		ts[i] = 1000000000ULL * (uint64_t)(i + 1);
		off[i] = (int64_t)i * 10000000;
		bnd[i] = 1000000 + (uint64_t)i;
	}
	assert_int_equal(steep(5, 1), 4);
	assert_false(out[0]);
	/* one sample, or offsets at the ends of int64: no crash */
	assert_int_equal(steep(1, 1), 0);
	off[0] = INT64_MIN;
	off[1] = INT64_MAX;
	(void)steep(2, 1);
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
		cmocka_unit_test(test_imprecise),
		cmocka_unit_test(test_imprecise_few),
		cmocka_unit_test(test_steep),
	};

	return cmocka_run_group_tests_name("tsfilter", tests, NULL, NULL);
}
