/*
 * test-plan9.c: reading Plan 9 kernel traces (agent/plan9/plan9read.c): the
 * records of /dev/trace as trace(3) describes them (its own example, in
 * 121-byte lines and wrapped as the manual prints it), every kind of
 * malformed input counted with its lines, input cut anywhere, the time
 * order window, and `nm -n` symbols into kallsyms lines.
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
#include "plan9read.h"
#include "tdlimits.h"
#include "banned.h"

#define MAX_REC		64

/* trace(3)'s example, as /dev/trace writes it: two 121-byte lines. */
static const char seed_lines[] =
    "E ffffffff8016c2c6 00000096d2011acb 0000000000000057 "
    "ffffffff80a8b2d8 ffffffff80a8b2d8 ffffffff8016d446 ffffffff80a7c548\n"
    "X ffffffff8016c306 00000096d2011c3c 0000000000000057 "
    "ffffffff80251b38 0000000000000000 0000000000000000 0000000000000000\n";

/* The same example as the manual prints it, each record on two lines. */
static const char seed_wrapped[] =
    "E ffffffff8016c2c6 00000096d2011acb 0000000000000057 ffffffff80a8b2d8\n"
    "ffffffff80a8b2d8 ffffffff8016d446 ffffffff80a7c548\n"
    "X ffffffff8016c306 00000096d2011c3c 0000000000000057 ffffffff80251b38\n"
    "0000000000000000 0000000000000000 0000000000000000\n";

/* One skipped record as the parser reported it. */
struct bad {
	uint64_t	 first;
	uint64_t	 last;
	char		 why[64];
};

/* What the callbacks saw. */
struct seen {
	struct plan9_rec r[MAX_REC];
	int		 nr;
	struct bad	 b[MAX_REC];
	int		 nb;
	int		 fail_at;	/* record_cb fails at this one, or -1 */
};

static int
record_cb(void *arg, const struct plan9_rec *r)
{
	struct seen *s = arg;

	if (s->nr == s->fail_at)
		return -1;
	assert_true(s->nr < MAX_REC);
	s->r[s->nr++] = *r;
	return 0;
}

static void
bad_cb(void *arg, uint64_t first, uint64_t last, const char *why)
{
	struct seen *s = arg;

	assert_true(s->nb < MAX_REC);
	s->b[s->nb].first = first;
	s->b[s->nb].last = last;
	snprintf(s->b[s->nb].why, sizeof s->b[s->nb].why, "%s", why);
	s->nb++;
}

/* Parse text fed in pieces of step bytes (0: whole); lines and skipped. */
static void
parse(const char *text, size_t len, size_t step, struct seen *s,
    uint64_t *lines, uint64_t *skipped)
{
	struct plan9_input_cb cb = { record_cb, bad_cb, s };
	struct plan9_input *in;
	size_t off, n;

	memset(s, 0, sizeof *s);
	s->fail_at = -1;
	in = plan9_input_new(&cb);
	for (off = 0; off < len; off += n) {
		n = step == 0 || len - off < step ? len - off : step;
		assert_int_equal(plan9_input_feed(in, text + off, n), 0);
	}
	assert_int_equal(plan9_input_end(in), 0);
	*lines = plan9_input_lines(in);
	*skipped = plan9_input_skipped(in);
	plan9_input_free(in);
}

static void
check_seed(const struct seen *s, uint64_t line2)
{
	assert_int_equal(s->nr, 2);
	assert_int_equal(s->nb, 0);
	assert_false(s->r[0].exit);
	assert_int_equal(s->r[0].pc, 0xffffffff8016c2c6ULL);
	assert_int_equal(s->r[0].ts, 0x00000096d2011acbULL);
	assert_int_equal(s->r[0].pid, 0x57);
	assert_int_equal(s->r[0].arg[0], 0xffffffff80a8b2d8ULL);
	assert_int_equal(s->r[0].arg[1], 0xffffffff80a8b2d8ULL);
	assert_int_equal(s->r[0].arg[2], 0xffffffff8016d446ULL);
	assert_int_equal(s->r[0].arg[3], 0xffffffff80a7c548ULL);
	assert_int_equal(s->r[0].line, 1);
	assert_true(s->r[1].exit);
	assert_int_equal(s->r[1].pc, 0xffffffff8016c306ULL);
	assert_int_equal(s->r[1].ts, 0x00000096d2011c3cULL);
	assert_int_equal(s->r[1].pid, 0x57);
	assert_int_equal(s->r[1].arg[0], 0xffffffff80251b38ULL);
	assert_int_equal(s->r[1].arg[1], 0);
	assert_int_equal(s->r[1].line, line2);
}

