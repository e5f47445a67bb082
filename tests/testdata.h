/*
 * testdata.h: building blocks of the unit tests, no privileges needed.
 *
 * Pages: a small builder that lays out valid ring-buffer sub-buffers event
 * by event, with the header format this machine's kernel declares (captured
 * once into tests/data/header_page and header_event): u64 timestamp, 8-byte
 * commit, data.  The builder keeps the running timestamp the way the
 * kernel's and libtraceevent's readers compute it, so tests know the exact
 * count and timestamp of every event.
 *
 * Recordings: a deterministic synthetic recording of raw_syscalls and
 * ftrace:print events on a few CPUs, written through the tdfile writer
 * with the real metadata texts of tests/data/, pages handed over
 * interleaved across CPUs as a live recorder would.  The expected events
 * (count and timestamps per CPU) and the exact metadata are kept so files
 * can be checked with libtracecmd, trace-cmd and tdread.
 *
 * Oracles: checks of a file by libtracecmd, by the trace-cmd command (run
 * with popen, unprivileged) and a driver of every tdread call for damaged
 * files, shared by the tests that write trace.dat files.
 *
 * Data files are found under $TD_SRCDIR/tests/data (set by make check),
 * else ./tests/data.  Helpers abort the test on a missing data file.
 */
#ifndef TD_TESTDATA_H
#define TD_TESTDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "compress.h"

struct td_file;

#define TESTDATA_PAGE_SIZE	4096
#define TESTDATA_MAX_CPUS	8
/* Largest delta an event header holds (27 bits). */
#define TESTDATA_MAX_DELTA	((1u << 27) - 1)

/* Ring-buffer event types of header_event. */
#define TESTDATA_RB_PADDING	29
#define TESTDATA_RB_EXTEND	30
#define TESTDATA_RB_STAMP	31

/* A page being built in caller memory. */
struct testdata_page {
	uint8_t		*data;		/* size bytes */
	size_t		 size;
	size_t		 len;		/* bytes of event data so far */
	uint64_t	 ts;		/* running timestamp */
	unsigned int	 events;	/* data events so far */
};

/* Read tests/data/<name> into out (appending); fails the test if absent. */
void	testdata_read(const char *name, struct td_buf *out);
/* Event ID from the "ID: n" line of a format file of tests/data/. */
int	testdata_event_id(const char *name);

/* Start an empty page in buf (size bytes) whose header time is ts. */
void	testdata_page_init(struct testdata_page *p, void *buf, size_t size,
	    uint64_t ts);
/* Room left for event data (the commit field stays in the header). */
size_t	testdata_page_room(const struct testdata_page *p);
/*
 * Append a data event of type_len 1..28 (payload of type_len words) or 0
 * (payload of any length, array[0] = its aligned length + 4).  The payload
 * is copied, zero-padded to a word.  -1 if it does not fit.
 */
int	testdata_page_event(struct testdata_page *p, unsigned int type_len,
	    uint32_t delta, const void *payload, size_t plen);
/* Append a time extend (type 30) adding delta (up to 59 bits). */
int	testdata_page_extend(struct testdata_page *p, uint64_t delta);
/* Append an absolute time stamp (type 31) setting the time to ts. */
int	testdata_page_stamp(struct testdata_page *p, uint64_t ts);
/*
 * Append padding (type 29) of len bytes (at least 8); a zero delta marks
 * the rest of the page as empty, as the kernel does at the end of a page.
 */
int	testdata_page_padding(struct testdata_page *p, uint32_t delta,
	    size_t len);
/*
 * Append a data event at absolute time ts (>= the running time), adding a
 * time extend when the delta needs more than 27 bits and choosing type_len
 * as the kernel does (type 0 beyond 112 bytes).  -1 if it does not fit.
 */
int	testdata_page_add(struct testdata_page *p, uint64_t ts,
	    const void *payload, size_t plen);
/*
 * Write the commit field: data length, plus the missed-events flag and, if
 * stored, the count of missed events after the data.  -1 if the count does
 * not fit.
 */
int	testdata_page_finish(struct testdata_page *p, bool missed,
	    bool stored, uint64_t count);

