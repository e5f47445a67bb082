/*
 * record.c: one recording of tdagent, from set-up to finish (see
 * record.h; the pieces share recorder.h).
 *
 * Set-up happens as root (the instance, the output file, the stream with
 * its TLS context and spool, the headers into the sink, the per-CPU
 * readers); then, unprivileged, the connection and one thread with one
 * epoll set: the per-CPU trace_pipe_raw readers (drain.c), a signalfd
 * (SIGINT, SIGTERM, SIGHUP, SIGCHLD), the privileged parent's socket, the
 * connection and its reconnection eventfd (uplink.c) and a 100 ms timer
 * (quiet CPUs, keepalives, time-sync rounds, progress).  At the end the
 * rings are drained whole, the last sections and options written, the
 * file finished and the network's DONE awaited.
 *
 * The loop's own state (struct record_loop, r->loop: its descriptors, the
 * command, the privileged parent, the guests, the room held for a full
 * disk) is this file's alone; the other parts have theirs (recorder.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "guest.h"
#include "instance.h"
#include "log.h"
#include "meta.h"
#include "metadefer.h"
#include "priv.h"
#include "record.h"
#include "recorder.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "uplink.h"
#include "xmalloc.h"
#include "banned.h"

/* The timer: quiet CPUs drained, keepalives, time sync, progress. */
#define RECORD_TICK_MS		100
/* The longest a --ready-fd recording waits for its GO (over tdlisten's
   120 s for a control request's answers: the collector decides). */
#define RECORD_HOLD_S		150
/* See record_setup(). */
#define RECORD_BUFFER_PERCENT	10
/* epoll ids of the uplink's descriptors (the CPUs' are their numbers). */
#define RECORD_NET_ID		(UINT32_MAX - 2)
#define RECORD_NET_EV		(UINT32_MAX - 3)
/* epoll id of the privileged parent's socket. */
#define RECORD_PRIV_ID		(UINT32_MAX - 4)
/* Seconds between two looks at the guests' vCPU threads (--guest). */
#define RECORD_GUESTS_S		1.0
/*
 * -o: room held beside the file (an unnamed file of this much, plus a
 * chunk and a stage per CPU) and given back when the disk fills up, to
 * write the command lines, options and strings and copy the spools (a
 * step at a time, TD_SPOOL_COPY_STEP) of what was recorded until then.
 */
#define RECORD_RESERVE		(512 * 1024)
#define RECORD_RESERVE_CPU(ps)	((TD_CHUNK_PAGES + 1) * (size_t)(ps) + \
				    16 * 1024)

/* The loop and the command: record.c's part of a recorder. */
struct record_loop {
	struct metadefer	*defer;		/* headers for the recorder */
	uint64_t		 trace_id;
	int			 epfd;
	int			 sigfd;
	int			 timerfd;
	pid_t			 child;		/* the command, while it runs */
	int			 child_status;
	int			 go_fd;
	int			 priv_fd;	/* to the privileged parent */
	int			 reserve_fd;	/* -o: room for finishing a
						   file the disk filled */
	struct guest_watch	*guests;	/* --guest, or NULL */
	double			 next_guests;	/* elapsed time of the next
						   look at them */
	bool			 stop;
	int			 stop_sig;
};

/* Handle one signal from the signalfd. */
static void
record_signal(struct recorder *r)
{
	struct signalfd_siginfo si;
	int status;

	while (read(r->loop->sigfd, &si, sizeof si) == sizeof si) {
		if (si.ssi_signo == SIGCHLD) {
			if (r->loop->child > 0 &&
			    waitpid(r->loop->child, &status, WNOHANG) ==
			    r->loop->child) {
				r->loop->child_status = status;
				r->loop->child = 0;
				r->loop->stop = true;
			}
			continue;
		}
		log_debug("signal %d: stopping", (int)si.ssi_signo);
		r->loop->stop = true;
		r->loop->stop_sig = si.ssi_signo;
	}
}

/* The privileged parent spoke: the command exited (or the parent left). */
static void
record_priv(struct recorder *r)
{
	struct priv_msg m;
	int ret;

	while ((ret = priv_recv(r->loop->priv_fd, &m, false)) == 1) {
		if (m.type == PRIV_EXIT && r->loop->child > 0) {
			r->loop->child_status = m.value;
			r->loop->child = 0;
			r->loop->stop = true;
		}
	}
	if (ret == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
		log_warnx("the privileged parent is gone: stopping");
		epoll_ctl(r->loop->epfd, EPOLL_CTL_DEL, r->loop->priv_fd, NULL);
		r->loop->stop = true;
	}
}

