/*
 * msg.c: frames and messages of the tracedock protocol (see tdproto.h).
 */
#include <errno.h>
#include <string.h>

#include "buf.h"
#include "cursor.h"
#include "msgpack.h"
#include "tdproto.h"
#include "banned.h"

struct td_msg_info {
	uint16_t	 type;
	const char	*name;
	size_t		 min;
	size_t		 max;
};

static const struct td_msg_info td_msgs[] = {
#define TD_MSG_INFO(n, v, lo, hi) { v, #n, lo, hi },
	TD_MSG_TABLE(TD_MSG_INFO)
#undef TD_MSG_INFO
};

static const struct td_msg_info *
td_msg_info(uint16_t type)
{
	size_t i;

	for (i = 0; i < sizeof td_msgs / sizeof *td_msgs; i++)
		if (td_msgs[i].type == type)
			return &td_msgs[i];
	return NULL;
}

/*
 * A string: be16 length then bytes, no NUL.  It must fit out (cap bytes
 * including the NUL we add) and hold only printable ASCII: nothing a peer
 * sends can smuggle a control character into a log line.
 */
void
td_msg_cur_str(struct td_cur *c, char *out, size_t cap)
{
	uint16_t n = td_cur_be16(c);
	const uint8_t *p;
	size_t i;

	out[0] = '\0';
	if (td_cur_bad(c))
		return;
	if ((size_t)n >= cap) {
		td_cur_fail(c);
		return;
	}
	if ((p = td_cur_take(c, n)) == NULL)
		return;
	for (i = 0; i < n; i++) {
		if (p[i] < 0x20 || p[i] > 0x7e) {
			td_cur_fail(c);
			return;
		}
		out[i] = (char)p[i];
	}
	out[n] = '\0';
}

/* Finish a decode: every byte used, nothing out of bounds. */
int
td_msg_cur_end(const struct td_cur *c)
{
	if (td_cur_end(c) == -1) {
		errno = EBADMSG;
		return -1;
	}
	return 0;
}

/* msgpack.h: ANSWER's and ARMED's layout, request, what, text. */
int
td_msg_pack_reply(struct td_buf *b, uint16_t type, uint32_t req,
    uint16_t what, const char *text, char bad)
{
	char t[TD_MAX_ERROR_LEN + 1];
	size_t at = td_msg_begin(b), i;
	int ok = 0;

	for (i = 0; text[i] != '\0' && i < TD_MAX_ERROR_LEN; i++)
		t[i] = text[i] < 0x20 || text[i] > 0x7e ? bad : text[i];
	t[i] = '\0';
	if (td_msg_put_u32(b, req) == -1 || td_msg_put_u16(b, what) == -1 ||
	    td_msg_put_str(b, t, sizeof t) == -1)
		ok = -1;
	return td_msg_end(b, at, type, ok);
}

int
td_msg_unpack_reply(const struct td_frame *f, uint16_t type, uint32_t *req,
    uint16_t *what, char *text, uint16_t lo, uint16_t hi)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, type);
	*req = td_cur_be32(&c);
	*what = td_cur_be16(&c);
	td_msg_cur_str(&c, text, TD_MAX_ERROR_LEN + 1);
	if (!td_cur_bad(&c) && (*what < lo || *what > hi))
		td_cur_fail(&c);
	return td_msg_cur_end(&c);
}

/* A cursor over f's payload, bad from the start if f is not a type. */
void
td_msg_cur_init(struct td_cur *c, const struct td_frame *f, uint16_t type)
{
	td_cur_init(c, f->payload, f->len);
	if (f->type != type)
		td_cur_fail(c);
}

int
td_msg_put_u16(struct td_buf *b, uint16_t v)
{
	uint8_t x[2] = { v >> 8, v };

	return td_buf_add(b, x, 2);
}

int
td_msg_put_u32(struct td_buf *b, uint32_t v)
{
	uint8_t x[4] = { v >> 24, v >> 16, v >> 8, v };

	return td_buf_add(b, x, 4);
}

static int
put_u64(struct td_buf *b, uint64_t v)
{
	if (td_msg_put_u32(b, v >> 32) == -1)
		return -1;
	return td_msg_put_u32(b, (uint32_t)v);
}

int
td_msg_put_str(struct td_buf *b, const char *s, size_t cap)
{
	size_t n = strlen(s), i;

	if (n >= cap || n > UINT16_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e) {
			errno = EINVAL;	/* the peer would refuse it */
			return -1;
		}
	if (td_msg_put_u16(b, n) == -1)
		return -1;
	return td_buf_add(b, s, n);
}

