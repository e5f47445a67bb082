/*
 * fuzz-restore.c: libFuzzer target for checkpoints read back: the writer's
 * state (shared/tdfile.c, td_file_restore()) and the listener's whole
 * PATH.state file (listener/recording/checkpoint.c, checkpoint_read(), which
 * ends in td_file_restore()). Both are read from the disk of a listener that
 * died; the state is "checked for consistency, not trusted".
 *
 * At start the small recording of ckrec.h is made once per variant (v6,
 * v7 with each codec) and its files (r.dat.part, the spools of both CPUs
 * and the options' side file) are kept in memory.  For each input, an
 * empty work directory gets the files of the variant the input's first
 * "tdck" block names (ckrec_variant(), else v6), each input on fresh
 * copies: restoring cuts files to the checkpoint's sizes.  An input that
 * starts with "tdss" (the listener's magic in host order) is a whole
 * PATH.state of any version (4 as written now; 3 without TRACEID and
 * pairings, 1 and 2 of earlier listeners with the agent's HELLO inside,
 * are still read): it is
 * written there as r.dat.state and read by checkpoint_read() as
 * recording.c does when it resumes or recovers a recording.  Any other
 * input goes to td_file_restore() as it is.
 *
 * Properties, besides "no crash, leak, read out of bounds or UB":
 *   - a refused state leaves errno set (td_file_restore) or an error text
 *     (checkpoint_read), no file descriptor and no new file;
 *   - checkpoint_read() leaves nothing allocated but the samples on
 *     failure; on success the parameters are ones HELLO would take (the
 *     identity is left alone), ck.cpu has ncpus entries (each is read,
 *     so ASan sees a short array) whose sequences are the writer's page
 *     counts, and the samples it kept make the time-sync options
 *     (timesync_options(), as recording_finish() does: whatever a damaged
 *     state holds, they are written or refused with errno), and so do its
 *     pairings (guests_options(), guests_kvm()); ckrec's points 2 and 3
 *     are paired with a host and keep that;
 *   - a restored writer goes on: the missing sections, a page for CPUs
 *     0..3, an option, td_file_finish(), td_file_free();
 *   - a state that is one of the recording's own checkpoints (byte for
 *     byte) restores exactly: its page counts and sections,
 *     and, for a listener state, its parameters and samples; everything
 *     added after it succeeds; the finished file reads back
 *     with tdread to the six sections and every page of both CPUs in order;
 *     r.dat is then the only file left.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "checkpoint.h"
#include "compress.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "guests.h"
#include "log.h"
#include "timesync.h"
#include "ckrec.h"
#include "fuzz.h"

/* the recording's files: .part, the spools, the options' side file */
#define NFILES	(2 + CKREC_NCPUS)

static const char *const file_suffix[NFILES] = { ".part", ".cpu0.part",
    ".cpu1.part", ".opts.part" };

static struct {
	struct ckrec_point	 pt[CKREC_POINTS];
	struct td_buf		 files[NFILES];
} variant[CKREC_VARIANTS];

static char *topdir;
static char *workdir;
static char *path;		/* workdir/r.dat */
static char *statepath;		/* workdir/r.dat.state */
static struct td_codec *codec[3];	/* shared: none, zstd, zlib */
static bool verbose;

static void
cleanup_dirs(void)
{
	if (workdir != NULL)
		rmdir(workdir);
	if (topdir != NULL)
		rmdir(topdir);
}

static void
wipe(const char *dir)
{
	struct dirent *de;
	char *p;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		FUZZ_CHECK(asprintf(&p, "%s/%s", dir, de->d_name) > 0);
		unlink(p);
		free(p);
	}
	closedir(d);
}

