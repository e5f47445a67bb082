/*
 * test-page.c: the ring-buffer page walker (shared/page.c).
 *
 * Pages are built event by event with tests/testdata.c for every event type
 * of header_event; td_page_parse() must count exactly the data events, and
 * libtraceevent's kbuffer (what trace-cmd reads pages with) is used as an
 * independent oracle for the count and the timestamp of every event.
 * Malformed pages must fail with EBADMSG and never read out of bounds
 * (run under ASan to see the latter).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <kbuffer.h>

#include "page.h"
#include "testdata.h"
#include "banned.h"

#define PS		TESTDATA_PAGE_SIZE
#define MAX_EV		1024

/* Events of a page as kbuffer sees them. */
struct kb_events {
	unsigned int		 n;
	unsigned long long	 ts[MAX_EV];
	int			 missed;
};

static void
kb_walk(void *page, struct kb_events *k)
{
	struct kbuffer *kb;
	unsigned long long ts;
	void *data;

	kb = kbuffer_alloc(KBUFFER_LSIZE_8, KBUFFER_ENDIAN_SAME_AS_HOST);
	assert_non_null(kb);
	assert_int_equal(kbuffer_load_subbuffer(kb, page), 0);
	k->n = 0;
	k->missed = kbuffer_missed_events(kb);
	for (data = kbuffer_read_event(kb, &ts); data != NULL;
	    data = kbuffer_next_event(kb, &ts)) {
		assert_true(k->n < MAX_EV);
		k->ts[k->n++] = ts;
	}
	kbuffer_free(kb);
}

static void
parse_ok(const void *page, uint64_t want, struct td_page_info *info)
{
	assert_int_equal(td_page_parse(page, PS, 8, info), 0);
	assert_int_equal(info->events, want);
}

static void
parse_bad(const void *page, size_t size, int commit_size)
{
	struct td_page_info info;

	errno = 0;
	assert_int_equal(td_page_parse(page, size, commit_size, &info), -1);
	assert_int_equal(errno, EBADMSG);
}

/* Every type_len 1..28 once, each with its own payload size. */
static void
test_type_len_all(void **state)
{
	uint8_t page[PS], payload[112];
	struct testdata_page p;
	struct td_page_info info;
	struct kb_events k;
	unsigned int t;
	uint64_t ts[28];

	memset(payload, 0xab, sizeof payload);
	testdata_page_init(&p, page, PS, 1000);
	for (t = 1; t <= 28; t++) {
		assert_int_equal(testdata_page_event(&p, t, t * 3, payload,
		    t * 4), 0);
		ts[t - 1] = p.ts;
	}
	assert_int_equal(testdata_page_finish(&p, false, false, 0), 0);
	parse_ok(page, 28, &info);
	assert_int_equal(info.timestamp, 1000);
	assert_int_equal(info.data_len, p.len);
	assert_false(info.missed);
	kb_walk(page, &k);
	assert_int_equal(k.n, 28);
	for (t = 0; t < 28; t++)
		assert_int_equal(k.ts[t], ts[t]);
}

/* A page per type_len, filled to the brim. */
static void
test_type_len_full_pages(void **state)
{
	uint8_t page[PS], payload[112];
	struct testdata_page p;
	struct td_page_info info;
	struct kb_events k;
	unsigned int t, n;

	memset(payload, 0x5a, sizeof payload);
	for (t = 1; t <= 28; t++) {
		testdata_page_init(&p, page, PS, 77);
		for (n = 0; testdata_page_event(&p, t, 1, payload, t * 4) == 0;
		    n++)
			;
		assert_int_equal(n, (PS - 16) / (4 + t * 4));
		testdata_page_finish(&p, false, false, 0);
		parse_ok(page, n, &info);
		kb_walk(page, &k);
		assert_int_equal(k.n, n);
		assert_int_equal(k.ts[n - 1], 77 + n);
	}
}

/* Type 0 events with array[0] holding lengths past the type_len range. */
static void
test_long_events(void **state)
{
	uint8_t page[PS], payload[1200];
	struct testdata_page p;
	struct td_page_info info;
	struct kb_events k;
	static const size_t lens[] = { 113, 114, 115, 116, 200, 333, 1000,
	    4, 1 };
	size_t i;

	memset(payload, 0x11, sizeof payload);
	testdata_page_init(&p, page, PS, 5);
	for (i = 0; i < sizeof lens / sizeof lens[0]; i++)
		assert_int_equal(testdata_page_event(&p, 0, 2, payload,
		    lens[i]), 0);
	/* mixed with small ones through the kernel's own choice */
	assert_int_equal(testdata_page_add(&p, p.ts + 9, payload, 40), 0);
	assert_int_equal(testdata_page_add(&p, p.ts + 9, payload, 140), 0);
	testdata_page_finish(&p, false, false, 0);
	parse_ok(page, 11, &info);
	kb_walk(page, &k);
	assert_int_equal(k.n, 11);
	assert_int_equal(k.ts[10], p.ts);
}

