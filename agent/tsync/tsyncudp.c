/*
 * tsyncudp.c: time-sync rounds over the listener's probe port (see
 * tsyncudp.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "tdproto.h"
#include "tsudp.h"
#include "tsync.h"
#include "tsyncudp.h"
#include "udpstamp.h"
#include "xmalloc.h"
#include "banned.h"

/* How long a probe waits for its reply before the next one goes. */
#define TSYNCUDP_SPACING_MS	2
/* The rings are read between probes at most this often. */
#define TSYNCUDP_IDLE_MS	5
/*
 * The two CLOCK_MONOTONICs (and the trace clock against the agent's) may
 * drift apart between the local and the network part of a probe by at
 * most 1000 ppm: NTP slews each clock by at most 500 ppm.
 */
#define TSYNCUDP_DRIFT_DIV	1000
/*
 * Datagrams read at a time: the socket is not connected, anyone may keep
 * it from ever being empty, so the round's clock is read between batches.
 */
#define TSYNCUDP_BATCH		64

/* The socket and the session's id and key. */
struct tsyncudp {
	int		 fd;
	/*
	 * Not connect()ed: a listener bound to a wildcard address may answer
	 * from another of its addresses; the MAC tells its replies.
	 */
	struct sockaddr_storage to;
	socklen_t	 tolen;
	uint64_t	 id;
	uint8_t		 key[TD_TSUDP_KEY_LEN];
	unsigned int	 silent;
	bool		 answered;	/* ever, on this connection */
	int64_t		 theta;		/* the last round's network */
	uint64_t	 theta_bound;
	uint64_t	 theta_at;	/* CLOCK_MONOTONIC */
};

/* One probe: its local part, its network part. */
struct tsyncudp_probe {
	uint64_t	 m0, m1;	/* CLOCK_MONOTONIC around the marker */
	uint64_t	 t1;		/* the probe's sending */
	uint64_t	 t4;		/* the reply's receipt */
	int64_t		 off;		/* listener - agent MONOTONIC */
	uint64_t	 nbound;
	int64_t		 delay;
	bool		 answered;
	bool		 ok;		/* answered, in causal order */
};

/* A socket to the listener's probe port, at its TCP peer's address. */
struct tsyncudp *
tsyncudp_new(int tcp_fd, uint16_t port, uint64_t id, const uint8_t *key,
    char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	struct tsyncudp *u;
	int one = 1;

	if (tcp_fd == -1 || port == 0 ||
	    getpeername(tcp_fd, (struct sockaddr *)&ss, &len) == -1 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
		snprintf(err, errlen, "no probe port: not a TCP connection");
		return NULL;
	}
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
	u = xcalloc(1, sizeof *u);
	u->to = ss;
	u->tolen = len;
	u->id = id;
	memcpy(u->key, key, sizeof u->key);
	u->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (u->fd == -1 ||
	    setsockopt(u->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one,
	    sizeof one) == -1) {
		snprintf(err, errlen, "no probe port: %s", strerror(errno));
		tsyncudp_free(u);
		return NULL;
	}
	return u;
}

/*
 * Take the replies waiting (TSYNCUDP_BATCH datagrams at most), to probes
 * 0 .. n-1 of round: how many were new.  Replies of earlier rounds, repeated ones and anything the key did
 * not sign are dropped.
 */
static uint32_t
tsyncudp_take(struct tsyncudp *u, uint32_t round, struct tsyncudp_probe *p,
    uint32_t n)
{
	uint8_t buf[TD_TSUDP_LEN + 1];
	struct tsyncudp_probe *q;
	struct timespec stamp;
	struct td_tsudp m;
	uint64_t t4_err;
	uint32_t got = 0, i;
	ssize_t len;

	for (i = 0; i < TSYNCUDP_BATCH; i++) {
		len = td_udpstamp_recv(u->fd, buf, sizeof buf, NULL, NULL,
		    &stamp);
		if (len < 0 && errno == EMSGSIZE)
			continue;	/* not a reply */
		if (len < 0)
			return got;
		if ((stamp.tv_sec == 0 && stamp.tv_nsec == 0) ||
		    td_tsudp_peek(buf, (size_t)len, &m) == -1 ||
		    m.type != TD_TSUDP_REPLY || m.id != u->id ||
		    m.round != round || m.seq >= n ||
		    (q = &p[m.seq])->answered || m.t1 != q->t1 ||
		    !td_tsudp_check(buf, (size_t)len, u->key))
			continue;
		q->answered = true;
		got++;
		q->t4 = td_clock_real_to_mono((uint64_t)stamp.tv_sec *
		    1000000000ULL + (uint64_t)stamp.tv_nsec, &t4_err);
		/* answered, but not usable when not causal */
		q->ok = td_tsudp_offset(&m, q->t4, t4_err, &q->off,
		    &q->nbound, &q->delay) == 0;
	}
	return got;
}