/* Record every variant once; keep its files and checkpoints. */
static void
setup(void)
{
	char *tpath, *f;
	int v, i;

	verbose = getenv("FUZZ_VERBOSE") != NULL;
	/* guests.c says what it pairs: not for every input */
	log_init("tdlisten", verbose ? 2 : -1, 0);
	topdir = fuzz_tmpdir("fuzz-restore");
	FUZZ_CHECK(asprintf(&workdir, "%s/work", topdir) > 0);
	FUZZ_CHECK(mkdir(workdir, 0700) == 0);
	atexit(cleanup_dirs);
	FUZZ_CHECK(asprintf(&path, "%s/r.dat", workdir) > 0);
	FUZZ_CHECK(asprintf(&statepath, "%s.state", path) > 0);
	FUZZ_CHECK(asprintf(&tpath, "%s/r.dat", topdir) > 0);
	/* the recording restored as "kept" keeps ckrec's pairings (hv0 its
	   host, vm1 its guest) where the configuration allows them */
	FUZZ_CHECK(guests_allow("hv0:kept") == 0 &&
	    guests_allow("kept:vm1") == 0);
	for (v = 0; v < CKREC_VARIANTS; v++) {
		if (ckrec_make(tpath, v, variant[v].pt) == -1)
			fprintf(stderr, "ckrec_make %s: %s\n", ckrec_name(v),
			    strerror(errno));
		FUZZ_CHECK(variant[v].pt[CKREC_POINTS - 1].state.len > 0);
		for (i = 0; i < NFILES; i++) {
			td_buf_init(&variant[v].files[i], 64 * 1024 * 1024);
			FUZZ_CHECK(asprintf(&f, "%s%s", tpath,
			    file_suffix[i]) > 0);
			FUZZ_CHECK(td_buf_read_file(&variant[v].files[i],
			    f) == 0);
			FUZZ_CHECK(unlink(f) == 0);
			free(f);
		}
	}
	free(tpath);
	codec[1] = td_codec_new(TD_CODEC_ZSTD, 0);
	codec[2] = td_codec_new(TD_CODEC_ZLIB, 0);
	FUZZ_CHECK(codec[1] != NULL && codec[2] != NULL);
}

static void
put_file(const char *p, const void *data, size_t n)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	FUZZ_CHECK(fd != -1);
	FUZZ_CHECK(n == 0 || write(fd, data, n) == (ssize_t)n);
	close(fd);
}

/*
 * Files in the work directory: a bit per template file, bit NFILES for
 * r.dat; others counts the rest (but the state file).
 */
static int
dir_files(int *others)
{
	struct dirent *de;
	int mask = 0, i;
	DIR *d;

	*others = 0;
	FUZZ_CHECK((d = opendir(workdir)) != NULL);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		for (i = 0; i < NFILES; i++)
			if (strncmp(de->d_name, "r.dat", 5) == 0 &&
			    strcmp(de->d_name + 5, file_suffix[i]) == 0)
				break;
		if (i < NFILES)
			mask |= 1 << i;
		else if (strcmp(de->d_name, "r.dat") == 0)
			mask |= 1 << NFILES;
		else if (strcmp(de->d_name, "r.dat.state") != 0) {
			if (verbose)
				fprintf(stderr, "file '%s'\n", de->d_name);
			(*others)++;
		}
	}
	closedir(d);
	return mask;
}

/* Which checkpoint of variant v the state is, if it is one. */
static int
known_point(int v, const uint8_t *data, size_t size, bool listener)
{
	const struct td_buf *b;
	int k;

	for (k = 0; k < CKREC_POINTS; k++) {
		b = listener ? &variant[v].pt[k].listener :
		    &variant[v].pt[k].state;
		if (b->len == size && memcmp(b->data, data, size) == 0)
			return k;
	}
	return -1;
}

struct readback {
	int		 cpu;
	uint64_t	 seq;
	bool		 same;
};

static int
page_cb(void *arg, const void *page, size_t len)
{
	struct readback *rb = arg;
	uint8_t want[CKREC_PAGE];

	ckrec_page(want, rb->cpu, rb->seq++);
	if (len != CKREC_PAGE || memcmp(page, want, len) != 0)
		rb->same = false;
	return 0;
}

/* The finished file of a known checkpoint: sections and pages exact. */
static void
check_file(const struct ckrec_point *pt)
{
	struct td_buf b, want;
	struct readback rb;
	struct td_read *r;
	int id, cpu;

	r = td_read_open(path);
	if (r == NULL)
		fprintf(stderr, "td_read_open: %s\n", strerror(errno));
	FUZZ_CHECK(r != NULL);
	FUZZ_CHECK(td_read_ncpus(r) == CKREC_NCPUS);
	FUZZ_CHECK(td_read_page_size(r) == CKREC_PAGE);
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	td_buf_init(&want, TD_MAX_SECTION_SIZE);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		ckrec_section(id, &want);
		FUZZ_CHECK(td_read_section(r, id, &b) == 0);
		FUZZ_CHECK(b.len == want.len &&
		    memcmp(b.data, want.data, b.len) == 0);
	}
	for (cpu = 0; cpu < CKREC_NCPUS; cpu++) {
		rb.cpu = cpu;
		rb.seq = 0;
		rb.same = true;
		FUZZ_CHECK(td_read_cpu_pages(r, cpu, page_cb, &rb) == 0);
		FUZZ_CHECK(rb.same && rb.seq == pt->pages[cpu] + 1);
	}
	td_buf_free(&b);
	td_buf_free(&want);
	td_read_close(r);
}

