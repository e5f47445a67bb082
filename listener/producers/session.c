/*
 * session.c: the tdproto conversation with one tdagent (see session.h).
 *
 * Input is cut into frames.  SECTION_DATA and PAGES frames may be 1 MiB
 * each: waiting for whole ones would hold up to that much per session (a
 * thousand agents sending their kallsyms at once would need gigabytes),
 * so their payload goes to the recording as it arrives, PAGES page by
 * page, and a session holds little more than what one read brought.  No
 * checkpoint is taken until such a frame is whole; a connection lost in
 * the middle of one rewinds the recording to its last checkpoint, which
 * never holds part of a frame (the agent sends the whole frame again).
 *
 *	SESSION_HELLO	waiting for HELLO (new or resuming)
 *	SESSION_STREAM	sections, options, pages, samples to the recording;
 *			a checkpoint and an ACK every SESSION_CK_BYTES
 *			and at every tick of the connection
 *	SESSION_DONE	END received, file complete, DONE written
 *	SESSION_OVER	closed, or its recording taken over
 *	SESSION_STANDBY	STANDBY instead of HELLO: a standby agent, no
 *			recording; KEEPALIVE and ANSWER in, START and STOP
 *			out (standbytab.c)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "client.h"
#include "finished.h"
#include "hcache.h"
#include "listener.h"
#include "log.h"
#include "output.h"
#include "probeport.h"
#include "recording.h"
#include "registry.h"
#include "session.h"
#include "session-local.h"
#include "standbytab.h"
#include "tdproto.h"
#include "timesync.h"
#include "xmalloc.h"
#include "banned.h"

/*
 * Checkpoint and acknowledge at least every this many bytes.  The agent
 * keeps what is not acknowledged in memory: at full rate this window is
 * most of its peak RSS (4 MiB made it 12.6 MB against trace-cmd's 10.0,
 * bench/rss.sh), for four times as many checkpoints as then (a small
 * state file and the spools' partial chunks each).
 */
#define SESSION_CK_BYTES	(1u * 1024 * 1024)


struct session *
session_new(const struct listener_config *cfg, const char *identity,
    const char *peer, void (*gone)(void *), void *arg)
{
	struct session *s = xcalloc(1, sizeof *s);
	int i;

	s->cfg = cfg;
	s->phase = SESSION_HELLO;
	snprintf(s->identity, sizeof s->identity, "%s", identity);
	snprintf(s->peer, sizeof s->peer, "%s", peer);
	snprintf(s->label, sizeof s->label, "session %s (%s)", identity,
	    peer);
	td_buf_init(&s->out, TD_MAX_HELLO + TD_MAX_ERROR_LEN + 4096 +
	    TD_MAX_STANDBY_MSG);
	td_buf_init(&s->err, TD_MAX_ERROR_LEN + 64);
	s->want = TD_FRAME_HEADER;
	s->gone = gone;
	s->gone_arg = arg;
	for (i = 0; i < TD_HCACHE_OFFER_MAX; i++)
		s->have_fd[i] = -1;
	return s;
}

/* The session's TCP socket: an entry for its time-sync datagrams. */
void
session_set_socket(struct session *s, int fd)
{
	if (s->pp == NULL && !s->cfg->no_udp_probes)
		s->pp = probeport_register(fd);
}

void
session_free(struct session *s)
{
	int i;

	if (s == NULL)
		return;
	if (s->pp != NULL) {
		uint64_t a, d;

		probeport_counts(s->pp, &a, &d);
		if (a + d > 0)
			log_debug("%s: time-sync probes: %" PRIu64 " answered, "
			    "%" PRIu64 " dropped", s->label, a, d);
	}
	probeport_unregister(s->pp);
	if (s->rec != NULL) {
		if (s->phase == SESSION_DONE)
			recording_close(s->rec);
		else {
			if (s->bulk_type != 0)
				recording_rewind(s->rec, NULL, 0);
			recording_detach(s->rec, NULL);
		}
	}
	standbytab_remove(s->sb);
	hcache_put_abort(s->put);
	for (i = 0; i < TD_HCACHE_OFFER_MAX; i++)
		if (s->have_fd[i] != -1)
			close(s->have_fd[i]);
	td_buf_free(&s->out);
	td_buf_free(&s->err);
	free(s);
}

enum session_phase
session_phase(const struct session *s)
{
	return s->phase;
}

