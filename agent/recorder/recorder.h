/*
 * recorder.h: what the files of one recording share (record.h is the
 * public side).  Each part's state is its own file's, opaque to the
 * others:
 *
 *	record.c	set-up, the loop and its epoll set, the command and
 *			the privileged parent, the guests, the finish
 *			(struct record_loop)
 *	drain.c		pages from the rings into the sink, ring pausing, what
 *			went through each CPU (struct drain)
 *	tsyncsched.c	when time-sync rounds run, and what they count; the
 *			x86-tsc factors (struct tsyncsched)
 *	summary.c	the progress line and the end-of-recording summary
 *			(struct summary)
 *
 * and the network's part, up, is a struct uplink (uplink.h: connect,
 * congestion, lost and resumed connections, -o going on alone, DONE) that
 * the recorder drives like any producer.  What stays here is the
 * recording itself (the options, the instance, its geometry, the sinks)
 * and how it fails.
 *
 * One recorder, one thread (the loop's): nothing here is locked.  Pages
 * and metadata go through one meta_sink (sink, a tee of the file writer
 * and the network stream); only uplink.c calls net_*() for the stream's
 * transport (sending, congestion, reconnecting).  Functions that fail
 * return -1 with a message in r->err (or set r->failed) and log only what
 * the user must know as it happens.
 */
#ifndef TD_RECORDER_H
#define TD_RECORDER_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "meta.h"

struct agent_opts;
struct drain;
struct instance;
struct record_loop;
struct summary;
struct td_file;
struct tsyncsched;
struct uplink;

/* One recording of the agent, from set-up to summary. */
struct recorder {
	const struct agent_opts	*o;
	struct instance		*in;
	uint32_t		 page_size;	/* the geometry, set up once */
	int			 commit_size;
	int			 ncpus;
	struct td_file		*file;		/* -o, or NULL */
	struct meta_sink	 sink;		/* where everything goes */
	struct meta_tee		*sinks;		/* the file, the network */
	struct uplink		*up;		/* -h, or NULL */
	struct drain		*drain;		/* drain.c's */
	struct tsyncsched	*ts;		/* tsyncsched.c's */
	struct summary		*sum;		/* summary.c's */
	struct record_loop	*loop;		/* record.c's */
	bool			 disk_full;	/* -o's file system is */
	bool			 failed;
	struct timespec		 start;		/* tracing on */
	char			 err[2048];
};

/* Seconds since tracing started. */
static inline double
record_elapsed(const struct recorder *r)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - r->start.tv_sec) +
	    (now.tv_nsec - r->start.tv_nsec) / 1e9;
}

/* How much of a ring a drain takes (drain_all()). */
enum record_drain {
	DRAIN_WAKE,	/* the kernel says a CPU has pages */
	DRAIN_TICK,	/* the timer: quiet CPUs too */
	DRAIN_ROUND,	/* between time-sync probes: as a wake-up, and the
			   network is never given up */
	DRAIN_FINAL	/* the end: everything */
};

/* What went through one CPU's reader. */
struct drain_count {
	uint64_t	 pages;
	uint64_t	 events;
	uint64_t	 missed_pages;	/* pages flagged "events lost before" */
	uint64_t	 missed_events;	/* counts the kernel stored */
};

/*
 * drain.c: the rings of r's CPUs (set-up: drain_new(), then drain_open()
 * as root); into the loop's epoll set, each by its CPU number.  Every CPU,
 * or the one the kernel woke, read into the sink as how says; -1 when the
 * recording cannot go on (r->failed, r->err).  drain_pause(): stop reading
 * (the stream is full), or read on.  drain_count(): what went through CPU
 * cpu; drain_left_unread(): the final drain found no room.
 * drain_release(): the privileged parent's copy once the recorder runs.
 */
struct drain	*drain_new(const struct recorder *r);
int	drain_open(struct recorder *r);
int	drain_watch(struct recorder *r, int epfd);
int	drain_all(struct recorder *r, enum record_drain how);
void	drain_wake(struct recorder *r, uint32_t cpu);
void	drain_pause(struct recorder *r, bool pause);
void	drain_count(const struct recorder *r, int cpu, struct drain_count *n);
bool	drain_left_unread(const struct recorder *r);
void	drain_release(struct recorder *r);
void	drain_free(struct drain *d);

/*
 * tsyncsched.c: the time-sync state (set-up, as root: the sync instance
 * with -h, the kernel's x86-tsc factors).  tsyncsched_connected(): the
 * first connection is up: time sync as the listener wants it (the headers
 * out before the first probes), -1 when the recording cannot go on.  One
 * round now (anchor: the first or the last); a round if one is due (the
 * loop's timer); off for good (the network given up).  The x86-tsc
 * factors for TSC2NSEC (false: none); the summary's lines.
 */
struct tsyncsched *tsyncsched_new(struct recorder *r);
int	tsyncsched_connected(struct recorder *r);
void	tsyncsched_round(struct recorder *r, bool anchor);
void	tsyncsched_tick(struct recorder *r);
void	tsyncsched_off(struct recorder *r);
bool	tsyncsched_tsc2nsec(const struct recorder *r, uint32_t *mult,
	    uint32_t *shift);
void	tsyncsched_log(const struct recorder *r);
void	tsyncsched_free(struct tsyncsched *ts);

/*
 * summary.c: the progress line (final: its last update); the summary of
 * the recording, from the per-CPU stats st of the end.
 */
struct summary	*summary_new(void);
void	summary_status(struct recorder *r, bool final);
void	summary_log(struct recorder *r, const struct meta_cpustat *st);
void	summary_free(struct summary *sum);

#endif
