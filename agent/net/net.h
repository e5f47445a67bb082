/*
 * net.h: tdagent's connection to tdlisten, and the recording's byte stream
 * that outlives any one connection.
 *
 * Every frame of the recording (sections, options, pages, time-sync
 * samples, END) is appended to the stream.  The stream keeps every byte
 * the listener has not acknowledged (ACK): in memory up to a cap, then in
 * a spool file (--spool DIR, at most --spool-max bytes), then the caller
 * is told to stop reading the rings (net_congested()), so the kernel counts
 * what is lost.  When the connection breaks, net_down() starts a thread
 * (reconnect.c) that dials again with exponential backoff and jitter and
 * resumes the recording (HELLO with TD_HELLO_RESUME); the listener's
 * WELCOME says from which offset to send again.  net_event_fd() becomes
 * readable when that thread is done, and net_reconnected() takes its
 * result.
 *
 * net_start() (the first connection) and net_finish() block with
 * timeouts; in between the socket is non-blocking and the recording loop
 * flushes it when writable.  Errors return -1 with a message in err;
 * net_fatal() tells whether coming back is pointless (the listener refused
 * the agent or lost acknowledged data).  Nothing here logs.
 */
#ifndef TD_NET_H
#define TD_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdproto.h"

struct net;
struct meta_sink;

/* Where the listener is, how to authenticate, where to spool. */
struct net_params {
	const char	*host;		/* a list of HOST, vsock:CID or
					   serial:PATH (collectors.h) */
	const char	*port;
	const char	*cert;
	const char	*key;
	const char	*ca;
	const char	*server_name;	/* NULL: the TCP host */
	bool		 insecure;
	int		 timeout;	/* seconds, connect/handshake/DONE */
	const char	*spool_dir;	/* NULL: no spool file */
	uint64_t	 spool_max;	/* bytes, 0: no spool file */
	int		 wire;		/* TD_WIRE_*, 0: pages as they are */
};

/*
 * The stream, TLS context (cert, key and CA read now, never again) and
 * spool file (opened now, unnamed), not connected yet: metadata can be
 * queued before net_start() makes the first connection.
 */
struct net	*net_new(const struct net_params *np,
		    const struct td_hello *hello, char *err, size_t errlen);
/*
 * The first connection, to collector i of -h's list (0 first): -1 with
 * err when it did not take the recording.  The one that takes it keeps
 * it: every reconnection goes back to it alone (its file and checkpoint
 * are there).
 */
int		 net_start(struct net *n, int i, char *err, size_t errlen);
/* How many collectors the list holds; where the i-th is, for messages. */
int		 net_collectors(const struct net *n);
const char	*net_collector(const struct net *n, int i);
/*
 * Whether the collector net_start() tried refused this agent for good (a
 * certificate refused, a fatal ERROR): not worth asking it again.
 */
bool		 net_refused(const struct net *n);
/* What the header cache saved at the first connection ("" if nothing). */
const char	*net_note(const struct net *n);
/*
 * Whether net_start() failed in a way worth trying again after
 * net_pause(), one backoff (100 ms doubling to 5 s, with jitter): the
 * listener said to come back later (it is out of descriptors, disk or
 * memory now), or a serial device's preamble got no answer in time (the
 * host's listener, or QEMU's connection to it, is not there yet).
 */
bool		 net_later(const struct net *n);
void		 net_pause(struct net *n);
/* The listener's wish: ms between time-sync rounds, TD_TSYNC_OFF. */
uint32_t	 net_tsync_interval(const struct net *n);
/*
 * The time-sync round's exchanges (tsyncround.c).  net_tsync_begin(): the
 * queue goes out, waiting up to ms, and the connection blocks for at most
 * ms per call; -1 with err when it is down, lost or still busy.
 * net_tsync_probe(): one probe and its reply between markers 's' and 'r'
 * of t (*ref_ns: the listener's time; earlier replies skipped, counted in
 * *bad); -1 with err (the connection may then be down).
 * net_tsync_sample(): queue the round's sample into the stream (-1, err).
 * net_tsync_end(): the connection, if up, stops blocking.
 */
struct tsync;
int		 net_tsync_begin(struct net *n, int ms, char *err,
		    size_t errlen);
int		 net_tsync_probe(struct net *n, struct tsync *t,
		    uint32_t round, uint32_t seq, uint64_t *ref_ns,
		    uint32_t *bad, char *err, size_t errlen);
int		 net_tsync_sample(struct net *n,
		    const struct td_tsync_sample *sample, char *err,
		    size_t errlen);
void		 net_tsync_end(struct net *n);
/*
 * The listener's probe port for this connection (tsyncudp.h), made at the
 * first call; NULL (err set when it could not be made) when the rounds
 * probe in-band.  net_tsync_udp_off(): in-band from now on.
 */