const char *
session_identity(const struct session *s)
{
	return s->identity;
}

const char *
session_label(const struct session *s)
{
	return s->label;
}

struct td_buf *
session_output(struct session *s, bool *urgent)
{
	*urgent = s->urgent;
	s->urgent = false;
	return &s->out;
}

const struct td_buf *
session_error(const struct session *s)
{
	return &s->err;
}

/* "session IDENTITY 'NAME' (PEER)", the name made safe to print. */
static void
session_set_label(struct session *s, const char *name)
{
	char n[TD_MAX_NAME_LEN + 1];

	if (name[0] == '\0') {
		snprintf(s->label, sizeof s->label, "session %s (%s)",
		    s->identity, s->peer);
		return;
	}
	snprintf(n, sizeof n, "%s", name);
	output_sanitize(n);
	snprintf(s->label, sizeof s->label, "session %s '%s' (%s)",
	    s->identity, n, s->peer);
}

/*
 * Close for a reason (NULL: the normal end), telling the agent with an
 * ERROR of code when there is a reason it can hear.  The recording is
 * finished or kept as incomplete at once.
 */
static enum session_verdict
session_end_with(struct session *s, uint32_t code, const char *reason)
{
	bool tell = reason != NULL && s->phase != SESSION_DONE &&
	    s->phase != SESSION_OVER;
	char why[700];

	/* reason may be the recording's own words, gone with it */
	if (reason != NULL) {
		snprintf(why, sizeof why, "%s", reason);
		log_warnx("%s: closing: %s", s->label, why);
	}
	if (s->rec != NULL) {
		recording_close(s->rec);
		s->rec = NULL;
	}
	s->phase = SESSION_OVER;
	s->bulk_type = 0;
	td_buf_reset(&s->err);
	if (!tell)
		return SESSION_QUIET;
	td_msg_pack_error(&s->err, code, why);
	return SESSION_CLOSE;
}

enum session_verdict
session_close(struct session *s, const char *why)
{
	return session_end_with(s, TD_ERR_FATAL, why);
}

/* Close for a reason of the recording's (its last failed action). */
static enum session_verdict	session_pause(struct session *, const char *,
				    int);

static enum session_verdict
session_failed(struct session *s)
{
	if (recording_fault(s->rec) == REC_ROOM)
		return session_pause(s, recording_why(s->rec), errno);
	/* session_end_with() copies the words before the recording goes */
	return session_close(s, recording_why(s->rec));
}

/* What the agent hears when there is no room now (errnum). */
static const char *
session_tell(int errnum)
{
	if (errnum == EMFILE || errnum == ENFILE)
		return "the listener is out of file descriptors: come back "
		    "later";
	if (errnum == ENOMEM)
		return "the listener's memory budget is spent: come back later";
	if (errnum == EDQUOT)
		return "this identity is over the listener's quota: come back "
		    "later";
	return "the listener's disk is full: come back later";
}

/*
 * No room for the recording now (disk, quota, descriptors, memory: what,
 * errnum): it goes back to its last checkpoint and the agent is told to
 * come back later (it keeps everything after the last ACK); its resume
 * starts again from the checkpoint, and succeeds once there is room.
 */
static enum session_verdict
session_pause(struct session *s, const char *what, int errnum)
{
	char msg[700];
	/* "over the --quota ...", "over the memory budget ...": no strerror */
	bool quota = strncmp(what, "over ", 5) == 0;
	const char *tell;

	tell = errnum == EDQUOT && quota ? "this identity is over the "
	    "listener's quota: come back later" : session_tell(errnum);
	s->bulk_type = 0;
	if (s->cfg->resume_wait == 0) {
		/* nothing can wait for room: what is safe is kept */
		snprintf(msg, sizeof msg, "%s: %s", what, strerror(errnum));
		recording_rewind(s->rec, NULL, 0);
		return session_close(s, msg);
	}
	snprintf(msg, sizeof msg, "%s", what);	/* what may be the why */
	recording_rewind(s->rec, msg, errnum);
	td_buf_reset(&s->err);
	td_msg_pack_error(&s->err, TD_ERR_RETRY, tell);
	return SESSION_PAUSE;
}

