/*
 * recording-piece.c: the mechanism of a recording's pieces (see
 * recording-piece.h; rotate.c is the policy: when, names, --keep,
 * recovery): the seal that ends a piece (and a recording), the cut to a
 * next piece (a checkpoint at the cut, the seal, the next writer with the
 * header sections and the producer's options of the piece before, its
 * lock and first checkpoint), what the piece being written holds.
 *
 * A cut copies the header sections a step (TD_ROTATE_COPY_CHUNK) a turn
 * of the loop from an event of its own, its producer not read meanwhile
 * (recording_busy()): a peer's sections may be 256 MiB each, which
 * compress to nothing, and copied at once they stalled every other
 * session, the status page and the time sync for the whole copy (1.2 to
 * 2.4 s for 1020 MiB, issue 31, row 3).
 *
 * Why the copy reads the header sections back from the piece just
 * finished rather than keeping them: kallsyms is megabytes, a recording
 * recovered after a crash of tdlisten has nothing of them in memory, and
 * the finished piece holds exactly the bytes its writer was handed.  A
 * section goes over as it is stored (compressed or not), in pieces of
 * TD_ROTATE_COPY_CHUNK counted in the recording's budget (issue 31, row
 * 3: a peer's sections may be 256 MiB each, which compress to nothing).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "buf.h"
#include "checkpoint.h"
#include "guests.h"
#include "listener.h"
#include "log.h"
#include "recording-local.h"
#include "recording-piece.h"
#include "reclock.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "timeline.h"
#include "xmalloc.h"
#include "banned.h"

/*
 * A cut under way: the copy into the next piece (r->file is its writer),
 * its next step's event, the piece finished (path, state, bytes) and who
 * hears that it is in place.
 */
struct piece_cut {
	struct piece_copy *pc;
	struct event	*ev;
	char		*old;
	char		*oldstate;
	uint64_t	 size;
	recording_piece_done_cb done;
};

/*
 * The pieces of a recording: when the one being written began, the bytes
 * of the header sections copied into it (0: none, the first piece), the
 * producer's latest command lines (recording_cmdlines()), a cut under
 * way, and why one failed once its piece was in place.
 */
struct piece_state {
	struct timespec	 since;
	uint64_t	 headers;
	uint8_t		*cmd;		/* u64 length, then the text */
	size_t		 ncmd;		/* 0: none yet */
	struct piece_cut *cut;		/* NULL: none */
	char		*broken;	/* NULL: none */
};

static struct event_base *recording_base;

void
recording_set_base(struct event_base *base)
{
	recording_base = base;
}

/* recording.h: what --rotate decides, asked by recording.c */
const struct recording_policy *recording_policy;

void
recording_set_policy(const struct recording_policy *p)
{
	recording_policy = p;
}

bool
recording_busy(const struct recording *r)
{
	return r->piece != NULL && r->piece->cut != NULL;
}

void
recording_set_ready(struct recording *r, void (*ready)(void *))
{
	r->ready = ready;
}

/* r's cut is over (copied, or failed): its owner hears it.  r may go. */
static void
piece_ready(struct recording *r)
{
	if (r->ready != NULL && r->owner != NULL)
		r->ready(r->owner);
}

/*
 * A copy of the header sections of a finished piece into the next one's
 * writer (recording_piece_copy_step()), and then the producer's options.
 * Only a compressed block the writer cannot take as it is (it does not
 * compress) is read whole (td_read_section()).
 */
struct piece_copy {
	struct td_read	*rd;
	struct td_file	*f;		/* the next piece's writer */
	char		*old;		/* the piece finished */
	char		*path;		/* ... and the next */
	bool		 no_tsync;	/* the producer's DATE is kept */
	uint64_t	 file_trace_id;	/* !0: the listener writes TRACEID */
	struct td_buf	 b;		/* one piece of a section */
	int		 id;		/* the section being copied */
	int		 last;		/* ... and the last to copy */
	bool		 open;		/* its copy began */
	bool		 z;		/* stored compressed: as it is */
	uint64_t	 off;		/* in rd, of what is left of it */
	uint64_t	 left;
	uint64_t	 copied;	/* stored bytes copied so far */
};

