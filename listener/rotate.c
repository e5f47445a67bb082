/*
 * rotate.c: a recording as a series of pieces (see rotate.h).
 *
 * A cut copies the header sections into the next piece a step of
 * recording-piece.c (TD_ROTATE_COPY_CHUNK) a turn of the loop, its
 * producer not read meanwhile (issue 31, row 3: a peer's sections may be
 * 256 MiB each, which compress to nothing; copied at once they stalled
 * the loop for the whole copy).
 *
 * Why each piece carries every time-sync sample of the recording so far
 * (TIME_SHIFT through timeline_write()): trace-cmd interpolates between
 * the samples around an event and holds the first or last offset beyond
 * them, so samples outside a piece's span change nothing in it, and a
 * piece that began between two rounds still has the one before its first
 * event; the last piece gets the samples of the end as the unrotated file
 * would.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "buf.h"
#include "checkpoint.h"
#include "guests.h"
#include "listener.h"
#include "log.h"
#include "output.h"
#include "recording.h"
#include "recording-local.h"
#include "reclock.h"
#include "size.h"
#include "rotate.h"
#include "tally.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "timeline.h"
#include "timesync.h"
#include "xmalloc.h"
#include "banned.h"

/*
 * A recording's pieces: when the one being written began, the bytes of
 * the header sections copied into it (0: none, the first piece), and the
 * producer's latest command lines (rotate_cmdlines()).
 */
/*
 * A cut under way: the copy into the next piece (r->file is its writer),
 * its next step's event, and the piece finished (path, state, bytes).
 */
struct rotate_cut {
	struct piece_copy *pc;
	struct event	*ev;
	char		*old;
	char		*oldstate;
	size_t		 baselen;
	uint64_t	 size;
};

struct rotate {
	struct timespec	 since;
	uint64_t	 headers;
	uint8_t		*cmd;		/* u64 length, then the text */
	size_t		 ncmd;		/* 0: none yet */
	struct rotate_cut *job;		/* a cut copying, or NULL */
	char		*broken;	/* why a cut failed after the seal */
};

/* r's rotation state, made when first needed. */
static struct rotate *
rotate_get(struct recording *r)
{
	if (r->rot == NULL) {
		r->rot = xcalloc(1, sizeof *r->rot);
		clock_gettime(CLOCK_MONOTONIC, &r->rot->since);
	}
	return r->rot;
}

void
rotate_cmdlines(struct recording *r, const void *p, size_t n)
{
	struct rotate *rot;
	uint64_t len = n;

	if (r->cfg->rotate_bytes == 0 && r->cfg->rotate_secs == 0)
		return;
	rot = rotate_get(r);
	free(rot->cmd);
	/* the section as the producer's would be: its size in its order */
	rot->cmd = xmalloc(sizeof len + n);
	memcpy(rot->cmd, &len, sizeof len);
	if (n > 0)
		memcpy(rot->cmd + sizeof len, p, n);
	rot->ncmd = sizeof len + n;
}

uint64_t
rotate_mem(const struct rotate *rot)
{
	return rot == NULL ? 0 : sizeof *rot + rot->ncmd +
	    (rot->job != NULL ? sizeof *rot->job +
	    recording_piece_copy_mem(rot->job->pc) : 0);
}

/* A finished piece of a recording, for --keep. */
struct rotate_old {
	char		*path;
	uint32_t	 n;
	uint64_t	 size;
};

int
rotate_parse(const char *s, uint64_t *bytes, uint32_t *secs, char *err,
    size_t errlen)
{
	uint64_t v;

	*bytes = 0;
	*secs = 0;
	if (td_parse_duration(s, &v) == 0) {
		if (v < TD_ROTATE_MIN_SECS || v > TD_ROTATE_MAX_SECS) {
			snprintf(err, errlen, "--rotate '%s': a duration from "
			    "%u s to %u h", s, TD_ROTATE_MIN_SECS,
			    TD_ROTATE_MAX_SECS / 3600);
			return -1;
		}
		*secs = (uint32_t)v;
		return 0;
	}
	if (td_parse_size(s, bytes) == -1) {
		snprintf(err, errlen, "--rotate '%s': a size (64M, 1G) or a "
		    "duration (30s, 10m, 1h)", s != NULL ? s : "");
		return -1;
	}
	if (*bytes < TD_ROTATE_MIN_SIZE) {
		snprintf(err, errlen, "--rotate '%s': pieces of at least %u "
		    "MiB (each repeats the header sections)", s,
		    TD_ROTATE_MIN_SIZE >> 20);
		*bytes = 0;
		return -1;
	}
	return 0;
}

