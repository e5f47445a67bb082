/*
 * uplink.h: the network's set-up, first connection and end for any
 * producer of a recording in tdagent: the recorder (through recorder.h's
 * uplink_*()) and the Plan 9 import (plan9.c).  What happens between the
 * first connection and the end (sending, congestion, reconnecting) is the
 * producer's loop, with net.h.
 *
 * These log what the user must know (a spool that cannot be used, the
 * connection made, the listener's file); failures are -1 with a message
 * in err.  For the thread that owns the stream.
 */
#ifndef TD_UPLINK_H
#define TD_UPLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct agent_opts;
struct net;
struct td_hello;

/*
 * The stream to the listener o names, not connected yet: h holds the
 * recording's part of the HELLO (CPUs, page and commit size, long size,
 * ids, clock); the protocol version, byte order and --name are filled in.
 */
struct net	*uplink_net_new(const struct agent_opts *o, struct td_hello *h,
		    char *err, size_t errlen);
/* The first connection, tried again while the listener says "later". */
int		 uplink_net_start(struct net *n, const struct agent_opts *o,
		    char *err, size_t errlen);
/*
 * END with pages[ncpus] (pages sent per CPU), everything sent, the
 * listener's DONE, reconnecting for up to --reconnect-wait.  With a local
 * file (local), a listener lost is only a warning (0).
 */
int		 uplink_net_finish(struct net *n, const struct agent_opts *o,
		    const uint64_t *pages, int ncpus, bool local, char *err,
		    size_t errlen);

#endif
