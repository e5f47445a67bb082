/*
 * uplink.c: the network's part of a recording (see recorder.h): the
 * stream to the listener made during set-up, its first connection, the
 * back-pressure that pauses the rings, a connection lost and resumed, the
 * local file (-o) going on alone when the network is given up, and the
 * END/DONE of the recording.  The session itself (tdproto, the stream's
 * bytes, reconnecting) is net.c's; this file decides what the recording
 * does about it, and logs what the user must know.  The set-up, first
 * connection and end of a stream are also there for a producer without
 * a recorder (uplink.h: the Plan 9 import).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "instance.h"
#include "log.h"
#include "meta.h"
#include "net.h"
#include "recorder.h"
#include "ring.h"
#include "tdlimits.h"
#include "tsync.h"
#include "uplink.h"
#include "xmalloc.h"
#include "banned.h"

/* The final drain sends as it reads once this much waits. */
#define UPLINK_FINAL		(8u * 1024 * 1024)
#define UPLINK_FINAL_LOW	(4u * 1024 * 1024)
/* How often the command lines are looked at during the recording. */
#define UPLINK_CMDLINES_S	1.0
/* At most this long for the headers to go out before the first probes. */
#define UPLINK_HEADERS_MS	10000

static int	uplink_end(struct recorder *, bool);

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
 * connected yet.  Shared by every producer of recordings (uplink.h).
 */
struct net *
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

/* The stream to the listener, not connected yet (uplink_start()). */
int
uplink_new(struct recorder *r)
{
	struct meta_sink ns;
	struct td_hello h;

	memset(&h, 0, sizeof h);
	h.ncpus = r->ncpus;
	h.page_size = r->page_size;
	h.long_size = sizeof(long);
	h.commit_size = r->commit_size;
	h.recording_id = r->trace_id ^ 0x5a5a5a5a5a5a5a5aULL;
	h.trace_id = r->trace_id;
	snprintf(h.clock, sizeof h.clock, "%s", instance_clock(r->in));
	r->net = uplink_net_new(r->o, &h, r->err, sizeof r->err);
	if (r->net == NULL)
		return -1;
	net_meta_sink(r->net, &ns);
	meta_tee_add(r->sinks, &ns, "cannot queue pages");
	return 0;
}