int
rotate_parse_keep(const char *s, uint32_t *n, uint64_t *bytes, char *err,
    size_t errlen)
{
	unsigned long long v;
	char *end;

	*n = 0;
	*bytes = 0;
	if (s != NULL && s[0] >= '0' && s[0] <= '9') {
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno == 0 && *end == '\0' && v >= 1 &&
		    v <= TD_ROTATE_MAX_PIECE) {
			*n = (uint32_t)v;
			return 0;
		}
		if (errno == 0 && *end != '\0' && td_parse_size(s,
		    bytes) == 0 && *bytes > 0)
			return 0;
	}
	*bytes = 0;
	snprintf(err, errlen, "--keep '%s': a number of pieces (1 to %u) or a "
	    "size (K, M, G)", s != NULL ? s : "", TD_ROTATE_MAX_PIECE);
	return -1;
}

uint32_t
rotate_piece(const char *path, size_t *baselen)
{
	size_t n = strlen(path), i, d = 0;
	unsigned long v = 0;

	if (n < 10 || strcmp(path + n - 4, ".dat") != 0)
		return 0;
	for (i = n - 4; i > 0 && path[i - 1] >= '0' && path[i - 1] <= '9';
	    i--)
		d++;
	if (d < 4 || d > 6 || i == 0 || path[i - 1] != '-')
		return 0;
	v = strtoul(path + i, NULL, 10);
	if (v == 0 || v > TD_ROTATE_MAX_PIECE)
		return 0;
	*baselen = i - 1;
	return (uint32_t)v;
}

/* "BASE-NNNN.dat" for piece n of the piece at path (base: baselen). */
static char *
rotate_name(const char *path, size_t baselen, uint32_t n)
{
	char *p;

	xasprintf(&p, "%.*s-%04u.dat", (int)baselen, path, n);
	return p;
}

int
rotate_seal(struct recording *r)
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

/*
 * Whether r's piece is due: --rotate's size or span reached, and pages in
 * it that hold at least as many bytes as the header sections copied into
 * it.  Every piece repeats the sections (kallsyms: megabytes; a peer may
 * send 256 MiB each, which compress to nothing): without that minimum a
 * piece was cut after one page once they alone passed --rotate, and 20
 * pages cost 672 MiB of copies (issue 31, row 3).  With it the copies are
 * at most the data received; the first piece, which copied nothing, has
 * no minimum.
 */
static bool
rotate_due(struct recording *r)
{
	const struct listener_config *c = r->cfg;
	struct timespec now;
	uint64_t pages = 0;
	int i;

	rotate_get(r);
	if (td_file_in_section(r->file))
		return false;
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_PRINTK; i++)
		if (!td_file_has_section(r->file, i))
			return false;
	for (i = 0; i < (int)r->p.ncpus; i++)
		pages += td_file_cpu_pages(r->file, i);
	if (pages == 0 || pages * r->p.page_size < r->rot->headers)
		return false;
	if (c->rotate_bytes > 0 && td_file_written(r->file) >= c->rotate_bytes)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return c->rotate_secs > 0 &&
	    now.tv_sec - r->rot->since.tv_sec >= (time_t)c->rotate_secs;
}

/*
 * Claim the name of the next piece after n of path (a placeholder
 * NAME.part, as output_path() does): a name taken already is passed over.
 * NULL with errno.
 */
static char *
rotate_claim(const struct listener_config *c, const char *path,
    size_t baselen, uint32_t n)
{
	struct stat st;
	char *p, *part;
	int fd, i;

	for (i = 1; i <= 1000 && n + (uint32_t)i <= TD_ROTATE_MAX_PIECE; i++) {
		p = rotate_name(path, baselen, n + (uint32_t)i);
		xasprintf(&part, "%s.part", p);
		fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, c->file_mode);
		if (fd == -1 && errno != EEXIST) {
			free(part);
			free(p);
			return NULL;
		}
		if (fd != -1) {
			close(fd);
			if (lstat(p, &st) == -1 && errno == ENOENT) {
				free(part);
				return p;
			}
			unlink(part);
		}
		free(part);
		free(p);
	}
	errno = EEXIST;
	return NULL;
}

