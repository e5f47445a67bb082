/*
 * procstat.h: the standard process_* metrics of the Prometheus text
 * format (CPU time, memory, descriptors, the start time) for /metrics.
 * Read from /proc at each call; a file that cannot be read leaves its
 * metrics out.  Nothing here logs.
 */
#ifndef TD_PROCSTAT_H
#define TD_PROCSTAT_H

struct evbuffer;

/* Append the process_* metrics, HELP and TYPE lines included, to out. */
void	procstat_prom(struct evbuffer *out);

#endif