/* Find a whole frame at the start of buf. */
int
td_frame_parse(const uint8_t *buf, size_t avail, struct td_frame *f)
{
	const struct td_msg_info *mi;
	uint32_t len;

	memset(f, 0, sizeof *f);
	if (avail < TD_FRAME_HEADER)
		return 0;
	len = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 |
	    (uint32_t)buf[2] << 8 | buf[3];
	f->type = (uint16_t)(buf[4] << 8 | buf[5]);
	f->flags = (uint16_t)(buf[6] << 8 | buf[7]);
	mi = td_msg_info(f->type);
	if (mi == NULL || len < mi->min || len > mi->max) {
		errno = EBADMSG;
		return -1;
	}
	f->len = len;
	f->total = TD_FRAME_HEADER + (size_t)len;
	if (avail < f->total)
		return 0;
	f->payload = buf + TD_FRAME_HEADER;
	return 1;
}

/* Name of a message type. */
const char *
td_msg_name(uint16_t type)
{
	const struct td_msg_info *mi = td_msg_info(type);

	return mi ? mi->name : "?";
}

/* Append a frame header. */
int
td_frame_header(struct td_buf *b, uint16_t type, uint16_t flags, size_t len)
{
	const struct td_msg_info *mi = td_msg_info(type);

	if (mi == NULL || len < mi->min || len > mi->max) {
		errno = EMSGSIZE;
		return -1;
	}
	if (td_msg_put_u32(b, (uint32_t)len) == -1 ||
	    td_msg_put_u16(b, type) == -1)
		return -1;
	return td_msg_put_u16(b, flags);
}

/*
 * Pack a message whose payload is built by the caller into b after a
 * placeholder header: remember where it starts, then patch the length.
 */
size_t
td_msg_begin(struct td_buf *b)
{
	size_t at = b->len;

	td_buf_add_zero(b, TD_FRAME_HEADER);
	return at;
}

int
td_msg_end(struct td_buf *b, size_t at, uint16_t type, int ok)
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

/* HELLO. */
int
td_msg_pack_hello(struct td_buf *b, const struct td_hello *h)
{
	size_t at = td_msg_begin(b);
	uint8_t bytes[4] = { h->long_size, h->commit_size, h->big_endian,
	    h->file_version };
	int ok = 0;

	if (td_msg_put_u16(b, h->version_min) == -1 ||
	    td_msg_put_u16(b, h->version_max) == -1 ||
	    td_msg_put_u32(b, h->ncpus) == -1 ||
	    td_msg_put_u32(b, h->page_size) == -1 ||
	    td_buf_add(b, bytes, 4) == -1 ||
	    put_u64(b, h->recording_id) == -1 ||
	    put_u64(b, h->trace_id) == -1 ||
	    td_msg_put_u16(b, h->flags) == -1 ||
	    td_msg_put_str(b, h->name, sizeof h->name) == -1 ||
	    td_msg_put_str(b, h->clock, sizeof h->clock) == -1)
		ok = -1;
	return td_msg_end(b, at, TD_MSG_HELLO, ok);
}

/* Decode HELLO; values are checked for sense, not only for size. */
int
td_msg_unpack_hello(const struct td_frame *f, struct td_hello *h)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_HELLO);
	memset(h, 0, sizeof *h);
	h->version_min = td_cur_be16(&c);
	h->version_max = td_cur_be16(&c);
	h->ncpus = td_cur_be32(&c);
	h->page_size = td_cur_be32(&c);
	h->long_size = td_cur_u8(&c);
	h->commit_size = td_cur_u8(&c);
	h->big_endian = td_cur_u8(&c);
	h->file_version = td_cur_u8(&c);
	h->recording_id = td_cur_be64(&c);
	h->trace_id = td_cur_be64(&c);
	h->flags = td_cur_be16(&c);
	td_msg_cur_str(&c, h->name, sizeof h->name);
	td_msg_cur_str(&c, h->clock, sizeof h->clock);
	if (td_msg_cur_end(&c) == -1)
		return -1;
	if (h->version_min > h->version_max || h->ncpus < 1 ||
	    h->ncpus > TD_MAX_CPUS || h->page_size < TD_MIN_PAGE_SIZE ||
	    h->page_size > TD_MAX_PAGE_SIZE ||
	    h->page_size > TD_MAX_FRAME - 16 ||
	    (uint64_t)h->ncpus * h->page_size > TD_MAX_CPU_SPAN ||
	    (h->long_size != 4 && h->long_size != 8) ||
	    (h->commit_size != 4 && h->commit_size != 8) ||
	    h->big_endian > 1 || (h->file_version != 0 &&
	    h->file_version != 6 && h->file_version != 7) ||
	    h->clock[0] == '\0' || (h->flags & ~TD_HELLO_RESUME) != 0) {
		errno = EBADMSG;
		return -1;
	}
	return 0;
}

