/*
 * test-buf.c: capped growable buffers (shared/buf.c).
 *
 * The cap is the point of the module: every append that would pass it must
 * fail with ENOBUFS and leave the buffer as it was, whatever the size asked
 * (including sizes that would overflow), while appends up to the cap work.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "cursor.h"
#include "size.h"
#include "banned.h"

static void
test_add_and_cap(void **state)
{
	struct td_buf b;
	uint8_t big[1000];
	int i;

	memset(big, 7, sizeof big);
	td_buf_init(&b, 1000);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	for (i = 0; i < 10; i++)
		assert_int_equal(td_buf_add(&b, big, 100), 0);
	assert_int_equal(b.len, 1000);
	assert_memory_equal(b.data, big, 1000);
	assert_true(b.cap <= 1000);

	errno = 0;
	assert_int_equal(td_buf_add(&b, big, 1), -1);
	assert_int_equal(errno, ENOBUFS);
	assert_int_equal(b.len, 1000);
	assert_int_equal(td_buf_add_zero(&b, 1), -1);
	assert_int_equal(td_buf_add_u16(&b, 1), -1);
	assert_int_equal(td_buf_add_u32(&b, 1), -1);
	assert_int_equal(td_buf_add_u64(&b, 1), -1);
	assert_int_equal(td_buf_add_str(&b, ""), -1);
	assert_int_equal(b.len, 1000);
	/* zero bytes always fit */
	assert_int_equal(td_buf_add(&b, big, 0), 0);

	td_buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_non_null(b.data);
	assert_int_equal(td_buf_add(&b, big, 1000), 0);
	td_buf_free(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	td_buf_free(&b);
}

/* Room at the end, filled in place and appended without a copy. */
static void
test_room(void **state)
{
	struct td_buf b;
	uint8_t *p;

	(void)state;
	td_buf_init(&b, 1000);
	assert_int_equal(td_buf_add(&b, "ab", 2), 0);
	assert_non_null(p = td_buf_room(&b, 600));
	assert_ptr_equal(p, b.data + 2);
	assert_int_equal(b.len, 2);
	assert_true(b.cap >= 602);
	memset(p, 'x', 600);
	assert_int_equal(td_buf_add(&b, p, 300), 0);
	assert_int_equal(td_buf_add(&b, p + 300, 300), 0);
	assert_int_equal(b.len, 602);
	assert_memory_equal(b.data, "abxx", 4);
	assert_int_equal(b.data[601], 'x');
	errno = 0;
	assert_null(td_buf_room(&b, 399));
	assert_int_equal(errno, ENOBUFS);
	assert_int_equal(b.len, 602);
	assert_non_null(td_buf_room(&b, 398));
	td_buf_free(&b);
}

static void
test_overflow_sizes(void **state)
{
	struct td_buf b;
	char c = 'x';

	/* sizes near SIZE_MAX must not wrap the len + n check */
	td_buf_init(&b, 1 << 20);
	assert_int_equal(td_buf_add(&b, &c, 1), 0);
	errno = 0;
	assert_int_equal(td_buf_add_zero(&b, SIZE_MAX), -1);
	assert_int_equal(errno, ENOBUFS);
	assert_int_equal(td_buf_add_zero(&b, SIZE_MAX - 1), -1);
	assert_int_equal(td_buf_add(&b, &c, (1 << 20)), -1);
	assert_int_equal(b.len, 1);
	assert_int_equal(td_buf_add_zero(&b, (1 << 20) - 1), 0);
	assert_int_equal(b.len, 1 << 20);
	td_buf_free(&b);

	td_buf_init(&b, 0);
	assert_int_equal(td_buf_add(&b, &c, 1), -1);
	assert_int_equal(td_buf_add(&b, &c, 0), 0);
	td_buf_free(&b);
}

