/*
 * timesync.c: the listener's side of time sync for one recording (see
 * timesync.h, docs/timesync.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "cursor.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "timesync.h"
#include "tsfilter.h"
#include "xmalloc.h"
#include "banned.h"

/* A sample this far off its neighbours' line is always plausible. */
#define TIMESYNC_FLOOR_NS	1000
/* A bound within 8 x this of its neighbours' is never imprecise. */
#define TIMESYNC_PRECISE_NS	10000
/* A pair of samples with both bounds below this is never too steep. */
#define TIMESYNC_STEEP_NS	100000
/* A TSYNC_SAMPLE frame in a checkpoint of version 1 or 2. */
#define TIMESYNC_CK_FRAME	(TD_FRAME_HEADER + 52)
/*
 * The listener's options share the recording's TD_MAX_OPTIONS_TOTAL with
 * the agent's: TIME_SHIFT and DATE together keep within half of it.
 */
#define TIMESYNC_OPTIONS_MAX	(TD_MAX_OPTIONS_TOTAL / 2)

/* One recording's samples, in the order they came. */
struct timesync {
	struct td_tsync_sample	*samples;
	uint32_t		 n;
	uint32_t		 dropped;
	uint32_t		 thinned;	/* left out by timesync_keep() */
	uint32_t		 stride;	/* of the grid kept, from 1 */
	uint32_t		 seen;		/* samples that came */
	bool			 latest_off_grid; /* samples[n - 1] */
	uint32_t		 tsc_mult;	/* TSC2NSEC, when the agent sent */
	uint32_t		 tsc_shift;	/* it (x86-tsc) */
	/* the tightest of those dropped for a bound past the cap */
	struct td_tsync_sample	 wide;
	bool			 has_wide;
};

static uint64_t timesync_date_us;	/* CLOCK_REALTIME - MONOTONIC, us */