/* Time extends (type 30) move time on but are not events. */
static void
test_time_extend(void **state)
{
	uint8_t page[PS], payload[24] = { 0 };
	struct testdata_page p;
	struct td_page_info info;
	struct kb_events k;
	uint64_t ts[4];

	testdata_page_init(&p, page, PS, 1ULL << 40);
	assert_int_equal(testdata_page_extend(&p, (1ULL << 27) + 5), 0);
	assert_int_equal(testdata_page_event(&p, 6, 0, payload, 24), 0);
	ts[0] = p.ts;
	/* the builder inserts an extend for a delta above 27 bits */
	assert_int_equal(testdata_page_add(&p, p.ts + (3ULL << 33), payload,
	    24), 0);
	ts[1] = p.ts;
	assert_int_equal(testdata_page_extend(&p, 12345), 0);
	assert_int_equal(testdata_page_event(&p, 6, 7, payload, 24), 0);
	ts[2] = p.ts;
	assert_int_equal(testdata_page_extend(&p, (1ULL << 58) + 1), 0);
	assert_int_equal(testdata_page_event(&p, 6, 1, payload, 24), 0);
	ts[3] = p.ts;
	testdata_page_finish(&p, false, false, 0);
	parse_ok(page, 4, &info);
	kb_walk(page, &k);
	assert_int_equal(k.n, 4);
	assert_memory_equal(k.ts, ts, sizeof ts);
}

/* Absolute time stamps (type 31) set the time and are not events. */
static void
test_time_stamp(void **state)
{
	uint8_t page[PS], payload[8] = { 0 };
	struct testdata_page p;
	struct td_page_info info;
	struct kb_events k;

	testdata_page_init(&p, page, PS, 100);
	assert_int_equal(testdata_page_event(&p, 2, 10, payload, 8), 0);
	assert_int_equal(testdata_page_stamp(&p, 987654321012ULL), 0);
	assert_int_equal(testdata_page_event(&p, 2, 0, payload, 8), 0);
	assert_int_equal(testdata_page_event(&p, 2, 3, payload, 8), 0);
	assert_int_equal(testdata_page_stamp(&p, 987654400000ULL), 0);
	assert_int_equal(testdata_page_event(&p, 2, 1, payload, 8), 0);
	testdata_page_finish(&p, false, false, 0);
	parse_ok(page, 4, &info);
	kb_walk(page, &k);
	assert_int_equal(k.n, 4);
	assert_int_equal(k.ts[0], 110);
	assert_int_equal(k.ts[1], 987654321012ULL);
	assert_int_equal(k.ts[2], 987654321015ULL);
	assert_int_equal(k.ts[3], 987654400001ULL);
}

/* Padding with a delta is a discarded event: skipped, walk goes on. */
static void
test_padding_delta(void **state)
{
	uint8_t page[PS], payload[16] = { 0 };
	struct testdata_page p;
	struct td_page_info info;
	struct kb_events k;

	testdata_page_init(&p, page, PS, 1);
	assert_int_equal(testdata_page_event(&p, 4, 1, payload, 16), 0);
	assert_int_equal(testdata_page_padding(&p, 1, 8), 0);
	assert_int_equal(testdata_page_padding(&p, 3, 100), 0);
	assert_int_equal(testdata_page_event(&p, 4, 1, payload, 16), 0);
	assert_int_equal(testdata_page_padding(&p, 2, 2000), 0);
	assert_int_equal(testdata_page_event(&p, 4, 1, payload, 16), 0);
	testdata_page_finish(&p, false, false, 0);
	parse_ok(page, 3, &info);
	kb_walk(page, &k);
	assert_int_equal(k.n, 3);
	assert_int_equal(k.ts[2], p.ts);
}

