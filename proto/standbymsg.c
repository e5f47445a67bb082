/*
 * standbymsg.c: the frames of standby agents (STANDBY, START, STOP,
 * ANSWER, GO; docs/tdproto.md "Standby"), encoded and decoded as pure code
 * with proto/msg.c's pieces (msgpack.h).
 */
#include <errno.h>
#include <string.h>

#include "buf.h"
#include "cursor.h"
#include "msgpack.h"
#include "tdproto.h"
#include "banned.h"

/* STANDBY: version, CPUs, host, kernel, clocks, recording; from version
   2 the allowance: events, buffer, duration. */
int
td_msg_pack_standby(struct td_buf *b, const struct td_standby *s)
{
	size_t at = td_msg_begin(b);
	int ok = 0;

	if (td_msg_put_u16(b, s->version) == -1 ||
	    td_msg_put_u32(b, s->ncpus) == -1 ||
	    td_msg_put_str(b, s->host, sizeof s->host) == -1 ||
	    td_msg_put_str(b, s->kernel, sizeof s->kernel) == -1 ||
	    td_msg_put_str(b, s->clocks, sizeof s->clocks) == -1 ||
	    td_msg_put_str(b, s->recording, sizeof s->recording) == -1)
		ok = -1;
	if (ok == 0 && s->version >= 2 &&
	    (td_msg_put_str(b, s->allow, sizeof s->allow) == -1 ||
	    td_msg_put_u32(b, s->max_buffer) == -1 ||
	    td_msg_put_u32(b, s->max_duration) == -1))
		ok = -1;
	return td_msg_end(b, at, TD_MSG_STANDBY, ok);
}

/* Decode STANDBY; a version above ours is read as ours (fields added at
   the end in later versions are not looked at). */
int
td_msg_unpack_standby(const struct td_frame *f, struct td_standby *s)
{
	struct td_cur c;

	memset(s, 0, sizeof *s);
	td_msg_cur_init(&c, f, TD_MSG_STANDBY);
	s->version = td_cur_be16(&c);
	s->ncpus = td_cur_be32(&c);
	td_msg_cur_str(&c, s->host, sizeof s->host);
	td_msg_cur_str(&c, s->kernel, sizeof s->kernel);
	td_msg_cur_str(&c, s->clocks, sizeof s->clocks);
	td_msg_cur_str(&c, s->recording, sizeof s->recording);
	if (s->version >= 2) {
		td_msg_cur_str(&c, s->allow, sizeof s->allow);
		s->max_buffer = td_cur_be32(&c);
		s->max_duration = td_cur_be32(&c);
	}
	if (!td_cur_bad(&c) && (s->version == 0 || s->ncpus == 0 ||
	    s->ncpus > TD_MAX_CPUS))
		td_cur_fail(&c);
	if (!td_cur_bad(&c) && s->version > TD_STANDBY_VERSION)
		return 0;
	return td_msg_cur_end(&c);
}

/* START: request, buffer, seconds, name, clock, events, filter. */
int
td_msg_pack_start(struct td_buf *b, const struct td_start *s)
{
	size_t at = td_msg_begin(b);
	int ok = 0;

	if (td_msg_put_u32(b, s->req) == -1 ||
	    td_msg_put_u32(b, s->buffer_kb) == -1 ||
	    td_msg_put_u32(b, s->seconds) == -1 ||
	    td_msg_put_str(b, s->name, sizeof s->name) == -1 ||
	    td_msg_put_str(b, s->clock, sizeof s->clock) == -1 ||
	    td_msg_put_str(b, s->events, sizeof s->events) == -1 ||
	    td_msg_put_str(b, s->filter, sizeof s->filter) == -1)
		ok = -1;
	return td_msg_end(b, at, TD_MSG_START, ok);
}

int
td_msg_unpack_start(const struct td_frame *f, struct td_start *s)
{
	struct td_cur c;

	memset(s, 0, sizeof *s);
	td_msg_cur_init(&c, f, TD_MSG_START);
	s->req = td_cur_be32(&c);
	s->buffer_kb = td_cur_be32(&c);
	s->seconds = td_cur_be32(&c);
	td_msg_cur_str(&c, s->name, sizeof s->name);
	td_msg_cur_str(&c, s->clock, sizeof s->clock);
	td_msg_cur_str(&c, s->events, sizeof s->events);
	td_msg_cur_str(&c, s->filter, sizeof s->filter);
	if (!td_cur_bad(&c) && s->events[0] == '\0')
		td_cur_fail(&c);
	return td_msg_cur_end(&c);
}

/* STOP and GO: the request number alone. */
static int
req_pack(struct td_buf *b, uint16_t type, uint32_t req)
{
	if (td_frame_header(b, type, 0, 4) == -1)
		return -1;
	return td_msg_put_u32(b, req);
}

static int
req_unpack(const struct td_frame *f, uint16_t type, uint32_t *req)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, type);
	*req = td_cur_be32(&c);
	return td_msg_cur_end(&c);
}

int
td_msg_pack_stop(struct td_buf *b, uint32_t req)
{
	return req_pack(b, TD_MSG_STOP, req);
}

int
td_msg_unpack_stop(const struct td_frame *f, uint32_t *req)
{
	return req_unpack(f, TD_MSG_STOP, req);
}

int
td_msg_pack_go(struct td_buf *b, uint32_t req)
{
	return req_pack(b, TD_MSG_GO, req);
}

int
td_msg_unpack_go(const struct td_frame *f, uint32_t *req)
{
	return req_unpack(f, TD_MSG_GO, req);
}

/* ANSWER: request, what, text (made printable: the peer logs it). */
int
td_msg_pack_answer(struct td_buf *b, const struct td_answer *a)
{
	return td_msg_pack_reply(b, TD_MSG_ANSWER, a->req, a->what, a->text,
	    '?');
}

int
td_msg_unpack_answer(const struct td_frame *f, struct td_answer *a)
{
	memset(a, 0, sizeof *a);
	return td_msg_unpack_reply(f, TD_MSG_ANSWER, &a->req, &a->what, a->text,
	    TD_ANSWER_STARTED, TD_ANSWER_READY);
}