/* Remove the placeholder or the writer's files of path. */
static void
rotate_unclaim(const char *path)
{
	char *part;

	xasprintf(&part, "%s.part", path);
	unlink(part);
	free(part);
}

static int
rotate_old_cmp(const void *a, const void *b)
{
	const struct rotate_old *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;	/* newest first */
}

/*
 * --keep: remove the oldest finished pieces of r beyond the limit (path:
 * any piece of r, base: its name's length before "-NNNN").
 */
static void
rotate_keep(struct recording *r, const char *path, size_t baselen)
{
	const struct listener_config *c = r->cfg;
	const char *slash = strrchr(path, '/');
	struct rotate_old *old = NULL;
	struct dirent *d;
	struct stat st;
	uint64_t total = 0;
	size_t dl, nold = 0, cap = 0, i, bl;
	char *dir, *p, *side;
	DIR *dp;

	if ((c->keep_n == 0 && c->keep_bytes == 0) || slash == NULL)
		return;
	dl = (size_t)(slash - path);
	xasprintf(&dir, "%.*s", (int)dl, path);
	if ((dp = opendir(dir)) == NULL) {
		free(dir);
		return;
	}
	while ((d = readdir(dp)) != NULL && nold < TD_ROTATE_SCAN) {
		xasprintf(&p, "%s/%s", dir, d->d_name);
		if (strncmp(p, path, baselen) != 0 ||
		    rotate_piece(p, &bl) == 0 || bl != baselen ||
		    lstat(p, &st) == -1 || !S_ISREG(st.st_mode)) {
			free(p);
			continue;
		}
		if (nold == cap) {
			cap = cap ? cap * 2 : 16;
			old = xreallocarray(old, cap, sizeof *old);
		}
		old[nold].path = p;
		old[nold].n = rotate_piece(p, &bl);
		old[nold++].size = (uint64_t)st.st_size;
	}
	closedir(dp);
	free(dir);
	if (nold > 0)
		qsort(old, nold, sizeof *old, rotate_old_cmp);
	for (i = 0; i < nold; i++) {
		total += old[i].size;
		if ((c->keep_n > 0 && i < c->keep_n) ||
		    (c->keep_bytes > 0 && total <= c->keep_bytes))
			continue;
		xasprintf(&side, "%s.onfinish", old[i].path);
		if (access(side, F_OK) == 0)
			log_info("%s: kept '%s' beyond --keep: its --on-finish "
			    "command has not succeeded yet", r->label,
			    old[i].path);
		else if (unlink(old[i].path) == -1)
			log_warn("%s: cannot remove '%s' (--keep)", r->label,
			    old[i].path);
		else {
			if (c->keep_n > 0)
				log_info("%s: removed '%s': --keep %u pieces",
				    r->label, old[i].path, c->keep_n);
			else
				log_info("%s: removed '%s': --keep %" PRIu64
				    " bytes of pieces", r->label, old[i].path,
				    c->keep_bytes);
			tally_piece_removed();
		}
		free(side);
	}
	for (i = 0; i < nold; i++)
		free(old[i].path);
	free(old);
}

/* Piece path is in place (size bytes): say so, count it, --keep. */
static void
rotate_done(struct recording *r, const char *path, size_t baselen,
    uint64_t size)
{
	log_info("%s: wrote piece '%s' (%" PRIu64 " bytes)", r->label, path,
	    size);
	tally_piece();
	recording_done(r, path, true);
	rotate_keep(r, path, baselen);
}

void
rotate_last(struct recording *r)
{
	size_t baselen;

	if (rotate_piece(r->path, &baselen) == 0)
		return;
	tally_piece();
	rotate_keep(r, r->path, baselen);
}

/* Free a cut (its writer is the recording's, or freed already). */
static void
rotate_cut_free(struct rotate_cut *job)
{
	if (job == NULL)
		return;
	if (job->ev != NULL)
		event_free(job->ev);
	recording_piece_copy_free(job->pc, false);
	free(job->old);
	free(job->oldstate);
	free(job);
}