/* WELCOME. */
int
td_msg_pack_welcome(struct td_buf *b, const struct td_welcome *w)
{
	size_t at = td_msg_begin(b);
	int ok = 0;

	if (td_msg_put_u16(b, w->version) == -1 ||
	    td_msg_put_u16(b, w->flags) == -1 ||
	    td_msg_put_u32(b, w->tsync_interval) == -1 ||
	    put_u64(b, w->session_id) == -1 ||
	    put_u64(b, w->resume_offset) == -1 ||
	    td_msg_put_u32(b, w->idle_timeout) == -1 ||
	    td_msg_put_str(b, w->identity, sizeof w->identity) == -1)
		ok = -1;
	if (ok == 0 && w->version >= 5 &&
	    (td_msg_put_u16(b, w->udp_port) == -1 ||
	    put_u64(b, w->udp_id) == -1 ||
	    td_buf_add(b, w->udp_key, sizeof w->udp_key) == -1 ||
	    put_u64(b, w->ref_ns) == -1))
		ok = -1;
	return td_msg_end(b, at, TD_MSG_WELCOME, ok);
}

/* Decode WELCOME. */
int
td_msg_unpack_welcome(const struct td_frame *f, struct td_welcome *w)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_WELCOME);
	memset(w, 0, sizeof *w);
	w->version = td_cur_be16(&c);
	w->flags = td_cur_be16(&c);
	w->tsync_interval = td_cur_be32(&c);
	w->session_id = td_cur_be64(&c);
	w->resume_offset = td_cur_be64(&c);
	w->idle_timeout = td_cur_be32(&c);
	td_msg_cur_str(&c, w->identity, sizeof w->identity);
	if (w->version >= 5) {
		const void *k;

		w->udp_port = td_cur_be16(&c);
		w->udp_id = td_cur_be64(&c);
		if ((k = td_cur_take(&c, sizeof w->udp_key)) != NULL)
			memcpy(w->udp_key, k, sizeof w->udp_key);
		w->ref_ns = td_cur_be64(&c);
	}
	if (td_msg_cur_end(&c) == -1)
		return -1;
	if ((w->flags & ~TD_WELCOME_RESUMED) != 0) {
		errno = EBADMSG;
		return -1;
	}
	return 0;
}

/* SECTION: a metadata section begins. */
int
td_msg_pack_section(struct td_buf *b, uint16_t id)
{
	if (td_frame_header(b, TD_MSG_SECTION, 0, 2) == -1)
		return -1;
	return td_msg_put_u16(b, id);
}

/* Decode SECTION. */
int
td_msg_unpack_section(const struct td_frame *f, uint16_t *id)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_SECTION);
	*id = td_cur_be16(&c);
	return td_msg_cur_end(&c);
}

/* SECTION_DATA: n bytes of the open section (n <= TD_MAX_FRAME). */
int
td_msg_pack_section_data(struct td_buf *b, const void *p, size_t n)
{
	if (td_frame_header(b, TD_MSG_SECTION_DATA, 0, n) == -1)
		return -1;
	return td_buf_add(b, p, n);
}

/* SECTION_END. */
int
td_msg_pack_section_end(struct td_buf *b)
{
	return td_frame_header(b, TD_MSG_SECTION_END, 0, 0);
}

/* OPTION: a trace.dat option record. */
int
td_msg_pack_option(struct td_buf *b, uint16_t id, const void *p, size_t n)
{
	if (n > TD_MAX_FRAME - 2) {
		errno = EMSGSIZE;
		return -1;
	}
	if (td_frame_header(b, TD_MSG_OPTION, 0, n + 2) == -1 ||
	    td_msg_put_u16(b, id) == -1)
		return -1;
	return td_buf_add(b, p, n);
}

