/*
 * test-compress.c: the block codecs of trace.dat v7 (shared/compress.c).
 *
 * Blocks must round-trip through td_codec_* and must also decompress with
 * the plain library calls trace-cmd uses (ZSTD_decompress, uncompress), so
 * that what we write is what trace-cmd reads.  zstd frames carry no content
 * size, as trace-cmd 3.1.6 writes them.  Corrupt or mis-sized input fails
 * with EBADMSG and never writes past the caller's buffer.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>
#include <zstd.h>

#include "buf.h"
#include "compress.h"
#include "banned.h"

static const enum td_codec_id codecs[] = {
	TD_CODEC_NONE, TD_CODEC_ZSTD, TD_CODEC_ZLIB,
};
#define NCODECS (sizeof codecs / sizeof codecs[0])

/* Trace-like data: repetitive records with a changing counter. */
static uint8_t *
make_data(size_t n, bool random)
{
	uint8_t *p = malloc(n ? n : 1);
	uint64_t s = 42;
	size_t i;

	assert_non_null(p);
	for (i = 0; i < n; i++) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = random ? (uint8_t)(s >> 56) :
		    (uint8_t)((i % 64) < 8 ? i / 64 : i % 7);
	}
	return p;
}

/* Decompress with the library calls trace-cmd uses. */
static void
plain_decompress(enum td_codec_id id, const void *src, size_t len,
    const void *want, size_t n)
{
	uint8_t *out = malloc(n + 16);
	uLongf zn = n + 16;
	size_t r;

	assert_non_null(out);
	if (id == TD_CODEC_ZSTD) {
		assert_true(ZSTD_getFrameContentSize(src, len) ==
		    ZSTD_CONTENTSIZE_UNKNOWN);
		r = ZSTD_decompress(out, n + 16, src, len);
		assert_false(ZSTD_isError(r));
		assert_int_equal(r, n);
	} else if (id == TD_CODEC_ZLIB) {
		assert_int_equal(uncompress(out, &zn, src, len), Z_OK);
		assert_int_equal(zn, n);
	} else {
		assert_int_equal(len, n);
		memcpy(out, src, n);
	}
	assert_memory_equal(out, want, n);
	free(out);
}

static void
test_names(void **state)
{
	enum td_codec_id id;

	assert_int_equal(td_codec_parse("none", &id), 0);
	assert_int_equal(id, TD_CODEC_NONE);
	assert_int_equal(td_codec_parse("zstd", &id), 0);
	assert_int_equal(id, TD_CODEC_ZSTD);
	assert_int_equal(td_codec_parse("zlib", &id), 0);
	assert_int_equal(id, TD_CODEC_ZLIB);
	assert_int_equal(td_codec_parse("lz4", &id), -1);
	assert_int_equal(td_codec_parse("", &id), -1);
	assert_int_equal(td_codec_parse("ZSTD", &id), -1);
	assert_string_equal(td_codec_name(TD_CODEC_NONE), "none");
	assert_string_equal(td_codec_name(TD_CODEC_ZSTD), "zstd");
	assert_string_equal(td_codec_name(TD_CODEC_ZLIB), "zlib");
	assert_string_equal(td_codec_version(TD_CODEC_NONE), "");
	assert_string_equal(td_codec_version(TD_CODEC_ZSTD),
	    ZSTD_versionString());
	assert_string_equal(td_codec_version(TD_CODEC_ZLIB), zlibVersion());
}

static void
roundtrip(enum td_codec_id id, int level, size_t n, bool random)
{
	struct td_codec *c = td_codec_new(id, level);
	uint8_t *src = make_data(n, random), *dst, *back;
	size_t bound;
	ssize_t clen;

	assert_non_null(c);
	assert_int_equal(td_codec_id(c), id);
	bound = td_codec_bound(c, n);
	assert_true(bound >= n);
	dst = malloc(bound ? bound : 1);
	back = malloc(n + 1);
	assert_non_null(dst);
	assert_non_null(back);
	clen = td_codec_compress(c, src, n, dst, bound);
	assert_true(clen >= 0);
	if (id == TD_CODEC_NONE)
		assert_int_equal(clen, n);
	if (id != TD_CODEC_NONE && !random && n >= 4096)
		assert_true((size_t)clen < n / 4);
	assert_int_equal(td_codec_decompress(c, dst, clen, back, n),
	    (ssize_t)n);
	assert_memory_equal(back, src, n);
	plain_decompress(id, dst, clen, src, n);

	/* the context is reusable */
	assert_int_equal(td_codec_compress(c, src, n, dst, bound), clen);
	assert_int_equal(td_codec_decompress(c, dst, clen, back, n),
	    (ssize_t)n);
	free(src);
	free(dst);
	free(back);
	td_codec_free(c);
}

