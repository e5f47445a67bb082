/*
 * metrics.c: tdlisten's metrics and status as text (see metrics.h).
 *
 * Both replies are built the same way: a snapshot of every recording (the
 * open ones from the registry, the ended ones from the tally) and of the
 * identities they belong to, then printed.  Strings from peers (an
 * identity from a certificate, a name from a HELLO) are escaped for where
 * they go: a Prometheus label value (backslash, quote, newline) or a JSON
 * string (quote, backslash, every byte outside printable ASCII as \u00XX,
 * so any byte gives valid JSON).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dirent.h>
#include <unistd.h>
#include <sys/resource.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/crypto.h>

#include "admit.h"
#include "budget.h"
#include "agentconn.h"
#include "flight.h"
#include "listener.h"
#include "metrics.h"
#include "output.h"
#include "reload.h"
#include "onfinish.h"
#include "procstat.h"
#include "recording.h"
#include "registry.h"
#include "standbytab.h"
#include "tally.h"
#include "timesync.h"
#include "xmalloc.h"
#include "banned.h"

/* One identity: what it holds on disk and in memory. */
struct metrics_identity {
	const char	*name;		/* in a snapshot's recording */
	uint64_t	 disk;
	uint64_t	 mem;
};

/* A standby agent listed in /status: its connections are not again. */
struct metrics_standby {
	char		 peer[64];
	char		 identity[TD_MAX_NAME_LEN + 1];
	char		 name[TD_MAX_NAME_LEN + 1];	/* its recording's */
	uint32_t	 seconds;	/* its duration, 0: unknown */
	bool		 recording;	/* its recording's connection: folded */
};

/* The agents listed in /status so far. */
struct metrics_json_conns {
	struct evbuffer		*out;
	int			 n;
	bool			 truncated;
	struct metrics_standby	*sb;
	int			 nsb;
};

/* Everything a reply shows, taken at once. */
struct metrics_snap {
	struct tally_rec	*recs;
	int			 nrecs;
	int			 nopen;		/* recs[0..nopen) are open */
	int			 max;		/* open ones it has room for */
	bool			 truncated;
	struct metrics_identity	*ids;
	int			 nids;
	struct agentconn_counts	 conns;
	int			 by_state[3];	/* recording, waiting, paused */
};

/*
 * Each identity's disk use, as last measured: output_usage() walks its
 * directory, so a page polled every second does not do it per request
 * but at most once every METRICS_DISK_AGE seconds per identity.
 */
#define METRICS_DISK_AGE	5
static struct metrics_disk {
	char		 name[TD_MAX_IDENTITY_LEN + 1];
	uint64_t	 disk;
	time_t		 at;		/* CLOCK_MONOTONIC seconds */
} metrics_disk[TD_HTTP_MAX_IDENTITIES];
static int	metrics_ndisk;

static const char *const metrics_rec_states[3] = {
	"recording", "waiting", "paused"
};

/* httpd.c's counters, NULL without --http. */
static const struct metrics_http	*metrics_http;

static const char *const metrics_http_reasons[METRICS_HTTP_NREFUSALS] = {
	"deadline", "address", "full", "evicted", "host"
};

/* registry_each()'s callback: count the open recordings. */
static void
metrics_count_cb(void *rec, void *arg)
{
	(*(int *)arg)++;
}

/* registry_each()'s callback: one open recording into the snapshot. */
static void
metrics_open_cb(void *rec, void *arg)
{
	struct metrics_snap *m = arg;
	int i;

	if (m->nrecs >= m->max) {
		m->truncated = true;
		return;
	}
	recording_info(rec, &m->recs[m->nrecs]);
	for (i = 0; i < 3; i++)
		if (strcmp(m->recs[m->nrecs].state, metrics_rec_states[i]) == 0)
			m->by_state[i]++;
	m->nrecs++;
}

/* identity's disk use, at most METRICS_DISK_AGE seconds old. */
static uint64_t
metrics_disk_use(const struct listener_config *cfg, const char *identity)
{
	struct metrics_disk *d = NULL;
	struct timespec ts;
	int i;

	if (strlen(identity) > TD_MAX_IDENTITY_LEN)
		return output_usage(cfg->dir, identity);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (i = 0; i < metrics_ndisk; i++) {
		if (strcmp(metrics_disk[i].name, identity) == 0) {
			d = &metrics_disk[i];
			break;
		}
		/* when full: the one measured longest ago makes room */
		if (d == NULL || metrics_disk[i].at < d->at)
			d = &metrics_disk[i];
	}
	if (i < metrics_ndisk) {
		if (ts.tv_sec - d->at < METRICS_DISK_AGE)
			return d->disk;
	} else if (metrics_ndisk < TD_HTTP_MAX_IDENTITIES)
		d = &metrics_disk[metrics_ndisk++];
	snprintf(d->name, sizeof d->name, "%s", identity);
	d->disk = output_usage(cfg->dir, identity);
	d->at = ts.tv_sec;
	return d->disk;
}