struct tsyncudp;
struct tsyncudp	*net_tsync_udp(struct net *n, char *err, size_t errlen);
void		 net_tsync_udp_off(struct net *n);
/*
 * The network part of time sync (listener - agent CLOCK_MONOTONIC): keep
 * one measured at at within bound, if better than the one held;
 * net_tsync_estimated(): the best, its bound aged to at (-1: none).
 */
void		 net_tsync_estimate(struct net *n, int64_t theta,
		    uint64_t bound, uint64_t at);
int		 net_tsync_estimated(const struct net *n, uint64_t at,
		    int64_t *theta, uint64_t *bound);
/* The identity the listener gave this agent. */
const char	*net_identity(const struct net *n);
/*
 * Where the listener is (the collector tried, or the one that took the
 * recording), for messages: "'HOST' port P" and the like.
 */
const char	*net_where(struct net *n);
/*
 * The connection's TLS, for messages (conn_tls_describe()); "" without
 * TLS or a connection.
 */
void		 net_tls(const struct net *n, char *buf, size_t len);
/*
 * A meta_sink that frames everything recorded into the stream: sections,
 * options, pages (batched per CPU), chunks compressed elsewhere.
 */
void		 net_meta_sink(struct net *n, struct meta_sink *s);
/* Close the current PAGES batch (end of a burst). */
int		 net_batch_end(struct net *n);

/* Whether a connection is up (else a reconnection is under way). */
bool		 net_up(const struct net *n);
/* Whether the listener refused for good (no point in coming back). */
bool		 net_fatal(const struct net *n);
/* The socket to poll while up, else -1. */
int		 net_fd(const struct net *n);
bool		 net_want_write(const struct net *n);
/* Readable when a reconnection attempt is over. */
int		 net_event_fd(const struct net *n);
/* Bytes not yet sent. */
size_t		 net_pending(const struct net *n);
/* Bytes not yet acknowledged (memory and spool). */
uint64_t	 net_unacked(const struct net *n);
/* Memory is full (and the spool too, if any): stop adding pages. */
bool		 net_congested(const struct net *n);
/* Memory is back under its low watermark. */
bool		 net_relieved(const struct net *n);
/* Bytes handed to the connection so far, resends included. */
uint64_t	 net_sent(const struct net *n);
/* Page bytes framed so far, before wire compression. */
uint64_t	 net_raw(const struct net *n);
/* Bytes of the frames that carry them, once each. */
uint64_t	 net_framed(const struct net *n);
/* Reconnections so far. */
unsigned int	 net_reconnects(const struct net *n);

/* Send what the socket takes now; also moves spooled bytes back in. */
int		 net_flush(struct net *n, char *err, size_t errlen);
/* Send, waiting up to ms for the socket, until at most limit are unsent. */
int		 net_flush_to(struct net *n, size_t limit, int ms, char *err,
		    size_t errlen);
/* The listener spoke (ACK, ERROR, close): -1 with its reason. */
int		 net_readable(struct net *n, char *err, size_t errlen);
/* Nothing was sent for a while: a KEEPALIVE, if the link is idle. */
int		 net_keepalive(struct net *n, char *err, size_t errlen);
/*
 * net_cmdlines(): queue the text of saved_cmdlines now as a CMDLINES
 * frame (len <= TD_MAX_FRAME), for a listener of version 6 and later
 * (net_version(): the last WELCOME's, 0 before the first); -1 with err.
 */
int		 net_cmdlines(struct net *n, const void *p, size_t len,
		    char *err, size_t errlen);
uint16_t	 net_version(const struct net *n);
/* The connection broke: close it and start reconnecting. */
void		 net_down(struct net *n);
/*
 * The reconnection thread is done: 0 and the connection is up again
 * (resumed), or -1 with err (net_fatal() says whether to give up; if not,
 * another attempt has started).
 */
int		 net_reconnected(struct net *n, char *err, size_t errlen);
/*
 * At the end, when net_congested() stopped the last ring reads: send,
 * reconnecting as needed for up to wait seconds without a connection,
 * until the stream is below its low watermark (0) or the listener is lost
 * (-1, err).
 */
int		 net_make_room(struct net *n, int wait, char *err,
		    size_t errlen);
/*
 * END with the page counts, then send everything, reconnecting as needed
 * for up to wait seconds, until the listener's DONE; fills the remote
 * path.
 */
int		 net_finish(struct net *n, const uint64_t *pages, int ncpus,
		    int wait, char *path, size_t pathlen, char *err,
		    size_t errlen);
/* Tell a reconnection under way to stop (net_close() then waits less). */
void		 net_stop(struct net *n);
/*
 * A stopping signal (SIGINT, SIGTERM, SIGHUP) pending, or 0.  They stay
 * blocked for the recorder's loop; net_serve() looks at them while it
 * waits for an unreachable listener at the end (a signal then gives the
 * wait up), uplink_start() while it tries the collectors.
 */
int		 net_stop_signal(void);
void		 net_close(struct net *n);

#endif
