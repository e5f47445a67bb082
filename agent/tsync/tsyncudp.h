/*
 * tsyncudp.h: the agent's time-sync rounds over the listener's probe port
 * (docs/timesync.md, "The probe port").
 *
 * A round is split in two, measured back to back for each probe: the
 * local part, a marker in the trace clock bracketed by two readings of
 * the agent's CLOCK_MONOTONIC (no network); the network part, the agent's
 * CLOCK_MONOTONIC against the listener's, from an authenticated UDP
 * probe and its reply with the kernels' receive stamps (NTP's four
 * times).  The probe whose summed bound is smallest makes the sample.
 * Nothing here touches the session's stream or queue: a round never
 * waits for the bulk data.  For the recorder's thread; nothing logs.
 */
#ifndef TD_TSYNCUDP_H
#define TD_TSYNCUDP_H

#include <stddef.h>
#include <stdint.h>

struct tsync;
struct tsyncudp;
struct td_tsync_sample;

/*
 * A socket to port at the address of the TCP connection tcp_fd is
 * connected to, with WELCOME's id and key; NULL with err if it cannot be
 * (not TCP: a guest's serial port, vsock, a Unix socket).
 */
struct tsyncudp	*tsyncudp_new(int tcp_fd, uint16_t port, uint64_t id,
		    const uint8_t *key, char *err, size_t errlen);
/*
 * Round number round of up to nprobes probes, for at most max_ms: 0 and
 * sample filled; -1 with err (no reply at all: the caller probes in-band).
 * idle_cb(arg), if not NULL, is called every few ms between probes.
 */
int		 tsyncudp_round(struct tsyncudp *u, struct tsync *t,
		    uint32_t round, uint32_t nprobes, int max_ms,
		    void (*idle_cb)(void *), void *arg,
		    struct td_tsync_sample *sample, char *err, size_t errlen);
/*
 * Rounds in a row that got no reply at all, 0 once one did (a busy
 * listener is not a firewall).
 */
unsigned int	 tsyncudp_silent(const struct tsyncudp *u);
/* The last round's network part (after a round that returned 0). */
void		 tsyncudp_last(const struct tsyncudp *u, int64_t *theta,
		    uint64_t *bound, uint64_t *at);
void		 tsyncudp_free(struct tsyncudp *u);

#endif
