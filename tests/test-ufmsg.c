/*
 * test-ufmsg.c: decoding uftrace's record-to-recv messages (proto/ufmsg.c):
 * the bytes uftrace 0.13 sends (as strace shows them), every type's length
 * bounds, the heads of data, metadata and info messages, file names of
 * every kind and the unsafe ones (issue 480's ../), and heads cut short.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ufmsg.h"
#include "banned.h"

static char err[512];

static void
hdr(uint8_t *p, uint16_t magic, uint16_t type, uint32_t len)
{
	magic = htons(magic);
	type = htons(type);
	len = htonl(len);
	memcpy(p, &magic, 2);
	memcpy(p + 2, &type, 2);
	memcpy(p + 4, &len, 4);
}

static void
test_header(void **state)
{
	/* SEND_DIR_NAME "uftrace.data", as uftrace 0.13 writes it */
	static const uint8_t dir[8] = { 0xfa, 0xce, 0x00, 0x65, 0, 0, 0, 12 };
	struct td_uf_hdr h;
	uint8_t p[8];

	(void)state;
	assert_int_equal(td_ufmsg_header(dir, &h, err, sizeof err), 0);
	assert_int_equal(h.type, TD_UF_DIR_NAME);
	assert_int_equal(h.len, 12);
	hdr(p, 0xfacf, TD_UF_END, 0);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	assert_non_null(strstr(err, "magic"));
	/* the pipe's messages (uftrace's REC_*) never come over the wire */
	hdr(p, TD_UF_MAGIC, 1, 0);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	hdr(p, TD_UF_MAGIC, 108, 0);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	hdr(p, TD_UF_MAGIC, TD_UF_END, 1);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	hdr(p, TD_UF_MAGIC, TD_UF_DATA, 3);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	hdr(p, TD_UF_MAGIC, TD_UF_DATA, TD_UF_MAX_MSG);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), 0);
	hdr(p, TD_UF_MAGIC, TD_UF_DATA, TD_UF_MAX_MSG + 1);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	hdr(p, TD_UF_MAGIC, TD_UF_DATA, 0xffffffffu);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	hdr(p, TD_UF_MAGIC, TD_UF_INFO, 39);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	hdr(p, TD_UF_MAGIC, TD_UF_DIR_NAME, TD_UF_MAX_DIR_NAME + 1);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	hdr(p, TD_UF_MAGIC, TD_UF_META_DATA, 4);
	assert_int_equal(td_ufmsg_header(p, &h, err, sizeof err), -1);
	assert_string_equal(td_ufmsg_type_name(TD_UF_PERF_DATA),
	    "SEND_PERF_DATA");
	assert_string_equal(td_ufmsg_type_name(7), "?");
}

static void
test_data(void **state)
{
	struct td_uf_hdr h = { TD_UF_DATA, 4 + 8224 };
	struct td_uf_msg m;
	uint8_t p[4] = { 0, 0, 0x62, 0xe4 };	/* thread 25316 */

	(void)state;
	assert_int_equal(td_ufmsg_head_need(&h, p, 0, err, sizeof err), 4);
	assert_int_equal(td_ufmsg_head(&h, p, 4, &m, err, sizeof err), 0);
	assert_int_equal(m.kind, TD_UF_K_TASK_DATA);
	assert_string_equal(m.name, "25316.dat");
	assert_int_equal(m.head_len, 4);
	assert_int_equal(m.body_len, 8224);
	assert_int_equal(td_ufmsg_head(&h, p, 3, &m, err, sizeof err), -1);
	memset(p, 0, 4);
	assert_int_equal(td_ufmsg_head(&h, p, 4, &m, err, sizeof err), -1);
	memset(p, 0xff, 4);
	assert_int_equal(td_ufmsg_head(&h, p, 4, &m, err, sizeof err), -1);

	h.type = TD_UF_PERF_DATA;
	memset(p, 0, 4);
	p[3] = 1;
	assert_int_equal(td_ufmsg_head(&h, p, 4, &m, err, sizeof err), 0);
	assert_string_equal(m.name, "perf-cpu1.dat");
	h.type = TD_UF_KERNEL_DATA;
	assert_int_equal(td_ufmsg_head(&h, p, 4, &m, err, sizeof err), 0);
	assert_string_equal(m.name, "kernel-cpu1.dat");
	assert_int_equal(m.kind, TD_UF_K_KERNEL_DATA);
	p[2] = 0x10;	/* CPU 4097 */
	assert_int_equal(td_ufmsg_head(&h, p, 4, &m, err, sizeof err), -1);
	memset(p, 0xff, 4);	/* CPU -1 */
	assert_int_equal(td_ufmsg_head(&h, p, 4, &m, err, sizeof err), -1);
}

