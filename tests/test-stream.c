/*
 * test-stream.c: the agent's recording stream (agent/net/stream.c), the bytes
 * kept until the listener acknowledges them.
 *
 * What goes in comes out once, in order, byte for byte, whatever the path
 * (memory, the spool file and back, resends after a lost connection, a
 * resume at an offset), and pages come out as well-formed PAGES (or
 * PAGES_Z) frames numbered per CPU.  A "connection" here is the test
 * taking what stream_sendable() offers, in pieces of odd sizes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "compress.h"
#include "stream.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "banned.h"

#define PAGE	4096

/* Append one SECTION_DATA frame of n bytes, each byte its offset's. */
static void
add_data(struct stream *s, size_t n, uint64_t *made)
{
	struct td_buf *b;
	uint8_t *p = malloc(n);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < n; i++)
		p[i] = (uint8_t)((*made + i) * 131 >> 3);
	*made += n;
	assert_non_null(b = stream_frame(s));
	assert_int_equal(td_msg_pack_section_data(b, p, n), 0);
	stream_added(s);
	free(p);
}

/*
 * Take up to max bytes of what can be sent, in pieces of piece bytes,
 * into out; returns the bytes taken.
 */
static size_t
take(struct stream *s, struct td_buf *out, size_t piece, size_t max)
{
	const uint8_t *p;
	size_t n, k, got = 0;

	while (got < max && (n = stream_sendable(s, &p)) != 0) {
		k = n < piece ? n : piece;
		if (k > max - got)
			k = max - got;
		assert_int_equal(td_buf_add(out, p, k), 0);
		stream_sent(s, k);
		got += k;
	}
	return got;
}

/* The SECTION_DATA frames in b carry the bytes made, in order. */
static void
check_data(const struct td_buf *b, uint64_t made)
{
	struct td_frame f;
	size_t off = 0;
	uint64_t at = 0, i;

	while (off < b->len) {
		assert_int_equal(td_frame_parse(b->data + off, b->len - off,
		    &f), 1);
		assert_int_equal(f.type, TD_MSG_SECTION_DATA);
		for (i = 0; i < f.len; i++)
			if (f.payload[i] != (uint8_t)((at + i) * 131 >> 3))
				fail_msg("byte %llu differs",
				    (unsigned long long)(at + i));
		at += f.len;
		off += f.total;
	}
	assert_int_equal(off, b->len);
	assert_int_equal(at, made);
}

/* Memory only: in, out, acknowledged; an ACK past what was sent fails. */
static void
test_memory(void **state)
{
	struct stream *s;
	struct td_buf out;
	uint64_t made = 0;
	size_t sent;

	(void)state;
	assert_non_null(s = stream_new(PAGE, 2, 0, NULL, 0));
	td_buf_init(&out, 64u << 20);
	add_data(s, 1000, &made);
	add_data(s, 70000, &made);
	assert_int_equal(stream_pending(s), 71000 + 2 * TD_FRAME_HEADER);
	sent = take(s, &out, 777, SIZE_MAX);
	assert_int_equal(sent, 71000 + 2 * TD_FRAME_HEADER);
	assert_int_equal(stream_pending(s), 0);
	assert_int_equal(stream_unacked(s), sent);
	assert_int_equal(stream_total_sent(s), sent);
	errno = 0;
	assert_int_equal(stream_ack(s, sent + 1), -1);
	assert_int_equal(errno, EPROTO);
	assert_int_equal(stream_ack(s, sent), 0);
	assert_int_equal(stream_unacked(s), 0);
	assert_int_equal(stream_ack(s, 10), 0);		/* old news */
	check_data(&out, made);
	td_buf_free(&out);
	stream_free(s);
}

/*
 * 48 MiB through a stream with a spool: memory stays near its cap while
 * the spool holds the rest; everything comes back, in order, as the
 * listener acknowledges; a lost connection resends from the last ACK.
 */
