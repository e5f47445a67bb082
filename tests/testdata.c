/*
 * testdata.c: synthetic ring-buffer pages and trace.dat files for the unit
 * tests (see testdata.h).
 *
 * Page layout follows tests/data/header_page and header_event, captured
 * from a 64-bit kernel: u64 timestamp, 8-byte commit, 4080 bytes of data.
 * An event header is one u32, type_len in the low 5 bits and the time
 * delta in the upper 27; type 0 events carry their length in the next
 * word.  The running time kept by the builder adds every delta (padding
 * included) and lets an absolute time stamp replace it, which is how
 * libtraceevent's kbuffer, and so trace-cmd, computes event times.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <trace-cmd.h>

#include "buf.h"
#include "tdfile.h"
#include "tdread.h"
#include "testdata.h"
#include "xmalloc.h"
#include "banned.h"

#define TESTDATA_HDR		16	/* timestamp + 8-byte commit */
#define TESTDATA_SMALL_MAX	112	/* largest payload with a type_len */
#define TESTDATA_MISSED		(1ULL << 31)
#define TESTDATA_STORED		(1ULL << 30)
#define TESTDATA_PAGE_SPAN	1000000000ULL	/* ns between page starts */
#define TESTDATA_BASE_TS	5000000000ULL
#define TESTDATA_GAP		150000000ULL	/* > 2^27 ns: needs an extend */
#define TESTDATA_FUNC_ADDR	0xffffffff81001000ULL
#define TESTDATA_OUT_CAP	(4u * 1024 * 1024)

static const char testdata_kallsyms[] =
    "ffffffff81000000 T _stext\n"
    "ffffffff81001000 T td_test_func\n"
    "ffffffff81002000 T td_other_func\n";
static const char testdata_printk[] =
    "0xffffffff82000000 : \"td printk %d\\n\"\n";
static const char testdata_cmdlines[] =
    "1234 tdtest\n"
    "4321 tdother\n";

/* Read a file of tests/data/. */
void
testdata_read(const char *name, struct td_buf *out)
{
	const char *dir = getenv("TD_SRCDIR");
	char path[4096];

	if (dir == NULL || *dir == '\0')
		dir = ".";
	snprintf(path, sizeof path, "%s/tests/data/%s", dir, name);
	if (td_buf_read_file(out, path) == -1)
		fail_msg("cannot read test data '%s': %s", path,
		    strerror(errno));
}

/* The ID of an event from its format file. */
int
testdata_event_id(const char *name)
{
	struct td_buf b;
	const char *p;
	int id = -1;

	td_buf_init(&b, 1024 * 1024);
	testdata_read(name, &b);
	td_buf_add(&b, "", 1);
	if ((p = strstr((char *)b.data, "\nID: ")) != NULL)
		id = atoi(p + 5);
	td_buf_free(&b);
	if (id <= 0)
		fail_msg("no ID in '%s'", name);
	return id;
}

/* Start a page. */
void
testdata_page_init(struct testdata_page *p, void *buf, size_t size,
    uint64_t ts)
{
	memset(buf, 0, size);
	p->data = buf;
	p->size = size;
	p->len = 0;
	p->ts = ts;
	p->events = 0;
	memcpy(p->data, &ts, sizeof ts);
}

/* Bytes still free for events. */
size_t
testdata_page_room(const struct testdata_page *p)
{
	return p->size - TESTDATA_HDR - p->len;
}

/* Reserve total bytes and write the event header word; NULL if full. */
static uint8_t *
testdata_page_put(struct testdata_page *p, unsigned int type_len,
    uint32_t delta, size_t total)
{
	uint8_t *e;
	uint32_t word;

	assert_true(type_len <= 31);
	assert_true(delta <= TESTDATA_MAX_DELTA);
	if (total > testdata_page_room(p))
		return NULL;
	e = p->data + TESTDATA_HDR + p->len;
	word = type_len | (delta << 5);
	memcpy(e, &word, 4);
	p->len += total;
	return e;
}

