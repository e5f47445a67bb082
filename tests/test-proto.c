/*
 * test-proto.c: the wire protocol's frames and messages: every message
 * round-trips, frames are found byte by byte in a stream, and every kind of
 * malformed payload is rejected with EBADMSG.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "tdproto.h"

static void
one_frame(struct td_buf *b, struct td_frame *f)
{
	assert_int_equal(td_frame_parse(b->data, b->len, f), 1);
	assert_int_equal(f->total, b->len);
}

static struct td_hello
sample_hello(void)
{
	struct td_hello h;

	memset(&h, 0, sizeof h);
	h.version_min = 1;
	h.version_max = 1;
	h.ncpus = 8;
	h.page_size = 4096;
	h.long_size = 8;
	h.commit_size = 8;
	h.file_version = 7;
	h.recording_id = 0x0123456789abcdefULL;
	h.trace_id = 0xfedcba9876543210ULL;
	strcpy(h.name, "web1");
	strcpy(h.clock, "mono");
	return h;
}

static void
test_hello_roundtrip(void **state)
{
	struct td_hello h = sample_hello(), g;
	struct td_buf b;
	struct td_frame f;

	td_buf_init(&b, 1 << 20);
	assert_int_equal(td_msg_pack_hello(&b, &h), 0);
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_HELLO);
	assert_string_equal(td_msg_name(f.type), "HELLO");
	assert_int_equal(td_msg_unpack_hello(&f, &g), 0);
	assert_memory_equal(&h, &g, sizeof h);
	/* big-endian on the wire */
	assert_int_equal(b.data[8], 0);
	assert_int_equal(b.data[9], 1);
	td_buf_free(&b);
}

static void
test_hello_rejects(void **state)
{
	struct td_hello h, g;
	struct td_buf b;
	struct td_frame f;
	int i;

	for (i = 0; i < 10; i++) {
		h = sample_hello();
		switch (i) {
		case 0: h.ncpus = 0; break;
		case 1: h.ncpus = TD_MAX_CPUS + 1; break;
		case 2: h.page_size = 16; break;
		case 3: h.page_size = TD_MAX_PAGE_SIZE * 2; break;
		case 4: h.long_size = 3; break;
		case 5: h.commit_size = 2; break;
		case 6: h.file_version = 5; break;
		case 7: h.clock[0] = '\0'; break;
		case 8: h.version_min = h.version_max + 1; break;
		case 9: h.flags = 0x0002; break;	/* unknown flag */
		}
		td_buf_init(&b, 1 << 20);
		assert_int_equal(td_msg_pack_hello(&b, &h), 0);
		one_frame(&b, &f);
		errno = 0;
		assert_int_equal(td_msg_unpack_hello(&f, &g), -1);
		assert_int_equal(errno, EBADMSG);
		td_buf_free(&b);
	}
}

/* A control character in a string is refused: it could forge log lines. */
static void
test_string_rejects(void **state)
{
	struct td_hello h = sample_hello(), g;
	struct td_buf b;
	struct td_frame f;
	size_t i;

	td_buf_init(&b, 1 << 20);
	assert_int_equal(td_msg_pack_hello(&b, &h), 0);
	for (i = 0; i + 4 <= b.len; i++)
		if (memcmp(b.data + i, "web1", 4) == 0)
			break;
	assert_true(i + 4 <= b.len);
	b.data[i + 1] = '\n';
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_hello(&f, &g), -1);
	/* a name of the longest length goes through whole */
	memset(h.name, 'a', sizeof h.name - 1);
	h.name[sizeof h.name - 1] = '\0';
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_hello(&b, &h), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_hello(&f, &g), 0);
	assert_string_equal(g.name, h.name);
	td_buf_free(&b);
}

static void
test_truncated_and_trailing(void **state)
{
	struct td_hello h = sample_hello(), g;
	struct td_buf b;
	struct td_frame f;
	size_t cut;

	td_buf_init(&b, 1 << 20);
	assert_int_equal(td_msg_pack_hello(&b, &h), 0);
	/* every shorter declared length is refused by the decoder */
	for (cut = 28; cut < b.len - TD_FRAME_HEADER; cut++) {
		f.type = TD_MSG_HELLO;
		f.payload = b.data + TD_FRAME_HEADER;
		f.len = cut;
		assert_int_equal(td_msg_unpack_hello(&f, &g), -1);
	}
	/* trailing bytes too */
	td_buf_add_zero(&b, 3);
	f.type = TD_MSG_HELLO;
	f.payload = b.data + TD_FRAME_HEADER;
	f.len = b.len - TD_FRAME_HEADER;
	assert_int_equal(td_msg_unpack_hello(&f, &g), -1);
	/* a decoder for another type refuses the frame */
	f.len -= 3;
	assert_int_equal(td_msg_unpack_hello(&f, &g), 0);
	{
		struct td_welcome w;

		assert_int_equal(td_msg_unpack_welcome(&f, &w), -1);
	}
	td_buf_free(&b);
}