/* Checkpoint and acknowledge what arrived. */
static enum session_verdict
session_checkpoint(struct session *s)
{
	uint64_t before, acked;

	if (s->phase != SESSION_STREAM || s->bulk_type != 0 ||
	    recording_rewound(s->rec))
		return SESSION_GO;
	before = recording_acked(s->rec);
	if (recording_checkpoint(s->rec, &acked) == -1)
		return session_failed(s);
	if (acked != before)
		td_msg_pack_ack(&s->out, acked);
	return SESSION_GO;
}

enum session_verdict
session_tick(struct session *s)
{
	return session_checkpoint(s);
}

enum session_verdict
session_account(struct session *s, uint64_t extra)
{
	char why[160];

	if (s->phase != SESSION_STREAM || recording_rewound(s->rec))
		return SESSION_GO;
	extra += sizeof *s + s->out.cap + s->err.cap;
	if (recording_account(s->rec, extra, why, sizeof why) == 0)
		return SESSION_GO;
	return session_pause(s, why, ENOMEM);
}

static void
session_welcome(struct session *s, bool resumed, uint64_t trace_id,
    uint64_t offset)
{
	struct td_welcome w;

	memset(&w, 0, sizeof w);
	w.version = s->version;
	w.flags = resumed ? TD_WELCOME_RESUMED : 0;
	w.tsync_interval = s->cfg->tsync_interval;
	w.session_id = trace_id;
	w.resume_offset = offset;
	w.idle_timeout = (uint32_t)s->cfg->idle_timeout;
	snprintf(w.identity, sizeof w.identity, "%s", s->identity);
	if (s->pp != NULL && s->cfg->tsync_interval != TD_TSYNC_OFF)
		probeport_offer(s->pp, &w.udp_port, &w.udp_id, w.udp_key);
	w.ref_ns = timesync_now(CLOCK_MONOTONIC);
	td_msg_pack_welcome(&s->out, &w);
	explicit_bzero(w.udp_key, sizeof w.udp_key);
}

/*
 * A later session took this one's recording over: it lets go (a frame
 * cut in the middle goes back to the last checkpoint) and is over.
 */
static void
session_taken_cb(void *arg)
{
	struct session *s = arg;

	if (s->bulk_type != 0)
		recording_rewind(s->rec, NULL, 0);
	s->bulk_type = 0;
	s->rec = NULL;
	s->phase = SESSION_OVER;
	s->gone(s->gone_arg);	/* s may be freed now */
}

/*
 * The recording's cut is over (recording_busy() no longer): the
 * connection reads on (session_waits()); kicked as when the session
 * writes on its own.
 */
static void
session_ready_cb(void *arg)
{
	struct session *s = arg;

	if (s->kick != NULL)
		s->kick(s->kick_arg);
}

bool
session_waits(const struct session *s)
{
	return s->phase == SESSION_STREAM && s->rec != NULL &&
	    recording_busy(s->rec);
}

/* Whether a HELLO's CPUs, sizes and clock are those of recording p. */
static bool
session_fits(const struct recording_params *p, const struct td_hello *h)
{
	return p->ncpus == h->ncpus && p->page_size == h->page_size &&
	    p->commit_size == h->commit_size && p->long_size == h->long_size &&
	    strcmp(p->clock, h->clock) == 0;
}

/*
 * HELLO with TD_HELLO_RESUME: the agent comes back for a recording of its
 * identity.  This session takes it over (from a stale connection the
 * listener had not noticed was dead, if there is one) and it goes on from
 * its position; a recording that finished lately is told DONE again.
 */
