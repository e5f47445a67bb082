/*
 * test-tcmsg.c: trace-cmd's v3 message framing (proto/tcmsg.c): the bytes
 * trace-cmd 3.1.6 sends (checked with strace on loopback, see
 * ../shared/reference/trace-cmd-notes.md 1.3) decode, messages round-trip
 * and are found byte by byte in a stream, and every malformed one is
 * refused with EBADMSG.
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
#include "tcmsg.h"
#include "tdlimits.h"

/* The first strings: v3, v1's CPU count, and what is neither. */
static void
test_first(void **state)
{
	uint32_t cpus = 0;
	size_t used;
	bool v3;

	assert_int_equal(td_tc_first((const uint8_t *)"-1V3", 5, &v3, &cpus,
	    &used), 1);
	assert_true(v3);
	assert_int_equal(used, 5);
	assert_int_equal(td_tc_first((const uint8_t *)"-1V", 3, &v3, &cpus,
	    &used), 0);
	assert_int_equal(td_tc_first((const uint8_t *)"12\0", 3, &v3, &cpus,
	    &used), 1);
	assert_false(v3);
	assert_int_equal(cpus, 12);
	assert_int_equal(used, 3);
	errno = 0;
	assert_int_equal(td_tc_first((const uint8_t *)"GET /", 6, &v3, &cpus,
	    &used), -1);
	assert_int_equal(errno, EBADMSG);
	assert_int_equal(td_tc_first((const uint8_t *)"0", 2, &v3, &cpus,
	    &used), -1);
	assert_int_equal(td_tc_first((const uint8_t *)"99999", 6, &v3, &cpus,
	    &used), -1);
	assert_int_equal(td_tc_first((const uint8_t *)"", 1, &v3, &cpus,
	    &used), -1);
	/* no NUL within the longest first string */
	assert_int_equal(td_tc_first((const uint8_t *)"1111111111111111111",
	    19, &v3, &cpus, &used), -1);
	assert_int_equal(td_tc_magic_ok((const uint8_t *)"766679\0\0"), true);
}

/* TINIT exactly as trace-cmd 3.1.6 sent it: 2 CPUs, 4096, "tcp". */
static void
test_tinit_bytes(void **state)
{
	static const uint8_t msg[] = {
		0, 0, 0, 0x1c, 0, 0, 0, 1, 0, 0, 0, 0x0c,
		0, 0, 0, 2, 0, 0, 0x10, 0, 0, 0, 0, 1, 't', 'c', 'p', 0 };
	struct td_tc_tinit t;
	struct td_tc_msg m;

	assert_int_equal(td_tc_msg_parse(msg, sizeof msg, &m), 1);
	assert_int_equal(m.cmd, TD_TC_TINIT);
	assert_int_equal(m.total, sizeof msg);
	assert_int_equal(td_tc_unpack_tinit(&m, &t), 0);
	assert_int_equal(t.cpus, 2);
	assert_int_equal(t.page_size, 4096);
	assert_true(t.tcp);
	assert_false(t.vsock);
	assert_int_equal(t.unknown, 0);
	assert_string_equal(td_tc_name(m.cmd), "TINIT");
}

/* RINIT as trace-cmd's listener sends it: "1500\0" "1501\0". */
static void
test_rinit_roundtrip(void **state)
{
	static const uint8_t want[] = {
		0, 0, 0, 0x1a, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 2,
		'1', '5', '0', '0', 0, '1', '5', '0', '1', 0 };
	uint16_t ports[2] = { 1500, 1501 }, got[4];
	struct td_tc_msg m;
	struct td_buf b;
	uint32_t cpus;

	td_buf_init(&b, TD_TC_MSG_MAX);
	assert_int_equal(td_tc_pack_rinit(&b, 2, ports), 0);
	assert_int_equal(b.len, sizeof want);
	assert_memory_equal(b.data, want, sizeof want);
	assert_int_equal(td_tc_msg_parse(b.data, b.len, &m), 1);
	assert_int_equal(td_tc_unpack_rinit(&m, 4, &cpus, got), 0);
	assert_int_equal(cpus, 2);
	assert_int_equal(got[1], 1501);
	/* more CPUs than the caller has room for */
	assert_int_equal(td_tc_unpack_rinit(&m, 1, &cpus, got), -1);
	td_buf_free(&b);
}