/* Append a data event. */
int
testdata_page_event(struct testdata_page *p, unsigned int type_len,
    uint32_t delta, const void *payload, size_t plen)
{
	uint32_t array0;
	uint8_t *e;

	assert_true(type_len <= 28);
	if (type_len != 0) {
		assert_true(plen <= type_len * 4u);
		e = testdata_page_put(p, type_len, delta, 4 + type_len * 4u);
		if (e == NULL)
			return -1;
		memcpy(e + 4, payload, plen);
	} else {
		/* array[0] counts itself; the kernel aligns it to a word */
		array0 = (uint32_t)((plen + 4 + 3) & ~(size_t)3);
		e = testdata_page_put(p, 0, delta, 4 + (size_t)array0);
		if (e == NULL)
			return -1;
		memcpy(e + 4, &array0, 4);
		memcpy(e + 8, payload, plen);
	}
	p->ts += delta;
	p->events++;
	return 0;
}

/* Append a time extend. */
int
testdata_page_extend(struct testdata_page *p, uint64_t delta)
{
	uint32_t hi = (uint32_t)(delta >> 27);
	uint8_t *e;

	assert_true((delta >> 59) == 0);
	e = testdata_page_put(p, TESTDATA_RB_EXTEND,
	    (uint32_t)(delta & TESTDATA_MAX_DELTA), 8);
	if (e == NULL)
		return -1;
	memcpy(e + 4, &hi, 4);
	p->ts += delta;
	return 0;
}

/* Append an absolute time stamp. */
int
testdata_page_stamp(struct testdata_page *p, uint64_t ts)
{
	uint32_t hi = (uint32_t)(ts >> 27);
	uint8_t *e;

	assert_true((ts >> 59) == 0);
	e = testdata_page_put(p, TESTDATA_RB_STAMP,
	    (uint32_t)(ts & TESTDATA_MAX_DELTA), 8);
	if (e == NULL)
		return -1;
	memcpy(e + 4, &hi, 4);
	p->ts = ts;
	return 0;
}

/* Append padding. */
int
testdata_page_padding(struct testdata_page *p, uint32_t delta, size_t len)
{
	uint32_t array0;
	uint8_t *e;

	assert_true(len >= 8 && len % 4 == 0);
	e = testdata_page_put(p, TESTDATA_RB_PADDING, delta, len);
	if (e == NULL)
		return -1;
	array0 = (uint32_t)(len - 4);
	memcpy(e + 4, &array0, 4);
	p->ts += delta;
	return 0;
}

/* Append a data event at absolute time ts. */
int
testdata_page_add(struct testdata_page *p, uint64_t ts, const void *payload,
    size_t plen)
{
	uint64_t delta;
	unsigned int type_len;
	size_t need;

	assert_true(ts >= p->ts);
	delta = ts - p->ts;
	if (plen <= TESTDATA_SMALL_MAX) {
		type_len = plen == 0 ? 1 : (unsigned int)((plen + 3) / 4);
		need = 4 + type_len * 4u;
	} else {
		type_len = 0;
		need = 4 + ((plen + 4 + 3) & ~(size_t)3);
	}
	if (delta > TESTDATA_MAX_DELTA)
		need += 8;
	if (need > testdata_page_room(p))
		return -1;
	if (delta > TESTDATA_MAX_DELTA) {
		testdata_page_extend(p, delta);
		delta = 0;
	}
	return testdata_page_event(p, type_len, (uint32_t)delta, payload,
	    plen);
}

/* Write the commit field. */
int
testdata_page_finish(struct testdata_page *p, bool missed, bool stored,
    uint64_t count)
{
	uint64_t commit = p->len;

	if (missed)
		commit |= TESTDATA_MISSED;
	if (stored) {
		if (testdata_page_room(p) < sizeof count)
			return -1;
		memcpy(p->data + TESTDATA_HDR + p->len, &count, sizeof count);
		commit |= TESTDATA_STORED;
	}
	memcpy(p->data + 8, &commit, sizeof commit);
	return 0;
}

static void
testdata_add_text(struct td_buf *b, const char *file)
{
	struct td_buf t;

	td_buf_init(&t, 1024 * 1024);
	testdata_read(file, &t);
	assert_int_equal(td_buf_add_u64(b, t.len), 0);
	assert_int_equal(td_buf_add(b, t.data, t.len), 0);
	td_buf_free(&t);
}