static enum session_verdict
session_resume(struct session *s, const struct td_hello *h)
{
	const struct recording_params *p;
	const struct finished *e;
	struct recording *t;
	struct td_done d;
	char err[600], label[sizeof s->label];
	int ret;

	t = registry_find(s->identity, h->recording_id);
	if (t == NULL) {
		if ((e = registry_find_finished(s->identity,
		    h->recording_id)) != NULL) {
			/* it is done: say so again */
			session_welcome(s, true, 0, e->end_off);
			memset(&d, 0, sizeof d);
			d.file_size = e->size;
			snprintf(d.path, sizeof d.path, "%s", e->path);
			td_msg_pack_done(&s->out, &d);
			s->phase = SESSION_DONE;
			log_info("%s: the agent came back for its DONE ('%s')",
			    s->label, e->path);
			return SESSION_GO;
		}
		snprintf(err, sizeof err, "no recording %016" PRIx64 " to "
		    "resume (it ended, expired or was never here)",
		    h->recording_id);
		return session_close(s, err);
	}
	p = recording_params(t);
	if (!session_fits(p, h))
		return session_close(s, "the resumed recording does not match");
	if (recording_owned(t))
		log_warnx("%s: a new connection from %s takes over",
		    recording_label(t), s->peer);
	snprintf(label, sizeof label, "%s", s->label);
	session_set_label(s, p->name);
	ret = recording_attach(t, s->label, session_taken_cb, s, err,
	    sizeof err);
	if (ret != 0) {
		snprintf(s->label, sizeof s->label, "%s", label);
		if (ret == 1)
			return session_end_with(s, TD_ERR_RETRY,
			    session_tell(errno));
		return session_close(s, "the recording cannot be resumed");
	}
	s->rec = t;
	recording_set_ready(t, session_ready_cb);
	s->page_size = p->page_size;
	s->phase = SESSION_STREAM;
	session_welcome(s, true, recording_trace_id(t), recording_position(t));
	log_info("%s: resumed at offset %" PRIu64 " (%" PRIu64 " pages so "
	    "far)", s->label, recording_position(t), recording_pages(t));
	return SESSION_GO;
}

/*
 * A HELLO (not RESUME) for a recording of this identity that is here,
 * empty still and ownerless (its connection ended): the same agent again,
 * whose first HELLO got no WELCOME in time (a listener that busy) and
 * which tried again.  This session takes that recording over as if it
 * opened it: nothing is left behind to wait for a resume.  A recording
 * whose connection is still open is never taken so (sessions that reuse
 * an id do not end each other).
 */
static bool
session_again(struct session *s, const struct td_hello *h,
    struct recording **tp)
{
	const struct recording_params *p;
	struct recording *t;

	t = registry_find(s->identity, h->recording_id);
	if (t == NULL || recording_owned(t) || recording_position(t) != 0)
		return false;
	p = recording_params(t);
	if (!session_fits(p, h) || strcmp(p->name, h->name) != 0)
		return false;
	*tp = t;
	return true;
}

static enum session_verdict
session_hello(struct session *s, const struct td_frame *f, int conns)
{
	struct recording_params p;
	enum recording_fault fault;
	struct recording *t;
	struct td_hello h;
	char err[600];
	uint16_t one = 1, top;
	int ret;

	if (td_msg_unpack_hello(f, &h) == -1)
		return session_close(s, "malformed HELLO");
	/* version 4 is version 3 with the header cache */
	top = s->cfg->hcache != NULL ? TD_PROTO_VERSION : TD_PROTO_VERSION_MIN;
	if (h.version_min > top || h.version_max < TD_PROTO_VERSION_MIN)
		return session_close(s, "no common protocol version");
	s->version = h.version_max < top ? h.version_max : top;
	if (h.big_endian != (*(uint8_t *)&one == 1 ? 0 : 1))
		return session_close(s, "agents of the other byte order are "
		    "not supported yet");
	if (h.flags & TD_HELLO_RESUME)
		return session_resume(s, &h);
	if (s->resume_only)
		return session_end_with(s, TD_ERR_RETRY, SESSION_FULL);
	if (session_again(s, &h, &t)) {
		session_set_label(s, h.name);
		log_info("%s: the agent started again (its first HELLO had "
		    "no WELCOME in time)", s->label);
		if ((ret = recording_attach(t, s->label, session_taken_cb, s,
		    err, sizeof err)) == 1)
			return session_end_with(s, TD_ERR_RETRY,
			    session_tell(errno));
		if (ret != 0)
			return session_close(s, "the recording cannot be "
			    "taken over");
		s->rec = t;
		recording_set_ready(t, session_ready_cb);
		recording_received(t, f->total);
		s->page_size = h.page_size;
		s->phase = SESSION_STREAM;
		s->offer_ok = s->version >= 4;
		session_welcome(s, false, recording_trace_id(t), 0);
		return SESSION_GO;
	}
	if (!client_may_record(s->cfg, s->identity)) {
		snprintf(err, sizeof err, "too many recordings open for '%s' "
		    "(--max-per-identity %d)", s->identity,
		    s->cfg->max_per_identity);
		return session_close(s, err);
	}
	session_set_label(s, h.name);
	memset(&p, 0, sizeof p);
	snprintf(p.identity, sizeof p.identity, "%s", s->identity);
	snprintf(p.name, sizeof p.name, "%s", h.name);
	snprintf(p.clock, sizeof p.clock, "%s", h.clock);
	p.recording_id = h.recording_id;
	p.file_trace_id = h.trace_id;
	p.ncpus = h.ncpus;
	p.page_size = h.page_size;
	p.long_size = h.long_size;
	p.commit_size = h.commit_size;
	p.big_endian = h.big_endian;
	p.pieces = 1;
	s->rec = recording_open(s->cfg, &p, s->label, session_taken_cb, s,
	    conns, err, sizeof err, &fault);
	if (s->rec == NULL)
		return session_end_with(s, fault == REC_ROOM ? TD_ERR_RETRY :
		    TD_ERR_FATAL, err);
	recording_set_ready(s->rec, session_ready_cb);
	recording_received(s->rec, f->total);
	s->page_size = p.page_size;
	s->phase = SESSION_STREAM;
	s->offer_ok = s->version >= 4;
	session_welcome(s, false, recording_trace_id(s->rec), 0);
	return SESSION_GO;
}

