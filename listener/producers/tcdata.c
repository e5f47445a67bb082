/*
 * tcdata.c: the per-CPU data sockets of a trace-cmd client (see
 * tcdata.h).
 *
 * trace-cmd's own listener forks a reader per CPU whose socket takes the
 * first connection that comes, from anywhere.  Here the sockets of every
 * client live in the one loop, bound where the client reached us, and a
 * connection or datagram from another address never touches a recording.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sock_diag.h>

#include <event2/event.h>

#include "buf.h"
#include "log.h"
#include "tcdata.h"
#include "xmalloc.h"
#include "banned.h"

/* Refusals logged one by one per client; the rest are counted. */
#define TCDATA_LOG_REFUSALS	8
/* Pages one read callback takes before the other sockets' turn. */
#define TCDATA_TURN		64
/*
 * A UDP socket's receive buffer asked for (the kernel may give less): 8
 * MiB a CPU, 32 MiB for all of a client's (a client of many CPUs gets less
 * each, at least 256 KiB): kernel memory a client may fill.
 */
#define TCDATA_UDP_RCVBUF	(8 * 1024 * 1024)
#define TCDATA_UDP_RCVBUF_ALL	(32 * 1024 * 1024)
#define TCDATA_UDP_RCVBUF_MIN	(256 * 1024)

/* One CPU's socket(s). */
struct tcdata_cpu {
	struct tcdata		*d;
	uint32_t		 cpu;
	int			 lfd;		/* TCP: listening; UDP: the
						   socket */
	struct event		*lev;
	struct event		*pause;		/* TCP: accept paused */
	int			 fd;		/* TCP: the client's, -1 */
	struct event		*ev;
	bool			 eof;		/* TCP: the stream ended */
	uint8_t			*page;		/* TCP: a page coming in */
	size_t			 have;
	uint64_t		 pages;
	uint64_t		 last_ts;	/* UDP: of the last page */
	uint64_t		 bad_size;	/* UDP: not a page long */
	uint64_t		 reordered;	/* UDP: older than the last */
	uint64_t		 tail;		/* TCP: bytes of a last part
						   page */
};

/* One client's data sockets. */
struct tcdata {
	struct tcdata_params	 p;
	struct tcdata_cpu	*cpu;
	uint16_t		*ports;
	uint8_t			*dgram;		/* UDP: one datagram */
	uint64_t		 refused;
	bool			 started;
	bool			 failed;	/* the page callback said no */
};

/* Where the next search for a free port starts (spreads clients). */
static uint32_t tcdata_next_port;

/* Whether sa holds the same address (not port) as the client's. */
static bool
tcdata_same_host(const struct tcdata *d, const struct sockaddr *sa)
{
	const struct sockaddr *c = (const struct sockaddr *)&d->p.client;

	if (sa->sa_family != c->sa_family)
		return false;
	if (sa->sa_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)sa)->sin_addr,
		    &((const struct sockaddr_in *)c)->sin_addr,
		    sizeof(struct in_addr)) == 0;
	if (sa->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr,
		    &((const struct sockaddr_in6 *)c)->sin6_addr,
		    sizeof(struct in6_addr)) == 0;
	return false;
}

/* The printable address of sa. */
static void
tcdata_name(const struct sockaddr *sa, socklen_t len, char *out, size_t n)
{
	if (getnameinfo(sa, len, out, (socklen_t)n, NULL, 0,
	    NI_NUMERICHOST) != 0)
		snprintf(out, n, "?");
}

/* Log a refusal (a few, then count them). */
static void
tcdata_refuse(struct tcdata *d, struct tcdata_cpu *c,
    const struct sockaddr *sa, socklen_t len, const char *what)
{
	char host[NI_MAXHOST];

	d->refused++;
	if (d->refused > TCDATA_LOG_REFUSALS)
		return;
	tcdata_name(sa, len, host, sizeof host);
	log_warnx("%s: refused %s from %s to CPU %u's data port %u%s",
	    d->p.label, what, host, c->cpu, d->ports[c->cpu],
	    d->refused == TCDATA_LOG_REFUSALS ? " (more are counted, not "
	    "logged)" : "");
}