/*
 * The end of r's cut: the sections and options are in the next piece's
 * writer (r->file), which takes the place of the piece finished: its
 * lock, its first checkpoint; the piece finished is done (--on-finish,
 * --keep).
 */
static void
rotate_cut_end(struct recording *r, struct rotate_cut *job)
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
	checkpoint_remove(job->oldstate);
	clock_gettime(CLOCK_MONOTONIC, &r->rot->since);
	r->rot->headers = recording_piece_copy_bytes(job->pc);
	rotate_done(r, job->old, job->baselen, job->size);
	log_info("%s: next piece '%s'", r->label, r->path);
}

/*
 * r's cut stopped after its piece was put in place (err: why): the next
 * piece's files go, the piece is done, and r cannot go on
 * (rotate_broken()).
 */
static void
rotate_cut_fail(struct recording *r, struct rotate_cut *job,
    const char *err)
{
	recording_piece_copy_free(job->pc, true);
	job->pc = NULL;
	r->file = NULL;
	rotate_unclaim(r->path);
	checkpoint_remove(job->oldstate);
	rotate_done(r, job->old, job->baselen, job->size);
	free(r->rot->broken);
	r->rot->broken = xstrdup(err);
}

/*
 * Copy on with r's cut until it is done (all: at once, else one step),
 * then end it.  0 while it goes on; 1 when it ended (r->rot->broken: how).
 */
static int
rotate_cut_steps(struct recording *r, bool all)
{
	struct rotate_cut *job = r->rot->job;
	char err[700];
	int ret;

	do {
		ret = recording_piece_copy_step(job->pc);
	} while (ret == 1 && all);
	if (ret == 1)
		return 0;
	r->rot->job = NULL;
	if (ret == -1) {
		recording_piece_copy_why(job->pc, err, sizeof err);
		rotate_cut_fail(r, job, err);
	} else
		rotate_cut_end(r, job);
	rotate_cut_free(job);
	return 1;
}

/*
 * A turn of the loop: the next piece of r's copy, and the turn after for
 * the rest.  When it ends the owner hears it (recording_ready(): it reads
 * its producer again, or closes it), last: r may be gone then.
 */
static void
rotate_step_cb(evutil_socket_t fd, short what, void *arg)
{
	struct recording *r = arg;
	struct timeval now = { 0, 0 };

	if (rotate_cut_steps(r, false) == 0) {
		evtimer_add(r->rot->job->ev, &now);
		return;
	}
	recording_ready(r);
}

bool
rotate_busy(const struct recording *r)
{
	return r->rot != NULL && r->rot->job != NULL;
}

const char *
rotate_broken(const struct recording *r)
{
	return r->rot != NULL ? r->rot->broken : NULL;
}

void
rotate_settle(struct recording *r)
{
	if (rotate_busy(r))
		rotate_cut_steps(r, true);
}

void
rotate_stop(struct recording *r, bool leave)
{
	struct rotate_cut *job;

	if (!rotate_busy(r))
		return;
	job = r->rot->job;
	r->rot->job = NULL;
	if (!leave) {
		rotate_cut_fail(r, job, "the recording ended in a cut");
		rotate_cut_free(job);
		return;
	}
	/*
	 * tdlisten stops: as if it stopped in the cut.  The cut's state and
	 * the piece in place are what the next tdlisten takes up
	 * (rotate_recover()), which begins the next piece again.
	 */
	recording_piece_copy_free(job->pc, true);
	job->pc = NULL;
	r->file = NULL;
	rotate_unclaim(r->path);
	free(r->path);
	free(r->state_path);
	r->path = job->old;
	r->state_path = job->oldstate;
	job->old = job->oldstate = NULL;
	rotate_cut_free(job);
}