/* Build the metadata sections. */
void
testdata_meta_init(struct testdata_meta *m)
{
	memset(m, 0, sizeof *m);
	td_buf_init(&m->header_info, 1024 * 1024);
	td_buf_init(&m->ftrace_events, 1024 * 1024);
	td_buf_init(&m->event_formats, 1024 * 1024);
	td_buf_init(&m->kallsyms, 1024 * 1024);
	td_buf_init(&m->printk, 1024 * 1024);
	td_buf_init(&m->cmdlines, 1024 * 1024);

	/* 4.5: "header_page\0" u64 size text "header_event\0" u64 size text */
	td_buf_add_str(&m->header_info, "header_page");
	testdata_add_text(&m->header_info, "header_page");
	td_buf_add_str(&m->header_info, "header_event");
	testdata_add_text(&m->header_info, "header_event");

	td_buf_add_u32(&m->ftrace_events, 1);
	testdata_add_text(&m->ftrace_events, "ftrace_print.format");

	td_buf_add_u32(&m->event_formats, 1);
	td_buf_add_str(&m->event_formats, "raw_syscalls");
	td_buf_add_u32(&m->event_formats, 2);
	testdata_add_text(&m->event_formats, "sys_enter.format");
	testdata_add_text(&m->event_formats, "sys_exit.format");

	td_buf_add_u32(&m->kallsyms, sizeof testdata_kallsyms - 1);
	td_buf_add(&m->kallsyms, testdata_kallsyms,
	    sizeof testdata_kallsyms - 1);
	td_buf_add_u32(&m->printk, sizeof testdata_printk - 1);
	td_buf_add(&m->printk, testdata_printk, sizeof testdata_printk - 1);
	td_buf_add_u64(&m->cmdlines, sizeof testdata_cmdlines - 1);
	td_buf_add(&m->cmdlines, testdata_cmdlines,
	    sizeof testdata_cmdlines - 1);

	m->id_enter = testdata_event_id("sys_enter.format");
	m->id_exit = testdata_event_id("sys_exit.format");
	m->id_print = testdata_event_id("ftrace_print.format");
}

/* Free the metadata sections. */
void
testdata_meta_free(struct testdata_meta *m)
{
	td_buf_free(&m->header_info);
	td_buf_free(&m->ftrace_events);
	td_buf_free(&m->event_formats);
	td_buf_free(&m->kallsyms);
	td_buf_free(&m->printk);
	td_buf_free(&m->cmdlines);
}

/* A metadata section by id. */
const struct td_buf *
testdata_meta_section(const struct testdata_meta *m, int id)
{
	switch (id) {
	case TD_OPT_HEADER_INFO:
		return &m->header_info;
	case TD_OPT_FTRACE_EVENTS:
		return &m->ftrace_events;
	case TD_OPT_EVENT_FORMATS:
		return &m->event_formats;
	case TD_OPT_KALLSYMS:
		return &m->kallsyms;
	case TD_OPT_PRINTK:
		return &m->printk;
	case TD_OPT_CMDLINES:
		return &m->cmdlines;
	default:
		return NULL;
	}
}

static uint32_t
testdata_rand(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(*s >> 33);
}

