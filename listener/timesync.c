/*
 * timesync.c: the listener's side of time sync (docs/timesync.md): probes
 * answered in the reference clock (CLOCK_MONOTONIC), the samples an agent
 * sends, and at the end the options that put its file on the listener's
 * timeline (TIME_SHIFT, DATE, and our own with each sample's error bound).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "listener.h"
#include "log.h"
#include "session.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tsfilter.h"
#include "xmalloc.h"
#include "banned.h"

/* A sample this far off its neighbours' line is always plausible. */
#define TIMESYNC_FLOOR_NS	1000
/* A bound within 8 x this of its neighbours' is never imprecise. */
#define TIMESYNC_PRECISE_NS	10000

static uint64_t timesync_date_us;	/* CLOCK_REALTIME - MONOTONIC, us */

uint64_t
timesync_now(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * A probe is answered at once with the reference time (CLOCK_MONOTONIC)
 * taken when this read began, before any other frame of it was handled.
 * The reply is written right here, not at the next turn of the loop: the
 * callbacks of other sessions that the loop runs first (their pages to
 * decompress and write) would lengthen the way back of this probe only.
 */
int
timesync_probe(struct session *s, const struct td_frame *f)
{
	struct td_tsync_probe p;

	if (td_msg_unpack_tsync_probe(f, &p) == -1) {
		session_close(s, "malformed TSYNC_PROBE");
		return -1;
	}
	p.ref_ns = s->rx_ns;
	td_msg_pack_tsync_reply(&s->out, &p);
	reader_send(s->bev, s->out.data, s->out.len);
	td_buf_reset(&s->out);
	return 0;
}

/* Keep a sample; absurd ones are dropped and counted. */
int
timesync_sample(struct session *s, const struct td_frame *f)
{
	struct td_tsync_sample t;

	if (td_msg_unpack_tsync_sample(f, &t) == -1) {
		session_close(s, "malformed TSYNC_SAMPLE");
		return -1;
	}
	if (t.bound > TD_MAX_TSYNC_BOUND || t.scaling != 1 || t.frac != 0 ||
	    (s->nsamples > 0 && t.ts <= s->samples[s->nsamples - 1].ts) ||
	    s->nsamples == TD_MAX_TSYNC_SAMPLES) {
		s->samples_dropped++;
		return 0;
	}
	if (s->nsamples % 64 == 0)
		s->samples = xreallocarray(s->samples, s->nsamples + 64,
		    sizeof *s->samples);
	s->samples[s->nsamples++] = t;
	log_debug("%s: time sync round %u: offset %" PRId64 " at %" PRIu64
	    ", +-%" PRIu64 " ns, %u probes", s->label, t.round, t.offset,
	    t.ts, t.bound, t.probes);
	return 0;
}

/* TSC2NSEC {u32 mult, u32 shift, u64 offset}, in the agent's byte order. */
void
timesync_tsc2nsec(struct session *s, const uint8_t *p)
{
	uint32_t v[2];
	int i;

	for (i = 0; i < 2; i++, p += 4)
		v[i] = s->hello.big_endian ?
		    (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		    (uint32_t)p[2] << 8 | p[3] :
		    (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
		    (uint32_t)p[1] << 8 | p[0];
	if (v[0] != 0 && v[1] < 64) {
		s->tsc_mult = v[0];
		s->tsc_shift = v[1];
	}
}

/*
 * Set aside, marking them in out[], the samples trace-cmd should not draw
 * its line through: first those whose bound is far wider than their
 * neighbours' and whose offset disagrees with the precise ones
 * (td_tsfilter_imprecise(): rounds made while the machine was
 * saturated), then of the others those that lie off the line through
 * their neighbours (td_tsfilter_outliers(): rounds whose probes were all
 * lopsided the same way, which the agent cannot see).  The counts go to
 * *imprecise and *off_line.  Offsets are in the clock's units: x86-tsc's
 * are cycles, converted with the agent's TSC2NSEC (sent at the end, kept
 * in checkpoints); without it nothing is set aside.
 */
static void
timesync_set_aside(struct session *s, bool *out, uint32_t *imprecise,
    uint32_t *off_line)
{
	uint64_t *ts, *bound;
	int64_t *off;
	uint32_t *at;
	bool *mark;
	double units = 1;
	uint32_t i, m, n = s->nsamples;

	*imprecise = *off_line = 0;
	if (strcmp(s->hello.clock, "x86-tsc") == 0) {
		if (s->tsc_mult == 0) {
			log_info("%s: time sync: no TSC2NSEC from the agent, "
			    "samples not checked against their neighbours",
			    s->label);
			return;
		}
		units = (double)(1ULL << s->tsc_shift) / s->tsc_mult;
	}
	ts = xreallocarray(NULL, n, sizeof *ts);
	off = xreallocarray(NULL, n, sizeof *off);
	bound = xreallocarray(NULL, n, sizeof *bound);
	at = xreallocarray(NULL, n, sizeof *at);
	mark = xcalloc(n, sizeof *mark);
	for (i = 0; i < n; i++) {
		ts[i] = s->samples[i].ts;
		off[i] = s->samples[i].offset;
		bound[i] = s->samples[i].bound;
	}
	*imprecise = td_tsfilter_imprecise(ts, off, bound, n,
	    TIMESYNC_PRECISE_NS, units, out);
	/* the samples not set aside yet, side by side */
	for (i = m = 0; i < n; i++) {
		if (out[i])
			continue;
		ts[m] = ts[i];
		off[m] = off[i];
		at[m++] = i;
	}
	*off_line = td_tsfilter_outliers(ts, off, m, TIMESYNC_FLOOR_NS * units,
	    mark);
	for (i = 0; i < m; i++)
		if (mark[i])
			out[at[i]] = true;
	free(ts);
	free(off);
	free(bound);
	free(at);
	free(mark);
}

/*
 * TIME_SHIFT as trace-cmd 3.1.6 reads it: peer id, flags (1: interpolate),
 * CPU count, per CPU {count, ts[], offset[], scaling[]}, then per CPU
 * frac[] (each CPU's own count).  Every CPU gets the same samples: the
 * trace clock is one clock.  DATE turns the reference into wall time, and
 * our own option keeps each sample's error bound.
 */
int
timesync_options(struct session *s)
{
	struct td_buf b;
	const struct td_tsync_sample *t, *first, *last;
	uint64_t bound = 0;
	double drift = 0;
	uint32_t i, j, cpu, n = s->nsamples, step, kept, m, off_line;
	uint32_t imprecise;
	uint32_t *use;
	bool *out;
	bool ok;
	int ret = -1;

	if (s->cfg->tsync_interval == TD_TSYNC_OFF)
		return 0;
	if (n == 0) {
		log_warnx("%s: no time sync: the agent sent no usable sample "
		    "(%u dropped); the file keeps the agent's own clock",
		    s->label, s->samples_dropped);
		return 0;
	}
	out = xcalloc(n, sizeof *out);
	timesync_set_aside(s, out, &imprecise, &off_line);
	m = n - imprecise - off_line;
	/*
	 * The option holds every sample once per CPU: 16 + ncpus * (4 + 32 m)
	 * bytes.  When that would pass the option cap, keep every k-th
	 * sample (and always the last): interpolation needs fewer points than
	 * a long recording makes.
	 */
	step = 1;
	while ((uint64_t)16 + (uint64_t)s->hello.ncpus * (4 + 32 *
	    (uint64_t)((m + step - 1) / step + 1)) > TD_MAX_OPTION_SIZE)
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
	ok = td_buf_add_u64(&b, s->session_id) == 0 &&
	    td_buf_add_u32(&b, 1) == 0 &&
	    td_buf_add_u32(&b, s->hello.ncpus) == 0;
	for (cpu = 0; ok && cpu < s->hello.ncpus; cpu++) {
		ok = td_buf_add_u32(&b, kept) == 0;
		for (i = 0; ok && i < kept; i++)
			ok = td_buf_add_u64(&b, s->samples[use[i]].ts) == 0;
		for (i = 0; ok && i < kept; i++)
			ok = td_buf_add_u64(&b,
			    (uint64_t)s->samples[use[i]].offset) == 0;
		for (i = 0; ok && i < kept; i++)
			ok = td_buf_add_u64(&b,
			    s->samples[use[i]].scaling) == 0;
	}
	for (cpu = 0; ok && cpu < s->hello.ncpus; cpu++)
		for (i = 0; ok && i < kept; i++)
			ok = td_buf_add_u64(&b, s->samples[use[i]].frac) == 0;
	if (!ok || td_file_add_option(s->file, TD_OPT_TIME_SHIFT, b.data,
	    b.len) == -1)
		goto out;
	if (step > 1)
		log_info("%s: time sync: %u of %u samples kept in TIME_SHIFT "
		    "(option size cap)", s->label, kept, m);
	/*
	 * One DATE for every file of this listener, taken once: files of
	 * sessions that end at different times must not differ by the
	 * rounding of a microsecond.
	 */
	if (timesync_date_us == 0)
		timesync_date_us = (timesync_now(CLOCK_REALTIME) -
		    timesync_now(CLOCK_MONOTONIC)) / 1000;
	td_buf_reset(&b);
	td_buf_printf(&b, "0x%" PRIx64, timesync_date_us);
	td_buf_add(&b, "", 1);
	if (td_file_add_option(s->file, TD_OPT_DATE, b.data, b.len) == -1)
		goto out;
	td_buf_reset(&b);
	td_buf_printf(&b, "tracedock tsync 1\nreference CLOCK_MONOTONIC\n"
	    "round ts offset bound_ns rtt_ns probes\n");
	for (i = 0; i < n; i++) {
		if (out[i])
			continue;
		t = &s->samples[i];
		td_buf_printf(&b, "%u %" PRIu64 " %" PRId64 " %" PRIu64 " %"
		    PRIu64 " %u\n", t->round, t->ts, t->offset, t->bound,
		    t->rtt, t->probes);
		if (t->bound > bound)
			bound = t->bound;
	}
	td_buf_add(&b, "", 1);
	if (td_file_add_option(s->file, TD_OPT_TD_TSYNC, b.data, b.len) == -1)
		goto out;
	first = &s->samples[use[0]];
	last = &s->samples[use[kept - 1]];
	if (kept > 1 && last->ts > first->ts)
		drift = td_tsfilter_diff(last->offset, first->offset) /
		    (double)(last->ts - first->ts) * 1e6;
	log_info("%s: time sync: %u samples (%u dropped, %u imprecise, %u "
	    "off the line), offset %" PRId64 " %s, drift %.3f ppm, error "
	    "bound +-%" PRIu64 " ns", s->label, m, s->samples_dropped,
	    imprecise, off_line, last->offset,
	    strcmp(s->hello.clock, "x86-tsc") == 0 ? "cycles" : "ns", drift,
	    bound);
	ret = 0;
out:
	td_buf_free(&b);
	free(use);
	free(out);
	return ret;
}
