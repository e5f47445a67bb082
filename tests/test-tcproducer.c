/*
 * test-tcproducer.c: the trace-cmd record -N producer below its client
 * shell: listener/producers/tcmeta.c (the trace.dat header a client sends on
 * its control connection) and listener/producers/tcdata.c (its per-CPU data
 * sockets), handing over to the real recording, as
 * listener/producers/tracecmd.c does. Real loopback sockets and a real event
 * loop, no privileges.
 *
 *   - a header the writer made (tests/data's sections, TRACECLOCK,
 *     UNAME; no CPU data, as trace-cmd sends it) is read from a memfd,
 *     gives the recording's clock and sizes, and a header that lies
 *     about its CPUs or page size, or is no header, is refused with the
 *     reason;
 *   - over TCP each CPU's pages arrive on its port and end: every page
 *     counted, the recording finished into a file libtracecmd reads with
 *     exactly the events sent; a connection from another address is
 *     refused and counted;
 *   - over UDP a page per datagram: a datagram shorter than a page, a
 *     page older than the last and one from another address are not
 *     pages, each counted where tcdata_losses() and tcdata_refused() say.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "buf.h"
#include "finished.h"
#include "listener.h"
#include "recording.h"
#include "tcdata.h"
#include "tcmeta.h"
#include "tdfile.h"
#include "tdproto.h"
#include "testdata.h"
#include "testlisten.h"

#define NCPUS		2
#define NPAGES		20
#define TRACECLOCK	"[local] global counter"

static struct testlisten *tl;
static struct event_base *base;
static struct tcdata *data;
static struct recording *rec;
static int ended;

/* The header a client sends, in a memfd; version 6 or 7. */
static int
header_fd(int version)
{
	struct td_file_params fp;
	struct td_file *f;
	struct td_buf b;
	char *path;
	int id, fd;

	memset(&fp, 0, sizeof fp);
	fp.version = version;
	fp.codec = version == 7 ? TD_CODEC_ZSTD : TD_CODEC_NONE;
	fp.page_size = TESTDATA_PAGE_SIZE;
	fp.long_size = 8;
	fp.ncpus = NCPUS;
	fp.clock = "local";
	path = testlisten_path("header.dat");
	assert_non_null(f = td_file_create(path, &fp));
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		const struct td_buf *s = testdata_meta_section(&tl->meta, id);

		assert_int_equal(td_file_section_add(f, id, s->data, s->len),
		    0);
	}
	assert_int_equal(td_file_add_option(f, TD_OPT_TRACECLOCK,
	    TRACECLOCK, sizeof TRACECLOCK), 0);
	assert_int_equal(td_file_add_option(f, TD_OPT_UNAME, "Linux tc",
	    9), 0);
	assert_int_equal(td_file_finish(f), 0);
	td_file_free(f);
	td_buf_init(&b, 64 << 20);
	assert_int_equal(td_buf_read_file(&b, path), 0);
	unlink(path);
	free(path);
	fd = memfd_create("tcmeta", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b.data, b.len), (ssize_t)b.len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	td_buf_free(&b);
	return fd;
}

/* The header, and headers that lie or are none. */
static void
test_tcmeta(void **unused)
{
	struct recording_params p;
	struct tcmeta *m;
	char err[256];
	int fd, v;

	(void)unused;
	for (v = 6; v <= 7; v++) {
		fd = header_fd(v);
		m = tcmeta_read(fd, NCPUS, TESTDATA_PAGE_SIZE, err,
		    sizeof err);
		if (m == NULL)
			fail_msg("tcmeta_read: %s", err);
		assert_string_equal(tcmeta_describe(m), v == 7 ?
		    "v7 zstd" : "v6 none");
		memset(&p, 0, sizeof p);
		tcmeta_params(m, &p);
		assert_string_equal(p.clock, "local");
		assert_int_equal(p.long_size, 8);
		assert_int_equal(p.commit_size, 8);
		assert_string_equal(tcmeta_repaired(m), "");
		tcmeta_free(m);
		/* its TINIT said 4 CPUs, 8 KiB pages */
		assert_null(tcmeta_read(fd, 4, TESTDATA_PAGE_SIZE, err,
		    sizeof err));
		assert_string_equal(err, "its metadata says 2 CPUs, its "
		    "TINIT said 4");
		assert_null(tcmeta_read(fd, NCPUS, 8192, err, sizeof err));
		assert_string_equal(err, "its metadata says 4096-byte pages, "
		    "its TINIT said 8192");
		close(fd);
	}
	fd = memfd_create("garbage", MFD_CLOEXEC);
	assert_int_equal(write(fd, "not a header at all, sorry", 26), 26);
	assert_null(tcmeta_read(fd, NCPUS, TESTDATA_PAGE_SIZE, err,
	    sizeof err));
	assert_non_null(strstr(err, "is not a trace.dat header"));
	close(fd);
}