/* Payload of one event: common fields then the event's own. */
static size_t
testdata_payload(const struct testdata_meta *m, uint64_t *rnd, uint8_t *buf,
    unsigned int seq)
{
	uint16_t type;
	int32_t pid = (testdata_rand(rnd) & 1) ? 1234 : 4321;
	uint64_t v, ip = TESTDATA_FUNC_ADDR;
	uint32_t pick = testdata_rand(rnd) % 16;
	size_t len, n;
	int i;

	memset(buf, 0, 512);
	if (pick < 7) {			/* raw_syscalls:sys_enter, 64 bytes */
		type = (uint16_t)m->id_enter;
		v = testdata_rand(rnd) % 300;
		memcpy(buf + 8, &v, 8);
		for (i = 0; i < 6; i++) {
			v = testdata_rand(rnd);
			memcpy(buf + 16 + 8 * i, &v, 8);
		}
		len = 64;
	} else if (pick < 13) {		/* raw_syscalls:sys_exit, 24 bytes */
		type = (uint16_t)m->id_exit;
		v = testdata_rand(rnd) % 300;
		memcpy(buf + 8, &v, 8);
		v = seq;
		memcpy(buf + 16, &v, 8);
		len = 24;
	} else {			/* ftrace:print, short or long */
		type = (uint16_t)m->id_print;
		memcpy(buf + 8, &ip, 8);
		if (pick == 15)
			n = (size_t)snprintf((char *)buf + 16, 200,
			    "long message %u: %s\n", seq,
			    "abcdefghijklmnopqrstuvwxyz0123456789"
			    "abcdefghijklmnopqrstuvwxyz0123456789"
			    "abcdefghijklmnopqrstuvwxyz0123456789");
		else
			n = (size_t)snprintf((char *)buf + 16, 200,
			    "tick %u\n", seq);
		len = 16 + n + 1;
	}
	memcpy(buf, &type, 2);
	memcpy(buf + 4, &pid, 4);
	return len;
}

static void
testdata_expect_add(struct testdata_expect *exp, int cpu, uint64_t ts)
{
	uint64_t n = exp->events[cpu];

	/* capacity: 64, then doubled each time a power of two fills up */
	if (n == 0 || (n >= 64 && (n & (n - 1)) == 0))
		exp->ts[cpu] = xreallocarray(exp->ts[cpu], n ? n * 2 : 64,
		    sizeof *exp->ts[cpu]);
	exp->ts[cpu][n] = ts;
	exp->events[cpu]++;
	exp->total++;
}

/*
 * Page n of a CPU: starts at BASE + n * SPAN + cpu * 337 ns, so pages of
 * different CPUs overlap in time and a merged reader must interleave them.
 * Some pages carry a gap needing a time extend, an absolute time stamp or a
 * discarded event (padding with a delta); some are filled to the brim.
 */
void
testdata_cpu_page(const struct testdata_meta *m, int cpu, unsigned int n,
    void *buf, struct testdata_expect *exp)
{
	struct testdata_page p;
	uint64_t rnd = ((uint64_t)cpu << 32) ^ (n * 2654435761u) ^ 0x5eed;
	uint64_t ts = TESTDATA_BASE_TS + n * TESTDATA_PAGE_SPAN + cpu * 337;
	uint8_t payload[512];
	unsigned int want, i;
	size_t len;

	testdata_rand(&rnd);
	testdata_page_init(&p, buf, TESTDATA_PAGE_SIZE, ts);
	want = n % 5 == 4 ? 100000 : 10 + testdata_rand(&rnd) % 150;
	for (i = 0; i < want; i++) {
		ts += 1 + testdata_rand(&rnd) % 4000;
		if (i == 7 && n % 3 == 1)
			ts += TESTDATA_GAP;
		if (i == 5 && n % 4 == 2) {
			ts += 10;
			if (testdata_page_room(&p) < 8 + 68 ||
			    testdata_page_stamp(&p, ts) == -1)
				break;
		}
		if (i == 3 && n % 4 == 3 &&
		    testdata_page_padding(&p, 1, 32) == -1)
			break;
		len = testdata_payload(m, &rnd, payload, i);
		if (testdata_page_add(&p, ts, payload, len) == -1)
			break;
		if (exp != NULL)
			testdata_expect_add(exp, cpu, p.ts);
		ts = p.ts;
	}
	assert_int_equal(testdata_page_finish(&p, false, false, 0), 0);
}

