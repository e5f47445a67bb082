/*
 * rotate.c: a recording as a series of pieces (see rotate.h).
 *
 * Why the cut reads the header sections back from the piece it just
 * finished rather than keeping them: kallsyms is megabytes, a recording
 * recovered after a crash of tdlisten has nothing of them in memory, and
 * the finished piece holds exactly the bytes its writer was handed.  The
 * one section held at a time (TD_MAX_SECTION_SIZE at most, a few MiB in
 * practice) is freed before the cut returns.
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

/* A recording's pieces: when the one being written began. */
struct rotate {
	struct timespec	 since;
};

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
	unsigned long long v;
	size_t n = s != NULL ? strlen(s) : 0;
	char *end;

	*bytes = 0;
	*secs = 0;
	if (n > 1 && s[0] >= '0' && s[0] <= '9' &&
	    strchr("smh", s[n - 1]) != NULL) {
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno != 0 || end != s + n - 1)
			goto bad;
		v *= s[n - 1] == 'h' ? 3600 : s[n - 1] == 'm' ? 60 : 1;
		if (v < TD_ROTATE_MIN_SECS || v > TD_ROTATE_MAX_SECS) {
			snprintf(err, errlen, "--rotate '%s': a duration from "
			    "%u s to %u h", s, TD_ROTATE_MIN_SECS,
			    TD_ROTATE_MAX_SECS / 3600);
			return -1;
		}
		*secs = (uint32_t)v;
		return 0;
	}
	if (td_parse_size(s, bytes) == -1)
		goto bad;
	if (*bytes < TD_ROTATE_MIN_SIZE) {
		snprintf(err, errlen, "--rotate '%s': pieces of at least %u "
		    "MiB (each repeats the header sections)", s,
		    TD_ROTATE_MIN_SIZE >> 20);
		*bytes = 0;
		return -1;
	}
	return 0;
bad:
	snprintf(err, errlen, "--rotate '%s': a size (64M, 1G) or a duration "
	    "(30s, 10m, 1h)", s != NULL ? s : "");
	return -1;
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

/* Whether r's piece is due: --rotate's size or span reached, pages in it. */
static bool
rotate_due(struct recording *r)
{
	const struct listener_config *c = r->cfg;
	struct timespec now;
	uint64_t pages = 0;
	int i;

	if (r->rot == NULL) {
		r->rot = xcalloc(1, sizeof *r->rot);
		clock_gettime(CLOCK_MONOTONIC, &r->rot->since);
	}
	if (td_file_in_section(r->file))
		return false;
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_PRINTK; i++)
		if (!td_file_has_section(r->file, i))
			return false;
	for (i = 0; i < (int)r->p.ncpus; i++)
		pages += td_file_cpu_pages(r->file, i);
	if (pages == 0)
		return false;
	if (c->rotate_bytes > 0 && td_file_written(r->file) >= c->rotate_bytes)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return c->rotate_secs > 0 &&
	    now.tv_sec - r->rot->since.tv_sec >= (time_t)c->rotate_secs;
}

/*
 * Claim the name of the next piece after n (a placeholder NAME.part, as
 * output_path() does): a name taken already is passed over.  NULL.
 */