/* The identities of the snapshot's recordings, with their disk use. */
static void
metrics_identities(const struct listener_config *cfg, struct metrics_snap *m)
{
	int i, j;

	m->ids = xcalloc(TD_HTTP_MAX_IDENTITIES, sizeof *m->ids);
	for (i = 0; i < m->nrecs; i++) {
		for (j = 0; j < m->nids; j++)
			if (strcmp(m->ids[j].name, m->recs[i].identity) == 0)
				break;
		if (j < m->nids)
			continue;
		if (m->nids == TD_HTTP_MAX_IDENTITIES) {
			m->truncated = true;
			break;
		}
		m->ids[m->nids].name = m->recs[i].identity;
		m->ids[m->nids].disk = metrics_disk_use(cfg,
		    m->recs[i].identity);
		m->ids[m->nids].mem = budget_identity_held(m->recs[i].identity);
		m->nids++;
	}
}

/*
 * The id each recording is shown with (its "recording" label): its
 * file's TRACEID, which trace-cmd dump --options shows, or the listener's
 * own when the file has none the listener knows (a trace-cmd client's,
 * a checkpoint of an older tdlisten) or when another recording of the
 * identity shows the same (an agent chooses its TRACEID: two series must
 * never have one set of labels).  The snapshot's trace_id becomes it.
 */
static void
metrics_label_ids(struct metrics_snap *m)
{
	struct tally_rec *t;
	int i, j;

	for (i = 0; i < m->nrecs; i++) {
		t = &m->recs[i];
		if (t->file_trace_id == 0)
			continue;
		for (j = 0; j < i; j++)
			if (m->recs[j].trace_id == t->file_trace_id &&
			    strcmp(m->recs[j].identity, t->identity) == 0)
				break;
		if (j == i)
			t->trace_id = t->file_trace_id;
	}
}

static void
metrics_snap(const struct listener_config *cfg, struct metrics_snap *m)
{
	const struct tally_rec *t;
	int i, n = 0;

	memset(m, 0, sizeof *m);
	registry_each(NULL, metrics_count_cb, &n);
	m->max = n < TD_HTTP_MAX_RECS ? n : TD_HTTP_MAX_RECS;
	m->recs = xcalloc((size_t)m->max + TD_TALLY_ENDED, sizeof *m->recs);
	registry_each(NULL, metrics_open_cb, m);
	m->nopen = m->nrecs;
	for (i = 0; (t = tally_ended_at(i)) != NULL; i++)
		m->recs[m->nrecs++] = *t;
	agentconn_count(&m->conns);
	metrics_identities(cfg, m);
	metrics_label_ids(m);
}

static void
metrics_snap_free(struct metrics_snap *m)
{
	free(m->recs);
	free(m->ids);
}

/*
 * s as a Prometheus label value (without the quotes); bytes outside
 * printable ASCII become '?' (the format wants UTF-8, a name from a HELLO
 * may be anything).
 */
static void
metrics_label(struct evbuffer *out, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\')
			evbuffer_add(out, "\\\\", 2);
		else if (*s == '"')
			evbuffer_add(out, "\\\"", 2);
		else if (*s == '\n')
			evbuffer_add(out, "\\n", 2);
		else if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			evbuffer_add(out, "?", 1);	/* UTF-8 unchecked */
		else
			evbuffer_add(out, s, 1);
	}
}

/* s as a JSON string, quotes included. */
static void
metrics_jstr(struct evbuffer *out, const char *s)
{
	const unsigned char *p;

	evbuffer_add(out, "\"", 1);
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p == '\\' || *p == '"')
			evbuffer_add_printf(out, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			evbuffer_add_printf(out, "\\u%04x", *p);
		else
			evbuffer_add(out, p, 1);
	}
	evbuffer_add(out, "\"", 1);
}

/* The HELP and TYPE lines of a metric. */
static void
metrics_head(struct evbuffer *out, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(out, "# HELP tdlisten_%s %s\n# TYPE tdlisten_%s "
	    "%s\n", name, help, name, type);
}

/* name{identity="..",name="..",recording=".."} for recording t. */
static void
metrics_rec_labels(struct evbuffer *out, const char *name,
    const struct tally_rec *t)
{
	evbuffer_add_printf(out, "tdlisten_%s{identity=\"", name);
	metrics_label(out, t->identity);
	evbuffer_add_printf(out, "\",name=\"");
	metrics_label(out, t->name);
	evbuffer_add_printf(out, "\",recording=\"%016" PRIx64 "\"} ",
	    t->trace_id);
}

/* A recording's gauges that are one number: name, help, the number. */
static uint64_t
metrics_cpus(const struct tally_rec *t)
{
	return t->ncpus;
}

static uint64_t
metrics_bytes(const struct tally_rec *t)
{
	return t->bytes;
}

static uint64_t
metrics_events(const struct tally_rec *t)
{
	return t->events;
}

static uint64_t
metrics_lost(const struct tally_rec *t)
{
	return t->lost;
}

static uint64_t
metrics_missed(const struct tally_rec *t)
{
	return t->missed_pages;
}