/* Wait up to ms for a datagram. */
static void
tsyncudp_wait(struct tsyncudp *u, uint64_t ns)
{
	struct pollfd pfd;

	pfd.fd = u->fd;
	pfd.events = POLLIN;
	poll(&pfd, 1, (int)((ns + 999999) / 1000000));
}

/* Probe seq: its marker between two clock readings, then the datagram. */
static int
tsyncudp_send(struct tsyncudp *u, struct tsync *t, uint32_t round,
    uint32_t seq, struct tsyncudp_probe *p, char *err, size_t errlen)
{
	struct td_tsudp m;
	uint8_t buf[TD_TSUDP_LEN];

	memset(p, 0, sizeof *p);
	p->m0 = td_clock_ns(CLOCK_MONOTONIC);
	if (tsync_mark(t, round, seq, 's') == -1) {
		snprintf(err, errlen, "cannot write a sync marker: %s",
		    strerror(errno));
		return -1;
	}
	p->m1 = td_clock_ns(CLOCK_MONOTONIC);
	memset(&m, 0, sizeof m);
	m.type = TD_TSUDP_PROBE;
	m.id = u->id;
	m.round = round;
	m.seq = seq;
	m.t1 = p->t1 = td_clock_ns(CLOCK_MONOTONIC);
	td_tsudp_pack(buf, &m, u->key);
	/* ICMP refused, a full buffer: a lost probe */
	sendto(u->fd, buf, sizeof buf, 0, (struct sockaddr *)&u->to,
	    u->tolen);
	return 0;
}

/*
 * The network part at probe bi's marker, from every answered probe: each
 * says theta lies within [off - nbound, off + nbound] during its
 * exchange, that is within [off - w, off + w] at the marker, w its bound
 * plus the drift (1000 ppm) over the span from the earlier of its t1 and
 * the marker's m0 to the later of its t4 and m1.  Every interval holds
 * the truth, so their intersection does: [theta - d2, theta + d1] for a
 * probe whose ways took d1 and d2, so the intersection's ends come from
 * the quickest way out and the quickest way back of any probes, where the
 * probe with the smallest bound needs both ways quick at once: under
 * jitter that is what makes a sample precise.  bi's own interval is among
 * them: never wider than bi alone.
 *
 * The estimate is the middle of the intervals without the drift, which
 * the two clocks' true drift (ppm, not 1000) over a round's few ms keeps
 * inside their intersection; its bound is its distance to the farther
 * end of the one with the drift.  If they do not meet (a drift that large
 * is real), the middle of the latter.
 */
static void
tsyncudp_intersect(const struct tsyncudp_probe *p, uint32_t n, uint32_t bi,
    int64_t *theta, uint64_t *bound)
{
	const struct tsyncudp_probe *r = &p[bi];
	int64_t lo = INT64_MIN, hi = INT64_MAX, rlo = INT64_MIN;
	int64_t rhi = INT64_MAX, w, est;
	uint64_t from, to;
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (!p[i].ok)
			continue;
		from = p[i].t1 < r->m0 ? p[i].t1 : r->m0;
		to = p[i].t4 > r->m1 ? p[i].t4 : r->m1;
		w = (int64_t)(p[i].nbound + (to - from) / TSYNCUDP_DRIFT_DIV +
		    1);
		if (p[i].off - w > lo)
			lo = p[i].off - w;
		if (p[i].off + w < hi)
			hi = p[i].off + w;
		if (p[i].off - (int64_t)p[i].nbound > rlo)
			rlo = p[i].off - (int64_t)p[i].nbound;
		if (p[i].off + (int64_t)p[i].nbound < rhi)
			rhi = p[i].off + (int64_t)p[i].nbound;
	}
	if (lo > hi) {
		/* a clock faster than 1000 ppm: bi alone */
		*theta = r->off;
		*bound = r->nbound + (r->t4 - r->m0) / TSYNCUDP_DRIFT_DIV + 1;
		return;
	}
	est = rlo <= rhi ? rlo + (rhi - rlo) / 2 : lo + (hi - lo) / 2;
	*theta = est;
	*bound = (uint64_t)(hi - est > est - lo ? hi - est : est - lo) + 1;
}

/*
 * The probes of a round, then their markers; the marker with the smallest
 * bound (local + the network part of every probe, tsyncudp_intersect())
 * makes the sample.  A
 * probe waits for its reply up to TSYNCUDP_SPACING_MS, then the next one
 * goes: late replies are taken as they come, their times are the
 * kernels' stamps, so a reply that waited costs nothing but the drift.
 */
