/*
 * tddelay.c: a test tool that puts a network delay between tdagent and
 * tdlisten, in user space, for kernels without sch_netem (issue 27).
 *
 *	tddelay [-o DELAY[:JITTER]] [-b DELAY[:JITTER]] [-u UDPPORT]
 *	    [-s SEED] ADDR PORT TARGET
 *
 * It accepts TCP connections on ADDR:PORT and carries each to TARGET:PORT
 * (tdlisten) without a delay, and takes the datagrams that come to
 * ADDR:UDPPORT (default PORT: the listener's probe port, which WELCOME
 * names; tdlisten binds it beside its TCP port, at the same number when
 * that is free) and sends them on to TARGET:UDPPORT, and the replies back
 * to their senders, each way delayed: -o (out: agent to listener) and -b
 * (back), DELAY plus a jitter drawn uniformly from [-JITTER, +JITTER]
 * (netem's "delay DELAY JITTER" without a distribution table), never
 * below 0.  Times take the suffix ns, us (the default), ms or s:
 * "-o 100us:50us -b 100us:50us" is symmetric jitter, "-o 200us -b 0" an
 * asymmetric path.
 *
 * Like netem's with jitter, each datagram leaves at its own time: a later
 * one whose draw is shorter overtakes (the order is not kept).  A
 * datagram's time is counted from the kernel's stamp of its arrival
 * (SO_TIMESTAMPNS) to its sendto(): a thread of its own sleeps on a
 * CLOCK_MONOTONIC timerfd (TFD_TIMER_ABSTIME, no timer slack) until
 * TDDELAY_SPIN_NS before the time, then spins on clock_gettime, so the
 * delay is exact to the time a sendto() takes unless the machine keeps
 * the thread from running; how late each one left is reported at the end.
 *
 * The connections to TARGET and the datagrams to it leave from ADDR (port
 * 0), so that the listener sees the probes come from its TCP session's
 * address: give ADDR and TARGET distinct loopback addresses (127.0.0.2,
 * 127.0.0.1) and both may hold PORT.  One socket per sender carries its
 * datagrams to TARGET, so that replies find their way back.
 *
 * It prints "tddelay: ready" once it listens, and on SIGTERM or SIGINT,
 * for each way, the datagrams carried and how late they left (median and
 * max ns), then exits 0.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "udpstamp.h"

#define TDDELAY_MAX_CONNS	64
#define TDDELAY_MAX_FLOWS	64
#define TDDELAY_QUEUE		1024	/* datagrams held, as netem's limit */
#define TDDELAY_DGRAM		2048
#define TDDELAY_SPIN_NS		30000
#define TDDELAY_STATS		65536

struct tddelay_way {
	uint64_t	 delay, jitter;	/* ns */
	uint64_t	 n, dropped;
	uint64_t	 late[TDDELAY_STATS];	/* ns past its time */
};

struct tddelay_pkt {
	uint64_t	 due;
	int		 flow;
	int		 back;		/* 0 out, 1 back */
	size_t		 len;
	uint8_t		 data[TDDELAY_DGRAM];
};

/* One sender of datagrams: its address and its socket to TARGET. */
struct tddelay_flow {
	struct sockaddr_storage	 from;
	socklen_t		 fromlen;
	int			 fd;
};

static struct sockaddr_storage	 dl_addr;	/* ADDR, port 0 */
static struct sockaddr_storage	 dl_target_tcp, dl_target_udp;
static socklen_t		 dl_alen;
static struct tddelay_way	 dl_way[2];
static struct tddelay_flow	 dl_flow[TDDELAY_MAX_FLOWS];
static int			 dl_nflows;
static struct tddelay_pkt	*dl_q[TDDELAY_QUEUE];	/* by due, a heap */
static int			 dl_nq;
static uint64_t			 dl_rand;

/* xorshift64*: a reproducible draw for a given seed */
static uint64_t
tddelay_rand(void)
{
	dl_rand ^= dl_rand >> 12;
	dl_rand ^= dl_rand << 25;
	dl_rand ^= dl_rand >> 27;
	return dl_rand * 2685821657736338717ULL;
}