int
uplink_option(struct recorder *r, uint16_t id, const void *p, size_t n)
{
	struct meta_sink ns;

	if (r->net == NULL)
		return 0;
	net_meta_sink(r->net, &ns);
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
uplink_net_start(struct net *n, const struct agent_opts *o, char *err,
    size_t errlen)
{
	char why[TD_MAX_COLLECTORS][512];
	char tls[160];
	bool refused[TD_MAX_COLLECTORS] = { false };
	struct timespec t0, now;
	bool told = false, later, any;
	int i, k = net_collectors(n), sig;

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
		uplink_reasons(n, why, err, errlen);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!any || !later || (now.tv_sec - t0.tv_sec) +
		    (now.tv_nsec - t0.tv_nsec) / 1e9 >= o->reconnect_wait)
			return -1;
		/* the signals wait blocked for the recorder's loop: one
		   that came meanwhile ends the trying */
		if ((sig = net_stop_signal()) != 0) {
			snprintf(err, errlen, "stopped by %s before the "
			    "listener took the recording", sig == SIGINT ?
			    "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
			return -1;
		}
		if (!told)
			log_warnx("%s; trying again for up to %d s", err,
			    o->reconnect_wait);
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
 * The first connection (unprivileged): the headers that waited in the
 * stream go out, then the first time-sync round if the listener wants
 * time sync.
 */
int
uplink_start(struct recorder *r)
{
	if (r->net == NULL)
		return 0;
	if (uplink_net_start(r->net, r->o, r->err, sizeof r->err) == -1)
		return -1;
	if (net_tsync_interval(r->net) == TD_TSYNC_OFF) {
		tsync_free(r->tsync);
		r->tsync = NULL;
	} else if (r->tsync == NULL)
		log_warnx("time sync is off: %s", r->tsync_err);
	/* the first probes go out on an empty queue: the headers
	   first (they waited in it for the connection) */
	if (r->tsync != NULL && net_batch_end(r->net) == -1) {
		snprintf(r->err, sizeof r->err, "cannot frame the "
		    "headers");
		return -1;
	}
	/*
	 * A listener lost now (killed, the link cut while megabytes
	 * of headers go out) is lost like any later: the headers
	 * stay in the stream until acknowledged, a thread
	 * reconnects, the recording starts anyway.
	 */
	if (r->tsync != NULL && net_flush_to(r->net, 0,
	    UPLINK_HEADERS_MS, r->err, sizeof r->err) == -1 &&
	    uplink_lost(r) == -1)
		return -1;
	return 0;
}

/* The loop watches the connection and the reconnection thread. */
int
uplink_watch(struct recorder *r)
{
	struct epoll_event ev;

	if (r->net == NULL)
		return 0;
	memset(&ev, 0, sizeof ev);
	ev.events = EPOLLIN;
	ev.data.u32 = RECORD_NET_ID;
	if (net_up(r->net) && epoll_ctl(r->epfd, EPOLL_CTL_ADD,
	    net_fd(r->net), &ev) == -1)
		return -1;
	ev.data.u32 = RECORD_NET_EV;
	return epoll_ctl(r->epfd, EPOLL_CTL_ADD, net_event_fd(r->net), &ev);
}

/* Let the rings be read again, or not. */
static void
uplink_pause(struct recorder *r, bool pause)
{
	struct epoll_event ev;
	int i;

	if (pause == r->paused)
		return;
	r->paused = pause;
	log_debug("%s reading the rings: %" PRIu64 " bytes not acknowledged",
	    pause ? "pause" : "resume", r->net ? net_unacked(r->net) : 0);
	for (i = 0; i < r->ncpus; i++) {
		if (r->cpu[i].ring == NULL)
			continue;
		memset(&ev, 0, sizeof ev);
		ev.events = pause ? 0 : EPOLLIN;
		ev.data.u32 = i;
		epoll_ctl(r->epfd, EPOLL_CTL_MOD, ring_fd(r->cpu[i].ring), &ev);
	}
}

/*
 * The connection broke.  Unless the listener refused for good, the
 * recording goes on into memory and the spool while a thread reconnects.
 * For good: with a local file the recording goes on into it alone; without
 * one there is nowhere left to put the data.
 */
int
uplink_lost(struct recorder *r)
{
	return uplink_end(r, false);
}

/*
 * The stream's memory and spool are full.  Without a local file the rings
 * wait (1: stop reading).  With one, the local file must not lose what the
 * network cannot take: the network goes (0: read on).
 */
static int
uplink_full(struct recorder *r)
{
	if (r->file == NULL)
		return 1;
	snprintf(r->err, sizeof r->err, "the listener cannot keep up and "
	    "the spool is full");
	uplink_end(r, true);
	return 0;
}

static int
uplink_end(struct recorder *r, bool for_good)
{
	if (net_up(r->net))
		epoll_ctl(r->epfd, EPOLL_CTL_DEL, net_fd(r->net), NULL);
	if (!for_good && !net_fatal(r->net)) {
		if (!r->reconnecting)
			log_warnx("%s; reconnecting, the recording goes on",
			    r->err);
		r->err[0] = '\0';
		r->reconnecting = true;
		net_down(r->net);
		if (!net_fatal(r->net))
			return 0;
	}
	if (r->file == NULL) {
		r->failed = true;
		return -1;
	}
	log_warnx("%s; the recording goes on into '%s' only", r->err,
	    r->o->output);
	r->err[0] = '\0';
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, net_event_fd(r->net), NULL);
	/* a connection attempt may take seconds to give up: not now */
	net_stop(r->net);
	r->net_gone = r->net;
	r->net = NULL;
	r->reconnecting = false;
	/* time sync needs the listener */
	tsync_free(r->tsync);
	r->tsync = NULL;
	meta_tee_drop(r->sinks, r->net_gone);
	uplink_pause(r, false);
	return 0;
}

/*
 * Whether the drain may read on: not when the stream's memory and spool
 * are full and no local file lets the network go (uplink_full()); nowhere
 * left to keep pages, the rest stays (in the loop, until the network takes
 * some; at the end, tracing is off and the rest waits for it, after
 * waiting for room as long as --reconnect-wait allows).  Between the
 * probes of a time-sync round the network is never given up.
 */
bool
uplink_room(struct recorder *r, bool final)
{
	for (;;) {
		if (r->net == NULL || !net_congested(r->net) ||
		    (!r->in_round && uplink_full(r) == 0))
			return true;
		if (final && !r->in_round && net_make_room(r->net,
		    r->o->reconnect_wait, r->err, sizeof r->err) == 0)
			continue;
		if (final)
			r->left_unread++;
		return false;
	}
}

/*
 * The final drain reads whole rings without going back to the loop:
 * keep the queue bounded by sending as it fills.
 */
int
uplink_final_send(struct recorder *r)
{
	if (r->final_slow || r->net == NULL || !net_up(r->net) ||
	    net_pending(r->net) <= UPLINK_FINAL)
		return 0;
	if (net_batch_end(r->net) == -1 || net_flush_to(r->net,
	    UPLINK_FINAL_LOW, 100, r->err, sizeof r->err) == -1)
		return uplink_lost(r);
	/* a link this slow gets the rest from the spool later */
	if (net_pending(r->net) > UPLINK_FINAL)
		r->final_slow = true;
	return 0;
}

/* The listener spoke, or the connection broke (epoll events ev). */
void
uplink_readable(struct recorder *r, uint32_t ev)
{
	if (r->net != NULL && net_up(r->net) &&
	    (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
	    net_readable(r->net, r->err, sizeof r->err) == -1)
		uplink_lost(r);
}

/*
 * The command lines during the recording (CMDLINES, version 6), every
 * UPLINK_CMDLINES_S when they changed or the connection was resumed: a
 * listener that cuts the recording into pieces (--rotate) writes the
 * latest into each piece it seals before the section of the end, or
 * trace-cmd shows the pieces' tasks as <...>.  Too many for a frame: the
 * lines that fit.
 */
static void
uplink_cmdlines(struct recorder *r)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t n = 0, i;
	char *t;

	if (r->final || !net_up(r->net) || net_version(r->net) < 6 ||
	    record_elapsed(r) < r->next_cmd)
		return;
	r->next_cmd = record_elapsed(r) + UPLINK_CMDLINES_S;
	if ((t = instance_read_top(r->in, "saved_cmdlines", &n)) == NULL)
		return;
	if (n > TD_MAX_FRAME) {
		for (n = TD_MAX_FRAME; n > 0 && t[n - 1] != '\n'; n--)
			;
	}
	for (i = 0; i < n; i++)
		h = (h ^ (uint8_t)t[i]) * 0x100000001b3ULL;
	h |= 1;
	if (h != r->cmd_hash || net_reconnects(r->net) != r->cmd_reconnects) {
		if (net_cmdlines(r->net, t, n, r->err, sizeof r->err) == 0) {
			r->cmd_hash = h;
			r->cmd_reconnects = net_reconnects(r->net);
		} else
			log_warnx("%s", r->err);
	}
	free(t);
}

/* The loop's timer: a KEEPALIVE if the link is quiet; the command lines. */
void
uplink_tick(struct recorder *r)
{
	if (r->net == NULL)
		return;
	uplink_cmdlines(r);
	if (net_keepalive(r->net, r->err, sizeof r->err) == -1)
		uplink_lost(r);
}

/* The reconnection thread is done. */
void
uplink_back(struct recorder *r)
{
	struct epoll_event ev;

	if (r->net == NULL)
		return;
	if (net_reconnected(r->net, r->err, sizeof r->err) == -1) {
		if (r->err[0] == '\0')
			return;		/* not yet */
		uplink_lost(r);
		return;
	}
	r->reconnecting = false;
	log_info("reconnected to %s: resuming (%" PRIu64 " bytes not "
	    "acknowledged)", net_where(r->net), net_unacked(r->net));
	memset(&ev, 0, sizeof ev);
	ev.events = EPOLLIN;
	ev.data.u32 = RECORD_NET_ID;
	if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, net_fd(r->net), &ev) == -1) {
		snprintf(r->err, sizeof r->err, "epoll: %s", strerror(errno));
		uplink_lost(r);
	}
}

