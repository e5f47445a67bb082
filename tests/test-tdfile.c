/*
 * test-tdfile.c: the trace.dat writer (shared/tdfile.c) and reader
 * (shared/tdread.c), checked against trace-cmd 3.1.6.
 *
 * One synthetic recording (tests/testdata.c: 4 CPUs, one of them without
 * data, pages handed over interleaved across CPUs) is written four ways:
 * v7 zstd, v7 uncompressed, v7 zlib and v6.  Then:
 *  (a) libtracecmd reads the zstd, uncompressed and v6 files with the exact
 *      events per CPU, each with its expected timestamp, in time order;
 *  (b) tdread gives back byte-identical sections and pages from all four;
 *  (c) trace-cmd report, dump --summary and dump --sections read the
 *      zstd, uncompressed and v6 files without a warning and with the
 *      right counts, and tdread reads the files trace-cmd convert writes;
 *  (d) the writer's error paths leave nothing behind;
 *  (e) files with a CPU without pages or with no pages at all still read;
 *  (f) tdread rejects truncated and bit-flipped files without crashing.
 * Needs no privileges; (c) is skipped where trace-cmd is not installed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdread.h"
#include "testdata.h"
#include "xmalloc.h"
#include "banned.h"

#define PS		TESTDATA_PAGE_SIZE
#define NCPUS		4
#define OUT_CAP		(4u * 1024 * 1024)

enum { V_ZSTD, V_NONE, V_ZLIB, V_V6, NVARIANTS };

/* One way of writing the recording. */
struct variant {
	const char	*name;
	int		 version;
	enum td_codec_id codec;
	bool		 tracecmd;	/* trace-cmd 3.1.6 can read it */
};

static const struct variant variants[NVARIANTS] = {
	{ "zstd", 7, TD_CODEC_ZSTD, true },
	{ "none", 7, TD_CODEC_NONE, true },
	{ "zlib", 7, TD_CODEC_ZLIB, false },
	{ "v6", 6, TD_CODEC_NONE, true },
};

/* The files every test reads, written once by the group setup. */
struct fixture {
	char			*dir;
	struct testdata_meta	 meta;
	struct testdata_plan	 plan;
	struct testdata_expect	 exp[NVARIANTS];
	char			*path[NVARIANTS];
};

static struct fixture *fx;

/*
 * LeakSanitizer hook (unused in other builds): libtracecmd 3.1.6 leaks the
 * clock name of every v6 file it opens, trace-cmd's own files included
 * (sscanf "%ms" in tracecmd_parse_trace_clock).  Without frame pointers in
 * libc the stack may stop at sscanf, hence the second pattern.
 */
const char	*__lsan_default_suppressions(void);

const char *
__lsan_default_suppressions(void)
{
	return "leak:tracecmd_parse_trace_clock\n"
	    "leak:isoc99_vsscanf\n";
}

static char *
fx_path(const char *name)
{
	char *p;

	xasprintf(&p, "%s/%s", fx->dir, name);
	return p;
}

static int
group_setup(void **state)
{
	static const unsigned int pages[NCPUS] = { 23, 5, 0, 31 };
	int v, cpu;

	fx = xcalloc(1, sizeof *fx);
	fx->dir = testdata_tmpdir();
	testdata_meta_init(&fx->meta);
	fx->plan.ncpus = NCPUS;
	fx->plan.clock = "local";
	for (cpu = 0; cpu < NCPUS; cpu++)
		fx->plan.pages[cpu] = pages[cpu];
	for (v = 0; v < NVARIANTS; v++) {
		char name[64];

		snprintf(name, sizeof name, "rec-%s.dat", variants[v].name);
		fx->path[v] = fx_path(name);
		fx->plan.version = variants[v].version;
		fx->plan.codec = variants[v].codec;
		if (testdata_write_file(fx->path[v], &fx->plan, &fx->meta,
		    &fx->exp[v]) == -1)
			return -1;
	}
	*state = fx;
	return 0;
}

static int
group_teardown(void **state)
{
	int v;

	for (v = 0; v < NVARIANTS; v++) {
		testdata_expect_free(&fx->exp[v]);
		free(fx->path[v]);
	}
	testdata_meta_free(&fx->meta);
	testdata_rmdir(fx->dir);
	free(fx->dir);
	free(fx);
	fx = NULL;
	return 0;
}

/* Files in the fixture directory other than the recordings. */
static int
stray_files(void)
{
	struct stat st;
	char *p;
	int n = 0, i;

	xasprintf(&p, "%s/t.dat", fx->dir);
	n += stat(p, &st) == 0;
	free(p);
	xasprintf(&p, "%s/t.dat.part", fx->dir);
	n += stat(p, &st) == 0;
	free(p);
	for (i = 0; i < NCPUS + 1; i++) {
		xasprintf(&p, "%s/t.dat.cpu%d.part", fx->dir, i);
		n += stat(p, &st) == 0;
		free(p);
	}
	return n;
}

/* ---- (a) libtracecmd ------------------------------------------------ */

static void
test_libtracecmd(void **state)
{
	int v, cpu;

	for (v = 0; v < NVARIANTS; v++) {
		/* the recording really has an empty CPU and interleaving */
		assert_int_equal(fx->exp[v].events[2], 0);
		for (cpu = 0; cpu < NCPUS; cpu++)
			if (cpu != 2)
				assert_true(fx->exp[v].events[cpu] > 100);
		if (variants[v].tracecmd)
			testdata_check_libtracecmd(fx->path[v], &fx->exp[v],
			    &fx->meta);
	}
}

/* ---- (b) tdread ----------------------------------------------------- */

static int
collect_cb(void *arg, const void *page, size_t len)
{
	struct td_buf *b = arg;

	assert_int_equal(len, PS);
	return td_buf_add(b, page, len);
}

/* All pages of a CPU as tdread gives them. */
static void
read_pages(struct td_read *r, int cpu, struct td_buf *out)
{
	td_buf_reset(out);
	assert_int_equal(td_read_cpu_pages(r, cpu, collect_cb, out), 0);
}

/* The pages the generator makes for a CPU. */
static void
make_pages(unsigned int npages, int cpu, struct td_buf *out)
{
	uint8_t page[PS];
	unsigned int n;

	td_buf_reset(out);
	for (n = 0; n < npages; n++) {
		testdata_cpu_page(&fx->meta, cpu, n, page, NULL);
		assert_int_equal(td_buf_add(out, page, PS), 0);
	}
}

static void
check_option_text(struct td_read *r, enum td_opt id, int nth,
    const char *want)
{
	struct td_buf b;

	td_buf_init(&b, OUT_CAP);
	assert_int_equal(td_read_option(r, id, nth, &b), 0);
	assert_true(b.len > 0 && b.data[b.len - 1] == '\0');
	assert_non_null(strstr((char *)b.data, want));
	td_buf_free(&b);
}