/* Which options of a finished piece go on into the next: the producer's. */
static int
piece_option_cb(void *arg, uint16_t id, const void *p, size_t n)
{
	struct piece_copy *cp = arg;

	switch (id) {
	case TD_OPT_DONE: case TD_OPT_BUFFER: case TD_OPT_CPUCOUNT:
	case TD_OPT_TIME_SHIFT: case TD_OPT_GUEST: case TD_OPT_TD_TSYNC:
		return 0;	/* the writer's, or the listener's (sealed) */
	case TD_OPT_DATE:
		if (!cp->no_tsync)
			return 0;
		break;
	case TD_OPT_TRACEID:
		if (cp->file_trace_id != 0)
			return 0;
		break;
	default:
		if (id >= TD_OPT_STRINGS && id <= TD_OPT_BUFFER_TEXT)
			return 0;
	}
	return td_file_add_option(cp->f, id, p, n) == -1 ? -1 : 0;
}

/*
 * The parameters of the piece finished as rd for the next, this
 * listener's bounds and shared context.
 */
static void
piece_params(const struct listener_config *c, struct td_read *rd,
    struct td_file_params *fp)
{
	memset(fp, 0, sizeof *fp);
	fp->version = td_read_version(rd);
	fp->codec = td_read_codec(rd);
	fp->page_size = td_read_page_size(rd);
	fp->long_size = (uint8_t)td_read_long_size(rd);
	fp->ncpus = td_read_ncpus(rd);
	fp->clock = td_read_clock(rd);
	fp->codec_ctx = fp->codec == c->codec ? c->codec_ctx : NULL;
	fp->mode = c->file_mode;
	fp->chunk_mem = TD_WRITER_CHUNK_MEM;
	fp->spool_fds = TD_WRITER_SPOOL_FDS;
}

uint64_t
recording_piece_copy_mem(const struct piece_copy *job)
{
	return job == NULL ? 0 : sizeof *job + job->b.cap;
}

struct piece_copy *
recording_piece_copy_open(const struct listener_config *c, const char *old,
    const char *path, bool cmdlines, bool no_tsync, uint64_t file_trace_id,
    char *err, size_t errlen)
{
	struct td_file_params fp;
	struct piece_copy *job;
	int e;

	job = xcalloc(1, sizeof *job);
	job->no_tsync = no_tsync;
	job->file_trace_id = file_trace_id;
	if ((job->rd = td_read_open(old)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot read '%s' back: %s", old,
		    strerror(e));
		free(job);
		errno = e;
		return NULL;
	}
	piece_params(c, job->rd, &fp);
	if ((job->f = td_file_create(path, &fp)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot create '%s': %s", path,
		    strerror(e));
		td_read_close(job->rd);
		free(job);
		errno = e;
		return NULL;
	}
	td_buf_init(&job->b, TD_MAX_SECTION_SIZE);
	job->old = xstrdup(old);
	job->path = xstrdup(path);
	job->id = TD_OPT_HEADER_INFO;
	job->last = cmdlines ? TD_OPT_CMDLINES : TD_OPT_PRINTK;
	return job;
}

void
recording_piece_copy_free(struct piece_copy *job, bool abort)
{
	if (job == NULL)
		return;
	if (abort && job->f != NULL) {
		td_file_abort(job->f);
		td_file_free(job->f);
	}
	td_read_close(job->rd);
	td_buf_free(&job->b);
	free(job->old);
	free(job->path);
	free(job);
}

/* Begin the copy of section job->id: 0, or -1 with errno. */
static int
piece_copy_begin(struct piece_copy *job)
{
	struct td_buf *b = &job->b;
	struct td_file *f = job->f;

	if (td_read_section_span(job->rd, job->id, &job->off, &job->left,
	    &job->z) == -1)
		return -1;
	job->open = true;
	/* the writer has rd's codec (piece_params()) */
	if (job->z && td_file_section_raw_begin(f, job->id) == -1) {
		if (td_read_section(job->rd, job->id, b) == -1 ||
		    td_file_section_add(f, job->id, b->data, b->len) == -1)
			return -1;
		job->copied += b->len;
		td_buf_reset(b);
		job->open = false;	/* whole: the next section */
		job->id++;
		return 0;
	}
	if (!job->z && td_file_section_begin(f, job->id) == -1)
		return -1;
	td_buf_reset(b);
	if (td_buf_add_zero(b, TD_ROTATE_COPY_CHUNK) == -1)
		return -1;
	return 0;
}

