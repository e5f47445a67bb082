/*
 * standby-flight.c: a standby agent's side of the flight recorder
 * (docs/flight-recorder.md): ARM, DISARM and SNAPSHOT from the collector,
 * ARMED and TRIGGERED to it, the armed ring's trigger looked at, re-armed
 * after a snapshot or when nobody takes a frozen ring.  The ring itself is
 * armed.c's; a snapshot's recording is run as standby.c runs any.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "armed.h"
#include "buf.h"
#include "clock.h"
#include "log.h"
#include "standby.h"
#include "standby-local.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "banned.h"

/* ARM a: the flight recorder armed, or why not. */
void
standby_flight_arm(struct standby *sb, const struct td_arm *a)
{
	char err[TD_MAX_ERROR_LEN], text[TD_MAX_ERROR_LEN];

	if (sb->armed != NULL) {
		snprintf(err, sizeof err, "armed already as '%s' (disarm "
		    "first)", armed_name(sb->armed));
		goto refuse;
	}
	if ((sb->armed = armed_new(&sb->o, a, sb->me.ncpus,
	    sb->child != 0 ? sb->rec_kb : 0, err, sizeof err)) == NULL)
		goto refuse;
	if (armed_sentinel_why(sb->armed)[0] != '\0')
		log_warnx("flight recorder '%s': no sentinel for its trigger "
		    "(%s): reading tracing_on every %d ms instead",
		    armed_name(sb->armed), armed_sentinel_why(sb->armed),
		    ARMED_POLL_MS);
	log_info("collector's request %u: armed '%s' (%s%s%s, %u KB per "
	    "CPU%s%s)", a->req, armed_name(sb->armed), a->events,
	    a->filter[0] ? " if " : "", a->filter, armed_kb(sb->armed),
	    a->trigger[0] ? ", trigger " : "", a->trigger);
	snprintf(text, sizeof text, "%s %s %u", armed_name(sb->armed),
	    armed_instance(sb->armed), armed_kb(sb->armed));
	standby_reply(sb, TD_MSG_ARMED, a->req, TD_ARMED_OK, text);
	return;
refuse:
	log_warnx("collector's request %u to arm refused: %s", a->req, err);
	standby_reply(sb, TD_MSG_ARMED, a->req, TD_ARMED_FAILED, err);
}

/* DISARM: the instance goes (after the snapshot streaming from it). */
void
standby_flight_disarm(struct standby *sb, uint32_t req)
{
	if (sb->armed == NULL) {
		standby_reply(sb, TD_MSG_ARMED, req, TD_ARMED_DISARMED,
		    "not armed");
		return;
	}
	log_info("collector's request %u: disarm '%s'", req,
	    armed_name(sb->armed));
	if (sb->snap)
		sb->disarm_after = true;
	else {
		armed_free(sb->armed);
		sb->armed = NULL;
	}
	standby_reply(sb, TD_MSG_ARMED, req, TD_ARMED_DISARMED, "");
}

/* Re-arm after a snapshot or a freeze nobody took (why: logged). */
void
standby_flight_rearm(struct standby *sb, const char *why)
{
	if (sb->armed == NULL)
		return;
	if (sb->disarm_after) {
		sb->disarm_after = false;
		armed_free(sb->armed);
		sb->armed = NULL;
		log_info("flight recorder: %s: disarmed", why);
		return;
	}
	sb->frozen_at = 0;
	if (armed_rearm(sb->armed) == -1) {
		log_warn("flight recorder '%s': cannot re-arm (%s): disarmed",
		    armed_name(sb->armed), why);
		armed_free(sb->armed);
		sb->armed = NULL;
		return;
	}
	log_info("flight recorder '%s': %s: re-armed", armed_name(sb->armed),
	    why);
}

/* SNAPSHOT s: freeze, and stream the ring as a recording; or re-arm. */
void
standby_flight_snapshot(struct standby *sb, const struct td_snapshot *s)
{
	char err[TD_MAX_ERROR_LEN], text[TD_MAX_ERROR_LEN];
	struct td_start r;

	if (sb->armed == NULL) {
		standby_reply(sb, TD_MSG_ANSWER, s->req, TD_ANSWER_REFUSED,
		    "not armed");
		return;
	}
	if (s->why == TD_SNAP_REARM) {
		if (armed_frozen(sb->armed) && !sb->snap)
			standby_flight_rearm(sb, "the collector held the trigger off");
		return;
	}
	if (sb->child != 0) {
		snprintf(err, sizeof err, "busy: recording '%s'",
		    sb->me.recording);
		standby_reply(sb, TD_MSG_ANSWER, s->req, TD_ANSWER_REFUSED,
		    err);
		if (armed_frozen(sb->armed) && !sb->snap)
			standby_flight_rearm(sb, "busy: no snapshot of its trigger");
		return;
	}
	memset(&r, 0, sizeof r);
	r.req = s->req;
	snprintf(r.name, sizeof r.name, "%s", s->name);
	if (r.name[0] == '\0' || armed_freeze(sb->armed) == -1 ||
	    standby_record(sb, &r, armed_instance(sb->armed), err,
	    sizeof err) == -1) {
		if (r.name[0] == '\0')
			snprintf(err, sizeof err, "a snapshot needs a name");
		standby_reply(sb, TD_MSG_ANSWER, s->req, TD_ANSWER_REFUSED,
		    err);
		standby_flight_rearm(sb, "the snapshot failed");
		return;
	}
	sb->snap = true;
	/* its end answers the SNAPSHOT: tdctl waits for the file */
	sb->stop_req = s->req;
	log_info("collector's request %u: snapshot '%s' of '%s'%s%s, pid %ld",
	    s->req, r.name, armed_name(sb->armed), s->why == TD_SNAP_TRIGGER ?
	    ", triggered by " : "", s->why == TD_SNAP_TRIGGER ? s->host : "",
	    (long)sb->child);
	snprintf(text, sizeof text, "%s pid %ld", r.name, (long)sb->child);
	standby_reply(sb, TD_MSG_ANSWER, s->req, TD_ANSWER_STARTED, text);
}