static void
test_tdread_identical(void **state)
{
	struct td_buf b, got[NVARIANTS], want, strings[NVARIANTS];
	struct td_read *r;
	uint32_t cnt;
	char cpuname[32];
	int v, id, cpu;

	td_buf_init(&b, OUT_CAP);
	td_buf_init(&want, 64 * 1024 * 1024);
	for (v = 0; v < NVARIANTS; v++) {
		td_buf_init(&got[v], 64 * 1024 * 1024);
		td_buf_init(&strings[v], OUT_CAP);
	}
	for (v = 0; v < NVARIANTS; v++) {
		r = td_read_open(fx->path[v]);
		assert_non_null(r);
		assert_int_equal(td_read_version(r), variants[v].version);
		assert_int_equal(td_read_codec(r), variants[v].codec);
		assert_int_equal(td_read_page_size(r), PS);
		assert_int_equal(td_read_long_size(r), 8);
		assert_int_equal(td_read_ncpus(r), NCPUS);
		assert_string_equal(td_read_clock(r), "local");

		/* sections: what the writer was handed, decompressed */
		for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
			const struct td_buf *s;

			s = testdata_meta_section(&fx->meta, id);
			assert_int_equal(td_read_section(r, id, &b), 0);
			assert_int_equal(b.len, s->len);
			assert_memory_equal(b.data, s->data, s->len);
		}
		errno = 0;
		assert_int_equal(td_read_section(r, TD_OPT_BUFFER, &b), -1);
		assert_int_equal(errno, EINVAL);
		if (variants[v].version == 7) {
			assert_int_equal(td_read_section(r, TD_OPT_STRINGS,
			    &strings[v]), 0);
			assert_non_null(memmem(strings[v].data,
			    strings[v].len, "headers\0", 8));
			assert_non_null(memmem(strings[v].data,
			    strings[v].len, "strings\0", 8));
			assert_non_null(memmem(strings[v].data,
			    strings[v].len, "buffer flyrecord ", 17));
		} else {
			errno = 0;
			assert_int_equal(td_read_section(r, TD_OPT_STRINGS,
			    &b), -1);
			assert_int_equal(errno, ENOENT);
		}

		/* options */
		check_option_text(r, TD_OPT_UNAME, 0, "Linux tdtest");
		check_option_text(r, TD_OPT_TRACECLOCK, 0, "[local]");
		for (cpu = 0; cpu < NCPUS; cpu++) {
			snprintf(cpuname, sizeof cpuname, "CPU: %d\n", cpu);
			check_option_text(r, TD_OPT_CPUSTAT, cpu, cpuname);
		}
		errno = 0;
		assert_int_equal(td_read_option(r, TD_OPT_CPUSTAT, NCPUS, &b),
		    -1);
		assert_int_equal(errno, ENOENT);
		assert_int_equal(td_read_option(r, TD_OPT_DATE, 0, &b), -1);
		assert_int_equal(td_read_option(r, TD_OPT_UNAME, -1, &b), -1);
		if (variants[v].version == 7) {
			assert_int_equal(td_read_option(r, TD_OPT_CPUCOUNT, 0,
			    &b), 0);
			assert_int_equal(b.len, 4);
			memcpy(&cnt, b.data, 4);
			assert_int_equal(cnt, NCPUS);
			assert_int_equal(td_read_option(r, TD_OPT_HEADER_INFO,
			    0, &b), 0);
			assert_int_equal(b.len, 8);
			assert_int_equal(td_read_option(r, TD_OPT_BUFFER, 0,
			    &b), 0);
		} else {
			assert_int_equal(td_read_option(r, TD_OPT_CPUCOUNT, 0,
			    &b), -1);
		}

		/* pages: byte-identical to what the generator made */
		for (cpu = 0; cpu < NCPUS; cpu++) {
			read_pages(r, cpu, &got[v]);
			make_pages(fx->plan.pages[cpu], cpu, &want);
			assert_int_equal(got[v].len, want.len);
			if (want.len != 0)
				assert_memory_equal(got[v].data, want.data,
				    want.len);
			if (variants[v].codec == TD_CODEC_NONE)
				assert_int_equal(td_read_cpu_size(r, cpu),
				    want.len);
			else if (want.len != 0)
				assert_true(td_read_cpu_size(r, cpu) <
				    want.len / 2);
			else
				assert_int_equal(td_read_cpu_size(r, cpu), 0);
		}
		errno = 0;
		assert_int_equal(td_read_cpu_pages(r, NCPUS, collect_cb, &b),
		    -1);
		assert_int_equal(errno, EINVAL);
		assert_int_equal(td_read_cpu_pages(r, -1, collect_cb, &b), -1);

		/* a buffer too small for a section */
		{
			struct td_buf small;

			td_buf_init(&small, 16);
			errno = 0;
			assert_int_equal(td_read_section(r, TD_OPT_HEADER_INFO,
			    &small), -1);
			assert_int_equal(errno, ENOBUFS);
			td_buf_free(&small);
		}
		td_read_close(r);
	}

	/* the three v7 files carry the same strings */
	assert_int_equal(strings[V_ZSTD].len, strings[V_NONE].len);
	assert_int_equal(strings[V_ZSTD].len, strings[V_ZLIB].len);
	assert_memory_equal(strings[V_ZSTD].data, strings[V_NONE].data,
	    strings[V_NONE].len);
	assert_memory_equal(strings[V_ZSTD].data, strings[V_ZLIB].data,
	    strings[V_ZLIB].len);

	/* and the last CPU's pages are the same bytes in all four */
	for (v = 1; v < NVARIANTS; v++) {
		assert_int_equal(got[v].len, got[0].len);
		assert_memory_equal(got[v].data, got[0].data, got[0].len);
	}
	for (v = 0; v < NVARIANTS; v++) {
		td_buf_free(&got[v]);
		td_buf_free(&strings[v]);
	}
	td_buf_free(&want);
	td_buf_free(&b);
}

/* A page stops the walk when the callback says so. */
static int
stop_cb(void *arg, const void *page, size_t len)
{
	int *n = arg;

	if (++*n == 3) {
		errno = ECANCELED;
		return -1;
	}
	return 0;
}

static void
test_tdread_stop(void **state)
{
	struct td_read *r;
	int v, n;

	for (v = 0; v < NVARIANTS; v++) {
		r = td_read_open(fx->path[v]);
		assert_non_null(r);
		n = 0;
		errno = 0;
		assert_int_equal(td_read_cpu_pages(r, 0, stop_cb, &n), -1);
		assert_int_equal(errno, ECANCELED);
		assert_int_equal(n, 3);
		n = 0;
		assert_int_equal(td_read_cpu_pages(r, 2, stop_cb, &n), 0);
		assert_int_equal(n, 0);
		td_read_close(r);
	}
	errno = 0;
	assert_null(td_read_open("/nonexistent/td.dat"));
	assert_int_equal(errno, ENOENT);
	errno = 0;
	assert_null(td_read_open(fx->dir));
	assert_int_equal(errno, EINVAL);
}

/* ---- (c) trace-cmd ---------------------------------------------------- */

