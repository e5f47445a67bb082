/*
 * test-metadefer.c: header sections recorded into a memfd and replayed
 * (agent/capture/metadefer.c).
 *
 * What a sink is given through a deferral reaches the real sink in the
 * same calls' order with the same bytes (a section's bytes may come in
 * other pieces: only their concatenation counts), however the pieces fall
 * against the staging; a replay empties the deferral; a failing sink
 * stops the replay with its errno and a message.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "meta.h"
#include "metadefer.h"
#include "banned.h"

/* A sink that writes what it is told as text: "B<id>", "W<n>", "E", "O". */
struct capture {
	struct td_buf	log;	/* the calls */
	struct td_buf	data;	/* section bytes and option payloads */
	int		fail_at;	/* fail the call number fail_at (0: never) */
	int		calls;
};

static int
cap_call(struct capture *c)
{
	if (++c->calls == c->fail_at) {
		errno = ENOSPC;
		return -1;
	}
	return 0;
}

static int
cap_begin(void *arg, enum td_opt id)
{
	struct capture *c = arg;

	if (cap_call(c) == -1)
		return -1;
	return td_buf_printf(&c->log, "B%d ", (int)id);
}

static int
cap_write(void *arg, const void *p, size_t n)
{
	struct capture *c = arg;

	if (cap_call(c) == -1)
		return -1;
	/* pieces may be cut differently: only the bytes are logged */
	return td_buf_add(&c->data, p, n);
}

static int
cap_end(void *arg)
{
	struct capture *c = arg;

	if (cap_call(c) == -1)
		return -1;
	return td_buf_printf(&c->log, "E ");
}

static int
cap_option(void *arg, enum td_opt id, const void *p, size_t n)
{
	struct capture *c = arg;

	if (cap_call(c) == -1)
		return -1;
	if (td_buf_printf(&c->log, "O%d:%zu ", (int)id, n) == -1)
		return -1;
	return td_buf_add(&c->data, p, n);
}

static void
cap_sink(struct meta_sink *s, struct capture *c)
{
	memset(s, 0, sizeof *s);
	s->begin = cap_begin;
	s->write = cap_write;
	s->end = cap_end;
	s->option = cap_option;
	s->arg = c;
}

static void
cap_init(struct capture *c)
{
	memset(c, 0, sizeof *c);
	td_buf_init(&c->log, 1u << 20);
	td_buf_init(&c->data, 64u << 20);
}

static void
cap_free(struct capture *c)
{
	td_buf_free(&c->log);
	td_buf_free(&c->data);
}

/* The same calls into two sinks: pieces of odd sizes, a big one, options. */
static void
feed(const struct meta_sink *s, const uint8_t *big, size_t bign)
{
	size_t i, k;

	assert_int_equal(s->begin(s->arg, TD_OPT_HEADER_INFO), 0);
	assert_int_equal(s->write(s->arg, "header_page\0", 12), 0);
	assert_int_equal(s->write(s->arg, "", 0), 0);
	assert_int_equal(s->end(s->arg), 0);
	assert_int_equal(s->option(s->arg, TD_OPT_UNAME, "Linux x 6.1", 11),
	    0);
	assert_int_equal(s->begin(s->arg, TD_OPT_KALLSYMS), 0);
	for (i = 0, k = 1; i < bign; i += k, k = k * 7 % 70001 + 1) {
		if (k > bign - i)
			k = bign - i;
		assert_int_equal(s->write(s->arg, big + i, k), 0);
	}
	/* one write larger than the staging */
	assert_int_equal(s->write(s->arg, big, bign), 0);
	assert_int_equal(s->end(s->arg), 0);
	assert_int_equal(s->option(s->arg, TD_OPT_TRACECLOCK, NULL, 0), 0);
}

static uint8_t *
make_big(size_t n)
{
	uint8_t *p = malloc(n);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 2654435761u >> 13);
	return p;
}

static void
test_replay(void **state)
{
	struct capture direct, later;
	struct meta_sink ds, cs;
	struct metadefer *d;
	size_t bign = 3u << 20;
	uint8_t *big = make_big(bign);
	char err[256];

	(void)state;
	cap_init(&direct);
	cap_init(&later);
	cap_sink(&cs, &direct);
	feed(&cs, big, bign);

	d = metadefer_new();
	assert_non_null(d);
	metadefer_sink(&ds, d);
	feed(&ds, big, bign);
	/* pages have no place in a deferral */
	assert_int_equal(ds.page(ds.arg, 0, big, 4096), -1);
	cap_sink(&cs, &later);
	assert_int_equal(metadefer_replay(d, &cs, err, sizeof err), 0);
	assert_int_equal(later.log.len, direct.log.len);
	assert_memory_equal(later.log.data, direct.log.data, direct.log.len);
	assert_int_equal(later.data.len, direct.data.len);
	assert_memory_equal(later.data.data, direct.data.data,
	    direct.data.len);

	/* replayed once: a second replay gives nothing */
	cap_free(&later);
	cap_init(&later);
	cap_sink(&cs, &later);
	assert_int_equal(metadefer_replay(d, &cs, err, sizeof err), 0);
	assert_int_equal(later.log.len, 0);
	assert_int_equal(later.data.len, 0);
	metadefer_free(d);
	cap_free(&direct);
	cap_free(&later);
	free(big);
}

static void
test_sink_fails(void **state)
{
	struct capture c;
	struct meta_sink ds, cs;
	struct metadefer *d;
	uint8_t *big = make_big(1u << 20);
	char err[256];

	(void)state;
	d = metadefer_new();
	assert_non_null(d);
	metadefer_sink(&ds, d);
	feed(&ds, big, 1u << 20);
	cap_init(&c);
	c.fail_at = 5;
	cap_sink(&cs, &c);
	err[0] = '\0';
	assert_int_equal(metadefer_replay(d, &cs, err, sizeof err), -1);
	assert_int_equal(errno, ENOSPC);
	assert_non_null(strstr(err, "cannot write the header sections"));
	assert_int_equal(c.calls, 5);
	metadefer_free(d);
	metadefer_free(NULL);
	cap_free(&c);
	free(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replay),
		cmocka_unit_test(test_sink_fails),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