static const struct metrics_rec_gauge {
	const char	*name;
	const char	*help;
	uint64_t	(*value)(const struct tally_rec *);
} metrics_rec_gauges[] = {
	{ "recording_cpus", "CPUs of a recording.", metrics_cpus },
	{ "recording_received_bytes", "Bytes received for a recording (since "
	    "its last checkpoint taken back).", metrics_bytes },
	{ "recording_events", "Events in the pages of a recording's file.",
	    metrics_events },
	{ "recording_lost_events", "Events the traced machine's ring lost "
	    "(overrun and dropped, at its end).", metrics_lost },
	{ "recording_missed_pages", "Pages of a recording marked as coming "
	    "after lost events.", metrics_missed },
};

/* The metrics of every recording of the snapshot. */
static void
metrics_prom_recs(struct evbuffer *out, const struct metrics_snap *m)
{
	const struct metrics_rec_gauge *g;
	const struct tally_rec *t;
	size_t k;
	int i;

	metrics_head(out, "recording_info", "gauge", "Recordings open or "
	    "ended lately (1), with their state and file under the output "
	    "directory.");
	for (i = 0; i < m->nrecs; i++) {
		t = &m->recs[i];
		evbuffer_add_printf(out, "tdlisten_recording_info{identity=\"");
		metrics_label(out, t->identity);
		evbuffer_add_printf(out, "\",name=\"");
		metrics_label(out, t->name);
		evbuffer_add_printf(out, "\",recording=\"%016" PRIx64
		    "\",state=\"%s\",file=\"", t->trace_id, t->state);
		metrics_label(out, t->path);
		evbuffer_add_printf(out, "\"} 1\n");
	}
	for (k = 0; k < sizeof metrics_rec_gauges / sizeof
	    metrics_rec_gauges[0]; k++) {
		g = &metrics_rec_gauges[k];
		metrics_head(out, g->name, "gauge", g->help);
		for (i = 0; i < m->nrecs; i++) {
			metrics_rec_labels(out, g->name, &m->recs[i]);
			evbuffer_add_printf(out, "%" PRIu64 "\n",
			    g->value(&m->recs[i]));
		}
	}
	metrics_head(out, "recording_sync_error_bound_seconds", "gauge",
	    "The error bound in force for a recording's time shift: the "
	    "widest of its samples not set aside (none before its first).");
	for (i = 0; i < m->nrecs; i++) {
		if (m->recs[i].sync_samples == 0)
			continue;
		metrics_rec_labels(out, "recording_sync_error_bound_seconds",
		    &m->recs[i]);
		evbuffer_add_printf(out, "%.9f\n",
		    m->recs[i].sync_bound_ns / 1e9);
	}
	metrics_head(out, "recording_sync_error_bound_wide", "gauge",
	    "1 when a recording's time-sync bound is wide (over 100 us).");
	for (i = 0; i < m->nrecs; i++) {
		if (m->recs[i].sync_samples == 0)
			continue;
		metrics_rec_labels(out, "recording_sync_error_bound_wide",
		    &m->recs[i]);
		evbuffer_add_printf(out, "%d\n",
		    m->recs[i].sync_bound_ns > TIMESYNC_WIDE_NS);
	}
	metrics_head(out, "recording_duration_seconds", "gauge", "How long "
	    "a recording has run (or ran).");
	for (i = 0; i < m->nrecs; i++) {
		metrics_rec_labels(out, "recording_duration_seconds",
		    &m->recs[i]);
		evbuffer_add_printf(out, "%.3f\n", m->recs[i].elapsed);
	}
}

/* --on-finish: its counters, and what waits or runs now. */
static void
metrics_prom_onfinish(struct evbuffer *out, const struct onfinish *of)
{
	static const struct {
		const char	*name, *type, *help;
	} h[] = {
		{ "onfinish_started_total", "counter", "Runs of the "
		    "--on-finish command started (every attempt)." },
		{ "onfinish_succeeded_total", "counter", "Runs that exited "
		    "with status 0." },
		{ "onfinish_failed_total", "counter", "Runs that failed (an "
		    "exit status, a signal, the timeout): each is tried again "
		    "or given up." },
		{ "onfinish_timeouts_total", "counter", "Of the failed runs, "
		    "those killed at --on-finish-timeout." },
		{ "onfinish_given_up_total", "counter", "Files whose "
		    "--on-finish-attempts all failed." },
		{ "onfinish_dropped_total", "counter", "Files not queued (the "
		    "queue was full): the next start runs them." },
		{ "onfinish_queued", "gauge", "Files waiting for the command "
		    "or running it." },
		{ "onfinish_running", "gauge", "Commands running." },
	};
	struct onfinish_stats st;
	uint64_t v[8];
	size_t i;

	onfinish_stats(of, &st);
	v[0] = st.started;
	v[1] = st.succeeded;
	v[2] = st.failed;
	v[3] = st.timeouts;
	v[4] = st.given_up;
	v[5] = st.dropped;
	v[6] = (uint64_t)st.queued;
	v[7] = (uint64_t)st.running;
	for (i = 0; i < sizeof h / sizeof h[0]; i++) {
		metrics_head(out, h[i].name, h[i].type, h[i].help);
		evbuffer_add_printf(out, "tdlisten_%s %" PRIu64 "\n",
		    h[i].name, v[i]);
	}
}