static enum session_verdict
session_end(struct session *s, const struct td_frame *f)
{
	struct finished fin;
	struct td_end *e;
	struct td_done d;
	int ret;

	e = xmalloc(sizeof *e);
	if (td_msg_unpack_end(f, e) == -1 ||
	    e->ncpus != recording_params(s->rec)->ncpus) {
		free(e);
		return session_close(s, "malformed END");
	}
	recording_advance(s->rec, f->total);
	ret = recording_finish(s->rec, e->pages, e->ncpus, &fin);
	free(e);
	if (ret == -1)
		return session_failed(s);
	s->phase = SESSION_DONE;
	memset(&d, 0, sizeof d);
	d.file_size = fin.size;
	snprintf(d.path, sizeof d.path, "%s", fin.path);
	if (td_msg_pack_done(&s->out, &d) == -1)
		return session_close(s, "cannot frame DONE");
	return SESSION_GO;
}

/* A TSYNC_PROBE is answered at once, with the time this read began. */
static enum session_verdict
session_probe(struct session *s, const struct td_frame *f, uint64_t rx_ns)
{
	struct td_tsync_probe p;

	if (td_msg_unpack_tsync_probe(f, &p) == -1)
		return session_close(s, "malformed TSYNC_PROBE");
	p.ref_ns = rx_ns;
	td_msg_pack_tsync_reply(&s->out, &p);
	s->urgent = true;
	return SESSION_GO;
}

/*
 * SECTION_OFFER, right after the WELCOME of a new recording (version 4):
 * answered at once with what the cache holds for this agent.  Not part of
 * the stream: an agent that resumes has framed its sections already.
 */
static enum session_verdict
session_offer(struct session *s, const struct td_frame *f)
{
	struct td_section_ref *r;
	uint16_t i;
	bool bad;

	if (!s->offer_ok)
		return session_close(s, "unexpected SECTION_OFFER");
	s->offer_ok = false;
	if (td_msg_unpack_section_offer(f, &s->offer) == -1)
		return session_close(s, "malformed SECTION_OFFER");
	s->have.count = s->offer.count;
	for (i = 0; i < s->offer.count; i++) {
		r = &s->offer.ref[i];
		s->have_fd[i] = hcache_have(s->cfg->hcache, s->identity, r,
		    &bad);
		s->have.have[i] = s->have_fd[i] != -1;
		if (bad)
			log_warnx("%s: the header cache's copy of section %u "
			    "was damaged: removed, the agent sends it",
			    s->label, r->id);
	}
	if (td_msg_pack_section_have(&s->out, &s->have) == -1)
		return session_close(s, "cannot frame SECTION_HAVE");
	return SESSION_GO;
}

/* Where the cache's copy of a section goes (SECTION_REF). */
struct session_ref_to {
	struct recording	*rec;
	bool			 failed;	/* the recording's fault */
};

static int
session_ref_cb(void *arg, const void *p, size_t n)
{
	struct session_ref_to *to = arg;

	if (recording_section_write(to->rec, p, n) == 0)
		return 0;
	to->failed = true;
	return -1;
}