/*
 * Send what the network takes, and pause or resume the ring readers around
 * the stream's memory watermarks: when memory and spool are full the
 * kernel ring absorbs the difference (its overruns are counted and marked)
 * instead of the agent's memory.
 */
int
uplink_pump(struct recorder *r)
{
	struct epoll_event ev;

	if (r->net == NULL)
		return 0;
	if (net_up(r->net) && net_flush(r->net, r->err, sizeof r->err) == -1)
		return uplink_lost(r);
	if (r->net == NULL)
		return 0;
	if (!r->paused && net_congested(r->net) && uplink_full(r) == 0)
		return 0;
	uplink_pause(r, r->paused ? !net_relieved(r->net) :
	    net_congested(r->net));
	if (!net_up(r->net))
		return 0;
	memset(&ev, 0, sizeof ev);
	ev.events = EPOLLIN | (net_want_write(r->net) ? EPOLLOUT : 0);
	ev.data.u32 = RECORD_NET_ID;
	epoll_ctl(r->epfd, EPOLL_CTL_MOD, net_fd(r->net), &ev);
	return 0;
}

/*
 * The end of the recording on the network: END with the page counts,
 * everything sent (reconnecting for up to --reconnect-wait), the
 * listener's DONE.  A listener lost with a local file is only a warning.
 */
