/*
 * uplink.c: a recording's network, whoever produces the recording (see
 * uplink.h): the stream made during set-up, the first connection, the
 * back-pressure that stops the input, a connection lost and resumed, the
 * local file (-o) going on alone when the network is given up, and the
 * END/DONE of the recording.  The session itself (tdproto, the stream's
 * bytes, reconnecting) is net.c's; this file decides what the recording
 * does about it, and logs what the user must know.  Its one copy: the
 * recorder (record.c) and the Plan 9 import (plan9.c) drive it through
 * their loops and struct uplink_ops.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "clock.h"
#include "log.h"
#include "meta.h"
#include "net.h"
#include "tdlimits.h"
#include "uplink.h"
#include "xmalloc.h"
#include "banned.h"

/* The final read sends as it reads once this much waits. */
#define UPLINK_FINAL		(8u * 1024 * 1024)
#define UPLINK_FINAL_LOW	(4u * 1024 * 1024)
/* How often the command lines are looked at during the recording. */
#define UPLINK_CMDLINES_MS	1000

/* uplink_readable() takes epoll's events and poll's alike. */
_Static_assert(EPOLLIN == POLLIN && EPOLLHUP == POLLHUP &&
    EPOLLERR == POLLERR, "epoll and poll events differ");

/* One recording's network. */
struct uplink {
	const struct agent_opts	*o;
	const char		*what;		/* "recording", "import" */
	struct uplink_ops	 ops;
	void			*arg;
	struct meta_tee		*sinks;
	bool			 local;		/* -o goes on alone */
	char			*err;		/* the producer's */
	size_t			 errlen;
	uint32_t		 ncpus;
	struct net		*net;		/* NULL: given up */
	struct net		*net_gone;	/* given up, closed at end */
	bool			 reconnecting;
	bool			 paused;	/* the input waits (ops.pause) */
	bool			 final_slow;	/* the final read stopped
						   sending: spooled */
	int			 epfd;		/* -1: not an epoll loop */
	uint32_t		 conn_id;
	uint32_t		 event_id;
	bool			 polled_conn;	/* uplink_pollfd(): the
						   connection, not eventfd */
	/* the command lines sent during the recording */
	uint64_t		 cmd_hash;	/* of the last sent, 0: none */
	uint64_t		 next_cmd_ms;	/* the next look */
	unsigned int		 cmd_reconnects;	/* when it was sent */
};

static int	uplink_end(struct uplink *, bool);

/* Whether an unnamed spool file can be made in dir. */
static int
uplink_spool_usable(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd == -1 && (errno == EOPNOTSUPP || errno == EISDIR)) {
		if (access(dir, W_OK | X_OK) == -1)
			return -1;
		return 0;
	}
	if (fd == -1)
		return -1;
	close(fd);
	return 0;
}

/*
 * The stream of a recording (h: the recording's side of the HELLO), from
 * the command line: where the listener is, the TLS files, the spool; not
 * connected yet.
 */
static struct net *
uplink_net_new(const struct agent_opts *o, struct td_hello *h, char *err,
    size_t errlen)
{
	struct net_params np;
	uint16_t one = 1;

	/* 4: the header cache, when the listener has one */
	h->version_min = TD_PROTO_VERSION_MIN;
	h->version_max = TD_PROTO_VERSION;
	h->big_endian = *(uint8_t *)&one == 1 ? 0 : 1;
	snprintf(h->name, sizeof h->name, "%s", o->name ? o->name : "");
	memset(&np, 0, sizeof np);
	np.host = o->host;
	np.port = o->port;
	np.cert = o->cert;
	np.key = o->key;
	np.ca = o->ca;
	np.server_name = o->server_name;
	np.insecure = o->insecure;
	np.timeout = 10;
	np.spool_dir = o->spool_dir;
	np.spool_max = o->spool_max;
	if (np.spool_max > 0 && uplink_spool_usable(np.spool_dir) == -1) {
		if (o->spool_given) {
			snprintf(err, errlen, "cannot spool in '%s': %s",
			    np.spool_dir, strerror(errno));
			return NULL;
		}
		log_warnx("cannot spool in '%s' (%s): what the listener has "
		    "not taken stays in 20 MiB of memory", np.spool_dir,
		    strerror(errno));
		np.spool_max = 0;
	}
	np.wire = o->wire;
	return net_new(&np, h, err, errlen);
}