static void
test_spool(void **state)
{
	char dir[] = "/tmp/td-test-stream.XXXXXX";
	struct stream *s;
	struct td_buf out, again;
	uint64_t made = 0, acked = 0, lo, hi;
	size_t got;
	int i;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_non_null(s = stream_new(PAGE, 2, 0, dir, 1u << 30));
	assert_int_equal(stream_spool_open(s), 0);
	td_buf_init(&out, 64u << 20);
	td_buf_init(&again, 64u << 20);
	for (i = 0; i < 48; i++)
		add_data(s, 1u << 20, &made);
	/* 48 MiB queued: memory went to the spool, not over its cap */
	assert_false(stream_congested(s));
	assert_int_equal(stream_unacked(s), made + 48 * TD_FRAME_HEADER);
	/*
	 * send 3 MiB (memory holds 4 MiB unacknowledged, then the spool),
	 * lose the connection, resend from the last ACK
	 */
	got = take(s, &out, 65536, 3u << 20);
	assert_int_equal(got, 3u << 20);
	assert_int_equal(stream_ack(s, 1u << 20), 0);
	acked = 1u << 20;
	stream_rewind(s);
	out.len = (size_t)acked;
	/* a resume before what is kept, or past what exists, is refused */
	errno = 0;
	assert_int_equal(stream_resume(s, acked - 1, &lo, &hi), -1);
	assert_int_equal(errno, ERANGE);
	assert_int_equal(lo, acked);
	assert_true(hi >= acked);
	assert_int_equal(stream_resume(s, hi + 1, &lo, &hi), -1);
	/* the listener had 2 MiB on disk: the stream goes on from there */
	assert_int_equal(take(s, &again, 1000, 1u << 20), 1u << 20);
	assert_int_equal(td_buf_add(&out, again.data, again.len), 0);
	assert_int_equal(stream_resume(s, 2u << 20, &lo, &hi), 0);
	assert_int_equal(stream_unacked(s), made + 48 * TD_FRAME_HEADER -
	    (2u << 20));
	/* the rest, acknowledged as it goes (the spool comes back in) */
	while ((got = take(s, &out, 300000, 3u << 20)) != 0)
		assert_int_equal(stream_ack(s, out.len), 0);
	assert_int_equal(stream_unacked(s), 0);
	assert_int_equal(stream_pending(s), 0);
	check_data(&out, made);
	td_buf_free(&out);
	td_buf_free(&again);
	stream_free(s);
	assert_int_equal(rmdir(dir), 0);	/* the spool left nothing */
}

/* Without a spool, memory fills up and says so; relief comes with ACKs. */
static void
test_congested(void **state)
{
	struct stream *s;
	struct td_buf out;
	uint64_t made = 0;
	int i;

	(void)state;
	assert_non_null(s = stream_new(PAGE, 1, 0, NULL, 0));
	td_buf_init(&out, 64u << 20);
	for (i = 0; i < 21 && !stream_congested(s); i++)
		add_data(s, 1u << 20, &made);
	assert_true(stream_congested(s));
	assert_false(stream_relieved(s));
	take(s, &out, 1u << 20, SIZE_MAX);
	assert_int_equal(stream_ack(s, out.len), 0);
	assert_true(stream_relieved(s));
	check_data(&out, made);
	td_buf_free(&out);
	stream_free(s);
}

/*
 * The pages of the PAGES frame (wire 0) or PAGES_Z frame at *off in out,
 * *off moved past it: decompressed into back (cap bytes) with c, its CPU
 * and count in *cpu and *n, its first page number checked against
 * seq[*cpu] and seq moved on.
 */
static const uint8_t *
next_pages(const struct td_buf *out, size_t *off, int wire,
    struct td_codec *c, uint8_t *back, size_t cap, uint64_t *seq, int *cpu,
    uint32_t *n)
{
	struct td_frame f;
	struct td_pages pg;
	struct td_pages_z pz;
	const uint8_t *data;

	assert_int_equal(td_frame_parse(out->data + *off, out->len - *off,
	    &f), 1);
	*off += f.total;
	if (wire == 0) {
		assert_int_equal(f.type, TD_MSG_PAGES);
		assert_int_equal(td_msg_unpack_pages(&f, PAGE, &pg), 0);
		*cpu = (int)pg.cpu;
		*n = pg.count;
		assert_int_equal(pg.first_seq, seq[*cpu]);
		data = pg.data;
	} else {
		assert_int_equal(f.type, TD_MSG_PAGES_Z);
		assert_int_equal(td_msg_unpack_pages_z(&f, &pz), 0);
		*cpu = (int)pz.cpu;
		*n = pz.count;
		assert_true((size_t)*n * PAGE <= cap);
		assert_int_equal(pz.first_seq, seq[*cpu]);
		assert_int_equal(td_codec_decompress(c, pz.data,
		    f.len - (size_t)(pz.data - f.payload), back,
		    (size_t)*n * PAGE), (ssize_t)*n * PAGE);
		data = back;
	}
	seq[*cpu] += *n;
	return data;
}

