/*
 * fuzz-proto.c: libFuzzer target for the wire protocol (proto/msg.c).
 *
 * The input is what a peer writes on the stream: frames back to back.  It
 * is cut with td_frame_parse() as tdlisten and tdagent cut their input, and
 * the stream ends at the first bad header or incomplete frame, as a session
 * would.  Each complete frame is copied into a heap block of exactly its
 * size, so ASan catches any read past the frame, and handed to every
 * td_msg_unpack_*(), not only the one of its type.  Besides "no crash, no
 * leak, no undefined behaviour" these properties must hold:
 *
 *   - td_frame_parse() agrees with itself on a prefix of a frame: fewer than
 *     8 bytes ask for more with total 0, a cut payload asks for more and
 *     names the same total;
 *   - an unpacker refuses (-1, EBADMSG) a frame of another type;
 *   - what unpacks packs again to the very same payload (the encoding is
 *     canonical), and the packed frame unpacks to the same fields.  This is
 *     checked for every message, HELLO, WELCOME, DONE, ERROR, ACK,
 *     KEEPALIVE, PAGES_Z and SECTION_DATA_Z included (TSYNC_PROBE and TSYNC_REPLY are
 *     packed URGENT: payload only);
 *   - the content of every OPTION, decoded as TD_OPT_TD_GUEST (a guest's
 *     vCPU threads), is within bounds when it decodes and packs again to
 *     the same bytes;
 *   - a HELLO or WELCOME that unpacks carries no flag but TD_HELLO_RESUME
 *     or TD_WELCOME_RESUMED, and the v2 fields (flags, resume offset, idle
 *     timeout) survive the round trip.
 *
 * PAGES frames are decoded with the page size of the last good HELLO of the
 * stream (4096 before one), with the one size that makes the frame a single
 * page, and with the degenerate sizes 0 and 1.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "tdproto.h"
#include "fuzz.h"

/* Frame b (one packed message) must carry exactly the payload of f. */
static void
same_payload(struct td_buf *b, const struct td_frame *f)
{
	struct td_frame g;

	FUZZ_CHECK(td_frame_parse(b->data, b->len, &g) == 1);
	FUZZ_CHECK(g.total == b->len);
	FUZZ_CHECK(g.type == f->type);
	FUZZ_CHECK(g.flags == 0);
	FUZZ_CHECK(g.len == f->len);
	FUZZ_CHECK(g.len == 0 || memcmp(g.payload, f->payload, g.len) == 0);
}

/* Parse the packed frame in b again (for a second unpack). */
static void
reparse(struct td_buf *b, struct td_frame *g)
{
	FUZZ_CHECK(td_frame_parse(b->data, b->len, g) == 1);
}

static void
check_hello(const struct td_frame *f, struct td_buf *b, uint32_t *page_size)
{
	struct td_hello h, h2;
	struct td_frame g;

	if (td_msg_unpack_hello(f, &h) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_HELLO);
	FUZZ_CHECK(h.ncpus >= 1 && h.ncpus <= TD_MAX_CPUS);
	FUZZ_CHECK(h.page_size >= TD_MIN_PAGE_SIZE &&
	    h.page_size <= TD_MAX_PAGE_SIZE);
	FUZZ_CHECK(strlen(h.name) <= TD_MAX_NAME_LEN);
	FUZZ_CHECK(strlen(h.clock) <= TD_MAX_NAME_LEN && h.clock[0] != '\0');
	FUZZ_CHECK((h.flags & ~TD_HELLO_RESUME) == 0);
	*page_size = h.page_size;
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_hello(b, &h) == 0);
	same_payload(b, f);
	reparse(b, &g);
	FUZZ_CHECK(td_msg_unpack_hello(&g, &h2) == 0);
	FUZZ_CHECK(h2.version_min == h.version_min &&
	    h2.version_max == h.version_max && h2.ncpus == h.ncpus &&
	    h2.page_size == h.page_size && h2.long_size == h.long_size &&
	    h2.commit_size == h.commit_size &&
	    h2.big_endian == h.big_endian &&
	    h2.file_version == h.file_version &&
	    h2.recording_id == h.recording_id && h2.trace_id == h.trace_id &&
	    h2.flags == h.flags &&
	    strcmp(h2.name, h.name) == 0 && strcmp(h2.clock, h.clock) == 0);
}