static void
test_frames_in_stream(void **state)
{
	struct td_buf b;
	struct td_frame f;
	uint8_t page[256 * 3];
	size_t off, avail, n = 0;
	uint16_t id;
	int r;

	td_buf_init(&b, 1 << 20);
	memset(page, 0xab, sizeof page);
	assert_int_equal(td_msg_pack_section(&b, 16), 0);
	assert_int_equal(td_msg_pack_section_data(&b, "abc", 3), 0);
	assert_int_equal(td_msg_pack_section_end(&b), 0);
	assert_int_equal(td_msg_pack_pages_head(&b, 1, 3, 77, 256), 0);
	assert_int_equal(td_buf_add(&b, page, sizeof page), 0);
	assert_int_equal(td_msg_pack_error(&b, 5, "bye\n"), 0);
	/* feed the stream one byte more each time */
	for (off = 0, avail = 0; off < b.len;) {
		r = td_frame_parse(b.data + off, avail, &f);
		assert_true(r >= 0);
		if (r == 0) {
			avail++;
			assert_true(off + avail <= b.len);
			continue;
		}
		n++;
		if (f.type == TD_MSG_SECTION) {
			assert_int_equal(td_msg_unpack_section(&f, &id), 0);
			assert_int_equal(id, 16);
		} else if (f.type == TD_MSG_PAGES) {
			struct td_pages pg;

			assert_int_equal(td_msg_unpack_pages(&f, 256, &pg), 0);
			assert_int_equal(pg.cpu, 1);
			assert_int_equal(pg.count, 3);
			assert_int_equal(pg.first_seq, 77);
			assert_memory_equal(pg.data, page, sizeof page);
			/* the wrong page size is refused */
			assert_int_equal(td_msg_unpack_pages(&f, 512, &pg), -1);
			/* the same from the first 16 bytes and the length */
			memset(&pg, 0, sizeof pg);
			assert_int_equal(td_msg_unpack_pages_head(f.payload,
			    f.len, 256, &pg), 0);
			assert_int_equal(pg.cpu, 1);
			assert_int_equal(pg.count, 3);
			assert_int_equal(pg.first_seq, 77);
			assert_int_equal(pg.len, sizeof page);
			assert_null(pg.data);
			assert_int_equal(td_msg_unpack_pages_head(f.payload,
			    f.len, 512, &pg), -1);
			assert_int_equal(td_msg_unpack_pages_head(f.payload,
			    f.len - 1, 256, &pg), -1);
			assert_int_equal(td_msg_unpack_pages_head(f.payload,
			    f.len + 256, 256, &pg), -1);
			assert_int_equal(td_msg_unpack_pages_head(f.payload,
			    TD_PAGES_HEAD - 1, 256, &pg), -1);
		} else if (f.type == TD_MSG_ERROR) {
			struct td_error e;

			assert_int_equal(td_msg_unpack_error(&f, &e), 0);
			assert_int_equal(e.code, 5);
			assert_string_equal(e.text, "bye?");
		}
		off += f.total;
		avail = 0;
	}
	assert_int_equal(n, 5);
	td_buf_free(&b);
}

static void
test_frame_limits(void **state)
{
	uint8_t h[TD_FRAME_HEADER] = { 0 };
	struct td_frame f;
	struct td_buf b;

	/* unknown type */
	h[5] = 99;
	assert_int_equal(td_frame_parse(h, sizeof h, &f), -1);
	assert_int_equal(errno, EBADMSG);
	/* SECTION_END with a payload */
	h[5] = TD_MSG_SECTION_END;
	h[3] = 1;
	assert_int_equal(td_frame_parse(h, sizeof h, &f), -1);
	/* PAGES over the frame cap */
	h[5] = TD_MSG_PAGES;
	h[0] = 0x7f;
	assert_int_equal(td_frame_parse(h, sizeof h, &f), -1);
	/* a good header asks for its whole frame */
	h[0] = 0;
	h[1] = 0;
	h[2] = 0x10;
	h[3] = 0x10;
	assert_int_equal(td_frame_parse(h, sizeof h, &f), 0);
	assert_int_equal(f.total, TD_FRAME_HEADER + 0x1010);
	/* packers refuse what decoders would refuse */
	td_buf_init(&b, 1 << 22);
	assert_int_equal(td_msg_pack_pages_head(&b, 0, 0, 0, 4096), -1);
	assert_int_equal(td_msg_pack_pages_head(&b, 0, 300, 0, 4096), -1);
	td_buf_free(&b);
}

