/*
 * standbymsg.c: the frames of standby agents (STANDBY, START, STOP,
 * ANSWER; docs/tdproto.md "Standby"), encoded and decoded as pure code
 * like proto/msg.c: strings are a be16 length and printable ASCII bytes.
 */
#include <errno.h>
#include <string.h>

#include "buf.h"
#include "cursor.h"
#include "tdproto.h"
#include "banned.h"

static int
sb_u16(struct td_buf *b, uint16_t v)
{
	uint8_t x[2] = { v >> 8, v };

	return td_buf_add(b, x, 2);
}

static int
sb_u32(struct td_buf *b, uint32_t v)
{
	uint8_t x[4] = { v >> 24, v >> 16, v >> 8, v };

	return td_buf_add(b, x, 4);
}

/* A string of at most cap - 1 printable bytes. */
static int
sb_str(struct td_buf *b, const char *s, size_t cap)
{
	size_t n = strlen(s), i;

	if (n >= cap || n > UINT16_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e) {
			errno = EINVAL;
			return -1;
		}
	if (sb_u16(b, (uint16_t)n) == -1)
		return -1;
	return td_buf_add(b, s, n);
}

/* Read a string into out[cap]: printable, shorter than cap. */
static void
sb_cur_str(struct td_cur *c, char *out, size_t cap)
{
	uint16_t n = td_cur_be16(c);
	const uint8_t *p;
	size_t i;

	out[0] = '\0';
	if (td_cur_bad(c))
		return;
	if ((size_t)n >= cap || (p = td_cur_take(c, n)) == NULL) {
		td_cur_fail(c);
		return;
	}
	for (i = 0; i < n; i++) {
		if (p[i] < 0x20 || p[i] > 0x7e) {
			td_cur_fail(c);
			return;
		}
		out[i] = (char)p[i];
	}
	out[n] = '\0';
}

/* Start a frame of type at b's end; its length is filled by sb_end(). */
static size_t
sb_begin(struct td_buf *b)
{
	size_t at = b->len;

	td_buf_add_zero(b, TD_FRAME_HEADER);
	return at;
}

static int
sb_end(struct td_buf *b, size_t at, uint16_t type, int ok)
{
	struct td_buf h;
	size_t len;

	if (ok == -1 || b->len < at + TD_FRAME_HEADER) {
		b->len = at;
		return -1;
	}
	len = b->len - at - TD_FRAME_HEADER;
	td_buf_init(&h, TD_FRAME_HEADER);
	if (td_frame_header(&h, type, 0, len) == -1) {
		td_buf_free(&h);
		b->len = at;
		return -1;
	}
	memcpy(b->data + at, h.data, TD_FRAME_HEADER);
	td_buf_free(&h);
	return 0;
}

static void
sb_cur_init(struct td_cur *c, const struct td_frame *f, uint16_t type)
{
	td_cur_init(c, f->payload, f->len);
	if (f->type != type)
		td_cur_fail(c);
}

static int
sb_cur_end(const struct td_cur *c)
{
	if (td_cur_end(c) == -1) {
		errno = EBADMSG;
		return -1;
	}
	return 0;
}

/* STANDBY: version, CPUs, host, kernel, clocks, recording. */
int
td_msg_pack_standby(struct td_buf *b, const struct td_standby *s)
{
	size_t at = sb_begin(b);
	int ok = 0;

	if (sb_u16(b, s->version) == -1 || sb_u32(b, s->ncpus) == -1 ||
	    sb_str(b, s->host, sizeof s->host) == -1 ||
	    sb_str(b, s->kernel, sizeof s->kernel) == -1 ||
	    sb_str(b, s->clocks, sizeof s->clocks) == -1 ||
	    sb_str(b, s->recording, sizeof s->recording) == -1)
		ok = -1;
	return sb_end(b, at, TD_MSG_STANDBY, ok);
}

/* Decode STANDBY; a version above ours is read as ours (fields added at
   the end in later versions are not looked at). */