/* Decode OPTION; p points into the frame. */
int
td_msg_unpack_option(const struct td_frame *f, uint16_t *id,
    const uint8_t **p, size_t *n)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_OPTION);
	*id = td_cur_be16(&c);
	*n = td_cur_left(&c);
	*p = td_cur_take(&c, td_cur_left(&c));
	return td_msg_cur_end(&c);
}

/* Header of PAGES. */
int
td_msg_pack_pages_head(struct td_buf *b, uint32_t cpu, uint32_t count,
    uint64_t first_seq, size_t page_size)
{
	size_t len = 16 + (size_t)count * page_size;

	if (count == 0 || td_frame_header(b, TD_MSG_PAGES, 0, len) == -1)
		return -1;
	if (td_msg_put_u32(b, cpu) == -1 || td_msg_put_u32(b, count) == -1)
		return -1;
	return put_u64(b, first_seq);
}

/* Decode PAGES: the payload must hold exactly count pages. */
int
td_msg_unpack_pages(const struct td_frame *f, size_t page_size,
    struct td_pages *pg)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_PAGES);
	pg->cpu = td_cur_be32(&c);
	pg->count = td_cur_be32(&c);
	pg->first_seq = td_cur_be64(&c);
	if (td_cur_bad(&c) || page_size == 0 || pg->count == 0 ||
	    td_cur_left(&c) / page_size != pg->count || td_cur_left(&c) % page_size != 0) {
		errno = EBADMSG;
		return -1;
	}
	pg->len = td_cur_left(&c);
	pg->data = td_cur_take(&c, td_cur_left(&c));
	return td_msg_cur_end(&c);
}

int
td_msg_pack_section_z(struct td_buf *b, const struct td_section_z *sz)
{
	size_t at = td_msg_begin(b);
	int ok = 0;

	if (sz->raw_len == 0 || sz->raw_len > TD_SECTION_Z_RAW ||
	    sz->len == 0 ||
	    (sz->codec != TD_WIRE_ZSTD && sz->codec != TD_WIRE_ZLIB) ||
	    td_msg_put_u16(b, sz->codec) == -1 || td_msg_put_u16(b, 0) == -1 ||
	    td_msg_put_u32(b, sz->raw_len) == -1 ||
	    td_buf_add(b, sz->data, sz->len) == -1)
		ok = -1;
	return td_msg_end(b, at, TD_MSG_SECTION_DATA_Z, ok);
}

int
td_msg_unpack_section_z(const struct td_frame *f, struct td_section_z *sz)
{
	struct td_cur c;
	uint16_t zero;

	td_msg_cur_init(&c, f, TD_MSG_SECTION_DATA_Z);
	sz->codec = td_cur_be16(&c);
	zero = td_cur_be16(&c);
	sz->raw_len = td_cur_be32(&c);
	if (td_cur_bad(&c) || zero != 0 || sz->raw_len == 0 ||
	    sz->raw_len > TD_SECTION_Z_RAW || td_cur_left(&c) == 0 ||
	    (sz->codec != TD_WIRE_ZSTD && sz->codec != TD_WIRE_ZLIB)) {
		errno = EBADMSG;
		return -1;
	}
	sz->len = td_cur_left(&c);
	sz->data = td_cur_take(&c, td_cur_left(&c));
	return td_msg_cur_end(&c);
}

/* One section reference: be16 id, be16 0, be64 length, the SHA-256. */
static int
put_ref(struct td_buf *b, const struct td_section_ref *r)
{
	if (r->id < 16 || r->id > 21 || r->length > TD_MAX_SECTION_SIZE ||
	    td_msg_put_u16(b, r->id) == -1 || td_msg_put_u16(b, 0) == -1 ||
	    put_u64(b, r->length) == -1)
		return -1;
	return td_buf_add(b, r->sha, sizeof r->sha);
}

static void
cur_ref(struct td_cur *c, struct td_section_ref *r)
{
	const uint8_t *p;

	r->id = td_cur_be16(c);
	if (td_cur_be16(c) != 0)
		td_cur_fail(c);
	r->length = td_cur_be64(c);
	if ((p = td_cur_take(c, sizeof r->sha)) != NULL)
		memcpy(r->sha, p, sizeof r->sha);
	if (r->id < 16 || r->id > 21 || r->length > TD_MAX_SECTION_SIZE)
		td_cur_fail(c);
}

