/*
 * metrics.h: what tdlisten shows of itself, rendered from the counters the
 * modules below keep (conn.c, recording.c through registry.c, tally.c,
 * admit.c, budget.c, output.c, onfinish.c with --on-finish): the
 * Prometheus text format for /metrics
 * and JSON for /status.  Nothing is kept here between two calls; a reply
 * holds at most TD_HTTP_MAX_RECS recordings and TD_HTTP_MAX_IDENTITIES
 * identities.  It calls down into those modules, none calls it.  Loop
 * thread only.
 */
#ifndef TD_METRICS_H
#define TD_METRICS_H

struct evbuffer;
struct listener_config;

/* The metrics, text format 0.0.4, appended to out. */
void	metrics_prometheus(const struct listener_config *cfg,
	    struct evbuffer *out);
/* The same as one JSON object, appended to out. */
void	metrics_json(const struct listener_config *cfg, struct evbuffer *out);

#endif
