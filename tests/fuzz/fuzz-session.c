/*
 * fuzz-session.c: libFuzzer target for tdlisten's handling of an agent's
 * byte streams: listener/producers/session.c (the tdproto producer) against
 * the real recording, registry, checkpoint, timesync, finished, output and
 * budget code and the trace.dat writer. Nothing is faked: session.c knows no
 * socket and no event loop, and the target does what agentconn.c does.
 *
 * A connection's bytes arrive in pieces of 1 + size % 4093 bytes; the
 * session gets what session_want() asks for (a heap copy of exactly that,
 * so ASan sees a read past it) after session_account(), its output is
 * collected after every call and its verdict acted on (CLOSE: the ERROR
 * goes out, the connection ends; QUIET: it ends; PAUSE: the ERROR goes
 * out, then session_lost(s, NULL)).  Output "drains" after every piece for
 * even sizes, only when the connection ends for odd ones (frames after END
 * meet the session before DONE went out; a PAUSE's ERROR is still on its
 * way when tdlisten restarts).
 *
 * An input is up to 8 connections of one agent, each after FUZZ_CONN_SEP
 * and a byte saying how the one before ends (fuzz.h): EOF, the idle
 * timeout ("no HELLO in time" before HELLO), kept open (the next one takes
 * over), tdlisten restarts (session_shutdown() of each, then
 * recording_leave_all(), finished_load(), recording_recover_all()), or EOF
 * and every resume deadline passes (registry_expired(UINT64_MAX),
 * recording_close()), as at the end.  One recording per input (a new HELLO
 * once there is one ends the input), under its own identity.  The first
 * HELLO sets tdlisten's options: file_version 6: --file-version 6, else
 * codec recording_id % 3 (none, zstd, zlib); (recording_id / 3) % 2:
 * --tsync-interval -1; (recording_id / 6) % 2: --resume-wait 0; trace_id
 * bit 0: a checkpoint tick after every piece, bit 1: --quota 1 + (trace_id
 * >> 32) % 2^24, bit 2: a session memory budget of 4 KiB + ((trace_id >>
 * 8) % 2^16) * 64, bit 4: TD_FD_RESERVE + (trace_id >> 24) % 8 descriptors.
 *
 * A model of the recording follows the frames the sessions took in, is
 * copied when the recording's acknowledged position moves (a checkpoint)
 * and taken back when the recording goes back to it.  Properties, besides
 * no crash, leak, UB or fatal():
 *   - the recording's position is the model's; checkpoints are taken
 *     there, never in a frame; rewinds go back to the last one;
 *   - every reply parses: WELCOME first, RESUMED exactly when asked, at
 *     the recording's position (a finished one's end); ACKs grow and never
 *     pass what was taken in; nothing after DONE or ERROR; END is taken
 *     only with every section and page there, and then always (unless the
 *     agent's options took more than half of TD_MAX_OPTIONS_TOTAL);
 *   - at the end no recording, budget or descriptor is left; DIR holds
 *     DIR/<identity>/ and that at most one file: complete (as DONE says)
 *     or NAME.incomplete.dat exactly when the sections up to PRINTK came;
 *   - the file reads back with tdread to the model: sections, the agent's
 *     options (first 16), every CPU's pages; a finished file has one
 *     TRACEID, HELLO's (unless 0), and no guest declaration (0x7467, which
 *     the listener decodes and keeps to itself); the listener's TIME_SHIFT has
 *     trace-cmd's layout, DATE and our tsync text end in NUL (v6: unless
 *     tdread cannot parse the agent's sections).
 * Not modelled: a pause inside session_input() with --resume-wait 0
 * (rewound and closed in one call) needs a checkpoint every 4 MiB (inputs
 * are smaller) or a full disk; session_account() and session_tick() pause.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget.h"
#include "buf.h"
#include "compress.h"
#include "finished.h"
#include "listener.h"
#include "log.h"
#include "recording.h"
#include "registry.h"
#include "session.h"
#include "standbytab.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "timesync.h"
#include "fuzz.h"

#define MAX_CONNS	8
#define NSECT		(TD_OPT_CMDLINES + 1)
#define MAX_OPTS	16
#define FINISHED_FILE	".tdlisten-finished"

/* What the recording holds, as the model has it. */
struct state {
	uint64_t	 pos;		/* bytes of the stream taken in */
	int		 open;		/* the open section, or -1 */
	uint64_t	 open_hash;
	uint64_t	 open_len;
	bool		 done[NSECT];
	uint64_t	 hash[NSECT];
	uint64_t	 len[NSECT];
	struct {
		uint16_t id;
		size_t	 len;
		uint64_t hash;
	}		 opts[MAX_OPTS];
	size_t		 nopts;
	uint64_t	 opt_bytes;	/* the agent's, as the writer counts */
	struct {
		uint64_t pages;
		uint64_t hash;
	}		*cpu;
};

