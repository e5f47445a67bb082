/*
 * tsync.c: trace-clock markers for time synchronization (see tsync.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <event-parse.h>
#include <kbuffer.h>

#include "instance.h"
#include "ring.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tsync.h"
#include "xmalloc.h"
#include "banned.h"

/* Rounds in a row that may be left without a sample. */
#define TSYNC_MAX_SKIPS		2
/* Markers on each side of the x86-tsc calibration; the tightest is used. */
#define TSYNC_CAL_MARKS		5
/* Markers of the local part alone (tsync_local()). */
#define TSYNC_LOCAL_MARKS	4
/* Markers that measure where in its write() a marker is stamped. */
#define TSYNC_LAT_MARKS		32

/* The sync instance, its readers and the clock's conversion factors. */
struct tsync {
	struct instance		*in;
	struct tep_handle	*tep;
	struct kbuffer		*kbuf;
	struct ring		**rings;	/* per CPU, NULL if absent */
	int			 ncpus;
	uint8_t			*page;
	int			 marker_fd;
	bool			 tsc;
	uint32_t		 mult;
	uint32_t		 shift;
	uint32_t		 samples;	/* samples made */
	uint32_t		 skipped;	/* rounds without, in a row */
	/* a marker is stamped at least pre_ns after a clock read before
	   its write(), post_ns before one after it (tsync_latency()) */
	uint64_t		 pre_ns;
	uint64_t		 post_ns;
};

/* The factors the kernel publishes for user-space TSC conversion. */
int
tsync_tsc_factors(uint32_t *mult, uint32_t *shift)
{
	struct perf_event_attr attr;
	struct perf_event_mmap_page *pg;
	long psz = sysconf(_SC_PAGESIZE);
	int fd, ret = -1;

	memset(&attr, 0, sizeof attr);
	attr.size = sizeof attr;
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_DUMMY;
	attr.exclude_kernel = 1;
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (fd == -1)
		return -1;
	pg = mmap(NULL, psz, PROT_READ, MAP_SHARED, fd, 0);
	if (pg != MAP_FAILED) {
		if (pg->cap_user_time && pg->time_mult != 0) {
			*mult = pg->time_mult;
			*shift = pg->time_shift;
			ret = 0;
		}
		munmap(pg, psz);
	}
	close(fd);
	return ret;
}

static uint64_t
tsync_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * Without perf's factors (no PMU, as in many VMs), measure the TSC against
 * CLOCK_MONOTONIC over 100 ms: markers bracketed by CLOCK_MONOTONIC
 * readings, TSYNC_CAL_MARKS at each end, and of each end the one with the
 * tightest bracket (a marker write can be slow, the first one of an
 * instance or a preempted one, by tens of us: 350 ppm over 50 ms with a
 * single marker).  The factors need not be exact: the offsets of the
 * samples absorb a rate error, and trace-cmd interpolates them linearly,
 * which is exact for a linear error.
 */
static int
tsync_calibrate(struct tsync *t)
{
	uint64_t s[2 * TSYNC_CAL_MARKS], r[2 * TSYNC_CAL_MARKS];
	uint64_t a[2 * TSYNC_CAL_MARKS], b[2 * TSYNC_CAL_MARKS];
	uint64_t mono[2], tsc[2] = { 0, 0 }, w[2] = { UINT64_MAX, UINT64_MAX };
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	unsigned __int128 m;
	uint32_t i, end;

	memset(s, 0, sizeof s);
	memset(r, 0, sizeof r);
	for (i = 0; i < 2 * TSYNC_CAL_MARKS; i++) {
		if (i == TSYNC_CAL_MARKS)
			nanosleep(&pause, NULL);
		a[i] = tsync_mono_ns();
		if (tsync_mark(t, UINT32_MAX, i, 's') == -1)
			return -1;
		b[i] = tsync_mono_ns();
	}
	if (tsync_collect(t, UINT32_MAX, s, r, 2 * TSYNC_CAL_MARKS) == -1)
		return -1;
	for (i = 0; i < 2 * TSYNC_CAL_MARKS; i++) {
		end = i >= TSYNC_CAL_MARKS;
		if (s[i] != 0 && b[i] - a[i] < w[end]) {
			w[end] = b[i] - a[i];
			mono[end] = a[i] + w[end] / 2;
			tsc[end] = s[i];
		}
	}
	if (tsc[0] == 0 || tsc[1] <= tsc[0] || mono[1] <= mono[0])
		return -1;
	t->shift = 24;
	m = ((unsigned __int128)(mono[1] - mono[0]) << t->shift) /
	    (tsc[1] - tsc[0]);
	if (m == 0 || m > UINT32_MAX)
		return -1;
	t->mult = (uint32_t)m;
	return 0;
}