static void
test_other_messages(void **state)
{
	struct td_welcome w = { .version = 2, .tsync_interval = 500,
	    .session_id = 42, .identity = "web1", .flags = TD_WELCOME_RESUMED,
	    .resume_offset = 1ULL << 33 | 7, .idle_timeout = 60 }, w2;
	uint64_t off;
	struct td_done d, d2;
	struct td_end *e, *e2;
	struct td_buf b;
	struct td_frame f;
	const uint8_t *p;
	uint16_t id;
	size_t n;

	td_buf_init(&b, 1 << 20);
	assert_int_equal(td_msg_pack_welcome(&b, &w), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_welcome(&f, &w2), 0);
	assert_int_equal(w2.version, 2);
	assert_int_equal(w2.flags, TD_WELCOME_RESUMED);
	assert_int_equal(w2.resume_offset, 1ULL << 33 | 7);
	assert_int_equal(w2.idle_timeout, 60);
	assert_int_equal(w2.session_id, 42);
	/* an unknown flag is refused */
	b.data[TD_FRAME_HEADER + 3] = 2;
	assert_int_equal(td_msg_unpack_welcome(&f, &w2), -1);
	/* version 5: the probe port, its id and key, 42 bytes more */
	td_buf_reset(&b);
	w.version = 5;
	w.udp_port = 4001;
	w.udp_id = 0x0102030405060708ULL;
	memset(w.udp_key, 0xa5, sizeof w.udp_key);
	w.udp_key[31] = 1;
	w.ref_ns = 123456789012345ULL;
	assert_int_equal(td_msg_pack_welcome(&b, &w), 0);
	assert_int_equal(b.len, TD_FRAME_HEADER + 30 + 4 + 50);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_welcome(&f, &w2), 0);
	assert_int_equal(w2.udp_port, 4001);
	assert_true(w2.udp_id == w.udp_id);
	assert_memory_equal(w2.udp_key, w.udp_key, sizeof w.udp_key);
	assert_true(w2.ref_ns == 123456789012345ULL);
	/* one byte short of the key */
	f.len--;
	assert_int_equal(td_msg_unpack_welcome(&f, &w2), -1);

	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_ack(&b, 0x0102030405060708ULL), 0);
	assert_int_equal(b.len, TD_FRAME_HEADER + 8);
	assert_int_equal(b.data[TD_FRAME_HEADER], 1);	/* big-endian */
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_ACK);
	assert_int_equal(td_msg_unpack_ack(&f, &off), 0);
	assert_int_equal(off, 0x0102030405060708ULL);
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_keepalive(&b), 0);
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_KEEPALIVE);
	assert_int_equal(f.len, 0);
	assert_false(TD_MSG_IN_STREAM(TD_MSG_KEEPALIVE));
	assert_false(TD_MSG_IN_STREAM(TD_MSG_TSYNC_PROBE));
	assert_true(TD_MSG_IN_STREAM(TD_MSG_PAGES));
	assert_true(TD_MSG_IN_STREAM(TD_MSG_TSYNC_SAMPLE));
	assert_true(TD_MSG_IN_STREAM(TD_MSG_PAGES_Z));

	/* CMDLINES (version 6): the bytes docs/tdproto.md shows, in the stream */
	{
		static const uint8_t want[] = { 0, 0, 0, 0x0e, 0, 0x1a, 0, 0,
		    '1', '2', '3', ' ', 't', 'd', 'r', 'o', 't', 'l', 'o',
		    'a', 'd', '\n' };

		td_buf_reset(&b);
		assert_int_equal(td_msg_pack_cmdlines(&b, "123 tdrotload\n",
		    14), 0);
		assert_int_equal(b.len, sizeof want);
		assert_memory_equal(b.data, want, sizeof want);
		one_frame(&b, &f);
		assert_int_equal(f.type, TD_MSG_CMDLINES);
		assert_int_equal(f.len, 14);
		assert_true(TD_MSG_IN_STREAM(TD_MSG_CMDLINES));
		assert_string_equal(td_msg_name(TD_MSG_CMDLINES), "CMDLINES");
		td_buf_reset(&b);
		assert_int_equal(td_msg_pack_cmdlines(&b, NULL, 0), 0);
		one_frame(&b, &f);
		assert_int_equal(f.len, 0);
		td_buf_reset(&b);
		assert_int_equal(td_msg_pack_cmdlines(&b, "", TD_MAX_FRAME + 1),
		    -1);
	}

	{
		struct td_pages_z pz = { .cpu = 3, .count = 10,
		    .first_seq = 1ULL << 36, .codec = TD_WIRE_ZSTD,
		    .data = (const uint8_t *)"zzz", .len = 3 }, pz2;

		td_buf_reset(&b);
		assert_int_equal(td_msg_pack_pages_z(&b, &pz), 0);
		assert_int_equal(b.len, TD_FRAME_HEADER + 20 + 3);
		one_frame(&b, &f);
		assert_int_equal(f.type, TD_MSG_PAGES_Z);
		assert_int_equal(td_msg_unpack_pages_z(&f, &pz2), 0);
		assert_int_equal(pz2.cpu, 3);
		assert_int_equal(pz2.count, 10);
		assert_int_equal(pz2.first_seq, 1ULL << 36);
		assert_int_equal(pz2.codec, TD_WIRE_ZSTD);
		assert_int_equal(pz2.len, 3);
		assert_memory_equal(pz2.data, "zzz", 3);
		/* more pages than a chunk, an unknown codec, reserved bits */
		b.data[TD_FRAME_HEADER + 7] = TD_CHUNK_PAGES + 1;
		assert_int_equal(td_msg_unpack_pages_z(&f, &pz2), -1);
		b.data[TD_FRAME_HEADER + 7] = 0;
		assert_int_equal(td_msg_unpack_pages_z(&f, &pz2), -1);
		b.data[TD_FRAME_HEADER + 7] = 1;
		b.data[TD_FRAME_HEADER + 17] = 3;
		assert_int_equal(td_msg_unpack_pages_z(&f, &pz2), -1);
		b.data[TD_FRAME_HEADER + 17] = TD_WIRE_ZLIB;
		b.data[TD_FRAME_HEADER + 19] = 1;
		assert_int_equal(td_msg_unpack_pages_z(&f, &pz2), -1);
		b.data[TD_FRAME_HEADER + 19] = 0;
		assert_int_equal(td_msg_unpack_pages_z(&f, &pz2), 0);
		pz.count = 0;
		assert_int_equal(td_msg_pack_pages_z(&b, &pz), -1);
	}
	assert_true(TD_MSG_IN_STREAM(TD_MSG_SECTION_DATA_Z));
	{
		struct td_section_z sz = { .codec = TD_WIRE_ZSTD,
		    .raw_len = 70000, .data = (const uint8_t *)"zz",
		    .len = 2 }, sz2;

		td_buf_reset(&b);
		assert_int_equal(td_msg_pack_section_z(&b, &sz), 0);
		assert_int_equal(b.len, TD_FRAME_HEADER + 8 + 2);
		one_frame(&b, &f);
		assert_int_equal(f.type, TD_MSG_SECTION_DATA_Z);
		assert_int_equal(td_msg_unpack_section_z(&f, &sz2), 0);
		assert_int_equal(sz2.codec, TD_WIRE_ZSTD);
		assert_int_equal(sz2.raw_len, 70000);
		assert_int_equal(sz2.len, 2);
		assert_memory_equal(sz2.data, "zz", 2);
		/* an unknown codec, reserved bits, no length, too long */
		b.data[TD_FRAME_HEADER + 1] = 3;
		assert_int_equal(td_msg_unpack_section_z(&f, &sz2), -1);
		b.data[TD_FRAME_HEADER + 1] = TD_WIRE_ZLIB;
		b.data[TD_FRAME_HEADER + 3] = 1;
		assert_int_equal(td_msg_unpack_section_z(&f, &sz2), -1);
		b.data[TD_FRAME_HEADER + 3] = 0;
		memset(b.data + TD_FRAME_HEADER + 4, 0, 4);
		assert_int_equal(td_msg_unpack_section_z(&f, &sz2), -1);
		b.data[TD_FRAME_HEADER + 5] = 0x04;	/* 256 KiB: the most */
		assert_int_equal(td_msg_unpack_section_z(&f, &sz2), 0);
		assert_int_equal(sz2.raw_len, TD_SECTION_Z_RAW);
		b.data[TD_FRAME_HEADER + 7] = 1;	/* one more */
		assert_int_equal(td_msg_unpack_section_z(&f, &sz2), -1);
		sz.raw_len = TD_SECTION_Z_RAW + 1;
		assert_int_equal(td_msg_pack_section_z(&b, &sz), -1);
		sz.raw_len = 1;
		sz.len = 0;
		assert_int_equal(td_msg_pack_section_z(&b, &sz), -1);
	}
	assert_int_equal(w2.tsync_interval, 500);
	assert_string_equal(w2.identity, "web1");

	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_option(&b, 5, "Linux x", 8), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_option(&f, &id, &p, &n), 0);
	assert_int_equal(id, 5);
	assert_int_equal(n, 8);
	assert_string_equal((const char *)p, "Linux x");

	e = calloc(1, sizeof *e);
	e2 = calloc(1, sizeof *e2);
	e->ncpus = 3;
	e->pages[0] = 1;
	e->pages[2] = 1ULL << 40;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_end(&b, e), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_end(&f, e2), 0);
	assert_int_equal(e2->ncpus, 3);
	assert_int_equal(e2->pages[2], 1ULL << 40);
	/* a CPU count that disagrees with the length */
	b.data[TD_FRAME_HEADER + 3] = 4;
	assert_int_equal(td_msg_unpack_end(&f, e2), -1);
	free(e);
	free(e2);

	memset(&d, 0, sizeof d);
	d.file_size = 123456789;
	strcpy(d.path, "web1/web1-20261121T000000Z.dat");
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_done(&b, &d), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_done(&f, &d2), 0);
	assert_int_equal(d2.file_size, d.file_size);
	assert_string_equal(d2.path, d.path);
	td_buf_free(&b);
}