/* A SEND_META_DATA payload: be32 name length, the name, data. */
static size_t
meta(uint8_t *p, const char *name, const char *data)
{
	uint32_t n = htonl((uint32_t)strlen(name));

	memcpy(p, &n, 4);
	memcpy(p + 4, name, strlen(name));
	memcpy(p + 4 + strlen(name), data, strlen(data));
	return 4 + strlen(name) + strlen(data);
}

static void
test_meta(void **state)
{
	struct td_uf_hdr h = { TD_UF_META_DATA, 0 };
	struct td_uf_msg m;
	uint8_t p[512];
	uint32_t bad;

	(void)state;
	h.len = (uint32_t)meta(p, "sid-90cea72eb508fd59.map", "55a5-55a6\n");
	assert_int_equal(td_ufmsg_head_need(&h, p, 2, err, sizeof err), 4);
	assert_int_equal(td_ufmsg_head_need(&h, p, 4, err, sizeof err),
	    4 + 24);
	assert_int_equal(td_ufmsg_head(&h, p, 28, &m, err, sizeof err), 0);
	assert_int_equal(m.kind, TD_UF_K_MAP);
	assert_string_equal(m.name, "sid-90cea72eb508fd59.map");
	assert_int_equal(m.body_len, 10);
	/* the head cut short */
	assert_int_equal(td_ufmsg_head(&h, p, 27, &m, err, sizeof err), -1);

	h.len = (uint32_t)meta(p, "../evil.sym", "x");
	assert_int_equal(td_ufmsg_head(&h, p, 15, &m, err, sizeof err), -1);
	assert_non_null(strstr(err, "unsafe"));
	/* a name longer than the message, or than NAME_MAX, or empty */
	h.len = (uint32_t)meta(p, "task.txt", "");
	bad = htonl(9);
	memcpy(p, &bad, 4);
	assert_int_equal(td_ufmsg_head_need(&h, p, 4, err, sizeof err), -1);
	bad = htonl(0);
	memcpy(p, &bad, 4);
	assert_int_equal(td_ufmsg_head_need(&h, p, 4, err, sizeof err), -1);
	h.len = 300;
	bad = htonl(256);
	memcpy(p, &bad, 4);
	assert_int_equal(td_ufmsg_head_need(&h, p, 4, err, sizeof err), -1);
	/* an empty task.txt is a file too */
	h.len = (uint32_t)meta(p, "task.txt", "");
	assert_int_equal(td_ufmsg_head(&h, p, 12, &m, err, sizeof err), 0);
	assert_int_equal(m.body_len, 0);
	assert_int_equal(m.kind, TD_UF_K_TASK_TXT);
}

static void
test_names(void **state)
{
	static const struct {
		const char	*name;
		int		 kind;
	} t[] = {
		{ "task.txt", TD_UF_K_TASK_TXT },
		{ "kernel_header", TD_UF_K_KERNEL_HEADER },
		{ "kallsyms", TD_UF_K_KALLSYMS },
		{ "events.txt", TD_UF_K_EVENTS },
		{ "sid-0123456789abcdef.map", TD_UF_K_MAP },
		{ "libc.so.6.sym", TD_UF_K_SYM },
		{ "ld-linux-x86-64.so.2.sym", TD_UF_K_SYM },
		{ "prog.dbg", TD_UF_K_DBG },
		{ "uftrace.log", TD_UF_K_OTHER },
		{ "info", TD_UF_K_OTHER },		/* only by SEND_INFO */
		{ "1234.dat", TD_UF_K_OTHER },		/* only by SEND_DATA */
		{ "tdlisten.clock", TD_UF_K_OTHER },	/* ours */
		{ "sid-0123456789ABCDEF.map", TD_UF_K_OTHER },
		{ "sid-0123.map", TD_UF_K_OTHER },
		{ ".sym", -1 },
		{ ".hidden.sym", -1 },
		{ "..", -1 },
		{ ".", -1 },
		{ "a..sym", -1 },
		{ "../x.sym", -1 },
		{ "a/b.sym", -1 },
		{ "/etc/passwd", -1 },
		{ "", -1 },
		{ "tab\t.sym", -1 },
		{ "\x80\x81.sym", -1 },
	};
	char longname[TD_UF_MAX_NAME + 2];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof t / sizeof *t; i++)
		assert_int_equal(td_ufmsg_name_kind(t[i].name,
		    strlen(t[i].name)), t[i].kind);
	/* a NUL inside the name */
	assert_int_equal(td_ufmsg_name_kind("a\0b.sym", 7), -1);
	memset(longname, 'a', sizeof longname);
	memcpy(longname + TD_UF_MAX_NAME - 4, ".sym", 4);
	assert_int_equal(td_ufmsg_name_kind(longname, TD_UF_MAX_NAME),
	    TD_UF_K_SYM);
	assert_int_equal(td_ufmsg_name_kind(longname, TD_UF_MAX_NAME + 1), -1);
}