/* The stream to the listener, not connected yet (uplink.h). */
struct uplink *
uplink_new(const struct uplink_params *p)
{
	struct meta_sink ns;
	struct td_hello h;
	struct uplink *u;

	memset(&h, 0, sizeof h);
	h.ncpus = p->ncpus;
	h.page_size = p->page_size;
	h.long_size = p->long_size;
	h.commit_size = p->commit_size;
	h.recording_id = p->trace_id ^ 0x5a5a5a5a5a5a5a5aULL;
	h.trace_id = p->trace_id;
	snprintf(h.clock, sizeof h.clock, "%s", p->clock);
	u = xcalloc(1, sizeof *u);
	u->o = p->o;
	u->what = p->what;
	u->ops = *p->ops;
	u->arg = p->arg;
	u->sinks = p->sinks;
	u->local = p->local;
	u->err = p->err;
	u->errlen = p->errlen;
	u->ncpus = p->ncpus;
	u->epfd = -1;
	u->net = uplink_net_new(p->o, &h, p->err, p->errlen);
	if (u->net == NULL) {
		free(u);
		return NULL;
	}
	net_meta_sink(u->net, &ns);
	meta_tee_add(u->sinks, &ns, "cannot queue pages");
	return u;
}

/* An option for the listener only (uplink.h). */
int
uplink_option(struct uplink *u, uint16_t id, const void *p, size_t n)
{
	struct meta_sink ns;

	if (u == NULL || u->net == NULL)
		return 0;
	net_meta_sink(u->net, &ns);
	return ns.option(ns.arg, id, p, n);
}

/*
 * Why no collector of several took the recording, into err: each one's
 * reason (why[i]) after where it is.
 */
static void
uplink_reasons(struct net *n, char why[][512], char *err, size_t errlen)
{
	size_t len;
	int i, k = net_collectors(n);

	if (k == 1) {
		snprintf(err, errlen, "%s", why[0]);
		return;
	}
	len = (size_t)snprintf(err, errlen, "no collector took the recording");
	for (i = 0; i < k && len < errlen; i++) {
		len += (size_t)snprintf(err + len, errlen - len, "%s %s: %s",
		    i == 0 ? ":" : ";", net_collector(n, i), why[i]);
	}
}

/*
 * The first connection: the collectors of -h in order, until one takes
 * the recording (it keeps it: net.h).  One that is unreachable, times out
 * or says "come back later" (out of descriptors, disk or memory) is
 * passed over for the next; so is one that refuses this agent for good (a
 * certificate refused: another collector may have another CRL), which is
 * then not asked again.  When none took it and one said "later" (or did
 * not answer in time), a fleet starting at once waits for them: the whole
 * list is tried again, with backoff, up to --reconnect-wait (nothing is
 * lost meanwhile: tracing is not on yet, an import has not started
 * reading).  Then err holds every collector's reason.
 */