/*
 * Go on with a restored writer as a session would, and finish it; for a
 * known checkpoint (pt) everything must work and read back exactly.
 */
static void
go_on(struct td_file *f, const struct ckrec_point *pt)
{
	static const char uname[] = "Linux restored";
	uint8_t page[CKREC_PAGE];
	struct td_buf b;
	uint64_t n;
	int id, cpu, r;

	if (pt != NULL)
		for (cpu = 0; cpu < CKREC_NCPUS; cpu++)
			FUZZ_CHECK(td_file_cpu_pages(f, cpu) == pt->pages[cpu]);
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		if (pt != NULL)
			FUZZ_CHECK(!!td_file_has_section(f, id) ==
			    !!(pt->sections & 1u << (id - TD_OPT_HEADER_INFO)));
		if (td_file_has_section(f, id))
			continue;
		ckrec_section(id, &b);
		r = td_file_section_add(f, id, b.data, b.len);
		FUZZ_CHECK(pt == NULL || r == 0);
	}
	td_buf_free(&b);
	for (cpu = 0; cpu < 4; cpu++) {
		n = td_file_cpu_pages(f, cpu);
		ckrec_page(page, cpu, n);
		r = td_file_cpu_page(f, cpu, page, sizeof page);
		FUZZ_CHECK(r == -1 || td_file_cpu_pages(f, cpu) == n + 1);
		FUZZ_CHECK(pt == NULL || cpu >= CKREC_NCPUS || r == 0);
	}
	r = td_file_add_option(f, TD_OPT_UNAME, uname, sizeof uname);
	FUZZ_CHECK(pt == NULL || r == 0);
	r = td_file_finish(f);
	if (pt != NULL && r == -1)
		fprintf(stderr, "td_file_finish: %s\n", strerror(errno));
	FUZZ_CHECK(pt == NULL || r == 0);
	FUZZ_CHECK(r == -1 || td_file_size(f) > 0);
	if (pt != NULL)
		check_file(pt);
	td_file_free(f);
}

/*
 * checkpoint_read() as recording.c calls it (resuming a rewound recording,
 * recovering one): into a struct checkpoint whose samples are given, with
 * the shared codec context of the listener's --compression (none, zstd or
 * zlib by the input's length), and the identity it keeps.
 */