int
rotate_check(struct recording *r, bool *sealed, char *err, size_t errlen)
{
	struct rotate_cut *job;
	struct piece_copy *pc;
	struct event_base *base;
	struct timeval now = { 0, 0 };
	char *next, *old, *oldstate, why[160];
	uint64_t size, zero = 0;
	size_t baselen;
	uint32_t n;
	bool cmdlines;
	int e;

	*sealed = false;
	if ((r->cfg->rotate_bytes == 0 && r->cfg->rotate_secs == 0) ||
	    r->file == NULL || rotate_busy(r) ||
	    (n = rotate_piece(r->path, &baselen)) == 0 || !rotate_due(r))
		return 0;
	/* the copy's piece counts in the recording's budget: it waits */
	if (recording_account(r, TD_ROTATE_COPY_CHUNK, why, sizeof why) == -1) {
		log_debug("%s: the cut waits: %s", r->label, why);
		return 0;
	}
	if ((next = rotate_claim(r->cfg, r->path, baselen, n)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot name the piece after '%s': %s",
		    r->path, strerror(e));
		errno = e;
		return -1;
	}
	/*
	 * A checkpoint at the cut first: a crash after the piece is in
	 * place and before the next one's first checkpoint leaves this
	 * state with the piece whole, which rotate_recover() takes up.
	 */
	if (recording_write_state(r) == -1) {
		e = errno;
		snprintf(err, errlen, "cannot write '%s': %s", r->state_path,
		    strerror(e));
		rotate_unclaim(next);
		free(next);
		errno = e;
		return -1;
	}
	r->acked = r->position;
	/*
	 * The agent sends its command lines section at the end: a piece
	 * before that gets the latest set it sent during the recording
	 * (CMDLINES, version 6), else an empty one (its tasks show as
	 * <...>); the next piece does not take this section over.
	 */
	cmdlines = td_file_has_section(r->file, TD_OPT_CMDLINES);
	if ((!cmdlines && (r->rot->ncmd > 0 ? td_file_section_add(r->file,
	    TD_OPT_CMDLINES, r->rot->cmd, r->rot->ncmd) :
	    td_file_section_add(r->file, TD_OPT_CMDLINES, &zero,
	    sizeof zero)) == -1) || rotate_seal(r) == -1) {
		e = errno;
		snprintf(err, errlen, "cannot finish '%s': %s", r->path,
		    strerror(e));
		rotate_unclaim(next);
		free(next);
		errno = e;
		return -1;
	}
	/* the piece is in place: from here on r goes on, or ends */
	*sealed = true;
	size = td_file_size(r->file);
	old = r->path;
	oldstate = r->state_path;
	r->path = next;
	xasprintf(&r->state_path, "%s.state", next);
	td_file_free(r->file);
	r->file = NULL;
	pc = recording_piece_copy_open(r->cfg, old, next, cmdlines,
	    r->no_tsync, r->p.file_trace_id, err, errlen);
	if (pc == NULL) {
		e = errno;
		rotate_unclaim(next);
		checkpoint_remove(oldstate);
		rotate_done(r, old, baselen, size);
		free(old);
		free(oldstate);
		errno = e;
		return -1;
	}
	job = xcalloc(1, sizeof *job);
	job->pc = pc;
	job->old = old;
	job->oldstate = oldstate;
	job->baselen = baselen;
	job->size = size;
	r->file = recording_piece_copy_file(pc);
	r->rot->job = job;
	/* without a loop (fuzz-session) at once, else a piece a turn */
	base = recording_loop();
	if (base == NULL) {
		rotate_cut_steps(r, true);
		if (r->rot->broken == NULL)
			return 0;
		snprintf(err, errlen, "%s", r->rot->broken);
		errno = EIO;
		return -1;
	}
	job->ev = evtimer_new(base, rotate_step_cb, r);
	evtimer_add(job->ev, &now);
	log_debug("%s: cutting: the sections of '%s' go into '%s' a piece "
	    "of %u bytes a turn", r->label, old, next, TD_ROTATE_COPY_CHUNK);
	return 0;
}

/*
 * What a cut that stopped left of the next piece (n after path), which no
 * state describes: its placeholder or the writer's first files.
 */
static void
rotate_scrap(const char *path, size_t baselen, uint32_t n, uint32_t ncpus)
{
	char *p, *f;
	uint32_t i;

	p = rotate_name(path, baselen, n + 1);
	xasprintf(&f, "%s.state", p);
	if (access(f, F_OK) == 0) {
		free(f);
		free(p);
		return;
	}
	free(f);
	rotate_unclaim(p);
	xasprintf(&f, "%s.opts.part", p);
	unlink(f);
	free(f);
	for (i = 0; i < ncpus; i++) {
		xasprintf(&f, "%s.cpu%u.part", p, i);
		unlink(f);
		free(f);
	}
	free(p);
}