static void
test_tsync_messages(void **state)
{
	struct td_tsync_probe p = { 3, 17, 0 }, q;
	struct td_tsync_sample s, t;
	struct td_buf b;
	struct td_frame f;

	td_buf_init(&b, 1 << 20);
	assert_int_equal(td_msg_pack_tsync_probe(&b, &p), 0);
	one_frame(&b, &f);
	assert_int_equal(f.flags & TD_FRAME_URGENT, TD_FRAME_URGENT);
	assert_int_equal(td_msg_unpack_tsync_probe(&f, &q), 0);
	assert_int_equal(q.round, 3);
	assert_int_equal(q.seq, 17);
	/* a probe is not a reply */
	assert_int_equal(td_msg_unpack_tsync_reply(&f, &q), -1);

	td_buf_reset(&b);
	p.ref_ns = 123456789012345ULL;
	assert_int_equal(td_msg_pack_tsync_reply(&b, &p), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_tsync_reply(&f, &q), 0);
	assert_int_equal(q.ref_ns, 123456789012345ULL);

	memset(&s, 0, sizeof s);
	s.round = 9;
	s.probes = 64;
	s.ts = 1000;
	s.offset = -5000000000LL;
	s.scaling = 1;
	s.bound = 7000;
	s.rtt = 14000;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_tsync_sample(&b, &s), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_tsync_sample(&f, &t), 0);
	assert_int_equal(t.offset, -5000000000LL);
	assert_int_equal(t.bound, 7000);
	/* nonsense is refused: zero scaling, frac past 63 */
	s.scaling = 0;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_tsync_sample(&b, &s), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_tsync_sample(&f, &t), -1);
	td_buf_free(&b);
}

/* Random bytes never crash the decoders. */
static void
test_random_payloads(void **state)
{
	uint8_t buf[600];
	struct td_frame f;
	struct td_hello h;
	struct td_welcome w;
	struct td_pages pg;
	struct td_done d;
	struct td_error e;
	struct td_tsync_probe tp;
	struct td_tsync_sample ts;
	struct td_end *end = malloc(sizeof *end);
	const uint8_t *p;
	uint16_t id;
	size_t n;
	int i, k;

	srand(7);
	for (i = 0; i < 20000; i++) {
		n = rand() % sizeof buf;
		for (k = 0; k < (int)n; k++)
			buf[k] = rand();
		f.payload = buf;
		f.len = n;
		for (f.type = 1; f.type <= 13; f.type++) {
			td_msg_unpack_tsync_probe(&f, &tp);
			td_msg_unpack_tsync_reply(&f, &tp);
			td_msg_unpack_tsync_sample(&f, &ts);
			td_msg_unpack_hello(&f, &h);
			td_msg_unpack_welcome(&f, &w);
			td_msg_unpack_section(&f, &id);
			td_msg_unpack_option(&f, &id, &p, &n);
			td_msg_unpack_pages(&f, 256, &pg);
			td_msg_unpack_end(&f, end);
			td_msg_unpack_done(&f, &d);
			td_msg_unpack_error(&f, &e);
			n = f.len;
		}
		td_frame_parse(buf, n, &f);
	}
	free(end);
}

