/*
 * test-checkpoint.c: a recording's state on disk
 * (listener/recording/checkpoint.c).
 *
 * The recording is tests/fuzz/ckrec.c's (the one fuzz-restore restores):
 * a real writer at PATH with four checkpoints along the way (each written
 * by checkpoint_write()) and pages after the last that no checkpoint
 * covers.  Each checkpoint read back gives the parameters, counters,
 * per-CPU sequences and samples written, and a writer restored to exactly
 * the pages and sections it had then, which finishes into a file tdread
 * reads with those counts.  A state cut short, with a wrong magic, a page
 * size no HELLO allows, or per-CPU sequences its writer does not hold is
 * refused (EBADMSG), nothing left allocated.
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
#include "checkpoint.h"
#include "guests.h"
#include "log.h"
#include "tdfile.h"
#include "tdproto.h"
#include "tdread.h"
#include "timesync.h"
#include "fuzz/ckrec.h"

static char dir[] = "/tmp/test-checkpoint.XXXXXX";

/* Path of variant v's recording, and its state. */
static void
paths(int v, char *path, char *state, size_t n)
{
	snprintf(path, n, "%s/%s.dat", dir, ckrec_name(v));
	snprintf(state, n, "%s/%s.dat.state", dir, ckrec_name(v));
}

/* Write n bytes of p as file path. */
static void
put(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static int
count_cb(void *arg, const void *page, size_t len)
{
	uint64_t *n = arg;

	(void)page;
	assert_int_equal(len, CKREC_PAGE);
	(*n)++;
	return 0;
}

/* Pages of cpu in the finished file at path. */
static uint64_t
file_pages(const char *path, int cpu)
{
	struct td_read *r = td_read_open(path);
	uint64_t n = 0;

	assert_non_null(r);
	assert_int_equal(td_read_ncpus(r), CKREC_NCPUS);
	assert_int_equal(td_read_page_size(r), CKREC_PAGE);
	assert_int_equal(td_read_cpu_pages(r, cpu, count_cb, &n), 0);
	td_read_close(r);
	return n;
}

/* Read state into ck (a fresh timesync), expecting success. */
static void
read_ok(const char *state, struct checkpoint *ck)
{
	char err[256] = "";

	memset(ck, 0, sizeof *ck);
	ck->ts = timesync_new();
	if (checkpoint_read(state, ck, NULL, err, sizeof err) == -1)
		fail_msg("checkpoint_read '%s': %s", state, err);
}

/* Each checkpoint of each variant restores what it was written with. */
static void
test_write_restore(void **unused)
{
	char path[256], state[256];
	struct ckrec_point pt[CKREC_POINTS];
	struct checkpoint ck;
	uint64_t pages;
	int v, k, i, id;

	(void)unused;
	for (v = 0; v < CKREC_VARIANTS; v++) {
		for (k = 0; k < CKREC_POINTS; k++) {
			paths(v, path, state, sizeof path);
			assert_int_equal(ckrec_make(path, v, pt), 0);
			put(state, pt[k].listener.data, pt[k].listener.len);
			read_ok(state, &ck);
			assert_int_equal(ck.params.ncpus, CKREC_NCPUS);
			assert_int_equal(ck.params.page_size, CKREC_PAGE);
			assert_int_equal(ck.params.long_size, 8);
			assert_int_equal(ck.params.recording_id, 0x1000 + v);
			assert_int_equal(ck.params.file_trace_id, 0x7777);
			assert_string_equal(ck.params.name, "ckrec");
			assert_string_equal(ck.params.clock, "local");
			assert_int_equal(ck.trace_id, 0x5e55);
			assert_int_equal(ck.position, 1000 * (k + 1));
			assert_int_equal(ck.bytes, 1000 * (k + 1));
			assert_int_equal(ck.lost, k);
			assert_int_equal(ck.elapsed_ns, 1500000000);
			/* whether the writer holds CMDLINES */
			assert_int_equal(ck.cmdlines, (pt[k].sections >>
			    (TD_OPT_CMDLINES - TD_OPT_HEADER_INFO)) & 1);
			pages = 0;
			for (i = 0; i < CKREC_NCPUS; i++) {
				assert_int_equal(ck.cpu[i].next_seq,
				    pt[k].pages[i]);
				assert_int_equal(ck.cpu[i].events,
				    3 * pt[k].pages[i]);
				/* the writer: cut back to the checkpoint */
				assert_int_equal(td_file_cpu_pages(ck.file, i),
				    pt[k].pages[i]);
				pages += pt[k].pages[i];
			}
			assert_int_equal(ck.pages, pages);
			/* ckrec's counts: 0, 13 + 3, 15 + 15, 16 + 15 */
			assert_int_equal(pages, k == 0 ? 0 : k == 1 ? 16 :
			    k == 2 ? 30 : 31);
			assert_int_equal(timesync_count(ck.ts), pt[k].samples);
			for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES;
			    id++)
				assert_int_equal(td_file_has_section(ck.file,
				    id) != 0, (pt[k].sections >>
				    (id - TD_OPT_HEADER_INFO)) & 1);
			if (k == CKREC_POINTS - 1) {
				/* whole: it finishes, without what came
				   after the checkpoint */
				assert_int_equal(td_file_finish(ck.file), 0);
				td_file_free(ck.file);
				for (i = 0; i < CKREC_NCPUS; i++)
					assert_int_equal(file_pages(path, i),
					    pt[k].pages[i]);
				unlink(path);
			} else {
				td_file_free(ck.file);	/* aborts */
			}
			free(ck.cpu);
			timesync_free(ck.ts);
			checkpoint_remove(state);
			ckrec_points_free(pt);
		}
	}
}