int
testdata_options(struct td_file *f, const struct testdata_plan *plan,
    const struct testdata_expect *exp)
{
	static const char *clocks[] = { "local", "global", "counter",
	    "uptime", "perf", "mono", "mono_raw", "boot" };
	const char *clock = plan->clock != NULL ? plan->clock : "local";
	struct td_buf b;
	size_t i;
	int cpu, ret = -1;

	td_buf_init(&b, 64 * 1024);
	td_buf_add_str(&b, "Linux tdtest 6.1.0-test #1 SMP x86_64");
	if (td_file_add_option(f, TD_OPT_UNAME, b.data, b.len) == -1)
		goto out;
	td_buf_reset(&b);
	for (i = 0; i < sizeof clocks / sizeof clocks[0]; i++) {
		if (strcmp(clocks[i], clock) == 0)
			td_buf_printf(&b, "%s[%s]", i ? " " : "", clocks[i]);
		else
			td_buf_printf(&b, "%s%s", i ? " " : "", clocks[i]);
	}
	td_buf_add_str(&b, "\n");
	if (td_file_add_option(f, TD_OPT_TRACECLOCK, b.data, b.len) == -1)
		goto out;
	for (cpu = 0; cpu < plan->ncpus; cpu++) {
		td_buf_reset(&b);
		td_buf_printf(&b, "CPU: %d\nentries: 0\noverrun: 0\n"
		    "commit overrun: 0\nbytes: 0\noldest event ts: 0.000000\n"
		    "now ts: 9.000000\ndropped events: 0\nread events: %llu\n",
		    cpu, (unsigned long long)exp->events[cpu]);
		td_buf_add(&b, "", 1);
		if (td_file_add_option(f, TD_OPT_CPUSTAT, b.data,
		    b.len) == -1)
			goto out;
	}
	ret = 0;
out:
	td_buf_free(&b);
	return ret;
}

/* Write a synthetic recording. */
int
testdata_write_file(const char *path, const struct testdata_plan *plan,
    const struct testdata_meta *m, struct testdata_expect *exp)
{
	struct td_file_params fp;
	struct td_file *f;
	uint8_t page[TESTDATA_PAGE_SIZE];
	unsigned int round, most = 0;
	int cpu, id, saved;

	assert_true(plan->ncpus >= 1 && plan->ncpus <= TESTDATA_MAX_CPUS);
	memset(exp, 0, sizeof *exp);
	exp->ncpus = plan->ncpus;
	memset(&fp, 0, sizeof fp);
	fp.version = plan->version;
	fp.codec = plan->codec;
	fp.page_size = TESTDATA_PAGE_SIZE;
	fp.long_size = 8;
	fp.ncpus = plan->ncpus;
	fp.clock = plan->clock != NULL ? plan->clock : "local";
	if ((f = td_file_create(path, &fp)) == NULL)
		return -1;
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		const struct td_buf *s = testdata_meta_section(m, id);

		if (td_file_section_add(f, id, s->data, s->len) == -1)
			goto fail;
	}
	/* pages arrive interleaved, as from per-CPU readers */
	for (cpu = 0; cpu < plan->ncpus; cpu++)
		most = plan->pages[cpu] > most ? plan->pages[cpu] : most;
	for (round = 0; round < most; round++)
		for (cpu = 0; cpu < plan->ncpus; cpu++) {
			if (round >= plan->pages[cpu])
				continue;
			testdata_cpu_page(m, cpu, round, page, exp);
			exp->pages[cpu]++;
			if (td_file_cpu_page(f, cpu, page, sizeof page) == -1)
				goto fail;
		}
	if (testdata_options(f, plan, exp) == -1 || td_file_finish(f) == -1)
		goto fail;
	td_file_free(f);
	return 0;
fail:
	saved = errno;
	td_file_free(f);
	errno = saved;
	return -1;
}

/* Free the timestamps of an expectation. */
void
testdata_expect_free(struct testdata_expect *exp)
{
	int cpu;

	for (cpu = 0; cpu < TESTDATA_MAX_CPUS; cpu++) {
		free(exp->ts[cpu]);
		exp->ts[cpu] = NULL;
	}
}

/* Make a private directory for test files. */
char *
testdata_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *dir;

	if (base == NULL || *base == '\0')
		base = "/tmp";
	xasprintf(&dir, "%s/tdtest.XXXXXX", base);
	if (mkdtemp(dir) == NULL)
		fail_msg("mkdtemp '%s': %s", dir, strerror(errno));
	return dir;
}