/*
 * Where in a write() to trace_marker the ring buffer stamps the marker,
 * measured while the sync instance still runs on the mono clock, which is
 * CLOCK_MONOTONIC: of TSYNC_LAT_MARKS markers, each bracketed by two
 * clock_gettime() calls, the shortest time from the first read to the
 * stamp (pre) and from the stamp to the second read (post).  On the VM of
 * the measurements pre was 2.3 to 2.6 us (the system call's entry, the
 * copy) and post 0.25 to 0.35 us: the bracket's midpoint is some 1.1 us
 * before the stamp, every time.  A marker's moment is then taken within
 * [m0 + pre, m1 - post], each shortened by a margin (a tenth, at least
 * 200 ns) for a write quicker than any measured and for the other
 * clocks' reading costs.  Without the measurement the whole bracket.
 */
static void
tsync_latency(struct tsync *t)
{
	uint64_t s[TSYNC_LAT_MARKS], r[TSYNC_LAT_MARKS];
	uint64_t a[TSYNC_LAT_MARKS], b[TSYNC_LAT_MARKS];
	uint64_t pre = UINT64_MAX, post = UINT64_MAX, m;
	uint32_t i;

	memset(s, 0, sizeof s);
	memset(r, 0, sizeof r);
	for (i = 0; i < TSYNC_LAT_MARKS; i++) {
		a[i] = tsync_mono_ns();
		if (tsync_mark(t, UINT32_MAX - 1, i, 's') == -1)
			return;
		b[i] = tsync_mono_ns();
	}
	if (tsync_collect(t, UINT32_MAX - 1, s, r, TSYNC_LAT_MARKS) == -1)
		return;
	for (i = 0; i < TSYNC_LAT_MARKS; i++) {
		if (s[i] < a[i] || s[i] > b[i])
			continue;
		if (s[i] - a[i] < pre)
			pre = s[i] - a[i];
		if (b[i] - s[i] < post)
			post = b[i] - s[i];
	}
	if (pre == UINT64_MAX || post == UINT64_MAX)
		return;
	m = pre / 10 > 200 ? pre / 10 : 200;
	t->pre_ns = pre > m ? pre - m : 0;
	m = post / 10 > 200 ? post / 10 : 200;
	t->post_ns = post > m ? post - m : 0;
}

/* A marker bracketed by m0 and m1: its moment, within +-*half ns. */
uint64_t
tsync_moment(const struct tsync *t, uint64_t m0, uint64_t m1, uint64_t *half)
{
	uint64_t lo = m0 + t->pre_ns, hi = m1 - t->post_ns;

	if (m1 < m0 + t->pre_ns + t->post_ns) {
		lo = m0;
		hi = m1;
	}
	*half = (hi - lo + 1) / 2 + 1;
	return lo + (hi - lo) / 2;
}

/* The local part alone: the tightest of TSYNC_LOCAL_MARKS markers. */
int
tsync_local(struct tsync *t, uint32_t round, uint64_t *ts, uint64_t *mono,
    uint64_t *half)
{
	uint64_t s[TSYNC_LOCAL_MARKS], r[TSYNC_LOCAL_MARKS];
	uint64_t a[TSYNC_LOCAL_MARKS], b[TSYNC_LOCAL_MARKS], h, m;
	uint32_t i;

	memset(s, 0, sizeof s);
	memset(r, 0, sizeof r);
	for (i = 0; i < TSYNC_LOCAL_MARKS; i++) {
		a[i] = tsync_mono_ns();
		if (tsync_mark(t, round, i, 's') == -1)
			return -1;
		b[i] = tsync_mono_ns();
	}
	if (tsync_collect(t, round, s, r, TSYNC_LOCAL_MARKS) == -1)
		return -1;
	*half = UINT64_MAX;
	for (i = 0; i < TSYNC_LOCAL_MARKS; i++) {
		if (s[i] == 0)
			continue;
		m = tsync_moment(t, a[i], b[i], &h);
		if (h < *half) {
			*half = h;
			*mono = m;
			*ts = s[i];
		}
	}
	return *half == UINT64_MAX ? -1 : 0;
}

/*
 * A tep that knows the ring-buffer page header and ftrace:print, the only
 * event the sync instance holds.  tracefs_local_events_system() would parse
 * every ftrace format, /proc/kallsyms, saved_cmdlines and printk_formats
 * too: some 20 MB of memory and 0.2 s at start for nothing.
 */