/* One whole page of c to the callback. */
static int
tcdata_page(struct tcdata *d, struct tcdata_cpu *c, const uint8_t *page)
{
	if (d->failed)
		return -1;
	if (d->p.page(d->p.arg, c->cpu, page) == -1) {
		d->failed = true;
		return -1;
	}
	c->pages++;
	return 0;
}

/* The TCP stream of c ended (EOF or an error). */
static void
tcdata_tcp_end(struct tcdata *d, struct tcdata_cpu *c, int err)
{
	if (err != 0)
		log_warnx("%s: CPU %u's data connection: %s", d->p.label,
		    c->cpu, strerror(err));
	if (c->have > 0) {
		c->tail = c->have;
		log_warnx("%s: CPU %u's data ended with %zu bytes of a "
		    "page, dropped and counted", d->p.label, c->cpu, c->have);
	}
	c->have = 0;
	free(c->page);
	c->page = NULL;
	if (c->ev != NULL)
		event_free(c->ev);
	c->ev = NULL;
	close(c->fd);
	c->fd = -1;
	c->eof = true;
}

/*
 * Read c's TCP stream: at most max pages (0: until there is nothing
 * more).  0, or -1 when the page callback failed.
 */
static int
tcdata_tcp_read(struct tcdata *d, struct tcdata_cpu *c, unsigned max)
{
	unsigned n = 0;
	ssize_t r;

	while (c->fd != -1 && (max == 0 || n < max)) {
		if (c->page == NULL)
			c->page = xmalloc(d->p.page_size);
		r = read(c->fd, c->page + c->have, d->p.page_size - c->have);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (r <= 0) {
			tcdata_tcp_end(d, c, r == 0 ? 0 : errno);
			d->p.ended(d->p.arg);
			return 0;
		}
		c->have += (size_t)r;
		if (c->have < d->p.page_size)
			continue;
		c->have = 0;
		n++;
		if (tcdata_page(d, c, c->page) == -1)
			return -1;
	}
	return 0;
}

static void
tcdata_tcp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcdata_cpu *c = arg;

	tcdata_tcp_read(c->d, c, TCDATA_TURN);
}

/*
 * Accept what waits on c's listening socket: the client's first
 * connection is c's stream, anything else is refused.
 */
static void
tcdata_accept(struct tcdata *d, struct tcdata_cpu *c)
{
	struct timeval second = { 1, 0 };
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	for (;;) {
		len = sizeof ss;
		fd = accept4(c->lfd, (struct sockaddr *)&ss, &len,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM) {
				/* not every loop turn: a second's pause */
				if (evtimer_pending(c->pause, NULL))
					return;
				log_warn("%s: CPU %u: accept: pausing for a "
				    "second", d->p.label, c->cpu);
				event_del(c->lev);
				evtimer_add(c->pause, &second);
				return;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn("%s: CPU %u: accept", d->p.label,
				    c->cpu);
			return;
		}
		if (!tcdata_same_host(d, (struct sockaddr *)&ss)) {
			tcdata_refuse(d, c, (struct sockaddr *)&ss, len,
			    "a data connection (not the client's address)");
			close(fd);
			continue;
		}
		if (c->fd != -1 || c->eof) {
			tcdata_refuse(d, c, (struct sockaddr *)&ss, len,
			    "a second data connection");
			close(fd);
			continue;
		}
		c->fd = fd;
		c->ev = event_new(d->p.base, fd, EV_READ | EV_PERSIST,
		    tcdata_tcp_cb, c);
		if (d->started)
			event_add(c->ev, NULL);
	}
}

static void
tcdata_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcdata_cpu *c = arg;

	tcdata_accept(c->d, c);
}

/* The pause after running out of descriptors is over. */
static void
tcdata_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcdata_cpu *c = arg;

	event_add(c->lev, NULL);
}

/*
 * Take the datagrams waiting on c's UDP socket: at most max (0: all).
 * 0, or -1 when the page callback failed.
 */