/* Remove a test directory and its files. */
void
testdata_rmdir(const char *dir)
{
	struct dirent *de;
	char *path;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		xasprintf(&path, "%s/%s", dir, de->d_name);
		unlink(path);
		free(path);
	}
	closedir(d);
	rmdir(dir);
}

/* ---- oracles: libtracecmd, trace-cmd, tdread on hostile input ---- */

/* What the merged libtracecmd walk saw. */
struct testdata_iter {
	const struct testdata_expect	*exp;
	uint64_t			 seen[TESTDATA_MAX_CPUS];
	unsigned long long		 last_ts;
	uint64_t			 total;
	bool				 bad_order;
	bool				 bad_ts;
};

static int
iter_cb(struct tracecmd_input *h, struct tep_record *rec, int cpu,
    void *arg)
{
	struct testdata_iter *st = arg;

	if (cpu < 0 || cpu >= TESTDATA_MAX_CPUS || rec->cpu != cpu) {
		st->bad_ts = true;
		return 0;
	}
	if (rec->ts < st->last_ts)
		st->bad_order = true;
	st->last_ts = rec->ts;
	if (st->seen[cpu] >= st->exp->events[cpu] ||
	    rec->ts != st->exp->ts[cpu][st->seen[cpu]])
		st->bad_ts = true;
	st->seen[cpu]++;
	st->total++;
	return 0;
}

/* Read a file with libtracecmd and compare with what was written. */
void
testdata_check_libtracecmd(const char *path,
    const struct testdata_expect *exp, const struct testdata_meta *m)
{
	struct tracecmd_input *h;
	struct tep_handle *tep;
	struct tep_record *rec;
	struct tep_event *ev;
	struct testdata_iter st;
	uint64_t n;
	int cpu, type;

	h = tracecmd_open(path, TRACECMD_FL_LOAD_NO_PLUGINS);
	assert_non_null(h);
	tep = tracecmd_get_tep(h);
	assert_non_null(tep);

	/* per CPU, in file order: exact count and timestamps */
	for (cpu = 0; cpu < exp->ncpus; cpu++) {
		n = 0;
		while ((rec = tracecmd_read_data(h, cpu)) != NULL) {
			assert_true(n < exp->events[cpu]);
			assert_int_equal(rec->ts, exp->ts[cpu][n]);
			assert_int_equal(rec->cpu, cpu);
			type = tep_data_type(tep, rec);
			assert_true(type == m->id_enter || type == m->id_exit ||
			    type == m->id_print);
			ev = tep_find_event(tep, type);
			assert_non_null(ev);
			assert_true(strcmp(ev->name, "sys_enter") == 0 ||
			    strcmp(ev->name, "sys_exit") == 0 ||
			    strcmp(ev->name, "print") == 0);
			assert_int_equal(rec->missed_events, 0);
			tracecmd_free_record(rec);
			n++;
		}
		assert_int_equal(n, exp->events[cpu]);
	}
	tracecmd_close(h);

	/* all CPUs merged: time order, every event once */
	h = tracecmd_open(path, TRACECMD_FL_LOAD_NO_PLUGINS);
	assert_non_null(h);
	memset(&st, 0, sizeof st);
	st.exp = exp;
	assert_int_equal(tracecmd_iterate_events(h, NULL, 0, iter_cb, &st),
	    0);
	assert_false(st.bad_order);
	assert_false(st.bad_ts);
	assert_int_equal(st.total, exp->total);
	for (cpu = 0; cpu < exp->ncpus; cpu++)
		assert_int_equal(st.seen[cpu], exp->events[cpu]);
	tracecmd_close(h);
}

/* Whether trace-cmd is installed. */
bool
testdata_have_trace_cmd(void)
{
	return system("command -v trace-cmd >/dev/null 2>&1") == 0;
}

/* Run a trace-cmd command; stdout into out, stderr into err. */
void
testdata_trace_cmd(const char *args, const char *path, struct td_buf *out,
    struct td_buf *err)
{
	char *cmd, *dir, *errpath, buf[8192];
	size_t n;
	FILE *p;