int
recording_piece_copy_step(struct piece_copy *job)
{
	struct td_file *f = job->f;
	uint64_t k;

	if (job->id > job->last) {
		if (td_read_options(job->rd, piece_option_cb, job) != 0)
			return -1;
		return 0;
	}
	if (!job->open)
		return piece_copy_begin(job) == -1 ? -1 : 1;
	if (job->left > 0) {
		k = job->left < TD_ROTATE_COPY_CHUNK ? job->left :
		    TD_ROTATE_COPY_CHUNK;
		if (td_read_bytes(job->rd, job->off, job->b.data, k) == -1 ||
		    (job->z ? td_file_section_raw_write(f, job->b.data, k) :
		    td_file_section_write(f, job->b.data, k)) == -1)
			return -1;
		job->off += k;
		job->left -= k;
		job->copied += k;
		return 1;
	}
	if ((job->z ? td_file_section_raw_end(f) :
	    td_file_section_end(f)) == -1)
		return -1;
	job->open = false;
	job->id++;
	return 1;
}

/* Say why job's copy failed (errno kept). */
void
recording_piece_copy_why(const struct piece_copy *job, char *err,
    size_t errlen)
{
	int e = errno;

	snprintf(err, errlen, "cannot copy the headers of '%s' into '%s': "
	    "%s", job->old, job->path, strerror(e));
	errno = e;
}

struct td_file *
recording_piece_copy_file(const struct piece_copy *job)
{
	return job->f;
}

uint64_t
recording_piece_copy_bytes(const struct piece_copy *job)
{
	return job->copied;
}

struct td_file *
recording_piece_copy_all(const struct listener_config *c, const char *old,
    const char *path, bool cmdlines, bool no_tsync, uint64_t file_trace_id,
    uint64_t *copied, char *err, size_t errlen)
{
	struct piece_copy *job;
	struct td_file *f;
	int ret, e;

	if ((job = recording_piece_copy_open(c, old, path, cmdlines, no_tsync,
	    file_trace_id, err, errlen)) == NULL)
		return NULL;
	while ((ret = recording_piece_copy_step(job)) == 1)
		;
	if (ret == -1) {
		recording_piece_copy_why(job, err, errlen);
		e = errno;
		recording_piece_copy_free(job, true);
		errno = e;
		return NULL;
	}
	*copied = job->copied;
	f = job->f;
	recording_piece_copy_free(job, false);
	return f;
}

/* r's piece state, made when first needed. */
static struct piece_state *
piece_get(struct recording *r)
{
	if (r->piece == NULL) {
		r->piece = xcalloc(1, sizeof *r->piece);
		clock_gettime(CLOCK_MONOTONIC, &r->piece->since);
	}
	return r->piece;
}

void
recording_cmdlines(struct recording *r, const void *p, size_t n)
{
	struct piece_state *ps;
	uint64_t len = n;

	if (r->cfg->rotate_bytes == 0 && r->cfg->rotate_secs == 0)
		return;
	ps = piece_get(r);
	free(ps->cmd);
	/* the section as the producer's would be: its size in its order */
	ps->cmd = xmalloc(sizeof len + n);
	memcpy(ps->cmd, &len, sizeof len);
	if (n > 0)
		memcpy(ps->cmd + sizeof len, p, n);
	ps->ncmd = sizeof len + n;
}

/* Free a cut (its writer is the recording's, or freed already). */
static void
piece_cut_free(struct piece_cut *cut)
{
	if (cut == NULL)
		return;
	if (cut->ev != NULL)
		event_free(cut->ev);
	recording_piece_copy_free(cut->pc, false);
	free(cut->old);
	free(cut->oldstate);
	free(cut);
}

uint64_t
recording_piece_mem(const struct recording *r)
{
	const struct piece_state *ps = r->piece;

	if (ps == NULL)
		return 0;
	return sizeof *ps + ps->ncmd + (ps->cut != NULL ? sizeof *ps->cut +
	    recording_piece_copy_mem(ps->cut->pc) : 0);
}

void
recording_piece_free(struct recording *r)
{
	if (r->piece == NULL)
		return;
	free(r->piece->cmd);
	free(r->piece->broken);
	/* its writer is the recording's (recording_cut_stop() first) */
	piece_cut_free(r->piece->cut);
	free(r->piece);
	r->piece = NULL;
}

const struct listener_config *
recording_config(const struct recording *r)
{
	return r->cfg;
}

