/*
 * recording-piece.c: the pieces of a recording (tdlisten --rotate): the
 * copy of a finished piece's header sections and of its producer's
 * options into the next piece's writer (see recording-local.h).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "listener.h"
#include "recording-local.h"
#include "rotate.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdread.h"
#include "xmalloc.h"
#include "banned.h"

static struct event_base *recording_base;

void
recording_set_base(struct event_base *base)
{
	recording_base = base;
}

struct event_base *
recording_loop(void)
{
	return recording_base;
}

bool
recording_busy(const struct recording *r)
{
	return rotate_busy(r);
}

void
recording_set_ready(struct recording *r, void (*ready)(void *))
{
	r->ready = ready;
}

void
recording_ready(struct recording *r)
{
	if (r->ready != NULL && r->owner != NULL)
		r->ready(r->owner);
}

/*
 * A copy of the header sections of a finished piece into the next one's
 * writer (recording_piece_copy_step()), and then the producer's options.
 * A cut copies TD_ROTATE_COPY_CHUNK per turn of the loop (rotate.c) while
 * its producer is not read (recording_busy()): a peer's sections
 * may be 256 MiB each, which compress to nothing, and copied at once they
 * stalled every other session, the status page and the time sync for the
 * whole copy (1.3 s for 510 MiB, issue 31, row 3).  Only a compressed
 * block the writer cannot take as it is (it does not compress) is read
 * whole (td_read_section()).
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