static int
tcdata_udp_read(struct tcdata *d, struct tcdata_cpu *c, unsigned max)
{
	struct sockaddr_storage ss;
	socklen_t len;
	uint64_t ts;
	unsigned n = 0;
	ssize_t r;

	while (max == 0 || n < max) {
		len = sizeof ss;
		r = recvfrom(c->lfd, d->dgram, d->p.page_size, MSG_TRUNC,
		    (struct sockaddr *)&ss, &len);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return 0;	/* EAGAIN, or an ICMP error */
		n++;
		if (!tcdata_same_host(d, (struct sockaddr *)&ss)) {
			tcdata_refuse(d, c, (struct sockaddr *)&ss, len,
			    "a datagram (not the client's address)");
			continue;
		}
		if ((size_t)r != d->p.page_size) {
			c->bad_size++;
			continue;
		}
		memcpy(&ts, d->dgram, sizeof ts);
		if (ts != 0 && ts < c->last_ts) {
			c->reordered++;
			continue;
		}
		if (ts != 0)
			c->last_ts = ts;
		if (tcdata_page(d, c, d->dgram) == -1)
			return -1;
	}
	return 0;
}

static void
tcdata_udp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcdata_cpu *c = arg;

	tcdata_udp_read(c->d, c, TCDATA_TURN);
}

/* A socket of type bound to the control port's address at a free port. */
static int
tcdata_bind(struct tcdata *d, int type, uint16_t *port)
{
	struct sockaddr_storage ss = d->p.local;
	uint32_t span = (uint32_t)d->p.port_hi - d->p.port_lo + 1, i;
	int fd, one = 1, size = TCDATA_UDP_RCVBUF_ALL / (int)d->p.ncpus;

	if (size > TCDATA_UDP_RCVBUF)
		size = TCDATA_UDP_RCVBUF;
	if (size < TCDATA_UDP_RCVBUF_MIN)
		size = TCDATA_UDP_RCVBUF_MIN;
	for (i = 0; i < span; i++) {
		*port = (uint16_t)(d->p.port_lo + tcdata_next_port++ % span);
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = htons(*port);
		else
			((struct sockaddr_in6 *)&ss)->sin6_port =
			    htons(*port);
		fd = socket(ss.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
		if (fd == -1)
			return -1;
		/* TCP: a port in TIME_WAIT is free; UDP: never share one */
		if (type == SOCK_STREAM)
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
			    sizeof one);
		else if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size,
		    sizeof size) == -1)
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size,
			    sizeof size);
		if (bind(fd, (struct sockaddr *)&ss, d->p.local_len) == 0 &&
		    (type != SOCK_STREAM || listen(fd, 4) == 0))
			return fd;
		close(fd);
		if (errno != EADDRINUSE)
			return -1;
	}
	errno = EADDRINUSE;
	return -1;
}

struct tcdata *
tcdata_open(const struct tcdata_params *p, char *err, size_t errlen)
{
	struct tcdata *d = xcalloc(1, sizeof *d);
	struct tcdata_cpu *c;
	uint32_t i;

	d->p = *p;
	d->cpu = xcalloc(p->ncpus, sizeof *d->cpu);
	d->ports = xcalloc(p->ncpus, sizeof *d->ports);
	for (i = 0; i < p->ncpus; i++) {
		d->cpu[i].lfd = -1;
		d->cpu[i].fd = -1;
	}
	if (!p->tcp)
		d->dgram = xmalloc(p->page_size);
	for (i = 0; i < p->ncpus; i++) {
		c = &d->cpu[i];
		c->d = d;
		c->cpu = i;
		c->lfd = tcdata_bind(d, p->tcp ? SOCK_STREAM : SOCK_DGRAM,
		    &d->ports[i]);
		if (c->lfd == -1) {
			snprintf(err, errlen, "no data port for CPU %u in "
			    "%u-%u: %s", i, p->port_lo, p->port_hi,
			    errno == EADDRINUSE ? "all taken" :
			    strerror(errno));
			tcdata_free(d);
			return NULL;
		}
		c->lev = event_new(p->base, c->lfd, EV_READ | EV_PERSIST,
		    p->tcp ? tcdata_accept_cb : tcdata_udp_cb, c);
		/* TCP: connections are accepted (and checked) at once */
		if (p->tcp) {
			c->pause = evtimer_new(p->base, tcdata_resume_cb, c);
			event_add(c->lev, NULL);
		}
	}
	return d;
}

