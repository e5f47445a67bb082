/*
 * net.h: tdagent's connection to tdlisten.
 *
 * net_connect() dials, does the TLS handshake (or none with --insecure),
 * sends HELLO and waits for WELCOME, blocking with timeouts.  While the
 * recording runs the socket is non-blocking: sections, options and pages
 * are framed into an output queue that the recording loop flushes when the
 * socket is writable (net_fd(), net_want_write(), net_flush()); pages of one
 * CPU are batched into PAGES frames.  net_finish() sends END, drains the
 * queue and waits for the listener's DONE, blocking again.
 * Errors return -1 with a message in err; nothing here logs.
 */
#ifndef TD_NET_H
#define TD_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdproto.h"

struct net;
struct meta_sink;

struct net_params {
	const char	*host;
	const char	*port;
	const char	*cert;
	const char	*key;
	const char	*ca;
	bool		 insecure;
	int		 timeout;	/* seconds, connect/handshake/DONE */
};

struct net	*net_connect(const struct net_params *np,
		    const struct td_hello *hello, char *err, size_t errlen);
/* The listener's wish: ms between time-sync rounds, TD_TSYNC_OFF. */
uint32_t	 net_tsync_interval(const struct net *n);
/*
 * One time-sync round of nprobes probes, blocking for at most a few
 * milliseconds once the queue is out: fills sample from the probe with the
 * shortest round trip and queues it for the listener.  Returns 0, or -1
 * with err (the connection is still usable unless net_flush later fails).
 */
struct tsync;
int		 net_tsync_round(struct net *n, struct tsync *t, uint32_t round,
		    uint32_t nprobes, struct td_tsync_sample *sample,
		    char *err, size_t errlen);
/* The identity the listener gave this agent. */
const char	*net_identity(const struct net *n);
/* A meta_sink that frames sections and options into the queue. */
void		 net_meta_sink(struct net *n, struct meta_sink *s);
/* Queue one page of a CPU. */
int		 net_page(struct net *n, int cpu, const void *page, size_t len);
/* Close the current PAGES batch (end of a burst). */
int		 net_batch_end(struct net *n);
int		 net_fd(const struct net *n);
bool		 net_want_write(const struct net *n);
/* Bytes waiting to be sent. */
size_t		 net_pending(const struct net *n);
/* Bytes handed to TLS so far. */
uint64_t	 net_sent(const struct net *n);
/* Send what the socket takes now. */
int		 net_flush(struct net *n, char *err, size_t errlen);
/* Send, waiting for the socket, until at most limit bytes are queued. */
int		 net_flush_to(struct net *n, size_t limit, char *err,
		    size_t errlen);
/* The listener spoke (ERROR or close): read it; -1 with its reason. */
int		 net_readable(struct net *n, char *err, size_t errlen);
/* END with the page counts, drain, wait for DONE; fills the remote path. */
int		 net_finish(struct net *n, const uint64_t *pages, int ncpus,
		    char *path, size_t pathlen, char *err, size_t errlen);
void		 net_close(struct net *n);

#endif