static struct td_file *
read_listener_state(const uint8_t *data, size_t size,
    const struct ckrec_point *pt, bool *ok)
{
	struct timesync_report rep;
	struct timesync *kvm;
	struct checkpoint ck;
	const char *why;
	uint64_t host;
	struct td_codec *shared = codec[size % 3];
	volatile uint64_t sum = 0;
	char err[600];
	uint32_t i;
	int r;

	put_file(statepath, data, size);
	memset(&ck, 0, sizeof ck);
	snprintf(ck.params.identity, sizeof ck.params.identity, "kept");
	ck.ts = timesync_new();
	ck.guests = guests_new("kept", 0, "", "fuzz");
	err[0] = '\0';
	r = checkpoint_read(statepath, &ck, shared, err, sizeof err);
	if (verbose)
		fprintf(stderr, "checkpoint_read: %d %s\n", r, err);
	FUZZ_CHECK(r == 0 || (r == -1 && err[0] != '\0'));
	FUZZ_CHECK(strcmp(ck.params.identity, "kept") == 0);
	FUZZ_CHECK((r == 0) == (ck.file != NULL));
	FUZZ_CHECK((r == 0) == (ck.cpu != NULL));
	*ok = r == 0;
	if (r == -1) {
		timesync_free(ck.ts);
		guests_free(ck.guests);
		return NULL;
	}
	/* what HELLO would have taken; every CPU counted (ASan: all there) */
	FUZZ_CHECK(ck.params.ncpus >= 1 && ck.params.ncpus <= TD_MAX_CPUS);
	FUZZ_CHECK(ck.params.page_size >= TD_MIN_PAGE_SIZE &&
	    ck.params.page_size <= TD_MAX_PAGE_SIZE);
	FUZZ_CHECK(memchr(ck.params.name, '\0', sizeof ck.params.name) &&
	    memchr(ck.params.clock, '\0', sizeof ck.params.clock) &&
	    ck.params.clock[0] != '\0');
	for (i = 0; i < ck.params.ncpus; i++) {
		sum += ck.cpu[i].events + ck.cpu[i].missed_pages;
		FUZZ_CHECK(td_file_cpu_pages(ck.file, (int)i) ==
		    ck.cpu[i].next_seq);
	}
	(void)sum;
	if (pt != NULL) {
		FUZZ_CHECK(ck.params.ncpus == CKREC_NCPUS &&
		    ck.params.page_size == CKREC_PAGE &&
		    strcmp(ck.params.name, "ckrec") == 0 &&
		    strcmp(ck.params.clock, "local") == 0);
		FUZZ_CHECK(timesync_count(ck.ts) == pt->samples);
	}
	/*
	 * recording_finish() of a recovered recording: the time-sync options
	 * from the samples the state kept (a damaged state may hold any)
	 */
	r = timesync_options(ck.ts, ck.file, ck.trace_id, ck.params.ncpus,
	    ck.params.clock, &rep);
	FUZZ_CHECK(r == 0 || r == 1 || (r == -1 && errno != 0));
	FUZZ_CHECK((r == 1) == (timesync_count(ck.ts) == 0));
	FUZZ_CHECK(r != 0 || (rep.kept >= 1 && rep.in_option >= 1 &&
	    rep.in_option <= rep.kept && rep.kept + rep.imprecise +
	    rep.off_line == timesync_count(ck.ts)));
	FUZZ_CHECK(pt == NULL || r == (pt->samples > 0 ? 0 : 1));
	FUZZ_CHECK(pt == NULL || pt->samples == 0 ||
	    (rep.kept == pt->samples && rep.dropped == pt->dropped));
	/*
	 * ... and the pairings': the GUEST options, the KVM samples (ckrec's
	 * points 2 and 3 are paired with a host hv0 and run a guest vm1)
	 */
	guests_describe(ck.guests, "kept", ck.params.file_trace_id,
	    ck.params.clock);
	r = guests_options(ck.guests, ck.file);
	FUZZ_CHECK(r == 0 || (r == -1 && errno != 0));
	kvm = guests_kvm(ck.guests, 1, 0, &why);
	FUZZ_CHECK(kvm == NULL || guests_host(ck.guests, &host));
	timesync_free(kvm);
	FUZZ_CHECK(pt == NULL || pt->paired ==
	    guests_host(ck.guests, &host));
	FUZZ_CHECK(pt == NULL || !pt->paired || host == 0x9999);
	FUZZ_CHECK(guests_mem(ck.guests) > 0);
	guests_free(ck.guests);
	free(ck.cpu);
	timesync_free(ck.ts);
	return ck.file;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t tdss = 0x73736474;
	struct td_file *f;
	char *p;
	bool listener, ok;
	int v, k, i, fd0, mask, others;

	if (topdir == NULL)
		setup();
	fd0 = fuzz_lowest_fd();
	listener = size >= 4 && memcmp(data, &tdss, 4) == 0;
	v = ckrec_variant(data, size);
	k = known_point(v, data, size, listener);
	for (i = 0; i < NFILES; i++) {
		FUZZ_CHECK(asprintf(&p, "%s%s", path, file_suffix[i]) > 0);
		put_file(p, variant[v].files[i].data,
		    variant[v].files[i].len);
		free(p);
	}
	if (listener)
		f = read_listener_state(data, size, k >= 0 ?
		    &variant[v].pt[k] : NULL, &ok);
	else {
		errno = 0;
		f = td_file_restore(path, data, size);
		ok = f != NULL;
		FUZZ_CHECK(ok || errno != 0);
	}
	if (verbose)
		fprintf(stderr, "%s state, variant %s, checkpoint %d: %s\n",
		    listener ? "listener" : "writer", ckrec_name(v), k,
		    ok ? "restored" : "refused");
	FUZZ_CHECK(k == -1 || ok);
	if (!ok) {
		mask = dir_files(&others);
		FUZZ_CHECK(others == 0 && !(mask & 1 << NFILES));
	} else {
		go_on(f, k >= 0 ? &variant[v].pt[k] : NULL);
		if (k >= 0) {
			mask = dir_files(&others);
			FUZZ_CHECK(mask == 1 << NFILES && others == 0);
		}
	}
	FUZZ_CHECK(fuzz_lowest_fd() == fd0);
	wipe(workdir);
	return 0;
}