static struct tep_handle *
tsync_tep(struct instance *in)
{
	struct tep_handle *tep;
	char *hdr, *fmt;
	size_t hlen = 0, flen = 0;

	if ((tep = tep_alloc()) == NULL)
		return NULL;
	hdr = instance_read(in, "events/header_page", &hlen);
	fmt = instance_read(in, "events/ftrace/print/format", &flen);
	if (hdr == NULL || fmt == NULL ||
	    tep_parse_header_page(tep, hdr, hlen, sizeof(long)) != 0 ||
	    tep_parse_event(tep, fmt, flen, "ftrace") != TEP_ERRNO__SUCCESS ||
	    tep_find_event_by_name(tep, "ftrace", "print") == NULL) {
		tep_free(tep);
		tep = NULL;
	} else
		tep_set_long_size(tep, tep_get_header_page_size(tep));
	free(hdr);
	free(fmt);
	return tep;
}

/*
 * The sync instance's per-CPU readers, opened once: the markers are read
 * back through them every round, also after the recorder dropped root.
 */
static int
tsync_open_rings(struct tsync *t)
{
	int cpu, psz = tep_get_sub_buffer_size(t->tep);

	t->ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	if (t->ncpus < 1 || t->ncpus > TD_MAX_CPUS || psz <= 0) {
		errno = EINVAL;
		return -1;
	}
	t->kbuf = kbuffer_alloc(sizeof(long) == 8 ? KBUFFER_LSIZE_8 :
	    KBUFFER_LSIZE_4, tep_is_bigendian() ?
	    KBUFFER_ENDIAN_BIG : KBUFFER_ENDIAN_LITTLE);
	if (t->kbuf == NULL)
		return -1;
	t->page = xmalloc(psz);
	t->rings = xcalloc(t->ncpus, sizeof *t->rings);
	for (cpu = 0; cpu < t->ncpus; cpu++) {
		t->rings[cpu] = ring_open(t->in, cpu, psz, false);
		if (t->rings[cpu] == NULL && errno != ENOENT)
			return -1;
	}
	return 0;
}

/* Make the sync instance with the recording's clock. */
struct tsync *
tsync_new(struct instance *recording, char *err, size_t errlen)
{
	return tsync_new_sized(recording, 0, err, errlen);
}

/* The same, its ring kb KB per CPU (0: the kernel's default). */
struct tsync *
tsync_new_sized(struct instance *recording, int kb, char *err, size_t errlen)
{
	struct tsync *t;
	const char *clock = instance_clock(recording);
	char *path;

	if (strcmp(clock, "counter") == 0) {
		snprintf(err, errlen, "the counter clock counts events, it "
		    "has no time to sync");
		return NULL;
	}
	t = xcalloc(1, sizeof *t);
	t->marker_fd = -1;
	t->in = instance_create("sync", err, errlen);
	if (t->in == NULL ||
	    (kb > 0 && instance_set_buffer_kb(t->in, kb, err, errlen) == -1))
		goto fail;
	/* mono first, to measure a marker's stamp (tsync_latency()) */
	if (instance_set_clock(t->in, "mono", err, errlen) == -1)
		goto fail;
	t->tep = tsync_tep(t->in);
	if (t->tep == NULL) {
		snprintf(err, errlen, "cannot parse the ftrace:print format");
		goto fail;
	}
	if (tsync_open_rings(t) == -1)
		goto sys;
	if ((path = instance_path(t->in, "trace_marker")) == NULL)
		goto sys;
	t->marker_fd = open(path, O_WRONLY | O_CLOEXEC);
	free(path);
	if (t->marker_fd == -1 || instance_set_tracing(t->in, 1) == -1)
		goto sys;
	tsync_latency(t);
	if (strcmp(clock, "mono") != 0 &&
	    instance_set_clock(t->in, clock, err, errlen) == -1)
		goto fail;
	if (strcmp(clock, "x86-tsc") == 0) {
		if (tsync_tsc_factors(&t->mult, &t->shift) == -1 &&
		    tsync_calibrate(t) == -1) {
			snprintf(err, errlen, "cannot relate the x86-tsc clock "
			    "to nanoseconds");
			goto fail;
		}
		t->tsc = true;
	}
	return t;
sys:
	snprintf(err, errlen, "cannot set up the sync instance: %s",
	    strerror(errno));
fail:
	tsync_free(t);
	return NULL;
}