void
recording_piece(struct recording *r, struct recording_piece *pi)
{
	struct timespec now;
	int i;

	memset(pi, 0, sizeof *pi);
	if (r->file == NULL || recording_busy(r) ||
	    td_file_in_section(r->file))
		return;
	piece_get(r);	/* the first piece's span begins at its first look */
	pi->whole = true;
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_PRINTK; i++)
		if (!td_file_has_section(r->file, i))
			pi->whole = false;
	for (i = 0; i < (int)r->p.ncpus; i++)
		pi->page_bytes += td_file_cpu_pages(r->file, i) *
		    r->p.page_size;
	pi->written = td_file_written(r->file);
	clock_gettime(CLOCK_MONOTONIC, &now);
	pi->headers = r->piece->headers;
	pi->secs = (uint64_t)(now.tv_sec - r->piece->since.tv_sec);
}

int
recording_seal(struct recording *r)
{
	if (r->cfg->tsync_interval != TD_TSYNC_OFF && !r->no_tsync &&
	    timeline_write(r->ts, r->guests, r->file, &r->p, r->trace_id,
	    r->label) == -1)
		return -1;
	if (r->p.file_trace_id != 0 && td_file_add_option(r->file,
	    TD_OPT_TRACEID, &r->p.file_trace_id,
	    sizeof r->p.file_trace_id) == -1)
		return -1;
	if (guests_options(r->guests, r->file) == -1)
		return -1;
	return td_file_finish(r->file);
}

/* Remove the next piece's placeholder (or the writer's .part) at path. */
static void
piece_unclaim(const char *path)
{
	char *part;

	xasprintf(&part, "%s.part", path);
	unlink(part);
	free(part);
}

/*
 * The end of r's cut: the sections and options are in the next piece's
 * writer (r->file), which takes the place of the piece finished: its
 * lock, its first checkpoint; the piece finished is done.
 */
static void
piece_cut_end(struct recording *r, struct piece_cut *cut)
{
	char *part;
	uint32_t n;
	int fd;

	for (n = 0; n < r->p.ncpus; n++)
		r->cpu[n].piece_seq = r->cpu[n].next_seq;
	/* the new piece's lock, then its first checkpoint */
	xasprintf(&part, "%s.part", r->path);
	fd = reclock_take(part);
	free(part);
	reclock_release(r->lockfd);
	r->lockfd = fd;
	if (recording_write_state(r) == -1)
		log_warn("%s: cannot write '%s' (the next checkpoint tries "
		    "again)", r->label, r->state_path);
	checkpoint_remove(cut->oldstate);
	clock_gettime(CLOCK_MONOTONIC, &r->piece->since);
	r->piece->headers = recording_piece_copy_bytes(cut->pc);
	cut->done(r, cut->old, cut->size);
	log_info("%s: next piece '%s'", r->label, r->path);
}

/*
 * r's cut stopped after its piece was put in place (err: why): the next
 * piece's files go, the piece is done, and r cannot go on.
 */
static void
piece_cut_fail(struct recording *r, struct piece_cut *cut, const char *err)
{
	recording_piece_copy_free(cut->pc, true);
	cut->pc = NULL;
	r->file = NULL;
	piece_unclaim(r->path);
	checkpoint_remove(cut->oldstate);
	cut->done(r, cut->old, cut->size);
	free(r->piece->broken);
	r->piece->broken = xstrdup(err);
}

/*
 * Copy on with r's cut until it is done (all: at once, else one step),
 * then end it.  0 while it goes on; 1 when it ended (r->piece->broken:
 * how).
 */
static int
piece_cut_steps(struct recording *r, bool all)
{
	struct piece_cut *cut = r->piece->cut;
	char err[700];
	int ret;

	do {
		ret = recording_piece_copy_step(cut->pc);
	} while (ret == 1 && all);
	if (ret == 1)
		return 0;
	r->piece->cut = NULL;
	if (ret == -1) {
		recording_piece_copy_why(cut->pc, err, sizeof err);
		piece_cut_fail(r, cut, err);
	} else
		piece_cut_end(r, cut);
	piece_cut_free(cut);
	return 1;
}

/*
 * A turn of the loop: the next step of r's copy, and the turn after for
 * the rest.  When it ends the owner hears it (piece_ready(): it reads
 * its producer again, or closes it), last: r may be gone then.
 */
static void
piece_step_cb(evutil_socket_t fd, short what, void *arg)
{
	struct recording *r = arg;
	struct timeval now = { 0, 0 };

	if (piece_cut_steps(r, false) == 0) {
		evtimer_add(r->piece->cut->ev, &now);
		return;
	}
	piece_ready(r);
}

const char *
recording_cut_broken(const struct recording *r)
{
	return r->piece != NULL ? r->piece->broken : NULL;
}