int
uplink_start(struct uplink *u)
{
	char why[TD_MAX_COLLECTORS][512];
	char tls[160];
	bool refused[TD_MAX_COLLECTORS] = { false };
	struct timespec t0, now;
	bool told = false, later, any;
	struct net *n;
	int i, k, sig;

	if (u == NULL || u->net == NULL)
		return 0;
	n = u->net;
	k = net_collectors(n);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		later = any = false;
		for (i = 0; i < k; i++) {
			if (refused[i])
				continue;
			any = true;
			if (net_start(n, i, why[i], sizeof why[i]) == 0)
				goto up;
			refused[i] = net_refused(n);
			later = later || net_later(n);
			if (k > 1 && !told)
				log_warnx("collector %s: %s%s", net_where(n),
				    why[i], refused[i] ? " (refused for good)"
				    : "");
		}
		uplink_reasons(n, why, u->err, u->errlen);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!any || !later || (now.tv_sec - t0.tv_sec) +
		    (now.tv_nsec - t0.tv_nsec) / 1e9 >= u->o->reconnect_wait)
			return -1;
		/* the signals wait blocked for the producer's loop: one
		   that came meanwhile ends the trying */
		if ((sig = net_stop_signal()) != 0) {
			snprintf(u->err, u->errlen, "stopped by %s before the "
			    "listener took the recording", sig == SIGINT ?
			    "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
			return -1;
		}
		if (!told)
			log_warnx("%s; trying again for up to %d s", u->err,
			    u->o->reconnect_wait);
		told = true;
		net_pause(n);
	}
up:
	if (k > 1)
		log_info("connected to %s as '%s' (collector %d of %d: it "
		    "keeps the recording)", net_where(n), net_identity(n),
		    i + 1, k);
	else
		log_info("connected to %s as '%s'", net_where(n),
		    net_identity(n));
	net_tls(n, tls, sizeof tls);
	if (tls[0] != '\0')
		log_debug("%s", tls);
	if (net_note(n)[0] != '\0')
		log_info("%s", net_note(n));
	return 0;
}

/*
 * Everything queued out, waiting up to ms (the headers that waited in the
 * stream for the connection, before the first probes).  A listener lost
 * now (killed, the link cut while megabytes of headers go out) is lost
 * like any later: the headers stay in the stream until acknowledged, a
 * thread reconnects, the recording starts anyway.
 */
int
uplink_flush(struct uplink *u, int ms)
{
	if (u == NULL || u->net == NULL)
		return 0;
	if (net_batch_end(u->net) == -1) {
		snprintf(u->err, u->errlen, "cannot frame the headers");
		return -1;
	}
	if (net_flush_to(u->net, 0, ms, u->err, u->errlen) == -1)
		return uplink_end(u, false);
	return 0;
}

/* epoll_ctl() of the connection or the eventfd in the producer's set. */
static int
uplink_ctl(struct uplink *u, int op, int fd, uint32_t id, uint32_t events)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof ev);
	ev.events = events;
	ev.data.u32 = id;
	return epoll_ctl(u->epfd, op, fd, op == EPOLL_CTL_DEL ? NULL : &ev);
}

/* The loop's epoll set watches the connection and the reconnection. */
int
uplink_watch(struct uplink *u, int epfd, uint32_t conn_id,
    uint32_t event_id)
{
	if (u == NULL || u->net == NULL)
		return 0;
	u->epfd = epfd;
	u->conn_id = conn_id;
	u->event_id = event_id;
	if (net_up(u->net) && uplink_ctl(u, EPOLL_CTL_ADD, net_fd(u->net),
	    conn_id, EPOLLIN) == -1)
		return -1;
	return uplink_ctl(u, EPOLL_CTL_ADD, net_event_fd(u->net), event_id,
	    EPOLLIN);
}

/* A poll loop's entry: the connection, or the reconnection's eventfd. */
bool
uplink_pollfd(struct uplink *u, struct pollfd *pfd)
{
	if (u == NULL || u->net == NULL)
		return false;
	u->polled_conn = net_up(u->net);
	pfd->fd = u->polled_conn ? net_fd(u->net) : net_event_fd(u->net);
	pfd->events = POLLIN | (u->polled_conn && net_want_write(u->net) ?
	    POLLOUT : 0);
	pfd->revents = 0;
	return true;
}