/* One connection of the agent. */
struct fconn {
	struct session	*s;		/* NULL: over */
	const uint8_t	*data;
	size_t		 size;
	size_t		 avail;		/* arrived */
	size_t		 pos;		/* taken in by the session */
	bool		 resume;	/* its HELLO asks to resume */
	bool		 pausing;	/* a PAUSE's ERROR is on its way */
	bool		 standby;	/* STANDBY taken: no recording */
	struct td_buf	 out;		/* all the listener sent */
	size_t		 parsed;	/* of out, checked */
	int		 nframes;
	bool		 last;		/* DONE or ERROR sent */
	uint64_t	 ack;
	struct td_buf	 frame;		/* the frame being taken in */
	uint16_t	 ftype;
	size_t		 ftotal;
};

static struct model {
	bool		 opened;	/* the recording exists */
	bool		 finished;	/* END taken in */
	bool		 closed;	/* ended unfinished */
	uint64_t	 rid;
	uint64_t	 trace_id;	/* HELLO's: the file's TRACEID */
	uint32_t	 ncpus;
	uint32_t	 page_size;
	struct state	 now;
	struct state	 ck;		/* as of the last checkpoint */
	uint64_t	 end_pos;
	uint64_t	 done_size;
	char		 done_path[TD_MAX_NAME_LEN * 4 + 1];
} m;

static struct listener_config cfg;
static struct fconn conns[MAX_CONNS];
static int nconns;
static bool odd, verbose;
static char *topdir, *hostdir;
static char identity[64];
static unsigned int input_no;
static struct td_codec *codec[3];	/* none, zstd, zlib */
static uint8_t *raw;			/* what the model decompresses */

static void	conn_verdict(struct fconn *, enum session_verdict);

static void
state_copy(struct state *to, const struct state *from)
{
	void *cpu = to->cpu;

	memcpy(cpu, from->cpu, m.ncpus * sizeof *to->cpu);
	*to = *from;
	to->cpu = cpu;
}

/*
 * After every call (of connection c, if any): the recording stands where
 * the model does.  It went back to its checkpoint (rewound, or restored
 * from it), took a new one, or is gone: closed, keeping its checkpoint
 * (close_rewinds) or what arrived, whole pages of a frame cut short too.
 */
static void	model_pages(struct fconn *);

static void
observe(struct fconn *c, bool close_rewinds)
{
	struct recording *r;

	if (!m.opened || m.finished || m.closed)
		return;
	if ((r = registry_find(identity, m.rid)) == NULL) {
		if (close_rewinds)
			state_copy(&m.now, &m.ck);
		else if (c != NULL && c->frame.len < c->ftotal)
			model_pages(c);
		m.now.open = -1;	/* a kept file drops it */
		m.closed = true;
		return;
	}
	if (recording_rewound(r) || recording_position(r) < m.now.pos) {
		FUZZ_CHECK(recording_position(r) == m.ck.pos);
		state_copy(&m.now, &m.ck);
	}
	FUZZ_CHECK(recording_position(r) == m.now.pos);
	if (recording_acked(r) != m.ck.pos) {
		/* never in the middle of a frame */
		FUZZ_CHECK(recording_acked(r) == m.now.pos &&
		    (c == NULL || c->frame.len == 0));
		state_copy(&m.ck, &m.now);
	}
}

/* Decompress n bytes of a TD_WIRE_* codec to exactly want bytes. */
static const uint8_t *
model_unzip(uint16_t wire, const uint8_t *p, size_t n, size_t want)
{
	FUZZ_CHECK(wire == TD_WIRE_ZSTD || wire == TD_WIRE_ZLIB);
	FUZZ_CHECK(want <= (size_t)TD_CHUNK_PAGES * TD_MAX_PAGE_SIZE);
	FUZZ_CHECK(td_codec_decompress(codec[wire == TD_WIRE_ZSTD ?
	    TD_CODEC_ZSTD : TD_CODEC_ZLIB], p, n, raw, want) == (ssize_t)want);
	return raw;
}

/* The whole pages of a PAGES frame c took in (all, once it is whole). */
static void
model_pages(struct fconn *c)
{
	const uint8_t *p = c->frame.data + TD_FRAME_HEADER;
	size_t k, have = c->frame.len - TD_FRAME_HEADER;
	struct td_pages pg;

	if (c->frame.len < TD_FRAME_HEADER || c->ftype != TD_MSG_PAGES ||
	    have < TD_PAGES_HEAD)
		return;
	FUZZ_CHECK(td_msg_unpack_pages_head(p, c->ftotal - TD_FRAME_HEADER,
	    m.page_size, &pg) == 0);
	/* the session checked the CPU and the sequence */
	FUZZ_CHECK(pg.cpu < m.ncpus && pg.first_seq == m.now.cpu[pg.cpu].pages);
	k = (have - TD_PAGES_HEAD) / m.page_size;
	FUZZ_CHECK(k < pg.count || (k == pg.count &&
	    c->frame.len == c->ftotal));
	m.now.cpu[pg.cpu].pages += k;
	m.now.cpu[pg.cpu].hash = fuzz_fnv(m.now.cpu[pg.cpu].hash,
	    p + TD_PAGES_HEAD, k * m.page_size);
}

