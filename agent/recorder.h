/*
 * recorder.h: the recorder's state, private to the files of one recording
 * (record.h is the public side):
 *
 *	record.c	set-up, the loop and its epoll set, the finish
 *	drain.c		pages from the rings into the sink, ring pausing
 *	tsyncsched.c	when time-sync rounds run, and what they count
 *	summary.c	the progress line and the end-of-recording summary
 *
 * and the network's part, r->up, is a struct uplink (uplink.h: connect,
 * congestion, lost and resumed connections, -o going on alone, DONE) that
 * the recorder drives like any producer.
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
#include <sys/types.h>
#include <time.h>

#include "meta.h"

struct agent_opts;
struct guest_watch;
struct instance;
struct metadefer;
struct ring;
struct td_file;
struct tsync;
struct uplink;

/* How much of a ring a drain takes (drain_cpu()). */
enum record_drain {
	DRAIN_WAKE,	/* the kernel says a CPU has pages */
	DRAIN_TICK,	/* the timer: quiet CPUs too */
	DRAIN_FINAL	/* the end: everything */
};

/* One CPU's reader and what went through it. */
struct record_cpu {
	struct ring	*ring;
	uint64_t	 pages;
	uint64_t	 events;
	uint64_t	 missed_pages;	/* pages flagged "events lost before" */
	uint64_t	 missed_events;	/* counts the kernel stored */
};

/* One recording of the agent, from set-up to summary. */
struct recorder {
	const struct agent_opts	*o;
	struct instance		*in;
	struct td_file		*file;
	struct uplink		*up;		/* -h, or NULL */
	struct meta_sink	 sink;		/* where everything goes */
	struct meta_tee		*sinks;		/* the file, the network */
	struct metadefer	*defer;		/* headers for the recorder */
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
	int			 reserve_fd;	/* -o: room for finishing a
						   file the disk filled */
	bool			 disk_full;	/* -o's file system is */
	struct guest_watch	*guests;	/* --guest, or NULL */
	double			 next_guests;	/* elapsed time of the next
						   look at them */
	bool			 tsc_have;	/* x86-tsc factors, no tsync */
	uint32_t		 tsc_mult;
	uint32_t		 tsc_shift;
	bool			 stop;
	int			 stop_sig;
	bool			 failed;
	bool			 status_shown;
	bool			 final;		/* the last drain */
	bool			 in_round;	/* between time-sync probes */
	uint64_t		 left_unread;	/* final drain stopped: full */
	double			 next_status;	/* elapsed time of the next line */
	struct timespec		 start;
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

/*
 * drain.c: read pages of one CPU into the sink, as much as how says;
 * -1 when the recording cannot go on (r->failed, r->err).
 */
int	drain_cpu(struct recorder *r, struct record_cpu *c,
	    enum record_drain how);

/* drain.c: stop reading the rings (the stream is full), or read on. */
void	drain_pause(struct recorder *r, bool pause);

/*
 * tsyncsched.c: the first connection is up: time sync as the listener
 * wants it (the headers out before the first probes), -1 when the
 * recording cannot go on; one time-sync round now (anchor: the first or
 * the last); a round if one is due (the loop's timer).
 */
int	tsyncsched_connected(struct recorder *r);
void	tsyncsched_round(struct recorder *r, bool anchor);
void	tsyncsched_tick(struct recorder *r);

/*
 * summary.c: the progress line (final: its last update); the summary of
 * the recording, from the per-CPU stats st of the end.
 */
void	summary_status(struct recorder *r, bool final);
void	summary_log(struct recorder *r, const struct meta_cpustat *st);

#endif
