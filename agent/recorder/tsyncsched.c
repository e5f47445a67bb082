/*
 * tsyncsched.c: when the recorder runs time-sync rounds (see
 * recorder.h): an anchor round before the events and one after them, one
 * every interval the listener asked for in between, each over the session
 * by tsyncround.c while the rings go on being read; what the rounds made
 * is counted for the summary.  The time-sync state (struct tsyncsched,
 * r->ts: the sync instance, the rounds' counts, the x86-tsc factors) is
 * this file's alone.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "agent.h"

#include "instance.h"
#include "log.h"
#include "net.h"
#include "record.h"
#include "recorder.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tsync.h"
#include "tsyncround.h"
#include "uplink.h"
#include "xmalloc.h"
#include "banned.h"

/* Probes in a batch of a round (tsync_pick() picks one of each batch). */
#define TSYNCSCHED_PROBES	64
/* At most this long for the headers to go out before the first probes. */
#define TSYNCSCHED_HEADERS_MS	10000

/* The recorder's time sync. */
struct tsyncsched {
	struct tsync	*tsync;		/* NULL: no time sync */
	char		 err[512];	/* why tsync_new() failed */
	uint32_t	 round;
	uint32_t	 failed;
	uint32_t	 samples;	/* rounds that made one */
	double		 next;		/* elapsed time of the next round */
	bool		 tsc_have;	/* x86-tsc factors, no tsync */
	uint32_t	 tsc_mult;
	uint32_t	 tsc_shift;
};

/*
 * Set-up, as root: the sync instance, made now and used if the listener
 * asks for time sync (with -h), and the kernel's x86-tsc factors.
 */
struct tsyncsched *
tsyncsched_new(struct recorder *r)
{
	struct tsyncsched *ts = xcalloc(1, sizeof *ts);

	if (r->up != NULL)
		ts->tsync = tsync_new(r->in, ts->err, sizeof ts->err);
	if (strcmp(instance_clock(r->in), "x86-tsc") == 0)
		ts->tsc_have = tsync_tsc_factors(&ts->tsc_mult,
		    &ts->tsc_shift) == 0;
	return ts;
}

/* The network is given up for good: time sync needs the listener. */
void
tsyncsched_off(struct recorder *r)
{
	if (r->ts == NULL)
		return;
	tsync_free(r->ts->tsync);
	r->ts->tsync = NULL;
}

/*
 * The x86-tsc factors TSC2NSEC carries (the same the samples were made
 * with): the sync instance's, else the kernel's; false: none.
 */
bool
tsyncsched_tsc2nsec(const struct recorder *r, uint32_t *mult,
    uint32_t *shift)
{
	const struct tsyncsched *ts = r->ts;

	if (ts->tsync != NULL)
		return tsync_tsc2nsec(ts->tsync, mult, shift);
	*mult = ts->tsc_have ? ts->tsc_mult : 0;
	*shift = ts->tsc_have ? ts->tsc_shift : 0;
	return ts->tsc_have;
}

/*
 * Between the probes of a time-sync round: the finished pages of every CPU
 * go into the queue, so the rings do not fill while the round waits for
 * replies (64 and more round trips).  Nothing here sends or may close the
 * connection: with the queue congested, the pages wait for the loop.
 */
static void
tsyncsched_idle_cb(void *arg)
{
	drain_all(arg, DRAIN_ROUND);
}