	dir = testdata_tmpdir();
	xasprintf(&errpath, "%s/stderr", dir);
	xasprintf(&cmd, "trace-cmd %s -i '%s' 2>'%s'", args, path, errpath);
	p = popen(cmd, "r");
	assert_non_null(p);
	td_buf_reset(out);
	while ((n = fread(buf, 1, sizeof buf, p)) > 0)
		assert_int_equal(td_buf_add(out, buf, n), 0);
	assert_int_equal(pclose(p), 0);
	assert_int_equal(td_buf_add(out, "", 1), 0);
	td_buf_reset(err);
	assert_int_equal(td_buf_read_file(err, errpath), 0);
	assert_int_equal(td_buf_add(err, "", 1), 0);
	testdata_rmdir(dir);
	free(dir);
	free(errpath);
	free(cmd);
}

/* Fail if trace-cmd's stderr has a complaint. */
void
testdata_assert_quiet(const struct td_buf *err)
{
	const char *s = (const char *)err->data;

	if (strcasestr(s, "warning") != NULL ||
	    strcasestr(s, "error") != NULL ||
	    strcasestr(s, "unknown") != NULL)
		fail_msg("trace-cmd complained: %s", s);
}

/* Fail unless want is in trace-cmd's output. */
void
testdata_assert_has(const struct td_buf *out, const char *want)
{
	if (strstr((const char *)out->data, want) == NULL)
		fail_msg("'%s' not in trace-cmd output:\n%s", want,
		    (const char *)out->data);
}

/* trace-cmd report: one line per event, per CPU counts as written. */
void
testdata_check_report(const char *path, const struct testdata_expect *exp)
{
	struct td_buf out, err;
	uint64_t per[TESTDATA_MAX_CPUS] = { 0 }, lines = 0;
	char *line, *save, mark[16];
	char head[32];
	int cpu;

	td_buf_init(&out, 64 * 1024 * 1024);
	td_buf_init(&err, 1024 * 1024);
	testdata_trace_cmd("report", path, &out, &err);
	testdata_assert_quiet(&err);
	snprintf(head, sizeof head, "cpus=%d\n", exp->ncpus);
	assert_memory_equal(out.data, head, strlen(head));
	for (line = strtok_r((char *)out.data, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "cpus=", 5) == 0)
			continue;
		lines++;
		assert_true(strstr(line, "sys_enter:") != NULL ||
		    strstr(line, "sys_exit:") != NULL ||
		    strstr(line, "print:") != NULL);
		for (cpu = 0; cpu < exp->ncpus; cpu++) {
			snprintf(mark, sizeof mark, "[%03d]", cpu);
			if (strstr(line, mark) != NULL)
				per[cpu]++;
		}
		if (strstr(line, "print:") != NULL)
			assert_non_null(strstr(line, "td_test_func: "));
	}
	assert_int_equal(lines, exp->total);
	for (cpu = 0; cpu < exp->ncpus; cpu++)
		assert_int_equal(per[cpu], exp->events[cpu]);
	td_buf_free(&out);
	td_buf_free(&err);
}

/* trace-cmd dump --summary: the layout as trace-cmd understands it. */
void
testdata_check_dump(const char *path, int version, int ncpus,
    int cpus_with_data, unsigned int noptions, const char *clock)
{
	struct td_buf out, err;
	char want[128];

	td_buf_init(&out, 1024 * 1024);
	td_buf_init(&err, 1024 * 1024);
	testdata_trace_cmd("dump --summary", path, &out, &err);
	testdata_assert_quiet(&err);
	snprintf(want, sizeof want, "\t\t%d\t[Version]", version);
	testdata_assert_has(&out, want);
	testdata_assert_has(&out, "[Header page, ");
	testdata_assert_has(&out, "[Header event, ");
	testdata_assert_has(&out, "[Ftrace format, 1 events]");
	testdata_assert_has(&out, "[Events format, 1 systems]");
	testdata_assert_has(&out, "[Kallsyms, ");
	testdata_assert_has(&out, "[Trace printk, ");
	testdata_assert_has(&out, "[Saved command lines, ");
	testdata_assert_has(&out, "4096\t[Page size, bytes]");
	if (version == 7) {
		snprintf(want, sizeof want, "[buffer \"\", \"%s\" clock, "
		    "4096 page size, %d cpus, ", clock, cpus_with_data);
		testdata_assert_has(&out, want);
		/* callers' options + 6 section offsets + CPUCOUNT, BUFFER,
		 * DONE; sections: 6 metadata, BUFFER, OPTIONS, STRINGS */
		snprintf(want, sizeof want, "[%u options]", noptions + 9);
		testdata_assert_has(&out, want);
		testdata_assert_has(&out, "[9 sections]");
	} else {
		snprintf(want, sizeof want, "%d [CPUs with tracing data]",
		    ncpus);
		testdata_assert_has(&out, want);
		snprintf(want, sizeof want, "[%u options]", noptions);
		testdata_assert_has(&out, want);
		testdata_assert_has(&out, "[Flyrecord tracing data]");
		snprintf(want, sizeof want, "[%s]", clock);
		testdata_assert_has(&out, want);
	}
	td_buf_free(&out);
	td_buf_free(&err);
}

