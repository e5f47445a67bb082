/*
 * recorder.h: the recorder's state, private to the files of one recording
 * (record.h is the public side):
 *
 *	record.c	set-up, the loop and its epoll set, the finish
 *	drain.c		pages from the rings into the sink, ring pausing
 *	uplink.c	the network's part: connect, congestion, lost and
 *			resumed connections, -o going on alone, DONE
 *	tsyncsched.c	when time-sync rounds run, and what they count
 *	summary.c	the progress line and the end-of-recording summary
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

/* epoll ids of the network's descriptors (the CPUs' are their numbers). */
#define RECORD_NET_ID		(UINT32_MAX - 2)
#define RECORD_NET_EV		(UINT32_MAX - 3)

struct agent_opts;
struct guest_watch;
struct instance;
struct metadefer;
struct net;
struct ring;
struct td_file;
struct tsync;

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
	struct net		*net;
	struct net		*net_gone;	/* given up, closed at the end */
	struct meta_sink	 sink;		/* where everything goes */
	struct meta_tee		*sinks;		/* the file, the network */
	struct metadefer	*defer;		/* headers for the recorder */
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
	bool			 reconnecting;
	bool			 final;		/* the last drain */
	bool			 in_round;	/* between time-sync probes */
	/* the command lines sent during the recording (uplink.c) */
	uint64_t		 cmd_hash;	/* of the last sent, 0: none */
	double			 next_cmd;	/* elapsed time of the next look */
	unsigned int		 cmd_reconnects;	/* when it was sent */
	bool			 final_slow;	/* it stopped sending */
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

/*
 * uplink.c, each a no-op without a network (-h); -1 with r->err when the
 * recording cannot go on.
 */
/* The stream to the listener, not connected yet (set-up, as root). */
int	uplink_new(struct recorder *r);
/* The first connection, and the headers out before the first probes. */
int	uplink_start(struct recorder *r);
/* Add the connection and the reconnection thread to the epoll set. */
int	uplink_watch(struct recorder *r);
/* Whether the drain may read on (at the end: after waiting for room). */
bool	uplink_room(struct recorder *r, bool final);
/* The final drain queued a page: send once much waits. */
int	uplink_final_send(struct recorder *r);
/* The connection broke (reason in r->err): reconnect, or give up. */
int	uplink_lost(struct recorder *r);
/* The connection has events ev (epoll's): ACKs, DONE, ERROR, close. */
void	uplink_readable(struct recorder *r, uint32_t ev);
/* The reconnection thread is done. */
void	uplink_back(struct recorder *r);
/* The timer: a KEEPALIVE on a quiet link. */
void	uplink_tick(struct recorder *r);
/* After events: send, and pause or resume the rings. */
int	uplink_pump(struct recorder *r);
/*
 * An option for the listener only, not for the -o file (a guest's vCPU
 * threads: the listener turns them into GUEST options).
 */
int	uplink_option(struct recorder *r, uint16_t id, const void *p,
	    size_t n);
/* END, everything sent, the listener's DONE. */
int	uplink_finish(struct recorder *r);
/* Close the stream, and one given up. */
void	uplink_free(struct recorder *r);

/*
 * tsyncsched.c: one time-sync round now (anchor: the first or the last);
 * a round if one is due (the loop's timer).
 */
void	tsyncsched_round(struct recorder *r, bool anchor);
void	tsyncsched_tick(struct recorder *r);

/*
 * summary.c: the progress line (final: its last update); the summary of
 * the recording, from the per-CPU stats st of the end.
 */
void	summary_status(struct recorder *r, bool final);
void	summary_log(struct recorder *r, const struct meta_cpustat *st);

#endif
