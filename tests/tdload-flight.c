/*
 * tdload-flight.c: tdload's --armed standby agents (see tdload.h): the
 * flight recorder as tdagent --standby --allow-arm answers the listener
 * (agent/standby/standby-flight.c, docs/tdproto.md "Flight recorder"),
 * with no ring behind it: a snapshot replays tdload's FILE on a
 * connection of its own, so that every snapshot file's events are known
 * exactly.  The frames are proto/'s, packed and unpacked by its code.
 *
 * What a real agent checks of an ARM (--allow-events, --max-buffer, the
 * kernel's view of its filter and trigger) is not checked: every ARM of an
 * agent not armed yet is taken.  It sends no WINDOW with its KEEPALIVEs
 * and runs no time sync in its snapshots (nor does tdload in any
 * recording).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "buf.h"
#include "tdload.h"
#include "tdproto.h"
#include "xmalloc.h"

/* An armed ring without -b, as tdagent's (agent/standby/armed.c). */
#define FLIGHT_DEFAULT_KB	1024
/* TRIGGERED's late_ms: tdagent looks at its ring four times a second. */
#define FLIGHT_POLL_MS		250
/*
 * A snapshot's connection closed before its WELCOME (the listener's
 * handshake budget, --max-handshakes, is full when a whole fleet connects
 * at once) is tried again as tdagent does (agent/net/reconnect.c, its
 * --reconnect-wait): after 100 ms, doubling to 5 s, jittered, for 300 s.
 */
#define FLIGHT_BACKOFF_MIN_MS	100
#define FLIGHT_BACKOFF_MAX_MS	5000
#define FLIGHT_RETRY_S		300

/* One standby agent's flight recorder. */
struct load_armed {
	struct conn	*c;		/* its standby connection */
	struct conn	 rec;		/* its snapshot's recording */
	bool		 armed;
	bool		 frozen;	/* its trigger fired, or a snapshot */
	bool		 snap;		/* rec runs */
	bool		 disarm_after;	/* a DISARM came while rec ran */
	uint32_t	 req;		/* the SNAPSHOT's */
	uint32_t	 kb;
	char		 name[TD_MAX_NAME_LEN + 1];	/* its group */
	struct event	*trig;		/* --trigger: when it fires */
	struct event	*again;		/* rec's next try */
	uint32_t	 delay_ms;	/* ... its backoff */
	struct timespec	 asked;		/* the SNAPSHOT came */
};

static struct event_base *flight_base;
static int		 flight_trig_agent = -1;
static double		 flight_trig_secs;
static unsigned		 flight_files, flight_failed, flight_refused;
static unsigned		 flight_seq;	/* snapshots started */
static unsigned		 flight_retries;	/* connections tried again */

static uint64_t
flight_now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ANSWER what to request req on fl's standby connection. */
static void flight_answer(struct load_armed *, uint32_t, uint16_t,
    const char *, ...) __attribute__((format(printf, 4, 5)));
static void
flight_answer(struct load_armed *fl, uint32_t req, uint16_t what,
    const char *fmt, ...)
{
	struct td_answer a;
	struct td_buf b;
	va_list ap;

	if (fl->c->bev == NULL)
		return;
	memset(&a, 0, sizeof a);
	a.req = req;
	a.what = what;
	va_start(ap, fmt);
	vsnprintf(a.text, sizeof a.text, fmt, ap);
	va_end(ap);
	td_buf_init(&b, TD_FRAME_HEADER + 8 + TD_MAX_ERROR_LEN);
	if (td_msg_pack_answer(&b, &a) == 0)
		load_conn_send(fl->c, &b);
	td_buf_free(&b);
}

/* ARMED what to request req. */
static void flight_armed(struct load_armed *, uint32_t, uint16_t,
    const char *, ...) __attribute__((format(printf, 4, 5)));
static void
flight_armed(struct load_armed *fl, uint32_t req, uint16_t what,
    const char *fmt, ...)
{
	struct td_armed a;
	struct td_buf b;
	va_list ap;

	memset(&a, 0, sizeof a);
	a.req = req;
	a.what = what;
	va_start(ap, fmt);
	vsnprintf(a.text, sizeof a.text, fmt, ap);
	va_end(ap);
	td_buf_init(&b, TD_FRAME_HEADER + 8 + TD_MAX_ERROR_LEN);
	if (td_msg_pack_armed(&b, &a) == 0)
		load_conn_send(fl->c, &b);
	td_buf_free(&b);
}