/* "100us", "0.2ms", "50" (us): ns, or -1 */
static int64_t
tddelay_time(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		return -1;
	if (*end == '\0' || strcmp(end, "us") == 0)
		v *= 1e3;
	else if (strcmp(end, "ms") == 0)
		v *= 1e6;
	else if (strcmp(end, "s") == 0)
		v *= 1e9;
	else if (strcmp(end, "ns") != 0)
		return -1;
	return (int64_t)(v + 0.5);
}

/* DELAY[:JITTER] */
static int
tddelay_spec(const char *s, struct tddelay_way *w)
{
	char buf[64], *c;
	int64_t d, j = 0;

	snprintf(buf, sizeof buf, "%s", s);
	if ((c = strchr(buf, ':')) != NULL) {
		*c++ = '\0';
		if ((j = tddelay_time(c)) < 0)
			return -1;
	}
	if ((d = tddelay_time(buf)) < 0)
		return -1;
	w->delay = (uint64_t)d;
	w->jitter = (uint64_t)j;
	return 0;
}

static int
tddelay_resolve(const char *host, const char *port, int type,
    struct sockaddr_storage *ss)
{
	struct addrinfo hints, *res;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = type;
	hints.ai_flags = AI_NUMERICHOST;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	dl_alen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static void
tddelay_setport(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

/* A socket of type bound to ADDR at port (0: any). */
static int
tddelay_socket(int type, uint16_t port)
{
	struct sockaddr_storage ss = dl_addr;
	int fd, one = 1;

	tddelay_setport(&ss, port);
	fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (type == SOCK_DGRAM)
		setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&ss, dl_alen) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- TCP: carried as it comes ---- */

static int	dl_listen_fd;

static int
tddelay_pump(int from, int to)
{
	char buf[65536];
	ssize_t r, w, off;

	r = read(from, buf, sizeof buf);
	if (r <= 0)
		return -1;
	for (off = 0; off < r; off += w) {
		w = write(to, buf + off, (size_t)(r - off));
		if (w <= 0)
			return -1;
	}
	return 0;
}

static void *
tddelay_tcp(void *arg)
{
	struct pollfd pfd[1 + 2 * TDDELAY_MAX_CONNS];
	int n = 0, i, fd, up;

	(void)arg;
	pfd[0].fd = dl_listen_fd;
	pfd[0].events = POLLIN;
	for (;;) {
		if (poll(pfd, (nfds_t)(1 + 2 * n), -1) == -1)
			continue;
		for (i = 0; i < n; i++) {
			struct pollfd *a = &pfd[1 + 2 * i], *b = a + 1;

			if (((a->revents & (POLLIN | POLLHUP | POLLERR)) &&
			    tddelay_pump(a->fd, b->fd) == -1) ||
			    ((b->revents & (POLLIN | POLLHUP | POLLERR)) &&
			    tddelay_pump(b->fd, a->fd) == -1)) {
				/* one side ended: the pair ends */
				close(a->fd);
				close(b->fd);
				n--;
				a[0] = pfd[1 + 2 * n];
				b[0] = pfd[2 + 2 * n];
				a->revents = b->revents = 0;
				i--;
			}
		}
		if (!(pfd[0].revents & POLLIN))
			continue;
		if ((fd = accept4(dl_listen_fd, NULL, NULL, SOCK_CLOEXEC)) == -1)
			continue;
		up = tddelay_socket(SOCK_STREAM, 0);
		if (n == TDDELAY_MAX_CONNS || up == -1 ||
		    connect(up, (struct sockaddr *)&dl_target_tcp,
		    dl_alen) == -1) {
			if (up != -1)
				close(up);
			close(fd);
			continue;
		}
		pfd[1 + 2 * n].fd = fd;
		pfd[1 + 2 * n].events = POLLIN;
		pfd[2 + 2 * n].fd = up;
		pfd[2 + 2 * n].events = POLLIN;
		n++;
	}
	return NULL;
}

/* ---- UDP: each datagram at its time ---- */

static void
tddelay_heap_up(int i)
{
	struct tddelay_pkt *t;

	while (i > 0 && dl_q[(i - 1) / 2]->due > dl_q[i]->due) {
		t = dl_q[i];
		dl_q[i] = dl_q[(i - 1) / 2];
		dl_q[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static struct tddelay_pkt *
tddelay_heap_pop(void)
{
	struct tddelay_pkt *top = dl_q[0], *t;
	int i = 0, c;

	dl_q[0] = dl_q[--dl_nq];
	for (;;) {
		c = 2 * i + 1;
		if (c >= dl_nq)
			break;
		if (c + 1 < dl_nq && dl_q[c + 1]->due < dl_q[c]->due)
			c++;
		if (dl_q[i]->due <= dl_q[c]->due)
			break;
		t = dl_q[i];
		dl_q[i] = dl_q[c];
		dl_q[c] = t;
		i = c;
	}
	return top;
}

/* The sender's flow, made at its first datagram; -1 if none can be. */
static int
tddelay_flow(const struct sockaddr_storage *from, socklen_t len)
{
	int i, fd;

	for (i = 0; i < dl_nflows; i++)
		if (dl_flow[i].fromlen == len &&
		    memcmp(&dl_flow[i].from, from, len) == 0)
			return i;
	if (dl_nflows == TDDELAY_MAX_FLOWS)
		return -1;
	fd = tddelay_socket(SOCK_DGRAM, 0);
	if (fd == -1 || connect(fd, (struct sockaddr *)&dl_target_udp,
	    dl_alen) == -1) {
		if (fd != -1)
			close(fd);
		return -1;
	}
	dl_flow[dl_nflows].from = *from;
	dl_flow[dl_nflows].fromlen = len;
	dl_flow[dl_nflows].fd = fd;
	return dl_nflows++;
}

/* Read one datagram from fd into the queue, its time drawn. */
static void
tddelay_take(int fd, int back, int flow)
{
	struct tddelay_way *w = &dl_way[back];
	struct sockaddr_storage from;
	struct timespec stamp;
	struct tddelay_pkt *p;
	socklen_t fromlen;
	uint64_t err;
	int64_t d;
	ssize_t r;

	p = malloc(sizeof *p);
	if (p == NULL)
		return;
	r = td_udpstamp_recv(fd, p->data, sizeof p->data, &from, &fromlen,
	    &stamp);
	if (r < 0) {
		if (errno == EMSGSIZE)
			w->dropped++;
		free(p);
		return;
	}
	if (!back)
		flow = tddelay_flow(&from, fromlen);
	if (flow == -1 || dl_nq == TDDELAY_QUEUE) {
		w->dropped++;
		free(p);
		return;
	}
	d = (int64_t)w->delay;
	if (w->jitter > 0)
		d += (int64_t)(tddelay_rand() % (2 * w->jitter + 1)) -
		    (int64_t)w->jitter;
	if (d < 0)
		d = 0;
	/* the kernel's stamp, or now when it gave none */
	if (stamp.tv_sec == 0 && stamp.tv_nsec == 0)
		p->due = td_clock_now_ns();
	else
		p->due = td_clock_real_to_mono((uint64_t)stamp.tv_sec *
		    1000000000ULL + (uint64_t)stamp.tv_nsec, &err);
	p->due += (uint64_t)d;
	p->flow = flow;
	p->back = back;
	p->len = (size_t)r;
	dl_q[dl_nq++] = p;
	tddelay_heap_up(dl_nq - 1);
}

static void *
tddelay_udp(void *arg)
{
	struct pollfd pfd[2 + TDDELAY_MAX_FLOWS];
	struct itimerspec it;
	struct tddelay_pkt *p;
	struct tddelay_way *w;
	int front = *(int *)arg, tfd, i, n;
	uint64_t now, at;

	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (tfd == -1)
		return NULL;
	for (;;) {
		memset(&it, 0, sizeof it);
		if (dl_nq > 0) {
			at = dl_q[0]->due > TDDELAY_SPIN_NS ?
			    dl_q[0]->due - TDDELAY_SPIN_NS : 1;
			it.it_value.tv_sec = (time_t)(at / 1000000000ULL);
			it.it_value.tv_nsec = (long)(at % 1000000000ULL);
		}
		timerfd_settime(tfd, TFD_TIMER_ABSTIME, &it, NULL);
		pfd[0].fd = tfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = front;
		pfd[1].events = POLLIN;
		n = dl_nflows;
		for (i = 0; i < n; i++) {
			pfd[2 + i].fd = dl_flow[i].fd;
			pfd[2 + i].events = POLLIN;
		}
		if (poll(pfd, (nfds_t)(2 + n), -1) == -1)
			continue;
		if (pfd[1].revents & POLLIN)
			tddelay_take(front, 0, -1);
		for (i = 0; i < n; i++)
			if (pfd[2 + i].revents & POLLIN)
				tddelay_take(dl_flow[i].fd, 1, i);
		/* what is due within the spin, each at its time */
		while (dl_nq > 0 && dl_q[0]->due <=
		    td_clock_now_ns() + TDDELAY_SPIN_NS) {
			p = tddelay_heap_pop();
			while ((now = td_clock_now_ns()) < p->due)
				;
			if (p->back)
				sendto(front, p->data, p->len, MSG_DONTWAIT,
				    (struct sockaddr *)&dl_flow[p->flow].from,
				    dl_flow[p->flow].fromlen);
			else
				send(dl_flow[p->flow].fd, p->data, p->len,
				    MSG_DONTWAIT);
			w = &dl_way[p->back];
			if (w->n < TDDELAY_STATS)
				w->late[w->n] = now - p->due;
			w->n++;
			free(p);
		}
	}
	return NULL;
}

static int
tddelay_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void
tddelay_report(const char *name, struct tddelay_way *w)
{
	uint64_t n = w->n < TDDELAY_STATS ? w->n : TDDELAY_STATS;

	qsort(w->late, n, sizeof w->late[0], tddelay_cmp);
	printf("tddelay: %s: %llu datagrams (%llu dropped), delay %llu ns "
	    "+- %llu ns, late median %llu ns max %llu ns\n", name,
	    (unsigned long long)w->n, (unsigned long long)w->dropped,
	    (unsigned long long)w->delay, (unsigned long long)w->jitter,
	    (unsigned long long)(n ? w->late[(n - 1) / 2] : 0),
	    (unsigned long long)(n ? w->late[n - 1] : 0));
}

static void
tddelay_usage(void)
{
	fprintf(stderr, "usage: tddelay [-o DELAY[:JITTER]] "
	    "[-b DELAY[:JITTER]] [-u UDPPORT] [-s SEED] ADDR PORT TARGET\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *uport = NULL;
	pthread_t th;
	sigset_t set;
	int c, front, sig;

	dl_rand = (uint64_t)td_clock_ns(CLOCK_REALTIME) | 1;
	while ((c = getopt(argc, argv, "o:b:u:s:")) != -1) {
		switch (c) {
		case 'o':
		case 'b':
			if (tddelay_spec(optarg, &dl_way[c == 'b']) == -1)
				tddelay_usage();
			break;
		case 'u':
			uport = optarg;
			break;
		case 's':
			dl_rand = strtoull(optarg, NULL, 0) | 1;
			break;
		default:
			tddelay_usage();
		}
	}
	if (argc - optind != 3)
		tddelay_usage();
	if (uport == NULL)
		uport = argv[optind + 1];
	if (tddelay_resolve(argv[optind + 2], argv[optind + 1], SOCK_STREAM,
	    &dl_target_tcp) == -1 ||
	    tddelay_resolve(argv[optind + 2], uport, SOCK_DGRAM,
	    &dl_target_udp) == -1 ||
	    tddelay_resolve(argv[optind], "0", SOCK_STREAM, &dl_addr) == -1) {
		fprintf(stderr, "tddelay: bad address\n");
		return 2;
	}
	/* the timers as precise as the kernel makes them */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	dl_listen_fd = tddelay_socket(SOCK_STREAM, (uint16_t)atoi(argv[optind + 1]));
	front = tddelay_socket(SOCK_DGRAM, (uint16_t)atoi(uport));
	if (dl_listen_fd == -1 || listen(dl_listen_fd, 64) == -1 ||
	    front == -1) {
		perror("tddelay: bind");
		return 1;
	}
	if (pthread_create(&th, NULL, tddelay_tcp, NULL) != 0 ||
	    pthread_create(&th, NULL, tddelay_udp, &front) != 0) {
		fprintf(stderr, "tddelay: no thread\n");
		return 1;
	}
	printf("tddelay: ready\n");
	fflush(stdout);
	sigwait(&set, &sig);
	tddelay_report("out", &dl_way[0]);
	tddelay_report("back", &dl_way[1]);
	fflush(stdout);
	_exit(0);
}