/* tracecmd.c's tc_page_cb(): a page of a CPU into the recording. */
static int
page_cb(void *arg, uint32_t cpu, const uint8_t *page)
{
	(void)arg;
	if (recording_pages_begin(rec, cpu, tcdata_pages(data, cpu)) == -1 ||
	    recording_page(rec, cpu, page) == -1)
		return -1;
	return 0;
}

static void
ended_cb(void *arg)
{
	(void)arg;
	ended++;
}

static void
loopback(struct sockaddr_storage *ss, socklen_t *len, const char *addr,
    uint16_t port)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof *ss);
	in->sin_family = AF_INET;
	in->sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, addr, &in->sin_addr), 1);
	*len = sizeof *in;
}

/* The recording of a client whose header is header_fd(7). */
static void
open_rec(void)
{
	struct recording_params p;
	enum recording_fault fault;
	struct tcmeta *m;
	char err[256];
	int fd = header_fd(7);

	assert_non_null(m = tcmeta_read(fd, NCPUS, TESTDATA_PAGE_SIZE, err,
	    sizeof err));
	memset(&p, 0, sizeof p);
	snprintf(p.identity, sizeof p.identity, "tc-127.0.0.1");
	p.recording_id = 99;
	p.ncpus = NCPUS;
	p.page_size = TESTDATA_PAGE_SIZE;
	tcmeta_params(m, &p);
	rec = recording_open(&tl->cfg, &p, "tc", NULL, NULL, 1, err, sizeof err,
	    &fault);
	if (rec == NULL)
		fail_msg("recording_open: %s", err);
	recording_set_producer(rec, "trace-cmd");
	recording_no_tsync(rec);
	if (tcmeta_feed(m, rec, err, sizeof err) == -1)
		fail_msg("tcmeta_feed: %s", err);
	tcmeta_free(m);
	close(fd);
}

/* The data sockets, on ports below the ephemeral range (tests/tdport). */
static void
open_data(bool tcp)
{
	struct tcdata_params dp;
	socklen_t len;
	char err[256];

	memset(&dp, 0, sizeof dp);
	dp.base = base;
	loopback(&dp.local, &dp.local_len, "127.0.0.1", 0);
	loopback(&dp.client, &len, "127.0.0.1", 0);
	dp.ncpus = NCPUS;
	dp.page_size = TESTDATA_PAGE_SIZE;
	dp.tcp = tcp;
	dp.port_lo = 10000;
	dp.port_hi = 19999;
	dp.label = "tc";
	dp.page = page_cb;
	dp.ended = ended_cb;
	if ((data = tcdata_open(&dp, err, sizeof err)) == NULL)
		fail_msg("tcdata_open: %s", err);
	tcdata_start(data);
}

/* A socket of type from addr to CPU cpu's data port. */
static int
client(int type, const char *addr, uint32_t cpu)
{
	struct sockaddr_storage me, to;
	socklen_t len;
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	loopback(&me, &len, addr, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&me, len), 0);
	loopback(&to, &len, "127.0.0.1", tcdata_ports(data)[cpu]);
	assert_int_equal(connect(fd, (struct sockaddr *)&to, len), 0);
	return fd;
}

static void
finish_and_check(const struct testdata_expect *exp)
{
	uint64_t sent[NCPUS];
	struct finished fin;
	char *path;
	int cpu;

	for (cpu = 0; cpu < NCPUS; cpu++)
		sent[cpu] = tcdata_pages(data, (uint32_t)cpu);
	testlisten_finish(rec, sent, NCPUS, &fin);
	rec = NULL;
	path = testlisten_path(fin.path);
	testdata_check_libtracecmd(path, exp, &tl->meta);
	unlink(path);
	free(path);
}