void
metrics_set_http(const struct metrics_http *h)
{
	metrics_http = h;
}

/* standbytab_each()'s callback: count the standby agents by state. */
static void
metrics_standby_count_cb(const struct standbytab_info *i, void *arg)
{
	int *n = arg;

	n[strcmp(i->state, "recording") == 0 ? 1 :
	    strcmp(i->state, "refused") == 0 ? 2 : 0]++;
}

/* The standby agents (tdagent --standby) by state. */
static void
metrics_prom_standby(struct evbuffer *out)
{
	static const char *const st[3] = { "standby", "recording", "refused" };
	int n[3] = { 0, 0, 0 }, i;

	standbytab_each(metrics_standby_count_cb, n);
	metrics_head(out, "standby_agents", "gauge", "Standby agents "
	    "connected (tdagent --standby), by state: waiting for a START, "
	    "recording, or having refused the last one.");
	for (i = 0; i < 3; i++)
		evbuffer_add_printf(out, "tdlisten_standby_agents{state=\"%s\"} "
		    "%d\n", st[i], n[i]);
}

/* The version, and the libraries', as a metric whose value is 1. */
static void
metrics_prom_build(struct evbuffer *out)
{
	metrics_head(out, "build_info", "gauge", "tdlisten's version and "
	    "those of the libraries it runs with (value 1).");
	evbuffer_add_printf(out, "tdlisten_build_info{version=\"");
	metrics_label(out, PACKAGE_VERSION);
	evbuffer_add_printf(out, "\",libevent=\"");
	metrics_label(out, event_get_version());
	evbuffer_add_printf(out, "\",openssl=\"");
	metrics_label(out, OpenSSL_version(OPENSSL_VERSION));
	evbuffer_add_printf(out, "\"} 1\n");
}

/* One more value into a generation (FNV-1a over 64-bit words). */
static uint64_t
metrics_mix(uint64_t g, uint64_t v)
{
	return (g ^ v) * 0x100000001b3ULL;
}

uint64_t
metrics_generation(const struct listener_config *cfg)
{
	const struct tally_totals *tt = tally_totals();
	struct onfinish_stats st;
	struct agentconn_counts c;
	uint64_t g = 0xcbf29ce484222325ULL;
	int i, n = 0, sb[3] = { 0, 0, 0 };

	agentconn_count(&c);
	registry_each(NULL, metrics_count_cb, &n);
	g = metrics_mix(g, (uint64_t)c.handshake);
	g = metrics_mix(g, (uint64_t)c.open);
	g = metrics_mix(g, (uint64_t)c.pausing);
	g = metrics_mix(g, (uint64_t)c.closing);
	g = metrics_mix(g, (uint64_t)n);
	g = metrics_mix(g, tt->done);
	g = metrics_mix(g, tt->ended_early);
	g = metrics_mix(g, tt->resumes);
	g = metrics_mix(g, tt->pieces);
	g = metrics_mix(g, tt->pieces_removed);
	for (i = 0; i < ADMIT_R_NKINDS; i++)
		g = metrics_mix(g, admit_refused_total(i));
	standbytab_each(metrics_standby_count_cb, sb);
	for (i = 0; i < 3; i++)
		g = metrics_mix(g, (uint64_t)sb[i]);
	/* a reload that failed, or one that mended it, shows at once */
	g = metrics_mix(g, reload_failures());
	g = metrics_mix(g, reload_error()[0] != '\0');
	if (cfg->onfinish != NULL) {
		onfinish_stats(cfg->onfinish, &st);
		g = metrics_mix(g, st.started);
		g = metrics_mix(g, st.succeeded);
		g = metrics_mix(g, st.failed);
		g = metrics_mix(g, st.given_up);
		g = metrics_mix(g, st.dropped);
		g = metrics_mix(g, (uint64_t)st.queued);
		g = metrics_mix(g, (uint64_t)st.running);
	}
	return g;
}