/* The armed ring's trigger: did it fire?  TRIGGERED, or re-armed. */
void
standby_flight_look(struct standby *sb)
{
	struct td_triggered t;
	struct timespec mono, real;
	struct td_buf b;
	uint64_t max_ms = 3 * (uint64_t)sb->keepalive_ms;
	char text[TD_MAX_ERROR_LEN];
	bool exact;

	if (max_ms == 0 || max_ms > STANDBY_FROZEN_MAX_MS)
		max_ms = STANDBY_FROZEN_MAX_MS;
	if (sb->armed != NULL && sb->frozen_at != 0 && !sb->snap &&
	    armed_frozen(sb->armed) &&
	    td_clock_now_ms() - sb->frozen_at > max_ms) {
		/*
		 * TRIGGERED went and no SNAPSHOT came: the collector went
		 * away (or hangs) in between.  Re-armed, and said: now, to a
		 * collector that may yet read it, and again to the next one.
		 */
		standby_flight_rearm(sb, "frozen by its trigger and no "
		    "snapshot came");
		if (sb->armed != NULL) {
			sb->rearmed = true;
			snprintf(text, sizeof text, "%s re-armed: no snapshot "
			    "came for its trigger", armed_name(sb->armed));
			if (sb->c != NULL)
				standby_reply(sb, TD_MSG_ARMED, 0,
				    TD_ARMED_REARMED, text);
		}
	}
	if (sb->armed == NULL || !armed_has_trigger(sb->armed) ||
	    !armed_fired(sb->armed))
		return;
	sb->frozen_at = td_clock_now_ms();
	if (sb->c == NULL) {
		standby_flight_rearm(sb, "its trigger fired with no collector");
		sb->rearmed = true;
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	t.real_ns = (uint64_t)real.tv_sec * 1000000000ULL + real.tv_nsec;
	/*
	 * The trigger's event's own instant in the ring's trace clock, as it
	 * is in the snapshot's file; without a sentinel, CLOCK_MONOTONIC
	 * now, as before.
	 */
	if ((t.clock_ns = armed_fired_ns(sb->armed, &exact)) != 0)
		log_info("flight recorder '%s': its trigger's event at %"
		    PRIu64 " ns (clock %s%s)", armed_name(sb->armed),
		    t.clock_ns, armed_clock(sb->armed), exact ? "" :
		    ", the sentinel's copy");
	else
		t.clock_ns = (uint64_t)mono.tv_sec * 1000000000ULL +
		    mono.tv_nsec;
	/* a sentinel's wake-up is a fraction of a ms; a timer's, up to it */
	t.late_ms = armed_sentinel_why(sb->armed)[0] != '\0' ? ARMED_POLL_MS :
	    ARMED_RECHECK_MS * 4;
	log_info("flight recorder '%s': its trigger fired: frozen",
	    armed_name(sb->armed));
	td_buf_init(&b, TD_FRAME_HEADER + 20);
	if (td_msg_pack_triggered(&b, &t) == 0)
		standby_send(sb, &b);
	td_buf_free(&b);
}

/* The collector is gone: a ring frozen for it goes on recording. */
void
standby_flight_lost(struct standby *sb)
{
	if (sb->armed != NULL && armed_frozen(sb->armed) && !sb->snap) {
		standby_flight_rearm(sb, "lost the collector while frozen");
		sb->rearmed = true;
	}
}

void
standby_flight_window(struct standby *sb)
{
	char text[TD_MAX_NAME_LEN + 32];
	long long ms;

	if (sb->armed == NULL || armed_frozen(sb->armed) ||
	    (ms = armed_window_ms(sb->armed, (int)sb->me.ncpus)) < 0)
		return;
	snprintf(text, sizeof text, "%s %lld", armed_name(sb->armed), ms);
	standby_reply(sb, TD_MSG_ARMED, 0, TD_ARMED_WINDOW, text);
}
