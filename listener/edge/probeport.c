/*
 * probeport.c: the listener's time-sync datagrams (see probeport.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <event2/listener.h>

#include "clock.h"
#include "log.h"
#include "probeport.h"
#include "tsudp.h"
#include "udpstamp.h"
#include "xmalloc.h"
#include "banned.h"

#define PROBEPORT_MAX_SOCKS	8
#define PROBEPORT_BUCKETS	256
/* Per session: a burst of this many probes, refilled at as many a second. */
#define PROBEPORT_TOKENS	256
/* Datagrams read in one callback, so that other sessions get their turn. */
#define PROBEPORT_BATCH		64

/* One UDP socket, beside one TCP listener. */
struct probeport_sock {
	int			 fd;
	struct sockaddr_storage	 addr;	/* bound, port included */
	uint16_t		 port;
};

/* One TCP session's id, key, address and rate. */
struct probeport_entry {
	uint64_t		 id;
	uint8_t			 key[TD_TSUDP_KEY_LEN];
	struct sockaddr_storage	 peer;	/* the session's (IP only) */
	uint16_t		 port;	/* the UDP port offered */
	double			 tokens;
	uint64_t		 refill_ns;
	uint64_t		 answered;
	uint64_t		 dropped;
	struct probeport_entry	*next;
};

/*
 * The sockets are served by a thread of their own, started with the first
 * session (after daemon()), so that a probe waits for no callback of the
 * event loop, which a storm of pages keeps busy for milliseconds: the
 * listener's residence drops out of a sample, but the drift of the two
 * clocks over it does not.  pp_lock guards the entries, which the loop
 * adds and removes and the thread reads and counts in.
 */
static struct probeport_sock	 pp_socks[PROBEPORT_MAX_SOCKS];
static int			 pp_nsocks;
static struct probeport_entry	*pp_bucket[PROBEPORT_BUCKETS];
static pthread_mutex_t		 pp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t		 pp_thread;
static bool			 pp_running;
static int			 pp_stop[2] = { -1, -1 };	/* a pipe */

/* The port of a sockaddr, 0 if not IP. */
static uint16_t
probeport_port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return 0;
}

/* Whether a and b have the same IP address (ports aside). */
static bool
probeport_same_ip(const struct sockaddr_storage *a,
    const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		    ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		    &((const struct sockaddr_in6 *)b)->sin6_addr,
		    sizeof(struct in6_addr)) == 0;
	return false;
}

/* Whether a socket bound to ss takes datagrams to local (wildcard too). */
static bool
probeport_covers(const struct sockaddr_storage *ss,
    const struct sockaddr_storage *local)
{
	if (ss->ss_family != local->ss_family)
		return false;
	if (ss->ss_family == AF_INET &&
	    ((const struct sockaddr_in *)ss)->sin_addr.s_addr == INADDR_ANY)
		return true;
	if (ss->ss_family == AF_INET6 &&
	    memcmp(&((const struct sockaddr_in6 *)ss)->sin6_addr,
	    &in6addr_any, sizeof in6addr_any) == 0)
		return true;
	return probeport_same_ip(ss, local);
}

static struct probeport_entry *
probeport_find(uint64_t id)
{
	struct probeport_entry *e;

	for (e = pp_bucket[id % PROBEPORT_BUCKETS]; e != NULL; e = e->next)
		if (e->id == id)
			return e;
	return NULL;
}

/* Whether e may have one more answer now (a token bucket). */
static bool
probeport_rate(struct probeport_entry *e, uint64_t now)
{
	e->tokens += (double)(now - e->refill_ns) * PROBEPORT_TOKENS / 1e9;
	if (e->tokens > PROBEPORT_TOKENS)
		e->tokens = PROBEPORT_TOKENS;
	e->refill_ns = now;
	if (e->tokens < 1)
		return false;
	e->tokens -= 1;
	return true;
}

