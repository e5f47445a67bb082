/*
 * test-recording.c: one recording on the collection box
 * (listener/recording/recording.c) and tdlisten --rotate / --keep's policy
 * (listener/recording/rotate.c), driven as a producer drives them: real
 * sections (tests/data's texts) and real ring-buffer pages (tests/testdata.c),
 * the real writer, checkpoints, registry and budget; nothing faked.
 *
 *   - open, sections, pages, finish: the file is in place under
 *     DIR/<identity>/, libtracecmd reads exactly the events written, per
 *     CPU and merged; a page out of sequence or for an undeclared CPU is
 *     the producer's fault and leaves what was taken intact;
 *   - a recording left at a checkpoint (tdlisten stops) is recovered by
 *     the next start at that position, taken up by a producer and
 *     finished with every page;
 *   - --rotate and --keep's values parse as the man page says, piece
 *     names are NAME-NNNN.dat;
 *   - a recording under --rotate 1M is cut into pieces -0001, -0002 ...
 *     each a whole file, every page in exactly one; --keep 2 removes
 *     this recording's older pieces and nothing else, even names that
 *     look like pieces of another recording; a rotated recording left by
 *     a stopping tdlisten is taken up in the piece it was writing.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "finished.h"
#include "listener.h"
#include "recording.h"
#include "registry.h"
#include "rotate.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "testdata.h"
#include "testlisten.h"

#define NCPUS		2
#define IDENTITY	"web1"

static struct testlisten *tl;
static int taken;

static void
taken_cb(void *arg)
{
	(void)arg;
	taken++;
}

/* tdlisten's settings, as fuzz-session has them. */
static void
config(uint64_t rotate_bytes, uint32_t keep_n)
{
	testlisten_config();
	tl->cfg.resume_wait = 600;
	tl->cfg.rotate_bytes = rotate_bytes;
	tl->cfg.keep_n = keep_n;
	/* pieces of a size known in advance: pages stored as they are */
	if (rotate_bytes > 0)
		tl->cfg.codec = TD_CODEC_NONE;
}

static struct recording *
open_rec(uint64_t rid)
{
	struct recording_params p;
	enum recording_fault fault;
	struct recording *r;
	char err[512] = "";

	memset(&p, 0, sizeof p);
	snprintf(p.identity, sizeof p.identity, IDENTITY);
	snprintf(p.clock, sizeof p.clock, "local");
	p.recording_id = rid;
	p.file_trace_id = 0xabc0 + rid;
	p.ncpus = NCPUS;
	p.page_size = TESTDATA_PAGE_SIZE;
	p.long_size = 8;
	p.commit_size = 8;
	p.pieces = 1;
	r = recording_open(&tl->cfg, &p, IDENTITY, taken_cb, NULL, 1, err,
	    sizeof err, &fault);
	if (r == NULL)
		fail_msg("recording_open: %s", err);
	assert_ptr_equal(registry_find(IDENTITY, rid), r);
	return r;
}

static void
sections(struct recording *r)
{
	const struct td_buf *b;
	int id;

	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		b = testdata_meta_section(&tl->meta, id);
		assert_int_equal(recording_section_begin(r, (uint16_t)id), 0);
		/* in two pieces, as frames bring them */
		assert_int_equal(recording_section_write(r, b->data,
		    b->len / 2), 0);
		assert_int_equal(recording_section_write(r, b->data +
		    b->len / 2, b->len - b->len / 2), 0);
		assert_int_equal(recording_section_end(r), 0);
		recording_advance(r, b->len + 64);
	}
}

/*
 * Pages from..to-1 of every CPU, interleaved, a checkpoint tried after
 * each round (every 8 with ck_every 8; 0: never).
 */
static void
pages(struct recording *r, unsigned int from, unsigned int to,
    struct testdata_expect *exp, unsigned int ck_every)
{
	uint8_t page[TESTDATA_PAGE_SIZE];
	uint64_t acked;
	unsigned int n;
	int cpu;