static void
check_welcome(const struct td_frame *f, struct td_buf *b)
{
	struct td_welcome w, w2;
	struct td_frame g;

	if (td_msg_unpack_welcome(f, &w) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_WELCOME);
	FUZZ_CHECK(strlen(w.identity) <= TD_MAX_NAME_LEN);
	FUZZ_CHECK((w.flags & ~TD_WELCOME_RESUMED) == 0);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_welcome(b, &w) == 0);
	same_payload(b, f);
	reparse(b, &g);
	FUZZ_CHECK(td_msg_unpack_welcome(&g, &w2) == 0);
	FUZZ_CHECK(w2.version == w.version && w2.flags == w.flags &&
	    w2.tsync_interval == w.tsync_interval &&
	    w2.session_id == w.session_id &&
	    w2.resume_offset == w.resume_offset &&
	    w2.idle_timeout == w.idle_timeout &&
	    strcmp(w2.identity, w.identity) == 0);
}

static void
check_section(const struct td_frame *f, struct td_buf *b)
{
	uint16_t id, id2;
	struct td_frame g;

	if (td_msg_unpack_section(f, &id) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_SECTION);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_section(b, id) == 0);
	same_payload(b, f);
	reparse(b, &g);
	FUZZ_CHECK(td_msg_unpack_section(&g, &id2) == 0 && id2 == id);
}

/*
 * Any OPTION's content as TD_OPT_TD_GUEST (the listener decodes it): what
 * unpacks is within bounds and packs again to the same bytes.
 */
static void
check_guest(const uint8_t *p, size_t n, struct td_buf *b)
{
	static struct td_guest g, g2;
	uint32_t i;

	if (td_msg_unpack_guest(p, n, &g) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(g.nvcpus <= TD_MAX_CPUS && g.name[0] != '\0' &&
	    g.pid != 0);
	for (i = 0; i < g.nvcpus; i++)
		FUZZ_CHECK(g.vcpu[i].vcpu < TD_MAX_CPUS && g.vcpu[i].tid > 0 &&
		    g.vcpu[i].tsc_ratio != 0 && g.vcpu[i].tsc_frac < 64 &&
		    (i == 0 || g.vcpu[i].vcpu > g.vcpu[i - 1].vcpu));
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_guest(b, &g) == 0);
	FUZZ_CHECK(b->len == n && memcmp(b->data, p, n) == 0);
	FUZZ_CHECK(td_msg_unpack_guest(b->data, b->len, &g2) == 0);
	FUZZ_CHECK(g2.nvcpus == g.nvcpus && g2.flags == g.flags &&
	    memcmp(g2.vcpu, g.vcpu, g.nvcpus * sizeof *g.vcpu) == 0);
}

static void
check_option(const struct td_frame *f, struct td_buf *b)
{
	const uint8_t *p, *p2;
	size_t n, n2;
	uint16_t id, id2;
	struct td_frame g;

	if (td_msg_unpack_option(f, &id, &p, &n) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_OPTION);
	FUZZ_CHECK(n == f->len - 2 && p == f->payload + 2);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_option(b, id, p, n) == 0);
	same_payload(b, f);
	reparse(b, &g);
	FUZZ_CHECK(td_msg_unpack_option(&g, &id2, &p2, &n2) == 0);
	FUZZ_CHECK(id2 == id && n2 == n && memcmp(p2, p, n) == 0);
	check_guest(p, n, b);
}

static void
check_pages(const struct td_frame *f, struct td_buf *b, size_t page_size)
{
	struct td_pages pg, pg2;
	struct td_frame g;

	if (td_msg_unpack_pages(f, page_size, &pg) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_PAGES);
	FUZZ_CHECK(page_size != 0 && pg.count != 0);
	FUZZ_CHECK(pg.len == (size_t)pg.count * page_size);
	FUZZ_CHECK(pg.data == f->payload + 16 && pg.len == f->len - 16);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_pages_head(b, pg.cpu, pg.count, pg.first_seq,
	    page_size) == 0);
	FUZZ_CHECK(td_buf_add(b, pg.data, pg.len) == 0);
	same_payload(b, f);
	reparse(b, &g);
	FUZZ_CHECK(td_msg_unpack_pages(&g, page_size, &pg2) == 0);
	FUZZ_CHECK(pg2.cpu == pg.cpu && pg2.count == pg.count &&
	    pg2.first_seq == pg.first_seq && pg2.len == pg.len);
}

