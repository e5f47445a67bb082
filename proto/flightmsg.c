/*
 * flightmsg.c: the flight recorder's frames (ARM, DISARM, SNAPSHOT, ARMED,
 * TRIGGERED; docs/tdproto.md "Flight recorder"), encoded and decoded as
 * pure code with proto/msg.c's pieces (msgpack.h).
 */
#include <errno.h>
#include <string.h>

#include "buf.h"
#include "cursor.h"
#include "msgpack.h"
#include "tdproto.h"
#include "banned.h"

/* A be64 as two be32s (msgpack.h has none of its own). */
static int
put_u64(struct td_buf *b, uint64_t v)
{
	if (td_msg_put_u32(b, (uint32_t)(v >> 32)) == -1)
		return -1;
	return td_msg_put_u32(b, (uint32_t)v);
}

/* ARM: request, buffer, name, events, filter, trigger. */
int
td_msg_pack_arm(struct td_buf *b, const struct td_arm *a)
{
	size_t at = td_msg_begin(b);
	int ok = 0;

	if (td_msg_put_u32(b, a->req) == -1 ||
	    td_msg_put_u32(b, a->buffer_kb) == -1 ||
	    td_msg_put_str(b, a->name, sizeof a->name) == -1 ||
	    td_msg_put_str(b, a->events, sizeof a->events) == -1 ||
	    td_msg_put_str(b, a->filter, sizeof a->filter) == -1 ||
	    td_msg_put_str(b, a->trigger, sizeof a->trigger) == -1)
		ok = -1;
	return td_msg_end(b, at, TD_MSG_ARM, ok);
}

/* Decode ARM; no events, or a trigger without " if ", is refused. */
int
td_msg_unpack_arm(const struct td_frame *f, struct td_arm *a)
{
	struct td_cur c;

	memset(a, 0, sizeof *a);
	td_msg_cur_init(&c, f, TD_MSG_ARM);
	a->req = td_cur_be32(&c);
	a->buffer_kb = td_cur_be32(&c);
	td_msg_cur_str(&c, a->name, sizeof a->name);
	td_msg_cur_str(&c, a->events, sizeof a->events);
	td_msg_cur_str(&c, a->filter, sizeof a->filter);
	td_msg_cur_str(&c, a->trigger, sizeof a->trigger);
	if (!td_cur_bad(&c) && (a->events[0] == '\0' ||
	    (a->trigger[0] != '\0' && strstr(a->trigger, " if ") == NULL)))
		td_cur_fail(&c);
	return td_msg_cur_end(&c);
}

int
td_msg_pack_disarm(struct td_buf *b, uint32_t req)
{
	if (td_frame_header(b, TD_MSG_DISARM, 0, 4) == -1)
		return -1;
	return td_msg_put_u32(b, req);
}

int
td_msg_unpack_disarm(const struct td_frame *f, uint32_t *req)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_DISARM);
	*req = td_cur_be32(&c);
	return td_msg_cur_end(&c);
}

/* SNAPSHOT: request, why, when, name, host. */
int
td_msg_pack_snapshot(struct td_buf *b, const struct td_snapshot *s)
{
	size_t at = td_msg_begin(b);
	int ok = 0;

	if (td_msg_put_u32(b, s->req) == -1 ||
	    td_msg_put_u16(b, s->why) == -1 ||
	    put_u64(b, s->when_ns) == -1 ||
	    td_msg_put_str(b, s->name, sizeof s->name) == -1 ||
	    td_msg_put_str(b, s->host, sizeof s->host) == -1)
		ok = -1;
	return td_msg_end(b, at, TD_MSG_SNAPSHOT, ok);
}

int
td_msg_unpack_snapshot(const struct td_frame *f, struct td_snapshot *s)
{
	struct td_cur c;

	memset(s, 0, sizeof *s);
	td_msg_cur_init(&c, f, TD_MSG_SNAPSHOT);
	s->req = td_cur_be32(&c);
	s->why = td_cur_be16(&c);
	s->when_ns = td_cur_be64(&c);
	td_msg_cur_str(&c, s->name, sizeof s->name);
	td_msg_cur_str(&c, s->host, sizeof s->host);
	if (!td_cur_bad(&c) && (s->why < TD_SNAP_OPERATOR ||
	    s->why > TD_SNAP_REARM))
		td_cur_fail(&c);
	return td_msg_cur_end(&c);
}

/* ARMED: request, what, text (made printable: the peer logs it). */
int
td_msg_pack_armed(struct td_buf *b, const struct td_armed *a)
{
	return td_msg_pack_reply(b, TD_MSG_ARMED, a->req, a->what, a->text,
	    ' ');
}

int
td_msg_unpack_armed(const struct td_frame *f, struct td_armed *a)
{
	memset(a, 0, sizeof *a);
	return td_msg_unpack_reply(f, TD_MSG_ARMED, &a->req, &a->what, a->text,
	    TD_ARMED_OK, TD_ARMED_WINDOW);
}

/* TRIGGERED: the trace clock, the real time, how late. */
int
td_msg_pack_triggered(struct td_buf *b, const struct td_triggered *t)
{
	if (td_frame_header(b, TD_MSG_TRIGGERED, 0, 20) == -1 ||
	    put_u64(b, t->clock_ns) == -1 || put_u64(b, t->real_ns) == -1)
		return -1;
	return td_msg_put_u32(b, t->late_ms);
}

int
td_msg_unpack_triggered(const struct td_frame *f, struct td_triggered *t)
{
	struct td_cur c;

	memset(t, 0, sizeof *t);
	td_msg_cur_init(&c, f, TD_MSG_TRIGGERED);
	t->clock_ns = td_cur_be64(&c);
	t->real_ns = td_cur_be64(&c);
	t->late_ms = td_cur_be32(&c);
	return td_msg_cur_end(&c);
}