/* --http: the requests answered and the clients refused. */
static void
metrics_prom_http(struct evbuffer *out)
{
	int i;

	if (metrics_http == NULL)
		return;
	metrics_head(out, "http_requests_total", "counter", "HTTP requests "
	    "answered (status page, /status, /metrics, errors).");
	evbuffer_add_printf(out, "tdlisten_http_requests_total %" PRIu64 "\n",
	    metrics_http->requests);
	metrics_head(out, "http_refused_total", "counter", "HTTP clients "
	    "closed (no whole request by the deadline, over their address's "
	    "share or the cap, their slot taken by a newcomer) and requests "
	    "refused (a Host not the listener's), by reason.");
	for (i = 0; i < METRICS_HTTP_NREFUSALS; i++)
		evbuffer_add_printf(out, "tdlisten_http_refused_total{reason="
		    "\"%s\"} %" PRIu64 "\n", metrics_http_reasons[i],
		    metrics_http->refused[i]);
	metrics_head(out, "http_renders_total", "counter", "Replies made "
	    "anew from the counters (others reuse the last, at most a "
	    "second old), by page.");
	evbuffer_add_printf(out, "tdlisten_http_renders_total{page=\"metrics"
	    "\"} %" PRIu64 "\ntdlisten_http_renders_total{page=\"status\"} %"
	    PRIu64 "\n", metrics_http->renders[METRICS_HTTP_PROMETHEUS],
	    metrics_http->renders[METRICS_HTTP_STATUS]);
	metrics_head(out, "http_delayed_total", "counter", "HTTP requests "
	    "held until their address's rate allowed them.");
	evbuffer_add_printf(out, "tdlisten_http_delayed_total %" PRIu64 "\n",
	    metrics_http->delayed);
}

/* --http: the same as a JSON member, with its comma; nothing without. */
static void
metrics_json_http(struct evbuffer *out)
{
	int i;

	if (metrics_http == NULL)
		return;
	evbuffer_add_printf(out, ",\"http\":{\"requests\":%" PRIu64
	    ",\"refused\":{", metrics_http->requests);
	for (i = 0; i < METRICS_HTTP_NREFUSALS; i++)
		evbuffer_add_printf(out, "%s\"%s\":%" PRIu64, i > 0 ? "," : "",
		    metrics_http_reasons[i], metrics_http->refused[i]);
	evbuffer_add_printf(out, "},\"renders\":{\"metrics\":%" PRIu64
	    ",\"status\":%" PRIu64 "},\"delayed\":%" PRIu64 "}",
	    metrics_http->renders[METRICS_HTTP_PROMETHEUS],
	    metrics_http->renders[METRICS_HTTP_STATUS], metrics_http->delayed);
}

void
metrics_prometheus(const struct listener_config *cfg, struct evbuffer *out)
{
	const struct tally_totals *tt = tally_totals();
	struct metrics_snap m;
	int i;

	metrics_snap(cfg, &m);
	metrics_prom_build(out);
	procstat_prom(out);
	metrics_prom_standby(out);
	metrics_head(out, "sessions", "gauge", "Agent connections by state.");
	evbuffer_add_printf(out, "tdlisten_sessions{state=\"handshake\"} %d\n"
	    "tdlisten_sessions{state=\"open\"} %d\n"
	    "tdlisten_sessions{state=\"pausing\"} %d\n"
	    "tdlisten_sessions{state=\"closing\"} %d\n", m.conns.handshake,
	    m.conns.open, m.conns.pausing, m.conns.closing);
	metrics_head(out, "recordings", "gauge", "Open recordings by state.");
	for (i = 0; i < 3; i++)
		evbuffer_add_printf(out, "tdlisten_recordings{state=\"%s\"} "
		    "%d\n", metrics_rec_states[i], m.by_state[i]);
	metrics_head(out, "recordings_ended_total", "counter", "Recordings "
	    "that ended: done, or ended early (kept as .incomplete.dat or "
	    "dropped).");
	evbuffer_add_printf(out, "tdlisten_recordings_ended_total{how=\"done\"}"
	    " %" PRIu64 "\ntdlisten_recordings_ended_total{how=\"early\"} %"
	    PRIu64 "\n", tt->done, tt->ended_early);
	metrics_head(out, "received_bytes_total", "counter", "Bytes received "
	    "for recordings, resends included.");
	evbuffer_add_printf(out, "tdlisten_received_bytes_total %" PRIu64 "\n",
	    tt->bytes);
	metrics_head(out, "received_events_total", "counter", "Events in the "
	    "pages received, resends included.");
	evbuffer_add_printf(out, "tdlisten_received_events_total %" PRIu64
	    "\n", tt->events);
	metrics_head(out, "lost_events_total", "counter", "Events the traced "
	    "machines' rings lost, by cause.");
	for (i = 0; i < TALLY_NLOSS; i++)
		evbuffer_add_printf(out, "tdlisten_lost_events_total{cause="
		    "\"%s\"} %" PRIu64 "\n", tally_loss_name(i), tt->lost[i]);
	metrics_head(out, "missed_pages_total", "counter", "Pages received "
	    "marked as coming after lost events.");
	evbuffer_add_printf(out, "tdlisten_missed_pages_total %" PRIu64 "\n",
	    tt->missed_pages);
	metrics_head(out, "handshake_failures_total", "counter", "Connections "
	    "refused or closed before their session, by reason.");
	for (i = 0; i < ADMIT_R_NKINDS; i++)
		evbuffer_add_printf(out, "tdlisten_handshake_failures_total{"
		    "reason=\"%s\"} %" PRIu64 "\n", admit_kind_label(i),
		    admit_refused_total(i));
	metrics_head(out, "resumes_total", "counter", "Recordings resumed by "
	    "their agent after a lost connection.");
	evbuffer_add_printf(out, "tdlisten_resumes_total %" PRIu64 "\n",
	    tt->resumes);
	metrics_head(out, "pieces_total", "counter", "Pieces of rotated "
	    "recordings put in place (--rotate).");
	evbuffer_add_printf(out, "tdlisten_pieces_total %" PRIu64 "\n",
	    tt->pieces);
	metrics_head(out, "pieces_removed_total", "counter", "Pieces of "
	    "rotated recordings removed by --keep.");
	evbuffer_add_printf(out, "tdlisten_pieces_removed_total %" PRIu64
	    "\n", tt->pieces_removed);
	metrics_head(out, "memory_held_bytes", "gauge", "Memory the sessions "
	    "hold (the budget's account).");
	evbuffer_add_printf(out, "tdlisten_memory_held_bytes %" PRIu64 "\n",
	    budget_held());
	metrics_head(out, "disk_used_bytes", "gauge", "Disk space used under "
	    "an identity's directory (identities with recordings listed).");
	for (i = 0; i < m.nids; i++) {
		evbuffer_add_printf(out, "tdlisten_disk_used_bytes{identity=\"");
		metrics_label(out, m.ids[i].name);
		evbuffer_add_printf(out, "\"} %" PRIu64 "\n", m.ids[i].disk);
	}
	if (cfg->quota > 0) {
		metrics_head(out, "disk_quota_bytes", "gauge", "The --quota of "
		    "an identity.");
		for (i = 0; i < m.nids; i++) {
			evbuffer_add_printf(out, "tdlisten_disk_quota_bytes{"
			    "identity=\"");
			metrics_label(out, m.ids[i].name);
			evbuffer_add_printf(out, "\"} %" PRIu64 "\n",
			    cfg->quota);
		}
	}
	metrics_prom_recs(out, &m);
	if (cfg->onfinish != NULL)
		metrics_prom_onfinish(out, cfg->onfinish);
	metrics_head(out, "reload_failures_total", "counter", "Reloads of the "
	    "CA, CRL and certificates (SIGHUP, tdctl reload) that failed: the "
	    "old ones stayed in force.");
	evbuffer_add_printf(out, "tdlisten_reload_failures_total %" PRIu64
	    "\n", reload_failures());
	metrics_prom_http(out);
	metrics_head(out, "status_truncated", "gauge", "1 when recordings or "
	    "identities past the reply's caps are left out.");
	evbuffer_add_printf(out, "tdlisten_status_truncated %d\n",
	    m.truncated ? 1 : 0);
	metrics_snap_free(&m);
}