static void
check_pages_z(const struct td_frame *f, struct td_buf *b)
{
	struct td_pages_z pz, pz2;
	struct td_frame g;

	if (td_msg_unpack_pages_z(f, &pz) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_PAGES_Z);
	FUZZ_CHECK(pz.count >= 1 && pz.count <= TD_CHUNK_PAGES);
	FUZZ_CHECK(pz.codec == TD_WIRE_ZSTD || pz.codec == TD_WIRE_ZLIB);
	FUZZ_CHECK(pz.data == f->payload + 20 && pz.len == f->len - 20 &&
	    pz.len > 0);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_pages_z(b, &pz) == 0);
	same_payload(b, f);
	reparse(b, &g);
	FUZZ_CHECK(td_msg_unpack_pages_z(&g, &pz2) == 0);
	FUZZ_CHECK(pz2.cpu == pz.cpu && pz2.count == pz.count &&
	    pz2.first_seq == pz.first_seq && pz2.codec == pz.codec &&
	    pz2.len == pz.len && memcmp(pz2.data, pz.data, pz.len) == 0);
}

static void
check_section_z(const struct td_frame *f, struct td_buf *b)
{
	struct td_section_z sz, sz2;
	struct td_frame g;

	if (td_msg_unpack_section_z(f, &sz) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_SECTION_DATA_Z);
	FUZZ_CHECK(sz.raw_len >= 1 && sz.raw_len <= TD_SECTION_Z_RAW);
	FUZZ_CHECK(sz.codec == TD_WIRE_ZSTD || sz.codec == TD_WIRE_ZLIB);
	FUZZ_CHECK(sz.data == f->payload + 8 && sz.len == f->len - 8 &&
	    sz.len > 0);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_section_z(b, &sz) == 0);
	same_payload(b, f);
	reparse(b, &g);
	FUZZ_CHECK(td_msg_unpack_section_z(&g, &sz2) == 0);
	FUZZ_CHECK(sz2.codec == sz.codec && sz2.raw_len == sz.raw_len &&
	    sz2.len == sz.len && memcmp(sz2.data, sz.data, sz.len) == 0);
}

static void
check_end(const struct td_frame *f, struct td_buf *b)
{
	static struct td_end e, e2;
	struct td_frame g;

	if (td_msg_unpack_end(f, &e) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_END);
	FUZZ_CHECK(e.ncpus <= TD_MAX_CPUS && f->len == 4 + 8 * e.ncpus);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_end(b, &e) == 0);
	same_payload(b, f);
	reparse(b, &g);
	FUZZ_CHECK(td_msg_unpack_end(&g, &e2) == 0);
	FUZZ_CHECK(e2.ncpus == e.ncpus &&
	    memcmp(e2.pages, e.pages, e.ncpus * sizeof *e.pages) == 0);
}

static void
check_done(const struct td_frame *f, struct td_buf *b)
{
	struct td_done d, d2;
	struct td_frame g;

	memset(&d, 0, sizeof d);
	if (td_msg_unpack_done(f, &d) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_DONE);
	FUZZ_CHECK(strlen(d.path) < sizeof d.path);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_done(b, &d) == 0);
	same_payload(b, f);
	reparse(b, &g);
	memset(&d2, 0, sizeof d2);
	FUZZ_CHECK(td_msg_unpack_done(&g, &d2) == 0);
	FUZZ_CHECK(d2.file_size == d.file_size && d2.flags == d.flags &&
	    strcmp(d2.path, d.path) == 0);
}