/* One datagram: answered if it is a valid probe of a session (locked). */
static void
probeport_handle(struct probeport_sock *ps, const uint8_t *buf, size_t len,
    const struct sockaddr_storage *from, socklen_t fromlen,
    const struct timespec *stamp)
{
	struct probeport_entry *e;
	struct td_tsudp m;
	uint8_t out[TD_TSUDP_LEN];
	uint64_t now;

	if (td_tsudp_peek(buf, len, &m) == -1 || m.type != TD_TSUDP_PROBE ||
	    (e = probeport_find(m.id)) == NULL)
		return;
	if (stamp == NULL || !probeport_same_ip(&e->peer, from) ||
	    !td_tsudp_check(buf, len, e->key)) {
		e->dropped++;
		return;
	}
	now = td_clock_ns(CLOCK_MONOTONIC);
	if (!probeport_rate(e, now)) {
		e->dropped++;
		return;
	}
	m.type = TD_TSUDP_REPLY;
	m.t2 = td_clock_real_to_mono((uint64_t)stamp->tv_sec * 1000000000ULL +
	    (uint64_t)stamp->tv_nsec, &m.err);
	/* t3 as late as the MAC allows: its time is in the bound */
	m.t3 = td_clock_ns(CLOCK_MONOTONIC);
	td_tsudp_pack(out, &m, e->key);
	if (sendto(ps->fd, out, sizeof out, MSG_DONTWAIT,
	    (const struct sockaddr *)from, fromlen) == (ssize_t)sizeof out)
		e->answered++;
}

/* The socket is readable: up to PROBEPORT_BATCH datagrams. */
static void
probeport_read(struct probeport_sock *ps)
{
	struct sockaddr_storage from;
	uint8_t buf[TD_TSUDP_LEN + 1];
	struct timespec stamp;
	socklen_t fromlen;
	ssize_t got;
	int i;

	for (i = 0; i < PROBEPORT_BATCH; i++) {
		got = td_udpstamp_recv(ps->fd, buf, sizeof buf, &from,
		    &fromlen, &stamp);
		if (got < 0 && errno == EMSGSIZE)
			continue;
		if (got < 0)
			return;
		pthread_mutex_lock(&pp_lock);
		probeport_handle(ps, buf, (size_t)got, &from, fromlen,
		    stamp.tv_sec == 0 && stamp.tv_nsec == 0 ? NULL : &stamp);
		pthread_mutex_unlock(&pp_lock);
	}
}

/* The thread: wait for datagrams on every socket until told to stop. */
static void *
probeport_main(void *arg)
{
	struct pollfd pfd[PROBEPORT_MAX_SOCKS + 1];
	int i;

	(void)arg;
	for (i = 0; i < pp_nsocks; i++) {
		pfd[i].fd = pp_socks[i].fd;
		pfd[i].events = POLLIN;
	}
	pfd[pp_nsocks].fd = pp_stop[0];
	pfd[pp_nsocks].events = POLLIN;
	for (;;) {
		if (poll(pfd, (nfds_t)pp_nsocks + 1, -1) == -1) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (pfd[pp_nsocks].revents != 0)
			return NULL;
		for (i = 0; i < pp_nsocks; i++)
			if (pfd[i].revents != 0)
				probeport_read(&pp_socks[i]);
	}
}

/* The thread, at the first session. */
static int
probeport_run(void)
{
	sigset_t all, old;
	int e;

	if (pp_running)
		return 0;
	if (pp_stop[0] == -1)
		return -1;
	/* signals stay the loop's */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	e = pthread_create(&pp_thread, NULL, probeport_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e != 0)
		return -1;
	pp_running = true;
	return 0;
}