/* SECTION_OFFER: be16 count, then count references of distinct ids. */
int
td_msg_pack_section_offer(struct td_buf *b, const struct td_section_offer *o)
{
	size_t at = td_msg_begin(b);
	int ok = 0;
	uint16_t i;

	if (o->count > TD_HCACHE_OFFER_MAX || td_msg_put_u16(b, o->count) == -1)
		ok = -1;
	for (i = 0; ok == 0 && i < o->count; i++)
		if (put_ref(b, &o->ref[i]) == -1)
			ok = -1;
	return td_msg_end(b, at, TD_MSG_SECTION_OFFER, ok);
}

int
td_msg_unpack_section_offer(const struct td_frame *f,
    struct td_section_offer *o)
{
	struct td_cur c;
	uint16_t i, j;

	td_msg_cur_init(&c, f, TD_MSG_SECTION_OFFER);
	o->count = td_cur_be16(&c);
	if (o->count > TD_HCACHE_OFFER_MAX)
		td_cur_fail(&c);
	for (i = 0; !td_cur_bad(&c) && i < o->count; i++) {
		cur_ref(&c, &o->ref[i]);
		for (j = 0; j < i; j++)
			if (o->ref[j].id == o->ref[i].id)
				td_cur_fail(&c);
	}
	return td_msg_cur_end(&c);
}

/* SECTION_HAVE: be16 count, then one byte per offered section, 0 or 1. */
int
td_msg_pack_section_have(struct td_buf *b, const struct td_section_have *h)
{
	size_t at = td_msg_begin(b);
	int ok = 0;
	uint16_t i;

	if (h->count > TD_HCACHE_OFFER_MAX || td_msg_put_u16(b, h->count) == -1)
		ok = -1;
	for (i = 0; ok == 0 && i < h->count; i++)
		if (h->have[i] > 1 || td_buf_add(b, &h->have[i], 1) == -1)
			ok = -1;
	return td_msg_end(b, at, TD_MSG_SECTION_HAVE, ok);
}

int
td_msg_unpack_section_have(const struct td_frame *f,
    struct td_section_have *h)
{
	struct td_cur c;
	uint16_t i;

	td_msg_cur_init(&c, f, TD_MSG_SECTION_HAVE);
	h->count = td_cur_be16(&c);
	if (h->count > TD_HCACHE_OFFER_MAX)
		td_cur_fail(&c);
	for (i = 0; !td_cur_bad(&c) && i < h->count; i++)
		if ((h->have[i] = td_cur_u8(&c)) > 1)
			td_cur_fail(&c);
	return td_msg_cur_end(&c);
}

/* SECTION_REF: a whole section, by content (one reference). */
int
td_msg_pack_section_ref(struct td_buf *b, const struct td_section_ref *r)
{
	size_t at = td_msg_begin(b);

	return td_msg_end(b, at, TD_MSG_SECTION_REF, put_ref(b, r));
}

int
td_msg_unpack_section_ref(const struct td_frame *f, struct td_section_ref *r)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_SECTION_REF);
	cur_ref(&c, r);
	return td_msg_cur_end(&c);
}

int
td_msg_pack_pages_z(struct td_buf *b, const struct td_pages_z *pz)
{
	size_t at = td_msg_begin(b);
	int ok = 0;

	if (pz->count == 0 || pz->count > TD_CHUNK_PAGES || pz->len == 0 ||
	    (pz->codec != TD_WIRE_ZSTD && pz->codec != TD_WIRE_ZLIB) ||
	    td_msg_put_u32(b, pz->cpu) == -1 ||
	    td_msg_put_u32(b, pz->count) == -1 ||
	    put_u64(b, pz->first_seq) == -1 ||
	    td_msg_put_u16(b, pz->codec) == -1 ||
	    td_msg_put_u16(b, 0) == -1 ||
	    td_buf_add(b, pz->data, pz->len) == -1)
		ok = -1;
	return td_msg_end(b, at, TD_MSG_PAGES_Z, ok);
}

