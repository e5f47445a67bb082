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

#include "tdproto.h"
#include "tsudp.h"
#include "tsync.h"
#include "tsyncudp.h"
#include "xmalloc.h"
#include "banned.h"

/* How long one probe waits for its reply. */
#define TSYNCUDP_WAIT_MS	50
/* The rings are read between probes at most this often. */
#define TSYNCUDP_IDLE_MS	5
/*
 * The two CLOCK_MONOTONICs (and the trace clock against the agent's) may
 * drift apart between the local and the network part of a probe by at
 * most 1000 ppm: NTP slews each clock by at most 500 ppm.
 */
#define TSYNCUDP_DRIFT_DIV	1000

/* The socket and the session's id and key. */
struct tsyncudp {
	int		 fd;
	uint64_t	 id;
	uint8_t		 key[TD_TSUDP_KEY_LEN];
	unsigned int	 silent;
	bool		 answered;	/* ever, on this connection */
};

/* One probe: its local part, its network part. */
struct tsyncudp_probe {
	uint64_t	 m0, m1;	/* CLOCK_MONOTONIC around the marker */
	uint64_t	 t4;		/* the reply's receipt */
	int64_t		 off;		/* listener - agent CLOCK_MONOTONIC */
	uint64_t	 nbound;
	int64_t		 delay;
	bool		 ok;
};

static uint64_t
tsyncudp_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

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
	u->id = id;
	memcpy(u->key, key, sizeof u->key);
	u->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (u->fd == -1 ||
	    setsockopt(u->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one,
	    sizeof one) == -1 ||
	    connect(u->fd, (struct sockaddr *)&ss, len) == -1) {
		snprintf(err, errlen, "no probe port: %s", strerror(errno));
		tsyncudp_free(u);
		return NULL;
	}
	return u;
}

/* A realtime stamp as CLOCK_MONOTONIC, within *err (probeport.c's way). */
static uint64_t
tsyncudp_to_mono(uint64_t real_stamp, uint64_t *err)
{
	uint64_t m0, r, m1;

	m0 = tsyncudp_ns(CLOCK_MONOTONIC);
	r = tsyncudp_ns(CLOCK_REALTIME);
	m1 = tsyncudp_ns(CLOCK_MONOTONIC);
	*err = (m1 - m0) / 2 + 1;
	return real_stamp - r + m0 + (m1 - m0) / 2;
}

/*
 * Read replies until the one for (round, seq) sent at t1 came (1), the
 * socket has nothing more (0), or it failed (-1).  Replies of earlier
 * probes, late, are dropped; so is anything the key did not sign.
 */
static int
tsyncudp_recv(struct tsyncudp *u, uint32_t round, uint32_t seq, uint64_t t1,
    struct tsyncudp_probe *p)
{
	union {
		char		buf[CMSG_SPACE(sizeof(struct timespec))];
		struct cmsghdr	align;
	} ctl;
	const struct timespec *stamp;
	uint8_t buf[TD_TSUDP_LEN + 1];
	struct cmsghdr *cm;
	struct td_tsudp m;
	struct msghdr msg;
	struct iovec iov;
	uint64_t t4_err;
	ssize_t got;