/* The state path rotate_recover() made last (output_states() may list it). */
static char *rotate_made;

bool
rotate_recovered(const char *statepath)
{
	return rotate_made != NULL && strcmp(statepath, rotate_made) == 0;
}

char *
rotate_recover(const struct listener_config *c, const char *identity,
    const char *statepath, char **done)
{
	struct checkpoint ck;
	struct td_file *f;
	struct td_read *rd;
	struct td_buf b;
	char *path, *next = NULL, *nstate = NULL, err[600];
	size_t baselen, len;
	uint64_t copied;
	uint32_t n, i;
	bool cmdlines;

	*done = NULL;
	xasprintf(&path, "%.*s", (int)strlen(statepath) - 6, statepath);
	xasprintf(&next, "%s.part", path);
	n = rotate_piece(path, &baselen);
	if (n == 0 || access(next, F_OK) == 0 || access(path, F_OK) == -1) {
		free(next);
		free(path);
		return NULL;
	}
	free(next);
	/* the piece is whole, the next one never began: begin it now */
	memset(&ck, 0, sizeof ck);
	ck.no_file = true;
	ck.ts = timesync_new();
	ck.guests = guests_new(identity, 0, "", "recovered");
	if (checkpoint_read(statepath, &ck, NULL, err, sizeof err) == -1)
		goto out;
	guests_describe(ck.guests, identity, ck.params.file_trace_id,
	    ck.params.clock);
	rotate_scrap(path, baselen, n, ck.params.ncpus);
	/*
	 * Whether the piece's CMDLINES is the producer's (the next piece
	 * takes it over) or the listener's latest set: the state says; one
	 * of before version 6 does not, and the listener wrote none then.
	 */
	cmdlines = ck.cmdlines == 1;
	if (ck.cmdlines == -1 && (rd = td_read_open(path)) != NULL) {
		td_buf_init(&b, TD_MAX_SECTION_SIZE);
		cmdlines = td_read_section(rd, TD_OPT_CMDLINES, &b) == 0 &&
		    (b.len != 8 || memcmp(b.data, "\0\0\0\0\0\0\0\0", 8) != 0);
		td_buf_free(&b);
		td_read_close(rd);
	}
	if ((next = rotate_claim(c, path, baselen, n)) == NULL) {
		snprintf(err, sizeof err, "cannot name the piece after '%s': "
		    "%s", path, strerror(errno));
		goto out;
	}
	/* the recovered recording's piece has no minimum (rotate_due()) */
	if ((f = recording_piece_copy_all(c, path, next, cmdlines, false,
	    ck.params.file_trace_id, &copied, err, sizeof err)) == NULL) {
		rotate_unclaim(next);
		goto out;
	}
	for (i = 0; i < ck.params.ncpus; i++)
		ck.cpu[i].piece_seq = ck.cpu[i].next_seq;
	ck.file = f;
	xasprintf(&nstate, "%s.state", next);
	if (checkpoint_write(nstate, &ck, &len) == -1) {
		snprintf(err, sizeof err, "cannot write '%s': %s", nstate,
		    strerror(errno));
		td_file_abort(f);
		td_file_free(f);
		free(nstate);
		nstate = NULL;
		goto out;
	}
	td_file_release(f);
	checkpoint_remove(statepath);
	log_info("'%s': the piece was in place, the next one begins as '%s'",
	    statepath, next);
	tally_piece();
	*done = path;
	path = NULL;
	free(rotate_made);
	rotate_made = xstrdup(nstate);
out:
	if (nstate == NULL)
		log_warnx("'%s': cannot begin the next piece: %s", statepath,
		    err);
	free(ck.cpu);
	timesync_free(ck.ts);
	guests_free(ck.guests);
	free(next);
	free(path);
	return nstate;
}

void
rotate_free(struct rotate *rot)
{
	if (rot != NULL) {
		free(rot->cmd);
		free(rot->broken);
		/* its writer is the recording's (rotate_stop() first) */
		rotate_cut_free(rot->job);
	}
	free(rot);
}

void
rotate_cleanup(void)
{
	free(rotate_made);
	rotate_made = NULL;
}