/*
 * standbytab_each()'s callback: a standby agent into the reply, once (its
 * standby connection and the one of the recording it was asked for are
 * its, not listed again).
 */
static void
metrics_json_standby_cb(const struct standbytab_info *i, void *arg)
{
	struct metrics_json_conns *j = arg;
	struct metrics_standby *e;

	if (j->n == TD_HTTP_MAX_RECS) {
		j->truncated = true;
		return;
	}
	e = &j->sb[j->nsb++];
	snprintf(e->peer, sizeof e->peer, "%s", i->peer);
	snprintf(e->identity, sizeof e->identity, "%s", i->identity);
	e->recording = strcmp(i->state, "recording") == 0;
	snprintf(e->name, sizeof e->name, "%s", i->recording);
	e->seconds = i->seconds;
	evbuffer_add_printf(j->out, "%s{\"peer\":", j->n++ > 0 ? "," : "");
	metrics_jstr(j->out, i->peer);
	evbuffer_add_printf(j->out, ",\"identity\":");
	metrics_jstr(j->out, i->identity);
	evbuffer_add_printf(j->out, ",\"state\":\"%s\",\"standby\":true,"
	    "\"host\":", i->state);
	metrics_jstr(j->out, i->host);
	evbuffer_add_printf(j->out, ",\"recording\":");
	metrics_jstr(j->out, i->recording);
	evbuffer_add_printf(j->out, ",\"cpus\":%" PRIu32 ",\"armed\":",
	    i->ncpus);
	metrics_jstr(j->out, i->armed);
	evbuffer_add_printf(j->out, ",\"armed_since\":%lld}", i->armed_since);
}

/* flight_each()'s callback: a flight-recorder group and its triggers. */
static void
metrics_json_flight_cb(const struct flight_info *i, void *arg)
{
	struct metrics_json_conns *j = arg;

	evbuffer_add_printf(j->out, "%s{\"name\":", j->n++ > 0 ? "," : "");
	metrics_jstr(j->out, i->name);
	evbuffer_add_printf(j->out, ",\"fanout\":\"%s\",\"holdoff\":%" PRIu32
	    ",\"triggers\":%" PRIu64 ",\"held_off\":%" PRIu64 ",\"fired_by\":",
	    i->self ? "self" : "group", i->holdoff, i->acted, i->held);
	metrics_jstr(j->out, i->fired_by);
	evbuffer_add_printf(j->out, ",\"fired_ns\":%" PRIu64
	    ",\"fired_clock_ns\":%" PRIu64 ",\"snapshot\":", i->fired_ns,
	    i->fired_clock_ns);
	metrics_jstr(j->out, i->snapshot);
	evbuffer_add(j->out, "}", 1);
}

