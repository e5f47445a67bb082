/*
 * test-pagebuild.c: the ring-buffer page builder (shared/pagebuild.c).
 *
 * Pages are read back with libtraceevent's kbuffer, what trace-cmd reads
 * them with, as the oracle: every event's time and bytes must come back,
 * across time extends, long events, full pages and gaps that need a new
 * page; td_page_parse() (our own walker) must count the same events.
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
#include "pagebuild.h"
#include "banned.h"

#define PS		4096
#define MAX_EV		4096

/* One event handed to the builder. */
struct want {
	uint64_t	 ts;
	uint8_t		 data[1024];
	size_t		 len;
};

/* Pages taken from the builder, and the events that went in. */
struct run {
	uint8_t		*pages;
	unsigned int	 npages;
	struct want	*ev;
	unsigned int	 nev;
	int		 commit_size;
};

static void
run_init(struct run *r, int commit_size)
{
	memset(r, 0, sizeof *r);
	r->pages = calloc(MAX_EV, PS);
	r->ev = calloc(MAX_EV, sizeof *r->ev);
	assert_non_null(r->pages);
	assert_non_null(r->ev);
	r->commit_size = commit_size;
}

static void
run_free(struct run *r)
{
	free(r->pages);
	free(r->ev);
}

static void
run_take(struct run *r, struct td_pagebuild *b)
{
	const void *p = td_pagebuild_take(b);

	assert_non_null(p);
	assert_true(r->npages < MAX_EV);
	memcpy(r->pages + (size_t)r->npages++ * PS, p, PS);
}

/* Add an event, taking the page when it is full. */
static void
run_add(struct run *r, struct td_pagebuild *b, uint64_t ts, size_t len)
{
	struct want *w;
	size_t i;

	assert_true(r->nev < MAX_EV && len <= sizeof w->data);
	w = &r->ev[r->nev++];
	w->ts = ts;
	w->len = len;
	for (i = 0; i < len; i++)
		w->data[i] = (uint8_t)(r->nev * 31 + i);
	if (td_pagebuild_add(b, ts, w->data, len) == 0)
		return;
	assert_int_equal(errno, ENOSPC);
	run_take(r, b);
	assert_int_equal(td_pagebuild_add(b, ts, w->data, len), 0);
}

/* Every page through kbuffer and td_page_parse: the events that went in. */
static void
run_check(struct run *r)
{
	struct td_page_info info;
	struct kbuffer *kb;
	unsigned long long ts;
	unsigned int pg, n = 0, on_page;
	void *data;

	kb = kbuffer_alloc(r->commit_size == 8 ? KBUFFER_LSIZE_8 :
	    KBUFFER_LSIZE_4, KBUFFER_ENDIAN_SAME_AS_HOST);
	assert_non_null(kb);
	for (pg = 0; pg < r->npages; pg++) {
		uint8_t *page = r->pages + (size_t)pg * PS;

		assert_int_equal(td_page_parse(page, PS, r->commit_size,
		    &info), 0);
		assert_false(info.missed);
		assert_int_equal(kbuffer_load_subbuffer(kb, page), 0);
		on_page = 0;
		for (data = kbuffer_read_event(kb, &ts); data != NULL;
		    data = kbuffer_next_event(kb, &ts)) {
			assert_true(n < r->nev);
			assert_int_equal(ts, r->ev[n].ts);
			assert_true((size_t)kbuffer_event_size(kb) >=
			    r->ev[n].len);
			assert_memory_equal(data, r->ev[n].data,
			    r->ev[n].len);
			if (on_page == 0)
				assert_int_equal(info.timestamp, ts);
			n++;
			on_page++;
		}
		assert_int_equal(info.events, on_page);
		assert_true(on_page > 0);
	}
	assert_int_equal(n, r->nev);
	kbuffer_free(kb);
}

/* Small events, small deltas: one page, exact times and bytes. */
static void
test_small(void **state)
{
	struct td_pagebuild *b = td_pagebuild_new(PS, 8);
	struct run r;
	uint64_t ts = 1000;
	unsigned int i;

	run_init(&r, 8);
	assert_true(td_pagebuild_empty(b));
	for (i = 0; i < 20; i++) {
		run_add(&r, b, ts, 1 + i * 5);
		ts += i * 3;
	}
	assert_int_equal(td_pagebuild_events(b), 20);
	run_take(&r, b);
	assert_true(td_pagebuild_empty(b));
	assert_int_equal(td_pagebuild_events(b), 0);
	run_check(&r);
	td_pagebuild_free(b);
	run_free(&r);
}