/* The manual's example, in the device's lines and as printed. */
static void
test_seed(void **state)
{
	struct seen s;
	uint64_t lines, skipped;
	size_t step;

	assert_int_equal(strchr(seed_lines, '\n') - seed_lines + 1, 121);
	for (step = 0; step < 130; step += step < 8 ? 1 : 61) {
		parse(seed_lines, strlen(seed_lines), step, &s, &lines,
		    &skipped);
		check_seed(&s, 2);
		assert_int_equal(lines, 2);
		assert_int_equal(skipped, 0);
		parse(seed_wrapped, strlen(seed_wrapped), step, &s, &lines,
		    &skipped);
		check_seed(&s, 3);
		assert_int_equal(lines, 4);
		assert_int_equal(skipped, 0);
	}
}

/* No newline at the end, CRLF, tabs, short fields, upper-case hex. */
static void
test_shapes(void **state)
{
	static const char t[] = "E 1\t2 3 4 5 6 7\r\n\n  \nX A B C D e f 0";
	struct seen s;
	uint64_t lines, skipped;

	parse(t, strlen(t), 0, &s, &lines, &skipped);
	assert_int_equal(s.nr, 2);
	assert_int_equal(s.nb, 0);
	assert_int_equal(lines, 4);
	assert_int_equal(skipped, 0);
	assert_int_equal(s.r[0].ts, 2);
	assert_int_equal(s.r[0].arg[3], 7);
	assert_int_equal(s.r[1].pc, 0xa);
	assert_int_equal(s.r[1].arg[1], 0xe);
	assert_int_equal(s.r[1].line, 4);
}

static void
check_bad(const struct seen *s, int i, uint64_t first, uint64_t last,
    const char *why)
{
	assert_true(i < s->nb);
	assert_int_equal(s->b[i].first, first);
	assert_int_equal(s->b[i].last, last);
	assert_non_null(strstr(s->b[i].why, why));
}

/* Every kind of malformed input, with its lines, between good records. */
static void
test_malformed(void **state)
{
	char t[8192];
	size_t n = 0;
	struct seen s;
	uint64_t lines, skipped;
	int i;

#define ADD(str)	n += (size_t)snprintf(t + n, sizeof t - n, "%s", str)
	ADD("E 1 1 1 1 1 1 1\n");		/* 1 good */
	ADD("hello world\n");			/* 2 not a record */
	ADD("X 1 2\n");				/* 3 cut short by 4 */
	ADD("E 1 3 1 1 1 1 1\n");		/* 4 good */
	ADD("E 1 4 1 1 1 1 1 9\n");		/* 5 more than 7 fields */
	ADD("X 1 zz 1 1 1 1 1\n");		/* 6 not hex */
	ADD("X 1 5 1 1 1 1 11111111111111111\n");	/* 7 17 digits */
	ADD("1 2 3\n");				/* 8 no record to continue */
	ADD("E 1 6\n");				/* 9-10 a wrapped */
	ADD("1 1 1 1 1\n");			/* record: good */
	ADD("E 1 7 1\n");			/* 11-12 wrapped, then */
	ADD("1 1 1 1 1\n");			/* one field too many */
	ADD("E 1 8 1 1 1 1 1\x01\n");		/* 13 control character */
	ADD("e 1 8 1 1 1 1 1\n");		/* 14 lower-case e: a field */
	ADD("EX 1 1 1 1 1 1 1\n");		/* 15 not a record */
	ADD("E 1 9 1\n");			/* 16-17 cut short by */
	ADD("\n");				/*   a blank line and */
	ADD("X 1 10\n");			/* 18 then the end */
#undef ADD
	parse(t, n, 0, &s, &lines, &skipped);
	assert_int_equal(lines, 18);
	assert_int_equal(s.nr, 3);
	assert_int_equal(s.r[0].line, 1);
	assert_int_equal(s.r[1].line, 4);
	assert_int_equal(s.r[2].line, 9);
	assert_int_equal(s.r[2].ts, 6);
	i = 0;
	check_bad(&s, i++, 2, 2, "not a record");
	check_bad(&s, i++, 3, 3, "cut short");
	check_bad(&s, i++, 5, 5, "more than 7");
	check_bad(&s, i++, 6, 6, "hex");
	check_bad(&s, i++, 7, 7, "hex");
	check_bad(&s, i++, 8, 8, "not a record");
	check_bad(&s, i++, 11, 12, "more than 7");
	check_bad(&s, i++, 13, 13, "not text");
	check_bad(&s, i++, 14, 14, "not a record");
	check_bad(&s, i++, 15, 15, "not a record");
	check_bad(&s, i++, 16, 16, "cut short");
	check_bad(&s, i++, 18, 18, "cut short by the end");
	assert_int_equal(s.nb, i);
	/* every line but the good ones and the blank one */
	assert_int_equal(skipped, 18 - 4 - 1);
}