	for (n = from; n < to; n++) {
		for (cpu = 0; cpu < NCPUS; cpu++) {
			testdata_cpu_page(&tl->meta, cpu, n, page, exp);
			exp->pages[cpu]++;
			assert_int_equal(recording_pages_begin(r,
			    (uint32_t)cpu, n), 0);
			assert_int_equal(recording_page(r, (uint32_t)cpu,
			    page), 0);
			recording_advance(r, sizeof page + 32);
		}
		if (ck_every > 0 && (n + 1) % ck_every == 0) {
			assert_int_equal(recording_checkpoint(r, &acked), 0);
			assert_int_equal(acked, recording_position(r));
		}
	}
}

static void
finish(struct recording *r, unsigned int npages, struct finished *fin)
{
	uint64_t sent[NCPUS];
	int cpu;

	for (cpu = 0; cpu < NCPUS; cpu++)
		sent[cpu] = npages;
	testlisten_finish(r, sent, NCPUS, fin);
}

/* Open, add, finish: libtracecmd reads exactly what was written. */
static void
test_open_add_finish(void **unused)
{
	struct testdata_expect exp;
	struct recording *r;
	struct finished fin;
	struct stat st;
	uint8_t page[TESTDATA_PAGE_SIZE];
	uint64_t pos;
	char *path;

	(void)unused;
	config(0, 0);
	memset(&exp, 0, sizeof exp);
	exp.ncpus = NCPUS;
	r = open_rec(1);
	sections(r);
	pages(r, 0, 40, &exp, 8);
	assert_int_equal(recording_pages(r), 80);
	/* the producer's faults: refused, nothing taken */
	pos = recording_position(r);
	testdata_cpu_page(&tl->meta, 0, 40, page, NULL);
	assert_int_equal(recording_pages_begin(r, 0, 41), -1);
	assert_int_equal(recording_fault(r), REC_INPUT);
	assert_int_equal(recording_pages_begin(r, NCPUS, 40), -1);
	assert_int_equal(recording_fault(r), REC_INPUT);
	assert_int_equal(recording_page(r, NCPUS, page), -1);
	assert_int_equal(recording_pages(r), 80);
	assert_int_equal(recording_position(r), pos);
	pages(r, 40, 50, &exp, 0);
	finish(r, 50, &fin);
	assert_null(registry_find(IDENTITY, 1));
	assert_string_equal(fin.identity, IDENTITY);
	assert_int_equal(fin.recording_id, 1);
	assert_int_equal(strncmp(fin.path, IDENTITY "/", 5), 0);
	path = testlisten_path(fin.path);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal((uint64_t)st.st_size, fin.size);
	assert_int_equal(exp.pages[0], 50);
	testdata_check_libtracecmd(path, &exp, &tl->meta);
	assert_int_equal(taken, 0);
	unlink(path);
	free(path);
	testdata_expect_free(&exp);
}

/* Left at a checkpoint, recovered by the next start, finished whole. */
static void
test_recover(void **unused)
{
	struct testdata_expect exp;
	struct recording *r;
	struct finished fin;
	char err[256] = "";
	char *path;
	uint64_t acked;
	int cpu;

	(void)unused;
	config(0, 0);
	memset(&exp, 0, sizeof exp);
	exp.ncpus = NCPUS;
	r = open_rec(2);
	sections(r);
	pages(r, 0, 16, &exp, 8);
	acked = recording_acked(r);
	assert_int_equal(acked, recording_position(r));
	/* tdlisten stops: left on disk at the checkpoint; it starts again */
	recording_leave_all();
	assert_null(registry_find(IDENTITY, 2));
	recording_recover_all(&tl->cfg);
	r = registry_find(IDENTITY, 2);
	assert_non_null(r);
	assert_false(recording_owned(r));
	assert_int_equal(recording_position(r), acked);
	assert_int_equal(recording_pages(r), 32);
	assert_int_equal(recording_attach(r, IDENTITY, taken_cb, NULL, err,
	    sizeof err), 0);
	/* the producer resends from there: pages 16 on */
	pages(r, 16, 24, &exp, 8);
	finish(r, 24, &fin);
	path = testlisten_path(fin.path);
	for (cpu = 0; cpu < NCPUS; cpu++)
		assert_int_equal(exp.pages[cpu], 24);
	testdata_check_libtracecmd(path, &exp, &tl->meta);
	unlink(path);
	free(path);
	testdata_expect_free(&exp);
}

