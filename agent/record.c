/*
 * record.c: the local recording loop of tdagent.
 *
 * One thread, one epoll set: the per-CPU trace_pipe_raw readers, a
 * signalfd (SIGINT, SIGTERM, SIGHUP, SIGCHLD) and a 100 ms timer.  A CPU is
 * read when the kernel says its buffer reached the instance's buffer_percent
 * watermark; reading stops at the first page that is not full, so the
 * reader never chases the writer page by page.  The timer drains every CPU
 * completely, partial pages included, so quiet CPUs still reach the file.
 * Pages go to the trace.dat writer as they come: memory use does not grow
 * with the length of the recording.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "instance.h"
#include "log.h"
#include "meta.h"
#include "net.h"
#include "page.h"
#include "priv.h"
#include "record.h"
#include "ring.h"
#include "tdfile.h"
#include "tsync.h"
#include "tsyncround.h"
#include "xmalloc.h"
#include "banned.h"

#define RECORD_TICK_MS		100
#define RECORD_BURST_PAGES	256
#define RECORD_STATUS_AFTER_S	3.0
#define RECORD_BUFFER_PERCENT	10
#define RECORD_NET_ID		(UINT32_MAX - 2)
#define RECORD_NET_EV		(UINT32_MAX - 3)
/* The final drain sends as it reads once this much waits. */
#define RECORD_NET_FINAL	(8u * 1024 * 1024)
#define RECORD_NET_FINAL_LOW	(4u * 1024 * 1024)
#define RECORD_TSYNC_PROBES	64
#define RECORD_PRIV_ID		(UINT32_MAX - 4)
/* At most this long for the headers to go out before the first probes. */
#define RECORD_HEADERS_MS	10000

enum record_drain {
	DRAIN_WAKE,	/* the kernel says a CPU has pages */
	DRAIN_TICK,	/* the timer: quiet CPUs too */
	DRAIN_FINAL	/* the end: everything */
};

struct record_cpu {
	struct ring	*ring;
	uint64_t	 pages;
	uint64_t	 events;
	uint64_t	 missed_pages;	/* pages flagged "events lost before" */
	uint64_t	 missed_events;	/* counts the kernel stored */
};

struct recorder {
	const struct agent_opts	*o;
	struct instance		*in;
	struct td_file		*file;
	struct net		*net;
	struct net		*net_gone;	/* given up, closed at the end */
	struct meta_sink	 sink;		/* where everything goes */
	struct meta_tee		*sinks;		/* the file, the network */
	bool			 paused;	/* rings wait for the network */
	uint64_t		 trace_id;
	struct tsync		*tsync;		/* NULL: no time sync */
	char			 tsync_err[512];	/* why tsync_new() failed */
	uint32_t		 tsync_round;
	uint32_t		 tsync_failed;
	uint32_t		 tsync_samples;	/* rounds that made one */
	double			 next_tsync;
	uint32_t		 page_size;
	int			 commit_size;
	int			 ncpus;
	struct record_cpu	*cpu;
	uint8_t			*page;
	int			 epfd;
	int			 sigfd;
	int			 timerfd;
	pid_t			 child;		/* the command, while it runs */
	int			 child_status;
	int			 go_fd;
	int			 priv_fd;	/* to the privileged parent */
	bool			 tsc_have;	/* x86-tsc factors, no tsync */
	uint32_t		 tsc_mult;
	uint32_t		 tsc_shift;
	bool			 stop;
	int			 stop_sig;
	bool			 failed;
	bool			 status_shown;
	bool			 reconnecting;
	bool			 final;		/* the last drain */
	bool			 in_round;	/* between time-sync probes */
	bool			 final_slow;	/* it stopped sending */
	uint64_t		 left_unread;	/* final drain stopped: full */
	double			 next_status;	/* elapsed time of the next line */
	struct timespec		 start;
	char			 err[2048];
};

static double
record_elapsed(const struct recorder *r)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - r->start.tv_sec) +
	    (now.tv_nsec - r->start.tv_nsec) / 1e9;
}

static int record_net_lost(struct recorder *);
static int record_net_end(struct recorder *, bool);
static int record_net_full(struct recorder *);

/*
 * Hand one page to the sinks (the writer, the network or both) and count
 * what it holds; info->data_len is 0 if the page could not be parsed.
 */