/* Pages come out as PAGES frames, per CPU, numbered, batched. */
static void
check_pages(int wire)
{
	struct stream *s;
	struct td_buf out;
	struct td_codec *c = NULL;
	uint8_t page[PAGE], back[TD_CHUNK_PAGES * PAGE];
	uint64_t seq[2] = { 0, 0 };
	size_t off = 0;
	int i, cpu, frames = 0;

	assert_non_null(s = stream_new(PAGE, 2, wire, NULL, 0));
	td_buf_init(&out, 64u << 20);
	/* 25 pages of CPU 0, then 3 of CPU 1, then 1 of CPU 0, short */
	for (i = 0; i < 29; i++) {
		cpu = i >= 25 && i < 28 ? 1 : 0;
		memset(page, 'a' + i, sizeof page);
		assert_int_equal(stream_page(s, cpu, page, i == 28 ? 100 :
		    PAGE), 0);
		assert_true(stream_batch_open(s));
	}
	/* the open batch is not sent before it is closed */
	take(s, &out, 4096, SIZE_MAX);
	assert_int_equal(stream_batch_end(s), 0);
	assert_false(stream_batch_open(s));
	take(s, &out, 4096, SIZE_MAX);
	assert_int_equal(stream_raw(s), 29u * PAGE);
	errno = 0;
	assert_int_equal(stream_page(s, 2, page, PAGE), -1);
	assert_int_equal(errno, EINVAL);
	if (wire != 0)
		c = td_codec_new(wire == TD_WIRE_ZSTD ? TD_CODEC_ZSTD :
		    TD_CODEC_ZLIB, 0);
	i = 0;
	while (off < out.len) {
		const uint8_t *data;
		uint32_t n, k;

		data = next_pages(&out, &off, wire, c, back, sizeof back, seq,
		    &cpu, &n);
		for (k = 0; k < n; k++, i++) {
			assert_int_equal(cpu, i >= 25 && i < 28 ? 1 : 0);
			assert_int_equal(data[(size_t)k * PAGE], 'a' + i);
			/* a short page travels whole, padded with zeros */
			if (i == 28)
				assert_int_equal(data[(size_t)k * PAGE + 100],
				    0);
		}
		frames++;
	}
	assert_int_equal(i, 29);
	assert_int_equal(seq[0], 26);
	assert_int_equal(seq[1], 3);
	/* a batch per CPU run; with wire compression at most 10 pages each */
	assert_int_equal(frames, wire == 0 ? 3 : 3 + 2);
	/* the frames that carried the pages, counted once: all of out */
	assert_int_equal(stream_framed(s), out.len);
	td_codec_free(c);
	td_buf_free(&out);
	stream_free(s);
}

static void
test_pages(void **state)
{
	(void)state;
	check_pages(0);
}

static void
test_pages_zstd(void **state)
{
	(void)state;
	check_pages(TD_WIRE_ZSTD);
}

static void
test_pages_zlib(void **state)
{
	(void)state;
	check_pages(TD_WIRE_ZLIB);
}

/*
 * Pages read in place (stream_room(), then stream_page() on the room) come
 * out as copied ones do: 600 pages or so of CPU 0 asked for 40 at a time
 * (the room stops at a batch's end: 64 pages of 4 KiB in a frame), a
 * copied page of CPU 1 between them, then room of CPU 1; an unknown CPU
 * gets none.
 */
static void
check_room(int wire)
{
	struct stream *s;
	struct td_buf out;
	struct td_codec *c = NULL;
	uint8_t page[PAGE], *room, *back = malloc(TD_MAX_FRAME), want[700];
	uint64_t seq[2] = { 0, 0 }, made = 0, got = 0, ones = 0;
	bool copied = false;
	uint32_t np, k, lowered = 0;
	size_t off = 0;
	int cpu;

	assert_non_null(back);
	assert_non_null(s = stream_new(PAGE, 2, wire, NULL, 0));
	td_buf_init(&out, 64u << 20);
	while (made < 600) {
		np = 40;
		cpu = made >= 440 && made < 480 ? 1 : 0;
		assert_non_null(room = stream_room(s, cpu, &np));
		assert_true(np >= 1 && np <= 40);
		lowered += np < 40;
		for (k = 0; k < np; k++) {
			memset(room + (size_t)k * PAGE, (int)(made + k), PAGE);
			want[made + k] = (uint8_t)cpu;
			ones += cpu;
		}
		for (k = 0; k < np; k++)
			assert_int_equal(stream_page(s, cpu, room +
			    (size_t)k * PAGE, PAGE), 0);
		made += np;
		if (!copied && made >= 400) {	/* a copied page between */
			memset(page, (int)made, PAGE);
			assert_int_equal(stream_page(s, 1, page, PAGE), 0);
			want[made++] = 1;
			ones++;
			copied = true;
		}
		take(s, &out, 7777, SIZE_MAX);
	}
	np = 1;
	errno = 0;
	assert_null(stream_room(s, 2, &np));
	assert_int_equal(errno, EINVAL);
	assert_true(lowered >= 1);
	assert_int_equal(stream_batch_end(s), 0);
	take(s, &out, 7777, SIZE_MAX);
	if (wire != 0)
		c = td_codec_new(TD_CODEC_ZSTD, 0);
	while (off < out.len) {
		const uint8_t *data;
		uint32_t n;

		data = next_pages(&out, &off, wire, c, back, TD_MAX_FRAME, seq,
		    &cpu, &n);
		assert_true(n <= 256 * 1024 / PAGE);
		for (k = 0; k < n; k++, got++) {
			assert_int_equal(cpu, want[got]);
			assert_int_equal(data[(size_t)k * PAGE], (uint8_t)got);
			assert_int_equal(data[(size_t)k * PAGE + PAGE - 1],
			    (uint8_t)got);
		}
	}
	assert_int_equal(got, made);
	assert_int_equal(seq[1], ones);
	assert_true(ones >= 41);
	assert_int_equal(stream_raw(s), made * PAGE);
	td_codec_free(c);
	td_buf_free(&out);
	stream_free(s);
	free(back);
}