/* SECTION_REF: a whole section, from the cache. */
static enum session_verdict
session_ref(struct session *s, const struct td_frame *f)
{
	struct session_ref_to to = { s->rec, false };
	struct td_section_ref r;
	char err[256];
	int i, fd = -1;

	if (s->version < 4)
		return session_close(s, "SECTION_REF before version 4");
	if (td_msg_unpack_section_ref(f, &r) == -1)
		return session_close(s, "malformed SECTION_REF");
	if (s->cfg->hcache == NULL)
		return session_close(s, "SECTION_REF, but the header cache "
		    "is off");
	if (recording_section_begin(s->rec, r.id) == -1)
		return session_failed(s);
	/* the copy opened for the offer, which no eviction can take */
	for (i = 0; i < s->offer.count; i++)
		if (s->have_fd[i] != -1 && s->offer.ref[i].id == r.id &&
		    memcmp(s->offer.ref[i].sha, r.sha, sizeof r.sha) == 0 &&
		    s->offer.ref[i].length == r.length) {
			fd = s->have_fd[i];
			s->have_fd[i] = -1;
			break;
		}
	if (hcache_read(s->cfg->hcache, s->identity, &r, fd, session_ref_cb,
	    &to, err, sizeof err) == -1) {
		if (to.failed)
			return session_failed(s);
		return session_close(s, err);
	}
	if (recording_section_end(s->rec) == -1)
		return session_failed(s);
	return SESSION_GO;
}

/* One whole frame of a streaming session. */
static enum session_verdict
session_stream_frame(struct session *s, const struct td_frame *f,
    uint64_t rx_ns)
{
	struct td_tsync_sample t;
	struct td_section_z sz;
	struct td_pages_z pz;
	const uint8_t *p, *raw;
	uint16_t id;
	size_t n;
	int ret;

	if (f->type != TD_MSG_SECTION_OFFER)
		s->offer_ok = false;
	switch (f->type) {
	case TD_MSG_KEEPALIVE:
		return SESSION_GO;
	case TD_MSG_PAGES_Z:
		if (td_msg_unpack_pages_z(f, &pz) == -1)
			return session_close(s, "malformed PAGES_Z");
		ret = recording_chunk(s->rec, pz.cpu, pz.first_seq,
		    (uint8_t)pz.codec, pz.data, pz.len, pz.count);
		break;
	case TD_MSG_SECTION_DATA_Z:
		if (td_msg_unpack_section_z(f, &sz) == -1)
			return session_close(s, "malformed SECTION_DATA_Z");
		ret = recording_section_z(s->rec, (uint8_t)sz.codec, sz.data,
		    sz.len, sz.raw_len, &raw);
		if (ret == 0)
			session_hcache_keep(s, raw, sz.raw_len);
		break;
	case TD_MSG_SECTION:
		if (td_msg_unpack_section(f, &id) == -1)
			return session_close(s, "bad or repeated SECTION");
		ret = recording_section_begin(s->rec, id);
		if (ret == 0)
			session_hcache_keep_begin(s, id);
		break;
	case TD_MSG_SECTION_END:
		ret = recording_section_end(s->rec);
		if (ret == 0)
			session_hcache_keep_end(s);
		break;
	case TD_MSG_SECTION_OFFER:
		return session_offer(s, f);
	case TD_MSG_SECTION_REF:
		return session_ref(s, f);
	case TD_MSG_OPTION:
		if (td_msg_unpack_option(f, &id, &p, &n) == -1)
			return session_close(s, "bad OPTION");
		ret = recording_option(s->rec, id, p, n);
		break;
	case TD_MSG_END:
		return session_end(s, f);
	case TD_MSG_TSYNC_PROBE:
		return session_probe(s, f, rx_ns);
	case TD_MSG_CMDLINES:
		if (s->version < 6)
			return session_close(s, "CMDLINES before version 6");
		recording_cmdlines(s->rec, f->payload, f->len);
		return SESSION_GO;
	case TD_MSG_TSYNC_SAMPLE:
		if (td_msg_unpack_tsync_sample(f, &t) == -1)
			return session_close(s, "malformed TSYNC_SAMPLE");
		recording_sample(s->rec, &t);
		return SESSION_GO;
	case TD_MSG_ERROR: {
		struct td_error e;
		char msg[TD_MAX_ERROR_LEN + 32];

		if (td_msg_unpack_error(f, &e) == -1)
			snprintf(msg, sizeof msg, "malformed ERROR");
		else
			snprintf(msg, sizeof msg, "agent error %u: %s",
			    e.code, e.text);
		return session_close(s, msg);
	}
	default:
		return session_close(s, "unexpected message");
	}
	return ret == -1 ? session_failed(s) : SESSION_GO;
}