static void
test_integers_and_strings(void **state)
{
	struct td_buf b;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	td_buf_init(&b, 4096);
	assert_int_equal(td_buf_add_u16(&b, 0x1234), 0);
	assert_int_equal(td_buf_add_u32(&b, 0xdeadbeef), 0);
	assert_int_equal(td_buf_add_u64(&b, 0x0102030405060708ULL), 0);
	assert_int_equal(td_buf_add_str(&b, "abc"), 0);
	assert_int_equal(td_buf_add_zero(&b, 3), 0);
	assert_int_equal(b.len, 2 + 4 + 8 + 4 + 3);
	memcpy(&v16, b.data, 2);
	memcpy(&v32, b.data + 2, 4);
	memcpy(&v64, b.data + 6, 8);
	assert_int_equal(v16, 0x1234);
	assert_int_equal(v32, 0xdeadbeef);
	assert_int_equal(v64, 0x0102030405060708ULL);
	assert_memory_equal(b.data + 14, "abc\0\0\0\0", 7);
	td_buf_free(&b);
}

static void
test_printf(void **state)
{
	struct td_buf b;
	char want[700];
	int i;

	td_buf_init(&b, 4096);
	assert_int_equal(td_buf_printf(&b, "%s-%d", "cpu", 7), 0);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "cpu-7", 5);	/* no NUL */

	/* longer than the function's small stack buffer */
	td_buf_reset(&b);
	for (i = 0; i < 699; i++)
		want[i] = 'a' + i % 26;
	want[699] = '\0';
	assert_int_equal(td_buf_printf(&b, "%s", want), 0);
	assert_int_equal(b.len, 699);
	assert_memory_equal(b.data, want, 699);
	td_buf_free(&b);

	td_buf_init(&b, 100);
	errno = 0;
	assert_int_equal(td_buf_printf(&b, "%s", want), -1);
	assert_int_equal(errno, ENOBUFS);
	assert_int_equal(b.len, 0);
	assert_int_equal(td_buf_printf(&b, "%.100s", want), 0);
	assert_int_equal(td_buf_printf(&b, "x"), -1);
	td_buf_free(&b);
}

static void
test_read_file(void **state)
{
	const char *src = getenv("TD_SRCDIR");
	struct td_buf b, ref;
	char dir[] = "/tmp/tdtest-buf.XXXXXX", *path;
	uint8_t *big;
	size_t n = 100000, i;
	int fd;

	/* a captured tracefs file of tests/data/ */
	td_buf_init(&ref, 1 << 20);
	assert_true(asprintf(&path, "%s/tests/data/header_page",
	    src != NULL && *src != '\0' ? src : ".") > 0);
	assert_int_equal(td_buf_read_file(&ref, path), 0);
	free(path);
	assert_true(ref.len > 100);
	assert_non_null(memmem(ref.data, ref.len, "commit", 6));
	td_buf_free(&ref);

	/* several reads' worth, appended to what is there */
	assert_non_null(mkdtemp(dir));
	assert_true(asprintf(&path, "%s/f", dir) > 0);
	big = malloc(n);
	assert_non_null(big);
	for (i = 0; i < n; i++)
		big[i] = (uint8_t)(i * 31 + 7);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, big, n), (ssize_t)n);
	close(fd);

	td_buf_init(&b, n + 2);
	td_buf_add(&b, "ab", 2);
	assert_int_equal(td_buf_read_file(&b, path), 0);
	assert_int_equal(b.len, n + 2);
	assert_memory_equal(b.data + 2, big, n);
	td_buf_free(&b);

	/* over the cap */
	td_buf_init(&b, n - 1);
	errno = 0;
	assert_int_equal(td_buf_read_file(&b, path), -1);
	assert_int_equal(errno, ENOBUFS);
	td_buf_free(&b);

	/* missing */
	td_buf_init(&b, 10);
	errno = 0;
	assert_int_equal(td_buf_read_file(&b, "/nonexistent/td/file"), -1);
	assert_int_equal(errno, ENOENT);
	td_buf_free(&b);

	/* empty file */
	fd = open(path, O_WRONLY | O_TRUNC);
	close(fd);
	td_buf_init(&b, 10);
	assert_int_equal(td_buf_read_file(&b, path), 0);
	assert_int_equal(b.len, 0);
	td_buf_free(&b);

	free(big);
	unlink(path);
	free(path);
	rmdir(dir);
}