static int
record_page(struct recorder *r, struct record_cpu *c, const void *page,
    size_t n, struct td_page_info *info_out)
{
	struct td_page_info info;

	if (td_page_parse(page, r->page_size, r->commit_size, &info) == 0) {
		c->events += info.events;
		if (info.missed) {
			c->missed_pages++;
			if (info.missed_stored)
				c->missed_events += info.missed_count;
		}
	} else
		info.data_len = 0;
	*info_out = info;
	c->pages++;
	if (r->sink.page(r->sink.arg, ring_cpu(c->ring), page, n) == -1) {
		snprintf(r->err, sizeof r->err, "%s: %s",
		    meta_tee_what(r->sinks), strerror(errno));
		r->failed = true;
		return -1;
	}
	/*
	 * The final drain reads whole rings without going back to the loop:
	 * keep the queue bounded by sending as it fills.
	 */
	if (r->final && !r->final_slow && r->net != NULL && net_up(r->net) &&
	    net_pending(r->net) > RECORD_NET_FINAL) {
		if (net_batch_end(r->net) == -1 || net_flush_to(r->net,
		    RECORD_NET_FINAL_LOW, 100, r->err, sizeof r->err) == -1)
			return record_net_lost(r);
		/* a link this slow gets the rest from the spool later */
		if (net_pending(r->net) > RECORD_NET_FINAL)
			r->final_slow = true;
	}
	return 0;
}

/*
 * Read pages of one CPU: first the pages the kernel has finished, in
 * batches where the reader batches, then the page being written, one at a
 * time.  At the end (DRAIN_FINAL), read until the ring is empty.  At a
 * wake-up (DRAIN_WAKE) a batching reader leaves the page being written
 * alone; otherwise stop at the first page that is not nearly full: that is
 * the page the kernel is writing, and reading on would chase the writer one
 * event at a time.  The timer (DRAIN_TICK) takes that page too, so quiet
 * CPUs reach the file.  A burst limit keeps one busy CPU from starving the
 * others.
 */
static int
record_drain(struct recorder *r, struct record_cpu *c, enum record_drain how)
{
	struct td_page_info info;
	size_t cap = r->page_size - 8 - r->commit_size, off;
	bool final = how == DRAIN_FINAL;
	const void *pages;
	ssize_t n;
	int i = 0;

	while (final || i < RECORD_BURST_PAGES) {
		if (r->net != NULL && net_congested(r->net) &&
		    (r->in_round || record_net_full(r) == 1)) {
			/* nowhere left to keep pages: the rest stays (in
			   the loop, until the network takes some; at the
			   end, tracing is off and the rest waits for it) */
			if (final && !r->in_round && net_make_room(r->net,
			    r->o->reconnect_wait, r->err, sizeof r->err) == 0)
				continue;
			if (final)
				r->left_unread++;
			return 0;
		}
		if ((n = ring_read_whole(c->ring, &pages)) > 0) {
			for (off = 0; off < (size_t)n; off += r->page_size)
				if (record_page(r, c, (const uint8_t *)pages +
				    off, r->page_size, &info) == -1)
					return -1;
			i += n / r->page_size;
			continue;
		}
		if (n == 0 && how == DRAIN_WAKE && ring_batched(c->ring))
			return 0;
		if (n == 0)
			n = ring_read(c->ring, r->page);
		if (n == 0)
			return 0;
		if (n < 0) {
			snprintf(r->err, sizeof r->err, "cannot read CPU %d "
			    "ring buffer: %s", ring_cpu(c->ring),
			    strerror(errno));
			r->failed = true;
			return -1;
		}
		if (record_page(r, c, r->page, n, &info) == -1)
			return -1;
		if (!final && info.data_len < cap * 3 / 4)
			return 0;
		i++;
	}
	return 0;
}

/* Let the rings be read again, or not. */
static void
record_pause(struct recorder *r, bool pause)
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
static int
record_net_lost(struct recorder *r)
{
	return record_net_end(r, false);
}

/*
 * The stream's memory and spool are full.  Without a local file the rings
 * wait (1: stop reading).  With one, the local file must not lose what the
 * network cannot take: the network goes (0: read on).
 */
static int
record_net_full(struct recorder *r)
{
	if (r->file == NULL)
		return 1;
	snprintf(r->err, sizeof r->err, "the listener cannot keep up and "
	    "the spool is full");
	record_net_end(r, true);
	return 0;
}

static int
record_net_end(struct recorder *r, bool for_good)
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
	record_pause(r, false);
	return 0;
}

/* The reconnection thread is done. */
static void
record_net_back(struct recorder *r)
{
	struct epoll_event ev;

	if (r->net == NULL)
		return;
	if (net_reconnected(r->net, r->err, sizeof r->err) == -1) {
		if (r->err[0] == '\0')
			return;		/* not yet */
		record_net_lost(r);
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
		record_net_lost(r);
	}
}

