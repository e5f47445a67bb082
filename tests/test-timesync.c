/*
 * test-timesync.c: how many time-sync samples tdlisten keeps for one
 * recording (listener/recording/timesync.c), no privileges, no network.
 *
 * Past TD_MAX_TSYNC_SAMPLES every other sample is left out before the
 * next is added: the count stays bounded however long the recording, the
 * first and the last samples stay, the order stays, and a checkpoint of
 * an older tdlisten holding more than that is thinned when it is loaded.
 *
 * Also the time-sync datagrams (proto/tsudp.c): NTP's on-wire math, its
 * bound holding for any split of the round trip, and the HMAC check that
 * makes the listener answer only its session's agent.
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
#include "tsudp.h"

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

/*
 * The exchange of a probe between an agent and a listener whose clock is
 * theta ahead, d1 ns out and d2 back, the listener holding it res ns;
 * the conversions of t2 and t4 off by e2 and e4, within their stated
 * errors c2 and c4.
 */
static void
exchange(int64_t theta, uint64_t d1, uint64_t d2, uint64_t res, int64_t e2,
    int64_t e4, uint64_t c2, uint64_t c4, int64_t *off, uint64_t *bound)
{
	struct td_tsudp r;
	uint64_t t4;
	int64_t delay;

	memset(&r, 0, sizeof r);
	r.type = TD_TSUDP_REPLY;
	r.t1 = 5000000000ULL;
	r.t2 = (uint64_t)((int64_t)(r.t1 + d1) + theta + e2);
	r.t3 = (uint64_t)((int64_t)(r.t1 + d1) + theta) + res;
	r.err = c2;
	t4 = (uint64_t)((int64_t)(r.t1 + d1 + res + d2) + e4);
	assert_int_equal(td_tsudp_offset(&r, t4, c4, off, bound, &delay), 0);
}

/* offset = ((t2 - t1) + (t3 - t4)) / 2; the residence drops out. */
static void
test_ntp_math(void **state)
{
	int64_t off;
	uint64_t bound;

	(void)state;
	/* symmetric: exact, whatever the listener's loop took */
	exchange(123456789, 3000, 3000, 0, 0, 0, 0, 0, &off, &bound);
	assert_int_equal(off, 123456789);
	assert_int_equal(bound, 3000 + 1);
	exchange(123456789, 3000, 3000, 40000000, 0, 0, 0, 0, &off, &bound);
	assert_int_equal(off, 123456789);
	assert_int_equal(bound, 3000 + 1);
	/* negative offsets too */
	exchange(-987654321, 2000, 2000, 500, 0, 0, 0, 0, &off, &bound);
	assert_int_equal(off, -987654321);
	/* lopsided: off by half the difference, within the bound */
	exchange(1000, 5000, 1000, 0, 0, 0, 0, 0, &off, &bound);
	assert_int_equal(off, 1000 + 2000);
	assert_true(bound >= 2000);
}

/* Whatever the split of the delay and the conversions, within the bound. */
static void
test_ntp_bound(void **state)
{
	static const uint64_t d[] = { 0, 1, 7, 999, 3000, 100000, 5000000 };
	static const int64_t e[] = { -40, -1, 0, 13, 40 };
	uint32_t i, j, k, l;
	uint64_t bound;
	int64_t off, err;

	(void)state;
	for (i = 0; i < sizeof d / sizeof *d; i++)
		for (j = 0; j < sizeof d / sizeof *d; j++)
			for (k = 0; k < sizeof e / sizeof *e; k++)
				for (l = 0; l < sizeof e / sizeof *e; l++) {
					exchange(-77777, d[i], d[j], 12345,
					    e[k], e[l], 40, 40, &off, &bound);
					err = off + 77777;
					assert_true((uint64_t)(err < 0 ? -err :
					    err) <= bound);
				}
}

/* Times that cannot be causal are refused. */
static void
test_ntp_refused(void **state)
{
	struct td_tsudp r;
	uint64_t bound;
	int64_t off, delay;

	(void)state;
	memset(&r, 0, sizeof r);
	r.t1 = 1000000;
	r.t2 = 2000000;
	r.t3 = 2000100;
	/* received before it was sent */
	assert_int_equal(td_tsudp_offset(&r, 999999, 0, &off, &bound,
	    &delay), -1);
	/* the listener held it longer than the whole round trip */
	assert_int_equal(td_tsudp_offset(&r, 1000050, 10, &off, &bound,
	    &delay), -1);
	/* sent before it was received */
	r.t3 = 1999000;
	assert_int_equal(td_tsudp_offset(&r, 1005000, 0, &off, &bound,
	    &delay), -1);
}

/* The MAC: only the key's holder makes a datagram that passes. */
static void
test_hmac(void **state)
{
	uint8_t key[TD_TSUDP_KEY_LEN], other[TD_TSUDP_KEY_LEN];
	uint8_t buf[TD_TSUDP_LEN], bad[TD_TSUDP_LEN];
	struct td_tsudp m, n;
	size_t i;

	(void)state;
	memset(key, 7, sizeof key);
	memset(other, 7, sizeof other);
	other[31] ^= 1;
	memset(&m, 0, sizeof m);
	m.type = TD_TSUDP_PROBE;
	m.id = 0x0123456789abcdefULL;
	m.round = 3;
	m.seq = 9;
	m.t1 = 42;
	td_tsudp_pack(buf, &m, key);
	assert_true(td_tsudp_check(buf, sizeof buf, key));
	assert_false(td_tsudp_check(buf, sizeof buf, other));
	assert_false(td_tsudp_check(buf, sizeof buf - 1, key));
	assert_int_equal(td_tsudp_peek(buf, sizeof buf, &n), 0);
	assert_int_equal(n.type, TD_TSUDP_PROBE);
	assert_true(n.id == m.id && n.round == 3 && n.seq == 9 && n.t1 == 42);
	/* every bit of it is covered */
	for (i = 0; i < sizeof buf * 8; i++) {
		memcpy(bad, buf, sizeof bad);
		bad[i / 8] ^= (uint8_t)(1 << (i % 8));
		assert_false(td_tsudp_check(bad, sizeof bad, key));
	}
	/* not a datagram of ours */
	assert_int_equal(td_tsudp_peek(buf, sizeof buf - 1, &n), -1);
	memcpy(bad, buf, sizeof bad);
	bad[0] = 'X';
	assert_int_equal(td_tsudp_peek(bad, sizeof bad, &n), -1);
	memcpy(bad, buf, sizeof bad);
	bad[5] = 9;
	assert_int_equal(td_tsudp_peek(bad, sizeof bad, &n), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thin_once),
		cmocka_unit_test(test_thin_day),
		cmocka_unit_test(test_drop),
		cmocka_unit_test(test_load_old),
		cmocka_unit_test(test_ntp_math),
		cmocka_unit_test(test_ntp_bound),
		cmocka_unit_test(test_ntp_refused),
		cmocka_unit_test(test_hmac),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