/* Padding without a delta ends the data of the page. */
static void
test_padding_null(void **state)
{
	uint8_t page[PS], payload[16] = { 0 };
	struct testdata_page p;
	struct td_page_info info;
	struct kb_events k;
	uint32_t word;
	size_t room;

	testdata_page_init(&p, page, PS, 1);
	assert_int_equal(testdata_page_event(&p, 4, 1, payload, 16), 0);
	assert_int_equal(testdata_page_event(&p, 4, 1, payload, 16), 0);
	room = testdata_page_room(&p);
	assert_int_equal(testdata_page_padding(&p, 0, room), 0);
	testdata_page_finish(&p, false, false, 0);
	assert_int_equal(p.len, PS - 16);
	parse_ok(page, 2, &info);
	kb_walk(page, &k);
	assert_int_equal(k.n, 2);

	/* whatever follows a null padding is not looked at */
	testdata_page_init(&p, page, PS, 1);
	assert_int_equal(testdata_page_event(&p, 4, 1, payload, 16), 0);
	assert_int_equal(testdata_page_padding(&p, 0, 8), 0);
	assert_int_equal(testdata_page_event(&p, 4, 1, payload, 16), 0);
	/* behind the padding: a type 0 header with a length past the end */
	word = 0;
	memcpy(page + 16 + 28, &word, 4);
	word = 0xfffffff0u;
	memcpy(page + 16 + 32, &word, 4);
	testdata_page_finish(&p, false, false, 0);
	parse_ok(page, 1, &info);
}

/* Missed-events flag, with and without the stored count. */
static void
test_missed(void **state)
{
	uint8_t page[PS], payload[8] = { 0 };
	struct testdata_page p;
	struct td_page_info info;
	struct kb_events k;

	testdata_page_init(&p, page, PS, 1);
	testdata_page_event(&p, 2, 1, payload, 8);
	testdata_page_finish(&p, true, false, 0);
	parse_ok(page, 1, &info);
	assert_true(info.missed);
	assert_false(info.missed_stored);
	kb_walk(page, &k);
	assert_int_equal(k.missed, -1);

	testdata_page_init(&p, page, PS, 1);
	testdata_page_event(&p, 2, 1, payload, 8);
	testdata_page_event(&p, 2, 1, payload, 8);
	assert_int_equal(testdata_page_finish(&p, true, true, 4242), 0);
	parse_ok(page, 2, &info);
	assert_true(info.missed);
	assert_true(info.missed_stored);
	assert_int_equal(info.missed_count, 4242);
	kb_walk(page, &k);
	assert_int_equal(k.missed, 4242);
	assert_int_equal(k.n, 2);

	/* a full page has no room for the count */
	testdata_page_init(&p, page, PS, 1);
	while (testdata_page_event(&p, 1, 1, payload, 4) == 0)
		;
	assert_int_equal(testdata_page_finish(&p, true, true, 1), -1);
	assert_int_equal(testdata_page_finish(&p, true, false, 0), 0);
	parse_ok(page, (PS - 16) / 8, &info);
	assert_true(info.missed);
}

/* Empty page and a 32-bit commit field. */
static void
test_empty_and_commit4(void **state)
{
	uint8_t page[PS];
	struct testdata_page p;
	struct td_page_info info;
	uint32_t commit = 28 | (1u << 31), word;
	uint64_t ts = 55;

	testdata_page_init(&p, page, PS, 9);
	testdata_page_finish(&p, false, false, 0);
	parse_ok(page, 0, &info);
	assert_int_equal(info.data_len, 0);
	assert_int_equal(info.timestamp, 9);

	/* 32-bit kernel: u64 ts, u32 commit, data at 12 */
	memset(page, 0, PS);
	memcpy(page, &ts, 8);
	memcpy(page + 8, &commit, 4);
	word = 2 | (5 << 5);			/* 12 bytes */
	memcpy(page + 12, &word, 4);
	word = 30 | (1 << 5);			/* extend, 8 bytes */
	memcpy(page + 24, &word, 4);
	word = 1 | (1 << 5);			/* 8 bytes */
	memcpy(page + 32, &word, 4);
	assert_int_equal(td_page_parse(page, PS, 4, &info), 0);
	assert_int_equal(info.events, 2);
	assert_true(info.missed);
	assert_int_equal(info.timestamp, 55);
}

/* Pages of the synthetic recording: counts and times match kbuffer. */
static void
test_synthetic_pages(void **state)
{
	struct testdata_meta m;
	struct testdata_expect exp;
	struct td_page_info info;
	struct kb_events k;
	uint8_t page[PS];
	uint64_t before, i;
	unsigned int n;
	int cpu;

	testdata_meta_init(&m);
	memset(&exp, 0, sizeof exp);
	for (cpu = 0; cpu < 3; cpu++)
		for (n = 0; n < 25; n++) {
			before = exp.events[cpu];
			testdata_cpu_page(&m, cpu, n, page, &exp);
			parse_ok(page, exp.events[cpu] - before, &info);
			assert_true(info.events > 0);
			kb_walk(page, &k);
			assert_int_equal(k.n, info.events);
			for (i = 0; i < k.n; i++)
				assert_int_equal(k.ts[i],
				    exp.ts[cpu][before + i]);
			if (n % 5 == 4)	/* filled to the brim */
				assert_true(info.data_len > PS - 16 - 180);
		}
	testdata_expect_free(&exp);
	testdata_meta_free(&m);
}