/* One whole frame. */
static enum session_verdict
session_frame(struct session *s, const struct td_frame *f, uint64_t rx_ns,
    int conns)
{
	enum session_verdict v;
	char why[200];
	uint32_t code;

	if (s->phase == SESSION_HELLO && f->type == TD_MSG_STANDBY) {
		if (session_standby_admit(s, f, &code, why, sizeof why) == -1)
			return session_end_with(s, code, why);
		session_welcome(s, false, 0, 0);
		return SESSION_GO;
	}
	if (s->phase == SESSION_HELLO)
		return session_hello(s, f, conns);
	if (s->phase == SESSION_STANDBY)
		return session_standby_frame(s, f, why, sizeof why) == -1 ?
		    session_close(s, why) : SESSION_GO;
	if (s->phase != SESSION_STREAM)
		return session_close(s, "data after END");
	recording_received(s->rec, f->total);
	v = session_stream_frame(s, f, rx_ns);
	if (v != SESSION_GO || s->phase != SESSION_STREAM ||
	    !TD_MSG_IN_STREAM(f->type))
		return v;
	recording_advance(s->rec, f->total);
	if (recording_position(s->rec) - recording_acked(s->rec) >=
	    SESSION_CK_BYTES)
		return session_checkpoint(s);
	return SESSION_GO;
}

/*
 * The head of a SECTION_DATA or PAGES frame (PAGES: with its first
 * TD_PAGES_HEAD payload bytes) is in: the payload follows piece by piece.
 */
static enum session_verdict
session_bulk_begin(struct session *s, const uint8_t *p,
    const struct td_frame *f)
{
	struct td_pages pg;

	recording_received(s->rec, f->total);
	s->offer_ok = false;
	s->bulk_type = f->type;
	s->bulk_left = f->len;
	s->bulk_total = f->total;
	if (f->type == TD_MSG_SECTION_DATA)
		return SESSION_GO;
	if (td_msg_unpack_pages_head(p + TD_FRAME_HEADER, f->len,
	    s->page_size, &pg) == -1)
		return session_close(s, "malformed PAGES");
	if (recording_pages_begin(s->rec, pg.cpu, pg.first_seq) == -1)
		return session_failed(s);
	s->bulk_cpu = pg.cpu;
	s->bulk_left = pg.len;
	return SESSION_GO;
}

/* The payload of a bulk frame, n bytes of it (PAGES: one page). */
static enum session_verdict
session_bulk(struct session *s, const uint8_t *p, size_t n)
{
	int ret;

	if (s->bulk_type == TD_MSG_PAGES)
		ret = recording_page(s->rec, s->bulk_cpu, p);
	else if ((ret = recording_section_write(s->rec, p, n)) == 0)
		session_hcache_keep(s, p, n);
	if (ret == -1)
		return session_failed(s);
	s->bulk_left -= n;
	if (s->bulk_left > 0)
		return SESSION_GO;
	/* a whole frame counts in the stream like any other */
	s->bulk_type = 0;
	recording_advance(s->rec, s->bulk_total);
	if (recording_position(s->rec) - recording_acked(s->rec) >=
	    SESSION_CK_BYTES)
		return session_checkpoint(s);
	return SESSION_GO;
}

size_t
session_want(const struct session *s, bool *more)
{
	*more = false;
	if (s->bulk_type == TD_MSG_PAGES)
		return s->page_size;
	if (s->bulk_type == TD_MSG_SECTION_DATA) {
		*more = true;
		return 1;
	}
	return s->want;
}

size_t
session_expands(const struct session *s, const uint8_t *p, size_t n)
{
	struct td_pages_z pz;
	struct td_frame f;

	if (s->phase != SESSION_STREAM || s->bulk_type != 0 || s->rec == NULL ||
	    td_frame_parse(p, n, &f) != 1 || f.type != TD_MSG_PAGES_Z ||
	    td_msg_unpack_pages_z(&f, &pz) == -1)
		return 0;
	return recording_chunk_mem(s->rec, pz.count);
}