/*
 * The duration asked of open recording t (a standby agent's START with
 * -s), 0 when the listener does not know one.
 */
static uint32_t
metrics_json_limit(const struct metrics_json_conns *j,
    const struct tally_rec *t)
{
	int k;

	if (strcmp(t->state, "done") == 0 || strcmp(t->state, "ended "
	    "early") == 0)
		return 0;
	for (k = 0; k < j->nsb; k++)
		if (j->sb[k].name[0] != '\0' &&
		    strcmp(j->sb[k].name, t->name) == 0 &&
		    strcmp(j->sb[k].identity, t->identity) == 0)
			return j->sb[k].seconds;
	return 0;
}

/*
 * Why recording t pauses, as far as the listener knows: its identity's
 * --quota, or (no room on the disk, the memory budget) room to come.
 */
static void
metrics_json_paused(struct evbuffer *out, const struct listener_config *cfg,
    const struct metrics_snap *m, const struct tally_rec *t)
{
	int i;

	evbuffer_add_printf(out, ",\"paused_why\":");
	if (strcmp(t->state, "paused") != 0) {
		evbuffer_add_printf(out, "null");
		return;
	}
	if (t->why[0] != '\0') {	/* what the recording said */
		metrics_jstr(out, t->why);
		return;
	}
	for (i = 0; i < m->nids; i++)
		if (cfg->quota > 0 && strcmp(m->ids[i].name, t->identity) == 0 &&
		    m->ids[i].disk >= cfg->quota) {
			evbuffer_add_printf(out, "\"its identity's --quota is "
			    "full (%" PRIu64 " of %" PRIu64 " bytes)\"",
			    m->ids[i].disk, cfg->quota);
			return;
		}
	evbuffer_add_printf(out, "\"no room for it (disk or memory budget): "
	    "the agent keeps its data and resumes when there is\"");
}

/* Whether connection i belongs to a standby agent listed (folded once). */
static bool
metrics_json_folded(struct metrics_json_conns *j,
    const struct agentconn_info *i)
{
	int k;

	for (k = 0; k < j->nsb; k++)
		if (strcmp(j->sb[k].peer, i->peer) == 0)
			return true;
	for (k = 0; k < j->nsb; k++)
		if (j->sb[k].recording && strcmp(i->state, "open") == 0 &&
		    strcmp(j->sb[k].identity, i->identity) == 0) {
			j->sb[k].recording = false;
			return true;
		}
	return false;
}

/* agentconn_each()'s callback: one agent's connection into the reply. */
static void
metrics_json_conn_cb(const struct agentconn_info *i, void *arg)
{
	struct metrics_json_conns *j = arg;

	if (metrics_json_folded(j, i))
		return;
	if (j->n == TD_HTTP_MAX_RECS) {
		j->truncated = true;
		return;
	}
	evbuffer_add_printf(j->out, "%s{\"peer\":", j->n++ > 0 ? "," : "");
	metrics_jstr(j->out, i->peer);
	evbuffer_add_printf(j->out, ",\"identity\":");
	metrics_jstr(j->out, i->identity);
	evbuffer_add_printf(j->out, ",\"state\":\"%s\",\"standby\":false}",
	    i->state);
}

/*
 * One recording as a JSON object but its closing brace (limit: its
 * duration, 0: unknown).
 */
static void
metrics_json_rec(struct evbuffer *out, const struct tally_rec *t,
    uint32_t limit)
{
	evbuffer_add_printf(out, "{\"identity\":");
	metrics_jstr(out, t->identity);
	evbuffer_add_printf(out, ",\"name\":");
	metrics_jstr(out, t->name);
	evbuffer_add_printf(out, ",\"recording\":\"%016" PRIx64 "\","
	    "\"state\":", t->trace_id);
	metrics_jstr(out, t->state);
	evbuffer_add_printf(out, ",\"file\":");
	metrics_jstr(out, t->path);
	if (t->file_trace_id != 0)
		evbuffer_add_printf(out, ",\"traceid\":\"%016" PRIx64 "\"",
		    t->file_trace_id);
	else
		evbuffer_add_printf(out, ",\"traceid\":null");
	evbuffer_add_printf(out, ",\"cpus\":%" PRIu32 ",\"bytes\":%" PRIu64
	    ",\"events\":%" PRIu64 ",\"lost\":%" PRIu64 ",\"missed_pages\":%"
	    PRIu64 ",\"sync_samples\":%" PRIu32 ",\"sync_bound_ns\":",
	    t->ncpus, t->bytes, t->events, t->lost, t->missed_pages,
	    t->sync_samples);
	if (t->sync_samples > 0)
		evbuffer_add_printf(out, "%" PRIu64 ",\"sync_wide\":%s",
		    t->sync_bound_ns, t->sync_bound_ns > TIMESYNC_WIDE_NS ?
		    "true" : "false");
	else
		evbuffer_add_printf(out, "null,\"sync_wide\":false");
	evbuffer_add_printf(out, ",\"seconds\":%.3f,\"started\":%.0f,"
	    "\"remaining\":", t->elapsed, t->started);
	if (limit > 0)
		evbuffer_add_printf(out, "%.0f", t->elapsed < limit ?
		    (double)limit - t->elapsed : 0.0);
	else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, ",\"why\":");
	metrics_jstr(out, t->why);
}