/* A whole frame a session took in. */
static void
model_frame(struct fconn *c)
{
	struct td_section_z sz;
	struct td_pages_z pz;
	struct td_frame f;
	struct td_end *e;
	const uint8_t *p;
	uint16_t id;
	size_t n, i;

	FUZZ_CHECK(td_frame_parse(c->frame.data, c->frame.len, &f) == 1);
	/* a standby agent's frames touch no recording */
	if (f.type == TD_MSG_HELLO || c->standby)
		return;
	FUZZ_CHECK(m.opened && !m.finished && !m.closed);
	switch (f.type) {
	case TD_MSG_PAGES:
		model_pages(c);
		break;
	case TD_MSG_SECTION_DATA:
		FUZZ_CHECK(m.now.open != -1);
		m.now.open_hash = fuzz_fnv(m.now.open_hash, f.payload, f.len);
		m.now.open_len += f.len;
		break;
	case TD_MSG_SECTION:
		FUZZ_CHECK(td_msg_unpack_section(&f, &id) == 0);
		FUZZ_CHECK(m.now.open == -1 && id >= TD_OPT_HEADER_INFO &&
		    id <= TD_OPT_CMDLINES && !m.now.done[id]);
		m.now.open = id;
		m.now.open_hash = FUZZ_FNV_INIT;
		m.now.open_len = 0;
		break;
	case TD_MSG_SECTION_DATA_Z:
		FUZZ_CHECK(td_msg_unpack_section_z(&f, &sz) == 0);
		FUZZ_CHECK(m.now.open != -1);
		p = model_unzip(sz.codec, sz.data, sz.len, sz.raw_len);
		m.now.open_hash = fuzz_fnv(m.now.open_hash, p, sz.raw_len);
		m.now.open_len += sz.raw_len;
		break;
	case TD_MSG_SECTION_END:
		FUZZ_CHECK(m.now.open != -1);
		m.now.done[m.now.open] = true;
		m.now.hash[m.now.open] = m.now.open_hash;
		m.now.len[m.now.open] = m.now.open_len;
		m.now.open = -1;
		break;
	case TD_MSG_OPTION:
		FUZZ_CHECK(td_msg_unpack_option(&f, &id, &p, &n) == 0);
		/*
		 * the listener writes these itself (TRACEID: HELLO's, when
		 * not 0), and takes a guest declaration without writing it
		 */
		if (id == TD_OPT_TIME_SHIFT || id == TD_OPT_DATE ||
		    id == TD_OPT_TD_TSYNC || id == TD_OPT_GUEST ||
		    (id == TD_OPT_TRACEID && m.trace_id != 0))
			break;
		if (id == TD_OPT_TD_GUEST) {
			struct td_guest *g = malloc(sizeof *g);

			FUZZ_CHECK(g != NULL && td_msg_unpack_guest(p, n, g) == 0);
			free(g);
			break;
		}
		m.now.opt_bytes += 6 + n;
		if (m.now.nopts == MAX_OPTS)
			break;
		m.now.opts[m.now.nopts].id = id;
		m.now.opts[m.now.nopts].len = n;
		m.now.opts[m.now.nopts++].hash = fuzz_fnv(FUZZ_FNV_INIT, p, n);
		break;
	case TD_MSG_PAGES_Z:
		FUZZ_CHECK(td_msg_unpack_pages_z(&f, &pz) == 0);
		FUZZ_CHECK(pz.cpu < m.ncpus &&
		    pz.first_seq == m.now.cpu[pz.cpu].pages);
		p = model_unzip(pz.codec, pz.data, pz.len,
		    (size_t)pz.count * m.page_size);
		m.now.cpu[pz.cpu].pages += pz.count;
		m.now.cpu[pz.cpu].hash = fuzz_fnv(m.now.cpu[pz.cpu].hash, p,
		    (size_t)pz.count * m.page_size);
		break;
	case TD_MSG_END:
		e = malloc(sizeof *e);
		FUZZ_CHECK(e != NULL && td_msg_unpack_end(&f, e) == 0);
		FUZZ_CHECK(e->ncpus == m.ncpus && m.now.open == -1);
		for (i = 0; i < m.ncpus; i++)
			FUZZ_CHECK(e->pages[i] == m.now.cpu[i].pages);
		for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
			FUZZ_CHECK(m.now.done[i]);
		free(e);
		m.finished = true;
		break;
	case TD_MSG_TSYNC_SAMPLE:
	case TD_MSG_TSYNC_PROBE:
	case TD_MSG_KEEPALIVE:
		break;
	default:
		FUZZ_CHECK(!"the session took in a frame it must refuse");
	}
	if (TD_MSG_IN_STREAM(f.type))
		m.now.pos += f.total;
	if (f.type == TD_MSG_END)
		m.end_pos = m.now.pos;
}

/* Bytes a session took in, frame by frame. */
static void
model_take(struct fconn *c, const uint8_t *p, size_t n)
{
	struct td_frame f;
	size_t k;

	while (n > 0) {
		k = c->frame.len < TD_FRAME_HEADER ?
		    TD_FRAME_HEADER - c->frame.len : c->ftotal - c->frame.len;
		k = k < n ? k : n;
		FUZZ_CHECK(td_buf_add(&c->frame, p, k) == 0);
		p += k;
		n -= k;
		if (c->frame.len < TD_FRAME_HEADER)
			continue;
		if (c->frame.len == TD_FRAME_HEADER) {
			FUZZ_CHECK(td_frame_parse(c->frame.data,
			    TD_FRAME_HEADER, &f) != -1);
			c->ftype = f.type;
			c->ftotal = f.total;
		}
		if (c->frame.len == c->ftotal) {
			model_frame(c);
			td_buf_reset(&c->frame);
		}
	}
}