/*
 * TD_OPT_TD_GUEST's content: the bytes docs/tdproto.md shows, the round
 * trip with the KVM block, and what the decoder refuses.
 */
/*
 * The header cache's messages (version 4): SECTION_OFFER and SECTION_HAVE
 * outside the stream, SECTION_REF in it; the documented bytes; every bad
 * field refused.
 */
static void
test_hcache_messages(void **state)
{
	struct td_section_offer o, o2;
	struct td_section_have h, h2;
	struct td_section_ref r, r2;
	struct td_buf b;
	struct td_frame f;
	unsigned i;

	td_buf_init(&b, 1 << 20);
	/* whole structs are compared: their padding too */
	memset(&o2, 0, sizeof o2);
	memset(&r2, 0, sizeof r2);
	assert_false(TD_MSG_IN_STREAM(TD_MSG_SECTION_OFFER));
	assert_true(TD_MSG_IN_STREAM(TD_MSG_SECTION_HAVE));	/* never sent
								   by agents */
	assert_true(TD_MSG_IN_STREAM(TD_MSG_SECTION_REF));

	memset(&r, 0, sizeof r);
	r.id = 19;
	r.length = 5413122;
	for (i = 0; i < TD_HCACHE_SHA_LEN; i++)
		r.sha[i] = (uint8_t)i;
	assert_int_equal(td_msg_pack_section_ref(&b, &r), 0);
	assert_int_equal(b.len, TD_FRAME_HEADER + 44);
	{
		static const uint8_t head[] = {
			0x00, 0x00, 0x00, 0x2c, 0x00, 0x14, 0x00, 0x00,
			0x00, 0x13, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
			0x00, 0x52, 0x99, 0x02, 0x00, 0x01, 0x02, 0x03,
		};

		assert_memory_equal(b.data, head, sizeof head);
	}
	one_frame(&b, &f);
	assert_string_equal(td_msg_name(f.type), "SECTION_REF");
	assert_int_equal(td_msg_unpack_section_ref(&f, &r2), 0);
	assert_memory_equal(&r, &r2, sizeof r);
	b.data[TD_FRAME_HEADER + 1] = 22;	/* no such section */
	assert_int_equal(td_msg_unpack_section_ref(&f, &r2), -1);
	assert_int_equal(errno, EBADMSG);
	b.data[TD_FRAME_HEADER + 1] = 15;
	assert_int_equal(td_msg_unpack_section_ref(&f, &r2), -1);
	b.data[TD_FRAME_HEADER + 1] = 19;
	b.data[TD_FRAME_HEADER + 3] = 1;	/* reserved */
	assert_int_equal(td_msg_unpack_section_ref(&f, &r2), -1);
	b.data[TD_FRAME_HEADER + 3] = 0;
	b.data[TD_FRAME_HEADER + 7] = 0x01;	/* 256 MiB + 1 MiB */
	b.data[TD_FRAME_HEADER + 8] = 0x10;
	assert_int_equal(td_msg_unpack_section_ref(&f, &r2), -1);
	r.length = TD_MAX_SECTION_SIZE + 1;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_section_ref(&b, &r), -1);
	assert_int_equal(b.len, 0);
	r.length = 5413122;
	/* the table: exactly 44 bytes */
	{
		uint8_t hdr[8] = { 0, 0, 0, 43, 0, TD_MSG_SECTION_REF, 0, 0 };

		assert_int_equal(td_frame_parse(hdr, sizeof hdr, &f), -1);
		hdr[3] = 45;
		assert_int_equal(td_frame_parse(hdr, sizeof hdr, &f), -1);
		/* 2 + 44 x 9 offered: one more than TD_HCACHE_OFFER_MAX */
		hdr[2] = 0x01;
		hdr[3] = 0x8e;
		hdr[5] = TD_MSG_SECTION_OFFER;
		assert_int_equal(td_frame_parse(hdr, sizeof hdr, &f), -1);
		hdr[3] = 0x62;	/* 2 + 44 x 8 */
		assert_int_equal(td_frame_parse(hdr, sizeof hdr, &f), 0);
	}

	memset(&o, 0, sizeof o);
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_section_offer(&b, &o), 0);
	assert_int_equal(b.len, TD_FRAME_HEADER + 2);	/* none: valid */
	o.count = 5;
	for (i = 0; i < 5; i++) {
		o.ref[i] = r;
		o.ref[i].id = 16 + i;
		o.ref[i].length = 1000 * i;
	}
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_section_offer(&b, &o), 0);
	assert_int_equal(b.len, TD_FRAME_HEADER + 2 + 5 * 44);
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_SECTION_OFFER);
	assert_int_equal(td_msg_unpack_section_offer(&f, &o2), 0);
	assert_int_equal(o2.count, 5);
	assert_memory_equal(o2.ref, o.ref, 5 * sizeof o.ref[0]);
	/* a repeated id, a count that does not match the bytes */
	b.data[TD_FRAME_HEADER + 2 + 44 + 1] = 16;
	assert_int_equal(td_msg_unpack_section_offer(&f, &o2), -1);
	b.data[TD_FRAME_HEADER + 2 + 44 + 1] = 17;
	b.data[TD_FRAME_HEADER + 1] = 4;
	assert_int_equal(td_msg_unpack_section_offer(&f, &o2), -1);
	b.data[TD_FRAME_HEADER + 1] = 6;
	assert_int_equal(td_msg_unpack_section_offer(&f, &o2), -1);
	o.count = TD_HCACHE_OFFER_MAX + 1;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_section_offer(&b, &o), -1);

	memset(&h, 0, sizeof h);
	h.count = 3;
	h.have[1] = 1;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_section_have(&b, &h), 0);
	{
		static const uint8_t doc[] = {
			0x00, 0x00, 0x00, 0x05, 0x00, 0x13, 0x00, 0x00,
			0x00, 0x03, 0x00, 0x01, 0x00,
		};

		assert_int_equal(b.len, sizeof doc);
		assert_memory_equal(b.data, doc, sizeof doc);
	}
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_section_have(&f, &h2), 0);
	assert_int_equal(h2.count, 3);
	assert_memory_equal(h2.have, h.have, 3);
	b.data[TD_FRAME_HEADER + 3] = 2;	/* 0 or 1 only */
	assert_int_equal(td_msg_unpack_section_have(&f, &h2), -1);
	b.data[TD_FRAME_HEADER + 3] = 0;
	b.data[TD_FRAME_HEADER + 1] = 2;	/* trailing byte */
	assert_int_equal(td_msg_unpack_section_have(&f, &h2), -1);
	h.have[0] = 2;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_section_have(&b, &h), -1);
	td_buf_free(&b);
}