/* --trigger: the chosen agent's trigger fires (once). */
static void
flight_trigger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct load_armed *fl = arg;
	struct td_triggered t;
	struct td_buf b;

	if (!fl->armed || fl->frozen || fl->snap) {
		fprintf(stderr, "tdload: %s: not armed or busy at its trigger: "
		    "no TRIGGERED\n", fl->c->name);
		return;
	}
	fl->frozen = true;
	t.clock_ns = flight_now_ns(CLOCK_MONOTONIC);
	t.real_ns = flight_now_ns(CLOCK_REALTIME);
	t.late_ms = FLIGHT_POLL_MS;
	td_buf_init(&b, TD_FRAME_HEADER + 20);
	if (td_msg_pack_triggered(&b, &t) == 0)
		load_conn_send(fl->c, &b);
	td_buf_free(&b);
	printf("triggered %d %s %" PRIu64 "\n", fl->c->idx, fl->c->name,
	    t.real_ns);
	fflush(stdout);
}

/* ARM a: taken unless armed already (tdagent's words). */
static void
flight_arm(struct load_armed *fl, const struct td_arm *a)
{
	struct timeval tv;

	if (fl->armed) {
		flight_armed(fl, a->req, TD_ARMED_FAILED, "armed already as "
		    "'%s' (disarm first)", fl->name);
		return;
	}
	fl->armed = true;
	fl->frozen = false;
	fl->kb = a->buffer_kb != 0 ? a->buffer_kb : FLIGHT_DEFAULT_KB;
	snprintf(fl->name, sizeof fl->name, "%s", a->name);
	flight_armed(fl, a->req, TD_ARMED_OK, "%s tdload-%04d-flight %u",
	    fl->name, fl->c->idx, fl->kb);
	if (fl->c->idx == flight_trig_agent && fl->trig == NULL) {
		tv.tv_sec = (time_t)flight_trig_secs;
		tv.tv_usec = (suseconds_t)((flight_trig_secs - tv.tv_sec) *
		    1e6);
		fl->trig = evtimer_new(flight_base, flight_trigger_cb, fl);
		evtimer_add(fl->trig, &tv);
	}
}

/* DISARM req: the ring goes, after the snapshot that reads it. */
static void
flight_disarm(struct load_armed *fl, uint32_t req)
{
	if (!fl->armed) {
		flight_armed(fl, req, TD_ARMED_DISARMED, "not armed");
		return;
	}
	if (fl->snap)
		fl->disarm_after = true;
	else
		fl->armed = false;
	flight_armed(fl, req, TD_ARMED_DISARMED, "%s", "");
}

/* The snapshot's recording, named name: a connection of its own. */
static void
flight_connect(struct load_armed *fl, const char *name)
{
	struct conn *r = &fl->rec;

	memset(r, 0, sizeof *r);
	r->idx = fl->c->idx;
	r->owner = fl->c;
	/* tdload's pid, then a number no connection of the run has */
	r->recording_id = ((uint64_t)getpid() << 32) | 0x80000000U |
	    (++flight_seq & 0x7fffffffU);
	snprintf(r->name, sizeof r->name, "%s", name);
	load_conn_start(r);
}

/* The backoff is over: the snapshot's connection again. */
static void
flight_again_cb(evutil_socket_t fd, short what, void *arg)
{
	struct load_armed *fl = arg;
	char name[TD_MAX_NAME_LEN + 1];

	snprintf(name, sizeof name, "%s", fl->rec.name);
	flight_connect(fl, name);
}

/* Whether rec, closed before its WELCOME, is tried again (and when). */
static bool
flight_retry(struct load_armed *fl)
{
	struct timespec now;
	struct timeval tv;
	uint32_t ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec - fl->asked.tv_sec >= FLIGHT_RETRY_S)
		return false;
	ms = fl->delay_ms / 2 + (uint32_t)random() % (fl->delay_ms + 1);
	fl->delay_ms = fl->delay_ms * 2 > FLIGHT_BACKOFF_MAX_MS ?
	    FLIGHT_BACKOFF_MAX_MS : fl->delay_ms * 2;
	if (fl->again == NULL)
		fl->again = evtimer_new(flight_base, flight_again_cb, fl);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(fl->again, &tv);
	flight_retries++;
	return true;
}