/* --rotate's and --keep's values; piece names. */
static void
test_rotate_parse(void **unused)
{
	uint64_t bytes;
	uint32_t secs, n;
	size_t base;
	char err[256];

	(void)unused;
	assert_int_equal(rotate_parse("10M", &bytes, &secs, err,
	    sizeof err), 0);
	assert_int_equal(bytes, 10 << 20);
	assert_int_equal(secs, 0);
	assert_int_equal(rotate_parse("10m", &bytes, &secs, err,
	    sizeof err), 0);
	assert_int_equal(secs, 600);
	assert_int_equal(bytes, 0);
	assert_int_equal(rotate_parse("2h", &bytes, &secs, err, sizeof err),
	    0);
	assert_int_equal(secs, 7200);
	assert_int_equal(rotate_parse("1G", &bytes, &secs, err, sizeof err),
	    0);
	assert_int_equal(bytes, 1ull << 30);
	/* below TD_ROTATE_MIN_SIZE, no number, an unknown unit */
	assert_int_equal(rotate_parse("1K", &bytes, &secs, err, sizeof err),
	    -1);
	assert_int_equal(rotate_parse("M", &bytes, &secs, err, sizeof err),
	    -1);
	assert_int_equal(rotate_parse("5x", &bytes, &secs, err, sizeof err),
	    -1);
	assert_int_equal(rotate_parse_keep("3", &n, &bytes, err, sizeof err),
	    0);
	assert_int_equal(n, 3);
	assert_int_equal(bytes, 0);
	assert_int_equal(rotate_parse_keep("5M", &n, &bytes, err,
	    sizeof err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(bytes, 5 << 20);
	assert_int_equal(rotate_parse_keep("x", &n, &bytes, err, sizeof err),
	    -1);
	assert_int_equal(rotate_piece("/d/web1/web1-20260101-0001.dat",
	    &base), 1);
	assert_int_equal(base, strlen("/d/web1/web1-20260101"));
	assert_int_equal(rotate_piece("a-0042.dat", &base), 42);
	assert_int_equal(rotate_piece("a-12345.dat", &base), 12345);
	assert_int_equal(base, 1);
	assert_int_equal(rotate_piece("a-042.dat", &base), 0);
	assert_int_equal(rotate_piece("a-0001.incomplete.dat", &base), 0);
	assert_int_equal(rotate_piece("a-0000.dat", &base), 0);
	assert_int_equal(rotate_piece("a.dat", &base), 0);
}

static int
page_cb(void *arg, const void *page, size_t len)
{
	uint64_t *n = arg;

	(void)page;
	(void)len;
	(*n)++;
	return 0;
}

/* Piece k of base (base-NNNN.dat): its pages added to got[cpu]; removed. */
static void
piece_pages(const char *base, uint32_t k, uint64_t *got)
{
	struct td_read *rd;
	char *p;
	int cpu;

	assert_true(asprintf(&p, "%s-%04u.dat", base, k) > 0);
	assert_non_null(rd = td_read_open(p));
	for (cpu = 0; cpu < NCPUS; cpu++)
		assert_int_equal(td_read_cpu_pages(rd, cpu, page_cb,
		    &got[cpu]), 0);
	td_read_close(rd);
	unlink(p);
	free(p);
}

/* Pieces of base (base-NNNN.dat) in dir, n[k] set for piece k (< 64). */
static int
list_pieces(const char *dir, const char *base, bool *have)
{
	struct dirent *d;
	size_t bl = strlen(base), b;
	uint32_t k;
	int count = 0;
	DIR *dp = opendir(dir);
	char *p;

	assert_non_null(dp);
	memset(have, 0, 64 * sizeof *have);
	while ((d = readdir(dp)) != NULL) {
		assert_true(asprintf(&p, "%s/%s", dir, d->d_name) > 0);
		k = rotate_piece(p, &b);
		if (k > 0 && b == bl && strncmp(p, base, bl) == 0) {
			assert_true(k < 64);
			have[k] = true;
			count++;
		}
		free(p);
	}
	closedir(dp);
	return count;
}

/* One rotated recording of n pages per CPU; returns the last piece's k. */
static uint32_t
rotated(uint64_t rid, unsigned int npages, char *base, size_t baselen,
    struct testdata_expect *exp)
{
	struct recording *r;
	struct finished fin;
	uint32_t last;
	size_t bl;
	char *path;

	memset(exp, 0, sizeof *exp);
	exp->ncpus = NCPUS;
	r = open_rec(rid);
	/* output.c names the first piece so under --rotate */
	assert_int_equal(rotate_piece(recording_path(r), &bl), 1);
	snprintf(base, baselen, "%.*s", (int)bl, recording_path(r));
	sections(r);
	pages(r, 0, npages, exp, 8);
	finish(r, npages, &fin);
	path = testlisten_path(fin.path);
	last = rotate_piece(path, &bl);
	free(path);
	return last;
}

/*
 * Recovery under --rotate: tdlisten stops after two cuts; the next start
 * takes the recording up in its third piece, which goes on as its name
 * says (-0003), and the pieces together hold every page once.
 */
static void
test_rotate_recover(void **unused)
{
	struct testdata_expect exp;
	uint64_t got[NCPUS] = { 0, 0 };
	struct recording *r;
	struct finished fin;
	char base[1024], err[256] = "", *p;
	uint32_t last, k;
	size_t bl;
	int cpu;

	(void)unused;
	config(TD_ROTATE_MIN_SIZE, 0);
	memset(&exp, 0, sizeof exp);
	exp.ncpus = NCPUS;
	r = open_rec(6);
	assert_int_equal(rotate_piece(recording_path(r), &bl), 1);
	snprintf(base, sizeof base, "%.*s", (int)bl, recording_path(r));
	sections(r);
	/* 2 x 300 pages: two cuts (1 MiB each), the third piece begun */
	pages(r, 0, 300, &exp, 8);
	assert_int_equal(rotate_piece(recording_path(r), &bl), 3);
	recording_leave_all();
	recording_recover_all(&tl->cfg);
	r = registry_find(IDENTITY, 6);
	assert_non_null(r);
	assert_int_equal(rotate_piece(recording_path(r), &bl), 3);
	assert_int_equal(strncmp(recording_path(r), base, bl), 0);
	assert_int_equal(recording_pages(r), 600);
	assert_int_equal(recording_attach(r, IDENTITY, taken_cb, NULL, err,
	    sizeof err), 0);
	pages(r, 300, 400, &exp, 8);
	finish(r, 400, &fin);
	p = testlisten_path(fin.path);
	last = rotate_piece(p, &bl);
	free(p);
	assert_int_equal(last, 3);
	for (k = 1; k <= last; k++)
		piece_pages(base, k, got);
	for (cpu = 0; cpu < NCPUS; cpu++)
		assert_int_equal(got[cpu], 400);
	testdata_expect_free(&exp);
}

/* --rotate 1M: pieces, each whole, every page in exactly one. */
static void
test_rotate_pieces(void **unused)
{
	struct testdata_expect exp;
	uint64_t got[NCPUS] = { 0, 0 };
	char base[1024], dir[1024], *p;
	struct stat st;
	bool have[64];
	uint32_t last, k;
	int cpu, n;

	(void)unused;
	config(TD_ROTATE_MIN_SIZE, 0);
	/*
	 * 2 x 400 pages of 4 KiB: 3.3 MB, cut at the first checkpoint
	 * (every 16 pages) past 1 MiB: two pieces of 1 MiB and a bit, the
	 * rest in the third
	 */
	last = rotated(3, 400, base, sizeof base, &exp);
	assert_int_equal(last, 3);
	snprintf(dir, sizeof dir, "%s", base);
	*strrchr(dir, '/') = '\0';
	n = list_pieces(dir, base, have);
	assert_int_equal(n, (int)last);
	for (k = 1; k <= last; k++) {
		assert_true(have[k]);
		assert_true(asprintf(&p, "%s-%04u.dat", base, k) > 0);
		assert_int_equal(stat(p, &st), 0);
		assert_true(k == last || (st.st_size >= TD_ROTATE_MIN_SIZE &&
		    st.st_size < TD_ROTATE_MIN_SIZE + 128 * 1024));
		free(p);
		piece_pages(base, k, got);
	}
	for (cpu = 0; cpu < NCPUS; cpu++)
		assert_int_equal(got[cpu], 400);
	testdata_expect_free(&exp);
}

/* --keep 2: this recording's two newest pieces stay, nothing else goes. */
static void
test_keep(void **unused)
{
	/* after the base: a longer base, another recording's, no piece */
	static const char *const others[] = { "-x-0001.dat", "0-0001.dat",
	    ".incomplete.dat" };
	struct testdata_expect exp;
	char base[1024], dir[1024], *p, *decoy[4];
	bool have[64];
	uint32_t last, k;
	size_t i;
	FILE *f;

	(void)unused;
	/* the decoys need the base name: a first recording gives it */
	config(TD_ROTATE_MIN_SIZE, 2);
	last = rotated(4, 400, base, sizeof base, &exp);
	testdata_expect_free(&exp);
	assert_true(last >= 3);
	snprintf(dir, sizeof dir, "%s", base);
	*strrchr(dir, '/') = '\0';
	assert_int_equal(list_pieces(dir, base, have), 2);
	assert_true(have[last] && have[last - 1]);
	/* another recording's names beside it, then one more recording */
	for (i = 0; i < sizeof others / sizeof *others; i++) {
		assert_true(asprintf(&decoy[i], "%s%s", base, others[i]) > 0);
		f = fopen(decoy[i], "w");
		assert_non_null(f);
		fputs("not a piece of this recording\n", f);
		fclose(f);
	}
	/* a piece of another recording of this identity, older numbers */
	assert_true(asprintf(&decoy[3], "%s/%s-19990101-000000-0001.dat",
	    dir, IDENTITY) > 0);
	f = fopen(decoy[3], "w");
	assert_non_null(f);
	fclose(f);
	last = rotated(5, 400, base, sizeof base, &exp);
	testdata_expect_free(&exp);
	assert_int_equal(list_pieces(dir, base, have), 2);
	assert_true(have[last] && have[last - 1]);
	for (i = 0; i < 4; i++) {
		assert_int_equal(access(decoy[i], F_OK), 0);
		unlink(decoy[i]);
		free(decoy[i]);
	}
	for (k = last - 1; k <= last; k++) {
		assert_true(asprintf(&p, "%s-%04u.dat", base, k) > 0);
		unlink(p);
		free(p);
	}
}

static int
setup(void **unused)
{
	(void)unused;
	tl = testlisten_setup("test-recording");
	/* --rotate, --keep and a cut's recovery: as tdlisten.c gives it */
	recording_set_policy(&rotate_policy);
	return tl == NULL ? -1 : 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_add_finish),
		cmocka_unit_test(test_recover),
		cmocka_unit_test(test_rotate_parse),
		cmocka_unit_test(test_rotate_pieces),
		cmocka_unit_test(test_keep),
		cmocka_unit_test(test_rotate_recover),
	};

	return cmocka_run_group_tests(tests, setup, testlisten_teardown);
}