ssize_t
session_input(struct session *s, const uint8_t *p, size_t n, uint64_t rx_ns,
    int conns, size_t *cost, enum session_verdict *v)
{
	struct td_frame f;
	uint64_t pages;
	size_t k, head;
	char msg[128];
	int r;

	*v = SESSION_GO;
	if (s->phase == SESSION_OVER) {
		*v = SESSION_QUIET;
		return -1;
	}
	if (s->bulk_type != 0) {
		k = s->bulk_type == TD_MSG_PAGES ? s->page_size :
		    n < s->bulk_left ? n : s->bulk_left;
		*cost += k;
		if ((*v = session_bulk(s, p, k)) != SESSION_GO)
			return -1;
		return (ssize_t)k;
	}
	r = td_frame_parse(p, TD_FRAME_HEADER, &f);
	if (r == -1) {
		snprintf(msg, sizeof msg, "bad frame header (type %u)",
		    (unsigned)(p[4] << 8 | p[5]));
		*v = session_close(s, msg);
		return -1;
	}
	/* not a HELLO: refused now, not once up to 1 MiB is in */
	if (s->phase == SESSION_HELLO && f.type != TD_MSG_HELLO &&
	    f.type != TD_MSG_STANDBY) {
		*v = session_close(s, "expected HELLO first");
		return -1;
	}
	if (s->phase == SESSION_STANDBY && f.type != TD_MSG_KEEPALIVE &&
	    f.type != TD_MSG_ANSWER && f.type != TD_MSG_ARMED &&
	    f.type != TD_MSG_TRIGGERED) {
		*v = session_close(s, "unexpected frame from a standby agent");
		return -1;
	}
	if (s->phase == SESSION_STREAM && (f.type == TD_MSG_PAGES ||
	    f.type == TD_MSG_SECTION_DATA)) {
		head = TD_FRAME_HEADER +
		    (f.type == TD_MSG_PAGES ? TD_PAGES_HEAD : 0);
		if (n < head) {
			s->want = head;
			return 0;
		}
		s->want = TD_FRAME_HEADER;
		if ((*v = session_bulk_begin(s, p, &f)) != SESSION_GO)
			return -1;
		return (ssize_t)head;
	}
	if (n < f.total) {
		/* go on only when the whole frame is in */
		s->want = f.total;
		return 0;
	}
	s->want = TD_FRAME_HEADER;
	if (td_frame_parse(p, f.total, &f) != 1) {
		*v = session_close(s, "bad frame");
		return -1;
	}
	pages = s->rec != NULL ? recording_pages(s->rec) : 0;
	if ((*v = session_frame(s, &f, rx_ns, conns)) != SESSION_GO)
		return -1;
	/* what it cost: PAGES_Z may expand 1 KB to 10 pages */
	*cost += f.total;
	if (s->rec != NULL)
		*cost += (size_t)(recording_pages(s->rec) - pages) *
		    s->page_size;
	return (ssize_t)f.total;
}

enum session_verdict
session_lost(struct session *s, const char *why)
{
	if (s->phase == SESSION_DONE)
		return session_end_with(s, TD_ERR_FATAL, NULL);
	if (s->phase != SESSION_STREAM)
		return session_close(s, why);
	/* nobody resumes it: what arrived, whole pages, is kept */
	if (s->cfg->resume_wait == 0)
		return session_close(s, why);
	if (s->bulk_type != 0)
		recording_rewind(s->rec, NULL, 0);
	s->bulk_type = 0;
	recording_detach(s->rec, why);
	s->rec = NULL;
	s->phase = SESSION_OVER;
	return SESSION_QUIET;
}

enum session_verdict
session_shutdown(struct session *s)
{
	bool paused;

	if (s->phase == SESSION_OVER)
		return SESSION_QUIET;
	if (s->phase != SESSION_STREAM || s->cfg->resume_wait == 0)
		return session_end_with(s, TD_ERR_RETRY,
		    "tdlisten is shutting down");
	/* a paused one has its ERROR (retry) on the way already */
	paused = recording_rewound(s->rec);
	/* mid-frame, the writer holds part of a frame: the last
	   checkpoint is what the next tdlisten takes up */
	if (s->bulk_type != 0 && !paused)
		recording_rewind(s->rec, NULL, 0);
	s->bulk_type = 0;
	recording_leave(s->rec);
	s->rec = NULL;
	s->phase = SESSION_OVER;
	if (paused)
		return SESSION_QUIET;
	td_buf_reset(&s->err);
	td_msg_pack_error(&s->err, TD_ERR_RETRY,
	    "tdlisten is shutting down: come back later");
	return SESSION_CLOSE;
}