/* One marker into the trace clock. */
int
tsync_mark(struct tsync *t, uint32_t round, uint32_t seq, char kind)
{
	char m[64];
	int n;

	n = snprintf(m, sizeof m, "tds %u %u %c", round, seq, kind);
	return write(t->marker_fd, m, n) == n ? 0 : -1;
}

/* What tsync_collect() looks for while it walks a page. */
struct tsync_walk {
	uint32_t	 round;
	uint32_t	 n;
	uint64_t	*ts_s;
	uint64_t	*ts_r;
};

static int
tsync_walk_cb(struct tep_event *event, struct tep_record *record, int cpu,
    void *arg)
{
	struct tsync_walk *w = arg;
	struct tep_format_field *field;
	unsigned int round, seq;
	char kind, text[64];
	int len;

	if (strcmp(event->name, "print") != 0 ||
	    (field = tep_find_field(event, "buf")) == NULL ||
	    field->offset >= (unsigned)record->size)
		return 0;
	/* buf is a flexible array: it runs to the end of the record */
	len = record->size - field->offset;
	snprintf(text, sizeof text, "%.*s", len,
	    (const char *)record->data + field->offset);
	if (sscanf(text, "tds %u %u %c", &round, &seq, &kind) != 3 ||
	    round != w->round || seq >= w->n)
		return 0;
	if (kind == 's')
		w->ts_s[seq] = record->ts;
	else if (kind == 'r')
		w->ts_r[seq] = record->ts;
	return 0;
}

/* Walk the events of one sub-buffer of a CPU. */
static void
tsync_walk_page(struct tsync *t, int cpu, struct tsync_walk *w)
{
	struct tep_record rec;
	struct tep_event *ev;
	unsigned long long ts;
	void *data;

	if (kbuffer_load_subbuffer(t->kbuf, t->page) < 0)
		return;
	for (data = kbuffer_read_event(t->kbuf, &ts); data != NULL;
	    data = kbuffer_next_event(t->kbuf, &ts)) {
		memset(&rec, 0, sizeof rec);
		rec.ts = ts;
		rec.cpu = cpu;
		rec.data = data;
		rec.size = kbuffer_event_size(t->kbuf);
		ev = tep_find_event(t->tep, tep_data_type(t->tep, &rec));
		if (ev != NULL)
			tsync_walk_cb(ev, &rec, cpu, w);
	}
}

/* Read a round's markers back. */
int
tsync_collect(struct tsync *t, uint32_t round, uint64_t *ts_s, uint64_t *ts_r,
    uint32_t n)
{
	struct tsync_walk w = { round, n, ts_s, ts_r };
	ssize_t got;
	int cpu;

	/*
	 * Reading consumes trace_pipe_raw, so no clearing is needed (it
	 * took tens of ms and stalled the ring readers); any marker left
	 * over carries an old round number and is ignored.
	 */
	for (cpu = 0; cpu < t->ncpus; cpu++) {
		if (t->rings[cpu] == NULL)
			continue;
		while ((got = ring_read(t->rings[cpu], t->page)) > 0)
			tsync_walk_page(t, cpu, &w);
		if (got < 0)
			return -1;
	}
	return 0;
}

static int
tsync_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
tsync_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Whether the best probe (offset off, round trip best) agrees with the
 * round's other quick probes: the median offset of the quarter of the
 * probes with the shortest round trips, within max(300 ns, best / 32).
 */
static bool
tsync_agrees(const struct tsync *t, const uint64_t *ref, const uint64_t *ts_s,
    const uint64_t *ts_r, uint32_t n, int64_t off, uint64_t best)
{
	uint64_t *rtt, q, d, lim;
	int64_t *o, med;
	uint32_t i, k = 0, m = 0;

	rtt = xcalloc(n, sizeof *rtt);
	o = xcalloc(n, sizeof *o);
	for (i = 0; i < n; i++)
		if (ref[i] != 0 && ts_s[i] != 0 && ts_r[i] >= ts_s[i])
			rtt[k++] = ts_r[i] - ts_s[i];
	qsort(rtt, k, sizeof *rtt, tsync_cmp_u64);
	q = rtt[k / 4];
	for (i = 0; i < n; i++)
		if (ref[i] != 0 && ts_s[i] != 0 && ts_r[i] >= ts_s[i] &&
		    ts_r[i] - ts_s[i] <= q)
			o[m++] = (int64_t)(tsync_from_ns(t, ref[i]) -
			    (ts_s[i] + (ts_r[i] - ts_s[i]) / 2));
	qsort(o, m, sizeof *o, tsync_cmp_i64);
	med = o[m / 2];
	free(rtt);
	free(o);
	d = tsync_to_ns(t, (uint64_t)(med > off ? med - off : off - med));
	lim = tsync_to_ns(t, best) / 32;
	return d <= (lim > 300 ? lim : 300);
}