uint64_t
timesync_now(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

struct timesync *
timesync_new(void)
{
	struct timesync *t = xcalloc(1, sizeof *t);

	t->stride = 1;
	return t;
}

void
timesync_free(struct timesync *t)
{
	if (t == NULL)
		return;
	free(t->samples);
	free(t);
}

/* Append s, growing the array 64 samples at a time. */
static void
timesync_push(struct timesync *t, const struct td_tsync_sample *s)
{
	if (t->n % 64 == 0)
		t->samples = xreallocarray(t->samples, t->n + 64,
		    sizeof *t->samples);
	t->samples[t->n++] = *s;
}

/*
 * Past TD_MAX_TSYNC_SAMPLES the samples are kept on a coarser grid: of
 * the samples that came, those whose number is a multiple of the stride,
 * plus always the latest one (the last sample of a recording is its
 * anchor).  When the array is full, every other sample of the grid is
 * left out and the stride doubles, so a long recording stays covered
 * evenly from end to end, only less densely (a round a second fills it in
 * 68 minutes), and the memory, a checkpoint's size and the options stay
 * bounded however long it records.
 */
static void
timesync_thin(struct timesync *t)
{
	uint32_t i, k = 0;

	/* called only with every sample on the grid (timesync_keep()) */
	for (i = 0; i < t->n; i += 2)
		t->samples[k++] = t->samples[i];
	if (t->n % 2 == 0) {
		/* the latest fell off the new grid: kept as the latest */
		t->samples[k++] = t->samples[t->n - 1];
		t->latest_off_grid = true;
	}
	t->thinned += t->n - k;
	t->n = k;
	t->stride *= 2;
}

/* Keep s on the grid, or as the latest one in place of the one before. */
static void
timesync_keep(struct timesync *t, const struct td_tsync_sample *s)
{
	bool on_grid = t->seen++ % t->stride == 0;

	if (!t->latest_off_grid && t->n >= TD_MAX_TSYNC_SAMPLES)
		timesync_thin(t);
	if (t->latest_off_grid) {
		t->samples[t->n - 1] = *s;
		t->thinned++;
	} else
		timesync_push(t, s);
	t->latest_off_grid = !on_grid;
}

bool
timesync_add(struct timesync *t, const struct td_tsync_sample *s)
{
	if (s->bound > TD_MAX_TSYNC_BOUND && s->scaling == 1 &&
	    s->frac == 0 && (!t->has_wide || s->bound < t->wide.bound)) {
		t->wide = *s;
		t->has_wide = true;
	}
	if (s->bound > TD_MAX_TSYNC_BOUND || s->scaling != 1 ||
	    s->frac != 0 || (t->n > 0 && s->ts <= t->samples[t->n - 1].ts)) {
		t->dropped++;
		return false;
	}
	timesync_keep(t, s);
	return true;
}

void
timesync_tsc2nsec(struct timesync *t, const uint8_t *p, bool big_endian)
{
	uint32_t v[2];
	int i;

	for (i = 0; i < 2; i++, p += 4)
		v[i] = big_endian ?
		    (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		    (uint32_t)p[2] << 8 | p[3] :
		    (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
		    (uint32_t)p[1] << 8 | p[0];
	if (v[0] != 0 && v[1] < 64) {
		t->tsc_mult = v[0];
		t->tsc_shift = v[1];
	}
}

bool
timesync_factors(const struct timesync *t, uint32_t *mult, uint32_t *shift)
{
	*mult = t->tsc_mult;
	*shift = t->tsc_shift;
	return t->tsc_mult != 0;
}

void
timesync_set_factors(struct timesync *t, uint32_t mult, uint32_t shift)
{
	if (mult != 0 && shift < 64) {
		t->tsc_mult = mult;
		t->tsc_shift = shift;
	}
}

const struct td_tsync_sample *
timesync_samples(const struct timesync *t, uint32_t *n)
{
	*n = t->n;
	return t->samples;
}

uint32_t
timesync_count(const struct timesync *t)
{
	return t->n;
}

uint64_t
timesync_mem(const struct timesync *t)
{
	return sizeof *t + (uint64_t)(t->n + 63) / 64 * 64 *
	    sizeof *t->samples;
}

/*
 * Set aside, marking them in out[], the samples trace-cmd should not draw
 * its line through: first those whose bound is far wider than their
 * neighbours' and whose offset disagrees with the precise ones
 * (td_tsfilter_imprecise(): rounds made while the machine was
 * saturated), then of pairs that make a line no two clocks drift along
 * the one with the wider bound (td_tsfilter_steep(): every round made on
 * a saturated machine), then of the others those that lie off the line through
 * their neighbours (td_tsfilter_outliers(): rounds whose probes were all
 * lopsided the same way, which the agent cannot see).  The counts go to
 * rep.  Offsets are in the clock's units: x86-tsc's are cycles, converted
 * with the agent's TSC2NSEC (sent at the end, kept in checkpoints);
 * without it nothing is set aside.
 */
static void
timesync_set_aside(const struct timesync *t, bool tsc, bool *out,
    struct timesync_report *rep)
{
	uint64_t *ts, *bound;
	int64_t *off;
	uint32_t *at;
	bool *mark;
	double units = 1;
	uint32_t i, m, n = t->n;

	rep->imprecise = rep->off_line = 0;
	if (tsc) {
		if (t->tsc_mult == 0) {
			rep->unchecked = true;
			return;
		}
		units = (double)(1ULL << t->tsc_shift) / t->tsc_mult;
	}
	ts = xreallocarray(NULL, n, sizeof *ts);
	off = xreallocarray(NULL, n, sizeof *off);
	bound = xreallocarray(NULL, n, sizeof *bound);
	at = xreallocarray(NULL, n, sizeof *at);
	mark = xcalloc(n, sizeof *mark);
	for (i = 0; i < n; i++) {
		ts[i] = t->samples[i].ts;
		off[i] = t->samples[i].offset;
		bound[i] = t->samples[i].bound;
	}
	rep->imprecise = td_tsfilter_imprecise(ts, off, bound, n,
	    TIMESYNC_PRECISE_NS, units, out);
	rep->imprecise += td_tsfilter_steep(ts, off, bound, n,
	    TIMESYNC_STEEP_NS, TIMESYNC_FLOOR_NS, units, out);
	/* the samples not set aside yet, side by side */
	for (i = m = 0; i < n; i++) {
		if (out[i])
			continue;
		ts[m] = ts[i];
		off[m] = off[i];
		at[m++] = i;
	}
	rep->off_line = td_tsfilter_outliers(ts, off, m,
	    TIMESYNC_FLOOR_NS * units, mark);
	for (i = 0; i < m; i++)
		if (mark[i])
			out[at[i]] = true;
	free(ts);
	free(off);
	free(bound);
	free(at);
	free(mark);
}

/* The widest bound of the samples not set aside. */
uint64_t
timesync_bound_now(const struct timesync *t, const char *clock)
{
	struct timesync_report rep;
	uint64_t b = 0;
	uint32_t i;
	bool *out;

	if (t == NULL || t->n == 0)
		return 0;
	memset(&rep, 0, sizeof rep);
	out = xcalloc(t->n, sizeof *out);
	timesync_set_aside(t, strcmp(clock, "x86-tsc") == 0, out, &rep);
	for (i = 0; i < t->n; i++)
		if (!out[i] && t->samples[i].bound > b)
			b = t->samples[i].bound;
	free(out);
	return b;
}

/* What the listener's two options of k samples take of the options. */
static uint64_t
timesync_options_size(uint32_t ncpus, uint64_t k)
{
	/* a record header each; TIME_SHIFT; DATE */
	return 2 * 6 + 16 + (uint64_t)ncpus * (4 + 32 * k) + 32;
}

/*
 * TIME_SHIFT as trace-cmd 3.1.6 reads it: peer id, flags (1: interpolate),
 * CPU count, per CPU {count, ts[], offset[], scaling[]}, then per CPU
 * frac[] (each CPU's own count).  Every CPU gets the same samples: the
 * trace clock is one clock.  DATE turns the reference into wall time.
 */
int
timesync_options(struct timesync *t, struct td_file *f, uint64_t peer_id,
    uint32_t ncpus, const char *clock, struct timesync_report *rep)
{
	struct td_buf b;
	const struct td_tsync_sample *first, *last;
	uint32_t i, j, cpu, n = t->n, step, kept, m;
	uint32_t *use;
	bool *out;
	bool ok;
	int ret = -1;

	memset(rep, 0, sizeof *rep);
	/*
	 * Never without a time shift when a sample came: with only samples
	 * past the cap, the tightest of them, its bound as wide as it is.
	 */
	if (t->n == 0 && t->has_wide) {
		timesync_keep(t, &t->wide);
		t->dropped--;
		rep->wide_only = true;
	}
	n = t->n;
	rep->dropped = t->dropped;
	rep->thinned = t->thinned;
	if (n == 0)
		return 1;
	out = xcalloc(n, sizeof *out);
	timesync_set_aside(t, strcmp(clock, "x86-tsc") == 0, out, rep);
	m = n - rep->imprecise - rep->off_line;
	/*
	 * TIME_SHIFT holds every sample once per CPU: 16 + ncpus * (4 + 32 m)
	 * bytes.  When that would pass its share of the recording's options
	 * (the writer refuses an option past TD_MAX_OPTIONS_TOTAL, and the
	 * file could not be finished), keep every k-th sample (and always the
	 * last): interpolation needs fewer points than a long recording
	 * makes.
	 */
	step = 1;
	while (timesync_options_size(ncpus, (m + step - 1) / step + 1) >
	    TIMESYNC_OPTIONS_MAX)
		step++;
	use = xcalloc(m, sizeof *use);
	for (i = j = kept = 0; i < n; i++) {
		if (out[i])
			continue;
		if (j % step == 0 || j == m - 1)
			use[kept++] = i;
		j++;
	}
	td_buf_init(&b, TD_MAX_OPTION_SIZE);
	ok = td_buf_add_u64(&b, peer_id) == 0 &&
	    td_buf_add_u32(&b, 1) == 0 &&
	    td_buf_add_u32(&b, ncpus) == 0;
	for (cpu = 0; ok && cpu < ncpus; cpu++) {
		ok = td_buf_add_u32(&b, kept) == 0;
		for (i = 0; ok && i < kept; i++)
			ok = td_buf_add_u64(&b, t->samples[use[i]].ts) == 0;
		for (i = 0; ok && i < kept; i++)
			ok = td_buf_add_u64(&b,
			    (uint64_t)t->samples[use[i]].offset) == 0;
		for (i = 0; ok && i < kept; i++)
			ok = td_buf_add_u64(&b,
			    t->samples[use[i]].scaling) == 0;
	}
	for (cpu = 0; ok && cpu < ncpus; cpu++)
		for (i = 0; ok && i < kept; i++)
			ok = td_buf_add_u64(&b, t->samples[use[i]].frac) == 0;
	if (!ok) {
		errno = ENOBUFS;
		goto out;
	}
	if (td_file_add_option(f, TD_OPT_TIME_SHIFT, b.data, b.len) == -1)
		goto out;
	/*
	 * One DATE for every file of this listener, taken once: files of
	 * recordings that end at different times must not differ by the
	 * rounding of a microsecond.
	 */
	if (timesync_date_us == 0)
		timesync_date_us = (timesync_now(CLOCK_REALTIME) -
		    timesync_now(CLOCK_MONOTONIC)) / 1000;
	td_buf_reset(&b);
	td_buf_printf(&b, "0x%" PRIx64, timesync_date_us);
	td_buf_add(&b, "", 1);
	if (td_file_add_option(f, TD_OPT_DATE, b.data, b.len) == -1)
		goto out;
	/*
	 * The bounds are not written into the file: an option of our own
	 * (0x7464, until issue 28) made libtracecmd warn "unknown option
	 * 29796" in trace-cmd split, report --verbose and KernelShark for
	 * every time-synced file.  The log has each sample's (-v) and the
	 * largest of those kept; /status and /metrics the same.
	 */
	for (i = 0; i < n; i++)
		if (!out[i] && t->samples[i].bound > rep->bound)
			rep->bound = t->samples[i].bound;
	first = &t->samples[use[0]];
	last = &t->samples[use[kept - 1]];
	if (kept > 1 && last->ts > first->ts)
		rep->drift_ppm = td_tsfilter_diff(last->offset,
		    first->offset) / (double)(last->ts - first->ts) * 1e6;
	rep->kept = m;
	rep->in_option = kept;
	rep->offset = last->offset;
	ret = 0;
out:
	td_buf_free(&b);
	free(use);
	free(out);
	return ret;
}

int
timesync_save(const struct timesync *t, struct td_buf *b)
{
	const struct td_tsync_sample *s;
	uint32_t i;
	int ok;

	ok = td_buf_add_u32(b, t->n) == 0 &&
	    td_buf_add_u32(b, t->dropped) == 0;
	for (i = 0; ok && i < t->n; i++) {
		s = &t->samples[i];
		ok = td_buf_add_u32(b, s->round) == 0 &&
		    td_buf_add_u32(b, s->probes) == 0 &&
		    td_buf_add_u64(b, s->ts) == 0 &&
		    td_buf_add_u64(b, (uint64_t)s->offset) == 0 &&
		    td_buf_add_u64(b, s->scaling) == 0 &&
		    td_buf_add_u32(b, s->frac) == 0 &&
		    td_buf_add_u64(b, s->bound) == 0 &&
		    td_buf_add_u64(b, s->rtt) == 0;
	}
	ok = ok && td_buf_add_u32(b, t->tsc_mult) == 0 &&
	    td_buf_add_u32(b, t->tsc_shift) == 0;
	return ok ? 0 : -1;
}

/* One sample of a checkpoint: a TSYNC_SAMPLE frame (versions 1, 2). */
static int
timesync_load_frame(struct td_cur *c, struct td_tsync_sample *s)
{
	const uint8_t *at = td_cur_take(c, TIMESYNC_CK_FRAME);
	struct td_frame f;

	if (at == NULL || td_frame_parse(at, TIMESYNC_CK_FRAME, &f) != 1 ||
	    f.total != TIMESYNC_CK_FRAME || f.type != TD_MSG_TSYNC_SAMPLE ||
	    td_msg_unpack_tsync_sample(&f, s) == -1)
		return -1;
	return 0;
}

int
timesync_load(struct timesync *t, struct td_cur *c, uint32_t version)
{
	struct td_tsync_sample s;
	size_t each = version < 3 ? TIMESYNC_CK_FRAME : 48;
	uint32_t i, n;

	free(t->samples);
	memset(t, 0, sizeof *t);
	t->stride = 1;
	n = td_cur_u32(c);
	t->dropped = td_cur_u32(c);
	if (td_cur_bad(c) || n > TD_MAX_TSYNC_SAMPLES_READ ||
	    (size_t)n * each > td_cur_left(c))
		return -1;
	for (i = 0; i < n; i++) {
		if (version < 3) {
			if (timesync_load_frame(c, &s) == -1)
				return -1;
		} else {
			s.round = td_cur_u32(c);
			s.probes = td_cur_u32(c);
			s.ts = td_cur_u64(c);
			s.offset = (int64_t)td_cur_u64(c);
			s.scaling = td_cur_u64(c);
			s.frac = td_cur_u32(c);
			s.bound = td_cur_u64(c);
			s.rtt = td_cur_u64(c);
			if (td_cur_bad(c))
				return -1;
		}
		timesync_keep(t, &s);
	}
	if (version >= 2) {
		t->tsc_mult = td_cur_u32(c);
		t->tsc_shift = td_cur_u32(c);
		if (td_cur_bad(c) || t->tsc_shift >= 64 ||
		    (t->tsc_mult == 0 && t->tsc_shift != 0))
			return -1;
	}
	return 0;
}