int
td_msg_unpack_standby(const struct td_frame *f, struct td_standby *s)
{
	struct td_cur c;

	memset(s, 0, sizeof *s);
	sb_cur_init(&c, f, TD_MSG_STANDBY);
	s->version = td_cur_be16(&c);
	s->ncpus = td_cur_be32(&c);
	sb_cur_str(&c, s->host, sizeof s->host);
	sb_cur_str(&c, s->kernel, sizeof s->kernel);
	sb_cur_str(&c, s->clocks, sizeof s->clocks);
	sb_cur_str(&c, s->recording, sizeof s->recording);
	if (!td_cur_bad(&c) && (s->version == 0 || s->ncpus == 0 ||
	    s->ncpus > TD_MAX_CPUS))
		td_cur_fail(&c);
	if (!td_cur_bad(&c) && s->version > TD_STANDBY_VERSION)
		return 0;
	return sb_cur_end(&c);
}

/* START: request, buffer, seconds, name, clock, events, filter. */
int
td_msg_pack_start(struct td_buf *b, const struct td_start *s)
{
	size_t at = sb_begin(b);
	int ok = 0;

	if (sb_u32(b, s->req) == -1 || sb_u32(b, s->buffer_kb) == -1 ||
	    sb_u32(b, s->seconds) == -1 ||
	    sb_str(b, s->name, sizeof s->name) == -1 ||
	    sb_str(b, s->clock, sizeof s->clock) == -1 ||
	    sb_str(b, s->events, sizeof s->events) == -1 ||
	    sb_str(b, s->filter, sizeof s->filter) == -1)
		ok = -1;
	return sb_end(b, at, TD_MSG_START, ok);
}

int
td_msg_unpack_start(const struct td_frame *f, struct td_start *s)
{
	struct td_cur c;

	memset(s, 0, sizeof *s);
	sb_cur_init(&c, f, TD_MSG_START);
	s->req = td_cur_be32(&c);
	s->buffer_kb = td_cur_be32(&c);
	s->seconds = td_cur_be32(&c);
	sb_cur_str(&c, s->name, sizeof s->name);
	sb_cur_str(&c, s->clock, sizeof s->clock);
	sb_cur_str(&c, s->events, sizeof s->events);
	sb_cur_str(&c, s->filter, sizeof s->filter);
	if (!td_cur_bad(&c) && s->events[0] == '\0')
		td_cur_fail(&c);
	return sb_cur_end(&c);
}

int
td_msg_pack_stop(struct td_buf *b, uint32_t req)
{
	if (td_frame_header(b, TD_MSG_STOP, 0, 4) == -1)
		return -1;
	return sb_u32(b, req);
}

int
td_msg_unpack_stop(const struct td_frame *f, uint32_t *req)
{
	struct td_cur c;

	sb_cur_init(&c, f, TD_MSG_STOP);
	*req = td_cur_be32(&c);
	return sb_cur_end(&c);
}

int
td_msg_pack_go(struct td_buf *b, uint32_t req)
{
	if (td_frame_header(b, TD_MSG_GO, 0, 4) == -1)
		return -1;
	return sb_u32(b, req);
}

int
td_msg_unpack_go(const struct td_frame *f, uint32_t *req)
{
	struct td_cur c;

	sb_cur_init(&c, f, TD_MSG_GO);
	*req = td_cur_be32(&c);
	return sb_cur_end(&c);
}

/* ANSWER: request, what, text (made printable: the peer logs it). */
int
td_msg_pack_answer(struct td_buf *b, const struct td_answer *a)
{
	char t[TD_MAX_ERROR_LEN + 1];
	size_t at = sb_begin(b), i;
	int ok = 0;

	for (i = 0; a->text[i] != '\0' && i < TD_MAX_ERROR_LEN; i++)
		t[i] = a->text[i] < 0x20 || a->text[i] > 0x7e ? '?' :
		    a->text[i];
	t[i] = '\0';
	if (sb_u32(b, a->req) == -1 || sb_u16(b, a->what) == -1 ||
	    sb_str(b, t, sizeof t) == -1)
		ok = -1;
	return sb_end(b, at, TD_MSG_ANSWER, ok);
}

int
td_msg_unpack_answer(const struct td_frame *f, struct td_answer *a)
{
	struct td_cur c;

	memset(a, 0, sizeof *a);
	sb_cur_init(&c, f, TD_MSG_ANSWER);
	a->req = td_cur_be32(&c);
	a->what = td_cur_be16(&c);
	sb_cur_str(&c, a->text, sizeof a->text);
	if (!td_cur_bad(&c) && (a->what < TD_ANSWER_STARTED ||
	    a->what > TD_ANSWER_READY))
		td_cur_fail(&c);
	return sb_cur_end(&c);
}