/* A UDP socket bound to addr (its port, else any port). */
static int
probeport_open(struct probeport_sock *ps,
    const struct sockaddr_storage *addr, socklen_t len)
{
	int one = 1;

	ps->fd = socket(addr->ss_family, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (ps->fd == -1)
		return -1;
	if (addr->ss_family == AF_INET6)
		setsockopt(ps->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	ps->addr = *addr;
	if (bind(ps->fd, (const struct sockaddr *)&ps->addr, len) == -1) {
		if (addr->ss_family == AF_INET)
			((struct sockaddr_in *)&ps->addr)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&ps->addr)->sin6_port = 0;
		if (bind(ps->fd, (const struct sockaddr *)&ps->addr,
		    len) == -1)
			goto fail;
	}
	if (setsockopt(ps->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one,
	    sizeof one) == -1 ||
	    getsockname(ps->fd, (struct sockaddr *)&ps->addr, &len) == -1)
		goto fail;
	ps->port = probeport_port_of(&ps->addr);
	return 0;
fail:
	close(ps->fd);
	ps->fd = -1;
	return -1;
}

/* A UDP socket beside each TCP listener. */
int
probeport_start(struct event_base *base, struct evconnlistener **levs,
    int n)
{
	struct sockaddr_storage ss;
	char host[NI_MAXHOST];
	socklen_t len;
	int i, fd;

	(void)base;
	for (i = 0; i < n && pp_nsocks < PROBEPORT_MAX_SOCKS; i++) {
		fd = evconnlistener_get_fd(levs[i]);
		len = sizeof ss;
		if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1 ||
		    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
			continue;
		if (probeport_open(&pp_socks[pp_nsocks], &ss, len) == -1) {
			log_warn("time-sync probes: no UDP socket beside TCP "
			    "port %u", probeport_port_of(&ss));
			continue;
		}
		getnameinfo((struct sockaddr *)&ss, len, host, sizeof host,
		    NULL, 0, NI_NUMERICHOST);
		log_info("time-sync probes on %s udp port %u", host,
		    pp_socks[pp_nsocks].port);
		pp_nsocks++;
	}
	/* the thread's stop pipe now: a session must not cost descriptors */
	if (pp_nsocks > 0 && pipe2(pp_stop, O_CLOEXEC) == -1) {
		log_warn("time-sync probes: no pipe");
		while (pp_nsocks > 0)
			close(pp_socks[--pp_nsocks].fd);
	}
	return pp_nsocks > 0 ? 0 : -1;
}

/* An entry for the session on fd. */
struct probeport_entry *
probeport_register(int fd)
{
	struct sockaddr_storage local, peer;
	struct probeport_entry *e;
	socklen_t len;
	int i;

	len = sizeof local;
	if (getsockname(fd, (struct sockaddr *)&local, &len) == -1)
		return NULL;
	len = sizeof peer;
	if (getpeername(fd, (struct sockaddr *)&peer, &len) == -1)
		return NULL;
	for (i = 0; i < pp_nsocks; i++)
		if (probeport_covers(&pp_socks[i].addr, &local))
			break;
	if (i == pp_nsocks || probeport_run() == -1)
		return NULL;
	e = xcalloc(1, sizeof *e);
	pthread_mutex_lock(&pp_lock);
	do {
		if (getrandom(&e->id, sizeof e->id, 0) != sizeof e->id ||
		    getrandom(e->key, sizeof e->key, 0) != sizeof e->key) {
			pthread_mutex_unlock(&pp_lock);
			free(e);
			return NULL;
		}
	} while (e->id == 0 || probeport_find(e->id) != NULL);
	e->peer = peer;
	e->port = pp_socks[i].port;
	e->tokens = PROBEPORT_TOKENS;
	e->refill_ns = td_clock_ns(CLOCK_MONOTONIC);
	e->next = pp_bucket[e->id % PROBEPORT_BUCKETS];
	pp_bucket[e->id % PROBEPORT_BUCKETS] = e;
	pthread_mutex_unlock(&pp_lock);
	return e;
}

/* What WELCOME carries. */
void
probeport_offer(const struct probeport_entry *e, uint16_t *port,
    uint64_t *id, uint8_t *key)
{
	*port = e->port;
	*id = e->id;
	memcpy(key, e->key, TD_TSUDP_KEY_LEN);
}

/* Answered and dropped probes of e. */
void
probeport_counts(const struct probeport_entry *e, uint64_t *answered,
    uint64_t *dropped)
{
	pthread_mutex_lock(&pp_lock);
	*answered = e->answered;
	*dropped = e->dropped;
	pthread_mutex_unlock(&pp_lock);
}

/* The session is over. */
void
probeport_unregister(struct probeport_entry *e)
{
	struct probeport_entry **pe;

	if (e == NULL)
		return;
	pthread_mutex_lock(&pp_lock);
	for (pe = &pp_bucket[e->id % PROBEPORT_BUCKETS]; *pe != NULL;
	    pe = &(*pe)->next)
		if (*pe == e) {
			*pe = e->next;
			break;
		}
	pthread_mutex_unlock(&pp_lock);
	explicit_bzero(e->key, sizeof e->key);
	free(e);
}

/* Close the sockets. */
void
probeport_shutdown(void)
{
	int i;

	if (pp_running && write(pp_stop[1], "x", 1) == 1)
		pthread_join(pp_thread, NULL);
	pp_running = false;
	if (pp_stop[0] != -1) {
		close(pp_stop[0]);
		close(pp_stop[1]);
		pp_stop[0] = pp_stop[1] = -1;
	}
	for (i = 0; i < pp_nsocks; i++)
		close(pp_socks[i].fd);
	pp_nsocks = 0;
}