/*
 * The probe with the shortest round trip gives the sample (Cristian's
 * method): the reference moment lies within half its round trip of the
 * markers' midpoint, and the probe that waited least is usually the least
 * lopsided one.  Not always: a probe is quick when the other side happened
 * to be awake already, and then its two ways are unequal (on a VM, where
 * each wake-up of a sleeping CPU costs some 15 us, by about that much);
 * and when the listener or the CPUs were busy throughout the round, every
 * probe waited.  Measured on loopback (docs/timesync.md), such rounds were
 * off by 2 to 30 us, against well under 1 us for the others, and what told
 * them apart was a best probe whose offset the round's other quick probes
 * do not share (tsync_agrees()).  Such a round asks for another batch of
 * probes (1).  When last says there is none, it makes no sample (2), and
 * trace-cmd interpolates over the gap, unless fewer than two samples exist
 * or TSYNC_MAX_SKIPS rounds in a row already made none; then the best
 * probe of all batches makes the sample.  The last round of a recording
 * (an anchor) makes none only right after a round that made one: trace-cmd
 * extrapolates the last two samples over the end, which beats a sample
 * taken while the listener finishes the files of agents that stopped at
 * the same time (its loop busy for 200 ms: samples 5 to 12 us off).
 */
int
tsync_pick(struct tsync *t, uint32_t round, const uint64_t *ref,
    const uint64_t *ts_s, const uint64_t *ts_r, uint32_t n, bool last,
    bool anchor, struct td_tsync_sample *sample)
{
	uint64_t best = UINT64_MAX, rtt, mid;
	uint32_t i, bi = 0, got = 0;
	int64_t off;
	bool good;

	for (i = 0; i < n; i++) {
		if (ref[i] == 0 || ts_s[i] == 0 || ts_r[i] < ts_s[i])
			continue;
		got++;
		if (ts_r[i] - ts_s[i] < best) {
			best = ts_r[i] - ts_s[i];
			bi = i;
		}
	}
	if (got == 0)
		return -1;
	rtt = tsync_to_ns(t, best);
	mid = ts_s[bi] + best / 2;
	off = (int64_t)(tsync_from_ns(t, ref[bi]) - mid);
	good = tsync_agrees(t, ref, ts_s, ts_r, n, off, best);
	if (!good && !last)
		return 1;
	if (!good && t->samples >= 2 &&
	    t->skipped < (anchor ? 1 : TSYNC_MAX_SKIPS)) {
		t->skipped++;
		return 2;
	}
	t->samples++;
	t->skipped = 0;
	memset(sample, 0, sizeof *sample);
	sample->round = round;
	sample->probes = got;
	sample->ts = mid;
	sample->offset = off;
	sample->scaling = 1;
	sample->frac = 0;
	sample->rtt = rtt;
	sample->bound = rtt / 2 + 1;
	return 0;
}

/* TSC factors, when the clock is x86-tsc. */
bool
tsync_tsc2nsec(const struct tsync *t, uint32_t *mult, uint32_t *shift)
{
	if (!t->tsc)
		return false;
	*mult = t->mult;
	*shift = t->shift;
	return true;
}

/* Clock units to ns. */
uint64_t
tsync_to_ns(const struct tsync *t, uint64_t v)
{
	if (!t->tsc)
		return v;
	return (uint64_t)(((unsigned __int128)v * t->mult) >> t->shift);
}

/* ns to clock units. */
uint64_t
tsync_from_ns(const struct tsync *t, uint64_t ns)
{
	if (!t->tsc)
		return ns;
	return (uint64_t)(((unsigned __int128)ns << t->shift) / t->mult);
}

/* Remove the sync instance. */
void
tsync_free(struct tsync *t)
{
	int i;

	if (t == NULL)
		return;
	if (t->marker_fd != -1)
		close(t->marker_fd);
	for (i = 0; t->rings != NULL && i < t->ncpus; i++)
		ring_close(t->rings[i]);
	free(t->rings);
	free(t->page);
	if (t->kbuf != NULL)
		kbuffer_free(t->kbuf);
	if (t->tep != NULL)
		tep_free(t->tep);
	instance_destroy(t->in);
	free(t);
}