/* trace-cmd dump --sections: every section named through STRINGS. */
void
testdata_check_sections(const char *path)
{
	static const char *names[] = { "\"headers\"", "\"ftrace events\"",
	    "\"events format\"", "\"kallsyms\"", "\"printk\"",
	    "\"command lines\"", "\"buffer flyrecord \"", "\"options\"",
	    "\"strings\"" };
	struct td_buf out, err;
	size_t i;

	td_buf_init(&out, 1024 * 1024);
	td_buf_init(&err, 1024 * 1024);
	testdata_trace_cmd("dump --sections", path, &out, &err);
	testdata_assert_quiet(&err);
	if (strcasestr((char *)out.data, "unknown") != NULL)
		fail_msg("unnamed section:\n%s", (char *)out.data);
	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		testdata_assert_has(&out, names[i]);
	testdata_assert_has(&out, "[9 sections]");
	td_buf_free(&out);
	td_buf_free(&err);
}

static int
count_cb(void *arg, const void *page, size_t len)
{
	uint64_t *n = arg;

	assert_true(len > 0 && len <= TESTDATA_PAGE_SIZE);
	(*n)++;
	return 0;
}

static bool
ok_errno(int e)
{
	return e == EBADMSG || e == ENOENT || e == ENOBUFS || e == EOPNOTSUPP;
}

/*
 * Open a file and use every call on it; return the number of calls that
 * failed (1 if the open failed).  Failures must carry a reader errno.
 */
int
testdata_exercise(const char *path)
{
	struct td_read *r;
	struct td_buf b;
	uint64_t pages;
	int id, cpu, fails = 0;

	errno = 0;
	if ((r = td_read_open(path)) == NULL) {
		if (!ok_errno(errno))
			fail_msg("open: unexpected errno %d", errno);
		return 1;
	}
	td_buf_init(&b, TESTDATA_OUT_CAP);
	for (id = TD_OPT_STRINGS; id <= TD_OPT_CMDLINES; id++) {
		errno = 0;
		if (td_read_section(r, id, &b) == -1) {
			if (!ok_errno(errno))
				fail_msg("section %d: errno %d", id, errno);
			/* STRINGS is absent in v6 by design */
			if (!(id == TD_OPT_STRINGS && errno == ENOENT &&
			    td_read_version(r) == 6))
				fails++;
		}
	}
	for (id = TD_OPT_CPUSTAT; id <= TD_OPT_UNAME; id++) {
		errno = 0;
		if (td_read_option(r, id, 0, &b) == -1) {
			if (!ok_errno(errno))
				fail_msg("option %d: errno %d", id, errno);
			if (errno != ENOENT)
				fails++;
		}
	}
	for (cpu = 0; cpu < td_read_ncpus(r) && cpu < 64; cpu++) {
		pages = 0;
		errno = 0;
		if (td_read_cpu_pages(r, cpu, count_cb, &pages) == -1) {
			if (!ok_errno(errno))
				fail_msg("pages %d: errno %d", cpu, errno);
			fails++;
		}
	}
	td_read_close(r);
	td_buf_free(&b);
	return fails;
}

/* Write a whole file. */
void
testdata_write_bytes(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	close(fd);
}