/* A line past TD_PLAN9_LINE_MAX is skipped whole, fed in any pieces. */
static void
test_long_line(void **state)
{
	size_t len = TD_PLAN9_LINE_MAX + 100, n;
	char *t = malloc(len + 64);
	struct seen s;
	uint64_t lines, skipped;

	assert_non_null(t);
	memset(t, ' ', len);
	t[0] = 'E';
	n = len;
	n += (size_t)snprintf(t + n, 64, "\nX 1 2 3 4 5 6 7\n");
	parse(t, n, 1000, &s, &lines, &skipped);
	assert_int_equal(s.nr, 1);
	assert_int_equal(s.r[0].line, 2);
	assert_int_equal(s.nb, 1);
	check_bad(&s, 0, 1, 1, "too long");
	assert_int_equal(skipped, 1);
	/* exactly at the limit is a line like any */
	memset(t, ' ', TD_PLAN9_LINE_MAX);
	memcpy(t, "E 1 2 3 4 5 6 7", 15);
	t[TD_PLAN9_LINE_MAX] = '\n';
	parse(t, TD_PLAN9_LINE_MAX + 1, 7, &s, &lines, &skipped);
	assert_int_equal(s.nr, 1);
	assert_int_equal(s.nb, 0);
	free(t);
}

/* A failing record_cb stops the parser with its -1. */
static void
test_cb_fails(void **state)
{
	struct plan9_input_cb cb;
	struct plan9_input *in;
	struct seen s;

	memset(&s, 0, sizeof s);
	s.fail_at = 1;
	cb.record_cb = record_cb;
	cb.bad_cb = bad_cb;
	cb.arg = &s;
	in = plan9_input_new(&cb);
	assert_int_equal(plan9_input_feed(in, seed_lines, strlen(seed_lines)),
	    -1);
	assert_int_equal(s.nr, 1);
	plan9_input_free(in);
}

static struct plan9_rec
rec(uint64_t ts, uint64_t line)
{
	struct plan9_rec r;

	memset(&r, 0, sizeof r);
	r.ts = ts;
	r.line = line;
	return r;
}

/* The window sorts what is less than a window out of place, stably. */
static void
test_reorder(void **state)
{
	static const uint64_t in[] = { 5, 3, 4, 1, 9, 7, 7, 8, 12, 10, 11 };
	static const uint64_t want_ts[] = { 1, 3, 4, 5, 7, 7, 8, 9, 10, 11,
	    12 };
	static const uint64_t want_line[] = { 4, 2, 3, 1, 6, 7, 8, 5, 10, 11,
	    9 };
	struct plan9_reorder *q = plan9_reorder_new(4);
	struct plan9_rec r, out[16];
	size_t i, n = 0;

	for (i = 0; i < sizeof in / sizeof in[0]; i++) {
		r = rec(in[i], i + 1);
		if (plan9_reorder_push(q, &r, &out[n]) == 1)
			n++;
	}
	assert_int_equal(n, sizeof in / sizeof in[0] - 4);
	while (plan9_reorder_pop(q, &out[n]))
		n++;
	assert_int_equal(n, sizeof in / sizeof in[0]);
	for (i = 0; i < n; i++) {
		assert_int_equal(out[i].ts, want_ts[i]);
		assert_int_equal(out[i].line, want_line[i]);
	}
	plan9_reorder_free(q);
}