/* state is refused as damaged, nothing allocated left in ck. */
static void
refused(const char *state, const void *p, size_t n)
{
	struct checkpoint ck;
	char err[256] = "";

	put(state, p, n);
	memset(&ck, 0, sizeof ck);
	ck.ts = timesync_new();
	errno = 0;
	assert_int_equal(checkpoint_read(state, &ck, NULL, err, sizeof err),
	    -1);
	assert_int_equal(errno, EBADMSG);
	assert_non_null(strstr(err, "is damaged"));
	assert_null(ck.cpu);
	assert_null(ck.file);
	timesync_free(ck.ts);
}

/* A damaged or short state is refused; the files stay as they were. */
static void
test_damaged(void **unused)
{
	char path[256], state[256];
	struct ckrec_point pt[CKREC_POINTS];
	struct checkpoint ck;
	struct td_buf *l;
	uint8_t *b;
	uint32_t u;
	size_t n, cut;

	(void)unused;
	paths(2, path, state, sizeof path);
	assert_int_equal(ckrec_make(path, 2, pt), 0);
	l = &pt[3].listener;
	n = l->len;
	b = malloc(n);
	assert_non_null(b);
	/* short: cut in the parameters, the counters, the per-CPU part */
	for (cut = 0; cut < 120; cut += 7)
		refused(state, l->data, cut);
	/* a wrong magic, a version from the future */
	memcpy(b, l->data, n);
	b[0] ^= 0xff;
	refused(state, b, n);
	memcpy(b, l->data, n);
	u = 99;
	memcpy(b + 4, &u, 4);
	refused(state, b, n);
	/* a page size no HELLO allows (the parameters, after the header) */
	memcpy(b, l->data, n);
	u = 3;
	memcpy(b + 12, &u, 4);
	refused(state, b, n);
	/*
	 * CPU 0's next sequence one past what the writer holds: not the
	 * same recording (the per-CPU block follows the name "ckrec", the
	 * clock "local", the TRACEID and six counters)
	 */
	memcpy(b, l->data, n);
	cut = 8 + 4 + 4 + 4 + 8 + 4 + 5 + 4 + 5 + 8 + 6 * 8;
	memcpy(&u, b + cut, 4);
	assert_int_equal(u, pt[3].pages[0]);
	u++;
	memcpy(b + cut, &u, 4);
	refused(state, b, n);
	/* the untouched state still reads: nothing above harmed the files */
	put(state, l->data, n);
	read_ok(state, &ck);
	assert_int_equal(td_file_cpu_pages(ck.file, 0), pt[3].pages[0]);
	td_file_free(ck.file);
	free(ck.cpu);
	timesync_free(ck.ts);
	/* not a state file's name */
	memset(&ck, 0, sizeof ck);
	assert_int_equal(checkpoint_read(path, &ck, NULL, (char [64]){ 0 },
	    64), -1);
	assert_int_equal(errno, EINVAL);
	checkpoint_remove(state);
	free(b);
	ckrec_points_free(pt);
}

static int
teardown(void **unused)
{
	char cmd[300];

	(void)unused;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_restore),
		cmocka_unit_test(test_damaged),
	};

	/* ckrec's pairings are logged: not asked here */
	log_init("test-checkpoint", -1, 0);
	if (mkdtemp(dir) == NULL)
		return 1;
	return cmocka_run_group_tests(tests, NULL, teardown);
}