void
metrics_json(const struct listener_config *cfg, struct evbuffer *out)
{
	const struct tally_totals *tt = tally_totals();
	struct metrics_json_conns jc;
	struct metrics_snap m;
	int i;

	metrics_snap(cfg, &m);
	evbuffer_add_printf(out, "{\"version\":");
	metrics_jstr(out, PACKAGE_VERSION);
	evbuffer_add_printf(out, ",\"sessions\":{\"handshake\":%d,\"open\":%d,"
	    "\"pausing\":%d,\"closing\":%d},", m.conns.handshake, m.conns.open,
	    m.conns.pausing, m.conns.closing);
	evbuffer_add_printf(out, "\"totals\":{\"bytes\":%" PRIu64 ",\"events\":%"
	    PRIu64 ",\"lost_overrun\":%" PRIu64 ",\"lost_dropped\":%" PRIu64
	    ",\"missed_pages\":%" PRIu64 ",\"resumes\":%" PRIu64 ",\"done\":%"
	    PRIu64 ",\"ended_early\":%" PRIu64 ",\"pieces\":%" PRIu64
	    ",\"pieces_removed\":%" PRIu64 ",\"memory_held\":%" PRIu64
	    "},", tt->bytes, tt->events, tt->lost[TALLY_OVERRUN],
	    tt->lost[TALLY_DROPPED], tt->missed_pages, tt->resumes, tt->done,
	    tt->ended_early, tt->pieces, tt->pieces_removed, budget_held());
	evbuffer_add_printf(out, "\"handshake_failures\":{");
	for (i = 0; i < ADMIT_R_NKINDS; i++)
		evbuffer_add_printf(out, "%s\"%s\":%" PRIu64, i > 0 ? "," : "",
		    admit_kind_label(i), admit_refused_total(i));
	evbuffer_add_printf(out, "},\"identities\":[");
	for (i = 0; i < m.nids; i++) {
		evbuffer_add_printf(out, "%s{\"identity\":", i > 0 ? "," : "");
		metrics_jstr(out, m.ids[i].name);
		evbuffer_add_printf(out, ",\"disk_bytes\":%" PRIu64
		    ",\"memory_bytes\":%" PRIu64 ",\"quota_bytes\":", m.ids[i].disk,
		    m.ids[i].mem);
		if (cfg->quota > 0)
			evbuffer_add_printf(out, "%" PRIu64 "}", cfg->quota);
		else
			evbuffer_add_printf(out, "null}");
	}
	evbuffer_add_printf(out, "],\"agents\":[");
	memset(&jc, 0, sizeof jc);
	jc.out = out;
	jc.sb = xcalloc(TD_HTTP_MAX_RECS, sizeof *jc.sb);
	standbytab_each(metrics_json_standby_cb, &jc);
	agentconn_each(metrics_json_conn_cb, &jc);
	if (jc.truncated)
		m.truncated = true;
	evbuffer_add_printf(out, "],\"recordings\":[");
	for (i = 0; i < m.nrecs; i++) {
		if (i > 0)
			evbuffer_add(out, ",", 1);
		metrics_json_rec(out, &m.recs[i], metrics_json_limit(&jc,
		    &m.recs[i]));
		metrics_json_paused(out, cfg, &m, &m.recs[i]);
		evbuffer_add(out, "}", 1);
	}
	free(jc.sb);
	evbuffer_add_printf(out, "],\"flight\":[");
	jc.n = 0;
	flight_each(metrics_json_flight_cb, &jc);
	evbuffer_add_printf(out, "],\"on_finish\":");
	if (cfg->onfinish != NULL) {
		struct onfinish_stats st;

		onfinish_stats(cfg->onfinish, &st);
		evbuffer_add_printf(out, "{\"started\":%" PRIu64 ",\"succeeded"
		    "\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"timeouts\":%"
		    PRIu64 ",\"given_up\":%" PRIu64 ",\"dropped\":%" PRIu64
		    ",\"queued\":%d,\"running\":%d}", st.started, st.succeeded,
		    st.failed, st.timeouts, st.given_up, st.dropped, st.queued,
		    st.running);
	} else
		evbuffer_add_printf(out, "null");
	/* a failed reload: the old trust store is in force (reload.h) */
	evbuffer_add_printf(out, ",\"reload\":{\"failures\":%" PRIu64
	    ",\"last_error\":", reload_failures());
	if (reload_error()[0] != '\0')
		metrics_jstr(out, reload_error());
	else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, "}");
	metrics_json_http(out);
	evbuffer_add_printf(out, ",\"truncated\":%s}\n", m.truncated ? "true" :
	    "false");
	metrics_snap_free(&m);
}
