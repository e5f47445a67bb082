/*
 * fuzz-tdread.c: libFuzzer target for the trace.dat reader (shared/tdread.c),
 * which reads files from disk that may be damaged or hostile.
 *
 * The input is a whole file.  It is written to a memfd, opened through
 * /proc/self/fd/N with td_read_open(), and then every call of tdread.h is
 * made: the accessors, td_read_section() for every id (the valid ones and a
 * few invalid ones), td_read_option() for every option id (0..23 and
 * tracedock's TD_OPT_TD_TSYNC) with nth 0..3,
 * and td_read_cpu_pages() for every CPU and for the CPUs just out of range.
 * Output buffers carry the caps of shared/tdlimits.h, as a real caller's
 * would.  Properties:
 *
 *   - a failed call sets errno to one of the reader's errors (EBADMSG,
 *     ENOENT, EINVAL, EOPNOTSUPP, ENOBUFS, ENOMEM) and leaves out empty;
 *   - accessors return what tdread.h promises (version 6 or 7, long size
 *     4 or 8, page size within the limits, 1..TD_MAX_CPUS CPUs);
 *   - a page walk hands out pages of page_size bytes, except perhaps a
 *     short last one, never an empty one; an uncompressed CPU gives exactly
 *     the bytes the file declares for it.
 *
 * Memory is bounded by the caps (TD_MAX_SECTION_SIZE for one section or
 * options section, TD_MAX_CHUNK_SIZE for a chunk); run with -rss_limit_mb=2048.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "page.h"
#include "tdlimits.h"
#include "tdread.h"
#include "fuzz.h"

static int memfd = -1;
static char memfd_path[64];

static bool
reader_errno(int e)
{
	return e == EBADMSG || e == ENOENT || e == EINVAL || e == EOPNOTSUPP ||
	    e == ENOBUFS || e == ENOMEM;
}

/* State of one page walk. */
struct walk {
	uint32_t	 page_size;
	int		 commit;
	uint64_t	 pages;
	uint64_t	 bytes;
	bool		 short_seen;
	uint64_t	 sum;
};

static int
walk_cb(void *arg, const void *page, size_t len)
{
	struct walk *w = arg;
	const uint8_t *p = page;
	struct td_page_info info;

	FUZZ_CHECK(len >= 1 && len <= w->page_size);
	FUZZ_CHECK(!w->short_seen);	/* only the last page may be short */
	if (len < w->page_size)
		w->short_seen = true;
	/* touch both ends: ASan checks the whole page is really there */
	w->sum += p[0] + p[len - 1];
	if (len == w->page_size)
		(void)td_page_parse(page, len, w->commit, &info);
	w->pages++;
	w->bytes += len;
	return 0;
}

static void
exercise(struct td_read *r)
{
	static const int bad_sections[] = { -1, 0, 3, 14, 22, 23, 1000 };
	/* every id trace-cmd or tracedock writes, and one past them */
	static const int opt_ids[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
	    12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, TD_OPT_TD_TSYNC };
	struct td_buf out;
	struct walk w;
	enum td_codec_id codec;
	const char *clock;
	uint64_t size;
	int version, ncpus, cpu, id, nth, ret;
	size_t i;

	version = td_read_version(r);
	FUZZ_CHECK(version == 6 || version == 7);
	codec = td_read_codec(r);
	FUZZ_CHECK(codec == TD_CODEC_NONE || codec == TD_CODEC_ZSTD ||
	    codec == TD_CODEC_ZLIB);
	FUZZ_CHECK(version == 7 || codec == TD_CODEC_NONE);
	FUZZ_CHECK(td_read_page_size(r) >= TD_MIN_PAGE_SIZE &&
	    td_read_page_size(r) <= TD_MAX_PAGE_SIZE);
	FUZZ_CHECK(td_read_long_size(r) == 4 || td_read_long_size(r) == 8);
	ncpus = td_read_ncpus(r);
	FUZZ_CHECK(ncpus >= 1 && ncpus <= TD_MAX_CPUS);
	clock = td_read_clock(r);
	FUZZ_CHECK(clock != NULL);
	(void)strlen(clock);

	td_buf_init(&out, TD_MAX_SECTION_SIZE);
	for (id = TD_OPT_STRINGS; id <= TD_OPT_CMDLINES; id++) {
		ret = td_read_section(r, id, &out);
		if (ret == -1) {
			FUZZ_CHECK(reader_errno(errno));
			FUZZ_CHECK(out.len == 0);
		} else
			FUZZ_CHECK(ret == 0);
	}
	for (i = 0; i < sizeof bad_sections / sizeof *bad_sections; i++) {
		FUZZ_CHECK(td_read_section(r, bad_sections[i], &out) == -1);
		FUZZ_CHECK(errno == EINVAL);
	}
	td_buf_free(&out);

	td_buf_init(&out, TD_MAX_OPTION_SIZE);
	for (i = 0; i < sizeof opt_ids / sizeof *opt_ids; i++) {
		id = opt_ids[i];
		for (nth = 0; nth <= 3; nth++) {
			ret = td_read_option(r, id, nth, &out);
			if (ret == -1) {
				FUZZ_CHECK(reader_errno(errno));
				FUZZ_CHECK(out.len == 0);
				if (errno == ENOENT)
					break;	/* no nth + 1 either */
			} else
				FUZZ_CHECK(ret == 0);
		}
	}
	FUZZ_CHECK(td_read_option(r, TD_OPT_DATE, -1, &out) == -1 &&
	    errno == EINVAL);
	td_buf_free(&out);

	for (cpu = -1; cpu <= ncpus; cpu++) {
		memset(&w, 0, sizeof w);
		w.page_size = td_read_page_size(r);
		w.commit = td_read_long_size(r);
		size = td_read_cpu_size(r, cpu);
		ret = td_read_cpu_pages(r, cpu, walk_cb, &w);
		if (cpu < 0 || cpu >= ncpus) {
			FUZZ_CHECK(ret == -1 && errno == EINVAL);
			FUZZ_CHECK(size == 0);
			continue;
		}
		if (ret == -1) {
			FUZZ_CHECK(reader_errno(errno));
			continue;
		}
		FUZZ_CHECK(ret == 0);
		if (size == 0)
			FUZZ_CHECK(w.pages == 0);
		if (codec == TD_CODEC_NONE)
			FUZZ_CHECK(w.bytes == size);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct td_read *r;
	size_t off = 0;
	ssize_t n;

	if (memfd == -1) {
		memfd = memfd_create("fuzz-tdread", MFD_CLOEXEC);
		FUZZ_CHECK(memfd != -1);
		snprintf(memfd_path, sizeof memfd_path, "/proc/self/fd/%d",
		    memfd);
	}
	FUZZ_CHECK(ftruncate(memfd, 0) == 0);
	while (off < size) {
		n = pwrite(memfd, data + off, size - off, (off_t)off);
		FUZZ_CHECK(n > 0);
		off += (size_t)n;
	}
	r = td_read_open(memfd_path);
	if (r == NULL) {
		if (getenv("FUZZ_VERBOSE") != NULL)
			fprintf(stderr, "tdread: open: %s\n", strerror(errno));
		FUZZ_CHECK(reader_errno(errno));
		return 0;
	}
	if (getenv("FUZZ_VERBOSE") != NULL)
		fprintf(stderr, "tdread: v%d codec %d, %d CPUs, page %u, "
		    "clock '%s'\n", td_read_version(r), (int)td_read_codec(r),
		    td_read_ncpus(r), td_read_page_size(r), td_read_clock(r));
	exercise(r);
	td_read_close(r);
	return 0;
}
