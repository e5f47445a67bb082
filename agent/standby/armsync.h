/*
 * armsync.h: time sync for an armed ring's window (docs/flight-recorder.md,
 * "Time sync over the window"; issue 30).
 *
 * A snapshot's own rounds come after the window it streams, which may
 * be minutes old; so while armed, the standby agent takes a sample over
 * the listener's probe port (tsyncudp.h: the standby session's id and
 * key from WELCOME) at arm time and every ARMSYNC_FACTOR times the
 * listener's --tsync-interval, in the armed instance's trace clock (a
 * small sibling instance of its own, tsync.h), and keeps those that cover
 * the ring's window.  A snapshot hands them to its recording (tdagent
 * --flight-sync FD), which sends them before its own.  Each sample is
 * kept as (trace-clock time, the listener's CLOCK_MONOTONIC at it): the
 * recording turns that into an offset with its own x86-tsc factors.
 *
 * Failures return -1 (or NULL) with a message in err; nothing here logs.
 * The standby agent's thread only.
 */
#ifndef TD_ARMSYNC_H
#define TD_ARMSYNC_H

#include <stddef.h>
#include <stdint.h>

struct instance;
struct armsync;

/*
 * A sample every ARMSYNC_FACTOR times the listener's --tsync-interval
 * (30 s at its default of 1 s), ARMSYNC_MIN_MS at least; 0: at arm
 * time and after a reconnection only.
 */
#define ARMSYNC_FACTOR		30
#define ARMSYNC_MIN_MS		1000

/*
 * For the armed instance (its own sync instance, small, of the same
 * clock); armed must outlive it.
 */
struct armsync	*armsync_new(struct instance *armed, char *err,
		    size_t errlen);
/*
 * The standby connection (TCP socket tcp_fd) and WELCOME's probe port,
 * id and key, interval its tsync_interval: a round is due now (its
 * sample tells whether the reference is the one of the samples kept).
 * Port 0 (a listener before version 5, --no-udp-probes, time sync off):
 * no rounds, and the samples kept go (nothing could tell).
 */
void		 armsync_connected(struct armsync *as, int tcp_fd,
		    uint16_t port, uint64_t id, const uint8_t *key,
		    uint32_t interval);
/* ms until a round is due (0: now), -1: none will be. */
long long	 armsync_due(const struct armsync *as, uint64_t now_ms);
/*
 * A round now; the samples older than the ring's window needs (the
 * last one before its oldest event, on any CPU) are let go.  0 and
 * *bound (ns) of the sample kept, or -1 and err (due again later).
 */
int		 armsync_round(struct armsync *as, uint64_t *bound, char *err,
		    size_t errlen);
/* Samples kept. */
uint32_t	 armsync_count(const struct armsync *as);
/*
 * The samples for a snapshot's recording, a line each "TS REF BOUND
 * RTT PROBES" (decimal; TS in the trace clock, REF the listener's
 * CLOCK_MONOTONIC in ns), oldest first, in a new memory file read from
 * its start: its descriptor, or -1 (none kept, or no memory file).
 */
int		 armsync_export(const struct armsync *as);
void		 armsync_free(struct armsync *as);

#endif
