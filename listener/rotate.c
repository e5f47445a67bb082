/*
 * rotate.c: a recording as a series of pieces (see rotate.h).
 *
 * Why the cut reads the header sections back from the piece it just
 * finished rather than keeping them: kallsyms is megabytes, a recording
 * recovered after a crash of tdlisten has nothing of them in memory, and
 * the finished piece holds exactly the bytes its writer was handed.  A
 * section goes over as it is stored (compressed or not), in pieces of
 * TD_ROTATE_COPY_CHUNK counted in the recording's budget (issue 31, row
 * 3: a peer's sections may be 256 MiB each, which compress to nothing).
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
struct rotate {
	struct timespec	 since;
	uint64_t	 headers;
	uint8_t		*cmd;		/* u64 length, then the text */
	size_t		 ncmd;		/* 0: none yet */
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
	return rot == NULL ? 0 : sizeof *rot + rot->ncmd;
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

/* The next piece's writer and which options of the last it takes. */
struct rotate_copy {
	struct td_file	*f;
	bool		 no_tsync;	/* the producer's DATE is kept */
	uint64_t	 file_trace_id;	/* !0: the listener writes TRACEID */
};

/* Which options of a finished piece go on into the next: the producer's. */
static int
rotate_option_cb(void *arg, uint16_t id, const void *p, size_t n)
{
	struct rotate_copy *cp = arg;

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
rotate_params(const struct listener_config *c, struct td_read *rd,
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

/*
 * Copy section id of rd into f, adding its stored bytes to *copied: in
 * pieces of at most TD_ROTATE_COPY_CHUNK through b, never held whole (a
 * peer's sections may be 256 MiB each, issue 31, row 3); a compressed
 * block as it is stored (the same codec: never decompressed).  Only a
 * compressed block the writer cannot take as it is (it does not
 * compress) is read whole (td_read_section()).
 */
static int
rotate_copy_section(struct td_read *rd, struct td_file *f, enum td_opt id,
    struct td_buf *b, uint64_t *copied)
{
	uint64_t off, n, k;
	bool z;

	if (td_read_section_span(rd, id, &off, &n, &z) == -1)
		return -1;
	/* the writer has rd's codec (rotate_params()) */
	if (z && td_file_section_raw_begin(f, id) == -1) {
		if (td_read_section(rd, id, b) == -1 ||
		    td_file_section_add(f, id, b->data, b->len) == -1)
			return -1;
		*copied += b->len;
		return 0;
	}
	if (!z && td_file_section_begin(f, id) == -1)
		return -1;
	td_buf_reset(b);
	if (n > 0 && td_buf_add_zero(b, n < TD_ROTATE_COPY_CHUNK ? n :
	    TD_ROTATE_COPY_CHUNK) == -1)
		return -1;
	while (n > 0) {
		k = n < TD_ROTATE_COPY_CHUNK ? n : TD_ROTATE_COPY_CHUNK;
		if (td_read_bytes(rd, off, b->data, k) == -1 ||
		    (z ? td_file_section_raw_write(f, b->data, k) :
		    td_file_section_write(f, b->data, k)) == -1)
			return -1;
		off += k;
		n -= k;
		*copied += k;
	}
	td_buf_reset(b);
	return z ? td_file_section_raw_end(f) : td_file_section_end(f);
}

/*
 * The next piece's writer at path, with the header sections (*copied:
 * their bytes) and the producer's options of the piece finished at old
 * (cp: which), or NULL with errno and err.  cmdlines: whether its
 * CMDLINES is the producer's (else the next piece waits for it).
 */
static struct td_file *
rotate_open_next(const struct listener_config *c, const char *old,
    const char *path, bool cmdlines, struct rotate_copy *cp,
    uint64_t *copied, char *err, size_t errlen)
{
	struct td_file_params fp;
	struct td_read *rd;
	struct td_buf b;
	int i, e;

	if ((rd = td_read_open(old)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot read '%s' back: %s", old,
		    strerror(e));
		errno = e;
		return NULL;
	}
	rotate_params(c, rd, &fp);
	if ((cp->f = td_file_create(path, &fp)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot create '%s': %s", path,
		    strerror(e));
		td_read_close(rd);
		errno = e;
		return NULL;
	}
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	*copied = 0;
	for (i = TD_OPT_HEADER_INFO; i <= (cmdlines ? TD_OPT_CMDLINES :
	    TD_OPT_PRINTK); i++) {
		if (rotate_copy_section(rd, cp->f, i, &b, copied) == -1)
			goto out_fail;
	}
	td_buf_free(&b);
	if (td_read_options(rd, rotate_option_cb, cp) != 0)
		goto out_fail;
	td_read_close(rd);
	return cp->f;
out_fail:
	e = errno;
	snprintf(err, errlen, "cannot copy the headers of '%s' into '%s': %s",
	    old, path, strerror(e));
	td_buf_free(&b);
	td_read_close(rd);
	td_file_abort(cp->f);
	td_file_free(cp->f);
	cp->f = NULL;
	errno = e;
	return NULL;
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

int
rotate_check(struct recording *r, bool *sealed, char *err, size_t errlen)
{
	struct rotate_copy cp;
	char *next, *old, *oldstate, *part, why[160];
	uint64_t size, zero = 0, copied = 0;
	size_t baselen;
	uint32_t n;
	bool cmdlines;
	int e, fd;

	*sealed = false;
	if ((r->cfg->rotate_bytes == 0 && r->cfg->rotate_secs == 0) ||
	    r->file == NULL || (n = rotate_piece(r->path, &baselen)) == 0 ||
	    !rotate_due(r))
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
	memset(&cp, 0, sizeof cp);
	cp.no_tsync = r->no_tsync;
	cp.file_trace_id = r->p.file_trace_id;
	td_file_free(r->file);
	r->file = rotate_open_next(r->cfg, old, next, cmdlines, &cp, &copied,
	    err, errlen);
	if (r->file == NULL) {
		e = errno;
		rotate_unclaim(next);
		checkpoint_remove(oldstate);
		rotate_done(r, old, baselen, size);
		free(old);
		free(oldstate);
		errno = e;
		return -1;
	}
	for (n = 0; n < r->p.ncpus; n++)
		r->cpu[n].piece_seq = r->cpu[n].next_seq;
	/* the new piece's lock, then its first checkpoint */
	xasprintf(&part, "%s.part", next);
	fd = reclock_take(part);
	free(part);
	reclock_release(r->lockfd);
	r->lockfd = fd;
	if (recording_write_state(r) == -1)
		log_warn("%s: cannot write '%s' (the next checkpoint tries "
		    "again)", r->label, r->state_path);
	checkpoint_remove(oldstate);
	clock_gettime(CLOCK_MONOTONIC, &r->rot->since);
	r->rot->headers = copied;
	rotate_done(r, old, baselen, size);
	log_info("%s: next piece '%s'", r->label, next);
	free(old);
	free(oldstate);
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
	struct rotate_copy cp;
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
	memset(&cp, 0, sizeof cp);
	cp.file_trace_id = ck.params.file_trace_id;
	/* the recovered recording's piece has no minimum (rotate_due()) */
	if (rotate_open_next(c, path, next, cmdlines, &cp, &copied, err,
	    sizeof err) == NULL) {
		rotate_unclaim(next);
		goto out;
	}
	for (i = 0; i < ck.params.ncpus; i++)
		ck.cpu[i].piece_seq = ck.cpu[i].next_seq;
	ck.file = cp.f;
	xasprintf(&nstate, "%s.state", next);
	if (checkpoint_write(nstate, &ck, &len) == -1) {
		snprintf(err, sizeof err, "cannot write '%s': %s", nstate,
		    strerror(errno));
		td_file_abort(cp.f);
		td_file_free(cp.f);
		free(nstate);
		nstate = NULL;
		goto out;
	}
	td_file_release(cp.f);
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
	if (rot != NULL)
		free(rot->cmd);
	free(rot);
}

void
rotate_cleanup(void)
{
	free(rotate_made);
	rotate_made = NULL;
}
