/*
 * onfinish.h: tdlisten --on-finish CMD, a command run for every file
 * tdlisten finishes (a recording's .dat, a broken one kept as
 * .incomplete.dat, a uftrace run's directory), off the event loop.
 *
 * Each run is a child process (posix_spawn of /bin/sh -c 'CMD "$1"' with
 * the path as $1: the shell reads CMD, never the path), in a process
 * group of its own, reaped through a SIGCHLD event on the loop; the loop
 * never waits for one.  At most `jobs` run at once; the others wait in a
 * queue of at most TD_ONFINISH_QUEUE, TD_ONFINISH_QUEUE_ID of one identity
 * (tdlimits.h); past that a file waits in its sidecar until its
 * identity's queue drains, and its directory is read again.  A run that exits
 * non-zero, dies of a signal or outlives `timeout` seconds (its group is
 * killed) fails, and is run again after `retry` seconds, doubling up to
 * TD_ONFINISH_RETRY_MAX, `attempts` times in all; then it is given up.
 *
 * Every file queued has a sidecar NAME.onfinish beside it (its kind,
 * producer, identity and name), removed when a run succeeds: at the next
 * start onfinish_recover() queues what a stopped (or crashed) tdlisten
 * left, and what was given up, again.  A run is at least once, not
 * exactly once: a command killed by a stop, or that succeeded just before
 * a crash, runs again.
 *
 * The module logs its own life (started, failed, given up, pending at the
 * stop); onfinish_new() returns NULL and a message.  Loop thread only.
 */
#ifndef TD_ONFINISH_H
#define TD_ONFINISH_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct onfinish;
struct output_done;

/* How the command runs (tdlisten's --on-finish-* options). */
struct onfinish_config {
	const char	*cmd;		/* CMD, run as sh -c 'CMD "$1"' */
	int		 jobs;		/* at once */
	int		 timeout;	/* s a run may take */
	int		 retry;		/* s before the second attempt */
	int		 attempts;	/* in all, then given up */
	uint32_t	 file_mode;	/* the sidecars' */
};

/* What /metrics and /status show of it. */
struct onfinish_stats {
	uint64_t	 started;	/* runs started (attempts) */
	uint64_t	 succeeded;
	uint64_t	 failed;	/* failed attempts, timeouts included */
	uint64_t	 timeouts;	/* of those, killed at the timeout */
	uint64_t	 given_up;	/* files whose attempts all failed */
	uint64_t	 dropped;	/* not queued: the queue was full */
	int		 queued;	/* files waiting or running now */
	int		 running;
};

/*
 * The runner on base, with c (copied).  NULL with err when it cannot be
 * (no SIGCHLD event).
 */
struct onfinish	*onfinish_new(struct event_base *base,
		    const struct onfinish_config *c, char *err,
		    size_t errlen);
/*
 * A file is done (recording_set_done(), uftrace_set_done() call this
 * with arg an onfinish): its sidecar written, queued (or counted as
 * dropped when its identity's share or the queue is full: it waits in
 * the sidecar, queued again later or at the next start).
 */
void		 onfinish_done_cb(const struct output_done *d, void *arg);
/*
 * The sidecars an earlier tdlisten left in DIR/<any>/ queued again; one
 * whose file is gone is removed.
 */
void		 onfinish_recover(struct onfinish *of, const char *dir);
void		 onfinish_stats(const struct onfinish *of,
		    struct onfinish_stats *s);
/*
 * tdlisten is stopping: no command starts from now on (files done are
 * still queued, with their sidecars).
 */
void		 onfinish_stop(struct onfinish *of);
/*
 * tdlisten stops: says how many files were pending, sends SIGTERM to the
 * runs in progress (their sidecars stay: the next start runs them again),
 * frees.  NULL is fine.
 */
void		 onfinish_free(struct onfinish *of);

#endif