/* Lengths that run past the page or the data fail with EBADMSG. */
static void
test_malformed(void **state)
{
	uint8_t page[PS], payload[112] = { 0 };
	struct testdata_page p;
	uint64_t commit;
	uint32_t word;

	/* commit larger than the data area */
	testdata_page_init(&p, page, PS, 1);
	commit = PS - 16 + 1;
	memcpy(page + 8, &commit, 8);
	parse_bad(page, PS, 8);
	commit = (1u << 27) - 1;
	memcpy(page + 8, &commit, 8);
	parse_bad(page, PS, 8);

	/* an event longer than the committed data */
	testdata_page_init(&p, page, PS, 1);
	testdata_page_event(&p, 28, 1, payload, 112);
	p.len -= 4;
	testdata_page_finish(&p, false, false, 0);
	parse_bad(page, PS, 8);

	/* type 0 with array[0] zero, huge, or missing */
	testdata_page_init(&p, page, PS, 1);
	testdata_page_event(&p, 0, 1, payload, 112);
	word = 0;
	memcpy(page + 20, &word, 4);
	testdata_page_finish(&p, false, false, 0);
	parse_bad(page, PS, 8);
	word = 0xfffffff0u;
	memcpy(page + 20, &word, 4);
	parse_bad(page, PS, 8);
	commit = 4;
	memcpy(page + 8, &commit, 8);
	parse_bad(page, PS, 8);

	/* padding with a delta whose length runs off the data */
	testdata_page_init(&p, page, PS, 1);
	testdata_page_padding(&p, 5, 64);
	word = 4000;
	memcpy(page + 20, &word, 4);
	testdata_page_finish(&p, false, false, 0);
	parse_bad(page, PS, 8);
	commit = 4;				/* array[0] cut off */
	memcpy(page + 8, &commit, 8);
	parse_bad(page, PS, 8);

	/* time extend and stamp cut in half */
	testdata_page_init(&p, page, PS, 1);
	testdata_page_extend(&p, 1ULL << 30);
	p.len = 4;
	testdata_page_finish(&p, false, false, 0);
	parse_bad(page, PS, 8);
	testdata_page_init(&p, page, PS, 1);
	testdata_page_stamp(&p, 1ULL << 30);
	p.len = 4;
	testdata_page_finish(&p, false, false, 0);
	parse_bad(page, PS, 8);

	/* data length not a whole event header */
	testdata_page_init(&p, page, PS, 1);
	testdata_page_event(&p, 1, 1, payload, 4);
	p.len = 10;
	testdata_page_finish(&p, false, false, 0);
	parse_bad(page, PS, 8);

	/* stored missed count past the page */
	testdata_page_init(&p, page, PS, 1);
	commit = (PS - 16 - 4) | (1ULL << 31) | (1ULL << 30);
	memcpy(page + 8, &commit, 8);
	parse_bad(page, PS, 8);

	/* bad commit size and pages too small for the header */
	testdata_page_init(&p, page, PS, 1);
	parse_bad(page, PS, 3);
	parse_bad(page, PS, 0);
	parse_bad(page, 15, 8);
	parse_bad(page, 11, 4);
}

/* Random pages never crash the walker; errors are EBADMSG only. */
static void
test_random_pages(void **state)
{
	uint8_t page[PS];
	struct td_page_info info;
	uint64_t s = 12345, commit;
	int i, j, ok = 0;

	for (i = 0; i < 20000; i++) {
		for (j = 0; j < PS; j++) {
			s = s * 6364136223846793005ULL + 1;
			page[j] = (uint8_t)(s >> 56);
			/* mostly small type_len values, like real data */
			if (j % 4 == 0 && (s >> 40) % 3 == 0)
				page[j] &= 0x3f;
		}
		commit = (s >> 20) % (PS + 64);
		if (i % 4 == 0)
			commit |= 1ULL << 31 | 1ULL << 30;
		memcpy(page + 8, &commit, 8);
		errno = 0;
		if (td_page_parse(page, PS, i % 3 ? 8 : 4, &info) == 0)
			ok++;
		else
			assert_int_equal(errno, EBADMSG);
	}
	assert_true(ok > 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_type_len_all),
		cmocka_unit_test(test_type_len_full_pages),
		cmocka_unit_test(test_long_events),
		cmocka_unit_test(test_time_extend),
		cmocka_unit_test(test_time_stamp),
		cmocka_unit_test(test_padding_delta),
		cmocka_unit_test(test_padding_null),
		cmocka_unit_test(test_missed),
		cmocka_unit_test(test_empty_and_commit4),
		cmocka_unit_test(test_synthetic_pages),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_random_pages),
	};

	return cmocka_run_group_tests_name("page", tests, NULL, NULL);
}