void
tsyncsched_armed_read(struct agent_opts *o, int fd)
{
	char buf[TD_MAX_ARMED_SAMPLES * TD_ARMED_SAMPLE_LINE + 1], *p, *nl;
	struct agent_armed_sample *a;
	unsigned long long ts, ref, bound, rtt;
	unsigned int probes;
	size_t len = 0;
	ssize_t got;
	int end;

	while (len < sizeof buf - 1 && ((got = read(fd, buf + len,
	    sizeof buf - 1 - len)) > 0 || (got == -1 && errno == EINTR)))
		if (got > 0)
			len += (size_t)got;
	close(fd);
	buf[len] = '\0';
	free(o->armed_samples);
	o->armed_samples = xcalloc(TD_MAX_ARMED_SAMPLES, sizeof *a);
	o->narmed_samples = 0;
	for (p = buf; o->narmed_samples < TD_MAX_ARMED_SAMPLES &&
	    (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		*nl = '\0';
		end = -1;
		if (sscanf(p, "%llu %llu %llu %llu %u%n", &ts, &ref, &bound,
		    &rtt, &probes, &end) != 5 || end != (int)(nl - p) ||
		    probes == 0 || (o->narmed_samples > 0 &&
		    ts <= o->armed_samples[o->narmed_samples - 1].ts))
			break;
		a = &o->armed_samples[o->narmed_samples++];
		a->ts = ts;
		a->ref = ref;
		a->bound = bound;
		a->rtt = rtt;
		a->probes = probes;
	}
}

/*
 * A snapshot's recording (--flight-sync): the samples its armed agent
 * took over the window go first, before the pages' first timestamp, so
 * that trace-cmd interpolates over the window instead of extrapolating
 * the snapshot's own rounds back over it (armsync.c says why).  Their
 * offsets are made here, with this recording's x86-tsc factors, the ones
 * TSC2NSEC carries.
 */
static void
tsyncsched_armed_send(struct recorder *r, struct net *n)
{
	const struct agent_armed_sample *a;
	struct td_tsync_sample s;
	char err[256];
	uint32_t i;

	for (i = 0; i < r->o->narmed_samples; i++) {
		a = &r->o->armed_samples[i];
		memset(&s, 0, sizeof s);
		s.round = i;
		s.probes = a->probes;
		s.ts = a->ts;
		s.offset = (int64_t)(tsync_from_ns(r->ts->tsync, a->ref) -
		    a->ts);
		s.scaling = 1;
		s.bound = a->bound;
		s.rtt = a->rtt;
		if (net_tsync_sample(n, &s, err, sizeof err) == -1) {
			log_warnx("time sync: %s", err);
			return;
		}
	}
	if (r->o->narmed_samples > 0)
		log_debug("time sync: %u samples of the armed window sent",
		    r->o->narmed_samples);
}

/*
 * The first connection is up: the listener wants time sync or not.  When
 * it does, the headers that waited in the stream for the connection go
 * out first: the first probes go out on an empty queue.
 */
int
tsyncsched_connected(struct recorder *r)
{
	struct net *n = uplink_net(r->up);
	struct tsyncsched *ts = r->ts;

	if (n == NULL)
		return 0;
	if (net_tsync_interval(n) == TD_TSYNC_OFF) {
		tsync_free(ts->tsync);
		ts->tsync = NULL;
	} else if (ts->tsync == NULL)
		log_warnx("time sync is off: %s", ts->err);
	if (ts->tsync != NULL && uplink_flush(r->up,
	    TSYNCSCHED_HEADERS_MS) == -1) {
		r->failed = true;
		return -1;
	}
	if (ts->tsync != NULL)
		tsyncsched_armed_send(r, n);
	return 0;
}

/*
 * One time-sync round; a failed round is counted, not fatal.  The rounds
 * before and after the events are anchors (more probes, see tsync_pick()).
 */
void
tsyncsched_round(struct recorder *r, bool anchor)
{
	struct net *n = uplink_net(r->up);
	struct tsyncsched *ts = r->ts;
	struct td_tsync_sample s;
	char err[512];
	int ret;

	if (ts->tsync == NULL || n == NULL || !net_up(n))
		return;
	ret = tsyncround_run(n, ts->tsync, ts->round++,
	    TSYNCSCHED_PROBES, anchor, tsyncsched_idle_cb, r, &s, err,
	    sizeof err);
	if (ret == -1 && (!net_up(n) || net_fatal(n))) {
		if (uplink_lost(r->up, err) == -1)
			r->failed = true;
		return;
	}
	if (ret == 2) {
		/* the probes failed, a coarse sample went */
		if (ts->failed++ == 0)
			log_warnx("time sync: %s; a coarse sample instead, "
			    "+-%" PRIu64 " ns", err, s.bound);
		else
			log_debug("time sync: %s; a coarse sample instead, "
			    "+-%" PRIu64 " ns", err, s.bound);
		ts->samples++;
	} else if (ret == 1)
		log_debug("time sync: %s", err);
	else if (ret == -1 && ts->failed++ == 0)
		log_warnx("time sync: %s", err);
	else if (ret == -1)
		log_debug("time sync: %s", err);
	else {
		ts->samples++;
		log_debug("time sync round %u: offset %" PRId64 " at %"
		    PRIu64 ", +-%" PRIu64 " ns (%u probes)", s.round,
		    s.offset, s.ts, s.bound, s.probes);
	}
	/*
	 * The probes read a frame at a time: what came after the last reply
	 * (ACKs, an ERROR) may wait in the connection's input or in OpenSSL,
	 * where the loop's epoll does not look: it is handled now.
	 */
	if (uplink_readable(r->up, EPOLLIN) == -1)
		r->failed = true;
}

/* The loop's timer: a round when the listener's interval is over. */
void
tsyncsched_tick(struct recorder *r)
{
	struct net *n = uplink_net(r->up);
	struct tsyncsched *ts = r->ts;

	if (ts->tsync != NULL && n != NULL && net_up(n) &&
	    net_tsync_interval(n) > 0 && record_elapsed(r) >= ts->next) {
		tsyncsched_round(r, false);
		/* a round that lost the listener for good (-o) drops the
		   network */
		if ((n = uplink_net(r->up)) != NULL)
			ts->next = record_elapsed(r) +
			    net_tsync_interval(n) / 1e3;
	}
}

/* The end's summary: rounds that failed (several), and the counts. */
void
tsyncsched_log(const struct recorder *r)
{
	const struct tsyncsched *ts = r->ts;

	if (ts->failed > 1)
		log_warnx("time sync: %u of %u rounds failed", ts->failed,
		    ts->round);
	if (ts->tsync != NULL)
		log_debug("time sync: %u rounds, %u samples sent, %u failed",
		    ts->round, ts->samples, ts->failed);
}

/* Remove the sync instance (in the privileged parent too, at the end). */
void
tsyncsched_free(struct tsyncsched *ts)
{
	if (ts == NULL)
		return;
	tsync_free(ts->tsync);
	free(ts);
}