static void
test_info(void **state)
{
	/* the 40 bytes uftrace 0.13 sends (strace), network order */
	static const uint8_t net[40] = {
		'F', 't', 'r', 'a', 'c', 'e', '!', 0, 0, 0, 0, 4, 0, 40, 1, 2,
		0, 0, 0, 0, 0, 0, 0x03, 0x63, 0, 0, 0, 0, 0, 0, 0x3b, 0xff,
		0x04, 0, 0, 0, 0, 0, 0, 0,
	};
	struct td_uf_hdr h = { TD_UF_INFO, 40 + 850 };
	struct td_uf_msg m;
	uint8_t p[40];
	uint32_t version;
	uint16_t hsize, max_stack;
	uint64_t feat, info;

	(void)state;
	assert_int_equal(td_ufmsg_head_need(&h, net, 0, err, sizeof err), 40);
	assert_int_equal(td_ufmsg_head(&h, net, 40, &m, err, sizeof err), 0);
	assert_int_equal(m.kind, TD_UF_K_INFO);
	assert_string_equal(m.name, "info");
	assert_int_equal(m.body_len, 850);
	assert_memory_equal(m.info, "Ftrace!", 8);
	memcpy(&version, m.info + 8, 4);
	memcpy(&hsize, m.info + 12, 2);
	memcpy(&feat, m.info + 16, 8);
	memcpy(&info, m.info + 24, 8);
	memcpy(&max_stack, m.info + 32, 2);
	assert_int_equal(version, 4);
	assert_int_equal(hsize, 40);
	assert_int_equal(m.info[14], 1);
	assert_int_equal(m.info[15], 2);
	assert_int_equal(feat, 0x363);
	assert_int_equal(info, 0x3bff);
	assert_int_equal(max_stack, 1024);

	memcpy(p, net, 40);
	p[0] = 'f';
	assert_int_equal(td_ufmsg_head(&h, p, 40, &m, err, sizeof err), -1);
	memcpy(p, net, 40);
	p[13] = 48;	/* header size */
	assert_int_equal(td_ufmsg_head(&h, p, 40, &m, err, sizeof err), -1);
	memcpy(p, net, 40);
	p[14] = 3;	/* byte order */
	assert_int_equal(td_ufmsg_head(&h, p, 40, &m, err, sizeof err), -1);
	memcpy(p, net, 40);
	p[15] = 0;	/* class */
	assert_int_equal(td_ufmsg_head(&h, p, 40, &m, err, sizeof err), -1);
}

static void
test_dir_end(void **state)
{
	struct td_uf_hdr h = { TD_UF_DIR_NAME, 14 };
	struct td_uf_msg m;

	(void)state;
	assert_int_equal(td_ufmsg_head_need(&h, NULL, 0, err, sizeof err), 14);
	assert_int_equal(td_ufmsg_head(&h, (const uint8_t *)"../\n\001x/uf.data",
	    14, &m, err, sizeof err), 0);
	/* only logged, and printable */
	assert_string_equal(m.dir, "../??x/uf.data");
	assert_string_equal(m.name, "");
	assert_int_equal(m.body_len, 0);
	h.type = TD_UF_END;
	h.len = 0;
	assert_int_equal(td_ufmsg_head(&h, NULL, 0, &m, err, sizeof err), 0);
	assert_int_equal(m.kind, TD_UF_K_NONE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_data),
		cmocka_unit_test(test_meta),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_info),
		cmocka_unit_test(test_dir_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