static void
check_error(const struct td_frame *f, struct td_buf *b)
{
	struct td_error e, e2;
	struct td_frame g;

	memset(&e, 0, sizeof e);
	if (td_msg_unpack_error(f, &e) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_ERROR);
	FUZZ_CHECK(strlen(e.text) <= TD_MAX_ERROR_LEN);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_error(b, e.code, e.text) == 0);
	same_payload(b, f);
	reparse(b, &g);
	memset(&e2, 0, sizeof e2);
	FUZZ_CHECK(td_msg_unpack_error(&g, &e2) == 0);
	FUZZ_CHECK(e2.code == e.code && strcmp(e2.text, e.text) == 0);
}

static void
check_ack(const struct td_frame *f, struct td_buf *b)
{
	uint64_t off, off2;
	struct td_frame g;

	if (td_msg_unpack_ack(f, &off) == -1) {
		FUZZ_CHECK(errno == EBADMSG);
		return;
	}
	FUZZ_CHECK(f->type == TD_MSG_ACK && f->len == 8);
	td_buf_reset(b);
	FUZZ_CHECK(td_msg_pack_ack(b, off) == 0);
	same_payload(b, f);
	reparse(b, &g);
	FUZZ_CHECK(td_msg_unpack_ack(&g, &off2) == 0 && off2 == off);
}

/*
 * Time-sync messages.  Probes and replies are packed with the URGENT flag,
 * so only their payload is compared.
 */
static void
check_tsync(const struct td_frame *f, struct td_buf *b)
{
	struct td_tsync_probe p, p2;
	struct td_tsync_sample t, t2;
	struct td_frame g;

	if (td_msg_unpack_tsync_probe(f, &p) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_TSYNC_PROBE && p.ref_ns == 0);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_tsync_probe(b, &p) == 0);
		reparse(b, &g);
		FUZZ_CHECK(g.type == f->type && g.len == f->len &&
		    memcmp(g.payload, f->payload, f->len) == 0);
		FUZZ_CHECK(td_msg_unpack_tsync_probe(&g, &p2) == 0 &&
		    p2.round == p.round && p2.seq == p.seq);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_tsync_reply(f, &p) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_TSYNC_REPLY);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_tsync_reply(b, &p) == 0);
		reparse(b, &g);
		FUZZ_CHECK(g.type == f->type && g.len == f->len &&
		    memcmp(g.payload, f->payload, f->len) == 0);
		FUZZ_CHECK(td_msg_unpack_tsync_reply(&g, &p2) == 0 &&
		    p2.round == p.round && p2.seq == p.seq &&
		    p2.ref_ns == p.ref_ns);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_tsync_sample(f, &t) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_TSYNC_SAMPLE);
		FUZZ_CHECK(t.scaling != 0 && t.frac <= 63 && t.probes != 0);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_tsync_sample(b, &t) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_tsync_sample(&g, &t2) == 0);
		FUZZ_CHECK(t2.round == t.round && t2.probes == t.probes &&
		    t2.ts == t.ts && t2.offset == t.offset &&
		    t2.scaling == t.scaling && t2.frac == t.frac &&
		    t2.bound == t.bound && t2.rtt == t.rtt);
	} else
		FUZZ_CHECK(errno == EBADMSG);
}

/* The header cache's messages: canonical, ids in range, no repeats. */
static void
check_hcache(const struct td_frame *f, struct td_buf *b)
{
	struct td_section_offer o, o2;
	struct td_section_have h, h2;
	struct td_section_ref r, r2;
	struct td_frame g;
	uint16_t i;

	memset(&o, 0, sizeof o);	/* compared whole, padding too */
	memset(&o2, 0, sizeof o2);
	if (td_msg_unpack_section_offer(f, &o) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_SECTION_OFFER &&
		    o.count <= TD_HCACHE_OFFER_MAX &&
		    f->len == 2 + (size_t)o.count * TD_HCACHE_REF_LEN);
		for (i = 0; i < o.count; i++)
			FUZZ_CHECK(o.ref[i].id >= 16 && o.ref[i].id <= 21 &&
			    o.ref[i].length <= TD_MAX_SECTION_SIZE);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_section_offer(b, &o) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_section_offer(&g, &o2) == 0 &&
		    o2.count == o.count && memcmp(o2.ref, o.ref,
		    o.count * sizeof o.ref[0]) == 0);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_section_have(f, &h) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_SECTION_HAVE &&
		    f->len == 2 + (size_t)h.count);
		for (i = 0; i < h.count; i++)
			FUZZ_CHECK(h.have[i] <= 1);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_section_have(b, &h) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_section_have(&g, &h2) == 0 &&
		    h2.count == h.count &&
		    memcmp(h2.have, h.have, h.count) == 0);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	memset(&r, 0, sizeof r);
	memset(&r2, 0, sizeof r2);
	if (td_msg_unpack_section_ref(f, &r) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_SECTION_REF &&
		    r.id >= 16 && r.id <= 21 &&
		    r.length <= TD_MAX_SECTION_SIZE);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_section_ref(b, &r) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_section_ref(&g, &r2) == 0 &&
		    memcmp(&r, &r2, sizeof r) == 0);
	} else
		FUZZ_CHECK(errno == EBADMSG);
}