/*
 * Send what the network takes, and pause or resume the ring readers around
 * the stream's memory watermarks: when memory and spool are full the
 * kernel ring absorbs the difference (its overruns are counted and marked)
 * instead of the agent's memory.
 */
static int
record_net_pump(struct recorder *r)
{
	struct epoll_event ev;

	if (r->net == NULL)
		return 0;
	if (net_up(r->net) && net_flush(r->net, r->err, sizeof r->err) == -1)
		return record_net_lost(r);
	if (r->net == NULL)
		return 0;
	if (!r->paused && net_congested(r->net) && record_net_full(r) == 0)
		return 0;
	record_pause(r, r->paused ? !net_relieved(r->net) :
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
 * Between the probes of a time-sync round: the finished pages of every CPU
 * go into the queue, so the rings do not fill while the round waits for
 * replies (64 and more round trips).  Nothing here sends or may close the
 * connection: with the queue congested, the pages wait for the loop.
 */
static void
record_tsync_idle(void *arg)
{
	struct recorder *r = arg;
	int i;

	if (r->final || r->paused || r->failed)
		return;
	r->in_round = true;
	for (i = 0; i < r->ncpus; i++)
		if (r->cpu[i].ring != NULL &&
		    record_drain(r, &r->cpu[i], DRAIN_WAKE) == -1)
			break;
	r->in_round = false;
}

/*
 * One time-sync round; a failed round is counted, not fatal.  The rounds
 * before and after the events are anchors (more probes, see tsync_pick()).
 */
static void
record_tsync(struct recorder *r, bool anchor)
{
	struct td_tsync_sample s;
	char err[512];
	int ret;

	if (r->tsync == NULL || r->net == NULL || !net_up(r->net))
		return;
	ret = tsyncround_run(r->net, r->tsync, r->tsync_round++,
	    RECORD_TSYNC_PROBES, anchor, record_tsync_idle, r, &s, err,
	    sizeof err);
	if (ret == 1) {
		log_debug("time sync: %s", err);
		return;
	}
	if (ret == -1) {
		if (!net_up(r->net) || net_fatal(r->net)) {
			snprintf(r->err, sizeof r->err, "%s", err);
			record_net_lost(r);
			return;
		}
		if (r->tsync_failed++ == 0)
			log_warnx("time sync: %s", err);
		else
			log_debug("time sync: %s", err);
		return;
	}
	r->tsync_samples++;
	log_debug("time sync round %u: offset %" PRId64 " at %" PRIu64
	    ", +-%" PRIu64 " ns (%u probes)", s.round, s.offset, s.ts,
	    s.bound, s.probes);
}

/*
 * Progress for long recordings: on a terminal a line that rewrites itself,
 * otherwise (a log) a full line every ten seconds.
 */
static void
record_status(struct recorder *r, bool final)
{
	uint64_t pages = 0, events = 0, marked = 0;
	double t = record_elapsed(r);
	bool tty = isatty(STDERR_FILENO);
	int i;

	if (r->o->verbosity < 0)
		return;
	if (!final && t < RECORD_STATUS_AFTER_S)
		return;
	if (final && (!r->status_shown || !tty))
		return;
	if (!tty && !final) {
		if (t < r->next_status)
			return;
		r->next_status = t + 10;
	}
	for (i = 0; i < r->ncpus; i++) {
		pages += r->cpu[i].pages;
		events += r->cpu[i].events;
		marked += r->cpu[i].missed_pages;
	}
	fprintf(stderr, "%stdagent: %.1f s, %" PRIu64 " events, %.1f MB, "
	    "%" PRIu64 " pages with lost events", tty ? "\r" : "", t, events,
	    pages * (double)r->page_size / 1e6, marked);
	if (r->net != NULL)
		fprintf(stderr, ", %.1f MB sent, %.1f MB/s%s", net_sent(r->net) /
		    1e6, t > 0 ? net_sent(r->net) / 1e6 / t : 0.0,
		    r->reconnecting ? ", reconnecting" : "");
	fprintf(stderr, "%s", final || !tty ? "\n" : "   ");
	r->status_shown = true;
}

/* Handle one signal from the signalfd. */
static void
record_signal(struct recorder *r)
{
	struct signalfd_siginfo si;
	int status;

	while (read(r->sigfd, &si, sizeof si) == sizeof si) {
		if (si.ssi_signo == SIGCHLD) {
			if (r->child > 0 &&
			    waitpid(r->child, &status, WNOHANG) == r->child) {
				r->child_status = status;
				r->child = 0;
				r->stop = true;
			}
			continue;
		}
		log_debug("signal %d: stopping", (int)si.ssi_signo);
		r->stop = true;
		r->stop_sig = si.ssi_signo;
	}
}

/* The privileged parent spoke: the command exited (or the parent left). */
static void
record_priv(struct recorder *r)
{
	struct priv_msg m;
	int ret;

	while ((ret = priv_recv(r->priv_fd, &m, false)) == 1) {
		if (m.type == PRIV_EXIT && r->child > 0) {
			r->child_status = m.value;
			r->child = 0;
			r->stop = true;
		}
	}
	if (ret == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
		log_warnx("the privileged parent is gone: stopping");
		epoll_ctl(r->epfd, EPOLL_CTL_DEL, r->priv_fd, NULL);
		r->stop = true;
	}
}

/*
 * Fork the command now (-u root: no separate parent), to exec once
 * tracing is on.
 */
static int
record_spawn(struct recorder *r)
{
	r->child = priv_spawn(r->o->argv, &r->go_fd);
	if (r->child == -1) {
		r->child = 0;
		return -1;
	}
	if (r->o->follow && instance_follow_pid(r->in, r->child) == -1) {
		snprintf(r->err, sizeof r->err, "cannot follow the command "
		    "(set_event_pid): %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Whether an unnamed spool file can be made in dir. */
static int
record_spool_usable(const char *dir)
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

/* The stream to the listener, not connected yet (record_start()). */
static int
record_net_new(struct recorder *r)
{
	struct meta_sink ns;
	struct net_params np;
	struct td_hello h;
	uint16_t one = 1;

	memset(&h, 0, sizeof h);
	h.version_min = h.version_max = TD_PROTO_VERSION;
	h.ncpus = r->ncpus;
	h.page_size = r->page_size;
	h.long_size = sizeof(long);
	h.commit_size = r->commit_size;
	h.big_endian = *(uint8_t *)&one == 1 ? 0 : 1;
	h.recording_id = r->trace_id ^ 0x5a5a5a5a5a5a5a5aULL;
	h.trace_id = r->trace_id;
	snprintf(h.name, sizeof h.name, "%s", r->o->name ? r->o->name : "");
	snprintf(h.clock, sizeof h.clock, "%s", instance_clock(r->in));
	memset(&np, 0, sizeof np);
	np.host = r->o->host;
	np.port = r->o->port;
	np.cert = r->o->cert;
	np.key = r->o->key;
	np.ca = r->o->ca;
	np.server_name = r->o->server_name;
	np.insecure = r->o->insecure;
	np.timeout = 10;
	np.spool_dir = r->o->spool_dir;
	np.spool_max = r->o->spool_max;
	if (np.spool_max > 0 && record_spool_usable(np.spool_dir) == -1) {
		if (r->o->spool_given) {
			snprintf(r->err, sizeof r->err, "cannot spool in '%s': "
			    "%s", np.spool_dir, strerror(errno));
			return -1;
		}
		log_warnx("cannot spool in '%s' (%s): what the listener has "
		    "not taken stays in 16 MiB of memory", np.spool_dir,
		    strerror(errno));
		np.spool_max = 0;
	}
	np.wire = r->o->wire;
	r->net = net_new(&np, &h, r->err, sizeof r->err);
	if (r->net == NULL)
		return -1;
	net_meta_sink(r->net, &ns);
	meta_tee_add(r->sinks, &ns, "cannot queue pages");
	return 0;
}

/*
 * Everything that needs root, before the recorder drops it (privsep): the
 * instance's settings, the output file, the stream with its TLS context
 * and spool, the headers (into the file and the stream's queue), the
 * sync instance, the per-CPU readers and the files the end reads.
 */
static int
record_setup(struct recorder *r)
{
	struct td_file_params fp;
	struct meta_sink fs;
	char what[4200];
	int i;

	r->ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	if (r->ncpus < 1 || r->ncpus > TD_MAX_CPUS) {
		snprintf(r->err, sizeof r->err, "cannot count CPUs");
		return -1;
	}
	if (meta_geometry(&r->page_size, &r->commit_size, r->err,
	    sizeof r->err) == -1)
		return -1;
	/*
	 * Wake up when a CPU's buffer is 10% full rather than the kernel's
	 * 50%: the syscall storm of bench/ loses events at 50% and 25% and
	 * none at 10%, while 1% doubles the bytes through partial pages.
	 */
	if (instance_set_buffer_percent(r->in, RECORD_BUFFER_PERCENT) == -1)
		log_debug("cannot set buffer_percent: %s", strerror(errno));
	/* tdagent's own reads would feed the trace they read: leave them
	   out (with privsep, the parent leaves out both processes) */
	if (!r->o->privsep) {
		pid_t self = getpid();

		if (instance_exclude_pids(r->in, &self, 1) == -1)
			log_debug("cannot exclude tdagent's own events: %s",
			    strerror(errno));
	}
	r->page = xmalloc(r->page_size);
	r->cpu = xcalloc(r->ncpus, sizeof *r->cpu);
	r->sinks = meta_tee_new();
	meta_sink_tee(&r->sink, r->sinks);

	if (getrandom(&r->trace_id, sizeof r->trace_id, 0) !=
	    sizeof r->trace_id)
		r->trace_id = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (r->o->output != NULL) {
		memset(&fp, 0, sizeof fp);
		fp.version = r->o->file_version;
		fp.codec = r->o->codec;
		fp.page_size = r->page_size;
		fp.long_size = sizeof(long);
		fp.ncpus = r->ncpus;
		fp.clock = instance_clock(r->in);
		/* the parent creates the files and renames the result */
		fp.unnamed_spools = r->o->privsep;
		fp.keep_part = r->o->privsep;
		r->file = td_file_create(r->o->output, &fp);
		if (r->file == NULL) {
			snprintf(r->err, sizeof r->err, "cannot create '%s': "
			    "%s", r->o->output, strerror(errno));
			return -1;
		}
		meta_sink_file(&fs, r->file);
		snprintf(what, sizeof what, "cannot write '%s'", r->o->output);
		meta_tee_add(r->sinks, &fs, what);
	}
	if (r->o->host != NULL && record_net_new(r) == -1)
		return -1;
	/* into the stream's queue (and its spool): sent once connected */
	if (meta_write_headers(r->in, &r->sink, r->err, sizeof r->err) == -1)
		return -1;
	/* made now, used if the listener asks for time sync */
	if (r->net != NULL)
		r->tsync = tsync_new(r->in, r->tsync_err, sizeof r->tsync_err);
	if (strcmp(instance_clock(r->in), "x86-tsc") == 0)
		r->tsc_have = tsync_tsc_factors(&r->tsc_mult,
		    &r->tsc_shift) == 0;
	for (i = 0; i < r->ncpus; i++) {
		r->cpu[i].ring = ring_open(r->in, i, r->page_size, true);
		if (r->cpu[i].ring == NULL) {
			if (errno == ENOENT)
				continue;	/* CPU not present */
			snprintf(r->err, sizeof r->err, "cannot open CPU %d "
			    "ring buffer: %s", i, strerror(errno));
			return -1;
		}
	}
	if (instance_keep(r->in, "tracing_on", false, O_WRONLY) == -1 ||
	    meta_keep_end_files(r->in, r->ncpus) == -1 ||
	    instance_clear(r->in) == -1) {
		snprintf(r->err, sizeof r->err, "cannot set up the instance: "
		    "%s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The unprivileged part of the set-up: connect, the first time-sync round,
 * the recording loop's epoll set.
 */
static int
record_start(struct recorder *r)
{
	struct epoll_event ev;
	struct itimerspec its;
	sigset_t set;
	int i;

	if (r->net != NULL) {
		if (net_start(r->net, r->err, sizeof r->err) == -1)
			return -1;
		log_info("connected to %s as '%s'", net_where(r->net),
		    net_identity(r->net));
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
		    RECORD_HEADERS_MS, r->err, sizeof r->err) == -1 &&
		    record_net_lost(r) == -1)
			return -1;
		if (r->tsync != NULL && r->net != NULL && net_up(r->net))
			record_tsync(r, true);
	}

	if ((r->epfd = epoll_create1(EPOLL_CLOEXEC)) == -1)
		goto sys;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	r->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	r->timerfd = timerfd_create(CLOCK_MONOTONIC,
	    TFD_NONBLOCK | TFD_CLOEXEC);
	if (r->sigfd == -1 || r->timerfd == -1)
		goto sys;
	memset(&its, 0, sizeof its);
	its.it_interval.tv_nsec = RECORD_TICK_MS * 1000000L;
	its.it_value = its.it_interval;
	if (timerfd_settime(r->timerfd, 0, &its, NULL) == -1)
		goto sys;
	memset(&ev, 0, sizeof ev);
	ev.events = EPOLLIN;
	ev.data.u32 = UINT32_MAX;
	if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->sigfd, &ev) == -1)
		goto sys;
	ev.data.u32 = UINT32_MAX - 1;
	if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->timerfd, &ev) == -1)
		goto sys;
	if (r->priv_fd != -1) {
		ev.data.u32 = RECORD_PRIV_ID;
		if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->priv_fd, &ev) == -1)
			goto sys;
	}
	if (r->net != NULL) {
		ev.data.u32 = RECORD_NET_ID;
		if (net_up(r->net) && epoll_ctl(r->epfd, EPOLL_CTL_ADD,
		    net_fd(r->net), &ev) == -1)
			goto sys;
		ev.data.u32 = RECORD_NET_EV;
		if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, net_event_fd(r->net),
		    &ev) == -1)
			goto sys;
	}
	for (i = 0; i < r->ncpus; i++) {
		if (r->cpu[i].ring == NULL)
			continue;
		ev.data.u32 = i;
		if (epoll_ctl(r->epfd, EPOLL_CTL_ADD,
		    ring_fd(r->cpu[i].ring), &ev) == -1)
			goto sys;
	}
	if (!r->o->privsep && r->o->argv != NULL && record_spawn(r) == -1) {
		if (r->err[0] != '\0')
			return -1;
		goto sys;
	}
	return 0;