/* The new frames a connection got from the listener, checked. */
static void
check_output(struct fconn *c)
{
	struct td_tsync_probe tp;
	struct td_welcome w;
	struct td_error e;
	struct td_frame f;
	struct td_done d;
	uint64_t off;

	for (; c->parsed < c->out.len; c->parsed += f.total, c->nframes++) {
		FUZZ_CHECK(!c->last && td_frame_parse(c->out.data + c->parsed,
		    c->out.len - c->parsed, &f) == 1);
		FUZZ_CHECK((c->nframes == 0) == (f.type == TD_MSG_WELCOME) ||
		    (c->nframes == 0 && f.type == TD_MSG_ERROR));
		switch (f.type) {
		case TD_MSG_WELCOME:
			FUZZ_CHECK(td_msg_unpack_welcome(&f, &w) == 0 &&
			    strcmp(w.identity, identity) == 0 &&
			    /* no header cache: version 3; a standby
			       agent's: the version spoken */
			    w.version == (c->standby ? TD_PROTO_VERSION :
			    TD_PROTO_VERSION_MIN) &&
			    w.tsync_interval == cfg.tsync_interval &&
			    w.idle_timeout == (uint32_t)cfg.idle_timeout);
			FUZZ_CHECK(w.flags == (c->resume ? TD_WELCOME_RESUMED :
			    0));
			FUZZ_CHECK(c->resume ? m.opened && w.resume_offset ==
			    (m.finished ? m.end_pos : m.now.pos) :
			    w.resume_offset == 0);
			c->ack = w.resume_offset;
			break;
		case TD_MSG_ACK:
			FUZZ_CHECK(td_msg_unpack_ack(&f, &off) == 0);
			FUZZ_CHECK(off > c->ack && off <= m.now.pos);
			c->ack = off;
			break;
		case TD_MSG_TSYNC_REPLY:
			FUZZ_CHECK(td_msg_unpack_tsync_reply(&f, &tp) == 0);
			break;
		case TD_MSG_DONE:
			FUZZ_CHECK(td_msg_unpack_done(&f, &d) == 0);
			FUZZ_CHECK(m.finished && d.file_size != 0);
			FUZZ_CHECK(m.done_size == 0 || (m.done_size ==
			    d.file_size && strcmp(m.done_path, d.path) == 0));
			m.done_size = d.file_size;
			snprintf(m.done_path, sizeof m.done_path, "%s", d.path);
			c->last = true;
			break;
		case TD_MSG_ERROR:
			FUZZ_CHECK(td_msg_unpack_error(&f, &e) == 0);
			FUZZ_CHECK(e.code == TD_ERR_FATAL ||
			    e.code == TD_ERR_RETRY);
			if (verbose)
				fprintf(stderr, "ERROR %u to the agent: %s\n",
				    e.code, e.text);
			c->last = true;
			break;
		default:
			FUZZ_CHECK(!"the listener sent an unexpected frame");
		}
	}
}

/* What the session wrote goes out, and the model catches up. */
static void
flush(struct fconn *c, bool close_rewinds)
{
	struct td_buf *out;
	bool urgent;

	if (c->s != NULL) {
		out = session_output(c->s, &urgent);
		FUZZ_CHECK(td_buf_add(&c->out, out->data, out->len) == 0);
		td_buf_reset(out);
	}
	observe(c, close_rewinds);
	check_output(c);
}

/* The connection went (conn_lost()). */
static void
conn_lost(struct fconn *c, const char *why)
{
	enum session_verdict v = session_lost(c->s, why);

	c->pausing = false;
	flush(c, false);
	conn_verdict(c, v);
}

/* What conn_verdict() does; a connection that ends is agentconn_free()d. */
static void
conn_verdict(struct fconn *c, enum session_verdict v)
{
	const struct td_buf *e;

	if (v == SESSION_GO)
		return;
	if (v != SESSION_QUIET) {
		e = session_error(c->s);
		FUZZ_CHECK(e->len > 0 &&
		    td_buf_add(&c->out, e->data, e->len) == 0);
		check_output(c);
	}
	if (v == SESSION_PAUSE) {
		/* once the ERROR is out, the recording waits */
		c->pausing = true;
		if (!odd)
			conn_lost(c, NULL);
		return;
	}
	session_free(c->s);
	c->s = NULL;
	observe(c, false);
}

/* Its output went out: a paused or done session lets go (conn_write_cb). */
static void
drained(struct fconn *c)
{
	if (c->s != NULL && (c->pausing ||
	    session_phase(c->s) == SESSION_DONE))
		conn_lost(c, NULL);
}


/*
 * tdctl list's line of every standby agent: what an agent says of itself
 * is one word each, so the fields are always these, in this order (issue
 * 31 row 12: a kernel string with spaces forged recording= and peer=).
 */