static void
test_roundtrip(void **state)
{
	static const size_t sizes[] = { 0, 1, 17, 4096, 40960, 1 << 20 };
	size_t i, j;

	for (i = 0; i < NCODECS; i++)
		for (j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
			roundtrip(codecs[i], 0, sizes[j], false);
			roundtrip(codecs[i], 0, sizes[j], true);
		}
	roundtrip(TD_CODEC_ZSTD, 19, 40960, false);
	roundtrip(TD_CODEC_ZLIB, 9, 40960, false);
}

static void
test_corrupt(void **state)
{
	size_t n = 40960, i;
	uint8_t *src = make_data(n, false), *dst, *back;
	ssize_t clen;

	back = malloc(n + 64);
	assert_non_null(back);
	for (i = 0; i < NCODECS; i++) {
		struct td_codec *c = td_codec_new(codecs[i], 0);
		size_t bound = td_codec_bound(c, n);

		dst = malloc(bound);
		assert_non_null(dst);
		clen = td_codec_compress(c, src, n, dst, bound);
		assert_true(clen > 0);

		/* wrong expected size, both ways */
		memset(back, 0xee, n + 64);
		errno = 0;
		assert_int_equal(td_codec_decompress(c, dst, clen, back,
		    n - 1), -1);
		assert_int_equal(errno, EBADMSG);
		for (size_t k = n - 1; k < n + 64; k++)
			assert_int_equal(back[k], 0xee);
		errno = 0;
		assert_int_equal(td_codec_decompress(c, dst, clen, back,
		    n + 1), -1);
		assert_int_equal(errno, EBADMSG);

		/* truncated input */
		errno = 0;
		assert_int_equal(td_codec_decompress(c, dst, clen / 2, back,
		    n), -1);
		assert_int_equal(errno, EBADMSG);

		/* garbage (none cannot tell garbage from data) */
		if (codecs[i] != TD_CODEC_NONE) {
			memset(dst, 0x5a, clen);
			errno = 0;
			assert_int_equal(td_codec_decompress(c, dst, clen, back,
			    n), -1);
			assert_int_equal(errno, EBADMSG);
		}

		/* output room too small to compress into */
		assert_int_equal(td_codec_compress(c, src, n, dst, 8), -1);
		free(dst);
		td_codec_free(c);
	}
	free(back);
	free(src);
}

static void
test_stream(void **state)
{
	size_t n = 3 * 1024 * 1024 + 123, i, off, step;
	uint8_t *src = make_data(n, false), *back;
	struct td_buf out;
	int round;

	back = malloc(n);
	assert_non_null(back);
	for (i = 0; i < NCODECS; i++) {
		struct td_codec *c = td_codec_new(codecs[i], 0);

		/* twice, to check the context resets between blocks */
		for (round = 0; round < 2; round++) {
			td_buf_init(&out, 64 * 1024 * 1024);
			assert_int_equal(td_codec_stream_begin(c), 0);
			for (off = 0; off < n; off += step) {
				step = 1 + (off * 7 + round) % 300000;
				if (step > n - off)
					step = n - off;
				assert_int_equal(td_codec_stream_feed(c,
				    src + off, step, &out), 0);
			}
			assert_int_equal(td_codec_stream_feed(c, src, 0, &out),
			    0);
			assert_int_equal(td_codec_stream_end(c, &out), 0);
			if (codecs[i] == TD_CODEC_NONE)
				assert_int_equal(out.len, n);
			else
				assert_true(out.len < n / 4);
			assert_int_equal(td_codec_decompress(c, out.data,
			    out.len, back, n), (ssize_t)n);
			assert_memory_equal(back, src, n);
			plain_decompress(codecs[i], out.data, out.len, src, n);
			td_buf_free(&out);
		}

		/*
		 * An empty streamed block is a valid block.  (The streaming
		 * code reserves the library's preferred output size, ~128 KiB
		 * for zstd, so out needs at least that much cap.)
		 */
		td_buf_init(&out, 1024 * 1024);
		assert_int_equal(td_codec_stream_begin(c), 0);
		assert_int_equal(td_codec_stream_end(c, &out), 0);
		assert_int_equal(td_codec_decompress(c, out.data, out.len,
		    back, 0), 0);
		td_buf_free(&out);

		/* the output cap is honoured */
		td_buf_init(&out, 16);
		assert_int_equal(td_codec_stream_begin(c), 0);
		errno = 0;
		if (td_codec_stream_feed(c, src, 100000, &out) == 0)
			assert_int_equal(td_codec_stream_end(c, &out), -1);
		assert_int_equal(errno, ENOBUFS);
		td_buf_free(&out);
		td_codec_free(c);
	}
	free(back);
	free(src);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_stream),
	};

	return cmocka_run_group_tests_name("compress", tests, NULL, NULL);
}