sys:
	snprintf(r->err, sizeof r->err, "cannot set up recording: %s",
	    strerror(errno));
	return -1;
}

static void
record_loop(struct recorder *r)
{
	struct epoll_event evs[64];
	uint64_t ticks;
	int i, n;

	while (!r->stop && !r->failed) {
		n = epoll_wait(r->epfd, evs, 64, -1);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			snprintf(r->err, sizeof r->err, "epoll_wait: %s",
			    strerror(errno));
			r->failed = true;
			return;
		}
		for (i = 0; i < n && !r->failed; i++) {
			uint32_t id = evs[i].data.u32;

			if (id == UINT32_MAX)
				record_signal(r);
			else if (id == RECORD_PRIV_ID)
				record_priv(r);
			else if (id == RECORD_NET_ID) {
				if (r->net != NULL && net_up(r->net) &&
				    (evs[i].events &
				    (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
				    net_readable(r->net, r->err,
				    sizeof r->err) == -1)
					record_net_lost(r);
			} else if (id == RECORD_NET_EV)
				record_net_back(r);
			else if (id == UINT32_MAX - 1) {
				while (read(r->timerfd, &ticks,
				    sizeof ticks) > 0)
					;
				for (int c = 0; c < r->ncpus && !r->paused; c++)
					if (r->cpu[c].ring != NULL &&
					    record_drain(r, &r->cpu[c],
					    DRAIN_TICK) == -1)
						break;
				if (r->o->seconds > 0 &&
				    record_elapsed(r) >= r->o->seconds)
					r->stop = true;
				if (r->net != NULL && net_keepalive(r->net,
				    r->err, sizeof r->err) == -1)
					record_net_lost(r);
				if (r->tsync != NULL && r->net != NULL &&
				    net_up(r->net) &&
				    net_tsync_interval(r->net) > 0 &&
				    record_elapsed(r) >= r->next_tsync) {
					record_tsync(r, false);
					r->next_tsync = record_elapsed(r) +
					    net_tsync_interval(r->net) / 1e3;
				}
				record_status(r, false);
			} else if (!r->paused)
				record_drain(r, &r->cpu[id], DRAIN_WAKE);
			if (!r->failed)
				r->sink.batch_end(r->sink.arg);
		}
		if (!r->failed)
			record_net_pump(r);
	}
}

/* Stop tracing, take the rest of the data and finish the file. */
static int
record_finish(struct recorder *r, struct meta_cpustat *st)
{
	int i;

	instance_set_tracing(r->in, 0);
	r->final = true;
	for (i = 0; i < r->ncpus; i++)
		if (r->cpu[i].ring != NULL &&
		    record_drain(r, &r->cpu[i], DRAIN_FINAL) == -1)
			return -1;
	if (strcmp(instance_clock(r->in), "x86-tsc") == 0) {
		struct { uint32_t mult, shift; uint64_t offset; } t2n = { 0 };

		/*
		 * trace-cmd turns x86-tsc cycles into ns with these; the
		 * time-sync samples were made with the same ones
		 */
		bool have = r->tsync != NULL ? tsync_tsc2nsec(r->tsync,
		    &t2n.mult, &t2n.shift) : r->tsc_have;

		if (r->tsync == NULL) {
			t2n.mult = r->tsc_mult;
			t2n.shift = r->tsc_shift;
		}

		if (have && r->sink.option(r->sink.arg, TD_OPT_TSC2NSEC, &t2n,
		    sizeof t2n) == -1) {
			snprintf(r->err, sizeof r->err, "cannot write options");
			return -1;
		}
	}
	record_tsync(r, true);
	if (meta_write_cmdlines(r->in, &r->sink, r->err, sizeof r->err) == -1 ||
	    meta_write_options(r->in, &r->sink, r->trace_id, r->err,
	    sizeof r->err) == -1 ||
	    meta_write_cpustats(r->in, r->ncpus, &r->sink, st, r->err,
	    sizeof r->err) == -1)
		return -1;
	if (r->file != NULL && td_file_finish(r->file) == -1) {
		snprintf(r->err, sizeof r->err, "cannot write '%s': %s",
		    r->o->output, strerror(errno));
		return -1;
	}
	/* the parent moves PATH.part into place */
	if (r->file != NULL && r->priv_fd != -1 &&
	    priv_send(r->priv_fd, PRIV_FILE, 0) == -1) {
		snprintf(r->err, sizeof r->err, "cannot finish '%s': the "
		    "privileged parent is gone", r->o->output);
		return -1;
	}
	if (r->net != NULL) {
		uint64_t *pages = xcalloc(r->ncpus, sizeof *pages);
		char path[512];

		for (i = 0; i < r->ncpus; i++)
			pages[i] = r->cpu[i].pages;
		if (!net_up(r->net) && r->o->reconnect_wait > 0)
			log_info("waiting up to %d s for the listener to take "
			    "the rest of the recording", r->o->reconnect_wait);
		i = net_finish(r->net, pages, r->ncpus, r->o->reconnect_wait,
		    path, sizeof path, r->err, sizeof r->err);
		free(pages);
		if (i == -1 && r->file != NULL) {
			log_warnx("%s; the recording is complete in '%s' only",
			    r->err, r->o->output);
			r->err[0] = '\0';
			return 0;
		}
		if (i == -1)
			return -1;
		log_info("the listener wrote '%s' (%.1f MB sent%s)", path,
		    net_sent(r->net) / 1e6, net_reconnects(r->net) ?
		    ", resumed after lost connections" : "");
		/* the pages' own ratio: the headers (megabytes of
		   kallsyms), time sync and resends are in "sent" */
		if (r->o->wire && net_raw(r->net) > 0)
			log_info("wire compression: %.1f MB of pages in %.1f "
			    "MB of frames (%.3f)", net_raw(r->net) / 1e6,
			    net_framed(r->net) / 1e6,
			    (double)net_framed(r->net) /
			    (double)net_raw(r->net));
		if (net_reconnects(r->net) > 0)
			log_info("%u reconnections", net_reconnects(r->net));
	}
	return 0;
}

/* The one-line summary: events and bytes per CPU, and what was lost. */
static void
record_summary(struct recorder *r, const struct meta_cpustat *st)
{
	char line[4096], where[600];
	size_t len = 0;
	uint64_t overrun = 0, dropped = 0, events = 0, marked = 0;
	int i;

	for (i = 0; i < r->ncpus; i++) {
		struct record_cpu *c = &r->cpu[i];

		overrun += st[i].overrun;
		dropped += st[i].dropped;
		events += c->events;
		marked += c->missed_pages;
		if (c->pages == 0 || len >= sizeof line)
			continue;
		len += snprintf(line + len, sizeof line - len,
		    "%scpu%d %" PRIu64 " events %.1f MB", len ? ", " : "", i,
		    c->events, c->pages * (double)r->page_size / 1e6);
	}
	if (len == 0)
		snprintf(line, sizeof line, "no events");
	record_status(r, true);
	if (r->file != NULL)
		snprintf(where, sizeof where, " in '%s' (%.1f MB)",
		    r->o->output, td_file_size(r->file) / 1e6);
	else
		snprintf(where, sizeof where, " sent to '%s'", r->o->host);
	log_info("%.2f s: %s; lost %" PRIu64 " (overrun %" PRIu64
	    ", dropped %" PRIu64 ", %" PRIu64 " pages marked); %" PRIu64
	    " events%s", record_elapsed(r), line, overrun + dropped, overrun,
	    dropped, marked, events, where);
	{
		struct rusage ru;

		if (getrusage(RUSAGE_SELF, &ru) == 0)
			log_debug("cpu %.3f s (user %.3f, system %.3f), "
			    "max rss %ld KiB", ru.ru_utime.tv_sec +
			    ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
			    ru.ru_stime.tv_usec / 1e6, ru.ru_utime.tv_sec +
			    ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec +
			    ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss);
	}
	if (r->tsync_failed > 1)
		log_warnx("time sync: %u of %u rounds failed", r->tsync_failed,
		    r->tsync_round);
	if (r->tsync != NULL)
		log_debug("time sync: %u rounds, %u samples sent, %u failed",
		    r->tsync_round, r->tsync_samples, r->tsync_failed);
	if (r->left_unread != 0)
		log_warnx("the listener was unreachable and the spool full at "
		    "the end: what was still in the ring buffer is missing");
	if (overrun + dropped != 0)
		log_warnx("the ring buffer lost %" PRIu64 " events: a larger "
		    "buffer (-b) or fewer events (-e, -f) avoid it; the "
		    "losses are marked in the file", overrun + dropped);
}

static void
record_free(struct recorder *r)
{
	int i;

	for (i = 0; r->cpu != NULL && i < r->ncpus; i++)
		ring_close(r->cpu[i].ring);
	if (r->file != NULL)
		td_file_free(r->file);
	net_close(r->net);
	net_close(r->net_gone);
	meta_tee_free(r->sinks);
	tsync_free(r->tsync);
	if (r->epfd > 0)
		close(r->epfd);
	if (r->sigfd > 0)
		close(r->sigfd);
	if (r->timerfd > 0)
		close(r->timerfd);
	if (r->go_fd > 0)
		close(r->go_fd);
	if (r->priv_fd > 0)
		close(r->priv_fd);
	free(r->cpu);
	free(r->page);
}

/*
 * In the privileged parent once the recorder runs: the stream (its queue
 * holds the header sections, megabytes with kallsyms) and the TLS context
 * are the recorder's now; the parent's copies go.  (The time-sync state
 * stays: freeing it removes its instance, which the parent does at the end.)
 */
static void
record_release(void *arg)
{
	struct recorder *r = arg;

	if (r->net != NULL)
		meta_tee_drop(r->sinks, r->net);
	net_close(r->net);
	r->net = NULL;
	free(r->page);
	r->page = NULL;
	malloc_trim(0);
}

static int
record_exit_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/* Run one recording; returns tdagent's exit status. */
int
record_run(struct instance *in, const struct agent_opts *o)
{
	struct recorder r;
	struct meta_cpustat *st = NULL;
	int ret = 1, status;

	memset(&r, 0, sizeof r);
	r.o = o;
	r.in = in;
	r.epfd = r.sigfd = r.timerfd = r.go_fd = r.priv_fd = -1;
	if (record_setup(&r) == -1)
		goto fail;
	if (o->privsep) {
		struct priv_params pp;

		memset(&pp, 0, sizeof pp);
		pp.in = in;
		pp.argv = o->argv;
		pp.follow = o->follow;
		pp.output = o->output;
		pp.uid = o->uid;
		pp.gid = o->gid;
		pp.release = record_release;
		pp.arg = &r;
		ret = priv_fork(&pp, &r.priv_fd, &r.child, &status, r.err,
		    sizeof r.err);
		if (ret == -1)
			goto fail;
		if (ret == 1) {
			/* the parent: the recorder made or removed the file */
			td_file_release(r.file);
			r.file = NULL;
			record_free(&r);
			return status;
		}
	}
	if (record_start(&r) == -1)
		goto fail;
	if (instance_set_tracing(in, 1) == -1) {
		snprintf(r.err, sizeof r.err, "cannot start tracing: %s",
		    strerror(errno));
		goto fail;
	}
	clock_gettime(CLOCK_MONOTONIC, &r.start);
	if (r.go_fd != -1) {
		if (priv_go(r.go_fd) == -1) {
			snprintf(r.err, sizeof r.err, "cannot start '%s': %s",
			    o->argv[0], strerror(errno));
			goto fail;
		}
		close(r.go_fd);
		r.go_fd = -1;
	}
	if (r.priv_fd != -1 && priv_send(r.priv_fd, PRIV_GO, 0) == -1) {
		snprintf(r.err, sizeof r.err, "the privileged parent is gone");
		goto fail;
	}
	log_debug("recording %d CPUs", r.ncpus);
	record_loop(&r);
	if (r.failed)
		goto fail;
	st = xcalloc(r.ncpus, sizeof *st);
	if (record_finish(&r, st) == -1)
		goto fail;
	record_summary(&r, st);
	ret = 0;
	if (r.child > 0) {
		/* stopped by a signal or -s: the command goes too (with
		   privsep, the parent stops it when the recorder is done) */
		if (r.priv_fd == -1)
			priv_reap(r.child, &status);
		r.child = 0;
		ret = r.stop_sig ? 128 + r.stop_sig : 0;
	} else if (o->argv != NULL)
		ret = record_exit_status(r.child_status);
	else if (r.stop_sig != 0 && r.stop_sig != SIGINT &&
	    r.stop_sig != SIGTERM)
		ret = 128 + r.stop_sig;
	goto out;
fail:
	log_warnx("%s", r.err);
	instance_set_tracing(in, 0);
	if (r.file != NULL)
		td_file_abort(r.file);
	if (r.child > 0 && r.priv_fd == -1)
		priv_reap(r.child, &status);
	ret = 1;
out:
	free(st);
	record_free(&r);
	return ret;
}