static void
test_guest_option(void **state)
{
	static const uint8_t doc[] = {
		0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x10, 0xe1,
		0x00, 0x03, 'v', 'm', '1',
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0xe8,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x10, 0xe9,
	};
	struct td_guest *g = calloc(1, sizeof *g), *h = calloc(1, sizeof *h);
	struct td_buf b;
	uint8_t bad[sizeof doc];

	assert_non_null(g);
	assert_non_null(h);
	td_buf_init(&b, TD_MAX_FRAME);
	assert_int_equal(td_msg_unpack_guest(doc, sizeof doc, g), 0);
	assert_string_equal(g->name, "vm1");
	assert_int_equal(g->pid, 4321);
	assert_int_equal(g->flags, 0);
	assert_int_equal(g->nvcpus, 2);
	assert_int_equal(g->vcpu[0].vcpu, 0);
	assert_int_equal(g->vcpu[0].tid, 4328);
	assert_int_equal(g->vcpu[1].vcpu, 1);
	assert_int_equal(g->vcpu[1].tid, 4329);
	assert_true(g->vcpu[1].tsc_ratio == 1);
	assert_int_equal(td_msg_pack_guest(&b, g), 0);
	assert_int_equal(b.len, sizeof doc);
	assert_memory_equal(b.data, doc, sizeof doc);

	/* with the KVM block: 8 + 2 vCPUs x 20 bytes more */
	g->flags = TD_GUEST_KVM;
	g->tsc_mult = 8388608;
	g->tsc_shift = 24;
	g->vcpu[0].tsc_offset = g->vcpu[1].tsc_offset = -123456789012LL;
	g->vcpu[0].tsc_ratio = g->vcpu[1].tsc_ratio = 1ULL << 48;
	g->vcpu[0].tsc_frac = g->vcpu[1].tsc_frac = 48;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_guest(&b, g), 0);
	assert_int_equal(b.len, sizeof doc + 8 + 2 * 20);
	assert_int_equal(td_msg_unpack_guest(b.data, b.len, h), 0);
	assert_int_equal(h->flags, TD_GUEST_KVM);
	assert_int_equal(h->tsc_mult, 8388608);
	assert_true(h->vcpu[1].tsc_offset == -123456789012LL);
	assert_true(h->vcpu[1].tsc_ratio == 1ULL << 48);
	assert_int_equal(h->vcpu[1].tsc_frac, 48);
	/* cut anywhere, or one byte too many */
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(td_msg_unpack_guest(b.data, n, h), -1);
	td_buf_add(&b, "", 1);
	assert_int_equal(td_msg_unpack_guest(b.data, b.len, h), -1);
	assert_int_equal(errno, EBADMSG);

	/* refused: version, flags, GONE with vCPUs, vCPUs out of order, a
	   negative thread, a vCPU past TD_MAX_CPUS, a control character;
	   no vCPU without GONE */
#define REFUSE(at, v) do {						\
		memcpy(bad, doc, sizeof doc);				\
		bad[at] = (v);						\
		assert_int_equal(td_msg_unpack_guest(bad, sizeof bad, h), -1); \
	} while (0)
	REFUSE(0, 2);
	REFUSE(1, 0x04);
	REFUSE(1, TD_GUEST_GONE);
	REFUSE(24, 0);
	REFUSE(17, 0x80);
	REFUSE(23, 0x10);
	REFUSE(12, '\n');
#undef REFUSE
	memcpy(bad, doc, sizeof doc);
	bad[3] = 0;		/* no vCPU */
	assert_int_equal(td_msg_unpack_guest(bad, 13, h), -1);
	bad[1] = TD_GUEST_GONE;
	assert_int_equal(td_msg_unpack_guest(bad, 13, h), 0);
	assert_int_equal(h->nvcpus, 0);
	td_buf_free(&b);
	free(g);
	free(h);
}