int
td_msg_unpack_pages_z(const struct td_frame *f, struct td_pages_z *pz)
{
	struct td_cur c;
	uint16_t zero;

	td_msg_cur_init(&c, f, TD_MSG_PAGES_Z);
	pz->cpu = td_cur_be32(&c);
	pz->count = td_cur_be32(&c);
	pz->first_seq = td_cur_be64(&c);
	pz->codec = td_cur_be16(&c);
	zero = td_cur_be16(&c);
	if (td_cur_bad(&c) || pz->count == 0 || pz->count > TD_CHUNK_PAGES ||
	    zero != 0 || td_cur_left(&c) == 0 ||
	    (pz->codec != TD_WIRE_ZSTD && pz->codec != TD_WIRE_ZLIB)) {
		errno = EBADMSG;
		return -1;
	}
	pz->len = td_cur_left(&c);
	pz->data = td_cur_take(&c, td_cur_left(&c));
	return td_msg_cur_end(&c);
}

/*
 * The 16 bytes that open a PAGES payload of len bytes, for a reader that
 * takes the pages as they arrive: the same checks as td_msg_unpack_pages(),
 * with data NULL.
 */
int
td_msg_unpack_pages_head(const uint8_t *p, size_t len, size_t page_size,
    struct td_pages *pg)
{
	struct td_frame f = { .type = TD_MSG_PAGES, .payload = p,
	    .len = TD_PAGES_HEAD, .total = TD_FRAME_HEADER + TD_PAGES_HEAD };
	struct td_cur c;

	td_msg_cur_init(&c, &f, TD_MSG_PAGES);
	pg->cpu = td_cur_be32(&c);
	pg->count = td_cur_be32(&c);
	pg->first_seq = td_cur_be64(&c);
	if (td_cur_bad(&c) || len < TD_PAGES_HEAD || page_size == 0 ||
	    pg->count == 0 || (len - TD_PAGES_HEAD) / page_size != pg->count ||
	    (len - TD_PAGES_HEAD) % page_size != 0) {
		errno = EBADMSG;
		return -1;
	}
	pg->len = len - TD_PAGES_HEAD;
	pg->data = NULL;
	return 0;
}

/* END. */
int
td_msg_pack_end(struct td_buf *b, const struct td_end *e)
{
	size_t at = td_msg_begin(b);
	uint32_t i;
	int ok = 0;

	if (e->ncpus > TD_MAX_CPUS || td_msg_put_u32(b, e->ncpus) == -1)
		ok = -1;
	for (i = 0; ok == 0 && i < e->ncpus; i++)
		if (put_u64(b, e->pages[i]) == -1)
			ok = -1;
	return td_msg_end(b, at, TD_MSG_END, ok);
}

/* Decode END. */
int
td_msg_unpack_end(const struct td_frame *f, struct td_end *e)
{
	struct td_cur c;
	uint32_t i;

	td_msg_cur_init(&c, f, TD_MSG_END);
	e->ncpus = td_cur_be32(&c);
	if (e->ncpus > TD_MAX_CPUS) {
		errno = EBADMSG;
		return -1;
	}
	for (i = 0; i < e->ncpus; i++)
		e->pages[i] = td_cur_be64(&c);
	return td_msg_cur_end(&c);
}

/* DONE. */
int
td_msg_pack_done(struct td_buf *b, const struct td_done *d)
{
	size_t at = td_msg_begin(b);
	int ok = 0;

	if (put_u64(b, d->file_size) == -1 ||
	    td_msg_put_u16(b, d->flags) == -1 ||
	    td_msg_put_str(b, d->path, sizeof d->path) == -1)
		ok = -1;
	return td_msg_end(b, at, TD_MSG_DONE, ok);
}

/* Decode DONE. */
int
td_msg_unpack_done(const struct td_frame *f, struct td_done *d)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_DONE);
	d->file_size = td_cur_be64(&c);
	d->flags = td_cur_be16(&c);
	td_msg_cur_str(&c, d->path, sizeof d->path);
	return td_msg_cur_end(&c);
}

/* ERROR. */
int
td_msg_pack_error(struct td_buf *b, uint32_t code, const char *text)
{
	char t[TD_MAX_ERROR_LEN + 1];
	size_t at = td_msg_begin(b), i;
	int ok = 0;

	/* keep it printable and short: the peer logs it */
	for (i = 0; text[i] != '\0' && i < TD_MAX_ERROR_LEN; i++)
		t[i] = text[i] < 0x20 || text[i] > 0x7e ? '?' : text[i];
	t[i] = '\0';
	if (td_msg_put_u32(b, code) == -1 ||
	    td_msg_put_str(b, t, sizeof t) == -1)
		ok = -1;
	return td_msg_end(b, at, TD_MSG_ERROR, ok);
}