int
tsyncudp_round(struct tsyncudp *u, struct tsync *t, uint32_t round,
    uint32_t nprobes, int max_ms, void (*idle_cb)(void *), void *arg,
    struct td_tsync_sample *sample, char *err, size_t errlen)
{
	struct tsyncudp_probe *p;
	uint64_t *ts_s, *ts_r, start, idle, now, end, b, best = UINT64_MAX;
	uint64_t ref, lb, until, nb = 0;
	int64_t theta = 0, th;
	uint32_t i, n, bi = 0, got = 0, answered = 0, drained = 0;
	uint8_t junk[TD_TSUDP_LEN + 1];
	int ret = -1;

	/* late replies of an earlier round */
	while (drained++ < 4 * TSYNCUDP_BATCH &&
	    recv(u->fd, junk, sizeof junk, MSG_DONTWAIT) >= 0)
		;
	p = xcalloc(nprobes, sizeof *p);
	ts_s = xcalloc(nprobes, sizeof *ts_s);
	ts_r = xcalloc(nprobes, sizeof *ts_r);
	start = idle = td_clock_ns(CLOCK_MONOTONIC);
	end = start + (uint64_t)max_ms * 1000000ULL;
	for (n = 0; n < nprobes; ) {
		if (tsyncudp_send(u, t, round, n, &p[n], err, errlen) == -1)
			goto out_free;
		n++;
		until = td_clock_ns(CLOCK_MONOTONIC) +
		    TSYNCUDP_SPACING_MS * 1000000ULL;
		while (!p[n - 1].answered &&
		    (now = td_clock_ns(CLOCK_MONOTONIC)) < until) {
			tsyncudp_wait(u, until - now);
			answered += tsyncudp_take(u, round, p, n);
		}
		now = td_clock_ns(CLOCK_MONOTONIC);
		if (idle_cb != NULL &&
		    now - idle >= TSYNCUDP_IDLE_MS * 1000000ULL) {
			idle_cb(arg);
			idle = td_clock_ns(CLOCK_MONOTONIC);
		}
		if (now >= end)
			break;
	}
	/* the replies still out, until the round's time is over */
	while (answered < n && (now = td_clock_ns(CLOCK_MONOTONIC)) < end) {
		tsyncudp_wait(u, end - now < 5000000 ? end - now : 5000000);
		answered += tsyncudp_take(u, round, p, n);
		if (idle_cb != NULL &&
		    td_clock_ns(CLOCK_MONOTONIC) - idle >=
		    TSYNCUDP_IDLE_MS * 1000000ULL) {
			idle_cb(arg);
			idle = td_clock_ns(CLOCK_MONOTONIC);
		}
	}
	if (tsync_collect(t, round, ts_s, ts_r, n) == -1) {
		snprintf(err, errlen, "cannot read the sync markers back");
		goto out_free;
	}
	for (i = 0; i < n; i++) {
		if (!p[i].ok || ts_s[i] == 0)
			continue;
		got++;
		/* each marker with every probe's network part */
		tsync_moment(t, p[i].m0, p[i].m1, &lb);
		tsyncudp_intersect(p, n, i, &th, &b);
		if (lb + b + 1 < best) {
			best = lb + b + 1;
			bi = i;
			theta = th;
			nb = b;
		}
	}
	if (got == 0) {
		u->silent++;
		snprintf(err, errlen, "no usable reply on the probe port in "
		    "round %u (%u probes)", round, n);
		goto out_free;
	}
	u->silent = 0;
	u->answered = true;
	u->theta = theta;
	u->theta_bound = nb;
	u->theta_at = p[bi].m0;
	ref = tsync_moment(t, p[bi].m0, p[bi].m1, &lb) + (uint64_t)theta;
	memset(sample, 0, sizeof *sample);
	sample->round = round;
	sample->probes = got;
	sample->ts = ts_s[bi];
	sample->offset = (int64_t)(tsync_from_ns(t, ref) - ts_s[bi]);
	sample->scaling = 1;
	sample->frac = 0;
	sample->rtt = p[bi].delay > 0 ? (uint64_t)p[bi].delay : 0;
	sample->bound = best;
	ret = 0;
out_free:
	free(p);
	free(ts_s);
	free(ts_r);
	return ret;
}

/* Rounds in a row without a reply, 0 once the port ever answered. */
unsigned int
tsyncudp_silent(const struct tsyncudp *u)
{
	return u->answered ? 0 : u->silent;
}

/* The last round's network part: listener - agent CLOCK_MONOTONIC. */
void
tsyncudp_last(const struct tsyncudp *u, int64_t *theta, uint64_t *bound,
    uint64_t *at)
{
	*theta = u->theta;
	*bound = u->theta_bound;
	*at = u->theta_at;
}

/* Close the socket. */
void
tsyncudp_free(struct tsyncudp *u)
{
	if (u == NULL)
		return;
	if (u->fd != -1)
		close(u->fd);
	explicit_bzero(u->key, sizeof u->key);
	free(u);
}