/* The standby frames: canonical, fields within their caps. */
static void
check_standby(const struct td_frame *f, struct td_buf *b)
{
	struct td_standby st, st2;
	struct td_start *r = malloc(2 * sizeof *r);
	struct td_answer a, a2;
	struct td_frame g;
	uint32_t req, req2;

	FUZZ_CHECK(r != NULL);
	if (td_msg_unpack_standby(f, &st) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_STANDBY && st.ncpus >= 1 &&
		    st.ncpus <= TD_MAX_CPUS && st.version >= 1);
		/* a later version's fields are not looked at */
		if (st.version == TD_STANDBY_VERSION) {
			td_buf_reset(b);
			FUZZ_CHECK(td_msg_pack_standby(b, &st) == 0);
			same_payload(b, f);
			reparse(b, &g);
			FUZZ_CHECK(td_msg_unpack_standby(&g, &st2) == 0 &&
			    memcmp(&st, &st2, sizeof st) == 0);
		}
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_start(f, &r[0]) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_START && r[0].events[0] != '\0');
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_start(b, &r[0]) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_start(&g, &r[1]) == 0 &&
		    memcmp(&r[0], &r[1], sizeof r[0]) == 0);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_stop(f, &req) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_STOP);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_stop(b, req) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_stop(&g, &req2) == 0 && req2 == req);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_go(f, &req) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_GO);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_go(b, req) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_go(&g, &req2) == 0 && req2 == req);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_answer(f, &a) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_ANSWER &&
		    a.what >= TD_ANSWER_STARTED &&
		    a.what <= TD_ANSWER_READY);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_answer(b, &a) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_answer(&g, &a2) == 0 &&
		    memcmp(&a, &a2, sizeof a) == 0);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	free(r);
}

/* The flight recorder's frames: canonical, fields within their caps. */
static void
check_flight(const struct td_frame *f, struct td_buf *b)
{
	struct td_arm *a = malloc(2 * sizeof *a);
	struct td_snapshot s, s2;
	struct td_armed d, d2;
	struct td_triggered t, t2;
	struct td_frame g;
	uint32_t req, req2;

	FUZZ_CHECK(a != NULL);
	if (td_msg_unpack_arm(f, &a[0]) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_ARM && a[0].events[0] != '\0');
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_arm(b, &a[0]) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_arm(&g, &a[1]) == 0 &&
		    memcmp(&a[0], &a[1], sizeof a[0]) == 0);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_disarm(f, &req) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_DISARM);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_disarm(b, req) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_disarm(&g, &req2) == 0 &&
		    req2 == req);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_snapshot(f, &s) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_SNAPSHOT &&
		    s.why >= TD_SNAP_OPERATOR && s.why <= TD_SNAP_REARM);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_snapshot(b, &s) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_snapshot(&g, &s2) == 0 &&
		    memcmp(&s, &s2, sizeof s) == 0);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_armed(f, &d) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_ARMED && d.what >= TD_ARMED_OK &&
		    d.what <= TD_ARMED_WINDOW);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_armed(b, &d) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_armed(&g, &d2) == 0 &&
		    memcmp(&d, &d2, sizeof d) == 0);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	if (td_msg_unpack_triggered(f, &t) == 0) {
		FUZZ_CHECK(f->type == TD_MSG_TRIGGERED);
		td_buf_reset(b);
		FUZZ_CHECK(td_msg_pack_triggered(b, &t) == 0);
		same_payload(b, f);
		reparse(b, &g);
		FUZZ_CHECK(td_msg_unpack_triggered(&g, &t2) == 0 &&
		    memcmp(&t, &t2, sizeof t) == 0);
	} else
		FUZZ_CHECK(errno == EBADMSG);
	free(a);
}