/* Sizes on command lines: suffixes, limits, junk. */
static void
test_parse_size(void **state)
{
	static const struct { const char *s; uint64_t v; } good[] = {
		{ "0", 0 }, { "4096", 4096 }, { "512K", 512ULL << 10 },
		{ "64m", 64ULL << 20 }, { "2G", 2ULL << 30 },
		{ "1048576G", 1ULL << 50 },
	};
	static const char *bad[] = { "", "-1", "1T", "1KB", " 1", "1 ",
	    "K", "1048577G", "99999999999999999999", "0x10" };
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof good / sizeof *good; i++) {
		assert_int_equal(td_parse_size(good[i].s, &v), 0);
		assert_int_equal(v, good[i].v);
	}
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		errno = 0;
		assert_int_equal(td_parse_size(bad[i], &v), -1);
		assert_int_equal(errno, EINVAL);
	}
}

/* Durations on command lines (tdlisten --rotate): units, case, junk. */
static void
test_parse_duration(void **state)
{
	static const struct { const char *s; uint64_t v; } good[] = {
		{ "0s", 0 }, { "30s", 30 }, { "10m", 600 }, { "1h", 3600 },
		{ "168h", 168 * 3600 }, { "4294967295s", 4294967295ULL },
	};
	static const char *bad[] = { "", "s", "10", "10M", "1H", "1d",
	    "-1s", " 1s", "1s ", "1ms", "1.5h", "4294967296s", "1193047h",
	    "99999999999999999999s" };
	uint64_t v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof *good; i++) {
		assert_int_equal(td_parse_duration(good[i].s, &v), 0);
		assert_int_equal(v, good[i].v);
	}
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		errno = 0;
		assert_int_equal(td_parse_duration(bad[i], &v), -1);
		assert_int_equal(errno, EINVAL);
	}
}

/* The reading side: bounds, stickiness, byte orders, the end. */
static void
test_cursor(void **state)
{
	static const uint8_t d[] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
	    0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f };
	struct td_cur c;
	uint32_t h32;
	uint64_t h64;

	td_cur_init(&c, d, sizeof d);
	assert_int_equal(td_cur_u8(&c), 0x01);
	assert_int_equal(td_cur_be16(&c), 0x0203);
	assert_int_equal(td_cur_be32(&c), 0x04050607);
	assert_true(td_cur_be64(&c) == 0x08090a0b0c0d0e0fULL);
	assert_false(td_cur_bad(&c));
	td_cur_init(&c, d, sizeof d);
	assert_true(td_cur_take(&c, 7) == d);
	assert_true(td_cur_be64(&c) == 0x08090a0b0c0d0e0fULL);
	assert_int_equal(td_cur_end(&c), 0);
	/* one byte too many: nothing taken, and bad from then on */
	td_cur_init(&c, d, 3);
	assert_int_equal(td_cur_be32(&c), 0);
	assert_true(td_cur_bad(&c));
	assert_int_equal(td_cur_left(&c), 3);
	assert_null(td_cur_take(&c, 1));
	assert_int_equal(td_cur_u8(&c), 0);
	assert_int_equal(td_cur_end(&c), -1);
	/* host order, as checkpoints are written */
	td_cur_init(&c, d, sizeof d);
	memcpy(&h32, d, 4);
	memcpy(&h64, d + 4, 8);
	assert_int_equal(td_cur_u32(&c), h32);
	assert_true(td_cur_u64(&c) == h64);
	/* bytes left over fail the end; a decoder's own check too */
	assert_int_equal(td_cur_end(&c), -1);
	assert_non_null(td_cur_take(&c, 3));
	assert_int_equal(td_cur_end(&c), 0);
	td_cur_fail(&c);
	assert_int_equal(td_cur_end(&c), -1);
	/* a huge length never wraps */
	td_cur_init(&c, d, sizeof d);
	assert_null(td_cur_take(&c, SIZE_MAX));
	assert_true(td_cur_bad(&c));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_room),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_parse_duration),
		cmocka_unit_test(test_add_and_cap),
		cmocka_unit_test(test_overflow_sizes),
		cmocka_unit_test(test_integers_and_strings),
		cmocka_unit_test(test_printf),
		cmocka_unit_test(test_read_file),
		cmocka_unit_test(test_cursor),
	};

	return cmocka_run_group_tests_name("buf", tests, NULL, NULL);
}