/* Deltas at the edges of the 27-bit field and of a TIME_EXTEND. */
static void
test_deltas(void **state)
{
	static const uint64_t d[] = { 0, 1, (1u << 27) - 1, 1u << 27,
	    (1u << 27) + 1, 1ULL << 40, (1ULL << 59) - 1, 1ULL << 59,
	    (1ULL << 60) + 7, 5 };
	struct td_pagebuild *b = td_pagebuild_new(PS, 8);
	struct run r;
	uint64_t ts = 77;
	size_t i;

	run_init(&r, 8);
	run_add(&r, b, ts, 56);
	for (i = 0; i < sizeof d / sizeof d[0]; i++) {
		ts += d[i];
		run_add(&r, b, ts, 32);
	}
	run_take(&r, b);
	/* 2^59 and more take a new page each: three pages */
	assert_int_equal(r.npages, 3);
	run_check(&r);
	td_pagebuild_free(b);
	run_free(&r);
}

/* Events of 112 bytes and more: type_len 0 with a length word. */
static void
test_long(void **state)
{
	static const size_t lens[] = { 111, 112, 113, 114, 115, 116, 200,
	    1000, 1, 4, 1024 };
	struct td_pagebuild *b = td_pagebuild_new(PS, 8);
	struct run r;
	size_t i;

	run_init(&r, 8);
	for (i = 0; i < sizeof lens / sizeof lens[0]; i++)
		run_add(&r, b, 10 + i, lens[i]);
	run_take(&r, b);
	run_check(&r);
	td_pagebuild_free(b);
	run_free(&r);
}

/* Pages filled to the brim: exactly as many events as fit, then more. */
static void
test_full(void **state)
{
	struct td_pagebuild *b = td_pagebuild_new(PS, 8);
	struct run r;
	unsigned int i;

	run_init(&r, 8);
	/* 60 bytes an event (56 of data): 68 fit in 4080 */
	for (i = 0; i < 68; i++)
		run_add(&r, b, i, 56);
	assert_int_equal(r.npages, 0);
	run_add(&r, b, 68, 56);
	assert_int_equal(r.npages, 1);
	/* an extend needs 8 more bytes: it may not fit where the event would */
	for (i = 1; i < 67; i++)
		run_add(&r, b, 68 + i, 56);
	assert_int_equal(td_pagebuild_events(b), 67);
	run_add(&r, b, 1ULL << 33, 56);
	assert_int_equal(r.npages, 2);
	run_take(&r, b);
	run_check(&r);
	td_pagebuild_free(b);
	run_free(&r);
}

/* Many events of random sizes and gaps, over many pages. */
static void
test_random(void **state)
{
	struct td_pagebuild *b = td_pagebuild_new(PS, 8);
	struct run r;
	uint64_t ts = 123456789, x = 88172645463325252ULL;
	unsigned int i;

	run_init(&r, 8);
	for (i = 0; i < 3000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		switch (x % 4) {
		case 0:
			ts += x % 100;
			break;
		case 1:
			ts += x % (1u << 28);
			break;
		case 2:
			ts += (x >> 8) % (1ULL << 45);
			break;
		default:
			break;
		}
		run_add(&r, b, ts, 1 + (x >> 20) % 300);
	}
	run_take(&r, b);
	assert_true(r.npages > 10);
	run_check(&r);
	td_pagebuild_free(b);
	run_free(&r);
}

/* A 4-byte commit field (a 32-bit kernel's local_t). */
static void
test_commit4(void **state)
{
	struct td_pagebuild *b = td_pagebuild_new(PS, 4);
	struct run r;
	unsigned int i;

	run_init(&r, 4);
	for (i = 0; i < 200; i++)
		run_add(&r, b, 5 + i * (1ULL << 26), 40);
	run_take(&r, b);
	run_check(&r);
	td_pagebuild_free(b);
	run_free(&r);
}

/* What the builder refuses. */
static void
test_errors(void **state)
{
	struct td_pagebuild *b;
	uint8_t big[PS];

	memset(big, 0, sizeof big);
	errno = 0;
	assert_null(td_pagebuild_new(PS, 6));
	assert_int_equal(errno, EINVAL);
	assert_null(td_pagebuild_new(100, 8));
	assert_null(td_pagebuild_new(4u << 20, 8));
	b = td_pagebuild_new(PS, 8);
	errno = 0;
	assert_null(td_pagebuild_take(b));
	assert_int_equal(errno, ENOENT);
	assert_int_equal(td_pagebuild_add(b, 5, big, 0), -1);
	assert_int_equal(errno, EINVAL);
	/* 4080 bytes of data: an event of 4072 + 8 fits, 4073 does not */
	assert_int_equal(td_pagebuild_add(b, 5, big, 4073), -1);
	assert_int_equal(errno, E2BIG);
	assert_int_equal(td_pagebuild_add(b, 5, big, 4072), 0);
	assert_int_equal(td_pagebuild_add(b, 5, big, 8), -1);
	assert_int_equal(errno, ENOSPC);
	assert_non_null(td_pagebuild_take(b));
	/* time never goes back, not even across pages */
	assert_int_equal(td_pagebuild_add(b, 4, big, 8), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(td_pagebuild_add(b, 5, big, 8), 0);
	td_pagebuild_free(b);
	td_pagebuild_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small),
		cmocka_unit_test(test_deltas),
		cmocka_unit_test(test_long),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_commit4),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