/* Standby frames: STANDBY, START, STOP, ANSWER round-trip; bad ones not. */
static void
test_standby_messages(void **state)
{
	struct td_standby st, st2;
	struct td_start *r = calloc(2, sizeof *r);
	struct td_answer a, a2;
	struct td_frame f;
	struct td_buf b;
	uint8_t junk[64];
	uint32_t req;
	size_t i, k;

	(void)state;
	assert_non_null(r);
	td_buf_init(&b, 64 * 1024);
	memset(&st, 0, sizeof st);
	st.version = TD_STANDBY_VERSION;
	st.ncpus = 2;
	strcpy(st.host, "web1");
	strcpy(st.kernel, "6.1.0-18-amd64");
	strcpy(st.clocks, "local global mono");
	assert_int_equal(td_msg_pack_standby(&b, &st), 0);
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_STANDBY);
	assert_int_equal(td_msg_unpack_standby(&f, &st2), 0);
	assert_memory_equal(&st, &st2, sizeof st);
	/* version 2: the allowance too */
	strcpy(st.allow, "sched,irq");
	st.max_buffer = 2048;
	st.max_duration = 300;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_standby(&b, &st), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_standby(&f, &st2), 0);
	assert_memory_equal(&st, &st2, sizeof st);
	/* version 1 (an older agent): none, and read whole */
	st.version = 1;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_standby(&b, &st), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_standby(&f, &st2), 0);
	assert_int_equal(st2.version, 1);
	assert_string_equal(st2.allow, "");
	assert_int_equal(st2.max_buffer, 0);
	st.version = TD_STANDBY_VERSION;
	st.allow[0] = '\0';
	st.max_buffer = st.max_duration = 0;
	/* no CPU, too many: refused */
	td_buf_reset(&b);
	st.ncpus = 0;
	assert_int_equal(td_msg_pack_standby(&b, &st), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_standby(&f, &st2), -1);
	assert_int_equal(errno, EBADMSG);
	st.ncpus = 2;
	/* a control character is not packed */
	td_buf_reset(&b);
	strcpy(st.host, "we\nb");
	assert_int_equal(td_msg_pack_standby(&b, &st), -1);
	assert_int_equal(b.len, 0);

	td_buf_reset(&b);
	r[0].req = 7;
	r[0].buffer_kb = 1024;
	r[0].seconds = 60;
	strcpy(r[0].name, "incident");
	strcpy(r[0].clock, "mono");
	strcpy(r[0].events, "sched,irq");
	strcpy(r[0].filter, "common_pid == 1");
	assert_int_equal(td_msg_pack_start(&b, &r[0]), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_start(&f, &r[1]), 0);
	assert_memory_equal(&r[0], &r[1], sizeof r[0]);
	/* truncated anywhere, or a byte too many: refused */
	for (k = 0; k < f.len; k++) {
		struct td_frame g = f;

		g.len = k;
		assert_int_equal(td_msg_unpack_start(&g, &r[1]), -1);
	}
	assert_int_equal(td_buf_add(&b, "x", 1), 0);
	b.data[3]++;
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_start(&f, &r[1]), -1);
	/* no events: refused */
	td_buf_reset(&b);
	r[0].events[0] = '\0';
	assert_int_equal(td_msg_pack_start(&b, &r[0]), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_start(&f, &r[1]), -1);

	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_stop(&b, 9), 0);
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_STOP);
	assert_int_equal(td_msg_unpack_stop(&f, &req), 0);
	assert_int_equal(req, 9);

	td_buf_reset(&b);
	memset(&a, 0, sizeof a);
	a.req = 7;
	a.what = TD_ANSWER_REFUSED;
	strcpy(a.text, "event 'irq' not\tallowed");
	assert_int_equal(td_msg_pack_answer(&b, &a), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_answer(&f, &a2), 0);
	assert_int_equal(a2.req, 7);
	assert_int_equal(a2.what, TD_ANSWER_REFUSED);
	/* made printable: the peer logs it */
	assert_string_equal(a2.text, "event 'irq' not?allowed");
	td_buf_reset(&b);
	a.what = TD_ANSWER_READY;
	assert_int_equal(td_msg_pack_answer(&b, &a), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_answer(&f, &a2), 0);
	assert_int_equal(a2.what, TD_ANSWER_READY);
	td_buf_reset(&b);
	a.what = 5;
	assert_int_equal(td_msg_pack_answer(&b, &a), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_answer(&f, &a2), -1);

	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_go(&b, 11), 0);
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_GO);
	assert_int_equal(td_msg_unpack_go(&f, &req), 0);
	assert_int_equal(req, 11);
	f.type = TD_MSG_STOP;	/* a GO's decoder takes only a GO */
	assert_int_equal(td_msg_unpack_go(&f, &req), -1);

	/* random payloads never crash the decoders */
	srand(16);
	for (i = 0; i < 20000; i++) {
		memset(&f, 0, sizeof f);
		for (k = 0; k < sizeof junk; k++)
			junk[k] = (uint8_t)(rand() % 4 == 0 ? rand() % 8 :
			    rand());
		f.payload = junk;
		f.len = (size_t)rand() % sizeof junk;
		f.type = (uint16_t)(TD_MSG_STANDBY + rand() % 5);
		td_msg_unpack_standby(&f, &st2);
		td_msg_unpack_start(&f, &r[1]);
		td_msg_unpack_stop(&f, &req);
		td_msg_unpack_answer(&f, &a2);
		td_msg_unpack_go(&f, &req);
	}
	td_buf_free(&b);
	free(r);
}