/* Messages without a decoder: packing the payload gives the same frame. */
static void
check_plain(const struct td_frame *f, struct td_buf *b)
{
	td_buf_reset(b);
	if (f->type == TD_MSG_SECTION_DATA) {
		FUZZ_CHECK(td_msg_pack_section_data(b, f->payload,
		    f->len) == 0);
		same_payload(b, f);
	} else if (f->type == TD_MSG_SECTION_END) {
		FUZZ_CHECK(td_msg_pack_section_end(b) == 0);
		same_payload(b, f);
	} else if (f->type == TD_MSG_KEEPALIVE) {
		FUZZ_CHECK(td_msg_pack_keepalive(b) == 0);
		same_payload(b, f);
	}
}

/* A prefix of a frame asks for more bytes and agrees on the total. */
static void
check_prefix(const uint8_t *p, const struct td_frame *f)
{
	struct td_frame g;
	size_t cut[4] = { 0, TD_FRAME_HEADER - 1, TD_FRAME_HEADER,
	    f->total - 1 };
	size_t i;

	for (i = 0; i < 4; i++) {
		if (cut[i] >= f->total)
			continue;
		FUZZ_CHECK(td_frame_parse(p, cut[i], &g) == 0);
		FUZZ_CHECK(g.total == (cut[i] < TD_FRAME_HEADER ? 0 :
		    f->total));
	}
}

/* Every decoder on one frame held in a block of its exact size. */
static void
check_frame(const uint8_t *p, const struct td_frame *f0, struct td_buf *b,
    uint32_t *page_size)
{
	struct td_frame f;
	uint8_t *copy;

	copy = malloc(f0->total);
	FUZZ_CHECK(copy != NULL);
	memcpy(copy, p, f0->total);
	FUZZ_CHECK(td_frame_parse(copy, f0->total, &f) == 1);
	FUZZ_CHECK(f.type == f0->type && f.flags == f0->flags &&
	    f.len == f0->len && f.total == f0->total);
	FUZZ_CHECK(f.payload == copy + TD_FRAME_HEADER);
	FUZZ_CHECK(strcmp(td_msg_name(f.type), "?") != 0);

	check_hello(&f, b, page_size);
	check_welcome(&f, b);
	check_section(&f, b);
	check_hcache(&f, b);
	check_standby(&f, b);
	check_flight(&f, b);
	check_option(&f, b);
	check_pages(&f, b, *page_size);
	if (f.len >= 16)
		check_pages(&f, b, f.len - 16);
	check_pages(&f, b, 0);
	check_pages(&f, b, 1);
	check_pages_z(&f, b);
	check_section_z(&f, b);
	check_end(&f, b);
	check_done(&f, b);
	check_error(&f, b);
	check_ack(&f, b);
	check_tsync(&f, b);
	check_plain(&f, b);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct td_frame f;
	struct td_buf b;
	uint32_t page_size = 4096;
	size_t pos = 0;
	int r;

	td_buf_init(&b, TD_FRAME_HEADER + TD_MAX_FRAME);
	while (pos < size) {
		r = td_frame_parse(data + pos, size - pos, &f);
		if (r == -1) {
			FUZZ_CHECK(errno == EBADMSG);
			break;
		}
		if (r == 0)
			break;
		FUZZ_CHECK(f.total == TD_FRAME_HEADER + f.len &&
		    f.total <= size - pos);
		check_prefix(data + pos, &f);
		check_frame(data + pos, &f, &b, &page_size);
		pos += f.total;
	}
	td_buf_free(&b);
	return 0;
}
