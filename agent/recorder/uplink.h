/*
 * uplink.h: a recording's network, for every producer of recordings in
 * tdagent (the recorder of this machine's kernel, record.c; the Plan 9
 * import, plan9.c): the stream to the listener made during set-up, its
 * first connection, sending and back-pressure, a connection lost and
 * resumed, the local file (-o) going on alone when the network is given
 * up for good, and END/DONE.  The session itself (tdproto, the stream's
 * bytes, reconnecting) is net.c's; the uplink decides what the recording
 * does about it and logs what the user must know as it happens (the
 * connection made, lost, back, given up; the listener's file).
 *
 * The producer keeps its own loop: the uplink's descriptors go into its
 * epoll set (uplink_watch()) or its poll(2) array (uplink_pollfd()), it
 * hands the uplink what they report and pumps it after each round.  What
 * only the producer knows the uplink asks through struct uplink_ops.
 *
 * Once the network is given up (and for a NULL uplink: no -h) every call
 * is a no-op that succeeds.  -1: the recording cannot go on, the reason
 * in the producer's err (uplink_params).  One uplink, one thread: the
 * one that owns the producer's loop.
 */
#ifndef TD_UPLINK_H
#define TD_UPLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct agent_opts;
struct meta_tee;
struct net;
struct pollfd;
struct uplink;

/* What the uplink asks of its producer; the NULL ones it does without. */
struct uplink_ops {
	/* Pages of CPU cpu handed to the sink so far (END). Required. */
	uint64_t	 (*pages)(void *arg, int cpu);
	/*
	 * Stop (true) or resume reading the input, at the stream's memory
	 * watermarks: a producer whose input can wait (the rings, which count
	 * what they lose).  Then, with a local file, a stream whose memory and
	 * spool are full gives the network up rather than lose pages in the
	 * file.  NULL: the input waits for the listener (net_make_room())
	 * instead, and the network goes only when the listener is lost.
	 */
	void		 (*pause)(void *arg, bool pause);
	/* The network is given up for good: drop what needs the listener. */
	void		 (*gone)(void *arg);
	/*
	 * The text of the command lines now (malloc'd, *len bytes), sent as
	 * CMDLINES every second they changed or after a connection resumed;
	 * NULL: none.
	 */
	char		*(*cmdlines)(void *arg, size_t *len);
};

/* A recording's side of the stream. */
struct uplink_params {
	const struct agent_opts	*o;	/* -h, TLS, spool, -o, waits */
	const char	*what;		/* the recording in messages:
					   "recording", "import" */
	/* the recording's part of the HELLO */
	uint32_t	 ncpus;
	uint32_t	 page_size;
	uint8_t		 commit_size;
	uint8_t		 long_size;
	uint64_t	 trace_id;
	const char	*clock;
	/* the network's sink joins this tee and leaves it when given up */
	struct meta_tee	*sinks;
	bool		 local;		/* the tee holds a local file (-o) */
	const struct uplink_ops	*ops;
	void		*arg;		/* the ops' */
	char		*err;		/* the producer's: why a call failed */
	size_t		 errlen;
};

/*
 * The stream to the listener of o, not connected yet, its sink in the
 * tee: the header sections can be queued before uplink_start().  NULL with
 * p->err (a spool that cannot be used, the TLS files).
 */
struct uplink	*uplink_new(const struct uplink_params *p);
/*
 * The first connection: the collectors of -h in order, tried again while
 * one says "later", up to --reconnect-wait.  Logs the one that took it.
 */
int		 uplink_start(struct uplink *u);
/*
 * Everything queued goes out (the headers, before the first time-sync
 * probes), waiting up to ms; a connection lost meanwhile is lost like any
 * later one.
 */
int		 uplink_flush(struct uplink *u, int ms);
/*
 * An epoll loop: the connection (conn_id) and the reconnection thread's
 * eventfd (event_id) go into epfd, kept there from now on.
 */
int		 uplink_watch(struct uplink *u, int epfd, uint32_t conn_id,
		    uint32_t event_id);
/*
 * A poll loop: the descriptor to poll now, the connection or the
 * reconnection eventfd (false: none); uplink_polled() takes its revents
 * (idle: the poll timed out), and does uplink_pump() and, when idle,
 * uplink_tick().
 */
bool		 uplink_pollfd(struct uplink *u, struct pollfd *pfd);
int		 uplink_polled(struct uplink *u, short revents, bool idle);
/* The connection has events ev (epoll's or poll's: ACK, DONE, close). */
int		 uplink_readable(struct uplink *u, uint32_t ev);
/* The reconnection thread is done: resumed, or lost again. */
int		 uplink_back(struct uplink *u);
/* About once a second or more: the command lines, a KEEPALIVE if quiet. */
int		 uplink_tick(struct uplink *u);
/*
 * After each round of the loop: send what the socket takes, and stop or
 * resume the input around the stream's watermarks (uplink_ops.pause).
 */
int		 uplink_pump(struct uplink *u);
/*
 * The connection broke (why): reconnect, the recording going on; or,
 * when the listener refused for good, go on into -o alone (0), or -1.
 */
int		 uplink_lost(struct uplink *u, const char *why);
/*
 * A producer with pause: whether its input may be read on.  Not when the
 * stream's memory and spool are full and no local file lets the network
 * go; final (tracing is off): after waiting for room as long as
 * --reconnect-wait allows.  in_round (between the probes of a time-sync
 * round): the network is never given up.
 */
bool		 uplink_room(struct uplink *u, bool final, bool in_round);
/*
 * A final read of the input, not going back to the loop, queued a page:
 * keep the queue bounded by sending as it fills.
 */
int		 uplink_final_send(struct uplink *u);
/* An option for the listener only, not for the -o file. */
int		 uplink_option(struct uplink *u, uint16_t id, const void *p,
		    size_t n);
/*
 * END with the page counts, everything sent (reconnecting for up to
 * --reconnect-wait), the listener's DONE.  With a local file a listener
 * lost is only a warning (0).
 */
int		 uplink_finish(struct uplink *u);
/* The stream until the network is given up, then NULL. */
struct net	*uplink_net(const struct uplink *u);
/* Whether the input is stopped for the network (uplink_ops.pause). */
bool		 uplink_paused(const struct uplink *u);
/* Whether a lost connection is being dialed again. */
bool		 uplink_reconnecting(const struct uplink *u);
/* Close the stream (and one given up) and leave the tee. */
void		 uplink_free(struct uplink *u);

#endif
