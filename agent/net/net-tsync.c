/*
 * net-tsync.c: the agent's session's part in time sync (docs/timesync.md):
 * a round's in-band probes over the connection (PROBE and its REPLY
 * between two markers in the trace clock) and its sample queued into the
 * recording, the listener's probe port (WELCOME version 5) and its socket
 * for the connection, and the best network part known (listener - agent
 * CLOCK_MONOTONIC), for the coarse samples of rounds whose probes all
 * failed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "clock.h"
#include "conn.h"
#include "net.h"
#include "net-local.h"
#include "stream.h"
#include "tdproto.h"
#include "tsync.h"
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

/*
 * Before a round: everything queued goes out first, waiting up to ms (the
 * probes must not wait behind data), then each call blocks for at most ms.
 */
int
net_tsync_begin(struct net *n, int ms, char *err, size_t errlen)
{
	if (!net_up(n)) {
		snprintf(err, errlen, "no connection");
		return -1;
	}
	if (stream_batch_end(n->s) == -1 ||
	    net_flush_to(n, 0, ms, err, errlen) == -1)
		return -1;
	if (net_pending(n) != 0) {
		/* probes must not wait behind data: another time */
		snprintf(err, errlen, "the link is busy (%zu bytes waiting)",
		    net_pending(n));
		return -1;
	}
	conn_set_blocking(n->c, true, ms);
	return 0;
}

/*
 * One probe, its round trip between two markers in the trace clock: 's',
 * PROBE, the listener stamps its reference clock on receipt and answers,
 * 'r'.  Replies of earlier probes that timed out are skipped and counted.
 */
int
net_tsync_probe(struct net *n, struct tsync *t, uint32_t round, uint32_t seq,
    uint64_t *ref_ns, uint32_t *bad, char *err, size_t errlen)
{
	struct td_tsync_probe p, q;
	struct td_frame f;
	struct td_buf b;
	bool fatal;
	int ret = -1;

	p.round = round;
	p.seq = seq;
	td_buf_init(&b, 64);
	td_msg_pack_tsync_probe(&b, &p);
	if (tsync_mark(t, round, seq, 's') == -1) {
		snprintf(err, errlen, "cannot write a sync marker: %s",
		    strerror(errno));
		goto out_free_buf;
	}
	if (conn_write_all(n->c, b.data, b.len, NULL) == -1) {
		net_err(err, errlen, "lost the listener");
		goto out_free_buf;
	}
	/* replies of earlier probes that timed out are skipped */
	for (;;) {
		if (net_expect(n, n->c, TD_MSG_TSYNC_REPLY, &f, &fatal,
		    err, errlen) == -1) {
			n->fatal = fatal;
			goto out_free_buf;
		}
		if (td_msg_unpack_tsync_reply(&f, &q) == 0 &&
		    q.round == round && q.seq == seq)
			break;
		(*bad)++;	/* dropped and counted */
		conn_consume(n->c, &f);
	}
	tsync_mark(t, round, seq, 'r');
	*ref_ns = q.ref_ns;
	conn_consume(n->c, &f);
	ret = 0;
out_free_buf:
	td_buf_free(&b);
	return ret;
}

/* Queue a round's sample: it is part of the recording, the probes not. */
int
net_tsync_sample(struct net *n, const struct td_tsync_sample *sample,
    char *err, size_t errlen)
{
	struct td_buf *q;

	if ((q = stream_frame(n->s)) == NULL ||
	    td_msg_pack_tsync_sample(q, sample) == -1) {
		snprintf(err, errlen, "cannot frame a sync sample");
		return -1;
	}
	return 0;
}

/* After a round: a connection still up stops blocking. */
void
net_tsync_end(struct net *n)
{
	if (net_up(n))
		conn_set_blocking(n->c, false, n->np.timeout * 1000);
}