/* Flight-recorder frames round-trip; truncated, long or bad ones do not. */
static void
test_flight_messages(void **state)
{
	struct td_arm *a = calloc(2, sizeof *a);
	struct td_snapshot sn, sn2;
	struct td_armed d, d2;
	struct td_triggered t, t2;
	struct td_frame f;
	struct td_buf b;
	uint8_t junk[64];
	uint32_t req;
	size_t i, k;

	(void)state;
	assert_non_null(a);
	td_buf_init(&b, 64 * 1024);
	a[0].req = 3;
	a[0].buffer_kb = 512;
	strcpy(a[0].name, "flight");
	strcpy(a[0].events, "syscalls:sys_enter_getppid,ftrace:print");
	strcpy(a[0].filter, "common_pid != 1");
	strcpy(a[0].trigger, "ftrace:print if buf ~ \"*BOOM*\"");
	assert_int_equal(td_msg_pack_arm(&b, &a[0]), 0);
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_ARM);
	assert_int_equal(td_msg_unpack_arm(&f, &a[1]), 0);
	assert_memory_equal(&a[0], &a[1], sizeof a[0]);
	for (k = 0; k < f.len; k++) {
		struct td_frame g = f;

		g.len = k;
		assert_int_equal(td_msg_unpack_arm(&g, &a[1]), -1);
	}
	/* the largest fits its cap */
	memset(a[0].filter, 'x', TD_MAX_FILTER_LEN);
	a[0].filter[TD_MAX_FILTER_LEN] = '\0';
	memset(a[0].trigger, 'y', TD_MAX_FILTER_LEN);
	memcpy(a[0].trigger, "a:b if ", 7);
	a[0].trigger[TD_MAX_FILTER_LEN] = '\0';
	memset(a[0].events, 'e', TD_STANDBY_EVENTS);
	a[0].events[TD_STANDBY_EVENTS] = '\0';
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_arm(&b, &a[0]), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_arm(&f, &a[1]), 0);
	/* a trigger without a filter, or no events: refused */
	strcpy(a[0].trigger, "sched:sched_switch");
	strcpy(a[0].filter, "");
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_arm(&b, &a[0]), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_arm(&f, &a[1]), -1);
	assert_int_equal(errno, EBADMSG);
	a[0].trigger[0] = '\0';
	a[0].events[0] = '\0';
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_arm(&b, &a[0]), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_arm(&f, &a[1]), -1);
	/* a tab is not packed */
	strcpy(a[0].events, "sched");
	strcpy(a[0].name, "a\tb");
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_arm(&b, &a[0]), -1);
	assert_int_equal(b.len, 0);

	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_disarm(&b, 12), 0);
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_DISARM);
	assert_int_equal(td_msg_unpack_disarm(&f, &req), 0);
	assert_int_equal(req, 12);
	f.type = TD_MSG_STOP;
	assert_int_equal(td_msg_unpack_disarm(&f, &req), -1);

	memset(&sn, 0, sizeof sn);
	sn.req = 5;
	sn.why = TD_SNAP_TRIGGER;
	sn.when_ns = 0x1234567890abcdefULL;
	strcpy(sn.name, "boom");
	strcpy(sn.host, "agent07");
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_snapshot(&b, &sn), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_snapshot(&f, &sn2), 0);
	assert_memory_equal(&sn, &sn2, sizeof sn);
	assert_int_equal(td_msg_unpack_snapshot(&(struct td_frame){
	    .type = TD_MSG_SNAPSHOT, .payload = f.payload, .len = f.len - 1 },
	    &sn2), -1);
	sn.why = 4;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_snapshot(&b, &sn), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_snapshot(&f, &sn2), -1);

	memset(&d, 0, sizeof d);
	d.req = 3;
	d.what = TD_ARMED_FAILED;
	strcpy(d.text, "trigger: Unknown field\nbuf ~");
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_armed(&b, &d), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_armed(&f, &d2), 0);
	assert_int_equal(d2.req, 3);
	assert_int_equal(d2.what, TD_ARMED_FAILED);
	assert_string_equal(d2.text, "trigger: Unknown field buf ~");
	d.what = TD_ARMED_WINDOW;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_armed(&b, &d), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_armed(&f, &d2), 0);
	d.what = TD_ARMED_WINDOW + 1;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_armed(&b, &d), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_armed(&f, &d2), -1);
	d.what = 0;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_armed(&b, &d), 0);
	one_frame(&b, &f);
	assert_int_equal(td_msg_unpack_armed(&f, &d2), -1);

	t.clock_ns = 123456789012ULL;
	t.real_ns = 1795000000000000000ULL;
	t.late_ms = 250;
	td_buf_reset(&b);
	assert_int_equal(td_msg_pack_triggered(&b, &t), 0);
	one_frame(&b, &f);
	assert_int_equal(f.type, TD_MSG_TRIGGERED);
	assert_int_equal(f.len, 20);
	assert_int_equal(td_msg_unpack_triggered(&f, &t2), 0);
	assert_memory_equal(&t, &t2, sizeof t);

	srand(30);
	for (i = 0; i < 20000; i++) {
		memset(&f, 0, sizeof f);
		for (k = 0; k < sizeof junk; k++)
			junk[k] = (uint8_t)(rand() % 4 == 0 ? rand() % 8 :
			    rand());
		f.payload = junk;
		f.len = (size_t)rand() % sizeof junk;
		f.type = (uint16_t)(TD_MSG_ARM + rand() % 5);
		td_msg_unpack_arm(&f, &a[1]);
		td_msg_unpack_disarm(&f, &req);
		td_msg_unpack_snapshot(&f, &sn2);
		td_msg_unpack_armed(&f, &d2);
		td_msg_unpack_triggered(&f, &t2);
	}
	td_buf_free(&b);
	free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_roundtrip),
		cmocka_unit_test(test_hello_rejects),
		cmocka_unit_test(test_string_rejects),
		cmocka_unit_test(test_truncated_and_trailing),
		cmocka_unit_test(test_frames_in_stream),
		cmocka_unit_test(test_frame_limits),
		cmocka_unit_test(test_other_messages),
		cmocka_unit_test(test_tsync_messages),
		cmocka_unit_test(test_random_payloads),
		cmocka_unit_test(test_guest_option),
		cmocka_unit_test(test_hcache_messages),
		cmocka_unit_test(test_standby_messages),
		cmocka_unit_test(test_flight_messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