/* Let the input be read again, or not. */
static void
uplink_pause(struct uplink *u, bool pause)
{
	if (pause == u->paused)
		return;
	u->paused = pause;
	log_debug("%s reading the rings: %" PRIu64 " bytes not acknowledged",
	    pause ? "pause" : "resume", u->net ? net_unacked(u->net) : 0);
	if (u->ops.pause != NULL)
		u->ops.pause(u->arg, pause);
}

/* The connection broke (the reason in err): uplink.h. */
int
uplink_lost(struct uplink *u, const char *why)
{
	if (u == NULL || u->net == NULL)
		return 0;
	if (why != u->err)
		snprintf(u->err, u->errlen, "%s", why);
	return uplink_end(u, false);
}

/*
 * The stream's memory and spool are full.  Without a local file the input
 * waits (1: stop reading).  With one, the local file must not lose what
 * the network cannot take: the network goes (0: read on).
 */
static int
uplink_full(struct uplink *u)
{
	if (!u->local)
		return 1;
	snprintf(u->err, u->errlen, "the listener cannot keep up and the "
	    "spool is full");
	uplink_end(u, true);
	return 0;
}

/*
 * The connection broke (err says why).  Unless the listener refused for
 * good (or for_good), the recording goes on into memory and the spool
 * while a thread reconnects.  For good: with a local file the recording
 * goes on into it alone; without one there is nowhere left to put the
 * data (-1).
 */
static int
uplink_end(struct uplink *u, bool for_good)
{
	if (u->epfd != -1 && net_up(u->net))
		uplink_ctl(u, EPOLL_CTL_DEL, net_fd(u->net), 0, 0);
	if (!for_good && !net_fatal(u->net)) {
		if (!u->reconnecting)
			log_warnx("%s; reconnecting, the %s goes on", u->err,
			    u->what);
		u->err[0] = '\0';
		u->reconnecting = true;
		net_down(u->net);
		if (!net_fatal(u->net))
			return 0;
	}
	if (!u->local)
		return -1;
	log_warnx("%s; the %s goes on into '%s' only", u->err, u->what,
	    u->o->output);
	u->err[0] = '\0';
	if (u->epfd != -1)
		uplink_ctl(u, EPOLL_CTL_DEL, net_event_fd(u->net), 0, 0);
	/* a connection attempt may take seconds to give up: not now */
	net_stop(u->net);
	meta_tee_drop(u->sinks, u->net);
	u->net_gone = u->net;
	u->net = NULL;
	u->reconnecting = false;
	if (u->ops.gone != NULL)
		u->ops.gone(u->arg);
	uplink_pause(u, false);
	return 0;
}

/* Whether the input may be read on (uplink.h). */
bool
uplink_room(struct uplink *u, bool final, bool in_round)
{
	for (;;) {
		if (u == NULL || u->net == NULL || !net_congested(u->net) ||
		    (!in_round && uplink_full(u) == 0))
			return true;
		if (final && !in_round && net_make_room(u->net,
		    u->o->reconnect_wait, u->err, u->errlen) == 0)
			continue;
		return false;
	}
}

/*
 * The final read takes whole rings without going back to the loop: keep
 * the queue bounded by sending as it fills.
 */
int
uplink_final_send(struct uplink *u)
{
	if (u == NULL || u->final_slow || u->net == NULL ||
	    !net_up(u->net) || net_pending(u->net) <= UPLINK_FINAL)
		return 0;
	if (net_batch_end(u->net) == -1 || net_flush_to(u->net,
	    UPLINK_FINAL_LOW, 100, u->err, u->errlen) == -1)
		return uplink_end(u, false);
	/* a link this slow gets the rest from the spool later */
	if (net_pending(u->net) > UPLINK_FINAL)
		u->final_slow = true;
	return 0;
}