/* Events expected from a synthetic recording. */
struct testdata_expect {
	int		 ncpus;
	uint64_t	 pages[TESTDATA_MAX_CPUS];
	uint64_t	 events[TESTDATA_MAX_CPUS];
	uint64_t	*ts[TESTDATA_MAX_CPUS];	/* per event, in order */
	uint64_t	 total;
};

/* What to record; pages[cpu] may be 0 for a CPU without data. */
struct testdata_plan {
	int		 version;
	enum td_codec_id codec;
	int		 ncpus;
	unsigned int	 pages[TESTDATA_MAX_CPUS];
	const char	*clock;
};

/* The metadata section contents a recording is written with. */
struct testdata_meta {
	struct td_buf	 header_info;
	struct td_buf	 ftrace_events;
	struct td_buf	 event_formats;
	struct td_buf	 kallsyms;
	struct td_buf	 printk;
	struct td_buf	 cmdlines;
	int		 id_enter;
	int		 id_exit;
	int		 id_print;
};

/* Build the metadata sections from tests/data/; free with _meta_free. */
void	testdata_meta_init(struct testdata_meta *m);
void	testdata_meta_free(struct testdata_meta *m);
/* The content of a metadata section by id (TD_OPT_HEADER_INFO...). */
const struct td_buf *testdata_meta_section(const struct testdata_meta *m,
	    int id);

/*
 * Build page n of a CPU of the synthetic recording into buf
 * (TESTDATA_PAGE_SIZE bytes); append the timestamps of its events to exp
 * when exp is not NULL.  Deterministic: the same (cpu, n) gives the same
 * bytes.
 */
void	testdata_cpu_page(const struct testdata_meta *m, int cpu,
	    unsigned int n, void *buf, struct testdata_expect *exp);

/*
 * Write a complete synthetic trace.dat at path with the writer: metadata
 * sections, options UNAME, TRACECLOCK and one CPUSTAT per CPU, and the pages
 * of the plan handed over round-robin across CPUs.  Fills exp (free with
 * testdata_expect_free).  Returns 0 or -1 with errno from the writer.
 */
int	testdata_write_file(const char *path, const struct testdata_plan *plan,
	    const struct testdata_meta *m, struct testdata_expect *exp);
void	testdata_expect_free(struct testdata_expect *exp);
/* The options testdata_write_file() queues before finishing. */
int	testdata_options(struct td_file *f, const struct testdata_plan *plan,
	    const struct testdata_expect *exp);

/*
 * Oracles.  Each fails the running test with a message on a mismatch.
 */
/* libtracecmd reads exactly the expected events, per CPU and merged. */
void	testdata_check_libtracecmd(const char *path,
	    const struct testdata_expect *exp, const struct testdata_meta *m);
/* Whether trace-cmd is installed (tests using it skip otherwise). */
bool	testdata_have_trace_cmd(void);
/* Run "trace-cmd ARGS -i PATH": stdout to out, stderr to err; exit 0. */
void	testdata_trace_cmd(const char *args, const char *path,
	    struct td_buf *out, struct td_buf *err);
/* No "warning", "error" or "unknown" in trace-cmd's stderr. */
void	testdata_assert_quiet(const struct td_buf *err);
/* want occurs in trace-cmd's output. */
void	testdata_assert_has(const struct td_buf *out, const char *want);
/* trace-cmd report prints one line per expected event, right CPUs. */
void	testdata_check_report(const char *path,
	    const struct testdata_expect *exp);
/*
 * trace-cmd dump --summary of a synthetic file: version, metadata, buffer
 * (clock, CPUs with data) and option counts (noptions: caller's options).
 */
void	testdata_check_dump(const char *path, int version, int ncpus,
	    int cpus_with_data, unsigned int noptions, const char *clock);
/* trace-cmd dump --sections names every section of a v7 file. */
void	testdata_check_sections(const char *path);
/*
 * Use every tdread call on a file; return how many failed (1 if the open
 * did).  A failure with another errno than a reader's fails the test.
 */
int	testdata_exercise(const char *path);
/* Write n bytes as the whole file at path. */
void	testdata_write_bytes(const char *path, const void *p, size_t n);

/* Make a fresh private directory for test files; free the result. */
char	*testdata_tmpdir(void);
/* Remove a directory made by testdata_tmpdir() and the files in it. */
void	testdata_rmdir(const char *dir);

#endif