/*
 * Fork the command now (-u root: no separate parent), to exec once
 * tracing is on.
 */
static int
record_spawn(struct recorder *r)
{
	r->loop->child = priv_spawn(r->o->argv, &r->loop->go_fd);
	if (r->loop->child == -1) {
		r->loop->child = 0;
		return -1;
	}
	if (r->o->follow && instance_follow_pid(r->in, r->loop->child) == -1) {
		snprintf(r->err, sizeof r->err, "cannot follow the command "
		    "(set_event_pid): %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* A guest's vCPU threads (guest_watch_poll()) go to the listener. */
static int
record_guest_cb(void *arg, const void *p, size_t n)
{
	struct recorder *r = arg;

	return uplink_option(r->up, TD_OPT_TD_GUEST, p, n);
}

/*
 * The guests of --guest: watched from now on (as root: their /proc
 * directories, monitors and KVM debugfs files), and what they are now
 * queued for the listener behind the headers.  The x86-tsc factors are
 * the ones TSC2NSEC will carry: the listener relates the guests' TSCs to
 * this file's timeline with them.
 */
static int
record_guests_open(struct recorder *r)
{
	uint32_t mult = 0, shift = 0;

	if (r->o->nguests == 0)
		return 0;
	if (strcmp(instance_clock(r->in), "x86-tsc") == 0) {
		if (!tsyncsched_tsc2nsec(r, &mult, &shift))
			mult = shift = 0;
	}
	r->loop->guests = guest_watch_open(r->o->guests, r->o->nguests, mult,
	    shift, r->err, sizeof r->err);
	if (r->loop->guests == NULL)
		return -1;
	return guest_watch_poll(r->loop->guests, true, record_guest_cb, r,
	    r->err, sizeof r->err);
}

/* Once a second: what changed in the guests goes to the listener. */
static void
record_guests_tick(struct recorder *r)
{
	if (r->loop->guests == NULL || record_elapsed(r) < r->loop->next_guests)
		return;
	r->loop->next_guests = record_elapsed(r) + RECORD_GUESTS_S;
	if (guest_watch_poll(r->loop->guests, false, record_guest_cb, r, r->err,
	    sizeof r->err) == -1)
		r->failed = true;
}


/*
 * An unnamed file of n bytes in the directory of path, whose blocks
 * record_keep_partial() gives back: its descriptor, or -1 (no room or no
 * way to hold it: the file is then dropped as before when the disk fills).
 */
static int
record_reserve(const char *path, size_t n)
{
	const char *slash = strrchr(path, '/');
	char *dir, *tmpl;
	int fd;

	if (slash == NULL)
		dir = xstrdup(".");
	else if (slash == path)
		dir = xstrdup("/");
	else
		xasprintf(&dir, "%.*s", (int)(slash - path), path);
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd == -1 && (errno == EOPNOTSUPP || errno == EISDIR ||
	    errno == EINVAL)) {
		xasprintf(&tmpl, "%s.reserve.XXXXXX", path);
		if ((fd = mkostemp(tmpl, O_CLOEXEC)) != -1)
			unlink(tmpl);
		free(tmpl);
	}
	free(dir);
	if (fd != -1 && fallocate(fd, 0, 0, (off_t)n) == -1) {
		log_debug("cannot hold %zu bytes beside '%s': %s", n, path,
		    strerror(errno));
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Give the reserve's room back (to the file system). */
static void
record_unreserve(struct recorder *r)
{
	if (r->loop->reserve_fd != -1)
		close(r->loop->reserve_fd);
	r->loop->reserve_fd = -1;
}

/*
 * The disk filled up under -o: give the reserve back and finish what the
 * file holds, when every header section is there, as NAME.incomplete.dat
 * (as tdlisten keeps a broken recording), and say so.  0, or -1 (nothing
 * kept: the caller drops the file).
 */
static int
record_keep_partial(struct recorder *r)
{
	static const enum td_opt need[] = { TD_OPT_HEADER_INFO,
	    TD_OPT_FTRACE_EVENTS, TD_OPT_EVENT_FORMATS, TD_OPT_KALLSYMS,
	    TD_OPT_PRINTK };
	struct meta_sink fs;
	uint64_t events = 0, zero = 0;
	struct drain_count n;
	char err[512], *inc;
	size_t i;
	int k;

	record_unreserve(r);
	td_file_section_cancel(r->file);	/* fails if none is open */
	for (i = 0; i < sizeof need / sizeof *need; i++)
		if (!td_file_has_section(r->file, need[i])) {
			log_warnx("the disk filled up before the header "
			    "sections were written: nothing to keep");
			return -1;
		}
	meta_sink_file(&fs, r->file);
	if (!td_file_has_section(r->file, TD_OPT_CMDLINES) &&
	    meta_write_cmdlines(r->in, &fs, err, sizeof err) == -1) {
		td_file_section_cancel(r->file);
		if (td_file_section_add(r->file, TD_OPT_CMDLINES, &zero,
		    sizeof zero) == -1)
			goto out_fail;
	}
	if (meta_write_options(r->in, &fs, r->loop->trace_id, err,
	    sizeof err) == -1 || td_file_finish(r->file) == -1)
		goto out_fail;
	inc = priv_incomplete_path(r->o->output);
	if (r->o->privsep) {
		/* the parent moves PATH.part there */
		if (priv_send(r->loop->priv_fd, PRIV_FILE, 1) == -1) {
			log_warnx("cannot keep '%s': the privileged parent is "
			    "gone", inc);
			free(inc);
			return -1;
		}
	} else if (rename(r->o->output, inc) == -1) {
		log_warn("cannot rename '%s' to '%s'", r->o->output, inc);
		free(inc);
		return 0;
	}
	for (k = 0; k < r->ncpus; k++) {
		drain_count(r, k, &n);
		events += n.events;
	}
	log_warnx("kept the %llu events recorded until the disk filled up "
	    "as '%s'", (unsigned long long)events, inc);
	free(inc);
	return 0;
out_fail:
	log_warnx("cannot keep what was recorded in '%s': %s", r->o->output,
	    strerror(errno));
	return -1;
}
/* Pages read from one CPU's ring so far, for the END (uplink_ops). */
static uint64_t
record_pages_cb(void *arg, int cpu)
{
	struct recorder *r = arg;

	struct drain_count n;

	drain_count(r, cpu, &n);
	return n.pages;
}

/* The stream is full, or has room again (uplink_ops). */
static void
record_pause_cb(void *arg, bool pause)
{
	drain_pause(arg, pause);
}

/* The network is given up for good: time sync needs the listener. */
static void
record_gone_cb(void *arg)
{
	tsyncsched_off(arg);
}

/* The command lines for CMDLINES during the recording (uplink_ops). */
static char *
record_cmdlines_cb(void *arg, size_t *len)
{
	struct recorder *r = arg;

	return instance_read_top(r->in, "saved_cmdlines", len);
}

/* The stream to the listener, not connected yet (set-up, as root). */
static int
record_uplink(struct recorder *r)
{
	static const struct uplink_ops ops = {
		.pages = record_pages_cb,
		.pause = record_pause_cb,
		.gone = record_gone_cb,
		.cmdlines = record_cmdlines_cb
	};
	struct uplink_params up;

	memset(&up, 0, sizeof up);
	up.o = r->o;
	up.what = "recording";
	up.ncpus = r->ncpus;
	up.page_size = r->page_size;
	up.commit_size = r->commit_size;
	up.long_size = sizeof(long);
	up.trace_id = r->loop->trace_id;
	up.clock = instance_clock(r->in);
	up.sinks = r->sinks;
	up.local = r->file != NULL;
	up.ops = &ops;
	up.arg = r;
	up.err = r->err;
	up.errlen = sizeof r->err;
	r->up = uplink_new(&up);
	return r->up != NULL ? 0 : -1;
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
	struct meta_sink fs, ds;
	const struct meta_sink *hs;
	char what[4200];

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
	r->drain = drain_new(r);
	r->sinks = meta_tee_new();
	meta_sink_tee(&r->sink, r->sinks);

	if (getrandom(&r->loop->trace_id, sizeof r->loop->trace_id, 0) !=
	    sizeof r->loop->trace_id)
		r->loop->trace_id = (uint64_t)time(NULL) ^
		    ((uint64_t)getpid() << 32);
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
		r->loop->reserve_fd = record_reserve(r->o->output,
		    RECORD_RESERVE + (size_t)r->ncpus *
		    RECORD_RESERVE_CPU(r->page_size));
		meta_sink_file(&fs, r->file);
		snprintf(what, sizeof what, "cannot write '%s'", r->o->output);
		meta_tee_add(r->sinks, &fs, what);
	}
	if (r->o->host != NULL && record_uplink(r) == -1)
		return -1;
	/*
	 * Read as root now; with privsep recorded into a memfd that the
	 * recorder frames (metadefer.h), so that neither process holds them
	 * framed before the fork; else into the stream's queue (and its
	 * spool), sent once connected.  The guests' options follow the
	 * headers in the stream: with --guest, no deferral.
	 */
	hs = &r->sink;
	if (r->o->privsep && r->o->nguests == 0 &&
	    (r->loop->defer = metadefer_new()) != NULL) {
		metadefer_sink(&ds, r->loop->defer);
		hs = &ds;
	}
	if (meta_write_headers(r->in, hs, r->err, sizeof r->err) == -1)
		return -1;
	/* made now, used if the listener asks for time sync */
	r->ts = tsyncsched_new(r);
	if (record_guests_open(r) == -1)
		return -1;
	if (drain_open(r) == -1)
		return -1;
	/* --flight: the frozen ring is the recording, never cleared */
	if (instance_keep(r->in, "tracing_on", false, O_WRONLY) == -1 ||
	    meta_keep_end_files(r->in, r->ncpus) == -1 ||
	    (r->o->flight == NULL && instance_clear(r->in) == -1)) {
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
	int ret;

	if (r->loop->defer != NULL) {
		/* the header sections, first in the file and the stream */
		ret = metadefer_replay(r->loop->defer, &r->sink, r->err,
		    sizeof r->err);
		metadefer_free(r->loop->defer);
		r->loop->defer = NULL;
		if (ret == -1)
			return -1;
	}
	if (uplink_start(r->up) == -1 || tsyncsched_connected(r) == -1)
		return -1;
	/* the anchor round before the events, on an empty queue */
	tsyncsched_round(r, true);

	if ((r->loop->epfd = epoll_create1(EPOLL_CLOEXEC)) == -1)
		goto sys;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	r->loop->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	r->loop->timerfd = timerfd_create(CLOCK_MONOTONIC,
	    TFD_NONBLOCK | TFD_CLOEXEC);
	if (r->loop->sigfd == -1 || r->loop->timerfd == -1)
		goto sys;
	memset(&its, 0, sizeof its);
	its.it_interval.tv_nsec = RECORD_TICK_MS * 1000000L;
	its.it_value = its.it_interval;
	if (timerfd_settime(r->loop->timerfd, 0, &its, NULL) == -1)
		goto sys;
	memset(&ev, 0, sizeof ev);
	ev.events = EPOLLIN;
	ev.data.u32 = UINT32_MAX;
	if (epoll_ctl(r->loop->epfd, EPOLL_CTL_ADD, r->loop->sigfd, &ev) == -1)
		goto sys;
	ev.data.u32 = UINT32_MAX - 1;
	if (epoll_ctl(r->loop->epfd, EPOLL_CTL_ADD, r->loop->timerfd,
	    &ev) == -1)
		goto sys;
	if (r->loop->priv_fd != -1) {
		ev.data.u32 = RECORD_PRIV_ID;
		if (epoll_ctl(r->loop->epfd, EPOLL_CTL_ADD, r->loop->priv_fd,
		    &ev) == -1)
			goto sys;
	}
	if (uplink_watch(r->up, r->loop->epfd, RECORD_NET_ID,
	    RECORD_NET_EV) == -1 || drain_watch(r, r->loop->epfd) == -1)
		goto sys;
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
record_main_loop(struct recorder *r)
{
	struct epoll_event evs[64];
	uint64_t ticks;
	int i, n;

	while (!r->loop->stop && !r->failed) {
		n = epoll_wait(r->loop->epfd, evs, 64, -1);
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
				if (uplink_readable(r->up, evs[i].events) == -1)
					r->failed = true;
			} else if (id == RECORD_NET_EV) {
				if (uplink_back(r->up) == -1)
					r->failed = true;
			}
			else if (id == UINT32_MAX - 1) {
				while (read(r->loop->timerfd, &ticks,
				    sizeof ticks) > 0)
					;
				drain_all(r, DRAIN_TICK);
				if (r->o->seconds > 0 &&
				    record_elapsed(r) >= r->o->seconds)
					r->loop->stop = true;
				if (uplink_tick(r->up) == -1)
					r->failed = true;
				tsyncsched_tick(r);
				record_guests_tick(r);
				summary_status(r, false);
			} else
				drain_wake(r, id);
			if (!r->failed)
				r->sink.batch_end(r->sink.arg);
		}
		if (!r->failed && uplink_pump(r->up) == -1)
			r->failed = true;
	}
}

/* Stop tracing, take the rest of the data and finish the file. */
static int
record_finish(struct recorder *r, struct meta_cpustat *st)
{
	instance_set_tracing(r->in, 0);
	if (drain_all(r, DRAIN_FINAL) == -1)
		return -1;
	if (strcmp(instance_clock(r->in), "x86-tsc") == 0) {
		struct { uint32_t mult, shift; uint64_t offset; } t2n = { 0 };

		/*
		 * trace-cmd turns x86-tsc cycles into ns with these; the
		 * time-sync samples were made with the same ones
		 */
		bool have = tsyncsched_tsc2nsec(r, &t2n.mult, &t2n.shift);

		if (have && r->sink.option(r->sink.arg, TD_OPT_TSC2NSEC, &t2n,
		    sizeof t2n) == -1) {
			snprintf(r->err, sizeof r->err, "cannot write options");
			return -1;
		}
	}
	tsyncsched_round(r, true);
	if (meta_write_cmdlines(r->in, &r->sink, r->err, sizeof r->err) == -1 ||
	    meta_write_options(r->in, &r->sink, r->loop->trace_id, r->err,
	    sizeof r->err) == -1 ||
	    meta_write_cpustats(r->in, r->ncpus, &r->sink, st, r->err,
	    sizeof r->err) == -1) {
		/* the command lines may be what filled the disk */
		if ((errno == ENOSPC || errno == EDQUOT) && r->file != NULL &&
		    meta_tee_failed_arg(r->sinks) == r->file)
			r->disk_full = true;
		return -1;
	}
	/* the room for a finish on a full disk: this one may need it */
	record_unreserve(r);
	if (r->file != NULL && td_file_finish(r->file) == -1) {
		snprintf(r->err, sizeof r->err, "cannot write '%s': %s",
		    r->o->output, strerror(errno));
		return -1;
	}
	/* the parent moves PATH.part into place */
	if (r->file != NULL && r->loop->priv_fd != -1 &&
	    priv_send(r->loop->priv_fd, PRIV_FILE, 0) == -1) {
		snprintf(r->err, sizeof r->err, "cannot finish '%s': the "
		    "privileged parent is gone", r->o->output);
		return -1;
	}
	return uplink_finish(r->up);
}

static void
record_free(struct recorder *r)
{
	drain_free(r->drain);
	r->drain = NULL;
	if (r->file != NULL)
		td_file_free(r->file);
	uplink_free(r->up);
	r->up = NULL;
	guest_watch_free(r->loop->guests);
	metadefer_free(r->loop->defer);
	meta_tee_free(r->sinks);
	tsyncsched_free(r->ts);
	r->ts = NULL;
	summary_free(r->sum);
	r->sum = NULL;
	if (r->loop->epfd > 0)
		close(r->loop->epfd);
	if (r->loop->sigfd > 0)
		close(r->loop->sigfd);
	if (r->loop->timerfd > 0)
		close(r->loop->timerfd);
	if (r->loop->go_fd > 0)
		close(r->loop->go_fd);
	if (r->loop->priv_fd > 0)
		close(r->loop->priv_fd);
	record_unreserve(r);
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

	uplink_free(r->up);
	r->up = NULL;
	record_unreserve(r);	/* the recorder's copy holds the room */
	guest_watch_free(r->loop->guests);
	r->loop->guests = NULL;
	metadefer_free(r->loop->defer);
	r->loop->defer = NULL;
	drain_release(r);
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

/*
 * --ready-fd (a standby agent's recording): set up and connected, say so
 * and wait for G (the collector's GO, through the standby agent), a
 * stopping signal (the loop then ends at once), the other end gone, or
 * RECORD_HOLD_S; meanwhile the header sections go on being sent and the
 * link kept alive.
 */
static void
record_hold(struct recorder *r)
{
	struct timespec t0, now;
	struct pollfd pfd[2];
	char c = 0;
	ssize_t n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (send(r->o->ready_fd, "R", 1, MSG_NOSIGNAL) != 1) {
		log_warnx("the standby agent is gone: tracing");
		goto out;
	}
	for (;;) {
		if (uplink_pump(r->up) == -1 || uplink_tick(r->up) == -1)
			r->failed = true;
		pfd[0].fd = r->o->ready_fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = r->loop->sigfd;
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, RECORD_TICK_MS) > 0) {
			if (pfd[1].revents != 0)
				break;		/* stopped: the loop sees it */
			if (pfd[0].revents != 0) {
				while ((n = read(r->o->ready_fd, &c, 1)) == -1 &&
				    errno == EINTR)
					;
				if (n != 1 || c != 'G')
					log_warnx("the standby agent is gone: "
					    "tracing");
				break;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= RECORD_HOLD_S) {
			log_warnx("no GO from the collector in %d s: tracing",
			    RECORD_HOLD_S);
			break;
		}
	}
out:
	close(r->o->ready_fd);
}

/* Run one recording; returns tdagent's exit status. */
int
record_run(struct instance *in, const struct agent_opts *o)
{
	struct recorder r;
	struct record_loop loop;
	struct meta_cpustat *st = NULL;
	int ret = 1, status;

	memset(&r, 0, sizeof r);
	memset(&loop, 0, sizeof loop);
	r.o = o;
	r.in = in;
	r.loop = &loop;
	r.sum = summary_new();
	loop.epfd = loop.sigfd = loop.timerfd = loop.go_fd = loop.priv_fd = -1;
	loop.reserve_fd = -1;
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
		ret = priv_fork(&pp, &loop.priv_fd, &loop.child, &status,
		    r.err, sizeof r.err);
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
	if (o->ready_fd != -1)
		record_hold(&r);
	if (o->flight == NULL && instance_set_tracing(in, 1) == -1) {
		snprintf(r.err, sizeof r.err, "cannot start tracing: %s",
		    strerror(errno));
		goto fail;
	}
	clock_gettime(CLOCK_MONOTONIC, &r.start);
	if (loop.go_fd != -1) {
		if (priv_go(loop.go_fd) == -1) {
			snprintf(r.err, sizeof r.err, "cannot start '%s': %s",
			    o->argv[0], strerror(errno));
			goto fail;
		}
		close(loop.go_fd);
		loop.go_fd = -1;
	}
	if (loop.priv_fd != -1 && priv_send(loop.priv_fd, PRIV_GO, 0) == -1) {
		snprintf(r.err, sizeof r.err, "the privileged parent is gone");
		goto fail;
	}
	log_debug("recording %d CPUs", r.ncpus);
	/* --flight: nothing more comes; the finish reads the rings out */
	if (o->flight == NULL)
		record_main_loop(&r);
	if (r.failed)
		goto fail;
	st = xcalloc(r.ncpus, sizeof *st);
	if (record_finish(&r, st) == -1)
		goto fail;
	summary_log(&r, st);
	ret = 0;
	if (loop.child > 0) {
		/* stopped by a signal or -s: the command goes too (with
		   privsep, the parent stops it when the recorder is done) */
		if (loop.priv_fd == -1)
			priv_reap(loop.child, &status);
		loop.child = 0;
		ret = loop.stop_sig ? 128 + loop.stop_sig : 0;
	} else if (o->argv != NULL)
		ret = record_exit_status(loop.child_status);
	else if (loop.stop_sig != 0 && loop.stop_sig != SIGINT &&
	    loop.stop_sig != SIGTERM)
		ret = 128 + loop.stop_sig;
	goto out;
fail:
	log_warnx("%s", r.err);
	instance_set_tracing(in, 0);
	if (r.file != NULL && !(r.disk_full && record_keep_partial(&r) == 0))
		td_file_abort(r.file);
	if (loop.child > 0 && loop.priv_fd == -1)
		priv_reap(loop.child, &status);
	ret = 1;
out:
	free(st);
	record_free(&r);
	return ret;
}
