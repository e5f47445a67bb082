/*
 * tsyncround.h: one time-sync round of the agent, over the session.
 *
 * Probes go out on an empty queue, one at a time (net_tsync_probe(), each
 * between two markers in the trace clock, see tsync.h), in batches of
 * nprobes; after each batch tsync_pick() makes the sample of the probe
 * with the shortest round trip, or asks for another batch when the round
 * met a busy moment.  The sample is queued into the recording's stream;
 * the probes are not part of it.  A round blocks the caller's loop for at
 * most a few hundred ms, calling idle_cb between replies so the rings go
 * on being read.  For the recorder's thread; nothing here logs.
 */
#ifndef TD_TSYNCROUND_H
#define TD_TSYNCROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct net;
struct tsync;
struct td_tsync_sample;

/*
 * Round number round of nprobes probes a batch (an anchor round, the first
 * or the last of a recording, makes more batches): fills sample and queues
 * it.  Returns 0; 1 with err when the round made no sample (not a
 * failure); 2 with err saying why when its probes failed but a coarse
 * sample went all the same (the local part and an earlier network part,
 * with a wide bound); or -1 with err (the connection may then be down: see
 * net_up()).  idle_cb(arg), if not NULL, is called every few ms between
 * replies: the recorder's rings go on into the queue (pages only, which
 * the round sends after its sample), so many probes do not stop the
 * recording.
 */
int	tsyncround_run(struct net *n, struct tsync *t, uint32_t round,
	    uint32_t nprobes, bool anchor, void (*idle_cb)(void *), void *arg,
	    struct td_tsync_sample *sample, char *err, size_t errlen);

#endif
