/*
 * test-tally.c: tdlisten's counters for its metrics
 * (listener/recording/tally.c).
 *
 * A CPUSTAT text gives its overrun and dropped events, counted by cause
 * (the numbers at the start of their lines only, the text not trusted to
 * end); bytes, events, pages marked and resumes add up; the ended
 * recordings are a ring of TD_TALLY_ENDED, newest first, and each end is
 * counted as done or early.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tally.h"
#include "banned.h"

static void
test_cpustat(void **state)
{
	static const char stat[] = "CPU: 1\nentries: 120\noverrun: 17\n"
	    "commit overrun: 4\nbytes: 8000\noldest event ts: 1.5\n"
	    "now ts: 2.5\ndropped events: 5\nread events: 90\n";
	static const char none[] = "CPU: 0\nentries: 3\nbytes: 10\n";
	const struct tally_totals *t = tally_totals();
	char big[2048];

	/* without its final NUL: a text is read within its length */
	assert_int_equal(tally_cpustat(stat, sizeof stat - 1), 22);
	assert_int_equal(t->lost[TALLY_OVERRUN], 17);
	assert_int_equal(t->lost[TALLY_DROPPED], 5);
	assert_int_equal(tally_cpustat(none, sizeof none - 1), 0);
	/* cut before "dropped events": that one is not seen */
	assert_int_equal(tally_cpustat(stat, strstr(stat, "dropped") -
	    stat), 17);
	assert_int_equal(t->lost[TALLY_OVERRUN], 34);
	assert_int_equal(t->lost[TALLY_DROPPED], 5);
	/* past the 1 KiB read: not counted */
	memset(big, 'x', sizeof big);
	memcpy(big + 1500, "\noverrun: 9\n", 12);
	assert_int_equal(tally_cpustat(big, sizeof big), 0);
	assert_string_equal(tally_loss_name(TALLY_OVERRUN), "overrun");
	assert_string_equal(tally_loss_name(TALLY_DROPPED), "dropped");
}

static void
test_sums(void **state)
{
	const struct tally_totals *t = tally_totals();

	tally_bytes(1000);
	tally_bytes(24);
	tally_events(7, false);
	tally_events(3, true);
	tally_resume();
	assert_int_equal(t->bytes, 1024);
	assert_int_equal(t->events, 10);
	assert_int_equal(t->missed_pages, 1);
	assert_int_equal(t->resumes, 1);
}

static void
test_ended(void **state)
{
	const struct tally_totals *t = tally_totals();
	struct tally_rec r;
	int i;

	assert_null(tally_ended_at(0));
	for (i = 0; i < TD_TALLY_ENDED + 8; i++) {
		memset(&r, 0, sizeof r);
		snprintf(r.identity, sizeof r.identity, "host%d", i);
		r.state = i % 4 == 0 ? "ended early" : "done";
		r.events = (uint64_t)i;
		tally_ended(&r);
	}
	assert_int_equal(t->ended_early, 10);
	assert_int_equal(t->done, 30);
	assert_string_equal(tally_ended_at(0)->identity, "host39");
	assert_int_equal(tally_ended_at(0)->events, 39);
	assert_string_equal(tally_ended_at(TD_TALLY_ENDED - 1)->identity,
	    "host8");
	assert_null(tally_ended_at(TD_TALLY_ENDED));
	assert_null(tally_ended_at(-1));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpustat),
		cmocka_unit_test(test_sums),
		cmocka_unit_test(test_ended),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