/* More than a window late: it comes out after later records. */
static void
test_reorder_late(void **state)
{
	struct plan9_reorder *q = plan9_reorder_new(2);
	struct plan9_rec r, out;
	uint64_t got[8];
	int n = 0, i;
	static const uint64_t in[] = { 10, 20, 30, 40, 1 };

	for (i = 0; i < 5; i++) {
		r = rec(in[i], i + 1);
		if (plan9_reorder_push(q, &r, &out) == 1)
			got[n++] = out.ts;
	}
	while (plan9_reorder_pop(q, &out))
		got[n++] = out.ts;
	assert_int_equal(n, 5);
	assert_int_equal(got[0], 10);
	assert_int_equal(got[1], 20);
	assert_int_equal(got[2], 1);
	assert_int_equal(got[3], 30);
	assert_int_equal(got[4], 40);
	plan9_reorder_free(q);
}

static int
sym(const char *line, struct td_buf *b)
{
	return plan9_symbol_line(line, strlen(line), b);
}

/* nm -n lines: functions and data kept as kallsyms lines, others not. */
static void
test_symbols(void **state)
{
	struct td_buf b;

	td_buf_init(&b, 1 << 20);
	assert_int_equal(sym("ffffffff80110000 T _main", &b), 1);
	assert_int_equal(sym("  f0100020 t\tlocal  ", &b), 1);
	assert_int_equal(sym("ffffffff8016d446 L leaf", &b), 1);
	assert_int_equal(sym("ffffffff8016d500 l sleaf", &b), 1);
	assert_int_equal(sym("ffffffff80a8b2d8 D data", &b), 2);
	assert_int_equal(sym("ffffffff80a8b2e0 b bss", &b), 2);
	assert_int_equal(sym("         U undefined", &b), 0);
	assert_int_equal(sym("00000008 a autovar", &b), 0);
	assert_int_equal(sym("00000010 p param", &b), 0);
	assert_int_equal(sym("00000001 z /sys/src/9/port/proc.c", &b), 0);
	assert_int_equal(sym("", &b), 0);
	assert_int_equal(sym("   ", &b), 0);
	errno = 0;
	assert_int_equal(sym("garbage", &b), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(sym("zz T name", &b), -1);
	assert_int_equal(sym("1234 TT name", &b), -1);
	assert_int_equal(sym("1234 T name extra", &b), -1);
	assert_int_equal(sym("1234 ? name", &b), -1);
	assert_int_equal(sym("1234 T na\x01me", &b), -1);
	assert_int_equal(sym("11112222333344445 T toolong", &b), -1);
	td_buf_add(&b, "", 1);
	assert_string_equal((char *)b.data,
	    "ffffffff80110000 T _main\n"
	    "00000000f0100020 t local\n"
	    "ffffffff8016d446 T leaf\n"
	    "ffffffff8016d500 t sleaf\n"
	    "ffffffff80a8b2d8 D data\n"
	    "ffffffff80a8b2e0 b bss\n");
	td_buf_free(&b);
	/* the cap of kallsyms */
	td_buf_init(&b, 30);
	assert_int_equal(sym("ffffffff80110000 T _main", &b), 1);
	errno = 0;
	assert_int_equal(sym("ffffffff80110010 T second", &b), -1);
	assert_int_equal(errno, ENOBUFS);
	td_buf_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seed),
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_cb_fails),
		cmocka_unit_test(test_reorder),
		cmocka_unit_test(test_reorder_late),
		cmocka_unit_test(test_symbols),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