/* SNAPSHOT s: the ring "frozen" and streamed as a recording of its own. */
static void
flight_snapshot(struct load_armed *fl, const struct td_snapshot *s)
{
	if (!fl->armed) {
		flight_refused++;
		flight_answer(fl, s->req, TD_ANSWER_REFUSED, "not armed");
		return;
	}
	if (s->why == TD_SNAP_REARM) {
		/* a trigger held off: armed again, nothing said */
		if (!fl->snap)
			fl->frozen = false;
		return;
	}
	if (fl->snap) {
		flight_refused++;
		flight_answer(fl, s->req, TD_ANSWER_REFUSED, "busy: "
		    "recording '%s'", fl->rec.name);
		return;
	}
	if (s->name[0] == '\0') {
		flight_refused++;
		fl->frozen = false;
		flight_answer(fl, s->req, TD_ANSWER_REFUSED, "a snapshot needs "
		    "a name");
		return;
	}
	fl->snap = true;
	fl->frozen = true;
	fl->req = s->req;
	fl->delay_ms = FLIGHT_BACKOFF_MIN_MS;
	clock_gettime(CLOCK_MONOTONIC, &fl->asked);
	flight_answer(fl, s->req, TD_ANSWER_STARTED, "%s pid %ld", s->name,
	    (long)getpid());
	flight_connect(fl, s->name);
}

void
load_flight_init(struct event_base *base, int trig_agent, double trig_secs)
{
	flight_base = base;
	flight_trig_agent = trig_agent;
	flight_trig_secs = trig_secs;
}

void
load_flight_stand(struct conn *c)
{
	c->fl = xcalloc(1, sizeof *c->fl);
	c->fl->c = c;
}

int
load_flight_frame(struct conn *c, const struct td_frame *f, char *why,
    size_t len)
{
	struct load_armed *fl = c->fl;
	struct td_snapshot s;
	struct td_arm a;
	uint32_t req;

	switch (f->type) {
	case TD_MSG_ARM:
		if (td_msg_unpack_arm(f, &a) == -1)
			break;
		flight_arm(fl, &a);
		return 1;
	case TD_MSG_DISARM:
		if (td_msg_unpack_disarm(f, &req) == -1)
			break;
		flight_disarm(fl, req);
		return 1;
	case TD_MSG_SNAPSHOT:
		if (td_msg_unpack_snapshot(f, &s) == -1)
			break;
		flight_snapshot(fl, &s);
		return 1;
	case TD_MSG_GO:
		/* the snapshot's recording waits for it; another is late */
		if (td_msg_unpack_go(f, &req) == -1)
			break;
		if (fl->snap && req == fl->req)
			load_conn_go(&fl->rec);
		return 1;
	default:
		return 0;
	}
	snprintf(why, len, "the listener sent a malformed %s",
	    td_msg_name(f->type));
	return -1;
}

void
load_flight_ready(struct conn *rec)
{
	struct load_armed *fl = rec->owner->fl;

	flight_answer(fl, fl->req, TD_ANSWER_READY, "%s", rec->name);
}

void
load_flight_end(struct conn *rec, bool ok, bool early)
{
	struct load_armed *fl = rec->owner->fl;

	if (!ok && early && fl->c->bev != NULL && flight_retry(fl))
		return;

	if (ok) {
		flight_files++;
		printf("snapshot %d %s %s %s %" PRIu64 " %.3f %" PRIu64 "\n",
		    rec->idx, rec->owner->name, rec->name, rec->path,
		    rec->file_size, rec->secs, flight_now_ns(CLOCK_REALTIME));
		flight_answer(fl, fl->req, TD_ANSWER_FINISHED, "%s exit 0",
		    rec->name);
	} else {
		flight_failed++;
		printf("not ok snapshot %d %s %s: %s\n", rec->idx,
		    rec->owner->name, rec->name, rec->why);
		flight_answer(fl, fl->req, TD_ANSWER_FINISHED, "%s exit 1: %s",
		    rec->name, rec->why);
	}
	fflush(stdout);
	/* re-armed (or disarmed, as asked meanwhile) */
	fl->snap = false;
	fl->frozen = false;
	if (fl->disarm_after) {
		fl->disarm_after = false;
		fl->armed = false;
	}
}

void
load_flight_gone(struct conn *c)
{
	struct load_armed *fl = c->fl;

	if (fl->snap && fl->rec.state != C_OK && fl->rec.state != C_FAILED)
		load_conn_fail(&fl->rec, "its standby connection ended");
	else if (fl->snap) {
		/* between two tries */
		flight_failed++;
		printf("not ok snapshot %d %s %s: its standby connection "
		    "ended\n", c->idx, c->name, fl->rec.name);
	}
	if (fl->trig != NULL)
		event_free(fl->trig);
	if (fl->again != NULL)
		event_free(fl->again);
	free(fl);
	c->fl = NULL;
}

int
load_flight_summary(FILE *fp)
{
	fprintf(fp, "tdload: %u snapshots: %u files, %u failed; %u SNAPSHOT "
	    "refused; %u connections tried again\n", flight_files +
	    flight_failed, flight_files, flight_failed, flight_refused,
	    flight_retries);
	return flight_failed != 0 ? -1 : 0;
}