static void
test_room(void **state)
{
	(void)state;
	check_room(0);
	check_room(TD_WIRE_ZSTD);
}

/*
 * A chunk compressed elsewhere travels as it is, one PAGES_Z between the
 * pages around it, numbered on with them; what cannot travel is refused.
 */
static void
test_chunk(void **state)
{
	struct stream *s;
	struct td_buf out;
	struct td_frame f;
	struct td_pages pg;
	struct td_pages_z pz;
	struct td_codec *c;
	uint8_t page[PAGE], raw[3 * PAGE], back[3 * PAGE], *z;
	size_t off = 0, zcap;
	ssize_t zlen;
	int i;

	(void)state;
	assert_non_null(s = stream_new(PAGE, 2, 0, NULL, 0));
	assert_non_null(c = td_codec_new(TD_CODEC_ZSTD, 0));
	zcap = td_codec_bound(c, sizeof raw);
	assert_non_null(z = malloc(zcap));
	for (i = 0; i < 3; i++)
		memset(raw + (size_t)i * PAGE, 'c' + i, PAGE);
	zlen = td_codec_compress(c, raw, sizeof raw, z, zcap);
	assert_true(zlen > 0);
	td_buf_init(&out, 1u << 20);
	memset(page, 'a', sizeof page);
	assert_int_equal(stream_page(s, 0, page, PAGE), 0);
	assert_int_equal(stream_page(s, 0, page, PAGE), 0);
	assert_int_equal(stream_chunk(s, 0, TD_CODEC_ZSTD, z, (size_t)zlen, 3),
	    0);
	assert_false(stream_batch_open(s));
	assert_int_equal(stream_page(s, 0, page, PAGE), 0);
	assert_int_equal(stream_batch_end(s), 0);
	/* what cannot travel: no codec, no such CPU, no or too many pages */
	errno = 0;
	assert_int_equal(stream_chunk(s, 0, TD_CODEC_NONE, z, (size_t)zlen,
	    3), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(stream_chunk(s, 2, TD_CODEC_ZSTD, z, (size_t)zlen,
	    3), -1);
	assert_int_equal(stream_chunk(s, 0, TD_CODEC_ZSTD, z, (size_t)zlen,
	    0), -1);
	assert_int_equal(stream_chunk(s, 0, TD_CODEC_ZSTD, z, (size_t)zlen,
	    TD_CHUNK_PAGES + 1), -1);
	take(s, &out, 1000, SIZE_MAX);

	assert_int_equal(td_frame_parse(out.data, out.len, &f), 1);
	assert_int_equal(f.type, TD_MSG_PAGES);
	assert_int_equal(td_msg_unpack_pages(&f, PAGE, &pg), 0);
	assert_int_equal(pg.first_seq, 0);
	assert_int_equal(pg.count, 2);
	off += f.total;
	assert_int_equal(td_frame_parse(out.data + off, out.len - off, &f), 1);
	assert_int_equal(f.type, TD_MSG_PAGES_Z);
	assert_int_equal(td_msg_unpack_pages_z(&f, &pz), 0);
	assert_int_equal(pz.cpu, 0);
	assert_int_equal(pz.first_seq, 2);
	assert_int_equal(pz.count, 3);
	assert_int_equal(pz.codec, TD_WIRE_ZSTD);
	assert_int_equal(pz.len, (size_t)zlen);
	assert_memory_equal(pz.data, z, (size_t)zlen);
	assert_int_equal(td_codec_decompress(c, pz.data, pz.len, back,
	    sizeof back), (ssize_t)sizeof back);
	assert_memory_equal(back, raw, sizeof raw);
	off += f.total;
	assert_int_equal(td_frame_parse(out.data + off, out.len - off, &f), 1);
	assert_int_equal(f.type, TD_MSG_PAGES);
	assert_int_equal(td_msg_unpack_pages(&f, PAGE, &pg), 0);
	assert_int_equal(pg.first_seq, 5);
	assert_int_equal(pg.count, 1);
	off += f.total;
	assert_int_equal(off, out.len);
	assert_int_equal(stream_raw(s), 6u * PAGE);
	assert_int_equal(stream_framed(s), out.len);
	free(z);
	td_codec_free(c);
	td_buf_free(&out);
	stream_free(s);
}

/*
 * Section bytes: staged and framed 256 KiB at a time as SECTION_DATA_Z
 * that decompresses to exactly them; what does not compress goes plain;
 * an open PAGES batch is closed first.
 */
static void
test_sections(void **state)
{
	static uint8_t text[600000], noise[5000], back[TD_SECTION_Z_RAW];
	struct stream *s;
	struct td_buf out;
	struct td_frame f;
	struct td_section_z sz;
	struct td_codec *c;
	uint8_t page[PAGE];
	size_t i, off = 0, at = 0;
	uint32_t x = 1;
	int z = 0, plain = 0;

	for (i = 0; i < sizeof text; i++)	/* kallsyms-like lines */
		text[i] = i % 41 == 40 ? '\n' : "ffffffff8100 T sym_"[i % 19];
	for (i = 0; i < sizeof noise; i++) {
		x = x * 1103515245 + 12345;
		noise[i] = (uint8_t)(x >> 16);
	}
	assert_non_null(s = stream_new(PAGE, 1, 0, NULL, 0));
	assert_non_null(c = td_codec_new(TD_CODEC_ZSTD, 0));
	td_buf_init(&out, 64u << 20);
	memset(page, 'p', sizeof page);
	assert_int_equal(stream_page(s, 0, page, PAGE), 0);
	/* in uneven pieces, as meta.c reads them */
	for (i = 0; i < sizeof text; i += 65536)
		assert_int_equal(stream_section_data(s, text + i,
		    sizeof text - i < 65536 ? sizeof text - i : 65536), 0);
	assert_false(stream_batch_open(s));
	assert_int_equal(stream_section_flush(s), 0);
	assert_int_equal(stream_section_data(s, noise, sizeof noise), 0);
	assert_int_equal(stream_section_flush(s), 0);
	assert_int_equal(stream_section_flush(s), 0);	/* nothing: no frame */
	take(s, &out, 4096, SIZE_MAX);
	while (off < out.len) {
		assert_int_equal(td_frame_parse(out.data + off, out.len - off,
		    &f), 1);
		off += f.total;
		if (f.type == TD_MSG_PAGES)
			continue;
		if (f.type == TD_MSG_SECTION_DATA_Z) {
			assert_int_equal(td_msg_unpack_section_z(&f, &sz), 0);
			assert_int_equal(sz.codec, TD_WIRE_ZSTD);
			assert_true(sz.len < sz.raw_len);
			assert_int_equal(td_codec_decompress(c, sz.data, sz.len,
			    back, sz.raw_len), (ssize_t)sz.raw_len);
			assert_memory_equal(back, text + at, sz.raw_len);
			at += sz.raw_len;
			z++;
		} else {
			assert_int_equal(f.type, TD_MSG_SECTION_DATA);
			assert_int_equal(f.len, sizeof noise);
			assert_memory_equal(f.payload, noise, sizeof noise);
			plain++;
		}
	}
	assert_int_equal(at, sizeof text);
	assert_int_equal(z, 3);		/* 256 KiB, 256 KiB, the rest */
	assert_int_equal(plain, 1);
	td_codec_free(c);
	td_buf_free(&out);
	stream_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memory),
		cmocka_unit_test(test_spool),
		cmocka_unit_test(test_congested),
		cmocka_unit_test(test_pages),
		cmocka_unit_test(test_pages_zstd),
		cmocka_unit_test(test_pages_zlib),
		cmocka_unit_test(test_room),
		cmocka_unit_test(test_chunk),
		cmocka_unit_test(test_sections),
	};

	return cmocka_run_group_tests_name("stream", tests, NULL, NULL);
}