/*
 * RINIT's port list must fit one message: 1,362 CPUs of 5-digit ports do
 * (12 + 4 + 1362 x 6 = 8188 bytes), 1,363 do not, and td_tc_rinit_fits()
 * says so before the ports are bound; td_tc_pack_rinit() refuses too.
 */
static void
test_rinit_fits(void **state)
{
	static uint16_t ports[TD_MAX_CPUS];
	struct td_buf b;
	uint32_t i;

	for (i = 0; i < TD_MAX_CPUS; i++)
		ports[i] = 65535;
	assert_true(td_tc_rinit_fits(1362, 65535));
	assert_false(td_tc_rinit_fits(1363, 65535));
	assert_true(td_tc_rinit_fits(1363, 9999));	/* 4 digits */
	assert_false(td_tc_rinit_fits(TD_MAX_CPUS, 65535));
	td_buf_init(&b, TD_TC_MSG_MAX);
	assert_int_equal(td_tc_pack_rinit(&b, 1362, ports), 0);
	assert_int_equal(b.len, 8188);
	td_buf_reset(&b);
	assert_int_equal(td_tc_pack_rinit(&b, 1363, ports), -1);
	assert_int_equal(b.len, 0);
	td_buf_free(&b);
}

/* Messages are found only when whole, byte by byte. */
static void
test_stream(void **state)
{
	const char *opts[] = { "tcp", "vsock", "future", NULL };
	struct td_tc_tinit t;
	struct td_tc_msg m;
	struct td_buf b;
	uint8_t data[8180];
	size_t i, total;

	memset(data, 0xab, sizeof data);
	td_buf_init(&b, 4 * TD_TC_MSG_MAX);
	assert_int_equal(td_tc_pack_tinit(&b, 8, 65536, opts), 0);
	total = b.len;
	for (i = 0; i < total; i++) {
		assert_int_equal(td_tc_msg_parse(b.data, i, &m), 0);
		if (i >= TD_TC_MSG_HEADER)
			assert_int_equal(m.total, total);
	}
	assert_int_equal(td_tc_msg_parse(b.data, total, &m), 1);
	assert_int_equal(td_tc_unpack_tinit(&m, &t), 0);
	assert_true(t.tcp && t.vsock);
	assert_int_equal(t.unknown, 1);
	td_buf_reset(&b);
	assert_int_equal(td_tc_pack(&b, TD_TC_SEND_DATA, data, sizeof data),
	    0);
	assert_int_equal(b.len, TD_TC_MSG_MAX);
	assert_int_equal(td_tc_msg_parse(b.data, b.len, &m), 1);
	assert_int_equal(m.len, sizeof data);
	assert_int_equal(td_tc_pack(&b, TD_TC_SEND_DATA, data,
	    sizeof data + 1), -1);	/* past 8192 */
	assert_int_equal(b.len, TD_TC_MSG_MAX);	/* nothing added */
	assert_int_equal(td_tc_pack(&b, TD_TC_TINIT, NULL, 0), -1);
	td_buf_reset(&b);
	assert_int_equal(td_tc_pack(&b, TD_TC_CLOSE, NULL, 0), 0);
	assert_int_equal(td_tc_msg_parse(b.data, b.len, &m), 1);
	assert_int_equal(m.cmd, TD_TC_CLOSE);
	assert_int_equal(m.len, 0);
	td_buf_free(&b);
}

/* A header with these fields, and what parsing it says. */
static int
parse_header(uint32_t size, uint32_t cmd, uint32_t block)
{
	uint8_t h[TD_TC_MSG_MAX + 16];
	struct td_tc_msg m;

	memset(h, 0, sizeof h);
	h[0] = size >> 24; h[1] = size >> 16; h[2] = size >> 8; h[3] = size;
	h[4] = cmd >> 24; h[5] = cmd >> 16; h[6] = cmd >> 8; h[7] = cmd;
	h[8] = block >> 24; h[9] = block >> 16; h[10] = block >> 8;
	h[11] = block;
	return td_tc_msg_parse(h, sizeof h, &m);
}

