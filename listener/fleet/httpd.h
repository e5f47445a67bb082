/*
 * httpd.h: tdlisten --http ADDR:PORT, the status page and the metrics,
 * served by libevent's evhttp on the listener's one event_base:
 *
 *	/		a page a person reads (statuspage.c), which fetches
 *	/status		the recordings and counters as JSON (metrics.c)
 *	/metrics	the same in the Prometheus text format (metrics.c)
 *
 * GET and HEAD only (others: 405), other paths 404.  On a loopback
 * address it speaks plain HTTP; on any other, TLS with the listener's
 * certificate (the agents' context, agentconn_get_ctx(), so SIGHUP's reload
 * applies) and a client certificate from the same CA required.  At most
 * TD_HTTP_MAX_CONNS connections at once, TD_HTTP_MAX_CONNS_ADDR from one
 * address, each with TD_HTTP_DEADLINE seconds for its whole request;
 * a request for a Host not the listener's gets 421; requests and replies
 * bounded (tdlimits.h): the HTTP side takes a bounded share of the loop
 * and never touches a recording.  Loop thread only.
 */
#ifndef TD_HTTPD_H
#define TD_HTTPD_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct listener_config;

/*
 * Listen on cfg->http ("PORT", "ADDR:PORT" or "[ADDR6]:PORT"; ADDR
 * defaults to 127.0.0.1).  tls: the listener has certificates (a
 * non-loopback ADDR needs them).  0, or -1 with err.
 */
int	httpd_start(struct event_base *base, const struct listener_config *cfg,
	    bool tls, char *err, size_t errlen);
/* Close every HTTP connection and the socket; fine when never started. */
void	httpd_free(void);

/* statuspage.c: the page served at "/" (self-contained HTML). */
extern const char statuspage_html[];

#endif