/* TCP: every page of every CPU, a stranger refused. */
static void
test_tcp(void **unused)
{
	uint8_t page[TESTDATA_PAGE_SIZE];
	struct testdata_expect exp;
	struct td_buf text;
	unsigned int n;
	int fd[NCPUS], stranger, cpu, i;

	(void)unused;
	memset(&exp, 0, sizeof exp);
	exp.ncpus = NCPUS;
	ended = 0;
	open_rec();
	open_data(true);
	stranger = client(SOCK_STREAM, "127.0.0.2", 0);
	for (cpu = 0; cpu < NCPUS; cpu++)
		fd[cpu] = client(SOCK_STREAM, "127.0.0.1", (uint32_t)cpu);
	for (n = 0; n < NPAGES; n++)
		for (cpu = 0; cpu < NCPUS; cpu++) {
			testdata_cpu_page(&tl->meta, cpu, n, page, &exp);
			exp.pages[cpu]++;
			assert_int_equal(write(fd[cpu], page, sizeof page),
			    (ssize_t)sizeof page);
		}
	for (cpu = 0; cpu < NCPUS; cpu++)
		close(fd[cpu]);
	for (i = 0; i < 1000 && !tcdata_complete(data); i++)
		event_base_loop(base, EVLOOP_ONCE);
	assert_true(tcdata_complete(data));
	assert_int_equal(tcdata_drain(data), 0);
	assert_int_equal(ended, NCPUS);
	for (cpu = 0; cpu < NCPUS; cpu++)
		assert_int_equal(tcdata_pages(data, (uint32_t)cpu), NPAGES);
	assert_int_equal(tcdata_refused(data), 1);
	td_buf_init(&text, 4096);
	assert_int_equal(tcdata_losses(data, &text), 0);
	assert_int_equal(text.len, 0);
	td_buf_free(&text);
	close(stranger);
	finish_and_check(&exp);
	tcdata_free(data);
	data = NULL;
	testdata_expect_free(&exp);
}

/* UDP: a page per datagram; what is not one is counted. */
static void
test_udp(void **unused)
{
	uint8_t page[TESTDATA_PAGE_SIZE], old[TESTDATA_PAGE_SIZE];
	struct testdata_expect exp;
	struct td_buf text;
	unsigned int n;
	int fd[NCPUS], stranger, cpu;

	(void)unused;
	memset(&exp, 0, sizeof exp);
	exp.ncpus = NCPUS;
	open_rec();
	open_data(false);
	for (cpu = 0; cpu < NCPUS; cpu++)
		fd[cpu] = client(SOCK_DGRAM, "127.0.0.1", (uint32_t)cpu);
	stranger = client(SOCK_DGRAM, "127.0.0.2", 1);
	for (n = 0; n < NPAGES; n++) {
		for (cpu = 0; cpu < NCPUS; cpu++) {
			testdata_cpu_page(&tl->meta, cpu, n, page, &exp);
			exp.pages[cpu]++;
			assert_int_equal(send(fd[cpu], page, sizeof page, 0),
			    (ssize_t)sizeof page);
			if (cpu == 0 && n == 3)
				memcpy(old, page, sizeof page);
		}
		if (n == 5) {
			/* CPU 0: half a page, page 3 again; CPU 1: a stranger */
			assert_int_equal(send(fd[0], page, sizeof page / 2, 0),
			    (ssize_t)sizeof page / 2);
			assert_int_equal(send(fd[0], old, sizeof old, 0),
			    (ssize_t)sizeof old);
			assert_int_equal(send(stranger, page, sizeof page, 0),
			    (ssize_t)sizeof page);
		}
		/* a socket buffer's worth at most between two drains */
		assert_int_equal(tcdata_drain(data), 0);
	}
	assert_true(tcdata_complete(data));
	for (cpu = 0; cpu < NCPUS; cpu++)
		assert_int_equal(tcdata_pages(data, (uint32_t)cpu), NPAGES);
	assert_int_equal(tcdata_refused(data), 1);
	td_buf_init(&text, 4096);
	assert_int_equal(tcdata_losses(data, &text), 2);
	assert_int_equal(td_buf_add(&text, "", 1), 0);
	assert_string_equal((char *)text.data, "cpu 0: 2 datagrams lost "
	    "(0 dropped by the socket, 1 not a page long, 1 out of order)\n");
	td_buf_free(&text);
	for (cpu = 0; cpu < NCPUS; cpu++)
		close(fd[cpu]);
	close(stranger);
	finish_and_check(&exp);
	tcdata_free(data);
	data = NULL;
	testdata_expect_free(&exp);
}

static int
setup(void **unused)
{
	(void)unused;
	tl = testlisten_setup("test-tcproducer");
	base = event_base_new();
	return tl == NULL || base == NULL ? -1 : 0;
}

static int
teardown(void **unused)
{
	(void)unused;
	event_base_free(base);
	return testlisten_teardown(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tcmeta),
		cmocka_unit_test(test_tcp),
		cmocka_unit_test(test_udp),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