/* Decode ERROR. */
int
td_msg_unpack_error(const struct td_frame *f, struct td_error *e)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_ERROR);
	e->code = td_cur_be32(&c);
	td_msg_cur_str(&c, e->text, sizeof e->text);
	return td_msg_cur_end(&c);
}

/* TSYNC_PROBE (urgent). */
int
td_msg_pack_tsync_probe(struct td_buf *b, const struct td_tsync_probe *p)
{
	if (td_frame_header(b, TD_MSG_TSYNC_PROBE, TD_FRAME_URGENT, 8) == -1 ||
	    td_msg_put_u32(b, p->round) == -1)
		return -1;
	return td_msg_put_u32(b, p->seq);
}

/* Decode TSYNC_PROBE. */
int
td_msg_unpack_tsync_probe(const struct td_frame *f, struct td_tsync_probe *p)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_TSYNC_PROBE);
	p->round = td_cur_be32(&c);
	p->seq = td_cur_be32(&c);
	p->ref_ns = 0;
	return td_msg_cur_end(&c);
}

/* TSYNC_REPLY (urgent). */
int
td_msg_pack_tsync_reply(struct td_buf *b, const struct td_tsync_probe *p)
{
	if (td_frame_header(b, TD_MSG_TSYNC_REPLY, TD_FRAME_URGENT,
	    16) == -1 || td_msg_put_u32(b, p->round) == -1 ||
	    td_msg_put_u32(b, p->seq) == -1)
		return -1;
	return put_u64(b, p->ref_ns);
}

/* Decode TSYNC_REPLY. */
int
td_msg_unpack_tsync_reply(const struct td_frame *f, struct td_tsync_probe *p)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_TSYNC_REPLY);
	p->round = td_cur_be32(&c);
	p->seq = td_cur_be32(&c);
	p->ref_ns = td_cur_be64(&c);
	return td_msg_cur_end(&c);
}

/* TSYNC_SAMPLE. */
int
td_msg_pack_tsync_sample(struct td_buf *b, const struct td_tsync_sample *s)
{
	if (td_frame_header(b, TD_MSG_TSYNC_SAMPLE, 0, 52) == -1 ||
	    td_msg_put_u32(b, s->round) == -1 ||
	    td_msg_put_u32(b, s->probes) == -1 ||
	    put_u64(b, s->ts) == -1 || put_u64(b, (uint64_t)s->offset) == -1 ||
	    put_u64(b, s->scaling) == -1 || td_msg_put_u32(b, s->frac) == -1 ||
	    put_u64(b, s->bound) == -1)
		return -1;
	return put_u64(b, s->rtt);
}

/* Decode TSYNC_SAMPLE; a zero scaling or a frac past 63 is refused. */
int
td_msg_unpack_tsync_sample(const struct td_frame *f, struct td_tsync_sample *s)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_TSYNC_SAMPLE);
	s->round = td_cur_be32(&c);
	s->probes = td_cur_be32(&c);
	s->ts = td_cur_be64(&c);
	s->offset = (int64_t)td_cur_be64(&c);
	s->scaling = td_cur_be64(&c);
	s->frac = td_cur_be32(&c);
	s->bound = td_cur_be64(&c);
	s->rtt = td_cur_be64(&c);
	if (td_msg_cur_end(&c) == -1)
		return -1;
	if (s->scaling == 0 || s->frac > 63 || s->probes == 0) {
		errno = EBADMSG;
		return -1;
	}
	return 0;
}

int
td_msg_pack_ack(struct td_buf *b, uint64_t offset)
{
	if (td_frame_header(b, TD_MSG_ACK, 0, 8) == -1)
		return -1;
	return put_u64(b, offset);
}

int
td_msg_unpack_ack(const struct td_frame *f, uint64_t *offset)
{
	struct td_cur c;

	td_msg_cur_init(&c, f, TD_MSG_ACK);
	*offset = td_cur_be64(&c);
	return td_msg_cur_end(&c);
}

int
td_msg_pack_keepalive(struct td_buf *b)
{
	return td_frame_header(b, TD_MSG_KEEPALIVE, 0, 0);
}

/* CMDLINES: the text as it is (the frame's length says how long). */
int
td_msg_pack_cmdlines(struct td_buf *b, const void *p, size_t n)
{
	if (n > TD_MAX_FRAME) {
		errno = EMSGSIZE;
		return -1;
	}
	if (td_frame_header(b, TD_MSG_CMDLINES, 0, n) == -1)
		return -1;
	return n == 0 ? 0 : td_buf_add(b, p, n);
}