static void
test_trace_cmd(void **state)
{
	if (!testdata_have_trace_cmd())
		skip();
	testdata_check_report(fx->path[V_ZSTD], &fx->exp[V_ZSTD]);
	testdata_check_report(fx->path[V_V6], &fx->exp[V_V6]);
	testdata_check_report(fx->path[V_NONE], &fx->exp[V_NONE]);
	/* UNAME, TRACECLOCK, 4 CPUSTAT */
	testdata_check_dump(fx->path[V_ZSTD], 7, NCPUS, NCPUS - 1, 2 + NCPUS,
	    "local");
	testdata_check_dump(fx->path[V_V6], 6, NCPUS, NCPUS - 1, 2 + NCPUS,
	    "local");
	testdata_check_sections(fx->path[V_ZSTD]);
	testdata_check_sections(fx->path[V_NONE]);
}

/*
 * tdread on files trace-cmd itself wrote: convert our v6 file (v7 input
 * would not do: trace-cmd 3.1.6 convert drops CPU 0 of any v7 file that
 * has a CPU without data, its own files included) to v7 zstd, v7 without
 * compression and v6, and expect the same sections and pages.
 */
static void
test_trace_cmd_convert(void **state)
{
	static const char *args[] = { "", "--compression none",
	    "--file-version 6" };
	struct td_buf b, got, want;
	struct td_read *r;
	char *out, *cmd;
	size_t i;
	int id, cpu;

	if (!testdata_have_trace_cmd())
		skip();
	td_buf_init(&b, OUT_CAP);
	td_buf_init(&got, 64 * 1024 * 1024);
	td_buf_init(&want, 64 * 1024 * 1024);
	out = fx_path("conv.dat");
	for (i = 0; i < sizeof args / sizeof args[0]; i++) {
		xasprintf(&cmd, "trace-cmd convert %s -i '%s' -o '%s' "
		    ">/dev/null 2>&1", args[i], fx->path[V_V6], out);
		assert_int_equal(system(cmd), 0);
		free(cmd);
		r = td_read_open(out);
		assert_non_null(r);
		assert_int_equal(td_read_version(r), i == 2 ? 6 : 7);
		assert_int_equal(td_read_codec(r), i == 0 ? TD_CODEC_ZSTD :
		    TD_CODEC_NONE);
		assert_int_equal(td_read_ncpus(r), NCPUS);
		assert_string_equal(td_read_clock(r), "local");
		for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
			const struct td_buf *s;

			s = testdata_meta_section(&fx->meta, id);
			assert_int_equal(td_read_section(r, id, &b), 0);
			assert_int_equal(b.len, s->len);
			assert_memory_equal(b.data, s->data, s->len);
		}
		check_option_text(r, TD_OPT_UNAME, 0, "Linux tdtest");
		check_option_text(r, TD_OPT_CPUSTAT, 3, "CPU: 3\n");
		if (i != 2) {
			assert_int_equal(td_read_section(r, TD_OPT_STRINGS,
			    &b), 0);
			assert_non_null(memmem(b.data, b.len, "strings", 7));
		}
		for (cpu = 0; cpu < NCPUS; cpu++) {
			read_pages(r, cpu, &got);
			make_pages(fx->plan.pages[cpu], cpu, &want);
			assert_int_equal(got.len, want.len);
			if (want.len != 0)
				assert_memory_equal(got.data, want.data,
				    want.len);
		}
		td_read_close(r);
		assert_int_equal(testdata_exercise(out), 0);
		unlink(out);
	}
	free(out);
	td_buf_free(&b);
	td_buf_free(&got);
	td_buf_free(&want);
}

/* ---- (d) writer errors ---------------------------------------------- */

static struct td_file *
new_writer(int version, enum td_codec_id codec, int ncpus)
{
	struct td_file_params p = {
		.version = version, .codec = codec, .page_size = PS,
		.long_size = 8, .ncpus = ncpus, .clock = "local",
	};
	char *path = fx_path("t.dat");
	struct td_file *f = td_file_create(path, &p);

	free(path);
	return f;
}

static void
test_errors_params(void **state)
{
	struct td_file_params p = {
		.version = 7, .codec = TD_CODEC_ZSTD, .page_size = PS,
		.long_size = 8, .ncpus = 2, .clock = "local",
	};
	struct td_file_params bad;
	char *path = fx_path("t.dat");
	int i;

	for (i = 0; i < 7; i++) {
		bad = p;
		switch (i) {
		case 0: bad.version = 5; break;
		case 1: bad.version = 8; break;
		case 2: bad.page_size = 100; break;
		case 3: bad.page_size = 4 * 1024 * 1024; break;
		case 4: bad.ncpus = 0; break;
		case 5: bad.long_size = 2; break;
		case 6: bad.clock = NULL; break;
		}
		errno = 0;
		assert_null(td_file_create(path, &bad));
		assert_int_equal(errno, EINVAL);
	}
	assert_int_equal(stray_files(), 0);
	free(path);
}