/* The listener spoke, or the connection broke (events ev). */
int
uplink_readable(struct uplink *u, uint32_t ev)
{
	if (u != NULL && u->net != NULL && net_up(u->net) &&
	    (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
	    net_readable(u->net, u->err, u->errlen) == -1)
		return uplink_end(u, false);
	return 0;
}

/*
 * The command lines during the recording (CMDLINES, version 6), every
 * UPLINK_CMDLINES_MS when they changed or the connection was resumed: a
 * listener that cuts the recording into pieces (--rotate) writes the
 * latest into each piece it seals before the section of the end, or
 * trace-cmd shows the pieces' tasks as <...>.  Too many for a frame: the
 * lines that fit.
 */
static void
uplink_cmdlines(struct uplink *u)
{
	uint64_t h = 0xcbf29ce484222325ULL, now = td_clock_now_ms();
	char err[512];
	size_t n = 0, i;
	char *t;

	if (u->ops.cmdlines == NULL || !net_up(u->net) ||
	    net_version(u->net) < 6 || now < u->next_cmd_ms)
		return;
	u->next_cmd_ms = now + UPLINK_CMDLINES_MS;
	if ((t = u->ops.cmdlines(u->arg, &n)) == NULL)
		return;
	if (n > TD_MAX_FRAME) {
		for (n = TD_MAX_FRAME; n > 0 && t[n - 1] != '\n'; n--)
			;
	}
	for (i = 0; i < n; i++)
		h = (h ^ (uint8_t)t[i]) * 0x100000001b3ULL;
	h |= 1;
	if (h != u->cmd_hash || net_reconnects(u->net) != u->cmd_reconnects) {
		if (net_cmdlines(u->net, t, n, err, sizeof err) == 0) {
			u->cmd_hash = h;
			u->cmd_reconnects = net_reconnects(u->net);
		} else
			log_warnx("%s", err);
	}
	free(t);
}

/* The loop's timer: the command lines; a KEEPALIVE if the link is quiet. */
int
uplink_tick(struct uplink *u)
{
	if (u == NULL || u->net == NULL)
		return 0;
	uplink_cmdlines(u);
	if (net_keepalive(u->net, u->err, u->errlen) == -1)
		return uplink_end(u, false);
	return 0;
}

/* The reconnection thread is done. */
int
uplink_back(struct uplink *u)
{
	if (u == NULL || u->net == NULL)
		return 0;
	u->err[0] = '\0';
	if (net_reconnected(u->net, u->err, u->errlen) == -1) {
		if (u->err[0] == '\0')
			return 0;	/* not yet */
		return uplink_end(u, false);
	}
	u->reconnecting = false;
	log_info("reconnected to %s: resuming (%" PRIu64 " bytes not "
	    "acknowledged)", net_where(u->net), net_unacked(u->net));
	if (u->epfd != -1 && uplink_ctl(u, EPOLL_CTL_ADD, net_fd(u->net),
	    u->conn_id, EPOLLIN) == -1) {
		snprintf(u->err, u->errlen, "epoll: %s", strerror(errno));
		return uplink_end(u, false);
	}
	return 0;
}

/*
 * Send what the network takes.  An input that can wait is stopped and
 * resumed around the stream's memory watermarks: when memory and spool
 * are full the kernel ring absorbs the difference (its overruns are
 * counted and marked) instead of the agent's memory.  One that cannot
 * (no ops.pause) waits here until the listener takes enough.
 */
int
uplink_pump(struct uplink *u)
{
	if (u == NULL || u->net == NULL)
		return 0;
	if (net_up(u->net) && net_flush(u->net, u->err, u->errlen) == -1)
		return uplink_end(u, false);
	if (u->net == NULL)
		return 0;
	if (u->ops.pause == NULL) {
		if (net_congested(u->net) && net_make_room(u->net,
		    u->o->reconnect_wait, u->err, u->errlen) == -1)
			return uplink_end(u, true);
		return 0;
	}
	if (!u->paused && net_congested(u->net) && uplink_full(u) == 0)
		return 0;
	uplink_pause(u, u->paused ? !net_relieved(u->net) :
	    net_congested(u->net));
	if (!net_up(u->net) || u->epfd == -1)
		return 0;
	uplink_ctl(u, EPOLL_CTL_MOD, net_fd(u->net), u->conn_id, EPOLLIN |
	    (net_want_write(u->net) ? EPOLLOUT : 0));
	return 0;
}

/*
 * A poll loop's turn (uplink.h): the reconnection done or the listener's
 * events, sending and room, and when the loop was idle a KEEPALIVE.
 */
int
uplink_polled(struct uplink *u, short revents, bool idle)
{
	if (u == NULL || u->net == NULL)
		return 0;
	if (revents != 0 && (u->polled_conn ? uplink_readable(u,
	    (uint32_t)revents) : uplink_back(u)) == -1)
		return -1;
	if (uplink_pump(u) == -1)
		return -1;
	if (idle)
		return uplink_tick(u);
	return 0;
}

/*
 * The end of the recording on the network: END with the page counts,
 * everything sent (reconnecting for up to --reconnect-wait), the
 * listener's DONE.  A listener lost with a local file is only a warning.
 */
int
uplink_finish(struct uplink *u)
{
	const struct agent_opts *o;
	char path[512];
	uint64_t *pages;
	struct net *n;
	uint32_t i;
	int ret;

	if (u == NULL || u->net == NULL)
		return 0;
	o = u->o;
	n = u->net;
	if (!net_up(n) && o->reconnect_wait > 0)
		log_info("waiting up to %d s for the listener to take "
		    "the rest of the recording (SIGINT or SIGTERM: give up)",
		    o->reconnect_wait);
	pages = xcalloc(u->ncpus, sizeof *pages);
	for (i = 0; i < u->ncpus; i++)
		pages[i] = u->ops.pages(u->arg, (int)i);
	ret = net_finish(n, pages, (int)u->ncpus, o->reconnect_wait, path,
	    sizeof path, u->err, u->errlen);
	free(pages);
	if (ret == -1) {
		if (!u->local)
			return -1;
		log_warnx("%s; the recording is complete in '%s' only",
		    u->err, o->output);
		u->err[0] = '\0';
		return 0;
	}
	log_info("the listener wrote '%s' (%.1f MB sent%s%s%s)", path,
	    net_sent(n) / 1e6, net_collectors(n) > 1 ? " to " : "",
	    net_collectors(n) > 1 ? net_where(n) : "", net_reconnects(n) ?
	    ", resumed after lost connections" : "");
	/* the pages' own ratio: the headers (megabytes of
	   kallsyms), time sync and resends are in "sent" */
	if (o->wire && net_raw(n) > 0)
		log_info("wire compression: %.1f MB of pages in %.1f "
		    "MB of frames (%.3f)", net_raw(n) / 1e6,
		    net_framed(n) / 1e6,
		    (double)net_framed(n) / (double)net_raw(n));
	if (net_reconnects(n) > 0)
		log_info("%u reconnections", net_reconnects(n));
	return 0;
}

/* The stream, until the network is given up. */
struct net *
uplink_net(const struct uplink *u)
{
	return u != NULL ? u->net : NULL;
}

/* Whether the input waits for the network. */
bool
uplink_paused(const struct uplink *u)
{
	return u != NULL && u->paused;
}

/* Whether a lost connection is being dialed again. */
bool
uplink_reconnecting(const struct uplink *u)
{
	return u != NULL && u->reconnecting;
}

/*
 * Close the stream and one given up (the privileged parent's copies once
 * the recorder runs, or everything at the end).
 */
void
uplink_free(struct uplink *u)
{
	if (u == NULL)
		return;
	if (u->net != NULL)
		meta_tee_drop(u->sinks, u->net);
	net_close(u->net);
	net_close(u->net_gone);
	free(u);
}
