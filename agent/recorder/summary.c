/*
 * summary.c: what the recorder tells the user about a recording (see
 * recorder.h): a progress line while it runs, the one-line summary at the
 * end with what was lost and why.  The progress line's state (struct
 * summary, r->sum) is this file's alone.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "net.h"
#include "recorder.h"
#include "tdfile.h"
#include "uplink.h"
#include "xmalloc.h"
#include "banned.h"

/* The progress line starts after this many seconds. */
#define SUMMARY_STATUS_AFTER_S	3.0

/* The progress line. */
struct summary {
	bool	 shown;		/* a line was printed */
	double	 next;		/* elapsed time of the next line (no tty) */
};

/* No line printed yet. */
struct summary *
summary_new(void)
{
	return xcalloc(1, sizeof(struct summary));
}

/* The progress line's state goes. */
void
summary_free(struct summary *sum)
{
	free(sum);
}

/*
 * Progress for long recordings: on a terminal a line that rewrites itself,
 * otherwise (a log) a full line every ten seconds.
 */
void
summary_status(struct recorder *r, bool final)
{
	struct summary *sum = r->sum;
	uint64_t pages = 0, events = 0, marked = 0;
	struct drain_count c;
	double t = record_elapsed(r);
	bool tty = isatty(STDERR_FILENO);
	struct net *n;
	int i;

	if (r->o->verbosity < 0)
		return;
	if (!final && t < SUMMARY_STATUS_AFTER_S)
		return;
	if (final && (!sum->shown || !tty))
		return;
	if (!tty && !final) {
		if (t < sum->next)
			return;
		sum->next = t + 10;
	}
	for (i = 0; i < r->ncpus; i++) {
		drain_count(r, i, &c);
		pages += c.pages;
		events += c.events;
		marked += c.missed_pages;
	}
	fprintf(stderr, "%stdagent: %.1f s, %" PRIu64 " events, %.1f MB, "
	    "%" PRIu64 " pages with lost events", tty ? "\r" : "", t, events,
	    pages * (double)r->page_size / 1e6, marked);
	if ((n = uplink_net(r->up)) != NULL)
		fprintf(stderr, ", %.1f MB sent, %.1f MB/s%s", net_sent(n) /
		    1e6, t > 0 ? net_sent(n) / 1e6 / t : 0.0,
		    uplink_reconnecting(r->up) ? ", reconnecting" : "");
	fprintf(stderr, "%s", final || !tty ? "\n" : "   ");
	sum->shown = true;
}

/* The one-line summary: events and bytes per CPU, and what was lost. */
void
summary_log(struct recorder *r, const struct meta_cpustat *st)
{
	char line[4096], where[600];
	size_t len = 0;
	uint64_t overrun = 0, dropped = 0, events = 0, marked = 0;
	int i;

	for (i = 0; i < r->ncpus; i++) {
		struct drain_count c;

		drain_count(r, i, &c);
		overrun += st[i].overrun;
		dropped += st[i].dropped;
		events += c.events;
		marked += c.missed_pages;
		if (c.pages == 0 || len >= sizeof line)
			continue;
		len += snprintf(line + len, sizeof line - len,
		    "%scpu%d %" PRIu64 " events %.1f MB", len ? ", " : "", i,
		    c.events, c.pages * (double)r->page_size / 1e6);
	}
	if (len == 0)
		snprintf(line, sizeof line, "no events");
	summary_status(r, true);
	if (r->file != NULL)
		snprintf(where, sizeof where, " in '%s' (%.1f MB)",
		    r->o->output, td_file_size(r->file) / 1e6);
	else
		snprintf(where, sizeof where, " sent to %s",
		    uplink_net(r->up) != NULL ? net_where(uplink_net(r->up)) :
		    r->o->host);
	log_info("%.2f s: %s; lost %" PRIu64 " (overrun %" PRIu64
	    ", dropped %" PRIu64 ", %" PRIu64 " pages marked); %" PRIu64
	    " events%s", record_elapsed(r), line, overrun + dropped, overrun,
	    dropped, marked, events, where);
	{
		struct rusage ru;

		if (getrusage(RUSAGE_SELF, &ru) == 0)
			log_debug("cpu %.3f s (user %.3f, system %.3f), "
			    "max rss %ld KiB", ru.ru_utime.tv_sec +
			    ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
			    ru.ru_stime.tv_usec / 1e6, ru.ru_utime.tv_sec +
			    ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec +
			    ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss);
	}
	tsyncsched_log(r);
	if (drain_left_unread(r))
		log_warnx("the listener was unreachable and the spool full at "
		    "the end: what was still in the ring buffer is missing");
	if (overrun + dropped != 0)
		log_warnx("the ring buffer lost %" PRIu64 " events: a larger "
		    "buffer (-b) or fewer events (-e, -f) avoid it; the "
		    "losses are marked in the file", overrun + dropped);
}