static char *
rotate_claim(const struct recording *r, size_t baselen, uint32_t n)
{
	struct stat st;
	char *p, *part;
	int fd, i;

	for (i = 1; i <= 1000 && n + (uint32_t)i <= TD_ROTATE_MAX_PIECE; i++) {
		p = rotate_name(r->path, baselen, n + (uint32_t)i);
		xasprintf(&part, "%s.part", p);
		fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, r->cfg->file_mode);
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

/* Which options of a finished piece go on into the next: the producer's. */
static int
rotate_option_cb(void *arg, uint16_t id, const void *p, size_t n)
{
	struct recording *r = arg;

	switch (id) {
	case TD_OPT_DONE: case TD_OPT_BUFFER: case TD_OPT_CPUCOUNT:
	case TD_OPT_TIME_SHIFT: case TD_OPT_GUEST: case TD_OPT_TD_TSYNC:
		return 0;	/* the writer's, or the listener's (sealed) */
	case TD_OPT_DATE:
		if (!r->no_tsync)
			return 0;
		break;
	case TD_OPT_TRACEID:
		if (r->p.file_trace_id != 0)
			return 0;
		break;
	default:
		if (id >= TD_OPT_STRINGS && id <= TD_OPT_BUFFER_TEXT)
			return 0;
	}
	return td_file_add_option(r->file, id, p, n) == -1 ? -1 : 0;
}

/*
 * The next piece's writer, at path, with the header sections and the
 * producer's options of the piece finished at old (r->file is the new
 * writer from here on).  -1 with errno and err.
 */
static int
rotate_open_next(struct recording *r, const char *old, const char *path,
    bool cmdlines, char *err, size_t errlen)
{
	struct td_file_params fp = *td_file_get_params(r->file);
	struct td_read *rd;
	struct td_buf b;
	int i, e;

	if ((rd = td_read_open(old)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot read '%s' back: %s", old,
		    strerror(e));
		errno = e;
		return -1;
	}
	td_file_free(r->file);
	if ((r->file = td_file_create(path, &fp)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot create '%s': %s", path,
		    strerror(e));
		td_read_close(rd);
		errno = e;
		return -1;
	}
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (i = TD_OPT_HEADER_INFO; i <= (cmdlines ? TD_OPT_CMDLINES :
	    TD_OPT_PRINTK); i++)
		if (td_read_section(rd, i, &b) == -1 ||
		    td_file_section_add(r->file, i, b.data, b.len) == -1)
			goto out_fail;
	td_buf_free(&b);
	if (td_read_options(rd, rotate_option_cb, r) != 0)
		goto out_fail;
	td_read_close(rd);
	return 0;
out_fail:
	e = errno;
	snprintf(err, errlen, "cannot copy the headers of '%s' into '%s': %s",
	    old, path, strerror(e));
	td_buf_free(&b);
	td_read_close(rd);
	errno = e;
	return -1;
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
	char *next, *old, *oldstate, *part;
	uint64_t size;
	size_t baselen;
	uint64_t zero = 0;
	uint32_t n;
	bool cmdlines;
	int e, fd;

	*sealed = false;
	if ((r->cfg->rotate_bytes == 0 && r->cfg->rotate_secs == 0) ||
	    r->file == NULL || (n = rotate_piece(r->path, &baselen)) == 0 ||
	    !rotate_due(r))
		return 0;
	if ((next = rotate_claim(r, baselen, n)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot name the piece after '%s': %s",
		    r->path, strerror(e));
		errno = e;
		return -1;
	}
	/*
	 * The agent sends its command lines at the end: a piece before
	 * that has none (its tasks show as <...>), and the next does not
	 * take this empty section over.
	 */
	cmdlines = td_file_has_section(r->file, TD_OPT_CMDLINES);
	if ((!cmdlines && td_file_section_add(r->file, TD_OPT_CMDLINES, &zero,
	    sizeof zero) == -1) || rotate_seal(r) == -1) {
		e = errno;
		snprintf(err, errlen, "cannot finish '%s': %s", r->path,
		    strerror(e));
		xasprintf(&part, "%s.part", next);
		unlink(part);
		free(part);
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
	if (rotate_open_next(r, old, next, cmdlines, err, errlen) == -1) {
		e = errno;
		td_file_free(r->file);
		r->file = NULL;
		xasprintf(&part, "%s.part", next);
		unlink(part);
		free(part);
		checkpoint_remove(oldstate);
		rotate_done(r, old, baselen, size);
		free(old);
		free(oldstate);
		errno = e;
		return -1;
	}
	for (n = 0; n < r->p.ncpus; n++)
		r->cpu[n].piece_seq = r->cpu[n].next_seq;
	/* the new piece's lock, then its first checkpoint: the cut's */
	xasprintf(&part, "%s.part", next);
	fd = reclock_take(part);
	free(part);
	reclock_release(r->lockfd);
	r->lockfd = fd;
	if (recording_write_state(r) == 0)
		r->acked = r->position;
	else
		log_warn("%s: cannot write '%s' (the next checkpoint tries "
		    "again)", r->label, r->state_path);
	checkpoint_remove(oldstate);
	clock_gettime(CLOCK_MONOTONIC, &r->rot->since);
	rotate_done(r, old, baselen, size);
	log_info("%s: next piece '%s'", r->label, next);
	free(old);
	free(oldstate);
	return 0;
}

void
rotate_free(struct rotate *rot)
{
	free(rot);
}