static void
test_header_rejects(void **state)
{
	assert_int_equal(parse_header(12, TD_TC_CLOSE, 0), 1);
	assert_int_equal(parse_header(11, TD_TC_CLOSE, 0), -1);
	assert_int_equal(parse_header(8193, TD_TC_SEND_DATA, 0), -1);
	assert_int_equal(parse_header(0xffffffff, TD_TC_SEND_DATA, 0), -1);
	assert_int_equal(parse_header(12, 12, 0), -1);	/* unknown */
	assert_int_equal(parse_header(12, 0x80000000u, 0), -1);
	assert_int_equal(parse_header(20, TD_TC_TINIT, 8), -1); /* short */
	assert_int_equal(parse_header(24, TD_TC_TINIT, 12), 1);
	assert_int_equal(parse_header(30, TD_TC_TINIT, 16), 1); /* longer */
	assert_int_equal(parse_header(24, TD_TC_TINIT, 13), -1); /* past */
	assert_int_equal(parse_header(24, TD_TC_TINIT, 0xffffffff), -1);
}

/* A TINIT of these fields and payload, and what unpacking it says. */
static int
unpack_tinit(uint32_t cpus, uint32_t page, uint32_t nopts, const char *p,
    size_t n)
{
	struct td_tc_tinit t;
	struct td_tc_msg m;
	uint8_t blk[12] = { cpus >> 24, cpus >> 16, cpus >> 8, cpus,
	    page >> 24, page >> 16, page >> 8, page,
	    nopts >> 24, nopts >> 16, nopts >> 8, nopts };

	memset(&m, 0, sizeof m);
	m.cmd = TD_TC_TINIT;
	m.block = blk;
	m.block_len = sizeof blk;
	m.payload = (const uint8_t *)p;
	m.len = n;
	return td_tc_unpack_tinit(&m, &t);
}

static void
test_tinit_rejects(void **state)
{
	assert_int_equal(unpack_tinit(2, 4096, 0, "", 0), 0);
	assert_int_equal(unpack_tinit(0, 4096, 0, "", 0), -1);
	assert_int_equal(unpack_tinit(TD_MAX_CPUS + 1, 4096, 0, "", 0), -1);
	assert_int_equal(unpack_tinit(2, 4095, 0, "", 0), -1);
	assert_int_equal(unpack_tinit(2, 3 * 4096, 0, "", 0), -1);
	assert_int_equal(unpack_tinit(2, 128, 0, "", 0), -1);
	assert_int_equal(unpack_tinit(2, 2 * TD_MAX_PAGE_SIZE, 0, "", 0), -1);
	assert_int_equal(unpack_tinit(2, 4096, 1, "tcp", 3), -1); /* NUL */
	assert_int_equal(unpack_tinit(2, 4096, 1, "tcp\0x", 5), -1);
	assert_int_equal(unpack_tinit(2, 4096, 2, "tcp\0", 4), -1);
	assert_int_equal(unpack_tinit(2, 4096, 1, "\0", 1), -1);
	assert_int_equal(unpack_tinit(2, 4096, 1, "t\ncp\0", 5), -1);
	assert_int_equal(unpack_tinit(2, 4096, 0xffffffff, "tcp\0", 4), -1);
	assert_int_equal(unpack_tinit(2, 4096, 0, "x", 1), -1); /* trailing */
}

/* Random bytes never crash the parsers (and what passes is bounded). */
static void
test_random(void **state)
{
	struct td_tc_tinit t;
	struct td_tc_msg m;
	uint8_t buf[256];
	uint16_t ports[TD_MAX_CPUS];
	uint32_t cpus, v;
	size_t i, j, used;
	bool v3;

	srand(15);
	for (i = 0; i < 20000; i++) {
		for (j = 0; j < sizeof buf; j++)
			buf[j] = (uint8_t)rand();
		buf[0] = buf[1] = 0;
		buf[4] = buf[5] = buf[6] = 0;
		buf[7] %= 13;
		buf[8] = buf[9] = buf[10] = 0;
		buf[11] %= 20;
		if (td_tc_msg_parse(buf, sizeof buf, &m) == 1) {
			assert_true(m.total <= sizeof buf);
			assert_true(m.payload + m.len <= buf + sizeof buf);
			if (td_tc_unpack_tinit(&m, &t) == 0)
				assert_true(t.cpus >= 1 &&
				    t.cpus <= TD_MAX_CPUS);
			td_tc_unpack_rinit(&m, TD_MAX_CPUS, &cpus, ports);
		}
		td_tc_first(buf + 12, sizeof buf - 12, &v3, &v, &used);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first),
		cmocka_unit_test(test_tinit_bytes),
		cmocka_unit_test(test_rinit_roundtrip),
		cmocka_unit_test(test_rinit_fits),
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_header_rejects),
		cmocka_unit_test(test_tinit_rejects),
		cmocka_unit_test(test_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
