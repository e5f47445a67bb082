/*
 * tsyncround.c: one time-sync round of the agent (see tsyncround.h): the
 * batches of probes, the pick of a sample, the pauses of anchor rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "clock.h"
#include "net.h"
#include "tdproto.h"
#include "tsync.h"
#include "tsyncround.h"
#include "tsyncudp.h"
#include "xmalloc.h"
#include "banned.h"

/* Longest a time-sync round may hold up the recording loop. */
#define TSYNCROUND_MAX_MS	200
/*
 * In a round, the rings are read at most this often: reading them after
 * every reply spoiled the probes that followed (on loopback, samples off by
 * +-1 us instead of ~0.1, half of the rounds without a sample), and a
 * quiet round is over in a few ms anyway.
 */
#define TSYNCROUND_IDLE_MS	5
/* Probes of a round over the probe port (twice as many in an anchor). */
#define TSYNCROUND_UDP_PROBES	48
/* Longest a round over the probe port may take. */
#define TSYNCROUND_UDP_MS	100
/* Rounds in a row without a reply there before the rounds go in-band. */
#define TSYNCROUND_UDP_SILENT	3
/* The round number of tsyncround_coarse()'s markers (none of a round's). */
#define TSYNCROUND_COARSE_MARKS	(UINT32_MAX - 2)

static uint64_t
tsyncround_now_ms(void)
{
	return td_clock_now_ms();
}

/*
 * tsync_pick() makes the sample of the probe with the shortest round trip
 * after each batch of nprobes, or asks for another batch (at most
 * TSYNC_BATCHES, or TSYNC_ANCHOR_BATCHES for the first and the last round)
 * when the round met a busy moment; an anchor round pauses 2 to 9 ms
 * first, as other agents that stopped at the same time may be in their
 * last rounds too.
 */
/*
 * When a round's probes all failed: a sample all the same, from the local
 * part and the best network part known (an earlier round's, or the
 * handshake's), its bound grown by the clocks' largest drift since; wide,
 * but honest, and the recording is never left without a time shift.
 */
static int
tsyncround_coarse(struct net *n, struct tsync *t, uint32_t round,
    struct td_tsync_sample *sample)
{
	uint64_t ts, mono, half, nb;
	int64_t theta;

	if (!net_up(n) || net_fatal(n) ||
	    tsync_local(t, TSYNCROUND_COARSE_MARKS, &ts, &mono, &half) == -1 ||
	    net_tsync_estimated(n, mono, &theta, &nb) == -1)
		return -1;
	memset(sample, 0, sizeof *sample);
	sample->round = round;
	sample->probes = 1;
	sample->ts = ts;
	sample->offset = (int64_t)(tsync_from_ns(t, mono + (uint64_t)theta) -
	    ts);
	sample->scaling = 1;
	sample->bound = half + nb;
	sample->rtt = 2 * nb;
	return 0;
}

int
tsyncround_run(struct net *n, struct tsync *t, uint32_t round,
    uint32_t nprobes, bool anchor, void (*idle_cb)(void *), void *arg,
    struct td_tsync_sample *sample, char *err, size_t errlen)
{
	uint64_t *ref, *ts_s, *ts_r;
	uint32_t i, max, bad = 0;
	uint64_t start_ms, idle_ms;
	int ret = -1, picked;
	struct tsyncudp *u;
	bool last;

	/*
	 * The probe port first: no flush, no wait behind the data.  When it
	 * does not answer (a firewall), the round probes in-band, and after
	 * a few such rounds only in-band on this connection.
	 */
	if ((u = net_tsync_udp(n, err, errlen)) != NULL) {
		if (tsyncudp_round(u, t, round, anchor ?
		    2 * TSYNCROUND_UDP_PROBES : TSYNCROUND_UDP_PROBES,
		    TSYNCROUND_UDP_MS, idle_cb, arg, sample, err,
		    errlen) == 0) {
			int64_t theta;
			uint64_t b, at;

			tsyncudp_last(u, &theta, &b, &at);
			net_tsync_estimate(n, theta, b, at);
			return net_tsync_sample(n, sample, err, errlen);
		}
		if (tsyncudp_silent(u) >= TSYNCROUND_UDP_SILENT)
			net_tsync_udp_off(n);
	}
	if (net_tsync_begin(n, TSYNCROUND_MAX_MS, err, errlen) == -1) {
		if (tsyncround_coarse(n, t, round, sample) == 0 &&
		    net_tsync_sample(n, sample, err, errlen) == 0)
			return 2;
		return -1;
	}
	start_ms = idle_ms = tsyncround_now_ms();
	max = nprobes * (anchor ? TSYNC_ANCHOR_BATCHES : TSYNC_BATCHES);
	ref = xcalloc(max, sizeof *ref);
	ts_s = xcalloc(max, sizeof *ts_s);
	ts_r = xcalloc(max, sizeof *ts_r);
	for (i = 0; i < max; i++) {
		if (net_tsync_probe(n, t, round, i, &ref[i], &bad, err,
		    errlen) == -1)
			goto out_free;
		/* between probes (outside their round trips): the rings */
		if (idle_cb != NULL &&
		    tsyncround_now_ms() - idle_ms >= TSYNCROUND_IDLE_MS) {
			idle_cb(arg);
			idle_ms = tsyncround_now_ms();
		}
		/* a slow link gets fewer probes, not a long pause */
		last = i + 1 == max ||
		    tsyncround_now_ms() - start_ms > TSYNCROUND_MAX_MS;
		if ((i + 1) % nprobes != 0 && !last)
			continue;
		/* a batch is done; a round that met a busy moment goes on */
		if (tsync_collect(t, round, ts_s, ts_r, i + 1) == -1) {
			snprintf(err, errlen, "cannot read the sync markers "
			    "back");
			goto out_free;
		}
		picked = tsync_pick(t, round, ref, ts_s, ts_r, i + 1, last,
		    anchor, sample);
		if (picked == -1) {
			snprintf(err, errlen, "no usable probe in round %u (%u "
			    "bad replies)", round, bad);
			goto out_free;
		}
		if (picked == 2) {
			snprintf(err, errlen, "no sample in round %u: its "
			    "probes met a busy moment", round);
			ret = 1;
			goto out_free;
		}
		if (picked == 0)
			break;
		if (anchor) {
			/* out of step with whatever kept the other side busy */
			struct timespec pause = { 0, 2000000 };
			uint32_t r = 0;

			if (getrandom(&r, sizeof r, 0) == sizeof r)
				pause.tv_nsec += (long)(r % 8) * 1000000;
			nanosleep(&pause, NULL);
		}
	}
	if (net_tsync_sample(n, sample, err, errlen) == -1)
		goto out_free;
	ret = 0;
out_free:
	net_tsync_end(n);
	free(ref);
	free(ts_s);
	free(ts_r);
	if (ret == -1 && tsyncround_coarse(n, t, round, sample) == 0 &&
	    net_tsync_sample(n, sample, err, errlen) == 0)
		ret = 2;
	return ret;
}
