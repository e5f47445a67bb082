/*
 * session-standby.c: the session of a standby agent (tdagent --standby;
 * docs/tdproto.md "Standby"): STANDBY instead of HELLO, a WELCOME, then
 * only KEEPALIVE and ANSWER from the agent, and START and STOP from
 * standbytab.c, which this file gives a way to send them.  No recording.
 */
#include <stdio.h>

#include "buf.h"
#include "listener.h"
#include "session.h"
#include "session-local.h"
#include "standbytab.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "banned.h"

void
session_set_resume_only(struct session *s)
{
	s->resume_only = true;
}

void
session_set_kick(struct session *s, void (*kick)(void *), void *arg)
{
	s->kick = kick;
	s->kick_arg = arg;
}

/*
 * standbytab.c's way to send START and STOP: queue a whole frame p[0..n) to
 * the agent and kick: 0, or -1 (full, or not a standby agent).
 */
static int
session_send_cb(void *arg, const void *p, size_t n)
{
	struct session *s = arg;

	if (s->phase != SESSION_STANDBY || td_buf_add(&s->out, p, n) == -1)
		return -1;
	if (s->kick != NULL)
		s->kick(s->kick_arg);
	return 0;
}

/*
 * STANDBY: the agent waits for START, with an entry in standbytab.c.
 * Nothing here ends a session or queues a WELCOME: session.c does both
 * (this file never calls it).
 */
int
session_standby_admit(struct session *s, const struct td_frame *f,
    uint32_t *code, char *why, size_t len)
{
	struct td_standby st;

	*code = TD_ERR_RETRY;
	if (td_msg_unpack_standby(f, &st) == -1) {
		*code = TD_ERR_FATAL;
		snprintf(why, len, "malformed STANDBY");
		return -1;
	}
	if (s->resume_only) {
		snprintf(why, len, "%s", SESSION_FULL);
		return -1;
	}
	/* one certificate must not fill --max-sessions with standbys */
	if (standbytab_count(s->identity) >= s->cfg->max_standby_per_identity) {
		snprintf(why, len, "'%s' has %d standby connections "
		    "already (--max-standby-per-identity): come back later",
		    s->identity, s->cfg->max_standby_per_identity);
		return -1;
	}
	s->version = TD_PROTO_VERSION;
	s->phase = SESSION_STANDBY;
	snprintf(s->label, sizeof s->label, "standby %s (%s)", s->identity,
	    s->peer);
	/* it sends nothing now: the WELCOME goes first */
	s->sb = standbytab_add(s->identity, s->peer, &st, session_send_cb, s);
	return 0;
}

int
session_standby_frame(struct session *s, const struct td_frame *f,
    char *why, size_t len)
{
	struct td_answer a;
	struct td_armed d;
	struct td_triggered t;

	switch (f->type) {
	case TD_MSG_KEEPALIVE:
		return 0;
	case TD_MSG_ANSWER:
		if (td_msg_unpack_answer(f, &a) == -1) {
			snprintf(why, len, "malformed ANSWER");
			return -1;
		}
		standbytab_answer(s->sb, &a);
		return 0;
	case TD_MSG_ARMED:
		if (td_msg_unpack_armed(f, &d) == -1) {
			snprintf(why, len, "malformed ARMED");
			return -1;
		}
		standbytab_armed(s->sb, &d);
		return 0;
	case TD_MSG_TRIGGERED:
		if (td_msg_unpack_triggered(f, &t) == -1) {
			snprintf(why, len, "malformed TRIGGERED");
			return -1;
		}
		standbytab_triggered(s->sb, &t);
		return 0;
	default:
		snprintf(why, len, "%s from a standby agent",
		    td_msg_name(f->type));
		return -1;
	}
}
