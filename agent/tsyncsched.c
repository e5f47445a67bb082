/*
 * tsyncsched.c: when the recorder runs time-sync rounds (see
 * recorder.h): an anchor round before the events and one after them, one
 * every interval the listener asked for in between, each over the session
 * by tsyncround.c while the rings go on being read; what the rounds made
 * is counted for the summary.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/epoll.h>

#include "log.h"
#include "net.h"
#include "recorder.h"
#include "tdproto.h"
#include "tsync.h"
#include "tsyncround.h"
#include "uplink.h"
#include "banned.h"

/* Probes in a batch of a round (tsync_pick() picks one of each batch). */
#define TSYNCSCHED_PROBES	64
/* At most this long for the headers to go out before the first probes. */
#define TSYNCSCHED_HEADERS_MS	10000

/*
 * Between the probes of a time-sync round: the finished pages of every CPU
 * go into the queue, so the rings do not fill while the round waits for
 * replies (64 and more round trips).  Nothing here sends or may close the
 * connection: with the queue congested, the pages wait for the loop.
 */
static void
tsyncsched_idle_cb(void *arg)
{
	struct recorder *r = arg;
	int i;

	if (r->final || uplink_paused(r->up) || r->failed)
		return;
	r->in_round = true;
	for (i = 0; i < r->ncpus; i++)
		if (r->cpu[i].ring != NULL &&
		    drain_cpu(r, &r->cpu[i], DRAIN_WAKE) == -1)
			break;
	r->in_round = false;
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

	if (n == NULL)
		return 0;
	if (net_tsync_interval(n) == TD_TSYNC_OFF) {
		tsync_free(r->tsync);
		r->tsync = NULL;
	} else if (r->tsync == NULL)
		log_warnx("time sync is off: %s", r->tsync_err);
	if (r->tsync != NULL && uplink_flush(r->up,
	    TSYNCSCHED_HEADERS_MS) == -1) {
		r->failed = true;
		return -1;
	}
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
	struct td_tsync_sample s;
	char err[512];
	int ret;

	if (r->tsync == NULL || n == NULL || !net_up(n))
		return;
	ret = tsyncround_run(n, r->tsync, r->tsync_round++,
	    TSYNCSCHED_PROBES, anchor, tsyncsched_idle_cb, r, &s, err,
	    sizeof err);
	if (ret == -1 && (!net_up(n) || net_fatal(n))) {
		if (uplink_lost(r->up, err) == -1)
			r->failed = true;
		return;
	}
	if (ret == 2) {
		/* the probes failed, a coarse sample went */
		if (r->tsync_failed++ == 0)
			log_warnx("time sync: %s; a coarse sample instead, "
			    "+-%" PRIu64 " ns", err, s.bound);
		else
			log_debug("time sync: %s; a coarse sample instead, "
			    "+-%" PRIu64 " ns", err, s.bound);
		r->tsync_samples++;
	} else if (ret == 1)
		log_debug("time sync: %s", err);
	else if (ret == -1 && r->tsync_failed++ == 0)
		log_warnx("time sync: %s", err);
	else if (ret == -1)
		log_debug("time sync: %s", err);
	else {
		r->tsync_samples++;
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

	if (r->tsync != NULL && n != NULL && net_up(n) &&
	    net_tsync_interval(n) > 0 && record_elapsed(r) >= r->next_tsync) {
		tsyncsched_round(r, false);
		/* a round that lost the listener for good (-o) drops the
		   network */
		if ((n = uplink_net(r->up)) != NULL)
			r->next_tsync = record_elapsed(r) +
			    net_tsync_interval(n) / 1e3;
	}
}