int
uplink_finish(struct recorder *r)
{
	uint64_t *pages;
	int i, ret;

	if (r->net == NULL)
		return 0;
	pages = xcalloc(r->ncpus, sizeof *pages);
	for (i = 0; i < r->ncpus; i++)
		pages[i] = r->cpu[i].pages;
	ret = uplink_net_finish(r->net, r->o, pages, r->ncpus,
	    r->file != NULL, r->err, sizeof r->err);
	free(pages);
	return ret;
}

/*
 * The end of a recording on the network, whoever produced it: END with
 * the page counts, everything sent, the listener's DONE (uplink.h).
 */
int
uplink_net_finish(struct net *n, const struct agent_opts *o,
    const uint64_t *pages, int ncpus, bool local, char *err, size_t errlen)
{
	char path[512];

	if (!net_up(n) && o->reconnect_wait > 0)
		log_info("waiting up to %d s for the listener to take "
		    "the rest of the recording (SIGINT or SIGTERM: give up)",
		    o->reconnect_wait);
	if (net_finish(n, pages, ncpus, o->reconnect_wait, path, sizeof path,
	    err, errlen) == -1) {
		if (!local)
			return -1;
		log_warnx("%s; the recording is complete in '%s' only", err,
		    o->output);
		err[0] = '\0';
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

/*
 * Close the stream and one given up (the privileged parent's copies once
 * the recorder runs, or everything at the end).
 */
void
uplink_free(struct recorder *r)
{
	if (r->net != NULL)
		meta_tee_drop(r->sinks, r->net);
	net_close(r->net);
	r->net = NULL;
	net_close(r->net_gone);
	r->net_gone = NULL;
}