static void
check_standby_list(void)
{
	static const char *const keys[] = { "host=", "state=", "cpus=",
	    "kernel=", "clocks=", "recording=", "peer=" };
	struct td_buf out;
	char *line, *save, *w, *ws;
	size_t k;

	td_buf_init(&out, 1 << 20);
	standbytab_list(&out);
	FUZZ_CHECK(td_buf_add(&out, "", 1) == 0);
	for (line = strtok_r((char *)out.data, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		/* the last refusal's text, free, ends the line */
		if ((w = strstr(line, " refused=")) != NULL)
			*w = '\0';
		w = strtok_r(line, " ", &ws);
		FUZZ_CHECK(w != NULL && strcmp(w, "agent") == 0);
		FUZZ_CHECK(strtok_r(NULL, " ", &ws) != NULL);	/* identity */
		for (k = 0; k < sizeof keys / sizeof keys[0]; k++) {
			w = strtok_r(NULL, " ", &ws);
			FUZZ_CHECK(w != NULL &&
			    strncmp(w, keys[k], strlen(keys[k])) == 0);
		}
		FUZZ_CHECK(strtok_r(NULL, " ", &ws) == NULL);
	}
	td_buf_free(&out);
}
/*
 * An END the session refused (n bytes at p): it must not be one that
 * completes the recording, unless the agent's options left the listener
 * less than half of TD_MAX_OPTIONS_TOTAL for its own.
 */
static void
check_end_refused(const uint8_t *p, size_t n)
{
	struct td_frame f;
	struct td_end *e;
	bool whole;
	int i;

	if (!m.opened || m.finished || m.closed || td_frame_parse(p, n,
	    &f) != 1 || f.type != TD_MSG_END ||
	    m.now.opt_bytes > TD_MAX_OPTIONS_TOTAL / 2)
		return;
	FUZZ_CHECK((e = malloc(sizeof *e)) != NULL);
	whole = td_msg_unpack_end(&f, e) == 0 && e->ncpus == m.ncpus &&
	    m.now.open == -1;
	for (i = 0; whole && i < (int)m.ncpus; i++)
		whole = e->pages[i] == m.now.cpu[i].pages;
	for (i = TD_OPT_HEADER_INFO; whole && i <= TD_OPT_CMDLINES; i++)
		whole = m.now.done[i];
	free(e);
	FUZZ_CHECK(!whole);
}

/* The HELLO bytes start with, if they do. */
static bool
first_hello(const uint8_t *data, size_t size, struct td_hello *h)
{
	struct td_frame f;

	return td_frame_parse(data, size, &f) == 1 &&
	    td_msg_unpack_hello(&f, h) == 0;
}

/* What has arrived goes to the session as agentconn_read_cb() hands it over. */
static void
conn_read(struct fconn *c)
{
	enum session_verdict v;
	enum session_phase was;
	struct td_hello h;
	size_t len, want, n, cost = 0;
	ssize_t used;
	uint8_t *p;
	bool more;
	int i, nopen;

	while (c->s != NULL && !c->pausing) {
		len = c->avail - c->pos;
		want = session_want(c->s, &more);
		if (session_phase(c->s) == SESSION_STREAM) {
			v = session_account(c->s, 256 + len +
			    (len < want ? want - len : 0));
			flush(c, cfg.resume_wait == 0);
			conn_verdict(c, v);
			if (v != SESSION_GO)
				return;
		}
		if (len < want || len == 0)
			return;
		n = more ? len : want;
		FUZZ_CHECK((p = malloc(n)) != NULL);
		memcpy(p, c->data + c->pos, n);
		for (i = nopen = 0; i < nconns; i++)
			nopen += conns[i].s != NULL;
		was = session_phase(c->s);
		used = session_input(c->s, p, n, timesync_now(CLOCK_MONOTONIC),
		    nopen, &cost, &v);
		if (used == -1 && was == SESSION_STREAM)
			check_end_refused(p, n);
		free(p);
		FUZZ_CHECK(used <= (ssize_t)n);
		if (used > 0 && was == SESSION_HELLO &&
		    session_phase(c->s) == SESSION_STANDBY)
			c->standby = true;
		/* a standby agent never opens a recording */
		FUZZ_CHECK(!c->standby ||
		    session_phase(c->s) != SESSION_STREAM);
		if (c->standby && session_phase(c->s) == SESSION_STANDBY)
			check_standby_list();
		if (used > 0 && was == SESSION_HELLO && !c->resume &&
		    session_phase(c->s) == SESSION_STREAM) {
			/* the recording opens */
			FUZZ_CHECK(!m.opened && first_hello(c->data, c->size,
			    &h));
			m.opened = true;
			m.rid = h.recording_id;
			m.trace_id = h.trace_id;
			m.ncpus = h.ncpus;
			m.page_size = h.page_size;
			m.now.open = -1;
			m.now.cpu = calloc(m.ncpus, sizeof *m.now.cpu);
			m.ck.cpu = calloc(m.ncpus, sizeof *m.ck.cpu);
			FUZZ_CHECK(m.now.cpu != NULL && m.ck.cpu != NULL);
			for (i = 0; i < (int)m.ncpus; i++)
				m.now.cpu[i].hash = FUZZ_FNV_INIT;
			state_copy(&m.ck, &m.now);
		}
		if (used > 0) {
			model_take(c, c->data + c->pos, (size_t)used);
			c->pos += (size_t)used;
		}
		flush(c, false);
		if (used == -1) {
			conn_verdict(c, v);
			return;
		}
		if (session_phase(c->s) == SESSION_DONE)
			return;
	}
}

/* A session taken over: conn_gone_cb() frees its connection at once. */
static void
gone_cb(void *arg)
{
	struct fconn *c = arg;

	session_free(c->s);
	c->s = NULL;
}

/* One connection: its bytes arrive piece by piece. */
static void
feed(struct fconn *c, const uint8_t *data, size_t size, size_t chunk,
    bool tick)
{
	struct td_hello h;

	c->data = data;
	c->size = size;
	c->resume = first_hello(data, size, &h) &&
	    (h.flags & TD_HELLO_RESUME) != 0;
	td_buf_init(&c->out, 4 * 1024 * 1024);
	td_buf_init(&c->frame, TD_FRAME_HEADER + TD_MAX_FRAME + 4096);
	c->s = session_new(&cfg, identity, "192.0.2.1:4000", gone_cb, c);
	while (c->s != NULL && c->avail < size) {
		c->avail += size - c->avail < chunk ? size - c->avail : chunk;
		conn_read(c);
		if (tick && c->s != NULL && !c->pausing &&
		    session_phase(c->s) == SESSION_STREAM) {
			/* agentconn_tick() */
			enum session_verdict v = session_tick(c->s);

			flush(c, cfg.resume_wait == 0);
			conn_verdict(c, v);
		}
		if (!odd)
			drained(c);
	}
}

/*
 * tdlisten stops (agentconn_shutdown_all(), then main's end) and starts again.
 */
static void
restart(void)
{
	enum session_verdict v;
	const struct td_buf *e;
	struct fconn *c;

	for (c = conns; c < conns + nconns; c++) {
		if (c->s == NULL)
			continue;
		v = session_shutdown(c->s);
		/* a paused one's ERROR is on its way: no second one */
		FUZZ_CHECK(!c->pausing || v == SESSION_QUIET);
		e = session_error(c->s);
		if (v == SESSION_CLOSE)
			FUZZ_CHECK(td_buf_add(&c->out, e->data, e->len) == 0);
		check_output(c);
		/* without --resume-wait it closed; with, it was left */
		if (cfg.resume_wait == 0)
			observe(c, false);
		session_free(c->s);
		c->s = NULL;
	}
	recording_leave_all();
	finished_free();
	finished_load(topdir);
	recording_recover_all(&cfg);
	observe(NULL, false);
}

/* The connection before the next one ends as how says (conn_event_cb()). */
static void
conn_ends(struct fconn *c, int how)
{
	struct recording *r;

	/* kept open, or cut by the restart with its output on the way */
	if (how == FUZZ_END_KEEP || how == FUZZ_END_RESTART)
		return;
	if (odd)
		drained(c);
	if (c->s != NULL && how == FUZZ_END_IDLE &&
	    session_phase(c->s) == SESSION_HELLO)
		conn_verdict(c, session_close(c->s, "no HELLO in time"));
	else if (c->s != NULL)
		conn_lost(c, how == FUZZ_END_IDLE ? "no data for 60 s" :
		    "connection closed before the end of the recording");
	if (how != FUZZ_END_EXPIRE)
		return;
	/* recording_expire(), long after */
	while ((r = registry_expired(UINT64_MAX)) != NULL)
		recording_close(r);
	observe(NULL, false);
}

/* tdlisten's settings and budgets for this input, from its HELLO. */
static bool
pick_config(const uint8_t *data, size_t size)
{
	struct budget_caps caps = { TD_SESSION_MEM, TD_IDENTITY_MEM,
	    TD_LISTENER_MEM, 1024, TD_FD_RESERVE };
	struct td_hello h;
	bool tick = false;

	cfg = (struct listener_config){ .dir = topdir, .insecure = true,
	    .file_version = 7, .codec = TD_CODEC_ZSTD, .max_sessions = MAX_CONNS,
	    .handshake_timeout = 10, .tsync_interval = 1000, .resume_wait = 600,
	    .idle_timeout = 60, .max_per_identity = 64,
	    .max_standby_per_identity = 2, .dir_mode = 0700,
	    .file_mode = 0600, .gid = (gid_t)-1 };
	if (first_hello(data, size, &h)) {
		cfg.file_version = h.file_version == 6 ? 6 : 7;
		cfg.codec = h.file_version == 6 ? TD_CODEC_NONE :
		    (enum td_codec_id)(h.recording_id % 3);
		if ((h.recording_id / 3) % 2 == 1)
			cfg.tsync_interval = TD_TSYNC_OFF;
		if ((h.recording_id / 6) % 2 == 1)
			cfg.resume_wait = 0;
		tick = (h.trace_id & 1) != 0;
		if (h.trace_id & 2)
			cfg.quota = 1 + ((h.trace_id >> 32) & 0xffffff);
		if (h.trace_id & 4)
			caps.session = 4096 + ((h.trace_id >> 8) & 0xffff) * 64;
		if (h.trace_id & 16)
			caps.fds = TD_FD_RESERVE + (int)((h.trace_id >> 24) & 7);
	}
	cfg.codec_ctx = codec[cfg.codec];
	budget_init(&caps);
	return tick;
}

/* Where the next connection starts, and how the one before ends. */
static size_t
next_conn(const uint8_t *data, size_t size, size_t pos, size_t *end,
    int *how)
{
	const uint8_t *sep;

	sep = memmem(data + pos, size - pos, FUZZ_CONN_SEP,
	    FUZZ_CONN_SEP_LEN);
	if (sep == NULL || (size_t)(sep - data) + FUZZ_CONN_SEP_LEN >= size) {
		*end = size;
		*how = FUZZ_END_EOF;
		return size;
	}
	*end = (size_t)(sep - data);
	*how = sep[FUZZ_CONN_SEP_LEN] % FUZZ_END_COUNT;
	return *end + FUZZ_CONN_SEP_LEN + 1;
}

static void
cleanup(void)
{
	rmdir(topdir);
}

static void
fatal_hook(void)
{
	FUZZ_CHECK(!"fatal() on the agent's input");
}

static void
setup(void)
{
	int i;

	topdir = fuzz_tmpdir("fuzz-session");
	atexit(cleanup);
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	/* warnings still go to stderr: fuzz.sh runs with -close_fd_mask=2 */
	log_init("tdlisten", verbose ? 2 : -1, 0);
	log_set_fatal_hook(fatal_hook);
	/* tdlisten's shared contexts (cfg.codec_ctx), the model's too */
	for (i = TD_CODEC_ZSTD; i <= TD_CODEC_ZLIB; i++)
		FUZZ_CHECK((codec[i] = td_codec_new((enum td_codec_id)i,
		    0)) != NULL);
	FUZZ_CHECK((raw = malloc((size_t)TD_CHUNK_PAGES *
	    TD_MAX_PAGE_SIZE)) != NULL);
}

/* TIME_SHIFT as trace-cmd reads it, exactly. */
static void
check_time_shift(const uint8_t *p, size_t n)
{
	uint32_t cpus, count, i;
	size_t pos = 16, frac = 0;

	FUZZ_CHECK(n >= 16);
	memcpy(&cpus, p + 12, 4);
	FUZZ_CHECK(cpus == m.ncpus);
	for (i = 0; i < cpus; i++, pos += 24 * (size_t)count) {
		FUZZ_CHECK(n - pos >= 4);
		memcpy(&count, p + pos, 4);
		pos += 4;
		FUZZ_CHECK((n - pos) / 24 >= count);
		frac += 8 * (size_t)count;
	}
	FUZZ_CHECK(n - pos == frac);
}

static int
page_cb(void *arg, const void *page, size_t len)
{
	uint64_t *h = arg;

	h[0] = fuzz_fnv(h[0], page, len);
	h[1]++;
	return 0;
}

/* The finished file holds what the model says. */
static void
check_file(const char *path)
{
	static const uint8_t no_cmdlines[8];
	struct td_read *r = td_read_open(path);
	uint64_t h[2], want_hash, want_len;
	struct td_buf b;
	size_t i, j;
	int id, nth;

	if (cfg.file_version == 6 && r == NULL)
		return;		/* the agent's sections do not parse as v6 */
	if (r == NULL)
		fprintf(stderr, "td_read_open '%s': %s\n", path,
		    strerror(errno));
	FUZZ_CHECK(r != NULL && td_read_version(r) == cfg.file_version);
	FUZZ_CHECK(cfg.file_version == 6 || td_read_codec(r) == cfg.codec);
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		want_hash = m.now.hash[id];
		want_len = m.now.len[id];
		if (!m.now.done[id]) {
			/* an incomplete file gets empty command lines */
			FUZZ_CHECK(!m.finished && id == TD_OPT_CMDLINES);
			want_hash = fuzz_fnv(FUZZ_FNV_INIT, no_cmdlines, 8);
			want_len = 8;
		}
		if (td_read_section(r, id, &b) == -1 || b.len != want_len ||
		    fuzz_fnv(FUZZ_FNV_INIT, b.data, b.len) != want_hash) {
			/* v6: tdread parses the agent's sections */
			FUZZ_CHECK(cfg.file_version == 6);
			goto out;
		}
	}
	FUZZ_CHECK(td_read_page_size(r) == m.page_size &&
	    td_read_ncpus(r) == (int)m.ncpus);
	for (i = 0; i < m.now.nopts; i++) {
		for (nth = 0, j = 0; j < i; j++)
			nth += m.now.opts[j].id == m.now.opts[i].id;
		FUZZ_CHECK(td_read_option(r, m.now.opts[i].id, nth, &b) == 0);
		FUZZ_CHECK(b.len == m.now.opts[i].len && fuzz_fnv(FUZZ_FNV_INIT,
		    b.data, b.len) == m.now.opts[i].hash);
	}
	/* the file's TRACEID: HELLO's, once */
	if (m.trace_id != 0) {
		FUZZ_CHECK(!m.finished || (td_read_option(r, TD_OPT_TRACEID, 0,
		    &b) == 0 && b.len == 8 && memcmp(b.data, &m.trace_id,
		    8) == 0 && td_read_option(r, TD_OPT_TRACEID, 1, &b) == -1));
	}
	FUZZ_CHECK(td_read_option(r, TD_OPT_TD_GUEST, 0, &b) == -1);
	/* never tracedock's own 0x7464: libtracecmd warns of it (issue 28) */
	FUZZ_CHECK(td_read_option(r, TD_OPT_TD_TSYNC, 0, &b) == -1);
	if (td_read_option(r, TD_OPT_TIME_SHIFT, 0, &b) == 0) {
		check_time_shift(b.data, b.len);
		FUZZ_CHECK(td_read_option(r, TD_OPT_DATE, 0, &b) == 0 &&
		    b.len > 0 && memchr(b.data, '\0', b.len) ==
		    b.data + b.len - 1);
	}
	for (i = 0; i < m.ncpus; i++) {
		h[0] = FUZZ_FNV_INIT;
		h[1] = 0;
		FUZZ_CHECK(td_read_cpu_pages(r, (int)i, page_cb, h) == 0);
		FUZZ_CHECK(h[1] == m.now.cpu[i].pages &&
		    h[0] == m.now.cpu[i].hash);
	}
out:
	td_buf_free(&b);
	td_read_close(r);
}