static void
test_errors_order(void **state)
{
	struct td_file *f;
	const struct td_buf *hi = &fx->meta.header_info;
	uint8_t page[PS] = { 0 };

	/* v6 fixes the order of the metadata */
	f = new_writer(6, TD_CODEC_NONE, 2);
	assert_non_null(f);
	errno = 0;
	assert_int_equal(td_file_section_add(f, TD_OPT_FTRACE_EVENTS,
	    "x", 1), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(td_file_section_add(f, TD_OPT_HEADER_INFO,
	    hi->data, hi->len), 0);
	errno = 0;
	assert_int_equal(td_file_section_add(f, TD_OPT_HEADER_INFO,
	    hi->data, hi->len), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(td_file_section_add(f, TD_OPT_KALLSYMS, "x", 1),
	    -1);
	assert_int_equal(errno, EINVAL);
	/* finishing without all sections is refused too */
	errno = 0;
	assert_int_equal(td_file_finish(f), -1);
	assert_int_equal(errno, EINVAL);
	td_file_free(f);
	assert_int_equal(stray_files(), 0);

	/* v7 takes any order but each section once; no pseudo sections */
	f = new_writer(7, TD_CODEC_ZSTD, 2);
	assert_non_null(f);
	assert_int_equal(td_file_section_add(f, TD_OPT_CMDLINES, "x", 1), 0);
	errno = 0;
	assert_int_equal(td_file_section_add(f, TD_OPT_CMDLINES, "x", 1), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(td_file_section_add(f, TD_OPT_BUFFER, "x", 1), -1);
	assert_int_equal(td_file_section_add(f, TD_OPT_STRINGS, "x", 1), -1);
	assert_int_equal(td_file_section_add(f, TD_OPT_DONE, "x", 1), -1);
	assert_int_equal(td_file_section_add(f, TD_OPT_UNAME, "x", 1), -1);
	assert_int_equal(td_file_section_write(f, "x", 1), -1);
	assert_int_equal(td_file_section_end(f), -1);
	/* nested sections */
	assert_int_equal(td_file_section_begin(f, TD_OPT_PRINTK), 0);
	assert_int_equal(td_file_section_begin(f, TD_OPT_KALLSYMS), -1);
	assert_int_equal(td_file_finish(f), -1);
	assert_int_equal(td_file_section_end(f), 0);
	/* options the writer owns */
	assert_int_equal(td_file_add_option(f, TD_OPT_CPUCOUNT, "x", 1), -1);
	assert_int_equal(td_file_add_option(f, TD_OPT_BUFFER, "x", 1), -1);
	assert_int_equal(td_file_add_option(f, TD_OPT_DONE, "x", 1), -1);
	assert_int_equal(td_file_add_option(f, TD_OPT_KALLSYMS, "x", 1), -1);

	/* pages for CPUs that do not exist, or too big */
	errno = 0;
	assert_int_equal(td_file_cpu_page(f, 2, page, PS), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(td_file_cpu_page(f, -1, page, PS), -1);
	assert_int_equal(td_file_cpu_page(f, 0, page, PS + 1), -1);
	assert_int_equal(td_file_cpu_pages(f, 0), 0);
	assert_int_equal(td_file_cpu_page(f, 1, page, PS), 0);
	assert_int_equal(td_file_cpu_pages(f, 1), 1);
	assert_int_equal(td_file_cpu_pages(f, 9), 0);
	td_file_free(f);
	assert_int_equal(stray_files(), 0);
}

static void
test_errors_abort(void **state)
{
	struct td_file *f;
	uint8_t page[PS];
	int i, cpu, v;

	for (v = 0; v < NVARIANTS; v++) {
		f = new_writer(variants[v].version, variants[v].codec, 3);
		assert_non_null(f);
		assert_int_equal(td_file_section_add(f, TD_OPT_HEADER_INFO,
		    fx->meta.header_info.data, fx->meta.header_info.len), 0);
		for (i = 0; i < 25; i++)
			for (cpu = 0; cpu < 3; cpu += 2) {
				testdata_cpu_page(&fx->meta, cpu, i, page,
				    NULL);
				assert_int_equal(td_file_cpu_page(f, cpu, page,
				    PS), 0);
			}
		assert_true(stray_files() >= 3);	/* .part + 2 spools */
		td_file_abort(f);
		assert_int_equal(stray_files(), 0);
		/* calls after abort fail, free is safe */
		assert_int_equal(td_file_cpu_page(f, 0, page, PS), -1);
		assert_int_equal(td_file_finish(f), -1);
		td_file_abort(f);
		td_file_free(f);
		assert_int_equal(stray_files(), 0);
	}

	/* freeing an unfinished writer aborts it */
	f = new_writer(7, TD_CODEC_ZSTD, 2);
	assert_non_null(f);
	assert_int_equal(td_file_cpu_page(f, 1, page, PS), 0);
	td_file_free(f);
	assert_int_equal(stray_files(), 0);
	td_file_free(NULL);
}

static void
test_errors_unwritable(void **state)
{
	struct td_file_params p = {
		.version = 7, .codec = TD_CODEC_ZSTD, .page_size = PS,
		.long_size = 8, .ncpus = 2, .clock = "local",
	};
	char *dir, *path;

	errno = 0;
	assert_null(td_file_create("/nonexistent-td-dir/t.dat", &p));
	assert_int_equal(errno, ENOENT);
	path = fx_path("rec-zstd.dat/t.dat");	/* a file as directory */
	errno = 0;
	assert_null(td_file_create(path, &p));
	assert_int_equal(errno, ENOTDIR);
	free(path);

	/*
	 * A read-only directory.  Root writes anywhere, so as root the check
	 * runs in a child that drops to nobody.
	 */
	dir = fx_path("ro");
	assert_int_equal(mkdir(dir, 0555), 0);
	xasprintf(&path, "%s/t.dat", dir);
	if (geteuid() != 0) {
		errno = 0;
		assert_null(td_file_create(path, &p));
		assert_int_equal(errno, EACCES);
	} else {
		pid_t pid;
		int status;

		assert_int_equal(chmod(fx->dir, 0711), 0);
		pid = fork();
		assert_true(pid != -1);
		if (pid == 0) {
			int bad;

			if (setgid(65534) == -1 || setuid(65534) == -1)
				_exit(2);
			errno = 0;
			bad = td_file_create(path, &p) != NULL ||
			    errno != EACCES;
			/* valgrind checks the child's exit for leaks too */
			free(path);
			free(dir);
			_exit(bad);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_int_equal(chmod(fx->dir, 0700), 0);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	assert_int_equal(stray_files(), 0);
	chmod(dir, 0700);
	testdata_rmdir(dir);
	free(path);
	free(dir);
}

/*
 * unnamed_spools and keep_part (tdagent's unprivileged recorder): no file
 * but PATH.part is ever named, td_file_finish() leaves the complete file
 * there for the caller to rename, and it reads back whole.
 */
static void
test_unnamed_spools(void **state)
{
	struct td_file_params p = {
		.version = 7, .codec = TD_CODEC_NONE, .page_size = PS,
		.long_size = 8, .ncpus = 3, .clock = "local",
		.unnamed_spools = true, .keep_part = true,
	};
	static const int pages[3] = { 25, 0, 12 };
	char *path = fx_path("t.dat"), *part = fx_path("t.dat.part");
	struct td_file *f;
	struct td_read *r;
	uint8_t page[PS];
	struct stat st;
	int i, cpu, v;

	for (v = 0; v < 2; v++) {
		p.codec = v ? TD_CODEC_ZSTD : TD_CODEC_NONE;
		f = td_file_create(path, &p);
		assert_non_null(f);
		assert_int_equal(stray_files(), 1);	/* the .part only */
		assert_int_equal(td_file_section_add(f, TD_OPT_HEADER_INFO,
		    fx->meta.header_info.data, fx->meta.header_info.len), 0);
		for (i = 0; i < 25; i++)
			for (cpu = 0; cpu < 3; cpu++) {
				if (i >= pages[cpu])
					continue;
				testdata_cpu_page(&fx->meta, cpu, i, page,
				    NULL);
				assert_int_equal(td_file_cpu_page(f, cpu, page,
				    PS), 0);
			}
		assert_int_equal(stray_files(), 1);
		assert_int_equal(td_file_finish(f), 0);
		td_file_free(f);
		assert_int_equal(stat(path, &st), -1);
		assert_int_equal(stat(part, &st), 0);
		assert_int_equal(stray_files(), 1);
		assert_int_equal(rename(part, path), 0);
		r = td_read_open(path);
		assert_non_null(r);
		assert_int_equal(td_read_ncpus(r), 3);
		if (v == 0)
			for (cpu = 0; cpu < 3; cpu++)
				assert_int_equal(td_read_cpu_size(r, cpu),
				    (uint64_t)pages[cpu] * PS);
		td_read_close(r);
		assert_int_equal(unlink(path), 0);

		/* an abort removes the .part where it can */
		f = td_file_create(path, &p);
		assert_non_null(f);
		assert_int_equal(td_file_cpu_page(f, 2, page, PS), 0);
		td_file_abort(f);
		td_file_free(f);
		assert_int_equal(stray_files(), 0);
	}
	free(path);
	free(part);
}

/* ---- (e) empty CPUs and empty files ------------------------------- */

static void
test_empty(void **state)
{
	struct testdata_plan plan;
	struct testdata_expect exp;
	struct td_read *r;
	struct td_buf b;
	char *path;
	int v, cpu, calls, ncpus;

	td_buf_init(&b, OUT_CAP);
	for (ncpus = 1; ncpus <= 3; ncpus += 2)
		for (v = 0; v < NVARIANTS; v++) {
			memset(&plan, 0, sizeof plan);
			plan.version = variants[v].version;
			plan.codec = variants[v].codec;
			plan.ncpus = ncpus;
			plan.clock = "mono";
			path = fx_path("empty.dat");
			assert_int_equal(testdata_write_file(path, &plan,
			    &fx->meta, &exp), 0);
			assert_int_equal(exp.total, 0);

			r = td_read_open(path);
			assert_non_null(r);
			assert_int_equal(td_read_ncpus(r), ncpus);
			assert_string_equal(td_read_clock(r), "mono");
			for (cpu = 0; cpu < ncpus; cpu++) {
				calls = 0;
				assert_int_equal(td_read_cpu_pages(r, cpu,
				    stop_cb, &calls), 0);
				assert_int_equal(calls, 0);
				assert_int_equal(td_read_cpu_size(r, cpu), 0);
			}
			assert_int_equal(td_read_section(r, TD_OPT_KALLSYMS,
			    &b), 0);
			assert_int_equal(b.len, fx->meta.kallsyms.len);
			td_read_close(r);

			if (variants[v].tracecmd)
				testdata_check_libtracecmd(path, &exp,
				    &fx->meta);
			/*
			 * trace-cmd 3.1.6 dump dies with "cannot read the
			 * rest of the header" on a v6 file that ends right
			 * after the flyrecord clock, and so on the empty v6
			 * files trace-cmd convert writes itself: no dump
			 * there.
			 */
			if (variants[v].tracecmd && testdata_have_trace_cmd()) {
				testdata_check_report(path, &exp);
				if (plan.version == 7)
					testdata_check_dump(path, 7, ncpus, 0,
					    2 + ncpus, "mono");
			}
			testdata_expect_free(&exp);
			unlink(path);
			free(path);
		}
	td_buf_free(&b);
}

/* ---- writer details --------------------------------------------------- */

/* Sections streamed in pieces, in any order; short pages; big kallsyms. */
static void
test_writer_streaming(void **state)
{
	struct td_file *f;
	struct td_read *r;
	struct td_buf b, big;
	struct testdata_expect exp;
	struct stat st;
	uint8_t page[PS];
	char *path = fx_path("t.dat");
	size_t off, k;
	int v, id, i;
	static const int order[] = { TD_OPT_CMDLINES, TD_OPT_PRINTK,
	    TD_OPT_KALLSYMS, TD_OPT_EVENT_FORMATS, TD_OPT_FTRACE_EVENTS,
	    TD_OPT_HEADER_INFO };

	/* a kallsyms past the writer's flush size, in odd pieces */
	td_buf_init(&big, 8 * 1024 * 1024);
	for (i = 0; big.len < 3 * 1024 * 1024; i++)
		td_buf_printf(&big, "ffffffff%08x t sym_%d [mod%d]\n",
		    0x81000000 + i * 16, i, i % 13);
	td_buf_init(&b, 8 * 1024 * 1024);

	for (v = 0; v < NVARIANTS; v++) {
		f = new_writer(variants[v].version, variants[v].codec, 2);
		assert_non_null(f);
		for (i = 0; i < 6; i++) {
			const struct td_buf *s;

			id = variants[v].version == 7 ? order[i] :
			    TD_OPT_HEADER_INFO + i;
			s = testdata_meta_section(&fx->meta, id);
			if (id == TD_OPT_KALLSYMS) {
				uint32_t n = (uint32_t)big.len;

				assert_int_equal(td_file_section_begin(f, id),
				    0);
				assert_int_equal(td_file_section_write(f, &n,
				    4), 0);
				for (off = 0; off < big.len; off += k) {
					k = 1 + (off * 13) % 700001;
					if (k > big.len - off)
						k = big.len - off;
					assert_int_equal(td_file_section_write(
					    f, big.data + off, k), 0);
				}
				assert_int_equal(td_file_section_end(f), 0);
				continue;
			}
			assert_int_equal(td_file_section_add(f, id, s->data,
			    s->len), 0);
		}
		/* a short page is zero-padded; only CPU 1 has data */
		memset(&exp, 0, sizeof exp);
		testdata_cpu_page(&fx->meta, 1, 0, page, &exp);
		assert_int_equal(td_file_cpu_page(f, 1, page, 2000), 0);
		assert_int_equal(td_file_finish(f), 0);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal((uint64_t)st.st_size, td_file_size(f));
		errno = 0;
		assert_int_equal(td_file_finish(f), -1);
		td_file_free(f);
		assert_int_equal(stray_files(), 1);	/* t.dat, no spools */

		r = td_read_open(path);
		assert_non_null(r);
		assert_int_equal(td_read_section(r, TD_OPT_KALLSYMS, &b), 0);
		assert_int_equal(b.len, big.len + 4);
		assert_memory_equal(b.data + 4, big.data, big.len);
		for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
			const struct td_buf *s;

			if (id == TD_OPT_KALLSYMS)
				continue;
			s = testdata_meta_section(&fx->meta, id);
			assert_int_equal(td_read_section(r, id, &b), 0);
			assert_int_equal(b.len, s->len);
			assert_memory_equal(b.data, s->data, s->len);
		}
		td_buf_reset(&b);
		assert_int_equal(td_read_cpu_pages(r, 1, collect_cb, &b), 0);
		assert_int_equal(b.len, PS);
		assert_memory_equal(b.data, page, 2000);
		for (k = 2000; k < PS; k++)
			assert_int_equal(b.data[k], 0);
		td_read_close(r);
		testdata_expect_free(&exp);
		unlink(path);
		assert_int_equal(stray_files(), 0);
	}
	td_buf_free(&b);
	td_buf_free(&big);
	free(path);
}


/* ---- checkpoints --------------------------------------------------------- */

/* A whole file through tdread: sections and pages as a reference. */
static void
assert_same_content(const char *a, const char *b)
{
	struct td_read *ra, *rb;
	struct td_buf x, y;
	int id, cpu;

	td_buf_init(&x, 64 * 1024 * 1024);
	td_buf_init(&y, 64 * 1024 * 1024);
	ra = td_read_open(a);
	rb = td_read_open(b);
	assert_non_null(ra);
	assert_non_null(rb);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		assert_int_equal(td_read_section(ra, id, &x), 0);
		assert_int_equal(td_read_section(rb, id, &y), 0);
		assert_int_equal(x.len, y.len);
		assert_memory_equal(x.data, y.data, x.len);
	}
	for (cpu = 0; cpu < NCPUS; cpu++) {
		read_pages(ra, cpu, &x);
		read_pages(rb, cpu, &y);
		assert_int_equal(x.len, y.len);
		assert_memory_equal(x.data, y.data, x.len);
	}
	td_read_close(ra);
	td_read_close(rb);
	td_buf_free(&x);
	td_buf_free(&y);
}

/* Pages of rounds [from, to) as testdata_write_file() interleaves them. */
static void
add_rounds(struct td_file *f, unsigned int from, unsigned int to,
    struct testdata_expect *exp)
{
	uint8_t page[PS];
	unsigned int round;
	int cpu;

	for (round = from; round < to; round++)
		for (cpu = 0; cpu < NCPUS; cpu++) {
			if (round >= fx->plan.pages[cpu])
				continue;
			testdata_cpu_page(&fx->meta, cpu, round, page, exp);
			if (exp != NULL)
				exp->pages[cpu]++;
			assert_int_equal(td_file_cpu_page(f, cpu, page, PS), 0);
		}
}

/*
 * A writer that dies after a checkpoint taken in the middle of a section
 * (a child that _exits in the middle of the next one, with pages in its
 * chunks) is restored from the checkpoint
 * and finished: the file has exactly the reference file's content and
 * libtracecmd reads exactly its events.  Damaged state is refused, and the
 * refusal leaves the files alone; a missing spool is refused too, without
 * creating one or keeping a descriptor open.
 */
static void
test_checkpoint(void **state)
{
	char *path = fx_path("t.dat"), *part = fx_path("t.dat.part");
	char *stpath = fx_path("t.state");
	char *spool = fx_path("t.dat.cpu0.part"), *away = fx_path("t.away");
	const struct td_buf *ks = testdata_meta_section(&fx->meta,
	    TD_OPT_KALLSYMS);
	size_t half = ks->len / 2;
	struct td_buf st;
	struct td_file *f;
	struct stat sb;
	pid_t pid;
	int v, id, status, fd0, fd1;
	size_t i;

	assert_true(half > 16);
	for (v = 0; v < NVARIANTS; v++) {
		td_buf_init(&st, 1024 * 1024);
		fx->plan.version = variants[v].version;
		fx->plan.codec = variants[v].codec;
		pid = fork();
		assert_true(pid != -1);
		if (pid == 0) {
			int fd;

			f = new_writer(variants[v].version, variants[v].codec,
			    NCPUS);
			for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_EVENT_FORMATS;
			    id++) {
				const struct td_buf *s =
				    testdata_meta_section(&fx->meta, id);

				if (td_file_section_add(f, id, s->data,
				    s->len) == -1)
					_exit(1);
			}
			add_rounds(f, 0, 7, NULL);
			/*
			 * In the middle of kallsyms (in two writes); zlib
			 * refuses with a section open, and gets its
			 * checkpoint before it
			 */
			if (td_file_section_begin(f, TD_OPT_KALLSYMS) == -1 ||
			    td_file_section_write(f, ks->data, half / 2) ==
			    -1 || td_file_section_write(f, ks->data + half / 2,
			    half - half / 2) == -1)
				_exit(2);
			if (variants[v].codec == TD_CODEC_ZLIB &&
			    (td_file_checkpoint(f, &st) != -1 ||
			    errno != EBUSY || td_file_section_cancel(f) == -1))
				_exit(2);
			if (td_file_checkpoint(f, &st) == -1)
				_exit(3);
			fd = open(stpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd == -1 || write(fd, st.data, st.len) !=
			    (ssize_t)st.len)
				_exit(4);
			/* what comes after the checkpoint is lost */
			td_file_section_begin(f, TD_OPT_KALLSYMS);
			td_file_section_write(f, "garbage", 7);
			add_rounds(f, 7, 12, NULL);
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		assert_int_equal(td_buf_read_file(&st, stpath), 0);
		unlink(stpath);

		/* damaged state: refused, nothing removed */
		for (i = 0; i < st.len; i += 1 + i / 8) {
			assert_null(td_file_restore(path, st.data, i));
			assert_int_equal(errno, EINVAL);
		}
		st.data[0] ^= 1;
		assert_null(td_file_restore(path, st.data, st.len));
		assert_int_equal(errno, EINVAL);
		st.data[0] ^= 1;
		/* a level no writer uses (zstd 22: 800 MB under ASan) */
		{
			uint32_t level = 22, was;

			memcpy(&was, st.data + 16, 4);
			assert_int_equal(was, 0);
			memcpy(st.data + 16, &level, 4);
			assert_null(td_file_restore(path, st.data, st.len));
			assert_int_equal(errno, EINVAL);
			memcpy(st.data + 16, &was, 4);
		}
		assert_int_equal(stat(part, &sb), 0);
		fd0 = open("/dev/null", O_RDONLY);
		close(fd0);
		assert_int_equal(rename(spool, away), 0);
		assert_null(td_file_restore(path, st.data, st.len));
		assert_int_equal(errno, ENOENT);
		assert_int_equal(stat(spool, &sb), -1);
		fd1 = open("/dev/null", O_RDONLY);
		assert_int_equal(fd1, fd0);
		close(fd1);
		assert_int_equal(rename(away, spool), 0);

		f = td_file_restore(path, st.data, st.len);
		assert_non_null(f);
		/* the pages before the checkpoint are there, once */
		assert_int_equal(td_file_cpu_pages(f, 0), 7);
		assert_int_equal(td_file_cpu_pages(f, 1), 5);
		assert_int_equal(td_file_cpu_pages(f, 2), 0);
		id = TD_OPT_KALLSYMS;
		if (variants[v].codec != TD_CODEC_ZLIB) {
			/* the rest of the section that was open */
			assert_true(td_file_in_section(f));
			assert_int_equal(td_file_section_write(f,
			    ks->data + half, ks->len - half), 0);
			assert_int_equal(td_file_section_end(f), 0);
			id++;
		} else
			assert_false(td_file_in_section(f));
		for (; id <= TD_OPT_CMDLINES; id++) {
			const struct td_buf *s =
			    testdata_meta_section(&fx->meta, id);

			assert_int_equal(td_file_section_add(f, id, s->data,
			    s->len), 0);
		}
		add_rounds(f, 7, 31, NULL);
		assert_int_equal(testdata_options(f, &fx->plan, &fx->exp[v]),
		    0);
		assert_int_equal(td_file_finish(f), 0);
		td_file_free(f);
		assert_int_equal(stray_files(), 1);
		assert_same_content(path, fx->path[v]);
		if (variants[v].tracecmd)
			testdata_check_libtracecmd(path, &fx->exp[v],
			    &fx->meta);
		td_buf_free(&st);
		unlink(path);
	}
	free(away);
	free(spool);
	free(stpath);
	free(part);
	free(path);
}

/* Descriptors open in this process. */
static int
open_fds(void)
{
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;		/* the directory's own */
}

/*
 * A writer bounded as tdlisten's are, squeezed: 3 pages of chunk memory
 * and 2 spool descriptors for 3 CPUs with pages.  Chunks go out shorter
 * and spools are closed and reopened, but the file holds exactly the
 * reference's content; the writer never holds more than its budget and
 * one page, nor opens more than 2 spools.
 */
static void
test_bounds(void **state)
{
	char *path = fx_path("t.dat");
	struct td_file_params p = {
		.page_size = PS, .long_size = 8, .ncpus = NCPUS,
		.clock = "local", .chunk_mem = 3 * PS, .spool_fds = 2,
	};
	uint8_t page[PS];
	unsigned int round;
	struct td_file *f;
	size_t base_mem;
	int v, id, cpu, fd0;

	for (v = 0; v < NVARIANTS; v++) {
		p.version = variants[v].version;
		p.codec = variants[v].codec;
		fd0 = open_fds();
		f = td_file_create(path, &p);
		assert_non_null(f);
		for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
			const struct td_buf *s =
			    testdata_meta_section(&fx->meta, id);

			assert_int_equal(td_file_section_add(f, id, s->data,
			    s->len), 0);
		}
		base_mem = td_file_mem(f);
		for (round = 0; round < 31; round++)
			for (cpu = 0; cpu < NCPUS; cpu++) {
				if (round >= fx->plan.pages[cpu])
					continue;
				testdata_cpu_page(&fx->meta, cpu, round, page,
				    NULL);
				assert_int_equal(td_file_cpu_page(f, cpu, page,
				    PS), 0);
				assert_true(td_file_mem(f) <= base_mem +
				    3 * PS + PS);
				assert_true(open_fds() <= fd0 + 1 + 2);
			}
		assert_int_equal(testdata_options(f, &fx->plan, &fx->exp[v]),
		    0);
		assert_int_equal(td_file_finish(f), 0);
		td_file_free(f);
		assert_int_equal(open_fds(), fd0);
		assert_int_equal(stray_files(), 1);
		assert_same_content(path, fx->path[v]);
		if (variants[v].tracecmd)
			testdata_check_libtracecmd(path, &fx->exp[v],
			    &fx->meta);
		unlink(path);
	}
	free(path);
}

/*
 * Options: at most TD_MAX_OPTIONS_TOTAL together (EFBIG); a checkpoint
 * appends the new ones to PATH.opts.part and the state holds only their
 * length, so a second checkpoint writes only what came after the first;
 * a restore cuts the side file back to its checkpoint.
 */
static void
test_options_side_file(void **state)
{
	char *path = fx_path("t.dat"), *opts = fx_path("t.dat.opts.part");
	static const char a[] = "OPTION-A-MARK", b[] = "OPTION-B-MARK";
	struct td_buf st1, st2;
	struct td_file *f;
	struct stat sb;
	uint8_t *big;

	td_buf_init(&st1, 1024 * 1024);
	td_buf_init(&st2, 1024 * 1024);
	f = new_writer(7, TD_CODEC_ZSTD, 2);
	assert_non_null(f);
	big = calloc(1, TD_MAX_OPTIONS_TOTAL);
	assert_int_equal(td_file_add_option(f, TD_OPT_HOOK, big,
	    TD_MAX_OPTIONS_TOTAL - 6 + 1), -1);
	assert_int_equal(errno, EFBIG);
	free(big);
	assert_int_equal(td_file_add_option(f, TD_OPT_HOOK, a, sizeof a), 0);
	assert_int_equal(td_file_checkpoint(f, &st1), 0);
	assert_int_equal(stat(opts, &sb), 0);
	assert_int_equal(sb.st_size, 6 + sizeof a);
	assert_null(memmem(st1.data, st1.len, a, sizeof a));
	assert_int_equal(td_file_add_option(f, TD_OPT_HOOK, b, sizeof b), 0);
	assert_int_equal(td_file_checkpoint(f, &st2), 0);
	assert_int_equal(stat(opts, &sb), 0);
	assert_int_equal(sb.st_size, 12 + sizeof a + sizeof b);
	assert_null(memmem(st2.data, st2.len, b, sizeof b));
	td_file_release(f);
	/* back to the first: B is cut off the side file */
	f = td_file_restore(path, st1.data, st1.len);
	assert_non_null(f);
	assert_int_equal(stat(opts, &sb), 0);
	assert_int_equal(sb.st_size, 6 + sizeof a);
	td_file_abort(f);
	td_file_free(f);
	assert_int_equal(stat(opts, &sb), -1);
	td_buf_free(&st1);
	td_buf_free(&st2);
	free(opts);
	free(path);
}

/* ---- (f) hostile files ------------------------------------------------ */

/* Cut a copy of each file shorter and shorter: every cut must fail. */
static void
test_truncated(void **state)
{
	struct td_buf file;
	char *path = fx_path("cut.dat");
	size_t len;
	int v;

	td_buf_init(&file, 64 * 1024 * 1024);
	for (v = 0; v < NVARIANTS; v++) {
		td_buf_reset(&file);
		assert_int_equal(td_buf_read_file(&file, fx->path[v]), 0);
		assert_int_equal(testdata_exercise(fx->path[v]), 0);
		testdata_write_bytes(path, file.data, file.len);
		for (len = file.len; len-- > 0; ) {
			/* every byte of both ends, a stride between */
			if (len >= 2048 && file.len - len > 600 && len % 97)
				continue;
			assert_int_equal(truncate(path, (off_t)len), 0);
			if (testdata_exercise(path) == 0)
				fail_msg("%s cut at %zu of %zu: no error",
				    variants[v].name, len, file.len);
		}
	}
	unlink(path);
	free(path);
	td_buf_free(&file);
}

static void
test_bitflips(void **state)
{
	struct td_buf file;
	char *path = fx_path("flip.dat");
	uint64_t s = 99;
	size_t i, pos;
	uint8_t c;
	int v, fd;

	td_buf_init(&file, 64 * 1024 * 1024);
	for (v = 0; v < NVARIANTS; v++) {
		td_buf_reset(&file);
		assert_int_equal(td_buf_read_file(&file, fx->path[v]), 0);
		testdata_write_bytes(path, file.data, file.len);
		fd = open(path, O_WRONLY);
		assert_true(fd >= 0);
		for (i = 0; i < 1500; i++) {
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
			/* half the flips in the first 4 KiB: the headers */
			pos = (s >> 33) % (i % 2 ? file.len : 4096);
			c = file.data[pos] ^ (uint8_t)(1u << ((s >> 20) & 7));
			assert_int_equal(pwrite(fd, &c, 1, (off_t)pos), 1);
			testdata_exercise(path);
			assert_int_equal(pwrite(fd, file.data + pos, 1,
			    (off_t)pos), 1);
		}
		close(fd);
		assert_int_equal(testdata_exercise(path), 0);
	}
	unlink(path);
	free(path);
	td_buf_free(&file);
}

/* Big-endian files and option lists that loop, built by hand. */
static void
put_be(struct td_buf *b, uint64_t v, int n)
{
	uint8_t c[8];
	int i;

	for (i = 0; i < n; i++)
		c[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	assert_int_equal(td_buf_add(b, c, n), 0);
}

static void
build_be(struct td_buf *f, uint64_t next)
{
	uint64_t opts;

	td_buf_reset(f);
	td_buf_add(f, "\027\010\104tracing", 10);
	td_buf_add(f, "7", 2);
	td_buf_add(f, (uint8_t[]){ 1, 8 }, 2);
	put_be(f, PS, 4);
	td_buf_add(f, "none", 5);
	td_buf_add(f, "", 1);
	opts = f->len + 8;
	put_be(f, opts, 8);
	/* options section: CPUCOUNT 2, UNAME, DONE */
	put_be(f, 0, 2);
	put_be(f, 0, 2);
	put_be(f, 0xffffffff, 4);
	put_be(f, 6 + 4 + 6 + 6 + 6 + 8, 8);
	put_be(f, TD_OPT_CPUCOUNT, 2);
	put_be(f, 4, 4);
	put_be(f, 2, 4);
	put_be(f, TD_OPT_UNAME, 2);
	put_be(f, 6, 4);
	td_buf_add(f, "BEbox", 6);
	put_be(f, TD_OPT_DONE, 2);
	put_be(f, 8, 4);
	put_be(f, next == 1 ? opts : next, 8);
}

static void
test_handmade(void **state)
{
	struct td_buf f, b;
	struct td_read *r;
	char *path = fx_path("be.dat");
	int calls = 0;

	td_buf_init(&f, 4096);
	td_buf_init(&b, 4096);
	build_be(&f, 0);
	testdata_write_bytes(path, f.data, f.len);
	r = td_read_open(path);
	assert_non_null(r);
	assert_int_equal(td_read_version(r), 7);
	assert_int_equal(td_read_page_size(r), PS);
	assert_int_equal(td_read_ncpus(r), 2);
	assert_string_equal(td_read_clock(r), "");
	assert_int_equal(td_read_option(r, TD_OPT_UNAME, 0, &b), 0);
	assert_string_equal((char *)b.data, "BEbox");
	assert_int_equal(td_read_cpu_pages(r, 1, stop_cb, &calls), 0);
	assert_int_equal(calls, 0);
	errno = 0;
	assert_int_equal(td_read_section(r, TD_OPT_PRINTK, &b), -1);
	assert_int_equal(errno, ENOENT);
	td_read_close(r);

	/* DONE pointing back at its own section */
	build_be(&f, 1);
	testdata_write_bytes(path, f.data, f.len);
	errno = 0;
	assert_null(td_read_open(path));
	assert_int_equal(errno, EBADMSG);

	/* DONE pointing past the end */
	build_be(&f, 1ULL << 40);
	testdata_write_bytes(path, f.data, f.len);
	errno = 0;
	assert_null(td_read_open(path));
	assert_int_equal(errno, EBADMSG);

	/* unknown version and codec */
	build_be(&f, 0);
	f.data[10] = '8';
	testdata_write_bytes(path, f.data, f.len);
	errno = 0;
	assert_null(td_read_open(path));
	assert_int_equal(errno, EOPNOTSUPP);
	build_be(&f, 0);
	memcpy(f.data + 18, "lz4\0", 4);
	testdata_write_bytes(path, f.data, f.len);
	errno = 0;
	assert_null(td_read_open(path));
	assert_int_equal(errno, EOPNOTSUPP);

	unlink(path);
	free(path);
	td_buf_free(&f);
	td_buf_free(&b);
}

/*
 * A section copied as it is stored (rotate.c's cut): td_read_section_span()
 * and td_read_bytes() in odd pieces into td_file_section_raw_*() for a
 * compressed block, td_file_section_begin/write/end otherwise; the copy
 * reads back the same as the original, in every variant.
 */
static void
test_section_span_copy(void **state)
{
	struct td_read *src, *dst;
	struct td_file *f;
	struct td_buf a, b;
	uint8_t piece[1000];
	uint64_t off, n, k;
	char *path;
	bool z;
	int v, id;

	(void)state;
	td_buf_init(&a, OUT_CAP);
	td_buf_init(&b, OUT_CAP);
	for (v = 0; v < NVARIANTS; v++) {
		src = td_read_open(fx->path[v]);
		assert_non_null(src);
		f = new_writer(variants[v].version, variants[v].codec,
		    (int)td_read_ncpus(src));
		assert_non_null(f);
		for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
			assert_int_equal(td_read_section_span(src, id, &off,
			    &n, &z), 0);
			assert_true(z == (variants[v].codec != TD_CODEC_NONE));
			assert_int_equal(z ? td_file_section_raw_begin(f, id) :
			    td_file_section_begin(f, id), 0);
			for (; n > 0; off += k, n -= k) {
				k = n < sizeof piece ? n : sizeof piece;
				assert_int_equal(td_read_bytes(src, off, piece,
				    k), 0);
				assert_int_equal(z ?
				    td_file_section_raw_write(f, piece, k) :
				    td_file_section_write(f, piece, k), 0);
			}
			assert_int_equal(z ? td_file_section_raw_end(f) :
			    td_file_section_end(f), 0);
		}
		assert_int_equal(td_file_finish(f), 0);
		td_file_free(f);
		path = fx_path("t.dat");
		dst = td_read_open(path);
		assert_non_null(dst);
		for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
			assert_int_equal(td_read_section(src, id, &a), 0);
			assert_int_equal(td_read_section(dst, id, &b), 0);
			assert_int_equal(a.len, b.len);
			assert_memory_equal(a.data, b.data, a.len);
		}
		/* past the end of the file, and no such section */
		assert_int_equal(td_read_bytes(dst, UINT64_MAX - 4, piece, 8),
		    -1);
		assert_int_equal(td_read_section_span(dst, TD_OPT_STRINGS,
		    &off, &n, &z), -1);
		td_read_close(dst);
		td_read_close(src);
		unlink(path);
		free(path);
	}
	td_buf_free(&a);
	td_buf_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_libtracecmd),
		cmocka_unit_test(test_tdread_identical),
		cmocka_unit_test(test_tdread_stop),
		cmocka_unit_test(test_trace_cmd),
		cmocka_unit_test(test_trace_cmd_convert),
		cmocka_unit_test(test_errors_params),
		cmocka_unit_test(test_errors_order),
		cmocka_unit_test(test_errors_abort),
		cmocka_unit_test(test_errors_unwritable),
		cmocka_unit_test(test_unnamed_spools),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_writer_streaming),
		cmocka_unit_test(test_checkpoint),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_options_side_file),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bitflips),
		cmocka_unit_test(test_handmade),
		cmocka_unit_test(test_section_span_copy),
	};

	return cmocka_run_group_tests_name("tdfile", tests, group_setup,
	    group_teardown);
}