void
recording_cut_settle(struct recording *r)
{
	if (recording_busy(r))
		piece_cut_steps(r, true);
}

void
recording_cut_stop(struct recording *r, bool leave)
{
	struct piece_cut *cut;

	if (!recording_busy(r))
		return;
	cut = r->piece->cut;
	r->piece->cut = NULL;
	if (!leave) {
		piece_cut_fail(r, cut, "the recording ended in a cut");
		piece_cut_free(cut);
		return;
	}
	/*
	 * tdlisten stops: as if it stopped in the cut.  The cut's state and
	 * the piece in place are what the next tdlisten takes up
	 * (rotate_recover()), which begins the next piece again.
	 */
	recording_piece_copy_free(cut->pc, true);
	cut->pc = NULL;
	r->file = NULL;
	piece_unclaim(r->path);
	free(r->path);
	free(r->state_path);
	r->path = cut->old;
	r->state_path = cut->oldstate;
	cut->old = cut->oldstate = NULL;
	piece_cut_free(cut);
}

/*
 * Seal r's piece for a cut: its CMDLINES first when the producer has not
 * sent its own yet (the latest set it sent during the recording, version
 * 6, else an empty one: its tasks show as <...>; the next piece does not
 * take this section over).  *cmdlines: whether the producer's is there.
 */
static int
piece_seal_for_cut(struct recording *r, bool *cmdlines)
{
	struct piece_state *ps = piece_get(r);
	uint64_t zero = 0;

	*cmdlines = td_file_has_section(r->file, TD_OPT_CMDLINES);
	if (!*cmdlines && (ps->ncmd > 0 ? td_file_section_add(r->file,
	    TD_OPT_CMDLINES, ps->cmd, ps->ncmd) :
	    td_file_section_add(r->file, TD_OPT_CMDLINES, &zero,
	    sizeof zero)) == -1)
		return -1;
	return recording_seal(r);
}

int
recording_cut(struct recording *r, const char *next,
    recording_piece_done_cb done, bool *sealed, char *err, size_t errlen)
{
	struct piece_cut *cut;
	struct piece_copy *pc;
	struct timeval now = { 0, 0 };
	char *old, *oldstate;
	uint64_t size;
	bool cmdlines;
	int e;

	*sealed = false;
	/*
	 * A checkpoint at the cut first: a crash after the piece is in
	 * place and before the next one's first checkpoint leaves this
	 * state with the piece whole, which rotate_recover() takes up.
	 */
	if (recording_write_state(r) == -1) {
		e = errno;
		snprintf(err, errlen, "cannot write '%s': %s", r->state_path,
		    strerror(e));
		errno = e;
		return -1;
	}
	r->acked = r->position;
	if (piece_seal_for_cut(r, &cmdlines) == -1) {
		e = errno;
		snprintf(err, errlen, "cannot finish '%s': %s", r->path,
		    strerror(e));
		errno = e;
		return -1;
	}
	/* the piece is in place: from here on r goes on, or ends */
	*sealed = true;
	size = td_file_size(r->file);
	old = r->path;
	oldstate = r->state_path;
	r->path = xstrdup(next);
	xasprintf(&r->state_path, "%s.state", next);
	td_file_free(r->file);
	r->file = NULL;
	pc = recording_piece_copy_open(r->cfg, old, next, cmdlines,
	    r->no_tsync, r->p.file_trace_id, err, errlen);
	if (pc == NULL) {
		e = errno;
		piece_unclaim(next);
		checkpoint_remove(oldstate);
		done(r, old, size);
		free(old);
		free(oldstate);
		errno = e;
		return -1;
	}
	cut = xcalloc(1, sizeof *cut);
	cut->pc = pc;
	cut->old = old;
	cut->oldstate = oldstate;
	cut->size = size;
	cut->done = done;
	r->file = recording_piece_copy_file(pc);
	r->piece->cut = cut;
	/* without a loop (fuzz-session) at once, else a step a turn */
	if (recording_base == NULL) {
		piece_cut_steps(r, true);
		if (r->piece->broken == NULL)
			return 0;
		snprintf(err, errlen, "%s", r->piece->broken);
		errno = EIO;
		return -1;
	}
	cut->ev = evtimer_new(recording_base, piece_step_cb, r);
	evtimer_add(cut->ev, &now);
	log_debug("%s: cutting: the sections of '%s' go into '%s' a piece "
	    "of %u bytes a turn", r->label, old, next, TD_ROTATE_COPY_CHUNK);
	return 0;
}
