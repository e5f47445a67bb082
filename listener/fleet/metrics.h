/*
 * metrics.h: what tdlisten shows of itself, rendered from the counters the
 * modules below keep (agentconn.c, recording.c through registry.c, tally.c,
 * admit.c, budget.c, output.c, onfinish.c with --on-finish): the
 * Prometheus text format for /metrics
 * and JSON for /status.  Nothing is kept here between two calls; a reply
 * holds at most TD_HTTP_MAX_RECS recordings and TD_HTTP_MAX_IDENTITIES
 * identities.  It calls down into those modules, none calls it.  Loop
 * thread only.
 */
#ifndef TD_METRICS_H
#define TD_METRICS_H

#include <stdint.h>

struct evbuffer;
struct listener_config;

/* Why an HTTP client was closed or its request refused (httpd.c). */
enum metrics_http_refusal {
	METRICS_HTTP_DEADLINE,	/* no whole request by its deadline */
	METRICS_HTTP_ADDRESS,	/* its address held its share, none to take */
	METRICS_HTTP_FULL,	/* every slot taken, none old enough to take */
	METRICS_HTTP_EVICTED,	/* its slot went to a newcomer */
	METRICS_HTTP_HOST,	/* a Host not the listener's: 421 */
	METRICS_HTTP_NREFUSALS
};

/* The replies made from the counters. */
enum metrics_http_page {
	METRICS_HTTP_PROMETHEUS,	/* /metrics */
	METRICS_HTTP_STATUS,		/* /status */
	METRICS_HTTP_NPAGES
};

/* What httpd.c counts of its clients, shown in both replies. */
struct metrics_http {
	uint64_t	 requests;	/* answered, whatever the code */
	uint64_t	 refused[METRICS_HTTP_NREFUSALS];
	uint64_t	 renders[METRICS_HTTP_NPAGES];	/* made anew */
	uint64_t	 delayed;	/* held past the address's rate */
};

/* The metrics, text format 0.0.4, appended to out. */
void	metrics_prometheus(const struct listener_config *cfg,
	    struct evbuffer *out);
/* The same as one JSON object, appended to out. */
void	metrics_json(const struct listener_config *cfg, struct evbuffer *out);
/* Show *h in both from now on (httpd.c's, read at each reply). */
void	metrics_set_http(const struct metrics_http *h);
/*
 * A number that changes whenever a count of things both show changes:
 * sessions by state, open and ended recordings, resumes, pieces, refused
 * handshakes, --on-finish runs (not the bytes and events received).
 */
uint64_t metrics_generation(const struct listener_config *cfg);

#endif