const uint16_t *
tcdata_ports(const struct tcdata *d)
{
	return d->ports;
}

void
tcdata_start(struct tcdata *d)
{
	uint32_t i;

	d->started = true;
	for (i = 0; i < d->p.ncpus; i++) {
		if (!d->p.tcp)
			event_add(d->cpu[i].lev, NULL);
		else if (d->cpu[i].ev != NULL)
			event_add(d->cpu[i].ev, NULL);
	}
}

int
tcdata_drain(struct tcdata *d)
{
	struct tcdata_cpu *c;
	uint32_t i;

	for (i = 0; i < d->p.ncpus && !d->failed; i++) {
		c = &d->cpu[i];
		if (d->p.tcp) {
			tcdata_accept(d, c);
			tcdata_tcp_read(d, c, 0);
		} else
			tcdata_udp_read(d, c, 0);
	}
	return d->failed ? -1 : 0;
}

bool
tcdata_complete(const struct tcdata *d)
{
	uint32_t i;

	if (!d->p.tcp)
		return true;
	for (i = 0; i < d->p.ncpus; i++)
		if (!d->cpu[i].eof)
			return false;
	return true;
}

uint64_t
tcdata_pages(const struct tcdata *d, uint32_t cpu)
{
	return cpu < d->p.ncpus ? d->cpu[cpu].pages : 0;
}

uint64_t
tcdata_losses(struct tcdata *d, struct td_buf *text)
{
	struct tcdata_cpu *c;
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t len;
	uint64_t drops, lost, all = 0;
	uint32_t i;

	for (i = 0; i < d->p.ncpus; i++) {
		c = &d->cpu[i];
		drops = 0;
		len = sizeof mem;
		if (!d->p.tcp && getsockopt(c->lfd, SOL_SOCKET, SO_MEMINFO,
		    mem, &len) == 0 && len >= sizeof mem)
			drops = mem[SK_MEMINFO_DROPS];
		lost = drops + c->bad_size + c->reordered + (c->tail ? 1 : 0);
		if (lost == 0)
			continue;
		all += lost;
		if (d->p.tcp)
			td_buf_printf(text, "cpu %u: %" PRIu64 " bytes of a "
			    "last page dropped\n", i, c->tail);
		else
			td_buf_printf(text, "cpu %u: %" PRIu64 " datagrams "
			    "lost (%" PRIu64 " dropped by the socket, %" PRIu64
			    " not a page long, %" PRIu64 " out of order)\n", i,
			    lost, drops, c->bad_size, c->reordered);
	}
	return all;
}

uint64_t
tcdata_refused(const struct tcdata *d)
{
	return d->refused;
}

size_t
tcdata_mem(const struct tcdata *d)
{
	size_t n = sizeof *d + d->p.ncpus * (sizeof *d->cpu + 2);

	/* TCP: a page a CPU, counted before its first byte comes */
	if (d->p.tcp)
		return n + (size_t)d->p.ncpus * d->p.page_size;
	return n + d->p.page_size;
}

void
tcdata_free(struct tcdata *d)
{
	struct tcdata_cpu *c;
	uint32_t i;

	if (d == NULL)
		return;
	for (i = 0; i < d->p.ncpus; i++) {
		c = &d->cpu[i];
		if (c->ev != NULL)
			event_free(c->ev);
		if (c->fd != -1)
			close(c->fd);
		if (c->lev != NULL)
			event_free(c->lev);
		if (c->pause != NULL)
			event_free(c->pause);
		if (c->lfd != -1)
			close(c->lfd);
		free(c->page);
	}
	free(d->cpu);
	free(d->ports);
	free(d->dgram);
	free(d);
}