/*
 * TD_OPT_TD_GUEST's content: version, flags, vCPU count, QEMU's pid, the
 * name, the vCPUs {index, thread}, and with TD_GUEST_KVM the host's
 * TSC2NSEC and each vCPU's TSC offset, ratio and fraction bits.
 */
int
td_msg_pack_guest(struct td_buf *b, const struct td_guest *g)
{
	uint32_t i;
	int ok;

	if (g->nvcpus > TD_MAX_CPUS) {
		errno = EINVAL;
		return -1;
	}
	ok = td_buf_add(b, (uint8_t[]){ TD_GUEST_VERSION, g->flags }, 2) == 0 &&
	    td_msg_put_u16(b, (uint16_t)g->nvcpus) == 0 &&
	    td_msg_put_u32(b, g->pid) == 0 &&
	    td_msg_put_str(b, g->name, sizeof g->name) == 0;
	for (i = 0; ok && i < g->nvcpus; i++)
		ok = td_msg_put_u32(b, g->vcpu[i].vcpu) == 0 &&
		    td_msg_put_u32(b, (uint32_t)g->vcpu[i].tid) == 0;
	if (ok && (g->flags & TD_GUEST_KVM))
		ok = td_msg_put_u32(b, g->tsc_mult) == 0 &&
		    td_msg_put_u32(b, g->tsc_shift) == 0;
	for (i = 0; ok && (g->flags & TD_GUEST_KVM) && i < g->nvcpus; i++)
		ok = put_u64(b, (uint64_t)g->vcpu[i].tsc_offset) == 0 &&
		    put_u64(b, g->vcpu[i].tsc_ratio) == 0 &&
		    td_msg_put_u32(b, g->vcpu[i].tsc_frac) == 0;
	return ok ? 0 : -1;
}

int
td_msg_unpack_guest(const uint8_t *p, size_t n, struct td_guest *g)
{
	struct td_guest_vcpu *v;
	struct td_cur c;
	uint32_t i;

	td_cur_init(&c, p, n);
	if (td_cur_u8(&c) != TD_GUEST_VERSION)
		td_cur_fail(&c);
	g->flags = td_cur_u8(&c);
	g->nvcpus = td_cur_be16(&c);
	g->pid = td_cur_be32(&c);
	td_msg_cur_str(&c, g->name, sizeof g->name);
	g->tsc_mult = g->tsc_shift = 0;
	if ((g->flags & ~(TD_GUEST_KVM | TD_GUEST_GONE)) != 0 ||
	    g->nvcpus > TD_MAX_CPUS || g->pid == 0 || g->name[0] == '\0' ||
	    (g->nvcpus == 0) != ((g->flags & TD_GUEST_GONE) != 0) ||
	    (g->flags & (TD_GUEST_KVM | TD_GUEST_GONE)) ==
	    (TD_GUEST_KVM | TD_GUEST_GONE) ||
	    (size_t)g->nvcpus * 8 > td_cur_left(&c))
		td_cur_fail(&c);
	for (i = 0; !td_cur_bad(&c) && i < g->nvcpus; i++) {
		v = &g->vcpu[i];
		v->vcpu = td_cur_be32(&c);
		v->tid = (int32_t)td_cur_be32(&c);
		v->tsc_offset = 0;
		v->tsc_ratio = 1;
		v->tsc_frac = 0;
		if (v->vcpu >= TD_MAX_CPUS || v->tid <= 0 ||
		    (i > 0 && v->vcpu <= g->vcpu[i - 1].vcpu))
			td_cur_fail(&c);
	}
	if (g->flags & TD_GUEST_KVM) {
		g->tsc_mult = td_cur_be32(&c);
		g->tsc_shift = td_cur_be32(&c);
		if (g->tsc_mult == 0 || g->tsc_shift >= 64)
			td_cur_fail(&c);
	}
	for (i = 0; (g->flags & TD_GUEST_KVM) && !td_cur_bad(&c) &&
	    i < g->nvcpus; i++) {
		v = &g->vcpu[i];
		v->tsc_offset = (int64_t)td_cur_be64(&c);
		v->tsc_ratio = td_cur_be64(&c);
		v->tsc_frac = td_cur_be32(&c);
		if (v->tsc_ratio == 0 || v->tsc_frac >= 64)
			td_cur_fail(&c);
	}
	return td_msg_cur_end(&c);
}