	for (;;) {
		memset(&msg, 0, sizeof msg);
		iov.iov_base = buf;
		iov.iov_len = sizeof buf;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof ctl.buf;
		got = recvmsg(u->fd, &msg, MSG_DONTWAIT);
		if (got < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		stamp = NULL;
		for (cm = CMSG_FIRSTHDR(&msg); cm != NULL;
		    cm = CMSG_NXTHDR(&msg, cm))
			if (cm->cmsg_level == SOL_SOCKET &&
			    cm->cmsg_type == SCM_TIMESTAMPNS)
				stamp = (const struct timespec *)CMSG_DATA(cm);
		if (stamp == NULL || td_tsudp_peek(buf, (size_t)got, &m) == -1 ||
		    m.type != TD_TSUDP_REPLY || m.id != u->id ||
		    m.round != round || m.seq != seq || m.t1 != t1 ||
		    !td_tsudp_check(buf, (size_t)got, u->key))
			continue;
		p->t4 = tsyncudp_to_mono((uint64_t)stamp->tv_sec *
		    1000000000ULL + (uint64_t)stamp->tv_nsec, &t4_err);
		if (td_tsudp_offset(&m, p->t4, t4_err, &p->off, &p->nbound,
		    &p->delay) == -1)
			return 1;	/* answered, but not usable */
		p->ok = true;
		return 1;
	}
}

/* One probe: the marker between two clock readings, then the exchange. */
static int
tsyncudp_probe(struct tsyncudp *u, struct tsync *t, uint32_t round,
    uint32_t seq, struct tsyncudp_probe *p, char *err, size_t errlen)
{
	struct td_tsudp m;
	uint8_t buf[TD_TSUDP_LEN];
	uint64_t deadline, now;
	struct pollfd pfd;
	int ret;

	memset(p, 0, sizeof *p);
	p->m0 = tsyncudp_ns(CLOCK_MONOTONIC);
	if (tsync_mark(t, round, seq, 's') == -1) {
		snprintf(err, errlen, "cannot write a sync marker: %s",
		    strerror(errno));
		return -1;
	}
	p->m1 = tsyncudp_ns(CLOCK_MONOTONIC);
	memset(&m, 0, sizeof m);
	m.type = TD_TSUDP_PROBE;
	m.id = u->id;
	m.round = round;
	m.seq = seq;
	m.t1 = tsyncudp_ns(CLOCK_MONOTONIC);
	td_tsudp_pack(buf, &m, u->key);
	if (send(u->fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf)
		return 0;	/* ICMP refused, full buffer: a lost probe */
	deadline = m.t1 + TSYNCUDP_WAIT_MS * 1000000ULL;
	pfd.fd = u->fd;
	pfd.events = POLLIN;
	while ((now = tsyncudp_ns(CLOCK_MONOTONIC)) < deadline) {
		if (poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1) <= 0)
			continue;
		if ((ret = tsyncudp_recv(u, round, seq, m.t1, p)) != 0)
			return 0;
	}
	return 0;
}

/*
 * The probes of a round, then their markers; the probe with the smallest
 * bound (local + network + drift between the two) makes the sample.
 */
int
tsyncudp_round(struct tsyncudp *u, struct tsync *t, uint32_t round,
    uint32_t nprobes, int max_ms, void (*idle_cb)(void *), void *arg,
    struct td_tsync_sample *sample, char *err, size_t errlen)
{
	struct tsyncudp_probe *p;
	uint64_t *ts_s, *ts_r, start, idle, b, best = UINT64_MAX, ref, lb;
	uint32_t i, n, bi = 0, got = 0;
	uint8_t junk[TD_TSUDP_LEN + 1];
	int ret = -1;

	/* late replies of an earlier round */
	while (recv(u->fd, junk, sizeof junk, MSG_DONTWAIT) > 0)
		;
	p = xcalloc(nprobes, sizeof *p);
	ts_s = xcalloc(nprobes, sizeof *ts_s);
	ts_r = xcalloc(nprobes, sizeof *ts_r);
	start = idle = tsyncudp_ns(CLOCK_MONOTONIC);
	for (n = 0; n < nprobes; n++) {
		if (tsyncudp_probe(u, t, round, n, &p[n], err, errlen) == -1)
			goto out_free;
		if (idle_cb != NULL && tsyncudp_ns(CLOCK_MONOTONIC) - idle >=
		    TSYNCUDP_IDLE_MS * 1000000ULL) {
			idle_cb(arg);
			idle = tsyncudp_ns(CLOCK_MONOTONIC);
		}
		if (tsyncudp_ns(CLOCK_MONOTONIC) - start >=
		    (uint64_t)max_ms * 1000000ULL) {
			n++;
			break;
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
		tsync_moment(t, p[i].m0, p[i].m1, &lb);
		b = lb + p[i].nbound + (p[i].t4 - p[i].m0) / TSYNCUDP_DRIFT_DIV +
		    1;
		if (b < best) {
			best = b;
			bi = i;
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
	ref = tsync_moment(t, p[bi].m0, p[bi].m1, &lb) + (uint64_t)p[bi].off;
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
