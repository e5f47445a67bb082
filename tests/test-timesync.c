/*
 * test-timesync.c: how many time-sync samples tdlisten keeps for one
 * recording (listener/timesync.c), no privileges, no network.
 *
 * Past TD_MAX_TSYNC_SAMPLES every other sample is left out before the
 * next is added: the count stays bounded however long the recording, the
 * first and the last samples stay, the order stays, and a checkpoint of
 * an older tdlisten holding more than that is thinned when it is loaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "cursor.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "timesync.h"

static struct td_tsync_sample
sample(uint64_t ts)
{
	struct td_tsync_sample s;

	memset(&s, 0, sizeof s);
	s.round = (uint32_t)ts;
	s.probes = 64;
	s.ts = ts;
	s.offset = -1000 + (int64_t)(ts % 7);
	s.scaling = 1;
	s.bound = 20000;
	s.rtt = 40000;
	return s;
}

/* The samples are in strictly increasing order, first and last as given. */
static void
check_order(const struct timesync *t, uint64_t first, uint64_t last)
{
	const struct td_tsync_sample *s;
	uint32_t i, n;

	s = timesync_samples(t, &n);
	assert_true(n >= 2);
	assert_int_equal(s[0].ts, first);
	assert_int_equal(s[n - 1].ts, last);
	for (i = 1; i < n; i++)
		assert_true(s[i].ts > s[i - 1].ts);
}

static void
test_thin_once(void **state)
{
	struct timesync *t = timesync_new();
	struct td_tsync_sample s;
	const struct td_tsync_sample *k;
	uint32_t i, n;

	(void)state;
	for (i = 1; i <= TD_MAX_TSYNC_SAMPLES; i++) {
		s = sample(i);
		assert_true(timesync_add(t, &s));
	}
	assert_int_equal(timesync_count(t), TD_MAX_TSYNC_SAMPLES);
	s = sample(TD_MAX_TSYNC_SAMPLES + 1);
	assert_true(timesync_add(t, &s));
	/* 1, 3, 5, ..., 4095 and the latest, 4097: a grid of stride 2 */
	k = timesync_samples(t, &n);
	assert_int_equal(n, TD_MAX_TSYNC_SAMPLES / 2 + 1);
	for (i = 0; i < n; i++)
		assert_int_equal(k[i].ts, 2 * i + 1);
	assert_int_equal(k[n - 1].offset,
	    sample(TD_MAX_TSYNC_SAMPLES + 1).offset);
	/* the next is off the grid: it is the latest, then replaced */
	s = sample(TD_MAX_TSYNC_SAMPLES + 2);
	assert_true(timesync_add(t, &s));
	assert_int_equal(timesync_count(t), n + 1);
	s = sample(TD_MAX_TSYNC_SAMPLES + 3);
	assert_true(timesync_add(t, &s));
	assert_int_equal(timesync_count(t), n + 1);
	k = timesync_samples(t, &n);
	assert_int_equal(k[n - 1].ts, TD_MAX_TSYNC_SAMPLES + 3);
	s = sample(TD_MAX_TSYNC_SAMPLES + 4);
	assert_true(timesync_add(t, &s));
	k = timesync_samples(t, &n);
	assert_int_equal(k[n - 2].ts, TD_MAX_TSYNC_SAMPLES + 3);
	assert_int_equal(k[n - 1].ts, TD_MAX_TSYNC_SAMPLES + 4);
	check_order(t, 1, TD_MAX_TSYNC_SAMPLES + 4);
	timesync_free(t);
}

/* A day at a round a second: bounded, the whole day covered. */
static void
test_thin_day(void **state)
{
	struct timesync *t = timesync_new();
	struct td_tsync_sample s;
	const struct td_tsync_sample *k;
	uint64_t gap, maxgap = 0;
	uint32_t i, n, most = 0;

	(void)state;
	for (i = 1; i <= 86400; i++) {
		s = sample(i);
		assert_true(timesync_add(t, &s));
		if (timesync_count(t) > most)
			most = timesync_count(t);
	}
	assert_int_equal(most, TD_MAX_TSYNC_SAMPLES);
	check_order(t, 1, 86400);
	k = timesync_samples(t, &n);
	assert_true(n > TD_MAX_TSYNC_SAMPLES / 2);
	for (i = 1; i < n; i++) {
		gap = k[i].ts - k[i - 1].ts;
		if (gap > maxgap)
			maxgap = gap;
	}
	/* evenly: one stride apart, the latest sample nearer */
	for (i = 1; i + 1 < n; i++)
		assert_int_equal(k[i].ts - k[i - 1].ts, k[1].ts - k[0].ts);
	assert_true(maxgap <= 86400 / (TD_MAX_TSYNC_SAMPLES / 2));
	timesync_free(t);
}

/* Bad samples are still dropped and counted, not thinned. */
static void
test_drop(void **state)
{
	struct timesync *t = timesync_new();
	struct td_tsync_sample s = sample(10);

	(void)state;
	assert_true(timesync_add(t, &s));
	assert_false(timesync_add(t, &s));	/* not after the last */
	s = sample(11);
	s.bound = TD_MAX_TSYNC_BOUND + 1;
	assert_false(timesync_add(t, &s));
	assert_int_equal(timesync_count(t), 1);
	timesync_free(t);
}

/* A checkpoint (version 3 and later) of an older tdlisten: 5000 samples. */
static void
test_load_old(void **state)
{
	struct timesync *t = timesync_new();
	struct td_tsync_sample s;
	struct td_buf b;
	struct td_cur c;
	uint32_t i, n = 5000;

	(void)state;
	td_buf_init(&b, 1u << 20);
	assert_int_equal(td_buf_add_u32(&b, n), 0);
	assert_int_equal(td_buf_add_u32(&b, 3), 0);	/* dropped */
	for (i = 1; i <= n; i++) {
		s = sample(i);
		assert_int_equal(td_buf_add_u32(&b, s.round), 0);
		assert_int_equal(td_buf_add_u32(&b, s.probes), 0);
		assert_int_equal(td_buf_add_u64(&b, s.ts), 0);
		assert_int_equal(td_buf_add_u64(&b, (uint64_t)s.offset), 0);
		assert_int_equal(td_buf_add_u64(&b, s.scaling), 0);
		assert_int_equal(td_buf_add_u32(&b, s.frac), 0);
		assert_int_equal(td_buf_add_u64(&b, s.bound), 0);
		assert_int_equal(td_buf_add_u64(&b, s.rtt), 0);
	}
	assert_int_equal(td_buf_add_u32(&b, 0), 0);	/* no TSC2NSEC */
	assert_int_equal(td_buf_add_u32(&b, 0), 0);
	td_cur_init(&c, b.data, b.len);
	assert_int_equal(timesync_load(t, &c, 5), 0);
	assert_true(timesync_count(t) <= TD_MAX_TSYNC_SAMPLES);
	check_order(t, 1, n);
	/* saved and loaded again: the same samples */
	td_buf_free(&b);
	td_buf_init(&b, 1u << 20);
	assert_int_equal(timesync_save(t, &b), 0);
	n = timesync_count(t);
	timesync_free(t);
	t = timesync_new();
	td_cur_init(&c, b.data, b.len);
	assert_int_equal(timesync_load(t, &c, 5), 0);
	assert_int_equal(timesync_count(t), n);
	check_order(t, 1, 5000);
	td_buf_free(&b);
	timesync_free(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thin_once),
		cmocka_unit_test(test_thin_day),
		cmocka_unit_test(test_drop),
		cmocka_unit_test(test_load_old),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