/*
 * What is left: DIR holds DIR/<identity>/ (and the table of finished
 * recordings), that the finished file alone, if the recording came to
 * one.  Everything goes.
 */
static void
check_left(void)
{
	struct dirent *de;
	struct stat st;
	char *left = NULL, *p;
	bool keep = m.finished;
	size_t n;
	DIR *d;
	int id;

	FUZZ_CHECK((d = opendir(topdir)) != NULL);
	while ((de = readdir(d)) != NULL)
		FUZZ_CHECK(de->d_name[0] == '.' ||
		    strcmp(de->d_name, identity) == 0);
	closedir(d);
	for (d = opendir(hostdir); d != NULL && (de = readdir(d)) != NULL;) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (left != NULL)
			fprintf(stderr, "files left: '%s', '%s'\n", left,
			    de->d_name);
		FUZZ_CHECK(left == NULL);
		FUZZ_CHECK(asprintf(&left, "%s/%s", hostdir, de->d_name) > 0);
	}
	if (d != NULL)
		closedir(d);
	if (m.closed)
		for (keep = true, id = TD_OPT_HEADER_INFO; id <= TD_OPT_PRINTK;
		    id++)
			keep = keep && m.now.done[id];
	if (verbose)
		fprintf(stderr, "session: %d connections, opened %d, finished "
		    "%d, closed %d, left '%s'\n", nconns, m.opened, m.finished,
		    m.closed, left ? left : "");
	FUZZ_CHECK((left != NULL) == keep);
	if (left != NULL) {
		n = strlen(left);
		FUZZ_CHECK(n > 15 && strcmp(left + n - 4, ".dat") == 0 &&
		    left[strlen(hostdir) + 1] != '.');
		FUZZ_CHECK((strcmp(left + n - 15, ".incomplete.dat") == 0) ==
		    !m.finished);
		if (m.done_size != 0) {
			FUZZ_CHECK(asprintf(&p, "%s/%s", topdir,
			    m.done_path) > 0);
			FUZZ_CHECK(strcmp(left, p) == 0 && stat(left, &st) ==
			    0 && (uint64_t)st.st_size == m.done_size);
			free(p);
		}
		check_file(left);
		unlink(left);
		free(left);
	}
	FUZZ_CHECK(asprintf(&p, "%s/%s", topdir, FINISHED_FILE) > 0);
	unlink(p);
	free(p);
	rmdir(hostdir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t chunk = 1 + size % 4093, pos = 0, start, end;
	struct td_hello h;
	int fd0, how, i;
	bool tick;

	if (topdir == NULL)
		setup();
	fd0 = fuzz_lowest_fd();
	memset(&m, 0, sizeof m);
	memset(conns, 0, sizeof conns);
	nconns = 0;
	odd = size % 2 == 1;
	snprintf(identity, sizeof identity, "fuzz-agent-%u", input_no++);
	free(hostdir);
	FUZZ_CHECK(asprintf(&hostdir, "%s/%s", topdir, identity) > 0);
	tick = pick_config(data, size);
	finished_load(topdir);
	while (nconns < MAX_CONNS) {
		start = pos;
		pos = next_conn(data, size, start, &end, &how);
		/* one recording per input */
		if (m.opened && first_hello(data + start, end - start, &h) &&
		    !(h.flags & TD_HELLO_RESUME))
			break;
		feed(&conns[nconns++], data + start, end - start, chunk, tick);
		conn_ends(&conns[nconns - 1], how);
		if (how == FUZZ_END_RESTART)
			restart();
		if (pos >= size)
			break;
	}
	/* the agent hangs up everywhere and never comes back */
	for (i = 0; i < nconns; i++)
		conn_ends(&conns[i], i == nconns - 1 ? FUZZ_END_EXPIRE :
		    FUZZ_END_EOF);
	FUZZ_CHECK(registry_any() == NULL);
	FUZZ_CHECK(budget_held() == 0 && budget_fds_reserved() == 0);
	check_left();
	finished_free();
	for (i = 0; i < nconns; i++) {
		td_buf_free(&conns[i].out);
		td_buf_free(&conns[i].frame);
	}
	free(m.now.cpu);
	free(m.ck.cpu);
	FUZZ_CHECK(fuzz_lowest_fd() == fd0);
	return 0;
}
