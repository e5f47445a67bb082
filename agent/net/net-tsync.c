/*
 * net-tsync.c: what the agent's session keeps for time sync besides the
 * in-band probes of net.c: the listener's probe port (WELCOME version 5)
 * and its socket for the connection, and the best network part known
 * (listener - agent CLOCK_MONOTONIC), for the coarse samples of rounds
 * whose probes all failed (docs/timesync.md).
 */
#include <string.h>
#include <time.h>

#include "clock.h"
#include "conn.h"
#include "net.h"
#include "net-local.h"
#include "tsyncudp.h"
#include "banned.h"

/* Two clocks drift apart by at most 1 / this (NTP slews each 500 ppm). */
#define NET_DRIFT_DIV		1000

/* WELCOME's probe port (version 5); its socket is made at the first round. */
void
net_tsync_welcome(struct net *n, const struct td_welcome *w)
{
	tsyncudp_free(n->udp);
	n->udp = NULL;
	n->udp_port = w->version >= 5 ? w->udp_port : 0;
	n->udp_id = w->udp_id;
	memcpy(n->udp_key, w->udp_key, sizeof n->udp_key);
}

/* The probe port's socket for this connection; NULL: probe in-band. */
struct tsyncudp *
net_tsync_udp(struct net *n, char *err, size_t errlen)
{
	if (!net_up(n) || n->udp_port == 0)
		return NULL;
	if (n->udp == NULL &&
	    (n->udp = tsyncudp_new(conn_fd(n->c), n->udp_port, n->udp_id,
	    n->udp_key, err, errlen)) == NULL)
		n->udp_port = 0;	/* not on this connection */
	return n->udp;
}

/*
 * The network part measured at (agent CLOCK_MONOTONIC) at: theta =
 * listener - agent within bound.  Kept when, aged to now, it beats the one
 * held.
 */
void
net_tsync_estimate(struct net *n, int64_t theta, uint64_t bound, uint64_t at)
{
	uint64_t now = td_clock_now_ns(), b0, b1;

	b1 = bound + (now > at ? now - at : 0) / NET_DRIFT_DIV;
	b0 = n->est_bound + (now > n->est_at ? now - n->est_at : 0) /
	    NET_DRIFT_DIV;
	if (n->est && b0 < b1)
		return;
	n->est = true;
	n->est_theta = theta;
	n->est_bound = bound;
	n->est_at = at;
}

/*
 * The best known network part, aged to at (its bound grows by the
 * largest drift of two clocks, 1000 ppm); -1 if none is known.
 */
int
net_tsync_estimated(const struct net *n, uint64_t at, int64_t *theta,
    uint64_t *bound)
{
	if (!n->est)
		return -1;
	*theta = n->est_theta;
	*bound = n->est_bound + (at > n->est_at ? at - n->est_at :
	    n->est_at - at) / NET_DRIFT_DIV + 1;
	return 0;
}

/* The probe port gets no answers: in-band for the rest of the connection. */
void
net_tsync_udp_off(struct net *n)
{
	tsyncudp_free(n->udp);
	n->udp = NULL;
	n->udp_port = 0;
}
